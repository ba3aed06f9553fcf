//! `goodput ab`: the paired, sequential verdict is right with a known effect (on the
//! simulator's discrete-event clock over 20 seeds, stopping early and not; and through the
//! binary), finds no difference when A is B even with the target drifting under it (where two
//! sequential runs and `compare` read the drift as a difference), and refuses what it cannot
//! pair.

use std::path::Path;
use std::process::Command;

use goodput::ab::stats::{Better, Call, Design, replay};
use goodput::ab::{Metric, figure, metrics, sample};

use crate::common::{des_records, parse};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// A small open-loop contract on the simulator: decode steps of `decode` ms, `rate` req/s.
fn text(decode: f64, seed: u64, extra: &str) -> String {
    format!(
        "name = \"ab\"\n[workload]\nseed = {seed}\ninput_tokens = {{ dist = \"fixed\", value = 128 }}\noutput_tokens = {{ dist = \"uniform\", min = 8, max = 24 }}\n[load]\nrate = 30\nrequests = 40\n[warmup]\nrequests = 8\n[slo]\nttft_ms = 100\ntpot_ms = 16\npercentile = 90\n[target.simulator]\ndecode_base_ms = {decode}\n{extra}"
    )
}

/// Each metric's value in a block run on the discrete-event clock.
fn des_block(decode: f64, seed: u64, ms: &[Metric]) -> Vec<Option<f64>> {
    let c = parse(&text(decode, seed, ""));
    let recs = des_records(&c, 10);
    let s = sample(&c, &recs);
    ms.iter().map(|m| figure(m, &s)).collect()
}

/// `pairs` pairs of A (12 ms) and B (`b` ms) blocks from `seed`, as the verdict reads them.
fn des_series(b: f64, seed: u64, pairs: usize, ms: &[Metric]) -> Vec<Vec<Option<(f64, f64)>>> {
    let mut out = vec![Vec::new(); ms.len()];
    for k in 0..pairs as u64 {
        let (x, y) = (des_block(12.0, seed + k, ms), des_block(b, seed + k, ms));
        for (m, s) in out.iter_mut().enumerate() {
            s.push(x[m].zip(y[m]));
        }
    }
    out
}

fn design(metrics: usize, min_pairs: usize) -> Design {
    Design {
        confidence: 0.95,
        power: 0.8,
        mde: 0.05,
        metrics,
        min_pairs,
        max_pairs: 12,
        look_every: 2,
    }
}

/// Stops at the first look at which every metric is decided (the run's own rule).
fn stopped_early(
    d: &Design,
    better: &[Better],
    series: &[Vec<Option<(f64, f64)>>],
) -> Vec<goodput::ab::stats::Verdict> {
    for look in d.looks() {
        let upto: Vec<Vec<_>> = series.iter().map(|s| s[..look].to_vec()).collect();
        let v = replay(d, better, &upto);
        if goodput::ab::stats::finished(d, &v, look) {
            return v;
        }
    }
    unreachable!("the last look is the budget")
}

#[test]
fn a_known_effect_is_found_worse_with_the_truth_inside_its_interval_in_19_of_20_seeds() {
    let c = parse(&text(12.0, 1, ""));
    let ms = metrics(&c, c.load.requests());
    let better: Vec<Better> = ms.iter().map(|m| m.better).collect();
    let tpot = ms.iter().position(|m| m.name == "TPOT p50").unwrap();
    // The truth: the paired TPOT p50 difference over 200 pairs of other seeds.
    let truth_series = des_series(13.0, 100_000, 200, &ms);
    let diffs: Vec<f64> = truth_series[tpot]
        .iter()
        .flatten()
        .map(|(a, b)| b - a)
        .collect();
    let truth = diffs.iter().sum::<f64>() / diffs.len() as f64;
    assert!(truth > 0.5 && truth < 1.5, "decode 12 → 13 ms: {truth}");
    let (early, fixed) = (design(ms.len(), 4), design(ms.len(), 12));
    let (mut early_right, mut fixed_right, mut early_pairs) = (0, 0, Vec::new());
    for seed in 0..20u64 {
        let series = des_series(13.0, seed * 1000, 12, &ms);
        for (d, right, label) in [
            (&early, &mut early_right, "early"),
            (&fixed, &mut fixed_right, "fixed"),
        ] {
            let v = if d.min_pairs == d.max_pairs {
                replay(d, &better, &series)
            } else {
                stopped_early(d, &better, &series)
            };
            let j = v[tpot].judged.clone().unwrap();
            let no_better = v.iter().all(|x| {
                x.judged
                    .as_ref()
                    .is_none_or(|j| j.call != Call::Better || x.decided_at.is_none())
            });
            let ok = j.call == Call::Worse && j.ci[0] <= truth && truth <= j.ci[1] && no_better;
            if label == "early" {
                early_pairs.push(v.iter().filter_map(|x| x.decided_at).max().unwrap_or(12));
            }
            if !ok {
                eprintln!("seed {seed} ({label}): TPOT p50 {:?}, truth {truth:.3}", j);
            }
            *right += usize::from(ok);
        }
    }
    println!(
        "decode 12 vs 13 ms (truth +{truth:.2} ms TPOT p50): B worse with the truth inside the interval in {early_right}/20 seeds stopping early (pairs at which every metric was decided or the budget reached: {early_pairs:?}), {fixed_right}/20 with one look at the budget"
    );
    assert!(early_right >= 19 && fixed_right >= 19);
}

/// Runs `goodput ab` in `dir`, returning its JSON and exit status.
fn ab(dir: &Path, args: &[&str]) -> (serde_json::Value, std::process::Output) {
    let out = Command::new(BIN)
        .arg("ab")
        .args(args)
        .args(["--json", "--out", "runs"])
        .current_dir(dir)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (json, out)
}

fn verdict<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let i = j["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .position(|m| m["name"] == name)
        .unwrap();
    &j["verdicts"][i]
}

#[test]
fn through_the_binary_b_is_worse_and_fails_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.toml"), text(12.0, 7, "")).unwrap();
    std::fs::write(dir.path().join("b.toml"), text(13.0, 7, "")).unwrap();
    let (j, out) = ab(
        dir.path(),
        &[
            "a.toml",
            "b.toml",
            "--max-blocks",
            "16",
            "--fail-on",
            "worse",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(j["overall"], "worse", "{err}\n{j:#}");
    assert_eq!(out.status.code(), Some(9), "{err}");
    let tpot = verdict(&j, "TPOT p50");
    assert_eq!(tpot["judged"]["call"], "worse");
    // Every block's bundle is there, and the ABBA order holds.
    let sides: Vec<&str> = j["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["side"].as_str().unwrap())
        .collect();
    assert_eq!(&sides[..4], ["A", "B", "B", "A"]);
    for b in j["blocks"].as_array().unwrap() {
        assert!(
            dir.path()
                .join(b["bundle"].as_str().unwrap())
                .join("requests.jsonl")
                .exists()
                || Path::new(b["bundle"].as_str().unwrap())
                    .join("requests.jsonl")
                    .exists()
        );
    }
    assert_eq!(
        j["differs"][0],
        "target.simulator.decode_base_ms 12.0 → 13.0"
    );
}

/// Issue #77: B decodes with a draft accepted far more often, so it is faster, but its outputs
/// are made another way: the verdict does not call it a win, and the notes say why with each
/// side's pooled acceptance, as `compare`'s guard does.
#[test]
fn a_faster_b_with_another_acceptance_is_not_a_win() {
    let dir = tempfile::tempdir().unwrap();
    let draft = |acceptance: f64| {
        format!(
            "[target.simulator.speculative]\ndraft_tokens = 4\nacceptance = {acceptance}\nspread = 0.0\n"
        )
    };
    std::fs::write(dir.path().join("a.toml"), text(12.0, 7, &draft(0.3))).unwrap();
    std::fs::write(dir.path().join("b.toml"), text(12.0, 7, &draft(0.9))).unwrap();
    let (j, out) = ab(dir.path(), &["a.toml", "b.toml", "--max-blocks", "8"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(j["overall"].as_str(), Some("better" | "mixed")),
        "{err}\n{j:#}"
    );
    let sentence = j["sentence"].as_str().unwrap();
    assert!(
        sentence.contains("not a win: quality not held"),
        "{sentence}"
    );
    let notes: Vec<&str> = j["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("QUALITY NOT HELD: speculative decoding's acceptance moved")),
        "{notes:?}"
    );
    // Every block states its drafts.
    for b in j["blocks"].as_array().unwrap() {
        let [drafted, accepted] = [
            b["drafts"][0].as_u64().unwrap(),
            b["drafts"][1].as_u64().unwrap(),
        ];
        assert!(drafted > 0 && accepted <= drafted, "{b}");
    }
    // A against itself holds quality, and says so.
    let (j, _) = ab(dir.path(), &["a.toml", "--max-blocks", "8"]);
    let held = j["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .any(|n| n.starts_with("quality held: speculative acceptance A"));
    assert!(held, "{j:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifting_target_fools_two_sequential_runs_but_not_the_paired_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    // One simulator per experiment, each slowing 10% at a known request: the A/B test's
    // halfway point (12 blocks of 48 requests), and between the two sequential runs.
    let drifting = |after: u64| {
        let mut cfg = goodput::sim::SimConfig {
            decode_base_ms: 12.0,
            ..Default::default()
        };
        cfg.faults.slow_after_requests = after;
        cfg.faults.slow_factor = 1.1;
        cfg
    };
    let s1 = crate::common::sim(drifting(6 * 48)).await;
    let s2 = crate::common::sim(drifting(48 + 4)).await;
    for (name, url) in [("ab.toml", s1.base_url()), ("seq.toml", s2.base_url())] {
        let t = text(12.0, 3, "").replace("[target.simulator]\ndecode_base_ms = 12\n", "");
        std::fs::write(d.join(name), format!("{t}[target]\nurl = \"{url}\"\n")).unwrap();
    }
    let (j, first, second, c) = tokio::task::spawn_blocking(move || {
        // The paired blocks: A against itself, the target slowing halfway.
        let (j, out) = ab(&d, &["ab.toml", "--max-blocks", "12"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(j["null_check"], true, "{err}");
        // Two sequential runs of the same contract, the drift between them, and compare.
        let run = |name: &str| {
            let out = Command::new(BIN)
                .args(["run", "seq.toml", "--out", name, "--quiet"])
                .current_dir(&d)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let parent = d.join(name).join("ab");
            std::fs::read_dir(parent)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
        };
        let (first, second) = (run("first"), run("second"));
        let out = Command::new(BIN)
            .arg("compare")
            .args([&first, &second])
            .arg("--json")
            .output()
            .unwrap();
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (j, first, second, c)
    })
    .await
    .unwrap();
    assert!(
        ["same", "undecided"].contains(&j["overall"].as_str().unwrap()),
        "the paired verdict read the drift as a difference: {}",
        j["sentence"]
    );
    let worse: Vec<String> = c[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["verdict"] == "worse")
        .map(|m| m["metric"].as_str().unwrap().to_owned())
        .collect();
    println!(
        "drift of 10%: ab (A against A, paired) → {}; two sequential runs ({} then {}) + compare → worse on {worse:?}",
        j["sentence"],
        first.display(),
        second.display()
    );
    assert!(
        worse.iter().any(|m| m.contains("tpot")),
        "compare did not see the drift: {c:#}"
    );
}

#[test]
fn what_cannot_be_paired_is_refused_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.toml"), text(12.0, 1, "")).unwrap();
    // Two axes: the target and the load.
    std::fs::write(
        d.join("two.toml"),
        text(13.0, 1, "").replace("rate = 30", "rate = 20"),
    )
    .unwrap();
    let (_, out) = ab(d, &["a.toml", "two.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("cannot be paired") && err.contains("change one variable at a time"),
        "{err}"
    );
    // A closed loop.
    std::fs::write(
        d.join("closed.toml"),
        text(12.0, 1, "").replace("rate = 30", "kind = \"closed\"\nconcurrency = 4"),
    )
    .unwrap();
    let (_, out) = ab(d, &["closed.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("closed loop"), "{err}");
    // Blocks shorter than their E2E tail: 3 requests at 30 req/s, each ~200 tokens long.
    let short = text(12.0, 1, "")
        .replace("requests = 40", "requests = 3")
        .replace("min = 8, max = 24", "min = 200, max = 220");
    std::fs::write(d.join("short.toml"), short).unwrap();
    let (_, out) = ab(d, &["short.toml", "--max-blocks", "4", "--min-blocks", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("shorter than its E2E tail") && err.contains("--requests"),
        "{err}"
    );
    // Odd block counts, and an MDE out of range.
    let (_, out) = ab(d, &["a.toml", "--max-blocks", "9"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("even"));
    let (_, out) = ab(d, &["a.toml", "--mde", "150%"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 0 and 100%"));
}

#[test]
fn the_plan_says_how_many_blocks_the_mde_needs_and_whether_the_budget_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.toml"), text(12.0, 1, "")).unwrap();
    let (j, out) = ab(d, &["a.toml", "--plan", "--mde", "1%", "--max-blocks", "8"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    // A 1% MDE is beyond 8 blocks of 40 requests: the plan says so.
    assert!(
        j["sentence"].as_str().unwrap().contains("not enough")
            || j["sentence"]
                .as_str()
                .unwrap()
                .contains("cannot be decided"),
        "{j:#}"
    );
    let blocks = j["blocks"].as_u64();
    let (j5, _) = ab(
        d,
        &["a.toml", "--plan", "--mde", "20%", "--max-blocks", "8"],
    );
    // A wider MDE needs fewer blocks.
    if let (Some(b1), Some(b5)) = (blocks, j5["blocks"].as_u64()) {
        assert!(b5 < b1, "{b5} vs {b1}");
    }
    assert!(j5["blocks"].as_u64().is_some(), "{j5:#}");
}

/// Issue #71: the plan of an A/B (decode 12 → 24 ms, a 100% TPOT effect) is labelled an A/B,
/// not a null check, and plans for the effect the pilot shows: a bounded number of blocks if
/// it is real, beside what showing equivalence within the MDE would take.
#[test]
fn the_plan_of_an_ab_with_a_large_pilot_effect_plans_for_it_and_says_ab() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.toml"), text(12.0, 1, "")).unwrap();
    std::fs::write(d.join("b.toml"), text(24.0, 1, "")).unwrap();
    let (j, out) = ab(d, &["a.toml", "b.toml", "--plan", "--mde", "2%"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(j["null_check"], false, "{j:#}");
    assert!(
        j["b"].as_str().is_some_and(|b| !b.contains("null check")),
        "{j:#}"
    );
    let tpot = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"]["name"] == "TPOT p50")
        .unwrap();
    let real = tpot["pairs_if_real"]
        .as_u64()
        .expect("TPOT's effect is planned for");
    assert!(
        real <= 20,
        "a 100% effect is detected in a few pairs: {tpot:#}"
    );
    let sentence = j["sentence"].as_str().unwrap();
    assert!(sentence.contains("if they are real"), "{sentence}");
    // The human page says A/B, and which field differs.
    let out = Command::new(BIN)
        .args([
            "ab", "a.toml", "b.toml", "--plan", "--mde", "2%", "--out", "runs",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("goodput ab --plan · A/B ·"), "{text}");
    assert!(text.contains("decode_base_ms"), "{text}");
    assert!(!text.contains("null check"), "{text}");
}

/// The verdict's rates through the binary on the embedded simulator over 20 seeds: with a known
/// effect (decode 12 vs 13 ms) and with none (A against itself), each seed's blocks judged both
/// stopping early (the run's own rule, replayed on the blocks as they came) and with one look at
/// the budget. About 15 minutes on 2 cores, so not in CI: `cargo nextest run --run-ignored
/// only -E 'test(ab_rates_over_20_seeds)' --no-capture`; the figures are in docs/guide/ab.md.
#[test]
#[ignore = "15 minutes; its figures are recorded in docs/guide/ab.md"]
fn ab_rates_over_20_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fast = |decode: f64, seed: u64| text(decode, seed, "");
    let mut lines = Vec::new();
    for (label, b_decode) in [("effect", 13.0), ("null", 12.0)] {
        let (mut early_ok, mut fixed_ok, mut all_same) = (0, 0, 0);
        for seed in 0..20u64 {
            std::fs::write(d.join("a.toml"), fast(12.0, seed * 100)).unwrap();
            std::fs::write(d.join("b.toml"), fast(b_decode, seed * 100)).unwrap();
            let (j, out) = ab(
                d,
                &[
                    "a.toml",
                    "b.toml",
                    "--min-blocks",
                    "16",
                    "--max-blocks",
                    "16",
                ],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let r: goodput::ab::AbResult = serde_json::from_value(j).unwrap();
            let better: Vec<Better> = r.metrics.iter().map(|m| m.better).collect();
            let series = r.series();
            let early = Design {
                min_pairs: 4,
                ..r.design
            };
            for (v, ok) in [
                (stopped_early(&early, &better, &series), &mut early_ok),
                (replay(&r.design, &better, &series), &mut fixed_ok),
            ] {
                let calls: Vec<Call> = v
                    .iter()
                    .map(|x| match (&x.judged, x.decided_at) {
                        (Some(j), Some(_)) => j.call,
                        _ => Call::Open,
                    })
                    .collect();
                let tpot = r.metrics.iter().position(|m| m.name == "TPOT p50").unwrap();
                let right = match label {
                    "effect" => calls[tpot] == Call::Worse && !calls.contains(&Call::Better),
                    _ => !calls.contains(&Call::Worse) && !calls.contains(&Call::Better),
                };
                *ok += usize::from(right);
            }
            all_same += usize::from(r.overall == goodput::ab::Overall::Same);
        }
        lines.push(format!(
            "{label}: right in {early_ok}/20 seeds stopping early, {fixed_ok}/20 with one look at 8 pairs; every metric decided within the MDE in {all_same}/20"
        ));
    }
    println!("{}", lines.join("\n"));
}
