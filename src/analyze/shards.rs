//! A run sent by several client machines (`goodput run --shard I/N`, joined by `goodput
//! merge`): each shard's own dispatch lag, and how far the shards' clocks were apart.
//!
//! Every shard starts its schedule at one instant *on its own clock*; the target is the one
//! clock they all reach, so each shard measures its offset to the target's (`env::clock`) and
//! the spread of those offsets is how far apart the shards' starts really were. A spread
//! beyond what the measurement can tell and [`MAX_CLOCK_SPREAD_MS`] makes the merged run
//! INVALID: its arrivals were not the plan's.

use serde::{Deserialize, Serialize};

use super::Dist;
use crate::plan::Phase;
use crate::record::Record;

/// The most the shards' clocks may disagree, beyond the uncertainty of measuring them, before
/// the merged run is INVALID: 50 ms is a twentieth of a second's arrivals at any rate, and far
/// above what NTP keeps machines of one cluster to.
pub const MAX_CLOCK_SPREAD_MS: f64 = 50.0;

/// What a merged bundle's `environment.json` keeps of each shard (`shards`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardFacts {
    pub index: u32,
    pub count: u32,
    pub start_at: String,
    /// The shard's client host name.
    #[serde(default)]
    pub host: Option<String>,
    /// The shard's clock against the target's (`env::clock::offset`).
    #[serde(default)]
    pub clock: serde_json::Value,
    /// The shard's own bundle, as merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// Where its schedule began on its own clock, and how far `merge` moved its records to
    /// put that on the merged clock, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shifted_us: Option<u64>,
}

/// The shards of a merged run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardsResult {
    pub count: u32,
    /// The common start instant (RFC 3339).
    pub start_at: String,
    /// Largest minus smallest of the shards' clock offsets to the target, ms (absent when a
    /// shard's offset is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_spread_ms: Option<f64>,
    /// What the spread may be: [`MAX_CLOCK_SPREAD_MS`] plus the two offsets' uncertainties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_spread_allowed_ms: Option<f64>,
    pub shards: Vec<ShardResult>,
}

/// One shard of a merged run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardResult {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Steady requests this shard sent.
    pub steady_requests: u64,
    /// Its steady requests' dispatch lag (actual − intended send), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_lag_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_lag_p99_ms: Option<f64>,
    /// The target's clock minus this shard's, ms, and the uncertainty of that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_ms: Option<f64>,
    /// Why the offset is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_absent: Option<String>,
}

impl ShardsResult {
    /// The validity reason the shards give, if their clocks were too far apart.
    pub fn invalid_reason(&self) -> Option<String> {
        let (spread, allowed) = (self.clock_spread_ms?, self.clock_spread_allowed_ms?);
        (spread > allowed).then(|| {
            let offsets: Vec<String> = self
                .shards
                .iter()
                .filter_map(|s| Some(format!("shard {} {:+.1} ms", s.index, s.clock_offset_ms?)))
                .collect();
            format!(
                "the shards' clocks disagree by {spread:.1} ms (against the target's: {}), more than the {allowed:.1} ms allowed ({MAX_CLOCK_SPREAD_MS} ms beyond what the measurement can tell): their common start instant was not common, so the merged arrivals are not the plan's (synchronise the client machines' clocks, e.g. with NTP)",
                offsets.join(", ")
            )
        })
    }

    /// A note for each shard whose clock could not be read.
    pub fn notes(&self) -> Vec<String> {
        self.shards
            .iter()
            .filter_map(|s| {
                s.clock_absent.as_ref().map(|why| {
                    format!(
                        "shard {}'s clock against the target's is unknown ({why}): whether its start lined up with the others' is unchecked",
                        s.index
                    )
                })
            })
            .collect()
    }
}

/// The shards of a merged run from its records (each carries its `shard`) and what the bundle
/// keeps of each; `None` for a run that was not merged from shards.
pub fn summarize(facts: &[ShardFacts], records: &[Record]) -> Option<ShardsResult> {
    let first = facts.first()?;
    let mut shards: Vec<ShardResult> = facts
        .iter()
        .map(|f| {
            let steady: Vec<&Record> = records
                .iter()
                .filter(|r| r.shard == Some(f.index) && r.phase == Phase::Steady)
                .collect();
            let lag = Dist::of(
                steady
                    .iter()
                    .filter_map(|r| super::dispatch_lag(r)[0])
                    .collect(),
            );
            let num = |k: &str| f.clock[k].as_f64();
            ShardResult {
                index: f.index,
                host: f.host.clone(),
                steady_requests: steady.len() as u64,
                dispatch_lag_p50_ms: lag.as_ref().map(|d| d.p50),
                dispatch_lag_p99_ms: lag.as_ref().map(|d| d.p99),
                clock_offset_ms: num("offset_ms"),
                clock_uncertainty_ms: num("uncertainty_ms"),
                clock_absent: num("offset_ms").is_none().then(|| {
                    f.clock["absent"]
                        .as_str()
                        .unwrap_or("not measured")
                        .to_owned()
                }),
            }
        })
        .collect();
    shards.sort_by_key(|s| s.index);
    let known: Vec<(f64, f64)> = shards
        .iter()
        .filter_map(|s| Some((s.clock_offset_ms?, s.clock_uncertainty_ms.unwrap_or(0.0))))
        .collect();
    let (spread, allowed) = if known.len() == shards.len() && !known.is_empty() {
        let lo = known
            .iter()
            .copied()
            .fold((f64::INFINITY, 0.0), |a, b| if b.0 < a.0 { b } else { a });
        let hi =
            known.iter().copied().fold(
                (f64::NEG_INFINITY, 0.0),
                |a, b| if b.0 > a.0 { b } else { a },
            );
        (Some(hi.0 - lo.0), Some(MAX_CLOCK_SPREAD_MS + hi.1 + lo.1))
    } else {
        (None, None)
    };
    Some(ShardsResult {
        count: first.count,
        start_at: first.start_at.clone(),
        clock_spread_ms: spread,
        clock_spread_allowed_ms: allowed,
        shards,
    })
}
