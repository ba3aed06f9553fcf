//! An incremental Server-Sent Events parser over a byte stream.
//!
//! Hand-written because the SSE crates for reqwest are unmaintained and a benchmark client needs
//! exact control: events are dispatched as soon as their blank line arrives, buffers are reused
//! (no allocation per event once warm), and any split of the input into reads gives the same
//! events (property-tested). Follows the WHATWG "event stream interpretation": lines end in
//! CRLF, LF or CR; `data:` lines (one optional space after the colon) join with `\n`; lines
//! starting with `:` are comments; other fields are ignored; an event is dispatched at a blank
//! line when it has data.

use std::ops::ControlFlow;

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous read ended in CR: a leading LF in the next read belongs to that line end.
    after_cr: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; calls `on_event` with each complete event's data. Stops early (returning
    /// `Break`) when the callback does.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        on_event: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(pos) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
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
        self.line.extend_from_slice(bytes);
        ControlFlow::Continue(())
    }

    fn line_done(
        &mut self,
        line: &[u8],
        on_event: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                let flow = on_event(&self.data);
                self.data.clear();
                return flow;
            }
            return ControlFlow::Continue(());
        }
        if line[0] == b':' {
            return ControlFlow::Continue(());
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        ControlFlow::Continue(())
    }
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
    fn parses_comments_crlf_cr_and_multiline() {
        assert_eq!(
            events(STREAM, &[]),
            vec!["{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"]
        );
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
        let flow = p.feed(b"data: 1\n\ndata: 2\n\n", &mut |_| {
            n += 1;
            ControlFlow::Break(())
        });
        assert!(flow.is_break());
        assert_eq!(n, 1);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(mut splits in proptest::collection::vec(0usize..STREAM.len(), 0..12)) {
            splits.sort_unstable();
            prop_assert_eq!(events(STREAM, &splits), events(STREAM, &[]));
        }
    }
}
