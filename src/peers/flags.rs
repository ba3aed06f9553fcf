//! A command line read against a tool's own flag set at a stated version: long flags
//! (`--flag value`, `--flag=value`), the tool's short and alias spellings, switches, values
//! that repeat or run on, and the tool's own rules (argparse reads underscores as dashes;
//! cyclopts accepts `--no-` before a switch). Hand-written rather than clap because the flag
//! sets are data (tables taken from each tool's source) and a refusal must name the flag in the
//! tool's terms, not goodput's.

use super::ImportError;

/// How a flag takes its value, and what value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Takes {
    /// A switch.
    Nothing,
    Int,
    Float,
    Text,
    /// Every word up to the next flag (`nargs='*'`/`'+'`, a cyclopts list).
    Many,
    /// One value per use, the uses collected (click's `multiple=True`).
    Repeat,
}

/// A tool's flag set at one version.
pub(super) struct Spec {
    /// The tool as the messages name it ("vllm bench serve").
    pub tool: &'static str,
    /// The version whose flags these are.
    pub version: &'static str,
    /// Every flag by its canonical long name (no dashes).
    pub flags: &'static [(&'static str, Takes)],
    /// Other spellings: a long name without dashes, or a short flag with its one dash ("-m"),
    /// and the canonical name it stands for.
    pub aliases: &'static [(&'static str, &'static str)],
    /// Flags of other versions, and what became of them.
    pub gone: &'static [(&'static str, &'static str)],
    /// argparse's rule: `--random_input_len` is `--random-input-len`.
    pub underscores: bool,
    /// cyclopts' rule: `--no-streaming` turns the switch `--streaming` off.
    pub negatable: bool,
    /// A list flag given twice keeps both lists (cyclopts), else the later one (argparse).
    pub lists_accumulate: bool,
}

/// One flag as given: its canonical name and values (a negated switch: the value "false").
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Given {
    pub name: String,
    /// The flag as the command spelled it (`--isl`, `-m`), for the contract's comments.
    pub shown: String,
    pub values: Vec<String>,
}

impl Spec {
    fn takes(&self, name: &str) -> Option<(&'static str, Takes)> {
        let canonical = self
            .aliases
            .iter()
            .find(|(a, _)| *a == name)
            .map_or(name, |(_, c)| *c);
        self.flags
            .iter()
            .find(|(n, _)| *n == canonical)
            .map(|&(n, t)| (n, t))
    }

    /// Whether a word is a flag of this tool (so not a value).
    fn is_flag(&self, w: &str) -> bool {
        w.starts_with("--") || (w.len() == 2 && w.starts_with('-') && self.takes(w).is_some())
    }

    fn unknown(&self, shown: &str, name: &str) -> ImportError {
        match self.gone.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => ImportError(format!(
                "`{shown}`: not a flag of {} {}: {why}",
                self.tool, self.version
            )),
            None => ImportError(format!(
                "`{shown}`: not a flag of {} {} (a flag of another version, or a typo?)",
                self.tool, self.version
            )),
        }
    }

    /// The values of a flag (the words after it, or its `=value`), checked against its type;
    /// `i` moves past the words taken.
    fn values(
        &self,
        args: &[String],
        i: &mut usize,
        shown: &str,
        takes: Takes,
        inline: Option<String>,
        negated: bool,
    ) -> Result<Vec<String>, ImportError> {
        let err = |s: String| Err(ImportError(s));
        let values = match (takes, inline) {
            (Takes::Nothing, Some(v)) => {
                return err(format!(
                    "`{shown}={v}`: {shown} is a switch and takes no value"
                ));
            }
            (Takes::Nothing, None) if negated => vec!["false".to_owned()],
            (Takes::Nothing, None) => Vec::new(),
            (Takes::Many, None) => {
                let mut v = Vec::new();
                while *i < args.len() && !self.is_flag(&args[*i]) {
                    v.push(args[*i].clone());
                    *i += 1;
                }
                v
            }
            (_, Some(v)) => vec![v],
            (_, None) => match args.get(*i) {
                Some(v) if !self.is_flag(v) || v.parse::<f64>().is_ok() => {
                    *i += 1;
                    vec![v.clone()]
                }
                _ => return err(format!("`{shown}` needs a value")),
            },
        };
        let ok = values.first().is_none_or(|v| match takes {
            Takes::Int => v.parse::<i64>().is_ok(),
            Takes::Float => v.parse::<f64>().is_ok_and(|x| !x.is_nan()),
            _ => true,
        });
        if !ok {
            let what = match takes {
                Takes::Int => "an integer",
                _ => "a number",
            };
            return err(format!("`{shown} {}`: not {what}", values[0]));
        }
        Ok(values)
    }

    /// The flags of a command line, checked against the flag set and its value types.
    /// The flags of a command line, named in messages as `tool`; a help request is refused.
    pub fn read(&self, args: &[String], tool: &'static str) -> Result<Flags, ImportError> {
        let given = self.parse(args)?;
        let f = Flags {
            read: std::cell::RefCell::new(vec![false; given.len()]),
            given,
            tool,
        };
        if f.has("help") {
            return Err(ImportError(
                "`--help`: a help request, not a benchmark".into(),
            ));
        }
        Ok(f)
    }

    pub fn parse(&self, args: &[String]) -> Result<Vec<Given>, ImportError> {
        let err = |s: String| Err(ImportError(s));
        let mut out: Vec<Given> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let tok = &args[i];
            i += 1;
            let (word, inline) = match tok.split_once('=') {
                Some((n, v)) if tok.starts_with("--") => (n, Some(v.to_owned())),
                _ => (tok.as_str(), None),
            };
            let raw = match word.strip_prefix("--") {
                Some(long) if self.underscores => long.replace('_', "-"),
                Some(long) => long.to_owned(),
                None if self.is_flag(word) => word.to_owned(),
                None => {
                    return err(format!(
                        "`{tok}`: {} takes no positional arguments (every value follows its flag)",
                        self.tool
                    ));
                }
            };
            let shown = if raw.starts_with('-') {
                raw.clone()
            } else {
                format!("--{raw}")
            };
            let (name, takes, negated) = match self.takes(&raw) {
                Some((n, t)) => (n, t, false),
                None => match raw.strip_prefix("no-").and_then(|r| self.takes(r)) {
                    Some((n, Takes::Nothing)) if self.negatable => (n, Takes::Nothing, true),
                    _ => return Err(self.unknown(&shown, &raw)),
                },
            };
            let values = self.values(args, &mut i, &shown, takes, inline, negated)?;
            let accumulate =
                takes == Takes::Repeat || (takes == Takes::Many && self.lists_accumulate);
            match out.iter_mut().find(|g| g.name == name) {
                Some(g) if accumulate => g.values.extend(values),
                Some(g) => g.values = values,
                None => out.push(Given {
                    name: name.to_owned(),
                    shown: shown.clone(),
                    values,
                }),
            }
        }
        Ok(out)
    }
}

/// The flags of a command line, looked up by canonical name.
pub(super) struct Flags {
    pub given: Vec<Given>,
    /// The tool's name, for "the tool's default" comments.
    pub tool: &'static str,
    /// Which of `given` an importer has looked at.
    read: std::cell::RefCell<Vec<bool>>,
}

impl Flags {
    pub fn get(&self, name: &str) -> Option<&Given> {
        let i = self.given.iter().position(|g| g.name == name)?;
        if let Some(r) = self.read.borrow_mut().get_mut(i) {
            *r = true;
        }
        self.given.get(i)
    }
    /// The flags given that no importer looked at, as given: each is "not mapped".
    pub fn unread(&self) -> Vec<&Given> {
        let read = self.read.borrow();
        self.given
            .iter()
            .zip(read.iter())
            .filter(|(_, r)| !**r)
            .map(|(g, _)| g)
            .collect()
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    /// A switch given (and not negated).
    pub fn on(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|g| g.values.first().map(String::as_str) != Some("false"))
    }
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name)?.values.first().map(String::as_str)
    }
    pub fn num(&self, name: &str) -> Option<f64> {
        self.text(name)?.trim().parse().ok()
    }
    /// The flag's value, or the tool's default, and where it came from.
    pub fn or(&self, name: &str, default: f64) -> (f64, String) {
        match self.num(name) {
            Some(v) => (v, self.from(name)),
            None => (
                default,
                format!("{}'s default --{name} {default}", self.tool),
            ),
        }
    }
    /// Where a value came from: the flag as given, or the tool's default.
    pub fn from(&self, name: &str) -> String {
        match self.get(name) {
            Some(g) if g.values.is_empty() => g.shown.clone(),
            Some(g) => format!("{} {}", g.shown, g.values.join(" ")),
            None => format!("{}'s default --{name}", self.tool),
        }
    }
}
