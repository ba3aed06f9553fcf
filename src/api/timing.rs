//! What an engine says of one request's time in its own answer, beside the tokens. One reader
//! per engine, each converting its units to µs once, here:
//!
//! - **llama.cpp**: the `timings` object of llama-server's answers (the last event of a
//!   stream, and a whole answer), written by `result_timings::to_json` in its `tools/server`:
//!   `prompt_ms` (the slot's prompt processing, from its start to the first token sampled:
//!   prefill), `predicted_ms` (first token sampled to the last: decode), `prompt_n` (prompt
//!   tokens evaluated), `cache_n` (prompt tokens reused from the slot's cache; -1 when not
//!   set), `predicted_n`. It says nothing of the time a request waited for a free slot.
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
    /// Waiting to be scheduled, µs, when the engine says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_us: Option<u64>,
    /// Prefill: the prompt's processing to the first token, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_us: Option<u64>,
    /// Decode: the first token to the last, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_us: Option<u64>,
    /// Prompt tokens the engine evaluated (those its cache did not serve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// Prompt tokens served from its prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    /// Tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
}

/// Whose per-answer timing fields a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimingSource {
    /// llama-server's `timings` object.
    #[serde(rename = "llama.cpp timings")]
    LlamaCpp,
}

impl TimingSource {
    pub fn name(self) -> &'static str {
        match self {
            TimingSource::LlamaCpp => "llama.cpp timings",
        }
    }
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
}

impl LlamaTimings {
    pub(crate) fn timing(self) -> EngineTiming {
        let us = |ms: Option<f64>| {
            ms.map(|m| m * 1000.0)
                .filter(|u| u.is_finite() && (0.0..=MAX_US).contains(u))
                .map(|u| u.round() as u64)
        };
        // llama.cpp writes -1 for a count it did not set.
        let n = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
        EngineTiming {
            source: TimingSource::LlamaCpp,
            queue_us: None,
            prefill_us: us(self.prompt_ms),
            decode_us: us(self.predicted_ms),
            prompt_tokens: n(self.prompt_n),
            cached_tokens: n(self.cache_n),
            output_tokens: n(self.predicted_n),
        }
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
}
