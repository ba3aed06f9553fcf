//! The paired, sequential verdict of `goodput ab`, as pure functions of the blocks' figures.
//!
//! A *pair* is one A block and one B block sent the same plan back to back (ABBA order, so a
//! drift that is linear over two pairs cancels). Each headline metric's paired differences
//! (B − A, one per pair) are judged by a paired t interval. The interval's level comes from a
//! plan that spends the familywise error (1 − `measurement.confidence`) over the metrics
//! (Bonferroni) and over the looks (a Lan–DeMets spending function of O'Brien–Fleming type,
//! `2 − 2Φ(z/√t)` at information fraction `t` = pairs / budget): each look tests at the
//! increment it spends, so by the union bound no metric, at any look, reads a false difference
//! more often than the familywise rate however early the run stops. (Exact group-sequential
//! boundaries would be a little less conservative; this bound needs no numerical integration
//! and holds for any number of looks, which a run that may be interrupted needs.)
//!
//! A metric is decided when its interval excludes 0 (B better or worse) or lies within ± the
//! minimum effect of interest (`--mde`, relative to A's mean): then a difference that large is
//! ruled out ("no difference larger than the MDE"). Once decided, a metric keeps the look that
//! decided it. At the budget, one still open is *undecided*, with the smallest difference its
//! pairs could have detected at the contract's power. The replay ([`replay`]) derives all of
//! it from the pairs alone, so a report recomputes it from the bundle.
//!
//! statrs gives the t and normal quantiles; nothing here is hand-made beyond the formulas.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Which direction of a metric is the better one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// What the pairs say of B against A for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// B is better, beyond the interval.
    Better,
    /// B is worse, beyond the interval.
    Worse,
    /// No difference as large as the MDE: the interval lies within ± the MDE.
    Same,
    /// Neither yet (at the budget: undecided).
    Open,
}

impl Call {
    pub fn decided(self) -> bool {
        self != Call::Open
    }
}

/// The sequential test's design.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// 1 − the familywise error over all metrics and looks (`measurement.confidence`).
    pub confidence: f64,
    /// The power at which the detectable difference is stated.
    pub power: f64,
    /// The smallest difference of interest, relative to A's mean (0.05 = 5%).
    pub mde: f64,
    /// Metrics judged (the Bonferroni divisor).
    pub metrics: usize,
    /// The first look, in pairs.
    pub min_pairs: usize,
    /// The budget, in pairs: the last look.
    pub max_pairs: usize,
    /// Pairs between looks (2: one ABBA round).
    pub look_every: usize,
}

impl Design {
    /// The pair counts at which the test looks: the first at `min_pairs`, then every
    /// `look_every`, the last at `max_pairs`.
    pub fn looks(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (self.min_pairs..self.max_pairs)
            .step_by(self.look_every.max(1))
            .collect();
        v.push(self.max_pairs);
        v
    }

    /// The error one metric may spend over all looks.
    pub fn per_metric(&self) -> f64 {
        (1.0 - self.confidence) / self.metrics.max(1) as f64
    }

    /// The error one metric has spent by `pairs` pairs (O'Brien–Fleming-type spending).
    pub fn spent(&self, pairs: usize) -> f64 {
        let t = (pairs as f64 / self.max_pairs.max(1) as f64).min(1.0);
        if t <= 0.0 {
            return 0.0;
        }
        let a = self.per_metric();
        let n = Normal::standard();
        2.0 - 2.0 * n.cdf(n.inverse_cdf(1.0 - a / 2.0) / t.sqrt())
    }

    /// The level of the look at `pairs` whose previous look was at `prev` (0: none).
    pub fn level(&self, prev: usize, pairs: usize) -> f64 {
        (self.spent(pairs) - self.spent(prev)).max(f64::MIN_POSITIVE)
    }
}

/// One metric judged at one look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// Pairs with a value on both sides.
    pub pairs: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    /// Mean paired difference, B − A, in the metric's unit.
    pub diff: f64,
    /// Its interval at `level`.
    pub ci: [f64; 2],
    /// The error this look tested at (two-sided).
    pub level: f64,
    /// The smallest difference these pairs detect at `level` with the design's power, in the
    /// metric's unit.
    pub detectable: f64,
    pub call: Call,
}

impl Judged {
    /// A figure relative to A's mean (`None` when A's mean is 0).
    pub fn relative(&self, x: f64) -> Option<f64> {
        (self.mean_a != 0.0).then(|| x / self.mean_a.abs())
    }
}

/// Judges one metric's pairs `(a, b)` at one look.
pub fn judge(pairs: &[(f64, f64)], better: Better, level: f64, d: &Design) -> Option<Judged> {
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let diffs: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    let diff = diffs.iter().sum::<f64>() / nf;
    let var = diffs.iter().map(|x| (x - diff).powi(2)).sum::<f64>() / (nf - 1.0);
    let se = (var / nf).sqrt();
    let t = StudentsT::new(0.0, 1.0, nf - 1.0).ok()?;
    let q = t.inverse_cdf(1.0 - level / 2.0);
    let ci = [diff - q * se, diff + q * se];
    let mean_a = pairs.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean_b = pairs.iter().map(|p| p.1).sum::<f64>() / nf;
    let margin = d.mde * mean_a.abs();
    let higher = if ci[0] > 0.0 {
        Some(true)
    } else if ci[1] < 0.0 {
        Some(false)
    } else {
        None
    };
    let call = match (higher, better) {
        (Some(h), b) if h == (b == Better::Higher) => Call::Better,
        (Some(_), _) => Call::Worse,
        (None, _) if ci[0] >= -margin && ci[1] <= margin => Call::Same,
        (None, _) => Call::Open,
    };
    Some(Judged {
        pairs: n,
        mean_a,
        mean_b,
        diff,
        ci,
        level,
        detectable: (q + t.inverse_cdf(d.power)) * se,
        call,
    })
}

/// A metric's verdict after the looks so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The look that decided it, else the last one.
    pub judged: Option<Judged>,
    /// Pairs run when it was decided (`None`: still open).
    pub decided_at: Option<usize>,
}

/// Replays the design's looks over the pairs run so far (`series[m][k]`: metric `m`'s values
/// in pair `k`, `None` where a side had none) and returns each metric's verdict.
pub fn replay(d: &Design, better: &[Better], series: &[Vec<Option<(f64, f64)>>]) -> Vec<Verdict> {
    let run = series.iter().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<Verdict> = better
        .iter()
        .map(|_| Verdict {
            judged: None,
            decided_at: None,
        })
        .collect();
    let mut prev = 0;
    for look in d.looks().into_iter().filter(|&n| n <= run) {
        let level = d.level(prev, look);
        prev = look;
        for (m, v) in out.iter_mut().enumerate() {
            if v.decided_at.is_some() {
                continue;
            }
            let pairs: Vec<(f64, f64)> = series[m][..look].iter().flatten().copied().collect();
            if let Some(j) = judge(&pairs, better[m], level, d) {
                if j.call.decided() {
                    v.decided_at = Some(look);
                }
                v.judged = Some(j);
            }
        }
    }
    out
}

/// Whether the run may stop: every metric decided, or the budget reached.
pub fn finished(d: &Design, verdicts: &[Verdict], pairs: usize) -> bool {
    pairs >= d.max_pairs || verdicts.iter().all(|v| v.decided_at.is_some())
}

/// The pairs a metric needs to be decided within ± the MDE at the budget's last look, given
/// the standard deviation of its paired difference (from a pilot) and A's mean: the smallest
/// budget (in look steps) whose last look detects `mde × mean_a` at the design's power.
/// `None` beyond `limit` pairs.
pub fn pairs_needed(d: &Design, sd_diff: f64, mean_a: f64, limit: usize) -> Option<usize> {
    pairs_to_detect(d, sd_diff, d.mde * mean_a.abs(), limit)
}

/// The smallest budget (in look steps) whose last look detects a difference of `want` (in
/// the metric's units) at the design's power, given the paired difference's standard
/// deviation: [`pairs_needed`] for the MDE, and for a difference a pilot showed. `None` beyond
/// `limit` pairs.
pub fn pairs_to_detect(d: &Design, sd_diff: f64, want: f64, limit: usize) -> Option<usize> {
    let mut n = d.min_pairs.max(2);
    while n <= limit {
        if detectable_at_budget(&Design { max_pairs: n, ..*d }, sd_diff) <= want {
            return Some(n);
        }
        n += d.look_every.max(1);
    }
    None
}

/// The smallest difference the budget's last look detects at the design's power, given the
/// standard deviation of a paired difference.
pub fn detectable_at_budget(d: &Design, sd_diff: f64) -> f64 {
    let n = d.max_pairs.max(2);
    let prev = d.looks().iter().rev().nth(1).copied().unwrap_or(0);
    let level = d.level(prev, n);
    StudentsT::new(0.0, 1.0, n as f64 - 1.0).map_or(f64::INFINITY, |t| {
        (t.inverse_cdf(1.0 - level / 2.0) + t.inverse_cdf(d.power)) * sd_diff / (n as f64).sqrt()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(metrics: usize) -> Design {
        Design {
            confidence: 0.95,
            power: 0.8,
            mde: 0.05,
            metrics,
            min_pairs: 4,
            max_pairs: 12,
            look_every: 2,
        }
    }

    #[test]
    fn the_looks_spend_at_most_the_familywise_error() {
        let d = design(4);
        assert_eq!(d.looks(), vec![4, 6, 8, 10, 12]);
        let mut prev = 0;
        let total: f64 = d
            .looks()
            .into_iter()
            .map(|n| {
                let l = d.level(prev, n);
                prev = n;
                l
            })
            .sum();
        assert!((total - 0.05 / 4.0).abs() < 1e-12, "{total}");
        // O'Brien–Fleming: the first look spends almost nothing, the last the most.
        assert!(d.level(0, 4) < 1e-2 * d.level(10, 12));
    }

    #[test]
    fn a_clear_difference_is_worse_and_none_is_same() {
        let d = design(1);
        let worse: Vec<(f64, f64)> = (0..12)
            .map(|k| {
                (
                    20.0 + k as f64 * 0.1,
                    21.6 + k as f64 * 0.1 + (k % 3) as f64 * 0.05,
                )
            })
            .collect();
        let j = judge(&worse, Better::Lower, 0.01, &d).unwrap();
        assert_eq!(j.call, Call::Worse);
        assert!(j.ci[0] > 1.4 && j.ci[1] < 1.8, "{j:?}");
        assert_eq!(
            judge(&worse, Better::Higher, 0.01, &d).unwrap().call,
            Call::Better
        );
        let same: Vec<(f64, f64)> = (0..12)
            .map(|k| (20.0, 20.0 + if k % 2 == 0 { 0.1 } else { -0.1 }))
            .collect();
        assert_eq!(
            judge(&same, Better::Lower, 0.01, &d).unwrap().call,
            Call::Same
        );
        // Noise wider than the MDE decides nothing.
        let noisy: Vec<(f64, f64)> = (0..4)
            .map(|k| (20.0, 20.0 + if k % 2 == 0 { 4.0 } else { -4.0 }))
            .collect();
        assert_eq!(
            judge(&noisy, Better::Lower, 0.01, &d).unwrap().call,
            Call::Open
        );
        assert!(judge(&noisy[..1], Better::Lower, 0.01, &d).is_none());
    }

    #[test]
    fn a_decided_metric_keeps_its_look_and_the_rest_run_to_the_budget() {
        let d = design(2);
        let clear: Vec<Option<(f64, f64)>> = (0..12)
            .map(|k| Some((10.0 + (k % 2) as f64 * 0.01, 13.0 + (k % 3) as f64 * 0.01)))
            .collect();
        let noisy: Vec<Option<(f64, f64)>> = (0..12)
            .map(|k| Some((10.0, 10.0 + if k % 2 == 0 { 3.0 } else { -3.0 })))
            .collect();
        let v = replay(&d, &[Better::Lower, Better::Lower], &[clear, noisy]);
        assert_eq!(v[0].judged.as_ref().unwrap().call, Call::Worse);
        assert!(v[0].decided_at.unwrap() < 12, "{v:?}");
        assert_eq!(v[1].decided_at, None);
        assert_eq!(v[1].judged.as_ref().unwrap().call, Call::Open);
        assert_eq!(v[1].judged.as_ref().unwrap().pairs, 12);
        assert!(finished(&d, &v, 12) && !finished(&d, &v, 10));
    }

    #[test]
    fn the_pairs_needed_grow_with_the_noise() {
        let d = design(4);
        let quiet = pairs_needed(&d, 0.2, 20.0, 1000).unwrap();
        let loud = pairs_needed(&d, 1.0, 20.0, 1000).unwrap();
        assert!(quiet < loud, "{quiet} vs {loud}");
        assert_eq!(pairs_needed(&d, 50.0, 20.0, 40), None);
    }
}
