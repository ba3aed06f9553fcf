//! goodput's steady records as another tool's client would have counted them: per kind, one
//! unit per successful request in the order sent (its one value, or its gaps), so that a row
//! has both a figure and, with the other side's units, a noise band.

use super::{Events, Kind};
use crate::analyze::{RequestMetrics, request_metrics};
use crate::contract::{LatencyOrigin, TokenSource};
use crate::record::Record;

/// A request's arrivals as the other tool's client takes them, in order: every text chunk and,
/// with [`Events::Choices`], every event with a choice but no text too.
pub(super) fn arrivals(r: &Record, events: Events) -> Vec<u64> {
    let mut at: Vec<u64> = r.chunks.iter().map(|(t, _)| t).collect();
    if events == Events::Choices && !r.bare_us.is_empty() {
        at.extend_from_slice(&r.bare_us);
        at.sort_unstable();
    }
    at
}

/// Milliseconds from `from` to `to`, both µs on the run's clock.
fn ms(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e3
}

/// The values of kind `k` per successful request (`ok`, in the order sent), by the rules of a
/// client that counts `events`; `None` for a kind that is not per request (a throughput, a
/// count).
pub(super) fn units(
    ok: &[&Record],
    source: TokenSource,
    k: Kind,
    events: Events,
) -> Option<Vec<Vec<f64>>> {
    let per = |f: &dyn Fn(&Record, &RequestMetrics) -> Option<f64>| {
        ok.iter()
            .map(|r| {
                f(r, &request_metrics(r, LatencyOrigin::Sent, source))
                    .into_iter()
                    .collect()
            })
            .collect()
    };
    // (first, last) arrival as counted, and the send.
    let span = |r: &Record| {
        let at = arrivals(r, events);
        Some((r.sent_us?, *at.first()?, *at.last()?))
    };
    let choices = events == Events::Choices;
    Some(match k {
        Kind::Ttft if choices => per(&|r, _| span(r).map(|(s, f, _)| ms(s, f))),
        Kind::Ttft => per(&|_, m| m.ttft_ms()),
        Kind::E2e if choices => per(&|r, _| span(r).map(|(s, _, l)| ms(s, l))),
        Kind::E2e => per(&|_, m| m.e2e_ms()),
        Kind::PerRequestGap => per(&|r, m| {
            let n = f64::from(m.output_tokens);
            (n > 1.0).then_some(())?;
            match choices {
                true => span(r).map(|(_, f, l)| ms(f, l) / (n - 1.0)),
                false => Some((m.e2e_ms()? - m.ttft_ms()?) / (n - 1.0)),
            }
        }),
        Kind::TpotWithFirst => per(&|_, m| {
            let n = f64::from(m.output_tokens);
            (n > 0.0).then_some(())?;
            Some(m.e2e_ms()? / n)
        }),
        Kind::ChunkGap => ok
            .iter()
            .map(|r| {
                arrivals(r, events)
                    .windows(2)
                    .map(|w| ms(w[0], w[1]))
                    .collect()
            })
            .collect(),
        Kind::InputTokens => per(&|r, _| r.usage_prompt_tokens.map(f64::from)),
        Kind::OutputTokens => per(&|_, m| Some(f64::from(m.output_tokens))),
        Kind::RequestsPerS | Kind::OutputTokensPerS | Kind::Completed => return None,
    })
}

/// How long, at the median, this server's first event with a choice came before its first
/// text (a role-only chunk sent before the prefill), and goodput's own TTFT median, both ms:
/// `None` when no request had such a lead.
pub(super) fn role_lead(ok: &[&Record]) -> Option<(f64, f64)> {
    let mut leads = Vec::new();
    let mut ttfts = Vec::new();
    for r in ok {
        let (Some(sent), Some((text, _))) = (r.sent_us, r.chunks.first()) else {
            continue;
        };
        let first = r.bare_us.first().copied().unwrap_or(text).min(text);
        leads.push(ms(first, text));
        ttfts.push(ms(sent, text));
    }
    let median = |v: Vec<f64>| crate::stats::Dist::of(v).map(|d| d.p50);
    Some((median(leads)?, median(ttfts)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Phase;

    /// A streamed answer of 8 tokens as vLLM's client sees llama.cpp's: a role-only chunk at
    /// 100 ms (after the prefill), a token every 20 ms from 120 ms, and a finish chunk with an
    /// empty delta in the same read as the last token.
    fn answer() -> Record {
        let p = crate::plan::PlannedRequest {
            index: 0,
            phase: Phase::Steady,
            intended_us: None,
            input_tokens: 16,
            output_tokens: 8,
            prompt: String::new(),
            messages: None,
            shared_tokens: None,
            class: None,
            model: None,
            stage: None,
            stage_rps: None,
            images: Vec::new(),
            tools: None,
        };
        let mut r = Record::planned(&p, Phase::Steady, "t");
        r.sent_us = Some(1_000_000);
        for i in 0..8u64 {
            r.chunks.push(1_120_000 + 20_000 * i, 1);
        }
        r.first_token_us = Some(1_120_000);
        r.bare_us = vec![1_100_000, 1_260_000];
        r.end_us = Some(1_261_000);
        r.usage_completion_tokens = Some(8);
        r.client_output_tokens = 8;
        r
    }

    #[test]
    fn vllms_rule_counts_the_role_and_finish_chunks_and_goodputs_does_not() {
        let r = answer();
        let ok = [&r];
        let one = |k, e| units(&ok, TokenSource::Usage, k, e).unwrap()[0].clone();
        // vLLM: TTFT at the role chunk; 9 gaps (the role chunk's to the first token, seven
        // between tokens, the finish chunk's 0 ms); E2EL at the finish chunk.
        assert_eq!(one(Kind::Ttft, Events::Choices), vec![100.0]);
        let gaps = one(Kind::ChunkGap, Events::Choices);
        assert_eq!(gaps.len(), 9, "{gaps:?}");
        assert_eq!(gaps.iter().filter(|g| **g == 0.0).count(), 1);
        assert_eq!(one(Kind::E2e, Events::Choices), vec![260.0]);
        assert_eq!(one(Kind::PerRequestGap, Events::Choices), vec![160.0 / 7.0]);
        // Text chunks alone: TTFT at the first token, 7 gaps of 20 ms.
        assert_eq!(one(Kind::Ttft, Events::Text), vec![120.0]);
        assert_eq!(one(Kind::ChunkGap, Events::Text), vec![20.0; 7]);
        // The role chunk came 20 ms before the first token.
        assert_eq!(role_lead(&ok), Some((20.0, 120.0)));
    }
}
