//! Steady state, found rather than assumed: over an open-loop run's warm-up and steady
//! requests in send order, where the latency series settles (a warm-up transient cropped), and
//! whether what follows is steady (no trend, no level shift) — or "no steady state reached".
//!
//! The test, on batch means of TTFT (E2E without streaming) of `batch` consecutive requests:
//! - **Where it begins**: MSER (White's Marginal Standard Error Rule, 1997; MSER-5 with the
//!   default batch of 5): the truncation `d` of the first half of the batches that minimises
//!   the standard error of the rest's mean, `Σ_{i≥d}(Yᵢ − Ȳ_d)² / (m − d)²`. A crop is kept
//!   only when what it drops differs from the rest beyond `tolerance` (relative), beyond the
//!   client's own allowance (`measurement.max_dispatch_lag_ms`: a change no larger than the
//!   client may be late by cannot be told from the client) and beyond chance (Mann–Whitney at
//!   the contract's confidence, corrected for the m/2 places the cut was chosen from): a
//!   stationary run is steady from its first request.
//! - **Whether it stays**: a trend (Mann–Kendall on the rest's batch means) or a level shift
//!   (Mann–Whitney between the rest's halves), each only when significant at the contract's
//!   confidence *and* larger than `tolerance` (the change between the rest's first and last
//!   thirds, or between its halves' medians) *and* than the client's allowance.
//!
//! Hand-written: each statistic is a few lines over a few hundred batch means, and none of the
//! statistics crates on crates.io implements MSER or Mann–Kendall; the normal CDF is statrs'.

use serde::{Deserialize, Serialize};

use super::*;

/// Requests per batch mean (5: MSER-5), for runs of up to `MAX_BATCHES` batches.
pub const BATCH: usize = 5;
/// The most batch means tested: longer runs use larger batches, since MSER, Mann–Kendall and
/// Mann–Whitney are quadratic in them (a million-request run at 5 a batch would be 4·10¹⁰
/// pairs; at 400 means it is 80,000).
pub const MAX_BATCHES: usize = 400;
/// Relative change below which a crop, a trend or a shift does not matter: 50%, because batch
/// means of a few hundred requests' latencies wander by 20–30% between a run's halves on a
/// server that is steady (Poisson arrivals, queueing), while a warm-up transient or a queue
/// that grows all run changes them several-fold.
pub const TOLERANCE: f64 = 0.5;
/// Fewer batch means than this tell nothing either way.
const MIN_BATCHES: usize = 8;

/// Where steady state began, or that it was not reached, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SteadyState {
    /// The series tested: `TTFT` or `E2E`.
    pub metric: String,
    /// Requests per batch mean, and the batch means tested.
    pub batch: usize,
    pub batches: usize,
    /// The relative change below which nothing counts.
    pub tolerance: f64,
    /// The change of the mean (ms) below which a warm-up transient does not count: the
    /// contract's `measurement.max_dispatch_lag_ms`.
    #[serde(default)]
    pub floor_ms: f64,
    /// Steady state was reached (after any crop, no trend and no level shift).
    pub reached: bool,
    /// Where it began: the request (0-based, in send order over warm-up and steady) and the
    /// seconds from the first one; 0 when the run was steady from its start.
    pub begins_at: usize,
    pub begins_s: f64,
    /// Warm-up requests the run sent before its measured phase.
    pub warmup_requests: usize,
    /// Mean of the metric before and after where it began (ms), when a crop was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transient_ms: Option<[f64; 2]>,
    /// Mann–Kendall z of the rest, and its relative change first third → last third.
    pub trend_z: f64,
    pub trend_change: f64,
    /// Mann–Whitney z between the rest's halves, and their medians' relative difference.
    pub shift_z: f64,
    pub shift_change: f64,
    /// Which of the trend and the level shift counted (for the words; not kept in files).
    #[serde(skip)]
    pub counted: (bool, bool),
    /// In words: what was found, with the test that found it in brief.
    pub evidence: String,
    /// The test's figures in words (z scores and changes).
    pub test: String,
}

impl SteadyState {
    /// Steady state began after the measured phase had opened: its first requests were still
    /// in the transient.
    pub fn late_start(&self) -> Option<usize> {
        (self.reached && self.begins_at > self.warmup_requests)
            .then(|| self.begins_at - self.warmup_requests)
    }
}

impl SteadyState {
    /// Why the run is INVALID by this test: no steady state, or steady state reached only
    /// after the measured phase opened (the warm-up too short).
    pub fn invalid_reason(&self) -> Option<String> {
        if !self.reached {
            return Some(format!("{} ({})", self.evidence, self.test));
        }
        let late = self.late_start()?;
        Some(format!(
            "the warm-up was too short: {late} steady requests were still in the transient ({}); warm up for at least {} requests or {:.0} s",
            self.evidence,
            self.begins_at,
            self.begins_s.ceil()
        ))
    }
}

/// The test over an open-loop run's warm-up and steady requests; `None` for a closed loop, a
/// load program (its rate changes on purpose) or too few requests to tell.
pub fn detect(c: &Contract, records: &[Record]) -> Option<SteadyState> {
    if !c.load.is_open() || !c.load.stage.is_empty() {
        return None;
    }
    let origin = c.measurement.latency_origin;
    let source = c.measurement.output_tokens;
    // Each successful request: (its origin, its place in the file, TTFT, E2E (NaN: none),
    // warm-up?), 32 bytes, put in origin order in place, ties in file order (a stable sort of
    // the tuples with options had needed 75 MB for a million requests).
    let mut pts: Vec<(u64, u32, f64, f64, bool)> = records
        .iter()
        .filter(|r| matches!(r.phase, Phase::Warmup | Phase::Steady) && r.is_ok())
        .filter_map(|r| {
            let m = request_metrics(r, origin, source);
            let ms = |v: Option<f64>| v.unwrap_or(f64::NAN);
            let warm = r.phase == Phase::Warmup;
            Some((
                origin_us(r, origin)?,
                0,
                ms(m.ttft_ms()),
                ms(m.e2e_ms()),
                warm,
            ))
        })
        .collect();
    for (k, p) in pts.iter_mut().enumerate() {
        p.1 = k as u32;
    }
    pts.sort_unstable_by_key(|p| (p.0, p.1));
    let ttft = pts.iter().all(|p| !p.2.is_nan());
    let series: Vec<f64> = pts
        .iter()
        .map(|p| if ttft { p.2 } else { p.3 })
        .filter(|v| !v.is_nan())
        .collect();
    let warm = pts.iter().filter(|p| p.4).count();
    let t0 = pts.first()?.0;
    // Two-sided: a change either way counts.
    let z = super::validity::z_of((1.0 + c.measurement.confidence) / 2.0);
    let batch = BATCH.max(series.len().div_ceil(MAX_BATCHES));
    let floor = c.measurement.max_dispatch_lag_ms.0;
    let mut s = test(&series, batch, TOLERANCE, floor, z)?;
    s.metric = if ttft { "TTFT" } else { "E2E" }.to_owned();
    s.warmup_requests = warm;
    s.begins_s = pts
        .get(s.begins_at)
        .map_or(0.0, |p| p.0.saturating_sub(t0) as f64 / 1e6);
    (s.evidence, s.test) = evidence(&s);
    Some(s)
}

/// The test on a series in send order (ms); `z` the one-sided critical value.
pub fn test(
    series: &[f64],
    batch: usize,
    tolerance: f64,
    floor_ms: f64,
    z: f64,
) -> Option<SteadyState> {
    let y: Vec<f64> = series
        .chunks_exact(batch.max(1))
        .map(|b| b.iter().sum::<f64>() / b.len() as f64)
        .collect();
    let m = y.len();
    if m < MIN_BATCHES {
        return None;
    }
    let d = mser(&y);
    // A crop counts when what it drops differs from the rest, beyond tolerance and chance.
    let (head, rest) = y.split_at(d);
    // The crop was chosen as the one that separates most, so its test is corrected for the
    // m/2 places it could have cut (Bonferroni on the one-sided tail beyond `z`).
    let z_crop = corrected(z, m / 2);
    let crop = d > 0 && {
        let (a, b) = (mean(head), mean(rest));
        (a - b).abs() > (tolerance * b.abs()).max(floor_ms)
            && mann_whitney_z(head, rest).abs() > z_crop
    };
    let (start, transient_ms) = if crop {
        (d, Some([mean(head), mean(rest)]))
    } else {
        (0, None)
    };
    let rest = &y[start..];
    // A transient still under way at the first half's end leaves no steady state to find.
    let unfinished = crop && d >= m / 2;
    let trend_z = mann_kendall_z(rest);
    let third = (rest.len() / 3).max(1);
    let (first, last) = (median(&rest[..third]), median(&rest[rest.len() - third..]));
    let trend_change = rel(first, last);
    let (h1, h2) = rest.split_at(rest.len() / 2);
    let shift_z = mann_whitney_z(h1, h2);
    let (m1, m2) = (median(h1), median(h2));
    let shift_change = rel(m1, m2);
    let trend =
        trend_z.abs() > z && trend_change.abs() > tolerance && (last - first).abs() > floor_ms;
    let shift = shift_z.abs() > z && shift_change.abs() > tolerance && (m2 - m1).abs() > floor_ms;
    Some(SteadyState {
        metric: String::new(),
        batch,
        batches: m,
        tolerance,
        floor_ms,
        reached: !(unfinished || trend || shift),
        begins_at: start * batch,
        begins_s: 0.0,
        warmup_requests: 0,
        transient_ms,
        trend_z,
        trend_change,
        shift_z,
        shift_change,
        counted: (trend, shift),
        evidence: String::new(),
        test: String::new(),
    })
}

/// The critical value for the largest of `k` tests each held at critical value `z`: the
/// normal quantile of `1 − (1 − Φ(z))/k`.
fn corrected(z: f64, k: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    let Ok(n) = Normal::new(0.0, 1.0) else {
        return z;
    };
    let tail = (1.0 - n.cdf(z)) / k.max(1) as f64;
    n.inverse_cdf(1.0 - tail)
}

/// MSER's truncation: the `d` in the first half minimising `Σ_{i≥d}(Yᵢ − Ȳ_d)² / (m − d)²`.
fn mser(y: &[f64]) -> usize {
    let m = y.len();
    (0..=m / 2)
        .map(|d| {
            let rest = &y[d..];
            let mu = mean(rest);
            let ss: f64 = rest.iter().map(|v| (v - mu).powi(2)).sum();
            (d, ss / ((m - d) as f64).powi(2))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(0, |(d, _)| d)
}

/// Mann–Kendall's z: the sign of every later-minus-earlier pair, summed and standardised
/// (no tie correction: batch means of latencies rarely tie).
fn mann_kendall_z(y: &[f64]) -> f64 {
    let n = y.len() as f64;
    let s: f64 = (0..y.len())
        .flat_map(|i| (i + 1..y.len()).map(move |j| (i, j)))
        .map(|(i, j)| (y[j] - y[i]).signum())
        .sum();
    let var = n * (n - 1.0) * (2.0 * n + 5.0) / 18.0;
    if var <= 0.0 {
        return 0.0;
    }
    // Continuity correction.
    (s - s.signum()) / var.sqrt()
}

/// Mann–Whitney's z (normal approximation) for `b` against `a`: positive when `b` is larger.
fn mann_whitney_z(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let u: f64 = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| (x, y)))
        .map(|(x, y)| match y.total_cmp(x) {
            std::cmp::Ordering::Greater => 1.0,
            std::cmp::Ordering::Equal => 0.5,
            std::cmp::Ordering::Less => 0.0,
        })
        .sum();
    let mu = n1 * n2 / 2.0;
    let sd = (n1 * n2 * (n1 + n2 + 1.0) / 12.0).sqrt();
    if sd == 0.0 { 0.0 } else { (u - mu) / sd }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Relative change from `a` to `b`.
fn rel(a: f64, b: f64) -> f64 {
    if a.abs() < 1e-9 {
        if b.abs() < 1e-9 { 0.0 } else { f64::INFINITY }
    } else {
        (b - a) / a
    }
}

/// What the test found, in words (with the test in brief), and the test's figures.
fn evidence(s: &SteadyState) -> (String, String) {
    // The client's own allowance, under which no change counts.
    let floor = if s.floor_ms > 0.0 {
        format!(
            "; nor a change within {} ms, the client's own allowance",
            s.floor_ms
        )
    } else {
        String::new()
    };
    let test = format!(
        "trend Mann–Kendall z = {:.1}, {:+.0}% first to last third; halves {:+.0}% (Mann–Whitney z = {:.1}); changes under {:.0}% or within chance do not count{floor}",
        s.trend_z,
        s.trend_change * 100.0,
        s.shift_change * 100.0,
        s.shift_z,
        s.tolerance * 100.0
    );
    let how = format!("MSER-{} on {} {} batch means", s.batch, s.batches, s.metric);
    let crop = s.transient_ms.map_or(String::new(), |[a, b]| {
        format!("; {} mean {a:.1} ms before, {b:.1} ms after", s.metric)
    });
    let finding = if !s.reached {
        let (trend, shift) = s.counted;
        let why = if trend {
            format!(
                "{} {} through the run",
                s.metric,
                if s.trend_change > 0.0 { "rose" } else { "fell" }
            )
        } else if shift {
            format!("{} shifted level between the run's halves", s.metric)
        } else {
            "the transient lasted past the run's first half".to_owned()
        };
        format!("no steady state reached: {why} ({how}{crop})")
    } else if s.begins_at == 0 {
        format!("steady from the first request ({how})")
    } else {
        format!(
            "steady state began {:.1} s in, at request {} ({how}{crop})",
            s.begins_s, s.begins_at
        )
    };
    (finding, test)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    use super::*;

    fn noise(n: usize, level: f64, seed: u64) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let e = Exp::new(1.0 / level).unwrap();
        (0..n).map(|_| e.sample(&mut rng)).collect()
    }

    #[test]
    fn stationary_noise_is_steady_from_the_start() {
        for seed in 0..200 {
            let s = test(&noise(600, 100.0, seed), BATCH, TOLERANCE, 0.0, 2.58).unwrap();
            assert!(s.reached && s.begins_at == 0, "seed {seed}: {s:?}");
        }
    }

    /// 600 requests at `level`, starting at 5× it and decaying linearly to 1× over the first 150.
    fn decaying(level: f64, seed: u64) -> Vec<f64> {
        noise(600, level, seed)
            .into_iter()
            .enumerate()
            .map(|(i, x)| x * (1.0 + 4.0 * (1.0 - i as f64 / 150.0).max(0.0)))
            .collect()
    }

    #[test]
    fn a_decaying_transient_is_cropped_near_its_end() {
        for seed in 0..20 {
            let v = decaying(100.0, seed);
            let s = test(&v, BATCH, TOLERANCE, 0.0, 2.58).unwrap();
            assert!(s.reached, "seed {seed}: {s:?}");
            assert!((60..=200).contains(&s.begins_at), "seed {seed}: {s:?}");
        }
    }

    /// The same transient at an instant server's scale (0.1 ms settling from 0.5 ms) is
    /// cropped on its relative size alone, and neither cropped nor a trend within the client's
    /// allowance of 5 ms: a change no larger than the client may be late by cannot be told from
    /// the client (on a busy host, such a crop read a 5,000 req/s run INVALID with a dispatch
    /// lag of 0.1 ms).
    #[test]
    fn a_change_within_the_clients_allowance_does_not_count() {
        for seed in 0..20 {
            let v = decaying(0.1, seed);
            let s = test(&v, BATCH, TOLERANCE, 0.0, 2.58).unwrap();
            assert!(s.begins_at > 0, "seed {seed}: {s:?}");
            let s = test(&v, BATCH, TOLERANCE, 5.0, 2.58).unwrap();
            assert!(s.reached && s.begins_at == 0, "seed {seed}: {s:?}");
            let (_, words) = evidence(&s);
            assert!(
                words.contains("within 5 ms, the client's own allowance"),
                "{words}"
            );
        }
    }

    #[test]
    fn a_series_that_rises_all_run_is_no_steady_state() {
        let v: Vec<f64> = noise(600, 100.0, 1)
            .into_iter()
            .enumerate()
            .map(|(i, x)| x + i as f64 * 5.0)
            .collect();
        let s = test(&v, BATCH, TOLERANCE, 0.0, 2.58).unwrap();
        assert!(!s.reached, "{s:?}");
    }
}
