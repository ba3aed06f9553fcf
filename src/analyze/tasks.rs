//! Agent tasks (`[workload.task]`), from the raw records of their model calls: **task latency**
//! (the task's intended start to its last answer), **task goodput** (steady tasks per second
//! whose every planned call was sent, succeeded and met the SLO, within `slo.task_ms`), each
//! task's **critical path** (from its last answer back through what each node waited for
//! longest: model calls, tools, and the waits between), per-node and per-depth figures, and
//! the timelines of the median and the p99 task.
//!
//! A task is its steady records grouped by `task`; each record carries the calls its task
//! planned, what it waited for and the tool spans before it, so calls a failure kept from
//! being sent and the critical path come from the raw records alone. The accounting identity:
//! per task, planned calls = sent + not sent; over tasks, tasks = completed + ended early.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Dist, RequestMetrics, record_meets_slo, request_metrics};
use crate::contract::Contract;
use crate::record::{Record, ToolSpan};

/// The steady tasks, over the steady window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSummary {
    /// Tasks that started in the steady phase.
    pub tasks: u64,
    /// Tasks whose every planned call was sent and succeeded.
    pub completed: u64,
    /// Tasks a failed call (or the run's stop) ended before their last call.
    pub ended_early: u64,
    pub calls_planned: u64,
    pub calls_sent: u64,
    /// Calls never sent: a call they waited for failed, or the run stopped first.
    pub calls_not_sent: u64,
    /// The task SLO (`slo.task_ms`), ms, and the percentile it is judged at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_ms: Option<f64>,
    pub percentile: f64,
    /// Task latency at `percentile` within `slo_ms`, a task that did not complete counted as a
    /// miss (as a failed request is in the request SLO); `None` without a task SLO or tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<bool>,
    /// Task latency at `percentile` over every steady task, ms; `None` when the percentile
    /// falls on a task that did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_value_ms: Option<f64>,
    /// Steady tasks that completed with every call within the request SLO and the task within
    /// `slo_ms`; `None` without any SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
    /// Task goodput: such tasks per second over the steady window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tps: Option<f64>,
    /// Task latency of completed tasks, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<Dist>,
    /// Later calls' send minus their intended send (what they waited for plus their think
    /// time), ms: the client's slip, bounded like dispatch lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slip_ms: Option<Dist>,
    /// Where completed tasks' time went along their critical paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical: Option<Critical>,
    /// By node (one graph) and by depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_node: Vec<NodeStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_depth: Vec<NodeStats>,
    /// The median and the p99 completed task, node by node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_task: Option<Timeline>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_task: Option<Timeline>,
}

impl TaskSummary {
    /// The task SLO's verdict in words ("task SLO met: task latency p90 612 ms ≤ 700 ms"),
    /// with whether it was met; `None` without a task SLO or a completed task.
    pub fn verdict(&self) -> Option<(bool, String)> {
        let (slo, met) = (self.slo_ms?, self.slo_met?);
        let words = match self.slo_value_ms {
            Some(v) => format!(
                "task SLO {}: task latency p{} {v:.0} ms {} {slo:.0} ms",
                if met { "met" } else { "NOT met" },
                self.percentile,
                if met { "≤" } else { ">" },
            ),
            None => format!(
                "task SLO NOT met: task latency p{} falls on a task that did not complete ({} of {} ended early; SLO {slo:.0} ms)",
                self.percentile, self.ended_early, self.tasks
            ),
        };
        Some((met, words))
    }
}

/// The critical paths of the completed tasks: the mean time on them in model calls, tools
/// and waits (think time and the client's slip), and the paths most often critical.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Critical {
    pub model_ms: f64,
    pub tool_ms: f64,
    pub wait_ms: f64,
    /// Paths (node names joined by " → ") and how many tasks each was critical in, most
    /// frequent first (at most 3).
    pub paths: Vec<(String, u64)>,
}

/// One node (or depth) across the steady tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeStats {
    /// The node's name, or `depth N`.
    pub node: String,
    pub depth: u32,
    pub sent: u64,
    pub ok: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<Dist>,
    /// Prompt tokens: as the server reported them, else as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<Dist>,
    /// What the server reported served from its cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<Dist>,
    /// The conversation it continued (its context's prompt and answer): what a prefix cache
    /// can serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reusable_tokens: Option<Dist>,
}

/// One task, node by node, ms from its intended start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    pub task: u64,
    pub latency_ms: f64,
    pub bars: Vec<Bar>,
}

/// One node of a timeline: a model call from its intended send (`start_ms`) through its send
/// and first token to its end; a tool from start to end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bar {
    pub node: String,
    /// `model` or `tool`.
    pub kind: String,
    pub start_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
    pub end_ms: f64,
    /// On the task's critical path.
    pub critical: bool,
}

/// The tasks among `steady` (none: `None`), over a window of `window_s` seconds.
pub fn summarize(c: &Contract, steady: &[&Record], window_s: f64) -> Option<TaskSummary> {
    c.workload.task.as_ref()?;
    let mut by_task = by_task(steady);
    let slo_ms = c.slo.task_ms.map(|m| m.0);
    let mut out = TaskSummary {
        tasks: by_task.len() as u64,
        slo_ms,
        percentile: c.slo.percentile,
        ..TaskSummary::default()
    };
    let mut met = 0u64;
    let mut done: Vec<(f64, Vec<&Record>)> = Vec::new();
    let mut slips = Vec::new();
    let mut nodes: BTreeMap<(u32, String), Acc> = BTreeMap::new();
    let mut depths: BTreeMap<u32, Acc> = BTreeMap::new();
    let mut critical = Vec::new();
    for recs in by_task.values_mut() {
        let planned = planned_calls(recs);
        let sent = recs.iter().filter(|r| r.sent_us.is_some()).count() as u64;
        out.calls_planned += u64::from(planned);
        out.calls_sent += sent;
        let calls_met = add_calls(c, recs, (&mut nodes, &mut depths), &mut slips);
        if !completed(recs) {
            out.ended_early += 1;
            continue;
        }
        out.completed += 1;
        let Some(latency) = latency_ms(recs) else {
            continue;
        };
        met += u64::from(calls_met && slo_ms.is_none_or(|s| latency <= s));
        critical.push(critical_path(recs));
        done.push((latency, recs.clone()));
    }
    out.calls_not_sent = out.calls_planned.saturating_sub(out.calls_sent);
    if (c.slo.is_set() || slo_ms.is_some()) && out.tasks > 0 {
        out.attainment = Some(met as f64 / out.tasks as f64);
        out.goodput_tps = (window_s > 0.0).then(|| met as f64 / window_s);
    }
    let mut latencies: Vec<f64> = done.iter().map(|d| d.0).collect();
    latencies.sort_by(f64::total_cmp);
    if let Some(s) = slo_ms {
        // Every steady task is judged: one that did not complete is a miss, beyond any value
        // (f64::MAX, not infinity, so the interpolation between ranks stays a number).
        let mut judged = latencies.clone();
        judged.resize(out.tasks as usize, f64::MAX);
        let at = super::percentile_sorted(&judged, c.slo.percentile);
        out.slo_value_ms = at.filter(|&v| v < f64::MAX / 2.0);
        out.slo_met = at.map(|v| v <= s);
    }
    out.latency_ms = Dist::of(latencies);
    out.slip_ms = Dist::of(slips);
    out.critical = summarize_critical(&critical);
    if by_task
        .values()
        .flatten()
        .filter_map(|r| r.task.as_ref())
        .all(|t| t.graph == 0)
    {
        out.per_node = nodes
            .into_iter()
            .map(|((d, name), a)| a.stats(name, d))
            .collect();
    }
    out.per_depth = depths
        .into_iter()
        .map(|(d, a)| a.stats(format!("depth {d}"), d))
        .collect();
    done.sort_by(|a, b| a.0.total_cmp(&b.0));
    let at = |q: f64| {
        let k = ((q * done.len() as f64).ceil() as usize).clamp(1, done.len().max(1)) - 1;
        done.get(k).map(|(_, recs)| timeline(recs))
    };
    out.median_task = at(0.5);
    out.p99_task = at(0.99);
    Some(out)
}

/// The figures by node (its depth and name) and by depth.
type Tables<'a> = (
    &'a mut BTreeMap<(u32, String), Acc>,
    &'a mut BTreeMap<u32, Acc>,
);

/// Per node and per depth, the figures of one task's calls, and its later calls' slips;
/// whether every call succeeded within the request SLO.
fn add_calls(
    c: &Contract,
    recs: &[&Record],
    (nodes, depths): Tables,
    slips: &mut Vec<f64>,
) -> bool {
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    let mut calls_met = true;
    for r in recs.iter() {
        let Some(t) = &r.task else { continue };
        let m = r.is_ok().then(|| request_metrics(r, origin, source));
        calls_met &= m.as_ref().is_some_and(|m| record_meets_slo(c, r, m));
        if let (Some(i), Some(s)) = (r.intended_us, r.sent_us)
            && t.depth > 0
        {
            slips.push((s as f64 - i as f64) / 1000.0);
        }
        for acc in [
            nodes.entry((t.depth, t.node.clone())).or_default(),
            depths.entry(t.depth).or_default(),
        ] {
            acc.add(r, m.clone());
        }
    }
    calls_met
}

/// The steady records by task, each task's in graph order.
fn by_task<'a>(steady: &[&'a Record]) -> BTreeMap<u64, Vec<&'a Record>> {
    let mut out: BTreeMap<u64, Vec<&Record>> = BTreeMap::new();
    for r in steady {
        if let Some(t) = &r.task {
            out.entry(t.task).or_default().push(r);
        }
    }
    for recs in out.values_mut() {
        recs.sort_by_key(|r| r.task.as_ref().map_or(0, |t| t.position));
    }
    out
}

/// The model calls a task planned, as its records say.
fn planned_calls(recs: &[&Record]) -> u32 {
    recs.iter()
        .filter_map(|r| r.task.as_ref().map(|t| t.calls))
        .max()
        .unwrap_or(1)
}

/// Every planned call was sent and succeeded.
fn completed(recs: &[&Record]) -> bool {
    recs.len() as u64 == u64::from(planned_calls(recs)) && recs.iter().all(|r| r.is_ok())
}

/// The latencies of the completed steady tasks, ms (the page's chart of them).
pub fn latencies(steady: &[&Record]) -> Vec<f64> {
    by_task(steady)
        .values()
        .filter(|recs| completed(recs))
        .filter_map(|recs| latency_ms(recs))
        .collect()
}

/// The task's intended start (its arrival), µs.
fn start_us(recs: &[&Record]) -> Option<u64> {
    recs.iter()
        .filter_map(|r| r.task.as_ref())
        .map(|t| t.start_us)
        .min()
}

/// The task's intended start to its last answer, ms.
fn latency_ms(recs: &[&Record]) -> Option<f64> {
    let start = start_us(recs)?;
    let end = recs.iter().filter_map(|r| r.end_us).max()?;
    Some((end as f64 - start as f64) / 1000.0)
}

/// A node of a finished task, as the records tell it.
#[derive(Clone, Copy)]
enum Step<'a> {
    Call(&'a Record),
    Tool(&'a ToolSpan),
}

impl Step<'_> {
    /// When it began (a call: its intended send) and ended, µs.
    fn span(&self) -> (u64, u64) {
        match self {
            Step::Call(r) => (
                r.intended_us.or(r.sent_us).unwrap_or_default(),
                r.end_us.unwrap_or_default(),
            ),
            Step::Tool(t) => (t.start_us, t.end_us),
        }
    }

    fn after(&self) -> &[u32] {
        match self {
            Step::Call(r) => r.task.as_ref().map_or(&[], |t| &t.after),
            Step::Tool(t) => &t.after,
        }
    }
}

/// Every node of a task by position: its calls' records and the tool spans they carry.
fn steps<'a>(recs: &[&'a Record]) -> BTreeMap<u32, Step<'a>> {
    let mut out = BTreeMap::new();
    for r in recs {
        if let Some(t) = &r.task {
            out.insert(t.position, Step::Call(r));
            for s in &t.tools {
                out.entry(s.position).or_insert(Step::Tool(s));
            }
        }
    }
    out
}

/// A completed task's critical path, last node first: from the call that ended last, back
/// through the node each waited for that ended last. With the time in calls, tools and waits
/// along it (their sum is the task's latency).
struct Path {
    nodes: Vec<u32>,
    names: Vec<String>,
    model_us: u64,
    tool_us: u64,
    wait_us: u64,
}

fn critical_path(recs: &[&Record]) -> Path {
    let steps = steps(recs);
    let start = start_us(recs).unwrap_or_default();
    let mut path = Path {
        nodes: Vec::new(),
        names: Vec::new(),
        model_us: 0,
        tool_us: 0,
        wait_us: 0,
    };
    let mut at = steps
        .iter()
        .max_by_key(|(_, s)| s.span().1)
        .map(|(&k, _)| k);
    while let Some(k) = at {
        let Some(step) = steps.get(&k) else { break };
        let (begin, end) = step.span();
        match step {
            Step::Call(r) => {
                path.model_us += end.saturating_sub(begin);
                path.names
                    .push(r.task.as_ref().map_or(String::new(), |t| t.node.clone()));
            }
            Step::Tool(t) => {
                path.tool_us += end.saturating_sub(begin);
                path.names.push(t.node.clone());
            }
        }
        path.nodes.push(k);
        at = step
            .after()
            .iter()
            .filter_map(|a| Some((*a, steps.get(a)?.span().1)))
            .max_by_key(|&(_, end)| end)
            .map(|(a, _)| a);
        let before = at.and_then(|a| steps.get(&a)).map_or(start, |s| s.span().1);
        path.wait_us += begin.saturating_sub(before);
    }
    path.names.reverse();
    path.nodes.reverse();
    path
}

fn summarize_critical(paths: &[Path]) -> Option<Critical> {
    if paths.is_empty() {
        return None;
    }
    let n = paths.len() as f64;
    let mean = |f: &dyn Fn(&Path) -> u64| paths.iter().map(|p| f(p) as f64).sum::<f64>() / n / 1e3;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for p in paths {
        *counts.entry(p.names.join(" → ")).or_default() += 1;
    }
    let mut common: Vec<(String, u64)> = counts.into_iter().collect();
    common.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    common.truncate(3);
    Some(Critical {
        model_ms: mean(&|p| p.model_us),
        tool_ms: mean(&|p| p.tool_us),
        wait_ms: mean(&|p| p.wait_us),
        paths: common,
    })
}

/// A completed task's nodes as bars, ms from its intended start.
fn timeline(recs: &[&Record]) -> Timeline {
    let start = start_us(recs).unwrap_or_default();
    let ms = |t: u64| (t as f64 - start as f64) / 1000.0;
    let critical = critical_path(recs).nodes;
    let bars = steps(recs)
        .into_iter()
        .map(|(k, s)| {
            let (begin, end) = s.span();
            let (node, kind, sent, first) = match s {
                Step::Call(r) => (
                    r.task.as_ref().map_or(String::new(), |t| t.node.clone()),
                    "model",
                    r.sent_us.map(ms),
                    r.first_token_us.map(ms),
                ),
                Step::Tool(t) => (t.node.clone(), "tool", None, None),
            };
            Bar {
                node,
                kind: kind.to_owned(),
                start_ms: ms(begin),
                sent_ms: sent,
                first_token_ms: first,
                end_ms: ms(end),
                critical: critical.contains(&k),
            }
        })
        .collect();
    Timeline {
        task: recs
            .first()
            .and_then(|r| r.task.as_ref())
            .map_or(0, |t| t.task),
        latency_ms: latency_ms(recs).unwrap_or_default(),
        bars,
    }
}

#[derive(Default)]
struct Acc {
    sent: u64,
    ok: Vec<RequestMetrics>,
    input: Vec<f64>,
    cached: Vec<f64>,
    reusable: Vec<f64>,
}

impl Acc {
    fn add(&mut self, r: &Record, m: Option<RequestMetrics>) {
        self.sent += u64::from(r.sent_us.is_some());
        self.input.push(f64::from(
            r.usage_prompt_tokens.unwrap_or(r.input_tokens_planned),
        ));
        if let Some(k) = r.usage_cached_tokens {
            self.cached.push(f64::from(k));
        }
        self.reusable
            .push(f64::from(r.expected_cached_tokens.unwrap_or(0)));
        self.ok.extend(m);
    }

    fn stats(self, node: String, depth: u32) -> NodeStats {
        let of = |f: &dyn Fn(&RequestMetrics) -> Option<f64>| {
            Dist::of(self.ok.iter().filter_map(f).collect())
        };
        NodeStats {
            node,
            depth,
            sent: self.sent,
            ok: self.ok.len() as u64,
            ttft_ms: of(&|m| m.ttft_ms()),
            tpot_ms: of(&|m| m.tpot_ms()),
            e2e_ms: of(&|m| m.e2e_ms()),
            input_tokens: Dist::of(self.input),
            cached_tokens: Dist::of(self.cached),
            reusable_tokens: Dist::of(self.reusable),
        }
    }
}
