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
    /// `ok`, `error_<status>`, `refused_loading`, `rejected_too_long`, `dropped`, `malformed`,
    /// or `client_gone`.
    pub outcome: String,
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
                outcome: "ok".into(),
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

    /// Records how many of the request's first tokens will be reasoning.
    /// Keeps the prompt's text (`record_prompts`).
    pub fn set_prompt(&mut self, seq: u64, prompt: String) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.prompt = Some(prompt);
        }
    }

    pub fn set_reasoning(&mut self, seq: u64, tokens: u32) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.reasoning_tokens = tokens;
        }
    }

    /// Marks how the request will end (a fault decided on arrival), without closing it.
    pub fn set_outcome(&mut self, seq: u64, outcome: &str) {
        if let Some(g) = self.open.get_mut(&seq) {
            g.outcome = outcome.into();
        }
    }

    /// Closes a request at `t` with `outcome` (unless a fault outcome was already set).
    pub fn finish(&mut self, seq: u64, t: f64, outcome: &str) -> Option<GroundTruth> {
        let mut g = self.open.remove(&seq)?;
        g.end_us = us(t);
        if g.outcome == "ok" {
            g.outcome = outcome.into();
        }
        Some(g)
    }
}
