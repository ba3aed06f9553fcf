//! The simulator's side of each endpoint API: how a request body is read into what it asks of
//! the engine ([`Ask`]), and how the engine's tokens are written back as that API's events or
//! whole answer. One file per API, mirroring the client's adapters in `crate::api` (the
//! simulator is the ground truth the adapters are tested against, so each file follows the
//! API's real server format, not the client's reading of it).
//!
//! Generated text is plain ASCII words (the simulator's vocabulary), so events are written
//! with `format!` and need no JSON escaping.

mod anthropic;
mod embeddings;
mod ollama;
mod openai;
mod responses;
mod tgi;

use serde::Deserialize;

/// Every API the simulator serves, with its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Chat,
    Completions,
    Responses,
    Messages,
    Embeddings,
    TgiStream,
    TgiWhole,
    Ollama,
}

impl Api {
    pub(crate) const ALL: [Api; 8] = [
        Api::Chat,
        Api::Completions,
        Api::Responses,
        Api::Messages,
        Api::Embeddings,
        Api::TgiStream,
        Api::TgiWhole,
        Api::Ollama,
    ];

    pub(crate) fn route(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
            Api::Embeddings => "/v1/embeddings",
            Api::TgiStream => "/generate_stream",
            Api::TgiWhole => "/generate",
            Api::Ollama => "/api/chat",
        }
    }

    pub(crate) fn wire(self) -> &'static dyn Wire {
        match self {
            Api::Chat => &openai::OpenAi::Chat,
            Api::Completions => &openai::OpenAi::Completions,
            Api::Responses => &responses::Responses,
            Api::Messages => &anthropic::Messages,
            Api::Embeddings => &embeddings::Embeddings,
            Api::TgiStream => &tgi::Tgi { stream: true },
            Api::TgiWhole => &tgi::Tgi { stream: false },
            Api::Ollama => &ollama::Ollama,
        }
    }
}

/// What a request asks of the simulator, whatever its API.
#[derive(Debug, Default)]
pub(crate) struct Ask {
    pub model: Option<String>,
    /// The prompt's text, its messages or inputs joined by newlines.
    pub prompt: String,
    /// The request is chat-shaped: the chat template's tokens go in front of its prompt.
    pub chat: bool,
    pub max_tokens: Option<u32>,
    pub min_tokens: Option<u32>,
    pub ignore_eos: bool,
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage` (the other APIs always report usage).
    pub include_usage: bool,
    /// The request lets a reasoning model think.
    pub thinking: bool,
    /// The JSON field that holds the prompt, for the error when it is empty.
    pub prompt_field: &'static str,
    /// Inputs in the request (embeddings; 0 elsewhere).
    pub inputs: u32,
    /// The body's `priority` (vLLM's and SGLang's field; 0 when absent).
    pub priority: i64,
    /// Its messages' images, in order.
    pub images: Vec<SimImage>,
    /// The names of the tools it offers (an API whose wire takes tools).
    pub tools: Vec<String>,
}

/// What one answer is: its id and the shared facts it names.
pub(crate) struct Reply<'a> {
    pub id: &'a str,
    pub model: &'a str,
    /// `model` as a JSON string.
    pub model_json: &'a str,
    pub created: u64,
}

/// The counts and end of one answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counts {
    pub prompt: u32,
    pub completion: u32,
    pub cached: u32,
    pub reasoning: u32,
    /// The simulator reasons (report the reasoning count where the API has a field for it).
    pub reasons: bool,
    /// Usage is reported (`stream_usage`, and OpenAI's `include_usage` when streaming).
    pub usage: bool,
    pub finish: &'static str,
    /// Inputs embedded (embeddings).
    pub inputs: u32,
    /// The request's timing, from the ground truth, for answers that carry it (`timings`).
    pub timings: Option<Timings>,
}

/// One finished request's engine timing, from the ground truth: as llama-server states it in
/// its `timings`, or TGI in its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timings {
    /// Arrival to admission, µs.
    pub queue_us: u64,
    /// Admission to the first token, µs.
    pub prefill_us: u64,
    /// The first token to the last, µs.
    pub decode_us: u64,
    /// Prompt tokens evaluated (not served from the cache).
    pub prompt_n: u32,
    pub cache_n: u32,
    pub predicted_n: u32,
    /// Speculative decoding's draft tokens proposed and accepted (llama.cpp's `draft_n`,
    /// `draft_n_accepted`), when it drafted.
    pub drafts: Option<(u32, u32)>,
}

impl Timings {
    /// llama-server's `timings` object: its times in ms (µs exactly: the shortest decimal
    /// that reads back as the same double), its counts.
    pub(crate) fn value(&self) -> serde_json::Value {
        let ms = |us: u64| us as f64 / 1000.0;
        let mut v = serde_json::json!({
            "cache_n": self.cache_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": ms(self.prefill_us),
            "predicted_n": self.predicted_n,
            "predicted_ms": ms(self.decode_us),
        });
        if let Some((drafted, accepted)) = self.drafts {
            v["draft_n"] = drafted.into();
            v["draft_n_accepted"] = accepted.into();
        }
        v
    }
}

/// One API's format, as its servers speak it.
pub(crate) trait Wire: Send + Sync {
    /// Reads a request body.
    fn ask(&self, body: &[u8]) -> Result<Ask, String>;
    /// The content type of a streamed answer.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }
    /// What is sent before the first token (a role-only chunk, `message_start`, …).
    fn open(&self, _r: &Reply<'_>, _buf: &mut String) {}
    /// One chunk of generated text: its reasoning part, its answer part.
    fn chunk(&self, r: &Reply<'_>, buf: &mut String, reasoning: Option<&str>, answer: Option<&str>);
    /// The end of a streamed answer.
    fn end(&self, r: &Reply<'_>, buf: &mut String, c: &Counts);
    /// The engine refused the request after the stream began.
    fn refused(&self, buf: &mut String, message: &str) {
        buf.push_str("data: ");
        buf.push_str(
            &serde_json::json!({ "error": { "message": message, "code": 400 } }).to_string(),
        );
        buf.push_str("\n\n");
    }
    /// An event that is not valid JSON (the malformed fault).
    fn malformed(&self, r: &Reply<'_>, buf: &mut String) {
        buf.push_str("data: {\"id\":\"");
        buf.push_str(r.id);
        buf.push_str("\",\"choices\":[{\"delta\":{\"content\n\n");
    }
    /// A whole answer.
    fn whole(&self, r: &Reply<'_>, reasoning: &str, answer: &str, c: &Counts) -> serde_json::Value;
    /// Writes pieces of tool calls as one event (an API that takes tools; others never get
    /// a tool answer).
    fn tool_chunk(&self, _r: &Reply<'_>, _buf: &mut String, _pieces: &[super::tools::Piece]) {}
    /// A whole answer of tool calls (name, arguments).
    fn whole_tools(
        &self,
        r: &Reply<'_>,
        _calls: &[(String, String)],
        c: &Counts,
    ) -> serde_json::Value {
        self.whole(r, "", "", c)
    }
    /// Headers a whole answer carries besides its content type (TGI's timing).
    fn head(&self, _c: &Counts) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// An offered tool as the Responses and Messages APIs write it: its name at the top.
#[derive(Deserialize)]
pub(crate) struct NamedTool {
    pub name: String,
}

/// An SSE event with a name (`event:`) and JSON data, as Anthropic's and the Responses API's
/// streams send them.
pub(crate) fn named_event(buf: &mut String, name: &str, data: &serde_json::Value) {
    buf.push_str("event: ");
    buf.push_str(name);
    buf.push_str("\ndata: ");
    buf.push_str(&data.to_string());
    buf.push_str("\n\n");
}

/// A string, or a list of strings or `{ "type": "text", "text": … }` parts (OpenAI's,
/// Anthropic's and the Responses API's content).
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Text {
    One(String),
    Many(Vec<Part>),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Part {
    Str(String),
    Obj {
        text: Option<String>,
        /// An image part: the Chat Completions API's `{"url": …}`, the Responses API's string.
        #[serde(default)]
        image_url: Option<ImageUrl>,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum ImageUrl {
    Url(String),
    Obj { url: String },
}

/// An image a request carried, as the simulator read it: its size from its header, and its
/// content's hash (what the encoder cache is keyed by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SimImage {
    pub width: u32,
    pub height: u32,
    pub hash: u64,
}

/// Reads an image part's URL: a `data:` URI of an image a server takes (the simulator
/// fetches nothing). The error is the 400's message.
fn read_image(url: &str) -> Result<SimImage, String> {
    use base64::Engine;
    let Some(rest) = url.strip_prefix("data:") else {
        return Err("the simulator fetches no image URLs: send images as data: URIs".into());
    };
    let Some((_, data)) = rest.split_once(";base64,") else {
        return Err("an image data: URI must be base64 (data:image/png;base64,…)".into());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("an image's base64 is invalid: {e}"))?;
    let (_, width, height) = crate::contract::images::describe(&bytes)?;
    Ok(SimImage {
        width,
        height,
        hash: crate::text::hash_bytes(&bytes),
    })
}

/// Every image part of the messages, read, in order.
pub(crate) fn images_in(messages: &[Message], out: &mut Vec<SimImage>) -> Result<(), String> {
    for m in messages {
        if let Some(Text::Many(parts)) = &m.content {
            for p in parts {
                if let Part::Obj {
                    image_url: Some(u), ..
                } = p
                {
                    let url = match u {
                        ImageUrl::Url(s) | ImageUrl::Obj { url: s } => s,
                    };
                    out.push(read_image(url)?);
                }
            }
        }
    }
    Ok(())
}

impl Text {
    pub(crate) fn push_to(&self, out: &mut String) {
        match self {
            Text::One(s) => push_line(out, s),
            Text::Many(parts) => {
                for p in parts {
                    match p {
                        Part::Str(s) => push_line(out, s),
                        Part::Obj { text: Some(s), .. } => push_line(out, s),
                        Part::Obj { text: None, .. } => {}
                    }
                }
            }
        }
    }
}

/// A chat message's content (other fields are not read).
#[derive(Deserialize)]
pub(crate) struct Message {
    #[serde(default)]
    pub content: Option<Text>,
}

pub(crate) fn push_line(out: &mut String, s: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// The messages' contents, joined.
pub(crate) fn join_messages(messages: &[Message], out: &mut String) {
    for m in messages {
        if let Some(c) = &m.content {
            c.push_to(out);
        }
    }
}

/// The length fields a request may carry at its top level whatever its API (vLLM's and
/// llama.cpp's `ignore_eos` and `min_tokens`, sent by goodput for OpenAI's APIs and through
/// `extra_body` for others), and Qwen3's `chat_template_kwargs.enable_thinking` switch.
#[derive(Deserialize, Default)]
pub(crate) struct Common {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub min_tokens: Option<u32>,
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub chat_template_kwargs: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: Option<i64>,
}

impl Common {
    /// The template switch allows thinking (absent: it does).
    pub(crate) fn thinking(&self) -> bool {
        self.chat_template_kwargs
            .as_ref()
            .and_then(|k| k.get("enable_thinking"))
            .and_then(serde_json::Value::as_bool)
            != Some(false)
    }

    /// An [`Ask`] with these fields filled.
    pub(crate) fn ask(self, prompt_field: &'static str) -> Ask {
        Ask {
            thinking: self.thinking(),
            model: self.model,
            min_tokens: self.min_tokens,
            ignore_eos: self.ignore_eos,
            priority: self.priority.unwrap_or(0),
            prompt_field,
            ..Ask::default()
        }
    }
}

/// Parses `body` as `T`, the message naming the API's body.
pub(crate) fn from_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))
}
