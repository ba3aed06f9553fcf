//! Prompt datasets: JSONL of `{"prompt" | "messages", "output_tokens"?}` and the ShareGPT
//! conversation format (a JSON array, or JSON lines, of `{"conversations": [{"from", "value"}…]}`).
//!
//! From a ShareGPT conversation the first human turn is the prompt and the answer that follows it
//! gives the output length, as vLLM's and SGLang's benchmark loaders take it. Conversations
//! without that pair (an answer first, a question never answered) are skipped and counted, as
//! those loaders do; anything malformed is an error naming the file and line (or entry).

use std::path::Path;

use serde::Deserialize;

pub use crate::contract::DatasetFormat;

pub use crate::api::Message;

/// One usable dataset entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Prompt text (the messages' contents joined by newlines, for `messages` entries).
    pub prompt: String,
    /// Sent verbatim to a chat endpoint when present.
    pub messages: Option<Vec<Message>>,
    /// Output length the entry asks for: `output_tokens`, or the tokens of ShareGPT's answer.
    pub output_tokens: Option<u32>,
    /// ShareGPT's answer, counted once the tokenizer is known.
    pub answer: Option<String>,
    /// Where it came from (`line 4`, `entry 12`), for messages.
    pub at: String,
    /// The conversation as turns, for sessions (`[workload.sessions]` with a dataset): its
    /// system text, then each user message with the answer the file gives it. Empty: the entry
    /// has no user message.
    pub conversation: Conversation,
    /// The tools it offers and the calls it must make (`bfcl` and `tools` datasets).
    pub tools: Option<std::sync::Arc<crate::quality::tools::ToolCase>>,
}

impl Item {
    /// A tool dataset's entry: its messages sent as they are, its case kept to grade the
    /// answer.
    pub fn of_tools(e: crate::quality::tools::Entry) -> Item {
        let prompt = e
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        Item {
            conversation: Conversation::of(
                e.messages
                    .iter()
                    .map(|m| (m.role.as_str(), m.content.as_str())),
            ),
            prompt,
            messages: Some(e.messages),
            output_tokens: None,
            answer: None,
            at: e.at,
            tools: Some(std::sync::Arc::new(e.case)),
        }
    }
}

/// An entry's conversation, for sessions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// System messages before the first user message, joined.
    pub system: String,
    /// Each user message and the answer that followed it in the file (its length is the
    /// turn's output target).
    pub turns: Vec<(String, Option<String>)>,
}

impl Conversation {
    /// Turns from `(role, text)` pairs: system text before the first user turn, each user
    /// message with the model's reply after it (other roles are left out).
    fn of<'a>(messages: impl Iterator<Item = (&'a str, &'a str)>) -> Conversation {
        let mut c = Conversation::default();
        for (role, text) in messages {
            match role {
                "system" | "developer" if c.turns.is_empty() => {
                    if !c.system.is_empty() {
                        c.system.push('\n');
                    }
                    c.system.push_str(text);
                }
                r if is_human(r) => c.turns.push((text.to_owned(), None)),
                r if is_model(r) => {
                    if let Some(last) = c.turns.last_mut().filter(|t| t.1.is_none()) {
                        last.1 = Some(text.to_owned());
                    }
                }
                _ => {}
            }
        }
        c
    }
}

/// A loaded dataset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dataset {
    pub items: Vec<Item>,
    /// Conversations without a human turn answered by the model.
    pub skipped: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    output_tokens: Option<u32>,
    /// Free-form label, ignored.
    #[serde(default)]
    #[allow(dead_code)]
    id: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ShareGpt {
    #[serde(default)]
    id: Option<serde_json::Value>,
    conversations: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    from: String,
    value: String,
}

/// Guesses a file's format from its first character: `[` opens a ShareGPT array; lines whose
/// first object has `conversations` are ShareGPT lines; anything else is JSONL.
pub fn detect(text: &str) -> DatasetFormat {
    let t = text.trim_start();
    if t.starts_with('[') {
        return DatasetFormat::Sharegpt;
    }
    let first = t.lines().next().unwrap_or("");
    match serde_json::from_str::<serde_json::Value>(first) {
        Ok(v) if v.get("conversations").is_some() => DatasetFormat::Sharegpt,
        Ok(v) if v.get("question").is_some() && v.get("function").is_some() => DatasetFormat::Bfcl,
        Ok(v) if v.get("tools").is_some() && v.get("expected").is_some() => DatasetFormat::Tools,
        _ => DatasetFormat::Jsonl,
    }
}

/// Reads a dataset (see [`parse`]).
#[cfg(test)]
pub fn load(
    path: &Path,
    format: Option<DatasetFormat>,
) -> Result<(Dataset, DatasetFormat), String> {
    parse(path, &super::read(path)?.0, format)
}

/// A ShareGPT file's conversations, each with where it stands (`entry N` of a JSON array, or
/// `line N` of JSON lines).
fn sharegpt_conversations(path: &Path, text: &str) -> Result<Vec<(String, ShareGpt)>, String> {
    let name = path.display();
    let t = text.trim_start();
    let convs: Vec<(String, ShareGpt)> = if t.starts_with('[') {
        let v: Vec<serde_json::Value> = serde_json::from_str(text).map_err(|e| {
            format!(
                "{name}:{}: {e} (expected a JSON array of conversations)",
                e.line()
            )
        })?;
        v.into_iter()
            .enumerate()
            .map(|(i, v)| {
                let at = format!("entry {}", i + 1);
                serde_json::from_value::<ShareGpt>(v)
                    .map(|c| (at.clone(), c))
                    .map_err(|e| format!("{name}: {at}: {e} (expected {{\"conversations\": [{{\"from\", \"value\"}}, …]}})"))
            })
            .collect::<Result<_, _>>()?
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str::<ShareGpt>(l)
                    .map(|c| (format!("line {}", i + 1), c))
                    .map_err(|e| format!("{name}:{}: {e} (expected {{\"conversations\": [{{\"from\", \"value\"}}, …]}})", i + 1))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(convs)
}

/// Parses a dataset's text; `format` `None` detects it. Returns it with the format used.
/// `path` names the file in messages.
pub fn parse(
    path: &Path,
    text: &str,
    format: Option<DatasetFormat>,
) -> Result<(Dataset, DatasetFormat), String> {
    let name = path.display();
    // A UTF-8 byte-order mark (editors on Windows write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = format.unwrap_or_else(|| detect(text));
    if let Some(why) = wrong_shape(text, format) {
        return Err(format!("{name}: {why}"));
    }
    let mut out = Dataset::default();
    match format {
        DatasetFormat::Tools => {
            let entries = crate::quality::tools::parse_own(path, text)?;
            out.items = entries.into_iter().map(Item::of_tools).collect();
        }
        // Its answers are in a file of their own: read with it (`workload::inputs`).
        DatasetFormat::Bfcl => {
            return Err(format!(
                "{name}: BFCL's questions are read with their answers (workload.tools.answers)"
            ));
        }
        DatasetFormat::Jsonl => out.items = jsonl_items(path, text)?,
        DatasetFormat::Sharegpt => {
            let convs = sharegpt_conversations(path, text)?;
            for (at, c) in convs {
                let turns = &c.conversations;
                let q = turns.iter().position(|t| is_human(&t.from));
                let pair = q.and_then(|q| {
                    turns
                        .get(q + 1)
                        .filter(|a| is_model(&a.from))
                        .map(|a| (&turns[q], a))
                });
                match pair {
                    Some((q, a)) if !q.value.trim().is_empty() => out.items.push(Item {
                        prompt: q.value.clone(),
                        messages: None,
                        output_tokens: None,
                        answer: Some(a.value.clone()),
                        at: match &c.id {
                            Some(id) => format!("{at} (id {id})"),
                            None => at,
                        },
                        // A system turn before the first question is the system text; an
                        // answer before it has no question and is left out.
                        conversation: Conversation::of(turns.iter().map(|t| {
                            let role = if is_human(&t.from) {
                                "user"
                            } else {
                                t.from.as_str()
                            };
                            (role, t.value.as_str())
                        })),
                        tools: None,
                    }),
                    _ => out.skipped += 1,
                }
            }
        }
    }
    if out.items.is_empty() {
        return Err(format!(
            "{name}: no usable prompt in the file ({} entries skipped)",
            out.skipped
        ));
    }
    Ok((out, format))
}

/// A JSONL file's entries; each error names the file and line.
fn jsonl_items(path: &Path, text: &str) -> Result<Vec<Item>, String> {
    let name = path.display();
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {}", i + 1);
        let l: Line = serde_json::from_str(line).map_err(|e| {
            format!(
                "{name}:{}: {e} (each line is {{\"prompt\": …}} or {{\"messages\": […]}}, with an optional \"output_tokens\")",
                i + 1
            )
        })?;
        items.push(jsonl_item(l, &at).map_err(|m| format!("{name}:{}: {m}", i + 1))?);
    }
    Ok(items)
}

fn is_human(from: &str) -> bool {
    matches!(from, "human" | "user")
}

fn is_model(from: &str) -> bool {
    matches!(from, "gpt" | "assistant" | "chatgpt" | "bard" | "model")
}

/// The common wrong shapes, recognised before a parser's own message ("missing field
/// `conversations`", "expected value at line 1 column 1") hides what to do.
fn wrong_shape(text: &str, format: DatasetFormat) -> Option<String> {
    let t = text.trim_start();
    let first = t.lines().next().unwrap_or("").trim();
    if t.starts_with('[') {
        // An array of prompt objects, not of conversations.
        let v: serde_json::Value = serde_json::from_str(t).ok()?;
        let e = v.as_array()?.first()?;
        if e.get("conversations").is_none()
            && (e.get("prompt").is_some() || e.get("messages").is_some())
        {
            return Some(
                "a JSON array of prompt objects: goodput reads JSON lines, one object per line ({\"prompt\": …} or {\"messages\": […]}); convert it with `jq -c '.[]' FILE > FILE.jsonl` (a JSON array is read as ShareGPT conversations only)".to_owned(),
            );
        }
        return None;
    }
    if format == DatasetFormat::Jsonl && !first.starts_with('{') && !first.is_empty() {
        let csv = first.contains(',') || first.contains('\t');
        let head: String = first.chars().take(60).collect();
        return Some(if csv {
            format!(
                "line 1 (`{head}`) looks like CSV: goodput reads JSON lines, one object per line such as {{\"prompt\": \"…\", \"output_tokens\": 128}}; convert each row, e.g. python3 -c 'import csv,json,sys; [print(json.dumps(r)) for r in csv.DictReader(open(sys.argv[1]))]' FILE.csv > FILE.jsonl (columns `prompt` and, optionally, `output_tokens`, a number)"
            )
        } else {
            format!(
                "line 1 (`{head}`) is not a JSON object: goodput reads JSON lines ({{\"prompt\": …}} or {{\"messages\": […]}} per line) or ShareGPT conversations"
            )
        });
    }
    None
}

fn jsonl_item(l: Line, at: &str) -> Result<Item, String> {
    let (prompt, messages) = match (l.prompt, l.messages) {
        (Some(p), None) if !p.trim().is_empty() => (p, None),
        (Some(_), None) => return Err("`prompt` is empty".into()),
        (None, Some(m)) if !m.is_empty() => {
            if let Some(bad) = m.iter().find(|m| {
                !matches!(
                    m.role.as_str(),
                    "system" | "user" | "assistant" | "developer" | "tool"
                )
            }) {
                return Err(format!("`messages`: unknown role `{}`", bad.role));
            }
            (
                m.iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                Some(m),
            )
        }
        (None, Some(_)) => return Err("`messages` is empty".into()),
        (Some(_), Some(_)) => return Err("set `prompt` or `messages`, not both".into()),
        (None, None) => return Err("missing `prompt` (or `messages`)".into()),
    };
    if let Some(n) = l.output_tokens
        && !(1..=super::MAX_TOKENS).contains(&n)
    {
        return Err(format!(
            "`output_tokens` = {n}: must be from 1 to {}",
            super::MAX_TOKENS
        ));
    }
    let conversation = match &messages {
        Some(m) => Conversation::of(m.iter().map(|m| (m.role.as_str(), m.content.as_str()))),
        None => Conversation {
            system: String::new(),
            turns: vec![(prompt.clone(), None)],
        },
    };
    Ok(Item {
        prompt,
        messages,
        output_tokens: l.output_tokens,
        answer: None,
        at: at.to_owned(),
        conversation,
        tools: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn the_shipped_sharegpt_sample_loads_and_skips_what_vllm_skips() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/sharegpt-sample.json");
        let (d, f) = load(&p, None).unwrap();
        assert_eq!(f, DatasetFormat::Sharegpt);
        assert_eq!((d.items.len(), d.skipped), (20, 2));
        assert!(d.items[0].prompt.starts_with("How do I keep bread"));
        assert!(
            d.items
                .iter()
                .all(|i| i.answer.as_deref().is_some_and(|a| !a.is_empty()))
        );
    }

    #[test]
    fn jsonl_prompts_and_messages() {
        let (_d, p) = write(concat!(
            "{\"prompt\": \"Say hi\", \"output_tokens\": 12}\n\n",
            "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Why?\"}]}\n",
        ));
        let (d, f) = load(&p, None).unwrap();
        assert_eq!(f, DatasetFormat::Jsonl);
        assert_eq!(d.items[0].output_tokens, Some(12));
        assert_eq!(d.items[1].prompt, "Be brief.\nWhy?");
        assert_eq!(d.items[1].at, "line 3");
    }

    #[test]
    fn the_common_wrong_shapes_say_what_to_do() {
        let (_d, p) = write("[{\"prompt\": \"hi\"}, {\"prompt\": \"yo\"}]");
        let e = load(&p, None).unwrap_err();
        assert!(
            e.contains("JSON array of prompt objects") && e.contains("jq -c"),
            "{e}"
        );
        let (_d, p) = write("prompt,output_tokens\nhello,12\n");
        let e = load(&p, None).unwrap_err();
        assert!(
            e.contains("looks like CSV") && e.contains("DictReader"),
            "{e}"
        );
        let (_d, p) = write("hello there\n");
        let e = load(&p, None).unwrap_err();
        assert!(e.contains("is not a JSON object"), "{e}");
        // A byte-order mark before valid JSON lines is no wrong shape.
        let (_d, p) = write("\u{feff}{\"prompt\": \"hi\"}\n");
        assert_eq!(load(&p, None).unwrap().0.items[0].prompt, "hi");
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        for (text, want) in [
            ("{\"prompt\": \"a\"}\nnot json\n", "d.jsonl:2:"),
            (
                "{\"prompt\": \"a\"}\n{\"output_tokens\": 3}\n",
                "d.jsonl:2: missing `prompt`",
            ),
            (
                "{\"prompt\": \"a\", \"promt\": 1}\n",
                "d.jsonl:1: unknown field `promt`",
            ),
            ("{\"prompt\": \" \"}\n", "d.jsonl:1: `prompt` is empty"),
            (
                "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n",
                "unknown role `robot`",
            ),
        ] {
            let (_d, p) = write(text);
            let e = load(&p, None).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        let (_d, p) = write("[{\"conversations\": [{\"from\": \"human\"}]}]");
        let e = load(&p, None).unwrap_err();
        assert!(e.contains("entry 1") && e.contains("value"), "{e}");
        let (_d, p) = write("[{\"conversations\": [{\"from\": \"gpt\", \"value\": \"hi\"}]}]");
        assert!(load(&p, None).unwrap_err().contains("no usable prompt"));
    }
}
