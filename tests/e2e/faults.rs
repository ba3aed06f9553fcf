//! The fault matrix: goodput (the release binary a user runs, here the test build) against a
//! server that misbehaves in one way per cell, and against the simulator's own faults. Every
//! cell checks that nothing is lost and nothing grows: the accounting identity per phase
//! (planned = ok + failed + not sent), the class of each failure, the client's peak memory, the
//! bundle complete and recomputable to the same summary, and the report naming the fault.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::common;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Peak resident memory the client may reach in any cell, MB.
const MAX_RSS_MB: i64 = 256;

/// How a hostile server answers every second completion request (the others are answered
/// properly, so every run has successes to compare with).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// `data: xxxx…` without end.
    EndlessLine,
    /// `data: x` lines without the blank line that ends an event.
    EndlessEvent,
    /// One 10 MB line, then the end of the event.
    TenMbLine,
    /// Two events, then the connection closes (no `[DONE]`).
    CloseMidStream,
    /// Bytes that are not HTTP.
    Garbage,
    /// A 200 stream of only `[DONE]`.
    DoneOnly,
    /// A 2 MB header.
    HugeHeader,
    /// A status line that does not parse.
    BadStatusLine,
    /// Headers never come (the contract's timeout is 1 s).
    SlowHeaders,
    /// 307 to another URL.
    Redirect,
    /// Every request after the fourth finds the server gone: its port closed.
    KilledMidRun,
    /// Every completion request is redirected (307) to the same path with `?hop=1`, answered.
    RedirectToSelf,
}

struct Hostile {
    url: String,
    posts: Arc<AtomicU64>,
}

/// Starts the hostile server on its own runtime thread (the test itself blocks on the child).
fn hostile(fault: Fault) -> Hostile {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", std_listener.local_addr().unwrap());
    let posts = Arc::new(AtomicU64::new(0));
    let count = posts.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let gone = Arc::new(AtomicBool::new(false));
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                if gone.load(Ordering::SeqCst) {
                    // Killed: the port closes (connections are refused from now on).
                    drop(listener);
                    return;
                }
                let (count, gone) = (count.clone(), gone.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, fault, &count, &gone).await;
                });
            }
        });
    });
    Hostile { url, posts }
}

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

fn chunk(text: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    let usage = if finish == "null" {
        String::new()
    } else {
        ",\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":3,\"total_tokens\":11}".to_owned()
    };
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":{finish}}}]{usage}}}\n\n"
    )
}

/// A proper streamed answer of three tokens.
fn good_stream() -> Vec<u8> {
    let mut out = SSE_HEAD.to_vec();
    for t in ["one ", "two ", "three"] {
        out.extend_from_slice(chunk(t, None).as_bytes());
    }
    out.extend_from_slice(chunk("", Some("length")).as_bytes());
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// Writes `block` until the client goes away (it must, at its limit).
async fn forever(sock: &mut TcpStream, block: &[u8]) {
    while sock.write_all(block).await.is_ok() {}
}

async fn serve(
    mut sock: TcpStream,
    fault: Fault,
    posts: &AtomicU64,
    gone: &AtomicBool,
) -> std::io::Result<()> {
    let Some((method, path, _)) = common::read_request(&mut sock).await else {
        return Ok(());
    };
    if method == "GET" {
        let body = if path == "/v1/models" {
            r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#
        } else {
            ""
        };
        let status = if body.is_empty() {
            "404 Not Found"
        } else {
            "200 OK"
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        return sock.write_all(resp.as_bytes()).await;
    }
    if fault == Fault::RedirectToSelf {
        if path.contains("hop=1") {
            return sock.write_all(&good_stream()).await;
        }
        posts.fetch_add(1, Ordering::SeqCst);
        return sock
            .write_all(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /v1/chat/completions?hop=1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
    }
    let n = posts.fetch_add(1, Ordering::SeqCst);
    if fault == Fault::KilledMidRun {
        if n >= 3 {
            gone.store(true, Ordering::SeqCst);
        }
        return sock.write_all(&good_stream()).await;
    }
    if n % 2 == 0 {
        return sock.write_all(&good_stream()).await;
    }
    match fault {
        Fault::EndlessLine => {
            sock.write_all(SSE_HEAD).await?;
            sock.write_all(b"data: ").await?;
            forever(&mut sock, &[b'x'; 64 << 10]).await;
        }
        Fault::EndlessEvent => {
            sock.write_all(SSE_HEAD).await?;
            forever(&mut sock, &b"data: x\n".repeat(8 << 10)).await;
        }
        Fault::TenMbLine => {
            sock.write_all(SSE_HEAD).await?;
            let mut line = b"data: ".to_vec();
            line.resize(10 << 20, b'y');
            line.extend_from_slice(b"\n\n");
            sock.write_all(&line).await?;
        }
        Fault::CloseMidStream => {
            sock.write_all(SSE_HEAD).await?;
            sock.write_all(chunk("one ", None).as_bytes()).await?;
            sock.write_all(chunk("two ", None).as_bytes()).await?;
        }
        Fault::Garbage => {
            sock.write_all(b"\x00\x13\x37garbage that is not HTTP\r\n\r\n")
                .await?;
        }
        Fault::DoneOnly => {
            sock.write_all(SSE_HEAD).await?;
            sock.write_all(b"data: [DONE]\n\n").await?;
        }
        Fault::HugeHeader => {
            let mut head = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
            head.resize(head.len() + (2 << 20), b'a');
            head.extend_from_slice(b"\r\ncontent-type: text/event-stream\r\n\r\n");
            sock.write_all(&head).await?;
        }
        Fault::BadStatusLine => {
            sock.write_all(b"HTTP/1.1 OKAY fine\r\ncontent-length: 0\r\n\r\n")
                .await?;
        }
        Fault::SlowHeaders => {
            // Holds the connection, silent, until the client gives up on it.
            let mut b = [0u8; 64];
            while let Ok(1..) = sock.read(&mut b).await {}
        }
        Fault::Redirect => {
            sock.write_all(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:9/elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await?;
        }
        Fault::KilledMidRun | Fault::RedirectToSelf => unreachable!(),
    }
    Ok(())
}

/// What a run of the goodput binary left.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    peak_rss_mb: i64,
    bundle: PathBuf,
}

/// Runs `goodput run` on `contract` in `dir`, waiting for it with `wait4` for its peak RSS
/// (which reaps it: `Child::wait` would then find nothing to wait for).
#[allow(clippy::zombie_processes)]
fn run_goodput(dir: &Path, contract: &str) -> Outcome {
    let path = dir.join("c.toml");
    std::fs::write(&path, contract).unwrap();
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", path.to_str().unwrap(), "--quiet", "--out"])
        .arg(dir.join("runs"))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let (code, peak_rss_mb) = wait_with_rss(child.id() as i32);
    let bundle = std::fs::read_dir(dir.join("runs/fault"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let read = |p: &Path| {
        let mut s = String::new();
        std::fs::File::open(p)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    Outcome {
        code,
        stdout: read(&out),
        stderr: read(&err),
        peak_rss_mb,
        bundle,
    }
}

/// Waits for `pid`; its exit code (128 + signal if a signal ended it) and peak RSS in MB.
fn wait_with_rss(pid: i32) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child, with pointers to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 failed");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    (code, usage.ru_maxrss / 1024)
}

/// The per-cell checks every fault must pass; returns the recomputed summary as JSON.
fn check_cell(cell: &str, o: &Outcome) -> serde_json::Value {
    let ctx = format!("[{cell}] exit {}; stderr:\n{}", o.code, o.stderr);
    eprintln!("[{cell}] peak RSS {} MB", o.peak_rss_mb);
    assert!(
        !o.stderr.contains("panicked") && !o.stderr.contains("RUST_BACKTRACE"),
        "{ctx}"
    );
    assert!(
        o.peak_rss_mb <= MAX_RSS_MB,
        "{ctx}\npeak RSS {} MB > {MAX_RSS_MB} MB",
        o.peak_rss_mb
    );
    for f in [
        "contract.toml",
        "command.json",
        "environment.json",
        "requests.jsonl",
        "summary.json",
        "report.html",
    ] {
        assert!(o.bundle.join(f).is_file(), "{ctx}\n{f} missing");
    }
    // Recomputable: the raw records give the summary the run wrote.
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.bundle.join("summary.json")).unwrap())
            .unwrap();
    let loaded = goodput::bundle::Bundle::load(&o.bundle).unwrap();
    let recomputed = serde_json::to_value(&loaded.summary).unwrap();
    assert_eq!(recomputed, written, "{ctx}\nthe summary does not recompute");
    // Every record accounted for: planned = ok + failed + not sent, per phase.
    for (phase, p) in written["phases"].as_object().unwrap() {
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        assert_eq!(n("requests"), n("ok") + n("failed"), "{ctx}\n{phase}");
        if let Some(planned) = p["planned"].as_u64() {
            assert_eq!(
                planned,
                n("ok") + n("failed") + n("not_sent"),
                "{ctx}\n{phase}: planned ≠ ok + failed + not sent"
            );
        }
    }
    let lines = std::fs::read_to_string(o.bundle.join("requests.jsonl")).unwrap();
    assert_eq!(
        lines.lines().count() as u64,
        written["phases"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p["requests"].as_u64().unwrap())
            .sum::<u64>(),
        "{ctx}\nrecords on disk ≠ requests counted"
    );
    recomputed
}

const REQUESTS: u64 = 10;

fn contract_for(url: &str, extra: &str) -> String {
    format!(
        "name = \"fault\"\n[target]\nurl = \"{url}\"\ntimeout = 1\n{extra}\n[workload]\ninput_tokens = {{ dist = \"fixed\", value = 8 }}\noutput_tokens = {{ dist = \"fixed\", value = 3 }}\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = {REQUESTS}\n[warmup]\nrequests = 0\n"
    )
}

/// One hostile cell: half the requests meet the fault, each failing with `class`.
fn hostile_cell(fault: Fault, class: &str) {
    let dir = tempfile::tempdir().unwrap();
    let server = hostile(fault);
    let mut contract = contract_for(&server.url, "");
    if class == "too_large" {
        // Stopped by size, not time: 4 MB of 8-byte lines took over the 1 s timeout to parse
        // in a spell of the host running at a third of its speed, beside three other tests.
        contract = contract.replace("timeout = 1\n", "timeout = 10\n");
    }
    let o = run_goodput(dir.path(), &contract);
    let cell = format!("{fault:?}");
    let s = check_cell(&cell, &o);
    assert_eq!(o.code, 0, "[{cell}] {}", o.stderr);
    let st = &s["steady"];
    assert_eq!(st["requests"], REQUESTS, "[{cell}]");
    assert_eq!(
        st["errors"][class],
        REQUESTS / 2,
        "[{cell}] want {class}: {}",
        st["errors"]
    );
    assert_eq!(st["ok"], REQUESTS / 2, "[{cell}]");
    // The report names the fault, with its first message.
    assert!(
        o.stdout.contains(&format!("{class} {}", REQUESTS / 2))
            && o.stdout.contains(&format!("first {class}:")),
        "[{cell}] the report does not name {class}:\n{}",
        o.stdout
    );
    assert_eq!(server.posts.load(Ordering::SeqCst), REQUESTS, "[{cell}]");
}

#[test]
fn an_endless_line_is_too_large_not_unbounded_memory() {
    hostile_cell(Fault::EndlessLine, "too_large");
}

#[test]
fn an_endless_event_is_too_large() {
    hostile_cell(Fault::EndlessEvent, "too_large");
}

#[test]
fn a_10_mb_line_is_too_large() {
    hostile_cell(Fault::TenMbLine, "too_large");
}

#[test]
fn a_close_mid_stream_is_stream_broken() {
    hostile_cell(Fault::CloseMidStream, "stream_broken");
}

#[test]
fn garbage_is_a_protocol_failure() {
    hostile_cell(Fault::Garbage, "protocol");
}

#[test]
fn a_done_only_stream_is_empty_not_success() {
    hostile_cell(Fault::DoneOnly, "empty");
}

#[test]
fn a_2_mb_header_is_too_large() {
    hostile_cell(Fault::HugeHeader, "too_large");
}

#[test]
fn a_bad_status_line_is_a_protocol_failure() {
    hostile_cell(Fault::BadStatusLine, "protocol");
}

#[test]
fn slow_headers_time_out() {
    hostile_cell(Fault::SlowHeaders, "timeout");
}

#[test]
fn a_redirect_is_not_followed_and_names_its_location() {
    hostile_cell(Fault::Redirect, "redirect");
    let dir = tempfile::tempdir().unwrap();
    let server = hostile(Fault::Redirect);
    let o = run_goodput(dir.path(), &contract_for(&server.url, ""));
    assert!(
        o.stdout.contains("http://127.0.0.1:9/elsewhere"),
        "{}",
        o.stdout
    );
}

#[test]
fn follow_redirects_follows_and_records_each_hop() {
    let dir = tempfile::tempdir().unwrap();
    let server = hostile(Fault::RedirectToSelf);
    let o = run_goodput(
        dir.path(),
        &contract_for(&server.url, "follow_redirects = true"),
    );
    let s = check_cell("RedirectToSelf", &o);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(s["steady"]["ok"], REQUESTS, "{}", s["steady"]);
    let loaded = goodput::bundle::Bundle::load(&o.bundle).unwrap();
    let want = format!("307 {}/v1/chat/completions?hop=1", server.url);
    assert!(
        loaded.records.iter().all(|r| r.redirects == [want.clone()]),
        "{:?}",
        loaded
            .records
            .iter()
            .map(|r| &r.redirects)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_server_killed_mid_run_ends_the_run_with_the_rest_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = hostile(Fault::KilledMidRun);
    // Connection refused takes microseconds: the collector's rule cancels the run within
    // milliseconds, while a closed loop may have sent a few dozen more.
    let planned = 2000;
    let c = contract_for(&server.url, "max_connect_failures = 3").replace(
        &format!("requests = {REQUESTS}"),
        &format!("requests = {planned}"),
    );
    let o = run_goodput(dir.path(), &c);
    let s = check_cell("KilledMidRun", &o);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.contains("the target stopped answering") && o.stderr.contains("refused"),
        "{}",
        o.stderr
    );
    let st = &s["steady"];
    assert_eq!(st["ok"], 4, "{st}");
    let connect = st["errors"]["connect"].as_u64().unwrap();
    assert!((3..500).contains(&connect), "{st}");
    assert!(st["not_sent"].as_u64().unwrap() > 1000, "{st}");
    assert!(
        s["stopped"]
            .as_str()
            .unwrap()
            .contains("the target stopped answering"),
        "{s}"
    );
    assert!(
        o.stdout.contains("Not sent (the run ended first): steady"),
        "{}",
        o.stdout
    );
}

/// The simulator's own faults, one cell each: the same checks, with its ground truth.
#[test]
fn the_simulators_faults_are_accounted_and_named() {
    for (fault, class) in [
        ("error_rate = 0.5", "http_status"),
        ("drop_rate = 0.5", "stream_broken"),
        ("malformed_rate = 0.5", "malformed"),
        ("slow_headers_rate = 0.5\nslow_headers_ms = 1500", "timeout"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let c = format!(
            "name = \"fault\"\n[target]\ntimeout = 1\n[target.simulator.faults]\n{fault}\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 16 }}\n[load]\nkind = \"closed\"\nconcurrency = 2\nrequests = 24\n[warmup]\nrequests = 0\n"
        );
        let o = run_goodput(dir.path(), &c);
        let s = check_cell(fault, &o);
        let n = s["steady"]["errors"][class].as_u64().unwrap_or(0);
        assert!(n > 0, "[{fault}] want {class}: {}", s["steady"]["errors"]);
        assert!(
            o.stdout.contains(&format!("first {class}:")),
            "{}",
            o.stdout
        );
    }
}

/// Overload is what an open-loop run measures: arrivals the client drops at `max_in_flight`
/// never reached the server, so they do not trip the fail-fast rule; the run completes and is
/// reported INVALID for them.
#[test]
fn an_overloaded_open_loop_run_completes_and_is_invalid_for_its_drops() {
    let dir = tempfile::tempdir().unwrap();
    let c = "name = \"fault\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 128 }\n[load]\nkind = \"open\"\nrate = 100\nrequests = 300\nmax_in_flight = 50\n[warmup]\nrequests = 0\n";
    let o = run_goodput(dir.path(), c);
    let s = check_cell("overload", &o);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(s.get("stopped").is_none(), "{s}");
    let st = &s["steady"];
    assert_eq!(st["requests"], 300, "{st}");
    assert_eq!(st["not_sent"], 0, "{st}");
    assert!(st["errors"]["client_dropped"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(s["validity"]["verdict"], "INVALID", "{}", s["validity"]);
    assert!(
        s["validity"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r
                .as_str()
                .unwrap()
                .contains("client-dropped at load.max_in_flight = 50")),
        "{}",
        s["validity"]
    );
}
