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
    /// Another tool's result beside a run (`compare THEIRS.json BUNDLE`): the relative
    /// difference within which goodput's figure, recomputed with their definition, agrees.
    #[arg(long, default_value_t = 0.2)]
    tolerance: f64,
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
        tolerance,
        format,
        allow_quality_change,
        labels,
    } = a;
    if bundles.first().is_some_and(|p| is_peer_result(p)) {
        if bundles.len() != 2 {
            bail!(
                "{} is another tool's result: compare puts it beside one goodput run (compare THEIRS.json BUNDLE)",
                bundles[0].display()
            );
        }
        if !(tolerance > 0.0 && tolerance.is_finite()) {
            bail!("--tolerance must be > 0 (a fraction: 0.2 is ±20%)");
        }
        let b = crate::peers::beside::beside(&bundles[0], &bundles[1], tolerance)?;
        return Ok(Done::new(BesideShown(b), format.get(), false));
    }
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

/// A file that is not a bundle's own (`summary.json`, `contract.toml`): another tool's result.
/// Anything but a directory counts, so that a pipe or a device is refused as what it is (by
/// the capped reader) rather than called "not a goodput bundle".
fn is_peer_result(p: &std::path::Path) -> bool {
    p.exists()
        && !p.is_dir()
        && !p
            .file_name()
            .is_some_and(|n| n == "summary.json" || n == "contract.toml" || n == "requests.jsonl")
}

/// Another tool's result beside a goodput run.
pub struct BesideShown(pub crate::peers::beside::Beside);

impl Shown for BesideShown {
    fn title(&self) -> String {
        "goodput compare: their result beside ours".into()
    }
    fn document(&self, _full: bool) -> Doc {
        self.0.document()
    }
    fn json(&self) -> String {
        super::json(&self.0)
    }
}
