//! Cold start and warm-up (issue #4): launch timing, the first requests as their own result,
//! `until_stable`, and launch failures that leave nothing running.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{parse, try_run_in as run_in};
use goodput::contract::Contract;
use goodput::plan::Phase;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_simulator_reports_load_time_and_a_slow_first_request_apart() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"cold\"\n[target]\nurl = \"http://127.0.0.1:{{port}}\"\n\
         [cold_start]\nlaunch = [\"{BIN}\", \"sim\", \"--port\", \"{{port}}\", \"--set\", \"load_time_ms=1500\", \"--set\", \"warmup_slowdown=6\", \"--set\", \"warmup_steps=30\", \"--set\", \"decode_base_ms=8\"]\nrequests = 3\n\
         [workload]\ninput_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n\
         [load]\nmodel = \"open\"\nrate = 20\nrequests = 60\n[warmup]\nrequests = 20\n"
    ));
    let r = run_in(c, dir.path()).await.unwrap();
    let cs = r.summary.cold_start.as_ref().expect("cold-start section");
    assert!(cs.launched);
    assert!(
        (cs.ready_s - 1.5).abs() <= 0.15,
        "ready after {} s, load time 1.5 s",
        cs.ready_s
    );
    assert!(cs.port_open_s.unwrap() < cs.ready_s);
    assert!(cs.first_token_s.unwrap() > cs.ready_s);
    assert_eq!(cs.requests.requests, 3);
    // The first request meets the 6× warm-up penalty; steady state does not.
    let steady_median = r.summary.steady.stats.ttft_ms.as_ref().unwrap().p50;
    let first = cs.first_request_ttft_ms.unwrap();
    assert!(
        first > 3.0 * steady_median,
        "first request TTFT {first} ms vs steady median {steady_median} ms"
    );
    // Both results are in the bundle, labelled; steady statistics exclude the cold start.
    let count = |p: Phase| r.records.iter().filter(|x| x.phase == p).count();
    assert_eq!(
        (
            count(Phase::ColdStart),
            count(Phase::Warmup),
            count(Phase::Steady)
        ),
        (3, 20, 60)
    );
    assert_eq!(r.summary.steady.stats.requests, 60);
    for f in [
        "cold_start.json",
        "server.stdout.log",
        "server.stderr.log",
        "timeseries.json",
    ] {
        assert!(r.bundle.path(f).is_file(), "{f}");
    }
    let log = std::fs::read_to_string(r.bundle.path("server.stdout.log")).unwrap();
    assert!(log.contains("goodput sim listening"), "{log}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.path("cold_start.json")).unwrap())
            .unwrap();
    assert!(t["exit"].as_str().unwrap().contains("SIGTERM"), "{t}");
    let report = goodput::report::document(&r.summary).terminal();
    assert!(report.contains("Cold start"), "{report}");
    // The summary is recomputable with the cold-start part.
    let again = goodput::bundle::Bundle::load(&r.bundle.dir)
        .unwrap()
        .summary;
    assert_eq!(again, r.summary);
}

fn until_stable(threshold: f64, max: u64) -> Contract {
    parse(&format!(
        "[target.simulator]\ndecode_base_ms = 12\nwarmup_slowdown = 5\nwarmup_steps = 40\n\
         [workload]\ninput_tokens = {{ dist = \"fixed\", value = 8 }}\noutput_tokens = {{ dist = \"fixed\", value = 1 }}\n\
         [load]\nmodel = \"closed\"\nconcurrency = 1\nrequests = 20\n\
         [warmup.until_stable]\nwindow = 10\nthreshold = {threshold}\nmax_requests = {max}\n"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_stable_ends_after_the_penalty_decays_or_at_its_maximum() {
    let dir = tempfile::tempdir().unwrap();
    // One request at a time and one output token: request k runs exactly engine step k, so the
    // simulator's penalty is gone after request 40. Two windows of 10 must then agree.
    // A step of 12 ms keeps the window-to-window change of the penalty (about 4 ms per 10
    // requests early on) well above a slow host's late wake-ups (2-3 ms at p99), which would
    // otherwise narrow the relative gap between windows and end warm-up early.
    let r = run_in(until_stable(0.15, 300), dir.path()).await.unwrap();
    let w = &r.summary.warmup;
    assert_eq!(w.ended, "stable");
    let ttfts = || -> Vec<u64> {
        goodput::bundle::Bundle::load(&r.bundle.dir)
            .unwrap()
            .records
            .iter()
            .filter_map(|x| Some((x.first_token_us? - x.sent_us?) / 1000))
            .collect()
    };
    assert!(
        (50..=90).contains(&w.requests),
        "warm-up ended after {} requests; TTFTs, ms: {:?}",
        w.requests,
        ttfts()
    );
    let steady = r.summary.steady.stats.ttft_ms.as_ref().unwrap();
    let warm = r.summary.phases["warmup"].ttft_ms.as_ref().unwrap();
    assert!(warm.max > 3.0 * steady.p50, "the penalty was in warm-up");
    // A threshold of 0 can never be met: warm-up stops at its maximum and says so.
    let r = run_in(until_stable(0.0, 30), dir.path()).await.unwrap();
    assert_eq!(
        (r.summary.warmup.ended.as_str(), r.summary.warmup.requests),
        ("max_requests", 30)
    );
}

fn goodput(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker) && !c.contains("cargo"))
        .collect()
}

#[test]
fn launch_failures_are_clear_and_leave_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let contract = |launch: &str, extra: &str| {
        format!(
            "[target]\nurl = \"http://127.0.0.1:{{port}}\"\nmodel = \"m\"\n[cold_start]\nlaunch = {launch}\n{extra}\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 2\n"
        )
    };
    let cases = [
        (
            "missing.toml",
            contract("[\"/nonexistent/engine\"]", ""),
            vec!["cannot start `/nonexistent/engine`"],
        ),
        (
            "early.toml",
            contract("[\"sh\", \"-c\", \"echo engine-boom >&2; exit 3\"]", ""),
            vec!["exit status: 3", "engine-boom"],
        ),
        // Issue #46: a missing working directory, named as such (not as a missing program).
        (
            "workdir.toml",
            contract(
                "[\"sh\", \"-c\", \"true\"]",
                "workdir = \"/nonexistent/dir\"",
            ),
            vec!["cold_start.workdir /nonexistent/dir is not a directory"],
        ),
        (
            "never.toml",
            contract(
                "[\"sh\", \"-c\", \"echo still-loading; sleep 37.777\"]",
                "ready_timeout = \"1s\"",
            ),
            vec!["not ready", "within 1s", "still-loading"],
        ),
    ];
    for (name, text, wants) in cases {
        std::fs::write(d.join(name), text).unwrap();
        let out = goodput(&["run", name, "--quiet"], d);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} should fail");
        assert!(!err.contains("panicked"), "{err}");
        for w in wants {
            assert!(err.contains(w), "{name}: want {w:?} in {err}");
        }
    }
    assert!(
        processes_with("37.777").is_empty(),
        "orphans: {:?}",
        processes_with("37.777")
    );
    // The failed launches kept their logs.
    let logs: Vec<_> = walk(&d.join("runs"))
        .into_iter()
        .filter(|p| p.ends_with("server.stderr.log"))
        .collect();
    assert!(
        logs.iter()
            .any(|p| std::fs::read_to_string(p).unwrap().contains("engine-boom"))
    );
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}
