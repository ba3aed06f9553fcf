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
pub use result::{PEERS, PeerFormat};

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
