//! Agent tasks in a report: the terminal's section (task latency and goodput against the task
//! SLO, where the critical paths' time went, per node and per depth) and the page's figures
//! (the median and the p99 task's timelines, task latency by percentile against the SLO).

use std::fmt::Write as _;

use super::svg::esc;
use super::{Doc, Tone, num};
use crate::analyze::Summary;
use crate::analyze::tasks::{Bar, NodeStats, TaskSummary, Timeline};

/// The task SLO's verdict among a report's first lines, with task goodput.
pub(super) fn headline(d: &mut Doc, s: &Summary) {
    let Some(t) = &s.steady.tasks else {
        return;
    };
    let goodput = match (t.attainment, t.goodput_tps) {
        (Some(a), Some(g)) => format!(
            "; {:.1}% of tasks met every SLO: task goodput {} tasks/s",
            a * 100.0,
            num(g)
        ),
        _ => String::new(),
    };
    if let Some((met, words)) = t.verdict() {
        let mut words = words;
        if let Some(first) = words.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        d.toned(Tone::warn_if(!met), format!("{words}{goodput}"));
    } else if let Some(rest) = goodput.strip_prefix("; ") {
        d.line(format!("Tasks: {rest}"));
    }
}

/// The terminal's (and every text format's) section.
pub(super) fn section(d: &mut Doc, s: &Summary) {
    let Some(t) = &s.steady.tasks else {
        return;
    };
    d.h("Agent tasks (each arrival a task; its model calls are the requests above)");
    d.toned(
        Tone::warn_if(t.calls_not_sent > 0 || t.ended_early > 0),
        format!(
            "{} steady tasks: {} completed, {} ended early by a failed call or the stop; calls {} planned, {} sent, {} not sent",
            t.tasks, t.completed, t.ended_early, t.calls_planned, t.calls_sent, t.calls_not_sent
        ),
    );
    if let Some(l) = &t.latency_ms {
        let mut line = format!(
            "Task latency (intended start to last answer, completed tasks): p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
            num(l.p50),
            num(l.p90),
            num(l.p99),
            num(l.max)
        );
        if let (Some(slo), Some(met)) = (t.slo_ms, t.slo_met) {
            line.push_str(&format!(
                "; SLO p{} ≤ {} ms {}",
                t.percentile,
                num(slo),
                if met { "✓" } else { "✗ missed" }
            ));
        }
        d.toned(Tone::warn_if(t.slo_met == Some(false)), line);
    }
    if let (Some(a), Some(g)) = (t.attainment, t.goodput_tps) {
        d.line(format!(
            "Task goodput {} tasks/s: {:.1}% of tasks completed with every call within the request SLO{}",
            num(g),
            a * 100.0,
            if t.slo_ms.is_some() {
                " and the task within its own"
            } else {
                ""
            }
        ));
    }
    if let Some(slip) = &t.slip_ms {
        d.line(format!(
            "Later calls sent at the end of what they wait for + think time: slip p50 {} ms, p99 {} ms, max {} ms",
            num(slip.p50),
            num(slip.p99),
            num(slip.max)
        ));
    }
    if let Some(c) = &t.critical {
        let total = (c.model_ms + c.tool_ms + c.wait_ms).max(f64::MIN_POSITIVE);
        let share = |x: f64| format!("{} ms ({:.0}%)", num(x), 100.0 * x / total);
        d.line(format!(
            "Critical path (mean over completed tasks): model calls {}, tools {}, waits {}",
            share(c.model_ms),
            share(c.tool_ms),
            share(c.wait_ms)
        ));
        for (path, n) in &c.paths {
            d.line(format!("  critical in {n} tasks: {path}"));
        }
    }
    let rows = if t.per_node.is_empty() {
        &t.per_depth
    } else {
        &t.per_node
    };
    d.table(
        &[
            "node", "depth", "sent", "ok", "TTFT p50", "TTFT p99", "TPOT p50", "E2E p99", "input",
            "reusable", "cached",
        ],
        rows.iter().map(row).collect(),
    );
    d.line("input: mean prompt tokens; reusable: the conversation it continued (its context's prompt and answer); cached: what the server reported served from its cache.");
}

fn row(n: &NodeStats) -> Vec<String> {
    let p = |x: &Option<crate::analyze::Dist>, f: fn(&crate::analyze::Dist) -> f64| {
        x.as_ref().map_or("—".to_owned(), |d| num(f(d)))
    };
    vec![
        n.node.clone(),
        n.depth.to_string(),
        n.sent.to_string(),
        n.ok.to_string(),
        p(&n.ttft_ms, |d| d.p50),
        p(&n.ttft_ms, |d| d.p99),
        p(&n.tpot_ms, |d| d.p50),
        p(&n.e2e_ms, |d| d.p99),
        p(&n.input_tokens, |d| d.mean),
        p(&n.reusable_tokens, |d| d.mean),
        p(&n.cached_tokens, |d| d.mean),
    ]
}

/// The page's figures: the median and p99 tasks' timelines.
pub(super) fn timelines(d: &mut Doc, t: &TaskSummary) {
    for (id, which, tl) in [
        ("task-median", "median", &t.median_task),
        ("task-p99", "p99", &t.p99_task),
    ] {
        if let Some(tl) = tl {
            d.figure(timeline_svg(id, which, tl, t.slo_ms));
        }
    }
}

/// One task as a chart of bars, a row per node: a model call's wait before it was sent
/// (shaded), its time to first token and its streaming; a tool's run. Nodes on the critical
/// path are outlined.
fn timeline_svg(id: &str, which: &str, tl: &Timeline, slo: Option<f64>) -> String {
    let (w, row, left, top) = (560.0, 22.0, 100.0, 34.0);
    let h = top + row * tl.bars.len() as f64 + 60.0;
    let span = tl
        .bars
        .iter()
        .map(|b| b.end_ms)
        .fold(slo.unwrap_or(0.0).max(tl.latency_ms), f64::max)
        .max(1.0);
    let x = |ms: f64| left + (w - left - 20.0) * (ms.max(0.0) / span);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" class="chart" role="img" aria-label="The {which} task's nodes over time" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<text x="8" y="18" font-size="14" font-weight="bold">The {which} task ({} ms, task {}): its nodes over time</text>"#,
        num(tl.latency_ms),
        tl.task
    );
    for (k, b) in tl.bars.iter().enumerate() {
        let y = top + row * k as f64;
        let _ = write!(
            s,
            r#"<text x="8" y="{}" >{}</text>"#,
            y + 14.0,
            esc(&b.node)
        );
        let stroke = if b.critical {
            r##" stroke="#111" stroke-width="1.5""##
        } else {
            ""
        };
        if b.kind == "tool" {
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="14" fill="#e0a040"{stroke}><title>tool {}: {} ms</title></rect>"##,
                x(b.start_ms),
                y + 3.0,
                (x(b.end_ms) - x(b.start_ms)).max(1.0),
                esc(&b.node),
                num(b.end_ms - b.start_ms)
            );
            continue;
        }
        call_bars(&mut s, b, y, &x, stroke);
    }
    let base = top + row * tl.bars.len() as f64 + 14.0;
    if let Some(slo) = slo {
        let _ = write!(
            s,
            r##"<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#c03030" stroke-dasharray="4 3"/><text x="{0}" y="{3}" fill="#c03030" text-anchor="end">task SLO {4} ms</text>"##,
            x(slo),
            top,
            base - 10.0,
            base + 4.0,
            num(slo)
        );
    }
    let _ = write!(
        s,
        r##"<text x="8" y="{}" fill="#555">grey: waiting to be sent · light blue: to first token · blue: streaming · orange: tool</text><text x="8" y="{}" fill="#555">outlined: the critical path · the axis runs from 0 to {} ms</text></svg>"##,
        base + 20.0,
        base + 36.0,
        num(span)
    );
    s
}

/// A model call's three bars: waiting for its send (shaded), to its first token, streaming.
fn call_bars(s: &mut String, b: &Bar, y: f64, x: &dyn Fn(f64) -> f64, stroke: &str) {
    let sent = b.sent_ms.unwrap_or(b.start_ms);
    let first = b.first_token_ms.unwrap_or(sent);
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="14" fill="#d0d0d0"><title>waited {} ms for its send</title></rect>"##,
        x(b.start_ms),
        y + 3.0,
        (x(sent) - x(b.start_ms)).max(0.0),
        num(sent - b.start_ms)
    );
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="14" fill="#9ab8e0"{stroke}><title>{}: first token after {} ms</title></rect>"##,
        x(sent),
        y + 3.0,
        (x(first) - x(sent)).max(1.0),
        esc(&b.node),
        num(first - b.start_ms)
    );
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="14" fill="#3a6fb0"{stroke}><title>{}: streamed until {} ms</title></rect>"##,
        x(first),
        y + 3.0,
        (x(b.end_ms) - x(first)).max(1.0),
        esc(&b.node),
        num(b.end_ms)
    );
}
