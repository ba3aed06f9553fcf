//! The simulator's tool calls, by a stated rule so that tests know the right answer:
//!
//! - **Which calls**: every offered tool whose name the prompt writes directly followed by a
//!   JSON object (`get_weather{"city": "Paris"}`), in the order written, with that object as
//!   its arguments; a prompt that writes none calls the first tool offered, with no arguments.
//! - **Which go wrong**: with probability `faults.tool_error_rate` + `faults.
//!   tool_error_per_request` × the requests already in the engine (running or waiting) when
//!   the request arrives, capped at 1, drawn per arrival from the seed, one thing goes wrong:
//!   the last call's arguments cut in half (not JSON), the first call's first argument
//!   changed, the first call's name changed, or no call at all (a text answer). The ground
//!   truth says which.
//! - **How they stream**: one token per piece — a call's name (its first event, arguments
//!   empty), then its arguments in pieces of up to eight characters — and `finish_reason`
//!   `tool_calls` (or `length` when `max_tokens` cuts them).

use serde_json::Value;

use crate::sim_config::SimConfig;
use crate::text::{mix2, unit_interval};

/// What went wrong in a tool answer (the ground truth's `tool_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolError {
    Truncated,
    WrongValue,
    WrongName,
    NoCall,
}

impl ToolError {
    pub fn name(self) -> &'static str {
        match self {
            ToolError::Truncated => "truncated",
            ToolError::WrongValue => "wrong_value",
            ToolError::WrongName => "wrong_name",
            ToolError::NoCall => "no_call",
        }
    }
}

/// A tool answer: its calls (name, arguments' text) as sent, and what went wrong in them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolAnswer {
    pub calls: Vec<(String, String)>,
    pub error: Option<ToolError>,
}

/// One streamed piece of a tool answer: the call it belongs to, and its name (the call's
/// first piece) or a piece of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub call: usize,
    pub name: Option<String>,
    pub arguments: String,
}

/// Salt of the tool-error draws.
const SALT: u64 = 0x746f_6f6c;

/// The answer to a request offering `offered` tools with `prompt`, its `seq`-th arrival, with
/// `in_engine` requests running or waiting.
pub fn answer(
    cfg: &SimConfig,
    seq: u64,
    offered: &[String],
    prompt: &str,
    in_engine: usize,
) -> ToolAnswer {
    let mut calls: Vec<(String, String)> = intended(offered, prompt)
        .into_iter()
        .map(|(_, n, a)| (n, a))
        .collect();
    let f = &cfg.faults;
    let p = (f.tool_error_rate + f.tool_error_per_request * in_engine as f64).min(1.0);
    let u = unit_interval(mix2(mix2(cfg.seed ^ SALT, seq), 1));
    if !(p > 0.0 && u < p) {
        return ToolAnswer { calls, error: None };
    }
    let kinds = [
        ToolError::Truncated,
        ToolError::WrongValue,
        ToolError::WrongName,
        ToolError::NoCall,
    ];
    let kind = kinds[(mix2(mix2(cfg.seed ^ SALT, seq), 2) % 4) as usize];
    match kind {
        ToolError::Truncated => {
            if let Some((_, args)) = calls.last_mut() {
                let mut cut = args.len() / 2;
                while !args.is_char_boundary(cut) {
                    cut -= 1;
                }
                args.truncate(cut.max(1));
            }
        }
        ToolError::WrongValue => {
            if let Some((_, args)) = calls.first_mut() {
                *args = changed(args);
            }
        }
        ToolError::WrongName => {
            if let Some((name, _)) = calls.first_mut() {
                name.push_str("_v2");
            }
        }
        ToolError::NoCall => calls.clear(),
    }
    ToolAnswer {
        calls,
        error: Some(kind),
    }
}

/// The calls the prompt writes (`name{…}` for an offered name), in order; else the first
/// tool's, with no arguments.
fn intended(offered: &[String], prompt: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for name in offered.iter().filter(|n| !n.is_empty()) {
        let pattern = format!("{name}{{");
        let mut from = 0;
        while let Some(k) = prompt[from..].find(&pattern) {
            let at = from + k;
            from = at + name.len();
            // The name whole, not the tail of a longer word.
            let before = prompt[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &prompt[at + name.len()..];
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            if let Some(Ok(v @ Value::Object(_))) = values.next() {
                found.push((at, name.clone(), v.to_string()));
            }
        }
    }
    found.sort_by_key(|(at, _, _)| *at);
    if found.is_empty()
        && let Some(first) = offered.first()
    {
        found.push((0, first.clone(), "{}".to_owned()));
    }
    found
}

/// Wrong arguments: the first argument's value changed (a string gets `_x`, a number one
/// more, a flag flipped, anything else `null`), or an argument added to none.
fn changed(args: &str) -> String {
    let Ok(Value::Object(mut o)) = serde_json::from_str::<Value>(args) else {
        return format!("{args}x");
    };
    match o.iter_mut().next() {
        Some((_, v)) => {
            *v = match v {
                Value::String(s) => Value::String(format!("{s}_x")),
                Value::Number(n) => serde_json::json!(n.as_f64().unwrap_or(0.0) + 1.0),
                Value::Bool(b) => Value::Bool(!*b),
                _ => Value::Null,
            }
        }
        None => {
            o.insert("unexpected".into(), Value::from(1));
        }
    }
    Value::Object(o).to_string()
}

/// The pieces the calls stream in, one a token.
pub fn pieces(calls: &[(String, String)]) -> Vec<Piece> {
    let mut out = Vec::new();
    for (k, (name, args)) in calls.iter().enumerate() {
        out.push(Piece {
            call: k,
            name: Some(name.clone()),
            arguments: String::new(),
        });
        let mut rest = args.as_str();
        while !rest.is_empty() {
            let mut cut = rest.len().min(8);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            out.push(Piece {
                call: k,
                name: None,
                arguments: rest[..cut].to_owned(),
            });
            rest = &rest[cut..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_the_calls_and_faults_change_one() {
        let offered = vec!["get_weather".to_owned(), "add".to_owned()];
        let prompt =
            r#"Call add{"a": 1, "b": 2} then get_weather{"city": "Paris"}; not xadd{"a": 0}"#;
        let cfg = SimConfig::default();
        let a = answer(&cfg, 0, &offered, prompt, 0);
        assert_eq!(
            a.calls,
            vec![
                ("add".to_owned(), r#"{"a":1,"b":2}"#.to_owned()),
                ("get_weather".to_owned(), r#"{"city":"Paris"}"#.to_owned())
            ]
        );
        assert_eq!(a.error, None);
        let none = answer(&cfg, 0, &offered, "no calls written", 0);
        assert_eq!(
            none.calls,
            vec![("get_weather".to_owned(), "{}".to_owned())]
        );
        // Every arrival goes wrong at rate 1; each kind turns up.
        let mut cfg = SimConfig::default();
        cfg.faults.tool_error_rate = 1.0;
        let mut kinds = std::collections::HashSet::new();
        for seq in 0..64 {
            let a = answer(&cfg, seq, &offered, prompt, 0);
            kinds.insert(a.error.unwrap());
        }
        assert_eq!(kinds.len(), 4);
        // The rate grows with the requests in the engine.
        let mut cfg = SimConfig::default();
        cfg.faults.tool_error_per_request = 0.01;
        let wrong = |n| {
            (0..2000)
                .filter(|&s| answer(&cfg, s, &offered, prompt, n).error.is_some())
                .count()
        };
        let (idle, busy) = (wrong(0), wrong(50));
        assert_eq!(idle, 0);
        assert!((800..1200).contains(&busy), "{busy}");
        let p = pieces(&a_calls());
        assert_eq!(p[0].name.as_deref(), Some("f"));
        let args: String = p.iter().map(|x| x.arguments.as_str()).collect();
        assert_eq!(args, r#"{"long":"é é é é"}"#);
    }

    fn a_calls() -> Vec<(String, String)> {
        vec![("f".into(), r#"{"long":"é é é é"}"#.into())]
    }
}
