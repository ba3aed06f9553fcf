//! OpenAI-compatible embeddings: `input` is a string or a list of strings; the answer is one
//! vector per input and `usage.prompt_tokens`, every input's tokens. The simulator reads all
//! the inputs as one prompt (prefill, then one step) and answers after it; the vectors are
//! small and made from the prompt's hash.

use serde::Deserialize;
use serde_json::json;

use super::{Ask, Common, Counts, Reply, Wire, from_body, push_line};

pub(crate) struct Embeddings;

/// Size of the simulator's vectors.
const DIMENSIONS: usize = 8;

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct Request {
    #[serde(flatten)]
    common: Common,
    input: Option<Input>,
}

impl Wire for Embeddings {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let mut a = req.common.ask("input");
        let inputs = match req.input {
            Some(Input::One(s)) => vec![s],
            Some(Input::Many(v)) => v,
            None => Vec::new(),
        };
        for i in &inputs {
            push_line(&mut a.prompt, i);
        }
        a.max_tokens = Some(1);
        a.ignore_eos = true;
        a.thinking = false;
        a.stream = false;
        a.include_usage = true;
        a.inputs = inputs.len() as u32;
        Ok(a)
    }

    fn chunk(
        &self,
        _r: &Reply<'_>,
        _buf: &mut String,
        _reasoning: Option<&str>,
        _answer: Option<&str>,
    ) {
    }

    fn end(&self, _r: &Reply<'_>, _buf: &mut String, _c: &Counts) {}

    fn whole(
        &self,
        r: &Reply<'_>,
        _reasoning: &str,
        _answer: &str,
        c: &Counts,
    ) -> serde_json::Value {
        let data: Vec<_> = (0..c.inputs)
            .map(|i| {
                let v: Vec<f64> = (0..DIMENSIONS)
                    .map(|d| {
                        f64::from(
                            ((u64::from(i) * 31 + d as u64 * 7 + u64::from(c.prompt)) % 17) as u32,
                        ) / 17.0
                            - 0.5
                    })
                    .collect();
                json!({ "object": "embedding", "index": i, "embedding": v })
            })
            .collect();
        json!({
            "object": "list", "data": data, "model": r.model,
            "usage": { "prompt_tokens": c.prompt, "total_tokens": c.prompt },
        })
    }
}
