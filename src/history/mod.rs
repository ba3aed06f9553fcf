//! Results over time: each bundle a point, points of one workload a series, change points
//! found in each series' headline metrics, and the newest point judged against the points
//! before it (`--fail-on regression`).
//!
//! A series is the points whose workload, load, SLO, measurement and quality fingerprints are
//! all equal: what may change along it is the target (engine and model revision, hardware,
//! precision, declared facts, a simulator's settings) and goodput's own version, and each
//! point says what changed from the one before. Points that are INVALID or directional are
//! kept and shown, never used to decide ([`Point::decisive`]). `docs/guide/history.md` is
//! the user's guide; [`detect`] holds the statistics, [`store`] the SQLite and PostgreSQL
//! stores, [`view`] the documents, page and exports.

pub mod detect;
pub mod store;
pub mod view;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use crate::analyze::{Summary, TargetIdentity};
use crate::contract::{Contract, Fingerprints};

/// A headline metric of a point: how it is read from a summary and which way is better.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// Its name in the store, on the command line (`--metric`) and in exports.
    pub key: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
    pub lower_better: bool,
    /// A latency percentile: judged only where every point's sample places it (at least ten
    /// requests beyond it, as `ab` holds a block's tail).
    pub percentile: Option<f64>,
    /// A share (attainment, errors): its changes and thresholds are in points, not relative.
    pub share: bool,
    /// A rate of completions (throughput, goodput): judged in a closed loop only.
    pub rate: bool,
    /// Kept and shown, not judged: ITL per chunk, which TPOT judges more steadily (the
    /// median gap is quantised by the engine's step; more metrics judged also means each is
    /// judged at a stricter level).
    pub shown_only: bool,
}

const fn latency(key: &'static str, label: &'static str, p: f64) -> Measure {
    Measure {
        key,
        label,
        unit: "ms",
        lower_better: true,
        percentile: Some(p),
        share: false,
        rate: false,
        shown_only: false,
    }
}

/// A rate of completions, higher better, judged in a closed loop only.
const fn rate(key: &'static str, label: &'static str, unit: &'static str) -> Measure {
    Measure {
        key,
        label,
        unit,
        lower_better: false,
        percentile: None,
        share: false,
        rate: true,
        shown_only: false,
    }
}

/// A share of the steady requests, its changes in points.
const fn share(key: &'static str, label: &'static str, lower_better: bool) -> Measure {
    Measure {
        key,
        label,
        unit: "share",
        lower_better,
        percentile: None,
        share: true,
        rate: false,
        shown_only: false,
    }
}

/// Every metric a point keeps, in the order documents show them.
pub const MEASURES: [Measure; 15] = [
    latency("ttft_p50_ms", "TTFT p50", 50.0),
    latency("ttft_p90_ms", "TTFT p90", 90.0),
    latency("ttft_p99_ms", "TTFT p99", 99.0),
    latency("tpot_p50_ms", "TPOT p50", 50.0),
    latency("tpot_p90_ms", "TPOT p90", 90.0),
    latency("tpot_p99_ms", "TPOT p99", 99.0),
    Measure {
        shown_only: true,
        ..latency("itl_p50_ms", "ITL p50", 50.0)
    },
    latency("e2e_p50_ms", "E2E p50", 50.0),
    latency("e2e_p90_ms", "E2E p90", 90.0),
    latency("e2e_p99_ms", "E2E p99", 99.0),
    rate("output_tokens_per_s", "output tok/s", "tok/s"),
    rate("requests_per_s", "req/s", "req/s"),
    rate("goodput_rps", "goodput", "req/s"),
    share("attainment", "attainment", false),
    share("error_share", "errors", true),
];

/// The measure named `key` (or its label, any case).
pub fn measure(key: &str) -> Option<&'static Measure> {
    MEASURES
        .iter()
        .find(|m| m.key == key || m.label.eq_ignore_ascii_case(key))
}

/// One metric of one point: its value, the 95% interval its own run gives it (a percentile's
/// order-statistic interval, when the run has one) and the requests it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    pub n: u64,
}

/// A summary's headline figures, by [`Measure::key`].
pub fn figures(s: &Summary) -> BTreeMap<String, Figure> {
    let mut out = BTreeMap::new();
    let st = &s.steady.stats;
    for (prefix, dist) in [
        ("ttft", &st.ttft_ms),
        ("tpot", &st.tpot_ms),
        ("itl", &st.itl_ms),
        ("e2e", &st.e2e_ms),
    ] {
        let Some(d) = dist else { continue };
        for (p, value, ci) in [
            (50, d.p50, d.ci95[0]),
            (90, d.p90, d.ci95[1]),
            (99, d.p99, d.ci95[3]),
        ] {
            let key = format!("{prefix}_p{p}_ms");
            if MEASURES.iter().any(|m| m.key == key) {
                out.insert(
                    key,
                    Figure {
                        value,
                        ci95: ci,
                        n: d.count as u64,
                    },
                );
            }
        }
    }
    let plain = |value: f64, n: u64| Figure {
        value,
        ci95: None,
        n,
    };
    let tp = &s.steady.throughput;
    if let Some(v) = tp.output_tokens_per_s {
        out.insert("output_tokens_per_s".into(), plain(v, st.ok));
    }
    if let Some(v) = tp.achieved_rps {
        out.insert("requests_per_s".into(), plain(v, st.ok));
    }
    if let Some(slo) = &s.steady.slo {
        out.insert(
            "attainment".into(),
            Figure {
                value: slo.attainment,
                ci95: slo.attainment_bounds,
                n: slo.counted,
            },
        );
        if let Some(g) = slo.goodput_rps {
            out.insert("goodput_rps".into(), plain(g, slo.counted));
        }
    }
    if st.requests > 0 {
        out.insert(
            "error_share".into(),
            plain(st.failed as f64 / st.requests as f64, st.requests),
        );
    }
    out
}

/// One bundle as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The store's number for it (0 before it is stored).
    #[serde(default)]
    pub id: i64,
    /// SHA-256 of the bundle's contract, command and raw records: the same bundle, wherever
    /// it lies, is one point.
    pub bundle_id: String,
    /// Its series: see [`series_key`].
    pub series: String,
    /// The contract's name, and its load in words.
    pub name: String,
    pub load: String,
    /// When the run started (RFC 3339, UTC): the series' order.
    pub started_utc: String,
    /// Where the bundle lay when it was added (absolute).
    pub bundle: String,
    pub comparable: bool,
    /// A closed loop (its rates are the target's); else open (the schedule's).
    #[serde(default)]
    pub closed_loop: bool,
    /// What makes it directional.
    #[serde(default)]
    pub missing: Vec<String>,
    pub valid: bool,
    /// Why it is INVALID.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// The contract's target axis, flattened (`target.simulator.decode_base_ms` → `14`).
    pub target: BTreeMap<String, String>,
    /// The target as the run resolved it (engine, revisions, hardware, facts).
    pub identity: Option<TargetIdentity>,
    pub fingerprints: Fingerprints,
    /// `measurement.confidence`: the level the series' decisions are made at.
    pub confidence: f64,
    pub figures: BTreeMap<String, Figure>,
    /// The command line that made it.
    pub command: Vec<String>,
    pub tool_version: String,
}

impl Point {
    /// Used to decide: VALID and comparable.
    pub fn decisive(&self) -> bool {
        self.valid && self.comparable
    }

    /// What it is, in a word or two: `VALID`, `INVALID`, `directional`.
    pub fn standing(&self) -> &'static str {
        match (self.valid, self.comparable) {
            (true, true) => "VALID",
            (false, _) => "INVALID",
            (true, false) => "directional",
        }
    }
}

/// The series a contract's results belong to: its workload, load, SLO, measurement and
/// quality fingerprints (the target may change along a series; nothing else may).
pub fn series_key(f: &Fingerprints) -> String {
    let all = format!(
        "{}{}{}{}{}",
        f.workload, f.load, f.slo, f.measurement, f.quality
    );
    crate::text::sha256_prefix(all.as_bytes(), 6)
}

/// A bundle read as a point: its summary recomputed from its raw records, and refused when
/// that disagrees with the summary it kept, or when it never finished writing one.
pub fn point(dir: &Path) -> anyhow::Result<Point> {
    let abs =
        std::fs::canonicalize(dir).with_context(|| format!("no bundle at {}", dir.display()))?;
    if !abs.join(crate::bundle::REQUESTS).is_file() {
        bail!(
            "{}: not a run bundle (no {}); a repeat set's runs are added one by one, a sweep's or an ab run's by their own bundles",
            dir.display(),
            crate::bundle::REQUESTS
        );
    }
    let l =
        crate::bundle::Bundle::load(&abs).with_context(|| format!("loading {}", dir.display()))?;
    let kept = crate::bundle::read_json::<serde_json::Value>(&abs.join(crate::bundle::SUMMARY))?
        .with_context(|| {
            format!(
                "{}: refused: no summary.json (the run never finished writing it)",
                dir.display()
            )
        })?;
    let now = serde_json::to_value(&l.summary)?;
    let older = kept["schema_version"].as_u64() != Some(u64::from(l.summary.schema_version));
    let wrong = crate::bundle::disagreements(&kept, &now, older);
    if !wrong.is_empty() {
        bail!(
            "{}: refused: its summary does not recompute from its records ({})",
            dir.display(),
            wrong.join("; ")
        );
    }
    let started_utc = l.command.started_utc.map(utc).with_context(|| {
        format!(
            "{}: refused: command.json does not say when the run started (started_utc)",
            dir.display()
        )
    })?;
    Ok(of_loaded(&l, &abs, bundle_id(&abs)?, started_utc))
}

/// An instant as the store orders points: RFC 3339 in UTC with nanoseconds always written, so
/// text order is time order.
pub fn utc(t: jiff::Timestamp) -> String {
    let d = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        d.year(),
        d.month(),
        d.day(),
        d.hour(),
        d.minute(),
        d.second(),
        d.subsec_nanosecond()
    )
}

/// The point of a loaded bundle (also how the tests make points from the simulator's
/// discrete-event clock).
pub fn of_loaded(
    l: &crate::bundle::Loaded,
    abs: &Path,
    bundle_id: String,
    started_utc: String,
) -> Point {
    of_summary(
        &l.contract,
        &l.summary,
        abs,
        bundle_id,
        started_utc,
        &l.command.argv,
    )
}

/// A point from a contract and its summary.
pub fn of_summary(
    c: &Contract,
    s: &Summary,
    abs: &Path,
    bundle_id: String,
    started_utc: String,
    argv: &[String],
) -> Point {
    let mut target = BTreeMap::new();
    let [(axis, v), ..] = c.axes();
    crate::compare::flatten(axis, &v, &mut target);
    Point {
        id: 0,
        bundle_id,
        series: series_key(&s.fingerprints),
        name: c.name.clone(),
        load: s.load.clone(),
        started_utc,
        bundle: abs.display().to_string(),
        comparable: s.grade.verdict == crate::analyze::GradeVerdict::Comparable,
        closed_loop: s.load_model == crate::contract::LoadModel::Closed,
        missing: s.grade.missing.clone(),
        valid: s.validity.is_valid(),
        reasons: s.validity.reasons.clone(),
        target,
        identity: s.target.clone(),
        fingerprints: s.fingerprints.clone(),
        confidence: c.measurement.confidence,
        figures: figures(s),
        command: argv.to_vec(),
        tool_version: s.tool_version.clone(),
    }
}

/// SHA-256 over the files that make a bundle what it is, read in pieces (a million records
/// are a gigabyte).
fn bundle_id(dir: &Path) -> anyhow::Result<String> {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for name in [
        crate::bundle::CONTRACT,
        crate::bundle::COMMAND,
        crate::bundle::REQUESTS,
    ] {
        let path = dir.join(name);
        let mut f =
            std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut buf = vec![0u8; 1 << 16];
        h.update(name.as_bytes());
        loop {
            let n = f
                .read(&mut buf)
                .with_context(|| format!("reading {}", path.display()))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// How far for the worse the newest point may be before `--fail-on regression` fails: a
/// share of the baseline's mean (points, for a share), for every metric or one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    pub default: f64,
    pub per: BTreeMap<String, f64>,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            default: 0.05,
            per: BTreeMap::new(),
        }
    }
}

impl Thresholds {
    /// `--threshold 5%` (every metric) and `--threshold tpot_p50_ms=3%` (one), in any order.
    pub fn parse(args: &[String]) -> anyhow::Result<Thresholds> {
        let mut t = Thresholds::default();
        for a in args {
            let (key, v) = match a.split_once('=') {
                Some((k, v)) => (Some(k.trim()), v.trim()),
                None => (None, a.trim()),
            };
            let share = v
                .strip_suffix('%')
                .and_then(|x| x.trim().parse::<f64>().ok())
                .map(|x| x / 100.0)
                .filter(|x| (0.0..10.0).contains(x))
                .with_context(|| {
                    format!("--threshold {a}: the value is a percentage, e.g. 5% (0% to 1000%)")
                })?;
            match key {
                None => t.default = share,
                Some(k) => {
                    let m = measure(k).with_context(|| {
                        format!(
                            "--threshold {a}: no metric {k:?}; the metrics are {}",
                            MEASURES.map(|m| m.key).join(", ")
                        )
                    })?;
                    t.per.insert(m.key.to_owned(), share);
                }
            }
        }
        Ok(t)
    }

    pub fn of(&self, key: &str) -> f64 {
        self.per.get(key).copied().unwrap_or(self.default)
    }
}

/// A change point in one metric of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub metric: String,
    pub label: String,
    /// The first point after it, and the last decisive point before it (1-based, in the
    /// series' order).
    pub point: usize,
    /// Where this metric alone puts it: a weaker metric's split within two points of a
    /// stronger one's is read as the same change, at the stronger one's point.
    pub own_point: usize,
    pub last_good: usize,
    /// The permutation test's p-value, against the level it was tested at.
    pub p: f64,
    /// The means of the decisive points between its neighbouring change points.
    pub before: f64,
    pub after: f64,
    /// after − before: relative to before (points, for a share), with its interval at the
    /// series' confidence (Welch).
    pub shift: f64,
    pub ci: Option<[f64; 2]>,
    pub worse: bool,
    /// What changed between the last good point and the first after.
    pub changed: Vec<(String, String, String)>,
}

/// One metric of the newest point against the points before it since their last change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub metric: String,
    pub label: String,
    pub value: f64,
    /// The points it is judged against, and their mean.
    pub baseline: usize,
    pub baseline_mean: f64,
    /// The prediction bound at the level (`None`: under [`MIN_BASELINE`] points to judge
    /// against).
    pub bound: Option<f64>,
    /// For the worse: relative to the baseline's mean (points, for a share; negative: better).
    pub worse_by: f64,
    pub threshold: f64,
    /// Beyond the bound and the threshold.
    pub beyond: bool,
    /// Beyond, and the point before it was not: a change for the worse starts here.
    pub starts: bool,
}

/// The newest point, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Newest {
    /// 1-based.
    pub point: usize,
    /// Why it was not judged (INVALID, directional).
    pub not_judged: Option<String>,
    pub judged: Vec<Judged>,
    /// The last decisive point before it (1-based).
    pub last_good: Option<usize>,
    /// What changed from that point.
    pub changed: Vec<(String, String, String)>,
}

impl Newest {
    /// The metrics on which a change for the worse starts at the newest point.
    pub fn regressions(&self) -> Vec<&Judged> {
        self.judged.iter().filter(|j| j.starts).collect()
    }
}

/// A series, analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub key: String,
    pub name: String,
    pub load: String,
    pub points: Vec<Point>,
    /// Per point: what changed from the one before (the first: nothing).
    pub steps: Vec<Vec<(String, String, String)>>,
    /// The metrics judged: every decisive point has them (a percentile, placed).
    pub judged: Vec<String>,
    pub confidence: f64,
    /// The level each metric's test is made at: (1 − confidence) / metrics judged.
    pub alpha: f64,
    pub changes: Vec<Change>,
    /// Per point: the metrics on which it was beyond its baseline when judged in turn, and
    /// whether a change for the worse started there.
    pub beyond: Vec<Vec<(String, bool)>>,
    pub newest: Newest,
}

/// The fewest points a side of a change point has.
const MIN_SEGMENT: usize = 3;

/// The fewest decisive points since a metric's last change that a new point is judged
/// against: fewer say too little of the spread.
pub const MIN_BASELINE: usize = 5;

/// The most recent decisive points a change is looked for in (older points are kept and
/// shown, not analysed).
pub const WINDOW: usize = 100;

/// The newest point and its judgements.
fn newest(points: &[Point], decisive: &[usize], judged: Vec<Judged>) -> Newest {
    let n = points.len();
    let mut out = Newest {
        point: n,
        not_judged: None,
        judged: Vec::new(),
        last_good: None,
        changed: Vec::new(),
    };
    let Some(p) = points.last() else {
        return out;
    };
    if !p.decisive() {
        out.not_judged = Some(format!(
            "the newest point is {}{}: it is shown, never used to decide",
            p.standing(),
            match (p.reasons.first(), p.missing.first()) {
                (Some(r), _) if !p.valid => format!(" ({r})"),
                (_, Some(m)) => format!(" ({m})"),
                _ => String::new(),
            }
        ));
        return out;
    }
    if decisive.len() < 2 {
        out.not_judged =
            Some("the first decisive point of its series: nothing to judge it against".into());
        return out;
    }
    let good = decisive[decisive.len() - 2];
    out.last_good = Some(good + 1);
    out.changed = step(&points[good], p);
    if let Some(j) = judged.iter().find(|j| j.bound.is_none()) {
        out.not_judged = Some(format!(
            "{} decisive point(s) before it since the last change; judging needs {MIN_BASELINE}",
            j.baseline
        ));
    }
    out.judged = judged;
    out
}

/// The series in `points` (any order), each analysed; `only`: the metrics to judge (all
/// that every decisive point has, by default).
pub fn analyse(points: Vec<Point>, thresholds: &Thresholds, only: Option<&Measure>) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    for p in points {
        by.entry(p.series.clone()).or_default().push(p);
    }
    let mut out: Vec<Series> = by
        .into_values()
        .map(|mut ps| {
            ps.sort_by(|a, b| a.started_utc.cmp(&b.started_utc).then(a.id.cmp(&b.id)));
            series(ps, thresholds, only)
        })
        .collect();
    // The most recently run first.
    out.sort_by(|a, b| newest_time(b).cmp(newest_time(a)));
    out
}

fn newest_time(s: &Series) -> &str {
    s.points.last().map_or("", |p| p.started_utc.as_str())
}

/// One series' points (in order), analysed.
pub fn series(points: Vec<Point>, thresholds: &Thresholds, only: Option<&Measure>) -> Series {
    let steps: Vec<_> = (0..points.len())
        .map(|i| {
            if i == 0 {
                Vec::new()
            } else {
                step(&points[i - 1], &points[i])
            }
        })
        .collect();
    let decisive: Vec<usize> = (0..points.len())
        .filter(|i| points[*i].decisive())
        .collect();
    let judged = judged_measures(&points, &decisive, only);
    let last = points.last();
    let confidence = last.map_or(0.95, |p| p.confidence);
    let alpha = (1.0 - confidence) / judged.len().max(1) as f64;
    let key = last.map(|p| p.series.clone()).unwrap_or_default();
    let (changes, cps_all) = changes(&points, &decisive, &judged, alpha, confidence, &key);
    // A change in any metric is a change of the target: every metric's baseline starts again
    // there.
    let mut all_cps: Vec<usize> = cps_all.iter().flatten().copied().collect();
    all_cps.sort_unstable();
    all_cps.dedup();
    let judgements = replay(&points, &decisive, &judged, alpha, thresholds, &all_cps);
    let mut beyond = vec![Vec::new(); points.len()];
    for (k, js) in judgements.iter().enumerate() {
        beyond[decisive[k]] = js
            .iter()
            .filter(|j| j.beyond)
            .map(|j| (j.label.clone(), j.starts))
            .collect();
    }
    let newest = newest(
        &points,
        &decisive,
        judgements.last().cloned().unwrap_or_default(),
    );
    Series {
        key,
        beyond,
        name: last.map(|p| p.name.clone()).unwrap_or_default(),
        load: last.map(|p| p.load.clone()).unwrap_or_default(),
        judged: judged.iter().map(|m| m.key.to_owned()).collect(),
        points,
        steps,
        confidence,
        alpha,
        changes,
        newest,
    }
}

/// The metrics a series judges: every decisive point has them (a percentile, placed by its
/// sample), in a closed loop only the rates, never the shown-only ones unless asked for.
fn judged_measures(
    points: &[Point],
    decisive: &[usize],
    only: Option<&Measure>,
) -> Vec<&'static Measure> {
    let open = points.last().is_some_and(|p| !p.closed_loop);
    MEASURES
        .iter()
        .filter(|m| only.is_none_or(|o| o.key == m.key))
        // In an open loop the schedule sets the rates (and goodput's, but for its misses,
        // which attainment judges): their changes are the arrivals' noise, not the target's.
        .filter(|m| !(open && m.rate) && (!m.shown_only || only.is_some()))
        .filter(|m| {
            !decisive.is_empty()
                && decisive.iter().all(|i| {
                    points[*i].figures.get(m.key).is_some_and(|f| {
                        m.percentile
                            .is_none_or(|p| (f.n as f64) * (1.0 - p / 100.0) >= 10.0)
                    })
                })
        })
        .collect()
}

/// Each judged metric's change points (snapped across metrics), as changes and, per metric,
/// as indices of `decisive`.
fn changes(
    points: &[Point],
    decisive: &[usize],
    judged: &[&'static Measure],
    alpha: f64,
    confidence: f64,
    key: &str,
) -> (Vec<Change>, Vec<Vec<usize>>) {
    let values: Vec<Vec<f64>> = judged
        .iter()
        .map(|m| {
            decisive
                .iter()
                .map(|i| points[*i].figures[m.key].value)
                .collect()
        })
        .collect();
    let found: Vec<Vec<detect::Split>> = judged
        .iter()
        .zip(&values)
        .map(|(m, v)| {
            // The most recent points only: the test's cost grows with the square of its length.
            let from = v.len().saturating_sub(WINDOW);
            let seed = crate::text::hash_str(&format!("{key}/{}", m.key));
            detect::change_points(&v[from..], alpha, MIN_SEGMENT, seed)
                .into_iter()
                .map(|c| detect::Split {
                    at: c.at + from,
                    p: c.p,
                })
                .collect()
        })
        .collect();
    let cps_all = snapped(&values, &found);
    let mut changes = Vec::new();
    for (mi, m) in judged.iter().enumerate() {
        let v = &values[mi];
        let mut bounds: Vec<usize> = cps_all[mi].iter().map(|c| c.0).collect();
        bounds.insert(0, v.len().saturating_sub(WINDOW));
        bounds.push(v.len());
        for (k, &(at, p, own)) in cps_all[mi].iter().enumerate() {
            let (before, after) = (&v[bounds[k]..at], &v[at..bounds[k + 2]]);
            let (mb, ma) = (mean(before), mean(after));
            let scale = |d: f64| if m.share { d } else { d / mb.abs() };
            let ci = crate::stats::welch_ci_at(before, after, confidence)
                .map(|(_, [lo, hi])| [scale(lo), scale(hi)]);
            let (good, first) = (decisive[at - 1], decisive[at]);
            changes.push(Change {
                metric: m.key.into(),
                label: m.label.into(),
                point: first + 1,
                own_point: decisive[own] + 1,
                last_good: good + 1,
                p,
                before: mb,
                after: ma,
                shift: scale(ma - mb),
                ci,
                worse: (ma > mb) == m.lower_better,
                changed: step(&points[good], &points[first]),
            });
        }
    }
    let cps_all: Vec<Vec<usize>> = cps_all
        .iter()
        .map(|c| c.iter().map(|x| x.0).collect())
        .collect();
    changes.sort_by_key(|c| c.point);
    (changes, cps_all)
}

/// Each metric's change points, a weaker one moved onto a stronger one's (of any metric)
/// when within `MIN_SEGMENT − 1` points of it: one change seen by several metrics is one
/// change, placed where it shows clearest. Strength: the shift over the spread on either
/// side (a standardised effect). Per metric: (at, p-value, its own split), in order.
fn snapped(values: &[Vec<f64>], found: &[Vec<detect::Split>]) -> Vec<Vec<(usize, f64, usize)>> {
    let mut all: Vec<(f64, usize, detect::Split)> = Vec::new();
    for (mi, splits) in found.iter().enumerate() {
        let v = &values[mi];
        let mut bounds: Vec<usize> = splits.iter().map(|c| c.at).collect();
        bounds.insert(0, v.len().saturating_sub(WINDOW));
        bounds.push(v.len());
        for (k, c) in splits.iter().enumerate() {
            let (a, b) = (&v[bounds[k]..c.at], &v[c.at..bounds[k + 2]]);
            let spread = (sd(a).powi(2) + sd(b).powi(2)).sqrt();
            let shift = (mean(b) - mean(a)).abs();
            let strength = if spread > 0.0 {
                shift / spread
            } else {
                f64::INFINITY
            };
            all.push((strength, mi, *c));
        }
    }
    all.sort_by(|x, y| y.0.total_cmp(&x.0));
    let mut anchors: Vec<usize> = Vec::new();
    let mut out = vec![Vec::new(); found.len()];
    for (_, mi, c) in all {
        let at = match anchors.iter().find(|a| a.abs_diff(c.at) < MIN_SEGMENT) {
            Some(a) => *a,
            None => {
                anchors.push(c.at);
                c.at
            }
        };
        let mine: &mut Vec<(usize, f64, usize)> = &mut out[mi];
        if !mine.iter().any(|x| x.0 == at) {
            mine.push((at, c.p, c.at));
        }
    }
    for m in &mut out {
        m.sort_by_key(|x| x.0);
    }
    out
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Every decisive point judged in turn, metric by metric, against the decisive points before
/// it since the last change point (of any metric), leaving out points already beyond: a point is
/// *beyond* on a metric when it lies past the prediction bound at `alpha` and past the
/// threshold, for the worse. A change for the worse *starts* at a point beyond on some metric
/// when the decisive point before it was beyond on none (so the runs after a regression, until
/// the change is found, continue it rather than fail again). Returns, per decisive point, its
/// judgements (empty: nothing before it to judge against).
fn replay(
    points: &[Point],
    decisive: &[usize],
    judged: &[&'static Measure],
    alpha: f64,
    thresholds: &Thresholds,
    cps: &[usize],
) -> Vec<Vec<Judged>> {
    let mut out: Vec<Vec<Judged>> = vec![Vec::new(); decisive.len()];
    let mut beyond_any = vec![false; decisive.len()];
    for k in 1..decisive.len() {
        let start = cps.iter().copied().filter(|c| *c <= k).max().unwrap_or(0);
        for m in judged {
            let value = |j: usize| points[decisive[j]].figures[m.key].value;
            let base: Vec<f64> = (start..k).filter(|j| !beyond_any[*j]).map(value).collect();
            out[k].push(judge(value(k), &base, m, alpha, thresholds.of(m.key)));
        }
        beyond_any[k] = out[k].iter().any(|j| j.beyond);
        let before = beyond_any[k - 1];
        for j in &mut out[k] {
            j.starts = j.beyond && !before;
        }
    }
    out
}

/// `x` against `base`: past the one-sided prediction bound and the threshold, for the worse.
fn judge(x: f64, base: &[f64], m: &Measure, alpha: f64, threshold: f64) -> Judged {
    let bm = mean(base);
    let bound = (base.len() >= MIN_BASELINE)
        .then(|| detect::prediction_bound(base, alpha, m.lower_better))
        .flatten();
    let diff = if m.lower_better { x - bm } else { bm - x };
    let worse_by = if m.share || base.is_empty() {
        diff
    } else if bm != 0.0 {
        diff / bm.abs()
    } else if diff > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let past = bound.is_some_and(|b| if m.lower_better { x > b } else { x < b });
    Judged {
        metric: m.key.into(),
        label: m.label.into(),
        value: x,
        baseline: base.len(),
        baseline_mean: bm,
        bound,
        worse_by,
        threshold,
        beyond: past && worse_by > threshold,
        starts: false,
    }
}

/// What changed from one point to the next: the target (its contract axis and the facts the
/// run resolved) and goodput's version.
pub fn step(a: &Point, b: &Point) -> Vec<(String, String, String)> {
    let mut out = crate::compare::fields_diff(&a.target, &b.target);
    if let (Some(x), Some(y)) = (&a.identity, &b.identity) {
        out.extend(crate::compare::target_facts_diff(x, y));
    }
    if a.tool_version != b.tool_version {
        out.push((
            "goodput".into(),
            a.tool_version.clone(),
            b.tool_version.clone(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_order_is_time_order() {
        let t = |s: &str| utc(s.parse().unwrap());
        assert!(t("2026-12-05T04:29:16Z") < t("2026-12-05T04:29:16.5Z"));
        assert!(t("2026-12-05T04:29:16.999Z") < t("2026-12-05T04:29:17Z"));
        assert_eq!(
            t("2026-12-05T05:29:16+01:00"),
            "2026-12-05T04:29:16.000000000Z"
        );
    }

    #[test]
    fn thresholds_read_every_metric_or_one_and_refuse_the_rest() {
        let t = Thresholds::parse(&[
            "3%".into(),
            "tpot_p50_ms=1.5%".into(),
            "TTFT p50=10%".into(),
        ])
        .unwrap();
        assert_eq!(t.of("e2e_p50_ms"), 0.03);
        assert_eq!(t.of("tpot_p50_ms"), 0.015);
        assert_eq!(t.of("ttft_p50_ms"), 0.1);
        for bad in ["5", "x=5%", "-1%", "tpot_p50_ms=abc"] {
            let e = Thresholds::parse(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn the_target_does_not_change_the_series_and_the_workload_does() {
        let f = |t: &str, w: &str| Fingerprints {
            target: t.into(),
            workload: w.into(),
            load: "l".into(),
            slo: "s".into(),
            measurement: "m".into(),
            quality: "q".into(),
        };
        assert_eq!(series_key(&f("a", "w")), series_key(&f("b", "w")));
        assert_ne!(series_key(&f("a", "w")), series_key(&f("a", "v")));
    }
}
