//! Counting and building prompts in the target's tokens.
//!
//! Three tokenizers: the simulator's (one token per whitespace-separated word, exact against the
//! simulator and an approximation anywhere else), a Hugging Face `tokenizer.json` read from a
//! local file by the `tokenizers` crate (exact for the model it belongs to), and a table of word
//! costs measured through the target's own `/tokenize` endpoint (exact for texts spelt in
//! [`WORDS`], which synthetic prompts and, in that mode, request tags are). The bundle says which
//! one counted, so an approximate length is never passed off as an exact one.
//!
//! Synthetic prompts are built to an exact count: words are appended while they fit, each
//! word's cost in tokens known from the tokenizer (pre-tokenizers of byte-level BPE, Metaspace
//! and WordPiece models split at spaces, so a word's tokens do not depend on its neighbours),
//! single-token words fill the remainder, and the finished text is counted once more. Where a
//! tokenizer merges across words after all, the text is trimmed or filled a word at a time until
//! the count is exact; the plan records the final count either way.

use std::path::Path;

use rand::Rng;

use crate::text::WORDS;

/// A tokenizer able to count and build prompts.
#[derive(Default)]
pub enum Tokenizer {
    /// The simulator's: one token per word.
    #[default]
    Words,
    /// A Hugging Face `tokenizer.json`.
    File {
        tok: Box<tokenizers::Tokenizer>,
        /// Tokens each of [`WORDS`] adds after a space.
        cost: Vec<u32>,
        /// Indices into [`WORDS`] of the words that add exactly one token.
        unit: Vec<usize>,
    },
    /// Costs measured by the target's tokenize endpoint (see `env::tokenize`).
    Table {
        /// Tokens of each of [`WORDS`] at the start of a text.
        first: Vec<u32>,
        /// Tokens each adds after a space.
        cost: Vec<u32>,
        unit: Vec<usize>,
        index: std::collections::HashMap<&'static str, usize>,
    },
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tokenizer::Words => f.write_str("Tokenizer::Words"),
            Tokenizer::File { tok, .. } => {
                write!(f, "Tokenizer::File({} tokens)", tok.get_vocab_size(true))
            }
            Tokenizer::Table { cost, .. } => write!(f, "Tokenizer::Table({cost:?})"),
        }
    }
}

impl Tokenizer {
    /// Loads a `tokenizer.json`; the error names the file. Returns it with its SHA-256.
    pub fn load(path: &Path) -> Result<(Tokenizer, String), String> {
        let bytes = crate::text::read_capped(path, crate::text::MAX_FILE_BYTES)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let sha = crate::text::sha256_hex(&bytes);
        let tok = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| {
            format!(
                "{}: not a Hugging Face tokenizer.json this build can load: {e}",
                path.display()
            )
        })?;
        let base = count_with(&tok, "the")?;
        let mut cost = Vec::with_capacity(WORDS.len());
        for w in WORDS {
            cost.push(count_with(&tok, &format!("the {w}"))?.saturating_sub(base));
        }
        let unit: Vec<usize> = (0..WORDS.len()).filter(|&i| cost[i] == 1).collect();
        if unit.is_empty() {
            return Err(format!(
                "{}: no common English word is a single token in this tokenizer, so prompts cannot be built to an exact length",
                path.display()
            ));
        }
        Ok((
            Tokenizer::File {
                tok: Box::new(tok),
                cost,
                unit,
            },
            sha,
        ))
    }

    /// A table of word costs measured by the target: `first[i]` and `cost[i]` are the tokens
    /// of `WORDS[i]` at the start of a text and after a space.
    pub fn table(first: Vec<u32>, cost: Vec<u32>) -> Result<Tokenizer, String> {
        if first.len() != WORDS.len() || cost.len() != WORDS.len() {
            return Err("a word-cost table needs one entry per word".into());
        }
        let unit: Vec<usize> = (0..WORDS.len()).filter(|&i| cost[i] == 1).collect();
        if unit.is_empty() {
            return Err("no common English word is a single token for this target, so prompts cannot be built to an exact length".into());
        }
        let index = WORDS.iter().enumerate().map(|(i, w)| (*w, i)).collect();
        Ok(Tokenizer::Table {
            first,
            cost,
            unit,
            index,
        })
    }

    /// Whether counts are a real model's tokens (a file or a measured table), not the
    /// simulator's words.
    pub fn counts_model_tokens(&self) -> bool {
        !matches!(self, Tokenizer::Words)
    }

    /// A request's (or prefix's) tag: unique to `(a, b)`, so a prompt starting with it shares no
    /// prefix with another. `r12s0`-style, except under a measured table, where it is spelt in
    /// [`WORDS`] (three little-endian base-128 digits of `a`, one of `b`) so its cost is known.
    pub fn tag(&self, kind: char, a: u64, b: u64) -> String {
        match self {
            Tokenizer::Table { .. } => {
                let d = |x: u64| WORDS[(x % WORDS.len() as u64) as usize];
                let n = WORDS.len() as u64;
                format!("{} {} {} {}", d(a), d(a / n), d(a / (n * n)), d(b))
            }
            _ => format!("{kind}{a}s{b}"),
        }
    }

    /// The run's lead for a cache nonce (hex digits): one word `n<nonce>` (a few tokens of a
    /// real model's vocabulary), except under a measured table, where it is spelt as three
    /// [`WORDS`] (base-128 digits of the nonce; 2 million leads) so its cost is known.
    pub fn run_lead(&self, nonce: &str) -> String {
        match self {
            Tokenizer::Table { .. } => {
                let x = u64::from_str_radix(nonce, 16).unwrap_or(0);
                let n = WORDS.len() as u64;
                let d = |k: u32| WORDS[((x / n.pow(k)) % n) as usize];
                format!("{} {} {}", d(0), d(1), d(2))
            }
            _ => format!("n{nonce}"),
        }
    }

    /// Tokens in `text` (no special tokens: a chat template's are the server's to add).
    pub fn count(&self, text: &str) -> u32 {
        match self {
            Tokenizer::Words => crate::text::count_words(text),
            Tokenizer::File { tok, .. } => count_with(tok, text).unwrap_or(u32::MAX),
            Tokenizer::Table {
                first, cost, index, ..
            } => {
                // Words outside the table (only in texts not built here) are estimated at four
                // characters a token; everything the plan builds is spelt in table words.
                text.split_whitespace()
                    .enumerate()
                    .map(|(k, w)| match (index.get(w).copied(), k) {
                        (Some(i), 0) => first[i],
                        (Some(i), _) => cost[i],
                        (None, _) => (w.len() as u32).div_ceil(4),
                    })
                    .sum()
            }
        }
    }

    /// Tokens of each chunk of `text` (`chunk_bytes` long, in order), with a model's tokenizer
    /// file: the whole text is encoded once and each token counted in the chunk its first byte
    /// arrived in (a chunk that ends inside a token, which servers avoid, counts it in the
    /// chunk where it started). `None` without a file.
    pub fn chunk_counts(&self, text: &str, chunk_bytes: &[u32]) -> Option<Vec<u32>> {
        let Tokenizer::File { tok, .. } = self else {
            return None;
        };
        let enc = tok.encode(text, false).ok()?;
        let mut counts = vec![0u32; chunk_bytes.len().max(1)];
        let (mut chunk, mut end) = (
            0usize,
            chunk_bytes.first().map_or(usize::MAX, |&b| b as usize),
        );
        for &(start, _) in enc.get_offsets() {
            while start >= end && chunk + 1 < chunk_bytes.len() {
                chunk += 1;
                end += chunk_bytes[chunk] as usize;
            }
            counts[chunk] += 1;
        }
        Some(counts)
    }

    /// Tokens of `text`, which is `lead`, a newline, and a text of `rest` tokens. Exact with a
    /// tokenizer at hand; under a measured table (which knows only its words), the lead's cost
    /// plus one for the newline plus `rest` as the target counted it.
    pub fn count_behind(&self, lead: &str, text: &str, rest: u32) -> u32 {
        match self {
            Tokenizer::Table { .. } => self.count(lead) + 1 + rest,
            _ => self.count(text),
        }
    }

    fn word_cost(&self, i: usize) -> u32 {
        match self {
            Tokenizer::Words => 1,
            Tokenizer::File { cost, .. } | Tokenizer::Table { cost, .. } => cost[i],
        }
    }

    fn unit_word(&self, rng: &mut impl Rng) -> &'static str {
        match self {
            Tokenizer::Words => WORDS[(rng.next_u32() as usize) % WORDS.len()],
            Tokenizer::File { unit, .. } | Tokenizer::Table { unit, .. } => {
                WORDS[unit[(rng.next_u32() as usize) % unit.len()]]
            }
        }
    }

    /// A prompt of exactly `n` tokens that starts with `lead` (a request's unique tag, or a
    /// shared prefix and a tag), then words drawn from `rng`. When `lead` alone is longer than
    /// `n`, its first `n` tokens. Returns the text and its count (equal to `n` unless the
    /// tokenizer defeats every adjustment, which the caller records as it is).
    pub fn build(&self, lead: &str, n: u32, rng: &mut impl Rng) -> (String, u32) {
        let mut text = lead.to_owned();
        let mut have = self.count(&text);
        if have > n {
            return self.truncate(lead, n);
        }
        while have < n {
            let i = (rng.next_u32() as usize) % WORDS.len();
            let c = self.word_cost(i);
            let w = if c >= 1 && have + c <= n {
                have += c;
                WORDS[i]
            } else {
                have += 1;
                self.unit_word(rng)
            };
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(w);
        }
        if !matches!(self, Tokenizer::File { .. }) {
            let c = self.count(&text);
            return (text, c);
        }
        // Verify, and adjust a word at a time if the tokenizer merged across a boundary.
        let mut actual = self.count(&text);
        for _ in 0..32 {
            if actual == n {
                break;
            }
            if actual < n {
                text.push(' ');
                text.push_str(self.unit_word(rng));
            } else {
                match text.rfind(' ') {
                    Some(cut) if cut >= lead.len() => text.truncate(cut),
                    _ => break,
                }
            }
            actual = self.count(&text);
        }
        (text, actual)
    }

    /// The first `n` tokens of `text`, decoded.
    fn truncate(&self, text: &str, n: u32) -> (String, u32) {
        match self {
            Tokenizer::Words | Tokenizer::Table { .. } => {
                // Whole words until the next would exceed `n` (a table knows words, not pieces).
                let mut out = String::new();
                for w in text.split_whitespace() {
                    let with = if out.is_empty() {
                        w.to_owned()
                    } else {
                        format!("{out} {w}")
                    };
                    if self.count(&with) > n {
                        break;
                    }
                    out = with;
                }
                let c = self.count(&out);
                (out, c)
            }
            Tokenizer::File { tok, .. } => {
                let ids = tok
                    .encode(text, false)
                    .map(|e| e.get_ids().to_vec())
                    .unwrap_or_default();
                let cut = &ids[..ids.len().min(n as usize)];
                let s = tok.decode(cut, false).unwrap_or_default();
                let c = self.count(&s);
                (s, c)
            }
        }
    }
}

fn count_with(tok: &tokenizers::Tokenizer, text: &str) -> Result<u32, String> {
    tok.encode(text, false)
        .map(|e| e.len() as u32)
        .map_err(|e| format!("tokenizer failed on {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn fixture() -> Tokenizer {
        Tokenizer::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer.json"),
        )
        .unwrap()
        .0
    }

    #[test]
    fn built_prompts_tokenize_back_to_exactly_the_requested_length() {
        let t = fixture();
        assert!(t.counts_model_tokens());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for n in [1, 2, 3, 5, 8, 16, 17, 100, 511, 512, 2048] {
            for k in 0..5 {
                let lead = format!("r{k}s9");
                let (text, c) = t.build(&lead, n, &mut rng);
                assert_eq!(c, n, "{text:?}");
                assert_eq!(t.count(&text), n, "{text:?}");
                if n >= 8 {
                    assert!(text.starts_with(&lead), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn the_fixture_is_a_real_subword_tokenizer() {
        // Words split into several tokens: counting words would be wrong by a wide margin.
        let t = fixture();
        let s = "Octopuses have three hearts and blue blood.";
        assert!(
            t.count(s) > crate::text::count_words(s) + 3,
            "{}",
            t.count(s)
        );
    }

    #[test]
    fn each_chunk_counts_the_tokens_that_start_in_it() {
        let t = fixture();
        // Streamed as a server would: at word boundaries, several words per chunk.
        let chunks = ["Octopuses have", " three hearts", " and blue blood."];
        let text: String = chunks.concat();
        let bytes: Vec<u32> = chunks.iter().map(|c| c.len() as u32).collect();
        let counts = t.chunk_counts(&text, &bytes).unwrap();
        assert_eq!(counts.iter().sum::<u32>(), t.count(&text));
        // Each chunk's share is what it adds to the count of the text before it.
        let mut before = 0;
        for (i, n) in counts.iter().enumerate() {
            let upto = t.count(&chunks[..=i].concat());
            assert_eq!(*n, upto - before, "{:?}", chunks[i]);
            before = upto;
        }
        // Not streamed: one count. Without a file: none.
        assert_eq!(t.chunk_counts(&text, &[]), Some(vec![t.count(&text)]));
        assert_eq!(Tokenizer::Words.chunk_counts(&text, &bytes), None);
    }

    #[test]
    fn a_file_that_is_not_a_tokenizer_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{\"not\": \"a tokenizer\"}").unwrap();
        let e = Tokenizer::load(&p).unwrap_err();
        assert!(
            e.contains("tokenizer.json") && e.contains("not a Hugging Face"),
            "{e}"
        );
        let e = Tokenizer::load(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.contains("missing.json"), "{e}");
    }
}
