//! An agent task's graph file (`[workload.task] graph`): JSON Lines, one node per line, each
//! object with the fields of a `[[workload.task.node]]` (blank lines and lines starting with
//! `#` are skipped). Every error names the file, the line and the field.

use std::path::Path;

use crate::contract::task::{Defaults, Graph, GraphError, NodeSpec, resolve};

/// The graphs of a file's text (`path` names it in errors).
pub fn parse(path: &Path, text: &str, d: &Defaults) -> Result<Vec<Graph>, String> {
    let name = path.display();
    let mut specs = Vec::new();
    let mut lines = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let spec: NodeSpec = serde_json::from_str(t).map_err(|e| {
            // serde names the field it could not read in the message; the column is the line's.
            format!("{name}:{}: {}", k + 1, e)
        })?;
        specs.push(spec);
        lines.push(k + 1);
    }
    if specs.is_empty() {
        return Err(format!("{name}: the graph has no nodes"));
    }
    resolve(&specs, d).map_err(|e| located(&name.to_string(), &lines, &e))
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
        let e = parse(p, text, &defaults).unwrap_err();
        assert_eq!(
            e, "g.jsonl:4: `after`: `c` is not a node of this task",
            "{e}"
        );
        let e = parse(p, "{\"name\": \"a\", \"afterr\": []}\n", &defaults).unwrap_err();
        assert!(e.starts_with("g.jsonl:1: unknown field `afterr`"), "{e}");
        let ok = parse(p, "{\"name\": \"a\"}\n", &defaults).unwrap();
        assert_eq!(ok[0].nodes.len(), 1);
    }
}
