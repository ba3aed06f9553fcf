//! Constant arrivals: one request every 1/rate seconds.

use rand_chacha::ChaCha8Rng;

use super::{Params, Process, Renewal};

#[derive(Debug)]
pub struct Constant {
    gap_s: f64,
    clock: Renewal,
}

impl Constant {
    pub fn new(p: &Params) -> Constant {
        Constant {
            gap_s: 1.0 / p.rate,
            clock: Renewal::default(),
        }
    }
}

impl Process for Constant {
    fn next_us(&mut self, _: &mut ChaCha8Rng) -> Option<u64> {
        Some(self.clock.next_us(|| self.gap_s))
    }
}
