//! Where the time went, in a report: the engine's spans joined to the steady requests
//! (`analyze::spans`): the first lines' decomposition of the TTFT tail, the section's tables
//! of every decomposed tail, and the page's figures (each tail as stacked parts, the slowest
//! request's timeline with its client and server segments).

use std::fmt::Write as _;

use super::svg::esc;
use super::{Doc, Tone, num};
use crate::analyze::Summary;
use crate::analyze::spans::{NO_SOURCE, Parts, ServerSpans, Tail, Timeline};
use crate::api::timing::TimingSource;

/// The colours of the parts, in the order they happen (dispatch … decode).
const COLOURS: [&str; 6] = [
    "#9e9e9e", "#7b68ee", "#c0a060", "#d9534f", "#f0ad4e", "#5cb85c",
];

/// "TTFT p99 169 ms: prefill 89 ms, queue 84 ms, …": a tail in one phrase, largest part first.
fn phrase(what: &str, t: &Tail) -> String {
    let mut parts = t.parts.named();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let named: Vec<String> = parts
        .iter()
        .filter(|p| p.1.abs() >= 0.05)
        .map(|(n, v)| format!("{n} {} ms", num(*v)))
        .collect();
    format!(
        "{what} p{} {} ms: {} ({})",
        t.percentile,
        num(t.value_ms),
        named.join(", "),
        match t.requests {
            1 => "the one request at or above it".to_owned(),
            n => format!("the mean of the {n} requests at or above it"),
        }
    )
}

/// The TTFT tail's decomposition (else the end-to-end one's) among the first lines.
pub(super) fn headline(d: &mut Doc, s: &Summary) {
    let Some(sp) = &s.steady.spans else {
        return;
    };
    let tail = |v: &[Tail]| v.last().cloned();
    // Which source, when not the spans, and a part it derived.
    let from = match (sp.source.as_deref(), sp.derived.is_some()) {
        (Some(s), true) => format!(" [{s}; queue derived]"),
        (Some(s), false) => format!(" [{s}]"),
        (None, _) => String::new(),
    };
    match (tail(&sp.ttft), tail(&sp.e2e)) {
        (Some(t), _) => d.line(format!("Where the time went: {}{from}", phrase("TTFT", &t))),
        (None, Some(t)) => d.line(format!("Where the time went: {}{from}", phrase("E2E", &t))),
        (None, None) if sp.source.as_deref() == Some(NO_SOURCE) => d.toned(
            Tone::Warn,
            format!(
                "Where the time went: unknown, this run had no source of the server's side: {}",
                sp.none_because.as_deref().unwrap_or("")
            ),
        ),
        (None, None) => d.toned(
            Tone::Warn,
            format!(
                "Where the time went: unknown, no steady request was joined to a server span: {}",
                sp.none_because.as_deref().unwrap_or("")
            ),
        ),
    }
}

/// The terminal's (and every text format's) section.
pub(super) fn section(d: &mut Doc, s: &Summary) {
    let Some(sp) = &s.steady.spans else {
        return;
    };
    match sp.source.as_deref() {
        Some(NO_SOURCE) => {
            d.h("Where the time went");
            d.toned(
                Tone::Warn,
                format!(
                    "No source of the server's side: {}",
                    sp.none_because.as_deref().unwrap_or("")
                ),
            );
            return;
        }
        Some(source) => {
            d.h(format!(
                "Where the time went ({source}, stated in each answer)"
            ));
            d.toned(
                Tone::warn_if(sp.unreported > 0 || sp.mismatched > 0 || sp.joined == 0),
                format!(
                    "{} of {} steady requests that finished stated their timing; {} did not; {} where the engine's time exceeds the client's by more than {} ms",
                    sp.joined,
                    sp.requests,
                    sp.unreported,
                    sp.mismatched,
                    num(sp.tolerance_ms)
                ),
            );
            if let Some(d2) = &sp.derived {
                d.line(format!("The {d2}."));
            }
            if let Some(c) = TimingSource::named(source).and_then(TimingSource::caveat) {
                d.line(format!("{c}."));
            }
        }
        None => {
            d.h("Where the time went (the engine's spans, joined by trace id)");
            spans_line(d, sp);
        }
    }
    body(d, sp);
}

fn spans_line(d: &mut Doc, sp: &ServerSpans) {
    d.toned(
        Tone::warn_if(sp.unreported > 0 || sp.mismatched > 0 || sp.joined == 0),
        format!(
            "{} of {} steady requests that finished joined to the server's span ({} spans received); {} never reported; {} where the server's time exceeds the client's by more than {} ms",
            sp.joined,
            sp.requests,
            sp.spans,
            sp.unreported,
            sp.mismatched,
            num(sp.tolerance_ms)
        ),
    );
    if let Some(why) = &sp.none_because {
        d.toned(Tone::Warn, format!("Nothing joined: {why}"));
    }
    if !sp.unreported_examples.is_empty() {
        d.line(format!(
            "Never reported, e.g. requests {}: the server sent no span for them within measurement.traces.wait",
            list(&sp.unreported_examples)
        ));
    }
}

/// The mismatches and the tails' tables, whatever the source.
fn body(d: &mut Doc, sp: &ServerSpans) {
    if sp.source.is_some() && !sp.unreported_examples.is_empty() {
        d.line(format!(
            "No timing stated, e.g. requests {}",
            list(&sp.unreported_examples)
        ));
    }
    for m in &sp.mismatches {
        d.toned(
            Tone::Warn,
            format!(
                "Request {}: the server's {} ({} ms) exceeds the client's view from its send ({} ms): the two disagree about this request",
                m.index,
                m.what.to_uppercase(),
                num(m.server_ms),
                num(m.client_ms)
            ),
        );
    }
    for (what, tails) in [("TTFT", &sp.ttft), ("E2E", &sp.e2e)] {
        if tails.is_empty() {
            continue;
        }
        // An engine that states prefill and decode as one has one column for them.
        let unsplit = tails.iter().any(|t| t.parts.inference_ms.is_some());
        let mut head = vec![
            what,
            "requests",
            "dispatch",
            "client/net",
            "srv other",
            "queue",
        ];
        if unsplit {
            head.push("prefill+decode");
        } else {
            head.extend(["prefill", "decode"]);
        }
        head.push("largest");
        d.table(&head, tails.iter().map(|t| row(t, unsplit)).collect());
    }
    if !sp.ttft.is_empty() || !sp.e2e.is_empty() {
        d.line("Each row: the requests at or above the percentile, their latency's parts averaged (ms; they add up to the mean of those requests). client/net: the client's time from its send less the server's (connecting, uploading, the network, framing); srv other: the server's time outside queue, prefill and decode (parsing, tokenizing, hand-off).");
    }
}

fn list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

fn row(t: &Tail, unsplit: bool) -> Vec<String> {
    let p = &t.parts;
    // A part averaging less than half a microsecond either way is none (not "-0.00").
    let num = |v: f64| num(if v.abs() < 0.0005 { 0.0 } else { v });
    let mut v = vec![
        format!("p{} {} ms", t.percentile, num(t.value_ms)),
        t.requests.to_string(),
        num(p.dispatch_ms),
        num(p.client_ms),
        num(p.server_other_ms),
        num(p.queue_ms),
    ];
    if unsplit {
        v.push(p.inference_ms.map_or("—".into(), &num));
    } else {
        v.push(num(p.prefill_ms));
        v.push(p.decode_ms.map_or("—".into(), &num));
    }
    v.push(t.dominant.clone());
    v
}

/// The page's figures: each tail as stacked parts, and the slowest request's timeline.
pub(super) fn figures(d: &mut Doc, sp: &ServerSpans) {
    for (id, what, tails) in [
        ("spans-ttft", "TTFT", &sp.ttft),
        ("spans-e2e", "E2E", &sp.e2e),
    ] {
        if !tails.is_empty() {
            d.figure(stacked(id, what, tails));
        }
    }
    if let Some(t) = &sp.slowest {
        // Where the server row starts: the span's own start, or (from an answer's timing) the
        // send plus its client/network part (the run's, where the queue is derived).
        let start = match sp.source.as_deref() {
            Some(source) => format!(
                "from the send plus the client/network part ({source} state no start), in the parts below"
            ),
            None => "from its span's start (its wall clock on the run's: exact on one host), in the parts below".to_owned(),
        };
        d.figure(timeline(t, &start));
    }
}

/// One horizontal bar per percentile, its parts stacked in the order they happen.
fn stacked(id: &str, what: &str, tails: &[Tail]) -> String {
    let (w, row, left, top) = (560.0, 30.0, 120.0, 34.0);
    let h = top + row * tails.len() as f64 + 44.0;
    let span = tails.iter().map(|t| t.parts.total()).fold(1e-9, f64::max);
    let x = |ms: f64| left + (w - left - 20.0) * (ms.max(0.0) / span);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" class="chart" role="img" aria-label="Where the {what} tail's time went" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<text x="8" y="18" font-size="14" font-weight="bold">Where the {what} tail's time went (mean of the requests at or above each percentile)</text>"#
    );
    for (k, t) in tails.iter().enumerate() {
        let y = top + row * k as f64;
        let _ = write!(
            s,
            r#"<text x="8" y="{}">p{} · {} ms</text>"#,
            y + 15.0,
            t.percentile,
            num(t.value_ms)
        );
        segments(&mut s, &t.parts, y, &x, 0.0);
    }
    legend(
        &mut s,
        &tails[0].parts,
        top + row * tails.len() as f64 + 10.0,
    );
    s.push_str("</svg>");
    s
}

/// A request's parts as consecutive segments from `from_ms`.
fn segments(s: &mut String, p: &Parts, y: f64, x: &dyn Fn(f64) -> f64, from_ms: f64) {
    let mut at = from_ms;
    for ((name, v), colour) in p.named().into_iter().zip(COLOURS) {
        let v = v.max(0.0);
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="{}" height="18" fill="{colour}"><title>{name}: {} ms</title></rect>"#,
            x(at),
            y + 2.0,
            (x(at + v) - x(at)).max(0.0),
            num(v)
        );
        at += v;
    }
}

/// The names of `p`'s parts, in their colours.
fn legend(s: &mut String, p: &Parts, y: f64) {
    let names: Vec<&str> = p.named().into_iter().map(|(n, _)| n).collect();
    for (k, (name, colour)) in names.iter().zip(COLOURS).enumerate() {
        let x = 8.0 + 92.0 * k as f64;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{y}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            x + 14.0,
            y + 9.0,
            esc(name)
        );
    }
}

/// The slowest request: the client's row (from its latency origin: waiting to be sent, then
/// in flight to its first token, then streaming) above the server's (its span's start, then
/// queue, prefill and decode).
fn timeline(t: &Timeline, start_words: &str) -> String {
    let (w, left) = (560.0, 70.0);
    let origin = t.origin_us as f64;
    let end = (t.end_us as f64 - origin) / 1000.0;
    let server_start = (t.server_start_us as f64 - origin) / 1000.0;
    let span = end
        .max(server_start + t.e2e.total() - t.e2e.dispatch_ms - t.e2e.client_ms)
        .max(1e-9);
    let x = |ms: f64| left + (w - left - 20.0) * (ms.max(0.0) / span);
    let ms = |us: u64| (us as f64 - origin) / 1000.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="spans-slowest" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} 146" class="chart" role="img" aria-label="The slowest request's client and server segments" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<text x="8" y="18" font-size="14" font-weight="bold">The slowest request (index {}, {} ms end to end): client and server</text>"#,
        t.index,
        num(end)
    );
    let client = [
        ("waiting to be sent", 0.0, ms(t.sent_us), COLOURS[0]),
        (
            if t.first_token_us.is_some() {
                "in flight to its first token"
            } else {
                "in flight to its whole answer"
            },
            ms(t.sent_us),
            t.first_token_us.map_or(end, ms),
            "#b0c4de",
        ),
        (
            "streaming",
            t.first_token_us.map_or(end, ms),
            end,
            "#8fbc8f",
        ),
    ];
    let _ = write!(s, r#"<text x="8" y="50">client</text>"#);
    for (name, a, b, colour) in client {
        let _ = write!(
            s,
            r#"<rect x="{}" y="36" width="{}" height="18" fill="{colour}"><title>{name}: {} ms</title></rect>"#,
            x(a),
            (x(b) - x(a)).max(0.0),
            num(b - a)
        );
    }
    let _ = write!(s, r#"<text x="8" y="82">server</text>"#);
    let server = Parts {
        dispatch_ms: 0.0,
        client_ms: 0.0,
        ..t.e2e
    };
    segments(&mut s, &server, 66.0, &x, server_start);
    let _ = write!(
        s,
        r#"<text x="8" y="104" font-size="11">client: {}</text><text x="8" y="117" font-size="11">server: {}.</text>"#,
        if t.first_token_us.is_some() {
            "waiting to be sent (grey), in flight to its first token (blue), streaming (green)."
        } else {
            "waiting to be sent (grey), in flight to its whole answer (blue): not streamed."
        },
        esc(start_words)
    );
    legend(&mut s, &t.e2e, 128.0);
    s.push_str("</svg>");
    s
}
