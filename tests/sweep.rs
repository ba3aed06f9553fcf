//! `goodput sweep` over the simulator (issue #10, in part).

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
    let o = goodput::sweep::SweepOptions {
        wake_latency_hold: true,
        out_root: dir.path().to_owned(),
        progress: false,
        argv: vec![],
        cancel: tokio_util::sync::CancellationToken::new(),
    };
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
    assert!(err.contains("a sweep changes one variable"), "{err}");
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

// The capacity search against the simulator's own capacity: tests/trust.rs, where the
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
    for series in ["open loop p99", "closed loop p99", "SLO 500 ms"] {
        assert!(html.contains(series), "{series}");
    }
}
