//! Ollama's native chat API: newline-delimited JSON (`application/x-ndjson`), one object per
//! chunk with `message.content` and, for a thinking model, `message.thinking`, then a last
//! object with `"done": true`, `done_reason` and the counts (`prompt_eval_count`: the prompt
//! tokens evaluated, the cached prefix left out, as Ollama counts them; `eval_count`). Ollama
//! streams unless `"stream": false`; the output length is `options.num_predict`; a thinking
//! model thinks unless `"think": false`.

use serde::Deserialize;
use serde_json::json;

use super::{Ask, Common, Counts, Message, Reply, Wire, from_body, join_messages};

pub(crate) struct Ollama;

#[derive(Deserialize)]
struct Request {
    #[serde(flatten)]
    common: Common,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    think: Option<bool>,
    #[serde(default)]
    options: Options,
}

#[derive(Deserialize, Default)]
struct Options {
    num_predict: Option<u32>,
}

fn line(buf: &mut String, v: &serde_json::Value) {
    buf.push_str(&v.to_string());
    buf.push('\n');
}

fn last(r: &Reply<'_>, message: serde_json::Value, c: &Counts) -> serde_json::Value {
    let mut v = json!({
        "model": r.model, "created_at": "2026-01-01T00:00:00Z", "message": message,
        "done_reason": if c.finish == "length" { "length" } else { "stop" }, "done": true,
    });
    if c.usage {
        v["prompt_eval_count"] = json!(c.prompt - c.cached);
        v["eval_count"] = json!(c.completion);
    }
    v
}

impl Wire for Ollama {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let mut a = req.common.ask("messages");
        join_messages(&req.messages, &mut a.prompt);
        a.chat = true;
        a.thinking = req.think != Some(false);
        a.max_tokens = req.options.num_predict;
        a.stream = req.stream != Some(false);
        a.include_usage = true;
        Ok(a)
    }

    fn content_type(&self) -> &'static str {
        "application/x-ndjson"
    }

    fn chunk(
        &self,
        r: &Reply<'_>,
        buf: &mut String,
        reasoning: Option<&str>,
        answer: Option<&str>,
    ) {
        let mut message = json!({ "role": "assistant", "content": answer.unwrap_or("") });
        if let Some(t) = reasoning {
            message["thinking"] = json!(t);
        }
        line(
            buf,
            &json!({ "model": r.model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": false }),
        );
    }

    fn end(&self, r: &Reply<'_>, buf: &mut String, c: &Counts) {
        line(
            buf,
            &last(r, json!({ "role": "assistant", "content": "" }), c),
        );
    }

    fn refused(&self, buf: &mut String, message: &str) {
        line(buf, &json!({ "error": message }));
    }

    fn malformed(&self, _r: &Reply<'_>, buf: &mut String) {
        buf.push_str("{\"message\":{\"content\n");
    }

    fn whole(&self, r: &Reply<'_>, reasoning: &str, answer: &str, c: &Counts) -> serde_json::Value {
        let mut message = json!({ "role": "assistant", "content": answer });
        if !reasoning.is_empty() {
            message["thinking"] = json!(reasoning);
        }
        last(r, message, c)
    }
}
