//! `goodput audit`: any result graded as comparable or directional, with what it lacks.

use std::path::PathBuf;

use super::{Done, FormatArgs, Shown};
use crate::report::Doc;

// The arguments of `goodput audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    path: PathBuf,
    #[command(flatten)]
    format: FormatArgs,
}

/// The result's grade.
pub fn audit(a: AuditArgs) -> anyhow::Result<Done> {
    let AuditArgs { path, format } = a;
    Ok(Done::new(
        AuditShown(crate::audit::audit(&path)?),
        format.get(),
        false,
    ))
}

/// An audit as the seam shows it.
pub struct AuditShown(pub crate::audit::Audit);

impl Shown for AuditShown {
    fn title(&self) -> String {
        "goodput audit".into()
    }
    fn document(&self, _full: bool) -> Doc {
        self.0.document()
    }
    fn json(&self) -> String {
        super::json(&self.0)
    }
}
