//! `goodput sweep`: one contract, one field varied over a list of values, one run per value, all
//! other axes shared; a parent bundle holds each point's bundle and the sweep summary (offered vs
//! achieved rate, latency percentiles, throughput, attainment and goodput per value).
//!
//! The varied field is set in the contract's *text* (so every other line, comment and default is
//! exactly as written) and each variant is parsed and validated like any contract.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::analyze::Summary;
use crate::bundle::Bundle;
use crate::contract::{self, Contract};
use crate::run::{RunOptions, run};

/// `--vary key=v1,v2,…`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vary {
    /// Dotted contract key, e.g. `load.rate`.
    pub key: String,
    /// Values as written (TOML: `4`, `0.5`, `"500ms"` or a bare word).
    pub values: Vec<String>,
}

impl Vary {
    /// Parses the `--vary` arguments; more than one is refused: change one variable at a time.
    pub fn parse(args: &[String]) -> anyhow::Result<Vary> {
        match args {
            [] => bail!("--vary KEY=V1,V2,… is required"),
            [one] => {
                let (key, list) = one.split_once('=').with_context(|| {
                    format!("--vary `{one}`: expected KEY=V1,V2,… (e.g. load.rate=1,2,4)")
                })?;
                let values: Vec<String> = list
                    .split(',')
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .collect();
                if key.trim().is_empty() || values.is_empty() {
                    bail!("--vary `{one}`: expected KEY=V1,V2,… (e.g. load.rate=1,2,4)");
                }
                Ok(Vary {
                    key: key.trim().to_owned(),
                    values,
                })
            }
            many => bail!(
                "--vary given {} times ({}): a sweep changes one variable; run one sweep per variable",
                many.len(),
                many.iter()
                    .map(|m| m.split('=').next().unwrap_or(m))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The contract text with `key` set to `value` (tables created as needed).
pub fn set_key(src: &str, key: &str, value: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = src.parse().map_err(|e| format!("{e}"))?;
    let parsed: toml_edit::Value = value
        .parse()
        .unwrap_or_else(|_| toml_edit::Value::from(value));
    let parts: Vec<&str> = key.split('.').collect();
    let (last, tables) = parts.split_last().ok_or("empty key")?;
    let mut item = doc.as_item_mut();
    for part in tables {
        let table = item
            .as_table_like_mut()
            .ok_or_else(|| format!("`{key}`: `{part}` is inside a value, not a table"))?;
        if table.get(part).is_none() {
            table.insert(part, toml_edit::table());
        }
        item = table.get_mut(part).ok_or("unreachable")?;
    }
    let table = item
        .as_table_like_mut()
        .ok_or_else(|| format!("`{key}` does not name a field inside a table"))?;
    table.insert(last, toml_edit::Item::Value(parsed));
    Ok(doc.to_string())
}

/// One point of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub value: String,
    pub bundle: PathBuf,
    pub offered_rps: Option<f64>,
    pub achieved_rps: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub attainment: Option<f64>,
    pub goodput_rps: Option<f64>,
    /// `VALID` or `INVALID` (the reasons are in the point's bundle).
    pub validity: String,
}

impl SweepPoint {
    fn of(value: &str, bundle: &Bundle, s: &Summary) -> SweepPoint {
        let st = &s.steady;
        let d = |x: &Option<crate::analyze::Dist>, f: fn(&crate::analyze::Dist) -> f64| {
            x.as_ref().map(f)
        };
        SweepPoint {
            value: value.to_owned(),
            bundle: bundle.dir.clone(),
            offered_rps: st.throughput.offered_rps,
            achieved_rps: st.throughput.achieved_rps,
            ttft_p50_ms: d(&st.stats.ttft_ms, |d| d.p50),
            ttft_p99_ms: d(&st.stats.ttft_ms, |d| d.p99),
            tpot_p50_ms: d(&st.stats.tpot_ms, |d| d.p50),
            tpot_p99_ms: d(&st.stats.tpot_ms, |d| d.p99),
            e2e_p99_ms: d(&st.stats.e2e_ms, |d| d.p99),
            output_tokens_per_s: st.throughput.output_tokens_per_s,
            attainment: st.slo.as_ref().map(|x| x.attainment),
            goodput_rps: st.slo.as_ref().and_then(|x| x.goodput_rps),
            validity: s.validity.verdict.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepResult {
    pub contract: String,
    pub vary: Vary,
    /// Fingerprints every point shares (all axes but the varied one are identical by
    /// construction; the list shows it).
    pub points: Vec<SweepPoint>,
    pub interrupted: bool,
}

/// Runs one bundle per value under a parent bundle (`sweep.json`, `sweep.md`).
pub async fn sweep(
    path: &Path,
    src: &str,
    vary: &Vary,
    out_root: &Path,
    progress: bool,
    argv: Vec<String>,
    cancel: CancellationToken,
) -> anyhow::Result<(Bundle, SweepResult)> {
    // Every variant is built and validated before the first run: no partial sweep on a typo.
    let mut variants: Vec<(String, Contract)> = Vec::new();
    for v in &vary.values {
        let text = set_key(src, &vary.key, v)
            .map_err(|e| anyhow::anyhow!("{}: --vary {}={v}: {e}", path.display(), vary.key))?;
        let c = contract::parse(&text, path).with_context(|| format!("--vary {}={v}", vary.key))?;
        variants.push((v.clone(), c));
    }
    let name = variants[0].1.name.clone();
    let parent = Bundle::create(out_root, &variants[0].1)
        .with_context(|| format!("creating a bundle under {}", out_root.display()))?;
    parent.write("contract.toml", src)?;
    let mut points = Vec::new();
    let mut interrupted = false;
    for (i, (value, c)) in variants.into_iter().enumerate() {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let dir = parent.dir.join(format!("point-{:02}", i + 1));
        let opts = RunOptions {
            out_root: out_root.to_owned(),
            progress,
            argv: argv.clone(),
            bundle_dir: Some(dir),
        };
        let r = run(c, opts, cancel.clone()).await?;
        interrupted |= r.summary.interrupted;
        points.push(SweepPoint::of(&value, &r.bundle, &r.summary));
    }
    let result = SweepResult {
        contract: name,
        vary: vary.clone(),
        points,
        interrupted,
    };
    parent.write_json("sweep.json", &result)?;
    parent.write("sweep.md", &document(&result).markdown())?;
    Ok((parent, result))
}

/// The sweep as a report.
pub fn document(r: &SweepResult) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput sweep · {} · {}", r.contract, r.vary.key));
    let f = |x: Option<f64>| x.map_or("—".to_owned(), crate::report::num);
    let pct = |x: Option<f64>| x.map_or("—".to_owned(), |v| format!("{:.1}%", v * 100.0));
    let rows = r
        .points
        .iter()
        .map(|p| {
            vec![
                p.value.clone(),
                f(p.offered_rps),
                f(p.achieved_rps),
                f(p.ttft_p50_ms),
                f(p.ttft_p99_ms),
                f(p.tpot_p99_ms),
                f(p.e2e_p99_ms),
                f(p.output_tokens_per_s),
                pct(p.attainment),
                f(p.goodput_rps),
                p.validity.clone(),
            ]
        })
        .collect();
    d.table(
        &[
            r.vary.key.as_str(),
            "offered req/s",
            "achieved req/s",
            "TTFT p50",
            "TTFT p99",
            "TPOT p99",
            "E2E p99",
            "output tok/s",
            "attainment",
            "goodput req/s",
            "validity",
        ],
        rows,
    );
    d.line("Latency in ms, steady phase of each point; every point's bundle holds its raw records and full report.");
    if r.interrupted {
        d.line("Interrupted: the points after the last one shown were not run.");
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_variable_at_a_time() {
        let v = Vary::parse(&["load.rate=1, 2,4".into()]).unwrap();
        assert_eq!(v.key, "load.rate");
        assert_eq!(v.values, ["1", "2", "4"]);
        let e = Vary::parse(&["load.rate=1,2".into(), "workload.seed=1,2".into()]).unwrap_err();
        assert!(
            e.to_string().contains("a sweep changes one variable"),
            "{e}"
        );
        assert!(e.to_string().contains("load.rate, workload.seed"), "{e}");
        assert!(Vary::parse(&["load.rate".into()]).is_err());
        assert!(Vary::parse(&["load.rate=".into()]).is_err());
    }

    #[test]
    fn set_key_keeps_everything_else_and_creates_tables() {
        let src = "# my contract\n[load]\nmodel = \"open\" # note\nrate = 2\nrequests = 10\n";
        let out = set_key(src, "load.rate", "8").unwrap();
        assert!(
            out.contains("rate = 8") && out.contains("# note") && out.starts_with("# my contract")
        );
        let out = set_key(src, "warmup.duration", "\"5s\"").unwrap();
        let c = contract::parse(&out, Path::new("t.toml")).unwrap();
        assert_eq!(c.warmup.duration.map(|d| d.0), Some(5.0));
        let bare = set_key(src, "load.arrival", "constant").unwrap();
        assert!(bare.contains("arrival = \"constant\""), "{bare}");
        assert!(set_key(src, "load.model.x", "1").is_err());
    }
}
