//! The driver: turns a plan into requests over time, open- or closed-loop, labels phases, and
//! hands every finished record to the collector. It knows nothing of HTTP details (the client
//! does) or of statistics and reports (analysis does).
//!
//! Open loop sends request `i` at its intended time whatever earlier requests are doing, so a
//! slow server cannot slow the load down (no coordinated omission); an arrival that finds
//! `max_in_flight` requests in flight is recorded as client-dropped, never skipped silently.
//! Closed loop keeps `concurrency` users each waiting for its answer. When the stop condition is
//! reached, requests in flight drain (each bounded by the contract's timeout) and are kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::{Client, RequestSpec};
use crate::contract::Contract;
use crate::plan::{Phase, Plan, PlannedRequest};
use crate::record::{Outcome, Record};

/// What the driver did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriveOutcome {
    /// Requests handed to the client (or recorded as dropped).
    pub dispatched: u64,
    /// Open-loop arrivals recorded as client-dropped.
    pub dropped: u64,
    /// The run was interrupted before its stop condition.
    pub interrupted: bool,
}

/// A run's fixed inputs.
pub struct Driver {
    pub client: Arc<Client>,
    pub contract: Arc<Contract>,
    pub plan: Arc<Plan>,
    /// Model id sent in requests.
    pub model: String,
    /// Prefix of every `X-Request-Id`.
    pub run_id: String,
}

impl Driver {
    fn prepare(&self, index: u64) -> (PlannedRequest, Bytes) {
        let p = self.plan.request(index);
        let w = &self.contract.workload;
        let body = self.client.adapter().body(&RequestSpec {
            model: &self.model,
            prompt: &p.prompt,
            max_tokens: p.output_tokens,
            stream: w.stream,
            exact_output: w.enforce_output_length,
            sampling: &w.sampling,
        });
        (p, Bytes::from(body))
    }

    /// Runs the plan to its stop condition (or until `cancel`), sending records to `tx`.
    pub async fn drive(
        self: Arc<Self>,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        if self.contract.load.is_open() {
            self.open_loop(tx, cancel).await
        } else {
            self.closed_loop(tx, cancel).await
        }
    }

    async fn open_loop(
        self: Arc<Self>,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        let tracker = TaskTracker::new();
        let handle = tokio::runtime::Handle::current();
        let (me, t, c) = (self.clone(), tracker.clone(), cancel.clone());
        // The schedule is kept by a dedicated thread: `std::thread::sleep` wakes within tens of
        // microseconds, where tokio's timer wheel rounds every sleep up to the next millisecond.
        let dispatch = tokio::task::spawn_blocking(move || me.dispatch(&handle, &t, &tx, &c));
        let mut out = dispatch.await.unwrap_or_else(|_| DriveOutcome {
            interrupted: true,
            ..DriveOutcome::default()
        });
        tracker.close();
        tracker.wait().await;
        out.interrupted |= cancel.is_cancelled();
        out
    }

    /// Sends every scheduled request at its time (blocking thread).
    fn dispatch(
        self: &Arc<Self>,
        handle: &tokio::runtime::Handle,
        tracker: &TaskTracker,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
    ) -> DriveOutcome {
        let mut out = DriveOutcome::default();
        let Some(sched) = self.plan.open.as_ref() else {
            return out;
        };
        let cap = self.contract.load.max_in_flight();
        let in_flight = Arc::new(AtomicU32::new(0));
        let epoch = self.client.epoch();
        let n = sched.arrivals_us.len() as u64;
        let mut next = (n > 0).then(|| self.prepare(0));
        for i in 0..n {
            let Some((planned, body)) = next.take() else {
                break;
            };
            if !sleep_until(
                epoch + Duration::from_micros(sched.arrivals_us[i as usize]),
                cancel,
            ) {
                out.interrupted = true;
                break;
            }
            let mut rec = Record::planned(&planned, planned.phase, &self.run_id);
            out.dispatched += 1;
            if in_flight.load(Ordering::Acquire) >= cap {
                rec.fail(
                    Outcome::ClientDropped,
                    format!("{cap} requests were in flight (load.max_in_flight)"),
                    self.client.now_us(),
                );
                out.dropped += 1;
                let _ = tx.send(rec);
            } else {
                in_flight.fetch_add(1, Ordering::AcqRel);
                let (me, tx, cancel, in_flight) =
                    (self.clone(), tx.clone(), cancel.clone(), in_flight.clone());
                tracker.spawn_on(
                    async move {
                        me.client.execute(body, &mut rec, &cancel).await;
                        in_flight.fetch_sub(1, Ordering::AcqRel);
                        let _ = tx.send(rec);
                    },
                    handle,
                );
            }
            // Build the next request while waiting for its time, not after.
            if i + 1 < n {
                next = Some(self.prepare(i + 1));
            }
        }
        out
    }

    async fn closed_loop(
        self: Arc<Self>,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        let c = &self.contract;
        let users = c.load.concurrency().max(1);
        let shared = Arc::new(ClosedState {
            next_index: AtomicU64::new(0),
            steady_issued: AtomicU64::new(0),
            steady_start_us: AtomicU64::new(u64::MAX),
            dispatched: AtomicU64::new(0),
        });
        let tracker = TaskTracker::new();
        for _ in 0..users {
            let (me, tx, cancel, shared) =
                (self.clone(), tx.clone(), cancel.clone(), shared.clone());
            tracker.spawn(async move { me.user(&shared, &tx, &cancel).await });
        }
        tracker.close();
        tracker.wait().await;
        DriveOutcome {
            dispatched: shared.dispatched.load(Ordering::Acquire),
            dropped: 0,
            interrupted: cancel.is_cancelled(),
        }
    }

    /// One closed-loop user: send, wait for the answer, think, repeat until the stop condition.
    async fn user(
        &self,
        st: &ClosedState,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
    ) {
        let c = &self.contract;
        let warmup_duration_us = c.warmup.duration.map(|d| (d.0 * 1e6) as u64);
        let steady_requests = c.load.requests();
        let steady_duration_us = c.load.duration().map(|d| (d.0 * 1e6) as u64);
        let think = Duration::from_secs_f64(c.load.think_time().seconds());
        loop {
            if cancel.is_cancelled() {
                return;
            }
            let i = st.next_index.fetch_add(1, Ordering::AcqRel);
            let now = self.client.now_us();
            let phase = match warmup_duration_us {
                Some(d) if now < d => Phase::Warmup,
                Some(_) => Phase::Steady,
                None if i < c.warmup.requests => Phase::Warmup,
                None => Phase::Steady,
            };
            if phase == Phase::Steady {
                let start = match st.steady_start_us.compare_exchange(
                    u64::MAX,
                    now,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => now,
                    Err(s) => s,
                };
                if let Some(d) = steady_duration_us
                    && now >= start + d
                {
                    return;
                }
                if let Some(r) = steady_requests
                    && st.steady_issued.fetch_add(1, Ordering::AcqRel) >= r
                {
                    return;
                }
            }
            let (planned, body) = self.prepare(i);
            let mut rec = Record::planned(&planned, phase, &self.run_id);
            st.dispatched.fetch_add(1, Ordering::AcqRel);
            self.client.execute(body, &mut rec, cancel).await;
            let _ = tx.send(rec);
            if !think.is_zero() {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(think) => {}
                }
            }
        }
    }
}

/// Sleeps the thread until `deadline`; false if cancelled first (checked every 20 ms).
fn sleep_until(deadline: std::time::Instant, cancel: &CancellationToken) -> bool {
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

struct ClosedState {
    next_index: AtomicU64,
    steady_issued: AtomicU64,
    steady_start_us: AtomicU64,
    dispatched: AtomicU64,
}
