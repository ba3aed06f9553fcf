//! OpenAI's Responses API: `POST /v1/responses`, as served by OpenAI, vLLM, SGLang and
//! llama.cpp's server (checked against the pinned build, `tests/real_engine.rs`).
//!
//! The stream is SSE with typed events (`"type"` in every event's data): `response.created`
//! names the response and its model, `response.output_text.delta` carries answer text,
//! `response.reasoning_text.delta` (vLLM, llama.cpp; `response.reasoning.delta` in older
//! builds) or `response.reasoning_summary_text.delta` (OpenAI's summaries) reasoning text, and
//! `response.completed` or `response.incomplete` ends the stream with the usage; there is no
//! `[DONE]`. `response.failed` and `error` events carry the server's error. Other events
//! (`output_item.added`, `content_part.added`, `*.done`) repeat text already counted, or none:
//! they are not tokens.
//!
//! Usage: `input_tokens` (cached ones included, `input_tokens_details.cached_tokens`),
//! `output_tokens` (reasoning included, `output_tokens_details.reasoning_tokens`). The finish
//! reason is the response's `status`, or `incomplete_details.reason` (`max_output_tokens`).
//! The API has no field for an exact output length.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::{Adapter, Capabilities, RequestSpec, StreamEvent, Usage};

pub struct Responses;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(
        borrow,
        rename = "type",
        default,
        deserialize_with = "super::json::opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    message: Option<Cow<'a, str>>,
    /// `"response"` when the data is a whole body (not streamed): the response itself.
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Response<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    usage: Option<ResponsesUsage>,
    #[serde(borrow, default)]
    output: Option<Vec<Item<'a>>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(
        borrow,
        rename = "type",
        default,
        deserialize_with = "super::json::opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<Part<'a>>>,
    #[serde(borrow, default)]
    summary: Option<Vec<Part<'a>>>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Clone, Copy)]
struct ResponsesUsage {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    input_tokens_details: Option<Details>,
    #[serde(default)]
    output_tokens_details: Option<Details>,
}

#[derive(Deserialize, Clone, Copy)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u32>,
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

impl ResponsesUsage {
    fn usage(self) -> Usage {
        Usage::of(
            self.input_tokens,
            self.output_tokens,
            self.input_tokens_details.and_then(|d| d.cached_tokens),
            self.output_tokens_details.and_then(|d| d.reasoning_tokens),
        )
    }
}

impl<'a> Response<'a> {
    /// The end of the answer: id, model, usage and why it ended.
    fn end(self, ev: &mut StreamEvent<'a>) {
        ev.id = self.id;
        ev.model = self.model;
        ev.usage = self.usage.map(ResponsesUsage::usage);
        ev.finish_reason = match self.incomplete_details.and_then(|d| d.reason) {
            Some(r) => Some(Cow::Owned(r)),
            None => self.status,
        };
    }

    /// A whole body's reasoning and answer text, from its output items.
    fn texts(items: Vec<Item<'a>>) -> (String, String) {
        let (mut reasoning, mut text) = (String::new(), String::new());
        for item in items {
            let into = match item.kind.as_deref() {
                Some("reasoning") => &mut reasoning,
                Some("message") => &mut text,
                _ => continue,
            };
            // A reasoning item holds its text in `content` (vLLM) or only a `summary`.
            let parts = match (item.content, item.summary) {
                (Some(c), _) if !c.is_empty() => c,
                (_, Some(s)) => s,
                _ => Vec::new(),
            };
            for p in parts {
                into.push_str(p.text.as_deref().unwrap_or(""));
            }
        }
        (reasoning, text)
    }
}

impl Adapter for Responses {
    fn path(&self, _stream: bool) -> &'static str {
        "/v1/responses"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: true,
            exact_output: false,
            streams: true,
            generates: true,
            batches: false,
            images: true,
            tools: false,
        }
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let input = match spec.messages {
            Some(m) => json!(m),
            None => json!(spec.prompt),
        };
        let mut b = json!({
            "model": spec.model,
            "input": input,
            "max_output_tokens": spec.max_tokens,
            "stream": spec.stream,
            "temperature": spec.sampling.temperature,
            "top_p": spec.sampling.top_p,
        });
        let o = b.as_object_mut().expect("object literal");
        spec.top_k_and_seed(o);
        super::encode(b, spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let e: Event<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("event is not a Responses API event: {e}"))
        })?;
        let mut ev = StreamEvent::default();
        match e.kind.as_deref() {
            Some("response.output_text.delta") => ev.text = super::non_empty(e.delta),
            Some(
                "response.reasoning_text.delta"
                | "response.reasoning.delta"
                | "response.reasoning_summary_text.delta",
            ) => ev.reasoning = super::non_empty(e.delta),
            Some("response.created") => {
                if let Some(r) = e.response {
                    ev.id = r.id;
                    ev.model = r.model;
                }
            }
            Some("response.completed" | "response.incomplete") => {
                e.response.unwrap_or_default().end(&mut ev);
                ev.done = true;
            }
            Some("response.failed") => {
                let why = e.response.and_then(|r| r.error).or(e.error);
                return Err(super::server_error(
                    &why.unwrap_or_else(|| json!("response.failed")),
                ));
            }
            Some("error") => {
                let why = e
                    .error
                    .unwrap_or_else(|| json!(e.message.as_deref().unwrap_or("error event")));
                return Err(super::server_error(&why));
            }
            // A whole answer (not streamed).
            None if e.object.as_deref() == Some("response") => {
                let mut whole: Response<'a> = super::json::parse(data).map_err(|e| {
                    super::EventError::Malformed(format!(
                        "body is not a Responses API response: {e}"
                    ))
                })?;
                if let Some(err) = whole.error.take().filter(|e| !e.is_null()) {
                    return Err(super::server_error(&err));
                }
                let (reasoning, text) = Response::texts(whole.output.take().unwrap_or_default());
                whole.end(&mut ev);
                ev.text = super::gathered(text);
                ev.reasoning = super::gathered(reasoning);
            }
            None if e.error.is_some() => {
                return Err(super::server_error(&e.error.unwrap_or_default()));
            }
            _ => {}
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> StreamEvent<'_> {
        Responses.parse_event(s.as_bytes()).unwrap()
    }

    /// Events as llama.cpp's server sends them (captured from the pinned build), with vLLM's
    /// reasoning events and OpenAI's reasoning usage.
    #[test]
    fn a_stream_in_order() {
        let created = parse(
            r#"{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","model":"g"}}"#,
        );
        assert_eq!(
            (created.id.as_deref(), created.model.as_deref()),
            (Some("resp_1"), Some("g"))
        );
        for quiet in [
            r#"{"type":"response.in_progress","response":{"id":"resp_1","object":"response","status":"in_progress"}}"#,
            r#"{"type":"response.output_item.added","item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"}}"#,
            r#"{"type":"response.content_part.added","item_id":"msg_1","part":{"type":"output_text","text":""}}"#,
            r#"{"type":"response.output_text.done","item_id":"msg_1","text":"<|im_end|>"}"#,
        ] {
            let ev = parse(quiet);
            assert!(
                ev.text.is_none() && ev.reasoning.is_none() && !ev.done,
                "{quiet}"
            );
        }
        let r = parse(r#"{"type":"response.reasoning_text.delta","item_id":"rs_1","delta":"Let"}"#);
        assert_eq!(
            (r.reasoning.as_deref(), r.text.as_deref()),
            (Some("Let"), None)
        );
        let t = parse(r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"<"}"#);
        assert_eq!(t.text.as_deref(), Some("<"));
        let end = parse(
            r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","model":"g","output":[],"usage":{"input_tokens":26,"output_tokens":8,"total_tokens":34,"input_tokens_details":{"cached_tokens":21},"output_tokens_details":{"reasoning_tokens":3}}}}"#,
        );
        assert!(end.done);
        let u = end.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens(),
                u.reasoning_tokens()
            ),
            (Some(26), Some(8), Some(21), Some(3))
        );
        assert_eq!(end.finish_reason.as_deref(), Some("completed"));
        let cut = parse(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":2,"output_tokens":4}}}"#,
        );
        assert_eq!(
            (cut.done, cut.finish_reason.as_deref()),
            (true, Some("max_output_tokens"))
        );
        for bad in [
            r#"{"type":"error","code":"rate_limit","message":"slow down"}"#,
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#,
        ] {
            let e = Responses.parse_event(bad.as_bytes()).unwrap_err();
            assert!(matches!(e, crate::api::EventError::Server(_)), "{e}");
        }
    }

    #[test]
    fn a_whole_response() {
        let ev = parse(
            r#"{"id":"resp_2","object":"response","model":"g","status":"completed","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"so"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Hello"}]}],"usage":{"input_tokens":26,"output_tokens":8}}"#,
        );
        assert_eq!(
            (ev.reasoning.as_deref(), ev.text.as_deref()),
            (Some("so"), Some("Hello"))
        );
        assert_eq!(ev.usage.unwrap().completion_tokens, Some(8));
    }
}
