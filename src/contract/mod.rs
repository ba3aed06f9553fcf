//! The workload contract: a TOML file that fixes everything a result depends on, written before
//! timing starts. This module parses it strictly (unknown keys are errors), validates it (every
//! error names file, line and key), fills every default so the bundle's copy is complete, and
//! fingerprints its axes. It must not touch the network or the clock.

pub mod classes;
pub mod edit;
pub mod images;
mod load;
pub mod prediction;
pub mod source;
pub mod stages;
pub mod task;
pub(crate) mod units;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::api::{ApiKind, Sampling};
pub use crate::arrival::Arrival;
use crate::sim_config::SimConfig;
use crate::text::host_of;
pub use load::{Drive, Load, LoadModel, Shard, Written};
pub use units::{Millis, Seconds};

/// The longest prompt or answer a workload may ask for, in tokens: beyond the longest context
/// any served model has, and a prompt is built in memory (about 6 bytes a token), so a length
/// above it is a mistake in the contract or its files, not a workload.
pub const MAX_TOKENS: u32 = 10_000_000;

/// How long a connection may sit idle in the pool and still be reused, unless the contract
/// says otherwise (`target.keep_alive`).
///
/// Kept below the 5 s after which the usual servers close an idle keep-alive connection
/// (uvicorn in front of vLLM and SGLang, llama.cpp's cpp-httplib, Node). A request written to a
/// connection in the instant the server closes it fails with "connection closed before message
/// completed" and would be counted against the engine; the second of margin covers a response's
/// way back to the client. Below 1 request per 4 s per connection, requests open a new one, as
/// they would from a client such as httpx (5 s).
pub const DEFAULT_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(4);

/// Which format a dataset file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// One JSON object per line: `prompt` or `messages`, optional `output_tokens`.
    Jsonl,
    /// ShareGPT conversations: a JSON array or JSON lines.
    Sharegpt,
    /// The Berkeley Function-Calling Leaderboard's data (`BFCL_v4_<category>.json`, its
    /// answers in `possible_answer/` beside it): tools offered, calls graded by BFCL's rule.
    Bfcl,
    /// goodput's own tool-call lines: `prompt` or `messages`, `tools`, `expected` calls,
    /// graded exactly.
    Tools,
}

impl DatasetFormat {
    /// Whether its entries offer tools and expect calls (graded per request).
    pub fn has_tools(self) -> bool {
        matches!(self, DatasetFormat::Bfcl | DatasetFormat::Tools)
    }
}

/// A complete, validated contract. Every field has its resolved value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// Name of the contract; bundles go to `runs/<name>/`.
    #[serde(default = "default_name")]
    pub name: String,
    /// Free text for people.
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub target: Target,
    #[serde(default)]
    pub workload: Workload,
    /// Required: a result without a stated load model is not a benchmark.
    pub load: Load,
    #[serde(default)]
    pub warmup: Warmup,
    /// Absent: no cold-start test (the server is taken as already warm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<ColdStart>,
    #[serde(default)]
    pub slo: Slo,
    /// Traffic classes (`[[class]]`), each with its share of the arrivals, lengths, SLO and
    /// request overrides; none: the contract is one class, as it always was.
    #[serde(default, rename = "class", skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<classes::Class>,
    #[serde(default)]
    pub measurement: Measurement,
    #[serde(default)]
    pub repeat: Repeat,
    /// How output quality is held constant beside the speed figures.
    #[serde(default)]
    pub quality: Quality,
    /// Expectations written down before the run (part of no axis: they do not change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<PredictionSpec>,
    /// Words for people (part of no axis).
    #[serde(default, skip_serializing_if = "Meta::is_empty")]
    pub meta: Meta,
    /// What reading the file noticed that is not an error (an old key name), each naming the
    /// file and line: the command line shows them.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// `[meta]`: what a person calls this result; in no fingerprint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// A short name for this result in `compare` (e.g. "vllm 0.11, fp8"); `--label` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl Meta {
    pub fn is_empty(&self) -> bool {
        self.label.is_none()
    }
}

/// `[quality]`: what stands beside every speed number so a faster result with different
/// outputs is not called a win.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quality {
    /// `none`, `consistency` (outputs kept as digests, compared request by request between
    /// results of the same plan) or `reference` (prompts from `references`, answers scored).
    #[serde(default)]
    pub mode: QualityMode,
    /// Keep each output's text in the records (always on in `reference` mode).
    #[serde(default)]
    pub keep_text: bool,
    /// `consistency`: quality probes sent one at a time after the load, the first steady
    /// prompts without the run's lead (the same in every run) and at most 32 output tokens,
    /// each twice in a row so its answer comes from a warm cache in every run: `compare` pairs
    /// the answers request by request (the measured prompts carry each run's own cache nonce,
    /// so theirs cannot be paired). Costs 2 × probes short requests after the measurement.
    #[serde(default = "default_probes")]
    pub probes: u32,
    /// `compare` guard for `consistency`: the mean token agreement of the probes' outputs
    /// (longest common prefix of words over the longer output) below which quality is not
    /// held constant. Agreement, not identity, is the default: batched engines are not
    /// bitwise deterministic, and a greedy decode that diverges late differs in a few tokens.
    /// With a baseline of two or more runs, the baseline's own run-to-run agreement (less 5
    /// points) is the bar when it is lower: the engine's measured noise.
    #[serde(default = "default_min_token_agreement")]
    pub min_token_agreement: f64,
    /// Stricter, optional: the fraction of identical probe outputs below which quality is not
    /// held constant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_identical: Option<f64>,
    /// `compare` guard for `reference`: the candidate's mean score must be at least this
    /// fraction of the baseline's (MLPerf requires 99% of reference accuracy).
    #[serde(default = "default_min_relative_score")]
    pub min_relative_score: f64,
    /// `reference` mode: JSONL of `{"prompt": …, "answer": …}` (relative to the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<std::path::PathBuf>,
    /// SHA-256 of `references`, filled when the contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references_sha256: Option<String>,
    /// `reference` mode: `exact`, `contains` or `rouge-l`.
    #[serde(default)]
    pub scoring: Scoring,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QualityMode {
    #[default]
    None,
    Consistency,
    Reference,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Scoring {
    /// Normalised answer equals the normalised output.
    #[serde(rename = "exact")]
    Exact,
    /// Normalised output contains the normalised answer.
    #[default]
    #[serde(rename = "contains")]
    Contains,
    /// ROUGE-L F1 over words (Lin, 2004): longest common subsequence.
    #[serde(rename = "rouge-l")]
    RougeL,
}

impl Default for Quality {
    fn default() -> Self {
        Quality {
            mode: QualityMode::None,
            keep_text: false,
            probes: default_probes(),
            min_token_agreement: default_min_token_agreement(),
            min_identical: None,
            min_relative_score: default_min_relative_score(),
            references: None,
            references_sha256: None,
            scoring: Scoring::default(),
        }
    }
}

fn default_probes() -> u32 {
    16
}

fn default_min_token_agreement() -> f64 {
    0.9
}
fn default_min_relative_score() -> f64 {
    0.99
}

impl Quality {
    /// Whether records keep output text or its digest.
    pub fn records_output(&self) -> bool {
        self.mode != QualityMode::None
    }

    pub fn keeps_text(&self) -> bool {
        self.keep_text || self.mode == QualityMode::Reference
    }
}

/// `[prediction] expect = ["ttft_p99 <= 300ms", "goodput >= 12"]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictionSpec {
    pub expect: Vec<String>,
}

/// Repeats of the same plan, each its own bundle inside a parent bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    #[serde(default = "one_u32")]
    pub runs: u32,
    /// Pause between runs. The embedded simulator is restarted for every run; an external
    /// server is not touched (its caches stay warm unless the contract launches it).
    #[serde(default)]
    pub pause: Seconds,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat {
            runs: 1,
            pause: Seconds(0.0),
        }
    }
}

fn one_u32() -> u32 {
    1
}

/// The server under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URL (`http://127.0.0.1:8000`); absent = the embedded simulator. With `urls`, the
    /// first of them (filled in when the contract is resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Several replicas of one deployment with no router in front: every request goes to one
    /// of these base URLs by `spread`, recorded per request. The first is where the target is
    /// probed and its `/metrics` scraped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    /// How requests are spread over `urls`: `round_robin` (request `i` of the plan to URL
    /// `i mod n`; the default) or `session` (a session's every turn to its first turn's URL,
    /// so a replica's prefix cache sees the conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Endpoint kind.
    #[serde(default)]
    pub api: ApiKind,
    /// Model id sent in requests; absent = the first model `/v1/models` lists (recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name of the environment variable holding the API key. The key itself is never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Per-request timeout; a request still running then is recorded as `timeout`.
    #[serde(default = "default_timeout")]
    pub timeout: Seconds,
    /// How long an idle connection is kept for the next request; 0 = a new connection for
    /// every request. Whether a latency includes a connect depends on it. The default (4 s)
    /// stays below the 5 s after which common servers close an idle connection (see
    /// [`DEFAULT_KEEP_ALIVE`]); raise it only for a server that keeps longer.
    #[serde(default = "default_keep_alive")]
    pub keep_alive: Seconds,
    /// Follow HTTP redirects, each recorded in its request's record. Off by default: a
    /// redirect is then a failure of its own class naming where it pointed, since a followed
    /// one attributes the numbers to another server and adds a round trip.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow_redirects: bool,
    /// Consecutive requests that could not connect after which the run ends early (the target
    /// is down); the rest of the plan is counted as not sent and the exit status is 3.
    #[serde(
        default = "default_max_connect_failures",
        skip_serializing_if = "is_default_max_connect_failures"
    )]
    pub max_connect_failures: u32,
    /// What every request carries beyond the body goodput composes.
    #[serde(default, skip_serializing_if = "RequestExtras::is_empty")]
    pub request: RequestExtras,
    /// How an `https` target's certificate is trusted.
    #[serde(default, skip_serializing_if = "Tls::is_default")]
    pub tls: Tls,
    /// Facts the client cannot discover.
    #[serde(default)]
    pub declared: Declared,
    /// Accelerator telemetry (`[target.telemetry]`): Prometheus pages such as NVIDIA's DCGM
    /// exporter or AMD's device metrics exporter, scraped over the run beside the target's own
    /// `/metrics`, for energy and efficiency figures. Not part of the target axis: it changes
    /// nothing the target is sent.
    #[serde(default, skip_serializing_if = "Telemetry::is_empty")]
    pub telemetry: Telemetry,
    /// The embedded simulator's model (only without `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<SimConfig>,
}

/// `[target.request]`: fields merged into every body and headers sent with every request
/// (thinking on or off through `chat_template_kwargs`, `priority`, a router's session header).
/// Both are part of the target axis: two results that sent different ones are not comparable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestExtras {
    /// Merged into the top level of every request body. A key goodput itself sets for this
    /// contract (`max_tokens`, `stream`, …) is refused, not overridden.
    #[serde(
        default,
        skip_serializing_if = "serde_json::Map::is_empty",
        deserialize_with = "extra_body"
    )]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Sent with every request: a value, or `{ env = "VAR" }` to read it from the environment
    /// when the run starts (such a value is a secret: it never reaches a bundle, log or error).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderSource>,
}

impl RequestExtras {
    pub fn is_empty(&self) -> bool {
        self.extra_body.is_empty() && self.headers.is_empty()
    }
}

/// `[target.tls]`: the platform's certificate store is trusted by default; a private CA or a
/// self-signed server needs its certificate named here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// A PEM file of CA certificates trusted besides the platform's (relative to the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate, unverified. Reported on every run that uses it: anyone on the
    /// path could be the server that was measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl Tls {
    pub fn is_default(&self) -> bool {
        *self == Tls::default()
    }
}

/// Where a header's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HeaderSource {
    /// Written in the contract (and so in the bundle's copy of it).
    Value(String),
    /// Read from this environment variable when the run starts; never written anywhere.
    Env { env: String },
}

/// `extra_body` must be a table; said so, with an example, rather than serde's "expected a map".
fn extra_body<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Map<String, serde_json::Value>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(serde::de::Error::custom(format!(
            "extra_body must be a table of fields to merge into every body, e.g. \
             extra_body = {{ chat_template_kwargs = {{ enable_thinking = false }} }}, not {other}"
        ))),
    }
}

/// Declared facts about the target; missing ones make a result directional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declared {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<String>,
    /// Accelerators serving the target, when telemetry does not count them (it lists each
    /// device it reports on): the divisor of the per-accelerator figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerators: Option<u32>,
    /// What the whole deployment under test costs per hour (every accelerator and host serving
    /// it), in `currency`: the numerator of the cost figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// The currency of `price_per_hour` (`USD`, `EUR`, …); required with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// `[target.telemetry]`: where the accelerators' telemetry is published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// Prometheus text pages: full URLs (a DCGM exporter listens on `:9400/metrics`, AMD's on
    /// `:5000/metrics`), or a path on the target's own host (`/telemetry` is the simulator's).
    /// The target's API key is never sent to them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    /// How often each is scraped; absent: every second. The energy over the steady window is
    /// interpolated between scrapes, so a shorter interval narrows its bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Seconds>,
}

impl Telemetry {
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.interval.is_none()
    }

    /// The scrape interval, seconds.
    pub fn every_s(&self) -> f64 {
        self.interval.map_or(1.0, |s| s.0)
    }

    /// Each page's full URL, a path resolved against the target's `base`.
    pub fn resolved(&self, base: &str) -> Vec<String> {
        self.urls
            .iter()
            .map(|u| match u.starts_with('/') {
                true => format!("{}{u}", base.trim_end_matches('/')),
                false => u.clone(),
            })
            .collect()
    }
}

/// The requests' shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Seed of the plan: same contract and seed, same requests.
    #[serde(default)]
    pub seed: u64,
    /// Stream responses (SSE). TTFT and ITL exist only when streaming.
    #[serde(default = "yes")]
    pub stream: bool,
    /// Counts and builds prompts: a Hugging Face `tokenizer.json` (relative to the contract),
    /// exact for its model; `"server"`, the target's own tokenize endpoint; absent, the
    /// simulator's words (exact on the simulator only, and labelled approximate elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// SHA-256 of `tokenizer`, filled when the contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_sha256: Option<String>,
    /// `synthetic` prompts, or prompts from `dataset`.
    #[serde(default)]
    pub prompt_source: PromptSource,
    /// JSONL (`{"prompt" | "messages", "output_tokens"?}`) or ShareGPT file, relative to the
    /// contract: the prompts (`prompt_source = "dataset"`) or the lengths of `empirical` dists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<PathBuf>,
    /// `jsonl` or `sharegpt`; detected from the file when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_format: Option<DatasetFormat>,
    /// SHA-256 of `dataset`, filled when the contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_sha256: Option<String>,
    /// Cache state: `cold` (every prompt unique from its first word), `shared` (requests share
    /// one of `prefixes` prefixes of `shared_prefix_tokens` tokens) or `warm` (shared, and each
    /// prefix sent once before the load starts).
    #[serde(default)]
    pub prefix_cache: PrefixCache,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefixes: Option<u32>,
    /// Prompt length in tokens (default: fixed 256; `dataset` for dataset prompts; `trace`
    /// under a trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<LengthDist>,
    /// Output length in tokens (`max_tokens`; default fixed 128, `trace` under a trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Ask the server for exactly the planned output length (`ignore_eos`, `min_tokens`).
    /// Off by default for an API that has no such field (`api::Capabilities::exact_output`).
    #[serde(default = "yes")]
    pub enforce_output_length: bool,
    /// Inputs per request, for an API that takes several (embeddings): each is the planned
    /// prompt, so a request carries `batch` times its tokens.
    #[serde(default = "one_u32", skip_serializing_if = "is_one")]
    pub batch: u32,
    #[serde(default)]
    pub sampling: Sampling,
    /// The run's cache nonce: every prompt of a run starts with a lead made from it, so no
    /// prompt of one run shares more than that lead with a prompt of another and a prefix
    /// cache filled by an earlier run cannot serve this one ("cold" means cold across runs
    /// too). `goodput run` draws a new one for every run and writes it into the bundle's
    /// contract, where `goodput plan` reads it to reproduce the exact prompts. Not part of any
    /// fingerprint: two runs of one contract are the same workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_nonce: Option<String>,
    /// Multi-turn conversations (`[workload.sessions]`): each open-loop arrival starts one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Agent tasks (`[workload.task]`): each open-loop arrival starts a graph of model and
    /// tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<task::Task>,
    /// Images in each request's user message (`[workload.images]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<images::Images>,
    /// Tool calls graded per request (`[workload.tools]`): filled for a dataset of tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Tools>,
}

/// `[workload.tools]`: how a tool dataset's calls are graded (`dataset_format` `bfcl` or
/// `tools`); written out in a resolved contract.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tools {
    /// BFCL's category (`simple_python`, `multiple`, `parallel`, …): from the data file's name
    /// (`BFCL_v4_<category>.json`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// BFCL's answers file, relative to the contract: `possible_answer/<the dataset's name>`
    /// beside the dataset when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<PathBuf>,
    /// SHA-256 of `answers`, filled when the contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_sha256: Option<String>,
    /// The grading rule, filled when the dataset is read: `simple`, `multiple`, `parallel`
    /// (BFCL's AST check) or `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// `[workload.sessions]`: every open-loop arrival starts a conversation of `turns` turns. Turn
/// 1 is the arrival's request; each later turn is sent `think_ms` after the answer to the
/// turn before it arrived, and carries the whole conversation so far (every earlier prompt and
/// the answer actually received) plus a new user message of `workload.input_tokens` tokens.
/// `workload.output_tokens` is each turn's answer length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Turns per session, drawn per session.
    pub turns: LengthDist,
    /// Think time between an answer and the next turn, milliseconds, drawn per turn (default
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<LengthDist>,
    /// Tokens of a system prompt every session shares (0: none).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub system_prompt_tokens: u32,
    /// What a follow-up turn's new user message is: `prose` (the default), or `tool_result`,
    /// a JSON blob `{"tool_result": "…"}` of `workload.input_tokens` tokens, as an agent's
    /// tool-calling loop sends back what a tool returned.
    #[serde(default, skip_serializing_if = "FollowUp::is_prose")]
    pub follow_up: FollowUp,
}

/// How requests are spread over `target.urls`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spread {
    /// Plan index `i` to URL `i mod n` (a session's later turns by their own indices).
    #[default]
    RoundRobin,
    /// Every turn of a session to the URL of its first turn (`session mod n`); without
    /// sessions the same as round robin.
    Session,
}

impl Spread {
    /// Which of `n` URLs a request goes to: by its plan index, or its session's.
    pub fn pick(self, index: u64, session: Option<u64>, n: usize) -> usize {
        let key = match self {
            Spread::RoundRobin => index,
            Spread::Session => session.unwrap_or(index),
        };
        (key % n.max(1) as u64) as usize
    }
}

/// A session's follow-up user messages (`[workload.sessions] follow_up`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUp {
    #[default]
    Prose,
    ToolResult,
}

impl FollowUp {
    fn is_prose(&self) -> bool {
        *self == FollowUp::Prose
    }
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// The most turns a session may have.
pub const MAX_TURNS: u32 = 256;

/// The longest a run's measured phase, its warm-up or one stage may last, s: a week (a soak
/// test's longest). A bound beyond it is a typo that would hold a server without end.
pub const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptSource {
    /// Words from a fixed vocabulary, built to the planned length in the workload's tokenizer.
    #[default]
    Synthetic,
    /// Entries of `workload.dataset`, in a seeded order.
    Dataset,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrefixCache {
    /// No two prompts share a prefix: each starts with its own request tag.
    #[default]
    Cold,
    /// Prompts start with one of `prefixes` shared prefixes, then their own tag.
    Shared,
    /// As `shared`, with each prefix sent once (one output token) before the load starts.
    Warm,
}

/// A token-length distribution, rounded and clamped to `[min, max]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    Fixed {
        value: u32,
    },
    Uniform {
        min: u32,
        max: u32,
    },
    Normal {
        mean: f64,
        stddev: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "max_len")]
        max: u32,
    },
    /// Log-normal with the given mean and standard deviation *of the lengths*.
    Lognormal {
        mean: f64,
        stddev: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "max_len")]
        max: u32,
    },
    /// Drawn uniformly from observed lengths: a file of whole numbers, one per line, or (no
    /// `file`) the workload's dataset: its prompts' tokens (input) or answers' (output).
    Empirical {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_sha256: Option<String>,
    },
    /// Each dataset entry's own length (`prompt_source = "dataset"`).
    Dataset,
    /// Each trace row's own length (`load.arrival = "trace"`).
    Trace,
}

/// Requests sent before the measured (steady) phase, with the same workload shape and the same
/// arrival process. One rule: a number of `requests`, a `duration`, or `until_stable`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Warmup {
    #[serde(default)]
    pub requests: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Seconds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_stable: Option<UntilStable>,
}

/// Warm up until the median TTFT of the last `window` finished warm-up requests differs from
/// that of the `window` before by less than `threshold` (relative), or `max_requests` were sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UntilStable {
    #[serde(default = "default_window")]
    pub window: u32,
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    #[serde(default = "default_max_warmup")]
    pub max_requests: u64,
}

/// The cold-start test: optionally launch the server, time it to readiness and to the first
/// token, and measure the first `requests` requests as their own result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdStart {
    /// Command that starts the server. `{port}` in it (and in `target.url`) is replaced by a
    /// free loopback port. Absent: attach to a server that is starting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Vec<String>>,
    /// Extra environment for the launched server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the launched server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// Polled until it answers 2xx (falls back to `/v1/models` when it answers 404).
    #[serde(default = "default_ready_path")]
    pub ready_path: String,
    /// Longest wait for readiness.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: Seconds,
    /// Requests sent one after another once ready, reported as the cold-start phase.
    #[serde(default = "default_cold_requests")]
    pub requests: u32,
    /// Between SIGTERM and SIGKILL when stopping the launched server.
    #[serde(default = "default_stop_grace")]
    pub stop_grace: Seconds,
}

impl Default for ColdStart {
    fn default() -> Self {
        ColdStart {
            launch: None,
            env: BTreeMap::new(),
            workdir: None,
            ready_path: default_ready_path(),
            ready_timeout: default_ready_timeout(),
            requests: default_cold_requests(),
            stop_grace: default_stop_grace(),
        }
    }
}

/// Service-level objective: per-request thresholds, the percentile they are judged at, and the
/// fraction of requests that must meet them all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Millis>,
    /// Time to first output (answer) token: TTFT after any reasoning (thinking) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo_ms: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<Millis>,
    /// An agent task's latency (`[workload.task]`): its first call's intended send to its last
    /// answer, judged at `percentile`; a task meets the SLO when it is within this and every
    /// call met the thresholds above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ms: Option<Millis>,
    /// A request of a tool workload meets the SLO only when its calls are graded correct as
    /// well as on time (default on for a dataset of tools; off: correctness is reported
    /// beside the latency, never in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct_tool_calls: Option<bool>,
    #[serde(default = "default_percentile")]
    pub percentile: f64,
    #[serde(default = "default_attainment")]
    pub attainment: f64,
}

impl Slo {
    /// The thresholds that are set, by metric name (`ttft`, `tpot`, `e2e`).
    pub fn thresholds(&self) -> Vec<(&'static str, f64)> {
        [
            ("ttft", self.ttft_ms),
            ("ttfo", self.ttfo_ms),
            ("tpot", self.tpot_ms),
            ("e2e", self.e2e_ms),
        ]
        .into_iter()
        .filter_map(|(m, t)| Some((m, t?.0)))
        .collect()
    }

    /// "The run meets the SLO" in words: each metric's percentile within its threshold and
    /// the attainment target (the rule `analyze` applies).
    pub fn rule(&self) -> String {
        let parts: Vec<String> = self
            .thresholds()
            .iter()
            .map(|(m, t)| format!("{} p{} ≤ {t} ms", m.to_uppercase(), self.percentile))
            .collect();
        format!(
            "{} and attainment ≥ {:.0}%",
            parts.join(", "),
            self.attainment * 100.0
        )
    }
}

/// Measurement boundaries: where latency starts, what counts as a token, when a run is valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// `intended` (open loop: the schedule's send time) or `sent` (the actual send).
    #[serde(default)]
    pub latency_origin: LatencyOrigin,
    /// What counts as the first token: the first chunk carrying generated text.
    #[serde(default)]
    pub first_token: FirstToken,
    /// Source of output token counts: server `usage` when reported (else client count), or
    /// always the client's count.
    #[serde(default)]
    pub output_tokens: TokenSource,
    /// How the client counts tokens in a chunk: `words` (exact on the simulator) or `chunks`
    /// (one per text-carrying chunk). Default: `words` on the simulator, `chunks` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token_count: Option<ClientTokenCount>,
    /// The run is invalid for tail claims when p99 dispatch lag exceeds this.
    #[serde(default = "default_lag")]
    pub max_dispatch_lag_ms: Millis,
    /// The run is invalid when the achieved rate is this fraction below the offered rate.
    #[serde(default = "default_rate_tolerance")]
    pub rate_tolerance: f64,
    /// Relative difference between requested, sent and server-reported token lengths (mean,
    /// p50 or p90) above which the summary warns.
    #[serde(default = "default_length_tolerance")]
    pub length_tolerance: f64,
    /// Confidence for the sample-size check on reported percentiles (MLPerf early stopping).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// How often the target's Prometheus `/metrics` is scraped during the run (also once
    /// before and once after); `0` turns scraping off.
    #[serde(default = "default_scrape")]
    pub server_metrics_interval: Seconds,
    /// Open loop: stop the load once the run's validity verdict cannot change (overload is
    /// certain from the requests in flight and the TTFTs already seen), instead of keeping the
    /// drain on until the last steady request ends or times out; the steady requests still in
    /// flight are then counted as misses (`abandoned`). `false` runs the plan to its end. A load
    /// program (`[[load.stage]]`) always runs to its end: its later stages are answers too.
    #[serde(default = "default_true")]
    pub stop_when_decided: bool,
    /// `[measurement.guard]`: the progress guard, on by default: the load stops once the
    /// server has fallen hopelessly behind (docs/guide/safety.md). Written out, and part of the
    /// measurement fingerprint, only when it is not the default.
    #[serde(default, skip_serializing_if = "Guard::is_default")]
    pub guard: Guard,
    /// `[measurement.stop]`: end the measured phase once the answer is known (precision, a
    /// conclusive verdict) rather than at the last planned request; `load.requests` (or
    /// `duration`) is then the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopWhenKnown>,
    /// `[measurement.traces]`: trace context on every request, the engine's spans received and
    /// joined to the records, goodput's own spans sent. Absent: trace context is sent, nothing
    /// is received. Not part of any fingerprint: it does not change the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<Traces>,
}

/// `[measurement.guard]`: when the load stops on its own because the server has fallen
/// hopelessly behind (`driver::guard` keeps the rules; docs/guide/safety.md states them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// `false`: the load runs its plan whatever the server does (refused on an open loop that
    /// nothing else bounds: see `Contract::guarded_against_floods`).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The longest the oldest request may wait for its first token while more wait than the
    /// server has served at once, and the longest the server may send nothing while requests
    /// are in flight. Absent: derived as the run goes (`driver::guard::Bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Seconds>,
}

impl Default for Guard {
    fn default() -> Self {
        Guard {
            enabled: true,
            max_wait: None,
        }
    }
}

impl Guard {
    pub fn is_default(&self) -> bool {
        *self == Guard::default()
    }
}

impl Measurement {
    /// Whether every request carries a W3C `traceparent` (on unless `traces.propagate = false`).
    pub fn propagates_traces(&self) -> bool {
        self.traces.as_ref().is_none_or(|t| t.propagate)
    }
}

/// `[measurement.traces]` (docs/guide/traces.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traces {
    /// Send a W3C `traceparent` (the run's trace id for the request) with every request.
    #[serde(default = "default_true")]
    pub propagate: bool,
    /// Receive the engine's spans (OTLP, gRPC and HTTP/protobuf on one port) at this address
    /// while the run lasts, e.g. `127.0.0.1:4317`; point the engine's exporter at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// After the load, how long to wait for spans still to come (exporters send in batches);
    /// the wait ends as soon as every finished request's span has come.
    #[serde(default = "default_traces_wait")]
    pub wait: Seconds,
    /// The most spans kept (the rest are counted); unset, sized to the run's requests
    /// ([`Traces::span_bound`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spans: Option<u64>,
    /// How far a server time may exceed the client's view of the same request before the
    /// request is flagged (the server cannot see more of a request than its client).
    #[serde(default = "default_traces_tolerance")]
    pub tolerance_ms: Millis,
    /// Send goodput's own client spans (one per request, the parent of the engine's) to this
    /// OTLP endpoint after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// The protocol of `export`: `http/protobuf` (the full URL, `…/v1/traces`) or `grpc`.
    #[serde(default = "default_export_protocol")]
    pub export_protocol: String,
}

fn default_traces_wait() -> Seconds {
    Seconds(15.0)
}
impl Traces {
    /// The most spans a run keeps: `max_spans` when set; else room for
    /// [`SPANS_PER_REQUEST`] spans per request the contract plans (and 10,000 more), at most
    /// [`MAX_SPANS`]. An engine sends one to a few spans a request; a server that sends far
    /// more on the run's traces must not fill the disk (200,000 spans were 313 MB).
    pub fn span_bound(&self, load: &Load, warmup: &Warmup) -> u64 {
        if let Some(n) = self.max_spans {
            return n;
        }
        let steady = match (load.requests(), load.duration(), load.rate) {
            (Some(n), _, _) => Some(n as f64),
            (None, Some(d), Some(r)) if load.kind == Some(LoadModel::Open) => Some(d.seconds() * r),
            (None, None, _) if !load.stage.is_empty() => load
                .stage
                .iter()
                .map(|s| s.expected_requests())
                .sum::<Option<f64>>(),
            _ => None,
        };
        match steady {
            Some(n) if n.is_finite() => {
                let planned = n + warmup.requests as f64;
                ((planned * SPANS_PER_REQUEST as f64) as u64 + 10_000).min(MAX_SPANS)
            }
            _ => MAX_SPANS,
        }
    }
}

/// Spans kept per planned request when `max_spans` is unset.
pub const SPANS_PER_REQUEST: u64 = 16;

/// The most spans kept when `max_spans` is unset and the run's request count is not known
/// ahead (a closed loop bound by its duration).
pub const MAX_SPANS: u64 = 1_000_000;
fn default_traces_tolerance() -> Millis {
    Millis(5.0)
}
fn default_export_protocol() -> String {
    "http/protobuf".into()
}

/// `[measurement.stop]`: when the measured phase may end before its budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopWhenKnown {
    /// Stop once every SLO metric's percentile is known within ± this fraction of its value
    /// (the half-width of its distribution-free confidence interval at
    /// `measurement.confidence`), e.g. 0.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    /// Stop once the SLO's verdict is conclusive at `measurement.confidence`: met and
    /// supported, or missed conclusively.
    #[serde(default)]
    pub conclusive: bool,
    /// Steady requests finished before either rule is first applied (default 100).
    #[serde(default = "default_stop_min")]
    pub min_requests: u64,
}

fn default_stop_min() -> u64 {
    100
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LatencyOrigin {
    #[default]
    Intended,
    Sent,
}

impl LatencyOrigin {
    /// Where latency counts from, in words: "the intended send time", "the actual send".
    pub fn phrase(self) -> &'static str {
        match self {
            LatencyOrigin::Intended => "the intended send time",
            LatencyOrigin::Sent => "the actual send",
        }
    }
}

impl std::fmt::Display for LatencyOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LatencyOrigin::Intended => "intended",
            LatencyOrigin::Sent => "sent",
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FirstToken {
    #[default]
    #[serde(rename = "first-token-chunk")]
    FirstTokenChunk,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenSource {
    #[default]
    Usage,
    Client,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientTokenCount {
    Words,
    Chunks,
}

fn default_name() -> String {
    "default".into()
}
fn default_timeout() -> Seconds {
    Seconds(120.0)
}
fn default_keep_alive() -> Seconds {
    Seconds(DEFAULT_KEEP_ALIVE.as_secs_f64())
}
fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn max_len() -> u32 {
    131_072
}
fn default_input() -> LengthDist {
    LengthDist::Fixed { value: 256 }
}
fn default_output() -> LengthDist {
    LengthDist::Fixed { value: 128 }
}
pub const DEFAULT_IN_FLIGHT: u32 = 4096;
fn default_window() -> u32 {
    20
}
fn default_threshold() -> f64 {
    0.05
}
fn default_max_warmup() -> u64 {
    500
}
fn default_ready_path() -> String {
    "/health".into()
}
fn default_ready_timeout() -> Seconds {
    Seconds(600.0)
}
fn default_cold_requests() -> u32 {
    5
}
fn default_stop_grace() -> Seconds {
    Seconds(10.0)
}
fn default_percentile() -> f64 {
    99.0
}
fn default_true() -> bool {
    true
}
fn default_attainment() -> f64 {
    0.9
}
fn default_lag() -> Millis {
    Millis(5.0)
}
fn default_length_tolerance() -> f64 {
    0.10
}
fn default_rate_tolerance() -> f64 {
    0.05
}
fn default_confidence() -> f64 {
    0.99
}
/// See [`Target::max_connect_failures`].
pub const DEFAULT_MAX_CONNECT_FAILURES: u32 = 20;
fn default_max_connect_failures() -> u32 {
    DEFAULT_MAX_CONNECT_FAILURES
}
fn is_default_max_connect_failures(n: &u32) -> bool {
    *n == DEFAULT_MAX_CONNECT_FAILURES
}
fn default_scrape() -> Seconds {
    Seconds(1.0)
}

impl Default for Target {
    fn default() -> Self {
        Target {
            url: None,
            urls: Vec::new(),
            spread: None,
            api: ApiKind::default(),
            model: None,
            api_key_env: None,
            timeout: default_timeout(),
            keep_alive: default_keep_alive(),
            follow_redirects: false,
            max_connect_failures: DEFAULT_MAX_CONNECT_FAILURES,
            request: RequestExtras::default(),
            tls: Tls::default(),
            declared: Declared::default(),
            telemetry: Telemetry::default(),
            simulator: None,
        }
    }
}

impl Workload {
    /// `tokenizer = "server"`: count through the target's tokenize endpoint.
    pub fn server_tokenizer(&self) -> bool {
        self.tokenizer.as_deref() == Some(Path::new("server"))
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            seed: 0,
            stream: true,
            tokenizer: None,
            tokenizer_sha256: None,
            prompt_source: PromptSource::default(),
            dataset: None,
            dataset_format: None,
            dataset_sha256: None,
            prefix_cache: PrefixCache::default(),
            shared_prefix_tokens: None,
            prefixes: None,
            input_tokens: None,
            output_tokens: None,
            enforce_output_length: true,
            batch: 1,
            sampling: Sampling::default(),
            cache_nonce: None,
            sessions: None,
            task: None,
            images: None,
            tools: None,
        }
    }
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            ttft_ms: None,
            ttfo_ms: None,
            tpot_ms: None,
            e2e_ms: None,
            task_ms: None,
            correct_tool_calls: None,
            percentile: default_percentile(),
            attainment: default_attainment(),
        }
    }
}

impl Default for Measurement {
    fn default() -> Self {
        Measurement {
            latency_origin: LatencyOrigin::default(),
            first_token: FirstToken::default(),
            output_tokens: TokenSource::default(),
            client_token_count: None,
            max_dispatch_lag_ms: default_lag(),
            rate_tolerance: default_rate_tolerance(),
            length_tolerance: default_length_tolerance(),
            confidence: default_confidence(),
            server_metrics_interval: default_scrape(),
            stop_when_decided: true,
            guard: Guard::default(),
            stop: None,
            traces: None,
        }
    }
}

impl Contract {
    /// Whether any SLO is set: `[slo]`'s, or a class's.
    pub fn has_slo(&self) -> bool {
        self.slo.is_set()
            || self
                .classes
                .iter()
                .any(|k| k.slo.as_ref().is_some_and(Slo::is_set))
    }
}

impl Slo {
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some()
            || self.ttfo_ms.is_some()
            || self.tpot_ms.is_some()
            || self.e2e_ms.is_some()
    }
}

/// A contract that cannot be used, located as precisely as the input allows.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    // `cause`, not `source`: the message says it, and a source would print it twice in a chain.
    #[error("cannot read contract {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}", located(.path, *.line, .key.as_deref(), .message))]
    Invalid {
        path: PathBuf,
        line: Option<usize>,
        key: Option<String>,
        message: String,
    },
}

fn located(path: &Path, line: Option<usize>, key: Option<&str>, message: &str) -> String {
    let mut s = path.display().to_string();
    if let Some(l) = line {
        s.push_str(&format!(":{l}"));
    }
    s.push_str(": ");
    if let Some(k) = key {
        s.push_str(&format!("`{k}`: "));
    }
    s.push_str(message);
    s
}

/// The contract used by `goodput run` with no file: the embedded simulator, open-loop Poisson.
pub const BUILTIN: &str = include_str!("../../examples/chat.toml");

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Reads, parses, validates and resolves a contract file.
pub fn load(path: &Path) -> Result<Contract, ContractError> {
    let src = crate::text::read_capped_string(path, crate::text::MAX_CONTRACT_BYTES).map_err(
        |cause| ContractError::Read {
            path: path.to_owned(),
            cause,
        },
    )?;
    parse(&src, path)
}

/// toml's error as the contract's: its file, line and full key, or the table the whole file
/// lacks.
fn toml_error(e: &toml::de::Error, src: &str, path: &Path) -> ContractError {
    let message = e.message().trim().to_owned();
    // A required section missing from the whole file: toml's span is then the document's start
    // (or all of it), whose first line may belong to another table; name the section alone.
    if let (Some(field), true) = (
        message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`')),
        e.span()
            .is_some_and(|s| s.start == 0 && (s.end == 0 || s.end >= src.trim_end().len())),
    ) {
        return ContractError::Invalid {
            path: path.to_owned(),
            line: None,
            key: None,
            message: format!(
                "no `[{field}]` table: every contract states one \
                 (`goodput init` writes a contract to start from)"
            ),
        };
    }
    let line = e.span().map(|s| source::line_of_offset(src, s.start));
    // A value of the wrong type is named by its full key; a missing field by its table.
    let table = line.and_then(|l| {
        let table = source::table_at_line(src, l);
        match source::key_at_line(src, l).filter(|_| !message.starts_with("missing field")) {
            Some(k) => Some(table.map_or(k.clone(), |t| format!("{t}.{k}"))),
            None => table,
        }
    });
    ContractError::Invalid {
        path: path.to_owned(),
        line,
        key: table,
        message,
    }
}

/// Parses and resolves contract text; `path` is used in messages only.
pub fn parse(src: &str, path: &Path) -> Result<Contract, ContractError> {
    let mut c: Contract = toml::from_str(src).map_err(|e| toml_error(&e, src, path))?;
    c.api_limits(&|key| source::has_key(src, key))
        .and_then(|()| c.one_warmup_rule(&|key| source::has_key(src, key)))
        .and_then(|()| c.resolve())
        .map_err(|(key, message)| ContractError::Invalid {
            path: path.to_owned(),
            line: source::line_of_key(src, &key),
            key: Some(key),
            message,
        })?;
    // A credential written literally: a secret from here on (redacted in every output), and
    // a note on keeping it out of the file.
    let literal: Vec<(String, String)> =
        std::iter::once(("target.request".to_owned(), &c.target.request))
            .chain(
                c.classes
                    .iter()
                    .enumerate()
                    .map(|(k, class)| (classes::key(k, "request"), &class.request)),
            )
            .flat_map(|(prefix, r)| {
                r.headers.iter().filter_map(move |(name, v)| match v {
                    HeaderSource::Value(v) if crate::secrets::is_credential_header(name) => {
                        Some((format!("{prefix}.headers.{name}"), v.clone()))
                    }
                    _ => None,
                })
            })
            .collect();
    // Old key names, noted with where they stand.
    c.notes = c
        .notes
        .iter()
        .map(|key| {
            let line = source::line_of_key(src, key).map_or(String::new(), |l| format!(":{l}"));
            format!(
                "{}{line}: `{key}` is now `load.kind` (the old name is still read; the bundle's contract writes the new one)",
                path.display()
            )
        })
        .collect();
    for (key, value) in literal
        .into_iter()
        .filter(|(_, v)| v != crate::secrets::MASK)
    {
        crate::secrets::register(&value);
        let line = source::line_of_key(src, &key).map_or(String::new(), |l| format!(":{l}"));
        c.notes.push(format!(
            "{}{line}: `{key}` is a credential written in the file: goodput redacts it from everything it writes and prints, but the file itself holds it; `{{ env = \"VAR\" }}` reads it from the environment instead",
            path.display()
        ));
    }
    Ok(c)
}

impl Contract {
    /// The resolved contract as TOML, every default written out.
    /// The contract as TOML, as a bundle keeps it: every default written out, and the values
    /// of `[cold_start] env` replaced by [`crate::secrets::MASK`] (their names kept), since
    /// they are where a server's tokens go (`HF_TOKEN`).
    pub fn to_toml(&self) -> String {
        let mut c = std::borrow::Cow::Borrowed(self);
        if self
            .cold_start
            .as_ref()
            .is_some_and(|cs| !cs.env.is_empty())
            && let Some(cs) = c.to_mut().cold_start.as_mut()
        {
            for v in cs.env.values_mut() {
                *v = crate::secrets::MASK.to_owned();
            }
        }
        toml::to_string_pretty(&*c).unwrap_or_else(|e| format!("# could not serialise: {e}\n"))
    }

    /// Whether the target is the embedded simulator.
    pub fn embedded(&self) -> bool {
        self.target.url.is_none()
    }

    /// The target axis: the server's properties, not where it listens (the host only) or how
    /// the client reaches, trusts and waits for it.
    fn target_axis(&self) -> serde_json::Value {
        let mut target = serde_json::to_value(&self.target).unwrap_or_default();
        if let Some(t) = target.as_object_mut() {
            // Where the server listens and how the client waits and connects are not
            // properties of the server (the last two are measurement boundaries).
            t.remove("timeout");
            t.remove("keep_alive");
            // How the client trusts the server's certificate is not a property of the server.
            t.remove("tls");
            t.remove("api_key_env");
            t.remove("max_connect_failures");
            // Declared facts describe the server; they change nothing goodput sends. `compare`
            // compares the resolved facts (declared or discovered alike) of each side instead.
            t.remove("declared");
            // Where the accelerators' telemetry is read changes nothing the server is sent.
            t.remove("telemetry");
            if let Some(url) = t.get("url").and_then(|u| u.as_str()).map(host_of) {
                t.insert("url".into(), serde_json::Value::String(url));
            }
            if let Some(urls) = t.get_mut("urls").and_then(|u| u.as_array_mut()) {
                for u in urls {
                    *u = serde_json::Value::String(host_of(u.as_str().unwrap_or_default()));
                }
            }
        }
        target
    }

    /// Classes join the axes only when there are some, so a contract without them keeps the
    /// fingerprints it always had: what each class asks joins the workload, its share the
    /// load, its SLO the SLO.
    fn class_axes(
        &self,
        workload: &mut serde_json::Value,
        load: &mut serde_json::Value,
        slo: &mut serde_json::Value,
    ) {
        if self.classes.is_empty() {
            return;
        }
        let mut asks = Vec::new();
        let (mut shares, mut slos) = (serde_json::Map::new(), serde_json::Map::new());
        for c in &self.classes {
            let mut v = serde_json::to_value(c).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("share");
                o.remove("slo");
            }
            asks.push(v);
            shares.insert(c.name.clone(), c.share.unwrap_or(0.0).into());
            slos.insert(
                c.name.clone(),
                serde_json::to_value(c.slo_or(&self.slo)).unwrap_or_default(),
            );
        }
        for (axis, key, v) in [
            (workload, "classes", serde_json::Value::Array(asks)),
            (load, "class_shares", shares.into()),
            (slo, "classes", slos.into()),
        ] {
            if let Some(o) = axis.as_object_mut() {
                o.insert(key.into(), v);
            }
        }
    }

    /// The canonical form of each contract axis (docs/ARCHITECTURE.md): what fingerprints hash and
    /// what `compare` diffs. Durations are numbers in their field's unit, defaults are filled,
    /// and things that do not change the result (port, API key variable, repeat count) are left
    /// out.
    pub fn axes(&self) -> [(&'static str, serde_json::Value); 6] {
        let target = self.target_axis();
        let mut measured = serde_json::to_value(&self.measurement).unwrap_or_default();
        if let Some(m) = measured.as_object_mut() {
            // Receiving spans, or sending trace context, does not change the load.
            m.remove("traces");
        }
        let measurement = serde_json::json!({
            "measurement": measured,
            "warmup": self.warmup,
            "cold_start": self.cold_start.as_ref().map(|c| serde_json::json!({"requests": c.requests, "ready_path": c.ready_path})),
            "timeout_s": self.target.timeout.0,
            "keep_alive_s": self.target.keep_alive.0,
            "tool_major": env!("CARGO_PKG_VERSION_MAJOR"),
        });
        // A file is named by its content, not by where it lies: the same tokenizer, dataset or
        // trace in another directory (or on another machine) is the same workload.
        let mut workload = serde_json::to_value(&self.workload).unwrap_or_default();
        by_content(&mut workload, &["tokenizer", "dataset"]);
        if let Some(w) = workload.as_object_mut() {
            // Each run draws its own: the workload is the same.
            w.remove("cache_nonce");
        }
        for dist in ["input_tokens", "output_tokens"] {
            if let Some(d) = workload.get_mut(dist) {
                by_content(d, &["file"]);
            }
        }
        if let Some(i) = workload.get_mut("images") {
            by_content(i, &["folder"]);
        }
        let mut load = serde_json::to_value(&self.load).unwrap_or_default();
        by_content(&mut load, &["trace"]);
        let mut slo = serde_json::to_value(&self.slo).unwrap_or_default();
        self.class_axes(&mut workload, &mut load, &mut slo);
        [
            ("target", target),
            ("workload", workload),
            ("load", load),
            ("slo", slo),
            ("measurement", measurement),
            ("quality", {
                // The dataset is named by its content, not by where it lies.
                let mut q = serde_json::to_value(&self.quality).unwrap_or_default();
                if let Some(o) = q.as_object_mut() {
                    o.remove("references");
                }
                q
            }),
        ]
    }

    /// Per-axis fingerprints (see docs/ARCHITECTURE.md).
    pub fn fingerprints(&self) -> Fingerprints {
        let [t, w, l, s, m, q] = self.axes().map(|(_, v)| digest(&v));
        Fingerprints {
            target: t,
            workload: w,
            load: l,
            slo: s,
            measurement: m,
            quality: q,
        }
    }
}

/// Drops each `key` whose `key_sha256` sits beside it, leaving the file's identity to its hash.
fn by_content(v: &mut serde_json::Value, keys: &[&str]) {
    if let Some(o) = v.as_object_mut() {
        for k in keys {
            if o.contains_key(&format!("{k}_sha256")) {
                o.remove(*k);
            }
        }
    }
}

/// Stable hashes of each contract axis, over canonical JSON (sorted keys, numbers in canonical
/// units, defaults filled), so equivalent contracts hash alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fingerprints {
    pub target: String,
    pub workload: String,
    pub load: String,
    pub slo: String,
    pub measurement: String,
    /// Absent in bundles written before the quality axis existed.
    #[serde(default)]
    pub quality: String,
}

impl Contract {
    /// Fingerprints in axis order (target, workload, load, slo, measurement, quality).
    pub fn fingerprints_list(&self) -> [String; 6] {
        self.axes().map(|(_, v)| digest(&v))
    }
}

impl Fingerprints {
    /// A short hash of all axes, used in bundle directory names.
    pub fn short(&self) -> String {
        let all = format!(
            "{}{}{}{}{}{}",
            self.target, self.workload, self.load, self.slo, self.measurement, self.quality
        );
        crate::text::sha256_prefix(all.as_bytes(), 4)
    }
}

fn digest(v: &serde_json::Value) -> String {
    // serde_json's map is ordered by key unless `preserve_order` is on, which this crate never
    // enables: `to_string` is therefore canonical.
    crate::text::sha256_prefix(v.to_string().as_bytes(), 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Contract, ContractError> {
        parse(s, Path::new("c.toml"))
    }

    const MIN: &str = "[load]\nmodel = \"open\"\nrate = 2\nrequests = 10\n";

    #[test]
    fn builtin_contract_is_valid_and_embedded() {
        let c = parse_str(BUILTIN).unwrap();
        assert!(c.embedded());
        assert!(c.target.simulator.is_some());
    }

    #[test]
    fn defaults_are_written_out() {
        let c = parse_str(MIN).unwrap();
        let t = c.to_toml();
        for key in [
            "timeout",
            "input_tokens",
            "latency_origin",
            "percentile",
            "client_token_count",
            "prefill_tokens_per_s",
        ] {
            assert!(t.contains(key), "{key} missing from\n{t}");
        }
        // The resolved copy parses back to the same contract (it writes `load.kind`, so the
        // old name's note is not there again).
        let again = parse_str(&t).unwrap();
        assert!(again.notes.is_empty(), "{:?}", again.notes);
        assert_eq!(
            Contract {
                notes: c.notes.clone(),
                ..again
            },
            c
        );
    }

    /// Issue #22: what a session workload cannot be is refused with its file, line and key
    /// before any request; a valid one writes out and reads back as itself.
    #[test]
    fn session_workloads_are_checked_and_located() {
        let open = "[load]\nkind = \"open\"\nrate = 2\nrequests = 10\n";
        for (src, want) in [
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 0 }}\n"),
                "c.toml:6: `workload.sessions.turns.value`: must be >= 1",
            ),
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 300 }}\n"),
                "`workload.sessions.turns`: allows 300 turns; at most 256",
            ),
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 2 }}\nthink_ms = {{ dist = \"uniform\", min = 9, max = 3 }}\n"),
                "c.toml:7: `workload.sessions.think_ms`: must be fixed, uniform",
            ),
            (
                "[load]\nkind = \"closed\"\nconcurrency = 2\nrequests = 10\n[workload.sessions]\nturns = { dist = \"fixed\", value = 2 }\n".to_owned(),
                "c.toml:5: `workload.sessions`: need an open-loop load",
            ),
            (
                format!("[target]\napi = \"openai-completions\"\n{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 2 }}\n"),
                "`workload.sessions`: send the conversation as chat messages, which api = \"openai-completions\" cannot",
            ),
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 2 }}\nthink = 3\n"),
                "c.toml:7",
            ),
            // Issue #46: a pause of 49 days, a negative mean pause.
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 2 }}\nthink_ms = {{ dist = \"fixed\", value = 4294967295 }}\n"),
                "c.toml:7: `workload.sessions.think_ms`: allows 4294967295 ms between turns; at most 3600000 ms",
            ),
            (
                format!("{open}[workload.sessions]\nturns = {{ dist = \"fixed\", value = 2 }}\nthink_ms = {{ dist = \"normal\", mean = -5, stddev = 1, min = 0, max = 10 }}\n"),
                "`workload.sessions.think_ms.mean`: is -5: a think time's mean must be >= 0 ms",
            ),
        ] {
            let e = parse_str(&src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
        let c = parse_str(&format!(
            "{open}[workload.sessions]\nturns = {{ dist = \"uniform\", min = 2, max = 4 }}\nthink_ms = {{ dist = \"fixed\", value = 500 }}\nsystem_prompt_tokens = 64\n"
        ))
        .unwrap();
        let again = parse_str(&c.to_toml()).unwrap();
        assert_eq!(again.workload.sessions, c.workload.sessions);
        // Sessions are part of the workload: another shape is another workload.
        let other = parse_str(&c.to_toml().replace("value = 500", "value = 900")).unwrap();
        assert_ne!(c.fingerprints().workload, other.fingerprints().workload);
        // Each session's shape is the seed's: the same plan draws the same turns.
        let inputs = crate::workload::Inputs::default();
        let (a, b) = (
            crate::plan::Plan::new(&c, &inputs),
            crate::plan::Plan::new(&c, &inputs),
        );
        let shapes: Vec<_> = (0..20).map(|i| a.session(i).unwrap()).collect();
        assert_eq!(
            shapes,
            (0..20).map(|i| b.session(i).unwrap()).collect::<Vec<_>>()
        );
        assert!(
            shapes
                .iter()
                .all(|s| (2..=4).contains(&s.turns) && s.think_ms.len() == s.turns as usize - 1)
        );
        assert!(shapes.iter().any(|s| s.turns == 2) && shapes.iter().any(|s| s.turns == 4));
        assert_eq!(
            a.planned_by_phase()[&crate::plan::Phase::Steady],
            shapes[..10].iter().map(|s| u64::from(s.turns)).sum::<u64>()
        );
        // An agent's loop: follow-ups are tool results, JSON of the planned length.
        let agent = parse_str(&format!(
            "{open}[workload]\ninput_tokens = {{ dist = \"fixed\", value = 20 }}\n[workload.sessions]\nturns = {{ dist = \"fixed\", value = 3 }}\nfollow_up = \"tool_result\"\n"
        ))
        .unwrap();
        let p = crate::plan::Plan::new(&agent, &inputs);
        let turn = p.turn(0, 1);
        let v: serde_json::Value = serde_json::from_str(&turn.prompt).unwrap();
        assert!(v["tool_result"].as_str().is_some(), "{}", turn.prompt);
        assert!(
            (20..=21).contains(&turn.input_tokens),
            "{}",
            turn.input_tokens
        );
        assert!(
            p.request(0).prompt.parse::<serde_json::Value>().is_err(),
            "the first turn is prose"
        );
        let e = parse_str(&format!(
            "{open}[workload]\nprompt_source = \"dataset\"\ndataset = \"d.jsonl\"\n[workload.sessions]\nturns = {{ dist = \"dataset\" }}\nfollow_up = \"tool_result\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`workload.sessions.follow_up`: applies to synthetic sessions"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse_str("[load]\nmodel = \"open\"\nrat = 2\nrequests = 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.toml:3"), "{e}");
        assert!(e.contains("rat"), "{e}");
    }

    #[test]
    fn impossible_values_name_their_key() {
        let cases = [
            (
                "[load]\nmodel = \"open\"\nrate = 0\nrequests = 10\n",
                "c.toml:3: `load.rate`",
            ),
            (
                "[load]\nmodel = \"open\"\nrate = 1\nrequests = 10\n[workload]\ninput_tokens = { dist = \"uniform\", min = 9, max = 3 }\n",
                "c.toml:6: `workload.input_tokens.min`",
            ),
            (
                "[load]\nmodel = \"open\"\nrate = 1\nrequests = 10\n[slo]\npercentile = 120\n",
                "c.toml:6: `slo.percentile`",
            ),
            ("[load]\nmodel = \"closed\"\nconcurrency = 4\n", "`load`"),
            (
                "[load]\nmodel = \"open\"\nrate = 1\nrequests = 10\n[target.simulator]\nmax_batch = 0\n",
                "c.toml:6: `target.simulator.max_batch`",
            ),
            // Issue #46: runs that could never end by their own contract.
            (
                "[load]\nkind = \"open\"\nrate = 1\nrequests = 9223372036854775807\n",
                "c.toml:4: `load.requests`: is 9223372036854775807; at most 100000000",
            ),
            (
                "[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 10\nthink_time = 4233600\n",
                "c.toml:5: `load.think_time`: is 4233600 s; at most 3600 s",
            ),
        ];
        for (src, want) in cases {
            let e = parse_str(src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
        // Issue #46: a name no file system takes as a directory (once "File name too long",
        // naming no key).
        let long = format!(
            "name = \"{}\"\n[load]\nkind = \"open\"\nrate = 1\nrequests = 10\n",
            "n".repeat(300)
        );
        let e = parse_str(&long).unwrap_err().to_string();
        assert!(
            e.contains("c.toml:1: `name`: is 300 characters; at most 128"),
            "{e}"
        );
    }

    /// Issue #46: what every request carries is bounded in bytes before the run (a 12 MB
    /// `extra_body` once aborted it with an allocation failure), naming the key.
    #[test]
    fn request_extras_are_bounded_in_bytes() {
        let load = "[load]\nkind = \"open\"\nrate = 1\nrequests = 10\n";
        let big = "x".repeat(300 << 10);
        let e = parse_str(&format!(
            "{load}[target.request]\nextra_body = {{ note = \"{big}\" }}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`target.request.extra_body`: is 300 KiB as JSON; at most 256 KiB"),
            "{e}"
        );
        assert!(
            e.len() < 1000,
            "the value is not printed whole: {} bytes",
            e.len()
        );
        let long = "y".repeat(9 << 10);
        let e = parse_str(&format!(
            "{load}[target.request]\nheaders = {{ x-long = \"{long}\" }}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`target.request.headers.x-long`: is 9 KiB long; at most 8 KiB"),
            "{e}"
        );
        assert!(e.len() < 1000, "{} bytes", e.len());
    }

    /// Issue #19's contradictions and unclear messages: each refused, naming the key and why.
    #[test]
    fn contradictions_and_bad_urls_are_refused_with_the_key() {
        let load = "[load]\nkind = \"open\"\nrate = 1\nrequests = 10\n";
        let cases = [
            (
                format!("[target]\nurl = \"http://[::1\"\n{load}"),
                "`target.url`: `http://[::1` is not a URL: invalid IPv6",
            ),
            (
                format!("[target]\nurl = \"http://127.0.0.1:99999\"\n{load}"),
                "is not a URL: invalid port number",
            ),
            (
                format!("[target]\nurl = \"http://h:8000/v1\"\n{load}"),
                "ends in an API path (`/v1`)",
            ),
            (
                format!("[target]\nurl = \"http://h:8000/?x=1\"\n{load}"),
                "carries a query or fragment",
            ),
            (
                format!("[target]\nurl = \"http://h:1\"\nmax_connect_failures = 0\n{load}"),
                "`target.max_connect_failures`: must be at least 1",
            ),
            (
                format!("[target]\nurl = \"http://h:1\"\n[cold_start]\nlaunch = []\n{load}"),
                "`cold_start.launch`: is empty",
            ),
            (
                format!("[cold_start]\nlaunch = [\"vllm\"]\n{load}"),
                "`cold_start.launch`: needs target.url",
            ),
            (
                "[load]\nkind = \"open\"\narrival = \"poisson\"\nrate = 1\nburstiness = 0.5\nrequests = 10\n"
                    .to_owned(),
                "`load.burstiness`: applies to arrival = \"gamma\" only",
            ),
            (
                format!("[workload]\nstream = false\n[slo]\nttft_ms = 100\n{load}"),
                "`slo.ttft_ms`: needs workload.stream = true",
            ),
            (
                format!("[warmup]\nuntil_stable = {{ window = 0 }}\n{load}"),
                "`warmup.until_stable.window`: must be >= 1",
            ),
        ];
        for (src, want) in cases {
            let e = parse_str(&src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
        // Still accepted: gamma with a burstiness, and a burstiness without an arrival process
        // means gamma (as vLLM's --burstiness does).
        parse_str("[load]\nkind = \"open\"\narrival = \"gamma\"\nrate = 1\nburstiness = 0.5\nrequests = 10\n").unwrap();
        let c = parse_str("[load]\nkind = \"open\"\nrate = 1\nburstiness = 0.5\nrequests = 10\n")
            .unwrap();
        assert_eq!(c.load.arrival, Some(crate::arrival::Arrival::Gamma));
    }

    /// Issue #48: `[measurement.stop]` is refused where it could never stop or never be met.
    #[test]
    fn a_stop_rule_that_can_never_hold_is_refused() {
        let slo = "[slo]\nttft_ms = 100\n";
        for (src, want) in [
            (
                format!("{MIN}{slo}[measurement.stop]\nprecision = 0.1\n"),
                "c.toml:8: `measurement.stop.precision`: can never be met: a p99 has no upper confidence bound at 99% below 459 requests, and load.requests = 10 is the budget",
            ),
            (
                format!("{MIN}{slo}[measurement.stop]\nmin_requests = 10\n"),
                "`measurement.stop`: set `precision` (e.g. 0.1) or `conclusive = true`",
            ),
            (
                format!("{MIN}[measurement.stop]\nconclusive = true\n"),
                "`measurement.stop`: needs [slo] thresholds",
            ),
            (
                format!("{MIN}{slo}[measurement.stop]\nprecision = 1.5\n"),
                "`measurement.stop.precision`: = 1.5: a fraction",
            ),
        ] {
            let e = parse_str(&src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
        let ok = "[load]\nrate = 2\nrequests = 1000\n[slo]\nttft_ms = 100\n[measurement.stop]\nprecision = 0.1\n";
        assert!(parse_str(ok).is_ok());
    }

    #[test]
    fn missing_and_mistyped_fields_are_reported() {
        let e = parse_str("[load]\nmodel = \"open\"\nrequests = 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.toml:1: `load.rate`: missing"), "{e}");
        let e = parse_str("[load]\nmodel = \"open\"\nrate = \"fast\"\nrequests = 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.toml:3"), "{e}");
        let e = parse_str("name = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("c.toml: no `[load]` table"), "{e}");
        // Not blamed on the table the file happens to start with.
        let e = parse_str("[[class]]\nname = \"a\"\nshare = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.toml: no `[load]` table"), "{e}");
        assert!(!e.contains("class"), "{e}");
    }

    #[test]
    fn closed_loop_measures_from_the_actual_send() {
        let c = parse_str("[load]\nmodel = \"closed\"\nconcurrency = 4\nrequests = 8\n").unwrap();
        assert_eq!(c.measurement.latency_origin, LatencyOrigin::Sent);
    }

    #[test]
    fn changing_any_field_changes_exactly_its_axis() {
        let base = parse_str(&format!("{MIN}[slo]\nttft_ms = 500\n")).unwrap();
        let edits: [(&str, &str); 8] = [
            ("[target.simulator]\ndecode_base_ms = 13\n", "target"),
            // Declared facts describe the server; `compare` compares the resolved facts.
            ("[target.declared]\nhardware = \"H100\"\n", "none"),
            ("[workload]\nseed = 9\n", "workload"),
            (
                "[workload]\ninput_tokens = { dist = \"fixed\", value = 512 }\n",
                "workload",
            ),
            ("[workload.sampling]\ntemperature = 0.7\n", "workload"),
            ("[measurement]\nmax_dispatch_lag_ms = 9\n", "measurement"),
            ("[warmup]\nrequests = 3\n", "measurement"),
            ("[repeat]\nruns = 5\n", "none"),
        ];
        let fp = |c: &Contract| {
            c.axes()
                .map(|(n, _)| n)
                .into_iter()
                .zip(c.fingerprints_list())
                .collect::<Vec<_>>()
        };
        for (edit, axis) in edits {
            let c = parse_str(&format!("{MIN}[slo]\nttft_ms = 500\n{edit}")).unwrap();
            let changed: Vec<&str> = fp(&base)
                .iter()
                .zip(fp(&c))
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, _)| a.0)
                .collect();
            let want: Vec<&str> = if axis == "none" { vec![] } else { vec![axis] };
            assert_eq!(changed, want, "{edit}");
        }
        let rate =
            parse_str("[load]\nmodel = \"open\"\nrate = 3\nrequests = 10\n[slo]\nttft_ms = 500\n")
                .unwrap();
        let changed: Vec<&str> = fp(&base)
            .iter()
            .zip(fp(&rate))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect();
        assert_eq!(changed, vec!["load"]);
    }

    #[test]
    fn fingerprints_ignore_spelling_and_track_axes() {
        let a = parse_str(&format!("{MIN}[slo]\nttft_ms = 500\n")).unwrap();
        let b = parse_str(&format!(
            "[slo]\nttft_ms = \"0.5s\"\npercentile = 99\n{MIN}"
        ))
        .unwrap();
        assert_eq!(a.fingerprints(), b.fingerprints());
        let c = parse_str(&format!("{MIN}[slo]\nttft_ms = 400\n")).unwrap();
        let (fa, fc) = (a.fingerprints(), c.fingerprints());
        assert_ne!(fa.slo, fc.slo);
        assert_eq!(
            (fa.target, fa.workload, fa.load, fa.measurement),
            (fc.target, fc.workload, fc.load, fc.measurement)
        );
    }

    /// `[load] model` read like the LLM's name (issue #17): it is `kind` now, defaulted from the
    /// keys given, and the old name is still read with a note naming file and line.
    #[test]
    fn load_kind_is_inferred_and_the_old_key_is_read_with_a_note() {
        let c = parse_str("[load]\nmodel = \"closed\"\nconcurrency = 2\nrequests = 4\n").unwrap();
        assert_eq!(c.load.kind(), LoadModel::Closed);
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
        assert!(
            c.notes[0].starts_with("c.toml:2: `load.model` is now `load.kind`"),
            "{:?}",
            c.notes
        );
        let text = c.to_toml();
        assert!(
            text.contains("kind = \"closed\"") && !text.contains("model = \"closed\""),
            "{text}"
        );
        let c = parse_str("[load]\nconcurrency = 3\nrequests = 4\n").unwrap();
        assert_eq!(c.load.kind(), LoadModel::Closed);
        assert!(c.notes.is_empty());
        let c = parse_str("[load]\nrate = 2\nrequests = 4\n").unwrap();
        assert_eq!(c.load.kind(), LoadModel::Open);
        let e = parse_str("[load]\nkind = \"open\"\nmodel = \"closed\"\nrate = 2\nrequests = 4\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("load.model") && e.contains("contradicts"), "{e}");
    }

    /// The load as the rest reads it: an open loop's schedule, or a closed loop's users, never
    /// a closed loop with "rate 0" nor a trace with a made-up rate.
    #[test]
    fn the_load_resolves_to_one_drive() {
        let open = parse_str("[load]\nrate = 2\nrequests = 4\n").unwrap();
        assert_eq!(
            open.load.drive(),
            Drive::Open {
                arrival: Arrival::Poisson,
                rate: Some(2.0),
                burstiness: 1.0,
                max_in_flight: DEFAULT_IN_FLIGHT
            }
        );
        let closed = parse_str("[load]\nconcurrency = 3\nrequests = 4\n").unwrap();
        assert_eq!(
            closed.load.drive(),
            Drive::Closed {
                users: 3,
                think: Seconds::default()
            }
        );
        assert_eq!(closed.load.rate(), None);
    }

    #[test]
    fn shards_are_checked_with_their_key() {
        let ok = parse_str(
            "[load]\nrate = 2\nrequests = 4\nshard = \"2/3\"\nstart_at = \"2026-12-02T06:00:00Z\"\n",
        )
        .unwrap();
        assert_eq!(ok.load.shard(), Some(Shard { index: 2, count: 3 }));
        // Parsed once, kept as written: the resolved contract writes the author's spelling back
        // (its fingerprint is the text's), and the instant is one instant however it is spelt.
        let spelt = parse_str(
            "[load]\nrate = 2\nrequests = 4\nshard = \"2/3\"\nstart_at = \"2026-12-02T07:00:00+01:00\"\n",
        )
        .unwrap();
        assert!(
            spelt
                .to_toml()
                .contains("start_at = \"2026-12-02T07:00:00+01:00\""),
            "{}",
            spelt.to_toml()
        );
        assert_eq!(spelt.load.start_at(), ok.load.start_at());
        assert_eq!(parse_str(&spelt.to_toml()).unwrap().load, spelt.load);
        for (text, key, says) in [
            (
                "shard = \"3/3\"\nstart_at = \"2026-12-02T06:00:00Z\"",
                "c.toml:4",
                "below N",
            ),
            (
                "shard = \"1-3\"\nstart_at = \"2026-12-02T06:00:00Z\"",
                "c.toml:4",
                "I/N",
            ),
            (
                "shard = \"0/0\"\nstart_at = \"2026-12-02T06:00:00Z\"",
                "c.toml:4",
                "N must be 1",
            ),
            ("shard = \"0/2\"", "load.start_at", "missing"),
            (
                "shard = \"0/2\"\nstart_at = \"tomorrow\"",
                "c.toml:5",
                "RFC 3339",
            ),
            (
                "start_at = \"2026-12-02T06:00:00Z\"",
                "c.toml:4",
                "sharded run only",
            ),
        ] {
            let e = parse_str(&format!("[load]\nrate = 2\nrequests = 4\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains(says), "{text}: {e}");
        }
        let e = parse_str("[load]\nconcurrency = 2\nrequests = 4\nshard = \"0/2\"\nstart_at = \"2026-12-02T06:00:00Z\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("load.shard") && e.contains("open loop only"),
            "{e}"
        );
        let e = parse_str("[load]\nrate = 2\nrequests = 4\nshard = \"0/2\"\nstart_at = \"2026-12-02T06:00:00Z\"\n[warmup.until_stable]\nwindow = 20\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("warmup.until_stable") && e.contains("cannot be sharded"),
            "{e}"
        );
        // Every arrival in exactly one shard, and the shares add up.
        for n in 1..6u32 {
            for (from, len) in [(0, 0), (0, 17), (5, 23), (3, 1)] {
                let shares: u64 = (0..n)
                    .map(|i| Shard { index: i, count: n }.share(from, len))
                    .sum();
                assert_eq!(shares, len);
                for i in 0..n {
                    let s = Shard { index: i, count: n };
                    assert_eq!(
                        s.share(from, len),
                        (from..from + len).filter(|&k| s.owns(k)).count() as u64
                    );
                }
            }
        }
    }

    #[test]
    fn replicas_are_checked_and_the_first_is_the_url() {
        let c = parse_str(
            "[target]\nurls = [\"http://a:1\", \"http://b:2\"]\n[load]\nrate = 2\nrequests = 4\n",
        )
        .unwrap();
        assert_eq!(c.target.url.as_deref(), Some("http://a:1"));
        assert_eq!(c.target.spread, Some(Spread::RoundRobin));
        // The resolved contract (url written beside urls) reads back the same.
        assert_eq!(parse_str(&c.to_toml()).unwrap().target, c.target);
        for (text, key, says) in [
            (
                "url = \"http://c:3\"\nurls = [\"http://a:1\", \"http://b:2\"]",
                "target.url",
                "both set",
            ),
            (
                "urls = [\"http://a:1\", \"http://a:1\"]",
                "target.urls",
                "twice",
            ),
            ("urls = [\"a:1\"]", "target.urls", "http://"),
            ("urls = [\"http://a:1/v1\"]", "target.urls", "API path"),
            (
                "url = \"http://a:1\"\nspread = \"session\"",
                "target.spread",
                "target.urls only",
            ),
        ] {
            let e = parse_str(&format!(
                "[target]\n{text}\n[load]\nrate = 2\nrequests = 4\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(key) && e.contains(says), "{text}: {e}");
        }
        assert_eq!(Spread::Session.pick(7, Some(4), 3), 1);
        assert_eq!(Spread::RoundRobin.pick(7, Some(4), 3), 1);
        assert_eq!(Spread::RoundRobin.pick(8, Some(4), 3), 2);
    }

    /// Issue #46: `until_stable` beside another warm-up rule (even `requests = 0`) would
    /// silently win; it is refused, naming the key.
    #[test]
    fn until_stable_beside_another_warmup_rule_is_refused() {
        let load = "[load]\nrate = 2\nrequests = 4\n";
        for (other, key) in [
            ("requests = 0", "warmup.requests"),
            ("duration = \"5s\"", "warmup.duration"),
        ] {
            let e = parse_str(&format!(
                "{load}[warmup]\n{other}\n[warmup.until_stable]\nwindow = 10\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(key) && e.contains("set one warm-up rule"), "{e}");
        }
        assert!(parse_str(&format!("{load}[warmup.until_stable]\nwindow = 10\n")).is_ok());
        // The old key name is not in messages about the load's kind.
        let e = parse_str("[load]\nkind = \"closed\"\nconcurrency = 2\nrequests = 4\nrate = 3\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("load.kind = \"open\"") && !e.contains("model ="),
            "{e}"
        );
    }
}
