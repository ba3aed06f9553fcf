//! The built-in simulated inference server: the embedded default target and the test bench.
//!
//! [`engine`] is the one scheduler and cost model; [`server`] runs it behind the HTTP APIs of
//! [`wire`] (OpenAI's, Anthropic's, TGI's, Ollama's) in real time, [`des`] runs it on a virtual
//! clock. [`ledger`] records the ground truth both produce. Its configuration is the leaf
//! `crate::sim_config`; this module knows nothing of contracts, plans or the client.

pub mod des;
pub(crate) mod engine;
pub(crate) mod ledger;
pub(crate) mod metrics;
pub mod model;
pub mod power;
pub(crate) mod server;
pub(crate) mod tools;
pub(crate) mod wire;

pub use crate::sim_config::{ConfigError, Faults, Scheduling, SimConfig};
pub use ledger::{GroundTruth, SimOutcome};
pub use server::{SimError, SimServer};
