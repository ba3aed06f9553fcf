//! Traces (OpenTelemetry's OTLP): the W3C trace context goodput puts on every request, the
//! spans an engine exports about them, received (`receiver`) and kept one a line in the
//! bundle's `spans.jsonl`, and spans sent (`export`: the simulator's server spans, goodput's
//! own client spans). What a span says of one request's time at the server is
//! [`ServerTiming`]; `analyze::spans` joins it to the request's record.

pub mod export;
pub mod proto;
pub mod receiver;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::Digest;

/// The bundle file the received spans are kept in, one a line.
pub const SPANS: &str = "spans.jsonl";

/// The most `spans.jsonl` is read to (a million spans of a few hundred bytes each).
pub const MAX_SPANS_BYTES: u64 = 2 << 30;

/// A bundle's spans (`spans.jsonl`); none when it has no such file. The error names the file
/// and line.
pub fn read(path: &std::path::Path) -> Result<Vec<SpanRecord>, String> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    crate::text::each_line_capped(path, MAX_SPANS_BYTES, |line| {
        out.push(serde_json::from_str(line).map_err(|e| e.to_string())?);
        Ok(())
    })?;
    Ok(out)
}

/// The wall-clock time (ns since the Unix epoch) of a clock that started at `started`.
pub fn origin_unix_ns(started: std::time::Instant) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    now.saturating_sub(started.elapsed().as_nanos() as u64)
}

/// The trace ids of one run: 16 bytes, the first 8 from the run's id (so a receiver tells the
/// run's spans from any other's), the last 8 the request's index. A request's own span (the
/// client's, the parent of the server's) has the index plus one as its id (never all zero, as
/// W3C requires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    run: [u8; 8],
}

impl TraceIds {
    pub fn new(run_id: &str) -> TraceIds {
        let digest = sha2::Sha256::digest(run_id.as_bytes());
        let mut run = [0u8; 8];
        run.copy_from_slice(&digest[..8]);
        if run == [0; 8] {
            run[0] = 1;
        }
        TraceIds { run }
    }

    /// The trace id of request `index`, 32 lowercase hex digits.
    pub fn trace_id(&self, index: u64) -> String {
        // Per request on the send path: one formatting, no intermediate string.
        format!("{:016x}{index:016x}", u64::from_be_bytes(self.run))
    }

    /// The request index a trace id of this run carries; `None`: another run's.
    pub fn index_of(&self, trace_id: &str) -> Option<u64> {
        let (run, index) = (trace_id.get(..16)?, trace_id.get(16..32)?);
        (trace_id.len() == 32
            && u64::from_str_radix(run, 16).ok() == Some(u64::from_be_bytes(self.run)))
        .then(|| u64::from_str_radix(index, 16).ok())
        .flatten()
    }
}

/// The id of the client's span of a request (the server span's parent): its index plus one,
/// 16 hex digits, from the trace id's last 16.
pub fn client_span_id(trace_id: &str) -> Option<String> {
    let index = u64::from_str_radix(trace_id.get(16..32)?, 16).ok()?;
    Some(format!("{:016x}", index.wrapping_add(1).max(1)))
}

/// The `traceparent` header of a request (W3C Trace Context level 1: version 00, sampled).
pub fn traceparent(trace_id: &str) -> Option<String> {
    Some(format!("00-{trace_id}-{}-01", client_span_id(trace_id)?))
}

/// A `traceparent` header read: (trace id, parent span id), lowercase hex; `None` when it is
/// not one (wrong length, not hex, all-zero ids, version ff).
pub fn parse_traceparent(h: &str) -> Option<(String, String)> {
    let mut parts = h.trim().split('-');
    let (version, trace, parent) = (parts.next()?, parts.next()?, parts.next()?);
    let _flags = parts.next()?;
    let hex_of = |s: &str, n: usize| {
        (s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0'))
            .then(|| s.to_ascii_lowercase())
    };
    if version.len() != 2 || version.eq_ignore_ascii_case("ff") {
        return None;
    }
    Some((hex_of(trace, 32)?, hex_of(parent, 16)?))
}

/// One received span, as `spans.jsonl` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    pub name: String,
    /// The exporter's `service.name` resource attribute, when it set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Its start on the run's clock, µs (from its wall-clock start and the run's, so it is
    /// right to the clocks' agreement: on one host, exactly).
    pub start_us: i64,
    /// When goodput received it, µs on the run's clock.
    pub received_us: u64,
    /// Its attributes (a string longer than [`MAX_VALUE_CHARS`] is cut there, and at most
    /// [`MAX_ATTRIBUTES`] are kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, serde_json::Value>,
}

/// Bounds on what one span may keep: a server controls its spans, and the bundle is bounded.
pub const MAX_ATTRIBUTES: usize = 64;
pub const MAX_VALUE_CHARS: usize = 512;

impl SpanRecord {
    /// The spans of one export request; `origin_unix_ns`: the wall-clock time of the run's
    /// clock's zero.
    pub fn all_of(
        req: proto::ExportTraceServiceRequest,
        origin_unix_ns: u64,
        received_us: u64,
    ) -> Vec<SpanRecord> {
        let mut out = Vec::new();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .and_then(|a| a.value.as_ref())
                .map(json_of)
                .and_then(|v| v.as_str().map(str::to_owned));
            for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                let start_us = (span.start_time_unix_nano as i128 - origin_unix_ns as i128) / 1000;
                out.push(SpanRecord {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex::encode(&span.parent_span_id)),
                    name: cut(&span.name),
                    service: service.clone(),
                    start_unix_ns: span.start_time_unix_nano,
                    end_unix_ns: span.end_time_unix_nano,
                    start_us: start_us.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
                    received_us,
                    attributes: span
                        .attributes
                        .iter()
                        .take(MAX_ATTRIBUTES)
                        .map(|a| (cut(&a.key), masked(&a.key, a.value.as_ref())))
                        .collect(),
                });
            }
        }
        out
    }

    /// A number attribute.
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.attributes.get(key)? {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }
}

/// An attribute's value as the span store keeps it (`secrets::scrub`): masked whole when its
/// key names a credential (`http.request.header.authorization`, `api_key`), a URL's password
/// masked (`url.full`), every registered secret redacted, in nested values too.
fn masked(key: &str, value: Option<&proto::AnyValue>) -> serde_json::Value {
    match value {
        _ if crate::secrets::is_credential_name(key) => crate::secrets::MASK.into(),
        Some(v) => scrubbed(key, json_of(v)),
        None => serde_json::Value::Null,
    }
}

/// `v` under `key`, its strings scrubbed, and a nested list's values under their own keys.
fn scrubbed(key: &str, v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::String(s) => J::String(crate::secrets::scrub(key, &s).into_owned()),
        J::Array(a) => J::Array(a.into_iter().map(|x| scrubbed(key, x)).collect()),
        J::Object(m) => J::Object(
            m.into_iter()
                .map(|(k, x)| {
                    let x = match crate::secrets::is_credential_name(&k) {
                        true => crate::secrets::MASK.into(),
                        false => scrubbed(&k, x),
                    };
                    (k, x)
                })
                .collect(),
        ),
        other => other,
    }
}

/// A string cut at [`MAX_VALUE_CHARS`] characters.
fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => s[..at].to_owned(),
        None => s.to_owned(),
    }
}

/// An attribute's value as JSON (bytes as hex; nested values to the depth prost decoded).
fn json_of(v: &proto::AnyValue) -> serde_json::Value {
    use proto::Value as V;
    match &v.value {
        None => serde_json::Value::Null,
        Some(V::String(s)) => cut(s).into(),
        Some(V::Bool(b)) => (*b).into(),
        Some(V::Int(i)) => (*i).into(),
        Some(V::Double(d)) => {
            serde_json::Number::from_f64(*d).map_or(serde_json::Value::Null, Into::into)
        }
        Some(V::Bytes(b)) => cut(&hex::encode(b)).into(),
        Some(V::Array(a)) => a.values.iter().take(MAX_ATTRIBUTES).map(json_of).collect(),
        Some(V::KvList(l)) => l
            .values
            .iter()
            .take(MAX_ATTRIBUTES)
            .map(|kv| {
                (
                    cut(&kv.key),
                    kv.value.as_ref().map_or(serde_json::Value::Null, json_of),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

/// The plan index of the request a span names by its `gen_ai.request.id`, when that holds one
/// of the run's request ids (`RUN-INDEX`, as `X-Request-Id` sends it; vLLM prefixes it with
/// `chatcmpl-` or `cmpl-`).
pub fn request_index(span: &SpanRecord, run_id: &str) -> Option<u64> {
    let id = span.attributes.get(ATTR_REQUEST_ID)?.as_str()?;
    let rest = &id[id.find(run_id)? + run_id.len()..];
    rest.strip_prefix('-')?.parse().ok()
}

/// What a server span says of one request's time at the server, seconds: vLLM's `llm_request`
/// span attributes (`vllm/tracing/utils.py`, set in `v1/engine/output_processor.py`), which
/// the simulator writes too. `ttft_s` and `e2e_s` count from the request's arrival at the
/// server; queue is from the engine queueing it to scheduling it, prefill from then to the
/// first token, decode from the first token to the last.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTiming {
    pub queue_s: Option<f64>,
    pub ttft_s: Option<f64>,
    pub prefill_s: Option<f64>,
    pub decode_s: Option<f64>,
    pub e2e_s: Option<f64>,
}

/// The span attributes [`ServerTiming`] reads.
pub const ATTR_QUEUE: &str = "gen_ai.latency.time_in_queue";
/// The longest server time a span may state, s: a day (a request's own timeout is far less).
pub const MAX_SERVER_TIME_S: f64 = 86_400.0;

pub const ATTR_TTFT: &str = "gen_ai.latency.time_to_first_token";
pub const ATTR_PREFILL: &str = "gen_ai.latency.time_in_model_prefill";
pub const ATTR_DECODE: &str = "gen_ai.latency.time_in_model_decode";
pub const ATTR_INFERENCE: &str = "gen_ai.latency.time_in_model_inference";
pub const ATTR_E2E: &str = "gen_ai.latency.e2e";
pub const ATTR_REQUEST_ID: &str = "gen_ai.request.id";
pub const ATTR_PROMPT_TOKENS: &str = "gen_ai.usage.prompt_tokens";
pub const ATTR_COMPLETION_TOKENS: &str = "gen_ai.usage.completion_tokens";

impl ServerTiming {
    /// The timing a span states; `None` when it states neither a TTFT nor an end-to-end time
    /// (not a request span).
    pub fn of(span: &SpanRecord) -> Option<ServerTiming> {
        // A time that is negative, not finite or longer than a day is no request's: left out
        // rather than made a headline ("queue 1000000000 ms").
        let time = |key: &str| {
            span.number(key)
                .filter(|x| x.is_finite() && (0.0..=MAX_SERVER_TIME_S).contains(x))
        };
        let t = ServerTiming {
            queue_s: time(ATTR_QUEUE),
            ttft_s: time(ATTR_TTFT),
            prefill_s: time(ATTR_PREFILL),
            decode_s: time(ATTR_DECODE),
            e2e_s: time(ATTR_E2E),
        };
        (t.ttft_s.is_some() || t.e2e_s.is_some()).then_some(t)
    }
}

/// gRPC's length-prefixed message: a compression flag (0: none), the length (4 bytes, big
/// endian), the message.
pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The one message of a gRPC request body; the error says what is wrong with it.
pub fn grpc_unframe(body: &[u8]) -> Result<&[u8], String> {
    let Some((&flag, rest)) = body.split_first() else {
        return Err("an empty gRPC body (no length-prefixed message)".into());
    };
    if flag != 0 {
        return Err("a compressed gRPC message: goodput's receiver takes uncompressed OTLP (set OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none on the engine)".into());
    }
    let (len, message) = rest
        .split_at_checked(4)
        .ok_or("a gRPC body shorter than its 5-byte prefix")?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    message
        .get(..len)
        .filter(|m| m.len() == len && message.len() == len)
        .ok_or_else(|| {
            format!(
                "a gRPC message of {} bytes where its prefix says {len}",
                message.len()
            )
        })
}

/// The gRPC method OTLP trace export calls.
pub const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn trace_ids_carry_the_run_and_the_index_and_make_a_valid_traceparent() {
        let ids = TraceIds::new("run-1");
        let t = ids.trace_id(41);
        assert_eq!(t.len(), 32);
        assert_eq!(ids.index_of(&t), Some(41));
        assert_eq!(TraceIds::new("run-2").index_of(&t), None);
        let tp = traceparent(&t).unwrap();
        let (trace, parent) = parse_traceparent(&tp).unwrap();
        assert_eq!(
            (trace.as_str(), parent.as_str()),
            (t.as_str(), "000000000000002a")
        );
        assert_eq!(
            parse_traceparent("00-00000000000000000000000000000000-0000000000000001-01"),
            None
        );
        assert_eq!(parse_traceparent("00-abc-01"), None);
    }

    /// Issue #70: a span's URL attribute kept its password and an `api_key` attribute its key,
    /// verbatim in `spans.jsonl`; the store keeps neither (nested values too).
    #[test]
    fn the_span_store_keeps_no_credential() {
        let span = proto::Span {
            trace_id: vec![7; 16],
            span_id: vec![1; 8],
            name: "POST".into(),
            attributes: vec![
                proto::kv(
                    "url.full",
                    proto::Value::String("http://user:Pw0rd123@10.0.0.1:8000/v1".into()),
                ),
                proto::kv("api_key", proto::Value::String("sk-abcdef123".into())),
                proto::kv(
                    "http.request.header.x-auth-token",
                    proto::Value::String("tok-999999".into()),
                ),
                proto::kv(
                    "nested",
                    proto::Value::KvList(proto::KeyValueList {
                        values: vec![proto::kv(
                            "client_secret",
                            proto::Value::String("cs-77777777".into()),
                        )],
                    }),
                ),
                proto::kv("gen_ai.usage.input_tokens", proto::Value::Int(12)),
            ],
            ..Default::default()
        };
        let req = proto::ExportTraceServiceRequest {
            resource_spans: vec![proto::ResourceSpans {
                resource: None,
                scope_spans: vec![proto::ScopeSpans {
                    scope: None,
                    spans: vec![span],
                }],
            }],
        };
        let spans = SpanRecord::all_of(req, 0, 0);
        let line = serde_json::to_string(&spans[0]).unwrap();
        for secret in ["Pw0rd123", "sk-abcdef123", "tok-999999", "cs-77777777"] {
            assert!(!line.contains(secret), "{secret} kept: {line}");
        }
        assert_eq!(
            spans[0].attributes["url.full"],
            "http://user:[redacted]@10.0.0.1:8000/v1"
        );
        assert_eq!(spans[0].attributes["gen_ai.usage.input_tokens"], 12);
    }

    #[test]
    fn a_span_round_trips_through_protobuf_with_its_timing() {
        let span = proto::Span {
            trace_id: vec![7; 16],
            span_id: vec![1; 8],
            name: "llm_request".into(),
            start_time_unix_nano: 2_000_000_000,
            end_time_unix_nano: 3_000_000_000,
            attributes: vec![
                proto::kv(ATTR_QUEUE, proto::Value::Double(0.25)),
                proto::kv(ATTR_TTFT, proto::Value::Double(0.5)),
                proto::kv("long", proto::Value::String("x".repeat(2000))),
            ],
            ..Default::default()
        };
        let req = proto::ExportTraceServiceRequest {
            resource_spans: vec![proto::ResourceSpans {
                resource: Some(proto::Resource {
                    attributes: vec![proto::kv(
                        "service.name",
                        proto::Value::String("vllm".into()),
                    )],
                }),
                scope_spans: vec![proto::ScopeSpans {
                    scope: None,
                    spans: vec![span],
                }],
            }],
        };
        let bytes = req.encode_to_vec();
        let framed = grpc_frame(&bytes);
        let back =
            proto::ExportTraceServiceRequest::decode(grpc_unframe(&framed).unwrap()).unwrap();
        let spans = SpanRecord::all_of(back, 1_000_000_000, 5);
        assert_eq!(spans.len(), 1);
        let s = &spans[0];
        assert_eq!(
            (s.start_us, s.service.as_deref()),
            (1_000_000, Some("vllm"))
        );
        assert_eq!(
            s.attributes["long"].as_str().unwrap().len(),
            MAX_VALUE_CHARS
        );
        let t = ServerTiming::of(s).unwrap();
        assert_eq!(
            (t.queue_s, t.ttft_s, t.e2e_s),
            (Some(0.25), Some(0.5), None)
        );
        assert!(grpc_unframe(&framed[..framed.len() - 1]).is_err());
        assert!(
            grpc_unframe(&[1, 0, 0, 0, 0])
                .unwrap_err()
                .contains("compressed")
        );
    }
}
