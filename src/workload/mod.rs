//! The files a workload is built from, loaded once when the contract is read: the tokenizer
//! that counts and builds prompts, a prompt dataset, files of observed lengths, and an arrival
//! trace. Each is named in the contract by path and SHA-256, so a bundle says exactly what it
//! was built from, and a file changed since is refused rather than silently used.

pub(crate) mod dataset;
pub mod environment;
pub mod images;
pub mod inputs;
pub mod task;
pub(crate) mod tokenizer;
pub(crate) mod trace;

use std::path::Path;

pub use crate::contract::DatasetFormat;
pub use dataset::Message;
pub use inputs::{Inputs, Sources, load, parse};
pub use tokenizer::Tokenizer;

/// A dataset entry ready to plan: its prompt, counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub prompt: String,
    pub messages: Option<Vec<Message>>,
    /// Tokens of `prompt` (or of the messages' contents) by the workload's tokenizer.
    pub input_tokens: u32,
    /// The entry's output length, when it has one.
    pub output_tokens: Option<u32>,
    /// ShareGPT's answer, whose length is the output target (kept to recount it).
    pub answer: Option<String>,
    pub at: String,
    /// The entry's conversation, for sessions: its system text, then each user message.
    pub system: String,
    pub turns: Vec<DatasetTurn>,
    /// The tools it offers and the calls its answer must make (a tool dataset's entry).
    pub tools: Option<std::sync::Arc<crate::quality::tools::ToolCase>>,
}

/// One user message of a dataset conversation, counted.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetTurn {
    pub text: String,
    pub input_tokens: u32,
    /// Tokens of the answer the file gives it (the turn's output target), when it gives one.
    pub output_tokens: Option<u32>,
    /// That answer, kept to recount it in the target's tokens.
    pub answer: Option<String>,
}

impl Prompt {
    /// The entry's input length, or its output length when it has one.
    pub fn length(&self, input: bool) -> Option<u32> {
        if input {
            Some(self.input_tokens)
        } else {
            self.output_tokens
        }
    }
}

/// A text file's contents and SHA-256, from one read; errors name the file.
pub fn read(path: &Path) -> Result<(String, String), String> {
    let name = path.display();
    let bytes = crate::text::read_capped(path, crate::text::MAX_FILE_BYTES)
        .map_err(|e| format!("{name}: {e}"))?;
    let sha = crate::text::sha256_hex(&bytes);
    let mut text = String::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8 text"))?;
    // A UTF-8 byte-order mark (editors on Windows write one) is not part of the first line.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok((text, sha))
}

pub use crate::contract::MAX_TOKENS;

/// Parses observed lengths: one whole number per line (blank lines and `#` comments skipped).
/// Every error names the file (`path`, for messages) and line.
pub fn parse_lengths(path: &Path, text: &str) -> Result<Vec<u32>, String> {
    let name = path.display();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        match l.parse::<u32>() {
            Ok(n) if (1..=MAX_TOKENS).contains(&n) => out.push(n),
            _ => {
                return Err(format!(
                    "{name}:{}: `{l}` is not a length (a whole number from 1 to {MAX_TOKENS} per line)",
                    i + 1
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(format!("{name}: no lengths in the file"));
    }
    Ok(out)
}
