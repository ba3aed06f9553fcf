//! Secrets never reach disk or the terminal: recognisable values planted in the API key, a
//! password in the URL, a `[cold_start] env` value and a header read from the environment, against a server that echoes every
//! request header back (in its probe answers, in 401 bodies and in the generated text) and a
//! launched process that prints its environment, are found in no file written, nor on stdout
//! or stderr.

use crate::common;

use std::path::Path;

use base64::Engine;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const KEY: &str = "sk-PLANTED-apikey-7f3a9";
const PASSWORD: &str = "PLANTED-pw-c41d";
const ENV_VALUE: &str = "hf_PLANTED-token-22be";
/// A `[target.request] headers` value read from the environment.
const HEADER_VALUE: &str = "rk-PLANTED-header-5e1c";

/// Answers everything, echoing the request's head: probes as JSON, every second completion
/// as a 401 quoting it, the others as a stream whose text is the head.
async fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut n = 0u64;
        while let Ok((mut sock, _)) = listener.accept().await {
            n += 1;
            tokio::spawn(async move {
                let Some((method, path, head)) = common::read_request(&mut sock).await else {
                    return;
                };
                let echoed = serde_json::to_string(&head).unwrap();
                let resp = if method == "GET" {
                    let body = if path == "/v1/models" {
                        format!(r#"{{"object":"list","data":[{{"id":"m","echo":{echoed}}}]}}"#)
                    } else {
                        format!(r#"{{"version":"echo","echo":{echoed}}}"#)
                    };
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else if n % 2 == 0 {
                    let body = format!(r#"{{"error":"unauthorized: you sent {echoed}"}}"#);
                    format!(
                        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    let mut s = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_owned();
                    s += &format!(
                        "data: {{\"id\":\"c\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{echoed}}},\"finish_reason\":\"length\"}}]}}\n\n"
                    );
                    s += "data: [DONE]\n\n";
                    s
                };
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    url
}

/// Every file under `dir`, read as bytes.
fn all_files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_are_in_no_file_and_on_no_terminal() {
    let url = echo_server().await;
    let authority = url.trim_start_matches("http://").to_owned();
    let dir = tempfile::tempdir().unwrap();
    let c = format!(
        "name = \"secrets\"\n[target]\nurl = \"http://alice:{PASSWORD}@{authority}\"\napi_key_env = \"GOODPUT_TEST_KEY\"\n[cold_start]\nlaunch = [\"sh\", \"-c\", \"echo token=$HF_TOKEN; echo token=$HF_TOKEN >&2; exec sleep 300\"]\nrequests = 2\nstop_grace = 1\nenv = {{ HF_TOKEN = \"{ENV_VALUE}\" }}\n[target.request]\nextra_body = {{ priority = 7, chat_template_kwargs = {{ enable_thinking = false }} }}\nheaders = {{ x-router-key = {{ env = \"GOODPUT_TEST_HEADER\" }}, x-session = \"s-42\" }}\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 10\n[warmup]\nrequests = 0\n[quality]\nmode = \"consistency\"\nkeep_text = true\n"
    );
    let path = dir.path().join("c.toml");
    std::fs::write(&path, &c).unwrap();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["run", path.to_str().unwrap(), "--out"])
            .arg(d.join("runs"))
            .env("GOODPUT_TEST_KEY", KEY)
            .env("GOODPUT_TEST_HEADER", HEADER_VALUE)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let mut files = Vec::new();
    all_files(&dir.path().join("runs"), &mut files);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    // The run did what it had to: the server saw the key, and the echoes were recorded.
    assert!(
        names.iter().any(|n| n.ends_with("requests.jsonl"))
            && names.iter().any(|n| n.ends_with("environment.json"))
            && names.iter().any(|n| n.ends_with("server.stdout.log")),
        "{names:?}\n{stderr}"
    );
    let text_of = |name: &str| {
        files
            .iter()
            .find(|(n, _)| n.ends_with(name))
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .unwrap()
    };
    let records = text_of("requests.jsonl");
    assert!(
        records.contains("Bearer [redacted]") && records.contains("HTTP 401"),
        "the echoes did not reach the records:\n{records}"
    );
    // The server received the extra body fields and both headers: the planted one, as the
    // echo recorded it, only in its redacted form.
    for sent in [
        r#"\"priority\":7"#,
        r#"\"chat_template_kwargs\":{\"enable_thinking\":false}"#,
        "x-router-key: [redacted]",
        "x-session: s-42",
    ] {
        let escaped = serde_json::to_string(sent).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        assert!(
            records.contains(sent) || records.contains(escaped),
            "the server did not receive {sent}:\n{records}"
        );
    }
    // The bundle's contract names the variable, never its value.
    let contract = text_of("contract.toml");
    assert!(contract.contains("GOODPUT_TEST_HEADER"), "{contract}");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{PASSWORD}"));
    for secret in [KEY, PASSWORD, ENV_VALUE, HEADER_VALUE, basic.as_str()] {
        assert!(!stdout.contains(secret), "{secret} on stdout:\n{stdout}");
        assert!(!stderr.contains(secret), "{secret} on stderr:\n{stderr}");
        for (name, bytes) in &files {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} in {name}"
            );
        }
    }
}

/// Issue #21: an API that takes its key in a header of its own (Anthropic's `x-api-key`)
/// sends it, with `anthropic-version`, on every request goodput makes, the probes included, and
/// never as `Authorization: Bearer`; the key is in no file written and on no terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_key_goes_in_x_api_key_everywhere_and_nowhere_else() {
    const ANTHROPIC_KEY: &str = "sk-ant-PLANTED-9c2e";
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let Some((_, path, head)) = common::read_request(&mut sock).await else {
                    return;
                };
                seen.lock().unwrap().push((path, head));
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let contract = dir.path().join("a.toml");
    std::fs::write(
        &contract,
        format!(
            "name = \"anthropic\"\n[target]\nurl = \"{url}\"\napi = \"anthropic-messages\"\nmodel = \"claude\"\napi_key_env = \"GOODPUT_TEST_ANTHROPIC_KEY\"\n[load]\nkind = \"open\"\nrate = 20\nrequests = 3\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n"
        ),
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .arg("run")
        .arg(&contract)
        .arg("--out")
        .arg(dir.path().join("runs"))
        .env("GOODPUT_TEST_ANTHROPIC_KEY", ANTHROPIC_KEY)
        .output()
        .await
        .unwrap();
    let terminal = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!terminal.contains(ANTHROPIC_KEY), "{terminal}");
    let heads = heads.lock().unwrap().clone();
    assert!(
        heads.iter().any(|(p, _)| p == "/v1/models"),
        "the probes ran: {heads:?}"
    );
    assert!(
        heads.iter().any(|(p, _)| p == "/v1/messages"),
        "the load ran: {heads:?}"
    );
    for (path, head) in &heads {
        let h = head.to_ascii_lowercase();
        assert!(
            h.contains(&format!(
                "x-api-key: {}",
                ANTHROPIC_KEY.to_ascii_lowercase()
            )),
            "{path}: {head}"
        );
        assert!(
            h.contains("anthropic-version: 2023-06-01"),
            "{path}: {head}"
        );
        assert!(!h.contains("authorization:"), "{path}: {head}");
    }
    let mut files = Vec::new();
    all_files(dir.path(), &mut files);
    for (name, bytes) in &files {
        assert!(
            !String::from_utf8_lossy(bytes).contains(ANTHROPIC_KEY),
            "{name} holds the key"
        );
    }
}
