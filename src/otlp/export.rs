//! Sending spans to an OTLP endpoint over either protocol: the simulator's server spans (as
//! an engine's exporter would) and goodput's own client spans (`[measurement.traces] export`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use prost::Message;

use super::proto::{self, ExportTraceServiceRequest};

/// The OTLP protocols, by the names `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// gRPC over HTTP/2 without TLS (vLLM's default).
    #[default]
    Grpc,
    /// A protobuf body POSTed over HTTP/1.1.
    HttpProtobuf,
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        match s {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            other => Err(format!(
                "`{other}` is not an OTLP protocol goodput speaks: grpc or http/protobuf"
            )),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        })
    }
}

/// One export request of `spans` from the service `service`.
pub fn request(service: &str, scope: &str, spans: Vec<proto::Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![proto::ResourceSpans {
            resource: Some(proto::Resource {
                attributes: vec![proto::kv(
                    "service.name",
                    proto::Value::String(service.to_owned()),
                )],
            }),
            scope_spans: vec![proto::ScopeSpans {
                scope: Some(proto::InstrumentationScope {
                    name: scope.to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                }),
                spans,
            }],
        }],
    }
}

/// Sends one export request to `endpoint` (gRPC: `http://host:port`; HTTP: the full URL,
/// `…/v1/traces`), within `timeout`; the error names the endpoint and what went wrong.
pub async fn send(
    endpoint: &str,
    protocol: Protocol,
    req: &ExportTraceServiceRequest,
    timeout: Duration,
) -> Result<(), String> {
    let body = req.encode_to_vec();
    let sent = tokio::time::timeout(timeout, async {
        match protocol {
            Protocol::Grpc => send_grpc(endpoint, body).await,
            Protocol::HttpProtobuf => send_http(endpoint, body).await,
        }
    })
    .await
    .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs_f64())));
    sent.map_err(|e| format!("OTLP export to {endpoint} ({protocol}): {e}"))
}

async fn send_http(endpoint: &str, body: Vec<u8>) -> Result<(), String> {
    // reqwest is built without a default TLS provider: ring's, as every client of goodput's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let resp = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .await
        .map_err(|e| crate::text::error_chain(&e))?;
    match resp.status() {
        s if s.is_success() => Ok(()),
        s => Err(format!(
            "HTTP {s}: {}",
            resp.text()
                .await
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect::<String>()
        )),
    }
}

async fn send_grpc(endpoint: &str, body: Vec<u8>) -> Result<(), String> {
    let with_scheme = match endpoint.contains("://") {
        true => endpoint.to_owned(),
        false => format!("http://{endpoint}"),
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|e| format!("not a URL: {e}"))?;
    if url.scheme() != "http" {
        return Err("gRPC export is plain HTTP/2 (an http:// endpoint) only".into());
    }
    let host = url.host_str().ok_or("no host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(4317);
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(conn);
    let req = hyper::Request::post(format!("http://{host}:{port}{}", super::GRPC_PATH))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(super::grpc_frame(&body))))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    if resp.status() != hyper::StatusCode::OK {
        return Err(format!("HTTP {}", resp.status()));
    }
    let head_status = grpc_status(resp.headers());
    let collected = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    match head_status.or_else(|| collected.trailers().and_then(grpc_status)) {
        Some((0, _)) => Ok(()),
        Some((code, message)) => Err(format!("grpc-status {code}: {message}")),
        None => Err("no grpc-status in the answer".into()),
    }
}

/// `grpc-status` and `grpc-message` of a header block, when it has them.
fn grpc_status(h: &hyper::HeaderMap) -> Option<(u32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = h
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Some((code, message))
}

/// A background exporter: spans handed to it are sent in batches (up to 512, or what arrived
/// within 100 ms of the first), as an OpenTelemetry SDK's batch processor sends them; a batch
/// that cannot be sent is dropped and counted, as theirs are.
#[derive(Clone)]
pub struct Batcher {
    tx: tokio::sync::mpsc::UnboundedSender<proto::Span>,
}

impl Batcher {
    /// Starts the exporter on the current runtime.
    pub fn spawn(endpoint: String, protocol: Protocol, service: &'static str) -> Batcher {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<proto::Span>();
        tokio::spawn(async move {
            let mut failed = 0u64;
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                let until = tokio::time::Instant::now() + Duration::from_millis(100);
                while batch.len() < 512 {
                    match tokio::time::timeout_at(until, rx.recv()).await {
                        Ok(Some(s)) => batch.push(s),
                        _ => break,
                    }
                }
                let req = request(service, "goodput", batch);
                if let Err(e) = send(&endpoint, protocol, &req, Duration::from_secs(5)).await {
                    failed += 1;
                    if failed == 1 {
                        eprintln!("{service}: {e} (later failures are not reported)");
                    }
                }
            }
        });
        Batcher { tx }
    }

    /// Hands a span over (never blocks; dropped if the exporter has stopped).
    pub fn push(&self, span: proto::Span) {
        let _ = self.tx.send(span);
    }
}
