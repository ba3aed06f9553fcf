//! OpenAI's Responses API as vLLM serves it: `response.created` and `response.in_progress`,
//! a reasoning item whose text streams as `response.reasoning_text.delta`, a message item
//! whose text streams as `response.output_text.delta` (each with `sequence_number`), the
//! items' `*.done` events, then `response.completed` (or `response.incomplete` with
//! `incomplete_details.reason = "max_output_tokens"`) carrying the usage. No `[DONE]`.
//! A tool answer opens each call with `response.output_item.added` (a `function_call` item,
//! arguments empty) and streams its arguments as `response.function_call_arguments.delta`.

use serde::Deserialize;
use serde_json::json;

use super::{
    Ask, Common, Counts, Message, Reply, Text, Wire, from_body, join_messages, named_event,
};

pub(crate) struct Responses;

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Messages(Vec<Message>),
}

#[derive(Deserialize)]
struct Request {
    #[serde(flatten)]
    common: Common,
    input: Option<Input>,
    #[serde(default)]
    instructions: Option<Text>,
    max_output_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tools: Vec<super::NamedTool>,
}

fn usage(c: &Counts) -> serde_json::Value {
    let mut u = json!({
        "input_tokens": c.prompt,
        "input_tokens_details": { "cached_tokens": c.cached },
        "output_tokens": c.completion,
        "total_tokens": c.prompt + c.completion,
    });
    if c.reasons {
        u["output_tokens_details"] = json!({ "reasoning_tokens": c.reasoning });
    }
    u
}

fn response(
    r: &Reply<'_>,
    status: &str,
    output: serde_json::Value,
    c: Option<&Counts>,
) -> serde_json::Value {
    let mut v = json!({
        "id": r.id, "object": "response", "created_at": r.created, "model": r.model,
        "status": status, "output": output,
    });
    if let Some(c) = c {
        if c.usage {
            v["usage"] = usage(c);
        }
        if status == "incomplete" {
            v["incomplete_details"] = json!({ "reason": "max_output_tokens" });
        }
    }
    v
}

fn status(c: &Counts) -> &'static str {
    if c.finish == "length" {
        "incomplete"
    } else {
        "completed"
    }
}

impl Wire for Responses {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let mut a = req.common.ask("input");
        if let Some(i) = &req.instructions {
            i.push_to(&mut a.prompt);
        }
        match &req.input {
            Some(Input::One(s)) => super::push_line(&mut a.prompt, s),
            Some(Input::Messages(m)) => {
                join_messages(m, &mut a.prompt);
                super::images_in(m, &mut a.images)?;
            }
            None => {}
        }
        a.chat = true;
        a.max_tokens = req.max_output_tokens;
        a.stream = req.stream;
        a.include_usage = true;
        a.tools = req.tools.into_iter().map(|t| t.name).collect();
        Ok(a)
    }

    fn open(&self, r: &Reply<'_>, buf: &mut String) {
        let shell = response(r, "in_progress", json!([]), None);
        named_event(
            buf,
            "response.created",
            &json!({ "type": "response.created", "sequence_number": 0, "response": shell }),
        );
        named_event(
            buf,
            "response.in_progress",
            &json!({ "type": "response.in_progress", "sequence_number": 1, "response": shell }),
        );
    }

    fn chunk(
        &self,
        r: &Reply<'_>,
        buf: &mut String,
        reasoning: Option<&str>,
        answer: Option<&str>,
    ) {
        if let Some(t) = reasoning {
            named_event(
                buf,
                "response.reasoning_text.delta",
                &json!({ "type": "response.reasoning_text.delta", "item_id": format!("rs_{}", r.id),
                         "output_index": 0, "content_index": 0, "delta": t }),
            );
        }
        if let Some(t) = answer {
            named_event(
                buf,
                "response.output_text.delta",
                &json!({ "type": "response.output_text.delta", "item_id": format!("msg_{}", r.id),
                         "output_index": 1, "content_index": 0, "delta": t }),
            );
        }
    }

    fn end(&self, r: &Reply<'_>, buf: &mut String, c: &Counts) {
        named_event(
            buf,
            "response.output_text.done",
            &json!({ "type": "response.output_text.done", "item_id": format!("msg_{}", r.id), "output_index": 1, "content_index": 0 }),
        );
        let kind = if status(c) == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        named_event(
            buf,
            kind,
            &json!({ "type": kind, "response": response(r, status(c), json!([]), Some(c)) }),
        );
    }

    fn refused(&self, buf: &mut String, message: &str) {
        named_event(
            buf,
            "response.failed",
            &json!({ "type": "response.failed", "response": { "status": "failed",
                     "error": { "code": "invalid_prompt", "message": message } } }),
        );
    }

    fn malformed(&self, _r: &Reply<'_>, buf: &mut String) {
        buf.push_str("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\n\n");
    }

    fn tool_chunk(&self, r: &Reply<'_>, buf: &mut String, pieces: &[crate::sim::tools::Piece]) {
        for p in pieces {
            let item_id = format!("fc_{}_{}", r.id, p.call);
            match &p.name {
                Some(name) => named_event(
                    buf,
                    "response.output_item.added",
                    &json!({ "type": "response.output_item.added", "output_index": p.call,
                             "item": { "type": "function_call", "id": item_id,
                                       "call_id": format!("call_{}_{}", r.id, p.call),
                                       "name": name, "arguments": "", "status": "in_progress" } }),
                ),
                None => named_event(
                    buf,
                    "response.function_call_arguments.delta",
                    &json!({ "type": "response.function_call_arguments.delta", "item_id": item_id,
                             "output_index": p.call, "delta": p.arguments }),
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
        let output: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| {
                json!({ "type": "function_call", "id": format!("fc_{}_{k}", r.id),
                        "call_id": format!("call_{}_{k}", r.id), "name": name,
                        "arguments": args, "status": "completed" })
            })
            .collect();
        response(r, status(c), json!(output), Some(c))
    }

    fn whole(&self, r: &Reply<'_>, reasoning: &str, answer: &str, c: &Counts) -> serde_json::Value {
        let mut output = Vec::new();
        if !reasoning.is_empty() {
            output.push(json!({ "type": "reasoning", "id": format!("rs_{}", r.id),
                "content": [{ "type": "reasoning_text", "text": reasoning }] }));
        }
        output.push(json!({ "type": "message", "id": format!("msg_{}", r.id), "role": "assistant",
            "status": "completed", "content": [{ "type": "output_text", "text": answer, "annotations": [] }] }));
        response(r, status(c), json!(output), Some(c))
    }
}
