//! `goodput init`: a commented example contract written to a file.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::{Done, Overrides};
use crate::contract;

// The arguments of `goodput init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    #[arg(default_value = "goodput.toml")]
    path: PathBuf,
    /// Overwrite an existing file.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    overrides: Overrides,
}

/// Writes the built-in contract, the command line's changes made, checked first.
pub fn init(a: InitArgs) -> anyhow::Result<Done> {
    let InitArgs {
        path,
        force,
        overrides,
    } = a;
    if path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", path.display());
    }
    let (text, _) = overrides.apply(contract::BUILTIN, &path)?;
    // Checked before it is written: a shorthand that makes the template invalid says so.
    contract::parse(&text, &path)?;
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok(Done::text(format!(
        "wrote {}; run it with: goodput run {}\n",
        path.display(),
        path.display()
    )))
}
