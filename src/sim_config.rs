//! The simulator's configuration (`[target.simulator]`, `goodput sim --config`): its
//! performance model, faults and accelerators' power, their documented defaults, and the
//! validation that refuses impossible values before the server starts. A leaf: the contract
//! embeds it without depending on the simulator that runs it (`sim`).

use serde::{Deserialize, Serialize};

/// Performance model of a continuous-batching engine.
///
/// Defaults resemble a 7–8B dense model in 16-bit precision on one modern data-centre GPU
/// (A100/H100 class): prefill ≈ 12k tokens/s, a decode step of ≈ 12 ms plus a small per-sequence
/// cost, up to 256 running sequences, and KV-cache room for 131,072 tokens.
///
/// Step time (seconds) = `decode_base_ms` + `decode_per_seq_ms` × running sequences
/// + `decode_per_kv_token_us` × KV tokens held by decoding sequences
/// + prefill tokens in the step ÷ `prefill_tokens_per_s`, multiplied by the warm-up factor.
///
/// A prefilling sequence emits its first token at the end of the step that finishes its prefill;
/// every later step emits one token per decoding sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Model id served at `/v1/models`.
    pub model: String,
    /// Seed for generated text and fault decisions.
    pub seed: u64,
    /// Prefill throughput, prompt tokens per second.
    pub prefill_tokens_per_s: f64,
    /// Fixed cost of one scheduler step, milliseconds.
    pub decode_base_ms: f64,
    /// Extra step cost per running sequence, milliseconds.
    pub decode_per_seq_ms: f64,
    /// Extra step cost per KV-cache token of the decoding sequences, microseconds.
    pub decode_per_kv_token_us: f64,
    /// Maximum running sequences (batch size).
    pub max_batch: u32,
    /// KV-cache capacity in tokens; a request is admitted only when its prompt plus its maximum
    /// output fit in what is free (FCFS: the head of the queue blocks those behind it).
    pub kv_capacity_tokens: u64,
    /// Chunked prefill: the most prefill tokens processed in one step (0 = unlimited).
    pub prefill_chunk_tokens: u64,
    /// Tokens per streamed chunk after the first (as vLLM's `stream_interval` does).
    pub tokens_per_chunk: u32,
    /// Tokens in the first streamed chunk: 1 (the default) sends the first token at once, as
    /// vLLM does; more imitates a gateway that coalesces writes or a speculative decoder, whose
    /// first chunk already carries several tokens. Left out of the configuration at 1.
    #[serde(skip_serializing_if = "is_one")]
    pub first_chunk_tokens: u32,
    /// `max_tokens` used when a request does not give one.
    pub default_max_tokens: u32,
    /// Without `ignore_eos`, a request stops at a "natural" length drawn deterministically from
    /// its prompt in `[natural_min_tokens, natural_max_tokens]` (clamped by min/max tokens).
    pub natural_min_tokens: u32,
    /// Upper end of the natural output length.
    pub natural_max_tokens: u32,
    /// Context length advertised at `/v1/models` (`max_model_len`).
    pub max_model_len: u32,
    /// Prefix-cache block size in tokens.
    pub prefix_block_tokens: u32,
    /// Prefix-cache capacity in blocks, least recently used evicted first (0 = no prefix cache).
    pub prefix_cache_blocks: u64,
    /// Model load time, milliseconds: `/health` answers 503 and completion requests are
    /// *refused* with 503 until it has passed (a real engine does not serve before it is loaded).
    pub load_time_ms: f64,
    /// Warm-up penalty: the first step is this many times slower, decaying linearly to 1.0
    /// over `warmup_steps` steps (compilation, allocator growth, cold caches).
    pub warmup_slowdown: f64,
    /// Steps over which the warm-up penalty decays.
    pub warmup_steps: u64,
    /// Whether a stream honours `stream_options.include_usage` with a final usage-only chunk.
    /// `false` imitates servers that never report usage in streams (llama-cpp-python's server,
    /// some proxies): the client must then count tokens itself and say so.
    pub stream_usage: bool,
    /// Whether `POST /tokenize` is served. `false` imitates servers without it (hosted APIs,
    /// some gateways): a client must then count output tokens without the server's tokenizer.
    /// Left out of the configuration when served.
    #[serde(skip_serializing_if = "is_true")]
    pub tokenize: bool,
    /// Whether answers state the request's timing from the ground truth, as their engine does:
    /// llama-server's `timings` object in the OpenAI APIs' answers (prefill, decode, prompt
    /// cache hits), TGI's `x-queue-time`/`x-inference-time` headers on `/generate`'s whole
    /// answers. Off by default, as vLLM's answers have none; left out of the configuration
    /// when off.
    #[serde(skip_serializing_if = "is_false")]
    pub timings: bool,
    /// Keep each request's prompt text in its ground truth (tests that check what a client
    /// sent, such as a session's history). Off: prompts can be long.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub record_prompts: bool,
    /// Share of each chat answer's output tokens that are reasoning (thinking), streamed first
    /// in `reasoning_content` (vLLM's and SGLang's reasoning parsers; the answer follows in
    /// `content`) and reported as `usage.completion_tokens_details.reasoning_tokens`. A request
    /// with `chat_template_kwargs.enable_thinking = false` gets none, as Qwen3's template does.
    /// 0 by default (and then left out of the configuration).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub reasoning_share: f64,
    /// Tokens a chat template adds to every chat prompt (and to `/tokenize` of `messages`),
    /// as real engines' templates do; 0 by default (and then left out of the configuration).
    #[serde(skip_serializing_if = "is_zero")]
    pub chat_template_tokens: u32,
    /// How the waiting queue and the step's prefill budget are ordered: `fcfs` (arrival
    /// order, the default) or `priority` (by the request body's `priority`, lower first, then
    /// arrival: vLLM's `--scheduling-policy priority`, without preemption of running requests).
    #[serde(skip_serializing_if = "Scheduling::is_fcfs")]
    pub scheduling: Scheduling,
    /// Further model names served besides `model` (LoRA adapters on it), listed at
    /// `/v1/models` with `model` as their parent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<String>,
    /// What a request on an adapter adds to the step that starts its prefill, milliseconds
    /// (loading and applying its weights).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub adapter_cost_ms: f64,
    /// The largest request body it reads, MiB; a larger one is refused with 413 before it is
    /// read whole, as a server's body limit does (axum's default is 2 MB; 64 holds eight
    /// 4-megapixel images as base64).
    #[serde(skip_serializing_if = "is_default_body")]
    pub max_body_mb: u32,
    /// How it reads and encodes images (`[target.simulator.vision]`; left out of the
    /// configuration at its defaults).
    #[serde(skip_serializing_if = "Vision::is_default")]
    pub vision: Vision,
    /// Speculative decoding (`[target.simulator.speculative]`; off, and left out, by default).
    #[serde(skip_serializing_if = "Speculative::is_off")]
    pub speculative: Speculative,
    /// The simulated accelerators' power, published DCGM-style at `/telemetry`
    /// (`[target.simulator.power]`; left out of the configuration at its defaults).
    #[serde(skip_serializing_if = "Power::is_default")]
    pub power: Power,
    /// Faults on demand; all off by default.
    pub faults: Faults,
}

/// The simulator's scheduling policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    #[default]
    Fcfs,
    Priority,
}

impl Scheduling {
    fn is_fcfs(&self) -> bool {
        *self == Scheduling::Fcfs
    }
}

/// Faults, each decided per request from the seed and the request's arrival number, so a given
/// configuration misbehaves the same way every time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// Fraction of requests answered with `error_status` instead of a completion.
    pub error_rate: f64,
    /// HTTP status for injected errors: 429, 500 or 503.
    pub error_status: u16,
    /// Period of full engine stalls, milliseconds (0 = none). The engine freezes for
    /// `stall_for_ms` at every multiple of this period.
    pub stall_every_ms: f64,
    /// Length of each stall, milliseconds; must be shorter than the period.
    pub stall_for_ms: f64,
    /// Fraction of streams whose connection is dropped half-way through the output.
    pub drop_rate: f64,
    /// Fraction of streams in which one SSE event carries malformed JSON.
    pub malformed_rate: f64,
    /// Fraction of requests whose response headers are delayed by `slow_headers_ms`.
    pub slow_headers_rate: f64,
    /// Header delay, milliseconds.
    pub slow_headers_ms: f64,
    /// Fraction of prompts whose output text departs from the undegraded text after its first
    /// three tokens (a quantisation or template change; same prompts in every run).
    pub perturb_rate: f64,
    /// Fraction of prompts whose output stops at half its length with `finish_reason: "stop"`.
    pub truncate_rate: f64,
    /// Drift: once this many requests have arrived (0 = never), every step takes
    /// `slow_factor` times as long (a throttled accelerator, a noisy neighbour), so a test can
    /// slow the target at a known point of a run, whatever the machine's speed.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub slow_after_requests: u64,
    /// How much slower a step is after `slow_after_requests` (1 = not at all).
    #[serde(skip_serializing_if = "is_one_f64")]
    pub slow_factor: f64,
    /// Fraction of tool-call answers (a request that offers tools) with one call made wrong,
    /// on an idle engine: its arguments cut short, an argument's value changed, another
    /// function's name, or no call at all (the ground truth says which).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub tool_error_rate: f64,
    /// Added to that fraction for every request already in the engine (running or waiting)
    /// when one arrives, so wrong calls grow with load (capped at 1).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub tool_error_per_request: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            model: "goodput-sim-8b".into(),
            seed: 0,
            prefill_tokens_per_s: 12_000.0,
            decode_base_ms: 12.0,
            decode_per_seq_ms: 0.06,
            decode_per_kv_token_us: 0.0,
            max_batch: 256,
            kv_capacity_tokens: 131_072,
            prefill_chunk_tokens: 0,
            tokens_per_chunk: 1,
            first_chunk_tokens: 1,
            reasoning_share: 0.0,
            default_max_tokens: 1024,
            natural_min_tokens: 16,
            natural_max_tokens: 512,
            max_model_len: 8192,
            prefix_block_tokens: 16,
            prefix_cache_blocks: 4096,
            load_time_ms: 0.0,
            warmup_slowdown: 1.0,
            warmup_steps: 0,
            stream_usage: true,
            tokenize: true,
            timings: false,
            record_prompts: false,
            chat_template_tokens: 0,
            scheduling: Scheduling::Fcfs,
            adapters: Vec::new(),
            adapter_cost_ms: 0.0,
            max_body_mb: DEFAULT_BODY_MB,
            vision: Vision::default(),
            speculative: Speculative::default(),
            power: Default::default(),
            faults: Faults::default(),
        }
    }
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            error_rate: 0.0,
            error_status: 503,
            stall_every_ms: 0.0,
            stall_for_ms: 0.0,
            drop_rate: 0.0,
            malformed_rate: 0.0,
            slow_headers_rate: 0.0,
            slow_headers_ms: 0.0,
            perturb_rate: 0.0,
            truncate_rate: 0.0,
            slow_after_requests: 0,
            slow_factor: 1.0,
            tool_error_rate: 0.0,
            tool_error_per_request: 0.0,
        }
    }
}

/// A simulator setting outside its allowed range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("simulator setting `{key}` = {value}: {rule}")]
pub struct ConfigError {
    /// Dotted key, e.g. `faults.stall_for_ms`.
    pub key: String,
    /// The offending value as written.
    pub value: String,
    /// The allowed range or rule.
    pub rule: String,
}

/// A config error naming its key, value and rule.
fn err(key: &str, value: impl ToString, rule: &str) -> Result<(), ConfigError> {
    Err(ConfigError {
        key: key.into(),
        value: value.to_string(),
        rule: rule.into(),
    })
}

fn finite_pos(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

fn finite_nonneg(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

fn fraction(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

impl SimConfig {
    /// A configuration with near-zero cost: for throughput benchmarks of the HTTP path.
    pub fn instant() -> Self {
        SimConfig {
            prefill_tokens_per_s: 1e12,
            decode_base_ms: 0.0,
            decode_per_seq_ms: 0.0,
            max_batch: 100_000,
            kv_capacity_tokens: u64::MAX / 4,
            prefix_cache_blocks: 0,
            ..SimConfig::default()
        }
    }

    /// Whether a request naming `model` is served (the model or one of its adapters), and
    /// whether it is an adapter.
    pub fn serves(&self, model: &str) -> Option<bool> {
        if model == self.model {
            Some(false)
        } else {
            self.adapters.iter().any(|a| a == model).then_some(true)
        }
    }

    /// Checks every value against its allowed range; the first violation, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_names()?;
        self.validate_engine()?;
        self.validate_power()?;
        self.validate_speculative()?;
        self.validate_faults()
    }

    /// `[speculative]`: a bounded draft, fractions for the acceptance and its spread.
    fn validate_speculative(&self) -> Result<(), ConfigError> {
        let s = &self.speculative;
        if s.draft_tokens > 64 {
            return err(
                "speculative.draft_tokens",
                s.draft_tokens,
                "must be at most 64",
            );
        }
        for (k, v) in [
            ("speculative.acceptance", s.acceptance),
            ("speculative.spread", s.spread),
        ] {
            if !fraction(v) {
                return err(k, v, "must be a fraction in [0, 1]");
            }
        }
        if !(s.draft_cost.is_finite() && (0.0..=1.0).contains(&s.draft_cost)) {
            return err("speculative.draft_cost", s.draft_cost, "must be in [0, 1]");
        }
        Ok(())
    }

    /// The model's name and its adapters'.
    fn validate_names(&self) -> Result<(), ConfigError> {
        if self.model.trim().is_empty() {
            return err("model", "\"\"", "must be a non-empty model id");
        }
        if let Some(a) = self
            .adapters
            .iter()
            .find(|a| a.trim().is_empty() || **a == self.model)
        {
            return err(
                "adapters",
                format!("{a:?}"),
                "each adapter needs a non-empty name other than `model`",
            );
        }
        Ok(())
    }

    /// The cost model and the engine's sizes.
    fn validate_engine(&self) -> Result<(), ConfigError> {
        if !finite_pos(self.prefill_tokens_per_s) {
            return err(
                "prefill_tokens_per_s",
                self.prefill_tokens_per_s,
                "must be > 0",
            );
        }
        for (k, v) in [
            ("decode_base_ms", self.decode_base_ms),
            ("decode_per_seq_ms", self.decode_per_seq_ms),
            ("decode_per_kv_token_us", self.decode_per_kv_token_us),
            ("load_time_ms", self.load_time_ms),
            ("adapter_cost_ms", self.adapter_cost_ms),
            ("vision.ms_per_token", self.vision.ms_per_token),
            ("faults.stall_every_ms", self.faults.stall_every_ms),
            ("faults.stall_for_ms", self.faults.stall_for_ms),
            ("faults.slow_headers_ms", self.faults.slow_headers_ms),
        ] {
            if !finite_nonneg(v) {
                return err(k, v, "must be a finite number >= 0");
            }
        }
        if self.max_batch == 0 {
            return err("max_batch", 0, "must be >= 1");
        }
        if self.max_body_mb == 0 {
            return err("max_body_mb", 0, "must be >= 1 MiB");
        }
        if self.vision.token_px == 0 {
            return err("vision.token_px", 0, "must be >= 1 pixel");
        }
        if self.kv_capacity_tokens == 0 {
            return err("kv_capacity_tokens", 0, "must be >= 1");
        }
        if self.tokens_per_chunk == 0 {
            return err("tokens_per_chunk", 0, "must be >= 1");
        }
        if !fraction(self.reasoning_share) {
            return err(
                "reasoning_share",
                self.reasoning_share,
                "must be in [0, 1] (the share of output tokens that are reasoning)",
            );
        }
        if self.first_chunk_tokens == 0 {
            return err("first_chunk_tokens", 0, "must be >= 1");
        }
        if self.default_max_tokens == 0 {
            return err("default_max_tokens", 0, "must be >= 1");
        }
        if self.natural_min_tokens == 0 || self.natural_min_tokens > self.natural_max_tokens {
            return err(
                "natural_min_tokens",
                self.natural_min_tokens,
                &format!(
                    "must be >= 1 and <= natural_max_tokens ({})",
                    self.natural_max_tokens
                ),
            );
        }
        if self.prefix_block_tokens == 0 {
            return err("prefix_block_tokens", 0, "must be >= 1");
        }
        if !(self.warmup_slowdown.is_finite() && self.warmup_slowdown >= 1.0) {
            return err(
                "warmup_slowdown",
                self.warmup_slowdown,
                "must be >= 1.0 (1.0 = no penalty)",
            );
        }
        Ok(())
    }

    /// `[power]`: the GPUs and their idle and peak draw.
    fn validate_power(&self) -> Result<(), ConfigError> {
        if self.power.gpus == 0 {
            return err("power.gpus", 0, "must be >= 1");
        }
        if !finite_nonneg(self.power.idle_watts) {
            return err(
                "power.idle_watts",
                self.power.idle_watts,
                "must be a finite number >= 0",
            );
        }
        if !(self.power.peak_watts.is_finite() && self.power.peak_watts >= self.power.idle_watts) {
            return err(
                "power.peak_watts",
                self.power.peak_watts,
                &format!(
                    "must be finite and >= power.idle_watts ({})",
                    self.power.idle_watts
                ),
            );
        }
        Ok(())
    }

    /// `[faults]`: rates are fractions, a stall is shorter than its period.
    fn validate_faults(&self) -> Result<(), ConfigError> {
        let f = &self.faults;
        for (k, v) in [
            ("faults.error_rate", f.error_rate),
            ("faults.drop_rate", f.drop_rate),
            ("faults.malformed_rate", f.malformed_rate),
            ("faults.perturb_rate", f.perturb_rate),
            ("faults.truncate_rate", f.truncate_rate),
            ("faults.slow_headers_rate", f.slow_headers_rate),
            ("faults.tool_error_rate", f.tool_error_rate),
            ("faults.tool_error_per_request", f.tool_error_per_request),
        ] {
            if !fraction(v) {
                return err(k, v, "must be a fraction in [0, 1]");
            }
        }
        if !(f.slow_factor.is_finite() && f.slow_factor >= 1.0) {
            return err(
                "faults.slow_factor",
                f.slow_factor,
                "must be finite and >= 1",
            );
        }
        if ![429, 500, 503].contains(&f.error_status) {
            return err(
                "faults.error_status",
                f.error_status,
                "must be 429, 500 or 503",
            );
        }
        if f.stall_for_ms > 0.0 && f.stall_every_ms == 0.0 {
            return err(
                "faults.stall_every_ms",
                0,
                "must be > 0 when faults.stall_for_ms is set",
            );
        }
        if f.stall_every_ms > 0.0 && f.stall_for_ms >= f.stall_every_ms {
            return err(
                "faults.stall_for_ms",
                f.stall_for_ms,
                &format!(
                    "must be shorter than faults.stall_every_ms ({})",
                    f.stall_every_ms
                ),
            );
        }
        Ok(())
    }

    /// Duration of a step with these loads, before stalls, in seconds (the cost model).
    pub fn step_seconds(&self, running: usize, prefill_tokens: u64, kv_tokens: u64) -> f64 {
        if running == 0 {
            return 0.0;
        }
        (self.decode_base_ms
            + self.decode_per_seq_ms * running as f64
            + self.decode_per_kv_token_us * kv_tokens as f64 / 1000.0)
            / 1000.0
            + prefill_tokens as f64 / self.prefill_tokens_per_s
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_one_f64(x: &f64) -> bool {
    *x == 1.0
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The simulator's body limit by default, MiB.
const DEFAULT_BODY_MB: u32 = 64;

fn is_default_body(mb: &u32) -> bool {
    *mb == DEFAULT_BODY_MB
}

/// `[target.simulator.vision]`: the simulated vision encoder. An image of W×H pixels is
/// `ceil(W / token_px) × ceil(H / token_px) + token_extra` prompt tokens (Qwen2-VL's rule:
/// 14-pixel patches merged 2×2, and its begin and end markers), placed after the text of its
/// message; encoding it adds `ms_per_token` per token to the step that admits its request,
/// unless its pixels are in the encoder cache (every image seen since the server started,
/// by content, as vLLM's multimodal cache keys them), whose queries and hits it publishes as
/// `vllm:mm_cache_queries_total` and `vllm:mm_cache_hits_total`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Vision {
    pub token_px: u32,
    pub token_extra: u32,
    pub ms_per_token: f64,
    /// Most images one request may carry (vLLM's `--limit-mm-per-prompt`); more is a 400.
    pub max_images: u32,
}

impl Default for Vision {
    fn default() -> Self {
        // A ViT of ~600M parameters on the GPU the defaults resemble: ~20 µs a token.
        Vision {
            token_px: 28,
            token_extra: 2,
            ms_per_token: 0.02,
            max_images: 8,
        }
    }
}

impl Vision {
    pub fn is_default(&self) -> bool {
        *self == Vision::default()
    }

    /// The prompt tokens of a `w`×`h` image.
    pub fn tokens(&self, w: u32, h: u32) -> u32 {
        u32::try_from(grid_tokens(w, h, self.token_px, self.token_extra)).unwrap_or(u32::MAX)
    }
}

/// The grid rule of image tokens, one definition for the simulator and the contract's
/// `tokens = { rule = "grid" }`: one token per `px`×`px` tile of a `w`×`h` image, its edges
/// rounded up, plus `extra`.
pub fn grid_tokens(w: u32, h: u32, px: u32, extra: u32) -> u64 {
    let px = px.max(1);
    u64::from(w.div_ceil(px)) * u64::from(h.div_ceil(px)) + u64::from(extra)
}

/// `[target.simulator.power]`: the simulated accelerators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Power {
    /// Accelerators serving the model (tensor parallel: each runs every step).
    pub gpus: u32,
    /// Draw of one idle GPU, watts.
    pub idle_watts: f64,
    /// Draw of one GPU running a full batch, watts.
    pub peak_watts: f64,
}

impl Default for Power {
    fn default() -> Self {
        // An H100 SXM: about 100 W idle, 700 W board limit.
        Power {
            gpus: 1,
            idle_watts: 100.0,
            peak_watts: 700.0,
        }
    }
}

impl Power {
    pub fn is_default(&self) -> bool {
        *self == Power::default()
    }

    /// Watts of GPU 0 during a step with `batch` running sequences (`None`: idle).
    pub fn watts(&self, batch: Option<usize>, max_batch: u32) -> f64 {
        match batch {
            None => self.idle_watts,
            Some(b) => {
                let fill = (b as f64 / f64::from(max_batch.max(1))).min(1.0);
                self.idle_watts + (self.peak_watts - self.idle_watts) * (0.35 + 0.65 * fill)
            }
        }
    }

    /// How much more than GPU 0 GPU `i` draws.
    pub fn factor(i: u32) -> f64 {
        1.0 + 0.03 * f64::from(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        SimConfig::default().validate().unwrap();
        SimConfig::instant().validate().unwrap();
    }

    #[test]
    fn each_bad_value_names_its_key() {
        type Mutation = Box<dyn Fn(&mut SimConfig)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (
                Box::new(|c| c.prefill_tokens_per_s = -1.0),
                "prefill_tokens_per_s",
            ),
            (Box::new(|c| c.max_batch = 0), "max_batch"),
            (Box::new(|c| c.decode_base_ms = f64::NAN), "decode_base_ms"),
            (Box::new(|c| c.faults.error_rate = 1.5), "faults.error_rate"),
            (
                Box::new(|c| c.faults.error_status = 404),
                "faults.error_status",
            ),
            (
                Box::new(|c| {
                    c.faults.stall_every_ms = 100.0;
                    c.faults.stall_for_ms = 200.0;
                }),
                "faults.stall_for_ms",
            ),
            (Box::new(|c| c.warmup_slowdown = 0.5), "warmup_slowdown"),
        ];
        for (mutate, key) in cases {
            let mut c = SimConfig::default();
            mutate(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = toml::from_str::<SimConfig>("max_bacth = 3\n").unwrap_err();
        assert!(e.to_string().contains("max_bacth"), "{e}");
    }
}

/// Speculative decoding, by a stated rule: every decode step drafts `draft_tokens` tokens (fewer
/// near the answer's end) and the target accepts a leading run of them, each draft token with
/// the request's acceptance probability — `acceptance` ± `spread`, drawn per prompt (the same
/// prompts accept alike in every run) — so a step emits one token plus those accepted. Each
/// draft token adds `draft_cost` of a step to the step's time. The ground truth keeps each
/// request's drafted and accepted tokens; `timings` answers state them as llama.cpp does, and
/// `/metrics` counts them as vLLM does (`vllm:spec_decode_num_draft_tokens_total`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Speculative {
    /// Draft tokens per step (0: off).
    pub draft_tokens: u32,
    pub acceptance: f64,
    pub spread: f64,
    pub draft_cost: f64,
}

impl Default for Speculative {
    fn default() -> Self {
        Speculative {
            draft_tokens: 0,
            acceptance: 0.7,
            spread: 0.2,
            draft_cost: 0.05,
        }
    }
}

impl Speculative {
    /// At its defaults (no draft): left out of a written configuration.
    pub fn is_off(&self) -> bool {
        *self == Speculative::default()
    }

    /// A request's acceptance probability from `u`, a uniform draw in [0, 1).
    pub fn acceptance_of(&self, u: f64) -> f64 {
        (self.acceptance + self.spread * (2.0 * u - 1.0)).clamp(0.0, 1.0)
    }
}
