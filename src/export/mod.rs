//! `goodput export`: a bundle's raw records as tables for a notebook or a warehouse. Two
//! tables: `requests` (one row per request: its raw times and counts, and the metrics the
//! summary derives from them, by the same definitions) and `chunks` (one row per streamed chunk:
//! its request, position, arrival and tokens).
//!
//! A seam like the others: a format is one file with a [`Sink`] (a table written batch by
//! batch) and a variant of [`ExportFormat`] with its arm in [`ExportFormat::sink`]. Tables go
//! out in batches of at most [`BATCH`] rows, so a bundle of a million requests (a hundred
//! million chunks) is exported in bounded memory.

mod csv;
mod jsonl;
mod parquet;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::analyze::{record_meets_slo, request_metrics};
use crate::bundle::Loaded;
use crate::record::Record;

/// Rows per batch.
pub const BATCH: usize = 1 << 20;

/// The file formats `goodput export --format` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values with a header row (RFC 4180); empty fields are absent values.
    Csv,
    /// Apache Parquet, one row group per batch, snappy-compressed; absent values are nulls.
    Parquet,
    /// One JSON object per line; absent values are `null`.
    Jsonl,
}

impl ExportFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Parquet => "parquet",
            ExportFormat::Jsonl => "jsonl",
        }
    }

    /// A sink writing a table of `columns` to `path`.
    fn sink(self, path: &Path, columns: &[Spec]) -> anyhow::Result<Box<dyn Sink>> {
        Ok(match self {
            ExportFormat::Csv => Box::new(csv::Csv::create(path, columns)?),
            ExportFormat::Parquet => Box::new(parquet::Parquet::create(path, columns)?),
            ExportFormat::Jsonl => Box::new(
                jsonl::Jsonl::create(path)?
                    .named(&columns.iter().map(|c| c.name).collect::<Vec<_>>()),
            ),
        })
    }
}

/// A table written batch by batch.
trait Sink {
    fn write(&mut self, batch: &[Column]) -> anyhow::Result<()>;
    fn finish(self: Box<Self>) -> anyhow::Result<()>;
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number (64-bit).
    Int,
    /// A real number (64-bit).
    Float,
    /// UTF-8 text.
    Text,
}

/// A column's name, kind and meaning (the meanings are what `columns.md` and `docs/export-columns.md` say).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub kind: Kind,
    pub meaning: &'static str,
}

/// One batch of a column's values; `None` is an absent value.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Unsigned: every integer goodput records is a count, an index or a time since the run
    /// began (a µs time past `i64::MAX` was once written as -1).
    Int(Vec<Option<u64>>),
    Float(Vec<Option<f64>>),
    Text(Vec<Option<String>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Text(v) => v.len(),
        }
    }

    /// Row `i` as JSON (`null` when absent; a real number that is not finite, too).
    fn json(&self, i: usize) -> serde_json::Value {
        match self {
            Column::Int(v) => v[i].map_or(serde_json::Value::Null, Into::into),
            Column::Float(v) => v[i]
                .and_then(serde_json::Number::from_f64)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Column::Text(v) => v[i].clone().map_or(serde_json::Value::Null, Into::into),
        }
    }

    /// Row `i` as CSV text (empty when absent).
    fn text(&self, i: usize) -> String {
        match self {
            Column::Int(v) => v[i].map(|x| x.to_string()).unwrap_or_default(),
            Column::Float(v) => v[i].map(|x| x.to_string()).unwrap_or_default(),
            Column::Text(v) => v[i].clone().unwrap_or_default(),
        }
    }
}

macro_rules! spec {
    ($name:literal, $kind:ident, $meaning:literal) => {
        Spec {
            name: $name,
            kind: Kind::$kind,
            meaning: $meaning,
        }
    };
}

/// The `requests` table's columns, in order.
pub const REQUESTS: &[Spec] = &[
    spec!(
        "index",
        Int,
        "the request's position in the plan (sessions' later turns and probes far above)"
    ),
    spec!(
        "phase",
        Text,
        "cold_start, warmup, steady, drain or quality"
    ),
    spec!(
        "shard",
        Int,
        "the shard that sent it (a merged run), else empty"
    ),
    spec!(
        "url",
        Int,
        "which of target.urls it went to (from 0), with several, else empty"
    ),
    spec!(
        "segment",
        Int,
        "the live demo's load segment it was sent in (environment.json says each), else empty"
    ),
    spec!("class", Text, "its traffic class ([[class]]), else empty"),
    spec!(
        "model",
        Text,
        "the model or adapter name its class asked for instead of the target's, else empty"
    ),
    spec!(
        "session",
        Int,
        "the session it is a turn of (its first turn's index), else empty"
    ),
    spec!("turn", Int, "its turn in the session, from 0"),
    spec!("request_id", Text, "the X-Request-Id it was sent with"),
    spec!(
        "intended_us",
        Int,
        "when the schedule meant to send it, µs on the run's clock (open loop)"
    ),
    spec!(
        "dispatched_us",
        Int,
        "when the dispatcher woke to send it, µs"
    ),
    spec!("sent_us", Int, "when it was sent, µs"),
    spec!(
        "first_token_us",
        Int,
        "when its first generated text arrived, µs"
    ),
    spec!("end_us", Int, "when its answer ended (or failed), µs"),
    spec!(
        "ttft_ms",
        Float,
        "time to first token from the contract's latency origin, ms"
    ),
    spec!(
        "tpot_ms",
        Float,
        "time per output token after the first chunk, ms"
    ),
    spec!("e2e_ms", Float, "end to end from the latency origin, ms"),
    spec!(
        "dispatch_lag_ms",
        Float,
        "actual minus intended send, ms (open loop)"
    ),
    spec!(
        "output_tokens",
        Int,
        "output tokens as the summary counts them (server usage, else the client's count)"
    ),
    spec!(
        "input_tokens_planned",
        Int,
        "prompt tokens as sent, in the workload tokenizer's tokens"
    ),
    spec!(
        "output_tokens_planned",
        Int,
        "the output length asked for (max_tokens)"
    ),
    spec!(
        "usage_prompt_tokens",
        Int,
        "prompt tokens the server reported"
    ),
    spec!(
        "usage_completion_tokens",
        Int,
        "output tokens the server reported"
    ),
    spec!(
        "usage_cached_tokens",
        Int,
        "prompt tokens the server served from its prefix cache"
    ),
    spec!(
        "usage_reasoning_tokens",
        Int,
        "reasoning tokens among the output, as the server reported"
    ),
    spec!(
        "client_output_tokens",
        Int,
        "output tokens the client counted"
    ),
    spec!(
        "chunks",
        Int,
        "streamed chunks that carried text (its rows in the chunks table)"
    ),
    spec!(
        "outcome",
        Text,
        "ok, or the failure's class (timeout, http_status, stream_broken, …)"
    ),
    spec!(
        "http_status",
        Int,
        "the HTTP status, when a response arrived"
    ),
    spec!("error", Text, "what went wrong, in words"),
    spec!(
        "finish_reason",
        Text,
        "the last finish_reason the server sent"
    ),
    spec!(
        "response_model",
        Text,
        "the model that answered, as the server named it"
    ),
    spec!(
        "meets_slo",
        Int,
        "1 when it succeeded and met every SLO threshold, 0 when not; empty without an SLO"
    ),
];

/// The `chunks` table's columns, in order.
pub const CHUNKS: &[Spec] = &[
    spec!("index", Int, "the request's index (the requests table's)"),
    spec!("chunk", Int, "the chunk's position in its answer, from 0"),
    spec!("at_us", Int, "its arrival, µs on the run's clock"),
    spec!("tokens", Int, "output tokens in it"),
    spec!(
        "reasoning",
        Int,
        "1 when it carried reasoning and no answer text"
    ),
];

/// Where `export` wrote: the two tables and the column meanings.
#[derive(Debug)]
pub struct Exported {
    pub requests: PathBuf,
    pub chunks: PathBuf,
    pub columns: PathBuf,
    pub rows: (u64, u64),
}

/// Writes the bundle's tables into `dir`.
pub fn export(b: &Loaded, format: ExportFormat, dir: &Path) -> anyhow::Result<Exported> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ext = format.extension();
    let (rp, cp) = (
        dir.join(format!("requests.{ext}")),
        dir.join(format!("chunks.{ext}")),
    );
    let mut requests = format.sink(&rp, REQUESTS)?;
    for batch in b.records.chunks(BATCH) {
        requests.write(&request_columns(b, batch))?;
    }
    requests.finish()?;
    let mut chunks = format.sink(&cp, CHUNKS)?;
    let mut n_chunks = 0u64;
    let mut rows: [Vec<Option<u64>>; 5] = Default::default();
    for r in &b.records {
        for (k, (at, tokens)) in r.chunks.iter().enumerate() {
            let reasoning = k < r.reasoning_chunks as usize;
            for (col, v) in rows.iter_mut().zip([
                r.index,
                k as u64,
                at,
                u64::from(tokens),
                u64::from(reasoning),
            ]) {
                col.push(Some(v));
            }
            if rows[0].len() == BATCH {
                n_chunks += BATCH as u64;
                chunks.write(&rows.each_mut().map(|c| Column::Int(std::mem::take(c))))?;
            }
        }
    }
    n_chunks += rows[0].len() as u64;
    if !rows[0].is_empty() {
        chunks.write(&rows.map(Column::Int))?;
    }
    chunks.finish()?;
    let columns = dir.join("columns.md");
    std::fs::write(&columns, columns_doc())
        .with_context(|| format!("writing {}", columns.display()))?;
    Ok(Exported {
        requests: rp,
        chunks: cp,
        columns,
        rows: (b.records.len() as u64, n_chunks),
    })
}

/// The column meanings, as Markdown: written beside every export.
pub fn columns_doc() -> String {
    let mut out = String::from(
        "# goodput export: columns\n\nTimes in µs are on the run's own clock (0 = its start; a merged run: the latest shard's start). Absent values are empty (CSV) or null.\n",
    );
    for (name, specs) in [("requests", REQUESTS), ("chunks", CHUNKS)] {
        out += &format!("\n## {name}\n\n| column | type | meaning |\n| --- | --- | --- |\n");
        for s in specs {
            let kind = match s.kind {
                Kind::Int => "unsigned integer",
                Kind::Float => "real",
                Kind::Text => "text",
            };
            out += &format!("| `{}` | {kind} | {} |\n", s.name, s.meaning);
        }
    }
    out
}

/// One batch of the requests table.
fn request_columns(b: &Loaded, rs: &[Record]) -> Vec<Column> {
    let c = &b.contract;
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    let m: Vec<_> = rs
        .iter()
        .map(|r| request_metrics(r, origin, source))
        .collect();
    let int = |f: &dyn Fn(&Record) -> Option<u64>| Column::Int(rs.iter().map(f).collect());
    let text = |f: &dyn Fn(&Record) -> Option<String>| Column::Text(rs.iter().map(f).collect());
    let float = |f: &dyn Fn(&crate::analyze::RequestMetrics) -> Option<f64>| {
        Column::Float(m.iter().map(f).collect())
    };
    let us = |x: Option<u64>| x;
    let n = |x: Option<u32>| x.map(u64::from);
    vec![
        int(&|r| Some(r.index)),
        text(&|r| Some(r.phase.as_str().to_owned())),
        int(&|r| n(r.shard)),
        int(&|r| n(r.url)),
        int(&|r| n(r.segment)),
        text(&|r| r.class.clone()),
        text(&|r| r.model.clone()),
        int(&|r| us(r.session)),
        int(&|r| r.turn.map(|t| u64::from(t.0))),
        text(&|r| Some(r.request_id.clone())),
        int(&|r| us(r.intended_us)),
        int(&|r| us(r.dispatched_us)),
        int(&|r| us(r.sent_us)),
        int(&|r| us(r.first_token_us)),
        int(&|r| us(r.end_us)),
        float(&|m| m.ttft_ms()),
        float(&|m| m.tpot_ms()),
        float(&|m| m.e2e_ms()),
        float(&|m| m.dispatch_lag_ms()),
        Column::Int(m.iter().map(|m| Some(u64::from(m.output_tokens))).collect()),
        int(&|r| Some(u64::from(r.input_tokens_planned))),
        int(&|r| Some(u64::from(r.output_tokens_planned))),
        int(&|r| n(r.usage_prompt_tokens)),
        int(&|r| n(r.usage_completion_tokens)),
        int(&|r| n(r.usage_cached_tokens)),
        int(&|r| n(r.usage_reasoning_tokens)),
        int(&|r| Some(u64::from(r.client_output_tokens))),
        int(&|r| Some(r.chunks.len() as u64)),
        text(&|r| Some(r.outcome.as_str().to_owned())),
        int(&|r| r.http_status.map(u64::from)),
        text(&|r| r.error.as_deref().map(str::to_owned)),
        text(&|r| r.finish_reason.as_deref().map(str::to_owned)),
        text(&|r| r.response_model.as_deref().map(str::to_owned)),
        Column::Int(
            rs.iter()
                .zip(&m)
                .map(|(r, m)| {
                    crate::analyze::slo_of(c, r)
                        .is_set()
                        .then(|| u64::from(r.is_ok() && record_meets_slo(c, r, m)))
                })
                .collect(),
        ),
    ]
}
