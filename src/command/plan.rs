//! `goodput plan`: a contract's plan as JSON lines, and what its sample can support.

use std::path::PathBuf;

use super::Done;
use crate::contract;

// The arguments of `goodput plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    contract: PathBuf,
    /// At most this many requests.
    #[arg(long, default_value_t = 1_000_000)]
    limit: u64,
}

/// The plan's requests, one JSON line each.
pub fn plan(a: PlanArgs) -> anyhow::Result<Done> {
    let PlanArgs { contract, limit } = a;
    let (c, inputs) = crate::workload::load(&contract)?;
    // What the plan's sample can support goes to stderr: stdout is the plan itself.
    if let Some(p) = sample_plan(&c, &inputs) {
        say_err!("note: {p}");
    }
    Ok(Done::text(
        crate::plan::Plan::new(&c, &inputs).to_jsonl(limit),
    ))
}

/// What a contract's steady sample can support, before its run (`analyze::claims::planning`):
/// the plan's steady requests, or an open loop's rate × duration.
pub(crate) fn sample_plan(
    c: &contract::Contract,
    inputs: &crate::workload::Inputs,
) -> Option<String> {
    let planned = crate::plan::Plan::new(c, inputs)
        .planned_by_phase()
        .get(&crate::plan::Phase::Steady)
        .copied()
        .or_else(|| {
            let d = c.load.duration()?;
            let rate = c.load.rate().filter(|_| c.workload.sessions.is_none())?;
            Some((rate * d.seconds()) as u64)
        });
    crate::analyze::claims::planning(c, planned)
}
