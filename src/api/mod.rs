//! Endpoint APIs: how a planned request becomes an HTTP body and how the answer's events
//! are read, for each kind of endpoint the contract's `target.api` can name.
//!
//! A seam: each API is one file with an [`Adapter`], and one variant of [`ApiKind`] that
//! [`ApiKind::adapter`] maps to it, with its [`Capabilities`] (what it can send), checked in
//! one place ([`ApiKind::check`]) rather than by comparing kinds. Adding an API (TGI's
//! `/generate_stream`, say) is that file and that variant; copy `openai.rs`.

pub(crate) mod openai;

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
}

/// What an API can send; checked against the workload before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Chat messages (a dataset's `messages` entries).
    pub messages: bool,
}

impl ApiKind {
    /// The adapter that speaks this API.
    pub fn adapter(self) -> Box<dyn Adapter> {
        match self {
            ApiKind::OpenAiChat => Box::new(openai::OpenAi::Chat),
            ApiKind::OpenAiCompletions => Box::new(openai::OpenAi::Completions),
        }
    }

    /// The name in the contract.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// Whether this API can send what a workload asks: `Err` says what it cannot (for the
    /// caller to locate in its file).
    pub fn check(self, needs_messages: bool) -> Result<(), String> {
        let can = self.adapter().capabilities();
        if needs_messages && !can.messages {
            let by: Vec<String> = <ApiKind as clap::ValueEnum>::value_variants()
                .iter()
                .filter(|k| k.adapter().capabilities().messages)
                .map(|k| k.name())
                .collect();
            return Err(format!(
                "has `messages`, which only {} can send",
                by.iter()
                    .map(|n| format!("api = \"{n}\""))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
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
    /// `target.request.extra_body`: merged into the body's top level.
    pub extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// The JSON an adapter composed, with the contract's extra fields merged into its top level
/// (validation has refused any that collide with the adapter's own), as bytes to send.
pub(crate) fn encode(mut body: serde_json::Value, spec: &RequestSpec<'_>) -> Vec<u8> {
    if let (Some(extra), Some(o)) = (spec.extra, body.as_object_mut()) {
        for (k, v) in extra {
            o.insert(k.clone(), v.clone());
        }
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The top-level fields an API's adapter sets for requests shaped like `spec` (extra fields
/// aside): the ones `target.request.extra_body` may not name.
pub fn body_keys(kind: ApiKind, spec: &RequestSpec<'_>) -> Vec<String> {
    let spec = RequestSpec {
        extra: None,
        ..*spec
    };
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(
        &kind.adapter().body(&spec),
    )
    .map(|m| m.keys().cloned().collect())
    .unwrap_or_default()
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
}

/// One API kind: its path, body and event parsing. A new endpoint type is one more
/// implementation and one [`ApiKind`] variant.
pub trait Adapter: Send + Sync {
    /// Path under the base URL.
    fn path(&self) -> &'static str;
    /// What it can send.
    fn capabilities(&self) -> Capabilities;
    /// The JSON request body.
    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8>;
    /// Parses one SSE event's data, or a whole non-streamed body. `[DONE]` never reaches it.
    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, String>;
}

fn one() -> f64 {
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract's names (serde) and the listed names (clap) are one spelling.
    #[test]
    fn every_kind_is_named_alike_in_the_contract_and_the_list() {
        for k in <ApiKind as clap::ValueEnum>::value_variants() {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name().as_str(), "{k:?}");
        }
        assert_eq!(
            ApiKind::OpenAiCompletions.check(true).unwrap_err(),
            "has `messages`, which only api = \"openai-chat\" can send"
        );
        assert!(ApiKind::OpenAiChat.check(true).is_ok());
    }
}
