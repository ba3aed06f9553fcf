//! `goodput compare`: results against the first, refused when their contracts differ in more
//! than the variable under test.

use std::path::PathBuf;

use anyhow::bail;

use super::{Done, FormatArgs, Shown};
use crate::report::Doc;

// The arguments of `goodput compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline, then one or more results to compare with it.
    #[arg(required = true, num_args = 2..)]
    bundles: Vec<PathBuf>,
    /// Relative change below which a difference is not called better or worse.
    #[arg(long, default_value_t = 0.05)]
    noise: f64,
    #[command(flatten)]
    format: FormatArgs,
    /// Exit 0 even when quality was not held constant (the report still says so).
    #[arg(long)]
    allow_quality_change: bool,
    /// What to call each result, in the order given (overrides `[meta] label`); as many as
    /// results, or fewer (the rest keep theirs).
    #[arg(long = "label", value_name = "NAME")]
    labels: Vec<String>,
}

/// The comparisons; the command fails after showing them when one was refused or did not
/// hold quality constant (unless allowed).
pub fn compare(a: CompareArgs) -> anyhow::Result<Done> {
    let CompareArgs {
        bundles,
        noise,
        format,
        allow_quality_change,
        labels,
    } = a;
    if labels.len() > bundles.len() {
        bail!(
            "--label given {} times for {} results",
            labels.len(),
            bundles.len()
        );
    }
    let mut sides = bundles
        .iter()
        .map(|b| crate::compare::load_side(b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for w in sides.iter().flat_map(|s| &s.warnings) {
        say_err!("warning: {w}");
    }
    for (s, l) in sides.iter_mut().zip(labels) {
        s.label = Some(l);
    }
    let comparisons: Vec<_> = sides[1..]
        .iter()
        .map(|o| crate::compare::compare(&sides[0], o, noise))
        .collect();
    let status = verdict(&comparisons, allow_quality_change);
    Ok(Done::new(CompareShown { sides, comparisons }, format.get(), false).with_status(status))
}

/// The comparisons' status: refused, quality not held (and not allowed), or success.
fn verdict(
    comparisons: &[crate::compare::Comparison],
    allow_quality_change: bool,
) -> anyhow::Result<std::process::ExitCode> {
    let refused = comparisons.iter().filter(|c| !c.refused.is_empty()).count();
    if refused > 0 {
        bail!(
            "{refused} of {} comparisons refused: their contracts differ in more than the variable under test",
            comparisons.len()
        );
    }
    let unheld = comparisons.iter().filter(|c| !c.quality.held()).count();
    if unheld > 0 && !allow_quality_change {
        bail!(
            "{unheld} of {} comparisons did not hold quality constant (shown above); pass --allow-quality-change to accept that",
            comparisons.len()
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Comparisons as the seam shows them; the page draws each side.
pub struct CompareShown {
    pub sides: Vec<crate::compare::Side>,
    pub comparisons: Vec<crate::compare::Comparison>,
}

impl Shown for CompareShown {
    fn title(&self) -> String {
        "goodput compare".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::compare::document(&self.comparisons)
    }
    fn json(&self) -> String {
        super::json(&self.comparisons)
    }
    fn page(&self) -> anyhow::Result<String> {
        Ok(crate::compare::html_page(&self.sides, &self.comparisons))
    }
}
