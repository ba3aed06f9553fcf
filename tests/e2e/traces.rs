//! Issue #50: the engine's spans joined to the client's records through trace context, and
//! each latency split into the client's, the queue's, prefill's and decode's parts. The
//! simulator's spans come from its ground truth, so the join and the parts are checked
//! exactly; the timing tests among them run alone (`.config/nextest.toml`).

use std::time::Duration;

use crate::common;

use common::{parse, run_in};
use goodput::otlp::export::Protocol;
use goodput::otlp::receiver::Receiver;
use goodput::otlp::{SpanRecord, TraceIds, proto};
use goodput::sim::{SimConfig, SimServer};
use prost::Message;

/// A port free a moment ago, for a receiver the simulator must know before the run binds it.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spans_of(r: &goodput::run::RunResult) -> Vec<SpanRecord> {
    goodput::otlp::read(&r.bundle.path(goodput::otlp::SPANS)).unwrap()
}

fn environment(r: &goodput::run::RunResult) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(r.bundle.path("environment.json")).unwrap())
        .unwrap()
}

/// An open-loop contract against `url`, receiving spans on `port`.
fn contract(url: &str, port: u16, load: &str) -> goodput::contract::Contract {
    parse(&format!(
        r#"name = "traces"
[target]
url = "{url}"
[workload]
seed = 4
input_tokens = {{ dist = "uniform", min = 50, max = 300 }}
output_tokens = {{ dist = "uniform", min = 8, max = 24 }}
[load]
kind = "open"
{load}
[warmup]
requests = 5
[slo]
ttft_ms = 2000
[measurement]
server_metrics_interval = 0
stop_when_decided = false
[measurement.traces]
listen = "127.0.0.1:{port}"
wait = "20s"
"#
    ))
}

/// Every steady request's record meets its server span, each part is the simulator's ground
/// truth, the parts add up to the client's latency, and the receiver costs the client's TTFT
/// nothing measurable (the same run without it, beside it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_steady_request_joins_its_span_and_each_part_is_ground_truth() {
    let port = free_port();
    let cfg = SimConfig {
        prefill_tokens_per_s: 20_000.0,
        decode_base_ms: 6.0,
        ..SimConfig::default()
    };
    let endpoint = format!("http://127.0.0.1:{port}/v1/traces");
    let sim = SimServer::start_traced(
        cfg.clone(),
        ([127, 0, 0, 1], 0).into(),
        None,
        Some((endpoint, Protocol::HttpProtobuf)),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        contract(&sim.base_url(), port, "rate = 20\nrequests = 120"),
        dir.path(),
    )
    .await;
    let sp = r.summary.steady.spans.clone().expect("a spans summary");
    let steady_ok = r
        .records
        .iter()
        .filter(|x| x.phase == goodput::plan::Phase::Steady && x.is_ok())
        .count() as u64;
    assert_eq!(
        (sp.requests, sp.joined, sp.unreported),
        (steady_ok, steady_ok, 0)
    );
    assert_eq!(sp.mismatched, 0, "{:?}", sp.mismatches);
    assert_eq!(
        environment(&r)["traces"]["receiver"]["protocols"],
        serde_json::json!(["http/protobuf"])
    );
    let spans = spans_of(&r);
    let gt = common::truth_by_id(&sim);
    let mut client_part = Vec::new();
    for x in r.records.iter().filter(|x| x.is_ok()) {
        let id = x
            .trace_id
            .as_deref()
            .expect("every request carries a trace id");
        let span = spans.iter().find(|s| s.trace_id == id).expect("its span");
        let g = &gt[&x.request_id];
        // The span continues the client's trace: its parent is the client's span.
        assert_eq!(span.parent_span_id, goodput::otlp::client_span_id(id));
        let t = goodput::otlp::ServerTiming::of(span).unwrap();
        let us = |s: Option<f64>| (s.unwrap() * 1e6).round() as u64;
        assert_eq!(us(t.queue_s), g.queue_us.unwrap());
        assert_eq!(us(t.ttft_s), g.first_token_us.unwrap() - g.arrival_us);
        assert_eq!(us(t.e2e_s), g.end_us - g.arrival_us);
        let sent = x.sent_us.unwrap() as f64;
        client_part.push(
            (x.first_token_us.unwrap() as f64 - sent) / 1000.0 - us(t.ttft_s) as f64 / 1000.0,
        );
    }
    // The client/network part is the client's view less the server's: its TTFT error against
    // ground truth, held to the timing tests' bounds.
    common::assert_timing_within(
        "TTFT client/network part",
        client_part.iter().map(|v| v.abs()).collect(),
    );
    // Each tail's parts add up to its requests' mean TTFT from the intended send.
    for t in sp.ttft.iter().chain(&sp.e2e) {
        assert!(t.parts.total() >= t.value_ms - 0.01, "{t:?}");
    }
    // The truth of both runs, read once after each (the second run's requests are new).
    let ttft_error = |r: &goodput::run::RunResult| {
        let gt = common::truth_by_id(&sim);
        let mut v: Vec<f64> = r
            .records
            .iter()
            .filter(|x| x.is_ok())
            .map(|x| {
                let g = &gt[&x.request_id];
                let client = (x.first_token_us.unwrap() - x.sent_us.unwrap()) as f64 / 1000.0;
                (client - (g.first_token_us.unwrap() - g.arrival_us) as f64 / 1000.0).abs()
            })
            .collect();
        v.sort_by(f64::total_cmp);
        goodput::analyze::percentile_sorted(&v, 50.0).unwrap()
    };
    let with = ttft_error(&r);
    let mut plain = contract(&sim.base_url(), port, "rate = 20\nrequests = 120");
    plain.measurement.traces = None;
    let without = run_in(plain, dir.path()).await;
    let without = ttft_error(&without);
    eprintln!(
        "median TTFT error against ground truth: {with:.3} ms receiving spans, {without:.3} ms not"
    );
    assert!(
        with <= without + 0.25,
        "receiving spans moved the median TTFT error from {without:.3} to {with:.3} ms"
    );
}

/// A run the server's queue makes slow reports queue as its TTFT tail's largest part; one
/// whose requests are held up on the way to the server (a proxy delaying each request's
/// upload) reports the client/network part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_names_the_queue_when_the_server_queues_and_the_network_when_it_is_slow() {
    // Embedded simulator (its spans over gRPC, as vLLM's default): four slots, offered three
    // times what they serve, so requests wait in the queue.
    let dir = tempfile::tempdir().unwrap();
    let c = parse(
        r#"name = "queued"
[target.simulator]
max_batch = 2
decode_base_ms = 15.0
[workload]
seed = 2
input_tokens = { dist = "fixed", value = 64 }
output_tokens = { dist = "fixed", value = 16 }
[load]
kind = "open"
arrival = "constant"
rate = 12
requests = 40
[warmup]
requests = 0
[slo]
ttft_ms = 100000
[measurement]
server_metrics_interval = 0
stop_when_decided = false
max_dispatch_lag_ms = 1000
[measurement.traces]
listen = "127.0.0.1:0"
"#,
    );
    let r = run_in(c, dir.path()).await;
    let sp = r.summary.steady.spans.clone().unwrap();
    assert_eq!((sp.joined, sp.unreported), (sp.requests, 0));
    assert_eq!(
        environment(&r)["traces"]["receiver"]["protocols"],
        serde_json::json!(["grpc"])
    );
    let p99 = sp.ttft.last().unwrap();
    assert_eq!(p99.dominant, "queue", "{p99:?}");
    assert!(p99.parts.queue_ms > 0.5 * p99.value_ms, "{p99:?}");
    let text = goodput::report::document(&r.summary).terminal();
    assert!(text.contains("Where the time went: TTFT p99"), "{text}");

    // The same simulator behind a proxy that holds each request's bytes 80 ms before passing
    // them on: the server sees nothing of that wait, the client all of it.
    let port = free_port();
    let sim = SimServer::start_traced(
        SimConfig {
            prefill_tokens_per_s: 50_000.0,
            ..SimConfig::default()
        },
        ([127, 0, 0, 1], 0).into(),
        None,
        Some((format!("http://127.0.0.1:{port}"), Protocol::Grpc)),
    )
    .await
    .unwrap();
    let proxy = delaying_proxy(sim.addr(), Duration::from_millis(80)).await;
    let r = run_in(
        contract(&format!("http://{proxy}"), port, "rate = 4\nrequests = 20"),
        dir.path(),
    )
    .await;
    let sp = r.summary.steady.spans.clone().unwrap();
    assert_eq!(sp.joined, sp.requests);
    let p50 = &sp.ttft[0];
    assert_eq!(p50.dominant, "client/network", "{p50:?}");
    assert!((75.0..200.0).contains(&p50.parts.client_ms), "{p50:?}");
}

/// A TCP proxy to `upstream` that holds each chunk the client sends for `delay` before
/// passing it on (answers pass at once); its address.
async fn delaying_proxy(upstream: std::net::SocketAddr, delay: Duration) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                continue;
            };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tokio::time::sleep(delay).await;
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    addr
}

/// A run whose engine sends no spans says so and why, after its bounded wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_sends_no_spans_is_named_in_the_report() {
    let sim = common::sim(SimConfig::instant()).await;
    let port = free_port();
    let mut c = contract(&sim.base_url(), port, "rate = 50\nrequests = 20");
    c.measurement.traces.as_mut().unwrap().wait = goodput::contract::Seconds(0.5);
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(c, dir.path()).await;
    let sp = r.summary.steady.spans.clone().unwrap();
    assert_eq!((sp.joined, sp.unreported), (0, sp.requests));
    let why = sp.none_because.unwrap();
    assert!(why.starts_with("no span came to 127.0.0.1:"), "{why}");
    let text = goodput::report::document(&r.summary).terminal();
    assert!(text.contains("Where the time went: unknown"), "{text}");
    // The same bundle loaded gives the same figures.
    let again = goodput::bundle::Bundle::load(&r.bundle.dir).unwrap();
    assert_eq!(again.summary.steady.spans, r.summary.steady.spans);
}

/// The receiver refuses what is not an uncompressed OTLP export, with a status saying why,
/// keeps only the run's own spans, up to its bound, and a port in use stops the run before
/// anything is sent, naming the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_otlp_payloads_are_refused_and_counted_and_memory_stays_bounded() {
    let started = std::time::Instant::now();
    let rx = Receiver::start(([127, 0, 0, 1], 0).into(), started, 3)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ids = TraceIds::new("run-x");
    let file = dir.path().join("spans.jsonl");
    rx.attach("run-x", &file).unwrap();
    let url = format!("http://{}/v1/traces", rx.addr());
    goodput::client::install_tls_provider();
    let http = reqwest::Client::new();
    let post = |body: Vec<u8>, kind: &'static str| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http
                .post(url)
                .header("content-type", kind)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, why) = post(b"\xff\xff\xff garbage".to_vec(), "application/x-protobuf").await;
    assert_eq!(status, 400, "{why}");
    assert!(
        why.contains("not an OTLP ExportTraceServiceRequest"),
        "{why}"
    );
    let (status, _) = post(vec![0u8; 9 << 20], "application/x-protobuf").await;
    assert_eq!(status, 413);
    let (status, why) = post(b"{}".to_vec(), "application/json").await;
    assert_eq!((status, why.contains("http/protobuf")), (415, true));
    // Five spans of the run's traces (the bound is three) and two of another's, over gRPC.
    let span = |trace: String| proto::Span {
        trace_id: hex::decode(trace).unwrap(),
        span_id: vec![1; 8],
        name: "llm_request".into(),
        attributes: vec![proto::kv(
            goodput::otlp::ATTR_E2E,
            proto::Value::Double(0.1),
        )],
        ..Default::default()
    };
    let mut spans: Vec<proto::Span> = (0..5).map(|i| span(ids.trace_id(i))).collect();
    // An instrumentation that records request headers: the credential is masked on disk.
    spans[0].attributes.push(proto::kv(
        "http.request.header.authorization",
        proto::Value::String("Bearer sk-planted-secret-123456".into()),
    ));
    spans.extend((0..2).map(|i| span(TraceIds::new("another").trace_id(i))));
    let req = goodput::otlp::export::request("engine", "test", spans);
    goodput::otlp::export::send(
        &format!("http://{}", rx.addr()),
        Protocol::Grpc,
        &req,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    // A compressed gRPC message is refused with its reason.
    let mut framed = goodput::otlp::grpc_frame(&req.encode_to_vec());
    framed[0] = 1;
    // A GET of the port is not an export.
    let got = http.get(&url).send().await.unwrap().status().as_u16();
    assert_eq!(got, 405);
    let stats = rx.finish().await;
    assert_eq!(
        (stats.spans, stats.over_bound, stats.other_traces),
        (3, 2, 2)
    );
    assert_eq!(stats.refused, 3, "{:?}", stats.reasons);
    assert_eq!(goodput::otlp::read(&file).unwrap().len(), 3);
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains("sk-planted")
    );
    assert!(
        goodput::otlp::grpc_unframe(&framed)
            .unwrap_err()
            .contains("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION")
    );

    // A port in use: the run stops before sending anything, naming the address.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let sim = common::sim(SimConfig::instant()).await;
    let Err(e) = common::try_run_in(
        contract(&sim.base_url(), port, "rate = 50\nrequests = 5"),
        dir.path(),
    )
    .await
    else {
        panic!("the run listened on a port in use");
    };
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{msg}"
    );
    assert!(sim.ground_truth().is_empty(), "nothing was sent");
}

/// `traces.export`: goodput's own span of every sent request goes to the endpoint named, its
/// id the parent id the engine's span of the request carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_spans_go_where_the_contract_says_as_the_engines_parents() {
    let collector = Receiver::start(
        ([127, 0, 0, 1], 0).into(),
        std::time::Instant::now(),
        10_000,
    )
    .await
    .unwrap();
    let sim = common::sim(SimConfig::instant()).await;
    let mut c = contract(&sim.base_url(), free_port(), "rate = 50\nrequests = 30");
    let t = c.measurement.traces.as_mut().unwrap();
    t.wait = goodput::contract::Seconds(0.2);
    t.export = Some(format!("http://{}/v1/traces", collector.addr()));
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(c, dir.path()).await;
    let run_id = r
        .bundle
        .dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let file = dir.path().join("collected.jsonl");
    collector.attach(&run_id, &file).unwrap();
    let stats = collector.finish().await;
    let sent: Vec<_> = r.records.iter().filter(|x| x.sent_us.is_some()).collect();
    assert_eq!(stats.spans, sent.len() as u64, "{stats:?}");
    let spans = goodput::otlp::read(&file).unwrap();
    for x in sent {
        let id = x.trace_id.as_deref().unwrap();
        let s = spans.iter().find(|s| s.trace_id == id).unwrap();
        assert_eq!(Some(s.span_id.clone()), goodput::otlp::client_span_id(id));
        assert_eq!(
            s.attributes["goodput.request.index"],
            serde_json::json!(x.index)
        );
        assert_eq!(s.name, format!("chat {}", sim.config().model));
        assert_eq!(s.service.as_deref(), Some("goodput"));
    }
}
