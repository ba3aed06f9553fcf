//! What an engine says of one request's time in its own answer, beside the tokens. One reader
//! per engine, each converting its units to µs once, here:
//!
//! - **llama.cpp**: the `timings` object of llama-server's answers (the last event of a
//!   stream, and a whole answer), written by `result_timings::to_json` in its `tools/server`:
//!   `prompt_ms` (the slot's prompt processing, from its start to the first token sampled:
//!   prefill), `predicted_ms` (first token sampled to the last: decode), `prompt_n` (prompt
//!   tokens evaluated), `cache_n` (prompt tokens reused from the slot's cache; -1 when not
//!   set), `predicted_n`. It says nothing of the time a request waited for a free slot.
//! - **TGI**: the headers of a whole answer (`/generate`, and its OpenAI layer unstreamed),
//!   written by `generate_internal` in its router's `server.rs` (checked at v3.3.7):
//!   `x-validation-time` (the request's validation and tokenizing: the server's own handling),
//!   `x-queue-time` (queued to its batch's start), `x-inference-time` (the batch's start to the
//!   last token: prefill and decode as one, not split), `x-generated-tokens`, each time in whole
//!   milliseconds (truncated). A streamed answer's head carries none of them.
//!
//! Durations only: joining them to the client's times needs no clock agreement.

use serde::{Deserialize, Serialize};

/// The longest engine time believed, µs: a day (a request's own timeout is far less). A value
/// beyond it, negative or not finite is left out rather than made a headline.
const MAX_US: f64 = 86_400e6;

/// One request's time and prompt cache, as its engine stated them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTiming {
    /// Which engine's fields these are.
    pub source: TimingSource,
    /// The server's own handling outside queue and model (validating, tokenizing), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_us: Option<u64>,
    /// Waiting to be scheduled, µs, when the engine says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_us: Option<u64>,
    /// Prefill: the prompt's processing to the first token, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_us: Option<u64>,
    /// Decode: the first token to the last, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_us: Option<u64>,
    /// Prefill and decode as one, µs, from an engine that does not split them (TGI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_us: Option<u64>,
    /// Prompt tokens the engine evaluated (those its cache did not serve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// Prompt tokens served from its prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    /// Tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// Speculative decoding: draft tokens proposed for this request, and those the target
    /// model accepted (their ratio is the request's acceptance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_accepted: Option<u32>,
}

impl EngineTiming {
    /// Whether it states any of the request's time (not only its drafts).
    pub fn states_time(&self) -> bool {
        self.queue_us.is_some()
            || self.prefill_us.is_some()
            || self.decode_us.is_some()
            || self.inference_us.is_some()
    }

    /// The request's draft acceptance (accepted / proposed), when the engine stated both and
    /// proposed any.
    pub fn acceptance(&self) -> Option<f64> {
        match (self.draft_tokens, self.draft_accepted) {
            (Some(d), Some(a)) if d > 0 => Some(f64::from(a) / f64::from(d)),
            _ => None,
        }
    }
}

/// Whose per-answer timing fields a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimingSource {
    /// llama-server's `timings` object.
    #[serde(rename = "llama.cpp timings")]
    LlamaCpp,
    /// TGI's `x-queue-time`, `x-inference-time`, … headers.
    #[serde(rename = "TGI headers")]
    Tgi,
    /// vLLM's per-request `metrics` (its speculative decoding, its queue time when the server
    /// states per-request metrics).
    #[serde(rename = "vLLM metrics")]
    Vllm,
}

impl TimingSource {
    pub fn name(self) -> &'static str {
        match self {
            TimingSource::LlamaCpp => "llama.cpp timings",
            TimingSource::Tgi => "TGI headers",
            TimingSource::Vllm => "vLLM metrics",
        }
    }

    /// What this source leaves out or rounds, in words, when it does.
    pub fn caveat(self) -> Option<&'static str> {
        match self {
            TimingSource::LlamaCpp => None,
            TimingSource::Vllm => Some(
                "vLLM states a request's queue time only with per-request metrics enabled, and its prefill and decode not at all",
            ),
            TimingSource::Tgi => Some(
                "TGI states its times in whole milliseconds (truncated) and prefill and decode as one (x-inference-time), and only on whole answers: its streamed answers carry none",
            ),
        }
    }

    /// The source a report names, back from its name.
    pub fn named(name: &str) -> Option<TimingSource> {
        [
            TimingSource::LlamaCpp,
            TimingSource::Tgi,
            TimingSource::Vllm,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// A time an engine stated in ms, to µs; `None` for one no request takes (negative, not
/// finite, beyond a day).
fn ms_to_us(ms: f64) -> Option<u64> {
    let us = ms * 1000.0;
    (us.is_finite() && (0.0..=MAX_US).contains(&us)).then(|| us.round() as u64)
}

/// TGI's timing headers of one answer (`header`: a header's value by its lower-case name), when
/// it sent them: at least its inference time.
pub(crate) fn tgi_headers<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<EngineTiming> {
    let ms = |name: &str| {
        header(name)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(ms_to_us)
    };
    let inference_us = Some(ms("x-inference-time")?);
    Some(EngineTiming {
        source: TimingSource::Tgi,
        other_us: ms("x-validation-time"),
        queue_us: ms("x-queue-time"),
        prefill_us: None,
        decode_us: None,
        inference_us,
        prompt_tokens: None,
        cached_tokens: None,
        output_tokens: header("x-generated-tokens").and_then(|v| v.trim().parse().ok()),
        draft_tokens: None,
        draft_accepted: None,
    })
}

/// llama-server's `timings` object, as it writes it.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct LlamaTimings {
    #[serde(default)]
    cache_n: Option<i64>,
    #[serde(default)]
    prompt_n: Option<i64>,
    #[serde(default)]
    prompt_ms: Option<f64>,
    #[serde(default)]
    predicted_n: Option<i64>,
    #[serde(default)]
    predicted_ms: Option<f64>,
    /// With a draft model (`--model-draft`): tokens drafted, and accepted, for this request.
    #[serde(default)]
    draft_n: Option<i64>,
    #[serde(default)]
    draft_n_accepted: Option<i64>,
}

impl LlamaTimings {
    pub(crate) fn timing(self) -> EngineTiming {
        let us = |ms: Option<f64>| ms.and_then(ms_to_us);
        // llama.cpp writes -1 for a count it did not set.
        let n = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
        EngineTiming {
            source: TimingSource::LlamaCpp,
            other_us: None,
            queue_us: None,
            prefill_us: us(self.prompt_ms),
            decode_us: us(self.predicted_ms),
            inference_us: None,
            prompt_tokens: n(self.prompt_n),
            cached_tokens: n(self.cache_n),
            output_tokens: n(self.predicted_n),
            draft_tokens: n(self.draft_n),
            draft_accepted: n(self.draft_n_accepted),
        }
    }
}

/// vLLM's per-request `metrics` object (the last event of a stream, or a whole answer; its
/// `speculative_decoding` part is filled when the server drafts): `acceptance_histogram[j]`
/// counts the verify steps that accepted exactly `j` draft tokens, so a request drafted
/// (steps × (its length − 1)) tokens and accepted Σ j × h[j].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct VllmMetrics {
    #[serde(default)]
    speculative_decoding: Option<VllmSpec>,
    #[serde(default)]
    queue_time_ms: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct VllmSpec {
    #[serde(default)]
    acceptance_histogram: Vec<u64>,
}

impl VllmMetrics {
    /// The timing it states, when it states any.
    pub(crate) fn timing(&self) -> Option<EngineTiming> {
        let spec = self.speculative_decoding.as_ref().and_then(|s| {
            let h = &s.acceptance_histogram;
            let per_step = h.len().checked_sub(1)? as u64;
            let steps: u64 = h.iter().sum();
            let accepted: u64 = h.iter().enumerate().map(|(j, n)| j as u64 * n).sum();
            Some((
                u32::try_from(steps * per_step).ok()?,
                u32::try_from(accepted).ok()?,
            ))
        });
        let queue_us = self.queue_time_ms.and_then(ms_to_us);
        if spec.is_none() && queue_us.is_none() {
            return None;
        }
        Some(EngineTiming {
            source: TimingSource::Vllm,
            other_us: None,
            queue_us,
            prefill_us: None,
            decode_us: None,
            inference_us: None,
            prompt_tokens: None,
            cached_tokens: None,
            output_tokens: None,
            draft_tokens: spec.map(|s| s.0),
            draft_accepted: spec.map(|s| s.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields of a llama-server answer's last event (scripts/real-engine.sh's server),
    /// converted once: ms with µs decimals to µs exactly; an unset count (-1) and a time no
    /// request takes left out.
    #[test]
    fn llamacpp_timings_convert_to_microseconds_once() {
        let t: LlamaTimings = serde_json::from_str(
            r#"{"cache_n":0,"prompt_n":26,"prompt_ms":126.827,"prompt_per_token_ms":4.87,"prompt_per_second":205.0,"predicted_n":4,"predicted_ms":62.101,"predicted_per_token_ms":15.5,"predicted_per_second":64.4}"#,
        )
        .unwrap();
        let t = t.timing();
        assert_eq!((t.prefill_us, t.decode_us), (Some(126_827), Some(62_101)));
        assert_eq!(
            (t.prompt_tokens, t.cached_tokens, t.output_tokens),
            (Some(26), Some(0), Some(4))
        );
        let odd: LlamaTimings =
            serde_json::from_str(r#"{"cache_n":-1,"prompt_ms":-3.0,"predicted_ms":1e12}"#).unwrap();
        let odd = odd.timing();
        assert_eq!(
            (odd.cached_tokens, odd.prefill_us, odd.decode_us),
            (None, None, None)
        );
    }

    /// The headers of a TGI `/generate` answer (its router's `generate_internal`): whole ms to
    /// µs; an answer without `x-inference-time` (a streamed one's head) states nothing.
    #[test]
    fn tgi_headers_convert_to_microseconds_once() {
        let head = [
            ("x-compute-type", "gpu+optimized"),
            ("x-total-time", "1712"),
            ("x-validation-time", "2"),
            ("x-queue-time", "830"),
            ("x-inference-time", "880"),
            ("x-time-per-token", "55"),
            ("x-prompt-tokens", "31"),
            ("x-generated-tokens", "16"),
        ];
        let get = |n: &str| head.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        let t = tgi_headers(get).unwrap();
        assert_eq!(t.source, TimingSource::Tgi);
        assert_eq!(
            (t.other_us, t.queue_us, t.inference_us),
            (Some(2_000), Some(830_000), Some(880_000))
        );
        assert_eq!((t.prefill_us, t.decode_us), (None, None));
        assert_eq!(t.output_tokens, Some(16));
        assert!(tgi_headers(|n| (n == "x-compute-type").then_some("gpu")).is_none());
        assert!(tgi_headers(|n| (n == "x-inference-time").then_some("-4")).is_none());
        assert_eq!(TimingSource::named("TGI headers"), Some(TimingSource::Tgi));
    }
}
