//! Answers a user can trust (issue #16), one regression test per wrong answer found on the
//! first afternoon: a capacity that failed its own SLO, a "cold" cache warm from the previous
//! run, the wrong model measured, a report that did not say what it measured, overload
//! diagnosed as a short warm-up, small runs INVALID on Poisson noise, Ctrl-C counted as SLO
//! misses, and closed loop always INVALID.

use crate::common;

use std::path::Path;

use goodput::analyze::{Context, summarize};
use goodput::contract::Contract;
use goodput::plan::{Phase, Plan};
use goodput::record::{Outcome, Record};
use goodput::sim::SimConfig;

use common::{parse, run_in, try_run_in};

/// A quick simulated engine with its prefix cache on.
fn fast() -> SimConfig {
    SimConfig {
        prefill_tokens_per_s: 50_000.0,
        decode_base_ms: 3.0,
        decode_per_seq_ms: 0.05,
        ..SimConfig::default()
    }
}

fn with_rate(src: &str, rate: f64) -> Contract {
    let text = goodput::sweep::set_key(src, "load.rate", &format!("{rate:.4}")).unwrap();
    goodput::contract::parse(&text, Path::new("t.toml")).unwrap()
}

const CAPACITY: &str = "name = \"cap\"\n[workload]\nseed = 4\ninput_tokens = { dist = \"fixed\", value = 400 }\noutput_tokens = { dist = \"fixed\", value = 6 }\n\
    [load]\nmodel = \"open\"\nrate = 30\nrequests = 150\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 150\npercentile = 90\nattainment = 0.8\n[quality]\nmode = \"consistency\"\nprobes = 4\n\
    [target.simulator]\nprefill_tokens_per_s = 20000\ndecode_base_ms = 4\ndecode_per_seq_ms = 0.05\n";

/// Issue #16, item 1: the capacity search answered a rate whose own report said "SLO NOT
/// met" and INVALID, because it checked attainment alone. Capacity is now the highest rate
/// whose run meets the SLO (percentile thresholds *and* attainment) and is VALID; the same
/// rule, applied through the same analysis to the simulator's discrete-event ground truth,
/// gives the capacity the client's search must land near.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_is_the_highest_valid_rate_that_meets_the_percentile_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.toml");
    std::fs::write(&path, CAPACITY).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, r) =
        goodput::sweep::capacity(&path, CAPACITY, 0.05, 10, std::time::Duration::ZERO, &o)
            .await
            .unwrap();
    let c = r.capacity.as_ref().unwrap();
    if common::stopped_by_the_machine(&parent, &r) {
        return;
    }
    let (lo, hi) = (c.capacity_rps.unwrap(), c.failed_at_rps.unwrap());
    // Every point the search called passing meets the SLO by its own report and is VALID;
    // every failing one does not, or is INVALID.
    let mut behind_at = vec![];
    for p in &r.points {
        let s: goodput::analyze::Summary =
            serde_json::from_str(&std::fs::read_to_string(p.bundle.join("summary.json")).unwrap())
                .unwrap();
        let rate: f64 = p.value.parse().unwrap();
        if s.validity.client_behind {
            behind_at.push((rate, p.bundle.clone()));
        }
        let passed = c
            .tried
            .iter()
            .find(|(t, _)| (t - rate).abs() < 1e-3)
            .unwrap()
            .1;
        // A pass its confirmation refuted fails from then on.
        assert_eq!(
            passed,
            goodput::sweep::passes_capacity(&s) && !p.refuted,
            "{p:?}"
        );
        if p.refuted {
            continue;
        }
        assert_eq!(
            passed,
            s.steady.slo.as_ref().unwrap().pass && s.validity.verdict == "VALID"
        );
    }
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(md.contains("Capacity rule: the highest offered rate whose run meets the SLO (TTFT p90 ≤ 150 ms and attainment ≥ 80%) and is VALID"), "{md}");
    // Issue #71: the SLO is at p90, so every format shows TTFT p90 (and its median), not p99:
    // the table, the point lines, sweep.json and the chart.
    assert!(
        md.contains("TTFT p90 (≤ 150)") && md.contains("TTFT p50"),
        "{md}"
    );
    assert!(!md.contains("TTFT p99"), "{md}");
    let line = goodput::sweep::point_line(1, "load.rate", &r.points[0]);
    assert!(
        line.contains("TTFT p90 (≤ 150)") && !line.contains("p99"),
        "{line}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(parent.path("sweep.json")).unwrap()).unwrap();
    let first = &json["points"][0];
    assert_eq!(first["slo_percentile"], 90.0, "{first}");
    assert_eq!(first["slo_metrics"][0]["metric"], "ttft", "{first}");
    assert!(first["slo_metrics"][0]["value_ms"].is_number(), "{first}");
    let html = std::fs::read_to_string(parent.path("sweep.html")).unwrap();
    assert!(
        html.contains("TTFT p90"),
        "the chart draws the SLO's percentile"
    );
    assert!(
        md.contains(&format!("Last passing point {lo:.2} req/s")),
        "{md}"
    );
    assert!(
        md.contains(&format!("first failing point {hi:.2} req/s (")),
        "{md}"
    );

    // Issue #71: the answer is the rate its passing point offered, not the nominal rate asked
    // of it (a Poisson draw offers the nominal only on average), and each point drew its own
    // arrivals.
    let answer = r
        .points
        .iter()
        .rfind(|p| p.value == format!("{lo:.4}") && p.slo_met == Some(true))
        .unwrap();
    assert_eq!(c.offered_rps, answer.offered_rps, "{c:?}");
    assert!(
        md.contains(&format!(
            "Capacity at the SLO: offered {:.2} req/s",
            c.offered_rps.unwrap()
        )),
        "{md}"
    );
    assert!(
        md.contains("each point drew its own arrivals (workload.seed 4, 5, … by point)"),
        "{md}"
    );
    let seeds: std::collections::BTreeSet<u64> = r
        .points
        .iter()
        .map(|p| {
            let t = std::fs::read_to_string(p.bundle.join("contract.toml")).unwrap();
            goodput::contract::parse(&t, Path::new("c.toml"))
                .unwrap()
                .workload
                .seed
        })
        .collect();
    assert_eq!(seeds.len(), r.points.len(), "one draw per point: {seeds:?}");
    let lo = c.offered_rps.unwrap();

    // The same search, on the discrete-event clock, judged by the same function, over ten
    // arrival draws (seeds): the capacity of the server, not of one draw.
    let each = common::des_capacities(CAPACITY, 30.0, 0..10).await;
    let t = (each[4] + each[5]) / 2.0;
    eprintln!(
        "client offered {lo:.2} (nominal bracket to {hi:.2}) req/s; simulator median {t:.2} of {each:?}; tried {:?}",
        c.tried
    );
    // A point the client could not keep on schedule is INVALID, and rightly fails: on a
    // machine that wakes its threads milliseconds late (the CI host's slow spells) that comes
    // before the server's limit, and the search lands below it, as it should. The rule was
    // checked on every point above; the simulator's capacity is the bound only where the
    // machine wakes on time.
    if lo < 0.85 * t
        && behind_at
            .iter()
            .any(|(_, b)| common::the_machine_kept_the_client_behind(b))
    {
        let rates: Vec<f64> = behind_at.iter().map(|x| x.0).collect();
        eprintln!(
            "the client fell behind its schedule at {rates:?} req/s, kept there by this machine: the capacity is the client's"
        );
        return;
    }
    assert!((lo - t).abs() / t <= 0.15, "client {lo} vs simulator {t}");
}

/// Issue #44: a capacity search on points too small to support p99 (60 requests, 459
/// needed) still answers, marked indicated, and lands within 20% of the same search judged by
/// the same rule on the simulator's discrete-event clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indicated_capacity_on_small_points_lies_near_the_simulators() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.toml");
    let src = CAPACITY
        .replace("percentile = 90", "percentile = 99")
        .replace("requests = 150", "requests = 60");
    std::fs::write(&path, &src).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, r) =
        goodput::sweep::capacity(&path, &src, 0.05, 10, std::time::Duration::ZERO, &o)
            .await
            .unwrap();
    let c = r.capacity.as_ref().unwrap();
    if common::stopped_by_the_machine(&parent, &r) {
        return;
    }
    let lo = c.capacity_rps.expect("a rate passed");
    // No point of 60 requests supports p99: the answer is indicated, and says so.
    assert_eq!(c.supported_rps, None, "{c:?}");
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(
        md.contains(&format!("nominal load.rate {lo:.2}), indicated only")),
        "{md}"
    );
    assert!(md.contains("not confirmed"), "{md}");
    // The contract's own draw (seed 4), as its points drew theirs before issue #71.
    let t = common::des_capacities(&src, 30.0, 4..5).await[0];
    eprintln!(
        "client {lo:.2} req/s (indicated); simulator {t:.2}; tried {:?}",
        c.tried
    );
    let behind = r
        .points
        .iter()
        .any(|p| p.client_limited && common::the_machine_kept_the_client_behind(&p.bundle));
    if lo < 0.8 * t && behind {
        eprintln!("the machine kept the client behind: the capacity is the client's");
        return;
    }
    assert!((lo - t).abs() / t <= 0.2, "client {lo} vs simulator {t}");
}

/// A rate where the server meets the SLO but the client falls behind its schedule, twice, ends the
/// capacity search there, saying so: every lower rate would find the client's limit. (A
/// dispatch-lag bound of 1 µs no client keeps; the simulator meets the SLO at 30 req/s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_search_stops_where_only_the_client_failed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.toml");
    let src = format!("{CAPACITY}[measurement]\nmax_dispatch_lag_ms = 0.001\n");
    std::fs::write(&path, &src).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, r) =
        goodput::sweep::capacity(&path, &src, 0.05, 10, std::time::Duration::ZERO, &o)
            .await
            .unwrap();
    let c = r.capacity.as_ref().unwrap();
    // Run again once (a lone late wake-up is not the client's limit), then stopped.
    assert_eq!(c.tried, [(30.0, false), (30.0, false)], "{c:?}");
    assert_eq!(c.retried_for_client, [30.0]);
    assert_eq!(c.stopped_by_client_at, Some(30.0));
    assert_eq!(c.capacity_rps, None);
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(
        md.contains("The search stopped at 30.00 req/s: the server met the SLO there, but the client fell behind its schedule"),
        "{md}"
    );
    assert!(
        md.contains("Run twice: 30.00 req/s, where the first run's client fell behind"),
        "{md}"
    );
}

/// Issue #44: a capacity search whose points are too small to support the SLO's percentile
/// is not refused. Each point is judged on the sample it has (a pass indicated, a clear miss
/// conclusive), every point is printed as it finishes, and the answer is confirmed by one run
/// with the requests its claim needs when that fits `--confirm-within`.
#[test]
fn a_capacity_search_on_small_points_is_indicated_then_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    // Short prompts: the engine's capacity is a few times the first rate, so the confirmation
    // (about 1,500 requests at that rate) takes seconds.
    let src = CAPACITY
        .replace("percentile = 90", "percentile = 99")
        .replace("requests = 150", "requests = 60")
        .replace("value = 400", "value = 100");
    std::fs::write(&path, &src).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args([
            "sweep",
            "--capacity",
            "--max-runs",
            "3",
            "--confirm-within",
            "5m",
        ])
        .arg(&path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Said before the first run: p99 at 99% needs 459, a point sends about 60.
    assert!(
        err.contains(
            "p99 needs at least 459 steady requests with no miss and a point sends about 60"
        ),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            std::fs::read_dir(dir.path().join("runs/cap"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
                .join("sweep.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let points = json["points"].as_array().unwrap();
    // Each point was printed as it finished, in order, with its verdict.
    for (i, p) in points.iter().enumerate() {
        let line = format!("point {}", i + 1);
        assert!(err.contains(&line), "{line} missing: {err}");
        assert!(p["steady_requests"].as_u64().unwrap() > 0);
    }
    let cap = &json["capacity"];
    let Some(rate) = cap["capacity_rps"].as_f64() else {
        return; // no rate passed within three runs: nothing to confirm
    };
    // A 60-request point cannot support p99: the pass it found is indicated, then confirmed.
    let first = points.iter().find(|p| {
        p["confirmation"] != true
            && (p["value"].as_str().unwrap().parse::<f64>().unwrap() - rate).abs() < 1e-9
    });
    if let Some(p) = first {
        assert_eq!(p["slo_verdict"], "met_indicated", "{p}");
    }
    let confirmed = &cap["confirmation"];
    assert!(confirmed.is_object(), "{cap}");
    assert!(
        confirmed["requests"].as_u64().unwrap() >= 459,
        "{confirmed}"
    );
    let run = points
        .iter()
        .find(|p| p["confirmation"] == true)
        .expect("the confirmation is a point of the sweep");
    assert!(run["steady_requests"].as_u64().unwrap() >= 459, "{run}");
    assert!(err.contains("(confirmation): load.rate"), "{err}");
    // The answer says which rate is supported and which only indicated.
    let md = std::fs::read_to_string(
        dir.path()
            .join(points[0]["bundle"].as_str().unwrap())
            .parent()
            .unwrap()
            .join("sweep.md"),
    )
    .unwrap();
    if confirmed["verdict"] == "met" {
        assert_eq!(cap["supported_rps"].as_f64(), Some(rate));
        assert!(md.contains("supported"), "{md}");
    } else {
        assert!(md.contains("indicated"), "{md}");
    }
}

const COLD: &str = "name = \"cold\"\n[workload]\nseed = 9\ninput_tokens = { dist = \"fixed\", value = 96 }\noutput_tokens = { dist = \"fixed\", value = 4 }\n\
    [load]\nmodel = \"open\"\nrate = 40\nrequests = 40\n[warmup]\nrequests = 4\n[slo]\nttft_ms = 500\n[quality]\nmode = \"consistency\"\nprobes = 8\n";

/// Issue #16, item 2: the same seed gave the same prompts, so a second run hit the prefix
/// cache the first had filled. Each run now draws its own cache nonce: the second of two
/// consecutive cold runs against one simulator has no cached prompt token at all, and the
/// quality probes (the same prompts in both) still compare request by request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cold_runs_in_a_row_find_nothing_in_the_cache() {
    let sim = common::sim(fast()).await;
    let dir = tempfile::tempdir().unwrap();
    let src = format!("{COLD}[target]\nurl = \"{}\"\n", sim.base_url());
    let a = run_in(parse(&src), dir.path()).await;
    let b = run_in(parse(&src), dir.path()).await;
    let nonce = |r: &goodput::run::RunResult| {
        goodput::contract::load(&r.bundle.path("contract.toml"))
            .unwrap()
            .workload
            .cache_nonce
            .unwrap()
    };
    assert_ne!(nonce(&a), nonce(&b));
    for r in [&a, &b] {
        let steady: Vec<&Record> = r
            .records
            .iter()
            .filter(|x| x.phase == Phase::Steady)
            .collect();
        assert_eq!(steady.len(), 40);
        for x in steady {
            assert_eq!(x.usage_cached_tokens, Some(0), "{x:?}");
        }
        assert!(r.summary.warnings.is_empty(), "{:?}", r.summary.warnings);
        assert_eq!(r.summary.quality.as_ref().unwrap().probes, 8);
    }
    // The fingerprints ignore the nonce: one workload.
    assert_eq!(a.summary.fingerprints, b.summary.fingerprints);
    // `goodput plan` of a bundle's contract reproduces the prompts it sent.
    let (c, inputs) = goodput::workload::load(&b.bundle.path("contract.toml")).unwrap();
    let plan = Plan::new(&c, &inputs);
    let first = b.records.iter().find(|x| x.phase == Phase::Steady).unwrap();
    assert!(
        plan.request(first.index)
            .prompt
            .starts_with(&format!("n{}", nonce(&b)))
    );
    // Probes: the same prompts in both runs, so outputs pair up and agree exactly here.
    let (sa, sb) = (
        goodput::compare::load_side(&a.bundle.dir).unwrap(),
        goodput::compare::load_side(&b.bundle.dir).unwrap(),
    );
    let cmp = goodput::compare::compare(&sa, &sb, 0.05);
    assert_eq!(
        cmp.quality.status,
        goodput::compare::GuardStatus::Held,
        "{}",
        cmp.quality.detail
    );
    let c = cmp.quality.consistency.as_ref().unwrap();
    assert_eq!((c.phase.as_str(), c.pairs), ("quality", 8));
    assert_eq!(c.token_agreement, Some(1.0));
    assert_eq!(cmp.sides[0].cached_share, Some(0.0));
    let text = common::unwrapped(&goodput::compare::document(&[cmp]).terminal());
    assert!(
        text.contains("0.0% of prompt tokens served from the cache"),
        "{text}"
    );
}

/// The headline warning a cold run gets when the server did serve its prompts from the
/// cache: here, records whose prompts repeat a previous run's (no nonce).
#[test]
fn a_cold_run_served_from_the_cache_is_called_out() {
    let c = with_rate(CAPACITY, 5.0);
    let mut recs = common::des_records(&c, 10);
    let s = summarize(&c, &recs, &Context::default());
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    for r in recs.iter_mut().filter(|r| r.phase == Phase::Steady) {
        r.usage_cached_tokens = Some(384);
    }
    let s = summarize(&c, &recs, &Context::default());
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert!(
        s.warnings[0].starts_with("COLD CACHE WAS WARM: 150 of 150 steady requests"),
        "{}",
        s.warnings[0]
    );
    let report = common::unwrapped(&goodput::report::document(&s).terminal());
    let lines: Vec<&str> = report.lines().filter(|l| !l.trim().is_empty()).collect();
    // Right under the headline and the target line.
    assert!(
        lines[4].starts_with("WARNING: COLD CACHE WAS WARM"),
        "{report}"
    );
}

/// Issue #16, item 3: a contract naming a model the server does not serve ran, and was
/// graded comparable. It now fails before any load, listing what the server serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_model_fails_before_any_load_with_the_served_list() {
    let sim = common::sim(fast()).await;
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "{COLD}[target]\nurl = \"{}\"\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n",
        sim.base_url()
    );
    let err = try_run_in(parse(&src), dir.path()).await.unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("target.model = \"meta-llama/Llama-3.1-8B-Instruct\" is not served")
            && msg.contains(&format!("\"{}\"", fast().model)),
        "{msg}"
    );
    assert!(
        sim.ground_truth().is_empty(),
        "no request reached the server"
    );
    assert!(!dir.path().join("cold").exists(), "no bundle");
}

/// A server that answers in another model's name is flagged at the top of the report.
#[test]
fn responses_from_another_model_are_flagged() {
    let src = CAPACITY.replace(
        "[target.simulator]",
        "[target]\nmodel = \"asked\"\n[target.simulator]\nmodel = \"asked\"",
    );
    let c = goodput::contract::parse(&src, Path::new("t.toml")).unwrap();
    let mut recs = common::des_records(&c, 5);
    for r in &mut recs {
        r.response_model = Some("served".into());
    }
    let s = summarize(&c, &recs, &Context::default());
    assert!(
        s.warnings
            .iter()
            .any(|w| w.starts_with("ANOTHER MODEL ANSWERED") && w.contains("\"served\"")),
        "{:?}",
        s.warnings
    );
}

/// Issue #16, item 5: no report said what was measured. The second line names the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_names_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = run_in(parse(COLD), dir.path()).await;
    let text = common::unwrapped(&goodput::report::document(&embedded.summary).terminal());
    let second = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .nth(3)
        .unwrap();
    assert!(
        second.starts_with("Target: built-in simulator (no network; simulated model"),
        "{text}"
    );
    // Phases in the order they happen (issue #17), not alphabetically.
    let table = text.split("\nPhases\n").nth(1).expect("a phases table");
    let at = |p: &str| {
        table
            .lines()
            .position(|l| l.starts_with(&format!("{p} ")))
            .unwrap_or_else(|| panic!("{p}: {text}"))
    };
    assert!(
        at("warmup") < at("steady") && at("steady") < at("drain") && at("drain") < at("quality")
    );
    let sim = common::sim(fast()).await;
    let src = format!(
        "{COLD}[target]\nurl = \"{}\"\n[target.declared]\nhardware = \"test host\"\n",
        sim.base_url()
    );
    let external = run_in(parse(&src), dir.path()).await;
    let t = external.summary.target.as_ref().unwrap();
    assert!(!t.simulator);
    let line = t.describe();
    assert!(
        line.starts_with(&sim.base_url())
            && line.contains(&format!("model {}", fast().model))
            && line.contains("test host"),
        "{line}"
    );
    let html = std::fs::read_to_string(external.bundle.path("report.html")).unwrap();
    assert!(html.contains(&format!("Target: {}", sim.base_url())));
}

/// Issue #16, item 6: a rate above what the server sustains was diagnosed as a short
/// warm-up. A queue that grows all run is now named as overload, with the rate the server
/// does sustain (checked against the simulator's own capacity at this shape).
#[test]
fn an_overloaded_run_says_so_and_estimates_the_sustained_rate() {
    let src = CAPACITY.replace("requests = 150", "requests = 600");
    let sustained = |rate: f64| {
        let c = with_rate(&src, rate);
        summarize(&c, &common::des_records(&c, 40), &Context::default())
    };
    // Beyond the engine: the queue grows all run.
    let over = sustained(60.0);
    let o = over.validity.overload.as_ref().expect("overload diagnosed");
    let why = over.validity.reasons.join("\n");
    assert!(
        why.contains("offered load above what the server sustains"),
        "{why}"
    );
    assert!(!why.contains("lengthen warm-up"), "{why}");
    assert!(o.in_flight_end > o.in_flight_start + 10.0, "{o:?}");
    // What it sustains is well below what was offered, and the queue grew by the difference.
    let offered = over.steady.throughput.offered_rps.unwrap();
    assert!(o.sustained_rps < 0.8 * offered, "{o:?}");
    assert!(
        (o.growth_rps - (offered - o.sustained_rps)).abs() < 0.25 * offered,
        "{o:?} offered {offered}"
    );
    // Well below the engine: no such diagnosis.
    assert_eq!(over.validity.kept_up, Some(false));
    assert!(goodput::report::html_verdicts(&over).contains("not kept up (see validity)"));
    let fine = sustained(20.0);
    assert!(fine.validity.overload.is_none(), "{:?}", fine.validity);
    assert_eq!(fine.validity.kept_up, Some(true));
}

/// Issue #16, item 7: 30 requests at 0.5 req/s on an idle server were INVALID ("achieved
/// 0.43 is more than 5% below offered 0.46"), Poisson noise and the no-warm-up edge taken for
/// a shortfall. On the discrete-event clock, every one of 20 seeds is now VALID.
#[test]
fn thirty_requests_at_half_a_request_per_second_on_an_idle_server_are_valid() {
    let base = "name = \"small\"\n[workload]\ninput_tokens = { dist = \"fixed\", value = 128 }\noutput_tokens = { dist = \"fixed\", value = 128 }\n\
        [load]\nmodel = \"open\"\nrate = 0.5\nrequests = 30\n[warmup]\nrequests = 0\n[target.simulator]\nmodel = \"sim\"\n";
    let mut shortfalls = 0;
    for seed in 0..20 {
        let src = base.replace("[workload]", &format!("[workload]\nseed = {seed}"));
        let c = goodput::contract::parse(&src, Path::new("t.toml")).unwrap();
        let s = summarize(&c, &common::des_records(&c, 3), &Context::default());
        let t = &s.steady.throughput;
        if t.achieved_rps.unwrap() < 0.95 * t.offered_rps.unwrap() {
            shortfalls += 1; // the raw figures do fall short: the old rule would have fired
        }
        assert_eq!(s.validity.verdict, "VALID", "seed {seed}: {:?}", s.validity);
        // The page says it kept up, as the validity judged: its tile once read ✗ at the raw
        // figures.
        assert_eq!(s.validity.kept_up, Some(true), "seed {seed}");
        let page = goodput::report::html_verdicts(&s);
        assert!(
            page.contains("offered: kept up") && !page.contains("not kept up"),
            "seed {seed}: {page}"
        );
    }
    assert!(
        shortfalls > 0,
        "the case the old rule got wrong is exercised"
    );
}

/// Issue #16, item 8: requests the user cancelled (Ctrl-C) counted as SLO misses. They are
/// now counted apart and attainment is over the completed ones.
#[test]
fn cancelled_requests_are_not_slo_misses() {
    let c = with_rate(CAPACITY, 5.0);
    let mut recs = common::des_records(&c, 5);
    let steady: Vec<usize> = (0..recs.len())
        .filter(|&i| recs[i].phase == Phase::Steady)
        .collect();
    let before = summarize(&c, &recs, &Context::default());
    let a = before.steady.slo.as_ref().unwrap().attainment;
    // The last 50 steady requests cancelled in flight.
    for &i in &steady[steady.len() - 50..] {
        let r = &mut recs[i];
        r.outcome = Outcome::Interrupted;
        r.chunks.clear();
        r.first_token_us = None;
    }
    let s = summarize(
        &c,
        &recs,
        &Context {
            interrupted: true,
            ..Context::default()
        },
    );
    let slo = s.steady.slo.as_ref().unwrap();
    assert_eq!((slo.cancelled, slo.counted), (50, 100));
    let report = common::unwrapped(&goodput::report::document(&s).terminal());
    assert!(
        report.contains("over 100 requests (50 in flight when the run was stopped left out)"),
        "{report}"
    );
    assert!(
        (slo.attainment - a).abs() < 0.05,
        "{} vs {a}",
        slo.attainment
    );
    assert_eq!(
        s.validity.verdict, "INVALID",
        "an interrupted run stays INVALID"
    );
}

/// Issue #16, item 9: closed loop was always INVALID. It is now judged for what it can
/// claim (throughput and latency at that concurrency) and says what it cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_is_valid_for_latency_at_its_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let src = COLD
        .replace(
            "model = \"open\"\nrate = 40\nrequests = 40",
            "model = \"closed\"\nconcurrency = 4\nrequests = 60",
        )
        .replace("ttft_ms = 500", "ttft_ms = 500\npercentile = 90");
    let r = run_in(parse(&src), dir.path()).await;
    let v = &r.summary.validity;
    assert_eq!(v.verdict, "VALID", "{v:?}");
    assert_eq!(v.supports, "throughput and latency at concurrency 4");
    assert!(v.cannot_support.iter().any(|c| c.starts_with("capacity")));
    let text = common::unwrapped(&goodput::report::document(&r.summary).terminal());
    assert!(text.contains("Validity: VALID for throughput and latency at concurrency 4"));
    assert!(text.contains("- cannot support: tail latency under an arrival rate"));
}

/// Issue #16, item 1, the rule itself: a run whose attainment reaches its target while its
/// percentile misses the threshold does not meet the SLO anywhere — not in the report's
/// headline, not for `--predict`, not in `compare`, not for the capacity search.
#[test]
fn one_meaning_of_meets_the_slo_everywhere() {
    let c = with_rate(CAPACITY, 5.0); // TTFT p90 ≤ 150 ms, attainment ≥ 80%
    let mut recs = common::des_records(&c, 5);
    let steady: Vec<usize> = (0..recs.len())
        .filter(|&i| recs[i].phase == Phase::Steady)
        .collect();
    // 15% of steady requests 200 ms late to their first token: p90 misses, 85% still meet.
    for &i in steady.iter().step_by(7).take(steady.len() * 15 / 100) {
        let r = &mut recs[i];
        let late = r.intended_us.unwrap() + 200_000;
        r.first_token_us = Some(late);
        r.chunks = (r.chunks.iter().enumerate())
            .map(|(i, (t, k))| (if i == 0 { late } else { t }, k))
            .collect();
        r.end_us = r.end_us.map(|e| e.max(late + 1));
    }
    let s = summarize(&c, &recs, &Context::default());
    let slo = s.steady.slo.as_ref().unwrap();
    assert!(slo.attainment >= 0.8 && slo.attainment < 0.9, "{slo:?}");
    assert!(!slo.per_metric[0].pass && !slo.pass, "{slo:?}");
    let report = common::unwrapped(&goodput::report::document(&s).terminal());
    assert!(
        report.contains("SLO NOT met, indicated (not conclusive at 99% confidence): TTFT p90"),
        "{report}"
    );
    let p = goodput::contract::prediction::Prediction {
        made_utc: "t".into(),
        expect: vec![goodput::contract::prediction::parse("slo_met").unwrap()],
    };
    let check = goodput::analyze::predict::check(&p, &s, true);
    assert_eq!(check.outcomes[0].held, Some(false));
    assert!(!goodput::sweep::passes_capacity(&s));
}

/// Item 6 end to end: the embedded simulator offered twice what it sustains, through the
/// real client and driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_simulator_is_diagnosed_through_the_real_client() {
    let dir = tempfile::tempdir().unwrap();
    let src = CAPACITY
        .replace("rate = 30\nrequests = 150", "rate = 60\nrequests = 300")
        .replace("probes = 4", "probes = 1")
        .replace("[slo]", "[measurement]\nserver_metrics_interval = 0\n[slo]");
    let r = run_in(parse(&src), dir.path()).await;
    let v = &r.summary.validity;
    let o = v.overload.as_ref().expect("overload diagnosed");
    let offered = r.summary.steady.throughput.offered_rps.unwrap();
    assert!(o.sustained_rps < 0.8 * offered, "{o:?}");
    let text = common::unwrapped(&goodput::report::document(&r.summary).terminal());
    assert!(
        text.contains("offered load above what the server sustains, about"),
        "{text}"
    );
    assert!(!text.contains("lengthen warm-up"), "{text}");
}

/// Item 7 through the real client, as the issue ran it: 30 requests at 0.5 req/s, no warm-up,
/// on an idle simulator (a minute, mostly waiting). Before, achieved 0.43 vs offered 0.46 made
/// such runs INVALID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_requests_at_half_a_request_per_second_through_the_client_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        parse(
            "name = \"small\"\n[workload]\ninput_tokens = { dist = \"fixed\", value = 128 }\noutput_tokens = { dist = \"fixed\", value = 128 }\n\
             [load]\nrate = 0.5\nrequests = 30\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n",
        ),
        dir.path(),
    )
    .await;
    // The claim under test: no shortfall or overload is read into Poisson noise. (Other
    // reasons stay possible on a busy test machine: with 30 requests the p99 dispatch lag is
    // the single worst wake-up.)
    let v = &r.summary.validity;
    assert!(
        !v.reasons
            .iter()
            .any(|x| x.contains("achieved") || x.contains("offered load above")),
        "{v:?}"
    );
    assert!(v.overload.is_none(), "{v:?}");
}

/// Issue #71: a point that passes on its small sample and whose confirmation fails is a
/// failing point everywhere (its SLO cell, the frontier, the answer), and the search goes on
/// below it within its budget. The simulator slows 40× once 100 requests have arrived: no
/// 80-request point (60 steady, 20 warm-up) meets it, every confirmation (hundreds) does.
#[test]
fn a_pass_its_confirmation_refutes_fails_everywhere_and_the_search_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("refute.toml");
    let src = CAPACITY
        .replace("percentile = 90", "percentile = 99")
        .replace("requests = 150", "requests = 60")
        .replace("value = 400", "value = 100")
        .replace("rate = 30", "rate = 60")
        .replace("[quality]\nmode = \"consistency\"\nprobes = 4\n", "")
        // The guard stops an overloaded point after 2 s of waiting, not 10.
        + "[measurement.guard]\nmax_wait = \"2s\"\n[target.simulator.faults]\nslow_after_requests = 100\nslow_factor = 40\n";
    std::fs::write(&path, &src).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args([
            "sweep",
            "--capacity",
            "--max-runs",
            "6",
            "--confirm-within",
            "1m",
        ])
        .arg(&path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let parent = std::fs::read_dir(dir.path().join("runs/cap"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(parent.join("sweep.json")).unwrap()).unwrap();
    let cap = &json["capacity"];
    let points = json["points"].as_array().unwrap();
    let Some(refuted) = cap["refuted"]
        .as_array()
        .and_then(|r| r.first())
        .and_then(|r| r.as_f64())
    else {
        // No pass to confirm (the machine kept every point from passing): nothing refuted.
        assert!(cap["capacity_rps"].is_null(), "{cap}");
        return;
    };
    let at = |p: &serde_json::Value| p["value"].as_str().unwrap().parse::<f64>().unwrap();
    // The refuted point fails everywhere: marked, off the frontier, its cell says why.
    let original: Vec<&serde_json::Value> = points
        .iter()
        .filter(|p| (at(p) - refuted).abs() < 1e-3 && p["confirmation"] != true)
        .collect();
    assert!(!original.is_empty());
    for p in &original {
        assert_eq!(p["refuted"], true, "{p}");
        assert_eq!(p["pareto"], false, "{p}");
    }
    assert!(
        cap["capacity_rps"].as_f64().is_none_or(|c| c < refuted),
        "{cap}"
    );
    assert!(
        cap["tried"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| (t[0].as_f64().unwrap() - refuted).abs() < 1e-3)
            .all(|t| t[1] == false),
        "{cap}"
    );
    let md = std::fs::read_to_string(parent.join("sweep.md")).unwrap();
    assert!(md.contains("refuted by its confirmation"), "{md}");
    assert!(
        md.contains(&format!(
            "Refuted: {refuted:.2} req/s passed on its point's sample"
        )),
        "{md}"
    );
    let html = std::fs::read_to_string(parent.join("sweep.html")).unwrap();
    assert!(
        html.contains("failed its confirmation: refuted"),
        "the banner says so"
    );
    // The search went on: a point ran after the refuting confirmation (in run order), below
    // the refuted rate, or the budget was spent and the answer says by how much it misses.
    let order = |p: &serde_json::Value| {
        std::path::Path::new(p["bundle"].as_str().unwrap())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let refuting = points
        .iter()
        .filter(|p| p["confirmation"] == true && (at(p) - refuted).abs() < 1e-3)
        .map(order)
        .min()
        .unwrap();
    let after: Vec<f64> = points
        .iter()
        .filter(|p| order(p) > refuting && p["confirmation"] != true)
        .map(at)
        .collect();
    let spent = cap["tried"].as_array().unwrap().len() >= 6;
    assert!(
        after.iter().any(|r| *r < refuted) || spent,
        "after {refuting}: {after:?}; {cap}"
    );
    if cap["resolution"].as_f64().is_some_and(|w| w > 0.05 + 1e-9) {
        assert!(
            md.contains(
                "Not at the resolution asked: the run budget (--max-runs 6) ended with the bracket"
            ),
            "{md}"
        );
    }
    assert!(err.contains("is refuted by its confirmation: the"), "{err}");
}
