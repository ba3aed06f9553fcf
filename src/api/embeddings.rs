//! OpenAI-compatible embeddings: `POST /v1/embeddings` (vLLM, SGLang, TEI's OpenAI route,
//! llama.cpp started with `--embeddings`), never streamed.
//!
//! A request sends `workload.batch` inputs (the planned prompt that many times, so every input
//! has the planned length and the request `batch` times its tokens) and its answer is a list
//! of vectors. There is no first token: latency is end to end, throughput is input tokens per
//! second, from `usage.prompt_tokens` (every input's tokens) when reported.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::{Adapter, Capabilities, RequestSpec, StreamEvent, Usage};

pub struct Embeddings;

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    usage: Option<EmbeddingUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize, Clone, Copy)]
struct EmbeddingUsage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
}

impl Adapter for Embeddings {
    fn path(&self, _stream: bool) -> &'static str {
        "/v1/embeddings"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: false,
            exact_output: false,
            streams: false,
            generates: false,
            batches: true,
            images: false,
            tools: false,
        }
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let input: Vec<&str> = (0..spec.batch.max(1)).map(|_| spec.prompt).collect();
        let b = json!({
            "model": spec.model,
            "input": input,
            "encoding_format": "float",
        });
        super::encode(b, spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let b: Body<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("body is not an embeddings response: {e}"))
        })?;
        if let Some(err) = b.error {
            return Err(super::server_error(&err));
        }
        if b.data.as_ref().is_none_or(Vec::is_empty) {
            return Err(super::EventError::Malformed(
                "the embeddings response holds no `data` (no vector came back)".into(),
            ));
        }
        Ok(StreamEvent {
            id: b.id,
            model: b.model,
            finish_reason: Some(Cow::Borrowed("embedded")),
            usage: b
                .usage
                .map(|u| Usage::of(u.prompt_tokens, None, None, None)),
            done: true,
            ..StreamEvent::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_and_input_usage() {
        let ev = Embeddings
            .parse_event(br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]},{"object":"embedding","index":1,"embedding":[0.3,0.4]}],"model":"e5","usage":{"prompt_tokens":12,"total_tokens":12}}"#)
            .unwrap();
        assert_eq!(ev.usage.unwrap().prompt_tokens, Some(12));
        assert!(ev.text.is_none());
        assert!(
            Embeddings
                .parse_event(br#"{"object":"list","data":[]}"#)
                .is_err()
        );
        let sampling = crate::contract::Sampling::default();
        let spec = RequestSpec {
            max_tokens: 1,
            stream: false,
            batch: 3,
            ..RequestSpec::for_test(&sampling)
        };
        let v: serde_json::Value = serde_json::from_slice(&Embeddings.body(&spec)).unwrap();
        assert_eq!(v["input"].as_array().unwrap().len(), 3);
        assert!(v.get("stream").is_none() && v.get("max_tokens").is_none());
    }
}
