//! A load program's arrivals (`[[load.stage]]`): one arrival stream whose rate follows the
//! stages, each arrival labelled with the stage it falls in.
//!
//! Time-rescaling: each stage's process draws gaps at rate 1 (its shape: Poisson, constant,
//! gamma), and a gap of `g` is spent at the stage's rate, so a stage of rate `r(t)` has `Λ(t) =
//! ∫ r` arrivals by time `t`. A ramp is linear, so `Λ` is a quadratic whose inverse is closed
//! form. A gap that crosses a stage's end continues at the next stage's rate. After the last
//! stage the stream goes on at its final rate, unlabelled: the drain, which keeps the load on
//! while the program's last requests finish.

use rand_chacha::ChaCha8Rng;

use std::sync::Arc;

use super::edge::{EdgeControl, EdgeRun, EdgeSpec, Steered};
use super::{Arrival, Params, Process};

/// One stage as the stream runs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Leg {
    /// Rate at its start and at its end, requests per second.
    pub from_rps: f64,
    pub to_rps: f64,
    /// How long it lasts (s), or how many arrivals.
    pub end: LegEnd,
    pub arrival: Arrival,
    pub burstiness: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LegEnd {
    Seconds(f64),
    Requests(u64),
}

impl Leg {
    /// Arrivals it holds at rate-1 time (`Λ` over the whole stage); unbounded for a count.
    fn capacity(&self) -> f64 {
        match self.end {
            LegEnd::Seconds(t) => (self.from_rps + self.to_rps) / 2.0 * t,
            LegEnd::Requests(_) => f64::INFINITY,
        }
    }

    /// Seconds into the stage at which `u` (rate-1 time into it) is reached: the inverse of
    /// `Λ(t) = a·t + (b − a)·t²/(2T)`, in the form that stays exact when `b ≈ a`.
    fn seconds_at(&self, u: f64) -> f64 {
        let a = self.from_rps;
        let slope = match self.end {
            LegEnd::Seconds(t) if t > 0.0 => (self.to_rps - a) / t,
            _ => 0.0,
        };
        if u <= 0.0 {
            return 0.0;
        }
        2.0 * u / (a + (a * a + 2.0 * slope * u).max(0.0).sqrt())
    }

    fn process(&self) -> Box<dyn Process> {
        self.arrival.process(&Params {
            rate: 1.0,
            shape: self.burstiness,
            trace_us: Default::default(),
            pinned: None,
        })
    }
}

/// The program's stream of (intended send µs, stage index; `None` past the program's end).
#[derive(Debug)]
pub struct Program {
    legs: Vec<Leg>,
    /// The stage in force, its start (s) and rate-1 time spent in it.
    k: usize,
    start_s: f64,
    u: f64,
    /// Arrivals in the stage in force.
    n: u64,
    /// Each stage's process and the last rate-1 time it drew (µs); the stages after the last
    /// use the last's.
    processes: Vec<(Box<dyn Process>, u64)>,
    started: bool,
    /// An edge search after the fixed stages: its spec and control until it starts, then it.
    edge: Option<Edge>,
}

#[derive(Debug)]
enum Edge {
    Pending(EdgeSpec, Arc<EdgeControl>),
    Running(Box<EdgeRun>),
}

impl Program {
    /// The fixed stages `legs`, then the edge search `edge` if any.
    pub fn new(legs: Vec<Leg>, edge: Option<Steered>, rng: &mut ChaCha8Rng) -> Program {
        let processes = legs
            .iter()
            .map(|l| {
                let mut p = l.process();
                // A renewal process's first point is its origin.
                let first = p.next_us(rng).unwrap_or(0);
                (p, first)
            })
            .collect();
        Program {
            legs,
            k: 0,
            start_s: 0.0,
            u: 0.0,
            n: 0,
            processes,
            started: false,
            edge: edge.map(|(s, c)| Edge::Pending(s, c)),
        }
    }

    /// The next arrival: its intended time (µs from the start), stage, and an edge step's
    /// rate.
    pub fn next(&mut self, rng: &mut ChaCha8Rng) -> Option<(u64, Option<u32>, Option<f64>)> {
        if let Some(Edge::Running(e)) = &mut self.edge {
            let (t, stage, rate) = e.next(rng);
            return Some(((t * 1e6).round() as u64, stage, Some(rate)));
        }
        if self.legs.is_empty() {
            return self.start_edge(0.0, rng);
        }
        if self.started {
            let p = self.k.min(self.legs.len() - 1);
            let (process, last) = &mut self.processes[p];
            let at = process.next_us(rng)?;
            self.u += at.saturating_sub(*last) as f64 / 1e6;
            *last = at;
        }
        self.started = true;
        // Cross the stage ends the gap reaches past.
        while self.k < self.legs.len() && self.u > self.legs[self.k].capacity() {
            let leg = self.legs[self.k];
            self.u -= leg.capacity();
            if let LegEnd::Seconds(t) = leg.end {
                self.start_s += t;
            }
            self.next_leg();
        }
        let Some(leg) = self.legs.get(self.k).copied() else {
            if self.edge.is_some() {
                // The edge starts where the fixed stages end (a count-bound one: at its last
                // arrival's time).
                let last = self.legs[self.legs.len() - 1];
                let t = self.start_s + self.u / last.to_rps.max(last.from_rps).max(1e-9);
                return self.start_edge(t, rng);
            }
            // The drain: on at the last stage's final rate (its start rate if that is 0).
            let last = self.legs[self.legs.len() - 1];
            let r = if last.to_rps > 0.0 {
                last.to_rps
            } else {
                last.from_rps
            };
            return Some((
                ((self.start_s + self.u / r) * 1e6).round() as u64,
                None,
                None,
            ));
        };
        let t = self.start_s + leg.seconds_at(self.u);
        let stage = self.k as u32;
        self.n += 1;
        if let LegEnd::Requests(n) = leg.end
            && self.n >= n
        {
            // The next stage starts at this arrival.
            self.start_s = t;
            self.u = 0.0;
            self.next_leg();
        }
        Some(((t * 1e6).round() as u64, Some(stage), None))
    }

    /// The edge search begins at `t` seconds; `None` without one (the program is over).
    fn start_edge(
        &mut self,
        t: f64,
        rng: &mut ChaCha8Rng,
    ) -> Option<(u64, Option<u32>, Option<f64>)> {
        let Some(Edge::Pending(spec, control)) = self.edge.take() else {
            return None;
        };
        self.edge = Some(Edge::Running(Box::new(EdgeRun::new(spec, control, t, rng))));
        self.next(rng)
    }

    fn next_leg(&mut self) {
        self.k += 1;
        self.n = 0;
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn hold(rate: f64, end: LegEnd) -> Leg {
        Leg {
            from_rps: rate,
            to_rps: rate,
            end,
            arrival: Arrival::Poisson,
            burstiness: 1.0,
        }
    }

    fn draw(legs: Vec<Leg>, n: usize) -> Vec<(u64, Option<u32>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut p = Program::new(legs, None, &mut rng);
        (0..n)
            .filter_map(|_| p.next(&mut rng))
            .map(|(t, k, _)| (t, k))
            .collect()
    }

    #[test]
    fn each_stage_offers_its_rate_and_the_drain_follows() {
        let got = draw(
            vec![
                hold(20.0, LegEnd::Seconds(50.0)),
                hold(100.0, LegEnd::Seconds(20.0)),
            ],
            5000,
        );
        let count = |s: u32| got.iter().filter(|(_, k)| *k == Some(s)).count() as f64;
        assert!((count(0) / 1000.0 - 1.0).abs() < 0.1, "{}", count(0));
        assert!((count(1) / 2000.0 - 1.0).abs() < 0.1, "{}", count(1));
        // Every arrival of stage 0 lies before 50 s, of stage 1 in [50, 70), drain after.
        for (t, k) in &got {
            let s = *t as f64 / 1e6;
            match k {
                Some(0) => assert!(s < 50.0),
                Some(1) => assert!((50.0..70.0).contains(&s)),
                _ => assert!(s >= 70.0),
            }
        }
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn a_ramp_offers_the_integral_of_its_rate() {
        let ramp = Leg {
            from_rps: 0.0,
            to_rps: 100.0,
            end: LegEnd::Seconds(40.0),
            arrival: Arrival::Constant,
            burstiness: 1.0,
        };
        let got = draw(vec![ramp, hold(1.0, LegEnd::Requests(3))], 3000);
        // Constant arrivals: exactly Λ(T) = 2000 in the ramp (±1 at its ends); the first half
        // of the time holds a quarter of them (Λ(T/2) = 500).
        let in_ramp: Vec<f64> = got
            .iter()
            .filter(|(_, k)| *k == Some(0))
            .map(|(t, _)| *t as f64 / 1e6)
            .collect();
        assert!(
            (in_ramp.len() as i64 - 2000).abs() <= 1,
            "{}",
            in_ramp.len()
        );
        let first_half = in_ramp.iter().filter(|t| **t < 20.0).count() as i64;
        assert!((first_half - 500).abs() <= 1, "{first_half}");
        // A count-bound stage holds exactly its count.
        assert_eq!(got.iter().filter(|(_, k)| *k == Some(1)).count(), 3);
    }
}
