//! `goodput tune`: one engine launch setting tried per value, a capacity search each.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use super::signals::{cancel_on_signals, exit_code};
use super::sweep::parse_span;
use super::{Done, OutputArgs, Overrides, Shown, read_contract};
use crate::report::Doc;

// The arguments of `goodput tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// A contract whose `[cold_start] launch` starts the engine, with `{port}` and the
    /// setting's `{NAME}` placeholder in it (and `{port}` in `target.url`).
    contract: PathBuf,
    /// NAME=V1,V2,… — the launch setting to try (e.g. `parallel=1,2,4`, filling `{parallel}`).
    #[arg(long, required = true)]
    setting: Vec<String>,
    /// Relative width at which each capacity search stops.
    #[arg(long, default_value_t = 0.05)]
    resolution: f64,
    /// Most runs each capacity search makes (at least 2).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u64).range(2..))]
    max_runs: u64,
    /// The longest each search may spend confirming an answer its small points only indicate
    /// (`0` never confirms).
    #[arg(long, default_value = "15m", value_parser = parse_span)]
    confirm_within: Duration,
    /// Most blocks of the paired A/B that decides the best two settings at the winner's
    /// capacity (both engines up at once); 0: no A/B.
    #[arg(long, default_value_t = 16)]
    decide_blocks: u64,
    /// The bundle of an interrupted tune of the same contract to continue: its finished
    /// settings are kept, the rest tried (a setting a signal cut short is tried again).
    #[arg(long, value_name = "TUNE_BUNDLE")]
    resume: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    /// Changes to the contract for every run (e.g. `--requests 200` for smaller points).
    #[command(flatten)]
    overrides: Overrides,
}

/// Each setting launched, searched and stopped in turn; a bundle for the tune, one per setting.
pub async fn tune(a: TuneArgs) -> anyhow::Result<Done> {
    let TuneArgs {
        contract: path,
        setting,
        resolution,
        max_runs,
        confirm_within,
        decide_blocks,
        resume,
        output,
        overrides,
    } = a;
    if decide_blocks != 0 && decide_blocks < 4 {
        bail!("--decide-blocks: give 4 or more (two pairs at least), or 0 for no A/B");
    }
    if !(resolution > 0.0 && resolution < 1.0) {
        bail!("--resolution must be a fraction in (0, 1)");
    }
    let setting = crate::sweep::Vary::parse_as("--setting", &setting)?;
    let src = read_contract(&path)?;
    let (src, _) = overrides.apply(&src, &path)?;
    let o = super::sweep::sweep_options(
        &output,
        cancel_on_signals("the setting in flight (its engine is stopped)"),
    );
    let search = crate::tune::Search {
        resolution,
        max_runs: max_runs as usize,
        confirm_within,
        decide_blocks: decide_blocks as usize,
    };
    let (bundle, r) =
        crate::tune::tune(&path, &src, &setting, search, &o, resume.as_deref()).await?;
    let status = Ok(exit_code(r.interrupted, super::signals::SelfStop::No));
    let shown = TuneShown {
        result: r,
        bundle: bundle.dir.clone(),
    };
    Ok(Done::new(shown, output.format.get(), output.verbose).with_status(status))
}

/// A tune as the seam shows it.
pub struct TuneShown {
    pub result: crate::tune::TuneResult,
    pub bundle: PathBuf,
}

impl Shown for TuneShown {
    fn title(&self) -> String {
        "goodput tune".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::tune::document(&self.result)
    }
    fn json(&self) -> String {
        super::json(&self.result)
    }
    fn terminal_after(&self, _verbose: bool) -> String {
        format!("\nTune bundle: {}\n", self.bundle.display())
    }
}
