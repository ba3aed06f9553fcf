//! Instruction counts of goodput's hot paths under callgrind, held to committed budgets
//! (`bench/instructions.toml`); `bench/instructions.sh` installs valgrind and runs this.
//!
//!     instructions --bin DIR [--profile dev|release] [--budgets FILE] [--update] [--keep DIR]
//!                  [--only run|offline]
//!
//! `--keep DIR` keeps callgrind's file of each program run there (`callgrind_annotate FILE`
//! says where the instructions went).
//! DIR holds the `goodput` binary and `examples/synth_bundle` of one build. Wall-clock
//! benchmarks on this project's shared 2-core machines swing by 2× within an hour; instruction
//! counts do not, so a change that makes a hot path costlier shows here whatever the host did.
//! What is counted (every figure is goodput's own process, start to exit, under
//! `valgrind --tool=callgrind`):
//! - `run_per_request`, `run_per_sse_event`: `goodput run`, closed loop at concurrency 1,
//!   against a canned server in this process (each answer written whole, at once, so the
//!   client's reads do not depend on timing). A run's cost per request is the difference
//!   between 400 and 200 requests of one token, divided by 200; per SSE event, the difference
//!   between 200 requests of 256 tokens and of one, divided by 200 × 255. Both are the whole
//!   run's marginal cost: client, raw record and report.
//! - `report_100k_requests`: `goodput report` of a generated 100,000-request bundle (16 output
//!   tokens each, `record::synth`).
//! - `plan_100k_requests`: `goodput plan` of 100,000 requests (8–24 prompt tokens).
//!
//! `--only run` counts the two `run` figures, `--only offline` the other two. The `run` figures
//! drive a server through the kernel and the runtime's timers, so a process starved of CPU for
//! seconds takes other paths (timeouts, the writer's gathering, wake-ups): they read 1.000–1.110
//! of their budget at the idle class beside vLLM in CI, 1.002–1.005 on a quiet machine. Count
//! them on a quiet machine; `report` and `plan` are computation alone and can run at any
//! priority.
//!
//! Exit status 1 when a figure exceeds its budget by more than the budget's margin, 2 on a
//! usage or setup error. `--update` writes the measured figures as the profile's budgets.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The canned answer: a role chunk, `max_tokens` one-token chunks, usage, `[DONE]`.
const ROLE: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"canned\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n";
const TOKEN: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"canned\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"finish_reason\":null}]}\n\n";

fn answer(tokens: u64) -> String {
    let end = format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"canned\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":16,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        tokens + 16
    );
    let mut s = String::with_capacity(ROLE.len() + TOKEN.len() * tokens as usize + end.len());
    s.push_str(ROLE);
    for _ in 0..tokens {
        s.push_str(TOKEN);
    }
    s.push_str(&end);
    s
}

/// Serves the canned answers on loopback from a thread of its own; the server's address.
fn canned_server() -> std::io::Result<std::net::SocketAddr> {
    use axum::routing::{get, post};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the canned server's runtime");
        rt.block_on(async move {
            let app = axum::Router::new()
                .route(
                    "/v1/chat/completions",
                    post(|body: axum::Json<serde_json::Value>| async move {
                        let tokens = body["max_tokens"]
                            .as_u64()
                            .or_else(|| body["max_completion_tokens"].as_u64())
                            .unwrap_or(1);
                        ([("content-type", "text/event-stream")], answer(tokens))
                    }),
                )
                .route(
                    "/v1/models",
                    get(|| async { axum::Json(serde_json::json!({"data": [{"id": "canned"}]})) }),
                );
            let listener =
                tokio::net::TcpListener::from_std(listener).expect("the canned server's socket");
            let _ = axum::serve(listener, app).await;
        });
    });
    Ok(addr)
}

/// A figure: its name, the instructions, and how it was worked out.
struct Figure {
    name: &'static str,
    count: f64,
    how: String,
}

struct Bench {
    bin: PathBuf,
    work: tempfile::TempDir,
    /// Where callgrind's files are kept, named after the run (`--keep`).
    keep: Option<PathBuf>,
}

impl Bench {
    /// The instructions `program args…` executes in its own process (not its children), with
    /// its standard output discarded.
    fn count(&self, name: &str, program: &Path, args: &[&str]) -> Result<f64, String> {
        // `%p`: a child the program forks (before it execs) writes a file of its own; the
        // program's is the one named by the pid valgrind runs it under.
        let pattern = self.work.path().join("callgrind.%p");
        let child = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", pattern.display()))
            .arg("--child-silent-after-fork=yes")
            .arg(program)
            .args(args)
            .current_dir(self.work.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("valgrind: {e} (bench/instructions.sh installs it)"))?;
        let out = self.work.path().join(format!("callgrind.{}", child.id()));
        let status = child
            .wait_with_output()
            .map_err(|e| format!("valgrind: {e}"))?;
        if !status.status.success() {
            return Err(format!(
                "{} {} failed under valgrind ({}):\n{}",
                program.display(),
                args.join(" "),
                status.status,
                String::from_utf8_lossy(&status.stderr)
            ));
        }
        // callgrind's output names the program's total as `summary: N` (older versions also
        // write `totals: N`); read it rather than the log, whose wording is for people.
        let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        if let Some(dir) = &self.keep {
            let to = dir.join(format!("callgrind.{name}"));
            std::fs::copy(&out, &to).map_err(|e| format!("{}: {e}", to.display()))?;
        }
        text.lines()
            .find_map(|l| l.strip_prefix("summary: ").or(l.strip_prefix("totals: ")))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("{}: no `summary:` line", out.display()))
    }

    fn goodput(&self, name: &str, args: &[&str]) -> Result<f64, String> {
        self.count(name, &self.bin.join("goodput"), args)
    }

    /// `goodput run` of `requests` closed-loop requests of `tokens` output tokens each.
    fn run(&self, url: &str, requests: u32, tokens: u32) -> Result<f64, String> {
        let name = format!("run-{requests}x{tokens}");
        let contract = self.work.path().join(format!("{name}.toml"));
        let text = format!(
            "name = \"{name}\"\n[target]\nurl = \"{url}\"\nmodel = \"canned\"\n\
             [workload]\nseed = 1\ninput_tokens = {{ dist = \"fixed\", value = 16 }}\n\
             output_tokens = {{ dist = \"fixed\", value = {tokens} }}\n\
             [load]\nkind = \"closed\"\nconcurrency = 1\nrequests = {requests}\n\
             [warmup]\nrequests = 0\n[quality]\nmode = \"none\"\n"
        );
        std::fs::write(&contract, text).map_err(|e| format!("{}: {e}", contract.display()))?;
        let c = contract.to_string_lossy();
        self.goodput(&name, &["run", "-q", &c, "--out", "runs"])
    }

    fn figures(&self, only: Option<Part>) -> Result<Vec<Figure>, String> {
        let mut v = Vec::new();
        if only != Some(Part::Offline) {
            v.extend(self.run_figures()?);
        }
        if only != Some(Part::Run) {
            v.extend(self.offline_figures()?);
        }
        Ok(v)
    }

    /// `run_per_request` and `run_per_sse_event`, against the canned server.
    fn run_figures(&self) -> Result<Vec<Figure>, String> {
        let addr = canned_server().map_err(|e| format!("the canned server: {e}"))?;
        let url = format!("http://{addr}");
        let (n1, n2, k) = (200u32, 400u32, 256u32);
        let base = self.run(&url, n1, 1)?;
        let more = self.run(&url, n2, 1)?;
        let long = self.run(&url, n1, k)?;
        Ok(vec![
            Figure {
                name: "run_per_request",
                count: (more - base) / f64::from(n2 - n1),
                how: format!("run of {n2} minus {n1} one-token requests, per request"),
            },
            Figure {
                name: "run_per_sse_event",
                count: (long - base) / f64::from(n1 * (k - 1)),
                how: format!("{n1} requests of {k} tokens minus of 1, per event"),
            },
        ])
    }

    /// `report_100k_requests` and `plan_100k_requests`: computation alone, no server.
    fn offline_figures(&self) -> Result<Vec<Figure>, String> {
        let mut v = Vec::new();
        let bundle = self.work.path().join("bundle-100k");
        let b = bundle.to_string_lossy();
        let synth = self.bin.join("examples").join("synth_bundle");
        let st = Command::new(&synth)
            .args([&*b, "--requests", "100000", "--output-tokens", "16"])
            .status()
            .map_err(|e| format!("{}: {e}", synth.display()))?;
        if !st.success() {
            return Err(format!("{} failed ({st})", synth.display()));
        }
        v.push(Figure {
            name: "report_100k_requests",
            count: self.goodput("report", &["report", &b])?,
            how: "goodput report of 100,000 requests of 16 tokens".into(),
        });
        let plan = self.work.path().join("plan.toml");
        std::fs::write(
            &plan,
            "name = \"plan-100k\"\n[target]\nurl = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
             [workload]\nseed = 1\ninput_tokens = { dist = \"uniform\", min = 8, max = 24 }\n\
             output_tokens = { dist = \"uniform\", min = 16, max = 256 }\n\
             [load]\nkind = \"open\"\nrate = 100\nrequests = 100000\n[warmup]\nrequests = 0\n",
        )
        .map_err(|e| format!("{}: {e}", plan.display()))?;
        v.push(Figure {
            name: "plan_100k_requests",
            count: self.goodput("plan", &["plan", &plan.to_string_lossy()])?,
            how: "goodput plan of 100,000 requests of 8–24 prompt tokens".into(),
        });
        Ok(v)
    }
}

/// Which figures `--only` counts.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// The two `run` figures, which a starved process bends.
    Run,
    /// `report` and `plan`, which no load bends.
    Offline,
}

/// One budget: the instructions a figure may take, and by how much more it may.
#[derive(serde::Deserialize, serde::Serialize, Clone, Copy)]
struct Budget {
    instructions: u64,
    margin: f64,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut bin, mut profile, mut budgets, mut update, mut keep, mut only) = (
        None,
        "dev".to_owned(),
        PathBuf::from("bench/instructions.toml"),
        false,
        None,
        None,
    );
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bin" => bin = args.next().map(PathBuf::from),
            "--profile" => match args.next() {
                Some(p) if p == "dev" || p == "release" => profile = p,
                _ => return usage("--profile is dev or release"),
            },
            "--budgets" => match args.next() {
                Some(p) => budgets = PathBuf::from(p),
                None => return usage("--budgets needs a file"),
            },
            "--update" => update = true,
            "--only" => match args.next().as_deref() {
                Some("run") => only = Some(Part::Run),
                Some("offline") => only = Some(Part::Offline),
                _ => return usage("--only is run or offline"),
            },
            "--keep" => match args.next() {
                Some(d) => keep = Some(PathBuf::from(d)),
                None => return usage("--keep needs a directory"),
            },
            _ => return usage(&format!("unexpected argument {a}")),
        }
    }
    let Some(bin) = bin else {
        return usage("give the build's directory with --bin");
    };
    let work = match tempfile::tempdir() {
        Ok(w) => w,
        Err(e) => return fail(&format!("a temporary directory: {e}")),
    };
    if let Some(d) = &keep
        && let Err(e) = std::fs::create_dir_all(d)
    {
        return fail(&format!("{}: {e}", d.display()));
    }
    let figures = match (Bench { bin, work, keep }).figures(only) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let text = std::fs::read_to_string(&budgets).unwrap_or_default();
    let mut all: std::collections::BTreeMap<String, std::collections::BTreeMap<String, Budget>> =
        match toml::from_str(&text) {
            Ok(b) => b,
            Err(e) => return fail(&format!("{}: {e}", budgets.display())),
        };
    let mine = all.entry(profile.clone()).or_default();
    let mut over = 0;
    println!(
        "{:<22} {:>16} {:>16} {:>8}  how ({profile} build)",
        "figure", "instructions", "budget", "ratio"
    );
    for f in &figures {
        let budget = mine.get(f.name).copied();
        let (b, ratio, mark) = match budget {
            Some(b) => {
                let ratio = f.count / b.instructions as f64;
                let mark = if ratio > 1.0 + b.margin {
                    over += 1;
                    format!("  OVER BUDGET (margin {:.0}%)", b.margin * 100.0)
                } else {
                    String::new()
                };
                (b.instructions.to_string(), format!("{ratio:.3}"), mark)
            }
            None => ("none".into(), "-".into(), String::new()),
        };
        println!(
            "{:<22} {:>16.0} {b:>16} {ratio:>8}  {}{mark}",
            f.name, f.count, f.how
        );
    }
    if update {
        for f in &figures {
            let margin = mine.get(f.name).map_or(0.05, |b| b.margin);
            mine.insert(
                f.name.to_owned(),
                Budget {
                    instructions: f.count.round() as u64,
                    margin,
                },
            );
        }
        let header = "# Instruction budgets of goodput's hot paths (examples/instructions.rs, run by\n\
             # bench/instructions.sh): per build profile, each figure's instructions under callgrind\n\
             # and how far above them a run may go before it fails. CI checks `dev` (the tests'\n\
             # build). Rewritten by `bench/instructions.sh --update`; a new toolchain moves every\n\
             # figure a little, so update them in a commit of their own and say why.\n\n";
        let body = match toml::to_string(&all) {
            Ok(b) => b,
            Err(e) => return fail(&format!("{}: {e}", budgets.display())),
        };
        if let Err(e) = std::fs::write(&budgets, format!("{header}{body}")) {
            return fail(&format!("{}: {e}", budgets.display()));
        }
        println!("budgets written to {}", budgets.display());
        return ExitCode::SUCCESS;
    }
    if over > 0 {
        eprintln!(
            "instructions: {over} figure(s) over budget: find what made them costlier \
             (callgrind_annotate on the run), or, if the cost is wanted, raise the budget \
             with --update in a commit that says why"
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn fail(why: &str) -> ExitCode {
    eprintln!("instructions: {why}");
    ExitCode::from(2)
}

fn usage(why: &str) -> ExitCode {
    eprintln!(
        "instructions: {why}\nusage: instructions --bin DIR [--profile dev|release] [--budgets FILE] [--update] [--keep DIR] [--only run|offline]"
    );
    ExitCode::from(2)
}
