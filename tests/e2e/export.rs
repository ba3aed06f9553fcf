//! `goodput export` (issue #25): a bundle's records as tables. The Parquet file, read back by a
//! reader other than goodput's (pyarrow, installed by `scripts/pyarrow.sh`), holds the same
//! per-request values as `requests.jsonl` and the summary's own per-request metrics; CSV and
//! JSON lines hold the same rows; the column meanings are documented in `docs/export-columns.md`
//! (checked against the code, regenerated with UPDATE_EXPORT_DOC=1).

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

#[test]
fn every_format_round_trips_the_records() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Some failures (with their status and error), so absent values are exported too.
    let sim = rt.block_on(common::sim(goodput::sim::SimConfig {
        prefill_tokens_per_s: 100_000.0,
        decode_base_ms: 2.0,
        decode_per_seq_ms: 0.0,
        faults: goodput::sim::Faults {
            error_rate: 0.15,
            ..Default::default()
        },
        ..Default::default()
    }));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("c.toml"),
        format!(
            "name = \"exp\"\n[target]\nurl = \"{}\"\n[workload]\noutput_tokens = {{ dist = \"uniform\", min = 2, max = 9 }}\n[load]\nrate = 50\nrequests = 60\n[warmup]\nrequests = 5\n[slo]\nttft_ms = 200\n[quality]\nmode = \"consistency\"\nprobes = 2\n",
            sim.base_url()
        ),
    )
    .unwrap();
    let run = Command::new(BIN)
        .args(["run", "c.toml", "-q", "--out", "runs"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bundle = std::fs::read_dir(d.join("runs/exp"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let loaded = goodput::bundle::Bundle::load(&bundle).unwrap();
    let records = &loaded.records;
    assert!(
        records.iter().any(|r| !r.is_ok()),
        "the faults made failures"
    );
    let export = |format: &str| {
        let out = d.join(format);
        let o = Command::new(BIN)
            .args([
                "export",
                bundle.to_str().unwrap(),
                "--format",
                format,
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };

    // Parquet, read by pyarrow.
    let pq = export("parquet");
    let read = |file: &str| -> Value {
        let o = Command::new("scripts/pyarrow.sh")
            .args(["read", pq.join(file).to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let t = read("requests.parquet");
    assert_eq!(t["schema"]["intended_us"], "uint64");
    assert_eq!(t["schema"]["ttft_ms"], "double");
    assert_eq!(t["schema"]["outcome"], "string");
    let rows: BTreeMap<u64, &Value> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["index"].as_u64().unwrap(), r))
        .collect();
    assert_eq!(rows.len(), records.len());
    let c = &loaded.contract;
    let opt = |x: Option<u64>| x.map_or(Value::Null, Value::from);
    for r in records {
        let row = rows[&r.index];
        let m = goodput::analyze::request_metrics(
            r,
            c.measurement.latency_origin,
            c.measurement.output_tokens,
        );
        assert_eq!(row["phase"], r.phase.as_str(), "{row}");
        assert_eq!(row["request_id"], r.request_id.as_str());
        assert_eq!(row["intended_us"], opt(r.intended_us));
        assert_eq!(row["sent_us"], opt(r.sent_us));
        assert_eq!(row["first_token_us"], opt(r.first_token_us));
        assert_eq!(row["end_us"], opt(r.end_us));
        assert_eq!(
            row["usage_completion_tokens"],
            opt(r.usage_completion_tokens.map(u64::from))
        );
        assert_eq!(row["chunks"], r.chunks.len() as u64);
        assert_eq!(row["outcome"], r.outcome.as_str());
        assert_eq!(row["http_status"], opt(r.http_status.map(u64::from)));
        assert_eq!(
            row["error"],
            r.error.as_deref().map_or(Value::Null, Value::from)
        );
        assert_eq!(row["ttft_ms"].as_f64(), m.ttft_ms());
        assert_eq!(row["e2e_ms"].as_f64(), m.e2e_ms());
        let met = r.is_ok() && goodput::analyze::meets_slo(c, &m);
        assert_eq!(row["meets_slo"], u64::from(met));
    }
    let ch = read("chunks.parquet");
    let chunks = ch["rows"].as_array().unwrap();
    assert_eq!(
        chunks.len(),
        records.iter().map(|r| r.chunks.len()).sum::<usize>()
    );
    let first = records.iter().find(|r| r.chunks.len() > 2).unwrap();
    let mine: Vec<(u64, u64)> = chunks
        .iter()
        .filter(|x| x["index"] == first.index)
        .map(|x| (x["at_us"].as_u64().unwrap(), x["tokens"].as_u64().unwrap()))
        .collect();
    let want: Vec<(u64, u64)> = first
        .chunks
        .iter()
        .map(|(at, k)| (at, u64::from(k)))
        .collect();
    assert_eq!(mine, want);

    // CSV and JSON lines: the same rows, the columns in the documented order.
    let names: Vec<&str> = goodput::export::REQUESTS.iter().map(|s| s.name).collect();
    let csv_dir = export("csv");
    let mut rd = csv::Reader::from_path(csv_dir.join("requests.csv")).unwrap();
    assert_eq!(rd.headers().unwrap().iter().collect::<Vec<_>>(), names);
    let csv_rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(csv_rows.len(), records.len());
    let col = |n: &str| names.iter().position(|x| *x == n).unwrap();
    for row in &csv_rows {
        let index: u64 = row[col("index")].parse().unwrap();
        let p = rows[&index];
        assert_eq!(
            &row[col("intended_us")],
            p["intended_us"]
                .as_u64()
                .map(|x| x.to_string())
                .unwrap_or_default()
        );
        assert_eq!(&row[col("outcome")], p["outcome"].as_str().unwrap());
    }
    let jl = export("jsonl");
    let text = std::fs::read_to_string(jl.join("requests.jsonl")).unwrap();
    assert_eq!(text.lines().count(), records.len());
    for line in text.lines() {
        let keys: Vec<String> = line
            .trim_matches(|c| c == '{' || c == '}')
            .split(",\"")
            .map(|k| {
                k.trim_start_matches('"')
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(keys, names, "{line}");
        let v: Value = serde_json::from_str(line).unwrap();
        let p = rows[&v["index"].as_u64().unwrap()];
        for k in [
            "end_us",
            "ttft_ms",
            "usage_prompt_tokens",
            "error",
            "meets_slo",
        ] {
            assert_eq!(&v[k], &p[k], "{k}");
        }
    }
}

#[test]
fn the_column_meanings_are_documented() {
    let doc = goodput::export::columns_doc();
    let path = std::path::Path::new("docs/export-columns.md");
    if std::env::var_os("UPDATE_EXPORT_DOC").is_some() {
        std::fs::write(path, &doc).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        doc,
        "docs/export-columns.md is not the columns' documentation: regenerate it with UPDATE_EXPORT_DOC=1"
    );
    for s in goodput::export::REQUESTS
        .iter()
        .chain(goodput::export::CHUNKS)
    {
        assert!(doc.contains(&format!("| `{}` |", s.name)), "{}", s.name);
    }
}
