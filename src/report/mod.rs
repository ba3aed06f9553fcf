//! Reports: renderers from a [`Summary`] to text. The content is built once as a [`Doc`]
//! (headings, lines, tables, figures); the output formats (`format/`: terminal, Markdown,
//! HTML, JSON) only lay it out (text formats skip figures). Nothing here writes files. The
//! summary alone makes the text reports; `html`'s figures also need the records it is handed
//! and, for the requested length distributions, the contract's inputs (drawn again from the
//! seed by `plan::requested_lengths`).

pub(crate) mod format;
pub(crate) mod html;
mod spans;
pub(crate) mod svg;
mod tasks;
mod tools;

use crate::analyze::classes::Standing;
use crate::analyze::{Dist, PhaseStats, Summary};

/// A report in neutral form.
#[derive(Debug, Default)]
pub struct Doc {
    pub(crate) blocks: Vec<Block>,
}

#[derive(Debug)]
pub(crate) enum Block {
    Heading(String),
    Line(String, Tone),
    Table {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// A figure: its title, SVG and legend (HTML only). Consecutive figures share a grid.
    Figure(String),
    /// A piece of page (the verdict banner and tiles; HTML only).
    Html(String),
}

/// How a line reads: plain, or a finding every reader must see (the HTML format marks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Warn,
}

impl Tone {
    /// `Warn` when `bad`.
    pub fn warn_if(bad: bool) -> Tone {
        if bad { Tone::Warn } else { Tone::Plain }
    }
}

impl Doc {
    pub fn h(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Heading(s.into()));
    }
    pub fn line(&mut self, s: impl Into<String>) {
        self.toned(Tone::Plain, s);
    }
    /// A finding every reader must see.
    pub fn warn(&mut self, s: impl Into<String>) {
        self.toned(Tone::Warn, s);
    }
    pub fn toned(&mut self, tone: Tone, s: impl Into<String>) {
        self.blocks.push(Block::Line(s.into(), tone));
    }
    pub fn figure(&mut self, svg: String) {
        self.blocks.push(Block::Figure(svg));
    }
    /// A piece of HTML page (skipped by the text formats).
    pub fn raw_html(&mut self, html: String) {
        self.blocks.push(Block::Html(html));
    }

    pub fn table(&mut self, head: &[&str], rows: Vec<Vec<String>>) {
        self.blocks.push(Block::Table {
            head: head.iter().map(|s| (*s).to_owned()).collect(),
            rows,
        });
    }

    /// Aligned plain text for a terminal (figures left out).
    pub fn terminal(&self) -> String {
        format::terminal::doc(self)
    }

    /// GitHub-flavoured Markdown (for `report.md` and pull requests; figures left out).
    pub fn markdown(&self) -> String {
        format::markdown::doc(self)
    }

    /// The body of an HTML page (headings, paragraphs, tables, inline SVG figures).
    pub fn html(&self) -> String {
        format::html::doc(self)
    }
}

/// The top of `report.html` for `s`: its verdict banner and headline tiles.
pub fn html_verdicts(s: &Summary) -> String {
    html::verdicts(s)
}

/// Columns a terminal report's lines are wrapped to.
pub const WIDTH: usize = 100;

/// `text` broken at spaces into lines of at most `width` columns (a longer word stands on a
/// line of its own), continuation lines indented by two spaces.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut col = 0;
    for word in text.split(' ') {
        let w = word.chars().count();
        if col > 0 && col + 1 + w > width {
            out.push_str("\n  ");
            col = 2;
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
    }
    out
}

pub fn num(x: f64) -> String {
    if !x.is_finite() {
        "—".to_owned()
    } else if x.abs() >= 1e15 {
        // No figure of a run is this large; a file's absurd value is shown in a sane width.
        format!("{x:.3e}")
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("—".to_owned(), num)
}

fn dist_row(name: &str, d: &Option<Dist>) -> Option<Vec<String>> {
    let d = d.as_ref()?;
    Some(vec![
        name.to_owned(),
        d.count.to_string(),
        num(d.mean),
        num(d.p50),
        num(d.p90),
        num(d.p95),
        num(d.p99),
        num(d.p99_9),
        num(d.max),
    ])
}

/// One line that states what the result is: contract, load model, size, quality, and its two
/// verdicts, each named (validity: can its claims be trusted; comparability: are the facts it
/// depends on stated).
pub fn headline(s: &Summary) -> String {
    let warm = s.phases.get("warmup").map_or(0, |p| p.requests);
    let steady = match &s.steady.sessions {
        Some(ss) => format!(
            "{} steady sessions, {} requests",
            ss.sessions, s.steady.stats.requests
        ),
        None => format!("{} steady requests", s.steady.stats.requests),
    };
    format!(
        "{} · {} · {steady} ({} warm-up excluded) · {} · validity {} · {}",
        s.contract,
        s.load,
        warm,
        quality_line(s),
        s.validity.verdict,
        s.grade.verdict
    )
}

/// The quality figure that stands beside the speed figures.
pub fn quality_line(s: &Summary) -> String {
    match &s.quality {
        None => "quality unchecked".into(),
        Some(q) => match &q.reference {
            Some(r) => format!(
                "reference score {:.3} ({:?}, {} scored)",
                r.mean, r.scoring, r.scored
            ),
            None if q.probes > 0 => format!(
                "quality: {} outputs kept, {} probes for consistency",
                q.outputs, q.probes
            ),
            None => format!("quality: {} outputs kept for consistency", q.outputs),
        },
    }
}

/// The whole report, every detail (HTML, Markdown, `--verbose`).
pub fn document(s: &Summary) -> Doc {
    document_at(s, true)
}

/// The report in the order people read it: what was measured, the verdicts with their first
/// reason, the SLO and throughput, the server's latency, the client's schedule in one line,
/// then the rest. `verbose` adds the contract card (fingerprints), the length tables, the
/// confidence intervals, each percentile's support and the dispatch lag split.
pub fn document_at(s: &Summary, verbose: bool) -> Doc {
    let mut d = Doc::default();
    verdicts(&mut d, s, verbose);
    segments(&mut d, s);
    edge(&mut d, s);
    stages(&mut d, s);
    slo_and_throughput(&mut d, s);
    classes(&mut d, s);
    steady_table(&mut d, s, verbose);
    shards(&mut d, s);
    replicas(&mut d, s);
    sessions(&mut d, s);
    tasks::section(&mut d, s);
    spans::section(&mut d, s);
    prefix_reuse(&mut d, s);
    images(&mut d, s);
    tools::section(&mut d, s);
    tools::speculative(&mut d, s);
    details(&mut d, s, verbose);
    failures_and_start(&mut d, s);
    phases(&mut d, s);
    server_metrics(&mut d, s);
    efficiency(&mut d, s);
    predictions(&mut d, s);
    validity_details(&mut d, s);
    d
}

fn verdicts(d: &mut Doc, s: &Summary, verbose: bool) {
    d.h(format!("goodput · {}", s.contract));
    d.line(headline(s));
    if let Some(t) = &s.target {
        d.line(format!("Target: {}", t.describe()));
    }
    for w in &s.warnings {
        d.warn(format!("WARNING: {w}"));
    }
    let v = &s.validity;
    let claims = claims_of(v);
    d.toned(
        Tone::warn_if(!v.reasons.is_empty()),
        match v.reasons.split_first() {
            None => format!("Validity: VALID for {claims}."),
            Some((first, rest)) => format!(
                "Validity: INVALID for {claims}: {first}{}",
                if rest.is_empty() {
                    ".".to_owned()
                } else {
                    format!(" (and {} more reasons, below).", rest.len())
                }
            ),
        },
    );
    let g = &s.grade;
    d.line(if g.missing.is_empty() {
        "Comparability: comparable (every fact the result depends on is stated).".to_owned()
    } else {
        let names: Vec<&str> = g
            .missing
            .iter()
            .map(|m| m.split(':').next().unwrap_or(m))
            .collect();
        format!("Comparability: directional: {}.", names.join("; "))
    });
    if verbose {
        d.line(format!(
            "Contract card ({}): the axes this result depends on",
            s.grade.verdict
        ));
        let f = &s.fingerprints;
        d.table(
            &["axis", "fingerprint"],
            vec![
                vec!["target".into(), f.target.clone()],
                vec!["workload".into(), f.workload.clone()],
                vec!["load".into(), f.load.clone()],
                vec!["slo".into(), f.slo.clone()],
                vec!["measurement".into(), f.measurement.clone()],
                vec!["quality".into(), f.quality.clone()],
            ],
        );
        for m in &s.grade.missing {
            d.warn(format!("- missing: {m}"));
        }
    }
}

/// A metric's value at the SLO percentile: the number, or "failed" when the percentile falls
/// on failed requests (which count as misses).
fn slo_value(m: &crate::analyze::SloMetric, unit: &str) -> String {
    match m.value_ms {
        Some(v) => format!("{}{unit}", num(v)),
        None if m.misses > 0 => "failed".to_owned(),
        None => "—".to_owned(),
    }
}

/// An SLO metric whose percentile falls on a failed request (it has no value: a failure is a
/// miss of every threshold), in words that say what failed: "TTFT p99 is a failed request (3
/// of 20 failed or over 500 ms)".
fn failed_words(m: &crate::analyze::SloMetric, percentile: f64, unit: &str) -> String {
    format!(
        "{} {} is a failed request ({} of {} failed or over {}{unit})",
        m.metric.to_uppercase(),
        crate::analyze::claims::pname(percentile),
        m.misses,
        m.requests,
        num(m.threshold_ms)
    )
}

/// Each SLO metric at its percentile against its threshold, in words: "TTFT p99 114 ms ≤ 300 ms
/// ✓", with "(indicated)" when the sample does not settle it at the contract's confidence
/// (`unit` after each number; empty where a table's heading gives it).
fn slo_metrics(slo: &crate::analyze::SloResult, unit: &str) -> Vec<String> {
    slo.per_metric
        .iter()
        .map(|m| {
            if m.value_ms.is_none() && m.misses > 0 {
                return format!("{} ✗", failed_words(m, slo.percentile, unit));
            }
            format!(
                "{} {} {} ≤ {}{unit} {}{}",
                m.metric.to_uppercase(),
                crate::analyze::claims::pname(slo.percentile),
                slo_value(m, unit),
                num(m.threshold_ms),
                if m.pass { "✓" } else { "✗" },
                if m.verdict.settled() || slo.per_metric.iter().all(|x| x.verdict == m.verdict) {
                    ""
                } else {
                    " (indicated)"
                }
            )
        })
        .collect()
}

/// Why an SLO result fails, in words: its first missed threshold, else its attainment short of
/// its target, each with how strongly the sample says so; `None` when neither misses.
pub fn slo_miss(slo: &crate::analyze::SloResult) -> Option<String> {
    let how = |v: crate::analyze::SloVerdict| {
        if v.settled() {
            format!(
                ", conclusive at {}",
                crate::analyze::claims::percent(slo.confidence)
            )
        } else {
            ", not conclusive".to_owned()
        }
    };
    if let Some(m) = slo.per_metric.iter().find(|m| !m.pass) {
        if m.value_ms.is_none() && m.misses > 0 {
            return Some(format!(
                "{}{}",
                failed_words(m, slo.percentile, " ms"),
                how(m.verdict)
            ));
        }
        return Some(format!(
            "{} {} {} > {} ms{}",
            m.metric.to_uppercase(),
            crate::analyze::claims::pname(slo.percentile),
            slo_value(m, " ms"),
            num(m.threshold_ms),
            how(m.verdict)
        ));
    }
    (slo.attainment < slo.attainment_target).then(|| {
        format!(
            "attainment {:.1}% < {:.0}%{}",
            slo.attainment * 100.0,
            slo.attainment_target * 100.0,
            how(slo.attainment_verdict)
        )
    })
}

/// The SLO's verdict in words for a report's first lines: "met, supported at 99% confidence",
/// "met, not yet supported at 99% confidence (TTFT p99 needs 459 requests, has 200)", "NOT met,
/// conclusive …"; an INVALID run's pass is not supported whatever its sample.
pub fn slo_verdict_words(slo: &crate::analyze::SloResult, valid: bool) -> String {
    use crate::analyze::SloVerdict;
    match (slo.verdict, valid) {
        (SloVerdict::Met | SloVerdict::MetIndicated, false) => {
            "met, but not supported (the run is INVALID)".to_owned()
        }
        (SloVerdict::MetIndicated, true) => format!(
            "{} ({})",
            slo.verdict.words(slo.confidence),
            slo.not_yet().unwrap_or_default()
        ),
        (v, _) => v.words(slo.confidence),
    }
}

/// The strongest claims the steady sample supports, one line: "Supported at 99% confidence:
/// TTFT p99 ≤ 236 ms (point 202 ms), TPOT p99 ≤ 44.2 ms (point 40.2 ms)".
pub(crate) fn claims_line(s: &Summary) -> Option<String> {
    let cl = &s.steady.claims;
    if cl.is_empty() {
        return None;
    }
    let conf =
        crate::analyze::claims::percent(s.steady.slo.as_ref().map_or(0.99, |x| x.confidence));
    Some(format!(
        "Supported at {conf} confidence: {}",
        crate::analyze::claims::claims_words(cl, |x| format!("{} ms", num(x)))
    ))
}

/// Why a class does not pass: how it misses its SLO, else why its pass is not yet supported.
pub fn class_fails(k: &crate::analyze::classes::ClassResult) -> Option<String> {
    let slo = k.slo.as_ref()?;
    if !slo.pass {
        return slo_miss(slo);
    }
    slo.not_yet()
        .map(|w| format!("met, not yet supported: {w}"))
}

fn slo_and_throughput(d: &mut Doc, s: &Summary) {
    let st = &s.steady;
    let valid = s.validity.is_valid();
    if let Some(slo) = &st.slo {
        let parts = slo_metrics(slo, " ms");
        let cancelled = if slo.cancelled > 0 {
            format!(
                " over {} requests ({} in flight when the run was stopped left out)",
                slo.counted, slo.cancelled
            )
        } else {
            String::new()
        };
        if let Some(classes) = &s.classes {
            let each: Vec<String> = classes
                .iter()
                .map(|k| {
                    format!(
                        "{} {}",
                        k.name,
                        match k.standing() {
                            Standing::NoSlo => "no SLO",
                            Standing::Meets => "met ✓",
                            Standing::Indicated => "met, not yet supported",
                            Standing::Misses => "NOT met ✗",
                        }
                    )
                })
                .collect();
            d.toned(
                Tone::warn_if(!slo.pass || !valid),
                format!(
                    "SLO {} (each class by its own, below): {}; attainment {:.1}%{cancelled} of all requests, each judged by its class's SLO; goodput {} req/s",
                    match (slo.verdict, valid) {
                        (crate::analyze::SloVerdict::Met, true) => format!(
                            "met by every class, supported at {} confidence",
                            crate::analyze::claims::percent(slo.confidence)
                        ),
                        (crate::analyze::SloVerdict::MetIndicated, true) => {
                            "met by every class, not yet supported by every class".to_owned()
                        }
                        (_, valid) => slo_verdict_words(slo, valid),
                    },
                    each.join(", "),
                    slo.attainment * 100.0,
                    opt(slo.goodput_rps)
                ),
            );
        } else {
            d.toned(
                Tone::warn_if(!slo.pass || !valid),
                format!(
                    "SLO {}: {}; attainment {:.1}%{cancelled}{right} (target {:.0}%); goodput {} req/s",
                    slo_verdict_words(slo, valid),
                    parts.join(", "),
                    slo.attainment * 100.0,
                    slo.attainment_target * 100.0,
                    opt(slo.goodput_rps),
                    right = if st.tools.as_ref().is_some_and(|t| t.counted_in_slo) {
                        " on time with correct tool calls"
                    } else {
                        ""
                    },
                ),
            );
        }
    } else if st.tasks.as_ref().is_none_or(|t| t.slo_ms.is_none()) {
        d.line("No SLO in the contract: goodput is undefined.");
    }
    tasks::headline(d, s);
    spans::headline(d, s);
    if let Some(l) = claims_line(s) {
        d.line(l);
    }
    d.line(throughput_line(s));
}

/// The steady window's rates, and whether the open loop kept up (the validity's judgement, as
/// the page's tile shows it).
fn throughput_line(s: &Summary) -> String {
    let st = &s.steady;
    let t = &st.throughput;
    let kept = match s.validity.kept_up {
        Some(true) => ", kept up",
        Some(false) => ", not kept up (see validity)",
        None => "",
    };
    format!(
        "Throughput: offered {} req/s, achieved {} req/s{kept}, input {} tok/s, output {} tok/s (steady window {:.1} s)",
        opt(t.offered_rps),
        opt(t.achieved_rps),
        opt(t.input_tokens_per_s),
        opt(t.output_tokens_per_s),
        st.window_s
    )
}

fn steady_table(d: &mut Doc, s: &Summary, verbose: bool) {
    let st = &s.steady;
    let v = &s.validity;
    d.h(format!(
        "Steady state (ms, latency from {})",
        s.latency_origin.phrase()
    ));
    let head = HEAD;
    // The server's latencies; the client's own schedule is one line below (its split with
    // `--verbose`).
    let rows = [
        ("TTFT", &st.stats.ttft_ms, false),
        // With reasoning: the first answer token, and the answer's own TPOT.
        ("TTFO (answer)", &st.stats.ttfo_ms, false),
        ("TPOT", &st.stats.tpot_ms, false),
        ("TPOT (answer)", &st.stats.tpot_answer_ms, false),
        ("ITL per chunk", &st.stats.itl_ms, false),
        ("ITL per token", &st.stats.itl_token_ms, false),
        ("E2E", &st.stats.e2e_ms, false),
        ("dispatch lag", &st.stats.dispatch_lag_ms, true),
        ("  woke late", &st.stats.dispatch_wake_ms, true),
        ("  runtime wait", &st.stats.dispatch_queue_ms, true),
        ("input tokens", &st.stats.input_tokens, false),
        ("output tokens", &st.stats.output_tokens, false),
        ("  reasoning", &st.stats.reasoning_tokens, false),
    ]
    .iter()
    .filter(|(_, _, client)| verbose || !client)
    .filter_map(|(n, v, _)| dist_row(n, v))
    .collect();
    d.table(&head, rows);
    // What each row rests on, when failures make them differ: no row hides a failure.
    let cancelled = st.errors.get("interrupted").copied().unwrap_or(0);
    let failed = st.stats.failed - cancelled;
    if failed > 0 {
        d.warn(format!(
            "TTFT rests on the {} requests that produced a first token, failed ones included; TPOT, ITL and E2E on the {} that succeeded. The {failed} failed requests count as misses in the SLO's figures (Failures, below).",
            st.stats.ttft_ms.as_ref().map_or(0, |t| t.count),
            st.stats.ok
        ));
    }
    if let Some(lag) = &st.stats.dispatch_lag_ms {
        d.toned(
            Tone::warn_if(v.client_behind),
            match (v.max_dispatch_lag_ms, v.client_behind) {
                (Some(max), false) => format!(
                    "Client schedule: kept, dispatch lag p99 {} ms ≤ {} ms ✓",
                    num(lag.p99),
                    num(max)
                ),
                (Some(max), true) => format!(
                    "Client schedule: FELL BEHIND, dispatch lag p99 {} ms > {} ms ✗ (see Validity)",
                    num(lag.p99),
                    num(max)
                ),
                (None, _) => format!("Client schedule: dispatch lag p99 {} ms", num(lag.p99)),
            },
        );
    }
}

fn details(d: &mut Doc, s: &Summary, verbose: bool) {
    let st = &s.steady;
    let head = HEAD;
    let l = &st.lengths;
    if verbose && l.input.sent.is_some() {
        d.line(format!(
            "Token lengths: requested (the contract's distribution: its n is draws or the file's values, not requests), sent and server-reported; counted by {}.",
            l.counted_by
        ));
        let rows = [
            ("input requested", &l.input.requested),
            ("input sent", &l.input.sent),
            ("input reported", &l.input.reported),
            ("  added by server", &l.input_added),
            ("input cached", &l.input_cached),
            ("output requested", &l.output.requested),
            ("output sent", &l.output.sent),
            ("output reported", &l.output.reported),
        ]
        .iter()
        .filter_map(|(n, v)| dist_row(n, v))
        .collect();
        d.table(&head, rows);
    }
    for (name, dist) in [
        ("TTFT", &st.stats.ttft_ms),
        ("TPOT", &st.stats.tpot_ms),
        ("E2E", &st.stats.e2e_ms),
    ] {
        if let Some(x) = dist.as_ref().filter(|_| verbose) {
            let vals = [x.p50, x.p90, x.p95, x.p99, x.p99_9];
            let parts: Vec<String> = crate::analyze::PERCENTILES
                .iter()
                .zip(vals.iter().zip(&x.ci95))
                .map(|((_, label), (v, ci))| match ci {
                    Some([lo, hi]) => format!("{label} = {} [{}, {}]", num(*v), num(*lo), num(*hi)),
                    None => format!("{label} = {} [too few requests]", num(*v)),
                })
                .collect();
            d.line(format!("{name} 95% CI: {}", parts.join(" · ")));
        }
    }
    if verbose {
        d.line(
            st.support
                .iter()
                .map(|x| {
                    format!(
                        "{} rests on {} (needs ≥{})",
                        x.percentile, x.requests, x.needed
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
}

/// What an early stop left the server with, and the drain's cut, in one line; `None` when the
/// load ended as planned.
pub fn left_as_found(l: &crate::driver::guard::LoadEnd) -> Option<String> {
    use crate::driver::guard::ServerIdle;
    let mut parts = Vec::new();
    if l.cancelled_in_flight > 0 {
        let idle = match &l.server_idle {
            Some(ServerIdle::After { s, source }) => {
                format!("the server was idle {s:.1} s later ({source})")
            }
            Some(ServerIdle::NotWithin {
                s,
                running,
                waiting,
                source,
            }) => format!(
                "the server was NOT idle {s:.0} s later: {running:.0} running, {waiting:.0} waiting ({source}); it may be serving requests nobody reads"
            ),
            Some(ServerIdle::Unknown { why }) => {
                format!("whether the server went idle is unknown: {why}")
            }
            None => "the server was not asked whether it went idle".to_owned(),
        };
        parts.push(format!(
            "{} requests in flight when the load stopped were cancelled (their connections closed); {idle}",
            l.cancelled_in_flight
        ));
    }
    if let Some(c) = &l.drain_cut {
        parts.push(format!(
            "the drain stopped at its bound of {} arrivals (twice the {} in flight when the last steady request was sent, at least 16): steady requests still in flight then finished under a lighter load",
            c.bound, c.in_flight_at_steady_end
        ));
    }
    (!parts.is_empty()).then(|| {
        let mut line = parts.join("; ");
        if let Some(first) = line.get(..1) {
            line = first.to_uppercase() + &line[1..];
        }
        line + "."
    })
}

/// How the run ended before its plan did: stopped early, decided, stopped by the progress
/// guard, what that left the server with, and what was never sent.
fn early_end(d: &mut Doc, s: &Summary) {
    let st = &s.steady;
    if let Some(why) = &s.stopped {
        d.warn(format!("Stopped early: {why}."));
    }
    if let Some(why) = &s.decided {
        let abandoned = st.errors.get("abandoned").copied().unwrap_or(0);
        d.warn(format!(
            "Stopped once its verdict was decided: {why}. The drain was cut short; the steady requests then in flight ({abandoned}) count as misses (abandoned), and the latency rows leave out what they would have added (the slowest requests): read them as lower bounds. measurement.stop_when_decided = false runs the plan to its end."
        ));
    }
    if let Some(l) = &s.lost_records {
        d.warn(format!(
            "A write to requests.jsonl failed mid-run: {}.",
            l.said()
        ));
    }
    let load_end = s.load_end.clone().unwrap_or_default();
    if let Some(g) = &load_end.guard {
        d.warn(format!(
            "Stopped by the progress guard: {}. Nothing more was sent; the requests then in flight were cancelled and count as misses (abandoned), so the latency rows are lower bounds. measurement.guard sets its bound (docs/guide/safety.md).",
            g.why()
        ));
    }
    if let Some(line) = left_as_found(&load_end) {
        d.line(line);
    }
    // planned = ok + failed + not sent, for every phase a count bounds.
    let unsent: Vec<String> = s
        .phases
        .iter()
        .filter_map(|(p, x)| {
            let (n, planned) = (x.not_sent?, x.planned?);
            (n > 0).then(|| format!("{p} {n} of {planned}"))
        })
        .collect();
    if !unsent.is_empty() {
        let first = match load_end.guard {
            Some(_) => "the progress guard stopped the load first",
            None => "the run ended first",
        };
        d.warn(format!("Not sent ({first}): {}.", unsent.join(", ")));
    }
}

fn failures_and_start(d: &mut Doc, s: &Summary) {
    let st = &s.steady;
    early_end(d, s);
    if !st.errors.is_empty() {
        let e: Vec<String> = st.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        d.line(format!(
            "Failures: {} of {} steady requests: {}",
            st.stats.failed,
            st.stats.requests,
            e.join(", ")
        ));
        for (class, first) in &st.first_errors {
            d.line(format!("  first {class}: {first}"));
        }
    }

    if let Some(cs) = &s.cold_start {
        d.h("Cold start (its own result; not in steady statistics)");
        d.line(format!(
            "{}: port open {} s → ready {:.2} s → first token {} s; first request TTFT {} ms (steady median {} ms)",
            if cs.launched { "launched by goodput" } else { "attached while starting" },
            opt(cs.port_open_s),
            cs.ready_s,
            opt(cs.first_token_s),
            opt(cs.first_request_ttft_ms),
            opt(st.stats.ttft_ms.as_ref().map(|d| d.p50)),
        ));
    }
    d.line(format!(
        "Warm-up: {} requests over {:.1} s, rule: {}; ended by {}.",
        s.warmup.requests, s.warmup.duration_s, s.warmup.rule, s.warmup.ended
    ));
    if let Some(st) = &s.steady_state {
        d.line(format!("Steady state: {}.", st.evidence));
    }
    if let Some(p) = &s.precision {
        let budget = p
            .budget
            .map_or(String::new(), |b| format!(" of a budget of {b}"));
        d.line(format!(
            "{}: {} steady requests{budget}; {} ({}).",
            if p.stopped_early {
                "Stopped when known"
            } else {
                "Ran to its budget"
            },
            p.requests,
            p.detail,
            p.rule
        ));
    }
}

/// Multi-turn sessions: how many finished, session goodput, and each turn's latencies and
/// cached prompt tokens against what its history makes reusable.
fn sessions(d: &mut Doc, s: &Summary) {
    let Some(ss) = &s.steady.sessions else {
        return;
    };
    d.h("Sessions (each arrival a conversation; turns are the requests above)");
    let mut line = format!(
        "{} steady sessions: {} completed, {} ended early by a failed turn or the stop; turns {} planned, {} sent, {} not sent",
        ss.sessions,
        ss.completed,
        ss.ended_early,
        ss.turns_planned,
        ss.turns_sent,
        ss.turns_not_sent
    );
    if let (Some(a), Some(g)) = (ss.attainment, ss.goodput_sps) {
        line.push_str(&format!(
            "; every turn met the SLO in {:.1}% of sessions: session goodput {} sessions/s",
            a * 100.0,
            num(g)
        ));
    }
    d.toned(Tone::warn_if(ss.turns_not_sent > 0), line);
    if let Some(slip) = &ss.slip_ms {
        d.line(format!(
            "Follow-ups sent at the answer before them + think time: slip p50 {} ms, p99 {} ms, max {} ms",
            num(slip.p50),
            num(slip.p99),
            num(slip.max)
        ));
    }
    if let Some(dur) = &ss.duration_ms {
        d.line(format!(
            "Session duration (completed): p50 {} ms, p99 {} ms",
            num(dur.p50),
            num(dur.p99)
        ));
    }
    let p =
        |x: &Option<Dist>, f: fn(&Dist) -> f64| x.as_ref().map_or("—".to_owned(), |d| num(f(d)));
    let rows = ss
        .per_turn
        .iter()
        .map(|t| {
            vec![
                t.turn.to_string(),
                t.sent.to_string(),
                t.ok.to_string(),
                p(&t.ttft_ms, |d| d.p50),
                p(&t.ttft_ms, |d| d.p99),
                p(&t.ttfo_ms, |d| d.p50),
                p(&t.tpot_ms, |d| d.p50),
                p(&t.input_tokens, |d| d.mean),
                p(&t.reusable_tokens, |d| d.mean),
                p(&t.cached_tokens, |d| d.mean),
            ]
        })
        .collect();
    d.table(
        &[
            "turn", "sent", "ok", "TTFT p50", "TTFT p99", "TTFO p50", "TPOT p50", "input",
            "reusable", "cached",
        ],
        rows,
    );
    d.line("input: mean prompt tokens (the conversation so far); reusable: tokens of its history before the new message (first turn: the shared system prompt); cached: what the server reported served from its cache.");
}

/// A trace's prefix structure against what the server's cache served.
fn prefix_reuse(d: &mut Doc, s: &Summary) {
    let Some(p) = &s.steady.prefix_reuse else {
        return;
    };
    let line = match p.cached_mean {
        Some(k) => format!(
            "Prefix reuse ({}, {}-token blocks): expected {} cached tokens per request, the server reported {}; within one block on {} of {} requests ({:.1}%)",
            p.source,
            p.block_tokens,
            num(p.expected_mean),
            num(k),
            p.within_one_block,
            p.reported,
            100.0 * p.within_one_block as f64 / p.reported.max(1) as f64
        ),
        None => format!(
            "Prefix reuse ({}, {}-token blocks): expected {} cached tokens per request; the server reported no cached tokens to hold them against",
            p.source,
            p.block_tokens,
            num(p.expected_mean)
        ),
    };
    let poor = p.reported > 0 && (p.within_one_block as f64) < 0.95 * p.reported as f64;
    d.toned(Tone::warn_if(poor), line);
}

/// The requests' images: what was sent, its upload inside the TTFT, the image tokens against
/// the contract's rule, and the encoder cache against the repeats planned.
fn images(d: &mut Doc, s: &Summary) {
    let Some(i) = &s.steady.images else {
        return;
    };
    let sizes: Vec<String> = i.sizes.iter().map(|(k, n)| format!("{n} × {k}")).collect();
    d.line(format!(
        "Images: {} in {} of {} steady requests ({})",
        i.images,
        i.with_images,
        i.requests,
        if sizes.is_empty() {
            "none sent".to_owned()
        } else {
            sizes.join(", ")
        }
    ));
    let mb = |d: &Option<Dist>| {
        d.as_ref().map(|d| Dist {
            mean: d.mean / 1e6,
            p50: d.p50 / 1e6,
            p90: d.p90 / 1e6,
            p95: d.p95 / 1e6,
            p99: d.p99 / 1e6,
            p99_9: d.p99_9 / 1e6,
            max: d.max / 1e6,
            ..d.clone()
        })
    };
    let share = i.upload_share_of_ttft.as_ref().map(|d| Dist {
        mean: d.mean * 100.0,
        p50: d.p50 * 100.0,
        p90: d.p90 * 100.0,
        p95: d.p95 * 100.0,
        p99: d.p99 * 100.0,
        p99_9: d.p99_9 * 100.0,
        max: d.max * 100.0,
        ..d.clone()
    });
    let rows: Vec<Vec<String>> = [
        ("image MB / request", &mb(&i.bytes)),
        ("upload ms (in TTFT)", &i.upload_ms),
        ("upload % of TTFT", &share),
        ("image tokens expected", &i.expected_tokens),
        ("prompt − text − image", &i.remainder),
    ]
    .iter()
    .filter_map(|(n, v)| dist_row(n, v))
    .collect();
    if !rows.is_empty() {
        d.table(&HEAD, rows);
    }
    if let (Some(rule), Some(check)) = (&i.rule, &i.rule_check) {
        d.toned(
            Tone::warn_if(check.starts_with("not held")),
            format!("Image tokens ({rule}): {check}"),
        );
    }
    let cache = match (i.server_queries, i.server_hits) {
        (Some(q), Some(h)) => format!(
            "Encoder cache: the server found {h} of {q} images in the steady window; the run sent {} repeated image(s)",
            i.repeats
        ),
        _ => format!(
            "Encoder cache: the run sent {} repeated image(s); the server published no multimodal cache counters to hold them against",
            i.repeats
        ),
    };
    d.line(cache);
    for n in &i.notes {
        d.warn(format!("WARNING: {n}"));
    }
}

/// A run merged from shards: each client machine's share, dispatch lag and clock, so a reader
/// sees which client fell behind (and when more shards are needed).
fn shards(d: &mut Doc, s: &Summary) {
    let Some(sh) = &s.shards else {
        return;
    };
    d.h(format!(
        "Shards: {} client machines, one schedule from {}",
        sh.count, sh.start_at
    ));
    let rows = sh
        .shards
        .iter()
        .map(|r| {
            vec![
                format!("{}/{}", r.index, sh.count),
                r.host.clone().unwrap_or_else(|| "—".into()),
                r.steady_requests.to_string(),
                opt(r.dispatch_lag_p50_ms),
                opt(r.dispatch_lag_p99_ms),
                match (r.clock_offset_ms, r.clock_uncertainty_ms) {
                    (Some(o), Some(u)) => format!("{o:+.1} ± {u:.1}"),
                    (Some(o), None) => format!("{o:+.1}"),
                    _ => "unknown".to_owned(),
                },
            ]
        })
        .collect();
    d.table(
        &[
            "shard",
            "host",
            "steady",
            "lag p50 ms",
            "lag p99 ms",
            "clock vs target ms",
        ],
        rows,
    );
    if let (Some(spread), Some(allowed)) = (sh.clock_spread_ms, sh.clock_spread_allowed_ms) {
        d.toned(
            Tone::warn_if(spread > allowed),
            format!(
                "Clocks: the shards' offsets to the target's span {spread:.1} ms (allowed {allowed:.1} ms: {} ms beyond the measurement's uncertainty).",
                crate::analyze::shards::MAX_CLOCK_SPREAD_MS
            ),
        );
    }
}

/// One figure of a distribution for a table cell (`—` without one).
fn dist_cell(x: &Option<crate::analyze::Dist>, f: fn(&crate::analyze::Dist) -> f64) -> String {
    x.as_ref().map_or("—".to_owned(), |d| num(f(d)))
}

/// Traffic classes side by side, each against its own SLO, with its verdict and why.
fn classes(d: &mut Doc, s: &Summary) {
    let Some(classes) = &s.classes else {
        return;
    };
    d.h(format!(
        "Classes: {} in one run, each judged by its own SLO (ms, latency from {})",
        classes.len(),
        s.latency_origin.phrase()
    ));
    let p = dist_cell;
    let rows = classes
        .iter()
        .map(|k| {
            let st = &k.stats;
            let slo = k.slo.as_ref();
            vec![
                k.name.clone(),
                format!(
                    "{:.0}% ({:.0}% sent)",
                    k.share * 100.0,
                    k.sent_share * 100.0
                ),
                format!("{}/{}", st.ok, st.requests),
                p(&st.ttft_ms, |d| d.p50),
                p(&st.ttft_ms, |d| d.p99),
                p(&st.tpot_ms, |d| d.p99),
                p(&st.e2e_ms, |d| d.p99),
                slo.map_or("—".to_owned(), |x| slo_metrics(x, "").join(", ")),
                slo.map_or("—".to_owned(), |x| {
                    format!(
                        "{:.1}% (≥ {:.0}%)",
                        x.attainment * 100.0,
                        x.attainment_target * 100.0
                    )
                }),
                opt(slo.and_then(|x| x.goodput_rps)),
                slo.map_or("—".to_owned(), |x| x.verdict.short().to_owned()),
            ]
        })
        .collect();
    d.table(
        &[
            "class",
            "share",
            "ok",
            "TTFT p50",
            "TTFT p99",
            "TPOT p99",
            "E2E p99",
            "its SLO",
            "attainment",
            "goodput req/s",
            "verdict",
        ],
        rows,
    );
    class_lines(d, classes);
    // Named only when a class misses its SLO: a class not yet supported says so above.
    if let Some(k) = crate::analyze::classes::limiting(classes)
        && k.standing() == Standing::Misses
        && let Some(why) = class_fails(k)
    {
        d.warn(format!("Limiting class: {} ({why}).", k.name));
    }
}

/// Each class's line under the table: what it asks, its requests by model, its failures, and
/// a pass not yet supported.
fn class_lines(d: &mut Doc, classes: &[crate::analyze::classes::ClassResult]) {
    for k in classes {
        let mut line = format!("{}: {}", k.name, k.asks);
        if k.models.len() > 1 || k.models.keys().next().is_some() {
            let m: Vec<String> = k.models.iter().map(|(n, c)| format!("{n} {c}")).collect();
            line.push_str(&format!("; requests by model: {}", m.join(", ")));
        }
        if !k.errors.is_empty() {
            let e: Vec<String> = k.errors.iter().map(|(n, c)| format!("{n} {c}")).collect();
            line.push_str(&format!("; failures: {}", e.join(", ")));
        }
        d.line(line);
        if let Some(w) = k.slo.as_ref().and_then(|x| x.not_yet()) {
            d.line(format!("  met, not yet supported: {w}"));
        }
    }
}

/// A run whose load was changed while it ran (`demo --live`): each segment on its own line,
/// the closed loop's sent rate beside what it was meant to carry.
fn segments(d: &mut Doc, s: &Summary) {
    let Some(segs) = &s.segments else {
        return;
    };
    d.h(format!(
        "Segments: the load changed {} times",
        segs.len().saturating_sub(1)
    ));
    let rows = segs
        .iter()
        .map(|g| {
            let f = &g.facts;
            vec![
                f.segment.to_string(),
                match f.users {
                    Some(u) => format!("{} loop, {u} users", f.loop_kind),
                    None => format!("{} loop", f.loop_kind),
                },
                format!("{:.0}%", f.load * 100.0),
                format!("{:.1}", f.offered_rps),
                format!("{:.1}", g.sent_rps),
                g.requests.to_string(),
                opt(g.ttft_p50_ms),
                opt(g.ttft_p99_ms),
                g.attainment
                    .map_or("—".to_owned(), |a| format!("{:.1}%", a * 100.0)),
            ]
        })
        .collect();
    d.table(
        &[
            "segment",
            "load",
            "of capacity",
            "offered req/s",
            "sent req/s",
            "requests",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "SLO met",
        ],
        rows,
    );
    d.line(
        "Latency from the intended send time in open-loop segments and from the actual send in closed-loop ones: a closed loop that sent less than was offered slowed down with the server, and its tail describes a lighter load than its line says.",
    );
}

/// A load program (`[[load.stage]]`): each stage's line, its verdicts, why a stage is
/// INVALID, and how a recovery stage recovered.
fn stages(d: &mut Doc, s: &Summary) {
    let Some(stages) = &s.stages else {
        return;
    };
    d.h(format!(
        "Stages: a load program of {}, each judged on its own (ms, latency from {})",
        stages.len(),
        s.latency_origin.phrase()
    ));
    let p = dist_cell;
    let rows = stages
        .iter()
        .map(|k| {
            let st = &k.stats;
            let slo = k.slo.as_ref();
            vec![
                k.name.clone(),
                k.offers.clone(),
                format!("{:.1}–{:.1}", k.from_s, k.to_s),
                format!("{}/{}", st.ok, st.requests),
                opt(k.throughput.offered_rps),
                opt(k.throughput.achieved_rps),
                p(&st.ttft_ms, |d| d.p50),
                p(&st.ttft_ms, |d| d.p99),
                slo.map_or("—".to_owned(), |x| {
                    format!("{:.1}%", x.attainment * 100.0)
                }),
                slo.map_or("—".to_owned(), |x| x.verdict.short().to_owned()),
                k.validity.verdict.to_string(),
            ]
        })
        .collect();
    d.table(
        &[
            "stage",
            "offers",
            "span s",
            "ok",
            "offered req/s",
            "achieved req/s",
            "TTFT p50",
            "TTFT p99",
            "attainment",
            "SLO",
            "validity",
        ],
        rows,
    );
    stage_lines(d, stages);
}

/// Under the stages' table: the first reason each INVALID stage is, and each recovery.
/// An edge search's answer, its rule and its steps.
fn edge(d: &mut Doc, s: &Summary) {
    let Some(e) = &s.edge else {
        return;
    };
    d.h(format!(
        "SLA edge: searched within the run (`{}`, steps of {} requests from {} req/s)",
        e.stage,
        e.step_requests,
        num(e.start_rps)
    ));
    d.line(e.answer());
    d.line(format!("Steps (req/s): {}", e.trail()));
    d.line(format!("Rule: {}.", e.rule));
    if e.unjudged > 0 {
        d.line(format!(
            "{} step(s) had nothing to judge: the warm-up covered them (and they ran again at their rate), or the run ended inside one.",
            e.unjudged
        ));
    }
}

fn stage_lines(d: &mut Doc, stages: &[crate::analyze::stages::StageResult]) {
    for k in stages {
        // A wait holds a step's rate while its last requests finish: what the step's own line
        // says, without a verdict of its own to read.
        if k.shape == "wait" {
            continue;
        }
        if let Some(why) = k.validity.reasons.first() {
            d.line(format!("{}: INVALID: {why}", k.name));
        }
        if let Some(r) = &k.recovery {
            d.line(match r.recovered_after_s {
                Some(t) if r.stayed => format!(
                    "{}: recovered {t:.2} s after {} ended: TTFT p99 over each {} requests from then on ≤ {} ms",
                    k.name,
                    r.after,
                    r.window_requests,
                    num(r.threshold_ms)
                ),
                Some(t) => format!(
                    "{}: back under {} ms {t:.2} s after {} ended (TTFT p99 over {} requests), but not in every later window",
                    k.name,
                    num(r.threshold_ms),
                    r.after,
                    r.window_requests
                ),
                None => format!(
                    "{}: did not recover from {} within the stage: TTFT p99 over {} requests stayed above {} ms",
                    k.name,
                    r.after,
                    r.window_requests,
                    num(r.threshold_ms)
                ),
            });
        }
    }
}

/// Several replicas with no router (`target.urls`): each one's share and latencies.
fn replicas(d: &mut Doc, s: &Summary) {
    let Some(rs) = &s.steady.replicas else {
        return;
    };
    d.h(format!("Replicas: {} target URLs", rs.len()));
    let rows = rs
        .iter()
        .map(|r| {
            vec![
                r.url.clone(),
                r.steady_requests.to_string(),
                r.failed.to_string(),
                opt(r.ttft_p50_ms),
                opt(r.ttft_p99_ms),
                opt(r.e2e_p99_ms),
                r.attainment
                    .map_or("—".to_owned(), |a| format!("{:.1}%", a * 100.0)),
            ]
        })
        .collect();
    d.table(
        &[
            "url",
            "steady",
            "failed",
            "TTFT p50",
            "TTFT p99",
            "E2E p99",
            "attainment",
        ],
        rows,
    );
}

fn phases(d: &mut Doc, s: &Summary) {
    d.h("Phases");
    // In the order they happen, not the map's alphabetical one.
    let order = |name: &str| {
        ["cold_start", "warmup", "steady", "drain", "quality"]
            .iter()
            .position(|p| *p == name)
            .unwrap_or(usize::MAX)
    };
    let mut phases: Vec<(&String, &PhaseStats)> = s.phases.iter().collect();
    phases.sort_by_key(|(name, _)| order(name));
    let phase_rows = phases
        .into_iter()
        .map(|(name, p): (&String, &PhaseStats)| {
            let q = |x: &Option<Dist>, f: fn(&Dist) -> f64| {
                x.as_ref().map_or("—".to_owned(), |d| num(f(d)))
            };
            vec![
                name.clone(),
                p.requests.to_string(),
                p.ok.to_string(),
                p.failed.to_string(),
                q(&p.ttft_ms, |d| d.p50),
                q(&p.ttft_ms, |d| d.p99),
                q(&p.e2e_ms, |d| d.p50),
                q(&p.e2e_ms, |d| d.p99),
            ]
        })
        .collect();
    d.table(
        &[
            "phase", "requests", "ok", "failed", "TTFT p50", "TTFT p99", "E2E p50", "E2E p99",
        ],
        phase_rows,
    );
}

fn server_metrics(d: &mut Doc, s: &Summary) {
    if let Some(sv) = &s.server {
        d.h(format!(
            "Server's own metrics ({} names, {} scrapes; {:.1}–{:.1} s)",
            sv.engine, sv.scrapes, sv.from_s, sv.to_s
        ));
        let g = |x: &Option<crate::analyze::server::Gauge>| {
            x.as_ref().map_or("—".to_owned(), |g| {
                format!("mean {} max {}", num(g.mean), num(g.max))
            })
        };
        // A fraction of a cache sized for the whole machine is often well under 1%: shown in
        // percent to two significant places, so a small load's usage is not "0.00".
        let pct = |x: f64| {
            let p = 100.0 * x;
            if !p.is_finite() {
                "—".to_owned()
            } else if p == 0.0 || p >= 10.0 {
                format!("{p:.0}%")
            } else if p >= 1.0 {
                format!("{p:.1}%")
            } else {
                format!("{:.*}%", (1 - p.log10().floor() as i32) as usize, p)
            }
        };
        d.line(format!(
            "Running requests {} · waiting {} · KV-cache usage {}",
            g(&sv.running),
            g(&sv.waiting),
            sv.kv_cache_usage
                .as_ref()
                .map_or("—".to_owned(), |k| format!(
                    "mean {} max {}",
                    pct(k.mean),
                    pct(k.max)
                ))
        ));
        if let Some(q) = &sv.queue_time {
            let bucket = |b: &Option<crate::analyze::server::Bucket>| match b {
                Some(crate::analyze::server::Bucket { from, to: Some(to) }) => {
                    format!("in {}–{} ms", num(*from), num(*to))
                }
                Some(crate::analyze::server::Bucket { from, to: None }) => {
                    format!("over {} ms", num(*from))
                }
                None => "— (no buckets kept)".to_owned(),
            };
            d.line(format!(
                "Queue time (server): mean {} ms over the {} requests it finished between the scrapes; p50 {}, p99 {} (histogram buckets)",
                num(q.mean_ms),
                q.requests.round(),
                bucket(&q.p50_bucket_ms),
                bucket(&q.p99_bucket_ms)
            ));
        }
        d.line(format!(
            "Between the {} at {:.1} s and {:.1} s{}.",
            sv.between,
            sv.from_s,
            sv.to_s,
            match (sv.client_finished, &sv.queue_time) {
                (Some(c), Some(q)) => format!(
                    ": the server counted {} finished requests, the client saw {c} finish",
                    q.requests.round()
                ),
                (Some(c), None) => format!(": the client saw {c} requests finish"),
                _ => String::new(),
            }
        ));
    }
}

/// Three significant digits, for figures whose scale varies by orders of magnitude (joules per
/// token, cost per million tokens).
pub fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "—".to_owned();
    }
    if x == 0.0 || x.abs() >= 100.0 {
        return format!("{x:.0}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A figure with its unit (a currency goes after the number as a code does).
pub fn figure_value(f: &crate::analyze::efficiency::Figure) -> String {
    match f.value {
        Some(v) => format!("{} {}", sig(v), f.unit),
        None => "—".to_owned(),
    }
}

/// Energy, cost and per-accelerator figures over the steady window. A run with none of their
/// inputs gets one line saying which are missing.
fn efficiency(d: &mut Doc, s: &Summary) {
    let Some(e) = &s.efficiency else { return };
    let anything = e.energy.is_some() || e.price_per_hour.is_some() || e.accelerators.is_some();
    if !anything {
        d.line(format!(
            "Efficiency: not measured — {}; no price (target.declared.price_per_hour).",
            e.energy_absent
                .as_deref()
                .unwrap_or("no energy measurement")
        ));
        return;
    }
    d.h(format!(
        "Efficiency (steady window {:.1} s; goodput counts SLO-meeting requests only)",
        e.window_s
    ));
    match (&e.energy, &e.energy_absent) {
        (Some(en), _) => d.line(format!(
            "Energy: {} kJ, mean {} W, {} device{}: {}{}{}.",
            sig(en.joules / 1000.0),
            sig(en.mean_watts),
            e.measured_devices(),
            if e.measured_devices() == 1 { "" } else { "s" },
            en.method,
            en.bounds_joules.map_or(String::new(), |[lo, hi]| format!(
                "; the scrapes bound it to {}–{} kJ",
                sig(lo / 1000.0),
                sig(hi / 1000.0)
            )),
            en.scrape_interval_s
                .map_or(String::new(), |i| format!("; scraped every {} s", sig(i)))
        )),
        (None, Some(why)) => d.warn(format!("Energy: absent — {why}.")),
        (None, None) => {}
    }
    d.line(format!(
        "Accelerators: {} ({}) · price: {}",
        e.accelerators.map_or("—".to_owned(), |n| n.to_string()),
        e.accelerators_basis,
        match (e.price_per_hour, &e.currency) {
            (Some(p), Some(c)) => format!("{} {c} per hour (declared)", sig(p)),
            _ =>
                "absent — no price: set target.declared.price_per_hour and target.declared.currency"
                    .to_owned(),
        }
    ));
    let rows = e
        .figures
        .iter()
        .map(|f| vec![f.label.clone(), figure_value(f), f.basis.clone()])
        .collect();
    d.table(&["figure", "value", "from (or why absent)"], rows);
    if !e.ignored_metrics.is_empty() {
        d.line(format!(
            "Telemetry metrics not read (kept in the bundle, ignored): {}",
            e.ignored_metrics.join(", ")
        ));
    }
    for n in &e.notes {
        d.warn(format!("Note: {n}"));
    }
}

fn predictions(d: &mut Doc, s: &Summary) {
    if let Some(p) = &s.predictions {
        d.h("Predictions");
        d.toned(
            Tone::warn_if(!p.hash_verified),
            format!(
                "Made {} before the first request; {}",
                p.made_utc,
                if p.hash_verified {
                    "hash verified: unchanged since."
                } else {
                    "HASH MISMATCH: prediction.json was edited after the run started."
                }
            ),
        );
        let rows = p
            .outcomes
            .iter()
            .map(|o| {
                vec![
                    o.text.clone(),
                    o.measured.map_or("not measured".into(), num),
                    match o.held {
                        Some(true) => "held".into(),
                        Some(false) => "did not hold".into(),
                        None => "—".into(),
                    },
                ]
            })
            .collect();
        d.table(&["prediction", "measured", "outcome"], rows);
    }
}

fn validity_details(d: &mut Doc, s: &Summary) {
    let v = &s.validity;
    let claims = claims_of(v);
    // The verdict is at the top; its reasons, and the claims the load model cannot support,
    // are here.
    if !v.reasons.is_empty() || !v.cannot_support.is_empty() {
        d.h(format!("Validity: {} for {claims}", v.verdict));
    }
    for c in &v.cannot_support {
        d.line(format!("- cannot support: {c}"));
    }
    for r in &s.validity.reasons {
        d.line(format!("- {r}"));
    }
    for n in &s.notes {
        d.line(format!("Note: {n}"));
    }
}

/// The steady-state table's columns.
const HEAD: [&str; 9] = [
    "metric", "n", "mean", "p50", "p90", "p95", "p99", "p99.9", "max",
];

/// The claims a verdict is about: what the load model supports.
fn claims_of(v: &crate::analyze::Validity) -> String {
    if v.supports.is_empty() {
        "tail latency and goodput".to_owned()
    } else {
        v.supports.clone()
    }
}
