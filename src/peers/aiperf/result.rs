//! AIPerf's profile export (`profile_export_aiperf.json` in its artifact directory): every
//! metric a `{unit, avg, p50, …, p99}` record, and the run's configuration under
//! `input_config` (endpoint, model, datasets, and its phases: warm-up and profiling, each with
//! its arrival type and rate or concurrency).

use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

use crate::graded::Audit;
use crate::peers::result::{
    Gathered, PeerFormat, QUALITY_MISSING, distribution, field, num, one, reasoning_ttft_unknown,
    server_unknown, slo_axis,
};
use crate::peers::statement::{Kind, Stat, Statement, sent_rate};

/// The format.
pub struct Aiperf;

const NAME: &str = "AIPerf profile export";

/// AIPerf's per-request export, written beside `profile_export_aiperf.json` in its artifact
/// directory: one JSON object per request, `metadata` (phase, send time) and `metrics` (each
/// `{value, unit}`).
const RECORDS: &str = "profile_export.jsonl";

/// One successful request of the profiling phase, from AIPerf's per-request export.
struct Row {
    /// `metadata.request_start_ns`, AIPerf's wall clock.
    start_ns: f64,
    ttft_ms: Option<f64>,
    latency_ms: f64,
    /// AIPerf's ITL: (request latency − TTFT) / (output sequence length − 1).
    itl_ms: Option<f64>,
    output: Option<f64>,
    input: Option<f64>,
}

impl Row {
    /// The request's row, unless it is of the warm-up, cancelled or failed (an error record,
    /// or no latency: AIPerf computes none without a content response).
    fn of(r: &Value) -> Option<Row> {
        let m = &r["metadata"];
        let ok = m["benchmark_phase"] == "profiling"
            && m["was_cancelled"] != true
            && r.get("error").is_none_or(Value::is_null);
        let metric = |k: &str| {
            r["metrics"][k]["value"]
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
        };
        ok.then_some(())?;
        Some(Row {
            start_ns: m["request_start_ns"].as_f64()?,
            ttft_ms: metric("time_to_first_token"),
            latency_ms: metric("request_latency")?,
            itl_ms: metric("inter_token_latency"),
            output: metric("output_sequence_length"),
            input: metric("input_sequence_length"),
        })
    }

    /// The request's value of a kind AIPerf states per request.
    fn value(&self, k: Kind) -> Option<f64> {
        match k {
            Kind::Ttft => self.ttft_ms,
            Kind::E2e => Some(self.latency_ms),
            Kind::PerRequestGap => self.itl_ms,
            Kind::OutputTokens => self.output,
            Kind::InputTokens => self.input,
            _ => None,
        }
    }
}

impl PeerFormat for Aiperf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn needs(&self) -> &'static str {
        "an AIPerf profile export JSON (`aiperf_version`, `input_config`, `request_latency`)"
    }

    fn recognises(&self, v: &Value) -> bool {
        v.get("aiperf_version").is_some()
            || (v.get("input_config").is_some() && v.get("time_to_first_token").is_some())
    }

    fn stated(&self, v: &Value, _c: &crate::contract::Contract) -> Option<Statement> {
        let mut figures = Gathered::default();
        for (name, kind, key) in [
            ("TTFT", Kind::Ttft, "time_to_first_token"),
            ("ITL", Kind::PerRequestGap, "inter_token_latency"),
            ("request latency", Kind::E2e, "request_latency"),
        ] {
            let at = |word: &str| format!("/{key}/{word}");
            distribution(
                &mut figures,
                v,
                (name, kind),
                (["avg", "p50", "p90", "p99"], at),
                1.0,
            );
        }
        for (f, at) in [
            (
                ("request throughput", Kind::RequestsPerS, Stat::Value),
                "/request_throughput/avg",
            ),
            (
                (
                    "output token throughput",
                    Kind::OutputTokensPerS,
                    Stat::Value,
                ),
                "/output_token_throughput/avg",
            ),
            (
                ("input sequence length", Kind::InputTokens, Stat::Mean),
                "/input_sequence_length/avg",
            ),
            (
                ("output sequence length", Kind::OutputTokens, Stat::Mean),
                "/output_sequence_length/avg",
            ),
            (
                ("request count", Kind::Completed, Stat::Value),
                "/request_count/avg",
            ),
        ] {
            one(&mut figures, v, f, at, 1.0);
        }
        let cfg = &v["input_config"];
        figures.model(cfg, "/models/items/0/name");
        let phases = cfg["phases"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let profiling = phases.iter().find(|p| p["kind"] == "profiling");
        if let Some(p) = profiling {
            figures.count("requests", p, "/requests", 1);
            figures.rate(p, "/rate", false);
            figures.count("concurrency", p, "/concurrency", 1);
        }
        // AIPerf 0.13 divides its throughputs by the profiling phase's window
        // (`MetricResultsDict::observation_duration`: the phase's start to its last request's
        // end), and its request-rate timer waits one drawn interval after the phase starts
        // before the first send (`timing/strategies/request_rate.py`): one gap ahead, as
        // vLLM's. A concurrency phase sends at once.
        let paced = profiling.is_some_and(|p| p["rate"].as_f64().is_some_and(|r| r > 0.0));
        Some(figures.into_statement(paced, None))
    }

    fn per_request(&self, path: &Path, st: &mut Statement) -> anyhow::Result<()> {
        let file = path.with_file_name(RECORDS);
        if !file.is_file() {
            return Ok(());
        }
        let text = crate::text::read_capped_string(&file, crate::peers::MAX_PEER_BYTES)
            .with_context(|| format!("reading {}", file.display()))?;
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Value = serde_json::from_str(line).with_context(|| {
                format!(
                    "{}:{}: not one of AIPerf's JSON records",
                    file.display(),
                    i + 1
                )
            })?;
            if let Some(row) = Row::of(&r) {
                rows.push(row);
            }
        }
        // The records must be this result's: AIPerf writes both files of one run into its
        // artifact directory, so a count that differs means another run's file.
        let stated = st
            .figures
            .iter()
            .find(|f| f.kind == Kind::Completed)
            .map(|f| f.value);
        if stated.is_some_and(|n| n != rows.len() as f64) {
            anyhow::bail!(
                "{}: {} successful profiling requests, but {} states {}: the records are of another run (AIPerf writes both into one artifact directory)",
                file.display(),
                rows.len(),
                path.display(),
                stated.unwrap_or_default()
            );
        }
        rows.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns));
        st.samples = [
            Kind::Ttft,
            Kind::E2e,
            Kind::PerRequestGap,
            Kind::OutputTokens,
            Kind::InputTokens,
        ]
        .into_iter()
        .map(|k| {
            (
                k,
                rows.iter()
                    .map(|r| r.value(k).into_iter().collect())
                    .collect(),
            )
        })
        .collect();
        st.sample_spans = rows
            .iter()
            .map(|r| (r.start_ns / 1e9, r.start_ns / 1e9 + r.latency_ms / 1e3))
            .collect();
        st.sent_rps = sent_rate(st.sample_spans.iter().map(|s| s.0));
        Ok(())
    }

    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit> {
        let mut a = Audit::new(path, NAME);
        let cfg = field(path, NAME, v, "/input_config")?;
        field(path, NAME, v, "/request_latency")?;
        target(&mut a, v, cfg);
        workload(&mut a, v, cfg);
        load(&mut a, cfg);
        slo_and_run(&mut a, v, cfg);
        Ok(a.done())
    }
}

/// The target axis, and the facts about the server the file cannot give.
fn target(a: &mut Audit, v: &Value, cfg: &Value) {
    let model = cfg["models"]["items"][0]["name"].as_str().unwrap_or("?");
    let ep = &cfg["endpoint"];
    let urls: Vec<&str> = ep["urls"]
        .as_array()
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let streamed = ep["streaming"].as_bool() == Some(true);
    a.axis(
        "target",
        format!(
            "{} · model {model} · {} endpoint{} · AIPerf {}",
            if urls.is_empty() {
                "?".to_owned()
            } else {
                urls.join(", ")
            },
            ep["type"].as_str().unwrap_or("?"),
            if streamed {
                ", streamed"
            } else {
                ", not streamed"
            },
            v["aiperf_version"].as_str().unwrap_or("?")
        ),
    );
    // GPU telemetry (DCGM) names the hardware when it was reachable.
    let gpus = v["telemetry_data"]["endpoints"]
        .as_object()
        .is_some_and(|e| !e.is_empty());
    server_unknown(a, false, gpus);
    if let Some(m) = reasoning_ttft_unknown(model, "AIPerf") {
        a.missing.push(m);
    }
    if !streamed {
        a.missing.push(
            "not streamed: TTFT and inter-token latency are not measured (TTFT is the whole response)".into(),
        );
    }
}

/// The workload axis: datasets, real lengths, whether the output length was enforced.
fn workload(a: &mut Audit, v: &Value, cfg: &Value) {
    let ep = &cfg["endpoint"];
    let isl = &v["input_sequence_length"];
    let osl = &v["output_sequence_length"];
    let enforced =
        ep["extra"]["ignore_eos"].as_bool() == Some(true) || ep["extra"]["min_tokens"].is_number();
    let datasets: Vec<String> = cfg["datasets"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|d| {
                    format!(
                        "{} {} ({} input / {} output tokens asked on average)",
                        d["type"].as_str().unwrap_or("?"),
                        d["name"].as_str().unwrap_or("dataset"),
                        num(&d["prompts"]["isl"]["mean"]),
                        num(&d["prompts"]["osl"]["mean"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    a.axis(
        "workload",
        format!(
            "{} · real lengths: input p50 {} / output p50 {} tokens (p99 {}) · output length {}",
            if datasets.is_empty() {
                "dataset not stated".to_owned()
            } else {
                datasets.join("; ")
            },
            num(&isl["p50"]),
            num(&osl["p50"]),
            num(&osl["p99"]),
            if enforced {
                "enforced (ignore_eos / min_tokens sent)"
            } else {
                "not enforced"
            }
        ),
    );
    // AIPerf counts output with its tokenizer; the server's usage says what it generated.
    if let (Some(mine), Some(server)) = (
        osl["avg"].as_f64(),
        v["usage_completion_tokens"]["avg"].as_f64(),
    ) && server > 0.0
        && (mine - server).abs() / server > 0.05
    {
        a.missing.push(format!(
            "output token counts disagree: {mine:.1} a request by AIPerf's tokenizer, {server:.1} by the server's usage ({:+.0}%): the tokenizer is not the model's, so every per-token figure is in the wrong unit",
            (mine - server) / server * 100.0
        ));
    }
    if isl.is_null() || osl.is_null() {
        a.missing
            .push("real token lengths not recorded (no input/output sequence length)".into());
    } else if !enforced {
        a.limits.push(
            "output length not enforced: each request stopped where the model chose, so output lengths vary with the engine (the recorded distribution says by how much)".into(),
        );
    }
}

/// The load and warm-up axes, from the profiling and warm-up phases.
fn load(a: &mut Audit, cfg: &Value) {
    let phases = cfg["phases"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let profiling: Vec<&Value> = phases
        .iter()
        .filter(|p| p["kind"].as_str() != Some("warmup"))
        .collect();
    let mut loads = Vec::new();
    for p in &profiling {
        let kind = p["type"].as_str().unwrap_or("?");
        let (rate, conc) = (p["rate"].as_f64(), p["concurrency"].as_u64());
        loads.push(match (rate, conc) {
            (Some(r), None) => format!("open loop, {kind} arrivals at {r} req/s"),
            (Some(r), Some(c)) => {
                a.limits.push(format!(
                    "arrivals at {r} req/s held behind a concurrency cap of {c}: requests that waited for a slot are timed from their actual send (coordinated omission)"
                ));
                format!("open loop, {kind} arrivals at {r} req/s, capped at {c} in flight")
            }
            (None, Some(c)) => {
                a.limits.push(format!(
                    "closed-loop load (concurrency {c}): tail latency and capacity claims are not valid"
                ));
                format!("closed loop, concurrency {c}")
            }
            (None, None) => format!("`{kind}`"),
        });
    }
    if loads.is_empty() {
        a.missing
            .push("load not stated (no profiling phase in input_config)".into());
        loads.push("not stated".into());
    }
    a.axis("load", loads.join("; "));
    let warm: Vec<String> = phases
        .iter()
        .filter(|p| p["kind"].as_str() == Some("warmup"))
        .map(|p| {
            format!(
                "{} requests{}",
                num(&p["requests"]),
                if p["exclude_from_results"].as_bool() == Some(true) {
                    ", excluded from the results"
                } else {
                    ""
                }
            )
        })
        .collect();
    if warm.is_empty() {
        a.missing.push("warm-up not stated".into());
        a.axis("warm-up", "not stated");
    } else {
        a.axis("warm-up", warm.join("; "));
    }
}

/// The SLO and measurement axes, and how the run ended.
fn slo_and_run(a: &mut Audit, v: &Value, cfg: &Value) {
    let goodput = v.get("goodput").or(v.get("good_request_count"));
    let thresholds = cfg.get("goodput");
    slo_axis(
        a,
        goodput.filter(|g| !g.is_null()).map(|g| {
            format!(
                "goodput {} under {}",
                num(&g["avg"]),
                thresholds.map_or("thresholds not saved".to_owned(), Value::to_string)
            )
        }),
    );
    a.axis(
        "measurement",
        format!(
            "latency from the actual send; TTFT p99 {} ms, request latency p99 {} ms over {} requests",
            num(&v["time_to_first_token"]["p99"]),
            num(&v["request_latency"]["p99"]),
            num(&v["request_count"]["avg"])
        ),
    );
    a.missing.push(QUALITY_MISSING.into());
    if v["was_cancelled"].as_bool() == Some(true) || v["is_complete"].as_bool() == Some(false) {
        a.missing
            .push("the run was cancelled or did not complete: fewer requests than asked".into());
    }
    let errors = v["error_summary"].as_array().map_or(0, Vec::len);
    if errors > 0
        || v["request_error_rate"]["avg"]
            .as_f64()
            .is_some_and(|r| r > 0.0)
    {
        a.limits.push(format!(
            "requests failed (error rate {}%, {errors} kinds of error)",
            num(&v["request_error_rate"]["avg"])
        ));
    }
    a.limits.push("single run: no variance".into());
}
