//! `goodput import`: another benchmark's command line as a goodput contract. Every flag is
//! mapped, or annotated with what differs (its definition, its unit, its load model) and what
//! goodput does instead, or refused when the tool's stated version has no such flag. The
//! contract says on each line where its value came from.
//!
//! One module per tool, each with the tool's own flag set at a stated version, read from its
//! source: `vllm_bench` (`vllm bench serve`, vLLM 0.32.0), `guidellm` (`guidellm benchmark`,
//! GuideLLM 0.6.1) and `aiperf` (`aiperf profile`, AIPerf 0.13.0). `flags` reads a command
//! line against such a table.

pub mod aiperf;
mod flags;
pub mod guidellm;
pub mod vllm_bench;

use std::fmt::Write as _;

/// A contract drafted from a command line, and what the import has to say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The contract's text: TOML, every value commented with the flag it came from, every
    /// break with what differs.
    pub contract: String,
    /// The breaks (flags that map only approximately or not at all), one sentence each: the
    /// import prints them.
    pub breaks: Vec<String>,
}

/// A refused command line; the message names the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ImportError(pub String);

/// A value in the contract: TOML text, and the flag (or default) it came from.
#[derive(Debug, Clone, PartialEq)]
struct Value {
    key: &'static str,
    toml: String,
    from: String,
}

/// The contract being drafted: its sections in order, each with its values; the header
/// comment; the breaks.
#[derive(Debug, Default)]
struct Draft {
    tool: String,
    sections: Vec<(&'static str, Vec<Value>)>,
    breaks: Vec<String>,
    /// Credentials the command carried: masked wherever the contract or a note would repeat
    /// them (the echoed command line, a value's origin).
    secrets: Vec<String>,
}

impl Draft {
    fn new(tool: &str) -> Draft {
        Draft {
            tool: tool.to_owned(),
            ..Default::default()
        }
    }

    /// A draft for `tool`'s command, its contract named `name`.
    fn named(tool: &str, name: &str) -> Draft {
        let mut d = Draft::new(tool);
        d.str("", "name", name, "goodput's name for the imported command");
        d
    }

    /// Sets `key` in `[section]` (a later set replaces an earlier one).
    fn set(
        &mut self,
        section: &'static str,
        key: &'static str,
        toml: String,
        from: impl Into<String>,
    ) {
        let v = Value {
            key,
            toml,
            from: from.into(),
        };
        match self.sections.iter_mut().find(|(s, _)| *s == section) {
            Some((_, values)) => match values.iter_mut().find(|x| x.key == key) {
                Some(x) => *x = v,
                None => values.push(v),
            },
            None => self.sections.push((section, vec![v])),
        }
    }

    fn str(&mut self, section: &'static str, key: &'static str, s: &str, from: impl Into<String>) {
        self.set(section, key, toml_string(s), from);
    }

    /// A flag that maps only approximately, or not at all: what differs, what goodput does.
    fn annotate(&mut self, s: impl Into<String>) {
        self.breaks.push(s.into());
    }

    /// The contract, checked by goodput's own parser: an import never hands over a contract
    /// that `goodput run` would refuse.
    fn finish(self, command: &str) -> Result<Imported, ImportError> {
        let imported = self.render(command);
        crate::contract::parse(&imported.contract, std::path::Path::new("imported.toml"))
            .map_err(|e| ImportError(format!("the imported contract does not validate: {e:#}")))?;
        Ok(imported)
    }

    /// A credential the command carried, never to be written.
    fn secret(&mut self, s: &str) {
        if !s.is_empty() {
            self.secrets.push(s.to_owned());
        }
    }

    /// An API key the command carried: goodput reads keys from the environment only, so the
    /// contract names the variable and the key itself is not written.
    fn api_key(&mut self, from: &str) {
        self.str(
            "target",
            "api_key_env",
            "OPENAI_API_KEY",
            format!("{from} (the key itself is not written: export it as OPENAI_API_KEY)"),
        );
    }

    /// Fields a command adds to every request body: sampling settings become
    /// `[workload.sampling]`, the rest `target.request.extra_body`.
    fn body(&mut self, body: &serde_json::Map<String, serde_json::Value>, from: &str) {
        let mut rest = serde_json::Map::new();
        for (k, v) in body {
            match (k.as_str(), v) {
                ("temperature" | "top_p" | "top_k", serde_json::Value::Number(n)) => {
                    let key = match k.as_str() {
                        "temperature" => "temperature",
                        "top_p" => "top_p",
                        _ => "top_k",
                    };
                    self.set("workload.sampling", key, n.to_string(), from.to_owned());
                }
                ("ignore_eos", serde_json::Value::Bool(b)) => self.set(
                    "workload",
                    "enforce_output_length",
                    b.to_string(),
                    format!("{from} (ignore_eos)"),
                ),
                _ => {
                    rest.insert(k.clone(), v.clone());
                }
            }
        }
        if !rest.is_empty() {
            match toml::Value::try_from(&rest) {
                Ok(t) => self.set(
                    "target.request",
                    "extra_body",
                    t.to_string(),
                    from.to_owned(),
                ),
                Err(_) => self.annotate(format!(
                    "{from}: fields TOML cannot hold (a null) are not sent"
                )),
            }
        }
    }

    fn render(self, command: &str) -> Imported {
        let mut out = String::new();
        let _ = writeln!(out, "# Imported by `goodput import` from {}:", self.tool);
        let _ = writeln!(out, "#   {command}");
        let _ = writeln!(
            out,
            "# Each value says the flag it came from (or the tool's default)."
        );
        if !self.breaks.is_empty() {
            let _ = writeln!(out, "#\n# Where the two tools differ:");
            for b in &self.breaks {
                for (k, line) in wrap(b, 92).iter().enumerate() {
                    let _ = writeln!(out, "# {} {line}", if k == 0 { "-" } else { " " });
                }
            }
        }
        for (section, values) in &self.sections {
            let _ = writeln!(out);
            if !section.is_empty() {
                let _ = writeln!(out, "[{section}]");
            }
            for v in values {
                let _ = writeln!(out, "{} = {}  # {}", v.key, v.toml, v.from);
            }
        }
        let mask = |s: &str| {
            self.secrets
                .iter()
                .fold(s.to_owned(), |s, secret| s.replace(secret.as_str(), "***"))
        };
        Imported {
            contract: mask(&out),
            breaks: self.breaks.iter().map(|b| mask(b)).collect(),
        }
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Words wrapped at `width` characters.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in s.split_whitespace() {
        let last = lines.last_mut().map_or(0, |l| l.len());
        if last > 0 && last + 1 + w.len() > width {
            lines.push(String::new());
        }
        if let Some(l) = lines.last_mut() {
            if !l.is_empty() {
                l.push(' ');
            }
            l.push_str(w);
        }
    }
    lines
}

/// A command line as the shell would show it (arguments with spaces quoted).
fn shown(args: &[String]) -> String {
    args.iter()
        .map(|a| match a.contains(char::is_whitespace) || a.is_empty() {
            true => format!("'{a}'"),
            false => a.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The tool a command line is for, by its first words, when it is one goodput knows.
fn other_tool(args: &[String]) -> Option<&'static str> {
    let first = args.first()?.rsplit('/').next()?.to_ascii_lowercase();
    match first.as_str() {
        "guidellm" => Some("guidellm"),
        "aiperf" | "genai-perf" => Some("aiperf"),
        "inference-perf" => Some("inference-perf"),
        "vllm" => Some("vllm-bench"),
        _ => None,
    }
}

/// A token length as GuideLLM and AIPerf draw one: normal around `mean` when a standard
/// deviation is given (clamped to `min`/`max`), uniform over `min`..`max` when only they are,
/// else fixed.
fn spread(mean: f64, stdev: Option<f64>, min: Option<f64>, max: Option<f64>) -> String {
    match (stdev.filter(|s| *s > 0.0), min, max) {
        (Some(sd), lo, hi) => {
            let mut s = format!("{{ dist = \"normal\", mean = {mean}, stddev = {sd}");
            if let Some(lo) = lo {
                s.push_str(&format!(", min = {lo}"));
            }
            if let Some(hi) = hi {
                s.push_str(&format!(", max = {hi}"));
            }
            s + " }"
        }
        (None, None, None) => format!("{{ dist = \"fixed\", value = {mean} }}"),
        (None, lo, hi) => {
            let (lo, hi) = (lo.unwrap_or(mean), hi.unwrap_or(mean));
            match lo == hi {
                true => format!("{{ dist = \"fixed\", value = {lo} }}"),
                false => format!("{{ dist = \"uniform\", min = {lo}, max = {hi} }}"),
            }
        }
    }
}
