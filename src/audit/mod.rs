//! `goodput audit`: grades a result — this tool's bundle or repeat set, or another benchmark's
//! result file (vLLM, SGLang, GuideLLM, AIPerf, inference-perf: see [`peers`]) — as
//! **comparable** or **directional**, and lists in plain words each fact it lacks or
//! contradicts.
//!
//! Two kinds of finding: *missing* facts make a result directional (it cannot be put beside
//! another without guessing); *limits* leave it comparable but bound what it can support
//! (closed-loop load and tail claims, one run and variance).

use std::path::Path;

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;

use crate::analyze::GradeVerdict;

pub mod beside;
pub mod peers;
pub mod statement;
use crate::bundle::{CONTRACT, REQUESTS, SUMMARY};
pub use peers::PeerFormat;

#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// What was read.
    pub path: String,
    /// `goodput bundle`, `goodput repeat set`, `vLLM bench serve result`, `GuideLLM report`.
    pub format: String,
    pub verdict: GradeVerdict,
    /// Facts absent or inconsistent: each one alone makes the result directional.
    pub missing: Vec<String>,
    /// What the result, even complete, cannot support.
    pub limits: Vec<String>,
    /// Facts an efficiency claim (energy per token, cost per token, per-accelerator
    /// throughput) would need and the result lacks. They leave the speed figures' grade alone.
    pub efficiency_missing: Vec<String>,
    /// What the result states for each contract axis, in words.
    pub axes: Vec<(String, String)>,
}

impl Audit {
    fn new(path: &Path, format: &str) -> Audit {
        Audit {
            path: path.display().to_string(),
            format: format.to_owned(),
            verdict: GradeVerdict::Directional,
            missing: Vec::new(),
            limits: Vec::new(),
            efficiency_missing: Vec::new(),
            axes: Vec::new(),
        }
    }

    fn axis(&mut self, name: &str, text: impl Into<String>) {
        self.axes.push((name.to_owned(), text.into()));
    }

    fn done(mut self) -> Audit {
        self.verdict = GradeVerdict::of(&self.missing);
        self
    }

    pub fn document(&self) -> crate::report::Doc {
        let mut d = crate::report::Doc::default();
        d.h(format!("Audit · {}", self.path));
        d.line(format!(
            "{}: {}",
            self.format,
            self.verdict.as_str().to_uppercase()
        ));
        d.table(
            &["axis", "what the result states"],
            self.axes
                .iter()
                .map(|(a, t)| vec![a.clone(), t.clone()])
                .collect(),
        );
        if self.missing.is_empty() {
            d.line("Nothing missing: every fact the result depends on is stated.");
        }
        for m in &self.missing {
            d.warn(format!("- missing: {m}"));
        }
        for l in &self.limits {
            d.line(format!("- limit: {l}"));
        }
        if !self.efficiency_missing.is_empty() {
            d.line("For efficiency claims (energy, cost, per accelerator), the result lacks:");
            for m in &self.efficiency_missing {
                d.warn(format!("- missing for efficiency: {m}"));
            }
        }
        d
    }

    /// What another benchmark's result lacks for efficiency claims: it carries no energy
    /// measurement and no price.
    fn peer_efficiency(&mut self) {
        self.efficiency_missing.extend([
            "no energy measurement: the result carries no accelerator energy or power".to_owned(),
            "no price: the result states no cost of the deployment".to_owned(),
        ]);
    }
}

/// Audits the result at `path` (a bundle or repeat-set directory, its `summary.json`, or a
/// result file of another benchmark).
pub fn audit(path: &Path) -> anyhow::Result<Audit> {
    if path.is_dir() {
        return audit_dir(path);
    }
    if path.file_name().is_some_and(|n| n == SUMMARY)
        && let Some(dir) = path.parent()
        && dir.join(CONTRACT).is_file()
    {
        return audit_dir(dir);
    }
    let text = crate::text::read_capped_string(path, MAX_PEER_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    peer_result(path, &text)
}

/// The largest result file of another tool read: its JSON is held as a tree, about three times
/// the file's size (a 300 MB file cost 824 MB). vLLM's result with every request's timings for
/// 10,000 prompts is about 10 MB.
pub const MAX_PEER_BYTES: u64 = 64 << 20;

/// Another tool's result file as JSON: a document, or JSON Lines as an array of its lines
/// (`path` names the file in messages).
pub(crate) fn peer_value(path: &Path, text: &str) -> anyhow::Result<Value> {
    // Python's json module writes NaN and ±Infinity (a statistic of no samples), which JSON
    // has no word for: read as the strings "NaN", "Infinity", "-Infinity" (no figure, and
    // named where a figure was expected), and said.
    let text = match python_specials(text) {
        Some((_, clean)) => std::borrow::Cow::Owned(clean),
        None => std::borrow::Cow::Borrowed(text),
    };
    let text = text.as_ref();
    let v = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(e) => match json_lines(text) {
            Some(lines) => Value::Array(lines),
            None => bail!(
                "{}: unrecognised format: not JSON (line {}, column {}: {e}) nor JSON Lines; expected a goodput bundle directory or {}",
                path.display(),
                e.line(),
                e.column(),
                peers::expected()
            ),
        },
    };
    Ok(v)
}

/// Grades another tool's result file from its text (`path` names it in messages): a JSON
/// document, or JSON Lines (one result a line, as SGLang's bench_serving appends them), read by
/// the first of [`peers::PEERS`] that recognises it.
pub fn peer_result(path: &Path, text: &str) -> anyhow::Result<Audit> {
    let specials = python_specials(text).map_or(0, |(n, _)| n);
    let v = peer_value(path, text)?;
    match peers::PEERS.iter().find(|p| p.recognises(&v)) {
        Some(p) => p.grade(path, &v).map(|mut a| {
            a.peer_efficiency();
            if specials > 0 {
                a.limits.push(format!(
                    "{specials} value(s) are NaN or Infinity (Python's json module writes them for a statistic of no samples): read as no figure"
                ));
            }
            let absurd = absurd_numbers(&v);
            if !absurd.is_empty() {
                a.missing.extend(absurd);
                a = a.done();
            }
            a
        }),
        None => bail!(
            "{}: unrecognised format: JSON, but none of {}",
            path.display(),
            peers::expected()
        ),
    }
}

/// `text` with every `NaN`, `Infinity` and `-Infinity` outside a string quoted (a JSON
/// string), and how many there were; `None` when there are none. Hand-written: the JSON parsers of the
/// field reject these words, as the standard says, and the scan needs only a string's quotes
/// and escapes.
fn python_specials(text: &str) -> Option<(usize, String)> {
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
fn absurd_numbers(v: &Value) -> Vec<String> {
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
fn json_lines(text: &str) -> Option<Vec<Value>> {
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

fn audit_dir(dir: &Path) -> anyhow::Result<Audit> {
    if dir.join(CONTRACT).is_file() && dir.join(REQUESTS).is_file() {
        let mut a = Audit::new(dir, "goodput bundle");
        bundle(dir, &mut a)?;
        a.limits
            .push("single run: no variance (repeat with `goodput run --repeats N`)".into());
        return Ok(a.done());
    }
    let mut runs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(CONTRACT).is_file() && p.join(REQUESTS).is_file())
        .collect();
    runs.sort();
    if runs.is_empty() {
        if dir.join(SUMMARY).is_file() {
            bail!(
                "{}: a summary without its raw records ({REQUESTS}) or contract ({CONTRACT}): nothing to recompute or audit",
                dir.display()
            );
        }
        bail!(
            "{}: unrecognised format: not a goodput bundle (needs {CONTRACT} and {REQUESTS}) nor a repeat set of them",
            dir.display()
        );
    }
    let mut a = Audit::new(dir, "goodput repeat set");
    for run in &runs {
        let mut one = Audit::new(run, "");
        bundle(run, &mut one)?;
        let name = run.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        for m in one.missing {
            let m = format!("{name}: {m}");
            if !a.missing.contains(&m) {
                a.missing.push(m);
            }
        }
        for l in one.limits {
            if !a.limits.contains(&l) {
                a.limits.push(l);
            }
        }
        for m in one.efficiency_missing {
            let m = format!("{name}: {m}");
            if !a.efficiency_missing.contains(&m) {
                a.efficiency_missing.push(m);
            }
        }
        if a.axes.is_empty() {
            a.axes = one.axes;
        }
    }
    a.axis(
        "runs",
        format!("{} runs: variance reported in repeat.json", runs.len()),
    );
    if runs.len() < 2 {
        a.limits.push("single run: no variance".into());
    }
    Ok(a.done())
}

/// One bundle: recomputed from its raw records, then checked against what it says it was.
fn bundle(dir: &Path, a: &mut Audit) -> anyhow::Result<()> {
    let crate::bundle::Loaded {
        bundle,
        contract,
        summary: s,
        warnings,
        ..
    } = crate::bundle::Bundle::load(dir)?;
    a.missing.extend(s.grade.missing.iter().cloned());
    a.limits.extend(warnings);
    if let Some(e) = &s.efficiency {
        if let Some(why) = &e.energy_absent {
            a.efficiency_missing.push(why.clone());
        }
        if e.price_per_hour.is_none() {
            a.efficiency_missing.push(
                "no price: target.declared.price_per_hour and currency are not set".to_owned(),
            );
        }
        if e.accelerators.is_none() {
            a.efficiency_missing.push(e.accelerators_basis.clone());
        }
    }
    // What the bundle says it was must be what its raw records say.
    match crate::bundle::read_json::<serde_json::Value>(&bundle.path(SUMMARY))? {
        None => a
            .missing
            .push("summary.json absent: the run never finished writing".into()),
        Some(kept) => {
            let now = serde_json::to_value(&s)?;
            // Fingerprints are defined per schema: an older summary's are not this version's
            // (the figures below are recomputed either way).
            let older = kept["schema_version"].as_u64() != Some(u64::from(s.schema_version));
            if older {
                a.limits.push(format!(
                    "summary.json was written with schema {} (now {}): its fingerprints follow the older definition and are not compared; every figure here is recomputed from the raw records",
                    kept["schema_version"],
                    s.schema_version
                ));
            }
            a.missing
                .extend(crate::bundle::disagreements(&kept, &now, older));
        }
    }
    if !bundle.path(crate::bundle::ENVIRONMENT).is_file() {
        a.missing
            .push("environment.json absent: client host and server facts unknown".into());
    }
    if s.load_model == crate::contract::LoadModel::Closed {
        a.limits
            .push("closed-loop load: tail latency and capacity claims are not valid".into());
    }
    for r in &s.validity.reasons {
        a.limits
            .push(format!("tail/goodput claims not supported: {r}"));
    }
    if s.interrupted {
        a.limits
            .push("interrupted before its stop condition: fewer requests than planned".into());
    }
    let f = &s.fingerprints;
    a.axis(
        "target",
        format!(
            "{} · model {} [{}]",
            contract
                .target
                .url
                .as_deref()
                .unwrap_or("embedded simulator"),
            contract.target.model.as_deref().unwrap_or("?"),
            f.target
        ),
    );
    let w = &contract.workload;
    a.axis(
        "workload",
        format!(
            "seed {} · {} · output length {} [{}]",
            w.seed,
            if w.stream { "streamed" } else { "not streamed" },
            if w.enforce_output_length {
                "enforced"
            } else {
                "not enforced"
            },
            f.workload
        ),
    );
    a.axis("load", format!("{} [{}]", s.load, f.load));
    a.axis("warm-up", s.warmup.rule.clone());
    a.axis(
        "slo",
        match &s.steady.slo {
            Some(slo) => format!(
                "p{} · attainment target {:.0}% [{}]",
                slo.percentile,
                slo.attainment_target * 100.0,
                f.slo
            ),
            None => format!("none [{}]", f.slo),
        },
    );
    a.axis(
        "measurement",
        format!(
            "latency from {} [{}]",
            s.latency_origin.phrase(),
            f.measurement
        ),
    );
    Ok(())
}

/// Other tools' results carry speed figures only.
const QUALITY_MISSING: &str =
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
fn reasoning_ttft_unknown(model: &str, tool: &str) -> Option<String> {
    let m = model.to_ascii_lowercase();
    let family = REASONING_FAMILIES.iter().find(|f| m.contains(*f))?;
    Some(format!(
        "reasoning model (`{model}` is of a family that thinks before answering, `{family}`): {tool}'s TTFT is the first chunk of either kind and the result records neither whether thinking was on nor how many tokens were reasoning, so it cannot say whether TTFT timed the first thought or the first answer token (goodput reports both, as TTFT and TTFO)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/audit")
            .join(name)
    }

    #[test]
    fn vllm_result_lists_what_it_lacks() {
        let a = audit(&fixture("vllm-bench-serve.json")).unwrap();
        assert_eq!(a.format, "vLLM bench serve result");
        assert_eq!(a.verdict, "directional");
        let has = |s: &str| a.missing.iter().any(|m| m.contains(s));
        for s in [
            "engine unknown",
            "engine revision unknown",
            "model revision unknown",
            "hardware unknown",
            "precision unknown",
            "output length not enforced",
            "warm-up not stated",
            "no SLO",
        ] {
            assert!(has(s), "{s} not in {:?}", a.missing);
        }
        assert!(a.limits.iter().any(|l| l.starts_with("closed-loop load")));
        assert!(a.limits.iter().any(|l| l.starts_with("single run")));
    }

    /// Issue #46: a peer file with NaN (Python's json writes it for an empty statistic) is
    /// read, the NaN said to be absent; numbers no run can produce make it directional.
    #[test]
    fn a_peer_file_with_nan_is_read_and_absurd_numbers_are_named() {
        let text = std::fs::read_to_string(fixture("vllm-bench-serve.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let text = text.replacen(
            &format!("\"std_ttft_ms\": {}", v["std_ttft_ms"]),
            "\"std_ttft_ms\": NaN",
            1,
        );
        assert!(text.contains("NaN"), "the fixture has std_ttft_ms");
        let a = peer_result(Path::new("nan.json"), &text).unwrap();
        assert!(
            a.limits.iter().any(|l| l.starts_with("1 value(s) are NaN")),
            "{:?}",
            a.limits
        );
        assert!(a.missing.iter().all(|m| !m.contains("cannot be trusted")));
        // A string holding the word is left alone.
        assert_eq!(python_specials(r#"{"a": "NaN", "b": 1}"#), None);
        assert_eq!(
            python_specials(r#"{"a": -Infinity, "b": [NaN, "x\"NaN"]}"#).unwrap(),
            (
                2,
                r#"{"a": "-Infinity", "b": ["NaN", "x\"NaN"]}"#.to_owned()
            )
        );
        let mut v = v;
        v["mean_ttft_ms"] = serde_json::json!(-5.0);
        v["p99_ttft_ms"] = serde_json::json!(1.0);
        v["p50_ttft_ms"] = serde_json::json!(9.0);
        let a = peer_result(Path::new("absurd.json"), &v.to_string()).unwrap();
        assert_eq!(a.verdict, "directional");
        let said = a.missing.join("\n");
        assert!(said.contains("`mean_ttft_ms` = -5: no time"), "{said}");
        assert!(
            said.contains("`p50_ttft_ms` = 9 is above `p99_ttft_ms` = 1"),
            "{said}"
        );
    }

    #[test]
    fn a_peer_result_from_a_reasoning_model_cannot_say_what_its_ttft_timed() {
        let path = fixture("vllm-bench-serve.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let flagged = |a: &Audit| a.missing.iter().any(|m| m.starts_with("reasoning model"));
        assert!(!flagged(&audit(&path).unwrap()), "not a reasoning model");
        v["model_id"] = Value::String("Qwen/Qwen3-8B".into());
        let a = peer_result(&path, &v.to_string()).unwrap();
        assert!(flagged(&a), "{:?}", a.missing);
        assert_eq!(a.verdict, "directional");
        let path = fixture("guidellm-benchmarks.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(!flagged(&audit(&path).unwrap()));
        v["args"]["model"] = Value::String("deepseek-ai/DeepSeek-R1-Distill-Llama-8B".into());
        let a = peer_result(&path, &v.to_string()).unwrap();
        assert!(
            a.missing
                .iter()
                .any(|m| m.contains("GuideLLM's TTFT is the first chunk of either kind")),
            "{:?}",
            a.missing
        );
    }

    #[test]
    fn vllm_result_with_metadata_and_goodput_lacks_less() {
        let a = audit(&fixture("vllm-bench-serve-detailed.json")).unwrap();
        assert_eq!(a.verdict, "directional");
        // Stated through --metadata, --goodput and --save-detailed; warm-up and quality are
        // never recorded.
        assert_eq!(
            a.missing,
            vec![
                "warm-up not stated: the result does not say which requests, if any, were excluded as warm-up".to_owned(),
                QUALITY_MISSING.to_owned(),
            ]
        );
        assert!(
            a.axes
                .iter()
                .any(|(k, t)| k == "load" && t.contains("open loop, Poisson arrivals at 4"))
        );
        assert!(a.limits.iter().any(|l| l.contains("coordinated omission")));
    }

    #[test]
    fn guidellm_report_lists_what_it_lacks() {
        let a = audit(&fixture("guidellm-benchmarks.json")).unwrap();
        assert_eq!(a.format, "GuideLLM report");
        assert_eq!(a.verdict, "directional");
        assert!(a.missing.contains(&"engine revision unknown".to_owned()));
        assert!(a.missing.contains(&"no SLO: goodput undefined".to_owned()));
        // It states its warm-up and records token counts.
        assert!(
            !a.missing.iter().any(|m| m.contains("warm-up")),
            "{:?}",
            a.missing
        );
        assert!(!a.missing.iter().any(|m| m.contains("token lengths")));
        assert!(a.axes.iter().any(|(k, t)| k == "load"
            && t.contains("closed loop, 1 at a time")
            && t.contains("open loop, constant at 2.0 req/s")));
        assert!(a.limits.iter().any(|l| l.starts_with("closed-loop load")));
    }

    #[test]
    fn garbage_is_a_clean_error() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.json");
        std::fs::write(&junk, "not json {").unwrap();
        let e = audit(&junk).unwrap_err().to_string();
        assert!(
            e.contains("junk.json") && e.contains("unrecognised format: not JSON (line 1"),
            "{e}"
        );
        std::fs::write(&junk, r#"{"hello": [1, 2]}"#).unwrap();
        let e = audit(&junk).unwrap_err().to_string();
        assert!(e.contains("unrecognised format: JSON, but none of"), "{e}");
        // Every format is named, so the user knows what would have been read.
        for p in peers::PEERS {
            assert!(e.contains(p.needs()), "{e}");
        }
        let e = audit(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a goodput bundle"), "{e}");
        let e = audit(&dir.path().join("absent.json")).unwrap_err();
        assert!(format!("{e:#}").contains("absent.json"), "{e:#}");
    }

    #[test]
    fn aiperf_profile_export_is_graded() {
        let a = audit(&fixture("aiperf-profile-export.json")).unwrap();
        assert_eq!(a.format, "AIPerf profile export");
        assert_eq!(a.verdict, "directional");
        for s in [
            "engine unknown",
            "hardware unknown",
            "no SLO",
            "no quality check",
        ] {
            assert!(
                a.missing.iter().any(|m| m.contains(s)),
                "{s}: {:?}",
                a.missing
            );
        }
        // Its warm-up phase, excluded from the results, is stated.
        assert!(
            !a.missing.iter().any(|m| m.contains("warm-up")),
            "{:?}",
            a.missing
        );
        let axis = |k: &str| a.axes.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(axis("warm-up"), "5 requests, excluded from the results");
        assert!(
            axis("load").contains("open loop, poisson arrivals at 8 req/s"),
            "{}",
            axis("load")
        );
        assert!(axis("target").contains("model goodput-sim-8b"));
        assert!(axis("workload").contains("output length enforced"));
        assert!(a.limits.iter().any(|l| l.starts_with("single run")));
    }

    #[test]
    fn inference_perf_stage_report_is_graded() {
        let a = audit(&fixture("inference-perf-stage_0_lifecycle_metrics.json")).unwrap();
        assert_eq!(a.format, "inference-perf lifecycle report");
        assert_eq!(a.verdict, "directional");
        for s in [
            "target and model not stated",
            "warm-up not stated",
            "no SLO",
        ] {
            assert!(
                a.missing.iter().any(|m| m.contains(s)),
                "{s}: {:?}",
                a.missing
            );
        }
        let axis = |k: &str| a.axes.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert!(axis("load").contains("open loop at 8 req/s requested, 8.035 achieved"));
        // Seconds in the file, milliseconds in the audit.
        assert!(
            axis("measurement").contains("TTFT p99 77.54 ms"),
            "{}",
            axis("measurement")
        );
        // A client that sent up to 30 ms late, and two failures, limit what it supports.
        assert!(
            a.limits.iter().any(|l| l.contains("29.7 ms late")),
            "{:?}",
            a.limits
        );
        assert!(
            a.limits
                .iter()
                .any(|l| l.contains("2 requests failed (503"))
        );
    }

    #[test]
    fn sglang_jsonl_is_graded_line_by_line() {
        let a = audit(&fixture("sglang-bench-serving.jsonl")).unwrap();
        assert_eq!(a.format, "SGLang bench_serving result");
        assert_eq!(a.verdict, "directional");
        for s in [
            "model not recorded",
            "real token lengths per request not recorded",
            "warm-up not stated",
            // The fixture was made with a tokenizer that is not the simulator's.
            "output token counts disagree",
        ] {
            assert!(
                a.missing.iter().any(|m| m.contains(s)),
                "{s}: {:?}",
                a.missing
            );
        }
        let axis = |k: &str| a.axes.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(
            axis("load"),
            "open loop, Poisson at 8 req/s, capped at 16 in flight; open loop, Poisson at 16 req/s"
        );
        assert!(a.limits.iter().any(|l| l.contains("coordinated omission")));
        assert!(a.limits.iter().any(|l| l.contains("(2 lines)")));
    }

    #[test]
    fn a_peer_file_cut_short_names_the_missing_field() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("profile_export_aiperf.json");
        let mut v: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture("aiperf-profile-export.json")).unwrap(),
        )
        .unwrap();
        v.as_object_mut().unwrap().remove("input_config");
        std::fs::write(&f, v.to_string()).unwrap();
        let e = audit(&f).unwrap_err().to_string();
        assert!(
            e.contains("profile_export_aiperf.json") && e.contains("without `input_config`"),
            "{e}"
        );
        let f = dir.path().join("stage_0_lifecycle_metrics.json");
        std::fs::write(
            &f,
            r#"{"load_summary": {"count": 3}, "successes": {"count": 3}}"#,
        )
        .unwrap();
        let e = audit(&f).unwrap_err().to_string();
        assert!(e.contains("without `successes.latency`"), "{e}");
        // JSON Lines whose lines are not all one format's.
        let f = dir.path().join("mixed.jsonl");
        let line = std::fs::read_to_string(fixture("sglang-bench-serving.jsonl")).unwrap();
        let first = line.lines().next().unwrap();
        std::fs::write(&f, format!("{first}\n{{\"x\": 1}}\n")).unwrap();
        let e = audit(&f).unwrap_err().to_string();
        assert!(e.contains("unrecognised format: JSON, but none of"), "{e}");
    }
}
