//! Watching a run live (`run --live`, `demo --live`): a [`Board`] the collector feeds with every
//! finished record (an [`Observer`], on the collector's thread), from which the dashboard takes
//! a [`Snapshot`] a few times a second — offered and achieved rate, requests in flight, the
//! latency percentiles over a sliding window beside their SLO thresholds, goodput and
//! attainment, errors by class, dispatch lag, the phase and the time left. Each request's
//! figures are the analysis's own ([`request_metrics`], [`record_meets_slo`]), so the live numbers
//! and the report's differ only by the window.
//!
//! In `demo --live` the board also carries the load's [`Control`] (the driver's): keys raise
//! and lower the offered load and switch open/closed loop in place; each change starts a
//! segment, which the records carry and the bundle describes.

pub mod tui;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::analyze::{record_meets_slo, request_metrics};
use crate::client::Client;
use crate::contract::Contract;
use crate::driver::live::{Control, Setting};
use crate::plan::Phase;
use crate::record::writer::Observer;
use crate::record::{Outcome, Record};

/// The sliding window the live percentiles are taken over, seconds.
pub const WINDOW_S: f64 = 10.0;
/// How many p99 readings the history keeps (one a tick): the chart's width.
const HISTORY: usize = 600;

/// One finished request, as the dashboard needs it.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// When it finished, s on the run's clock.
    end_s: f64,
    /// When it was meant to be sent (open loop), s.
    intended_s: Option<f64>,
    ttft_ms: Option<f64>,
    ttfo_ms: Option<f64>,
    tpot_ms: Option<f64>,
    e2e_ms: Option<f64>,
    lag_ms: Option<f64>,
    met: bool,
}

#[derive(Debug, Default)]
struct State {
    window: VecDeque<Sample>,
    finished: u64,
    measured: u64,
    met: u64,
    errors: BTreeMap<&'static str, u64>,
    phase: Option<Phase>,
    /// (s, TTFT p99 ms) a tick, for the chart.
    history: VecDeque<(f64, f64)>,
    load_start_s: f64,
}

/// What the dashboard shows at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub elapsed_s: f64,
    /// The phase of the latest finished request.
    pub phase: Option<Phase>,
    /// Seconds left of the planned load (count-bounded: at the present completion rate).
    pub left_s: Option<f64>,
    pub offered_rps: Option<f64>,
    pub achieved_rps: f64,
    pub in_flight: u64,
    /// Each latency metric over the window.
    pub latency: Vec<LatencyRow>,
    pub lag_p50_ms: Option<f64>,
    pub lag_p99_ms: Option<f64>,
    /// SLO-meeting completions per second over the window; `None` without an SLO.
    pub goodput_rps: Option<f64>,
    /// Of the window's requests, those that met the SLO.
    pub attainment: Option<f64>,
    /// Since the start, the measured (steady) requests that met it.
    pub attainment_run: Option<f64>,
    pub attainment_target: Option<f64>,
    pub finished: u64,
    pub errors: Vec<(&'static str, u64)>,
    pub window_requests: usize,
    /// The live control's setting (`demo --live`).
    pub setting: Option<Setting>,
    pub capacity_rps: Option<f64>,
}

/// One latency metric over the window: its p50 and p99 and its SLO threshold, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyRow {
    pub name: &'static str,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub slo: Option<f64>,
}

impl LatencyRow {
    /// Whether the window's p99 is over its SLO threshold (`None`: no p99 or no threshold).
    pub fn p99_above_slo(&self) -> Option<bool> {
        Some(self.p99? > self.slo?)
    }
}

/// A run as it goes, for the dashboard.
pub struct Board {
    contract: Arc<Contract>,
    state: Mutex<State>,
    client: OnceLock<Arc<Client>>,
    control: Option<Arc<Control>>,
    ended: AtomicBool,
    /// Fired by the dashboard's `q` (or Ctrl-C): the run's owner decides what it means.
    pub quit: CancellationToken,
    /// The name of what ended the run from the dashboard (`q`, `Ctrl-C`).
    pub quit_by: OnceLock<&'static str>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").finish_non_exhaustive()
    }
}

/// The window's median and p99 of one figure.
fn median_and_p99(w: &[Sample], f: fn(&Sample) -> Option<f64>) -> (Option<f64>, Option<f64>) {
    let mut v: Vec<f64> = w.iter().filter_map(f).collect();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| crate::stats::percentile_sorted(&v, q);
    (at(50.0), at(99.0))
}

/// The window's latency rows against the SLO: TTFT, TTFO (only when it differs from TTFT
/// somewhere, a reasoning model, or has a threshold), TPOT and E2E.
fn latency_rows(w: &[Sample], slo: &crate::contract::Slo) -> Vec<LatencyRow> {
    let mut latency = Vec::new();
    for (name, f, thr) in [
        (
            "TTFT",
            (|x: &Sample| x.ttft_ms) as fn(&Sample) -> Option<f64>,
            slo.ttft_ms,
        ),
        ("TTFO", |x: &Sample| x.ttfo_ms, slo.ttfo_ms),
        ("TPOT", |x: &Sample| x.tpot_ms, slo.tpot_ms),
        ("E2E", |x: &Sample| x.e2e_ms, slo.e2e_ms),
    ] {
        if name == "TTFO" && thr.is_none() && w.iter().all(|x| x.ttfo_ms == x.ttft_ms) {
            continue;
        }
        let (p50, p99) = median_and_p99(w, f);
        latency.push(LatencyRow {
            name,
            p50,
            p99,
            slo: thr.map(|t| t.0),
        });
    }
    latency
}

impl Board {
    /// With a `control` (`demo --live`), the dashboard's `q` stops the load gracefully
    /// (the control's `stop`); else its owner decides what `quit` means.
    pub fn new(contract: Arc<Contract>, control: Option<Arc<Control>>) -> Arc<Board> {
        Arc::new(Board {
            contract,
            state: Mutex::default(),
            client: OnceLock::new(),
            quit: control
                .as_ref()
                .map_or_else(CancellationToken::new, |k| k.stop.clone()),
            control,
            ended: AtomicBool::new(false),
            quit_by: OnceLock::new(),
        })
    }

    /// The run's client (its clock and its count of requests in flight); the load starts now.
    pub fn attach(&self, client: Arc<Client>) {
        self.lock().load_start_s = client.now_us() as f64 / 1e6;
        let _ = self.client.set(client);
    }

    pub fn control(&self) -> Option<&Arc<Control>> {
        self.control.as_ref()
    }

    /// The load is over (or never started): the dashboard closes.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in one finished record.
    pub fn add(&self, rec: &Record) {
        let c = &self.contract;
        let s = |us: u64| us as f64 / 1e6;
        let m = rec.is_ok().then(|| {
            request_metrics(
                rec,
                c.measurement.latency_origin,
                c.measurement.output_tokens,
            )
        });
        let met = m.as_ref().is_some_and(|m| record_meets_slo(c, rec, m));
        let sample = Sample {
            end_s: s(rec.end_us.or(rec.sent_us).unwrap_or_default()),
            intended_s: rec.intended_us.map(s),
            ttft_ms: m.as_ref().and_then(|m| m.ttft_ms()),
            ttfo_ms: m.as_ref().and_then(|m| m.ttfo_ms()),
            tpot_ms: m.as_ref().and_then(|m| m.tpot_ms()),
            e2e_ms: m.as_ref().and_then(|m| m.e2e_ms()),
            lag_ms: rec
                .intended_us
                .zip(rec.sent_us)
                .map(|(i, x)| (x as f64 - i as f64) / 1000.0),
            met,
        };
        let mut st = self.lock();
        st.finished += 1;
        if rec.outcome != Outcome::Ok {
            *st.errors.entry(rec.outcome.as_str()).or_default() += 1;
        }
        if matches!(rec.phase, Phase::Steady | Phase::Drain) {
            st.measured += 1;
            st.met += u64::from(met);
        }
        if !rec.is_probe() {
            st.phase = Some(rec.phase);
        }
        if rec.phase != Phase::Quality {
            st.window.push_back(sample);
        }
    }

    fn now_s(&self) -> f64 {
        self.client.get().map_or(0.0, |c| c.now_us() as f64 / 1e6)
    }

    /// What to show now; also records the window's TTFT p99 in the chart's history.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now_s();
        let c = &self.contract;
        let mut st = self.lock();
        while st.window.front().is_some_and(|x| x.end_s < now - WINDOW_S) {
            st.window.pop_front();
        }
        let w: Vec<Sample> = st.window.iter().copied().collect();
        // The window's span: the whole window once the run is older than it.
        let span = WINDOW_S.min(now).max(1e-3);
        let slo = &c.slo;
        let latency = latency_rows(&w, slo);
        let (lag_p50_ms, lag_p99_ms) = median_and_p99(&w, |x| x.lag_ms);
        let met = w.iter().filter(|x| x.met).count();
        let arrived = w
            .iter()
            .filter(|x| x.intended_s.is_some_and(|i| i >= now - span))
            .count();
        let setting = self.control.as_ref().map(|k| k.setting());
        let offered_rps = match &setting {
            Some(s) => Some(s.offered_rps),
            None if c.load.rate().is_some_and(|r| r > 0.0) => c.load.rate(),
            None if c.load.is_open() => Some(arrived as f64 / span),
            None => None,
        };
        let achieved_rps = w.iter().filter(|x| x.end_s >= now - span).count() as f64 / span;
        let slo_set = slo.is_set();
        let p99 = latency.first().and_then(|l| l.p99);
        if let Some(p) = p99 {
            st.history.push_back((now, p));
            if st.history.len() > HISTORY {
                st.history.pop_front();
            }
        }
        let left_s = time_left(c, now - st.load_start_s, st.finished, achieved_rps);
        Snapshot {
            elapsed_s: now,
            phase: st.phase,
            left_s,
            offered_rps,
            achieved_rps,
            in_flight: self.client.get().map_or(0, |c| c.in_flight()),
            latency,
            lag_p50_ms,
            lag_p99_ms,
            goodput_rps: slo_set.then(|| met as f64 / span),
            attainment: (slo_set && !w.is_empty()).then(|| met as f64 / w.len() as f64),
            attainment_run: (slo_set && st.measured > 0)
                .then(|| st.met as f64 / st.measured as f64),
            attainment_target: slo_set.then_some(slo.attainment),
            finished: st.finished,
            errors: st.errors.iter().map(|(k, v)| (*k, *v)).collect(),
            window_requests: w.len(),
            setting,
            capacity_rps: self.control.as_ref().map(|k| k.capacity_rps),
        }
    }

    /// The TTFT p99 readings so far: (s, ms).
    pub fn history(&self) -> Vec<(f64, f64)> {
        self.lock().history.iter().copied().collect()
    }
}

/// Seconds of planned load left: by the clock when both phases are timed, else at the present
/// completion rate when both are counted; `None` when neither can say.
fn time_left(c: &Contract, since_start_s: f64, finished: u64, rate: f64) -> Option<f64> {
    use crate::plan::{StopRule, WarmupRule};
    let rules = crate::plan::PhaseRules::of(c);
    match (rules.warmup, rules.stop) {
        (WarmupRule::Duration(w), StopRule::Duration(d)) => {
            Some(((w + d) as f64 / 1e6 - since_start_s).max(0.0))
        }
        (WarmupRule::Requests(w), StopRule::Requests(n)) if rate > 0.0 => {
            Some((w + n).saturating_sub(finished) as f64 / rate)
        }
        _ => None,
    }
}

/// The collector's handle on the board.
#[derive(Debug, Clone)]
pub struct Feed(pub Arc<Board>);

impl Observer for Feed {
    fn observe(&mut self, rec: &Record) {
        self.0.add(rec);
    }
}
