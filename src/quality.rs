//! Quality held constant: output digests, reference answers and their scores, and the
//! request-by-request consistency of two results of the same plan.
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

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::contract::{QualityMode, Scoring};
use crate::plan::Phase;
use crate::record::Record;

/// The first 16 hex digits of the text's SHA-256.
pub fn digest(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
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
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
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

/// What one run says about its outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QualityResult {
    /// `consistency` or `reference`.
    pub mode: String,
    /// Steady successful requests whose output was kept (digest or text).
    pub outputs: u64,
    /// Quality probes answered (their text kept), for request-by-request comparison.
    #[serde(default)]
    pub probes: u64,
    /// `reference` mode: how they scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceScore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReferenceScore {
    pub scoring: Scoring,
    pub scored: u64,
    /// Mean score over scored requests, in [0, 1].
    pub mean: f64,
}

/// The quality figures of a run's steady requests (`None` in mode `none`).
pub fn summarize(
    mode: QualityMode,
    scoring: Scoring,
    refs: &[Reference],
    records: &[Record],
) -> Option<QualityResult> {
    let steady = || {
        records
            .iter()
            .filter(|r| r.phase == Phase::Steady && r.is_ok())
    };
    let outputs = steady().filter(|r| r.output_digest.is_some()).count() as u64;
    let probes = records
        .iter()
        .filter(|r| r.phase == Phase::Quality && crate::plan::probe_answer(r.index) && r.is_ok())
        .count() as u64;
    match mode {
        QualityMode::None => None,
        QualityMode::Consistency => Some(QualityResult {
            mode: "consistency".into(),
            outputs,
            probes,
            reference: None,
        }),
        QualityMode::Reference => {
            let scores: Vec<f64> = steady()
                .filter_map(|r| {
                    let item = refs.get((r.index % refs.len().max(1) as u64) as usize)?;
                    Some(score(scoring, r.output_text.as_deref()?, &item.answer))
                })
                .collect();
            Some(QualityResult {
                mode: "reference".into(),
                outputs,
                probes,
                reference: Some(ReferenceScore {
                    scoring,
                    scored: scores.len() as u64,
                    mean: if scores.is_empty() {
                        0.0
                    } else {
                        scores.iter().sum::<f64>() / scores.len() as f64
                    },
                }),
            })
        }
    }
}

/// Two results of the same plan, request by request: their quality probes (the same prompts
/// in every run), or, for bundles written before probes existed, their steady requests;
/// successful on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consistency {
    /// `quality` (the probes) or `steady`.
    #[serde(default)]
    pub phase: String,
    pub pairs: u64,
    /// Fraction with identical output digests.
    pub identical: f64,
    /// Fraction with the same output length.
    pub same_length: f64,
    /// Mean longest-common-prefix agreement of words, when both kept text.
    pub token_agreement: Option<f64>,
}

pub fn consistency(a: &[Record], b: &[Record]) -> Option<Consistency> {
    // The probes when both runs sent them: the measured prompts carry each run's own cache
    // nonce, and a model's output depends on every token of its prompt.
    let probed = |rs: &[Record]| rs.iter().any(|r| r.phase == Phase::Quality);
    let phase = if probed(a) && probed(b) {
        Phase::Quality
    } else {
        Phase::Steady
    };
    // A probe's answer, not its cache primer.
    let key = |r: &Record| {
        r.phase == phase
            && (phase != Phase::Quality || crate::plan::probe_answer(r.index))
            && r.is_ok()
            && r.output_digest.is_some()
    };
    let by_index: HashMap<u64, &Record> =
        a.iter().filter(|r| key(r)).map(|r| (r.index, r)).collect();
    let pairs: Vec<(&Record, &Record)> = b
        .iter()
        .filter(|r| key(r))
        .filter_map(|rb| Some((*by_index.get(&rb.index)?, rb)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let frac = |f: &dyn Fn(&Record, &Record) -> bool| {
        pairs.iter().filter(|(x, y)| f(x, y)).count() as f64 / n
    };
    let agreements: Vec<f64> = pairs
        .iter()
        .filter_map(|(x, y)| {
            let (wx, wy) = (
                words_raw(x.output_text.as_deref()?),
                words_raw(y.output_text.as_deref()?),
            );
            let longest = wx.len().max(wy.len());
            if longest == 0 {
                return Some(1.0);
            }
            let prefix = wx.iter().zip(&wy).take_while(|(p, q)| p == q).count();
            Some(prefix as f64 / longest as f64)
        })
        .collect();
    Some(Consistency {
        phase: phase.as_str().to_owned(),
        pairs: pairs.len() as u64,
        identical: frac(&|x, y| x.output_digest == y.output_digest),
        same_length: frac(&|x, y| output_len(x) == output_len(y)),
        token_agreement: (agreements.len() == pairs.len())
            .then(|| agreements.iter().sum::<f64>() / n),
    })
}

fn words_raw(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

fn output_len(r: &Record) -> u32 {
    r.usage_completion_tokens.unwrap_or(r.client_output_tokens)
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
