//! The simulator against its specification (issue #2), over real HTTP on loopback.

use crate::common;

use common::{http, median, ms, post, prompt, sim};
use goodput::sim::SimConfig;
use goodput::sim::des::{self, DesLoad, DesRequest};
use goodput::sim::model::{FaultKind, LengthAsk, fault_strikes};
use serde_json::json;

fn chat(p: &str, max: u32) -> serde_json::Value {
    json!({ "messages": [{"role": "user", "content": p}], "max_tokens": max, "ignore_eos": true,
            "stream": true, "stream_options": {"include_usage": true} })
}

fn paper() -> SimConfig {
    SimConfig {
        prefill_tokens_per_s: 10_000.0,
        decode_base_ms: 20.0,
        decode_per_seq_ms: 0.5,
        max_batch: 8,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn streams_chat_and_completions_in_the_openai_format() {
    let s = sim(SimConfig {
        decode_base_ms: 1.0,
        ..SimConfig::default()
    })
    .await;
    let h = http();
    for (path, body) in [
        ("/v1/chat/completions", chat(&prompt("a", 30), 12)),
        (
            "/v1/completions",
            json!({ "prompt": prompt("b", 30), "max_tokens": 12, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true} }),
        ),
    ] {
        let seen = post(&h, &format!("{}{path}", s.base_url()), body).await;
        assert_eq!(seen.status, 200, "{path}");
        assert!(
            seen.body.ends_with("data: [DONE]\n\n"),
            "{path}: {}",
            seen.body
        );
        assert!(
            seen.body
                .split("\n\n")
                .filter(|e| !e.is_empty())
                .all(|e| e.starts_with("data: "))
        );
        let events = seen.json();
        assert!(events.iter().all(Option::is_some), "every event is JSON");
        let events: Vec<_> = events.into_iter().flatten().collect();
        if path.contains("chat") {
            assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
            assert_eq!(events[0]["choices"][0]["delta"]["content"], "");
        }
        let text: String = seen.token_events().into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            goodput::text::count_words(&text),
            12,
            "{path}: exact output length"
        );
        let usage = events.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 12);
        assert_eq!(usage["usage"]["prompt_tokens"], 30);
        let finish = &events[events.len() - 2]["choices"][0]["finish_reason"];
        assert_eq!(finish, "length");
    }
    // Non-streaming, min_tokens honoured without ignore_eos.
    let r: serde_json::Value = h
        .post(format!("{}/v1/chat/completions", s.base_url()))
        .json(&json!({ "messages": [{"role": "user", "content": prompt("c", 5)}], "max_completion_tokens": 600, "min_tokens": 520 }))
        .send().await.unwrap().json().await.unwrap();
    let n = r["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((520..=600).contains(&n), "{n}");
    assert_eq!(
        goodput::text::count_words(r["choices"][0]["message"]["content"].as_str().unwrap()) as u64,
        n
    );
    // Other endpoints.
    let models: serde_json::Value = h
        .get(format!("{}/v1/models", s.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], s.config().model);
    assert_eq!(
        h.get(format!("{}/health", s.base_url()))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let v: serde_json::Value = h
        .get(format!("{}/version", s.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["engine"], "goodput-sim");
}

#[tokio::test]
async fn lone_request_follows_the_cost_model() {
    let s = sim(paper()).await;
    let seen = post(
        &http(),
        &format!("{}/v1/chat/completions", s.base_url()),
        chat(&prompt("lone", 1000), 20),
    )
    .await;
    let tokens = seen.token_events();
    assert_eq!(tokens.len(), 20);
    let model_ttft = 20.0 + 0.5 + 1000.0 / 10_000.0 * 1000.0;
    let model_itl = 20.5;
    let ttft = ms(tokens[0].0);
    let itl = median(tokens.windows(2).map(|w| ms(w[1].0 - w[0].0)).collect());
    let close = |got: f64, want: f64| (got - want).abs() <= (0.1 * want).max(2.0);
    assert!(
        close(ttft, model_ttft),
        "TTFT {ttft:.2} ms vs model {model_ttft}"
    );
    assert!(
        close(itl, model_itl),
        "ITL {itl:.2} ms vs model {model_itl}"
    );
}

#[tokio::test]
async fn the_ninth_concurrent_request_queues_and_metrics_show_it() {
    let s = sim(paper()).await;
    let h = http();
    let url = format!("{}/v1/chat/completions", s.base_url());
    let reqs = (0..9).map(|i| {
        let (h, url) = (h.clone(), url.clone());
        tokio::spawn(async move { post(&h, &url, chat(&prompt(&format!("q{i}"), 10), 40)).await })
    });
    let reqs: Vec<_> = reqs.collect();
    for r in reqs {
        assert_eq!(r.await.unwrap().status, 200);
    }
    let gt = s.ground_truth();
    assert_eq!(gt.len(), 9);
    let mut queue: Vec<f64> = gt
        .iter()
        .map(|g| g.queue_us.unwrap() as f64 / 1000.0)
        .collect();
    queue.sort_by(f64::total_cmp);
    // Eight fit the batch at once (at most one step of waiting); the ninth waits for a slot,
    // i.e. for a whole 40-token request (≈ 40 × 24.5 ms).
    assert!(queue[7] < 60.0, "{queue:?}");
    assert!(queue[8] > 500.0, "{queue:?}");
    let metrics = h
        .get(format!("{}/metrics", s.base_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    assert_eq!(value("vllm:request_queue_time_seconds_count"), 9.0);
    let sum: f64 = queue.iter().sum::<f64>() / 1000.0;
    assert!((value("vllm:request_queue_time_seconds_sum") - sum).abs() < 0.01);
    assert!(
        metrics.contains("vllm:num_requests_running")
            && metrics.contains("vllm:num_requests_waiting")
    );
}

#[tokio::test]
async fn a_warm_prefix_lowers_ttft_against_a_cold_prompt_of_equal_length() {
    let s = sim(SimConfig {
        prefill_tokens_per_s: 10_000.0,
        decode_base_ms: 2.0,
        ..SimConfig::default()
    })
    .await;
    let (h, url) = (http(), format!("{}/v1/chat/completions", s.base_url()));
    let shared = prompt("shared", 2000);
    post(&h, &url, chat(&shared, 2)).await; // fills the cache
    let warm = post(&h, &url, chat(&shared, 2)).await.token_events()[0].0;
    let cold = post(&h, &url, chat(&prompt("other", 2000), 2))
        .await
        .token_events()[0]
        .0;
    assert!(ms(warm) * 4.0 < ms(cold), "warm {warm:?} vs cold {cold:?}");
    let gt = s.ground_truth();
    assert_eq!(gt[1].cached_tokens, 1999);
    assert_eq!(gt[2].cached_tokens, 0);
}

fn expected(cfg: &SimConfig, n: u64, kind: FaultKind) -> usize {
    (0..n).filter(|seq| fault_strikes(cfg, *seq, kind)).count()
}

#[tokio::test]
async fn injected_errors_happen_at_the_configured_rate() {
    let mut cfg = SimConfig {
        decode_base_ms: 0.5,
        ..SimConfig::default()
    };
    cfg.faults.error_rate = 0.3;
    cfg.faults.error_status = 429;
    let s = sim(cfg.clone()).await;
    let h = http();
    let mut errors = 0;
    for i in 0..200 {
        let seen = post(
            &h,
            &format!("{}/v1/completions", s.base_url()),
            json!({"prompt": prompt(&i.to_string(), 4), "max_tokens": 2}),
        )
        .await;
        if seen.status == 429 {
            errors += 1;
        }
    }
    assert_eq!(errors, expected(&cfg, 200, FaultKind::Error));
    // 200 Bernoulli(0.3) trials: sd ≈ 6.5.
    assert!((errors as i64 - 60).abs() <= 26, "{errors}");
}

#[tokio::test]
async fn periodic_stalls_freeze_the_stream() {
    let mut cfg = SimConfig {
        decode_base_ms: 10.0,
        decode_per_seq_ms: 0.0,
        ..SimConfig::default()
    };
    cfg.faults.stall_every_ms = 1000.0;
    cfg.faults.stall_for_ms = 300.0;
    let s = sim(cfg).await;
    let seen = post(
        &http(),
        &format!("{}/v1/chat/completions", s.base_url()),
        chat(&prompt("st", 5), 250),
    )
    .await;
    let t = seen.token_events();
    let span = ms(t[t.len() - 1].0 - t[0].0);
    let big: Vec<f64> = t
        .windows(2)
        .map(|w| ms(w[1].0 - w[0].0))
        .filter(|g| *g > 200.0)
        .collect();
    // 250 steps of 10 ms plus stalls: one stall per started second of the stream.
    let periods = (span / 1000.0).floor() as usize;
    assert!(
        big.len() == periods || big.len() == periods + 1,
        "{} stalls in {span:.0} ms: {big:?}",
        big.len()
    );
    // A stall plus one step, plus up to 50 ms of wake-up delay: 16 ms was measured beside
    // three other tests on two cores; a doubled or missing stall is off by 300 ms.
    assert!(big.iter().all(|g| *g < 300.0 + 10.0 + 50.0), "{big:?}");
}

#[tokio::test]
async fn dropped_connections_malformed_events_and_slow_headers_at_their_rates() {
    let mut cfg = SimConfig {
        decode_base_ms: 1.0,
        ..SimConfig::default()
    };
    cfg.faults.drop_rate = 0.4;
    cfg.faults.malformed_rate = 0.3;
    cfg.faults.slow_headers_rate = 0.25;
    cfg.faults.slow_headers_ms = 150.0;
    let s = sim(cfg.clone()).await;
    let h = http();
    let (mut dropped, mut malformed, mut slow) = (vec![], vec![], vec![]);
    for i in 0..40u64 {
        let seen = post(
            &h,
            &format!("{}/v1/chat/completions", s.base_url()),
            chat(&prompt(&format!("f{i}"), 5), 10),
        )
        .await;
        if seen.broken {
            dropped.push(i);
            assert!(!seen.body.contains("[DONE]"));
            assert_eq!(seen.token_events().len(), 4, "cut half-way through");
        }
        if seen.json().iter().any(Option::is_none) {
            malformed.push(i);
        }
        if ms(seen.headers_after) >= 150.0 {
            slow.push(i);
        }
    }
    let which = |k| {
        (0..40)
            .filter(|q| fault_strikes(&cfg, *q, k))
            .collect::<Vec<u64>>()
    };
    assert_eq!(dropped, which(FaultKind::Drop));
    // A dropped stream ends before its malformed event would have been sent.
    let malformed_expected: Vec<u64> = which(FaultKind::Malformed)
        .into_iter()
        .filter(|q| !dropped.contains(q))
        .collect();
    assert_eq!(malformed, malformed_expected);
    assert_eq!(slow, which(FaultKind::SlowHeaders));
    assert!(
        dropped.len() >= 6 && slow.len() >= 3,
        "rates implausibly low: {dropped:?} {slow:?}"
    );
    let gt = s.ground_truth();
    assert_eq!(
        gt.iter()
            .filter(|g| g.outcome == goodput::sim::SimOutcome::Dropped)
            .count(),
        dropped.len()
    );
}

#[tokio::test]
async fn discrete_event_mode_reproduces_http_mode_timings() {
    let cfg = SimConfig {
        prefill_tokens_per_s: 8000.0,
        decode_base_ms: 8.0,
        decode_per_seq_ms: 0.3,
        ..SimConfig::default()
    };
    let s = sim(cfg.clone()).await;
    let h = http();
    // 60 requests, Poisson at 12 req/s from a fixed seed, prompts 100–400 tokens, 30 outputs.
    let c = goodput::contract::parse(
        "[workload]\nseed = 3\ninput_tokens = { dist = \"uniform\", min = 100, max = 400 }\n[load]\nmodel = \"open\"\nrate = 12\nrequests = 60\n",
        std::path::Path::new("t.toml"),
    ).unwrap();
    let plan = goodput::plan::Plan::new(&c, &Default::default());
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    let arrivals: Vec<u64> = plan.arrivals().unwrap().take(60).collect();
    for (i, at) in arrivals.into_iter().enumerate() {
        let r = plan.request(i as u64);
        tokio::time::sleep_until(start + std::time::Duration::from_micros(at)).await;
        let (h, url) = (h.clone(), format!("{}/v1/chat/completions", s.base_url()));
        tasks.push(tokio::spawn(async move {
            post(&h, &url, chat(&r.prompt, 30)).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut http_gt = s.ground_truth();
    http_gt.sort_by_key(|g| g.arrival_us);
    let t0 = http_gt[0].arrival_us;
    // Replay what the server saw, at the times it saw it, on the virtual clock. Timing depends
    // on prompt length (prompts are unique, so no prefix is shared), not on the words.
    let reqs: Vec<DesRequest> = http_gt
        .iter()
        .map(|g| DesRequest {
            arrival_s: (g.arrival_us - t0) as f64 / 1e6,
            prompt: prompt(&format!("des{}", g.seq), g.prompt_tokens as usize),
            ask: LengthAsk {
                max_tokens: Some(30),
                min_tokens: None,
                ignore_eos: true,
            },
            priority: 0,
            model: None,
        })
        .collect();
    let des_gt = des::run(&cfg, DesLoad::Open(reqs));
    assert_eq!(des_gt.len(), http_gt.len());
    let ttft = |g: &goodput::sim::GroundTruth| (g.first_token_us.unwrap() - g.arrival_us) as f64;
    let e2e = |g: &goodput::sim::GroundTruth| (g.end_us - g.arrival_us) as f64;
    for metric in [ttft, e2e] {
        let rel: Vec<f64> = http_gt
            .iter()
            .zip(&des_gt)
            .map(|(a, b)| (metric(a) - metric(b)).abs() / metric(b))
            .collect();
        let (mh, md) = (
            median(http_gt.iter().map(metric).collect()),
            median(des_gt.iter().map(metric).collect()),
        );
        eprintln!(
            "http {mh} des {md} per-request median rel {:.4}",
            median(rel.clone())
        );
        assert!(
            median(rel.clone()) <= 0.05,
            "per-request median relative error {:.3}",
            median(rel)
        );
        // The medians of 60 requests also carry how this loaded 2-core machine scheduled the
        // HTTP run (seen 5.3% apart once in CI-like conditions): a generous 10%.
        assert!((mh - md).abs() / md <= 0.10, "medians {mh} vs {md}");
    }
}

#[tokio::test]
async fn bad_configuration_is_refused_with_key_and_range() {
    let mut cfg = SimConfig::default();
    cfg.faults.stall_every_ms = 100.0;
    cfg.faults.stall_for_ms = 500.0;
    let e = goodput::sim::SimServer::start(cfg, ([127, 0, 0, 1], 0).into(), None)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("faults.stall_for_ms") && e.contains("shorter than"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sim.toml");
    std::fs::write(&f, "seed = 1\n\n[faults]\nerror_rate = 2\n").unwrap();
    let e = goodput::cli::sim_config(Some(&f), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sim.toml:4") && e.contains("faults.error_rate") && e.contains("[0, 1]"),
        "{e}"
    );
    std::fs::write(&f, "max_bacth = 3\n").unwrap();
    let e = goodput::cli::sim_config(Some(&f), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_bacth"), "{e}");
    let e = goodput::cli::sim_config(None, &["max_batch=0".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_batch") && e.contains(">= 1"), "{e}");
    let e = goodput::cli::sim_config(None, &["prefill_tokens_per_s=-5".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("prefill_tokens_per_s"), "{e}");
}
