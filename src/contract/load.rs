//! `[load]`: the load model as written (one flat table, so every error points at its own
//! line) and as the rest of goodput reads it, resolved (`Load::drive`: an open loop's schedule
//! or a closed loop's users, never a closed loop with "rate 0").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Arrival, Contract, DEFAULT_IN_FLIGHT, Seconds, stages};

/// The load model. One flat table (rather than a tagged enum) so that every error points at
/// its own line; `resolve` checks that only the chosen model's keys are set and fills their
/// defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// `open` (the default): requests are sent on a schedule whether or not earlier ones
    /// finished. `closed`: `concurrency` users each wait for their answer (and think) before
    /// sending again. Absent: closed when only `concurrency` is given, else open. The
    /// resolved contract always states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<LoadModel>,
    /// The old name of `kind` (it read like the LLM's name): still read, never written, and
    /// each use noted (`Contract::notes`).
    #[serde(default, skip_serializing)]
    pub model: Option<LoadModel>,
    /// Open loop: arrival process (default poisson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Open loop: offered rate, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Open loop, gamma arrivals: shape (1 = Poisson; < 1 burstier, > 1 smoother).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// Open loop, Poisson or gamma arrivals of a number of requests: their drawn gaps scaled
    /// together so the last is sent at (warm-up + measured requests) / rate, as vLLM's `bench
    /// serve` draws them (its offered rate is then the rate exactly; the gaps are no longer
    /// independent). `goodput import vllm-bench` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_total: Option<bool>,
    /// Open loop: most requests in flight; a scheduled request beyond it is client-dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// Closed loop: number of users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Closed loop: pause between a user's answer and its next request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<Seconds>,
    /// Open loop, `arrival = "trace"`: CSV or JSONL of (timestamp, input tokens, output
    /// tokens), relative to the contract; replayed at its own timing divided by `speedup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    /// SHA-256 of `trace`, filled when the contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_sha256: Option<String>,
    /// Trace replay: 2.0 sends it twice as fast (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Tokens per block of a Mooncake trace's `hash_ids` (default 512, as in Mooncake's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_block_tokens: Option<u32>,
    /// Measured requests (after warm-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Measured duration (after warm-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Seconds>,
    /// `"I/N"`: this client sends only shard `I` (from 0) of `N` of the one seeded plan: the
    /// arrivals (whole sessions) whose plan index is `I` modulo `N`, at their intended times
    /// from `start_at`. Every shard labels phases over the whole plan, so `goodput merge` of
    /// the `N` bundles is the unsharded run. `goodput run --shard I/N` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Written<Shard>>,
    /// The common start instant of a sharded run (RFC 3339, e.g. `2026-12-02T06:00:00Z`): every
    /// shard's schedule starts then, so intended send times line up across machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<Written<jiff::Timestamp>>,
    /// `[[load.stage]]`: a load program, stage after stage (open loop); it sets the rate and
    /// the measured phase's end in place of `rate`, `requests` and `duration`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage: Vec<stages::Stage>,
}

/// One shard of a plan: `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Contract {
    /// The contract every shard of a sharded run shares: this one without its shard and start
    /// instant (the unsharded run's, which a merged bundle keeps).
    pub fn unsharded(&self) -> Contract {
        let mut c = self.clone();
        (c.load.shard, c.load.start_at) = (None, None);
        c
    }
}

/// A value kept as its author wrote it and parsed once, when the contract is read: the
/// resolved contract (and so its fingerprint) writes the text back unchanged, and the rest of
/// goodput reads the typed value, never re-parsing the text. A text that does not parse is
/// refused at its own line, by the value's own reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    text: String,
    value: T,
}

/// A value read from the text of one contract key; the error follows `= "text": …`.
pub trait FromText: Sized {
    fn from_text(text: &str) -> Result<Self, String>;
}

impl<T: FromText> Written<T> {
    pub fn parse(text: &str) -> Result<Written<T>, String> {
        Ok(Written {
            value: T::from_text(text)?,
            text: text.to_owned(),
        })
    }
}

impl<T> Written<T> {
    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }
    pub fn get(&self) -> &T {
        &self.value
    }
}

impl<T> Serialize for Written<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de, T: FromText> Deserialize<'de> for Written<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Written::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl FromText for Shard {
    fn from_text(text: &str) -> Result<Self, String> {
        Shard::parse(text)
    }
}

impl FromText for jiff::Timestamp {
    fn from_text(at: &str) -> Result<Self, String> {
        // jiff's reason, not a guess: "9999-12-31T23:59:59Z" is RFC 3339, but past the last
        // instant it represents.
        at.parse().map_err(|e| {
            format!(
                "= \"{at}\": not an instant goodput can use ({e}); write an RFC 3339 instant with its offset, e.g. \"2026-12-02T06:00:00Z\""
            )
        })
    }
}

impl Shard {
    /// The most shards a plan is cut into.
    pub const MAX: u32 = 4096;

    /// `"I/N"`, checked: `I < N <= MAX`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("= \"{s}\": must be I/N, shard I (from 0) of N, e.g. \"0/3\"");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > Shard::MAX {
            return Err(format!("= \"{s}\": N must be 1 to {}", Shard::MAX));
        }
        if index >= count {
            return Err(format!(
                "= \"{s}\": shards are numbered from 0, so I must be below N ({count})"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether plan arrival `i` (a request, or a session's first turn) is this shard's.
    pub fn owns(self, i: u64) -> bool {
        i % u64::from(self.count) == u64::from(self.index)
    }

    /// How many of the arrivals `from..from + n` are this shard's.
    pub fn share(self, from: u64, n: u64) -> u64 {
        let below = |x: u64| {
            (x + u64::from(self.count) - 1 - u64::from(self.index)) / u64::from(self.count)
        };
        below(from + n) - below(from)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The load resolved: what the plan, the driver and the analysis read (`Load::drive`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drive {
    /// Requests sent on a schedule whether or not earlier ones finished.
    Open {
        arrival: Arrival,
        /// Fixed offered rate, req/s; `None` when a trace's timestamps or a load program's
        /// stages set it.
        rate: Option<f64>,
        /// Gamma shape (1 = Poisson).
        burstiness: f64,
        /// Most requests in flight; a scheduled request beyond it is client-dropped.
        max_in_flight: u32,
    },
    /// `users` each wait for their answer, then `think`, before sending again.
    Closed { users: u32, think: Seconds },
}

impl Drive {
    pub fn is_open(&self) -> bool {
        matches!(self, Drive::Open { .. })
    }
    /// The open loop's fixed offered rate, req/s.
    pub fn rate(&self) -> Option<f64> {
        match self {
            Drive::Open { rate, .. } => *rate,
            Drive::Closed { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoadModel {
    Open,
    Closed,
}

impl Load {
    /// Open or closed loop (open until resolved otherwise).
    pub fn kind(&self) -> LoadModel {
        self.kind.unwrap_or(LoadModel::Open)
    }
    /// The program's edge search (`shape = "edge"`, its last stage), if it has one.
    pub fn edge(&self) -> Option<&stages::Stage> {
        self.stage.last().filter(|s| s.shape == stages::Shape::Edge)
    }

    pub fn is_open(&self) -> bool {
        self.kind() == LoadModel::Open
    }
    /// The load as the rest of goodput reads it: an open loop's schedule or a closed loop's
    /// users, from the table `resolve` validated and filled. Read on each use rather than
    /// cached beside the table, because a sweep or an A/B edits the table (a step's rate)
    /// and a cached copy would go stale.
    pub fn drive(&self) -> Drive {
        match self.kind() {
            LoadModel::Open => Drive::Open {
                arrival: self.arrival.unwrap_or_default(),
                rate: self.rate,
                burstiness: self.burstiness.unwrap_or(1.0),
                max_in_flight: self.max_in_flight.unwrap_or(DEFAULT_IN_FLIGHT),
            },
            LoadModel::Closed => Drive::Closed {
                users: self.concurrency.unwrap_or(1).max(1),
                think: self.think_time.unwrap_or_default(),
            },
        }
    }
    /// The open loop's fixed offered rate, req/s: `None` for a closed loop, a trace (its own
    /// timing) or a load program (its stages' rates).
    pub fn rate(&self) -> Option<f64> {
        self.drive().rate()
    }
    /// The shard this client sends (`load.shard`), if the run is sharded.
    pub fn shard(&self) -> Option<Shard> {
        self.shard.as_ref().map(|w| *w.get())
    }
    /// The common start instant of a sharded run (`load.start_at`).
    pub fn start_at(&self) -> Option<jiff::Timestamp> {
        self.start_at.as_ref().map(|w| *w.get())
    }
    pub fn requests(&self) -> Option<u64> {
        self.requests
    }
    pub fn duration(&self) -> Option<Seconds> {
        self.duration
    }
    /// Tokens per block of a Mooncake trace's `hash_ids`: `trace_block_tokens`, else
    /// Mooncake's 512.
    pub fn block_tokens(&self) -> u32 {
        self.trace_block_tokens.unwrap_or(512)
    }

    /// One line for headlines: "open loop, poisson arrivals at 5 req/s"; a shard says which.
    pub fn describe(&self) -> String {
        match self.shard() {
            Some(s) => format!(
                "{}, shard {s} (this client sent 1 arrival in {} from {})",
                self.describe_whole(),
                s.count,
                self.start_at.as_ref().map_or("?", |w| w.text())
            ),
            None => self.describe_whole(),
        }
    }

    fn describe_whole(&self) -> String {
        if let Some(e) = self.edge() {
            let before = &self.stage[..self.stage.len() - 1];
            let lead = if before.is_empty() {
                String::new()
            } else {
                format!(
                    "{} then ",
                    before
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(" → ")
                )
            };
            return format!("open loop, {lead}an {}", e.describe());
        }
        if !self.stage.is_empty() {
            let total: f64 = self.stage.iter().filter_map(|s| s.seconds()).sum();
            let counted = self.stage.iter().any(|s| s.requests.is_some());
            return format!(
                "open loop, a load program of {} stages ({}{} s): {}",
                self.stage.len(),
                if counted { "at least " } else { "" },
                total,
                self.stage
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" → ")
            );
        }
        match self.drive() {
            Drive::Open {
                arrival,
                rate,
                burstiness,
                ..
            } => match arrival {
                Arrival::Gamma => format!(
                    "open loop, gamma arrivals (shape {burstiness}) at {} req/s",
                    rate.unwrap_or(0.0)
                ),
                Arrival::Trace => format!(
                    "open loop, trace replay of {}{}",
                    self.trace
                        .as_deref()
                        .and_then(Path::file_name)
                        .map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned()),
                    match self.speedup {
                        Some(x) if x != 1.0 => format!(" at {x}× speed"),
                        _ => String::new(),
                    }
                ),
                a => format!(
                    "open loop, {} arrivals at {} req/s",
                    format!("{a:?}").to_lowercase(),
                    rate.unwrap_or(0.0)
                ),
            },
            Drive::Closed { users, think } => {
                format!("closed loop, concurrency {users}, think time {think}")
            }
        }
    }
}
