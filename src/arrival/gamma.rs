//! Gamma arrivals: gamma-distributed gaps with mean 1/rate and shape `load.burstiness`
//! (shape 1 is Poisson; below 1 the arrivals come in bursts, above 1 more evenly).

use rand_chacha::ChaCha8Rng;
use rand_distr::Distribution;

use super::{Params, Process, Renewal};

#[derive(Debug)]
pub struct Gamma {
    rate: f64,
    gamma: Option<rand_distr::Gamma<f64>>,
    clock: Renewal,
}

impl Gamma {
    pub fn new(p: &Params) -> Gamma {
        Gamma {
            rate: p.rate,
            gamma: rand_distr::Gamma::new(p.shape, 1.0 / (p.rate * p.shape)).ok(),
            clock: Renewal::default(),
        }
    }
}

impl Process for Gamma {
    fn next_us(&mut self, rng: &mut ChaCha8Rng) -> Option<u64> {
        let (gamma, rate) = (self.gamma, self.rate);
        Some(
            self.clock
                .next_us(|| gamma.map_or(1.0 / rate, |g| g.sample(rng))),
        )
    }
}
