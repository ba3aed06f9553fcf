//! Other benchmarks' result files: the seam every tool's reader implements ([`PeerFormat`]:
//! recognise the format, grade it, state its figures), what the readers share (fields read
//! and named when absent or absurd), and the list `goodput audit` and `goodput compare` try in
//! order (`peers::PEERS`, in the parent, so this file names no reader), naming every format when
//! none recognises a file. Each reader lives with its tool (`peers::vllm_bench::result`,
//! `peers::sglang`, …).

use std::path::Path;

use serde_json::Value;

use super::statement::{Kind, Stat, Stated, Statement};
use crate::contract::Contract;
use crate::graded::Audit;

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
    /// The per-request values the tool keeps in a file of its own beside the result at `path`
    /// (AIPerf's `profile_export.jsonl`), put into `st` for the noise on each row; nothing
    /// when the format keeps them in the result itself or not at all. A file that is there
    /// but unreadable is an error naming it and its line.
    fn per_request(&self, _path: &Path, _st: &mut Statement) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What a result states, gathered field by field: the figures that are numbers, and every
/// field present that is not what it should be (named, never dropped silently).
#[derive(Default)]
pub(super) struct Gathered {
    pub(super) figures: Vec<Stated>,
    /// Figures present but not a finite, non-negative number: `mean_ttft_ms (NaN)`.
    pub(super) left_out: Vec<String>,
    /// Settings the result records, to hold against the run's contract: (what, value).
    pub(super) load: Vec<(&'static str, String)>,
    /// Settings present but absurd, negative, non-finite or of the wrong type.
    pub(super) unreadable: Vec<String>,
}

/// The largest count a setting may hold (a request count, a concurrency): a billion requests
/// is more than any benchmark sends.
pub(super) const MAX_COUNT: f64 = 1e9;

/// The largest rate a setting may hold, requests per second.
pub(super) const MAX_RATE: f64 = 1e6;

impl Gathered {
    pub(super) fn into_statement(self, lead_gap: bool, picked: Option<String>) -> Statement {
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
    pub(super) fn count(&mut self, what: &'static str, v: &Value, at: &str, min: u64) {
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
    pub(super) fn rate(&mut self, v: &Value, at: &str, infinite_ok: bool) {
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
    pub(super) fn model(&mut self, v: &Value, at: &str) {
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
pub(super) fn present<'a>(v: &'a Value, at: &str) -> Option<&'a Value> {
    v.pointer(at).filter(|x| !x.is_null())
}

/// A JSON pointer as a field's dotted name (`/request_totals/successful` →
/// `request_totals.successful`).
pub(super) fn name_of(at: &str) -> String {
    at.trim_start_matches('/').replace('/', ".")
}

/// A JSON value as a message quotes it: short, one line.
pub(super) fn shown(x: &Value) -> String {
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
pub(super) fn one(
    out: &mut Gathered,
    v: &Value,
    f: (&'static str, Kind, Stat),
    at: &str,
    scale: f64,
) {
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

/// How a format names a distribution's mean, median, p90 and p99 (`["mean", "median", "p90",
/// "p99"]`), in that order.
pub(super) type StatWords = [&'static str; 4];

/// A distribution a result states: its mean, median, p90 and p99, each at the pointer `at`
/// gives for the format's word for it (`words`), when present.
pub(super) fn distribution(
    out: &mut Gathered,
    v: &Value,
    (name, kind): (&'static str, Kind),
    (words, at): (StatWords, impl Fn(&str) -> String),
    scale: f64,
) {
    for (stat, word) in [Stat::Mean, Stat::P50, Stat::P90, Stat::P99]
        .into_iter()
        .zip(words)
    {
        one(out, v, (name, kind, stat), &at(word), scale);
    }
}

/// The facts about the server a peer format does not record (they live in the operator's
/// head): each one missing, but for the engine and the hardware when the file names them.
pub(super) fn server_unknown(a: &mut Audit, engine_named: bool, hardware_named: bool) {
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
pub(super) fn slo_axis(a: &mut Audit, stated: Option<String>) {
    match stated {
        Some(slo) => a.axis("slo", slo),
        None => {
            a.missing.push("no SLO: goodput undefined".into());
            a.axis("slo", "none");
        }
    }
}

/// A required field, or a clean error naming it.
pub(super) fn field<'a>(
    path: &Path,
    format: &str,
    v: &'a Value,
    pointer: &str,
) -> anyhow::Result<&'a Value> {
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
pub(super) fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned(),
        None => "?".into(),
    }
}

/// `text` with every `NaN`, `Infinity` and `-Infinity` outside a string quoted (a JSON
/// string), and how many there were; `None` when there are none. Hand-written: the JSON parsers of the
/// field reject these words, as the standard says, and the scan needs only a string's quotes
/// and escapes.
pub(crate) fn python_specials(text: &str) -> Option<(usize, String)> {
    let (mut out, mut n) = (String::with_capacity(text.len()), 0);
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(word) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|w| rest.starts_with(w))
        {
            out.push('"');
            out.push_str(word);
            out.push('"');
            rest = &rest[word.len()..];
            n += 1;
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    (n > 0).then_some((n, out))
}

/// Numbers in a peer's result that no run can produce: a negative time, rate or count, and a
/// lower percentile above a higher one of the same metric (`p50_ttft_ms` over `p99_ttft_ms`).
/// At most five are named.
pub(super) fn absurd_numbers(v: &Value) -> Vec<String> {
    fn percentile(key: &str) -> Option<(f64, &str)> {
        let rest = key.strip_prefix('p')?;
        let (q, metric) = rest.split_once('_')?;
        Some((q.parse().ok()?, metric))
    }
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                let mut ranked: Vec<(&str, f64, &str, f64)> = Vec::new();
                for (k, x) in o {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    if let Some(n) = x.as_f64() {
                        if n < 0.0 {
                            out.push(format!(
                                "`{path}` = {n}: no time, rate or count is negative; the file's numbers cannot be trusted"
                            ));
                        }
                        if let Some((q, metric)) = percentile(k) {
                            ranked.push((metric, q, k, n));
                        }
                    }
                    walk(x, &path, out);
                }
                ranked.sort_by(|a, b| a.0.cmp(b.0).then(a.1.total_cmp(&b.1)));
                for w in ranked.windows(2) {
                    let (lo, hi) = (w[0], w[1]);
                    if lo.0 == hi.0 && lo.3 > hi.3 {
                        out.push(format!(
                            "`{}` = {} is above `{}` = {}: a lower percentile cannot exceed a higher one; the file's numbers cannot be trusted",
                            lo.2, lo.3, hi.2, hi.3
                        ));
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out.truncate(5);
    out
}

/// Every line of `text` (blank ones left out) as a JSON object, when there are two or more
/// and each is one.
pub(super) fn json_lines(text: &str) -> Option<Vec<Value>> {
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
        })
        .collect::<Option<_>>()?;
    (lines.len() >= 2).then_some(lines)
}

/// Other tools' results carry speed figures only.
pub(crate) const QUALITY_MISSING: &str =
    "no quality check: no accuracy or output-consistency figure stands beside the speed figures";

/// Model families that reason (think) before answering by default, as lower-case pieces of a
/// model id. A peer result for one of them has a TTFT that cannot say whether it timed the first
/// reasoning token or the first answer token: vLLM's bench and GuideLLM take the first
/// non-empty chunk of either kind (GuideLLM #737, inference-perf #559), and neither records
/// whether thinking was on or how many tokens were reasoning.
const REASONING_FAMILIES: &[&str] = &[
    "qwen3",
    "qwq",
    "deepseek-r1",
    "r1-distill",
    "gpt-oss",
    "magistral",
    "reasoning",
    "thinking",
    "glm-4.5",
    "glm-4.6",
    "minimax-m1",
    "exaone-deep",
];

/// The measurement gap of a peer's TTFT on a reasoning model, when `model` names one.
pub(super) fn reasoning_ttft_unknown(model: &str, tool: &str) -> Option<String> {
    let m = model.to_ascii_lowercase();
    let family = REASONING_FAMILIES.iter().find(|f| m.contains(*f))?;
    Some(format!(
        "reasoning model (`{model}` is of a family that thinks before answering, `{family}`): {tool}'s TTFT is the first chunk of either kind and the result records neither whether thinking was on nor how many tokens were reasoning, so it cannot say whether TTFT timed the first thought or the first answer token (goodput reports both, as TTFT and TTFO)"
    ))
}
