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
//! Tool calls (tools go in the body as `{"type": "function", name, description, parameters}`):
//! `response.output_item.added` opens a `function_call` item with its `name` (and arguments,
//! usually empty), `response.function_call_arguments.delta` carries the arguments in pieces
//! (`item_id`, `output_index`); the `*.done` events repeat them. A call is keyed by its item's
//! id where the server sends one, else by `output_index`. A whole body has `function_call`
//! items with their `arguments` whole.
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
    /// `output_item.added`'s item (a `function_call` opens a tool call).
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<u32>,
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
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    /// A `function_call` item's function and arguments' text.
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    arguments: Option<Cow<'a, str>>,
}

/// The key of the call an event belongs to: its item's id, else its place among the items.
fn key(id: Option<&str>, output_index: Option<u32>) -> u32 {
    match id {
        Some(id) => super::call_key(id),
        None => output_index.unwrap_or(0),
    }
}

impl<'a> Item<'a> {
    /// A `function_call` item as a piece of a call (its name, and arguments when it has any).
    fn call(self, output_index: Option<u32>) -> Option<super::ToolDelta<'a>> {
        (self.kind.as_deref() == Some("function_call")).then(|| super::ToolDelta {
            index: key(self.id.as_deref(), output_index),
            id: None,
            name: super::non_empty(self.name),
            arguments: super::non_empty(self.arguments),
        })
    }
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

    /// A whole body's reasoning and answer text and its tool calls, from its output items.
    fn texts(items: Vec<Item<'a>>) -> (String, String, Vec<super::ToolDelta<'a>>) {
        let (mut reasoning, mut text, mut calls) = (String::new(), String::new(), Vec::new());
        for (k, item) in items.into_iter().enumerate() {
            let into = match item.kind.as_deref() {
                Some("reasoning") => &mut reasoning,
                Some("message") => &mut text,
                Some("function_call") => {
                    calls.extend(item.call(Some(k as u32)));
                    continue;
                }
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
        (reasoning, text, calls)
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
            tools: true,
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
        if let Some(tools) = spec.tools {
            let tools: Vec<_> = super::tool_functions(tools)
                .map(|f| {
                    let mut t = f.clone();
                    t.insert("type".into(), json!("function"));
                    t
                })
                .collect();
            o.insert("tools".into(), json!(tools));
        }
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
            Some("response.output_item.added") => {
                ev.tool_calls
                    .extend(e.item.and_then(|i| i.call(e.output_index)));
            }
            Some("response.function_call_arguments.delta") => {
                if let Some(piece) = super::non_empty(e.delta) {
                    ev.tool_calls.push(super::ToolDelta {
                        index: key(e.item_id.as_deref(), e.output_index),
                        arguments: Some(piece),
                        ..super::ToolDelta::default()
                    });
                }
            }
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
                let (reasoning, text, calls) =
                    Response::texts(whole.output.take().unwrap_or_default());
                whole.end(&mut ev);
                ev.tool_calls = calls;
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

    /// Tool calls as OpenAI documents them: an item opens a call with its name, deltas carry
    /// its arguments by item id; two calls interleaved stay apart; a whole body's items too.
    #[test]
    fn tool_calls_streamed_and_whole() {
        let mut calls = Vec::new();
        for e in [
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_a","call_id":"call_a","name":"get_weather","arguments":""}}"#,
            r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"add","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_a","output_index":1,"delta":"{\"city\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_b","output_index":2,"delta":"{\"a\":1}"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_a","output_index":1,"delta":"\"Oslo\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","item_id":"fc_a","output_index":1,"arguments":"{\"city\":\"Oslo\"}"}"#,
            r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","id":"fc_a","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}"#,
        ] {
            for d in &parse(e).tool_calls {
                crate::api::gather_tool_call(&mut calls, d);
            }
        }
        let got: Vec<_> = calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            got,
            [("get_weather", r#"{"city":"Oslo"}"#), ("add", r#"{"a":1}"#)]
        );
        let whole = parse(
            r#"{"id":"r","object":"response","status":"completed","output":[{"type":"reasoning","content":[]},{"type":"function_call","id":"fc_1","name":"add","arguments":"{\"a\":2}"}],"usage":{"input_tokens":3,"output_tokens":5}}"#,
        );
        assert_eq!(whole.tool_calls.len(), 1);
        assert_eq!(whole.tool_calls[0].name.as_deref(), Some("add"));
        assert_eq!(whole.tool_calls[0].arguments.as_deref(), Some(r#"{"a":2}"#));
    }

    #[test]
    fn tools_go_in_the_responses_shape() {
        let sampling = crate::contract::Sampling::default();
        let tools = serde_json::json!([{"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}]);
        let spec = RequestSpec {
            tools: Some(&tools),
            ..RequestSpec::for_test(&sampling)
        };
        let v: serde_json::Value = serde_json::from_slice(&Responses.body(&spec)).unwrap();
        assert_eq!(
            v["tools"],
            serde_json::json!([{"type": "function", "name": "add", "description": "adds", "parameters": {"type": "object"}}])
        );
    }
}
