//! What a run's images were and what they cost (`[workload.images]`), from the records alone:
//! how many each steady request carried and of what sizes and bytes; the upload inside each
//! TTFT; the server's prompt tokens held against the text sent plus the contract's image-token
//! rule (its remainder must be one constant, the chat template, when the rule is the model's);
//! and the encoder cache's hits against the repeats the plan sent.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::server::ServerSide;
use crate::contract::Contract;
use crate::record::Record;
use crate::stats::Dist;

/// The steady window's images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImagesResult {
    /// Steady requests sent, and those of them that carried images.
    pub requests: u64,
    pub with_images: u64,
    /// Images sent in all, and by size (`"WxH"` → images).
    pub images: u64,
    pub sizes: BTreeMap<String, u64>,
    /// Encoded image bytes per request (before base64), over the requests that carried any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Dist>,
    /// Upload per request, ms: from the send to the request's last byte written, inside its
    /// TTFT (requests of 64 KiB and more, on goodput's own connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_ms: Option<Dist>,
    /// Each such request's upload as a share of its TTFT from the send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_share_of_ttft: Option<Dist>,
    /// The contract's image-token rule, in words (absent: none stated, nothing expected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Image tokens the rule expects per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_tokens: Option<Dist>,
    /// Per successful request that reported usage: the server's prompt tokens − the text
    /// sent − the rule's image tokens. One value throughout (the chat template's tokens)
    /// when the rule is the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remainder: Option<Dist>,
    /// `held`, `not held`, or why it cannot be judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_check: Option<String>,
    /// Images sent in the run (any phase) whose bytes an earlier one's equalled: the repeats
    /// an encoder cache may serve.
    pub repeats: u64,
    /// The server's encoder cache over the steady window (vLLM's `vllm:mm_cache_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_queries: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_hits: Option<u64>,
    /// What a reader must know: hits where none were planned, a rule that does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The images of `records` (every phase; the steady ones are `steady`), or `None` when the
/// contract sends none.
pub fn summarize(
    c: &Contract,
    records: &[Record],
    steady: &[&Record],
    server: Option<&ServerSide>,
) -> Option<ImagesResult> {
    let spec = c.workload.images.as_ref()?;
    let sent: Vec<&&Record> = steady.iter().filter(|r| r.sent_us.is_some()).collect();
    let with: Vec<&&Record> = sent
        .iter()
        .copied()
        .filter(|r| !r.images.is_empty())
        .collect();
    let mut sizes = BTreeMap::new();
    for r in &with {
        for i in &r.images {
            *sizes
                .entry(format!("{}x{}", i.width, i.height))
                .or_insert(0) += 1;
        }
    }
    let bytes = Dist::of(
        with.iter()
            .map(|r| r.images.iter().filter_map(|i| i.bytes).sum::<u64>() as f64)
            .collect(),
    );
    let uploads: Vec<(u64, Option<u64>)> = sent
        .iter()
        .filter_map(|r| {
            let ttft = r
                .first_token_us
                .zip(r.sent_us)
                .map(|(f, s)| f.saturating_sub(s));
            r.upload_us.map(|u| (u, ttft))
        })
        .collect();
    let mut out = ImagesResult {
        requests: sent.len() as u64,
        with_images: with.len() as u64,
        images: with.iter().map(|r| r.images.len() as u64).sum(),
        sizes,
        bytes,
        upload_ms: Dist::of(uploads.iter().map(|(u, _)| *u as f64 / 1000.0).collect()),
        upload_share_of_ttft: Dist::of(
            uploads
                .iter()
                .filter_map(|&(u, t)| t.filter(|&t| t > 0).map(|t| u as f64 / t as f64))
                .collect(),
        ),
        rule: None,
        expected_tokens: None,
        remainder: None,
        rule_check: None,
        repeats: repeats(records),
        server_queries: None,
        server_hits: None,
        notes: Vec::new(),
    };
    if let Some(rule) = spec.tokens {
        check_tokens(rule, c, &sent, &mut out);
    }
    if let Some(m) = server.and_then(|s| s.mm_cache.as_ref()) {
        check_cache(m, spec.reuse, &mut out);
    }
    Some(out)
}

/// The server's prompt tokens against the text sent and `rule`'s image tokens.
fn check_tokens(
    rule: crate::contract::images::ImageTokens,
    c: &Contract,
    sent: &[&&Record],
    out: &mut ImagesResult,
) {
    out.rule = Some(match rule {
        crate::contract::images::ImageTokens::Fixed { per_image } => {
            format!("{per_image} tokens per image")
        }
        crate::contract::images::ImageTokens::Grid { px, extra } => {
            format!("one token per {px}×{px} px tile (edges rounded up), plus {extra} per image")
        }
    });
    let expected =
        |r: &Record| -> u64 { r.images.iter().map(|i| rule.of(i.width, i.height)).sum() };
    out.expected_tokens = Dist::of(
        sent.iter()
            .filter(|r| !r.images.is_empty())
            .map(|r| expected(r) as f64)
            .collect(),
    );
    let remainders: Vec<f64> = sent
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| {
            let reported = i64::from(r.usage_prompt_tokens?);
            Some((reported - i64::from(r.input_tokens_planned) - expected(r) as i64) as f64)
        })
        .collect();
    out.rule_check = Some(rule_check(&remainders, c));
    if out
        .rule_check
        .as_deref()
        .is_some_and(|v| v.starts_with("not held"))
    {
        out.notes.push(format!(
            "The server's prompt tokens are not the text sent plus the image-token rule ({}) plus one constant: the rule is not this model's, or the server resized the images; its image figures are not the contract's",
            out.rule.as_deref().unwrap_or_default()
        ));
    }
    out.remainder = Dist::of(remainders);
}

/// The encoder cache's hits over the window against the repeats the run sent.
fn check_cache(
    m: &super::server::ItemCache,
    reuse: crate::contract::images::ImageReuse,
    out: &mut ImagesResult,
) {
    out.server_queries = Some(m.queries);
    out.server_hits = Some(m.hits);
    if m.hits > out.repeats {
        out.notes.push(format!(
            "The server's encoder cache served {} image(s) in the steady window, but the run sent {} repeated image(s){}: its images were not cold as planned (another client, or a cache keyed by less than the pixels)",
            m.hits,
            out.repeats,
            if reuse == crate::contract::images::ImageReuse::Distinct {
                " (reuse = \"distinct\": none)"
            } else {
                ""
            }
        ));
    }
}

/// Whether every remainder is one value (the chat template's tokens), in words.
fn rule_check(remainders: &[f64], c: &Contract) -> String {
    let (Some(lo), Some(hi)) = (
        remainders.iter().copied().reduce(f64::min),
        remainders.iter().copied().reduce(f64::max),
    ) else {
        return "cannot be judged: no successful request reported usage.prompt_tokens".into();
    };
    if lo == hi {
        let n = remainders.len();
        return format!(
            "held: on each of {n} request{} the prompt tokens are its text, the rule's image tokens and {lo} more",
            if n == 1 { "" } else { "s" }
        );
    }
    if c.workload.tokenizer.is_none() && !c.embedded() {
        // Text counted in words is approximate: its remainder varies with the prompt too.
        return format!(
            "cannot be judged exactly: the text is counted in words, not the model's tokens (set workload.tokenizer); remainder {lo}..{hi}"
        );
    }
    format!("not held: the remainder spans {lo}..{hi}")
}

/// Images sent (in the order their requests were sent) whose hash an earlier image's equals.
fn repeats(records: &[Record]) -> u64 {
    let mut order: Vec<&Record> = records
        .iter()
        .filter(|r| r.sent_us.is_some() && !r.images.is_empty())
        .collect();
    order.sort_by_key(|r| r.sent_us);
    let mut seen = HashSet::new();
    let mut n = 0;
    for r in order {
        for h in r.images.iter().filter_map(|i| i.sha256.as_deref()) {
            n += u64::from(!seen.insert(h));
        }
    }
    n
}
