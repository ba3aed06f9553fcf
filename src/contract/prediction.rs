//! Predictions: expectations written down before the first request, stored with a timestamp
//! and a hash in the bundle, and checked against the measurement afterwards. Editing
//! `prediction.json` after the run shows: its hash no longer matches the one `command.json`
//! recorded at the start.
//!
//! Grammar (hand-written: one metric, one comparison, one number with an optional unit):
//! `<metric> <op> <number>[unit]`, e.g. `ttft_p99<=300ms`, `goodput>=12`, `attainment >= 95%`.
//! Metrics are the headline ones (`ttft_p50`, `ttft_p99`, `tpot_p50`, `tpot_p99`, `e2e_p99` in
//! ms; `output_tokens_per_s`; `goodput` in req/s; `attainment` as a fraction or %), and
//! `slo_met` alone: the run meets the SLO, by the one rule every command uses
//! (`analyze::SloResult::meets`).

use serde::{Deserialize, Serialize};

/// One expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    /// As written.
    pub text: String,
    /// Headline metric name (as in `compare`).
    pub metric: String,
    /// `<=`, `<`, `>=` or `>`.
    pub op: String,
    /// In the metric's unit (ms, tok/s, req/s, fraction).
    pub value: f64,
}

/// What `prediction.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// When it was written (UTC), before the first request.
    pub made_utc: String,
    pub expect: Vec<Expectation>,
}

/// Parses one expectation; the error says what is wrong with it.
pub fn parse(text: &str) -> Result<Expectation, String> {
    let t = text.trim();
    if matches!(t.to_lowercase().as_str(), "slo_met" | "slo met") {
        return Ok(Expectation {
            text: t.to_owned(),
            metric: SLO_MET.to_owned(),
            op: ">=".to_owned(),
            value: 1.0,
        });
    }
    let (pos, op) = ["<=", ">=", "<", ">"]
        .iter()
        .find_map(|op| t.find(op).map(|p| (p, *op)))
        .ok_or_else(|| format!("`{t}` has no comparison (<=, <, >=, >)"))?;
    let name = t[..pos].trim().to_lowercase();
    let rhs = t[pos + op.len()..].trim();
    let split = rhs
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(rhs.len());
    let number: f64 = rhs[..split]
        .parse()
        .map_err(|_| format!("`{t}`: `{rhs}` does not start with a number"))?;
    let unit = rhs[split..].trim();
    let (metric, value) = match name.trim_end_matches("_ms") {
        m @ ("ttft_p50" | "ttft_p99" | "tpot_p50" | "tpot_p99" | "e2e_p99") => {
            let ms = match unit {
                "" | "ms" => number,
                "s" => number * 1000.0,
                u => return Err(format!("`{t}`: unit `{u}` is not a time (ms or s)")),
            };
            (format!("{m}_ms"), ms)
        }
        "output_tokens_per_s" | "output_tps" | "throughput" => match unit {
            "" | "tok/s" => ("output_tokens_per_s".to_owned(), number),
            u => return Err(format!("`{t}`: unit `{u}` should be tok/s")),
        },
        "goodput" | "goodput_rps" => match unit {
            "" | "req/s" => ("goodput_rps".to_owned(), number),
            u => return Err(format!("`{t}`: unit `{u}` should be req/s")),
        },
        "attainment" => match unit {
            "" => ("attainment".to_owned(), number),
            "%" => ("attainment".to_owned(), number / 100.0),
            u => return Err(format!("`{t}`: unit `{u}` should be % or none")),
        },
        other => {
            return Err(format!(
                "`{t}`: unknown metric `{other}` (ttft_p50, ttft_p99, tpot_p50, tpot_p99, e2e_p99, output_tokens_per_s, goodput, attainment; or slo_met alone)"
            ));
        }
    };
    // Every metric here is a time, a rate or a share: never negative, and a share at most 1.
    // A bound no run can meet or miss predicts nothing.
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "`{t}`: {number}{unit} is no value {metric} can take (it is never negative)"
        ));
    }
    if metric == "attainment" && value > 1.0 {
        return Err(format!(
            "`{t}`: attainment is a share of requests, at most 100% (or 1)"
        ));
    }
    Ok(Expectation {
        text: t.to_owned(),
        metric,
        op: op.to_owned(),
        value,
    })
}

/// Parses a comma-separated list (`--predict`).
pub fn parse_list(text: &str) -> Result<Vec<Expectation>, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.iter().all(|p| p.is_empty()) {
        return Err("no expectation given (e.g. \"ttft_p99<=300ms,goodput>=12\")".into());
    }
    if let Some(i) = parts.iter().position(|p| p.is_empty()) {
        return Err(format!(
            "expectation {} of `{text}` is empty (a stray comma?)",
            i + 1
        ));
    }
    parts.into_iter().map(parse).collect()
}

/// The hash recorded before the run: SHA-256 of the file's exact bytes.
pub fn hash(bytes: &[u8]) -> String {
    crate::text::sha256_hex(bytes)
}

/// The expectation that the run meets its SLO: 1 when it does, 0 when not.
pub const SLO_MET: &str = "slo_met";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_names() {
        let e = parse("ttft_p99<=300ms").unwrap();
        assert_eq!(
            (e.metric.as_str(), e.op.as_str(), e.value),
            ("ttft_p99_ms", "<=", 300.0)
        );
        assert_eq!(parse("e2e_p99_ms < 2s").unwrap().value, 2000.0);
        assert_eq!(parse("goodput>=12").unwrap().metric, "goodput_rps");
        let e = parse("slo_met").unwrap();
        assert_eq!(
            (e.metric.as_str(), e.op.as_str(), e.value),
            (SLO_MET, ">=", 1.0)
        );
        assert_eq!(parse("attainment >= 95%").unwrap().value, 0.95);
        assert!(parse("ttft_p99 300").unwrap_err().contains("no comparison"));
        assert!(parse("speed >= 3").unwrap_err().contains("unknown metric"));
        assert!(
            parse("ttft_p99 <= 3 tok/s")
                .unwrap_err()
                .contains("not a time")
        );
        // Issue #46: a bound no run can meet or miss.
        assert!(
            parse("ttft_p99<=-5ms")
                .unwrap_err()
                .contains("is no value ttft_p99_ms can take")
        );
        assert!(
            parse("attainment >= 120%")
                .unwrap_err()
                .contains("at most 100%")
        );
        assert_eq!(parse_list("ttft_p99<=300ms, goodput>=12").unwrap().len(), 2);
        assert!(parse_list("").unwrap_err().contains("no expectation given"));
        assert!(
            parse_list("ttft_p99<=300ms,,goodput>=12")
                .unwrap_err()
                .contains("expectation 2")
        );
    }
}
