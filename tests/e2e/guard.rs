//! Safe to point at a shared server (issue #69): a run the server cannot keep up with stops
//! within seconds of the progress guard's bound, for every load model, keeps every record,
//! says which rule fired and leaves the server idle; a signal mid-overload leaves it idle too;
//! a healthy slow server is never stopped; the drain sends a bounded number beyond the plan;
//! `init` sizes its contract to the server it probes; bad guard settings are refused by name.
//!
//! The server is the simulator on a loopback port, so what it received and whether it is idle
//! are its ground truth and its own `/metrics`, not the client's word.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use goodput::driver::guard::{GuardRule, ServerIdle};
use goodput::plan::Phase;
use goodput::sim::{SimConfig, SimServer};

/// The server: one request at a time, 200 ms a token.
fn one_at_a_time() -> SimConfig {
    SimConfig {
        max_batch: 1,
        decode_base_ms: 200.0,
        ..SimConfig::default()
    }
}

/// The template (`goodput init`'s, unsized: 20 req/s, 150 + 600 requests) pointed at `sim`,
/// with `extra` edits (`KEY=VALUE`, as `--set` takes them).
fn template_at(sim: &SimServer, extra: &[&str]) -> goodput::contract::Contract {
    let mut edits = vec![
        goodput::contract::edit::Edit::parse_set(&format!("target.url={}", sim.base_url()))
            .unwrap(),
    ];
    edits.extend(
        extra
            .iter()
            .map(|e| goodput::contract::edit::Edit::parse_set(e).unwrap()),
    );
    let text = goodput::contract::edit::apply(goodput::contract::BUILTIN, &edits).unwrap();
    common::parse(&text)
}

/// Running and waiting requests by the simulator's own `/metrics`.
fn busy(sim: &SimServer) -> (f64, f64) {
    let text = sim.metrics_text();
    let read = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (
        read("vllm:num_requests_running"),
        read("vllm:num_requests_waiting"),
    )
}

/// Polls the simulator's metrics (every 50 ms, up to `within`) until nothing runs or waits.
async fn idle_within(sim: &SimServer, within: Duration) -> Result<Duration, (f64, f64)> {
    let from = Instant::now();
    loop {
        let (running, waiting) = busy(sim);
        if running == 0.0 && waiting == 0.0 {
            return Ok(from.elapsed());
        }
        if from.elapsed() > within {
            return Err((running, waiting));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every request the simulator received from this bundle's run has its record there.
fn nothing_lost(sim: &SimServer, r: &goodput::run::RunResult) {
    let run_id = r
        .bundle
        .dir
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let ids: std::collections::HashSet<&str> =
        r.records.iter().map(|x| x.request_id.as_str()).collect();
    let seen: Vec<String> = sim
        .ground_truth()
        .into_iter()
        .filter_map(|g| g.request_id)
        .filter(|id| id.starts_with(&run_id))
        .collect();
    assert!(!seen.is_empty(), "the simulator saw nothing of {run_id}");
    let lost: Vec<&String> = seen
        .iter()
        .filter(|id| !ids.contains(id.as_str()))
        .collect();
    assert!(lost.is_empty(), "received without a record: {lost:?}");
}

/// What every overloaded run must show: stopped by the guard within `within` of its start
/// (`elapsed`), by `rule`, on a bound it states; INVALID saying so; nothing beyond the plan;
/// every request the server saw recorded; the server idle within a few seconds.
async fn stopped_and_left_idle(
    sim: &SimServer,
    r: &goodput::run::RunResult,
    elapsed: Duration,
    rule: GuardRule,
) {
    let end = r.summary.load_end.as_ref().expect("a load end");
    let g = end.guard.as_ref().expect("the guard stopped the load");
    assert_eq!(g.rule, rule, "{g:?}");
    // Within 10 s of the guard's bound (the load began after the probes and priming).
    assert!(g.at_s <= g.bound_s + 10.0, "{g:?}");
    assert!(
        elapsed.as_secs_f64() <= g.bound_s + 20.0,
        "{elapsed:?} {g:?}"
    );
    assert!(g.why().contains(&g.bound_from), "{}", g.why());
    let v = &r.summary.validity;
    assert!(
        v.reasons.iter().any(|x| x.contains("progress guard")),
        "{:?}",
        v.reasons
    );
    assert_eq!(
        v.verdict,
        goodput::analyze::ValidityVerdict::Invalid,
        "{v:?}"
    );
    // Nothing beyond the plan: the guard fired long before any drain.
    let beyond = r.records.iter().filter(|x| x.phase == Phase::Drain).count();
    assert_eq!(beyond, 0);
    nothing_lost(sim, r);
    // Every request cut off is a miss that says why, and counted.
    let cut = r
        .records
        .iter()
        .filter(|x| x.outcome == goodput::record::Outcome::Abandoned)
        .count() as u64;
    assert!(cut > 0 && cut == end.cancelled_in_flight, "{cut} {end:?}");
    assert!(
        r.records
            .iter()
            .filter(|x| x.outcome == goodput::record::Outcome::Abandoned)
            .all(|x| x
                .error
                .as_deref()
                .is_some_and(|e| e.contains("progress guard"))),
    );
    match &end.server_idle {
        Some(ServerIdle::After { s, .. }) => assert!(*s < 5.0, "{end:?}"),
        other => panic!("the server did not read idle: {other:?}"),
    }
    // And by the server's own figures, now.
    idle_within(sim, Duration::from_secs(5))
        .await
        .unwrap_or_else(|b| panic!("still busy (running, waiting) = {b:?}"));
    // The report says which rule fired and what was not sent.
    let report = std::fs::read_to_string(r.bundle.dir.join("report.md")).unwrap();
    assert!(report.contains("Stopped by the progress guard"), "{report}");
    assert!(
        report.contains("Not sent (the progress guard stopped the load first)"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_against_a_server_far_too_slow_stops_in_seconds_and_leaves_it_idle() {
    let sim = common::sim(one_at_a_time()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = template_at(&sim, &[]);
    let from = Instant::now();
    let r = common::run_in(c, dir.path()).await;
    stopped_and_left_idle(&sim, &r, from.elapsed(), GuardRule::Behind).await;
    // The numbers: the template's 500 ms TTFT SLO makes 5 s, under the 10 s floor.
    let g = r.summary.load_end.as_ref().unwrap().guard.clone().unwrap();
    assert_eq!(g.bound_s, 10.0, "{g:?}");
    assert!(g.waiting > 100 && g.served_at_once == 1, "{g:?}");
    // No quality probes to a server found behind; they are counted as not sent.
    assert!(r.records.iter().all(|x| x.phase != Phase::Quality));
    let command: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.dir.join("command.json")).unwrap())
            .unwrap();
    assert_eq!(command["load_end"]["guard"]["rule"], "behind", "{command}");
    assert_eq!(command["interrupted"], false);
    // The bundle alone recomputes the same verdict.
    let loaded = goodput::bundle::Bundle::load(&r.bundle.dir).unwrap();
    assert_eq!(loaded.summary.load_end, r.summary.load_end);
    assert_eq!(loaded.summary.validity.verdict, r.summary.validity.verdict);
}

/// A contract of `load` (and `workload` beside the lengths) at `url`, its SLO the template's.
fn shaped(url: &str, workload: &str, load: &str) -> String {
    format!(
        "name = \"shaped\"\n[target]\nurl = \"{url}\"\n[workload]\ninput_tokens = {{ dist = \"fixed\", value = 64 }}\noutput_tokens = {{ dist = \"fixed\", value = 48 }}\n{workload}[load]\n{load}[warmup]\nrequests = 5\n[slo]\nttft_ms = 500\ntpot_ms = 50\n[quality]\nmode = \"consistency\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_tasks_load_programs_and_closed_loops_are_stopped_alike() {
    let task = "[workload.task]\ncontext_tokens = 4096\n\
        [[workload.task.node]]\nname = \"plan\"\n\
        [[workload.task.node]]\nname = \"look\"\nkind = \"tool\"\nafter = [\"plan\"]\nlatency_ms = 50\nresult_tokens = 20\n\
        [[workload.task.node]]\nname = \"answer\"\nafter = [\"look\"]\ncontext = \"plan\"\n";
    let cases: [(&str, &str, &str); 4] = [
        (
            "sessions",
            "[workload.sessions]\nturns = { dist = \"fixed\", value = 4 }\nthink_ms = { dist = \"fixed\", value = 100 }\n",
            "rate = 20\nrequests = 200\n",
        ),
        ("task", task, "rate = 20\nrequests = 200\n"),
        (
            "program",
            "",
            "[[load.stage]]\nshape = \"ramp\"\nfrom = 5\nrate = 20\nduration = \"10s\"\n[[load.stage]]\nshape = \"hold\"\nrate = 20\nduration = \"30s\"\n",
        ),
        (
            "closed",
            "",
            "kind = \"closed\"\nconcurrency = 8\nrequests = 100\n",
        ),
    ];
    for (name, workload, load) in cases {
        // A server of its own each: what one left behind cannot hide in the next.
        let sim = common::sim(one_at_a_time()).await;
        let dir = tempfile::tempdir().unwrap();
        let c = common::parse(&shaped(&sim.base_url(), workload, load));
        let from = Instant::now();
        let r = common::try_run_in(c, dir.path())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        eprintln!("{name}: {:?}", r.summary.load_end);
        stopped_and_left_idle(&sim, &r, from.elapsed(), GuardRule::Behind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_overload_cancels_what_is_in_flight_and_leaves_the_server_idle() {
    let sim = common::sim(one_at_a_time()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, template_at_text(&sim)).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", path.to_str().unwrap(), "--quiet", "--out"])
        .arg(dir.path().join("runs"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    // Mid-overload: the server holds a queue (before the guard's 10 s would end it).
    let from = Instant::now();
    while busy(&sim).1 < 30.0 {
        assert!(from.elapsed() < Duration::from_secs(30), "no queue formed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    idle_within(&sim, Duration::from_secs(5))
        .await
        .unwrap_or_else(|b| panic!("still busy (running, waiting) = {b:?}"));
    let b = std::fs::read_dir(dir.path().join("runs/chat-poisson"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let command: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("command.json")).unwrap()).unwrap();
    let end = &command["load_end"];
    assert!(
        end["cancelled_in_flight"].as_u64().unwrap() >= 30,
        "{command}"
    );
    assert_eq!(end["server_idle"]["state"], "after", "{command}");
    assert!(end.get("guard").is_none(), "{command}");
    let report = std::fs::read_to_string(b.join("report.md")).unwrap();
    assert!(
        report.contains("requests in flight when the load stopped were cancelled"),
        "{report}"
    );
}

fn template_at_text(sim: &SimServer) -> String {
    goodput::contract::edit::apply(
        goodput::contract::BUILTIN,
        &[
            goodput::contract::edit::Edit::parse_set(&format!("target.url={}", sim.base_url()))
                .unwrap(),
        ],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_slow_server_is_never_stopped() {
    // Every answer's head comes 5 s after its request (so nothing at all arrives for 5 s),
    // then 600 tokens stream for about 2 s more: at 1 req/s, about 7 in flight.
    let sim = common::sim(SimConfig {
        faults: goodput::sim::Faults {
            slow_headers_rate: 1.0,
            slow_headers_ms: 5000.0,
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let c = common::parse(&format!(
        "name = \"slow\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 600 }}\n[load]\nrate = 1\nrequests = 16\n[warmup]\nrequests = 2\n[slo]\nttft_ms = 6000\npercentile = 90\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
        sim.base_url()
    ));
    let r = common::run_in(c, dir.path()).await;
    assert_eq!(r.summary.load_end, None, "{:?}", r.summary.load_end);
    let st = &r.summary.steady.stats;
    assert_eq!((st.ok, st.failed), (16, 0), "{st:?}");
    let ttft = st.ttft_ms.as_ref().unwrap();
    assert!(ttft.p50 >= 5000.0, "{ttft:?}");
    if !common::the_machine_kept_the_client_behind(&r.bundle.dir) {
        assert_eq!(
            r.summary.validity.verdict,
            goodput::analyze::ValidityVerdict::Valid,
            "{:?}",
            r.summary.validity.reasons
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_sends_at_most_its_bound_beyond_the_plan() {
    // The last steady requests take seconds (outputs of up to 900 tokens): a drain at 20 req/s
    // until they end would send a hundred or more.
    let sim = common::sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = common::parse(&format!(
        "name = \"drain\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"uniform\", min = 600, max = 900 }}\n[load]\nrate = 20\nrequests = 12\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
        sim.base_url()
    ));
    let r = common::run_in(c, dir.path()).await;
    let cut = r
        .summary
        .load_end
        .as_ref()
        .and_then(|l| l.drain_cut)
        .expect("the drain reached its bound");
    let drained = r.records.iter().filter(|x| x.phase == Phase::Drain).count() as u64;
    assert!(drained <= cut.bound, "{drained} > {cut:?}");
    assert_eq!(
        cut.bound,
        goodput::driver::guard::drain_bound(cut.in_flight_at_steady_end)
    );
    assert!(cut.bound < 40, "{cut:?}");
    // Every steady request still ended, and the report says the drain was cut.
    let steady = &r.summary.steady.stats;
    assert_eq!(steady.ok, 12, "{steady:?}");
    let report = std::fs::read_to_string(r.bundle.dir.join("report.md")).unwrap();
    assert!(report.contains("drain stopped at its bound of"), "{report}");
}

fn goodput(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn bad_guard_settings_are_refused_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    for (body, key, says) in [
        (
            "[measurement.guard]\nmax_wait = 0\n",
            "measurement.guard.max_wait",
            "must be at least 1 s",
        ),
        (
            "[measurement.guard]\nmax_wait = \"-5s\"\n",
            "measurement.guard.max_wait",
            "must be at least 1 s",
        ),
        (
            "[target]\ntimeout = \"30s\"\n[measurement.guard]\nmax_wait = \"60s\"\n",
            "measurement.guard.max_wait",
            "more than target.timeout",
        ),
        (
            "[measurement.guard]\nenabled = false\nmax_wait = \"20s\"\n",
            "measurement.guard.max_wait",
            "the guard is off",
        ),
        (
            "[measurement]\nstop_when_decided = false\n[measurement.guard]\nenabled = false\n",
            "measurement.guard.enabled",
            "leaves nothing to stop this open loop",
        ),
    ] {
        let src = format!("[load]\nrate = 5\nrequests = 10\n{body}");
        std::fs::write(dir.path().join("c.toml"), &src).unwrap();
        let out = goodput(dir.path(), &["plan", "c.toml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{src}\n{err}");
        let line = src
            .lines()
            .position(|l| l.starts_with(key.rsplit('.').next().unwrap()))
            .unwrap()
            + 1;
        assert!(
            err.contains(&format!("c.toml:{line}: `{key}`")) && err.contains(says),
            "{src}\n{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Both off is accepted where something else bounds the load: a closed loop, or
    // load.max_in_flight below its default.
    for body in [
        "[load]\nkind = \"closed\"\nconcurrency = 4\nrequests = 10\n",
        "[load]\nrate = 5\nrequests = 10\nmax_in_flight = 64\n",
    ] {
        let src = format!(
            "{body}[measurement]\nstop_when_decided = false\n[measurement.guard]\nenabled = false\n"
        );
        std::fs::write(dir.path().join("c.toml"), &src).unwrap();
        let out = goodput(dir.path(), &["plan", "c.toml"]);
        assert!(
            out.status.success(),
            "{src}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_sizes_the_template_to_the_server_it_probes() {
    let sim = common::sim(one_at_a_time()).await;
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path().to_owned(), sim.base_url());
    let out = tokio::task::spawn_blocking(move || goodput(&d, &["init", "my.toml", "--url", &url]))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("my.toml")).unwrap();
    let c = goodput::contract::load(&dir.path().join("my.toml")).unwrap();
    // Nowhere near 20 req/s: what a server of one request at a time, 200 ms a token, serves.
    assert!(c.load.rate().is_some_and(|r| r > 0.0 && r < 0.1), "{text}");
    assert!(text.starts_with("# Sized by `goodput init`"), "{text}");
    assert!(text.contains("ms per output token after it"), "{text}");
    // Its outputs shortened, its SLO above what it does alone, and said why.
    assert!(c.slo.tpot_ms.unwrap().0 >= 400.0, "{text}");
    assert!(text.contains("workload.output_tokens is"), "{text}");
    // The probes: two alone and one burst of four (batching did not pay), all answered.
    let probes = sim.ground_truth().len();
    assert_eq!(probes, 6, "{probes}");
    idle_within(&sim, Duration::from_secs(5)).await.unwrap();

    // Shorthands the command line set are kept.
    let (d, url) = (dir.path().to_owned(), sim.base_url());
    let out = tokio::task::spawn_blocking(move || {
        goodput(
            &d,
            &[
                "init",
                "fixed.toml",
                "--url",
                &url,
                "--rate",
                "0.02",
                "--requests",
                "5",
            ],
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = goodput::contract::load(&dir.path().join("fixed.toml")).unwrap();
    assert_eq!((c.load.rate(), c.load.requests), (Some(0.02), Some(5)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_a_conservative_contract_for_a_server_too_slow_to_probe() {
    // No answer's head within the probe's timeout (the contract's, 2 s here).
    let sim = common::sim(SimConfig {
        faults: goodput::sim::Faults {
            slow_headers_rate: 1.0,
            slow_headers_ms: 5000.0,
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (d, url) = (dir.path().to_owned(), sim.base_url());
    let out = tokio::task::spawn_blocking(move || {
        goodput(
            &d,
            &[
                "init",
                "my.toml",
                "--url",
                &url,
                "--set",
                "target.timeout=2s",
            ],
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = goodput::contract::load(&dir.path().join("my.toml")).unwrap();
    assert!(!c.load.is_open(), "a closed loop of one: {:?}", c.load);
    assert_eq!((c.load.concurrency, c.load.requests), (Some(1), Some(10)));
    let text = std::fs::read_to_string(dir.path().join("my.toml")).unwrap();
    assert!(
        text.contains("no 16-token probe request finished"),
        "{text}"
    );

    // Nothing listening: a clear error naming the URL and the way out, nothing written.
    let out = goodput(
        dir.path(),
        &["init", "none.toml", "--url", "http://127.0.0.1:9"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot reach http://127.0.0.1:9") && err.contains("--no-probe"),
        "{err}"
    );
    assert!(!dir.path().join("none.toml").exists());
    // --no-probe writes the template as it is.
    let out = goodput(
        dir.path(),
        &[
            "init",
            "none.toml",
            "--url",
            "http://127.0.0.1:9",
            "--no-probe",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = goodput::contract::load(&dir.path().join("none.toml")).unwrap();
    assert_eq!(c.load.rate(), Some(20.0));
}
