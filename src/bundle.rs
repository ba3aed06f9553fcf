//! The bundle: the directory a run writes, and the only place (besides the record writer's
//! append-only `requests.jsonl`) that writes files.
//!
//! ```text
//! runs/<contract-name>/<UTC timestamp>-<short fingerprint>/
//!   contract.toml  command.json  environment.json  requests.jsonl  summary.json  report.md
//!   timeseries.json  [metrics.jsonl  cold_start.json  server.stdout.log  server.stderr.log]
//! ```

use std::io;
use std::path::{Path, PathBuf};

use crate::analyze::Summary;
use crate::contract::Contract;

pub const REQUESTS: &str = "requests.jsonl";
pub const CONTRACT: &str = "contract.toml";
pub const SUMMARY: &str = "summary.json";
pub const COLD_START: &str = "cold_start.json";
pub const PREDICTION: &str = "prediction.json";
pub const ENVIRONMENT: &str = "environment.json";
/// The target's `/metrics` scrapes, one JSON line per scrape, appended as taken.
pub const METRICS: &str = "metrics.jsonl";
/// `[quality] mode = "reference"`: the reference set, copied in.
pub const REFERENCES: &str = "references.jsonl";

/// The run bundles (`run-NN`) of a repeat set, in order; `None` when `dir` is not one (it has
/// no `repeat.json`).
pub fn repeat_runs(dir: &Path) -> io::Result<Option<Vec<PathBuf>>> {
    if !dir.join("repeat.json").is_file() {
        return Ok(None);
    }
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .collect();
    runs.sort();
    Ok(Some(runs))
}

#[derive(Debug, Clone)]
pub struct Bundle {
    pub dir: PathBuf,
}

impl Bundle {
    /// Creates a fresh bundle directory under `root`.
    pub fn create(root: &Path, c: &Contract) -> io::Result<Bundle> {
        let ts = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string();
        let base = root.join(&c.name);
        let stem = format!("{ts}-{}", c.fingerprints().short());
        let mut dir = base.join(&stem);
        let mut n = 2;
        while dir.exists() {
            dir = base.join(format!("{stem}-{n}"));
            n += 1;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(Bundle { dir })
    }

    /// Creates exactly `dir` (a repeat's `run-NN`); it must not exist yet.
    pub fn create_at(dir: &Path) -> io::Result<Bundle> {
        std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
        std::fs::create_dir(dir)?;
        Ok(Bundle {
            dir: dir.to_owned(),
        })
    }

    /// Opens an existing bundle (for `report`).
    pub fn open(dir: &Path) -> io::Result<Bundle> {
        if !dir.join(REQUESTS).is_file() || !dir.join(CONTRACT).is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a goodput bundle (needs {CONTRACT} and {REQUESTS})",
                    dir.display()
                ),
            ));
        }
        Ok(Bundle {
            dir: dir.to_owned(),
        })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn write(&self, name: &str, contents: &str) -> io::Result<()> {
        std::fs::write(self.path(name), contents)
    }

    pub fn write_json(&self, name: &str, v: &impl serde::Serialize) -> io::Result<()> {
        let text = serde_json::to_string_pretty(v).map_err(io::Error::other)?;
        self.write(name, &(text + "\n"))
    }

    /// Writes the summary and its Markdown report.
    pub fn write_summary(&self, s: &Summary) -> io::Result<()> {
        self.write_json(SUMMARY, s)?;
        self.write("report.md", &crate::report::document(s).markdown())
    }
}
