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
    let (lo, hi, frac) = percentile_ranks(sorted.len(), p)?;
    Some(interpolate(sorted[lo], sorted[hi], frac))
}

/// The two closest ranks (0-based) of the p-th percentile of n values, and the fraction of the
/// way from the lower to the upper.
fn percentile_ranks(n: usize, p: f64) -> Option<(usize, usize, f64)> {
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    Some((lo, (lo + 1).min(n - 1), h - lo as f64))
}

fn interpolate(lo: f64, hi: f64, frac: f64) -> f64 {
    lo + frac * (hi - lo)
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
    let (r, s) = ci_ranks(sorted.len(), p)?;
    Some([sorted[r], sorted[s]])
}

/// The ranks (0-based) of [`percentile_ci`]'s bounds among n values.
fn ci_ranks(n: usize, p: f64) -> Option<(usize, usize)> {
    let n = n as u64;
    if n == 0 {
        return None;
    }
    let b = Binomial::new((p / 100.0).clamp(0.0, 1.0), n).ok()?;
    let r = binomial_quantile(&b, n, 0.025);
    let s = binomial_quantile(&b, n, 0.975) + 1;
    (r >= 1 && s <= n).then(|| ((r - 1) as usize, (s - 1) as usize))
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
    welch_ci_at(a, b, 0.95)
}

/// [`welch_ci`] at a two-sided `confidence` (0.99: a 99% interval).
pub fn welch_ci_at(a: &[f64], b: &[f64], confidence: f64) -> Option<(f64, [f64; 2])> {
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
    let t = StudentsT::new(0.0, 1.0, df)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
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

/// The busy periods of a series of requests in the order sent, each `(send, end)`: a request
/// sent before every earlier one had ended joins their period; one sent after starts the next.
/// Returned as the index at which each period starts.
pub fn busy_periods(spans: &[(f64, f64)]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut busy_until = f64::NEG_INFINITY;
    for (i, &(send, end)) in spans.iter().enumerate() {
        if send >= busy_until {
            starts.push(i);
        }
        busy_until = busy_until.max(end);
    }
    starts
}

/// Regenerative bootstrap 95% interval of stat(b) − stat(a), each side a series of units in the
/// order sent (a request: its one value, or its many gaps, pooled by `stat`) cut into busy
/// periods at `a_cuts` and `b_cuts` (the index each starts at, [`busy_periods`]). A queue
/// forgets its past each time it empties, so its busy periods are independent (Athreya and
/// Fuh 1992): each resample draws whole periods with replacement until it holds as many
/// requests as the side, and requests that queued behind one another move together, as they do
/// from one run to the next. Resampling single requests would take a slow spell of a queue for
/// independent evidence, and a run near saturation moves by far more between runs than that
/// says. `None` when either side has no value or fewer than `min_periods` periods: one long
/// queue says nothing of how another run's would go. The resamples fall from 1,000 as the
/// values grow (down to 100 past 200,000 values a side); a fixed seed makes them repeatable.
pub fn regenerative_ci(
    (a, a_cuts): (&[Vec<f64>], &[usize]),
    (b, b_cuts): (&[Vec<f64>], &[usize]),
    stat: &dyn Fn(&mut [f64]) -> f64,
    min_periods: usize,
) -> Option<[f64; 2]> {
    let values = |s: &[Vec<f64>]| s.iter().map(Vec::len).sum::<usize>();
    if values(a) == 0 || values(b) == 0 || a_cuts.len() < min_periods || b_cuts.len() < min_periods
    {
        return None;
    }
    let most = values(a).max(values(b));
    let resamples = (20_000_000 / most.max(1)).clamp(100, 1000);
    let mut rng = ChaCha8Rng::seed_from_u64(0x0006_00d9_u64);
    let mut buf = Vec::with_capacity(most * 2);
    let mut draw = |units: &[Vec<f64>], cuts: &[usize], buf: &mut Vec<f64>| -> f64 {
        buf.clear();
        let mut taken = 0;
        while taken < units.len() {
            let k = (rand::Rng::next_u64(&mut rng) % cuts.len() as u64) as usize;
            let end = cuts.get(k + 1).copied().unwrap_or(units.len());
            for u in &units[cuts[k]..end] {
                buf.extend_from_slice(u);
            }
            taken += end - cuts[k];
        }
        if buf.is_empty() { f64::NAN } else { stat(buf) }
    };
    let mut diffs: Vec<f64> = (0..resamples)
        .map(|_| draw(b, b_cuts, &mut buf) - draw(a, a_cuts, &mut buf))
        .filter(|d| d.is_finite())
        .collect();
    diffs.sort_by(f64::total_cmp);
    Some([
        percentile_sorted(&diffs, 2.5)?,
        percentile_sorted(&diffs, 97.5)?,
    ])
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
        Some(Dist::from_ranked(values.len(), mean, var, |ranks| {
            ranks.iter().map(|&r| values[r]).collect()
        }))
    }

    /// A distribution of `n` values known by their mean, variance and the values at any
    /// ascending ranks (`at` returns one value per rank it is given).
    fn from_ranked(n: usize, mean: f64, var: f64, at: impl FnOnce(&[usize]) -> Vec<f64>) -> Dist {
        let quantiles = PERCENTILES.map(|(q, _)| percentile_ranks(n, q).expect("n > 0"));
        let cis = PERCENTILES.map(|(q, _)| ci_ranks(n, q));
        let mut ranks = vec![0, n - 1];
        for (lo, hi, _) in quantiles {
            ranks.extend([lo, hi]);
        }
        for (r, s) in cis.iter().flatten() {
            ranks.extend([*r, *s]);
        }
        ranks.sort_unstable();
        ranks.dedup();
        let values = at(&ranks);
        let v = |rank: usize| values[ranks.binary_search(&rank).expect("rank asked for")];
        let p = quantiles.map(|(lo, hi, frac)| interpolate(v(lo), v(hi), frac));
        Dist {
            count: n,
            min: v(0),
            mean,
            stddev: var.sqrt(),
            p50: p[0],
            p90: p[1],
            p95: p[2],
            p99: p[3],
            p99_9: p[4],
            max: v(n - 1),
            ci95: cis.map(|c| c.map(|(r, s)| [v(r), v(s)])),
        }
    }
}

/// An exact distribution of very many values in milliseconds, most of them whole
/// microseconds: ITL, one value per chunk (128 million in a million-request run).
///
/// Whole-microsecond values below [`Tally::DENSE_US`] are counted in a table indexed by the
/// microsecond; any other value is kept as it is. Percentiles, confidence bounds, minimum and
/// maximum are therefore the very values [`Dist::of`] would give on the same list (its mean
/// and standard deviation agree to rounding: they are summed in another order), in memory
/// proportional to the spread of values, not their number, and in one pass. A histogram
/// sketch (HDR, t-digest) would bound memory too but round every value; a per-µs table
/// does not, which is why it is hand-written.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// counts[µs]: how many values were that many whole microseconds.
    counts: Vec<u64>,
    in_counts: u64,
    /// Every value not counted above, ms.
    other: Vec<f64>,
}

impl Tally {
    /// Whole microseconds up to this (10 s) are counted per µs; the table grows only as far as
    /// the largest value seen (8 bytes per µs).
    pub const DENSE_US: i64 = 10_000_000;

    /// Adds a value of `us` whole microseconds.
    pub fn add_us(&mut self, us: i64) {
        if (0..Self::DENSE_US).contains(&us) {
            let i = us as usize;
            if i >= self.counts.len() {
                self.counts.resize((i + 1).next_power_of_two().max(1024), 0);
            }
            self.counts[i] += 1;
            self.in_counts += 1;
        } else {
            self.other.push(us as f64 / 1000.0);
        }
    }

    /// Adds `times` copies of a value in milliseconds.
    pub fn add_ms(&mut self, ms: f64, times: usize) {
        self.other.extend(std::iter::repeat_n(ms, times));
    }

    /// The values of both tallies.
    pub fn merged(&self, other: &Tally) -> Tally {
        let (long, short) = if self.counts.len() >= other.counts.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut counts = long.counts.clone();
        for (c, &o) in counts.iter_mut().zip(&short.counts) {
            *c += o;
        }
        Tally {
            counts,
            in_counts: self.in_counts + other.in_counts,
            other: [&self.other[..], &other.other[..]].concat(),
        }
    }

    pub fn len(&self) -> usize {
        self.in_counts as usize + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value, ascending, as (value ms, copies).
    fn ascending(&mut self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.other.sort_by(f64::total_cmp);
        let mut dense = self
            .counts
            .iter()
            .enumerate()
            .filter(|c| *c.1 > 0)
            .map(|(us, &c)| (us as f64 / 1000.0, c))
            .peekable();
        let mut other = self.other.iter().map(|&v| (v, 1)).peekable();
        std::iter::from_fn(move || match (dense.peek(), other.peek()) {
            (Some(d), Some(o)) if d.0 <= o.0 => dense.next(),
            (Some(_), None) => dense.next(),
            (_, Some(_)) => other.next(),
            (None, None) => None,
        })
    }

    /// The values as a [`Dist`]; `None` when there are none.
    pub fn dist(mut self) -> Option<Dist> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let (mut sum, mut count) = (0.0, 0u64);
        for (v, c) in self.ascending() {
            sum += v * c as f64;
            count += c;
        }
        let mean = sum / count as f64;
        let var = if n > 1 {
            self.ascending()
                .map(|(v, c)| (v - mean).powi(2) * c as f64)
                .sum::<f64>()
                / (n as f64 - 1.0)
        } else {
            0.0
        };
        Some(Dist::from_ranked(n, mean, var, |ranks| {
            self.at_ranks(ranks)
        }))
    }

    /// The values at these ascending ranks (0-based), one walk up the tally.
    fn at_ranks(&mut self, ranks: &[usize]) -> Vec<f64> {
        let mut out = Vec::with_capacity(ranks.len());
        let mut want = ranks.iter().peekable();
        let mut seen = 0u64;
        for (v, c) in self.ascending() {
            seen += c;
            while want.next_if(|&&r| (r as u64) < seen).is_some() {
                out.push(v);
            }
            if want.peek().is_none() {
                break;
            }
        }
        out
    }

    /// `points` + 1 evenly spaced quantiles (0 to 1) with their values, for a CDF drawn from
    /// the tally.
    pub fn quantiles(&mut self, points: usize) -> Vec<(f64, f64)> {
        let n = self.len();
        if n == 0 || points == 0 {
            return Vec::new();
        }
        let ranks: Vec<usize> = (0..=points).map(|i| i * (n - 1) / points).collect();
        let values = self.at_ranks(&ranks);
        values
            .into_iter()
            .zip(&ranks)
            .map(|(v, &r)| (v, (r + 1) as f64 / n as f64))
            .collect()
    }
}

/// The fewest requests for which observing at most `misses` SLO misses shows, with the given
/// confidence, that the true miss rate is below `1 − percentile/100`.
///
/// This is MLPerf LoadGen's early-stopping criterion: the smallest n with
/// `P[Binomial(n, 1 − p) ≤ misses] ≤ 1 − confidence`. For p99 at 99% confidence it gives 459
/// requests with no miss and 662 with one, as MLPerf's rules state.
pub fn min_requests_for(percentile: f64, misses: u64, confidence: f64) -> u64 {
    min_requests_for_share(percentile / 100.0, misses, confidence)
}

/// [`min_requests_for`] for a share of requests that must meet (a percentile / 100, or an
/// attainment target): `u64::MAX` when no sample can show it (a share of 1: every request).
pub fn min_requests_for_share(share: f64, misses: u64, confidence: f64) -> u64 {
    let tail = 1.0 - share;
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

/// What a sample shows about the claim "at least `share` of requests meet their threshold"
/// (a percentile under its threshold: share = p/100; an attainment target: share = target),
/// from `n` requests of which `misses` did not meet it, at a one-sided `confidence`.
///
/// Both directions are one exact binomial test (no normal approximation):
/// - **supported**: `P[Binomial(n, 1 − share) ≤ misses] ≤ 1 − confidence`, so a true miss
///   rate at the limit would rarely show this few misses. It is MLPerf's early-stopping rule
///   ([`min_requests_for`]), and the same event as the one-sided upper confidence bound of the
///   percentile ([`upper_bound_rank`]) being within the threshold.
/// - **conclusive miss**: `P[Binomial(n, 1 − share) ≥ misses] ≤ 1 − confidence`, so a true
///   miss rate at the limit would rarely show this many; the same event as the lower
///   confidence bound ([`lower_bound_rank`]) being over the threshold. A clear miss needs no
///   minimum sample: 3 misses in 3 requests refute a p90 at 99%.
/// - otherwise **open**: the sample is too small to say either at this confidence; the point
///   estimate only *indicates*.
pub fn evidence(n: u64, misses: u64, share: f64, confidence: f64) -> Evidence {
    let tail = (1.0 - share).clamp(0.0, 1.0);
    let alpha = 1.0 - confidence;
    if n == 0 {
        return Evidence::Open;
    }
    let Ok(b) = Binomial::new(tail, n) else {
        return Evidence::Open;
    };
    if tail > 0.0 && b.cdf(misses.min(n)) <= alpha {
        return Evidence::Supported;
    }
    // P[B ≥ misses] = 1 − P[B ≤ misses − 1].
    if misses > 0 && 1.0 - b.cdf(misses - 1) <= alpha {
        return Evidence::Refuted;
    }
    Evidence::Open
}

/// See [`evidence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    Supported,
    Refuted,
    Open,
}

/// The 1-based rank k of the order statistic x₍ₖ₎ that is a one-sided upper confidence bound of
/// the q-quantile (q in 0..1) of n values: P[x₍ₖ₎ ≥ ξ_q] ≥ confidence. x₍ₖ₎ ≥ ξ_q exactly when
/// fewer than k values fall below ξ_q, a Binomial(n, q) count, so k is one more than the
/// smallest j with P[Binomial(n, q) ≤ j] ≥ confidence (Conover, *Practical Nonparametric
/// Statistics*, 3rd ed., §3.2, one-sided). `None` when even the maximum is not a bound (n too
/// small: for p99 at 99% confidence, n < 459).
pub fn upper_bound_rank(n: u64, q: f64, confidence: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let b = Binomial::new(q.clamp(0.0, 1.0), n).ok()?;
    let k = binomial_quantile(&b, n, confidence) + 1;
    (k <= n).then_some(k)
}

/// The 1-based rank j of the order statistic x₍ⱼ₎ that is a one-sided lower confidence bound of
/// the q-quantile: P[x₍ⱼ₎ ≤ ξ_q] ≥ confidence, the largest j with P[Binomial(n, q) ≥ j] ≥
/// confidence. `None` when even the minimum is not a bound.
pub fn lower_bound_rank(n: u64, q: f64, confidence: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let b = Binomial::new(q.clamp(0.0, 1.0), n).ok()?;
    // j − 1 is the largest i with P[B ≤ i] ≤ 1 − confidence: j is the smallest i with
    // P[B ≤ i] > 1 − confidence.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if b.cdf(mid) > 1.0 - confidence {
            hi = mid
        } else {
            lo = mid + 1
        }
    }
    (lo >= 1).then_some(lo)
}

/// One-sided confidence bounds of a share (Clopper–Pearson): with `met` of `n`, the true share
/// is at least the first and at most the second, each at `confidence`. Found by bisection on
/// the binomial CDF (statrs has the beta quantile, but its inverse is not exact near 0 and 1).
pub fn share_bounds(n: u64, met: u64, confidence: f64) -> Option<[f64; 2]> {
    if n == 0 {
        return None;
    }
    let alpha = 1.0 - confidence;
    let cdf = |p: f64, k: u64| Binomial::new(p.clamp(0.0, 1.0), n).map_or(1.0, |b| b.cdf(k));
    let solve = |f: &dyn Fn(f64) -> bool| {
        // f is true below the root and false above it.
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if f(mid) { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    };
    // Lower: the p at which P[B ≥ met] = alpha (P[B ≥ met] grows with p).
    let lower = if met == 0 {
        0.0
    } else {
        solve(&|p| 1.0 - cdf(p, met - 1) < alpha)
    };
    // Upper: the p at which P[B ≤ met] = alpha (P[B ≤ met] falls as p grows).
    let upper = if met == n {
        1.0
    } else {
        solve(&|p| cdf(p, met) > alpha)
    };
    Some([lower, upper])
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
    fn a_tally_gives_the_very_percentiles_of_the_sorted_list() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut tally = Tally::default();
        let mut list = Vec::new();
        for i in 0..20_000u64 {
            let us = (rand::Rng::next_u64(&mut rng) % 90_000) as i64;
            if i % 97 == 0 {
                // A chunk of three tokens: its gap shared, not whole µs.
                let v = us as f64 / 1000.0 / 3.0;
                tally.add_ms(v, 3);
                list.extend([v; 3]);
            } else if i % 1_001 == 0 {
                // Beyond the table, and before the previous chunk.
                for us in [Tally::DENSE_US + 7, -5] {
                    tally.add_us(us);
                    list.push(us as f64 / 1000.0);
                }
            } else {
                tally.add_us(us);
                list.push(us as f64 / 1000.0);
            }
        }
        let (a, b) = (
            tally.clone().dist().unwrap(),
            Dist::of(list.clone()).unwrap(),
        );
        assert_eq!(
            (
                a.count, a.min, a.max, a.p50, a.p90, a.p95, a.p99, a.p99_9, a.ci95
            ),
            (
                b.count, b.min, b.max, b.p50, b.p90, b.p95, b.p99, b.p99_9, b.ci95
            )
        );
        assert!(
            (a.mean - b.mean).abs() < 1e-9 * b.mean
                && (a.stddev - b.stddev).abs() < 1e-9 * b.stddev
        );
        list.sort_by(f64::total_cmp);
        let q = tally.quantiles(10);
        assert_eq!(q.len(), 11);
        assert_eq!(
            (q[0].0, q[10].0, q[10].1),
            (list[0], list[list.len() - 1], 1.0)
        );
        assert_eq!(q[5].0, list[(list.len() - 1) / 2]);
        assert!(Tally::default().dist().is_none());
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
