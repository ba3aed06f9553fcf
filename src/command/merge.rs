//! `goodput merge`: the shards of one run joined into one bundle, its summary recomputed from
//! every shard's raw records.

use std::path::PathBuf;

use super::run::RunShown;
use super::{Done, FormatArgs};

// The arguments of `goodput merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' bundles, in any order, or directories holding them (every shard bundle
    /// in it of one run, or of the run --start-at names).
    #[arg(required = true)]
    bundles: Vec<PathBuf>,
    /// With a directory: merge the shards that started at this instant (RFC 3339).
    #[arg(long, value_name = "INSTANT")]
    start_at: Option<String>,
    /// Directory that receives the merged bundle (under the contract's name).
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT")]
    out: PathBuf,
    /// Merge a shard that holds no record (a client that sent nothing); refused otherwise.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    format: FormatArgs,
    /// The whole report (see `run --verbose`).
    #[arg(long, short)]
    verbose: bool,
}

/// The merged bundle's summary.
pub fn merge(a: MergeArgs) -> anyhow::Result<Done> {
    let argv: Vec<String> = std::env::args().collect();
    let bundles = crate::merge::shard_bundles(&a.bundles, a.start_at.as_deref())?;
    let m = crate::merge::merge(&bundles, &a.out, &argv, a.allow_empty)?;
    for w in &m.warnings {
        say_err!("warning: {w}");
    }
    let shown = RunShown {
        title: "goodput merge",
        summary: m.summary,
        bundle: m.bundle.dir.clone(),
    };
    Ok(Done::new(shown, a.format.get(), a.verbose))
}
