//! Ground truth: what the simulator did for every request, recorded as it happens so tests can
//! check the client's measurements against it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One request as the server saw it. Times are microseconds since the simulator started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// Arrival number at the server (0-based).
    pub seq: u64,
    /// The client's `X-Request-Id` header, when it sent one.
    pub request_id: Option<String>,
    /// The client's W3C `traceparent` header, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// When the request body had been read.
    pub arrival_us: u64,
    /// When it joined the running batch.
    pub admitted_us: Option<u64>,
    /// When its first token was emitted.
    pub first_token_us: Option<u64>,
    /// Every emitted chunk: (time, tokens in it).
    pub chunks: Vec<(u64, u32)>,
    /// When the last token was emitted, or the request ended otherwise.
    pub end_us: u64,
    /// Prompt tokens as the simulator counted them.
    pub prompt_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
    /// Tokens generated.
    pub output_tokens: u32,
    /// The first this many of them are reasoning (streamed as `reasoning_content`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u32,
    /// The prompt's text as received (its messages joined by newlines), with
    /// `record_prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Admission minus arrival.
    pub queue_us: Option<u64>,
    pub outcome: SimOutcome,
    /// Images in the request, and the prompt tokens they are (counted in `prompt_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub image_tokens: u32,
    /// Its images the encoder cache held, and the encoding of the others, µs (added to the
    /// step that admitted it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images_cached: u32,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub vision_us: u64,
    /// Tool calls its answer made (a request that offered tools), and what the simulator made
    /// wrong in them (`truncated`, `wrong_value`, `wrong_name`, `no_call`; absent: nothing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_error: Option<String>,
    /// Speculative decoding: draft tokens proposed for it, and those accepted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_tokens: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_accepted: u32,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// How the simulator ended a request; written in the ground truth as `ok`, `error_<status>`,
/// `refused_loading`, `rejected_too_long`, `dropped`, `malformed` or `client_gone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimOutcome {
    Ok,
    /// An injected error status (`faults.error_rate`).
    Error(u16),
    /// Sent while the model was loading (503).
    RefusedLoading,
    /// A prompt longer than the KV cache could ever hold.
    RejectedTooLong,
    /// The connection dropped mid-stream (`faults.drop_rate`).
    Dropped,
    /// A malformed event injected mid-stream (`faults.malformed_rate`).
    Malformed,
    /// The client went away before its answer ended.
    ClientGone,
}

impl std::fmt::Display for SimOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimOutcome::Ok => f.write_str("ok"),
            SimOutcome::Error(status) => write!(f, "error_{status}"),
            SimOutcome::RefusedLoading => f.write_str("refused_loading"),
            SimOutcome::RejectedTooLong => f.write_str("rejected_too_long"),
            SimOutcome::Dropped => f.write_str("dropped"),
            SimOutcome::Malformed => f.write_str("malformed"),
            SimOutcome::ClientGone => f.write_str("client_gone"),
        }
    }
}

impl std::str::FromStr for SimOutcome {
    type Err = String;
    fn from_str(s: &str) -> Result<SimOutcome, String> {
        Ok(match s {
            "ok" => SimOutcome::Ok,
            "refused_loading" => SimOutcome::RefusedLoading,
            "rejected_too_long" => SimOutcome::RejectedTooLong,
            "dropped" => SimOutcome::Dropped,
            "malformed" => SimOutcome::Malformed,
            "client_gone" => SimOutcome::ClientGone,
            _ => match s.strip_prefix("error_").map(str::parse) {
                Some(Ok(status)) => SimOutcome::Error(status),
                _ => return Err(format!("unknown simulator outcome {s:?}")),
            },
        })
    }
}

impl Serialize for SimOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SimOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SimOutcome, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Converts seconds on the simulator clock to whole microseconds.
pub fn us(t: f64) -> u64 {
    (t * 1e6).round().max(0.0) as u64
}

/// Requests in progress, keyed by arrival number.
#[derive(Debug, Default)]
pub struct Ledger {
    open: HashMap<u64, GroundTruth>,
}

impl Ledger {
    pub fn arrive(&mut self, seq: u64, request_id: Option<String>, t: f64, prompt_tokens: u32) {
        self.open.insert(
            seq,
            GroundTruth {
                seq,
                request_id,
                traceparent: None,
                arrival_us: us(t),
                admitted_us: None,
                first_token_us: None,
                chunks: Vec::new(),
                end_us: us(t),
                prompt_tokens,
                cached_tokens: 0,
                output_tokens: 0,
                reasoning_tokens: 0,
                prompt: None,
                queue_us: None,
                outcome: SimOutcome::Ok,
                images: 0,
                image_tokens: 0,
                images_cached: 0,
                vision_us: 0,
                tool_calls: 0,
                tool_error: None,
                draft_tokens: 0,
                draft_accepted: 0,
            },
        );
    }

    /// Records admission; returns the queue time in seconds.
    pub fn admit(&mut self, seq: u64, t: f64, cached: u32) -> Option<f64> {
        let g = self.open.get_mut(&seq)?;
        let at = us(t);
        g.admitted_us = Some(at);
        g.cached_tokens = cached;
        let q = at.saturating_sub(g.arrival_us);
        g.queue_us = Some(q);
        Some(q as f64 / 1e6)
    }

    /// Records a chunk; returns the TTFT in seconds when this was the first one.
    pub fn chunk(&mut self, seq: u64, t: f64, tokens: u32) -> Option<f64> {
        let g = self.open.get_mut(&seq)?;
        let at = us(t);
        g.chunks.push((at, tokens));
        g.output_tokens += tokens;
        if g.first_token_us.is_none() {
            g.first_token_us = Some(at);
            return Some(at.saturating_sub(g.arrival_us) as f64 / 1e6);
        }
        None
    }

    /// Keeps the request's trace context.
    pub fn set_trace(&mut self, seq: u64, traceparent: Option<String>) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.traceparent = traceparent;
        }
    }

    /// Records how many of the request's first tokens will be reasoning.
    /// Keeps the prompt's text (`record_prompts`).
    pub fn set_prompt(&mut self, seq: u64, prompt: String) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.prompt = Some(prompt);
        }
    }

    /// Records a request's images: how many, and their prompt tokens.
    pub fn set_images(&mut self, seq: u64, images: u32, tokens: u32) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.images = images;
            g.image_tokens = tokens;
        }
    }

    /// Records its images' encoding: those the cache held, and the time of the others.
    pub fn encoded(&mut self, seq: u64, hits: u32, vision_us: u64) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.images_cached = hits;
            g.vision_us = vision_us;
        }
    }

    /// Records its drafts (speculative decoding).
    pub fn drafted(&mut self, seq: u64, drafted: u32, accepted: u32) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.draft_tokens = drafted;
            g.draft_accepted = accepted;
        }
    }

    pub fn set_reasoning(&mut self, seq: u64, tokens: u32) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.reasoning_tokens = tokens;
        }
    }

    /// Marks how the request will end (a fault decided on arrival), without closing it.
    pub fn set_outcome(&mut self, seq: u64, outcome: SimOutcome) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.outcome = outcome;
        }
    }

    /// Closes a request at `t` with `outcome` (unless a fault outcome was already set).
    pub fn finish(&mut self, seq: u64, t: f64, outcome: SimOutcome) -> Option<GroundTruth> {
        let mut g = self.open.remove(&seq)?;
        g.end_us = us(t);
        if g.outcome == SimOutcome::Ok {
            g.outcome = outcome;
        }
        Some(g)
    }
}

impl GroundTruth {
    /// Its timing as an engine states it: queue from arrival to admission, prefill from
    /// admission to the first token, decode from there to the last; `None` before it was
    /// admitted and answered.
    pub(crate) fn timings(&self) -> Option<super::wire::Timings> {
        let (admitted, first) = (self.admitted_us?, self.first_token_us?);
        Some(super::wire::Timings {
            queue_us: admitted.saturating_sub(self.arrival_us),
            prefill_us: first.saturating_sub(admitted),
            decode_us: self.end_us.saturating_sub(first),
            prompt_n: self.prompt_tokens.saturating_sub(self.cached_tokens),
            cache_n: self.cached_tokens,
            predicted_n: self.output_tokens,
            drafts: (self.draft_tokens > 0).then_some((self.draft_tokens, self.draft_accepted)),
        })
    }

    /// The server span of a finished request, as vLLM's exporter writes it (`llm_request`, its
    /// latency attributes in seconds), from the simulator's ground truth: it continues the
    /// client's trace, or starts one of its own. `epoch_unix_ns`: the wall-clock time of the
    /// simulator clock's zero. `None` for a request that did not finish normally (vLLM traces
    /// only those).
    pub fn span(&self, epoch_unix_ns: u64, model: &str) -> Option<crate::otlp::proto::Span> {
        use crate::otlp::proto::{Value, kv};
        use crate::otlp::*;
        if self.outcome != SimOutcome::Ok {
            return None;
        }
        let (trace_id, parent) = match self.traceparent.as_deref().and_then(parse_traceparent) {
            Some((t, p)) => (hex::decode(t).ok()?, hex::decode(p).ok()?),
            None => (
                [
                    crate::text::mix64(self.seq).to_be_bytes(),
                    (self.seq + 1).to_be_bytes(),
                ]
                .concat(),
                Vec::new(),
            ),
        };
        let s = |a: u64, b: u64| Value::Double(b.saturating_sub(a) as f64 / 1e6);
        let first = self.first_token_us.unwrap_or(self.end_us);
        let admitted = self.admitted_us.unwrap_or(self.arrival_us);
        let mut attributes = vec![
            kv(ATTR_TTFT, s(self.arrival_us, first)),
            kv(ATTR_E2E, s(self.arrival_us, self.end_us)),
            kv(ATTR_QUEUE, s(self.arrival_us, admitted)),
            kv(ATTR_PREFILL, s(admitted, first)),
            kv(ATTR_DECODE, s(first, self.end_us)),
            kv(ATTR_INFERENCE, s(admitted, self.end_us)),
            kv(ATTR_PROMPT_TOKENS, Value::Int(self.prompt_tokens.into())),
            kv(
                ATTR_COMPLETION_TOKENS,
                Value::Int(self.output_tokens.into()),
            ),
            kv("gen_ai.response.model", Value::String(model.to_owned())),
        ];
        if let Some(id) = &self.request_id {
            attributes.push(kv(ATTR_REQUEST_ID, Value::String(id.clone())));
        }
        Some(proto::Span {
            trace_id,
            span_id: (crate::text::mix64(self.seq ^ 0x5eed) | 1)
                .to_be_bytes()
                .to_vec(),
            parent_span_id: parent,
            name: "llm_request".into(),
            kind: proto::KIND_SERVER,
            start_time_unix_nano: epoch_unix_ns + self.arrival_us * 1000,
            end_time_unix_nano: epoch_unix_ns + self.end_us * 1000,
            attributes,
            ..Default::default()
        })
    }
}
