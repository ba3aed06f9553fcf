//! `compare`: first the axes diff, which refuses to rank results whose contracts differ in more
//! than the one variable under test; then, per headline metric, the difference with a 95%
//! confidence interval and a verdict. Reads bundles, never the network.
//!
//! Rules: the measurement axis and the SLO must be identical; at most one of target, workload
//! and load may differ (none: the same contract twice, e.g. a noise check). Intervals: Welch's t
//! over run-level values when both sides have at least two runs; otherwise a bootstrap over
//! requests, labelled weaker because it cannot see run-to-run variation. A difference is called
//! better or worse only when its interval excludes zero *and* it exceeds the noise threshold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use crate::analyze::{Headline, RequestMetrics, Summary, request_metrics};
use crate::contract::Contract;
use crate::plan::Phase;
use crate::record::Record;
use crate::report::Tone;
use crate::stats::{OverRuns, bootstrap_ci, percentile_sorted, welch_ci};

/// One side of a comparison: a single bundle or a repeat set.
#[derive(Debug)]
pub struct Side {
    pub path: PathBuf,
    /// What to call it: `--label`, else the contract's `[meta] label`, else the path.
    pub label: Option<String>,
    pub contract: Contract,
    pub runs: Vec<(Summary, Vec<Record>)>,
    /// What reading its bundles noticed (a record cut short by a kill).
    pub warnings: Vec<String>,
}

/// Loads a bundle (`summary.json` + `requests.jsonl`) or a repeat set (`run-*` bundles inside).
pub fn load_side(path: &Path) -> anyhow::Result<Side> {
    let dirs = crate::bundle::repeat_runs(path)
        .with_context(|| format!("reading {}", path.display()))?
        .unwrap_or_else(|| vec![path.to_owned()]);
    let mut runs = Vec::new();
    let mut warnings = Vec::new();
    let mut contract = None;
    for d in &dirs {
        let b =
            crate::bundle::Bundle::load(d).with_context(|| format!("loading {}", d.display()))?;
        contract.get_or_insert(b.contract);
        warnings.extend(b.warnings);
        runs.push((b.summary, b.records));
    }
    let contract = contract.with_context(|| format!("{} holds no runs", path.display()))?;
    Ok(Side {
        path: path.to_owned(),
        label: contract.meta.label.clone(),
        contract,
        runs,
        warnings,
    })
}

/// Fields that differ on one axis: (dotted key, A's value, B's value).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AxisDiff {
    pub axis: String,
    pub fields: Vec<(String, String, String)>,
}

pub fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(
                    &if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    },
                    x,
                    out,
                );
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// The flattened fields two values disagree on: (dotted key, A's value, B's value), a field
/// one side lacks "(absent)".
pub fn fields_diff(
    fa: &BTreeMap<String, String>,
    fb: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let absent = || "(absent)".to_owned();
    keys.into_iter()
        .filter(|k| fa.get(*k) != fb.get(*k))
        .map(|k| {
            (
                k.clone(),
                fa.get(k).cloned().unwrap_or_else(absent),
                fb.get(k).cloned().unwrap_or_else(absent),
            )
        })
        .collect()
}

/// Every differing field, grouped by axis.
pub fn axes_diff(a: &Contract, b: &Contract) -> Vec<AxisDiff> {
    let mut out = Vec::new();
    for ((axis, va), (_, vb)) in a.axes().into_iter().zip(b.axes()) {
        let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
        flatten(axis, &va, &mut fa);
        flatten(axis, &vb, &mut fb);
        let fields = fields_diff(&fa, &fb);
        if !fields.is_empty() {
            out.push(AxisDiff {
                axis: axis.to_owned(),
                fields,
            });
        }
    }
    out
}

/// Facts that name where a thing is, not what it is: the same model file at another path is
/// the same target (its hash is `model_revision`).
const PLACE_FACTS: [&str; 1] = ["model_file"];

/// The facts two targets' identities disagree on (`target.facts.KEY`, A's value, B's; a fact
/// one side does not know is "(unknown)"): the named identity fields, then every other fact
/// either side knows, places aside.
pub fn target_facts_diff(
    x: &crate::analyze::TargetIdentity,
    y: &crate::analyze::TargetIdentity,
) -> Vec<(String, String, String)> {
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unknown)".to_owned());
    // The named identity fields, then every other fact either side knows.
    let mut pairs: Vec<(String, Option<String>, Option<String>)> = [
        ("engine", &x.engine, &y.engine),
        ("engine_revision", &x.engine_revision, &y.engine_revision),
        ("precision", &x.precision, &y.precision),
        ("hardware", &x.hardware, &y.hardware),
    ]
    .into_iter()
    .map(|(k, p, q)| (k.to_owned(), p.clone(), q.clone()))
    .collect();
    let keys: std::collections::BTreeSet<&String> = x.facts.keys().chain(y.facts.keys()).collect();
    for k in keys {
        if pairs.iter().any(|(n, _, _)| n == k) || PLACE_FACTS.contains(&k.as_str()) {
            continue;
        }
        pairs.push((k.clone(), x.facts.get(k).cloned(), y.facts.get(k).cloned()));
    }
    pairs
        .into_iter()
        .filter(|(_, p, q)| p != q)
        .map(|(k, p, q)| (format!("target.facts.{k}"), show(&p), show(&q)))
        .collect()
}

/// The target's resolved facts (first run of each side) that differ: every fact the probes
/// resolved or the contract declared (engine and revision, precision, hardware, slots,
/// parallelism, context length, …), whether declared or discovered. A fact one side knows and
/// the other does not is a difference too ("(unknown)"). (The contract's `[target.declared]`
/// is left out of its fingerprint: declaring what the server would have said changes
/// nothing.)
fn facts_diff(a: &Side, b: &Side) -> Vec<(String, String, String)> {
    let (Some(x), Some(y)) = (&a.runs[0].0.target, &b.runs[0].0.target) else {
        return Vec::new();
    };
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unknown)".to_owned());
    target_facts_diff(x, y)
        .into_iter()
        // The declared price is the deployment's too: two prices are two offers, whose costs differ
        // by the price alone.
        .chain({
            let price = |s: &Side| {
                s.runs[0].0.efficiency.as_ref().and_then(|e| {
                    Some(format!(
                        "{} {} per hour",
                        e.price_per_hour?,
                        e.currency.as_deref()?
                    ))
                })
            };
            let (p, q) = (price(a), price(b));
            (p != q).then(|| {
                (
                    "target.declared.price_per_hour".to_owned(),
                    show(&p),
                    show(&q),
                )
            })
        })
        .collect()
}

/// Why two results may not be ranked; empty when they may.
pub fn refusals(diffs: &[AxisDiff]) -> Vec<String> {
    let mut reasons = Vec::new();
    let show = |d: &AxisDiff| {
        d.fields
            .iter()
            .map(|(k, a, b)| format!("{k} {a} vs {b}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    for d in diffs {
        match d.axis.as_str() {
            "measurement" => reasons.push(format!("measurement boundaries differ: {}", show(d))),
            "slo" => reasons.push(format!(
                "SLO differs (goodput and attainment are not comparable): {}",
                show(d)
            )),
            _ => {}
        }
    }
    let varied: Vec<&AxisDiff> = diffs
        .iter()
        .filter(|d| ["target", "workload", "load"].contains(&d.axis.as_str()))
        .collect();
    if varied.len() > 1 {
        let names: Vec<&str> = varied.iter().map(|d| d.axis.as_str()).collect();
        reasons.push(format!(
            "{} axes differ ({}): change one variable at a time",
            varied.len(),
            names.join(", ")
        ));
        for d in &varied {
            let what = if d.fields.iter().any(|(k, _, _)| k == "load.kind") {
                "closed vs open loop".to_owned()
            } else {
                format!(
                    "{} differs",
                    if d.axis == "workload" {
                        "workload shape"
                    } else {
                        &d.axis
                    }
                )
            };
            reasons.push(format!("{what}: {}", show(d)));
        }
    }
    reasons
}

/// One metric compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b − a.
    pub diff: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    /// `welch over runs`; `bootstrap, 1 run a side` (over requests: it cannot see run-to-run
    /// variation, so it is weaker); or `none, 1 value a side`.
    pub method: String,
    /// (b − a) / |a|, percent.
    pub change_pct: Option<f64>,
    pub verdict: MetricVerdict,
    /// For a percentile row whose samples do not support a claim about that percentile at the
    /// contract's confidence (`analyze::claims::supports_percentile`): why, with what it needs
    /// and the highest percentile both sides support. The verdict is then `no claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

crate::analyze::verdict! {
    /// What a metric's difference says.
    MetricVerdict {
        Better => "better",
        Worse => "worse",
        NoSignificantDifference => "no significant difference",
        /// The interval excludes zero, but the difference is within the noise band
        /// (`--noise`): real, too small to call better or worse.
        WithinNoiseBand => "significant, but within the noise band",
        /// One run a side and no per-request test for the metric: the difference is reported
        /// without a claim of significance.
        BetterUntested => "better, untested",
        WorseUntested => "worse, untested",
        WithinNoise => "within noise, untested",
        /// A side has no value.
        NotEnoughData => "not enough data",
        /// Better, but the outputs differ: not called a win.
        NotAWin => "not a win: quality not held constant",
        /// A percentile the samples are too small to support (`unsupported` says what it
        /// needs): the difference is shown, no claim is made.
        NoClaim => "no claim: sample too small",
    }
}

fn p50(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile_sorted(v, 50.0).unwrap_or(f64::NAN)
}
fn p99(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile_sorted(v, 99.0).unwrap_or(f64::NAN)
}

/// Which of a side's steady requests a figure is over: all, one traffic class's, or one
/// load-program stage's.
#[derive(Debug, Clone, Copy)]
enum Slice<'a> {
    All,
    Class(&'a str),
    Stage(&'a str),
}

impl Slice<'_> {
    fn holds(self, r: &Record) -> bool {
        match self {
            Slice::All => true,
            Slice::Class(k) => r.class.as_deref() == Some(k),
            Slice::Stage(k) => r.stage.as_deref() == Some(k),
        }
    }
}

/// Per-request values of a latency metric over a side's steady requests (of one slice).
fn per_request(side: &Side, metric: fn(&RequestMetrics) -> Option<f64>, of: Slice) -> Vec<f64> {
    let c = &side.contract;
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    side.runs
        .iter()
        .flat_map(|(_, recs)| recs.iter())
        .filter(|r| r.phase == Phase::Steady && r.is_ok() && of.holds(r))
        .filter_map(|r| metric(&request_metrics(r, origin, source)))
        .collect()
}

/// Compares every headline metric of B against A, then each traffic class's own (a class
/// both sides have): its TTFT and E2E p99 over its requests, its attainment (the share of its
/// requests that met its SLO) and its goodput.
pub fn compare_metrics(a: &Side, b: &Side, noise: f64) -> Vec<MetricComparison> {
    let values = |side: &Side, h: Headline| -> Vec<f64> {
        side.runs.iter().filter_map(|(s, _)| h.of(s)).collect()
    };
    let mut out: Vec<MetricComparison> = Headline::ALL
        .iter()
        .map(|&h| {
            let (va, vb) = (values(a, h), values(b, h));
            let stat: Option<fn(&mut [f64]) -> f64> = match h.latency() {
                Some((_, 50.0)) => Some(p50),
                Some(_) => Some(p99),
                None => None,
            };
            let per = match (stat, h.latency()) {
                (Some(f), Some((metric, _))) => Some((
                    per_request(a, metric, Slice::All),
                    per_request(b, metric, Slice::All),
                    f,
                )),
                _ => None,
            };
            let m = judge(h.name(), h.lower_is_better(), &va, &vb, per, noise);
            match h.latency() {
                Some((_, p)) => held_to_support(m, p, a, b, Slice::All),
                None => m,
            }
        })
        .collect();
    out.extend(efficiency_metrics(a, b, noise));
    out.extend(class_metrics(a, b, noise));
    out.extend(stage_metrics(a, b, noise));
    out
}

/// Each stage both sides' load programs have (by name): its TTFT p99, attainment and a
/// recovery stage's time to recover, compared stage by stage. Not its achieved rate: a stage
/// after an overload completes the backlog too, so a faster engine can "achieve" less there.
fn stage_metrics(a: &Side, b: &Side, noise: f64) -> Vec<MetricComparison> {
    use crate::analyze::stages::StageResult;
    type Pick = fn(&StageResult) -> Option<f64>;
    let names = |side: &Side| -> Vec<String> {
        side.contract
            .load
            .stage
            .iter()
            .map(|k| k.name.clone())
            .collect()
    };
    let (ka, kb) = (names(a), names(b));
    let mut out = Vec::new();
    for name in ka.iter().filter(|n| kb.contains(n)) {
        let of = |side: &Side, f: Pick| -> Vec<f64> {
            side.runs
                .iter()
                .filter_map(|(s, _)| s.stages.as_ref()?.iter().find(|k| &k.name == name))
                .filter_map(f)
                .collect()
        };
        let slice = Slice::Stage(name);
        let rows: [(&str, bool, Pick, Option<PerRequest>); 3] = [
            (
                "ttft_p99_ms",
                true,
                |k| k.stats.ttft_ms.as_ref().map(|d| d.p99),
                Some((
                    per_request(a, |m| m.ttft_ms(), slice),
                    per_request(b, |m| m.ttft_ms(), slice),
                    p99,
                )),
            ),
            (
                "attainment",
                false,
                |k| k.slo.as_ref().map(|s| s.attainment),
                Some((met_per_request(a, slice), met_per_request(b, slice), mean)),
            ),
            (
                "recovery_s",
                true,
                |k| k.recovery.as_ref()?.recovered_after_s,
                None,
            ),
        ];
        for (metric, lower_better, f, per) in rows {
            let (va, vb) = (of(a, f), of(b, f));
            if va.is_empty() && vb.is_empty() {
                continue;
            }
            let m = judge(
                &format!("stage {name}: {metric}"),
                lower_better,
                &va,
                &vb,
                per,
                noise,
            );
            out.push(if metric == "ttft_p99_ms" {
                held_to_support(m, 99.0, a, b, slice)
            } else {
                m
            });
        }
    }
    out
}

/// Each class both sides ran: its TTFT and E2E p99, attainment and goodput, compared.
fn class_metrics(a: &Side, b: &Side, noise: f64) -> Vec<MetricComparison> {
    let mut out = Vec::new();
    let classes = |side: &Side| -> Vec<String> {
        side.contract
            .classes
            .iter()
            .map(|k| k.name.clone())
            .collect()
    };
    let (ka, kb) = (classes(a), classes(b));
    for name in ka.iter().filter(|n| kb.contains(n)) {
        let of = |side: &Side, f: &dyn Fn(&crate::analyze::classes::ClassResult) -> Option<f64>| {
            side.runs
                .iter()
                .filter_map(|(s, _)| s.classes.as_ref()?.iter().find(|k| &k.name == name))
                .filter_map(f)
                .collect::<Vec<f64>>()
        };
        let p99_of = |d: &Option<crate::analyze::Dist>| d.as_ref().map(|d| d.p99);
        let ttft = |m: &RequestMetrics| m.ttft_ms();
        let e2e = |m: &RequestMetrics| m.e2e_ms();
        for (metric, f, per) in [
            (
                "ttft_p99_ms",
                &(|k: &crate::analyze::classes::ClassResult| p99_of(&k.stats.ttft_ms))
                    as &dyn Fn(&crate::analyze::classes::ClassResult) -> Option<f64>,
                Some(ttft as fn(&RequestMetrics) -> Option<f64>),
            ),
            ("e2e_p99_ms", &|k| p99_of(&k.stats.e2e_ms), Some(e2e)),
            (
                "attainment",
                &|k| k.slo.as_ref().map(|s| s.attainment),
                None,
            ),
            (
                "goodput_rps",
                &|k| k.slo.as_ref().and_then(|s| s.goodput_rps),
                None,
            ),
        ] {
            let per = match per {
                Some(m) => Some((
                    per_request(a, m, Slice::Class(name)),
                    per_request(b, m, Slice::Class(name)),
                    p99 as fn(&mut [f64]) -> f64,
                )),
                // Attainment is a share of requests: its interval is the bootstrap of the
                // mean of each request's met (1) or missed (0).
                None if metric == "attainment" => Some((
                    met_per_request(a, Slice::Class(name)),
                    met_per_request(b, Slice::Class(name)),
                    mean as fn(&mut [f64]) -> f64,
                )),
                None => None,
            };
            let m = judge(
                &format!("{name}: {metric}"),
                metric.ends_with("_ms"),
                &of(a, f),
                &of(b, f),
                per,
                noise,
            );
            out.push(if metric.ends_with("_p99_ms") {
                held_to_support(m, 99.0, a, b, Slice::Class(name))
            } else {
                m
            });
        }
    }
    out
}

/// The efficiency figures either side has (none when neither measured energy, declared a price
/// or knew its accelerators): one value per run, so Welch over repeats, else untested. A cost
/// in two currencies is not compared.
fn efficiency_metrics(a: &Side, b: &Side, noise: f64) -> Vec<MetricComparison> {
    let currency = |side: &Side| {
        side.runs
            .iter()
            .find_map(|(s, _)| s.efficiency.as_ref()?.currency.clone())
    };
    let (ca, cb) = (currency(a), currency(b));
    let mut out = Vec::new();
    for (key, lower_better) in [
        ("joules_per_output_token", true),
        ("joules_per_slo_request", true),
        ("goodput_per_kw", false),
        ("output_tps_per_accelerator", false),
        ("slo_output_tps_per_accelerator", false),
        ("cost_per_m_slo_output_tokens", true),
        ("cost_per_m_tokens", true),
    ] {
        let values = |side: &Side| -> Vec<f64> {
            side.runs
                .iter()
                .filter_map(|(s, _)| s.efficiency.as_ref()?.value(key))
                .collect()
        };
        let (va, vb) = (values(a), values(b));
        if va.is_empty() && vb.is_empty() {
            continue;
        }
        if key.starts_with("cost") && ca.is_some() && cb.is_some() && ca != cb {
            out.push(judge(
                &format!(
                    "{key} (not compared: {} against {})",
                    ca.as_deref().unwrap_or(""),
                    cb.as_deref().unwrap_or("")
                ),
                lower_better,
                &[],
                &[],
                None,
                noise,
            ));
            continue;
        }
        out.push(judge(key, lower_better, &va, &vb, None, noise));
    }
    out
}

fn mean(v: &mut [f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Each steady request of a slice: 1 when it met its SLO (its class's), else 0 (failures and
/// all), over a side's runs.
fn met_per_request(side: &Side, of: Slice) -> Vec<f64> {
    let c = &side.contract;
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    side.runs
        .iter()
        .flat_map(|(_, recs)| recs.iter())
        .filter(|r| r.phase == Phase::Steady && of.holds(r))
        .filter(|r| r.outcome != crate::record::Outcome::Interrupted)
        .map(|r| {
            let met = r.is_ok()
                && crate::analyze::record_meets_slo(c, r, &request_metrics(r, origin, source));
            f64::from(u8::from(met))
        })
        .collect()
}

/// Each side's per-request values of a metric, and the statistic compared.
type PerRequest = (Vec<f64>, Vec<f64>, fn(&mut [f64]) -> f64);

/// One metric's comparison: `va`, `vb` its values over each side's runs; `per` each side's
/// per-request values and the statistic, for a bootstrap interval with one run a side.
fn judge(
    name: &str,
    lower_better: bool,
    va: &[f64],
    vb: &[f64],
    per: Option<PerRequest>,
    noise: f64,
) -> MetricComparison {
    let (ma, mb) = (OverRuns::of(va.to_vec()), OverRuns::of(vb.to_vec()));
    let (mean_a, mean_b) = (
        (!va.is_empty()).then_some(ma.mean),
        (!vb.is_empty()).then_some(mb.mean),
    );
    let (ci, method) = if va.len() >= 2 && vb.len() >= 2 {
        (welch_ci(va, vb).map(|x| x.1), "welch over runs")
    } else {
        match per {
            Some((pa, pb, f)) => (
                bootstrap_ci(&pa, &pb, f, 1000).map(|x| x.1),
                "bootstrap, 1 run a side",
            ),
            None => (None, "none, 1 value a side"),
        }
    };
    let diff = mean_a.zip(mean_b).map(|(x, y)| y - x);
    let change_pct = diff
        .zip(mean_a)
        .filter(|(_, a)| *a != 0.0)
        .map(|(d, a)| d / a.abs() * 100.0);
    let verdict = match (diff, ci, mean_a) {
        (Some(d), Some([lo, hi]), Some(base)) => {
            let significant = lo > 0.0 || hi < 0.0;
            let material = d.abs() > noise * base.abs();
            if significant && material {
                if (d < 0.0) == lower_better {
                    MetricVerdict::Better
                } else {
                    MetricVerdict::Worse
                }
            } else if significant {
                MetricVerdict::WithinNoiseBand
            } else {
                MetricVerdict::NoSignificantDifference
            }
        }
        // One run a side and no per-request test for this metric: the difference is still
        // reported, without a claim of significance.
        (Some(d), None, Some(base)) => {
            if d.abs() <= noise * base.abs() {
                MetricVerdict::WithinNoise
            } else if (d < 0.0) == lower_better {
                MetricVerdict::BetterUntested
            } else {
                MetricVerdict::WorseUntested
            }
        }
        _ => MetricVerdict::NotEnoughData,
    };
    MetricComparison {
        metric: name.to_owned(),
        a: mean_a,
        b: mean_b,
        diff,
        change_pct,
        ci95: ci,
        method: method.to_owned(),
        verdict,
        unsupported: None,
    }
}

/// The requests a percentile of one slice rests on, in the side's smallest run (each run's
/// percentile is a value compared): its steady requests, failures among them (they are misses,
/// as `run` counts them), those the user cancelled left out.
fn sample_size(side: &Side, of: Slice) -> u64 {
    side.runs
        .iter()
        .map(|(_, recs)| {
            recs.iter()
                .filter(|r| r.phase == Phase::Steady && of.holds(r))
                .filter(|r| r.outcome != crate::record::Outcome::Interrupted)
                .count() as u64
        })
        .min()
        .unwrap_or(0)
}

/// A percentile row held to the claim rule `run` applies
/// ([`crate::analyze::claims::supports_percentile`]): when either side's sample is too small
/// to support its `p`th percentile at the contract's confidence, the difference is shown and no
/// better or worse is claimed.
fn held_to_support(
    mut m: MetricComparison,
    p: f64,
    a: &Side,
    b: &Side,
    of: Slice,
) -> MetricComparison {
    use crate::analyze::claims::{supports_percentile, unsupported_words};
    let conf = a.contract.measurement.confidence;
    let have = [sample_size(a, of), sample_size(b, of)];
    if m.verdict == MetricVerdict::NotEnoughData
        || have.iter().all(|n| supports_percentile(*n, p, conf))
    {
        return m;
    }
    m.verdict = MetricVerdict::NoClaim;
    m.unsupported = Some(unsupported_words(p, &have, conf));
    m
}

/// A baseline compared with one other result.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub baseline: PathBuf,
    pub other: PathBuf,
    /// What each side is called in the report: its label, else its path.
    pub labels: [String; 2],
    pub runs: (usize, usize),
    pub diffs: Vec<AxisDiff>,
    /// Empty when the comparison proceeds.
    pub refused: Vec<String>,
    pub metrics: Vec<MetricComparison>,
    /// Whether output quality was held constant, and the figures that say so.
    pub quality: QualityGuard,
    /// Each side (first run): whether it met the SLO, its validity, and the share of its
    /// prompt tokens the server served from its prefix cache (when reported).
    pub sides: [SideFacts; 2],
    /// The relative change below which a difference is not called better or worse (`--noise`).
    pub noise: f64,
}

/// What a reader must know of one side before its numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideFacts {
    /// The run meets the SLO ([`crate::analyze::SloResult::meets`]); absent without an SLO.
    pub slo_met: Option<bool>,
    pub validity: crate::analyze::ValidityVerdict,
    /// Cached prompt tokens / prompt tokens over successful steady requests that reported it.
    pub cached_share: Option<f64>,
}

impl Side {
    /// Its label, else its path.
    pub fn name(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.path.display().to_string())
    }
}

impl SideFacts {
    fn of(side: &Side) -> SideFacts {
        let (s, records) = &side.runs[0];
        let (mut cached, mut prompt) = (0u64, 0u64);
        for r in records
            .iter()
            .filter(|r| r.phase == Phase::Steady && r.is_ok())
        {
            if let (Some(c), Some(p)) = (r.usage_cached_tokens, r.usage_prompt_tokens) {
                cached += u64::from(c);
                prompt += u64::from(p);
            }
        }
        SideFacts {
            slo_met: s.steady.slo.as_ref().map(|x| x.pass),
            validity: s.validity.verdict,
            cached_share: (prompt > 0).then(|| cached as f64 / prompt as f64),
        }
    }

    fn describe(&self) -> String {
        let slo = match self.slo_met {
            Some(true) => "SLO met",
            Some(false) => "SLO NOT met",
            None => "no SLO",
        };
        let cached = self
            .cached_share
            .map_or("cache not reported".to_owned(), |c| {
                format!("{:.1}% of prompt tokens served from the cache", c * 100.0)
            });
        format!("{slo}, {}, {cached}", self.validity)
    }
}

/// Whether quality was held constant between two results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GuardStatus {
    #[serde(rename = "held")]
    Held,
    #[serde(rename = "not held")]
    NotHeld,
    /// Not checked: `[quality] mode = "none"`, or a side's figures missing.
    #[serde(rename = "unchecked")]
    Unchecked,
}

impl std::fmt::Display for GuardStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GuardStatus::Held => "held",
            GuardStatus::NotHeld => "not held",
            GuardStatus::Unchecked => "unchecked",
        })
    }
}

impl GuardStatus {
    fn of(held: bool) -> GuardStatus {
        if held {
            GuardStatus::Held
        } else {
            GuardStatus::NotHeld
        }
    }
}

/// The quality guard: a faster result with different outputs is not a win.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QualityGuard {
    pub status: GuardStatus,
    /// What was measured, in words.
    pub detail: String,
    /// `consistency`: the request-by-request agreement of the first runs of each side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistency: Option<crate::analyze::quality::Consistency>,
}

impl QualityGuard {
    pub fn held(&self) -> bool {
        self.status != GuardStatus::NotHeld
    }
}

/// Checks that `other`'s outputs are those of `baseline` (consistency) or score as well
/// (reference), by the baseline contract's tolerances; and that the way they were made held
/// too: speculative decoding's acceptance (a changed acceptance is a changed output regime —
/// a prompt set or a draft that drafts differently decodes at another speed) and a tool
/// workload's share of correct calls.
pub fn quality_guard(baseline: &Side, other: &Side) -> QualityGuard {
    let g = outputs_guard(baseline, other);
    match regime_change(baseline, other) {
        Some(why) => QualityGuard {
            status: GuardStatus::NotHeld,
            detail: match g.status {
                GuardStatus::NotHeld => format!("{}; {why}", g.detail),
                _ => format!("{why} (outputs: {})", g.detail),
            },
            consistency: g.consistency,
        },
        None => g,
    }
}

/// Speculative acceptance that moved by more than this (absolute) is a changed output regime.
const ACCEPTANCE_TOLERANCE: f64 = 0.05;
/// A share of correct tool calls lower by more than this is quality not held.
const TOOLS_TOLERANCE: f64 = 0.02;

/// What changed in how the outputs were made, in words: the acceptance of speculative decoding
/// (both sides stating it), or the share of correct tool calls (lower on `other`).
fn regime_change(baseline: &Side, other: &Side) -> Option<String> {
    let first = |s: &Side| s.runs.first().map(|(sum, _)| sum.steady.clone());
    let (a, b) = (first(baseline)?, first(other)?);
    let acceptance = |s: &crate::analyze::Steady| s.speculative.as_ref()?.acceptance;
    let correct = |s: &crate::analyze::Steady| s.tools.as_ref()?.correct_share;
    regime_words((acceptance(&a), acceptance(&b)), (correct(&a), correct(&b)))
}

/// The changed output regime of two results, from their speculative acceptance and their
/// share of correct tool calls (each `(baseline, other)`): what `compare` and `ab` refuse to
/// call a win.
pub(crate) fn regime_words(
    acceptance: (Option<f64>, Option<f64>),
    correct: (Option<f64>, Option<f64>),
) -> Option<String> {
    if let (Some(x), Some(y)) = acceptance
        && (x - y).abs() > ACCEPTANCE_TOLERANCE
    {
        return Some(format!(
            "speculative decoding's acceptance moved from {:.1}% to {:.1}% (more than {:.0} points): a changed output regime, so a speed difference is not like for like",
            x * 100.0,
            y * 100.0,
            ACCEPTANCE_TOLERANCE * 100.0
        ));
    }
    if let (Some(x), Some(y)) = correct
        && y < x - TOOLS_TOLERANCE
    {
        return Some(format!(
            "correct tool calls fell from {:.1}% to {:.1}%: a faster result with wrong calls is not a win",
            x * 100.0,
            y * 100.0
        ));
    }
    None
}

fn outputs_guard(baseline: &Side, other: &Side) -> QualityGuard {
    use crate::contract::QualityMode;
    let q = &baseline.contract.quality;
    let unchecked = |detail: &str| QualityGuard {
        status: GuardStatus::Unchecked,
        detail: detail.into(),
        consistency: None,
    };
    match q.mode {
        QualityMode::None => unchecked(
            "[quality] mode = \"none\": outputs were not kept, so quality is not known to be the same",
        ),
        QualityMode::Consistency => {
            let Some(c) =
                crate::analyze::quality::consistency(&baseline.runs[0].1, &other.runs[0].1)
            else {
                return unchecked(
                    "no quality probe or steady request succeeded on both sides with its output kept",
                );
            };
            consistency_guard(q, baseline, c)
        }
        QualityMode::Reference => {
            let mean = |s: &Side| {
                let v: Vec<f64> = s
                    .runs
                    .iter()
                    .filter_map(|(sum, _)| Some(sum.quality.as_ref()?.reference.as_ref()?.mean))
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            let (Some(a), Some(b)) = (mean(baseline), mean(other)) else {
                return unchecked("reference scores missing on one side");
            };
            let held = b >= q.min_relative_score * a;
            QualityGuard {
                status: GuardStatus::of(held),
                detail: format!(
                    "reference score {:.3} vs baseline {a:.3} ({:.1}% of it; tolerance ≥ {:.1}%)",
                    b,
                    if a > 0.0 { b / a * 100.0 } else { 100.0 },
                    q.min_relative_score * 100.0
                ),
                consistency: None,
            }
        }
    }
}

/// Below the baseline's own run-to-run agreement by more than this, quality is not held.
const SELF_AGREEMENT_MARGIN: f64 = 0.05;

/// The `consistency` verdict: mean token agreement at or above the bar (the contract's
/// `min_token_agreement`, or the baseline's own run-to-run agreement less a margin when it has
/// two or more runs and that is lower), and the identical share at `min_identical` when set.
fn consistency_guard(
    q: &crate::contract::Quality,
    baseline: &Side,
    c: crate::analyze::quality::Consistency,
) -> QualityGuard {
    let own = (baseline.runs.len() >= 2)
        .then(|| crate::analyze::quality::consistency(&baseline.runs[0].1, &baseline.runs[1].1))
        .flatten()
        .and_then(|s| s.token_agreement);
    let (bar, why) = match own {
        Some(s) if s - SELF_AGREEMENT_MARGIN < q.min_token_agreement => (
            s - SELF_AGREEMENT_MARGIN,
            format!(
                "the baseline's own run-to-run agreement {:.1}% less {:.0} points",
                s * 100.0,
                SELF_AGREEMENT_MARGIN * 100.0
            ),
        ),
        _ => (
            q.min_token_agreement,
            "quality.min_token_agreement".to_owned(),
        ),
    };
    let agreement = c.token_agreement;
    let mut held = agreement.is_none_or(|t| t >= bar);
    if let Some(m) = q.min_identical {
        held &= c.identical >= m;
    }
    let what = if c.phase == "quality" {
        "quality probes (the same prompts in both runs)"
    } else {
        "steady requests"
    };
    let mut detail = match agreement {
        Some(t) => format!(
            "mean token agreement {:.1}% over {} {what} (bar {:.1}%: {why}); {:.1}% identical, {:.1}% the same length",
            t * 100.0,
            c.pairs,
            bar * 100.0,
            c.identical * 100.0,
            c.same_length * 100.0
        ),
        None => format!(
            "{:.1}% of {} {what} gave identical outputs, {:.1}% the same length (no text kept: token agreement unknown)",
            c.identical * 100.0,
            c.pairs,
            c.same_length * 100.0
        ),
    };
    if let Some(m) = q.min_identical {
        detail += &format!("; identical share required ≥ {:.1}%", m * 100.0);
    }
    if held && c.identical < 1.0 {
        detail += ". Outputs that differ late are expected: batched engines are not bitwise deterministic run to run (batch composition changes the floating-point order), so agreement, not identity, is the default test";
    }
    QualityGuard {
        status: GuardStatus::of(held),
        detail,
        consistency: Some(c),
    }
}

/// Compares `other` against `baseline` (refusing, with reasons, when the rules are broken).
pub fn compare(baseline: &Side, other: &Side, noise: f64) -> Comparison {
    let mut diffs = axes_diff(&baseline.contract, &other.contract);
    let facts = facts_diff(baseline, other);
    if !facts.is_empty() {
        match diffs.iter_mut().find(|d| d.axis == "target") {
            Some(t) => t.fields.extend(facts),
            None => diffs.insert(
                0,
                AxisDiff {
                    axis: "target".into(),
                    fields: facts,
                },
            ),
        }
    }
    let refused = refusals(&diffs);
    let quality = quality_guard(baseline, other);
    let mut metrics = if refused.is_empty() {
        compare_metrics(baseline, other, noise)
    } else {
        Vec::new()
    };
    if !quality.held() {
        for m in &mut metrics {
            if matches!(
                m.verdict,
                MetricVerdict::Better | MetricVerdict::BetterUntested
            ) {
                m.verdict = MetricVerdict::NotAWin;
            }
        }
    }
    Comparison {
        baseline: baseline.path.clone(),
        other: other.path.clone(),
        labels: [baseline.name(), other.name()],
        runs: (baseline.runs.len(), other.runs.len()),
        diffs,
        refused,
        metrics,
        quality,
        sides: [SideFacts::of(baseline), SideFacts::of(other)],
        noise,
    }
}

/// A comparison's metrics, a row each: both sides, the difference, its interval and verdict.
fn metrics_table(d: &mut crate::report::Doc, c: &Comparison) {
    let f = |x: Option<f64>| x.map_or("—".to_owned(), |v| format!("{v:.3}"));
    let rows = c
        .metrics
        .iter()
        .map(|m| {
            vec![
                m.metric.clone(),
                f(m.a),
                f(m.b),
                f(m.diff),
                m.change_pct.map_or("—".into(), |p| format!("{p:+.1}%")),
                m.ci95
                    .map_or("—".into(), |[lo, hi]| format!("[{lo:.3}, {hi:.3}]")),
                m.verdict.to_string(),
                m.method.clone(),
            ]
        })
        .collect();
    d.table(
        &[
            "metric",
            "baseline",
            "other",
            "difference",
            "change",
            "95% CI",
            "verdict",
            "method",
        ],
        rows,
    );
}

/// The comparison as a report document.
pub fn document(cs: &[Comparison]) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h("goodput compare");
    for c in cs {
        d.h(format!(
            "{} vs baseline {} ({} vs {} runs)",
            c.labels[1], c.labels[0], c.runs.1, c.runs.0
        ));
        let tone = |s: &SideFacts| {
            Tone::warn_if(
                s.slo_met == Some(false) || s.validity == crate::analyze::ValidityVerdict::Invalid,
            )
        };
        d.toned(
            tone(&c.sides[0]),
            format!("Baseline {}: {}.", c.labels[0], c.sides[0].describe()),
        );
        d.toned(
            tone(&c.sides[1]),
            format!("Other {}: {}.", c.labels[1], c.sides[1].describe()),
        );
        if !c.refused.is_empty() {
            // The reasons name every differing field: listed once.
            d.warn("REFUSED: these results cannot be ranked.");
            for r in &c.refused {
                d.line(format!("- {r}"));
            }
            continue;
        }
        if c.diffs.is_empty() {
            d.line("Same contract on every axis, and the same target facts.");
        }
        for a in &c.diffs {
            let fields: Vec<String> = a
                .fields
                .iter()
                .map(|(k, x, y)| format!("{k}: {x} → {y}"))
                .collect();
            d.line(format!(
                "{} differs (the variable under test): {}",
                a.axis,
                fields.join("; ")
            ));
        }
        let g = &c.quality;
        d.toned(Tone::warn_if(!g.held()), match g.status {
            GuardStatus::NotHeld => format!("QUALITY NOT HELD CONSTANT: {}. The speed figures below compare different services.", g.detail),
            GuardStatus::Held => format!("Quality held: {}.", g.detail),
            GuardStatus::Unchecked => format!("Quality unchecked: {}.", g.detail),
        });
        metrics_table(&mut d, c);
        // Rows held back for the same reason are named together, the reason said once.
        let mut held: Vec<(&str, Vec<&str>)> = Vec::new();
        for m in &c.metrics {
            if let Some(why) = m.unsupported.as_deref() {
                match held.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, rows)) => rows.push(&m.metric),
                    None => held.push((why, vec![&m.metric])),
                }
            }
        }
        for (why, rows) in held {
            d.line(format!("No claim on {}: {why}.", rows.join(", ")));
        }
        d.line(format!(
            "Better or worse: the 95% interval excludes 0 and the change is over the noise band of ±{}% (--noise); an interval that excludes 0 with a smaller change is significant, but within the noise band.",
            (c.noise * 1000.0).round() / 10.0
        ));
        if c.metrics.iter().any(|m| m.method.starts_with("bootstrap")) {
            d.line("A bootstrap over the requests of one run a side cannot see how runs vary: repeat runs (--repeats) for an interval over runs.");
        }
    }
    d
}

/// What to call a result on a page where space is short: a label as it is ("20 req/s"), a
/// bundle's path by its last part (the run's id).
fn short(name: &str) -> String {
    let p = Path::new(name);
    match p.file_name() {
        Some(f) if p.is_dir() => f.to_string_lossy().into_owned(),
        _ => name.to_owned(),
    }
}

/// `compare --format html`: the verdict first (what differs, and whether it is better or
/// worse, in tiles), then every side on the same percentile plots and timelines, then the
/// tables. When a comparison is refused, the page says so first and lists the axes that differ,
/// with no figure that would invite the comparison.
pub fn html_page(sides: &[Side], comparisons: &[Comparison]) -> String {
    use crate::report::html::banner;
    let mut d = crate::report::Doc::default();
    d.h("goodput compare");
    let refused: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| !c.refused.is_empty())
        .collect();
    if !refused.is_empty() {
        d.raw_html(banner(
            &refused_lines(&refused, comparisons.len()),
            false,
            &[],
        ));
    } else {
        let (lines, pass, tiles) = accepted_banner(comparisons);
        d.raw_html(banner(&lines, pass, &tiles));
        d.h("Tails: each result by percentile, steady state");
        side_figures(&mut d, sides);
    }
    let doc = document(comparisons);
    d.blocks.extend(doc.blocks);
    crate::report::format::html::wrap("goodput compare", &d)
}

/// A refused comparison's banner: each pair, why, and every field that differs.
fn refused_lines(refused: &[&Comparison], of: usize) -> Vec<String> {
    let mut lines = vec![format!(
        "REFUSED: {} of {} comparisons — the contracts differ in more than the one variable under test",
        refused.len(),
        of
    )];
    for c in refused {
        lines.push(format!(
            "{} vs {}: {}",
            c.labels[1],
            c.labels[0],
            c.refused.join("; ")
        ));
        for a in &c.diffs {
            lines.push(format!(
                "{} differs: {}",
                a.axis,
                a.fields
                    .iter()
                    .map(|(k, x, y)| format!("{k}: {x} → {y}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    lines
}

/// An accepted comparison's banner: its lines, whether nothing is worse with quality held,
/// and a tile per headline metric.
fn accepted_banner(
    comparisons: &[Comparison],
) -> (Vec<String>, bool, Vec<crate::report::html::Tile>) {
    use crate::report::html::Tile;
    let mut tiles = Vec::new();
    let mut lines = Vec::new();
    for c in comparisons {
        let count =
            |v: &[MetricVerdict]| c.metrics.iter().filter(|m| v.contains(&m.verdict)).count();
        let better = count(&[MetricVerdict::Better]);
        let worse = count(&[MetricVerdict::Worse]);
        lines.push(format!(
            "{} vs baseline {}: {better} significantly better, {worse} significantly worse, quality {}",
            short(&c.labels[1]),
            short(&c.labels[0]),
            if c.quality.held() { "held" } else { "NOT held" }
        ));
        for m in &c.metrics {
            let headline = [
                "ttft_p99_ms",
                "tpot_p99_ms",
                "e2e_p99_ms",
                "goodput_rps",
                "attainment",
                "output_tokens_per_s",
            ];
            if !headline.contains(&m.metric.as_str()) {
                continue;
            }
            let f = |v: Option<f64>| {
                v.map_or("—".to_owned(), |x| match x.abs() {
                    a if a >= 100.0 => format!("{x:.0}"),
                    a if a >= 1.0 => format!("{x:.1}"),
                    _ => format!("{x:.3}"),
                })
            };
            tiles.push(Tile {
                name: if comparisons.len() > 1 {
                    format!("{} · {}", m.metric, short(&c.labels[1]))
                } else {
                    m.metric.clone()
                },
                value: format!("{} → {}", f(m.a), f(m.b)),
                detail: format!(
                    "{}{} · {}",
                    m.change_pct.map_or(String::new(), |p| format!("{p:+.1}% ")),
                    m.ci95
                        .map_or(String::new(), |[a, b]| format!("(95% CI {a:.2} to {b:.2})")),
                    m.verdict.as_str()
                ),
                pass: match m.verdict {
                    MetricVerdict::Better => Some(true),
                    MetricVerdict::Worse => Some(false),
                    _ => None,
                },
            });
        }
    }
    let pass = comparisons
        .iter()
        .all(|c| c.quality.held() && !c.metrics.iter().any(|m| m.verdict == MetricVerdict::Worse));
    lines.insert(
        0,
        if pass {
            "ACCEPTED: one variable differs; nothing significantly worse".to_owned()
        } else {
            "ACCEPTED: one variable differs; something is worse, or quality changed".to_owned()
        },
    );
    (lines, pass, tiles)
}

/// Every side on the same percentile plots (TTFT, TPOT, E2E, dispatch lag) and the TTFT p99
/// timeline, with the baseline's SLO lines.
fn side_figures(d: &mut crate::report::Doc, sides: &[Side]) {
    use crate::report::html::percentile_chart;
    let steady = |s: &Side| -> Vec<crate::analyze::RequestMetrics> {
        let c = &s.contract;
        s.runs
            .iter()
            .flat_map(|(_, rs)| rs.iter())
            .filter(|r| r.phase == crate::plan::Phase::Steady && r.is_ok())
            .map(|r| {
                crate::analyze::request_metrics(
                    r,
                    c.measurement.latency_origin,
                    c.measurement.output_tokens,
                )
            })
            .collect()
    };
    let per_side: Vec<(String, Vec<crate::analyze::RequestMetrics>)> = sides
        .iter()
        .map(|s| (short(&s.name()), steady(s)))
        .collect();
    let from = sides[0].contract.measurement.latency_origin.phrase();
    let slo = |key: &str| {
        let c = &sides[0].contract.slo;
        let t = match key {
            "ttft" => c.ttft_ms,
            "tpot" => c.tpot_ms,
            "e2e" => c.e2e_ms,
            _ => None,
        }?;
        Some((t.0, format!("SLO p{} ≤ {} ms", c.percentile, t.0)))
    };
    type Pick = fn(&crate::analyze::RequestMetrics) -> Option<f64>;
    let charts: [(&str, &str, Pick, String); 4] = [
        ("TTFT", "ttft", |x| x.ttft_ms(), format!("ms from {from}")),
        (
            "TPOT",
            "tpot",
            |x| x.tpot_ms(),
            "ms per output token".to_owned(),
        ),
        ("E2E", "e2e", |x| x.e2e_ms(), format!("ms from {from}")),
        (
            "Dispatch lag",
            "lag",
            |x| x.dispatch_lag_ms(),
            "ms late against the schedule".to_owned(),
        ),
    ];
    for (title, key, pick, unit) in charts {
        let sets = per_side
            .iter()
            .map(|(n, m)| (n.clone(), m.iter().filter_map(pick).collect()))
            .collect();
        if let Some(ch) = percentile_chart(
            &format!("cmp-{key}"),
            &format!("{title} by percentile"),
            &unit,
            sets,
            slo(key),
        ) {
            d.figure(ch.render());
        }
    }
    d.figure(ttft_timeline(sides, from, slo("ttft")));
}

/// Each side's first run, its TTFT p99 second by second, against the SLO's threshold.
fn ttft_timeline(sides: &[Side], from: &str, slo: Option<(f64, String)>) -> String {
    let mut tl = crate::report::svg::Chart::new(
        "cmp-timeline",
        "TTFT p99 of the requests sent each second",
        "seconds since the run started",
        &format!("ms from {from}"),
    );
    for s in sides {
        if let Some((_, rs)) = s.runs.first() {
            let secs = crate::analyze::timeseries(rs);
            tl = tl.line(
                &short(&s.name()),
                secs.iter()
                    .filter_map(|x| Some((x.t as f64, x.ttft_p99_ms?)))
                    .collect(),
            );
        }
    }
    if let Some((y, n)) = slo {
        tl = tl.hline(y, &n);
    }
    tl.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::parse;

    fn c(extra: &str) -> Contract {
        parse(
            &format!(
                "[load]\nmodel = \"open\"\nrate = 5\nrequests = 100\n[slo]\nttft_ms = 500\n{extra}"
            ),
            Path::new("t"),
        )
        .unwrap()
    }

    /// Extra body fields and headers are the target: a change names the field.
    #[test]
    fn extra_fields_sent_are_part_of_the_target() {
        let on = "[target.request]\nextra_body = { chat_template_kwargs = { enable_thinking = true } }\n";
        let d = axes_diff(&c(on), &c(&on.replace("true", "false")));
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].fields,
            vec![(
                "target.request.extra_body.chat_template_kwargs.enable_thinking".into(),
                "true".into(),
                "false".into()
            )]
        );
        let d = axes_diff(
            &c(""),
            &c("[target.request]\nheaders = { x-session = \"a\" }\n"),
        );
        assert_eq!(d[0].fields[0].0, "target.request.headers.x-session");
    }

    #[test]
    fn one_varied_axis_proceeds() {
        let d = axes_diff(
            &c(""),
            &c("[workload]\ninput_tokens = { dist = \"fixed\", value = 512 }\n"),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].axis, "workload");
        assert_eq!(
            d[0].fields,
            vec![(
                "workload.input_tokens.value".into(),
                "256".into(),
                "512".into()
            )]
        );
        assert!(refusals(&d).is_empty());
        assert!(
            refusals(&axes_diff(&c(""), &c(""))).is_empty(),
            "the same contract twice"
        );
    }

    #[test]
    fn two_axes_measurement_and_slo_are_refused_with_reasons() {
        let base = c("");
        let two = parse("[load]\nmodel = \"open\"\nrate = 9\nrequests = 100\n[slo]\nttft_ms = 500\n[workload]\ninput_tokens = { dist = \"fixed\", value = 1024 }\n", Path::new("t")).unwrap();
        let r = refusals(&axes_diff(&base, &two)).join("\n");
        assert!(r.contains("2 axes differ (workload, load)"), "{r}");
        assert!(
            r.contains("workload shape differs: workload.input_tokens.value 256 vs 1024"),
            "{r}"
        );
        let r = refusals(&axes_diff(
            &base,
            &c("[measurement]\nmax_dispatch_lag_ms = 20\n"),
        ))
        .join("\n");
        assert!(
            r.contains(
                "measurement boundaries differ: measurement.measurement.max_dispatch_lag_ms"
            ),
            "{r}"
        );
        let slo = parse(
            "[load]\nmodel = \"open\"\nrate = 5\nrequests = 100\n[slo]\nttft_ms = 400\n",
            Path::new("t"),
        )
        .unwrap();
        let r = refusals(&axes_diff(&base, &slo)).join("\n");
        assert!(
            r.contains("SLO differs") && r.contains("slo.ttft_ms 500.0 vs 400.0"),
            "{r}"
        );
        let closed = parse("[load]\nmodel = \"closed\"\nconcurrency = 4\nrequests = 100\n[slo]\nttft_ms = 500\n[workload]\nseed = 3\n", Path::new("t")).unwrap();
        let r = refusals(&axes_diff(&base, &closed)).join("\n");
        assert!(r.contains("closed vs open loop"), "{r}");
    }

    /// A run whose quality probes answered `texts` (probe k's answer is `texts[k]`).
    fn probed_run(c: &Contract, texts: &[String]) -> (Summary, Vec<Record>) {
        let records: Vec<Record> = texts
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let p = crate::plan::PlannedRequest {
                    index: crate::plan::PROBE_INDEX + 2 * k as u64 + 1,
                    phase: Phase::Quality,
                    intended_us: None,
                    input_tokens: 4,
                    output_tokens: 8,
                    prompt: String::new(),
                    messages: None,
                    shared_tokens: None,
                    class: None,
                    stage: None,
                    stage_rps: None,
                    images: Vec::new(),
                    tools: None,
                    model: None,
                };
                let mut r = Record::planned(&p, Phase::Quality, "t");
                r.sent_us = Some(0);
                r.end_us = Some(1);
                r.output_digest = Some(crate::quality::digest(t).into());
                r.output_text = Some(t.as_str().into());
                r
            })
            .collect();
        let s = crate::analyze::summarize(c, &records, &crate::analyze::Context::default());
        (s, records)
    }

    /// 20 probes of 10 words; the first `same` of them as in `base`, the rest diverging after
    /// `keep` words.
    fn texts(same: usize, keep: usize) -> Vec<String> {
        (0..20)
            .map(|k| {
                (0..10)
                    .map(|w| {
                        if k < same || w < keep {
                            format!("w{k}x{w}")
                        } else {
                            format!("z{k}x{w}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn the_quality_bar_is_the_baselines_own_run_to_run_agreement_when_lower() {
        let c = c("[quality]\nmode = \"consistency\"\n");
        let side = |runs: Vec<Vec<String>>| Side {
            path: PathBuf::from("x"),
            label: None,
            contract: c.clone(),
            runs: runs.iter().map(|t| probed_run(&c, t)).collect(),
            warnings: Vec::new(),
        };
        // The engine disagrees with itself: run to run, 12 of 20 probes identical and the
        // other 8 diverge after 3 of 10 words: agreement 0.6 + 0.4 × 0.3 = 72%.
        let baseline = side(vec![texts(20, 10), texts(12, 3)]);
        // The candidate agrees with the baseline as much as the baseline with itself: held,
        // though below the contract's fixed 90%.
        let like = side(vec![texts(11, 3)]);
        let g = compare(&baseline, &like, 0.05).quality;
        assert_eq!(g.status, GuardStatus::Held, "{}", g.detail);
        assert!(
            g.detail
                .contains("the baseline's own run-to-run agreement 72.0%"),
            "{}",
            g.detail
        );
        assert!(
            g.detail
                .contains("batched engines are not bitwise deterministic")
        );
        // Much less agreement than that is a changed service.
        let worse = side(vec![texts(4, 1)]);
        assert_eq!(
            compare(&baseline, &worse, 0.05).quality.status,
            GuardStatus::NotHeld
        );
        // A single-run baseline has no measured noise: the contract's 90% is the bar.
        let single = side(vec![texts(20, 10)]);
        let g = compare(&single, &like, 0.05).quality;
        assert_eq!(g.status, GuardStatus::NotHeld, "{}", g.detail);
        assert!(
            g.detail.contains("quality.min_token_agreement"),
            "{}",
            g.detail
        );
        // The strict mode: identical share required as well.
        let strict = side(vec![texts(20, 10)]);
        let mut strict = strict;
        strict.contract.quality.min_identical = Some(0.99);
        let nearly = side(vec![texts(19, 9)]);
        let g = compare(&strict, &nearly, 0.05).quality;
        assert_eq!(g.status, GuardStatus::NotHeld, "{}", g.detail);
    }
}
