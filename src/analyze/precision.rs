//! Stopping when the answer is known (`[measurement.stop]`): the measured phase ends once every
//! SLO percentile is known to the stated precision, or once the SLO's verdict is conclusive,
//! instead of at its last planned request; the planned count (or duration) is the budget.
//!
//! The rule reads the same figures the summary does (`slo_result`: each percentile's
//! distribution-free bounds, the verdict with its support), so a run stops on exactly what its
//! report will say. It is applied as steady requests finish, on the collector's thread
//! ([`Known`]); the steady requests in flight when it fires still finish (the drain), and count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::*;
use crate::contract::StopWhenKnown;

/// What `[measurement.stop]` did in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Precision {
    /// The rule, in words.
    pub rule: String,
    /// The measured phase ended before its budget because the rule held.
    pub stopped_early: bool,
    /// Steady requests measured, and the budget (`load.requests`; `None` with a duration).
    pub requests: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// Why it holds, or the precision reached when it does not.
    pub detail: String,
}

/// The rule in words.
fn rule(st: &StopWhenKnown, c: &Contract) -> String {
    let conf = c.measurement.confidence * 100.0;
    let mut parts = Vec::new();
    if let Some(x) = st.precision {
        parts.push(format!(
            "every SLO percentile known within ±{:.0}% at {conf:.0}% confidence",
            x * 100.0
        ));
    }
    if st.conclusive {
        parts.push(format!("the SLO verdict conclusive at {conf:.0}%"));
    }
    format!(
        "stop once {} (after at least {} steady requests)",
        parts.join(", or "),
        st.min_requests
    )
}

/// Each SLO metric's percentile with its relative half-width (upper − lower)/2/value; `None`
/// for a metric without both bounds yet.
fn half_widths(slo: &SloResult) -> Vec<(String, f64, Option<f64>)> {
    slo.per_metric
        .iter()
        .map(|m| {
            let w = match (m.value_ms, m.upper_ms, m.lower_ms) {
                (Some(v), Some(u), Some(l)) if v > 0.0 => Some((u - l) / 2.0 / v),
                _ => None,
            };
            (m.metric.to_uppercase(), m.value_ms.unwrap_or(f64::NAN), w)
        })
        .collect()
}

/// Whether the rule holds on these steady requests, and why.
pub fn known(c: &Contract, steady: &[&Record]) -> Option<String> {
    let st = c.measurement.stop.as_ref()?;
    if (steady.len() as u64) < st.min_requests {
        return None;
    }
    let m = &c.measurement;
    let metrics = steady_request_metrics(steady, m.latency_origin, m.output_tokens);
    let slo = slo_result(c, steady, &metrics, None);
    let n = steady.len();
    if st.conclusive && matches!(slo.verdict, SloVerdict::Met | SloVerdict::Missed) {
        return Some(format!(
            "the SLO verdict was conclusive after {n} steady requests: {}",
            slo.verdict.short()
        ));
    }
    let x = st.precision?;
    let widths = half_widths(&slo);
    widths
        .iter()
        .all(|(_, _, w)| w.is_some_and(|w| w <= x))
        .then(|| {
            let each: Vec<String> = widths
                .iter()
                .map(|(m, v, w)| {
                    format!(
                        "{m} p{} {v:.1} ms ±{:.1}%",
                        c.slo.percentile,
                        w.unwrap_or(0.0) * 100.0
                    )
                })
                .collect();
            format!(
                "every SLO percentile was known within ±{:.0}% after {n} steady requests: {}",
                x * 100.0,
                each.join(", ")
            )
        })
}

/// What the rule did in a finished run; `None` without `[measurement.stop]`.
pub fn summarize(c: &Contract, steady: &[&Record], slo: Option<&SloResult>) -> Option<Precision> {
    let st = c.measurement.stop.as_ref()?;
    let budget = c.load.requests();
    let requests = steady.len() as u64;
    let holds = known(c, steady);
    // A duration budget: whether the rule ended it shows in the rule holding at the end.
    let stopped_early = budget.map_or(holds.is_some(), |b| requests < b);
    let detail = holds.unwrap_or_else(|| {
        let reached: Vec<String> = slo
            .map(half_widths)
            .unwrap_or_default()
            .iter()
            .map(|(m, _, w)| match w {
                Some(w) => format!("{m} ±{:.1}%", w * 100.0),
                None => format!("{m} not yet bounded"),
            })
            .collect();
        if stopped_early {
            // The slowest requests were still in flight when the finished ones showed it.
            format!(
                "the rule held on the requests finished by then; with those then in flight, precision reached {}",
                reached.join(", ")
            )
        } else {
            format!(
                "the budget ended first: precision reached {}",
                reached.join(", ")
            )
        }
    });
    Some(Precision {
        rule: rule(st, c),
        stopped_early,
        requests,
        budget,
        detail,
    })
}

/// The rule applied as records finish (a collector observer): once it holds, `flag` is set,
/// and the driver ends the measured phase.
pub struct Known {
    contract: Contract,
    steady: Vec<Record>,
    next_check: usize,
    pub flag: Arc<AtomicBool>,
}

impl Known {
    pub fn new(contract: &Contract, flag: Arc<AtomicBool>) -> Option<Known> {
        let st = contract.measurement.stop.as_ref()?;
        Some(Known {
            contract: contract.clone(),
            steady: Vec::new(),
            next_check: st.min_requests.max(1) as usize,
            flag,
        })
    }
}

impl crate::record::writer::Observer for Known {
    fn observe(&mut self, rec: &Record) {
        self.finished(rec);
    }
}

impl Known {
    /// One finished record, as the collector sees it.
    pub fn finished(&mut self, rec: &Record) {
        if rec.phase != Phase::Steady || self.flag.load(Ordering::Acquire) {
            return;
        }
        let mut r = rec.clone();
        r.forget_text();
        self.steady.push(r);
        if self.steady.len() < self.next_check {
            return;
        }
        // Checked every 10 requests, or every twentieth of those so far: the rule sorts the
        // sample, and a long run must not spend its collector on it.
        self.next_check = self.steady.len() + (self.steady.len() / 20).max(10);
        let refs: Vec<&Record> = self.steady.iter().collect();
        if known(&self.contract, &refs).is_some() {
            self.flag.store(true, Ordering::Release);
        }
    }
}
