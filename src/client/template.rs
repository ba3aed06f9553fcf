//! The last event's shape, so that the next event of the same shape need not be parsed.
//!
//! Servers stream a token per event, and the events of one answer differ only in their text:
//! `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,
//! "delta":{"content":"…"},"finish_reason":null}]}`. Parsing each one as JSON was half of the
//! client's CPU at the client's ceiling (`bench/ceiling.sh`). After an event has been parsed,
//! and the only thing it gave was one text borrowed straight from its bytes (no finish reason,
//! no usage, not the last event), its bytes are kept with that text's place. A next event that
//! has the same bytes before and after that place, and between them a plain JSON string body
//! (no quote, no backslash, no control character, valid UTF-8, not empty), is that same event
//! with that text: the parser would read the same structure and the same values everywhere
//! else, and the bytes between the quotes as the text. Anything else is parsed in full, as
//! before, so a server whose events differ in more than their text (OpenAI's per-event
//! `obfuscation` padding, a changing `id`) only loses the shortcut. Such a stream stops keeping
//! shapes after [`GIVE_UP`] misses in a row, so it does not pay for a copy of every event either;
//! an occasional miss (llama.cpp's `created` ticks once a second) keeps the shortcut.

use std::borrow::Cow;

use crate::api::StreamEvent;

/// Which of an event's texts the template's place holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Text,
    Reasoning,
}

impl Part {
    /// The event a read stands for: `text` in this part, nothing else.
    pub(crate) fn event(self, text: &str) -> StreamEvent<'_> {
        let text = Some(Cow::Borrowed(text));
        match self {
            Part::Text => StreamEvent {
                text,
                ..StreamEvent::default()
            },
            Part::Reasoning => StreamEvent {
                reasoning: text,
                ..StreamEvent::default()
            },
        }
    }
}

/// Qualifying events in a row that a kept shape did not match, after which a stream keeps no
/// more shapes: its events differ in more than their text.
pub(crate) const GIVE_UP: u8 = 4;

#[derive(Debug, Default)]
pub(crate) struct Template {
    bytes: Vec<u8>,
    /// The text's place in `bytes`: between its quotes. `None`: no template yet.
    place: Option<(usize, usize, Part)>,
    /// Qualifying events in a row that did not match the kept shape.
    misses: u8,
}

impl Template {
    /// The one text `data` carries, and which part it is, when `data` has the kept shape: the
    /// event is then [`Part::event`] of that text. (Not a whole `StreamEvent`: building,
    /// moving and inspecting one per token was a fifth of the time spent on each event.)
    pub(crate) fn read<'a>(&mut self, data: &'a [u8]) -> Option<(&'a str, Part)> {
        let (start, end, part) = self.place?;
        let (head, tail) = (&self.bytes[..start], &self.bytes[end..]);
        if data.len() <= head.len() + tail.len() || !data.starts_with(head) || !data.ends_with(tail)
        {
            return None;
        }
        let text = plain_string_body(&data[start..data.len() - tail.len()])?;
        self.misses = 0;
        Some((text, part))
    }

    /// Keeps `data`'s shape when its parse `ev` qualifies (see the module's comment); leaves
    /// the template as it was otherwise. `data` did not match the kept shape (`read` said no).
    pub(crate) fn learn(&mut self, data: &[u8], ev: &StreamEvent<'_>) {
        if ev.finish_reason.is_some() || ev.usage.is_some() || ev.done || self.misses >= GIVE_UP {
            return;
        }
        let (text, part) = match (&ev.text, &ev.reasoning) {
            (Some(Cow::Borrowed(t)), None) => (*t, Part::Text),
            (None, Some(Cow::Borrowed(r))) => (*r, Part::Reasoning),
            _ => return,
        };
        // Where the text lies in `data`, if it was borrowed from it (it may come from
        // elsewhere: a static string, or an adapter's own buffer).
        let Some(start) = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize) else {
            return;
        };
        let end = start + text.len();
        if text.is_empty()
            || end >= data.len()
            || start == 0
            || data[start - 1] != b'"'
            || data[end] != b'"'
        {
            return;
        }
        if self.place.is_some() {
            self.misses += 1;
            if self.misses >= GIVE_UP {
                // This stream's events differ in more than their text: keep nothing more.
                self.place = None;
                self.bytes = Vec::new();
                return;
            }
        }
        self.bytes.clear();
        self.bytes.extend_from_slice(data);
        self.place = Some((start, end, part));
    }
}

/// `body` as text when it is a JSON string's body that reads as itself: no quote, no
/// backslash, no control character, valid UTF-8.
fn plain_string_body(body: &[u8]) -> Option<&str> {
    // One pass for the usual token, printable ASCII; `from_utf8`'s own setup cost more than
    // the check on a token of a few bytes.
    if body
        .iter()
        .all(|&b| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\')
    {
        // SAFETY: every byte is ASCII (checked just above), and ASCII is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(body) });
    }
    if body.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
        return None;
    }
    std::str::from_utf8(body).ok()
}

/// The shortcut checked against a full parse of the same event (`full`): panics when they
/// disagree on anything the client takes after the first event (`id` and `model` are taken
/// from the first, which is always parsed). Learns as the client does. For the tests and the
/// fuzz target; returns whether the shortcut applied.
pub(crate) fn check(t: &mut Template, data: &[u8], full: &Result<StreamEvent<'_>, String>) -> bool {
    fn seen<'e>(ev: &'e StreamEvent<'_>) -> impl PartialEq + std::fmt::Debug + 'e {
        (
            ev.text.as_deref(),
            ev.reasoning.as_deref(),
            ev.finish_reason.as_deref(),
            ev.usage,
            ev.done,
        )
    }
    match t.read(data) {
        Some((text, part)) => {
            let ev = part.event(text);
            let full = full.as_ref().expect("an event the template reads parses");
            assert_eq!(seen(&ev), seen(full), "{}", String::from_utf8_lossy(data));
            true
        }
        None => {
            if let Ok(ev) = full {
                t.learn(data, ev);
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiKind;

    /// Every event through the template when it applies, else parsed (and learned), as the
    /// client does; each must equal the full parse. Returns how many took the shortcut.
    fn check(kind: ApiKind, events: &[&str]) -> usize {
        let a = kind.adapter();
        let mut t = Template::default();
        events
            .iter()
            .filter(|e| super::check(&mut t, e.as_bytes(), &a.parse_event(e.as_bytes())))
            .count()
    }

    #[test]
    fn openai_stream_takes_the_shortcut_where_only_text_differs() {
        let c = |s: &str| {
            format!(
                r#"{{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":{s}}},"finish_reason":null}}]}}"#
            )
        };
        let events = [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.to_owned(),
            c(r#""Hello""#),
            c(r#"" world""#),
            c(r#""é ü""#),
            c(r#""a\nb""#),      // an escape: parsed in full
            c(r#""""#),          // empty: parsed in full
            c(r#""x\"y""#),      // a quote inside: parsed in full
            c(r#""again""#),
            c("null"),           // not a string: parsed in full
            c(r#""!""#),
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#.to_owned(),
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#.to_owned(),
            c(r#""late""#),
        ];
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::OpenAiChat, &refs), 5);
    }

    #[test]
    fn reasoning_and_answer_keep_their_parts() {
        let d = |k: &str, s: &str| {
            format!(
                r#"{{"id":"c","choices":[{{"index":0,"delta":{{"{k}":"{s}"}},"finish_reason":null}}]}}"#
            )
        };
        let events = [
            d("reasoning_content", "think"),
            d("reasoning_content", "more"),
            d("content", "answer"),
            d("content", "more"),
            d("reasoning_content", "back"),
            d("reasoning", "new name"),
            d("reasoning", "again"),
        ];
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::OpenAiChat, &refs), 3);
    }

    #[test]
    fn a_changing_field_outside_the_text_is_parsed_in_full() {
        // OpenAI's own API pads each event with random `obfuscation`.
        let events = [
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"a"}}],"obfuscation":"x1"}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"b"}}],"obfuscation":"y22"}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"c"}}],"obfuscation":"z"}"#,
        ];
        assert_eq!(check(ApiKind::OpenAiChat, &events), 0);
        // A finish reason arriving with the last text is never taken as plain text.
        let events = [
            r#"{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}"#,
        ];
        assert_eq!(check(ApiKind::OpenAiChat, &events), 0);
    }

    /// A stream whose every event differs outside its text stops keeping shapes (no copy per
    /// event); one whose events differ now and then keeps the shortcut between.
    #[test]
    fn a_stream_that_never_matches_stops_keeping_shapes_and_an_occasional_miss_does_not() {
        let a = ApiKind::OpenAiChat.adapter();
        let padded = |i: usize| {
            format!(
                r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":"t{i}"}}}}],"obfuscation":"{}"}}"#,
                "x".repeat(i % 7 + 1)
            )
        };
        let mut t = Template::default();
        for i in 0..20 {
            let e = padded(i);
            assert!(!super::check(
                &mut t,
                e.as_bytes(),
                &a.parse_event(e.as_bytes())
            ));
            // The first event is kept, then each miss replaces it, up to the limit of misses.
            assert_eq!(t.place.is_some(), i < usize::from(GIVE_UP), "event {i}");
        }
        assert!(t.bytes.is_empty());
        // `created` ticking once a second: one miss per tick, every other event a hit.
        let ticking = |i: usize| {
            format!(
                r#"{{"id":"c","created":{},"choices":[{{"index":0,"delta":{{"content":"t{i}"}}}}]}}"#,
                1000 + i / 10
            )
        };
        let events: Vec<String> = (0..100).map(ticking).collect();
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        // The first of each ten is parsed (the first event, then each tick), the rest read.
        assert_eq!(check(ApiKind::OpenAiChat, &refs), 90);
    }

    #[test]
    fn every_streaming_api_agrees_with_its_parser() {
        let tgi = |s: &str| {
            format!(
                r#"{{"index":1,"token":{{"id":5,"text":"{s}","logprob":-0.1,"special":false}},"generated_text":null,"details":null}}"#
            )
        };
        let tgi_events = [tgi(" a"), tgi(" b"), tgi(" c")];
        let r: Vec<&str> = tgi_events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::TgiGenerate, &r), 2);

        let an = |t: &str, s: &str| {
            format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"{t}","{}":"{s}"}}}}"#,
                if t == "text_delta" {
                    "text"
                } else {
                    "thinking"
                }
            )
        };
        let an_events = [
            an("thinking_delta", "hm"),
            an("thinking_delta", "ok"),
            an("text_delta", "Hi"),
            an("text_delta", "!"),
        ];
        let r: Vec<&str> = an_events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::AnthropicMessages, &r), 2);

        let ol = |s: &str, done: bool| {
            format!(
                r#"{{"model":"q","created_at":"t","message":{{"role":"assistant","content":"{s}"}},"done":{done}}}"#
            )
        };
        let ol_events = [ol("a", false), ol("b", false), ol("c", true)];
        let r: Vec<&str> = ol_events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::OllamaChat, &r), 1);

        let rs = |s: &str| {
            format!(
                r#"{{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"{s}"}}"#
            )
        };
        let rs_events = [rs("a"), rs("b"), rs("c")];
        let r: Vec<&str> = rs_events.iter().map(String::as_str).collect();
        assert_eq!(check(ApiKind::OpenAiResponses, &r), 2);
    }

    proptest::proptest! {
        /// Any text (escapes, quotes, control characters, non-ASCII, empty) in any order of
        /// answer, reasoning and last events: the shortcut and the parser never disagree.
        #[test]
        fn any_text_agrees_with_the_parser(
            parts in proptest::collection::vec((0u8..4, ".{0,6}"), 1..40)
        ) {
            let events: Vec<String> = parts
                .iter()
                .map(|(shape, text)| {
                    let t = serde_json::to_string(text).unwrap();
                    match shape {
                        0 => format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":{t}}},"finish_reason":null}}]}}"#),
                        1 => format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"reasoning":{t}}},"finish_reason":null}}]}}"#),
                        2 => format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":{t}}},"finish_reason":"stop"}}]}}"#),
                        _ => format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":"{}"}},"finish_reason":null}}]}}"#, text.replace(['"', '\\'], "")),
                    }
                })
                .collect();
            let refs: Vec<&str> = events.iter().map(String::as_str).collect();
            check(ApiKind::OpenAiChat, &refs);
        }
    }
}
