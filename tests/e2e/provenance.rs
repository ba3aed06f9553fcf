//! Provenance: what the bundle keeps about the target (probe answers, resolved facts, the
//! server's own metrics) and `goodput audit` grading bundles from them.

use crate::common;

use std::path::Path;

use axum::routing::post;
use common::{parse, run_in, sim};
use goodput::sim::SimConfig;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn queueing_sim() -> SimConfig {
    SimConfig {
        max_batch: 4,
        decode_base_ms: 5.0,
        decode_per_seq_ms: 0.0,
        prefill_tokens_per_s: 100_000.0,
        ..SimConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_keeps_probes_facts_and_server_metrics_that_match_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(queueing_sim()).await;
    let c = parse(&format!(
        "name = \"prov\"\n[target]\nurl = \"{}\"\n[target.declared]\nengine = \"goodput-sim\"\nmodel_revision = \"r1\"\nhardware = \"2 vCPU\"\nprecision = \"none (simulated)\"\n\
         [workload]\nseed = 3\ninput_tokens = {{ dist = \"fixed\", value = 40 }}\noutput_tokens = {{ dist = \"fixed\", value = 10 }}\n\
         [load]\nmodel = \"open\"\nrate = 55\nrequests = 220\n[warmup]\nrequests = 0\n[slo]\nttft_ms = 1000\n\
         [measurement]\nserver_metrics_interval = \"250ms\"\n[quality]\nmode = \"consistency\"\n",
        server.base_url()
    ));
    let r = run_in(c, dir.path()).await;
    let env = json(&r.bundle.path("environment.json"));
    // Probe answers verbatim, with the endpoint that gave them; absent ones say why.
    let probes = env["probes"].as_array().unwrap();
    let by = |e: &str| probes.iter().find(|p| p["endpoint"] == e).unwrap();
    assert_eq!(by("/version")["answer"]["engine"], "goodput-sim");
    assert_eq!(
        by("/v1/models")["answer"]["data"][0]["id"],
        server.config().model
    );
    assert_eq!(by("/props")["absent"], "HTTP 404");
    // Facts: discovered ones say where from; declared ones that agree are not flagged.
    assert_eq!(env["facts"]["facts"]["engine"]["source"], "GET /version");
    assert_eq!(env["facts"]["facts"]["hardware"]["source"], "declared");
    assert_eq!(env["facts"]["disagreements"].as_array().unwrap().len(), 0);
    assert_eq!(env["absent"].as_array().unwrap().len(), 0);
    assert_eq!(
        r.summary.grade.verdict, "comparable",
        "{:?}",
        r.summary.grade
    );

    // Server metrics: scraped before, during and after, one line each as taken.
    let scrapes = goodput::env::prom::read(&r.bundle.path("metrics.jsonl")).unwrap();
    assert_eq!(scrapes.first().unwrap().when, "before");
    assert_eq!(scrapes.last().unwrap().when, "after");
    assert!(scrapes.iter().filter(|s| s.when == "during").count() >= 8);
    let sv = r.summary.server.as_ref().expect("server-side figures");
    assert_eq!(sv.engine, "vllm");
    let running = sv.running.as_ref().unwrap();
    assert!(running.max <= 4.0 && running.mean > 0.5, "{running:?}");
    // The server-reported queue time agrees with the simulator's ground truth.
    let gt = server.ground_truth();
    let waits: Vec<f64> = gt
        .iter()
        .filter_map(|g| Some((g.admitted_us? - g.arrival_us) as f64 / 1000.0))
        .collect();
    let truth = waits.iter().sum::<f64>() / waits.len() as f64;
    let q = sv.queue_time.as_ref().unwrap();
    assert!(
        (q.mean_ms - truth).abs() <= (0.3 * truth).max(2.0),
        "server queue time {} ms vs ground truth {truth} ms",
        q.mean_ms
    );
    // …and survives recomputation from the bundle alone.
    let again = goodput::bundle::Bundle::load(&r.bundle.dir)
        .unwrap()
        .summary;
    assert_eq!(again.server, r.summary.server);

    // Audit: complete → comparable.
    let a = goodput::audit::audit(&r.bundle.dir).unwrap();
    assert_eq!(a.verdict, "comparable", "{:?}", a.missing);
    // A contract edited after the run no longer matches its summary: reported as inconsistent.
    let path = r.bundle.path("contract.toml");
    let resolved = std::fs::read_to_string(&path).unwrap();
    let without = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with("model_revision") && !l.starts_with("precision"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    // (Declared facts are in no fingerprint, the facts the run resolved are in environment.json:
    // the workload's seed is what is edited here.)
    let edited: String = resolved
        .lines()
        .map(|l| {
            if l.starts_with("seed = ") {
                "seed = 12345\n".to_owned()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(edited, resolved);
    std::fs::write(&path, edited).unwrap();
    let a = goodput::audit::audit(&r.bundle.dir).unwrap();
    assert!(
        a.missing
            .iter()
            .any(|m| m.starts_with("inconsistent: summary.json's fingerprints")),
        "{:?}",
        a.missing
    );

    // The same contract run without two declared facts the server cannot state: directional,
    // listing exactly those two. (Hardware would not do: a loopback target's is this host's.)
    let c = goodput::contract::parse(&without(&resolved), Path::new("cut.toml")).unwrap();
    let r = run_in(c, dir.path()).await;
    let a = goodput::audit::audit(&r.bundle.dir).unwrap();
    assert_eq!(a.verdict, "directional");
    let expected: Vec<String> = ["model revision", "precision"]
        .iter()
        .map(|f| {
            format!("{f} unknown: the server did not say and [target.declared] does not state it")
        })
        .collect();
    assert_eq!(a.missing, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_no_metadata_yields_a_complete_bundle_marked_absent() {
    async fn chat() -> ([(&'static str, &'static str); 1], &'static str) {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi there\"}}]}\n\n\
         data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
         data: [DONE]\n\n";
        ([("content-type", "text/event-stream")], body)
    }
    let (url, srv) = common::mock_openai(post(chat), "bare").await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[target]\nurl = \"{url}\"\n[load]\nmodel = \"open\"\nrate = 50\nrequests = 10\n[warmup]\nrequests = 0\n[slo]\nttft_ms = 100\n"
    ));
    let r = run_in(c, dir.path()).await;
    common::assert_bundle_complete(&r.bundle, &[]);
    assert!(!r.bundle.path("metrics.jsonl").exists());
    let env = json(&r.bundle.path("environment.json"));
    assert_eq!(
        env["absent"],
        serde_json::json!(["engine", "engine revision", "model revision", "precision"])
    );
    assert_eq!(
        env["server_metrics"]["absent"],
        format!("{url}/metrics answered HTTP 404")
    );
    for p in env["probes"].as_array().unwrap() {
        if p["endpoint"] != "/v1/models" && p["endpoint"] != "this host" {
            assert!(p["absent"].is_string(), "{p}");
        }
    }
    assert!(r.records.iter().all(|x| x.is_ok()), "{:?}", r.records[0]);
    assert!(r.summary.server.is_none());
    let a = goodput::audit::audit(&r.bundle.dir).unwrap();
    assert_eq!(a.verdict, "directional");
    assert_eq!(a.missing.len(), 5, "{:?}", a.missing);
    assert!(a.missing.iter().any(|m| m.starts_with("no quality check")));
    assert_eq!(
        env["facts"]["facts"]["hardware"]["source"], "loopback this host",
        "a loopback target runs on this host"
    );
    srv.abort();
}

#[test]
fn audit_through_the_binary_reads_other_tools_and_refuses_garbage() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit");
    let run = |p: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .arg("audit")
            .arg(p)
            .output()
            .unwrap()
    };
    let out = run(&fixtures.join("vllm-bench-serve.json"));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("vLLM bench serve result: DIRECTIONAL"),
        "{text}"
    );
    assert!(text.contains("- missing: warm-up not stated"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("results.json");
    std::fs::write(&junk, b"\x00\x01garbage").unwrap();
    let out = run(&junk);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("results.json") && err.contains("unrecognised format"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// Issue #45, bad input: a vLLM whose `/version` answers garbage. The run measures all it
/// meant to (nothing lost), the engine is still vLLM by its `/v1/models`, and the revision left
/// unknown says where it should have come from and what came instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vllm_whose_version_is_garbage_is_named_not_guessed() {
    async fn chat() -> ([(&'static str, &'static str); 1], &'static str) {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi there\"}}]}\n\n\
         data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
         data: [DONE]\n\n";
        ([("content-type", "text/event-stream")], body)
    }
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .route(
            "/v1/models",
            axum::routing::get(|| async {
                axum::Json(serde_json::json!({"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 2048}]}))
            }),
        )
        .route(
            "/version",
            axum::routing::get(|| async { "Internal garbage \u{1}\u{2}" }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let srv = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&format!(
        "[target]\nurl = \"{url}\"\n[load]\nkind = \"closed\"\nconcurrency = 2\nrequests = 6\n[warmup]\nrequests = 0\n[slo]\nttft_ms = 100\n"
    ));
    let r = run_in(c, dir.path()).await;
    common::assert_bundle_complete(&r.bundle, &[]);
    assert!(r.records.iter().all(|x| x.is_ok()), "{:?}", r.records[0]);
    let t = r.summary.target.as_ref().unwrap();
    assert_eq!(
        (t.engine.as_deref(), t.engine_revision.as_deref()),
        (Some("vllm"), None)
    );
    let missing = r
        .summary
        .grade
        .missing
        .iter()
        .find(|m| m.starts_with("engine revision unknown"))
        .expect("the revision is missing");
    assert!(
        missing.contains("GET /version answered `Internal garbage"),
        "{missing}"
    );
    srv.abort();
}

/// Issue #45, bad input: a contract that launches vLLM through `scripts/vllm.sh serve` where
/// vLLM is not installed stops before any load with the script's own words, kept in the
/// bundle's server log.
#[test]
fn launching_a_vllm_that_is_not_installed_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/vllm.sh");
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "name = \"vllm-launch\"\n[target]\nurl = \"http://127.0.0.1:{{port}}\"\nmodel = \"gemma-3-270m\"\n[cold_start]\nlaunch = [\"{script}\", \"serve\", \"{{port}}\"]\nready_timeout = \"60s\"\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 2\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", "c.toml", "-q"])
        .env("GOODPUT_VLLM_DIR", dir.path().join("no-vllm-here"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the launched server exited") && err.contains("before it was ready"),
        "{err}"
    );
    assert!(
        err.contains("vLLM is not installed in") && err.contains("run scripts/vllm.sh install"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
