//! Anthropic's Messages API: `POST /v1/messages`, as served by Anthropic, by gateways that
//! speak it, and by llama.cpp's server (checked against the pinned build, `tests/real_engine.rs`).
//!
//! The stream is SSE with typed events: `message_start` (the message's id, model and input
//! usage), then per content block `content_block_start`, `content_block_delta`…,
//! `content_block_stop`, then `message_delta` (the `stop_reason` and the cumulative output
//! usage) and `message_stop`, which ends it (there is no `[DONE]`); `ping` events may come
//! at any time and `error` events carry the server's error.
//!
//! First tokens: a `content_block_delta` whose delta is a `text_delta` carries answer text, a
//! `thinking_delta` (extended thinking) reasoning text; `signature_delta` and
//! `input_json_delta` carry no generated text. Token counts: Anthropic's `input_tokens` leave
//! out the prompt tokens read from or written to the cache, so the prompt is
//! `input_tokens + cache_read_input_tokens + cache_creation_input_tokens` and the cached part
//! `cache_read_input_tokens`; output tokens are `message_delta`'s `usage.output_tokens`.
//! Anthropic reports no separate count of thinking tokens: the client counts them.
//!
//! Tool calls (tools go in the body as `{name, description, input_schema}`): a
//! `content_block_start` whose block is `tool_use` opens a call with its `name` (its `input`
//! is `{}` then), `input_json_delta`s carry the arguments' JSON in pieces (`partial_json`);
//! the block's `index` keys the call. A whole body's `tool_use` blocks hold `input` whole, as
//! an object.
//!
//! The key goes in `x-api-key` with `anthropic-version: 2023-06-01`. System messages go into
//! the top-level `system` field (the API has no system role in `messages`). There is no field
//! for an exact output length or a sampling seed; `top_p` is sent only when it is not 1 (recent
//! models refuse `temperature` and `top_p` together).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::{Adapter, Auth, Capabilities, RequestSpec, StreamEvent, Usage};

pub struct Messages;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(
        borrow,
        rename = "type",
        default,
        deserialize_with = "super::json::opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    /// `message_start`'s message, or a whole non-streamed body's fields (flattened below).
    #[serde(borrow, default)]
    message: Option<Body<'a>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<AnthropicUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    // A whole body (not streamed) is the message itself.
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<Block<'a>>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    stop_reason: Option<Cow<'a, str>>,
    /// The content block an event belongs to.
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    content_block: Option<Block<'a>>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<AnthropicUsage>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(
        borrow,
        rename = "type",
        default,
        deserialize_with = "super::json::opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    stop_reason: Option<Cow<'a, str>>,
    /// An `input_json_delta`'s piece of a tool call's arguments.
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    partial_json: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(
        borrow,
        rename = "type",
        default,
        deserialize_with = "super::json::opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    thinking: Option<Cow<'a, str>>,
    /// A `tool_use` block's function and arguments.
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    input: Option<serde_json::Value>,
}

impl<'a> Block<'a> {
    /// A `tool_use` block as a piece of call `index`: its name, and its input unless empty
    /// (a streamed block opens with `{}` and its input follows in deltas).
    fn call(self, index: u32) -> Option<super::ToolDelta<'a>> {
        if self.kind.as_deref() != Some("tool_use") {
            return None;
        }
        let input = self
            .input
            .filter(|i| !(i.is_null() || i.as_object().is_some_and(|o| o.is_empty())));
        Some(super::ToolDelta {
            index,
            id: None,
            name: super::non_empty(self.name),
            arguments: input.map(|i| Cow::Owned(super::arguments_text(i))),
        })
    }
}

#[derive(Deserialize, Clone, Copy)]
struct AnthropicUsage {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    cache_read_input_tokens: Option<u32>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
}

impl AnthropicUsage {
    /// In OpenAI's terms; `output` says whether this object's output count is the answer's
    /// (`message_start` holds a placeholder there).
    fn usage(self, output: bool) -> Usage {
        let prompt = self.input_tokens.map(|i| {
            i + self.cache_read_input_tokens.unwrap_or(0)
                + self.cache_creation_input_tokens.unwrap_or(0)
        });
        Usage::of(
            prompt,
            self.output_tokens.filter(|_| output),
            self.cache_read_input_tokens.filter(|_| prompt.is_some()),
            None,
        )
    }
}

impl Adapter for Messages {
    fn path(&self, _stream: bool) -> &'static str {
        "/v1/messages"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: true,
            exact_output: false,
            streams: true,
            generates: true,
            batches: false,
            images: false,
            tools: true,
        }
    }

    fn auth(&self) -> Auth {
        Auth::Header("x-api-key")
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", "2023-06-01")]
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let (system, messages): (Vec<_>, Vec<_>) = match spec.messages {
            Some(m) => m.iter().partition(|m| m.role == "system"),
            None => (Vec::new(), Vec::new()),
        };
        let messages = if spec.messages.is_some() {
            json!(messages)
        } else {
            json!([{ "role": "user", "content": spec.prompt }])
        };
        let mut b = json!({
            "model": spec.model,
            "max_tokens": spec.max_tokens,
            "stream": spec.stream,
            "temperature": spec.sampling.temperature,
            "messages": messages,
        });
        let o = b.as_object_mut().expect("object literal");
        if !system.is_empty() {
            let s: Vec<&str> = system.iter().map(|m| m.content.as_str()).collect();
            o.insert("system".into(), json!(s.join("\n")));
        }
        if spec.sampling.top_p < 1.0 {
            o.insert("top_p".into(), json!(spec.sampling.top_p));
        }
        if let Some(k) = spec.sampling.top_k {
            o.insert("top_k".into(), json!(k));
        }
        if let Some(tools) = spec.tools {
            let tools: Vec<_> = super::tool_functions(tools)
                .map(|f| {
                    let mut t = serde_json::Map::new();
                    for key in ["name", "description"] {
                        if let Some(v) = f.get(key) {
                            t.insert(key.into(), v.clone());
                        }
                    }
                    let schema = f.get("parameters").cloned();
                    t.insert(
                        "input_schema".into(),
                        schema.unwrap_or_else(|| json!({ "type": "object" })),
                    );
                    t
                })
                .collect();
            o.insert("tools".into(), json!(tools));
        }
        super::encode(b, spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let e: Event<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("event is not a Messages API event: {e}"))
        })?;
        if let Some(err) = e.error {
            return Err(super::server_error(&err));
        }
        let mut ev = StreamEvent::default();
        match e.kind.as_deref() {
            Some("message_start") => {
                if let Some(m) = e.message {
                    ev.id = m.id;
                    ev.model = m.model;
                    ev.usage = m.usage.map(|u| u.usage(false));
                }
            }
            Some("content_block_start") => {
                let call = e.content_block.and_then(|b| b.call(e.index.unwrap_or(0)));
                ev.tool_calls.extend(call);
            }
            Some("content_block_delta") => {
                if let Some(d) = e.delta {
                    match d.kind.as_deref() {
                        Some("thinking_delta") => ev.reasoning = super::non_empty(d.thinking),
                        Some("text_delta") | None => ev.text = super::non_empty(d.text),
                        Some("input_json_delta") => {
                            if let Some(piece) = super::non_empty(d.partial_json) {
                                ev.tool_calls.push(super::ToolDelta {
                                    index: e.index.unwrap_or(0),
                                    arguments: Some(piece),
                                    ..super::ToolDelta::default()
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
            Some("message_delta") => {
                ev.finish_reason = e.delta.and_then(|d| d.stop_reason);
                ev.usage = e.usage.map(|u| u.usage(true));
            }
            Some("message_stop") => ev.done = true,
            // A whole answer (not streamed): the message object.
            Some("message") => {
                ev.id = e.id;
                ev.model = e.model;
                ev.finish_reason = e.stop_reason;
                ev.usage = e.usage.map(|u| u.usage(true));
                let (mut text, mut thinking) = (String::new(), String::new());
                for (k, b) in e.content.into_iter().flatten().enumerate() {
                    match b.kind.as_deref() {
                        Some("thinking") => thinking.push_str(b.thinking.as_deref().unwrap_or("")),
                        Some("text") => text.push_str(b.text.as_deref().unwrap_or("")),
                        Some("tool_use") => ev.tool_calls.extend(b.call(k as u32)),
                        _ => {}
                    }
                }
                ev.text = super::gathered(text);
                ev.reasoning = super::gathered(thinking);
            }
            // ping, content_block_stop and event types added later carry no tokens.
            _ => {}
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> StreamEvent<'_> {
        Messages.parse_event(s.as_bytes()).unwrap()
    }

    /// Events as llama.cpp's server sends them (captured from the pinned build) and as
    /// Anthropic documents them (thinking, cache counts, errors).
    #[test]
    fn a_stream_in_order() {
        let start = parse(
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"gemma-3-270m","stop_reason":null,"usage":{"cache_read_input_tokens":21,"input_tokens":5,"output_tokens":1}}}"#,
        );
        assert_eq!(start.id.as_deref(), Some("msg_1"));
        let u = start.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens()),
            (Some(26), None, Some(21))
        );
        let think = parse(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}"#,
        );
        assert_eq!(
            (think.reasoning.as_deref(), think.text.as_deref()),
            (Some("Let me"), None)
        );
        for quiet in [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_stop","index":1}"#,
        ] {
            let ev = parse(quiet);
            assert!(
                ev.text.is_none() && ev.reasoning.is_none() && !ev.done,
                "{quiet}"
            );
        }
        let text = parse(
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
        );
        assert_eq!(text.text.as_deref(), Some("Hi"));
        let delta = parse(
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":8}}"#,
        );
        assert_eq!(delta.finish_reason.as_deref(), Some("max_tokens"));
        let u = delta.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (None, Some(8)));
        assert!(parse(r#"{"type":"message_stop"}"#).done);
        let err = Messages
            .parse_event(
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )
            .unwrap_err();
        assert!(
            matches!(&err, super::super::EventError::Server(e) if e.contains("Overloaded")),
            "{err}"
        );
    }

    #[test]
    fn a_whole_message() {
        let ev = parse(
            r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"Hello"}],"model":"g","stop_reason":"end_turn","usage":{"input_tokens":5,"cache_read_input_tokens":21,"output_tokens":8}}"#,
        );
        assert_eq!(
            (ev.reasoning.as_deref(), ev.text.as_deref()),
            (Some("hmm"), Some("Hello"))
        );
        assert_eq!(ev.usage.unwrap().completion_tokens, Some(8));
        assert_eq!(ev.usage.unwrap().prompt_tokens, Some(26));
        assert_eq!(ev.finish_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn system_messages_go_to_the_system_field() {
        let sampling = crate::contract::Sampling::default();
        let msgs = [
            crate::api::Message::new("system", "be brief"),
            crate::api::Message::new("user", "hi"),
        ];
        let spec = RequestSpec {
            prompt: "hi",
            messages: Some(&msgs),
            max_tokens: 4,
            ..RequestSpec::for_test(&sampling)
        };
        let v: serde_json::Value = serde_json::from_slice(&Messages.body(&spec)).unwrap();
        assert_eq!(v["system"], "be brief");
        assert_eq!(v["messages"].as_array().unwrap().len(), 1);
        assert!(v.get("top_p").is_none(), "top_p 1 is not sent");
    }

    /// Tool calls as Anthropic documents them: a `tool_use` block opens a call (`input: {}`),
    /// `input_json_delta`s carry its arguments by block index; a whole body's `input` is an
    /// object.
    #[test]
    fn tool_calls_streamed_and_whole() {
        let mut calls = Vec::new();
        for e in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Os"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"lo\"}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
        ] {
            for d in &parse(e).tool_calls {
                crate::api::gather_tool_call(&mut calls, d);
            }
        }
        let got: Vec<_> = calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(got, [("get_weather", r#"{"city": "Oslo"}"#)]);
        let whole = parse(
            r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t","name":"add","input":{"a":2}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":8}}"#,
        );
        assert_eq!(whole.text.as_deref(), Some("ok"));
        assert_eq!(whole.tool_calls.len(), 1);
        assert_eq!(whole.tool_calls[0].arguments.as_deref(), Some(r#"{"a":2}"#));
    }

    #[test]
    fn tools_go_in_the_messages_shape() {
        let sampling = crate::contract::Sampling::default();
        let tools = serde_json::json!([{"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object", "properties": {}}}}, {"type": "function", "function": {"name": "now"}}]);
        let spec = RequestSpec {
            tools: Some(&tools),
            ..RequestSpec::for_test(&sampling)
        };
        let v: serde_json::Value = serde_json::from_slice(&Messages.body(&spec)).unwrap();
        assert_eq!(
            v["tools"],
            serde_json::json!([{"name": "add", "description": "adds", "input_schema": {"type": "object", "properties": {}}}, {"name": "now", "input_schema": {"type": "object"}}])
        );
    }
}
