//! The README's "Your own server in three steps", followed as written (issue #17): its shell
//! block is read from README.md, `goodput` is this build's binary, and only the port differs
//! (8000 may be taken on the machine running the tests).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The commands of the README's quickstart block, comments dropped.
fn quickstart() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## Your own server in three steps")
        .nth(1)
        .expect("README has the quickstart section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in it");
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or(l).trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Stops the background server when the test ends, however it ends.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn args(line: &str, port: u16) -> Vec<String> {
    let line = line.replace("8000", &port.to_string());
    let mut words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    assert_eq!(words.remove(0), "goodput", "{line}");
    words
}

#[test]
fn the_readme_quickstart_runs_as_written_against_an_external_simulator() {
    let lines = quickstart();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].ends_with('&'),
        "the server starts in the background: {lines:?}"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_goodput");
    let server = args(lines[0].trim_end_matches('&'), port);
    let _sim = Background(
        Command::new(bin)
            .args(&server)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Ready when it accepts a connection (bounded).
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the simulator did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    for line in &lines[1..] {
        let mut child = Command::new(bin)
            .args(args(line, port))
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(child.wait().unwrap().success(), "{line}\n{out}\n{err}");
        if line.contains(" run ") && !host_kept_the_client_from_its_schedule(dir.path()) {
            assert!(
                out.contains("Validity: VALID for tail latency, goodput and capacity"),
                "{out}"
            );
            // Issue #44: the run says the strongest claims its sample supports.
            assert!(out.contains("Supported at 99% confidence: TTFT p"), "{out}");
        }
        if line.contains(" run ") {
            assert!(
                out.contains(&format!("Target: http://127.0.0.1:{port}")),
                "{out}"
            );
        }
    }
    // The contract `init` wrote names the server, and the run kept its bundle.
    let c = goodput::contract::load(&dir.path().join("my.toml")).unwrap();
    assert_eq!(
        c.target.url.as_deref(),
        Some(format!("http://127.0.0.1:{port}").as_str())
    );
    assert!(Path::new(&dir.path().join("runs/chat-poisson")).is_dir());
}

/// The run came out INVALID only because the client fell behind its schedule, and the machine
/// kept it behind (`the_machine_kept_the_client_behind`): goodput saying so is then the right
/// answer.
fn host_kept_the_client_from_its_schedule(dir: &Path) -> bool {
    // The run's one bundle: runs/chat-poisson/<time>-<fingerprint>/.
    std::fs::read_dir(dir.join("runs/chat-poisson"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("summary.json").is_file())
        .is_some_and(|b| {
            let only_reason = std::fs::read_to_string(b.join("summary.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<goodput::analyze::Summary>(&t).ok())
                .is_some_and(|s| s.validity.reasons.len() == 1);
            only_reason && crate::common::the_machine_kept_the_client_behind(&b)
        })
}
