//! Statistics with no I/O.
//!
//! Percentiles are computed from raw values by linear interpolation between closest ranks —
//! Hyndman & Fan (1996) definition 7, numpy's default `method="linear"` — never from histograms
//! and never by averaging percentiles. Hand-written because it is ten lines and must match numpy
//! exactly; hdrhistogram is used only for the live progress view, where approximation is fine.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

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

/// Summary of a distribution. Sample standard deviation (n − 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;
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
