//! Helpers shared by the integration tests: a simulator on an ephemeral loopback port and a
//! plain HTTP client that timestamps every SSE event (independent of goodput's own client).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use goodput::contract::{self, Contract};
use goodput::run::{RunOptions, RunResult};
use goodput::sim::{SimConfig, SimServer};
use tokio_util::sync::CancellationToken;

/// Parses contract text (panics on a test's own mistake).
pub fn parse(src: &str) -> Contract {
    contract::parse(src, std::path::Path::new("test.toml")).unwrap()
}

/// Runs a contract with its bundle under `dir`, quietly, after reading the files it names
/// (paths in it relative to the working directory, as `parse` leaves them, or absolute).
pub async fn try_run_in(c: Contract, dir: &std::path::Path) -> anyhow::Result<RunResult> {
    try_run_watched(c, dir, std::sync::Arc::new(goodput::run::Silent)).await
}

/// [`try_run_in`], told of the run's progress and warnings by `watch`.
pub async fn try_run_watched(
    mut c: Contract,
    dir: &std::path::Path,
    watch: std::sync::Arc<dyn goodput::run::Watch>,
) -> anyhow::Result<RunResult> {
    let src = c.to_toml();
    let inputs = goodput::workload::inputs::read(&mut c, &src, std::path::Path::new("test.toml"))?;
    let opts = RunOptions {
        out_root: dir.to_owned(),
        watch,
        argv: vec!["test".into()],
        overrides: Vec::new(),
        bundle_dir: None,
        wake_latency_hold: true,
        signal: Default::default(),
        live: None,
        simulator: None,
    };
    goodput::run::run(c, inputs, opts, CancellationToken::new()).await
}

/// Runs a contract that must succeed.
pub async fn run_in(c: Contract, dir: &std::path::Path) -> RunResult {
    try_run_in(c, dir).await.expect("run succeeds")
}

/// The simulator's ground truth, by the client's request id.
pub fn truth_by_id(
    sim: &SimServer,
) -> std::collections::HashMap<String, goodput::sim::GroundTruth> {
    sim.ground_truth()
        .into_iter()
        .filter_map(|g| Some((g.request_id.clone()?, g)))
        .collect()
}

pub async fn sim(cfg: SimConfig) -> SimServer {
    SimServer::start(cfg, ([127, 0, 0, 1], 0).into(), None)
        .await
        .expect("simulator starts")
}

/// A prompt of `n` simulator tokens, unique from its first word.
pub fn prompt(tag: &str, n: usize) -> String {
    let mut s = format!("u{tag}");
    for i in 1..n {
        s.push(' ');
        s.push_str(goodput::text::WORDS[i % goodput::text::WORDS.len()]);
    }
    s
}

/// What a plain client saw of one response.
#[derive(Debug, Default)]
pub struct Seen {
    pub status: u16,
    pub headers_after: Duration,
    /// (time since send, event data) for every SSE event, in order.
    pub events: Vec<(Duration, String)>,
    /// The body ended with an error (connection dropped).
    pub broken: bool,
    pub body: String,
}

impl Seen {
    /// Parsed JSON events (skipping `[DONE]`); `None` for events that are not JSON.
    pub fn json(&self) -> Vec<Option<serde_json::Value>> {
        self.events
            .iter()
            .filter(|(_, d)| d != "[DONE]")
            .map(|(_, d)| serde_json::from_str(d).ok())
            .collect()
    }

    /// Arrival times of events that carry generated text, with the text.
    pub fn token_events(&self) -> Vec<(Duration, String)> {
        self.events
            .iter()
            .filter_map(|(t, d)| {
                let v: serde_json::Value = serde_json::from_str(d).ok()?;
                let c = &v["choices"][0];
                let text = c["delta"]["content"].as_str().or(c["text"].as_str())?;
                (!text.is_empty()).then(|| (*t, text.to_owned()))
            })
            .collect()
    }
}

/// POSTs JSON and reads the whole response, timestamping each SSE event as it arrives.
pub async fn post(http: &reqwest::Client, url: &str, body: serde_json::Value) -> Seen {
    let t0 = Instant::now();
    let resp = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let mut seen = Seen {
        status: resp.status().as_u16(),
        headers_after: t0.elapsed(),
        ..Seen::default()
    };
    let mut buf = String::new();
    let mut stream = resp.bytes_stream();
    while let Some(part) = stream.next().await {
        let at = t0.elapsed();
        match part {
            Ok(b) => {
                let s = String::from_utf8_lossy(&b);
                seen.body.push_str(&s);
                buf.push_str(&s);
                while let Some(i) = buf.find("\n\n") {
                    let ev: String = buf.drain(..i + 2).collect();
                    if let Some(data) = ev.trim_end().strip_prefix("data: ") {
                        seen.events.push((at, data.to_owned()));
                    }
                }
            }
            Err(_) => {
                seen.broken = true;
                break;
            }
        }
    }
    seen
}

pub fn http() -> reqwest::Client {
    goodput::client::install_tls_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    goodput::analyze::percentile_sorted(&v, 50.0).expect("non-empty")
}

/// Files every run's bundle holds, whatever its contract.
pub const BUNDLE_FILES: [&str; 7] = [
    "contract.toml",
    "command.json",
    "environment.json",
    "requests.jsonl",
    "summary.json",
    "report.md",
    "timeseries.json",
];

/// Asserts the bundle holds every standard file and each of `extra`.
pub fn assert_bundle_complete(bundle: &goodput::bundle::Bundle, extra: &[&str]) {
    for f in BUNDLE_FILES.iter().chain(extra) {
        assert!(
            bundle.path(f).is_file(),
            "{f} missing from {}",
            bundle.dir.display()
        );
    }
}

/// A stand-in OpenAI-compatible server on an ephemeral loopback port: `chat` answers
/// `POST /v1/chat/completions`, `/v1/models` lists `model`, every other path is 404.
pub async fn mock_openai(
    chat: axum::routing::MethodRouter,
    model: &'static str,
) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new()
        .route("/v1/chat/completions", chat)
        .route(
            "/v1/models",
            axum::routing::get(move || async move {
                axum::Json(serde_json::json!({"data": [{"id": model}]}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (
        url,
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
    )
}

/// A terminal report with its wrapped lines joined again (continuations start with two
/// spaces), so a test can look for a phrase wherever the 100-column wrap broke it.
pub fn unwrapped(text: &str) -> String {
    text.replace("\n  ", " ")
}

/// Reads one HTTP/1.1 request from a raw socket: its method, path, and the request as received
/// (head and body, by content-length). For the tests' own misbehaving servers.
pub async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(String, String, String)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() - end < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let mut parts = head.split_whitespace();
    Some((
        parts.next()?.to_owned(),
        parts.next()?.to_owned(),
        String::from_utf8_lossy(&buf).into_owned(),
    ))
}

/// Quiet sweep options with bundles under `dir`.
pub fn sweep_options(dir: &std::path::Path) -> goodput::sweep::SweepOptions {
    goodput::sweep::SweepOptions {
        wake_latency_hold: true,
        signal: Default::default(),
        out_root: dir.to_owned(),
        watch: std::sync::Arc::new(goodput::run::Silent),
        argv: vec![],
        cancel: CancellationToken::new(),
    }
}

/// The tolerance of every test that holds the client's clock against the simulator's:
/// |client − server| over a run's requests, median and p99, milliseconds. The client's own
/// overhead on loopback is 0.3–0.6 ms at the median in the debug build on an idle machine; the
/// margin is for a loaded 2-core CI machine, where one full-suite run measured a 1.0 ms median.
pub const TIMING_P50_MS: f64 = 2.0;
pub const TIMING_P99_MS: f64 = 10.0;

/// Asserts that `errors` (ms) are within [`TIMING_P50_MS`] at the median and
/// [`TIMING_P99_MS`] at p99, printing both; `what` names the case and the metric.
pub fn assert_timing_within(what: &str, mut errors: Vec<f64>) {
    assert!(!errors.is_empty(), "{what}: nothing measured");
    errors.sort_by(f64::total_cmp);
    let p50 = goodput::analyze::percentile_sorted(&errors, 50.0).unwrap();
    let p99 = goodput::analyze::percentile_sorted(&errors, 99.0).unwrap();
    eprintln!("{what}: median |error| {p50:.3} ms, p99 {p99:.3} ms");
    // The tail alone over its bound, on a machine that itself wakes sleeping threads over 1 ms
    // late at p99 (its slow spells: 2026-12-03, p99 errors of 10-21 ms with medians of 1 ms,
    // on a build that measured 3 ms p99 the hour before), measures the machine; the median
    // still holds the client.
    if p50 <= TIMING_P50_MS && p99 > TIMING_P99_MS {
        let host = host_wake_late_p99_ms();
        eprintln!("{what}: this machine alone wakes a sleeping thread {host:.2} ms late at p99");
        if host > 1.0 {
            return;
        }
    }
    assert!(
        p50 <= TIMING_P50_MS && p99 <= TIMING_P99_MS,
        "{what}: median |error| {p50:.3} ms, p99 {p99:.3} ms (tolerance {TIMING_P50_MS} / {TIMING_P99_MS} ms)"
    );
}

/// The records goodput's client would have written for a run on the simulator's
/// discrete-event clock (latency from the intended send, which is the DES's arrival), labelled
/// warm-up, steady and drain (and a load program's stages) by the contract's rules, each request carrying its class, model
/// and priority as the driver sends them. `drain` more arrivals keep the load on while the
/// steady requests finish, as the real driver does.
pub fn des_records(c: &Contract, drain: usize) -> Vec<goodput::record::Record> {
    let plan = goodput::plan::Plan::new(c, &Default::default());
    let mut phaser = goodput::plan::Phaser::new(plan.rules());
    let mut arrivals = plan.arrivals().unwrap();
    let (mut planned, mut drained) = (Vec::new(), 0);
    for i in 0u64.. {
        let at = arrivals.next_scheduled().unwrap();
        let phase = phaser.next_scheduled(at, false);
        drained += usize::from(phase == goodput::plan::Phase::Drain);
        if drained > drain {
            break;
        }
        let mut p = plan.request(i);
        p.phase = phase;
        p.intended_us = Some(at.at_us);
        p.stage = at.stage.and_then(|k| plan.stage_name(k));
        planned.push(p);
    }
    let reqs = planned
        .iter()
        .map(|p| goodput::sim::des::DesRequest {
            arrival_s: p.intended_us.unwrap() as f64 / 1e6,
            prompt: p.prompt.clone(),
            ask: goodput::sim::model::LengthAsk {
                max_tokens: Some(p.output_tokens),
                min_tokens: Some(p.output_tokens),
                ignore_eos: true,
            },
            priority: plan
                .extra_body(p)
                .get("priority")
                .and_then(|v| v.as_i64())
                .unwrap_or(0),
            model: p.model.clone(),
        })
        .collect();
    let gt = goodput::sim::des::run(
        c.target.simulator.as_ref().unwrap(),
        goodput::sim::des::DesLoad::Open(reqs),
    );
    planned
        .iter()
        .zip(gt)
        .map(|(p, g)| {
            let mut r = goodput::record::Record::planned(p, p.phase, "des");
            r.dispatched_us = r.intended_us;
            r.sent_us = r.intended_us;
            r.first_token_us = g.first_token_us;
            r.end_us = Some(g.end_us);
            r.chunks = g.chunks.iter().copied().collect();
            r.client_output_tokens = g.output_tokens;
            r.usage_prompt_tokens = Some(g.prompt_tokens);
            r.usage_completion_tokens = Some(g.output_tokens);
            r.usage_cached_tokens = Some(g.cached_tokens);
            if g.outcome != goodput::sim::SimOutcome::Ok {
                r.outcome = goodput::record::Outcome::HttpStatus;
            }
            r
        })
        .collect()
}

/// A capacity search's point at `rate` (req/s, as its value was written: 4 decimals).
pub fn point_at(r: &goodput::sweep::SweepResult, rate: f64) -> &goodput::sweep::SweepPoint {
    r.points
        .iter()
        .find(|p| {
            p.value
                .parse::<f64>()
                .is_ok_and(|v| (v - rate).abs() < 1e-3)
        })
        .unwrap_or_else(|| panic!("no point at {rate} req/s"))
}

/// A capacity search that stopped where the server met the SLO but the client fell behind its
/// schedule: checks that its report says so and that the machine kept the client behind
/// ([`the_machine_kept_the_client_behind`]; a client too slow for these rates on a machine
/// that wakes it on time fails the test). True when it stopped so: the caller's comparison
/// with the simulator has nothing to compare.
pub fn stopped_by_the_machine(
    parent: &goodput::bundle::Bundle,
    r: &goodput::sweep::SweepResult,
) -> bool {
    let Some(at) = r.capacity.as_ref().and_then(|c| c.stopped_by_client_at) else {
        return false;
    };
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(
        md.contains(&format!("The search stopped at {at:.2} req/s")),
        "{md}"
    );
    assert!(
        the_machine_kept_the_client_behind(&point_at(r, at).bundle),
        "the client fell behind at {at:.2} req/s on a machine that woke it on time: {md}"
    );
    eprintln!("the search stopped at {at:.2} req/s, where this machine kept the client behind");
    true
}

/// Whether the machine, not the client, kept a run goodput called INVALID for falling behind
/// its schedule (the bundle at `dir`). The CI host has slow spells (2026-12-03: for hours,
/// sleeping threads woke 2-3 ms late at p99 against 0.06 ms at its usual speed); goodput saying
/// INVALID then, and why, is the right answer, and a test of the schedule checks that instead.
/// Two witnesses, either enough:
/// - the run's own: its dispatch thread ran at real-time priority (so the client's work could
///   not delay it), woke over 1 ms late at p99, and that is at least half the dispatch lag;
/// - the machine alone, probed right after ([`host_wake_late_p99_ms`]), over 1 ms late at p99
///   (the probe can miss a spell that ended; the run's witness cannot);
/// - the run's own again: at an offered rate of 10 req/s or less (a thousandth of the client's
///   ceiling, docs/guide/performance.md), requests waited over 1 ms at p99 for the client's
///   runtime: its own work cannot queue them there, so other processes held the CPUs (seen in
///   CI: 5.7 ms at 0.5 req/s with two llama.cpp servers, vLLM loading and Chromium beside it).
///
/// Prints the figures it judged by.
pub fn the_machine_kept_the_client_behind(dir: &std::path::Path) -> bool {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let Ok(s) = serde_json::from_str::<goodput::analyze::Summary>(&read("summary.json")) else {
        return false;
    };
    if !s.validity.client_behind {
        return false;
    }
    let env: serde_json::Value =
        serde_json::from_str(&read("environment.json")).unwrap_or_default();
    let realtime = env["client_wake_latency"]["dispatch_thread"]["policy"] == "SCHED_FIFO";
    let p99 = |d: &Option<goodput::analyze::Dist>| d.as_ref().map_or(0.0, |d| d.p99);
    let (lag, wake) = (
        p99(&s.steady.stats.dispatch_lag_ms),
        p99(&s.steady.stats.dispatch_wake_ms),
    );
    eprintln!(
        "{}: INVALID, the client behind: dispatch lag p99 {lag:.2} ms, of which the dispatch \
         thread ({}) woke late {wake:.2} ms",
        dir.display(),
        if realtime {
            "real-time"
        } else {
            "normal priority"
        }
    );
    if realtime && woke_late(lag, wake) {
        return true;
    }
    let offered = s.steady.throughput.offered_rps.unwrap_or(f64::INFINITY);
    if offered <= 10.0 && lag - wake > 1.0 {
        eprintln!(
            "at {offered:.2} req/s offered, requests waited {:.2} ms at p99 for the client's runtime: the machine's CPUs were taken",
            lag - wake
        );
        return true;
    }
    let host = host_wake_late_p99_ms();
    eprintln!("this machine alone wakes a sleeping thread {host:.2} ms late at p99");
    host > 1.0
}

/// Whether a client behind its schedule was behind because its dispatch thread woke late: over
/// 1 ms at p99 and at least half the dispatch lag (`lag`, `wake`: p99s in ms). The thread holds
/// its CPUs quick to wake and asks for real-time priority, so the machine's CPUs were taken.
pub fn woke_late(lag: f64, wake: f64) -> bool {
    wake > 1.0 && wake >= 0.5 * lag
}

/// How late this machine wakes a thread that sleeps 1 ms, at p99 (ms), over 2,000 sleeps (about
/// 2 s), with idle CPUs held quick to wake as goodput holds them during a run
/// (`/dev/cpu_dma_latency` at 0 µs, where the test may open it). Nothing of goodput runs. On
/// this VM at its usual speed: 0.06 ms; in its slow spells, 2–3 ms.
pub fn host_wake_late_p99_ms() -> f64 {
    use std::io::Write;
    let _hold = std::fs::File::options()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .and_then(|mut f| f.write_all(&0i32.to_ne_bytes()).map(|_| f));
    let mut late: Vec<f64> = (0..2000)
        .map(|_| {
            let t = std::time::Instant::now();
            std::thread::sleep(std::time::Duration::from_millis(1));
            t.elapsed().as_secs_f64() * 1e3 - 1.0
        })
        .collect();
    late.sort_by(f64::total_cmp);
    late[1980]
}

/// The most memory (peak resident set) a goodput process may take on any hostile input
/// (issue #46): the inputs a user or a server controls are bounded, never the machine.
pub const HOSTILE_RSS_BYTES: u64 = 256 << 20;

/// Runs `cmd` to its end like [`std::process::Command::output`], and returns also its peak
/// resident set in bytes, and that of every process it waited for (`wait4`'s `ru_maxrss`).
// The child is reaped by `wait4` (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
pub fn output_and_peak_rss(cmd: &mut std::process::Command) -> (std::process::Output, u64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        err.read_to_end(&mut e).unwrap();
        e
    });
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout).unwrap();
    let stderr = reader.join().unwrap();
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let (mut status, mut usage) = (0i32, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, which `child` no longer waits for (never `wait`ed).
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (output, usage.ru_maxrss as u64 * 1024)
}

/// [`output_and_peak_rss`], asserting the peak is within [`HOSTILE_RSS_BYTES`].
pub fn output_within_memory(cmd: &mut std::process::Command) -> std::process::Output {
    let (out, peak) = output_and_peak_rss(cmd);
    eprintln!("{cmd:?}: peak resident set {} MiB", peak >> 20);
    assert!(
        peak <= HOSTILE_RSS_BYTES,
        "{cmd:?} peaked at {} MiB resident (at most {} MiB): {}",
        peak >> 20,
        HOSTILE_RSS_BYTES >> 20,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// This test process's own peak resident set is within [`HOSTILE_RSS_BYTES`] (a run made in
/// the test's process; nextest runs each test in a process of its own).
pub fn assert_own_memory_within_bound() {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
    // SAFETY: getrusage fills the struct it is given.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    let peak = usage.ru_maxrss as u64 * 1024;
    assert!(
        peak <= HOSTILE_RSS_BYTES,
        "this test's process peaked at {} MiB resident (at most {} MiB)",
        peak >> 20,
        HOSTILE_RSS_BYTES >> 20
    );
}

/// The capacity search on the simulator's discrete-event clock, judged by the rule the client's
/// search applies (`passes_capacity`), from `start` req/s, once per arrival draw
/// (`workload.seed` = each of `seeds`): each draw's capacity, sorted.
pub async fn des_capacities(src: &str, start: f64, seeds: std::ops::Range<u64>) -> Vec<f64> {
    let mut each = Vec::new();
    for seed in seeds {
        let src = goodput::sweep::set_key(src, "workload.seed", &seed.to_string()).unwrap();
        let truth = goodput::sweep::search_capacity(start, 0.02, 16, |rate| {
            let text = goodput::sweep::set_key(&src, "load.rate", &format!("{rate:.4}")).unwrap();
            async move {
                let c = goodput::contract::parse(&text, std::path::Path::new("cap.toml")).unwrap();
                let s = goodput::analyze::summarize(&c, &des_records(&c, 40), &Default::default());
                Ok(Some(goodput::sweep::PointOutcome::passed(
                    goodput::sweep::passes_capacity(&s),
                )))
            }
        })
        .await
        .unwrap();
        each.push(truth.capacity_rps.unwrap());
    }
    each.sort_by(f64::total_cmp);
    each
}
