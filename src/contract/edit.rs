//! Edits to a contract's *text*, made before it is parsed: `sweep --vary`, `run --set` and the
//! run shorthands (`--url`, `--rate`, …). Every other line, comment and key is left as it was,
//! so the edited text parses with the same file, line and key in its errors, and the bundle's
//! resolved contract (and so every fingerprint) holds what was actually run.

/// How a value is written into the TOML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// A TOML value when it parses as one (`4`, `0.5`, `true`, `"500ms"`, `{ dist = … }`),
    /// else a string (`500ms`, `http://…`).
    Toml,
    /// Always a string (a URL or model name that happens to read as a number or boolean).
    Str,
}

/// One change to a contract's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    Set { key: String, value: String, as_: As },
    Unset { key: String },
}

impl Edit {
    fn set(key: &str, value: impl Into<String>, as_: As) -> Edit {
        Edit::Set {
            key: key.to_owned(),
            value: value.into(),
            as_,
        }
    }

    fn unset(key: &str) -> Edit {
        Edit::Unset {
            key: key.to_owned(),
        }
    }

    /// `KEY=VALUE`, as `--set` takes it.
    pub fn parse_set(arg: &str) -> Result<Edit, String> {
        match arg.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok(Edit::set(k.trim(), v.trim(), As::Toml)),
            _ => Err(format!(
                "--set `{arg}`: expected KEY=VALUE with a dotted contract key, e.g. load.rate=5 or slo.ttft_ms=300"
            )),
        }
    }
}

/// The edits a run shorthand stands for. `--rate` makes the load open and `--concurrency`
/// closed, dropping the other model's keys; `--requests` and `--duration` replace each other.
pub fn shorthand(name: &str, value: &str) -> Vec<Edit> {
    match name {
        "url" => vec![Edit::set("target.url", value, As::Str)],
        "model" => vec![Edit::set("target.model", value, As::Str)],
        "rate" => vec![
            Edit::unset("load.model"),
            Edit::set("load.kind", "open", As::Str),
            Edit::set("load.rate", value, As::Toml),
            Edit::unset("load.concurrency"),
            Edit::unset("load.think_time"),
        ],
        "concurrency" => vec![
            Edit::unset("load.model"),
            Edit::set("load.kind", "closed", As::Str),
            Edit::set("load.concurrency", value, As::Toml),
            Edit::unset("load.rate"),
            Edit::unset("load.arrival"),
            Edit::unset("load.burstiness"),
            Edit::unset("load.max_in_flight"),
        ],
        "requests" => vec![
            Edit::set("load.requests", value, As::Toml),
            Edit::unset("load.duration"),
        ],
        "duration" => vec![
            Edit::set("load.duration", value, As::Str),
            Edit::unset("load.requests"),
        ],
        "shard" => vec![Edit::set("load.shard", value, As::Str)],
        "start-at" => vec![Edit::set("load.start_at", value, As::Str)],
        _ => Vec::new(),
    }
}

/// The text with every edit applied in order.
pub fn apply(src: &str, edits: &[Edit]) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = src.parse().map_err(|e| format!("{e}"))?;
    for e in edits {
        match e {
            Edit::Set { key, value, as_ } => {
                let v = match as_ {
                    As::Toml => value
                        .parse()
                        .unwrap_or_else(|_| toml_edit::Value::from(value.as_str())),
                    As::Str => toml_edit::Value::from(value.as_str()),
                };
                let (table, last) = table_for(&mut doc, key, true)?;
                table.insert(last, toml_edit::Item::Value(v));
            }
            Edit::Unset { key } => {
                if let Ok((table, last)) = table_for(&mut doc, key, false) {
                    table.remove(last);
                }
            }
        }
    }
    Ok(doc.to_string())
}

/// The contract text with `key` set to `value` (a TOML value, else a string; tables created
/// as needed).
pub fn set_key(src: &str, key: &str, value: &str) -> Result<String, String> {
    apply(src, &[Edit::set(key, value, As::Toml)])
}

/// The table that holds `key`'s last part, creating the tables on the way when `create`.
fn table_for<'d, 'k>(
    doc: &'d mut toml_edit::DocumentMut,
    key: &'k str,
    create: bool,
) -> Result<(&'d mut dyn toml_edit::TableLike, &'k str), String> {
    let parts: Vec<&str> = key.split('.').collect();
    let (last, tables) = parts.split_last().ok_or("empty key")?;
    let mut item = doc.as_item_mut();
    for part in tables {
        let table = item
            .as_table_like_mut()
            .ok_or_else(|| format!("`{key}`: `{part}` is inside a value, not a table"))?;
        if table.get(part).is_none() {
            if !create {
                return Err(format!("`{key}`: no table `{part}`"));
            }
            table.insert(part, toml_edit::table());
        }
        item = table.get_mut(part).ok_or("unreachable")?;
    }
    let table = item
        .as_table_like_mut()
        .ok_or_else(|| format!("`{key}` does not name a field inside a table"))?;
    Ok((table, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "# mine\n[load]\nmodel = \"open\"   # how\nrate = 20\narrival = \"gamma\"\nburstiness = 0.5\nduration = \"60s\"\n";

    #[test]
    fn shorthands_switch_the_load_model_and_keep_every_other_line() {
        let out = apply(SRC, &shorthand("concurrency", "8")).unwrap();
        assert!(out.starts_with("# mine\n[load]\n"), "{out}");
        assert!(out.contains("kind = \"closed\"") && out.contains("concurrency = 8"));
        assert!(!out.contains("model ="), "the old key goes: {out}");
        for gone in ["rate", "arrival", "burstiness"] {
            assert!(!out.contains(&format!("{gone} =")), "{gone}: {out}");
        }
        let out = apply(&out, &shorthand("requests", "100")).unwrap();
        assert!(
            out.contains("requests = 100") && !out.contains("duration"),
            "{out}"
        );
        let out = apply(SRC, &shorthand("rate", "5")).unwrap();
        assert!(
            out.contains("rate = 5") && out.contains("arrival = \"gamma\""),
            "{out}"
        );
        // A model name that reads as a number stays a string.
        let out = apply("", &shorthand("model", "1e3")).unwrap();
        assert!(out.contains("model = \"1e3\""), "{out}");
    }

    #[test]
    fn set_parses_toml_values_and_falls_back_to_strings() {
        let e = Edit::parse_set("slo.ttft_ms=300").unwrap();
        let out = apply("", &[e]).unwrap();
        assert!(
            out.contains("[slo]") && out.contains("ttft_ms = 300"),
            "{out}"
        );
        let out = apply("", &[Edit::parse_set("target.timeout=90s").unwrap()]).unwrap();
        assert!(out.contains("timeout = \"90s\""), "{out}");
        assert!(Edit::parse_set("=3").is_err() && Edit::parse_set("nokey").is_err());
        assert!(set_key("rate = 1\n", "rate.x", "2").is_err());
    }
}
