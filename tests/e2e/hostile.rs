//! Issue #46: nothing lost to what a server or a user can send. Each test names the item of
//! the issue it holds; every goodput process these tests start, and every test process that
//! runs goodput in itself, is held to a peak resident set of 256 MiB
//! ([`common::HOSTILE_RSS_BYTES`]).

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{parse, run_in, sim};
use goodput::sim::SimConfig;

fn goodput(args: &[&str], dir: &Path) -> Output {
    common::output_within_memory(
        Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(args)
            .current_dir(dir),
    )
}

/// A telemetry page on its own port: a power gauge and a summary with no observations (NaN,
/// valid Prometheus text), and infinities.
async fn nan_page() -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 300\n\
             # TYPE rpc_seconds summary\n\
             rpc_seconds{quantile=\"0.5\"} NaN\n\
             rpc_seconds_sum 0\n\
             rpc_seconds_count 0\n\
             edge_high +Inf\n\
             edge_low -Inf\n"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    (
        url,
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
    )
}

/// Item 1: one NaN on a scraped page is kept as NaN, the run measures its energy from the
/// page's other series, and every reader of the bundle reads it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nan_on_a_scraped_page_is_kept_and_the_bundle_stays_readable() {
    let server = sim(SimConfig::default()).await;
    let (page, srv) = nan_page().await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"nan\"\n[target]\nurl = \"{}\"\n[target.telemetry]\nurls = [\"{page}\"]\ninterval = \"100ms\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[load]\nkind = \"open\"\nrate = 20\nrequests = 40\n[measurement]\nserver_metrics_interval = \"100ms\"\n",
        server.base_url()
    ));
    let r = run_in(c, dir.path()).await;
    srv.abort();
    let e = r.summary.efficiency.clone().expect("an efficiency section");
    let energy = e.energy.clone().unwrap_or_else(|| panic!("{e:?}"));
    assert!(energy.method.contains("power"), "{}", energy.method);
    let kept = std::fs::read_to_string(r.bundle.path("telemetry.jsonl")).unwrap();
    assert!(
        kept.contains(r#""NaN""#) && kept.contains(r#""+Inf""#) && kept.contains(r#""-Inf""#),
        "{kept}"
    );
    assert!(!kept.contains("null"), "{kept}");
    let back = goodput::bundle::Bundle::load(&r.bundle.dir).expect("the bundle reads back");
    assert!(back.summary.efficiency.is_some_and(|e| e.energy.is_some()));
    let b = r.bundle.dir.to_str().unwrap();
    for args in [
        vec!["report", b],
        vec!["audit", b],
        vec!["export", b, "--format", "csv"],
        vec!["compare", b, b],
    ] {
        let out = goodput(&args, dir.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("invalid type"),
            "goodput {args:?}: {err}"
        );
    }
    common::assert_own_memory_within_bound();
}

/// A small run against the simulator, its bundle under `dir`.
async fn small_run(dir: &Path) -> goodput::run::RunResult {
    let server = sim(SimConfig::default()).await;
    run_in(
        parse(&format!(
            "name = \"small\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nkind = \"open\"\nrate = 50\nrequests = 10\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
            server.base_url()
        )),
        dir,
    )
    .await
}

/// Item 12: `export` writes an unsigned value as the value it is, never a negative one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_writes_unsigned_values_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let r = small_run(dir.path()).await;
    let mut records = r.records.clone();
    records[0].end_us = Some(u64::MAX);
    r.bundle.rewrite_records(&records).unwrap();
    let b = r.bundle.dir.to_str().unwrap();
    for format in ["csv", "jsonl"] {
        let out = goodput(
            &["export", b, "--format", format, "--out", format],
            dir.path(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text =
            std::fs::read_to_string(dir.path().join(format).join(format!("requests.{format}")))
                .unwrap();
        assert!(text.contains(&u64::MAX.to_string()), "{format}: {text}");
        assert!(!text.contains(",-1,") && !text.contains(":-1"), "{text}");
    }
    common::assert_own_memory_within_bound();
}

/// Item 5 and item 15: a redirect to another origin (here another port) is followed without
/// any credential — the API key, a header read from the environment, a header named like a
/// credential though written literally — while the same request to the target's own origin
/// carried them all; the literal credential is redacted from everything the run wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_carries_no_credential() {
    use axum::http::{HeaderMap, StatusCode, header};
    use std::sync::{Arc, Mutex};
    type Seen = Arc<Mutex<Vec<HeaderMap>>>;
    let (at_a, at_b): (Seen, Seen) = Default::default();
    let b = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b_url = format!("http://{}", b.local_addr().unwrap());
    let seen = at_b.clone();
    let b_app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |h: HeaderMap| {
            seen.lock().unwrap().push(h);
            async {
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\ndata: [DONE]\n\n",
                )
            }
        }),
    );
    let b_srv = tokio::spawn(async move { axum::serve(b, b_app).await.unwrap() });
    let seen = at_a.clone();
    let to = format!("{b_url}/v1/chat/completions");
    let a_app = axum::Router::new()
        .route(
            "/v1/chat/completions",
            axum::routing::post(move |h: HeaderMap| {
                seen.lock().unwrap().push(h);
                let to = to.clone();
                async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]) }
            }),
        )
        .route(
            "/v1/models",
            axum::routing::get(|| async { axum::Json(serde_json::json!({"data": [{"id": "m"}]})) }),
        );
    let a = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a_url = format!("http://{}", a.local_addr().unwrap());
    let a_srv = tokio::spawn(async move { axum::serve(a, a_app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let literal = "literal-credential-7f3a9";
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"redirect\"\n[target]\nurl = \"{a_url}\"\nmodel = \"m\"\napi_key_env = \"GOODPUT_HOSTILE_KEY\"\nfollow_redirects = true\n[target.request]\nheaders = {{ x-router-key = {{ env = \"GOODPUT_HOSTILE_HEADER\" }}, x-api-key = \"{literal}\", x-session = \"s-42\" }}\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 4\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n"
        ),
    )
    .unwrap();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        common::output_within_memory(
            Command::new(env!("CARGO_BIN_EXE_goodput"))
                .args(["run", "c.toml", "--out", "runs"])
                .env("GOODPUT_HOSTILE_KEY", "sk-hostile-key-1234")
                .env("GOODPUT_HOSTILE_HEADER", "router-secret-5678")
                .current_dir(&d),
        )
    })
    .await
    .unwrap();
    a_srv.abort();
    b_srv.abort();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    let (a, b) = (at_a.lock().unwrap(), at_b.lock().unwrap());
    assert_eq!((a.len(), b.len()), (4, 4), "{stderr}");
    for h in a.iter() {
        assert_eq!(h["authorization"], "Bearer sk-hostile-key-1234");
        assert_eq!(h["x-router-key"], "router-secret-5678");
        assert_eq!(h["x-api-key"], literal);
        assert_eq!(h["x-session"], "s-42");
    }
    for h in b.iter() {
        for gone in ["authorization", "x-router-key", "x-api-key"] {
            assert!(
                h.get(gone).is_none(),
                "{gone} went to another origin: {h:?}"
            );
        }
        assert_eq!(h["x-session"], "s-42", "a plain header still goes");
    }
    // The literal credential: noted, and in no file and on no terminal.
    assert!(
        common::unwrapped(&stderr).contains("is a credential written in the file"),
        "{stderr}"
    );
    let mut texts = vec![stdout, stderr];
    fn all(p: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            if e.path().is_dir() {
                all(&e.path(), out);
            } else {
                out.push(String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned());
            }
        }
    }
    all(&dir.path().join("runs"), &mut texts);
    assert!(texts.len() > 5);
    for t in &texts {
        assert!(
            !t.contains(literal),
            "the literal credential was written: {t}"
        );
    }
}

/// A server that answers every POST, whatever its path, with an OpenAI chat stream, and lists
/// model `m`.
async fn openai_chat_everywhere() -> (String, tokio::task::JoinHandle<()>) {
    use axum::http::header;
    let app = axum::Router::new()
        .route(
            "/v1/models",
            axum::routing::get(|| async { axum::Json(serde_json::json!({"data": [{"id": "m"}]})) }),
        )
        .fallback(axum::routing::post(|| async {
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
                 data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
                 data: [DONE]\n\n",
            )
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (
        url,
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
    )
}

/// Item 4: a stream of another API than `target.api` is a failure (`malformed`, naming
/// target.api), never a success with no tokens, and a run of nothing else ends as a dead
/// target's does (exit 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_apis_stream_is_never_a_success() {
    let (url, srv) = openai_chat_everywhere().await;
    for api in ["anthropic-messages", "openai-responses", "tgi-generate"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("c.toml"),
            format!(
                "name = \"wrong-api\"\n[target]\nurl = \"{url}\"\napi = \"{api}\"\nmodel = \"m\"\n[load]\nkind = \"open\"\nrate = 50\nrequests = 30\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n"
            ),
        )
        .unwrap();
        let d = dir.path().to_owned();
        let out = tokio::task::spawn_blocking(move || goodput(&["run", "c.toml", "-q"], &d))
            .await
            .unwrap();
        let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout))
            + &common::unwrapped(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(3), "{api}: {text}");
        assert!(
            text.contains("malformed") && text.contains("target.api"),
            "{api}: {text}"
        );
        assert!(!text.contains("panicked"), "{api}: {text}");
    }
    // The right API on the same server succeeds.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"right-api\"\n[target]\nurl = \"{url}\"\nmodel = \"m\"\n[load]\nkind = \"open\"\nrate = 50\nrequests = 10\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n"
        ),
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    srv.abort();
}

/// Item 2: a full disk (a 64 KiB tmpfs in a mount namespace of the test's own) stops the run
/// as soon as a record cannot be written: long before its 30-second schedule ends, every
/// record written before kept whole, the error naming the file and the cause, and `report`
/// of the bundle naming it too.
#[test]
fn a_full_disk_stops_the_run_at_once_and_keeps_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    // The embedded simulator; answers kept as text fill the disk within seconds.
    std::fs::write(
        dir.path().join("c.toml"),
        "name = \"full\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 16 }\n[load]\nkind = \"open\"\nrate = 40\nrequests = 1200\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"consistency\"\nkeep_text = true\nprobes = 0\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_goodput");
    let script = format!(
        "set -u; mount -t tmpfs -o size=64k tmpfs disk || exit 99; \
         {bin} run c.toml -q --out disk/runs > run.out 2> run.err; echo $? > code; date +%s.%N > exited; \
         b=$(ls -d disk/runs/full/*); wc -l < $b/requests.jsonl > lines; tail -c 1 $b/requests.jsonl | od -c > last; \
         cp $b/command.json command.json; \
         {bin} report $b > report.out 2> report.err; echo $? > report.code; \
         {bin} export $b --format jsonl --out export > /dev/null 2>&1; echo $? > export.code"
    );
    std::fs::create_dir(dir.path().join("disk")).unwrap();
    let started = std::time::Instant::now();
    let out = common::output_within_memory(
        Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .current_dir(dir.path()),
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    assert_ne!(
        out.status.code(),
        Some(99),
        "this test mounts a tmpfs in its own mount namespace, which needs root: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = common::unwrapped(&read("run.err"));
    assert_eq!(read("code").trim(), "1", "{err}");
    assert!(
        err.contains("requests.jsonl could not be written")
            && err.contains("No space left on device")
            && err.contains("stopped at once"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The run, a report and an export, against a schedule of 30 s.
    let took = started.elapsed().as_secs_f64();
    assert!(took < 15.0, "it went on for {took:.1} s");
    // Stopped within a second of the first write that failed: the load, its requests in
    // flight and the bundle's last words; the process's own exit follows.
    let command: serde_json::Value = serde_json::from_str(&read("command.json")).unwrap();
    let utc = |k: &str| -> f64 {
        let t: jiff::Timestamp = command[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k}: {command}"))
            .parse()
            .unwrap();
        t.as_millisecond() as f64 / 1e3
    };
    let (failed, stopped) = (utc("write_failed_utc"), utc("aborted_utc"));
    let exited: f64 = read("exited").trim().parse().unwrap();
    eprintln!(
        "stopped {:.3} s and exited {:.3} s after the first failed write",
        stopped - failed,
        exited - failed
    );
    assert!(
        stopped - failed <= 1.0,
        "stopped {:.2} s after",
        stopped - failed
    );
    assert!(
        exited - failed <= 1.0,
        "exited {:.2} s after",
        exited - failed
    );
    let lines: u64 = read("lines").trim().parse().unwrap();
    assert!(lines > 10, "{lines} records kept");
    assert!(read("last").contains("\\n"), "the last line is whole");
    let report = common::unwrapped(&read("report.out")) + &read("report.err");
    assert_eq!(read("report.code").trim(), "0", "{report}");
    assert!(
        report.contains("could not be written") && report.contains("No space left"),
        "{report}"
    );
}

/// Item 11: a traffic class's model is checked against `/v1/models` before any load, as the
/// target's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_model_the_server_does_not_list_stops_the_run_before_any_load() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"class-model\"\n[target]\nurl = \"{}\"\n[load]\nkind = \"open\"\nrate = 20\nrequests = 20\n[[class]]\nname = \"a\"\nshare = 0.5\n[[class]]\nname = \"b\"\nshare = 0.5\nmodel = \"no-such-adapter\"\n",
        server.base_url()
    ));
    let Err(err) = common::try_run_in(c, dir.path()).await else {
        panic!("a class model the server does not list was not refused");
    };
    let err = err.to_string();
    assert!(
        err.contains("class[1].model = \"no-such-adapter\"")
            && err.contains("class \"b\"")
            && err.contains("/v1/models lists"),
        "{err}"
    );
    assert!(server.ground_truth().is_empty(), "no request was sent");
    common::assert_own_memory_within_bound();
}

/// Item 13: a plan that ends before its first send says so, not "first error: .".
#[test]
fn a_plan_too_short_to_send_anything_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "name = \"short\"\n[load]\nkind = \"open\"\nrate = 1\nduration = 1e-9\n[warmup]\nrequests = 0\n[quality]\nmode = \"none\"\n",
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q"], dir.path());
    let err = common::unwrapped(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no request was sent"), "{err}");
    assert!(!err.contains("first error: ."), "{err}");
}

/// Item 8: drain ends with the last steady session: a drain session sends no turn after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_sessions_send_no_turn_after_the_last_steady_session_ends() {
    use goodput::plan::Phase;
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "name = \"session-drain\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[workload.sessions]\nturns = {{ dist = \"fixed\", value = 10 }}\nthink_ms = {{ dist = \"fixed\", value = 100 }}\n[load]\nkind = \"open\"\nrate = 4\nrequests = 2\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
        server.base_url()
    ));
    let r = run_in(c, dir.path()).await;
    let steady_end = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Steady)
        .filter_map(|x| x.end_us)
        .max()
        .unwrap();
    let drain: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Drain)
        .collect();
    assert!(
        !drain.is_empty(),
        "sessions arrived while the steady ones ran"
    );
    let late: Vec<_> = drain
        .iter()
        .filter(|x| x.sent_us.is_some_and(|s| s > steady_end + 50_000))
        .map(|x| (x.session, x.turn, x.sent_us))
        .collect();
    assert!(
        late.is_empty(),
        "turns sent after the last steady session ended at {steady_end} µs: {late:?}"
    );
    let last = r.records.iter().filter_map(|x| x.end_us).max().unwrap();
    assert!(
        last < steady_end + 2_000_000,
        "the run went on {} ms after its last steady session",
        (last - steady_end) / 1000
    );
    common::assert_own_memory_within_bound();
}

/// Item 7: every bundle file goodput reads whole is capped, and one it cannot read is an error
/// naming it, never taken as empty (exit 0) or read without end (a symlink to /dev/zero).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_file_that_cannot_be_read_is_named_never_read_without_end() {
    let dir = tempfile::tempdir().unwrap();
    let r = small_run(dir.path()).await;
    let b = r.bundle.dir.clone();
    let cases: [(&str, &str, &str, Option<&str>); 5] = [
        ("command.json", "report", "a device, not a file", None),
        ("requests.jsonl", "report", "a device, not a file", None),
        ("environment.json", "report", "not JSON", Some("{ garbage")),
        ("metrics.jsonl", "report", "a device, not a file", None),
        ("summary.json", "audit", "a device, not a file", None),
    ];
    for (file, command, says, text) in cases {
        let copy = dir.path().join(format!("copy-{file}"));
        std::fs::create_dir_all(&copy).unwrap();
        for e in std::fs::read_dir(&b).unwrap().flatten() {
            if e.path().is_file() {
                std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
            }
        }
        let target = copy.join(file);
        let _ = std::fs::remove_file(&target);
        match text {
            Some(t) => std::fs::write(&target, t).unwrap(),
            None => std::os::unix::fs::symlink("/dev/zero", &target).unwrap(),
        }
        let d = dir.path().to_owned();
        let copy_s = copy.to_str().unwrap().to_owned();
        let out = tokio::task::spawn_blocking(move || goodput(&[command, &copy_s], &d))
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file}: {err}");
        assert!(err.contains(file) && err.contains(says), "{file}: {err}");
        assert!(!err.contains("panicked"), "{file}: {err}");
    }
    common::assert_own_memory_within_bound();
}

/// Item 6: a long contract value is shown shortened in the report's note (the contract in the
/// bundle keeps it whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_extra_body_value_is_not_printed_whole() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let long = "z".repeat(5000);
    let r = run_in(
        parse(&format!(
            "name = \"long\"\n[target]\nurl = \"{}\"\n[target.request]\nextra_body = {{ note = \"{long}\" }}\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nkind = \"open\"\nrate = 50\nrequests = 5\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
            server.base_url()
        )),
        dir.path(),
    )
    .await;
    let text = common::unwrapped(&goodput::report::document(&r.summary).terminal());
    assert!(text.contains("extra body fields note = \"zzz"), "{text}");
    assert!(text.contains("bytes)") && !text.contains(&long), "{text}");
    let kept = std::fs::read_to_string(r.bundle.path("contract.toml")).unwrap();
    assert!(kept.contains(&long), "the bundle's contract keeps it whole");
    common::assert_own_memory_within_bound();
}

/// Item 13: a `/v1/models` that refuses the request (431: headers too large) is named as
/// such, not as a server that "lists no model"; a header read from the environment is bounded
/// like a written one, its size said and its value never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_model_list_is_named_and_environment_headers_are_bounded() {
    let app = axum::Router::new().route(
        "/v1/models",
        axum::routing::get(|| async { axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let srv = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        format!("name = \"431\"\n[target]\nurl = \"{url}\"\n[load]\nkind = \"open\"\nrate = 1\nrequests = 2\n[target.request]\nheaders = {{ x-big = {{ env = \"GOODPUT_HOSTILE_BIG\" }} }}\n"),
    )
    .unwrap();
    let d = dir.path().to_owned();
    let run = move |big: String| {
        common::output_within_memory(
            Command::new(env!("CARGO_BIN_EXE_goodput"))
                .args(["run", "c.toml", "-q"])
                .env("GOODPUT_HOSTILE_BIG", big)
                .current_dir(&d),
        )
    };
    let (small, big) =
        tokio::task::spawn_blocking(move || (run("v".into()), run("w".repeat(100 << 10))))
            .await
            .unwrap();
    srv.abort();
    let err = common::unwrapped(&String::from_utf8_lossy(&small.stderr));
    assert_eq!(small.status.code(), Some(1), "{err}");
    assert!(
        err.contains("answered HTTP 431") && err.contains("request headers too large"),
        "{err}"
    );
    assert!(!err.contains("lists no model"), "{err}");
    let err = common::unwrapped(&String::from_utf8_lossy(&big.stderr));
    assert_eq!(big.status.code(), Some(1), "{err}");
    assert!(
        err.contains("GOODPUT_HOSTILE_BIG") && err.contains("100 KiB long; at most 8 KiB"),
        "{err}"
    );
    assert!(!err.contains("www"), "the value is never shown: {err}");
}

/// Item 3: a telemetry page of 12 MB scraped every 50 ms (the issue's case wrote 828 MB in 8 s
/// and took 1.7 GB to read back): the file stays within its budget, thinned once past half of
/// it, the report says so, and neither the run nor `report` takes more than 256 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_scraped_page_is_thinned_within_the_files_budget() {
    let label = "x".repeat(6000);
    let mut page = String::from("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 300\n");
    for i in 0..2000 {
        page.push_str(&format!("big_series{{i=\"{i}\",pad=\"{label}\"}} {i}\n"));
    }
    assert!(page.len() > 12_000_000);
    let page = std::sync::Arc::new(page);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let page = page.clone();
            async move { page.as_str().to_owned() }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let srv = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"huge-page\"\n[target.telemetry]\nurls = [\"{url}\"]\ninterval = \"50ms\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[load]\nkind = \"open\"\nrate = 10\nrequests = 80\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n"
        ),
    )
    .unwrap();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || goodput(&["run", "c.toml", "--out", "runs"], &d))
        .await
        .unwrap();
    srv.abort();
    let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bundle = std::fs::read_dir(dir.path().join("runs/huge-page"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let size = std::fs::metadata(bundle.join("telemetry.jsonl"))
        .unwrap()
        .len();
    // Issue #70: the edge scrapes (before, the steady window's two, after) count toward the
    // budget too; the file was 118 MiB while the run said it passed half of 64.
    assert!(
        size <= goodput::env::prom::FILE_BUDGET,
        "telemetry.jsonl is {} MiB",
        size >> 20
    );
    assert!(
        text.contains(
            "telemetry.jsonl reached its 64 MiB budget; its scrapes during the load stopped"
        ),
        "{text}"
    );
    let d = dir.path().to_owned();
    let b = bundle.to_str().unwrap().to_owned();
    let report = tokio::task::spawn_blocking(move || goodput(&["report", &b], &d))
        .await
        .unwrap();
    assert!(report.status.success());
    assert!(
        common::unwrapped(&String::from_utf8_lossy(&report.stdout))
            .contains("its scrapes during the load stopped before")
    );
}

/// Item 6: an `extra_body` value at its 256 KiB limit, carried by 32 requests at a time, stays
/// within the memory bound (a body per request in flight, one copy each).
#[test]
fn an_extra_body_at_its_limit_over_many_requests_in_flight_is_bounded_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let long = "z".repeat((256 << 10) - 64);
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"wide\"\n[target.request]\nextra_body = {{ note = \"{long}\" }}\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nkind = \"closed\"\nconcurrency = 32\nrequests = 400\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n"
        ),
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q", "--out", "runs"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 7: `target.tls.ca_file` through a symlink to a device is refused before the run,
/// naming the key, never read without end.
#[test]
fn a_ca_file_that_is_a_device_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("ca.pem")).unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "name = \"ca\"\n[target]\nurl = \"https://127.0.0.1:9\"\n[target.tls]\nca_file = \"ca.pem\"\n[load]\nkind = \"open\"\nrate = 1\nrequests = 2\n",
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q"], dir.path());
    let err = common::unwrapped(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("target.tls.ca_file") && err.contains("a device, not a file"),
        "{err}"
    );
}

/// Issue #70, item 4: a full disk lost finished requests (the server completed 280, the bundle
/// held 265) and called the ones lost "not sent". Every request the server received is now in
/// the bundle or in the file the records after the failure were kept in, none is lost, and
/// "not sent" is what was never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_keeps_every_finished_request_and_not_sent_is_what_was_not_sent() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"full-truth\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 16 }}\n[load]\nkind = \"open\"\nrate = 20\nrequests = 600\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"consistency\"\nkeep_text = true\nprobes = 0\n",
            server.base_url()
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_goodput");
    let script = format!(
        "set -u; mount -t tmpfs -o size=64k tmpfs disk || exit 99; \
         {bin} run c.toml -q --out disk/runs > run.out 2> run.err; echo $? > code; \
         b=$(ls -d disk/runs/full-truth/*); basename $b > run_id; cp $b/requests.jsonl requests.jsonl; \
         cp $b/command.json command.json; \
         {bin} report $b --format json > report.json 2> report.err; echo $? > report.code"
    );
    std::fs::create_dir(dir.path().join("disk")).unwrap();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .current_dir(&d)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    assert_ne!(out.status.code(), Some(99), "needs root to mount a tmpfs");
    let err = common::unwrapped(&read("run.err"));
    assert_eq!(read("code").trim(), "1", "{err}");
    assert!(err.contains("could not be written"), "{err}");
    let command: serde_json::Value = serde_json::from_str(&read("command.json")).unwrap();
    let lost: goodput::record::writer::Lost =
        serde_json::from_value(command["lost_records"].clone()).unwrap_or_default();
    eprintln!("{err}\n{lost:?}");
    // What the run kept: the bundle's records, and those kept apart after the failure.
    let mut kept: Vec<goodput::record::Record> = read("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    if let Some(at) = &lost.kept_at {
        kept.extend(
            std::fs::read_to_string(at)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<goodput::record::Record>(l).unwrap()),
        );
        let _ = std::fs::remove_file(at);
    }
    assert_eq!(lost.lost(), 0, "{lost:?}");
    // Every request the server received (its ground truth) is in what the run kept.
    let run_id = read("run_id").trim().to_owned();
    let ids: std::collections::HashSet<&str> = kept.iter().map(|r| r.request_id.as_str()).collect();
    let seen: Vec<String> = server
        .ground_truth()
        .into_iter()
        .filter_map(|g| g.request_id)
        .filter(|id| id.starts_with(&run_id))
        .collect();
    assert!(seen.len() > 20, "the server saw {}", seen.len());
    let missing: Vec<&String> = seen
        .iter()
        .filter(|id| !ids.contains(id.as_str()))
        .collect();
    assert!(missing.is_empty(), "received, not kept: {missing:?}");
    // The report (which reads the kept file too) says not sent = planned − sent.
    let report: serde_json::Value = serde_json::from_str(&read("report.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", read("report.err")));
    let steady = &report["phases"]["steady"];
    let sent = kept
        .iter()
        .filter(|r| r.phase == goodput::plan::Phase::Steady)
        .count() as u64;
    assert_eq!(steady["not_sent"], 600 - sent, "{steady}");
}
