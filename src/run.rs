//! `goodput run`: contract → (embedded simulator) → preflight → bundle → driver → records →
//! summary → report. This is the one place that wires the stages together.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::analyze::Summary;
use crate::bundle::{
    Bundle, COLD_START, COMMAND, CONTRACT, CommandFile, ENVIRONMENT, EnvironmentFile, METRICS,
    PREDICTION, REFERENCES, REQUESTS, TELEMETRY,
};
use crate::client::{Client, KeepOutput, http_pool};
use crate::coldstart::Launched;
use crate::contract::{ClientTokenCount, Contract};
use crate::driver::{COLD_START_INDEX, Driver};
use crate::env::facts::Facts;
use crate::env::prom::Scraper;
use crate::env::tokenize::{ServerCounter, check, recount};
use crate::env::wake::WakeLatency;
use crate::plan::{PRIME_INDEX, PROBE_INDEX, Phase, Plan};
use crate::record::writer::{Live, LiveView, Observer, Stability, write_records};
use crate::record::{Outcome, Record};
use crate::sim::SimServer;
use crate::workload::Inputs;

pub mod size;
mod traces;

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

/// Requests that reached the server after which a run with no success among them is stopped.
const FAIL_FAST_AFTER: u64 = 20;

/// The fail-fast rules, watched by the collector on every record as it is written (so a run
/// against a dead target stops within a request or two, not at the next progress tick):
/// the first [`FAIL_FAST_AFTER`] requests that reached the server all failed (client-side drops
/// are the overload being measured and do not count), or the last `max_connect_failures`
/// requests in a row could not connect (the target stopped answering). Either cancels the run
/// and says why.
struct FailFast {
    /// Finished requests that reached the server, and how many of those failed.
    reached: u64,
    reached_errors: u64,
    /// Requests in a row, up to the last one finished, that could not connect.
    connect_streak: u64,
    max_connect_failures: u64,
    cancel: CancellationToken,
    aborted: Arc<Mutex<Option<String>>>,
}

impl Observer for FailFast {
    fn observe(&mut self, rec: &Record) {
        match rec.outcome {
            Outcome::Connect => self.connect_streak += 1,
            // The overload being measured, or the run stopping (interrupted, or cut off by a
            // stop of its own): none says the server is down.
            Outcome::ClientDropped | Outcome::Interrupted | Outcome::Abandoned => return,
            o => {
                self.connect_streak = 0;
                self.reached += 1;
                self.reached_errors += u64::from(o != Outcome::Ok);
            }
        }
        if self.cancel.is_cancelled() {
            return;
        }
        let why = if self.reached >= FAIL_FAST_AFTER && self.reached_errors == self.reached {
            format!(
                "the first {} requests that reached the server all failed; stopped early",
                self.reached
            )
        } else if self.connect_streak >= self.max_connect_failures {
            format!(
                "the target stopped answering: {} requests in a row could not connect (last: {}); stopped early, the rest not sent",
                self.connect_streak,
                rec.error.as_deref().unwrap_or("no detail")
            )
        } else {
            return;
        };
        *self.aborted.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        self.cancel.cancel();
    }
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

/// What the run knows before its load: the target's facts, its scrapers started, the inputs
/// (recounted in the target's tokens where the contract asks), `environment.json` as written,
/// and a shard's schedule origin.
struct ProbedTarget {
    facts: Facts,
    scrapers: Vec<Scraper>,
    inputs: Inputs,
    environment: EnvironmentFile,
    start_us: Option<u64>,
}

/// The target probed before the load (`environment`), the client's wake-up latency and, for a
/// shard, its schedule origin (`shard_origin`), written to `environment.json`.
async fn probed(
    target: &Target,
    contract: &Contract,
    (inputs, models, version): (Inputs, serde_json::Value, serde_json::Value),
    (bundle, started, start_at, wake): (&Bundle, Instant, Option<jiff::Timestamp>, &WakeLatency),
    (cancel, opts): (&CancellationToken, &RunOptions),
) -> anyhow::Result<ProbedTarget> {
    let (facts, scrapers, inputs, mut environment) = unless_cancelled(
        cancel,
        &opts.signal,
        "probing the target",
        environment(
            target,
            contract,
            inputs,
            (models, version),
            bundle,
            started,
            opts.watch.as_ref(),
        ),
    )
    .await?;
    environment.client_wake_latency = Some(wake.status.clone());
    let start_us = shard_origin(
        contract,
        start_at,
        target,
        (cancel, opts),
        started,
        &mut environment,
    )
    .await?;
    bundle.write_json(ENVIRONMENT, &environment)?;
    Ok(ProbedTarget {
        facts,
        scrapers,
        inputs,
        environment,
        start_us,
    })
}

/// A shard's schedule origin on the run's clock (its common start instant, still ahead), with
/// the target's clock read and the shard's facts put in `environment`; `None` unsharded.
async fn shard_origin(
    contract: &Contract,
    start_at: Option<jiff::Timestamp>,
    target: &Target,
    (cancel, opts): (&CancellationToken, &RunOptions),
    started: Instant,
    environment: &mut EnvironmentFile,
) -> anyhow::Result<Option<u64>> {
    Ok(match (contract.load.shard(), start_at) {
        (Some(shard), Some(at)) => {
            let clock =
                unless_cancelled(cancel, &opts.signal, "reading the target's clock", async {
                    Ok(crate::env::clock::offset(
                        &target.http,
                        &target.base,
                        target.api_key.as_deref(),
                    )
                    .await)
                })
                .await?;
            let ahead = not_past(at, " while the target was probed")?;
            let origin_us = started.elapsed().as_micros() as u64 + ahead.as_micros() as u64;
            opts.watch.note(&format!(
                "shard {shard}: the schedule starts at {at} (in {:.1} s)",
                ahead.as_secs_f64()
            ));
            environment.shard = Some(crate::bundle::ShardEnvironment {
                shard: shard.to_string(),
                index: shard.index,
                count: shard.count,
                plan_fingerprint: contract.unsharded().fingerprints().short(),
                start_at: at.to_string(),
                origin_us: Some(origin_us),
                clock: serde_json::to_value(clock)?,
            });
            Some(origin_us)
        }
        _ => None,
    })
}

/// What the load itself was, into `environment`: the dispatch thread's priority and, for a
/// live demo, each segment of its load (returned for the summary).
fn what_the_load_did(
    outcome: &crate::driver::DriveOutcome,
    opts: &RunOptions,
    environment: &mut EnvironmentFile,
) -> Vec<crate::record::SegmentFacts> {
    if let (Some(p), Some(wake)) = (
        &outcome.dispatch_thread,
        environment.client_wake_latency.as_mut(),
    ) {
        wake.dispatch_thread = Some(match p {
            crate::driver::Priority::RealTime => json!({ "policy": "SCHED_FIFO", "priority": 1 }),
            crate::driver::Priority::Normal(why) => json!({ "policy": "normal", "why": why }),
        });
    }
    match opts.live.as_ref().and_then(|b| b.control()) {
        Some(k) => {
            let segments = k.segments();
            environment.live = Some(crate::bundle::Live {
                capacity_rps: k.capacity_rps,
                e2e_alone_s: k.e2e_alone_s,
                segments: segments.clone(),
            });
            segments
        }
        None => Vec::new(),
    }
}

/// Whether the run was interrupted, by which signal, and why it stopped before its plan's end
/// (a signal, or it gave up); and the user told how the load ended. A run that stopped
/// itself, its verdict decided or its server behind, was not interrupted (unless a signal came
/// as well).
fn how_it_ended(
    outcome: &crate::driver::DriveOutcome,
    (decided, load_end, aborted): (
        &Option<String>,
        &crate::driver::guard::LoadEnd,
        &Option<String>,
    ),
    opts: &RunOptions,
) -> (bool, Option<&'static str>, Option<String>) {
    let stopped_itself = decided.is_some() || load_end.guard.is_some();
    let interrupted = outcome.interrupted && (!stopped_itself || opts.signal.get().is_some());
    let signal = opts.signal.get().copied().filter(|_| interrupted);
    let stopped = aborted
        .clone()
        .or_else(|| signal.map(|s| format!("interrupted by {s}")));
    say_how_the_load_ended(opts, decided.as_deref(), load_end, outcome.built_late);
    (interrupted, signal, stopped)
}

/// What the user should hear of how the load ended: stopped once decided or by the progress
/// guard, requests cancelled and how the server was left, the drain cut, prompts built late.
fn say_how_the_load_ended(
    opts: &RunOptions,
    decided: Option<&str>,
    load_end: &crate::driver::guard::LoadEnd,
    built_late: u64,
) {
    if let Some(why) = decided {
        opts.watch.note(&format!(
            "stopped once the verdict was decided: {why}; the requests still in flight are counted as misses (measurement.stop_when_decided = false runs the plan to its end)"
        ));
    }
    if let Some(line) = crate::report::left_as_found(load_end) {
        opts.watch.note(&line);
    }
    if built_late > 0 {
        opts.watch.warn(&format!(
            "{built_late} requests were not built by their send time: building their prompts is slower than the arrivals; their dispatch lag counts it as a late wake-up"
        ));
    }
}

/// The bundle's scrapes read back: the target's, the telemetry's, and which telemetry pages
/// answered. A file that cannot be read (a disk error) leaves its figures out and the user is
/// told, never silently.
fn scraped(
    bundle: &Bundle,
    environment: &EnvironmentFile,
    opts: &RunOptions,
) -> (
    Vec<crate::env::prom::Scrape>,
    Vec<crate::env::prom::Scrape>,
    Vec<crate::analyze::efficiency::PageStatus>,
) {
    let read = |name: &str| {
        crate::env::prom::read_present(&bundle.path(name)).unwrap_or_else(|e| {
            opts.watch
                .warn(&format!("the server's figures are left out: {e}"));
            Vec::new()
        })
    };
    (
        read(METRICS),
        read(TELEMETRY),
        environment.telemetry_pages().to_vec(),
    )
}

/// Every file the contract names (with its SHA-256) is there.
fn inputs_present(inputs: &Inputs) -> anyhow::Result<()> {
    if let Some(f) = inputs.missing.first() {
        bail!(
            "{f} is named by the contract (with its SHA-256) but is not there: put it back to run this contract"
        );
    }
    Ok(())
}

/// Every run its own cache nonce (kept in the bundle's contract): prompts of an earlier run
/// share nothing with this one's beyond the run lead, so `cold` is cold across runs too. The
/// shards of one run share theirs (one plan): it is drawn from their start instant.
fn cache_nonce(contract: &Contract) -> String {
    match &contract.load.start_at {
        Some(at) => crate::text::sha256_prefix(at.as_bytes(), 8),
        None => fresh_nonce(),
    }
}

/// Stops a launched server (its exit kept in the cold-start timeline) and writes the timeline.
async fn stop_launched(
    launched: Option<Launched>,
    timeline: Option<&mut crate::analyze::Timeline>,
    bundle: &Bundle,
) -> anyhow::Result<()> {
    if let Some(t) = timeline {
        if let Some(l) = launched {
            t.exit = Some(l.stop().await);
        }
        bundle.write_json(COLD_START, t)?;
    }
    Ok(())
}

/// `command.json`: how the run was started and, rewritten when it ends, how it ended.
struct CommandRecord<'a> {
    opts: &'a RunOptions,
    started_utc: jiff::Timestamp,
    prediction_sha256: Option<String>,
}

impl<'a> CommandRecord<'a> {
    /// The record of a run starting now, written.
    fn started(
        opts: &'a RunOptions,
        prediction_sha256: Option<&String>,
        bundle: &Bundle,
    ) -> anyhow::Result<CommandRecord<'a>> {
        let command = CommandRecord {
            opts,
            started_utc: jiff::Timestamp::now(),
            prediction_sha256: prediction_sha256.cloned(),
        };
        bundle.write_json(
            COMMAND,
            &command.file(None, false, &None, None, (&None, &Default::default())),
        )?;
        Ok(command)
    }

    fn file(
        &self,
        end: Option<jiff::Timestamp>,
        interrupted: bool,
        aborted: &Option<String>,
        signal: Option<&str>,
        (decided, load_end): (&Option<String>, &crate::driver::guard::LoadEnd),
    ) -> CommandFile {
        CommandFile {
            argv: self.opts.argv.clone(),
            overrides: self.opts.overrides.clone(),
            cwd: std::env::current_dir().ok(),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            started_utc: Some(self.started_utc),
            ended_utc: end,
            interrupted,
            signal: signal.map(str::to_owned),
            aborted: aborted.clone(),
            decided: decided.clone(),
            load_end: (!load_end.is_empty()).then(|| load_end.clone()),
            prediction_sha256: self.prediction_sha256.clone(),
            records: crate::record::Kept::THIS_BUILD,
            ..CommandFile::default()
        }
    }
}

/// Preflight: is the target there, and which model does it serve? Then every other replica
/// must be there and serve the same, before any load. The target's `/v1/models` and
/// `/version` answers.
async fn preflight_all(
    http: &reqwest::Client,
    base: &str,
    api_key: Option<&str>,
    contract: &mut Contract,
    (cancel, opts): (&CancellationToken, &RunOptions),
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    let answers = unless_cancelled(
        cancel,
        &opts.signal,
        "asking the target what it serves",
        preflight(http, base, api_key, contract),
    )
    .await?;
    for (i, other) in contract.target.urls.iter().enumerate().skip(1) {
        let mut c = contract.clone();
        unless_cancelled(
            cancel,
            &opts.signal,
            "asking the replicas what they serve",
            preflight(http, other, api_key, &mut c),
        )
        .await
        .with_context(|| format!("target.urls[{i}]"))?;
    }
    Ok(answers)
}

/// Whether the target is there and serves the contract's model (the first it lists when
/// none is set, written into the contract): the wrong model is caught before any load. Returns
/// the verbatim `/v1/models` and `/version` answers.
async fn preflight(
    http: &reqwest::Client,
    base: &str,
    api_key: Option<&str>,
    contract: &mut Contract,
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    let models = crate::env::probe(http, base, "/v1/models", api_key).await;
    let version = crate::env::probe(http, base, "/version", api_key).await;
    if models.get("status").is_none() {
        let why = models["absent"].as_str().unwrap_or("no answer");
        let hint = crate::client::tls_hint(why).map_or(String::new(), |h| format!(" — {h}"));
        bail!("cannot reach the target at {base}: {why}{hint}");
    }
    if contract.target.model.is_none() {
        // An answer that is not a list is not an empty list: what the server refused is named.
        if let Some(status) = models["status"]
            .as_u64()
            .filter(|s| !(200..300).contains(s))
        {
            let why = match status {
                431 => {
                    " (request headers too large: the headers of [target.request] are larger than the server accepts)"
                }
                401 | 403 => {
                    " (not authorised: check target.api_key_env and the headers of [target.request])"
                }
                _ => "",
            };
            bail!(
                "target.model is not set, and GET {base}/v1/models answered HTTP {status}{why} instead of listing the models; fix that, or set target.model"
            );
        }
        let m = crate::env::first_model(&models).with_context(|| {
            format!("target.model is not set and {base}/v1/models lists no model ({}); set target.model", models["absent"].as_str().unwrap_or("empty list"))
        })?;
        contract.target.model = Some(m);
    }
    let model = contract.target.model.as_deref().unwrap_or_default();
    // The wrong model is caught before any load: a server that lists what it serves and does
    // not list this one would fail every request (or, like llama.cpp, answer with another).
    // So is a traffic class's own model or adapter name.
    let served = crate::env::served_models(&models);
    let listed = || {
        served
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !served.is_empty() && !served.iter().any(|s| crate::text::same_model(model, s)) {
        bail!(
            "target.model = \"{model}\" is not served by {base}: its /v1/models lists {}. Set target.model to one of these (or leave it out to take the first).",
            listed()
        );
    }
    for (k, class) in contract.classes.iter().enumerate() {
        let names = class
            .model
            .iter()
            .map(|m| (crate::contract::classes::key(k, "model"), m))
            .chain(class.models.iter().flat_map(|mix| {
                mix.names
                    .iter()
                    .map(move |m| (crate::contract::classes::key(k, "models.names"), m))
            }));
        for (key, m) in names {
            if !served.is_empty() && !served.iter().any(|s| crate::text::same_model(m, s)) {
                bail!(
                    "{key} = \"{m}\" (class \"{}\") is not served by {base}: its /v1/models lists {}. A LoRA adapter is listed once the server has loaded it.",
                    class.name,
                    listed()
                );
            }
        }
    }
    Ok((models, version))
}

/// The run's bundle (created now unless a launched server's log already needed it), with the
/// reference set copied in, the contract as it will run, and the prediction written (and its
/// hash returned) before the first request.
fn prepare_bundle(
    bundle: Option<Bundle>,
    opts: &RunOptions,
    contract: &mut Contract,
) -> anyhow::Result<(
    Bundle,
    Option<(crate::contract::prediction::Prediction, String)>,
)> {
    let bundle = match bundle {
        Some(b) => b,
        None => new_bundle(opts, contract)?,
    };
    // A reference set travels with the bundle, so the bundle alone recomputes its scores.
    if let Some(src) = contract.quality.references.clone() {
        std::fs::copy(&src, bundle.path(REFERENCES))
            .with_context(|| format!("copying {} into the bundle", src.display()))?;
        contract.quality.references = Some(REFERENCES.into());
    }
    bundle.write(CONTRACT, &contract.to_toml())?;
    // A prediction is written, and its hash recorded, before the first request is sent.
    let prediction = match &contract.prediction {
        Some(spec) => {
            let expect = spec
                .expect
                .iter()
                .map(|e| crate::contract::prediction::parse(e))
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            let p = crate::contract::prediction::Prediction {
                made_utc: jiff::Timestamp::now().to_string(),
                expect,
            };
            let bytes = serde_json::to_vec_pretty(&p)?;
            let path = bundle.path(PREDICTION);
            std::fs::write(&path, &bytes).map_err(crate::text::io_at(&path))?;
            Some((p, crate::contract::prediction::hash(&bytes)))
        }
        None => None,
    };
    Ok((bundle, prediction))
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

/// What the run knows of its target before the load, kept in `environment.json`: every
/// engine's metadata endpoint verbatim and the facts they state (resolved against the
/// declared ones), the client host and network path; with `tokenizer = "server"` the inputs
/// recounted in the target's tokens; and the `/metrics` scraper, started. Returns the facts,
/// the scraper, the inputs and the `environment.json` document.
async fn environment(
    t: &Target,
    contract: &Contract,
    mut inputs: Inputs,
    answers: (serde_json::Value, serde_json::Value),
    bundle: &Bundle,
    started: Instant,
    watch: &dyn Watch,
) -> anyhow::Result<(Facts, Vec<Scraper>, Inputs, EnvironmentFile)> {
    // Every engine's documented metadata endpoint, kept verbatim (absent ones say why), and
    // the facts they state, resolved against the declared ones.
    let probes = crate::env::probe_engines(
        &t.http,
        &t.base,
        t.api_key.as_deref(),
        &t.model,
        vec![answers.0, answers.1],
    )
    .await;
    let network = crate::env::network_path(&t.base).await;
    let client_host = crate::env::host();
    let mut probes = probes;
    probes.extend(crate::env::probe_metrics_info(&t.http, &t.base, t.api_key.as_deref()).await);
    probes.extend(crate::env::this_host(&client_host, &network));
    probes.extend(crate::env::hash_model_file(&probes, &network).await);
    let facts = Facts::resolve(&contract.target.declared, &probes);
    let mut environment = EnvironmentFile {
        probed: crate::env::document(contract, &t.base, client_host, probes, &facts, network),
        ..EnvironmentFile::default()
    };
    // `tokenizer = "server"`: lengths in the target's own tokens, measured before the load.
    if contract.workload.server_tokenizer() {
        let (recounted, kept) = server_lengths(t, contract, &inputs, watch).await?;
        inputs = recounted;
        environment.tokenizer = Some(kept);
    }
    // The server's own metrics, scraped before, during and after the load.
    let every = contract.measurement.server_metrics_interval.0;
    let scraper = if every > 0.0 {
        Scraper::start(
            t.http.clone(),
            &t.base,
            t.api_key.clone(),
            Duration::from_secs_f64(every),
            started,
            &bundle.path(METRICS),
        )
        .await
    } else {
        Err(crate::env::Unavailable::Off(
            "off (measurement.server_metrics_interval = 0)".to_owned(),
        ))
    };
    environment.client_http = Some(crate::client::http_pool_settings(
        Duration::from_secs_f64(contract.target.keep_alive.seconds()),
        &contract.target.tls,
    ));
    environment.server_metrics = Some(crate::bundle::ServerMetrics {
        endpoint: "/metrics".to_owned(),
        file: scraper.as_ref().ok().map(|_| METRICS.to_owned()),
        absent: scraper.as_ref().err().map(ToString::to_string),
    });
    let mut scrapers: Vec<Scraper> = scraper.into_iter().collect();
    if let Some((telemetry, status)) = telemetry(t, contract, bundle, started, watch).await {
        scrapers.extend(telemetry);
        environment.telemetry = Some(status);
    }
    Ok((facts, scrapers, inputs, environment))
}

/// `tokenizer = "server"`: the inputs recounted in the target's own tokens, and the check of
/// the first planned prompts against its count (for `environment.json`).
async fn server_lengths(
    t: &Target,
    contract: &Contract,
    inputs: &Inputs,
    watch: &dyn Watch,
) -> anyhow::Result<(Inputs, serde_json::Value)> {
    let counter = ServerCounter::detect(t.http.clone(), &t.base, &t.model, t.api_key.as_deref())
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "workload.tokenizer = \"server\", but the target cannot count tokens: {e}"
            )
        })?;
    let inputs = recount(&counter, contract, inputs)
        .await
        .map_err(anyhow::Error::msg)?;
    let plan = Plan::new(contract, &inputs);
    let first = (0..plan.len().unwrap_or(u64::MAX)).map(|i| {
        let r = plan.request(i);
        (i, r.prompt, r.input_tokens)
    });
    let kept = check(&counter, &inputs.tokenizer, first)
        .await
        .map_err(anyhow::Error::msg)?;
    if kept["mismatches"].as_array().is_some_and(|m| !m.is_empty()) {
        watch.warn(&format!(
            "{} of {} planned prompts do not count as planned at {} (see environment.json `tokenizer`)",
            kept["mismatches"].as_array().map_or(0, Vec::len),
            kept["checked"],
            counter.url()
        ));
    }
    Ok((inputs, kept))
}

/// The accelerators' telemetry pages (`[target.telemetry]`), scraped before, during and after
/// the load into `telemetry.jsonl`. A page that does not answer is warned about before the load
/// and the run goes on without it; so is one that publishes none of the accelerator metrics
/// goodput reads. Returns the scraper and what `environment.json` keeps of each page; `None`
/// when the contract names no page.
async fn telemetry(
    t: &Target,
    contract: &Contract,
    bundle: &Bundle,
    started: Instant,
    watch: &dyn Watch,
) -> Option<(Option<Scraper>, crate::bundle::Telemetry)> {
    let tel = &contract.target.telemetry;
    if tel.urls.is_empty() {
        return None;
    }
    let urls = tel.resolved(&t.base);
    for u in &urls {
        crate::secrets::register_url(u);
    }
    let endpoints = urls
        .iter()
        .map(|url| crate::env::prom::Endpoint {
            url: url.clone(),
            key: None,
            tagged: true,
        })
        .collect();
    let (scraper, absent) = Scraper::start_all(
        t.http.clone(),
        endpoints,
        Duration::from_secs_f64(tel.every_s()),
        started,
        &bundle.path(TELEMETRY),
    )
    .await;
    for (url, why) in &absent {
        watch.warn(&format!(
            "telemetry page {url} cannot be read, so it measures no energy in this run (the load goes on without it): {why}"
        ));
    }
    let firsts = crate::env::prom::read_present(&bundle.path(TELEMETRY)).unwrap_or_else(|e| {
        watch.warn(&format!("the telemetry scrapes cannot be read back: {e}"));
        Vec::new()
    });
    for s in firsts
        .iter()
        .filter(|s| !crate::analyze::efficiency::reads_any(&s.series))
    {
        let names = crate::analyze::efficiency::unread_names(&s.series);
        let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
        watch.warn(&format!(
            "telemetry page {} publishes none of the accelerator metrics goodput reads (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_POWER_USAGE; AMD's gpu_energy_consumed, gpu_power_usage): its series are kept in {TELEMETRY} but measure nothing. It publishes {}{}",
            s.source.as_deref().unwrap_or("?"),
            shown.join(", "),
            if names.len() > shown.len() { format!(" and {} more", names.len() - shown.len()) } else { String::new() }
        ));
    }
    let endpoints = urls
        .iter()
        .map(|u| crate::analyze::efficiency::PageStatus {
            url: crate::analyze::without_userinfo(u),
            absent: absent.iter().find(|a| &a.0 == u).map(|a| a.1.to_string()),
        })
        .collect();
    let status = crate::bundle::Telemetry {
        file: scraper.as_ref().map(|_| TELEMETRY.to_owned()),
        interval_s: tel.every_s(),
        endpoints,
    };
    Some((scraper, status))
}

/// After the load, the outputs whose count the server did not confirm are counted in the
/// model's tokens (`record::recount`): by the workload's tokenizer file, else the target's
/// `/tokenize`; `requests.jsonl` is rewritten with the counts. Nothing to do when no record
/// kept its text. An interrupted run counts only with a file (no more requests go out).
async fn count_outputs(
    t: &Target,
    contract: &Contract,
    inputs: &Inputs,
    records: &mut [Record],
    bundle: &Bundle,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<crate::record::recount::Recounted>> {
    use crate::record::recount::{Counter, recount};
    if !records.iter().any(|r| r.received.is_some()) {
        return Ok(None);
    }
    let server;
    let counter = if matches!(inputs.tokenizer, crate::workload::Tokenizer::File { .. }) {
        Counter::File(&inputs.tokenizer)
    } else if cancel.is_cancelled() {
        Counter::None("the run was interrupted".to_owned())
    } else {
        match ServerCounter::detect(t.http.clone(), &t.base, &t.model, t.api_key.as_deref()).await {
            Ok(s) => {
                server = s;
                Counter::Server(&server)
            }
            Err(e) => Counter::None(format!("no workload.tokenizer file, and {e}")),
        }
    };
    let counting = contract
        .measurement
        .client_token_count
        .unwrap_or(ClientTokenCount::Chunks);
    let done = recount(records, &counter, counting).await;
    bundle
        .rewrite_records(records)
        .context("rewriting requests.jsonl with the recounted outputs")?;
    Ok(Some(done))
}

/// What the load did: every record, how the driving went, and why it stopped early when it
/// did (it gave up, its verdict was decided, the progress guard stopped it).
struct Loaded {
    records: Vec<Record>,
    outcome: crate::driver::DriveOutcome,
    aborted: Option<String>,
    decided: Option<String>,
    guard: Option<crate::driver::guard::GuardStop>,
}

/// The stops a load makes of its own accord, each set once: its verdict decided, the progress
/// guard's evidence, and why the requests such a stop cut off are misses (`abandoned`), set
/// by whichever came first.
#[derive(Default, Clone)]
struct SelfStops {
    decided: Arc<std::sync::OnceLock<String>>,
    guarded: Arc<std::sync::OnceLock<crate::driver::guard::GuardStop>>,
    abandon: Arc<std::sync::OnceLock<String>>,
}

/// The load: the client and driver built, the collector writing `requests.jsonl` (and telling
/// the progress view and the until-stable rule), then cold-start requests, priming, the
/// driven load (watched by the progress guard) and the quality probes, in that order.
async fn load(
    t: Target,
    contract: &Arc<Contract>,
    inputs: &Inputs,
    scrapers: Vec<Scraper>,
    Where {
        bundle,
        opts,
        cancel,
    }: Where<'_>,
    (started, start_us): (Instant, Option<u64>),
) -> anyhow::Result<Loaded> {
    // Giving up ends this run only: a sweep's next point, or the next repeat, still runs
    // (a signal, on the caller's token, still ends them all).
    let cancel = &cancel.child_token();
    // A decided run stops its load only: the quality probes after it still run.
    let load_cancel = cancel.child_token();
    let stops = SelfStops::default();
    let plan = Arc::new(Plan::new(contract, inputs));
    // The progress guard watches every load but a live demo's (whose load the keys change).
    let guard = crate::driver::guard::Guard::of(contract)
        .filter(|_| opts.live.as_ref().and_then(|b| b.control()).is_none());
    let book = guard
        .as_ref()
        .map(|_| Arc::new(crate::client::flights::Flights::default()));
    let driver = load_driver(
        t,
        contract,
        &plan,
        (bundle, opts, &scrapers),
        book.clone(),
        (started, start_us),
    );

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let live: LiveView = Arc::new(Mutex::new(Live::default()));
    let aborted = Arc::new(Mutex::new(None::<String>));
    let stable = driver.stable.clone();
    let observers = record_observers(contract, opts, &driver, &live, cancel, &aborted, stable);
    let (writer, failed_at) = collector(bundle, rx, observers, &stops, (cancel, &aborted));
    let done = CancellationToken::new();
    let monitor = tokio::spawn(monitor(
        live.clone(),
        plan.len(),
        opts.watch.clone(),
        done.clone(),
    ));
    if let Some(cs) = &contract.cold_start {
        let n = u64::from(cs.requests);
        driver
            .sequential(COLD_START_INDEX, n, Phase::ColdStart, &tx, cancel)
            .await;
    }
    // A warm prefix cache: each shared prefix sent once, one at a time, before the load, and
    // kept as warm-up records.
    driver
        .sequential(PRIME_INDEX, plan.priming(), Phase::Warmup, &tx, cancel)
        .await;
    let probe_tx = tx.clone();
    let watched = guard.zip(book);
    let outcome = drive_watched(&driver, bundle, watched, &stops, (tx, &load_cancel, &done)).await;
    if let Some(b) = &opts.live {
        b.end();
    }
    // Quality probes: after the load, one at a time, the same prompts in every run; none to a
    // server the guard found behind (they would only wait in its queue, and it is shared).
    if stops.guarded.get().is_none() {
        driver
            .sequential(
                PROBE_INDEX,
                plan.probe_requests(),
                Phase::Quality,
                &probe_tx,
                cancel,
            )
            .await;
    }
    drop(probe_tx);
    for s in scrapers {
        s.finish()
            .await
            .context("writing metrics.jsonl or telemetry.jsonl")?;
    }
    if let Err(crate::record::writer::WriteFailed { error, lost }) =
        writer.await.context("record writer stopped")?
    {
        note_aborted(bundle, &error.to_string(), failed_at.get().copied(), &lost);
        let said = lost.said();
        return Err(match said.is_empty() {
            true => error.into(),
            false => anyhow::anyhow!("{error}; {said}"),
        });
    }
    // The records as written (secrets redacted), read back: the run kept none in memory.
    let (records, _) =
        crate::record::read_jsonl_noted(&bundle.path(REQUESTS)).map_err(anyhow::Error::msg)?;
    done.cancel();
    let _ = monitor.await;
    let aborted = aborted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .or(outcome.failed.clone());
    Ok(Loaded {
        records,
        outcome,
        aborted,
        decided: stops.decided.get().cloned(),
        guard: stops.guarded.get().cloned(),
    })
}

/// The load's driver: its client (noting first tokens when the run may stop once decided,
/// and telling `book` of every request when the progress guard watches), the plan, the
/// trace ids, and the marks of the steady window for the scrapers.
fn load_driver(
    t: Target,
    contract: &Arc<Contract>,
    plan: &Arc<Plan>,
    (bundle, opts, scrapers): (&Bundle, &RunOptions, &[Scraper]),
    book: Option<Arc<crate::client::flights::Flights>>,
    (started, start_us): (Instant, Option<u64>),
) -> Arc<Driver> {
    let first_tokens = crate::client::FirstTokens::default();
    let model = t.model.clone();
    let control = opts.live.as_ref().and_then(|b| b.control().cloned());
    let noted = decides(contract, control.is_some()).then(|| first_tokens.clone());
    let client = load_client(t, contract, started, noted);
    let client = match book {
        Some(b) => client.flights(b),
        None => client,
    };
    let run_id = traces::run_id(bundle);
    Arc::new(Driver {
        client: Arc::new(client),
        contract: contract.clone(),
        plan: plan.clone(),
        model,
        traces: contract
            .measurement
            .propagates_traces()
            .then(|| crate::otlp::TraceIds::new(&run_id)),
        run_id,
        stable: Arc::new(AtomicBool::new(false)),
        known: Arc::new(AtomicBool::new(false)),
        follow_ups: std::sync::OnceLock::new(),
        start_us,
        control,
        realtime: opts.wake_latency_hold,
        window: crate::driver::WindowMarks::new(scrapers.iter().map(Scraper::marker).collect()),
        pending: Mutex::new(Default::default()),
        first_tokens,
    })
}

/// Whether the run may stop once its verdict is decided: an open loop of single requests
/// (sessions are the guard's), not a load program (its overload in one stage, a burst, is what
/// it measures, and the stages after it still have their answers to give), not a live demo.
fn decides(contract: &Contract, live_control: bool) -> bool {
    contract.measurement.stop_when_decided
        && contract.load.is_open()
        && contract.load.stage.is_empty()
        && contract.workload.sessions.is_none()
        && !live_control
}

/// The collector: writes every record to `requests.jsonl` as it comes (the self-stops' cut-off
/// requests as `abandoned`) and tells the observers. A record that cannot be written stops
/// the run there and then, and says when (`command.json` `write_failed_utc`).
fn collector(
    bundle: &Bundle,
    rx: tokio::sync::mpsc::UnboundedReceiver<Record>,
    observers: Vec<Box<dyn Observer>>,
    stops: &SelfStops,
    (cancel, aborted): (&CancellationToken, &Arc<Mutex<Option<String>>>),
) -> (
    tokio::task::JoinHandle<Result<u64, crate::record::writer::WriteFailed>>,
    Arc<std::sync::OnceLock<jiff::Timestamp>>,
) {
    let failed_at = Arc::new(std::sync::OnceLock::<jiff::Timestamp>::new());
    let (path, abandon) = (bundle.path(REQUESTS), stops.abandon.clone());
    let (stop, why, at) = (cancel.clone(), aborted.clone(), failed_at.clone());
    let failed = move |msg: String| {
        let _ = at.set(jiff::Timestamp::now());
        why.lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(msg);
        stop.cancel();
    };
    let writer =
        tokio::task::spawn_blocking(move || write_records(&path, rx, observers, &abandon, &failed));
    (writer, failed_at)
}

/// The driven load, watched by the rule that stops a decided run and by the progress guard
/// (`watched`: its rules and the client's book of requests in flight); either stops the load
/// (`load_cancel`) and says why in `stops`.
async fn drive_watched(
    driver: &Arc<Driver>,
    bundle: &Bundle,
    watched: Option<(
        crate::driver::guard::Guard,
        Arc<crate::client::flights::Flights>,
    )>,
    stops: &SelfStops,
    (tx, load_cancel, done): (
        tokio::sync::mpsc::UnboundedSender<Record>,
        &CancellationToken,
        &CancellationToken,
    ),
) -> crate::driver::DriveOutcome {
    let decider = decides(&driver.contract, driver.control.is_some()).then(|| {
        tokio::spawn(decide(
            driver.clone(),
            bundle.path(REQUESTS),
            stops.clone(),
            load_cancel.clone(),
            done.clone(),
        ))
    });
    let over = CancellationToken::new();
    let watcher = watched.map(|(g, book)| {
        let client = driver.client.clone();
        let began = client.now_us();
        let (stops, stop) = (stops.clone(), load_cancel.clone());
        let fired = move |s: &crate::driver::guard::GuardStop| {
            let why = format!(
                "in flight when the progress guard stopped the load: {}",
                s.short()
            );
            if stops.abandon.set(why).is_ok() {
                let _ = stops.guarded.set(s.clone());
                stop.cancel();
            }
        };
        tokio::spawn(g.watch(book, move || client.now_us(), began, fired, over.clone()))
    });
    let outcome = driver.clone().drive(tx, load_cancel.clone()).await;
    if let Some(d) = decider {
        d.abort();
    }
    over.cancel();
    if let Some(w) = watcher {
        let _ = w.await;
    }
    outcome
}

/// The load's client: the target's load pools, its credentials per request, and what the
/// contract asks each request to keep; `first_tokens` when the run may stop once decided.
fn load_client(
    t: Target,
    contract: &Contract,
    started: Instant,
    first_tokens: Option<crate::client::FirstTokens>,
) -> Client {
    let q = &contract.quality;
    let keep = match (q.records_output(), q.keeps_text()) {
        (false, _) => KeepOutput::Nothing,
        (true, true) => KeepOutput::Text,
        (true, false) => KeepOutput::Digest,
    };
    let client = Client::new(
        t.load_http,
        &t.base,
        t.api_key,
        contract.target.api.adapter(),
        Duration::from_secs_f64(contract.target.timeout.seconds()),
        contract.workload.stream,
        started,
    )
    .counting(
        contract
            .measurement
            .client_token_count
            .unwrap_or(ClientTokenCount::Chunks),
    )
    .direct(t.direct)
    .credentials(&t.credentials)
    .keep_output(keep)
    .follow_redirects(contract.target.follow_redirects)
    .keep_answers(contract.workload.sessions.is_some() || contract.workload.task.is_some())
    .replicas(
        &contract.target.urls,
        contract.target.spread.unwrap_or_default(),
    )
    .recount(!counts_model_tokens(contract))
    .class_headers(
        &crate::workload::environment::request_secrets(contract)
            .map(|s| s.class_headers)
            .unwrap_or_default(),
    );
    match first_tokens {
        Some(f) => client.first_tokens(f),
        None => client,
    }
}

/// What watches each record as it is written: the live counts, the fail-fast rules (which
/// cancel the run and say why in `aborted`), the live dashboard, warm-up's stability.
fn record_observers(
    contract: &Contract,
    opts: &RunOptions,
    driver: &Driver,
    live: &LiveView,
    cancel: &CancellationToken,
    aborted: &Arc<Mutex<Option<String>>>,
    stable: Arc<AtomicBool>,
) -> Vec<Box<dyn Observer>> {
    let mut observers: Vec<Box<dyn Observer>> = vec![
        Box::new(live.clone()),
        Box::new(FailFast {
            reached: 0,
            reached_errors: 0,
            connect_streak: 0,
            max_connect_failures: u64::from(contract.target.max_connect_failures),
            cancel: cancel.clone(),
            aborted: aborted.clone(),
        }),
    ];
    if let Some(b) = &opts.live {
        b.attach(driver.client.clone());
        observers.push(Box::new(crate::live::Feed(b.clone())));
    }
    if let Some(u) = &contract.warmup.until_stable {
        observers.push(Box::new(Stability {
            window: u.window as usize,
            threshold: u.threshold,
            flag: stable,
            ttfts: Vec::new(),
        }));
    }
    if let Some(k) = crate::analyze::precision::Known::new(contract, driver.known.clone()) {
        observers.push(Box::new(k));
    }
    if let Some(j) = crate::analyze::edge::EdgeJudge::new(contract, driver.plan.edge()) {
        observers.push(Box::new(j));
    }
    observers
}

/// Why the run ended, kept in `command.json` where `report` looks for it (when the disk still
/// takes that much: this is the path of a run that could not write its records).
fn note_aborted(
    bundle: &Bundle,
    why: &str,
    write_failed: Option<jiff::Timestamp>,
    lost: &crate::record::writer::Lost,
) {
    let mut command: CommandFile = crate::bundle::read_json(&bundle.path(COMMAND))
        .ok()
        .flatten()
        .unwrap_or_default();
    command.aborted = Some(why.to_owned());
    // When the load had stopped and everything it started had ended, and when the first
    // record could not be written: the gap is how long the run went on after it.
    command.aborted_utc = Some(jiff::Timestamp::now());
    command.write_failed_utc = write_failed;
    // The records that did not reach requests.jsonl: where they went, or what was lost.
    if lost.records > 0 {
        command.lost_records = Some(lost.clone());
    }
    let _ = bundle.write_json(COMMAND, &command);
}

/// Stops an open-loop run once its verdict is decided (`analyze::decided`): from the moment
/// the last steady request is sent, every few seconds, the records written so far and the
/// requests in flight are judged; when the overload is certain the load stops (`cancel`) and
/// the requests it cut off are written `abandoned`. A check costs a read of `requests.jsonl`,
/// so the pause between checks is at least ten times the last check's own time.
async fn decide(
    driver: Arc<Driver>,
    path: std::path::PathBuf,
    stops: SelfStops,
    cancel: CancellationToken,
    done: CancellationToken,
) {
    let mut pause = Duration::from_secs(2);
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        if !driver.window.ended() {
            continue;
        }
        let began = Instant::now();
        let pending: Vec<(u64, Phase, u64, Option<u64>)> = {
            let first = driver
                .first_tokens
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            driver
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(i, (p, o))| (*i, *p, *o, first.get(i).copied()))
                .collect()
        };
        let now = driver.client.now_us();
        let Ok((records, _)) = crate::record::read_jsonl_noted(&path) else {
            continue;
        };
        let contract = driver.contract.clone();
        let verdict = tokio::task::spawn_blocking(move || {
            crate::analyze::decided(&contract, records, &pending, now)
        })
        .await
        .ok()
        .flatten();
        if let Some(why) = verdict {
            let cut = format!("in flight when the run stopped, its verdict decided ({why})");
            if stops.abandon.set(cut).is_ok() {
                let _ = stops.decided.set(why);
                cancel.cancel();
            }
            return;
        }
        pause = pause.max(began.elapsed() * 10);
    }
}

/// How the load left the server: after an early stop (the guard, a decided verdict, a signal,
/// a failure), the requests it cancelled in flight and how long the server took to be idle
/// again by its own metrics ([`until_idle`]); the progress guard's evidence; the drain's cut.
async fn left_as_found(
    t: &Target,
    records: &[Record],
    guard: Option<crate::driver::guard::GuardStop>,
    outcome: &crate::driver::DriveOutcome,
    (started, opts): (Instant, &RunOptions),
) -> crate::driver::guard::LoadEnd {
    let cancelled = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Interrupted | Outcome::Abandoned))
        .count() as u64;
    if let Some(g) = &guard {
        opts.watch.note(&format!(
            "the progress guard stopped the load {:.1} s in ({}): nothing more was sent (docs/guide/safety.md)",
            g.at_s,
            g.short()
        ));
    }
    let server_idle = match cancelled {
        0 => None,
        n => {
            opts.watch.note(&format!(
                "{n} requests in flight were cancelled (their connections closed): waiting for the server to be idle again"
            ));
            Some(until_idle(t, started).await)
        }
    };
    crate::driver::guard::LoadEnd {
        guard,
        cancelled_in_flight: cancelled,
        server_idle,
        drain_cut: outcome.drain_cut,
    }
}

/// How long the server took to read no request running or waiting on its own `/metrics`
/// (vLLM's, SGLang's, TGI's, llama.cpp's names; the simulator's are vLLM's), asked every
/// [`IDLE_EVERY`] for at most [`IDLE_WAIT`]; a server that publishes none of them cannot say.
async fn until_idle(t: &Target, started: Instant) -> crate::driver::guard::ServerIdle {
    use crate::driver::guard::ServerIdle;
    let url = format!("{}/metrics", t.base);
    let from = Instant::now();
    loop {
        let scrape =
            crate::env::prom::scrape_once(&t.http, &url, t.api_key.as_deref(), started).await;
        let busy = match scrape {
            Ok(s) => crate::analyze::server::busy(&s),
            Err(e) => {
                return ServerIdle::Unknown { why: e.to_string() };
            }
        };
        let Some((engine, running, waiting)) = busy else {
            return ServerIdle::Unknown {
                why: format!(
                    "{url} publishes no running or waiting requests goodput reads (vLLM's, SGLang's, TGI's or llama.cpp's)"
                ),
            };
        };
        let source = format!("{engine} running and waiting requests on {url}");
        let s = from.elapsed().as_secs_f64();
        if running <= 0.0 && waiting <= 0.0 {
            return ServerIdle::After { s, source };
        }
        if from.elapsed() >= IDLE_WAIT {
            return ServerIdle::NotWithin {
                s,
                running,
                waiting,
                source,
            };
        }
        tokio::time::sleep(IDLE_EVERY).await;
    }
}

/// The longest goodput waits for a server to be idle after it cancelled requests.
const IDLE_WAIT: Duration = Duration::from_secs(15);

/// How often it asks meanwhile. Not more often: llama.cpp cancels the requests of closed
/// connections between the requests it serves, and a `/metrics` every 250 ms slowed that to
/// four every six seconds (nearly 400 still queued after 30 s), where once a second it
/// cleared 430 in six (`tests/real_engine.rs`, 2026-12-06).
const IDLE_EVERY: Duration = Duration::from_secs(1);

/// Whether the client's own count is the model's tokens: words on the embedded simulator,
/// whose tokenizer is words.
fn counts_model_tokens(c: &Contract) -> bool {
    c.target.url.is_none() && c.measurement.client_token_count == Some(ClientTokenCount::Words)
}

/// The target, reached: the HTTP pool, the base URL, the API key; the embedded simulator
/// (alive as long as this is), a launched server and the cold-start timeline; and the bundle
/// when a launched server's log needed it first.
struct Reached {
    http: reqwest::Client,
    /// The load's pool for https targets: `http` without the credential headers.
    load_http: reqwest::Client,
    /// The credential headers the load's pools leave to each request (name, value, secret).
    credentials: Vec<(String, String, bool)>,
    /// The load's requests go through this pool, not `http` (but to a URL with credentials).
    direct: crate::client::direct::Direct,
    /// Each new connection `http` opened, timed.
    connects: crate::client::ConnectLog,
    base: String,
    api_key: Option<String>,
    sim: Option<SimServer>,
    launched: Option<Launched>,
    timeline: Option<crate::analyze::Timeline>,
    bundle: Option<Bundle>,
}

/// The headers every request of the pools carries, and the API key left for a bearer token:
/// an API that takes its key in a header of its own (Anthropic's `x-api-key`) gets it, with
/// its fixed headers, on every request of the pool, so the probes and scrapes authenticate as
/// the load does, and no `Authorization: Bearer` goes with them.
fn pool_credentials(
    contract: &Contract,
    secrets: &crate::workload::environment::RequestSecrets,
) -> (crate::workload::environment::Headers, Option<String>) {
    let mut headers = secrets.headers.clone();
    let mut api_key = secrets.api_key.clone();
    let adapter = contract.target.api.adapter();
    if let crate::api::Auth::Header(name) = adapter.auth() {
        headers.extend(
            adapter
                .headers()
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string(), false)),
        );
        if let Some(k) = api_key.take() {
            headers.push((name.to_owned(), k, true));
        }
    }
    (headers, api_key)
}

/// A cold start's readiness wait: the server's timeline from launch (or first contact) to
/// ready; a launched server is stopped when it never gets there.
async fn ready(
    http: &reqwest::Client,
    base: &str,
    cs: &crate::contract::ColdStart,
    launched: &mut Option<Launched>,
    (started, cancel, opts): (Instant, &CancellationToken, &RunOptions),
) -> anyhow::Result<crate::analyze::Timeline> {
    let ready = unless_cancelled(
        cancel,
        &opts.signal,
        "waiting for the server to be ready",
        async {
            crate::coldstart::wait_ready(http, base, cs, launched.as_mut(), started)
                .await
                .map_err(anyhow::Error::from)
        },
    )
    .await;
    if ready.is_err()
        && let Some(l) = launched.take()
    {
        l.stop().await;
    }
    ready.context("cold start")
}

/// Starts what the contract starts (the simulator, a launched server) and waits for the
/// target to be ready when it measures a cold start.
async fn reach(
    contract: &Contract,
    opts: &RunOptions,
    (started, receiver): (Instant, Option<&crate::otlp::receiver::Receiver>),
    cancel: &CancellationToken,
) -> anyhow::Result<Reached> {
    let cold = contract.cold_start.clone();
    let keep_alive = Duration::from_secs_f64(contract.target.keep_alive.seconds());
    // Read before anything starts: an unset variable stops the run before a server launches.
    let secrets = crate::workload::environment::request_secrets(contract)
        .map_err(|(key, msg)| anyhow::anyhow!("`{key}` {msg}"))?;
    let (headers, api_key) = pool_credentials(contract, &secrets);
    let connects = crate::client::ConnectLog::default();
    let http = http_pool(keep_alive, &headers, &contract.target.tls, &connects)?;
    // The load's pools leave the credentials to each request (`Client::credentials`), which
    // sends them to the target's origin only: a followed redirect elsewhere goes without.
    let (credentials, plain): (Vec<_>, Vec<_>) = headers
        .iter()
        .cloned()
        .partition(|(n, _, secret)| *secret || crate::secrets::is_credential_header(n));
    let load_http = if credentials.is_empty() {
        http.clone()
    } else {
        http_pool(keep_alive, &plain, &contract.target.tls, &connects)?
    };
    let direct = crate::client::direct_pool(keep_alive, &plain, &contract.target.tls, &connects);

    // A launched server writes its log into the bundle, so the bundle comes first then.
    let mut bundle = None;
    let mut launched = None;
    if let Some(cs) = cold.as_ref().filter(|cs| cs.launch.is_some()) {
        let b = new_bundle(opts, contract)?;
        b.write(CONTRACT, &contract.to_toml())?;
        launched = Some(Launched::spawn(cs, &b.dir)?);
        bundle = Some(b);
    }
    // The embedded simulator lives as long as this function.
    let sim = match (&contract.target.url, &contract.target.simulator) {
        (None, Some(_)) if opts.simulator.is_some() => None,
        // With a receiver, the simulator exports its spans to it as vLLM would (gRPC).
        (None, Some(cfg)) => Some(
            SimServer::start_traced(
                cfg.clone(),
                ([127, 0, 0, 1], 0).into(),
                None,
                receiver.map(|r| (format!("http://{}", r.addr()), Default::default())),
            )
            .await
            .context("starting the embedded simulator")?,
        ),
        _ => None,
    };
    let base = match (&sim, &contract.target.url) {
        (Some(s), _) => s.base_url(),
        (None, None) if let Some(b) = &opts.simulator => b.clone(),
        (None, Some(u)) => u.trim_end_matches('/').to_owned(),
        (None, None) => bail!("no target: set target.url or leave it out for the simulator"),
    };
    let timeline = match &cold {
        Some(cs) => Some(ready(&http, &base, cs, &mut launched, (started, cancel, opts)).await?),
        None => None,
    };
    Ok(Reached {
        http,
        load_http,
        credentials,
        direct,
        connects,
        base,
        api_key,
        sim,
        launched,
        timeline,
        bundle,
    })
}

/// How long until a sharded run's start instant; an error once it has passed (`when` says
/// what took the time).
fn not_past(at: jiff::Timestamp, when: &str) -> anyhow::Result<Duration> {
    let ahead = at.duration_since(jiff::Timestamp::now());
    if ahead.is_negative() || ahead.is_zero() {
        bail!(
            "load.start_at = {at} passed {:.1} s ago{when}: every shard must be ready before it, so choose a later instant (e.g. a minute from now) and start every shard again",
            -ahead.as_secs_f64()
        );
    }
    Ok(Duration::from_secs_f64(ahead.as_secs_f64()))
}

/// A new cache nonce: 8 hex digits that differ from run to run. Uniqueness, not secrecy, is
/// needed: std's `RandomState` is keyed from the OS per process (and per instance within
/// one), and the clock separates runs further.
fn fresh_nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:08x}", h.finish() as u32)
}

fn new_bundle(opts: &RunOptions, c: &Contract) -> anyhow::Result<Bundle> {
    match &opts.bundle_dir {
        Some(dir) => Bundle::create_at(dir),
        None => Bundle::create(&opts.out_root, c),
    }
    .with_context(|| format!("creating a bundle under {}", opts.out_root.display()))
}

/// A repeat set's summary (`repeat.json`): per headline metric, the per-run values and their
/// mean, standard deviation, coefficient of variation and 95% confidence interval.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RepeatSummary {
    pub runs: usize,
    pub pause_s: f64,
    /// What happened to the server between runs.
    pub reset: String,
    pub metrics: std::collections::BTreeMap<String, crate::stats::OverRuns>,
    pub warnings: Vec<String>,
}

/// Coefficient of variation above which a metric is flagged as too noisy to rank on.
const HIGH_CV: f64 = 0.10;

/// Runs the contract `repeat.runs` times, each run its own bundle (`run-01`, …) inside a parent
/// bundle that also holds `repeat.json` and `repeat.md`.
pub async fn run_repeats(
    contract: Contract,
    inputs: Inputs,
    opts: RunOptions,
    cancel: CancellationToken,
) -> anyhow::Result<(Bundle, RepeatSummary, Vec<RunResult>)> {
    let parent = Bundle::create(&opts.out_root, &contract)
        .with_context(|| format!("creating a bundle under {}", opts.out_root.display()))?;
    parent.write(CONTRACT, &contract.to_toml())?;
    let n = contract.repeat.runs as usize;
    let mut results = Vec::new();
    for k in 1..=n {
        let o = RunOptions {
            bundle_dir: Some(parent.dir.join(format!("run-{k:02}"))),
            ..opts.clone()
        };
        results.push(run(contract.clone(), inputs.clone(), o, cancel.clone()).await?);
        if cancel.is_cancelled() {
            break;
        }
        if k < n && contract.repeat.pause.0 > 0.0 {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(contract.repeat.pause.seconds())) => {}
            }
        }
    }
    let summaries: Vec<&Summary> = results.iter().map(|r| &r.summary).collect();
    let rs = repeat_summary(&contract, &summaries);
    parent.write_json("repeat.json", &rs)?;
    parent.write("repeat.md", &repeat_document(&rs).markdown())?;
    Ok((parent, rs, results))
}

/// Aggregates run summaries (from their headline values; never by averaging raw percentiles
/// into a new percentile).
pub fn repeat_summary(c: &Contract, runs: &[&Summary]) -> RepeatSummary {
    let mut metrics = std::collections::BTreeMap::new();
    let mut warnings = Vec::new();
    if !runs.is_empty() {
        for h in crate::analyze::Headline::ALL {
            let name = h.name();
            let values: Vec<f64> = runs.iter().filter_map(|s| h.of(s)).collect();
            if values.is_empty() {
                continue;
            }
            let o = crate::stats::OverRuns::of(values);
            if o.cv > HIGH_CV && o.values.len() > 1 {
                warnings.push(format!(
                    "{name} varies between runs: CV {:.0}% > {:.0}%",
                    o.cv * 100.0,
                    HIGH_CV * 100.0
                ));
            }
            metrics.insert(name.to_owned(), o);
        }
    }
    if runs.len() < 3 {
        warnings.push(format!(
            "{} run(s): too few to say anything about run-to-run variance (3 or more)",
            runs.len()
        ));
    }
    RepeatSummary {
        runs: runs.len(),
        pause_s: c.repeat.pause.seconds(),
        reset: if c.embedded() {
            "embedded simulator restarted for every run".into()
        } else if c.cold_start.as_ref().is_some_and(|cs| cs.launch.is_some()) {
            "server launched afresh for every run".into()
        } else {
            "none: the external server kept its state between runs".into()
        },
        metrics,
        warnings,
    }
}

/// The repeat summary as a report.
pub fn repeat_document(r: &RepeatSummary) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!(
        "Repeats: {} runs (pause {} s; reset: {})",
        r.runs, r.pause_s, r.reset
    ));
    let rows = r
        .metrics
        .iter()
        .map(|(name, o)| {
            vec![
                name.clone(),
                o.values
                    .iter()
                    .map(|v| format!("{v:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                format!("{:.3}", o.mean),
                format!("{:.3}", o.stddev),
                format!("{:.1}%", o.cv * 100.0),
                o.ci95
                    .map_or("—".into(), |[a, b]| format!("[{a:.3}, {b:.3}]")),
            ]
        })
        .collect();
    d.table(&["metric", "per run", "mean", "sd", "CV", "95% CI"], rows);
    for w in &r.warnings {
        d.warn(format!("Warning: {w}"));
    }
    d
}

/// What a run tells whoever started it, while it runs: its progress (every 200 ms) and
/// warnings. The library prints nothing; the command line shows these on stderr.
pub trait Watch: Send + Sync + std::fmt::Debug {
    fn progress(&self, _p: &Progress) {}
    /// The run (or one run of a repeat set) is over: clear what `progress` drew.
    fn finished(&self) {}
    fn warn(&self, _message: &str) {}
    /// Something the user should know that is not wrong (a shard waiting for its start).
    fn note(&self, _message: &str) {}
    /// A result as soon as it is known (a sweep's point when it finishes), one line.
    fn line(&self, _message: &str) {}
}

/// Watches nothing (tests, library use).
#[derive(Debug, Default)]
pub struct Silent;

impl Watch for Silent {}

/// A run's progress at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub elapsed: Duration,
    pub finished: u64,
    /// Requests planned (warm-up and measured), when a count bounds them.
    pub planned: Option<u64>,
    pub errors: u64,
    /// TTFT percentiles so far (all phases, from the actual send; approximate).
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
}

impl Progress {
    /// One line: requests done of planned, the completion rate so far, errors, TTFT, and the
    /// time left at that rate.
    pub fn line(&self) -> String {
        progress_line(
            self.elapsed,
            self.finished,
            self.planned,
            self.errors,
            self.ttft_p50_ms,
            self.ttft_p99_ms,
        )
    }
}

/// One progress line: requests done of planned, the completion rate so far, errors, TTFT, and
/// the time left at that rate.
fn progress_line(
    elapsed: Duration,
    finished: u64,
    planned: Option<u64>,
    errors: u64,
    p50: f64,
    p99: f64,
) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        finished as f64 / secs
    } else {
        0.0
    };
    let (of, eta) = match planned {
        // Past the plan: the load stays on (drain) until the last measured request ends, then
        // the quality probes go.
        Some(n) if finished > n => (
            format!(
                "{n}/{n} requests, finishing (+{} after the plan)",
                finished - n
            ),
            String::new(),
        ),
        Some(n) => (
            format!(
                "{finished}/{n} requests ({:.0}%)",
                finished as f64 / n.max(1) as f64 * 100.0
            ),
            if rate > 0.0 && n > finished {
                format!(" · ETA {:.0} s", (n - finished) as f64 / rate)
            } else {
                String::new()
            },
        ),
        None => (format!("{finished} requests"), String::new()),
    };
    let ttft = if p50.is_finite() {
        format!(" · TTFT p50 {p50:.1} ms p99 {p99:.1} ms")
    } else {
        String::new()
    };
    format!(
        "progress {:.0} s: {of} · {rate:.1} req/s · {errors} errors{ttft}{eta}",
        secs
    )
}

/// Tells the watcher the progress, and applies the fail-fast rule, until `done`.
async fn monitor(
    live: LiveView,
    planned: Option<u64>,
    watch: Arc<dyn Watch>,
    done: CancellationToken,
) {
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (finished, errors, p50, p99) = {
            let l = live.lock().unwrap_or_else(|p| p.into_inner());
            let h = &l.ttft_us;
            let q = |x: f64| {
                if h.is_empty() {
                    f64::NAN
                } else {
                    h.value_at_quantile(x) as f64 / 1000.0
                }
            };
            (l.finished, l.errors, q(0.5), q(0.99))
        };
        watch.progress(&Progress {
            elapsed: started.elapsed(),
            finished,
            planned,
            errors,
            ttft_p50_ms: p50,
            ttft_p99_ms: p99,
        });
    }
    watch.finished();
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

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn progress_lines_say_done_rate_errors_and_time_left() {
        assert_eq!(
            progress_line(Duration::from_secs(10), 200, Some(600), 3, 71.06, 202.4),
            "progress 10 s: 200/600 requests (33%) · 20.0 req/s · 3 errors · TTFT p50 71.1 ms p99 202.4 ms · ETA 20 s"
        );
        assert_eq!(
            progress_line(
                Duration::from_secs(50),
                885,
                Some(750),
                0,
                f64::NAN,
                f64::NAN
            ),
            "progress 50 s: 750/750 requests, finishing (+135 after the plan) · 17.7 req/s · 0 errors"
        );
        // Before the first token, and with a duration-bound run (no plan length).
        assert_eq!(
            progress_line(Duration::from_secs(2), 0, None, 0, f64::NAN, f64::NAN),
            "progress 2 s: 0 requests · 0.0 req/s · 0 errors"
        );
    }
}
