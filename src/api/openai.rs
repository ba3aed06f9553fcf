//! OpenAI-compatible adapters: `POST /v1/chat/completions` and `POST /v1/completions`, as served
//! by vLLM, SGLang, TGI's OpenAI layer, llama.cpp's server and the built-in simulator.
//!
//! Real behaviours handled: a role-only first chunk (`"content": ""` or `null`), an empty final
//! chunk that only carries `finish_reason`, usage in a separate final chunk whose `choices` is
//! empty, `null` or missing, reasoning text in `reasoning_content` (vLLM before 0.10, SGLang,
//! llama.cpp) or `reasoning` (vLLM since) kept apart from the answer's `content` (both are
//! generated tokens; TTFT is the first of either, TTFO the first answer token), and
//! `{"error": …}` objects inside the stream.

use std::borrow::Cow;

use serde::Deserialize;

use super::{Adapter, Capabilities, RequestSpec, StreamEvent, Usage};

/// Chat or text completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAi {
    Chat,
    Completions,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    /// llama-server's per-request timing.
    #[serde(default)]
    timings: Option<super::timing::LlamaTimings>,
    /// vLLM's per-request metrics (speculative decoding's acceptance).
    #[serde(default)]
    metrics: Option<super::timing::VllmMetrics>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// The first of `choices` (goodput asks for one), the rest skipped unparsed: no vector is
/// allocated for every event.
struct FirstChoice<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for First<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Choice<'a>>()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(First(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    message: Option<Delta<'a>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    reasoning: Option<Cow<'a, str>>,
    /// Pieces of tool calls (a whole answer's `message` has the calls whole).
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

/// `delta.tool_calls[k]`: `index` (absent in a whole answer's `message`, where the place is
/// the call's), `id`, `function.name` in its first piece, `function.arguments` in pieces.
#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<CallFunction<'a>>,
}

#[derive(Deserialize)]
struct CallFunction<'a> {
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::json::opt_str")]
    arguments: Option<Cow<'a, str>>,
}

impl Adapter for OpenAi {
    fn path(&self, _stream: bool) -> &'static str {
        match self {
            OpenAi::Chat => "/v1/chat/completions",
            OpenAi::Completions => "/v1/completions",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            messages: *self == OpenAi::Chat,
            exact_output: true,
            streams: true,
            generates: true,
            batches: false,
            images: *self == OpenAi::Chat,
            tools: *self == OpenAi::Chat,
        }
    }

    fn body(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        if spec.extra.is_none_or(|e| e.is_empty()) && spec.images.is_empty() && spec.tools.is_none()
        {
            return serde_json::to_vec(&Body::of(*self, spec)).unwrap_or_default();
        }
        self.body_value(spec)
    }

    fn parse_event<'a>(&self, data: &'a [u8]) -> Result<StreamEvent<'a>, super::EventError> {
        let c: Chunk<'a> = super::json::parse(data).map_err(|e| {
            super::EventError::Malformed(format!("event is not a completion chunk: {e}"))
        })?;
        if let Some(err) = c.error {
            return Err(super::server_error(&err));
        }
        let mut ev = StreamEvent {
            id: c.id,
            model: c.model,
            usage: c.usage,
            timing: c
                .timings
                .map(super::timing::LlamaTimings::timing)
                .or_else(|| c.metrics.as_ref().and_then(|m| m.timing())),
            ..StreamEvent::default()
        };
        if let Some(choice) = c.choices.and_then(|v| v.0) {
            ev.choice = true;
            ev.finish_reason = choice.finish_reason;
            match (choice.delta.or(choice.message), choice.text) {
                (Some(d), _) => {
                    ev.reasoning = d
                        .reasoning_content
                        .or(d.reasoning)
                        .filter(|r| !r.is_empty());
                    ev.text = super::non_empty(d.content);
                    ev.tool_calls = d
                        .tool_calls
                        .unwrap_or_default()
                        .into_iter()
                        .enumerate()
                        .map(|(k, c)| {
                            let f = c.function.unwrap_or(CallFunction {
                                name: None,
                                arguments: None,
                            });
                            super::ToolDelta {
                                index: c.index.unwrap_or(k as u32),
                                id: c.id,
                                name: super::non_empty(f.name),
                                arguments: super::non_empty(f.arguments),
                            }
                        })
                        .collect();
                }
                (None, t) => ev.text = t,
            }
        }
        Ok(ev)
    }
}

/// The body's fields, serialized as they stand for a request with no `extra_body` to merge, and
/// through a `Value` (to merge into) for one with. Its fields are in the order serde_json's
/// sorted maps put them, so both paths write the same bytes (a unit test checks): building a
/// `Value` per request and serializing it was 2.25% of the client's instructions at its
/// closed-loop ceiling.
#[derive(serde::Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<Messages<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_tokens: Option<u32>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    top_p: f64,
}

#[derive(serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The chat messages ([`RequestSpec::each_message`]), each with its keys sorted (`content`,
/// `role`) as a `Value` has them.
struct Messages<'a>(&'a RequestSpec<'a>);

#[derive(serde::Serialize)]
struct Sorted<'a> {
    content: &'a str,
    role: &'a str,
}

impl serde::Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.0
                .each_message()
                .map(|(role, content)| Sorted { content, role }),
        )
    }
}

impl<'a> Body<'a> {
    fn of(api: OpenAi, spec: &'a RequestSpec<'a>) -> Body<'a> {
        Body {
            ignore_eos: spec.exact_output.then_some(true),
            max_tokens: spec.max_tokens,
            messages: (api == OpenAi::Chat).then_some(Messages(spec)),
            min_tokens: spec.exact_output.then_some(spec.max_tokens),
            model: spec.model,
            prompt: (api == OpenAi::Completions).then_some(spec.prompt),
            seed: spec.sampling.seed,
            stream: spec.stream,
            stream_options: spec.stream.then_some(StreamOptions {
                include_usage: true,
            }),
            temperature: spec.sampling.temperature,
            top_k: spec.sampling.top_k,
            top_p: spec.sampling.top_p,
        }
    }
}

impl OpenAi {
    /// The body as a `Value` with the contract's extra fields merged in (a table into the table
    /// of the same name).
    fn body_value(&self, spec: &RequestSpec<'_>) -> Vec<u8> {
        let mut b = serde_json::to_value(Body::of(*self, spec)).unwrap_or_default();
        if let (Some(tools), Some(o), OpenAi::Chat) = (spec.tools, b.as_object_mut(), self) {
            o.insert("tools".into(), tools.clone());
        }
        super::encode(b, spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(a: OpenAi, s: &str) -> Option<String> {
        a.parse_event(s.as_bytes())
            .unwrap()
            .text
            .map(|t| t.into_owned())
    }

    #[test]
    fn role_only_and_empty_chunks_carry_no_text() {
        let a = OpenAi::Chat;
        assert_eq!(
            text(
                a,
                r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
            ),
            None
        );
        assert_eq!(
            text(
                a,
                r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#
            ),
            None
        );
        assert_eq!(
            text(
                a,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#
            ),
            None
        );
        assert_eq!(
            text(a, r#"{"choices":[{"delta":{"content":" hi"}}]}"#).as_deref(),
            Some(" hi")
        );
        // Reasoning is kept apart from the answer, in either spelling.
        for s in [
            r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"hmm","content":null}}]}"#,
        ] {
            let ev = a.parse_event(s.as_bytes()).unwrap();
            assert_eq!(
                (ev.reasoning.as_deref(), ev.text.as_deref()),
                (Some("hmm"), None)
            );
        }
        let ev = a
            .parse_event(br#"{"choices":[{"delta":{"reasoning_content":"so","content":" yes"}}]}"#)
            .unwrap();
        assert_eq!(
            (ev.reasoning.as_deref(), ev.text.as_deref()),
            (Some("so"), Some(" yes"))
        );
    }

    #[test]
    fn usage_only_chunks_in_every_spelling() {
        let a = OpenAi::Chat;
        for s in [
            r#"{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
            r#"{"id":"x","choices":null,"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
            r#"{"id":"x","usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        ] {
            let ev = a.parse_event(s.as_bytes()).unwrap();
            let u = ev.usage.unwrap();
            assert_eq!((u.prompt_tokens, u.completion_tokens), (Some(5), Some(7)));
        }
    }

    #[test]
    fn completions_text_and_errors() {
        let a = OpenAi::Completions;
        assert_eq!(
            text(a, r#"{"choices":[{"text":"abc","finish_reason":null}]}"#).as_deref(),
            Some("abc")
        );
        assert!(matches!(
            a.parse_event(br#"{"error":{"message":"boom"}}"#),
            Err(crate::api::EventError::Server(e)) if e.contains("boom")
        ));
        assert!(matches!(
            a.parse_event(b"{not json"),
            Err(crate::api::EventError::Malformed(_))
        ));
    }

    #[test]
    fn the_typed_body_is_the_values_bytes() {
        let messages = [
            crate::api::Message::new("system", "be \"brief\"\n"),
            crate::api::Message::new("user", "héllo"),
        ];
        let mut n = 0;
        for api in [OpenAi::Chat, OpenAi::Completions] {
            for (top_k, seed) in [(None, None), (Some(40), Some(7))] {
                for temperature in [0.0, 0.7, 1.0] {
                    let sampling = crate::contract::Sampling {
                        temperature,
                        top_p: 0.95,
                        top_k,
                        seed,
                    };
                    for (stream, exact, given) in [
                        (true, true, None),
                        (false, false, Some(&messages[..])),
                        (true, false, Some(&messages[..])),
                    ] {
                        let spec = RequestSpec {
                            messages: given,
                            model: "org/m-8b",
                            prompt: "p \u{1F600} \\ q",
                            max_tokens: 300,
                            stream,
                            exact_output: exact,
                            sampling: &sampling,
                            batch: 1,
                            extra: None,
                            images: &[],
                            tools: None,
                        };
                        let typed = api.body(&spec);
                        assert_eq!(
                            String::from_utf8(typed).unwrap(),
                            String::from_utf8(api.body_value(&spec)).unwrap()
                        );
                        n += 1;
                    }
                }
            }
        }
        assert_eq!(n, 36);
    }

    #[test]
    fn body_asks_for_usage_and_exact_length() {
        let sampling = crate::contract::Sampling::default();
        let spec = RequestSpec {
            messages: None,
            model: "m",
            prompt: "p q",
            max_tokens: 9,
            stream: true,
            exact_output: true,
            sampling: &sampling,
            batch: 1,
            extra: None,
            images: &[],
            tools: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&OpenAi::Chat.body(&spec)).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["min_tokens"], 9);
        assert_eq!(v["messages"][0]["content"], "p q");
    }
}
