//! `report.html`: one self-contained file (inline CSS and SVG, no script, no network) with the
//! whole text report — contract card and verdict first — followed by the figures: TTFT, TPOT,
//! ITL (per chunk and per token) and E2E CDFs with the SLO thresholds drawn, the per-second timeline with its phases
//! shaded, and planned vs server-reported length distributions.

use crate::analyze::{Itl, Second, Summary, Tally, request_metrics};
use crate::contract::Contract;
use crate::plan::Phase;
use crate::record::Record;
use crate::workload::Inputs;

use super::svg::{Chart, cdf};

/// The page for one run.
pub fn page(
    c: &Contract,
    inputs: &Inputs,
    s: &Summary,
    records: &[Record],
    seconds: &[Second],
) -> String {
    let mut d = super::document(s);
    d.h("Figures");
    let steady: Vec<&Record> = records
        .iter()
        .filter(|r| r.phase == Phase::Steady && r.is_ok())
        .collect();
    let m: Vec<_> = steady
        .iter()
        .map(|r| request_metrics(r, c.measurement.latency_origin, c.measurement.output_tokens))
        .collect();
    let threshold = |name: &str| {
        s.steady.slo.as_ref().and_then(|slo| {
            slo.per_metric.iter().find(|x| x.metric == name).map(|x| {
                (
                    x.threshold_ms,
                    format!("SLO p{} ≤ {} ms", slo.percentile, x.threshold_ms),
                )
            })
        })
    };
    const REQUESTS: &str = "fraction of requests";
    // TTFO is drawn only when some request reasoned (otherwise it is TTFT).
    let reasoned = m.iter().any(|x| x.reasoning_tokens.is_some());
    let mut itl = Itl::default();
    for r in &steady {
        itl.add(r);
    }
    // CDF points, and how many values they are drawn from.
    type Cdf = (Vec<(f64, f64)>, usize);
    let of = |v: Vec<f64>| (cdf(&v, 400), v.len());
    let tallied = |mut t: Tally| (t.quantiles(400), t.len());
    let series: [(&str, &str, Cdf, &str); 6] = [
        (
            "TTFT",
            "ttft",
            of(m.iter().filter_map(|x| x.ttft_ms).collect()),
            REQUESTS,
        ),
        (
            "TTFO (first answer token)",
            "ttfo",
            of(m.iter()
                .filter(|_| reasoned)
                .filter_map(|x| x.ttfo_ms)
                .collect()),
            REQUESTS,
        ),
        (
            "TPOT",
            "tpot",
            of(m.iter().filter_map(|x| x.tpot_ms).collect()),
            REQUESTS,
        ),
        (
            "ITL per chunk",
            "itl",
            tallied(itl.per_chunk()),
            "fraction of chunk gaps",
        ),
        (
            "ITL per token",
            "itl-token",
            tallied(itl.per_token()),
            "fraction of tokens after the first chunk",
        ),
        (
            "E2E",
            "e2e",
            of(m.iter().filter_map(|x| x.e2e_ms).collect()),
            REQUESTS,
        ),
    ];
    for (title, key, (points, n), y) in series {
        if n == 0 {
            continue;
        }
        let mut chart = Chart::new(
            &format!("cdf-{key}"),
            &format!("{title} CDF, steady state ({n} values)"),
            // Gaps between tokens have no origin; the latencies count from one.
            &if matches!(key, "tpot" | "itl" | "itl-token") {
                format!("{title} (ms)")
            } else {
                format!("{title} (ms, from the {} send)", s.latency_origin)
            },
            y,
        )
        .line(title, points)
        .y_max(1.0);
        if let Some((x, name)) = threshold(key) {
            chart = chart.vline(x, &name);
        }
        d.figure(chart.render());
    }
    if let Some(ss) = &s.steady.sessions {
        let by_turn = |f: &dyn Fn(&crate::analyze::sessions::TurnStats) -> Option<f64>| {
            ss.per_turn
                .iter()
                .filter_map(|t| Some((f64::from(t.turn), f(t)?)))
                .collect::<Vec<_>>()
        };
        let mut ttft = Chart::new(
            "sessions-ttft",
            "Sessions: TTFT by turn (each turn carries the conversation so far)",
            "turn of the session",
            "ms",
        )
        .line("TTFT p50", by_turn(&|t| t.ttft_ms.as_ref().map(|d| d.p50)))
        .line("TTFT p99", by_turn(&|t| t.ttft_ms.as_ref().map(|d| d.p99)));
        if let Some((x, _)) = threshold("ttft") {
            ttft = ttft.line("SLO", by_turn(&|_| Some(x)));
        }
        d.figure(ttft.render());
        let tokens = Chart::new(
            "sessions-tokens",
            "Sessions: prompt tokens by turn (means)",
            "turn of the session",
            "tokens",
        )
        .line(
            "prompt",
            by_turn(&|t| t.input_tokens.as_ref().map(|d| d.mean)),
        )
        .line(
            "history (reusable)",
            by_turn(&|t| t.reusable_tokens.as_ref().map(|d| d.mean)),
        )
        .line(
            "cached (server)",
            by_turn(&|t| t.cached_tokens.as_ref().map(|d| d.mean)),
        );
        d.figure(tokens.render());
    }
    if !seconds.is_empty() {
        let pts = |f: &dyn Fn(&Second) -> Option<f64>| -> Vec<(f64, f64)> {
            seconds
                .iter()
                .filter_map(|x| Some((x.t as f64, f(x)?)))
                .collect()
        };
        let mut load = Chart::new(
            "timeline-load",
            "Per second: load",
            "seconds since the run started",
            "requests",
        )
        .line("starts/s", pts(&|x| Some(x.starts as f64)))
        .line("in flight", pts(&|x| Some(x.in_flight as f64)));
        let mut ttft = Chart::new(
            "timeline-ttft",
            "Per second: TTFT of the requests sent",
            "seconds since the run started",
            "ms",
        )
        .line("TTFT p50", pts(&|x| x.ttft_p50_ms))
        .line("TTFT p99", pts(&|x| x.ttft_p99_ms));
        for (name, a, b) in phase_spans(seconds) {
            load = load.band(a, b, &name);
            ttft = ttft.band(a, b, &name);
        }
        if let Some((x, _)) = threshold("ttft") {
            ttft = ttft.line("SLO", seconds.iter().map(|s| (s.t as f64, x)).collect());
        }
        d.figure(load.render());
        d.figure(ttft.render());
    }
    let lengths = |planned: Vec<f64>, reported: Vec<f64>, what: &str| {
        let requested =
            crate::plan::requested_lengths(c, inputs, what == "Input").unwrap_or_default();
        let mut ch = Chart::new(
            &format!("lengths-{}", what.to_lowercase()),
            &format!("{what} length: requested, sent, and reported by the server"),
            "tokens",
            "fraction of requests",
        );
        if !requested.is_empty() {
            let r: Vec<f64> = requested.into_iter().map(f64::from).collect();
            ch = ch.line("requested", cdf(&r, 200));
        }
        ch = ch.line("sent", cdf(&planned, 200)).y_max(1.0);
        if !reported.is_empty() {
            ch = ch.line("reported (usage)", cdf(&reported, 200));
        }
        ch.render()
    };
    // A session's later turns carry its history: its prompts are compared on first turns.
    let firsts: Vec<&&Record> = steady.iter().filter(|r| r.is_first_turn()).collect();
    for (input, what) in [(true, "Input"), (false, "Output")] {
        let of = if input {
            &firsts[..]
        } else {
            &steady.iter().collect::<Vec<_>>()[..]
        };
        d.figure(lengths(
            of.iter()
                .map(|r| f64::from(r.planned_tokens(input)))
                .collect(),
            of.iter()
                .filter_map(|r| r.reported_tokens(input).map(f64::from))
                .collect(),
            what,
        ));
    }
    super::format::html::wrap(&format!("goodput · {}", s.contract), &d)
}

/// Contiguous spans of seconds whose sent requests were all of one phase.
fn phase_spans(seconds: &[Second]) -> Vec<(String, f64, f64)> {
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    for s in seconds {
        let Some(p) = s.phases.first() else { continue };
        match out.last_mut() {
            Some((name, _, end)) if name == p && *end >= s.t as f64 => *end = s.t as f64 + 1.0,
            _ => out.push((p.clone(), s.t as f64, s.t as f64 + 1.0)),
        }
    }
    out
}
