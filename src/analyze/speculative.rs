//! Speculative decoding's acceptance beside TPOT: per request where the engine states it in
//! its answer (llama.cpp's `timings.draft_n` and `draft_n_accepted`, vLLM's
//! `metrics.speculative_decoding`), else over the steady window from its counters; and the
//! TPOT of the requests whose drafts were accepted less against those accepted more, which is
//! how acceptance explains TPOT.

use serde::{Deserialize, Serialize};

use super::request::RequestMetrics;
use super::server::ServerSide;
use crate::record::Record;
use crate::stats::Dist;

/// The steady window's speculative decoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeculativeResult {
    /// Where the figures come from: `per request (llama.cpp timings)`, `per request (vLLM
    /// metrics)`, or `over the window (server counters)`.
    pub source: String,
    /// Steady requests whose answers stated their drafts (0 over the window alone).
    pub requests: u64,
    /// Draft tokens proposed and accepted, and their ratio.
    pub drafted: u64,
    pub accepted: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<f64>,
    /// Each request's acceptance (per request only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_request: Option<Dist>,
    /// TPOT p50, ms, of the requests below the median acceptance and of those at or above it
    /// (per request only, with at least four requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p50_low_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p50_high_ms: Option<f64>,
}

/// The steady requests' acceptance; `None` when nothing drafted (no speculative decoding seen).
pub fn summarize(
    steady: &[&Record],
    metrics: &[RequestMetrics],
    server: Option<&ServerSide>,
) -> Option<SpeculativeResult> {
    let stated: Vec<(f64, u32, u32, Option<f64>, &str)> = steady
        .iter()
        .zip(metrics)
        .filter(|(r, _)| r.is_ok())
        .filter_map(|(r, m)| {
            let t = r.engine_timing?;
            let a = t.acceptance()?;
            Some((
                a,
                t.draft_tokens?,
                t.draft_accepted?,
                m.tpot_ms(),
                t.source.name(),
            ))
        })
        .collect();
    if let Some(&(_, _, _, _, name)) = stated.first() {
        let drafted: u64 = stated.iter().map(|x| u64::from(x.1)).sum();
        let accepted: u64 = stated.iter().map(|x| u64::from(x.2)).sum();
        let per = Dist::of(stated.iter().map(|x| x.0).collect());
        let (low, high) = match &per {
            Some(d) if stated.len() >= 4 => {
                let tpot = |keep: &dyn Fn(f64) -> bool| {
                    Dist::of(
                        stated
                            .iter()
                            .filter(|x| keep(x.0))
                            .filter_map(|x| x.3)
                            .collect(),
                    )
                    .map(|d| d.p50)
                };
                let median = d.p50;
                (tpot(&|a| a < median), tpot(&|a| a >= median))
            }
            _ => (None, None),
        };
        return Some(SpeculativeResult {
            source: format!("per request ({name})"),
            requests: stated.len() as u64,
            drafted,
            accepted,
            acceptance: (drafted > 0).then(|| accepted as f64 / drafted as f64),
            per_request: per,
            tpot_p50_low_ms: low,
            tpot_p50_high_ms: high,
        });
    }
    let d = server?.drafts.as_ref()?;
    Some(SpeculativeResult {
        source: "over the window (server counters)".to_owned(),
        requests: 0,
        drafted: d.drafted,
        accepted: d.accepted,
        acceptance: (d.drafted > 0).then(|| d.accepted as f64 / d.drafted as f64),
        per_request: None,
        tpot_p50_low_ms: None,
        tpot_p50_high_ms: None,
    })
}
