//! Another tool's saved result beside a goodput run of the same workload (`goodput compare
//! THEIRS.json BUNDLE`): each metric the result states, with the definition each tool gives
//! it, goodput's figure by its own definition, and goodput's records recomputed with the other
//! tool's definition, so a difference of definition is told apart from a difference of
//! measurement. Only the recomputed figure is judged against theirs, within a stated
//! tolerance.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;

use crate::analyze::request_metrics;
use crate::contract::{LatencyOrigin, LoadModel, TokenSource};
use crate::plan::Phase;
use crate::record::Record;
use crate::stats::Dist;

mod ours;

use super::statement::{Events, Kind, Samples, Stat, Stated, Statement};

/// How a row reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the band it is judged in (the tolerance, or a throughput's schedule draw).
    Agrees,
    /// Outside it, but the 95% interval of the difference reaches into it: the two sides'
    /// own request-to-request spread covers the gap.
    WithinNoise,
    /// Outside it, and (where both sides kept per-request values) the whole interval is too.
    Differs,
    /// Outside it, and no interval to judge by though both sides kept their requests: one of
    /// the runs emptied its queue too seldom ([`MIN_PERIODS`]) for its requests to say how
    /// another run would go.
    CannotTell,
    /// A percentile neither side's sample supports at the contract's confidence (the claim
    /// rule of `run` and `compare`, [`crate::analyze::claims::supports_percentile`]): the
    /// difference is shown, nothing is claimed.
    NoClaim,
    /// Nothing to judge (no figure of ours, or theirs is 0).
    Unjudged,
}

/// The fewest busy periods a side needs for its requests to estimate a row's noise: fewer,
/// and the run is one or a few long queues whose latency depends on the whole draw.
pub const MIN_PERIODS: usize = 8;

/// One row of the side-by-side.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "TTFT median, ms".
    pub metric: String,
    pub theirs: f64,
    /// goodput's records, recomputed with the other tool's definition.
    pub ours_by_theirs: Option<f64>,
    /// goodput's own figure, by its own definition.
    pub ours: Option<f64>,
    /// (ours_by_theirs − theirs) / theirs.
    pub diff: Option<f64>,
    /// The relative band it was judged within: the tolerance, or wider where the figure is
    /// the open-loop schedule's own draw (a throughput).
    pub within: f64,
    /// `diff` within `within`.
    pub agrees: Option<bool>,
    /// The 95% interval of `diff` (regenerative bootstrap over both sides' busy periods,
    /// [`crate::stats::regenerative_ci`]), when both sides kept per-request values.
    pub noise: Option<[f64; 2]>,
    pub verdict: Verdict,
    /// Why it reads as it does, where that is known (the offered loads differ, their TTFT ends
    /// at a role-only chunk, only point values to judge).
    pub reason: Option<String>,
}

/// The load each side offered: the rate its requests were sent at, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Offered {
    pub theirs_rps: f64,
    pub ours_rps: f64,
    /// (ours − theirs) / theirs.
    pub diff: f64,
    /// Two standard deviations of that difference from the arrivals' own draw (a Poisson
    /// count's: 2·√(1/n₁ + 1/n₂)).
    pub band: f64,
    pub differs: bool,
    /// The rate their result says their command asked for, req/s, when it says one.
    pub their_nominal_rps: Option<f64>,
    /// Their tool's arrival rule is one goodput reproduces (`load.pin_total`: vLLM's).
    pub reproducible: bool,
    /// How many of their requests the sent rate is measured over.
    pub their_count: usize,
}

impl Offered {
    /// How far their sent rate is from the rate their own command asked for, when that is
    /// further than the draw of their arrivals alone allows (2·√(1/n)): their client did not
    /// keep its schedule, or drew it otherwise than it says.
    pub fn theirs_off_nominal(&self) -> Option<f64> {
        let nominal = self.their_nominal_rps.filter(|r| *r > 0.0)?;
        let off = (self.theirs_rps - nominal) / nominal;
        (off.abs() > 2.0 / (self.their_count.max(1) as f64).sqrt()).then_some(off)
    }
}

/// The side-by-side.
#[derive(Debug, Clone, Serialize)]
pub struct Beside {
    pub theirs: PathBuf,
    pub format: String,
    pub ours: PathBuf,
    pub tolerance: f64,
    pub picked: Option<String>,
    /// Which events their client counts as tokens' arrivals.
    pub events: Events,
    pub offered: Option<Offered>,
    /// How often each run's queue emptied (busy periods: theirs, when they kept their
    /// requests' times, and ours), which the noise resamples.
    pub busy_periods: (Option<usize>, usize),
    pub rows: Vec<Row>,
    /// Per kind present: (metric, their definition, goodput's).
    pub definitions: Vec<(String, String, String)>,
    /// Settings of their run that differ from the contract of ours.
    pub differs: Vec<String>,
    /// Differences a row alone does not explain: their token counts, the schedule's draw.
    pub explained: Vec<String>,
    /// Their figures that are not numbers (NaN, negative, text), left out of the table.
    pub left_out: Vec<String>,
}

/// Reads `theirs` (a peer tool's result) and the bundle `ours`, and puts them side by side.
pub fn beside(theirs: &Path, ours: &Path, tolerance: f64) -> anyhow::Result<Beside> {
    let (v, peer) = read_peer(theirs)?;
    let loaded =
        crate::bundle::Bundle::load(ours).with_context(|| format!("loading {}", ours.display()))?;
    let statement = stated(theirs, &v, peer, &loaded.contract)?;
    let c = &loaded.contract;
    let mut steady: Vec<&Record> = loaded
        .records
        .iter()
        .filter(|r| r.phase == Phase::Steady)
        .collect();
    steady.sort_by_key(|r| r.sent_us.unwrap_or(u64::MAX));
    let ok: Vec<&Record> = steady.iter().copied().filter(|r| r.is_ok()).collect();
    let open = c.load.kind == Some(LoadModel::Open);
    // An open loop's throughput is its schedule's: n Poisson arrivals span a time whose
    // relative standard deviation is 1/√n, so two runs' throughputs differ by that much
    // without any difference in the server.
    let n_ok = ok.len().max(1) as f64;
    let draw = 2.0 / n_ok.sqrt();
    let lead_s = match (statement.lead_gap, c.load.rate) {
        (true, Some(r)) if open && r > 0.0 => 1.0 / r,
        _ => 0.0,
    };
    let kept = loaded.command.records.choice_events;
    let events = statement.events;
    let offered = offered(&statement, &steady);
    let source = c.measurement.output_tokens;
    let (their_cuts, our_cuts) = busy(&statement, &ok);
    let side = Sides {
        ok: &ok,
        source,
        events,
        lead_s,
        cuts: (&their_cuts, &our_cuts),
        samples: &statement.samples,
        support: (
            their_count(&statement),
            ok.len() as u64,
            c.measurement.confidence,
        ),
    };
    let rows: Vec<Row> = statement
        .figures
        .iter()
        .map(|f| {
            let scheduled = open && matches!(f.kind, Kind::RequestsPerS | Kind::OutputTokensPerS);
            let within = if scheduled {
                tolerance.max(draw)
            } else {
                tolerance
            };
            let mut row = side.row(f, within);
            row.ours = own(&loaded.summary.steady, f.kind, f.stat);
            row
        })
        .collect();
    let definitions = definitions(&statement, c.measurement.latency_origin);
    let mut b = Beside {
        theirs: theirs.to_owned(),
        format: peer.name().to_owned(),
        ours: ours.to_owned(),
        tolerance,
        picked: statement.picked.clone(),
        events,
        offered,
        busy_periods: (
            (!statement.samples.is_empty()).then_some(their_cuts.len()),
            our_cuts.len(),
        ),
        definitions,
        differs: differs(&statement, c, Some(steady.len())),
        left_out: statement.left_out.clone(),
        explained: explain(&statement, &rows_of(&rows), open.then_some((n_ok, draw))),
        rows,
    };
    b.reasons(&statement, &ok, kept);
    Ok(b)
}

/// Per metric their result states, once: (its name, their definition, goodput's).
fn definitions(st: &Statement, origin: LatencyOrigin) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for f in &st.figures {
        if !out.iter().any(|(n, _, _)| n == f.name) {
            let (t, o) = definition(f.kind, origin, st);
            out.push((f.name.to_owned(), t, o));
        }
    }
    out
}

/// The requests their result says completed, when it says.
fn their_count(st: &Statement) -> Option<u64> {
    st.figures
        .iter()
        .find(|f| f.kind == Kind::Completed)
        .map(|f| f.value as u64)
}

/// Where each side's busy periods start (theirs, ours): theirs from the send and end times
/// their file kept, each request one period when it kept none.
fn busy(st: &Statement, ok: &[&Record]) -> (Vec<usize>, Vec<usize>) {
    let spans: Vec<(f64, f64)> = ok
        .iter()
        .filter_map(|r| Some((r.sent_us? as f64, r.end_us? as f64)))
        .collect();
    let theirs = match st.sample_spans.is_empty() {
        true => (0..st.samples.first().map_or(0, |(_, u)| u.len())).collect(),
        false => crate::stats::busy_periods(&st.sample_spans),
    };
    (theirs, crate::stats::busy_periods(&spans))
}

/// Both sides' requests, as a row's figure and noise need them.
struct Sides<'a> {
    /// goodput's successful steady requests, in the order sent.
    ok: &'a [&'a Record],
    source: TokenSource,
    events: Events,
    lead_s: f64,
    /// Where each side's busy periods start: theirs, ours.
    cuts: (&'a [usize], &'a [usize]),
    samples: &'a Samples,
    /// Requests each side measured (theirs where their result says), and the confidence a
    /// percentile's claim needs.
    support: (Option<u64>, u64, f64),
}

impl Sides<'_> {
    /// The row of their figure `f`, judged within `within` (goodput's own figure left out).
    fn row(&self, f: &Stated, within: f64) -> Row {
        let our_units = ours::units(self.ok, self.source, f.kind, self.events);
        let ours_by_theirs = match &our_units {
            Some(u) => Dist::of(u.iter().flatten().copied().collect()),
            None => recompute(self.ok, self.source, f.kind, self.lead_s),
        }
        .map(|d| f.stat.of(&d));
        let diff = ours_by_theirs
            .filter(|_| f.value.abs() > 1e-9)
            .map(|o| (o - f.value) / f.value);
        let their_units = self
            .samples
            .iter()
            .find(|(k, _)| *k == f.kind)
            .map(|(_, u)| u);
        // A request's token count does not depend on the queue it met: lengths are resampled
        // request by request; latencies by busy period, whose requests share their waits.
        let length = matches!(f.kind, Kind::InputTokens | Kind::OutputTokens);
        let each = |u: &Vec<Vec<f64>>| Cow::Owned((0..u.len()).collect::<Vec<usize>>());
        let noise = match (&our_units, their_units, diff) {
            (Some(o), Some(t), Some(_)) => {
                let stat = f.stat;
                let (tc, oc) = match length {
                    true => (each(t), each(o)),
                    false => (Cow::Borrowed(self.cuts.0), Cow::Borrowed(self.cuts.1)),
                };
                crate::stats::regenerative_ci(
                    (t, &tc),
                    (o, &oc),
                    &move |v| stat.of_values(v),
                    MIN_PERIODS,
                )
                .map(|[lo, hi]| [lo / f.value, hi / f.value])
            }
            _ => None,
        };
        let one_queue = their_units.is_some() && our_units.is_some() && noise.is_none();
        let unsupported = self.unsupported(f);
        let verdict = match judge(diff, within, noise) {
            Verdict::Unjudged => Verdict::Unjudged,
            _ if unsupported.is_some() => Verdict::NoClaim,
            Verdict::Differs if one_queue => Verdict::CannotTell,
            v => v,
        };
        Row {
            metric: label(f),
            theirs: f.value,
            ours_by_theirs,
            ours: None,
            diff,
            within,
            agrees: diff.map(|d| d.abs() <= within),
            noise,
            verdict,
            reason: unsupported,
        }
    }

    /// Why a percentile row claims nothing, when its sample is too small on either side.
    fn unsupported(&self, f: &Stated) -> Option<String> {
        let p = match f.stat {
            Stat::P50 => 50.0,
            Stat::P90 => 90.0,
            Stat::P99 => 99.0,
            Stat::Mean | Stat::Value => return None,
        };
        let (theirs, ours, confidence) = self.support;
        let have: Vec<u64> = theirs.into_iter().chain([ours]).collect();
        let supported = have
            .iter()
            .all(|n| crate::analyze::claims::supports_percentile(*n, p, confidence));
        (!supported).then(|| crate::analyze::claims::unsupported_words(p, &have, confidence))
    }
}

/// A row's verdict: within its band, else within the noise when the interval of the
/// difference reaches into the band, else differs.
fn judge(diff: Option<f64>, within: f64, noise: Option<[f64; 2]>) -> Verdict {
    match (diff, noise) {
        (None, _) => Verdict::Unjudged,
        (Some(d), _) if d.abs() <= within => Verdict::Agrees,
        (Some(_), Some([lo, hi])) if lo <= within && hi >= -within => Verdict::WithinNoise,
        _ => Verdict::Differs,
    }
}

/// The rate each side sent at, when theirs is known: theirs as their file measured it, ours
/// over the steady requests' sends.
fn offered(st: &Statement, steady: &[&Record]) -> Option<Offered> {
    let (theirs_rps, n_theirs) = st.sent_rps?;
    let sent: Vec<u64> = steady.iter().filter_map(|r| r.sent_us).collect();
    let (first, last) = (*sent.first()?, *sent.last()?);
    (sent.len() > 1 && last > first).then_some(())?;
    let ours_rps = (sent.len() - 1) as f64 / ((last - first) as f64 / 1e6);
    let diff = (ours_rps - theirs_rps) / theirs_rps;
    let band = 2.0 * (1.0 / n_theirs as f64 + 1.0 / sent.len() as f64).sqrt();
    let their_nominal_rps = st
        .load
        .iter()
        .find(|(what, _)| *what == "rate")
        .and_then(|(_, r)| r.parse().ok());
    Some(Offered {
        theirs_rps,
        ours_rps,
        diff,
        band,
        differs: diff.abs() > band,
        their_nominal_rps,
        reproducible: st.pinned_total,
        their_count: n_theirs,
    })
}

impl Beside {
    /// What the verdicts mean, and how many of each.
    fn footer(&self, d: &mut crate::report::Doc) {
        let count = |v: Verdict| self.rows.iter().filter(|r| r.verdict == v).count();
        let differing = count(Verdict::Differs);
        d.toned(
            crate::report::Tone::warn_if(differing > 0),
            format!(
                "Agrees: goodput's records, recomputed with their definition, within ±{}% of their figure (--tolerance). Within noise: further off, but the 95% interval of the difference (a regenerative bootstrap over both sides' busy periods, where both kept their requests) reaches into that band. {} agree, {} within noise, {differing} differ, {} claim nothing (too few requests for the percentile, or too few busy periods to judge), of {} figures.",
                (self.tolerance * 1000.0).round() / 10.0,
                count(Verdict::Agrees),
                count(Verdict::WithinNoise),
                count(Verdict::NoClaim) + count(Verdict::CannotTell),
                self.rows.len()
            ),
        );
    }

    /// The load each side offered, above the table.
    fn offered_lines(&self, d: &mut crate::report::Doc) {
        if let Some(o) = &self.offered {
            let says = format!(
                "Offered load: theirs sent {} req/s, ours {} ({:+.1}%; the arrivals' own draw spans ±{:.0}%).",
                crate::report::num(o.theirs_rps),
                crate::report::num(o.ours_rps),
                o.diff * 100.0,
                o.band * 100.0
            );
            let advice = match (o.theirs_off_nominal(), o.their_nominal_rps) {
                (Some(off), Some(nominal)) => format!(
                    " Their client sent {:+.0}% off the {} req/s its command asked for, beyond its arrivals' own draw: their figures are of another load than their command names, and goodput, which keeps its schedule, cannot offer the same.",
                    off * 100.0,
                    crate::report::num(nominal)
                ),
                _ if o.reproducible => " load.pin_total = true draws vLLM's arrivals (`goodput import vllm-bench` sets it).".into(),
                _ => String::new(),
            };
            match o.differs {
                true => d.warn(format!(
                    "{says} The loads differ: a row that differs may say more of the load than of either tool.{advice}"
                )),
                false => d.line(says),
            }
        }
    }

    /// Each reason once, after the rows it explains.
    fn reason_lines(&self, d: &mut crate::report::Doc) {
        let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
        for r in &self.rows {
            let Some(why) = r.reason.as_deref() else {
                continue;
            };
            let row = format!("{} ({})", r.metric, self.verdict_words(r));
            match reasons.iter_mut().find(|(w, _)| *w == why) {
                Some((_, rows)) => rows.push(row),
                None => reasons.push((why, vec![row])),
            }
        }
        for (why, rows) in reasons {
            d.line(format!("{}: {why}.", rows.join(", ")));
        }
    }

    /// A row's verdict in the table's words.
    fn verdict_words(&self, r: &Row) -> String {
        match r.verdict {
            Verdict::Agrees if r.within > self.tolerance => {
                format!("agrees (±{:.0}%)", r.within * 100.0)
            }
            Verdict::Agrees => "agrees".into(),
            Verdict::WithinNoise => "within noise".into(),
            Verdict::Differs => "DIFFERS".into(),
            Verdict::CannotTell => "cannot tell".into(),
            Verdict::NoClaim => "no claim: sample too small".into(),
            Verdict::Unjudged => "–".into(),
        }
    }

    /// Each row's reason, where one is known.
    fn reasons(&mut self, st: &Statement, ok: &[&Record], kept: bool) {
        let latency = |k: Kind| {
            matches!(
                k,
                Kind::Ttft | Kind::E2e | Kind::PerRequestGap | Kind::TpotWithFirst | Kind::ChunkGap
            )
        };
        let timing = |k: Kind| latency(k) && k != Kind::TpotWithFirst;
        let lead = ours::role_lead(ok).filter(|(lead, ttft)| *lead > 1.0 && *lead > 0.1 * ttft);
        // Prompt tokens the server says it served from its cache, of all, over our requests:
        // a cold run when under 5%.
        let cold = {
            let (cached, prompt) = ok.iter().fold((0u64, 0u64), |(c, p), r| {
                match (r.usage_cached_tokens, r.usage_prompt_tokens) {
                    (Some(x), Some(y)) => (c + u64::from(x), p + u64::from(y)),
                    _ => (c, p),
                }
            });
            (prompt > 0 && (cached as f64) < 0.05 * prompt as f64).then_some((cached, prompt))
        };
        let no_samples = st.samples.is_empty();
        for (row, f) in self.rows.iter_mut().zip(&st.figures) {
            let mut why: Vec<String> = row.reason.take().into_iter().collect();
            let off = row.verdict == Verdict::Differs;
            let throughput = matches!(f.kind, Kind::RequestsPerS | Kind::OutputTokensPerS);
            if off
                && (latency(f.kind) || throughput)
                && let Some(o) = self.offered.as_ref().filter(|o| o.differs)
            {
                why.push(format!(
                    "the offered loads differ (theirs {} req/s, ours {})",
                    crate::report::num(o.theirs_rps),
                    crate::report::num(o.ours_rps)
                ));
            }
            if off && f.kind == Kind::InputTokens {
                why.push(
                    "their prompts are not the length ours are: another workload, so every latency row compares other requests (a tool that builds its prompts with a tokenizer other than the server's counts other tokens; the server's count is what it served)".into(),
                );
            }
            if f.kind == Kind::Ttft
                && st.events == Events::Choices
                && let Some((lead, _)) = lead
            {
                why.push(format!(
                    "their TTFT ends at the role-only chunk, which this server sends {} ms before the first token (median), before its prefill",
                    crate::report::num(lead)
                ));
            }
            if off
                && matches!(f.kind, Kind::Ttft | Kind::E2e)
                && row.diff.is_some_and(|d| d > 0.0)
                && let Some((cached, prompt)) = cold
            {
                why.push(format!(
                    "goodput's prompts met a cold cache ({cached} of {prompt} prompt tokens served from the server's cache: a per-run nonce), and theirs may not have: vllm bench sends the same prompts for one --seed, so a run after another of that seed on one server finds them cached"
                ));
            }
            if st.events == Events::Choices && !kept && timing(f.kind) {
                why.push(
                    "this bundle predates goodput keeping role-only and finish chunks: recomputed from text chunks alone".into(),
                );
            }
            if row.verdict == Verdict::CannotTell {
                why.push(format!(
                    "the queue emptied {} times in their run and {} in ours, and a row's noise needs {MIN_PERIODS} a side: a run that is one long queue says little of how the next goes (fewer requests in flight: a lower rate)",
                    self.busy_periods.0.map_or("an unknown number of".into(), |n| n.to_string()),
                    self.busy_periods.1
                ));
            }
            if no_samples && latency(f.kind) && row.verdict != Verdict::Unjudged {
                why.push(
                    "judged on point values alone: their file keeps no per-request values".into(),
                );
            }
            row.reason = (!why.is_empty()).then(|| why.join("; "));
        }
    }
}

/// Another tool's result file: its JSON, and the format of [`super::PEERS`] that reads
/// it.
fn read_peer(path: &Path) -> anyhow::Result<(Value, &'static dyn super::PeerFormat)> {
    let text = crate::text::read_capped_string(path, super::MAX_PEER_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    let v = super::peer_value(path, &text)?;
    match super::PEERS.iter().find(|p| p.recognises(&v)) {
        Some(p) => Ok((v, *p)),
        None => bail!(
            "{}: not a result goodput reads; expected {}",
            path.display(),
            super::expected()
        ),
    }
}

/// What the result states, or an error naming the file when its format states nothing
/// goodput can put beside a run.
fn stated(
    path: &Path,
    v: &Value,
    peer: &dyn super::PeerFormat,
    c: &crate::contract::Contract,
) -> anyhow::Result<Statement> {
    let mut st = peer.stated(v, c).with_context(|| {
        format!(
            "{}: a {} has no figures goodput can put beside a run",
            path.display(),
            peer.name()
        )
    })?;
    if st.figures.is_empty() {
        bail!(
            "{}: a {} with no figure that is a number{}: nothing to put beside a run",
            path.display(),
            peer.name(),
            match st.left_out.is_empty() {
                true => String::new(),
                false => format!(" ({})", first_few(&st.left_out)),
            }
        );
    }
    peer.per_request(path, &mut st)?;
    Ok(st)
}

/// The first few of a list, and how many more.
fn first_few(xs: &[String]) -> String {
    match xs.len() {
        0..=4 => xs.join(", "),
        n => format!("{}, and {} more", xs[..4].join(", "), n - 4),
    }
}

/// (kind, theirs, ours by their definition) of each figure, for `explain`.
fn rows_of(rows: &[Row]) -> Vec<(String, f64, Option<f64>)> {
    rows.iter()
        .map(|r| (r.metric.clone(), r.theirs, r.ours_by_theirs))
        .collect()
}

/// What explains the differences: output tokens counted differently (every per-token figure
/// divides by another count), and an open loop's throughput being its schedule's draw.
fn explain(
    st: &Statement,
    rows: &[(String, f64, Option<f64>)],
    open: Option<(f64, f64)>,
) -> Vec<String> {
    let mut out = Vec::new();
    let tokens = st
        .figures
        .iter()
        .zip(rows)
        .find(|(f, _)| f.kind == Kind::OutputTokens)
        .and_then(|(f, (_, theirs, ours))| Some((f.name, *theirs, (*ours)?)));
    if let Some((name, theirs, ours)) = tokens
        && theirs > 1.0
        && ours > 1.0
        && ((theirs - ours) / ours).abs() > 0.02
    {
        let mut line = format!(
            "Their {name} per request ({}) is not the server's count ({}): they counted with their own tokenizer, so each per-token figure divides by another number of tokens.",
            crate::report::num(theirs),
            crate::report::num(ours)
        );
        for (f, (metric, t, o)) in st.figures.iter().zip(rows) {
            let Some(o) = o else { continue };
            let scaled = match f.kind {
                Kind::PerRequestGap if f.stat == Stat::Mean || f.stat == Stat::P50 => {
                    o * (ours - 1.0) / (theirs - 1.0)
                }
                Kind::TpotWithFirst if f.stat == Stat::Mean || f.stat == Stat::P50 => {
                    o * ours / theirs
                }
                Kind::OutputTokensPerS => o * theirs / ours,
                _ => continue,
            };
            line.push_str(&format!(
                " {metric}: ours counted as they count, {} against their {}.",
                crate::report::num(scaled),
                crate::report::num(*t)
            ));
        }
        out.push(line);
    }
    if !st.samples.is_empty() && st.sample_spans.is_empty() {
        out.push("Their file keeps per-request values but not when each was sent (start_times): its requests are resampled one by one, which understates the noise of a run whose requests queued.".into());
    }
    if let Some((n, draw)) = open {
        out.push(format!(
            "An open loop's throughput is its schedule's: {} Poisson arrivals span a time that varies by ±{:.0}% (2σ) from one draw to the next, so the throughput rows are judged within that band when it is wider than --tolerance.",
            n,
            draw * 100.0
        ));
    }
    out
}

fn label(f: &Stated) -> String {
    let unit = match f.kind {
        Kind::RequestsPerS => "req/s",
        Kind::OutputTokensPerS => "tokens/s",
        Kind::InputTokens | Kind::OutputTokens => "tokens",
        Kind::Completed => "requests",
        _ => "ms",
    };
    match f.stat.word() {
        "" => format!("{} ({unit})", f.name),
        w => format!("{} {w} ({unit})", f.name),
    }
}

/// The two definitions of a kind: the other tool's, and goodput's figure in the "ours"
/// column.
fn definition(k: Kind, origin: LatencyOrigin, st: &Statement) -> (String, String) {
    let from = origin.phrase();
    let choices = st.events == Events::Choices;
    let (theirs, ours): (&str, String) = match k {
        Kind::Ttft if choices => (
            "from each request's actual send to its first event with a choice, a role-only chunk included",
            format!("from {from} to the first chunk with text; recomputed from the actual send to the first event with a choice"),
        ),
        Kind::Ttft => (
            "from each request's actual send to its first token",
            format!("from {from}; recomputed from the actual send"),
        ),
        Kind::PerRequestGap if choices => (
            "(E2E − TTFT) / (output tokens − 1), per request, both ends at events with a choice",
            "goodput's TPOT: (E2E − TTFT) / the tokens after the first chunk (equal when each chunk carries one token); recomputed between the first and last events with a choice".into(),
        ),
        Kind::PerRequestGap => (
            "(E2E − TTFT) / (output tokens − 1), per request",
            "goodput's TPOT: (E2E − TTFT) / the tokens after the first chunk (equal when each chunk carries one token)".into(),
        ),
        Kind::TpotWithFirst => (
            "E2E / output tokens, per request: the first token's wait included",
            "goodput's TPOT: (E2E − TTFT) / the tokens after the first chunk; recomputed as E2E / tokens".into(),
        ),
        Kind::ChunkGap if choices => (
            "every gap between events with a choice, pooled, a role-only or finish chunk with no text included",
            "goodput's ITL per token: each gap shared among its chunk's tokens; recomputed between every event with a choice".into(),
        ),
        Kind::ChunkGap => (
            "every gap between chunks, pooled, a chunk counted as one token",
            "goodput's ITL per token: each gap shared among its chunk's tokens; recomputed per chunk".into(),
        ),
        Kind::E2e if choices => (
            "from each request's actual send to its last event with a choice (the usage chunk after it not counted)",
            format!("from {from} to the end of the stream; recomputed from the actual send to the last event with a choice"),
        ),
        Kind::E2e => (
            "from each request's actual send to its last token",
            format!("from {from}; recomputed from the actual send"),
        ),
        Kind::RequestsPerS | Kind::OutputTokensPerS if st.lead_gap => (
            match (k, st.pinned_total) {
                (Kind::RequestsPerS, true) => "completed requests / the benchmark's duration, from its start (one arrival gap before the first send) to the last answer; vLLM scales its drawn gaps so the last request leaves at exactly num_prompts / rate, so this is near the rate by construction",
                (Kind::RequestsPerS, false) => "completed requests / the benchmark's duration, from its start (one arrival gap before the first send) to the last answer",
                _ => "output tokens / the benchmark's duration, from its start (one arrival gap before the first send) to the last answer",
            },
            "over the steady window; recomputed over one mean gap before the first send to the last answer".into(),
        ),
        Kind::RequestsPerS => (
            "completed requests / the benchmark's duration (first send to last answer)",
            "achieved over the steady window; recomputed over the steady requests' first send to last answer".into(),
        ),
        Kind::OutputTokensPerS => (
            "output tokens / the benchmark's duration",
            "over the steady window; recomputed over the steady requests' first send to last answer".into(),
        ),
        Kind::InputTokens | Kind::OutputTokens => (
            "counted by the tool (its tokenizer, or the server's usage)",
            "the server's usage where it reports it, else goodput's count".into(),
        ),
        Kind::Completed => (
            "requests that succeeded",
            "steady requests that succeeded (warm-up apart)".into(),
        ),
    };
    (theirs.to_owned(), ours)
}

/// goodput's own figure for a kind, from the summary.
fn own(s: &crate::analyze::Steady, k: Kind, stat: Stat) -> Option<f64> {
    let d = |x: &Option<Dist>| x.as_ref().map(|d| stat.of(d));
    match k {
        Kind::Ttft => d(&s.stats.ttft_ms),
        Kind::PerRequestGap | Kind::TpotWithFirst => d(&s.stats.tpot_ms),
        Kind::ChunkGap => d(&s.stats.itl_token_ms).or(d(&s.stats.itl_ms)),
        Kind::E2e => d(&s.stats.e2e_ms),
        Kind::RequestsPerS => s.throughput.achieved_rps,
        Kind::OutputTokensPerS => s.throughput.output_tokens_per_s,
        Kind::InputTokens => d(&s.stats.input_tokens),
        Kind::OutputTokens => d(&s.stats.output_tokens),
        Kind::Completed => Some(s.stats.ok as f64),
    }
}

/// goodput's successful steady records' figure of a kind that is not per request (a
/// throughput, a count), by the other tool's definition: over the first send to the last
/// answer, `lead_s` before it included where their clock starts one gap early.
fn recompute(ok: &[&Record], source: TokenSource, k: Kind, lead_s: f64) -> Option<Dist> {
    let span_s = || {
        let first = ok.iter().filter_map(|r| r.sent_us).min()?;
        let last = ok.iter().filter_map(|r| r.end_us).max()?;
        (last > first).then(|| (last - first) as f64 / 1e6 + lead_s)
    };
    let one = |x: f64| Dist::of(vec![x]);
    match k {
        Kind::RequestsPerS => one(ok.len() as f64 / span_s()?),
        Kind::OutputTokensPerS => {
            let tokens: f64 = ok
                .iter()
                .map(|r| f64::from(request_metrics(r, LatencyOrigin::Sent, source).output_tokens))
                .sum();
            one(tokens / span_s()?)
        }
        Kind::Completed => one(ok.len() as f64),
        _ => None,
    }
}

/// Settings their result records that the run's contract does not share (`steady`: the run's
/// steady requests, else the contract's planned count).
pub fn differs(
    st: &Statement,
    c: &crate::contract::Contract,
    steady: Option<usize>,
) -> Vec<String> {
    let mut out = st.unreadable.clone();
    for (what, theirs) in &st.load {
        let ours = match *what {
            "model" => c.target.model.clone(),
            "requests" => steady
                .map(|n| n as u64)
                .or(c.load.requests)
                .map(|n| n.to_string()),
            "rate" => match c.load.kind {
                Some(LoadModel::Open) => c.load.rate.map(crate::report::num),
                _ => Some("inf".into()),
            },
            "concurrency" => match c.load.kind {
                Some(LoadModel::Closed) => c.load.concurrency.map(|n| n.to_string()),
                _ => None,
            },
            _ => None,
        };
        let same = match (
            theirs.parse::<f64>(),
            ours.as_deref().map(str::parse::<f64>),
        ) {
            (Ok(a), Some(Ok(b))) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            _ => ours.as_deref() == Some(theirs.as_str()),
        };
        if !same {
            out.push(format!(
                "{what}: theirs {theirs}, ours {}",
                ours.as_deref().unwrap_or("not set")
            ));
        }
    }
    out
}

impl Beside {
    /// The side-by-side as a document: their settings that differ, the table, the
    /// definitions, and what "agrees" means.
    pub fn document(&self) -> crate::report::Doc {
        let mut d = crate::report::Doc::default();
        d.h("goodput compare: another tool's result beside a goodput run");
        d.line(format!(
            "Theirs: {} ({}{}). Ours: {}.",
            self.theirs.display(),
            self.format,
            self.picked
                .as_ref()
                .map_or(String::new(), |p| format!(", {p}")),
            self.ours.display()
        ));
        if self.differs.is_empty() {
            d.line("Their recorded settings match this run's contract.");
        } else {
            d.warn(format!(
                "NOT THE SAME WORKLOAD: {}. The figures below are directional only.",
                self.differs.join("; ")
            ));
        }
        self.offered_lines(&mut d);
        let n = |x: Option<f64>| x.map_or("–".to_owned(), crate::report::num);
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.metric.clone(),
                    crate::report::num(r.theirs),
                    n(r.ours_by_theirs),
                    n(r.ours),
                    r.diff.map_or("–".into(), |x| format!("{:+.1}%", x * 100.0)),
                    r.noise.map_or("–".into(), |[lo, hi]| {
                        format!("{:+.0}% … {:+.0}%", lo * 100.0, hi * 100.0)
                    }),
                    self.verdict_words(r),
                ]
            })
            .collect();
        d.table(
            &[
                "metric",
                "theirs",
                "ours, their definition",
                "ours, goodput's definition",
                "ours − theirs",
                "95% interval",
                "verdict",
            ],
            rows,
        );
        self.reason_lines(&mut d);
        if !self.left_out.is_empty() {
            d.warn(format!(
                "Their figures that are not numbers, left out of the table: {}.",
                self.left_out.join(", ")
            ));
        }
        for e in &self.explained {
            d.line(e.clone());
        }
        d.h("Definitions");
        for (name, theirs, ours) in &self.definitions {
            d.line(format!("{name}: theirs {theirs}; ours {ours}."));
        }
        self.footer(&mut d);
        d
    }
}

/// Reads another tool's result for `goodput import --result`: its format's name, and the
/// settings it records that the imported contract does not share.
pub fn check_result(
    path: &Path,
    c: &crate::contract::Contract,
) -> anyhow::Result<(String, Vec<String>)> {
    let (v, peer) = read_peer(path)?;
    let st = stated(path, &v, peer, c)?;
    let mut out = differs(&st, c, None);
    if !st.left_out.is_empty() {
        out.push(format!(
            "figures that are not numbers: {}",
            first_few(&st.left_out)
        ));
    }
    Ok((peer.name().to_owned(), out))
}
