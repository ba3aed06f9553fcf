//! Ollama's native chat API: `POST /api/chat`, streamed as newline-delimited JSON (one object
//! per line, `application/x-ndjson`), not SSE.
//!
//! Each line before the last carries `message.content` (answer text) and, for a thinking model
//! asked to think (`think = true` through `target.request.extra_body`), `message.thinking`
//! (reasoning text). The last line has `"done": true`, `done_reason` (`stop`, `length`), and
//! the counts: `prompt_eval_count` (the prompt tokens Ollama evaluated: a prefix it kept in its
//! cache is left out, so against a warm cache it reads below the prompt's length) and
//! `eval_count` (the output tokens); it ends the stream. A line `{"error": …}` is the server's
//! error.
//!
//! Settings go in `options`: `num_predict` for the output length (there is no way to ask for
//! an exact one), `temperature`, `top_p`, `top_k`, `seed`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::{Adapter, Capabilities, Framing, RequestSpec, StreamEvent, Usage};

pub struct Chat;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(default)]
    done: bool,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    done_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_eval_count: Option<u32>,
    #[serde(default)]
    eval_count: Option<u32>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    thinking: Option<Cow<'a, str>>,
}

impl Adapter for Chat {
    fn path(&self, _stream: bool) -> &'static str {
        "/api/chat"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: true,
            exact_output: false,
            streams: true,
            generates: true,
            batches: false,
            images: false,
            tools: false,
        }
    }

    fn framing(&self) -> Framing {
        Framing::JsonLines
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let s = spec.sampling;
        let mut options = json!({
            "num_predict": spec.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        });
        let o = options.as_object_mut().expect("object literal");
        spec.top_k_and_seed(o);
        let b = json!({
            "model": spec.model,
            "messages": spec.chat_messages(),
            "stream": spec.stream,
            "options": options,
        });
        super::encode(b, spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let l: Line<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("line is not an Ollama chat response: {e}"))
        })?;
        if let Some(err) = l.error {
            return Err(super::server_error(&err));
        }
        let mut ev = StreamEvent {
            model: l.model,
            done: l.done,
            ..StreamEvent::default()
        };
        if let Some(m) = l.message {
            ev.text = super::non_empty(m.content);
            ev.reasoning = super::non_empty(m.thinking);
        }
        if l.done {
            ev.finish_reason = l.done_reason.or(Some(Cow::Borrowed("done")));
            ev.usage = Some(Usage::of(l.prompt_eval_count, l.eval_count, None, None));
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_then_the_done_line() {
        let a = Chat;
        let ev = a
            .parse_event(br#"{"model":"qwen3","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","thinking":"Okay"},"done":false}"#)
            .unwrap();
        assert_eq!(
            (ev.reasoning.as_deref(), ev.text, ev.done),
            (Some("Okay"), None, false)
        );
        let ev = a
            .parse_event(
                br#"{"model":"qwen3","message":{"role":"assistant","content":" Hi"},"done":false}"#,
            )
            .unwrap();
        assert_eq!(ev.text.as_deref(), Some(" Hi"));
        let end = a
            .parse_event(br#"{"model":"qwen3","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"total_duration":1,"prompt_eval_count":26,"eval_count":8,"eval_duration":5}"#)
            .unwrap();
        assert!(end.done && end.text.is_none());
        let u = end.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (Some(26), Some(8)));
        assert_eq!(end.finish_reason.as_deref(), Some("length"));
        assert!(matches!(
            a.parse_event(br#"{"error":"model 'x' not found"}"#),
            Err(crate::api::EventError::Server(_))
        ));
    }
}
