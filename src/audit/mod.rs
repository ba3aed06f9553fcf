//! `goodput audit`: grades a result — this tool's bundle or repeat set, or another benchmark's
//! result file (vLLM, SGLang, GuideLLM, AIPerf, inference-perf: see `crate::peers`) — as
//! **comparable** or **directional**, and lists in plain words each fact it lacks or
//! contradicts.
//!
//! Two kinds of finding: *missing* facts make a result directional (it cannot be put beside
//! another without guessing); *limits* leave it comparable but bound what it can support
//! (closed-loop load and tail claims, one run and variance).

use std::path::Path;

use anyhow::{Context, bail};

pub use crate::graded::Audit;

use crate::bundle::{CONTRACT, REQUESTS, SUMMARY};
use crate::peers::{MAX_PEER_BYTES, peer_result};

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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::peers::result::{QUALITY_MISSING, python_specials};

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
        for p in crate::peers::PEERS {
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
