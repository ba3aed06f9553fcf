//! Other benchmark tools, one module each: what goodput knows of a tool lives in its module —
//! its command line read as a goodput contract (`goodput import`), its saved result read and
//! graded (`goodput audit`) with its own definition of each figure (which event starts TTFT,
//! which make an ITL gap), and so its figures put beside a run (`goodput compare THEIRS
//! BUNDLE`).
//!
//! - `vllm_bench` — `vllm bench serve` (vLLM 0.32.0): command line and `--save-result` JSON.
//! - `guidellm` — `guidellm benchmark` (GuideLLM 0.6.1): command line and its report.
//! - `aiperf` — `aiperf profile` (AIPerf 0.13.0): command line and its profile export.
//! - `sglang` — SGLang's `bench_serving` results (JSON Lines); no command-line import.
//! - `inference_perf` — inference-perf's lifecycle reports; no command-line import.
//!
//! What the tools share: `command_line` (a contract drafted flag by flag, the breaks it notes)
//! with `flags` (a command line read against a tool's flag table); `result` (the
//! [`PeerFormat`] seam every result reader implements, and [`PEERS`], the list tried in order);
//! `statement` (a result's figures in goodput's terms) and `beside` (those figures held
//! against a goodput run). Adding a tool: one module here and one [`Tool`] variant (with a
//! command line) or one line in [`PEERS`] (a result format).

pub mod aiperf;
pub mod beside;
mod command_line;
mod flags;
pub mod guidellm;
pub mod inference_perf;
pub mod result;
pub mod sglang;
pub mod statement;
pub mod vllm_bench;

pub use command_line::{ImportError, Imported, check_imported, keys_of};
pub use result::PeerFormat;

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use crate::graded::Audit;

/// The tools whose command lines goodput imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tool {
    /// `vllm bench serve` (vLLM 0.32.0's flags).
    #[value(name = "vllm-bench")]
    VllmBench,
    /// `guidellm benchmark` (GuideLLM 0.6.1's flags).
    Guidellm,
    /// `aiperf profile` (AIPerf 0.13.0's flags).
    Aiperf,
}

impl Tool {
    /// Every tool, in the order `goodput import --help` lists them.
    pub const ALL: [Tool; 3] = [Tool::VllmBench, Tool::Guidellm, Tool::Aiperf];

    /// The command line (`args`, with or without the tool's own name in front) as a contract.
    pub fn import(self, args: &[String]) -> Result<Imported, ImportError> {
        match self {
            Tool::VllmBench => vllm_bench::import(args),
            Tool::Guidellm => guidellm::import(args),
            Tool::Aiperf => aiperf::import(args),
        }
    }

    /// How the tool's result format's name begins (`PeerFormat::name`), so a saved result
    /// given with `import --result` is known to be this tool's.
    pub fn result_name(self) -> &'static str {
        match self {
            Tool::VllmBench => "vLLM",
            Tool::Guidellm => "GuideLLM",
            Tool::Aiperf => "AIPerf",
        }
    }
}

/// Every format `goodput audit` reads, most specific first (vLLM's and SGLang's results share
/// most keys; a vLLM result names its `model_id`).
pub static PEERS: &[&dyn PeerFormat] = &[
    &vllm_bench::result::Vllm,
    &sglang::Sglang,
    &guidellm::result::Guidellm,
    &aiperf::result::Aiperf,
    &inference_perf::InferencePerf,
];

/// Every format, as the "unrecognised format" message lists them.
pub fn expected() -> String {
    let n = PEERS.len();
    PEERS
        .iter()
        .enumerate()
        .map(|(i, p)| match i {
            0 => p.needs().to_owned(),
            i if i + 1 == n => format!(" or {}", p.needs()),
            _ => format!(", {}", p.needs()),
        })
        .collect()
}

/// A peer's speculative-decoding dataset or option imported: the note says where goodput's
/// acceptance comes from.
pub(crate) const ACCEPTANCE: &str = "speculative decoding: goodput states each request's acceptance from what the engine returns (llama.cpp's timings; vLLM's metrics.speculative_decoding when the server runs with --per-request-spec-decode-metrics summary) and the window's from its spec_decode counters, beside TPOT";

/// The largest result file of another tool read: its JSON is held as a tree, about three times
/// the file's size (a 300 MB file cost 824 MB). vLLM's result with every request's timings for
/// 10,000 prompts is about 10 MB.
pub const MAX_PEER_BYTES: u64 = 64 << 20;

/// Another tool's result file as JSON: a document, or JSON Lines as an array of its lines
/// (`path` names the file in messages).
pub(crate) fn peer_value(path: &Path, text: &str) -> anyhow::Result<Value> {
    // Python's json module writes NaN and ±Infinity (a statistic of no samples), which JSON
    // has no word for: read as the strings "NaN", "Infinity", "-Infinity" (no figure, and
    // named where a figure was expected), and said.
    let text = match result::python_specials(text) {
        Some((_, clean)) => std::borrow::Cow::Owned(clean),
        None => std::borrow::Cow::Borrowed(text),
    };
    let text = text.as_ref();
    let v = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(e) => match result::json_lines(text) {
            Some(lines) => Value::Array(lines),
            None => bail!(
                "{}: unrecognised format: not JSON (line {}, column {}: {e}) nor JSON Lines; expected a goodput bundle directory or {}",
                path.display(),
                e.line(),
                e.column(),
                expected()
            ),
        },
    };
    Ok(v)
}

/// Grades another tool's result file from its text (`path` names it in messages): a JSON
/// document, or JSON Lines (one result a line, as SGLang's bench_serving appends them), read by
/// the first of [`PEERS`] that recognises it.
pub fn peer_result(path: &Path, text: &str) -> anyhow::Result<Audit> {
    let specials = result::python_specials(text).map_or(0, |(n, _)| n);
    let v = peer_value(path, text)?;
    match PEERS.iter().find(|p| p.recognises(&v)) {
        Some(p) => p.grade(path, &v).map(|mut a| {
            a.peer_efficiency();
            if specials > 0 {
                a.limits.push(format!(
                    "{specials} value(s) are NaN or Infinity (Python's json module writes them for a statistic of no samples): read as no figure"
                ));
            }
            let absurd = result::absurd_numbers(&v);
            if !absurd.is_empty() {
                a.missing.extend(absurd);
                a = a.done();
            }
            a
        }),
        None => bail!(
            "{}: unrecognised format: JSON, but none of {}",
            path.display(),
            expected()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool added to [`Tool`] is one variant: `ALL` lists every one, and each has exactly one
    /// result reader in [`PEERS`], so `import --result` can check a saved result is its own.
    #[test]
    fn every_tool_has_one_result_reader() {
        assert_eq!(
            Tool::ALL.as_slice(),
            <Tool as clap::ValueEnum>::value_variants()
        );
        for t in Tool::ALL {
            let readers: Vec<&str> = PEERS
                .iter()
                .map(|p| p.name())
                .filter(|n| n.starts_with(t.result_name()))
                .collect();
            assert_eq!(readers.len(), 1, "{t:?}: {readers:?}");
        }
    }
}
