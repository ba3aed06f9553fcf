//! The load: the plan driven against the target by the open- or closed-loop driver, every
//! record written as it finishes, with the observers that watch the records (progress,
//! fail-fast, until-stable, the live view) and the decisions a live run may take (stop, change
//! the rate).

use super::RunOptions;
use super::Target;
use super::Where;
use super::finish::note_aborted;
use super::probe::counts_model_tokens;
use super::watch::monitor;
use crate::bundle::{Bundle, REQUESTS};
use crate::client::{Client, KeepOutput};
use crate::contract::{ClientTokenCount, Contract};
use crate::driver::{COLD_START_INDEX, Driver};
use crate::env::prom::Scraper;
use crate::plan::{PRIME_INDEX, PROBE_INDEX, Phase, Plan};
use crate::record::writer::{Live, LiveView, Observer, Stability, write_records};
use crate::record::{Outcome, Record};
use crate::workload::Inputs;
use anyhow::Context;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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

/// What the load did: every record, how the driving went, and why it stopped early when it
/// did (it gave up, its verdict was decided, the progress guard stopped it).
pub(super) struct Loaded {
    pub(super) records: Vec<Record>,
    pub(super) outcome: crate::driver::DriveOutcome,
    pub(super) aborted: Option<String>,
    pub(super) decided: Option<String>,
    pub(super) guard: Option<crate::driver::guard::GuardStop>,
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
pub(super) async fn load(
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
    let run_id = super::traces::run_id(bundle);
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
