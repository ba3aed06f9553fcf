//! The bundle: the directory a run writes. Its documents (the contract, `command.json`,
//! `environment.json`, the summary and reports, `timeseries.json`, `cold_start.json`) are
//! written here, through [`Bundle`]'s methods, which `run`, `merge` and `sweep` call. The files
//! that grow while a run goes are written where they are produced: `requests.jsonl` by the
//! record writer (`record::writer`), `metrics.jsonl` and `telemetry.jsonl` by the scraper
//! (`env::prom`), a launched server's logs by `coldstart`.
//!
//! ```text
//! runs/<contract-name>/<UTC timestamp>-<short fingerprint>/
//!   contract.toml  command.json  environment.json  requests.jsonl  summary.json  report.md
//!   report.html  timeseries.json  [metrics.jsonl  telemetry.jsonl  cold_start.json
//!   prediction.json  server.stdout.log  server.stderr.log]
//! ```

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

mod files;

pub use files::{
    COMMAND, CommandFile, EnvironmentFile, Live, ServerMetrics, ShardEnvironment, Telemetry,
};

use crate::analyze::{Context, Summary, summarize};
use crate::contract::Contract;
use crate::env::facts::Facts;
use crate::record::Record;
use crate::workload::Inputs;

pub const REQUESTS: &str = "requests.jsonl";
pub const CONTRACT: &str = "contract.toml";
pub const SUMMARY: &str = "summary.json";
pub const COLD_START: &str = "cold_start.json";
pub const PREDICTION: &str = "prediction.json";
pub const ENVIRONMENT: &str = "environment.json";
/// The target's `/metrics` scrapes, one JSON line per scrape, appended as taken.
pub const METRICS: &str = "metrics.jsonl";
/// Accelerator telemetry scrapes (`[target.telemetry]`), as `METRICS` keeps the target's.
pub const TELEMETRY: &str = "telemetry.jsonl";
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
        std::fs::create_dir_all(&dir).map_err(crate::text::io_at(&dir))?;
        Ok(Bundle { dir })
    }

    /// Creates exactly `dir` (a repeat's `run-NN`); it must not exist yet.
    pub fn create_at(dir: &Path) -> io::Result<Bundle> {
        let parent = dir.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(crate::text::io_at(parent))?;
        std::fs::create_dir(dir).map_err(crate::text::io_at(dir))?;
        Ok(Bundle {
            dir: dir.to_owned(),
        })
    }

    /// Opens an existing bundle (for `report`).
    pub fn open(dir: &Path) -> io::Result<Bundle> {
        if dir.exists() && !dir.is_dir() {
            let why = match crate::text::regular_file(dir) {
                Ok(_) => "a file".to_owned(),
                Err(e) => e.to_string().replace(", not a file", ""),
            };
            return Err(io::Error::other(format!(
                "{}: {why}, not a goodput bundle (a directory holding {CONTRACT} and {REQUESTS})",
                dir.display()
            )));
        }
        for name in [REQUESTS, CONTRACT] {
            let path = dir.join(name);
            if path.exists() && !path.is_file() {
                let what = if path.is_dir() {
                    "a directory"
                } else {
                    "a device"
                };
                return Err(io::Error::other(format!(
                    "{}: {what}, not a file",
                    path.display()
                )));
            }
        }
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

    /// Writes a file of the bundle, every registered secret redacted ([`crate::secrets`]).
    pub fn write(&self, name: &str, contents: &str) -> io::Result<()> {
        let path = self.path(name);
        std::fs::write(&path, crate::secrets::redact(contents).as_bytes())
            .map_err(crate::text::io_at(&path))
    }

    pub fn write_json(&self, name: &str, v: &impl serde::Serialize) -> io::Result<()> {
        let text = serde_json::to_string_pretty(v).map_err(io::Error::other)?;
        self.write(name, &(text + "\n"))
    }

    /// Replaces `requests.jsonl` with `records` (their output recounted after the run): written
    /// beside it and renamed over it, so a crash leaves the file the run wrote.
    pub fn rewrite_records(&self, records: &[crate::record::Record]) -> io::Result<()> {
        use std::io::Write;
        let tmp = self.path(&format!("{REQUESTS}.tmp"));
        let write = || -> io::Result<()> {
            let mut out = io::BufWriter::new(std::fs::File::create(&tmp)?);
            for r in records {
                let line = serde_json::to_string(r).map_err(io::Error::other)?;
                out.write_all(crate::secrets::redact(&line).as_bytes())?;
                out.write_all(b"\n")?;
            }
            out.into_inner().map_err(io::Error::other)?.sync_all()
        };
        write().map_err(crate::text::io_at(&tmp))?;
        std::fs::rename(&tmp, self.path(REQUESTS)).map_err(crate::text::io_at(&self.path(REQUESTS)))
    }

    /// A run's results from its records: the summary (its prediction checked), written with
    /// its reports, the per-second series and the HTML page.
    pub fn write_results(
        &self,
        contract: &Contract,
        context: &Context,
        records: &[Record],
        prediction: Option<(crate::contract::prediction::Prediction, String)>,
    ) -> anyhow::Result<Summary> {
        let mut summary = summarize(contract, records, context);
        summary.predictions =
            prediction.map(|(p, _)| crate::analyze::predict::check(&p, &summary, true));
        let inputs = context.workload.cloned().unwrap_or_default();
        self.write_documents(contract, &inputs, &summary, records)?;
        Ok(summary)
    }

    /// Writes a summary with its reports, the per-second series and the HTML page.
    pub fn write_documents(
        &self,
        contract: &Contract,
        inputs: &Inputs,
        summary: &Summary,
        records: &[Record],
    ) -> anyhow::Result<()> {
        self.write_summary(summary)?;
        let seconds = crate::analyze::timeseries(records);
        self.write_json("timeseries.json", &seconds)?;
        self.write(
            "report.html",
            &crate::report::html::page(contract, inputs, summary, records, &seconds),
        )?;
        Ok(())
    }

    /// Writes the summary and its Markdown report.
    pub fn write_summary(&self, s: &Summary) -> io::Result<()> {
        self.write_json(SUMMARY, s)?;
        self.write("report.md", &crate::report::document(s).markdown())
    }
}

/// A bundle read once: everything `report`, `compare` and `audit` need, with the summary
/// recomputed from the raw records (never read from `summary.json`).
#[derive(Debug)]
pub struct Loaded {
    pub bundle: Bundle,
    pub contract: Contract,
    /// The files the contract names, as far as they are still there (a bundle keeps its
    /// reference set; a dataset or tokenizer named by path may be gone: `inputs.missing`).
    pub inputs: Inputs,
    pub records: Vec<Record>,
    /// `command.json` (empty when absent).
    pub command: CommandFile,
    pub summary: Summary,
    /// What reading it noticed that the reader should see (a record cut short by a kill).
    pub warnings: Vec<String>,
}

impl Bundle {
    /// Reads a bundle and recomputes its summary from `requests.jsonl` and `contract.toml`
    /// (and what else it keeps: cold-start timeline, environment, `/metrics` scrapes,
    /// prediction).
    pub fn load(dir: &Path) -> anyhow::Result<Loaded> {
        let bundle = Bundle::open(dir)?;
        let (contract, inputs) = crate::workload::load(&bundle.path(CONTRACT))?;
        let (mut records, warning) =
            crate::record::read_jsonl_noted(&bundle.path(REQUESTS)).map_err(anyhow::Error::msg)?;
        let command: CommandFile = read_json(&bundle.path(COMMAND))?.unwrap_or_default();
        let mut warnings: Vec<String> = warning.into_iter().collect();
        // Records a full disk kept elsewhere (`command.json` `lost_records.kept_at`): they are
        // the run's as much as the file's are.
        if let Some(at) = command
            .lost_records
            .as_ref()
            .and_then(|l| l.kept_at.as_ref())
        {
            match crate::record::read_jsonl_noted(at) {
                Ok((more, _)) => records.extend(more),
                Err(e) => warnings.push(format!(
                    "the records a failed write kept in {} cannot be read: {e}",
                    at.display()
                )),
            }
        }
        let summary = bundle.summarize(&contract, &inputs, &records, &command)?;
        Ok(Loaded {
            bundle,
            contract,
            inputs,
            records,
            command,
            summary,
            warnings,
        })
    }

    fn summarize(
        &self,
        contract: &Contract,
        inputs: &Inputs,
        records: &[Record],
        command: &CommandFile,
    ) -> anyhow::Result<Summary> {
        let timeline = read_json::<crate::analyze::Timeline>(&self.path(COLD_START))?;
        let environment: EnvironmentFile = read_json(&self.path(ENVIRONMENT))?.unwrap_or_default();
        // Facts are re-derived, not trusted: the probes' verbatim answers against the
        // contract's declarations as they stand now.
        let facts = Some(Facts::resolve(
            &contract.target.declared,
            &environment.probed.probes,
        ));
        let scrapes =
            crate::env::prom::read_present(&self.path(METRICS)).map_err(anyhow::Error::msg)?;
        let telemetry =
            crate::env::prom::read_present(&self.path(TELEMETRY)).map_err(anyhow::Error::msg)?;
        let stopped = command.stopped();
        let spans =
            crate::otlp::read(&self.path(crate::otlp::SPANS)).map_err(anyhow::Error::msg)?;
        let context = Context {
            workload: Some(inputs),
            interrupted: command.interrupted(),
            stopped: stopped.as_deref(),
            decided: command.decided.as_deref(),
            load_end: command.load_end.as_ref(),
            lost: command.lost_records.as_ref(),
            timeline: timeline.as_ref(),
            facts: facts.as_ref(),
            scrapes: &scrapes,
            telemetry: &telemetry,
            telemetry_pages: environment.telemetry_pages(),
            // A run merged from shards: what it keeps of each client.
            shards: &environment.shards,
            // A live demo: what each segment of its load was.
            segments: environment.segments(),
            spans: &spans,
            traces: environment.traces.as_ref(),
        };
        let mut summary = summarize(contract, records, &context);
        if let Ok(bytes) = crate::text::read_capped(&self.path(PREDICTION), MAX_BUNDLE_JSON_BYTES) {
            let p: crate::contract::prediction::Prediction = serde_json::from_slice(&bytes)
                .with_context(|| format!("reading {}", self.path(PREDICTION).display()))?;
            let verified = command.prediction_sha256.as_deref()
                == Some(crate::contract::prediction::hash(&bytes).as_str());
            summary.predictions = Some(crate::analyze::predict::check(&p, &summary, verified));
        }
        Ok(summary)
    }
}

/// The largest JSON document of a bundle read whole (`summary.json`, `environment.json`,
/// `command.json`, `cold_start.json`): a summary of a million requests is well under a MiB.
pub const MAX_BUNDLE_JSON_BYTES: u64 = 64 << 20;

/// A bundle's JSON document, as `T` (a typed file, or `serde_json::Value`): `None` when the
/// file is absent (a run killed early wrote fewer), an error naming the file, line and column
/// when it cannot be read (a device, past the limit, not JSON, a key of the wrong type) — never
/// taken as empty.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    if !path.exists() && path.symlink_metadata().is_err() {
        return Ok(None);
    }
    let text = crate::text::read_capped_string(path, MAX_BUNDLE_JSON_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de)
        .map(Some)
        .map_err(|e| {
            let key = e.path().to_string();
            let e = e.inner();
            if e.is_syntax() || e.is_eof() {
                anyhow::anyhow!("reading {}: not JSON ({e})", path.display())
            } else {
                anyhow::anyhow!(
                    "reading {}: key `{key}` is not as goodput writes it ({e})",
                    path.display()
                )
            }
        })
}

/// Where `summary.json` (as the run wrote it) disagrees with the summary recomputed from the
/// raw records (`now`, as JSON): its fingerprints (unless `older`, a summary of an earlier
/// schema whose fingerprints follow another definition), steady request count, TTFT p99 and
/// goodput. Empty when they agree.
pub fn disagreements(
    kept: &serde_json::Value,
    now: &serde_json::Value,
    older: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (what, pointer) in [
        ("fingerprints", "/fingerprints"),
        ("steady request count", "/steady/requests"),
        ("steady TTFT p99", "/steady/ttft_ms/p99"),
        ("goodput", "/steady/slo/goodput_rps"),
    ] {
        if older && what == "fingerprints" {
            continue;
        }
        let (k, n) = (kept.pointer(pointer), now.pointer(pointer));
        if !same(k, n) {
            out.push(format!(
                "inconsistent: summary.json's {what} ({}) differs from a recomputation from {REQUESTS} and {CONTRACT} ({})",
                k.map_or("absent".into(), serde_json::Value::to_string),
                n.map_or("absent".into(), serde_json::Value::to_string)
            ));
        }
    }
    // Every other figure of the steady phase too (an edited median or throughput): field by
    // field where the summary's schema is this build's.
    if out.is_empty() && !older {
        let mut at = Vec::new();
        differing(
            kept.pointer("/steady"),
            now.pointer("/steady"),
            "steady",
            &mut at,
        );
        if let Some(first) = at.first() {
            out.push(format!(
                "inconsistent: summary.json's {first}{} differs from a recomputation from {REQUESTS} and {CONTRACT}",
                match at.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            ));
        }
    }
    out
}

/// The dotted paths at which two JSON trees differ (numbers within [`same`]'s tolerance).
fn differing(
    a: Option<&serde_json::Value>,
    b: Option<&serde_json::Value>,
    at: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                differing(x.get(k), y.get(k), &format!("{at}.{k}"), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differing(Some(p), Some(q), &format!("{at}[{i}]"), out);
            }
        }
        (a, b) if !same(a, b) => out.push(at.to_owned()),
        _ => {}
    }
}

/// Two JSON values alike, numbers within a relative 1e-9 (a float written and read back).
fn same(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9 * x.abs().max(1.0)
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #73: a typed bundle file with a value of the wrong type is an error naming the file,
    /// the key, the line and the column, never an empty value.
    #[test]
    fn a_wrong_value_names_its_file_key_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COMMAND);
        std::fs::write(&path, "{\n  \"argv\": [],\n  \"started_utc\": 12\n}\n").unwrap();
        let e = read_json::<CommandFile>(&path).unwrap_err().to_string();
        for want in ["command.json", "`started_utc`", "line 3"] {
            assert!(e.contains(want), "{want}: {e}");
        }
        std::fs::write(&path, "{ garbage").unwrap();
        let e = read_json::<CommandFile>(&path).unwrap_err().to_string();
        assert!(e.contains("command.json: not JSON"), "{e}");
    }

    /// Issue #46: an OS error names where it happened ("File exists" alone does not).
    #[test]
    fn an_io_error_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run-01");
        Bundle::create_at(&run).unwrap();
        let e = Bundle::create_at(&run).unwrap_err().to_string();
        assert!(e.contains("run-01") && e.contains("exists"), "{e}");
        let b = Bundle { dir: run.clone() };
        std::fs::remove_dir(&run).unwrap();
        let e = b.write("summary.json", "{}").unwrap_err().to_string();
        assert!(e.contains("summary.json"), "{e}");
    }
}
