//! `goodput export`: a bundle's raw records as tables, with their columns' meanings.

use std::path::PathBuf;

use super::{Done, load_bundle};

// The arguments of `goodput export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    bundle: PathBuf,
    /// The tables' file format.
    #[arg(long, value_enum)]
    format: crate::export::ExportFormat,
    /// Directory for the tables (default: `export/` inside the bundle).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Writes the tables; the result says where each went.
pub fn export(a: ExportArgs) -> anyhow::Result<Done> {
    let b = load_bundle(&a.bundle)?;
    let dir = a.out.unwrap_or_else(|| a.bundle.join("export"));
    let e = crate::export::export(&b, a.format, &dir)?;
    // Freeing a million records one by one takes the better part of a second; the process
    // ends here and the system takes the memory back at once.
    std::mem::forget(b);
    Ok(Done::text(format!(
        "{} requests → {}\n{} chunks → {}\ncolumns: {}\n",
        e.rows.0,
        e.requests.display(),
        e.rows.1,
        e.chunks.display(),
        e.columns.display()
    )))
}
