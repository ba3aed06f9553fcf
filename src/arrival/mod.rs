//! Open-loop arrival processes: when each request is *intended* to be sent, in µs from the
//! start of the run. Latency is measured from these times, so a server that falls behind
//! cannot hide it by slowing the client (coordinated omission).
//!
//! A seam: each process is one file with a type implementing [`Process`], and one variant of
//! [`Arrival`] (the contract's `load.arrival`) that [`Arrival::process`] maps to it. Adding a
//! process is that file and that variant; copy `constant.rs`.

pub(crate) mod constant;
pub(crate) mod edge;
pub(crate) mod gamma;
pub(crate) mod pinned;
pub(crate) mod poisson;
pub(crate) mod program;
pub(crate) mod trace;

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// `load.arrival`: which process draws the intended send times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential gaps: independent arrivals at a mean rate (the usual model of many users).
    #[default]
    Poisson,
    /// Equal gaps of 1/rate.
    Constant,
    /// Gamma gaps with `load.burstiness` as shape: below 1 burstier than Poisson, above 1
    /// more regular.
    Gamma,
    /// The rows of `load.trace`, at their own offsets.
    Trace,
}

/// What a process is drawn from: the contract's `load` (rate, burstiness) and, for a trace,
/// its offsets after the speed-up.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// Requests per second.
    pub rate: f64,
    /// `load.burstiness` (gamma shape).
    pub shape: f64,
    /// Trace replay offsets, µs.
    pub trace_us: Arc<Vec<u64>>,
    /// `load.pin_total`: the arrivals (warm-up and measured) whose drawn gaps are scaled to
    /// end at their count / rate ([`pinned::Pinned`]).
    pub pinned: Option<u64>,
}

/// One arrival process, drawing from the run's seeded arrival stream.
pub trait Process: Send + std::fmt::Debug {
    /// The next intended send time, µs from the start; `None` when the process has ended.
    fn next_us(&mut self, rng: &mut ChaCha8Rng) -> Option<u64>;
}

impl Arrival {
    /// A fresh process of this kind: its first arrival is the run's first request.
    pub fn process(self, p: &Params) -> Box<dyn Process> {
        if let Some(n) = p.pinned {
            let free = Params {
                pinned: None,
                ..p.clone()
            };
            return Box::new(pinned::Pinned::new(self.process(&free), n, p.rate));
        }
        match self {
            Arrival::Poisson => Box::new(poisson::Poisson::new(p)),
            Arrival::Constant => Box::new(constant::Constant::new(p)),
            Arrival::Gamma => Box::new(gamma::Gamma::new(p)),
            Arrival::Trace => Box::new(trace::Trace::new(p)),
        }
    }
}

/// The clock of a renewal process (independent gaps between arrivals): the first arrival at
/// 0, each next one a gap later.
#[derive(Debug, Clone, Default)]
pub struct Renewal {
    t: f64,
    started: bool,
}

impl Renewal {
    /// The next arrival, µs, `gap` (s, drawn only after the first) after the last.
    pub fn next_us(&mut self, gap: impl FnOnce() -> f64) -> u64 {
        if self.started {
            self.t += gap();
        }
        self.started = true;
        (self.t * 1e6).round() as u64
    }
}
