//! What grading a result found: the [`Audit`] a bundle's grade and every peer reader
//! (`crate::peers`) fill, and its document. Below the peer readers, so they and the bundle's
//! grade share one type without either importing the other.

use std::path::Path;

use serde::Serialize;

use crate::analyze::GradeVerdict;

#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// What was read.
    pub path: String,
    /// `goodput bundle`, `goodput repeat set`, `vLLM bench serve result`, `GuideLLM report`.
    pub format: String,
    pub verdict: GradeVerdict,
    /// Facts absent or inconsistent: each one alone makes the result directional.
    pub missing: Vec<String>,
    /// What the result, even complete, cannot support.
    pub limits: Vec<String>,
    /// Facts an efficiency claim (energy per token, cost per token, per-accelerator
    /// throughput) would need and the result lacks. They leave the speed figures' grade alone.
    pub efficiency_missing: Vec<String>,
    /// What the result states for each contract axis, in words.
    pub axes: Vec<(String, String)>,
}

impl Audit {
    pub(crate) fn new(path: &Path, format: &str) -> Audit {
        Audit {
            path: path.display().to_string(),
            format: format.to_owned(),
            verdict: GradeVerdict::Directional,
            missing: Vec::new(),
            limits: Vec::new(),
            efficiency_missing: Vec::new(),
            axes: Vec::new(),
        }
    }

    pub(crate) fn axis(&mut self, name: &str, text: impl Into<String>) {
        self.axes.push((name.to_owned(), text.into()));
    }

    pub(crate) fn done(mut self) -> Audit {
        self.verdict = GradeVerdict::of(&self.missing);
        self
    }

    pub fn document(&self) -> crate::report::Doc {
        let mut d = crate::report::Doc::default();
        d.h(format!("Audit · {}", self.path));
        d.line(format!(
            "{}: {}",
            self.format,
            self.verdict.as_str().to_uppercase()
        ));
        d.table(
            &["axis", "what the result states"],
            self.axes
                .iter()
                .map(|(a, t)| vec![a.clone(), t.clone()])
                .collect(),
        );
        if self.missing.is_empty() {
            d.line("Nothing missing: every fact the result depends on is stated.");
        }
        for m in &self.missing {
            d.warn(format!("- missing: {m}"));
        }
        for l in &self.limits {
            d.line(format!("- limit: {l}"));
        }
        if !self.efficiency_missing.is_empty() {
            d.line("For efficiency claims (energy, cost, per accelerator), the result lacks:");
            for m in &self.efficiency_missing {
                d.warn(format!("- missing for efficiency: {m}"));
            }
        }
        d
    }

    /// What another benchmark's result lacks for efficiency claims: it carries no energy
    /// measurement and no price.
    pub(crate) fn peer_efficiency(&mut self) {
        self.efficiency_missing.extend([
            "no energy measurement: the result carries no accelerator energy or power".to_owned(),
            "no price: the result states no cost of the deployment".to_owned(),
        ]);
    }
}
