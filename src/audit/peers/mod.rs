//! Other benchmarks' result files, one module each: how to recognise the format and how to
//! grade what it states. A new format is a module here and a line in [`PEERS`]; `goodput audit`
//! tries them in order and names every one when none recognises a file.

use std::path::Path;

use serde_json::Value;

use super::beside::{Kind, Stat, Stated, Statement};
use super::{Audit, QUALITY_MISSING, reasoning_ttft_unknown};
use crate::contract::Contract;

mod aiperf;
mod guidellm;
mod inference_perf;
mod sglang;
mod vllm;

/// One result format of another tool.
pub trait PeerFormat: Sync {
    /// Its name in the audit ("vLLM bench serve result").
    fn name(&self) -> &'static str;
    /// What a file needs to be read as it, for the "unrecognised format" message.
    fn needs(&self) -> &'static str;
    /// Whether `v` (a JSON document, or a JSON Lines file's lines as an array) is of it.
    fn recognises(&self, v: &Value) -> bool;
    /// Grades it; `path` names the file in messages.
    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit>;
    /// The figures it states, each with its definition, for `goodput compare THEIRS BUNDLE`
    /// (`c`: the run's contract, to pick the matching benchmark of a file that holds
    /// several); None for a format whose figures goodput does not put beside a run.
    fn stated(&self, _v: &Value, _c: &Contract) -> Option<Statement> {
        None
    }
}

/// One figure a result states at a JSON pointer (`scale`: to goodput's unit), when present.
fn one(out: &mut Vec<Stated>, v: &Value, f: (&'static str, Kind, Stat), at: &str, scale: f64) {
    let (name, kind, stat) = f;
    let x = v.pointer(at).and_then(Value::as_f64).map(|x| x * scale);
    if let Some(s) = super::beside::figure(&x.map_or(Value::Null, Value::from), name, kind, stat) {
        out.push(s);
    }
}

/// A distribution a result states: its mean, median, p90 and p99, each at the pointer `at`
/// gives for it, when present.
fn distribution(
    out: &mut Vec<Stated>,
    v: &Value,
    (name, kind): (&'static str, Kind),
    at: impl Fn(Stat) -> String,
    scale: f64,
) {
    for stat in [Stat::Mean, Stat::P50, Stat::P90, Stat::P99] {
        one(out, v, (name, kind, stat), &at(stat), scale);
    }
}

/// Every format `goodput audit` reads, most specific first (vLLM's and SGLang's results share
/// most keys; a vLLM result names its `model_id`).
pub static PEERS: &[&dyn PeerFormat] = &[
    &vllm::Vllm,
    &sglang::Sglang,
    &guidellm::Guidellm,
    &aiperf::Aiperf,
    &inference_perf::InferencePerf,
];

/// Every format, as the "unrecognised format" message lists them.
pub fn expected() -> String {
    let n = PEERS.len();
    PEERS
        .iter()
        .enumerate()
        .map(|(i, p)| match i {
            0 => p.needs().to_owned(),
            i if i + 1 == n => format!(" or {}", p.needs()),
            _ => format!(", {}", p.needs()),
        })
        .collect()
}

/// The facts about the server a peer format does not record (they live in the operator's
/// head): each one missing, but for the engine and the hardware when the file names them.
fn server_unknown(a: &mut Audit, engine_named: bool, hardware_named: bool) {
    if !engine_named {
        a.missing.push("engine unknown".into());
    }
    a.missing.push("engine revision unknown".into());
    a.missing.push("model revision unknown".into());
    if !hardware_named {
        a.missing.push("hardware unknown".into());
    }
    a.missing.push("precision unknown".into());
}

/// The SLO axis: what the file states of one, or "none" with goodput undefined.
fn slo_axis(a: &mut Audit, stated: Option<String>) {
    match stated {
        Some(slo) => a.axis("slo", slo),
        None => {
            a.missing.push("no SLO: goodput undefined".into());
            a.axis("slo", "none");
        }
    }
}

/// A required field, or a clean error naming it.
fn field<'a>(path: &Path, format: &str, v: &'a Value, pointer: &str) -> anyhow::Result<&'a Value> {
    match v.pointer(pointer) {
        Some(x) if !x.is_null() => Ok(x),
        _ => anyhow::bail!(
            "{}: a {format} without `{}`: the file is cut short or not that tool's",
            path.display(),
            pointer.trim_start_matches('/').replace('/', ".")
        ),
    }
}

/// A number from JSON, or "?".
fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned(),
        None => "?".into(),
    }
}
