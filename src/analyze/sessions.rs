//! Multi-turn sessions (`[workload.sessions]`), from the raw records of their turns: per-turn
//! statistics (a conversation's later turns carry its history, so their TTFT and cached share
//! grow with the turn), the follow-ups' slip from their intended send, and **session goodput**:
//! steady sessions per second in which every turn succeeded and met the SLO.
//!
//! A session is its steady records grouped by `session`; each record carries its turn and the
//! turns its session planned, so the turns a failure kept from being sent are counted from the
//! raw records alone (`planned − sent`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Dist, RequestMetrics, meets_slo, request_metrics};
use crate::contract::Contract;
use crate::record::Record;

/// The steady sessions, over the steady window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSummary {
    /// Sessions that started in the steady phase (their turns are steady requests).
    pub sessions: u64,
    /// Sessions whose every planned turn was sent and succeeded.
    pub completed: u64,
    /// Sessions a failed turn (or the run's stop) ended before their last turn.
    pub ended_early: u64,
    pub turns_planned: u64,
    pub turns_sent: u64,
    /// Turns never sent: an earlier turn of their session failed, or the run stopped first.
    pub turns_not_sent: u64,
    /// Completed sessions whose every turn met the SLO, of the steady sessions (failures and
    /// sessions ended early never do); `None` without an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainment: Option<f64>,
    /// Session goodput: sessions per second, over the steady window, that met the SLO in every
    /// turn; `None` without an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_sps: Option<f64>,
    /// First turn's latency origin to last turn's end, completed sessions, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<Dist>,
    /// Follow-up turns' send minus their intended send (the answer before them plus the think
    /// time), ms: the client's slip, bounded like dispatch lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slip_ms: Option<Dist>,
    /// Statistics by turn (turn 1 is the session's first request).
    pub per_turn: Vec<TurnStats>,
}

/// One turn index across the steady sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnStats {
    /// 1-based.
    pub turn: u32,
    /// Turns of this index sent, and of those, the successful ones.
    pub sent: u64,
    pub ok: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo_ms: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<Dist>,
    /// Prompt tokens: as the server reported them, else as planned (the conversation so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<Dist>,
    /// Prompt tokens the server reported served from its cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<Dist>,
    /// Prompt tokens the conversation had before this turn's new message (its earlier prompts
    /// and answers; for the first turn, the system prompt every session shares): what a prefix
    /// cache can serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reusable_tokens: Option<Dist>,
}

/// The sessions among `steady` (none: `None`), over a window of `window_s` seconds.
pub fn summarize(c: &Contract, steady: &[&Record], window_s: f64) -> Option<SessionSummary> {
    c.workload.sessions.as_ref()?;
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    let system = c
        .workload
        .sessions
        .as_ref()
        .map_or(0, |s| s.system_prompt_tokens);
    let mut by_session: BTreeMap<u64, Vec<&Record>> = BTreeMap::new();
    for r in steady {
        if let Some(s) = r.session {
            by_session.entry(s).or_default().push(r);
        }
    }
    let mut out = SessionSummary {
        sessions: by_session.len() as u64,
        ..SessionSummary::default()
    };
    let mut met = 0u64;
    let mut durations = Vec::new();
    let mut slips = Vec::new();
    // Per turn index: the metrics of its successful turns, its sent count, and its inputs.
    let mut turns: BTreeMap<u32, TurnAcc> = BTreeMap::new();
    for recs in by_session.values_mut() {
        recs.sort_by_key(|r| r.turn.map_or(0, |t| t.0));
        let planned = recs
            .iter()
            .filter_map(|r| r.turn.map(|t| t.1))
            .max()
            .unwrap_or(1);
        let sent = recs.iter().filter(|r| r.sent_us.is_some()).count() as u64;
        out.turns_planned += u64::from(planned);
        out.turns_sent += sent;
        let all_ok = recs.len() as u64 == u64::from(planned) && recs.iter().all(|r| r.is_ok());
        // Every turn counts in its index's figures, whether or not the session completed.
        let turns_met = add_turns(c, recs, system, &mut turns, &mut slips, (origin, source));
        let session_met = all_ok && turns_met;
        if all_ok {
            out.completed += 1;
            let start = recs.first().and_then(|r| super::origin_us(r, origin));
            let end = recs.last().and_then(|r| r.end_us);
            if let (Some(a), Some(b)) = (start, end) {
                durations.push((b as f64 - a as f64) / 1000.0);
            }
        } else {
            out.ended_early += 1;
        }
        met += u64::from(session_met);
    }
    out.turns_not_sent = out.turns_planned.saturating_sub(out.turns_sent);
    if c.slo.is_set() && out.sessions > 0 {
        out.attainment = Some(met as f64 / out.sessions as f64);
        out.goodput_sps = (window_s > 0.0).then(|| met as f64 / window_s);
    }
    out.duration_ms = Dist::of(durations);
    out.slip_ms = Dist::of(slips);
    out.per_turn = turns.into_iter().map(|(t, a)| a.stats(t + 1)).collect();
    Some(out)
}

/// One session's turns added to each turn index's figures (and the later turns' send slips);
/// whether every successful turn met the SLO.
fn add_turns(
    c: &Contract,
    recs: &[&Record],
    system: u32,
    turns: &mut BTreeMap<u32, TurnAcc>,
    slips: &mut Vec<f64>,
    (origin, source): (crate::contract::LatencyOrigin, crate::contract::TokenSource),
) -> bool {
    let mut session_met = true;
    let mut prev: Option<&Record> = None;
    for r in recs.iter() {
        let t = r.turn.map_or(0, |t| t.0);
        let acc = turns.entry(t).or_default();
        acc.sent += u64::from(r.sent_us.is_some());
        if let (Some(i), Some(s)) = (r.intended_us, r.sent_us)
            && t > 0
        {
            slips.push((s as f64 - i as f64) / 1000.0);
        }
        let reusable = prev.map_or(system, |p| {
            p.input_tokens_planned + p.usage_completion_tokens.unwrap_or(p.client_output_tokens)
        });
        acc.reusable.push(f64::from(reusable));
        acc.input.push(f64::from(
            r.usage_prompt_tokens.unwrap_or(r.input_tokens_planned),
        ));
        if let Some(k) = r.usage_cached_tokens {
            acc.cached.push(f64::from(k));
        }
        if r.is_ok() {
            let m = request_metrics(r, origin, source);
            session_met &= meets_slo(c, &m);
            acc.ok.push(m);
        }
        prev = Some(r);
    }
    session_met
}

#[derive(Default)]
struct TurnAcc {
    sent: u64,
    ok: Vec<RequestMetrics>,
    input: Vec<f64>,
    cached: Vec<f64>,
    reusable: Vec<f64>,
}

impl TurnAcc {
    fn stats(self, turn: u32) -> TurnStats {
        let of = |f: &dyn Fn(&RequestMetrics) -> Option<f64>| {
            Dist::of(self.ok.iter().filter_map(f).collect())
        };
        TurnStats {
            turn,
            sent: self.sent,
            ok: self.ok.len() as u64,
            ttft_ms: of(&|m| m.ttft_ms()),
            ttfo_ms: of(&|m| m.ttfo_ms()),
            tpot_ms: of(&|m| m.tpot_ms()),
            e2e_ms: of(&|m| m.e2e_ms()),
            input_tokens: Dist::of(self.input),
            cached_tokens: Dist::of(self.cached),
            reusable_tokens: Dist::of(self.reusable),
        }
    }
}
