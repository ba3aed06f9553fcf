//! inference-perf's lifecycle report (`summary_lifecycle_metrics.json`, and one
//! `stage_N_lifecycle_metrics.json` per load stage): `load_summary` (the stage's requested and
//! achieved rate, and the schedule delay: how late each request went out), `successes` (the
//! latency distributions in seconds, token counts, throughput, goodput when configured) and
//! `failures`. The run's configuration (target, model, load type) is in `config.yaml` beside
//! it, not in this file.

use std::path::Path;

use serde_json::Value;

use crate::graded::Audit;
use crate::peers::result::{
    Gathered, PeerFormat, QUALITY_MISSING, distribution, field, num, one, server_unknown, slo_axis,
};
use crate::peers::statement::{Kind, Stat, Statement};

/// The format.
pub struct InferencePerf;

const NAME: &str = "inference-perf lifecycle report";

/// Seconds as milliseconds, for the axes.
fn ms(v: &Value) -> String {
    v.as_f64()
        .map_or("?".into(), |s| num(&Value::from(s * 1000.0)))
}

impl PeerFormat for InferencePerf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn needs(&self) -> &'static str {
        "an inference-perf lifecycle report JSON (`load_summary`, `successes`, `failures`)"
    }

    fn recognises(&self, v: &Value) -> bool {
        v.get("load_summary").is_some() && v.get("successes").is_some()
    }

    /// Its figures by its own definitions, read from `inference_perf/reportgen/base.py`
    /// (`summarize_requests`, main of 2026-12): a token arrives with each chunk that carries
    /// text; TTFT to the first; `time_per_output_token` is (last token − first) / (output tokens
    /// − 1), `normalized_time_per_output_token` is the request's latency / output tokens;
    /// `inter_token_latency` pools the gaps between token times (a chunk of k tokens gives
    /// k − 1 gaps of 0); throughputs divide by the first send to the last end of every request,
    /// failed ones included; seconds throughout.
    fn stated(&self, v: &Value, _c: &crate::contract::Contract) -> Option<Statement> {
        let mut figures = Gathered::default();
        for (name, kind, key) in [
            ("TTFT", Kind::Ttft, "time_to_first_token"),
            ("TPOT", Kind::PerRequestGap, "time_per_output_token"),
            (
                "normalized TPOT",
                Kind::TpotWithFirst,
                "normalized_time_per_output_token",
            ),
            ("ITL", Kind::ChunkGap, "inter_token_latency"),
            ("request latency", Kind::E2e, "request_latency"),
        ] {
            let at = |word: &str| format!("/successes/latency/{key}/{word}");
            distribution(
                &mut figures,
                v,
                (name, kind),
                (["mean", "median", "p90", "p99"], at),
                1000.0,
            );
        }
        for (f, at) in [
            (
                ("requests per second", Kind::RequestsPerS, Stat::Value),
                "/successes/throughput/requests_per_sec",
            ),
            (
                (
                    "output tokens per second",
                    Kind::OutputTokensPerS,
                    Stat::Value,
                ),
                "/successes/throughput/output_tokens_per_sec",
            ),
            (
                ("prompt tokens", Kind::InputTokens, Stat::Mean),
                "/successes/prompt_tokens/mean",
            ),
            (
                ("output tokens", Kind::OutputTokens, Stat::Mean),
                "/successes/output_tokens/mean",
            ),
            (
                ("successful requests", Kind::Completed, Stat::Value),
                "/successes/count",
            ),
        ] {
            one(&mut figures, v, f, at, 1.0);
        }
        figures.count("requests", v, "/load_summary/count", 1);
        figures.rate(v, "/load_summary/requested_rate", false);
        figures.count("concurrency", v, "/load_summary/concurrency", 1);
        let mut st = figures.into_statement(false, None);
        // `achieved_rate` is its requests over the span of their sends.
        let load = &v["load_summary"];
        if let (Some(rate), Some(n)) = (load["achieved_rate"].as_f64(), load["count"].as_u64())
            && rate.is_finite()
            && rate > 0.0
            && n > 1
        {
            st.sent_rps = Some((rate, n as usize));
        }
        Some(st)
    }

    fn grade(&self, path: &Path, v: &Value) -> anyhow::Result<Audit> {
        let mut a = Audit::new(path, NAME);
        let load = field(path, NAME, v, "/load_summary")?;
        let ok = field(path, NAME, v, "/successes/count")?
            .as_u64()
            .unwrap_or(0);
        let lat = field(path, NAME, v, "/successes/latency")?;
        a.missing.push(
            "target and model not stated: inference-perf keeps them in config.yaml, not in this report".into(),
        );
        server_unknown(&mut a, false, false);
        a.axis("target", "not in this file (config.yaml)");

        let s = &v["successes"];
        let (input, output) = (&s["prompt_tokens"], &s["output_tokens"]);
        a.axis(
            "workload",
            format!(
                "real lengths: input p50 {} / output p50 {} tokens (p99 {}); {} prompt tokens cached",
                num(&input["median"]),
                num(&output["median"]),
                num(&output["p99"]),
                num(&input["cached"])
            ),
        );
        if input.is_null() || output.is_null() {
            a.missing
                .push("real token lengths not recorded (no prompt/output token counts)".into());
        }
        if s["token_count_mismatches"].as_u64().is_some_and(|n| n > 0) {
            a.limits.push(format!(
                "{} requests whose client-side token count disagreed with the server's",
                s["token_count_mismatches"]
            ));
        }

        load_axis(&mut a, load);
        a.missing.push("warm-up not stated".into());
        a.axis("warm-up", "not stated");
        let goodput = s.get("goodput_metrics").filter(|g| !g.is_null());
        slo_axis(&mut a, goodput.map(|g| format!("goodput metrics {g}")));
        a.axis(
            "measurement",
            format!(
                "latency from the actual send; TTFT p99 {} ms, request latency p99 {} ms over {ok} successful requests",
                ms(&lat["time_to_first_token"]["p99"]),
                ms(&lat["request_latency"]["p99"])
            ),
        );
        a.missing.push(QUALITY_MISSING.into());
        let failed = v["failures"]["count"].as_u64().unwrap_or(0);
        if failed > 0 {
            let labels: Vec<String> = v["failures"]["by_label"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, x)| format!("{k}: {}", x["count"]))
                        .collect()
                })
                .unwrap_or_default();
            a.limits.push(format!(
                "{failed} requests failed ({})",
                if labels.is_empty() {
                    "no labels".to_owned()
                } else {
                    labels.join(", ")
                }
            ));
        }
        a.limits.push("single run: no variance".into());
        Ok(a.done())
    }
}

/// The load axis from the summary's `load_summary`, and the client's schedule delay.
fn load_axis(a: &mut Audit, load: &Value) {
    let (rate, conc) = (
        load["requested_rate"].as_f64(),
        load["concurrency"].as_u64(),
    );
    let described = match (rate, conc) {
        (_, Some(c)) => {
            a.limits.push(format!(
                "closed-loop load (concurrency {c}): tail latency and capacity claims are not valid"
            ));
            format!("closed loop, concurrency {c}")
        }
        (Some(r), None) => format!(
            "open loop at {r} req/s requested, {} achieved",
            num(&load["achieved_rate"])
        ),
        (None, None) => {
            a.missing.push(
                "load not stated: a summary report has no rate (each stage's report does)".into(),
            );
            "not stated".to_owned()
        }
    };
    a.axis("load", described);
    // Latency counts from each request's actual start: how late it went out is reported
    // beside, not in, the latency.
    if let Some(p99) = load["schedule_delay"]["p99"].as_f64()
        && p99 > 0.005
    {
        a.limits.push(format!(
            "requests went out up to {} ms late (schedule delay p99) and latency counts from the actual send: that much queueing in the client is hidden from the latency figures",
            ms(&load["schedule_delay"]["p99"])
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What compare reads of the report: each latency in ms by inference-perf's own kind, its
    /// throughputs and counts, the rate it asked for and the rate it sent at.
    #[test]
    fn the_report_states_its_figures_by_its_own_definitions() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/audit/inference-perf-stage_0_lifecycle_metrics.json");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let c = crate::contract::parse(crate::contract::BUILTIN, Path::new("c.toml")).unwrap();
        let st = InferencePerf.stated(&v, &c).unwrap();
        let find = |kind: Kind, stat: Stat| {
            st.figures
                .iter()
                .find(|f| f.kind == kind && f.stat == stat)
                .map(|f| f.value)
        };
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(close(find(Kind::Ttft, Stat::P50), 27.8));
        assert!(close(find(Kind::PerRequestGap, Stat::P99), 13.65));
        assert!(close(find(Kind::TpotWithFirst, Stat::Mean), 13.18));
        assert!(close(find(Kind::ChunkGap, Stat::P90), 21.51));
        assert!(close(find(Kind::E2e, Stat::P50), 417.6));
        assert!(close(find(Kind::RequestsPerS, Stat::Value), 7.826));
        assert!(close(find(Kind::Completed, Stat::Value), 238.0));
        assert_eq!(st.sent_rps, Some((8.035, 240)));
        assert!(
            st.load.contains(&("rate", "8.00".to_owned())),
            "{:?}",
            st.load
        );
        assert!(!st.lead_gap);
    }
}
