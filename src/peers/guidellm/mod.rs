//! `guidellm benchmark` (GuideLLM 0.6.1, the version whose report `goodput audit` reads) as a
//! goodput contract. The flag set is the one `guidellm.__main__`'s `benchmark run` command
//! declares at that version, with click's rules: `--flag value` or `--flag=value`, a later use
//! of a single-valued flag replacing an earlier one, `--data`, `--rate` and `--outputs`
//! collecting every use.

pub mod result;

use serde_json::Value;

use crate::peers::command_line::{Draft, ImportError, Imported};
use crate::peers::flags::{Flags, Spec, Takes, Takes::*};

/// The version whose flags this module knows.
pub const VERSION: &str = "0.6.1";

/// Every flag of `guidellm benchmark run` 0.6.1.
const FLAGS: &[(&str, Takes)] = &[
    ("help", Nothing),
    ("scenario", Text),
    ("target", Text),
    ("data", Repeat),
    ("profile", Text),
    ("rate", Repeat),
    ("backend", Text),
    ("backend-kwargs", Text),
    ("model", Text),
    ("request-format", Text),
    ("processor", Text),
    ("processor-args", Text),
    ("data-args", Repeat),
    ("data-samples", Int),
    ("data-column-mapper", Text),
    ("data-preprocessors", Repeat),
    ("data-preprocessors-kwargs", Text),
    ("data-finalizer", Text),
    ("data-sampler", Text),
    ("data-num-workers", Int),
    ("dataloader-kwargs", Text),
    ("random-seed", Int),
    ("output-dir", Text),
    ("outputs", Repeat),
    ("output-path", Text),
    ("disable-console", Nothing),
    ("disable-console-interactive", Nothing),
    ("warmup", Text),
    ("cooldown", Text),
    ("rampup", Float),
    ("sample-requests", Int),
    ("max-seconds", Float),
    ("max-requests", Int),
    ("max-errors", Int),
    ("max-error-rate", Float),
    ("max-global-error-rate", Float),
    ("over-saturation", Text),
    ("detect-saturation", Nothing),
];

/// The legacy spellings 0.6.1 still accepts.
const ALIASES: &[(&str, &str)] = &[
    ("-c", "scenario"),
    ("rate-type", "profile"),
    ("backend-type", "backend"),
    ("backend-args", "backend-kwargs"),
    ("request-type", "request-format"),
    ("disable-console-outputs", "disable-console"),
    ("disable-progress", "disable-console-interactive"),
    ("warmup-percent", "warmup"),
    ("cooldown-percent", "cooldown"),
    ("output-sampling", "sample-requests"),
    ("default-over-saturation", "detect-saturation"),
];

const NEWER: &str = "a flag of GuideLLM 0.7's `guidellm run` (kind=…,key=… options), not of 0.6.1's `guidellm benchmark`";

/// Flags of other versions, and what became of them.
const GONE: &[(&str, &str)] = &[
    ("constraint", NEWER),
    ("tokenizer", NEWER),
    ("seed", NEWER),
    ("output", NEWER),
    ("metrics", NEWER),
    ("data-loader", NEWER),
    ("data-preprocessor", NEWER),
    ("override", NEWER),
    ("config", NEWER),
    ("label", NEWER),
    (
        "output-extras",
        "an older version's flag: 0.6.1 writes no extras into its report",
    ),
    (
        "request-formatter-kwargs",
        "a flag of another version: at 0.6.1 request fields go in --backend-kwargs '{\"extras\": {\"body\": …}}'",
    ),
    (
        "max-concurrency",
        "not a flag of guidellm benchmark 0.6.1: --profile throughput --rate N caps the requests in flight",
    ),
];

const SPEC: Spec = Spec {
    tool: "guidellm benchmark",
    version: VERSION,
    flags: FLAGS,
    aliases: ALIASES,
    gone: GONE,
    underscores: false,
    negatable: false,
    lists_accumulate: false,
};

/// The profiles 0.6.1 accepts.
const PROFILES: &[&str] = &[
    "synchronous",
    "concurrent",
    "throughput",
    "constant",
    "poisson",
    "async",
    "sweep",
];

/// A command line of `guidellm benchmark` (with or without `guidellm benchmark [run]` in
/// front) as a contract.
pub fn import(args: &[String]) -> Result<Imported, ImportError> {
    let rest = strip_command(args)?;
    let f = SPEC.read(rest, "GuideLLM")?;
    let mut d = Draft::named(
        &format!("GuideLLM {VERSION} (`guidellm benchmark`)"),
        "imported-guidellm",
    );
    target(&f, &mut d)?;
    workload(&f, &mut d)?;
    load(&f, &mut d)?;
    unmeasured(&f, &mut d);
    d.annotate("TPOT: GuideLLM's time_per_output_token is E2E / output tokens, the first token's wait included; its inter_token_latency is (E2E − TTFT) / (tokens − 1). goodput's TPOT is the second kind, per token after the first chunk (docs/guide/measurement.md).");
    d.finish(&format!(
        "guidellm benchmark {}",
        crate::peers::command_line::shown(rest)
    ))
}

/// The arguments after `guidellm benchmark [run]`; another version's or tool's command is
/// refused.
fn strip_command(args: &[String]) -> Result<&[String], ImportError> {
    let word = |i: usize| args.get(i).map(String::as_str);
    if word(0).is_some_and(|w| w.rsplit('/').next() == Some("guidellm")) {
        return match (word(1), word(2)) {
            (Some("benchmark"), Some("run")) => Ok(&args[3..]),
            (Some("benchmark"), _) => Ok(&args[2..]),
            (Some("run"), _) => Err(ImportError(format!(
                "`guidellm run`: GuideLLM 0.7's command (kind=…,key=… options); goodput imports GuideLLM {VERSION}'s `guidellm benchmark`"
            ))),
            _ => Err(ImportError(format!(
                "`{}`: not a `guidellm benchmark` command (goodput imports that one of GuideLLM's commands)",
                crate::peers::command_line::shown(&args[..args.len().min(2)])
            ))),
        };
    }
    match crate::peers::command_line::other_tool(args) {
        Some(tool) => Err(ImportError(format!(
            "`{}`: a command of {tool}, not of guidellm benchmark",
            args[0]
        ))),
        None => Ok(args),
    }
}

/// A JSON object a flag carries, or an error naming the flag.
fn object(f: &Flags, flag: &str) -> Result<Option<serde_json::Map<String, Value>>, ImportError> {
    let Some(text) = f.text(flag) else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        _ => Err(ImportError(format!(
            "`--{flag} {text}`: not a JSON object (GuideLLM reads it as one)"
        ))),
    }
}

fn target(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let url = f.text("target").ok_or_else(|| {
        ImportError("no `--target`: GuideLLM needs the server's URL (and so does goodput)".into())
    })?;
    // GuideLLM strips a trailing `/v1` and adds the route itself, as goodput does.
    let url = url.trim_end_matches('/');
    let url = url.strip_suffix("/v1").unwrap_or(url);
    d.url(url, f.from("target"));
    match f.text("backend").unwrap_or("openai_http") {
        "openai_http" => {}
        "vllm_python" => {
            return Err(ImportError("`--backend vllm_python`: GuideLLM runs vLLM inside its own process; goodput measures a server: start `vllm serve` and give its URL as --target".into()));
        }
        other => {
            return Err(ImportError(format!(
                "`--backend {other}`: not a backend of GuideLLM {VERSION} (openai_http, vllm_python)"
            )));
        }
    }
    let format = f.text("request-format").unwrap_or("/v1/chat/completions");
    let api = match format {
        "/v1/chat/completions" | "chat_completions" => "openai-chat",
        "/v1/completions" | "text_completions" => "openai-completions",
        "/v1/responses" => "openai-responses",
        "/v1/audio/transcriptions"
        | "/v1/audio/translations"
        | "audio_transcriptions"
        | "audio_translations"
        | "/pooling" => {
            d.annotate(format!("--request-format {format}: goodput sends no audio or pooling requests; the contract sends chat completions of the same lengths"));
            "openai-chat"
        }
        other => {
            return Err(ImportError(format!(
                "`--request-format {other}`: not a request format of GuideLLM {VERSION} (/v1/completions, /v1/chat/completions, /v1/responses, /v1/audio/…, /pooling, or text_completions, chat_completions)"
            )));
        }
    };
    let from = match f.has("request-format") {
        true => f.from("request-format"),
        false => "GuideLLM's default request format, /v1/chat/completions".into(),
    };
    d.str("target", "api", api, from);
    match f.text("model") {
        Some(m) => d.str("target", "model", m, f.from("model")),
        None => d.annotate(
            "no --model: goodput asks the server (/v1/models) for its model, as GuideLLM does",
        ),
    }
    backend_kwargs(f, d)
}

/// `--backend-kwargs '{…}'`: the key, request fields, and the client's own settings.
fn backend_kwargs(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let Some(kw) = object(f, "backend-kwargs")? else {
        if f.text("target").is_some_and(|t| t.starts_with("https")) {
            d.annotate("https: GuideLLM does not verify the server's certificate by default (verify = false); goodput does, and target.tls.ca_file trusts one");
        }
        return Ok(());
    };
    let from = "--backend-kwargs";
    for (k, v) in &kw {
        match k.as_str() {
            "api_key" => {
                d.secret(v.as_str().unwrap_or_default());
                d.api_key(&format!("{from} api_key"));
            }
            "extras" => {
                if let Some(body) = v["body"].as_object() {
                    d.body(body, &format!("{from} extras.body"));
                }
                if let Some(h) = v["headers"].as_object() {
                    for (k, v) in h {
                        let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                        d.header(k, &v, &format!("{from} extras.headers"));
                    }
                }
            }
            "stream" if v == &Value::Bool(false) => {
                d.set("workload", "stream", "false".into(), format!("{from} stream"))
            }
            "verify" if v == &Value::Bool(false) => d.annotate(format!(
                "{from} verify false: goodput verifies TLS certificates; target.tls.ca_file trusts one"
            )),
            "http2" => d.annotate(format!(
                "{from} http2: goodput speaks HTTP/1.1 to the target (one connection per request in flight)"
            )),
            other => d.annotate(format!(
                "{from} {other}: a setting of GuideLLM's client with no counterpart in the contract"
            )),
        }
    }
    Ok(())
}

fn workload(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let (seed, from) = f.or("random-seed", 42.0);
    d.set("workload", "seed", format!("{seed}"), from);
    let data = f.get("data").map(|g| g.values.clone()).unwrap_or_default();
    let Some(first) = data.first() else {
        if let Some(s) = f.text("scenario") {
            return Err(ImportError(format!(
                "`--scenario {s}`: GuideLLM's scenario supplies the data, profile and limits, and goodput does not read scenarios; give them as flags (--data, --profile, --rate, --max-requests)"
            )));
        }
        return Err(ImportError("no `--data`: GuideLLM 0.6.1 needs one (prompt_tokens=N,output_tokens=M, a file or a Hugging Face dataset)".into()));
    };
    if data.len() > 1 {
        d.annotate(format!("--data given {} times: GuideLLM draws from every source; the contract takes the first ({first})", data.len()));
    }
    match synthetic(first)? {
        Some(cfg) => synthetic_lengths(d, &cfg, first)?,
        None => file(f, d, first),
    }
    for flag in [
        "data-args",
        "data-column-mapper",
        "data-preprocessors",
        "data-preprocessors-kwargs",
        "data-finalizer",
        "data-sampler",
        "data-samples",
        "data-num-workers",
        "dataloader-kwargs",
    ] {
        if f.has(flag) {
            d.annotate(format!(
                "{}: how GuideLLM loads its dataset; goodput reads workload.dataset (JSON lines with a `prompt` field) as it is",
                f.from(flag)
            ));
        }
    }
    // GuideLLM 0.6.1 has no synthetic images: a dataset's image column (found by name, or
    // named in the column mapper) is sent as image parts.
    if f.text("data-column-mapper")
        .is_some_and(|m| m.contains("image"))
    {
        d.annotate("--data-column-mapper: GuideLLM sends the dataset's image column as image parts; goodput sends no images from a dataset: put them in a folder and set [workload.images] folder (and count), or generated ones of the same sizes (sizes)");
    }
    for flag in ["processor", "processor-args"] {
        if f.has(flag) {
            d.annotate(format!("{}: GuideLLM counts tokens with this tokenizer; goodput counts with workload.tokenizer (\"server\": the target's own)", f.from(flag)));
        }
    }
    Ok(())
}

/// `--data` as synthetic settings (`prompt_tokens=…,output_tokens=…` or its JSON), or None
/// for a file or a dataset name.
fn synthetic(data: &str) -> Result<Option<serde_json::Map<String, Value>>, ImportError> {
    let bad = |why: &str| ImportError(format!("`--data {data}`: {why}"));
    if data.trim_start().starts_with('{') {
        return match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(m)) => Ok(Some(m)),
            _ => Err(bad("not a JSON object")),
        };
    }
    if !data.contains('=') {
        return Ok(None);
    }
    let mut m = serde_json::Map::new();
    for pair in data.split(',') {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad("synthetic data is key=value pairs separated by commas"))?;
        let v = match v.trim().parse::<f64>() {
            Ok(n) => serde_json::json!(n),
            Err(_) => Value::String(v.trim().to_owned()),
        };
        m.insert(k.trim().to_owned(), v);
    }
    Ok(Some(m))
}

/// Synthetic prompts: their lengths (as GuideLLM draws them), turns and shared prefixes.
fn synthetic_lengths(
    d: &mut Draft,
    cfg: &serde_json::Map<String, Value>,
    data: &str,
) -> Result<(), ImportError> {
    let from = format!("--data {data}");
    let n = |k: &str| cfg.get(k).and_then(Value::as_f64);
    for (what, key) in [("prompt", "input_tokens"), ("output", "output_tokens")] {
        let mean = n(&format!("{what}_tokens")).ok_or_else(|| {
            ImportError(format!(
                "`--data {data}`: synthetic data needs {what}_tokens (GuideLLM {VERSION} requires it)"
            ))
        })?;
        if mean <= 0.0 {
            return Err(ImportError(format!(
                "`--data {data}`: {what}_tokens must be > 0"
            )));
        }
        let sd = n(&format!("{what}_tokens_stdev"));
        // GuideLLM clamps a normal draw to ±5 standard deviations unless min/max are given.
        let lo = n(&format!("{what}_tokens_min")).or(sd.map(|s| (mean - 5.0 * s).max(1.0).round()));
        let hi = n(&format!("{what}_tokens_max")).or(sd.map(|s| (mean + 5.0 * s).round()));
        let mut len = crate::peers::command_line::spread(mean, sd, lo, hi);
        if key == "input_tokens" {
            if let Some(p) = n("prefix_tokens").filter(|p| *p > 0.0) {
                // GuideLLM puts the prefix in front of prompt_tokens; goodput counts both.
                len = crate::peers::vllm_bench::shift(&len, p);
                d.str("workload", "prefix_cache", "shared", from.clone());
                d.set(
                    "workload",
                    "shared_prefix_tokens",
                    format!("{p}"),
                    from.clone(),
                );
                let count = n("prefix_count").unwrap_or(1.0);
                d.set("workload", "prefixes", format!("{count}"), from.clone());
            }
        }
        d.set("workload", key, len, from.clone());
    }
    if n("turns").is_some_and(|t| t > 1.0) {
        d.annotate(format!("{from}: turns > 1 are GuideLLM's multi-turn conversations; goodput's are [workload.session] (not set here: each request is one turn)"));
    }
    for k in cfg.keys() {
        let known = [
            "prompt_tokens",
            "prompt_tokens_stdev",
            "prompt_tokens_min",
            "prompt_tokens_max",
            "output_tokens",
            "output_tokens_stdev",
            "output_tokens_min",
            "output_tokens_max",
            "turns",
            "prefix_tokens",
            "prefix_count",
            "samples",
        ];
        if !known.contains(&k.as_str()) {
            d.annotate(format!(
                "--data {k}: not a synthetic-data setting goodput maps (GuideLLM accepts and ignores unknown keys)"
            ));
        }
    }
    if cfg.contains_key("samples") {
        d.annotate("--data samples: GuideLLM pre-generates that many prompts and cycles them; goodput draws a fresh prompt per request from workload.seed");
    }
    d.annotate("synthetic data: GuideLLM samples text from a built-in corpus, counted with the model's tokenizer (--processor); goodput's prompts are words counted by its built-in tokenizer. For lengths in the model's tokens, set workload.tokenizer = \"server\".");
    Ok(())
}

/// `--data PATH` or a Hugging Face dataset: a JSON lines file becomes the dataset, the rest is
/// named as not read.
fn file(f: &Flags, d: &mut Draft, data: &str) {
    let from = f.from("data");
    let lower = data.to_ascii_lowercase();
    if lower.ends_with(".jsonl") || lower.ends_with(".json") {
        d.str("workload", "prompt_source", "dataset", from.clone());
        d.str("workload", "dataset", data, from.clone());
        d.str("workload", "dataset_format", "jsonl", from.clone());
        d.set(
            "workload",
            "input_tokens",
            "{ dist = \"dataset\" }".into(),
            "each prompt's own length",
        );
        d.annotate(format!("--data {data}: goodput reads JSON lines with a `prompt` field (and optional `output_tokens`); GuideLLM also takes other column names and whole JSON arrays"));
    } else {
        d.annotate(format!("--data {data}: goodput cannot read this source (a Hugging Face dataset, CSV, text or Parquet file); the contract keeps goodput's synthetic prompts at its default lengths. Export it as JSON lines with a `prompt` field and set workload.dataset."));
    }
    d.set(
        "workload",
        "enforce_output_length",
        "false".into(),
        "a dataset without output lengths: answers end where the model stops, as GuideLLM's do",
    );
}

fn load(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let profile = f.text("profile").unwrap_or("sweep");
    if !PROFILES.contains(&profile) {
        return Err(ImportError(format!(
            "`--profile {profile}`: not a profile of GuideLLM {VERSION} ({})",
            PROFILES.join(", ")
        )));
    }
    let rates = rates(f)?;
    let pfrom = match f.has("profile") {
        true => f.from("profile"),
        false => "GuideLLM's default --profile sweep".into(),
    };
    let first = rates.first().copied();
    let rfrom = f.from("rate");
    match profile {
        "synchronous" => {
            closed(d, 1.0, format!("{pfrom}: one request at a time"));
            if !rates.is_empty() {
                d.annotate(format!(
                    "{rfrom}: dropped: a synchronous profile has no rate (one request at a time, each sent when the last answer ends); for a rate, use --profile constant or poisson"
                ));
            }
        }
        "concurrent" => {
            let n = first.ok_or_else(|| {
                ImportError("`--profile concurrent` needs --rate (the number of streams)".into())
            })?;
            closed(d, n, format!("{pfrom}, {rfrom} (streams)"));
            several(d, &rates, "load.concurrency");
        }
        "throughput" => {
            let n = first.unwrap_or(0.0);
            match n > 0.0 {
                true => closed(d, n, format!("{pfrom}, {rfrom} (the most in flight)")),
                false => closed(
                    d,
                    requests_or_default(f),
                    format!("{pfrom}: every request at once"),
                ),
            }
            d.annotate("--profile throughput: GuideLLM sends as fast as the server takes requests, to find its maximum throughput; goodput's closed loop at that concurrency is the same load");
        }
        "constant" | "poisson" | "async" => {
            let r = first.ok_or_else(|| {
                ImportError(format!(
                    "`--profile {profile}` needs --rate (requests per second)"
                ))
            })?;
            d.str("load", "kind", "open", format!("{pfrom} (an arrival rate)"));
            d.set("load", "rate", format!("{r}"), rfrom);
            let arrival = if profile == "poisson" {
                "poisson"
            } else {
                "constant"
            };
            d.str("load", "arrival", arrival, pfrom);
            several(d, &rates, "load.rate");
        }
        _ => {
            closed(d, 1.0, format!("{pfrom}: its first benchmark, synchronous"));
            d.annotate(format!("{pfrom}: GuideLLM runs a synchronous benchmark, a throughput benchmark, then {} constant rates between the two rates it measured, chosen at run time. This contract is the first (one request at a time). For the curve, run `goodput sweep FILE --vary load.rate=…` over an open loop; for the highest rate that meets an SLO, add [slo] and run `goodput sweep FILE --capacity`.", first.map_or(8.0, |n| (n - 2.0).max(0.0))));
        }
    }
    budget(f, d);
    transients(f, d)?;
    if f.num("rampup").is_some_and(|r| r > 0.0) {
        d.annotate(format!("{}: not mapped; goodput's load program ([[load.stage]] shape = \"ramp\") ramps the rate", f.from("rampup")));
    }
    for flag in ["max-errors", "max-error-rate", "max-global-error-rate"] {
        if f.has(flag) {
            d.annotate(format!("{}: GuideLLM stops at that many errors; goodput runs to its end, counts every error and judges the run by them", f.from(flag)));
        }
    }
    if f.has("over-saturation") || f.has("detect-saturation") {
        d.annotate("--over-saturation/--detect-saturation: GuideLLM stops a benchmark it finds over-saturated; goodput runs it to its end and its overload rule calls the run INVALID, saying when the queue began to grow");
    }
    Ok(())
}

/// `--rate` values (repeated, or comma-separated in one use).
fn rates(f: &Flags) -> Result<Vec<f64>, ImportError> {
    let mut out = Vec::new();
    for v in f
        .get("rate")
        .map(|g| g.values.as_slice())
        .unwrap_or_default()
    {
        for part in v.split(',') {
            let r: f64 = part.trim().parse().map_err(|_| {
                ImportError(format!(
                    "`--rate {v}`: not a number (or comma-separated numbers)"
                ))
            })?;
            if r <= 0.0 || !r.is_finite() {
                return Err(ImportError(format!("`--rate {v}`: must be > 0")));
            }
            out.push(r);
        }
    }
    Ok(out)
}

fn closed(d: &mut Draft, n: f64, from: String) {
    d.str("load", "kind", "closed", from.clone());
    d.set(
        "load",
        "concurrency",
        format!("{}", n.round().max(1.0)),
        from,
    );
    d.annotate("closed loop (GuideLLM's synchronous, concurrent and throughput profiles): each stream waits for its answer before sending again, so a slow server slows the load. Its latencies cannot support tail-latency or capacity claims; goodput's open loop (load.kind = \"open\", load.rate) can.");
}

/// Several rates: GuideLLM runs a benchmark per value; the contract measures the first.
fn several(d: &mut Draft, values: &[f64], key: &str) {
    if values.len() > 1 {
        let list: Vec<String> = values.iter().map(|v| format!("{v}")).collect();
        d.annotate(format!("--rate {}: GuideLLM runs one benchmark per value; this contract measures the first. For all of them: `goodput sweep FILE --vary {key}={}`", list.join(","), list.join(",")));
    }
}

/// The request budget when the command states none.
fn requests_or_default(f: &Flags) -> f64 {
    f.num("max-requests").unwrap_or(1000.0)
}

/// `--max-requests` / `--max-seconds`: how long each benchmark runs.
fn budget(f: &Flags, d: &mut Draft) {
    match (f.num("max-requests"), f.num("max-seconds")) {
        (Some(n), secs) => {
            d.set("load", "requests", format!("{n}"), f.from("max-requests"));
            if secs.is_some() {
                d.annotate(format!("--max-requests with --max-seconds: GuideLLM stops at whichever comes first; goodput plans the {n} requests"));
            }
        }
        (None, Some(s)) => d.str("load", "duration", &format!("{s}s"), f.from("max-seconds")),
        (None, None) => {
            d.set(
                "load",
                "requests",
                "1000".into(),
                "no --max-requests or --max-seconds: goodput plans 1000",
            );
            d.annotate("no --max-requests or --max-seconds: GuideLLM runs until its data runs out; goodput needs a budget and plans 1000 requests");
        }
    }
}

/// `--warmup` / `--cooldown`: a fraction (< 1) or an amount of the benchmark.
fn transients(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let parse = |flag: &str| -> Result<Option<f64>, ImportError> {
        match f.text(flag) {
            None => Ok(None),
            Some(t) => match t.trim().parse::<f64>() {
                Ok(x) if x >= 0.0 && x.is_finite() => Ok(Some(x)),
                _ => Err(ImportError(format!(
                    "`--{flag} {t}`: a fraction below 1 or an amount (seconds or requests) from 1 up"
                ))),
            },
        }
    };
    let seconds = f.num("max-seconds");
    // The requests the contract plans (budget(): 1000 when the command states no length).
    let requests = f.num("max-requests").unwrap_or(1000.0);
    if let Some(w) = parse("warmup")? {
        let from = f.from("warmup");
        match (w < 1.0, seconds) {
            // GuideLLM prefers a duration when the benchmark has one.
            (true, Some(s)) => d.str(
                "warmup",
                "duration",
                &format!("{}s", w * s),
                format!("{from} of --max-seconds {s}"),
            ),
            (true, None) => d.set(
                "warmup",
                "requests",
                format!("{}", (w * requests).ceil()),
                format!("{from} of the {requests} requests planned"),
            ),
            (false, Some(_)) => d.str("warmup", "duration", &format!("{w}s"), from),
            (false, None) => d.set("warmup", "requests", format!("{}", w.round()), from),
        }
        d.annotate("--warmup: GuideLLM leaves the warm-up out of its statistics; so does goodput, and it reports the warm-up as cold start rather than dropping it");
    } else {
        d.set(
            "warmup",
            "requests",
            "0".into(),
            "GuideLLM's default: no warm-up",
        );
        d.annotate("no warm-up (GuideLLM's default): the first requests' cold start is in the measured statistics");
    }
    if parse("cooldown")?.is_some_and(|c| c > 0.0) {
        d.annotate(format!("{}: GuideLLM leaves the last part out of its statistics; goodput keeps every steady request and measures until the last finishes", f.from("cooldown")));
    }
    Ok(())
}

/// Flags that change what GuideLLM writes or shows, not what it measures.
fn unmeasured(f: &Flags, d: &mut Draft) {
    let output = [
        "output-dir",
        "outputs",
        "output-path",
        "disable-console",
        "disable-console-interactive",
        "sample-requests",
    ];
    let given: Vec<String> = output
        .iter()
        .filter(|n| f.has(n))
        .map(|n| format!("--{n}"))
        .collect();
    if !given.is_empty() {
        d.annotate(format!("{}: no counterpart needed: goodput keeps every run's raw records, command and environment in a bundle, and writes its report as text, JSON and HTML", given.join(", ")));
    }
    if let Some(s) = f.text("scenario") {
        d.annotate(format!("--scenario {s}: GuideLLM's scenario file is not read; only the flags on the command line are in this contract"));
    }
}
