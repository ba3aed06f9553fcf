//! Change points in one metric's series, and whether its newest value stands out (pure).
//!
//! Change points: E-divisive means (Matteson & James, "A Nonparametric Approach for Multiple
//! Change Point Analysis of Multivariate Data", JASA 109(505), 2014), the method Apache Otava
//! (formerly Hunter, Fleming et al., ICPE 2023) and MongoDB's performance CI use. For a segment
//! x₀…xₙ₋₁ and a split τ into X = x[..τ] (m values) and Y = x[τ..] (k values), with α = 1:
//!
//! ```text
//! Ê(τ) = 2/(mk) Σ|Xᵢ − Yⱼ| − 1/C(m,2) Σ|Xᵢ − Xₗ| − 1/C(k,2) Σ|Yⱼ − Yₗ|,   Q̂(τ) = mk/(m+k) · Ê(τ)
//! ```
//!
//! The split of largest Q̂ over every segment is tested by permutation: the segment's values
//! are shuffled (seeded, so the same store gives the same answer) and Q̂'s maximum over splits
//! recomputed; p = (shuffles at least as large + 1) / (shuffles + 1). A significant split
//! divides its segment and the search repeats; the first insignificant one ends it. Two
//! simplifications of the paper's algorithm, both as in MongoDB's implementation: a segment
//! ends at the next change point (κ is not searched), and only the chosen segment is shuffled.
//! Hand-written: the crates of the field (`changepoint`, `augurs-changepoint`) implement
//! Bayesian online and PELT detectors, not E-divisive with a permutation test.
//!
//! The newest value: a one-sided Student-t prediction interval of the values since the last
//! change point (a new observation from the same normal population lies above
//! x̄ + t₁₋α,ₙ₋₁ · s · √(1 + 1/n) with probability α).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A change point: the index of the first value after it, and its permutation p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub at: usize,
    pub p: f64,
}

/// Q̂ at every split of `x` that leaves at least `min` values a side: the best (τ, Q̂).
/// O(n²): the within and between sums grow by one row as τ moves right.
fn best_split(x: &[f64], min: usize) -> Option<(usize, f64)> {
    let n = x.len();
    if n < 2 * min || min < 2 {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    let row: Vec<f64> = (0..n).map(|i| (0..n).map(|j| d(i, j)).sum()).collect();
    let total: f64 = row.iter().sum::<f64>() / 2.0;
    let (mut within_left, mut rows_left) = (0.0, 0.0);
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n {
        // x[tau − 1] joins the left side.
        let j = tau - 1;
        within_left += (0..j).map(|i| d(i, j)).sum::<f64>();
        rows_left += row[j];
        let (m, k) = (tau as f64, (n - tau) as f64);
        if tau < min || n - tau < min {
            continue;
        }
        let between = rows_left - 2.0 * within_left;
        let within_right = total - within_left - between;
        let e = 2.0 * between / (m * k)
            - within_left / (m * (m - 1.0) / 2.0)
            - within_right / (k * (k - 1.0) / 2.0);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// The permutations a test at `alpha` draws: enough that a split no shuffle matches reads
/// p well under `alpha` (p's smallest value is 1/(R+1)).
fn shuffles(alpha: f64) -> usize {
    ((3.0 / alpha).ceil() as usize).clamp(199, 30_000)
}

/// Change points of `x` significant at `alpha`, each side of each at least `min` values,
/// in order. `seed` fixes the shuffles.
pub fn change_points(x: &[f64], alpha: f64, min: usize, seed: u64) -> Vec<Split> {
    let mut found: Vec<Split> = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    loop {
        let mut bounds: Vec<usize> = found.iter().map(|s| s.at).collect();
        bounds.insert(0, 0);
        bounds.push(x.len());
        let candidate = bounds
            .windows(2)
            .filter_map(|w| best_split(&x[w[0]..w[1]], min).map(|(t, q)| (w[0], w[1], t, q)))
            .max_by(|a, b| a.3.total_cmp(&b.3));
        let Some((from, to, tau, q)) = candidate else {
            break;
        };
        if q <= 0.0 {
            break;
        }
        let r = shuffles(alpha);
        let mut seg = x[from..to].to_vec();
        let (mut as_large, mut drawn) = (0usize, 0usize);
        // Stop shuffling once the split can no longer be significant.
        let limit = (alpha * (r + 1) as f64).ceil() as usize;
        while drawn < r && as_large < limit {
            shuffle(&mut seg, &mut rng);
            drawn += 1;
            if best_split(&seg, min).is_some_and(|(_, qs)| qs >= q) {
                as_large += 1;
            }
        }
        let p = (as_large + 1) as f64 / (drawn + 1) as f64;
        if drawn < r || p >= alpha {
            break;
        }
        found.push(Split { at: from + tau, p });
        found.sort_by_key(|s| s.at);
    }
    found
}

/// Fisher–Yates with the seeded generator.
fn shuffle(v: &mut [f64], rng: &mut ChaCha8Rng) {
    for i in (1..v.len()).rev() {
        let j = (rand::Rng::next_u64(rng) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// The one-sided bound a new value from `baseline`'s population exceeds with probability
/// `alpha` (upward when `upward`, else downward); `None` with fewer than 3 values.
pub fn prediction_bound(baseline: &[f64], alpha: f64, upward: bool) -> Option<f64> {
    let n = baseline.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mean = baseline.iter().sum::<f64>() / nf;
    let var = baseline.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let t = StudentsT::new(0.0, 1.0, nf - 1.0)
        .ok()?
        .inverse_cdf(1.0 - alpha);
    let half = t * var.sqrt() * (1.0 + 1.0 / nf).sqrt();
    Some(if upward { mean + half } else { mean - half })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(n: usize, seed: u64, level: f64, sd: f64) -> Vec<f64> {
        use rand_distr::{Distribution, Normal};
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = Normal::new(level, sd).unwrap();
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    #[test]
    fn a_step_is_found_where_it_is() {
        let mut x = noisy(19, 1, 12.0, 0.2);
        x.extend(noisy(11, 2, 14.0, 0.2));
        let cps = change_points(&x, 0.001, 3, 7);
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert_eq!(cps[0].at, 19);
        assert!(cps[0].p < 0.001);
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut x = noisy(10, 1, 10.0, 0.2);
        x.extend(noisy(10, 2, 12.0, 0.2));
        x.extend(noisy(10, 3, 9.0, 0.2));
        let at: Vec<usize> = change_points(&x, 0.001, 3, 7)
            .iter()
            .map(|s| s.at)
            .collect();
        assert_eq!(at, vec![10, 20]);
    }

    #[test]
    fn noise_alone_finds_nothing_in_nearly_every_series() {
        let false_found = (0..100)
            .filter(|s| !change_points(&noisy(30, *s, 12.0, 0.5), 0.01, 3, *s).is_empty())
            .count();
        // At α = 0.01 about one series in a hundred; three is already unlikely (p ≈ 0.08).
        assert!(false_found <= 3, "{false_found} of 100");
    }

    #[test]
    fn constant_and_short_series_have_no_change() {
        assert!(change_points(&[5.0; 30], 0.01, 3, 1).is_empty());
        assert!(change_points(&[1.0, 9.0, 1.0, 9.0, 1.0], 0.01, 3, 1).is_empty());
    }

    #[test]
    fn the_bound_holds_a_new_value_of_the_same_population_in_all_but_alpha() {
        let base = noisy(20, 3, 100.0, 5.0);
        let up = prediction_bound(&base, 0.01, true).unwrap();
        let down = prediction_bound(&base, 0.01, false).unwrap();
        assert!(up > 100.0 && down < 100.0);
        let fresh = noisy(2000, 4, 100.0, 5.0);
        let above = fresh.iter().filter(|v| **v > up).count();
        // Expected near 20 (1%); the bound also carries the baseline's own sampling error.
        assert!(above < 80, "{above}");
        assert!(prediction_bound(&base[..2], 0.01, true).is_none());
    }
}
