//! Validity: whether a run's measurement is sound — the client kept its schedule, the server
//! reached a steady state (no queue that grew all run, no ramp still rising, no shortfall of
//! the offered rate), nothing was dropped, the run was not cut short — and, while a run goes,
//! whether its overload is already certain (`decided`). A sample's size never makes a run
//! INVALID: what a sample supports is `claims`' question.

use super::*;
use crate::contract::Drive;

/// What the validity rules read.
pub(super) struct ValidityInputs<'a> {
    pub(super) records: &'a [Record],
    pub(super) steady: &'a [&'a Record],
    pub(super) warmup: &'a [&'a Record],
    pub(super) drain: &'a [&'a Record],
    pub(super) stats: &'a PhaseStats,
    /// The steady window, µs on the run's clock.
    pub(super) window: Option<(u64, u64)>,
    pub(super) offered: Option<f64>,
    pub(super) achieved: Option<f64>,
    pub(super) errors: &'a BTreeMap<String, u64>,
    pub(super) interrupted: bool,
    pub(super) stopped: Option<&'a str>,
    /// Why the run stopped once decided: the overload it established while requests were in
    /// flight, which the records it kept (those requests abandoned) can no longer show.
    pub(super) decided: Option<&'a str>,
    /// The progress guard stopped the load, and its evidence.
    pub(super) guard: Option<&'a crate::driver::guard::GuardStop>,
}

/// Why the client fell behind its open-loop schedule, when its p99 dispatch lag passed the
/// contract's bound: the lag, and how much of it was a late wake-up or a busy runtime.
pub(super) fn client_behind_reason(c: &Contract, stats: &PhaseStats) -> Option<String> {
    let lag = stats
        .dispatch_lag_ms
        .as_ref()
        .filter(|lag| lag.p99 > c.measurement.max_dispatch_lag_ms.0)?;
    let mut why = format!(
        "the client fell behind its schedule: p99 dispatch lag {:.2} ms > {} ms (measurement.max_dispatch_lag_ms)",
        lag.p99, c.measurement.max_dispatch_lag_ms.0
    );
    if let (Some(w), Some(q)) = (&stats.dispatch_wake_ms, &stats.dispatch_queue_ms) {
        why += &format!(
            "; p99 {:.2} ms of it the dispatch thread woke late (the client machine's CPUs were busy, or slow to wake from idle: see environment.json client_wake_latency), p99 {:.2} ms requests waited for the client's runtime (the client was busy)",
            w.p99, q.p99
        );
    }
    Some(why)
}

/// What a load model can support, and what it cannot: an open loop, tail latency, goodput and
/// capacity at its rate; a closed loop, throughput and latency at its concurrency only.
pub(super) fn what_the_load_supports(c: &Contract) -> (String, Vec<String>) {
    match c.load.drive() {
        Drive::Open { .. } => (
            "tail latency, goodput and capacity at the offered rate".to_owned(),
            Vec::new(),
        ),
        Drive::Closed { users, .. } => (
            format!("throughput and latency at concurrency {users}"),
            vec![
                "tail latency under an arrival rate (the closed loop waits for the server, so its queue never builds)".to_owned(),
                "capacity (a closed loop slows down with the server)".to_owned(),
            ],
        ),
    }
}

/// Whether the run supports the claims its load model can make, with every reason it does not.
pub(super) fn validity(c: &Contract, v: &ValidityInputs) -> Validity {
    let open = c.load.is_open();
    let stats = v.stats;
    let mut reasons = Vec::new();
    let mut client_behind = false;
    let (mut overload, mut kept_up) = (None, None);
    match v.stopped {
        Some(why) => reasons.push(format!("the run ended before its stop condition: {why}")),
        None if v.interrupted => {
            reasons.push("the run was interrupted before its stop condition".to_owned());
        }
        None => {}
    }
    if open {
        if c.measurement.latency_origin == LatencyOrigin::Sent {
            reasons.push("open loop measured from the actual send (measurement.latency_origin = \"sent\"): coordinated omission is not corrected".to_owned());
        }
        if let Some(why) = client_behind_reason(c, stats) {
            client_behind = true;
            reasons.push(why);
        }
        if let (Some(d), Drive::Open { max_in_flight, .. }) =
            (v.errors.get("client_dropped"), c.load.drive())
        {
            reasons.push(format!(
                "{d} arrivals were client-dropped at load.max_in_flight = {max_in_flight}"
            ));
        }
        (overload, kept_up) = load_kept(c, v, &mut reasons);
    } else if let Some(g) = v.guard {
        reasons.push(format!(
            "the server fell behind and the progress guard stopped the load: {} (lower load.concurrency; docs/guide/safety.md)",
            g.why()
        ));
    }
    // A sample too small for a claim is not a fault of the measurement: each claim carries its
    // own support (`claims`; the SLO's verdict), so validity is about the measurement alone.
    let (supports, cannot_support) = what_the_load_supports(c);
    Validity {
        verdict: if reasons.is_empty() {
            ValidityVerdict::Valid
        } else {
            ValidityVerdict::Invalid
        },
        reasons,
        supports,
        cannot_support,
        client_behind,
        overload,
        kept_up,
        max_dispatch_lag_ms: open.then_some(c.measurement.max_dispatch_lag_ms.0),
    }
}

/// Whether an open-loop server kept up with the offered rate, each reason it did not added to
/// `reasons`: a queue that grew all run (its diagnosis returned too), the run stopped on its
/// overload, in flight still building up (a ramp), or fewer completions than the requests due
/// one median latency earlier beyond chance. `None`: nothing to judge by (no window, no
/// completed request).
fn load_kept(
    c: &Contract,
    v: &ValidityInputs,
    reasons: &mut Vec<String>,
) -> (Option<super::Overload>, Option<bool>) {
    let overload = growing_queue(c, v);
    // Without a queue that made requests wait longer, in flight still building up from the
    // run's start is a ramp: no rate shortfall can be told from it either.
    let ramping = overload.is_none().then(|| still_ramping(c, v)).flatten();
    // `None`: nothing to judge by (no window, no achieved rate or no latencies).
    let why = if let Some(g) = v.guard {
        // The load stopped where the server fell behind: what the guard saw is the evidence
        // (the kept records, its requests cancelled, cannot show the queue it stopped).
        Some(Err(format!(
            "offered load above what the server sustains, the progress guard stopped the load on it: {} (lower load.rate, or find the capacity with `goodput sweep --capacity`)",
            g.why()
        )))
    } else if let (None, Some(why)) = (&overload, v.decided) {
        // The verdict the run stopped on, established with its requests in flight counted
        // where they stood; the kept records alone (those requests abandoned) may not show it.
        Some(Err(format!(
            "offered load above what the server sustains, the run stopped on it: {why} (lower load.rate, or find the capacity with `goodput sweep --capacity`)"
        )))
    } else if let Some(why) = ramping {
        Some(Err(why))
    } else if let Some(o) = &overload {
        let phases: Vec<String> = o
            .ttft_p50_by_phase
            .iter()
            .map(|(p, t)| format!("{p} {t:.0}"))
            .collect();
        Some(Err(format!(
            "offered load above what the server sustains, about {:.2} req/s of the {:.2} offered: requests in flight rose from {:.0} to {:.0} over the steady window and TTFT p50 rose {} ms, so the queue grew all run and no steady state was reached (lower load.rate, or find the capacity with `goodput sweep --capacity`)",
            o.sustained_rps,
            v.offered.unwrap_or(0.0),
            o.in_flight_start,
            o.in_flight_end,
            phases.join(" → ")
        )))
    } else {
        rate_shortfall(c, v)
    };
    let kept = match why {
        Some(Err(why)) => {
            reasons.push(why);
            Some(false)
        }
        Some(Ok(())) => Some(true),
        None => None,
    };
    (overload, kept)
}

/// The one-sided normal quantile for `confidence` (0.5–0.9999), by bisection on the CDF.
pub(super) fn z_of(confidence: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    let Ok(n) = Normal::new(0.0, 1.0) else {
        return 2.0;
    };
    n.inverse_cdf(confidence.clamp(0.5, 0.9999))
}

/// Whether the server finished, inside the steady window, what a server keeping up would
/// have (`Err`: fewer by more than the contract's tolerance and more than chance, and why);
/// `None` without a window, an achieved and offered rate, or latencies to judge by.
///
/// A server that keeps up finishes, inside the window, the requests that arrived one typical
/// latency earlier: those whose origin + median E2E falls inside it. Comparing with that count
/// (instead of the window's own arrivals) cancels the window's edges, where a clump of late
/// arrivals or a missing warm-up makes raw achieved < offered on an idle server (30 requests
/// at 0.5 req/s fell 15% short that way). What remains by chance comes from latencies that
/// vary around the median: z·√(2·λ·(p90 − p50 E2E) + 1) requests, z at the contract's
/// confidence (one-sided normal).
pub(super) fn rate_shortfall(c: &Contract, v: &ValidityInputs) -> Option<Result<(), String>> {
    let (o, a) = (v.offered?, v.achieved?);
    let (lo, hi) = v.window?;
    let e2e = v.stats.e2e_ms.as_ref()?;
    let window_s = (hi - lo) as f64 / 1e6;
    let origin = |r: &Record| origin_us(r, c.measurement.latency_origin);
    let median_us = (e2e.p50 * 1000.0).max(0.0) as u64;
    let due = v
        .records
        .iter()
        .filter(|r| !matches!(r.phase, Phase::ColdStart | Phase::Quality))
        .filter_map(origin)
        .filter(|t| (lo..=hi).contains(&(t + median_us)))
        .count() as f64;
    let done = a * window_s;
    let spread_s = ((e2e.p90 - e2e.p50) / 1000.0).max(0.0);
    let slack = z_of(c.measurement.confidence) * (2.0 * o * spread_s + 1.0).sqrt();
    let tol = c.measurement.rate_tolerance;
    if done >= due * (1.0 - tol) || due - done <= slack {
        return Some(Ok(()));
    }
    Some(Err(format!(
        "achieved {a:.2} req/s is more than {:.0}% below what the offered {o:.2} req/s called for: {done:.0} completions in the {window_s:.1} s window where a server keeping up would have finished the {due:.0} requests that arrived one median latency ({:.2} s) earlier, {:.1} short, beyond the {slack:.1} that varying latencies explain",
        tol * 100.0,
        e2e.p50 / 1000.0,
        due - done
    )))
}

/// Samples of the steady window at which the queue is measured.
pub(super) const QUEUE_SAMPLES: usize = 40;

/// A queue that grew all run: requests in flight (due or sent, not finished) rise across the
/// steady window by clearly more than a stable queue wanders, and TTFT rises with them. The
/// server then had work throughout the window, so its completions per second there are the
/// rate it sustains.
/// Why the steady window cannot show a steady state, when the whole run up to its end is
/// shorter than a typical request takes: requests in flight were still building up from the
/// first arrival (a 1 s window of 4 s requests once read as overload at "0.00 req/s").
pub(super) fn still_ramping(c: &Contract, v: &ValidityInputs) -> Option<String> {
    let (_, hi) = v.window?;
    let e2e = v.stats.e2e_ms.as_ref()?.p50;
    let first = v
        .warmup
        .iter()
        .chain(v.steady)
        .filter_map(|r| origin_us(r, c.measurement.latency_origin))
        .min()?;
    let span_ms = hi.saturating_sub(first) as f64 / 1e3;
    (span_ms < e2e).then(|| {
        format!(
            "the run up to the steady window's end lasted {:.2} s, less than a request takes (E2E p50 {:.2} s): requests in flight were still building up, so no steady state was measured (lengthen the warm-up or the run)",
            span_ms / 1e3,
            e2e / 1e3
        )
    })
}

/// Whether an open-loop run still under way is already decided, so that the rest of its drain
/// can change nothing (`measurement.stop_when_decided`): its steady window is complete (the
/// last steady request sent) and the overload rule ([`growing_queue`]) already fires on what is
/// known, in a way later answers cannot undo. `records`: the requests finished so far (read
/// back from `requests.jsonl`); `pending`: those in flight (plan index, phase, latency origin
/// µs, first token µs when it came); `now_us`: the run's clock now.
///
/// Why it cannot change: requests in flight stay in flight to the end, so the queue over the
/// (complete) window is exact now; a request still waiting for its first token has waited at
/// least `now − origin`, so counting that as its TTFT is a lower bound, which only raises the
/// window's last third; and the rule is not applied while any request of the first third
/// still waits for its first token, which could still raise that third's median. Returns the
/// overload in words, as the summary will state it.
pub fn decided(
    c: &Contract,
    mut records: Vec<Record>,
    pending: &[(u64, Phase, u64, Option<u64>)],
    now_us: u64,
) -> Option<String> {
    if !c.load.is_open() || c.workload.sessions.is_some() {
        return None;
    }
    let done: std::collections::HashSet<u64> = records.iter().map(|r| r.index).collect();
    for &(index, phase, origin, first) in pending {
        if done.contains(&index) || !matches!(phase, Phase::Warmup | Phase::Steady | Phase::Drain) {
            continue;
        }
        let mut r = Record::in_flight(index, phase, origin);
        // Its TTFT, or a lower bound of it: it has waited this long already.
        r.first_token_us = Some(first.unwrap_or(now_us.max(origin)));
        records.push(r);
    }
    let latency = c.measurement.latency_origin;
    let by = |p: Phase| -> Vec<&Record> { records.iter().filter(|r| r.phase == p).collect() };
    let (steady, warmup, drain) = (by(Phase::Steady), by(Phase::Warmup), by(Phase::Drain));
    let window = steady_window(&steady, latency)?;
    // Every request of the window's first third must have its first token (or have ended):
    // a bound there could still rise.
    let third = ((window.1 - window.0) / 3).max(1);
    let early_open = pending.iter().any(|&(index, phase, origin, first)| {
        phase == Phase::Steady
            && first.is_none()
            && !done.contains(&index)
            && origin < window.0 + third
    });
    if early_open {
        return None;
    }
    let offered = rate(steady.iter().filter_map(|r| origin_us(r, latency)));
    let stats = PhaseStats::default();
    let errors = BTreeMap::new();
    let o = growing_queue(
        c,
        &ValidityInputs {
            records: &records,
            steady: &steady,
            warmup: &warmup,
            drain: &drain,
            stats: &stats,
            window: Some(window),
            offered,
            achieved: None,
            errors: &errors,
            interrupted: false,
            stopped: None,
            decided: None,
            guard: None,
        },
    )?;
    Some(format!(
        "overload certain: requests in flight rose from {:.0} to {:.0} over the steady window, about {:.2} req/s sustained of the {:.2} offered, and TTFT rose with them",
        o.in_flight_start,
        o.in_flight_end,
        o.sustained_rps,
        offered.unwrap_or(0.0)
    ))
}

/// Requests the steady window's first and last thirds must each hold before their TTFT medians
/// can say the queue made requests wait longer.
pub(super) const MIN_THIRD: usize = 8;

/// Requests in flight at `QUEUE_SAMPLES` evenly spaced instants of the window `(lo, hi)`
/// (µs), as (seconds, requests): a request is in flight from its latency origin to its end
/// (to the end of time when it never ended).
pub(super) fn in_flight_samples(
    records: &[Record],
    origin: &dyn Fn(&Record) -> Option<u64>,
    (lo, hi): (u64, u64),
) -> Vec<(f64, f64)> {
    let mut starts: Vec<u64> = Vec::new();
    let mut ends: Vec<u64> = Vec::new();
    for r in records
        .iter()
        .filter(|r| !matches!(r.phase, Phase::ColdStart | Phase::Quality))
    {
        if let Some(s) = origin(r) {
            starts.push(s);
            // A request never finished (interrupted) stays in flight to the end.
            ends.push(r.end_us.unwrap_or(u64::MAX));
        }
    }
    starts.sort_unstable();
    ends.sort_unstable();
    let at = |t: u64| {
        (starts.partition_point(|&s| s <= t) as f64) - (ends.partition_point(|&e| e <= t) as f64)
    };
    let w = (hi - lo) as f64;
    (0..QUEUE_SAMPLES)
        .map(|k| {
            let t = lo as f64 + (k as f64 + 0.5) / QUEUE_SAMPLES as f64 * w;
            (t / 1e6, at(t as u64))
        })
        .collect()
}

/// The least-squares slope of `pts` (y per x) and the mean of y; `None` when x does not vary.
pub(super) fn least_squares_slope(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (sxy / sxx, my))
}

pub(super) fn growing_queue(c: &Contract, v: &ValidityInputs) -> Option<Overload> {
    let o = v.offered?;
    let (lo, hi) = v.window?;
    let origin = |r: &Record| origin_us(r, c.measurement.latency_origin);
    let pts = in_flight_samples(v.records, &origin, (lo, hi));
    let w = (hi - lo) as f64;
    let (slope, my) = least_squares_slope(&pts)?;
    let growth = slope * w / 1e6;
    // A stable queue wanders by about the square root of its mean length (M/M/c-like);
    // growth must clear twice that, and at least three requests, both as the fitted trend and
    // from the window's first sample to its last (a few requests' noise can tilt a fit while
    // the queue ends shorter than it began: "rose from 2 to 0" was once reported).
    let wander = (2.0 * my.max(0.0).sqrt()).max(3.0);
    let (first, last) = (
        pts.first().map_or(0.0, |p| p.1),
        pts.last().map_or(0.0, |p| p.1),
    );
    if growth <= wander || last - first <= wander {
        return None;
    }
    // TTFT rises with the queue: the steady window's last third against its first.
    let ttft = |rs: &[&Record]| {
        let mut x: Vec<f64> = rs
            .iter()
            .filter_map(|r| Some(ms(origin(r)?, r.first_token_us?)))
            .collect();
        x.sort_by(f64::total_cmp);
        percentile_sorted(&x, 50.0)
    };
    let third = ((hi - lo) / 3).max(1);
    let part = |a: u64, b: u64| -> Vec<&Record> {
        v.steady
            .iter()
            .copied()
            .filter(|r| origin(r).is_some_and(|t| t >= a && t < b))
            .collect()
    };
    let (early, late) = (part(lo, lo + third), part(hi - third, hi + 1));
    // A median of a handful of requests rises by 30% by chance: too few to claim overload on.
    if early.len().min(late.len()) < MIN_THIRD {
        return None;
    }
    let (early, late) = (ttft(&early), ttft(&late));
    if !matches!((early, late), (Some(e), Some(l)) if l > 1.3 * e) {
        return None;
    }
    let ttft_p50_by_phase = [
        ("warm-up", v.warmup),
        ("steady", v.steady),
        ("drain", v.drain),
    ]
    .into_iter()
    .filter_map(|(name, rs)| Some((name.to_owned(), ttft(rs)?)))
    .collect();
    Some(Overload {
        sustained_rps: v.achieved.unwrap_or((o - slope).max(0.0)),
        growth_rps: slope,
        in_flight_start: pts.first().map_or(0.0, |p| p.1),
        in_flight_end: pts.last().map_or(0.0, |p| p.1),
        ttft_p50_by_phase,
    })
}
