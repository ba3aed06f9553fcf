//! Images in the workload (`[workload.images]`), held against the simulator's ground truth:
//! the image tokens each request is, the vision encoder's time, the encoder cache's hits (none
//! for distinct images, one per repeat for a pool), the upload of a large image apart from the
//! TTFT, and a plan that makes the same bytes from the same seed.

use crate::common;

use std::collections::HashMap;

use common::{run_in, sim, truth_by_id};
use goodput::contract::images::ImageTokens;
use goodput::sim::SimConfig;

/// The simulator's rule (Qwen2-VL's 28-px tiles and two markers), as the contract states it.
const RULE: ImageTokens = ImageTokens::Grid { px: 28, extra: 2 };

fn contract(url: &str, images: &str, requests: u32) -> goodput::contract::Contract {
    common::parse(&format!(
        "name = \"images\"\n[target]\nurl = \"{url}\"\n[workload]\nseed = 3\ntokenizer = \"server\"\ninput_tokens = {{ dist = \"fixed\", value = 40 }}\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[workload.images]\n{images}\n[load]\narrival = \"poisson\"\nrate = 8\nrequests = {requests}\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0.25\n"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_tokens_and_vision_time_equal_the_simulators_truth_and_distinct_images_never_hit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SimConfig::default();
    let per_token_us = cfg.vision.ms_per_token * 1000.0;
    let server = sim(cfg).await;
    let images = "count = { dist = \"uniform\", min = 1, max = 2 }\nsizes = [\"448x336\", \"200x120\"]\ntokens = { rule = \"grid\", px = 28, extra = 2 }";
    let mut hits = 0;
    // Two runs of one contract: each draws its own cache nonce, so the second's images are
    // new to the server too.
    for _ in 0..2 {
        let r = run_in(contract(&server.base_url(), images, 24), dir.path()).await;
        let truth = truth_by_id(&server);
        let mut counts = HashMap::new();
        for rec in r.records.iter().filter(|x| x.is_ok()) {
            let g = &truth[&rec.request_id];
            let expected: u64 = rec.images.iter().map(|i| RULE.of(i.width, i.height)).sum();
            *counts.entry(rec.images.len()).or_insert(0) += 1;
            assert_eq!(g.images as usize, rec.images.len());
            assert_eq!(u64::from(g.image_tokens), expected, "{rec:?}");
            // The server's prompt tokens are the text sent and the images, nothing else.
            assert_eq!(
                rec.usage_prompt_tokens,
                Some(rec.input_tokens_planned + g.image_tokens)
            );
            // Every image is encoded: its tokens at the stated cost.
            assert_eq!(g.images_cached, 0);
            assert_eq!(
                g.vision_us,
                (f64::from(g.image_tokens) * per_token_us).round() as u64
            );
            // The encoder runs before the first token.
            let ttft = rec.first_token_us.unwrap() - rec.sent_us.unwrap();
            assert!(
                ttft >= g.vision_us,
                "ttft {ttft} µs < vision {} µs",
                g.vision_us
            );
            hits += g.images_cached;
        }
        assert!(counts.len() == 2, "1 and 2 images per request: {counts:?}");
        let i = r.summary.steady.images.as_ref().expect("images summarised");
        assert!(
            i.rule_check.as_deref().unwrap().starts_with("held"),
            "{i:?}"
        );
        let rem = i.remainder.as_ref().unwrap();
        assert_eq!((rem.min, rem.max), (0.0, 0.0));
        assert_eq!(i.repeats, 0);
        assert_eq!(i.server_hits, Some(0));
        assert!(i.server_queries.unwrap() > 0);
        assert!(i.notes.is_empty(), "{:?}", i.notes);
    }
    assert_eq!(
        hits, 0,
        "distinct images are never served from the encoder cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_repeats_are_the_encoder_caches_hits_and_a_rule_that_is_not_the_models_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::default()).await;
    // Two images in the pool, one per request: every request after the first of each member
    // repeats one. The stated rule is not the simulator's (14-px tiles), so it must not hold.
    let images = "sizes = [\"112x112\", \"56x56\"]\nreuse = \"pool\"\npool = 2\ntokens = { rule = \"grid\", px = 14 }";
    let r = run_in(contract(&server.base_url(), images, 20), dir.path()).await;
    let truth = truth_by_id(&server);
    let mut seen = std::collections::HashSet::new();
    let mut by_send: Vec<_> = r.records.iter().filter(|x| x.is_ok()).collect();
    by_send.sort_by_key(|x| x.sent_us);
    for rec in &by_send {
        let first = seen.insert(rec.images[0].sha256.clone().unwrap());
        let g = &truth[&rec.request_id];
        // The simulator admits in arrival order at this load: a repeat is a hit, and a hit
        // costs no encoding.
        assert_eq!(g.images_cached, u32::from(!first), "{rec:?}");
        assert_eq!(g.vision_us == 0, !first);
    }
    assert_eq!(seen.len(), 2, "the pool's two members");
    let i = r.summary.steady.images.as_ref().unwrap();
    assert_eq!(i.repeats, by_send.len() as u64 - 2);
    let hits = i.server_hits.unwrap();
    assert!(hits > 0 && hits <= i.repeats, "{i:?}");
    assert!(
        i.notes.iter().all(|n| !n.contains("not cold")),
        "{:?}",
        i.notes
    );
    assert!(
        i.rule_check.as_deref().unwrap().starts_with("not held"),
        "{i:?}"
    );
    assert!(i.notes.iter().any(|n| n.contains("not the text sent plus")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_mb_images_upload_is_timed_and_reported_apart_from_the_ttft() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::default()).await;
    // 1200×1200 noise: 4.3 MB of PNG, 5.8 MB of base64.
    let r = run_in(
        contract(&server.base_url(), "sizes = [\"1200x1200\"]", 6),
        dir.path(),
    )
    .await;
    for rec in r.records.iter().filter(|x| x.is_ok()) {
        let bytes = rec.images[0].bytes.unwrap();
        assert!(bytes > 4_000_000, "{bytes}");
        assert!(rec.request_bytes.unwrap() > bytes * 4 / 3);
        let upload = rec.upload_us.expect("a large body's upload is timed");
        let ttft = rec.first_token_us.unwrap() - rec.sent_us.unwrap();
        assert!(
            upload > 0 && upload < ttft,
            "upload {upload} µs, ttft {ttft} µs"
        );
    }
    let i = r.summary.steady.images.as_ref().unwrap();
    assert_eq!(i.upload_ms.as_ref().unwrap().count, 6);
    let share = i.upload_share_of_ttft.as_ref().unwrap();
    assert!(share.max < 1.0 && share.min > 0.0);
    let report = std::fs::read_to_string(r.bundle.path("report.md")).unwrap();
    assert!(report.contains("upload ms (in TTFT)"), "{report}");
    // The record keeps what was sent, never the pixels.
    let raw = std::fs::read_to_string(r.bundle.path("requests.jsonl")).unwrap();
    assert!(!raw.contains("base64") && raw.contains("\"sha256\""));
    assert!(raw.len() < 64 << 10, "{} bytes of records", raw.len());
}

#[test]
fn the_plan_makes_the_same_bytes_from_the_same_seed_and_new_ones_from_another() {
    let src = |seed: u64, nonce: &str| {
        format!(
            "name = \"p\"\n[workload]\nseed = {seed}\ncache_nonce = \"{nonce}\"\n[workload.images]\ncount = {{ dist = \"uniform\", min = 1, max = 3 }}\nsizes = [\"64x48\", \"32x32\"]\n[load]\nrate = 5\nrequests = 50\n"
        )
    };
    let hashes = |s: &str| -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let (c, inputs) = goodput::workload::parse(s, &dir.path().join("c.toml")).unwrap();
        let plan = goodput::plan::Plan::new(&c, &inputs);
        (0..50)
            .flat_map(|i| {
                let mut p = plan.request(i);
                let uris = goodput::driver::image_uris(&inputs, &mut p);
                assert_eq!(uris.len(), p.images.len());
                p.images.into_iter().map(|i| i.sha256.unwrap())
            })
            .collect()
    };
    let a = hashes(&src(1, "a1"));
    assert_eq!(a, hashes(&src(1, "a1")), "same seed and nonce, same bytes");
    let distinct: std::collections::HashSet<_> = a.iter().collect();
    assert_eq!(distinct.len(), a.len(), "no two images of a run alike");
    let other: std::collections::HashSet<_> = hashes(&src(1, "b2")).into_iter().collect();
    assert!(
        a.iter().all(|h| !other.contains(h)),
        "another run's nonce, other pixels"
    );
    assert!(a.len() > 50 && a.len() < 150);
}

#[test]
fn bad_image_inputs_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let at = |images: &str| {
        let src = format!(
            "name = \"b\"\n[load]\nrate = 1\nrequests = 1\n[workload]\nseed = 1\n[workload.images]\n{images}\n"
        );
        goodput::workload::parse(&src, &dir.path().join("c.toml"))
            .unwrap_err()
            .to_string()
    };
    let e = at("sizes = [\"0x512\"]");
    assert!(
        e.contains("c.toml:8") && e.contains("workload.images.sizes[0]") && e.contains("no pixels"),
        "{e}"
    );
    let e = at("sizes = [\"10000x10000\"]");
    assert!(
        e.contains("100.0 megapixels") && e.contains("Pillow"),
        "{e}"
    );
    let e = at("count = { dist = \"fixed\", value = 80 }\nsizes = [\"8x8\"]");
    assert!(
        e.contains("workload.images.count") && e.contains("at most 64"),
        "{e}"
    );
    let folder = dir.path().join("imgs");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), "not an image").unwrap();
    let e = at("folder = \"imgs\"");
    assert!(
        e.contains("c.toml:8")
            && e.contains("workload.images.folder")
            && e.contains("notes.txt")
            && e.contains("PNG, JPEG"),
        "{e}"
    );
    std::fs::remove_file(folder.join("notes.txt")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("gone.png"), folder.join("gone.png")).unwrap();
    let e = at("folder = \"imgs\"");
    assert!(
        e.contains("gone.png") && e.contains("cannot read it"),
        "{e}"
    );
    let e = goodput::workload::parse(
        "name = \"b\"\n[load]\nrate = 1\nrequests = 1\n[target]\napi = \"openai-completions\"\n[workload]\n[workload.images]\nsizes = [\"8x8\"]\n",
        &dir.path().join("c.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("workload.images") && e.contains("openai-chat"),
        "{e}"
    );
}

/// The Responses API carries images as `input_image` parts of a user message: the simulator
/// reads them as the Chat Completions API's, and counts them alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_api_sends_images_the_server_counts() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::default()).await;
    let text = format!(
        "name = \"responses-images\"\n[target]\nurl = \"{}\"\napi = \"openai-responses\"\n[workload]\nseed = 4\ntokenizer = \"server\"\ninput_tokens = {{ dist = \"fixed\", value = 30 }}\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[workload.images]\ncount = {{ dist = \"fixed\", value = 2 }}\nsizes = [\"84x56\"]\ntokens = {{ rule = \"grid\", px = 28, extra = 2 }}\n[load]\nrate = 10\nrequests = 6\n[warmup]\nrequests = 0\n",
        server.base_url()
    );
    let r = run_in(common::parse(&text), dir.path()).await;
    let truth = truth_by_id(&server);
    // The steady requests (the quality probes after them repeat text only).
    let ok: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.is_ok() && x.phase == goodput::plan::Phase::Steady)
        .collect();
    assert_eq!(ok.len(), 6);
    for rec in ok {
        let g = &truth[&rec.request_id];
        assert_eq!(g.images, 2);
        // 84×56 is 3×2 tiles, and two markers: 8 tokens an image.
        assert_eq!(g.image_tokens, 16);
    }
    let i = r.summary.steady.images.as_ref().unwrap();
    assert!(
        i.rule_check.as_deref().unwrap().starts_with("held"),
        "{i:?}"
    );
}
