//! Signals: SIGINT, SIGTERM and SIGHUP each stop a run the same way (a complete interrupted
//! bundle, every request the server saw recorded, exit 128 + the signal), a server goodput
//! launched never outlives it (not even `kill -9` of goodput), and every wait before the load
//! gives way to a signal.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use goodput::sim::SimConfig;

fn spawn_run(dir: &Path, contract: &str) -> std::process::Child {
    let path = dir.join("c.toml");
    std::fs::write(&path, contract).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", path.to_str().unwrap(), "--quiet", "--out"])
        .arg(dir.join("runs"))
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap()
}

/// Polls (every 20 ms, up to `within`) until `done` holds; the condition is what the test
/// waits for, the poll only how often it looks.
fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < within, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The one bundle under `dir/runs/<name>`, once it exists.
fn bundle(dir: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("runs").join(name))
        .ok()?
        .next()?
        .ok()
        .map(|e| e.path())
}

fn records_written(b: &Path) -> usize {
    std::fs::read_to_string(b.join("requests.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn kill(child: &std::process::Child, sig: i32) {
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Every process whose environment carries `mark` (a launched server and its children).
fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("GOODPUT_TEST_MARK={mark}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_sigterm_and_sighup_each_leave_a_complete_interrupted_bundle_losing_nothing() {
    let sim = common::sim(SimConfig::default()).await;
    for (name, sig) in [
        ("SIGINT", libc::SIGINT),
        ("SIGTERM", libc::SIGTERM),
        ("SIGHUP", libc::SIGHUP),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let c = format!(
            "name = \"sig\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 64 }}\n[load]\nkind = \"open\"\nrate = 40\nrequests = 4000\n[warmup]\nrequests = 0\n",
            sim.base_url()
        );
        let d = dir.path().to_owned();
        let (code, b) = tokio::task::spawn_blocking(move || {
            let mut child = spawn_run(&d, &c);
            wait_for("20 records", Duration::from_secs(60), || {
                bundle(&d, "sig").is_some_and(|b| records_written(&b) >= 20)
            });
            kill(&child, sig);
            let status = child.wait().unwrap();
            (status.code(), bundle(&d, "sig").unwrap())
        })
        .await
        .unwrap();
        let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
        assert_eq!(code, Some(128 + sig), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
        common::assert_bundle_complete(
            &goodput::bundle::Bundle::open(&b).unwrap(),
            &["report.html"],
        );
        let command: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(b.join("command.json")).unwrap())
                .unwrap();
        assert_eq!(command["interrupted"], true, "{name}");
        assert_eq!(command["signal"], name);
        let loaded = goodput::bundle::Bundle::load(&b).unwrap();
        assert!(loaded.summary.interrupted);
        assert_eq!(
            loaded.summary.stopped.as_deref(),
            Some(format!("interrupted by {name}").as_str())
        );
        let steady = &loaded.summary.steady.stats;
        assert!(steady.not_sent.unwrap() > 0, "{name}: {steady:?}");
        assert_eq!(steady.planned, Some(4000));
        // Nothing lost: every request the simulator saw from this run has its record.
        let run_id = b.file_name().unwrap().to_str().unwrap().to_owned();
        let ids: std::collections::HashSet<&str> = loaded
            .records
            .iter()
            .map(|r| r.request_id.as_str())
            .collect();
        let seen: Vec<_> = sim
            .ground_truth()
            .into_iter()
            .filter_map(|g| g.request_id)
            .filter(|id| id.starts_with(&run_id))
            .collect();
        assert!(seen.len() >= 20, "{name}: the simulator saw {}", seen.len());
        let lost: Vec<_> = seen
            .iter()
            .filter(|id| !ids.contains(id.as_str()))
            .collect();
        assert!(
            lost.is_empty(),
            "{name}: requests the server saw without a record: {lost:?}"
        );
    }
}

fn launch_contract(mark: &str, launch: &str, extra: &str) -> String {
    format!(
        "name = \"launch\"\n[target]\nurl = \"http://127.0.0.1:{{port}}\"\n[cold_start]\nlaunch = {launch}\nready_timeout = 60\nenv = {{ GOODPUT_TEST_MARK = \"{mark}\" }}\n{extra}\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 64 }}\n[load]\nkind = \"open\"\nrate = 20\nrequests = 4000\n[warmup]\nrequests = 0\n"
    )
}

fn fresh_mark() -> String {
    format!(
        "m{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ (std::ptr::from_ref(&0u8) as usize as u128)
    )
}

fn sim_launch() -> String {
    format!(
        "[\"{}\", \"sim\", \"--port\", \"{{port}}\"]",
        env!("CARGO_BIN_EXE_goodput")
    )
}

#[test]
fn sigterm_stops_a_launched_server_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let mark = fresh_mark();
    let mut child = spawn_run(dir.path(), &launch_contract(&mark, &sim_launch(), ""));
    let d = dir.path();
    wait_for("10 records", Duration::from_secs(60), || {
        bundle(d, "launch").is_some_and(|b| records_written(&b) >= 10)
    });
    assert!(
        !marked(&mark).is_empty(),
        "the launched server is not found"
    );
    kill(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(d.join("stderr")).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert_eq!(marked(&mark), Vec::<u32>::new(), "left behind");
    let b = bundle(d, "launch").unwrap();
    let cold: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("cold_start.json")).unwrap()).unwrap();
    assert!(cold["exit"].as_str().unwrap().contains("SIGTERM"), "{cold}");
    // The environment's values are not in the bundle (names are).
    let contract = std::fs::read_to_string(b.join("contract.toml")).unwrap();
    assert!(contract.contains("GOODPUT_TEST_MARK") && !contract.contains(&mark));
}

#[test]
fn kill_9_of_goodput_leaves_no_launched_server_running() {
    let dir = tempfile::tempdir().unwrap();
    let mark = fresh_mark();
    let mut child = spawn_run(dir.path(), &launch_contract(&mark, &sim_launch(), ""));
    let d = dir.path();
    wait_for("5 records", Duration::from_secs(60), || {
        bundle(d, "launch").is_some_and(|b| records_written(&b) >= 5)
    });
    assert!(!marked(&mark).is_empty());
    kill(&child, libc::SIGKILL);
    child.wait().unwrap();
    // The guard stops the server's group once goodput is gone (SIGTERM, then SIGKILL after
    // the grace period, 10 s by default).
    wait_for("the launched server to go", Duration::from_secs(30), || {
        marked(&mark).is_empty()
    });
}

#[test]
fn a_signal_during_the_readiness_wait_stops_at_once_and_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mark = fresh_mark();
    // A server that never becomes ready: nothing listens on the port.
    let mut child = spawn_run(
        dir.path(),
        &launch_contract(&mark, "[\"sleep\", \"300\"]", ""),
    );
    wait_for("the launched process", Duration::from_secs(30), || {
        !marked(&mark).is_empty()
    });
    let t = Instant::now();
    kill(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        stderr.contains("interrupted by SIGTERM while waiting for the server to be ready"),
        "{stderr}"
    );
    wait_for(
        "the launched process to go",
        Duration::from_secs(15),
        || marked(&mark).is_empty(),
    );
}
