//! Traffic classes (issue #27): one run, several workloads with their own SLOs, models and
//! priorities. Interactive chat beside batch summaries on the simulator: each class's
//! attainment, goodput and validity as the report gives them, held against a recomputation
//! from the raw records; the simulator's priority scheduling protecting the interactive class,
//! and `compare` accepting the two runs (one variable: the target's scheduling) and calling
//! the difference significant; a capacity search with classes against the same search on the
//! simulator's discrete-event clock; and the contract errors a user can make.

use crate::common;

use std::path::Path;

use goodput::analyze::{Context, summarize};
use goodput::plan::Plan;

use common::{parse, run_in};

/// Interactive (short prompts, TTFT p99 ≤ 300 ms) beside batch (long prompts on a LoRA
/// adapter, E2E p99 ≤ 30 s) on a simulator with chunked prefill, first come first served:
/// a batch prompt's prefill chunks go first and the interactive requests behind them wait.
const TWO: &str = r#"name = "two-classes"
[target.simulator]
prefill_chunk_tokens = 512
adapters = ["summarizer-lora"]
adapter_cost_ms = 2
[workload]
seed = 3
[load]
kind = "open"
rate = 20
requests = 500
[warmup]
requests = 60
[[class]]
name = "interactive"
share = 0.94
priority = 0
[class.workload]
input_tokens = { dist = "uniform", min = 64, max = 192 }
output_tokens = { dist = "fixed", value = 32 }
[class.slo]
ttft_ms = 300
[[class]]
name = "batch"
share = 0.06
priority = 10
model = "summarizer-lora"
[class.workload]
input_tokens = { dist = "uniform", min = 3000, max = 5000 }
output_tokens = { dist = "fixed", value = 64 }
[class.slo]
e2e_ms = 30000
"#;

/// Each class's attainment, recomputed from `requests.jsonl` alone (not through goodput's
/// analysis): TTFT and E2E from the intended send, each request against its class's threshold.
fn recomputed(bundle: &Path) -> std::collections::BTreeMap<String, (u64, u64)> {
    let text = std::fs::read_to_string(bundle.join("requests.jsonl")).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["phase"] != "steady" {
            continue;
        }
        let class = r["class"]
            .as_str()
            .expect("every request has its class")
            .to_owned();
        let at = |k: &str| r[k].as_u64().map(|t| t as f64 / 1000.0);
        let start = at("intended_us").unwrap();
        let ok = r["outcome"] == "ok";
        let met = ok
            && match class.as_str() {
                "interactive" => at("first_token_us").is_some_and(|t| t - start <= 300.0),
                "batch" => at("end_us").is_some_and(|t| t - start <= 30_000.0),
                other => panic!("unknown class {other}"),
            };
        let e: &mut (u64, u64) = out.entry(class).or_default();
        e.0 += u64::from(met);
        e.1 += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_scheduling_protects_the_interactive_class_and_compare_calls_it_significant() {
    let dir = tempfile::tempdir().unwrap();
    let fcfs = run_in(parse(TWO), dir.path()).await;
    let with_priority = TWO.replace(
        "adapter_cost_ms = 2\n",
        "adapter_cost_ms = 2\nscheduling = \"priority\"\n",
    );
    let prio = run_in(parse(&with_priority), dir.path()).await;

    let mut attainment = Vec::new();
    for r in [&fcfs, &prio] {
        let classes = r.summary.classes.as_ref().expect("a result per class");
        assert_eq!(classes.len(), 2);
        let truth = recomputed(&r.bundle.dir);
        for k in classes {
            let (met, n) = truth[&k.name];
            let slo = k.slo.as_ref().unwrap();
            assert_eq!((slo.met, slo.counted), (met, n), "{}", k.name);
            assert_eq!(k.stats.requests, n);
            // Goodput: the class's part of the completions that met its SLO.
            let achieved = k.achieved_rps.unwrap();
            let goodput = slo.goodput_rps.unwrap();
            assert!(
                (goodput - achieved * met as f64 / k.stats.ok as f64).abs() < 1e-9,
                "{}: {goodput} vs {achieved}",
                k.name
            );
            // Support: a pass is supported only with MLPerf's early-stopping count at the
            // class's own percentile and attainment's misses; a sample too small is never INVALID.
            for m in &slo.per_metric {
                let needed = goodput::analyze::min_requests_for(slo.percentile, m.misses, 0.99);
                assert_eq!(m.needed, needed, "{}", k.name);
                assert_eq!(
                    m.verdict == goodput::analyze::SloVerdict::Met,
                    m.pass && m.requests >= needed,
                    "{}: {} requests, {needed} needed",
                    k.name,
                    m.requests
                );
            }
            assert!(
                r.summary
                    .validity
                    .reasons
                    .iter()
                    .all(|w| !w.contains("cannot support")),
                "{:?}",
                r.summary.validity.reasons
            );
            // Every batch request asked for the adapter, and is recorded so.
            if k.name == "batch" {
                assert_eq!(k.models.get("summarizer-lora"), Some(&n));
            }
        }
        // The totals add the classes up, each request judged by its own class's SLO.
        let total = r.summary.steady.slo.as_ref().unwrap();
        let (met, n) = truth.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!((total.met, total.counted), (met, n));
        assert_eq!(total.pass, classes.iter().all(|k| k.passes()));
        let report = std::fs::read_to_string(r.bundle.dir.join("report.md")).unwrap();
        assert!(report.contains("Classes: 2 in one run"), "{report}");
        let interactive = &classes[0];
        attainment.push(interactive.slo.as_ref().unwrap().attainment);
    }
    eprintln!(
        "interactive attainment fcfs {:.3}, priority {:.3}",
        attainment[0], attainment[1]
    );
    // Batch prefill in front of them breaks the interactive class's SLO; priority restores it.
    assert!(attainment[0] < 0.9, "{attainment:?}");
    assert!(attainment[1] > attainment[0] + 0.2, "{attainment:?}");
    assert!(prio.summary.classes.as_ref().unwrap()[0].passes());

    let (a, b) = (
        goodput::compare::load_side(&fcfs.bundle.dir).unwrap(),
        goodput::compare::load_side(&prio.bundle.dir).unwrap(),
    );
    let cmp = goodput::compare::compare(&a, &b, 0.05);
    assert!(cmp.refused.is_empty(), "{:?}", cmp.refused);
    assert_eq!(cmp.diffs.len(), 1, "{:?}", cmp.diffs);
    assert_eq!(cmp.diffs[0].axis, "target");
    let m = |name: &str| {
        cmp.metrics
            .iter()
            .find(|m| m.metric == name)
            .unwrap_or_else(|| panic!("{name} compared"))
    };
    for name in ["interactive: attainment", "interactive: ttft_p99_ms"] {
        assert_eq!(
            m(name).verdict,
            goodput::compare::MetricVerdict::Better,
            "{:?}",
            m(name)
        );
    }
}

/// A quick simulated engine, so a capacity point of a few hundred requests takes seconds.
const CAPACITY: &str = r#"name = "cap-classes"
[target.simulator]
prefill_tokens_per_s = 20000
decode_base_ms = 8
decode_per_seq_ms = 0.1
[workload]
seed = 5
[load]
kind = "open"
rate = 20
requests = 300
[warmup]
requests = 30
[[class]]
name = "interactive"
share = 0.8
[class.workload]
input_tokens = { dist = "fixed", value = 200 }
output_tokens = { dist = "fixed", value = 6 }
[class.slo]
ttft_ms = 200
percentile = 90
attainment = 0.8
[[class]]
name = "batch"
share = 0.2
[class.workload]
input_tokens = { dist = "fixed", value = 1500 }
output_tokens = { dist = "fixed", value = 12 }
[class.slo]
e2e_ms = 3000
percentile = 90
attainment = 0.8
"#;

/// `sweep --capacity` with classes: the highest total rate (shares fixed) at which every class
/// meets its own SLO and the run is VALID, naming the class that fails first; within 10% of
/// the same search judged by the same analysis on the discrete-event clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_with_classes_names_the_limiting_class_and_matches_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cap.toml");
    std::fs::write(&path, CAPACITY).unwrap();
    let o = common::sweep_options(dir.path());
    let (parent, r) =
        goodput::sweep::capacity(&path, CAPACITY, 0.05, 9, std::time::Duration::ZERO, &o)
            .await
            .unwrap();
    let c = r.capacity.as_ref().unwrap();
    if common::stopped_by_the_machine(&parent, &r) {
        return;
    }
    let (lo, hi) = (c.capacity_rps.unwrap(), c.failed_at_rps.unwrap());
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(
        md.contains("at which every class meets its own SLO (`interactive`: TTFT p90 ≤ 200 ms"),
        "{md}"
    );
    // The failing point names its limiting class.
    let failing = common::point_at(&r, hi);
    let why = failing.fails_because.as_deref().unwrap_or_default();
    // Where the client could not keep the failing point's schedule, that point is INVALID and
    // rightly fails, before any class does: the search ended on the client's limit, and the
    // class and simulator checks below have nothing to check. On this VM at its usual speed
    // the client keeps these rates (0.2 ms dispatch lag at p99); in the host's slow spells
    // (2026-12-03) its dispatch thread woke 3-4 ms late at p99 and all three tries ended so.
    // A client behind on a machine that wakes it on time still fails.
    if why.starts_with("INVALID: the client fell behind its schedule")
        && common::the_machine_kept_the_client_behind(&failing.bundle)
    {
        eprintln!("the search ended where the machine kept the client behind, not a class: {why}");
        return;
    }
    assert!(why.starts_with("class `"), "{why}");
    assert!(md.contains(why), "{md}");

    // Each point of the search drew its own arrivals (issue #71): the simulator's capacity is
    // the median over ten draws of the same search on its discrete-event clock, and the
    // client's answer the rate its passing point offered.
    let each = common::des_capacities(CAPACITY, 20.0, 0..10).await;
    let t = (each[4] + each[5]) / 2.0;
    let lo = c.offered_rps.unwrap_or(lo);
    // Which class limits on the simulator's clock, just above its capacity (every draw's).
    let above = {
        let text =
            goodput::sweep::set_key(CAPACITY, "load.rate", &format!("{:.4}", each[9] * 1.08))
                .unwrap();
        let c = goodput::contract::parse(&text, Path::new("cap.toml")).unwrap();
        let s = summarize(&c, &common::des_records(&c, 40), &Context::default());
        goodput::analyze::classes::limiting(s.classes.as_ref().unwrap()).map(|k| k.name.clone())
    };
    eprintln!(
        "client {lo:.2}–{hi:.2} req/s ({why}); simulator {t:.2}, limited by {above:?}; tried {:?}",
        c.tried
    );
    assert!(
        (lo - t).abs() / t <= 0.15,
        "client {lo} vs simulator {t} ({each:?})"
    );
    if let Some(name) = above {
        assert!(why.contains(&format!("`{name}`")), "{why} vs {name}");
    }
}

/// What a user can get wrong in `[[class]]`, each a contract error naming file, line and key.
#[test]
fn class_mistakes_are_contract_errors_naming_file_line_and_key() {
    let base = "name = \"x\"\n[load]\nrate = 5\nrequests = 10\n";
    let class =
        |name: &str, share: &str, extra: &str| format!("[[class]]\n{name}share = {share}\n{extra}");
    let cases: Vec<(String, &str, usize, &str)> = vec![
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "0.5", ""),
                class("name = \"b\"\n", "0.3", "")
            ),
            "class[0].share",
            7,
            "sum to 0.8",
        ),
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "60", ""),
                class("name = \"b\"\n", "30", "")
            ),
            "class[0].share",
            7,
            "or to 100, as percent",
        ),
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "0.5", ""),
                class("", "0.5", "")
            ),
            "class[1].name",
            8,
            "has no name",
        ),
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "0.5", ""),
                class("name = \"a\"\n", "0.5", "")
            ),
            "class[1].name",
            9,
            "another class has this name",
        ),
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "0.5", "[class.slo]\nttfb_ms = 200\n"),
                class("name = \"b\"\n", "0.5", "")
            ),
            "class.slo.ttfb_ms",
            9,
            "unknown field `ttfb_ms`",
        ),
        (
            format!(
                "{base}{}{}",
                class("name = \"a\"\n", "0.5", "[class.slo]\nttft_ms = -3\n"),
                class("name = \"b\"\n", "0.5", "")
            ),
            "class[0].slo.ttft_ms",
            9,
            "must be > 0",
        ),
        (
            format!(
                "{base}{}",
                class(
                    "name = \"a\"\n",
                    "1",
                    "model = \"m\"\n[class.models]\nnames = [\"x\"]\n"
                )
            ),
            "class[0].models",
            9,
            "names its model once",
        ),
    ];
    for (text, key, line, words) in cases {
        let e = goodput::contract::parse(&text, Path::new("mix.toml"))
            .expect_err(&text)
            .to_string();
        assert!(
            e.starts_with(&format!("mix.toml:{line}: `{key}`: ")),
            "{e}\n---\n{text}"
        );
        assert!(e.contains(words), "{e}");
    }
}

/// Shares are honoured request by request, the plan is the same every time, a class's own
/// lengths and model reach its requests, and a contract without classes plans exactly what it
/// did before (no class, no model on any request).
#[test]
fn the_plan_draws_each_class_by_its_share_and_its_own_lengths() {
    let c = parse(CAPACITY);
    let plan = Plan::new(&c, &Default::default());
    let n = 4000;
    let mut batch = 0;
    for i in 0..n {
        let p = plan.request(i);
        match p.class.as_deref() {
            Some("batch") => {
                batch += 1;
                assert_eq!(p.output_tokens, 12);
            }
            Some("interactive") => assert_eq!(p.output_tokens, 6),
            other => panic!("{other:?}"),
        }
        assert_eq!(p, plan.request(i));
    }
    let share = f64::from(batch) / n as f64;
    assert!((share - 0.2).abs() < 0.03, "{share}");
    let plain = parse("name = \"x\"\n[load]\nrate = 5\nrequests = 10\n");
    let p = Plan::new(&plain, &Default::default()).request(3);
    assert_eq!((p.class, p.model), (None, None));
    // Classes join the axes only when present, so a class-less contract keeps the
    // fingerprints it always had; a class's SLO is part of the SLO axis.
    assert!(plain.axes().iter().all(|(_, v)| v.get("classes").is_none()));
    assert!(c.axes()[3].1.get("classes").is_some());
    assert_ne!(
        c.fingerprints().slo,
        parse(&CAPACITY.replace("ttft_ms = 200", "ttft_ms = 150"))
            .fingerprints()
            .slo
    );
}
