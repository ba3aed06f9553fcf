//! `goodput run` end to end (issue #3): against the simulator in-process, against hand-rolled
//! servers with real engines' stream quirks, and through the binary for bad input and Ctrl-C.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::IntoResponse;
use axum::routing::post;
use common::{parse, run_in};
use goodput::contract;
use goodput::plan::Phase;
use goodput::record::{Outcome, Record};
use goodput::sim::SimConfig;

const FAST_SIM: &str = "[target.simulator]\nprefill_tokens_per_s = 50000\ndecode_base_ms = 4\ndecode_per_seq_ms = 0.05\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_poisson_run_keeps_a_complete_reproducible_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"open\"\n[workload]\nseed = 5\ninput_tokens = {{ dist = \"uniform\", min = 20, max = 80 }}\noutput_tokens = {{ dist = \"fixed\", value = 12 }}\n\
         [load]\nmodel = \"open\"\nrate = 40\nrequests = 80\n[warmup]\nrequests = 5\n[slo]\nttft_ms = 500\ntpot_ms = 100\n[quality]\nmode = \"consistency\"\n{FAST_SIM}"
    ));
    let r = run_in(c, dir.path()).await;
    common::assert_bundle_complete(&r.bundle, &["metrics.jsonl"]);
    let records = goodput::record::read_jsonl(&r.bundle.path("requests.jsonl")).unwrap();
    assert!(records.iter().all(Record::is_ok));
    let count = |p: Phase| records.iter().filter(|x| x.phase == p).count();
    assert_eq!((count(Phase::Warmup), count(Phase::Steady)), (5, 80));
    // Drain requests kept the load on until the last steady request finished, and are kept.
    let last_steady_end = records
        .iter()
        .filter(|x| x.phase == Phase::Steady)
        .filter_map(|x| x.end_us)
        .max()
        .unwrap();
    let drain: Vec<&Record> = records.iter().filter(|x| x.phase == Phase::Drain).collect();
    // After the load, the quality probes (16 by default), each sent twice, one at a time.
    assert_eq!(count(Phase::Quality), 32);
    assert!(!drain.is_empty() && drain.len() == records.len() - 85 - 32);
    assert!(
        drain
            .iter()
            .all(|d| d.intended_us.unwrap() <= last_steady_end + 200_000)
    );
    let s = &r.summary;
    assert_eq!(s.phases["warmup"].requests, 5);
    assert_eq!(s.phases["drain"].requests as usize, drain.len());
    assert_eq!(s.steady.stats.requests, 80);
    assert_eq!(s.load_model, goodput::contract::LoadModel::Open);
    assert_eq!(s.latency_origin, goodput::contract::LatencyOrigin::Intended);
    assert_eq!(s.steady.output_token_source, "usage");
    assert_eq!(s.steady.output_length_mismatches, 0);
    // Every request asked for exactly 12 tokens and got them.
    assert!(
        records
            .iter()
            .all(|x| x.usage_completion_tokens == Some(12) && x.client_output_tokens == 12)
    );
    // Server-reported prompt lengths equal the planned ones on the simulator.
    assert!(
        records
            .iter()
            .all(|x| x.usage_prompt_tokens == Some(x.input_tokens_planned))
    );
    // Each arrival: intended, then the dispatch thread's wake-up, then the send; the two parts
    // of the lag are reported beside it.
    assert!(
        records
            .iter()
            .filter(|x| x.phase != Phase::Quality)
            .all(|x| {
                let (i, d, s) = (
                    x.intended_us.unwrap(),
                    x.dispatched_us.unwrap(),
                    x.sent_us.unwrap(),
                );
                i <= d && d <= s
            })
    );
    assert_eq!(s.steady.stats.dispatch_wake_ms.as_ref().unwrap().count, 80);
    assert_eq!(s.steady.stats.dispatch_queue_ms.as_ref().unwrap().count, 80);
    let offered = s.steady.throughput.offered_rps.unwrap();
    let achieved = s.steady.throughput.achieved_rps.unwrap();
    assert!(
        (achieved - offered).abs() / offered < 0.1,
        "offered {offered} achieved {achieved}"
    );
    // 80 requests cannot support p99: the run says so rather than pretending, and the
    // measurement itself is still VALID (a sample's size is the claim's, not the run's).
    assert_eq!(s.validity.verdict, "VALID", "{:?}", s.validity.reasons);
    let slo = s.steady.slo.as_ref().unwrap();
    assert_eq!(slo.verdict, goodput::analyze::SloVerdict::MetIndicated);
    assert!(
        slo.not_yet()
            .unwrap()
            .contains("needs 459 requests, has 80"),
        "{:?}",
        slo.not_yet()
    );
    assert_eq!(s.grade.verdict, "comparable");
    // The resolved contract writes every default out, and the summary is recomputable.
    let resolved = std::fs::read_to_string(r.bundle.path("contract.toml")).unwrap();
    assert!(
        resolved.contains("max_in_flight")
            && resolved.contains("latency_origin")
            && resolved.contains("decode_base_ms")
    );
    let again = goodput::bundle::Bundle::load(&r.bundle.dir)
        .unwrap()
        .summary;
    assert_eq!(&again, s);
    // The environment: every engine probe kept verbatim or marked absent, the path to the
    // target, and the client's facts (GPU absence recorded, not an error).
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.path("environment.json")).unwrap())
            .unwrap();
    // Whether the idle CPUs were held quick to wake, and if not, why.
    let wake = &env["client_wake_latency"];
    assert!(wake["held"] == true || wake["why"].is_string(), "{wake}");
    // How connections were kept: whether a latency includes opening one depends on it.
    let pool = &env["client_http"];
    assert_eq!(
        pool["keep_alive_idle_s"],
        goodput::client::DEFAULT_KEEP_ALIVE.as_secs_f64(),
        "{pool}"
    );
    let probes = env["probes"].as_array().unwrap();
    let endpoints: Vec<&str> = probes
        .iter()
        .map(|p| p["endpoint"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = std::iter::once("/v1/models")
        .chain(goodput::env::ENGINE_PROBES.map(goodput::env::Endpoint::name))
        .chain(["this host"])
        .collect();
    assert_eq!(endpoints, expected);
    assert_eq!(probes[1]["answer"]["engine"], "goodput-sim");
    assert!(
        probes[2..probes.len() - 1]
            .iter()
            .all(|p| p["absent"].is_string()),
        "the simulator has no SGLang/TGI/llama.cpp endpoints"
    );
    assert_eq!(env["network"]["path"], "loopback");
    assert!(env["network"]["tcp_connect_rtt_ms"].as_f64().unwrap() < 100.0);
    assert!(
        env["client"]["git_revision"].is_string()
            && env["client"]["rustc"]
                .as_str()
                .unwrap()
                .starts_with("rustc")
    );
    assert!(env["client"]["gpus"].is_object());
    let on_disk: goodput::analyze::Summary =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.path("summary.json")).unwrap())
            .unwrap();
    assert_eq!(&on_disk, s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_run_keeps_concurrency_and_carries_the_warning() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[workload]\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\ninput_tokens = {{ dist = \"fixed\", value = 32 }}\n\
         [load]\nmodel = \"closed\"\nconcurrency = 4\nrequests = 40\n{FAST_SIM}"
    ));
    let r = run_in(c, dir.path()).await;
    let steady = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Steady)
        .count();
    let drain = r.records.iter().filter(|x| x.phase == Phase::Drain).count();
    assert_eq!(steady, 40);
    assert!(
        drain <= 3 && steady + drain == r.records.len(),
        "{drain} drain requests"
    );
    for x in &r.records {
        let t = x.sent_us.unwrap();
        let in_flight = r
            .records
            .iter()
            .filter(|o| o.sent_us.unwrap() <= t && o.end_us.unwrap() > t)
            .count();
        assert!(in_flight <= 4, "{in_flight} in flight");
        assert!(x.intended_us.is_none() && x.dispatched_us.is_none());
    }
    let s = &r.summary;
    assert_eq!(s.latency_origin, goodput::contract::LatencyOrigin::Sent);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("tail and capacity claims are not valid"))
    );
    let text = goodput::report::document(s).terminal();
    assert!(text.contains("closed-loop load"), "{text}");
}

/// A server with real engines' quirks: a role-only first chunk, a keep-alive comment, a
/// multi-token chunk, an empty final chunk, and usage in a chunk whose `choices` is null.
async fn quirky_server(streaming: bool) -> (String, tokio::task::JoinHandle<()>) {
    async fn completions(streaming: bool) -> axum::response::Response {
        if !streaming {
            return axum::Json(serde_json::json!({"choices": [{"message": {"content": "x"}}]}))
                .into_response();
        }
        let parts: Vec<(u64, &'static str)> = vec![
            (
                0,
                "data: {\"id\":\"q1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n",
            ),
            (0, ": ping\n\n"),
            (
                40,
                "data:{\"id\":\"q1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" alpha beta gamma\"}}]}\n\n",
            ),
            (
                20,
                "data: {\"id\":\"q1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" delta\"}}]}\n\n",
            ),
            (
                0,
                "data: {\"id\":\"q1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
            ),
            (
                0,
                "data: {\"id\":\"q1\",\"choices\":null,\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":4}}\n\n",
            ),
            (0, "data: [DONE]\n\n"),
        ];
        // The delays are the behaviour under measurement (a 40 ms prefill), not synchronisation.
        let stream = futures_util::stream::unfold(parts.into_iter(), |mut it| async move {
            let (delay, text) = it.next()?;
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Some((
                Ok::<Bytes, std::io::Error>(Bytes::from_static(text.as_bytes())),
                it,
            ))
        });
        (
            [("content-type", "text/event-stream")],
            Body::from_stream(stream),
        )
            .into_response()
    }
    common::mock_openai(post(move || completions(streaming)), "quirky").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_only_chunks_comments_and_null_choices_are_measured_right() {
    let (url, _server) = quirky_server(true).await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[target]\nurl = \"{url}\"\n[load]\nmodel = \"closed\"\nconcurrency = 1\nrequests = 3\n[measurement]\nclient_token_count = \"words\"\n"
    ));
    let r = run_in(c, dir.path()).await;
    for x in &r.records {
        assert_eq!(x.outcome, Outcome::Ok, "{:?}", x.error);
        let sent = x.sent_us.unwrap();
        // TTFT comes from the first text-carrying chunk, not the role-only one at ~0 ms.
        let ttft_ms = (x.first_token_us.unwrap() - sent) as f64 / 1000.0;
        assert!(
            ttft_ms >= 39.0,
            "TTFT {ttft_ms} ms counted a role-only chunk"
        );
        assert_eq!(x.chunks.iter().map(|c| c.1).collect::<Vec<_>>(), vec![3, 1]);
        assert_eq!(
            (
                x.usage_completion_tokens,
                x.usage_prompt_tokens,
                x.client_output_tokens
            ),
            (Some(4), Some(7), 4)
        );
        assert_eq!(x.finish_reason.as_deref(), Some("length"));
        assert_eq!(x.response_id.as_deref(), Some("q1"));
    }
    // TPOT = (E2E − TTFT) / (4 − 3): the first chunk carried three of the four tokens, so one
    // token came after it, ~20 ms later ((4 − 1) would say a third of that). Judged against
    // each record's own gap, not the clock: in a slow spell of the host the server's 20 ms
    // sleep took 40.
    let mut gaps: Vec<f64> = r
        .records
        .iter()
        .map(|x| (x.end_us.unwrap() - x.first_token_us.unwrap()) as f64 / 1000.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    assert!(gaps[0] >= 15.0, "{gaps:?}: the server waits 20 ms");
    let tpot = r.summary.steady.stats.tpot_ms.as_ref().unwrap().p50;
    assert!(
        (tpot - gaps[1]).abs() < 0.01,
        "TPOT p50 {tpot} ms, gaps {gaps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_stream_fails_every_request_clearly_and_stops_early() {
    let (url, _server) = quirky_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[target]\nurl = \"{url}\"\n[load]\nmodel = \"open\"\nrate = 200\nrequests = 400\n"
    ));
    let r = run_in(c, dir.path()).await;
    // The first requests all failed the same way; fail-fast then interrupted those in flight.
    assert!(
        r.records[..20]
            .iter()
            .all(|x| x.outcome == Outcome::NotStreamed)
    );
    assert!(
        r.records
            .iter()
            .all(|x| matches!(x.outcome, Outcome::NotStreamed | Outcome::Interrupted))
    );
    assert!(
        r.records[0]
            .error
            .as_deref()
            .unwrap()
            .contains("application/json")
    );
    assert!(r.records[0].error.as_deref().unwrap().contains(&url));
    assert!(r.aborted.is_some(), "fail-fast did not stop the run");
    assert!(r.records.len() < 400);
}

// ---- through the binary --------------------------------------------------------------------

fn goodput(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The one bundle a single run wrote under `dir`.
fn only_bundle(dir: &Path) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.pop().unwrap()
}

fn assert_clean_failure(out: &std::process::Output, wants: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    for w in wants {
        assert!(err.contains(w), "want {w:?} in: {err}");
    }
}

#[test]
fn bad_contracts_fail_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        (
            "unknown.toml",
            "[load]\nmodel = \"open\"\nrat = 2\nrequests = 3\n",
            vec!["unknown.toml:3", "rat"],
        ),
        (
            "missing.toml",
            "[load]\nmodel = \"open\"\nrequests = 3\n",
            vec!["missing.toml:1", "load.rate"],
        ),
        (
            "type.toml",
            "[load]\nmodel = \"open\"\nrate = \"fast\"\nrequests = 3\n",
            vec!["type.toml:3"],
        ),
        (
            "rate.toml",
            "[load]\nmodel = \"open\"\nrate = -1\nrequests = 3\n",
            vec!["rate.toml:3", "load.rate", "> 0"],
        ),
        (
            "keep.toml",
            "[target]\nkeep_alive = \"-1s\"\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n",
            vec!["keep.toml:2", "target.keep_alive", ">= 0"],
        ),
        (
            "fast.toml",
            "[load]\nmodel = \"open\"\nrate = 1e300\nrequests = 3\n",
            vec!["fast.toml:3", "load.rate", "at most 1000000"],
        ),
        (
            "minmax.toml",
            "[workload]\noutput_tokens = { dist = \"uniform\", min = 50, max = 5 }\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n",
            vec!["minmax.toml:2", "workload.output_tokens.min"],
        ),
        (
            // Four billion tokens would be built in memory before the first request.
            "long.toml",
            "[workload]\ninput_tokens = { dist = \"fixed\", value = 4000000000 }\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n",
            vec![
                "long.toml:2",
                "workload.input_tokens.value",
                "10000000 tokens",
            ],
        ),
        (
            "pct.toml",
            "[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n[slo]\nttft_ms = 10\npercentile = 0\n",
            vec!["pct.toml:7", "slo.percentile", "(0, 100)"],
        ),
    ];
    for (name, text, wants) in cases {
        let p = write(d, name, text);
        assert_clean_failure(
            &goodput(&["run", p.to_str().unwrap(), "--quiet"], d),
            &wants,
        );
    }
    let missing = goodput(&["run", "nope.toml"], d);
    assert_clean_failure(&missing, &["nope.toml"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.matches("(os error").count(), 1, "the cause once: {err}");
    assert!(
        !d.join("runs").exists(),
        "no bundle for a contract that never ran"
    );
}

#[test]
fn an_unreachable_url_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = write(
        dir.path(),
        "c.toml",
        &format!(
            "[target]\nurl = \"http://127.0.0.1:{port}\"\nmodel = \"m\"\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n"
        ),
    );
    assert_clean_failure(
        &goodput(&["run", p.to_str().unwrap(), "--quiet"], dir.path()),
        &[&format!("127.0.0.1:{port}")],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_on_every_request_fails_with_url_and_status() {
    let mut cfg = SimConfig::default();
    cfg.faults.error_rate = 1.0;
    cfg.faults.error_status = 500;
    let sim = common::sim(cfg).await;
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "c.toml",
        &format!(
            "[target]\nurl = \"{}\"\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 60\n",
            sim.base_url()
        ),
    );
    let d = dir.path().to_owned();
    let out =
        tokio::task::spawn_blocking(move || goodput(&["run", p.to_str().unwrap(), "--quiet"], &d))
            .await
            .unwrap();
    assert_clean_failure(&out, &["no request succeeded", "HTTP 500", &sim.base_url()]);
    // The bundle is kept, with every failure recorded.
    let bundle = std::fs::read_dir(dir.path().join("runs/default"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let records = goodput::record::read_jsonl(&bundle.join("requests.jsonl")).unwrap();
    assert!(!records.is_empty() && records.iter().all(|r| r.outcome == Outcome::HttpStatus));
}

/// Starts `goodput run` on a long contract (100 s) in `dir`.
fn long_run(dir: &Path) -> std::process::Child {
    let p = write(
        dir,
        "c.toml",
        "name = \"int\"\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 5000\n[workload]\noutput_tokens = { dist = \"fixed\", value = 20 }\n[slo]\nttft_ms = 5000\n",
    );
    Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", p.to_str().unwrap(), "--quiet"])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The [`long_run`]'s `requests.jsonl`, once 10 records are in it (bounded: the child is
/// stopped if none appear).
fn records_on_disk(dir: &Path, child: &mut std::process::Child) -> PathBuf {
    let runs = dir.join("runs/int");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = std::fs::read_dir(&runs)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path().join("requests.jsonl"));
        if let Some(f) = found.filter(|f| {
            std::fs::read_to_string(f)
                .map(|t| t.lines().count() >= 10)
                .unwrap_or(false)
        }) {
            return f;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no records appeared");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_keeps_every_finished_record_and_marks_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = long_run(dir.path());
    let jsonl = records_on_disk(dir.path(), &mut child);
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let bundle = jsonl.parent().unwrap();
    let records = goodput::record::read_jsonl(&jsonl).unwrap();
    assert!(records.len() >= 10 && records.len() < 5000);
    let command: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("command.json")).unwrap())
            .unwrap();
    assert_eq!(command["interrupted"], true);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["interrupted"], true);
    assert_eq!(summary["validity"]["verdict"], "INVALID");
    // Requests cut off by Ctrl-C are not SLO misses (issue #16): attainment is over the
    // completed ones, which all met a 5 s TTFT on the idle simulator, and they are counted apart.
    let cut = records
        .iter()
        .filter(|r| r.phase == Phase::Steady && r.outcome == goodput::record::Outcome::Interrupted)
        .count();
    assert!(cut > 0, "requests were in flight at the Ctrl-C");
    let slo = &summary["steady"]["slo"];
    assert_eq!(slo["cancelled"], cut as u64, "{slo}");
    assert_eq!(slo["attainment"], 1.0, "{slo}");
}

#[test]
fn a_killed_run_keeps_its_records_and_reports_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = long_run(dir.path());
    let jsonl = records_on_disk(dir.path(), &mut child);
    child.kill().unwrap(); // SIGKILL: no handler runs, nothing is finished off
    child.wait().unwrap();
    let bundle = jsonl.parent().unwrap();
    assert!(!bundle.join("summary.json").exists());
    // A kill can land in the middle of writing a record: make sure this one did.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&jsonl)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"index\":4999,\"phase\":\"ste").unwrap();
    drop(f);
    let lines = std::fs::read_to_string(&jsonl).unwrap().lines().count();
    let out = goodput(&["report", bundle.to_str().unwrap(), "--json"], dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("requests.jsonl:{lines}")) && err.contains("unfinished"),
        "{err}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let whole = goodput::record::read_jsonl(&jsonl).unwrap().len();
    assert_eq!(whole, lines - 1, "every whole record is read");
    assert_eq!(
        summary["interrupted"], true,
        "no end time: it did not finish"
    );
    assert_eq!(summary["validity"]["verdict"], "INVALID");
}

#[test]
fn init_writes_a_contract_that_runs_and_plans_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(goodput(&["init", "g.toml"], d).status.success());
    assert!(contract::load(&d.join("g.toml")).is_ok());
    assert_clean_failure(&goodput(&["init", "g.toml"], d), &["exists"]);
    let a = goodput(&["plan", "g.toml", "--limit", "50"], d).stdout;
    let b = goodput(&["plan", "g.toml", "--limit", "50"], d).stdout;
    assert_eq!(a, b);
    assert_eq!(String::from_utf8_lossy(&a).lines().count(), 50);
}

#[test]
fn a_prediction_is_kept_before_the_run_checked_after_and_edits_show() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = write(
        d,
        "c.toml",
        "name = \"pred\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 8 }\n[load]\nmodel = \"open\"\nrate = 40\nrequests = 40\n[target.simulator]\ndecode_base_ms = 3\n",
    );
    let out = goodput(
        &[
            "run",
            p.to_str().unwrap(),
            "--quiet",
            "--predict",
            "ttft_p99<=10s, output_tokens_per_s>=1000000",
        ],
        d,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hash verified"), "{text}");
    assert!(
        text.contains("held") && text.contains("did not hold"),
        "{text}"
    );
    let bundle = only_bundle(&d.join("runs/pred"));
    let pred: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("prediction.json")).unwrap())
            .unwrap();
    let cmd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("command.json")).unwrap())
            .unwrap();
    let made: jiff::Timestamp = pred["made_utc"].as_str().unwrap().parse().unwrap();
    let started: jiff::Timestamp = cmd["started_utc"].as_str().unwrap().parse().unwrap();
    assert!(
        made <= started,
        "prediction made {made}, run started {started}"
    );
    // Editing the prediction afterwards is visible.
    let edited = std::fs::read_to_string(bundle.join("prediction.json"))
        .unwrap()
        .replace("1000000", "1");
    std::fs::write(bundle.join("prediction.json"), edited).unwrap();
    let report = goodput(&["report", bundle.to_str().unwrap()], d);
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("HASH MISMATCH"),
        "{} {}",
        String::from_utf8_lossy(&report.stdout),
        String::from_utf8_lossy(&report.stderr)
    );
    assert_clean_failure(
        &goodput(&["run", p.to_str().unwrap(), "--predict", "speed >= 3"], d),
        &["--predict", "unknown metric"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_usage_is_counted_by_the_client_and_says_so() {
    // Imitates servers that never send usage in streams (llama-cpp-python, some proxies).
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[workload]\noutput_tokens = {{ dist = \"fixed\", value = 9 }}\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 20\n[warmup]\nrequests = 0\n{FAST_SIM}stream_usage = false\n"
    ));
    let r = run_in(c, dir.path()).await;
    assert!(
        r.records
            .iter()
            .all(|x| x.is_ok() && x.usage_completion_tokens.is_none())
    );
    let s = &r.summary;
    assert_eq!(s.steady.output_token_source, "client");
    assert_eq!(s.steady.lengths.output_reported_mean, None);
    // The client's word count is exact on the simulator: lengths still match the plan.
    assert!(r.records.iter().all(|x| x.client_output_tokens == 9));
    assert_eq!(s.steady.output_length_mismatches, 0);
    assert!(
        s.notes
            .iter()
            .any(|n| n
                .starts_with("Output tokens counted by the client: words, the simulator's tokens")),
        "{:?}",
        s.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_longer_than_planned_at_the_server_earn_a_note() {
    // A chat template and a real tokenizer make prompts longer than planned: imitated by a
    // server that reports 50% more prompt tokens than it was sent.
    async fn chat(body: String) -> ([(&'static str, &'static str); 1], String) {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let words = v["messages"][0]["content"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count();
        let reported = words * 3 / 2;
        let out = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"a b\"}}}}]}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{reported},\"completion_tokens\":2}}}}\n\ndata: [DONE]\n\n"
        );
        ([("content-type", "text/event-stream")], out)
    }
    let (url, srv) = common::mock_openai(post(chat), "m").await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[target]\nurl = \"{url}\"\n[workload]\ninput_tokens = {{ dist = \"fixed\", value = 40 }}\noutput_tokens = {{ dist = \"fixed\", value = 2 }}\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 10\n[warmup]\nrequests = 0\n"
    ));
    let r = run_in(c, dir.path()).await;
    let l = &r.summary.steady.lengths;
    assert_eq!(l.input_planned_mean, Some(40.0));
    assert_eq!(l.input_reported_mean, Some(60.0));
    assert!(
        r.summary.notes.iter().any(|n| n
            .starts_with("Input lengths as the server counted them differ")
            && n.contains("(+50%)")),
        "{:?}",
        r.summary.notes
    );
    assert!(
        !r.summary
            .notes
            .iter()
            .any(|n| n.starts_with("Output lengths"))
    );
    srv.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_is_self_contained_with_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"html\"\n[workload]\noutput_tokens = {{ dist = \"uniform\", min = 4, max = 16 }}\n[load]\nmodel = \"open\"\nrate = 60\nrequests = 120\n[warmup]\nrequests = 20\n[slo]\nttft_ms = 300\ntpot_ms = 60\n[quality]\nmode = \"consistency\"\n{FAST_SIM}"
    ));
    let r = run_in(c, dir.path()).await;
    let html = std::fs::read_to_string(r.bundle.path("report.html")).unwrap();
    // One file: no script, no stylesheet or image fetched, nothing but the SVG namespace URI.
    assert!(html.starts_with("<!doctype html>"));
    for banned in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(banned), "{banned}");
    }
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count()
    );
    for id in [
        "pct-ttft",
        "pct-tpot",
        "pct-itl",
        "pct-e2e",
        "pct-lag",
        "cdf-ttft",
        "cdf-tpot",
        "cdf-itl",
        "cdf-e2e",
        "timeline-load",
        "timeline-ttft",
        "lengths-input",
        "lengths-output",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "figure {id} missing"
        );
    }
    // The verdict banner and the tiles come first, the contract card is there; the SLO
    // thresholds are drawn.
    let first_figure = html.find("<svg").unwrap();
    assert!(html.find("id=\"verdict\"").unwrap() < first_figure);
    assert!(html.find("id=\"tiles\"").unwrap() < first_figure);
    assert!(html.contains("Contract card"));
    assert!(html.contains("SLO p99 ≤ 300 ms") && html.contains("SLO p99 ≤ 60 ms"));
    assert!(
        html.contains("class=\"band b0\""),
        "phases shaded on the timeline"
    );
    // `goodput report --html` recomputes the same page from the bundle alone.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["report", "--html"])
        .arg(&r.bundle.dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), html);
}

#[test]
fn no_wake_latency_hold_leaves_idle_states_alone_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = write(
        d,
        "c.toml",
        "name = \"nohold\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 4 }\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 20\n[warmup]\nrequests = 0\n",
    );
    let out = goodput(
        &[
            "run",
            p.to_str().unwrap(),
            "--quiet",
            "--no-wake-latency-hold",
        ],
        d,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bundle = only_bundle(&d.join("runs/nohold"));
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("environment.json")).unwrap())
            .unwrap();
    let wake = &env["client_wake_latency"];
    assert_eq!(wake["held"], false, "{wake}");
    assert!(
        wake["why"]
            .as_str()
            .unwrap()
            .contains("--no-wake-latency-hold")
    );
    // The dispatch thread stayed a normal thread, and the bundle says so.
    assert_eq!(wake["dispatch_thread"]["policy"], "normal", "{wake}");
    assert_eq!(
        wake["dispatch_thread"]["why"], "declined (--no-wake-latency-hold)",
        "{wake}"
    );

    // Without the flag, the bundle says how the thread ran: real-time, or why not.
    let out = goodput(&["run", p.to_str().unwrap(), "--quiet"], d);
    assert!(out.status.success());
    let held = std::fs::read_dir(d.join("runs/nohold"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|b| *b != bundle)
        .unwrap();
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(held.join("environment.json")).unwrap())
            .unwrap();
    let thread = &env["client_wake_latency"]["dispatch_thread"];
    match thread["policy"].as_str() {
        Some("SCHED_FIFO") => assert_eq!(thread["priority"], 1, "{thread}"),
        Some("normal") => assert!(
            thread["why"].as_str().unwrap().contains("not granted"),
            "{thread}"
        ),
        _ => panic!("{thread}"),
    }
}

/// `run --set` and the shorthands (issue #17): the changes are made to the contract's text
/// before it is parsed, so the bundle's resolved contract and its fingerprints say what was
/// run, `command.json` lists them, and a wrong key fails like a wrong line in the file.
#[test]
fn run_set_and_shorthands_change_the_resolved_contract_and_its_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = format!(
        "name = \"set\"\n[load]\nmodel = \"open\"\nrate = 50\nduration = \"30s\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n{FAST_SIM}"
    );
    write(d, "c.toml", &text);
    let out = goodput(
        &[
            "run",
            "c.toml",
            "-q",
            "--requests",
            "20",
            "--set",
            "load.rate=5",
            "--set",
            "slo.ttft_ms=300",
        ],
        d,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bundle = only_bundle(&d.join("runs/set"));
    let ran = contract::load(&bundle.join("contract.toml")).unwrap();
    assert_eq!(ran.load.rate(), Some(5.0));
    assert_eq!(ran.load.requests(), Some(20));
    assert_eq!(ran.slo.ttft_ms.map(|m| m.0), Some(300.0));
    // The fingerprints are those of the contract as it would be written with those values.
    let by_hand = text.replace("rate = 50\nduration = \"30s\"", "rate = 5\nrequests = 20")
        + "[slo]\nttft_ms = 300\n";
    let by_hand = contract::parse(&by_hand, Path::new("h.toml")).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        summary["fingerprints"],
        serde_json::to_value(by_hand.fingerprints()).unwrap()
    );
    assert_ne!(
        by_hand.fingerprints().load,
        contract::parse(&text, Path::new("c.toml"))
            .unwrap()
            .fingerprints()
            .load
    );
    let command: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("command.json")).unwrap())
            .unwrap();
    assert_eq!(
        command["overrides"],
        serde_json::json!([
            "--requests 20",
            "--set load.rate=5",
            "--set slo.ttft_ms=300"
        ])
    );
    // A misspelt key fails before any load, naming the file and the key.
    assert_clean_failure(
        &goodput(&["run", "c.toml", "--set", "load.rat=5"], d),
        &["c.toml", "rat"],
    );
    assert_clean_failure(
        &goodput(&["run", "c.toml", "--set", "nokey"], d),
        &["KEY=VALUE"],
    );
    // init takes the same shorthands: the written contract holds them (nothing listens there,
    // so it writes the template unsized).
    assert!(
        goodput(
            &[
                "init",
                "g.toml",
                "--url",
                "http://127.0.0.1:9",
                "--no-probe",
                "--concurrency",
                "4"
            ],
            d
        )
        .status
        .success()
    );
    let g = contract::load(&d.join("g.toml")).unwrap();
    assert_eq!(g.target.url.as_deref(), Some("http://127.0.0.1:9"));
    assert!(!g.load.is_open());
    assert_eq!(g.load.concurrency, Some(4));
}

/// With stderr not a terminal (CI, a log), a run prints a progress line every
/// `GOODPUT_PROGRESS_SECS` (10 s by default) instead of nothing (issue #17).
#[test]
fn progress_goes_to_a_log_as_lines_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "c.toml",
        &format!(
            "name = \"lines\"\n[load]\nmodel = \"open\"\nrate = 20\nrequests = 50\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n{FAST_SIM}"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", "c.toml"])
        .env("GOODPUT_PROGRESS_SECS", "0.5")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("progress ")).collect();
    assert!(lines.len() >= 2, "{err}");
    // Each line says how far (a share, or "finishing" once the plan is sent and the drain's
    // requests finish) and how fast.
    assert!(
        lines.iter().all(|l| {
            (l.contains("/50 requests (") || l.contains("50/50 requests, finishing"))
                && l.contains(" req/s · ")
        }),
        "{err}"
    );
    assert!(lines.iter().any(|l| l.contains("ETA")), "{err}");
    // --quiet: none.
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", "c.toml", "-q"])
        .env("GOODPUT_PROGRESS_SECS", "0.5")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("progress "));
}

/// `--repeats` says, per run, why it is INVALID and how its predictions fared, and `goodput
/// report` reads the repeat set it wrote (issue #17).
#[test]
fn a_repeat_set_shows_each_run_and_reports_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "c.toml",
        &format!(
            "name = \"rep\"\n[load]\nrate = 40\nrequests = 10\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[slo]\nttft_ms = 500\n[measurement]\nmax_dispatch_lag_ms = 50\n{FAST_SIM}"
        ),
    );
    let out = goodput(
        &[
            "run",
            "c.toml",
            "-q",
            "--repeats",
            "2",
            "--predict",
            "ttft_p50<=0.001ms",
        ],
        d,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for run in ["run 01: rep ·", "run 02: rep ·"] {
        assert!(text.contains(run), "{text}");
    }
    // 10 requests cannot support p99: each run says so (not INVALID: the measurement is
    // sound), and the prediction failed in each.
    assert_eq!(
        text.matches(
            "  SLO met, not yet supported at 99% confidence (TTFT p99 needs 459 requests, has 10)"
        )
        .count(),
        2,
        "{text}"
    );
    assert!(!text.contains("INVALID"), "{text}");
    assert_eq!(
        text.matches("predicted ttft_p50<=0.001ms: measured")
            .count(),
        2,
        "{text}"
    );
    assert_eq!(text.matches("did not hold").count(), 2, "{text}");
    let parent = only_bundle(&d.join("runs/rep"));
    let again = goodput(&["report", parent.to_str().unwrap()], d);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.contains("run 02: rep ·") && again.contains("ttft_p50_ms"),
        "{again}"
    );
}

#[test]
fn max_runs_0_and_an_empty_prediction_are_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "c.toml",
        "[load]\nkind = \"open\"\nrate = 5\nrequests = 10\n[slo]\nttft_ms = 100\n",
    );
    let c = p.to_str().unwrap();
    let out = goodput(&["sweep", c, "--capacity", "--max-runs", "0"], dir.path());
    assert_clean_failure(&out, &["--max-runs", "0 is not in 2.."]);
    let out = goodput(&["run", c, "--predict", ""], dir.path());
    assert_clean_failure(&out, &["--predict: no expectation given"]);
    assert!(!dir.path().join("runs").exists(), "nothing may run");
}
