//! Trace replay: each row of `load.trace` at its own offset (after `load.speedup`). The
//! process ends with the trace.

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use super::{Params, Process};

#[derive(Debug)]
pub struct Trace {
    offsets_us: Arc<Vec<u64>>,
    row: usize,
}

impl Trace {
    pub fn new(p: &Params) -> Trace {
        Trace {
            offsets_us: p.trace_us.clone(),
            row: 0,
        }
    }
}

impl Process for Trace {
    fn next_us(&mut self, _: &mut ChaCha8Rng) -> Option<u64> {
        let t = self.offsets_us.get(self.row).copied();
        self.row += 1;
        t
    }
}
