//! Agent tasks (`[workload.task]`): each open-loop arrival starts a task, a graph of model
//! calls and tool calls. A node waits for the nodes it is `after`; a model call may continue
//! one earlier call's conversation (`context`: its messages and the answer it received, so a
//! prefix cache can serve them) and splices the outputs of the nodes it `uses` (answers as
//! received, tool results) into its new message. A linear session is the one-chain case.
//!
//! The nodes are written in the contract (`[[workload.task.node]]`) or in a JSON Lines file
//! it names (`graph`, one node per line; a `task` field groups the lines into several recorded
//! tasks, replayed in turn). Here they are checked and resolved into [`Graph`]s; an error
//! names the node by its position, and the caller turns that into a file, line and field.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{LengthDist, MAX_TURNS};

/// `[workload.task]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// A JSON Lines file of nodes (beside the contract), one object per line, each with the
    /// fields of a `[[workload.task.node]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_sha256: Option<String>,
    /// The graph file's format: `graph` (the default: nodes, one per line), `mooncake`
    /// (multi-turn rows grouped by `session_id`) or `otel` (OTLP JSON traces of GenAI spans).
    #[serde(default, skip_serializing_if = "TaskFormat::is_graph")]
    pub format: TaskFormat,
    /// The nodes, written in the contract (instead of `graph`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node: Vec<NodeSpec>,
    /// The model's context, tokens: a model call whose prompt can grow past it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u32>,
    /// The server's prefix-cache block, tokens (default 16, vLLM's): the cached tokens it
    /// reports are held against each call's reusable history within one block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_tokens: Option<u32>,
}

impl Task {
    pub fn block_tokens(&self) -> u32 {
        self.block_tokens.unwrap_or(16).max(1)
    }
}

/// What a graph file holds (`[workload.task] format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskFormat {
    #[default]
    Graph,
    Mooncake,
    Otel,
}

impl TaskFormat {
    fn is_graph(&self) -> bool {
        *self == TaskFormat::Graph
    }
}

/// A count of tokens or milliseconds: a number, or a length distribution drawn per task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Amount {
    Fixed(u32),
    Dist(LengthDist),
}

/// Read by hand rather than by `#[serde(untagged)]`, whose only error is "data did not match
/// any variant of untagged enum Amount": a number that is not a whole one in range says so,
/// and a distribution's own error (an unknown `dist`, a missing `max`) comes through.
impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Amount;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a whole number from 0 to 4294967295, or a distribution ({ dist = \"uniform\", min = …, max = … })",
                )
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Amount, E> {
                u32::try_from(v).map(Amount::Fixed).map_err(|_| {
                    E::custom(format!(
                        "{v} is more than 4294967295, the largest amount a node may hold"
                    ))
                })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Amount, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!(
                        "{v} is negative: a count of tokens or milliseconds is 0 or more"
                    ))),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Amount, E> {
                match v {
                    v if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) => {
                        Ok(Amount::Fixed(v as u32))
                    }
                    v if v.is_nan() => Err(E::custom("NaN is not a count")),
                    v if v < 0.0 => Err(E::custom(format!(
                        "{v} is negative: a count of tokens or milliseconds is 0 or more"
                    ))),
                    v if v.is_finite() && v.fract() != 0.0 && v < f64::from(u32::MAX) => {
                        Err(E::custom(format!(
                            "{v} is not a whole number of tokens or milliseconds"
                        )))
                    }
                    v => Err(E::custom(format!(
                        "{v} is more than 4294967295, the largest amount a node may hold"
                    ))),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Amount, A::Error> {
                LengthDist::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(Amount::Dist)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Amount {
    pub fn dist(&self) -> LengthDist {
        match self {
            Amount::Fixed(value) => LengthDist::Fixed { value: *value },
            Amount::Dist(d) => d.clone(),
        }
    }
}

/// What a node is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A request to the target.
    #[default]
    Model,
    /// A tool the agent runs itself: it takes `latency_ms` and returns `result_tokens`.
    Tool,
}

impl NodeKind {
    pub fn is_model(&self) -> bool {
        *self == NodeKind::Model
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Model => "model",
            NodeKind::Tool => "tool",
        }
    }
}

/// One node as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// In a file of recorded tasks: the task this node belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "NodeKind::is_model")]
    pub kind: NodeKind,
    /// The nodes it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// A model call whose conversation (its messages and its answer) this call continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Nodes whose outputs open its new message, in order (default: `after` less `context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<Vec<String>>,
    /// A model call's own new tokens (default `workload.input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<Amount>,
    /// A model call's answer length (default `workload.output_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<Amount>,
    /// Milliseconds between the end of the last node it waits for and its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<Amount>,
    /// A tool's running time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<Amount>,
    /// A tool's result, tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_tokens: Option<Amount>,
    /// The model name a model call asks for instead of the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A resolved node: references are positions in its graph, which lists nodes in an order
/// where every node comes after the nodes it waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub after: Vec<u32>,
    pub context: Option<u32>,
    pub uses: Vec<u32>,
    /// Nodes on the longest chain of waits before it (a root: 0).
    pub depth: u32,
    /// A model call's new tokens and answer; a tool's result tokens and latency.
    pub input: LengthDist,
    pub output: LengthDist,
    pub think_ms: Option<LengthDist>,
    pub model: Option<String>,
    /// Where it was written: its position among the nodes as written.
    pub written: usize,
}

/// One task's graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// The recorded task's id (`task`), when the file groups nodes into tasks.
    pub id: Option<String>,
    pub nodes: Vec<Node>,
}

impl Graph {
    /// Its model calls.
    pub fn calls(&self) -> u32 {
        self.nodes.iter().filter(|n| n.kind.is_model()).count() as u32
    }
}

/// What is wrong with a node: its position as written, the field, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphError {
    pub node: usize,
    pub field: &'static str,
    pub message: String,
}

fn bad<T>(node: usize, field: &'static str, message: impl Into<String>) -> Result<T, GraphError> {
    Err(GraphError {
        node,
        field,
        message: message.into(),
    })
}

/// The defaults a node's lengths fall back to, and the limit its prompts must stay within.
pub struct Defaults<'a> {
    pub input: &'a LengthDist,
    pub output: &'a LengthDist,
    pub context_tokens: Option<u32>,
}

/// Resolves nodes as written into one graph per task (in the order the tasks first appear).
pub fn resolve(specs: &[NodeSpec], d: &Defaults) -> Result<Vec<Graph>, GraphError> {
    if specs.is_empty() {
        return bad(0, "node", "a task needs at least one node");
    }
    let grouped = specs[0].task.is_some();
    let mut tasks: Vec<(Option<String>, Vec<usize>)> = Vec::new();
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    for (k, s) in specs.iter().enumerate() {
        match (&s.task, grouped) {
            (Some(t), true) => {
                let slot = *at.entry(t.as_str()).or_insert_with(|| {
                    tasks.push((Some(t.clone()), Vec::new()));
                    tasks.len() - 1
                });
                tasks[slot].1.push(k);
            }
            (None, false) => {
                if tasks.is_empty() {
                    tasks.push((None, Vec::new()));
                }
                tasks[0].1.push(k);
            }
            (_, true) => return bad(k, "task", "the first node names its task: every node must"),
            (Some(_), false) => {
                return bad(
                    k,
                    "task",
                    "the first node names no task: either every node names its task or none does",
                );
            }
        }
    }
    tasks
        .into_iter()
        .map(|(id, members)| {
            let own: Vec<&NodeSpec> = members.iter().map(|&k| &specs[k]).collect();
            let nodes = one_graph(&own, &members, d)?;
            Ok(Graph { id, nodes })
        })
        .collect()
}

/// One task's nodes (`written`: each one's position among all nodes as written).
fn one_graph(
    specs: &[&NodeSpec],
    written: &[usize],
    d: &Defaults,
) -> Result<Vec<Node>, GraphError> {
    if specs.len() > MAX_TURNS as usize {
        return bad(
            written[MAX_TURNS as usize],
            "name",
            format!("a task has at most {MAX_TURNS} nodes"),
        );
    }
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (k, s) in specs.iter().enumerate() {
        if s.name.trim().is_empty() {
            return bad(written[k], "name", "a node needs a name");
        }
        if index.insert(s.name.as_str(), k).is_some() {
            return bad(
                written[k],
                "name",
                format!("`{}` names two nodes of one task", s.name),
            );
        }
    }
    let find = |k: usize, field: &'static str, name: &str| -> Result<usize, GraphError> {
        match index.get(name) {
            Some(&j) if j == k => bad(written[k], field, format!("`{name}` is the node itself")),
            Some(&j) => Ok(j),
            None => bad(
                written[k],
                field,
                format!("`{name}` is not a node of this task"),
            ),
        }
    };
    let mut after = Vec::with_capacity(specs.len());
    for (k, s) in specs.iter().enumerate() {
        let a: Vec<usize> = s
            .after
            .iter()
            .map(|n| find(k, "after", n))
            .collect::<Result<_, _>>()?;
        after.push(a);
    }
    let order = topological(&after).map_err(|k| GraphError {
        node: written[k],
        field: "after",
        message: format!(
            "`{}` waits, through its `after`, for itself: a task's nodes cannot form a cycle",
            specs[k].name
        ),
    })?;
    let mut position = vec![0u32; specs.len()];
    for (p, &k) in order.iter().enumerate() {
        position[k] = p as u32;
    }
    let ancestors = ancestors(&after, &order);
    let mut nodes: Vec<Node> = Vec::with_capacity(specs.len());
    for &k in &order {
        nodes.push(node(
            specs,
            k,
            written[k],
            (&after, &ancestors, &position),
            &find,
            d,
        )?);
    }
    set_depths(&mut nodes);
    every_tool_used(&nodes)?;
    if !nodes.iter().any(|n| n.kind.is_model()) {
        return bad(written[0], "kind", "a task needs at least one model call");
    }
    if let Some(limit) = d.context_tokens {
        within_context(&nodes, limit)?;
    }
    Ok(nodes)
}

/// Each node's depth, the longest chain of waits before it. In wait order every node's waits
/// come first: one pass, where a recursion per node would revisit shared ancestors
/// exponentially often.
fn set_depths(nodes: &mut [Node]) {
    for k in 0..nodes.len() {
        let depth = nodes[k]
            .after
            .iter()
            .map(|&a| nodes[a as usize].depth + 1)
            .max();
        nodes[k].depth = depth.unwrap_or(0);
    }
}

/// Every tool's result goes to a model call (else the tool is time no answer waits for).
fn every_tool_used(nodes: &[Node]) -> Result<(), GraphError> {
    for (k, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Tool
            && !nodes
                .iter()
                .any(|m| m.kind.is_model() && m.uses.contains(&(k as u32)))
        {
            return bad(
                n.written,
                "name",
                format!(
                    "no model call uses the result of tool `{}` (name it in a later call's `uses` or `after`)",
                    n.name
                ),
            );
        }
    }
    Ok(())
}

type Links<'a> = (&'a [Vec<usize>], &'a [Vec<bool>], &'a [u32]);

/// Node `k` resolved: its references as positions, its lengths with their defaults.
fn node(
    specs: &[&NodeSpec],
    k: usize,
    written: usize,
    (after, ancestors, position): Links,
    find: &dyn Fn(usize, &'static str, &str) -> Result<usize, GraphError>,
    d: &Defaults,
) -> Result<Node, GraphError> {
    let s = specs[k];
    let (context, uses) = references(specs, k, written, (after, ancestors), find)?;
    let (input, output, think_ms) = lengths(s, written, d)?;
    // Set once every node before it is resolved (`one_graph`).
    let depth = 0;
    let pos = |v: &[usize]| -> Vec<u32> { v.iter().map(|&j| position[j]).collect() };
    Ok(Node {
        name: s.name.clone(),
        kind: s.kind,
        after: pos(&after[k]),
        context: context.map(|j| position[j]),
        uses: pos(&uses),
        depth,
        input,
        output,
        think_ms,
        model: s.model.clone(),
        written,
    })
}

/// Node `k`'s `context` and `uses` as node indices: each a node it waits for (the context a
/// model call); `uses` defaults to what it waits for, less its context.
fn references(
    specs: &[&NodeSpec],
    k: usize,
    written: usize,
    (after, ancestors): (&[Vec<usize>], &[Vec<bool>]),
    find: &dyn Fn(usize, &'static str, &str) -> Result<usize, GraphError>,
) -> Result<(Option<usize>, Vec<usize>), GraphError> {
    let s = specs[k];
    let context = match &s.context {
        None => None,
        Some(name) => {
            let j = find(k, "context", name)?;
            if !specs[j].kind.is_model() {
                return bad(
                    written,
                    "context",
                    format!("`{name}` is a tool: a context is a model call's conversation"),
                );
            }
            if !ancestors[k][j] {
                return bad(
                    written,
                    "context",
                    format!("`{name}` is not among the nodes `{}` waits for", s.name),
                );
            }
            Some(j)
        }
    };
    let uses: Vec<usize> = match &s.uses {
        Some(names) => names
            .iter()
            .map(|n| {
                let j = find(k, "uses", n)?;
                if ancestors[k][j] {
                    Ok(j)
                } else {
                    bad(
                        written,
                        "uses",
                        format!("`{n}` is not among the nodes `{}` waits for", s.name),
                    )
                }
            })
            .collect::<Result<_, _>>()?,
        None => after[k]
            .iter()
            .copied()
            .filter(|&j| Some(j) != context)
            .collect(),
    };
    Ok((context, uses))
}

/// A node's lengths, defaults filled in: a model call's new tokens and answer, a tool's result
/// tokens and latency; its think time. A field of the other kind is refused.
fn lengths(
    s: &NodeSpec,
    written: usize,
    d: &Defaults,
) -> Result<(LengthDist, LengthDist, Option<LengthDist>), GraphError> {
    let model = s.kind.is_model();
    let misplaced: &[(&'static str, bool)] = if model {
        &[
            ("latency_ms", s.latency_ms.is_some()),
            ("result_tokens", s.result_tokens.is_some()),
        ]
    } else {
        &[
            ("input_tokens", s.input_tokens.is_some()),
            ("output_tokens", s.output_tokens.is_some()),
            ("context", s.context.is_some()),
            ("model", s.model.is_some()),
        ]
    };
    if let Some((field, _)) = misplaced.iter().find(|(_, set)| *set) {
        return bad(
            written,
            field,
            format!(
                "applies to {} only; `{}` is a {}",
                if model { "tools" } else { "model calls" },
                s.name,
                s.kind.as_str()
            ),
        );
    }
    let amount = |field: &'static str, a: &Option<Amount>, default: Option<&LengthDist>| match a
        .as_ref()
        .map(Amount::dist)
        .or_else(|| default.cloned())
    {
        Some(dist) => check(written, field, dist),
        None => bad(written, field, format!("a {} needs it", s.kind.as_str())),
    };
    let (input, output) = if model {
        (
            amount("input_tokens", &s.input_tokens, Some(d.input))?,
            amount("output_tokens", &s.output_tokens, Some(d.output))?,
        )
    } else {
        (
            amount("result_tokens", &s.result_tokens, None)?,
            amount("latency_ms", &s.latency_ms, None)?,
        )
    };
    let think_ms = match &s.think_ms {
        Some(a) => Some(check(written, "think_ms", a.dist())?),
        None => None,
    };
    // Waits are bounded as a session's think time is: a run that waits out a day never ends.
    let waits = [
        ("think_ms", think_ms.as_ref()),
        ("latency_ms", (!model).then_some(&output)),
    ];
    for (field, d) in waits {
        if let Some(d) = d
            && most(d) > MAX_WAIT_MS
        {
            return bad(
                written,
                field,
                format!(
                    "allows {} ms; at most {MAX_WAIT_MS} ms (an hour): a run that waits longer may never end",
                    most(d)
                ),
            );
        }
    }
    Ok((input, output, think_ms))
}

/// The longest a node may wait, ms: a tool's latency or a think time (as
/// `workload.sessions.think_ms`).
pub const MAX_WAIT_MS: u32 = 3_600_000;

/// A length a node may draw: a whole-number distribution whose largest value is known (a
/// node's prompt must be bounded to be checked against the context).
fn check(node: usize, field: &'static str, d: LengthDist) -> Result<LengthDist, GraphError> {
    let ok = match &d {
        LengthDist::Fixed { .. } => true,
        LengthDist::Uniform { min, max }
        | LengthDist::Normal { min, max, .. }
        | LengthDist::Lognormal { min, max, .. } => min <= max,
        _ => false,
    };
    if ok {
        Ok(d)
    } else {
        bad(
            node,
            field,
            "must be a number, or a fixed, uniform, normal or lognormal distribution with min <= max",
        )
    }
}

/// The largest value a checked distribution can draw.
pub fn most(d: &LengthDist) -> u32 {
    match d {
        LengthDist::Fixed { value } => *value,
        LengthDist::Uniform { max, .. }
        | LengthDist::Normal { max, .. }
        | LengthDist::Lognormal { max, .. } => *max,
        _ => u32::MAX,
    }
}

/// An order in which every node comes after the nodes it waits for (Kahn's algorithm, the
/// written order among the ready ones); on a cycle, a node on it.
fn topological(after: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    let n = after.len();
    let mut waiting: Vec<usize> = after.iter().map(Vec::len).collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let Some(k) = (0..n).find(|&k| !done[k] && waiting[k] == 0) else {
            // Every node left waits: follow waits from one of them until a node repeats.
            let mut seen = vec![false; n];
            let mut k = (0..n).find(|&k| !done[k]).unwrap_or(0);
            while !seen[k] {
                seen[k] = true;
                k = after[k].iter().copied().find(|&j| !done[j]).unwrap_or(k);
            }
            return Err(k);
        };
        done[k] = true;
        order.push(k);
        for (j, a) in after.iter().enumerate() {
            waiting[j] -= a.iter().filter(|&&x| x == k).count();
        }
    }
    Ok(order)
}

/// `ancestors[k][j]`: node `k` waits for node `j`, directly or not.
fn ancestors(after: &[Vec<usize>], order: &[usize]) -> Vec<Vec<bool>> {
    let n = after.len();
    let mut out = vec![vec![false; n]; n];
    for &k in order {
        for &j in &after[k] {
            out[k][j] = true;
            let before = out[j].clone();
            for (i, b) in before.into_iter().enumerate() {
                out[k][i] |= b;
            }
        }
    }
    out
}

/// Each model call's longest prompt: its context's longest prompt and answer, the outputs it
/// uses, and its own tokens, in the workload's tokens.
fn within_context(nodes: &[Node], limit: u32) -> Result<(), GraphError> {
    let mut longest = vec![0u64; nodes.len()];
    for (k, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Tool {
            continue;
        }
        let history = n.context.map_or(0, |c| {
            longest[c as usize] + u64::from(most(&nodes[c as usize].output))
        });
        let used: u64 = n
            .uses
            .iter()
            .map(|&u| {
                let u = &nodes[u as usize];
                u64::from(match u.kind {
                    NodeKind::Model => most(&u.output),
                    NodeKind::Tool => most(&u.input),
                })
            })
            .sum();
        longest[k] = history + used + u64::from(most(&n.input));
        if longest[k] + u64::from(most(&n.output)) > u64::from(limit) {
            return bad(
                n.written,
                "input_tokens",
                format!(
                    "`{}`'s prompt can reach {} tokens ({history} of history, {used} of outputs it uses, {} of its own) and its answer {}: more than context_tokens = {limit}",
                    n.name,
                    longest[k],
                    most(&n.input),
                    most(&n.output)
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(line: &str) -> NodeSpec {
        serde_json::from_str(line).unwrap()
    }

    fn graphs(lines: &[&str], context: Option<u32>) -> Result<Vec<Graph>, GraphError> {
        let specs: Vec<NodeSpec> = lines.iter().map(|l| spec(l)).collect();
        let d = LengthDist::Fixed { value: 10 };
        resolve(
            &specs,
            &Defaults {
                input: &d,
                output: &d,
                context_tokens: context,
            },
        )
    }

    const AGENT: &[&str] = &[
        r#"{"name": "final", "after": ["join"], "context": "join"}"#,
        r#"{"name": "plan", "input_tokens": 100, "output_tokens": 40}"#,
        r#"{"name": "search", "kind": "tool", "after": ["plan"], "latency_ms": 50, "result_tokens": 30}"#,
        r#"{"name": "read", "after": ["search"], "context": "plan"}"#,
        r#"{"name": "join", "after": ["read", "plan"], "context": "plan"}"#,
    ];

    #[test]
    fn nodes_are_ordered_by_their_waits_with_depths_and_defaults() {
        let g = graphs(AGENT, None).unwrap();
        assert_eq!(g.len(), 1);
        let names: Vec<&str> = g[0].nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["plan", "search", "read", "join", "final"]);
        let depths: Vec<u32> = g[0].nodes.iter().map(|n| n.depth).collect();
        assert_eq!(depths, [0, 1, 2, 3, 4]);
        let read = &g[0].nodes[2];
        assert_eq!((read.context, read.uses.clone()), (Some(0), vec![1]));
        // `join` waits for `plan` as its context: it uses only `read`.
        assert_eq!(g[0].nodes[3].uses, vec![2]);
        assert_eq!(g[0].nodes[4].written, 0);
        assert_eq!(g[0].calls(), 4);
    }

    #[test]
    fn bad_graphs_name_the_node_and_field() {
        let cycle = graphs(
            &[
                r#"{"name": "a", "after": ["b"]}"#,
                r#"{"name": "b", "after": ["a"]}"#,
            ],
            None,
        )
        .unwrap_err();
        assert_eq!(cycle.field, "after");
        assert!(cycle.message.contains("cycle"), "{cycle:?}");
        let unknown = graphs(&[r#"{"name": "a", "after": ["nope"]}"#], None).unwrap_err();
        assert_eq!((unknown.node, unknown.field), (0, "after"));
        assert!(unknown.message.contains("`nope` is not a node"));
        let unused = graphs(
            &[
                r#"{"name": "a"}"#,
                r#"{"name": "t", "kind": "tool", "after": ["a"], "latency_ms": 5, "result_tokens": 3}"#,
            ],
            None,
        )
        .unwrap_err();
        assert_eq!((unused.node, unused.field), (1, "name"));
        let misplaced = graphs(
            &[r#"{"name": "t", "kind": "tool", "latency_ms": 5, "result_tokens": 3, "output_tokens": 4}"#],
            None,
        )
        .unwrap_err();
        assert_eq!(misplaced.field, "output_tokens");
        let not_before = graphs(
            &[r#"{"name": "a"}"#, r#"{"name": "b", "context": "a"}"#],
            None,
        )
        .unwrap_err();
        assert_eq!((not_before.node, not_before.field), (1, "context"));
        // `read`: 140 of history, 30 of the tool's result, 10 of its own, and a 10-token answer.
        let long = graphs(AGENT, Some(185)).unwrap_err();
        assert_eq!((long.node, long.field), (3, "input_tokens"));
        assert!(long.message.contains("context_tokens = 185"), "{long:?}");
        assert!(graphs(AGENT, Some(190)).is_ok());
        let mixed =
            graphs(&[r#"{"task": "x", "name": "a"}"#, r#"{"name": "b"}"#], None).unwrap_err();
        assert_eq!((mixed.node, mixed.field), (1, "task"));
    }

    #[test]
    fn a_file_of_recorded_tasks_is_one_graph_per_task() {
        let g = graphs(
            &[
                r#"{"task": "t1", "name": "a", "input_tokens": 5}"#,
                r#"{"task": "t2", "name": "a"}"#,
                r#"{"task": "t1", "name": "b", "after": ["a"], "context": "a"}"#,
            ],
            None,
        )
        .unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].id.as_deref(), Some("t1"));
        assert_eq!(g[0].nodes.len(), 2);
        assert_eq!(g[1].nodes[0].written, 1);
    }
}
