//! The command line: parses arguments and calls the library. No logic of its own beyond
//! choosing what to print and the exit status.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::contract::{self, source};
use crate::report::Doc;
use crate::report::format::{Format, Output};
use crate::sim::{SimConfig, SimServer};

/// A line on stderr; like everything goodput prints, with every registered secret redacted.
macro_rules! say_err {
    ($($t:tt)*) => {
        eprintln!("{}", crate::secrets::redact(&format!($($t)*)))
    };
}

#[derive(Debug, Parser)]
#[command(
    name = "goodput",
    version,
    about = "Benchmarks LLM inference servers correctly: a workload contract, open-loop load, distributions and goodput under an SLO."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where bundles go and how results are shown, for the commands that run load.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Directory that receives bundles.
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT")]
    pub out: PathBuf,
    /// No progress bar or notes; warnings still go to stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub format: FormatArgs,
    /// The whole report: also the contract card (fingerprints), requested/sent/reported token
    /// lengths, confidence intervals, each percentile's support and the dispatch lag split
    /// (always in report.html, report.md, and every `--format` but terminal).
    #[arg(long, short)]
    pub verbose: bool,
    /// Leave the CPUs' idle states alone and the dispatch thread at normal priority. By default
    /// a run asks the kernel (/dev/cpu_dma_latency, when writable) to keep idle CPUs quick to
    /// wake, and runs the thread that keeps the open-loop schedule at real-time priority 1 (when
    /// permitted), so the schedule is kept to the tens of microseconds; environment.json says
    /// whether each held.
    #[arg(long)]
    pub no_wake_latency_hold: bool,
}

/// How a command writes its result: one `--format` for every command. The older flags
/// (`--json`, `--markdown`, `--html`) still work and mean the same format.
#[derive(Debug, Default, clap::Args)]
pub struct FormatArgs {
    /// How to write the result: aligned text (the default), Markdown for a pull request, a
    /// self-contained HTML page (with figures where the command draws them), or the command's
    /// value as JSON.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Same as `--format markdown`.
    #[arg(long, conflicts_with_all = ["format", "json"])]
    pub markdown: bool,
    /// Same as `--format html`.
    #[arg(long, conflicts_with_all = ["format", "json", "markdown"])]
    pub html: bool,
}

impl FormatArgs {
    pub fn get(&self) -> Format {
        match (self.format, self.json, self.markdown, self.html) {
            (Some(f), ..) => f,
            (None, true, _, _) => Format::Json,
            (None, _, true, _) => Format::Markdown,
            (None, _, _, true) => Format::Html,
            _ => Format::Terminal,
        }
    }
}

/// Shows a run's progress and warnings on stderr: on a terminal a bar redrawn in place,
/// otherwise (CI, a log file) one line every `GOODPUT_PROGRESS_SECS` (10 s).
#[derive(Debug)]
struct Stderr {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
    /// `None` on a terminal; else the interval between lines and when the next is due.
    lines: Option<(Duration, std::sync::Mutex<Duration>)>,
}

impl Stderr {
    fn new() -> Stderr {
        use std::io::IsTerminal;
        let every = std::env::var("GOODPUT_PROGRESS_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(Duration::from_secs(10), Duration::from_secs_f64);
        Stderr {
            bar: std::sync::Mutex::new(None),
            lines: (!std::io::stderr().is_terminal())
                .then(|| (every, std::sync::Mutex::new(every))),
        }
    }
}

impl crate::run::Watch for Stderr {
    fn progress(&self, p: &crate::run::Progress) {
        match &self.lines {
            Some((every, next)) => {
                let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                if p.elapsed >= *next {
                    say_err!("{}", p.line());
                    *next += *every;
                }
            }
            None => {
                let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
                let b = bar.get_or_insert_with(|| {
                    let b = match p.planned {
                        Some(n) => indicatif::ProgressBar::new(n),
                        None => indicatif::ProgressBar::new_spinner(),
                    };
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                        .progress_chars("=> "),
                    );
                    b
                });
                b.set_position(p.finished);
                b.set_message(format!(
                    "errors {} · TTFT p50 {:.1} ms p99 {:.1} ms",
                    p.errors, p.ttft_p50_ms, p.ttft_p99_ms
                ));
            }
        }
    }

    fn finished(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
        if let Some((every, next)) = &self.lines {
            *next.lock().unwrap_or_else(|e| e.into_inner()) = *every;
        }
    }

    fn warn(&self, message: &str) {
        say_err!("warning: {message}");
    }

    fn note(&self, message: &str) {
        say_err!("note: {message}");
    }

    fn line(&self, message: &str) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            b.suspend(|| say_err!("{message}"));
        } else {
            say_err!("{message}");
        }
    }
}

/// A span on the command line: a number with a unit (`90s`, `15m`, `2h`), or `0`.
fn parse_span(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let secs = crate::contract::units::parse_seconds(s)?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("`{s}`: give a span of 0 or more, such as 15m"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--quiet`: no progress, but every warning still reaches stderr (an unreachable telemetry
/// page, a client falling behind) — quiet is for logs, not for hiding what went wrong.
#[derive(Debug)]
struct WarningsOnly;

impl crate::run::Watch for WarningsOnly {
    fn warn(&self, message: &str) {
        say_err!("warning: {message}");
    }
}

/// The signal that interrupted this process, if one did (see [`cancel_on_signals`]).
static CAUGHT: std::sync::LazyLock<Arc<OnceLock<&'static str>>> =
    std::sync::LazyLock::new(Arc::default);

/// The signals goodput treats as "stop now, keep everything": Ctrl-C, and what `timeout`,
/// `docker stop`, Kubernetes, systemd and CI cancellation send.
const STOP_SIGNALS: [(&str, i32); 3] = [
    ("SIGINT", libc::SIGINT),
    ("SIGTERM", libc::SIGTERM),
    ("SIGHUP", libc::SIGHUP),
];

/// The one shutdown path. SIGINT, SIGTERM and SIGHUP each cancel the token: the run stops
/// sending, marks its requests in flight interrupted, writes every record and the summary,
/// names the signal in the bundle and stops a server it launched. A second signal ends the
/// process at once (the records already written are kept; a launched server's guard stops it).
fn cancel_on_signals(in_flight: &'static str) -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    let mut streams = stop_signal_streams();
    tokio::spawn(async move {
        loop {
            let waits = streams.iter_mut().map(|(name, s)| {
                let name: &'static str = name;
                Box::pin(async move { s.recv().await.map(|()| name) })
            });
            let (got, _, _) = futures_util::future::select_all(waits).await;
            let Some(name) = got else { return };
            if CAUGHT.set(name).is_err() {
                say_err!("{name} again: stopping at once; the records already written are kept");
                std::process::exit(signal_exit(name).into());
            }
            say_err!("interrupted by {name}: finishing {in_flight}… (again to stop at once)");
            on_signal.cancel();
        }
    });
    cancel
}

/// A stream per stop signal, each with its name (one that cannot be handled is said and left).
fn stop_signal_streams() -> Vec<(&'static str, tokio::signal::unix::Signal)> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut streams = Vec::new();
    for (name, n) in STOP_SIGNALS {
        match signal(SignalKind::from_raw(n)) {
            Ok(s) => streams.push((name, s)),
            Err(e) => say_err!("warning: cannot handle {name}: {e}"),
        }
    }
    streams
}

/// 128 + the signal's number: the shell's convention for a process a signal ended.
fn signal_exit(name: &str) -> u8 {
    let n = STOP_SIGNALS
        .iter()
        .find(|(s, _)| *s == name)
        .map_or(libc::SIGINT, |(_, n)| *n);
    128 + n as u8
}

/// Exit status when the run stopped on its own because the target failed (every request
/// that reached it failed, or it stopped answering).
const EXIT_GAVE_UP: u8 = 3;

/// 128 + the signal when one interrupted the run, [`EXIT_GAVE_UP`] when it gave up, else
/// success.
fn exit_code(interrupted: bool, gave_up: bool) -> ExitCode {
    match CAUGHT.get() {
        Some(name) if interrupted => ExitCode::from(signal_exit(name)),
        _ if gave_up => ExitCode::from(EXIT_GAVE_UP),
        _ if interrupted => ExitCode::from(signal_exit("SIGINT")),
        _ => ExitCode::SUCCESS,
    }
}

/// The exit status of a command that failed: 128 + the signal if one interrupted it (an
/// interrupted wait is an error, "nothing was measured"), else 1.
pub fn failure_code() -> ExitCode {
    CAUGHT
        .get()
        .map_or(ExitCode::FAILURE, |name| ExitCode::from(signal_exit(name)))
}

/// A contract's (or simulator configuration's) text, size-limited; the error names the file.
fn read_contract(p: &Path) -> anyhow::Result<String> {
    crate::text::read_capped_string(p, crate::text::MAX_CONTRACT_BYTES)
        .with_context(|| format!("reading {}", p.display()))
}

/// Reads a bundle (recomputing its summary), saying on stderr what reading it noticed.
fn load_bundle(dir: &Path) -> anyhow::Result<crate::bundle::Loaded> {
    let b = crate::bundle::Bundle::load(dir)?;
    for w in &b.warnings {
        say_err!("warning: {w}");
    }
    Ok(b)
}

/// Writes a command's result in the chosen format.
fn emit<T: serde::Serialize + ?Sized>(
    format: Format,
    title: &str,
    doc: &Doc,
    value: &T,
) -> std::io::Result<()> {
    say(&format.render(&Output { title, doc, value }))
}

/// Changes to the contract for this run, written into its text before it is parsed (so the
/// bundle's resolved contract and every fingerprint hold what was run, and `command.json` lists
/// them). The same dotted keys as `sweep --vary`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Overrides {
    /// Set a contract field, e.g. `--set load.rate=5 --set slo.ttft_ms=300` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The server's base URL (`target.url`), e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub url: Option<String>,
    /// The model to ask for (`target.model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Open loop at this many requests per second (`load.rate`).
    #[arg(long, conflicts_with = "concurrency")]
    pub rate: Option<String>,
    /// Closed loop with this many users (`load.concurrency`).
    #[arg(long)]
    pub concurrency: Option<String>,
    /// Measured requests (`load.requests`).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<String>,
    /// Measured duration, e.g. 60s (`load.duration`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Further shorthands of one command (`run --shard`, `--start-at`): name and value.
    #[arg(skip)]
    pub more: Vec<(&'static str, String)>,
}

impl Overrides {
    /// The edits, shorthands first, then each `--set` in order; and how they read.
    fn edits(&self) -> anyhow::Result<(Vec<contract::edit::Edit>, Vec<String>)> {
        let mut edits = Vec::new();
        let mut said = Vec::new();
        for (name, v) in [
            ("url", &self.url),
            ("model", &self.model),
            ("rate", &self.rate),
            ("concurrency", &self.concurrency),
            ("requests", &self.requests),
            ("duration", &self.duration),
        ] {
            if let Some(v) = v {
                edits.extend(contract::edit::shorthand(name, v));
                said.push(format!("--{name} {v}"));
            }
        }
        for (name, v) in &self.more {
            edits.extend(contract::edit::shorthand(name, v));
            said.push(format!("--{name} {v}"));
        }
        for s in &self.set {
            edits.push(contract::edit::Edit::parse_set(s).map_err(anyhow::Error::msg)?);
            said.push(format!("--set {s}"));
        }
        Ok((edits, said))
    }

    /// The contract text with the changes made.
    fn apply(&self, src: &str, path: &Path) -> anyhow::Result<(String, Vec<String>)> {
        let (edits, said) = self.edits()?;
        let text = contract::edit::apply(src, &edits)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok((text, said))
    }
}

impl OutputArgs {
    /// How a run started from this command line writes and shows itself.
    fn run_options(&self) -> crate::run::RunOptions {
        crate::run::RunOptions {
            out_root: self.out.clone(),
            watch: if self.quiet {
                std::sync::Arc::new(WarningsOnly)
            } else {
                std::sync::Arc::new(Stderr::new())
            },
            argv: std::env::args().collect(),
            overrides: Vec::new(),
            bundle_dir: None,
            wake_latency_hold: !self.no_wake_latency_hold,
            signal: CAUGHT.clone(),
            live: None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload contract and keep the bundle (no contract: the built-in example against
    /// the embedded simulator).
    #[command(
        after_help = "Exit status: 0 the run completed (and passed every --fail-on gate); 1 an error (bad contract, unreachable target, no request succeeded); 3 the run gave up (every request that reached the target failed, or it stopped answering); with --fail-on, the first failing gate in this order: 4 INVALID (the measurement: client behind its schedule, overload, dropped arrivals, interrupted), 5 SLO missed (conclusively, or at the point estimates) or 8 SLO met but not yet supported by the sample (too few requests for its percentile at measurement.confidence), 6 a prediction did not hold, 7 quality not held against --baseline; 128 + N a signal stopped it (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), every record kept."
    )]
    Run(RunArgs),
    /// Compare results (bundles or repeat sets) against the first, refusing when their
    /// contracts differ in more than one variable.
    Compare(CompareArgs),
    /// Write a commented example contract.
    Init(InitArgs),
    /// Print a contract's plan as JSON lines (same contract and seed: same bytes).
    Plan(PlanArgs),
    /// Recompute and print a bundle's summary from its raw records.
    Report(ReportArgs),
    /// Grade a result as comparable or directional and list what it lacks: a goodput bundle or
    /// repeat set, a vLLM `bench serve --save-result` JSON, or a GuideLLM report JSON.
    Audit(AuditArgs),
    /// Run a contract once per value of one field (`--vary load.rate=1,2,4,8`), all else equal,
    /// and tabulate offered vs achieved rate, latency, throughput, attainment and goodput.
    Sweep(SweepArgs),
    /// Show coordinated omission: open vs closed loop from 50% to 120% of capacity, on the
    /// simulator's discrete-event clock (seconds).
    Demo(DemoArgs),
    /// Serve the simulated inference server on loopback until interrupted.
    Sim(SimArgs),
    /// Join the bundles of one sharded run (`run --shard I/N`, one per client machine) into
    /// one bundle, its summary recomputed from every shard's raw records.
    #[command(
        after_help = "Refused (exit 1, naming the bundle) unless the bundles are every shard of one plan exactly once: the same contract but for load.shard, the same shard count and start instant."
    )]
    Merge(MergeArgs),
    /// Write a bundle's raw records as tables (requests, chunks) in CSV, Parquet or JSON
    /// lines, with the column meanings beside them (columns.md).
    Export(ExportArgs),
}

// The arguments of `goodput export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    bundle: PathBuf,
    /// The tables' file format.
    #[arg(long, value_enum)]
    format: crate::export::ExportFormat,
    /// Directory for the tables (default: `export/` inside the bundle).
    #[arg(long)]
    out: Option<PathBuf>,
}

// The arguments of `goodput merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' bundles, in any order, or directories holding them (every shard bundle
    /// in it of one run, or of the run --start-at names).
    #[arg(required = true)]
    bundles: Vec<PathBuf>,
    /// With a directory: merge the shards that started at this instant (RFC 3339).
    #[arg(long, value_name = "INSTANT")]
    start_at: Option<String>,
    /// Directory that receives the merged bundle (under the contract's name).
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT")]
    out: PathBuf,
    /// Merge a shard that holds no record (a client that sent nothing); refused otherwise.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    format: FormatArgs,
    /// The whole report (see `run --verbose`).
    #[arg(long, short)]
    verbose: bool,
}

// The arguments of `goodput run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Contract file (TOML). Default: the built-in example (`goodput init` writes it).
    contract: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    overrides: Overrides,
    /// Measure a cold start: wait for the server to become ready (launching it when the
    /// contract's [cold_start] says how) and report its first requests apart.
    #[arg(long)]
    cold_start: bool,
    /// Run the contract this many times (overrides [repeat] runs).
    #[arg(long)]
    repeats: Option<u32>,
    /// Write down expectations before the run, e.g. "ttft_p99<=300ms,goodput>=12"
    /// (overrides [prediction]); the report shows predicted vs measured.
    #[arg(long)]
    predict: Option<String>,
    /// Send only shard I (from 0) of N of the plan (`load.shard`): the arrivals whose plan
    /// index is I modulo N (whole sessions), for one client machine of N; `goodput merge`
    /// joins the N bundles. Needs --start-at.
    #[arg(long, value_name = "I/N", requires = "start_at")]
    shard: Option<String>,
    /// The common start instant of every shard's schedule, RFC 3339 (`load.start_at`), e.g.
    /// 2026-12-02T06:00:00Z; refused once past.
    #[arg(long, value_name = "INSTANT")]
    start_at: Option<String>,
    /// Exit with a status of its own when the result fails a gate, for CI (comma-separated,
    /// repeatable): invalid (4), slo (5), prediction (6), quality (7, with --baseline). The
    /// first failing in that order sets the status; stderr names every failing gate and why.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GATES")]
    fail_on: Vec<crate::run::Gate>,
    /// A bundle or repeat set whose outputs `--fail-on quality` holds this run's against (by
    /// the baseline's [quality] tolerances, as `compare` does).
    #[arg(long, value_name = "BUNDLE")]
    baseline: Option<PathBuf>,
    /// Watch the run on a terminal dashboard (on stderr): offered and achieved rate, in
    /// flight, latency percentiles over the last 10 s against the SLO, goodput, errors,
    /// dispatch lag, phase and time left. `q` or Ctrl-C stops the run (what was measured is
    /// kept). The bundle is the same with or without it.
    #[arg(long, conflicts_with = "repeats")]
    live: bool,
}

// The arguments of `goodput compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline, then one or more results to compare with it.
    #[arg(required = true, num_args = 2..)]
    bundles: Vec<PathBuf>,
    /// Relative change below which a difference is not called better or worse.
    #[arg(long, default_value_t = 0.05)]
    noise: f64,
    #[command(flatten)]
    format: FormatArgs,
    /// Exit 0 even when quality was not held constant (the report still says so).
    #[arg(long)]
    allow_quality_change: bool,
    /// What to call each result, in the order given (overrides `[meta] label`); as many as
    /// results, or fewer (the rest keep theirs).
    #[arg(long = "label", value_name = "NAME")]
    labels: Vec<String>,
}

// The arguments of `goodput init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    #[arg(default_value = "goodput.toml")]
    path: PathBuf,
    /// Overwrite an existing file.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    overrides: Overrides,
}

// The arguments of `goodput plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    contract: PathBuf,
    /// At most this many requests.
    #[arg(long, default_value_t = 1_000_000)]
    limit: u64,
}

// The arguments of `goodput report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    bundle: PathBuf,
    /// `html`: the self-contained report with its figures, as the run wrote it.
    #[command(flatten)]
    format: FormatArgs,
    /// The whole report (see `run --verbose`).
    #[arg(long, short)]
    verbose: bool,
}

// The arguments of `goodput audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    path: PathBuf,
    #[command(flatten)]
    format: FormatArgs,
}

// The arguments of `goodput sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    contract: PathBuf,
    /// KEY=V1,V2,… — the one contract field to vary (given twice: refused).
    #[arg(long, required_unless_present = "capacity")]
    vary: Vec<String>,
    /// Instead of a list: find the highest open-loop load.rate whose SLO attainment meets
    /// the target (bracketing, then bisection).
    #[arg(long, conflicts_with = "vary")]
    capacity: bool,
    /// Relative width at which the capacity search stops.
    #[arg(long, default_value_t = 0.05)]
    resolution: f64,
    /// Most runs the capacity search makes (at least 2: one passing and one failing rate).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u64).range(2..))]
    max_runs: u64,
    /// The longest a capacity search may spend confirming an answer its small points only
    /// indicate: one run at the passing rate with the requests its SLO claim needs, made when
    /// it fits (e.g. `30m`, `2h`; `0` never confirms).
    #[arg(long, default_value = "15m", value_parser = parse_span)]
    confirm_within: Duration,
    #[command(flatten)]
    output: OutputArgs,
    /// Changes to the contract for every point (e.g. `--requests 200` for smaller points).
    #[command(flatten)]
    overrides: Overrides,
}

// The arguments of `goodput demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Performance-model file for the simulated engine (TOML; keys as in [target.simulator]).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. `--set max_batch=32`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// `html`: a self-contained page with both curves.
    #[command(flatten)]
    format: FormatArgs,
    /// Drive the simulated engine in real time, on a dashboard whose keys change the load in
    /// place: `+`/`-` raise and lower the offered load by 10% of capacity, `o`/`c` switch to
    /// open or closed loop, `q` ends it. Each change is a segment of the run's bundle.
    #[arg(long)]
    live: bool,
    /// With --live: the offered load to start at, as a share of the engine's capacity.
    #[arg(long, default_value_t = 0.5, requires = "live")]
    load: f64,
    /// With --live: the longest it runs, seconds (it stops by itself).
    #[arg(long, default_value_t = 300.0, requires = "live")]
    duration: f64,
    /// With --live: the directory that receives the bundle.
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT", requires = "live")]
    out: PathBuf,
}

// The arguments of `goodput sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Performance-model file (TOML; keys as in [target.simulator]).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. `--set decode_base_ms=20` or `--set faults.error_rate=0.1`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Append the ground truth of every request to this JSONL file.
    #[arg(long)]
    ground_truth: Option<PathBuf>,
}

/// A repeat set as `run --repeats` and `report` show it: on a terminal each run's overview
/// first, then the aggregate in the asked format.
fn emit_repeats(
    format: Format,
    runs: &[&crate::analyze::Summary],
    rs: &crate::run::RepeatSummary,
) -> anyhow::Result<()> {
    if format == Format::Terminal {
        say(&runs_overview(runs))?;
    }
    emit(
        format,
        "goodput repeats",
        &crate::run::repeat_document(rs),
        rs,
    )?;
    Ok(())
}

/// Each run of a repeat set: its headline, every reason it is INVALID (one line each: a run
/// that fell behind its schedule may also have been overloaded, and a reader fixing the first
/// should know of the second), its SLO's verdict with its support, and how its predictions
/// fared.
fn runs_overview(runs: &[&crate::analyze::Summary]) -> String {
    let mut out = String::new();
    for (i, s) in runs.iter().enumerate() {
        out += &format!("run {:02}: {}\n", i + 1, crate::report::headline(s));
        for r in &s.validity.reasons {
            out += &format!("  INVALID: {r}\n");
        }
        if let Some(slo) = &s.steady.slo {
            out += &format!(
                "  SLO {}\n",
                crate::report::slo_verdict_words(slo, s.validity.is_valid())
            );
        }
        for o in s.predictions.iter().flat_map(|p| &p.outcomes) {
            out += &format!(
                "  predicted {}: measured {}, {}\n",
                o.text,
                o.measured.map_or("nothing".into(), crate::report::num),
                match o.held {
                    Some(true) => "held",
                    Some(false) => "did not hold",
                    None => "not measured",
                }
            );
        }
    }
    out
}

/// Writes to stdout, returning the error (a closed pipe) instead of panicking like `print!`.
fn say(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(crate::secrets::redact(text).as_bytes())?;
    out.flush()
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(a) => run_command(a).await,
        Command::Compare(a) => compare_command(a),
        Command::Init(a) => init_command(a),
        Command::Plan(a) => plan_command(a),
        Command::Report(a) if a.bundle.join("repeat.json").is_file() => report_repeats_command(a),
        Command::Report(a) => report_command(a),
        Command::Sweep(a) => sweep_command(a).await,
        Command::Demo(a) => demo_command(a).await,
        Command::Audit(a) => audit_command(a),
        Command::Sim(a) => sim_command(a).await,
        Command::Merge(a) => merge_command(a),
        Command::Export(a) => {
            let b = load_bundle(&a.bundle)?;
            let dir = a.out.unwrap_or_else(|| a.bundle.join("export"));
            let e = crate::export::export(&b, a.format, &dir)?;
            say(&format!(
                "{} requests → {}\n{} chunks → {}\ncolumns: {}\n",
                e.rows.0,
                e.requests.display(),
                e.rows.1,
                e.chunks.display(),
                e.columns.display()
            ))?;
            std::mem::forget(b);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn merge_command(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    let bundles = crate::merge::shard_bundles(&a.bundles, a.start_at.as_deref())?;
    let m = crate::merge::merge(&bundles, &a.out, &argv, a.allow_empty)?;
    for w in &m.warnings {
        say_err!("warning: {w}");
    }
    let format = a.format.get();
    match format {
        Format::Html => say(&crate::text::read_capped_string(
            &m.bundle.path("report.html"),
            crate::text::MAX_FILE_BYTES,
        )
        .with_context(|| format!("reading {}", m.bundle.dir.display()))?)?,
        format => {
            let doc =
                crate::report::document_at(&m.summary, a.verbose || format != Format::Terminal);
            emit(format, "goodput merge", &doc, &m.summary)?;
            if format == Format::Terminal {
                say(&format!("\nBundle: {}\n", m.bundle.dir.display()))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A run's contract: the file (or the built-in one) with the command line's changes made
/// (`--set`, the shorthands, `--shard`, `--start-at`); its path for messages, its text, and
/// how the changes read.
fn run_contract_text(
    contract: Option<&Path>,
    mut overrides: Overrides,
    shard: Option<String>,
    start_at: Option<String>,
) -> anyhow::Result<(PathBuf, String, Vec<String>)> {
    overrides.more.extend(shard.map(|v| ("shard", v)));
    overrides.more.extend(start_at.map(|v| ("start-at", v)));
    let (path, src) = match contract {
        Some(p) => (p.to_owned(), read_contract(p)?),
        None => (
            PathBuf::from("<built-in examples/chat.toml>"),
            contract::BUILTIN.to_owned(),
        ),
    };
    let (text, said) = overrides.apply(&src, &path)?;
    Ok((path, text, said))
}

impl Cli {
    /// The contract a `run` command line would run, its changes made and its files read as
    /// `run` reads them, without sending anything; `None` for any other command. The
    /// documents' tests hold every `goodput run` line they show to it.
    pub fn run_contract(&self) -> Option<anyhow::Result<contract::Contract>> {
        let Command::Run(a) = &self.command else {
            return None;
        };
        Some(
            run_contract_text(
                a.contract.as_deref(),
                a.overrides.clone(),
                a.shard.clone(),
                a.start_at.clone(),
            )
            .and_then(|(path, text, _)| Ok(crate::workload::parse(&text, &path)?.0)),
        )
    }
}

async fn run_command(a: RunArgs) -> anyhow::Result<ExitCode> {
    let RunArgs {
        contract,
        output,
        overrides,
        cold_start,
        repeats,
        predict,
        shard,
        start_at,
        fail_on,
        baseline,
        live,
    } = a;
    let (path, text, said) = run_contract_text(contract.as_deref(), overrides, shard, start_at)?;
    let (mut c, inputs) = crate::workload::parse(&text, &path)?;
    crate::workload::environment::check_environment(&c, &text, &path)?;
    for n in &c.notes {
        say_err!("note: {n}");
    }
    if let Some(p) = sample_plan(&c, &inputs) {
        say_err!("note: {p}");
    }
    let mut options = output.run_options();
    options.overrides = said;
    run_flags(&mut c, cold_start, predict, repeats)?;
    let gates = Gates::check(fail_on, baseline, &c)?;
    let cancel = cancel_on_signals("the records in flight");
    if c.repeat.runs > 1 {
        return repeats_command(c, inputs, &output, options, cancel, &gates).await;
    }
    let r = if live {
        let title = format!("goodput run {}", c.name);
        let board = crate::live::Board::new(Arc::new(c.clone()), None);
        watched(board, title, options, cancel, |o, k| {
            crate::run::run(c, inputs, o, k)
        })
        .await?
    } else {
        crate::run::run(c, inputs, options, cancel).await?
    };
    match output.format.get() {
        // The page the run wrote into its bundle, with its figures.
        Format::Html => say(&crate::text::read_capped_string(
            &r.bundle.path("report.html"),
            crate::text::MAX_FILE_BYTES,
        )
        .with_context(|| format!("reading {}", r.bundle.dir.display()))?)?,
        format => {
            let doc = crate::report::document_at(
                &r.summary,
                output.verbose || format != Format::Terminal,
            );
            emit(format, "goodput run", &doc, &r.summary)?;
            if format == Format::Terminal {
                say(&format!("\nBundle: {}\n", r.bundle.dir.display()))?;
            }
        }
    }
    explain_failure(&r)?;
    Ok(gates.exit(
        exit_code(r.summary.interrupted, r.aborted.is_some()),
        &[&r.summary],
        &r.bundle.dir,
    ))
}

/// The run's own flags, made into the contract: `--cold-start`, `--predict`, `--repeats`.
fn run_flags(
    c: &mut contract::Contract,
    cold_start: bool,
    predict: Option<String>,
    repeats: Option<u32>,
) -> anyhow::Result<()> {
    if cold_start && c.cold_start.is_none() {
        c.cold_start = Some(contract::ColdStart::default());
    }
    if let Some(p) = predict {
        contract::prediction::parse_list(&p).map_err(|e| anyhow::anyhow!("--predict: {e}"))?;
        c.prediction = Some(contract::PredictionSpec {
            expect: p
                .split(',')
                .map(|x| x.trim().to_owned())
                .filter(|x| !x.is_empty())
                .collect(),
        });
    }
    if let Some(n) = repeats {
        if n == 0 {
            bail!("--repeats must be at least 1");
        }
        c.repeat.runs = n;
    }
    if c.repeat.runs > 1 && c.load.shard.is_some() {
        bail!(
            "a shard runs once, at its start instant: repeat a sharded run by starting every shard again with a new --start-at"
        );
    }
    Ok(())
}

/// `run --repeats N` (or `[repeat] runs`): the runs, their overview and the repeat set.
async fn repeats_command(
    c: contract::Contract,
    inputs: crate::workload::Inputs,
    output: &OutputArgs,
    options: crate::run::RunOptions,
    cancel: CancellationToken,
    gates: &Gates,
) -> anyhow::Result<ExitCode> {
    let (parent, rs, results) = crate::run::run_repeats(c, inputs, options, cancel).await?;
    let format = output.format.get();
    let summaries: Vec<&crate::analyze::Summary> = results.iter().map(|r| &r.summary).collect();
    emit_repeats(format, &summaries, &rs)?;
    if format == Format::Terminal {
        say(&format!("\nBundle: {}\n", parent.dir.display()))?;
    }
    Ok(gates.exit(
        exit_code(
            results.iter().any(|r| r.summary.interrupted),
            results.iter().any(|r| r.aborted.is_some()),
        ),
        &summaries,
        &parent.dir,
    ))
}

/// A run that ended without a success: why, on stderr (it gave up: exit 3 follows) or as the
/// command's error (nothing sent, nothing succeeded).
fn explain_failure(r: &crate::run::RunResult) -> anyhow::Result<()> {
    let st = &r.summary.steady.stats;
    let first = || {
        r.records
            .iter()
            .find_map(|x| x.error.clone())
            .unwrap_or_default()
    };
    if let Some(why) = &r.aborted {
        // Stopped on its own: the target failed. Said on stderr, with exit status 3.
        let first = first();
        let first = if st.ok == 0 && !why.contains(&*first) {
            format!("; no request succeeded, the first failed with: {first}")
        } else if st.ok == 0 {
            "; no request succeeded".to_owned()
        } else {
            String::new()
        };
        say_err!(
            "goodput: {why}{first}. The bundle is kept at {}",
            r.bundle.dir.display()
        );
    } else if st.ok == 0 && !r.summary.interrupted {
        let sent = r.records.iter().filter(|x| x.sent_us.is_some()).count();
        if sent == 0 {
            bail!(
                "no request was sent: the plan ended before its first send (is load.duration or load.requests too small?). The bundle is kept at {}",
                r.bundle.dir.display()
            );
        }
        bail!(
            "no request succeeded ({} failed); first error: {}. The bundle is kept at {}",
            r.records.len(),
            first(),
            r.bundle.dir.display()
        );
    }
    Ok(())
}

/// `run --fail-on`: the gates asked for, checked against the contract before the run (a gate
/// that could never pass is a mistake in the command), and the baseline for `quality`, loaded
/// before the run too.
struct Gates {
    gates: Vec<crate::run::Gate>,
    baseline: Option<crate::compare::Side>,
}

impl Gates {
    fn check(
        gates: Vec<crate::run::Gate>,
        baseline: Option<PathBuf>,
        c: &contract::Contract,
    ) -> anyhow::Result<Gates> {
        use crate::run::Gate;
        if gates.contains(&Gate::Slo) && !c.has_slo() {
            bail!("--fail-on slo: the contract has no [slo] thresholds to meet");
        }
        if gates.contains(&Gate::Prediction) && c.prediction.is_none() {
            bail!(
                "--fail-on prediction: nothing was predicted (--predict, or [prediction] expect)"
            );
        }
        let baseline = match (gates.contains(&Gate::Quality), baseline) {
            (true, None) => bail!(
                "--fail-on quality needs --baseline BUNDLE: a run's outputs are held against another run's"
            ),
            (false, Some(_)) => bail!("--baseline is read by --fail-on quality only"),
            (true, Some(p)) => Some(
                crate::compare::load_side(&p)
                    .with_context(|| format!("--baseline {}", p.display()))?,
            ),
            (false, None) => None,
        };
        Ok(Gates { gates, baseline })
    }

    /// The exit status: `code` when the run ended on a signal or gave up, else the first
    /// failing gate's (each failing gate said on stderr), else success.
    fn exit(&self, code: ExitCode, runs: &[&crate::analyze::Summary], bundle: &Path) -> ExitCode {
        if self.gates.is_empty() || code != ExitCode::SUCCESS {
            return code;
        }
        let quality = self
            .baseline
            .as_ref()
            .map(|b| match crate::compare::load_side(bundle) {
                Ok(this) => crate::compare::quality_guard(b, &this),
                Err(e) => crate::compare::QualityGuard {
                    status: crate::compare::GuardStatus::Unchecked,
                    detail: format!("reading {}: {e:#}", bundle.display()),
                    consistency: None,
                },
            });
        let failed = crate::run::failed_gates(&self.gates, runs, quality.as_ref());
        for f in &failed {
            say_err!(
                "fail-on {} (exit {}): {}",
                format!("{:?}", f.gate).to_lowercase(),
                f.exit,
                f.why
            );
        }
        failed
            .first()
            .map_or(ExitCode::SUCCESS, |f| ExitCode::from(f.exit))
    }
}

fn compare_command(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let CompareArgs {
        bundles,
        noise,
        format,
        allow_quality_change,
        labels,
    } = a;
    if labels.len() > bundles.len() {
        bail!(
            "--label given {} times for {} results",
            labels.len(),
            bundles.len()
        );
    }
    let mut sides = bundles
        .iter()
        .map(|b| crate::compare::load_side(b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for w in sides.iter().flat_map(|s| &s.warnings) {
        say_err!("warning: {w}");
    }
    for (s, l) in sides.iter_mut().zip(labels) {
        s.label = Some(l);
    }
    let comparisons: Vec<_> = sides[1..]
        .iter()
        .map(|o| crate::compare::compare(&sides[0], o, noise))
        .collect();
    let doc = crate::compare::document(&comparisons);
    match format.get() {
        Format::Html => say(&crate::compare::html_page(&sides, &comparisons))?,
        f => emit(f, "goodput compare", &doc, &comparisons)?,
    }
    let refused = comparisons.iter().filter(|c| !c.refused.is_empty()).count();
    if refused > 0 {
        bail!(
            "{refused} of {} comparisons refused: their contracts differ in more than the variable under test",
            comparisons.len()
        );
    }
    let unheld = comparisons.iter().filter(|c| !c.quality.held()).count();
    if unheld > 0 && !allow_quality_change {
        bail!(
            "{unheld} of {} comparisons did not hold quality constant (shown above); pass --allow-quality-change to accept that",
            comparisons.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn init_command(a: InitArgs) -> anyhow::Result<ExitCode> {
    let InitArgs {
        path,
        force,
        overrides,
    } = a;
    if path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", path.display());
    }
    let (text, _) = overrides.apply(contract::BUILTIN, &path)?;
    // Checked before it is written: a shorthand that makes the template invalid says so.
    contract::parse(&text, &path)?;
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    say(&format!(
        "wrote {}; run it with: goodput run {}\n",
        path.display(),
        path.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn plan_command(a: PlanArgs) -> anyhow::Result<ExitCode> {
    let PlanArgs { contract, limit } = a;
    let (c, inputs) = crate::workload::load(&contract)?;
    // What the plan's sample can support goes to stderr: stdout is the plan itself.
    if let Some(p) = sample_plan(&c, &inputs) {
        say_err!("note: {p}");
    }
    say(&crate::plan::Plan::new(&c, &inputs).to_jsonl(limit))?;
    Ok(ExitCode::SUCCESS)
}

/// What a contract's steady sample can support, before its run (`analyze::claims::planning`):
/// the plan's steady requests, or an open loop's rate × duration.
fn sample_plan(c: &contract::Contract, inputs: &crate::workload::Inputs) -> Option<String> {
    let planned = crate::plan::Plan::new(c, inputs)
        .planned_by_phase()
        .get(&crate::plan::Phase::Steady)
        .copied()
        .or_else(|| {
            let d = c.load.duration()?;
            (c.load.is_open() && c.workload.sessions.is_none())
                .then(|| (c.load.rate() * d.seconds()) as u64)
        });
    crate::analyze::claims::planning(c, planned)
}

fn report_repeats_command(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let ReportArgs {
        bundle,
        format,
        verbose,
    } = a;
    // A repeat set: every run recomputed from its own records, then the aggregate.
    let c = contract::load(&bundle.join(crate::bundle::CONTRACT))?;
    let dirs = crate::bundle::repeat_runs(&bundle)
        .with_context(|| format!("reading {}", bundle.display()))?
        .unwrap_or_default();
    let runs = dirs
        .iter()
        .map(|d| load_bundle(d).map(|b| b.summary))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let refs: Vec<&crate::analyze::Summary> = runs.iter().collect();
    let rs = crate::run::repeat_summary(&c, &refs);
    let format = format.get();
    if format == Format::Html {
        bail!(
            "--format html reports one run: give one of {}'s run-NN bundles",
            bundle.display()
        );
    }
    emit_repeats(format, &refs, &rs)?;
    if format == Format::Terminal && verbose {
        for (d, s) in dirs.iter().zip(&runs) {
            say(&format!("\n{}\n", d.display()))?;
            say(&crate::report::document_at(s, true).terminal())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn report_command(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let ReportArgs {
        bundle,
        format,
        verbose,
    } = a;
    let b = load_bundle(&bundle)?;
    let s = &b.summary;
    match format.get() {
        Format::Html => {
            let seconds = crate::analyze::timeseries(&b.records);
            say(&crate::report::html::page(
                &b.contract,
                &b.inputs,
                s,
                &b.records,
                &seconds,
            ))?;
        }
        format => {
            let doc = crate::report::document_at(s, verbose || format != Format::Terminal);
            emit(format, "goodput report", &doc, s)?;
        }
    }
    // Freeing a million records one by one takes the better part of a second; the process
    // ends here and the system takes the memory back at once.
    std::mem::forget(b);
    Ok(ExitCode::SUCCESS)
}

async fn sweep_command(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let SweepArgs {
        contract: path,
        vary,
        capacity,
        resolution,
        max_runs,
        confirm_within,
        output,
        overrides,
    } = a;
    let src = read_contract(&path)?;
    let (src, _) = overrides.apply(&src, &path)?;
    let cancel = cancel_on_signals("the point in flight");
    let format = output.format.get();
    let opts = output.run_options();
    let o = crate::sweep::SweepOptions {
        out_root: opts.out_root,
        watch: opts.watch,
        argv: opts.argv,
        cancel,
        signal: opts.signal,
        wake_latency_hold: opts.wake_latency_hold,
    };
    let (bundle, r) = if capacity {
        if !(resolution > 0.0 && resolution < 1.0) {
            bail!("--resolution must be a fraction in (0, 1)");
        }
        crate::sweep::capacity(
            &path,
            &src,
            resolution,
            max_runs as usize,
            confirm_within,
            &o,
        )
        .await?
    } else {
        let vary = crate::sweep::Vary::parse(&vary)?;
        crate::sweep::sweep(&path, &src, &vary, &o).await?
    };
    match format {
        Format::Html => say(&crate::sweep::html_page(&r))?,
        format => emit(format, "goodput sweep", &crate::sweep::document(&r), &r)?,
    }
    if format == Format::Terminal {
        say(&format!("\nSweep bundle: {}\n", bundle.dir.display()))?;
    }
    Ok(exit_code(r.interrupted, false))
}

/// Runs `run` with a dashboard on the terminal, fed by `board`: its warnings and notes are
/// held until the dashboard has closed; its `q` or Ctrl-C stops the run as a signal would
/// (a live demo's `q` instead ends its load gracefully, through the board's control). The
/// terminal is restored however the run ends.
async fn watched<F, Fut>(
    board: Arc<crate::live::Board>,
    title: String,
    mut options: crate::run::RunOptions,
    cancel: CancellationToken,
    run: F,
) -> anyhow::Result<crate::run::RunResult>
where
    F: FnOnce(crate::run::RunOptions, CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<crate::run::RunResult>>,
{
    let later = Arc::new(Later::default());
    options.watch = later.clone();
    options.live = Some(board.clone());
    // A live demo's `q` and Ctrl-C (keys, not signals) end its load through the board's
    // control; a run's stop it as a signal would.
    if board.control().is_none() {
        let (quit, cancel) = (board.quit.clone(), cancel.clone());
        let b = board.clone();
        tokio::spawn(async move {
            quit.cancelled().await;
            let _ = CAUGHT.set(match b.quit_by.get() {
                Some(&"Ctrl-C") => "SIGINT",
                _ => "the dashboard's q",
            });
            cancel.cancel();
        });
    }
    let dash = crate::live::tui::Dashboard::start(board, title)?;
    let r = run(options, cancel).await;
    drop(dash);
    later.say();
    r
}

/// Holds a run's warnings and notes while the dashboard has the terminal; says them after.
#[derive(Debug, Default)]
struct Later(std::sync::Mutex<Vec<String>>);

impl Later {
    fn say(&self) {
        for m in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            say_err!("{m}");
        }
    }
}

impl crate::run::Watch for Later {
    fn warn(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("warning: {message}"));
    }

    fn note(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("note: {message}"));
    }

    fn line(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.to_owned());
    }
}

async fn demo_live(
    cfg: crate::sim::SimConfig,
    load: f64,
    duration: f64,
    out: PathBuf,
) -> anyhow::Result<ExitCode> {
    if !(load.is_finite() && (0.1..=3.0).contains(&load)) {
        bail!("--load {load}: give a share of capacity from 0.1 to 3 (0.5 is half)");
    }
    if !(duration.is_finite() && duration > 0.0 && duration <= 3600.0) {
        bail!("--duration {duration}: give seconds, more than 0 and at most 3600");
    }
    let spec = crate::demo::DemoSpec::default();
    let (capacity, e2e_alone) = crate::demo::capacity(&cfg, &spec).map_err(anyhow::Error::msg)?;
    let text = crate::demo::live_contract(&cfg, &spec, capacity, load, duration)
        .map_err(anyhow::Error::msg)?;
    let path = PathBuf::from("<goodput demo --live>");
    let (c, inputs) = crate::workload::parse(&text, &path)?;
    let control = crate::driver::live::Control::new(capacity, e2e_alone, true, load);
    let board = crate::live::Board::new(Arc::new(c.clone()), Some(control));
    let options = crate::run::RunOptions {
        out_root: out,
        watch: Arc::new(crate::run::Silent),
        argv: std::env::args().collect(),
        overrides: Vec::new(),
        bundle_dir: None,
        wake_latency_hold: false,
        signal: CAUGHT.clone(),
        live: None,
    };
    let cancel = cancel_on_signals("the records in flight");
    let title = format!("goodput demo --live · capacity {capacity:.1} req/s");
    let r = watched(board, title, options, cancel, |o, k| {
        crate::run::run(c, inputs, o, k)
    })
    .await?;
    say(&crate::report::document_at(&r.summary, false).terminal())?;
    say(&format!("\nBundle: {}\n", r.bundle.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

async fn demo_command(a: DemoArgs) -> anyhow::Result<ExitCode> {
    let DemoArgs {
        config,
        set,
        format,
        live,
        load,
        duration,
        out,
    } = a;
    let cfg = sim_config(config.as_deref(), &set)?;
    if live {
        return demo_live(cfg, load, duration, out).await;
    }
    let demo =
        crate::demo::run(&cfg, crate::demo::DemoSpec::default()).map_err(anyhow::Error::msg)?;
    match format.get() {
        Format::Html => say(&crate::demo::html_page(&demo))?,
        format => emit(format, "goodput demo", &demo.document(), &demo)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn audit_command(a: AuditArgs) -> anyhow::Result<ExitCode> {
    let AuditArgs { path, format } = a;
    let a = crate::audit::audit(&path)?;
    emit(format.get(), "goodput audit", &a.document(), &a)?;
    Ok(ExitCode::SUCCESS)
}

async fn sim_command(a: SimArgs) -> anyhow::Result<ExitCode> {
    let SimArgs {
        config,
        set,
        host,
        port,
        ground_truth,
    } = a;
    let cfg = sim_config(config.as_deref(), &set)?;
    let mut server = SimServer::start(cfg, (host, port).into(), ground_truth).await?;
    say(&format!(
        "goodput sim listening on {} (model {})\n",
        server.base_url(),
        server.config().model
    ))?;
    // Any of the stop signals ends it cleanly (a container runtime sends SIGTERM).
    let mut streams = stop_signal_streams();
    if streams.is_empty() {
        bail!("cannot handle SIGINT, SIGTERM or SIGHUP: nothing could stop the simulator cleanly");
    }
    futures_util::future::select_all(streams.iter_mut().map(|(_, s)| Box::pin(s.recv()))).await;
    server.stop();
    Ok(ExitCode::SUCCESS)
}

/// Builds a simulator configuration from a file and `KEY=VALUE` overrides; errors name the key
/// (and the file and line when it came from the file).
pub fn sim_config(file: Option<&Path>, sets: &[String]) -> anyhow::Result<SimConfig> {
    let (src, name) = match file {
        Some(p) => (read_contract(p)?, p.display().to_string()),
        None => (String::new(), "--set".to_owned()),
    };
    let mut table: toml::Table = toml::from_str(&src).map_err(|e| {
        let line = e
            .span()
            .map(|s| source::line_of_offset(&src, s.start))
            .unwrap_or(0);
        anyhow::anyhow!("{name}:{line}: {}", e.message().trim())
    })?;
    for s in sets {
        let Some((key, value)) = s.split_once('=') else {
            bail!("--set {s}: expected KEY=VALUE");
        };
        let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        let mut t = &mut table;
        let parts: Vec<&str> = key.trim().split('.').collect();
        for p in &parts[..parts.len() - 1] {
            t = t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .with_context(|| format!("--set {key}: `{p}` is not a table"))?;
        }
        t.insert(parts[parts.len() - 1].to_owned(), value);
    }
    let cfg: SimConfig = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{name}: {}", e.message().trim()))?;
    if let Err(e) = cfg.validate() {
        let line = file
            .and_then(|_| source::line_of_key(&src, &e.key))
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        bail!("{name}{line}: {e}");
    }
    Ok(cfg)
}
