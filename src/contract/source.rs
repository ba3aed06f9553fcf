//! Maps TOML keys and byte offsets back to lines, so every contract error names file, line and key.

/// 1-based line of a byte offset.
pub fn line_of_offset(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].matches('\n').count() + 1
}

/// Whether the text sets the dotted key path itself (a default does not count).
pub fn has_key(src: &str, path: &str) -> bool {
    let Ok(doc) = src.parse::<toml::Table>() else {
        return false;
    };
    let mut parts = path.split('.');
    let Some(first) = parts.next() else {
        return false;
    };
    let mut at = doc.get(first);
    for p in parts {
        at = at.and_then(|v| v.get(p));
    }
    at.is_some()
}

/// 1-based line of the value at a dotted key path (`load.rate`, `workload.input_tokens.min`),
/// or of the nearest enclosing table that exists.
pub fn line_of_key(src: &str, path: &str) -> Option<usize> {
    let doc = toml_edit::Document::parse(src).ok()?;
    let mut best: Option<std::ops::Range<usize>> = None;
    let mut item: Option<&toml_edit::Item> = None;
    let mut value: Option<&toml_edit::Value> = None;
    let mut table: Option<&toml_edit::Table> = None;
    for (i, part) in path.split('.').enumerate() {
        // `class[1]`: the second table of the array of tables `[[class]]`.
        let (part, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let next_item = if i == 0 {
            doc.as_table().get(part)
        } else if let Some(it) = item {
            match it {
                toml_edit::Item::Table(t) => t.get(part),
                toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => {
                    value = t.get(part);
                    item = None;
                    if let Some(v) = value {
                        best = v.span().or(best);
                    }
                    continue;
                }
                _ => None,
            }
        } else if let Some(toml_edit::Value::InlineTable(t)) = value {
            value = t.get(part);
            if let Some(v) = value {
                best = v.span().or(best);
            }
            continue;
        } else {
            None
        };
        let next_item = match (next_item, index) {
            (Some(toml_edit::Item::ArrayOfTables(a)), Some(k)) => match a.get(k) {
                Some(t) => {
                    best = t.span().or(best);
                    item = None;
                    value = None;
                    table = Some(t);
                    continue;
                }
                None => break,
            },
            (it, _) => it,
        };
        let next_item = match (next_item, table.take()) {
            (None, Some(t)) => t.get(part),
            (it, _) => it,
        };
        match next_item {
            Some(it) => {
                best = it
                    .span()
                    .or_else(|| it.as_table().and_then(|t| t.span()))
                    .or(best);
                item = Some(it);
            }
            None => break,
        }
    }
    best.map(|r| line_of_offset(src, r.start))
}

/// The `[table]` header in force at a line, for errors that carry only a position.
pub fn table_at_line(src: &str, line: usize) -> Option<String> {
    src.lines()
        .take(line)
        .filter_map(|l| {
            let l = l.trim();
            (l.starts_with('[') && l.ends_with(']')).then(|| l.trim_matches(['[', ']']).to_owned())
        })
        .last()
}

/// The bare key a `key = value` line sets (`price_per_hour` of `price_per_hour = "x"`).
pub fn key_at_line(src: &str, line: usize) -> Option<String> {
    let l = src.lines().nth(line.checked_sub(1)?)?.trim();
    let (k, _) = l.split_once('=')?;
    let k = k.trim().trim_matches('"');
    (!k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
    .then(|| k.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_in_tables_and_inline_tables() {
        let src = "name = \"x\"\n[load]\nmodel = \"open\"\nrate = 3\n\n[workload]\ninput_tokens = { dist = \"uniform\", min = 5, max = 1 }\n";
        assert_eq!(line_of_key(src, "load.rate"), Some(4));
        assert_eq!(line_of_key(src, "workload.input_tokens.min"), Some(7));
        assert_eq!(line_of_key(src, "load.missing"), Some(2));
        assert_eq!(table_at_line(src, 4).as_deref(), Some("load"));
        assert_eq!(key_at_line(src, 4).as_deref(), Some("rate"));
        assert_eq!(key_at_line(src, 2), None);
        let classes = "[slo]\nttft_ms = 1\n[[class]]\nname = \"a\"\nshare = 1\n[[class]]\nname = \"b\"\n\nshare = 2\n[class.slo]\nttft_ms = 3\n";
        assert_eq!(line_of_key(classes, "class[1].share"), Some(9));
        assert_eq!(line_of_key(classes, "class[1].slo.ttft_ms"), Some(11));
        assert_eq!(line_of_key(classes, "class[0].name"), Some(4));
    }
}
