//! `goodput run`: one run of a contract, wired from its stages. Each stage is a file and hands
//! the next a typed value:
//!
//! 1. `reach` — the target reached: the embedded simulator started or a `[cold_start]` server
//!    launched, the HTTP pools built with the contract's credentials, the server ready
//!    (`reach::Reached`).
//! 2. `probe` — before the load: preflight (models, version, the first request), the target's
//!    facts, scrapers and `/tokenize` counts, a shard's schedule origin, and `environment.json`
//!    written (`probe::ProbedTarget`).
//! 3. `load` — the plan driven against the target, records written as they finish, fail-fast
//!    and live decisions watched (`load::Loaded`).
//! 4. `finish` — after the load: the server left as found (in-flight work drained, idle
//!    checked), outputs recounted, how the run ended said.
//!
//! Beside them: `files` (the bundle opened and `command.json` written at the start and the
//! end), `traces` (OTLP spans received and joined), `size` (`init` sized to the server),
//! `repeats` (a repeat set and its variance) and `watch` (what a run tells its caller while
//! it runs). [`run`] below is the pipeline itself.

use crate::analyze::Summary;
use crate::bundle::{Bundle, COMMAND, ENVIRONMENT};
use crate::contract::Contract;
use crate::env::wake::WakeLatency;
use crate::record::Record;
use crate::workload::Inputs;
use anyhow::bail;
use files::CommandRecord;
use files::cache_nonce;
use files::prepare_bundle;
use finish::count_outputs;
use finish::how_it_ended;
use finish::left_as_found;
use finish::what_the_load_did;
use load::Loaded;
use load::load;
use probe::inputs_present;
use probe::preflight_all;
use probe::probed;
use probe::scraped;
use reach::not_past;
use reach::reach;
use reach::stop_launched;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

mod files;
mod finish;
mod load;
mod probe;
mod reach;
mod repeats;
pub mod size;
mod traces;
mod watch;

pub use repeats::{RepeatSummary, repeat_document, repeat_summary, run_repeats};
pub use watch::{Progress, Silent, Watch};

/// How to run, beyond the contract.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Bundles go to `<out_root>/<contract name>/…`.
    pub out_root: PathBuf,
    /// Told the run's progress and warnings.
    pub watch: Arc<dyn Watch>,
    /// The command line, for `command.json`.
    pub argv: Vec<String>,
    /// The contract changes made on the command line (`--set`, `--rate`, …), as given, for
    /// `command.json`; the resolved contract holds their result.
    pub overrides: Vec<String>,
    /// Write the bundle exactly here (a repeat's `run-NN`), instead of under `out_root`.
    pub bundle_dir: Option<PathBuf>,
    /// Keep the machine's idle CPUs quick to wake while the run lasts ([`WakeLatency`]).
    pub wake_latency_hold: bool,
    /// The name of the signal that cancelled the run (`SIGINT`, `SIGTERM`, `SIGHUP`), set by
    /// whoever cancels the token, for the bundle and the summary.
    pub signal: Arc<std::sync::OnceLock<&'static str>>,
    /// Fed every finished record for a live dashboard (`--live`); with a control, the load is
    /// the control's (`demo --live`).
    pub live: Option<Arc<crate::live::Board>>,
    /// The base URL of an embedded simulator already running for this contract (`goodput ab`
    /// keeps one per side across its blocks); `None`: the run starts its own.
    pub simulator: Option<String>,
}

/// Awaits `fut` unless the run is cancelled first: every wait before the load (readiness,
/// preflight, probes) gives way to a signal.
async fn unless_cancelled<T>(
    cancel: &CancellationToken,
    signal: &std::sync::OnceLock<&'static str>,
    what: &str,
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => bail!(
            "interrupted{} while {what}: nothing was measured",
            signal.get().map(|s| format!(" by {s}")).unwrap_or_default()
        ),
        r = fut => r,
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    pub bundle: Bundle,
    pub summary: Summary,
    pub records: Vec<Record>,
    /// Why the run stopped early, if it did on its own.
    pub aborted: Option<String>,
}

/// Runs a contract. `cancel` interrupts it (Ctrl-C); what was measured is kept either way.
pub async fn run(
    mut contract: Contract,
    inputs: Inputs,
    opts: RunOptions,
    cancel: CancellationToken,
) -> anyhow::Result<RunResult> {
    inputs_present(&inputs)?;
    // Held until the run returns: the schedule and every timestamp depend on prompt wake-ups.
    let wake = match opts.wake_latency_hold {
        true => WakeLatency::hold(),
        false => WakeLatency::declined(),
    };
    // The run's clock starts here: with a cold-start test, at the launch.
    let started = Instant::now();
    crate::coldstart::substitute_port(&mut contract);
    let start_at = contract.load.start_at();
    contract.workload.cache_nonce = Some(cache_nonce(&contract));
    if let Some(at) = start_at {
        not_past(at, "")?;
    }
    let receiver = traces::listen(&contract, started).await?;
    let mut reached = reach(&contract, &opts, (started, receiver.as_ref()), &cancel).await?;
    let (models, version) = preflight_all(
        &reached.http,
        &reached.base,
        reached.api_key.as_deref(),
        &mut contract,
        (&cancel, &opts),
    )
    .await?;
    raise_open_file_limit();

    let (bundle, prediction) = prepare_bundle(reached.bundle.take(), &opts, &mut contract)?;
    traces::attach(receiver.as_ref(), &bundle)?;
    let command = CommandRecord::started(&opts, prediction.as_ref().map(|(_, h)| h), &bundle)?;
    let target = Target {
        http: reached.http,
        load_http: reached.load_http,
        credentials: reached.credentials,
        direct: reached.direct,
        base: reached.base,
        api_key: reached.api_key,
        model: contract.target.model.clone().unwrap_or_default(),
    };
    let before = probed(
        &target,
        &contract,
        (inputs, models, version),
        (&bundle, started, start_at, &wake),
        (&cancel, &opts),
    )
    .await?;
    let (inputs, mut environment) = (before.inputs, before.environment);

    let contract = Arc::new(contract);
    let load_started = Instant::now();
    let Loaded {
        mut records,
        outcome,
        aborted,
        decided,
        guard,
    } = load(
        target.clone(),
        &contract,
        &inputs,
        before.scrapers,
        Where {
            bundle: &bundle,
            opts: &opts,
            cancel: &cancel,
        },
        (started, before.start_us),
    )
    .await?;
    let load_end = left_as_found(&target, &records, guard, &outcome, (started, &opts)).await;
    // The connections the load opened (before the recount opens any of its own).
    if let Some(http) = environment.client_http.as_mut() {
        http.connections = Some(reached.connects.summary(load_started));
    }
    let spans = traces::finish(
        receiver,
        &contract,
        &records,
        &mut environment,
        &bundle,
        (&opts, &cancel),
    )
    .await?;
    let segments = what_the_load_did(&outcome, &opts, &mut environment);
    bundle.write_json(ENVIRONMENT, &environment)?;
    // Before a launched server stops: its `/tokenize` may count the outputs.
    if let Some(r) =
        count_outputs(&target, &contract, &inputs, &mut records, &bundle, &cancel).await?
    {
        environment.output_count = Some(r);
        bundle.write_json(ENVIRONMENT, &environment)?;
    }
    stop_launched(reached.launched.take(), reached.timeline.as_mut(), &bundle).await?;
    let (interrupted, signal, stopped) =
        how_it_ended(&outcome, (&decided, &load_end, &aborted), &opts);
    let (scrapes, telemetry, pages) = scraped(&bundle, &environment, &opts);
    let context = crate::analyze::Context {
        telemetry: &telemetry,
        telemetry_pages: &pages,
        workload: Some(&inputs),
        interrupted,
        stopped: stopped.as_deref(),
        decided: decided.as_deref(),
        load_end: (!load_end.is_empty()).then_some(&load_end),
        lost: None,
        timeline: reached.timeline.as_ref(),
        facts: Some(&before.facts),
        scrapes: &scrapes,
        shards: &[],
        segments: &segments,
        spans: &spans,
        traces: environment.traces.as_ref(),
    };
    let summary = bundle.write_results(&contract, &context, &records, prediction)?;
    let ended = command.file(
        Some(jiff::Timestamp::now()),
        interrupted,
        &aborted,
        signal,
        (&decided, &load_end),
    );
    bundle.write_json(COMMAND, &ended)?;
    traces::export_client_spans(&contract, &records, started, opts.watch.as_ref()).await;
    drop(reached.sim);
    Ok(RunResult {
        bundle,
        summary,
        records,
        aborted,
    })
}

/// Where a stage of the run writes and answers to: its bundle, the run's options (the watch,
/// the live view) and its cancellation.
#[derive(Clone, Copy)]
struct Where<'a> {
    bundle: &'a Bundle,
    opts: &'a RunOptions,
    cancel: &'a CancellationToken,
}

/// Where the run's requests go: the HTTP pool, base URL, key and model, checked.
#[derive(Clone)]
struct Target {
    http: reqwest::Client,
    load_http: reqwest::Client,
    credentials: Vec<(String, String, bool)>,
    /// The load's pool (see `Reached`).
    direct: crate::client::direct::Direct,
    base: String,
    api_key: Option<String>,
    model: String,
}

/// Thousands of concurrent streams need thousands of sockets: raise the soft limit to the hard.
fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}
