//! `goodput import`: another benchmark's command line as a goodput contract. Every flag is
//! mapped, or annotated with what differs (its definition, its unit, its load model) and what
//! goodput does instead, or refused when the tool's stated version has no such flag. The
//! contract says on each line where its value came from.
//!
//! One module per tool, each with the tool's own flag set at a stated version, read from its
//! source: `vllm_bench` (`vllm bench serve`, vLLM 0.32.0), `guidellm` (`guidellm benchmark`,
//! GuideLLM 0.6.1) and `aiperf` (`aiperf profile`, AIPerf 0.13.0). `flags` reads a command
//! line against such a table.

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
    /// The keys the contract sets, dotted (`target.url`): the flags' mapping, and nothing a
    /// value's text could add (the property test holds the contract's keys to these).
    pub keys: Vec<String>,
    /// The goodput command that runs it, when it is not `goodput run FILE` (`FILE` stands for
    /// the contract's path): a parameter sweep's `goodput tune FILE --setting …`.
    pub next: Option<String>,
}

/// A refused command line; the message names the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ImportError(pub String);

/// A value in the contract: TOML text, and the flag (or default) it came from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Value {
    key: &'static str,
    toml: String,
    from: String,
}

/// The contract being drafted: its sections in order, each with its values; the header
/// comment; the breaks.
#[derive(Debug, Default)]
pub(super) struct Draft {
    tool: String,
    sections: Vec<(&'static str, Vec<Value>)>,
    breaks: Vec<String>,
    /// Credentials the command carried: masked wherever the contract or a note would repeat
    /// them (the echoed command line, a value's origin).
    secrets: Vec<String>,
    /// Headers every request carries (`[target.request] headers`): name, what is written
    /// for it, and the flag it came from.
    headers: Vec<(String, Header, String)>,
}

/// What the contract holds for a header: its value, or the environment variable that holds a
/// credential's.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Header {
    Value(String),
    Env(String),
}

impl Draft {
    pub(super) fn new(tool: &str) -> Draft {
        Draft {
            tool: tool.to_owned(),
            ..Default::default()
        }
    }

    /// A draft for `tool`'s command, its contract named `name`.
    pub(super) fn named(tool: &str, name: &str) -> Draft {
        let mut d = Draft::new(tool);
        d.str("", "name", name, "goodput's name for the imported command");
        d
    }

    /// Removes `key` from `[section]` (a value a later mapping makes meaningless).
    pub(super) fn unset(&mut self, section: &'static str, key: &'static str) {
        if let Some((_, values)) = self.sections.iter_mut().find(|(s, _)| *s == section) {
            values.retain(|v| v.key != key);
        }
    }

    /// Sets `key` in `[section]` (a later set replaces an earlier one).
    pub(super) fn set(
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

    pub(super) fn str(
        &mut self,
        section: &'static str,
        key: &'static str,
        s: &str,
        from: impl Into<String>,
    ) {
        self.set(section, key, toml_string(s), from);
    }

    /// A flag that maps only approximately, or not at all: what differs, what goodput does.
    pub(super) fn annotate(&mut self, s: impl Into<String>) {
        self.breaks.push(s.into());
    }

    /// The contract, checked by goodput's own parser: an import never hands over a contract
    /// that `goodput run` would refuse.
    pub(super) fn finish(mut self, command: &str) -> Result<Imported, ImportError> {
        self.set_headers();
        let imported = self.render(command)?;
        crate::contract::parse(&imported.contract, std::path::Path::new("imported.toml"))
            .map_err(|e| ImportError(format!("the imported contract does not validate: {e:#}")))?;
        Ok(imported)
    }

    /// A credential the command carried, never to be written.
    pub(super) fn secret(&mut self, s: &str) {
        if !s.is_empty() {
            self.secrets.push(s.to_owned());
        }
    }

    /// The target's URL, from `from`. A user and password in it are a credential: the URL is
    /// written without them, and the request's `Authorization` header comes from a variable
    /// the user sets (`Basic` of them).
    pub(super) fn url(&mut self, url: &str, from: String) {
        let Ok(mut parsed) = reqwest::Url::parse(url) else {
            return self.str("target", "url", url, from);
        };
        if parsed.username().is_empty() && parsed.password().is_none() {
            return self.str("target", "url", url, from);
        }
        let userinfo = match parsed.password() {
            Some(p) => format!("{}:{p}", parsed.username()),
            None => parsed.username().to_owned(),
        };
        self.secret(&userinfo);
        if let Some(p) = parsed.password() {
            self.secret(p);
        }
        // As typed, too: the parsed URL percent-encodes what it must (`"` is `%22`), and the
        // command line echoed in comments holds the characters themselves.
        let typed = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
            .and_then(|authority| authority.rsplit_once('@'))
            .map(|(info, _)| info.to_owned());
        if let Some(info) = typed {
            if let Some((_, p)) = info.split_once(':') {
                self.secret(p);
            }
            self.secret(&info);
        }
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        let bare = parsed.as_str().trim_end_matches('/').to_owned();
        self.str("target", "url", &bare, from.clone());
        let var = "TARGET_AUTHORIZATION";
        self.headers.push((
            "Authorization".to_owned(),
            Header::Env(var.to_owned()),
            from,
        ));
        self.annotate(format!(
            "the URL's user and password are not written: export {var}='Basic <base64 of user:password>' (sent as the Authorization header, to the target only)"
        ));
    }

    /// A header every request carries, from `from`. A credential (`Authorization`, a key, a
    /// cookie, a token) is never written: the contract reads it from an environment variable
    /// named after it, and the note says which to set. Headers goodput sets itself are not
    /// sent.
    pub(super) fn header(&mut self, name: &str, value: &str, from: &str) {
        let lower = name.to_ascii_lowercase();
        if ["x-request-id", "traceparent"].contains(&lower.as_str()) {
            self.annotate(format!("{from} {name}: goodput sets it itself (to join its records with the server's), so it is not sent"));
            return;
        }
        if crate::secrets::is_credential_header(name) {
            self.secret(value);
            let var = env_var_for(name);
            self.annotate(format!(
                "{from} {name}: a credential is not written into the contract; it is read from ${var} (export {var}='<the value>')"
            ));
            self.headers
                .push((name.to_owned(), Header::Env(var), from.to_owned()));
            return;
        }
        self.headers.push((
            name.to_owned(),
            Header::Value(value.to_owned()),
            from.to_owned(),
        ));
    }

    /// `[target.request] headers`, from every header gathered, as one inline table the TOML
    /// library writes (names quoted as it must).
    pub(super) fn set_headers(&mut self) {
        if self.headers.is_empty() {
            return;
        }
        let keyed = self
            .sections
            .iter()
            .any(|(s, v)| *s == "target" && v.iter().any(|x| x.key == "api_key_env"));
        let mut table = toml_edit::InlineTable::new();
        let mut from: Vec<String> = Vec::new();
        for (name, h, f) in std::mem::take(&mut self.headers) {
            // The API key is sent as the Authorization header: one credential per request.
            if keyed && name.eq_ignore_ascii_case("authorization") {
                self.annotate(format!(
                    "{f}: Authorization is the API key's (target.api_key_env), so this one is not sent"
                ));
                continue;
            }
            let v: toml_edit::Value = match h {
                Header::Value(v) => v.into(),
                Header::Env(var) => {
                    let mut t = toml_edit::InlineTable::new();
                    t.insert("env", var.into());
                    t.into()
                }
            };
            table.insert(&name, v);
            if !from.contains(&f) {
                from.push(f);
            }
        }
        if table.is_empty() {
            return;
        }
        self.set(
            "target.request",
            "headers",
            table.to_string(),
            from.join("; "),
        );
    }

    /// An API key the command carried: goodput reads keys from the environment only, so the
    /// contract names the variable and the key itself is not written.
    pub(super) fn api_key(&mut self, from: &str) {
        self.str(
            "target",
            "api_key_env",
            "OPENAI_API_KEY",
            format!("{from} (the key itself is not written: export it as OPENAI_API_KEY)"),
        );
    }

    /// Fields a command adds to every request body: sampling settings become
    /// `[workload.sampling]`, the rest `target.request.extra_body`.
    pub(super) fn body(&mut self, body: &serde_json::Map<String, serde_json::Value>, from: &str) {
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

    /// The contract's text. No text from outside becomes structure: every value is one TOML
    /// value (parsed and written again by the TOML library, else the import is refused), keys
    /// and sections are the draft's own, and every comment is one line (`text::one_line`: a
    /// control character, a newline above all, is written as an escape, and a note says so).
    /// Credentials are masked (`***`) wherever the command line or a note would repeat them.
    pub(super) fn render(mut self, command: &str) -> Result<Imported, ImportError> {
        let secrets = std::mem::take(&mut self.secrets);
        let mask = |s: &str| {
            secrets
                .iter()
                .fold(s.to_owned(), |s, secret| s.replace(secret.as_str(), "***"))
        };
        let escaped = std::cell::Cell::new(false);
        let line = |s: &str| {
            let masked = mask(s);
            let (t, e) = crate::text::one_line(&masked);
            escaped.set(escaped.get() | e);
            t.into_owned()
        };
        let mut body = String::new();
        let mut keys = Vec::new();
        for (section, values) in &self.sections {
            let _ = writeln!(body);
            if !section.is_empty() {
                let _ = writeln!(body, "[{section}]");
            }
            for v in values {
                let value = one_value(&v.toml).ok_or_else(|| {
                    ImportError(format!(
                        "{}: `{}` is not one TOML value; nothing was written",
                        line(&v.from),
                        line(&v.toml)
                    ))
                })?;
                let _ = writeln!(body, "{} = {}  # {}", v.key, mask(&value), line(&v.from));
                keys.push(match section.is_empty() {
                    true => v.key.to_owned(),
                    false => format!("{section}.{}", v.key),
                });
            }
        }
        let command = line(command);
        let mut breaks: Vec<String> = self.breaks.iter().map(|b| line(b)).collect();
        if escaped.get() {
            breaks.push("the command line holds control characters (newlines, tabs or others): this file's comments show them escaped (\\n, \\t), as a comment cannot hold one and stay a comment".to_owned());
        }
        let mut out = String::new();
        let _ = writeln!(out, "# Imported by `goodput import` from {}:", self.tool);
        let _ = writeln!(out, "#   {command}");
        let _ = writeln!(
            out,
            "# Each value says the flag it came from (or the tool's default)."
        );
        if !breaks.is_empty() {
            let _ = writeln!(out, "#\n# Where the two tools differ:");
            for b in &breaks {
                for (k, l) in wrap(b, 92).iter().enumerate() {
                    let _ = writeln!(out, "# {} {l}", if k == 0 { "-" } else { " " });
                }
            }
        }
        out.push_str(&body);
        Ok(Imported {
            contract: out,
            breaks,
            keys,
            next: None,
        })
    }
}

/// `text` as one TOML value, written again by the TOML library; `None` when it is not exactly
/// one value (a newline and a key after it, a second value).
pub(super) fn one_value(text: &str) -> Option<String> {
    let mut v: toml_edit::Value = text.parse().ok()?;
    v.decor_mut().clear();
    let out = v.to_string();
    // Written on one line: a multi-line string or array would be a value still, but the
    // comment after it must stay on the value's own last line.
    (!out.contains('\n')).then_some(out)
}

/// The environment variable a credential header is read from: its name in capitals, every
/// other character an underscore (`X-Api-Key` → `X_API_KEY`).
pub(super) fn env_var_for(header: &str) -> String {
    let v: String = header
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    match v.chars().next() {
        Some(c) if c.is_ascii_alphabetic() => v,
        _ => format!("H_{v}"),
    }
}

/// A TOML basic string.
pub(super) fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Words wrapped at `width` characters.
pub(super) fn wrap(s: &str, width: usize) -> Vec<String> {
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

/// A command line as the shell would show it (arguments with spaces quoted), every credential
/// in it masked (`masked`): the contract echoes it.
pub(super) fn shown(args: &[String]) -> String {
    let mut after_secret_flag = false;
    args.iter()
        .map(|a| {
            let a = match after_secret_flag {
                true => "***".to_owned(),
                false => masked(a),
            };
            after_secret_flag = credential_flag(&a);
            match a.contains(char::is_whitespace) || a.is_empty() {
                true => format!("'{a}'"),
                false => a,
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A flag that takes a credential as its value (`--api-key`, `--hf-token`, `--password`).
pub(super) fn credential_flag(arg: &str) -> bool {
    let Some(name) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
        return false;
    };
    !name.contains('=') && crate::secrets::is_credential_name(name)
}

/// One argument with its credentials masked: a URL's user and password, the value of
/// `NAME=VALUE` or `NAME:VALUE` under a credential's name (and of `--flag=VALUE`), and in
/// JSON, every value under a credential's key.
pub(super) fn masked(arg: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(arg)
        && v.is_object()
    {
        mask_json(&mut v);
        return v.to_string();
    }
    if let Some(flag) = arg.strip_prefix("--")
        && let Some((name, _)) = flag.split_once('=')
        && crate::secrets::is_credential_name(name)
    {
        return format!("--{name}=***");
    }
    if let Ok(mut u) = reqwest::Url::parse(arg)
        && (!u.username().is_empty() || u.password().is_some())
    {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
        return u.to_string().trim_end_matches('/').to_owned();
    }
    for sep in ['=', ':'] {
        if let Some((name, _)) = arg.split_once(sep)
            && !name.is_empty()
            && !name.contains("//")
            && crate::secrets::is_credential_name(name.trim())
        {
            return format!("{name}{sep}***");
        }
    }
    arg.to_owned()
}

pub(super) fn mask_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match crate::secrets::is_credential_name(k) && !x.is_object() {
                    true => *x = "***".into(),
                    false => mask_json(x),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(mask_json),
        _ => {}
    }
}

/// The tool a command line is for, by its first words, when it is one goodput knows.
pub(super) fn other_tool(args: &[String]) -> Option<&'static str> {
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
pub(super) fn spread(mean: f64, stdev: Option<f64>, min: Option<f64>, max: Option<f64>) -> String {
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

/// The dotted keys a contract's text sets (`target.url`).
pub fn keys_of(text: &str) -> std::collections::BTreeSet<String> {
    pub(super) fn walk(
        t: &toml_edit::Table,
        at: &str,
        out: &mut std::collections::BTreeSet<String>,
    ) {
        for (k, item) in t.iter() {
            let path = match at.is_empty() {
                true => k.to_owned(),
                false => format!("{at}.{k}"),
            };
            match item {
                toml_edit::Item::Table(t) => walk(t, &path, out),
                _ => {
                    out.insert(path);
                }
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    if let Ok(doc) = text.parse::<toml_edit::DocumentMut>() {
        walk(doc.as_table(), "", &mut out);
    }
    out
}

/// What every import must hold (the property test's and the fuzz target's check): the
/// contract's keys are exactly those its flags map to, it parses as a contract, and it
/// launches nothing.
pub fn check_imported(imp: &Imported) -> Result<(), String> {
    let want: std::collections::BTreeSet<String> = imp.keys.iter().cloned().collect();
    let got = keys_of(&imp.contract);
    if got != want {
        return Err(format!("keys {got:?}, mapped {want:?}\n{}", imp.contract));
    }
    let c = crate::contract::parse(&imp.contract, std::path::Path::new("i.toml"))
        .map_err(|e| format!("{e}\n{}", imp.contract))?;
    if c.cold_start.is_some() {
        return Err(format!("a cold_start launch\n{}", imp.contract));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// The keys a contract's text sets, dotted, tables walked and values not (an inline table
    /// is one value).
    fn import(tool: usize, args: &[String]) -> Result<super::Imported, super::ImportError> {
        match tool {
            0 => crate::peers::vllm_bench::import(args),
            1 => crate::peers::guidellm::import(args),
            _ => crate::peers::aiperf::import(args),
        }
    }

    /// Flags of each tool that take text, and what every command needs to import at all.
    const TEXT_FLAGS: [(&[&str], &[&str]); 3] = [
        (
            &[
                "--model",
                "--base-url",
                "--label",
                "--header",
                "--served-model-name",
                "--extra-body",
                "--endpoint",
                "--metadata",
                "--backend",
                "--host",
            ],
            &[
                "vllm",
                "bench",
                "serve",
                "--request-rate",
                "4",
                "--num-prompts",
                "5",
            ],
        ),
        (
            &[
                "--model",
                "--target",
                "--backend-kwargs",
                "--processor",
                "--data",
                "--output-path",
            ],
            &[
                "guidellm",
                "benchmark",
                "--target",
                "http://127.0.0.1:8000",
                "--profile",
                "poisson",
                "--rate",
                "4",
                "--max-requests",
                "5",
                "--data",
                "prompt_tokens=8,output_tokens=4",
            ],
        ),
        (
            &[
                "-m",
                "--url",
                "--header",
                "--extra-inputs",
                "--endpoint",
                "--api-key",
            ],
            &[
                "aiperf",
                "profile",
                "--request-rate",
                "4",
                "--request-count",
                "5",
            ],
        ),
    ];

    /// What an argument may try to smuggle in after a line end.
    const INJECTED: [&str; 7] = [
        "",
        "cold_start = { launch = [\"sh\", \"-c\", \"id > PWNED\"] }",
        "[cold_start]\nlaunch = [\"sh\"]",
        "description = \"x\"",
        "[slo]\nttft_ms = 1",
        "seed = 99",
        "\"quoted\" = ']'",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Issue #70: no text from outside becomes structure. Any command line, its values of
        /// any bytes (newlines, quotes, `]`, `=`, `#`), imports to a contract whose keys are
        /// exactly those its flags map to, or to a refusal.
        #[test]
        fn any_command_line_imports_to_its_own_keys_or_is_refused(
            tool in 0usize..3,
            picks in proptest::collection::vec(
                (
                    0usize..10,
                    "[a-z][a-z0-9\"'\\[\\]=#{}:/@\\\\ .,-]{0,20}",
                    "[a-z0-9\n\r\t\"'\\[\\]=#{}:/@\\\\ .,-]{0,40}",
                    0usize..INJECTED.len(),
                    0usize..3,
                ),
                0..4,
            ),
        ) {
            let (flags, base) = TEXT_FLAGS[tool];
            let mut args: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
            for (f, text, bytes, k, how) in picks {
                args.push(flags[f % flags.len()].to_owned());
                // Any bytes, or text and then, after a line end, TOML that would be live: a
                // key goodput reads, a table, the launch of a command.
                let nl = ["\n", "\r\n", "\r"][how];
                args.push(match k {
                    0 => bytes,
                    _ => format!("{text}{nl}{}{nl}#", INJECTED[k]),
                });
            }
            let imported = import(tool, &args);
            // The command before the picks imports: what the picks add is what is tested.
            prop_assert!(import(tool, &args[..base.len()]).is_ok());
            if let Ok(imp) = imported {
                let want: std::collections::BTreeSet<String> = imp.keys.iter().cloned().collect();
                prop_assert_eq!(super::keys_of(&imp.contract), want, "{}", imp.contract);
                let c = crate::contract::parse(&imp.contract, std::path::Path::new("i.toml"));
                prop_assert!(c.is_ok(), "{:?}\n{}", c.err(), imp.contract);
                prop_assert!(c.unwrap().cold_start.is_none());
            }
        }
    }

    /// The issue's command: a newline in `--label` made the rest of it a live launch command.
    #[test]
    fn a_newline_in_an_argument_stays_in_its_comment() {
        let args: Vec<String> = [
            "vllm",
            "bench",
            "serve",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:18402",
            "--request-rate",
            "4",
            "--num-prompts",
            "5",
            "--label",
            "x\ncold_start = { launch = [\"sh\",\"-c\",\"id > PWNED\"] }\n#",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let imp = crate::peers::vllm_bench::import(&args).unwrap();
        let c = crate::contract::parse(&imp.contract, std::path::Path::new("i.toml")).unwrap();
        assert!(c.cold_start.is_none(), "{}", imp.contract);
        assert!(
            imp.contract.lines().all(|l| !l.starts_with("cold_start")),
            "{}",
            imp.contract
        );
        assert!(
            imp.contract.contains("--label 'x\\ncold_start"),
            "{}",
            imp.contract
        );
        assert!(imp.breaks.iter().any(|b| b.contains("control characters")));
    }

    /// Issue #70: credentials are references, never values: a URL's password, a credential
    /// header, a key in the kwargs; the echoed command masks them.
    #[test]
    fn credentials_become_environment_references_and_are_masked_where_echoed() {
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let cases = [
            (
                0,
                v(&[
                    "vllm",
                    "bench",
                    "serve",
                    "--model",
                    "m",
                    "--base-url",
                    "http://user:PASSw0rd@127.0.0.1:8000",
                    "--request-rate",
                    "4",
                    "--header",
                    "X-Api-Key=sk-12345678",
                ]),
                vec!["PASSw0rd", "sk-12345678"],
                vec!["TARGET_AUTHORIZATION", "X_API_KEY"],
            ),
            (
                1,
                v(&[
                    "guidellm",
                    "benchmark",
                    "--target",
                    "http://127.0.0.1:8000",
                    "--profile",
                    "poisson",
                    "--rate",
                    "4",
                    "--max-requests",
                    "5",
                    "--data",
                    "prompt_tokens=8,output_tokens=4",
                    "--backend-kwargs",
                    r#"{"api_key":"sk-ABCDEFGH","extras":{"headers":{"Authorization":"Bearer sk-QWERTYUI","Cookie":"s=ZXCVBNMA"}}}"#,
                ]),
                vec!["sk-ABCDEFGH", "sk-QWERTYUI", "ZXCVBNMA"],
                vec!["OPENAI_API_KEY", "AUTHORIZATION", "COOKIE"],
            ),
            (
                2,
                v(&[
                    "aiperf",
                    "profile",
                    "--url",
                    "http://u:Secret99@localhost:8000",
                    "--request-rate",
                    "4",
                    "--header",
                    "Cookie:sid=LKJHGFDS",
                    "--api-key",
                    "sk-POIUYTRE",
                ]),
                vec!["Secret99", "sid=LKJHGFDS", "LKJHGFDS", "sk-POIUYTRE"],
                vec!["TARGET_AUTHORIZATION", "COOKIE", "OPENAI_API_KEY"],
            ),
        ];
        for (tool, args, secrets, vars) in cases {
            let imp = import(tool, &args).unwrap();
            for s in &secrets {
                assert!(!imp.contract.contains(s), "{s} written:\n{}", imp.contract);
                assert!(
                    imp.breaks.iter().all(|b| !b.contains(s)),
                    "{s}: {:?}",
                    imp.breaks
                );
            }
            for var in &vars {
                assert!(imp.contract.contains(var), "{var}:\n{}", imp.contract);
            }
            let c = crate::contract::parse(&imp.contract, std::path::Path::new("i.toml")).unwrap();
            assert!(
                c.target.url.as_deref().is_some_and(|u| !u.contains('@')),
                "{:?}",
                c.target.url
            );
        }
    }
}
