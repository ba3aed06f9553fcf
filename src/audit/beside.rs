//! Another tool's saved result beside a goodput run of the same workload (`goodput compare
//! THEIRS.json BUNDLE`): each metric the result states, with the definition each tool gives
//! it, goodput's figure by its own definition, and goodput's records recomputed with the other
//! tool's definition, so a difference of definition is told apart from a difference of
//! measurement. Only the recomputed figure is judged against theirs, within a stated
//! tolerance.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;

use crate::analyze::request_metrics;
use crate::contract::{LatencyOrigin, LoadModel};
use crate::plan::Phase;
use crate::record::Record;
use crate::stats::Dist;

/// What a metric is, by definition (the same definition under different names: vLLM's TPOT
/// and AIPerf's ITL are both `PerRequestGap`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Kind {
    /// Send → first token.
    Ttft,
    /// (E2E − TTFT) / (output tokens − 1), one value per request.
    PerRequestGap,
    /// E2E / output tokens, one value per request (the first token's wait included).
    TpotWithFirst,
    /// Every gap between consecutive chunks, pooled over requests, a chunk counted as one.
    ChunkGap,
    /// Send → last token.
    E2e,
    /// Completed requests per second of the whole benchmark.
    RequestsPerS,
    /// Output tokens per second of the whole benchmark.
    OutputTokensPerS,
    /// Input tokens per request, as the tool counted them.
    InputTokens,
    /// Output tokens per request, as the tool counted them.
    OutputTokens,
    /// Requests completed.
    Completed,
}

/// A statistic of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
    /// A single figure (a count, a rate).
    Value,
}

impl Stat {
    fn of(self, d: &Dist) -> f64 {
        match self {
            Stat::Mean | Stat::Value => d.mean,
            Stat::P50 => d.p50,
            Stat::P90 => d.p90,
            Stat::P99 => d.p99,
        }
    }
    fn word(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "median",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Value => "",
        }
    }
}

/// One figure the other tool's result states: its name there, its kind, the statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct Stated {
    pub name: &'static str,
    pub kind: Kind,
    pub stat: Stat,
    pub value: f64,
}

/// What a peer format's reader says of one result, for the side-by-side.
#[derive(Debug, Clone, Default)]
pub struct Statement {
    pub figures: Vec<Stated>,
    /// Figures the result has that are not finite, non-negative numbers, by field (`NaN`).
    pub left_out: Vec<String>,
    /// The settings the result records, to hold against the run's contract: (what, value).
    pub load: Vec<(&'static str, String)>,
    /// Settings the result has that are absurd, negative, non-finite or of the wrong type:
    /// the workload cannot be known to be the same.
    pub unreadable: Vec<String>,
    /// Which of several benchmarks in the file was taken, when it held several.
    pub picked: Option<String>,
    /// The tool's duration starts one arrival gap before its first send (vLLM: its clock
    /// starts, then it waits the first gap), so its throughput divides by that gap too.
    pub lead_gap: bool,
}

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
    pub agrees: Option<bool>,
}

/// The side-by-side.
#[derive(Debug, Clone, Serialize)]
pub struct Beside {
    pub theirs: PathBuf,
    pub format: String,
    pub ours: PathBuf,
    pub tolerance: f64,
    pub picked: Option<String>,
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
    let steady: Vec<&Record> = loaded
        .records
        .iter()
        .filter(|r| r.phase == Phase::Steady)
        .collect();
    let open = c.load.kind == Some(LoadModel::Open);
    // An open loop's throughput is its schedule's: n Poisson arrivals span a time whose
    // relative standard deviation is 1/√n, so two runs' throughputs differ by that much
    // without any difference in the server.
    let ok = steady.iter().filter(|r| r.is_ok()).count().max(1) as f64;
    let draw = 2.0 / ok.sqrt();
    let lead_s = match (statement.lead_gap, c.load.rate) {
        (true, Some(r)) if open && r > 0.0 => 1.0 / r,
        _ => 0.0,
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
            let ours_by_theirs = recompute(&steady, c, f.kind, lead_s).map(|d| f.stat.of(&d));
            let diff = ours_by_theirs
                .filter(|_| f.value.abs() > 1e-9)
                .map(|o| (o - f.value) / f.value);
            Row {
                metric: label(f),
                theirs: f.value,
                ours_by_theirs,
                ours: own(&loaded.summary.steady, f.kind, f.stat),
                diff,
                within,
                agrees: diff.map(|d| d.abs() <= within),
            }
        })
        .collect();
    let mut definitions: Vec<(String, String, String)> = Vec::new();
    for f in &statement.figures {
        if !definitions.iter().any(|(n, _, _)| n == f.name) {
            let (t, o) = definition(f.kind, c.measurement.latency_origin, statement.lead_gap);
            definitions.push((f.name.to_owned(), t.to_owned(), o));
        }
    }
    Ok(Beside {
        theirs: theirs.to_owned(),
        format: peer.name().to_owned(),
        ours: ours.to_owned(),
        tolerance,
        picked: statement.picked.clone(),
        definitions,
        differs: differs(&statement, c, Some(steady.len())),
        left_out: statement.left_out.clone(),
        explained: explain(&statement, &rows_of(&rows), open.then_some((ok, draw))),
        rows,
    })
}

/// Another tool's result file: its JSON, and the format of [`super::peers::PEERS`] that reads
/// it.
fn read_peer(path: &Path) -> anyhow::Result<(Value, &'static dyn super::peers::PeerFormat)> {
    let text = crate::text::read_capped_string(path, super::MAX_PEER_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    let v = super::peer_value(path, &text)?;
    match super::peers::PEERS.iter().find(|p| p.recognises(&v)) {
        Some(p) => Ok((v, *p)),
        None => bail!(
            "{}: not a result goodput reads; expected {}",
            path.display(),
            super::peers::expected()
        ),
    }
}

/// What the result states, or an error naming the file when its format states nothing
/// goodput can put beside a run.
fn stated(
    path: &Path,
    v: &Value,
    peer: &dyn super::peers::PeerFormat,
    c: &crate::contract::Contract,
) -> anyhow::Result<Statement> {
    let st = peer.stated(v, c).with_context(|| {
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
fn definition(k: Kind, origin: LatencyOrigin, lead_gap: bool) -> (&'static str, String) {
    let from = origin.phrase();
    match k {
        Kind::Ttft => (
            "from each request's actual send to its first token",
            format!("from {from}; recomputed from the actual send"),
        ),
        Kind::PerRequestGap => (
            "(E2E − TTFT) / (output tokens − 1), per request",
            "goodput's TPOT: (E2E − TTFT) / the tokens after the first chunk (equal when each chunk carries one token)".into(),
        ),
        Kind::TpotWithFirst => (
            "E2E / output tokens, per request: the first token's wait included",
            "goodput's TPOT: (E2E − TTFT) / the tokens after the first chunk; recomputed as E2E / tokens".into(),
        ),
        Kind::ChunkGap => (
            "every gap between chunks, pooled, a chunk counted as one token",
            "goodput's ITL per token: each gap shared among its chunk's tokens; recomputed per chunk".into(),
        ),
        Kind::E2e => (
            "from each request's actual send to its last token",
            format!("from {from}; recomputed from the actual send"),
        ),
        Kind::RequestsPerS | Kind::OutputTokensPerS if lead_gap => (
            if k == Kind::RequestsPerS {
                "completed requests / the benchmark's duration, from its start (one arrival gap before the first send) to the last answer; vLLM scales its drawn gaps so the last request leaves at exactly num_prompts / rate, so this is near the rate by construction"
            } else {
                "output tokens / the benchmark's duration, from its start (one arrival gap before the first send) to the last answer"
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
    }
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

/// goodput's steady records, recomputed with the other tool's definition of a kind.
fn recompute(
    steady: &[&Record],
    c: &crate::contract::Contract,
    k: Kind,
    lead_s: f64,
) -> Option<Dist> {
    let source = c.measurement.output_tokens;
    let ok: Vec<&Record> = steady.iter().copied().filter(|r| r.is_ok()).collect();
    let per = |f: &dyn Fn(&crate::analyze::RequestMetrics) -> Option<f64>| {
        Dist::of(
            ok.iter()
                .filter_map(|r| f(&request_metrics(r, LatencyOrigin::Sent, source)))
                .collect(),
        )
    };
    let span_s = || {
        let first = ok.iter().filter_map(|r| r.sent_us).min()?;
        let last = ok.iter().filter_map(|r| r.end_us).max()?;
        (last > first).then(|| (last - first) as f64 / 1e6 + lead_s)
    };
    let one = |x: f64| Dist::of(vec![x]);
    match k {
        Kind::Ttft => per(&|m| m.ttft_ms()),
        Kind::E2e => per(&|m| m.e2e_ms()),
        Kind::PerRequestGap => per(&|m| {
            let n = f64::from(m.output_tokens);
            (n > 1.0).then_some(())?;
            Some((m.e2e_ms()? - m.ttft_ms()?) / (n - 1.0))
        }),
        Kind::TpotWithFirst => per(&|m| {
            let n = f64::from(m.output_tokens);
            (n > 0.0).then_some(())?;
            Some(m.e2e_ms()? / n)
        }),
        Kind::ChunkGap => Dist::of(
            ok.iter()
                .flat_map(|r| {
                    let times: Vec<u64> = r.chunks.iter().map(|(at, _)| at).collect();
                    times
                        .windows(2)
                        .map(|w| w[1].saturating_sub(w[0]) as f64 / 1e3)
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
        Kind::RequestsPerS => one(ok.len() as f64 / span_s()?),
        Kind::OutputTokensPerS => {
            let tokens: f64 = ok
                .iter()
                .map(|r| f64::from(request_metrics(r, LatencyOrigin::Sent, source).output_tokens))
                .sum();
            one(tokens / span_s()?)
        }
        Kind::InputTokens => Dist::of(
            ok.iter()
                .filter_map(|r| r.usage_prompt_tokens.map(f64::from))
                .collect(),
        ),
        Kind::OutputTokens => per(&|m| Some(f64::from(m.output_tokens))),
        Kind::Completed => one(ok.len() as f64),
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
                    match (r.agrees, r.within > self.tolerance) {
                        (Some(true), false) => "agrees".into(),
                        (Some(true), true) => format!("agrees (±{:.0}%)", r.within * 100.0),
                        (Some(false), _) => "DIFFERS".into(),
                        (None, _) => "–".into(),
                    },
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
                "verdict",
            ],
            rows,
        );
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
        let differing = self.rows.iter().filter(|r| r.agrees == Some(false)).count();
        d.toned(
            crate::report::Tone::warn_if(differing > 0),
            format!(
                "Agrees: goodput's records, recomputed with their definition, within ±{}% of their figure (--tolerance); {differing} of {} figures differ by more. A tail (p99) rests on few requests and moves most between runs.",
                (self.tolerance * 1000.0).round() / 10.0,
                self.rows.len()
            ),
        );
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
