//! GuideLLM's report (`guidellm benchmark --output-path report.json`).

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use crate::contract::{Contract, LoadModel};
use crate::graded::Audit;
use crate::peers::result::{
    Gathered, PeerFormat, QUALITY_MISSING, distribution, one, reasoning_ttft_unknown, slo_axis,
};
use crate::peers::statement::{Kind, Stat, Statement, sent_rate};

/// The format.
pub struct Guidellm;

impl PeerFormat for Guidellm {
    fn name(&self) -> &'static str {
        "GuideLLM report"
    }

    fn needs(&self) -> &'static str {
        "a GuideLLM report JSON (`benchmarks` with `config`)"
    }

    fn recognises(&self, v: &Value) -> bool {
        v["benchmarks"].is_array()
            && (v.get("args").is_some() || v["benchmarks"][0].get("config").is_some())
    }

    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit> {
        grade(path, v)
    }

    fn stated(&self, v: &Value, c: &Contract) -> Option<Statement> {
        let benches = v["benchmarks"].as_array()?;
        let (i, b) = pick(benches, c)?;
        let m = &b["metrics"];
        let mut figures = Gathered::default();
        for (name, kind, key, scale) in [
            ("TTFT", Kind::Ttft, "time_to_first_token_ms", 1.0),
            ("TPOT", Kind::TpotWithFirst, "time_per_output_token_ms", 1.0),
            ("ITL", Kind::PerRequestGap, "inter_token_latency_ms", 1.0),
            ("request latency", Kind::E2e, "request_latency", 1000.0),
        ] {
            let at = |word: &str| format!("/{key}/successful/{word}");
            distribution(
                &mut figures,
                m,
                (name, kind),
                (["mean", "median", "percentiles/p90", "percentiles/p99"], at),
                scale,
            );
        }
        for (f, at) in [
            (
                ("requests per second", Kind::RequestsPerS, Stat::Value),
                "/requests_per_second/successful/mean",
            ),
            (
                (
                    "output tokens per second",
                    Kind::OutputTokensPerS,
                    Stat::Value,
                ),
                "/output_tokens_per_second/successful/mean",
            ),
            (
                ("prompt tokens", Kind::InputTokens, Stat::Mean),
                "/prompt_token_count/successful/mean",
            ),
            (
                ("output tokens", Kind::OutputTokens, Stat::Mean),
                "/output_token_count/successful/mean",
            ),
            (
                ("successful requests", Kind::Completed, Stat::Value),
                "/request_totals/successful",
            ),
        ] {
            one(&mut figures, m, f, at, 1.0);
        }
        let s = &b["config"]["strategy"];
        match crate::peers::result::present(v, "/args/model") {
            Some(_) => figures.model(v, "/args/model"),
            None => figures.model(b, "/config/backend/model"),
        }
        figures.rate(s, "/rate", false);
        figures.count("concurrency", s, "/streams", 1);
        let picked = (benches.len() > 1).then(|| {
            format!(
                "benchmark {} of {} ({}), the one whose strategy matches the run's load",
                i + 1,
                benches.len(),
                s["type_"].as_str().unwrap_or("?")
            )
        });
        let mut st = figures.into_statement(false, picked);
        per_request(b, &mut st);
        Some(st)
    }
}

/// The per-request values a GuideLLM 0.6.1 benchmark keeps (`requests.successful`, each with
/// its computed `time_to_first_token_ms`, `inter_token_latency_ms`, `time_per_output_token_ms`,
/// `request_latency` in s, token counts, and `request_start_time`/`request_end_time`), per kind
/// in the order sent, with each request's span and the rate they were sent at, into `st`. GuideLLM 0.6.1
/// counts a token's arrival at each chunk with text (`token_iterations`), as goodput does, and
/// divides its throughputs by its first send to its last answer (`start_requests_time` is the
/// first request's start), so neither needs a rule of its own. Nothing when the report keeps
/// a sample of its requests (`--sample-requests`) rather than all: a sample's busy periods are
/// not the run's.
fn per_request(b: &Value, st: &mut Statement) {
    let Some(kept) = b["requests"]["successful"].as_array() else {
        return;
    };
    let all = b["metrics"]["request_totals"]["successful"].as_u64();
    if kept.is_empty() || all != Some(kept.len() as u64) {
        return;
    }
    let num = |r: &Value, k: &str| r[k].as_f64().filter(|x| x.is_finite() && *x >= 0.0);
    let mut rows: Vec<&Value> = kept
        .iter()
        .filter(|r| num(r, "request_start_time").is_some() && num(r, "request_end_time").is_some())
        .collect();
    rows.sort_by(|a, b| {
        let at = |r: &Value| num(r, "request_start_time").unwrap_or(f64::INFINITY);
        at(a).total_cmp(&at(b))
    });
    st.samples = [
        (Kind::Ttft, "time_to_first_token_ms", 1.0),
        (Kind::PerRequestGap, "inter_token_latency_ms", 1.0),
        (Kind::TpotWithFirst, "time_per_output_token_ms", 1.0),
        (Kind::E2e, "request_latency", 1000.0),
        (Kind::InputTokens, "prompt_tokens", 1.0),
        (Kind::OutputTokens, "output_tokens", 1.0),
    ]
    .into_iter()
    .map(|(k, key, scale)| {
        let units = rows
            .iter()
            .map(|r| num(r, key).map(|x| x * scale).into_iter().collect())
            .collect();
        (k, units)
    })
    .collect();
    st.sample_spans = rows
        .iter()
        .filter_map(|r| Some((num(r, "request_start_time")?, num(r, "request_end_time")?)))
        .collect();
    st.sent_rps = sent_rate(st.sample_spans.iter().map(|s| s.0));
}

/// The benchmark of a GuideLLM report whose strategy is the run's load (a sweep's file holds
/// one per strategy): the same rate, or the same streams; else the first.
fn pick<'a>(benches: &'a [Value], c: &Contract) -> Option<(usize, &'a Value)> {
    let same = |a: Option<f64>, b: Option<f64>| matches!((a, b), (Some(a), Some(b)) if (a - b).abs() < 1e-9);
    let matches = |b: &Value| {
        let s = &b["config"]["strategy"];
        match (c.load.kind, s["type_"].as_str()) {
            (Some(LoadModel::Open), Some("constant" | "poisson" | "async")) => {
                same(s["rate"].as_f64(), c.load.rate)
            }
            (Some(LoadModel::Closed), Some("synchronous")) => c.load.concurrency == Some(1),
            (Some(LoadModel::Closed), Some("concurrent" | "throughput")) => same(
                s["streams"].as_f64().or(s["max_concurrency"].as_f64()),
                c.load.concurrency.map(f64::from),
            ),
            _ => false,
        }
    };
    benches
        .iter()
        .enumerate()
        .find(|(_, b)| matches(b))
        .or(benches.first().map(|b| (0, b)))
}

/// The load axis: each benchmark's strategy in goodput's words (closed-loop strategies limit
/// what the result supports), and whether every one counted its tokens.
fn load_axis(a: &mut Audit, benches: &[Value]) {
    let mut loads = Vec::new();
    let mut closed = false;
    for b in benches {
        let s = &b["config"]["strategy"];
        let kind = s["type_"].as_str().unwrap_or("?");
        loads.push(match kind {
            "synchronous" => {
                closed = true;
                "closed loop, 1 at a time".to_owned()
            }
            "concurrent" => {
                closed = true;
                format!("closed loop, {} streams", s["streams"])
            }
            "throughput" => {
                closed = true;
                format!("closed loop, up to {} in flight", s["max_concurrency"])
            }
            "constant" | "poisson" => format!("open loop, {kind} at {} req/s", s["rate"]),
            other => format!("`{other}`"),
        });
        if b["metrics"]["output_token_count"].is_null()
            || b["metrics"]["prompt_token_count"].is_null()
        {
            let m = "real token lengths not recorded (no prompt/output token counts)".to_owned();
            if !a.missing.contains(&m) {
                a.missing.push(m);
            }
        }
    }
    a.axis("load", loads.join("; "));
    if closed {
        a.limits.push(
            "closed-loop load (synchronous/concurrent/throughput): tail latency and capacity claims are not valid".into(),
        );
    }
}

/// The images a benchmark's requests carried, from GuideLLM's `metrics.image` (0.6's image
/// counts, tokens and bytes per request, each over its successful requests): a workload whose
/// speed is not comparable to one without them. `None` when it sent none (or says nothing).
fn images_sent(m: &Value) -> Option<String> {
    let mean = |what: &str| m["image"][what]["input"]["successful"]["mean"].as_f64();
    let count = mean("images").filter(|n| *n > 0.0)?;
    let mut s = format!("images: {} a request", crate::report::num(count));
    if let Some(t) = mean("tokens").filter(|t| *t > 0.0) {
        s += &format!(", {} image tokens", crate::report::num(t));
    }
    if let Some(b) = mean("bytes").filter(|b| *b > 0.0) {
        s += &format!(", {} KB", crate::report::num(b / 1000.0));
    }
    Some(s + " (GuideLLM's metrics.image; goodput's [workload.images] sends them)")
}

fn grade(path: &Path, v: &Value) -> anyhow::Result<Audit> {
    let mut a = Audit::new(path, "GuideLLM report");
    let benches = v["benchmarks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if benches.is_empty() {
        bail!(
            "{}: a GuideLLM report with no benchmarks in it",
            path.display()
        );
    }
    let args = &v["args"];
    let cfg0 = &benches[0]["config"];
    let target = args["target"]
        .as_str()
        .or(cfg0["backend"]["target"].as_str())
        .unwrap_or("?");
    let model = args["model"]
        .as_str()
        .or(cfg0["backend"]["model"].as_str())
        .unwrap_or("?");
    a.axis("target", format!("{target} · model {model}"));
    if let Some(m) = reasoning_ttft_unknown(model, "GuideLLM") {
        a.missing.push(m);
    }
    for m in [
        "engine unknown",
        "engine revision unknown",
        "model revision unknown",
        "hardware unknown",
        "precision unknown",
    ] {
        a.missing.push(m.into());
    }
    let mut workload = match &args["data"] {
        Value::Null => "not stated".to_owned(),
        d => format!("data {d}"),
    };
    if let Some(images) = images_sent(&benches[0]["metrics"]) {
        workload += &format!(" · {images}");
    }
    a.axis("workload", workload);
    load_axis(&mut a, benches);
    let phase_set = |p: &Value| p["percent"].is_number() || p["value"].is_number();
    let warm = benches.iter().all(|b| phase_set(&b["config"]["warmup"]))
        || args["warmup"].is_number()
        || phase_set(&args["warmup"]);
    if warm {
        a.axis("warm-up", format!("{}", cfg0["warmup"]));
    } else {
        a.missing.push("warm-up not stated".into());
        a.axis("warm-up", "not stated");
    }
    a.missing.push(QUALITY_MISSING.into());
    slo_axis(&mut a, None);
    a.axis(
        "measurement",
        "GuideLLM's own (latency from the actual send)",
    );
    a.limits.push(format!(
        "single run per load point ({} benchmark{}): no variance",
        benches.len(),
        if benches.len() == 1 { "" } else { "s" }
    ));
    Ok(a.done())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GuideLLM 0.6's image metrics (the schema of `GenerativeImageMetricsSummary`) put in the
    /// audit's workload axis; a text-only benchmark says nothing of images.
    #[test]
    fn image_metrics_are_stated_in_the_workload() {
        let m = serde_json::json!({"image": {
            "images": {"input": {"successful": {"mean": 1.5}}},
            "tokens": {"input": {"successful": {"mean": 1024.0}}},
            "bytes": {"input": {"successful": {"mean": 300000.0}}},
        }});
        let s = images_sent(&m).unwrap();
        assert!(
            s.starts_with("images: 1.50 a request, 1024 image tokens, 300 KB"),
            "{s}"
        );
        let none =
            serde_json::json!({"image": {"images": {"input": {"successful": {"mean": 0.0}}}}});
        assert_eq!(images_sent(&none), None);
        assert_eq!(images_sent(&serde_json::json!({})), None);
    }
}
