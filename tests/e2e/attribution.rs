//! Issue #74: where the time went from what the engine states in its own answers (llama.cpp's
//! `timings`, TGI's headers), with no spans. The simulator states them from its ground truth
//! (`timings = true`), so prefill, decode and cache hits are checked to the µs (TGI's whole
//! milliseconds to the ms), and the derived queue against the true one within the timing
//! tests' bounds.

use crate::common;

use common::{parse, run_in};
use goodput::plan::Phase;
use goodput::record::TimingSource;
use goodput::sim::{SimConfig, SimServer};

/// The simulator as an external server, stating llama.cpp's `timings` in its answers.
async fn timed_sim(cfg: SimConfig) -> SimServer {
    SimServer::start(
        SimConfig {
            timings: true,
            ..cfg
        },
        ([127, 0, 0, 1], 0).into(),
        None,
    )
    .await
    .unwrap()
}

/// An open-loop run against `url` with no `[measurement.traces]`.
fn contract(url: &str, workload: &str, load: &str) -> goodput::contract::Contract {
    contract_for(url, "", workload, load)
}

/// The same, with more `[target]` keys (`target`); an SLO on what the workload measures.
fn contract_for(
    url: &str,
    target: &str,
    workload: &str,
    load: &str,
) -> goodput::contract::Contract {
    let slo = if workload.contains("stream = false") {
        "e2e_ms"
    } else {
        "ttft_ms"
    };
    parse(&format!(
        r#"name = "attribution"
[target]
url = "{url}"
{target}
[workload]
seed = 7
{workload}
[load]
{load}
[warmup]
requests = 0
[slo]
{slo} = 100000
[measurement]
server_metrics_interval = 0
stop_when_decided = false
max_dispatch_lag_ms = 1000
"#
    ))
}

/// Each request's stated prefill, decode and cache hits are the simulator's ground truth to the
/// µs; the derived queue is the true queue within the timing bounds; an overloaded run's TTFT
/// p99 reads mostly queue, and says its source and what it derived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_timings_split_each_request_as_the_ground_truth_does() {
    let sim = timed_sim(SimConfig {
        max_batch: 2,
        decode_base_ms: 12.0,
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        contract(
            &sim.base_url(),
            "input_tokens = { dist = \"uniform\", min = 50, max = 300 }\noutput_tokens = { dist = \"fixed\", value = 12 }",
            "kind = \"open\"\narrival = \"constant\"\nrate = 14\nrequests = 60",
        ),
        dir.path(),
    )
    .await;
    let gt = common::truth_by_id(&sim);
    let steady: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Steady && x.is_ok())
        .collect();
    assert!(steady.len() >= 50, "{}", steady.len());
    let mut remainders = Vec::new();
    for x in &steady {
        let t = x.engine_timing.expect("every answer states its timing");
        let g = &gt[&x.request_id];
        assert_eq!(t.source, TimingSource::LlamaCpp);
        let (admitted, first) = (g.admitted_us.unwrap(), g.first_token_us.unwrap());
        assert_eq!(t.prefill_us, Some(first - admitted), "request {}", x.index);
        assert_eq!(t.decode_us, Some(g.end_us - first), "request {}", x.index);
        assert_eq!(t.cached_tokens, Some(g.cached_tokens));
        assert_eq!(t.output_tokens, Some(g.output_tokens));
        let client = (x.first_token_us.unwrap() - x.sent_us.unwrap()) as f64 / 1000.0;
        remainders.push((
            client - t.prefill_us.unwrap() as f64 / 1000.0,
            g.queue_us.unwrap() as f64 / 1000.0,
        ));
    }
    // The derived queue (each remainder less the run's smallest) against the true queue.
    let floor = remainders.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    common::assert_timing_within(
        "derived queue",
        remainders
            .iter()
            .map(|(rest, truth)| (rest - floor - truth).abs())
            .collect(),
    );
    let sp = r.summary.steady.spans.clone().expect("where the time went");
    assert_eq!(sp.source.as_deref(), Some("llama.cpp timings"));
    assert_eq!(
        (sp.joined, sp.unreported, sp.mismatched),
        (steady.len() as u64, 0, 0),
        "{:?}",
        sp.mismatches
    );
    assert!(sp.derived.as_deref().unwrap().contains("queue is derived"));
    let p99 = sp.ttft.last().unwrap();
    assert_eq!(p99.dominant, "queue", "{p99:?}");
    // Each tail's parts add up to its requests' mean latency (at or above the percentile).
    for t in sp.ttft.iter().chain(&sp.e2e) {
        assert!(t.parts.total() >= t.value_ms - 0.01, "{t:?}");
    }
    let text = goodput::report::document(&r.summary).terminal();
    assert!(
        text.contains("Where the time went: TTFT p99")
            && text.contains("[llama.cpp timings; queue derived]"),
        "{text}"
    );
    assert!(
        text.contains("Where the time went (llama.cpp timings, stated in each answer)"),
        "{text}"
    );
}

/// One stream at a time with long prompts: the TTFT tail is the engine's prefill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_heavy_single_stream_reads_mostly_prefill() {
    let sim = timed_sim(SimConfig {
        prefill_tokens_per_s: 20_000.0,
        prefix_cache_blocks: 0,
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        contract(
            &sim.base_url(),
            "input_tokens = { dist = \"fixed\", value = 3000 }\noutput_tokens = { dist = \"fixed\", value = 4 }",
            "kind = \"closed\"\nconcurrency = 1\nrequests = 12",
        ),
        dir.path(),
    )
    .await;
    let sp = r.summary.steady.spans.clone().unwrap();
    assert_eq!(sp.joined, sp.requests);
    let p99 = sp.ttft.last().unwrap();
    assert_eq!(p99.dominant, "prefill", "{p99:?}");
    assert!(p99.parts.prefill_ms > 0.8 * p99.value_ms, "{p99:?}");
}

/// A shared-prefix workload on an engine that states its cache hits and has its prefix cache
/// off is called out before the numbers (a silently disabled prefix cache makes every TTFT a
/// cold one); the same workload on the cache that serves it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_prefixes_a_server_never_cached_are_called_out() {
    for (blocks, warned) in [(0u64, true), (4096, false)] {
        let sim = timed_sim(SimConfig {
            prefix_cache_blocks: blocks,
            ..SimConfig::default()
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(
            contract(
                &sim.base_url(),
                "input_tokens = { dist = \"fixed\", value = 256 }\noutput_tokens = { dist = \"fixed\", value = 4 }\nprefix_cache = \"shared\"\nshared_prefix_tokens = 192\nprefixes = 2",
                "kind = \"closed\"\nconcurrency = 2\nrequests = 24",
            ),
            dir.path(),
        )
        .await;
        let said = r
            .summary
            .warnings
            .iter()
            .any(|w| w.starts_with("SHARED PREFIXES WERE NOT CACHED"));
        assert_eq!(
            said, warned,
            "cache of {blocks} blocks: {:?}",
            r.summary.warnings
        );
        let cached: Vec<u32> = r
            .records
            .iter()
            .filter(|x| x.phase == Phase::Steady)
            .filter_map(|x| x.engine_timing?.cached_tokens)
            .collect();
        assert_eq!(cached.iter().all(|&k| k == 0), warned, "{cached:?}");
    }
}

/// TGI's whole answers state queue and inference time in their headers: each request's equal
/// the ground truth in TGI's whole milliseconds (truncated, as TGI writes them), the parts add
/// up to the client's end-to-end time, an overloaded run's E2E tail reads mostly queue, and
/// the report says the source and what it cannot split.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tgi_headers_split_each_whole_answer_as_the_ground_truth_does() {
    let sim = timed_sim(SimConfig {
        max_batch: 1,
        decode_base_ms: 10.0,
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        contract_for(
            &sim.base_url(),
            "api = \"tgi-generate\"",
            "stream = false\ninput_tokens = { dist = \"uniform\", min = 50, max = 300 }\noutput_tokens = { dist = \"fixed\", value = 8 }",
            "kind = \"open\"\narrival = \"constant\"\nrate = 14\nrequests = 40",
        ),
        dir.path(),
    )
    .await;
    let gt = common::truth_by_id(&sim);
    let steady: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Steady && x.is_ok())
        .collect();
    assert!(steady.len() >= 30, "{}", steady.len());
    let whole_ms = |us: u64| us / 1000 * 1000;
    let mut network = Vec::new();
    for x in &steady {
        let t = x
            .engine_timing
            .expect("every whole answer states its timing");
        let g = &gt[&x.request_id];
        assert_eq!(t.source, TimingSource::Tgi);
        let admitted = g.admitted_us.unwrap();
        assert_eq!(
            t.queue_us,
            Some(whole_ms(admitted - g.arrival_us)),
            "{}",
            x.index
        );
        assert_eq!(
            t.inference_us,
            Some(whole_ms(g.end_us - admitted)),
            "{}",
            x.index
        );
        assert_eq!((t.prefill_us, t.decode_us), (None, None));
        assert_eq!(t.output_tokens, Some(g.output_tokens));
        // What the headers leave of the client's time from its send: the network and
        // framing, and what TGI's truncation drops (under 1 ms each for two figures).
        let client = (x.end_us.unwrap() - x.sent_us.unwrap()) as f64 / 1000.0;
        let server = (t.queue_us.unwrap() + t.inference_us.unwrap()) as f64 / 1000.0;
        network.push(client - server);
    }
    assert!(network.iter().all(|&n| n > -0.5), "{network:?}");
    let sp = r.summary.steady.spans.clone().expect("where the time went");
    assert_eq!(sp.source.as_deref(), Some("TGI headers"));
    assert_eq!(sp.derived, None, "TGI states its queue");
    assert_eq!(
        (sp.joined, sp.unreported, sp.mismatched),
        (steady.len() as u64, 0, 0),
        "{:?}",
        sp.mismatches
    );
    // Whole answers: no TTFT to split; the end-to-end tails are split and add up.
    assert!(sp.ttft.is_empty());
    for t in &sp.e2e {
        assert!(t.parts.total() >= t.value_ms - 0.01, "{t:?}");
        assert!(
            t.parts.inference_ms.is_some() && t.parts.decode_ms.is_none(),
            "{t:?}"
        );
    }
    let p99 = sp.e2e.last().unwrap();
    assert_eq!(p99.dominant, "queue", "one at a time at 14 req/s: {p99:?}");
    // Whole answers have no chunks: their tokens still count, at their end (a run of them once
    // read "output 0.00 tok/s").
    let th = &r.summary.steady.throughput;
    let (done, out) = (th.achieved_rps.unwrap(), th.output_tokens_per_s.unwrap());
    assert!((out / (8.0 * done) - 1.0).abs() < 0.15, "{th:?}");
    let text = goodput::report::document(&r.summary).terminal();
    for said in [
        "Where the time went: E2E p99",
        "[TGI headers]",
        "Where the time went (TGI headers, stated in each answer)",
        "prefill+decode",
        "whole milliseconds",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
}
