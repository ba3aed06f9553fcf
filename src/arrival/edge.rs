//! The rate search for an SLA edge: bracket then bisect ([`Bracket`]), the one search both
//! `sweep --capacity` (a run per rate) and an in-run edge (`shape = "edge"`: a step per rate)
//! take; and the in-run edge's arrivals ([`EdgeRun`]), steered by the verdicts the collector
//! posts ([`EdgeControl`]).
//!
//! An in-run step is `requests` arrivals at its rate. Its verdict needs every one of them
//! finished, so the load holds the step's rate meanwhile (a `wait`: the step's last requests
//! are measured under the load they were sent into), then stops until the wait's own requests
//! have finished (the next step starts on an idle server, as a sweep's next run would: a step
//! after an overloaded one must not inherit its queue), then the next step starts at the rate
//! the search asks for. A step the warm-up covered has no verdict: its rate runs again.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{Arrival, Params, Process};

/// How one rate (a sweep's run, an edge's step) came out, for the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointOutcome {
    /// Met the SLO and VALID.
    pub passed: bool,
    /// Passed, and its sample supports the pass at the contract's confidence.
    pub supported: bool,
    /// The client fell behind its schedule (INVALID for its dispatch lag).
    pub client_behind: bool,
    /// The SLO was met, valid or not.
    pub slo_met: bool,
    /// The server's queue grew all run (INVALID for overload): the server failed the rate,
    /// whatever the client did.
    pub overloaded: bool,
}

impl PointOutcome {
    /// Judged by `passed` alone, a pass supported (a ground truth, a test).
    pub fn passed(passed: bool) -> PointOutcome {
        PointOutcome {
            passed,
            supported: passed,
            client_behind: false,
            slo_met: passed,
            overloaded: false,
        }
    }
}

/// Where a search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Searched {
    /// Highest rate (req/s) that passed; `None` when every rate tried failed.
    pub capacity_rps: Option<f64>,
    /// Highest passing rate whose sample supports its pass.
    pub supported_rps: Option<f64>,
    /// Lowest rate that failed; `None` when none did within the budget.
    pub failed_at_rps: Option<f64>,
    /// Relative width of the final bracket, (failed − capacity) / failed.
    pub resolution: Option<f64>,
    /// Rates tried, in order, with whether each passed.
    pub tried: Vec<(f64, bool)>,
    /// A rate near the answer whose client fell behind its schedule.
    pub client_limited: bool,
    /// The rate at which the search stopped because the SLO was met but the client fell
    /// behind: no rate at or above it measures the server with this client.
    pub stopped_by_client_at: Option<f64>,
    /// Rates tried again because the first time only the client fell behind (the SLO met).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_for_client: Vec<f64>,
}

/// Brackets then bisects the rate at which a pass turns to a fail: doubling (or halving) from
/// `start` until the outcome flips, then halving the bracket until it is narrower than
/// `resolution` (relative) or `max` rates have been tried.
///
/// A rate that fails only because the client fell behind its schedule, the server meeting the
/// SLO with no queue growing all run, is tried once more, and failing so again ends the search
/// there: every lower rate would find the client's limit, not the server's (on a machine
/// waking its threads milliseconds late, a search went on halving to 2 req/s, each point
/// minutes long). Once more, because a lone late wake-up is not the client's limit: on an idle
/// 2-core VM a 6 ms sleep took 13 ms about once in 2,000 arrivals, and in an 80-request step
/// that one request is its p99.
#[derive(Debug, Clone)]
pub struct Bracket {
    resolution: f64,
    max: usize,
    lo: Option<f64>,
    hi: Option<f64>,
    supported: Option<f64>,
    tried: Vec<(f64, bool)>,
    client_limited: bool,
    stopped_by_client_at: Option<f64>,
    retried_for_client: Vec<f64>,
    next: Option<f64>,
}

impl Bracket {
    pub fn new(start: f64, resolution: f64, max: usize) -> Bracket {
        Bracket {
            resolution,
            max,
            lo: None,
            hi: None,
            supported: None,
            tried: Vec::new(),
            client_limited: false,
            stopped_by_client_at: None,
            retried_for_client: Vec::new(),
            next: (max > 0).then_some(start),
        }
    }

    /// The rate to try next; `None`: the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// How the rate tried came out.
    pub fn observe(&mut self, rate: f64, p: PointOutcome) {
        self.tried.push((rate, p.passed));
        let client_only = !p.passed && p.client_behind && p.slo_met && !p.overloaded;
        if client_only && self.tried.len() < self.max && !self.retried_for_client.contains(&rate) {
            // Once more at this rate before the client is taken to be the limit.
            self.retried_for_client.push(rate);
            self.next = Some(rate);
            return;
        }
        if p.passed {
            self.lo = Some(self.lo.map_or(rate, |l| l.max(rate)));
            if p.supported {
                self.supported = Some(self.supported.map_or(rate, |s| s.max(rate)));
            }
        } else {
            self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
            self.client_limited |= p.client_behind;
            if client_only {
                self.stopped_by_client_at = Some(rate);
                self.next = None;
                return;
            }
        }
        self.next = match (self.lo, self.hi) {
            _ if self.tried.len() >= self.max => None,
            (Some(l), None) => Some(l * 2.0),
            (None, Some(h)) => Some(h / 2.0),
            (Some(l), Some(h)) if (h - l) / h > self.resolution => Some((l + h) / 2.0),
            _ => None,
        };
    }

    /// A passing rate refuted by a larger run at it (a capacity's confirmation, which counts
    /// as a run): it fails from now on, the bracket's top comes down to it, its bottom to the
    /// highest rate below it that passed, and the search goes on toward the resolution while
    /// runs remain.
    pub fn refute(&mut self, rate: f64) {
        for t in self.tried.iter_mut().filter(|t| (t.0 - rate).abs() < 1e-9) {
            t.1 = false;
        }
        self.tried.push((rate, false));
        let below = |r: f64| r < rate - 1e-9;
        self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
        self.lo = self
            .tried
            .iter()
            .filter(|(r, p)| *p && below(*r))
            .map(|(r, _)| *r)
            .reduce(f64::max);
        self.supported = self.supported.filter(|s| below(*s));
        self.next = match (self.lo, self.hi) {
            _ if self.tried.len() >= self.max => None,
            (None, Some(h)) => Some(h / 2.0),
            (Some(l), Some(h)) if (h - l) / h > self.resolution => Some((l + h) / 2.0),
            _ => None,
        };
    }

    /// A passing rate whose larger run (a confirmation, which counts as a run) passed too,
    /// supporting the pass or not.
    pub fn confirmed(&mut self, rate: f64, supported: bool) {
        self.tried.push((rate, true));
        if supported {
            self.supported = Some(self.supported.map_or(rate, |s| s.max(rate)));
        }
    }

    /// Runs left in the budget.
    pub fn runs_left(&self) -> usize {
        self.max.saturating_sub(self.tried.len())
    }

    pub fn result(&self) -> Searched {
        Searched {
            capacity_rps: self.lo,
            supported_rps: self.supported,
            failed_at_rps: self.hi,
            resolution: self.lo.zip(self.hi).map(|(l, h)| (h - l) / h),
            tried: self.tried.clone(),
            client_limited: self.client_limited,
            stopped_by_client_at: self.stopped_by_client_at,
            retried_for_client: self.retried_for_client.clone(),
        }
    }
}

/// An edge search's spec and the control its schedule and its judge share.
pub type Steered = (EdgeSpec, Arc<EdgeControl>);

/// Step `n` (from 1) of the edge search `edge`, and the wait that follows it: `edge.3`,
/// `edge.3.wait`. [`parse_step`] reads them back.
pub fn step_name(edge: &str, n: u32) -> String {
    format!("{edge}.{n}")
}

pub fn wait_name(edge: &str, n: u32) -> String {
    format!("{edge}.{n}.wait")
}

/// The step a record's stage name is of, and whether it is its wait; `None`: not a step of
/// `edge`.
pub fn parse_step(edge: &str, name: &str) -> Option<(u32, bool)> {
    let rest = name.strip_prefix(edge)?.strip_prefix('.')?;
    match rest.strip_suffix(".wait") {
        Some(n) => Some((n.parse().ok()?, true)),
        None => Some((rest.parse().ok()?, false)),
    }
}

/// An in-run edge as the plan runs it.
#[derive(Debug, Clone)]
pub struct EdgeSpec {
    /// The stage's name; its steps are `name.1`, `name.2`, …, their waits `name.1.wait`, ….
    pub name: String,
    pub start_rps: f64,
    /// Arrivals per step.
    pub requests: u64,
    pub resolution: f64,
    pub max_steps: u32,
    pub arrival: Arrival,
    pub burstiness: f64,
    /// The program's stage index of the first step (the fixed stages before it come first).
    pub first_stage: u32,
}

impl EdgeSpec {
    /// Step `n`'s (from 1) stage index, and its wait's (the next).
    pub fn stage_of(&self, n: u32) -> u32 {
        self.first_stage + 2 * (n - 1)
    }

    /// Stage index `k`'s name, and whether it is a wait; `None` before the edge.
    pub fn name_of(&self, k: u32) -> Option<String> {
        let i = k.checked_sub(self.first_stage)?;
        let n = i / 2 + 1;
        Some(if i % 2 == 0 {
            step_name(&self.name, n)
        } else {
            wait_name(&self.name, n)
        })
    }
}

/// One step as the control keeps it.
#[derive(Debug, Default)]
struct Step {
    rate: f64,
    /// Its arrivals, once its last is scheduled; its wait's, once the wait ends.
    arrivals: Option<u64>,
    wait_arrivals: Option<u64>,
    /// Wait records finished so far.
    wait_finished: u64,
    /// Its verdict: `Some(None)` when it had nothing measured to judge (the warm-up).
    verdict: Option<Option<PointOutcome>>,
}

/// What the arrivals of an in-run edge and the collector that judges its steps share: the
/// schedule registers each step and its wait, the collector posts each step's verdict and says
/// when its wait's requests have all finished, and the dispatch thread sets the clock the
/// schedule's times count from.
#[derive(Debug, Default)]
pub struct EdgeControl {
    steps: Mutex<Vec<Step>>,
    changed: Condvar,
    /// The instant the schedule's time 0 is (set when dispatch starts).
    origin: OnceLock<Instant>,
    /// The collector is gone: nothing more will be judged.
    closed: std::sync::atomic::AtomicBool,
}

impl EdgeControl {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Step>> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The schedule's time 0 is now `at`.
    pub fn started(&self, at: Instant) {
        let _ = self.origin.set(at);
    }

    /// Seconds since the schedule's time 0; `None` before dispatch started.
    fn now_s(&self) -> Option<f64> {
        self.origin.get().map(|o| o.elapsed().as_secs_f64())
    }

    /// A record of step `n`'s wait finished: the schedule waiting for an idle server may go on.
    pub fn wait_finished(&self, n: u32) {
        let mut steps = self.lock();
        if let Some(s) = steps.get_mut(n.saturating_sub(1) as usize) {
            s.wait_finished += 1;
            if s.wait_arrivals.is_some_and(|a| s.wait_finished >= a) {
                self.changed.notify_all();
            }
        }
    }

    /// Step `n`'s arrivals, once its last is scheduled.
    pub fn arrivals(&self, n: u32) -> Option<u64> {
        self.lock().get(n.checked_sub(1)? as usize)?.arrivals
    }

    /// Step `n`'s rate.
    pub fn rate(&self, n: u32) -> Option<f64> {
        self.lock().get(n.checked_sub(1)? as usize).map(|s| s.rate)
    }

    /// Step `n`'s verdict (`None`: nothing measured to judge).
    pub fn judged(&self, n: u32, outcome: Option<PointOutcome>) {
        if let Some(s) = self.lock().get_mut(n as usize - 1) {
            s.verdict.get_or_insert(outcome);
        }
        self.changed.notify_all();
    }

    /// The collector has ended: a schedule waiting on it goes on.
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.changed.notify_all();
    }

    fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn begin(&self, rate: f64) -> u32 {
        let mut steps = self.lock();
        steps.push(Step {
            rate,
            ..Step::default()
        });
        steps.len() as u32
    }

    fn verdict(&self, n: u32) -> Option<Option<PointOutcome>> {
        self.lock().get(n as usize - 1).and_then(|s| s.verdict)
    }

    fn set_arrivals(&self, n: u32, arrivals: u64, wait: bool) {
        if let Some(s) = self.lock().get_mut(n as usize - 1) {
            if wait {
                s.wait_arrivals = Some(arrivals);
            } else {
                s.arrivals = Some(arrivals);
            }
        }
        self.changed.notify_all();
    }

    /// Blocks until step `n`'s wait has no request in flight (or the collector is gone).
    fn settle(&self, n: u32) {
        let mut steps = self.lock();
        loop {
            let s = &steps[n as usize - 1];
            if self.closed() || s.wait_arrivals.is_some_and(|a| s.wait_finished >= a) {
                return;
            }
            steps = self
                .changed
                .wait_timeout(steps, Duration::from_millis(200))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Sending step `n`'s `requests`.
    Step,
    /// Holding its rate until its verdict.
    Wait,
    /// The search is over: the drain, at the last rate, unlabelled.
    Done,
}

/// An in-run edge's arrivals: steps at the rates the search asks for, each followed by its wait.
#[derive(Debug)]
pub struct EdgeRun {
    spec: EdgeSpec,
    control: Arc<EdgeControl>,
    bracket: Bracket,
    process: Box<dyn Process>,
    /// The process's last draw (µs of rate-1 time).
    last: u64,
    /// Seconds from the program's start of the last arrival.
    t: f64,
    mode: Mode,
    /// The step in force (from 1), its rate, its arrivals and its wait's so far.
    n: u32,
    rate: f64,
    sent: u64,
    waited: u64,
    /// The next arrival is a step's first: at `t` itself.
    fresh: bool,
    /// Steps taken (a step the warm-up covered counts, and runs its rate again).
    taken: u32,
}

/// Seconds between the moment the search knows its next rate and that step's first arrival:
/// time to build its first request.
const LEAD_S: f64 = 0.02;

impl EdgeRun {
    /// The edge, starting at `t` seconds into the program.
    pub fn new(spec: EdgeSpec, control: Arc<EdgeControl>, t: f64, rng: &mut ChaCha8Rng) -> Self {
        let mut process = spec.arrival.process(&Params {
            rate: 1.0,
            shape: spec.burstiness,
            trace_us: Default::default(),
            pinned: None,
        });
        let last = process.next_us(rng).unwrap_or(0);
        let bracket = Bracket::new(spec.start_rps, spec.resolution, spec.max_steps as usize);
        let n = control.begin(spec.start_rps);
        EdgeRun {
            rate: spec.start_rps,
            spec,
            control,
            bracket,
            process,
            last,
            t,
            mode: Mode::Step,
            n,
            sent: 0,
            waited: 0,
            fresh: true,
            taken: 0,
        }
    }

    /// The rate-1 gap to the next arrival, spent at the rate in force.
    fn advance(&mut self, rng: &mut ChaCha8Rng) {
        if self.fresh {
            self.fresh = false;
            return;
        }
        let at = self.process.next_us(rng).unwrap_or(self.last + 1_000_000);
        self.t += at.saturating_sub(self.last) as f64 / 1e6 / self.rate;
        self.last = at;
    }

    /// The next arrival: seconds from the program's start, its stage index (`None`: the
    /// drain after the search) and the rate it was offered at.
    pub fn next(&mut self, rng: &mut ChaCha8Rng) -> (f64, Option<u32>, f64) {
        loop {
            match self.mode {
                Mode::Step => {
                    self.advance(rng);
                    self.sent += 1;
                    if self.sent >= self.spec.requests {
                        self.control.set_arrivals(self.n, self.sent, false);
                        self.mode = Mode::Wait;
                    }
                    return (self.t, Some(self.spec.stage_of(self.n)), self.rate);
                }
                Mode::Wait => {
                    let Some(verdict) = self.control.verdict(self.n) else {
                        self.advance(rng);
                        self.waited += 1;
                        return (self.t, Some(self.spec.stage_of(self.n) + 1), self.rate);
                    };
                    self.control.set_arrivals(self.n, self.waited, true);
                    self.next_step(verdict);
                }
                Mode::Done => {
                    self.advance(rng);
                    return (self.t, None, self.rate);
                }
            }
        }
    }

    /// Step `n` came out `verdict`: the search's next rate, once the wait has settled.
    fn next_step(&mut self, verdict: Option<PointOutcome>) {
        self.taken += 1;
        let next = match verdict {
            Some(outcome) => {
                self.bracket.observe(self.rate, outcome);
                self.bracket.next_rate()
            }
            // Nothing measured (the warm-up covered it): the same rate again.
            None => Some(self.rate),
        };
        let Some(rate) = next.filter(|_| self.taken < self.spec.max_steps + 2) else {
            self.mode = Mode::Done;
            return;
        };
        self.control.settle(self.n);
        if let Some(now) = self.control.now_s() {
            self.t = self.t.max(now + LEAD_S);
        }
        self.rate = rate;
        self.n = self.control.begin(rate);
        self.sent = 0;
        self.waited = 0;
        self.fresh = true;
        self.mode = Mode::Step;
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn spec() -> EdgeSpec {
        EdgeSpec {
            name: "edge".into(),
            start_rps: 10.0,
            requests: 5,
            resolution: 0.05,
            max_steps: 10,
            arrival: Arrival::Constant,
            burstiness: 1.0,
            first_stage: 1,
        }
    }

    /// A rate whose client fell behind while the server's queue grew all run failed for the
    /// server too: the search goes below it, neither trying it again nor stopping there.
    #[test]
    fn a_client_behind_an_overloaded_server_neither_retries_nor_stops_the_search() {
        let mut b = Bracket::new(40.0, 0.05, 12);
        let both = PointOutcome {
            passed: false,
            supported: false,
            client_behind: true,
            slo_met: true,
            overloaded: true,
        };
        b.observe(40.0, both);
        assert_eq!(b.next_rate(), Some(20.0));
        let r = b.result();
        assert!(r.retried_for_client.is_empty() && r.stopped_by_client_at.is_none());
        assert!(r.client_limited, "{r:?}");
    }

    /// Issue #71: a pass its confirmation refutes fails from then on (every entry at its rate),
    /// the bracket's top comes down to it, and the search goes on toward the resolution with
    /// the runs left; a refutation with none left ends it, the bracket as wide as it is.
    #[test]
    fn a_refuted_pass_fails_and_the_search_goes_on_below_it() {
        let mut b = Bracket::new(1.0, 0.1, 8);
        for (rate, passed) in [(1.0, true), (2.0, false), (1.5, false), (1.25, true)] {
            assert_eq!(b.next_rate(), Some(rate));
            b.observe(
                rate,
                PointOutcome {
                    supported: false,
                    ..PointOutcome::passed(passed)
                },
            );
        }
        // 1.25–1.5 is 16.7% wide: one more bisection at 1.375 was next.
        assert_eq!(b.next_rate(), Some(1.375));
        b.refute(1.25);
        let r = b.result();
        assert_eq!((r.capacity_rps, r.failed_at_rps), (Some(1.0), Some(1.25)));
        assert!(
            r.tried.iter().filter(|t| t.0 == 1.25).all(|t| !t.1),
            "{r:?}"
        );
        assert_eq!(b.runs_left(), 3);
        // 1.0–1.25 is 20% wide, 10% asked: the search goes on at 1.125.
        assert_eq!(b.next_rate(), Some(1.125));
        b.observe(1.125, PointOutcome::passed(true));
        assert_eq!(b.result().capacity_rps, Some(1.125));
        assert_eq!(b.next_rate(), None, "1.125–1.25 is within 10%");
        b.confirmed(1.125, true);
        assert_eq!(b.result().supported_rps, Some(1.125));

        let mut tight = Bracket::new(1.0, 0.01, 3);
        tight.observe(1.0, PointOutcome::passed(true));
        tight.observe(2.0, PointOutcome::passed(false));
        tight.refute(1.0);
        assert_eq!(tight.next_rate(), None, "no run left");
        assert_eq!(tight.result().capacity_rps, None);
    }

    /// The schedule holds each step's rate until the collector posts its verdict, waits for
    /// the wait's requests, then runs the rate the search asks for; names follow the stages.
    #[test]
    fn steps_follow_the_verdicts_posted() {
        let control = Arc::new(EdgeControl::default());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut run = EdgeRun::new(spec(), control.clone(), 2.0, &mut rng);
        control.started(Instant::now());
        let first: Vec<_> = (0..5).map(|_| run.next(&mut rng)).collect();
        // Constant arrivals at 10 req/s from t = 2 s, stage 1 (the step after one fixed stage).
        assert_eq!(first[0], (2.0, Some(1), 10.0));
        assert!((first[4].0 - 2.4).abs() < 1e-9, "{first:?}");
        // No verdict yet: the wait, at the same rate, stage 2.
        let w = run.next(&mut rng);
        assert_eq!((w.1, w.2), (Some(2), 10.0));
        assert_eq!(control.arrivals(1), Some(5));
        control.judged(1, Some(PointOutcome::passed(true)));
        // Its one wait arrival finished: the next step may start, at double the rate.
        control.wait_finished(1);
        let s2 = run.next(&mut rng);
        assert_eq!((s2.1, s2.2), (Some(3), 20.0));
        assert_eq!(control.rate(2), Some(20.0));
        assert_eq!(spec().name_of(3).as_deref(), Some("edge.2"));
        assert_eq!(spec().name_of(4).as_deref(), Some("edge.2.wait"));
        assert_eq!(spec().name_of(0), None);
    }

    /// A verdict that ends the search (a fail at a bracket already narrow) turns the
    /// schedule into the drain.
    #[test]
    fn the_search_ends_in_the_drain() {
        let control = Arc::new(EdgeControl::default());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let spec = EdgeSpec {
            max_steps: 1,
            ..spec()
        };
        let mut run = EdgeRun::new(spec, control.clone(), 0.0, &mut rng);
        for _ in 0..5 {
            run.next(&mut rng);
        }
        control.judged(1, Some(PointOutcome::passed(false)));
        let (_, stage, rate) = run.next(&mut rng);
        assert_eq!((stage, rate), (None, 10.0));
        assert_eq!(control.verdict(1), Some(Some(PointOutcome::passed(false))));
    }
}
