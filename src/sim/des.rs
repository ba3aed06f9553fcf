//! The discrete-event runner: the same [`Engine`] and per-request decisions as the HTTP server,
//! on a virtual clock with no I/O and no sleeping, so a workload of minutes runs in milliseconds.
//! HTTP-level faults (dropped connections, malformed events, slow headers) do not exist here;
//! load time, injected errors, stalls and the warm-up penalty do.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::engine::{Engine, Event, Submission};
use super::ledger::{GroundTruth, Ledger, SimOutcome};
use super::model::{FaultKind, LengthAsk, degraded_output_plan, fault_strikes, prompt_hash};
use crate::sim_config::SimConfig;
use crate::text::word_ids;

/// One request of a discrete-event workload.
#[derive(Debug, Clone)]
pub struct DesRequest {
    /// Arrival time in seconds (open loop); ignored in closed loop.
    pub arrival_s: f64,
    /// Prompt text (tokenized by the simulator's tokenizer).
    pub prompt: String,
    pub ask: LengthAsk,
    /// The body's `priority` (0: none).
    pub priority: i64,
    /// The model it names (`None`: the served model); an adapter adds its cost.
    pub model: Option<String>,
}

/// How requests arrive.
#[derive(Debug, Clone)]
pub enum DesLoad {
    /// Each request arrives at its `arrival_s`, whatever happened before.
    Open(Vec<DesRequest>),
    /// `concurrency` users each send a request, wait for its end, think, and send the next.
    Closed {
        concurrency: usize,
        think_s: f64,
        /// The users' first requests are spread evenly over this many seconds (0: all at once).
        stagger_s: f64,
        requests: Vec<DesRequest>,
    },
}

/// Runs a workload to completion; ground truth of every request, in arrival order.
/// Times are seconds on the virtual clock, expressed in microseconds like the HTTP runner's.
pub fn run(cfg: &SimConfig, load: DesLoad) -> Vec<GroundTruth> {
    let (requests, closed) = match load {
        DesLoad::Open(r) => (r, None),
        DesLoad::Closed {
            concurrency,
            think_s,
            stagger_s,
            requests,
        } => (requests, Some((concurrency.max(1), think_s, stagger_s))),
    };
    // Pending arrivals ordered by (time in ns, request index).
    let mut pending: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let ns = |t: f64| (t * 1e9).round().max(0.0) as u64;
    let mut next_closed = 0;
    match closed {
        None => {
            for (i, r) in requests.iter().enumerate() {
                pending.push(Reverse((ns(r.arrival_s), i)));
            }
        }
        Some((c, _, stagger)) => {
            for i in 0..c.min(requests.len()) {
                pending.push(Reverse((ns(stagger * i as f64 / c as f64), i)));
            }
            next_closed = c.min(requests.len());
        }
    }

    let mut engine = Engine::new(cfg.clone());
    let mut ledger = Ledger::default();
    let mut done: Vec<GroundTruth> = Vec::with_capacity(requests.len());
    let mut seq_of: HashMap<u64, usize> = HashMap::new();
    let mut events = Vec::new();
    let mut now = 0.0_f64;
    let mut arrivals = 0u64;
    let load_time = cfg.load_time_ms / 1000.0;

    let mut finish = |g: GroundTruth,
                      done: &mut Vec<GroundTruth>,
                      pending: &mut BinaryHeap<Reverse<(u64, usize)>>,
                      t: f64| {
        done.push(g);
        if let Some((_, think, _)) = closed
            && next_closed < requests.len()
        {
            pending.push(Reverse((ns(t + think), next_closed)));
            next_closed += 1;
        }
    };

    loop {
        // Admit everything that has arrived by `now`.
        while let Some(Reverse((at, i))) = pending.peek().copied() {
            if at as f64 / 1e9 > now {
                break;
            }
            pending.pop();
            let t = at as f64 / 1e9;
            let r = &requests[i];
            let seq = arrivals;
            arrivals += 1;
            let ids = word_ids(&r.prompt);
            ledger.arrive(seq, None, t, ids.len() as u32);
            let refused = if t < load_time {
                Some(SimOutcome::RefusedLoading)
            } else if fault_strikes(cfg, seq, FaultKind::Error) {
                Some(SimOutcome::Error(cfg.faults.error_status))
            } else {
                None
            };
            if let Some(outcome) = refused {
                let g = ledger.finish(seq, t, outcome).expect("just opened");
                finish(g, &mut done, &mut pending, t);
                continue;
            }
            let plan = degraded_output_plan(cfg, prompt_hash(&ids), r.ask);
            seq_of.insert(seq, i);
            engine.submit(Submission {
                id: seq,
                prompt_ids: ids,
                output_tokens: plan.tokens,
                output_ids: Vec::new(),
                priority: r.priority,
                extra_ms: match r.model.as_deref().and_then(|m| cfg.serves(m)) {
                    Some(true) => cfg.adapter_cost_ms,
                    _ => 0.0,
                },
                images: Vec::new(),
            });
        }
        if engine.is_idle() {
            match pending.peek() {
                Some(Reverse((at, _))) => {
                    now = *at as f64 / 1e9;
                    continue;
                }
                None => break,
            }
        }
        let Some(step) = engine.step(now, &mut events) else {
            continue;
        };
        for ev in &events {
            match *ev {
                Event::Admitted { id, cached_tokens } => {
                    ledger.admit(id, step.start, cached_tokens);
                }
                Event::Encoded {
                    id,
                    hits,
                    vision_us,
                    ..
                } => ledger.encoded(id, hits, vision_us),
                Event::Drafted {
                    id,
                    drafted,
                    accepted,
                } => ledger.drafted(id, drafted, accepted),
                Event::Rejected { id } => {
                    if let Some(g) = ledger.finish(id, step.start, SimOutcome::RejectedTooLong) {
                        finish(g, &mut done, &mut pending, step.start);
                    }
                }
                Event::Chunk { id, tokens, .. } => {
                    ledger.chunk(id, step.end, tokens);
                }
                Event::Finished { id } => {
                    if let Some(g) = ledger.finish(id, step.end, SimOutcome::Ok) {
                        finish(g, &mut done, &mut pending, step.end);
                    }
                }
            }
        }
        now = step.end;
    }
    done.sort_by_key(|g| g.seq);
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, words: usize, out: u32) -> DesRequest {
        DesRequest {
            arrival_s: t,
            prompt: vec!["the"; words].join(" ") + &format!(" u{t}"),
            ask: LengthAsk {
                max_tokens: Some(out),
                min_tokens: None,
                ignore_eos: true,
            },
            priority: 0,
            model: None,
        }
    }

    #[test]
    fn closed_loop_keeps_concurrency_requests_in_flight() {
        let cfg = SimConfig::default();
        let reqs: Vec<_> = (0..20).map(|i| req(i as f64, 50, 10)).collect();
        let gt = run(
            &cfg,
            DesLoad::Closed {
                concurrency: 4,
                think_s: 0.0,
                stagger_s: 0.0,
                requests: reqs,
            },
        );
        assert_eq!(gt.len(), 20);
        // At any arrival, at most 4 requests are in the system.
        for g in &gt {
            let in_system = gt
                .iter()
                .filter(|o| o.arrival_us <= g.arrival_us && o.end_us > g.arrival_us)
                .count();
            assert!(in_system <= 4, "{in_system}");
        }
    }

    #[test]
    fn load_time_refuses_early_arrivals() {
        let cfg = SimConfig {
            load_time_ms: 500.0,
            ..SimConfig::default()
        };
        let gt = run(&cfg, DesLoad::Open(vec![req(0.1, 5, 3), req(0.6, 5, 3)]));
        assert_eq!(gt[0].outcome, SimOutcome::RefusedLoading);
        assert_eq!(gt[1].outcome, SimOutcome::Ok);
        assert_eq!(gt[1].output_tokens, 3);
    }
}
