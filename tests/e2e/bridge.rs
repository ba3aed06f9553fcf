//! Issue #72, the bridge from `vllm bench serve`: goodput's records keep every event vLLM's
//! client counts (a role-only first chunk, a finish chunk with no text), so its definitions can
//! be recomputed exactly; `compare THEIRS BUNDLE` judges each row with the noise of both sides
//! and names its cause; the definitions `audit` and `compare` give are the guide's.
//!
//! The streams in `tests/fixtures/streams/` were recorded from the real engines here
//! (llama.cpp's `scripts/real-engine.sh` server and vLLM 0.32.0's CPU build, gemma-3-270m, 4
//! tokens, 2026-12-06): each line is the event's arrival in ms from the send, then the event as
//! sent. A stand-in server replays them at those offsets.

use std::path::Path;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::IntoResponse;

use crate::common;

/// The recorded events of `name`: (offset from the request, the `data:` line).
fn recorded(name: &str) -> Vec<(Duration, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/streams")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let (ms, event) = l.trim_start().split_once(" ms  ").unwrap();
            (
                Duration::from_secs_f64(ms.parse::<f64>().unwrap() / 1e3),
                event.to_owned(),
            )
        })
        .collect()
}

/// A server that answers both OpenAI paths with the recorded stream `name`, each event at its
/// recorded offset (the engine's timing is the behaviour under measurement, not
/// synchronisation).
async fn replaying(name: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    let answer = move || async move {
        let start = tokio::time::Instant::now();
        let events = recorded(name);
        let stream = futures_util::stream::unfold(events.into_iter(), move |mut it| async move {
            let (at, event) = it.next()?;
            tokio::time::sleep_until(start + at).await;
            Some((
                Ok::<Bytes, std::io::Error>(Bytes::from(format!("{event}\n\n"))),
                it,
            ))
        });
        (
            [("content-type", "text/event-stream")],
            Body::from_stream(stream),
        )
            .into_response()
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(answer))
        .route("/v1/completions", axum::routing::post(answer))
        .route(
            "/v1/models",
            axum::routing::get(|| async {
                axum::Json(serde_json::json!({"data": [{"id": "gemma-3-270m"}]}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (
        url,
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
    )
}

/// Each engine's stream through goodput's client: the text chunks as before, and every event
/// with a choice but no text kept at its arrival — llama.cpp's role-only first chunk and its
/// finish chunk (`"delta":{}` in chat, `"text":""` in completions), vLLM's role chunk
/// (`"content":""`), never a usage chunk (`"choices":[]`) — so that vLLM's client's count of
/// events (its TTFT, ITL gaps and E2EL) is recomputed exactly: 4 tokens make 5 gaps from
/// llama.cpp's chat stream, 4 from its completions stream and from vLLM's chat stream, 3 from
/// vLLM's completions stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_keep_the_events_vllms_client_counts() {
    for (name, api, bare, gaps) in [
        ("llamacpp-chat.sse", "openai-chat", 2, 5),
        ("llamacpp-completions.sse", "openai-completions", 1, 4),
        ("vllm-chat.sse", "openai-chat", 1, 4),
        ("vllm-completions.sse", "openai-completions", 0, 3),
    ] {
        let (url, server) = replaying(name).await;
        let dir = tempfile::tempdir().unwrap();
        let c = common::parse(&format!(
            "[target]\nurl = \"{url}\"\napi = \"{api}\"\nmodel = \"gemma-3-270m\"\n\
             [workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 2\n"
        ));
        let r = common::run_in(c, dir.path()).await;
        server.abort();
        let events = recorded(name);
        for x in &r.records {
            assert_eq!(
                x.outcome,
                goodput::record::Outcome::Ok,
                "{name}: {:?}",
                x.error
            );
            assert_eq!(x.chunks.len(), 4, "{name}: text chunks");
            assert_eq!(x.bare_us.len(), bare, "{name}: {:?}", x.bare_us);
            let mut at: Vec<u64> = x.chunks.iter().map(|(t, _)| t).collect();
            at.extend(&x.bare_us);
            at.sort_unstable();
            assert_eq!(at.len() - 1, gaps, "{name}");
            // The first counted event is the stream's first (llama.cpp's role chunk comes in
            // the read of the first token): within a generous margin of its recorded offset.
            let first_ms = (at[0] - x.sent_us.unwrap()) as f64 / 1e3;
            let recorded_ms = events[0].0.as_secs_f64() * 1e3;
            assert!(
                first_ms >= recorded_ms - 1.0 && first_ms < recorded_ms + 250.0,
                "{name}: first event at {first_ms} ms, recorded at {recorded_ms}"
            );
        }
        // The bundle says its records keep these events, so a reader need not guess.
        let command: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(r.bundle.dir.join("command.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(command["records"]["choice_events"], true, "{command}");
    }
}

/// The definitions `audit` and `compare` give for vLLM's figures are the guide's, word for
/// word (docs/guide/import.md), and a `--save-detailed` result too small to estimate its noise
/// says so rather than reading DIFFERS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_and_compare_state_the_guides_definitions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide: String = std::fs::read_to_string(root.join("docs/guide/import.md"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let theirs = root.join("tests/fixtures/audit/vllm-bench-serve-detailed.json");
    let bin = || std::process::Command::new(env!("CARGO_BIN_EXE_goodput"));
    let audit = bin().arg("audit").arg(&theirs).output().unwrap();
    let text = common::unwrapped(&String::from_utf8_lossy(&audit.stdout));
    assert!(audit.status.success(), "{text}");
    let said = goodput::peers::statement::TTFT_BY_CHOICES;
    assert!(
        text.contains(said),
        "the audit does not say `{said}`:\n{text}"
    );
    assert!(guide.contains(said), "the guide does not say `{said}`");
    // A run of the fixture's shape on the simulator, and the fixture beside it.
    let sim = common::sim(goodput::sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = common::parse(&format!(
        "[target]\nurl = \"http://{}\"\napi = \"openai-completions\"\n[load]\nkind = \"open\"\nrate = 4\nrequests = 4\npin_total = true\n",
        sim.addr()
    ));
    let r = common::run_in(c, dir.path()).await;
    let out = bin()
        .arg("compare")
        .arg(&theirs)
        .arg(&r.bundle.dir)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["events"], "choices", "{b}");
    for (name, theirs, _) in b["definitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d[0].as_str().unwrap(), d[1].as_str().unwrap(), ()))
    {
        if ["TTFT", "TPOT", "ITL", "E2EL"].contains(&name) {
            assert!(
                guide.contains(&format!("| {name} | {theirs} |")),
                "the guide's table does not define {name} as compare does: `{theirs}`"
            );
        }
    }
    let ttft = b["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "TTFT median (ms)")
        .unwrap();
    // Four requests a side support no percentile at 99% confidence (the claim rule `run` and
    // `compare` apply): the difference is shown, nothing is claimed, and the row says why.
    assert!(ttft["noise"].is_null(), "{ttft}");
    assert_eq!(ttft["verdict"], "no_claim", "{ttft}");
    assert!(
        ttft["reason"].to_string().contains("p50 needs 7 requests"),
        "{ttft}"
    );
    assert!(b["explained"].to_string().contains("start_times"), "{b}");
}
