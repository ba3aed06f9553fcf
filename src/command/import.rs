//! `goodput import TOOL -- ARGS…`: another benchmark's command line as a goodput contract
//! (`crate::peers`), written to a file or printed; what differs between the two tools is
//! said on stderr and in the contract's comments.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::Done;
use crate::peers::Tool;

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
    /// The command's saved result (vLLM's `--save-result` JSON, GuideLLM's report, AIPerf's
    /// profile export): checked against the contract, and named in it for `goodput compare`.
    #[arg(long, value_name = "FILE")]
    result: Option<PathBuf>,
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
        result,
        args,
    } = a;
    let mut imported = tool.import(&args)?;
    let mut notes: Vec<String> = imported
        .breaks
        .iter()
        .map(|b| format!("note: {b}"))
        .collect();
    if let Some(r) = &result {
        notes.extend(their_result(tool, r, &mut imported)?);
    }
    let text = match &output {
        Some(path) => {
            if path.exists() && !force {
                bail!("{} exists; pass --force to overwrite it", path.display());
            }
            std::fs::write(path, &imported.contract)
                .with_context(|| format!("writing {}", path.display()))?;
            let shown = path.display().to_string();
            let file = shlex::try_quote(&shown).map_or(shown.clone(), |q| q.into_owned());
            let next = match &imported.next {
                Some(n) => n.replacen("FILE", &file, 1),
                None => format!("goodput run {file}"),
            };
            format!(
                "wrote {} ({} differences noted in it); run it with: {next}\n",
                path.display(),
                imported.breaks.len(),
            )
        }
        None => {
            if let Some(n) = &imported.next {
                notes.push(format!(
                    "note: run it with: {}",
                    n.replacen("FILE", "CONTRACT", 1)
                ));
            }
            imported.contract
        }
    };
    let mut done = Done::text(text);
    done.after = notes;
    Ok(done)
}

/// `--result FILE`: the saved result must be the tool's own; the settings it records that the
/// contract does not share are said, and the contract names the file for `goodput compare`.
fn their_result(
    tool: Tool,
    path: &std::path::Path,
    imported: &mut crate::peers::Imported,
) -> anyhow::Result<Vec<String>> {
    let contract =
        crate::contract::parse(&imported.contract, std::path::Path::new("imported.toml"))?;
    let (format, differs) = crate::peers::beside::check_result(path, &contract)?;
    let expected = tool.result_name();
    if !format.starts_with(expected) {
        bail!(
            "{}: a {format}, not a result of the {expected} command imported",
            path.display()
        );
    }
    // A file's name and what the file says go into comments one line each (`text::one_line`):
    // a newline in either would make the rest live TOML.
    let path_text = path.display().to_string();
    let (shown, _) = crate::text::one_line(&path_text);
    let (format_line, _) = crate::text::one_line(&format);
    let mut comment = format!(
        "#\n# Their result: {shown} ({format_line}). After `goodput run`, put the two side by side:\n#   goodput compare {shown} BUNDLE\n"
    );
    let mut notes = vec![format!(
        "note: their result {shown} ({format}): after `goodput run`, `goodput compare {shown} BUNDLE` puts each of its figures beside ours"
    )];
    for d in &differs {
        comment.push_str(&format!(
            "#   their result differs from this command: {}\n",
            crate::text::one_line(d).0
        ));
        notes.push(format!(
            "warning: {shown} was not run with this command: {d}"
        ));
    }
    // After the header's comment block, before the first value.
    let at = imported.contract.find("\n\n").map_or(0, |i| i + 1);
    imported.contract.insert_str(at, &comment);
    Ok(notes)
}
