//! An incremental Server-Sent Events parser over a byte stream.
//!
//! Hand-written because the SSE crates for reqwest are unmaintained and a benchmark client needs
//! exact control: events are dispatched as soon as their blank line arrives, buffers are reused
//! (no allocation per event once warm), and any split of the input into reads gives the same
//! events (property-tested). Follows the WHATWG "event stream interpretation": lines end in
//! CRLF, LF or CR; `data:` lines (one optional space after the colon) join with `\n`; lines
//! starting with `:` are comments; other fields are ignored; an event is dispatched at a blank
//! line when it has data.
//!
//! The same parser reads JSON-lines streams (Ollama's native API): in that mode every
//! non-blank line is one event's data, with the same line-end handling and limits, and
//! [`finish`](SseParser::finish) hands over a last line that has no line end.
//!
//! Memory is bounded whatever the server sends: a line longer than [`MAX_LINE`] or an event
//! whose data exceeds [`MAX_EVENT`] stops the parser with [`TooLarge`] (the request fails with
//! its own class), so an endless line or an event that never ends cannot grow the client.

use std::ops::ControlFlow;

/// The longest SSE line kept, bytes. An OpenAI-style chunk is a few hundred bytes; a chunk that
/// carries a whole long answer at once (some servers' last event) stays well under this.
pub const MAX_LINE: usize = 4 << 20;

/// The most data one event may carry (its `data:` lines joined), bytes.
pub const MAX_EVENT: usize = 4 << 20;

/// A line or an event grew past its limit: the server is not sending SSE as an API does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooLarge {
    /// No line end within [`MAX_LINE`] bytes.
    Line,
    /// No blank line (end of event) within [`MAX_EVENT`] bytes of data.
    Event,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooLarge::Line => write!(f, "an SSE line longer than {} MiB", MAX_LINE >> 20),
            TooLarge::Event => write!(
                f,
                "an SSE event with more than {} MiB of data and no end",
                MAX_EVENT >> 20
            ),
        }
    }
}

/// Where a parser's events go.
pub trait Events {
    /// Events at the start of `bytes` taken whole, each its `data:` line and its blank line, by
    /// a receiver that knows what its events look like, without the parser's line search: how
    /// many bytes they were. Asked at each line's start while nothing is gathered (SSE framing
    /// only); it must take only whole events, each what the parser would hand over as one event,
    /// and nothing else (`template::Template::frame` is checked against the parser by the tests
    /// and the fuzz target). 0 (the default): the parser reads on.
    fn whole(&mut self, _bytes: &[u8]) -> usize {
        0
    }

    /// A complete event's data.
    fn event(&mut self, data: &[u8]) -> ControlFlow<()>;
}

impl<F: FnMut(&[u8]) -> ControlFlow<()>> Events for F {
    fn event(&mut self, data: &[u8]) -> ControlFlow<()> {
        self(data)
    }
}

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous read ended in CR: a leading LF in the next read belongs to that line end.
    after_cr: bool,
    /// Set once a limit was passed; the parser takes nothing more.
    too_large: Option<TooLarge>,
    /// JSON lines: every non-blank line is an event.
    lines: bool,
}

impl SseParser {
    /// An SSE parser.
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser for a stream framed as `framing` says.
    pub fn for_framing(framing: crate::api::Framing) -> Self {
        SseParser {
            lines: framing == crate::api::Framing::JsonLines,
            ..Self::default()
        }
    }

    /// The stream ended: a JSON line still waiting for its line end is an event now (an SSE
    /// event without its blank line is not: SSE drops it).
    pub fn finish(&mut self, on_event: &mut dyn Events) -> ControlFlow<()> {
        if !self.lines || self.too_large.is_some() || self.line.is_empty() {
            return ControlFlow::Continue(());
        }
        let line = std::mem::take(&mut self.line);
        self.line_done(&line, on_event)
    }

    /// At a line's start with nothing gathered, as a new parser is (where
    /// [`Events::whole`] is asked).
    pub fn at_rest(&self) -> bool {
        self.line.is_empty() && !self.has_data && !self.after_cr && self.too_large.is_none()
    }

    /// The limit this stream passed, if it did (after which [`feed`](Self::feed) only breaks).
    pub fn too_large(&self) -> Option<TooLarge> {
        self.too_large
    }

    /// Feeds bytes; calls `on_event` with each complete event's data. Stops early (returning
    /// `Break`) when the callback does, or when a line or event passes its limit
    /// ([`too_large`](Self::too_large) then says which).
    pub fn feed(&mut self, mut bytes: &[u8], on_event: &mut dyn Events) -> ControlFlow<()> {
        if self.too_large.is_some() {
            return ControlFlow::Break(());
        }
        // An empty read between a `\r` and its `\n` leaves the pair one line end.
        if bytes.is_empty() {
            return ControlFlow::Continue(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        loop {
            // A line's start with nothing gathered: the receiver may take a whole event it
            // knows, with no search for its line end.
            if self.line.is_empty() && !self.has_data && !self.lines {
                bytes = &bytes[on_event.whole(bytes)..];
            }
            // memchr's vectorised search: a byte-at-a-time scan of every body was a third of
            // a core at 8,000 responses a second.
            let Some(pos) = memchr::memchr2(b'\n', b'\r', bytes) else {
                break;
            };
            let (head, tail) = bytes.split_at(pos);
            let cr = tail[0] == b'\r';
            bytes = &tail[1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.after_cr = true,
                    _ => {}
                }
            }
            if self.line.len() + head.len() > MAX_LINE {
                return self.stop(TooLarge::Line);
            }
            // The usual event, one `data:` line and its blank line in the same read: handed
            // over from the read itself, not copied into `data` first.
            if self.line.is_empty() && !self.has_data && !self.lines {
                let blank = if bytes.starts_with(b"\n") {
                    1
                } else if bytes.starts_with(b"\r\n") {
                    2
                } else {
                    0
                };
                if blank > 0
                    && let Some(value) = data_value(head)
                {
                    if !self.fits(value) {
                        return self.stop(TooLarge::Event);
                    }
                    bytes = &bytes[blank..];
                    on_event.event(value)?;
                    continue;
                }
            }
            let flow = if self.line.is_empty() {
                self.line_done(head, on_event)
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                let flow = self.line_done(&line, on_event);
                self.line = line;
                self.line.clear();
                flow
            };
            flow?;
        }
        if self.line.len() + bytes.len() > MAX_LINE {
            return self.stop(TooLarge::Line);
        }
        self.line.extend_from_slice(bytes);
        ControlFlow::Continue(())
    }

    /// Whether a data line's `value` still fits the event being gathered (with its newline).
    fn fits(&self, value: &[u8]) -> bool {
        self.data.len() + value.len() < MAX_EVENT
    }

    fn stop(&mut self, why: TooLarge) -> ControlFlow<()> {
        self.too_large = Some(why);
        // The memory goes back now, not when the request ends.
        self.line = Vec::new();
        self.data = Vec::new();
        ControlFlow::Break(())
    }

    fn line_done(&mut self, line: &[u8], on_event: &mut dyn Events) -> ControlFlow<()> {
        if self.lines {
            if line.iter().all(u8::is_ascii_whitespace) {
                return ControlFlow::Continue(());
            }
            return on_event.event(line);
        }
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                let flow = on_event.event(&self.data);
                self.data.clear();
                return flow;
            }
            return ControlFlow::Continue(());
        }
        if line[0] == b':' {
            return ControlFlow::Continue(());
        }
        if let Some(value) = data_value(line) {
            if !self.fits(value) {
                return self.stop(TooLarge::Event);
            }
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        ControlFlow::Continue(())
    }
}

/// A `data` line's value: what follows the first colon, less one space after it; a line that
/// is just `data` (no colon) has an empty value. `None`: a line of another field (which SSE
/// ignores). Checking the prefix, not searching for the colon, saves a search per event: the
/// first colon ends the field's name, so the field is `data` exactly when the line starts
/// `data:`.
fn data_value(line: &[u8]) -> Option<&[u8]> {
    if line == b"data" {
        return Some(&[]);
    }
    let v = line.strip_prefix(b"data:")?;
    Some(v.strip_prefix(b" ").unwrap_or(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn events(input: &[u8], splits: &[usize]) -> Vec<String> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut cb = |d: &[u8]| {
            out.push(String::from_utf8_lossy(d).into_owned());
            ControlFlow::Continue(())
        };
        let mut last = 0;
        for &s in splits {
            let s = s.min(input.len()).max(last);
            let _ = p.feed(&input[last..s], &mut cb);
            last = s;
        }
        let _ = p.feed(&input[last..], &mut cb);
        out
    }

    const STREAM: &[u8] = b": ping\n\ndata: {\"a\":1}\n\ndata:{\"b\":2}\r\n\r\nevent: x\nid: 3\ndata: line1\ndata: line2\n\n\rdata: [DONE]\r\r";

    #[test]
    fn json_lines_are_one_event_each_and_the_last_needs_no_line_end() {
        let mut p = SseParser::for_framing(crate::api::Framing::JsonLines);
        let mut out = Vec::new();
        let mut cb = |d: &[u8]| {
            out.push(String::from_utf8_lossy(d).into_owned());
            ControlFlow::Continue(())
        };
        let _ = p.feed(b"{\"a\":1}\n\n  \r\n{\"b\"", &mut cb);
        let _ = p.feed(b":2}\r\n{\"c\":3}", &mut cb);
        let _ = p.finish(&mut cb);
        assert_eq!(out, vec!["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn parses_comments_crlf_cr_and_multiline() {
        assert_eq!(
            events(STREAM, &[]),
            vec!["{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"]
        );
    }

    /// WHATWG's field rules: the name ends at the first colon, one space after it is dropped,
    /// a line with no colon is a name with an empty value.
    #[test]
    fn only_the_data_field_carries_data() {
        let s = b"data\ndata:x\ndata:  two\n\ndata : no\ndatax: no\ndata\n\n: c\ndata: y\n\n";
        assert_eq!(events(s, &[]), vec!["\nx\n two", "", "y"]);
    }

    #[test]
    fn multibyte_text_split_inside_a_character() {
        let s = "data: {\"t\":\"héllo → 世界\"}\n\n".as_bytes();
        for i in 0..s.len() {
            assert_eq!(
                events(s, &[i]),
                vec!["{\"t\":\"héllo → 世界\"}"],
                "split at {i}"
            );
        }
    }

    #[test]
    fn break_stops_early() {
        let mut p = SseParser::new();
        let mut n = 0;
        let flow = p.feed(b"data: 1\n\ndata: 2\n\n", &mut |_: &[u8]| {
            n += 1;
            ControlFlow::Break(())
        });
        assert!(flow.is_break());
        assert_eq!(n, 1);
    }

    #[test]
    fn an_endless_line_stops_at_the_line_limit_without_growing() {
        let mut p = SseParser::new();
        let block = vec![b'x'; 64 << 10];
        let mut n = 0;
        let mut flow = ControlFlow::Continue(());
        for _ in 0..(MAX_LINE / block.len() + 2) {
            flow = p.feed(&block, &mut |_: &[u8]| {
                n += 1;
                ControlFlow::Continue(())
            });
            if flow.is_break() {
                break;
            }
        }
        assert!(flow.is_break());
        assert_eq!(p.too_large(), Some(TooLarge::Line));
        assert_eq!(n, 0);
        assert!(p.line.capacity() == 0 && p.data.capacity() == 0);
        // Nothing more is taken.
        assert!(
            p.feed(
                b"\n\ndata: x\n\n",
                &mut |_: &[u8]| ControlFlow::Continue(())
            )
            .is_break()
        );
    }

    #[test]
    fn an_event_without_end_stops_at_the_event_limit() {
        let mut p = SseParser::new();
        let line = format!("data: {}\n", "y".repeat(1000));
        let mut stopped = false;
        for _ in 0..(MAX_EVENT / 1000 + 2) {
            if p.feed(line.as_bytes(), &mut |_: &[u8]| ControlFlow::Continue(()))
                .is_break()
            {
                stopped = true;
                break;
            }
        }
        assert!(stopped);
        assert_eq!(p.too_large(), Some(TooLarge::Event));
    }

    #[test]
    fn a_line_just_under_the_limit_still_parses() {
        let mut p = SseParser::new();
        let body = "z".repeat(MAX_LINE - 16);
        let mut got = 0;
        let text = format!("data: {body}\n\n");
        for chunk in text.as_bytes().chunks(1 << 16) {
            let _ = p.feed(chunk, &mut |d: &[u8]| {
                got = d.len();
                ControlFlow::Continue(())
            });
        }
        assert_eq!(got, body.len());
        assert_eq!(p.too_large(), None);
    }

    /// Found by `any_stream_any_split`: an empty read between a `\r` and its `\n` made the
    /// `\n` a second line end, a blank line that ended the event early.
    #[test]
    fn an_empty_read_inside_a_crlf_keeps_it_one_line_end() {
        let input = b"data: a\r\ndata: b\n\n";
        assert_eq!(events(input, &[8, 8]), vec!["a\nb".to_owned()]);
        assert_eq!(events(input, &[8, 8]), events(input, &[]));
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(mut splits in proptest::collection::vec(0usize..STREAM.len(), 0..12)) {
            splits.sort_unstable();
            prop_assert_eq!(events(STREAM, &splits), events(STREAM, &[]));
        }

        /// Streams built from every kind of line and line end: events handed over straight
        /// from a read (one data line, then its blank line) are the same as when the pieces
        /// arrive apart and the parser gathers them.
        #[test]
        fn any_stream_any_split(
            pieces in proptest::collection::vec(0usize..12, 0..40),
            mut splits in proptest::collection::vec(0usize..400, 0..12),
        ) {
            const P: [&str; 12] = ["data: a", "data:b", "data:", ": c", "event: e", "\n", "\r\n", "\r", "data: {\"x\":1}\n\n", "id: 1", "data", "data :d"];
            let input: String = pieces.iter().map(|&i| P[i]).collect();
            splits.sort_unstable();
            let bytes: Vec<usize> = (0..=input.len()).collect();
            prop_assert_eq!(events(input.as_bytes(), &splits), events(input.as_bytes(), &[]));
            prop_assert_eq!(events(input.as_bytes(), &bytes), events(input.as_bytes(), &[]));
        }
    }
}
