//! Other benchmarks' result files, one module each: how to recognise the format and how to
//! grade what it states. A new format is a module here and a line in [`PEERS`]; `goodput audit`
//! tries them in order and names every one when none recognises a file.

use std::path::Path;

use serde_json::Value;

use super::statement::{Kind, Stat, Stated, Statement};
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

/// What a result states, gathered field by field: the figures that are numbers, and every
/// field present that is not what it should be (named, never dropped silently).
#[derive(Default)]
struct Gathered {
    figures: Vec<Stated>,
    /// Figures present but not a finite, non-negative number: `mean_ttft_ms (NaN)`.
    left_out: Vec<String>,
    /// Settings the result records, to hold against the run's contract: (what, value).
    load: Vec<(&'static str, String)>,
    /// Settings present but absurd, negative, non-finite or of the wrong type.
    unreadable: Vec<String>,
}

/// The largest count a setting may hold (a request count, a concurrency): a billion requests
/// is more than any benchmark sends.
const MAX_COUNT: f64 = 1e9;

/// The largest rate a setting may hold, requests per second.
const MAX_RATE: f64 = 1e6;

impl Gathered {
    fn into_statement(self, lead_gap: bool, picked: Option<String>) -> Statement {
        Statement {
            figures: self.figures,
            left_out: self.left_out,
            load: self.load,
            unreadable: self.unreadable,
            lead_gap,
            picked,
            ..Statement::default()
        }
    }

    /// The setting `what` from the field at `at`: a count (a whole number from `min` to
    /// [`MAX_COUNT`]), when present.
    fn count(&mut self, what: &'static str, v: &Value, at: &str, min: u64) {
        let Some(x) = present(v, at) else { return };
        match x.as_f64() {
            Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= MAX_COUNT => {
                self.load.push((what, format!("{n:.0}")))
            }
            _ => self.unreadable.push(format!(
                "{}: {} is not a {} (a whole number from {min} to {MAX_COUNT:.0})",
                name_of(at),
                shown(x),
                match what {
                    "requests" => "request count",
                    w => w,
                }
            )),
        }
    }

    /// The setting `rate` from the field at `at`, requests per second: a positive number up to
    /// [`MAX_RATE`], or infinity (written `"inf"` by vLLM) when `infinite_ok`.
    fn rate(&mut self, v: &Value, at: &str, infinite_ok: bool) {
        let Some(x) = present(v, at) else { return };
        let infinite = matches!(x.as_str(), Some("inf" | "Infinity"));
        match x.as_f64() {
            Some(r) if r > 0.0 && r <= MAX_RATE => self.load.push(("rate", crate::report::num(r))),
            _ if infinite && infinite_ok => self.load.push(("rate", "inf".into())),
            _ => self.unreadable.push(format!(
                "{}: {} is not a request rate (a positive number up to {MAX_RATE:.0}{})",
                name_of(at),
                shown(x),
                if infinite_ok { ", or \"inf\"" } else { "" }
            )),
        }
    }

    /// The setting `model` from the field at `at`, when present: a name on one line.
    fn model(&mut self, v: &Value, at: &str) {
        let Some(x) = present(v, at) else { return };
        match x.as_str() {
            Some(m) if !m.is_empty() && m.len() <= 512 => self
                .load
                .push(("model", crate::text::one_line(m).0.into_owned())),
            _ => self
                .unreadable
                .push(format!("{}: {} is not a model name", name_of(at), shown(x))),
        }
    }
}

/// The field at a JSON pointer, unless absent or null.
fn present<'a>(v: &'a Value, at: &str) -> Option<&'a Value> {
    v.pointer(at).filter(|x| !x.is_null())
}

/// A JSON pointer as a field's dotted name (`/request_totals/successful` →
/// `request_totals.successful`).
fn name_of(at: &str) -> String {
    at.trim_start_matches('/').replace('/', ".")
}

/// A JSON value as a message quotes it: short, one line.
fn shown(x: &Value) -> String {
    let s = match x {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.abs() >= 1e15 => format!("{f:.3e}"),
            _ => n.to_string(),
        },
        Value::String(s) if ["NaN", "Infinity", "-Infinity"].contains(&s.as_str()) => s.clone(),
        _ => x.to_string(),
    };
    let s = match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    };
    crate::text::one_line(&s).0.into_owned()
}

/// One figure a result states at a JSON pointer (`scale`: to goodput's unit), when present;
/// one present that is not a finite, non-negative number is named in `left_out`.
fn one(out: &mut Gathered, v: &Value, f: (&'static str, Kind, Stat), at: &str, scale: f64) {
    let (name, kind, stat) = f;
    let Some(x) = present(v, at) else { return };
    let scaled = x.as_f64().map(|x| x * scale);
    match scaled.filter(|x| x.is_finite() && *x >= 0.0) {
        Some(value) => out.figures.push(Stated {
            name,
            kind,
            stat,
            value,
        }),
        None => out.left_out.push(format!("{} ({})", name_of(at), shown(x))),
    }
}

/// A distribution a result states: its mean, median, p90 and p99, each at the pointer `at`
/// gives for it, when present.
fn distribution(
    out: &mut Gathered,
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
