//! The bundle's two documents about the run itself, typed: `command.json` (how it was started
//! and how it ended) and `environment.json` (what it knew of its target, its host and its load).
//! Written and read only through these types, so a misspelt key cannot be an empty value; a
//! field an older bundle lacks is an explicit `None` (or empty list), never a guess. Fields are
//! declared in alphabetical order, the order `serde_json` wrote the untyped files in, so a
//! run's `command.json` is byte for byte what it was; `environment.json` writes the probed part
//! ([`crate::env::Probed`]) first, then the run's.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analyze::efficiency::PageStatus;
use crate::analyze::shards::ShardFacts;
use crate::driver::guard::LoadEnd;
use crate::otlp::receiver::TracesStatus;
use crate::record::writer::Lost;
use crate::record::{Kept, SegmentFacts};

/// `command.json`.
pub const COMMAND: &str = "command.json";

/// `command.json`: written when a run starts, rewritten when it ends (and by a run that could
/// not write its records, with why). A merged run's lists its shards (`merged_from`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandFile {
    /// Why the run stopped before its plan's end (it gave up).
    pub aborted: Option<String>,
    /// When it gave up, once the load had stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted_utc: Option<jiff::Timestamp>,
    /// The command line (secrets redacted).
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Why the load stopped once its verdict was decided.
    pub decided: Option<String>,
    /// `None` while the run goes on, and for a run killed outright.
    pub ended_utc: Option<jiff::Timestamp>,
    pub interrupted: bool,
    pub load_end: Option<LoadEnd>,
    /// The records that did not reach `requests.jsonl`: where they went, or what was lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_records: Option<Lost>,
    /// A merged run: its shards' bundles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<String>>,
    /// The contract changes made on the command line (`--set`, `--rate`, …), as given.
    pub overrides: Vec<String>,
    /// The hash of `prediction.json` as the run wrote it.
    pub prediction_sha256: Option<String>,
    /// What the records keep beyond every build's (all `false` for an older bundle).
    pub records: Kept,
    /// The signal that interrupted the run.
    pub signal: Option<String>,
    pub started_utc: Option<jiff::Timestamp>,
    pub tool_version: Option<String>,
    /// When the first record could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_failed_utc: Option<jiff::Timestamp>,
}

impl CommandFile {
    /// A run killed outright (no Ctrl-C: SIGKILL, out of memory, power) never wrote its end
    /// time: it was interrupted too, and its requests in flight were lost with it.
    pub fn interrupted(&self) -> bool {
        self.interrupted || self.started_utc.is_some() && self.ended_utc.is_none()
    }

    /// Why it ended early, as the run wrote it (a kill leaves neither).
    pub fn stopped(&self) -> Option<String> {
        self.aborted
            .clone()
            .or_else(|| self.signal.as_ref().map(|s| format!("interrupted by {s}")))
    }
}

/// `environment.json`: what the run probed before the load ([`crate::env::Probed`]) and what
/// it added as it went.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EnvironmentFile {
    #[serde(flatten)]
    pub probed: crate::env::Probed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_http: Option<crate::client::PoolSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_wake_latency: Option<crate::env::wake::WakeStatus>,
    /// A live demo: what each segment of its load was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Live>,
    /// How the outputs were recounted after the load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_count: Option<crate::record::recount::Recounted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
    /// A shard's run: its place in the run and its schedule's origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardEnvironment>,
    /// A merged run: what it keeps of each client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardFacts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Telemetry>,
    /// `tokenizer = "server"`: the inputs recounted in the target's tokens, checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traces: Option<TracesStatus>,
}

impl EnvironmentFile {
    /// The telemetry pages and which answered (none without `[target.telemetry]`).
    pub fn telemetry_pages(&self) -> &[PageStatus] {
        self.telemetry.as_ref().map_or(&[], |t| &t.endpoints)
    }

    /// A live demo's segments (none for any other run).
    pub fn segments(&self) -> &[SegmentFacts] {
        self.live.as_ref().map_or(&[], |l| &l.segments)
    }
}

/// The target's `/metrics`: its file, or why there is none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absent: Option<String>,
    pub endpoint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// A live demo's load, as its control set it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Live {
    pub capacity_rps: f64,
    pub e2e_alone_s: f64,
    pub segments: Vec<SegmentFacts>,
}

/// A shard's place in its run (`--shard I/N`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardEnvironment {
    /// The shard's clock against the target's (`env::clock::offset`).
    pub clock: Value,
    pub count: u32,
    pub index: u32,
    /// Where the schedule began on the shard's own clock, µs; `None` when the shard stopped
    /// before its start instant.
    pub origin_us: Option<u64>,
    /// The plan every shard of the run shares.
    pub plan_fingerprint: String,
    /// `I/N`.
    pub shard: String,
    pub start_at: String,
}

/// `[target.telemetry]`: the accelerator pages scraped, and which answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Telemetry {
    pub endpoints: Vec<PageStatus>,
    pub file: Option<String>,
    pub interval_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of `a` that `b` lacks or holds differently, as dotted paths.
    fn lost(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => lost(v, w, &format!("{at}.{k}"), out),
                        None => out.push(format!("{at}.{k}")),
                    }
                }
            }
            _ if a != b => out.push(at.to_owned()),
            _ => {}
        }
    }

    /// An older bundle's files read into the types and written again keep every key and value
    /// they had: nothing is dropped or defaulted away (#73).
    #[test]
    fn the_fixture_bundles_files_round_trip_through_the_types() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/small");
        let read = |name: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
        };
        let (command, environment) = (read(COMMAND), read(super::super::ENVIRONMENT));
        let typed: CommandFile = serde_json::from_value(command.clone()).unwrap();
        let mut out = Vec::new();
        lost(
            &command,
            &serde_json::to_value(&typed).unwrap(),
            "command",
            &mut out,
        );
        let typed: EnvironmentFile = serde_json::from_value(environment.clone()).unwrap();
        lost(
            &environment,
            &serde_json::to_value(&typed).unwrap(),
            "environment",
            &mut out,
        );
        assert!(out.is_empty(), "lost in the round trip: {out:?}");
        assert!(typed.probed.client.hostname.is_some() && !typed.probed.probes.is_empty());
    }
}
