//! Issue #51 (GuideLLM's and AIPerf's halves): `goodput import guidellm|aiperf -- ARGS` on the
//! command lines their own docs and READMEs show, at the versions whose result files
//! `goodput audit` reads (GuideLLM 0.6.1's `guidellm benchmark`; AIPerf 0.13.0's
//! `aiperf profile`, with its tutorials' lines that 0.13.0 still parses). Each line's
//! contract fields are checked by key, each difference the import names by a phrase of it,
//! and an imported contract of each tool runs against the simulator.

use crate::common;
use crate::import::words;

use goodput::peers::{ImportError, Imported};

/// A value of the contract by dotted key (`load.kind`), or None.
fn field(text: &str, key: &str) -> Option<toml::Value> {
    let mut v: toml::Value = toml::from_str(text).unwrap();
    for k in key.split('.') {
        v = v.get(k)?.clone();
    }
    Some(v)
}

/// Imports `line` with `import`, checks every `(key, TOML value)` and every break phrase,
/// and that goodput's own parser takes the contract. `None` as a value: the key is absent.
fn check(
    import: fn(&[String]) -> Result<Imported, ImportError>,
    line: &str,
    fields: &[(&str, Option<&str>)],
    breaks: &[&str],
) -> Imported {
    let i = import(&words(line)).unwrap_or_else(|e| panic!("{line}\n→ {e}"));
    common::parse(&i.contract);
    for (key, want) in fields {
        let got = field(&i.contract, key);
        let want = want.map(|w| field(&format!("v = {w}"), "v").unwrap());
        assert_eq!(got, want, "{key} of {line}\n{}", i.contract);
    }
    for b in breaks {
        assert!(
            i.breaks.iter().any(|x| x.contains(b)),
            "no difference naming `{b}` for {line}: {:#?}",
            i.breaks
        );
    }
    i
}

fn guidellm(line: &str, fields: &[(&str, Option<&str>)], breaks: &[&str]) -> Imported {
    check(goodput::peers::guidellm::import, line, fields, breaks)
}

fn aiperf(line: &str, fields: &[(&str, Option<&str>)], breaks: &[&str]) -> Imported {
    check(goodput::peers::aiperf::import, line, fields, breaks)
}

/// GuideLLM 0.6.1's README: the sweep, the constant rate, a Hugging Face dataset, a data file,
/// the controls example.
#[test]
fn guidellm_readme_examples_import_field_by_field() {
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --profile sweep \
  --max-seconds 30 \
  --data "prompt_tokens=256,output_tokens=128""#,
        &[
            ("target.url", Some(r#""http://localhost:8000""#)),
            ("target.api", Some(r#""openai-chat""#)),
            ("load.kind", Some(r#""closed""#)),
            ("load.concurrency", Some("1")),
            ("load.duration", Some(r#""30s""#)),
            ("load.requests", None),
            ("workload.input_tokens.value", Some("256")),
            ("workload.output_tokens.value", Some("128")),
            ("workload.seed", Some("42")),
            ("warmup.requests", Some("0")),
        ],
        &[
            "--profile sweep: GuideLLM runs a synchronous benchmark",
            "goodput sweep FILE --capacity",
            "no warm-up",
            "time_per_output_token is E2E / output tokens",
        ],
    );
    guidellm(
        "guidellm benchmark \\
  --target http://localhost:8000 \\
  --profile constant \\
  --rate 10 \\
  --max-seconds 20 \\
  --data \"prompt_tokens=128,output_tokens=256\"",
        &[
            ("load.kind", Some(r#""open""#)),
            ("load.arrival", Some(r#""constant""#)),
            ("load.rate", Some("10")),
            ("load.duration", Some(r#""20s""#)),
            ("workload.input_tokens.value", Some("128")),
            ("workload.output_tokens.value", Some("256")),
        ],
        &["synthetic data: GuideLLM samples text"],
    );
    guidellm(
        r#"guidellm benchmark run \
  --target http://localhost:8000 \
  --data "abisee/cnn_dailymail" \
  --data-args '{"name": "3.0.0"}' \
  --data-column-mapper '{"text_column":"article"}'"#,
        &[
            ("workload.dataset", None),
            ("workload.enforce_output_length", Some("false")),
            ("load.requests", Some("1000")),
        ],
        &[
            "--data abisee/cnn_dailymail: goodput cannot read this source",
            "--data-args",
            "--data-column-mapper",
            "GuideLLM runs until its data runs out",
        ],
    );
    guidellm(
        "guidellm benchmark \\
  --target http://localhost:8000 \\
  --request-type chat_completions \\
  --data path/to/data.json",
        &[
            ("target.api", Some(r#""openai-chat""#)),
            ("workload.prompt_source", Some(r#""dataset""#)),
            ("workload.dataset", Some(r#""path/to/data.json""#)),
            ("workload.input_tokens.dist", Some(r#""dataset""#)),
        ],
        &["goodput reads JSON lines with a `prompt` field"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target http://localhost:8000 \
  --profile concurrent \
  --rate 16 \
  --warmup 0.1 \
  --cooldown 0.1 \
  --max-errors 5 \
  --data "prompt_tokens=256,output_tokens=128" \
  --detect-saturation"#,
        &[
            ("load.kind", Some(r#""closed""#)),
            ("load.concurrency", Some("16")),
            ("load.requests", Some("1000")),
            ("warmup.requests", Some("100")),
        ],
        &[
            "closed loop (GuideLLM's synchronous, concurrent and throughput profiles)",
            "--cooldown 0.1",
            "--max-errors 5",
            "--detect-saturation",
        ],
    );
}

/// GuideLLM 0.6.1's getting-started, backends and datasets guides.
#[test]
fn guidellm_guide_examples_import_field_by_field() {
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000/" \
  --model "tweet-summary-0" \
  --processor "${local_path}/Qwen2.5-1.5B-Instruct" \
  --profile sweep \
  --max-seconds 10 \
  --max-requests 10 \
  --data "prompt_tokens=128,output_tokens=56""#,
        &[
            ("target.url", Some(r#""http://localhost:8000""#)),
            ("target.model", Some(r#""tweet-summary-0""#)),
            ("load.requests", Some("10")),
            ("load.duration", None),
        ],
        &[
            "GuideLLM stops at whichever comes first",
            "--processor ${local_path}/Qwen2.5-1.5B-Instruct: GuideLLM counts tokens",
        ],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --data "prompt_tokens=256,output_tokens=128" \
  --max-seconds 60"#,
        &[("load.duration", Some(r#""60s""#))],
        &["GuideLLM's default --profile sweep"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --data "prompt_tokens=100,output_tokens=50,samples=1000" \
  --profile constant \
  --rate 5"#,
        &[
            ("load.rate", Some("5")),
            ("workload.input_tokens.value", Some("100")),
        ],
        &["--data samples: GuideLLM pre-generates that many prompts"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --data "/path/to/your/dataset.json" \
  --profile constant \
  --rate 5"#,
        &[("workload.dataset", Some(r#""/path/to/your/dataset.json""#))],
        &[],
    );
    guidellm(
        "guidellm benchmark \\
  --target \"http://localhost:8000\" \\
  --data garage-bAInd/Open-Platypus \\
  --profile constant \\
  --rate 5",
        &[("load.arrival", Some(r#""constant""#))],
        &["--data garage-bAInd/Open-Platypus: goodput cannot read this source"],
    );
    let i = guidellm(
        r#"guidellm benchmark \
  --target "https://api.openai.com/v1" \
  --backend-kwargs '{"api_key": "sk-..."}' \
  --model "gpt-3.5-turbo" \
  --data "prompt_tokens=256,output_tokens=128""#,
        &[
            ("target.url", Some(r#""https://api.openai.com""#)),
            ("target.model", Some(r#""gpt-3.5-turbo""#)),
            ("target.api_key_env", Some(r#""OPENAI_API_KEY""#)),
        ],
        &[],
    );
    assert!(!i.contract.contains("sk-"), "{}", i.contract);
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000/v1" \
  --model "meta-llama/Meta-Llama-3.1-8B-Instruct" \
  --data "prompt_tokens=256,output_tokens=128" \
  --backend-kwargs '{"extras": {"body": {"temperature": 0.6, "top_p": 0.95, "top_k": 20}}}'"#,
        &[
            ("target.url", Some(r#""http://localhost:8000""#)),
            ("workload.sampling.temperature", Some("0.6")),
            ("workload.sampling.top_p", Some("0.95")),
            ("workload.sampling.top_k", Some("20")),
        ],
        &[],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000/v1" \
  --model "meta-llama/Meta-Llama-3.1-8B-Instruct" \
  --data "prompt_tokens=256,output_tokens=128" \
  --backend-kwargs '{"api_key": "sk-...", "extras": {"body": {"temperature": 0.8, "top_p": 0.9}}}'"#,
        &[
            ("target.api_key_env", Some(r#""OPENAI_API_KEY""#)),
            ("workload.sampling.temperature", Some("0.8")),
        ],
        &[],
    );
    guidellm(
        r#"guidellm benchmark \
    --target "http://localhost:8000" \
    --profile "throughput" \
    --max-requests 1000 \
    --data "prompt_tokens=256,output_tokens=128""#,
        &[
            ("load.kind", Some(r#""closed""#)),
            ("load.concurrency", Some("1000")),
            ("load.requests", Some("1000")),
        ],
        &["--profile throughput: GuideLLM sends as fast as the server takes"],
    );
    guidellm(
        r#"guidellm benchmark \
    --target "http://localhost:8000" \
    --profile "throughput" \
    --max-requests 1000 \
    --data '{"prompt_tokens": 256, "output_tokens": 128}'"#,
        &[
            ("workload.input_tokens.value", Some("256")),
            ("workload.output_tokens.value", Some("128")),
        ],
        &[],
    );
}

/// GuideLLM 0.6.1's geospatial, multimodal, multi-turn, outputs and over-saturation guides.
#[test]
fn guidellm_specialised_examples_name_what_goodput_does_not_send() {
    // A dataset's image column (GuideLLM 0.6.1 has no synthetic images) is named as not sent.
    guidellm(
        "guidellm benchmark --target http://localhost:8000 --data vqa.jsonl \
         --data-column-mapper '{\"image_column\": \"img\", \"text_column\": \"q\"}' \
         --profile constant --rate 2 --max-requests 10",
        &[("workload.dataset", Some(r#""vqa.jsonl""#))],
        &["GuideLLM sends the dataset's image column as image parts"],
    );
    guidellm(
        "guidellm benchmark \\
  --target http://localhost:8000 \\
  --model ibm-nasa-geospatial/Prithvi-EO-2.0-300M-TL-Sen1Floods11 \\
  --backend openai_http \\
  --data flood_detection_dataset.jsonl \\
  --request-format /pooling \\
  --profile synchronous \\
  --max-requests 20",
        &[
            (
                "workload.dataset",
                Some(r#""flood_detection_dataset.jsonl""#),
            ),
            ("load.concurrency", Some("1")),
        ],
        &["--request-format /pooling: goodput sends no audio or pooling requests"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --model "Qwen/Qwen3-VL-2B-Instruct" \
  --request-type chat_completions \
  --profile synchronous \
  --max-requests 20 \
  --data "lmms-lab/MMBench_EN" \
  --data-args "{\"split\": \"dev\"}""#,
        &[
            ("load.requests", Some("20")),
            ("target.model", Some(r#""Qwen/Qwen3-VL-2B-Instruct""#)),
        ],
        &["--data lmms-lab/MMBench_EN: goodput cannot read this source"],
    );
    guidellm(
        r#"guidellm benchmark run \
  --target "http://localhost:8000" \
  --model "meta-llama/Llama-3.1-8B-Instruct" \
  --request-format /v1/chat/completions \
  --profile constant \
  --rate 2.0 \
  --max-requests 100 \
  --data "prompt_tokens=150,output_tokens=75,turns=4,prefix_tokens=100""#,
        &[
            ("workload.input_tokens.value", Some("250")),
            ("workload.shared_prefix_tokens", Some("100")),
            ("workload.prefixes", Some("1")),
            ("workload.prefix_cache", Some(r#""shared""#)),
            ("load.rate", Some("2")),
        ],
        &["turns > 1 are GuideLLM's multi-turn conversations"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target "http://localhost:8000" \
  --profile sweep \
  --max-seconds 30 \
  --data "prompt_tokens=256,output_tokens=128" \
  --output-dir "results/" \
  --outputs json,csv,html \
  --sample-requests 20"#,
        &[],
        &["--output-dir, --outputs, --sample-requests: no counterpart needed"],
    );
    guidellm(
        r#"guidellm benchmark \
  --target http://localhost:8000 \
  --profile concurrent \
  --rate 16 \
  --data "prompt_tokens=256,output_tokens=128" \
  --max-seconds 300 \
  --over-saturation '{"enabled": true, "min_seconds": 30, "max_window_seconds": 120}'"#,
        &[("load.duration", Some(r#""300s""#))],
        &["GuideLLM stops a benchmark it finds over-saturated"],
    );
    guidellm(
        "guidellm benchmark \\
  --target http://localhost:8000 \\
  --profile constant \\
  --rate 1 --rate 2 \\
  --warmup 0.1 \\
  --max-seconds 60 \\
  --data \"prompt_tokens=256,prompt_tokens_stdev=32,output_tokens=128\"",
        &[
            ("load.rate", Some("1")),
            ("warmup.duration", Some(r#""6s""#)),
            ("workload.input_tokens.dist", Some(r#""normal""#)),
            ("workload.input_tokens.min", Some("96")),
            ("workload.input_tokens.max", Some("416")),
        ],
        &["--rate 1,2: GuideLLM runs one benchmark per value"],
    );
}

/// Unknown flags, GuideLLM 0.7's flags and command, values out of range, another tool's
/// command: each refused naming the flag.
#[test]
fn bad_guidellm_lines_are_refused_naming_the_flag() {
    let err = |line: &str| {
        goodput::peers::guidellm::import(&words(line))
            .unwrap_err()
            .to_string()
    };
    let base =
        "guidellm benchmark --target http://localhost:8000 --data prompt_tokens=8,output_tokens=8";
    let e = err(&format!("{base} --max-secnds 10"));
    assert!(
        e.contains("`--max-secnds`: not a flag of guidellm benchmark 0.6.1"),
        "{e}"
    );
    let e = err(&format!("{base} --constraint kind=max_requests,count=10"));
    assert!(
        e.contains("`--constraint`") && e.contains("GuideLLM 0.7"),
        "{e}"
    );
    let e = err(
        "guidellm run --backend kind=openai_http,target=http://localhost:8000 --profile kind=constant,rate=10",
    );
    assert!(e.contains("`guidellm run`: GuideLLM 0.7's command"), "{e}");
    let e = err(&format!("{base} --profile fastest"));
    assert!(e.contains("`--profile fastest`: not a profile"), "{e}");
    let e = err(&format!("{base} --profile constant"));
    assert!(e.contains("needs --rate"), "{e}");
    let e = err(&format!("{base} --profile constant --rate 0"));
    assert!(e.contains("`--rate 0`: must be > 0"), "{e}");
    let e = err(&format!("{base} --max-requests ten"));
    assert!(e.contains("`--max-requests ten`: not an integer"), "{e}");
    let e = err(&format!("{base} --outputs json csv"));
    assert!(
        e.contains("`csv`: guidellm benchmark takes no positional arguments"),
        "{e}"
    );
    let e = err(&format!("{base} --backend vllm_python"));
    assert!(e.contains("`--backend vllm_python`"), "{e}");
    let e = err(&format!("{base} --request-format /v1/rerank"));
    assert!(e.contains("`--request-format /v1/rerank`"), "{e}");
    let e = err(&format!("{base} --backend-kwargs api_key=x"));
    assert!(
        e.contains("`--backend-kwargs api_key=x`: not a JSON object"),
        "{e}"
    );
    let e = err("guidellm benchmark --target http://localhost:8000 --data prompt_tokens=8");
    assert!(e.contains("output_tokens"), "{e}");
    let e = err("guidellm benchmark --scenario chat --target http://localhost:8000");
    assert!(e.contains("`--scenario chat`"), "{e}");
    let e = err("guidellm benchmark --data prompt_tokens=8,output_tokens=8");
    assert!(e.contains("no `--target`"), "{e}");
    let e = err("vllm bench serve --model m");
    assert!(e.contains("a command of vllm-bench"), "{e}");
}

/// AIPerf 0.13.0's README and the tutorials' lines it parses.
#[test]
fn aiperf_readme_and_tutorial_examples_import_field_by_field() {
    aiperf(
        "aiperf profile --model Qwen/Qwen3-0.6B --url localhost:8000 --endpoint-type chat",
        &[
            ("target.url", Some(r#""http://localhost:8000""#)),
            ("target.api", Some(r#""openai-chat""#)),
            ("target.model", Some(r#""Qwen/Qwen3-0.6B""#)),
            ("workload.stream", Some("false")),
            ("workload.input_tokens.value", Some("550")),
            ("workload.enforce_output_length", Some("false")),
            ("load.kind", Some(r#""closed""#)),
            ("load.concurrency", Some("1")),
            ("load.requests", Some("10")),
            ("warmup.requests", Some("0")),
        ],
        &[
            "no --streaming",
            "no --random-seed: AIPerf seeds from system entropy",
            "inter_token_latency is (E2E − TTFT) / (output tokens − 1)",
        ],
    );
    aiperf(
        "aiperf profile \\
  --model your_model_name \\
  --url http://localhost:8000 \\
  --endpoint-type chat \\
  --streaming",
        &[("workload.stream", None)],
        &[],
    );
    aiperf(
        "aiperf profile \\
  --model Qwen/Qwen3-0.6B \\
  --url http://localhost:8000 \\
  --endpoint-type chat \\
  --concurrency 10 \\
  --request-count 100 \\
  --streaming",
        &[
            ("load.concurrency", Some("10")),
            ("load.requests", Some("100")),
        ],
        &["--concurrency: AIPerf keeps that many requests in flight"],
    );
    aiperf(
        "aiperf profile \\
  --model \"granite4:350m\" \\
  --streaming \\
  --endpoint-type chat \\
  --tokenizer ibm-granite/granite-4.0-micro \\
  --url http://localhost:11434 \\
  --request-count 10",
        &[
            ("target.url", Some(r#""http://localhost:11434""#)),
            ("target.model", Some(r#""granite4:350m""#)),
        ],
        &["--tokenizer ibm-granite/granite-4.0-micro: AIPerf counts tokens"],
    );
    aiperf(
        "aiperf profile \\
  --model \"granite4:350m\" \\
  --streaming \\
  --endpoint-type chat \\
  --tokenizer ibm-granite/granite-4.0-micro \\
  --url http://localhost:11434 \\
  --concurrency 5 \\
  --request-count 10",
        &[("load.concurrency", Some("5"))],
        &[],
    );
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8080 \\
    --synthetic-input-tokens-mean 100 \\
    --synthetic-input-tokens-stddev 0 \\
    --output-tokens-mean 200 \\
    --output-tokens-stddev 0 \\
    --extra-inputs min_tokens:200 \\
    --extra-inputs ignore_eos:true \\
    --concurrency 4 \\
    --request-count 64 \\
    --warmup-request-count 1 \\
    --conversation-num 8 \\
    --random-seed 100",
        &[
            ("target.url", Some(r#""http://localhost:8080""#)),
            ("workload.seed", Some("100")),
            ("workload.input_tokens.value", Some("100")),
            ("workload.output_tokens.value", Some("200")),
            ("workload.enforce_output_length", Some("true")),
            ("load.concurrency", Some("4")),
            ("load.requests", Some("64")),
            ("warmup.requests", Some("1")),
        ],
        &[
            "--extra-inputs min_tokens",
            "--conversation-num 8: not mapped",
        ],
    );
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --request-rate 32 \\
    --request-count 64 \\
    --url localhost:8000",
        &[
            ("load.kind", Some(r#""open""#)),
            ("load.rate", Some("32")),
            ("load.arrival", Some(r#""poisson""#)),
            ("load.requests", Some("64")),
        ],
        &[],
    );
    aiperf(
        "aiperf profile \\
    -m Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --streaming \\
    --url localhost:8000 \\
    --request-count 20 \\
    --goodput \"time_to_first_token:100 inter_token_latency:3.40\"",
        &[
            ("slo.ttft_ms", Some("100")),
            ("slo.tpot_ms", Some("3.4")),
            ("load.requests", Some("20")),
        ],
        &["--goodput: AIPerf counts the requests that meet every threshold"],
    );
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8000 \\
    --benchmark-duration 30.0 \\
    --benchmark-grace-period 15.0 \\
    --synthetic-input-tokens-mean 200 \\
    --synthetic-input-tokens-stddev 50 \\
    --output-tokens-mean 100 \\
    --output-tokens-stddev 20 \\
    --concurrency 5 \\
    --warmup-request-count 3 \\
    --random-seed 33333",
        &[
            ("load.duration", Some(r#""30s""#)),
            ("load.requests", None),
            ("workload.input_tokens.dist", Some(r#""normal""#)),
            ("workload.input_tokens.mean", Some("200")),
            ("workload.input_tokens.stddev", Some("50")),
            ("workload.output_tokens.stddev", Some("20")),
            ("warmup.requests", Some("3")),
        ],
        &["--benchmark-grace-period 15.0"],
    );
}

/// AIPerf's cancellation, sequence-distribution and trace tutorials, and the line that wrote
/// goodput's own AIPerf audit fixture (scripts/peer-fixtures.sh).
/// AIPerf's vision tutorial flags: images per turn and their sizes, a spread as five weighted
/// sizes, and a format goodput does not generate said.
#[test]
fn aiperf_image_flags_import_as_workload_images() {
    let i = aiperf(
        "aiperf profile --model Qwen/Qwen2-VL-2B-Instruct --endpoint-type chat --streaming \
  --url localhost:8000 --image-width-mean 512 --image-height-mean 512 --image-width-stddev 64 \
  --batch-size-image 2 --image-format jpeg --request-count 20",
        &[
            ("workload.images.count.value", Some("2")),
            (
                "workload.images.sizes",
                Some(r#"["384x512", "448x512", "512x512", "576x512", "640x512"]"#),
            ),
            (
                "workload.images.size_weights",
                Some("[0.054, 0.242, 0.399, 0.242, 0.054]"),
            ),
        ],
        &[
            "--image-format jpeg: goodput generates PNG",
            "goodput draws from five sizes",
        ],
    );
    let c = common::parse(&i.contract);
    assert_eq!(c.workload.images.as_ref().unwrap().most(), 2);
    let plain = aiperf(
        "aiperf profile --model m --endpoint-type chat --url localhost:8000 --image-width-mean 256 --image-height-mean 128",
        &[("workload.images.sizes", Some(r#"["256x128"]"#))],
        &[],
    );
    let c = common::parse(&plain.contract);
    assert!(c.workload.images.as_ref().unwrap().size_weights.is_empty());
}

#[test]
fn aiperf_trace_and_other_examples_name_what_differs() {
    for (rate, delay, isl, osl, c, n) in [
        ("10", "0.5", "800", "400", "8", "50"),
        ("50", "1.0", "1200", "600", "10", "40"),
        ("30", "0.0", "500", "100", "15", "60"),
    ] {
        let sd = if rate == "10" {
            "--synthetic-input-tokens-stddev 80 --output-tokens-stddev 40 --warmup-request-count 5"
        } else {
            ""
        };
        aiperf(
            &format!(
                "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat \
                 --endpoint /v1/chat/completions --streaming --url localhost:8000 \
                 --request-cancellation-rate {rate} --request-cancellation-delay {delay} \
                 --synthetic-input-tokens-mean {isl} --output-tokens-mean {osl} \
                 --concurrency {c} --request-count {n} {sd}"
            ),
            &[
                ("workload.input_tokens.mean", (rate == "10").then_some(isl)),
                ("load.concurrency", Some(c)),
                ("load.requests", Some(n)),
            ],
            &[&format!("--request-cancellation-rate {rate}: not mapped")],
        );
    }
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8000 \\
    --sequence-distribution \"64|10,32|8:70;256|40,128|20:20;1024|100,512|50:10\"",
        &[],
        &["--sequence-distribution 64|10,32|8:70;256|40,128|20:20;1024|100,512|50:10: not mapped"],
    );
    // SPEED-Bench (AIPerf's speculative-decoding prompt set, its tutorial's line): a download,
    // named; acceptance needs no flag in either tool.
    aiperf(
        "aiperf profile --model m --endpoint-type chat --streaming --url localhost:8000 \
         --public-dataset speed_bench_coding --request-count 80 --concurrency 1",
        &[("load.requests", Some("80"))],
        &[
            "--public-dataset speed_bench_coding: AIPerf downloads it",
            "goodput states each request's acceptance",
        ],
    );
    for line in [
        "aiperf profile -m deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --input-file example_trace.jsonl --custom-dataset-type mooncake_trace --fixed-schedule",
        "aiperf profile -m deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --input-file mooncake_trace_short.jsonl --custom-dataset-type mooncake_trace --fixed-schedule",
    ] {
        aiperf(
            line,
            &[
                ("load.arrival", Some(r#""trace""#)),
                ("load.kind", Some(r#""open""#)),
                ("load.requests", None),
            ],
            &[],
        );
    }
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8000 \\
    --input-file precise_schedule.jsonl \\
    --custom-dataset-type mooncake_trace \\
    --fixed-schedule-auto-offset",
        &[("load.trace", Some(r#""precise_schedule.jsonl""#))],
        &[
            "without --fixed-schedule: AIPerf sends the trace's prompts",
            "--fixed-schedule-auto-offset: not mapped",
        ],
    );
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8000 \\
    --input-file precise_schedule.jsonl \\
    --custom-dataset-type mooncake_trace \\
    --fixed-schedule-start-offset 2000 \\
    --fixed-schedule-end-offset 4000",
        &[("load.arrival", Some(r#""trace""#))],
        &["--fixed-schedule-start-offset 2000: not mapped"],
    );
    aiperf(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --url localhost:8000 \\
    --input-file production_queries.jsonl \\
    --custom-dataset-type mooncake_trace \\
    --concurrency 2 \\
    --warmup-request-count 1",
        &[
            ("load.arrival", Some(r#""trace""#)),
            ("warmup.requests", Some("1")),
        ],
        &["goodput replays the trace at its timestamps"],
    );
    aiperf(
        "aiperf profile --model goodput-sim-8b \
    --url http://127.0.0.1:18000 --endpoint-type chat --streaming --tokenizer goodput/sim-tokenizer \
    --request-rate 8 --request-count 40 --warmup-request-count 5 \
    --synthetic-input-tokens-mean 128 --output-tokens-mean 32 --extra-inputs ignore_eos:true \
    --artifact-dir artifacts/goodput-sim --ui-type none",
        &[
            ("load.rate", Some("8")),
            ("load.requests", Some("40")),
            ("warmup.requests", Some("5")),
            ("workload.enforce_output_length", Some("true")),
            ("workload.output_tokens.value", Some("32")),
        ],
        &["--output-artifact-dir, --ui-type: no counterpart needed"],
    );
}

/// AIPerf lines that are wrong for 0.13.0: refused naming the flag.
#[test]
fn bad_aiperf_lines_are_refused_naming_the_flag() {
    let err = |line: &str| {
        goodput::peers::aiperf::import(&words(line))
            .unwrap_err()
            .to_string()
    };
    let e = err("aiperf profile --model m --request-cout 10");
    assert!(
        e.contains("`--request-cout`: not a flag of aiperf profile 0.13.0"),
        "{e}"
    );
    let e = err("aiperf profile --model m --service-kind openai");
    assert!(
        e.contains("`--service-kind`") && e.contains("GenAI-Perf"),
        "{e}"
    );
    let e = err("genai-perf profile -m m");
    assert!(e.contains("AIPerf's predecessor"), "{e}");
    let e = err("aiperf profile --endpoint-type chat-completions");
    assert!(e.contains("`--endpoint-type chat-completions`"), "{e}");
    let e = err("aiperf profile --request-rate fast");
    assert!(e.contains("`--request-rate fast`"), "{e}");
    let e = err("aiperf profile --concurrency 0");
    assert!(e.contains("`--concurrency 0`: must be > 0"), "{e}");
    let e = err("aiperf profile --request-rate 2 --arrival-pattern bursty");
    assert!(e.contains("`--arrival-pattern bursty`"), "{e}");
    let e = err("aiperf profile --goodput ttft=100");
    assert!(e.contains("`ttft=100` is not METRIC:VALUE"), "{e}");
    let e = err("aiperf profile --random-seed x");
    assert!(e.contains("`--random-seed x`: not an integer"), "{e}");
    let e = err("aiperf profile --streaming=true");
    assert!(e.contains("is a switch"), "{e}");
    let e = err("aiperf profile --custom-dataset-type single_turn");
    assert!(e.contains("needs --input-file"), "{e}");
    let e = err("aiperf analyze");
    assert!(e.contains("not an `aiperf profile` command"), "{e}");
    let e = err("guidellm benchmark --target http://x");
    assert!(e.contains("a command of guidellm"), "{e}");
    // Through the binary: exit 1, the flag named, no panic.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["import", "aiperf", "--", "--model", "m", "--bogus", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--bogus`"));
}

/// An imported GuideLLM and AIPerf command each run against the simulator as written (the
/// URL pointed there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_guidellm_and_aiperf_contracts_run_against_the_simulator() {
    let sim = common::sim(goodput::sim::SimConfig::instant()).await;
    let url = format!("http://{}", sim.addr());
    let dir = tempfile::tempdir().unwrap();
    for (tool, args, ok) in [
        (
            "guidellm",
            format!(
                "guidellm benchmark --target {url}/v1 --profile poisson --rate 20 \
                 --max-requests 30 --data prompt_tokens=64,output_tokens=16"
            ),
            30,
        ),
        (
            "aiperf",
            format!(
                "aiperf profile -m goodput-sim-8b --url {url} --endpoint-type chat --streaming \
                 --request-rate 20 --request-count 25 --isl 64 --osl 16 \
                 --goodput time_to_first_token:1000"
            ),
            25,
        ),
    ] {
        let out = dir.path().join(format!("{tool}.toml"));
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["import", tool, "-o"])
            .arg(&out)
            .arg("--")
            .args(words(&args))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&status.stderr);
        assert!(status.status.success(), "{stderr}");
        assert!(stderr.contains("note: "), "{stderr}");
        let text = std::fs::read_to_string(&out).unwrap();
        let r = common::run_in(common::parse(&text), dir.path()).await;
        // Steady requests only: how many drain requests (sent while the last steady ones
        // finish) complete depends on this machine's speed.
        let steady = |only_ok: bool| {
            r.records
                .iter()
                .filter(|x| x.phase == goodput::plan::Phase::Steady && (!only_ok || x.is_ok()))
                .count()
        };
        assert_eq!((steady(false), steady(true)), (ok, ok), "{tool}");
    }
}

/// A key or an Authorization header on the command line reaches neither the contract (its
/// values, their comments, the echoed command) nor a note: the contract references the
/// variable to export instead (dropped where the key already makes the header).
#[test]
fn credentials_on_a_command_line_are_never_written() {
    let secretless = |i: &Imported| {
        assert!(!i.contract.contains("sk-live"), "{}", i.contract);
        assert!(
            !i.breaks.iter().any(|b| b.contains("sk-live")),
            "{:?}",
            i.breaks
        );
    };
    let i = aiperf(
        "aiperf profile -m m --url https://api.example.com --api-key sk-live-123 \
         --header X-Team:infra --header 'Authorization:Bearer sk-live-456' --streaming",
        &[
            ("target.api_key_env", Some(r#""OPENAI_API_KEY""#)),
            ("target.request.headers.X-Team", Some(r#""infra""#)),
            ("target.request.headers.Authorization", None),
        ],
        &["--header Authorization: a credential is not written"],
    );
    secretless(&i);
    let i = check(
        goodput::peers::vllm_bench::import,
        "vllm bench serve --model m --header 'Authorization=Bearer sk-live-789' X-Team=infra",
        &[
            ("target.request.headers.X-Team", Some(r#""infra""#)),
            (
                "target.request.headers.Authorization",
                Some(r#"{ env = "AUTHORIZATION" }"#),
            ),
        ],
        &["--header Authorization: a credential is not written"],
    );
    secretless(&i);
    let i = guidellm(
        r#"guidellm benchmark --target https://api.example.com/v1 --backend-kwargs '{"api_key": "sk-live-000"}' --data prompt_tokens=8,output_tokens=8 --profile synchronous"#,
        &[("target.api_key_env", Some(r#""OPENAI_API_KEY""#))],
        &[],
    );
    secretless(&i);
}

/// `import --result` and `compare THEIRS BUNDLE`: AIPerf's real export (written against
/// `goodput sim` by scripts/peer-fixtures.sh) imports with its own command line, the contract
/// runs on the simulator, and compare puts every figure beside goodput's: each definition
/// named, the token-count difference explained, the latencies that share a definition close.
/// A result of another tool, or one with no figures, is refused naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn their_result_is_checked_on_import_and_put_beside_the_run() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit");
    let theirs = fixtures.join("aiperf-profile-export.json");
    let sim = common::sim(goodput::sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("aiperf.toml");
    let line = format!(
        "aiperf profile --model goodput-sim-8b --url http://{} --endpoint-type chat --streaming \
         --tokenizer goodput/sim-tokenizer --request-rate 8 --request-count 40 --warmup-request-count 5 \
         --synthetic-input-tokens-mean 128 --output-tokens-mean 32 --extra-inputs ignore_eos:true \
         --artifact-dir artifacts/goodput-sim --ui-type none",
        sim.addr()
    );
    let bin = || std::process::Command::new(env!("CARGO_BIN_EXE_goodput"));
    let import = bin()
        .args(["import", "aiperf", "--result"])
        .arg(&theirs)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(words(&line))
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&import.stderr);
    assert!(import.status.success(), "{notes}");
    assert!(notes.contains("goodput compare"), "{notes}");
    assert!(!notes.contains("warning:"), "{notes}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("# Their result: "), "{text}");
    let r = common::run_in(common::parse(&text), dir.path()).await;
    let json = bin()
        .arg("compare")
        .arg(&theirs)
        .arg(&r.bundle.dir)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let b: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let row = |m: &str| beside_row(&b, m);
    // The same 40 requests of 128 prompt tokens; end-to-end latency has one definition in both
    // tools and the simulator's answers take the same time (32 tokens at its decode rate).
    assert_eq!(row("request count (requests)")["ours_by_theirs"], 40.0);
    assert_eq!(row("input sequence length mean (tokens)")["agrees"], true);
    assert_eq!(row("request latency median (ms)")["agrees"], true, "{b}");
    // AIPerf counted the simulator's 32-token answers as 49.4 with its tokenizer: named, with
    // goodput's ITL counted as AIPerf counts (8.2 ms stated) beside it.
    let explained = b["explained"].to_string();
    assert!(
        explained.contains("is not the server's count"),
        "{explained}"
    );
    assert!(
        explained.contains("ITL median (ms): ours counted as they count"),
        "{explained}"
    );
    let defs = b["definitions"].to_string();
    for k in ["TTFT", "ITL", "request latency", "request throughput"] {
        assert!(defs.contains(&format!("\"{k}\"")), "{defs}");
    }
    // AIPerf 0.13 divides its throughput by its profiling phase's window, which opens one
    // drawn gap before the first send: the definition says so (not vLLM's pinned total), and
    // recomputed so, ours agrees within the schedule's draw.
    let tput = row("request throughput (req/s)");
    assert_eq!(tput["agrees"], true, "{tput}");
    assert!(
        defs.contains("one arrival gap before the first send") && !defs.contains("num_prompts"),
        "{defs}"
    );
    // Its per-request export beside the result (profile_export.jsonl) gives the sent rate and
    // each row's noise: the offered loads are put side by side, and no row is judged on point
    // values alone.
    assert!(b["offered"]["theirs_rps"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["busy_periods"][0].is_u64(), "{b}");
    assert!(
        !b.to_string().contains("keeps no per-request values"),
        "{b}"
    );
    // A records file that is not AIPerf's names its file and line; one of another run (a
    // different count) is refused too.
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::copy(&theirs, broken.join("profile_export_aiperf.json")).unwrap();
    let records = std::fs::read_to_string(fixtures.join("profile_export.jsonl")).unwrap();
    let mut lines: Vec<&str> = records.lines().collect();
    lines[2] = "{not json";
    std::fs::write(broken.join("profile_export.jsonl"), lines.join("\n")).unwrap();
    let compare_broken = || {
        bin()
            .arg("compare")
            .arg(broken.join("profile_export_aiperf.json"))
            .arg(&r.bundle.dir)
            .output()
            .unwrap()
    };
    let e = compare_broken();
    assert_eq!(e.status.code(), Some(1));
    let said = String::from_utf8_lossy(&e.stderr);
    assert!(said.contains("profile_export.jsonl:3"), "{said}");
    let profiling = records
        .lines()
        .filter(|l| l.contains("\"profiling\""))
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(broken.join("profile_export.jsonl"), profiling).unwrap();
    let said = String::from_utf8_lossy(&compare_broken().stderr).into_owned();
    assert!(said.contains("the records are of another run"), "{said}");
    // Refusals, each naming the file.
    let e = bin()
        .arg("compare")
        .arg(&theirs)
        .arg(&r.bundle.dir)
        .arg(&r.bundle.dir)
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&e.stderr).contains("another tool's result"));
    // SGLang's bench_serving JSONL (several runs) is read at the run of this rate, 8 req/s:
    // its first line, named; its figures beside ours by its own rule (text chunks).
    let sglang = fixtures.join("sglang-bench-serving.jsonl");
    let out = bin()
        .arg("compare")
        .arg(&sglang)
        .arg(&r.bundle.dir)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["format"], "SGLang bench_serving result", "{s}");
    assert!(
        s["picked"].as_str().unwrap().starts_with("line 1 of"),
        "{s}"
    );
    assert_eq!(s["events"], "text", "{s}");
    let rows = s["rows"].to_string();
    for m in [
        "TTFT median (ms)",
        "E2E latency p99 (ms)",
        "request throughput (req/s)",
    ] {
        assert!(rows.contains(m), "no row {m}: {rows}");
    }
    let e = bin()
        .args(["import", "aiperf", "--result"])
        .arg(fixtures.join("vllm-bench-serve.json"))
        .args(["--", "aiperf", "profile", "-m", "m"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&e.stderr);
    assert_eq!(e.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not a result of the AIPerf command imported"),
        "{err}"
    );
}

/// GuideLLM 0.6.1's real report (Poisson at 8 req/s, 40 requests, every one kept; written against
/// `goodput sim` by scripts/peer-fixtures.sh) beside a goodput run of its import: its
/// per-request values give the load it offered and each row's noise, and compare names what
/// it finds — GuideLLM's client sent far above the rate its command asked for, so the
/// throughput rows differ for that reason, and its prompts (built with a tokenizer that is not
/// the server's) are another length. The latencies the simulator fixes agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guidellm_per_request_report_is_put_beside_a_run_by_its_own_rules() {
    let theirs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/audit/guidellm-poisson.json");
    let sim = common::sim(goodput::sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("guidellm.toml");
    let line = format!(
        "guidellm benchmark run --target http://{} --model goodput-sim-8b --profile poisson --rate 8 \
         --max-requests 40 --data prompt_tokens=128,output_tokens=32 --random-seed 42",
        sim.addr()
    );
    let bin = || std::process::Command::new(env!("CARGO_BIN_EXE_goodput"));
    let import = bin()
        .args(["import", "guidellm", "--result"])
        .arg(&theirs)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(words(&line))
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&import.stderr);
    assert!(import.status.success(), "{notes}");
    let r = common::run_in(
        common::parse(&std::fs::read_to_string(&out).unwrap()),
        dir.path(),
    )
    .await;
    let compare = |format: &str| {
        let o = bin()
            .arg("compare")
            .arg(&theirs)
            .arg(&r.bundle.dir)
            .args(["--format", format])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let b: serde_json::Value = serde_json::from_str(&compare("json")).unwrap();
    let row = |m: &str| beside_row(&b, m);
    // Their requests' send times: 40 in under 2 s, for a command that asked for 8 req/s.
    let offered = &b["offered"];
    assert!(offered["theirs_rps"].as_f64().unwrap() > 16.0, "{offered}");
    assert_eq!(offered["their_nominal_rps"], 8.0, "{offered}");
    assert_eq!(offered["differs"], true, "{offered}");
    let text = compare("terminal");
    assert!(
        text.contains("off the 8.00 req/s its command asked for"),
        "{text}"
    );
    assert!(
        !text.contains("pin_total"),
        "vLLM's advice on GuideLLM's result: {text}"
    );
    for m in [
        "requests per second (req/s)",
        "output tokens per second (tokens/s)",
    ] {
        let t = row(m);
        assert_eq!(t["verdict"], "differs", "{t}");
        assert!(
            t["reason"]
                .as_str()
                .unwrap()
                .contains("offered loads differ"),
            "{t}"
        );
    }
    // Lengths are judged request by request: their prompts were 36 of the server's tokens.
    let prompt = row("prompt tokens mean (tokens)");
    assert_eq!(prompt["verdict"], "differs", "{prompt}");
    assert!(
        prompt["reason"]
            .as_str()
            .unwrap()
            .contains("their prompts are not the length ours are"),
        "{prompt}"
    );
    assert_eq!(row("output tokens mean (tokens)")["verdict"], "agrees");
    // What the simulator fixes (32 tokens at its decode rate) agrees by their definitions,
    // each with an interval from both sides' requests.
    for m in [
        "ITL median (ms)",
        "request latency median (ms)",
        "TPOT median (ms)",
    ] {
        let t = row(m);
        assert!(
            t["verdict"] == "agrees" || t["verdict"] == "within_noise",
            "{t}"
        );
    }
    assert!(b["busy_periods"][0].is_u64(), "{b}");
}

/// The row of `metric` in `goodput compare THEIRS BUNDLE --format json`'s answer.
fn beside_row(b: &serde_json::Value, metric: &str) -> serde_json::Value {
    b["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric}: {b}"))
        .clone()
}
