//! `vllm bench serve` (vLLM 0.32.0) as a goodput contract. The flag set is the one
//! `vllm.benchmarks.serve.add_cli_args` builds at that version (its dataset flags included),
//! with argparse's rules: `--flag value` or `--flag=value`, underscores read as dashes.

mod multimodal;
pub mod result;
mod sweep;
mod tools_and_drafts;

use crate::peers::command_line::{Draft, ImportError, Imported};

/// The version whose flags this module knows.
pub const VERSION: &str = "0.32.0";

use crate::peers::flags::{Flags, Spec, Takes::*};

/// Every flag of `vllm bench serve` 0.32.0.
const FLAGS: &[(&str, crate::peers::flags::Takes)] = &[
    ("help", Nothing),
    ("trust-remote-code", Nothing),
    ("seed", Int),
    ("num-prompts", Int),
    ("dataset-name", Text),
    ("no-stream", Nothing),
    ("dataset-path", Text),
    ("no-oversample", Nothing),
    ("skip-chat-template", Nothing),
    ("enable-multimodal-chat", Nothing),
    ("disable-shuffle", Nothing),
    ("custom-output-len", Int),
    ("custom-ensure-client-side-data", Nothing),
    ("spec-bench-output-len", Int),
    ("spec-bench-category", Text),
    ("sharegpt-output-len", Int),
    ("timed-trace-chunk-hash-size", Int),
    ("timed-trace-sec-multiplier", Float),
    ("timed-trace-label-timestamp", Text),
    ("timed-trace-label-input-length", Text),
    ("timed-trace-label-output-length", Text),
    ("timed-trace-label-hash-ids", Text),
    ("blazedit-min-distance", Float),
    ("blazedit-max-distance", Float),
    ("asr-max-audio-len-sec", Float),
    ("asr-min-audio-len-sec", Float),
    ("random-input-len", Int),
    ("random-output-len", Int),
    ("random-range-ratio", Text),
    ("random-prefix-len", Int),
    ("random-batch-size", Int),
    ("no-reranker", Nothing),
    ("random-mm-base-items-per-request", Int),
    ("random-mm-num-mm-items-range-ratio", Float),
    ("random-mm-limit-mm-per-prompt", Text),
    ("random-mm-bucket-config", Text),
    ("hf-subset", Text),
    ("hf-split", Text),
    ("hf-name", Text),
    ("hf-output-len", Int),
    ("bfcl-categories", Text),
    ("prefix-repetition-prefix-len", Int),
    ("prefix-repetition-suffix-len", Int),
    ("prefix-repetition-num-prefixes", Int),
    ("prefix-repetition-output-len", Int),
    ("speed-bench-dataset-subset", Text),
    ("speed-bench-output-len", Int),
    ("speed-bench-category", Text),
    ("label", Text),
    ("backend", Text),
    ("base-url", Text),
    ("host", Text),
    ("port", Int),
    ("endpoint", Text),
    ("header", Many),
    ("max-concurrency", Int),
    ("model", Text),
    ("input-len", Int),
    ("output-len", Int),
    ("tokenizer", Text),
    ("tokenizer-mode", Text),
    ("use-beam-search", Nothing),
    ("logprobs", Int),
    ("request-rate", Float),
    ("burstiness", Float),
    ("probe-request-rate", Float),
    ("disable-tqdm", Nothing),
    ("num-warmups", Int),
    ("profile", Nothing),
    ("save-result", Nothing),
    ("save-detailed", Nothing),
    ("append-result", Nothing),
    ("metadata", Many),
    ("result-dir", Text),
    ("result-filename", Text),
    ("ignore-eos", Nothing),
    ("self-timed", Nothing),
    ("no-self-timed", Nothing),
    ("percentile-metrics", Text),
    ("metric-percentiles", Text),
    ("goodput", Many),
    ("request-id-prefix", Text),
    ("top-p", Float),
    ("top-k", Int),
    ("min-p", Float),
    ("temperature", Float),
    ("frequency-penalty", Float),
    ("presence-penalty", Float),
    ("repetition-penalty", Float),
    ("served-model-name", Text),
    ("lora-modules", Many),
    ("lora-assignment", Text),
    ("ramp-up-strategy", Text),
    ("ramp-up-start-rps", Int),
    ("ramp-up-end-rps", Int),
    ("ready-check-timeout-sec", Int),
    ("chat-template-kwargs", Text),
    ("extra-body", Text),
    ("skip-tokenizer-init", Nothing),
    ("insecure", Nothing),
    ("plot-timeline", Nothing),
    ("timeline-itl-thresholds", Text),
    ("plot-dataset-stats", Nothing),
];

/// Flags of other versions, and what became of them.
const GONE: &[(&str, &str)] = &[
    (
        "dataset",
        "benchmark_serving.py's old flag: at 0.32.0 it is --dataset-name with --dataset-path",
    ),
    (
        "sonnet-input-len",
        "the sonnet dataset's flags are gone at 0.32.0",
    ),
    (
        "sonnet-output-len",
        "the sonnet dataset's flags are gone at 0.32.0",
    ),
    (
        "sonnet-prefix-len",
        "the sonnet dataset's flags are gone at 0.32.0",
    ),
    ("server-url", "not a flag of vllm bench serve: --base-url"),
];

/// The dataset names 0.32.0 accepts.
const DATASETS: &[&str] = &[
    "sharegpt",
    "burstgpt",
    "random",
    "random-mm",
    "random-rerank",
    "hf",
    "custom",
    "custom_audio",
    "custom_image",
    "prefix_repetition",
    "spec_bench",
    "speed_bench",
    "txt-slices",
    "timed_trace",
];

/// The flag set, with argparse's rules.
pub(super) const SPEC: Spec = Spec {
    tool: "vllm bench serve",
    version: VERSION,
    flags: FLAGS,
    aliases: &[("-h", "help")],
    gone: GONE,
    underscores: true,
    negatable: false,
    lists_accumulate: false,
};

/// A command line of `vllm bench serve` (with or without the words `vllm bench serve` in
/// front) as a contract.
pub fn import(args: &[String]) -> Result<Imported, ImportError> {
    let mut rest = args;
    if rest.first().map(String::as_str) == Some("vllm") {
        match (
            rest.get(1).map(String::as_str),
            rest.get(2).map(String::as_str),
        ) {
            (Some("bench"), Some("serve")) => rest = &rest[3..],
            (Some("bench"), Some("sweep")) => rest = &rest[2..],
            _ => {
                return Err(ImportError(format!(
                    "`{}`: not a `vllm bench serve` or `vllm bench sweep serve` command (goodput imports those of vLLM's commands)",
                    crate::peers::command_line::shown(&args[..args.len().min(3)])
                )));
            }
        }
    } else if let Some(tool) = crate::peers::command_line::other_tool(args) {
        return Err(ImportError(format!(
            "`{}`: a command of {tool}, not of vllm bench serve",
            args[0]
        )));
    }
    if rest.first().map(String::as_str) == Some("sweep") {
        return sweep::import(&rest[1..]);
    }
    let d = draft(rest, "imported-vllm-bench")?;
    d.finish(&format!(
        "vllm bench serve {}",
        crate::peers::command_line::shown(rest)
    ))
}

/// `vllm bench serve`'s flags `rest` as a draft contract named `name`, not yet finished.
pub(super) fn draft(rest: &[String], name: &str) -> Result<Draft, ImportError> {
    let f = SPEC.read(rest, SPEC.tool)?;
    let mut d = Draft::named(&format!("vllm bench serve {VERSION}"), name);
    target(&f, &mut d)?;
    workload(&f, &mut d)?;
    load(&f, &mut d)?;
    slo(&f, &mut d)?;
    unmeasured(&f, &mut d);
    // Every flag given that nothing above read, named: nothing is dropped unsaid.
    for g in f.unread() {
        d.annotate(format!(
            "{}: not mapped; goodput reads nothing of it (its run is as if it were not given)",
            g.shown
        ));
    }
    d.annotate("TPOT: vLLM's is (E2E − TTFT) / (output tokens − 1) per request; goodput's divides by the tokens after the first chunk, the same when each chunk carries one token (docs/guide/measurement.md).");
    Ok(d)
}

fn target(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let url = match f.text("base-url") {
        Some(u) => (u.trim_end_matches('/').to_owned(), f.from("base-url")),
        None => {
            let host = f.text("host").unwrap_or("127.0.0.1");
            let port = f.text("port").unwrap_or("8000");
            (
                format!("http://{host}:{port}"),
                format!("{}, {}", f.from("host"), f.from("port")),
            )
        }
    };
    d.url(&url.0, url.1);
    let endpoint = f.text("endpoint").unwrap_or("/v1/completions");
    let api = match endpoint {
        "/v1/completions" => "openai-completions",
        "/v1/chat/completions" => "openai-chat",
        "/v1/responses" => "openai-responses",
        "/v1/embeddings" => "openai-embeddings",
        other => {
            d.annotate(format!("--endpoint {other}: no API of goodput's is served there; openai-completions is assumed (target.api)"));
            "openai-completions"
        }
    };
    d.str("target", "api", api, f.from("endpoint"));
    let backend = f.text("backend").unwrap_or("openai");
    let agrees = match backend {
        "vllm" | "openai" => api == "openai-completions",
        "openai-chat" => api == "openai-chat",
        "openai-responses" => api == "openai-responses",
        "openai-embeddings" => api == "openai-embeddings",
        _ => false,
    };
    if !agrees {
        d.annotate(format!(
            "--backend {backend}: goodput speaks the API of --endpoint ({api}); {backend} requests (audio, reranking, other bodies) are not sent"
        ));
    }
    match (f.text("served-model-name"), f.text("model")) {
        (Some(m), _) => d.str("target", "model", m, f.from("served-model-name")),
        (None, Some(m)) => d.str("target", "model", m, f.from("model")),
        (None, None) => d.annotate(
            "no --model: goodput asks the server (/v1/models) for its model, as vLLM does",
        ),
    }
    headers(f, d)?;
    if f.has("insecure") {
        d.annotate("--insecure: goodput verifies TLS certificates; target.tls.ca_file trusts one (or pins it)");
    }
    if f.num("ready-check-timeout-sec").is_some_and(|s| s > 0.0) {
        d.annotate("--ready-check-timeout-sec: goodput waits for a server to be ready only when it launches it ([cold_start] launch); here the target must be up");
    }
    Ok(())
}

/// `--header KEY=VALUE …`: sent with every request, but for the headers goodput sets; a
/// credential from an environment variable (`Draft::header`).
fn headers(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    if let Some(g) = f.get("header") {
        for h in &g.values {
            let Some((k, v)) = h.split_once('=') else {
                return Err(ImportError(format!(
                    "`--header {h}`: a header is KEY=VALUE"
                )));
            };
            d.header(k, v, "--header");
        }
    }
    Ok(())
}

/// The lengths of the random dataset: (input, output) ranges from --random-range-ratio.
fn ratios(f: &Flags) -> Result<(f64, f64), ImportError> {
    let Some(text) = f.text("random-range-ratio") else {
        return Ok((0.0, 0.0));
    };
    let bad = |why: &str| ImportError(format!("`--random-range-ratio {text}`: {why}"));
    let (i, o) = match text.parse::<f64>() {
        Ok(r) => (r, r),
        Err(_) => {
            let v: serde_json::Value = serde_json::from_str(text)
                .map_err(|_| bad("a number, or {\"input\": r, \"output\": r}"))?;
            match (v["input"].as_f64(), v["output"].as_f64()) {
                (Some(i), Some(o)) => (i, o),
                _ => {
                    return Err(bad(
                        "the object needs numbers under \"input\" and \"output\"",
                    ));
                }
            }
        }
    };
    if !((0.0..1.0).contains(&i) && (0.0..1.0).contains(&o)) {
        return Err(bad("each ratio must be in [0, 1)"));
    }
    Ok((i, o))
}

/// A length: fixed, or uniform over vLLM's integer range around it.
fn length(len: f64, ratio: f64) -> String {
    if ratio == 0.0 {
        return format!("{{ dist = \"fixed\", value = {len} }}");
    }
    let min = (len * (1.0 - ratio)).floor().max(1.0);
    let max = (len * (1.0 + ratio)).ceil();
    format!("{{ dist = \"uniform\", min = {min}, max = {max} }}")
}

fn workload(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let (seed, from) = f.or("seed", 0.0);
    d.set("workload", "seed", format!("{seed}"), from);
    let name = f.text("dataset-name").unwrap_or("random");
    if !DATASETS.contains(&name) {
        return Err(ImportError(format!(
            "`--dataset-name {name}`: not a dataset of vllm bench serve {VERSION} ({})",
            DATASETS.join(", ")
        )));
    }
    match name {
        "random" => random(f, d)?,
        "random-mm" => {
            random(f, d)?;
            multimodal::random_mm(f, d)?;
        }
        "sharegpt" | "custom" => dataset(f, d, name)?,
        "prefix_repetition" => prefix_repetition(f, d),
        "hf" if tools_and_drafts::is_bfcl(f) => tools_and_drafts::bfcl(f, d)?,
        "spec_bench" => tools_and_drafts::spec_bench(f, d)?,
        "speed_bench" => tools_and_drafts::speed_bench(f, d)?,
        other => {
            d.annotate(format!(
                "--dataset-name {other}: goodput cannot read this dataset; its prompts are goodput's synthetic ones at the lengths below. Export it as JSON lines with a `prompt` field and set workload.dataset."
            ));
            if matches!(other, "hf" | "custom_audio" | "custom_image") {
                d.annotate(format!(
                    "--dataset-name {other}: multimodal or Hugging Face inputs are not sent by goodput"
                ));
            }
        }
    }
    for (flag, key) in [
        ("input-len", "input_tokens"),
        ("output-len", "output_tokens"),
    ] {
        if let Some(n) = f.num(flag) {
            d.set("workload", key, length(n, 0.0), f.from(flag));
        }
    }
    if f.has("no-stream") {
        d.set("workload", "stream", "false".into(), f.from("no-stream"));
    }
    if !f.has("ignore-eos") {
        d.set(
            "workload",
            "enforce_output_length",
            "false".into(),
            "no --ignore-eos: outputs end where the model stops, as vLLM's do",
        );
    }
    sampling(f, d);
    Ok(())
}

/// `--dataset-name random`: lengths around their means, a shared prefix in front.
fn random(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let (ri, ro) = ratios(f)?;
    let (input, ifrom) = f.or("random-input-len", 1024.0);
    let (output, ofrom) = f.or("random-output-len", 128.0);
    let rr = f.from("random-range-ratio");
    // vLLM puts the prefix in front of the random part; goodput's input length counts both.
    let prefix = f.num("random-prefix-len").filter(|p| *p > 0.0);
    let shifted = |len: String| match prefix {
        Some(p) => shift(&len, p),
        None => len,
    };
    d.set(
        "workload",
        "input_tokens",
        shifted(length(input, ri)),
        format!("{ifrom}, {rr}"),
    );
    d.set(
        "workload",
        "output_tokens",
        length(output, ro),
        format!("{ofrom}, {rr}"),
    );
    server_tokens(d, "--dataset-name random");
    d.annotate("--dataset-name random: vLLM draws random token ids in the model's tokenizer (less its special tokens); goodput's prompts are words, sized in the model's tokens by the server's /tokenize (workload.tokenizer = \"server\"; a server without one needs a tokenizer.json path there).");
    if let Some(p) = prefix {
        let from = format!(
            "{} (goodput's input_tokens count it too)",
            f.from("random-prefix-len")
        );
        d.str("workload", "prefix_cache", "shared", from.clone());
        d.set(
            "workload",
            "shared_prefix_tokens",
            format!("{p}"),
            from.clone(),
        );
        d.set("workload", "prefixes", "1".into(), from);
    }
    if f.num("random-batch-size").is_some_and(|b| b > 1.0) {
        d.annotate("--random-batch-size: several prompts per request (embeddings); see workload.batch, not set here");
    }
    Ok(())
}

/// Lengths in the model's own tokens, as vLLM counts them: goodput asks the server.
fn server_tokens(d: &mut Draft, from: &str) {
    d.str(
        "workload",
        "tokenizer",
        "server",
        format!(
            "{from}: lengths in the model's tokens, as vLLM counts them (the server's /tokenize)"
        ),
    );
}

/// A length's TOML with `by` tokens added to each of its bounds.
pub(super) fn shift(len: &str, by: f64) -> String {
    let mut out = len.to_owned();
    for key in ["value", "min", "max"] {
        let at = format!("{key} = ");
        if let Some(i) = out.find(&at) {
            let start = i + at.len();
            let end = out[start..]
                .find([',', ' '])
                .map_or(out.len(), |e| start + e);
            if let Ok(v) = out[start..end].parse::<f64>() {
                out.replace_range(start..end, &format!("{}", v + by));
            }
        }
    }
    out
}

/// The prompts of a file: `workload.dataset` at `path` in `format` (each with the flag it came
/// from), each prompt its own length (`lengths` says whose).
fn prompts_from(
    f: &Flags,
    d: &mut Draft,
    (path, path_from): (&str, String),
    (format, format_from): (&str, String),
    lengths: &str,
) {
    d.str(
        "workload",
        "prompt_source",
        "dataset",
        f.from("dataset-name"),
    );
    d.str("workload", "dataset", path, path_from);
    d.str("workload", "dataset_format", format, format_from);
    d.set(
        "workload",
        "input_tokens",
        "{ dist = \"dataset\" }".into(),
        lengths,
    );
}

/// `--dataset-name sharegpt` or `custom`: the file itself, its prompts verbatim.
fn dataset(f: &Flags, d: &mut Draft, name: &str) -> Result<(), ImportError> {
    let path = f.text("dataset-path").ok_or_else(|| {
        ImportError(format!(
            "`--dataset-name {name}` needs --dataset-path (vLLM refuses it without one too)"
        ))
    })?;
    let sharegpt = name == "sharegpt";
    prompts_from(
        f,
        d,
        (path, f.from("dataset-path")),
        (
            if sharegpt { "sharegpt" } else { "jsonl" },
            f.from("dataset-name"),
        ),
        "each prompt's own length",
    );
    let out = if sharegpt {
        "sharegpt-output-len"
    } else {
        "custom-output-len"
    };
    match f.num(out).or(if sharegpt { None } else { Some(256.0) }) {
        Some(n) => d.set("workload", "output_tokens", length(n, 0.0), f.from(out)),
        None => d.set(
            "workload",
            "output_tokens",
            "{ dist = \"dataset\" }".into(),
            "each conversation's answer length, as vLLM takes it",
        ),
    }
    if f.has("skip-chat-template") {
        d.annotate("--skip-chat-template: goodput sends each prompt as the API takes it; the server applies its chat template to chat requests");
    }
    if !f.has("disable-shuffle") {
        d.annotate("dataset order: vLLM shuffles the dataset with --seed; goodput draws its prompts with workload.seed, a different order of the same prompts");
    }
    Ok(())
}

/// `--dataset-name prefix_repetition`: shared prefixes, each prompt's own suffix after one.
fn prefix_repetition(f: &Flags, d: &mut Draft) {
    let (prefix, pfrom) = f.or("prefix-repetition-prefix-len", 256.0);
    let (suffix, sfrom) = f.or("prefix-repetition-suffix-len", 256.0);
    let (n, nfrom) = f.or("prefix-repetition-num-prefixes", 10.0);
    let (out, ofrom) = f.or("prefix-repetition-output-len", 128.0);
    d.str(
        "workload",
        "prefix_cache",
        "shared",
        "--dataset-name prefix_repetition",
    );
    server_tokens(d, "--dataset-name prefix_repetition");
    d.set(
        "workload",
        "shared_prefix_tokens",
        format!("{prefix}"),
        pfrom.clone(),
    );
    d.set("workload", "prefixes", format!("{n}"), nfrom);
    d.set(
        "workload",
        "input_tokens",
        length(prefix + suffix, 0.0),
        format!("{pfrom} + {sfrom}"),
    );
    d.set("workload", "output_tokens", length(out, 0.0), ofrom);
}

fn sampling(f: &Flags, d: &mut Draft) {
    for (flag, key) in [
        ("temperature", "temperature"),
        ("top-p", "top_p"),
        ("top-k", "top_k"),
    ] {
        if let Some(v) = f.text(flag) {
            d.set("workload.sampling", key, v.to_owned(), f.from(flag));
        }
    }
    if !f.has("temperature") {
        d.annotate("no --temperature: vLLM sends none (the model's default applies, often 1.0); goodput sends workload.sampling.temperature = 0 (greedy)");
    }
    for flag in [
        "min-p",
        "frequency-penalty",
        "presence-penalty",
        "repetition-penalty",
        "logprobs",
        "use-beam-search",
        "chat-template-kwargs",
        "extra-body",
    ] {
        if f.has(flag) {
            d.annotate(format!(
                "{}: not mapped; target.request.extra_body adds such fields to every request body",
                f.from(flag)
            ));
        }
    }
    if f.has("lora-modules") {
        d.annotate("--lora-modules: not mapped; goodput's classes can each name a model or adapter ([[class]] model)");
    }
}

fn load(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let (n, nfrom) = f.or("num-prompts", 1000.0);
    let requests = if n < 0.0 {
        d.annotate("--num-prompts -1 (the whole dataset): goodput needs a count; 1000 requests are planned");
        1000.0
    } else if n == 0.0 {
        return Err(ImportError("`--num-prompts 0`: no request to send".into()));
    } else {
        n
    };
    let rate = f.num("request-rate").unwrap_or(f64::INFINITY);
    if rate <= 0.0 {
        return Err(ImportError(format!(
            "`--request-rate {rate}`: must be > 0 (inf: all at once)"
        )));
    }
    let concurrency = f.num("max-concurrency");
    if concurrency.is_some_and(|c| c < 1.0) {
        return Err(ImportError(
            "`--max-concurrency`: must be at least 1".into(),
        ));
    }
    match rate.is_infinite() {
        true => closed(f, d, concurrency.unwrap_or(requests)),
        false => open(f, d, rate, concurrency)?,
    }
    d.set("load", "requests", format!("{requests}"), nfrom);
    if f.has("ramp-up-strategy") {
        d.annotate(format!(
            "{}: not mapped; goodput's load program ([[load.stage]]) ramps the rate stage by stage",
            f.from("ramp-up-strategy")
        ));
    }
    if f.num("probe-request-rate").is_some_and(|p| p > 0.0) {
        d.annotate(
            "--probe-request-rate: not mapped; goodput's live dashboard or a sweep finds a rate",
        );
    }
    let (w, wfrom) = f.or("num-warmups", 0.0);
    d.set("warmup", "requests", format!("{w}"), wfrom);
    if w == 0.0 {
        d.annotate("no warm-up (vLLM's default --num-warmups 0): the first requests' cold start is in the measured statistics");
    }
    Ok(())
}

/// `--request-rate inf`: every request at once, `c` at a time: a closed loop.
fn closed(f: &Flags, d: &mut Draft, c: f64) {
    d.str(
        "load",
        "kind",
        "closed",
        format!("{} (all at once)", f.from("request-rate")),
    );
    let from = match f.has("max-concurrency") {
        true => f.from("max-concurrency"),
        false => "every prompt at once: --num-prompts".into(),
    };
    d.set("load", "concurrency", format!("{c}"), from);
    d.annotate("--request-rate inf: vLLM sends every request at once, held back only by --max-concurrency: a closed loop. Its latencies cannot support tail-latency or capacity claims (the load waits for the server); give a --request-rate, or use goodput's open loop (load.kind = \"open\", load.rate).");
}

/// A finite `--request-rate`: an open loop, Poisson or gamma as `--burstiness` says.
fn open(f: &Flags, d: &mut Draft, rate: f64, concurrency: Option<f64>) -> Result<(), ImportError> {
    let b = f.num("burstiness").unwrap_or(1.0);
    if b <= 0.0 {
        return Err(ImportError(format!("`--burstiness {b}`: must be > 0")));
    }
    d.str(
        "load",
        "kind",
        "open",
        format!("{} (an arrival rate)", f.from("request-rate")),
    );
    d.set("load", "rate", format!("{rate}"), f.from("request-rate"));
    if b == 1.0 {
        d.str(
            "load",
            "arrival",
            "poisson",
            "--burstiness 1 (vLLM's default): Poisson arrivals",
        );
    } else {
        d.str("load", "arrival", "gamma", f.from("burstiness"));
        d.set("load", "burstiness", format!("{b}"), f.from("burstiness"));
    }
    if !f.has("ramp-up-strategy") {
        d.set(
            "load",
            "pin_total",
            "true".into(),
            format!(
                "{}: vLLM scales its drawn gaps so the last request leaves at exactly --num-prompts / rate, and so does goodput with this key (unset, its arrivals are the process as drawn, and a run's offered rate varies by about ±2/√n between seeds)",
                f.from("request-rate")
            ),
        );
    }
    if let Some(c) = concurrency {
        d.annotate(format!("--max-concurrency {c} with --request-rate {rate}: vLLM holds a request back until one of its {c} slots frees, so past that point its schedule slips (partly closed loop) and latency counts from the late send. goodput keeps the schedule and counts from the intended send; load.max_in_flight would drop requests past {c} rather than delay them, so it is not set."));
    }
    Ok(())
}

fn slo(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let Some(g) = f.get("goodput") else {
        return Ok(());
    };
    for item in &g.values {
        let bad = || {
            ImportError(format!(
                "`--goodput {item}`: a threshold is ttft:MS, tpot:MS or e2el:MS"
            ))
        };
        let (metric, ms) = item.split_once(':').ok_or_else(bad)?;
        let ms: f64 = ms.parse().map_err(|_| bad())?;
        if ms <= 0.0 || !ms.is_finite() {
            return Err(ImportError(format!(
                "`--goodput {item}`: a threshold must be > 0 ms"
            )));
        }
        let key = match metric {
            "ttft" => "ttft_ms",
            "tpot" => "tpot_ms",
            "e2el" => "e2e_ms",
            _ => return Err(bad()),
        };
        d.set("slo", key, format!("{ms}"), format!("--goodput {item}"));
    }
    d.annotate("--goodput: vLLM counts the requests that meet every threshold, as goodput's attainment does; goodput also judges the thresholds at slo.percentile (p99 by default) and says whether the sample supports it");
    Ok(())
}

/// Flags that change what vLLM writes or shows, not what it measures.
fn unmeasured(f: &Flags, d: &mut Draft) {
    let output = [
        "save-result",
        "save-detailed",
        "append-result",
        "metadata",
        "result-dir",
        "result-filename",
        "label",
        "disable-tqdm",
        "plot-timeline",
        "timeline-itl-thresholds",
        "plot-dataset-stats",
        "percentile-metrics",
        "metric-percentiles",
        "self-timed",
        "no-self-timed",
    ];
    let given: Vec<String> = output
        .iter()
        .filter(|n| f.has(n))
        .map(|n| format!("--{n}"))
        .collect();
    if !given.is_empty() {
        d.annotate(format!("{}: no counterpart needed: goodput keeps every run's raw records, command and environment in a bundle and reports p50 to p99.9 of every latency", given.join(", ")));
    }
    for (flag, what) in [
        ("profile", "goodput starts no profiler on the server"),
        (
            "request-id-prefix",
            "goodput sets each request's X-Request-Id to the run's id and the request's index",
        ),
        (
            "tokenizer",
            "goodput counts lengths with workload.tokenizer (\"server\": the target's own)",
        ),
        (
            "tokenizer-mode",
            "goodput counts lengths with workload.tokenizer",
        ),
        ("trust-remote-code", "goodput loads no model code"),
        (
            "skip-tokenizer-init",
            "goodput counts lengths with workload.tokenizer",
        ),
    ] {
        if f.has(flag) {
            d.annotate(format!("--{flag}: {what}"));
        }
    }
}
