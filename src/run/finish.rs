//! After the load: the server left as found (what is still in flight cancelled or drained
//! within a bound, its queue seen idle), how the load ended and what it did recorded in
//! `environment.json`, and outputs recounted in the server's tokens.

use super::RunOptions;
use super::Target;
use crate::bundle::{Bundle, COMMAND, CommandFile, EnvironmentFile};
use crate::contract::{ClientTokenCount, Contract};
use crate::env::tokenize::ServerCounter;
use crate::record::{Outcome, Record};
use crate::workload::Inputs;
use anyhow::Context;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the load itself was, into `environment`: the dispatch thread's priority and, for a
/// live demo, each segment of its load (returned for the summary).
pub(super) fn what_the_load_did(
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
pub(super) fn how_it_ended(
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

/// After the load, the outputs whose count the server did not confirm are counted in the
/// model's tokens (`record::recount`): by the workload's tokenizer file, else the target's
/// `/tokenize`; `requests.jsonl` is rewritten with the counts. Nothing to do when no record
/// kept its text. An interrupted run counts only with a file (no more requests go out).
pub(super) async fn count_outputs(
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

/// Why the run ended, kept in `command.json` where `report` looks for it (when the disk still
/// takes that much: this is the path of a run that could not write its records).
pub(super) fn note_aborted(
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

/// How the load left the server: after an early stop (the guard, a decided verdict, a signal,
/// a failure), the requests it cancelled in flight and how long the server took to be idle
/// again by its own metrics ([`until_idle`]); the progress guard's evidence; the drain's cut.
pub(super) async fn left_as_found(
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
