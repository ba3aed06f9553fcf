//! Load programs (`[[load.stage]]`, issue #48): a ramp → burst → recovery program judged stage
//! by stage, against the simulator's ground truth — on the discrete-event clock for the
//! embedded simulator, and from the HTTP simulator's own ledger when it runs as a server.

use crate::common;

use goodput::analyze::stages::{RECOVERY_WINDOW, StageResult, recovery_time};
use goodput::analyze::{Context, summarize};
use goodput::plan::Phase;
use goodput::record::Record;

/// A simulated engine of four sequences, 20-token answers: about 14 requests a second at most.
const ENGINE: &str = "[target.simulator]\nmax_batch = 4\nprefill_tokens_per_s = 20000\ndecode_base_ms = 10\ndecode_per_seq_ms = 0.5\n";

/// Well below that capacity, then twice it for 2 s, then back below it.
fn program(target: &str) -> String {
    format!(
        "name = \"stages\"\n{target}[workload]\nseed = 5\ninput_tokens = {{ dist = \"fixed\", value = 200 }}\noutput_tokens = {{ dist = \"fixed\", value = 20 }}\n\
         [load]\narrival = \"poisson\"\n\
         [[load.stage]]\nshape = \"ramp\"\nfrom = 2\nrate = 8\nduration = \"5s\"\n\
         [[load.stage]]\nshape = \"burst\"\nrate = 30\nduration = \"2s\"\n\
         [[load.stage]]\nshape = \"recovery\"\nrate = 5\nduration = \"9s\"\n\
         [warmup]\nrequests = 5\n[slo]\nttft_ms = 300\npercentile = 90\nattainment = 0.8\n\
         [measurement]\nserver_metrics_interval = 0\n"
    )
}

/// The records of the run's bundle at `bundle` (none before it has any).
fn records_of(bundle: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(bundle.join("requests.jsonl"))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the contract at `path` in a child `goodput run`, bundles under `runs`, until `stage`
/// has `n` records (polled: the records are what is waited for), then interrupts it with
/// SIGINT, which must exit 130. Returns its bundle.
fn interrupt_when(
    path: &std::path::Path,
    runs: &std::path::Path,
    stage: &str,
    n: usize,
) -> std::path::PathBuf {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", path.to_str().unwrap(), "--quiet", "--out"])
        .arg(runs)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let bundle = || {
        let named = std::fs::read_dir(runs).ok()?.next()?.ok()?.path();
        std::fs::read_dir(named)
            .ok()?
            .next()?
            .ok()
            .map(|e| e.path())
    };
    let t = std::time::Instant::now();
    while bundle()
        .map(|b| records_of(&b))
        .unwrap_or_default()
        .iter()
        .filter(|r| r["stage"] == stage)
        .count()
        < n
    {
        if let Some(status) = child.try_wait().unwrap() {
            let why = bundle()
                .and_then(|b| std::fs::read_to_string(b.join("summary.json")).ok())
                .and_then(|t| serde_json::from_str::<goodput::analyze::Summary>(&t).ok())
                .map(|s| format!("{:?} {:?}", s.validity.reasons, s.edge.map(|e| e.answer())));
            panic!("the run ended ({status}) before `{stage}` had {n} records: {why:?}");
        }
        assert!(t.elapsed().as_secs() < 60, "`{stage}` never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    bundle().unwrap()
}

fn stage<'a>(stages: &'a [StageResult], name: &str) -> &'a StageResult {
    stages.iter().find(|s| s.name == name).unwrap()
}

/// The recovery stage's recovery time, in seconds after the burst, from `ttft` (ms) of each
/// of its records.
fn recovered_after(
    records: &[Record],
    stages: &[StageResult],
    ttft: impl Fn(&Record) -> Option<f64>,
) -> Option<f64> {
    let start = records
        .iter()
        .filter(|r| r.stage.is_some())
        .filter_map(|r| r.intended_us)
        .min()
        .unwrap();
    let at = start + (stage(stages, "3-recovery").from_s * 1e6).round() as u64;
    let points: Vec<(u64, Option<f64>)> = records
        .iter()
        .filter(|r| r.stage.as_deref() == Some("3-recovery"))
        .map(|r| (r.intended_us.unwrap(), ttft(r)))
        .collect();
    recovery_time(&points, at, 300.0, RECOVERY_WINDOW).0
}

/// The verdicts this program must get from any honest measurement: the ramp stays under the
/// engine's capacity and meets the SLO, VALID; the burst builds a queue, misses, and is
/// INVALID for it; the recovery stage recovers within itself.
fn assert_verdicts(stages: &[StageResult], whose: &str) {
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["1-ramp", "2-burst", "3-recovery"], "{whose}");
    let ramp = stage(stages, "1-ramp");
    // INVALID only for a dispatch thread the machine woke late (seen in CI: 7.2 ms at p99 of
    // the ramp's 22 requests, the host busy with the other tests), never for the client's work.
    let p99 = |d: &Option<goodput::analyze::Dist>| d.as_ref().map_or(0.0, |d| d.p99);
    let (lag, wake) = (
        p99(&ramp.stats.dispatch_lag_ms),
        p99(&ramp.stats.dispatch_wake_ms),
    );
    if ramp.validity.client_behind && common::woke_late(lag, wake) {
        eprintln!(
            "{whose}: the ramp is INVALID because the machine woke the dispatch thread {wake:.2} ms late at p99 (lag {lag:.2} ms)"
        );
    } else {
        assert_eq!(
            ramp.validity.verdict.to_string(),
            "VALID",
            "{whose}: {ramp:?}"
        );
    }
    assert!(ramp.slo.as_ref().unwrap().pass, "{whose}: {ramp:?}");
    let burst = stage(stages, "2-burst");
    assert_eq!(burst.validity.verdict.to_string(), "INVALID", "{whose}");
    assert!(burst.validity.overload.is_some(), "{whose}: {burst:?}");
    assert!(!burst.slo.as_ref().unwrap().pass, "{whose}");
    let rec = stage(stages, "3-recovery");
    assert!(
        rec.recovery.as_ref().unwrap().recovered_after_s.is_some(),
        "{whose}: {rec:?}"
    );
}

/// The embedded simulator against the same engine on the discrete-event clock: the same
/// verdicts per stage, and the recovery time within 10% of the ground truth's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ramp_burst_recovery_program_matches_the_simulators_ground_truth() {
    let c = common::parse(&program(ENGINE));
    // Ground truth: the same plan on the simulator's discrete-event clock.
    let truth = common::des_records(&c, 200);
    let ts = summarize(&c, &truth, &Context::default()).stages.unwrap();
    assert_verdicts(&ts, "ground truth");
    let dir = tempfile::tempdir().unwrap();
    let r = common::run_in(c.clone(), dir.path()).await;
    let stages = r.summary.stages.clone().unwrap();
    for s in &stages {
        eprintln!(
            "{} client {:?} {:?}; truth {:?}",
            s.name,
            s.slo.as_ref().map(|x| x.verdict),
            s.recovery,
            stage(&ts, &s.name).recovery
        );
    }
    assert_verdicts(&stages, "client");
    // Every steady record carries its stage; the whole run is no single result.
    assert!(
        r.records
            .iter()
            .filter(|x| x.phase == Phase::Steady)
            .all(|x| x.stage.is_some())
    );
    assert_eq!(r.summary.validity.verdict.to_string(), "INVALID");
    assert!(r.summary.validity.reasons[0].contains("load program of 3 stages"));
    // The page leads with the stages, and marks the recovery on the TTFT chart.
    let html = std::fs::read_to_string(r.bundle.path("report.html")).unwrap();
    assert!(html.contains("LOAD PROGRAM of 3 stages"), "banner");
    assert!(
        html.contains("stage 2-burst (burst 30 req/s for 2 s)"),
        "a tile per stage"
    );
    assert!(html.contains("3-recovery recovered ("), "the recovery mark");
    let text = goodput::report::document(&r.summary).markdown();
    assert!(text.contains("3-recovery: recovered "), "{text}");
    let got = stage(&stages, "3-recovery").recovery.as_ref().unwrap();
    let want = stage(&ts, "3-recovery").recovery.as_ref().unwrap();
    let (got, want) = (
        got.recovered_after_s.unwrap(),
        want.recovered_after_s.unwrap(),
    );
    assert!(
        (got - want).abs() <= 0.1 * want,
        "recovered after {got:.2} s; the simulator's ground truth {want:.2} s"
    );
}

/// The simulator as a server: per-stage SLO verdicts agree with its ledger's own TTFTs, the
/// burst is where its queue grew, and the recovery time from the client's TTFTs is within
/// 10% of the one from the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_the_simulator_as_a_server_each_stage_agrees_with_its_ledger() {
    let engine = common::parse(&program(ENGINE)).target.simulator.unwrap();
    let sim = common::sim(engine).await;
    let c = common::parse(&program(&format!(
        "[target]\nurl = \"{}\"\n",
        sim.base_url()
    )));
    let dir = tempfile::tempdir().unwrap();
    let r = common::run_in(c, dir.path()).await;
    let stages = r.summary.stages.clone().unwrap();
    assert_verdicts(&stages, "client");
    let gt = common::truth_by_id(&sim);
    let server_ttft = |x: &Record| {
        let g = gt.get(&x.request_id)?;
        Some((g.first_token_us? - g.arrival_us) as f64 / 1e3)
    };
    // Each stage's share of steady requests within 300 ms, by the server's own clock.
    for s in &stages {
        let mine: Vec<&Record> = r
            .records
            .iter()
            .filter(|x| x.phase == Phase::Steady && x.stage.as_deref() == Some(&s.name))
            .collect();
        let within = mine
            .iter()
            .filter(|x| server_ttft(x).is_some_and(|t| t <= 300.0))
            .count() as f64
            / mine.len() as f64;
        let client = s.slo.as_ref().unwrap().attainment;
        assert!(
            (within - client).abs() <= 0.05,
            "{}: attainment {client:.3}, the server's {within:.3}",
            s.name
        );
    }
    // The queue the burst built: the server's queue time rose through it.
    let queue: Vec<f64> = r
        .records
        .iter()
        .filter(|x| x.stage.as_deref() == Some("2-burst"))
        .filter_map(|x| gt.get(&x.request_id)?.queue_us)
        .map(|q| q as f64 / 1e3)
        .collect();
    let third = queue.len() / 3;
    let (early, late) = (
        common::median(queue[..third].to_vec()),
        common::median(queue[queue.len() - third..].to_vec()),
    );
    assert!(late > early + 200.0, "queue {early:.0} → {late:.0} ms");
    let got = recovered_after(&r.records, &stages, |x| {
        let o = x.intended_us?;
        Some((x.first_token_us? - o) as f64 / 1e3)
    })
    .unwrap();
    let want = recovered_after(&r.records, &stages, server_ttft).unwrap();
    assert!(
        (got - want).abs() <= 0.1 * want,
        "recovered after {got:.2} s by the client; {want:.2} s by the server's clock"
    );
}

/// A program interrupted in its second stage keeps every record it measured, each with its
/// stage, and the report judges the stages it reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_program_keeps_what_each_stage_measured() {
    let sim = common::sim(goodput::sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"cut\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[warmup]\nrequests = 0\n\
             [[load.stage]]\nrate = 40\nrequests = 40\n[[load.stage]]\nrate = 40\nduration = \"60s\"\n",
            sim.base_url()
        ),
    )
    .unwrap();
    let bundle = interrupt_when(&path, &dir.path().join("runs"), "2-hold", 20);
    let kept = records_of(&bundle);
    let first = kept.iter().filter(|r| r["stage"] == "1-hold").count();
    assert_eq!(first, 40, "every request of the first stage is kept");
    assert!(kept.iter().filter(|r| r["stage"] == "2-hold").count() >= 20);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("summary.json")).unwrap())
            .unwrap();
    let stages = s["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0]["stats"]["requests"], 40);
}

/// `compare` of two runs of the same program on two engines (one twice as fast to decode),
/// stage by stage: the burst's TTFT p99 is better on the faster engine, and each stage's line
/// is there.
#[test]
fn compare_judges_two_runs_of_one_program_stage_by_stage() {
    let side = |engine: &str| {
        let c = common::parse(&program(engine));
        let recs = common::des_records(&c, 200);
        let s = summarize(&c, &recs, &Context::default());
        goodput::compare::Side {
            path: "des".into(),
            label: None,
            contract: c,
            runs: vec![(s, recs)],
            warnings: vec![],
        }
    };
    let a = side(ENGINE);
    let b = side(&ENGINE.replace("decode_base_ms = 10", "decode_base_ms = 5"));
    let m = goodput::compare::compare_metrics(&a, &b, 0.02);
    let line = |name: &str| m.iter().find(|x| x.metric == name).unwrap();
    for stage in ["1-ramp", "2-burst", "3-recovery"] {
        line(&format!("stage {stage}: ttft_p99_ms"));
        line(&format!("stage {stage}: attainment"));
    }
    // The burst's 55 requests a side cannot support p99 (459 needed at 99%): the difference
    // is shown, and no claim made (issue #71), however far apart.
    let burst = line("stage 2-burst: ttft_p99_ms");
    assert_eq!(
        burst.verdict.to_string(),
        "no claim: sample too small",
        "{burst:?}"
    );
    assert!(
        burst
            .unsupported
            .as_deref()
            .is_some_and(|w| w.starts_with("p99 needs 459 requests a side")),
        "{burst:?}"
    );
    assert!(burst.b.unwrap() < burst.a.unwrap());
}

/// A warm-up that covers a whole stage leaves it nothing to judge: no verdict, and INVALID with
/// the reason (found by running `goodput init`'s 150 warm-up requests before a program).
#[test]
fn a_stage_the_warm_up_covered_has_no_verdict() {
    let c = common::parse(&program(ENGINE).replace("requests = 5\n", "requests = 40\n"));
    let s = summarize(&c, &common::des_records(&c, 200), &Context::default());
    let ramp = stage(s.stages.as_ref().unwrap(), "1-ramp");
    assert_eq!(ramp.stats.requests, 0);
    assert!(ramp.slo.is_none());
    assert!(
        ramp.validity.reasons[0].contains("the warm-up (the program's first arrivals) covered it"),
        "{:?}",
        ramp.validity
    );
}

/// A stage shorter than its requests take cannot show a steady rate: INVALID, saying so (a
/// 5 s burst on vLLM, whose requests took 12 s, read "achieved 0 req/s" and VALID before).
#[test]
fn a_stage_shorter_than_its_requests_take_is_invalid() {
    // Six-second requests on an engine with room for all: no queue, only length.
    let c = common::parse(
        "name = \"short\"\n[workload]\nseed = 2\ninput_tokens = { dist = \"fixed\", value = 50 }\noutput_tokens = { dist = \"fixed\", value = 20 }\n\
         [load]\narrival = \"constant\"\n[[load.stage]]\nrate = 2\nduration = \"20s\"\n[[load.stage]]\nname = \"blip\"\nrate = 2\nduration = \"2s\"\n[[load.stage]]\nrate = 2\nduration = \"20s\"\n\
         [warmup]\nrequests = 0\n[slo]\nttft_ms = 1000\n\
         [target.simulator]\ndecode_base_ms = 300\n",
    );
    let s = summarize(&c, &common::des_records(&c, 40), &Context::default());
    let blip = stage(s.stages.as_ref().unwrap(), "blip");
    assert_eq!(
        blip.validity.verdict.to_string(),
        "INVALID",
        "{:?}",
        blip.validity
    );
    assert!(
        blip.validity.reasons[0].contains("it lasted 2.0 s, less than its requests took"),
        "{:?}",
        blip.validity.reasons
    );
    // The stages around it, as long as their requests several times over, are VALID.
    let first = stage(s.stages.as_ref().unwrap(), "1-hold");
    assert_eq!(
        first.validity.verdict.to_string(),
        "VALID",
        "{:?}",
        first.validity
    );
}

/// A ramp's requests in flight rise with its rate (Little's law), which the overload rule
/// would read as a queue: a ramp to under the default simulator's capacity, whose TTFT stays
/// low, is not called overloaded (it once read "about 10.8 req/s sustained" of ~35).
#[test]
fn a_ramp_below_capacity_is_not_called_overload() {
    let c = common::parse(
        "name = \"ramp\"\n[workload]\nseed = 3\ninput_tokens = { dist = \"fixed\", value = 256 }\noutput_tokens = { dist = \"fixed\", value = 128 }\n\
         [load]\n[[load.stage]]\nshape = \"ramp\"\nfrom = 10\nrate = 30\nduration = \"15s\"\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 500\n[target.simulator]\n",
    );
    let s = summarize(&c, &common::des_records(&c, 300), &Context::default());
    let ramp = stage(s.stages.as_ref().unwrap(), "1-ramp");
    assert!(ramp.stats.ttft_ms.as_ref().unwrap().p99 < 500.0, "{ramp:?}");
    assert!(ramp.validity.overload.is_none(), "{:?}", ramp.validity);
    assert!(
        ramp.validity
            .reasons
            .iter()
            .all(|r| !r.starts_with("offered load above")),
        "{:?}",
        ramp.validity.reasons
    );
}

/// The in-run SLA edge (issue #48): one run whose steps double from 30 req/s until one misses
/// the SLO, then bisect, each judged on its own records, lands within 10% of `sweep
/// --capacity` on the same simulator contract (a run per rate). Each step holds its rate until
/// its last request has finished, and the next starts only once the server is idle again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_searched_within_one_run_lands_near_sweep_capacity() {
    let head = "name = \"edge\"\n[workload]\nseed = 4\ninput_tokens = { dist = \"fixed\", value = 400 }\noutput_tokens = { dist = \"fixed\", value = 6 }\n[load]\narrival = \"constant\"\n";
    let tail = "[warmup]\nrequests = 20\n[slo]\nttft_ms = 150\npercentile = 90\nattainment = 0.8\n\
        [measurement]\nserver_metrics_interval = 0\n\
        [target.simulator]\nprefill_tokens_per_s = 20000\ndecode_base_ms = 4\ndecode_per_seq_ms = 0.05\n";
    let edge_src =
        format!("{head}[[load.stage]]\nshape = \"edge\"\nrate = 30\nrequests = 150\n{tail}");
    let sweep_src = format!("{head}rate = 30\nrequests = 150\n{tail}");
    let dir = tempfile::tempdir().unwrap();

    let r = common::run_in(common::parse(&edge_src), dir.path()).await;
    let e = r.summary.edge.as_ref().expect("an edge result");
    let stages = r.summary.stages.as_ref().unwrap();
    // Every step sent its 150 requests at the rate the search chose, in the order it chose.
    let steps: Vec<&StageResult> = stages.iter().filter(|s| s.shape == "edge").collect();
    assert_eq!(steps.len(), e.searched.tried.len(), "{:?}", e.searched);
    for (k, (s, (rate, passed))) in steps.iter().zip(&e.searched.tried).enumerate() {
        assert_eq!(s.name, format!("1-edge.{}", k + 1));
        assert_eq!(s.edge_rps, Some(*rate));
        let own: Vec<&Record> = r
            .records
            .iter()
            .filter(|x| x.stage.as_deref() == Some(s.name.as_str()))
            .collect();
        assert_eq!(own.len(), 150, "{}", s.name);
        assert!(own.iter().all(|x| x.stage_rps == Some(*rate)));
        let slo_met = s.slo.as_ref().is_some_and(|x| x.verdict.met());
        assert_eq!(*passed, slo_met && s.validity.is_valid(), "{}", s.name);
    }
    // Each next step starts after the last request of the step and wait before it ended.
    for n in 2..=steps.len() {
        let before: Vec<&Record> = r
            .records
            .iter()
            .filter(|x| {
                let s = x.stage.as_deref().unwrap_or("");
                s == format!("1-edge.{}", n - 1) || s == format!("1-edge.{}.wait", n - 1)
            })
            .collect();
        let ended = before.iter().filter_map(|x| x.end_us).max().unwrap();
        let next = r
            .records
            .iter()
            .filter(|x| x.stage.as_deref() == Some(format!("1-edge.{n}").as_str()))
            .filter_map(|x| x.intended_us)
            .min()
            .unwrap();
        assert!(
            next >= ended,
            "step {n} started before step {} settled",
            n - 1
        );
    }
    let md = common::unwrapped(&goodput::report::document(&r.summary).terminal());
    assert!(md.contains("SLA edge: searched within the run"), "{md}");
    assert!(md.contains(&e.trail()), "{md}");

    let path = dir.path().join("cap.toml");
    std::fs::write(&path, &sweep_src).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, sw) =
        goodput::sweep::capacity(&path, &sweep_src, 0.05, 10, std::time::Duration::ZERO, &o)
            .await
            .unwrap();
    if common::stopped_by_the_machine(&parent, &sw) {
        return;
    }
    let cap = sw.capacity.as_ref().unwrap();
    let (swept, edge) = (cap.capacity_rps.unwrap(), e.searched.capacity_rps.unwrap());
    eprintln!(
        "in-run edge {edge:.2} req/s ({}); sweep --capacity {swept:.2} req/s ({:?})",
        e.trail(),
        cap.tried
    );
    // A step or a point the machine kept behind its schedule is INVALID, rightly: its
    // answer is then the client's, and nothing here compares servers.
    let behind = (e.searched.client_limited
        && common::the_machine_kept_the_client_behind(&r.bundle.dir))
        || sw
            .points
            .iter()
            .any(|p| p.client_limited && common::the_machine_kept_the_client_behind(&p.bundle));
    if behind && (edge - swept).abs() / swept > 0.10 {
        eprintln!("the machine kept the client behind: the answers are the client's");
        return;
    }
    assert!(
        (edge - swept).abs() / swept <= 0.10,
        "in-run edge {edge} vs sweep --capacity {swept}"
    );
}

/// An edge search interrupted inside a step keeps every record it measured; the step it ended
/// inside is no verdict ("cut short"), and the answer says the search did not finish.
#[test]
fn an_interrupted_edge_search_keeps_its_steps_and_says_it_was_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.toml");
    // The bound on dispatch lag is wide: a first step whose client fell behind (one late
    // wake-up among 80 requests on a busy test machine) rightly ends the search before the
    // step this test interrupts, which is not what it is about.
    std::fs::write(
        &path,
        "name = \"cut\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 8 }\n[warmup]\nrequests = 0\n\
         [[load.stage]]\nname = \"e\"\nshape = \"edge\"\nrate = 40\nrequests = 80\n\
         [slo]\nttft_ms = 1000\n[measurement]\nserver_metrics_interval = 0\nmax_dispatch_lag_ms = 1000\n",
    )
    .unwrap();
    let bundle = interrupt_when(&path, &dir.path().join("runs"), "e.2", 10);
    let kept = records_of(&bundle);
    assert_eq!(kept.iter().filter(|r| r["stage"] == "e.1").count(), 80);
    let second = kept.iter().filter(|r| r["stage"] == "e.2").count();
    assert!((10..80).contains(&second), "{second}");
    let s: goodput::analyze::Summary =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("summary.json")).unwrap())
            .unwrap();
    let e = s.edge.as_ref().unwrap();
    assert!(e.cut_short, "{e:?}");
    // The first step's verdict, and none from the second.
    assert_eq!(e.searched.tried.len(), 1, "{e:?}");
    assert_eq!(e.searched.tried[0].0, 40.0);
    assert!(
        e.answer().starts_with("the run ended inside a step"),
        "{}",
        e.answer()
    );
    let cut = s
        .stages
        .as_ref()
        .unwrap()
        .iter()
        .find(|k| k.name == "e.2")
        .unwrap();
    assert!(cut.slo.is_none() && cut.validity.reasons[0].starts_with("cut short"));
}
