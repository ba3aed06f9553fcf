//! Quality held constant (issue #8): consistency between results of the same plan, the
//! simulator's degradations caught by `compare`, reference scoring end to end, and `audit`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{parse, run_in};
use goodput::compare::GuardStatus;

const FAST_SIM: &str = "[target.simulator]\nprefill_tokens_per_s = 50000\ndecode_base_ms = 3\ndecode_per_seq_ms = 0.05\n";

fn contract(sim_extra: &str, quality: &str) -> goodput::contract::Contract {
    parse(&format!(
        "name = \"q\"\n[workload]\nseed = 21\ninput_tokens = {{ dist = \"fixed\", value = 24 }}\noutput_tokens = {{ dist = \"uniform\", min = 8, max = 24 }}\n\
         [load]\nmodel = \"open\"\nrate = 60\nrequests = 120\n[warmup]\nrequests = 5\n[slo]\nttft_ms = 500\n\
         [quality]\n{quality}\n{FAST_SIM}{sim_extra}"
    ))
}

async fn bundle(sim_extra: &str, quality: &str, dir: &Path) -> PathBuf {
    run_in(contract(sim_extra, quality), dir).await.bundle.dir
}

fn goodput(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_plan_is_fully_consistent_and_a_degraded_server_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    // As many probes as steady requests: the degraded share below is a proportion of them.
    let q = "mode = \"consistency\"\nkeep_text = true\nprobes = 120";
    let a = bundle("", q, dir.path()).await;
    let b = bundle("", q, dir.path()).await;
    let bad = bundle(
        "[target.simulator.faults]\nperturb_rate = 0.3\ntruncate_rate = 0.1\n",
        q,
        dir.path(),
    )
    .await;

    let (sa, sb, sbad) = (
        goodput::compare::load_side(&a).unwrap(),
        goodput::compare::load_side(&b).unwrap(),
        goodput::compare::load_side(&bad).unwrap(),
    );
    // Two runs of the same plan: every output identical, request by request.
    let same = goodput::compare::compare(&sa, &sb, 0.05);
    let c = same
        .quality
        .consistency
        .as_ref()
        .expect("consistency measured");
    assert_eq!(same.quality.status, GuardStatus::Held);
    assert_eq!(c.pairs, 120);
    assert_eq!(
        (c.identical, c.same_length, c.token_agreement),
        (1.0, 1.0, Some(1.0))
    );

    // The degraded server: about 30% perturbed and 10% truncated prompts (some both), struck
    // by prompt, so the identical share is near 0.7 × 0.9 = 63%.
    let worse = goodput::compare::compare(&sa, &sbad, 0.05);
    let c = worse.quality.consistency.as_ref().unwrap();
    assert_eq!(worse.quality.status, GuardStatus::NotHeld);
    assert!((0.45..0.8).contains(&c.identical), "{c:?}");
    assert!((0.8..0.97).contains(&c.same_length), "{c:?}");
    assert!(c.token_agreement.unwrap() < 0.95 && c.token_agreement.unwrap() > c.identical);
    assert!(worse.metrics.iter().all(|m| m.verdict != "better"));

    // Through the binary: the measured consistency is shown and the exit is non-zero, unless
    // asked to show it anyway.
    let out = goodput(&[("compare").as_ref(), a.as_os_str(), bad.as_os_str()]);
    assert!(!out.status.success());
    let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout));
    let pct = format!(
        "over 120 quality probes (the same prompts in both runs) (bar 90.0%: quality.min_token_agreement); {:.1}% identical",
        c.identical * 100.0
    );
    assert!(
        text.contains("QUALITY NOT HELD CONSTANT") && text.contains(&pct),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not hold quality constant"));
    let out = goodput(&[
        "compare".as_ref(),
        a.as_os_str(),
        bad.as_os_str(),
        "--allow-quality-change".as_ref(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = goodput(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(out.status.success());
    let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert!(
        text.contains("Quality held: mean token agreement 100.0% over 120 quality probes"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_mode_scores_answers_and_the_bundle_recomputes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let refs = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reference/capitals.jsonl");
    let q = format!(
        "mode = \"reference\"\nreferences = \"{}\"\nscoring = \"rouge-l\"",
        refs.display()
    );
    let r = run_in(contract("", &q), dir.path()).await;
    let (items, _) = goodput::quality::load_references(&refs).unwrap();
    // Prompts come from the reference set, in order; every output's text is kept and scored.
    let steady: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == goodput::plan::Phase::Steady)
        .collect();
    for x in &steady {
        assert!(x.output_text.is_some() && x.output_digest.is_some());
    }
    let mut c = contract("", &q);
    let src = c.to_toml();
    let inputs = goodput::workload::inputs::read(&mut c, &src, Path::new("q.toml")).unwrap();
    let plan = goodput::plan::Plan::new(&c, &inputs);
    assert_eq!(plan.request(7).prompt, items[7].prompt);
    let s = r.summary.quality.as_ref().unwrap();
    let score = s.reference.as_ref().unwrap();
    assert_eq!(score.scored, 120);
    // The mean is the mean of the per-request scores, recomputed here from the kept text.
    let expect: f64 = steady
        .iter()
        .map(|x| {
            goodput::quality::score(
                goodput::contract::Scoring::RougeL,
                x.output_text.as_deref().unwrap(),
                &items[(x.index % items.len() as u64) as usize].answer,
            )
        })
        .sum::<f64>()
        / 120.0;
    assert!((score.mean - expect).abs() < 1e-12);
    // The reference set travels with the bundle; moving the original does not matter.
    assert!(r.bundle.path("references.jsonl").is_file());
    let again = goodput::bundle::Bundle::load(&r.bundle.dir)
        .unwrap()
        .summary;
    assert_eq!(again.quality, r.summary.quality);
    // A references file edited after the run is refused by its hash.
    std::fs::write(
        r.bundle.path("references.jsonl"),
        "{\"prompt\": \"x\", \"answer\": \"y\"}\n",
    )
    .unwrap();
    let e = goodput::bundle::Bundle::load(&r.bundle.dir).unwrap_err();
    assert!(
        format!("{e:#}").contains("has changed since this contract was resolved"),
        "{e:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_names_a_missing_quality_check() {
    let dir = tempfile::tempdir().unwrap();
    let none = bundle("", "mode = \"none\"", dir.path()).await;
    let a = goodput::audit::audit(&none).unwrap();
    assert_eq!(a.verdict, "directional");
    assert_eq!(a.missing.len(), 1, "{:?}", a.missing);
    assert!(a.missing[0].starts_with("no quality check"));
    let checked = bundle("", "mode = \"consistency\"", dir.path()).await;
    assert_eq!(
        goodput::audit::audit(&checked).unwrap().verdict,
        "comparable"
    );
}

#[test]
fn bad_quality_sections_fail_with_key() {
    let base = "[load]\nmodel = \"open\"\nrate = 1\nrequests = 1\n[quality]\n";
    for (extra, wants) in [
        ("mode = \"reference\"\n", "quality.references"),
        (
            "mode = \"consistency\"\nmin_identical = 1.5\n",
            "quality.min_identical",
        ),
        (
            "mode = \"reference\"\nreferences = \"/no/such/refs.jsonl\"\n",
            "/no/such/refs.jsonl",
        ),
        ("mode = \"sometimes\"\n", "quality"),
    ] {
        // The contract and the files it names, as `run` reads them.
        let e =
            goodput::workload::parse(&format!("{base}{extra}"), Path::new("c.toml")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("c.toml") && msg.contains(wants),
            "{extra}: {msg}"
        );
    }
}
