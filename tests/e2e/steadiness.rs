//! Steady state found rather than assumed (issue #48): on the simulator's discrete-event clock,
//! a warm-up transient (its `warmup_slowdown`) is cropped where the ground truth says it ended,
//! and an overloaded run says "no steady state".

use crate::common;

use goodput::analyze::{Context, summarize};

fn contract(rate: f64, slowdown: f64) -> goodput::contract::Contract {
    common::parse(&format!(
        "name = \"steady\"\n[workload]\nseed = 11\ninput_tokens = {{ dist = \"fixed\", value = 300 }}\noutput_tokens = {{ dist = \"fixed\", value = 30 }}\n\
         [load]\nrate = {rate}\nrequests = 600\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 1000\n\
         [target.simulator]\nmax_batch = 8\nprefill_tokens_per_s = 20000\ndecode_base_ms = 10\ndecode_per_seq_ms = 0.5\nwarmup_slowdown = {slowdown}\nwarmup_steps = 300\n"
    ))
}

/// The first request from which on every request's TTFT is within 10% (and 2 ms) of the same
/// plan's on the same engine without the warm-up penalty: where the transient truly ended.
fn truth(rate: f64) -> usize {
    let ttfts = |slowdown: f64| -> Vec<f64> {
        let c = contract(rate, slowdown);
        let mut recs = common::des_records(&c, 0);
        recs.sort_by_key(|r| r.intended_us);
        recs.iter()
            .map(|r| (r.first_token_us.unwrap() - r.intended_us.unwrap()) as f64 / 1e3)
            .collect()
    };
    let (pen, base) = (ttfts(5.0), ttfts(1.0));
    let off = |i: usize| pen[i] > base[i] * 1.1 + 2.0;
    (0..pen.len()).rev().find(|&i| off(i)).map_or(0, |i| i + 1)
}

#[test]
fn a_warm_up_transient_is_cropped_where_it_ended_and_the_too_short_warm_up_is_named() {
    let rate = 6.0;
    let t = truth(rate);
    let c = contract(rate, 5.0);
    let s = summarize(&c, &common::des_records(&c, 60), &Context::default());
    let st = s.steady_state.clone().unwrap();
    eprintln!("truth {t}; detected {} ({})", st.begins_at, st.evidence);
    assert!(t > 50, "the penalty makes a transient: {t}");
    assert!(st.reached, "{st:?}");
    // Stated bound: within 25 requests (five batch means) or 20% of the truth.
    let bound = (0.2 * t as f64).max(25.0);
    assert!(
        (st.begins_at as f64 - t as f64).abs() <= bound,
        "detected {} vs truth {t}",
        st.begins_at
    );
    // Its 20 warm-up requests were too few: the run says so, and how many would do.
    assert_eq!(s.validity.verdict.to_string(), "INVALID");
    assert!(
        s.validity
            .reasons
            .iter()
            .any(|r| r.contains("the warm-up was too short")),
        "{:?}",
        s.validity.reasons
    );
    // The same engine without the penalty: steady from the start, VALID.
    let c = contract(rate, 1.0);
    let s = summarize(&c, &common::des_records(&c, 60), &Context::default());
    let st = s.steady_state.unwrap();
    assert!(st.reached && st.begins_at == 0, "{st:?}");
    assert_eq!(s.validity.verdict.to_string(), "VALID", "{:?}", s.validity);
}

#[test]
fn an_overloaded_run_reaches_no_steady_state() {
    let c = contract(60.0, 1.0);
    let s = summarize(&c, &common::des_records(&c, 60), &Context::default());
    let st = s.steady_state.unwrap();
    assert!(!st.reached, "{st:?}");
    assert!(
        st.evidence
            .starts_with("no steady state reached: TTFT rose"),
        "{}",
        st.evidence
    );
}

/// A contract that stops once TTFT p90 is known within ±10%, with a budget of 3000 requests.
fn precise(seed: u64, target: &str) -> goodput::contract::Contract {
    common::parse(&format!(
        "name = \"precise\"\n{target}[workload]\nseed = {seed}\ninput_tokens = {{ dist = \"uniform\", min = 100, max = 400 }}\noutput_tokens = {{ dist = \"fixed\", value = 20 }}\n\
         [load]\nrate = 20\nrequests = 3000\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 100\npercentile = 90\nattainment = 0.8\n\
         [measurement.stop]\nprecision = 0.1\n\
         [target.simulator]\nmax_batch = 16\nprefill_tokens_per_s = 20000\ndecode_base_ms = 5\ndecode_per_seq_ms = 0.2\n"
    ))
}

/// The stop rule applied to the discrete-event ground truth as the collector applies it: the
/// steady requests fed in the order they finish; once it holds, the arrivals after that
/// instant are drain. Returns the records so relabelled.
fn stopped_when_known(c: &goodput::contract::Contract) -> Vec<goodput::record::Record> {
    let mut recs = common::des_records(c, 0);
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut known = goodput::analyze::precision::Known::new(c, flag.clone()).unwrap();
    let mut by_end: Vec<&goodput::record::Record> = recs
        .iter()
        .filter(|r| r.phase == goodput::plan::Phase::Steady)
        .collect();
    by_end.sort_by_key(|r| r.end_us);
    let at = by_end.iter().find_map(|r| {
        known.finished(r);
        flag.load(std::sync::atomic::Ordering::Acquire)
            .then_some(r.end_us.unwrap())
    });
    if let Some(at) = at {
        for r in recs.iter_mut() {
            if r.phase == goodput::plan::Phase::Steady && r.intended_us.unwrap() >= at {
                r.phase = goodput::plan::Phase::Drain;
            }
        }
    }
    recs
}

/// Over 20 seeds: the run that stops once TTFT p90 is known within ±10% uses fewer requests
/// than a fixed count chosen to reach that precision on every seed, far fewer than the 3000
/// planned, and its SLO verdict is the fixed-count run's.
#[test]
fn stopping_when_known_takes_fewer_requests_and_agrees_with_the_fixed_count_verdict() {
    let (mut counts, mut needs) = (Vec::new(), Vec::new());
    for seed in 1..=20 {
        let c = precise(seed, "");
        let fixed = summarize(&c, &common::des_records(&c, 0), &Context::default());
        let stopped = summarize(&c, &stopped_when_known(&c), &Context::default());
        let p = stopped.precision.as_ref().unwrap();
        let (n_stop, n_fixed) = (stopped.steady.stats.requests, fixed.steady.stats.requests);
        eprintln!(
            "seed {seed}: stopped after {n_stop} steady requests, fixed count {n_fixed}; {}",
            p.detail
        );
        assert!(p.stopped_early, "{p:?}");
        assert!(n_stop < n_fixed / 2, "{n_stop} vs {n_fixed}");
        let (a, b) = (
            stopped.steady.slo.as_ref().unwrap(),
            fixed.steady.slo.as_ref().unwrap(),
        );
        assert_eq!(a.pass, b.pass, "seed {seed}: verdicts differ");
        counts.push(n_stop);
        // What a fixed count would have needed for the same precision on this seed: the
        // shortest prefix (in send order) on which the rule holds.
        let recs = common::des_records(&c, 0);
        let steady: Vec<&goodput::record::Record> = recs
            .iter()
            .filter(|r| r.phase == goodput::plan::Phase::Steady)
            .collect();
        let need = (100..=steady.len())
            .step_by(10)
            .find(|&n| goodput::analyze::precision::known(&c, &steady[..n]).is_some())
            .unwrap_or(steady.len());
        needs.push(need as u64);
    }
    // A fixed count is chosen before the run: to reach the precision on every seed it must be
    // the most any seed needed; stopping when known spends each seed's own.
    let worst = *needs.iter().max().unwrap();
    let mean = counts.iter().sum::<u64>() as f64 / counts.len() as f64;
    eprintln!(
        "steady requests when known: {counts:?} (mean {mean:.0}); a fixed count needs {worst} for ±10% on every seed (each seed's own: {needs:?})"
    );
    assert!(mean < worst as f64, "{mean} vs {worst}");
}

/// Through the client: the embedded simulator's run ends its measured phase once the answer
/// is known, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_through_the_client_stops_once_known_and_says_so() {
    let c = precise(1, "");
    let dir = tempfile::tempdir().unwrap();
    let r = common::run_in(c, dir.path()).await;
    let p = r.summary.precision.as_ref().unwrap();
    assert!(p.stopped_early, "{p:?}");
    assert!(p.requests < 3000 && p.budget == Some(3000), "{p:?}");
    let text = goodput::report::document(&r.summary).markdown();
    assert!(text.contains("Stopped when known: "), "{text}");
    // The rule is judged on the requests finished so far; the slow ones still in flight can
    // widen the final interval past the target, and the report then says so rather than
    // claiming the precision (seen in CI: held at 157 requests, ±16.8% with the rest).
    assert!(
        text.contains("every SLO percentile was known within ±10%")
            || text.contains(
                "the rule held on the requests finished by then; with those then in flight, precision reached"
            ),
        "{text}"
    );
}
