//! `goodput sweep` over the simulator (issue #10, in part).

use crate::common;

use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_sweep_gives_one_bundle_per_rising_point() {
    let dir = tempfile::tempdir().unwrap();
    let src = "name = \"sw\"\n[workload]\nseed = 2\ninput_tokens = { dist = \"fixed\", value = 32 }\noutput_tokens = { dist = \"fixed\", value = 8 }\n\
               [load]\nmodel = \"open\"\nrate = 1\nrequests = 60\n[warmup]\nrequests = 5\n[slo]\nttft_ms = 500\n[quality]\nmode = \"consistency\"\n\
               [target.simulator]\nprefill_tokens_per_s = 50000\ndecode_base_ms = 3\ndecode_per_seq_ms = 0.05\n";
    let path = dir.path().join("sw.toml");
    std::fs::write(&path, src).unwrap();
    let vary = goodput::sweep::Vary::parse(&["load.rate=10,20,40".into()]).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, r) = goodput::sweep::sweep(&path, src, &vary, &o).await.unwrap();
    assert_eq!(r.points.len(), 3);
    let offered: Vec<f64> = r.points.iter().map(|p| p.offered_rps.unwrap()).collect();
    assert!(offered.windows(2).all(|w| w[0] < w[1]), "{offered:?}");
    for (p, want) in r.points.iter().zip([10.0, 20.0, 40.0]) {
        // 60 Poisson gaps: the offered rate is within ~13% (1 sd) of the asked one; 40% is 3 sd.
        assert!((p.offered_rps.unwrap() / want - 1.0).abs() < 0.4, "{p:?}");
        assert!(p.bundle.join("requests.jsonl").is_file());
        assert_eq!(p.attainment, Some(1.0));
    }
    assert!(parent.path("sweep.json").is_file() && parent.path("sweep.md").is_file());
    let html = std::fs::read_to_string(parent.path("sweep.html")).unwrap();
    assert!(html.contains("id=\"sweep-latency\"") && html.contains("id=\"sweep-goodput\""));
    // Every point shares every axis but load.
    let fp: Vec<goodput::contract::Fingerprints> = r
        .points
        .iter()
        .map(|p| {
            goodput::contract::load(&p.bundle.join("contract.toml"))
                .unwrap()
                .fingerprints()
        })
        .collect();
    assert!(fp.windows(2).all(|w| w[0].workload == w[1].workload
        && w[0].target == w[1].target
        && w[0].slo == w[1].slo
        && w[0].load != w[1].load));
}

#[test]
fn two_varied_fields_and_bad_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[load]\nmodel = \"open\"\nrate = 1\nrequests = 5\n").unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_goodput"))
            .arg("sweep")
            .arg(&path)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["--vary", "load.rate=1,2", "--vary", "workload.seed=1,2"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("change one variable at a time"), "{err}");
    // A value the contract refuses stops the sweep before any run, naming file, key and value.
    let out = run(&["--vary", "load.rate=2,-1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("c.toml") && err.contains("load.rate") && err.contains("-1"),
        "{err}"
    );
    assert!(
        !dir.path().join("runs").exists(),
        "nothing run, nothing written"
    );
}

// The capacity search against the simulator's own capacity: tests/e2e/trust.rs, where the
// same rule judges both.

#[test]
fn the_demo_page_draws_both_loops_against_the_slo() {
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["demo", "--html"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.contains("id=\"demo-ttft\""));
    for series in ["open loop p99", "closed loop p99", "SLO p99 ≤ 500 ms"] {
        assert!(html.contains(series), "{series}");
    }
}

/// `sweep --requests N` makes every point that size (issue #17: points could not be made
/// smaller), and a capacity search interrupted by Ctrl-C keeps the point in flight and says so
/// (it used to drop it and advise raising --max-runs).
#[test]
fn sweep_points_take_overrides_and_an_interrupted_search_keeps_its_point() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(
        &path,
        "name = \"small\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 4 }\n[load]\nrate = 40\nrequests = 500\n[slo]\nttft_ms = 500\npercentile = 50\n\
         [target.simulator]\ndecode_base_ms = 2\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args([
            "sweep",
            "s.toml",
            "--vary",
            "load.rate=30,60",
            "--requests",
            "15",
            "-q",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let points: Vec<_> = glob_points(&dir.path().join("runs/small"));
    assert_eq!(points.len(), 2);
    for p in &points {
        let c = goodput::contract::load(&p.join("contract.toml")).unwrap();
        assert_eq!(c.load.requests(), Some(15));
    }

    // A long capacity search, interrupted while its first point runs.
    let before = glob_points(&dir.path().join("runs/small"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args([
            "sweep",
            "s.toml",
            "--capacity",
            "--requests",
            "100000",
            "-q",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let root = dir.path().join("runs/small");
    loop {
        let busy = glob_points(&root).iter().any(|p| {
            !before.contains(p)
                && std::fs::read_to_string(p.join("requests.jsonl"))
                    .is_ok_and(|t| t.lines().count() >= 10)
        });
        if busy {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no point started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("Interrupted: the point in flight is kept"),
        "{stdout}"
    );
    assert!(!stdout.contains("raise --max-runs"), "{stdout}");
    let sweeps: Vec<serde_json::Value> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("sweep.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .filter(|v: &serde_json::Value| v["capacity"].is_object())
        .collect();
    assert_eq!(sweeps.len(), 1);
    assert_eq!(
        sweeps[0]["points"].as_array().unwrap().len(),
        1,
        "{}",
        sweeps[0]
    );
    assert_eq!(sweeps[0]["interrupted"], true);
}

/// Every `point-NN` bundle under a contract's sweep bundles.
fn glob_points(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for parent in std::fs::read_dir(root).into_iter().flatten().flatten() {
        for p in std::fs::read_dir(parent.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if p.file_name().to_string_lossy().starts_with("point-") {
                out.push(p.path());
            }
        }
    }
    out.sort();
    out
}

/// A point whose target fails gives up (its own run), and the sweep goes on to the next point:
/// giving up is not an interruption of the sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_that_gives_up_does_not_end_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let src = "name = \"sw\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 4 }\n\
               [load]\nkind = \"open\"\nrate = 1\nrequests = 200\n[warmup]\nrequests = 0\n\
               [target.simulator.faults]\nerror_rate = 1.0\n";
    let path = dir.path().join("sw.toml");
    std::fs::write(&path, src).unwrap();
    let vary = goodput::sweep::Vary::parse(&["load.rate=200,400".into()]).unwrap();
    let o = common::sweep_options(dir.path());
    let (_, r) = goodput::sweep::sweep(&path, src, &vary, &o).await.unwrap();
    assert!(!r.interrupted);
    assert_eq!(r.points.len(), 2);
    for p in &r.points {
        let b = goodput::bundle::Bundle::load(&p.bundle).unwrap();
        let stopped = b.summary.stopped.unwrap_or_default();
        assert!(
            stopped.contains("requests that reached the server all failed"),
            "{stopped}"
        );
        assert!(b.summary.steady.stats.not_sent.unwrap() > 100);
    }
}
