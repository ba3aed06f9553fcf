//! The check of a run's predictions (`[prediction]`, grammar in `contract::prediction`)
//! against what it measured, by the headline metrics' own definitions ([`super::Headline`]).

use serde::{Deserialize, Serialize};

use super::Summary;
use crate::contract::prediction::{Prediction, SLO_MET};

/// How one expectation fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    pub text: String,
    pub metric: String,
    pub op: String,
    pub predicted: f64,
    pub measured: Option<f64>,
    /// `None` when the metric was not measured.
    pub held: Option<bool>,
}

/// The check of a bundle's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check {
    pub made_utc: String,
    /// The file still hashes to what was recorded before the run.
    pub hash_verified: bool,
    pub outcomes: Vec<Outcome>,
}

/// Checks a prediction against a summary.
pub fn check(p: &Prediction, s: &Summary, hash_verified: bool) -> Check {
    let value = |metric: &str| match metric {
        SLO_MET => s.steady.slo.as_ref().map(|x| f64::from(u8::from(x.pass))),
        m => super::Headline::from_name(m).and_then(|h| h.of(s)),
    };
    let outcomes = p
        .expect
        .iter()
        .map(|e| {
            let measured = value(&e.metric);
            let held = measured.map(|m| match e.op.as_str() {
                "<=" => m <= e.value,
                "<" => m < e.value,
                ">=" => m >= e.value,
                _ => m > e.value,
            });
            Outcome {
                text: e.text.clone(),
                metric: e.metric.clone(),
                op: e.op.clone(),
                predicted: e.value,
                measured,
                held,
            }
        })
        .collect();
    Check {
        made_utc: p.made_utc.clone(),
        hash_verified,
        outcomes,
    }
}
