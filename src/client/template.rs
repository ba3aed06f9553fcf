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

/// What starts the SSE line of an event framed as servers frame one token; kept before the
/// shape's bytes so that [`Template::frame`] compares both at once.
const DATA: &[u8] = b"data: ";

#[derive(Debug, Default)]
pub(crate) struct Template {
    /// `data: ` and the kept event's bytes.
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
        let (head, tail) = (&self.bytes[DATA.len()..start], &self.bytes[end..]);
        if data.len() <= head.len() + tail.len() || !data.starts_with(head) || !data.ends_with(tail)
        {
            return None;
        }
        let body = &data[head.len()..data.len() - tail.len()];
        // The whole body, with no quote in it, is plain.
        let text = plain_prefix(body).filter(|t| t.len() == body.len())?;
        self.misses = 0;
        Some((text, part))
    }

    /// An SSE event of the kept shape at the start of `bytes`, framed as servers frame one
    /// token: `data: `, the event, and a blank line (`\n\n` or `\r\n\r\n`). Its length in
    /// bytes, its text and which part that is; the SSE parser would hand over the same event
    /// (see [`crate::client::sse::Events::whole`]): the kept bytes came from one line, so they
    /// hold no line end, and a plain string body holds no control character. One comparison
    /// of the bytes instead of a search for the line's end and then a comparison (the search
    /// was the client's largest single cost at its ceiling).
    pub(crate) fn frame<'a>(&mut self, bytes: &'a [u8]) -> Option<(usize, &'a str, Part)> {
        let (start, end, part) = self.place?;
        // `data: ` and the shape's head are kept together: one comparison.
        let (head, tail) = (&self.bytes[..start], &self.bytes[end..]);
        let rest = bytes.strip_prefix(head)?;
        // A plain body has no quote: the first one is the text's end, where the tail starts
        // (the tail's first byte is the closing quote). Running into the read's end instead
        // is an event not yet whole.
        let text = plain_prefix(rest).filter(|t| !t.is_empty() && t.len() < rest.len())?;
        let len = text.len();
        let after = rest[len..].strip_prefix(tail)?;
        let blank = if after.starts_with(b"\n\n") {
            2
        } else if after.starts_with(b"\r\n\r\n") {
            4
        } else {
            return None;
        };
        self.misses = 0;
        Some((start + len + tail.len() + blank, text, part))
    }

    /// Keeps `data`'s shape when its parse `ev` qualifies (see the module's comment); leaves
    /// the template as it was otherwise. `data` did not match the kept shape (`read` said no).
    pub(crate) fn learn(&mut self, data: &[u8], ev: &StreamEvent<'_>) {
        if ev.finish_reason.is_some()
            || ev.usage.is_some()
            || ev.timing.is_some()
            || ev.done
            || !ev.tool_calls.is_empty()
            || self.misses >= GIVE_UP
        {
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
        self.bytes.extend_from_slice(DATA);
        self.bytes.extend_from_slice(data);
        self.place = Some((DATA.len() + start, DATA.len() + end, part));
    }
}

/// The plain JSON string body at the start of `bytes`: up to its first quote (or its end) when
/// no backslash or control character comes before, and those bytes are valid UTF-8. Such a
/// body reads as itself. One pass: a token's text is a few bytes, where a vectorised search and
/// `from_utf8`'s own setup cost more than the check.
fn plain_prefix(bytes: &[u8]) -> Option<&str> {
    // Eight bytes at a time while there are eight (a frame's tail follows its text, so there
    // are): the first byte that is a quote, a backslash, a control character or not ASCII is
    // found with word arithmetic (the "has a zero byte" test, whose lowest flag is exact), and
    // a text of plain ASCII up to a quote is taken at once. Anything else goes byte by byte
    // below. A byte at a time was a third of the work of taking a whole frame.
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH;
    let mut len = 0;
    while let Some(word) = bytes.get(len..len + 8) {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        let special = zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
            | (w & HIGH);
        if special == 0 {
            len += 8;
            continue;
        }
        let at = len + special.trailing_zeros() as usize / 8;
        if bytes[at] == b'"' {
            // SAFETY: every byte before `at` is ASCII (no flag below it), which is UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(&bytes[..at]) });
        }
        break;
    }
    let mut ascii = true;
    while let Some(&b) = bytes.get(len) {
        match b {
            b'"' => break,
            b'\\' | 0..0x20 => return None,
            0x80.. => ascii = false,
            _ => {}
        }
        len += 1;
    }
    let body = &bytes[..len];
    if ascii {
        // SAFETY: every byte is ASCII (checked just above), and ASCII is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(body) });
    }
    std::str::from_utf8(body).ok()
}

/// What the client takes from an event after the first (`id` and `model` are taken from the
/// first, which is always parsed).
fn seen<'e>(ev: &'e StreamEvent<'_>) -> impl PartialEq + std::fmt::Debug + 'e {
    (
        ev.text.as_deref(),
        ev.reasoning.as_deref(),
        ev.finish_reason.as_deref(),
        ev.usage,
        ev.done,
    )
}

/// The shortcut checked against a full parse of the same event (`full`): panics when they
/// disagree on anything the client takes. Learns as the client does. For the tests and the
/// fuzz target; returns whether the shortcut applied.
pub(crate) fn check(
    t: &mut Template,
    data: &[u8],
    full: &Result<StreamEvent<'_>, crate::api::EventError>,
) -> bool {
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

/// A stream taken as the client takes it (whole frames of the kept shape, then each event
/// through the shortcut or parsed in full, which may teach the shape), checked as it goes: a
/// whole frame must be what the SSE parser, given just its bytes, hands over as one event and
/// return to rest after, and that event parsed in full must say the same; a shortcut must agree
/// with the full parse. `said` is what each event said, in order, for a comparison with the
/// same stream parsed in full. For the tests and the fuzz target.
pub(crate) struct Checked<'a> {
    pub adapter: &'a dyn crate::api::Adapter,
    pub template: Template,
    pub said: Vec<String>,
    /// Events taken as whole frames.
    pub frames: usize,
    /// The data of every event, bytes (never more than the stream's).
    pub data_bytes: usize,
}

impl<'a> Checked<'a> {
    pub(crate) fn new(adapter: &'a dyn crate::api::Adapter) -> Self {
        Checked {
            adapter,
            template: Template::default(),
            said: Vec::new(),
            frames: 0,
            data_bytes: 0,
        }
    }
}

impl crate::client::sse::Events for Checked<'_> {
    fn whole(&mut self, bytes: &[u8]) -> usize {
        let mut taken = 0;
        while let Some(n) = self.frame(&bytes[taken..]) {
            taken += n;
        }
        taken
    }

    fn event(&mut self, data: &[u8]) -> std::ops::ControlFlow<()> {
        assert!(data.len() <= crate::client::sse::MAX_EVENT);
        self.data_bytes += data.len();
        let full = self.adapter.parse_event(data);
        check(&mut self.template, data, &full);
        self.said.push(match &full {
            Ok(ev) => format!("{:?}", seen(ev)),
            Err(_) => "unparsed".to_owned(),
        });
        std::ops::ControlFlow::Continue(())
    }
}

impl Checked<'_> {
    /// One whole frame at the start of `bytes`, checked: its length.
    fn frame(&mut self, bytes: &[u8]) -> Option<usize> {
        let (n, text, part) = self.template.frame(bytes)?;
        let mut alone = crate::client::sse::SseParser::default();
        let mut events = Vec::new();
        let _ = alone.feed(&bytes[..n], &mut |d: &[u8]| {
            events.push(d.to_vec());
            std::ops::ControlFlow::Continue(())
        });
        let shown = String::from_utf8_lossy(&bytes[..n]);
        assert!(
            alone.at_rest(),
            "a whole frame left the parser mid-line: {shown:?}"
        );
        assert_eq!(events.len(), 1, "a whole frame is not one event: {shown:?}");
        let full = self.adapter.parse_event(&events[0]);
        let full = full.as_ref().expect("a whole frame's event parses");
        let ev = part.event(text);
        assert_eq!(seen(&ev), seen(full), "{shown:?}");
        self.said.push(format!("{:?}", seen(full)));
        self.frames += 1;
        self.data_bytes += events[0].len();
        Some(n)
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
        /// Eight bytes at a time say what one at a time says, on any bytes (quotes,
        /// backslashes, control bytes, UTF-8 and not, anywhere in the word).
        #[test]
        fn a_plain_prefix_is_found_the_same_a_word_at_a_time(
            bytes in proptest::collection::vec(proptest::sample::select(
                vec![b'a', b' ', b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xa9, 0xff]), 0..40)
        ) {
            let mut len = 0;
            let mut ascii = true;
            let byte_by_byte = loop {
                match bytes.get(len) {
                    None | Some(b'"') => break if ascii {
                        Some(std::str::from_utf8(&bytes[..len]).unwrap())
                    } else {
                        std::str::from_utf8(&bytes[..len]).ok()
                    },
                    Some(b'\\' | 0..0x20) => break None,
                    Some(0x80..) => ascii = false,
                    _ => {}
                }
                len += 1;
            };
            proptest::prop_assert_eq!(plain_prefix(&bytes), byte_by_byte);
        }

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

        /// A stream of framed events of every kind (the kept shape with any text, line ends
        /// LF, CRLF and CR, a comment, a `data:` without its space, an event over two lines,
        /// the last events), read in any pieces: taken with whole frames it says, event by
        /// event, what the parser says with every event parsed in full, and every frame is
        /// what the parser alone makes of its bytes.
        #[test]
        fn whole_frames_say_what_the_parser_says(
            parts in proptest::collection::vec((0u8..8, ".{0,5}"), 1..40),
            mut splits in proptest::collection::vec(0usize..4000, 0..8),
        ) {
            let stream: String = parts.iter().map(|(shape, text)| frame_of(*shape, text)).collect();
            let bytes = stream.as_bytes();
            splits.push(bytes.len());
            splits.sort_unstable();
            let a = ApiKind::OpenAiChat.adapter();
            let mut taken = Checked::new(a.as_ref());
            let mut full = Vec::new();
            for whole in [true, false] {
                let mut p = crate::client::sse::SseParser::default();
                let mut last = 0;
                for &s in &splits {
                    let piece = &bytes[last..s.min(bytes.len()).max(last)];
                    last += piece.len();
                    if whole {
                        let _ = p.feed(piece, &mut taken);
                    } else {
                        let _ = p.feed(piece, &mut |d: &[u8]| {
                            full.push(match a.parse_event(d) {
                                Ok(ev) => format!("{:?}", seen(&ev)),
                                Err(_) => "unparsed".to_owned(),
                            });
                            std::ops::ControlFlow::Continue(())
                        });
                    }
                }
            }
            proptest::prop_assert_eq!(&taken.said, &full);
        }
    }

    /// One framed event of the stream `whole_frames_say_what_the_parser_says` builds.
    fn frame_of(shape: u8, text: &str) -> String {
        let t = serde_json::to_string(text).unwrap();
        let ev = |t: &str, finish: &str| {
            format!(
                r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":{t}}},"finish_reason":{finish}}}]}}"#
            )
        };
        match shape {
            0 | 1 => format!("data: {}\n\n", ev(&t, "null")),
            2 => format!("data: {}\r\n\r\n", ev(&t, "null")),
            3 => format!("data: {}\r\r", ev(&t, "null")),
            4 => format!(": keep-alive\ndata:{}\n\n", ev(&t, "null")),
            5 => format!("data: {}\ndata: {}\n\n", ev(&t, "null"), ev(&t, "null")),
            6 => format!("data: {}\n\n", ev(&t, "\"stop\"")),
            _ => "data: [DONE]\n\n".to_owned(),
        }
    }

    #[test]
    fn a_kept_shape_takes_whole_frames_and_nothing_else() {
        let a = ApiKind::OpenAiChat.adapter();
        let mut c = Checked::new(a.as_ref());
        let texts = ["Hello", " world", "", " é", "a\\nb", " again", " \\\"q\\\""];
        let stream: String = std::iter::once(frame_of(0, "role"))
            .chain(texts.iter().map(|t| frame_of(0, t)))
            .chain([
                frame_of(2, "crlf"),
                frame_of(3, "cr"),
                frame_of(6, "end"),
                frame_of(7, ""),
            ])
            .collect();
        let mut p = crate::client::sse::SseParser::default();
        let _ = p.feed(stream.as_bytes(), &mut c);
        // The first event teaches the shape. Taken whole: "Hello", " world", " é", " again"
        // and the CRLF frame. Parsed by the parser: the empty text, the escapes (which teach
        // nothing, so the shape stays), the CR-framed event (then read by the shortcut), the
        // finish reason and `[DONE]`.
        assert_eq!(c.said.len(), 12);
        assert_eq!(c.frames, 5);
    }
}
