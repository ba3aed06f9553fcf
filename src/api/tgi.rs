//! Text Generation Inference's native API: `POST /generate_stream` (SSE) and `POST /generate`
//! (a whole answer), with the prompt in `inputs` and the settings in `parameters`.
//!
//! Every stream event carries exactly one generated token (`token.text`, `token.special` for
//! special tokens such as EOS, whose text is kept: it is a generated token with a time); the
//! last event also carries `generated_text` and, asked for with `details: true`, `details`
//! (`finish_reason`, `generated_tokens`, `input_length` in TGI 2 and later), and ends the stream
//! (there is no `[DONE]`). An event `{"error": …, "error_type": …}` is the server's error.
//!
//! Sampling as TGI takes it: greedy is `do_sample: false` with no `temperature` (TGI refuses a
//! temperature of 0) and `top_p` is sent only below 1 (TGI refuses 1.0). There is no field for
//! an exact output length, and no reasoning split.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::{Adapter, Capabilities, RequestSpec, StreamEvent, Usage};

pub struct Generate;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default)]
    token: Option<Token<'a>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    generated_text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    details: Option<Details<'a>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Token<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Details<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    generated_tokens: Option<u32>,
    #[serde(default)]
    input_length: Option<u32>,
}

impl Adapter for Generate {
    fn path(&self, stream: bool) -> &'static str {
        if stream {
            "/generate_stream"
        } else {
            "/generate"
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: false,
            exact_output: false,
            streams: true,
            generates: true,
            batches: false,
            images: false,
            tools: false,
        }
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let s = spec.sampling;
        let mut p = json!({
            "max_new_tokens": spec.max_tokens,
            "details": true,
            "do_sample": s.temperature > 0.0,
        });
        let o = p.as_object_mut().expect("object literal");
        if s.temperature > 0.0 {
            o.insert("temperature".into(), json!(s.temperature));
        }
        if s.top_p < 1.0 {
            o.insert("top_p".into(), json!(s.top_p));
        }
        spec.top_k_and_seed(o);
        super::encode(json!({ "inputs": spec.prompt, "parameters": p }), spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let e: Event<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("event is not a TGI stream event: {e}"))
        })?;
        if let Some(err) = e.error {
            return Err(super::server_error(&err));
        }
        let mut ev = StreamEvent::default();
        match e.token {
            // A stream event: one token.
            Some(t) => {
                ev.text = super::non_empty(t.text);
                ev.done = e.generated_text.is_some() || e.details.is_some();
            }
            // A whole answer (`/generate`).
            None => ev.text = super::non_empty(e.generated_text),
        }
        if let Some(d) = e.details {
            ev.finish_reason = d.finish_reason;
            ev.usage = Some(Usage::of(d.input_length, d.generated_tokens, None, None));
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_then_the_last_event_with_details() {
        let a = Generate;
        let ev = a
            .parse_event(br#"{"index":1,"token":{"id":1919,"text":" Deep","logprob":-0.4,"special":false},"generated_text":null,"details":null}"#)
            .unwrap();
        assert_eq!((ev.text.as_deref(), ev.done), (Some(" Deep"), false));
        let last = a
            .parse_event(br#"{"index":4,"token":{"id":2,"text":"</s>","logprob":-0.1,"special":true},"generated_text":" Deep learning","details":{"finish_reason":"eos_token","generated_tokens":4,"seed":null,"input_length":7}}"#)
            .unwrap();
        assert!(last.done);
        assert_eq!(last.text.as_deref(), Some("</s>"));
        let u = last.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (Some(7), Some(4)));
        assert_eq!(last.finish_reason.as_deref(), Some("eos_token"));
        let e = a
            .parse_event(br#"{"error":"Input validation error: `inputs` must have less than 4096 tokens","error_type":"validation"}"#)
            .unwrap_err();
        assert!(
            matches!(&e, crate::api::EventError::Server(m) if m.contains("validation")),
            "{e}"
        );
        let whole = a
            .parse_event(br#"{"generated_text":"Hello","details":{"finish_reason":"length","generated_tokens":2}}"#)
            .unwrap();
        assert_eq!(whole.text.as_deref(), Some("Hello"));
    }

    #[test]
    fn greedy_is_do_sample_false_without_temperature_or_top_p() {
        let sampling = crate::contract::Sampling::default();
        let spec = RequestSpec {
            prompt: "p",
            ..RequestSpec::for_test(&sampling)
        };
        let v: serde_json::Value = serde_json::from_slice(&Generate.body(&spec)).unwrap();
        assert_eq!(v["parameters"]["do_sample"], false);
        assert_eq!(v["parameters"]["max_new_tokens"], 9);
        assert!(v["parameters"].get("temperature").is_none());
        assert!(v["parameters"].get("top_p").is_none());
        assert!(v.get("model").is_none(), "TGI serves one model");
    }
}
