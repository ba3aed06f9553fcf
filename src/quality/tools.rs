//! Tool calls graded per request: what a request offers (its tools) and what it must call,
//! read from the Berkeley Function-Calling Leaderboard's data (the `bfcl-eval` package's
//! `BFCL_v4_<category>.json` and `possible_answer/` files) or from goodput's own JSON lines, and
//! the grade of the calls a server streamed back.
//!
//! Two rules, each stated where it is reported:
//! - **`bfcl`**, BFCL's AST check for Python functions (`ast_checker.py` of `bfcl-eval`
//!   2026.3.23), for the categories with one checkable answer: `simple_python`, `live_simple`
//!   (exactly one call), `multiple`, `live_multiple` (one call, of the function the answer
//!   names), `parallel`, `live_parallel`, `parallel_multiple`, `live_parallel_multiple` (as many
//!   calls as the answer, matched in any order). A call is right when its name is the function's
//!   (dots sent as underscores, as BFCL sends them to OpenAI-style APIs), every required
//!   parameter is there, no parameter outside the function and the answer is, each value has
//!   the parameter's type (an integer where a float is asked is taken) and is one of the
//!   answer's values — strings compared after dropping spaces and `,./-_*^` and lower-casing,
//!   lists and dicts element by element — and every parameter left out is one the answer marks
//!   optional (`""` among its values).
//! - **`exact`**, for goodput's own format: as many calls as expected, each expected call
//!   matched by one call of the same name whose arguments are the same JSON (numbers by value),
//!   in any order.
//!
//! The rules are written here rather than run from BFCL's Python: a grade is needed per
//! request while the load runs, and a test pins hand-checked answers against BFCL's files.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::{Message, ToolCall};

/// What one request offers and must call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCase {
    /// The entry's id (BFCL's `id`, or the line's `id`), for messages.
    pub id: String,
    /// The tools as the Chat Completions API takes them.
    pub tools: Value,
    /// Each offered function's parameters, for the BFCL rule's checks.
    pub functions: Vec<Function>,
    /// The calls the answer expects: BFCL's acceptable values per parameter, or the exact
    /// arguments.
    pub expected: Vec<Expected>,
    pub rule: Rule,
}

/// An offered function, as the BFCL rule checks against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// As sent (BFCL's dots as underscores).
    pub name: String,
    /// Each parameter's BFCL type (`integer`, `float`, `string`, `boolean`, `array`, `tuple`,
    /// `dict`, `any`) and, for a list, its items' type.
    pub params: Vec<(String, String, Option<String>)>,
    pub required: Vec<String>,
}

/// One expected call.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub name: String,
    /// BFCL: each parameter's list of acceptable values (`""` among them: it may be left out).
    /// Exact: each argument's value.
    pub args: Map<String, Value>,
}

/// How a request's calls are graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// BFCL's simple categories: exactly one call.
    Simple,
    /// BFCL's multiple categories: one call, of the function the answer names among several.
    Multiple,
    /// BFCL's parallel categories: as many calls as the answer has, in any order.
    Parallel,
    /// goodput's own format: the expected calls, arguments as equal JSON, in any order.
    Exact,
}

impl Rule {
    /// As the contract writes it (`workload.tools.rule`).
    pub fn name(self) -> &'static str {
        match self {
            Rule::Simple => "simple",
            Rule::Multiple => "multiple",
            Rule::Parallel => "parallel",
            Rule::Exact => "exact",
        }
    }

    /// The rule the contract names (`workload.tools.rule`).
    pub fn named(name: &str) -> Option<Rule> {
        [Rule::Simple, Rule::Multiple, Rule::Parallel, Rule::Exact]
            .into_iter()
            .find(|r| r.name() == name)
    }

    /// The rule in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Simple | Rule::Multiple | Rule::Parallel => {
                "BFCL's AST check (bfcl-eval 2026.3.23): names, required and allowed parameters, types, values among the answer's (strings without spaces and ,./-_*^, any case)"
            }
            Rule::Exact => {
                "exact: the expected calls by name, arguments equal as JSON (numbers by value), any order"
            }
        }
    }
}

/// What a request's calls were judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Correct,
    /// The answer called no tool.
    NoCall,
    /// A call's arguments are not a JSON object (cut short, or not JSON).
    Unparsable,
    /// More or fewer calls than expected.
    WrongCount,
    /// A call of a function the answer does not call.
    WrongName,
    /// The right function, with a missing, extra, mistyped or wrong argument.
    WrongArguments,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Correct => "correct",
            Verdict::NoCall => "no call",
            Verdict::Unparsable => "arguments not JSON",
            Verdict::WrongCount => "wrong number of calls",
            Verdict::WrongName => "wrong function",
            Verdict::WrongArguments => "wrong arguments",
        }
    }

    /// As records and summaries write it (`no_call`, …).
    pub fn key(self) -> &'static str {
        match self {
            Verdict::Correct => "correct",
            Verdict::NoCall => "no_call",
            Verdict::Unparsable => "unparsable",
            Verdict::WrongCount => "wrong_count",
            Verdict::WrongName => "wrong_name",
            Verdict::WrongArguments => "wrong_arguments",
        }
    }

    /// The verdict a record or summary names.
    pub fn keyed(key: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.key() == key)
    }

    pub const ALL: [Verdict; 6] = [
        Verdict::Correct,
        Verdict::NoCall,
        Verdict::Unparsable,
        Verdict::WrongCount,
        Verdict::WrongName,
        Verdict::WrongArguments,
    ];
}

/// A request's grade: the verdict and, when wrong, why in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grade {
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Grade {
    pub fn correct(&self) -> bool {
        self.verdict == Verdict::Correct
    }

    fn wrong(verdict: Verdict, why: impl Into<String>) -> Grade {
        Grade {
            verdict,
            why: Some(why.into()),
        }
    }
}

/// Grades the calls an answer made against what its case expects.
pub fn grade(case: &ToolCase, calls: &[ToolCall]) -> Grade {
    if calls.is_empty() {
        return Grade::wrong(Verdict::NoCall, "the answer called no tool");
    }
    let mut made = Vec::with_capacity(calls.len());
    for (k, c) in calls.iter().enumerate() {
        let t = c.arguments.trim();
        // A call of no arguments may come with none written.
        let args = if t.is_empty() {
            Ok(Value::Object(Map::new()))
        } else {
            serde_json::from_str::<Value>(t)
        };
        match args {
            Ok(Value::Object(o)) => made.push((c.name.as_str(), o)),
            Ok(_) => {
                return Grade::wrong(
                    Verdict::Unparsable,
                    format!(
                        "call {} ({}): arguments are JSON but not an object",
                        k + 1,
                        c.name
                    ),
                );
            }
            Err(e) => {
                return Grade::wrong(
                    Verdict::Unparsable,
                    format!("call {} ({}): arguments are not JSON: {e}", k + 1, c.name),
                );
            }
        }
    }
    if made.len() != case.expected.len() {
        return Grade::wrong(
            Verdict::WrongCount,
            format!("{} calls, {} expected", made.len(), case.expected.len()),
        );
    }
    // Each expected call, in order, takes the first call not yet taken that passes (BFCL's
    // parallel rule; with one call, the simple and multiple rules).
    let mut taken = vec![false; made.len()];
    for e in &case.expected {
        let mut first_wrong = None;
        let found = (0..made.len()).filter(|&k| !taken[k]).find(|&k| {
            let (name, args) = &made[k];
            let g = match case.rule {
                Rule::Exact => exact_call(e, name, args),
                _ => bfcl_call(case, e, name, args),
            };
            match g {
                Ok(()) => true,
                Err(g) => {
                    first_wrong.get_or_insert(g);
                    false
                }
            }
        });
        match found {
            Some(k) => taken[k] = true,
            None => {
                return first_wrong.unwrap_or_else(|| {
                    Grade::wrong(Verdict::WrongName, format!("no call of {}", e.name))
                });
            }
        }
    }
    Grade {
        verdict: Verdict::Correct,
        why: None,
    }
}

fn exact_call(e: &Expected, name: &str, args: &Map<String, Value>) -> Result<(), Grade> {
    if name != e.name {
        return Err(Grade::wrong(
            Verdict::WrongName,
            format!("called {name}, expected {}", e.name),
        ));
    }
    let same = args.len() == e.args.len()
        && e.args
            .iter()
            .all(|(k, v)| args.get(k).is_some_and(|a| same_json(a, v)));
    match same {
        true => Ok(()),
        false => Err(Grade::wrong(
            Verdict::WrongArguments,
            format!(
                "{name}: arguments {}, expected {}",
                Value::Object(args.clone()),
                Value::Object(e.args.clone())
            ),
        )),
    }
}

/// JSON equality with numbers by value (`5` and `5.0` are one number, as Python's `==` has it).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// The Python type BFCL's checker sees a JSON value as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Py {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    None,
}

fn py_type(v: &Value) -> Py {
    match v {
        Value::String(_) => Py::Str,
        Value::Number(n) if n.is_f64() => Py::Float,
        Value::Number(_) => Py::Int,
        Value::Bool(_) => Py::Bool,
        Value::Array(_) => Py::List,
        Value::Object(_) => Py::Dict,
        Value::Null => Py::None,
    }
}

/// BFCL's type names as Python types (`PYTHON_TYPE_MAPPING`): `tuple` is a list, `any` a
/// string.
fn bfcl_py(t: &str) -> Py {
    match t {
        "integer" => Py::Int,
        "float" | "number" => Py::Float,
        "boolean" => Py::Bool,
        "array" | "tuple" => Py::List,
        "dict" | "object" => Py::Dict,
        _ => Py::Str,
    }
}

/// The type of an answer's acceptable values: the first that is not the optional mark `""`.
fn answer_type(possible: &[Value]) -> Option<Py> {
    possible
        .iter()
        .find(|v| v.as_str() != Some(""))
        .map(py_type)
}

fn bfcl_call(
    case: &ToolCase,
    e: &Expected,
    name: &str,
    args: &Map<String, Value>,
) -> Result<(), Grade> {
    let wrong_args = |why: String| {
        Err(Grade::wrong(
            Verdict::WrongArguments,
            format!("{name}: {why}"),
        ))
    };
    if name != e.name {
        return Err(Grade::wrong(
            Verdict::WrongName,
            format!("called {name}, expected {}", e.name),
        ));
    }
    // Validation made sure every expected call names an offered function.
    let Some(f) = case.functions.iter().find(|f| f.name == e.name) else {
        return Err(Grade::wrong(
            Verdict::WrongName,
            format!("{} is not offered", e.name),
        ));
    };
    if let Some(p) = f.required.iter().find(|p| !args.contains_key(*p)) {
        return wrong_args(format!("missing required parameter {p}"));
    }
    for (param, value) in args {
        let (Some((_, ty, items)), Some(possible)) = (
            f.params.iter().find(|(p, _, _)| p == param),
            e.args.get(param).and_then(Value::as_array),
        ) else {
            return wrong_args(format!("unexpected parameter {param}"));
        };
        let expected = bfcl_py(ty);
        // An integer where a float is asked is taken as that float.
        let value = match (expected, value) {
            (Py::Float, Value::Number(n)) if !n.is_f64() => {
                n.as_f64().map_or(value.clone(), Value::from)
            }
            _ => value.clone(),
        };
        let is_variable = match type_check(&value, possible, expected, items.as_deref()) {
            Some(v) => v,
            None => {
                return wrong_args(format!("parameter {param}: {value} is not of type {ty}"));
            }
        };
        if !value_ok(&value, possible, expected, items.as_deref(), is_variable) {
            return wrong_args(format!(
                "parameter {param}: {value} is not one of {}",
                Value::Array(possible.clone())
            ));
        }
    }
    for (param, possible) in &e.args {
        let optional = possible
            .as_array()
            .is_some_and(|p| p.iter().any(|v| v.as_str() == Some("")));
        if !args.contains_key(param) && !optional {
            return wrong_args(format!(
                "parameter {param} left out, and the answer needs it"
            ));
        }
    }
    Ok(())
}

/// BFCL's type check: `Some(is_variable)` when `value` passes (a value of the answer's own
/// type where the function's differs is a "variable", compared as it stands), `None` when not.
fn type_check(
    value: &Value,
    possible: &[Value],
    expected: Py,
    items: Option<&str>,
) -> Option<bool> {
    let answer = answer_type(possible);
    let got = py_type(value);
    if got == expected {
        let nested_ok = match (items, value) {
            (Some(item), Value::Array(vs)) if expected == Py::List => {
                let it = bfcl_py(item);
                possible.iter().any(|p| match p {
                    Value::Array(pa) => vs.iter().all(|v| type_check(v, pa, it, None).is_some()),
                    _ => true,
                })
            }
            _ => true,
        };
        if nested_ok {
            return Some(answer.is_some_and(|a| a != expected));
        }
    }
    (answer == Some(got)).then_some(true)
}

/// BFCL's string normal form: no spaces or `,./-_*^`, lower case, single quotes as double.
fn standard(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .flat_map(char::to_lowercase)
        .map(|c| if c == '\'' { '"' } else { c })
        .collect()
}

/// A value with its strings (and a list's string items) in normal form.
fn standard_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standard(s)),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| match x {
                    Value::String(s) => Value::String(standard(s)),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn value_ok(
    value: &Value,
    possible: &[Value],
    expected: Py,
    items: Option<&str>,
    var: bool,
) -> bool {
    let among = |v: &Value, list: &[Value]| list.iter().any(|p| same_json(v, p));
    if var {
        return among(value, possible);
    }
    match (expected, value) {
        (Py::Dict, Value::Object(o)) => possible.iter().any(|p| dict_ok(o, p)),
        (Py::List, Value::Array(vs)) if items.map(bfcl_py) == Some(Py::Dict) => {
            possible.iter().any(|p| match p {
                Value::Array(ds) => {
                    ds.len() == vs.len()
                        && vs.iter().zip(ds).all(|(v, d)| match v {
                            Value::Object(o) => dict_ok(o, d),
                            _ => false,
                        })
                }
                _ => false,
            })
        }
        (Py::Str, Value::String(s)) => possible
            .iter()
            .filter_map(Value::as_str)
            .any(|p| standard(p) == standard(s)),
        (Py::List, Value::Array(_)) => {
            let v = standard_value(value);
            possible.iter().any(|p| same_json(&v, &standard_value(p)))
        }
        _ => among(value, possible),
    }
}

/// BFCL's dict check: every key of the value is the answer's and its (normal-form) value one
/// of the answer's; every key the answer has and the value lacks is optional.
fn dict_ok(o: &Map<String, Value>, answer: &Value) -> bool {
    let Value::Object(a) = answer else {
        return false;
    };
    let list = |k: &str| {
        a.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    o.iter().all(|(k, v)| {
        a.contains_key(k) && {
            let v = standard_value(v);
            list(k).iter().any(|p| same_json(&v, &standard_value(p)))
        }
    }) && a
        .keys()
        .all(|k| o.contains_key(k) || list(k).iter().any(|p| p.as_str() == Some("")))
}

/// A BFCL category this grader has a rule for, from a data file's name
/// (`BFCL_v4_<category>.json`) or as the contract names it.
pub fn bfcl_rule(category: &str) -> Result<Rule, String> {
    match category {
        "simple_python" | "simple" | "live_simple" => Ok(Rule::Simple),
        "multiple" | "live_multiple" => Ok(Rule::Multiple),
        "parallel" | "live_parallel" | "parallel_multiple" | "live_parallel_multiple" => {
            Ok(Rule::Parallel)
        }
        c if c.contains("irrelevance") || c.contains("relevance") => Err(format!(
            "BFCL's {c} category is right when no function is called (or when one is): it has no answer to grade a call against; use simple_python, multiple or parallel"
        )),
        c if c.contains("java") => Err(format!(
            "BFCL's {c} category writes arguments in Java or JavaScript syntax, which this grader does not read; use simple_python, multiple or parallel"
        )),
        c if c.starts_with("multi_turn") || c == "memory" || c == "web_search" => Err(format!(
            "BFCL's {c} category is graded by running the calls against a state over several turns, not call by call; use simple_python, multiple or parallel"
        )),
        c => Err(format!(
            "`{c}` is not a BFCL category this grader has a rule for (simple_python, live_simple, multiple, live_multiple, parallel, live_parallel, parallel_multiple, live_parallel_multiple)"
        )),
    }
}

/// The category a BFCL data file's name says (`BFCL_v4_simple_python.json` → `simple_python`).
pub fn bfcl_category(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_str()?;
    let rest = stem.strip_prefix("BFCL_")?;
    let (_, category) = rest.split_once('_')?;
    Some(category.to_owned())
}

/// One entry ready to send: its chat messages and its case.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub messages: Vec<Message>,
    pub case: ToolCase,
    /// `line N` (and its id), for messages.
    pub at: String,
}

#[derive(Deserialize)]
struct BfclQuestion {
    id: String,
    question: Vec<Vec<Message>>,
    function: Vec<Value>,
}

#[derive(Deserialize)]
struct BfclAnswer {
    id: String,
    ground_truth: Vec<Map<String, Value>>,
}

/// BFCL's type names as JSON Schema's (bfcl-eval's `GORILLA_TO_OPENAPI`; a name it lacks is a
/// string, as there).
fn json_schema_type(t: &str) -> &'static str {
    match t {
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        _ => "string",
    }
}

/// A BFCL parameter schema in JSON Schema's type names, nested properties and items too.
fn openapi_schema(v: &mut Value) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    let t = o.get("type").and_then(Value::as_str).unwrap_or("string");
    let mapped = json_schema_type(t);
    o.insert("type".into(), mapped.into());
    if let Some(Value::Object(props)) = o.get_mut("properties") {
        props.values_mut().for_each(openapi_schema);
    }
    if let Some(items) = o.get_mut("items") {
        openapi_schema(items);
    }
}

/// Reads BFCL's question and answer files of one category (`rule`). Each error names the file,
/// its line and the key.
pub fn parse_bfcl(
    questions: (&Path, &str),
    answers: (&Path, &str),
    rule: Rule,
) -> Result<Vec<Entry>, String> {
    let (qname, aname) = (questions.0.display(), answers.0.display());
    let mut truth = std::collections::HashMap::new();
    for (i, line) in answers.1.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let a: BfclAnswer = serde_json::from_str(line).map_err(|e| {
            format!("{aname}:{}: {e} (each line is {{\"id\", \"ground_truth\": [{{function: {{parameter: [values]}}}}]}})", i + 1)
        })?;
        truth.insert(a.id.clone(), (i + 1, a));
    }
    let mut out = Vec::new();
    for (i, line) in questions.1.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let q: BfclQuestion = serde_json::from_str(line).map_err(|e| {
            format!("{qname}:{n}: {e} (each line is {{\"id\", \"question\": [[messages]], \"function\": [...]}})")
        })?;
        let Some((an, answer)) = truth.remove(&q.id) else {
            return Err(format!(
                "{qname}:{n}: `id` {} has no answer in {aname}",
                q.id
            ));
        };
        let messages = q.question.into_iter().next().unwrap_or_default();
        if !messages.iter().any(|m| m.role == "user") {
            return Err(format!("{qname}:{n}: `question` has no user message"));
        }
        let (tools, functions) =
            bfcl_functions(&q.function).map_err(|why| format!("{qname}:{n}: `function`: {why}"))?;
        let expected = bfcl_expected(
            answer.ground_truth,
            &functions,
            (&aname.to_string(), an),
            &format!("{qname}:{n}"),
        )?;
        if expected.is_empty() {
            return Err(format!(
                "{aname}:{an}: `ground_truth` is empty: nothing to grade"
            ));
        }
        out.push(Entry {
            messages,
            at: format!("line {n} ({})", q.id),
            case: ToolCase {
                id: q.id,
                tools,
                functions,
                expected,
                rule,
            },
        });
    }
    if out.is_empty() {
        return Err(format!("{qname}: no entries"));
    }
    Ok(out)
}

/// An answer line's expected calls (`at`: the answers file and line; `question`: the
/// question's file and line), each naming a function the question defines and giving a list
/// of acceptable values for parameters of it.
fn bfcl_expected(
    truth: Vec<Map<String, Value>>,
    functions: &[Function],
    (aname, an): (&str, usize),
    question: &str,
) -> Result<Vec<Expected>, String> {
    let mut expected = Vec::new();
    for (k, g) in truth.into_iter().enumerate() {
        let Some((name, args)) = g.into_iter().next() else {
            return Err(format!(
                "{aname}:{an}: `ground_truth[{k}]` names no function"
            ));
        };
        let name = name.replace('.', "_");
        let Some(f) = functions.iter().find(|f| f.name == name) else {
            return Err(format!(
                "{aname}:{an}: `ground_truth[{k}]` calls {name}, which no function of {question} defines"
            ));
        };
        let Value::Object(args) = args else {
            return Err(format!(
                "{aname}:{an}: `ground_truth[{k}].{name}` is not an object of parameters"
            ));
        };
        if let Some((p, _)) = args.iter().find(|(_, v)| !v.is_array()) {
            return Err(format!(
                "{aname}:{an}: `ground_truth[{k}].{name}.{p}` is not a list of acceptable values"
            ));
        }
        if let Some(p) = args
            .keys()
            .find(|p| !f.params.iter().any(|(q, _, _)| q == *p))
        {
            return Err(format!(
                "{aname}:{an}: `ground_truth[{k}].{name}.{p}` is no parameter of {name}"
            ));
        }
        expected.push(Expected { name, args });
    }
    Ok(expected)
}

/// BFCL's function documents as Chat Completions tools (names with dots as underscores, types
/// as JSON Schema's) and as the grader's functions.
fn bfcl_functions(docs: &[Value]) -> Result<(Value, Vec<Function>), String> {
    let mut tools = Vec::new();
    let mut functions = Vec::new();
    for (k, d) in docs.iter().enumerate() {
        let name = d
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("[{k}] has no `name`"))?
            .replace('.', "_");
        let Some(Value::Object(params)) = d.get("parameters") else {
            return Err(format!("[{k}] ({name}): `parameters` is not an object"));
        };
        let props = match params.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            None => Map::new(),
            Some(_) => {
                return Err(format!(
                    "[{k}] ({name}): `parameters.properties` is not an object"
                ));
            }
        };
        let mut list = Vec::new();
        for (p, schema) in &props {
            let ty = schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("string");
            let items = schema
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            list.push((p.clone(), ty.to_owned(), items));
        }
        let required = string_list(params.get("required")).ok_or_else(|| {
            format!("[{k}] ({name}): `parameters.required` is not a list of names")
        })?;
        let mut schema = Value::Object(params.clone());
        openapi_schema(&mut schema);
        schema["type"] = "object".into();
        let mut function = serde_json::json!({ "name": name, "parameters": schema });
        if let Some(desc) = d.get("description") {
            function["description"] = desc.clone();
        }
        tools.push(serde_json::json!({ "type": "function", "function": function }));
        functions.push(Function {
            name,
            params: list,
            required,
        });
    }
    Ok((Value::Array(tools), functions))
}

fn string_list(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None => Some(Vec::new()),
        Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_owned)).collect(),
        Some(_) => None,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnLine {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    tools: Vec<Value>,
    expected: Vec<OwnCall>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnCall {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

/// JSON Schema's type names.
const SCHEMA_TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// Reads goodput's own tool format: JSON lines of `{"id"?, "prompt" | "messages", "tools":
/// [Chat Completions tools, or bare {name, description, parameters}], "expected": [{"name",
/// "arguments"}]}`, graded exactly. Each error names the file, line and key.
pub fn parse_own(path: &Path, text: &str) -> Result<Vec<Entry>, String> {
    let name = path.display();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let l: OwnLine = serde_json::from_str(line).map_err(|e| {
            format!("{name}:{n}: {e} (each line is {{\"prompt\" | \"messages\", \"tools\": [...], \"expected\": [{{\"name\", \"arguments\"}}]}})")
        })?;
        let messages = match (l.messages, l.prompt) {
            (Some(m), None) if m.iter().any(|m| m.role == "user") => m,
            (Some(_), None) => return Err(format!("{name}:{n}: `messages` has no user message")),
            (None, Some(p)) => vec![Message::new("user", p)],
            _ => {
                return Err(format!(
                    "{name}:{n}: give `prompt` or `messages`, one of them"
                ));
            }
        };
        if l.tools.is_empty() {
            return Err(format!("{name}:{n}: `tools` is empty: no tool offered"));
        }
        let (tools, functions) =
            own_tools(&l.tools).map_err(|(k, why)| format!("{name}:{n}: `tools[{k}]{why}"))?;
        let mut expected = Vec::new();
        for (k, c) in l.expected.into_iter().enumerate() {
            if !functions.iter().any(|f| f.name == c.name) {
                return Err(format!(
                    "{name}:{n}: `expected[{k}].name` {:?} names no tool of the line's `tools`",
                    c.name
                ));
            }
            expected.push(Expected {
                name: c.name,
                args: c.arguments,
            });
        }
        if expected.is_empty() {
            return Err(format!("{name}:{n}: `expected` is empty: nothing to grade"));
        }
        let id = match l.id {
            Some(Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => format!("line {n}"),
        };
        out.push(Entry {
            messages,
            at: format!("line {n}"),
            case: ToolCase {
                id,
                tools,
                functions,
                expected,
                rule: Rule::Exact,
            },
        });
    }
    if out.is_empty() {
        return Err(format!("{name}: no entries"));
    }
    Ok(out)
}

/// A line's tools, each a function whose parameters are a JSON Schema object; an error is the
/// tool's place and what is wrong, after its key.
fn own_tools(list: &[Value]) -> Result<(Value, Vec<Function>), (usize, String)> {
    let mut tools = Vec::new();
    let mut functions = Vec::new();
    for (k, t) in list.iter().enumerate() {
        // A Chat Completions tool, or its function alone.
        let f = match t.get("function") {
            Some(f) if t.get("type").and_then(Value::as_str) == Some("function") => f,
            Some(_) => return Err((k, ".type` is not \"function\"".to_owned())),
            None => t,
        };
        let Some(name) = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Err((k, ".name` is missing".to_owned()));
        };
        let params = f
            .get("parameters")
            .cloned()
            .unwrap_or(serde_json::json!({"type": "object"}));
        schema_object(&params).map_err(|why| (k, format!(".parameters{why}")))?;
        let props = params.get("properties").and_then(Value::as_object);
        functions.push(Function {
            name: name.to_owned(),
            params: props
                .map(|p| {
                    p.iter()
                        .map(|(n, s)| {
                            let ty = s.get("type").and_then(Value::as_str).unwrap_or("string");
                            (n.clone(), ty.to_owned(), None)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            required: string_list(params.get("required")).unwrap_or_default(),
        });
        tools.push(serde_json::json!({ "type": "function", "function": f }));
    }
    Ok((Value::Array(tools), functions))
}

/// Whether `v` is a JSON Schema object schema: `type` "object", `properties` an object whose
/// every value is a schema with a JSON Schema type (or a list of them, or none), `required` a
/// list of its properties' names. The error follows the key it is about.
fn schema_object(v: &Value) -> Result<(), String> {
    let Value::Object(o) = v else {
        return Err("` is not a JSON Schema object (it is not even a JSON object)".into());
    };
    match o.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(t) => {
            return Err(format!(".type` is {t}, not \"object\": a tool's parameters are a JSON Schema object"));
        }
        None => return Err(".type` is missing: a tool's parameters are a JSON Schema object (\"type\": \"object\")".into()),
    }
    let props = match o.get("properties") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(".properties` is not an object".into()),
    };
    for (p, s) in &props {
        let Value::Object(s) = s else {
            return Err(format!(".properties.{p}` is not a schema (an object)"));
        };
        let ok = match s.get("type") {
            None => true,
            Some(Value::String(t)) => SCHEMA_TYPES.contains(&t.as_str()),
            Some(Value::Array(ts)) => ts
                .iter()
                .all(|t| t.as_str().is_some_and(|t| SCHEMA_TYPES.contains(&t))),
            Some(_) => false,
        };
        if !ok {
            return Err(format!(
                ".properties.{p}.type` is {}, not a JSON Schema type ({})",
                s["type"],
                SCHEMA_TYPES.join(", ")
            ));
        }
    }
    match string_list(o.get("required")) {
        None => Err(".required` is not a list of names".into()),
        Some(r) => match r.iter().find(|n| !props.contains_key(*n)) {
            Some(n) => Err(format!(
                ".required` names {n}, which is not among its properties"
            )),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: args.into(),
            ..ToolCall::default()
        }
    }

    fn bfcl(q: &str, a: &str, rule: Rule) -> Entry {
        parse_bfcl((Path::new("q.json"), q), (Path::new("a.json"), a), rule)
            .unwrap()
            .remove(0)
    }

    /// BFCL's simple_python_0, graded by hand: base and height required, unit optional ("" in
    /// its values), strings compared in normal form.
    #[test]
    fn bfcl_simple_answers_graded_by_hand() {
        let e = bfcl(
            r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "Find the area of a triangle with a base of 10 units and height of 5 units."}]], "function": [{"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given its base and height.", "parameters": {"type": "dict", "properties": {"base": {"type": "integer", "description": "The base of the triangle."}, "height": {"type": "integer", "description": "The height of the triangle."}, "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"}}, "required": ["base", "height"]}}]}"#,
            r#"{"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]}"#,
            Rule::Simple,
        );
        assert_eq!(e.case.tools[0]["function"]["parameters"]["type"], "object");
        let g = |name: &str, args: &str| grade(&e.case, &[call(name, args)]).verdict;
        assert_eq!(
            g("calculate_triangle_area", r#"{"base": 10, "height": 5}"#),
            Verdict::Correct
        );
        assert_eq!(
            g(
                "calculate_triangle_area",
                r#"{"base": 10, "height": 5, "unit": "Units"}"#
            ),
            Verdict::Correct
        );
        assert_eq!(
            g(
                "calculate_triangle_area",
                r#"{"base": 10, "height": 5, "unit": "cm"}"#
            ),
            Verdict::WrongArguments
        );
        // 10.0 is a float where an integer is asked.
        assert_eq!(
            g("calculate_triangle_area", r#"{"base": 10.0, "height": 5}"#),
            Verdict::WrongArguments
        );
        assert_eq!(
            g("calculate_triangle_area", r#"{"base": 10}"#),
            Verdict::WrongArguments
        );
        assert_eq!(
            g(
                "calculate_triangle_area",
                r#"{"base": 10, "height": 5, "colour": "red"}"#
            ),
            Verdict::WrongArguments
        );
        assert_eq!(
            g("triangle_area", r#"{"base": 10, "height": 5}"#),
            Verdict::WrongName
        );
        assert_eq!(
            g("calculate_triangle_area", r#"{"base": 10, "hei"#),
            Verdict::Unparsable
        );
        assert_eq!(grade(&e.case, &[]).verdict, Verdict::NoCall);
        let one = call("calculate_triangle_area", r#"{"base": 10, "height": 5}"#);
        let two = [one.clone(), one];
        assert_eq!(grade(&e.case, &two).verdict, Verdict::WrongCount);
    }

    /// A float parameter takes an integer; a dotted name is sent and expected with underscores.
    #[test]
    fn bfcl_floats_take_integers_and_dots_become_underscores() {
        let e = bfcl(
            r#"{"id": "x", "question": [[{"role": "user", "content": "q"}]], "function": [{"name": "math.hypot", "parameters": {"type": "dict", "properties": {"x": {"type": "float"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["x"]}}]}"#,
            r#"{"id": "x", "ground_truth": [{"math.hypot": {"x": [4.0], "tags": [["New York", "LA"], ""]}}]}"#,
            Rule::Simple,
        );
        assert_eq!(e.case.tools[0]["function"]["name"], "math_hypot");
        assert_eq!(
            e.case.tools[0]["function"]["parameters"]["properties"]["x"]["type"],
            "number"
        );
        let g = |args: &str| grade(&e.case, &[call("math_hypot", args)]).verdict;
        assert_eq!(g(r#"{"x": 4}"#), Verdict::Correct);
        assert_eq!(
            g(r#"{"x": 4.0, "tags": ["new york", "L.A."]}"#),
            Verdict::Correct
        );
        assert_eq!(g(r#"{"x": 4.5}"#), Verdict::WrongArguments);
        assert_eq!(
            g(r#"{"x": 4, "tags": ["LA", "New York"]}"#),
            Verdict::WrongArguments
        );
        assert_eq!(
            grade(&e.case, &[call("math.hypot", r#"{"x": 4}"#)]).verdict,
            Verdict::WrongName
        );
    }

    /// BFCL's parallel_0: two calls of one function, in either order.
    #[test]
    fn bfcl_parallel_calls_match_in_any_order() {
        let e = bfcl(
            r#"{"id": "parallel_0", "question": [[{"role": "user", "content": "Play songs from the artists Taylor Swift and Maroon 5, with a play time of 20 minutes and 15 minutes respectively, on Spotify."}]], "function": [{"name": "spotify.play", "description": "Play specific tracks from a given artist for a specific time duration.", "parameters": {"type": "dict", "properties": {"artist": {"type": "string", "description": "The artist whose songs you want to play."}, "duration": {"type": "integer", "description": "The duration for which the songs should be played, in minutes."}}, "required": ["artist", "duration"]}}]}"#,
            r#"{"id": "parallel_0", "ground_truth": [{"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}}, {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}}]}"#,
            Rule::Parallel,
        );
        let a = call("spotify_play", r#"{"artist": "Maroon 5", "duration": 15}"#);
        let b = call(
            "spotify_play",
            r#"{"artist": "taylor swift", "duration": 20}"#,
        );
        assert_eq!(
            grade(&e.case, &[a.clone(), b.clone()]).verdict,
            Verdict::Correct
        );
        assert_eq!(grade(&e.case, &[b.clone(), a]).verdict, Verdict::Correct);
        let c = call("spotify_play", r#"{"artist": "Maroon 5", "duration": 20}"#);
        assert_eq!(
            grade(&e.case, &[b.clone(), c]).verdict,
            Verdict::WrongArguments
        );
        assert_eq!(grade(&e.case, &[b]).verdict, Verdict::WrongCount);
    }

    /// BFCL's dict parameters: keys among the answer's, values among its values.
    #[test]
    fn bfcl_dicts_by_key() {
        let e = bfcl(
            r#"{"id": "d", "question": [[{"role": "user", "content": "q"}]], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {"o": {"type": "dict", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}}, "required": ["o"]}}]}"#,
            r#"{"id": "d", "ground_truth": [{"f": {"o": [{"a": [1, 2], "b": ["x y", ""]}]}}]}"#,
            Rule::Simple,
        );
        let g = |args: &str| grade(&e.case, &[call("f", args)]).verdict;
        assert_eq!(g(r#"{"o": {"a": 2}}"#), Verdict::Correct);
        assert_eq!(g(r#"{"o": {"a": 1, "b": "XY"}}"#), Verdict::Correct);
        assert_eq!(g(r#"{"o": {"a": 3}}"#), Verdict::WrongArguments);
        assert_eq!(g(r#"{"o": {"a": 1, "c": 1}}"#), Verdict::WrongArguments);
        assert_eq!(g(r#"{"o": {"b": "xy"}}"#), Verdict::WrongArguments);
    }

    /// The key each verdict is written under is serde's name for it.
    #[test]
    fn verdict_keys_are_the_serialized_names() {
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.key());
            assert_eq!(Verdict::keyed(v.key()), Some(v));
        }
    }

    #[test]
    fn own_format_is_graded_exactly_in_any_order() {
        let text = r#"{"prompt": "Weather in Paris and Rome?", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}], "expected": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}]}"#;
        let e = parse_own(Path::new("t.jsonl"), text).unwrap().remove(0);
        let p = call("get_weather", r#"{"city": "Paris"}"#);
        let r = call("get_weather", r#"{"days": 2.0, "city": "Rome"}"#);
        assert_eq!(
            grade(&e.case, &[r.clone(), p.clone()]).verdict,
            Verdict::Correct
        );
        let lower = call("get_weather", r#"{"city": "paris"}"#);
        assert_eq!(grade(&e.case, &[r, lower]).verdict, Verdict::WrongArguments);
        assert_eq!(grade(&e.case, &[p]).verdict, Verdict::WrongCount);
    }

    #[test]
    fn bad_tool_files_name_line_and_key() {
        let f = Path::new("t.jsonl");
        let err = |text: &str| parse_own(f, text).unwrap_err();
        let tool = r#"{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}"#;
        let e = err(&format!(
            "\n{{\"prompt\": \"p\", \"tools\": [{tool}], \"expected\": [{{\"name\": \"g\"}}]}}"
        ));
        assert!(
            e.starts_with("t.jsonl:2: `expected[0].name` \"g\" names no tool"),
            "{e}"
        );
        let e = err(
            r#"{"prompt": "p", "tools": [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "int"}}}}], "expected": [{"name": "f"}]}"#,
        );
        assert!(e.contains("t.jsonl:1: `tools[0].parameters.properties.a.type` is \"int\", not a JSON Schema type"), "{e}");
        let e = err(
            r#"{"prompt": "p", "tools": [{"name": "f", "parameters": {"a": 1}}], "expected": [{"name": "f"}]}"#,
        );
        assert!(e.contains("`tools[0].parameters.type` is missing"), "{e}");
        let e = err(
            r#"{"prompt": "p", "tools": [{"name": "f", "parameters": {"type": "object", "required": ["b"]}}], "expected": [{"name": "f"}]}"#,
        );
        assert!(e.contains("`tools[0].parameters.required` names b"), "{e}");
        let e = err(&format!(
            "{{\"prompt\": \"p\", \"tools\": [{tool}], \"expected\": []}}"
        ));
        assert!(e.contains("`expected` is empty"), "{e}");
        let q = r#"{"id": "x", "question": [[{"role": "user", "content": "q"}]], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]}"#;
        let e = parse_bfcl(
            (Path::new("q.json"), q),
            (
                Path::new("a.json"),
                "\n\n{\"id\": \"x\", \"ground_truth\": [{\"g\": {}}]}",
            ),
            Rule::Simple,
        )
        .unwrap_err();
        assert!(
            e.starts_with(
                "a.json:3: `ground_truth[0]` calls g, which no function of q.json:1 defines"
            ),
            "{e}"
        );
        assert!(
            bfcl_rule("irrelevance")
                .unwrap_err()
                .contains("no answer to grade")
        );
        assert!(
            bfcl_rule("multi_turn_base")
                .unwrap_err()
                .contains("several turns")
        );
        assert!(bfcl_rule("simple_java").unwrap_err().contains("Java"));
        assert_eq!(
            bfcl_category(Path::new("d/BFCL_v4_simple_python.json")).as_deref(),
            Some("simple_python")
        );
    }
}
