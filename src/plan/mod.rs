//! The plan: the deterministic list of requests a contract produces from its seed.
//!
//! Request `i`'s content (prompt, lengths) comes from its own ChaCha8 stream, so any request can
//! be generated alone (shards: request `i` belongs to shard `i mod N`) and closed-loop runs of
//! unbounded length need no list. Open-loop arrival times come from one further stream, in
//! order. ChaCha8 is named explicitly: `StdRng`'s algorithm may change between rand releases.
//! This module does no I/O and knows nothing of the target.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Normal};
use serde::Serialize;

use crate::contract::{Arrival, Contract, LengthDist, LoadModel};
use crate::text::WORDS;

/// Which part of a run a request belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    ColdStart,
    Warmup,
    Steady,
    Drain,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ColdStart => "cold_start",
            Phase::Warmup => "warmup",
            Phase::Steady => "steady",
            Phase::Drain => "drain",
        }
    }
}

/// One planned request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedRequest {
    pub index: u64,
    /// Phase by plan position (closed loop with a warm-up *duration* decides at send time).
    pub phase: Phase,
    /// Intended send time, microseconds after the run starts (open loop only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intended_us: Option<u64>,
    /// Planned prompt length, in the simulator tokenizer's tokens.
    pub input_tokens: u32,
    /// Planned output length (`max_tokens`).
    pub output_tokens: u32,
    pub prompt: String,
}

/// The schedule of an open-loop run.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenSchedule {
    /// Intended send times, µs from the start, warm-up first.
    pub arrivals_us: Vec<u64>,
    /// How many of them are warm-up.
    pub warmup: usize,
    /// Start and end of the steady window on the schedule: the end is the next scheduled
    /// arrival after the last steady one (or start + duration), so the window holds exactly
    /// the steady arrivals and their gaps.
    pub steady_start_us: u64,
    pub steady_end_us: u64,
}

/// A contract's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    seed: u64,
    input: LengthDist,
    output: LengthDist,
    /// Open-loop schedule; `None` for closed loop.
    pub open: Option<OpenSchedule>,
    /// Closed loop: warm-up requests by count, and total requests when bounded by count.
    pub closed_warmup: u64,
    pub closed_total: Option<u64>,
}

const ARRIVAL_STREAM: u64 = u64::MAX;

impl Plan {
    pub fn new(c: &Contract) -> Plan {
        let seed = c.workload.seed;
        let l = &c.load;
        let (open, closed_total) = match l.model {
            LoadModel::Open => (
                Some(open_schedule(
                    seed,
                    l.arrival(),
                    l.rate(),
                    l.burstiness(),
                    c.warmup.requests,
                    c.warmup.duration.map(|d| d.0),
                    l.requests,
                    l.duration.map(|d| d.0),
                )),
                None,
            ),
            LoadModel::Closed => (None, l.requests.map(|r| r + c.warmup.requests)),
        };
        Plan {
            seed,
            input: c.workload.input_tokens.clone(),
            output: c.workload.output_tokens.clone(),
            open,
            closed_warmup: c.warmup.requests,
            closed_total,
        }
    }

    /// Number of requests, when bounded.
    pub fn len(&self) -> Option<u64> {
        match &self.open {
            Some(o) => Some(o.arrivals_us.len() as u64),
            None => self.closed_total,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Request `index`, generated on its own.
    pub fn request(&self, index: u64) -> PlannedRequest {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        let input_tokens = sample_len(&self.input, &mut rng);
        let output_tokens = sample_len(&self.output, &mut rng);
        // The first word is unique to the request (and seed), so no two prompts share a prefix.
        let mut prompt = format!("r{index}s{}", self.seed);
        for _ in 1..input_tokens {
            let w = WORDS[(rand::Rng::next_u32(&mut rng) as usize) % WORDS.len()];
            prompt.push(' ');
            prompt.push_str(w);
        }
        let (phase, intended_us) = match &self.open {
            Some(o) => (
                if (index as usize) < o.warmup {
                    Phase::Warmup
                } else {
                    Phase::Steady
                },
                o.arrivals_us.get(index as usize).copied(),
            ),
            None => (
                if index < self.closed_warmup {
                    Phase::Warmup
                } else {
                    Phase::Steady
                },
                None,
            ),
        };
        PlannedRequest {
            index,
            phase,
            intended_us,
            input_tokens,
            output_tokens,
            prompt,
        }
    }

    /// The plan as JSON lines (at most `limit` requests): byte-identical for the same contract.
    pub fn to_jsonl(&self, limit: u64) -> String {
        let n = self.len().unwrap_or(limit).min(limit);
        let mut out = String::new();
        for i in 0..n {
            out.push_str(&serde_json::to_string(&self.request(i)).unwrap_or_default());
            out.push('\n');
        }
        out
    }
}

fn sample_len(d: &LengthDist, rng: &mut ChaCha8Rng) -> u32 {
    let clamp =
        |x: f64, min: u32, max: u32| (x.round().max(f64::from(min)).min(f64::from(max))) as u32;
    match *d {
        LengthDist::Fixed { value } => value,
        LengthDist::Uniform { min, max } => {
            let span = u64::from(max - min) + 1;
            min + (rand::Rng::next_u64(rng) % span) as u32
        }
        LengthDist::Normal {
            mean,
            stddev,
            min,
            max,
        } => match Normal::new(mean, stddev) {
            Ok(n) => clamp(n.sample(rng), min, max),
            Err(_) => clamp(mean, min, max),
        },
        LengthDist::Lognormal {
            mean,
            stddev,
            min,
            max,
        } => {
            // Moments of the lengths → parameters of the underlying normal.
            let sigma2 = (1.0 + (stddev * stddev) / (mean * mean)).ln();
            let mu = mean.ln() - sigma2 / 2.0;
            match LogNormal::new(mu, sigma2.sqrt()) {
                Ok(n) => clamp(n.sample(rng), min, max),
                Err(_) => clamp(mean, min, max),
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn open_schedule(
    seed: u64,
    arrival: Arrival,
    rate: f64,
    shape: f64,
    warmup_requests: u64,
    warmup_duration: Option<f64>,
    requests: Option<u64>,
    duration: Option<f64>,
) -> OpenSchedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(ARRIVAL_STREAM);
    let exp = Exp::new(rate).ok();
    let gamma = Gamma::new(shape, 1.0 / (rate * shape)).ok();
    let mut gap = move || -> f64 {
        match arrival {
            Arrival::Constant => 1.0 / rate,
            Arrival::Poisson => exp.map_or(1.0 / rate, |e| e.sample(&mut rng)),
            Arrival::Gamma => gamma.map_or(1.0 / rate, |g| g.sample(&mut rng)),
        }
    };
    let us = |t: f64| (t * 1e6).round() as u64;
    let mut t = 0.0;
    let mut arrivals = Vec::new();
    // Warm-up.
    let steady_start = match warmup_duration {
        Some(d) => {
            while t < d {
                arrivals.push(us(t));
                t += gap();
            }
            d.max(0.0)
        }
        None => {
            for _ in 0..warmup_requests {
                arrivals.push(us(t));
                t += gap();
            }
            t
        }
    };
    let warmup = arrivals.len();
    if t < steady_start {
        t = steady_start;
    }
    let steady_end = match (requests, duration) {
        (Some(n), _) => {
            for _ in 0..n {
                arrivals.push(us(t));
                t += gap();
            }
            t
        }
        (None, Some(d)) => {
            let end = steady_start + d;
            while t < end {
                arrivals.push(us(t));
                t += gap();
            }
            end
        }
        (None, None) => steady_start,
    };
    OpenSchedule {
        arrivals_us: arrivals,
        warmup,
        steady_start_us: us(steady_start),
        steady_end_us: us(steady_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::parse;
    use std::path::Path;

    fn contract(load: &str) -> Contract {
        parse(&format!("[workload]\nseed = 7\ninput_tokens = {{ dist = \"normal\", mean = 100, stddev = 30, min = 10, max = 200 }}\n[load]\n{load}"), Path::new("t.toml")).unwrap()
    }

    #[test]
    fn same_contract_same_plan_byte_for_byte() {
        let c = contract("model = \"open\"\nrate = 5\nrequests = 50\n");
        assert_eq!(Plan::new(&c).to_jsonl(1000), Plan::new(&c).to_jsonl(1000));
        let mut other = c.clone();
        other.workload.seed = 8;
        assert_ne!(
            Plan::new(&c).to_jsonl(1000),
            Plan::new(&other).to_jsonl(1000)
        );
    }

    #[test]
    fn prompts_have_the_planned_length_and_unique_first_words() {
        let c = contract("model = \"open\"\nrate = 5\nrequests = 50\n");
        let p = Plan::new(&c);
        let mut firsts = std::collections::HashSet::new();
        for i in 0..50 {
            let r = p.request(i);
            assert_eq!(crate::text::count_words(&r.prompt), r.input_tokens);
            assert!((10..=200).contains(&r.input_tokens));
            assert!(firsts.insert(r.prompt.split(' ').next().unwrap().to_owned()));
        }
    }

    #[test]
    fn poisson_schedule_has_the_offered_rate() {
        let c = contract("model = \"open\"\nrate = 50\nrequests = 5000\n");
        let o = Plan::new(&c).open.unwrap();
        assert_eq!(o.arrivals_us.len(), 5000);
        assert!(o.arrivals_us.windows(2).all(|w| w[0] <= w[1]));
        let secs = (o.steady_end_us - o.steady_start_us) as f64 / 1e6;
        let rate = 5000.0 / secs;
        // 5000 exponential gaps: the relative sd of the mean is 1/sqrt(5000) ≈ 1.4%.
        assert!((rate - 50.0).abs() < 50.0 * 0.06, "{rate}");
    }

    #[test]
    fn warmup_comes_first_and_duration_bounds_the_window() {
        let c = parse("[load]\nmodel = \"open\"\narrival = \"constant\"\nrate = 10\nduration = \"2s\"\n[warmup]\nrequests = 5\n", Path::new("t")).unwrap();
        let p = Plan::new(&c);
        let o = p.open.clone().unwrap();
        assert_eq!(o.warmup, 5);
        assert_eq!(o.steady_start_us, 500_000);
        assert_eq!(o.steady_end_us, 2_500_000);
        assert_eq!(o.arrivals_us.len(), 25);
        assert_eq!(p.request(4).phase, Phase::Warmup);
        assert_eq!(p.request(5).phase, Phase::Steady);
    }

    #[test]
    fn gamma_burstiness_changes_dispersion_not_rate() {
        let cv = |shape: f64| {
            let c = contract(&format!(
                "model = \"open\"\narrival = \"gamma\"\nburstiness = {shape}\nrate = 20\nrequests = 4000\n"
            ));
            let o = Plan::new(&c).open.unwrap();
            let gaps: Vec<f64> = o
                .arrivals_us
                .windows(2)
                .map(|w| (w[1] - w[0]) as f64)
                .collect();
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64;
            (m, var.sqrt() / m)
        };
        let (m1, cv_bursty) = cv(0.25);
        let (m2, cv_smooth) = cv(4.0);
        assert!((m1 - 50_000.0).abs() < 5_000.0 && (m2 - 50_000.0).abs() < 5_000.0);
        // Gamma CV = 1/sqrt(shape): 2.0 and 0.5.
        assert!(
            cv_bursty > 1.6 && cv_smooth < 0.6,
            "{cv_bursty} {cv_smooth}"
        );
    }
}
