//! An agent task's calls (`[workload.task]`): one open-loop arrival, its graph run by one
//! async task. A node starts once every node it waits for has finished: at the latest of
//! their ends plus its think time, its *intended* time, from which a model call's latency
//! counts (its slip is its dispatch lag, bounded like the schedule's). A model call's prompt is
//! composed when it starts, from the answers actually received: the conversation it continues
//! (`context`: those messages and that answer), then a new user message of its own tokens
//! followed by the outputs it uses. A tool is not a request: the task waits its drawn latency
//! and its result (drawn tokens) goes to the calls that use it; its span rides on their records.
//!
//! A call that fails ends every node that waits for it, directly or not (they are never sent,
//! and the records' planned call count says so); nodes that do not wait for it still run.

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::{Driver, user};
use crate::api::Message;
use crate::contract::task::{Graph, NodeKind};
use crate::plan::{Phase, PlannedRequest, TaskPlan};
use crate::record::{Record, TaskStep, ToolSpan};

/// What a finished node leaves for the nodes after it.
#[derive(Clone)]
enum Done {
    /// A model call: the conversation it sent, the answer received, and their tokens.
    Call {
        messages: Vec<Message>,
        answer: String,
        prompt_tokens: u32,
        answer_tokens: u32,
    },
    /// A tool: its result and its span.
    Tool {
        text: String,
        tokens: u32,
        span: ToolSpan,
    },
    /// Failed, or never run: nothing after it runs.
    Failed,
}

/// A node that finished: its position, what it left, and when it ended (µs).
type Finished = (usize, Done, u64);

/// What a task run shares with its nodes.
pub(super) struct TaskRun<'a> {
    pub i: u64,
    pub shape: TaskPlan,
    /// The phase its arrival was labelled with, which every call of it carries.
    pub phase: Phase,
    /// Its arrival's intended time, µs on the run's clock.
    pub origin: u64,
    pub tx: &'a UnboundedSender<Record>,
    pub cancel: &'a CancellationToken,
    pub drain_over: &'a CancellationToken,
    pub in_flight: &'a AtomicU32,
}

impl Driver {
    /// Runs task `run.i`'s graph to its end (or until the run stops sending). `first` is the
    /// arrival's record (its intended time) and, when the graph's first node is a model call,
    /// its request as built ahead.
    pub(super) async fn task(&self, run: TaskRun<'_>, first: (PlannedRequest, Record, Bytes)) {
        let graph = &self.plan.graphs()[run.shape.graph];
        let n = graph.nodes.len();
        let (planned, template, body) = first;
        let phase = run.phase;
        let origin = run.origin;
        let mut first = (graph.nodes[0].kind == NodeKind::Model && run.shape.think_ms[0] == 0)
            .then_some((planned, template, body));
        let mut done: Vec<Option<(Done, u64)>> = vec![None; n];
        let mut started = vec![false; n];
        let mut running = FuturesUnordered::new();
        loop {
            // A drain task starts nothing once the last steady request has ended.
            let stop = run.cancel.is_cancelled()
                || (phase == Phase::Drain && run.drain_over.is_cancelled());
            for k in 0..n {
                if started[k] || stop {
                    continue;
                }
                let node = &graph.nodes[k];
                let Some(ends) = node
                    .after
                    .iter()
                    .map(|&a| done[a as usize].as_ref().map(|d| (&d.0, d.1)))
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                started[k] = true;
                if ends.iter().any(|(d, _)| matches!(d, Done::Failed)) {
                    done[k] = Some((Done::Failed, 0));
                    continue;
                }
                let ready = ends.iter().map(|e| e.1).max().unwrap_or(origin);
                let at = ready + u64::from(run.shape.think_ms[k]) * 1000;
                running.push(match node.kind {
                    NodeKind::Tool => {
                        futures_util::future::Either::Left(self.tool(&run, graph, k, at))
                    }
                    NodeKind::Model => {
                        let built = first.take().filter(|_| k == 0);
                        futures_util::future::Either::Right(self.call(
                            (&run, graph, &done),
                            k,
                            at,
                            built,
                        ))
                    }
                });
            }
            match running.next().await {
                Some((k, d, end)) => {
                    let failed = matches!(d, Done::Failed);
                    done[k] = Some((d, end));
                    if failed && run.cancel.is_cancelled() {
                        return;
                    }
                }
                None => return,
            }
        }
    }

    /// Tool `k`: from its intended time, its drawn latency; its result and its span.
    fn tool<'a>(
        &'a self,
        run: &TaskRun<'a>,
        graph: &Graph,
        k: usize,
        at: u64,
    ) -> impl std::future::Future<Output = Finished> + use<'a> {
        let node = &graph.nodes[k];
        let (text, tokens) = self
            .plan
            .tool_result(run.i, k as u32, run.shape.result_tokens[k]);
        let span = |start_us, end_us| ToolSpan {
            node: node.name.clone(),
            position: k as u32,
            after: node.after.clone(),
            start_us,
            end_us,
        };
        let (latency, cancel) = (u64::from(run.shape.tool_ms[k]) * 1000, run.cancel);
        let mut span = span(at, at);
        async move {
            if !self.wake_at(at, cancel, None).await {
                return (k, Done::Failed, 0);
            }
            span.start_us = self.client.now_us();
            if !self.wake_at(span.start_us + latency, cancel, None).await {
                return (k, Done::Failed, 0);
            }
            span.end_us = self.client.now_us();
            let end = span.end_us;
            (k, Done::Tool { text, tokens, span }, end)
        }
    }

    /// Model call `k`: its conversation composed from what the nodes before it left, sent at
    /// its intended time; its record goes to the collector.
    fn call<'a>(
        &'a self,
        (run, graph, done): (&TaskRun<'a>, &Graph, &[Option<(Done, u64)>]),
        k: usize,
        at: u64,
        built: Option<(PlannedRequest, Record, Bytes)>,
    ) -> impl std::future::Future<Output = Finished> + use<'a> {
        let node = &graph.nodes[k];
        let planned = match &built {
            Some((p, _, _)) => p.clone(),
            None => self.plan.node(run.i, k as u32),
        };
        let (messages, history, prompt_tokens) = compose(graph, k, done, &planned);
        let mut tools = Vec::new();
        tool_spans(graph, k, done, &mut tools);
        let step = TaskStep {
            task: run.i,
            graph: run.shape.graph,
            node: node.name.clone(),
            position: k as u32,
            depth: node.depth,
            calls: graph.calls(),
            start_us: run.origin,
            after: node.after.clone(),
            tools,
        };
        let phase = run.phase;
        let body = match (&built, node.uses.is_empty() && node.context.is_none()) {
            (Some((_, _, b)), true) => b.clone(),
            _ => self.body(&planned, Some(&messages), &[]),
        };
        let (tx, cancel, in_flight) = (run.tx, run.cancel, run.in_flight);
        let context = node.context.is_some();
        async move {
            let mut rec = match built {
                Some((_, rec, _)) => rec,
                None => {
                    if !self.wake_at(at, cancel, None).await {
                        return (k, Done::Failed, 0);
                    }
                    let mut rec = self.record(&planned, phase);
                    rec.intended_us = Some(at);
                    rec.dispatched_us = Some(self.client.now_us());
                    rec
                }
            };
            rec.input_tokens_planned = prompt_tokens;
            rec.expected_cached_tokens = context.then_some(history);
            rec.task = Some(Box::new(step));
            in_flight.fetch_add(1, Ordering::AcqRel);
            self.client.execute(body, &mut rec, cancel).await;
            in_flight.fetch_sub(1, Ordering::AcqRel);
            let answer = rec.answer.take();
            let ok = rec.is_ok();
            let answer_tokens = rec
                .usage_completion_tokens
                .unwrap_or(rec.client_output_tokens);
            let end = rec.end_us.unwrap_or_default();
            let _ = tx.send(rec);
            let d = if ok {
                Done::Call {
                    messages,
                    answer: answer.unwrap_or_default(),
                    prompt_tokens,
                    answer_tokens,
                }
            } else {
                Done::Failed
            };
            (k, d, end)
        }
    }
}

/// Call `k`'s conversation, from what the nodes before it left: the conversation it continues
/// and that answer, then a new user message of its own tokens and the outputs it uses. With
/// the tokens of its history (what a prefix cache can serve) and of the whole prompt.
fn compose(
    graph: &Graph,
    k: usize,
    done: &[Option<(Done, u64)>],
    planned: &PlannedRequest,
) -> (Vec<Message>, u32, u32) {
    let node = &graph.nodes[k];
    let output = |j: u32| done[j as usize].as_ref().map(|d| &d.0);
    let (mut messages, history) = match node.context.and_then(output) {
        Some(Done::Call {
            messages,
            answer,
            prompt_tokens,
            answer_tokens,
        }) => {
            let mut m = messages.clone();
            m.push(Message::new("assistant", answer.clone()));
            (m, prompt_tokens + answer_tokens)
        }
        _ => (Vec::new(), 0),
    };
    let mut text = planned.prompt.clone();
    let mut used = 0;
    for &u in &node.uses {
        match output(u) {
            Some(Done::Call {
                answer,
                answer_tokens,
                ..
            }) => {
                text.push_str("\n\n");
                text.push_str(answer);
                used += answer_tokens;
            }
            Some(Done::Tool {
                text: t, tokens, ..
            }) => {
                text.push_str("\n\n");
                text.push_str(t);
                used += tokens;
            }
            _ => {}
        }
    }
    messages.push(user(&text));
    let prompt_tokens = history + used + planned.input_tokens;
    (messages, history, prompt_tokens)
}

/// The spans of the tools node `k` waits for, directly or through other tools.
fn tool_spans(graph: &Graph, k: usize, done: &[Option<(Done, u64)>], out: &mut Vec<ToolSpan>) {
    for &a in &graph.nodes[k].after {
        if let Some((Done::Tool { span, .. }, _)) = &done[a as usize]
            && !out.iter().any(|s| s.position == a)
        {
            out.push(span.clone());
            tool_spans(graph, a as usize, done, out);
        }
    }
}
