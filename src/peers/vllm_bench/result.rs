//! vLLM's serving benchmark result (`vllm bench serve --save-result`, and the older
//! `benchmark_serving.py`).

use std::path::Path;

use serde_json::Value;

use crate::graded::Audit;
use crate::peers::result::{
    Gathered, PeerFormat, QUALITY_MISSING, distribution, one, reasoning_ttft_unknown, slo_axis,
};
use crate::peers::statement::{Events, Kind, Samples, Stat, Statement};

/// The format.
pub struct Vllm;

impl PeerFormat for Vllm {
    fn name(&self) -> &'static str {
        "vLLM bench serve result"
    }

    fn needs(&self) -> &'static str {
        "a vLLM `bench serve --save-result` JSON (`model_id`, `backend`, `completed`)"
    }

    fn recognises(&self, v: &Value) -> bool {
        v.get("model_id").is_some()
            && (v.get("backend").is_some() || v.get("endpoint_type").is_some())
            && (v.get("completed").is_some() || v.get("mean_ttft_ms").is_some())
    }

    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit> {
        grade(path, v)
    }

    fn stated(&self, v: &Value, _c: &crate::contract::Contract) -> Option<Statement> {
        let mut figures = Gathered::default();
        for (name, kind, key) in [
            ("TTFT", Kind::Ttft, "ttft"),
            ("TPOT", Kind::PerRequestGap, "tpot"),
            ("ITL", Kind::ChunkGap, "itl"),
            ("E2EL", Kind::E2e, "e2el"),
        ] {
            let at = |word: &str| format!("/{word}_{key}_ms");
            distribution(
                &mut figures,
                v,
                (name, kind),
                (["mean", "median", "p90", "p99"], at),
                1.0,
            );
        }
        let n = v["completed"]
            .as_f64()
            .filter(|n| *n > 0.0)
            .unwrap_or(f64::NAN);
        for (f, at, scale) in [
            (
                ("request throughput", Kind::RequestsPerS, Stat::Value),
                "/request_throughput",
                1.0,
            ),
            (
                ("output throughput", Kind::OutputTokensPerS, Stat::Value),
                "/output_throughput",
                1.0,
            ),
            (
                ("completed", Kind::Completed, Stat::Value),
                "/completed",
                1.0,
            ),
            (
                ("input tokens per request", Kind::InputTokens, Stat::Mean),
                "/total_input_tokens",
                1.0 / n,
            ),
            (
                ("output tokens per request", Kind::OutputTokens, Stat::Mean),
                "/total_output_tokens",
                1.0 / n,
            ),
        ] {
            // Per-request token counts need a count of requests to divide by.
            if scale.is_finite() {
                one(&mut figures, v, f, at, scale);
            }
        }
        figures.model(v, "/model_id");
        figures.count("requests", v, "/num_prompts", 1);
        figures.rate(v, "/request_rate", true);
        figures.count("concurrency", v, "/max_concurrency", 1);
        let mut st = figures.into_statement(true, None);
        st.pinned_total = true;
        // vLLM 0.32's completions and chat clients take every event with a choice as a token's
        // arrival (`benchmarks/lib/endpoint_request_func.py`); its other clients are not read
        // beyond their text.
        let backend = v["backend"].as_str().or(v["endpoint_type"].as_str());
        if matches!(backend, Some("vllm" | "openai" | "openai-chat")) {
            st.events = Events::Choices;
        }
        (st.samples, st.sample_spans) = detailed(v);
        st.sent_rps = sent_rate(v);
        Some(st)
    }
}

/// The per-request values a `--save-detailed` result keeps, per kind, one unit per successful
/// request in the order sent: TTFT (`ttfts`), E2EL (TTFT and the request's `itls` summed, as
/// vLLM's latency is its last counted event), TPOT ((E2EL − TTFT) / (`output_lens` − 1)), the
/// ITL gaps, and the token counts. A request succeeded when its `errors` entry is empty. Empty
/// when the file keeps no per-request times or they do not line up. Beside them, each
/// request's send and end (s, its clock), where `start_times` are kept.
fn detailed(v: &Value) -> (Samples, Vec<(f64, f64)>) {
    let list = |k: &str| v[k].as_array();
    let (Some(ttfts), Some(itls), Some(outs)) = (list("ttfts"), list("itls"), list("output_lens"))
    else {
        return Default::default();
    };
    let n = ttfts.len();
    if n == 0 || itls.len() != n || outs.len() != n {
        return Default::default();
    }
    let ins = list("input_lens").filter(|l| l.len() == n);
    let errors = list("errors").filter(|l| l.len() == n);
    let starts = list("start_times").filter(|l| l.len() == n);
    let mut order: Vec<usize> = (0..n)
        .filter(|&i| errors.is_none_or(|e| e[i].as_str().is_none_or(str::is_empty)))
        .filter(|&i| ttfts[i].as_f64().is_some_and(|t| t.is_finite() && t > 0.0))
        .collect();
    if let Some(starts) = starts {
        order.sort_by(|&a, &b| {
            let at = |i: usize| starts[i].as_f64().unwrap_or(f64::INFINITY);
            at(a).total_cmp(&at(b))
        });
    }
    let kinds = [
        Kind::Ttft,
        Kind::E2e,
        Kind::PerRequestGap,
        Kind::ChunkGap,
        Kind::OutputTokens,
        Kind::InputTokens,
    ];
    let gaps_s = |i: usize| -> f64 {
        itls[i]
            .as_array()
            .map_or(0.0, |g| g.iter().filter_map(Value::as_f64).sum())
    };
    let spans = match starts {
        Some(starts) => order
            .iter()
            .filter_map(|&i| {
                let at = starts[i].as_f64()?;
                Some((at, at + ttfts[i].as_f64()? + gaps_s(i)))
            })
            .collect(),
        None => Vec::new(),
    };
    let samples = kinds
        .into_iter()
        .filter(|k| *k != Kind::InputTokens || ins.is_some())
        .map(|k| {
            let units = order
                .iter()
                .map(|&i| {
                    let gaps: Vec<f64> = itls[i]
                        .as_array()
                        .map(|g| {
                            g.iter()
                                .filter_map(Value::as_f64)
                                .map(|x| x * 1e3)
                                .collect()
                        })
                        .unwrap_or_default();
                    let ttft = ttfts[i].as_f64().unwrap_or(0.0) * 1e3;
                    let input = ins.and_then(|l| l[i].as_f64());
                    unit(k, ttft, gaps, outs[i].as_f64().unwrap_or(0.0), input)
                })
                .collect();
            (k, units)
        })
        .collect();
    (samples, spans)
}

/// One request's values of kind `k` by vLLM's rule, from its TTFT and ITL gaps (ms), its
/// output length and its input length.
fn unit(k: Kind, ttft: f64, gaps: Vec<f64>, out: f64, input: Option<f64>) -> Vec<f64> {
    let after: f64 = gaps.iter().sum();
    match k {
        Kind::Ttft => vec![ttft],
        Kind::E2e => vec![ttft + after],
        Kind::PerRequestGap if out > 1.0 => vec![after / (out - 1.0)],
        Kind::ChunkGap => gaps,
        Kind::OutputTokens => vec![out],
        Kind::InputTokens => input.into_iter().collect(),
        _ => Vec::new(),
    }
}

/// Metadata keys a `--metadata KEY=VALUE` may add to a vLLM result, per fact we look for.
const VLLM_METADATA: [(&str, &[&str], &str); 5] = [
    (
        "engine",
        &["engine", "server", "server_engine"],
        "engine unknown: the file names only the client backend",
    ),
    (
        "engine revision",
        &[
            "engine_version",
            "vllm_version",
            "version",
            "engine_revision",
            "server_version",
        ],
        "engine revision unknown",
    ),
    (
        "model revision",
        &["model_revision", "revision", "model_sha"],
        "model revision unknown",
    ),
    (
        "hardware",
        &["hardware", "gpu", "gpu_type", "device"],
        "hardware unknown",
    ),
    (
        "precision",
        &["precision", "dtype", "quantization"],
        "precision unknown",
    ),
];

fn grade(path: &Path, v: &Value) -> anyhow::Result<Audit> {
    let mut a = Audit::new(path, "vLLM bench serve result");
    target(&mut a, v);
    workload(&mut a, v);
    load(&mut a, v);
    recorded_slo_and_run(&mut a, v);
    Ok(a.done())
}

/// The target axis: the model, the client backend and the facts the metadata states.
fn target(a: &mut Audit, v: &Value) {
    let backend = v["backend"]
        .as_str()
        .or(v["endpoint_type"].as_str())
        .unwrap_or("?");
    let mut stated = Vec::new();
    for (fact, keys, missing) in VLLM_METADATA {
        match keys.iter().find_map(|k| v[*k].as_str().map(|x| (*k, x))) {
            Some((k, x)) => stated.push(format!("{fact} {x} (metadata `{k}`)")),
            None if fact == "engine" => a.missing.push(format!("{missing} `{backend}`")),
            None => a.missing.push(missing.to_owned()),
        }
    }
    a.axis(
        "target",
        format!(
            "model {} · client backend {backend}{}",
            v["model_id"].as_str().unwrap_or("?"),
            if stated.is_empty() {
                String::new()
            } else {
                format!(" · {}", stated.join(", "))
            }
        ),
    );
    if let Some(m) = v["model_id"]
        .as_str()
        .and_then(|m| reasoning_ttft_unknown(m, "vLLM bench"))
    {
        a.missing.push(m);
    }
}

/// The workload axis: prompts, token totals, whether lengths were enforced and kept.
fn workload(a: &mut Audit, v: &Value) {
    let detailed = v["input_lens"].is_array() && v["output_lens"].is_array();
    // Every output at one length is what `--ignore-eos` gives; the file keeps the lengths when
    // saved with `--save-detailed`, but not the flag itself.
    let one_length = v["output_lens"]
        .as_array()
        .filter(|l| !l.is_empty())
        .and_then(|l| {
            let first = l[0].as_u64()?;
            l.iter().all(|x| x.as_u64() == Some(first)).then_some(first)
        });
    let enforced = v["ignore_eos"].as_bool() == Some(true) || one_length.is_some();
    a.axis(
        "workload",
        format!(
            "{} prompts · {} input / {} output tokens in all · {} · ignore_eos {}{}",
            v["num_prompts"],
            v["total_input_tokens"],
            v["total_output_tokens"],
            if detailed {
                "per-request lengths kept"
            } else {
                "per-request lengths not kept"
            },
            match (v["ignore_eos"].as_bool(), one_length) {
                (Some(b), _) => b.to_string(),
                (None, Some(n)) => format!("not recorded, but every output is {n} tokens long"),
                (None, None) => "not recorded".into(),
            },
            v["tokenizer_id"]
                .as_str()
                .map_or(String::new(), |t| format!(" · counted with tokenizer {t}"))
        ),
    );
    if !enforced && !detailed {
        a.missing.push(
            "output length not enforced (no ignore_eos) and not recorded per request (saved without --save-detailed)".into(),
        );
    } else if !detailed {
        a.missing.push(
            "real token lengths per request not recorded (saved without --save-detailed): only totals".into(),
        );
    }
}

/// The load axis: rate, burstiness and concurrency cap, and what they cannot support.
fn load(a: &mut Audit, v: &Value) {
    let rate = match &v["request_rate"] {
        Value::String(s) if s == "inf" => None,
        Value::Number(n) => n.as_f64(),
        _ => None,
    };
    let cap = v["max_concurrency"].as_u64();
    let burst = v["burstiness"].as_f64().unwrap_or(1.0);
    let load = match (rate, cap) {
        (None, Some(c)) => {
            a.limits.push(format!("closed-loop load: all requests queued behind a concurrency cap of {c}; tail latency and capacity claims are not valid"));
            format!("closed loop, concurrency {c}")
        }
        (None, None) => {
            a.limits.push("every request sent at once (request_rate = inf): a burst, not latency under a stated load".into());
            "burst: all requests at t = 0".into()
        }
        (Some(r), c) => {
            if let Some(c) = c {
                a.limits.push(format!("arrivals held behind a concurrency cap of {c} and latency measured from the actual send: queueing in the client is hidden (coordinated omission)"));
            }
            format!(
                "open loop, {} arrivals at {r} req/s{}",
                if burst == 1.0 {
                    "Poisson".to_owned()
                } else {
                    format!("gamma (burstiness {burst})")
                },
                c.map_or(String::new(), |c| format!(", capped at {c} in flight"))
            )
        }
    };
    a.axis("load", load);
}

/// What was recorded; warm-up, SLO and measurement axes; failures.
fn recorded_slo_and_run(a: &mut Audit, v: &Value) {
    a.axis("recorded", recorded(v));
    a.missing.push(
        "warm-up not stated: the result does not say which requests, if any, were excluded as warm-up".into(),
    );
    a.axis("warm-up", "not stated");
    let goodput = v.get("request_goodput").filter(|g| !g.is_null());
    slo_axis(
        a,
        goodput.map(|g| {
            format!("goodput {g} req/s under the --goodput thresholds (thresholds not saved)")
        }),
    );
    a.axis(
        "measurement",
        format!(
            "latency from the actual send; {}; percentiles as saved",
            crate::peers::statement::TTFT_BY_CHOICES
        ),
    );
    a.missing.push(QUALITY_MISSING.into());
    if let Some(failed) = v["failed"].as_u64().filter(|f| *f > 0) {
        a.limits.push(format!("{failed} requests failed"));
    }
    a.limits.push("single run: no variance".into());
}

/// What the run itself recorded beyond its settings: when, how many finished and failed in how
/// long, the sends as they happened (`start_times`: the achieved arrival rate), the peak in
/// flight, the client's own wait before each send (`queue_times`) and whether the outputs were
/// kept (`generated_texts`, which a consistency check could compare).
fn recorded(v: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(d) = v["date"].as_str() {
        parts.push(format!("run {d}"));
    }
    if let Some(l) = v["label"].as_str() {
        parts.push(format!("label {l}"));
    }
    parts.push(format!(
        "{} of {} completed, {} failed in {:.1} s",
        v["completed"],
        v["num_prompts"],
        v["failed"].as_u64().unwrap_or(0),
        v["duration"].as_f64().unwrap_or(f64::NAN)
    ));
    let errors = v["errors"].as_array().map_or(0, |e| {
        e.iter()
            .filter(|x| x.as_str().is_some_and(|s| !s.is_empty()))
            .count()
    });
    if errors > 0 {
        parts.push(format!("{errors} error messages kept"));
    }
    if let Some((rps, n)) = sent_rate(v) {
        parts.push(format!(
            "sent at {rps:.2} req/s as measured (start_times of {n})"
        ));
    }
    if let Some(c) = v["max_concurrent_requests"].as_u64() {
        parts.push(format!("peak {c} in flight"));
    }
    if let Some(q) = v["queue_times"].as_array() {
        let max = q.iter().filter_map(Value::as_f64).fold(0.0, f64::max);
        parts.push(format!(
            "client wait before each send up to {:.2} ms (queue_times)",
            max * 1000.0
        ));
    }
    if v["generated_texts"].is_array() {
        parts.push("outputs kept per request (generated_texts)".to_owned());
    }
    parts.join(" · ")
}

/// The rate its requests were sent at, from `start_times` (the client's clock at each send).
fn sent_rate(v: &Value) -> Option<(f64, usize)> {
    crate::peers::statement::sent_rate(
        v["start_times"]
            .as_array()?
            .iter()
            .filter_map(Value::as_f64),
    )
}
