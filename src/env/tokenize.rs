//! Counting in the target's own tokens through its tokenize endpoint, for targets whose
//! `tokenizer.json` is not at hand (`workload.tokenizer = "server"`).
//!
//! One `POST /tokenize` body is read by every engine that has the endpoint: vLLM and SGLang take
//! `{"model", "prompt", "add_special_tokens"}` and answer `{"count", "tokens", …}`; llama.cpp's
//! server takes `{"content", "add_special"}` and answers `{"tokens": […]}`; TGI takes `{"inputs"}`
//! and answers a list of tokens. Each ignores the others' keys. Before the run goodput measures
//! what each of its prompt words costs there (at the start of a text and after a space), builds
//! synthetic prompts from that table, counts dataset prompts one by one, and checks a sample of
//! the planned prompts against the endpoint, keeping all of it in the bundle.

use serde_json::{Value, json};

use crate::contract::{Contract, LengthDist};
use crate::text::WORDS;
use crate::workload::{Inputs, Sources, Tokenizer};

use super::Unavailable;

/// The largest `/tokenize` answer read: the token ids of a 1M-token prompt are about 8 MB.
const MAX_TOKENIZE_BYTES: usize = 64 << 20;

/// The longest a `/tokenize` answer may take: a hung endpoint must not hang the run.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Planned prompts checked against the endpoint before the run.
const CHECKED: u64 = 32;

/// `/tokenize` requests in flight while recounting a dataset.
const RECOUNT_IN_FLIGHT: usize = 16;

/// A target's tokenize endpoint.
pub struct ServerCounter {
    http: reqwest::Client,
    url: String,
    model: String,
    auth: Option<String>,
}

impl ServerCounter {
    /// The endpoint at `base`, checked with one request; the error names the URL and status
    /// (or what else went wrong).
    pub async fn detect(
        http: reqwest::Client,
        base: &str,
        model: &str,
        api_key: Option<&str>,
    ) -> Result<ServerCounter, Unavailable> {
        let c = ServerCounter {
            http,
            url: format!("{}/tokenize", base.trim_end_matches('/')),
            model: model.to_owned(),
            auth: api_key.map(|k| format!("Bearer {k}")),
        };
        c.count("the").await?;
        Ok(c)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Tokens in `text`, without the special tokens a server adds where it can be told not to.
    pub async fn count(&self, text: &str) -> Result<u32, Unavailable> {
        let body = json!({
            "model": self.model, "prompt": text, "add_special_tokens": false,
            "content": text, "add_special": false,
            "inputs": text,
        });
        let mut req = self.http.post(&self.url).json(&body).timeout(TIMEOUT);
        if let Some(a) = &self.auth {
            req = req.header(reqwest::header::AUTHORIZATION, a);
        }
        let url = &self.url;
        let resp = req.send().await.map_err(|e| {
            Unavailable::Unanswered(format!("POST {url}: {}", crate::text::error_chain(&e)))
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(Unavailable::Unanswered(format!(
                "POST {url}: HTTP {}",
                status.as_u16()
            )));
        }
        let body = super::body_capped(resp, MAX_TOKENIZE_BYTES)
            .await
            .map_err(|e| Unavailable::Unanswered(format!("POST {url}: {e}")))?;
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| Unavailable::Malformed(format!("POST {url}: answer is not JSON: {e}")))?;
        parse_count(&v).ok_or_else(|| {
            Unavailable::Malformed(format!(
                "POST {url}: unrecognised answer (expected \"count\", \"tokens\" or a list)"
            ))
        })
    }

    /// The word-cost table of [`WORDS`] on this target.
    pub async fn table(&self) -> Result<Tokenizer, Unavailable> {
        let base = self.count("the").await?;
        let mut first = Vec::with_capacity(WORDS.len());
        let mut cost = Vec::with_capacity(WORDS.len());
        for w in WORDS {
            first.push(self.count(w).await?);
            cost.push(self.count(&format!("the {w}")).await?.saturating_sub(base));
        }
        Tokenizer::table(first, cost).map_err(Unavailable::Malformed)
    }
}

/// The target's count of each text and of its answer (at least 1), a few at a time: a
/// ShareGPT file holds tens of thousands of conversations, and one round trip after another
/// is minutes before the first request.
async fn count_pairs<'a>(
    counter: &ServerCounter,
    pairs: impl Iterator<Item = (&'a String, &'a Option<String>)>,
) -> Result<Vec<(u32, Option<u32>)>, Unavailable> {
    use futures_util::{StreamExt, TryStreamExt};
    futures_util::stream::iter(pairs)
        .map(|(text, answer)| async move {
            let input = counter.count(text).await?;
            let output = match answer {
                Some(a) => Some(counter.count(a).await?.max(1)),
                None => None,
            };
            Ok::<_, Unavailable>((input, output))
        })
        .buffered(RECOUNT_IN_FLIGHT)
        .try_collect()
        .await
}

/// Recounts a contract's inputs in the target's tokens: the word table synthetic prompts are
/// built from, every dataset prompt and answer, and lengths drawn from the dataset.
pub async fn recount(
    counter: &ServerCounter,
    c: &Contract,
    old: &Inputs,
) -> Result<Inputs, Unavailable> {
    let table = counter.table().await?;
    let mut prompts = old.prompts.clone();
    let counts = count_pairs(counter, old.prompts.iter().map(|p| (&p.prompt, &p.answer))).await?;
    for (p, (input, output)) in prompts.iter_mut().zip(counts) {
        p.input_tokens = input;
        p.output_tokens = output.or(p.output_tokens);
    }
    // Sessions over a dataset send each turn of a conversation: every turn and its answer too.
    if c.workload.sessions.is_some() {
        let turns = old.prompts.iter().flat_map(|p| &p.turns);
        let counts = count_pairs(counter, turns.map(|t| (&t.text, &t.answer))).await?;
        for (t, (input, output)) in prompts.iter_mut().flat_map(|p| &mut p.turns).zip(counts) {
            t.input_tokens = input;
            t.output_tokens = output.or(t.output_tokens);
        }
    }
    let from_dataset = |dist: &Option<LengthDist>, input: bool, kept: &[u32]| match dist {
        Some(LengthDist::Empirical { file: None, .. }) => {
            prompts.iter().filter_map(|p| p.length(input)).collect()
        }
        _ => kept.to_vec(),
    };
    let input_lengths = from_dataset(&c.workload.input_tokens, true, old.lengths(true));
    let output_lengths = from_dataset(&c.workload.output_tokens, false, old.lengths(false));
    Ok(Inputs::new(Sources {
        tokenizer: table,
        prompts,
        skipped: old.skipped,
        trace: old.trace.clone(),
        references: old.references.clone(),
        input_lengths,
        output_lengths,
        missing: old.missing.clone(),
        tasks: old.tasks.clone(),
        images: old.images.clone(),
    }))
}

/// Counts the first planned prompts (`prompts` yields index, text, planned count) at the
/// endpoint, and returns what the bundle keeps: the word table and the check.
pub async fn check(
    counter: &ServerCounter,
    table: &Tokenizer,
    prompts: impl Iterator<Item = (u64, String, u32)>,
) -> Result<Value, Unavailable> {
    let (first, cost) = match table {
        Tokenizer::Table { first, cost, .. } => (first.clone(), cost.clone()),
        _ => (Vec::new(), Vec::new()),
    };
    let (mut n, mut mismatches) = (0u64, Vec::new());
    for (index, text, planned) in prompts.take(CHECKED as usize) {
        n += 1;
        let server = counter.count(&text).await?;
        if server != planned {
            mismatches.push(json!({ "index": index, "planned": planned, "server": server }));
        }
    }
    Ok(json!({
        "source": "server",
        "endpoint": counter.url(),
        "words": WORDS.to_vec(),
        "first_word_tokens": first,
        "following_word_tokens": cost,
        "checked": n,
        "exact": n - mismatches.len() as u64,
        "mismatches": mismatches,
    }))
}

/// The token count in a tokenize answer of any of the known shapes.
pub fn parse_count(v: &Value) -> Option<u32> {
    if let Some(n) = v.get("count").and_then(Value::as_u64) {
        return u32::try_from(n).ok();
    }
    let list = v.get("tokens").unwrap_or(v).as_array()?;
    u32::try_from(list.len()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engines_answer_shape_is_read() {
        // vLLM / SGLang, llama.cpp, TGI.
        let vllm = json!({"count": 3, "max_model_len": 8192, "tokens": [1, 2, 3]});
        let llamacpp = json!({"tokens": [5, 6]});
        let tgi = json!([{"id": 1, "text": "a", "start": 0, "stop": 1}]);
        assert_eq!(parse_count(&vllm), Some(3));
        assert_eq!(parse_count(&llamacpp), Some(2));
        assert_eq!(parse_count(&tgi), Some(1));
        assert_eq!(parse_count(&json!({"detail": "Not Found"})), None);
    }
}
