//! Where the time went: each steady request's record joined, by its trace id, to the server
//! span the engine exported for it (`spans.jsonl`, `[measurement.traces]`), or else to the
//! timing the engine stated in its own answer (llama.cpp's `timings`, in the record), and its
//! latency split into parts that add up to it exactly.
//!
//! TTFT (from the latency origin) is the sum of **dispatch** (intended send → sent: the
//! client's lag), **client/network** (the client's TTFT from its send minus the server's TTFT:
//! connecting, uploading the request, the network both ways, framing), **server other** (the
//! server's TTFT minus its queue and prefill: parsing, tokenizing, handing the request to the
//! engine), **queue** and **prefill**. End-to-end adds **decode** (first token to last), and
//! its client/network and server-other parts are taken over the whole request likewise.
//!
//! An answer's timing states prefill and decode but not the queue: there the queue is derived,
//! and said to be: each request's time to first token from its send, less the engine's
//! prefill, is its queue plus the network and the server's own handling; the run's smallest
//! such remainder is taken as that constant part (client/network), the rest as queue.
//!
//! A tail is explained by the requests in it: for each percentile, the parts averaged over
//! the requests at or above it ("TTFT p99 2.4 s: queue 1.9 s, …"). The server cannot see more
//! of a request than its client: a server time beyond the client's by more than
//! `traces.tolerance_ms` is flagged, with the request, never hidden.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::api::timing::EngineTiming;
use crate::contract::Contract;
use crate::otlp::{ServerTiming, SpanRecord};
use crate::record::Record;

/// The percentiles whose tails are decomposed.
const TAILS: [f64; 3] = [50.0, 90.0, 99.0];
/// `ServerSpans::source` of a run that had no source of the server's side.
pub const NO_SOURCE: &str = "none";
/// Fewer requests than this derive the queue over a floor the report calls rough.
const FEW: usize = 20;
/// How many examples of each kind of problem are named.
const EXAMPLES: usize = 5;

/// The steady requests' server time (its spans, or its answers' timing), joined and decomposed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerSpans {
    /// Spans of the run's traces received (every phase).
    pub spans: u64,
    /// Steady requests that finished with an answer and carried a trace id (or, without one,
    /// any when spans name requests by their request id): those a server span should exist for.
    pub requests: u64,
    /// Of them, joined to a server span with timing.
    pub joined: u64,
    /// Of them, never reported by the server (no span came within the wait), and the first.
    pub unreported: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreported_examples: Vec<u64>,
    /// Joined requests where the server's time exceeds the client's view beyond the
    /// tolerance, and the first.
    pub mismatched: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<Mismatch>,
    pub tolerance_ms: f64,
    /// The TTFT tails, decomposed (streamed requests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft: Vec<Tail>,
    /// The end-to-end tails, decomposed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e2e: Vec<Tail>,
    /// The slowest joined request (end to end): its timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<Timeline>,
    /// When nothing was joined: why, as far as the run can tell, and what this engine can
    /// provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none_because: Option<String>,
    /// Where the server's side came from when not from spans: the engine's per-answer timing
    /// (`llama.cpp timings`), or [`NO_SOURCE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A part the source does not state and the analysis derived, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
}

impl ServerSpans {
    /// A request the server said nothing of: counted, and named among the first.
    fn unreported(&mut self, index: u64) {
        self.unreported += 1;
        if self.unreported_examples.len() < EXAMPLES {
            self.unreported_examples.push(index);
        }
    }
}

/// How far the server's time may exceed its client's view before it is flagged, ms
/// (`traces.tolerance_ms`, 5 without a traces section).
fn tolerance_ms(c: &Contract) -> f64 {
    c.measurement
        .traces
        .as_ref()
        .map_or(5.0, |t| t.tolerance_ms.0)
}

/// A request whose server time exceeds its client's view of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mismatch {
    pub index: u64,
    /// `ttft` or `e2e`.
    pub what: String,
    /// The client's view from its send, and the server's, ms.
    pub client_ms: f64,
    pub server_ms: f64,
}

/// One latency split into its parts, ms; they add up to the latency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Parts {
    pub dispatch_ms: f64,
    pub client_ms: f64,
    pub server_other_ms: f64,
    pub queue_ms: f64,
    pub prefill_ms: f64,
    /// End-to-end only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_ms: Option<f64>,
    /// Prefill and decode as one, from an engine that does not split them (TGI's
    /// `x-inference-time`; prefill is then 0 and decode none). End-to-end only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_ms: Option<f64>,
}

impl Parts {
    /// The parts by name, in the order they happen.
    pub fn named(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("dispatch", self.dispatch_ms),
            ("client/network", self.client_ms),
            ("server other", self.server_other_ms),
            ("queue", self.queue_ms),
        ];
        match self.inference_ms {
            Some(i) => v.push(("prefill+decode", i)),
            None => {
                v.push(("prefill", self.prefill_ms));
                if let Some(d) = self.decode_ms {
                    v.push(("decode", d));
                }
            }
        }
        v
    }

    pub fn total(&self) -> f64 {
        self.named().iter().map(|p| p.1).sum()
    }

    /// The largest part's name.
    pub fn dominant(&self) -> &'static str {
        self.named()
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("", |p| p.0)
    }

    /// Each part to the microsecond (the records' resolution): no float residue of the
    /// subtractions reads as a part.
    fn rounded(self) -> Parts {
        let r = |v: f64| (v * 1000.0).round() / 1000.0;
        Parts {
            dispatch_ms: r(self.dispatch_ms),
            client_ms: r(self.client_ms),
            server_other_ms: r(self.server_other_ms),
            queue_ms: r(self.queue_ms),
            prefill_ms: r(self.prefill_ms),
            decode_ms: self.decode_ms.map(r),
            inference_ms: self.inference_ms.map(r),
        }
    }

    fn mean(all: &[Parts]) -> Parts {
        let n = all.len().max(1) as f64;
        let sum = |f: fn(&Parts) -> f64| all.iter().map(f).sum::<f64>() / n;
        let every = |f: fn(&Parts) -> Option<f64>| {
            all.iter()
                .all(|p| f(p).is_some())
                .then(|| all.iter().filter_map(f).sum::<f64>() / n)
        };
        Parts {
            dispatch_ms: sum(|p| p.dispatch_ms),
            client_ms: sum(|p| p.client_ms),
            server_other_ms: sum(|p| p.server_other_ms),
            queue_ms: sum(|p| p.queue_ms),
            prefill_ms: sum(|p| p.prefill_ms),
            decode_ms: every(|p| p.decode_ms),
            inference_ms: every(|p| p.inference_ms),
        }
    }
}

/// One percentile's tail: the requests at or above it, their parts averaged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tail {
    pub percentile: f64,
    /// The percentile over the joined requests, ms.
    pub value_ms: f64,
    /// The requests at or above it.
    pub requests: u64,
    /// Their parts, averaged (their sum is the tail's mean latency).
    pub parts: Parts,
    pub dominant: String,
}

/// One request's timeline: its client times and the server's parts, µs on the run's clock
/// (the server's start from its wall clock: right to the two clocks' agreement).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    pub index: u64,
    pub origin_us: u64,
    pub sent_us: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_us: Option<u64>,
    pub end_us: u64,
    pub server_start_us: i64,
    pub e2e: Parts,
}

/// One joined request.
struct Joined<'a> {
    rec: &'a Record,
    timing: ServerTiming,
    start_us: i64,
    ttft: Option<Parts>,
    e2e: Option<Parts>,
}

/// The steady requests' server time, joined and decomposed: from the engine's spans when the
/// run received them or listened for them (`[measurement.traces] listen`), else from the
/// timing its answers state. With neither, `None`, unless the engine is one whose source
/// goodput can name (`engine`, the target's identified engine): then what to turn on.
pub fn summarize(
    c: &Contract,
    steady: &[&Record],
    spans: &[SpanRecord],
    traces: Option<&crate::otlp::receiver::TracesStatus>,
    engine: Option<&str>,
) -> Option<ServerSpans> {
    let t = c.measurement.traces.as_ref();
    let listened = t.and_then(|t| t.listen.as_ref()).is_some();
    let timed = steady
        .iter()
        .any(|r| r.is_ok() && r.engine_timing.is_some_and(|t| t.states_time()));
    if spans.is_empty() && (timed || !listened) {
        return without_spans(c, steady, engine);
    }
    let tolerance_ms = tolerance_ms(c);
    // By trace id; and by the engine's request id (`gen_ai.request.id`), for an engine that
    // names a request by its `X-Request-Id` but did not continue its trace.
    let mut by_trace: HashMap<&str, (&SpanRecord, ServerTiming)> = HashMap::new();
    let mut by_request: HashMap<&str, (&SpanRecord, ServerTiming)> = HashMap::new();
    for s in spans {
        if let Some(timing) = ServerTiming::of(s) {
            by_trace.entry(s.trace_id.as_str()).or_insert((s, timing));
            if let Some(id) = s
                .attributes
                .get(crate::otlp::ATTR_REQUEST_ID)
                .and_then(|v| v.as_str())
            {
                by_request.entry(id).or_insert((s, timing));
            }
        }
    }
    let by_request_id = |r: &Record| {
        ["", "chatcmpl-", "cmpl-"].iter().find_map(|p| {
            by_request
                .get(format!("{p}{}", r.request_id).as_str())
                .copied()
        })
    };
    let mut out = ServerSpans {
        spans: spans.len() as u64,
        tolerance_ms,
        ..Default::default()
    };
    let mut joined = Vec::new();
    for r in steady.iter().filter(|r| r.is_ok()) {
        let traced = r
            .trace_id
            .as_deref()
            .and_then(|id| by_trace.get(id).copied());
        if r.trace_id.is_none() && traced.is_none() && by_request.is_empty() {
            continue;
        }
        out.requests += 1;
        let Some((span, timing)) = traced.or_else(|| by_request_id(r)) else {
            out.unreported(r.index);
            continue;
        };
        let j = join(r, span, timing, c);
        check(&j, tolerance_ms, &mut out);
        joined.push(j);
    }
    decompose(&mut out, &joined);
    if out.joined == 0 {
        out.none_because = Some(why_none(&out, traces, spans, engine));
    }
    Some(out)
}

/// A run without spans: the timing its answers state, else (with neither) what its engine
/// can provide, when goodput can name it.
fn without_spans(c: &Contract, steady: &[&Record], engine: Option<&str>) -> Option<ServerSpans> {
    if steady
        .iter()
        .any(|r| r.is_ok() && r.engine_timing.is_some_and(|t| t.states_time()))
    {
        return Some(from_answers(c, steady));
    }
    let advice = no_source(engine)?;
    Some(ServerSpans {
        requests: steady.iter().filter(|r| r.is_ok()).count() as u64,
        source: Some(NO_SOURCE.to_owned()),
        tolerance_ms: tolerance_ms(c),
        none_because: Some(advice),
        ..Default::default()
    })
}

/// What an engine with no source this run had can provide, and how to turn it on; `None` for
/// an engine goodput cannot name a source of (the simulator, whose answers carry `timings`
/// with `--set timings=true`, says nothing unless asked).
fn no_source(engine: Option<&str>) -> Option<String> {
    Some(match engine? {
        "vllm" => "vLLM states each request's queue, prefill and decode in its spans: start it with --otlp-traces-endpoint http://HOST:PORT (with the OpenTelemetry packages installed) and give the contract [measurement.traces] listen = \"HOST:PORT\"".to_owned(),
        "llama.cpp" => "llama.cpp states each request's prefill and decode in its answers' `timings`, and none came: a llama-server too old to send them, or a proxy between that drops them".to_owned(),
        // SGLang (checked in its tokenizer_manager.py, 2025–2026): per-request timestamps
        // (`request_received_ts`, `prefill_finished_ts`, `decode_finished_ts`) and
        // `inference_time` go into the `meta_info` of its native /generate answers only, with
        // --enable-metrics; its OpenAI layer's answers carry none.
        "sglang" => "SGLang states per-request timing only in its native /generate answers' meta_info (with --enable-metrics), which goodput does not speak; its OpenAI answers carry none (start it with --enable-cache-report for cached tokens in usage): TTFT cannot be split here".to_owned(),
        "tgi" => "TGI states each request's queue and inference time in the headers of whole answers only (x-queue-time, x-inference-time): run with workload.stream = false to split the end-to-end time (TTFT is then not measured); its streamed answers carry none".to_owned(),
        _ => return None,
    })
}

/// The steady requests joined to the timing their answers state (the records'
/// `engine_timing`): prefill and decode as stated, the queue as stated or derived.
fn from_answers(c: &Contract, steady: &[&Record]) -> ServerSpans {
    let ok: Vec<&Record> = steady.iter().copied().filter(|r| r.is_ok()).collect();
    let tolerance_ms = tolerance_ms(c);
    let mut out = ServerSpans {
        requests: ok.len() as u64,
        tolerance_ms,
        ..Default::default()
    };
    let stated: Vec<(&Record, EngineTiming)> = ok
        .iter()
        .filter_map(|r| Some((*r, r.engine_timing?)))
        .filter(|(r, t)| {
            r.sent_us.is_some()
                && r.end_us.is_some()
                && (t.prefill_us.is_some() || t.inference_us.is_some())
        })
        .collect();
    for r in ok
        .iter()
        .filter(|r| !r.engine_timing.is_some_and(|t| t.states_time()))
    {
        out.unreported(r.index);
    }
    out.source = stated.first().map(|(_, t)| t.source.name().to_owned());
    let floor = stated
        .iter()
        .map(|(r, t)| unstated(r, t))
        .fold(f64::INFINITY, f64::min)
        .max(0.0);
    let floor = if floor.is_finite() { floor } else { 0.0 };
    if stated.iter().any(|(_, t)| t.queue_us.is_none()) {
        out.derived = Some(format!(
            "queue is derived: the engine states prefill and decode, not the wait before them, so each request's time to first token from its send less its prefill is its queue plus the network and the server's own handling, and the run's smallest such remainder ({floor:.2} ms) is taken as that constant part (client/network){}",
            // The floor is the least of the remainders: over a few requests it may still hold
            // a wait or a first connection's setup, and every derived queue is short by it.
            if stated.len() < FEW {
                format!(
                    "; over {} requests that floor is rough, and so is each queue",
                    stated.len()
                )
            } else {
                String::new()
            }
        ));
    }
    let joined: Vec<Joined> = stated
        .iter()
        .map(|(r, t)| answered(r, t, floor, c))
        .collect();
    for j in &joined {
        check(j, tolerance_ms, &mut out);
    }
    decompose(&mut out, &joined);
    if out.joined == 0 {
        out.none_because = Some("no steady answer stated its timing".into());
    }
    out
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// What the engine's statement leaves of a request's time from its send, ms, its queue
/// included: to the first token less the server's own handling and prefill when streamed
/// (and prefill stated), else to the end less those, decode and inference.
fn unstated(r: &Record, t: &EngineTiming) -> f64 {
    let sent = r.sent_us.unwrap_or_default() as f64;
    let stated = |v: Option<u64>| v.map_or(0.0, ms);
    let before = stated(t.other_us) + stated(t.prefill_us);
    match r.first_token_us.filter(|_| t.prefill_us.is_some()) {
        Some(first) => (first as f64 - sent) / 1000.0 - before,
        None => {
            let end = r.end_us.unwrap_or_default() as f64;
            (end - sent) / 1000.0 - before - stated(t.decode_us) - stated(t.inference_us)
        }
    }
}

/// A record and the timing its answer stated: its parts, the queue as stated or as what the
/// statement leaves less `floor` (the run's constant client/network part).
fn answered<'a>(r: &'a Record, t: &EngineTiming, floor: f64, c: &Contract) -> Joined<'a> {
    let sent = r.sent_us.unwrap_or_default();
    let since = |a: u64, b: u64| (b as f64 - a as f64) / 1000.0;
    let dispatch = since(origin_of(r, c), sent);
    let other = t.other_us.map_or(0.0, ms);
    let prefill = t.prefill_us.map_or(0.0, ms);
    let decode = t.decode_us.map(ms);
    let inference = t.inference_us.map(ms);
    let rest = unstated(r, t);
    let (queue, network) = match t.queue_us {
        Some(q) => (ms(q), rest - ms(q)),
        None => (rest - floor, floor),
    };
    // The server's time to its first token (when it states prefill apart) and to its end,
    // with the queue as stated or derived; and what the engine itself states of them (a
    // derived queue is none of its statement).
    let after = decode.unwrap_or(0.0) + inference.unwrap_or(0.0);
    let (server_ttft, server_e2e) = (other + queue + prefill, other + queue + prefill + after);
    let stated_ttft = other + t.queue_us.map_or(0.0, ms) + prefill;
    let parts = |to: u64, server: f64, e2e: bool| Parts {
        dispatch_ms: dispatch,
        client_ms: since(sent, to) - server,
        server_other_ms: other,
        queue_ms: queue,
        prefill_ms: prefill,
        decode_ms: (e2e && inference.is_none()).then(|| decode.unwrap_or(0.0)),
        inference_ms: inference.filter(|_| e2e),
    };
    Joined {
        rec: r,
        // What the engine itself states of its TTFT and end-to-end time (a mismatch is one
        // beyond its client's view).
        timing: ServerTiming {
            queue_s: t.queue_us.map(|q| ms(q) / 1000.0),
            ttft_s: r
                .first_token_us
                .filter(|_| t.prefill_us.is_some())
                .map(|_| stated_ttft / 1000.0),
            prefill_s: t.prefill_us.map(|_| prefill / 1000.0),
            decode_s: decode.map(|d| d / 1000.0),
            e2e_s: Some((stated_ttft + after) / 1000.0),
        },
        start_us: (sent as f64 + network * 1000.0) as i64,
        ttft: r
            .first_token_us
            .filter(|_| t.prefill_us.is_some())
            .map(|f| parts(f, server_ttft, false).rounded()),
        e2e: r.end_us.map(|e| parts(e, server_e2e, true).rounded()),
    }
}

/// The latency origin of a record: its intended send, or its send (`measurement.latency_origin`).
fn origin_of(r: &Record, c: &Contract) -> u64 {
    let sent = r.sent_us.unwrap_or_default();
    match c.measurement.latency_origin {
        crate::contract::LatencyOrigin::Intended => r.intended_us.unwrap_or(sent).min(sent),
        crate::contract::LatencyOrigin::Sent => sent,
    }
}

/// The joined requests' tails and slowest timeline, whatever the source.
fn decompose(out: &mut ServerSpans, joined: &[Joined]) {
    out.joined = joined.len() as u64;
    out.ttft = tails(joined, |j| j.ttft);
    out.e2e = tails(joined, |j| j.e2e);
    out.slowest = joined
        .iter()
        .filter(|j| j.e2e.is_some())
        .max_by(|a, b| {
            let e = |j: &Joined| j.e2e.map_or(0.0, |p| p.total());
            e(a).total_cmp(&e(b))
        })
        .and_then(timeline);
}

/// A record and its span: the parts of its TTFT and end-to-end latency.
fn join<'a>(r: &'a Record, span: &SpanRecord, timing: ServerTiming, c: &Contract) -> Joined<'a> {
    let ms = |a: u64, b: u64| (b as f64 - a as f64) / 1000.0;
    let sent = r.sent_us.unwrap_or_default();
    let origin = origin_of(r, c);
    let queue = timing.queue_s.unwrap_or(0.0) * 1000.0;
    let prefill = timing.prefill_s.unwrap_or(0.0) * 1000.0;
    let ttft = r.first_token_us.zip(timing.ttft_s).map(|(first, s)| {
        let server = s * 1000.0;
        Parts {
            dispatch_ms: ms(origin, sent),
            client_ms: ms(sent, first) - server,
            server_other_ms: server - queue - prefill,
            queue_ms: queue,
            prefill_ms: prefill,
            decode_ms: None,
            inference_ms: None,
        }
    });
    let e2e = r.end_us.zip(timing.e2e_s).map(|(end, s)| {
        let server = s * 1000.0;
        let decode = timing.decode_s.unwrap_or(0.0) * 1000.0;
        Parts {
            dispatch_ms: ms(origin, sent),
            client_ms: ms(sent, end) - server,
            server_other_ms: server - queue - prefill - decode,
            queue_ms: queue,
            prefill_ms: prefill,
            decode_ms: Some(decode),
            inference_ms: None,
        }
    });
    Joined {
        rec: r,
        timing,
        start_us: span.start_us,
        ttft: ttft.map(Parts::rounded),
        e2e: e2e.map(Parts::rounded),
    }
}

/// Flags a request whose server time exceeds its client's view beyond the tolerance.
fn check(j: &Joined, tolerance_ms: f64, out: &mut ServerSpans) {
    let r = j.rec;
    let sent = r.sent_us.unwrap_or_default();
    let client = |t: Option<u64>| t.map(|t| (t as f64 - sent as f64) / 1000.0);
    let pairs = [
        ("ttft", client(r.first_token_us), j.timing.ttft_s),
        ("e2e", client(r.end_us), j.timing.e2e_s),
    ];
    let mut flagged = false;
    for (what, client_ms, server_s) in pairs {
        let (Some(client_ms), Some(server_s)) = (client_ms, server_s) else {
            continue;
        };
        let server_ms = server_s * 1000.0;
        if server_ms > client_ms + tolerance_ms {
            flagged = true;
            if out.mismatches.len() < EXAMPLES {
                out.mismatches.push(Mismatch {
                    index: r.index,
                    what: what.into(),
                    client_ms,
                    server_ms,
                });
            }
        }
    }
    out.mismatched += u64::from(flagged);
}

/// Each percentile's tail: the requests at or above it, their parts averaged.
fn tails(joined: &[Joined], parts: fn(&Joined) -> Option<Parts>) -> Vec<Tail> {
    let mut all: Vec<Parts> = joined.iter().filter_map(parts).collect();
    all.sort_by(|a, b| a.total().total_cmp(&b.total()));
    let totals: Vec<f64> = all.iter().map(Parts::total).collect();
    TAILS
        .iter()
        .filter_map(|&p| {
            let value_ms = crate::stats::percentile_sorted(&totals, p)?;
            let at = totals.partition_point(|&t| t < value_ms);
            // The interpolated value can lie between two requests: the tail starts at the
            // last request at or below it when none is above.
            let tail = &all[at.min(all.len().saturating_sub(1))..];
            let mean = Parts::mean(tail);
            Some(Tail {
                percentile: p,
                value_ms,
                requests: tail.len() as u64,
                dominant: mean.dominant().to_owned(),
                parts: mean,
            })
        })
        .collect()
}

fn timeline(j: &Joined) -> Option<Timeline> {
    let r = j.rec;
    let sent = r.sent_us?;
    Some(Timeline {
        index: r.index,
        origin_us: r.intended_us.unwrap_or(sent).min(sent),
        sent_us: sent,
        first_token_us: r.first_token_us,
        end_us: r.end_us?,
        server_start_us: j.start_us,
        e2e: j.e2e?,
    })
}

/// Why no steady request was joined to a span.
fn why_none(
    out: &ServerSpans,
    traces: Option<&crate::otlp::receiver::TracesStatus>,
    spans: &[SpanRecord],
    engine: Option<&str>,
) -> String {
    let receiver = traces.and_then(|t| t.receiver.as_ref());
    let refused = receiver.map_or(0, |r| r.refused);
    let other_traces = receiver.map_or(0, |r| r.other_traces);
    let address = receiver.map_or("the receiver's address", |r| r.address.as_str());
    if out.requests == 0 {
        return "no steady request finished with a trace id (measurement.traces.propagate = false, or every request failed)".into();
    }
    if refused > 0 {
        let reason = receiver
            .and_then(|r| r.reasons.first())
            .map_or("", String::as_str);
        return format!("the engine's exports were refused ({refused} of them): {reason}");
    }
    if !spans.is_empty() {
        return format!(
            "{} spans of the run's traces came, none with a request's timing (gen_ai.latency.* attributes, as vLLM's llm_request spans carry)",
            spans.len()
        );
    }
    if other_traces > 0 {
        return format!(
            "{other_traces} spans came, none of this run's traces: the engine did not continue the traceparent goodput sent (does it read it?)"
        );
    }
    match engine {
        Some("vllm") | None => format!(
            "no span came to {address}: is the engine exporting there (vLLM: --otlp-traces-endpoint http://{address}, with the OpenTelemetry packages installed)? Its exporter may also batch for longer than measurement.traces.wait"
        ),
        Some(e) => match no_source(Some(e)) {
            Some(advice) => format!("no span came to {address}; {advice}"),
            None => format!(
                "no span came to {address}: is the engine ({e}) exporting OpenTelemetry spans there? Its exporter may also batch for longer than measurement.traces.wait"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Phase;

    /// A steady request intended at 0, sent at 1 ms, first token at 31 ms, ended at 101 ms.
    fn record(index: u64) -> Record {
        let mut r = Record::in_flight(index, Phase::Steady, 0);
        r.outcome = crate::record::Outcome::Ok;
        r.trace_id = Some(format!("{index:032x}"));
        (r.sent_us, r.first_token_us, r.end_us) = (Some(1_000), Some(31_000), Some(101_000));
        r
    }

    fn span(index: u64, queue: f64, prefill: f64, ttft: f64, e2e: f64) -> SpanRecord {
        use crate::otlp::*;
        SpanRecord {
            trace_id: format!("{index:032x}"),
            span_id: "01".into(),
            parent_span_id: None,
            name: "llm_request".into(),
            service: None,
            start_unix_ns: 0,
            end_unix_ns: 0,
            start_us: 2_000,
            received_us: 0,
            attributes: [
                (ATTR_QUEUE, queue),
                (ATTR_PREFILL, prefill),
                (ATTR_TTFT, ttft),
                (ATTR_E2E, e2e),
                (ATTR_DECODE, e2e - ttft),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), serde_json::json!(v)))
            .collect(),
        }
    }

    #[test]
    fn parts_add_up_and_a_server_that_saw_more_than_its_client_is_flagged() {
        let c = crate::contract::parse(
            "[load]\nkind = \"open\"\nrate = 1\nrequests = 3\n[measurement.traces]\nlisten = \"127.0.0.1:0\"\ntolerance_ms = 5",
            std::path::Path::new("t"),
        )
        .unwrap();
        let recs: Vec<Record> = (0..3).map(record).collect();
        let steady: Vec<&Record> = recs.iter().collect();
        // Request 0: queue 10 ms, prefill 15 ms, server TTFT 28 ms of the client's 30 from its
        // send. Request 1: the server claims a 40 ms TTFT, beyond the client's 30 + 5. Request
        // 2: no span.
        let spans = [
            span(0, 0.010, 0.015, 0.028, 0.098),
            span(1, 0.0, 0.035, 0.040, 0.099),
        ];
        let s = summarize(&c, &steady, &spans, None, None).unwrap();
        assert_eq!((s.requests, s.joined, s.unreported), (3, 2, 1));
        assert_eq!(s.unreported_examples, vec![2]);
        assert_eq!(s.mismatched, 1);
        assert_eq!(
            (s.mismatches[0].index, s.mismatches[0].what.as_str()),
            (1, "ttft")
        );
        let j = join(
            &recs[0],
            &spans[0],
            ServerTiming::of(&spans[0]).unwrap(),
            &c,
        );
        let p = j.ttft.unwrap();
        assert_eq!(
            (
                p.dispatch_ms,
                p.client_ms,
                p.server_other_ms,
                p.queue_ms,
                p.prefill_ms
            ),
            (1.0, 2.0, 3.0, 10.0, 15.0)
        );
        assert!(
            (p.total() - 31.0).abs() < 1e-9,
            "TTFT from the intended send"
        );
        let e = j.e2e.unwrap();
        assert!((e.total() - 101.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.dominant(), "decode");

        // Without trace context, a span that names the request by its X-Request-Id (as vLLM
        // does, `chatcmpl-` before it) still joins it.
        let mut r = record(3);
        (r.trace_id, r.request_id) = (None, "run-3".into());
        let mut s3 = span(9, 0.0, 0.010, 0.020, 0.090);
        s3.attributes.insert(
            crate::otlp::ATTR_REQUEST_ID.into(),
            serde_json::json!("chatcmpl-run-3"),
        );
        assert_eq!(crate::otlp::request_index(&s3, "run"), Some(3));
        let s = summarize(&c, &[&r], &[s3], None, None).unwrap();
        assert_eq!((s.requests, s.joined), (1, 1));
    }

    /// A run with no source of the server's side names what its own engine provides, never
    /// another engine's: vLLM's spans for vLLM, llama.cpp's timings for llama.cpp; the
    /// simulator and an unknown engine get no section.
    #[test]
    fn no_source_names_what_this_engine_provides() {
        let c = crate::contract::parse(
            "[load]\nkind = \"open\"\nrate = 1\nrequests = 3\n",
            std::path::Path::new("t"),
        )
        .unwrap();
        let recs: Vec<Record> = (0..3).map(record).collect();
        let steady: Vec<&Record> = recs.iter().collect();
        let said = |engine| {
            summarize(&c, &steady, &[], None, Some(engine))
                .and_then(|s| {
                    assert_eq!(s.source.as_deref(), Some(NO_SOURCE));
                    s.none_because
                })
                .unwrap_or_default()
        };
        assert!(
            said("vllm").contains("--otlp-traces-endpoint"),
            "{}",
            said("vllm")
        );
        let llama = said("llama.cpp");
        assert!(
            llama.contains("timings") && !llama.contains("otlp"),
            "{llama}"
        );
        let tgi = said("tgi");
        assert!(
            tgi.contains("x-queue-time") && tgi.contains("stream = false"),
            "{tgi}"
        );
        let sglang = said("sglang");
        assert!(
            sglang.contains("--enable-cache-report") && !sglang.contains("otlp-traces-endpoint"),
            "{sglang}"
        );
        assert!(summarize(&c, &steady, &[], None, Some("goodput-sim")).is_none());
        assert!(summarize(&c, &steady, &[], None, None).is_none());
        // Listening for spans that never came on llama.cpp: its own source, not vLLM's flag.
        let listening = crate::contract::parse(
            "[load]\nkind = \"open\"\nrate = 1\nrequests = 3\n[measurement.traces]\nlisten = \"127.0.0.1:0\"\n",
            std::path::Path::new("t"),
        )
        .unwrap();
        let s = summarize(&listening, &steady, &[], None, Some("llama.cpp")).unwrap();
        let why = s.none_because.unwrap();
        assert!(why.contains("timings") && !why.contains("--otlp"), "{why}");
    }
}
