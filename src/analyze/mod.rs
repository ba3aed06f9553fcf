//! Analysis: records + contract → summary. Pure: it reads no file and touches no network, so
//! `goodput report` recomputes exactly what `goodput run` printed.
//!
//! Definitions (docs/ARCHITECTURE.md): latency origin is the intended send time in open loop and the
//! actual send in closed loop; TTFT = origin → first text-carrying chunk; E2E = origin → end;
//! TPOT = (E2E − TTFT)/(output tokens − tokens of the first text chunk), when a token follows
//! that chunk; ITL per chunk = gaps between successive text-carrying chunks (one value per gap);
//! ITL per token = each gap shared evenly among the tokens of the chunk it ends (one value per
//! token after the first chunk), so both TPOT and ITL per token stay exact however the server
//! groups tokens into chunks; dispatch lag = actual − intended send. TTFT's distribution is over
//! every request that produced a first token (one that failed after it included); TPOT, ITL and
//! E2E are over the successful requests; the SLO's figures count every failure as a miss
//! (`claims::sample`); counts, attainment and errors use all of them.
//!
//! Rates are measured over the **steady window**: from the first to the last steady request's
//! latency origin. Offered rate = (n − 1) / window. Because warm-up runs before the window and
//! drain keeps the same load on after it, the server is under steady load for the whole window,
//! so achieved rate = successful completions (of any phase) inside the window / window, and
//! token throughput = output tokens whose chunks arrived inside it (input: prompts whose first
//! token arrived inside it) / window. When the server falls behind, fewer completions land in
//! the window and achieved drops below offered. (Spans of the steady requests' own completions
//! were tried first: they swing with the first and last requests' E2E.) Goodput = achieved
//! rate × the fraction of successful steady requests that met every SLO threshold.

pub mod claims;
pub mod classes;
pub mod edge;
pub mod efficiency;
pub(crate) mod headline;
pub mod images;
mod lengths;
mod notes;
pub mod precision;
pub mod predict;
pub(crate) mod quality;
pub mod replicas;
mod request;
pub mod segments;
pub(crate) mod server;
pub mod sessions;
pub mod shards;
pub mod spans;
pub mod speculative;
pub mod stages;
pub mod steadiness;
pub mod tasks;
pub mod tools;
mod validity;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::contract::{ClientTokenCount, Contract, Fingerprints, LatencyOrigin, TokenSource};
use crate::env::facts::Facts;
use crate::plan::Phase;
use crate::record::{Counted, Outcome, Record};
pub use crate::stats::{Dist, PERCENTILES, Tally, min_requests_for, percentile_sorted, settled};
use crate::workload::Inputs;
pub use claims::SloVerdict;
pub use headline::Headline;
use lengths::*;
pub use lengths::{LengthCheck, LengthDists};
use notes::*;
use request::*;
pub use request::{
    Itl, RequestMetrics, SliceFigures, add_itl, meets_slo, record_meets_slo, request_metrics,
    slo_of,
};
pub use validity::decided;
use validity::*;

/// Version of `summary.json`'s schema; bumped on any incompatible change. 3: per-claim
/// validity, the target's identity and warnings, cancelled requests apart from attainment, and
/// fingerprints without `[target.declared]` and with `load.kind`. 4: a sample too small for
/// the SLO's percentile is no longer INVALID: the SLO and each of its metrics carry a verdict
/// with its support (`met`, `met_indicated`, `missed`, `missed_indicated`), the steady state
/// its strongest supported claims, a class no validity of its own, and the target every
/// discovered fact.
pub const SCHEMA_VERSION: u32 = 4;

/// The JSON Schema of `summary.json`, generated from [`Summary`] and its serde attributes. The
/// repository keeps a copy (`docs/summary.schema.json`); a test fails when the two differ, so
/// a change to the summary's shape shows as a reviewed diff of that file.
/// Objects are closed (`additionalProperties: false`): the schema lists every key a summary
/// has, so a reader can rely on it in both directions.
pub fn summary_schema() -> serde_json::Value {
    fn close(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                    m.insert("additionalProperties".into(), false.into());
                }
                m.values_mut().for_each(close);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(close),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(schemars::schema_for!(Summary)).expect("a schema is JSON");
    close(&mut v);
    v
}

/// The launch timeline of a cold-start test, µs on the run's clock (which starts at launch, or
/// when the tool began waiting for a server that was starting). Kept as `cold_start.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The launch command, when goodput started the server.
    pub command: Option<Vec<String>>,
    /// When the port first accepted a connection.
    pub port_open_us: Option<u64>,
    /// When the readiness endpoint first answered 2xx.
    pub ready_us: u64,
    /// Which endpoint said ready.
    pub ready_endpoint: String,
    /// How the launched server ended (after goodput stopped it).
    pub exit: Option<String>,
}

/// The cold-start result: time to readiness and to the first token, and the first requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ColdStartResult {
    pub launched: bool,
    /// Launch (or start of waiting) → port open, seconds.
    pub port_open_s: Option<f64>,
    /// Launch → ready, seconds.
    pub ready_s: f64,
    /// Launch → first token of the first request, seconds.
    pub first_token_s: Option<f64>,
    /// TTFT of the very first request, ms (from its send).
    pub first_request_ttft_ms: Option<f64>,
    /// The cold-start requests (sent one after another once ready).
    pub requests: PhaseStats,
}

/// How warm-up went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WarmupResult {
    /// The contract's rule in words.
    pub rule: String,
    pub requests: u64,
    /// First warm-up send → first steady send, seconds.
    pub duration_s: f64,
    /// `requests`, `duration`, `stable`, `max_requests` (never settled) or `none`.
    pub ended: String,
}

/// One second of a run (by send time), for seeing the early spike and any drift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the run's clock started.
    pub t: u64,
    pub starts: u64,
    pub completions: u64,
    pub errors: u64,
    /// Requests in flight at the end of the second.
    pub in_flight: u64,
    /// Output tokens whose chunk arrived in this second.
    pub output_tokens: u64,
    /// TTFT (from send) of the requests sent in this second, ms.
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    /// Phases of the requests sent in this second.
    pub phases: Vec<String>,
}

/// Per-second series of a run (`timeseries.json`).
pub fn timeseries(records: &[Record]) -> Vec<Second> {
    let last = records
        .iter()
        .filter_map(|r| r.end_us.max(r.sent_us))
        .max()
        .unwrap_or(0)
        / 1_000_000;
    let mut out: Vec<Second> = (0..=last)
        .map(|t| Second {
            t,
            starts: 0,
            completions: 0,
            errors: 0,
            in_flight: 0,
            output_tokens: 0,
            ttft_p50_ms: None,
            ttft_p99_ms: None,
            phases: Vec::new(),
        })
        .collect();
    let mut ttfts: Vec<Vec<f64>> = vec![Vec::new(); out.len()];
    let sec = |us: u64| (us / 1_000_000) as usize;
    for r in records {
        if let Some(s) = r.sent_us {
            let b = &mut out[sec(s)];
            b.starts += 1;
            let p = r.phase.as_str().to_owned();
            if !b.phases.contains(&p) {
                b.phases.push(p);
            }
            if let Some(f) = r.first_token_us {
                ttfts[sec(s)].push((f.saturating_sub(s)) as f64 / 1000.0);
            }
            let end = r.end_us.unwrap_or(s);
            for b in &mut out[sec(s)..sec(end)] {
                b.in_flight += 1;
            }
        }
        if let Some(e) = r.end_us {
            out[sec(e)].completions += 1;
            if !r.is_ok() {
                out[sec(e)].errors += 1;
            }
        }
        for (t, n) in &r.chunks {
            out[sec(t)].output_tokens += u64::from(n);
        }
    }
    for (b, mut v) in out.iter_mut().zip(ttfts) {
        v.sort_unstable_by(f64::total_cmp);
        b.ttft_p50_ms = percentile_sorted(&v, 50.0);
        b.ttft_p99_ms = percentile_sorted(&v, 99.0);
    }
    out
}

/// The summary of one run (`summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub schema_version: u32,
    /// goodput version that computed it.
    pub tool_version: String,
    /// Contract name.
    pub contract: String,
    /// Load model in words.
    pub load: String,
    pub load_model: crate::contract::LoadModel,
    /// Where latency is measured from.
    pub latency_origin: LatencyOrigin,
    pub fingerprints: Fingerprints,
    /// Comparable or directional, with what is missing.
    pub grade: Grade,
    /// Whether tail and goodput claims are supported, with every reason they are not.
    pub validity: Validity,
    /// Statements every reader must see (closed-loop warning, token source, warm-up excluded…).
    pub notes: Vec<String>,
    /// The run was interrupted before its stop condition.
    pub interrupted: bool,
    /// Why the run ended before its plan did: the signal that interrupted it, or why it gave up
    /// (the target stopped answering; every request that reached it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The run stopped itself once its verdict was decided (`measurement.stop_when_decided`),
    /// and why: its drain cut short, the steady requests then in flight counted as misses
    /// (`abandoned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<String>,
    /// How the load ended beyond its plan: the progress guard's stop and its evidence, the
    /// requests cancelled in flight and when the server was idle again, the drain's cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_end: Option<crate::driver::guard::LoadEnd>,
    /// Records of finished requests a failed write could not put in `requests.jsonl`: where
    /// they were kept, or how many were lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_records: Option<crate::record::writer::Lost>,
    /// The cold-start test, when the contract asked for one: its own result, never averaged in.
    pub cold_start: Option<ColdStartResult>,
    pub warmup: WarmupResult,
    /// Every phase present, side by side.
    pub phases: BTreeMap<String, PhaseStats>,
    /// The steady phase: the headline result.
    pub steady: Steady,
    /// Expectations written before the run, against what was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictions: Option<predict::Check>,
    /// Output quality beside the speed figures (`[quality]`; absent in mode `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<quality::QualityResult>,
    /// The server's own metrics over the steady window, when it publishes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<server::ServerSide>,
    /// What was measured: the target as the run knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetIdentity>,
    /// Findings every reader must see before the numbers (a cold run served from the cache,
    /// another model answering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The client machines of a run merged from shards (`goodput merge`): each one's dispatch
    /// lag and clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<shards::ShardsResult>,
    /// A run whose load was changed while it ran (`demo --live`): each segment's own figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<segments::SegmentResult>>,
    /// `[measurement.stop]`: whether the measured phase ended once its answer was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<precision::Precision>,
    /// Open loop: where the latency series settled, or that it did not (`analyze::steadiness`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<steadiness::SteadyState>,
    /// A load program (`[[load.stage]]`): each stage's own result, in program order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<stages::StageResult>>,
    /// An edge search (`shape = "edge"`): the highest rate whose step passed (met the SLO
    /// and VALID), bracketed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<edge::EdgeResult>,
    /// Energy, cost and per-accelerator figures over the steady window, each absent with its
    /// reason when an input (telemetry, a price, an SLO) is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<efficiency::Efficiency>,
    /// Traffic classes (`[[class]]`): each one's steady figures against its own SLO. The
    /// totals' SLO result then adds them up, and passes only when every class does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<classes::ClassResult>>,
}

/// The target of a run: where, which model, which engine on what.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetIdentity {
    /// The built-in simulator rather than a server at a URL.
    pub simulator: bool,
    /// The URL, without any user name or password in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// The endpoint API (`target.api`), when it is not OpenAI chat (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Every fact of the target, discovered from its probes or declared (`engine`,
    /// `max_model_len`, `slots`, `parallelism`, …): what `compare` holds two targets to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

impl TargetIdentity {
    /// One line: URL, model, engine and revision, precision, hardware (or the simulator).
    pub fn describe(&self) -> String {
        let unknown =
            |x: &Option<String>, what: &str| x.clone().unwrap_or_else(|| format!("{what} unknown"));
        let model = unknown(&self.model, "model");
        if self.simulator {
            let api = self
                .api
                .as_ref()
                .map_or(String::new(), |a| format!(", api {a}"));
            return format!("built-in simulator (no network; simulated model {model}{api})");
        }
        let engine = match (&self.engine, &self.engine_revision) {
            (Some(e), Some(r)) => format!("{e} {r}"),
            (Some(e), None) => format!("{e} (revision unknown)"),
            (None, _) => "engine unknown".to_owned(),
        };
        let api = self
            .api
            .as_ref()
            .map_or(String::new(), |a| format!(" · api {a}"));
        format!(
            "{}{api} · model {model} · {engine} · {} · {}",
            self.url.as_deref().unwrap_or("?"),
            unknown(&self.precision, "precision"),
            unknown(&self.hardware, "hardware")
        )
    }
}

/// The URL without `user:password@`.
pub(crate) fn without_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (auth, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

fn target_identity(c: &Contract, facts: &Facts) -> TargetIdentity {
    let fact = |k: &str| facts.get(k).map(str::to_owned);
    TargetIdentity {
        simulator: c.embedded(),
        url: c.target.url.as_deref().map(|u| match c.target.urls.len() {
            0 | 1 => without_userinfo(u),
            n => format!(
                "{} and {} more replica{} (target.urls, {})",
                without_userinfo(u),
                n - 1,
                if n > 2 { "s" } else { "" },
                match c.target.spread.unwrap_or_default() {
                    crate::contract::Spread::RoundRobin => "round robin",
                    crate::contract::Spread::Session => "by session",
                }
            ),
        }),
        model: c.target.model.clone().or_else(|| fact("model")),
        engine: fact("engine"),
        engine_revision: fact("engine_revision"),
        precision: fact("precision"),
        hardware: fact("hardware"),
        api: (c.target.api != crate::api::ApiKind::default()).then(|| c.target.api.name()),
        facts: facts
            .facts
            .iter()
            .map(|(k, f)| (k.clone(), f.value.clone()))
            .collect(),
    }
}

/// Responses that named another model than the one asked for.
fn model_warning(c: &Contract, records: &[Record]) -> Option<String> {
    let asked = c.target.model.as_deref()?;
    let mut other: BTreeMap<&str, u64> = BTreeMap::new();
    let mut named = 0;
    for r in records {
        if let Some(m) = r.response_model.as_deref() {
            named += 1;
            if !crate::text::same_model(asked, m) {
                *other.entry(m).or_default() += 1;
            }
        }
    }
    let n: u64 = other.values().sum();
    (n > 0).then(|| {
        let list: Vec<String> = other.iter().map(|(m, k)| format!("\"{m}\" ({k})")).collect();
        format!(
            "ANOTHER MODEL ANSWERED: {n} of {named} responses name {} instead of target.model \"{asked}\": the numbers describe that model",
            list.join(", ")
        )
    })
}

/// Under `prefix_cache = "cold"`, requests the server served partly from its prefix cache
/// beyond what every prompt of the run shares by construction: the run's lead (its cache
/// nonce) and what the server adds in front (BOS, chat template).
fn cold_cache_warning(c: &Contract, w: &Inputs, steady_ok: &[&&Record]) -> Option<String> {
    if c.workload.prefix_cache != crate::contract::PrefixCache::Cold {
        return None;
    }
    let lead = crate::plan::run_lead(c, w);
    let t = &w.tokenizer;
    let exact = t.counts_model_tokens() || c.embedded();
    // Counted in the model's tokens when exact; else bounded by its characters (a token
    // covers at least one).
    let lead_tokens = if lead.is_empty() {
        0
    } else if exact {
        t.count(&lead) + 1
    } else {
        lead.chars().count() as u32 + 1
    };
    // What the server puts in front of every prompt: the least it added to any (with
    // approximate counting this also holds the tokenizers' difference, a looser bound).
    let added = steady_ok
        .iter()
        .filter_map(|r| {
            let rep = r.reported_tokens(true)?;
            Some(i64::from(rep) - i64::from(r.planned_tokens(true)))
        })
        .min()
        .unwrap_or(0)
        .max(0) as u32;
    // Sessions: every first turn shares the system prompt (the run's lead leads it), and a
    // later turn's history is meant to be cached; the first turns are the cold ones.
    let system = c
        .workload
        .sessions
        .as_ref()
        .map_or(0, |s| s.system_prompt_tokens);
    let bound = lead_tokens.max(system + 1) + added;
    let steady_ok: Vec<&&Record> = steady_ok
        .iter()
        .copied()
        .filter(|r| r.is_first_turn())
        .collect();
    // A trace's prefix structure says what each request shares with earlier ones (a block's
    // worth of slack: the earlier request may have ended inside the block).
    let block = c.load.block_tokens();
    let allowed = |r: &Record| match r.expected_cached_tokens {
        Some(e) if e > 0 => bound + e + block,
        _ => bound,
    };
    let over: Vec<u32> = steady_ok
        .iter()
        .filter_map(|r| r.usage_cached_tokens.filter(|&k| k > allowed(r)))
        .collect();
    (!over.is_empty()).then(|| {
        let max = over.iter().max().copied().unwrap_or(0);
        format!(
            "COLD CACHE WAS WARM: {} of {} steady requests{} were served partly from the server's prefix cache beyond the {bound} tokens every prompt of this run shares (run lead{}, server-added prefix), up to {max} cached tokens. Under prefix_cache = \"cold\" their TTFT is not a cold one: the cache held these prompts already (repeated prompts, or a run of this tool older than per-run nonces).",
            over.len(),
            steady_ok.len(),
            if system > 0 || c.workload.sessions.is_some() { " (sessions' first turns)" } else { "" },
            if system > 0 { ", the sessions' system prompt" } else { "" },
        )
    })
}

/// Under `prefix_cache = "shared"` or `"warm"`, an engine that states its cached prompt tokens
/// (usage, or its answers' timing) and stated a hit on the shared prefix for almost none of the
/// requests that carry one an earlier request sent: its prefix cache is off or lost them (vLLM
/// without prefix caching, or with it turned off under speculative decoding), and these TTFTs
/// are cold ones, not the workload's.
fn shared_cache_warning(c: &Contract, steady_ok: &[&&Record]) -> Option<String> {
    use crate::contract::PrefixCache;
    let mode = c.workload.prefix_cache;
    if mode == PrefixCache::Cold {
        return None;
    }
    // Shorter than a couple of cache blocks: a miss is not evidence.
    let shared = c.workload.shared_prefix_tokens.filter(|&n| n >= 32)?;
    let stated: Vec<u32> = steady_ok
        .iter()
        .filter_map(|r| {
            r.usage_cached_tokens
                .or(r.engine_timing.and_then(|t| t.cached_tokens))
        })
        .collect();
    if stated.len() < 8 || stated.len() * 2 < steady_ok.len() {
        return None;
    }
    // A prefix is new only to the first request that carries it (under `warm`, to none).
    let first_sends = match mode {
        PrefixCache::Warm => 0,
        _ => c.workload.prefixes.unwrap_or(1) as usize,
    };
    let should_hit = stated.len().saturating_sub(first_sends);
    let hit = stated.iter().filter(|&&k| k * 2 >= shared).count();
    if should_hit == 0 || hit * 10 > should_hit {
        return None;
    }
    Some(format!(
        "SHARED PREFIXES WERE NOT CACHED: under prefix_cache = \"{}\" {should_hit} of the {} steady requests whose cached tokens the server stated carry a {shared}-token prefix an earlier request sent, yet it stated at least half of that prefix cached for {hit}: its prefix cache is off or lost them (vLLM: prefix caching disabled, or turned off under speculative decoding), so these TTFTs are cold ones, not this workload's",
        format!("{mode:?}").to_lowercase(),
        stated.len()
    ))
}

/// Declares a verdict enum whose JSON (and display) names are fixed strings, comparable with
/// those strings.
macro_rules! verdict {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
        )]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v),+
        }
        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}
pub(crate) use verdict;

verdict! {
    /// Whether every fact a result depends on is stated.
    GradeVerdict {
        /// Every fact is stated: the result can be compared.
        Comparable => "comparable",
        /// Something is missing: the result only points a direction.
        Directional => "directional",
    }
}

impl GradeVerdict {
    /// Comparable when nothing is missing.
    pub fn of(missing: &[String]) -> GradeVerdict {
        if missing.is_empty() {
            GradeVerdict::Comparable
        } else {
            GradeVerdict::Directional
        }
    }
}

verdict! {
    /// Whether a run supports the claims its load model allows.
    ValidityVerdict {
        Valid => "VALID",
        Invalid => "INVALID",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Grade {
    pub verdict: GradeVerdict,
    /// Facts whose absence makes the result directional.
    pub missing: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Validity {
    /// For the claims in `supports`.
    pub verdict: ValidityVerdict,
    pub reasons: Vec<String>,
    /// The claims a VALID verdict supports under this load model: open loop, tail latency,
    /// goodput and capacity at the offered rate; closed loop, throughput and latency at the
    /// stated concurrency.
    #[serde(default)]
    pub supports: String,
    /// Claims this run cannot support whatever its verdict (closed loop: tail latency under an
    /// arrival rate, capacity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cannot_support: Vec<String>,
    /// One of the reasons is that the client fell behind its own schedule (dispatch lag): the
    /// result may describe the client's limit rather than the server's.
    #[serde(default)]
    pub client_behind: bool,
    /// The offered load was above what the server sustains: its queue grew all run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<Overload>,
    /// Open loop: whether the server kept up with the offered rate over the steady window: no
    /// queue that grew all run, no ramp still building up, no shortfall of completions beyond
    /// what varying latencies explain (each a reason when it fires). Raw achieved against
    /// offered is not the test: a window's edges move it on an idle server. Absent for a
    /// closed loop, or without a window and a completed request to judge by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_up: Option<bool>,
    /// Open loop: the p99 dispatch lag above which the client is judged to have fallen behind
    /// (`measurement.max_dispatch_lag_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dispatch_lag_ms: Option<f64>,
}

impl Validity {
    pub fn is_valid(&self) -> bool {
        self.verdict == ValidityVerdict::Valid
    }
}

/// A growing queue: the diagnosis of an open-loop rate above the server's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Overload {
    /// The server's sustained completion rate, req/s: its completions per second over the
    /// steady window, through which it was never idle.
    pub sustained_rps: f64,
    /// How fast the queue grew, requests per second (least squares over the window).
    pub growth_rps: f64,
    /// Requests in flight (sent or due, not finished) at the start and end of the steady window.
    pub in_flight_start: f64,
    pub in_flight_end: f64,
    /// TTFT p50 by phase, ms, in time order (warm-up, steady, drain; absent phases left out).
    pub ttft_p50_by_phase: Vec<(String, f64)>,
}

/// Counts and distributions of one phase. Milliseconds unless named otherwise.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseStats {
    /// Requests recorded (sent, or client-dropped at their send time): `ok + failed`.
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    /// Requests the plan held for this phase, when a count bounds it (not a duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<u64>,
    /// Planned requests never sent (the run stopped first): `planned = ok + failed + not_sent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_sent: Option<u64>,
    /// Over every request that produced a first token, those that failed after it included
    /// (the user's cancellations aside); the other latencies are over the successful ones.
    pub ttft_ms: Option<Dist>,
    /// Time per output token after the first chunk: (E2E − TTFT) / (output tokens − tokens
    /// in the first text chunk).
    pub tpot_ms: Option<Dist>,
    /// ITL per chunk: gaps between consecutive text-carrying chunks, one value per gap.
    pub itl_ms: Option<Dist>,
    /// ITL per token: each gap shared evenly among the tokens of the chunk it ends, one value
    /// per token after the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_token_ms: Option<Dist>,
    pub e2e_ms: Option<Dist>,
    /// Time to first output (answer) token, after any reasoning; present when some request
    /// reasoned (otherwise it is TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo_ms: Option<Dist>,
    /// TPOT of the answer alone: (E2E − TTFO) / (answer tokens − tokens in the first answer
    /// chunk); present when some request reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_answer_ms: Option<Dist>,
    /// Reasoning tokens per request (0 for one that did not reason); present when some
    /// request reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<Dist>,
    /// Actual − intended send (open loop only).
    pub dispatch_lag_ms: Option<Dist>,
    /// The part of the dispatch lag by which the dispatch thread woke after the intended time
    /// (the OS ran it late: busy CPUs, or idle ones slow to wake; or its request was not built
    /// in time, which the run warns about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_wake_ms: Option<Dist>,
    /// The part of the dispatch lag the request then waited for the client's async runtime
    /// (the client itself was busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_queue_ms: Option<Dist>,
    /// Input tokens per request (server-reported when available, else planned).
    pub input_tokens: Option<Dist>,
    /// Output tokens per request (source in `Steady::output_token_source`).
    pub output_tokens: Option<Dist>,
}

impl PhaseStats {
    /// The distribution of an SLO metric by its name (`ttft`, `tpot`, `e2e`, `ttfo`).
    pub fn dist(&self, metric: &str) -> Option<&Dist> {
        match metric {
            "ttft" => self.ttft_ms.as_ref(),
            "tpot" => self.tpot_ms.as_ref(),
            "e2e" => self.e2e_ms.as_ref(),
            "ttfo" => self.ttfo_ms.as_ref(),
            _ => None,
        }
    }
}

/// The steady-state result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Steady {
    #[serde(flatten)]
    pub stats: PhaseStats,
    /// Span of the steady requests' latency origins, seconds.
    pub window_s: f64,
    pub throughput: Throughput,
    /// `usage`, `client`, or `mixed: usage for N, client for M`.
    pub output_token_source: String,
    /// How the output tokens were counted, and how the server's and the client's counts compare.
    #[serde(default)]
    pub output_count: OutputCount,
    /// Failures by class (`client_dropped`, `timeout`, `http_status`, …).
    pub errors: BTreeMap<String, u64>,
    /// The first failure's message in each class (at most 300 characters), to name the fault.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first_errors: BTreeMap<String, String>,
    /// Requests finished with `finish_reason` other than the planned length's.
    pub output_length_mismatches: u64,
    /// Planned token lengths against what the server reported for them.
    #[serde(default)]
    pub lengths: LengthCheck,
    /// The requests' images (`[workload.images]`): sizes, bytes, upload, image tokens and
    /// the encoder cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<images::ImagesResult>,
    /// A tool dataset's calls as graded per request: correct and wrong by verdict, by phase,
    /// and on time but wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<tools::ToolsResult>,
    /// Speculative decoding's acceptance: per request where the engine states it, else over
    /// the window; with the TPOT of the less and the more accepted requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<speculative::SpeculativeResult>,
    pub slo: Option<SloResult>,
    /// For each SLO metric (TTFT, TPOT and E2E without an SLO), the strongest percentile
    /// claim the steady sample supports at the contract's confidence, and what the SLO's
    /// percentile still needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<claims::Claim>,
    /// How many requests each reported percentile rests on, and how many it needs.
    pub support: Vec<Support>,
    /// Multi-turn sessions (`[workload.sessions]`): per turn, and session goodput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<sessions::SessionSummary>,
    /// Agent tasks (`[workload.task]`): task latency, goodput, critical paths, per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<tasks::TaskSummary>,
    /// The engine's spans of the steady requests (`[measurement.traces]`): joined by trace id,
    /// each latency's tail split into dispatch, client/network, queue, prefill and decode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans: Option<spans::ServerSpans>,
    /// Each of several replicas (`target.urls`): its share, latencies and attainment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<replicas::ReplicaResult>>,
    /// A trace's prefix structure (Mooncake `hash_ids`) against the cache hits the server
    /// reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_reuse: Option<PrefixReuse>,
}

/// Expected against reported prefix-cache hits, over the successful steady requests of a
/// trace that carries its prefix structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefixReuse {
    /// Where the expectation comes from: `trace hash_ids`, or `task contexts` (each call's
    /// reusable history).
    #[serde(default = "trace_hash_ids")]
    pub source: String,
    /// Tokens per block of the trace's `hash_ids` (tasks: the server's cache block).
    pub block_tokens: u32,
    /// Requests with an expected share; of them, those the server reported cached tokens for.
    pub requests: u64,
    pub reported: u64,
    /// Reported within one block of the expected share.
    pub within_one_block: u64,
    pub expected_mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_mean: Option<f64>,
}

fn trace_hash_ids() -> String {
    "trace hash_ids".to_owned()
}

fn prefix_reuse(c: &Contract, ok: &[&&Record]) -> Option<PrefixReuse> {
    let with: Vec<&&&Record> = ok
        .iter()
        .filter(|r| r.expected_cached_tokens.is_some())
        .collect();
    if with.is_empty() {
        return None;
    }
    let (source, block) = match &c.workload.task {
        Some(t) => ("task contexts", t.block_tokens()),
        None => ("trace hash_ids", c.load.block_tokens()),
    };
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let pairs: Vec<(u32, u32)> = with
        .iter()
        .filter_map(|r| Some((r.expected_cached_tokens?, r.usage_cached_tokens?)))
        .collect();
    Some(PrefixReuse {
        source: source.to_owned(),
        block_tokens: block,
        requests: with.len() as u64,
        reported: pairs.len() as u64,
        within_one_block: pairs
            .iter()
            .filter(|(e, k)| e.abs_diff(*k) <= block)
            .count() as u64,
        expected_mean: mean(
            with.iter()
                .filter_map(|r| r.expected_cached_tokens.map(f64::from))
                .collect(),
        )
        .unwrap_or(0.0),
        cached_mean: mean(pairs.iter().map(|(_, k)| f64::from(*k)).collect()),
    })
}

/// How the successful steady requests' output tokens were counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputCount {
    /// Requests whose output tokens are the server's `usage`.
    pub usage: u64,
    /// Requests whose output tokens are the client's count, by how it was counted: `chunks`
    /// or `words` as the stream arrived, or recounted after the run by the workload's
    /// `tokenizer` file or the target's `/tokenize` (`server`).
    pub client: BTreeMap<String, u64>,
    /// Requests whose split of tokens among chunks (TPOT's first chunk, ITL per token) and,
    /// without usage, whose count are approximate: the client's count was not the model's
    /// tokens and neither a tokenizer file nor `/tokenize` could recount it, so it was
    /// recounted as words.
    pub approximate: u64,
    /// The server's `usage` against the client's own count, over the requests that have both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared: Option<CountComparison>,
}

/// The server's and the client's output counts, side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CountComparison {
    /// How the client counted (`chunks`, `words`, `tokenizer`, `server`; the most common).
    pub client: String,
    pub requests: u64,
    /// Requests whose two counts differ.
    pub differing: u64,
    pub usage_tokens: u64,
    pub client_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Throughput {
    /// Offered requests/s (open loop).
    pub offered_rps: Option<f64>,
    /// Completed requests/s.
    pub achieved_rps: Option<f64>,
    pub input_tokens_per_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SloResult {
    /// Percentile the thresholds are judged at.
    pub percentile: f64,
    /// Where the run stands against the SLO and how strongly its sample says so
    /// (`analyze::claims`): `met` (supported at `confidence`), `met_indicated` (met at the
    /// point estimates, too few requests to support it), `missed` (conclusive), or
    /// `missed_indicated`. Every metric and attainment must be met.
    pub verdict: SloVerdict,
    /// The one-sided confidence the verdict is judged at (`measurement.confidence`).
    pub confidence: f64,
    /// Requests a supported pass needs with the misses seen (the most any part needs; absent
    /// when the SLO is already supported or conclusively missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<u64>,
    pub per_metric: Vec<SloMetric>,
    /// Steady requests that met every threshold (failures never do).
    pub met: u64,
    /// Steady requests attainment is computed over: all of them but those the user cancelled.
    #[serde(default)]
    pub counted: u64,
    /// Steady requests in flight when the run was stopped (a signal, or giving up): neither met nor missed.
    #[serde(default)]
    pub cancelled: u64,
    /// met / counted.
    pub attainment: f64,
    /// The contract's attainment target.
    pub attainment_target: f64,
    /// Attainment against its target, judged as a metric is.
    pub attainment_verdict: SloVerdict,
    /// One-sided confidence bounds of the true attainment (Clopper–Pearson, at `confidence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment_bounds: Option<[f64; 2]>,
    /// Requests per second that met every threshold.
    pub goodput_rps: Option<f64>,
    /// The run meets the SLO: every per-metric percentile within its threshold *and*
    /// attainment at its target ([`SloResult::meets`], the one definition every command uses).
    pub pass: bool,
}

impl SloResult {
    /// The one definition of "this run meets the SLO", used by the headline, `--predict`,
    /// `compare` and the capacity search: each metric's value at the SLO percentile is within
    /// its threshold, and the share of steady requests that met every threshold reaches the
    /// attainment target. (A *request* meets the SLO when each of its own metrics is within its
    /// threshold; goodput counts those.)
    pub fn meets(per_metric: &[SloMetric], attainment: f64, target: f64) -> bool {
        per_metric.iter().all(|m| m.pass) && attainment >= target
    }

    /// Sets the result's verdict, `pass` and `needs` from its parts (every metric's verdict
    /// and attainment's): all must hold. `attainment_needs`: requests a supported attainment
    /// needs with the misses seen.
    pub fn judged(mut self, attainment_needs: u64) -> SloResult {
        self.verdict = SloVerdict::all(
            self.per_metric
                .iter()
                .map(|m| m.verdict)
                .chain([self.attainment_verdict]),
        )
        .unwrap_or(SloVerdict::MetIndicated);
        self.pass = SloResult::meets(&self.per_metric, self.attainment, self.attainment_target);
        self.needs = (self.verdict == SloVerdict::MetIndicated)
            .then(|| {
                self.per_metric
                    .iter()
                    .filter(|m| m.verdict == SloVerdict::MetIndicated)
                    .map(|m| m.needed)
                    .chain(
                        (self.attainment_verdict == SloVerdict::MetIndicated)
                            .then_some(attainment_needs),
                    )
                    .max()
            })
            .flatten();
        self
    }

    /// Why a pass is not yet supported, in words: "p99 TTFT needs 459 requests, has 200".
    pub fn not_yet(&self) -> Option<String> {
        if self.verdict != SloVerdict::MetIndicated {
            return None;
        }
        let open: Vec<&SloMetric> = self
            .per_metric
            .iter()
            .filter(|m| m.verdict == SloVerdict::MetIndicated)
            .collect();
        // Every metric needing the same on the same sample is said once.
        let same = open
            .windows(2)
            .all(|w| (w[0].needed, w[0].requests) == (w[1].needed, w[1].requests));
        let none = crate::stats::min_requests_for(self.percentile, 0, self.confidence);
        let words = |m: &SloMetric| claims::needs_words(m.needed, m.misses, none, m.requests);
        let mut parts: Vec<String> = if same && open.len() > 1 {
            vec![format!(
                "{} {}",
                claims::pname(self.percentile),
                words(open[0])
            )]
        } else {
            open.iter()
                .map(|m| {
                    format!(
                        "{} {} {}",
                        m.metric.to_uppercase(),
                        claims::pname(self.percentile),
                        words(m)
                    )
                })
                .collect()
        };
        // Attainment's need, when it is what binds (a target above the percentile's share).
        let attainment_needs = crate::stats::min_requests_for_share(
            self.attainment_target,
            self.counted - self.met.min(self.counted),
            self.confidence,
        );
        if self.attainment_verdict == SloVerdict::MetIndicated
            && open.iter().all(|m| m.needed < attainment_needs)
        {
            let misses = self.counted - self.met.min(self.counted);
            parts.push(format!(
                "attainment {:.0}% {}",
                self.attainment_target * 100.0,
                claims::needs_words(
                    attainment_needs,
                    misses,
                    crate::stats::min_requests_for_share(
                        self.attainment_target,
                        0,
                        self.confidence
                    ),
                    self.counted
                )
            ));
        }
        Some(parts.join("; "))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SloMetric {
    pub metric: String,
    pub threshold_ms: f64,
    /// The metric at the SLO percentile over `requests`, failures counted as misses
    /// (`claims::sample`); absent when the percentile falls on a failed request.
    pub value_ms: Option<f64>,
    /// Met at the point estimate (`verdict` says how strongly).
    pub pass: bool,
    pub verdict: SloVerdict,
    /// Requests the metric is judged on, and of them those over the threshold or failed.
    pub requests: u64,
    pub misses: u64,
    /// One-sided confidence bounds of the percentile (order statistics at the SLO's
    /// confidence): the true value is at most `upper_ms` and at least `lower_ms`. Absent when
    /// the sample is too small for one or it falls on a failed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_ms: Option<f64>,
    /// Requests a supported pass needs with this many misses (MLPerf early stopping).
    pub needed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Support {
    pub percentile: String,
    /// Successful steady requests it is computed from.
    pub requests: u64,
    /// Requests needed with no SLO miss at the contract's confidence (MLPerf early stopping).
    pub needed: u64,
}

fn phase_stats(c: &Contract, records: &[&Record]) -> PhaseStats {
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    // Room for every value at once: a million-request phase's lists grown a doubling at a time
    // held half as much again while each moved (docs/guide/performance.md, big bundles).
    // The dispatcher's figures (lag, wake, queue: every arrival's, whatever became of it) in a
    // pass of their own, before the others: three lists alive at once rather than eight.
    let mut lags: [Vec<f64>; 3] = std::array::from_fn(|_| Vec::with_capacity(records.len()));
    for r in records {
        for (v, l) in lags.iter_mut().zip(dispatch_lag(r)) {
            v.extend(l);
        }
    }
    let [lag, wake, queue] = lags.map(Dist::of);
    let n_ok = records.iter().filter(|r| r.is_ok()).count();
    let mut v: [Vec<f64>; 5] = std::array::from_fn(|_| Vec::with_capacity(n_ok));
    let mut itl = Itl::default();
    // TTFO, TPOT of the answer, reasoning tokens: only when some request reasoned.
    let reasoned = records.iter().any(|r| r.is_ok() && reasons(r));
    let mut rv: [Vec<f64>; 3] =
        std::array::from_fn(|_| Vec::with_capacity(if reasoned { n_ok } else { 0 }));
    let mut ok = 0;
    for r in records {
        if !r.is_ok() {
            // A request that failed after its first token still measured its TTFT: leaving it
            // out would take the slowest requests out of the very tail a reader looks at (the
            // user's own cancellations aside, which measured nothing of the server).
            if r.outcome != Outcome::Interrupted
                && let Some(t) = request_metrics(r, origin, source).ttft_ms()
            {
                v[0].push(t);
            }
            continue;
        }
        ok += 1;
        let m = request_metrics(r, origin, source);
        v[0].extend(m.ttft_ms());
        v[1].extend(m.tpot_ms());
        itl.add(r);
        v[2].extend(m.e2e_ms());
        v[3].push(f64::from(m.input_tokens));
        v[4].push(f64::from(m.output_tokens));
        if reasoned {
            rv[0].extend(m.ttfo_ms());
            rv[1].extend(m.tpot_answer_ms());
            rv[2].push(f64::from(m.reasoning_tokens.unwrap_or(0)));
        }
    }
    let [ttfo, tpot_answer, reasoning] = rv.map(|x| if reasoned { Dist::of(x) } else { None });
    let [ttft, tpot, e2e, input, output] = v;
    PhaseStats {
        requests: records.len() as u64,
        ok,
        failed: records.len() as u64 - ok,
        planned: None,
        not_sent: None,
        ttft_ms: Dist::of(ttft),
        tpot_ms: Dist::of(tpot),
        itl_ms: itl.per_chunk().dist(),
        itl_token_ms: itl.per_token().dist(),
        e2e_ms: Dist::of(e2e),
        ttfo_ms: ttfo,
        tpot_answer_ms: tpot_answer,
        reasoning_tokens: reasoning,
        dispatch_lag_ms: lag,
        dispatch_wake_ms: wake,
        dispatch_queue_ms: queue,
        input_tokens: Dist::of(input),
        // An API that generates nothing (embeddings) has no output lengths to show.
        output_tokens: Dist::of(output).filter(|_| c.target.api.capabilities().generates),
    }
}

/// Ratio of server-reported to client-counted output tokens over successful requests (1 when
/// counting by the client, or when the server reported none), to express chunk-timed token
/// counts in the contract's token source.
pub(crate) fn usage_scale(ok: &[&&Record], source: TokenSource) -> f64 {
    if source == TokenSource::Client {
        return 1.0;
    }
    let (mut usage, mut client) = (0u64, 0u64);
    for r in ok {
        if let Some(u) = r.usage_completion_tokens {
            usage += u64::from(u);
            client += u64::from(r.client_output_tokens);
        }
    }
    if usage == 0 || client == 0 {
        1.0
    } else {
        usage as f64 / client as f64
    }
}

/// (n − 1) / (max − min) of a set of times in µs: an edge-free rate.
fn rate(times: impl Iterator<Item = u64>) -> Option<f64> {
    let (mut n, mut lo, mut hi) = (0u64, u64::MAX, 0u64);
    for t in times {
        n += 1;
        lo = lo.min(t);
        hi = hi.max(t);
    }
    (n >= 2 && hi > lo).then(|| (n - 1) as f64 / ((hi - lo) as f64 / 1e6))
}

/// What a summary reads besides the contract and the records, all of it kept in (or beside)
/// the bundle.
#[derive(Debug, Default, Clone, Copy)]
pub struct Context<'a> {
    /// What the contract's files held (tokenizer, references); `None`: nothing beyond the
    /// built-in tokenizer.
    pub workload: Option<&'a crate::workload::Inputs>,
    /// The run was interrupted before its stop condition.
    pub interrupted: bool,
    /// Why it stopped before its plan's end: the signal, or the reason it gave up.
    pub stopped: Option<&'a str>,
    /// The run stopped itself once its verdict was decided (`measurement.stop_when_decided`):
    /// why (`command.json` `decided`).
    pub decided: Option<&'a str>,
    /// How the load ended beyond its plan (`command.json` `load_end`).
    pub load_end: Option<&'a crate::driver::guard::LoadEnd>,
    /// Records of finished requests a failed write could not put in `requests.jsonl`
    /// (`command.json` `lost_records`): the ones lost are not "not sent".
    pub lost: Option<&'a crate::record::writer::Lost>,
    /// The launch timeline of a cold-start test (`cold_start.json`).
    pub timeline: Option<&'a Timeline>,
    /// The target's facts, discovered and declared (`environment.json`). `None`: the declared
    /// facts alone.
    pub facts: Option<&'a Facts>,
    /// The target's `/metrics` scrapes (`metrics.jsonl`).
    pub scrapes: &'a [crate::env::prom::Scrape],
    /// The accelerators' telemetry scrapes (`telemetry.jsonl`).
    pub telemetry: &'a [crate::env::prom::Scrape],
    /// The telemetry pages the run could not read (`environment.json` `telemetry`).
    pub telemetry_pages: &'a [efficiency::PageStatus],
    /// The shards a merged run was sent by (`environment.json` `shards`); empty otherwise.
    pub shards: &'a [shards::ShardFacts],
    /// The load segments of a live demo (`environment.json` `live.segments`); empty otherwise.
    pub segments: &'a [crate::record::SegmentFacts],
    /// The engine's spans of the run's requests (`spans.jsonl`), and what the receiver saw
    /// (`environment.json` `traces`).
    pub spans: &'a [crate::otlp::SpanRecord],
    pub traces: Option<&'a crate::otlp::receiver::TracesStatus>,
}

/// Computes the summary of a run from its records and what else the bundle keeps.
pub fn summarize(c: &Contract, records: &[Record], context: &Context) -> Summary {
    let cx = *context;
    let (interrupted, stopped, decided) = (cx.interrupted, cx.stopped, cx.decided);
    let (scrapes, telemetry) = (cx.scrapes, cx.telemetry);
    let none = crate::workload::Inputs::default();
    let workload = cx.workload.unwrap_or(&none);
    let origin = c.measurement.latency_origin;
    let source = c.measurement.output_tokens;
    let mut by_phase = ByPhase::new(c, records, workload);
    by_phase.lost = cx.lost.map(|l| l.lost_by_phase.clone()).unwrap_or_default();
    let steady_recs: &[&Record] = by_phase.of(Phase::Steady);
    // The phases' distributions (a pass over every chunk) on a second core while this one
    // derives the rest, when there are enough records for it to matter.
    std::thread::scope(|s| {
        let phases_job = (records.len() >= 50_000).then(|| s.spawn(|| by_phase.stats()));

        let window = steady_window(steady_recs, origin);
        let window_s = window.map_or(0.0, |(a, b)| (b - a) as f64 / 1e6);
        let ok: Vec<&&Record> = steady_recs.iter().filter(|r| r.is_ok()).collect();
        let throughput = throughput(c, records, steady_recs, &ok, window);
        let (offered, achieved) = (throughput.offered_rps, throughput.achieved_rps);

        let (errors, first_errors) = steady_errors(steady_recs);
        let steady_metrics = steady_request_metrics(steady_recs, origin, source);
        let metrics = ok_metrics(steady_recs, &steady_metrics);
        let output_token_source = output_token_source(&metrics);
        let output_count = output_count(c, &ok, &metrics);
        let output_length_mismatches = output_length_mismatches(c, &ok, &metrics);
        let lengths = first_turn_lengths(c, workload, steady_recs, &ok);
        let server = window.and_then(|w| server_window(scrapes, records, w));
        let (images, tools, speculative) =
            carried(c, records, (steady_recs, &steady_metrics), server.as_ref());
        let (classes, slo) = judged(c, steady_recs, &steady_metrics, achieved);
        let claims = steady_claims(c, steady_recs, &steady_metrics);

        let phases = match phases_job {
            Some(job) => job.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => by_phase.stats(),
        };
        let stats = match phases.get(Phase::Steady.as_str()) {
            Some(st) => st.clone(),
            None => by_phase.account(&Phase::Steady, phase_stats(c, steady_recs)),
        };
        let support = support(c, &stats);

        let beyond = Beyond::of(c, &cx, records);
        let validity = run_validity(
            c,
            &ValidityInputs {
                records,
                steady: steady_recs,
                warmup: by_phase.of(Phase::Warmup),
                drain: by_phase.of(Phase::Drain),
                stats: &stats,
                window,
                offered,
                achieved,
                errors: &errors,
                interrupted,
                stopped,
                decided,
                guard: cx.load_end.and_then(|l| l.guard.as_ref()),
            },
            &beyond,
        );
        // The target's facts; without environment.json, the declared ones alone.
        let facts = cx.facts.map_or_else(
            || std::borrow::Cow::Owned(Facts::resolve(&c.target.declared, &[])),
            std::borrow::Cow::Borrowed,
        );
        let grade = grade(c, records, &facts);
        let mut notes = notes(
            c,
            &phases,
            &output_count,
            &lengths,
            steady_recs,
            &metrics,
            output_length_mismatches,
        );
        notes.extend(beyond.shards.iter().flat_map(shards::ShardsResult::notes));

        let goodput = slo.as_ref().and_then(|s| s.goodput_rps);
        let steady = (steady_recs, &ok[..], &metrics[..]);
        let efficiency = window_efficiency(c, &cx, (window, records), steady, goodput);
        let cold_start = cold_start_result(c, &by_phase.records, cx.timeline);
        let warmup = warmup_result(c, &by_phase.records, steady_recs);

        Summary {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            contract: c.name.clone(),
            load: describe_load(c, beyond.shards.as_ref()),
            load_model: c.load.kind(),
            latency_origin: origin,
            fingerprints: c.fingerprints(),
            grade,
            validity,
            notes,
            interrupted,
            stopped: stopped.map(str::to_owned),
            decided: decided.map(str::to_owned),
            load_end: cx.load_end.cloned(),
            lost_records: cx.lost.cloned(),
            cold_start,
            warmup,
            phases,
            precision: precision::summarize(c, steady_recs, slo.as_ref()),
            steady: Steady {
                stats,
                window_s,
                throughput,
                output_token_source,
                output_count,
                lengths,
                images,
                tools,
                speculative,
                errors,
                first_errors,
                output_length_mismatches,
                slo,
                claims,
                support,
                sessions: sessions::summarize(c, steady_recs, window_s),
                tasks: tasks::summarize(c, steady_recs, window_s),
                spans: spans::summarize(c, steady_recs, cx.spans, cx.traces, facts.get("engine")),
                replicas: replicas::summarize(c, steady_recs),
                prefix_reuse: prefix_reuse(c, &ok),
            },
            predictions: None,
            quality: quality_of(c, workload, records),
            server,
            efficiency,
            target: Some(target_identity(c, &facts)),
            shards: beyond.shards,
            segments: beyond.segments,
            steady_state: beyond.steady_state,
            edge: beyond.edge,
            stages: beyond.stages,
            classes,
            warnings: warnings(c, records, workload, &ok, (scrapes, telemetry)),
        }
    })
}

/// The classes' results and the SLO's: with classes, each is judged by its own SLO and the
/// totals add them up.
fn judged(
    c: &Contract,
    steady: &[&Record],
    metrics: &[RequestMetrics],
    achieved: Option<f64>,
) -> (Option<Vec<classes::ClassResult>>, Option<SloResult>) {
    let classes = classes::summarize(c, steady, achieved);
    let slo = match &classes {
        Some(k) => classes::totals(k, c.slo.percentile),
        None => c
            .slo
            .is_set()
            .then(|| slo_result(c, steady, metrics, achieved)),
    };
    (classes, slo)
}

/// The server's own figures over the steady window `(from, to)` in µs.
fn server_window(
    scrapes: &[crate::env::prom::Scrape],
    records: &[Record],
    (from, to): (u64, u64),
) -> Option<server::ServerSide> {
    let finished: Vec<u64> = records.iter().filter_map(|r| r.end_us).collect();
    server::derive(scrapes, from as f64 / 1e6, to as f64 / 1e6, &finished)
}

/// Output quality beside the speed figures, by the contract's `[quality]`.
fn quality_of(
    c: &Contract,
    workload: &crate::workload::Inputs,
    records: &[Record],
) -> Option<quality::QualityResult> {
    quality::summarize(
        c.quality.mode,
        c.quality.scoring,
        &workload.references,
        records,
    )
}

/// What the steady answers carried besides their text: images (sent), tool calls (graded),
/// speculative drafts (accepted).
fn carried(
    c: &Contract,
    records: &[Record],
    (steady, metrics): (&[&Record], &[RequestMetrics]),
    server: Option<&server::ServerSide>,
) -> (
    Option<images::ImagesResult>,
    Option<tools::ToolsResult>,
    Option<speculative::SpeculativeResult>,
) {
    (
        images::summarize(c, records, steady, server),
        tools::summarize(c, records, steady, metrics),
        speculative::summarize(steady, metrics, server),
    )
}

/// Every steady request's metrics (a failed one's TTFT counts in the SLO's figures).
fn steady_request_metrics(
    steady: &[&Record],
    origin: LatencyOrigin,
    source: TokenSource,
) -> Vec<RequestMetrics> {
    steady
        .iter()
        .map(|r| request_metrics(r, origin, source))
        .collect()
}

/// The successful ones among them, in the order of the successful records (borrowed: a copy
/// was 120 MB of a million-request report).
fn ok_metrics<'m>(steady: &[&Record], all: &'m [RequestMetrics]) -> Vec<&'m RequestMetrics> {
    steady
        .iter()
        .zip(all)
        .filter(|(r, _)| r.is_ok())
        .map(|(_, m)| m)
        .collect()
}

/// A run's records by phase, with what the plan meant each phase to send.
struct ByPhase<'a> {
    c: &'a Contract,
    records: BTreeMap<Phase, Vec<&'a Record>>,
    planned: BTreeMap<Phase, u64>,
    /// Records lost to a failed write, by phase name: sent, so not "not sent".
    lost: BTreeMap<String, u64>,
}

impl<'a> ByPhase<'a> {
    fn new(c: &'a Contract, records: &'a [Record], workload: &crate::workload::Inputs) -> Self {
        let mut by_phase: BTreeMap<Phase, Vec<&Record>> = BTreeMap::new();
        for r in records {
            by_phase.entry(r.phase).or_default().push(r);
        }
        ByPhase {
            c,
            records: by_phase,
            planned: crate::plan::Plan::new(c, workload).planned_by_phase(),
            lost: BTreeMap::new(),
        }
    }

    fn of(&self, p: Phase) -> &[&'a Record] {
        self.records.get(&p).map_or(&[][..], Vec::as_slice)
    }

    /// A phase's figures with its planned and not-sent counts (requests sent whose records
    /// were lost were sent: they are not "not sent").
    fn account(&self, p: &Phase, mut st: PhaseStats) -> PhaseStats {
        if let Some(&n) = self.planned.get(p) {
            let lost = self.lost.get(p.as_str()).copied().unwrap_or(0);
            st.planned = Some(n);
            st.not_sent = Some(n.saturating_sub(st.requests + lost));
        }
        st
    }

    /// Every phase's figures; a planned phase the run never reached is all not sent.
    fn stats(&self) -> BTreeMap<String, PhaseStats> {
        let mut phases: BTreeMap<String, PhaseStats> = self
            .records
            .iter()
            .map(|(p, rs)| {
                (
                    p.as_str().to_owned(),
                    self.account(p, phase_stats(self.c, rs)),
                )
            })
            .collect();
        for (p, &n) in &self.planned {
            if n > 0 && !self.records.contains_key(p) {
                phases.insert(
                    p.as_str().to_owned(),
                    self.account(p, phase_stats(self.c, &[])),
                );
            }
        }
        phases
    }
}

/// What a run's summary holds beyond its steady phase's figures, each of which can make the
/// whole run INVALID: its shards' clocks, its load's live segments or program stages, and where
/// its steady state began.
struct Beyond {
    shards: Option<shards::ShardsResult>,
    segments: Option<Vec<segments::SegmentResult>>,
    stages: Option<Vec<stages::StageResult>>,
    edge: Option<edge::EdgeResult>,
    steady_state: Option<steadiness::SteadyState>,
}

impl Beyond {
    fn of(c: &Contract, cx: &Context, records: &[Record]) -> Beyond {
        let stages = stages::summarize(c, records);
        Beyond {
            shards: shards::summarize(cx.shards, records),
            segments: segments::summarize(c, cx.segments, records),
            edge: stages.as_deref().and_then(|st| edge::edge_result(c, st)),
            stages,
            steady_state: steadiness::detect(c, records),
        }
    }
}

/// The run's validity: the measurement's own, then what its steady-state test, its shards'
/// clocks, its load's segments and its program's stages add.
fn run_validity(c: &Contract, inputs: &ValidityInputs, beyond: &Beyond) -> Validity {
    let (shards, segments) = (beyond.shards.as_ref(), beyond.segments.as_deref());
    let (stages, steady_state) = (beyond.stages.as_deref(), beyond.steady_state.as_ref());
    let mut validity = validity(c, inputs);
    // Overload already says why there is no steady state; otherwise the test's finding does.
    if let Some(why) = steady_state.and_then(|s| s.invalid_reason())
        && validity.overload.is_none()
        && inputs.decided.is_none()
    {
        validity.reasons.push(why);
        validity.verdict = ValidityVerdict::Invalid;
    }
    if let Some(why) = shards.and_then(shards::ShardsResult::invalid_reason) {
        validity.reasons.push(why);
        validity.verdict = ValidityVerdict::Invalid;
    }
    // A load changed while it ran is the first thing to know of its figures.
    if let Some(why) = segments.and_then(segments::invalid_reason) {
        validity.reasons.insert(0, why);
        validity.verdict = ValidityVerdict::Invalid;
    }
    if let Some(why) = stages.and_then(stages::invalid_reason) {
        validity.reasons.insert(0, why);
        validity.verdict = ValidityVerdict::Invalid;
    }
    validity
}

/// Findings every reader must see before the numbers.
fn warnings(
    c: &Contract,
    records: &[Record],
    workload: &crate::workload::Inputs,
    ok: &[&&Record],
    (scrapes, telemetry): (&[crate::env::prom::Scrape], &[crate::env::prom::Scrape]),
) -> Vec<String> {
    model_warning(c, records)
        .into_iter()
        .chain(cold_cache_warning(c, workload, ok))
        .chain(shared_cache_warning(c, ok))
        .chain(crate::env::prom::thinning_warning("metrics.jsonl", scrapes))
        .chain(crate::env::prom::thinning_warning("telemetry.jsonl", telemetry))
        .chain(c.target.tls.insecure.then(|| {
            "the target's TLS certificate was NOT verified (target.tls.insecure = true): anything between this client and the server could have answered; do not publish these numbers as that server's".to_owned()
        }))
        .collect()
}

/// Each error class's count among the steady requests, and its first message (an
/// interruption's says nothing the summary's `stopped` does not).
fn steady_errors(steady: &[&Record]) -> (BTreeMap<String, u64>, BTreeMap<String, String>) {
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_errors: BTreeMap<String, String> = BTreeMap::new();
    for r in steady.iter().filter(|r| r.outcome != Outcome::Ok) {
        let class = r.outcome.as_str();
        *errors.entry(class.to_owned()).or_default() += 1;
        if let Some(e) = r
            .error
            .as_ref()
            .filter(|_| r.outcome != Outcome::Interrupted)
            && !first_errors.contains_key(class)
        {
            first_errors.insert(class.to_owned(), e.chars().take(300).collect());
        }
    }
    (errors, first_errors)
}

/// Where the successful requests' output counts came from: the server's usage, the client's
/// count, or both.
fn output_token_source(metrics: &[&RequestMetrics]) -> String {
    let from_usage = metrics.iter().filter(|m| m.output_from_usage).count();
    match (from_usage, metrics.len() - from_usage) {
        (_, 0) if from_usage > 0 => "usage".to_owned(),
        (0, _) => "client".to_owned(),
        (u, k) => format!("mixed: usage for {u}, client for {k}"),
    }
}

/// Successful requests whose output length differs from the plan although it was enforced
/// (a count the client could only approximate says nothing about the server's length).
fn output_length_mismatches(c: &Contract, ok: &[&&Record], metrics: &[&RequestMetrics]) -> u64 {
    if !c.workload.enforce_output_length {
        return 0;
    }
    ok.iter()
        .zip(metrics)
        .filter(|(r, m)| {
            m.output_tokens != r.output_tokens_planned
                && (m.output_from_usage || r.counted != Some(Counted::Words))
        })
        .count() as u64
}

/// The length check on first turns: a session's later turns carry its history, so their
/// lengths are the conversation's, not the distribution's.
fn first_turn_lengths(
    c: &Contract,
    workload: &crate::workload::Inputs,
    steady: &[&Record],
    ok: &[&&Record],
) -> LengthCheck {
    let steady_first: Vec<&Record> = steady
        .iter()
        .copied()
        .filter(|r| r.is_first_turn())
        .collect();
    let ok_first: Vec<&&Record> = ok.iter().copied().filter(|r| r.is_first_turn()).collect();
    length_check(c, workload, &steady_first, &ok_first)
}

/// Efficiency over the steady window `w`: each successful steady request judged once, the
/// median TPOT of those that met their SLO (all, without one) per user, and their share of the
/// steady output.
/// Energy and cost over the steady window `(a, b)` (µs), of every record finished in it;
/// `None` without a window.
fn window_efficiency(
    c: &Contract,
    cx: &Context,
    (window, records): (Option<(u64, u64)>, &[Record]),
    steady: (&[&Record], &[&&Record], &[&RequestMetrics]),
    goodput_rps: Option<f64>,
) -> Option<efficiency::Efficiency> {
    let (a, b) = window?;
    let w = efficiency::Window {
        from_s: a as f64 / 1e6,
        to_s: b as f64 / 1e6,
        window_s: (b - a) as f64 / 1e6,
        records,
        usage_scale: usage_scale(steady.1, c.measurement.output_tokens),
        goodput_rps,
        tpot_p50_ms: None,
        slo_share: None,
    };
    Some(steady_efficiency(
        c,
        w,
        steady,
        cx.telemetry,
        cx.telemetry_pages,
    ))
}

fn steady_efficiency(
    c: &Contract,
    mut w: efficiency::Window<'_>,
    (steady, ok, metrics): (&[&Record], &[&&Record], &[&RequestMetrics]),
    telemetry: &[crate::env::prom::Scrape],
    pages: &[efficiency::PageStatus],
) -> efficiency::Efficiency {
    let has_slo = c.has_slo();
    let meets: Vec<bool> = ok
        .iter()
        .zip(metrics)
        .map(|(r, m)| has_slo && record_meets_slo(c, r, m))
        .collect();
    let mut tpots: Vec<f64> = metrics
        .iter()
        .zip(&meets)
        .filter(|(_, met)| !has_slo || **met)
        .filter_map(|(m, _)| m.tpot_ms())
        .collect();
    tpots.sort_unstable_by(f64::total_cmp);
    let tokens = |r: &&Record| u64::from(r.chunks.tokens());
    let all: u64 = steady.iter().map(tokens).sum();
    let met: u64 = ok
        .iter()
        .zip(&meets)
        .filter(|(_, m)| **m)
        .map(|(r, _)| tokens(r))
        .sum();
    w.tpot_p50_ms = percentile_sorted(&tpots, 50.0);
    w.slo_share = has_slo.then(|| match all {
        0 => 0.0,
        n => met as f64 / n as f64,
    });
    efficiency::derive(c, &w, telemetry, pages)
}

/// The load in words; with sessions, its arrivals are sessions; with shards, it says how
/// many sent it.
fn describe_load(c: &Contract, shards: Option<&shards::ShardsResult>) -> String {
    let load = describe_arrivals(c);
    match shards {
        Some(sh) => format!("{load}, sent by {} shards", sh.count),
        None => load,
    }
}

fn describe_arrivals(c: &Contract) -> String {
    let load = c.load.describe();
    if c.workload.task.is_some() {
        return format!("{}, each an agent task", load.replace(" req/s", " tasks/s"));
    }
    match &c.workload.sessions {
        None => load,
        Some(s) => {
            let turns = match &s.turns {
                crate::contract::LengthDist::Fixed { value } => value.to_string(),
                crate::contract::LengthDist::Uniform { min, max } => format!("{min}–{max}"),
                _ => "drawn".to_owned(),
            };
            format!(
                "{}, each a session of {turns} turns",
                load.replace(" req/s", " sessions/s")
            )
        }
    }
}

/// The steady window, µs on the run's clock: from the first steady request's origin to the
/// last one's; `None` with fewer than two distinct origins.
fn steady_window(steady: &[&Record], origin: LatencyOrigin) -> Option<(u64, u64)> {
    let origins: Vec<u64> = steady.iter().filter_map(|r| origin_us(r, origin)).collect();
    origins
        .iter()
        .min()
        .copied()
        .zip(origins.iter().max().copied())
        .filter(|(a, b)| b > a)
}

/// Offered and achieved rates and token throughput over the steady window: what finished,
/// and what streamed, inside it (from any phase).
fn throughput(
    c: &Contract,
    records: &[Record],
    steady: &[&Record],
    ok: &[&&Record],
    window: Option<(u64, u64)>,
) -> Throughput {
    let window_s = window.map_or(0.0, |(a, b)| (b - a) as f64 / 1e6);
    let inside = |t: u64| window.is_some_and(|(a, b)| t >= a && t <= b);
    let interleaved = c.workload.sessions.is_some() || c.workload.task.is_some();
    let offered = match (c.load.is_open(), interleaved) {
        (false, _) => None,
        (true, false) => rate(steady.iter().filter_map(|r| r.intended_us)),
        // Sessions interleave: warm-up sessions' later turns fall inside the steady window as
        // the steady sessions' do, and are offered to the server there as they are.
        (true, true) => rate(
            records
                .iter()
                .filter_map(|r| r.intended_us.filter(|&t| inside(t))),
        ),
    };
    let per_s = |x: f64| window.map(|_| x / window_s);
    let completions = records
        .iter()
        .filter(|r| r.is_ok() && r.end_us.is_some_and(inside))
        .count();
    let (input_tokens, output_tokens) = window_tokens(records.iter(), inside);
    Throughput {
        offered_rps: offered,
        achieved_rps: per_s(completions as f64),
        input_tokens_per_s: per_s(input_tokens as f64),
        // Chunk token counts are the client's; scale to the server's usage when it reported one.
        output_tokens_per_s: per_s(
            output_tokens as f64 * usage_scale(ok, c.measurement.output_tokens),
        ),
    }
}

/// Tokens read and emitted inside the window by `records`: input, counted when its request's
/// first token (or, unstreamed, its end) falls inside; output, by each chunk's arrival time,
/// or (an answer not streamed, which has no chunks) all at its end.
pub(crate) fn window_tokens<'r>(
    records: impl Iterator<Item = &'r Record>,
    inside: impl Fn(u64) -> bool,
) -> (u64, u64) {
    let (mut input, mut output) = (0u64, 0u64);
    for r in records {
        output += match (r.chunks.first(), r.chunks.last()) {
            (None, _) if r.is_ok() && r.end_us.is_some_and(&inside) => {
                u64::from(r.client_output_tokens)
            }
            // Arrivals in order: every chunk is inside when the first and last are.
            (Some(a), Some(b)) if r.chunks.in_order() && inside(a.0) && inside(b.0) => {
                u64::from(r.chunks.tokens())
            }
            _ => r
                .chunks
                .iter()
                .filter(|c| inside(c.0))
                .map(|c| u64::from(c.1))
                .sum(),
        };
        // A prompt is read by its first token; an answer that is not streamed has only its end.
        if r.first_token_us
            .or(r.end_us.filter(|_| r.is_ok()))
            .is_some_and(&inside)
        {
            input += u64::from(r.usage_prompt_tokens.unwrap_or(r.input_tokens_planned));
        }
    }
    (input, output)
}

/// How one metric is read from a request's metrics.
type Pick = fn(&RequestMetrics) -> Option<f64>;

/// The SLO's metrics: name, threshold and how to read it from a request.
fn slo_parts(slo: &crate::contract::Slo) -> Vec<(&'static str, f64, Pick)> {
    let all: [(&'static str, Option<crate::contract::Millis>, Pick); 4] = [
        ("ttft", slo.ttft_ms, |m| m.ttft_ms()),
        ("ttfo", slo.ttfo_ms, |m| m.ttfo_ms()),
        ("tpot", slo.tpot_ms, |m| m.tpot_ms()),
        ("e2e", slo.e2e_ms, |m| m.e2e_ms()),
    ];
    all.into_iter()
        .filter_map(|(n, t, f)| Some((n, t?.0, f)))
        .collect()
}

/// The run against its SLO: each metric at the SLO percentile over its sample (failures as
/// misses, `claims::sample`), attainment and goodput, each with its verdict and support at
/// the contract's confidence (`analyze::claims`). `metrics` are the steady records' own, in
/// their order; `pass` is the point estimate ([`SloResult::meets`]).
fn slo_result(
    c: &Contract,
    steady_recs: &[&Record],
    metrics: &[RequestMetrics],
    achieved: Option<f64>,
) -> SloResult {
    let conf = c.measurement.confidence;
    let p = c.slo.percentile;
    let ok = || {
        steady_recs
            .iter()
            .zip(metrics)
            .filter(|(r, _)| r.is_ok())
            .map(|(_, m)| m)
    };
    let met = ok().filter(|m| meets_slo(c, m)).count() as u64;
    let n_ok = ok().count();
    let per_metric: Vec<SloMetric> = slo_parts(&c.slo)
        .into_iter()
        .map(|(name, thr, pick)| {
            let j = claims::judge(
                &claims::sample(steady_recs, metrics, name, pick),
                thr,
                p,
                conf,
            );
            SloMetric {
                metric: name.into(),
                threshold_ms: thr,
                value_ms: j.value,
                pass: j.verdict.met(),
                verdict: j.verdict,
                requests: j.requests,
                misses: j.misses,
                upper_ms: j.upper,
                lower_ms: j.lower,
                needed: j.needed,
            }
        })
        .collect();
    // Requests the user cancelled (Ctrl-C) had no chance to meet or miss the SLO: they are
    // counted apart, not as misses.
    let cancelled = steady_recs
        .iter()
        .filter(|r| r.outcome == Outcome::Interrupted)
        .count() as u64;
    let n = steady_recs.len() as u64 - cancelled;
    let attainment = if n == 0 { 0.0 } else { met as f64 / n as f64 };
    let good_fraction = if n_ok == 0 {
        0.0
    } else {
        met as f64 / n_ok as f64
    };
    let (attainment_verdict, attainment_bounds, attainment_needs) =
        claims::judge_attainment(n, met, c.slo.attainment, conf);
    SloResult::judged(
        SloResult {
            percentile: p,
            verdict: SloVerdict::Met,
            confidence: conf,
            needs: None,
            pass: false,
            per_metric,
            met,
            counted: n,
            cancelled,
            attainment,
            attainment_target: c.slo.attainment,
            attainment_verdict,
            attainment_bounds,
            goodput_rps: achieved.map(|r| r * good_fraction),
        },
        attainment_needs,
    )
}

/// The strongest claim of each SLO metric's steady sample (TTFT, TPOT and E2E without an
/// SLO), at the contract's confidence; with classes, of the whole steady sample against the
/// contract's own percentile.
fn steady_claims(
    c: &Contract,
    steady: &[&Record],
    metrics: &[RequestMetrics],
) -> Vec<claims::Claim> {
    let parts = if c.slo.is_set() {
        slo_parts(&c.slo)
    } else {
        let all: [(&'static str, f64, Pick); 3] = [
            ("ttft", 0.0, |m| m.ttft_ms()),
            ("tpot", 0.0, |m| m.tpot_ms()),
            ("e2e", 0.0, |m| m.e2e_ms()),
        ];
        all.into_iter().collect()
    };
    let asked = if c.slo.is_set() {
        c.slo.percentile
    } else {
        99.0
    };
    parts
        .into_iter()
        .map(|(name, _, pick)| {
            claims::strongest(
                name,
                &claims::sample(steady, metrics, name, pick),
                asked,
                c.measurement.confidence,
            )
        })
        .filter(|k| k.requests > 0)
        .collect()
}

/// What each reported percentile rests on, and what it would need to be supported.
fn support(c: &Contract, stats: &PhaseStats) -> Vec<Support> {
    PERCENTILES
        .iter()
        .map(|(p, name)| Support {
            percentile: (*name).to_owned(),
            requests: stats
                .ttft_ms
                .as_ref()
                .or(stats.e2e_ms.as_ref())
                .map_or(0, |d| d.count as u64),
            needed: min_requests_for(*p, 0, c.measurement.confidence),
        })
        .collect()
}

/// The cold-start test's own result, when the contract asked for one.
fn cold_start_result(
    c: &Contract,
    by_phase: &BTreeMap<Phase, Vec<&Record>>,
    timeline: Option<&Timeline>,
) -> Option<ColdStartResult> {
    c.cold_start.as_ref().map(|cs| {
        let recs: Vec<&Record> = by_phase.get(&Phase::ColdStart).cloned().unwrap_or_default();
        let first = recs
            .iter()
            .filter(|r| r.first_token_us.is_some())
            .min_by_key(|r| r.sent_us);
        ColdStartResult {
            launched: cs.launch.is_some(),
            port_open_s: timeline
                .and_then(|t| t.port_open_us)
                .map(|u| u as f64 / 1e6),
            ready_s: timeline.map_or(0.0, |t| t.ready_us as f64 / 1e6),
            first_token_s: first.and_then(|r| r.first_token_us).map(|u| u as f64 / 1e6),
            first_request_ttft_ms: first.and_then(|r| Some(ms(r.sent_us?, r.first_token_us?))),
            requests: phase_stats(c, &recs),
        }
    })
}

/// What warm-up was: its rule, requests, duration and what ended it.
fn warmup_result(
    c: &Contract,
    by_phase: &BTreeMap<Phase, Vec<&Record>>,
    steady_recs: &[&Record],
) -> WarmupResult {
    let warm: Vec<&Record> = by_phase.get(&Phase::Warmup).cloned().unwrap_or_default();
    let first_send = |rs: &[&Record]| rs.iter().filter_map(|r| r.intended_us.or(r.sent_us)).min();
    WarmupResult {
        rule: warmup_rule(c),
        requests: warm.len() as u64,
        duration_s: match (first_send(&warm), first_send(steady_recs)) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e6,
            _ => 0.0,
        },
        ended: match (&c.warmup.until_stable, c.warmup.duration) {
            _ if warm.is_empty() => "none",
            (Some(u), _) if (warm.len() as u64) < u.max_requests => "stable",
            (Some(_), _) => "max_requests",
            (None, Some(_)) => "duration",
            (None, None) => "requests",
        }
        .to_owned(),
    }
}

fn warmup_rule(c: &Contract) -> String {
    match (&c.warmup.until_stable, c.warmup.duration) {
        (Some(u), _) => format!(
            "until the median TTFT of {} requests changes by < {}% (at most {} requests)",
            u.window,
            u.threshold * 100.0,
            u.max_requests
        ),
        (None, Some(d)) => format!("duration {d}"),
        (None, None) => format!("{} {}", c.warmup.requests, arrivals(c)),
    }
}

/// What a count of arrivals counts: requests, or with sessions, sessions.
fn arrivals(c: &Contract) -> &'static str {
    if c.workload.sessions.is_some() {
        "sessions"
    } else if c.workload.task.is_some() {
        "tasks"
    } else {
        "requests"
    }
}

/// What makes every result of a contract directional, whatever the server says: each gap with
/// the change that closes it (none for an API whose outputs goodput cannot check). `grade`
/// lists them; `run --fail-on regression` refuses a contract that has any before its run.
pub fn contract_gaps(c: &Contract) -> Vec<(String, Option<&'static str>)> {
    let mut gaps = Vec::new();
    if !c.has_slo() {
        gaps.push((
            "no SLO: goodput undefined".to_owned(),
            Some("add [slo] with a threshold, e.g. ttft_ms = 500"),
        ));
    }
    if !c.target.api.capabilities().generates {
        gaps.push((
            format!(
                "no quality check: api = \"{}\" returns vectors, which goodput neither compares nor scores",
                c.target.api.name()
            ),
            None,
        ));
    } else if c.quality.mode == crate::contract::QualityMode::None {
        gaps.push((
            "no quality check: outputs are neither kept for comparison nor scored ([quality] mode = \"none\")".to_owned(),
            Some("set [quality] mode = \"consistency\" (outputs compared run to run) or \"reference\""),
        ));
    }
    gaps
}

/// Comparable when the contract and the facts it depends on are complete; else directional.
fn grade(c: &Contract, records: &[Record], facts: &Facts) -> Grade {
    let mut missing = Vec::new();
    if !c.embedded() {
        for (key, name) in crate::env::facts::GRADED {
            if facts.get(key).is_none() {
                // Where it should have come from, when an endpoint answered in another shape.
                let said = match key {
                    "engine_revision" => facts
                        .unreadable
                        .iter()
                        .find(|u| u.contains("/version"))
                        .map(|u| format!(" ({u})")),
                    _ => None,
                }
                .unwrap_or_default();
                missing.push(format!(
                    "{name} unknown: the server did not say{said} and [target.declared] does not state it"
                ));
            }
        }
        for d in &facts.disagreements {
            missing.push(format!("inconsistent: {d}"));
        }
        if !records.iter().any(|r| r.usage_prompt_tokens.is_some()) {
            missing.push(
                "real prompt lengths unknown: the server reported no usage.prompt_tokens"
                    .to_owned(),
            );
        }
    }
    if !c.workload.enforce_output_length
        && c.target.api.capabilities().generates
        && !records.iter().any(|r| r.usage_completion_tokens.is_some())
    {
        missing.push("output length neither enforced nor reported by the server".to_owned());
    }
    missing.extend(contract_gaps(c).into_iter().map(|(why, _)| why));
    Grade {
        verdict: GradeVerdict::of(&missing),
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::parse;
    use std::path::Path;

    fn contract(extra: &str) -> Contract {
        parse(
            &format!("[load]\nmodel = \"open\"\nrate = 10\nrequests = 4\n{extra}"),
            Path::new("t"),
        )
        .unwrap()
    }

    /// A successful record: intended at `at`, sent 1 ms later, chunks at the given offsets.
    fn rec(index: u64, at: u64, chunks: &[(u64, u32)], end: u64, usage: Option<u32>) -> Record {
        let client: u32 = chunks.iter().map(|c| c.1).sum();
        Record {
            index,
            phase: Phase::Steady,
            request_id: format!("r-{index}"),
            trace_id: None,
            intended_us: Some(at),
            dispatched_us: Some(at + 300),
            sent_us: Some(at + 1_000),
            first_token_us: chunks.first().map(|c| at + c.0),
            end_us: Some(at + end),
            chunks: chunks.iter().map(|(t, n)| (at + t, *n)).collect(),
            bare_us: Vec::new(),
            input_tokens_planned: 100,
            output_tokens_planned: usage.unwrap_or(client),
            usage_prompt_tokens: Some(100),
            usage_completion_tokens: usage,
            response_model: None,
            client_output_tokens: client,
            outcome: Outcome::Ok,
            http_status: Some(200),
            response_id: None,
            finish_reason: Some("length".into()),
            usage_cached_tokens: None,
            output_digest: None,
            rare: None,
        }
    }

    /// ITL per chunk and per token of one record: (count, min, max) each.
    fn itl_of(r: &Record) -> [(usize, f64, f64); 2] {
        let (mut a, mut b) = (Tally::default(), Tally::default());
        add_itl(r, &mut a, &mut b);
        [a, b].map(|t| t.dist().map_or((0, 0.0, 0.0), |d| (d.count, d.min, d.max)))
    }

    /// A queue that grows all run is overload; the same growth over a handful of requests is
    /// not evidence of it (a few requests' noise once read as "rose from 2 to 0").
    /// A stage's SLO (and a stop rule's precision) judge every steady request with its own
    /// metrics: a failed request early in the stage once paired the later ones with their
    /// neighbours' metrics and left the last one out.
    #[test]
    fn a_stage_judges_its_slo_on_every_steady_request_with_its_own_metrics() {
        let c = parse(
            "[load]\nmodel = \"open\"\n[[load.stage]]\nrate = 10\nrequests = 10\n\
             [warmup]\nrequests = 0\n[slo]\nttft_ms = 100\npercentile = 50\n",
            Path::new("t"),
        )
        .unwrap();
        let name = c.load.stage[0].name.clone();
        let records: Vec<Record> = (0..10u64)
            .map(|i| {
                // The last answers its first token in 500 ms, the others in 10.
                let ttft = if i == 9 { 500_000 } else { 10_000 };
                let mut r = rec(
                    i,
                    i * 100_000,
                    &[(ttft, 1), (ttft + 10_000, 1)],
                    ttft + 20_000,
                    Some(2),
                );
                r.stage = Some(name.clone());
                if i == 0 {
                    r.fail(Outcome::HttpStatus, "HTTP 503", 1_000);
                    (r.chunks, r.first_token_us) = (crate::record::Chunks::new(), None);
                }
                r
            })
            .collect();
        let stages = stages::summarize(&c, &records).unwrap();
        let slo = stages[0].slo.as_ref().unwrap();
        let ttft = slo.per_metric.iter().find(|m| m.metric == "ttft").unwrap();
        // Ten steady requests, two misses: the failure and the slow last one.
        assert_eq!((ttft.requests, ttft.misses), (10, 2), "{ttft:?}");
        assert_eq!(slo.met, 8);
    }

    #[test]
    fn overload_needs_a_queue_that_grows_over_enough_requests() {
        let growing = |n: u64| -> Vec<Record> {
            (0..n)
                .map(|i| {
                    // Every 30 ms; each waits 60 ms longer than the one before.
                    let wait = 20_000 + 60_000 * i;
                    rec(
                        i,
                        i * 30_000,
                        &[(wait, 1), (wait + 10_000, 1)],
                        wait + 20_000,
                        Some(2),
                    )
                })
                .collect()
        };
        let c = contract("[warmup]\nrequests = 0\n");
        let verdict = |n: u64| {
            let mut c = c.clone();
            c.load.requests = Some(n);
            summarize(&c, &growing(n), &Context::default()).validity
        };
        let big = verdict(60);
        assert!(big.overload.is_some(), "{big:?}");
        let small = verdict(20);
        assert!(small.overload.is_none(), "{small:?}");
        assert!(
            small
                .reasons
                .iter()
                .all(|r| !r.contains("offered load above")),
            "{small:?}"
        );
    }

    /// Requests that take longer than the whole run: in flight builds up all window, which is
    /// a ramp, not overload, and says so.
    #[test]
    fn a_run_shorter_than_its_requests_is_a_ramp_not_overload() {
        let recs: Vec<Record> = (0..40)
            .map(|i| {
                rec(
                    i,
                    i * 25_000,
                    &[(100_000, 1), (3_900_000, 1)],
                    4_000_000,
                    Some(2),
                )
            })
            .collect();
        let mut c = contract("[warmup]\nrequests = 0\n");
        c.load.requests = Some(40);
        let v = summarize(&c, &recs, &Context::default()).validity;
        assert!(v.overload.is_none(), "{v:?}");
        assert!(
            v.reasons.iter().any(|r| r.contains("still building up")),
            "{v:?}"
        );
        assert!(
            v.reasons.iter().all(|r| !r.contains("offered load above")),
            "{v:?}"
        );
    }

    #[test]
    fn metrics_from_the_intended_time_with_multi_token_chunks() {
        // First token 50 ms after the intended send; then a 3-token chunk and a 2-token chunk.
        let r = rec(
            0,
            0,
            &[(50_000, 1), (80_000, 3), (100_000, 2)],
            110_000,
            Some(6),
        );
        let m = request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!(m.ttft_ms(), Some(50.0));
        assert_eq!(m.e2e_ms(), Some(110.0));
        assert_eq!(m.tpot_ms(), Some(60.0 / 5.0));
        assert_eq!(itl_of(&r), [(2, 20.0, 30.0), (5, 10.0, 10.0)]);
        assert_eq!(m.dispatch_lag_ms(), Some(1.0));
        // From the actual send, everything is 1 ms shorter.
        let s = request_metrics(&r, LatencyOrigin::Sent, TokenSource::Usage);
        assert_eq!((s.ttft_ms(), s.e2e_ms()), (Some(49.0), Some(109.0)));
    }

    #[test]
    fn tpot_leaves_out_every_token_of_the_first_chunk() {
        // Four tokens per chunk every 20 ms, the first chunk included (a coalescing gateway):
        // 5 ms per token after it, whatever the chunking. (E2E − TTFT)/(N − 1) would say 4.
        let chunks: Vec<(u64, u32)> = (0..4).map(|i| (50_000 + i * 20_000, 4)).collect();
        let r = rec(0, 0, &chunks, 110_000, Some(16));
        let m = request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!(m.tpot_ms(), Some(60.0 / 12.0));
        assert_eq!(itl_of(&r), [(3, 20.0, 20.0), (12, 5.0, 5.0)]);
        // Counted one per chunk while usage says 16: the first chunk's share is scaled to
        // usage (4 of 16), so TPOT stays 5 ms; per-token gaps follow the client's count.
        let mut by_chunk = r.clone();
        by_chunk.chunks.map_tokens(|_| 1);
        by_chunk.client_output_tokens = 4;
        let m = request_metrics(&by_chunk, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!(m.tpot_ms(), Some(60.0 / 12.0));
        // The whole output in one chunk has no TPOT (and meets a TPOT threshold).
        let one = rec(0, 0, &[(50_000, 7)], 50_000, Some(7));
        let m = request_metrics(&one, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!((m.tpot_ms(), itl_of(&one)[1].0), (None, 0));
        assert!(meets_slo(&contract("[slo]\ntpot_ms = 1\n"), &m));
    }

    #[test]
    fn ttfo_is_the_first_answer_token_after_the_reasoning() {
        // 6 reasoning chunks then 4 answer chunks, one token each, every 10 ms from 50 ms.
        let chunks: Vec<(u64, u32)> = (0..10).map(|i| (50_000 + i * 10_000, 1)).collect();
        let mut r = rec(0, 0, &chunks, 140_000, Some(10));
        r.reasoning_chunks = 6;
        let m = request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!((m.ttft_ms(), m.ttfo_ms()), (Some(50.0), Some(110.0)));
        assert_eq!(
            (m.reasoning_tokens, m.reasoning_from_usage),
            (Some(6), false)
        );
        // The answer's TPOT: 30 ms over the 3 tokens after its first chunk.
        assert_eq!(m.tpot_answer_ms(), Some(10.0));
        // The server's count wins under usage; a TTFO threshold judges the answer.
        r.usage_reasoning_tokens = Some(6);
        let m = request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!(
            (m.reasoning_tokens, m.reasoning_from_usage),
            (Some(6), true)
        );
        assert!(meets_slo(&contract("[slo]\nttft_ms = 60\n"), &m));
        assert!(!meets_slo(&contract("[slo]\nttfo_ms = 100\n"), &m));
        // All reasoning, no answer: no TTFO, and a TTFO threshold is missed.
        let mut all = rec(0, 0, &chunks, 140_000, Some(10));
        all.reasoning_chunks = 10;
        let m = request_metrics(&all, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!((m.ttfo_ms(), m.reasoning_tokens), (None, Some(10)));
        assert!(!meets_slo(&contract("[slo]\nttfo_ms = 1000\n"), &m));
        // Without reasoning TTFO is TTFT, and the summary shows no reasoning rows.
        let plain = rec(0, 0, &chunks, 140_000, Some(10));
        let m = request_metrics(&plain, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!((m.ttfo_ms(), m.reasoning_tokens), (m.ttft_ms(), None));
        let c = contract("[slo]\nttft_ms = 500\n");
        let s = summarize(&c, &[plain], &Context::default());
        assert!(s.steady.stats.ttfo_ms.is_none() && s.steady.stats.reasoning_tokens.is_none());
        // With reasoning, the summary says what TTFT measured and that the SLO misses it.
        let s = summarize(&c, &[r], &Context::default());
        assert_eq!(s.steady.stats.ttfo_ms.as_ref().map(|d| d.p50), Some(110.0));
        let notes = s.notes.join("\n");
        assert!(
            notes.contains("1 of 1 successful steady requests reasoned before answering: 6 reasoning tokens per request on average (60% of output), counted as the server reported them")
                && notes.contains("set slo.ttfo_ms"),
            "{notes}"
        );
    }

    #[test]
    fn a_count_that_differs_from_usage_is_stated_not_blamed_on_the_server() {
        // The client counted 16 chunks; the server reported 64 tokens for each of 4 requests.
        let c = contract(
            "[workload]\nenforce_output_length = true\n[measurement]\nclient_token_count = \"chunks\"\n",
        );
        let chunks: Vec<(u64, u32)> = (0..16).map(|i| (50_000 + i * 20_000, 1)).collect();
        let records: Vec<Record> = (0..4)
            .map(|i| rec(i, i * 100_000, &chunks, 350_000, Some(64)))
            .collect();
        let s = summarize(&c, &records, &Context::default());
        let notes = s.notes.join("\n");
        assert!(
            notes.contains("The client's own count (one token per text-carrying chunk) differs from the server's usage on 4 of 4 requests: 64 tokens counted against 256 reported (-75.0%); output tokens, TPOT and output throughput use the server's usage."),
            "{notes}"
        );
        assert!(!notes.contains("other than planned"), "{notes}");
        let oc = &s.steady.output_count;
        assert_eq!((oc.usage, oc.approximate), (4, 0));
        assert_eq!(oc.compared.as_ref().map(|k| k.differing), Some(4));
        // Counted by the client, and nothing could recount: approximate, said so, not blamed.
        let c = contract(
            "[workload]\nenforce_output_length = true\n[measurement]\noutput_tokens = \"client\"\nclient_token_count = \"chunks\"\n",
        );
        let mut records = records;
        records
            .iter_mut()
            .for_each(|r| r.counted = Some(Counted::Words));
        let s = summarize(&c, &records, &Context::default());
        let notes = s.notes.join("\n");
        assert!(
            notes.contains("4 requests' token counts are approximate"),
            "{notes}"
        );
        assert!(notes.contains("use the client's count"), "{notes}");
        assert!(!notes.contains("other than planned"), "{notes}");
        assert_eq!(s.steady.output_count.client.get("words"), Some(&4));
    }

    #[test]
    fn usage_wins_over_the_client_count_unless_told_otherwise() {
        let r = rec(0, 0, &[(10_000, 1), (20_000, 1)], 20_000, Some(5));
        assert_eq!(
            request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage).output_tokens,
            5
        );
        assert_eq!(
            request_metrics(&r, LatencyOrigin::Intended, TokenSource::Client).output_tokens,
            2
        );
        let no_usage = rec(0, 0, &[(10_000, 1), (20_000, 1)], 20_000, None);
        let m = request_metrics(&no_usage, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!((m.output_tokens, m.output_from_usage), (2, false));
    }

    #[test]
    fn one_token_outputs_have_no_tpot_and_meet_a_tpot_slo() {
        let c = contract("[slo]\ntpot_ms = 1\n");
        let r = rec(0, 0, &[(10_000, 1)], 10_000, Some(1));
        let m = request_metrics(&r, LatencyOrigin::Intended, TokenSource::Usage);
        assert_eq!(m.tpot_ms(), None);
        assert!(meets_slo(&c, &m));
    }

    #[test]
    fn failures_count_as_misses_in_the_slo_but_not_in_the_latency_table() {
        let c = contract("[slo]\nttft_ms = 60\npercentile = 50\nattainment = 0.5\n");
        let mut failed = rec(3, 300_000, &[], 301_000, None);
        failed.fail(Outcome::HttpStatus, "HTTP 500", 301_000);
        let records = vec![
            rec(0, 0, &[(50_000, 1), (60_000, 1)], 60_000, Some(2)),
            rec(1, 100_000, &[(55_000, 1), (65_000, 1)], 65_000, Some(2)),
            rec(2, 200_000, &[(90_000, 1), (99_000, 1)], 99_000, Some(2)), // misses the TTFT SLO
            failed,
        ];
        let s = summarize(&c, &records, &Context::default());
        let st = &s.steady;
        assert_eq!((st.stats.requests, st.stats.ok, st.stats.failed), (4, 3, 1));
        assert_eq!(st.stats.ttft_ms.as_ref().unwrap().count, 3);
        assert_eq!(st.errors.get("http_status"), Some(&1));
        let slo = st.slo.as_ref().unwrap();
        assert_eq!(slo.met, 2);
        assert_eq!(slo.attainment, 0.5);
        // Steady window: origins 0 … 300 ms. All 3 successes end inside it → 3 / 0.3 s.
        let achieved = 3.0 / 0.3;
        assert!((st.throughput.achieved_rps.unwrap() - achieved).abs() < 1e-9);
        // Goodput: achieved × 2 of the 3 successes.
        assert!((slo.goodput_rps.unwrap() - achieved * 2.0 / 3.0).abs() < 1e-9);
        // Offered: 4 intended sends over 0.3 s.
        assert!((st.throughput.offered_rps.unwrap() - 3.0 / 0.3).abs() < 1e-9);
        // The SLO's p50 TTFT counts the failure as a miss: [50, 55, 90, failed] → 72.5 > 60,
        // on 4 requests with 2 misses; attainment 0.5 meets 0.5.
        let ttft = &slo.per_metric[0];
        assert_eq!(ttft.value_ms, Some(72.5));
        assert_eq!((ttft.requests, ttft.misses), (4, 2));
        assert!(!ttft.pass && !slo.pass);
        // 4 requests neither support nor refute p50 at 99%: indicated, and the measurement is
        // VALID (the sample's size is the claim's business).
        assert_eq!(slo.verdict, SloVerdict::MissedIndicated);
        assert_eq!(slo.attainment_verdict, SloVerdict::MetIndicated);
        assert_eq!(s.validity.verdict, "VALID", "{:?}", s.validity.reasons);
    }

    #[test]
    fn client_drops_lag_and_shortfall_invalidate_tail_claims() {
        let c = contract("[slo]\nttft_ms = 1000\npercentile = 50\n");
        let mut records: Vec<Record> = (0..50)
            .map(|i| rec(i, i * 100_000, &[(10_000, 1), (20_000, 1)], 20_000, Some(2)))
            .collect();
        // Sent 50 ms late after waking on time (0.3 ms): the runtime's wait.
        records[3].sent_us = Some(records[3].intended_us.unwrap() + 50_000);
        // Woke 40 ms late, then sent 0.5 ms later: the dispatch thread's lateness.
        let at = records[5].intended_us.unwrap();
        (records[5].dispatched_us, records[5].sent_us) = (Some(at + 40_000), Some(at + 40_500));
        records[7].fail(Outcome::ClientDropped, "cap", 700_000);
        records[7].sent_us = None;
        let s = summarize(&c, &records, &Context::default());
        let st = &s.steady.stats;
        let (lag, wake, queue) = (
            st.dispatch_lag_ms.as_ref().unwrap(),
            st.dispatch_wake_ms.as_ref().unwrap(),
            st.dispatch_queue_ms.as_ref().unwrap(),
        );
        // The dropped arrival woke (counted in the wake part) but was never sent.
        assert_eq!((lag.count, wake.count, queue.count), (49, 50, 49));
        assert_eq!((lag.max, wake.max, queue.max), (50.0, 40.0, 49.7));
        let reasons = s.validity.reasons.join("\n");
        assert!(reasons.contains("dispatch lag"), "{reasons}");
        assert!(
            reasons.contains("the dispatch thread woke late"),
            "{reasons}"
        );
        assert!(
            reasons.contains("1 arrivals were client-dropped"),
            "{reasons}"
        );
    }

    #[test]
    fn timeseries_counts_by_second() {
        let records = vec![
            rec(
                0,
                100_000,
                &[(50_000, 1), (1_000_000, 1)],
                1_000_000,
                Some(2),
            ),
            rec(1, 1_200_000, &[(10_000, 1)], 10_000, Some(1)),
        ];
        let ts = timeseries(&records);
        assert_eq!(ts.len(), 2);
        assert_eq!(
            (
                ts[0].starts,
                ts[0].completions,
                ts[0].in_flight,
                ts[0].output_tokens
            ),
            (1, 0, 1, 1)
        );
        assert_eq!(
            (
                ts[1].starts,
                ts[1].completions,
                ts[1].in_flight,
                ts[1].output_tokens
            ),
            (1, 2, 0, 2)
        );
        assert_eq!(ts[0].ttft_p50_ms, Some(49.0));
    }

    #[test]
    fn closed_loop_is_flagged_and_measured_from_the_send() {
        let c = parse(
            "[load]\nmodel = \"closed\"\nconcurrency = 2\nrequests = 2\n",
            Path::new("t"),
        )
        .unwrap();
        let mut r = rec(0, 0, &[(10_000, 1), (20_000, 1)], 20_000, Some(2));
        r.intended_us = None;
        let s = summarize(&c, &[r], &Context::default());
        assert_eq!(s.latency_origin, LatencyOrigin::Sent);
        assert!(
            s.notes
                .iter()
                .any(|n| n.contains("tail and capacity claims are not valid"))
        );
        // Valid for what a closed loop can claim; the claims it cannot make are listed.
        assert_eq!(
            s.validity.supports,
            "throughput and latency at concurrency 2"
        );
        assert!(
            s.validity
                .cannot_support
                .iter()
                .any(|n| n.starts_with("tail latency under an arrival rate"))
        );
        assert_eq!(s.steady.stats.ttft_ms.as_ref().unwrap().p50, 9.0);
        assert!(s.steady.throughput.offered_rps.is_none());
    }
}
