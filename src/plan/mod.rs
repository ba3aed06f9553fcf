//! The plan: the deterministic list of requests a contract produces from its seed.
//!
//! Request `i`'s content (prompt, lengths) comes from its own ChaCha8 stream, so any request can
//! be generated alone (shards: request `i` belongs to shard `i mod N`) and closed-loop runs of
//! unbounded length need no list. Open-loop arrival times come from one further stream, in
//! order. ChaCha8 is named explicitly: `StdRng`'s algorithm may change between rand releases.
//! This module does no I/O and knows nothing of the target.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Normal};
use serde::Serialize;

use std::sync::Arc;

use crate::arrival::edge::Steered;
use crate::arrival::program::Leg;
use crate::contract::{Arrival, Contract, LengthDist, PrefixCache, PromptSource, Workload};
use crate::workload::{Inputs, Message};

/// Which part of a run a request belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    ColdStart,
    Warmup,
    Steady,
    Drain,
    /// Quality probes, sent one at a time after the load: the first steady prompts without
    /// the run's lead, the same in every run, so outputs compare request by request.
    Quality,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ColdStart => "cold_start",
            Phase::Warmup => "warmup",
            Phase::Steady => "steady",
            Phase::Drain => "drain",
            Phase::Quality => "quality",
        }
    }
}

/// One planned request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedRequest {
    pub index: u64,
    /// Phase, as labelled at send time (the listing labels it by the contract's rules).
    pub phase: Phase,
    /// Intended send time, microseconds after the run starts (open loop only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intended_us: Option<u64>,
    /// Prompt length in the workload tokenizer's tokens, counted on the prompt as built.
    pub input_tokens: u32,
    /// Planned output length (`max_tokens`).
    pub output_tokens: u32,
    /// The prompt's text (for `messages`, their contents joined by newlines).
    pub prompt: String,
    /// A dataset entry's chat messages, sent as they are (with the request's tag in the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<Message>>,
    /// Prompt tokens this request shares with an earlier one by a trace's prefix structure
    /// (Mooncake `hash_ids`): what a prefix cache should serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_tokens: Option<u32>,
    /// Its traffic class (`[[class]]`), when the contract has classes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The model (or adapter) name its class sends instead of the target's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The load program's stage it is scheduled in (`[[load.stage]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// An edge search's step: the rate the search chose for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_rps: Option<f64>,
    /// The images its user message carries (`[workload.images]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<PlannedImage>,
    /// The tools it offers and the calls its answer must make (a tool dataset's entry).
    #[serde(skip)]
    pub tools: Option<std::sync::Arc<crate::quality::tools::ToolCase>>,
}

/// One image of a request: its size and where its pixels come from; once its body is built,
/// what was sent (bytes, hash), never the pixels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PlannedImage {
    pub width: u32,
    pub height: u32,
    /// The folder's file it is (its place in name order); absent: generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<u32>,
    /// A generated image's pixel seed: two images have the same pixels exactly when it is
    /// equal (drawn from the seed, the run's cache nonce, and the request and position, or
    /// the pool's member).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub pixels: u64,
    /// Bytes of the encoded image as sent (before base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The first 16 hex digits of the encoded image's SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why it could not be made (a folder's file gone mid-run): the request is not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl PlannedRequest {
    /// A steady request of `prompt`, not yet scheduled, of no class or model of its own.
    fn steady(index: u64, input_tokens: u32, output_tokens: u32, prompt: String) -> Self {
        PlannedRequest {
            index,
            phase: Phase::Steady,
            intended_us: None,
            input_tokens,
            output_tokens,
            prompt,
            messages: None,
            shared_tokens: None,
            class: None,
            model: None,
            stage: None,
            stage_rps: None,
            images: Vec::new(),
            tools: None,
        }
    }
}

/// The intended send times of an open-loop run, µs from its start, in order and without end
/// (a trace's end ends it): warm-up, steady and drain arrivals are one process, so the load
/// never changes shape at a phase boundary.
#[derive(Debug)]
pub struct ArrivalGen {
    rng: ChaCha8Rng,
    source: Source,
}

impl Iterator for ArrivalGen {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        self.next_scheduled().map(|s| s.at_us)
    }
}

/// One arrival of the schedule: its intended send time and, in a load program, the index of
/// the stage it falls in (`None` past the program's end: the drain).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scheduled {
    pub at_us: u64,
    pub stage: Option<u32>,
    /// An edge search's arrival: the rate its step offers.
    pub rps: Option<f64>,
}

impl ArrivalGen {
    /// The next arrival with its stage (a load program's; `None` otherwise).
    pub fn next_scheduled(&mut self) -> Option<Scheduled> {
        match &mut self.source {
            Source::Process(p) => p.next_us(&mut self.rng).map(|at_us| Scheduled {
                at_us,
                stage: None,
                rps: None,
            }),
            Source::Program(p) => {
                p.next(&mut self.rng)
                    .map(|(at_us, stage, rps)| Scheduled { at_us, stage, rps })
            }
        }
    }

    /// Whether its arrivals are a load program's (labelled with stages).
    pub fn is_program(&self) -> bool {
        matches!(self.source, Source::Program(_))
    }
}

/// What draws a run's arrival times: one process, or a load program's stages.
#[derive(Debug)]
enum Source {
    Process(Box<dyn crate::arrival::Process>),
    Program(crate::arrival::program::Program),
}

/// A contract's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    seed: u64,
    input: LengthDist,
    output: LengthDist,
    /// Open-loop arrival process and what it is drawn from; `None` for closed loop.
    open: Option<(Arrival, crate::arrival::Params)>,
    /// A load program's stages (`[[load.stage]]`) as the arrival stream runs them, and their
    /// names; empty without one.
    program: std::sync::Arc<Vec<crate::arrival::program::Leg>>,
    stage_names: std::sync::Arc<Vec<String>>,
    /// An edge search after them (`shape = "edge"`), and what its schedule and its judge
    /// share.
    edge: Option<Steered>,
    /// The phase rules, for listing the plan.
    phases: PhaseRules,
    /// Tokenizer, dataset, trace, references (`[quality] mode = "reference"`: request `i` asks
    /// reference `i mod n`'s prompt) and the `empirical` lengths.
    sources: Inputs,
    /// Dataset prompts: request `i` takes entry `order[i mod n]` (a seeded shuffle).
    order: std::sync::Arc<Vec<u32>>,
    /// Shared prefixes (`prefix_cache = "shared"` or `"warm"`), built once.
    prefixes: std::sync::Arc<Vec<String>>,
    /// Whether the prefixes are sent once before the load (`"warm"`).
    warm: bool,
    /// The run's lead (from `workload.cache_nonce`): the first words of every prompt, empty
    /// without a nonce.
    lead: String,
    /// Quality probes sent after the load (`[quality] probes` in `consistency` mode).
    probes: u64,
    /// `[workload.images]`, and the salt its pixels are drawn with (the seed and the run's
    /// cache nonce).
    images: Option<(Arc<crate::contract::images::Images>, u64)>,
    /// Cold-start requests sent once the server is ready (`[cold_start] requests`).
    cold_start: u64,
    /// Inputs per request (`workload.batch`).
    batch: u32,
    /// A Mooncake trace's block size, and each row's blocks shared with an earlier row.
    blocks: Option<(u32, std::sync::Arc<Vec<u32>>)>,
    /// `[workload.sessions]`, and the system prompt every session starts with (empty: none).
    sessions: Option<(crate::contract::Sessions, (String, u32))>,
    /// `[workload.task]`'s graphs (empty: no tasks).
    tasks: std::sync::Arc<Vec<crate::contract::task::Graph>>,
    /// The API generates output tokens (embeddings do not).
    generates: bool,
    /// `load.shard`: the arrivals this client sends (all: `None`).
    shard: Option<crate::contract::Shard>,
    /// The traffic classes (`[[class]]`; empty: one implicit class).
    classes: std::sync::Arc<Vec<PlanClass>>,
    /// `[target.request] extra_body`, which a class's own fields extend.
    extra_body: std::sync::Arc<serde_json::Map<String, serde_json::Value>>,
}

/// A traffic class as the plan draws from it.
#[derive(Debug, Clone)]
pub struct PlanClass {
    pub class: crate::contract::classes::Class,
    input: LengthDist,
    output: LengthDist,
    /// The body fields its requests carry: `[target.request] extra_body`, then the class's
    /// own, then its `priority`.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `[class.models]`' names and each one's probability, worked out once (empty: none).
    models: Vec<(String, f64)>,
}

/// The shared prefixes' texts, one per `workload.prefixes`, each drawn from its own stream.
fn shared_prefixes(
    w: &crate::contract::Workload,
    tokenizer: &crate::workload::Tokenizer,
) -> Vec<String> {
    let seed = w.seed;
    match shared_prefix_tokens(w) {
        0 => Vec::new(),
        n => (0..u64::from(w.prefixes.unwrap_or(1)))
            .map(|k| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(PREFIX_STREAM - k);
                let tag = tokenizer.tag('p', k, seed);
                tokenizer.build(&tag, n, &mut rng).0
            })
            .collect(),
    }
}

impl PlanClass {
    /// A class as the plan draws it: its lengths (or the workload's), its request body over
    /// the target's, and its models with their probabilities.
    fn of(c: &Contract, k: &crate::contract::classes::Class) -> PlanClass {
        let w = &c.workload;
        let mut extra_body = c.target.request.extra_body.clone();
        for (key, v) in &k.request.extra_body {
            extra_body.insert(key.clone(), v.clone());
        }
        if let Some(p) = k.priority {
            extra_body.insert("priority".into(), p.into());
        }
        PlanClass {
            class: k.clone(),
            input: k
                .workload
                .input_tokens
                .clone()
                .unwrap_or_else(|| asked_lengths(w, true)),
            output: k
                .workload
                .output_tokens
                .clone()
                .unwrap_or_else(|| asked_lengths(w, false)),
            extra_body,
            models: k
                .models
                .as_ref()
                .map(|mix| mix.names.iter().cloned().zip(mix.probabilities()).collect())
                .unwrap_or_default(),
        }
    }
}

impl PlanClass {
    /// The model name model draw `u` in [0, 1) sends: the class's `model`, one of its
    /// `models`, or `None` (the target's).
    fn model(&self, u: f64) -> Option<&str> {
        if let Some(m) = &self.class.model {
            return Some(m);
        }
        let k = crate::contract::classes::pick_index(self.models.iter().map(|m| m.1), u);
        self.models.get(k).map(|m| m.0.as_str())
    }
}

/// Which class request `i` belongs to is a draw of its own (not from the request's stream), so
/// adding classes changes no other draw.
const CLASS_SALT: u64 = 0x0c1a_55e5_u64;
/// A class's model name for request `i` is drawn from this.
const MODEL_SALT: u64 = 0x0030_de15_u64;
/// Request `i`'s images are drawn from a generator seeded by this, the seed and the nonce.
const IMAGE_SALT: u64 = 0x1a6e_5a17_u64;

/// The run's lead for `workload.cache_nonce`: what every prompt of the run starts with, in the
/// workload tokenizer's words (empty without a nonce). Every prompt of one run shares it; a
/// prompt of another run (another nonce) diverges inside it, so a prefix cache an earlier run
/// filled can serve at most this lead.
pub fn run_lead(c: &Contract, inputs: &Inputs) -> String {
    match &c.workload.cache_nonce {
        Some(n) => inputs.tokenizer.run_lead(n),
        None => String::new(),
    }
}

/// First plan index of sessions' follow-up turns: turn `t` (0-based, `t >= 1`) of session `i`
/// is plan index `TURN_INDEX + i * MAX_TURNS + t`; turn 0 is the arrival's own index `i`.
pub const TURN_INDEX: u64 = 1 << 44;

/// The plan index of turn `t` of session `i`.
pub fn turn_index(i: u64, t: u32) -> u64 {
    if t == 0 {
        i
    } else {
        TURN_INDEX + i * u64::from(crate::contract::MAX_TURNS) + u64::from(t)
    }
}

/// A session's shape, drawn from the seed: its turns and the think time before each follow-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionPlan {
    pub turns: u32,
    /// Milliseconds between the answer to turn `t` and the send of turn `t + 1`.
    pub think_ms: Vec<u32>,
}

/// A task's drawn shape (`[workload.task]`): which graph it runs, and per node (by position
/// in the graph) the think time before it and, for a tool, its latency and result tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskPlan {
    pub graph: usize,
    pub think_ms: Vec<u32>,
    pub tool_ms: Vec<u32>,
    pub result_tokens: Vec<u32>,
}

/// First plan index of the quality probes. Probe `k` asks steady request `k`'s prompt without
/// the run's lead, twice in a row: index `PROBE_INDEX + 2k` primes the server's prefix cache,
/// `PROBE_INDEX + 2k + 1` is the answer compared across runs. So every run's answers come from
/// the same cache state (an engine's cached path need not give bit-identical logits to a full
/// prefill: llama.cpp's first token differed for 2 of 6 probes served from another run's cache).
pub const PROBE_INDEX: u64 = 1 << 42;

/// Output tokens a quality probe asks for at most: enough to show divergence, cheap to send.
pub const PROBE_MAX_TOKENS: u32 = 32;

/// Whether a plan index is a quality probe's compared answer (not its cache primer).
pub fn probe_answer(index: u64) -> bool {
    index >= PROBE_INDEX && (index - PROBE_INDEX) % 2 == 1
}

/// First plan index of the requests that send each shared prefix once (`prefix_cache = "warm"`).
pub const PRIME_INDEX: u64 = 1 << 41;

/// When warm-up ends and when the measured phase ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseRules {
    pub warmup: WarmupRule,
    pub stop: StopRule,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WarmupRule {
    /// The first `n` requests.
    Requests(u64),
    /// Requests sent (or scheduled) before this time, µs.
    Duration(u64),
    /// Until the rolling median TTFT settles, at most `max` requests.
    UntilStable { max: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopRule {
    /// After `n` steady requests.
    Requests(u64),
    /// After this long from the first steady request, µs.
    Duration(u64),
    /// At the end of the load program (the first arrival past its last stage).
    Program,
}

impl PhaseRules {
    pub fn of(c: &Contract) -> PhaseRules {
        let warmup = match (&c.warmup.until_stable, c.warmup.duration) {
            (Some(u), _) => WarmupRule::UntilStable {
                max: u.max_requests,
            },
            (None, Some(d)) => WarmupRule::Duration((d.0 * 1e6) as u64),
            (None, None) => WarmupRule::Requests(c.warmup.requests),
        };
        let stop = match (c.load.requests, c.load.duration) {
            (Some(n), _) => StopRule::Requests(n),
            (None, Some(d)) => StopRule::Duration((d.0 * 1e6) as u64),
            (None, None) if !c.load.stage.is_empty() => StopRule::Program,
            (None, None) => StopRule::Requests(0),
        };
        PhaseRules { warmup, stop }
    }
}

/// Labels requests with phases as they are sent: warm-up until its rule is met, then steady
/// until the stop rule, then drain (load kept on while the last steady requests finish).
#[derive(Debug, Clone)]
pub struct Phaser {
    rules: PhaseRules,
    phase: Phase,
    warm: u64,
    steady: u64,
    steady_start_us: Option<u64>,
    /// The load program has ended (`StopRule::Program`).
    program_over: bool,
    /// The measured phase was ended early (`[measurement.stop]`: its answer is known).
    ended: bool,
    /// Why warm-up ended: `requests`, `duration`, `stable`, `max_requests`, or `none`.
    pub warmup_end: Option<&'static str>,
}

impl Phaser {
    pub fn new(rules: PhaseRules) -> Phaser {
        Phaser {
            rules,
            phase: Phase::Warmup,
            warm: 0,
            steady: 0,
            steady_start_us: None,
            program_over: false,
            ended: false,
            warmup_end: None,
        }
    }

    /// The phase of the next arrival of the schedule: as [`Phaser::next`], with a load
    /// program's end (its first arrival past the last stage) ending the measured phase.
    pub fn next_scheduled(&mut self, s: Scheduled, stable: bool) -> Phase {
        if s.stage.is_none() && self.rules.stop == StopRule::Program {
            self.program_over = true;
        }
        self.next(s.at_us, stable)
    }

    /// The last steady request has been labelled (a count-bound steady phase); with a
    /// duration, only the next request's label tells.
    pub fn steady_done(&self) -> bool {
        self.phase == Phase::Steady
            && matches!(self.rules.stop, StopRule::Requests(n) if self.steady >= n)
    }

    /// The phase of the next request, sent (or scheduled) at `t_us`; `stable` says whether the
    /// warm-up statistic has settled.
    pub fn next(&mut self, t_us: u64, stable: bool) -> Phase {
        if self.phase == Phase::Warmup {
            let end = match self.rules.warmup {
                WarmupRule::Requests(n) => {
                    (self.warm >= n).then_some(if n == 0 { "none" } else { "requests" })
                }
                WarmupRule::Duration(d) => {
                    (t_us >= d).then_some(if d == 0 { "none" } else { "duration" })
                }
                WarmupRule::UntilStable { max } => {
                    if stable {
                        Some("stable")
                    } else if self.warm >= max {
                        Some("max_requests")
                    } else {
                        None
                    }
                }
            };
            match end {
                Some(why) => {
                    self.warmup_end = Some(why);
                    self.phase = Phase::Steady;
                    self.steady_start_us = Some(t_us);
                }
                None => {
                    self.warm += 1;
                    return Phase::Warmup;
                }
            }
        }
        if self.phase == Phase::Steady {
            let start = self.steady_start_us.unwrap_or(t_us);
            let done = self.ended
                || match self.rules.stop {
                    StopRule::Requests(n) => self.steady >= n,
                    StopRule::Duration(d) => t_us >= start + d,
                    StopRule::Program => self.program_over,
                };
            if done {
                self.phase = Phase::Drain;
            } else {
                self.steady += 1;
                return Phase::Steady;
            }
        }
        Phase::Drain
    }

    /// Ends the measured phase at the next request (its answer is known): it and those after
    /// it are drain.
    pub fn end_steady(&mut self) {
        self.ended = true;
    }

    /// Whether the measured phase is over (only drain requests remain to send).
    pub fn draining(&self) -> bool {
        self.phase == Phase::Drain
    }
}

const ARRIVAL_STREAM: u64 = u64::MAX;
const ORDER_STREAM: u64 = u64::MAX - 1;
const REQUESTED_STREAM: u64 = u64::MAX - 1 - (1 << 32);
/// A trace block's text is drawn from this stream of a generator seeded by its hash id.
const BLOCK_STREAM: u64 = 1 << 55;
/// Session `i`'s turns and think times are drawn from stream `SESSION_STREAM + i`.
const SESSION_STREAM: u64 = 1 << 50;
/// Task `i`'s think times, tool latencies and results are drawn from stream `TASK_STREAM + i`.
const TASK_STREAM: u64 = 1 << 51;
/// The sessions' shared system prompt is built from this stream.
const SYSTEM_STREAM: u64 = 1 << 60;
/// Prefix `k` is built from stream `PREFIX_STREAM - k`.
const PREFIX_STREAM: u64 = u64::MAX - 2;

/// The input (`input`) or output length distribution the workload asks for, defaults filled in.
fn asked_lengths(w: &Workload, input: bool) -> LengthDist {
    let (d, default) = if input {
        (&w.input_tokens, 256)
    } else {
        (&w.output_tokens, 128)
    };
    d.clone().unwrap_or(LengthDist::Fixed { value: default })
}

/// Tokens of shared prefix in front of every prompt (0 without one; the contract refuses a
/// shared or warm cache without at least one prefix of at least one token).
fn shared_prefix_tokens(w: &Workload) -> u32 {
    match (w.prefix_cache, w.shared_prefix_tokens) {
        (PrefixCache::Shared | PrefixCache::Warm, Some(n)) => n,
        _ => 0,
    }
}

/// `lead` then `tag`, or `tag` alone without a lead.
fn lead_with(lead: &str, tag: &str) -> String {
    if lead.is_empty() {
        tag.to_owned()
    } else {
        format!("{lead} {tag}")
    }
}

/// The distribution the contract asks for, as lengths: a trace's, a dataset's or a lengths
/// file's own values, or 4,096 seeded draws from a parametric distribution. `None` when the
/// source file was not read (a bundle recomputed without it). Builds no prompt, so reports can
/// call it without planning the run.
pub fn requested_lengths(c: &Contract, s: &Inputs, input: bool) -> Option<Vec<u32>> {
    let w = &c.workload;
    // A task's calls ask for their own nodes' lengths, on top of the conversation they carry.
    if (!input && !c.target.api.capabilities().generates) || w.task.is_some() {
        return None;
    }
    let batch = if input { w.batch.max(1) } else { 1 };
    let v: Vec<u32> = match asked_lengths(w, input) {
        LengthDist::Trace => s
            .trace
            .iter()
            .map(|r| {
                if input {
                    r.input_tokens
                } else {
                    r.output_tokens
                }
            })
            .collect(),
        // A dataset prompt goes behind the shared prefix, if any: the request asks for both.
        LengthDist::Dataset => {
            let behind = if input { shared_prefix_tokens(w) } else { 0 };
            // A session sends its conversation's first user message first.
            let first = |p: &crate::workload::Prompt| match (&w.sessions, p.turns.first()) {
                (Some(_), Some(t)) if input => Some(t.input_tokens),
                (Some(_), Some(t)) => t.output_tokens,
                _ => p.length(input),
            };
            s.prompts
                .iter()
                .filter_map(|p| first(p).map(|n| n + behind))
                .collect()
        }
        LengthDist::Empirical { .. } => s.lengths(input).to_vec(),
        // Classes: their mixture, each draw's class by its share.
        d if !c.classes.is_empty() => {
            let mut rng = ChaCha8Rng::seed_from_u64(w.seed);
            rng.set_stream(REQUESTED_STREAM);
            let shares: Vec<f64> = c.classes.iter().map(|k| k.share.unwrap_or(0.0)).collect();
            let dists: Vec<LengthDist> = c
                .classes
                .iter()
                .map(|k| {
                    let own = if input {
                        &k.workload.input_tokens
                    } else {
                        &k.workload.output_tokens
                    };
                    own.clone().unwrap_or_else(|| d.clone())
                })
                .collect();
            (0..4096)
                .map(|_| {
                    let u = crate::text::unit_interval(rand::Rng::next_u64(&mut rng));
                    let k = crate::contract::classes::pick_index(shares.iter().copied(), u);
                    sample_len(&dists[k], s.lengths(input), &mut rng)
                })
                .collect()
        }
        d => {
            let mut rng = ChaCha8Rng::seed_from_u64(w.seed);
            rng.set_stream(REQUESTED_STREAM);
            (0..4096).map(|_| sample_len(&d, &[], &mut rng)).collect()
        }
    };
    // A session's first turn sends the shared system prompt before its own.
    let system = match (&w.sessions, input) {
        (Some(s), true) => s.system_prompt_tokens,
        _ => 0,
    };
    let v: Vec<u32> = v
        .into_iter()
        .map(|n| n.saturating_mul(batch) + system)
        .collect();
    (!v.is_empty()).then_some(v)
}

/// An open loop's arrival process and its parameters; `None` for a closed loop.
fn open_arrivals(
    c: &Contract,
    trace_us: Vec<u64>,
) -> Option<(crate::arrival::Arrival, crate::arrival::Params)> {
    match c.load.drive() {
        crate::contract::Drive::Open {
            arrival,
            rate,
            burstiness,
            ..
        } => {
            let params = crate::arrival::Params {
                // A trace's timestamps or a program's stages set the rate.
                rate: rate.unwrap_or(0.0),
                shape: burstiness,
                trace_us: std::sync::Arc::new(trace_us),
                pinned: (c.load.pin_total == Some(true))
                    .then(|| c.load.requests.map(|n| n + c.warmup.requests))
                    .flatten(),
            };
            Some((arrival, params))
        }
        crate::contract::Drive::Closed { .. } => None,
    }
}

impl Plan {
    pub fn new(c: &Contract, inputs: &Inputs) -> Plan {
        let w = &c.workload;
        let sources = inputs.clone();
        let seed = w.seed;
        let mut order: Vec<u32> = Vec::new();
        if w.prompt_source == PromptSource::Dataset {
            order = (0..sources.prompts.len() as u32).collect();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(ORDER_STREAM);
            rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
        }
        let lead = run_lead(c, inputs);
        let prefixes = shared_prefixes(w, &sources.tokenizer);
        let speedup = c.load.speedup.unwrap_or(1.0);
        let trace_us = sources
            .trace
            .iter()
            .map(|r| (r.offset_s / speedup * 1e6).round() as u64)
            .collect();
        let open = open_arrivals(c, trace_us);
        let blocks = sources
            .trace
            .iter()
            .any(|r| !r.hash_ids.is_empty())
            .then(|| {
                let b = c.load.block_tokens();
                let shared = crate::workload::trace::shared_blocks(&sources.trace);
                (b, std::sync::Arc::new(shared))
            });
        let sessions = w
            .sessions
            .as_ref()
            .map(|ss| (ss.clone(), system_prompt(ss, &sources, &lead, seed)));
        let (program, stage_names, edge) = program(c);
        Plan {
            seed,
            input: asked_lengths(w, true),
            output: asked_lengths(w, false),
            open,
            program,
            stage_names,
            edge,
            phases: PhaseRules::of(c),
            sources,
            order: std::sync::Arc::new(order),
            prefixes: std::sync::Arc::new(prefixes),
            warm: w.prefix_cache == PrefixCache::Warm,
            lead,
            cold_start: c.cold_start.as_ref().map_or(0, |cs| u64::from(cs.requests)),
            batch: w.batch.max(1),
            blocks,
            sessions,
            tasks: std::sync::Arc::new(if w.task.is_some() {
                inputs.tasks.clone()
            } else {
                Vec::new()
            }),
            generates: c.target.api.capabilities().generates,
            shard: c.load.shard(),
            classes: std::sync::Arc::new(c.classes.iter().map(|k| PlanClass::of(c, k)).collect()),
            extra_body: std::sync::Arc::new(c.target.request.extra_body.clone()),
            images: w.images.as_ref().map(|i| {
                let nonce = crate::text::hash_str(w.cache_nonce.as_deref().unwrap_or(""));
                (
                    Arc::new(i.clone()),
                    crate::text::mix2(seed ^ IMAGE_SALT, nonce),
                )
            }),
            probes: if c.quality.mode == crate::contract::QualityMode::Consistency {
                u64::from(c.quality.probes)
            } else {
                0
            },
        }
    }

    /// The traffic classes, in the contract's order (empty: none).
    pub fn classes(&self) -> &[PlanClass] {
        &self.classes
    }

    /// The class request `index` belongs to, by its own draw against the shares (`None`
    /// without classes).
    pub fn class_of(&self, index: u64) -> Option<usize> {
        if self.classes.is_empty() {
            return None;
        }
        let u = crate::text::unit_interval(crate::text::mix2(self.seed ^ CLASS_SALT, index));
        let shares = self.classes.iter().map(|k| k.class.share.unwrap_or(0.0));
        Some(crate::contract::classes::pick_index(shares, u))
    }

    /// The body fields planned request `p` carries beyond its adapter's: its class's, or
    /// `[target.request] extra_body`.
    pub fn extra_body(&self, p: &PlannedRequest) -> &serde_json::Map<String, serde_json::Value> {
        p.class
            .as_deref()
            .and_then(|n| self.classes.iter().find(|k| k.class.name == n))
            .map_or(&self.extra_body, |k| &k.extra_body)
    }

    /// How many requests send the shared prefixes before the load (`prefix_cache = "warm"`);
    /// they are plan indices `PRIME_INDEX..PRIME_INDEX + n`.
    pub fn priming(&self) -> u64 {
        if self.warm && self.primary() {
            self.prefixes.len() as u64
        } else {
            0
        }
    }

    /// What the plan is built from besides the contract.
    pub fn inputs(&self) -> &Inputs {
        &self.sources
    }

    /// Whether prompt lengths are the target's own tokens (a tokenizer file), rather than the
    /// simulator's words.
    pub fn exact_tokens(&self) -> bool {
        self.sources.tokenizer.counts_model_tokens()
    }

    /// The open-loop arrival times, from the start, without end. An edge search's are steered
    /// by the verdicts posted to [`Plan::edge`]'s control: the run's schedule only.
    pub fn arrivals(&self) -> Option<ArrivalGen> {
        self.arrivals_with(self.edge.as_ref().map(|(_, c)| c.clone()))
    }

    fn arrivals_with(
        &self,
        control: Option<std::sync::Arc<crate::arrival::edge::EdgeControl>>,
    ) -> Option<ArrivalGen> {
        self.open.as_ref().map(|(arrival, params)| {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(ARRIVAL_STREAM);
            let edge = self.edge.as_ref().map(|(s, _)| s.clone()).zip(control);
            let source = if self.program.is_empty() && edge.is_none() {
                Source::Process(arrival.process(params))
            } else {
                let legs = self.program.to_vec();
                Source::Program(crate::arrival::program::Program::new(legs, edge, &mut rng))
            };
            ArrivalGen { rng, source }
        })
    }

    /// The edge search's control, which the collector's judge posts verdicts to.
    pub fn edge(&self) -> Option<&std::sync::Arc<crate::arrival::edge::EdgeControl>> {
        self.edge.as_ref().map(|(_, c)| c)
    }

    /// Stage `k`'s name (a load program's; an edge's steps are named as they run).
    pub fn stage_name(&self, k: u32) -> Option<String> {
        self.stage_names
            .get(k as usize)
            .cloned()
            .or_else(|| self.edge.as_ref().and_then(|(s, _)| s.name_of(k)))
    }

    pub fn rules(&self) -> PhaseRules {
        self.phases
    }

    /// The shard this plan sends, if it is cut into shards.
    pub fn shard(&self) -> Option<crate::contract::Shard> {
        self.shard
    }

    /// Whether arrival `i` (a request, or a session's first turn) is sent by this client: every
    /// one without shards, else those of its shard.
    pub fn owns(&self, i: u64) -> bool {
        self.shard.is_none_or(|s| s.owns(i))
    }

    /// How many of the arrivals `from..from + n` this client sends.
    fn own(&self, from: u64, n: u64) -> u64 {
        self.shard.map_or(n, |s| s.share(from, n))
    }

    /// Whether this client sends what a run sends once, before and after its load (the warm
    /// prefixes, the quality probes): unsharded, or shard 0.
    pub fn primary(&self) -> bool {
        self.shard.is_none_or(|s| s.index == 0)
    }

    /// Requests in warm-up plus the measured phase when both are bounded by count (the most
    /// warm-up may take for `until_stable`), this client's share of them; `None` when a
    /// duration bounds them.
    pub fn len(&self) -> Option<u64> {
        let warm = match self.phases.warmup {
            WarmupRule::Requests(n) | WarmupRule::UntilStable { max: n } => n,
            WarmupRule::Duration(_) => return None,
        };
        match self.phases.stop {
            StopRule::Requests(n) => Some(self.own(0, warm + n)),
            StopRule::Duration(_) => None,
            // An edge search runs as long as it takes.
            StopRule::Program if self.edge.is_some() => None,
            // Warm-up is the program's first arrivals.
            StopRule::Program => self
                .program
                .iter()
                .map(|l| match l.end {
                    crate::arrival::program::LegEnd::Requests(n) => Some(n),
                    crate::arrival::program::LegEnd::Seconds(_) => None,
                })
                .sum::<Option<u64>>()
                .map(|n| self.own(0, n)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Requests planned per phase, where a count (not a duration or a warm-up rule that
    /// decides as it goes) fixes them: the run's accounting is `planned = ok + failed + not
    /// sent`. Warm-up counts the prefix-priming requests too.
    pub fn planned_by_phase(&self) -> std::collections::BTreeMap<Phase, u64> {
        let mut out = std::collections::BTreeMap::new();
        if self.cold_start > 0 {
            out.insert(Phase::ColdStart, self.cold_start);
        }
        // With sessions, a phase's arrivals are sessions and its requests their turns; a shard
        // counts its own arrivals.
        let turns = |from: u64, n: u64| -> u64 {
            if self.sessions.is_none() && self.tasks.is_empty() {
                return self.own(from, n);
            }
            (from..from + n)
                .filter(|&i| self.owns(i))
                .map(|i| match self.task(i) {
                    Some(t) => u64::from(self.tasks[t.graph].calls()),
                    None => self.session(i).map_or(1, |s| u64::from(s.turns)),
                })
                .sum()
        };
        let mut warm = 0;
        if let WarmupRule::Requests(n) = self.phases.warmup {
            out.insert(Phase::Warmup, turns(0, n) + self.priming());
            warm = n;
        }
        if let StopRule::Requests(n) = self.phases.stop
            && matches!(self.phases.warmup, WarmupRule::Requests(_))
        {
            out.insert(Phase::Steady, turns(warm, n));
        } else if let StopRule::Requests(n) = self.phases.stop
            && self.sessions.is_none()
            && self.tasks.is_empty()
            && self.shard.is_none()
        {
            out.insert(Phase::Steady, n);
        }
        if self.probe_requests() > 0 {
            out.insert(Phase::Quality, self.probe_requests());
        }
        out
    }

    /// How many quality-probe requests follow the load (two per probe); they are plan indices
    /// `PROBE_INDEX..PROBE_INDEX + n`.
    pub fn probe_requests(&self) -> u64 {
        if self.primary() { 2 * self.probes } else { 0 }
    }

    /// The dataset conversation session `i` replays (sessions over a dataset).
    fn session_item(&self, i: u64) -> Option<&crate::workload::Prompt> {
        (self.sessions.is_some() && !self.order.is_empty()).then(|| {
            &self.sources.prompts[self.order[(i % self.order.len() as u64) as usize] as usize]
        })
    }

    /// The graphs tasks run (`[workload.task]`; empty without tasks).
    pub fn graphs(&self) -> &[crate::contract::task::Graph] {
        &self.tasks
    }

    /// The graph task `i` runs (`None` without tasks).
    pub fn graph_of(&self, i: u64) -> Option<&crate::contract::task::Graph> {
        let n = self.tasks.len() as u64;
        (n > 0).then(|| &self.tasks[(i % n.max(1)) as usize])
    }

    /// Task `i`'s shape, when the workload has tasks: graph `i mod n` (a file of recorded
    /// tasks replays them in turn), with its think times, tool latencies and results drawn.
    pub fn task(&self, i: u64) -> Option<TaskPlan> {
        if self.tasks.is_empty() {
            return None;
        }
        let graph = (i % self.tasks.len() as u64) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(TASK_STREAM + i);
        let mut t = TaskPlan {
            graph,
            think_ms: Vec::new(),
            tool_ms: Vec::new(),
            result_tokens: Vec::new(),
        };
        for n in &self.tasks[graph].nodes {
            let think = n
                .think_ms
                .as_ref()
                .map_or(0, |d| sample_len(d, &[], &mut rng));
            t.think_ms.push(think);
            let tool = n.kind == crate::contract::task::NodeKind::Tool;
            let (result, ms) = if tool {
                (
                    sample_len(&n.input, &[], &mut rng),
                    sample_len(&n.output, &[], &mut rng),
                )
            } else {
                (0, 0)
            };
            t.result_tokens.push(result);
            t.tool_ms.push(ms);
        }
        Some(t)
    }

    /// Model call `position` of task `i` (plan index `turn_index(i, position)`): its new
    /// message (a tag unique to the call, then its own tokens; a call that opens a
    /// conversation starts with the run's lead) and its answer's length. What it continues and
    /// the outputs it uses are the run's, spliced in by the driver.
    pub fn node(&self, i: u64, position: u32) -> PlannedRequest {
        let index = turn_index(i, position);
        let node =
            &self.tasks[(i % self.tasks.len().max(1) as u64) as usize].nodes[position as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        let input = sample_len(&node.input, &[], &mut rng);
        let output = sample_len(&node.output, &[], &mut rng);
        let t = &self.sources.tokenizer;
        let mut lead = String::new();
        if node.context.is_none() && !self.lead.is_empty() {
            lead.push_str(&self.lead);
            lead.push(' ');
        }
        lead.push_str(&t.tag('r', index, self.seed));
        let (prompt, n) = t.build(&lead, input, &mut rng);
        PlannedRequest {
            model: node.model.clone(),
            ..PlannedRequest::steady(index, n, if self.generates { output } else { 0 }, prompt)
        }
    }

    /// Tool `position` of task `i`'s result: `tokens` words as a tool's JSON answer, and its
    /// tokens as counted.
    pub fn tool_result(&self, i: u64, position: u32, tokens: u32) -> (String, u32) {
        let index = turn_index(i, position);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        let t = &self.sources.tokenizer;
        let (words, _) = t.build(&t.tag('t', index, self.seed), tokens, &mut rng);
        let text = format!(
            "{{\"tool_result\": \"{}\"}}",
            words.trim().replace('"', "'")
        );
        let n = t.count(&text);
        (text, n)
    }

    /// Session `i`'s shape (turns, think times), when the workload has sessions.
    pub fn session(&self, i: u64) -> Option<SessionPlan> {
        let (ss, _) = self.sessions.as_ref()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(SESSION_STREAM + i);
        let turns = match self.session_item(i) {
            Some(item) => item.turns.len() as u32,
            None => sample_len(&ss.turns, &[], &mut rng),
        }
        .clamp(1, crate::contract::MAX_TURNS);
        let think_ms = (1..turns)
            .map(|_| {
                ss.think_ms
                    .as_ref()
                    .map_or(0, |d| sample_len(d, &[], &mut rng))
            })
            .collect();
        Some(SessionPlan { turns, think_ms })
    }

    /// The system text session `i` starts with (none: empty) and its tokens: the shared
    /// system prompt (counted once, when it was built), or its dataset conversation's own.
    pub fn opening(&self, i: u64) -> (&str, u32) {
        match (self.session_item(i), &self.sessions) {
            (Some(item), _) if item.system.is_empty() => ("", 0),
            (Some(item), _) => (&item.system, self.sources.tokenizer.count(&item.system)),
            (None, Some((_, (s, n)))) => (s, *n),
            (None, None) => ("", 0),
        }
    }

    /// Turn `t >= 1` of session `i`: its new user message (`prompt`, `input_tokens`) and its
    /// answer's length; the conversation before it is the run's (the answers received). Over
    /// a dataset, the conversation's own `t`-th user message and its answer's length.
    pub fn turn(&self, i: u64, t: u32) -> PlannedRequest {
        let index = turn_index(i, t);
        let mut r = self.request_led(index, "");
        r.index = index;
        if let Some(turn) = self
            .session_item(i)
            .and_then(|item| item.turns.get(t as usize))
        {
            r.prompt = turn.text.clone();
            r.messages = None;
            r.input_tokens = turn.input_tokens;
            if self.output == LengthDist::Dataset {
                r.output_tokens = turn.output_tokens.unwrap_or(1);
            }
        } else if let Some((ss, _)) = &self.sessions
            && ss.follow_up == crate::contract::FollowUp::ToolResult
        {
            // The same words, as a tool's JSON answer: the opening and closing are glued to the
            // first and last words, so the count stays the planned one in the simulator's words
            // (a model's tokenizer counts the punctuation too; the prompt is counted again).
            let words = r.prompt.trim();
            r.prompt = format!("{{\"tool_result\": \"{}\"}}", words.replace('"', "'"));
            r.input_tokens = self.sources.tokenizer.count(&r.prompt);
        }
        r
    }

    /// Request `index`, generated on its own. Its token counts are the request's: a batch of
    /// inputs (`workload.batch`) carries each input's tokens; an API that generates nothing
    /// (embeddings) plans no output.
    pub fn request(&self, index: u64) -> PlannedRequest {
        let mut r = self.request_unscaled(index);
        // A quality probe repeats request k / 2's prompt, and its class.
        let drawn = match index.checked_sub(PROBE_INDEX) {
            Some(k) if k < self.probe_requests() => k / 2,
            _ => index,
        };
        let priming = index
            .checked_sub(PRIME_INDEX)
            .is_some_and(|k| k < self.priming());
        if !priming && let Some(k) = self.class_of(drawn) {
            let class = &self.classes[k];
            r.class = Some(class.class.name.clone());
            let u = crate::text::unit_interval(crate::text::mix2(self.seed ^ MODEL_SALT, drawn));
            r.model = class.model(u).map(str::to_owned);
        }
        // The load's requests and the cold start carry images; priming and probes repeat
        // text only.
        if index < PRIME_INDEX {
            r.images = self.images_of(index);
        }
        r.input_tokens = r.input_tokens.saturating_mul(self.batch);
        if !self.generates {
            r.output_tokens = 0;
        }
        r
    }

    /// Request `index`'s images: how many, their sizes (or files) and pixel seeds, from a
    /// generator of their own, so images change no other draw.
    fn images_of(&self, index: u64) -> Vec<PlannedImage> {
        let Some((images, salt)) = &self.images else {
            return Vec::new();
        };
        let mut rng = ChaCha8Rng::seed_from_u64(crate::text::mix2(*salt, index));
        let mut below = |n: u64| rand::Rng::next_u64(&mut rng) % n.max(1);
        let n = match images.count {
            LengthDist::Uniform { min, max } => min + below(u64::from(max - min) + 1) as u32,
            _ => images.most(),
        };
        let sizes = images.parsed_sizes();
        let files = &self.sources.images;
        if sizes.is_empty() && files.is_empty() {
            // A resolved contract whose folder is gone (`run` refuses it; a listing shows no
            // images rather than failing).
            return Vec::new();
        }
        (0..n)
            .map(|j| {
                if !files.is_empty() {
                    let k = below(files.len() as u64) as usize;
                    return PlannedImage {
                        width: files[k].width,
                        height: files[k].height,
                        file: Some(k as u32),
                        pixels: 0,
                        bytes: None,
                        sha256: None,
                        error: None,
                    };
                }
                // A pool's member is one image: its size is its own, not drawn again.
                let (member, size) = match (images.reuse, images.pool) {
                    (crate::contract::images::ImageReuse::Pool, Some(p)) => {
                        let m = below(u64::from(p));
                        (m | 1 << 63, m as usize % sizes.len())
                    }
                    _ => (
                        crate::text::mix2(index, u64::from(j)),
                        images.size_at(crate::text::unit_interval(below(u64::MAX))),
                    ),
                };
                let (width, height) = sizes[size];
                PlannedImage {
                    width,
                    height,
                    file: None,
                    // Never 0 (the field's "absent").
                    pixels: crate::text::mix2(*salt, member) | 1,
                    bytes: None,
                    sha256: None,
                    error: None,
                }
            })
            .collect()
    }

    fn request_unscaled(&self, index: u64) -> PlannedRequest {
        if let Some(k) = index
            .checked_sub(PROBE_INDEX)
            .filter(|&k| k < self.probe_requests())
        {
            let mut r = self.request_led(k / 2, "");
            r.index = index;
            r.phase = Phase::Quality;
            r.output_tokens = r.output_tokens.min(PROBE_MAX_TOKENS);
            return r;
        }
        self.request_led(index, &self.lead)
    }

    /// Request `index` with `run_lead` in front (empty: none).
    fn request_led(&self, index: u64, run_lead: &str) -> PlannedRequest {
        let t = &self.sources.tokenizer;
        if let Some(k) = index
            .checked_sub(PRIME_INDEX)
            .filter(|&k| k < self.priming())
        {
            let prompt = lead_with(run_lead, &self.prefixes[k as usize]);
            return PlannedRequest {
                phase: Phase::Warmup,
                ..PlannedRequest::steady(index, t.count(&prompt), 1, prompt)
            };
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        let row = self
            .sources
            .trace
            .get((index % self.sources.trace.len().max(1) as u64) as usize);
        let item = (!self.order.is_empty()).then(|| {
            &self.sources.prompts[self.order[(index % self.order.len() as u64) as usize] as usize]
        });
        let mut length = |d: &LengthDist, input: bool| match (d, row, item) {
            (LengthDist::Trace, Some(r), _) => {
                if input {
                    r.input_tokens
                } else {
                    r.output_tokens
                }
            }
            (LengthDist::Dataset, _, Some(i)) => {
                if input {
                    i.input_tokens
                } else {
                    i.output_tokens.unwrap_or(1)
                }
            }
            _ => sample_len(d, self.sources.lengths(input), &mut rng),
        };
        let (asked_in, asked_out) = match self.class_of(index) {
            Some(k) => (&self.classes[k].input, &self.classes[k].output),
            None => (&self.input, &self.output),
        };
        let input_tokens = length(asked_in, true);
        let output_tokens = length(asked_out, false);
        if let (Some(r), Some((block, shared)), None) = (row, &self.blocks, item)
            && self.input == LengthDist::Trace
        {
            let k = (index % self.sources.trace.len().max(1) as u64) as usize;
            let (prompt, n) = self.block_prompt(run_lead, &r.hash_ids, *block, input_tokens);
            return PlannedRequest {
                shared_tokens: Some(shared[k].saturating_mul(*block).min(input_tokens)),
                ..PlannedRequest::steady(index, n, output_tokens, prompt)
            };
        }
        let references = &self.sources.references;
        if !references.is_empty() {
            let r = &references[(index % references.len() as u64) as usize];
            let prompt = r.prompt.clone();
            return PlannedRequest::steady(index, t.count(&prompt), output_tokens, prompt);
        }
        let (prompt, messages, input_tokens) =
            self.tagged_prompt(index, run_lead, item, input_tokens, &mut rng);
        PlannedRequest {
            messages,
            tools: item.and_then(|i| i.tools.clone()),
            ..PlannedRequest::steady(index, input_tokens, output_tokens, prompt)
        }
    }

    /// A steady request's prompt (and messages, and its length): the run's lead, then the
    /// shared prefix, if any, then the request's own tag, then its text. The tag (its first
    /// word, or the first after a shared prefix) is unique to the request and the seed, so no
    /// prompt shares more than the intended prefix with another. Dataset entries are distinct
    /// already: they are tagged only when they repeat.
    fn tagged_prompt(
        &self,
        index: u64,
        run_lead: &str,
        item: Option<&crate::workload::Prompt>,
        input_tokens: u32,
        rng: &mut ChaCha8Rng,
    ) -> (String, Option<Vec<Message>>, u32) {
        let t = &self.sources.tokenizer;
        let mut lead = String::new();
        if !run_lead.is_empty() {
            lead.push_str(run_lead);
            lead.push(' ');
        }
        if !self.prefixes.is_empty() {
            let k = rand::Rng::next_u32(rng) as usize % self.prefixes.len();
            lead.push_str(&self.prefixes[k]);
            lead.push(' ');
        }
        let tag = t.tag('r', index, self.seed);
        lead.push_str(&tag);
        let pass = if self.order.is_empty() {
            0
        } else {
            index / self.order.len() as u64
        };
        // A session opens with its conversation's first user message (the driver puts the
        // conversation's system text before it); elsewhere an entry is sent whole.
        let entry = item.map(|i| match (&self.sessions, i.turns.first()) {
            (Some(_), Some(first)) => (&first.text, &None, first.input_tokens),
            _ => (&i.prompt, &i.messages, i.input_tokens),
        });
        match entry {
            // A dataset's prompts go as they are on the first pass over it (behind the run's
            // lead, if any); only a repeat (or a shared prefix) gets the request's own tag, so
            // a repeated entry cannot hit the prefix cache.
            Some((text, messages, n))
                if pass == 0 && self.prefixes.is_empty() && run_lead.is_empty() =>
            {
                (text.clone(), messages.clone(), n)
            }
            Some((text, messages, n)) => {
                if pass == 0 {
                    lead.truncate(lead.len() - tag.len() - 1);
                }
                let prompt = format!("{lead}\n{text}");
                let messages = messages.as_ref().map(|m| {
                    let mut m = m.clone();
                    if let Some(first) = m.first_mut() {
                        first.content = format!("{lead}\n{}", first.content);
                    }
                    m
                });
                let n = t.count_behind(&lead, &prompt, n);
                (prompt, messages, n)
            }
            None => {
                let (prompt, n) = t.build(&lead, input_tokens, rng);
                (prompt, None, n)
            }
        }
    }

    /// A prompt made of a trace row's blocks: the run's lead, then for each hash id its own
    /// block of `block` tokens (the same id, the same text, in every request and run of this
    /// seed), the last cut to the row's length; a row longer than its blocks is filled out
    /// behind them. Returns the prompt and its tokens.
    fn block_prompt(&self, lead: &str, ids: &[u64], block: u32, tokens: u32) -> (String, u32) {
        let t = &self.sources.tokenizer;
        let mut prompt = lead.to_owned();
        // The lead counts in the row's length, as it does in every prompt's.
        let mut have = if lead.is_empty() { 0 } else { t.count(lead) };
        let add = |text: &str, prompt: &mut String| {
            if !prompt.is_empty() {
                prompt.push(' ');
            }
            prompt.push_str(text);
        };
        for &h in ids {
            if have >= tokens {
                break;
            }
            let mut rng = ChaCha8Rng::seed_from_u64(crate::text::mix2(self.seed, h));
            rng.set_stream(BLOCK_STREAM);
            let tag = t.tag('b', h, self.seed);
            let (text, n) = t.build(&tag, block.min(tokens - have), &mut rng);
            add(&text, &mut prompt);
            have += n;
        }
        if have < tokens {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(BLOCK_STREAM - 1);
            let (text, _) = t.build("", tokens - have, &mut rng);
            add(&text, &mut prompt);
        }
        let n = t.count(&prompt);
        (prompt, n)
    }

    /// The plan as JSON lines: every request up to the end of the measured phase (at most
    /// `limit`), with its phase and, in open loop, its intended send time. Byte-identical for
    /// the same contract. (`until_stable` warm-up is decided during the run: the listing shows
    /// its most warm-up requests.)
    pub fn to_jsonl(&self, limit: u64) -> String {
        let mut out = String::new();
        let mut phaser = Phaser::new(self.phases);
        // An edge search's listing is its first step at its first rate, then its wait (no
        // verdict comes: the rates after depend on the run).
        let mut arrivals = self.arrivals_with(self.edge.as_ref().map(|_| Default::default()));
        for i in 0..limit {
            let t = arrivals.as_mut().and_then(ArrivalGen::next_scheduled);
            let at = t.unwrap_or(Scheduled {
                at_us: 0,
                stage: Some(0),
                rps: None,
            });
            let phase = phaser.next_scheduled(at, false);
            if phase == Phase::Drain {
                break;
            }
            if !self.owns(i) {
                continue;
            }
            let mut r = self.request(i);
            r.phase = phase;
            r.intended_us = t.map(|t| t.at_us);
            // (Set only when there is one: a record's rare fields are boxed once one is set.)
            if let Some(stage) = t.and_then(|t| t.stage).and_then(|k| self.stage_name(k)) {
                r.stage = Some(stage);
            }
            if let Some(rps) = t.and_then(|t| t.rps) {
                r.stage_rps = Some(rps);
            }
            if !self.tasks.is_empty() {
                self.task_lines(i, &r, &mut out);
                continue;
            }
            if let Some(session) = self.session(i) {
                self.session_lines(i, &r, &session, &mut out);
                continue;
            }
            out.push_str(&serde_json::to_string(&r).unwrap_or_default());
            out.push('\n');
        }
        out
    }

    /// One line per node of task `i` (an arrival of a `[workload.task]` contract), in the
    /// graph's order: a model call as the request it sends (its own new tokens; what it
    /// continues is the run's), a tool as its latency and result. Only a root node's send
    /// time is known before the run: the others start once their inputs have answered, after
    /// their think time.
    fn task_lines(&self, i: u64, arrival: &PlannedRequest, out: &mut String) {
        let (Some(graph), Some(shape)) = (self.graph_of(i), self.task(i)) else {
            return;
        };
        for (k, node) in graph.nodes.iter().enumerate() {
            let mut line = serde_json::Map::new();
            line.insert("task".into(), i.into());
            line.insert("node".into(), node.name.clone().into());
            line.insert(
                "kind".into(),
                format!("{:?}", node.kind).to_lowercase().into(),
            );
            line.insert(
                "phase".into(),
                serde_json::to_value(arrival.phase).unwrap_or_default(),
            );
            line.insert(
                "after".into(),
                node.after
                    .iter()
                    .map(|a| graph.nodes[*a as usize].name.clone())
                    .collect::<Vec<_>>()
                    .into(),
            );
            line.insert("think_ms".into(), shape.think_ms[k].into());
            match (node.after.is_empty(), arrival.intended_us) {
                (true, Some(at)) => {
                    line.insert(
                        "intended_us".into(),
                        (at + u64::from(shape.think_ms[k]) * 1000).into(),
                    );
                }
                _ => {
                    line.insert(
                        "starts".into(),
                        "when its inputs have answered, after its think time".into(),
                    );
                }
            }
            if node.kind.is_model() {
                let r = self.node(i, k as u32);
                line.insert("index".into(), r.index.into());
                line.insert("input_tokens".into(), r.input_tokens.into());
                line.insert("output_tokens".into(), r.output_tokens.into());
                if let Some(m) = &r.model {
                    line.insert("model".into(), m.clone().into());
                }
                line.insert("prompt".into(), r.prompt.into());
            } else {
                line.insert("tool_ms".into(), shape.tool_ms[k].into());
                line.insert("result_tokens".into(), shape.result_tokens[k].into());
            }
            out.push_str(&serde_json::Value::Object(line).to_string());
            out.push('\n');
        }
    }

    /// One line per turn of session `i` (an arrival of a `[workload.sessions]` contract): its
    /// first turn at the arrival, each follow-up after the answer before it and its think time.
    fn session_lines(&self, i: u64, first: &PlannedRequest, s: &SessionPlan, out: &mut String) {
        for t in 0..s.turns {
            let mut r = if t == 0 {
                first.clone()
            } else {
                self.turn(i, t)
            };
            r.phase = first.phase;
            let mut line = match serde_json::to_value(&r) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => continue,
            };
            line.insert("session".into(), i.into());
            line.insert("turn".into(), t.into());
            if t > 0 {
                line.remove("intended_us");
                line.insert(
                    "think_ms".into(),
                    s.think_ms.get(t as usize - 1).copied().unwrap_or(0).into(),
                );
                line.insert(
                    "starts".into(),
                    "after the answer to the turn before, and its think time".into(),
                );
            }
            out.push_str(&serde_json::Value::Object(line).to_string());
            out.push('\n');
        }
    }
}

/// The system prompt every session starts with, and its tokens (empty: none).
fn system_prompt(
    ss: &crate::contract::Sessions,
    sources: &Inputs,
    lead: &str,
    seed: u64,
) -> (String, u32) {
    match ss.system_prompt_tokens {
        0 => (String::new(), 0),
        n => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(SYSTEM_STREAM);
            let tag = sources.tokenizer.tag('s', 0, seed);
            sources.tokenizer.build(&lead_with(lead, &tag), n, &mut rng)
        }
    }
}

/// A load program as the arrival stream runs it: its fixed stages, their names, and the edge
/// search after them, if any.
fn program(c: &Contract) -> (Arc<Vec<Leg>>, Arc<Vec<String>>, Option<Steered>) {
    let fixed = match c.load.edge() {
        Some(_) => &c.load.stage[..c.load.stage.len() - 1],
        None => &c.load.stage[..],
    };
    let edge = c
        .load
        .edge()
        .map(|s| (edge_spec(s, fixed.len() as u32), Default::default()));
    (
        Arc::new(fixed.iter().map(leg).collect()),
        Arc::new(fixed.iter().map(|s| s.name.clone()).collect()),
        edge,
    )
}

/// An edge search as the arrival stream runs it, after `fixed` stages.
fn edge_spec(s: &crate::contract::stages::Stage, fixed: u32) -> crate::arrival::edge::EdgeSpec {
    let (resolution, max_steps) = s.edge_search();
    crate::arrival::edge::EdgeSpec {
        name: s.name.clone(),
        start_rps: s.rate.unwrap_or(1.0),
        requests: s.requests.unwrap_or(1),
        resolution,
        max_steps,
        arrival: s.arrival.unwrap_or_default(),
        burstiness: s.burstiness.unwrap_or(1.0),
        first_stage: fixed,
    }
}

/// A stage as the arrival stream runs it.
fn leg(s: &crate::contract::stages::Stage) -> crate::arrival::program::Leg {
    use crate::arrival::program::{Leg, LegEnd};
    let (from_rps, to_rps) = s.rates();
    Leg {
        from_rps,
        to_rps,
        end: match (s.requests, s.seconds()) {
            (Some(n), _) => LegEnd::Requests(n),
            (None, t) => LegEnd::Seconds(t.unwrap_or(0.0)),
        },
        arrival: s.arrival.unwrap_or_default(),
        burstiness: s.burstiness.unwrap_or(1.0),
    }
}

/// A length drawn from `d`; `empirical` draws from `values` (the inputs' lengths).
fn sample_len(d: &LengthDist, values: &[u32], rng: &mut ChaCha8Rng) -> u32 {
    let clamp =
        |x: f64, min: u32, max: u32| (x.round().max(f64::from(min)).min(f64::from(max))) as u32;
    match *d {
        LengthDist::Fixed { value } => value,
        LengthDist::Uniform { min, max } => {
            let span = u64::from(max - min) + 1;
            min + (rand::Rng::next_u64(rng) % span) as u32
        }
        LengthDist::Normal {
            mean,
            stddev,
            min,
            max,
        } => match Normal::new(mean, stddev) {
            Ok(n) => clamp(n.sample(rng), min, max),
            Err(_) => clamp(mean, min, max),
        },
        LengthDist::Empirical { .. } if !values.is_empty() => {
            values[(rand::Rng::next_u64(rng) % values.len() as u64) as usize]
        }
        // Per-request lengths (dataset, trace) are taken before sampling; nothing to draw.
        LengthDist::Empirical { .. } | LengthDist::Dataset | LengthDist::Trace => 1,
        LengthDist::Lognormal {
            mean,
            stddev,
            min,
            max,
        } => {
            // Moments of the lengths → parameters of the underlying normal.
            let sigma2 = (1.0 + (stddev * stddev) / (mean * mean)).ln();
            let mu = mean.ln() - sigma2 / 2.0;
            match LogNormal::new(mu, sigma2.sqrt()) {
                Ok(n) => clamp(n.sample(rng), min, max),
                Err(_) => clamp(mean, min, max),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::parse;
    use std::path::Path;

    fn contract(load: &str) -> Contract {
        parse(&format!("[workload]\nseed = 7\ninput_tokens = {{ dist = \"normal\", mean = 100, stddev = 30, min = 10, max = 200 }}\n[load]\n{load}"), Path::new("t.toml")).unwrap()
    }

    #[test]
    fn same_contract_same_plan_byte_for_byte() {
        let c = contract("model = \"open\"\nrate = 5\nrequests = 50\n");
        assert_eq!(
            Plan::new(&c, &Inputs::default()).to_jsonl(1000),
            Plan::new(&c, &Inputs::default()).to_jsonl(1000)
        );
        let mut other = c.clone();
        other.workload.seed = 8;
        assert_ne!(
            Plan::new(&c, &Inputs::default()).to_jsonl(1000),
            Plan::new(&other, &Inputs::default()).to_jsonl(1000)
        );
    }

    /// The shards of a plan are the plan: every request once, with its prompt, lengths, phase
    /// and intended send time, and the shards' planned counts add up to the plan's.
    #[test]
    fn shards_partition_the_plan() {
        let whole = contract("rate = 50\nrequests = 70\n");
        let mut whole = whole;
        whole.warmup.requests = 11;
        let plan = Plan::new(&whole, &Inputs::default());
        let sorted = |text: String| {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            lines.sort_by_key(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["index"].as_u64()
            });
            lines
        };
        let mut union = Vec::new();
        let mut planned = std::collections::BTreeMap::new();
        for i in 0..4 {
            let mut c = whole.clone();
            c.load.shard = crate::contract::Written::parse(&format!("{i}/4")).ok();
            let shard = Plan::new(&c, &Inputs::default());
            union.extend(shard.to_jsonl(1000).lines().map(str::to_owned));
            for (phase, n) in shard.planned_by_phase() {
                *planned.entry(phase).or_insert(0) += n;
            }
            assert_eq!(
                shard.len(),
                Some(crate::contract::Shard { index: i, count: 4 }.share(0, 81))
            );
        }
        assert_eq!(sorted(union.join("\n")), sorted(plan.to_jsonl(1000)));
        assert_eq!(planned, plan.planned_by_phase());
        assert_eq!(plan.len(), Some(81));
    }

    #[test]
    fn prompts_have_the_planned_length_and_unique_first_words() {
        let c = contract("model = \"open\"\nrate = 5\nrequests = 50\n");
        let p = Plan::new(&c, &Inputs::default());
        let mut firsts = std::collections::HashSet::new();
        for i in 0..50 {
            let r = p.request(i);
            assert_eq!(crate::text::count_words(&r.prompt), r.input_tokens);
            assert!((10..=200).contains(&r.input_tokens));
            assert!(firsts.insert(r.prompt.split(' ').next().unwrap().to_owned()));
        }
    }

    #[test]
    fn poisson_schedule_has_the_offered_rate() {
        let c = contract("model = \"open\"\nrate = 50\nrequests = 5000\n");
        let t: Vec<u64> = Plan::new(&c, &Inputs::default())
            .arrivals()
            .unwrap()
            .take(5001)
            .collect();
        assert_eq!(t[0], 0);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        let rate = 5000.0 / (t[5000] as f64 / 1e6);
        // 5000 exponential gaps: the relative sd of the mean is 1/sqrt(5000) ≈ 1.4%.
        assert!((rate - 50.0).abs() < 50.0 * 0.06, "{rate}");
    }

    #[test]
    fn listing_shows_warmup_first_and_stops_at_the_duration() {
        let c = parse("[load]\nmodel = \"open\"\narrival = \"constant\"\nrate = 10\nduration = \"2s\"\n[warmup]\nrequests = 5\n", Path::new("t")).unwrap();
        let lines: Vec<serde_json::Value> = Plan::new(&c, &Inputs::default())
            .to_jsonl(1000)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 25);
        assert!(lines[..5].iter().all(|l| l["phase"] == "warmup"));
        assert!(lines[5..].iter().all(|l| l["phase"] == "steady"));
        assert_eq!(lines[5]["intended_us"], 500_000);
        assert_eq!(lines[24]["intended_us"], 2_400_000);
    }

    #[test]
    fn phaser_follows_each_rule() {
        let rules = |w, s| PhaseRules { warmup: w, stop: s };
        let mut p = Phaser::new(rules(WarmupRule::Requests(2), StopRule::Requests(3)));
        let phases: Vec<Phase> = (0..7).map(|i| p.next(i, false)).collect();
        use Phase::*;
        assert_eq!(
            phases,
            vec![Warmup, Warmup, Steady, Steady, Steady, Drain, Drain]
        );
        assert_eq!(p.warmup_end, Some("requests"));
        let mut p = Phaser::new(rules(
            WarmupRule::UntilStable { max: 10 },
            StopRule::Duration(100),
        ));
        assert_eq!(p.next(0, false), Warmup);
        assert_eq!(p.next(5, true), Steady);
        assert_eq!(p.warmup_end, Some("stable"));
        assert_eq!(p.next(104, false), Steady);
        assert_eq!(p.next(105, false), Drain);
        let mut p = Phaser::new(rules(
            WarmupRule::UntilStable { max: 2 },
            StopRule::Requests(1),
        ));
        assert_eq!(
            (p.next(0, false), p.next(1, false), p.next(2, false)),
            (Warmup, Warmup, Steady)
        );
        assert_eq!(p.warmup_end, Some("max_requests"));
        let mut p = Phaser::new(rules(WarmupRule::Requests(0), StopRule::Requests(1)));
        assert_eq!(p.next(0, false), Steady);
        assert_eq!(p.warmup_end, Some("none"));
    }

    #[test]
    fn gamma_burstiness_changes_dispersion_not_rate() {
        let cv = |shape: f64| {
            let c = contract(&format!(
                "model = \"open\"\narrival = \"gamma\"\nburstiness = {shape}\nrate = 20\nrequests = 4000\n"
            ));
            let t: Vec<u64> = Plan::new(&c, &Inputs::default())
                .arrivals()
                .unwrap()
                .take(4000)
                .collect();
            let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64;
            (m, var.sqrt() / m)
        };
        let (m1, cv_bursty) = cv(0.25);
        let (m2, cv_smooth) = cv(4.0);
        assert!((m1 - 50_000.0).abs() < 5_000.0 && (m2 - 50_000.0).abs() < 5_000.0);
        // Gamma CV = 1/sqrt(shape): 2.0 and 0.5.
        assert!(
            cv_bursty > 1.6 && cv_smooth < 0.6,
            "{cv_bursty} {cv_smooth}"
        );
    }
}
