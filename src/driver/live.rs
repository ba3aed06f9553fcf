//! The load of `demo --live`: changed in place by the dashboard's keys ([`Control`]). Each
//! setting is a segment: open loop (Poisson arrivals at the offered rate, each request's
//! latency counted from its intended send time, a request that finds `max_in_flight` in flight
//! recorded as dropped) or closed loop (users enough to carry the offered rate at unloaded
//! latency, each sending again when answered). A change ends the segment at once: no more
//! arrivals of the old rate, closed-loop users stop after their present request, and what is
//! in flight finishes and is recorded with the segment it was sent in. Phases are labelled
//! as in any run (warm-up by the contract's rule, then steady until `q` or the contract's
//! duration).
//!
//! The schedule is kept by tokio's timer (about a millisecond coarser than the open-loop
//! dispatch thread): the demo shows queues of hundreds of milliseconds, not client precision,
//! and its dispatch lag is recorded like any run's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{DriveOutcome, Driver};
use crate::plan::{Phase, Phaser};
use crate::record::{Outcome, Record, SegmentFacts};
use std::sync::{Mutex, OnceLock};

use crate::client::Client;

/// What every task of the live load shares.
struct Shared {
    origin: u64,
    next_index: AtomicU64,
    phaser: std::sync::Mutex<Phaser>,
    dispatched: AtomicU64,
    dropped: AtomicU64,
}

impl Shared {
    fn phase(&self, d: &Driver, at_us: u64) -> Phase {
        self.phaser.lock().unwrap_or_else(|p| p.into_inner()).next(
            at_us.saturating_sub(self.origin),
            d.stable.load(Ordering::Acquire),
        )
    }
}

impl Driver {
    /// Runs the live load until the control's `stop`, the contract's duration, or `cancel`.
    pub(super) async fn live_loop(
        self: Arc<Self>,
        control: Arc<Control>,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        control.start(self.client.clone());
        let mut changes = control.watch();
        let shared = Arc::new(Shared {
            origin: self.client.now_us(),
            next_index: AtomicU64::new(0),
            phaser: std::sync::Mutex::new(Phaser::new(self.plan.rules())),
            dispatched: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let tracker = TaskTracker::new();
        let stop = control.stop.clone();
        'segments: loop {
            let setting = *changes.borrow_and_update();
            // Ends this segment's closed-loop users after their present request.
            let over = CancellationToken::new();
            let ended = if setting.open {
                self.open_segment(&setting, &shared, &tracker, &tx, &cancel, &over)
                    .await
            } else {
                for _ in 0..setting.users {
                    let (me, tx, cancel, over, shared) = (
                        self.clone(),
                        tx.clone(),
                        cancel.clone(),
                        over.clone(),
                        shared.clone(),
                    );
                    let segment = setting.segment;
                    tracker.spawn(async move {
                        me.live_user(segment, &shared, &tx, &cancel, &over).await;
                    });
                }
                // Until a change, the end, or the plan's end (a user saw the drain).
                tokio::select! {
                    _ = changes.changed() => None,
                    () = cancel.cancelled() => Some(()),
                    () = stop.cancelled() => Some(()),
                    () = over.cancelled() => Some(()),
                }
            };
            over.cancel();
            if ended.is_some() || stop.is_cancelled() || cancel.is_cancelled() {
                break 'segments;
            }
        }
        tracker.close();
        tracker.wait().await;
        control.finish(self.client.now_us());
        DriveOutcome {
            dispatched: shared.dispatched.load(Ordering::Acquire),
            dropped: shared.dropped.load(Ordering::Acquire),
            interrupted: cancel.is_cancelled(),
            ..DriveOutcome::default()
        }
    }

    /// Poisson arrivals at the segment's rate until the setting changes (`None`) or the load
    /// ends (`Some`).
    async fn open_segment(
        self: &Arc<Self>,
        setting: &Setting,
        shared: &Arc<Shared>,
        tracker: &TaskTracker,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
        over: &CancellationToken,
    ) -> Option<()> {
        let control = self.control.as_ref()?;
        let mut changes = control.watch();
        changes.mark_unchanged();
        let seed = self.contract.workload.seed ^ (u64::from(setting.segment) << 32);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let gap = Exp::new(setting.offered_rps.max(1e-3)).ok()?;
        // An open segment's cap: the contract's when it is an open loop, else the default.
        let cap = u64::from(match self.contract.load.drive() {
            crate::contract::Drive::Open { max_in_flight, .. } => max_in_flight,
            crate::contract::Drive::Closed { .. } => crate::contract::DEFAULT_IN_FLIGHT,
        });
        let mut at = self.client.now_us();
        loop {
            at += (gap.sample(&mut rng) * 1e6) as u64;
            let when =
                tokio::time::Instant::from_std(self.client.epoch() + Duration::from_micros(at));
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Some(()),
                () = control.stop.cancelled() => return Some(()),
                _ = changes.changed() => return None,
                () = tokio::time::sleep_until(when) => {}
            }
            let phase = shared.phase(self, at);
            if phase == Phase::Drain {
                over.cancel();
                return Some(());
            }
            let i = shared.next_index.fetch_add(1, Ordering::AcqRel);
            let (planned, body) = self.prepare(i);
            let mut rec = self.record(&planned, phase);
            let woke = self.client.now_us();
            rec.intended_us = Some(at);
            rec.dispatched_us = Some(woke);
            rec.segment = Some(setting.segment);
            shared.dispatched.fetch_add(1, Ordering::AcqRel);
            if self.client.in_flight() >= cap {
                rec.fail(
                    Outcome::ClientDropped,
                    format!("{cap} requests were in flight (load.max_in_flight)"),
                    woke,
                );
                shared.dropped.fetch_add(1, Ordering::AcqRel);
                let _ = tx.send(rec);
                continue;
            }
            let (me, tx, cancel) = (self.clone(), tx.clone(), cancel.clone());
            tracker.spawn(async move {
                me.client.execute(body, &mut rec, &cancel).await;
                let _ = tx.send(rec);
            });
        }
    }

    /// One closed-loop user of a segment: send, wait for the answer, send again, until the
    /// segment is over (its present request still finishes and is recorded).
    async fn live_user(
        &self,
        segment: u32,
        shared: &Shared,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
        over: &CancellationToken,
    ) {
        while !over.is_cancelled() && !cancel.is_cancelled() {
            let now = self.client.now_us();
            let phase = shared.phase(self, now);
            if phase == Phase::Drain {
                over.cancel();
                return;
            }
            let i = shared.next_index.fetch_add(1, Ordering::AcqRel);
            let (planned, body) = self.prepare(i);
            let mut rec = self.record(&planned, phase);
            rec.intended_us = None;
            rec.segment = Some(segment);
            shared.dispatched.fetch_add(1, Ordering::AcqRel);
            self.client.execute(body, &mut rec, cancel).await;
            let _ = tx.send(rec);
        }
    }
}

/// The load as the live control has it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    pub segment: u32,
    pub open: bool,
    /// Share of the engine's capacity offered.
    pub load: f64,
    pub offered_rps: f64,
    /// Closed loop: users enough to carry `offered_rps` at unloaded latency (Little's law).
    pub users: u32,
}

/// The load of `demo --live`, changed in place by keys: each change starts a segment.
#[derive(Debug)]
pub struct Control {
    pub capacity_rps: f64,
    /// End-to-end time of one request alone, s: closed-loop users carry the offered rate at it.
    pub e2e_alone_s: f64,
    segments: Mutex<Vec<SegmentFacts>>,
    tx: tokio::sync::watch::Sender<Setting>,
    client: OnceLock<Arc<Client>>,
    /// Ends the load gracefully: nothing more is sent, the requests in flight finish.
    pub stop: CancellationToken,
}

/// A step of the load keys, as a share of capacity.
pub const LOAD_STEP: f64 = 0.1;

impl Control {
    pub fn new(capacity_rps: f64, e2e_alone_s: f64, open: bool, load: f64) -> Arc<Control> {
        let first = Self::setting_for(capacity_rps, e2e_alone_s, 0, open, load);
        let (tx, _) = tokio::sync::watch::channel(first);
        Arc::new(Control {
            capacity_rps,
            e2e_alone_s,
            segments: Mutex::new(Vec::new()),
            tx,
            client: OnceLock::new(),
            stop: CancellationToken::new(),
        })
    }

    fn setting_for(cap: f64, e2e: f64, segment: u32, open: bool, load: f64) -> Setting {
        let rate = cap * load;
        Setting {
            segment,
            open,
            load,
            offered_rps: rate,
            users: ((rate * e2e).round() as u32).max(1),
        }
    }

    pub fn setting(&self) -> Setting {
        *self.tx.borrow()
    }

    /// Changes arrive here (the driver's live loop).
    pub fn watch(&self) -> tokio::sync::watch::Receiver<Setting> {
        self.tx.subscribe()
    }

    /// The load starts now: segment 0 begins.
    pub fn start(&self, client: Arc<Client>) {
        let now = client.now_us();
        let _ = self.client.set(client);
        let s = self.setting();
        self.lock().push(self.facts(&s, now));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SegmentFacts>> {
        self.segments.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn facts(&self, s: &Setting, from_us: u64) -> SegmentFacts {
        SegmentFacts {
            segment: s.segment,
            loop_kind: if s.open { "open" } else { "closed" }.to_owned(),
            load: s.load,
            offered_rps: s.offered_rps,
            users: (!s.open).then_some(s.users),
            from_us,
            to_us: None,
        }
    }

    /// A new load: ends the present segment and starts the next (nothing when unchanged).
    pub fn set(&self, open: bool, load: f64) {
        let load = (load * 100.0).round().clamp(10.0, 300.0) / 100.0;
        let old = self.setting();
        if old.open == open && (old.load - load).abs() < 1e-9 {
            return;
        }
        let now = self.client.get().map_or(0, |c| c.now_us());
        let next = Self::setting_for(
            self.capacity_rps,
            self.e2e_alone_s,
            old.segment + 1,
            open,
            load,
        );
        {
            let mut segs = self.lock();
            if let Some(last) = segs.last_mut() {
                last.to_us = Some(now);
            }
            if self.client.get().is_some() {
                segs.push(self.facts(&next, now));
            }
        }
        self.tx.send_replace(next);
    }

    pub fn raise(&self) {
        let s = self.setting();
        self.set(s.open, s.load + LOAD_STEP);
    }

    pub fn lower(&self) {
        let s = self.setting();
        self.set(s.open, s.load - LOAD_STEP);
    }

    pub fn switch(&self) {
        let s = self.setting();
        self.set(!s.open, s.load);
    }

    /// The load ended at `end_us`: the last segment ends there.
    pub fn finish(&self, end_us: u64) {
        let mut segs = self.lock();
        if let Some(last) = segs.last_mut()
            && last.to_us.is_none()
        {
            last.to_us = Some(end_us);
        }
    }

    /// Every segment so far.
    pub fn segments(&self) -> Vec<SegmentFacts> {
        self.lock().clone()
    }
}
