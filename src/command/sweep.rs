//! `goodput sweep`: one contract field varied, all else equal; or the capacity search.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use super::signals::{cancel_on_signals, exit_code};
use super::{Done, OutputArgs, Overrides, Shown, read_contract};
use crate::report::Doc;

/// A span on the command line: a number with a unit (`90s`, `15m`, `2h`), or `0`.
pub(crate) fn parse_span(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let secs = crate::contract::units::parse_seconds(s)?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("`{s}`: give a span of 0 or more, such as 15m"));
    }
    Ok(Duration::from_secs_f64(secs))
}

// The arguments of `goodput sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    contract: PathBuf,
    /// KEY=V1,V2,… — the one contract field to vary (given twice: refused).
    #[arg(long, required_unless_present = "capacity")]
    vary: Vec<String>,
    /// Instead of a list: find the highest open-loop load.rate whose SLO attainment meets
    /// the target (bracketing, then bisection).
    #[arg(long, conflicts_with = "vary")]
    capacity: bool,
    /// Relative width at which the capacity search stops.
    #[arg(long, default_value_t = 0.05)]
    resolution: f64,
    /// Most runs the capacity search makes (at least 2: one passing and one failing rate).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u64).range(2..))]
    max_runs: u64,
    /// The longest a capacity search may spend confirming an answer its small points only
    /// indicate: one run at the passing rate with the requests its SLO claim needs, made when
    /// it fits (e.g. `30m`, `2h`; `0` never confirms).
    #[arg(long, default_value = "15m", value_parser = parse_span)]
    confirm_within: Duration,
    #[command(flatten)]
    output: OutputArgs,
    /// Changes to the contract for every point (e.g. `--requests 200` for smaller points).
    #[command(flatten)]
    overrides: Overrides,
}

/// The sweep's points (or the capacity search's), each a run with its bundle.
pub async fn sweep(a: SweepArgs) -> anyhow::Result<Done> {
    let SweepArgs {
        contract: path,
        vary,
        capacity,
        resolution,
        max_runs,
        confirm_within,
        output,
        overrides,
    } = a;
    let src = read_contract(&path)?;
    let (src, _) = overrides.apply(&src, &path)?;
    let o = sweep_options(&output, cancel_on_signals("the point in flight"));
    let (bundle, r) = if capacity {
        if !(resolution > 0.0 && resolution < 1.0) {
            bail!("--resolution must be a fraction in (0, 1)");
        }
        crate::sweep::capacity(
            &path,
            &src,
            resolution,
            max_runs as usize,
            confirm_within,
            &o,
        )
        .await?
    } else {
        let vary = crate::sweep::Vary::parse(&vary)?;
        crate::sweep::sweep(&path, &src, &vary, &o).await?
    };
    let status = Ok(exit_code(r.interrupted, super::signals::SelfStop::No));
    let shown = SweepShown {
        result: r,
        bundle: bundle.dir.clone(),
    };
    Ok(Done::new(shown, output.format.get(), output.verbose).with_status(status))
}

/// Where and how a sweep's (or a tune's) runs go, from the output arguments; `cancel` ends it.
pub(crate) fn sweep_options(
    output: &OutputArgs,
    cancel: tokio_util::sync::CancellationToken,
) -> crate::sweep::SweepOptions {
    let opts = output.run_options();
    crate::sweep::SweepOptions {
        out_root: opts.out_root,
        watch: opts.watch,
        argv: opts.argv,
        cancel,
        signal: opts.signal,
        wake_latency_hold: opts.wake_latency_hold,
    }
}

/// A sweep as the seam shows it: its table, a page of curves, and where its bundle is.
pub struct SweepShown {
    pub result: crate::sweep::SweepResult,
    pub bundle: PathBuf,
}

impl Shown for SweepShown {
    fn title(&self) -> String {
        "goodput sweep".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::sweep::document(&self.result)
    }
    fn json(&self) -> String {
        super::json(&self.result)
    }
    fn page(&self) -> anyhow::Result<String> {
        Ok(crate::sweep::html_page(&self.result))
    }
    fn terminal_after(&self, _verbose: bool) -> String {
        format!("\nSweep bundle: {}\n", self.bundle.display())
    }
}
