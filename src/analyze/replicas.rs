//! Several replicas with no router in front (`target.urls`): each replica's share of the steady
//! requests, its latencies and its SLO attainment, from the records that name their URL.
//! A replica that is slower than the others, or fails, shows here while the totals blur it.

use serde::{Deserialize, Serialize};

use super::{Dist, meets_slo, request_metrics};
use crate::contract::Contract;
use crate::record::Record;

/// One replica's steady requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaResult {
    /// Its base URL (without any password).
    pub url: String,
    pub steady_requests: u64,
    pub ok: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99_ms: Option<f64>,
    /// Its steady requests that met every SLO threshold, of those it was sent; `None`
    /// without an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
}

/// Each replica's figures, in `target.urls` order; `None` with one URL or none.
pub fn summarize(c: &Contract, steady: &[&Record]) -> Option<Vec<ReplicaResult>> {
    let urls = &c.target.urls;
    if urls.len() < 2 {
        return None;
    }
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    Some(
        urls.iter()
            .enumerate()
            .map(|(k, url)| {
                let mine: Vec<&&Record> =
                    steady.iter().filter(|r| r.url == Some(k as u32)).collect();
                let metrics: Vec<_> = mine
                    .iter()
                    .filter(|r| r.is_ok())
                    .map(|r| request_metrics(r, origin, source))
                    .collect();
                let ttft = Dist::of(metrics.iter().filter_map(|m| m.ttft_ms).collect());
                let e2e = Dist::of(metrics.iter().filter_map(|m| m.e2e_ms).collect());
                let met = metrics.iter().filter(|m| meets_slo(c, m)).count();
                ReplicaResult {
                    url: crate::secrets::url_without_password(url),
                    steady_requests: mine.len() as u64,
                    ok: metrics.len() as u64,
                    failed: (mine.len() - metrics.len()) as u64,
                    ttft_p50_ms: ttft.as_ref().map(|d| d.p50),
                    ttft_p99_ms: ttft.as_ref().map(|d| d.p99),
                    e2e_p99_ms: e2e.as_ref().map(|d| d.p99),
                    attainment: (c.slo.is_set() && !mine.is_empty())
                        .then(|| met as f64 / mine.len() as f64),
                }
            })
            .collect(),
    )
}
