//! A run whose load was changed while it ran (`goodput demo --live`): each change started a
//! segment (open or closed loop, at a share of the engine's capacity), its records carry the
//! segment's number, and `environment.json` keeps what each segment was. Each segment is
//! summarised on its own, from its own records: the whole run's figures mix loads and are not
//! a result (the run is INVALID for that reason).

use serde::{Deserialize, Serialize};

use super::SliceFigures;
use crate::contract::Contract;
use crate::plan::Phase;
use crate::record::{Record, SegmentFacts};

/// One segment's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SegmentResult {
    #[serde(flatten)]
    pub facts: SegmentFacts,
    /// Its requests sent in the measured phases (warm-up left out).
    pub requests: u64,
    pub ok: u64,
    /// Requests sent per second over the segment: below `offered_rps` when a closed loop
    /// slowed down with the server.
    pub sent_rps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    /// Its requests that met every SLO threshold, of those sent; `None` without an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
}

/// Each segment's figures, in order; `None` for a run whose load never changed.
pub fn summarize(
    c: &Contract,
    facts: &[SegmentFacts],
    records: &[Record],
) -> Option<Vec<SegmentResult>> {
    if facts.is_empty() {
        return None;
    }
    let end = records.iter().filter_map(|r| r.end_us).max().unwrap_or(0);
    Some(
        facts
            .iter()
            .map(|f| {
                let mine: Vec<&Record> = records
                    .iter()
                    .filter(|r| {
                        r.segment == Some(f.segment)
                            && matches!(r.phase, Phase::Steady | Phase::Drain)
                    })
                    .collect();
                let g = SliceFigures::of(c, &mine);
                let span_s = f.to_us.unwrap_or(end).saturating_sub(f.from_us) as f64 / 1e6;
                SegmentResult {
                    facts: f.clone(),
                    requests: g.requests,
                    ok: g.ok,
                    sent_rps: if span_s > 0.0 {
                        g.requests as f64 / span_s
                    } else {
                        0.0
                    },
                    ttft_p50_ms: g.ttft.as_ref().map(|d| d.p50),
                    ttft_p99_ms: g.ttft.as_ref().map(|d| d.p99),
                    attainment: g.attainment,
                }
            })
            .collect(),
    )
}

/// Why the whole run's figures are no result, when its load changed.
pub fn invalid_reason(segments: &[SegmentResult]) -> Option<String> {
    (segments.len() > 1).then(|| {
        format!(
            "the load was changed {} times while the run lasted (a live demo): the whole run's figures mix {} segments of different loads; read each segment's own line",
            segments.len() - 1,
            segments.len()
        )
    })
}
