//! Issue #72's round trip on a real engine, shared by `tests/real_engine.rs` (llama.cpp) and
//! `tests/vllm.rs`: `vllm bench serve --save-result --save-detailed` against the server, its
//! command line imported (`goodput import vllm-bench --result`), the contract run, and
//! `goodput compare FILE BUNDLE` read back as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One `vllm bench serve` of `backend` at `endpoint` on `base`: 24 prompt and 8 answer tokens,
/// `prompts` requests at `rate` req/s, seed `seed`; the result file it wrote in `dir`.
pub struct Bench<'a> {
    pub vllm: &'a Path,
    pub base: &'a str,
    pub model: &'a str,
    pub tokenizer: &'a str,
    pub backend: &'a str,
    pub endpoint: &'a str,
    pub prompts: u32,
    pub rate: f64,
}

impl Bench<'_> {
    /// Its command line, as a user would type it.
    pub fn args(&self, dir: &Path, seed: u32) -> Vec<String> {
        let (prompts, rate) = (self.prompts.to_string(), self.rate.to_string());
        let seed = seed.to_string();
        let file = format!("{}-seed{seed}.json", self.backend);
        [
            "vllm",
            "bench",
            "serve",
            "--backend",
            self.backend,
            "--endpoint",
            self.endpoint,
            "--base-url",
            self.base,
            "--model",
            self.model,
            "--tokenizer",
            self.tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            "24",
            "--random-output-len",
            "8",
            "--num-prompts",
            &prompts,
            "--request-rate",
            &rate,
            "--ignore-eos",
            "--temperature",
            "0",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--seed",
            &seed,
            "--save-result",
            "--save-detailed",
            "--result-dir",
            &dir.to_string_lossy(),
            "--result-filename",
            &file,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Runs it (bounded by its request count and rate); the result file.
    pub fn run(&self, dir: &Path, seed: u32) -> PathBuf {
        let args = self.args(dir, seed);
        let out = Command::new(self.vllm)
            .args(&args[1..])
            .env("VLLM_TARGET_DEVICE", "cpu")
            .env("HF_HUB_OFFLINE", "1")
            .env("VLLM_NO_USAGE_STATS", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "vllm bench serve failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir.join(format!("{}-seed{seed}.json", self.backend))
    }

    /// The round trip at seed 0 with the checks every engine passes
    /// ([`assert_bridged`]): the comparison as JSON and as shown, the result, the bundle.
    pub fn round_trip(&self, dir: &Path) -> (serde_json::Value, String, PathBuf, PathBuf) {
        let result = self.run(dir, 0);
        let bundle = self.goodput(dir, &result);
        let (b, shown) = compare(&result, &bundle);
        eprintln!("{}:\n{shown}", self.backend);
        assert_bridged(&b, &shown);
        let itl = row(&b, "ITL median (ms)");
        assert!(itl["ours_by_theirs"].as_f64().is_some(), "{itl}");
        (b, shown, result, bundle)
    }

    /// Its command line imported (checked against `result`) and run by goodput; the bundle.
    pub fn goodput(&self, dir: &Path, result: &Path) -> PathBuf {
        let contract = dir.join(format!("{}.toml", self.backend));
        let import = goodput(dir, |c| {
            c.args(["import", "vllm-bench", "--result"])
                .arg(result)
                .arg("-o")
                .arg(&contract)
                .arg("--")
                .args(self.args(dir, 0));
        });
        let notes = String::from_utf8_lossy(&import.stderr);
        assert!(import.status.success(), "{notes}");
        assert!(!notes.contains("warning:"), "{notes}");
        let out = dir.join(format!("runs-{}", self.backend));
        let run = goodput(dir, |c| {
            c.args(["run", "-q"]).arg(&contract).arg("--out").arg(&out);
        });
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let name = std::fs::read_dir(&out)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::read_dir(name)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    }
}

/// The goodput binary, set up by `args`, run in `dir`.
fn goodput(dir: &Path, args: impl FnOnce(&mut Command)) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_goodput"));
    c.current_dir(dir);
    args(&mut c);
    c.output().unwrap()
}

/// `goodput compare THEIRS BUNDLE` as JSON, and as the terminal shows it.
pub fn compare(theirs: &Path, bundle: &Path) -> (serde_json::Value, String) {
    let run = |json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_goodput"));
        c.arg("compare").arg(theirs).arg(bundle);
        if json {
            c.args(["--format", "json"]);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    (
        serde_json::from_slice(&run(true)).unwrap(),
        String::from_utf8_lossy(&run(false)).into_owned(),
    )
}

/// The row of `metric`.
pub fn row<'a>(b: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    b["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row `{metric}`: {b}"))
}

/// What holds on every engine so far: vLLM's client's rule is the one recomputed, their
/// offered load is stated beside ours, and every row has a verdict of the four, with its reason
/// where it is not plainly agreed. (Issue #72 asks more — every row agreed, within noise or
/// explained — which llama.cpp at 1 req/s does not yet give: goodput's TPOT p99 read 88.6 ms
/// against vllm bench's 33.3 on the same server, an interval of +60% … +174%, cause unknown.)
pub fn assert_bridged(b: &serde_json::Value, shown: &str) {
    assert_eq!(b["events"], "choices", "{shown}");
    assert!(b["offered"]["theirs_rps"].as_f64().is_some(), "{shown}");
    assert!(shown.contains("Offered load: theirs sent"), "{shown}");
    for r in b["rows"].as_array().unwrap() {
        let v = r["verdict"].as_str().unwrap();
        assert!(
            matches!(
                v,
                "agrees" | "within_noise" | "differs" | "cannot_tell" | "no_claim"
            ),
            "{} reads {v}:\n{shown}",
            r["metric"]
        );
        if matches!(v, "cannot_tell" | "no_claim") {
            assert!(
                !r["reason"].is_null(),
                "{}: no reason\n{shown}",
                r["metric"]
            );
        }
    }
}
