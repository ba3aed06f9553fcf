//! The live dashboard as a person sees it: `goodput demo --live` and `goodput run --live` in a
//! real terminal (tmux: keys sent with send-keys, the screen read with capture-pane), the
//! terminal handed back as it was, and the bundle the same files a run without it writes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// A tmux server of the test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, dir: &Path, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("goodput-{name}-{}", std::process::id()),
        };
        let ok = Command::new("tmux")
            .args(["-L", &t.socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "120", "-y", "45", "-c"])
            .arg(dir)
            .arg(command)
            .status()
            .expect("tmux is installed (.ci/run installs it)");
        assert!(ok.success(), "tmux could not start");
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", keys]);
    }

    /// Waits (up to `secs`) until the screen shows `what`; the screen then.
    fn wait_for(&self, what: &str, secs: u64) -> String {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "no {what:?} on the screen after {secs} s:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until goodput has exited (the shell after it writes `EXIT=` to `out.txt`, then
    /// waits, so the terminal is read as goodput left it, not as tmux shows a dead pane).
    fn wait_exit(&self, dir: &Path, secs: u64) -> String {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let out = std::fs::read_to_string(dir.join("out.txt")).unwrap_or_default();
            if out.contains("EXIT=") {
                return out;
            }
            assert!(
                Instant::now() < until,
                "still running after {secs} s:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The terminal as its program left it: (alternate screen on, cursor visible).
    fn modes(&self) -> (String, String) {
        let f = self.tmux(&["display-message", "-p", "#{alternate_on} #{cursor_flag}"]);
        let mut it = f.split_whitespace().map(str::to_owned);
        (it.next().unwrap_or_default(), it.next().unwrap_or_default())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// The one bundle under `root` (`runs/<name>/<id>/`).
fn bundle_in(root: &Path) -> PathBuf {
    let name = std::fs::read_dir(root)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_dir(name)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `goodput run --live` of `contract` in a terminal of its own; its bundle goes to `runs/`.
fn live_run(name: &str, contract: &str) -> (tempfile::TempDir, Tmux) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), contract).unwrap();
    let t = Tmux::start(
        name,
        dir.path(),
        &format!(
            "{BIN} run --live c.toml --out runs > out.txt; echo EXIT=$? >> out.txt; sleep 120"
        ),
    );
    (dir, t)
}

/// The files of a bundle a plain (not live) run of `contract` writes, with `args` added.
fn plain_run_files(dir: &Path, contract: &Path, args: &[&str]) -> Vec<String> {
    let out = dir.join("plain");
    let st = Command::new(BIN)
        .args(["run", "-q"])
        .arg(contract)
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    files(&bundle_in(&out))
}

#[test]
fn the_demo_dashboard_shows_the_tail_cross_the_slo_and_gives_the_terminal_back() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tmux::start(
        "demo",
        dir.path(),
        &format!(
            "{BIN} demo --live --duration 60 --out runs > out.txt; echo EXIT=$? >> out.txt; sleep 120"
        ),
    );
    // At half of capacity the open-loop tail is within the SLO.
    // (Each thing waited for: a capture may catch a frame half drawn.)
    t.wait_for("p99 within", 30);
    t.wait_for("open loop (Poisson) at 50% of capacity", 5);
    t.wait_for("TTFT p99 over the last 10 s", 5);
    assert!(
        t.modes().0 == "1",
        "the dashboard draws on the alternate screen"
    );
    // Ten steps up: 150% of capacity. The queue grows and the p99 passes the SLO.
    for _ in 0..10 {
        t.keys("+");
    }
    t.wait_for("at 150% of capacity", 10);
    t.wait_for("p99 ABOVE the SLO", 40);
    // Closed loop at the same nominal load: in place, a new segment.
    t.keys("c");
    t.wait_for("closed loop,", 10);
    t.keys("q");
    let out = t.wait_exit(dir.path(), 60);
    let (alternate, cursor) = t.modes();
    assert_eq!(
        (alternate.as_str(), cursor.as_str()),
        ("0", "1"),
        "the terminal is left on its normal screen with the cursor shown"
    );
    assert!(out.contains("EXIT=0"), "{out}");
    assert!(out.contains("Segments: the load changed"), "{out}");
    // The bundle: a run's files, every record labelled with its segment, each segment
    // described, the closed-loop one among them.
    let b = bundle_in(&dir.path().join("runs"));
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("environment.json")).unwrap())
            .unwrap();
    let segs = env["live"]["segments"].as_array().unwrap();
    assert_eq!(segs.len(), 12, "{segs:?}");
    assert_eq!(segs[11]["loop"], "closed");
    assert!(segs[11]["users"].as_u64().unwrap() > 0);
    let records = std::fs::read_to_string(b.join("requests.jsonl")).unwrap();
    assert!(
        records.lines().all(|l| l.contains("\"segment\":")),
        "every record says its segment"
    );
    // A non-live run of the bundle's own contract writes the same files.
    let short = ["--set", "load.duration=2s", "--set", "warmup.duration=1s"];
    assert_eq!(
        files(&b),
        plain_run_files(dir.path(), &b.join("contract.toml"), &short)
    );
}

#[test]
fn run_live_ends_by_itself_and_writes_the_bundle_a_run_without_it_writes() {
    let (dir, t) = live_run(
        "run",
        "name = \"live-run\"\n[load]\nrate = 20\nduration = \"4s\"\n[warmup]\nduration = \"1s\"\n[slo]\nttft_ms = 300\n",
    );
    t.wait_for("offered 20.0 req/s", 30);
    t.wait_for("q or Ctrl-C: stop the run", 5);
    let out = t.wait_exit(dir.path(), 60);
    assert_eq!(t.modes(), ("0".to_owned(), "1".to_owned()));
    assert!(out.contains("EXIT=0"), "{out}");
    assert_eq!(
        files(&bundle_in(&dir.path().join("runs"))),
        plain_run_files(dir.path(), &dir.path().join("c.toml"), &[])
    );
}

#[test]
fn live_refuses_a_stderr_that_is_no_terminal() {
    let out = Command::new(BIN)
        .args(["demo", "--live", "--duration", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stderr is not one"), "{err}");
}

#[test]
fn ctrl_c_on_the_dashboard_stops_the_run_keeps_it_and_restores_the_terminal() {
    let (dir, t) = live_run(
        "stop",
        "name = \"live-stop\"\n[load]\nrate = 20\nduration = \"120s\"\n[warmup]\nduration = \"1s\"\n",
    );
    t.wait_for("steady", 30);
    t.keys("C-c");
    let out = t.wait_exit(dir.path(), 60);
    assert_eq!(t.modes(), ("0".to_owned(), "1".to_owned()));
    // As SIGINT would: the status of an interrupted run, and what it measured kept.
    assert!(out.contains("EXIT=130"), "{out}");
    assert!(out.contains("interrupted by SIGINT"), "{out}");
    let b = bundle_in(&dir.path().join("runs"));
    assert!(
        std::fs::read_to_string(b.join("requests.jsonl"))
            .unwrap()
            .lines()
            .count()
            > 5
    );
}
