//! A repeat set (`run --repeats N`): the runs one after another with a pause and a stated
//! reset between them, and each headline metric's spread over the runs.

use super::RunOptions;
use super::RunResult;
use super::run;
use crate::analyze::Summary;
use crate::bundle::{Bundle, CONTRACT};
use crate::contract::Contract;
use crate::workload::Inputs;
use anyhow::Context;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A repeat set's summary (`repeat.json`): per headline metric, the per-run values and their
/// mean, standard deviation, coefficient of variation and 95% confidence interval.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RepeatSummary {
    pub runs: usize,
    pub pause_s: f64,
    /// What happened to the server between runs.
    pub reset: String,
    pub metrics: std::collections::BTreeMap<String, crate::stats::OverRuns>,
    pub warnings: Vec<String>,
}

/// Coefficient of variation above which a metric is flagged as too noisy to rank on.
const HIGH_CV: f64 = 0.10;

/// Runs the contract `repeat.runs` times, each run its own bundle (`run-01`, …) inside a parent
/// bundle that also holds `repeat.json` and `repeat.md`.
pub async fn run_repeats(
    contract: Contract,
    inputs: Inputs,
    opts: RunOptions,
    cancel: CancellationToken,
) -> anyhow::Result<(Bundle, RepeatSummary, Vec<RunResult>)> {
    let parent = Bundle::create(&opts.out_root, &contract)
        .with_context(|| format!("creating a bundle under {}", opts.out_root.display()))?;
    parent.write(CONTRACT, &contract.to_toml())?;
    let n = contract.repeat.runs as usize;
    let mut results = Vec::new();
    for k in 1..=n {
        let o = RunOptions {
            bundle_dir: Some(parent.dir.join(format!("run-{k:02}"))),
            ..opts.clone()
        };
        results.push(run(contract.clone(), inputs.clone(), o, cancel.clone()).await?);
        if cancel.is_cancelled() {
            break;
        }
        if k < n && contract.repeat.pause.0 > 0.0 {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(contract.repeat.pause.seconds())) => {}
            }
        }
    }
    let summaries: Vec<&Summary> = results.iter().map(|r| &r.summary).collect();
    let rs = repeat_summary(&contract, &summaries);
    parent.write_json("repeat.json", &rs)?;
    parent.write("repeat.md", &repeat_document(&rs).markdown())?;
    Ok((parent, rs, results))
}

/// Aggregates run summaries (from their headline values; never by averaging raw percentiles
/// into a new percentile).
pub fn repeat_summary(c: &Contract, runs: &[&Summary]) -> RepeatSummary {
    let mut metrics = std::collections::BTreeMap::new();
    let mut warnings = Vec::new();
    if !runs.is_empty() {
        for h in crate::analyze::Headline::ALL {
            let name = h.name();
            let values: Vec<f64> = runs.iter().filter_map(|s| h.of(s)).collect();
            if values.is_empty() {
                continue;
            }
            let o = crate::stats::OverRuns::of(values);
            if o.cv > HIGH_CV && o.values.len() > 1 {
                warnings.push(format!(
                    "{name} varies between runs: CV {:.0}% > {:.0}%",
                    o.cv * 100.0,
                    HIGH_CV * 100.0
                ));
            }
            metrics.insert(name.to_owned(), o);
        }
    }
    if runs.len() < 3 {
        warnings.push(format!(
            "{} run(s): too few to say anything about run-to-run variance (3 or more)",
            runs.len()
        ));
    }
    RepeatSummary {
        runs: runs.len(),
        pause_s: c.repeat.pause.seconds(),
        reset: if c.embedded() {
            "embedded simulator restarted for every run".into()
        } else if c.cold_start.as_ref().is_some_and(|cs| cs.launch.is_some()) {
            "server launched afresh for every run".into()
        } else {
            "none: the external server kept its state between runs".into()
        },
        metrics,
        warnings,
    }
}

/// The repeat summary as a report.
pub fn repeat_document(r: &RepeatSummary) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!(
        "Repeats: {} runs (pause {} s; reset: {})",
        r.runs, r.pause_s, r.reset
    ));
    let rows = r
        .metrics
        .iter()
        .map(|(name, o)| {
            vec![
                name.clone(),
                o.values
                    .iter()
                    .map(|v| format!("{v:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                format!("{:.3}", o.mean),
                format!("{:.3}", o.stddev),
                format!("{:.1}%", o.cv * 100.0),
                o.ci95
                    .map_or("—".into(), |[a, b]| format!("[{a:.3}, {b:.3}]")),
            ]
        })
        .collect();
    d.table(&["metric", "per run", "mean", "sd", "CV", "95% CI"], rows);
    for w in &r.warnings {
        d.warn(format!("Warning: {w}"));
    }
    d
}
