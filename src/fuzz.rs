//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer): each takes arbitrary
//! bytes, feeds them to one of the parsers that read what a server or a user's file controls,
//! and must return without panicking, hanging or growing without bound. Public for the fuzz
//! crate only; `scripts/fuzz.sh` runs them (docs/guide/testing.md, "Fuzzing").

use std::path::Path;

/// The stream parser, fed the input in pieces (the first byte picks the piece size, so splits
/// inside lines, CRLFs and characters are explored), once framed as SSE and once as JSON
/// lines, with its events taken for each API as the client takes them: whole frames of the
/// last event's shape, that shape's shortcut, or the API's event parser; each frame and each
/// shortcut must agree with the parser (`template::Checked`).
pub fn sse(data: &[u8]) {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(step).max(1);
    for framing in [crate::api::Framing::Sse, crate::api::Framing::JsonLines] {
        for kind in crate::api::ApiKind::all() {
            let adapter = kind.adapter();
            let mut parser = crate::client::sse::SseParser::for_framing(framing);
            let mut taken = crate::client::template::Checked::new(adapter.as_ref());
            let mut stopped = false;
            for piece in body.chunks(step) {
                if parser.feed(piece, &mut taken).is_break() {
                    assert!(parser.too_large().is_some());
                    stopped = true;
                    break;
                }
            }
            if !stopped {
                let _ = parser.finish(&mut taken);
            }
            assert!(taken.data_bytes <= body.len());
        }
    }
}

/// A non-streamed answer's body, through each API's parser.
pub fn event(data: &[u8]) {
    for k in crate::api::ApiKind::all() {
        let _ = k.adapter().parse_event(data);
    }
}

/// A contract's text: parsed and validated (no file it names is read).
pub fn contract(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = crate::contract::parse(&text, Path::new("fuzz.toml")) {
        // What was accepted must write out and read back as itself.
        let again = crate::contract::parse(&c.to_toml(), Path::new("fuzz.toml"));
        assert!(
            again.is_ok(),
            "a contract's own TOML did not parse: {again:?}"
        );
    }
}

/// A prompt dataset in every format (detected, then each forced).
pub fn dataset(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("fuzz.jsonl");
    let _ = crate::workload::dataset::parse(path, &text, None);
    for f in [
        crate::contract::DatasetFormat::Jsonl,
        crate::contract::DatasetFormat::Sharegpt,
    ] {
        let _ = crate::workload::dataset::parse(path, &text, Some(f));
    }
}

/// An arrival trace (CSV or JSONL) and a file of observed lengths.
pub fn trace(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(rows) = crate::workload::trace::parse(Path::new("fuzz.csv"), &text) {
        assert!(rows.windows(2).all(|w| w[0].offset_s <= w[1].offset_s));
    }
    let _ = crate::workload::parse_lengths(Path::new("fuzz.txt"), &text);
}

/// A Prometheus page (a server's `/metrics`, an accelerator exporter's), parsed as the scraper
/// parses it, kept as a scrape line of the bundle and read back: every value, NaN and the
/// infinities included, survives the bundle, and the server-side and energy analyses read it.
pub fn prom(data: &[u8]) {
    use crate::env::prom::{Scrape, key, parse};
    let text = String::from_utf8_lossy(data);
    let Ok(samples) = parse(&text) else {
        return;
    };
    let scrape = |t_s: f64, when: &str| Scrape {
        t_s,
        when: when.to_owned(),
        source: None,
        series: samples.iter().map(|(n, l, v)| (key(n, l), *v)).collect(),
        thinned: None,
    };
    let (first, last) = (scrape(0.0, "steady_start"), scrape(1.0, "steady_end"));
    let line = serde_json::to_string(&last).expect("a scrape serializes");
    let back: Scrape = serde_json::from_str(&line).expect("a scrape line reads back");
    assert_eq!(back.series.len(), last.series.len());
    for (k, v) in &last.series {
        let b = back.series[k];
        assert!(b == *v || (b.is_nan() && v.is_nan()), "{k}: {v} became {b}");
    }
    let _ = crate::analyze::server::derive(&[first, back], 0.0, 1.0, &[500_000]);
    let _ = crate::analyze::efficiency::unread_names(&last.series);
}

/// Another tool's result file (vLLM `bench serve`, GuideLLM), as `goodput audit` reads it.
pub fn peer_result(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(a) = crate::peers::peer_result(Path::new("fuzz.json"), &text) {
        let _ = a.document().terminal();
    }
}

/// A bundle's `requests.jsonl`, and the summary computed from what it held.
pub fn records(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    static BUILTIN: std::sync::LazyLock<crate::contract::Contract> =
        std::sync::LazyLock::new(|| {
            crate::contract::parse(crate::contract::BUILTIN, Path::new("builtin.toml"))
                .expect("the built-in contract parses")
        });
    if let Ok((records, _)) = crate::record::parse_jsonl_noted(Path::new("fuzz.jsonl"), &text) {
        let s = crate::analyze::summarize(&BUILTIN, &records, &crate::analyze::Context::default());
        let _ = crate::report::document(&s).terminal();
    }
}

/// A command line of each peer tool through `goodput import` (the first byte picks the tool;
/// the rest, split at NUL bytes, is its argv): refused, or imported to a contract whose keys
/// are exactly its flags' (`peers::check_imported`), never one whose text became structure.
pub fn import(data: &[u8]) {
    let Some((&tool, rest)) = data.split_first() else {
        return;
    };
    let head: &[&str] = match tool % 3 {
        0 => &["vllm", "bench", "serve"],
        1 => &["guidellm", "benchmark"],
        _ => &["aiperf", "profile"],
    };
    let mut args: Vec<String> = head.iter().map(|s| (*s).to_owned()).collect();
    args.extend(
        rest.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    );
    let imported = crate::peers::Tool::ALL[usize::from(tool) % 3].import(&args);
    if let Ok(imp) = imported
        && let Err(e) = crate::peers::check_imported(&imp)
    {
        panic!("{e}");
    }
}

/// An OTLP export (protobuf, as the HTTP receiver takes it; the same message gRPC frames)
/// through the span store: decoded, every span kept as the store keeps it (attributes scrubbed
/// of credentials, values cut) and its server timing read; a span line must never hold a
/// credential attribute's value.
pub fn spans(data: &[u8]) {
    use prost::Message as _;
    let Ok(req) = crate::otlp::proto::ExportTraceServiceRequest::decode(data) else {
        return;
    };
    for span in crate::otlp::SpanRecord::all_of(req, 1_000_000_000, 0) {
        let line = serde_json::to_string(&span).expect("a span writes as JSON");
        let _ = crate::otlp::ServerTiming::of(&span);
        for (k, v) in &span.attributes {
            if crate::secrets::is_credential_name(k) {
                assert_eq!(v, crate::secrets::MASK, "{line}");
            }
        }
        if let Some(t) = crate::otlp::ServerTiming::of(&span) {
            for x in [t.queue_s, t.ttft_s, t.prefill_s, t.decode_s, t.e2e_s]
                .into_iter()
                .flatten()
            {
                assert!(x.is_finite() && x >= 0.0, "{line}");
            }
        }
    }
}
