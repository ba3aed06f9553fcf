//! Anthropic's Messages API as Anthropic documents it: `message_start` (input usage, output
//! usage 1 as a placeholder), a `thinking` content block when thinking is enabled
//! (`thinking = { type = "enabled", budget_tokens = … }`; Anthropic's models think only then),
//! then a `text` block, a `ping` between them, `message_delta` with the stop reason and the
//! cumulative output tokens, `message_stop`. No `[DONE]`. Stop reasons: `max_tokens` where the
//! length cut the answer, `tool_use` after tool calls, else `end_turn`. A tool answer opens
//! each call with a `tool_use` block (`input: {}`) and streams its arguments as
//! `input_json_delta`s; a whole one holds `input` as an object (a string where the arguments
//! are not JSON, which Anthropic itself never sends: the simulator's cut-arguments fault).

use serde::Deserialize;
use serde_json::json;

use super::{
    Ask, Common, Counts, Message, Reply, Text, Wire, from_body, join_messages, named_event,
};

pub(crate) struct Messages;

#[derive(Deserialize)]
struct Request {
    #[serde(flatten)]
    common: Common,
    #[serde(default)]
    system: Option<Text>,
    #[serde(default)]
    messages: Vec<Message>,
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    thinking: Option<Thinking>,
    #[serde(default)]
    tools: Vec<super::NamedTool>,
}

#[derive(Deserialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: String,
}

fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        _ => "end_turn",
    }
}

fn usage(c: &Counts, output: u32) -> serde_json::Value {
    json!({
        "input_tokens": c.prompt - c.cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": c.cached,
        "output_tokens": output,
    })
}

impl Wire for Messages {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let mut a = req.common.ask("messages");
        if let Some(s) = &req.system {
            s.push_to(&mut a.prompt);
        }
        join_messages(&req.messages, &mut a.prompt);
        a.chat = true;
        a.thinking = req.thinking.is_some_and(|t| t.kind == "enabled");
        a.max_tokens = req.max_tokens;
        a.stream = req.stream;
        a.include_usage = true;
        a.tools = req.tools.into_iter().map(|t| t.name).collect();
        Ok(a)
    }

    fn open(&self, r: &Reply<'_>, buf: &mut String) {
        // The input usage is not known to the stream's writer before the engine admits the
        // request; as Anthropic's own first event, this one carries the message only, and
        // `message_delta` carries every count.
        named_event(
            buf,
            "message_start",
            &json!({ "type": "message_start", "message": {
                "id": r.id, "type": "message", "role": "assistant", "content": [],
                "model": r.model, "stop_reason": null, "stop_sequence": null } }),
        );
        named_event(buf, "ping", &json!({ "type": "ping" }));
    }

    fn chunk(
        &self,
        _r: &Reply<'_>,
        buf: &mut String,
        reasoning: Option<&str>,
        answer: Option<&str>,
    ) {
        if let Some(t) = reasoning {
            named_event(
                buf,
                "content_block_delta",
                &json!({ "type": "content_block_delta", "index": 0,
                         "delta": { "type": "thinking_delta", "thinking": t } }),
            );
        }
        if let Some(t) = answer {
            named_event(
                buf,
                "content_block_delta",
                &json!({ "type": "content_block_delta", "index": 1,
                         "delta": { "type": "text_delta", "text": t } }),
            );
        }
    }

    fn end(&self, _r: &Reply<'_>, buf: &mut String, c: &Counts) {
        let mut delta = json!({ "type": "message_delta",
            "delta": { "stop_reason": stop_reason(c.finish), "stop_sequence": null } });
        if c.usage {
            delta["usage"] = usage(c, c.completion);
        }
        named_event(buf, "message_delta", &delta);
        named_event(buf, "message_stop", &json!({ "type": "message_stop" }));
    }

    fn refused(&self, buf: &mut String, message: &str) {
        named_event(
            buf,
            "error",
            &json!({ "type": "error", "error": { "type": "invalid_request_error", "message": message } }),
        );
    }

    fn malformed(&self, _r: &Reply<'_>, buf: &mut String) {
        buf.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\n\n");
    }

    fn tool_chunk(&self, r: &Reply<'_>, buf: &mut String, pieces: &[crate::sim::tools::Piece]) {
        for p in pieces {
            match &p.name {
                Some(name) => named_event(
                    buf,
                    "content_block_start",
                    &json!({ "type": "content_block_start", "index": p.call,
                             "content_block": { "type": "tool_use",
                                                "id": format!("toolu_{}_{}", r.id, p.call),
                                                "name": name, "input": {} } }),
                ),
                None => named_event(
                    buf,
                    "content_block_delta",
                    &json!({ "type": "content_block_delta", "index": p.call,
                             "delta": { "type": "input_json_delta", "partial_json": p.arguments } }),
                ),
            }
        }
    }

    fn whole_tools(
        &self,
        r: &Reply<'_>,
        calls: &[(String, String)],
        c: &Counts,
    ) -> serde_json::Value {
        let content: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| {
                let input =
                    serde_json::from_str::<serde_json::Value>(args).unwrap_or_else(|_| json!(args));
                json!({ "type": "tool_use", "id": format!("toolu_{}_{k}", r.id),
                        "name": name, "input": input })
            })
            .collect();
        let mut whole = self.whole(r, "", "", c);
        whole["content"] = json!(content);
        whole
    }

    fn whole(&self, r: &Reply<'_>, reasoning: &str, answer: &str, c: &Counts) -> serde_json::Value {
        let mut content = Vec::new();
        if !reasoning.is_empty() {
            content.push(json!({ "type": "thinking", "thinking": reasoning, "signature": "sim" }));
        }
        content.push(json!({ "type": "text", "text": answer }));
        json!({
            "id": r.id, "type": "message", "role": "assistant", "content": content,
            "model": r.model, "stop_reason": stop_reason(c.finish), "stop_sequence": null,
            "usage": usage(c, c.completion),
        })
    }
}
