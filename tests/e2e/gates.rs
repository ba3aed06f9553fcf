//! `goodput run --fail-on` for CI pipelines (issue #25): each gate has its own exit status,
//! the first failing gate in a fixed order sets it, and a gate that could never pass is refused
//! before the run. The CI example in `examples/ci/` runs as written: its `bench.sh` (what the
//! GitHub Actions and GitLab CI files call) passes against a healthy engine and fails with the
//! gate's status when the SLO is missed or the outputs change.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use goodput::sim::SimConfig;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn quick(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        prefill_tokens_per_s: 100_000.0,
        decode_base_ms: 2.0,
        decode_per_seq_ms: 0.0,
        ..SimConfig::default()
    }
}

fn run(dir: &Path, url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["run", "c.toml", "-q", "--url", url, "--out", "runs"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

#[test]
fn each_gate_has_its_exit_status_and_the_first_failing_one_wins() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (a, b) = rt.block_on(async { (common::sim(quick(1)).await, common::sim(quick(2)).await) });
    let (a, b) = (a.base_url(), b.base_url());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Enough steady requests for p90 at 99% confidence, an SLO the quick engine meets, and a
    // dispatch-lag bound a busy test machine keeps (the client's schedule is not under test).
    std::fs::write(
        d.join("c.toml"),
        "name = \"gates\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 8 }\n[load]\nrate = 40\nrequests = 80\n[warmup]\nrequests = 10\n[slo]\nttft_ms = 500\npercentile = 90\n[quality]\nmode = \"consistency\"\nprobes = 4\n[measurement]\nmax_dispatch_lag_ms = 50\n",
    )
    .unwrap();
    let all = [
        "--fail-on",
        "invalid,slo,prediction",
        "--predict",
        "ttft_p50<=400ms",
    ];
    let pass = run(d, &a, &all);
    assert_eq!(
        code(&pass),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pass.stderr)
    );
    let baseline = std::fs::read_dir(d.join("runs/gates"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let b_arg = baseline.to_str().unwrap();

    // Each gate alone, failing: its own status, and stderr says which and why.
    // INVALID is the measurement's verdict: a dispatch-lag bound no client keeps.
    let behind = "measurement.max_dispatch_lag_ms=0.001";
    let cases: [(&[&str], i32, &str); 6] = [
        (
            &["--fail-on", "invalid", "--set", behind],
            4,
            "fail-on invalid (exit 4)",
        ),
        (
            &["--fail-on", "slo", "--set", "slo.ttft_ms=0.01"],
            5,
            "fail-on slo (exit 5)",
        ),
        // Issue #44: a clear miss is conclusive on any sample (10 of 10 over p90's threshold).
        (
            &[
                "--fail-on",
                "invalid,slo",
                "--requests",
                "10",
                "--set",
                "slo.ttft_ms=0.01",
            ],
            5,
            "SLO NOT met, conclusive at 99% confidence",
        ),
        // A pass on 10 requests is not INVALID, and not a supported pass either: p90 needs 44.
        (
            &["--fail-on", "invalid,slo", "--requests", "10"],
            8,
            "fail-on slo (exit 8): the SLO is met, but not yet supported at 99% confidence: TTFT p90 needs 44 requests, has 10",
        ),
        (
            &["--fail-on", "prediction", "--predict", "ttft_p50<=0.01ms"],
            6,
            "fail-on prediction (exit 6)",
        ),
        (&["--fail-on", "quality", "--baseline", b_arg], 0, ""),
    ];
    for (args, want, says) in cases {
        let o = run(d, &a, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), Some(want), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Another engine's outputs (another seed) are not the baseline's.
    let o = run(d, &b, &["--fail-on", "quality", "--baseline", b_arg]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), Some(7), "{err}");
    assert!(err.contains("fail-on quality (exit 7): not held"), "{err}");
    // INVALID (the client behind) and the SLO missed: the first in the documented order sets
    // it, and both are named.
    let o = run(
        d,
        &a,
        &[
            "--fail-on",
            "slo,invalid",
            "--set",
            behind,
            "--set",
            "slo.ttft_ms=0.01",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), Some(4), "{err}");
    assert!(
        err.contains("fail-on invalid") && err.contains("fail-on slo"),
        "{err}"
    );
    // A gate that could never pass is a mistake in the command, said before any load.
    for (args, says) in [
        (&["--fail-on", "quality"][..], "needs --baseline"),
        (&["--fail-on", "prediction"][..], "nothing was predicted"),
        (
            &[
                "--fail-on",
                "slo",
                "--set",
                "slo.ttft_ms=0",
                "--set",
                "slo.percentile=90",
            ][..],
            "",
        ),
        (&["--baseline", b_arg][..], "--fail-on quality only"),
        (&["--fail-on", "fast"][..], "invalid value 'fast'"),
    ] {
        let o = run(d, &a, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(code(&o), Some(0), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn the_ci_example_runs_as_written() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (a, b) = rt.block_on(async { (common::sim(quick(1)).await, common::sim(quick(2)).await) });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The example's contract as written, shortened for a test (the script passes these on).
    let short = [
        "--rate",
        "40",
        "--requests",
        "80",
        "--set",
        "warmup.requests=10",
        "--set",
        "measurement.max_dispatch_lag_ms=50",
    ];
    let bench = |url: &str, out: &str, baseline: Option<&Path>, more: &[&str]| {
        let mut c = Command::new(root.join("examples/ci/bench.sh"));
        c.arg(root.join("examples/ci/contract.toml"))
            .args(short)
            .args(more)
            .env("PATH", &path)
            .env("GOODPUT_URL", url)
            .env("GOODPUT_OUT", d.join(out))
            .env_remove("GOODPUT_BASELINE")
            .current_dir(d);
        if let Some(b) = baseline {
            c.env("GOODPUT_BASELINE", b);
        }
        c.output().unwrap()
    };
    let ok = bench(
        &a.base_url(),
        "main",
        None,
        &["--predict", "ttft_p99<=500ms"],
    );
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        code(&ok),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        text.contains("goodput: passed (invalid,slo,prediction)"),
        "{text}"
    );
    let main = std::fs::read_dir(d.join("main/ci-gate"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // The same engine against that baseline passes; another engine's outputs fail with 7.
    let same = bench(&a.base_url(), "pr1", Some(&main), &[]);
    assert_eq!(
        code(&same),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    let changed = bench(&b.base_url(), "pr2", Some(&main), &[]);
    let text = String::from_utf8_lossy(&changed.stdout);
    assert_eq!(code(&changed), Some(7), "{text}");
    assert!(text.contains("quality was not held"), "{text}");
    // Every request misses the SLO: a conclusive miss, and the run is still VALID (a
    // sample's size never makes a measurement INVALID).
    let slo = bench(&a.base_url(), "pr3", None, &["--set", "slo.ttft_ms=0.01"]);
    let err = String::from_utf8_lossy(&slo.stderr);
    assert_eq!(code(&slo), Some(5), "{err}");
    assert!(err.contains("fail-on slo (exit 5)"), "{err}");
    assert!(!err.contains("fail-on invalid"), "{err}");
    assert!(
        String::from_utf8_lossy(&slo.stdout).contains("goodput: the SLO is not met"),
        "{}",
        String::from_utf8_lossy(&slo.stdout)
    );
    // The bundle is there for the job to upload, pass or fail.
    assert!(d.join("pr3/ci-gate").is_dir());
    // Both pipeline files call the script on the example contract and keep the bundle always.
    for (file, keep) in [
        ("examples/ci/github-actions.yml", "if: always()"),
        ("examples/ci/gitlab-ci.yml", "when: always"),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            text.contains("examples/ci/bench.sh examples/ci/contract.toml"),
            "{file}"
        );
        assert!(text.contains(keep) && text.contains("runs/"), "{file}");
    }
}
