//! goodput: benchmarks LLM inference servers correctly.
//!
//! The modules follow the data flow in `shared/DESIGN.md`: `contract` → `plan` → `driver` →
//! `client` → `record` → `analyze` → `report`, with `env` probing the target and `sim` the
//! built-in simulated server. `main.rs` only parses the command line and calls [`cli::run`].

pub mod analyze;
pub mod api;
pub mod arrival;
pub mod audit;
pub mod bundle;
pub mod cli;
pub mod client;
pub mod coldstart;
pub mod compare;
pub mod contract;
pub mod demo;
pub mod driver;
pub mod env;
pub mod plan;
pub mod quality;
pub mod record;
pub mod report;
pub mod run;
pub mod sim;
pub mod sweep;
pub mod text;
pub mod workload;
