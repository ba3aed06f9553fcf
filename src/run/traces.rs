//! A run's traces (`[measurement.traces]`, docs/guide/traces.md): the receiver for the
//! engine's spans, started before the target is reached (so the embedded simulator can be
//! pointed at it) and given the bundle once it exists; after the load, the wait for the spans
//! still to come; and goodput's own client spans sent where the contract says.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::Watch;
use crate::bundle::Bundle;
use crate::contract::Contract;
use crate::otlp::SPANS;
use crate::otlp::export::{self, Protocol};
use crate::otlp::proto::{self, Value, kv};
use crate::otlp::receiver::{Receiver, TracesStatus};
use crate::record::Record;

/// The receiver, listening, when the contract asks for one.
pub(super) async fn listen(
    contract: &Contract,
    started: Instant,
) -> anyhow::Result<Option<Receiver>> {
    let Some(t) = &contract.measurement.traces else {
        return Ok(None);
    };
    let Some(addr) = &t.listen else {
        return Ok(None);
    };
    let addr = addr
        .parse()
        .with_context(|| format!("measurement.traces.listen = \"{addr}\""))?;
    let bound = t.span_bound(&contract.load, &contract.warmup);
    Receiver::start(addr, started, bound)
        .await
        .map(Some)
        .map_err(anyhow::Error::msg)
}

/// The run's id as its bundle names it (the prefix of every `X-Request-Id`).
pub(super) fn run_id(bundle: &Bundle) -> String {
    bundle
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

/// From now on the receiver writes the run's spans into the bundle.
pub(super) fn attach(receiver: Option<&Receiver>, bundle: &Bundle) -> anyhow::Result<()> {
    if let Some(r) = receiver {
        let path = bundle.path(SPANS);
        r.attach(&run_id(bundle), &path)
            .with_context(|| format!("creating {}", path.display()))?;
    }
    Ok(())
}

/// After the load: waits (up to `traces.wait`) for the server spans of the requests that
/// finished, stops the receiver, says what it saw in `environment.json` (`traces`) and reads
/// back the spans it kept.
pub(super) async fn finish(
    receiver: Option<Receiver>,
    contract: &Contract,
    records: &[Record],
    environment: &mut crate::bundle::EnvironmentFile,
    bundle: &Bundle,
    (opts, cancel): (&super::RunOptions, &CancellationToken),
) -> anyhow::Result<Vec<crate::otlp::SpanRecord>> {
    let Some(r) = receiver else {
        environment.traces = Some(TracesStatus {
            propagate: contract.measurement.propagates_traces(),
            ..TracesStatus::default()
        });
        return Ok(Vec::new());
    };
    let wait = contract
        .measurement
        .traces
        .as_ref()
        .map_or(0.0, |t| t.wait.seconds());
    let expected: Vec<u64> = records
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.index)
        .collect();
    opts.watch.note(&format!(
        "waiting up to {wait:.0} s for the engine's spans of {} finished requests (OTLP on {})",
        expected.len(),
        r.addr()
    ));
    let waited = Instant::now();
    let all = r
        .wait_for(&expected, Duration::from_secs_f64(wait), cancel)
        .await;
    let stats = r.finish().await;
    environment.traces = Some(TracesStatus {
        propagate: contract.measurement.propagates_traces(),
        receiver: Some(stats),
        file: Some(SPANS.to_owned()),
        waited_s: Some(waited.elapsed().as_secs_f64()),
        every_span_came: Some(all),
    });
    bundle.write_json(super::ENVIRONMENT, environment)?;
    crate::otlp::read(&bundle.path(SPANS)).map_err(anyhow::Error::msg)
}

/// Sends goodput's own span of every sent request to `traces.export` (batches of 512); a
/// failure is warned about, never fatal: the run's results do not depend on it.
pub(super) async fn export_client_spans(
    contract: &Contract,
    records: &[Record],
    started: Instant,
    watch: &dyn Watch,
) {
    let Some((endpoint, protocol)) = contract.measurement.traces.as_ref().and_then(|t| {
        Some((
            t.export.clone()?,
            t.export_protocol.parse::<Protocol>().ok()?,
        ))
    }) else {
        return;
    };
    let origin = crate::otlp::origin_unix_ns(started);
    let spans: Vec<proto::Span> = records
        .iter()
        .filter_map(|r| client_span(r, contract, origin))
        .collect();
    let total = spans.len();
    let mut sent = 0;
    for batch in spans.chunks(512) {
        let req = export::request("goodput", "goodput", batch.to_vec());
        if let Err(e) = export::send(&endpoint, protocol, &req, Duration::from_secs(10)).await {
            watch.warn(&format!(
                "sent {sent} of {total} client spans, then: {e} (the run's results are unaffected)"
            ));
            return;
        }
        sent += batch.len();
    }
    watch.note(&format!(
        "sent {total} client spans to {endpoint} ({protocol})"
    ));
}

/// One request's client span (GenAI semantic conventions where they fit): from its intended
/// send time (its latency's origin) to its end, with `sent` and `first_token` events; the
/// engine's span of it is its child.
fn client_span(r: &Record, contract: &Contract, origin_unix_ns: u64) -> Option<proto::Span> {
    let trace_id = r.trace_id.as_deref()?;
    let sent = r.sent_us?;
    let ns = |us: u64| origin_unix_ns + us * 1000;
    let start = r.intended_us.unwrap_or(sent).min(sent);
    let end = r.end_us.unwrap_or(sent).max(sent);
    let model = r
        .model
        .clone()
        .or_else(|| contract.target.model.clone())
        .unwrap_or_default();
    let operation = contract.target.api.operation();
    let mut attributes = vec![
        kv("gen_ai.operation.name", Value::String(operation.into())),
        kv("gen_ai.request.model", Value::String(model.clone())),
        kv(
            "gen_ai.request.max_tokens",
            Value::Int(r.output_tokens_planned.into()),
        ),
        kv(
            "gen_ai.usage.input_tokens",
            Value::Int(r.input_tokens_planned.into()),
        ),
        kv("goodput.request.index", Value::Int(r.index as i64)),
        kv("goodput.request.id", Value::String(r.request_id.clone())),
        kv("goodput.phase", Value::String(r.phase.as_str().into())),
        kv(
            "goodput.outcome",
            Value::String(serde_json::to_value(r.outcome).ok()?.as_str()?.to_owned()),
        ),
    ];
    if let Some(n) = r.usage_completion_tokens {
        attributes.push(kv("gen_ai.usage.output_tokens", Value::Int(n.into())));
    }
    let mut events = vec![proto::Event {
        time_unix_nano: ns(sent),
        name: "sent".into(),
        attributes: Vec::new(),
    }];
    if let Some(t) = r.first_token_us {
        events.push(proto::Event {
            time_unix_nano: ns(t),
            name: "first_token".into(),
            attributes: Vec::new(),
        });
    }
    Some(proto::Span {
        trace_id: hex::decode(trace_id).ok()?,
        span_id: hex::decode(crate::otlp::client_span_id(trace_id)?).ok()?,
        parent_span_id: Vec::new(),
        name: format!("{operation} {model}"),
        kind: proto::KIND_CLIENT,
        start_time_unix_nano: ns(start),
        end_time_unix_nano: ns(end),
        attributes,
        events,
        status: Some(proto::Status {
            message: r.error.as_deref().unwrap_or("").to_owned(),
            code: if r.is_ok() { 1 } else { 2 },
        }),
    })
}
