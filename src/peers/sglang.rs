//! SGLang's serving benchmark (`python -m sglang.bench_serving --output-file F.jsonl`): one JSON
//! object per run appended to a JSON Lines file — the arguments that shaped the load
//! (`backend`, `dataset_name`, `request_rate`, `max_concurrency`, the random lengths), totals,
//! and mean/median/p99 of each latency in ms; per-request lengths only with `--output-details`.
//! Newer versions add `tag` and the server's own `server_info`.

use std::path::Path;

use serde_json::Value;

use crate::graded::Audit;
use crate::peers::result::{
    Gathered, PeerFormat, QUALITY_MISSING, num, one, reasoning_ttft_unknown, server_unknown,
    slo_axis,
};
use crate::peers::statement::{Kind, Stat, Statement};

/// The format.
pub struct Sglang;

const NAME: &str = "SGLang bench_serving result";

fn is_run(v: &Value) -> bool {
    v.get("model_id").is_none()
        && v.get("backend").is_some()
        && v.get("dataset_name").is_some()
        && (v.get("completed").is_some() || v.get("mean_ttft_ms").is_some())
}

impl PeerFormat for Sglang {
    fn name(&self) -> &'static str {
        NAME
    }

    fn needs(&self) -> &'static str {
        "an SGLang bench_serving JSONL (`backend`, `dataset_name`, `completed` on each line)"
    }

    fn recognises(&self, v: &Value) -> bool {
        match v {
            Value::Array(lines) => !lines.is_empty() && lines.iter().all(is_run),
            v => is_run(v),
        }
    }

    /// SGLang's client (`bench_serving.py`, `sglang-oai`) takes a chunk as a token only when
    /// its text is not empty: goodput's own rule. A file of several runs is read at the one
    /// whose rate is the run's (else its last), and says which.
    fn stated(&self, v: &Value, c: &crate::contract::Contract) -> Option<Statement> {
        let runs: Vec<&Value> = match v {
            Value::Array(lines) => lines.iter().collect(),
            v => vec![v],
        };
        let rate = c.load.rate.filter(|_| c.load.is_open());
        let same = |r: &&Value| match (&r["request_rate"], rate) {
            (Value::Number(n), Some(x)) => n.as_f64().is_some_and(|y| (y - x).abs() < 1e-9),
            (Value::String(s), None) => s == "inf",
            _ => false,
        };
        let (i, run) = runs
            .iter()
            .enumerate()
            .find(|(_, r)| same(r))
            .or(runs.iter().enumerate().next_back())?;
        let mut g = Gathered::default();
        for (name, kind, key) in [
            ("TTFT", Kind::Ttft, "ttft_ms"),
            ("TPOT", Kind::PerRequestGap, "tpot_ms"),
            ("ITL", Kind::ChunkGap, "itl_ms"),
            ("E2E latency", Kind::E2e, "e2e_latency_ms"),
        ] {
            for (stat, word) in [
                (Stat::Mean, "mean"),
                (Stat::P50, "median"),
                (Stat::P99, "p99"),
            ] {
                one(
                    &mut g,
                    run,
                    (name, kind, stat),
                    &format!("/{word}_{key}"),
                    1.0,
                );
            }
        }
        one(
            &mut g,
            run,
            ("request throughput", Kind::RequestsPerS, Stat::Value),
            "/request_throughput",
            1.0,
        );
        one(
            &mut g,
            run,
            ("output throughput", Kind::OutputTokensPerS, Stat::Value),
            "/output_throughput",
            1.0,
        );
        one(
            &mut g,
            run,
            ("completed", Kind::Completed, Stat::Value),
            "/completed",
            1.0,
        );
        if let Some(n) = run["completed"].as_f64().filter(|n| *n > 0.0) {
            one(
                &mut g,
                run,
                ("output tokens per request", Kind::OutputTokens, Stat::Mean),
                "/total_output_tokens",
                1.0 / n,
            );
            one(
                &mut g,
                run,
                ("input tokens per request", Kind::InputTokens, Stat::Mean),
                "/total_input_tokens",
                1.0 / n,
            );
        }
        g.rate(run, "/request_rate", true);
        g.count("concurrency", run, "/max_concurrency", 1);
        let picked = (runs.len() > 1).then(|| format!("line {} of {}", i + 1, runs.len()));
        Some(g.into_statement(false, picked))
    }

    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit> {
        let runs: Vec<&Value> = match v {
            Value::Array(lines) => lines.iter().collect(),
            v => vec![v],
        };
        let mut a = Audit::new(path, NAME);
        let first = runs[0];
        let server = &first["server_info"];
        let model = server["model_path"]
            .as_str()
            .or(first["model"].as_str())
            .unwrap_or("not recorded");
        a.axis(
            "target",
            format!(
                "model {model} · client backend {}{}",
                first["backend"].as_str().unwrap_or("?"),
                server["version"]
                    .as_str()
                    .map_or(String::new(), |v| format!(" · SGLang {v} (server_info)"))
            ),
        );
        if model == "not recorded" {
            a.missing.push("model not recorded".into());
        } else if let Some(m) = reasoning_ttft_unknown(model, "SGLang's bench_serving") {
            a.missing.push(m);
        }
        let engine_named = server.is_object();
        server_unknown(&mut a, engine_named, false);
        if engine_named && server["version"].is_string() {
            a.missing.retain(|m| m != "engine revision unknown");
        }

        let detailed = runs.iter().all(|r| r["output_lens"].is_array());
        a.axis(
            "workload",
            format!(
                "dataset {} · {} input / {} output tokens asked (range ratio {}) · {}",
                first["dataset_name"].as_str().unwrap_or("?"),
                num(&first["random_input_len"]),
                num(&first["random_output_len"]),
                num(&first["random_range_ratio"]),
                if detailed {
                    "per-request lengths kept"
                } else {
                    "per-request lengths not kept"
                }
            ),
        );
        if !detailed {
            a.missing.push(
                "real token lengths per request not recorded (saved without --output-details): only totals; whether EOS was ignored is not recorded either".into(),
            );
        }
        // The output the client counted again with its tokenizer, against the count it used.
        for r in &runs {
            let (n, re) = (
                r["total_output_tokens"].as_f64(),
                r["total_output_tokens_retokenized"].as_f64(),
            );
            if let (Some(n), Some(re)) = (n, re)
                && n > 0.0
                && (re - n).abs() / n > 0.05
            {
                a.missing.push(format!(
                    "output token counts disagree: {n:.0} counted, {re:.0} when the client retokenized the text ({:+.0}%): the tokenizer is not the model's, or the server's counts are not tokens",
                    (re - n) / n * 100.0
                ));
                break;
            }
        }

        load(&mut a, &runs);
        warmup_slo_and_runs(&mut a, &runs);
        Ok(a.done())
    }
}

/// The load axis: each line's rate and concurrency cap, and what they cannot support.
fn load(a: &mut Audit, runs: &[&Value]) {
    let mut loads = Vec::new();
    let mut closed = false;
    let mut capped = None;
    for r in runs {
        let rate = match &r["request_rate"] {
            Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
            _ => None,
        };
        let cap = r["max_concurrency"].as_u64();
        loads.push(match (rate, cap) {
            (None, Some(c)) => {
                closed = true;
                format!("closed loop, concurrency {c}")
            }
            (None, None) => "burst: every request at t = 0".to_owned(),
            (Some(x), Some(c)) => {
                capped = Some(c);
                format!("open loop, Poisson at {x} req/s, capped at {c} in flight")
            }
            (Some(x), None) => format!("open loop, Poisson at {x} req/s"),
        });
    }
    a.axis("load", loads.join("; "));
    if closed {
        a.limits
            .push("closed-loop load: tail latency and capacity claims are not valid".into());
    }
    if let Some(c) = capped {
        a.limits.push(format!(
            "arrivals held behind a concurrency cap of {c} and latency measured from the actual send: queueing in the client is hidden (coordinated omission)"
        ));
    }
}

/// Warm-up, SLO and measurement axes, and the runs the file holds.
fn warmup_slo_and_runs(a: &mut Audit, runs: &[&Value]) {
    a.missing.push(
        "warm-up not stated: bench_serving sends warm-up requests (1 by default) and does not record how many".into(),
    );
    a.axis("warm-up", "not stated");
    slo_axis(a, None);
    a.axis(
        "measurement",
        format!(
            "latency from the actual send; TTFT to the first non-empty chunk; {}",
            runs.iter()
                .map(|r| format!(
                    "TTFT p99 {} ms over {} requests",
                    num(&r["p99_ttft_ms"]),
                    num(&r["completed"])
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    a.missing.push(QUALITY_MISSING.into());
    if runs.len() > 1 {
        a.axis(
            "runs",
            format!("{} runs in the file, one a line", runs.len()),
        );
    }
    a.limits.push(format!(
        "single run per load point ({} line{}): no variance",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    ));
}
