//! OpenAI's chat and text completions, as vLLM serves them: a chat stream opens with a
//! role-only chunk (a client that takes it for the first token under-reports TTFT), reasoning
//! goes in `reasoning_content`, the finish reason in an empty last chunk, usage (when asked
//! for with `stream_options.include_usage`) in a chunk with no choices, then `[DONE]`.

use serde::Deserialize;
use serde_json::json;

use super::{Ask, Common, Counts, Message, Reply, Text, Wire, from_body, join_messages};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenAi {
    Chat,
    Completions,
}

#[derive(Deserialize)]
struct Request {
    #[serde(flatten)]
    common: Common,
    messages: Option<Vec<Message>>,
    prompt: Option<Text>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    tools: Vec<Tool>,
}

/// An offered tool: `{"type": "function", "function": {"name", …}}`.
#[derive(Deserialize)]
struct Tool {
    function: ToolFunction,
}

#[derive(Deserialize)]
struct ToolFunction {
    name: String,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// OpenAI's usage object.
pub(crate) fn usage(c: &Counts) -> serde_json::Value {
    let mut u = json!({
        "prompt_tokens": c.prompt,
        "completion_tokens": c.completion,
        "total_tokens": c.prompt + c.completion,
        "prompt_tokens_details": { "cached_tokens": c.cached },
    });
    if c.reasons {
        u["completion_tokens_details"] = json!({ "reasoning_tokens": c.reasoning });
    }
    u
}

impl OpenAi {
    fn object(self, stream: bool) -> &'static str {
        match (self, stream) {
            (OpenAi::Chat, true) => "chat.completion.chunk",
            (OpenAi::Chat, false) => "chat.completion",
            (OpenAi::Completions, _) => "text_completion",
        }
    }

    /// One chunk; `choice` is the choice's fields before `logprobs`.
    fn event(self, r: &Reply<'_>, buf: &mut String, choice: &str, finish: Option<&str>) {
        self.event_with(r, buf, choice, finish, "");
    }

    /// One chunk with more top-level fields after `choices` (`tail`: `,"key":value…`).
    fn event_with(
        self,
        r: &Reply<'_>,
        buf: &mut String,
        choice: &str,
        finish: Option<&str>,
        tail: &str,
    ) {
        use std::fmt::Write;
        let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
        let _ = write!(
            buf,
            "data: {{\"id\":\"{}\",\"object\":\"{}\",\"created\":{},\"model\":{},\
             \"choices\":[{{\"index\":0,{choice},\"logprobs\":null,\"finish_reason\":{finish}}}]{tail}}}\n\n",
            r.id,
            self.object(true),
            r.created,
            r.model_json
        );
    }

    fn empty_choice(self) -> &'static str {
        match self {
            OpenAi::Chat => r#""delta":{}"#,
            OpenAi::Completions => r#""text":"""#,
        }
    }
}

impl Wire for OpenAi {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let chat = *self == OpenAi::Chat;
        let mut a = req.common.ask(if chat { "messages" } else { "prompt" });
        if chat {
            join_messages(req.messages.as_deref().unwrap_or_default(), &mut a.prompt);
            super::images_in(req.messages.as_deref().unwrap_or_default(), &mut a.images)?;
        } else if let Some(p) = &req.prompt {
            p.push_to(&mut a.prompt);
        }
        a.chat = chat;
        // Completions are not chat-templated: there is nothing to think in.
        a.thinking &= chat;
        a.max_tokens = req.max_completion_tokens.or(req.max_tokens);
        a.stream = req.stream;
        a.include_usage = req.stream_options.is_some_and(|o| o.include_usage);
        if chat {
            a.tools = req.tools.into_iter().map(|t| t.function.name).collect();
        }
        Ok(a)
    }

    fn open(&self, r: &Reply<'_>, buf: &mut String) {
        if *self == OpenAi::Chat {
            self.event(r, buf, r#""delta":{"role":"assistant","content":""}"#, None);
        }
    }

    fn chunk(
        &self,
        r: &Reply<'_>,
        buf: &mut String,
        reasoning: Option<&str>,
        answer: Option<&str>,
    ) {
        let choice = match self {
            OpenAi::Chat => match (reasoning, answer) {
                (None, None) => r#""delta":{}"#.to_owned(),
                (Some(r), None) => format!(r#""delta":{{"reasoning_content":"{r}"}}"#),
                (None, Some(c)) => format!(r#""delta":{{"content":"{c}"}}"#),
                (Some(r), Some(c)) => {
                    format!(r#""delta":{{"reasoning_content":"{r}","content":"{c}"}}"#)
                }
            },
            OpenAi::Completions => format!(r#""text":"{}""#, answer.unwrap_or("")),
        };
        self.event(r, buf, &choice, None);
    }

    fn end(&self, r: &Reply<'_>, buf: &mut String, c: &Counts) {
        // llama-server states the request's timing in its finish chunk.
        let tail = c
            .timings
            .map_or(String::new(), |t| format!(r#","timings":{}"#, t.value()));
        self.event_with(r, buf, self.empty_choice(), Some(c.finish), &tail);
        if c.usage {
            let u = json!({
                "id": r.id, "object": self.object(true), "created": r.created, "model": r.model,
                "choices": [], "usage": usage(c),
            });
            buf.push_str("data: ");
            buf.push_str(&u.to_string());
            buf.push_str("\n\n");
        }
        buf.push_str("data: [DONE]\n\n");
    }

    fn tool_chunk(&self, r: &Reply<'_>, buf: &mut String, pieces: &[crate::sim::tools::Piece]) {
        // vLLM's shape: a call opens with its id, type and name (arguments empty); later
        // pieces carry only the call's index and a piece of its arguments.
        let calls: Vec<serde_json::Value> = pieces
            .iter()
            .map(|p| match &p.name {
                Some(name) => json!({
                    "index": p.call, "id": format!("call_{}_{}", r.id, p.call), "type": "function",
                    "function": { "name": name, "arguments": p.arguments },
                }),
                None => json!({ "index": p.call, "function": { "arguments": p.arguments } }),
            })
            .collect();
        let delta = json!({ "tool_calls": calls });
        self.event(r, buf, &format!("\"delta\":{delta}"), None);
    }

    fn whole_tools(
        &self,
        r: &Reply<'_>,
        calls: &[(String, String)],
        c: &Counts,
    ) -> serde_json::Value {
        let mut whole = self.whole(r, "", "", c);
        let calls: Vec<serde_json::Value> = calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| {
                json!({
                    "id": format!("call_{}_{k}", r.id), "type": "function",
                    "function": { "name": name, "arguments": args },
                })
            })
            .collect();
        whole["choices"][0]["message"]["content"] = serde_json::Value::Null;
        whole["choices"][0]["message"]["tool_calls"] = json!(calls);
        whole
    }

    fn whole(&self, r: &Reply<'_>, reasoning: &str, answer: &str, c: &Counts) -> serde_json::Value {
        let choice = match self {
            OpenAi::Chat => {
                let mut message = json!({ "role": "assistant", "content": answer });
                if !reasoning.is_empty() {
                    message["reasoning_content"] = json!(reasoning);
                }
                json!({ "index": 0, "message": message, "logprobs": null, "finish_reason": c.finish })
            }
            OpenAi::Completions => json!({
                "index": 0, "text": answer, "logprobs": null, "finish_reason": c.finish }),
        };
        let mut whole = json!({
            "id": r.id, "object": self.object(false), "created": r.created,
            "model": r.model, "choices": [choice], "usage": usage(c),
        });
        if let Some(t) = c.timings {
            whole["timings"] = t.value();
        }
        whole
    }
}
