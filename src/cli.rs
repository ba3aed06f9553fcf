//! The command line: parses the arguments, dispatches to a command (`crate::command`, one
//! module each) and hands its result to the one rendering seam. Nothing here renders.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::command::{
    self, ab::AbArgs, audit::AuditArgs, compare::CompareArgs, demo::DemoArgs, export::ExportArgs,
    history::HistoryArgs, import::ImportArgs, init::InitArgs, merge::MergeArgs, plan::PlanArgs,
    report::ReportArgs, run::RunArgs, sim::SimArgs, sweep::SweepArgs, tune::TuneArgs,
};

pub use crate::command::failure_code;
pub use crate::command::sim::sim_config;

#[derive(Debug, Parser)]
#[command(
    name = "goodput",
    version,
    about = "Benchmarks LLM inference servers correctly: a workload contract, open-loop load, distributions and goodput under an SLO."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload contract and keep the bundle (no contract: the built-in example against
    /// the embedded simulator).
    #[command(
        after_help = "Exit status: 0 the run completed (and passed every --fail-on gate); 1 an error (bad contract, unreachable target, no request succeeded); 3 the run gave up (every request that reached the target failed, or it stopped answering); with --fail-on, the first failing gate in this order: 4 INVALID (the measurement: client behind its schedule, overload, dropped arrivals, interrupted), 5 SLO missed (conclusively, or at the point estimates) or 8 SLO met but not yet supported by the sample (too few requests for its percentile at measurement.confidence), 6 a prediction did not hold, 7 quality not held against --baseline; 128 + N a signal stopped it (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), every record kept."
    )]
    Run(RunArgs),
    /// Compare results (bundles or repeat sets) against the first, refusing when their
    /// contracts differ in more than one variable.
    Compare(CompareArgs),
    /// Write a commented example contract.
    Init(InitArgs),
    /// Print a contract's plan as JSON lines (same contract and seed: same bytes).
    Plan(PlanArgs),
    /// Recompute and print a bundle's summary from its raw records.
    Report(ReportArgs),
    /// Grade a result as comparable or directional and list what it lacks: a goodput bundle or
    /// repeat set, a vLLM `bench serve --save-result` JSON, or a GuideLLM report JSON.
    Audit(AuditArgs),
    /// Run a contract once per value of one field (`--vary load.rate=1,2,4,8`), all else equal,
    /// and tabulate offered vs achieved rate, latency, throughput, attainment and goodput.
    Sweep(SweepArgs),
    /// Which engine settings serve the most at the SLO? Launch the engine once per value of
    /// one setting (`--setting parallel=1,2,4`, filling `{parallel}` in `[cold_start]
    /// launch`), search its capacity at the SLO, stop it, and tabulate the settings.
    #[command(
        after_help = "Exit status: 0 every setting was tried (a setting that failed to start is a named row, not an error); 1 an error (no launch command, a placeholder the command never uses, a bad contract); 128 + N a signal stopped it, every finished setting kept and its engine stopped."
    )]
    Tune(TuneArgs),
    /// Did the change help? A against B (two contracts that differ in one axis, or A against
    /// itself) in paired, interleaved blocks at the contract's open-loop rate, until every
    /// headline metric is decided (better, worse, or no difference larger than --mde) or the
    /// budget is spent.
    #[command(
        after_help = "Exit status: 0 the test ran (whatever its verdict); 1 an error (contracts that differ in more than one axis, a closed loop, blocks shorter than their E2E tail); 9 with --fail-on worse, B is worse on some metric; 128 + N a signal stopped it, every block kept."
    )]
    Ab(AbArgs),
    /// Show coordinated omission: open vs closed loop from 50% to 120% of capacity, on the
    /// simulator's discrete-event clock (seconds).
    Demo(DemoArgs),
    /// Serve the simulated inference server on loopback until interrupted.
    Sim(SimArgs),
    /// Join the bundles of one sharded run (`run --shard I/N`, one per client machine) into
    /// one bundle, its summary recomputed from every shard's raw records.
    #[command(
        after_help = "Refused (exit 1, naming the bundle) unless the bundles are every shard of one plan exactly once: the same contract but for load.shard, the same shard count and start instant."
    )]
    Merge(MergeArgs),
    /// Write a bundle's raw records as tables (requests, chunks) in CSV, Parquet or JSON
    /// lines, with the column meanings beside them (columns.md).
    Export(ExportArgs),
    /// Write another benchmark's command line as a goodput contract (`goodput import
    /// vllm-bench -- ARGS`): every flag mapped or its difference named in the contract.
    #[command(
        after_help = "Refused (exit 1, naming the flag) for a flag the tool's version does not have, a value out of its range, or another tool's command."
    )]
    Import(ImportArgs),
    /// Results over time: bundles kept as points of a series (same workload, load, SLO and
    /// measurement; the target may change) in a SQLite file or PostgreSQL, change points
    /// found, the newest point judged, the series drawn and exported.
    #[command(
        after_help = "Exit status: 0 done; 1 an error (a bundle that does not recompute, a damaged or newer store, an unreachable database: nothing stored is changed); 10 with --fail-on regression, the newest point of a series starts a change for the worse beyond its threshold."
    )]
    History(HistoryArgs),
}
/// Runs a parsed command line: the command, then its result through the seam.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let done = match cli.command {
        Command::Run(a) => command::run::run(a).await?,
        Command::Compare(a) => command::compare::compare(a)?,
        Command::Init(a) => command::init::init(a).await?,
        Command::Plan(a) => command::plan::plan(a)?,
        Command::Report(a) => command::report::report(a)?,
        Command::Sweep(a) => command::sweep::sweep(a).await?,
        Command::Tune(a) => command::tune::tune(a).await?,
        Command::Ab(a) => command::ab::ab(a).await?,
        Command::Demo(a) => command::demo::demo(a).await?,
        Command::Audit(a) => command::audit::audit(a)?,
        Command::Sim(a) => command::sim::sim(a).await?,
        Command::Merge(a) => command::merge::merge(a)?,
        Command::Export(a) => command::export::export(a)?,
        Command::Import(a) => command::import::import(a)?,
        Command::History(a) => command::history::history(a).await?,
    };
    done.finish()
}

impl Cli {
    /// The contract a `run` command line would run, its changes made and its files read as
    /// `run` reads them, without sending anything; `None` for any other command. The
    /// documents' tests hold every `goodput run` line they show to it.
    pub fn run_contract(&self) -> Option<anyhow::Result<crate::contract::Contract>> {
        match &self.command {
            Command::Run(a) => Some(a.contract()),
            _ => None,
        }
    }
}
