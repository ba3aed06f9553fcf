//! Endpoint APIs: how a planned request becomes an HTTP body and how the answer's events
//! are read, for each kind of endpoint the contract's `target.api` can name.
//!
//! A seam: each API is one file with an [`Adapter`], and one variant of [`ApiKind`] that
//! [`ApiKind::adapter`] maps to it, with its [`Capabilities`] (what it can send), checked in
//! one place ([`ApiKind::check`]) rather than by comparing kinds. The adapter also says how its
//! stream is framed ([`Framing`]: SSE or JSON lines), which event ends it
//! ([`StreamEvent::done`], besides SSE's `[DONE]`), and how it takes the API key ([`Auth`]);
//! the client does the rest the same way for every API. Adding an API is that file, that
//! variant, and the simulator route that mirrors it (`sim/wire/`).
//!
//! What every adapter must keep to, so that one definition of each metric holds for all:
//! `text` is answer text and `reasoning` is thinking text, each only when the event carries
//! generated tokens of that kind (TTFT is the first event with either, TTFO the first with an
//! answer); usage counts are the server's, in OpenAI's names (prompt = every prompt token the
//! server read, cached ones included).

pub(crate) mod anthropic;
pub(crate) mod embeddings;
mod json;
pub(crate) mod ollama;
pub(crate) mod openai;
pub(crate) mod responses;
pub(crate) mod tgi;
pub mod timing;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// `target.api`. The list of kinds and their names come from the derives (clap's `ValueEnum`
/// lists every variant), so a new kind is its variant, its names and its arm in
/// [`ApiKind::adapter`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum ApiKind {
    /// `POST /v1/chat/completions`.
    #[default]
    #[serde(rename = "openai-chat")]
    #[value(name = "openai-chat")]
    OpenAiChat,
    /// `POST /v1/completions`.
    #[serde(rename = "openai-completions")]
    #[value(name = "openai-completions")]
    OpenAiCompletions,
    /// `POST /v1/responses`: OpenAI's Responses API (typed stream events).
    #[serde(rename = "openai-responses")]
    #[value(name = "openai-responses")]
    OpenAiResponses,
    /// `POST /v1/messages`: Anthropic's Messages API.
    #[serde(rename = "anthropic-messages")]
    #[value(name = "anthropic-messages")]
    AnthropicMessages,
    /// `POST /v1/embeddings`: not streamed; latency and input tokens per second.
    #[serde(rename = "openai-embeddings")]
    #[value(name = "openai-embeddings")]
    OpenAiEmbeddings,
    /// `POST /generate_stream` (or `/generate`): Text Generation Inference's native API.
    #[serde(rename = "tgi-generate")]
    #[value(name = "tgi-generate")]
    TgiGenerate,
    /// `POST /api/chat`: Ollama's native API (newline-delimited JSON).
    #[serde(rename = "ollama-chat")]
    #[value(name = "ollama-chat")]
    OllamaChat,
}

/// What an API can send; checked against the workload before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Chat messages (a dataset's `messages` entries).
    pub messages: bool,
    /// It can ask for exactly `max_tokens` output tokens (`ignore_eos`, `min_tokens`); without
    /// it, output lengths end where the model stops.
    pub exact_output: bool,
    /// It streams its answer (TTFT, ITL and TPOT exist).
    pub streams: bool,
    /// It generates output tokens (embeddings only read their input).
    pub generates: bool,
    /// Several inputs in one request (`workload.batch`).
    pub batches: bool,
    /// Images as content parts of the user's message (`workload.images`).
    pub images: bool,
    /// Tools offered in the request and calls streamed back (`workload.dataset_format` `bfcl`
    /// or `tools`).
    pub tools: bool,
}

/// How a streamed answer is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-Sent Events: `data:` lines, an event per blank line (`text/event-stream`).
    Sse,
    /// One JSON object per line (`application/x-ndjson`, Ollama's native API).
    JsonLines,
}

impl Framing {
    /// Whether a streamed answer's `Content-Type` is this framing's.
    pub fn accepts(self, content_type: &str) -> bool {
        let ct = content_type.trim_start().to_ascii_lowercase();
        match self {
            Framing::Sse => ct.starts_with("text/event-stream"),
            Framing::JsonLines => [
                "application/x-ndjson",
                "application/jsonl",
                "application/json",
            ]
            .iter()
            .any(|p| ct.starts_with(p)),
        }
    }

    /// The content type this framing is served with, for messages.
    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::JsonLines => "application/x-ndjson",
        }
    }
}

/// How an API takes the key (`target.api_key_env`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// The key as this header's value (Anthropic's `x-api-key`).
    Header(&'static str),
}

impl ApiKind {
    /// Its operation as OpenTelemetry's GenAI conventions name it (`gen_ai.operation.name`).
    pub fn operation(self) -> &'static str {
        match self {
            ApiKind::OpenAiCompletions | ApiKind::TgiGenerate => "text_completion",
            ApiKind::OpenAiEmbeddings => "embeddings",
            _ => "chat",
        }
    }

    /// The adapter that speaks this API.
    pub fn adapter(self) -> Box<dyn Adapter> {
        match self {
            ApiKind::OpenAiChat => Box::new(openai::OpenAi::Chat),
            ApiKind::OpenAiCompletions => Box::new(openai::OpenAi::Completions),
            ApiKind::OpenAiResponses => Box::new(responses::Responses),
            ApiKind::AnthropicMessages => Box::new(anthropic::Messages),
            ApiKind::OpenAiEmbeddings => Box::new(embeddings::Embeddings),
            ApiKind::TgiGenerate => Box::new(tgi::Generate),
            ApiKind::OllamaChat => Box::new(ollama::Chat),
        }
    }

    /// What this API can send (its adapter's [`Capabilities`]).
    pub fn capabilities(self) -> Capabilities {
        self.adapter().capabilities()
    }

    /// The name in the contract.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// Every kind, in the order of the list.
    pub fn all() -> &'static [ApiKind] {
        <ApiKind as clap::ValueEnum>::value_variants()
    }

    /// The names of the kinds that can do what `can` says, as the contract spells them.
    fn kinds_that(can: impl Fn(&Capabilities) -> bool) -> String {
        ApiKind::all()
            .iter()
            .filter(|k| can(&k.capabilities()))
            .map(|k| format!("api = \"{}\"", k.name()))
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// Whether this API can send what a workload asks: `Err` says what it cannot (for the
    /// caller to locate in its file).
    pub fn check(self, needs_messages: bool) -> Result<(), CannotSend> {
        let can = self.capabilities();
        if needs_messages && !can.messages {
            return Err(CannotSend(format!(
                "has `messages`, which only {} can send",
                Self::kinds_that(|c| c.messages)
            )));
        }
        Ok(())
    }

    /// Whether this API can send up to `most` images per request.
    pub fn check_images(self, most: u32) -> Result<(), CannotSend> {
        if most > 0 && !self.capabilities().images {
            return Err(CannotSend(format!(
                "asks for images, which only {} can send",
                Self::kinds_that(|c| c.images)
            )));
        }
        Ok(())
    }

    /// Whether this API can offer tools and read the calls streamed back.
    pub fn check_tools(self) -> Result<(), CannotSend> {
        if !self.capabilities().tools {
            return Err(CannotSend(format!(
                "offers tools, which only {} can send and read calls back from",
                Self::kinds_that(|c| c.tools)
            )));
        }
        Ok(())
    }

    /// Whether this API can send `batch` inputs per request.
    pub fn check_batch(self, batch: u32) -> Result<(), CannotSend> {
        if batch > 1 && !self.capabilities().batches {
            return Err(CannotSend(format!(
                "is {batch}, but only {} sends several inputs per request",
                Self::kinds_that(|c| c.batches)
            )));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    #[serde(default)]
    pub temperature: f64,
    #[serde(default = "one")]
    pub top_p: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Sampling seed sent with each request, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_p: 1.0,
            top_k: None,
            seed: None,
        }
    }
}

/// A chat message sent as it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_owned(),
            content: content.into(),
        }
    }
}

/// What an adapter needs to build a request body.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpec<'a> {
    pub model: &'a str,
    pub prompt: &'a str,
    /// Chat messages to send instead of one user message with `prompt`.
    pub messages: Option<&'a [Message]>,
    pub max_tokens: u32,
    pub stream: bool,
    /// Ask for exactly `max_tokens` (`ignore_eos`, `min_tokens`).
    pub exact_output: bool,
    pub sampling: &'a Sampling,
    /// Inputs per request (embeddings; 1 elsewhere): the prompt is sent this many times.
    pub batch: u32,
    /// `target.request.extra_body`: merged into the body (tables into tables).
    pub extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// Images (`data:` URIs) for the user's message, behind its text (`workload.images`).
    pub images: &'a [String],
    /// Tools offered to the model, as the Chat Completions API writes them
    /// (`[{"type": "function", "function": {name, description, parameters}}]`); each adapter
    /// that takes tools writes them in its API's shape.
    pub tools: Option<&'a serde_json::Value>,
}

impl<'a> RequestSpec<'a> {
    /// A small request for tests: model `m`, prompt `p q`, 9 tokens, streamed.
    #[cfg(test)]
    pub(crate) fn for_test(sampling: &'a Sampling) -> RequestSpec<'a> {
        RequestSpec {
            model: "m",
            prompt: "p q",
            messages: None,
            max_tokens: 9,
            stream: true,
            exact_output: false,
            sampling,
            batch: 1,
            extra: None,
            images: &[],
            tools: None,
        }
    }

    /// The chat messages to send: the dataset entry's, or one user message with the prompt.
    pub(crate) fn chat_messages(&self) -> serde_json::Value {
        self.each_message()
            .map(|(role, content)| serde_json::json!({ "role": role, "content": content }))
            .collect()
    }

    /// Each chat message to send, (role, content): the dataset entry's, or one user message
    /// with the prompt.
    pub(crate) fn each_message(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let one = [("user", self.prompt)];
        let given = self.messages.unwrap_or_default();
        let one = one.into_iter().take(usize::from(self.messages.is_none()));
        given
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .chain(one)
    }

    /// `top_k` and `seed` into `o` where the contract sets them (every API that takes them
    /// names them so).
    pub(crate) fn top_k_and_seed(&self, o: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(k) = self.sampling.top_k {
            o.insert("top_k".into(), k.into());
        }
        if let Some(s) = self.sampling.seed {
            o.insert("seed".into(), s.into());
        }
    }
}

/// The JSON an adapter composed, with the contract's extra fields merged in (a table into the
/// table of the same name, so `parameters.x` reaches TGI's `parameters`; validation has
/// refused any field that would replace one the adapter sets), as bytes to send.
pub(crate) fn encode(mut body: serde_json::Value, spec: &RequestSpec<'_>) -> Vec<u8> {
    if !spec.images.is_empty() {
        attach_images(&mut body, spec.images);
    }
    if let (Some(extra), Some(o)) = (spec.extra, body.as_object_mut()) {
        merge(o, extra);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The images (`data:` URIs) as content parts of the last user message, behind its text, so
/// a shared text prefix stays a prefix: the Chat Completions API's `image_url` parts in its
/// `messages`, the Responses API's `input_image` parts in its `input` (a string prompt made
/// a user message first).
fn attach_images(body: &mut serde_json::Value, images: &[String]) {
    use serde_json::{Value, json};
    let Some(o) = body.as_object_mut() else {
        return;
    };
    let chat = o.contains_key("messages");
    if !chat && let Some(Value::String(prompt)) = o.get("input") {
        let user = json!([{ "role": "user", "content": prompt }]);
        o.insert("input".into(), user);
    }
    let Some(user) = o
        .get_mut(if chat { "messages" } else { "input" })
        .and_then(Value::as_array_mut)
        .and_then(|m| m.iter_mut().rev().find(|m| m["role"] == "user"))
    else {
        return;
    };
    let text_kind = if chat { "text" } else { "input_text" };
    let mut parts = match user["content"].take() {
        Value::String(t) => vec![json!({ "type": text_kind, "text": t })],
        Value::Array(parts) => parts,
        _ => Vec::new(),
    };
    parts.extend(images.iter().map(|u| match chat {
        true => json!({ "type": "image_url", "image_url": { "url": u } }),
        false => json!({ "type": "input_image", "image_url": u }),
    }));
    user["content"] = Value::Array(parts);
}

fn merge(
    into: &mut serde_json::Map<String, serde_json::Value>,
    from: &serde_json::Map<String, serde_json::Value>,
) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(serde_json::Value::Object(a)), serde_json::Value::Object(b)) => merge(a, b),
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The fields an API's adapter sets for requests shaped like `spec` (extra fields aside), as
/// dotted paths to each value (`stream_options.include_usage`, `parameters.max_new_tokens`):
/// the ones `target.request.extra_body` may not replace.
pub fn body_keys(kind: ApiKind, spec: &RequestSpec<'_>) -> Vec<String> {
    let spec = RequestSpec {
        extra: None,
        ..*spec
    };
    let body: serde_json::Value =
        serde_json::from_slice(&kind.adapter().body(&spec)).unwrap_or_default();
    let mut out = Vec::new();
    leaf_paths(&body, String::new(), &mut out);
    out
}

/// The dotted path of every value in `v` that is not a non-empty table.
pub fn leaf_paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v.as_object() {
        Some(o) if !o.is_empty() => {
            for (k, v) in o {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                leaf_paths(v, path, out);
            }
        }
        _ if !at.is_empty() => out.push(at),
        _ => {}
    }
}

/// Token usage as servers report it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u32>,
    #[serde(default)]
    pub completion_tokens: Option<u32>,
    /// `prompt_tokens_details.cached_tokens`: prompt tokens served from the prefix cache
    /// (OpenAI's field; vLLM with `--enable-prompt-tokens-details`, SGLang, llama.cpp).
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    /// `completion_tokens_details.reasoning_tokens`: output tokens that were reasoning
    /// (OpenAI's field; vLLM and SGLang with a reasoning parser, when they report it).
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u32>,
}

impl Usage {
    /// Usage from the counts an API names its own way.
    pub fn of(
        prompt: Option<u32>,
        completion: Option<u32>,
        cached: Option<u32>,
        reasoning: Option<u32>,
    ) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            prompt_tokens_details: cached.map(|c| PromptDetails {
                cached_tokens: Some(c),
            }),
            completion_tokens_details: reasoning.map(|r| CompletionDetails {
                reasoning_tokens: Some(r),
            }),
        }
    }

    pub fn cached_tokens(&self) -> Option<u32> {
        self.prompt_tokens_details.and_then(|d| d.cached_tokens)
    }

    pub fn reasoning_tokens(&self) -> Option<u32> {
        self.completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
    }
}

/// What one stream event (or a whole non-streamed body) says.
#[derive(Debug, Default)]
pub struct StreamEvent<'a> {
    pub id: Option<Cow<'a, str>>,
    /// The `model` the response names.
    pub model: Option<Cow<'a, str>>,
    /// Generated answer text in this event; `None` or empty means it carries no answer token.
    pub text: Option<Cow<'a, str>>,
    /// Generated reasoning (thinking) text in this event: tokens too, but not the answer's.
    pub reasoning: Option<Cow<'a, str>>,
    pub finish_reason: Option<Cow<'a, str>>,
    pub usage: Option<Usage>,
    /// This event ends the answer, as SSE's `[DONE]` does for OpenAI's APIs (Anthropic's
    /// `message_stop`, the Responses API's `response.completed`, Ollama's `"done": true`).
    pub done: bool,
    /// The event carries a choice (OpenAI's `choices[0]`), text or not: what vLLM's benchmark
    /// client counts as a token's arrival (the record keeps each one's time in `bare_us`).
    pub choice: bool,
    /// The engine's own timing of the request (llama.cpp's `timings`), when the event has it.
    pub timing: Option<timing::EngineTiming>,
    /// Pieces of tool calls this event carries (a call's name, then its arguments in pieces).
    pub tool_calls: Vec<ToolDelta<'a>>,
}

/// A piece of a streamed tool call: the call it belongs to, and what this event adds to it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ToolDelta<'a> {
    /// Names the call among the answer's: Chat Completions' `index`, the Messages API's
    /// content block `index`, the Responses API's output item (its id, hashed, or its
    /// `output_index`). Calls are kept in the order their keys first arrive.
    pub index: u32,
    pub id: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    /// A piece of the call's arguments (JSON text, in pieces).
    pub arguments: Option<Cow<'a, str>>,
}

/// One tool call as it arrived: its name and its arguments' text (JSON when the model wrote it
/// well; graded by `quality::tools`).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
    /// The key its pieces came with ([`ToolDelta::index`]); not kept in the record.
    #[serde(skip)]
    pub key: u32,
}

/// Calls one answer can open: a server that names every piece a new call cannot grow the
/// record without bound; pieces beyond go to the last call.
const MAX_TOOL_CALLS: usize = 128;

/// Adds a streamed piece to the calls gathered so far: a piece with a key not seen yet opens
/// a call; its arguments are appended. A call's id is left out (the server's, not the model's).
pub fn gather_tool_call(calls: &mut Vec<ToolCall>, d: &ToolDelta<'_>) {
    let at = match calls.iter().position(|c| c.key == d.index) {
        Some(at) => at,
        None if calls.len() < MAX_TOOL_CALLS => {
            calls.push(ToolCall {
                key: d.index,
                ..ToolCall::default()
            });
            calls.len() - 1
        }
        None => calls.len() - 1,
    };
    let c = &mut calls[at];
    // The name comes in the call's first piece; a server that repeats it in later pieces
    // does not double it.
    match &d.name {
        Some(n) if c.name.is_empty() => c.name.push_str(n),
        Some(n) if c.name != *n => c.name.push_str(n),
        _ => {}
    }
    if let Some(a) = &d.arguments {
        c.arguments.push_str(a);
    }
}

impl StreamEvent<'_> {
    /// Whether the event said anything its API says: an id, a model, text, usage, a finish
    /// reason, the end. An event another API sent parses to nothing (its fields are not this
    /// one's); so does a keep-alive, which is why one such event is not yet a failure.
    pub fn says_anything(&self) -> bool {
        self.id.is_some()
            || self.model.is_some()
            || self.text.is_some()
            || self.reasoning.is_some()
            || self.finish_reason.is_some()
            || self.usage.is_some()
            || self.timing.is_some()
            || !self.tool_calls.is_empty()
            || self.done
    }
}

/// One API kind: its path, body and event parsing. A new endpoint type is one more
/// implementation and one [`ApiKind`] variant.
pub trait Adapter: Send + Sync {
    /// Path under the base URL (`stream`: the request streams).
    fn path(&self, stream: bool) -> &'static str;
    /// What it can send.
    fn capabilities(&self) -> Capabilities;
    /// How its stream is framed.
    fn framing(&self) -> Framing {
        Framing::Sse
    }
    /// How it takes the API key.
    fn auth(&self) -> Auth {
        Auth::Bearer
    }
    /// Headers every request of this API carries (Anthropic's `anthropic-version`).
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// The JSON request body.
    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8>;
    /// Parses one stream event's data (an SSE event's or a JSON line), or a whole non-streamed
    /// body. SSE's `[DONE]` never reaches it.
    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, EventError>;
}

/// Text that carries tokens: `None` when absent or empty (role-only and closing events).
pub(crate) fn non_empty(t: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    t.filter(|t| !t.is_empty())
}

/// The functions of tools written in Chat Completions' shape (`{"type": "function",
/// "function": {name, description, parameters}}`, as [`RequestSpec::tools`] holds them), for
/// an API that writes them in another shape.
pub(crate) fn tool_functions(
    tools: &serde_json::Value,
) -> impl Iterator<Item = &serde_json::Map<String, serde_json::Value>> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("function").and_then(|f| f.as_object()))
}

/// A tool call's key from the server's id for it (the Responses API's item id): ids are
/// strings, keys numbers; a hash names the same id the same way in every event.
pub(crate) fn call_key(id: &str) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish() as u32
}

/// A call's arguments as text, from an API that sends them as a JSON object (Anthropic's
/// `input`): the object's JSON, or a string's own text (a server that could not parse what
/// the model wrote and passes it on as it came).
pub(crate) fn arguments_text(input: serde_json::Value) -> String {
    match input {
        serde_json::Value::String(s) => s,
        v => v.to_string(),
    }
}

/// A whole answer's text, gathered from its parts: `None` when it holds none.
pub(crate) fn gathered(t: String) -> Option<Cow<'static, str>> {
    (!t.is_empty()).then_some(Cow::Owned(t))
}

/// What an API cannot send that a workload asks of it, in words the caller places after the
/// key it locates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CannotSend(pub String);

/// Why an adapter could not take an event: the record's outcome follows the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// The server's own error object inside the stream or body (its JSON text): the request
    /// failed at the server.
    #[error("server error in stream: {0}")]
    Server(String),
    /// Not this API's format (another API's stream, a truncated or garbled event).
    #[error("{0}")]
    Malformed(String),
}

/// An error object inside a stream or body.
pub(crate) fn server_error(e: &serde_json::Value) -> EventError {
    EventError::Server(e.to_string())
}

fn one() -> f64 {
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Extra fields merge into the tables of the same name, beside what the adapter set.
    #[test]
    fn extra_fields_merge_into_nested_tables() {
        let sampling = Sampling::default();
        let extra: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
            r#"{"parameters":{"repetition_penalty":1.1},"stream_options":{"continuous_usage_stats":true},"priority":3}"#,
        )
        .unwrap();
        let spec = RequestSpec {
            prompt: "p",
            max_tokens: 3,
            extra: Some(&extra),
            ..RequestSpec::for_test(&sampling)
        };
        let tgi: serde_json::Value =
            serde_json::from_slice(&ApiKind::TgiGenerate.adapter().body(&spec)).unwrap();
        assert_eq!(tgi["parameters"]["repetition_penalty"], 1.1);
        assert_eq!(tgi["parameters"]["max_new_tokens"], 3);
        let chat: serde_json::Value =
            serde_json::from_slice(&ApiKind::OpenAiChat.adapter().body(&spec)).unwrap();
        assert_eq!(chat["stream_options"]["include_usage"], true);
        assert_eq!(chat["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(chat["priority"], 3);
        assert!(
            body_keys(ApiKind::OpenAiChat, &spec)
                .contains(&"stream_options.include_usage".to_owned())
        );
    }

    /// The contract's names (serde) and the listed names (clap) are one spelling.
    #[test]
    fn every_kind_is_named_alike_in_the_contract_and_the_list() {
        for k in <ApiKind as clap::ValueEnum>::value_variants() {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name().as_str(), "{k:?}");
        }
        assert_eq!(
            ApiKind::OpenAiCompletions
                .check(true)
                .unwrap_err()
                .to_string(),
            "has `messages`, which only api = \"openai-chat\" or api = \"openai-responses\" or api = \"anthropic-messages\" or api = \"ollama-chat\" can send"
        );
        assert!(ApiKind::OpenAiChat.check_batch(2).is_err());
        // Every kind has an adapter whose body is a JSON object.
        for k in ApiKind::all() {
            let sampling = Sampling::default();
            let spec = RequestSpec {
                prompt: "p",
                max_tokens: 3,
                stream: k.capabilities().streams,
                ..RequestSpec::for_test(&sampling)
            };
            assert!(!body_keys(*k, &spec).is_empty(), "{k:?}");
        }
        assert!(ApiKind::OpenAiEmbeddings.check_batch(2).is_ok());
        assert!(ApiKind::OpenAiChat.check(true).is_ok());
    }

    /// Calls are kept by key, in the order keys first arrive: sparse or hashed keys and
    /// interleaved pieces each land in their own call; a name repeated is not doubled.
    #[test]
    fn tool_pieces_gather_by_key() {
        let piece = |index, name: Option<&'static str>, args: Option<&'static str>| ToolDelta {
            index,
            id: None,
            name: name.map(Cow::Borrowed),
            arguments: args.map(Cow::Borrowed),
        };
        let mut calls = Vec::new();
        for d in [
            piece(7, Some("a"), None),
            piece(3_000_000_000, Some("b"), Some("{")),
            piece(7, Some("a"), Some("{\"x\":")),
            piece(3_000_000_000, None, Some("}")),
            piece(7, None, Some("1}")),
        ] {
            gather_tool_call(&mut calls, &d);
        }
        let got: Vec<_> = calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(got, [("a", "{\"x\":1}"), ("b", "{}")]);
        for k in 0..1000 {
            gather_tool_call(&mut calls, &piece(k + 10, Some("n"), None));
        }
        assert_eq!(calls.len(), MAX_TOOL_CALLS, "bounded");
    }
}
