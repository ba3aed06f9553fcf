//! What the answers were and how they were made, in a report: a tool dataset's calls (how many
//! were right, how they went wrong, how many were on time but wrong — what a latency-only
//! goodput would have counted), and speculative decoding's acceptance beside TPOT.

use super::{Doc, Tone};
use crate::analyze::Summary;

/// The calls' grades: the share correct, each verdict, the phases, and examples.
pub(super) fn section(d: &mut Doc, s: &Summary) {
    let Some(t) = &s.steady.tools else {
        return;
    };
    d.h("Tool calls, graded per request");
    let share = t
        .correct_share
        .map_or("—".to_owned(), |x| format!("{:.1}%", x * 100.0));
    d.toned(
        Tone::warn_if(t.graded > 0 && t.correct < t.graded),
        format!(
            "Correct: {} of {} graded steady requests ({share}); rule: {}",
            t.correct, t.graded, t.rule
        ),
    );
    let rows: Vec<Vec<String>> = t
        .verdicts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(v, n)| {
            let name = crate::quality::tools::Verdict::keyed(v)
                .map_or_else(|| v.replace('_', " "), |v| v.name().to_owned());
            vec![
                name,
                n.to_string(),
                format!("{:.1}%", *n as f64 * 100.0 / t.graded.max(1) as f64),
            ]
        })
        .collect();
    if !rows.is_empty() {
        d.table(&["verdict", "requests", "share"], rows);
    }
    if let (Some(on_time), Some(right)) = (t.on_time, t.on_time_and_correct) {
        let wrong = on_time - right;
        let counted = if t.counted_in_slo {
            "goodput and attainment count only the correct ones (slo.correct_tool_calls)"
        } else {
            "goodput and attainment count them all: slo.correct_tool_calls = false"
        };
        d.toned(
            Tone::warn_if(wrong > 0 && !t.counted_in_slo),
            format!(
                "On time: {on_time} of the graded requests met the latency thresholds; {wrong} of those called wrongly; {counted}"
            ),
        );
    }
    let phases: Vec<String> = t
        .by_phase
        .iter()
        .map(|(p, g)| format!("{p} {} of {}", g.correct, g.graded))
        .collect();
    if phases.len() > 1 {
        d.line(format!("Correct by phase: {}", phases.join(", ")));
    }
    for e in &t.examples {
        d.line(format!("Wrong: {e}"));
    }
}

/// Speculative decoding: the acceptance, where it comes from, and the TPOT it explains.
pub(super) fn speculative(d: &mut Doc, s: &Summary) {
    let Some(x) = &s.steady.speculative else {
        return;
    };
    let share = x
        .acceptance
        .map_or("—".to_owned(), |a| format!("{:.1}%", a * 100.0));
    let mut line = format!(
        "Speculative decoding: {} of {} draft tokens accepted ({share}), {}",
        x.accepted, x.drafted, x.source
    );
    if let Some(p) = &x.per_request {
        line.push_str(&format!(
            "; per request min {:.1}% · p50 {:.1}% · max {:.1}%",
            p.min * 100.0,
            p.p50 * 100.0,
            p.max * 100.0
        ));
    }
    d.line(line);
    if let (Some(lo), Some(hi)) = (x.tpot_p50_low_ms, x.tpot_p50_high_ms) {
        d.line(format!(
            "TPOT p50 {lo:.1} ms below the median acceptance, {hi:.1} ms at or above it: a prompt set that drafts worse decodes slower, so acceptance is part of the workload"
        ));
    }
}
