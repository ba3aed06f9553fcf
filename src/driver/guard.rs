//! The progress guard (`[measurement.guard]`, docs/guide/safety.md): stops the load once the
//! server has fallen hopelessly behind, so a run pointed at a server slower than its contract
//! assumed cannot flood it. An open loop must keep its schedule while the measurement means
//! something (that is what exposes overload); once no verdict but "overloaded" is possible,
//! every further request only harms a shared server and adds nothing to the result.
//!
//! Two rules, both against one bound ([`Bound`]), watched four times a second on the client's
//! book of requests in flight (`client::flights`), for every load model alike (open and closed
//! loops, sessions, agent tasks, load programs):
//! - **behind**: the oldest request still waiting for its first token has waited longer than
//!   the bound, while more requests wait than the server has ever served at once: a queue the
//!   server is not working through. One starved request beside a flowing batch is not a queue
//!   (it waits alone), and a slow server that answers is not behind (it serves what waits).
//! - **stalled**: requests are in flight and the server has sent no byte of any answer for
//!   longer than the bound.
//!
//! When one fires the load stops at once: nothing more is sent, the requests in flight are
//! cancelled (their connections closed, which every engine here takes as an abort), and the
//! run says which rule fired and on what evidence ([`GuardStop`]). It never delays a request
//! (which would hide coordinated omission): arrivals not sent are counted as not sent.
//!
//! It knows nothing of records, reports or HTTP: it reads the book and a clock.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::client::flights::{Flights, Snapshot};
use crate::contract::Contract;

/// How often the guard reads the book.
const EVERY: Duration = Duration::from_millis(250);

/// The bound's floor, and what it is without a TTFT (or E2E) SLO, seconds.
const FLOOR_S: f64 = 10.0;
const WITHOUT_SLO_S: f64 = 30.0;
/// Multiples of the SLO's bound and of the first answer's TTFT the bound is at least.
const SLO_TIMES: f64 = 10.0;
const FIRST_TIMES: f64 = 3.0;

/// The guard of one run: its rules' bound and what it is derived from.
#[derive(Debug, Clone)]
pub struct Guard {
    /// `measurement.guard.max_wait`, seconds.
    explicit_s: Option<f64>,
    /// The SLO's bound on the wait the rules watch (TTFT streamed, E2E not), seconds, and its key.
    slo: Option<(f64, &'static str)>,
    timeout_s: f64,
}

/// The guard's bound at one moment, and what set it.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub us: u64,
    pub from: String,
    /// The bound is the request timeout: the rules then wait [`TIMEOUT_GRACE`] more, so a
    /// request's own timeout ends it first (a server that answers nothing within the timeout
    /// fails its requests as timeouts, and the guard stops only what goes on past them).
    pub at_timeout: bool,
}

/// How long past a bound that is the request timeout the rules wait (see [`Bound`]).
pub const TIMEOUT_GRACE: Duration = Duration::from_secs(1);

impl Bound {
    /// The wait past which a rule fires, µs.
    fn trigger_us(&self) -> u64 {
        self.us
            + if self.at_timeout {
                TIMEOUT_GRACE.as_micros() as u64
            } else {
                0
            }
    }
}

/// Which rule stopped the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GuardRule {
    /// The oldest request waiting for its first token waited past the bound, with more
    /// waiting than the server had ever served at once.
    Behind,
    /// Requests in flight, and no byte of any answer for longer than the bound.
    Stalled,
}

/// Why the guard stopped the load, with its evidence (`command.json` `load_end.guard`, the
/// summary's `load_end.guard`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GuardStop {
    pub rule: GuardRule,
    /// When it fired, seconds after the load began.
    pub at_s: f64,
    /// The bound, seconds, and what set it.
    pub bound_s: f64,
    pub bound_from: String,
    /// How long the oldest waiting request had waited (behind), or how long nothing had come
    /// (stalled), seconds.
    pub waited_s: f64,
    /// Requests in flight when it fired; of them, those with no token yet.
    pub in_flight: u64,
    pub waiting: u64,
    /// The most requests the server had ever streamed to at once.
    pub served_at_once: u64,
    /// Requests sent and answered whole since the load began, and the rates they make.
    pub sent: u64,
    pub completed: u64,
    pub offered_rps: f64,
    pub sustained_rps: f64,
    /// Seconds since the last whole answer (`None`: none came).
    pub last_completion_s_ago: Option<f64>,
    /// Requests in flight over the load: (seconds after it began, requests), a few points.
    pub in_flight_over_time: Vec<(f64, u64)>,
}

impl GuardStop {
    /// The rule and the wait that broke it, in a few words.
    pub fn short(&self) -> String {
        match self.rule {
            GuardRule::Behind => format!(
                "the server fell behind: a request waited {:.1} s for its first token, bound {:.0} s",
                self.waited_s, self.bound_s
            ),
            GuardRule::Stalled => format!(
                "the server stalled: nothing came for {:.1} s, bound {:.0} s",
                self.waited_s, self.bound_s
            ),
        }
    }

    /// The evidence in one sentence.
    pub fn why(&self) -> String {
        let rule = match self.rule {
            GuardRule::Behind => format!(
                "the oldest request still waiting for its first token had waited {:.1} s (bound {:.0} s: {}), with {} waiting where the server had served at most {} at once",
                self.waited_s, self.bound_s, self.bound_from, self.waiting, self.served_at_once
            ),
            GuardRule::Stalled => format!(
                "the server had sent nothing for {:.1} s with {} requests in flight (bound {:.0} s: {})",
                self.waited_s, self.in_flight, self.bound_s, self.bound_from
            ),
        };
        let last = match self.last_completion_s_ago {
            Some(s) => format!("the last whole answer {s:.1} s before"),
            None => "no whole answer yet".to_owned(),
        };
        let over: Vec<String> = self
            .in_flight_over_time
            .iter()
            .map(|(t, n)| format!("{n} at {t:.0} s"))
            .collect();
        format!(
            "{rule}; the server finished {:.2} req/s of the {:.2} sent ({} of {} requests in {:.1} s, {last}); in flight {}",
            self.sustained_rps,
            self.offered_rps,
            self.completed,
            self.sent,
            self.at_s,
            over.join(" → ")
        )
    }
}

impl Guard {
    /// The contract's guard; `None` when it is off.
    pub fn of(c: &Contract) -> Option<Guard> {
        let g = &c.measurement.guard;
        if !g.enabled {
            return None;
        }
        let slo = if c.workload.stream {
            c.slo.ttft_ms.map(|ms| (ms.0 / 1000.0, "slo.ttft_ms"))
        } else {
            None
        }
        .or_else(|| c.slo.e2e_ms.map(|ms| (ms.0 / 1000.0, "slo.e2e_ms")));
        Some(Guard {
            explicit_s: g.max_wait.map(|w| w.seconds()),
            slo,
            timeout_s: c.target.timeout.seconds(),
        })
    }

    /// The bound, given the first answer's TTFT so far: `measurement.guard.max_wait` when
    /// set; else the largest of 10 × the SLO's bound (30 s without one), 3 × the first
    /// answer's TTFT and 10 s, and never more than the request timeout.
    pub fn bound(&self, first_ttft_us: Option<u64>) -> Bound {
        if let Some(s) = self.explicit_s {
            return Bound {
                us: (s * 1e6) as u64,
                from: "measurement.guard.max_wait".to_owned(),
                at_timeout: s >= self.timeout_s,
            };
        }
        let mut best = match self.slo {
            Some((s, key)) => (
                SLO_TIMES * s,
                format!("{SLO_TIMES:.0} × {key} ({:.0} ms)", s * 1000.0),
            ),
            None => (
                WITHOUT_SLO_S,
                format!("{WITHOUT_SLO_S:.0} s, with no TTFT or E2E SLO"),
            ),
        };
        if let Some(first) = first_ttft_us {
            let f = first as f64 / 1e6;
            if FIRST_TIMES * f > best.0 {
                best = (
                    FIRST_TIMES * f,
                    format!(
                        "{FIRST_TIMES:.0} × the first answer's TTFT ({:.0} ms)",
                        f * 1000.0
                    ),
                );
            }
        }
        if best.0 < FLOOR_S {
            best = (
                FLOOR_S,
                format!("{}, raised to the guard's floor of {FLOOR_S:.0} s", best.1),
            );
        }
        let at_timeout = best.0 >= self.timeout_s;
        if at_timeout {
            best = (self.timeout_s, "target.timeout".to_owned());
        }
        Bound {
            us: (best.0 * 1e6) as u64,
            from: best.1,
            at_timeout,
        }
    }

    /// Which rule the book breaks at `now` (µs), and by how long a wait.
    pub fn judge(&self, s: &Snapshot, now: u64) -> Option<(GuardRule, u64, Bound)> {
        if s.in_flight == 0 {
            return None;
        }
        let bound = self.bound(s.first_ttft_us);
        if let Some(oldest) = s.oldest_waiting_us {
            let waited = now.saturating_sub(oldest);
            if waited > bound.trigger_us() && s.waiting > s.peak_streaming.max(1) {
                return Some((GuardRule::Behind, waited, bound));
            }
        }
        let quiet = now.saturating_sub(s.last_progress_us);
        (quiet > bound.trigger_us()).then_some((GuardRule::Stalled, quiet, bound))
    }

    /// Reads the book until `done`, or until a rule fires: then calls `stop` with the
    /// evidence (it stops the load) and returns it. `now` is the run's clock (µs); the load
    /// began at `began` on it.
    pub async fn watch(
        self,
        book: Arc<Flights>,
        now: impl Fn() -> u64,
        began: u64,
        stop: impl FnOnce(&GuardStop),
        done: CancellationToken,
    ) -> Option<GuardStop> {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut over_time: Vec<(f64, u64)> = Vec::new();
        loop {
            tokio::select! {
                () = done.cancelled() => return None,
                _ = tick.tick() => {}
            }
            let t = now();
            let s = book.snapshot();
            let since = t.saturating_sub(began) as f64 / 1e6;
            // One sample a second for the evidence.
            if over_time.last().is_none_or(|(at, _)| since - at >= 1.0) {
                over_time.push((since, s.in_flight));
            }
            if let Some((rule, waited, bound)) = self.judge(&s, t) {
                over_time.push((since, s.in_flight));
                let g = evidence(&s, (rule, waited, bound), (since, t), &over_time);
                stop(&g);
                return Some(g);
            }
        }
    }
}

/// The guard's evidence from the book at `now` (`since` seconds after the load began).
fn evidence(
    s: &Snapshot,
    (rule, waited, bound): (GuardRule, u64, Bound),
    (since, now): (f64, u64),
    over_time: &[(f64, u64)],
) -> GuardStop {
    let rate = |n: u64| if since > 0.0 { n as f64 / since } else { 0.0 };
    GuardStop {
        rule,
        at_s: since,
        bound_s: bound.us as f64 / 1e6,
        bound_from: bound.from,
        waited_s: waited as f64 / 1e6,
        in_flight: s.in_flight,
        waiting: s.waiting,
        served_at_once: s.peak_streaming,
        sent: s.sent,
        completed: s.completed,
        offered_rps: rate(s.sent),
        sustained_rps: rate(s.completed),
        last_completion_s_ago: s
            .last_completed_us
            .map(|at| now.saturating_sub(at) as f64 / 1e6),
        in_flight_over_time: a_few(over_time, 5),
    }
}

/// At most `n` points of `all`, evenly spread, the first and the last among them.
fn a_few(all: &[(f64, u64)], n: usize) -> Vec<(f64, u64)> {
    if all.len() <= n {
        return all.to_vec();
    }
    (0..n).map(|k| all[k * (all.len() - 1) / (n - 1)]).collect()
}

/// How a load that stopped early left the server (`command.json` `load_end`): the requests
/// cancelled in flight, and when the server was idle again by its own metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerIdle {
    /// Its metrics read no request running or waiting this long after the load stopped.
    After { s: f64, source: String },
    /// Still busy when goodput stopped looking.
    NotWithin {
        s: f64,
        running: f64,
        waiting: f64,
        source: String,
    },
    /// It publishes no metric that says.
    Unknown { why: String },
}

/// How the drain ended when it reached its bound ([`drain_bound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrainCut {
    /// The most arrivals the drain may send.
    pub bound: u64,
    /// Requests in flight when the last steady one was sent (the bound's base).
    pub in_flight_at_steady_end: u64,
    /// When the drain stopped sending, µs on the run's clock.
    pub at_us: u64,
}

/// The most arrivals the drain sends beyond the plan: twice what was in flight when the last
/// steady request was sent, and at least 16. A server that keeps up holds about rate × E2E in
/// flight (Little's law), so the drain keeps the steady load on the last steady requests for
/// about twice a typical request's time; past that, it would only add to a queue.
pub fn drain_bound(in_flight_at_steady_end: u64) -> u64 {
    (2 * in_flight_at_steady_end).max(16)
}

/// How the load ended, beyond the plan (`command.json` `load_end`, the summary's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadEnd {
    /// The progress guard stopped the load, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardStop>,
    /// Requests in flight when the load stopped early (guard, decided, signal, a failure),
    /// cancelled: their connections closed.
    #[serde(default)]
    pub cancelled_in_flight: u64,
    /// After an early stop, when the server was idle again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_idle: Option<ServerIdle>,
    /// The drain reached its bound and stopped sending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_cut: Option<DrainCut>,
}

impl LoadEnd {
    /// Nothing beyond the plan happened.
    pub fn is_empty(&self) -> bool {
        *self == LoadEnd::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(src: &str) -> Guard {
        let src = format!("[load]\nrate = 1\nrequests = 1\n{src}");
        let c: Contract = crate::contract::parse(&src, std::path::Path::new("c.toml")).unwrap();
        Guard::of(&c).unwrap()
    }

    const S: u64 = 1_000_000;

    #[test]
    fn the_bound_comes_from_the_slo_the_first_answer_and_the_timeout() {
        // 10 × a 500 ms TTFT SLO is under the floor.
        let g = guard("[slo]\nttft_ms = 500\n");
        assert_eq!(g.bound(None).us, 10 * S);
        assert!(g.bound(None).from.contains("floor"), "{:?}", g.bound(None));
        // 10 × 2 s.
        let g = guard("[slo]\nttft_ms = 2000\n");
        assert_eq!(g.bound(None).us, 20 * S);
        assert_eq!(g.bound(None).from, "10 × slo.ttft_ms (2000 ms)");
        // A first answer slower than the SLO allows raises it.
        assert_eq!(g.bound(Some(9 * S)).us, 27 * S);
        // No TTFT SLO: 30 s; never past the timeout.
        let g = guard("[slo]\ntpot_ms = 50\n[target]\ntimeout = \"20s\"\n");
        assert_eq!(g.bound(None).us, 20 * S);
        assert_eq!(g.bound(None).from, "target.timeout");
        // At the timeout, a request's own timeout ends it first: the rules wait a second more.
        let now = 100 * S;
        let quiet = |s: u64| snap(1, 1, Some(now - s), 1, now - s);
        assert_eq!(g.judge(&quiet(20 * S + S / 2), now), None);
        assert!(g.judge(&quiet(21 * S + S / 10), now).is_some());
        let g = guard("[measurement.guard]\nmax_wait = \"4s\"\n");
        assert_eq!(g.bound(Some(60 * S)).us, 4 * S);
        // Not streamed: the E2E SLO.
        let g = guard("[workload]\nstream = false\n[slo]\ne2e_ms = 5000\n");
        assert_eq!(g.bound(None).us, 50 * S);
        let c = crate::contract::parse(
            "[load]\nrate = 1\nrequests = 1\n[measurement.guard]\nenabled = false\n",
            std::path::Path::new("c.toml"),
        )
        .unwrap();
        assert!(Guard::of(&c).is_none());
    }

    fn snap(in_flight: u64, waiting: u64, oldest: Option<u64>, peak: u64, last: u64) -> Snapshot {
        Snapshot {
            in_flight,
            waiting,
            oldest_waiting_us: oldest,
            streaming: in_flight - waiting,
            peak_streaming: peak,
            sent: 100,
            completed: 1,
            last_completed_us: None,
            last_progress_us: last,
            first_ttft_us: Some(50_000),
        }
    }

    #[test]
    fn behind_needs_a_long_wait_and_a_queue_longer_than_the_batch_and_stalled_needs_silence() {
        let g = guard("[slo]\nttft_ms = 500\n");
        let now = 100 * S;
        // 200 waiting behind a 12 s wait, one served at once: behind.
        let s = snap(201, 200, Some(now - 12 * S), 1, now - S / 10);
        let (rule, waited, _) = g.judge(&s, now).unwrap();
        assert_eq!((rule, waited), (GuardRule::Behind, 12 * S));
        // The same wait, but no more waiting than the server serves at once: one starved
        // request beside a flowing batch is no queue.
        assert_eq!(
            g.judge(&snap(40, 8, Some(now - 12 * S), 32, now), now),
            None
        );
        // A long queue whose oldest has waited under the bound: not yet.
        assert_eq!(
            g.judge(&snap(300, 290, Some(now - 9 * S), 4, now), now),
            None
        );
        // Silence with requests in flight: stalled, whatever waits.
        let (rule, quiet, _) = g.judge(&snap(2, 0, None, 2, now - 11 * S), now).unwrap();
        assert_eq!((rule, quiet), (GuardRule::Stalled, 11 * S));
        // Nothing in flight: nothing to judge.
        assert_eq!(g.judge(&snap(0, 0, None, 2, 0), now), None);
    }

    #[tokio::test]
    async fn the_watch_stops_a_load_the_server_fell_behind_and_says_why() {
        // A bound of 1 s, on the real clock.
        let g = guard("[measurement.guard]\nmax_wait = \"1s\"\n");
        let book = Arc::new(Flights::default());
        let clock = std::time::Instant::now();
        let now = move || clock.elapsed().as_micros() as u64;
        // One request served, 30 queued behind it and never answered.
        let mut served = book.enter(now());
        book.first_token(&mut served, now() + 20_000);
        let queued: Vec<_> = (0..30).map(|_| book.enter(now())).collect();
        let stopped = std::sync::Mutex::new(None);
        let out = g
            .clone()
            .watch(
                book.clone(),
                now,
                0,
                |s| *stopped.lock().unwrap() = Some(s.rule),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(*stopped.lock().unwrap(), Some(GuardRule::Behind));
        assert_eq!(out.rule, GuardRule::Behind);
        // Fired within a few ticks of the bound (generous: a busy host).
        assert!(out.at_s > 1.0 && out.at_s < 3.0, "{out:?}");
        assert_eq!((out.waiting, out.served_at_once, out.sent), (30, 1, 31));
        assert!(
            out.why().contains("bound 1 s: measurement.guard.max_wait"),
            "{}",
            out.why()
        );
        assert!(out.in_flight_over_time.len() <= 5);
        book.leave(&served);
        for q in &queued {
            book.leave(q);
        }
        // A book with nothing in flight never fires: the watch runs until it is done.
        let done = CancellationToken::new();
        let idle = tokio::spawn(g.watch(
            book.clone(),
            now,
            0,
            |_| panic!("fired on an idle book"),
            done.clone(),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        done.cancel();
        assert_eq!(idle.await.unwrap(), None);
    }

    #[test]
    fn the_drain_is_bounded_by_twice_what_was_in_flight() {
        assert_eq!(drain_bound(0), 16);
        assert_eq!(drain_bound(75), 150);
    }
}
