//! goodput: benchmarks LLM inference servers correctly.
//!
//! One data flow: `contract` (text → a validated spec) and `workload` (the files it names →
//! `Inputs`) → `plan` (requests and their intended send times) → `driver` (open or closed
//! loop) → `client` (one HTTP request, timed) → `record` (written as it finishes) → `analyze`
//! (distributions, SLO, goodput, validity) → `report` (a document in any `--format`), with
//! `bundle` keeping it all and `run` wiring one run. `docs/ARCHITECTURE.md` explains the
//! layers, the seams and where each definition lives.
//!
//! # Layers
//!
//! Each module imports only modules on lines above its own (a module's own submodules
//! aside); `tests/e2e/architecture.rs` reads this list and fails on any `crate::` path against it,
//! so no import cycle can come back. `docs/ARCHITECTURE.md` (Layers) repeats it.
//!
//! 1. `text`, `secrets`, `stats`, `sim_config` — leaves: hashing, words and URLs; redaction;
//!    statistics and the until-stable rule; the simulator's configuration.
//! 2. `api`, `arrival`, `otlp` — endpoint APIs; arrival processes; trace context and OTLP spans
//!    (received, kept, sent).
//! 3. `contract` — the workload contract: types, parsing, validation, fingerprints.
//! 4. `quality`, `sim` — digests, reference sets and scoring definitions; the simulated server.
//! 5. `workload` — the contract's inputs: tokenizer, dataset, lengths, trace, references, and the
//!    secrets it names in the environment.
//! 6. `env`, `plan` — the target's facts, probes and `/tokenize`; the plan.
//! 7. `record` — one finished request, and the collector that writes it.
//! 8. `client` — one timed streaming request.
//! 9. `driver` — open- and closed-loop dispatch.
//! 10. `analyze` — summaries: distributions, SLO, goodput, validity, grade, quality, headline.
//! 11. `coldstart`, `report` — the cold-start test; documents and output formats.
//! 12. `bundle` — the bundle on disk, written and loaded.
//! 13. `compare`, `graded`, `demo`, `merge`, `export` — comparisons; what grading a
//!     result found; the open/closed demo; the shards of one run joined; a bundle's records as
//!     tables.
//! 14. `peers` — other benchmark tools, one module each: its command line as a contract, its
//!     result read and graded with its own definitions, and put beside a run.
//! 15. `audit`, `live`, `history` — grading any result (a bundle or a peer's file); what a run
//!     shows while it runs: the dashboard's figures and drawing; results over time: series of
//!     comparable bundles, change points, the results store.
//! 16. `run` — one run (and repeats), wired together.
//! 17. `sweep`, `ab` — one variable varied, and the capacity search; A against B, paired.
//! 18. `tune` — the engine launched once per value of a launch setting, its capacity searched.
//! 19. `command` — one module per command, each returning a typed result; `command::render`,
//!     the one rendering seam, writes any result as text, Markdown, HTML or JSON.
//! 20. `cli`, `fuzz` — the command line (parses, dispatches, hands the result to the seam); the
//!     parsers' entry points for the fuzz targets.
//!
//! # Public API
//!
//! The binary and the integration tests use the library through these modules; they are
//! public for that, not as a stable API. The documented entry points are
//! [`workload::load`] (a contract and its inputs), [`run::run`], [`bundle::Bundle::load`]
//! (a bundle, recomputed), [`compare::compare`] and [`audit::audit`].

pub mod ab;
pub mod analyze;
pub(crate) mod api;
pub(crate) mod arrival;
pub mod audit;
pub mod bundle;
pub mod cli;
pub mod client;
pub(crate) mod coldstart;
pub(crate) mod command;
pub mod compare;
pub mod contract;
pub(crate) mod demo;
pub mod driver;
pub mod env;
pub mod export;
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod graded;
pub mod history;
pub mod live;
pub mod merge;
pub mod otlp;
pub mod peers;
pub mod plan;
pub mod quality;
pub mod record;
pub mod report;
pub mod run;
pub mod secrets;
pub mod sim;
pub(crate) mod sim_config;
pub(crate) mod stats;
pub mod sweep;
pub mod text;
pub mod tune;
pub mod workload;
