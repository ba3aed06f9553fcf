//! What a run's records say about its outputs (`[quality]`): reference scores, probe
//! consistency, and the request-by-request consistency of two results of the same plan. The
//! scoring definitions are in [`crate::quality`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::contract::{QualityMode, Scoring};
use crate::plan::Phase;
use crate::quality::{Reference, score};
use crate::record::Record;

/// What one run says about its outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QualityResult {
    /// `consistency` or `reference`.
    pub mode: String,
    /// Steady successful requests whose output was kept (digest or text).
    pub outputs: u64,
    /// Quality probes answered (their text kept), for request-by-request comparison.
    #[serde(default)]
    pub probes: u64,
    /// `reference` mode: how they scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceScore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReferenceScore {
    pub scoring: Scoring,
    pub scored: u64,
    /// Mean score over scored requests, in [0, 1].
    pub mean: f64,
}

/// The quality figures of a run's steady requests (`None` in mode `none`).
pub fn summarize(
    mode: QualityMode,
    scoring: Scoring,
    refs: &[Reference],
    records: &[Record],
) -> Option<QualityResult> {
    let steady = || {
        records
            .iter()
            .filter(|r| r.phase == Phase::Steady && r.is_ok())
    };
    let outputs = steady().filter(|r| r.output_digest.is_some()).count() as u64;
    let probes = records
        .iter()
        .filter(|r| r.phase == Phase::Quality && crate::plan::probe_answer(r.index) && r.is_ok())
        .count() as u64;
    match mode {
        QualityMode::None => None,
        QualityMode::Consistency => Some(QualityResult {
            mode: "consistency".into(),
            outputs,
            probes,
            reference: None,
        }),
        QualityMode::Reference => {
            let scores: Vec<f64> = steady()
                .filter_map(|r| {
                    let item = refs.get((r.index % refs.len().max(1) as u64) as usize)?;
                    Some(score(scoring, r.output_text.as_deref()?, &item.answer))
                })
                .collect();
            Some(QualityResult {
                mode: "reference".into(),
                outputs,
                probes,
                reference: Some(ReferenceScore {
                    scoring,
                    scored: scores.len() as u64,
                    mean: if scores.is_empty() {
                        0.0
                    } else {
                        scores.iter().sum::<f64>() / scores.len() as f64
                    },
                }),
            })
        }
    }
}

/// Two results of the same plan, request by request: their quality probes (the same prompts
/// in every run), or, for bundles written before probes existed, their steady requests;
/// successful on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consistency {
    /// `quality` (the probes) or `steady`.
    #[serde(default)]
    pub phase: String,
    pub pairs: u64,
    /// Fraction with identical output digests.
    pub identical: f64,
    /// Fraction with the same output length.
    pub same_length: f64,
    /// Mean longest-common-prefix agreement of words, when both kept text.
    pub token_agreement: Option<f64>,
}

pub fn consistency(a: &[Record], b: &[Record]) -> Option<Consistency> {
    // The probes when both runs sent them: the measured prompts carry each run's own cache
    // nonce, and a model's output depends on every token of its prompt.
    let probed = |rs: &[Record]| rs.iter().any(|r| r.phase == Phase::Quality);
    let phase = if probed(a) && probed(b) {
        Phase::Quality
    } else {
        Phase::Steady
    };
    // A probe's answer, not its cache primer.
    let key = |r: &Record| {
        r.phase == phase
            && (phase != Phase::Quality || crate::plan::probe_answer(r.index))
            && r.is_ok()
            && r.output_digest.is_some()
    };
    let by_index: HashMap<u64, &Record> =
        a.iter().filter(|r| key(r)).map(|r| (r.index, r)).collect();
    let pairs: Vec<(&Record, &Record)> = b
        .iter()
        .filter(|r| key(r))
        .filter_map(|rb| Some((*by_index.get(&rb.index)?, rb)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let frac = |f: &dyn Fn(&Record, &Record) -> bool| {
        pairs.iter().filter(|(x, y)| f(x, y)).count() as f64 / n
    };
    let agreements: Vec<f64> = pairs
        .iter()
        .filter_map(|(x, y)| {
            let (wx, wy) = (
                words_raw(x.output_text.as_deref()?),
                words_raw(y.output_text.as_deref()?),
            );
            let longest = wx.len().max(wy.len());
            if longest == 0 {
                return Some(1.0);
            }
            let prefix = wx.iter().zip(&wy).take_while(|(p, q)| p == q).count();
            Some(prefix as f64 / longest as f64)
        })
        .collect();
    Some(Consistency {
        phase: phase.as_str().to_owned(),
        pairs: pairs.len() as u64,
        identical: frac(&|x, y| x.output_digest == y.output_digest),
        same_length: frac(&|x, y| output_len(x) == output_len(y)),
        token_agreement: (agreements.len() == pairs.len())
            .then(|| agreements.iter().sum::<f64>() / n),
    })
}

fn words_raw(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

fn output_len(r: &Record) -> u32 {
    r.usage_completion_tokens.unwrap_or(r.client_output_tokens)
}
