//! Output tokens in the model's own tokens, counted after the run from the text as it arrived.
//!
//! As the stream arrives the client counts cheaply (one token per chunk, or words on the
//! simulator) and keeps the text of every answer whose count the server did not confirm (no
//! `usage`, or `usage` other than the client's count: chunks that carried several tokens). After
//! the load — the server no longer measured, so this costs the run nothing — each kept text is
//! counted by the best source at hand: the workload's tokenizer file (every chunk exact), else the
//! target's `/tokenize` (the whole output, the first chunk, and the reasoning and first answer
//! chunk exact; the other chunks' share of the rest estimated by their length), else as words, approximately, when the chunks carried
//! several words. Each record says how it was counted (`counted`).

use futures_util::StreamExt;

use super::{Counted, Record};
use crate::contract::ClientTokenCount;
use crate::env::tokenize::ServerCounter;
use crate::workload::Tokenizer;

/// `/tokenize` requests in flight during the recount.
const IN_FLIGHT: usize = 16;

/// What counts the kept texts.
pub enum Counter<'a> {
    /// A model's tokenizer file.
    File(&'a Tokenizer),
    /// The target's `/tokenize`.
    Server(&'a ServerCounter),
    /// Nothing better than the client's own count; why.
    None(String),
}

impl Counter<'_> {
    /// The source as the summary and `environment.json` name it.
    pub fn describe(&self) -> String {
        match self {
            Counter::File(_) => "the workload's tokenizer file".to_owned(),
            Counter::Server(s) => format!("the target's tokenize endpoint ({})", s.url()),
            Counter::None(why) => format!("none ({why})"),
        }
    }
}

/// How the recount went, for `environment.json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Recounted {
    /// The source, in words.
    pub counter: String,
    /// Records whose text was kept for a recount.
    pub kept: u64,
    /// Records recounted in the model's tokens.
    pub recounted: u64,
    /// Records counted as words, approximately.
    pub approximate: u64,
    /// The first failure, when the endpoint stopped answering part-way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Recounts every record that kept its text, and drops the text. `counting` is how the client
/// counted as the stream arrived.
pub async fn recount(
    records: &mut [Record],
    counter: &Counter<'_>,
    counting: ClientTokenCount,
) -> Recounted {
    let mut out = Recounted {
        counter: counter.describe(),
        ..Recounted::default()
    };
    let kept: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].received.is_some())
        .collect();
    out.kept = kept.len() as u64;
    let counts: Vec<Result<Vec<u32>, String>> = match counter {
        Counter::File(tok) => kept
            .iter()
            .map(|&i| {
                let r = records[i].received.as_ref().expect("kept");
                tok.chunk_counts(&r.text, &r.chunk_bytes)
                    .ok_or_else(|| "the tokenizer could not encode the text".to_owned())
            })
            .collect(),
        Counter::Server(s) => {
            let jobs: Vec<(String, Vec<u32>, usize)> = kept
                .iter()
                .map(|&i| {
                    let r = records[i].received.as_ref().expect("kept");
                    let rc = records[i].reasoning_chunks as usize;
                    (r.text.clone(), r.chunk_bytes.clone(), rc)
                })
                .collect();
            futures_util::stream::iter(jobs)
                .map(|(text, bytes, rc)| async move {
                    by_server(s, &text, &bytes, rc)
                        .await
                        .map_err(|e| e.to_string())
                })
                .buffered(IN_FLIGHT)
                .collect()
                .await
        }
        Counter::None(_) => kept.iter().map(|_| Err(String::new())).collect(),
    };
    let how = match counter {
        Counter::File(_) => Counted::Tokenizer,
        _ => Counted::Server,
    };
    for (i, c) in kept.into_iter().zip(counts) {
        let r = &mut records[i];
        let received = r.received.take().expect("kept");
        match c {
            Ok(per_chunk) => {
                apply(r, &per_chunk);
                r.counted = Some(how);
                out.recounted += 1;
            }
            Err(e) => {
                if out.error.is_none() && !e.is_empty() {
                    out.error = Some(e);
                }
                if !exact_as_counted(r, &received, counting) {
                    apply(r, &words(&received));
                    r.counted = Some(Counted::Words);
                    out.approximate += 1;
                }
            }
        }
    }
    out
}

/// Sets a record's counts: one per chunk when it streamed, else the whole.
fn apply(r: &mut Record, per_chunk: &[u32]) {
    if r.chunks.len() == per_chunk.len() {
        r.chunks.set_tokens(per_chunk.iter().copied());
    }
    r.client_output_tokens = per_chunk.iter().sum();
}

/// Words in each chunk (at least one in a chunk with text), or in the whole when not streamed.
fn words(received: &super::Received) -> Vec<u32> {
    if received.chunk_bytes.is_empty() {
        return vec![crate::text::count_words(&received.text)];
    }
    let mut at = 0usize;
    received
        .chunk_bytes
        .iter()
        .map(|&b| {
            let chunk = received.text.get(at..at + b as usize).unwrap_or_default();
            at += b as usize;
            crate::text::count_words(chunk).max(1)
        })
        .collect()
}

/// Whether the client's own count stands without a recount: chunks counted one each, none of
/// which carried more than one word, and no `usage` that says otherwise.
fn exact_as_counted(r: &Record, received: &super::Received, counting: ClientTokenCount) -> bool {
    if counting != ClientTokenCount::Chunks || r.usage_completion_tokens.is_some() {
        return false;
    }
    words(received).iter().all(|&w| w <= 1)
}

/// Counts at the target: the whole text and the first chunk exactly, and, when the answer
/// followed reasoning, the reasoning and the answer's first chunk too (a request for each); the
/// rest shared among the chunks between by their length in bytes (largest remainders), so the
/// total, TPOT's and TTFO's first chunks and the reasoning count are exact and per-token gaps an
/// estimate.
async fn by_server(
    s: &ServerCounter,
    text: &str,
    bytes: &[u32],
    reasoning_chunks: usize,
) -> Result<Vec<u32>, crate::env::Unavailable> {
    let total = s.count(text).await?;
    let n = bytes.len();
    if n <= 1 {
        return Ok(vec![total]);
    }
    // Chunk counts before which the text's tokens are counted exactly.
    let mut marks = vec![1];
    if reasoning_chunks > 0 {
        marks.extend([reasoning_chunks, reasoning_chunks + 1]);
    }
    marks.retain(|&m| m < n);
    marks.sort_unstable();
    marks.dedup();
    // (chunks, tokens in them), from none to all.
    let mut cum = vec![(0usize, 0u32)];
    for m in marks {
        let end = bytes[..m].iter().map(|&b| b as usize).sum::<usize>();
        let before = cum.last().map_or(0, |c| c.1);
        let c = s.count(text.get(..end).unwrap_or(text)).await?;
        cum.push((m, c.clamp(before, total)));
    }
    cum.push((n, total));
    let mut out = Vec::with_capacity(n);
    for w in cum.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        out.extend(share(cb - ca, &bytes[a..b]));
    }
    Ok(out)
}

/// `n` shared in proportion to `weights` (largest remainder method): the parts sum to `n`.
fn share(n: u32, weights: &[u32]) -> Vec<u32> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        let mut v = vec![0; weights.len()];
        if let Some(l) = v.last_mut() {
            *l = n;
        }
        return v;
    }
    let exact: Vec<f64> = weights
        .iter()
        .map(|&w| f64::from(n) * f64::from(w) / sum as f64)
        .collect();
    let mut parts: Vec<u32> = exact.iter().map(|x| x.floor() as u32).collect();
    let mut left = n - parts.iter().sum::<u32>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = exact[a] - exact[a].floor();
        let rb = exact[b] - exact[b].floor();
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_the_whole_in_proportion() {
        assert_eq!(share(12, &[4, 4, 4]), vec![4, 4, 4]);
        assert_eq!(share(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(share(5, &[0, 0]), vec![0, 5]);
        let v = share(97, &[13, 200, 7, 55]);
        assert_eq!(v.iter().sum::<u32>(), 97);
        assert!(v[1] > v[3] && v[3] > v[0] && v[0] >= v[2]);
    }
}
