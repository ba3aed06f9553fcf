//! An edge search within one run (`shape = "edge"`): its steps judged as their records
//! finish, which steers the search ([`EdgeJudge`], a collector observer), and its answer from
//! the steps' results ([`edge_result`]). A step is judged by [`super::stages::judge_step`] on
//! its own records, during the run and in every later report alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::stages::{StageResult, judge_step};
use super::*;
use crate::arrival::edge::{Bracket, EdgeControl, PointOutcome, Searched, parse_step};
use crate::contract::stages::Stage;

/// How an edge step came out for the search: met the SLO (at its point estimates) and VALID;
/// `None` when nothing of it was measured (the warm-up covered it).
pub fn step_outcome(r: &StageResult) -> Option<PointOutcome> {
    let slo = r.slo.as_ref()?;
    Some(PointOutcome {
        passed: slo.verdict.met() && r.validity.is_valid(),
        supported: slo.verdict == SloVerdict::Met && r.validity.is_valid(),
        client_behind: r.validity.client_behind,
        slo_met: slo.pass,
        overloaded: r.validity.overload.is_some(),
    })
}

/// An edge search's answer, in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EdgeResult {
    /// The stage's name; its steps are `name.1`, `name.2`, ….
    pub stage: String,
    /// The rule a step passes by, in words.
    pub rule: String,
    /// The search's settings: its first rate, step size, resolution and budget.
    pub start_rps: f64,
    pub step_requests: u64,
    pub resolution: f64,
    pub max_steps: u32,
    /// Where it ended: the bracket, the rates tried.
    pub searched: Searched,
    /// Steps with no verdict: the warm-up covered them (and they ran again at their rate), or
    /// the run ended inside one.
    pub unjudged: u32,
    /// The search ran out of steps before its bracket was as narrow as its resolution.
    pub budget_spent: bool,
    /// The one-sided confidence a pass is supported at (`measurement.confidence`).
    pub confidence: f64,
    /// The run ended inside a step, before the search did.
    #[serde(default)]
    pub cut_short: bool,
}

impl EdgeResult {
    /// The answer, in one line, with how strongly it is known.
    pub fn answer(&self) -> String {
        let s = &self.searched;
        let conf = claims::percent(self.confidence);
        let mut out = String::new();
        if self.cut_short {
            out += "the run ended inside a step, before the search did; so far: ";
        }
        out += &match (s.capacity_rps, s.failed_at_rps) {
            (Some(l), Some(h)) => format!(
                "SLA edge {l:.2} req/s: the highest step that passed; the lowest that failed ran at {h:.2} req/s (bracket {:.1}%)",
                s.resolution.unwrap_or(0.0) * 100.0
            ),
            (Some(l), None) if self.cut_short => {
                format!("every step passed, up to {l:.2} req/s: the edge lies above it")
            }
            (Some(l), None) => format!(
                "every step passed, up to {l:.2} req/s: the edge lies above it (raise the stage's rate or max_steps)"
            ),
            (None, Some(h)) if self.cut_short => {
                format!("no step passed: the lowest, {h:.2} req/s, failed, so the edge lies below")
            }
            (None, Some(h)) => format!(
                "no step passed: the lowest, {h:.2} req/s, failed, so the edge lies below (lower the stage's rate)"
            ),
            (None, None) => {
                "no step was judged: the run ended before its first step finished".to_owned()
            }
        };
        if let Some(l) = s.capacity_rps {
            out += &if s.supported_rps == Some(l) {
                format!("; supported at {conf} confidence by its step")
            } else {
                let mut w = format!(
                    "; indicated only: its step met the SLO on too few requests to support it at {conf} confidence"
                );
                if let Some(x) = s.supported_rps {
                    w += &format!(" (supported up to {x:.2} req/s)");
                }
                w
            };
        }
        if let Some(r) = s.stopped_by_client_at {
            out += &format!(
                "; the search stopped at {r:.2} req/s, where the SLO held but the client fell behind its schedule{}: the answer is the client's limit, not the server's",
                if s.retried_for_client.contains(&r) {
                    " twice"
                } else {
                    ""
                }
            );
        } else if s.client_limited {
            out += "; a step near it was INVALID for the client's lag: the answer may be the client's limit";
        }
        let again: Vec<f64> = (s.retried_for_client.iter())
            .copied()
            .filter(|&r| s.stopped_by_client_at != Some(r))
            .collect();
        if !again.is_empty() {
            out += &format!(
                "; {} ran again after only the client fell behind (a lone late wake-up is not the client's limit)",
                rates_in_words(&again)
            );
        }
        if self.budget_spent {
            out += &format!(
                "; its {} steps ran out before the bracket narrowed to {:.0}% (raise max_steps)",
                self.max_steps,
                self.resolution * 100.0
            );
        }
        out
    }

    /// The steps in order: `30 ✓ → 60 ✗ → 45 ✗`.
    pub fn trail(&self) -> String {
        self.searched
            .tried
            .iter()
            .map(|(r, ok)| format!("{} {}", num_rps(*r), if *ok { "✓" } else { "✗" }))
            .collect::<Vec<_>>()
            .join(" → ")
    }
}

/// Rates as a list in words: `20.00 req/s`, `20.00 and 40.00 req/s`.
pub fn rates_in_words(rates: &[f64]) -> String {
    let r: Vec<String> = rates.iter().map(|r| format!("{r:.2}")).collect();
    match r.split_last() {
        Some((last, [])) => format!("{last} req/s"),
        Some((last, rest)) => format!("{} and {last} req/s", rest.join(", ")),
        None => String::new(),
    }
}

fn num_rps(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The edge search's answer from its steps' results, in the order they ran; `None` without
/// an edge stage.
pub fn edge_result(c: &Contract, stages: &[StageResult]) -> Option<EdgeResult> {
    let edge = c.load.edge()?;
    let (resolution, max_steps) = edge.edge_search();
    let start = edge.rate.unwrap_or(1.0);
    let mut bracket = Bracket::new(start, resolution, max_steps as usize);
    let mut unjudged = 0;
    for r in stages.iter().filter(|r| r.shape == "edge") {
        let Some(rate) = r.edge_rps else { continue };
        match step_outcome(r) {
            Some(o) => bracket.observe(rate, o),
            None => unjudged += 1,
        }
    }
    let searched = bracket.result();
    let budget_spent = searched.tried.len() >= max_steps as usize
        && searched.resolution.is_none_or(|w| w > resolution)
        && searched.stopped_by_client_at.is_none();
    Some(EdgeResult {
        stage: edge.name.clone(),
        rule: format!(
            "a step passes when its own requests meet the SLO ({}) and it is VALID on its own (achieved ≈ offered, no growing queue, client on schedule), as a sweep's run at that rate would",
            c.slo.rule()
        ),
        start_rps: start,
        step_requests: edge.requests.unwrap_or(0),
        resolution,
        max_steps,
        searched,
        unjudged,
        budget_spent,
        confidence: c.measurement.confidence,
        cut_short: stages.iter().any(|r| {
            r.shape == "edge"
                && r.validity
                    .reasons
                    .first()
                    .is_some_and(|x| x.starts_with(super::stages::CUT_SHORT))
        }),
    })
}

/// Judges each step of an edge search once its last request has finished, and posts the
/// verdict to the schedule, which chooses the next rate from it; counts each wait's finished
/// requests, so the schedule knows when the server is idle again.
pub struct EdgeJudge {
    contract: Contract,
    edge: Stage,
    control: Arc<EdgeControl>,
    steps: BTreeMap<u32, Vec<Record>>,
}

impl EdgeJudge {
    pub fn new(c: &Contract, control: Option<&Arc<EdgeControl>>) -> Option<EdgeJudge> {
        let edge = c.load.edge()?;
        Some(EdgeJudge {
            contract: c.clone(),
            edge: edge.clone(),
            control: control?.clone(),
            steps: BTreeMap::new(),
        })
    }
}

impl crate::record::writer::Observer for EdgeJudge {
    fn observe(&mut self, rec: &Record) {
        let edge = self.edge.name.as_str();
        let Some((n, wait)) = rec.stage.as_deref().and_then(|s| parse_step(edge, s)) else {
            return;
        };
        if wait {
            self.control.wait_finished(n);
            return;
        }
        let own = self.steps.entry(n).or_default();
        let mut r = rec.clone();
        r.forget_text();
        own.push(r);
        if self
            .control
            .arrivals(n)
            .is_some_and(|a| own.len() as u64 >= a)
        {
            let own = self.steps.remove(&n).unwrap_or_default();
            let rate = self.control.rate(n).unwrap_or(1.0);
            let start = own.iter().filter_map(|r| r.intended_us).min().unwrap_or(0);
            let name = self.edge.step_name(n);
            let result = judge_step(&self.contract, &name, rate, false, &own, start);
            self.control.judged(n, step_outcome(&result));
        }
    }
}

impl Drop for EdgeJudge {
    /// The collector has ended: a schedule waiting for a verdict or an idle server goes on.
    fn drop(&mut self) {
        self.control.close();
    }
}
