//! What a run's sample can claim, and how strongly: each SLO metric and attainment judged by
//! one exact one-sided binomial test at the contract's confidence (`measurement.confidence`),
//! and for each metric the strongest percentile claim the sample supports.
//!
//! Two questions are kept apart, in these words everywhere (docs/guide/glossary.md):
//! - **validity** (VALID / INVALID, `analyze::validity`): whether the *measurement* is sound —
//!   the client kept its schedule, the server reached a steady state, nothing was dropped. A
//!   sample size never makes a run INVALID.
//! - **support**: whether the *sample* is large enough to claim what it shows. A pass is
//!   **supported** when a true miss rate at the limit would rarely give this few misses
//!   (MLPerf's early-stopping rule; the percentile's upper confidence bound within the
//!   threshold); a miss is **conclusive** when a true rate at the limit would rarely give this
//!   many (the lower confidence bound over the threshold), at any sample size. Otherwise the
//!   point estimate only **indicates**: "met, not yet supported (needs N, has n)".
//!
//! The sample a metric is judged on counts failures as misses (`sample`): a request that
//! failed before its first token has no TTFT under any threshold, and one that failed at all
//! has no TPOT or E2E. Pure: no I/O.

use serde::{Deserialize, Serialize};

use super::{RequestMetrics, verdict};
use crate::record::{Outcome, Record};
use crate::stats::{
    Evidence, PERCENTILES, evidence, lower_bound_rank, min_requests_for, min_requests_for_share,
    percentile_sorted, share_bounds, upper_bound_rank,
};

verdict! {
    /// Where a run stands against its SLO (or one metric of it), and how strongly its sample
    /// says so at the contract's confidence.
    SloVerdict {
        /// Met, and the sample supports it.
        Met => "met",
        /// Met at the point estimates, on too few requests to support it yet.
        MetIndicated => "met_indicated",
        /// Missed, conclusively: no larger sample would turn it into a pass at this confidence.
        Missed => "missed",
        /// Missed at the point estimates, not conclusively.
        MissedIndicated => "missed_indicated",
    }
}

impl SloVerdict {
    /// From the point estimate and the sample's evidence: the evidence decides when it can.
    pub fn of(point_pass: bool, e: Evidence) -> SloVerdict {
        match (e, point_pass) {
            (Evidence::Supported, _) => SloVerdict::Met,
            (Evidence::Refuted, _) => SloVerdict::Missed,
            (Evidence::Open, true) => SloVerdict::MetIndicated,
            (Evidence::Open, false) => SloVerdict::MissedIndicated,
        }
    }

    /// The verdict of several parts that must all hold (each metric and attainment, or every
    /// class): a conclusive miss anywhere is one; else any miss indicates one; else all
    /// supported is supported.
    pub fn all(parts: impl IntoIterator<Item = SloVerdict>) -> Option<SloVerdict> {
        let mut out: Option<SloVerdict> = None;
        for p in parts {
            out = Some(match (out, p) {
                (None, p) => p,
                (Some(SloVerdict::Missed), _) | (_, SloVerdict::Missed) => SloVerdict::Missed,
                (Some(SloVerdict::MissedIndicated), _) | (_, SloVerdict::MissedIndicated) => {
                    SloVerdict::MissedIndicated
                }
                (Some(SloVerdict::MetIndicated), _) | (_, SloVerdict::MetIndicated) => {
                    SloVerdict::MetIndicated
                }
                (Some(SloVerdict::Met), SloVerdict::Met) => SloVerdict::Met,
            });
        }
        out
    }

    /// Met at the point estimates (supported or not).
    pub fn met(self) -> bool {
        matches!(self, SloVerdict::Met | SloVerdict::MetIndicated)
    }

    /// The sample settles it either way at the contract's confidence.
    pub fn settled(self) -> bool {
        matches!(self, SloVerdict::Met | SloVerdict::Missed)
    }

    /// In words, for a report line: "met, supported at 99% confidence".
    pub fn words(self, confidence: f64) -> String {
        let c = percent(confidence);
        match self {
            SloVerdict::Met => format!("met, supported at {c} confidence"),
            SloVerdict::MetIndicated => format!("met, not yet supported at {c} confidence"),
            SloVerdict::Missed => format!("NOT met, conclusive at {c} confidence"),
            SloVerdict::MissedIndicated => {
                format!("NOT met, indicated (not conclusive at {c} confidence)")
            }
        }
    }

    /// Short, for a table cell or a tile: "met (supported)".
    pub fn short(self) -> &'static str {
        match self {
            SloVerdict::Met => "met (supported)",
            SloVerdict::MetIndicated => "met (indicated)",
            SloVerdict::Missed => "missed (conclusive)",
            SloVerdict::MissedIndicated => "missed (indicated)",
        }
    }
}

/// A confidence as a percentage without needless decimals: 99%, 99.9%, 95%.
pub fn percent(confidence: f64) -> String {
    let p = confidence * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{}%", (p * 100.0).round() / 100.0)
    }
}

/// A percentile's name: `p99`, `p99.9`.
pub fn pname(p: f64) -> String {
    if (p - p.round()).abs() < 1e-9 {
        format!("p{p:.0}")
    } else {
        format!("p{p}")
    }
}

/// One SLO metric's sample, sorted, failures as +∞: the values a percentile claim about it
/// rests on. TTFT and TTFO: every request that produced a first token (failed later or not); a
/// request that failed before it counts as a miss. TPOT: the successful requests with a token
/// after their first chunk (an answer in one chunk meets any TPOT threshold and is left out);
/// E2E: the successful ones; a failed request is a miss of both. Requests the user cancelled
/// are neither met nor missed, and left out (as attainment leaves them out).
pub fn sample(
    steady: &[&Record],
    metrics: &[RequestMetrics],
    metric: &str,
    pick: fn(&RequestMetrics) -> Option<f64>,
) -> Vec<f64> {
    let first_token = matches!(metric, "ttft" | "ttfo");
    let mut v: Vec<f64> = steady
        .iter()
        .zip(metrics)
        .filter(|(r, _)| r.outcome != Outcome::Interrupted)
        .filter_map(|(r, m)| match (r.is_ok(), pick(m)) {
            (_, Some(x)) if r.is_ok() || first_token => Some(x),
            (true, None) if metric == "tpot" => None,
            _ => Some(f64::INFINITY),
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// One metric judged at percentile `p` against `threshold` on its sorted sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The percentile, `None` when it falls on a failed request.
    pub value: Option<f64>,
    pub requests: u64,
    /// Over the threshold, or failed.
    pub misses: u64,
    /// One-sided confidence bounds of the percentile (order statistics); `None` when the
    /// sample is too small for one, or it falls on a failed request.
    pub upper: Option<f64>,
    pub lower: Option<f64>,
    /// Requests a supported pass needs with this many misses (MLPerf early stopping).
    pub needed: u64,
    pub verdict: SloVerdict,
}

pub fn judge(sorted: &[f64], threshold: f64, p: f64, confidence: f64) -> Judged {
    let n = sorted.len() as u64;
    let misses = sorted.iter().filter(|v| **v > threshold).count() as u64;
    let value = percentile_sorted(sorted, p).filter(|v| v.is_finite());
    let at = |k: Option<u64>| {
        k.map(|k| sorted[(k - 1) as usize])
            .filter(|v| v.is_finite())
    };
    let q = p / 100.0;
    Judged {
        value,
        requests: n,
        misses,
        upper: at(upper_bound_rank(n, q, confidence)),
        lower: at(lower_bound_rank(n, q, confidence)),
        needed: min_requests_for(p, misses, confidence),
        verdict: SloVerdict::of(
            value.is_some_and(|v| v <= threshold),
            evidence(n, misses, q, confidence),
        ),
    }
}

/// Attainment (the share of requests that met every threshold) against its target: its
/// verdict, its one-sided bounds and the requests a supported pass needs.
pub fn judge_attainment(
    counted: u64,
    met: u64,
    target: f64,
    confidence: f64,
) -> (SloVerdict, Option<[f64; 2]>, u64) {
    let attained = counted > 0 && met as f64 / counted as f64 >= target;
    let misses = counted - met.min(counted);
    (
        SloVerdict::of(attained, evidence(counted, misses, target, confidence)),
        share_bounds(counted, met, confidence),
        min_requests_for_share(target, misses, confidence),
    )
}

/// The strongest claim a metric's sample supports: the highest percentile (of the reported
/// ones and the SLO's) whose one-sided upper confidence bound it has, and what the claim asked
/// for (the SLO's percentile, else p99) still needs when that is not it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Claim {
    pub metric: String,
    /// Requests the claims rest on (failures among them, as misses).
    pub requests: u64,
    /// "`metric` at `percentile` ≤ `bound_ms`", at the contract's confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported: Option<Bound>,
    /// The percentile asked for, when the sample does not support it yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_yet: Option<NotYet>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bound {
    pub percentile: f64,
    /// The point estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_ms: Option<f64>,
    /// The one-sided upper confidence bound: the claim.
    pub bound_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotYet {
    pub percentile: f64,
    /// Requests it needs with the failures seen so far (`u64::MAX`: none can, p100).
    pub needs: u64,
    /// The failures seen so far (each a miss), and what it would need with none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub needs_with_none: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The strongest claim of one metric's sorted sample (failures as +∞). `asked`: the SLO's
/// percentile, or p99 without one.
pub fn strongest(metric: &str, sorted: &[f64], asked: f64, confidence: f64) -> Claim {
    let n = sorted.len() as u64;
    let failed = sorted.iter().filter(|v| v.is_infinite()).count() as u64;
    let mut ladder: Vec<f64> = PERCENTILES.iter().map(|(p, _)| *p).collect();
    if !ladder.iter().any(|p| (p - asked).abs() < 1e-9) {
        ladder.push(asked);
        ladder.sort_by(f64::total_cmp);
    }
    let supported = ladder
        .iter()
        .filter_map(|&p| {
            let k = upper_bound_rank(n, p / 100.0, confidence)?;
            let bound = sorted[(k - 1) as usize];
            bound.is_finite().then(|| Bound {
                percentile: p,
                value_ms: percentile_sorted(sorted, p).filter(|v| v.is_finite()),
                bound_ms: bound,
            })
        })
        .next_back();
    let not_yet = (supported
        .as_ref()
        .is_none_or(|b| b.percentile < asked - 1e-9))
    .then(|| NotYet {
        percentile: asked,
        needs: min_requests_for(asked, failed, confidence),
        failed,
        needs_with_none: min_requests_for(asked, 0, confidence),
    });
    Claim {
        metric: metric.to_owned(),
        requests: n,
        supported,
        not_yet,
    }
}

impl Claim {
    /// "TTFT p95 ≤ 180 ms (point 150 ms); p99 not yet: needs 459 requests, has 200".
    pub fn words(&self, fmt: impl Fn(f64) -> String) -> String {
        match self.not_yet_words() {
            Some(n) => format!("{}; {n}", self.supported_words(fmt)),
            None => self.supported_words(fmt),
        }
    }

    /// "TTFT p95 ≤ 180 ms (point 150 ms)", or "TTFT: no percentile yet".
    pub fn supported_words(&self, fmt: impl Fn(f64) -> String) -> String {
        let name = self.metric.to_uppercase();
        match &self.supported {
            Some(b) => format!(
                "{name} {} ≤ {}{}",
                pname(b.percentile),
                fmt(b.bound_ms),
                b.value_ms
                    .map_or(String::new(), |v| format!(" (point {})", fmt(v)))
            ),
            None => format!("{name}: no percentile yet"),
        }
    }

    /// "p99 not yet: needs 459 requests, has 200" (`None` when the asked percentile is supported).
    pub fn not_yet_words(&self) -> Option<String> {
        self.not_yet.as_ref().map(|n| {
            format!(
                "{} not yet: {}",
                pname(n.percentile),
                needs_words(n.needs, n.failed, n.needs_with_none, self.requests)
            )
        })
    }
}

/// Several metrics' claims in one line: each supported claim, then what the asked percentile
/// still needs, said once when every metric needs the same.
pub fn claims_words(claims: &[Claim], fmt: impl Fn(f64) -> String + Copy) -> String {
    let not_yet: Vec<Option<String>> = claims.iter().map(Claim::not_yet_words).collect();
    let same = not_yet.windows(2).all(|w| w[0] == w[1]);
    if same {
        let each: Vec<String> = claims.iter().map(|k| k.supported_words(fmt)).collect();
        match &not_yet.first().cloned().flatten() {
            Some(n) => format!("{}; {n}", each.join(", ")),
            None => each.join(", "),
        }
    } else {
        let each: Vec<String> = claims.iter().map(|k| k.words(fmt)).collect();
        each.join(" · ")
    }
}

/// The one claim rule every command applies to a percentile: a sample of `n` requests supports
/// a claim about its `p`th percentile at `confidence` when the order statistic that bounds it
/// from above exists (MLPerf's early-stopping count with no miss: p99 at 99% needs 459). A
/// difference between two samples' percentiles is claimed only when both support it.
pub fn supports_percentile(n: u64, p: f64, confidence: f64) -> bool {
    n > 0 && n >= min_requests_for(p, 0, confidence)
}

/// The highest reported percentile (p50 … p99.9) a sample of `n` requests supports at
/// `confidence` ([`supports_percentile`]); `None` when it supports none, not even the median.
pub fn strongest_percentile(n: u64, confidence: f64) -> Option<f64> {
    PERCENTILES
        .iter()
        .map(|(p, _)| *p)
        .rfind(|p| supports_percentile(n, *p, confidence))
}

/// Why a percentile claim is not made, in the words every command uses: "p99 needs 459
/// requests a side at 99% confidence, has 20 and 20; p90 is the highest both support".
/// `have`: each sample's size (one for a run, two for a comparison).
pub fn unsupported_words(p: f64, have: &[u64], confidence: f64) -> String {
    let least = have.iter().copied().min().unwrap_or(0);
    let counts: Vec<String> = have.iter().map(u64::to_string).collect();
    format!(
        "{} needs {} requests{} at {} confidence, has {}; {}",
        pname(p),
        needs(min_requests_for(p, 0, confidence)),
        if have.len() > 1 { " a side" } else { "" },
        percent(confidence),
        counts.join(" and "),
        match strongest_percentile(least, confidence) {
            Some(q) if have.len() > 1 => format!("{} is the highest both support", pname(q)),
            Some(q) => format!("{} is the highest it supports", pname(q)),
            None => "too few for any percentile claim".to_owned(),
        }
    )
}

/// What a supported claim of "at least `share` meet" needs, in the words every command uses:
/// "needs 459 requests, has 200", or, when misses raise it, "needs 662 requests with the 1
/// miss seen (459 with none), has 454", so two needs on one screen say why they differ.
pub fn needs_words(needed: u64, misses: u64, with_none: u64, has: u64) -> String {
    if misses == 0 || needed == with_none {
        return format!("needs {} requests, has {has}", needs(needed));
    }
    format!(
        "needs {} requests with the {misses} miss{} seen ({} with none), has {has}",
        needs(needed),
        if misses == 1 { "" } else { "es" },
        needs(with_none)
    )
}

/// A needed count in words (`u64::MAX`: no sample can).
pub fn needs(n: u64) -> String {
    if n == u64::MAX {
        "more than any run".to_owned()
    } else {
        n.to_string()
    }
}

/// Requests a run needs for its pass of "at least `share` meet" to be supported, when its
/// true miss rate is `miss_share`: the fewest n whose allowed misses (MLPerf's count) cover the
/// misses such a run would show, n·m plus one standard deviation, so that a run of that size
/// supports the pass about five times in six. `None` when no size can (a miss rate at or above
/// the limit, or more than 10⁹ requests). A rate at a capacity's edge is near its limit, and a
/// small sample's zero misses do not show a zero rate: callers sizing a confirmation pass at
/// least a quarter of the allowed miss rate ([`confirmation_miss_share`]).
pub fn requests_to_support(share: f64, miss_share: f64, confidence: f64) -> Option<u64> {
    let m = miss_share.clamp(0.0, 1.0);
    if m >= 1.0 - share {
        return None;
    }
    let enough = |n: u64| {
        let n_f = n as f64;
        let misses = (n_f * m + (n_f * m * (1.0 - m)).sqrt()).ceil() as u64;
        min_requests_for_share(share, misses, confidence) <= n
    };
    let mut hi = min_requests_for_share(share, 0, confidence);
    if hi == u64::MAX {
        return None;
    }
    let mut lo = hi.saturating_sub(1);
    while !enough(hi) {
        lo = hi;
        hi = hi.checked_mul(2).filter(|&h| h <= 1_000_000_000)?;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if enough(mid) { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// The miss rate a confirmation run is sized for: the one observed, but at least a quarter of
/// the limit (`1 − share`), since the point that indicated the pass was small and sits at the
/// edge of the capacity.
pub fn confirmation_miss_share(share: f64, observed: f64) -> f64 {
    observed.max((1.0 - share) / 4.0)
}

/// Each judged SLO with its share of the requests: the contract's, or every class's own (with
/// the words that name the class).
fn judged_slos(c: &crate::contract::Contract) -> Vec<(String, f64, &crate::contract::Slo)> {
    if c.classes.is_empty() {
        vec![(String::new(), 1.0, &c.slo)]
    } else {
        c.classes
            .iter()
            .filter(|k| k.slo_or(&c.slo).is_set())
            .map(|k| {
                (
                    format!(" of class `{}`", k.name),
                    k.share.unwrap_or(1.0),
                    k.slo_or(&c.slo),
                )
            })
            .collect()
    }
}

/// The sample each claim rests on: an edge search's step (it judges each step alone), else the
/// steady requests planned; and what the plan sends, in words.
fn sample_of(
    c: &crate::contract::Contract,
    planned: Option<u64>,
) -> (Option<u64>, Option<u64>, String) {
    let edge_step = c.load.edge().and_then(|s| s.requests);
    let words = match (edge_step, planned) {
        (Some(n), _) => format!("each step of this edge search sends {n} requests"),
        (None, Some(n)) => format!("this run plans {n} steady requests"),
        (None, None) => "this run plans a duration, not a count".to_owned(),
    };
    (edge_step, edge_step.or(planned), words)
}

/// Before a run (`run` and `plan` say it): how many steady requests each SLO claim needs with
/// no miss at the contract's confidence, how long that takes at its rate, and, when the run
/// plans fewer, that a pass will be indicated rather than supported, with the choices that
/// would support it. `planned`: the steady requests the plan holds (`None`: bounded by time
/// with no rate to count them). `None` without an SLO.
pub fn planning(c: &crate::contract::Contract, planned: Option<u64>) -> Option<String> {
    if !c.has_slo() {
        return None;
    }
    let conf = c.measurement.confidence;
    let (edge_step, planned, plans) = sample_of(c, planned);
    let rate = c.load.rate().filter(|r| *r > 0.0);
    let takes = |n: u64| match rate {
        Some(r) if n != u64::MAX => format!(" (≈{} at {r} req/s)", seconds(n as f64 / r)),
        _ => String::new(),
    };
    let judged = judged_slos(c);
    let mut short = Vec::new();
    let mut each = Vec::new();
    for (class, share, slo) in &judged {
        let need = min_requests_for(slo.percentile, 0, conf).max(min_requests_for_share(
            slo.attainment,
            0,
            conf,
        ));
        let total = if need == u64::MAX {
            u64::MAX
        } else {
            (need as f64 / share).ceil() as u64
        };
        each.push(format!(
            "{}{class} at {} needs {} steady requests with no miss{}",
            pname(slo.percentile),
            percent(conf),
            needs(total),
            takes(total)
        ));
        if planned.is_some_and(|n| n < total) {
            short.push((slo.percentile, total));
        }
    }
    let head = format!("sample plan: {}; {}", each.join("; "), plans);
    if short.is_empty() {
        return Some(format!(
            "{head}: a pass can be supported (every miss raises what it needs)."
        ));
    }
    // The choices that would support it: more requests, a lower percentile, a lower confidence.
    let (p, total) = short[0];
    let share = total as f64 / min_requests_for(p, 0, conf).max(1) as f64;
    let lower = PERCENTILES
        .iter()
        .map(|(q, _)| *q)
        .filter(|q| *q < p)
        .map(|q| {
            (
                q,
                (min_requests_for(q, 0, conf) as f64 * share).ceil() as u64,
            )
        })
        .rfind(|(_, n)| planned.is_some_and(|have| *n <= have));
    let lower_conf = [0.95, 0.9]
        .into_iter()
        .filter(|k| *k < conf)
        .map(|k| (k, (min_requests_for(p, 0, k) as f64 * share).ceil() as u64))
        .next();
    let key = if edge_step.is_some() {
        "the edge stage's requests"
    } else {
        "load.requests"
    };
    let mut choices = vec![format!("{key} = {total} or more{}", takes(total))];
    if let Some((q, n)) = lower {
        choices.push(format!("slo.percentile = {q} (needs {n})"));
    }
    if let Some((k, n)) = lower_conf {
        choices.push(format!("measurement.confidence = {k} (needs {n})"));
    }
    Some(format!(
        "{head}, fewer: a pass will be indicated, not supported (a clear miss is still conclusive on any sample). To support it: {}.",
        choices.join(", or ")
    ))
}

/// Seconds in words: "23 s", "4.2 min", "1.3 h".
fn seconds(s: f64) -> String {
    if s >= 5400.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_combine_worst_first() {
        use SloVerdict::*;
        assert_eq!(SloVerdict::all([Met, Met]), Some(Met));
        assert_eq!(SloVerdict::all([Met, MetIndicated]), Some(MetIndicated));
        assert_eq!(
            SloVerdict::all([MetIndicated, MissedIndicated]),
            Some(MissedIndicated)
        );
        assert_eq!(
            SloVerdict::all([MissedIndicated, Missed, Met]),
            Some(Missed)
        );
        assert_eq!(SloVerdict::all([]), None);
    }

    #[test]
    fn a_clear_miss_is_conclusive_on_a_few_requests() {
        // 3 of 3 over the threshold refutes "p90 ≤ 10" at 99%: 0.1³ = 0.001.
        let j = judge(&[20.0, 30.0, 40.0], 10.0, 90.0, 0.99);
        assert_eq!(j.verdict, SloVerdict::Missed);
        // 200 clean requests: p99 met, not supported (needs 459).
        let v: Vec<f64> = (0..200).map(f64::from).collect();
        let j = judge(&v, 500.0, 99.0, 0.99);
        assert_eq!(j.verdict, SloVerdict::MetIndicated);
        assert_eq!((j.needed, j.upper), (459, None));
        // 459 clean ones support it, the bound being the maximum.
        let v: Vec<f64> = (0..459).map(f64::from).collect();
        let j = judge(&v, 500.0, 99.0, 0.99);
        assert_eq!((j.verdict, j.upper), (SloVerdict::Met, Some(458.0)));
        // Failures are misses: 20 of 40 failed is a conclusive miss of any p99.
        let mut v: Vec<f64> = (0..20).map(f64::from).collect();
        v.extend([f64::INFINITY; 20]);
        let j = judge(&v, 1e9, 99.0, 0.99);
        assert_eq!((j.verdict, j.value), (SloVerdict::Missed, None));
    }

    #[test]
    fn the_strongest_claim_climbs_with_the_sample() {
        let claim = |n: u32| {
            let v: Vec<f64> = (1..=n).map(f64::from).collect();
            strongest("ttft", &v, 99.0, 0.99)
        };
        // 40 requests: even p90 needs 44; p50's bound is an order statistic above the median.
        let c = claim(40);
        assert_eq!(c.supported.as_ref().unwrap().percentile, 50.0);
        assert_eq!(c.not_yet.as_ref().unwrap().needs, 459);
        assert_eq!(
            c.words(|x| format!("{x} ms")),
            format!(
                "TTFT p50 ≤ {} ms (point 20.5 ms); p99 not yet: needs 459 requests, has 40",
                c.supported.as_ref().unwrap().bound_ms
            )
        );
        assert_eq!(claim(200).supported.unwrap().percentile, 95.0);
        let c = claim(500);
        assert_eq!(c.supported.unwrap().percentile, 99.0);
        assert!(c.not_yet.is_none());
    }

    #[test]
    fn a_confirmation_is_sized_for_the_misses_it_will_see() {
        // No miss: MLPerf's count.
        assert_eq!(requests_to_support(0.99, 0.0, 0.99), Some(459));
        // A run missing 0.3% of the time needs more, and a run of that size supports it.
        let n = requests_to_support(0.99, 0.003, 0.99).unwrap();
        assert!(n > 459, "{n}");
        let expected = (n as f64 * 0.003).round() as u64;
        assert!(min_requests_for(99.0, expected, 0.99) <= n);
        // At or over the limit no size can.
        assert_eq!(requests_to_support(0.99, 0.01, 0.99), None);
        assert_eq!(requests_to_support(0.99, 0.5, 0.99), None);
        // A confirmation assumes at least a quarter of the limit: p99 with no miss seen.
        let m = confirmation_miss_share(0.99, 0.0);
        assert!((m - 0.0025).abs() < 1e-12);
        let n = requests_to_support(0.99, m, 0.99).unwrap();
        assert!((1000..3000).contains(&n), "{n}");
    }

    /// P[Binomial(n, q) ≤ k] for every k in 0..=n, summed term by term in log space:
    /// independent of statrs.
    fn binomial_cdfs(n: u64, q: f64) -> Vec<f64> {
        let mut ln_choose = 0.0;
        let mut acc = 0.0;
        (0..=n)
            .map(|i| {
                if i > 0 {
                    ln_choose += ((n - i + 1) as f64 / i as f64).ln();
                }
                acc += (ln_choose + i as f64 * q.ln() + (n - i) as f64 * (1.0 - q).ln()).exp();
                acc
            })
            .collect()
    }

    /// The strongest claim over 20 seeds matches a plain order-statistics computation: for each
    /// reported percentile, the smallest rank k with P[Binomial(n, q) ≤ k − 1] ≥ 99%; the claim
    /// is the highest percentile whose x₍ₖ₎ exists and is not a failure.
    #[test]
    fn the_strongest_claim_matches_order_statistics_over_20_seeds() {
        use rand::{RngExt, SeedableRng};
        use rand_distr::Distribution;
        for seed in 0..20u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let n = rng.random_range(20..900usize);
            let lognormal = rand_distr::LogNormal::new(4.0, 0.6).unwrap();
            let mut v: Vec<f64> = (0..n).map(|_| lognormal.sample(&mut rng)).collect();
            // Some seeds with failures, which sit above every value.
            for _ in 0..(seed % 4) {
                v.push(f64::INFINITY);
            }
            v.sort_by(f64::total_cmp);
            let n = v.len() as u64;
            let got = strongest("ttft", &v, 99.0, 0.99);
            let mut want: Option<(f64, f64)> = None;
            for p in [50.0, 90.0, 95.0, 99.0, 99.9] {
                let q: f64 = p / 100.0;
                let cdf = binomial_cdfs(n, q);
                let k = (1..=n).find(|&k| cdf[(k - 1) as usize] >= 0.99);
                if let Some(k) = k
                    && v[(k - 1) as usize].is_finite()
                {
                    want = Some((p, v[(k - 1) as usize]));
                }
            }
            let have = got.supported.as_ref().map(|b| (b.percentile, b.bound_ms));
            assert_eq!(have, want, "seed {seed}, n {n}");
            // The line a reader sees says the same.
            if let Some((p, bound)) = want {
                assert!(
                    got.words(|x| format!("{x}"))
                        .starts_with(&format!("TTFT {} ≤ {bound}", pname(p))),
                    "seed {seed}: {}",
                    got.words(|x| format!("{x}"))
                );
            }
        }
    }

    proptest::proptest! {
        /// The binomial test and the order-statistics bounds are one rule: a pass is supported
        /// exactly when the upper bound is within the threshold, a miss conclusive exactly when
        /// the lower bound is over it.
        #[test]
        fn evidence_and_bounds_agree(n in 1u64..400, misses_frac in 0.0f64..1.0, p in proptest::sample::select(vec![50.0, 90.0, 95.0, 99.0]), conf in proptest::sample::select(vec![0.9, 0.95, 0.99])) {
            let misses = ((n as f64) * misses_frac * 0.3).round() as u64;
            // n values: n − misses at 1, misses at 3; threshold 2.
            let mut v = vec![1.0; (n - misses) as usize];
            v.extend(vec![3.0; misses as usize]);
            let j = judge(&v, 2.0, p, conf);
            let q = p / 100.0;
            let up = upper_bound_rank(n, q, conf).map(|k| v[(k - 1) as usize]);
            let lo = lower_bound_rank(n, q, conf).map(|k| v[(k - 1) as usize]);
            let e = evidence(n, misses, q, conf);
            proptest::prop_assert_eq!(e == Evidence::Supported, up.is_some_and(|u| u <= 2.0));
            proptest::prop_assert_eq!(e == Evidence::Refuted, lo.is_some_and(|l| l > 2.0));
            proptest::prop_assert_eq!(j.verdict == SloVerdict::Met, e == Evidence::Supported);
            proptest::prop_assert_eq!(j.verdict == SloVerdict::Missed, e == Evidence::Refuted);
        }
    }

    #[test]
    fn percents_read_as_written() {
        assert_eq!(percent(0.99), "99%");
        assert_eq!(percent(0.999), "99.9%");
        assert_eq!(pname(99.9), "p99.9");
        assert_eq!(pname(95.0), "p95");
    }
}
