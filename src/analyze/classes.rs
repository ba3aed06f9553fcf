//! Traffic classes (`[[class]]`): each class's steady requests summarised on their own, against
//! the class's own SLO, beside the totals. A class is judged as a run of it alone would be:
//! its percentiles, attainment and goodput from its records alone, and its SLO's verdict with
//! its support (`analyze::claims`), so a class too small for a tail claim says "met, not yet
//! supported" whatever the others show.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    PhaseStats, RequestMetrics, SloResult, SloVerdict, phase_stats, rate, request_metrics,
    slo_result,
};
use crate::contract::Contract;
use crate::contract::classes::Class;
use crate::record::{Outcome, Record};

/// One class's steady-state result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClassResult {
    pub name: String,
    /// Its share of the arrivals, as the contract planned it.
    pub share: f64,
    /// Its share of the steady requests actually sent.
    pub sent_share: f64,
    /// Its steady requests' counts and distributions (ms), as a run's steady phase has them.
    pub stats: PhaseStats,
    /// Its offered requests/s (open loop: its intended sends over its own steady span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rps: Option<f64>,
    /// Its part of the run's completion rate: the run's achieved rate times its share of the
    /// successful steady requests (so the classes' rates add up to the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rps: Option<f64>,
    /// Failures by class of failure.
    pub errors: BTreeMap<String, u64>,
    /// Against the class's own SLO, with its verdict and support; `None` when it sets no
    /// threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloResult>,
    /// Requests by the model (or adapter) name they asked for, when the class names one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, u64>,
    /// What the class asked for, in words (lengths, model, priority).
    pub asks: String,
}

/// Where a class stands against its own SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It sets no threshold.
    NoSlo,
    /// Within its SLO, on enough requests to support it.
    Meets,
    /// Within its SLO on too few requests to support it: met, not yet supported.
    Indicated,
    /// Outside its SLO (conclusively or not: its verdict says).
    Misses,
}

impl ClassResult {
    /// The class meets its SLO, at least at the point estimates.
    pub fn passes(&self) -> bool {
        matches!(self.standing(), Standing::Meets | Standing::Indicated)
    }

    pub fn standing(&self) -> Standing {
        match self.slo.as_ref().map(|s| s.verdict) {
            None => Standing::NoSlo,
            Some(SloVerdict::Met) => Standing::Meets,
            Some(SloVerdict::MetIndicated) => Standing::Indicated,
            Some(_) => Standing::Misses,
        }
    }
}

/// A one-class view of `c`: the class's SLO and lengths in the contract's place, no classes.
/// Its analysis is the analysis of a run of that class alone.
pub fn contract_of(c: &Contract, class: &Class) -> Contract {
    let mut one = c.clone();
    one.slo = class.slo_or(&c.slo).clone();
    if let Some(d) = &class.workload.input_tokens {
        one.workload.input_tokens = Some(d.clone());
    }
    if let Some(d) = &class.workload.output_tokens {
        one.workload.output_tokens = Some(d.clone());
    }
    one.classes = Vec::new();
    one
}

/// Each class's result, in the contract's order (`None` without classes). `achieved`: the
/// run's completion rate over its steady window.
pub fn summarize(
    c: &Contract,
    steady: &[&Record],
    achieved: Option<f64>,
) -> Option<Vec<ClassResult>> {
    if c.classes.is_empty() {
        return None;
    }
    let all_ok = steady.iter().filter(|r| r.is_ok()).count().max(1) as f64;
    Some(
        c.classes
            .iter()
            .map(|class| {
                let mine: Vec<&Record> = steady
                    .iter()
                    .copied()
                    .filter(|r| r.class.as_deref() == Some(class.name.as_str()))
                    .collect();
                one(c, class, &mine, steady.len(), achieved, all_ok)
            })
            .collect(),
    )
}

fn one(
    c: &Contract,
    class: &Class,
    mine: &[&Record],
    all: usize,
    achieved: Option<f64>,
    all_ok: f64,
) -> ClassResult {
    let cc = contract_of(c, class);
    let (origin, source) = (cc.measurement.latency_origin, cc.measurement.output_tokens);
    let metrics: Vec<RequestMetrics> = mine
        .iter()
        .map(|r| request_metrics(r, origin, source))
        .collect();
    let n_ok = mine.iter().filter(|r| r.is_ok()).count();
    let achieved = achieved.map(|a| a * n_ok as f64 / all_ok);
    let slo = cc
        .slo
        .is_set()
        .then(|| slo_result(&cc, mine, &metrics, achieved));
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for r in mine.iter().filter(|r| r.outcome != Outcome::Ok) {
        *errors.entry(r.outcome.as_str().to_owned()).or_default() += 1;
    }
    let mut models: BTreeMap<String, u64> = BTreeMap::new();
    for r in mine {
        if let Some(m) = &r.model {
            *models.entry(m.clone()).or_default() += 1;
        }
    }
    ClassResult {
        name: class.name.clone(),
        share: class.share.unwrap_or(0.0),
        sent_share: if all == 0 {
            0.0
        } else {
            mine.len() as f64 / all as f64
        },
        stats: phase_stats(&cc, mine),
        offered_rps: if c.load.is_open() {
            rate(mine.iter().filter_map(|r| r.intended_us))
        } else {
            None
        },
        achieved_rps: achieved,
        errors,
        slo,
        models,
        asks: asks(&cc, class),
    }
}

/// What a class asks for, in words.
fn asks(one: &Contract, class: &Class) -> String {
    let lengths = |d: &Option<crate::contract::LengthDist>, default: u32| match d {
        Some(d) => describe_dist(d),
        None => default.to_string(),
    };
    let mut parts = vec![format!(
        "{} in / {} out tokens",
        lengths(&one.workload.input_tokens, 256),
        lengths(&one.workload.output_tokens, 128)
    )];
    match (&class.model, &class.models) {
        (Some(m), _) => parts.push(format!("model {m}")),
        (None, Some(mix)) => {
            parts.push(format!("models {} ({:?})", mix.names.join(", "), mix.pick))
        }
        _ => {}
    }
    if let Some(p) = class.priority {
        parts.push(format!("priority {p}"));
    }
    parts.join(", ")
}

fn describe_dist(d: &crate::contract::LengthDist) -> String {
    use crate::contract::LengthDist as L;
    match d {
        L::Fixed { value } => value.to_string(),
        L::Uniform { min, max } => format!("{min}–{max}"),
        L::Normal { mean, .. } => format!("normal mean {mean}"),
        L::Lognormal { mean, .. } => format!("lognormal mean {mean}"),
        L::Empirical { .. } => "empirical".into(),
        L::Dataset => "dataset".into(),
        L::Trace => "trace".into(),
    }
}

/// The totals' SLO result with classes: a request meets the SLO when it meets its own
/// class's; attainment and goodput add the classes up; the run passes when every class does
/// (each per-metric verdict is its class's, so the totals carry none of their own).
pub fn totals(classes: &[ClassResult], percentile: f64) -> Option<SloResult> {
    let judged: Vec<&SloResult> = classes.iter().filter_map(|k| k.slo.as_ref()).collect();
    if judged.is_empty() {
        return None;
    }
    let met: u64 = judged.iter().map(|s| s.met).sum();
    let counted: u64 = judged.iter().map(|s| s.counted).sum();
    let goodput = judged
        .iter()
        .map(|s| s.goodput_rps)
        .try_fold(0.0, |acc, g| g.map(|g| acc + g));
    let verdict = SloVerdict::all(judged.iter().map(|s| s.verdict))?;
    let attainment_verdict = SloVerdict::all(judged.iter().map(|s| s.attainment_verdict))?;
    Some(SloResult {
        percentile,
        verdict,
        confidence: judged[0].confidence,
        needs: judged.iter().filter_map(|s| s.needs).max(),
        per_metric: Vec::new(),
        met,
        counted,
        cancelled: judged.iter().map(|s| s.cancelled).sum(),
        attainment: if counted == 0 {
            0.0
        } else {
            met as f64 / counted as f64
        },
        attainment_target: judged
            .iter()
            .map(|s| s.attainment_target)
            .fold(0.0, f64::max),
        attainment_verdict,
        attainment_bounds: None,
        goodput_rps: goodput,
        pass: classes.iter().all(ClassResult::passes),
    })
}

/// The class that fails first: of those that miss their SLO, the one furthest over it (its
/// worst metric's value over its threshold at its percentile, or its attainment short of its
/// target); when none misses, the first whose pass is not yet supported.
pub fn limiting(classes: &[ClassResult]) -> Option<&ClassResult> {
    let over = |k: &ClassResult| -> f64 {
        let Some(s) = &k.slo else { return 0.0 };
        let metric = s
            .per_metric
            .iter()
            .map(|m| m.value_ms.map_or(f64::INFINITY, |v| v / m.threshold_ms))
            .fold(0.0, f64::max);
        let attain = if s.attainment > 0.0 {
            s.attainment_target / s.attainment
        } else {
            f64::INFINITY
        };
        metric.max(attain)
    };
    let missed = |k: &&ClassResult| k.standing() == Standing::Misses;
    classes
        .iter()
        .filter(missed)
        .max_by(|a, b| over(a).total_cmp(&over(b)))
        .or_else(|| classes.iter().find(|k| k.standing() == Standing::Indicated))
}
