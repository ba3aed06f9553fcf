//! Prometheus text exposition of the simulator's state, named after vLLM's `vllm:` metrics so the
//! same scraper reads both.

use std::fmt::Write;

use super::engine::Counters;

/// Bucket bounds (seconds) for the latency histograms, as vLLM uses for queue time.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A cumulative Prometheus histogram.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn observe(&mut self, v: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{b}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// What `/metrics` shows, updated by the engine loop once per step.
#[derive(Debug, Clone, Default)]
pub struct MetricsState {
    pub running: usize,
    pub waiting: usize,
    pub kv_usage: f64,
    pub counters: Counters,
    pub queue_time: Histogram,
    pub ttft: Histogram,
    pub requests_ok: u64,
    /// The engine drafts (speculative decoding): its counters are published from the start,
    /// as a server with a draft model publishes them.
    pub drafts: bool,
}

impl MetricsState {
    /// The value of each of [`SERIES`], in its order.
    fn values(&self) -> [String; 10] {
        let c = &self.counters;
        [
            self.running.to_string(),
            self.waiting.to_string(),
            self.kv_usage.to_string(),
            c.prompt_tokens.to_string(),
            c.generation_tokens.to_string(),
            c.prefix_queries.to_string(),
            c.prefix_hits.to_string(),
            c.mm_queries.to_string(),
            c.mm_hits.to_string(),
            self.requests_ok.to_string(),
        ]
    }

    pub fn render(&self, model: &str) -> String {
        let labels = format!("model_name=\"{model}\"");
        let mut out = String::with_capacity(4096);
        let mut gauge = |name: &str, help: &str, kind: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {v}"
            );
        };
        for ((name, help, kind), v) in SERIES.iter().zip(self.values()) {
            gauge(name, help, kind, v);
        }
        self.queue_time.render(
            &mut out,
            "vllm:request_queue_time_seconds",
            "Time from arrival to admission.",
            &labels,
        );
        self.ttft.render(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Time from arrival to the first token.",
            &labels,
        );
        // Speculative decoding's counters (a server without a draft publishes none).
        let c = &self.counters;
        if self.drafts {
            for (name, help, v) in [
                (
                    "vllm:spec_decode_num_drafts_total",
                    "Verify steps with a draft.",
                    c.spec_drafts,
                ),
                (
                    "vllm:spec_decode_num_draft_tokens_total",
                    "Draft tokens proposed.",
                    c.spec_draft_tokens,
                ),
                (
                    "vllm:spec_decode_num_accepted_tokens_total",
                    "Draft tokens accepted.",
                    c.spec_accepted,
                ),
            ] {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{labels}}} {v}"
                );
            }
        }
        out
    }
}

/// Every gauge and counter the page publishes, in order: name, help, kind.
const SERIES: [(&str, &str, &str); 10] = [
    (
        "vllm:num_requests_running",
        "Requests in the running batch.",
        "gauge",
    ),
    (
        "vllm:num_requests_waiting",
        "Requests waiting to be admitted.",
        "gauge",
    ),
    (
        "vllm:kv_cache_usage_perc",
        "Fraction of KV-cache tokens reserved.",
        "gauge",
    ),
    (
        "vllm:prompt_tokens_total",
        "Prompt tokens prefilled.",
        "counter",
    ),
    (
        "vllm:generation_tokens_total",
        "Tokens generated.",
        "counter",
    ),
    (
        "vllm:prefix_cache_queries_total",
        "Prompt tokens looked up in the prefix cache.",
        "counter",
    ),
    (
        "vllm:prefix_cache_hits_total",
        "Prompt tokens found in the prefix cache.",
        "counter",
    ),
    (
        "vllm:mm_cache_queries_total",
        "Images looked up in the encoder cache.",
        "counter",
    ),
    (
        "vllm:mm_cache_hits_total",
        "Images found in the encoder cache.",
        "counter",
    ),
    (
        "vllm:request_success_total",
        "Requests finished.",
        "counter",
    ),
];
