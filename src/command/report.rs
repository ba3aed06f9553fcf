//! `goodput report`: a bundle's summary recomputed from its raw records (or a repeat set's,
//! every run recomputed from its own; or a tune's answer rebuilt from its settings' bundles).

use std::path::PathBuf;

use anyhow::Context;

use super::run::RepeatsShown;
use super::{Done, FormatArgs, Shown, load_bundle};
use crate::contract;
use crate::report::Doc;

// The arguments of `goodput report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    bundle: PathBuf,
    /// `html`: the self-contained report with its figures, as the run wrote it.
    #[command(flatten)]
    format: FormatArgs,
    /// The whole report (see `run --verbose`).
    #[arg(long, short)]
    verbose: bool,
}

/// The bundle's summary, recomputed; a repeat set's aggregate when the bundle is one.
pub fn report(a: ReportArgs) -> anyhow::Result<Done> {
    if a.bundle.join("repeat.json").is_file() {
        return repeats(a);
    }
    if a.bundle.join("tune.json").is_file() {
        let result = crate::tune::load(&a.bundle)?;
        let shown = super::tune::TuneShown {
            result,
            bundle: a.bundle.clone(),
        };
        return Ok(Done::new(shown, a.format.get(), a.verbose));
    }
    let b = load_bundle(&a.bundle)?;
    Ok(Done::new(ReportShown(b), a.format.get(), a.verbose))
}

/// A repeat set: every run recomputed from its own records, then the aggregate.
fn repeats(a: ReportArgs) -> anyhow::Result<Done> {
    let ReportArgs {
        bundle,
        format,
        verbose,
    } = a;
    let c = contract::load(&bundle.join(crate::bundle::CONTRACT))?;
    let dirs = crate::bundle::repeat_runs(&bundle)
        .with_context(|| format!("reading {}", bundle.display()))?
        .unwrap_or_default();
    let runs = dirs
        .iter()
        .map(|d| load_bundle(d).map(|b| b.summary))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let refs: Vec<&crate::analyze::Summary> = runs.iter().collect();
    let repeat = crate::run::repeat_summary(&c, &refs);
    let shown = RepeatsShown {
        runs,
        repeat,
        bundle: None,
        run_dirs: dirs,
        page_refused: Some(format!(
            "--format html reports one run: give one of {}'s run-NN bundles",
            bundle.display()
        )),
    };
    Ok(Done::new(shown, format.get(), verbose))
}

/// A loaded bundle as `report` shows it: its recomputed summary, and a page drawn from its
/// records.
pub struct ReportShown(pub crate::bundle::Loaded);

impl Shown for ReportShown {
    fn title(&self) -> String {
        "goodput report".into()
    }
    fn document(&self, full: bool) -> Doc {
        crate::report::document_at(&self.0.summary, full)
    }
    fn json(&self) -> String {
        super::json(&self.0.summary)
    }
    fn page(&self) -> anyhow::Result<String> {
        let b = &self.0;
        let seconds = crate::analyze::timeseries(&b.records);
        Ok(crate::report::html::page(
            &b.contract,
            &b.inputs,
            &b.summary,
            &b.records,
            &seconds,
        ))
    }
}
