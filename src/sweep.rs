//! `goodput sweep`: one contract, one field varied over a list of values, one run per value, all
//! other axes shared; a parent bundle holds each point's bundle and the sweep summary (offered vs
//! achieved rate, latency percentiles, throughput, attainment and goodput per value).
//!
//! The varied field is set in the contract's *text* (so every other line, comment and default is
//! exactly as written) and each variant is parsed and validated like any contract.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::analyze::Summary;
use crate::bundle::Bundle;
use crate::contract::Contract;
use crate::run::{RunOptions, run};
use crate::workload::Inputs;

/// `--vary key=v1,v2,…`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Vary {
    /// Dotted contract key, e.g. `load.rate`.
    pub key: String,
    /// Values as written (TOML: `4`, `0.5`, `"500ms"` or a bare word).
    pub values: Vec<String>,
}

impl Vary {
    /// Parses the `--vary` arguments; more than one is refused: change one variable at a time.
    pub fn parse(args: &[String]) -> anyhow::Result<Vary> {
        Vary::parse_as("--vary", args)
    }

    /// The same, for the flag `flag` (`--setting`).
    pub fn parse_as(flag: &str, args: &[String]) -> anyhow::Result<Vary> {
        match args {
            [] => bail!("{flag} KEY=V1,V2,… is required"),
            [one] => {
                let (key, list) = one.split_once('=').with_context(|| {
                    format!("{flag} `{one}`: expected KEY=V1,V2,… (e.g. load.rate=1,2,4)")
                })?;
                let values: Vec<String> = list.split(',').map(|v| v.trim().to_owned()).collect();
                if key.trim().is_empty() || values.iter().all(String::is_empty) {
                    bail!("{flag} `{one}`: expected KEY=V1,V2,… (e.g. load.rate=1,2,4)");
                }
                if let Some(i) = values.iter().position(String::is_empty) {
                    bail!("{flag} `{one}`: value {} is empty (a stray comma?)", i + 1);
                }
                Ok(Vary {
                    key: key.trim().to_owned(),
                    values,
                })
            }
            many => bail!(
                "{flag} given {} times ({}): change one variable at a time; run once per variable",
                many.len(),
                many.iter()
                    .map(|m| m.split('=').next().unwrap_or(m))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

pub use crate::contract::edit::set_key;

/// One point of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub value: String,
    pub bundle: PathBuf,
    pub offered_rps: Option<f64>,
    pub achieved_rps: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    /// The SLO's percentile, when the contract has an SLO: `slo_metrics` are at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_percentile: Option<f64>,
    /// Each metric the SLO names at the SLO's percentile, with its median and its bound: the
    /// figures the point's verdict is about (p90 for `slo.percentile = 90`, not p99).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_metrics: Vec<PointMetric>,
    pub output_tokens_per_s: Option<f64>,
    pub attainment: Option<f64>,
    pub goodput_rps: Option<f64>,
    /// Every reason is in the point's bundle.
    pub validity: crate::analyze::ValidityVerdict,
    /// Whether the run met the SLO (percentiles within thresholds and attainment at target);
    /// absent for an interrupted point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<bool>,
    /// The SLO's verdict with its support at the contract's confidence: `met` (supported),
    /// `met_indicated`, `missed` (conclusive), `missed_indicated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_verdict: Option<crate::analyze::SloVerdict>,
    /// Steady requests its verdict rests on.
    #[serde(default)]
    pub steady_requests: u64,
    /// The point's run was interrupted: its figures are partial and it neither met nor missed.
    #[serde(default)]
    pub interrupted: bool,
    /// A capacity search's confirmation: the passing rate run again with the requests its
    /// SLO claim needs.
    #[serde(default)]
    pub confirmation: bool,
    /// A passing point a capacity search's confirmation (a larger run at its rate) failed: it
    /// fails from then on, in every table, the frontier and the answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuted: bool,
    /// Why the point fails the capacity rule, first reason only; absent when it passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fails_because: Option<String>,
    /// The client fell behind its schedule in this run: the point measures the client too.
    #[serde(default)]
    pub client_limited: bool,
    /// A tool workload's share of correct calls among the point's graded steady requests:
    /// how right the answers stayed as the load rose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct_calls: Option<f64>,
    /// Output tokens/s one user sees: 1000 ÷ the median TPOT of the SLO-meeting requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps_per_user: Option<f64>,
    /// SLO-meeting output tokens/s, in all and per accelerator (only requests that met the
    /// SLO count: raw throughput would reward overload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_output_tps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_output_tps_per_accelerator: Option<f64>,
    /// SLO-meeting output tokens per unit of `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_output_tokens_per_currency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_m_slo_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// On the efficiency frontier: no other point gives more tokens/s per user *and* more
    /// SLO-meeting tokens/s per accelerator (per deployment when accelerators are unknown).
    #[serde(default)]
    pub pareto: bool,
}

/// One SLO metric of a sweep point: its median and its value at the SLO's percentile (failures
/// count as misses, as the verdict counts them; absent when the percentile falls on a failed
/// request), against its bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointMetric {
    pub metric: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_ms: Option<f64>,
    pub threshold_ms: f64,
}

impl PointMetric {
    /// Each metric the summary's SLO judged, with its median from the steady distributions.
    fn of(s: &Summary) -> (Option<f64>, Vec<PointMetric>) {
        let Some(slo) = s.steady.slo.as_ref() else {
            return (None, Vec::new());
        };
        let st = &s.steady.stats;
        let each = slo
            .per_metric
            .iter()
            .map(|m| PointMetric {
                metric: m.metric.clone(),
                p50_ms: st.dist(&m.metric).map(|d| d.p50),
                value_ms: m.value_ms,
                threshold_ms: m.threshold_ms,
            })
            .collect();
        (Some(slo.percentile), each)
    }

    /// Its name at a percentile: "TTFT p90".
    fn name(&self, p: f64) -> String {
        format!(
            "{} {}",
            self.metric.to_uppercase(),
            crate::analyze::claims::pname(p)
        )
    }
}

/// The latency figures a point is shown by: each SLO metric's median and value at the SLO's
/// percentile (with its bound), else TTFT p50 and p99, TPOT p99 and E2E p99. Names and values,
/// for the table's columns and the point's line alike.
fn latency_cells(p: &SweepPoint) -> Vec<(String, Option<f64>)> {
    match p.slo_percentile {
        Some(q) if !p.slo_metrics.is_empty() => p
            .slo_metrics
            .iter()
            .flat_map(|m| {
                [
                    (format!("{} p50", m.metric.to_uppercase()), m.p50_ms),
                    (
                        format!("{} (≤ {})", m.name(q), crate::report::num(m.threshold_ms)),
                        m.value_ms,
                    ),
                ]
            })
            .collect(),
        _ => vec![
            ("TTFT p50".into(), p.ttft_p50_ms),
            ("TTFT p99".into(), p.ttft_p99_ms),
            ("TPOT p99".into(), p.tpot_p99_ms),
            ("E2E p99".into(), p.e2e_p99_ms),
        ],
    }
}

/// The first reason a run fails the capacity rule: a missed SLO threshold or attainment,
/// else its first validity reason.
fn fails_because(s: &Summary) -> Option<String> {
    // With classes: the class that fails first, and why.
    if let Some(k) = s
        .classes
        .as_deref()
        .and_then(crate::analyze::classes::limiting)
        && let Some(why) = crate::report::class_fails(k)
    {
        return Some(format!("class `{}` fails first: {why}", k.name));
    }
    s.steady
        .slo
        .as_ref()
        .and_then(crate::report::slo_miss)
        .or_else(|| s.validity.reasons.first().map(|r| format!("INVALID: {r}")))
}

impl SweepPoint {
    pub(crate) fn of(value: &str, bundle: &Bundle, s: &Summary) -> SweepPoint {
        let st = &s.steady;
        let d = |x: &Option<crate::analyze::Dist>, f: fn(&crate::analyze::Dist) -> f64| {
            x.as_ref().map(f)
        };
        let eff = |k: &str| s.efficiency.as_ref().and_then(|e| e.value(k));
        let (slo_percentile, slo_metrics) = PointMetric::of(s);
        SweepPoint {
            slo_percentile,
            slo_metrics,
            value: value.to_owned(),
            bundle: bundle.dir.clone(),
            offered_rps: st.throughput.offered_rps,
            achieved_rps: st.throughput.achieved_rps,
            ttft_p50_ms: d(&st.stats.ttft_ms, |d| d.p50),
            ttft_p99_ms: d(&st.stats.ttft_ms, |d| d.p99),
            tpot_p50_ms: d(&st.stats.tpot_ms, |d| d.p50),
            tpot_p99_ms: d(&st.stats.tpot_ms, |d| d.p99),
            e2e_p99_ms: d(&st.stats.e2e_ms, |d| d.p99),
            output_tokens_per_s: st.throughput.output_tokens_per_s,
            attainment: st.slo.as_ref().map(|x| x.attainment),
            goodput_rps: st.slo.as_ref().and_then(|x| x.goodput_rps),
            correct_calls: st.tools.as_ref().and_then(|t| t.correct_share),
            validity: s.validity.verdict,
            slo_met: st.slo.as_ref().map(|x| x.pass).filter(|_| !s.interrupted),
            slo_verdict: st
                .slo
                .as_ref()
                .map(|x| x.verdict)
                .filter(|_| !s.interrupted),
            steady_requests: st.stats.requests,
            interrupted: s.interrupted,
            confirmation: false,
            refuted: false,
            fails_because: fails_because(s),
            client_limited: s
                .validity
                .reasons
                .iter()
                .any(|r| r.starts_with("the client fell behind its schedule")),
            tps_per_user: eff("tps_per_user"),
            slo_output_tps: s
                .efficiency
                .as_ref()
                .and_then(|e| Some(e.slo_output_tokens? / e.window_s))
                .filter(|x| x.is_finite()),
            slo_output_tps_per_accelerator: eff("slo_output_tps_per_accelerator"),
            slo_output_tokens_per_currency: eff("slo_output_tokens_per_currency"),
            joules_per_output_token: eff("joules_per_output_token"),
            cost_per_m_slo_output_tokens: eff("cost_per_m_slo_output_tokens"),
            currency: s.efficiency.as_ref().and_then(|e| e.currency.clone()),
            pareto: false,
        }
    }
}

/// The frontier's y axis: SLO-meeting output tokens/s per accelerator when every point knows
/// its accelerators, else per deployment.
fn frontier_y(points: &[SweepPoint]) -> (fn(&SweepPoint) -> Option<f64>, &'static str) {
    if points
        .iter()
        .all(|p| p.slo_output_tps_per_accelerator.is_some() || p.slo_output_tps.is_none())
        && points
            .iter()
            .any(|p| p.slo_output_tps_per_accelerator.is_some())
    {
        (
            |p| p.slo_output_tps_per_accelerator,
            "SLO-meeting output tok/s per accelerator",
        )
    } else {
        (
            |p| p.slo_output_tps,
            "SLO-meeting output tok/s per deployment (accelerator count unknown)",
        )
    }
}

/// Marks each point on the frontier of tokens/s per user against SLO-meeting tokens/s (per
/// accelerator when known).
pub fn mark_pareto(points: &mut [SweepPoint]) {
    let (y, _) = frontier_y(points);
    // A refuted point failed its confirmation: it is no point of the frontier.
    let xy: Vec<Option<(f64, f64)>> = points
        .iter()
        .map(|p| p.tps_per_user.zip(y(p)).filter(|_| !p.refuted))
        .collect();
    for (p, on) in points
        .iter_mut()
        .zip(crate::analyze::efficiency::pareto(&xy))
    {
        p.pareto = on;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepResult {
    pub contract: String,
    pub vary: Vary,
    /// With `--capacity`: the search's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// Fingerprints every point shares (all axes but the varied one are identical by
    /// construction; the list shows it).
    pub points: Vec<SweepPoint>,
    pub interrupted: bool,
}

/// Where and how a sweep's runs go.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The parent bundle goes to `<out_root>/<contract name>/…`.
    pub out_root: PathBuf,
    /// Told each point's progress and warnings.
    pub watch: std::sync::Arc<dyn crate::run::Watch>,
    pub argv: Vec<String>,
    pub cancel: CancellationToken,
    /// See [`RunOptions::signal`].
    pub signal: std::sync::Arc<std::sync::OnceLock<&'static str>>,
    /// See [`RunOptions::wake_latency_hold`].
    pub wake_latency_hold: bool,
}

/// Runs one bundle per value under a parent bundle (`sweep.json`, `sweep.md`).
pub async fn sweep(
    path: &Path,
    src: &str,
    vary: &Vary,
    o: &SweepOptions,
) -> anyhow::Result<(Bundle, SweepResult)> {
    let (out_root, cancel) = (o.out_root.as_path(), &o.cancel);
    // Every variant is built and validated before the first run: no partial sweep on a typo.
    let mut variants: Vec<(String, Contract, Inputs)> = Vec::new();
    for v in &vary.values {
        let text = set_key(src, &vary.key, v)
            .map_err(|e| anyhow::anyhow!("{}: --vary {}={v}: {e}", path.display(), vary.key))?;
        let (c, inputs) = crate::workload::parse(&text, path)
            .with_context(|| format!("--vary {}={v}", vary.key))?;
        crate::workload::environment::check_environment(&c, &text, path)?;
        variants.push((v.clone(), c, inputs));
    }
    let name = variants[0].1.name.clone();
    let parent = Bundle::create(out_root, &variants[0].1)
        .with_context(|| format!("creating a bundle under {}", out_root.display()))?;
    parent.write("contract.toml", src)?;
    let mut points = Vec::new();
    let mut interrupted = false;
    for (i, (value, c, inputs)) in variants.into_iter().enumerate() {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let r = run_point(&parent, i + 1, c, inputs, o).await?;
        // A point that gave up (its target failed) is a point; a signal ends the sweep.
        interrupted |= cancel.is_cancelled();
        let point = SweepPoint::of(&value, &r.bundle, &r.summary);
        o.watch.line(&point_line(i + 1, &vary.key, &point));
        points.push(point);
    }
    mark_pareto(&mut points);
    let result = SweepResult {
        contract: name,
        vary: vary.clone(),
        capacity: None,
        points,
        interrupted,
    };
    write_sweep(&parent, &result)?;
    Ok((parent, result))
}

/// Whether a capacity point passes: the run meets the SLO ([`crate::analyze::SloResult::meets`]:
/// every percentile within its threshold and attainment at its target), at least as its
/// sample indicates, *and* is VALID (the server kept up with the offered rate, the client kept
/// its schedule) and ran to its end. The capacity is the highest rate that passes; the
/// discrete-event check in the tests applies the same function to the simulator's ground
/// truth. Whether the pass is *supported* is [`supported_capacity`].
pub fn passes_capacity(s: &Summary) -> bool {
    s.steady.slo.as_ref().is_some_and(|x| x.verdict.met())
        && s.validity.is_valid()
        && !s.interrupted
}

/// A passing point whose sample supports the pass at the contract's confidence.
pub fn supported_capacity(s: &Summary) -> bool {
    passes_capacity(s)
        && s.steady
            .slo
            .as_ref()
            .is_some_and(|x| x.verdict == crate::analyze::SloVerdict::Met)
}

/// The capacity rule in words.
pub fn capacity_rule(s: &crate::contract::Slo) -> String {
    format!(
        "the highest offered rate whose run meets the SLO ({}) and is VALID (achieved ≈ offered, client on schedule); supported when its sample supports the pass at measurement.confidence, indicated when it only meets it at the point estimates",
        s.rule()
    )
}

/// What a capacity search needs of its contract: open-loop load at a rate, and an SLO. The
/// rate it starts from.
pub(crate) fn capacity_needs(base: &Contract) -> anyhow::Result<f64> {
    if !base.load.is_open() {
        bail!(
            "--capacity needs open-loop load: a closed loop cannot find a capacity (it slows down with the server)"
        );
    }
    let Some(rate) = base.load.rate() else {
        bail!(
            "--capacity searches load.rate: a trace replays at its own timing and a load program at its stages' rates (for a program, end it with a stage of shape = \"edge\")"
        );
    };
    if !base.has_slo() {
        bail!("--capacity needs an [slo]: capacity is the highest rate at which the SLO holds");
    }
    Ok(rate)
}

/// A rate as a point's value is written (and compared: a bisected rate has more decimals).
fn rate_value(rate: f64) -> String {
    format!("{rate:.4}")
}

/// The points the search ran at `rate`, in the order run.
fn points_at(points: &[SweepPoint], rate: f64) -> impl Iterator<Item = &SweepPoint> {
    let value = rate_value(rate);
    points.iter().filter(move |p| p.value == value)
}

/// The point a capacity answer at `rate` rests on: its confirmation when that passed, else the
/// last passing run at that rate.
fn answer_at(points: &[SweepPoint], rate: f64) -> Option<&SweepPoint> {
    let at: Vec<&SweepPoint> = points_at(points, rate).collect();
    at.iter()
        .rev()
        .find(|p| p.confirmation && passes(p))
        .or_else(|| at.iter().rev().find(|p| passes(p)))
        .copied()
}

/// The point that failed at `rate`: a refuting confirmation, else the last run there.
fn failed_at(points: &[SweepPoint], rate: f64) -> Option<&SweepPoint> {
    let at: Vec<&SweepPoint> = points_at(points, rate).collect();
    at.iter().rev().find(|p| !passes(p)).or(at.last()).copied()
}

/// The point the search ran at `rate` (its last run there).
fn point_at(points: &[SweepPoint], rate: f64) -> Option<&SweepPoint> {
    points_at(points, rate).last()
}

/// A capacity point's rate, from its value as written.
fn rate_of(p: &SweepPoint) -> f64 {
    p.value.parse::<f64>().unwrap_or(0.0)
}

/// `--capacity`: the highest open-loop `load.rate` whose run meets the SLO and is VALID
/// ([`passes_capacity`]), found by bracketing then bisection, every run kept as a point of the
/// sweep.
pub async fn capacity(
    path: &Path,
    src: &str,
    resolution: f64,
    max_runs: usize,
    confirm_within: std::time::Duration,
    o: &SweepOptions,
) -> anyhow::Result<(Bundle, SweepResult)> {
    let (out_root, cancel) = (o.out_root.as_path(), &o.cancel);
    let (base, _) = crate::workload::parse(src, path)?;
    crate::workload::environment::check_environment(&base, src, path)?;
    capacity_needs(&base)?;
    // Each point is judged on the sample it is given: a clear miss brackets the search on any
    // sample; a pass on too few requests is indicated, and the answer is confirmed with the
    // requests its claim needs when that fits `confirm_within`. Said before the first run.
    o.watch.note(&capacity_plan(&base, confirm_within));
    let parent = Bundle::create(out_root, &base)
        .with_context(|| format!("creating a bundle under {}", out_root.display()))?;
    parent.write("contract.toml", src)?;
    let at = At {
        parent: &parent,
        path,
        src,
        base: &base,
        o,
    };
    let (mut cap, mut points) = search(&at, resolution, max_runs, confirm_within).await?;
    cap.rule = contract_capacity_rule(&base);
    points.sort_by(|a, b| rate_of(a).total_cmp(&rate_of(b)));
    mark_pareto(&mut points);
    let result = SweepResult {
        contract: base.name.clone(),
        vary: Vary {
            key: "load.rate".into(),
            values: points.iter().map(|p| p.value.clone()).collect(),
        },
        interrupted: cancel.is_cancelled(),
        capacity: Some(cap),
        points,
    };
    write_sweep(&parent, &result)?;
    Ok((parent, result))
}

/// What every run of a capacity search shares: the parent bundle, the contract (its path, text
/// and parsed form) and the sweep's options.
struct At<'a> {
    parent: &'a Bundle,
    path: &'a Path,
    src: &'a str,
    base: &'a Contract,
    o: &'a SweepOptions,
}

/// The capacity search: bracket then bisect, confirm an indicated answer, and when a
/// confirmation refutes it, go on below it within the budget. Its answer and every point run.
async fn search(
    at: &At<'_>,
    resolution: f64,
    max_runs: usize,
    confirm_within: std::time::Duration,
) -> anyhow::Result<(Capacity, Vec<SweepPoint>)> {
    let mut points = Vec::<SweepPoint>::new();
    let start = capacity_needs(at.base)?;
    let mut bracket = crate::arrival::edge::Bracket::new(start, resolution, max_runs);
    let (mut confirmation, mut unconfirmed, mut refuted) = (None, None, Vec::new());
    'search: loop {
        while let Some(rate) = bracket.next_rate() {
            if at.o.cancel.is_cancelled() {
                break 'search;
            }
            let r = at.run(&mut points, rate, None).await?;
            // A signal ends the search (the point in flight is kept, as measured); a point
            // that gave up (its target failed) fails.
            if at.o.cancel.is_cancelled() {
                break 'search;
            }
            bracket.observe(rate, PointOutcome::of(&r.summary));
        }
        // The answer, confirmed with the requests its claim needs when it is only indicated.
        let found = bracket.result();
        let Some(rate) = found.capacity_rps else {
            break;
        };
        if found.supported_rps == Some(rate) {
            break;
        }
        if confirmation.is_some() && bracket.runs_left() == 0 {
            unconfirmed = Some(format!(
                "the run budget (--max-runs {max_runs}) was spent after a confirmation refuted a faster rate"
            ));
            break;
        }
        let n = match confirmation_size(&points, rate, at.base, confirm_within) {
            Ok(n) => n,
            Err(why) => {
                unconfirmed = Some(why);
                break;
            }
        };
        let r = at.run(&mut points, rate, Some(n)).await?;
        let passed = passes_capacity(&r.summary);
        confirmation = Some(Confirmation {
            rate,
            requests: n,
            verdict: r.summary.steady.slo.as_ref().map(|x| x.verdict),
            passed,
        });
        if r.summary.interrupted || at.o.cancel.is_cancelled() {
            break;
        }
        if passed {
            bracket.confirmed(rate, supported_capacity(&r.summary));
            break;
        }
        refuted.push(rate);
        refute(&mut points, &mut bracket, rate, at.o, max_runs);
    }
    let mut cap = Capacity::of(bracket.result());
    cap.confirmation = confirmation;
    cap.unconfirmed = unconfirmed;
    cap.refuted = refuted;
    cap.confidence = at.base.measurement.confidence;
    cap.resolution_asked = resolution;
    cap.max_runs = max_runs;
    cap.answer(&points, at.base.workload.seed);
    Ok((cap, points))
}

/// A pass its confirmation failed: the smaller run's pass was the sample's luck. Its points
/// fail from now on, and the search goes on below it within its budget, confirming its new
/// answer; said as it happens.
fn refute(
    points: &mut [SweepPoint],
    bracket: &mut crate::arrival::edge::Bracket,
    rate: f64,
    o: &SweepOptions,
    max_runs: usize,
) {
    for p in points
        .iter_mut()
        .filter(|p| p.value == rate_value(rate) && !p.confirmation)
    {
        p.refuted = true;
    }
    bracket.refute(rate);
    o.watch.note(&match bracket.next_rate() {
        Some(next) => format!(
            "{rate:.2} req/s is refuted by its confirmation: the search goes on below it, at {next:.2} req/s ({} of {max_runs} runs left)",
            bracket.runs_left()
        ),
        None => format!(
            "{rate:.2} req/s is refuted by its confirmation: the answer is the highest passing rate below it ({} of {max_runs} runs left)",
            bracket.runs_left()
        ),
    });
}

/// The rule a capacity answer is held to: the contract's SLO, or every class's own.
fn contract_capacity_rule(base: &Contract) -> String {
    if base.classes.is_empty() {
        capacity_rule(&base.slo)
    } else {
        let each: Vec<String> = base
            .classes
            .iter()
            .map(|k| format!("`{}`: {}", k.name, k.slo_or(&base.slo).rule()))
            .collect();
        format!(
            "the highest offered rate (the classes' shares fixed) at which every class meets its own SLO ({}) and the run is VALID",
            each.join("; ")
        )
    }
}

/// Runs one point's contract into `point-NN` of the parent bundle.
async fn run_point(
    parent: &Bundle,
    n: usize,
    c: Contract,
    inputs: Inputs,
    o: &SweepOptions,
) -> anyhow::Result<crate::run::RunResult> {
    let opts = RunOptions {
        out_root: o.out_root.clone(),
        watch: o.watch.clone(),
        argv: o.argv.clone(),
        overrides: Vec::new(),
        bundle_dir: Some(parent.dir.join(format!("point-{n:02}"))),
        wake_latency_hold: o.wake_latency_hold,
        signal: o.signal.clone(),
        live: None,
        simulator: None,
    };
    run(c, inputs, opts, o.cancel.clone()).await
}

/// Before a capacity search, in words: what each point's sample can support at the
/// contract's confidence, and how an indicated answer is confirmed.
fn capacity_plan(base: &Contract, confirm_within: std::time::Duration) -> String {
    use crate::analyze::claims::{needs, percent, pname};
    let conf = base.measurement.confidence;
    let judged: Vec<(String, f64, f64)> = if base.classes.is_empty() {
        vec![(String::new(), 1.0, base.slo.percentile)]
    } else {
        base.classes
            .iter()
            .map(|k| {
                (
                    format!(" of class `{}`", k.name),
                    k.share.unwrap_or(1.0),
                    k.slo_or(&base.slo).percentile,
                )
            })
            .collect()
    };
    let Some(n) = base.load.requests() else {
        return format!(
            "capacity search: each point runs for its load.duration; a pass on fewer steady requests than its SLO percentile needs at {} confidence is indicated, not supported, and a clear miss is conclusive on any sample",
            percent(conf)
        );
    };
    let short: Vec<String> = judged
        .iter()
        .filter_map(|(class, share, p)| {
            let need = crate::analyze::min_requests_for(*p, 0, conf);
            let have = (n as f64 * share) as u64;
            (have < need).then(|| {
                format!(
                    "{}{class} needs at least {} steady requests with no miss and a point sends about {have}",
                    pname(*p),
                    needs(need)
                )
            })
        })
        .collect();
    if short.is_empty() {
        return format!(
            "capacity search: each point sends {n} steady requests, enough to support its SLO percentile at {} confidence with no miss",
            percent(conf)
        );
    }
    format!(
        "capacity search on small points: {} (at {} confidence). A passing point is therefore indicated, not supported; a clear miss is conclusive on any sample and brackets the search. The answer is then confirmed by one run at the passing rate with the requests its claim needs, if that takes at most {} (--confirm-within); otherwise it stays indicated.",
        short.join("; "),
        percent(conf),
        human_duration(confirm_within)
    )
}

/// "15 min", "90 s", "2.5 h".
fn human_duration(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 5400.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// A point's name in a table: its value, marked when it is a confirmation.
fn point_name(p: &SweepPoint) -> String {
    if p.confirmation {
        format!("{} (confirmation)", p.value)
    } else {
        p.value.clone()
    }
}

/// The SLO cell of a sweep's table: the verdict with its support, or `interrupted`.
fn slo_cell(p: &SweepPoint) -> String {
    if p.interrupted {
        return "interrupted".to_owned();
    }
    if p.refuted {
        return "refuted by its confirmation".to_owned();
    }
    match (p.slo_verdict, p.slo_met) {
        (Some(v), _) => v.short().to_owned(),
        (None, Some(true)) => "met".to_owned(),
        (None, Some(false)) => "missed".to_owned(),
        (None, None) => "—".to_owned(),
    }
}

/// One finished point as a line, printed as the sweep goes (the table is the end's).
pub fn point_line(n: usize, key: &str, p: &SweepPoint) -> String {
    let f = |x: Option<f64>| x.map_or("—".to_owned(), crate::report::num);
    // The SLO's percentile of each metric it names (a median only in the table); else p99.
    let latency: Vec<String> = latency_cells(p)
        .into_iter()
        .filter(|(name, _)| !name.ends_with(" p50"))
        .map(|(name, v)| {
            format!(
                "{name} {}",
                v.map_or("—".to_owned(), |v| format!(
                    "{} ms",
                    crate::report::num(v)
                ))
            )
        })
        .collect();
    format!(
        "point {n}{}: {key} {} · offered {} achieved {} req/s · {} · attainment {} on {} steady · SLO {} · {}",
        if p.confirmation {
            " (confirmation)"
        } else {
            ""
        },
        p.value,
        f(p.offered_rps),
        f(p.achieved_rps),
        latency.join(" · "),
        p.attainment
            .map_or("—".to_owned(), |a| format!("{:.1}%", a * 100.0)),
        p.steady_requests,
        slo_cell(p),
        p.validity
    )
}

/// Steady requests a run at this point's rate needs for its pass to be supported, from the
/// miss rates its summary shows (each SLO metric and attainment; with classes, each class at
/// its share); `None` when no size can (a miss rate at the limit).
fn support_size(s: &Summary, c: &Contract) -> Option<u64> {
    use crate::analyze::claims::requests_to_support;
    let conf = c.measurement.confidence;
    use crate::analyze::claims::confirmation_miss_share as assume;
    let one = |slo: &crate::analyze::SloResult| -> Option<u64> {
        let t = slo.attainment_target;
        let mut n = requests_to_support(t, assume(t, 1.0 - slo.attainment), conf)?;
        let q = slo.percentile / 100.0;
        for m in &slo.per_metric {
            let seen = if m.requests == 0 {
                0.0
            } else {
                m.misses as f64 / m.requests as f64
            };
            n = n.max(requests_to_support(q, assume(q, seen), conf)?);
        }
        Some(n)
    };
    match &s.classes {
        Some(classes) => classes
            .iter()
            .filter_map(|k| Some((k, k.slo.as_ref()?)))
            .map(|(k, slo)| Some((one(slo)? as f64 / k.share.max(1e-9)).ceil() as u64))
            .try_fold(0u64, |acc, n| n.map(|n| acc.max(n))),
        None => one(s.steady.slo.as_ref()?),
    }
}

/// The summary of the last point the sweep ran at `rate`, as its bundle keeps it.
fn summary_at(points: &[SweepPoint], rate: f64) -> Option<Summary> {
    let at = point_at(points, rate)?;
    crate::bundle::read_json(&at.bundle.join(crate::bundle::SUMMARY))
        .ok()?
        .and_then(|t| serde_json::from_value::<Summary>(t).ok())
}

/// The contract of the confirming run: at `value` req/s, with `n` steady requests (or the
/// duration that takes, when the contract is bounded by time).
fn confirmation_text(
    src: &str,
    base: &Contract,
    value: &str,
    n: u64,
    rate: f64,
) -> anyhow::Result<String> {
    let text = set_key(src, "load.rate", value).map_err(anyhow::Error::msg)?;
    if base.load.duration().is_some() {
        set_key(
            &text,
            "load.duration",
            &format!("\"{:.0}s\"", (n as f64 / rate).ceil()),
        )
    } else {
        set_key(&text, "load.requests", &n.to_string())
    }
    .map_err(anyhow::Error::msg)
}

/// The steady requests a confirmation of the indicated capacity at `rate` needs (from the miss
/// rates its passing point showed), or why none is run: no size can support it, or the run
/// takes longer than `within` at that rate.
fn confirmation_size(
    points: &[SweepPoint],
    rate: f64,
    base: &Contract,
    within: std::time::Duration,
) -> Result<u64, String> {
    let Some(summary) = summary_at(points, rate) else {
        return Err(format!("the run at {rate:.2} req/s left no summary"));
    };
    let Some(n) = support_size(&summary, base) else {
        return Err(format!(
            "{rate:.2} req/s passed with a miss rate too close to the SLO's limit for any run to support it"
        ));
    };
    let seconds = (n + base.warmup.requests) as f64 / rate;
    if seconds > within.as_secs_f64() {
        return Err(format!(
            "supporting {rate:.2} req/s needs about {n} steady requests (sized for the miss rate its point showed, at least a quarter of the SLO's allowance: more than the no-miss minimum), {} at that rate, more than --confirm-within {}",
            human_duration(std::time::Duration::from_secs_f64(seconds)),
            human_duration(within)
        ));
    }
    Ok(n)
}

impl At<'_> {
    /// Runs one point of the search at `rate` (with `confirm` steady requests: a
    /// confirmation), as the next point of the parent bundle: its own arrival draw
    /// (`workload.seed` + its index, so no answer rests on one draw), printed as it finishes
    /// and kept.
    async fn run(
        &self,
        points: &mut Vec<SweepPoint>,
        rate: f64,
        confirm: Option<u64>,
    ) -> anyhow::Result<crate::run::RunResult> {
        let value = rate_value(rate);
        let n = points.len() + 1;
        let text = match confirm {
            Some(k) => confirmation_text(self.src, self.base, &value, k, rate)?,
            None => set_key(self.src, "load.rate", &value).map_err(anyhow::Error::msg)?,
        };
        let seed = self.base.workload.seed.wrapping_add(n as u64 - 1);
        let text =
            set_key(&text, "workload.seed", &seed.to_string()).map_err(anyhow::Error::msg)?;
        let (c, inputs) = crate::workload::parse(&text, self.path)?;
        let r = run_point(self.parent, n, c, inputs, self.o).await?;
        let mut point = SweepPoint::of(&value, &r.bundle, &r.summary);
        point.confirmation = confirm.is_some();
        self.o.watch.line(&point_line(n, "load.rate", &point));
        points.push(point);
        Ok(r)
    }
}

/// `sweep.json`, `sweep.md` and `sweep.html` in the parent bundle.
fn write_sweep(parent: &Bundle, r: &SweepResult) -> std::io::Result<()> {
    parent.write_json("sweep.json", r)?;
    parent.write("sweep.md", &document(r).markdown())?;
    parent.write("sweep.html", &html_page(r))
}

/// The sweep as a report.
pub fn document(r: &SweepResult) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput sweep · {} · {}", r.contract, r.vary.key));
    let f = |x: Option<f64>| x.map_or("—".to_owned(), crate::report::num);
    let pct = |x: Option<f64>| x.map_or("—".to_owned(), |v| format!("{:.1}%", v * 100.0));
    // The columns are those of a point that has the SLO's figures (every point of a sweep has
    // the same SLO); a point without them (interrupted before its verdict) shows dashes.
    let model = r
        .points
        .iter()
        .find(|p| !p.slo_metrics.is_empty())
        .or(r.points.first());
    let latency: Vec<String> = model.map_or_else(Vec::new, |p| {
        latency_cells(p).into_iter().map(|(name, _)| name).collect()
    });
    let by_slo = model.is_some_and(|p| !p.slo_metrics.is_empty());
    let tools = r.points.iter().any(|p| p.correct_calls.is_some());
    let rows = r
        .points
        .iter()
        .map(|p| {
            let mut row = vec![point_name(p), f(p.offered_rps), f(p.achieved_rps)];
            if by_slo && p.slo_metrics.is_empty() {
                row.extend(latency.iter().map(|_| "—".to_owned()));
            } else {
                row.extend(latency_cells(p).into_iter().map(|(_, v)| f(v)));
            }
            row.push(f(p.output_tokens_per_s));
            if tools {
                row.push(pct(p.correct_calls));
            }
            row.extend([
                pct(p.attainment),
                f(p.goodput_rps),
                slo_cell(p),
                p.validity.to_string(),
            ]);
            row
        })
        .collect();
    let mut head = vec![r.vary.key.as_str(), "offered req/s", "achieved req/s"];
    head.extend(latency.iter().map(String::as_str));
    head.push("output tok/s");
    if tools {
        head.push("correct calls");
    }
    head.extend(["attainment", "goodput req/s", "SLO", "validity"]);
    d.table(&head, rows);
    d.line("Latency in ms, steady phase of each point; every point's bundle holds its raw records and full report.");
    frontier_table(&mut d, r);
    if let Some(c) = &r.capacity {
        capacity_lines(&mut d, r, c);
    }
    if r.interrupted {
        d.line("Interrupted: the point in flight is kept as measured (its bundle says interrupted); the points after it were not run.");
    }
    d
}

/// The capacity search's answer: its rule, the bracket with its last passing and first failing
/// points, and whether the client's limit stopped it.
fn capacity_lines(d: &mut crate::report::Doc, r: &SweepResult, c: &Capacity) {
    let why = |rate: f64| {
        failed_at(&r.points, rate)
            .and_then(|p| {
                if p.refuted {
                    Some("refuted by its confirmation".to_owned())
                } else {
                    p.fails_because.clone()
                }
            })
            .unwrap_or_else(|| "failed".to_owned())
    };
    let rates = |p: Option<&SweepPoint>| {
        let f =
            |x: Option<f64>, what: &str| x.map_or(String::new(), |a| format!(", {what} {a:.2}"));
        p.map_or(String::new(), |p| {
            format!(
                "{}{}",
                f(p.offered_rps, "offered"),
                f(p.achieved_rps, "achieved")
            )
        })
    };
    if !c.rule.is_empty() {
        d.line(format!("Capacity rule: {}.", c.rule));
    }
    d.line(match (c.capacity_rps, c.failed_at_rps) {
        (Some(lo), Some(hi)) => format!(
            "Capacity at the SLO: {}{}, {}. Last passing point {lo:.2} req/s (SLO met, VALID{}); first failing point {hi:.2} req/s ({}{}) — bracket {:.1}% wide after {} runs.",
            if c.stopped_by_client_at.is_some() { "at least " } else { "" },
            c.answer_words().unwrap_or_default(),
            c.support_words(lo),
            rates(answer_at(&r.points, lo)),
            why(hi),
            rates(failed_at(&r.points, hi)),
            (hi - lo) / hi * 100.0,
            c.tried.len()
        ),
        (Some(lo), None) if r.interrupted => format!(
            "Every rate finished passed, up to {lo:.2} req/s; the search was interrupted before it found a failing one."
        ),
        (Some(lo), None) => format!(
            "Every rate tried met the SLO, up to {lo:.2} req/s ({}): capacity is above it (raise --max-runs).",
            c.support_words(lo)
        ),
        (None, Some(hi)) => format!(
            "No rate tried passed, down to {hi:.2} req/s ({}).",
            why(hi)
        ),
        (None, None) => "No run finished.".to_owned(),
    });
    for rate in &c.refuted {
        d.warn(format!(
            "Refuted: {rate:.2} req/s passed on its point's sample, then failed its confirmation (a larger run at that rate); it counts as failing everywhere, and the search went on below it."
        ));
    }
    if let Some(short) = c.short_of_resolution() {
        d.warn(format!("Not at the resolution asked: {short}."));
    }
    if c.capacity_rps.is_some() && !c.arrivals.is_empty() {
        d.line(format!("Arrivals: {}.", c.arrivals));
    }
    if let Some(at) = c.stopped_by_client_at {
        d.warn(format!(
            "The search stopped at {at:.2} req/s: the server met the SLO there, but the client fell behind its schedule (dispatch lag), so the run is INVALID, and lower rates would find only the client's limit. The server's capacity is likely above {at:.2} req/s and is not measured ({}). A client machine that keeps the schedule (or several, `load.shard`) measures further.",
            c.capacity_rps.map_or("no rate tried passed".to_owned(), |l| format!("{l:.2} req/s passed"))
        ));
    } else if c.client_limited {
        d.line("The client fell behind its schedule at a failing rate (dispatch lag): the answer may be the client's limit, not the server's.");
    }
    if !c.retried_for_client.is_empty() {
        d.line(format!(
            "Run twice: {}, where the first run's client fell behind its schedule while the server met the SLO. A rate is taken as the client's limit only when that happens again (a lone late wake-up is not).",
            crate::analyze::edge::rates_in_words(&c.retried_for_client)
        ));
    }
}

/// The efficiency of each point, when any has a figure: tokens/s per user against SLO-meeting
/// tokens/s per accelerator (or per deployment), energy and cost, the frontier marked.
fn frontier_table(d: &mut crate::report::Doc, r: &SweepResult) {
    let has = |f: fn(&SweepPoint) -> Option<f64>| r.points.iter().any(|p| f(p).is_some());
    if !has(|p| p.tps_per_user) || !has(|p| p.slo_output_tps) {
        return;
    }
    let (y, y_name) = frontier_y(&r.points);
    let g = |x: Option<f64>| x.map_or("—".to_owned(), crate::report::sig);
    let currency = r.points.iter().find_map(|p| p.currency.clone());
    let rows = r
        .points
        .iter()
        .map(|p| {
            vec![
                point_name(p),
                g(p.tps_per_user),
                g(y(p)),
                g(p.joules_per_output_token),
                g(p.cost_per_m_slo_output_tokens),
                match (p.pareto, p.refuted) {
                    (_, true) => "refuted",
                    (true, false) => "✓ frontier",
                    (false, false) => "",
                }
                .to_owned(),
            ]
        })
        .collect();
    let cost = format!(
        "{} per 1M SLO-meeting output tok",
        currency.as_deref().unwrap_or("cost")
    );
    d.table(
        &[
            r.vary.key.as_str(),
            "output tok/s per user",
            y_name,
            "J per output tok",
            cost.as_str(),
            "pareto",
        ],
        rows,
    );
    d.line("The frontier: no other point gives more tokens/s per user and more SLO-meeting tokens/s. Only requests that met the SLO count; an absent figure's reason is in its point's report.");
}

/// A sweep: the answer first (the capacity and its bracket, or how many points met the SLO),
/// then latency at percentile and goodput against the offered load with the SLO line, the
/// capacity's bracket shaded and the points where the client fell behind ringed, then the
/// table.
pub fn html_page(r: &SweepResult) -> String {
    use crate::report::html::banner_toned;
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput sweep · {}", r.contract));
    let met = r.points.iter().filter(passes).count();
    let cap = r.capacity.as_ref();
    let pass = cap.map_or(Some(met > 0), |c| match c.capacity_rps {
        Some(a) if !c.client_limited && c.supported_rps == Some(a) => Some(true),
        Some(_) if !c.client_limited => None,
        _ => Some(false),
    });
    d.raw_html(banner_toned(&banner_lines(r, met), pass, &tiles(r)));
    d.h("Against offered load");
    load_figures(&mut d, r);
    frontier_figures(&mut d, r);
    let doc = document(r);
    d.blocks.extend(doc.blocks.into_iter().skip(1));
    crate::report::format::html::wrap(&format!("goodput sweep · {}", r.contract), &d)
}

/// A point that meets the SLO and is VALID.
fn passes(p: &&SweepPoint) -> bool {
    p.slo_met == Some(true) && p.validity == crate::analyze::ValidityVerdict::Valid && !p.refuted
}

/// The banner's words: the capacity found and its rule, or how many points pass.
fn banner_lines(r: &SweepResult, met: usize) -> Vec<String> {
    let cap = r.capacity.as_ref();
    let mut lines = vec![match cap {
        Some(c) => match (c.capacity_rps, c.failed_at_rps) {
            (Some(a), Some(b)) if c.stopped_by_client_at.is_some() => format!(
                "CAPACITY at least {a:.2} req/s: the client fell behind at {b:.2}, where the server still met the SLO"
            ),
            (None, Some(b)) if c.stopped_by_client_at.is_some() => format!(
                "CAPACITY NOT MEASURED: the client fell behind at {b:.2} req/s, where the server met the SLO"
            ),
            (Some(a), Some(b)) if c.supported_rps == Some(a) => format!(
                "CAPACITY {}, supported: passes at {a:.2}, fails at {b:.2}",
                c.answer_words().unwrap_or_default()
            ),
            (Some(a), Some(b)) => format!(
                "CAPACITY {}, indicated only: passes at {a:.2} on too few requests to support it, fails at {b:.2}",
                c.answer_words().unwrap_or_default()
            ),
            (Some(a), None) => format!("CAPACITY at least {a:.2} req/s: no rate tried failed"),
            (None, Some(b)) => format!("NO CAPACITY: even {b:.2} req/s, the lowest tried, fails"),
            (None, None) => "NO ANSWER: no run finished".to_owned(),
        },
        None => format!(
            "{} of {} points meet the SLO and are VALID (varying {})",
            met,
            r.points.len(),
            r.vary.key
        ),
    }];
    if let Some(c) = cap {
        lines.push(format!("Rule: {}", c.rule));
        if let Some(a) = c.capacity_rps {
            lines.push(format!("At {a:.2} req/s: {}.", c.support_words(a)));
        }
        for rate in &c.refuted {
            lines.push(format!("{rate:.2} req/s passed on its point, then failed its confirmation: refuted, it counts as failing."));
        }
        if let Some(short) = c.short_of_resolution() {
            lines.push(format!("Not at the resolution asked: {short}."));
        }
        if let Some(at) = c.stopped_by_client_at {
            lines.push(format!("The search stopped at {at:.2} req/s, where the server met the SLO but the client fell behind its schedule: the server's capacity is not measured above it (ringed points)."));
        } else if c.client_limited {
            lines.push("The client fell behind its schedule near the answer: it may be the client's limit, not the server's (ringed points).".to_owned());
        }
    }
    lines
}

/// The banner's tiles: the capacity, the best goodput among passing points, the points run.
fn tiles(r: &SweepResult) -> Vec<crate::report::html::Tile> {
    use crate::report::html::Tile;
    let cap = r.capacity.as_ref();
    let mut tiles = Vec::new();
    if let Some(c) = cap {
        tiles.push(Tile {
            name: "capacity (highest rate meeting the SLO, VALID)".into(),
            value: match (c.offered_rps, c.capacity_rps) {
                (Some(o), _) => format!("{o:.2} req/s offered"),
                (None, Some(a)) => format!("{a:.2} req/s"),
                (None, None) => "—".into(),
            },
            detail: format!(
                "{}{}",
                match c.capacity_rps {
                    Some(a) if c.supported_rps == Some(a) => "supported · ",
                    Some(_) => "indicated only · ",
                    None => "",
                },
                c.resolution.map_or(String::new(), |x| {
                    format!("bracket within {:.1}%", x * 100.0)
                })
            ),
            pass: match c.capacity_rps {
                Some(a) if c.supported_rps == Some(a) => Some(true),
                Some(_) => None,
                None => Some(false),
            },
        });
    }
    if let Some(best) = r
        .points
        .iter()
        .filter(passes)
        .filter_map(|p| p.goodput_rps)
        .reduce(f64::max)
    {
        tiles.push(Tile {
            name: "best goodput among points meeting the SLO, VALID".into(),
            value: format!("{best:.2} req/s"),
            detail: String::new(),
            pass: None,
        });
    }
    tiles.push(Tile {
        name: "points run".into(),
        value: r.points.len().to_string(),
        detail: format!(
            "{} client-limited",
            r.points.iter().filter(|p| p.client_limited).count()
        ),
        pass: None,
    });
    tiles
}

/// Latency at percentile, and throughput and goodput, against the offered load: the SLO's
/// line, the capacity's bracket shaded, the points where the client fell behind ringed.
/// The latency lines of a sweep's chart against offered load: the SLO's percentile of each
/// metric it names (what the verdicts are about), else TTFT and TPOT p99; each with its points
/// and those where the client fell behind (ringed).
type Line = (String, Vec<(f64, f64)>, Vec<(f64, f64)>);
fn latency_lines(r: &SweepResult) -> Vec<Line> {
    let x = |p: &SweepPoint| p.offered_rps.or_else(|| p.value.parse().ok());
    let series = |name: String, f: &dyn Fn(&SweepPoint) -> Option<f64>| -> Line {
        let at = |p: &SweepPoint| Some((x(p)?, f(p)?));
        let mut all: Vec<(f64, f64)> = r.points.iter().filter_map(at).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ringed = r.points.iter().filter(|p| p.client_limited).filter_map(at);
        (name, all, ringed.collect())
    };
    match r.points.iter().find(|p| !p.slo_metrics.is_empty()) {
        Some(m) => m
            .slo_metrics
            .iter()
            .map(|k| {
                let of = |p: &SweepPoint| {
                    p.slo_metrics
                        .iter()
                        .find(|j| j.metric == k.metric)?
                        .value_ms
                };
                series(k.name(m.slo_percentile.unwrap_or(99.0)), &of)
            })
            .collect(),
        None => vec![
            series("TTFT p99".into(), &|p| p.ttft_p99_ms),
            series("TPOT p99".into(), &|p| p.tpot_p99_ms),
        ],
    }
}

fn load_figures(d: &mut crate::report::Doc, r: &SweepResult) {
    let cap = r.capacity.as_ref();
    let x = |p: &SweepPoint| p.offered_rps.or_else(|| p.value.parse().ok());
    let pts = |f: fn(&SweepPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter_map(|p| Some((x(p)?, f(p)?)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let limited = |f: fn(&SweepPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        r.points
            .iter()
            .filter(|p| p.client_limited)
            .filter_map(|p| Some((x(p)?, f(p)?)))
            .collect()
    };
    let slo_ttft = r
        .points
        .first()
        .and_then(|p| {
            let path = p.bundle.join(crate::bundle::CONTRACT);
            let text =
                crate::text::read_capped_string(&path, crate::text::MAX_CONTRACT_BYTES).ok()?;
            crate::contract::parse(&text, &path).ok()
        })
        .and_then(|c| c.slo.ttft_ms.map(|t| (t.0, c.slo.percentile)));
    let mut lat = crate::report::svg::Chart::new(
        "sweep-latency",
        "Latency at percentile against offered load",
        "offered req/s (or the varied value)",
        "ms",
    )
    .line("TTFT p50", pts(|p| p.ttft_p50_ms));
    let named = latency_lines(r);
    for (i, (name, line, ringed)) in named.into_iter().enumerate() {
        lat = lat.line(&name, line);
        if i == 0 {
            lat = lat.mark(ringed, "client fell behind (ringed)");
        }
    }
    if let Some((t, pct)) = slo_ttft {
        lat = lat.hline(t, &format!("TTFT SLO p{pct} ≤ {t} ms"));
    }
    let mut good = crate::report::svg::Chart::new(
        "sweep-goodput",
        "Throughput and goodput against offered load",
        "offered req/s (or the varied value)",
        "req/s",
    )
    .line("achieved", pts(|p| p.achieved_rps))
    .line("goodput (met every threshold)", pts(|p| p.goodput_rps))
    .mark(limited(|p| p.goodput_rps), "client fell behind (ringed)");
    if let Some(c) = cap {
        match c.drawn_bracket() {
            (Some(a), Some(b)) => {
                let name = format!("capacity bracket {a:.1}–{b:.1} req/s offered");
                lat = lat.band(a, b, &name);
                good = good.band(a, b, &name);
            }
            (Some(a), None) => {
                lat = lat.vline(a, &format!("capacity ≥ {a:.1} req/s"));
                good = good.vline(a, &format!("capacity ≥ {a:.1} req/s"));
            }
            _ => {}
        }
    }
    d.figure(lat.render());
    d.figure(good.render());
}

/// The efficiency frontier as figures: every point by tokens/s per user against SLO-meeting
/// tokens/s per accelerator (and per unit of currency when priced), the pareto-optimal ones
/// joined and ringed.
fn frontier_figures(d: &mut crate::report::Doc, r: &SweepResult) {
    let (y, y_name) = frontier_y(&r.points);
    let currency = r.points.iter().find_map(|p| p.currency.clone());
    let per_currency = currency
        .as_ref()
        .map(|c| format!("SLO-meeting output tok per {c}"));
    let mut charts = vec![("frontier-accelerator", y_name.to_owned(), y)];
    if let Some(name) = per_currency {
        charts.push(("frontier-cost", name, |p: &SweepPoint| {
            p.slo_output_tokens_per_currency
        }));
    }
    let mut drawn = false;
    for (id, y_name, y) in charts {
        let xy: Vec<Option<(f64, f64)>> =
            r.points.iter().map(|p| p.tps_per_user.zip(y(p))).collect();
        if xy.iter().flatten().count() == 0 {
            continue;
        }
        // A refuted point is drawn (labelled) but is no candidate for the frontier.
        let candidates: Vec<Option<(f64, f64)>> = r
            .points
            .iter()
            .zip(&xy)
            .map(|(p, q)| q.filter(|_| !p.refuted))
            .collect();
        if !drawn {
            d.h("Efficiency frontier (SLO-meeting throughput only)");
            drawn = true;
        }
        let optimal = crate::analyze::efficiency::pareto(&candidates);
        let all: Vec<(f64, f64, String)> = r
            .points
            .iter()
            .zip(&xy)
            .filter_map(|(p, q)| {
                // A point whose run cannot support its claims says so beside it.
                let label = match (p.validity, p.refuted) {
                    (_, true) => format!("{} (refuted)", p.value),
                    (crate::analyze::ValidityVerdict::Valid, false) => point_name(p),
                    _ => format!("{} (INVALID)", point_name(p)),
                };
                q.map(|(a, b)| (a, b, label))
            })
            .collect();
        let mut front: Vec<(f64, f64)> = xy
            .iter()
            .zip(&optimal)
            .filter(|(_, o)| **o)
            .filter_map(|(q, _)| *q)
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        let chart = crate::report::svg::Chart::new(
            id,
            &format!("{y_name} against output tok/s per user"),
            "output tok/s per user (1000 ÷ median TPOT of SLO-meeting requests)",
            &y_name,
        )
        .x_tight()
        .scatter(&format!("each point, labelled by {}", r.vary.key), all)
        .line("pareto frontier", front.clone())
        .mark(front, "pareto-optimal (ringed)")
        .note("Up and to the right is better on both axes. A point off the frontier is beaten on both by another; only tokens of requests that met the SLO count, so an overloaded point cannot buy throughput with misses.");
        d.figure(chart.render());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_variable_at_a_time() {
        let v = Vary::parse(&["load.rate=1, 2,4".into()]).unwrap();
        assert_eq!(v.key, "load.rate");
        assert_eq!(v.values, ["1", "2", "4"]);
        let e = Vary::parse(&["load.rate=1,2".into(), "workload.seed=1,2".into()]).unwrap_err();
        assert!(
            e.to_string().contains("change one variable at a time"),
            "{e}"
        );
        assert!(e.to_string().contains("load.rate, workload.seed"), "{e}");
        assert!(Vary::parse(&["load.rate".into()]).is_err());
        assert!(Vary::parse(&["load.rate=".into()]).is_err());
        let e = Vary::parse(&["load.rate=1,,2".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("value 2 is empty"), "{e}");
    }

    /// A capacity search varies `load.rate`: it starts from the contract's, and a contract
    /// without one (a trace, a load program, a closed loop) is refused naming why.
    #[test]
    fn a_capacity_search_needs_a_fixed_rate_to_start_from() {
        let c = |load: &str| {
            let text = format!("[load]\n{load}requests = 10\n[slo]\nttft_ms = 500\n");
            crate::contract::parse(&text, Path::new("t.toml")).unwrap()
        };
        assert_eq!(capacity_needs(&c("rate = 3\n")).unwrap(), 3.0);
        let closed = capacity_needs(&c("concurrency = 2\n")).unwrap_err();
        assert!(closed.to_string().contains("open-loop"), "{closed}");
        let trace = capacity_needs(&c("arrival = \"trace\"\ntrace = \"t.csv\"\n")).unwrap_err();
        assert!(trace.to_string().contains("searches load.rate"), "{trace}");
    }

    #[test]
    fn set_key_keeps_everything_else_and_creates_tables() {
        let src = "# my contract\n[load]\nmodel = \"open\" # note\nrate = 2\nrequests = 10\n";
        let out = set_key(src, "load.rate", "8").unwrap();
        assert!(
            out.contains("rate = 8") && out.contains("# note") && out.starts_with("# my contract")
        );
        let out = set_key(src, "warmup.duration", "\"5s\"").unwrap();
        let c = crate::contract::parse(&out, Path::new("t.toml")).unwrap();
        assert_eq!(c.warmup.duration.map(|d| d.0), Some(5.0));
        let bare = set_key(src, "load.arrival", "constant").unwrap();
        assert!(bare.contains("arrival = \"constant\""), "{bare}");
        assert!(set_key(src, "load.model.x", "1").is_err());
    }
}

/// How a capacity search ended (`sweep.json`'s `capacity`, read back by `goodput report` of
/// a tune).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Capacity {
    /// Highest offered rate (req/s) that passed ([`passes_capacity`]), supported or only
    /// indicated by its sample; `None` when even the lowest rate tried failed.
    pub capacity_rps: Option<f64>,
    /// Highest passing rate whose sample supports its pass at the contract's confidence
    /// (`capacity_rps` itself when it is supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_rps: Option<f64>,
    /// The run that confirmed the answer with the requests its claim needs, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
    /// Why the answer was not confirmed (the run it needs would take too long).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
    /// The one-sided confidence passes are supported at (`measurement.confidence`).
    #[serde(default)]
    pub confidence: f64,
    /// Lowest rate tried that failed; `None` when none failed within the runs allowed.
    pub failed_at_rps: Option<f64>,
    /// Relative width of the final bracket, (failed − capacity) / failed.
    pub resolution: Option<f64>,
    /// Rates tried, in order, with whether each passed.
    pub tried: Vec<(f64, bool)>,
    /// The rule a rate passed by, in words.
    #[serde(default)]
    pub rule: String,
    /// Runs near the answer whose client fell behind its schedule: the answer may be the
    /// client's limit rather than the server's.
    pub client_limited: bool,
    /// The rate at which the search stopped because the server met the SLO but the client
    /// fell behind its schedule: no rate at or above it measures the server with this client,
    /// and every rate below it would measure the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by_client_at: Option<f64>,
    /// Rates run again because the first time only the client fell behind (the server met
    /// the SLO): a lone late wake-up is not the client's limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_for_client: Vec<f64>,
    /// Passing rates a confirmation failed: each fails from then on, and the search went on
    /// below it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refuted: Vec<f64>,
    /// The bracket width asked (`--resolution`) and the runs allowed (`--max-runs`).
    #[serde(default)]
    pub resolution_asked: f64,
    #[serde(default)]
    pub max_runs: usize,
    /// The answer as measured: the rate the point it rests on offered (its confirmation's when
    /// that passed) and achieved. `capacity_rps` is the nominal `load.rate` asked of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rps: Option<f64>,
    /// The rate the first failing point offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_offered_rps: Option<f64>,
    /// What the offered rate rests on, in words: each point's own arrival draw.
    #[serde(default)]
    pub arrivals: String,
}

impl Capacity {
    /// A search's end, before its confirmation and its answer's figures.
    pub fn of(s: crate::arrival::edge::Searched) -> Capacity {
        Capacity {
            rule: String::new(),
            capacity_rps: s.capacity_rps,
            supported_rps: s.supported_rps,
            confirmation: None,
            unconfirmed: None,
            confidence: 0.99,
            failed_at_rps: s.failed_at_rps,
            resolution: s.resolution,
            tried: s.tried,
            client_limited: s.client_limited,
            stopped_by_client_at: s.stopped_by_client_at,
            retried_for_client: s.retried_for_client,
            refuted: Vec::new(),
            resolution_asked: 0.0,
            max_runs: 0,
            offered_rps: None,
            achieved_rps: None,
            failed_offered_rps: None,
            arrivals: String::new(),
        }
    }

    /// The answer's measured figures, from the points it rests on.
    fn answer(&mut self, points: &[SweepPoint], seed: u64) {
        let at = self.capacity_rps.and_then(|r| answer_at(points, r));
        self.offered_rps = at.and_then(|p| p.offered_rps);
        self.achieved_rps = at.and_then(|p| p.achieved_rps);
        self.failed_offered_rps = self
            .failed_at_rps
            .and_then(|r| failed_at(points, r))
            .and_then(|p| p.offered_rps);
        self.arrivals = format!(
            "each point drew its own arrivals (workload.seed {seed}, {}, … by point), so the answer rests on more than one draw; a Poisson point offers its nominal rate only on average, and the capacity is the rate its passing point offered",
            seed.wrapping_add(1)
        );
    }

    /// "offered 0.87 req/s (achieved 0.86; nominal load.rate 1.00)", or the nominal rate alone
    /// when the point has no offered rate.
    pub fn answer_words(&self) -> Option<String> {
        let nominal = self.capacity_rps?;
        Some(match self.offered_rps {
            Some(o) => format!(
                "offered {o:.2} req/s ({}nominal load.rate {nominal:.2})",
                self.achieved_rps
                    .map_or(String::new(), |a| format!("achieved {a:.2}; "))
            ),
            None => format!("{nominal:.2} req/s (nominal load.rate)"),
        })
    }

    /// The bracket as a chart against offered load draws it: where its points offered (the
    /// nominal rates where a point has no offered rate, or where two draws cross, the passing
    /// point offering more than the failing one).
    fn drawn_bracket(&self) -> (Option<f64>, Option<f64>) {
        match (self.offered_rps, self.failed_offered_rps) {
            (Some(x), Some(y)) if x < y => (Some(x), Some(y)),
            (Some(x), None) if self.failed_at_rps.is_none() => (Some(x), None),
            _ => (self.capacity_rps, self.failed_at_rps),
        }
    }

    /// How far the final bracket misses the resolution asked, when the budget ended first.
    pub fn short_of_resolution(&self) -> Option<String> {
        let (w, asked) = (self.resolution?, self.resolution_asked);
        (asked > 0.0 && w > asked + 1e-9).then(|| {
            format!(
                "the run budget (--max-runs {}) ended with the bracket {:.1}% wide, {:.1} points wider than the --resolution {:.1}% asked",
                self.max_runs,
                w * 100.0,
                (w - asked) * 100.0,
                asked * 100.0
            )
        })
    }

    /// How strongly the answer at `rate` is known: "supported at 99% confidence" (and by
    /// which run), or "indicated only" with why it was not confirmed or how its confirmation
    /// came out.
    pub fn support_words(&self, rate: f64) -> String {
        use crate::analyze::claims::percent;
        let conf = percent(self.confidence);
        let confirmed = self
            .confirmation
            .as_ref()
            .filter(|k| (k.rate - rate).abs() < 1e-9);
        if self.supported_rps == Some(rate) {
            return match confirmed {
                Some(k) => format!(
                    "supported at {conf} confidence (confirmed by a run of {} steady requests at that rate)",
                    k.requests
                ),
                None => format!("supported at {conf} confidence by its own point"),
            };
        }
        let mut out = format!(
            "indicated only: its point met the SLO on too few requests to support it at {conf} confidence"
        );
        if let Some(k) = &self.confirmation {
            out += &format!(
                "; the confirmation at {:.2} req/s ({} steady requests, sized for the miss rate its point showed) came out {}",
                k.rate,
                k.requests,
                k.verdict.map_or("unfinished", |v| v.short())
            );
        }
        if let Some(why) = &self.unconfirmed {
            out += &format!("; not confirmed: {why}");
        }
        if let Some(s) = self.supported_rps {
            out += &format!("; supported up to {s:.2} req/s");
        }
        out
    }
}

/// The run that confirmed a capacity answer indicated on a small sample.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Confirmation {
    pub rate: f64,
    /// Steady requests it was sized to send: enough to support the pass at the miss rate the
    /// indicating point showed ([`crate::analyze::claims::requests_to_support`]).
    pub requests: u64,
    /// Its SLO verdict (`None`: it did not finish).
    pub verdict: Option<crate::analyze::SloVerdict>,
    pub passed: bool,
}

pub use crate::arrival::edge::PointOutcome;

impl PointOutcome {
    pub fn of(s: &Summary) -> PointOutcome {
        PointOutcome {
            passed: passes_capacity(s),
            supported: supported_capacity(s),
            client_behind: s.validity.client_behind,
            slo_met: s.steady.slo.as_ref().is_some_and(|x| x.pass),
            overloaded: s.validity.overload.is_some(),
        }
    }
}

/// The capacity search over runs: [`crate::arrival::edge::Bracket`] (the search an in-run
/// edge takes over steps), each rate judged by `passes`; `None` from it (interrupted) ends the
/// search.
pub async fn search_capacity<F, Fut>(
    start: f64,
    resolution: f64,
    max_runs: usize,
    mut passes: F,
) -> anyhow::Result<Capacity>
where
    F: FnMut(f64) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<PointOutcome>>>,
{
    let mut bracket = crate::arrival::edge::Bracket::new(start, resolution, max_runs);
    while let Some(rate) = bracket.next_rate() {
        let Some(p) = passes(rate).await? else {
            break; // interrupted
        };
        bracket.observe(rate, p);
    }
    Ok(Capacity::of(bracket.result()))
}

#[cfg(test)]
mod capacity_tests {
    use super::*;

    #[tokio::test]
    async fn brackets_then_bisects_to_the_resolution() {
        let truth = 37.0;
        let c = search_capacity(5.0, 0.05, 20, |r| async move {
            Ok(Some(PointOutcome::passed(r <= truth)))
        })
        .await
        .unwrap();
        let (lo, hi) = (c.capacity_rps.unwrap(), c.failed_at_rps.unwrap());
        assert!(lo <= truth && truth < hi && (hi - lo) / hi <= 0.05, "{c:?}");
        // Doubling from 5: 5, 10, 20, 40 (fails), then bisection.
        assert_eq!(
            &c.tried[..4],
            &[(5.0, true), (10.0, true), (20.0, true), (40.0, false)]
        );
        // Starting above: halves down first.
        let c = search_capacity(200.0, 0.05, 20, |r| async move {
            Ok(Some(PointOutcome::passed(r <= truth)))
        })
        .await
        .unwrap();
        assert!(c.capacity_rps.unwrap() <= truth && c.failed_at_rps.unwrap() > truth);
        // A run budget stops it, saying how wide the bracket still is.
        let c = search_capacity(5.0, 0.001, 6, |r| async move {
            Ok(Some(PointOutcome::passed(r <= truth)))
        })
        .await
        .unwrap();
        assert_eq!(c.tried.len(), 6);
        assert!(c.resolution.unwrap() > 0.001);
    }

    /// A client that cannot keep up above 15 req/s with a server good to 37: a point where
    /// the SLO is met but the client fell behind, twice at its rate, ends the search; one
    /// where the SLO is missed as well (the server may be the cause) does not.
    #[tokio::test]
    async fn a_point_only_the_client_failed_ends_the_search() {
        let (truth, client) = (37.0, 15.0);
        let outcome = move |r: f64| PointOutcome {
            passed: r <= truth && r <= client,
            supported: r <= truth && r <= client,
            client_behind: r > client,
            slo_met: r <= truth,
            overloaded: false,
        };
        let c = search_capacity(5.0, 0.05, 20, |r| async move { Ok(Some(outcome(r))) })
            .await
            .unwrap();
        // 5 and 10 pass, 20 is the client's, again: stop, with 10 as the capacity measured.
        assert_eq!(
            c.tried,
            [(5.0, true), (10.0, true), (20.0, false), (20.0, false)]
        );
        assert_eq!(c.stopped_by_client_at, Some(20.0));
        assert_eq!(c.retried_for_client, [20.0]);
        assert_eq!((c.capacity_rps, c.failed_at_rps), (Some(10.0), Some(20.0)));
        assert!(c.client_limited);
        // From above the server's limit (the SLO missed too) it halves on, then stops where
        // the server met the SLO and only the client failed.
        let c = search_capacity(80.0, 0.05, 20, |r| async move { Ok(Some(outcome(r))) })
            .await
            .unwrap();
        assert_eq!(
            c.tried,
            [(80.0, false), (40.0, false), (20.0, false), (20.0, false)]
        );
        assert_eq!(c.stopped_by_client_at, Some(20.0));
        assert_eq!(c.capacity_rps, None);
        // A budget that ends on such a point stops there, not on a retry it cannot run.
        let c = search_capacity(5.0, 0.05, 3, |r| async move { Ok(Some(outcome(r))) })
            .await
            .unwrap();
        assert_eq!(c.tried, [(5.0, true), (10.0, true), (20.0, false)]);
        assert_eq!(c.stopped_by_client_at, Some(20.0));
    }

    /// A lone late wake-up: the client fell behind once at 20 req/s (the SLO met), kept its
    /// schedule when 20 ran again, and the search went on to the server's limit.
    #[tokio::test]
    async fn a_point_the_client_fell_behind_once_is_run_again_and_the_search_goes_on() {
        let truth = 37.0;
        let tries = std::sync::Arc::new(std::sync::Mutex::new(0));
        let c = search_capacity(5.0, 0.05, 20, |r| {
            let tries = tries.clone();
            async move {
                let mut n = tries.lock().unwrap();
                *n += 1;
                let hiccup = r == 20.0 && *n == 3;
                Ok(Some(PointOutcome {
                    passed: r <= truth && !hiccup,
                    supported: r <= truth && !hiccup,
                    client_behind: hiccup,
                    slo_met: r <= truth,
                    overloaded: false,
                }))
            }
        })
        .await
        .unwrap();
        assert_eq!(
            &c.tried[..5],
            [
                (5.0, true),
                (10.0, true),
                (20.0, false),
                (20.0, true),
                (40.0, false)
            ]
        );
        assert_eq!(c.retried_for_client, [20.0]);
        assert_eq!(c.stopped_by_client_at, None);
        assert!(!c.client_limited);
        let (lo, hi) = (c.capacity_rps.unwrap(), c.failed_at_rps.unwrap());
        assert!(lo <= truth && hi > truth && (hi - lo) / hi <= 0.05, "{c:?}");
    }
}
