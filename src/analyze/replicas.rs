//! Several replicas with no router in front (`target.urls`): each replica's share of the steady
//! requests, its latencies and its SLO attainment, from the records that name their URL.
//! A replica that is slower than the others, or fails, shows here while the totals blur it.

use serde::{Deserialize, Serialize};

use super::SliceFigures;
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
    Some(
        urls.iter()
            .enumerate()
            .map(|(k, url)| {
                let mine: Vec<&Record> = steady
                    .iter()
                    .copied()
                    .filter(|r| r.url == Some(k as u32))
                    .collect();
                let f = SliceFigures::of(c, &mine);
                ReplicaResult {
                    url: crate::secrets::url_without_password(url),
                    steady_requests: f.requests,
                    ok: f.ok,
                    failed: f.requests - f.ok,
                    ttft_p50_ms: f.ttft.as_ref().map(|d| d.p50),
                    ttft_p99_ms: f.ttft.as_ref().map(|d| d.p99),
                    e2e_p99_ms: f.e2e.as_ref().map(|d| d.p99),
                    attainment: f.attainment,
                }
            })
            .collect(),
    )
}
