//! The cold-start test's launcher: starts the server from the contract's `launch` command (in its
//! own process group, output into the bundle), times process start → port open → ready, and
//! stops it at the end (SIGTERM, then SIGKILL after the grace period). A server that exits or
//! never becomes ready ends the test with its exit status and the tail of its log, and is never
//! left running: [`Launched`] kills its process group when dropped on any path, and a guard
//! process kills it when goodput dies without dropping it (`kill -9`, a crash).
//!
//! The guard is a `sh` that waits for end-of-file on a pipe only goodput holds (the kernel
//! closes it however goodput ends), then stops the server's process group as [`Launched::stop`]
//! would. Not `PR_SET_PDEATHSIG` on the server: it fires when the *thread* that spawned the
//! child ends, not the process, and a runtime's threads come and go; nor would it reach the
//! server's own children. The one case the guard cannot reach is a process that leaves the
//! group itself (`setsid`, a daemonising server): stop those by their own means.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::analyze::Timeline;
use crate::contract::{ColdStart, Contract};

/// Why the server could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    // `cause`, not `source`: the message says it, and a source would print it twice in a chain.
    #[error("cannot start `{command}`: {cause}")]
    Spawn {
        command: String,
        cause: std::io::Error,
    },
    #[error(
        "the launched server exited with {status} before it was ready; last lines of its log:\n{tail}"
    )]
    Exited { status: String, tail: String },
    #[error(
        "the server was not ready at {url} within {timeout:?} (it was stopped); last lines of its log:\n{tail}"
    )]
    NotReady {
        url: String,
        timeout: Duration,
        tail: String,
    },
    #[error("cannot write the server's log into the bundle: {0}")]
    Log(std::io::Error),
}

/// Replaces `{port}` in `target.url` and `cold_start.launch` with a free loopback port.
pub fn substitute_port(c: &mut Contract) -> Option<u16> {
    let uses = c
        .target
        .url
        .as_deref()
        .is_some_and(|u| u.contains("{port}"))
        || c.cold_start
            .as_ref()
            .and_then(|cs| cs.launch.as_ref())
            .is_some_and(|l| l.iter().any(|a| a.contains("{port}")));
    if !uses {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let p = port.to_string();
    if let Some(u) = &mut c.target.url {
        *u = u.replace("{port}", &p);
    }
    if let Some(l) = c.cold_start.as_mut().and_then(|cs| cs.launch.as_mut()) {
        for a in l.iter_mut() {
            *a = a.replace("{port}", &p);
        }
    }
    Some(port)
}

/// A server goodput started.
pub struct Launched {
    child: tokio::process::Child,
    pgid: i32,
    /// Stops the server's group if goodput dies; see the module's documentation.
    guard: Option<std::process::Child>,
    grace: Duration,
    logs: [PathBuf; 2],
    /// The tasks copying its stdout and stderr into the logs.
    copying: Vec<tokio::task::JoinHandle<()>>,
    stopped: bool,
}

impl Launched {
    /// Starts `cs.launch`; stdout and stderr go to `server.stdout.log` / `server.stderr.log` in `dir`.
    pub fn spawn(cs: &ColdStart, dir: &std::path::Path) -> Result<Launched, LaunchError> {
        let cmd = cs.launch.as_deref().unwrap_or_default();
        // The contract refuses an empty command; this keeps a bad one from panicking anyway.
        let Some((program, args)) = cmd.split_first() else {
            return Err(LaunchError::Spawn {
                command: String::new(),
                cause: std::io::Error::other("cold_start.launch is empty"),
            });
        };
        let logs = [dir.join("server.stdout.log"), dir.join("server.stderr.log")];
        let log = |p: &Path| {
            std::fs::File::create(p).map_err(|e| LaunchError::Log(crate::text::io_at(p)(e)))
        };
        let (out, err) = (log(&logs[0])?, log(&logs[1])?);
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .envs(&cs.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(w) = &cs.workdir {
            // A missing directory makes the spawn fail as if the program were missing: named
            // here for what it is.
            if !w.is_dir() {
                return Err(LaunchError::Spawn {
                    command: cmd.join(" "),
                    cause: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("cold_start.workdir {} is not a directory", w.display()),
                    ),
                });
            }
            command.current_dir(w);
        }
        let mut child = command.spawn().map_err(|cause| LaunchError::Spawn {
            command: cmd.join(" "),
            cause,
        })?;
        // Through goodput, not straight to the files: a server that prints its token (or
        // echoes its environment) has it redacted like everything else in the bundle.
        let mut copying = Vec::new();
        if let Some(o) = child.stdout.take() {
            copying.push(tokio::spawn(copy_redacted(o, out)));
        }
        if let Some(e) = child.stderr.take() {
            copying.push(tokio::spawn(copy_redacted(e, err)));
        }
        let pgid = child.id().map_or(0, |p| p as i32);
        let grace = Duration::from_secs_f64(cs.stop_grace.seconds());
        Ok(Launched {
            child,
            pgid,
            guard: guard(pgid, grace),
            grace,
            logs,
            copying,
            stopped: false,
        })
    }

    /// Waits (a second at most: a child it left may hold the pipes) until what the exited
    /// server wrote is in its logs, so [`log_tail`](Self::log_tail) shows its last words.
    async fn drain_logs(&mut self) {
        let all = futures_util::future::join_all(self.copying.drain(..));
        let _ = tokio::time::timeout(Duration::from_secs(1), all).await;
    }

    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    /// The last lines of the server's stderr and stdout.
    pub fn log_tail(&self) -> String {
        let mut out = String::new();
        for (name, path) in ["stderr", "stdout"].iter().zip(self.logs.iter().rev()) {
            let text = crate::text::read_tail(path, 64 << 10).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                out.push_str(&format!("--- {name} ({}) ---\n", path.display()));
                out.push_str(&lines[lines.len().saturating_sub(20)..].join("\n"));
                out.push('\n');
            }
        }
        if out.is_empty() {
            "(the server wrote nothing)".into()
        } else {
            out
        }
    }

    fn signal(&self, sig: i32) {
        if self.pgid > 0 {
            // SAFETY: signalling the process group we created for the server.
            unsafe {
                libc::kill(-self.pgid, sig);
            }
        }
    }

    /// The guard is not needed once goodput stops the server itself.
    fn dismiss_guard(&mut self) {
        if let Some(mut g) = self.guard.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
    }

    /// SIGTERM to the process group, SIGKILL after the grace period; how it ended.
    pub async fn stop(mut self) -> String {
        self.stopped = true;
        self.dismiss_guard();
        if let Some(s) = self.exited() {
            self.signal(libc::SIGKILL); // children it may have left behind
            return format!("had already exited: {s}");
        }
        self.signal(libc::SIGTERM);
        match tokio::time::timeout(self.grace, self.child.wait()).await {
            Ok(Ok(s)) => {
                self.signal(libc::SIGKILL);
                format!("stopped by SIGTERM: {s}")
            }
            _ => {
                self.signal(libc::SIGKILL);
                let s = self
                    .child
                    .wait()
                    .await
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                format!("killed after {:?} grace: {s}", self.grace)
            }
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if !self.stopped {
            self.dismiss_guard();
            self.signal(libc::SIGKILL);
        }
    }
}

/// The longest log line kept whole; a longer one is split (never held without bound).
const MAX_LOG_LINE: usize = 64 << 10;

/// Copies a server's output into its log file line by line, redacted.
async fn copy_redacted(from: impl tokio::io::AsyncRead + Unpin, to: std::fs::File) {
    use std::io::Write;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut r = tokio::io::BufReader::new(from);
    let mut to = std::io::LineWriter::new(to);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut r).take(MAX_LOG_LINE as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if to
                    .write_all(crate::secrets::redact(&text).as_bytes())
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Starts the guard of process group `pgid` (see the module's documentation): `sh`, deaf to
/// the terminal's and the supervisor's signals, in its own group, reading a pipe whose writing
/// end only this process holds. `None` (nothing worse than before) if it cannot start.
fn guard(pgid: i32, grace: Duration) -> Option<std::process::Child> {
    if pgid <= 0 {
        return None;
    }
    let ticks = (grace.as_secs_f64() * 10.0).ceil() as u64;
    // dash's `kill` takes a negative number as a process group (and no `--`).
    let script = format!(
        "trap '' INT HUP TERM QUIT; read -r _; kill -TERM -{pgid} 2>/dev/null; i=0; \
         while [ $i -lt {ticks} ] && kill -0 -{pgid} 2>/dev/null; do sleep 0.1; i=$((i+1)); done; \
         kill -KILL -{pgid} 2>/dev/null; exit 0"
    );
    std::process::Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()
}

/// Waits until the target is ready, timing the port opening and readiness from `started`.
/// With a launched server, its early exit ends the wait with its status and log.
pub async fn wait_ready(
    http: &reqwest::Client,
    base: &str,
    cs: &ColdStart,
    mut launched: Option<&mut Launched>,
    started: Instant,
) -> Result<Timeline, LaunchError> {
    let timeout = Duration::from_secs_f64(cs.ready_timeout.seconds());
    let hostport = crate::text::authority(base).to_owned();
    let mut port_open_us = None;
    let mut path = cs.ready_path.clone();
    let us = || started.elapsed().as_micros() as u64;
    loop {
        if let Some(l) = launched.as_deref_mut()
            && let Some(status) = l.exited()
        {
            l.drain_logs().await;
            return Err(LaunchError::Exited {
                status,
                tail: l.log_tail(),
            });
        }
        if started.elapsed() > timeout {
            let tail = launched
                .as_deref()
                .map_or_else(|| "(not launched by goodput)".into(), Launched::log_tail);
            return Err(LaunchError::NotReady {
                url: format!("{base}{path}"),
                timeout,
                tail,
            });
        }
        if port_open_us.is_none() && tokio::net::TcpStream::connect(&hostport).await.is_ok() {
            port_open_us = Some(us());
        }
        if port_open_us.is_some() {
            let r = http
                .get(format!("{base}{path}"))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            match r {
                Ok(r) if r.status().is_success() => {
                    return Ok(Timeline {
                        command: cs.launch.clone(),
                        port_open_us,
                        ready_us: us(),
                        ready_endpoint: path,
                        exit: None,
                    });
                }
                Ok(r) if r.status().as_u16() == 404 && path != "/v1/models" => {
                    path = "/v1/models".into()
                }
                _ => {}
            }
        }
        // Polling is the only way to see a port open; 10 ms keeps the timing error small.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a launched engine's log (`server.stdout.log`, `server.stderr.log` in `dir`) states of
/// its KV cache, as (fact, value) pairs: vLLM's "… KV cache size: N tokens" and "Maximum
/// concurrency for N tokens per request: Nx", llama.cpp's "llama_kv_cache…: size = … MiB (N
/// cells", SGLang's "KV Cache is allocated. #tokens: N, K size: …, V size: …" and TGI's
/// "Setting max batch total tokens to N". Hand-matched: each is one fixed phrase in a log
/// line, and a regex engine would be a dependency for four `find`s. Empty when the engine
/// states none (the log is read a line at a time, never whole).
pub fn stated_memory(dir: &Path) -> Vec<(String, String)> {
    use std::io::BufRead;
    let mut out: Vec<(String, String)> = Vec::new();
    for name in ["server.stderr.log", "server.stdout.log"] {
        let Ok(f) = std::fs::File::open(dir.join(name)) else {
            continue;
        };
        for line in std::io::BufReader::new(f)
            .split(b'\n')
            .map_while(Result::ok)
        {
            let line = String::from_utf8_lossy(&line);
            for (k, v) in memory_facts(&line) {
                if !out.iter().any(|(have, _)| have == k) {
                    out.push((k.to_owned(), v));
                }
            }
        }
    }
    out
}

/// One log line's statements of the KV cache (vLLM states two in one line).
fn memory_facts(line: &str) -> Vec<(&'static str, String)> {
    let after = |phrase: &str| line.find(phrase).map(|i| line[i + phrase.len()..].trim());
    let mut out = Vec::new();
    if let Some(i) = line.find(" KV cache size: ") {
        // vLLM: "GPU KV cache size: 110,733 tokens" (CPU, XPU … on other devices).
        let device = line[..i].rsplit(' ').next().unwrap_or_default();
        if let Some(tokens) = line[i + 16..].split(" tokens").next() {
            out.push(("kv_cache", format!("{} tokens ({device})", tokens.trim())));
        }
    }
    if let Some((per, x)) =
        after("Maximum concurrency for ").and_then(|r| r.split_once(" tokens per request: "))
    {
        // vLLM: "Maximum concurrency for 2,048 tokens per request: 54.07x".
        out.push(("kv_concurrency", format!("{} at {per} tokens", x.trim())));
    }
    if line.contains("llama_kv_cache")
        && let Some((size, rest)) = after(": size = ").and_then(|r| r.split_once('('))
    {
        // llama.cpp: "llama_kv_cache: size =  144.00 MiB (  4096 cells,  18 layers, …".
        let cells = rest.split(',').next().unwrap_or_default().trim();
        out.push(("kv_cache", format!("{} ({cells})", size.trim())));
    }
    if let Some(rest) = after("KV Cache is allocated. #tokens: ") {
        // SGLang: "KV Cache is allocated. #tokens: 1234, K size: 1.00 GB, V size: 1.00 GB".
        let (tokens, sizes) = rest.split_once(',').unwrap_or((rest, ""));
        let sizes = if sizes.is_empty() {
            String::new()
        } else {
            format!(";{sizes}")
        };
        out.push(("kv_cache", format!("{tokens} tokens{sizes}")));
    }
    if let Some(n) =
        after("Setting max batch total tokens to ").and_then(|r| r.split_whitespace().next())
    {
        // TGI: the tokens its KV cache holds across the batch.
        out.push(("kv_cache", format!("{n} tokens (max batch total)")));
    }
    out
}

#[cfg(test)]
mod memory_tests {
    use super::memory_facts;

    fn facts(line: &str) -> Vec<(&'static str, String)> {
        memory_facts(line)
    }

    #[test]
    fn each_engine_s_statement_of_its_kv_cache_is_read() {
        let vllm = "(EngineCore pid=26637) INFO 12-07 10:16:50 [kv_cache_utils.py:2327] CPU KV cache size: 110,733 tokens, Maximum concurrency for 2,048 tokens per request: 54.07x";
        assert_eq!(
            facts(vllm),
            vec![
                ("kv_cache", "110,733 tokens (CPU)".to_owned()),
                ("kv_concurrency", "54.07x at 2,048 tokens".to_owned())
            ]
        );
        let llama = "llama_kv_cache: size =  144.00 MiB (  4096 cells,  18 layers,  2/2 seqs), K (f16):   72.00 MiB";
        assert_eq!(
            facts(llama),
            vec![("kv_cache", "144.00 MiB (4096 cells)".to_owned())]
        );
        let sglang =
            "[2026-01-01] KV Cache is allocated. #tokens: 90000, K size: 1.03 GB, V size: 1.03 GB";
        assert_eq!(
            facts(sglang),
            vec![(
                "kv_cache",
                "90000 tokens; K size: 1.03 GB, V size: 1.03 GB".to_owned()
            )]
        );
        let tgi = "2026-01-01T00:00:00Z  INFO text_generation_launcher: Setting max batch total tokens to 16000";
        assert_eq!(
            facts(tgi),
            vec![("kv_cache", "16000 tokens (max batch total)".to_owned())]
        );
        assert!(facts("llama_kv_cache_iswa: using full-size SWA cache").is_empty());
        assert!(facts("INFO: listening").is_empty());
    }

    #[test]
    fn a_log_is_read_a_line_at_a_time_and_the_first_statement_kept() {
        let dir = std::env::temp_dir().join(format!("goodput-mem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("server.stderr.log"),
            "INFO start\nINFO GPU KV cache size: 5,000 tokens\nINFO GPU KV cache size: 9 tokens\n",
        )
        .unwrap();
        let got = super::stated_memory(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got,
            vec![("kv_cache".to_owned(), "5,000 tokens (GPU)".to_owned())]
        );
        assert!(super::stated_memory(std::path::Path::new("/nonexistent")).is_empty());
    }
}
