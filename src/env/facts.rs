//! Facts a result depends on, resolved from what the server says about itself (its metadata
//! endpoints, kept verbatim in `environment.json`) and what the contract declares. Discovered
//! facts win over declared ones; a disagreement is kept and flagged, never silently resolved.
//!
//! Each extractor reads one engine's documented response shape:
//! OpenAI-compatible `GET /v1/models` (vLLM adds `max_model_len`, `root`), vLLM `GET /version`,
//! SGLang `GET /get_server_info`, TGI `GET /info`, llama.cpp `GET /props`, Ollama
//! `GET /api/version`, `GET /api/tags` and `POST /api/show`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::Declared;

/// The facts that decide whether a result is comparable, in report order.
pub const GRADED: [(&str, &str); 5] = [
    ("engine", "engine"),
    ("engine_revision", "engine revision"),
    ("model_revision", "model revision"),
    ("hardware", "hardware"),
    ("precision", "precision"),
];

/// Where a probe's answer came from: an engine's metadata endpoint, or evidence the client
/// gathered itself. Kept in `environment.json` by its name (`Endpoint::name`, the path for an
/// endpoint), so the facts are read back from older bundles as they were written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// OpenAI-compatible `GET /v1/models` (vLLM adds `max_model_len`, `root`).
    Models,
    /// vLLM's `GET /version` (`{"version": "0.6.3"}`; the simulator adds its `engine`).
    Version,
    /// SGLang's `GET /get_server_info`.
    ServerInfo,
    /// SGLang's `GET /get_model_info`.
    ModelInfo,
    /// TGI's `GET /info`.
    Info,
    /// llama.cpp's `GET /props`.
    Props,
    /// The `…_info` series of the engine's `/metrics` page.
    Metrics,
    /// Ollama's `GET /api/version`.
    OllamaVersion,
    /// Ollama's `GET /api/tags`.
    OllamaTags,
    /// Ollama's `POST /api/show`.
    OllamaShow,
    /// Not an endpoint: a loopback target's hardware is this host's.
    ThisHost,
    /// Not an endpoint: the client's own SHA-256 of the model file a loopback server named.
    ModelFile,
}

impl Endpoint {
    pub const ALL: [Endpoint; 12] = [
        Endpoint::Models,
        Endpoint::Version,
        Endpoint::ServerInfo,
        Endpoint::ModelInfo,
        Endpoint::Info,
        Endpoint::Props,
        Endpoint::Metrics,
        Endpoint::OllamaVersion,
        Endpoint::OllamaTags,
        Endpoint::OllamaShow,
        Endpoint::ThisHost,
        Endpoint::ModelFile,
    ];

    /// Its name in a probe record: the path, or the evidence's name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Models => "/v1/models",
            Endpoint::Version => "/version",
            Endpoint::ServerInfo => "/get_server_info",
            Endpoint::ModelInfo => "/get_model_info",
            Endpoint::Info => "/info",
            Endpoint::Props => "/props",
            Endpoint::Metrics => "/metrics",
            Endpoint::OllamaVersion => "/api/version",
            Endpoint::OllamaTags => "/api/tags",
            Endpoint::OllamaShow => "/api/show",
            Endpoint::ThisHost => "this host",
            Endpoint::ModelFile => "model file",
        }
    }

    /// The endpoint a probe record names, if goodput reads it.
    pub fn named(name: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Evidence that suggests a fact rather than states it: the host a loopback target runs on
    /// suggests its hardware, but a declaration (which GPU the engine uses) is more specific.
    fn inferred(self) -> bool {
        self == Endpoint::ThisHost
    }

    /// A probe record of `self` names it.
    pub fn is(self, probe: &Value) -> bool {
        probe["endpoint"] == self.name()
    }
}

/// One fact: its value, where it came from, and the declared value when that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub value: String,
    /// `"declared"`, or the endpoint that said it (e.g. `"GET /info"`).
    pub source: String,
    /// The contract's declared value, kept when the server said something else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<String>,
}

/// Every fact known about the target, by name (`engine`, `engine_revision`, `model`,
/// `model_revision`, `precision`, `hardware`, `parallelism`, `max_model_len`, `slots`, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub facts: BTreeMap<String, Fact>,
    /// Declared facts the server contradicted, in plain words.
    pub disagreements: Vec<String>,
    /// Metadata endpoints that answered, but not in their documented shape: what each said,
    /// so a fact left unknown says where it should have come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl Facts {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.facts.get(name).map(|f| f.value.as_str())
    }

    /// Resolves the facts from the probe answers (each `{endpoint, status, answer}` or
    /// `{endpoint, absent}`) and the contract's declarations.
    pub fn resolve(declared: &Declared, probes: &[Value]) -> Facts {
        let mut discovered: BTreeMap<String, Fact> = BTreeMap::new();
        let mut inferred = Vec::new();
        let mut unreadable = Vec::new();
        for p in probes {
            let Some(answer) = p.get("answer").filter(|_| p.get("absent").is_none()) else {
                continue;
            };
            let name = p["endpoint"].as_str().unwrap_or_default();
            let method = p["method"].as_str().unwrap_or("GET");
            let source = format!("{method} {name}");
            // A probe goodput does not read (a newer bundle's) states nothing here.
            let Some(endpoint) = Endpoint::named(name) else {
                continue;
            };
            if endpoint.inferred() {
                inferred.push(source.clone());
            }
            // vLLM's `/version` is `{"version": "0.6.3"}`: anything else that answers 2xx there
            // is noted, not guessed at.
            if endpoint == Endpoint::Version && !answer["version"].is_string() {
                let text = match answer {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                let snippet: String = text.chars().take(80).collect();
                unreadable.push(format!(
                    "{source} answered `{snippet}`, not a {{\"version\": …}} document"
                ));
            }
            for (name, value) in extract(endpoint, answer) {
                // The first endpoint to say a fact keeps it: probes run most specific first.
                discovered.entry(name.to_owned()).or_insert(Fact {
                    value,
                    source: source.clone(),
                    declared: None,
                });
            }
        }
        let mut out = Facts {
            facts: discovered,
            disagreements: Vec::new(),
            unreadable,
        };
        for (name, value) in declared_pairs(declared) {
            let Some(value) = value else { continue };
            match out.facts.get_mut(name) {
                // An inferred fact yields to a declared one without dispute.
                Some(found) if inferred.contains(&found.source) => {
                    *found = Fact {
                        value: value.clone(),
                        source: "declared".into(),
                        declared: None,
                    };
                }
                Some(found) if !agree(&found.value, value) => {
                    out.disagreements.push(format!(
                        "declared {name} `{value}` but {} says `{}`",
                        found.source, found.value
                    ));
                    found.declared = Some(value.clone());
                }
                Some(_) => {}
                None => {
                    out.facts.insert(
                        name.to_owned(),
                        Fact {
                            value: value.clone(),
                            source: "declared".into(),
                            declared: None,
                        },
                    );
                }
            }
        }
        out
    }
}

fn declared_pairs(d: &Declared) -> [(&'static str, &Option<String>); 6] {
    [
        ("engine", &d.engine),
        ("engine_revision", &d.engine_revision),
        ("model_revision", &d.model_revision),
        ("hardware", &d.hardware),
        ("precision", &d.precision),
        ("parallelism", &d.parallelism),
    ]
}

/// Two statements of one fact agree when the words of one are all words of the other, case and
/// punctuation aside and a version's leading `v` dropped: `"vLLM"` and `"vllm 0.6.3"`, `"v3.2.1"`
/// and `"3.2.1 (4d28897)"` agree; `"0.6.3"` and `"0.6.31"` do not.
fn agree(a: &str, b: &str) -> bool {
    let words = |s: &str| {
        s.to_lowercase()
            .split(|c: char| !(c.is_alphanumeric() || c == '.'))
            .map(|w| w.trim_matches('.'))
            .filter(|w| !w.is_empty())
            .map(|w| match w.strip_prefix('v') {
                Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest.to_owned(),
                _ => w.to_owned(),
            })
            .collect::<std::collections::BTreeSet<String>>()
    };
    let (a, b) = (words(a), words(b));
    let (small, large) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    !small.is_empty() && small.is_subset(large)
}

/// The facts one endpoint's answer states.
fn extract(endpoint: Endpoint, a: &Value) -> Vec<(&'static str, String)> {
    let s = |v: &Value| match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let mut out = Vec::new();
    let mut put = |name: &'static str, v: Option<String>| {
        if let Some(v) = v {
            out.push((name, v));
        }
    };
    match endpoint {
        Endpoint::Models => {
            let m = &a["data"][0];
            put("model", s(&m["id"]));
            put("max_model_len", s(&m["max_model_len"]));
            put(
                "engine",
                match m["owned_by"].as_str() {
                    Some("vllm") => Some("vllm".into()),
                    Some("sglang") => Some("sglang".into()),
                    Some("llamacpp") => Some("llama.cpp".into()),
                    _ => None,
                },
            );
        }
        // vLLM answers `{"version": "0.6.3"}`; the simulator adds its own `engine`.
        Endpoint::Version => {
            put("engine", s(&a["engine"]));
            put("engine_revision", s(&a["version"]));
        }
        Endpoint::ServerInfo => {
            put("engine", Some("sglang".into()));
            put("engine_revision", s(&a["version"]));
            put("model", s(&a["model_path"]));
            put(
                "precision",
                s(&a["quantization"]).or_else(|| s(&a["dtype"])),
            );
            put(
                "parallelism",
                a["tp_size"]
                    .as_u64()
                    .map(|tp| format!("tp={tp} dp={}", a["dp_size"].as_u64().unwrap_or(1))),
            );
            put("max_model_len", s(&a["context_length"]));
        }
        Endpoint::ModelInfo => put("model", s(&a["model_path"])),
        Endpoint::Info => {
            put("engine", Some("tgi".into()));
            put(
                "engine_revision",
                s(&a["version"]).map(|v| match a["sha"].as_str() {
                    Some(sha) => format!("{v} ({sha})"),
                    None => v,
                }),
            );
            put("model", s(&a["model_id"]));
            put("model_revision", s(&a["model_sha"]));
            put("precision", s(&a["model_dtype"]));
            put("device_type", s(&a["model_device_type"]));
            put("max_model_len", s(&a["max_total_tokens"]));
        }
        Endpoint::Props => {
            put("engine", Some("llama.cpp".into()));
            // A build without its number and commit (`b0-unknown`, as pip wheels report) does
            // not identify a revision; the declared one is kept instead.
            put(
                "engine_revision",
                s(&a["build_info"]).filter(|b| !b.contains("unknown")),
            );
            put("model_file", s(&a["model_path"]));
            put("precision", s(&a["model_ftype"]));
            put("slots", s(&a["total_slots"]));
            put(
                "max_model_len",
                s(&a["default_generation_settings"]["n_ctx"]),
            );
        }
        // Not an endpoint: a loopback target's hardware is this host's.
        Endpoint::ThisHost => {
            let gpus: Vec<String> = a["gpus"]
                .as_array()
                .map(|g| g.iter().filter_map(|d| s(&d["name"])).collect())
                .unwrap_or_default();
            put(
                "hardware",
                s(&a["cpu_model"]).map(|cpu| {
                    let mut h = format!("{cpu}, {} CPUs", a["cpus"]);
                    if let Some(m) = a["memory_bytes"].as_u64() {
                        h += &format!(", {} GiB", m >> 30);
                    }
                    if !gpus.is_empty() {
                        h += &format!(", GPUs: {}", gpus.join(", "));
                    }
                    h + " (this host: loopback target)"
                }),
            );
        }
        // Not an endpoint: the client's own SHA-256 of the model file a loopback server named.
        Endpoint::ModelFile => {
            put(
                "model_revision",
                s(&a["sha256"]).map(|h| format!("sha256:{h}")),
            );
        }
        // The `…_info` series of the engine's `/metrics` page (`env::probe_metrics_info`).
        Endpoint::Metrics => {
            let c = &a["vllm:cache_config_info"];
            put("kv_cache_tokens", s(&c["kv_cache_size_tokens"]));
            put("kv_cache_bytes", s(&c["kv_cache_memory_bytes"]));
            put("kv_block_size", s(&c["block_size"]));
            put("kv_cache_dtype", s(&c["cache_dtype"]));
            put("prefix_caching", s(&c["enable_prefix_caching"]));
        }
        Endpoint::OllamaVersion => {
            put("engine", Some("ollama".into()));
            put("engine_revision", s(&a["version"]));
        }
        Endpoint::OllamaTags => {
            put("model_revision", s(&a["models"][0]["digest"]));
        }
        Endpoint::OllamaShow => {
            let d = &a["details"];
            put("precision", s(&d["quantization_level"]));
            put("model_size", s(&d["parameter_size"]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe record names its endpoint by a string in `environment.json`: every endpoint
    /// reads back as itself, and a name goodput does not read states no fact.
    #[test]
    fn endpoints_read_back_by_their_names_and_unknown_ones_state_nothing() {
        for e in Endpoint::ALL {
            assert_eq!(Endpoint::named(e.name()), Some(e));
        }
        let other = json!({ "endpoint": "/v2/health", "status": 200, "answer": {"version": "9"} });
        assert_eq!(
            Facts::resolve(&Declared::default(), &[other]).facts.len(),
            0
        );
    }
    use serde_json::json;

    fn probe(endpoint: &str, answer: Value) -> Value {
        json!({ "endpoint": endpoint, "status": 200, "answer": answer })
    }

    /// Response shapes as each engine documents them.
    fn fixture(name: &str) -> Value {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/probes/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn tgi_info_states_revisions_and_precision() {
        let f = Facts::resolve(&Declared::default(), &[probe("/info", fixture("tgi-info"))]);
        assert_eq!(f.get("engine"), Some("tgi"));
        assert_eq!(
            f.get("engine_revision"),
            Some("3.2.1 (4d28897b4e345f4dfdd93d3434e50ac8afcdf9e1)")
        );
        assert_eq!(
            f.get("model_revision"),
            Some("4847e87e5975a573a2a190399ca62cd266c899ad")
        );
        assert_eq!(f.get("precision"), Some("torch.bfloat16"));
        assert_eq!(f.get("max_model_len"), Some("32768"));
        assert_eq!(f.facts["engine"].source, "GET /info");
    }

    #[test]
    fn vllm_models_and_version() {
        let f = Facts::resolve(
            &Declared::default(),
            &[
                probe("/v1/models", fixture("vllm-models")),
                probe("/version", fixture("vllm-version")),
            ],
        );
        assert_eq!(f.get("engine"), Some("vllm"));
        assert_eq!(f.get("engine_revision"), Some("0.11.0"));
        assert_eq!(f.get("model"), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!(f.get("max_model_len"), Some("131072"));
        assert_eq!(f.get("model_revision"), None);
    }

    #[test]
    fn sglang_server_info() {
        let f = Facts::resolve(
            &Declared::default(),
            &[probe("/get_server_info", fixture("sglang-server-info"))],
        );
        assert_eq!(f.get("engine"), Some("sglang"));
        assert_eq!(f.get("engine_revision"), Some("0.4.6"));
        assert_eq!(f.get("precision"), Some("bfloat16"));
        assert_eq!(f.get("parallelism"), Some("tp=2 dp=1"));
        assert_eq!(f.get("model"), Some("Qwen/Qwen2.5-7B-Instruct"));
    }

    #[test]
    fn llamacpp_props() {
        let f = Facts::resolve(
            &Declared::default(),
            &[probe("/props", fixture("llamacpp-props"))],
        );
        assert_eq!(f.get("engine"), Some("llama.cpp"));
        assert_eq!(f.get("engine_revision"), Some("b6123-e4aa2b0c"));
        assert_eq!(f.get("slots"), Some("4"));
        assert_eq!(f.get("max_model_len"), Some("8192"));
        assert_eq!(f.get("precision"), Some("Q4_K - Medium"));
        assert_eq!(
            f.get("model_file"),
            Some("/models/gemma-3-270m-Q4_K_M.gguf")
        );
    }

    #[test]
    fn an_anonymous_build_is_no_revision_and_a_file_hash_is_one() {
        let mut props = fixture("llamacpp-props");
        props["build_info"] = json!("b0-unknown");
        let hash = json!({ "endpoint": "model file", "method": "sha256", "status": 200,
                           "answer": { "path": "/m.gguf", "bytes": 3, "sha256": "ab12" } });
        let declared = Declared {
            engine_revision: Some("xllamacpp 2026.10.11549".into()),
            ..Declared::default()
        };
        let f = Facts::resolve(&declared, &[probe("/props", props), hash]);
        assert_eq!(f.get("engine_revision"), Some("xllamacpp 2026.10.11549"));
        assert_eq!(f.facts["engine_revision"].source, "declared");
        assert_eq!(f.get("model_revision"), Some("sha256:ab12"));
        assert_eq!(f.facts["model_revision"].source, "sha256 model file");
        assert!(f.disagreements.is_empty());
    }

    #[test]
    fn ollama_version_tags_and_show() {
        let show = json!({ "endpoint": "/api/show", "method": "POST", "status": 200,
                           "answer": fixture("ollama-show") });
        let f = Facts::resolve(
            &Declared::default(),
            &[
                probe("/api/version", fixture("ollama-version")),
                probe("/api/tags", fixture("ollama-tags")),
                show,
            ],
        );
        assert_eq!(f.get("engine"), Some("ollama"));
        assert_eq!(f.get("engine_revision"), Some("0.12.3"));
        assert_eq!(f.get("precision"), Some("Q4_K_M"));
        assert!(f.get("model_revision").unwrap().starts_with("a80c4f17"));
        assert_eq!(f.facts["precision"].source, "POST /api/show");
    }

    #[test]
    fn discovered_wins_and_disagreement_is_flagged() {
        let declared = Declared {
            engine: Some("vLLM".into()),
            engine_revision: Some("v3.2.1".into()),
            hardware: Some("1x H100 80GB".into()),
            ..Declared::default()
        };
        let f = Facts::resolve(&declared, &[probe("/info", fixture("tgi-info"))]);
        assert_eq!(f.get("engine"), Some("tgi"));
        assert_eq!(f.facts["engine"].declared.as_deref(), Some("vLLM"));
        // "v3.2.1" agrees with "3.2.1 (sha)"; hardware was only declared (TGI states a device
        // type, `cuda`, which is not the hardware).
        assert_eq!(f.disagreements.len(), 1, "{:?}", f.disagreements);
        assert!(f.disagreements[0].contains("GET /info says `tgi`"));
        assert_eq!(f.facts["hardware"].source, "declared");
    }

    /// vLLM publishes its KV-cache configuration as a gauge's labels; the facts name it, so two
    /// servers with different caches are two targets.
    #[test]
    fn vllm_cache_config_from_its_metrics() {
        let info = json!({ "vllm:cache_config_info": {
            "block_size": "128", "cache_dtype": "auto", "enable_prefix_caching": "True",
            "kv_cache_memory_bytes": "2147483648", "kv_cache_size_tokens": "110733",
            "engine": "0" } });
        let f = Facts::resolve(&Declared::default(), &[probe("/metrics", info)]);
        assert_eq!(f.get("kv_cache_tokens"), Some("110733"));
        assert_eq!(f.get("kv_block_size"), Some("128"));
        assert_eq!(f.get("prefix_caching"), Some("True"));
        assert_eq!(f.facts["kv_cache_tokens"].source, "GET /metrics");
    }

    /// A `/version` that answers garbage is named, not read: the revision stays unknown and
    /// the grade says where it should have come from.
    #[test]
    fn a_garbage_version_is_named_not_read() {
        let f = Facts::resolve(
            &Declared::default(),
            &[
                probe("/v1/models", fixture("vllm-models")),
                probe("/version", json!("<html>not found</html>")),
            ],
        );
        assert_eq!(f.get("engine"), Some("vllm"));
        assert_eq!(f.get("engine_revision"), None);
        assert_eq!(
            f.unreadable,
            ["GET /version answered `<html>not found</html>`, not a {\"version\": …} document"]
        );
    }

    #[test]
    fn agreement_is_by_words() {
        assert!(agree("vLLM", "vllm 0.6.3"));
        assert!(agree("v3.2.1", "3.2.1 (4d28897)"));
        assert!(!agree("0.6.3", "0.6.31"));
        assert!(!agree("sglang", "vllm"));
    }

    #[test]
    fn absent_probes_are_ignored() {
        let p =
            json!({ "endpoint": "/info", "status": 404, "absent": "HTTP 404", "answer": "nope" });
        let f = Facts::resolve(&Declared::default(), &[p]);
        assert!(f.facts.is_empty());
    }
}
