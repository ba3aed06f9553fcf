//! `goodput import TOOL -- ARGS…`: another benchmark's command line as a goodput contract
//! (`crate::import`), written to a file or printed; what differs between the two tools is
//! said on stderr and in the contract's comments.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::Done;

/// The tools whose command lines goodput imports.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Tool {
    /// `vllm bench serve` (vLLM 0.32.0's flags).
    #[value(name = "vllm-bench")]
    VllmBench,
    /// `guidellm benchmark` (GuideLLM 0.6.1's flags).
    Guidellm,
    /// `aiperf profile` (AIPerf 0.13.0's flags).
    Aiperf,
}

// The arguments of `goodput import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Whose command line it is.
    tool: Tool,
    /// Write the contract to this file (else it is printed).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
    /// The command line, after `--` (with or without the tool's own name in front).
    #[arg(last = true, required = true, value_name = "ARGS")]
    args: Vec<String>,
}

/// Imports the command line; the breaks go to stderr as notes.
pub fn import(a: ImportArgs) -> anyhow::Result<Done> {
    let ImportArgs {
        tool,
        output,
        force,
        args,
    } = a;
    let imported = match tool {
        Tool::VllmBench => crate::import::vllm_bench::import(&args)?,
        Tool::Guidellm => crate::import::guidellm::import(&args)?,
        Tool::Aiperf => crate::import::aiperf::import(&args)?,
    };
    let notes: Vec<String> = imported
        .breaks
        .iter()
        .map(|b| format!("note: {b}"))
        .collect();
    let text = match &output {
        Some(path) => {
            if path.exists() && !force {
                bail!("{} exists; pass --force to overwrite it", path.display());
            }
            std::fs::write(path, &imported.contract)
                .with_context(|| format!("writing {}", path.display()))?;
            format!(
                "wrote {} ({} differences noted in it); run it with: goodput run {}\n",
                path.display(),
                imported.breaks.len(),
                path.display()
            )
        }
        None => imported.contract,
    };
    let mut done = Done::text(text);
    done.after = notes;
    Ok(done)
}
