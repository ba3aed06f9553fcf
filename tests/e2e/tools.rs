//! Tool calls graded per request (`dataset_format` `tools` or `bfcl`), held against the
//! simulator's ground truth: each request's grade is what the simulator did to its calls, the
//! SLO counts only right answers, wrong calls that grow with load lower goodput at the same
//! latency, and bad tool files are refused naming file, line and key.

use std::path::Path;

use crate::common;

use common::{run_in, sim, truth_by_id};
use goodput::plan::Phase;
use goodput::quality::tools::Verdict;
use goodput::sim::SimConfig;

/// Lines of goodput's own format whose prompts write the calls the simulator makes
/// (`name{arguments}`): one or two calls each, of two tools.
fn calls_file(dir: &Path) -> std::path::PathBuf {
    let weather = serde_json::json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}});
    let add = serde_json::json!({"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}});
    let mut lines = Vec::new();
    for i in 0..12 {
        let w = serde_json::json!({"city": format!("City{i}"), "days": i % 3 + 1});
        let s = serde_json::json!({"a": i, "b": 2 * i + 1});
        let (prompt, expected) = if i % 3 == 0 {
            (
                format!("Add them, then the weather: add{s} get_weather{w}"),
                serde_json::json!([{"name": "add", "arguments": s}, {"name": "get_weather", "arguments": w}]),
            )
        } else {
            (
                format!("What is the weather? get_weather{w}"),
                serde_json::json!([{"name": "get_weather", "arguments": w}]),
            )
        };
        lines.push(
            serde_json::json!({"id": format!("case-{i}"), "prompt": prompt, "tools": [weather, add], "expected": expected})
                .to_string(),
        );
    }
    let path = dir.join("calls.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The verdict the grader must give an answer the simulator made wrong in this way (its
/// ground truth's `tool_error`).
fn verdict_of(tool_error: Option<&str>) -> Verdict {
    match tool_error {
        None => Verdict::Correct,
        Some("truncated") => Verdict::Unparsable,
        Some("wrong_value") => Verdict::WrongArguments,
        Some("wrong_name") => Verdict::WrongName,
        Some("no_call") => Verdict::NoCall,
        Some(other) => panic!("unknown tool error {other}"),
    }
}

fn contract(url: &str, dataset: &Path, rate: f64, requests: u32, slo: &str) -> String {
    format!(
        "name = \"tools\"\n[target]\nurl = \"{url}\"\n[workload]\nprompt_source = \"dataset\"\ndataset = \"{}\"\noutput_tokens = {{ dist = \"fixed\", value = 64 }}\nenforce_output_length = false\n[load]\narrival = \"poisson\"\nrate = {rate}\nrequests = {requests}\n[warmup]\nrequests = 0\n[slo]\n{slo}\n",
        dataset.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_grade_is_what_the_simulator_did_and_only_right_answers_meet_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::instant();
    cfg.faults.tool_error_rate = 0.3;
    let server = sim(cfg).await;
    let file = calls_file(dir.path());
    let c = common::parse(&contract(
        &server.base_url(),
        &file,
        40.0,
        80,
        "ttft_ms = 5000\ne2e_ms = 60000",
    ));
    let r = run_in(c, dir.path()).await;
    let truth = truth_by_id(&server);
    let (mut graded, mut right, mut kinds) = (0, 0, std::collections::HashSet::new());
    for rec in r.records.iter().filter(|x| x.is_ok()) {
        let g = &truth[&rec.request_id];
        let grade = rec.tool_grade.as_ref().expect("every answer is graded");
        let expected = verdict_of(g.tool_error.as_deref());
        assert_eq!(grade.verdict, expected, "{rec:?} truth {g:?}");
        assert_eq!(rec.tool_calls.len() as u32, g.tool_calls);
        kinds.insert(grade.verdict);
        if rec.phase == Phase::Steady {
            graded += 1;
            right += u64::from(grade.verdict == Verdict::Correct);
        }
    }
    assert!(kinds.len() >= 4, "{kinds:?}");
    let t = r.summary.steady.tools.as_ref().expect("a tools section");
    assert_eq!((t.graded, t.correct), (graded, right));
    assert!(t.counted_in_slo);
    // Every request is on time: attainment is the share of right answers exactly.
    assert_eq!(t.on_time, Some(graded));
    let slo = r.summary.steady.slo.as_ref().unwrap();
    assert!((slo.attainment - right as f64 / graded as f64).abs() < 1e-9);
    assert!(right < graded && right > 0, "{right} of {graded}");
    // The report says it; the resolved contract keeps the rule and the SLO's choice.
    let report = std::fs::read_to_string(r.bundle.path("report.md")).unwrap();
    assert!(
        report.contains("Tool calls, graded per request"),
        "{report}"
    );
    assert!(
        report.contains("on time with correct tool calls"),
        "{report}"
    );
    let resolved = std::fs::read_to_string(r.bundle.path("contract.toml")).unwrap();
    assert!(resolved.contains("rule = \"exact\""), "{resolved}");
    assert!(resolved.contains("correct_tool_calls = true"), "{resolved}");
}

/// The Responses and Messages APIs send tools in their own shapes and stream calls in their
/// own events (a `function_call` item and its arguments' deltas; a `tool_use` block and its
/// `input_json_delta`s); streamed or whole, every grade is still what the simulator did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_and_messages_apis_send_tools_and_read_calls_back_streamed_or_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::instant();
    cfg.faults.tool_error_rate = 0.4;
    let server = sim(cfg).await;
    let file = calls_file(dir.path());
    for api in ["openai-responses", "anthropic-messages"] {
        for stream in [true, false] {
            let text = contract(&server.base_url(), &file, 40.0, 30, "e2e_ms = 60000")
                .replacen("[target]\n", &format!("[target]\napi = \"{api}\"\n"), 1)
                .replacen(
                    "[workload]\n",
                    &format!("[workload]\nstream = {stream}\n"),
                    1,
                );
            let r = run_in(
                common::parse(&text),
                &dir.path().join(format!("{api}-{stream}")),
            )
            .await;
            let truth = truth_by_id(&server);
            let (mut graded, mut two_calls, mut wrong) = (0, 0, 0);
            for rec in r.records.iter().filter(|x| x.is_ok()) {
                let g = &truth[&rec.request_id];
                let grade = rec.tool_grade.as_ref().expect("every answer is graded");
                let expected = verdict_of(g.tool_error.as_deref());
                assert_eq!(
                    grade.verdict, expected,
                    "{api} stream {stream}: {rec:?} truth {g:?}"
                );
                assert_eq!(rec.tool_calls.len() as u32, g.tool_calls, "{api} {stream}");
                graded += 1;
                two_calls += usize::from(rec.tool_calls.len() == 2);
                wrong += usize::from(grade.verdict != Verdict::Correct);
            }
            assert_eq!(graded, 30, "{api} stream {stream}: every request answered");
            assert!(
                two_calls > 0 && wrong > 0,
                "{api} {stream}: {two_calls} {wrong}"
            );
        }
    }
}

/// Wrong calls that grow with the requests in the engine: at a high rate more answers are
/// wrong than at a low one, while every request is on time, so goodput falls where latency
/// says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_calls_that_grow_with_load_lower_goodput_at_the_same_latency() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig {
        decode_base_ms: 60.0,
        ..SimConfig::default()
    };
    cfg.faults.tool_error_per_request = 0.05;
    let server = sim(cfg).await;
    let file = calls_file(dir.path());
    let mut shares = Vec::new();
    for rate in [4.0, 40.0] {
        let c = common::parse(&contract(
            &server.base_url(),
            &file,
            rate,
            24,
            "e2e_ms = 60000",
        ));
        let r = run_in(c, dir.path()).await;
        let t = r.summary.steady.tools.clone().unwrap();
        // On time, all of them: latency alone would call both runs perfect.
        assert_eq!(t.on_time, Some(t.graded), "rate {rate}");
        // Every on-time request meets the SLO exactly when it is correct: attainment is the
        // correct answers over every steady request (a failed one, if any, counts as missed).
        let attainment = r.summary.steady.slo.as_ref().unwrap().attainment;
        let steady = r
            .records
            .iter()
            .filter(|x| x.phase == Phase::Steady)
            .count();
        assert!(
            (attainment - t.correct as f64 / steady as f64).abs() < 1e-9,
            "rate {rate}: attainment {attainment}, {steady} steady, {t:?}, errors {:?}",
            r.summary.steady.first_errors
        );
        shares.push(t.correct_share.unwrap());
    }
    // At 4 req/s about one request is in the engine (about 5% wrong); at 40 req/s, tens are
    // (most wrong).
    assert!(shares[0] >= 0.85, "{shares:?}");
    assert!(shares[1] <= shares[0] - 0.3, "{shares:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bfcl_category_is_read_with_its_answers_and_graded_by_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("possible_answer")).unwrap();
    // BFCL's simple_python_0 and _1 as bfcl-eval ships them; the simulator calls the first tool
    // with the arguments the prompt writes, so the second prompt is made to write them.
    let q = [
        r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "Find the area of a triangle with a base of 10 units and height of 5 units."}]], "function": [{"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given its base and height.", "parameters": {"type": "dict", "properties": {"base": {"type": "integer", "description": "The base of the triangle."}, "height": {"type": "integer", "description": "The height of the triangle."}, "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"}}, "required": ["base", "height"]}}]}"#,
        r#"{"id": "simple_python_1", "question": [[{"role": "user", "content": "Calculate the factorial of 5 using math functions: math_factorial{\"number\": 5}"}]], "function": [{"name": "math.factorial", "description": "Calculate the factorial of a given number.", "parameters": {"type": "dict", "properties": {"number": {"type": "integer", "description": "The number for which factorial needs to be calculated."}}, "required": ["number"]}}]}"#,
    ];
    let a = [
        r#"{"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]}"#,
        r#"{"id": "simple_python_1", "ground_truth": [{"math.factorial": {"number": [5]}}]}"#,
    ];
    let file = data.join("BFCL_v4_simple_python.json");
    std::fs::write(&file, q.join("\n") + "\n").unwrap();
    std::fs::write(
        data.join("possible_answer/BFCL_v4_simple_python.json"),
        a.join("\n") + "\n",
    )
    .unwrap();
    let server = sim(SimConfig::instant()).await;
    let c = common::parse(&contract(
        &server.base_url(),
        &file,
        20.0,
        10,
        "e2e_ms = 60000",
    ));
    let r = run_in(c, dir.path()).await;
    for rec in r.records.iter().filter(|x| x.is_ok()) {
        let g = rec.tool_grade.as_ref().unwrap();
        match rec.tool_entry.as_deref() {
            // No arguments written: base and height missing.
            Some("simple_python_0") => {
                assert_eq!(g.verdict, Verdict::WrongArguments, "{g:?}");
                assert!(
                    g.why
                        .as_deref()
                        .unwrap()
                        .contains("missing required parameter base")
                );
            }
            Some("simple_python_1") => assert_eq!(g.verdict, Verdict::Correct, "{rec:?}"),
            other => panic!("{other:?}"),
        }
    }
    let resolved = std::fs::read_to_string(r.bundle.path("contract.toml")).unwrap();
    assert!(
        resolved.contains("category = \"simple_python\""),
        "{resolved}"
    );
    assert!(resolved.contains("rule = \"simple\""), "{resolved}");
    assert!(resolved.contains("answers_sha256"), "{resolved}");
}

#[test]
fn bad_tool_datasets_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let read = |name: &str, body: &str, extra: &str| {
        let file = d.join(name);
        std::fs::write(&file, body).unwrap();
        let src = format!(
            "[target]\nurl = \"http://127.0.0.1:9\"\n{extra}[workload]\nprompt_source = \"dataset\"\ndataset = \"{}\"\noutput_tokens = {{ dist = \"fixed\", value = 64 }}\nenforce_output_length = false\n[load]\nrate = 1\nrequests = 1\n",
            file.display()
        );
        let c = d.join("c.toml");
        std::fs::write(&c, &src).unwrap();
        goodput::workload::load(&c).unwrap_err().to_string()
    };
    let tool = r#"{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}"#;
    let e = read(
        "t.jsonl",
        &format!(
            "{{\"prompt\": \"p\", \"tools\": [{tool}], \"expected\": [{{\"name\": \"f\"}}]}}\n{{\"prompt\": \"p\", \"tools\": [{tool}], \"expected\": [{{\"name\": \"g\"}}]}}\n"
        ),
        "",
    );
    assert!(
        e.contains("c.toml:5") && e.contains("workload.dataset"),
        "{e}"
    );
    assert!(
        e.contains("t.jsonl:2: `expected[0].name` \"g\" names no tool"),
        "{e}"
    );
    let e = read(
        "t.jsonl",
        r#"{"prompt": "p", "tools": [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "int"}}}}], "expected": [{"name": "f"}]}"#,
        "",
    );
    assert!(
        e.contains(
            "t.jsonl:1: `tools[0].parameters.properties.a.type` is \"int\", not a JSON Schema type"
        ),
        "{e}"
    );
    let e = read(
        "BFCL_v4_irrelevance.json",
        r#"{"id": "irrelevance_0", "question": [[{"role": "user", "content": "q"}]], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]}"#,
        "",
    );
    assert!(
        e.contains("workload.dataset") && e.contains("BFCL's irrelevance category"),
        "{e}"
    );
    // An API that cannot offer tools.
    let e = read(
        "t.jsonl",
        &format!(
            "{{\"prompt\": \"p\", \"tools\": [{tool}], \"expected\": [{{\"name\": \"f\"}}]}}\n"
        ),
        "api = \"openai-completions\"\n",
    );
    assert!(
        e.contains("target.api") && e.contains("offers tools"),
        "{e}"
    );
}

/// Speculative decoding on the simulator: each request's drafted and accepted tokens, as its
/// answer states them (llama.cpp's `timings`), equal the truth; the less accepted requests
/// decode slower; the server's counters over the window agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acceptance_per_request_equals_the_truth_and_explains_tpot() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig {
        timings: true,
        ..SimConfig::default()
    };
    cfg.speculative.draft_tokens = 4;
    cfg.speculative.acceptance = 0.55;
    cfg.speculative.spread = 0.4;
    let server = sim(cfg).await;
    let c = common::parse(&format!(
        "name = \"spec\"\n[target]\nurl = \"{}\"\n[workload]\ninput_tokens = {{ dist = \"fixed\", value = 32 }}\noutput_tokens = {{ dist = \"fixed\", value = 48 }}\n[load]\nrate = 20\nrequests = 40\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0.25\n",
        server.base_url()
    ));
    let r = run_in(c, dir.path()).await;
    let truth = truth_by_id(&server);
    let (mut drafted, mut accepted) = (0u64, 0u64);
    for rec in r.records.iter().filter(|x| x.is_ok()) {
        let g = &truth[&rec.request_id];
        let t = rec.engine_timing.expect("timings stated");
        assert_eq!(
            (t.draft_tokens, t.draft_accepted),
            (Some(g.draft_tokens), Some(g.draft_accepted)),
            "{rec:?}"
        );
        assert!(g.draft_tokens > 0);
        if rec.phase == Phase::Steady {
            drafted += u64::from(g.draft_tokens);
            accepted += u64::from(g.draft_accepted);
        }
    }
    let s = r.summary.steady.speculative.as_ref().expect("drafts seen");
    assert_eq!(s.source, "per request (llama.cpp timings)");
    assert_eq!((s.drafted, s.accepted), (drafted, accepted));
    // Acceptance differs by prompt (0.15 to 0.95): the less accepted decode slower.
    let (lo, hi) = (s.tpot_p50_low_ms.unwrap(), s.tpot_p50_high_ms.unwrap());
    assert!(
        lo > hi * 1.2,
        "TPOT {lo} ms (low acceptance) vs {hi} ms (high)"
    );
    let server_side = r.summary.server.as_ref().and_then(|x| x.drafts.clone());
    let d = server_side.expect("the counters over the window");
    assert!(d.drafted > 0 && d.accepted <= d.drafted, "{d:?}");
    let report = std::fs::read_to_string(r.bundle.path("report.md")).unwrap();
    assert!(report.contains("Speculative decoding:"), "{report}");
}

/// Two runs of one contract whose servers draft alike but accept differently: the compare's
/// quality guard calls the acceptance's move a changed output regime, not a win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_acceptance_is_a_changed_output_regime_in_compare() {
    let dir = tempfile::tempdir().unwrap();
    let mut bundles = Vec::new();
    for acceptance in [0.3, 0.9] {
        let mut cfg = SimConfig {
            timings: true,
            ..SimConfig::instant()
        };
        cfg.speculative.draft_tokens = 4;
        cfg.speculative.acceptance = acceptance;
        cfg.speculative.spread = 0.0;
        let server = sim(cfg).await;
        let c = common::parse(&format!(
            "name = \"spec\"\n[target]\nurl = \"{}\"\n[workload]\ninput_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 32 }}\n[load]\nrate = 40\nrequests = 30\n[warmup]\nrequests = 0\n",
            server.base_url()
        ));
        let r = run_in(c, dir.path()).await;
        bundles.push(r.bundle.dir.clone());
    }
    let a = goodput::compare::load_side(&bundles[0]).unwrap();
    let b = goodput::compare::load_side(&bundles[1]).unwrap();
    let g = goodput::compare::quality_guard(&a, &b);
    assert!(!g.held(), "{g:?}");
    assert!(g.detail.contains("changed output regime"), "{}", g.detail);
    // The same acceptance on both sides is no change.
    let g = goodput::compare::quality_guard(&b, &b);
    assert!(!g.detail.contains("changed output regime"), "{}", g.detail);
}
