//! The OTLP receiver a run listens with (`[measurement.traces] listen`): one port serving both
//! of the protocols an engine's exporter speaks, gRPC (HTTP/2 without TLS, the
//! `TraceService/Export` method) and HTTP/protobuf (a POST to any other path, `/v1/traces` by
//! convention). Every span of the run's own traces is written to `spans.jsonl` as its export
//! arrives (so an interrupted run keeps what came), up to a bound; the spans of other traces
//! are counted, not kept; a payload that is malformed, oversized, compressed or JSON is
//! refused with a status saying why, and counted with its reason.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use prost::Message;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::proto::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use super::{GRPC_PATH, ServerTiming, SpanRecord, TraceIds};

/// The largest export request read (larger ones are refused, 413 or gRPC RESOURCE_EXHAUSTED):
/// an exporter's batch of 512 spans (the OpenTelemetry SDK's default) is tens of kilobytes.
pub const MAX_PAYLOAD: usize = 8 << 20;
/// How many refusal reasons are kept (the count covers every one).
const KEPT_REASONS: usize = 8;

/// What the receiver saw, kept in `environment.json` (`traces.receiver`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiverStats {
    /// The address it listened on.
    pub address: String,
    /// Export requests accepted.
    pub exports: u64,
    /// The protocols they came over (`grpc`, `http/protobuf`).
    pub protocols: BTreeSet<String>,
    /// Spans of this run's traces, kept in `spans.jsonl`.
    pub spans: u64,
    /// Spans of other traces (another client's requests, or the engine's own): counted only.
    pub other_traces: u64,
    /// This run's spans beyond the bound (`max_spans`): counted only.
    pub over_bound: u64,
    /// Export requests refused, and the first reasons.
    pub refused: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// When the first and the last export arrived, µs on the run's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_us: Option<u64>,
    /// Why `spans.jsonl` could not be written, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
}

/// What a run says of its traces after the load (`environment.json` `traces`): whether it
/// propagated trace context and, when it listened for the engine's spans, what came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TracesStatus {
    /// Every finished request's span came before the wait ran out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_span_came: Option<bool>,
    /// The bundle's file of spans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub propagate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<ReceiverStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_s: Option<f64>,
}

/// Where spans go: held until the bundle exists, then its file.
enum Sink {
    Held(Vec<SpanRecord>),
    File(std::io::BufWriter<std::fs::File>),
}

struct Inner {
    /// The run's id and trace ids: known once the bundle (whose name is the run's id) exists.
    ids: std::sync::OnceLock<(String, TraceIds)>,
    started: Instant,
    origin_unix_ns: u64,
    max_spans: u64,
    stats: Mutex<ReceiverStats>,
    sink: Mutex<Sink>,
    /// The requests (plan indices) a server span with timing has come for.
    timed: Mutex<HashSet<u64>>,
    arrived: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running receiver; [`Receiver::finish`] stops it and returns what it saw.
pub struct Receiver {
    inner: Arc<Inner>,
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Listens on `addr` for a run's spans; `started` is the run's clock. The error names the
    /// address (a port in use, say).
    pub async fn start(
        addr: SocketAddr,
        started: Instant,
        max_spans: u64,
    ) -> Result<Receiver, String> {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            format!(
                "measurement.traces.listen: cannot listen on {addr} for the engine's spans: {e}"
            )
        })?;
        let addr = listener.local_addr().map_err(|e| format!("{addr}: {e}"))?;
        let inner = Arc::new(Inner {
            ids: std::sync::OnceLock::new(),
            started,
            origin_unix_ns: super::origin_unix_ns(started),
            max_spans,
            stats: Mutex::new(ReceiverStats {
                address: addr.to_string(),
                ..Default::default()
            }),
            sink: Mutex::new(Sink::Held(Vec::new())),
            timed: Mutex::new(HashSet::new()),
            arrived: tokio::sync::Notify::new(),
        });
        let app = Router::new()
            .route(GRPC_PATH, axum::routing::post(grpc))
            .fallback(http)
            .with_state(inner.clone());
        let stop = CancellationToken::new();
        let until = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        Ok(Receiver {
            inner,
            addr,
            stop,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on the spans of the run `run_id` go to `path` (those held so far first): those
    /// of its traces, and those whose `gen_ai.request.id` holds one of its request ids (an
    /// engine that names requests by their `X-Request-Id` but did not continue the trace).
    pub fn attach(&self, run_id: &str, path: &Path) -> std::io::Result<()> {
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let _ = self
            .inner
            .ids
            .set((run_id.to_owned(), TraceIds::new(run_id)));
        let held = match std::mem::replace(&mut *lock(&self.inner.sink), Sink::File(file)) {
            Sink::Held(spans) => spans,
            Sink::File(_) => Vec::new(),
        };
        self.inner.keep(held);
        Ok(())
    }

    /// Waits until a server span with timing has come for every request in `expected`, for at
    /// most `wait` (or until `cancel`); whether they all came.
    pub async fn wait_for(
        &self,
        expected: &[u64],
        wait: Duration,
        cancel: &CancellationToken,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let arrived = self.inner.arrived.notified();
            let all = {
                let timed = lock(&self.inner.timed);
                expected.iter().all(|i| timed.contains(i))
            };
            if all {
                return true;
            }
            tokio::select! {
                _ = arrived => {}
                _ = tokio::time::sleep_until(deadline) => return false,
                _ = cancel.cancelled() => return false,
            }
        }
    }

    /// Stops listening; what it saw.
    pub async fn finish(self) -> ReceiverStats {
        self.stop.cancel();
        let _ = self.task.await;
        if let Sink::File(f) = &mut *lock(&self.inner.sink) {
            let _ = f.flush();
        }
        lock(&self.inner.stats).clone()
    }
}

impl Inner {
    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn refuse(&self, why: String) {
        let mut s = lock(&self.stats);
        s.refused += 1;
        if s.reasons.len() < KEPT_REASONS {
            s.reasons.push(why);
        }
    }

    /// Takes one export request's spans.
    fn take(&self, req: ExportTraceServiceRequest, protocol: &str) {
        let now = self.now_us();
        {
            let mut s = lock(&self.stats);
            s.exports += 1;
            s.protocols.insert(protocol.to_owned());
            s.first_us.get_or_insert(now);
            s.last_us = Some(now);
        }
        let spans = SpanRecord::all_of(req, self.origin_unix_ns, now);
        if let Sink::Held(held) = &mut *lock(&self.sink) {
            // Before the run's id is known: bounded as the kept spans are.
            let room = (self.max_spans as usize).saturating_sub(held.len());
            let over = spans.len().saturating_sub(room) as u64;
            held.extend(spans.into_iter().take(room));
            lock(&self.stats).over_bound += over;
            return;
        }
        self.keep(spans);
    }

    /// The run's spans written to the bundle (up to the bound), the others counted.
    fn keep(&self, spans: Vec<SpanRecord>) {
        let Some((run_id, ids)) = self.ids.get() else {
            return;
        };
        let mut lines = String::new();
        let mut timed = Vec::new();
        {
            let mut s = lock(&self.stats);
            for span in spans {
                let index = ids
                    .index_of(&span.trace_id)
                    .or_else(|| super::request_index(&span, run_id));
                let Some(index) = index else {
                    s.other_traces += 1;
                    continue;
                };
                if s.spans >= self.max_spans {
                    s.over_bound += 1;
                    continue;
                }
                s.spans += 1;
                if ServerTiming::of(&span).is_some() {
                    timed.push(index);
                }
                if let Ok(l) = serde_json::to_string(&span) {
                    // A secret the run knows (its API key) never reaches the bundle.
                    lines.push_str(&crate::secrets::redact(&l));
                    lines.push('\n');
                }
            }
        }
        if !lines.is_empty()
            && let Sink::File(f) = &mut *lock(&self.sink)
            && let Err(e) = f.write_all(lines.as_bytes()).and_then(|()| f.flush())
        {
            lock(&self.stats).write_error.get_or_insert(e.to_string());
        }
        lock(&self.timed).extend(timed);
        self.arrived.notify_waiters();
    }
}

/// The body, read up to [`MAX_PAYLOAD`]; the error is the refusal's reason. An oversized body
/// is still read to its end (up to four times the limit, then the connection is given up), so
/// the exporter hears the refusal rather than a connection cut while it was sending.
async fn read(mut body: Body) -> Result<Bytes, String> {
    let mut kept = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the payload could not be read: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen <= MAX_PAYLOAD {
            kept.extend_from_slice(&data);
        } else if seen > 4 * MAX_PAYLOAD {
            break;
        }
    }
    if seen > MAX_PAYLOAD {
        return Err(format!(
            "a payload over {} MiB (lower the exporter's batch size)",
            MAX_PAYLOAD >> 20
        ));
    }
    Ok(kept.freeze())
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// OTLP/HTTP: a protobuf `ExportTraceServiceRequest` in a POST.
async fn http(
    State(inner): State<Arc<Inner>>,
    method: axum::http::Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if method != axum::http::Method::POST {
        // A probe of the port (a health check, a browser) is not an export.
        return (StatusCode::METHOD_NOT_ALLOWED, "OTLP exports are POSTed").into_response();
    }
    let refuse = |status: StatusCode, why: String| {
        inner.refuse(format!("http: {why}"));
        (status, why).into_response()
    };
    let kind = header(&headers, "content-type");
    if kind.starts_with("application/json") {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "OTLP/HTTP JSON is not read: set the exporter's protocol to http/protobuf or grpc (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)".into(),
        );
    }
    let encoding = header(&headers, "content-encoding");
    if !encoding.is_empty() && encoding != "identity" {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "a {encoding}-compressed payload: set OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none on the engine"
            ),
        );
    }
    let bytes = match read(body).await {
        Ok(b) => b,
        Err(why) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, why),
    };
    match ExportTraceServiceRequest::decode(bytes) {
        Ok(req) => {
            inner.take(req, "http/protobuf");
            let mut r = ExportTraceServiceResponse::default()
                .encode_to_vec()
                .into_response();
            r.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("application/x-protobuf"),
            );
            r
        }
        Err(e) => refuse(
            StatusCode::BAD_REQUEST,
            format!("not an OTLP ExportTraceServiceRequest: {e}"),
        ),
    }
}

/// OTLP/gRPC: `TraceService/Export`, answered with an empty response and `grpc-status: 0`.
async fn grpc(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Body) -> Response {
    // gRPC's status codes: 3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, 12 UNIMPLEMENTED.
    let refuse = |code: u16, why: String| {
        inner.refuse(format!("grpc: {why}"));
        let mut r = StatusCode::OK.into_response();
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from(code));
        if let Ok(v) = HeaderValue::from_str(&why.replace(['\r', '\n'], " ")) {
            h.insert("grpc-message", v);
        }
        r
    };
    let encoding = header(&headers, "grpc-encoding");
    if !encoding.is_empty() && encoding != "identity" {
        return refuse(
            12,
            format!(
                "{encoding}-compressed messages are not read: set OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none on the engine"
            ),
        );
    }
    let bytes = match read(body).await {
        Ok(b) => b,
        Err(why) => return refuse(8, why),
    };
    let req = super::grpc_unframe(&bytes).and_then(|m| {
        ExportTraceServiceRequest::decode(m)
            .map_err(|e| format!("not an OTLP ExportTraceServiceRequest: {e}"))
    });
    match req {
        Ok(req) => {
            inner.take(req, "grpc");
            let message = super::grpc_frame(&ExportTraceServiceResponse::default().encode_to_vec());
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let frames = futures_util::stream::iter([
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(message))),
                Ok(hyper::body::Frame::trailers(trailers)),
            ]);
            let mut r = Response::new(Body::new(http_body_util::StreamBody::new(frames)));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/grpc"));
            r
        }
        Err(why) => refuse(3, why),
    }
}
