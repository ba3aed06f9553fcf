//! The statements every reader must see beside the numbers: how output tokens were counted,
//! what each request carried beyond the workload, reasoning split from the answer, lengths
//! that disagree.

use super::*;

/// Statements every reader must see beside the numbers.
pub(super) fn notes(
    c: &Contract,
    phases: &BTreeMap<String, PhaseStats>,
    output_count: &OutputCount,
    lengths: &LengthCheck,
    steady_recs: &[&Record],
    metrics: &[&RequestMetrics],
    output_length_mismatches: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    if !c.load.is_open() {
        notes.push("Closed loop: latency is measured from the actual send and the load waits for the server; tail and capacity claims are not valid under closed-loop load.".to_owned());
    }
    if !c.workload.stream {
        notes.push("Responses were not streamed: TTFT, TPOT and ITL are not measured.".to_owned());
    }
    if let Some(w) = phases.get("warmup") {
        let rule = match c.warmup.duration {
            Some(d) => format!("warm-up duration {d}"),
            None => format!("warm-up {} = {}", arrivals(c), c.warmup.requests),
        };
        notes.push(format!(
            "{} warm-up requests excluded from steady statistics ({rule}).",
            w.requests
        ));
    } else {
        notes.push("No warm-up: steady statistics include the server's first requests.".to_owned());
    }
    notes.extend(count_notes(c, output_count));
    notes.extend(length_notes(c, lengths));
    notes.extend(reasoning_note(c, phases.get("steady"), metrics));
    notes.extend(request_note(c));
    let retried = steady_recs.iter().filter(|r| r.retried.is_some()).count();
    if retried > 0 {
        notes.push(format!(
            "{retried} steady requests were sent twice: the kept-alive connection the first attempt went out on had already been closed by the server (which closes connections without saying so), so it never saw it; each was re-sent at once on a new connection and is timed from its first send."
        ));
    }
    if output_length_mismatches > 0 {
        notes.push(format!("{output_length_mismatches} steady requests returned an output length other than planned although it was enforced."));
    }
    notes
}

/// What every request carried beyond the body goodput composes (`[target.request]`): part of
/// the target, so part of what the numbers are conditional on. Header values read from the
/// environment are named by their variable only.
/// A contract value as a note shows it: whole up to 80 characters, else its start and its
/// length (the contract in the bundle keeps it whole).
pub(super) fn shortened(v: &str) -> String {
    match v.char_indices().nth(80) {
        None => v.to_owned(),
        Some((i, _)) => format!("{}… ({} bytes)", &v[..i], v.len()),
    }
}

pub(super) fn request_note(c: &Contract) -> Option<String> {
    let r = &c.target.request;
    if r.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !r.extra_body.is_empty() {
        let fields: Vec<String> = r
            .extra_body
            .iter()
            .map(|(k, v)| format!("{k} = {}", shortened(&v.to_string())))
            .collect();
        parts.push(format!("extra body fields {}", fields.join(", ")));
    }
    if !r.headers.is_empty() {
        let headers: Vec<String> = r
            .headers
            .iter()
            .map(|(k, v)| match v {
                crate::contract::HeaderSource::Value(v) => format!("{k}: {}", shortened(v)),
                crate::contract::HeaderSource::Env { env } => format!("{k} (from ${env})"),
            })
            .collect();
        parts.push(format!("headers {}", headers.join(", ")));
    }
    Some(format!(
        "Every request also carried {} ([target.request]).",
        parts.join(" and ")
    ))
}

/// When requests reasoned before answering: how many, how their reasoning tokens were counted,
/// what TTFT and TTFO each mean here, and whether the SLO holds the answer's latency.
/// `metrics`: the successful steady requests'.
pub(super) fn reasoning_note(
    c: &Contract,
    steady: Option<&PhaseStats>,
    metrics: &[&RequestMetrics],
) -> Option<String> {
    let st = steady?;
    let r = st.reasoning_tokens.as_ref()?;
    let (mut reasoned, mut by_usage, mut no_answer) = (0u64, 0u64, 0u64);
    for m in metrics {
        if m.reasoning_tokens.is_some() {
            reasoned += 1;
            by_usage += u64::from(m.reasoning_from_usage);
            no_answer += u64::from(m.ttfo_ms().is_none());
        }
    }
    let counted = match (by_usage, reasoned - by_usage) {
        (_, 0) => "as the server reported them (usage.completion_tokens_details.reasoning_tokens)"
            .to_owned(),
        (0, _) => {
            "by the client, from the reasoning chunks (the server reported no reasoning_tokens)"
                .to_owned()
        }
        (u, n) => format!("as the server reported them for {u}, by the client for {n}"),
    };
    let share = st
        .output_tokens
        .as_ref()
        .filter(|o| o.mean > 0.0)
        .map(|o| format!(" ({:.0}% of output)", 100.0 * r.mean / o.mean))
        .unwrap_or_default();
    let p50 = |d: &Option<Dist>| {
        d.as_ref()
            .map_or("—".to_owned(), |d| format!("{:.0}", d.p50))
    };
    let mut s = format!(
        "{reasoned} of {} successful steady requests reasoned before answering: {:.0} reasoning tokens per request on average{share}, counted {counted}. TTFT is the first token of either kind; TTFO the first answer token (p50 {} vs {} ms).",
        st.ok,
        r.mean,
        p50(&st.ttft_ms),
        p50(&st.ttfo_ms),
    );
    if no_answer > 0 {
        s.push_str(&format!(" {no_answer} of them ended before any answer token (no TTFO): raise the output length, or the reasoning budget."));
    }
    if c.slo.ttft_ms.is_some() && c.slo.ttfo_ms.is_none() {
        s.push_str(" The SLO judges TTFT, which here is the first *reasoning* token, not the first answer token a user sees: set slo.ttfo_ms to hold the answer's latency.");
    }
    Some(s)
}

/// How a record's client count was made: recounted after the run, or as the stream arrived by
/// the contract's method.
pub(super) fn counted_how(c: &Contract, r: &Record) -> &'static str {
    match r.counted {
        Some(Counted::Tokenizer) => "tokenizer",
        Some(Counted::Server) => "server",
        Some(Counted::Words) => "words",
        None => match c.measurement.client_token_count {
            Some(ClientTokenCount::Words) => "words",
            _ => "chunks",
        },
    }
}

/// The words for a way of counting, in a sentence.
pub(super) fn counted_phrase(how: &str, embedded: bool) -> &'static str {
    match how {
        "tokenizer" => {
            "recounted after the run by the workload's tokenizer file, every chunk exact"
        }
        "server" => {
            "recounted after the run at the target's /tokenize: each output and its first chunk exact, the rest's split among chunks (ITL per token) estimated by their length"
        }
        "words" if embedded => "words, the simulator's tokens",
        "words" => "words",
        _ => "one token per text-carrying chunk",
    }
}

/// How the output tokens of the successful steady requests were counted.
pub(super) fn output_count(
    c: &Contract,
    ok: &[&&Record],
    metrics: &[&RequestMetrics],
) -> OutputCount {
    let mut out = OutputCount::default();
    let (mut n, mut differing, mut usage, mut client) = (0u64, 0u64, 0u64, 0u64);
    let mut hows: BTreeMap<&str, u64> = BTreeMap::new();
    for (r, m) in ok.iter().zip(metrics) {
        let how = counted_how(c, r);
        if m.output_from_usage {
            out.usage += 1;
        } else {
            *out.client.entry(how.to_owned()).or_default() += 1;
        }
        if r.counted == Some(Counted::Words) {
            out.approximate += 1;
        }
        if let Some(u) = r.usage_completion_tokens {
            n += 1;
            usage += u64::from(u);
            client += u64::from(r.client_output_tokens);
            differing += u64::from(u != r.client_output_tokens);
            *hows.entry(how).or_default() += 1;
        }
    }
    out.compared = (n > 0).then(|| CountComparison {
        client: hows
            .iter()
            .max_by_key(|(_, k)| **k)
            .map_or("chunks", |(h, _)| h)
            .to_owned(),
        requests: n,
        differing,
        usage_tokens: usage,
        client_tokens: client,
    });
    out
}

/// What a reader must know of the output counts: where they come from, whether the server's
/// and the client's agree (and by how much they differ, without blaming either), and which are
/// approximate.
pub(super) fn count_notes(c: &Contract, oc: &OutputCount) -> Vec<String> {
    let embedded = c.target.url.is_none();
    let mut notes = Vec::new();
    if !c.target.api.capabilities().generates {
        return notes;
    }
    let clients = |m: &BTreeMap<String, u64>| -> String {
        let parts: Vec<String> = m
            .iter()
            .map(|(how, k)| format!("{} ({k})", counted_phrase(how, embedded)))
            .collect();
        parts.join("; ")
    };
    match (oc.usage, oc.client.values().sum::<u64>()) {
        (0, 0) => {}
        (_, 0) => notes.push("Output tokens from the server's usage.".to_owned()),
        (0, _) => notes.push(format!(
            "Output tokens counted by the client: {}.",
            clients(&oc.client)
        )),
        (u, _) => notes.push(format!(
            "Output tokens from the server's usage for {u} requests; counted by the client for the rest: {}.",
            clients(&oc.client)
        )),
    }
    if let Some(k) = &oc.compared {
        let how = counted_phrase(&k.client, embedded);
        if k.differing == 0 {
            notes.push(format!(
                "The client's own count ({how}) agrees with the server's usage on all {} requests that report it.",
                k.requests
            ));
        } else {
            let diff =
                (k.client_tokens as f64 - k.usage_tokens as f64) / k.usage_tokens.max(1) as f64;
            let used = if oc.usage > 0 {
                "the server's usage"
            } else {
                "the client's count (measurement.output_tokens = \"client\")"
            };
            notes.push(format!(
                "The client's own count ({how}) differs from the server's usage on {} of {} requests: {} tokens counted against {} reported ({:+.1}%); output tokens, TPOT and output throughput use {used}.",
                k.differing,
                k.requests,
                k.client_tokens,
                k.usage_tokens,
                diff * 100.0
            ));
        }
    }
    if oc.approximate > 0 {
        notes.push(format!(
            "{} requests' token counts are approximate: their chunks carried several words (or the server's usage differed from one token per chunk), and with neither a tokenizer file nor the target's /tokenize they were counted as words; TPOT and ITL per token{} are approximate for them. Give workload.tokenizer (the model's tokenizer.json) for exact counts.",
            oc.approximate,
            if oc.usage > 0 { "" } else { ", output tokens and output throughput" }
        ));
    }
    notes
}
