//! A load program's stages (`[[load.stage]]`), each judged as a run of it alone would be: its
//! steady requests' distributions, its validity by the same rules as a whole run's (the
//! client's lag, a queue that grew through it, a shortfall of its offered rate), its SLO
//! verdict with its support, and, for a `recovery` stage, how long TTFT took to come back
//! under the SLO after the stage before it.
//!
//! The whole run's figures mix the stages' loads, so a program of several stages is INVALID
//! as one result: its stages are the results.

use serde::{Deserialize, Serialize};

use super::validity::{ValidityInputs, validity};
use super::*;
use crate::contract::stages::{Shape, Stage};

/// One stage's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageResult {
    pub name: String,
    /// `hold`, `ramp`, `burst`, `recovery` or `soak`.
    pub shape: String,
    /// What it offered, in words (`ramp 1 → 8 req/s over 30 s`).
    pub offers: String,
    /// Its span, seconds from the program's first arrival: from its start to its end (a
    /// count-bound stage's end: the next stage's first arrival, or its own last).
    pub from_s: f64,
    pub to_s: f64,
    /// Its steady requests' counts and distributions (warm-up requests left out).
    pub stats: PhaseStats,
    /// Offered (its intended sends) and achieved (completions inside its window) per second.
    pub throughput: Throughput,
    /// Its measurement, by the rules a whole run's is judged by.
    pub validity: Validity,
    /// Against the contract's SLO, with its verdict and support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloResult>,
    /// A `recovery` stage: how long after its start TTFT came back under the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// An edge search's step or wait: the rate the search chose for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_rps: Option<f64>,
}

/// How a `recovery` stage recovered from the stage before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recovery {
    /// The stage it recovers from.
    pub after: String,
    /// The TTFT it must come back under (`slo.ttft_ms`).
    pub threshold_ms: f64,
    /// Requests per sliding window (TTFT p99 over each).
    pub window_requests: usize,
    /// Seconds from the stage's start to the first request of the first window whose TTFT
    /// p99 is within the threshold; `None`: it did not recover within the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_after_s: Option<f64>,
    /// Whether every later window stayed within it.
    pub stayed: bool,
}

/// Requests per sliding window of the recovery measure: enough that a window's p99 is not one
/// request's latency alone, few enough to follow a queue as it drains.
pub const RECOVERY_WINDOW: usize = 20;

/// Each stage's result, in program order; `None` without a program. An edge search's steps
/// and waits follow the fixed stages, as the records name them.
pub fn summarize(c: &Contract, records: &[Record]) -> Option<Vec<StageResult>> {
    let program = &c.load.stage;
    if program.is_empty() {
        return None;
    }
    let origin = c.measurement.latency_origin;
    // The program's clock starts at its first arrival (warm-up's too: they are its first).
    let start = records
        .iter()
        .filter(|r| r.stage.is_some())
        .filter_map(|r| r.intended_us)
        .min()?;
    let first_of = |name: &str| {
        records
            .iter()
            .filter(|r| r.stage.as_deref() == Some(name))
            .filter_map(|r| r.intended_us)
            .min()
    };
    let mut at = start;
    let mut out = Vec::with_capacity(program.len());
    for (k, stage) in program.iter().enumerate() {
        if stage.shape == Shape::Edge {
            out.extend(edge_stages(c, stage, records, start));
            break;
        }
        let mine: Vec<&Record> = records
            .iter()
            .filter(|r| r.stage.as_deref() == Some(stage.name.as_str()))
            .collect();
        let end = match stage.seconds() {
            Some(t) => at + (t * 1e6).round() as u64,
            None => program
                .get(k + 1)
                .and_then(|next| first_of(&first_name(next)))
                .or_else(|| mine.iter().filter_map(|r| r.intended_us).max())
                .unwrap_or(at),
        };
        out.push(one(c, stage, (at, end), start, records, &mine, origin));
        at = end;
    }
    Some(out)
}

/// The name a stage's first records carry: an edge's is its first step's.
fn first_name(s: &Stage) -> String {
    if s.shape == Shape::Edge {
        s.step_name(1)
    } else {
        s.name.clone()
    }
}

/// The first words of the reason an edge step the run ended inside is no verdict.
pub const CUT_SHORT: &str = "cut short";

/// An edge search's steps and waits, each judged by [`judge_step`] on its own records.
fn edge_stages(c: &Contract, edge: &Stage, records: &[Record], start: u64) -> Vec<StageResult> {
    let mut out = Vec::new();
    for n in 1.. {
        let mut any = false;
        for (name, wait) in [(edge.step_name(n), false), (edge.wait_name(n), true)] {
            let own: Vec<Record> = records
                .iter()
                .filter(|r| r.stage.as_deref() == Some(name.as_str()))
                .cloned()
                .collect();
            let Some(rate) = own.iter().find_map(|r| r.stage_rps) else {
                continue;
            };
            any = true;
            let mut r = judge_step(c, &name, rate, wait, &own, start);
            let asked = edge.requests.unwrap_or(0);
            if !wait && (own.len() as u64) < asked {
                // The run ended inside it: what it measured is kept, and it is no verdict.
                r.slo = None;
                r.validity.verdict = ValidityVerdict::Invalid;
                r.validity.reasons.insert(
                    0,
                    format!(
                        "{CUT_SHORT}: the run ended after {} of its {asked} requests, so the search has no verdict from it",
                        own.len()
                    ),
                );
            }
            out.push(r);
        }
        if !any {
            break;
        }
    }
    out
}

/// An edge search's step (or its wait) judged on its own records alone, as the run judged it
/// to choose the next rate: its span from its first arrival to one gap past its last.
pub(super) fn judge_step(
    c: &Contract,
    name: &str,
    rate: f64,
    wait: bool,
    own: &[Record],
    start: u64,
) -> StageResult {
    let mine: Vec<&Record> = own.iter().collect();
    let times = || mine.iter().filter_map(|r| r.intended_us);
    let from = times().min().unwrap_or(start);
    let to = times().max().unwrap_or(from) + (1e6 / rate.max(1e-9)).round() as u64;
    let stage = Stage {
        name: name.to_owned(),
        rate: Some(rate),
        requests: Some(own.len() as u64),
        ..Stage::default()
    };
    let origin = c.measurement.latency_origin;
    let mut r = one(c, &stage, (from, to), start, own, &mine, origin);
    r.shape = if wait { "wait" } else { "edge" }.to_owned();
    r.edge_rps = Some(rate);
    r.offers = if wait {
        format!(
            "holds {} req/s until the step's requests finish ({} requests)",
            fmt_rps(rate),
            own.len()
        )
    } else {
        format!("{} req/s for {} requests", fmt_rps(rate), own.len())
    };
    r
}

fn fmt_rps(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// One stage's result: `span` on the run's clock, `start` the program's first arrival.
fn one(
    c: &Contract,
    stage: &Stage,
    span: (u64, u64),
    start: u64,
    records: &[Record],
    mine: &[&Record],
    origin: LatencyOrigin,
) -> StageResult {
    let steady: Vec<&Record> = mine
        .iter()
        .copied()
        .filter(|r| r.phase == Phase::Steady)
        .collect();
    let ok: Vec<&&Record> = steady.iter().filter(|r| r.is_ok()).collect();
    // Its window: the stage's own span, where its load was offered.
    let window = (span.1 > span.0).then_some(span);
    let mut throughput = throughput(c, records, &steady, &ok, window);
    // Offered over the same span as achieved: every arrival the stage scheduled (its warm-up
    // ones too: they loaded the server alike), not its steady requests' own spread.
    let span_s = span.1.saturating_sub(span.0) as f64 / 1e6;
    throughput.offered_rps = (span_s > 0.0).then(|| mine.len() as f64 / span_s);
    let stats = phase_stats(c, &steady);
    let (errors, _) = steady_errors(&steady);
    let before: Vec<&Record> = records
        .iter()
        .filter(|r| r.intended_us.is_some_and(|t| t < span.0))
        .collect();
    let after: Vec<&Record> = records
        .iter()
        .filter(|r| r.intended_us.is_some_and(|t| t >= span.1))
        .collect();
    let mut validity = validity(
        c,
        &ValidityInputs {
            records,
            steady: &steady,
            warmup: &before,
            drain: &after,
            stats: &stats,
            window,
            offered: throughput.offered_rps,
            achieved: throughput.achieved_rps,
            errors: &errors,
            interrupted: false,
            stopped: None,
            decided: None,
            guard: None,
        },
    );
    if stage.shape == Shape::Ramp {
        ramp_rules(&mut validity);
    }
    stage_rules(&mut validity, span_s, &stats, mine.len());
    let metrics = steady_request_metrics(&steady, origin, c.measurement.output_tokens);
    let slo = (c.slo.is_set() && !steady.is_empty())
        .then(|| slo_result(c, &steady, &metrics, throughput.achieved_rps));
    let recovery = (stage.shape == Shape::Recovery)
        .then(|| recovery(c, stage, mine, span.0, origin))
        .flatten();
    StageResult {
        name: stage.name.clone(),
        shape: stage.shape.as_str().to_owned(),
        offers: stage.describe(),
        from_s: span.0.saturating_sub(start) as f64 / 1e6,
        to_s: span.1.saturating_sub(start) as f64 / 1e6,
        stats,
        throughput,
        validity,
        slo,
        recovery,
        edge_rps: None,
    }
}

/// A ramp's requests in flight rise with its rate and its completions lag its arrivals, so the
/// overload and shortfall rules, which assume one offered rate, would read any ramp as
/// overload (a ramp to 86% of the simulator's capacity once read "about 10.8 req/s
/// sustained"): they are left out, and its TTFT and SLO verdict say how it went.
fn ramp_rules(validity: &mut Validity) {
    let dropped = validity.overload.take().is_some();
    let before = validity.reasons.len();
    validity
        .reasons
        .retain(|r| !r.starts_with("offered load above") && !r.starts_with("achieved "));
    if dropped || validity.reasons.len() < before {
        validity.cannot_support.push(
            "capacity (a ramp's rate changes throughout: read its TTFT against the SLO)".to_owned(),
        );
    }
    if validity.reasons.is_empty() {
        validity.verdict = ValidityVerdict::Valid;
    }
}

/// What a stage's validity adds to a whole run's rules: a stage shorter than its requests
/// take, and one the warm-up covered (`steady` empty: `stats.requests` is 0).
fn stage_rules(validity: &mut Validity, span_s: f64, stats: &PhaseStats, arrivals: usize) {
    // A stage shorter than its requests take ended before what it offered came back: its
    // rates say nothing of a steady state (a 5 s burst on a vLLM taking 12 s a request
    // "achieved" 0 req/s and passed every other rule).
    if let Some(e2e) = stats.e2e_ms.as_ref().map(|d| d.p50)
        && span_s * 1e3 < e2e
        && validity.overload.is_none()
    {
        validity.reasons.push(format!(
            "it lasted {span_s:.1} s, less than its requests took (E2E p50 {:.1} s): what it offered had not come back when it ended, so its rates describe no steady state (read its latencies as what its load did, and lengthen it for more)",
            e2e / 1e3
        ));
        validity.verdict = ValidityVerdict::Invalid;
    }
    // A stage the warm-up covered has nothing measured to judge.
    if stats.requests == 0 {
        validity.reasons.insert(
            0,
            format!(
                "none of its {} requests was measured: the warm-up (the program's first arrivals) covered it; lower warmup.requests or warmup.duration",
                arrivals
            ),
        );
        validity.verdict = ValidityVerdict::Invalid;
    }
}

/// A recovery stage's recovery from the stage before it: over its own requests, from its
/// start (`start_us`), against `slo.ttft_ms` (`None` without one).
fn recovery(
    c: &Contract,
    stage: &Stage,
    mine: &[&Record],
    start_us: u64,
    origin: LatencyOrigin,
) -> Option<Recovery> {
    let threshold = c.slo.ttft_ms?.0;
    let program = &c.load.stage;
    let k = program.iter().position(|s| s.name == stage.name)?;
    let after = program.get(k.checked_sub(1)?)?.name.clone();
    let points: Vec<(u64, Option<f64>)> = mine
        .iter()
        .filter_map(|r| {
            let o = origin_us(r, origin)?;
            let ttft = r
                .first_token_us
                .filter(|_| r.is_ok())
                .map(|f| f.saturating_sub(o) as f64 / 1e3);
            Some((o, ttft))
        })
        .collect();
    let window = RECOVERY_WINDOW.min(points.len()).max(1);
    let (recovered_after_s, stayed) = recovery_time(&points, start_us, threshold, window);
    Some(Recovery {
        after,
        threshold_ms: threshold,
        window_requests: window,
        recovered_after_s,
        stayed,
    })
}

/// When a queue drained: `points` are requests' (latency origin µs, TTFT ms; `None` for one
/// that failed), `start_us` the stage's start. Over windows of `window` consecutive requests
/// (by origin), the first whose TTFT p99 (nearest rank; a failure counts as a miss) is within
/// `threshold_ms`; returns seconds from `start_us` to that window's first request, and whether
/// every later window stayed within it. `None`: no window was.
///
/// The same function reads the simulator's ground truth in the tests, so the client's
/// recovery time is checked against the server's own.
pub fn recovery_time(
    points: &[(u64, Option<f64>)],
    start_us: u64,
    threshold_ms: f64,
    window: usize,
) -> (Option<f64>, bool) {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.0);
    let window = window.max(1).min(pts.len().max(1));
    let within: Vec<bool> = pts
        .windows(window)
        .map(|w| {
            let mut v: Vec<f64> = w.iter().map(|p| p.1.unwrap_or(f64::INFINITY)).collect();
            v.sort_by(f64::total_cmp);
            // Nearest rank: the ⌈0.99·n⌉-th smallest.
            let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
            v[rank - 1] <= threshold_ms
        })
        .collect();
    match within.iter().position(|w| *w) {
        Some(i) => (
            Some(pts[i].0.saturating_sub(start_us) as f64 / 1e6),
            within[i..].iter().all(|w| *w),
        ),
        None => (None, false),
    }
}

/// Why the whole run's figures are no result, when its program has several stages.
pub fn invalid_reason(stages: &[StageResult]) -> Option<String> {
    (stages.len() > 1).then(|| {
        format!(
            "a load program of {} stages: the whole run's figures mix their loads; each stage's own line is its result",
            stages.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_the_first_window_back_under_the_threshold() {
        // TTFT falls by 100 ms a request from 2 s: under 500 ms from the 16th request on.
        let pts: Vec<(u64, Option<f64>)> = (0..60u64)
            .map(|i| {
                (
                    1_000_000 + i * 100_000,
                    Some((2000.0 - 100.0 * i as f64).max(50.0)),
                )
            })
            .collect();
        let (t, stayed) = recovery_time(&pts, 1_000_000, 500.0, 5);
        // Window of 5 starting at request i has its max at i: under 500 from i = 15.
        assert_eq!(t, Some(1.5));
        assert!(stayed);
        // A failure inside a window is a miss.
        let mut with_failure = pts.clone();
        with_failure[40].1 = None;
        let (t, stayed) = recovery_time(&with_failure, 1_000_000, 500.0, 5);
        assert_eq!(t, Some(1.5));
        assert!(!stayed);
        // Never under: no recovery.
        assert_eq!(recovery_time(&pts, 1_000_000, 10.0, 5), (None, false));
    }
}
