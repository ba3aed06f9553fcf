//! Verdicts that answer (issue #44): a sample too small for a claim is "not yet supported",
//! never INVALID; a clear miss is a miss at any sample size; a measurement the client could
//! not keep on schedule is INVALID whatever its sample; every run states the strongest claim
//! its sample supports.

use crate::common;

use std::process::Command;

use goodput::analyze::SloVerdict;

use common::{parse, run_in};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// A quick simulated engine: TTFT tens of ms, a run of hundreds of requests in seconds.
const QUICK: &str = "[target.simulator]\nprefill_tokens_per_s = 50000\ndecode_base_ms = 3\ndecode_per_seq_ms = 0.05\n";

fn contract(requests: u32, rate: u32, slo: &str, measurement: &str) -> String {
    format!(
        "name = \"verdicts\"\n[workload]\nseed = 3\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[load]\nrate = {rate}\nrequests = {requests}\n[warmup]\nrequests = 20\n[slo]\n{slo}\n[measurement]\n{measurement}\n{QUICK}"
    )
}

/// 200 clean requests: the measurement is VALID, the SLO met but its p99 not yet supported
/// (459 needed), and the report says so in those words, with the strongest claim the sample
/// does support (p95).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_clean_requests_are_valid_and_p99_is_not_yet_supported() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&contract(
        200,
        50,
        "ttft_ms = 2000\ntpot_ms = 500",
        "max_dispatch_lag_ms = 50",
    ));
    let r = run_in(c, dir.path()).await;
    let s = &r.summary;
    assert_eq!(s.validity.verdict, "VALID", "{:?}", s.validity.reasons);
    let slo = s.steady.slo.as_ref().unwrap();
    assert_eq!(slo.met, 200);
    assert_eq!(slo.verdict, SloVerdict::MetIndicated);
    for m in &slo.per_metric {
        assert_eq!(
            (m.verdict, m.needed, m.requests),
            (SloVerdict::MetIndicated, 459, 200)
        );
    }
    // The terminal's lines wrapped at 100 columns, unwrapped.
    let text = goodput::report::document_at(s, false)
        .terminal()
        .replace("\n  ", " ");
    assert!(text.contains("Validity: VALID"), "{text}");
    assert!(
        text.contains(
            "SLO met, not yet supported at 99% confidence (p99 needs 459 requests, has 200)"
        ),
        "{text}"
    );
    assert!(!text.contains("INVALID"), "{text}");
    // The strongest claim of 200 requests at 99%: p95 (p99's bound needs 459).
    for k in &s.steady.claims {
        assert_eq!(k.supported.as_ref().unwrap().percentile, 95.0, "{k:?}");
        assert_eq!(k.not_yet.as_ref().unwrap().needs, 459);
    }
    assert!(
        text.contains("Supported at 99% confidence: TTFT p95 ≤ "),
        "{text}"
    );
    assert!(
        text.contains("; p99 not yet: needs 459 requests, has 200"),
        "{text}"
    );
}

/// 500 requests, most over the TTFT threshold: a conclusive miss, and `--fail-on invalid,slo`
/// exits 5 (the SLO), not 4: the measurement is sound, and the sample-size rule bounds only
/// a claim that the SLO is met.
#[test]
fn a_clear_miss_on_500_requests_is_conclusive_and_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // TTFT on the quick engine is a few ms at the least: 1 ms misses nearly every request.
    std::fs::write(
        d.join("c.toml"),
        contract(500, 100, "ttft_ms = 1", "max_dispatch_lag_ms = 50"),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "run",
            "c.toml",
            "-q",
            "--fail-on",
            "invalid,slo",
            "--out",
            "runs",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{err}\n{text}");
    assert!(!err.contains("fail-on invalid"), "{err}");
    assert!(
        err.contains("fail-on slo (exit 5): SLO NOT met, conclusive at 99% confidence"),
        "{err}"
    );
    assert!(
        text.contains("SLO NOT met, conclusive at 99% confidence"),
        "{text}"
    );
}

/// A client that fell behind its schedule makes the run INVALID whatever its sample: 300
/// requests support p90 at 99% (44 needed), and the SLO is met, but the report cannot support
/// the pass and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_client_fell_behind_is_invalid_whatever_its_sample() {
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&contract(
        300,
        100,
        "ttft_ms = 2000\npercentile = 90",
        "max_dispatch_lag_ms = 0.001",
    ));
    let r = run_in(c, dir.path()).await;
    let s = &r.summary;
    assert_eq!(s.validity.verdict, "INVALID");
    assert!(s.validity.client_behind, "{:?}", s.validity.reasons);
    let slo = s.steady.slo.as_ref().unwrap();
    assert_eq!(slo.verdict, SloVerdict::Met, "the sample supports p90");
    let text = goodput::report::document_at(s, false)
        .terminal()
        .replace("\n  ", " ");
    assert!(
        text.contains("SLO met, but not supported (the run is INVALID)"),
        "{text}"
    );
    assert!(
        text.contains("Validity: INVALID") && text.contains("the client fell behind its schedule"),
        "{text}"
    );
}

/// Bad input names the file, line and key: a confidence outside (0.5, 1), and a percentile no
/// sample of any size can support.
#[test]
fn claims_no_sample_can_support_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (slo, measurement, key, says) in [
        (
            "ttft_ms = 500",
            "confidence = 1.5",
            "measurement.confidence",
            "must be in (0.5, 1)",
        ),
        (
            "ttft_ms = 500",
            "confidence = 0",
            "measurement.confidence",
            "must be in (0.5, 1)",
        ),
        (
            "ttft_ms = 500\npercentile = 100",
            "",
            "slo.percentile",
            "the maximum can never be supported",
        ),
        (
            "ttft_ms = 500\nattainment = 1.0",
            "",
            "slo.attainment",
            "can never be supported",
        ),
    ] {
        std::fs::write(d.join("bad.toml"), contract(100, 10, slo, measurement)).unwrap();
        let out = Command::new(BIN)
            .args(["run", "bad.toml", "-q"])
            .current_dir(d)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("bad.toml") && err.contains(key) && err.contains(says),
            "{key}: {err}"
        );
        let line = err
            .split("bad.toml:")
            .nth(1)
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<u32>().ok());
        assert!(line.is_some(), "{key}: the line is named: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!d.join("runs").exists(), "nothing run");
    }
}

/// `goodput plan` (and `run`, before the first request) says how many steady requests each
/// SLO claim needs, how long that takes at the contract's rate, and what would support it.
#[test]
fn the_plan_says_what_its_sample_can_support() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("c.toml"),
        contract(200, 20, "ttft_ms = 500", "max_dispatch_lag_ms = 50"),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["plan", "c.toml", "--limit", "1"])
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("p99 at 99% needs 459 steady requests with no miss (≈23 s at 20 req/s); this run plans 200 steady requests, fewer: a pass will be indicated, not supported"),
        "{err}"
    );
    assert!(
        err.contains("load.requests = 459 or more")
            && err.contains("slo.percentile = 95 (needs 90)")
            && err.contains("measurement.confidence = 0.95 (needs 299)"),
        "{err}"
    );
    // stdout is the plan alone.
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert!(
        first.get("prompt").is_some() || first.get("index").is_some(),
        "{first}"
    );
}
