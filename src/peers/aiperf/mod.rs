//! `aiperf profile` (AIPerf 0.13.0, the version whose export `goodput audit` reads) as a
//! goodput contract. The flag set is the one its cyclopts `profile` command assembles at that
//! version (aliases and short flags included), with cyclopts' rules: a list flag takes every
//! word up to the next flag and collects its uses; `--no-…` exists only where AIPerf declares
//! it.

pub mod result;

use serde_json::Value;

use crate::peers::command_line::{Draft, ImportError, Imported};
use crate::peers::flags::{Flags, Spec, Takes, Takes::*};

/// The version whose flags this module knows.
pub const VERSION: &str = "0.13.0";

/// Every flag of `aiperf profile` 0.13.0 (generated from its cyclopts parameters).
const FLAGS: &[(&str, Takes)] = &[
    ("help", Nothing),
    ("cli-config", Text),
    ("model-names", Many),
    ("model-selection-strategy", Text),
    ("custom-endpoint", Text),
    ("endpoint-type", Text),
    ("streaming", Nothing),
    ("url", Many),
    ("url-strategy", Text),
    ("request-timeout-seconds", Float),
    ("wait-for-model-timeout", Float),
    ("wait-for-model-mode", Text),
    ("wait-for-model-interval", Float),
    ("reset-kv-cache", Nothing),
    ("reset-kv-cache-timeout-seconds", Float),
    ("reset-kv-cache-path", Text),
    ("server-profiler", Nothing),
    ("server-profiler-timeout-seconds", Float),
    ("server-profiler-start-path", Text),
    ("server-profiler-stop-path", Text),
    ("api-key", Text),
    ("transport", Text),
    ("use-legacy-max-tokens", Nothing),
    ("use-server-token-count", Nothing),
    ("per-chunk-usage", Nothing),
    ("connection-reuse-strategy", Text),
    ("download-video-content", Nothing),
    ("request-content-type", Text),
    ("session-header", Text),
    ("uuid-and-strip", Nothing),
    ("tokenizer", Text),
    ("tokenizer-revision", Text),
    ("tokenizer-trust-remote-code", Nothing),
    ("apply-chat-template", Nothing),
    ("extra-inputs", Many),
    ("header", Many),
    ("input-file", Text),
    ("public-dataset", Text),
    ("hf-subset", Text),
    ("hf-weka-dataset", Text),
    ("dataset-filter", Many),
    ("custom-dataset-type", Text),
    ("ignore-trace-delays", Nothing),
    ("use-think-time-only", Nothing),
    ("max-context-length", Int),
    ("dataset-sampling-strategy", Text),
    ("allow-dataset-wrap", Nothing),
    ("no-allow-dataset-wrap", Nothing),
    ("random-seed", Int),
    ("trace-session-sample-ratio", Float),
    ("config", Text),
    ("fixed-schedule", Nothing),
    ("no-fixed-schedule", Nothing),
    ("fixed-schedule-auto-offset", Nothing),
    ("fixed-schedule-start-offset", Int),
    ("fixed-schedule-end-offset", Int),
    ("goodput", Text),
    ("conversation-num", Text),
    ("num-dataset-entries", Int),
    ("conversation-turn-mean", Int),
    ("conversation-turn-stddev", Int),
    ("conversation-turn-delay-mean", Float),
    ("conversation-turn-delay-stddev", Float),
    ("conversation-turn-delay-ratio", Float),
    ("inter-turn-delay-cap-seconds", Float),
    ("max-idle-gap-cap-seconds", Float),
    ("replay-speedup", Float),
    ("open-loop-replay", Nothing),
    ("no-open-loop-replay", Nothing),
    ("open-loop-strict", Nothing),
    ("omit-kv-hints", Nothing),
    ("force-min-tokens", Nothing),
    ("no-force-min-tokens", Nothing),
    ("prompt-batch-size", Int),
    ("prompt-corpus", Text),
    ("cache-bust", Text),
    ("system-prompt", Text),
    ("system-prompt-file", Text),
    ("prompt-prefix-pool-size", Int),
    ("prompt-prefix-length", Int),
    ("shared-system-prompt-length", Int),
    ("user-context-prompt-length", Int),
    ("prompt-input-tokens-mean", Int),
    ("prompt-input-tokens-stddev", Float),
    ("prompt-input-tokens-block-size", Int),
    ("seq-dist", Text),
    ("random-range-ratio", Text),
    ("random-corpus-style", Text),
    ("prompt-output-tokens-mean", Text),
    ("prompt-output-tokens-stddev", Int),
    ("audio-batch-size", Int),
    ("audio-length-mean", Float),
    ("audio-length-stddev", Float),
    ("audio-format", Text),
    ("audio-depths", Many),
    ("audio-sample-rates", Many),
    ("audio-num-channels", Int),
    ("image-width-mean", Float),
    ("image-width-stddev", Float),
    ("image-height-mean", Float),
    ("image-height-stddev", Float),
    ("image-batch-size", Int),
    ("image-format", Text),
    ("image-source", Text),
    ("image-source-sampling", Text),
    ("video-batch-size", Int),
    ("video-duration", Float),
    ("video-fps", Int),
    ("video-width", Int),
    ("video-height", Int),
    ("video-synth-type", Text),
    ("video-format", Text),
    ("video-codec", Text),
    ("video-audio-sample-rate", Float),
    ("video-audio-num-channels", Int),
    ("video-audio-codec", Text),
    ("video-audio-depth", Text),
    ("rankings-passages-mean", Int),
    ("rankings-passages-stddev", Int),
    ("rankings-passages-prompt-token-mean", Int),
    ("rankings-passages-prompt-token-stddev", Int),
    ("rankings-query-prompt-token-mean", Int),
    ("rankings-query-prompt-token-stddev", Int),
    ("synthesis-speedup-ratio", Float),
    ("synthesis-prefix-len-multiplier", Float),
    ("synthesis-prefix-root-multiplier", Int),
    ("synthesis-prompt-len-multiplier", Float),
    ("synthesis-output-len-multiplier", Float),
    ("synthesis-max-isl", Int),
    ("synthesis-max-osl", Int),
    ("benchmark-duration", Text),
    ("benchmark-grace-period", Float),
    ("concurrency", Text),
    ("prefill-concurrency", Text),
    ("request-rate", Text),
    ("arrival-pattern", Text),
    ("arrival-smoothness", Float),
    ("request-count", Text),
    ("concurrency-ramp-duration", Float),
    ("prefill-concurrency-ramp-duration", Float),
    ("request-rate-ramp-duration", Float),
    ("request-rate-series", Text),
    ("failed-request-threshold", Float),
    ("trajectory-start-min-ratio", Float),
    ("trajectory-start-max-ratio", Float),
    ("burst-phase-starts", Nothing),
    ("trace-idle-gap-cap-seconds", Float),
    ("system-idle-gap-cap-seconds", Float),
    ("scenario", Text),
    ("unsafe-override", Nothing),
    ("warmup-request-count", Int),
    ("warmup-duration", Float),
    ("agentic-cache-warmup-duration", Float),
    ("agentic-warmup-grace-period", Float),
    ("num-warmup-sessions", Int),
    ("warmup-concurrency", Int),
    ("warmup-prefill-concurrency", Int),
    ("warmup-request-rate", Float),
    ("warmup-arrival-pattern", Text),
    ("warmup-grace-period", Float),
    ("warmup-concurrency-ramp-duration", Float),
    ("warmup-prefill-concurrency-ramp-duration", Float),
    ("warmup-request-rate-ramp-duration", Float),
    ("user-centric-rate", Float),
    ("num-users", Text),
    ("request-cancellation-rate", Float),
    ("request-cancellation-delay", Float),
    ("output-artifact-dir", Text),
    ("profile-export-prefix", Text),
    ("export-level", Text),
    ("slice-duration", Float),
    ("auto-plot", Nothing),
    ("no-auto-plot", Nothing),
    ("plot-required", Nothing),
    ("export-outputs-json", Nothing),
    ("otel-url", Text),
    ("stream", Many),
    ("otel-resource-attributes", Many),
    ("gen-ai-provider", Text),
    ("mlflow-tracking-uri", Text),
    ("mlflow-experiment", Text),
    ("mlflow-run-name", Text),
    ("mlflow-tag", Many),
    ("mlflow-parent-run-id", Text),
    ("mlflow-artifact-glob", Many),
    ("wandb-project", Text),
    ("wandb-entity", Text),
    ("wandb-run-name", Text),
    ("wandb-tag", Many),
    ("export-http-trace", Nothing),
    ("show-trace-timing", Nothing),
    ("server-metrics", Many),
    ("no-server-metrics", Nothing),
    ("server-metrics-formats", Many),
    ("network-latency-automatic", Nothing),
    ("network-latency-mean", Float),
    ("network-latency-ping-interval", Float),
    ("gpu-telemetry", Many),
    ("no-gpu-telemetry", Nothing),
    ("ui-type", Text),
    ("num-profile-runs", Int),
    ("profile-run-cooldown-seconds", Float),
    ("confidence-level", Float),
    ("profile-run-disable-warmup-after-first", Nothing),
    ("no-profile-run-disable-warmup-after-first", Nothing),
    ("set-consistent-seed", Nothing),
    ("no-set-consistent-seed", Nothing),
    ("vary-seed-per-trial", Nothing),
    ("no-vary-seed-per-trial", Nothing),
    ("convergence-metric", Text),
    ("convergence-stat", Text),
    ("convergence-threshold", Float),
    ("convergence-mode", Text),
    ("parameter-sweep-cooldown-seconds", Float),
    ("parameter-sweep-same-seed", Nothing),
    ("no-parameter-sweep-same-seed", Nothing),
    ("parameter-sweep-mode", Text),
    ("sweep-type", Text),
    ("no-sweep-table", Nothing),
    ("search-space", Many),
    ("search-metric", Text),
    ("search-stat", Text),
    ("search-direction", Text),
    ("search-max-iterations", Int),
    ("search-initial-points", Int),
    ("search-random-seed", Int),
    ("search-planner", Text),
    ("optuna-sampler", Text),
    ("optuna-acquisition", Text),
    ("optuna-terminator", Text),
    ("search-percentile-pooling", Text),
    ("bo-constraint-mode", Text),
    ("variant", Many),
    ("search-sla", Many),
    ("search-sla-tier", Many),
    ("search-recipe", Text),
    ("ttft-sla-ms", Float),
    ("isl-osl-pairs", Text),
    ("itl-sla-ms", Float),
    ("tpot-sla-ms", Float),
    ("e2e-sla-ms", Float),
    ("error-rate-sla", Float),
    ("slo-attainment-fraction", Float),
    ("search-style", Text),
    ("degradation-threshold", Float),
    ("degradation-metric-tag", Text),
    ("degradation-stat", Text),
    ("isl-min", Int),
    ("isl-max", Int),
    ("isl-steps", Int),
    ("concurrency-min", Int),
    ("concurrency-max", Int),
    ("concurrency-steps", Int),
    ("osl-min", Int),
    ("osl-max", Int),
    ("osl-steps", Int),
    ("accuracy-benchmark", Text),
    ("accuracy-tasks", Many),
    ("accuracy-n-shots", Int),
    ("accuracy-enable-cot", Nothing),
    ("accuracy-grader", Text),
    ("accuracy-system-prompt", Text),
    ("accuracy-verbose", Nothing),
    ("log-level", Text),
    ("verbose", Nothing),
    ("extra-verbose", Nothing),
    ("record-processor-service-count", Int),
    ("api-port", Int),
    ("api-host", Text),
    ("stats-interval", Float),
    ("workers-max", Int),
    ("zmq-host", Text),
    ("zmq-ipc-path", Text),
    ("zmq-dual-bind", Nothing),
];

/// The other spellings 0.13.0 accepts.
const ALIASES: &[(&str, &str)] = &[
    ("-h", "help"),
    ("model", "model-names"),
    ("-m", "model-names"),
    ("endpoint", "custom-endpoint"),
    ("-u", "url"),
    ("transport-type", "transport"),
    ("-H", "header"),
    ("-f", "config"),
    ("num-conversations", "conversation-num"),
    ("num-sessions", "conversation-num"),
    ("num-prompts", "num-dataset-entries"),
    ("session-turns-mean", "conversation-turn-mean"),
    ("session-turns-stddev", "conversation-turn-stddev"),
    ("session-turn-delay-mean", "conversation-turn-delay-mean"),
    (
        "session-turn-delay-stddev",
        "conversation-turn-delay-stddev",
    ),
    ("session-delay-ratio", "conversation-turn-delay-ratio"),
    ("batch-size-text", "prompt-batch-size"),
    ("batch-size", "prompt-batch-size"),
    ("-b", "prompt-batch-size"),
    ("prefix-prompt-pool-size", "prompt-prefix-pool-size"),
    ("num-prefix-prompts", "prompt-prefix-pool-size"),
    ("prefix-prompt-length", "prompt-prefix-length"),
    ("synthetic-input-tokens-mean", "prompt-input-tokens-mean"),
    ("isl", "prompt-input-tokens-mean"),
    (
        "synthetic-input-tokens-stddev",
        "prompt-input-tokens-stddev",
    ),
    ("isl-stddev", "prompt-input-tokens-stddev"),
    (
        "synthetic-input-tokens-block-size",
        "prompt-input-tokens-block-size",
    ),
    ("isl-block-size", "prompt-input-tokens-block-size"),
    ("sequence-distribution", "seq-dist"),
    ("output-tokens-mean", "prompt-output-tokens-mean"),
    ("osl", "prompt-output-tokens-mean"),
    ("output-tokens-stddev", "prompt-output-tokens-stddev"),
    ("osl-stddev", "prompt-output-tokens-stddev"),
    ("batch-size-audio", "audio-batch-size"),
    ("batch-size-image", "image-batch-size"),
    ("batch-size-video", "video-batch-size"),
    ("request-rate-mode", "arrival-pattern"),
    ("vllm-burstiness", "arrival-smoothness"),
    ("num-requests", "request-count"),
    ("num-warmup-requests", "warmup-request-count"),
    ("artifact-dir", "output-artifact-dir"),
    ("profile-export-file", "profile-export-prefix"),
    ("profile-export-level", "export-level"),
    ("ui", "ui-type"),
    ("sweep-variant", "variant"),
    ("accuracy-no-enable-cot", "accuracy-enable-cot"),
    ("-v", "verbose"),
    ("-vv", "extra-verbose"),
    ("record-processors", "record-processor-service-count"),
    ("max-workers", "workers-max"),
];

/// Flags of other versions (GenAI-Perf, AIPerf's predecessor), and what became of them.
const GONE: &[(&str, &str)] = &[
    (
        "service-kind",
        "GenAI-Perf's flag; AIPerf 0.13.0 has --endpoint-type",
    ),
    (
        "measurement-interval",
        "GenAI-Perf's flag; AIPerf 0.13.0 has --benchmark-duration",
    ),
    (
        "num-prompts-per-request",
        "not a flag of aiperf profile 0.13.0: --prompt-batch-size",
    ),
];

const SPEC: Spec = Spec {
    tool: "aiperf profile",
    version: VERSION,
    flags: FLAGS,
    aliases: ALIASES,
    gone: GONE,
    underscores: false,
    negatable: false,
    lists_accumulate: true,
};

/// The endpoint types 0.13.0 accepts.
const ENDPOINT_TYPES: &[&str] = &[
    "audio-transcription",
    "chat",
    "cohere-rankings",
    "completions",
    "responses",
    "messages",
    "chat-embeddings",
    "embeddings",
    "hf-tei-rankings",
    "huggingface-generate",
    "image-generation",
    "image-edit",
    "video-generation",
    "image-retrieval",
    "nim-embeddings",
    "nim-rankings",
    "solido-rag",
    "raw",
    "template",
];

/// Flags this module maps (or annotates by name); any other flag given gets a "not mapped"
/// note, so none passes unsaid.
const MAPPED: &[&str] = &[
    "help",
    "model-names",
    "custom-endpoint",
    "endpoint-type",
    "streaming",
    "url",
    "api-key",
    "header",
    "extra-inputs",
    "tokenizer",
    "tokenizer-revision",
    "tokenizer-trust-remote-code",
    "random-seed",
    "prompt-input-tokens-mean",
    "prompt-input-tokens-stddev",
    "image-width-mean",
    "image-width-stddev",
    "image-height-mean",
    "image-height-stddev",
    "image-batch-size",
    "image-format",
    "prompt-output-tokens-mean",
    "prompt-output-tokens-stddev",
    "prompt-prefix-pool-size",
    "prompt-prefix-length",
    "input-file",
    "custom-dataset-type",
    "fixed-schedule",
    "public-dataset",
    "concurrency",
    "request-rate",
    "arrival-pattern",
    "arrival-smoothness",
    "request-count",
    "benchmark-duration",
    "benchmark-grace-period",
    "warmup-request-count",
    "warmup-duration",
    "goodput",
];

/// A command line of `aiperf profile` (with or without `aiperf profile` in front) as a
/// contract.
pub fn import(args: &[String]) -> Result<Imported, ImportError> {
    let rest = strip_command(args)?;
    let f = SPEC.read(rest, "AIPerf")?;
    let mut d = Draft::named(
        &format!("AIPerf {VERSION} (`aiperf profile`)"),
        "imported-aiperf",
    );
    target(&f, &mut d)?;
    workload(&f, &mut d)?;
    load(&f, &mut d)?;
    slo(&f, &mut d)?;
    rest_named(&f, &mut d);
    d.annotate("ITL: AIPerf's inter_token_latency is (E2E − TTFT) / (output tokens − 1) per request; goodput's TPOT is the same wait divided by the tokens after the first chunk, equal when each chunk carries one token (docs/guide/measurement.md).");
    d.finish(&format!(
        "aiperf profile {}",
        crate::peers::command_line::shown(rest)
    ))
}

/// The arguments after `aiperf profile`; another command or tool is refused.
fn strip_command(args: &[String]) -> Result<&[String], ImportError> {
    let word = |i: usize| args.get(i).map(String::as_str);
    match word(0).and_then(|w| w.rsplit('/').next()) {
        Some("aiperf") => match word(1) {
            Some("profile") => Ok(&args[2..]),
            _ => Err(ImportError(format!(
                "`{}`: not an `aiperf profile` command (goodput imports that one of AIPerf's commands)",
                crate::peers::command_line::shown(&args[..args.len().min(2)])
            ))),
        },
        Some("genai-perf") => Err(ImportError(format!(
            "`genai-perf`: AIPerf's predecessor, whose flags differ; goodput imports AIPerf {VERSION}'s `aiperf profile`"
        ))),
        _ => match crate::peers::command_line::other_tool(args) {
            Some(tool) => Err(ImportError(format!(
                "`{}`: a command of {tool}, not of aiperf profile",
                args[0]
            ))),
            None => Ok(args),
        },
    }
}

/// A list flag's words, each split at commas (AIPerf takes both forms).
fn listed(f: &Flags, flag: &str) -> Vec<String> {
    f.get(flag)
        .map(|g| {
            g.values
                .iter()
                .flat_map(|v| v.split(','))
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn target(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let urls = listed(f, "url");
    let url = urls.first().map_or("http://localhost:8000", String::as_str);
    // AIPerf puts http:// in front of a URL without a scheme.
    let url = match url.contains("://") {
        true => url.trim_end_matches('/').to_owned(),
        false => format!("http://{}", url.trim_end_matches('/')),
    };
    let from = match f.has("url") {
        true => f.from("url"),
        false => "AIPerf's default --url http://localhost:8000".into(),
    };
    d.url(&url, from);
    if urls.len() > 1 {
        d.annotate(format!("--url given {} URLs: AIPerf spreads requests over them round-robin; this contract targets the first (goodput's [[load.shard]] runs a client per target)", urls.len()));
    }
    let kind = f.text("endpoint-type").unwrap_or("chat");
    if !ENDPOINT_TYPES.contains(&kind) {
        return Err(ImportError(format!(
            "`--endpoint-type {kind}`: not an endpoint type of AIPerf {VERSION} ({})",
            ENDPOINT_TYPES.join(", ")
        )));
    }
    let api = match kind {
        "chat" => "openai-chat",
        "completions" => "openai-completions",
        "responses" => "openai-responses",
        "embeddings" => "openai-embeddings",
        other => {
            d.annotate(format!("--endpoint-type {other}: goodput does not send this kind of request; the contract sends chat completions"));
            "openai-chat"
        }
    };
    let efrom = match f.has("endpoint-type") {
        true => f.from("endpoint-type"),
        false => "AIPerf's default --endpoint-type chat".into(),
    };
    d.str("target", "api", api, efrom);
    if let Some(path) = f.text("custom-endpoint") {
        let standard = [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/responses",
            "/v1/embeddings",
        ];
        if !standard.contains(&path) {
            d.annotate(format!("--endpoint {path}: goodput sends each API to its standard path; a server behind another path needs a proxy"));
        }
    }
    let models = listed(f, "model-names");
    match models.first() {
        Some(m) => d.str("target", "model", m, f.from("model-names")),
        None => d.annotate("no --model: goodput asks the server (/v1/models) for its model"),
    }
    if models.len() > 1 {
        d.annotate("--model with several names: AIPerf assigns them to prompts in turn; goodput's classes can each name a model ([[class]] model)");
    }
    if let Some(k) = f.text("api-key") {
        d.secret(k);
        d.api_key("--api-key");
    }
    headers(f, d)?;
    Ok(())
}

/// `--header Name:Value …` (or a JSON object): sent with every request.
fn headers(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let Some(g) = f.get("header") else {
        return Ok(());
    };
    for h in &g.values {
        let kv: Vec<(String, String)> = match serde_json::from_str::<Value>(h) {
            Ok(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_owned)))
                .collect(),
            _ => match h.split_once(':') {
                Some((k, v)) => vec![(k.trim().to_owned(), v.trim().to_owned())],
                None => {
                    return Err(ImportError(format!(
                        "`--header {h}`: a header is Name:Value (or a JSON object)"
                    )));
                }
            },
        };
        for (k, v) in kv {
            d.header(&k, &v, "--header");
        }
    }
    Ok(())
}

/// `--extra-inputs key:value …` (or JSON objects) as a request body.
fn extra_inputs(f: &Flags) -> Result<serde_json::Map<String, Value>, ImportError> {
    let mut body = serde_json::Map::new();
    for item in f
        .get("extra-inputs")
        .map(|g| g.values.as_slice())
        .unwrap_or_default()
    {
        match serde_json::from_str::<Value>(item) {
            Ok(Value::Object(m)) => body.extend(m),
            _ => {
                let (k, v) = item.split_once(':').ok_or_else(|| {
                    ImportError(format!(
                        "`--extra-inputs {item}`: an input is key:value (or a JSON object)"
                    ))
                })?;
                // AIPerf reads the value as JSON when it can (true, 0.7), else as text.
                let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
                body.insert(k.to_owned(), v);
            }
        }
    }
    Ok(body)
}

/// A single number of a flag that also takes a comma-separated list (a sweep in AIPerf):
/// the first, with a note naming the rest.
fn first_of(f: &Flags, d: &mut Draft, flag: &str, key: &str) -> Result<Option<f64>, ImportError> {
    let values = listed(f, flag);
    let mut nums = Vec::new();
    for v in &values {
        let n: f64 = v.parse().map_err(|_| {
            ImportError(format!(
                "`--{flag} {}`: not a number (or comma-separated numbers)",
                f.text(flag).unwrap_or_default()
            ))
        })?;
        if !(n > 0.0 && n.is_finite()) {
            return Err(ImportError(format!("`--{flag} {v}`: must be > 0")));
        }
        nums.push(n);
    }
    if nums.len() > 1 {
        d.annotate(format!("--{flag} {}: AIPerf sweeps the values, a run each; this contract measures the first. For all of them: `goodput sweep FILE --vary {key}={}`", values.join(","), values.join(",")));
    }
    Ok(nums.first().copied())
}

fn workload(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    match f.num("random-seed") {
        Some(s) => d.set("workload", "seed", format!("{s}"), f.from("random-seed")),
        None => d.annotate("no --random-seed: AIPerf seeds from system entropy, so no two runs send the same prompts; goodput's plan is fixed by workload.seed"),
    }
    if !f.on("streaming") {
        d.set(
            "workload",
            "stream",
            "false".into(),
            "no --streaming: AIPerf's default is not to stream",
        );
        d.annotate("no --streaming: without streaming neither tool sees a first token, so TTFT and ITL are not measured; add --streaming (workload.stream = true) for them");
    }
    let body = extra_inputs(f)?;
    let file = f.text("input-file");
    let kind = f.text("custom-dataset-type");
    match (file, kind) {
        (Some(path), Some("mooncake_trace")) => trace(f, d, path),
        (Some(path), k) => dataset(d, path, k.unwrap_or("single_turn"), &f.from("input-file")),
        (None, Some(k)) => {
            return Err(ImportError(format!(
                "`--custom-dataset-type {k}` needs --input-file (AIPerf refuses it without one too)"
            )));
        }
        (None, None) => synthetic(f, d, &body)?,
    }
    images(f, d)?;
    if let Some(p) = f.text("public-dataset") {
        d.annotate(format!("--public-dataset {p}: AIPerf downloads it; goodput reads only local files: save it as JSON lines with a `prompt` field and set workload.dataset"));
        // SPEED-Bench and SpecBench are speculative decoding's prompt sets; AIPerf reads the
        // acceptance from the responses without a flag, as goodput does.
        if p.starts_with("speed_bench") || p.starts_with("spec_bench") {
            d.annotate(crate::peers::ACCEPTANCE);
        }
    }
    if !body.is_empty() {
        let mut body = body;
        if body.remove("min_tokens").is_some() {
            d.annotate("--extra-inputs min_tokens: goodput asks for exact output lengths itself (workload.enforce_output_length sends ignore_eos and min_tokens)");
        }
        d.body(&body, "--extra-inputs");
    }
    for flag in [
        "tokenizer",
        "tokenizer-revision",
        "tokenizer-trust-remote-code",
    ] {
        if f.has(flag) {
            d.annotate(format!("{}: AIPerf counts tokens with the model's tokenizer; goodput with workload.tokenizer (\"server\": the target's own)", f.from(flag)));
        }
    }
    Ok(())
}

/// Synthetic prompts: AIPerf's normal lengths around the means, a pool of shared prefixes.
fn synthetic(
    f: &Flags,
    d: &mut Draft,
    body: &serde_json::Map<String, Value>,
) -> Result<(), ImportError> {
    let mean = first_of(
        f,
        d,
        "prompt-input-tokens-mean",
        "workload.input_tokens.mean",
    )?;
    let (isl, ifrom) = match mean {
        Some(m) => (m, f.from("prompt-input-tokens-mean")),
        None => (550.0, "AIPerf's default --isl 550".into()),
    };
    let sd = f.num("prompt-input-tokens-stddev");
    let mut input = crate::peers::command_line::spread(isl, sd, None, None);
    if let (Some(n), Some(len)) = (
        f.num("prompt-prefix-pool-size"),
        f.num("prompt-prefix-length"),
    ) {
        if n > 0.0 && len > 0.0 {
            // AIPerf puts a pooled prefix in front of each synthetic prompt; goodput counts both.
            input = crate::peers::vllm_bench::shift(&input, len);
            let from = format!(
                "{}, {}",
                f.from("prompt-prefix-pool-size"),
                f.from("prompt-prefix-length")
            );
            d.str("workload", "prefix_cache", "shared", from.clone());
            d.set(
                "workload",
                "shared_prefix_tokens",
                format!("{len}"),
                from.clone(),
            );
            d.set("workload", "prefixes", format!("{n}"), from);
        }
    }
    d.set("workload", "input_tokens", input, ifrom);
    match first_of(
        f,
        d,
        "prompt-output-tokens-mean",
        "workload.output_tokens.mean",
    )? {
        Some(osl) => {
            let sd = f.num("prompt-output-tokens-stddev");
            d.set(
                "workload",
                "output_tokens",
                crate::peers::command_line::spread(osl, sd, None, None),
                f.from("prompt-output-tokens-mean"),
            );
            if body.get("ignore_eos") != Some(&Value::Bool(true)) {
                d.set("workload", "enforce_output_length", "false".into(), "no --extra-inputs ignore_eos:true: AIPerf caps the answer (max_completion_tokens) but lets the model stop earlier");
            }
        }
        None => {
            d.set(
                "workload",
                "enforce_output_length",
                "false".into(),
                "no --osl: the model decides each answer's length, as under AIPerf",
            );
            d.annotate("no --output-tokens-mean: AIPerf lets the model decide each answer's length; goodput does too, with workload.output_tokens as the cap it plans");
        }
    }
    d.annotate("synthetic prompts: AIPerf samples text from a corpus counted with the model's tokenizer; goodput's prompts are words counted by its built-in tokenizer. For lengths in the model's tokens, set workload.tokenizer = \"server\".");
    Ok(())
}

/// `--input-file` of single-turn prompts: the dataset, its prompts verbatim.
fn dataset(d: &mut Draft, path: &str, kind: &str, from: &str) {
    if kind != "single_turn" {
        d.annotate(format!("--custom-dataset-type {kind}: goodput reads JSON lines of single prompts (or a Mooncake trace); this file is taken as that, and may not read"));
    }
    d.str("workload", "prompt_source", "dataset", from.to_owned());
    d.str("workload", "dataset", path, from.to_owned());
    d.str("workload", "dataset_format", "jsonl", from.to_owned());
    d.set(
        "workload",
        "input_tokens",
        "{ dist = \"dataset\" }".into(),
        "each prompt's own length",
    );
    d.set(
        "workload",
        "enforce_output_length",
        "false".into(),
        "a dataset: answers end where the model stops",
    );
    d.annotate(format!("--input-file {path}: AIPerf's single_turn rows carry `text` (or `texts`); goodput reads `prompt`. Rename the field, or export the prompts as goodput's JSON lines."));
}

/// `--custom-dataset-type mooncake_trace`: goodput replays the trace, blocks and timestamps.
fn trace(f: &Flags, d: &mut Draft, path: &str) {
    let from = format!("{} {}", f.from("input-file"), f.from("custom-dataset-type"));
    d.str("load", "kind", "open", from.clone());
    d.str("load", "arrival", "trace", from.clone());
    d.str("load", "trace", path, from);
    if !f.on("fixed-schedule") {
        d.annotate("--custom-dataset-type mooncake_trace without --fixed-schedule: AIPerf sends the trace's prompts at its own concurrency or rate and ignores their timestamps; goodput replays the trace at its timestamps (load.speedup scales them)");
    }
}

fn load(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let trace = f.text("custom-dataset-type") == Some("mooncake_trace");
    let concurrency = first_of(f, d, "concurrency", "load.concurrency")?;
    let rate = first_of(f, d, "request-rate", "load.rate")?;
    if !trace {
        match (rate, concurrency) {
            (Some(r), c) => open(f, d, r, c)?,
            (None, Some(c)) => closed(d, c, f.from("concurrency")),
            (None, None) => closed(d, 1.0, "AIPerf's default: --concurrency 1".into()),
        }
    }
    let count = first_of(f, d, "request-count", "load.requests")?;
    let duration = first_of(f, d, "benchmark-duration", "load.duration")?;
    match (count, duration) {
        (Some(n), _) => {
            d.set("load", "requests", format!("{n}"), f.from("request-count"));
            if duration.is_some() {
                d.annotate(format!("--request-count with --benchmark-duration: AIPerf stops at whichever comes first; goodput plans the {n} requests"));
            }
        }
        (None, Some(s)) => {
            d.str(
                "load",
                "duration",
                &format!("{s}s"),
                f.from("benchmark-duration"),
            );
            if f.has("benchmark-grace-period") {
                d.annotate(format!("{}: goodput waits for every request it sent (up to its timeout) rather than a grace period", f.from("benchmark-grace-period")));
            }
        }
        (None, None) if trace => {}
        (None, None) => {
            let n = (concurrency.unwrap_or(1.0) * 2.0).max(10.0);
            d.set(
                "load",
                "requests",
                format!("{n}"),
                "AIPerf's default for synthetic data: max(10, 2 × concurrency)",
            );
        }
    }
    match (f.num("warmup-request-count"), f.num("warmup-duration")) {
        (Some(n), _) => d.set(
            "warmup",
            "requests",
            format!("{n}"),
            f.from("warmup-request-count"),
        ),
        (None, Some(s)) => d.str(
            "warmup",
            "duration",
            &format!("{s}s"),
            f.from("warmup-duration"),
        ),
        (None, None) => {
            d.set(
                "warmup",
                "requests",
                "0".into(),
                "AIPerf's default: no warm-up",
            );
            d.annotate("no warm-up (AIPerf's default): the first requests' cold start is in the measured statistics");
        }
    }
    Ok(())
}

fn closed(d: &mut Draft, c: f64, from: String) {
    d.str("load", "kind", "closed", from.clone());
    d.set(
        "load",
        "concurrency",
        format!("{}", c.round().max(1.0)),
        from,
    );
    d.annotate("--concurrency: AIPerf keeps that many requests in flight, each new one sent when one finishes: a closed loop, which slows with the server. Its latencies cannot support tail-latency or capacity claims; goodput's open loop (load.kind = \"open\", load.rate) can.");
}

/// `--request-rate`: an open loop with AIPerf's arrival pattern.
fn open(f: &Flags, d: &mut Draft, rate: f64, concurrency: Option<f64>) -> Result<(), ImportError> {
    d.str(
        "load",
        "kind",
        "open",
        format!("{} (an arrival rate)", f.from("request-rate")),
    );
    d.set("load", "rate", format!("{rate}"), f.from("request-rate"));
    let pattern = f.text("arrival-pattern").unwrap_or("poisson");
    let pfrom = match f.has("arrival-pattern") {
        true => f.from("arrival-pattern"),
        false => "AIPerf's default --arrival-pattern poisson".into(),
    };
    match pattern {
        "poisson" | "constant" => d.str("load", "arrival", pattern, pfrom),
        "gamma" => {
            let s = f.num("arrival-smoothness").unwrap_or(1.0);
            if s <= 0.0 {
                return Err(ImportError(format!(
                    "`--arrival-smoothness {s}`: must be > 0"
                )));
            }
            d.str("load", "arrival", "gamma", pfrom);
            d.set(
                "load",
                "burstiness",
                format!("{s}"),
                f.from("arrival-smoothness"),
            );
        }
        "concurrency-burst" => {
            d.str("load", "arrival", "poisson", pfrom);
            d.annotate("--arrival-pattern concurrency-burst: AIPerf sends bursts up to its concurrency; goodput draws Poisson arrivals at the rate instead");
        }
        other => {
            return Err(ImportError(format!(
                "`--arrival-pattern {other}`: not an arrival pattern of AIPerf {VERSION} (constant, poisson, gamma, concurrency-burst)"
            )));
        }
    }
    if let Some(c) = concurrency {
        d.annotate(format!("--concurrency {c} with --request-rate {rate}: AIPerf holds a request back until one of its {c} slots frees, so past that point its schedule slips (partly closed loop) and latency counts from the late send. goodput keeps the schedule and counts from the intended send; load.max_in_flight would drop requests past {c} rather than delay them, so it is not set."));
    }
    Ok(())
}

/// `--goodput "time_to_first_token:100 inter_token_latency:3.4 request_latency:250"`.
fn slo(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let Some(text) = f.text("goodput") else {
        return Ok(());
    };
    for item in text.split_whitespace() {
        let bad = || ImportError(format!("`--goodput {text}`: `{item}` is not METRIC:VALUE"));
        let (metric, v) = item.split_once(':').ok_or_else(bad)?;
        let v: f64 = v.parse().map_err(|_| bad())?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(ImportError(format!(
                "`--goodput {text}`: `{item}` must be > 0"
            )));
        }
        let key = match metric {
            "time_to_first_token" => "ttft_ms",
            "inter_token_latency" => "tpot_ms",
            "request_latency" => "e2e_ms",
            other => {
                d.annotate(format!("--goodput {other}:{v}: goodput's SLO takes TTFT, TPOT and E2E thresholds; this one is not mapped"));
                continue;
            }
        };
        d.set("slo", key, format!("{v}"), format!("--goodput {item}"));
    }
    d.annotate("--goodput: AIPerf counts the requests that meet every threshold, as goodput's attainment does; goodput also judges the thresholds at slo.percentile (p99 by default) and says whether the sample supports it");
    Ok(())
}

/// AIPerf's synthetic images (`--image-width-mean` and `--image-height-mean` above 0): each
/// turn carries `--image-batch-size` of them, each of a width and height drawn from normal
/// distributions. goodput's sizes are a list: the mean alone, or with a spread the mean and
/// one and two standard deviations either side, weighted as the normal density weighs them.
fn images(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let (w, h) = (
        f.num("image-width-mean").unwrap_or(0.0),
        f.num("image-height-mean").unwrap_or(0.0),
    );
    if w <= 0.0 || h <= 0.0 {
        return Ok(());
    }
    let (sw, sh) = (
        f.num("image-width-stddev").unwrap_or(0.0).max(0.0),
        f.num("image-height-stddev").unwrap_or(0.0).max(0.0),
    );
    let from = format!(
        "{}, {}",
        f.from("image-width-mean"),
        f.from("image-height-mean")
    );
    let at = |k: f64| {
        let side = |m: f64, s: f64| (m + k * s).round().max(1.0) as u32;
        (side(w, sw), side(h, sh))
    };
    let spread = sw > 0.0 || sh > 0.0;
    let ks: &[(f64, f64)] = if spread {
        // The standard normal density at −2, −1, 0, 1, 2.
        &[
            (-2.0, 0.054),
            (-1.0, 0.242),
            (0.0, 0.399),
            (1.0, 0.242),
            (2.0, 0.054),
        ]
    } else {
        &[(0.0, 1.0)]
    };
    let mut sizes = Vec::new();
    for &(k, _) in ks {
        let (x, y) = at(k);
        crate::contract::images::check_pixels(x, y)
            .map_err(|why| ImportError(format!("{from}: {why}")))?;
        sizes.push(crate::peers::command_line::toml_string(&format!("{x}x{y}")));
    }
    let n = f.num("image-batch-size").unwrap_or(1.0).max(0.0) as u32;
    d.set(
        "workload.images",
        "count",
        format!("{{ dist = \"fixed\", value = {n} }}"),
        f.from("image-batch-size"),
    );
    d.set(
        "workload.images",
        "sizes",
        format!("[{}]", sizes.join(", ")),
        from.clone(),
    );
    if spread {
        let weights: Vec<String> = ks.iter().map(|k| format!("{}", k.1)).collect();
        d.set(
            "workload.images",
            "size_weights",
            format!("[{}]", weights.join(", ")),
            format!(
                "{}, {}",
                f.from("image-width-stddev"),
                f.from("image-height-stddev")
            ),
        );
        d.annotate("--image-width-stddev/--image-height-stddev: AIPerf draws each side from a normal distribution; goodput draws from five sizes, the mean and one and two standard deviations either side, weighted by the normal density (the same mean, a coarser spread)");
    }
    if let Some(fmt) = f
        .text("image-format")
        .filter(|x| !x.eq_ignore_ascii_case("png"))
    {
        d.annotate(format!("--image-format {fmt}: goodput generates PNG images (of random pixels, so no two repeat); an image's tokens depend on its size, not its format, but its upload bytes differ"));
    }
    d.annotate("AIPerf's images are its source pictures resized; goodput's are random pixels, distinct per request and per run, so no encoder or prefix cache serves them (set workload.images.tokens to the model's rule to check the server's image tokens)");
    Ok(())
}

/// Every flag given that the mapping above does not read: output and telemetry flags need no
/// counterpart, the rest are named as not mapped.
fn rest_named(f: &Flags, d: &mut Draft) {
    let mut output = Vec::new();
    let mut other = Vec::new();
    for g in &f.given {
        let n = g.name.as_str();
        if MAPPED.contains(&n) {
            continue;
        }
        let quiet = [
            "ui-type",
            "output-artifact-dir",
            "profile-export-prefix",
            "export-level",
        ];
        let shows = n.starts_with("export-")
            || n.starts_with("mlflow-")
            || n.starts_with("wandb-")
            || n.starts_with("otel-")
            || n.contains("plot")
            || n.contains("telemetry")
            || n.contains("server-metrics")
            || quiet.contains(&n);
        match shows {
            true => output.push(format!("--{n}")),
            false => other.push(f.from(n)),
        }
    }
    if !output.is_empty() {
        d.annotate(format!("{}: no counterpart needed: goodput keeps every run's raw records, command and environment in a bundle (its server metrics from [measurement] metrics_url)", output.join(", ")));
    }
    for o in other {
        d.annotate(format!("{o}: not mapped; the contract runs without it"));
    }
}
