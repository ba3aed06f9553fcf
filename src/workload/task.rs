//! An agent task's graph file (`[workload.task] graph`), in one of three formats, each turned
//! into nodes and checked alike (`contract::task::resolve`); every error names the file, the
//! line and the field.
//!
//! - `graph`: JSON Lines, one node per line, each object with the fields of a
//!   `[[workload.task.node]]` (blank lines and lines starting with `#` are skipped).
//! - `mooncake`: multi-turn Mooncake-style rows (`session_id`, `input_length`,
//!   `output_length`, optional `delay` ms before the turn): each session a chain of calls,
//!   each continuing the one before; a turn's own tokens are its `input_length` less the
//!   conversation before it.
//! - `otel`: OpenTelemetry traces as OTLP JSON (a file exporter's lines, or one document) with
//!   GenAI spans: each trace a task; `chat`, `text_completion` and `generate_content`
//!   operations are model calls (their `gen_ai.usage.*` tokens), `execute_tool` spans tools
//!   (their duration, and `gen_ai.tool.call.result`'s words or 32 tokens). A node waits for the
//!   nodes that ended before it started with none between; a call continues the latest call
//!   before it under the same agent (`invoke_agent` span), as an agent's history grows.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::contract::task::{
    Amount, Defaults, Graph, GraphError, NodeKind, NodeSpec, TaskFormat, resolve,
};

/// The graphs of a file's text (`path` names it in errors).
pub fn parse(
    path: &Path,
    text: &str,
    format: TaskFormat,
    d: &Defaults,
) -> Result<Vec<Graph>, String> {
    let name = path.display().to_string();
    let (specs, lines) = match format {
        TaskFormat::Graph => graph_lines(&name, text)?,
        TaskFormat::Mooncake => mooncake(&name, text)?,
        TaskFormat::Otel => otel(&name, text)?,
    };
    if specs.is_empty() {
        return Err(format!("{name}: the file holds no nodes"));
    }
    resolve(&specs, d).map_err(|e| located(&name, &lines, &e))
}

/// A file's non-blank, non-comment lines with their numbers.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(k, l)| (k + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

fn graph_lines(name: &str, text: &str) -> Result<(Vec<NodeSpec>, Vec<usize>), String> {
    let mut specs = Vec::new();
    let mut at = Vec::new();
    for (line, t) in lines(text) {
        // serde names the field it could not read in its message.
        let spec: NodeSpec = serde_json::from_str(t).map_err(|e| format!("{name}:{line}: {e}"))?;
        specs.push(spec);
        at.push(line);
    }
    Ok((specs, at))
}

/// A bare node: a name and nothing else set.
fn node(task: String, name: String, kind: NodeKind) -> NodeSpec {
    NodeSpec {
        task: Some(task),
        name,
        kind,
        after: Vec::new(),
        context: None,
        uses: None,
        input_tokens: None,
        output_tokens: None,
        think_ms: None,
        latency_ms: None,
        result_tokens: None,
        model: None,
    }
}

fn mooncake(name: &str, text: &str) -> Result<(Vec<NodeSpec>, Vec<usize>), String> {
    let mut specs: Vec<NodeSpec> = Vec::new();
    let mut at = Vec::new();
    // Per session: its turns so far, and the last turn's node and prompt + answer tokens.
    let mut last: BTreeMap<String, (u32, String, u64)> = BTreeMap::new();
    for (line, t) in lines(text) {
        let v: Value = serde_json::from_str(t).map_err(|e| format!("{name}:{line}: {e}"))?;
        let field = |key: &str| -> Result<u32, String> {
            v.get(key)
                .and_then(Value::as_u64)
                .filter(|&n| n >= 1 && n <= u64::from(u32::MAX))
                .map(|n| n as u32)
                .ok_or_else(|| format!("{name}:{line}: `{key}`: needs a whole number >= 1"))
        };
        let session = match v.get("session_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(format!(
                    "{name}:{line}: `session_id`: needs one (the rows of one conversation share it)"
                ));
            }
        };
        let (input, output) = (field("input_length")?, field("output_length")?);
        let delay =
            match v.get("delay") {
                None | Some(Value::Null) => None,
                Some(_) => Some(v["delay"].as_u64().ok_or_else(|| {
                    format!("{name}:{line}: `delay`: needs whole milliseconds >= 0")
                })? as u32),
            };
        let prev = last.get(&session).cloned();
        let turn = prev.as_ref().map_or(1, |p| p.0 + 1);
        let mut n = node(session.clone(), format!("turn_{turn}"), NodeKind::Model);
        let history = prev.as_ref().map_or(0, |p| p.2);
        // The row's prompt is the whole conversation: its own tokens are what is new.
        let own = (u64::from(input).saturating_sub(history)).max(1) as u32;
        n.input_tokens = Some(Amount::Fixed(own));
        n.output_tokens = Some(Amount::Fixed(output));
        n.think_ms = delay.map(Amount::Fixed);
        if let Some((_, before, _)) = &prev {
            n.after = vec![before.clone()];
            n.context = Some(before.clone());
        }
        last.insert(
            session,
            (turn, n.name.clone(), u64::from(input) + u64::from(output)),
        );
        specs.push(n);
        at.push(line);
    }
    Ok((specs, at))
}

/// One GenAI span of an OTLP JSON export, as far as a task needs it.
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    start_ns: u64,
    end_ns: u64,
    attrs: BTreeMap<String, Value>,
    /// Where it was read: the file's line (a file exporter writes one export a line).
    line: usize,
}

impl Span {
    fn op(&self) -> &str {
        self.attrs
            .get("gen_ai.operation.name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    fn kind(&self) -> Option<NodeKind> {
        match self.op() {
            "chat" | "text_completion" | "generate_content" => Some(NodeKind::Model),
            "execute_tool" => Some(NodeKind::Tool),
            _ => None,
        }
    }

    /// The tool's name, or the operation.
    fn label(&self) -> &str {
        self.attrs
            .get("gen_ai.tool.name")
            .and_then(Value::as_str)
            .unwrap_or(self.op())
    }

    /// A tool's result: `gen_ai.tool.call.result`'s words when recorded, else 32 tokens.
    fn result_tokens(&self) -> u32 {
        self.attrs
            .get("gen_ai.tool.call.result")
            .and_then(Value::as_str)
            .map_or(32, |r| r.split_whitespace().count().max(1) as u32)
    }

    fn tokens(&self, name: &str, key: &str) -> Result<u32, String> {
        self.attrs
            .get(key)
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
            .map(|n| n.clamp(1, u64::from(u32::MAX)) as u32)
            .ok_or_else(|| {
                format!(
                    "{name}:{}: span {} ({}): `{key}`: a model call's span needs its token count",
                    self.line, self.id, self.name
                )
            })
    }
}

/// OTLP JSON's values: an attribute's `{"stringValue": …}` (or int, double, bool) as JSON;
/// a time in nanoseconds as a string or a number.
fn otlp_value(v: &Value) -> Value {
    for k in ["stringValue", "boolValue", "doubleValue"] {
        if let Some(x) = v.get(k) {
            return x.clone();
        }
    }
    match v.get("intValue") {
        Some(Value::String(s)) => s.parse::<u64>().map_or(Value::Null, Value::from),
        Some(x) => x.clone(),
        None => Value::Null,
    }
}

fn nanos(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Every span of every export in the text (one document, or one per line).
fn spans(name: &str, text: &str) -> Result<Vec<Span>, String> {
    let docs: Vec<(usize, Value)> = match serde_json::from_str::<Value>(text) {
        Ok(v) => vec![(1, v)],
        Err(_) => lines(text)
            .map(|(line, t)| {
                serde_json::from_str(t)
                    .map(|v| (line, v))
                    .map_err(|e| format!("{name}:{line}: {e}"))
            })
            .collect::<Result<_, _>>()?,
    };
    let mut out = Vec::new();
    let list = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for (line, doc) in docs {
        for rs in list(&doc, "resourceSpans") {
            for ss in list(&rs, "scopeSpans") {
                for sp in list(&ss, "spans") {
                    let text_of =
                        |k: &str| sp.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let (start, end) = (
                        sp.get("startTimeUnixNano").and_then(nanos),
                        sp.get("endTimeUnixNano").and_then(nanos),
                    );
                    let (Some(start_ns), Some(end_ns)) = (start, end) else {
                        return Err(format!(
                            "{name}:{line}: span {} ({}): `startTimeUnixNano`/`endTimeUnixNano`: needs both times",
                            text_of("spanId"),
                            text_of("name")
                        ));
                    };
                    let attrs = list(&sp, "attributes")
                        .iter()
                        .filter_map(|a| {
                            Some((
                                a.get("key")?.as_str()?.to_owned(),
                                otlp_value(a.get("value")?),
                            ))
                        })
                        .collect();
                    out.push(Span {
                        trace: text_of("traceId"),
                        id: text_of("spanId"),
                        parent: text_of("parentSpanId"),
                        name: text_of("name"),
                        start_ns,
                        end_ns: end_ns.max(start_ns),
                        attrs,
                        line,
                    });
                }
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{name}: no spans (OTLP JSON: resourceSpans[].scopeSpans[].spans[])"
        ));
    }
    Ok(out)
}

fn otel(name: &str, text: &str) -> Result<(Vec<NodeSpec>, Vec<usize>), String> {
    let mut traces: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    let mut order = Vec::new();
    for s in spans(name, text)? {
        if !traces.contains_key(&s.trace) {
            order.push(s.trace.clone());
        }
        traces.entry(s.trace.clone()).or_default().push(s);
    }
    let mut specs = Vec::new();
    let mut at = Vec::new();
    for t in order {
        let spans = &traces[&t];
        let (s, l) = one_trace(name, &t, spans)?;
        specs.extend(s);
        at.extend(l);
    }
    Ok((specs, at))
}

/// The agent a span runs under: its nearest `invoke_agent` ancestor's id (none: empty).
fn agent_of(ids: &BTreeMap<&str, &Span>, s: &Span) -> String {
    let mut at = ids.get(s.parent.as_str()).copied();
    // A parent chain longer than the trace has a loop: no agent.
    for _ in 0..=ids.len() {
        let Some(p) = at else { break };
        if p.op() == "invoke_agent" {
            return p.id.clone();
        }
        at = ids.get(p.parent.as_str()).copied();
    }
    String::new()
}

/// A trace's model calls and tools, in time order; a tool no later call follows reaches no
/// answer and is left out.
fn task_nodes(spans: &[Span]) -> Vec<&Span> {
    let mut nodes: Vec<&Span> = spans.iter().filter(|s| s.kind().is_some()).collect();
    nodes.sort_by_key(|s| (s.start_ns, s.end_ns));
    nodes.retain(|s| {
        s.kind() == Some(NodeKind::Model)
            || spans
                .iter()
                .any(|m| m.kind() == Some(NodeKind::Model) && m.start_ns >= s.end_ns)
    });
    nodes
}

/// What node `k` waited for: the nodes that ended before it started, with none between.
fn waits(nodes: &[&Span], k: usize) -> Vec<usize> {
    let before = |k: usize, j: usize| nodes[j].end_ns <= nodes[k].start_ns;
    let n = nodes.len();
    (0..n)
        .filter(|&j| j != k && before(k, j))
        .filter(|&j| !(0..n).any(|m| m != j && m != k && before(m, j) && before(k, m)))
        .collect()
}

/// One trace's GenAI spans as one task's nodes.
fn one_trace(
    name: &str,
    trace: &str,
    spans: &[Span],
) -> Result<(Vec<NodeSpec>, Vec<usize>), String> {
    let ids: BTreeMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    if !spans.iter().any(|s| !ids.contains_key(s.parent.as_str())) {
        return Err(format!(
            "{name}:{}: trace {trace}: `parentSpanId`: the span tree has no root (every span names a parent in the trace)",
            spans[0].line
        ));
    }
    let agent = |s: &Span| agent_of(&ids, s);
    let nodes = task_nodes(spans);
    let n = nodes.len();
    // `before[k][j]`: node j ended before node k started.
    let before = |k: usize, j: usize| nodes[j].end_ns <= nodes[k].start_ns;
    // Unique by position: the operation (or the tool's name) and its place in time.
    let names: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(k, s)| format!("{}#{}", s.label(), k + 1))
        .collect();
    let mut specs = Vec::with_capacity(n);
    let mut tokens: Vec<(u32, u32)> = Vec::with_capacity(n);
    for k in 0..n {
        let s = nodes[k];
        let kind = s.kind().unwrap_or(NodeKind::Model);
        let after = waits(&nodes, k);
        let ready = after
            .iter()
            .map(|&j| nodes[j].end_ns)
            .max()
            .unwrap_or(s.start_ns);
        let mut spec = node(trace.to_owned(), names[k].clone(), kind);
        spec.after = after.iter().map(|&j| names[j].clone()).collect();
        spec.think_ms = Some(Amount::Fixed(
            ((s.start_ns.saturating_sub(ready)) / 1_000_000) as u32,
        ));
        match kind {
            NodeKind::Tool => {
                let result = s.result_tokens();
                spec.latency_ms = Some(Amount::Fixed(((s.end_ns - s.start_ns) / 1_000_000) as u32));
                spec.result_tokens = Some(Amount::Fixed(result));
                tokens.push((result, result));
            }
            NodeKind::Model => {
                let input = s.tokens(name, "gen_ai.usage.input_tokens")?;
                let output = s.tokens(name, "gen_ai.usage.output_tokens")?;
                // It continues the latest call before it under the same agent.
                let mine = agent(s);
                let context = (0..n)
                    .filter(|&j| {
                        before(k, j)
                            && nodes[j].kind() == Some(NodeKind::Model)
                            && agent(nodes[j]) == mine
                    })
                    // Whatever ended before it started is among what it waits for, directly
                    // or through the nodes between.
                    .max_by_key(|&j| nodes[j].end_ns);
                let history =
                    context.map_or(0, |c| u64::from(tokens[c].0) + u64::from(tokens[c].1));
                let used: u64 = after
                    .iter()
                    .filter(|&&j| Some(j) != context)
                    .map(|&j| u64::from(tokens[j].1))
                    .sum();
                let own = (u64::from(input).saturating_sub(history + used)).max(1) as u32;
                spec.context = context.map(|c| names[c].clone());
                spec.input_tokens = Some(Amount::Fixed(own));
                spec.output_tokens = Some(Amount::Fixed(output));
                tokens.push((input, output));
            }
        }
        specs.push(spec);
    }
    let lines = nodes.iter().map(|s| s.line).collect();
    Ok((specs, lines))
}

/// A graph error at the line its node was written on.
pub fn located(name: &str, lines: &[usize], e: &GraphError) -> String {
    let line = lines.get(e.node).copied().unwrap_or(1);
    format!("{name}:{line}: `{}`: {}", e.field, e.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::LengthDist;

    #[test]
    fn errors_name_file_line_and_field() {
        let d = LengthDist::Fixed { value: 8 };
        let defaults = Defaults {
            input: &d,
            output: &d,
            context_tokens: None,
        };
        let p = Path::new("g.jsonl");
        let text = "# an agent\n{\"name\": \"a\"}\n\n{\"name\": \"b\", \"after\": [\"c\"]}\n";
        let e = parse(p, text, TaskFormat::Graph, &defaults).unwrap_err();
        assert_eq!(
            e, "g.jsonl:4: `after`: `c` is not a node of this task",
            "{e}"
        );
        let e = parse(
            p,
            "{\"name\": \"a\", \"afterr\": []}\n",
            TaskFormat::Graph,
            &defaults,
        )
        .unwrap_err();
        assert!(e.starts_with("g.jsonl:1: unknown field `afterr`"), "{e}");
        let ok = parse(p, "{\"name\": \"a\"}\n", TaskFormat::Graph, &defaults).unwrap();
        assert_eq!(ok[0].nodes.len(), 1);
    }

    fn defaults_8() -> (LengthDist, Option<u32>) {
        (LengthDist::Fixed { value: 8 }, None)
    }

    fn read(text: &str, format: TaskFormat) -> Result<Vec<Graph>, String> {
        let (d, context_tokens) = defaults_8();
        let defaults = Defaults {
            input: &d,
            output: &d,
            context_tokens,
        };
        parse(Path::new("t.jsonl"), text, format, &defaults)
    }

    #[test]
    fn multi_turn_mooncake_rows_become_one_chain_per_session() {
        let rows = "{\"session_id\": \"a\", \"input_length\": 100, \"output_length\": 20, \"hash_ids\": [1]}\n\
                    {\"session_id\": \"b\", \"input_length\": 50, \"output_length\": 5}\n\
                    {\"session_id\": \"a\", \"input_length\": 150, \"output_length\": 10, \"delay\": 300}\n";
        let g = read(rows, TaskFormat::Mooncake).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].id.as_deref(), Some("a"));
        let second = &g[0].nodes[1];
        assert_eq!(second.context, Some(0));
        // 150 in all, 120 of them the first turn's prompt and answer.
        assert_eq!(second.input, LengthDist::Fixed { value: 30 });
        assert_eq!(second.think_ms, Some(LengthDist::Fixed { value: 300 }));
        let e = read(
            "{\"input_length\": 5, \"output_length\": 5}\n",
            TaskFormat::Mooncake,
        )
        .unwrap_err();
        assert!(e.starts_with("t.jsonl:1: `session_id`"), "{e}");
        let e = read(
            "{\"session_id\": 1, \"input_length\": 0, \"output_length\": 5}\n",
            TaskFormat::Mooncake,
        )
        .unwrap_err();
        assert!(e.starts_with("t.jsonl:1: `input_length`"), "{e}");
    }

    /// An OTLP JSON span (GenAI attributes) of trace `t`, times in ms.
    fn span(id: &str, parent: &str, op: &str, ms: (u64, u64), extra: &str) -> String {
        format!(
            "{{\"traceId\": \"t\", \"spanId\": \"{id}\", \"parentSpanId\": \"{parent}\", \"name\": \"{op} x\", \"startTimeUnixNano\": \"{}\", \"endTimeUnixNano\": \"{}\", \"attributes\": [{{\"key\": \"gen_ai.operation.name\", \"value\": {{\"stringValue\": \"{op}\"}}}}{extra}]}}",
            ms.0 * 1_000_000,
            ms.1 * 1_000_000
        )
    }

    fn usage(input: u32, output: u32) -> String {
        format!(
            ", {{\"key\": \"gen_ai.usage.input_tokens\", \"value\": {{\"intValue\": \"{input}\"}}}}, {{\"key\": \"gen_ai.usage.output_tokens\", \"value\": {{\"intValue\": {output}}}}}"
        )
    }

    fn export(spans: &[String]) -> String {
        format!(
            "{{\"resourceSpans\": [{{\"scopeSpans\": [{{\"spans\": [{}]}}]}}]}}\n",
            spans.join(", ")
        )
    }

    #[test]
    fn an_otel_agent_trace_becomes_a_graph_with_its_fan_out_and_history() {
        let tool = |id: &str, ms| {
            span(
                id,
                "root",
                "execute_tool",
                ms,
                ", {\"key\": \"gen_ai.tool.call.result\", \"value\": {\"stringValue\": \"a b c d\"}}",
            )
        };
        let text = export(&[
            span("root", "", "invoke_agent", (0, 1000), ""),
            span("c1", "root", "chat", (0, 100), &usage(200, 30)),
            tool("t1", (110, 300)),
            tool("t2", (110, 500)),
            span("c2", "root", "chat", (520, 700), &usage(250, 40)),
            // A tool after the last call reaches no answer: left out.
            tool("t3", (710, 720)),
        ]);
        let g = read(&text, TaskFormat::Otel).unwrap();
        assert_eq!(g.len(), 1);
        let names: Vec<&str> = g[0].nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            ["chat#1", "execute_tool#2", "execute_tool#3", "chat#4"]
        );
        let last = &g[0].nodes[3];
        assert_eq!(
            last.after,
            vec![1, 2],
            "both tools, not the first call through them"
        );
        assert_eq!(last.context, Some(0), "the agent's history");
        assert_eq!(last.uses, vec![1, 2]);
        // 250 in all: 230 of history, 4 + 4 of tool results.
        assert_eq!(last.input, LengthDist::Fixed { value: 12 });
        assert_eq!(last.think_ms, Some(LengthDist::Fixed { value: 20 }));
        let t2 = &g[0].nodes[2];
        assert_eq!(
            (t2.input.clone(), t2.output.clone()),
            (
                LengthDist::Fixed { value: 4 },
                LengthDist::Fixed { value: 390 }
            )
        );
        let rootless = export(&[
            span("a", "b", "chat", (0, 10), &usage(5, 5)),
            span("b", "a", "chat", (20, 30), &usage(5, 5)),
        ]);
        let e = read(&rootless, TaskFormat::Otel).unwrap_err();
        assert!(
            e.contains("`parentSpanId`: the span tree has no root"),
            "{e}"
        );
        let untold = export(&[span("a", "", "chat", (0, 10), "")]);
        let e = read(&untold, TaskFormat::Otel).unwrap_err();
        assert!(
            e.contains("span a (chat x): `gen_ai.usage.input_tokens`"),
            "{e}"
        );
    }
}
