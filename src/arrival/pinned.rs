//! Arrivals pinned to their total (`load.pin_total`), as vLLM's `bench serve` draws them: the
//! process's gaps for all `n` requests drawn first, then scaled together so that the last
//! request is sent exactly `n` / rate after the clock starts. The schedule's throughput is then
//! the rate by construction, where independent arrivals' spans vary by ±2/√n between seeds;
//! the gaps are no longer independent. vLLM 0.32 (`benchmarks/serve.py`, `get_request`) draws
//! `n` gaps, the first before its first request, and scales their running sum so its last
//! reaches `n` / rate; goodput's clock starts at the first send, so the schedule here is that
//! one less its first gap (the first request at 0, the last (`n` / rate) · (1 − g₁ / Σg) later).

use rand_chacha::ChaCha8Rng;

use super::Process;

#[derive(Debug)]
pub struct Pinned {
    inner: Box<dyn Process>,
    n: u64,
    rate: f64,
    /// The scaled schedule, µs, drawn at the first arrival.
    at_us: Vec<u64>,
    next: usize,
}

impl Pinned {
    /// `inner` drawn for `n` requests at `rate`.
    pub fn new(inner: Box<dyn Process>, n: u64, rate: f64) -> Pinned {
        Pinned {
            inner,
            n,
            rate,
            at_us: Vec::new(),
            next: 0,
        }
    }

    /// The inner process's first `n` + 1 arrivals (`n` gaps after its first at 0) as vLLM's
    /// cumulative delays, scaled to end at `n` / rate, each less the first.
    fn draw(&mut self, rng: &mut ChaCha8Rng) {
        let mut t: Vec<f64> = Vec::with_capacity(self.n as usize + 1);
        for _ in 0..=self.n {
            match self.inner.next_us(rng) {
                Some(us) => t.push(us as f64),
                None => break,
            }
        }
        let (Some(&first), Some(&last)) = (t.get(1), t.last()) else {
            return;
        };
        let scale = if last > 0.0 {
            self.n as f64 / self.rate * 1e6 / last
        } else {
            1.0
        };
        self.at_us = t[1..]
            .iter()
            .map(|d| ((d - first) * scale).round() as u64)
            .collect();
    }
}

impl Process for Pinned {
    fn next_us(&mut self, rng: &mut ChaCha8Rng) -> Option<u64> {
        if self.next == 0 && self.at_us.is_empty() {
            self.draw(rng);
        }
        let at = self.at_us.get(self.next).copied();
        self.next += 1;
        at
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::arrival::{Arrival, Params};

    /// Over many seeds, independent Poisson arrivals of 30 requests at 1 req/s span a time that
    /// varies by ~18%; pinned, the last request is always sent (30 − g₁·scale) s in, so the
    /// span's spread is one gap's, and every schedule's gaps are the drawn ones scaled.
    #[test]
    fn the_last_request_leaves_at_n_over_rate_less_the_first_gap() {
        let p = Params {
            rate: 1.0,
            shape: 1.0,
            ..Params::default()
        };
        for seed in 0..50 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut pinned = Pinned::new(Arrival::Poisson.process(&p), 30, 1.0);
            let at: Vec<u64> = std::iter::from_fn(|| pinned.next_us(&mut rng)).collect();
            assert_eq!(at.len(), 30);
            assert_eq!(at[0], 0);
            assert!(at.windows(2).all(|w| w[0] <= w[1]));
            // Drawn again, unscaled, from the same seed: the first gap, and the whole sum.
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut raw = Arrival::Poisson.process(&p);
            let t: Vec<u64> = (0..=30).filter_map(|_| raw.next_us(&mut rng)).collect();
            let scale = 30e6 / t[30] as f64;
            let lead = t[1] as f64 * scale;
            let last = at[29] as f64;
            assert!(
                (last + lead - 30e6).abs() < 2.0,
                "seed {seed}: last {last} µs + lead {lead} µs"
            );
        }
    }
}
