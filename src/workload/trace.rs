//! Arrival traces: rows of (timestamp, input tokens, output tokens), replayed as an open-loop
//! arrival process at their own timing or time-scaled.
//!
//! Read as CSV with a header (the `csv` crate) or as JSON lines. Column names follow the public
//! production traces: Azure LLM inference traces (`TIMESTAMP,ContextTokens,GeneratedTokens`,
//! timestamps as `2023-11-16 18:15:46.6805900`) and BurstGPT (`Timestamp`, `Request tokens`,
//! `Response tokens`, timestamps in seconds), besides plain `timestamp,input_tokens,output_tokens`.
//! Names match without regard to case. Rows must be in time order: a trace out of order is an
//! error naming its line, not something quietly sorted.
//!
//! Mooncake-format traces (JSON lines of `timestamp`, `input_length`, `output_length`,
//! `hash_ids`, as FAST'25 Mooncake published them and vLLM, SGLang, GuideLLM and AIPerf replay
//! them) carry their prefix structure: `hash_ids` names each block of `load.trace_block_tokens`
//! prompt tokens (512 in Mooncake's traces), and two requests share a prefix exactly where
//! their `hash_ids` begin alike. Their timestamps are milliseconds, as in Mooncake's files: a
//! trace whose first row has `hash_ids` is read so.

use std::path::Path;

/// One trace row, as an offset from the trace's first row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Seconds after the first row (before any speed-up).
    pub offset_s: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// The prompt's blocks, by content (Mooncake's `hash_ids`); empty in other traces.
    pub hash_ids: Vec<u64>,
}

const TIME: [&str; 5] = ["timestamp", "time", "arrival_time", "ts", "arrived_at"];
const INPUT: [&str; 6] = [
    "input_tokens",
    "input_length",
    "contexttokens",
    "request tokens",
    "prompt_tokens",
    "input",
];
const OUTPUT: [&str; 6] = [
    "output_tokens",
    "output_length",
    "generatedtokens",
    "response tokens",
    "completion_tokens",
    "output",
];

fn column(header: &[String], names: &[&str]) -> Option<usize> {
    header
        .iter()
        .position(|h| names.contains(&h.trim().to_ascii_lowercase().as_str()))
}

/// Seconds since an arbitrary origin: a number of seconds, or a civil date-time.
fn seconds(v: &str) -> Result<f64, String> {
    let v = v.trim().trim_matches('"');
    if let Ok(x) = v.parse::<f64>() {
        return if x.is_finite() {
            Ok(x)
        } else {
            Err(format!("timestamp `{v}` is not finite"))
        };
    }
    let dt: jiff::civil::DateTime = v.replacen(' ', "T", 1).parse().map_err(|_| {
        format!("timestamp `{v}` is neither seconds nor a date-time like 2023-11-16 18:15:46.68")
    })?;
    let z = dt
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map_err(|e| format!("timestamp `{v}`: {e}"))?;
    Ok(z.timestamp().as_nanosecond() as f64 / 1e9)
}

fn tokens(v: &str, what: &str) -> Result<u32, String> {
    let v = v.trim();
    let n: f64 = v
        .parse()
        .map_err(|_| format!("{what} `{v}` is not a number"))?;
    if !(n.is_finite() && n >= 1.0 && n.fract() == 0.0) {
        return Err(format!(
            "{what} `{v}` must be a whole number >= 1 (BurstGPT marks failed requests with 0 response tokens: filter them out)"
        ));
    }
    if n > f64::from(super::MAX_TOKENS) {
        return Err(format!(
            "{what} `{v}` is more than {} tokens",
            super::MAX_TOKENS
        ));
    }
    Ok(n as u32)
}

/// Reads a trace (see [`parse`]).
#[cfg(test)]
pub fn load(path: &Path) -> Result<Vec<Row>, String> {
    parse(path, &super::read(path)?.0)
}

/// The longest trace replayed: a year. Offsets are scheduled in whole microseconds on a
/// 64-bit clock, which a far larger gap (1e15 s) would overflow.
pub const MAX_SPAN_S: f64 = 366.0 * 86_400.0;

/// A trace row as read: its line, arrival time (in the file's unit), input and output tokens,
/// and its Mooncake block ids.
type RawRow = (usize, f64, u32, u32, Vec<u64>);

/// The rows of a JSON-lines trace, and its time unit in seconds: milliseconds in a Mooncake
/// trace (its first row has hash_ids), seconds elsewhere.
fn json_rows(path: &Path, text: &str) -> Result<(Vec<RawRow>, f64), String> {
    let name = path.display();
    let mut raw: Vec<RawRow> = Vec::new();
    let mut unit = 1.0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |m: String| format!("{name}:{}: {m}", i + 1);
        let v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let keys: Vec<String> = v.keys().cloned().collect();
        let get = |names: &[&str], what: &str| {
            column(&keys, names)
                .map(|k| match &v[&keys[k]] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .ok_or_else(|| at(format!("missing `{}` ({what})", names[0])))
        };
        let hash_ids = match v.get("hash_ids") {
            None => Vec::new(),
            Some(h) => hash_ids(h).map_err(at)?,
        };
        if raw.is_empty() && v.contains_key("hash_ids") {
            unit = 1e-3;
        } else if (unit != 1.0) != v.contains_key("hash_ids") {
            return Err(at(
                "`hash_ids` must be on every row or on none (a Mooncake trace has them on every row)"
                    .into(),
            ));
        }
        raw.push((
            i + 1,
            seconds(&get(&TIME, "arrival time")?).map_err(at)?,
            tokens(&get(&INPUT, "prompt length")?, "input tokens").map_err(at)?,
            tokens(&get(&OUTPUT, "output length")?, "output tokens").map_err(at)?,
            hash_ids,
        ));
    }
    Ok((raw, unit))
}

/// The rows of a CSV trace, its columns named in its header.
fn csv_rows(path: &Path, text: &str) -> Result<Vec<RawRow>, String> {
    let name = path.display();
    let mut raw: Vec<RawRow> = Vec::new();
    let mut r = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header: Vec<String> = r
        .headers()
        .map_err(|e| format!("{name}:1: {e}"))?
        .iter()
        .map(str::to_owned)
        .collect();
    let need = |names: &[&str], what: &str| {
        column(&header, names).ok_or_else(|| {
            format!(
                "{name}:1: no {what} column (expected one of: {}; found: {})",
                names.join(", "),
                header.join(", ")
            )
        })
    };
    let (t, i_col, o_col) = (
        need(&TIME, "timestamp")?,
        need(&INPUT, "input-token")?,
        need(&OUTPUT, "output-token")?,
    );
    for rec in r.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            format!("{name}:{line}: {e}")
        })?;
        let line = rec.position().map_or(0, |p| p.line() as usize);
        let at = |m: String| format!("{name}:{line}: {m}");
        let field = |k: usize| rec.get(k).unwrap_or("");
        raw.push((
            line,
            seconds(field(t)).map_err(at)?,
            tokens(field(i_col), "input tokens").map_err(at)?,
            tokens(field(o_col), "output tokens").map_err(at)?,
            Vec::new(),
        ));
    }
    Ok(raw)
}

/// Parses a trace's text; every error names the file (`path`) and line. Returns the rows,
/// offsets from the first.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Row>, String> {
    let name = path.display();
    let (raw, unit) = if text.trim_start().starts_with('{') {
        json_rows(path, text)?
    } else {
        (csv_rows(path, text)?, 1.0)
    };
    let Some(&(_, first, _, _, _)) = raw.first() else {
        return Err(format!("{name}: the trace has no rows"));
    };
    let first = first * unit;
    let mut prev = first;
    let mut rows = Vec::with_capacity(raw.len());
    for (line, t, i, o, hash_ids) in raw {
        let t = t * unit;
        if t < prev {
            return Err(format!(
                "{name}:{line}: timestamp goes back in time ({:.6} s before the previous row); a trace must be in arrival order",
                prev - t
            ));
        }
        prev = t;
        if t - first > MAX_SPAN_S {
            return Err(format!(
                "{name}:{line}: {:.0} s after the first row; a trace may span at most a year ({MAX_SPAN_S} s)",
                t - first
            ));
        }
        rows.push(Row {
            offset_s: t - first,
            input_tokens: i,
            output_tokens: o,
            hash_ids,
        });
    }
    Ok(rows)
}

/// A row's `hash_ids`: a list of whole numbers, at least one.
fn hash_ids(v: &serde_json::Value) -> Result<Vec<u64>, String> {
    let bad =
        || "`hash_ids` must be a list of whole numbers >= 0 (the prompt's block ids)".to_owned();
    let list = v.as_array().ok_or_else(bad)?;
    if list.is_empty() {
        return Err("`hash_ids` is empty: every prompt has at least one block".into());
    }
    list.iter().map(|x| x.as_u64().ok_or_else(bad)).collect()
}

/// Every row's expected prefix-cache hit, in blocks: the longest run of its leading
/// `hash_ids` that an earlier row's began with (a block is reusable only behind the same
/// blocks, as prefix caches chain them).
pub fn shared_blocks(rows: &[Row]) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    rows.iter()
        .map(|r| {
            let mut chain = 0x5eed_u64;
            let mut shared = 0;
            let mut prefix_known = true;
            for &h in &r.hash_ids {
                chain = crate::text::mix2(chain, h);
                if prefix_known && seen.contains(&chain) {
                    shared += 1;
                } else {
                    prefix_known = false;
                }
                seen.insert(chain);
            }
            shared
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gap_beyond_a_year_is_refused_not_overflowed() {
        let e = super::parse(
            std::path::Path::new("t.csv"),
            "timestamp,input_tokens,output_tokens\n0,10,10\n1e15,10,10\n",
        )
        .unwrap_err();
        assert!(e.contains("t.csv:3") && e.contains("at most a year"), "{e}");
    }

    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn azure_burstgpt_and_jsonl_shapes_load() {
        let (_d, p) = write(
            "azure.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.1805900,396,109\n",
        );
        let rows = load(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert!((rows[1].offset_s - 0.5).abs() < 1e-6, "{rows:?}");
        assert_eq!((rows[1].input_tokens, rows[1].output_tokens), (396, 109));
        let (_d, p) = write(
            "burst.csv",
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n45.25,ChatGPT,1087,123,1210,Conversation log\n",
        );
        let rows = load(&p).unwrap();
        assert_eq!(rows[1].offset_s, 40.25);
        let (_d, p) = write(
            "t.jsonl",
            "{\"timestamp\": 1.5, \"input_tokens\": 10, \"output_tokens\": 3}\n{\"timestamp\": 2.0, \"input_tokens\": 12, \"output_tokens\": 4}\n",
        );
        assert_eq!(load(&p).unwrap()[1].offset_s, 0.5);
    }

    #[test]
    fn bad_traces_name_file_and_line() {
        for (name, text, want) in [
            (
                "a.csv",
                "timestamp,input_tokens,output_tokens\n1,5,5\n0.5,5,5\n",
                "a.csv:3: timestamp goes back",
            ),
            (
                "b.csv",
                "when,input_tokens,output_tokens\n1,5,5\n",
                "b.csv:1: no timestamp column",
            ),
            (
                "c.csv",
                "timestamp,input_tokens,output_tokens\n1,5,0\n",
                "c.csv:2: output tokens `0`",
            ),
            (
                "d.csv",
                "timestamp,input_tokens,output_tokens\nsoon,5,5\n",
                "d.csv:2: timestamp `soon`",
            ),
            (
                "e.jsonl",
                "{\"timestamp\": 1, \"input_tokens\": 5}\n",
                "e.jsonl:1: missing `output_tokens`",
            ),
            ("f.csv", "timestamp,input_tokens,output_tokens\n", "no rows"),
        ] {
            let (_d, p) = write(name, text);
            let e = load(&p).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
