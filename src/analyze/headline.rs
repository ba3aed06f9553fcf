//! The headline metrics: one definition of each (its name in JSON and predictions, unit,
//! direction, how it is read from a summary and, for latency percentiles, which per-request
//! metric and percentile it is). `compare`, repeat sets, predictions and reports all read
//! them from here, so a new headline metric is one variant.

use super::{Dist, RequestMetrics, Summary};

/// Reads one per-request latency (ms) from a request's metrics.
pub type PerRequest = fn(&RequestMetrics) -> Option<f64>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    TtftP50,
    TtftP99,
    TpotP50,
    TpotP99,
    E2eP99,
    OutputTokensPerS,
    GoodputRps,
    Attainment,
}

impl Headline {
    /// Every headline metric, in the order reports list them.
    pub const ALL: [Headline; 8] = [
        Headline::TtftP50,
        Headline::TtftP99,
        Headline::TpotP50,
        Headline::TpotP99,
        Headline::E2eP99,
        Headline::OutputTokensPerS,
        Headline::GoodputRps,
        Headline::Attainment,
    ];

    /// The name in JSON, `compare` and `[prediction]` (with its unit as a suffix).
    pub fn name(self) -> &'static str {
        match self {
            Headline::TtftP50 => "ttft_p50_ms",
            Headline::TtftP99 => "ttft_p99_ms",
            Headline::TpotP50 => "tpot_p50_ms",
            Headline::TpotP99 => "tpot_p99_ms",
            Headline::E2eP99 => "e2e_p99_ms",
            Headline::OutputTokensPerS => "output_tokens_per_s",
            Headline::GoodputRps => "goodput_rps",
            Headline::Attainment => "attainment",
        }
    }

    pub fn from_name(name: &str) -> Option<Headline> {
        Headline::ALL.into_iter().find(|h| h.name() == name)
    }

    pub fn unit(self) -> &'static str {
        match self {
            Headline::OutputTokensPerS => "tok/s",
            Headline::GoodputRps => "req/s",
            Headline::Attainment => "",
            _ => "ms",
        }
    }

    /// Latencies are better lower; throughput, goodput and attainment higher.
    pub fn lower_is_better(self) -> bool {
        self.latency().is_some()
    }

    /// For a latency percentile: the per-request metric it is taken over and the percentile.
    pub fn latency(self) -> Option<(PerRequest, f64)> {
        let ttft: PerRequest = |m| m.ttft_ms();
        let tpot: PerRequest = |m| m.tpot_ms();
        let e2e: PerRequest = |m| m.e2e_ms();
        match self {
            Headline::TtftP50 => Some((ttft, 50.0)),
            Headline::TtftP99 => Some((ttft, 99.0)),
            Headline::TpotP50 => Some((tpot, 50.0)),
            Headline::TpotP99 => Some((tpot, 99.0)),
            Headline::E2eP99 => Some((e2e, 99.0)),
            _ => None,
        }
    }

    /// Its value in a summary's steady phase; `None` when not measured.
    pub fn of(self, s: &Summary) -> Option<f64> {
        let st = &s.steady;
        let d = |x: &Option<Dist>, f: fn(&Dist) -> f64| x.as_ref().map(f);
        match self {
            Headline::TtftP50 => d(&st.stats.ttft_ms, |d| d.p50),
            Headline::TtftP99 => d(&st.stats.ttft_ms, |d| d.p99),
            Headline::TpotP50 => d(&st.stats.tpot_ms, |d| d.p50),
            Headline::TpotP99 => d(&st.stats.tpot_ms, |d| d.p99),
            Headline::E2eP99 => d(&st.stats.e2e_ms, |d| d.p99),
            Headline::OutputTokensPerS => st.throughput.output_tokens_per_s,
            Headline::GoodputRps => st.slo.as_ref().and_then(|x| x.goodput_rps),
            Headline::Attainment => st.slo.as_ref().map(|x| x.attainment),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_read_back() {
        for h in Headline::ALL {
            assert_eq!(Headline::from_name(h.name()), Some(h));
            assert_eq!(h.lower_is_better(), h.unit() == "ms", "{h:?}");
        }
    }
}
