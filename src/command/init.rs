//! `goodput init`: a commented example contract written to a file; pointed at a server
//! (`--url`), sized to what a few bounded probe requests measure of it (`run::size`).

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
    /// With --url: write the template as it is, without probing the server (its rate, counts,
    /// lengths and SLO are then the template's, sized for the built-in simulator).
    #[arg(long)]
    no_probe: bool,
    #[command(flatten)]
    overrides: Overrides,
}

/// Writes the built-in contract, the command line's changes made, checked first; pointed at a
/// server, sized to it first.
pub async fn init(a: InitArgs) -> anyhow::Result<Done> {
    let InitArgs {
        path,
        force,
        no_probe,
        overrides,
    } = a;
    if path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", path.display());
    }
    let (mut text, _) = overrides.apply(contract::BUILTIN, &path)?;
    // Checked before it is written: a shorthand that makes the template invalid says so.
    let (c, inputs) = crate::workload::parse(&text, &path)?;
    let mut said = String::new();
    if c.target.url.is_some() && !no_probe {
        let say = |line: &str| say_err!("{line}");
        let measured = crate::run::size::probe(&c, &inputs, &say).await?;
        let shape = crate::run::size::Shape::of(&c, &inputs);
        let fixed: Vec<&str> = [
            ("rate", &overrides.rate),
            ("concurrency", &overrides.concurrency),
            ("requests", &overrides.requests),
            ("duration", &overrides.duration),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k)
        .collect();
        let sizing = crate::run::size::size(&c, shape, &measured, &fixed);
        let edited = contract::edit::apply(&text, &sizing.edits)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        text = format!("{}\n{edited}", sizing.comment.join("\n"));
        crate::workload::parse(&text, &path).context("the sized contract")?;
        said = format!("{}\n", sizing.comment.join("\n"));
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok(Done::text(format!(
        "{said}wrote {}; run it with: goodput run {}\n",
        path.display(),
        path.display()
    )))
}
