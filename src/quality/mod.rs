//! Quality held constant: output digests, reference answers and how an output is scored
//! against one. What a run's records score is `analyze::quality`.
//!
//! Scoring definitions, each a well-documented one:
//! - normalisation as in the SQuAD v1.1 evaluation script (Rajpurkar et al., 2016): lower case,
//!   drop punctuation and the articles a/an/the, collapse whitespace;
//! - `exact`: normalised output equals normalised answer (1 or 0);
//! - `contains`: normalised answer occurs in the normalised output as whole words (1 or 0) —
//!   base and chat models wrap answers in sentences;
//! - `rouge-l`: ROUGE-L F1 over normalised words (Lin, 2004, "ROUGE: A Package for Automatic
//!   Evaluation of Summaries"): LCS length over output and answer lengths, β = 1.
//!
//! Token agreement between two outputs is the longest common prefix of their words over the
//! longer one's length: greedy decoding that diverges once diverges for good.

pub mod tools;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::contract::Scoring;

/// The first 16 hex digits of the text's SHA-256.
pub fn digest(text: &str) -> String {
    crate::text::sha256_prefix(text.as_bytes(), 8)
}

/// One reference item: a prompt and the answer expected to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub prompt: String,
    pub answer: String,
}

/// Reads a references JSONL file; each error names the file, line and key.
pub fn load_references(path: &Path) -> Result<(Vec<Reference>, String), String> {
    let bytes = crate::text::read_capped(path, crate::text::MAX_FILE_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Reference = serde_json::from_str(line).map_err(|e| {
            format!(
                "{}:{}: {e} (each line is {{\"prompt\": …, \"answer\": …}})",
                path.display(),
                i + 1
            )
        })?;
        if r.prompt.trim().is_empty() || r.answer.trim().is_empty() {
            return Err(format!(
                "{}:{}: `{}` is empty",
                path.display(),
                i + 1,
                if r.prompt.trim().is_empty() {
                    "prompt"
                } else {
                    "answer"
                }
            ));
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err(format!("{}: no references in it", path.display()));
    }
    Ok((out, crate::text::sha256_hex(&bytes)))
}

/// SQuAD-style normalised words.
pub fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .map(str::to_owned)
        .collect()
}

/// Score of one output against its answer, in [0, 1].
pub fn score(scoring: Scoring, output: &str, answer: &str) -> f64 {
    let (o, a) = (words(output), words(answer));
    match scoring {
        Scoring::Exact => f64::from(u8::from(o == a)),
        Scoring::Contains => {
            let hit = !a.is_empty() && o.windows(a.len()).any(|w| w == a.as_slice());
            f64::from(u8::from(hit))
        }
        Scoring::RougeL => {
            let l = lcs(&o, &a) as f64;
            if l == 0.0 {
                return 0.0;
            }
            let (p, r) = (l / o.len() as f64, l / a.len() as f64);
            2.0 * p * r / (p + r)
        }
    }
}

/// Longest common subsequence length (dynamic programming, two rows).
fn lcs(a: &[String], b: &[String]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut cur = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                cur[j].max(prev[j + 1])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_contains_and_rouge_on_hand_made_cases() {
        // Exact: normalisation drops case, punctuation and articles.
        assert_eq!(
            score(Scoring::Exact, "The Pacific Ocean.", "pacific ocean"),
            1.0
        );
        assert_eq!(score(Scoring::Exact, "Pacific", "pacific ocean"), 0.0);
        // Contains: the answer's words, in order, inside the output.
        assert_eq!(
            score(
                Scoring::Contains,
                "It is the Pacific Ocean, by far.",
                "Pacific Ocean"
            ),
            1.0
        );
        assert_eq!(
            score(Scoring::Contains, "Ocean Pacific", "Pacific Ocean"),
            0.0
        );
        assert_eq!(
            score(Scoring::Contains, "Paris is lovely", "Par"),
            0.0,
            "whole words only"
        );
        // ROUGE-L F1: output "cat sat on mat" vs answer "cat is on mat": LCS 3 (cat on mat),
        // P = 3/4, R = 3/4, F1 = 0.75.
        assert!((score(Scoring::RougeL, "cat sat on mat", "cat is on mat") - 0.75).abs() < 1e-12);
        // Partial overlap with different lengths: LCS 2, P = 2/2, R = 2/4 → F1 = 2/3.
        assert!(
            (score(Scoring::RougeL, "quick fox", "quick brown fox jumps") - 2.0 / 3.0).abs()
                < 1e-12
        );
        assert_eq!(
            score(Scoring::RougeL, "nothing shared", "else entirely"),
            0.0
        );
    }

    #[test]
    fn references_file_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("refs.jsonl");
        std::fs::write(
            &p,
            "{\"prompt\": \"q\", \"answer\": \"a\"}\n{\"prompt\": \"q2\"}\n",
        )
        .unwrap();
        let e = load_references(&p).unwrap_err();
        assert!(e.contains("refs.jsonl:2:") && e.contains("answer"), "{e}");
        std::fs::write(&p, "{\"prompt\": \"q\", \"answer\": \"a\"}\nnot json\n").unwrap();
        assert!(load_references(&p).unwrap_err().contains("refs.jsonl:2:"));
        std::fs::write(&p, "{\"prompt\": \" \", \"answer\": \"a\"}\n").unwrap();
        assert!(
            load_references(&p)
                .unwrap_err()
                .contains("`prompt` is empty")
        );
        std::fs::write(&p, "{\"prompt\": \"q\", \"answer\": \"a\"}\n\n").unwrap();
        let (refs, sha) = load_references(&p).unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(sha.len(), 64);
    }

    #[test]
    fn the_shipped_reference_set_loads() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reference/capitals.jsonl");
        let (refs, _) = load_references(&p).unwrap();
        assert!(refs.len() >= 20);
    }
}
