//! Synthetic bundles for the scale benchmark and its equality test: a contract and any number
//! of realistic records (Poisson arrivals at 1,000 req/s, lognormal TTFT, jittered
//! inter-token gaps, a few failures), generated from a seed. Not used by a run.
//!
//!     cargo run --release --example synth_bundle -- /tmp/big --requests 1000000

use std::io::Write;
use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use super::{Outcome, Record};
use crate::plan::Phase;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub requests: u64,
    pub warmup: u64,
    pub output_tokens: u32,
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            requests: 10_000,
            warmup: 100,
            output_tokens: 128,
            seed: 7,
        }
    }
}

/// The contract of a synthetic bundle: open loop at 1,000 req/s against a target that is
/// never contacted.
pub fn contract(spec: &Spec) -> String {
    format!(
        r#"name = "synthetic-scale"
description = "Generated records for the scale benchmark (record::synth); no server was contacted."

[target]
url = "http://127.0.0.1:9"
model = "synthetic"

[workload]
seed = {seed}
input_tokens = {{ dist = "fixed", value = 256 }}
output_tokens = {{ dist = "fixed", value = {out} }}

[load]
arrival = "poisson"
rate = 1000.0
max_in_flight = 1000000
requests = {requests}

[warmup]
requests = {warmup}

[slo]
ttft_ms = 500
tpot_ms = 50
percentile = 99
attainment = 0.9

[measurement]
server_metrics_interval = "0s"

[quality]
mode = "none"
"#,
        seed = spec.seed,
        out = spec.output_tokens,
        requests = spec.requests,
        warmup = spec.warmup,
    )
}

/// Record `i` of a synthetic run (warm-up first, then steady), each from its own seed so any
/// one can be generated alone.
pub fn record(spec: &Spec, i: u64, intended_us: u64) -> Record {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let phase = if i < spec.warmup {
        Phase::Warmup
    } else {
        Phase::Steady
    };
    let planned = crate::plan::PlannedRequest {
        index: i,
        phase,
        intended_us: Some(intended_us),
        input_tokens: 256,
        output_tokens: spec.output_tokens,
        prompt: String::new(),
        messages: None,
        shared_tokens: None,
        class: None,
        model: None,
        stage: None,
        stage_rps: None,
        images: Vec::new(),
        tools: None,
    };
    let mut r = Record::planned(&planned, phase, "synthetic");
    let dispatched = intended_us + rng.random_range(5..60);
    let sent = dispatched + rng.random_range(10..80);
    r.dispatched_us = Some(dispatched);
    r.sent_us = Some(sent);
    r.http_status = Some(200);
    // One in 500 fails with a status, one in 2,000 breaks off mid-stream.
    if rng.random_range(0..500) == 0 {
        r.fail(Outcome::HttpStatus, "HTTP 503", sent + 2_000);
        r.http_status = Some(503);
        return r;
    }
    let ttft = LogNormal::new(11.0, 0.5).expect("valid").sample(&mut rng) as u64;
    let mut t = sent + ttft;
    let gap = Exp::new(1.0 / 15_000.0).expect("valid");
    let broken = rng.random_range(0..2_000) == 0;
    let n = if broken {
        spec.output_tokens / 2
    } else {
        spec.output_tokens
    };
    for k in 0..n {
        if k > 0 {
            t += 8_000 + gap.sample(&mut rng) as u64;
        }
        r.chunks.push(t, 1);
    }
    r.first_token_us = r.chunks.first().map(|c| c.0);
    r.client_output_tokens = n;
    r.end_us = Some(t + rng.random_range(50..400));
    if broken {
        r.fail(Outcome::StreamBroken, "connection closed mid-stream", t + 1);
        return r;
    }
    r.usage_prompt_tokens = Some(256);
    r.usage_completion_tokens = Some(n);
    r.response_model = Some("synthetic".into());
    r.response_id = Some(format!("chatcmpl-{:016x}", rng.random::<u64>()).into());
    r.finish_reason = Some("length".into());
    r
}

/// Writes a bundle (`contract.toml`, `requests.jsonl`) of `spec` into `dir`, records in
/// completion order as a run writes them. `legacy`: chunks as `[[µs, tokens], …]`, the format
/// before compact chunk encoding, to check that old bundles still load alike.
pub fn write_bundle(dir: &Path, spec: &Spec, legacy: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("contract.toml"), contract(spec))?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("requests.jsonl"))?);
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let arrivals = Exp::new(1_000.0 / 1e6).expect("valid");
    let mut at = 0.0f64;
    let mut line = Vec::new();
    for i in 0..spec.requests + spec.warmup {
        at += arrivals.sample(&mut rng);
        let r = record(spec, i, at as u64);
        line.clear();
        if legacy {
            let mut v = serde_json::to_value(&r).map_err(std::io::Error::other)?;
            v["chunks"] = serde_json::json!(r.chunks.iter().collect::<Vec<_>>());
            serde_json::to_writer(&mut line, &v).map_err(std::io::Error::other)?;
        } else {
            serde_json::to_writer(&mut line, &r).map_err(std::io::Error::other)?;
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    out.flush()
}
