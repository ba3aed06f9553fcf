//! Poisson arrivals: exponentially distributed gaps with mean 1/rate.

use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

use super::{Params, Process, Renewal};

#[derive(Debug)]
pub struct Poisson {
    rate: f64,
    exp: Option<Exp<f64>>,
    clock: Renewal,
}

impl Poisson {
    pub fn new(p: &Params) -> Poisson {
        Poisson {
            rate: p.rate,
            exp: Exp::new(p.rate).ok(),
            clock: Renewal::default(),
        }
    }
}

impl Process for Poisson {
    fn next_us(&mut self, rng: &mut ChaCha8Rng) -> Option<u64> {
        let (exp, rate) = (self.exp, self.rate);
        Some(
            self.clock
                .next_us(|| exp.map_or(1.0 / rate, |e| e.sample(rng))),
        )
    }
}
