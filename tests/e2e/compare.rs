//! Repeats and `compare` with the simulator (issue #7).

use crate::common;

use std::path::Path;
use std::process::Command;

use goodput::compare::{compare, load_side};
use goodput::contract::{self, Contract};
use goodput::run::{RunOptions, run_repeats};
use tokio_util::sync::CancellationToken;

fn contract(decode_ms: f64, name: &str) -> Contract {
    let src = format!(
        "name = \"{name}\"\n[target.simulator]\ndecode_base_ms = {decode_ms}\ndecode_per_seq_ms = 0.1\nprefill_tokens_per_s = 40000\n\
         [workload]\nseed = 4\ninput_tokens = {{ dist = \"fixed\", value = 64 }}\noutput_tokens = {{ dist = \"fixed\", value = 24 }}\n\
         [load]\nmodel = \"open\"\nrate = 30\nrequests = 60\n[warmup]\nrequests = 10\n[repeat]\nruns = 3\n"
    );
    contract::parse(&src, Path::new("t.toml")).unwrap()
}

async fn repeat_set(c: Contract, dir: &Path) -> std::path::PathBuf {
    let opts = RunOptions {
        out_root: dir.to_owned(),
        watch: std::sync::Arc::new(goodput::run::Silent),
        argv: vec![],
        overrides: Vec::new(),
        bundle_dir: None,
        wake_latency_hold: true,
        signal: Default::default(),
        live: None,
        simulator: None,
    };
    let (parent, rs, results) = run_repeats(c, Default::default(), opts, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((rs.runs, results.len()), (3, 3));
    assert!(rs.metrics["tpot_p50_ms"].ci95.is_some());
    assert!(parent.path("repeat.json").is_file() && parent.path("run-03/requests.jsonl").is_file());
    parent.dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_contract_is_no_difference_and_a_slower_decode_is_worse() {
    let dir = tempfile::tempdir().unwrap();
    let a = repeat_set(contract(10.0, "a"), dir.path()).await;
    let b = repeat_set(contract(10.0, "a"), dir.path()).await;
    let slow = repeat_set(contract(13.0, "a"), dir.path()).await;
    let (sa, sb, ss) = (
        load_side(&a).unwrap(),
        load_side(&b).unwrap(),
        load_side(&slow).unwrap(),
    );

    let same = compare(&sa, &sb, 0.05);
    assert!(same.refused.is_empty() && same.diffs.is_empty());
    // Tails of 60 requests a run move with whatever else shares these 2 cores (other test
    // binaries run alongside): the claim is checked on medians and rates, which that noise does
    // not move by 5%. It may move them by 1% consistently across three runs, which Welch then
    // finds significant (TTFT p50 19.07 against 18.88 ms on a busy host): within the noise band,
    // neither better nor worse, is the answer for that.
    let robust = |name: &str| !name.contains("p99");
    for m in same
        .metrics
        .iter()
        .filter(|m| m.a.is_some() && robust(&m.metric))
    {
        use goodput::compare::MetricVerdict::{NoSignificantDifference, WithinNoiseBand};
        assert!(
            matches!(m.verdict, NoSignificantDifference | WithinNoiseBand),
            "{m:?}"
        );
        assert_eq!(m.method, "welch over runs");
    }

    let slower = compare(&sa, &ss, 0.05);
    assert!(slower.refused.is_empty(), "{:?}", slower.refused);
    assert_eq!(slower.diffs.len(), 1);
    assert_eq!(slower.diffs[0].axis, "target");
    let tpot = slower
        .metrics
        .iter()
        .find(|m| m.metric == "tpot_p50_ms")
        .unwrap();
    assert_eq!(tpot.verdict, "worse", "{tpot:?}");
    let [lo, hi] = tpot.ci95.unwrap();
    assert!(lo > 0.0 && hi > lo, "CI {lo}..{hi} should exclude zero");
    // Decode steps went from ≈ 10.x to ≈ 13.x ms: a +30% change in TPOT.
    let rel = tpot.diff.unwrap() / tpot.a.unwrap();
    assert!((0.2..0.4).contains(&rel), "{rel}");

    // Through the binary: one varied axis proceeds; changing two refuses with a non-zero exit.
    let bin = env!("CARGO_BIN_EXE_goodput");
    let ok = Command::new(bin)
        .args(["compare", a.to_str().unwrap(), slow.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        text.contains("tpot_p50_ms") && text.contains("worse"),
        "{text}"
    );
    let mut two = contract(13.0, "a");
    two.load.rate = Some(20.0);
    let other = repeat_set(two, dir.path()).await;
    let refused = Command::new(bin)
        .args(["compare", a.to_str().unwrap(), other.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let out = String::from_utf8_lossy(&refused.stdout);
    assert!(
        out.contains("REFUSED") && out.contains("2 axes differ (target, load)"),
        "{out}"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refused"));
}

/// One small run against the embedded simulator with a TTFT SLO of `slo_ms`; returns its bundle.
async fn bundle(slo_ms: u32, extra: &str, dir: &Path) -> std::path::PathBuf {
    let src = format!(
        "name = \"axes\"\n[target.simulator]\ndecode_base_ms = 2\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n\
         [load]\nmodel = \"open\"\nrate = 50\nrequests = 12\n[slo]\nttft_ms = {slo_ms}\n{extra}"
    );
    let opts = RunOptions {
        out_root: dir.to_owned(),
        watch: std::sync::Arc::new(goodput::run::Silent),
        argv: vec![],
        overrides: Vec::new(),
        bundle_dir: None,
        wake_latency_hold: true,
        signal: Default::default(),
        live: None,
        simulator: None,
    };
    let c = contract::parse(&src, Path::new("t.toml")).unwrap();
    goodput::run::run(c, Default::default(), opts, CancellationToken::new())
        .await
        .unwrap()
        .bundle
        .dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_differing_in_measurement_slo_or_two_axes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = bundle(500, "", d).await;
    let one = bundle(500, "[workload.sampling]\ntemperature = 0.5\n", d).await;
    let two = bundle(
        500,
        "[workload.sampling]\ntemperature = 0.5\n[target.declared]\nhardware = \"x\"\n",
        d,
    )
    .await;
    let measurement = bundle(500, "[measurement]\nmax_dispatch_lag_ms = 20\n", d).await;
    let slo = bundle(400, "", d).await;
    let bin = env!("CARGO_BIN_EXE_goodput");
    let cmp = |other: &Path| {
        Command::new(bin)
            .args(["compare", base.to_str().unwrap(), other.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = cmp(&one);
    assert!(
        out.status.success(),
        "one axis should proceed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for (other, want) in [
        (&two, "2 axes differ (target, workload)"),
        (&measurement, "measurement boundaries differ"),
        (&slo, "SLO differs"),
    ] {
        let out = cmp(other);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{text}");
        assert!(
            text.contains("REFUSED") && text.contains(want),
            "want {want:?} in {text}"
        );
    }
}

/// `compare` as the first afternoon needs it (issue #17): labels, a % change column, a
/// difference reported even with one run a side (labelled untested), refused differences
/// listed once, and a declared fact that the server would have said anyway is no change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_with_labels_percent_change_and_facts_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = bundle(500, "", d).await;
    let hot = bundle(500, "[workload.sampling]\ntemperature = 0.5\n", d).await;
    let named = bundle(500, "[meta]\nlabel = \"meta-named\"\n", d).await;
    let declared = bundle(500, "[target.declared]\nengine = \"goodput-sim\"\n", d).await;
    let two = bundle(
        500,
        "[workload.sampling]\ntemperature = 0.5\n[target]\napi = \"openai-completions\"\n",
        d,
    )
    .await;
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
            .arg("compare")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            common::unwrapped(&String::from_utf8_lossy(&out.stdout)),
        )
    };
    let (ok, text) = run(&[
        base.as_os_str(),
        hot.as_os_str(),
        "--label".as_ref(),
        "cool".as_ref(),
        "--label".as_ref(),
        "hot".as_ref(),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("hot vs baseline cool (1 vs 1 runs)"),
        "{text}"
    );
    assert!(
        text.contains("Baseline cool: SLO met,") && text.contains("Other hot: SLO met,"),
        "{text}"
    );
    assert!(
        text.contains(
            "workload differs (the variable under test): workload.sampling.temperature: 0.0 → 0.5"
        ),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {text}"))
            .to_owned()
    };
    assert!(row("ttft_p50_ms").contains('%'), "{text}");
    // One run a side: goodput has no per-request test, its difference is still shown.
    assert!(row("goodput_rps").contains("untested"), "{text}");
    // [meta] label names a side and is in no fingerprint.
    let (ok, text) = run(&[base.as_os_str(), named.as_os_str()]);
    assert!(ok && text.contains("meta-named vs baseline"), "{text}");
    assert!(
        text.contains("Same contract on every axis, and the same target facts."),
        "{text}"
    );
    // Declaring what the server says anyway changes nothing.
    let (ok, text) = run(&[base.as_os_str(), declared.as_os_str()]);
    assert!(ok && text.contains("Same contract on every axis"), "{text}");
    // Refused: each differing field listed once.
    let (ok, text) = run(&[base.as_os_str(), two.as_os_str()]);
    assert!(!ok && text.contains("REFUSED"), "{text}");
    assert_eq!(
        text.matches("workload.sampling.temperature").count(),
        1,
        "{text}"
    );
}

/// Issue #71: two 20-request bundles make no p99 claim, however far apart their tails (a 4×
/// slower prefill), and say what p99 needs; their median, which 20 requests support, still
/// gets its verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_requests_a_side_make_no_p99_claim_and_say_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let run = |prefill: u32| {
        let src = format!(
            "name = \"tiny\"\n[target.simulator]\ndecode_base_ms = 2\nprefill_tokens_per_s = {prefill}\n\
             [workload]\ninput_tokens = {{ dist = \"fixed\", value = 400 }}\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n\
             [load]\nmodel = \"open\"\nrate = 10\nrequests = 20\n"
        );
        common::run_in(
            contract::parse(&src, Path::new("t.toml")).unwrap(),
            dir.path(),
        )
    };
    let a = run(20_000).await.bundle.dir;
    let b = run(5_000).await.bundle.dir;
    let c = compare(&load_side(&a).unwrap(), &load_side(&b).unwrap(), 0.05);
    assert!(c.refused.is_empty(), "{:?}", c.refused);
    let row = |name: &str| c.metrics.iter().find(|m| m.metric == name).unwrap().clone();
    for name in ["ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms"] {
        let m = row(name);
        assert_eq!(m.verdict, goodput::compare::MetricVerdict::NoClaim, "{m:?}");
        let why = m.unsupported.unwrap();
        assert!(
            why.contains("p99 needs 459 requests a side at 99% confidence, has 20 and 20")
                && why.contains("p50 is the highest both support"),
            "{why}"
        );
    }
    // 20 ms against 80 ms of prefill: the median's difference is claimed.
    assert_eq!(
        row("ttft_p50_ms").verdict,
        "worse",
        "{:?}",
        row("ttft_p50_ms")
    );
    // The terminal says it once, naming the rows.
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("No claim on ttft_p99_ms, tpot_p99_ms, e2e_p99_ms: p99 needs 459"),
        "{text}"
    );
}
