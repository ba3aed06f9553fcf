//! Issue #51 (vLLM's half): `goodput import vllm-bench -- ARGS` on the command lines vLLM's own
//! benchmarking guide shows (docs/benchmarking/cli.md, the flags of vLLM 0.32.0): each
//! resulting contract field, each difference the contract names, and a run of the imported
//! contract against the simulator.

use crate::common;

use goodput::contract::{ApiKind, Contract};
use goodput::peers::vllm_bench::import;

/// A shell command line split into words: quotes group, a backslash-newline continues.
pub(crate) fn words(line: &str) -> Vec<String> {
    let line = line.replace("\\\n", " ");
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => out.extend(cur.take()),
            (_, c) => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    out
}

struct Imported {
    contract: Contract,
    text: String,
    breaks: Vec<String>,
}

fn imported(line: &str) -> Imported {
    let i = import(&words(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
    let contract = common::parse(&i.contract);
    Imported {
        contract,
        text: i.contract,
        breaks: i.breaks,
    }
}

impl Imported {
    fn says(&self, part: &str) -> bool {
        self.breaks.iter().any(|b| b.contains(part))
    }
}

fn length(d: &Option<goodput::contract::LengthDist>) -> String {
    serde_json::to_string(d).unwrap()
}

/// The first example of vLLM's guide: ShareGPT against the completions endpoint.
#[test]
fn the_guides_sharegpt_examples_import_with_their_dataset_and_closed_loop_named() {
    let i = imported(
        "vllm bench serve \\
  --backend vllm \\
  --model NousResearch/Hermes-3-Llama-3.1-8B \\
  --endpoint /v1/completions \\
  --dataset-name sharegpt \\
  --dataset-path data/ShareGPT_V3_unfiltered_cleaned_split.json \\
  --num-prompts 10",
    );
    let c = &i.contract;
    assert_eq!(c.target.url.as_deref(), Some("http://127.0.0.1:8000"));
    assert_eq!(c.target.api, ApiKind::OpenAiCompletions);
    assert_eq!(
        c.target.model.as_deref(),
        Some("NousResearch/Hermes-3-Llama-3.1-8B")
    );
    assert!(
        c.workload
            .dataset
            .as_ref()
            .unwrap()
            .ends_with("ShareGPT_V3_unfiltered_cleaned_split.json")
    );
    assert_eq!(c.load.requests, Some(10));
    assert_eq!(c.load.concurrency, Some(10));
    assert!(!c.load.is_open());
    assert!(!c.workload.enforce_output_length);
    assert!(i.says("--request-rate inf"), "{:?}", i.breaks);
    assert!(i.says("no --temperature"));
    assert!(
        i.text.contains("# --dataset-path data/ShareGPT"),
        "{}",
        i.text
    );

    // With plots and a saved result: those flags are named as needing no counterpart.
    let i = imported(
        "vllm bench serve \\
    --backend vllm \\
    --model meta-llama/Llama-3.1-8B-Instruct \\
    --endpoint /v1/completions \\
    --dataset-name sharegpt \\
    --dataset-path data/ShareGPT_V3_unfiltered_cleaned_split.json \\
    --num-prompts 100 \\
    --plot-timeline \\
    --timeline-itl-thresholds 2,5 \\
    --plot-dataset-stats \\
    --save-result",
    );
    assert!(i.says("--save-result, --plot-timeline, --timeline-itl-thresholds, --plot-dataset-stats: no counterpart needed"), "{:?}", i.breaks);

    // Sampling parameters are mapped.
    let i = imported(
        "vllm bench serve \\
  --backend vllm \\
  --model NousResearch/Hermes-3-Llama-3.1-8B \\
  --endpoint /v1/completions \\
  --dataset-name sharegpt \\
  --dataset-path data/ShareGPT_V3_unfiltered_cleaned_split.json \\
  --top-k 10 \\
  --top-p 0.9 \\
  --temperature 0.5 \\
  --num-prompts 10",
    );
    let s = &i.contract.workload.sampling;
    assert_eq!((s.temperature, s.top_p, s.top_k), (0.5, 0.9, Some(10)));
    assert!(!i.says("no --temperature"));
}

#[test]
fn a_custom_dataset_keeps_its_port_concurrency_and_sampling() {
    let i = imported(
        r#"vllm bench serve --port 9001 --save-result --save-detailed \
  --backend vllm \
  --model meta-llama/Llama-3.1-8B-Instruct \
  --endpoint /v1/completions \
  --dataset-name custom \
  --dataset-path data.jsonl \
  --skip-chat-template \
  --num-prompts 80 \
  --max-concurrency 1 \
  --temperature=0.3 \
  --top-p=0.75 \
  --result-dir "./log/""#,
    );
    let c = &i.contract;
    assert_eq!(c.target.url.as_deref(), Some("http://127.0.0.1:9001"));
    assert_eq!(c.load.concurrency, Some(1));
    assert_eq!(c.load.requests, Some(80));
    assert_eq!(
        length(&c.workload.output_tokens),
        r#"{"dist":"fixed","value":256}"#
    );
    assert_eq!(
        (c.workload.sampling.temperature, c.workload.sampling.top_p),
        (0.3, 0.75)
    );
    assert!(i.says("--skip-chat-template"));
    assert!(i.says("--result-dir"));
}

/// Audio, images, Hugging Face datasets: not sent by goodput, and each says so.
#[test]
fn multimodal_and_hugging_face_examples_import_with_what_goodput_cannot_send_named() {
    let lines = [
        // Whisper.
        "vllm bench serve \\
  --model openai/whisper-tiny \\
  --backend openai-audio \\
  --endpoint /v1/audio/transcriptions \\
  --dataset-name custom_audio \\
  --dataset-path audio_data.jsonl \\
  --no-oversample \\
  --custom-output-len 256 \\
  --save-result \\
  --save-detailed \\
  --result-filename whisper_bench.json",
        // Qwen2-Audio.
        "vllm bench serve \\
  --model Qwen/Qwen2-Audio-7B-Instruct \\
  --backend openai-chat \\
  --endpoint /v1/chat/completions \\
  --dataset-name custom_audio \\
  --dataset-path audio_data.jsonl \\
  --no-oversample \\
  --custom-output-len 256 \\
  --enable-multimodal-chat \\
  --save-result \\
  --save-detailed \\
  --result-filename qwen_bench.json",
        // Images.
        "vllm bench serve --save-result --save-detailed \\
  --backend openai-chat \\
  --model Qwen/Qwen2-VL-7B-Instruct \\
  --endpoint /v1/chat/completions \\
  --dataset-name custom_image \\
  --dataset-path image_data.jsonl \\
  --custom-ensure-client-side-data",
        // VisionArena.
        "vllm bench serve \\
  --backend openai-chat \\
  --model Qwen/Qwen2-VL-7B-Instruct \\
  --endpoint /v1/chat/completions \\
  --dataset-name hf \\
  --dataset-path lmarena-ai/VisionArena-Chat \\
  --hf-split train \\
  --num-prompts 1000",
        // LLaVA-OneVision.
        r#"vllm bench serve \
  --backend openai-chat \
  --model Qwen/Qwen2-VL-7B-Instruct \
  --endpoint /v1/chat/completions \
  --dataset-name hf \
  --dataset-path lmms-lab/LLaVA-OneVision-Data \
  --hf-split train \
  --hf-subset "chart2text(cauldron)" \
  --num-prompts 10"#,
        // Speech, at 512 concurrent.
        "vllm bench serve \\
    --model openai/whisper-large-v3-turbo \\
    --backend openai-audio \\
    --dataset-name hf \\
    --dataset-path facebook/voxpopuli --hf-subset en --hf-split test --no-stream --trust-remote-code \\
    --num-prompts 99999999 \\
    --no-oversample \\
    --endpoint /v1/audio/transcriptions \\
    --ready-check-timeout-sec 600 \\
    --save-result \\
    --max-concurrency 512",
    ];
    for line in lines {
        let i = imported(line);
        assert!(
            i.says("multimodal or Hugging Face inputs are not sent"),
            "{line}: {:?}",
            i.breaks
        );
        assert!(i.says("goodput cannot read this dataset"), "{line}");
    }
    let whisper = imported(lines[0]);
    assert!(
        whisper.says("--endpoint /v1/audio/transcriptions: no API of goodput's is served there")
    );
    assert!(whisper.says("--backend openai-audio"));
    let arena = imported(lines[3]);
    assert_eq!(arena.contract.target.api, ApiKind::OpenAiChat);
    assert_eq!(arena.contract.load.requests, Some(1000));
    let speech = imported(lines[5]);
    assert!(!speech.contract.workload.stream);
    assert_eq!(speech.contract.load.concurrency, Some(512));
    assert!(speech.says("--ready-check-timeout-sec"));
    assert!(speech.says("--trust-remote-code"));
}

/// Text datasets of Hugging Face and the speculative-decoding sets: synthetic prompts instead,
/// `-1` prompts planned as a count.
#[test]
fn text_dataset_examples_plan_a_count_and_say_their_prompts_are_goodputs() {
    let lines = [
        "vllm bench serve \\
    --model meta-llama/Meta-Llama-3-8B-Instruct \\
    --dataset-name hf \\
    --dataset-path likaixin/InstructCoder \\
    --num-prompts 2048",
        r#"vllm bench serve \
    --model meta-llama/Meta-Llama-3-8B-Instruct \
    --dataset-name spec_bench \
    --dataset-path "data/spec_bench/question.jsonl" \
    --num-prompts -1 \
    --spec-bench-category "summarization""#,
        r#"vllm bench serve \
    --model meta-llama/Llama-3.3-70B-Instruct \
    --dataset-name speed_bench \
    --speed-bench-dataset-subset throughput_2k \
    --dataset-path "data/speed_bench/" \
    --num-prompts -1"#,
        "vllm bench serve \\
    --model Qwen/QwQ-32B \\
    --dataset-name hf \\
    --dataset-path AI-MO/aimo-validation-aime \\
    --num-prompts 10 \\
    --seed 42",
        "vllm bench serve \\
    --model Qwen/QwQ-32B \\
    --dataset-name hf \\
    --dataset-path vdaita/edit_5k_char \\
    --num-prompts 90 \\
    --blazedit-min-distance 0.01 \\
    --blazedit-max-distance 0.99",
        "vllm bench serve \\
    --backend openai-chat \\
    --endpoint /v1/chat/completions \\
    --model openai/gpt-oss-20b \\
    --dataset-name hf \\
    --dataset-path gorilla-llm/Berkeley-Function-Calling-Leaderboard \\
    --bfcl-categories simple,live_simple,multiple \\
    --num-prompts 200",
    ];
    for line in [lines[0], lines[3], lines[4]] {
        let i = imported(line);
        assert!(i.says("goodput cannot read this dataset"), "{line}");
    }
    // SpecBench's and SPEED-Bench's prompts are read from the JSON lines a jq line makes
    // (category a filter), BFCL's graded (bfcl_and_speculative_datasets_import_…).
    let spec = imported(lines[1]);
    assert!(spec.says("jq -c 'select(.category == \"summarization\") | {prompt: .turns[0]}' data/spec_bench/question.jsonl > data/spec_bench/question.summarization.prompts.jsonl"));
    let speed = imported(lines[2]);
    assert!(speed.says("jq -c '{prompt: .messages[0].content}' data/speed_bench/throughput_2k.jsonl > data/speed_bench/throughput_2k.prompts.jsonl"));
    assert!(imported(lines[5]).says("grades every answer by BFCL's rule for simple"));
    assert_eq!(spec.contract.load.requests, Some(1000));
    assert!(spec.says("--num-prompts -1"));
    let aime = imported(lines[3]);
    assert_eq!(aime.contract.workload.seed, 42);
}

/// The random dataset: lengths, the range ratio's uniform range, the Responses API, an open
/// loop with burstiness, a shared prefix and an SLO.
#[test]
fn random_examples_map_lengths_rates_and_slos() {
    let i = imported(
        "vllm bench serve \\
    --backend openai-responses \\
    --endpoint /v1/responses \\
    --model openai/gpt-oss-20b \\
    --dataset-name random \\
    --random-input-len 1024 \\
    --random-output-len 1024 \\
    --num-prompts 200",
    );
    let c = &i.contract;
    assert_eq!(c.target.api, ApiKind::OpenAiResponses);
    assert_eq!(
        length(&c.workload.input_tokens),
        r#"{"dist":"fixed","value":1024}"#
    );
    assert_eq!(
        length(&c.workload.output_tokens),
        r#"{"dist":"fixed","value":1024}"#
    );
    assert!(i.says("workload.tokenizer = \"server\""));
    // Lengths in the model's tokens, as vLLM draws them: the server's /tokenize counts.
    assert_eq!(
        c.workload.tokenizer.as_deref(),
        Some(std::path::Path::new("server"))
    );

    let i = imported(
        "vllm bench serve --model m --random-input-len 100 --random-output-len 10 --random-range-ratio 0.5 \
         --random-prefix-len 64 --request-rate 8 --burstiness 0.5 --max-concurrency 4 \
         --goodput ttft:500 tpot:50 e2el:2000 --ignore-eos --num-warmups 5 --header x-team=bench",
    );
    let c = &i.contract;
    // 100 ± 50% random tokens behind a 64-token prefix: goodput's length counts both.
    assert_eq!(
        length(&c.workload.input_tokens),
        r#"{"dist":"uniform","min":114,"max":214}"#
    );
    assert_eq!(
        length(&c.workload.output_tokens),
        r#"{"dist":"uniform","min":5,"max":15}"#
    );
    assert_eq!(
        (c.workload.shared_prefix_tokens, c.workload.prefixes),
        (Some(64), Some(1))
    );
    assert!(c.load.is_open());
    assert_eq!((c.load.rate, c.load.burstiness), (Some(8.0), Some(0.5)));
    assert_ne!(
        c.load.max_in_flight,
        Some(4),
        "vLLM's limit delays; goodput's would drop"
    );
    assert!(
        i.says("--max-concurrency 4 with --request-rate 8"),
        "{:?}",
        i.breaks
    );
    let ms = |m: &Option<goodput::contract::Millis>| m.map(|m| m.0);
    assert_eq!(
        (ms(&c.slo.ttft_ms), ms(&c.slo.tpot_ms), ms(&c.slo.e2e_ms)),
        (Some(500.0), Some(50.0), Some(2000.0))
    );
    assert!(c.workload.enforce_output_length);
    assert_eq!(c.warmup.requests, 5);
    assert_eq!(c.target.request.headers.len(), 1);

    // The probe example: random multimodal, an open loop at 4 req/s.
    let i = imported(
        "vllm bench serve \\
    --model Qwen/Qwen2.5-VL-3B-Instruct \\
    --backend openai-chat \\
    --endpoint /v1/chat/completions \\
    --dataset-name random-mm \\
    --random-mm-bucket-config '{(2048, 2048, 1): 1.0}' \\
    --request-rate 4 \\
    --probe-request-rate 20",
    );
    assert_eq!(i.contract.load.rate, Some(4.0));
    assert!(i.says("--probe-request-rate"));
}

/// Unknown flags, other versions' flags, values out of range, another tool's command: each a
/// clear error naming the flag.
#[test]
fn bad_command_lines_are_refused_naming_the_flag() {
    let err = |line: &str| import(&words(line)).unwrap_err().to_string();
    let e = err("vllm bench serve --model m --num-promts 10");
    assert!(
        e.contains("`--num-promts`: not a flag of vllm bench serve 0.32.0"),
        "{e}"
    );
    let e = err("vllm bench serve --dataset data/ShareGPT.json");
    assert!(
        e.contains("`--dataset`") && e.contains("--dataset-name with --dataset-path"),
        "{e}"
    );
    let e = err("vllm bench serve --sonnet-input-len 550");
    assert!(e.contains("sonnet"), "{e}");
    let e = err("vllm bench serve --random-range-ratio 1.5");
    assert!(
        e.contains("`--random-range-ratio 1.5`: each ratio must be in [0, 1)"),
        "{e}"
    );
    let e = err("vllm bench serve --request-rate 0");
    assert!(e.contains("--request-rate"), "{e}");
    let e = err("vllm bench serve --num-prompts ten");
    assert!(e.contains("`--num-prompts ten`: not an integer"), "{e}");
    let e = err("vllm bench serve --goodput ttft=500");
    assert!(e.contains("`--goodput ttft=500`"), "{e}");
    let e = err("vllm bench serve --dataset-name sonnet");
    assert!(e.contains("`--dataset-name sonnet`"), "{e}");
    let e = err("vllm bench serve --dataset-name sharegpt");
    assert!(e.contains("needs --dataset-path"), "{e}");
    let e = err("vllm bench serve --ignore-eos=1");
    assert!(e.contains("is a switch"), "{e}");
    let e = err("guidellm benchmark --target http://localhost:8000 --rate-type sweep");
    assert!(e.contains("a command of guidellm"), "{e}");
    let e = err("vllm serve model");
    assert!(e.contains("not a `vllm bench serve` or"), "{e}");
    // Through the binary: exit 1, the flag named, no panic.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["import", "vllm-bench", "--", "--model", "m", "--bogus", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`--bogus`"), "{stderr}");
}

/// An imported contract runs against the simulator as written (its URL pointed there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_contract_runs_against_the_simulator() {
    // It serves /tokenize, as vLLM does: the import sizes random prompts in the server's tokens.
    let sim = common::sim(goodput::sim::SimConfig {
        tokenize: true,
        ..goodput::sim::SimConfig::instant()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported.toml");
    let port = sim.addr().port().to_string();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["import", "vllm-bench", "-o"])
        .arg(&out)
        .args([
            "--",
            "vllm",
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--port",
            &port,
            "--dataset-name",
            "random",
            "--random-input-len",
            "64",
            "--random-output-len",
            "16",
            "--request-rate",
            "20",
            "--num-prompts",
            "40",
            "--goodput",
            "ttft:1000",
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(String::from_utf8_lossy(&status.stderr).contains("note: no --temperature"));
    let text = std::fs::read_to_string(&out).unwrap();
    let r = common::run_in(common::parse(&text), dir.path()).await;
    // The steady requests are the command's; drain requests keep the load on while the last
    // of them finish, and how many of those complete depends on this machine's speed.
    let steady = |ok: bool| {
        r.records
            .iter()
            .filter(|x| x.phase == goodput::plan::Phase::Steady && (!ok || x.is_ok()))
            .count()
    };
    assert_eq!((steady(false), steady(true)), (40, 40));
}

/// `--dataset-name random-mm` (vLLM's own example, its videos bucket included): the images a
/// request carries, their sizes as (height, width) buckets become WIDTHxHEIGHT, their weights
/// and the per-prompt limit; the contract runs against the simulator and every request
/// carries what it planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_mm_command_imports_as_images_and_runs() {
    let sim = common::sim(goodput::sim::SimConfig {
        tokenize: true,
        ..goodput::sim::SimConfig::instant()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mm.toml");
    let port = sim.addr().port().to_string();
    let line = format!(
        "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --port {port} --dataset-name random-mm --num-prompts 30 --random-input-len 64 --random-output-len 8 --random-mm-base-items-per-request 1 --random-mm-num-mm-items-range-ratio 1 --random-mm-limit-mm-per-prompt '{{\"image\": 2, \"video\": 0}}' --random-mm-bucket-config '{{(64, 96, 1): 0.25, (120, 200, 1): 0.75, (120, 200, 16): 0.1}}' --request-rate 20 --seed 42"
    );
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["import", "vllm-bench", "-o"])
        .arg(&out)
        .arg("--")
        .args(words(&line))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    assert!(
        stderr.contains("video buckets (frames > 1) are not sent"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let c = common::parse(&text);
    let images = c.workload.images.as_ref().expect("[workload.images]");
    assert_eq!(images.sizes, ["96x64", "200x120"]);
    assert_eq!(images.size_weights, [0.25, 0.75]);
    assert_eq!(
        images.count,
        goodput::contract::LengthDist::Uniform { min: 0, max: 2 }
    );
    // A password typed in the URL (with a character the URL parser escapes) reaches no file.
    let typed = import(&words(&line.replace(
        &format!("--port {port}"),
        "--base-url 'http://u:pa\"ss@127.0.0.1:9'",
    )))
    .unwrap();
    assert!(!typed.contract.contains("pa\"ss") && !typed.contract.contains("pa%22ss"));
    // Without a chat endpoint the images have nowhere to go: refused naming the flag.
    let e = import(&words(
        &line.replace(" --endpoint /v1/chat/completions", ""),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--endpoint") && e.contains("chat endpoint"),
        "{e}"
    );
    let r = common::run_in(c, dir.path()).await;
    let ok: Vec<_> = r.records.iter().filter(|x| x.is_ok()).collect();
    let steady = ok
        .iter()
        .filter(|x| x.phase == goodput::plan::Phase::Steady);
    assert_eq!(
        steady.count(),
        30,
        "drain requests are the machine's; steady are the command's"
    );
    let truth = common::truth_by_id(&sim);
    let mut counts = [0; 3];
    for rec in &ok {
        counts[rec.images.len()] += 1;
        assert_eq!(truth[&rec.request_id].images as usize, rec.images.len());
    }
    assert!(
        counts.iter().all(|&n| n > 0),
        "0, 1 and 2 images: {counts:?}"
    );
}

/// vLLM's tool-call and speculative-decoding datasets: `--dataset-name hf` with BFCL's Hub id
/// imports as the same BFCL file read from disk and graded (one category a run, the rest named,
/// an ungradable one refused by name), and runs against the simulator with every answer
/// graded; `spec_bench` names the JSON lines a `jq` makes and runs on them; `speed_bench` needs
/// its folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bfcl_and_speculative_datasets_import_as_graded_tool_calls_and_named_prompts() {
    let sim = common::sim(goodput::sim::SimConfig::instant()).await;
    let dir = tempfile::tempdir().unwrap();
    let port = sim.addr().port().to_string();
    let hub = "gorilla-llm/Berkeley-Function-Calling-Leaderboard";
    let line = format!(
        "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --port {port} --dataset-name hf --dataset-path {hub} --bfcl-categories simple,irrelevance,parallel --num-prompts 6 --request-rate 20 --hf-output-len 64"
    );
    let i = imported(&line);
    assert_eq!(
        i.contract.workload.dataset.as_deref(),
        Some(std::path::Path::new("BFCL_v3_simple.json"))
    );
    assert!(i.text.contains("dataset_format = \"bfcl\""), "{}", i.text);
    assert!(i.says("grades every answer by BFCL's rule for simple"));
    assert!(i.says("run this contract again") && i.says("for parallel"));
    assert!(i.says("irrelevance not imported"));
    // A local copy (`--hf-name` the Hub id) is read from its folder; only ungradable categories,
    // or another backend, are refused naming the flag.
    let local = imported(&line.replace(
        &format!("--dataset-path {hub}"),
        &format!("--dataset-path /data/bfcl --hf-name {hub}"),
    ));
    assert!(
        local
            .text
            .contains("dataset = \"/data/bfcl/BFCL_v3_simple.json\"")
    );
    for (from, to, flag) in [
        (
            "simple,irrelevance,parallel",
            "irrelevance,multi_turn_base",
            "--bfcl-categories",
        ),
        (
            "--backend openai-chat",
            "--backend openai",
            "--backend openai-chat",
        ),
    ] {
        let e = import(&words(&line.replace(from, to)))
            .unwrap_err()
            .to_string();
        assert!(e.contains(flag), "{e}");
    }
    // The imported contract runs on BFCL's own entries, every answer graded.
    let data = dir.path();
    std::fs::create_dir_all(data.join("possible_answer")).unwrap();
    let q = r#"{"id": "simple_0", "question": [[{"role": "user", "content": "Area of a triangle, base 10 and height 5?"}]], "function": [{"name": "calculate_triangle_area", "description": "Area.", "parameters": {"type": "dict", "properties": {"base": {"type": "integer", "description": "b"}, "height": {"type": "integer", "description": "h"}}, "required": ["base", "height"]}}]}"#;
    let a = r#"{"id": "simple_0", "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5]}}]}"#;
    std::fs::write(data.join("BFCL_v3_simple.json"), format!("{q}\n")).unwrap();
    std::fs::write(
        data.join("possible_answer").join("BFCL_v3_simple.json"),
        format!("{a}\n"),
    )
    .unwrap();
    let text = i.text.replace(
        "dataset = \"BFCL_v3_simple.json\"",
        &format!(
            "dataset = \"{}\"",
            data.join("BFCL_v3_simple.json").display()
        ),
    );
    let r = common::run_in(common::parse(&text), data).await;
    let t = r.summary.steady.tools.as_ref().expect("graded");
    assert_eq!(t.graded, 6);
    assert!(t.counted_in_slo);

    // SpecBench: the contract names the prompts file the jq line makes; made so, it runs.
    let question = data.join("question.jsonl");
    let lines: Vec<String> = (0..8)
        .map(|k| {
            serde_json::json!({"question_id": k, "category": if k % 2 == 0 { "math" } else { "writing" }, "turns": [format!("question {k} asks this"), "then"]}).to_string()
        })
        .collect();
    std::fs::write(&question, lines.join("\n") + "\n").unwrap();
    let spec = imported(&format!(
        "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --port {port} --dataset-name spec_bench --dataset-path {} --spec-bench-category math --num-prompts 4 --request-rate 20 --spec-bench-output-len 16",
        question.display()
    ));
    let prompts = data.join("question.math.prompts.jsonl");
    assert_eq!(
        spec.contract.workload.dataset.as_deref(),
        Some(prompts.as_path())
    );
    assert!(spec.says("select(.category == \"math\") | {prompt: .turns[0]}"));
    assert!(spec.says("acceptance"));
    // What the jq line makes, made here.
    let made: Vec<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["category"] == "math")
        .map(|v| serde_json::json!({"prompt": v["turns"][0]}).to_string())
        .collect();
    std::fs::write(&prompts, made.join("\n") + "\n").unwrap();
    let r = common::run_in(spec.contract, data).await;
    let ok: Vec<_> = r.records.iter().filter(|x| x.is_ok()).collect();
    assert!(ok.len() >= 4, "{}", ok.len());

    // SPEED-Bench needs its folder, as vLLM does.
    let e = import(&words(&format!(
        "vllm bench serve --port {port} --dataset-name speed_bench --num-prompts 4"
    )))
    .unwrap_err()
    .to_string();
    assert!(e.contains("--dataset-path"), "{e}");
}

/// `vllm bench sweep serve` through the binary: the contract a tune runs (the server launched
/// per setting on a port goodput picks), and the `goodput tune` command printed for it.
#[test]
fn a_vllm_sweep_over_a_serve_setting_imports_as_a_tune() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("serve.json");
    std::fs::write(&params, r#"[{"max_num_seqs": 1}, {"max_num_seqs": 4}]"#).unwrap();
    let out_file = dir.path().join("tune.toml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["import", "vllm-bench", "--output"])
        .arg(&out_file)
        .args([
            "--",
            "vllm",
            "bench",
            "sweep",
            "serve",
            "--serve-cmd",
            "vllm serve gemma --port 8000",
            "--bench-cmd",
            "vllm bench serve --model gemma --random-input-len 24 --random-output-len 16 --num-prompts 20 --request-rate 0.5",
            "--serve-params",
        ])
        .arg(&params)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("run it with: goodput tune ")
            && stdout.contains("--setting max_num_seqs=1,4"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&out_file).unwrap();
    let (c, _) = goodput::workload::load(&out_file).unwrap();
    let launch = c.cold_start.unwrap().launch.unwrap();
    assert!(
        launch.contains(&"{max_num_seqs}".to_owned()) && launch.contains(&"{port}".to_owned()),
        "{text}"
    );
    assert_eq!(c.load.rate, Some(0.5), "{text}");
}
