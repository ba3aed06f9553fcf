//! GuideLLM's report (`guidellm benchmark --output-path report.json`).

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use super::{Audit, PeerFormat, QUALITY_MISSING, reasoning_ttft_unknown, slo_axis};

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
    a.axis(
        "workload",
        match &args["data"] {
            Value::Null => "not stated".to_owned(),
            d => format!("data {d}"),
        },
    );
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
