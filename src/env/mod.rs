//! The environment: facts about the client host and what the target says about itself, probed
//! once per run and kept verbatim in `environment.json`. A probe that fails is recorded as
//! absent with its reason, never fatal. Never records secrets.

use std::time::Duration;

use serde_json::{Value, json};

use crate::contract::Contract;
pub use facts::Endpoint;

/// The client host, as `environment.json` keeps it (`client`). Fields in the file's key order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Host {
    pub arch: String,
    pub cpu_model: Option<String>,
    pub cpus: Option<usize>,
    /// The git revision goodput was built from (`-dirty`: with changes to its sources).
    pub git_revision: String,
    /// `nvidia-smi`'s answer ([`gpus`]), or why there is none.
    pub gpus: Value,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub memory_bytes: Option<u64>,
    pub os: String,
    pub rustc: String,
    pub tool: String,
    pub tool_version: String,
}

/// Client-host facts read from the OS (Linux `/proc` where available).
pub fn host() -> Host {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let cpu_model = read("/proc/cpuinfo").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_owned())
    });
    let mem_kib = read("/proc/meminfo").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    });
    Host {
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        kernel: read("/proc/sys/kernel/osrelease"),
        hostname: read("/proc/sys/kernel/hostname"),
        cpu_model,
        cpus: std::thread::available_parallelism().map(|n| n.get()).ok(),
        memory_bytes: mem_kib.map(|k| k * 1024),
        tool: "goodput".to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        git_revision: env!("GOODPUT_GIT_REV").to_owned(),
        rustc: env!("GOODPUT_RUSTC").to_owned(),
        gpus: gpus(),
    }
}

/// Local GPUs as `nvidia-smi` reports them; its absence is recorded, not an error.
pub fn gpus() -> Value {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,memory.total,driver_version,uuid",
            "--format=csv,noheader",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.split(',').map(str::trim).collect();
                    json!({ "name": f.first(), "memory": f.get(1), "driver": f.get(2), "uuid": f.get(3) })
                })
                .collect();
            json!({ "source": "nvidia-smi", "devices": rows })
        }
        Ok(o) => {
            json!({ "absent": format!("nvidia-smi failed: {}", String::from_utf8_lossy(&o.stderr).trim()) })
        }
        Err(_) => json!({ "absent": "nvidia-smi not found: no NVIDIA GPU visible to this client" }),
    }
}

pub mod clock;
pub(crate) mod facts;
pub mod prom;
pub mod tokenize;
pub(crate) mod wake;

/// Metadata endpoints of the engines people benchmark, tried in turn after `/v1/models` and kept
/// verbatim (documented by each engine): vLLM, SGLang, TGI, llama.cpp's server and Ollama.
/// A probe that fails is recorded as absent, never fatal.
pub const ENGINE_PROBES: [Endpoint; 7] = [
    Endpoint::Version,
    Endpoint::ServerInfo,
    Endpoint::ModelInfo,
    Endpoint::Info,
    Endpoint::Props,
    Endpoint::OllamaVersion,
    Endpoint::OllamaTags,
];

/// Every engine probe after the preflight's `/v1/models` (and `/version`, when given in
/// `done`), plus Ollama's `POST /api/show` for the model under test when Ollama answered.
pub async fn probe_engines(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    model: &str,
    mut done: Vec<Value>,
) -> Vec<Value> {
    for endpoint in ENGINE_PROBES {
        if !done.iter().any(|p| endpoint.is(p)) {
            done.push(probe(http, base, endpoint, key).await);
        }
    }
    let ollama = done
        .iter()
        .any(|p| Endpoint::OllamaVersion.is(p) && p.get("absent").is_none());
    if ollama {
        let url = format!(
            "{}{}",
            base.trim_end_matches('/'),
            Endpoint::OllamaShow.name()
        );
        let mut req = http
            .post(&url)
            .timeout(Duration::from_secs(5))
            .json(&json!({ "model": model }));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        done.push(answer(Endpoint::OllamaShow.name(), "POST", req).await);
    }
    done
}

/// The engine's own configuration as its `/metrics` page publishes it: the labels of every
/// `…_info` gauge (vLLM's `vllm:cache_config_info`: KV-cache blocks, block size, prefix
/// caching), kept as a probe answer `{series name: {label: value}}` so the facts come from the
/// same resolution as every other probe's. `None` when the page has no such series (or none at
/// all: its absence is recorded by the scraper).
pub async fn probe_metrics_info(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
) -> Option<Value> {
    let url = format!("{}/metrics", base.trim_end_matches('/'));
    let mut req = http.get(&url).timeout(Duration::from_secs(5));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let r = req.send().await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    let body = body_capped(r, MAX_PROBE_BYTES).await.ok()?;
    let samples = prom::parse(&String::from_utf8_lossy(&body)).ok()?;
    let mut info = serde_json::Map::new();
    for (name, labels, _) in samples.into_iter().filter(|s| s.0.ends_with("_info")) {
        let labels: serde_json::Map<String, Value> = labels
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        info.entry(name).or_insert(Value::Object(labels));
    }
    (!info.is_empty())
        .then(|| json!({ "endpoint": Endpoint::Metrics.name(), "method": "GET", "status": 200, "answer": info }))
}

/// Where the target is relative to this client, and the TCP connect round trip to it (median
/// of five connects, ms).
pub async fn network_path(base: &str) -> Value {
    let hostport = crate::text::authority(base).to_owned();
    let host = hostport
        .rsplit_once(':')
        .map_or(hostport.as_str(), |(h, _)| h)
        .trim_matches(['[', ']']);
    let kind = if host == "localhost" || host.starts_with("127.") || host == "::1" {
        "loopback"
    } else {
        "remote or same host (not loopback)"
    };
    let mut rtts = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        if tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(&hostport),
        )
        .await
        .is_ok_and(|r| r.is_ok())
        {
            rtts.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    rtts.sort_by(f64::total_cmp);
    json!({ "path": kind, "host": host, "tcp_connect_rtt_ms": rtts.get(rtts.len() / 2) })
}

/// A loopback target runs on this host: its hardware is this host's, kept as evidence beside the
/// probes (CPU, core count, memory, GPUs).
pub fn this_host(client: &Host, network: &Value) -> Option<Value> {
    (network["path"] == "loopback").then(|| {
        json!({ "endpoint": Endpoint::ThisHost.name(), "method": "loopback", "status": 200, "answer": {
            "cpu_model": client.cpu_model, "cpus": client.cpus,
            "memory_bytes": client.memory_bytes, "gpus": client.gpus["devices"],
        }})
    })
}

/// Model files above this size are not hashed (the hash would delay the run by minutes).
const MAX_HASHED_MODEL_BYTES: u64 = 4 << 30;

/// When the target is on this host and names its model file (llama.cpp's `/props`
/// `model_path`), the file's SHA-256: the model's revision, as evidence kept beside the probes.
pub async fn hash_model_file(probes: &[Value], network: &Value) -> Option<Value> {
    if network["path"] != "loopback" {
        return None;
    }
    let path = probes
        .iter()
        .find(|p| Endpoint::Props.is(p) && p.get("absent").is_none())?["answer"]["model_path"]
        .as_str()?
        .to_owned();
    let bytes = std::fs::metadata(&path).ok()?.len();
    if bytes > MAX_HASHED_MODEL_BYTES {
        return Some(
            json!({ "endpoint": Endpoint::ModelFile.name(), "method": "sha256",
            "absent": format!("{path}: {bytes} bytes, above the {MAX_HASHED_MODEL_BYTES}-byte hashing limit") }),
        );
    }
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<(String, String)> {
        use sha2::{Digest, Sha256};
        let mut f = std::fs::File::open(&path)?;
        let mut h = Sha256::new();
        std::io::copy(&mut f, &mut h)?;
        Ok((path, format!("{:x}", h.finalize())))
    })
    .await
    .ok()?;
    Some(match hashed {
        Ok((path, sha)) => {
            json!({ "endpoint": Endpoint::ModelFile.name(), "method": "sha256", "status": 200,
            "answer": { "path": path, "bytes": bytes, "sha256": sha } })
        }
        Err(e) => {
            json!({ "endpoint": Endpoint::ModelFile.name(), "method": "sha256", "absent": e.to_string() })
        }
    })
}

/// GETs `base + path`; the JSON (or text) answer, or why there was none.
pub async fn probe(
    http: &reqwest::Client,
    base: &str,
    endpoint: Endpoint,
    key: Option<&str>,
) -> Value {
    let path = endpoint.name();
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let mut req = http.get(&url).timeout(Duration::from_secs(5));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    answer(path, "GET", req).await
}

/// Why something the target (or a file the run wrote) should have told goodput is not known:
/// the one error of this module's scrapes, counts and reads. Every message names the URL (and
/// the status or cause) or the file (and line); the variant says which kind of failure it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// No answer, an HTTP error status, or an answer cut at its limit.
    #[error("{0}")]
    Unanswered(String),
    /// An answer, or a line of a file, not in the shape it should have.
    #[error("{0}")]
    Malformed(String),
    /// A file that could not be created, opened or read.
    #[error("{0}")]
    File(String),
    /// Turned off by the contract.
    #[error("{0}")]
    Off(String),
}

/// The most of a probe's answer kept, bytes: metadata endpoints answer in kilobytes.
pub const MAX_PROBE_BYTES: usize = 1 << 20;

/// A response's body, read up to `limit` bytes (the rest is not read): what a server sends
/// cannot grow the client. The error says it was cut.
pub async fn body_capped(r: reqwest::Response, limit: usize) -> Result<Vec<u8>, Unavailable> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    let mut s = r.bytes_stream();
    while let Some(b) = s.next().await {
        let b = b.map_err(|e| Unavailable::Unanswered(crate::text::error_chain(&e)))?;
        if out.len() + b.len() > limit {
            return Err(Unavailable::Unanswered(format!(
                "the answer passed {}, the limit for it",
                crate::text::human_bytes(limit as u64)
            )));
        }
        out.extend_from_slice(&b);
    }
    Ok(out)
}

async fn answer(path: &str, method: &str, req: reqwest::RequestBuilder) -> Value {
    match req.send().await {
        Err(e) => {
            json!({ "endpoint": path, "method": method, "absent": crate::text::error_chain(&e) })
        }
        Ok(r) => {
            let status = r.status().as_u16();
            let text = match body_capped(r, MAX_PROBE_BYTES).await {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(why) => {
                    return json!({ "endpoint": path, "method": method, "status": status, "absent": why.to_string() });
                }
            };
            let body = serde_json::from_str::<Value>(&text)
                .unwrap_or(Value::String(text.chars().take(2000).collect()));
            if (200..300).contains(&status) {
                json!({ "endpoint": path, "method": method, "status": status, "answer": body })
            } else {
                json!({ "endpoint": path, "method": method, "status": status,
                        "absent": format!("HTTP {status}"), "answer": body })
            }
        }
    }
}

/// The first model id a `/v1/models` probe lists.
pub fn first_model(models_probe: &Value) -> Option<String> {
    models_probe["answer"]["data"][0]["id"]
        .as_str()
        .map(str::to_owned)
}

/// Every model name `/v1/models` lists: each entry's `id` and its `aliases` (llama.cpp).
pub fn served_models(models_probe: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in models_probe["answer"]["data"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.extend(m["id"].as_str().map(str::to_owned));
        for a in m["aliases"].as_array().into_iter().flatten() {
            out.extend(a.as_str().map(str::to_owned));
        }
    }
    out.dedup();
    out
}

/// What a run knows of its target and its own host before the load: `environment.json`'s
/// part that this module writes (the rest is the run's, `bundle::EnvironmentFile`). The probes
/// are the engines' answers verbatim; `network` and `target` are documents for the reader,
/// never read back.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Probed {
    /// The graded facts no probe stated.
    pub absent: Vec<String>,
    pub client: Host,
    /// The facts as resolved when the run probed (a reader resolves them again).
    pub facts: facts::Facts,
    pub network: Value,
    pub probes: Vec<Value>,
    pub target: Value,
}

/// The probed part of `environment.json`.
pub fn document(
    c: &Contract,
    base: &str,
    client: Host,
    probes: Vec<Value>,
    facts: &facts::Facts,
    network: Value,
) -> Probed {
    let absent = facts::GRADED
        .iter()
        .filter(|(k, _)| facts.get(k).is_none())
        .map(|(_, name)| (*name).to_owned())
        .collect();
    Probed {
        client,
        network,
        target: json!({
            "kind": if c.embedded() { "embedded simulator" } else { "external" },
            "url": base,
            "api": c.target.api,
            "model": c.target.model,
            "declared": c.target.declared,
            "simulator": c.target.simulator,
        }),
        facts: facts.clone(),
        absent,
        probes,
    }
}
