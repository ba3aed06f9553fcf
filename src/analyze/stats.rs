//! Statistics with no I/O.
//!
//! Percentiles are computed from raw values by linear interpolation between closest ranks —
//! Hyndman & Fan (1996) definition 7, numpy's default `method="linear"` — never from histograms
//! and never by averaging percentiles. Hand-written because it is ten lines and must match numpy
//! exactly; hdrhistogram is used only for the live progress view, where approximation is fine.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, StudentsT};

/// The p-th percentile (0..=100) of sorted values, numpy "linear".
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The reported percentiles.
pub const PERCENTILES: [(f64, &str); 5] = [
    (50.0, "p50"),
    (90.0, "p90"),
    (95.0, "p95"),
    (99.0, "p99"),
    (99.9, "p99.9"),
];

/// A distribution-free 95% confidence interval for the p-th percentile of sorted values, from
/// order statistics: with B ~ Binomial(n, p/100), the interval [x₍ᵣ₎, x₍ₛ₎] (1-based ranks)
/// with r = the 2.5% quantile of B and s = its 97.5% quantile + 1 covers the true percentile with
/// probability ≥ 95% (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2).
/// `None` when n is too small for a two-sided interval at that percentile.
pub fn percentile_ci(sorted: &[f64], p: f64) -> Option<[f64; 2]> {
    let n = sorted.len() as u64;
    if n == 0 {
        return None;
    }
    let b = Binomial::new((p / 100.0).clamp(0.0, 1.0), n).ok()?;
    let r = binomial_quantile(&b, n, 0.025);
    let s = binomial_quantile(&b, n, 0.975) + 1;
    (r >= 1 && s <= n).then(|| [sorted[(r - 1) as usize], sorted[(s - 1) as usize]])
}

/// The smallest k in 0..=n with P[B ≤ k] ≥ q, by bisection on the CDF. (statrs's own
/// `inverse_cdf` panics for some small n, so it is not used.)
fn binomial_quantile(b: &Binomial, n: u64, q: f64) -> u64 {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if b.cdf(mid) >= q {
            hi = mid
        } else {
            lo = mid + 1
        }
    }
    lo
}

/// Mean, sample standard deviation, coefficient of variation and a 95% Student-t confidence
/// interval of a few run-level values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverRuns {
    pub values: Vec<f64>,
    pub mean: f64,
    pub stddev: f64,
    /// stddev / |mean|.
    pub cv: f64,
    /// 95% CI of the mean (Student t, n − 1 degrees of freedom); `None` with fewer than 2 runs.
    pub ci95: Option<[f64; 2]>,
}

impl OverRuns {
    pub fn of(values: Vec<f64>) -> OverRuns {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n.max(1.0);
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let sd = var.sqrt();
        let ci95 = (values.len() > 1)
            .then(|| StudentsT::new(0.0, 1.0, n - 1.0).ok())
            .flatten()
            .map(|t| {
                let h = t.inverse_cdf(0.975) * sd / n.sqrt();
                [mean - h, mean + h]
            });
        OverRuns {
            cv: if mean != 0.0 { sd / mean.abs() } else { 0.0 },
            values,
            mean,
            stddev: sd,
            ci95,
        }
    }
}

/// Welch's unequal-variance t interval for mean(b) − mean(a) at 95% (Welch 1947; degrees of
/// freedom by the Welch–Satterthwaite equation). `None` with fewer than 2 values a side.
pub fn welch_ci(a: &[f64], b: &[f64]) -> Option<(f64, [f64; 2])> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ra, rb) = (OverRuns::of(a.to_vec()), OverRuns::of(b.to_vec()));
    let (va, vb) = (
        ra.stddev.powi(2) / a.len() as f64,
        rb.stddev.powi(2) / b.len() as f64,
    );
    let diff = rb.mean - ra.mean;
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return Some((diff, [diff, diff]));
    }
    let df = (va + vb).powi(2)
        / (va.powi(2) / (a.len() as f64 - 1.0) + vb.powi(2) / (b.len() as f64 - 1.0));
    let t = StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(0.975);
    Some((diff, [diff - t * se, diff + t * se]))
}

/// Percentile-bootstrap 95% interval for stat(b) − stat(a), resampling requests with a fixed
/// seed (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13). It sees only
/// request-to-request variation, not run-to-run: weaker evidence than [`welch_ci`] over runs.
pub fn bootstrap_ci(
    a: &[f64],
    b: &[f64],
    stat: fn(&mut [f64]) -> f64,
    resamples: usize,
) -> Option<(f64, [f64; 2])> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let diff = stat(&mut b.to_vec()) - stat(&mut a.to_vec());
    let mut rng = ChaCha8Rng::seed_from_u64(0x0006_00d9_u64);
    let mut pick = |v: &[f64]| -> Vec<f64> {
        (0..v.len())
            .map(|_| v[(rand::Rng::next_u64(&mut rng) % v.len() as u64) as usize])
            .collect()
    };
    let mut diffs: Vec<f64> = (0..resamples)
        .map(|_| stat(&mut pick(b)) - stat(&mut pick(a)))
        .collect();
    diffs.sort_by(f64::total_cmp);
    Some((
        diff,
        [
            percentile_sorted(&diffs, 2.5)?,
            percentile_sorted(&diffs, 97.5)?,
        ],
    ))
}

/// Summary of a distribution. Sample standard deviation (n − 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dist {
    pub count: usize,
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    pub max: f64,
    /// Distribution-free 95% confidence intervals of p50, p90, p95, p99 and p99.9 (order
    /// statistics); `None` where there are too few values for one.
    pub ci95: [Option<[f64; 2]>; 5],
}

impl Dist {
    /// `None` when there are no values.
    pub fn of(mut values: Vec<f64>) -> Option<Dist> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let p = |q| percentile_sorted(&values, q).unwrap_or(f64::NAN);
        Some(Dist {
            count: values.len(),
            min: values[0],
            mean,
            stddev: var.sqrt(),
            p50: p(50.0),
            p90: p(90.0),
            p95: p(95.0),
            p99: p(99.0),
            p99_9: p(99.9),
            max: values[values.len() - 1],
            ci95: PERCENTILES.map(|(q, _)| percentile_ci(&values, q)),
        })
    }
}

/// The fewest requests for which observing at most `misses` SLO misses shows, with the given
/// confidence, that the true miss rate is below `1 − percentile/100`.
///
/// This is MLPerf LoadGen's early-stopping criterion: the smallest n with
/// `P[Binomial(n, 1 − p) ≤ misses] ≤ 1 − confidence`. For p99 at 99% confidence it gives 459
/// requests with no miss and 662 with one, as MLPerf's rules state.
pub fn min_requests_for(percentile: f64, misses: u64, confidence: f64) -> u64 {
    let tail = 1.0 - percentile / 100.0;
    if tail <= 0.0 {
        return u64::MAX;
    }
    let alpha = 1.0 - confidence;
    let ok = |n: u64| -> bool {
        if n <= misses {
            return false;
        }
        Binomial::new(tail, n)
            .map(|b| b.cdf(misses) <= alpha)
            .unwrap_or(false)
    };
    // The CDF falls as n grows: double to bracket, then bisect.
    let (mut lo, mut hi) = (misses, (misses + 1).max(1));
    while !ok(hi) {
        lo = hi;
        hi = hi.saturating_mul(2);
        if hi > 1 << 40 {
            return u64::MAX;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) { hi = mid } else { lo = mid }
    }
    hi
}

/// Whether warm-up has settled: the median of the last `window` TTFTs differs from the median of
/// the `window` before it by less than `threshold`, relative to the earlier one. The same rule the
/// collector applies live, so the summary can say why warm-up ended.
pub fn settled(ttfts: &[f64], window: usize, threshold: f64) -> bool {
    if window == 0 || ttfts.len() < 2 * window {
        return false;
    }
    let n = ttfts.len();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        percentile_sorted(&v, 50.0).unwrap_or(f64::NAN)
    };
    let (before, last) = (
        median(&ttfts[n - 2 * window..n - window]),
        median(&ttfts[n - window..]),
    );
    before > 0.0 && ((last - before).abs() / before) < threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_compares_the_last_two_windows() {
        let mut v: Vec<f64> = (0..10).map(|i| 100.0 - 9.0 * f64::from(i)).collect();
        assert!(!settled(&v, 3, 0.05));
        v.extend([10.0, 10.2, 9.9, 10.1, 10.0, 9.8]);
        assert!(settled(&v, 3, 0.05));
        assert!(!settled(&v, 3, 0.0));
        assert!(!settled(&v[..5], 3, 0.5), "needs two full windows");
    }

    use proptest::prelude::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) = [2.5, 3.7, 3.97]
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 50.0), Some(2.5));
        assert!((percentile_sorted(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert!((percentile_sorted(&v, 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile_sorted(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile_sorted(&[], 50.0), None);
    }

    #[test]
    fn dist_of_known_sample() {
        let d = Dist::of(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((d.count, d.min, d.max, d.mean), (4, 1.0, 4.0, 2.5));
        assert!((d.stddev - 1.290_994_448_735_805_6).abs() < 1e-12);
    }

    #[test]
    fn percentile_ci_uses_binomial_ranks() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        // Binomial(100, 0.5): 2.5% quantile 40, 97.5% quantile 60 → ranks 40 and 61.
        assert_eq!(percentile_ci(&v, 50.0), Some([40.0, 61.0]));
        // 100 values cannot bound p99 from above.
        assert_eq!(percentile_ci(&v, 99.0), None);
        let big: Vec<f64> = (1..=1000).map(f64::from).collect();
        let [lo, hi] = percentile_ci(&big, 99.0).unwrap();
        assert!(lo < 990.0 && hi > 990.0 && hi <= 1000.0, "{lo} {hi}");
    }

    #[test]
    fn percentile_ci_never_panics_on_small_samples() {
        for n in 1..60 {
            let v: Vec<f64> = (0..n).map(f64::from).collect();
            for (p, _) in PERCENTILES {
                if let Some([lo, hi]) = percentile_ci(&v, p) {
                    assert!(lo <= hi);
                }
            }
        }
    }

    #[test]
    fn student_t_and_welch_match_hand_computation() {
        // values 10, 12, 14: mean 12, sd 2, t(0.975, 2) = 4.302653 → half-width 4.968
        let r = OverRuns::of(vec![10.0, 12.0, 14.0]);
        assert_eq!((r.mean, r.stddev), (12.0, 2.0));
        let [lo, hi] = r.ci95.unwrap();
        assert!(
            (hi - 12.0 - 4.302_653 * 2.0 / 3f64.sqrt()).abs() < 1e-4
                && (12.0 - lo - (hi - 12.0)).abs() < 1e-9
        );
        // Welch: a = [10, 12, 14] (var 4), b = [20, 21, 22] (var 1): diff 9,
        // se = sqrt(4/3 + 1/3) = 1.29099, df = (5/3)² / ((4/3)²/2 + (1/3)²/2) = 2.94118,
        // t(0.975, 2.94118) ≈ 3.2258 → half-width ≈ 4.1645.
        let (d, [lo, hi]) = welch_ci(&[10.0, 12.0, 14.0], &[20.0, 21.0, 22.0]).unwrap();
        assert_eq!(d, 9.0);
        assert!(((hi - lo) / 2.0 - 4.1645).abs() < 0.01, "{lo} {hi}");
        assert!(welch_ci(&[1.0], &[2.0, 3.0]).is_none());
    }

    #[test]
    fn bootstrap_brackets_a_clear_shift_and_not_a_null_one() {
        let a: Vec<f64> = (0..200).map(|i| 100.0 + f64::from(i % 10)).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 20.0).collect();
        let mean = |v: &mut [f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (d, [lo, hi]) = bootstrap_ci(&a, &b, mean, 500).unwrap();
        assert!((d - 20.0).abs() < 1e-9 && lo > 18.0 && hi < 22.0);
        let (_, [lo, hi]) = bootstrap_ci(&a, &a, mean, 500).unwrap();
        assert!(lo <= 0.0 && hi >= 0.0);
    }

    #[test]
    fn early_stopping_matches_mlperf() {
        assert_eq!(min_requests_for(99.0, 0, 0.99), 459);
        assert_eq!(min_requests_for(99.0, 1, 0.99), 662);
        assert_eq!(min_requests_for(90.0, 0, 0.99), 44);
    }

    proptest! {
        #[test]
        fn percentiles_stay_within_range_and_are_monotone(mut v in proptest::collection::vec(-1e6f64..1e6, 1..200)) {
            v.sort_by(f64::total_cmp);
            let mut last = f64::NEG_INFINITY;
            for p in [0.0, 10.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
                let x = percentile_sorted(&v, p).unwrap();
                prop_assert!(x >= v[0] && x <= v[v.len() - 1]);
                prop_assert!(x >= last);
                last = x;
            }
        }
    }
}
