//! The driver: turns a plan into requests over time, open- or closed-loop, labels phases, and
//! hands every finished record to the collector. It knows nothing of HTTP details (the client
//! does) or of statistics and reports (analysis does).
//!
//! Open loop sends request `i` at its intended time whatever earlier requests are doing, so a
//! slow server cannot slow the load down (no coordinated omission); an arrival that finds
//! `max_in_flight` requests in flight is recorded as client-dropped, never skipped silently.
//! Closed loop keeps `concurrency` users each waiting for its answer.
//!
//! Phases are labelled at send time by a [`Phaser`]: warm-up until its rule is met (a count, a
//! duration, or the collector's signal that TTFT has settled), then steady until the stop rule,
//! then **drain**: the same load keeps running, labelled `drain`, until the last steady request
//! has finished. So every steady request is measured under steady load and none is left out of
//! the steady statistics for being slow (which dropping "in flight at the end" would do).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::Message;
use crate::api::RequestSpec;
use crate::client::Client;
use crate::contract::{Contract, Drive};
use crate::plan::{ArrivalGen, Phase, Phaser, Plan, PlannedRequest, Scheduled, SessionPlan};
use crate::record::{Outcome, Record};

pub mod guard;
pub mod live;
mod task;

/// What the driver did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriveOutcome {
    /// Requests handed to the client (or recorded as dropped).
    pub dispatched: u64,
    /// Open-loop arrivals recorded as client-dropped.
    pub dropped: u64,
    /// The run was interrupted before its stop condition.
    pub interrupted: bool,
    /// Open-loop arrivals whose request was not built by its send time (prompt building was
    /// slower than the arrivals; their lag shows it as a late wake-up).
    pub built_late: u64,
    /// Why the load stopped short on the client's side, when it did: no thread could be
    /// started to build requests on, or the dispatch thread failed.
    pub failed: Option<String>,
    /// How the open-loop dispatch thread was scheduled; `None` for other load models.
    pub dispatch_thread: Option<Priority>,
    /// The drain reached its bound ([`guard::drain_bound`]) and stopped sending.
    pub drain_cut: Option<guard::DrainCut>,
}

/// How a thread that keeps the schedule was scheduled ([`PreciseSleeps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Priority {
    /// `SCHED_FIFO` at priority 1.
    RealTime,
    /// A normal thread, and why.
    Normal(String),
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
    /// The run's trace ids, when every request carries trace context.
    pub traces: Option<crate::otlp::TraceIds>,
    /// Set by the collector when the warm-up statistic has settled (`until_stable`).
    pub stable: Arc<AtomicBool>,
    /// Set by the collector once the run's answer is known (`[measurement.stop]`).
    pub known: Arc<AtomicBool>,
    /// Wakes sessions' follow-up turns at their intended times (started with the first).
    pub follow_ups: std::sync::OnceLock<Option<FollowUps>>,
    /// Where an open-loop schedule starts on the client's clock (µs): a sharded run's common
    /// start instant. `None`: when the dispatch thread is ready.
    pub start_us: Option<u64>,
    /// The load of `demo --live`, changed in place while it runs; `None`: the contract's.
    pub control: Option<Arc<live::Control>>,
    /// The threads that keep the schedule ask for real-time priority ([`PreciseSleeps`]);
    /// false with `--no-wake-latency-hold`.
    pub realtime: bool,
    /// Told when the first and the last steady request are sent: the server's metrics are
    /// scraped at the steady window's edges.
    pub window: WindowMarks,
    /// Open loop: the requests sent and not yet finished, by plan index: their phase and
    /// latency origin (µs). What a run still in flight looks like to the rule that stops it
    /// once its verdict is decided (`analyze::decided`).
    pub pending: Mutex<std::collections::BTreeMap<u64, (Phase, u64)>>,
    /// The first tokens of those in flight, as the client notes them (shared with it).
    pub first_tokens: crate::client::FirstTokens,
}

/// Marks the steady window's edges for the scrapers: `steady_start` when the first steady
/// request is sent, `steady_end` when the last one is (a duration-bound steady phase: when the
/// first request after it is labelled drain, or the load ends).
#[derive(Debug, Default)]
pub struct WindowMarks {
    markers: Vec<crate::env::prom::Marker>,
    started: std::sync::atomic::AtomicBool,
    ended: std::sync::atomic::AtomicBool,
}

impl WindowMarks {
    /// The last steady request has been sent: the steady window is complete.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

impl WindowMarks {
    pub fn new(markers: Vec<crate::env::prom::Marker>) -> WindowMarks {
        WindowMarks {
            markers,
            ..WindowMarks::default()
        }
    }

    fn mark(&self, when: &'static str) {
        for m in &self.markers {
            m.mark(when);
        }
    }

    /// A request labelled `phase` was just sent; `last` says it was the last steady one.
    fn sent(&self, phase: Phase, last: bool) {
        if phase == Phase::Steady && !self.started.swap(true, Ordering::AcqRel) {
            self.mark("steady_start");
        }
        if (phase == Phase::Steady && last) || phase == Phase::Drain {
            self.end();
        }
    }

    /// The load is over (or the steady phase ended): the end is marked once, after a start.
    pub fn end(&self) {
        if self.started.load(Ordering::Acquire) && !self.ended.swap(true, Ordering::AcqRel) {
            self.mark("steady_end");
        }
    }
}

/// Wakes sessions' follow-up turns at their intended times as precisely as the open-loop
/// dispatch thread keeps its schedule: one thread holds the pending wake-ups in time order and
/// waits for the earliest with the thread's timer slack at its minimum ([`PreciseSleeps`]).
/// tokio's timer wheel rounds every wait up to the next millisecond, which put a follow-up's
/// slip at about 1.2 ms at the median, a quarter of the dispatch-lag bound.
pub struct FollowUps {
    tx: std::sync::mpsc::Sender<(std::time::Instant, tokio::sync::oneshot::Sender<()>)>,
}

impl FollowUps {
    fn start(realtime: bool) -> std::io::Result<FollowUps> {
        let (tx, rx) =
            std::sync::mpsc::channel::<(std::time::Instant, tokio::sync::oneshot::Sender<()>)>();
        std::thread::Builder::new()
            .name("goodput-follow-ups".into())
            .spawn(move || {
                let _precise = PreciseSleeps::on_this_thread(realtime);
                let mut due: std::collections::BinaryHeap<
                    std::cmp::Reverse<(std::time::Instant, u64)>,
                > = std::collections::BinaryHeap::new();
                let mut waiting = std::collections::HashMap::new();
                let mut seq = 0u64;
                loop {
                    let now = std::time::Instant::now();
                    while let Some(std::cmp::Reverse((at, k))) = due.peek().copied() {
                        if at > now {
                            break;
                        }
                        due.pop();
                        if let Some(w) = waiting.remove(&k) {
                            let _: Result<(), ()> = tokio::sync::oneshot::Sender::send(w, ());
                        }
                    }
                    let next = match due.peek() {
                        Some(std::cmp::Reverse((at, _))) => {
                            rx.recv_timeout(at.saturating_duration_since(now))
                        }
                        // Nothing pending: wait for a wake-up to hold, or the run's end.
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match next {
                        Ok((at, w)) => {
                            seq += 1;
                            due.push(std::cmp::Reverse((at, seq)));
                            waiting.insert(seq, w);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        // The driver is gone: the tasks still waiting see their senders dropped.
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok(FollowUps { tx })
    }

    /// Resolves at `at` (or at once when the wake-up thread is gone).
    async fn until(&self, at: std::time::Instant) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send((at, tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

impl Driver {
    /// The record of a planned request before it is sent, with its trace id.
    fn record(&self, p: &PlannedRequest, phase: Phase) -> Record {
        let mut r = Record::planned(p, phase, &self.run_id);
        r.trace_id = self.traces.map(|t| t.trace_id(p.index));
        r
    }

    fn prepare(&self, index: u64) -> (PlannedRequest, Bytes) {
        // A task's first node, when it is a model call: its own message alone.
        if let Some(g) = self.plan.graph_of(index)
            && g.nodes[0].kind == crate::contract::task::NodeKind::Model
        {
            let p = self.plan.node(index, 0);
            let body = self.body(&p, Some(&[user(&p.prompt)]), &[]);
            return (p, body);
        }
        let mut p = self.plan.request(index);
        let images = image_uris(self.plan.inputs(), &mut p);
        // A session's first turn opens its conversation: the shared system prompt, if any, then
        // the request's prompt as the user's message.
        if self.contract.workload.sessions.is_some() && p.messages.is_none() {
            let (system, tokens) = self.plan.opening(index);
            let mut messages = Vec::new();
            if !system.is_empty() {
                messages.push(Message::new("system", system));
            }
            messages.push(user(&p.prompt));
            p.messages = Some(messages);
            p.input_tokens += tokens;
        }
        let body = self.body(&p, p.messages.as_deref(), &images);
        (p, body)
    }

    /// The body of planned request `p`, with `messages` when it is chat-shaped, and its
    /// images.
    fn body(&self, p: &PlannedRequest, messages: Option<&[Message]>, images: &[String]) -> Bytes {
        let w = &self.contract.workload;
        Bytes::from(self.client.adapter().body(&RequestSpec {
            model: p.model.as_deref().unwrap_or(&self.model),
            prompt: &p.prompt,
            messages,
            max_tokens: p.output_tokens,
            stream: w.stream,
            exact_output: w.enforce_output_length,
            sampling: &w.sampling,
            batch: w.batch,
            extra: Some(self.plan.extra_body(p)),
            images,
            tools: p.tools.as_ref().map(|t| &t.tools),
        }))
    }

    /// Resolves at `at_us` on the run's clock (the follow-up thread's precise wake-up), or
    /// false once `cancel` (or `drain_over`, when given) is: then nothing more is sent.
    async fn wake_at(
        &self,
        at_us: u64,
        cancel: &CancellationToken,
        drain_over: Option<&CancellationToken>,
    ) -> bool {
        let at = self.client.epoch() + Duration::from_micros(at_us);
        let follow_ups = self
            .follow_ups
            .get_or_init(|| FollowUps::start(self.realtime).ok());
        tokio::select! {
            () = cancel.cancelled() => false,
            () = async {
                match drain_over {
                    Some(d) => d.cancelled().await,
                    None => std::future::pending().await,
                }
            } => false,
            () = async {
                match follow_ups {
                    Some(f) => f.until(at).await,
                    // No thread could be started: tokio's timer, a millisecond coarser.
                    None => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                }
            } => true,
        }
    }

    /// Session `i`'s turns, its first already planned (`rec`, `body`): each later turn is sent
    /// at the answer before it plus its think time (its intended time, from which its latency
    /// counts; the slip is its dispatch lag) and carries the conversation so far, the answers
    /// as received. A turn that fails ends the session: its later turns are not sent, and the
    /// records say how many were planned (`turn`), so they are counted.
    async fn session(
        &self,
        i: u64,
        shape: SessionPlan,
        first: (PlannedRequest, Record, Bytes),
        tx: &UnboundedSender<Record>,
        (cancel, drain_over): (&CancellationToken, &CancellationToken),
        in_flight: &AtomicU32,
    ) {
        let (planned, first, body) = first;
        let phase = first.phase;
        let mut history = planned.messages.unwrap_or_default();
        // Tokens of the conversation so far, as planned and as answered.
        let mut so_far = planned.input_tokens;
        let mut prev_end = 0;
        let mut opening = Some((first, body));
        for t in 0..shape.turns {
            let (mut rec, body) = match opening.take() {
                Some(first) => first,
                None => {
                    // A drain session sends no turn once the last steady one has ended.
                    let drain = phase == Phase::Drain;
                    if drain && drain_over.is_cancelled() {
                        return;
                    }
                    let p = self.plan.turn(i, t);
                    history.push(user(&p.prompt));
                    let intended = prev_end + u64::from(shape.think_ms[t as usize - 1]) * 1000;
                    if !self
                        .wake_at(intended, cancel, drain.then_some(drain_over))
                        .await
                    {
                        return;
                    }
                    let mut rec = self.record(&p, phase);
                    rec.intended_us = Some(intended);
                    rec.dispatched_us = Some(self.client.now_us());
                    so_far += p.input_tokens;
                    rec.input_tokens_planned = so_far;
                    (rec, self.body(&p, Some(&history), &[]))
                }
            };
            rec.session = Some(i);
            rec.turn = Some((t, shape.turns));
            in_flight.fetch_add(1, Ordering::AcqRel);
            self.client.execute(body, &mut rec, cancel).await;
            in_flight.fetch_sub(1, Ordering::AcqRel);
            let answer = rec.answer.take();
            let ok = rec.is_ok();
            so_far += rec
                .usage_completion_tokens
                .unwrap_or(rec.client_output_tokens);
            prev_end = rec.end_us.unwrap_or_default();
            let _ = tx.send(rec);
            if !ok || cancel.is_cancelled() {
                return;
            }
            history.push(Message::new("assistant", answer.unwrap_or_default()));
        }
    }

    /// Runs the plan to its stop condition (or until `cancel`), sending records to `tx`.
    pub async fn drive(
        self: Arc<Self>,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        if let Some(k) = self.control.clone() {
            return self.live_loop(k, tx, cancel).await;
        }
        match self.contract.load.drive() {
            Drive::Open { max_in_flight, .. } => self.open_loop(max_in_flight, tx, cancel).await,
            Drive::Closed { users, think } => {
                let think = Duration::from_secs_f64(think.seconds());
                self.closed_loop(users, think, tx, cancel).await
            }
        }
    }

    async fn open_loop(
        self: Arc<Self>,
        cap: u32,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        let tracker = TaskTracker::new();
        let handle = tokio::runtime::Handle::current();
        let (me, t, c) = (self.clone(), tracker.clone(), cancel.clone());
        // The schedule is kept by a dedicated thread: `std::thread::sleep` wakes within tens of
        // microseconds, where tokio's timer wheel rounds every sleep up to the next millisecond.
        let dispatch = tokio::task::spawn_blocking(move || me.dispatch(cap, &handle, &t, &tx, &c));
        let mut out = dispatch.await.unwrap_or_else(|e| DriveOutcome {
            interrupted: true,
            failed: Some(format!("the dispatch thread failed: {e}")),
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
        cap: u32,
        handle: &tokio::runtime::Handle,
        tracker: &TaskTracker,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
    ) -> DriveOutcome {
        let mut out = DriveOutcome::default();
        let Some(arrivals) = self.plan.arrivals() else {
            return out;
        };
        let (built, ready) = match self.build_ahead(arrivals) {
            Ok(queue) => queue,
            Err(e) => {
                out.interrupted = true;
                out.failed = Some(format!(
                    "no thread could be started to build requests on: {e}"
                ));
                return out;
            }
        };
        // Until the queue is full, or the plan is built (the builder hung up).
        while let Err(RecvTimeoutError::Timeout) = ready.recv_timeout(Duration::from_millis(20)) {
            if cancel.is_cancelled() {
                out.interrupted = true;
                return out;
            }
        }
        let in_flight = Arc::new(AtomicU32::new(0));
        let steady_in_flight = Arc::new(AtomicU64::new(0));
        // The drain ends with the last steady request (or session): then no drain session
        // sends another turn.
        let steady_sent = Arc::new(AtomicBool::new(false));
        let drain_over = CancellationToken::new();
        let mut phaser = Phaser::new(self.plan.rules());
        let mut drain = DrainCount::default();
        let (_precise, scheduled) = PreciseSleeps::on_this_thread(self.realtime);
        out.dispatch_thread = Some(scheduled);
        let epoch = self.client.epoch();
        // The schedule starts now (a shard: at the common start instant): intended times are
        // offsets from here on the run's clock (which may have started earlier, at a cold-start
        // launch).
        let origin = self.start_us.unwrap_or_else(|| self.client.now_us());
        if let Some(edge) = self.plan.edge() {
            edge.started(epoch + Duration::from_micros(origin));
        }
        let next = || match built.try_recv() {
            Ok(b) => Some((b, false)),
            Err(TryRecvError::Empty) => built.recv().ok().map(|b| (b, true)),
            Err(TryRecvError::Disconnected) => None,
        };
        while let Some(((scheduled, built), waited)) = next() {
            // Every arrival of the plan is labelled, so shards label phases alike; a shard
            // sends its own.
            let phase = self.label(&mut phaser, scheduled);
            let last_steady = phaser.steady_done();
            if last_steady {
                steady_sent.store(true, Ordering::Release);
            }
            drain.note(phase, last_steady, || in_flight.load(Ordering::Acquire));
            if phase == Phase::Drain {
                self.window.end();
            }
            if phase == Phase::Drain && steady_in_flight.load(Ordering::Acquire) == 0 {
                drain_over.cancel();
                break;
            }
            let Some((planned, body)) = built else {
                continue;
            };
            let at = origin + scheduled.at_us;
            // The builder kept this request past its time.
            out.built_late += u64::from(waited && self.client.now_us() > at);
            if !sleep_until(epoch + Duration::from_micros(at), cancel) {
                out.interrupted = true;
                break;
            }
            // The last steady request may have ended while this one waited for its time.
            if phase == Phase::Drain && steady_in_flight.load(Ordering::Acquire) == 0 {
                drain_over.cancel();
                break;
            }
            let woke = self.client.now_us();
            if let Err(cut) = drain.admit(phase, woke) {
                out.drain_cut = Some(cut);
                break;
            }
            let mut rec = self.record(&planned, phase);
            rec.intended_us = Some(at);
            rec.dispatched_us = Some(woke);
            out.dispatched += 1;
            if in_flight.load(Ordering::Acquire) >= cap {
                rec.fail(
                    Outcome::ClientDropped,
                    format!("{cap} requests were in flight (load.max_in_flight)"),
                    woke,
                );
                out.dropped += 1;
                let _ = tx.send(rec);
            } else {
                in_flight.fetch_add(1, Ordering::AcqRel);
                let steady = phase == Phase::Steady;
                if steady {
                    steady_in_flight.fetch_add(1, Ordering::AcqRel);
                }
                let index = planned.index;
                self.pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(index, (phase, at));
                let (me, tx, cancel) = (self.clone(), tx.clone(), cancel.clone());
                let (in_flight, steady_in_flight) = (in_flight.clone(), steady_in_flight.clone());
                let (steady_sent, drain_over) = (steady_sent.clone(), drain_over.clone());
                tracker.spawn_on(
                    async move {
                        let first = (planned, rec, body);
                        let ends = (&cancel, &drain_over);
                        me.arrival(first, &tx, ends, &in_flight).await;
                        me.ended(index);
                        if steady
                            && steady_in_flight.fetch_sub(1, Ordering::AcqRel) == 1
                            && steady_sent.load(Ordering::Acquire)
                        {
                            drain_over.cancel();
                        }
                    },
                    handle,
                );
            }
            self.window.sent(phase, last_steady);
        }
        if steady_sent.load(Ordering::Acquire) && steady_in_flight.load(Ordering::Acquire) == 0 {
            drain_over.cancel();
        }
        self.window.end();
        out
    }

    /// One open-loop arrival, sent: a request, a session's turns or a task's calls. A session
    /// or a task counts as one request in flight while it starts, then each of its requests as
    /// one while it is sent.
    async fn arrival(
        &self,
        (planned, mut rec, body): (PlannedRequest, Record, Bytes),
        tx: &UnboundedSender<Record>,
        (cancel, drain_over): (&CancellationToken, &CancellationToken),
        in_flight: &AtomicU32,
    ) {
        let i = planned.index;
        match (self.plan.session(i), self.plan.task(i)) {
            (_, Some(shape)) => {
                in_flight.fetch_sub(1, Ordering::AcqRel);
                let run = task::TaskRun {
                    i,
                    shape,
                    phase: rec.phase,
                    origin: rec.intended_us.unwrap_or_default(),
                    tx,
                    cancel,
                    drain_over,
                    in_flight,
                };
                self.task(run, (planned, rec, body)).await;
            }
            (Some(shape), None) => {
                in_flight.fetch_sub(1, Ordering::AcqRel);
                let first = (planned, rec, body);
                self.session(i, shape, first, tx, (cancel, drain_over), in_flight)
                    .await;
            }
            (None, None) => {
                self.client.execute(body, &mut rec, cancel).await;
                in_flight.fetch_sub(1, Ordering::AcqRel);
                let _ = tx.send(rec);
            }
        }
    }

    /// Request `index` is no longer in flight: the rule that stops a decided run stops
    /// counting it.
    fn ended(&self, index: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&index);
        self.first_tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&index);
    }

    /// The phase of the schedule's next arrival: as the phaser labels it, with warm-up's end
    /// (`until_stable`) and the measured phase's (`[measurement.stop]`) as the collector saw
    /// them.
    fn label(&self, phaser: &mut Phaser, scheduled: Scheduled) -> Phase {
        if self.known.load(Ordering::Acquire) {
            phaser.end_steady();
        }
        phaser.next_scheduled(scheduled, self.stable.load(Ordering::Acquire))
    }

    /// Builds open-loop requests ahead, on a thread of their own: a prompt built with a
    /// `tokenizer.json` costs about a microsecond per token, more than the gap between arrivals
    /// at high rates, and the schedule must not wait for it. Returns the queue, up to
    /// [`build_ahead_len`] long, and a signal sent when it is first full (dropped when the plan
    /// ends first). The builder stops when the queue's receiver is dropped.
    fn build_ahead(
        self: &Arc<Self>,
        arrivals: ArrivalGen,
    ) -> std::io::Result<(Receiver<Built>, Receiver<()>)> {
        let len = build_ahead_len(&self.contract, self.plan.inputs());
        let (built_tx, built) = std::sync::mpsc::sync_channel(len);
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let me = self.clone();
        std::thread::Builder::new()
            .name("goodput-build".into())
            .spawn(move || {
                let mut arrivals = arrivals;
                for i in 0u64.. {
                    let Some(at) = arrivals.next_scheduled() else {
                        return;
                    };
                    let own = me.plan.owns(i).then(|| {
                        let (mut p, body) = me.prepare(i);
                        p.stage = at.stage.and_then(|k| me.plan.stage_name(k));
                        p.stage_rps = at.rps;
                        (p, body)
                    });
                    if built_tx.send((at, own)).is_err() {
                        return; // the schedule is over
                    }
                    if i + 1 == len as u64 {
                        let _ = ready_tx.send(());
                    }
                }
            })?;
        Ok((built, ready))
    }

    async fn closed_loop(
        self: Arc<Self>,
        users: u32,
        think: Duration,
        tx: UnboundedSender<Record>,
        cancel: CancellationToken,
    ) -> DriveOutcome {
        let shared = Arc::new(ClosedState {
            users: u64::from(users),
            think,
            origin: self.client.now_us(),
            next_index: AtomicU64::new(0),
            phaser: Mutex::new(Phaser::new(self.plan.rules())),
            steady_in_flight: AtomicU64::new(0),
            dispatched: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            drain_cut: Mutex::new(None),
        });
        let tracker = TaskTracker::new();
        for _ in 0..users {
            let (me, tx, cancel, shared) =
                (self.clone(), tx.clone(), cancel.clone(), shared.clone());
            tracker.spawn(async move { me.user(&shared, &tx, &cancel).await });
        }
        tracker.close();
        tracker.wait().await;
        self.window.end();
        DriveOutcome {
            dispatched: shared.dispatched.load(Ordering::Acquire),
            dropped: 0,
            interrupted: cancel.is_cancelled(),
            drain_cut: *shared.drain_cut.lock().unwrap_or_else(|p| p.into_inner()),
            ..DriveOutcome::default()
        }
    }

    /// One closed-loop user: send, wait for the answer, think, repeat until the stop condition.
    async fn user(
        &self,
        st: &ClosedState,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
    ) {
        let think = st.think;
        loop {
            if cancel.is_cancelled() {
                return;
            }
            let since = self.client.now_us().saturating_sub(st.origin);
            let (phase, last_steady) = {
                let mut p = st.phaser.lock().unwrap_or_else(|p| p.into_inner());
                if self.known.load(Ordering::Acquire) {
                    p.end_steady();
                }
                let phase = p.next(since, self.stable.load(Ordering::Acquire));
                (phase, p.steady_done())
            };
            if phase == Phase::Drain {
                self.window.end();
            }
            if phase == Phase::Drain && st.steady_in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            // The drain keeps the users going at most twice round (what is in flight at the
            // steady phase's end is the users).
            let bound = guard::drain_bound(st.users);
            if phase == Phase::Drain && st.drained.fetch_add(1, Ordering::AcqRel) >= bound {
                st.drain_cut
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(guard::DrainCut {
                        bound,
                        in_flight_at_steady_end: st.users,
                        at_us: self.client.now_us(),
                    });
                return;
            }
            let steady = phase == Phase::Steady;
            if steady {
                st.steady_in_flight.fetch_add(1, Ordering::AcqRel);
            }
            let i = st.next_index.fetch_add(1, Ordering::AcqRel);
            let (planned, body) = self.prepare(i);
            let mut rec = self.record(&planned, phase);
            st.dispatched.fetch_add(1, Ordering::AcqRel);
            self.window.sent(phase, last_steady);
            self.client.execute(body, &mut rec, cancel).await;
            let _ = tx.send(rec);
            if steady {
                st.steady_in_flight.fetch_sub(1, Ordering::AcqRel);
            }
            if !think.is_zero() {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(think) => {}
                }
            }
        }
    }

    /// Requests sent one after another before the load, labelled `phase`: the cold-start
    /// requests and the warm prefixes. Their plan indices start at `first`, far above the run's,
    /// so they never collide.
    pub async fn sequential(
        &self,
        first: u64,
        n: u64,
        phase: Phase,
        tx: &UnboundedSender<Record>,
        cancel: &CancellationToken,
    ) {
        for k in 0..n {
            if cancel.is_cancelled() {
                return;
            }
            let (planned, body) = self.prepare(first + k);
            let mut rec = self.record(&planned, phase);
            self.client.execute(body, &mut rec, cancel).await;
            let _ = tx.send(rec);
        }
    }
}

/// The open loop's drain: the arrivals it sent, and the most it may send
/// ([`guard::drain_bound`] of what was in flight when the last steady request was sent).
#[derive(Debug, Default)]
struct DrainCount {
    sent: u64,
    /// The bound and what was in flight it rests on.
    bound: Option<(u64, u64)>,
}

impl DrainCount {
    /// The schedule labelled an arrival `phase`: the bound is set with the last steady one
    /// (a duration-bound steady phase: with the first drain one), from what is in flight.
    fn note(&mut self, phase: Phase, last_steady: bool, in_flight: impl Fn() -> u32) {
        if (last_steady || phase == Phase::Drain) && self.bound.is_none() {
            let n = u64::from(in_flight());
            self.bound = Some((guard::drain_bound(n), n));
        }
    }

    /// Whether an arrival labelled `phase` may go at `now`: every one but a drain arrival past
    /// the bound, which ends the drain there.
    fn admit(&mut self, phase: Phase, now: u64) -> Result<(), guard::DrainCut> {
        if phase != Phase::Drain {
            return Ok(());
        }
        if let Some((bound, base)) = self.bound.filter(|(b, _)| self.sent >= *b) {
            return Err(guard::DrainCut {
                bound,
                in_flight_at_steady_end: base,
                at_us: now,
            });
        }
        self.sent += 1;
        Ok(())
    }
}

/// A user message.
/// Request `p`'s images made (generated, or read from the workload's folder) as `data:` URIs,
/// and what was made written on `p` (bytes, hash; or why one could not be, and then the
/// request is not sent). They live as long as the request's body.
pub fn image_uris(inputs: &crate::workload::Inputs, p: &mut PlannedRequest) -> Vec<String> {
    use crate::workload::images;
    let mut uris = Vec::with_capacity(p.images.len());
    for i in &mut p.images {
        let made = match i.file {
            Some(k) => inputs
                .images
                .get(k as usize)
                .ok_or_else(|| format!("image file {k} is not in the folder"))
                .and_then(images::read_file),
            None => images::generate(i.width, i.height, i.pixels),
        };
        match made {
            Ok(e) => {
                i.bytes = Some(e.data.len() as u64);
                i.sha256 = Some(e.short_hash());
                uris.push(e.data_uri());
            }
            Err(why) => i.error = Some(why),
        }
    }
    uris
}

fn user(text: &str) -> Message {
    Message::new("user", text)
}

/// Open-loop requests built ahead of the schedule (bodies, typically a few KB each).
const BUILD_AHEAD: usize = 256;

/// Bytes the queue of requests built ahead may hold, at most: long-context prompts (a 1M-token
/// prompt is ~6 MB) would otherwise hold gigabytes.
const BUILD_AHEAD_BYTES: usize = 256 << 20;

/// How many requests to build ahead: [`BUILD_AHEAD`], fewer when the longest prompt asked for
/// would make that more than [`BUILD_AHEAD_BYTES`] (8 bytes a token, generous for English text
/// and the synthetic words), and never fewer than 4 (2 for an edge search).
fn build_ahead_len(c: &Contract, inputs: &crate::workload::Inputs) -> usize {
    // An edge search's schedule waits on verdicts: what is built ahead of one is sent before
    // the next step can start, so little is.
    if c.load.edge().is_some() {
        return 2;
    }
    let longest = crate::plan::requested_lengths(c, inputs, true)
        .and_then(|v| v.into_iter().max())
        .unwrap_or(0) as usize;
    (BUILD_AHEAD_BYTES / (longest * 8 + 1024 + images_bytes(c, inputs))).clamp(4, BUILD_AHEAD)
}

/// The most bytes a request's images can add to its body: its most images, each the largest
/// the workload sends, as base64 (4 bytes for 3).
fn images_bytes(c: &Contract, inputs: &crate::workload::Inputs) -> usize {
    let Some(i) = &c.workload.images else {
        return 0;
    };
    let largest = if inputs.images.is_empty() {
        // A generated PNG: its pixels' bytes, a filter byte a row, and its chunks' framing.
        i.parsed_sizes()
            .iter()
            .map(|&(w, h)| (w as usize * 3 + 1) * h as usize + 4096)
            .max()
            .unwrap_or(0)
    } else {
        inputs
            .images
            .iter()
            .map(|f| f.bytes as usize)
            .max()
            .unwrap_or(0)
    };
    i.most() as usize * largest / 3 * 4
}

/// A request built ahead: its offset in the schedule (µs), the plan's entry and the body.
type Built = (Scheduled, Option<(PlannedRequest, Bytes)>);

/// First plan index of cold-start requests.
pub const COLD_START_INDEX: u64 = 1 << 40;

/// While alive, the calling thread's sleeps end as close to their deadline as the kernel can:
/// Linux otherwise lets a sleep overrun by the thread's timer slack (50 µs by default) to batch
/// wake-ups, which is a third of the dispatch lag's median on an idle machine.
///
/// With `realtime`, the thread also asks for `SCHED_FIFO` at the lowest real-time priority (1):
/// a woken normal thread waits its turn behind every runnable thread of its CPU, which on a
/// 2-core machine shared with the server (or with other tests) made sleeps of 0.2 ms overrun by
/// 0.5–0.8 ms at p99, against 25 µs at real-time priority in the same minutes. Priority 1 is
/// below every other real-time thread (the kernel's own, a server's), and the kernel caps
/// real-time threads at 95% of each second (`sched_rt_runtime_us`), so a bug cannot take a CPU
/// for good. Without the permission (`CAP_SYS_NICE` or `ulimit -r`), the thread stays a normal
/// one and the status says why. The thread is a pooled blocking thread, so both are restored on
/// drop. Elsewhere than Linux, a no-op.
struct PreciseSleeps {
    realtime: bool,
}

impl PreciseSleeps {
    /// Also returns how the thread is scheduled.
    fn on_this_thread(realtime: bool) -> (PreciseSleeps, Priority) {
        set_timer_slack_ns(1);
        let priority = match realtime.then(|| set_fifo(true)) {
            Some(Ok(())) => Priority::RealTime,
            Some(Err(e)) => Priority::Normal(format!("SCHED_FIFO not granted: {e}")),
            None => Priority::Normal("declined (--no-wake-latency-hold)".to_owned()),
        };
        let realtime = priority == Priority::RealTime;
        (PreciseSleeps { realtime }, priority)
    }
}

impl Drop for PreciseSleeps {
    fn drop(&mut self) {
        set_timer_slack_ns(0); // 0 restores the thread's default
        if self.realtime {
            let _ = set_fifo(false);
        }
    }
}

/// Puts the calling thread in `SCHED_FIFO` at priority 1 (`on`), or back in `SCHED_OTHER`.
#[cfg(target_os = "linux")]
fn set_fifo(on: bool) -> std::io::Result<()> {
    let (policy, priority) = if on {
        (libc::SCHED_FIFO, 1)
    } else {
        (libc::SCHED_OTHER, 0)
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `pthread_self` is the calling thread, alive for the call; `param` outlives it.
    match unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy, &param) } {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn set_fifo(_on: bool) -> std::io::Result<()> {
    Err(std::io::Error::other("only on Linux"))
}

#[cfg(target_os = "linux")]
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread; a
    // failure leaves the default slack, which is merely less precise.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns) };
}

#[cfg(not(target_os = "linux"))]
fn set_timer_slack_ns(_ns: u64) {}

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
    /// The closed loop's users, and each one's pause between an answer and its next request.
    users: u64,
    think: Duration,
    /// When the loop started, µs on the run's clock.
    origin: u64,
    next_index: AtomicU64,
    /// Locked once per request (closed loop sends at the server's pace, far from hot).
    phaser: Mutex<Phaser>,
    steady_in_flight: AtomicU64,
    dispatched: AtomicU64,
    /// Drain requests sent, and when the drain reached its bound.
    drained: AtomicU64,
    drain_cut: Mutex<Option<guard::DrainCut>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_prompts_are_built_fewer_at_a_time() {
        let len = |input: &str| {
            let src = format!(
                "[workload]\ninput_tokens = {input}\n[load]\nmodel = \"open\"\nrate = 1\nrequests = 3\n"
            );
            let (c, inputs) = crate::workload::parse(&src, std::path::Path::new("c.toml")).unwrap();
            build_ahead_len(&c, &inputs)
        };
        assert_eq!(len("{ dist = \"fixed\", value = 2000 }"), BUILD_AHEAD);
        // Bounded by the longest prompts drawn, not the typical one.
        let wide = len("{ dist = \"uniform\", min = 10, max = 1000000 }");
        assert_eq!(wide, BUILD_AHEAD_BYTES / (8_000_000 + 1024));
        assert!(wide * 6_000_000 < BUILD_AHEAD_BYTES, "{wide}");
        assert_eq!(len("{ dist = \"fixed\", value = 10000000 }"), 4);
    }

    /// The calling thread's scheduling policy.
    #[cfg(target_os = "linux")]
    fn policy() -> libc::c_int {
        let mut policy = 0;
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: the calling thread, and both out-pointers live for the call.
        let e =
            unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
        assert_eq!(e, 0);
        policy
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_schedules_thread_is_real_time_when_allowed_says_why_not_and_is_given_back() {
        // Its own thread: the test harness's thread is left as it was either way.
        std::thread::spawn(|| {
            let (held, status) = PreciseSleeps::on_this_thread(true);
            match &status {
                Priority::RealTime => assert_eq!(policy(), libc::SCHED_FIFO, "{status:?}"),
                Priority::Normal(why) => {
                    assert!(why.contains("not granted"), "{status:?}");
                    assert_eq!(policy(), libc::SCHED_OTHER);
                }
            }
            drop(held);
            assert_eq!(policy(), libc::SCHED_OTHER);
            let (_held, status) = PreciseSleeps::on_this_thread(false);
            assert_eq!(
                status,
                Priority::Normal("declined (--no-wake-latency-hold)".to_owned())
            );
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
