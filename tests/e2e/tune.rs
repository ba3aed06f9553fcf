//! Issue #75: `goodput tune` launches the engine once per setting, searches its capacity at
//! the SLO, and stops it. The engine here is the simulator launched as an external server with
//! its `--set max_batch=N` as the setting, so each capacity has the discrete-event clock's to
//! be held against; and the edges a user meets: a placeholder the command never uses, a
//! setting that cannot start, a port something else already answers on.

use crate::common;

const SIM: &str = "prefill_tokens_per_s = 20000\ndecode_base_ms = 4\ndecode_per_seq_ms = 0.05\n";

/// The tune's contract: the simulator launched with `launch_tail` after its port.
fn contract(url: &str, launch_tail: &[&str]) -> String {
    let exe = env!("CARGO_BIN_EXE_goodput");
    let mut launch = vec![exe, "sim", "--port", "{port}"];
    launch.extend_from_slice(launch_tail);
    for line in SIM.lines() {
        launch.extend_from_slice(&["--set", Box::leak(line.replace(' ', "").into_boxed_str())]);
    }
    let launch: Vec<String> = launch.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "name = \"tune\"\n[target]\nurl = \"{url}\"\n[workload]\nseed = 4\ninput_tokens = {{ dist = \"fixed\", value = 400 }}\noutput_tokens = {{ dist = \"fixed\", value = 6 }}\n\
         [load]\nmodel = \"open\"\nrate = 30\nrequests = 150\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 150\npercentile = 90\nattainment = 0.8\n\
         [cold_start]\nlaunch = [{}]\nready_timeout = \"30s\"\n",
        launch.join(", ")
    )
}

/// The tune's workload (`src`) on the simulator inside the contract, `max_batch` as given:
/// what the discrete-event clock says its capacity is.
fn des_text(src: &str, max_batch: &str) -> String {
    let head = &src[..src.find("[cold_start]").unwrap()];
    let head = head.replace("[target]\nurl = \"http://127.0.0.1:{port}\"\n", "");
    format!("{head}[target.simulator]\n{SIM}max_batch = {max_batch}\n")
}

async fn tune(
    dir: &std::path::Path,
    src: &str,
    setting: &str,
) -> anyhow::Result<(goodput::bundle::Bundle, goodput::tune::TuneResult)> {
    tune_deciding(dir, src, setting, 0).await
}

/// The same, the best two decided by a paired A/B of at most `decide_blocks` blocks.
async fn tune_deciding(
    dir: &std::path::Path,
    src: &str,
    setting: &str,
    decide_blocks: usize,
) -> anyhow::Result<(goodput::bundle::Bundle, goodput::tune::TuneResult)> {
    let path = dir.join("tune.toml");
    std::fs::write(&path, src).unwrap();
    let o = common::sweep_options(dir);
    let setting = goodput::sweep::Vary::parse_as("--setting", &[setting.to_owned()])?;
    let search = goodput::tune::Search {
        resolution: 0.05,
        max_runs: 10,
        confirm_within: std::time::Duration::ZERO,
        decide_blocks,
    };
    goodput::tune::tune(&path, src, &setting, search, &o, None).await
}

/// Two batch limits: each launched, searched and stopped; each capacity within 15% of the
/// discrete-event clock's for that setting; the larger batch the best, as the clock says, and
/// confirmed by a paired A/B at its capacity; the engines gone afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_setting_is_launched_searched_and_stopped_and_the_best_is_the_clocks() {
    let dir = tempfile::tempdir().unwrap();
    // Points of 150 requests, as the capacity search's own check against the clock uses
    // (tests/e2e/trust.rs): on smaller ones the highest lucky pass lifts the answer.
    let src = contract(
        "http://127.0.0.1:{port}",
        &["--set", "max_batch={max_batch}"],
    );
    let (parent, r) = tune_deciding(dir.path(), &src, "max_batch=1,4", 8)
        .await
        .unwrap();
    assert_eq!(r.tried.len(), 2);
    let mut found = Vec::new();
    for t in &r.tried {
        assert_eq!(t.failure, None, "{t:?}");
        assert!(t.ready_s.is_some_and(|s| s > 0.0 && s < 30.0), "{t:?}");
        assert!(
            t.launch
                .iter()
                .any(|a| a == &format!("max_batch={}", t.value)),
            "{:?}",
            t.launch
        );
        assert!(t.stopped.is_some(), "stopped: {t:?}");
        assert!(
            t.facts
                .iter()
                .any(|(k, v)| k == "engine" && v == "goodput-sim"),
            "{:?}",
            t.facts
        );
        // The engine's own log sits in the setting's bundle.
        assert!(t.bundle.join("server.stderr.log").exists());
        // Each engine is gone: nothing answers where it served.
        let url = t.launch[t.launch.iter().position(|a| a == "--port").unwrap() + 1].clone();
        assert!(
            std::net::TcpStream::connect(format!("127.0.0.1:{url}")).is_err(),
            "the engine of {} still answers",
            t.value
        );
        let rps = t.capacity_rps().expect("a capacity");
        let each = common::des_capacities(&des_text(&src, &t.value), 30.0, 0..10).await;
        let truth = (each[4] + each[5]) / 2.0;
        eprintln!(
            "max_batch={}: tune {rps:.2} req/s, clock {truth:.2}",
            t.value
        );
        let behind = t.capacity.as_ref().is_some_and(|c| c.client_limited);
        if !(behind && rps < truth) {
            assert!(
                (rps - truth).abs() / truth <= 0.15,
                "max_batch={}: tune {rps:.2} vs clock {truth:.2}",
                t.value
            );
        }
        found.push((t.value.clone(), rps, truth));
    }
    // The best is the clock's best.
    let best = &r.ranked()[0].value;
    let truth_best = found
        .iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .unwrap()
        .0
        .clone();
    assert_eq!(best, &truth_best, "{found:?}");
    let md = std::fs::read_to_string(parent.path("tune.md")).unwrap();
    assert!(md.contains(&format!("Best: max_batch={best}")), "{md}");
    // The winner decided by a paired A/B at its capacity: four times the batch serves more
    // within the SLO than one at the rate only it sustains (its TPOT, a batch of four sharing
    // each step, may well be worse: every metric's verdict is shown beside).
    let d = r.decided.as_ref().expect("the best two decided");
    assert_eq!((d.a.as_str(), d.b.as_str()), ("max_batch=1", "max_batch=4"));
    assert_eq!(d.goodput, Some(goodput::ab::stats::Call::Better), "{d:?}");
    assert!(d.goodput_rps.is_some_and(|[a, b]| b > 1.2 * a), "{d:?}");
    assert!(d.pairs >= 2 && d.pairs <= 4, "{d:?}");
    assert!(d.bundle.as_ref().unwrap().join("ab.json").exists());
    assert!(
        md.contains("Paired A/B at")
            && md.contains("decided: max_batch=4 serves more within the SLO")
            && md.contains("Every metric:"),
        "{md}"
    );
    // Both engines of the A/B are gone too.
    for side in ["1", "4"] {
        let log = parent.dir.join(format!("decide-{side}/server.stderr.log"));
        assert!(log.exists(), "{}", log.display());
    }
    assert!(
        md.contains("max_batch=1") && md.contains("max_batch=4"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(parent.path("tune.json")).unwrap()).unwrap();
    assert_eq!(json["setting"]["key"], "max_batch");
}

/// Refused before anything is launched: a setting whose placeholder the command never uses
/// (every value would launch the same engine), and a contract with nothing to launch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placeholder_the_launch_never_uses_is_refused_before_any_launch() {
    let dir = tempfile::tempdir().unwrap();
    let src = contract("http://127.0.0.1:{port}", &[]);
    let e = tune(dir.path(), &src, "max_batch=1,4").await.unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("tune.toml") && e.contains("{max_batch}") && e.contains("appears nowhere"),
        "{e}"
    );
    let bare = src[..src.find("[cold_start]").unwrap()].to_owned();
    let e = format!(
        "{:#}",
        tune(dir.path(), &bare, "max_batch=1").await.unwrap_err()
    );
    assert!(e.contains("[cold_start] launch"), "{e}");
    let placed = contract(
        "http://127.0.0.1:{port}",
        &["--set", "max_batch={max_batch}"],
    );
    let no_slo = placed.replace(
        "[slo]\nttft_ms = 150\npercentile = 90\nattainment = 0.8\n",
        "",
    );
    assert_ne!(no_slo, placed);
    let e = format!(
        "{:#}",
        tune(dir.path(), &no_slo, "max_batch=1").await.unwrap_err()
    );
    assert!(
        e.contains("tune.toml") && e.contains("needs an [slo]"),
        "{e}"
    );
    assert!(
        !dir.path().join("tune").exists(),
        "nothing written for a refused tune"
    );
}

/// A value the engine refuses to start with is a named row with the engine's own last log
/// line, and the next setting is still tried; a port something else answers on is never
/// searched in a setting's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_that_cannot_start_is_named_with_the_engines_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = contract(
        "http://127.0.0.1:{port}",
        &["--set", "max_batch={max_batch}"],
    )
    .replace("requests = 150", "requests = 30")
    .replace("requests = 20", "requests = 5");
    let (_, r) = tune(dir.path(), &src, "max_batch=lots").await.unwrap();
    let f = r.tried[0].failure.as_deref().expect("a named failure");
    assert!(
        f.starts_with("max_batch=lots: ") && f.contains("exited") && f.contains("last log line"),
        "{f}"
    );
    assert!(f.contains("max_batch"), "the engine's own words: {f}");
    let md = goodput::tune::document(&r).markdown();
    assert!(
        md.contains("failed") && md.contains("No setting has a capacity"),
        "{md}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let fixed = src.replace(
        "url = \"http://127.0.0.1:{port}\"",
        &format!("url = \"http://127.0.0.1:{port}\""),
    );
    let (_, r) = tune(dir.path(), &fixed, "max_batch=2").await.unwrap();
    let f = r.tried[0].failure.as_deref().unwrap();
    assert!(
        f.contains("already answers") && f.contains(&port.to_string()),
        "{f}"
    );
    assert!(r.tried[0].capacity.is_none());
}

/// Cancels the tune (as a signal would) when a line with `at` is shown: the moment a setting's
/// engine is about to be launched, not a guess at a time.
#[derive(Debug)]
struct CancelAt {
    at: &'static str,
    cancel: tokio_util::sync::CancellationToken,
}

impl goodput::run::Watch for CancelAt {
    fn line(&self, message: &str) {
        if message.contains(self.at) {
            self.cancel.cancel();
        }
    }
}

/// A tune stopped while its second setting's engine came up keeps its first setting; resumed,
/// the first is kept as it was (not launched again) and the second tried afresh in a directory
/// of its own (the cut try's log stays); `report` rebuilds the answer from the bundles; and a
/// resume whose contract or search differs is refused, naming what differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_tune_resumes_where_it_stopped_and_report_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = contract(
        "http://127.0.0.1:{port}",
        &["--set", "max_batch={max_batch}"],
    )
    .replace("requests = 150", "requests = 60")
    .replace("requests = 20", "requests = 8")
        + "[quality]\nmode = \"consistency\"\nprobes = 4\n";
    let path = dir.path().join("tune.toml");
    std::fs::write(&path, &src).unwrap();
    let setting =
        goodput::sweep::Vary::parse_as("--setting", &["max_batch=1,4".to_owned()]).unwrap();
    let search = goodput::tune::Search {
        resolution: 0.1,
        max_runs: 6,
        confirm_within: std::time::Duration::ZERO,
        decide_blocks: 0,
    };
    let mut o = common::sweep_options(dir.path());
    o.watch = std::sync::Arc::new(CancelAt {
        at: "setting 2 of 2",
        cancel: o.cancel.clone(),
    });
    let (first, r) = goodput::tune::tune(&path, &src, &setting, search, &o, None)
        .await
        .unwrap();
    assert!(r.interrupted, "{r:?}");
    assert_eq!(r.tried.len(), 2, "{r:?}");
    assert!(
        r.tried[0].capacity_rps().is_some() && !r.tried[0].cut,
        "{r:?}"
    );
    assert!(r.tried[1].cut, "the second was cut short: {r:?}");
    let kept_json =
        std::fs::read_to_string(first.dir.join("setting-1").join("server.stderr.log")).unwrap();

    // Refused: another contract, another resolution, a directory that is no tune.
    let other = src.replace("ttft_ms = 150", "ttft_ms = 200");
    let o = common::sweep_options(dir.path());
    let e = goodput::tune::tune(&path, &other, &setting, search, &o, Some(&first.dir))
        .await
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("differs") && e.contains("ttft_ms = 150"), "{e}");
    let wider = goodput::tune::Search {
        resolution: 0.2,
        ..search
    };
    let e = goodput::tune::tune(&path, &src, &setting, wider, &o, Some(&first.dir))
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("--resolution was 0.1"), "{e:#}");
    let e = goodput::tune::tune(&path, &src, &setting, search, &o, Some(dir.path()))
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("has no tune.json"), "{e:#}");

    let (again, r2) = goodput::tune::tune(&path, &src, &setting, search, &o, Some(&first.dir))
        .await
        .unwrap();
    assert_eq!(again.dir, first.dir, "the same bundle, continued");
    assert!(!r2.interrupted, "{r2:?}");
    assert_eq!(r2.tried.len(), 2);
    assert_eq!(
        r2.tried[0].capacity, r.tried[0].capacity,
        "the finished setting is kept as it was"
    );
    assert!(r2.tried[0].bundle.ends_with("setting-1"));
    assert_eq!(
        std::fs::read_to_string(first.dir.join("setting-1").join("server.stderr.log")).unwrap(),
        kept_json,
        "its engine was not launched again"
    );
    assert!(
        r2.tried[1].bundle.ends_with("setting-3"),
        "{:?}",
        r2.tried[1].bundle
    );
    assert!(
        first
            .dir
            .join("setting-2")
            .join("server.stderr.log")
            .exists(),
        "the cut try's log stays"
    );
    assert!(
        r2.tried[1].capacity_rps().is_some() && !r2.tried[1].cut,
        "{r2:?}"
    );
    // The best is the larger batch, as the clock says; a batch limit changes no output.
    assert_eq!(r2.ranked()[0].value, "4");
    let o = r2.tried[1].outputs.as_ref().expect("the quality guard ran");
    assert_eq!(
        (o.against.as_str(), o.status.as_str()),
        ("max_batch=1", "held"),
        "{o:?}"
    );

    // `report` rebuilds the same answer from the bundles, wherever the bundle now lives.
    let moved = dir.path().join("moved");
    std::fs::rename(&first.dir, &moved).unwrap();
    let rebuilt = goodput::tune::load(&moved).unwrap();
    assert_eq!(rebuilt.tried.len(), 2);
    for (x, y) in rebuilt.tried.iter().zip(&r2.tried) {
        assert_eq!(x.capacity, y.capacity);
        assert!(x.bundle.starts_with(&moved), "{:?}", x.bundle);
    }
    assert_eq!(
        goodput::tune::document(&rebuilt).markdown(),
        goodput::tune::document(&r2).markdown()
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["report", moved.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("goodput tune") && text.contains("max_batch=4"),
        "{text}"
    );
}

/// A setting that changes the outputs (here the simulator's seed, as a quantization or a draft
/// model would) is flagged by the quality guard on the points the capacities rest on, and the
/// one with more capacity is not called a win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_that_changes_outputs_is_never_called_a_win() {
    let dir = tempfile::tempdir().unwrap();
    let src = contract("http://127.0.0.1:{port}", &["--set", "seed={seed}"])
        .replace("requests = 150", "requests = 40")
        .replace("requests = 20", "requests = 5")
        + "[quality]\nmode = \"consistency\"\nprobes = 4\n";
    let path = dir.path().join("tune.toml");
    std::fs::write(&path, &src).unwrap();
    let setting = goodput::sweep::Vary::parse_as("--setting", &["seed=3,4".to_owned()]).unwrap();
    let search = goodput::tune::Search {
        resolution: 0.3,
        max_runs: 3,
        confirm_within: std::time::Duration::ZERO,
        decide_blocks: 0,
    };
    let o = common::sweep_options(dir.path());
    let (_, r) = goodput::tune::tune(&path, &src, &setting, search, &o, None)
        .await
        .unwrap();
    assert!(r.tried.iter().all(|t| t.capacity_rps().is_some()), "{r:?}");
    let out = r.tried[1].outputs.as_ref().expect("the quality guard ran");
    assert_eq!(
        (out.against.as_str(), out.status.as_str()),
        ("seed=3", "not held"),
        "{out:?}"
    );
    let md = goodput::tune::document(&r).markdown();
    assert!(
        md.contains("not called a win") && !md.contains("Best:"),
        "{md}"
    );
    assert!(md.contains("outputs vs seed=3"), "{md}");
}
