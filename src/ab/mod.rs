//! `goodput ab`: did the change help? A and B (two contracts that differ in at most one axis,
//! or one contract against itself: the null check) are sent the same plan in alternating
//! blocks, ABBA, each block a run of its contract at its open-loop rate (its own warm-up, its
//! own bundle); only one side is under load at a time. Each pair of blocks shares its seed, so
//! both sides get the same requests at the same intended times, and the next pair draws new
//! ones. The headline metrics of every block ([`metrics`]) are paired and judged sequentially
//! ([`stats`]): the run stops when every metric is decided, or at the budget.
//!
//! The embedded simulator is started once per side and kept across its blocks (a drift or a
//! warm cache carries over, as it would on an engine); an external target is whatever runs at
//! its URL.

pub mod plan;
pub mod stats;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::analyze::{TargetIdentity, record_meets_slo, request_metrics};
use crate::bundle::Bundle;
use crate::contract::Contract;
use crate::plan::Phase;
use crate::record::{Outcome, Record};
use crate::run::{RunOptions, Watch, run};
use crate::sim::SimServer;
use crate::workload::Inputs;
use stats::{Better, Call, Design, Verdict};

/// One side: where its contract came from, the contract and its inputs.
pub struct Side {
    pub label: String,
    pub contract: Contract,
    pub inputs: Inputs,
}

/// How to run, beyond the two contracts.
#[derive(Clone)]
pub struct AbOptions {
    pub out_root: PathBuf,
    pub watch: Arc<dyn Watch>,
    pub argv: Vec<String>,
    pub cancel: CancellationToken,
    pub signal: Arc<std::sync::OnceLock<&'static str>>,
    pub wake_latency_hold: bool,
    /// The first look and the budget, in pairs of blocks.
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// The smallest relative difference of interest, and the power it is stated at.
    pub mde: f64,
    pub power: f64,
}

/// A latency a metric reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Latency {
    Ttft,
    Tpot,
    E2e,
}

/// What a headline metric is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "of")]
pub enum Kind {
    /// A percentile (0–100) of a block's steady successful requests.
    Percentile { latency: Latency, p: f64 },
    /// The share of a block's steady requests that succeeded within the SLO.
    Attainment,
    /// Those requests per second of the block's arrival window.
    Goodput,
}

/// One headline metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub kind: Kind,
}

/// The headline metrics of a contract: TTFT, TPOT and E2E at p50 and at the SLO's percentile
/// (p90 without an SLO; p90 too when the SLO's percentile is above what a block's sample can
/// place, see [`tail_percentile`]), and with an SLO its attainment and goodput.
pub fn metrics(c: &Contract, block_requests: Option<u64>) -> Vec<Metric> {
    let tail = tail_percentile(c, block_requests);
    let mut v = Vec::new();
    for (latency, name) in [
        (Latency::Ttft, "TTFT"),
        (Latency::Tpot, "TPOT"),
        (Latency::E2e, "E2E"),
    ] {
        // A tail at or below the median is the median (an SLO at p50).
        let ps = if tail > 50.0 {
            vec![50.0, tail]
        } else {
            vec![50.0]
        };
        for p in ps {
            v.push(Metric {
                name: format!("{name} p{p}"),
                unit: "ms".into(),
                better: Better::Lower,
                kind: Kind::Percentile { latency, p },
            });
        }
    }
    if c.slo.is_set() {
        v.push(Metric {
            name: "attainment".into(),
            unit: "share".into(),
            better: Better::Higher,
            kind: Kind::Attainment,
        });
        v.push(Metric {
            name: "goodput".into(),
            unit: "req/s".into(),
            better: Better::Higher,
            kind: Kind::Goodput,
        });
    }
    v
}

/// The tail percentile the blocks compare: the SLO's, when a block has at least ten requests
/// beyond it (a p99 of 100 requests is one request: a paired test of it is a test of
/// outliers), else p90.
pub fn tail_percentile(c: &Contract, block_requests: Option<u64>) -> f64 {
    let p = if c.slo.is_set() {
        c.slo.percentile
    } else {
        90.0
    };
    match block_requests {
        Some(n) if (n as f64) * (1.0 - p / 100.0) < 10.0 => p.min(90.0),
        _ => p,
    }
}

/// One steady request of a block, as the metrics read it.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
    /// Succeeded within the SLO (`None`: no SLO, or the run cancelled it).
    pub met: Option<bool>,
}

/// A block's steady requests and the span of their arrivals.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub rows: Vec<Row>,
    pub window_s: f64,
}

/// The steady requests of a block's records, with the contract's latency origin and token
/// source (the run's own definitions).
pub fn sample(c: &Contract, records: &[Record]) -> Sample {
    let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
    let slo = c.slo.is_set();
    let steady: Vec<&Record> = records
        .iter()
        .filter(|r| r.phase == Phase::Steady)
        .collect();
    let rows = steady
        .iter()
        .map(|r| {
            let m = request_metrics(r, origin, source);
            let ok = r.is_ok();
            Row {
                ttft: m.ttft_ms().filter(|_| ok),
                tpot: m.tpot_ms().filter(|_| ok),
                e2e: m.e2e_ms().filter(|_| ok),
                met: (slo && r.outcome != Outcome::Interrupted)
                    .then(|| ok && record_meets_slo(c, r, &m)),
            }
        })
        .collect();
    let sends: Vec<u64> = steady.iter().filter_map(|r| r.intended_us).collect();
    let window_s = match (sends.iter().min(), sends.iter().max()) {
        // The span of n arrivals is n − 1 gaps; the block's window is n of them.
        (Some(a), Some(b)) if sends.len() > 1 => {
            (b - a) as f64 / 1e6 * sends.len() as f64 / (sends.len() - 1) as f64
        }
        _ => 0.0,
    };
    Sample { rows, window_s }
}

/// A metric's value in a sample (`None`: no request to read it from).
pub fn figure(m: &Metric, s: &Sample) -> Option<f64> {
    match m.kind {
        Kind::Percentile { latency, p } => {
            let mut v: Vec<f64> = s
                .rows
                .iter()
                .filter_map(|r| match latency {
                    Latency::Ttft => r.ttft,
                    Latency::Tpot => r.tpot,
                    Latency::E2e => r.e2e,
                })
                .collect();
            v.sort_by(f64::total_cmp);
            crate::stats::percentile_sorted(&v, p)
        }
        Kind::Attainment | Kind::Goodput => {
            let judged: Vec<bool> = s.rows.iter().filter_map(|r| r.met).collect();
            if judged.is_empty() {
                return None;
            }
            let met = judged.iter().filter(|m| **m).count() as f64;
            match m.kind {
                Kind::Attainment => Some(met / judged.len() as f64),
                _ => (s.window_s > 0.0).then(|| met / s.window_s),
            }
        }
    }
}

/// One block as the verdict reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockFigures {
    /// 1-based pair number.
    pub pair: usize,
    /// `A` or `B`.
    pub side: String,
    /// Seconds from the start of the A/B run to the block's start.
    pub at_s: f64,
    /// The block's steady requests, and those that succeeded.
    pub requests: u64,
    pub ok: u64,
    /// The block's run was VALID (its client on schedule, its server keeping up).
    pub valid: bool,
    /// The span of its steady arrivals, seconds.
    pub window_s: f64,
    /// Each metric's value, in the order of [`AbResult::metrics`].
    pub values: Vec<Option<f64>>,
    /// The block's bundle (raw records, full report).
    pub bundle: PathBuf,
    /// Speculative decoding's draft tokens proposed and accepted in the block's steady window
    /// (`None`: the engine stated none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafts: Option<[u64; 2]>,
    /// The block's steady tool-call answers graded and correct (`None`: no dataset of tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_grades: Option<[u64; 2]>,
}

/// The whole verdict in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overall {
    /// Some metric worse, none better.
    Worse,
    /// Some metric better, none worse.
    Better,
    /// Better on some, worse on others.
    Mixed,
    /// Every metric decided: no difference as large as the MDE.
    Same,
    /// No difference found, but some metric could still hide one as large as the MDE.
    Undecided,
    /// Stopped before the first look.
    None,
}

/// What `goodput ab` found (`ab.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbResult {
    /// Where A and B came from.
    pub a: String,
    pub b: String,
    /// Every field in which B differs from A (`axis.key A → B`); empty for a null check.
    pub differs: Vec<String>,
    /// A against itself: the method's own check on this target (it must find no difference).
    pub null_check: bool,
    pub design: Design,
    /// A block, in words.
    pub block: String,
    pub metrics: Vec<Metric>,
    pub blocks: Vec<BlockFigures>,
    /// Each metric's verdict, in the order of `metrics`.
    pub verdicts: Vec<Verdict>,
    pub overall: Overall,
    /// The verdict in a sentence.
    pub sentence: String,
    /// Pairs run.
    pub pairs: usize,
    pub interrupted: bool,
    pub elapsed_s: f64,
    pub notes: Vec<String>,
}

impl AbResult {
    /// Each metric's pairs `(A, B)`, pair by pair.
    pub fn series(&self) -> Vec<Vec<Option<(f64, f64)>>> {
        series(&self.blocks, self.metrics.len())
    }

    /// Any metric decided worse: what `--fail-on worse` fails on.
    pub fn worse(&self) -> bool {
        self.verdicts.iter().any(|v| {
            v.decided_at.is_some() && v.judged.as_ref().map(|j| j.call) == Some(Call::Worse)
        })
    }
}

/// Each metric's `(A, B)` values per complete pair.
fn series(blocks: &[BlockFigures], metrics: usize) -> Vec<Vec<Option<(f64, f64)>>> {
    let pairs = blocks.iter().map(|b| b.pair).max().unwrap_or(0);
    let side = |p: usize, s: &str| blocks.iter().find(|b| b.pair == p && b.side == s);
    let mut out = vec![Vec::new(); metrics];
    for p in 1..=pairs {
        let (Some(a), Some(b)) = (side(p, "A"), side(p, "B")) else {
            break;
        };
        for (m, s) in out.iter_mut().enumerate() {
            s.push(a.values[m].zip(b.values[m]));
        }
    }
    out
}

/// Why two contracts cannot be paired, or nothing: they may differ in at most one of target,
/// workload and load, in neither SLO nor measurement (as `compare` refuses), and each must
/// be a plain open-loop run (a block is one run of it).
fn check(a: &Side, b: &Side) -> anyhow::Result<Vec<String>> {
    let diffs = crate::compare::axes_diff(&a.contract, &b.contract);
    let refused = crate::compare::refusals(&diffs);
    if !refused.is_empty() {
        bail!(
            "{} and {} cannot be paired: {}",
            a.label,
            b.label,
            refused.join("; ")
        );
    }
    for s in [a, b] {
        let c = &s.contract;
        let why = if !c.load.is_open() {
            Some(
                "its load is a closed loop: a block's latency would slow with the server and hide the overload (ab needs load.rate)",
            )
        } else if c.cold_start.is_some() {
            Some(
                "it has a cold-start test: a cold start happens once, and ab compares steady blocks (measure it with goodput run)",
            )
        } else if !c.load.stage.is_empty() {
            Some("it is a load program: a block is one open-loop run at one rate")
        } else if c.load.shard().is_some() {
            Some("it is one shard of a run: ab drives the whole load")
        } else if c.measurement.stop.is_some() {
            Some(
                "it stops when known ([measurement.stop]): ab's blocks are fixed, and ab stops by its own sequential rule",
            )
        } else if c.repeat.runs > 1 {
            Some("it repeats (repeat.runs): ab's blocks are its repeats")
        } else if c.load.requests().is_none() && c.load.duration().is_none() {
            Some("it has neither load.requests nor load.duration: a block needs an end")
        } else {
            None
        };
        if let Some(why) = why {
            bail!("{} cannot be a side of ab: {why}", s.label);
        }
    }
    Ok(diffs
        .iter()
        .flat_map(|d| d.fields.iter().map(|(k, x, y)| format!("{k} {x} → {y}")))
        .collect())
}

/// A block in words.
fn block_words(c: &Contract) -> String {
    let size = match (c.load.requests(), c.load.duration()) {
        (Some(n), _) => format!("{n} requests"),
        (None, Some(d)) => format!("{} s", crate::report::num(d.seconds())),
        _ => "one run".into(),
    };
    let load = match c.load.drive() {
        crate::contract::Drive::Open {
            rate: Some(r),
            arrival,
            ..
        } => format!(
            "at {} req/s ({} arrivals)",
            crate::report::num(r),
            format!("{arrival:?}").to_lowercase()
        ),
        // A trace replays at its own timing.
        _ => format!("of {}", c.load.describe()),
    };
    format!("{size} {load}, each after the contract's own warm-up")
}

/// The sequential design: the contract's confidence, the options' power, MDE and budget, a
/// look every ABBA round.
fn design(c: &Contract, metrics: &[Metric], o: &AbOptions) -> Design {
    Design {
        confidence: c.measurement.confidence,
        power: o.power,
        mde: o.mde,
        metrics: metrics.len(),
        min_pairs: o.min_pairs,
        max_pairs: o.max_pairs,
        look_every: 2,
    }
}

/// Starts the embedded simulator of a side that has one (kept across its blocks).
async fn simulator(s: &Side) -> anyhow::Result<Option<SimServer>> {
    match (&s.contract.target.url, &s.contract.target.simulator) {
        (None, Some(cfg)) => Ok(Some(
            SimServer::start(cfg.clone(), ([127, 0, 0, 1], 0).into(), None)
                .await
                .with_context(|| format!("starting {}'s embedded simulator", s.label))?,
        )),
        _ => Ok(None),
    }
}

/// Runs the A/B test: blocks in ABBA order until every metric is decided or the budget is
/// spent; `ab.json` and `ab.md` are rewritten after every pair, so an interrupted run keeps
/// its verdict so far.
pub async fn ab(a: Side, b: Side, o: &AbOptions) -> anyhow::Result<(Bundle, AbResult)> {
    let differs = check(&a, &b)?;
    let metrics = metrics(&a.contract, a.contract.load.requests());
    let design = design(&a.contract, &metrics, o);
    let parent = Bundle::create(&o.out_root, &a.contract)
        .with_context(|| format!("creating a bundle under {}", o.out_root.display()))?;
    parent.write("a.toml", &a.contract.to_toml())?;
    parent.write("b.toml", &b.contract.to_toml())?;
    let sims = [simulator(&a).await?, simulator(&b).await?];
    let sides = [&a, &b];
    let mut targets = [None, None];
    let mut result = AbResult {
        a: a.label.clone(),
        b: b.label.clone(),
        null_check: differs.is_empty(),
        differs,
        design,
        block: block_words(&a.contract),
        metrics,
        blocks: Vec::new(),
        verdicts: Vec::new(),
        overall: Overall::None,
        sentence: String::new(),
        pairs: 0,
        interrupted: false,
        elapsed_s: 0.0,
        notes: Vec::new(),
    };
    let started = Instant::now();
    'pairs: for pair in 1..=o.max_pairs {
        // ABBA: pair 1 sends A then B, pair 2 B then A, …
        let order = if pair % 2 == 1 { [0, 1] } else { [1, 0] };
        for side in order {
            let (block, _, target) = one_block(
                sides[side],
                side,
                pair,
                sims[side].as_ref(),
                (&parent, &result.metrics, started),
                o,
            )
            .await?;
            result.blocks.push(block);
            targets[side] = targets[side].take().or(target);
            if o.cancel.is_cancelled() {
                result.interrupted = true;
                break 'pairs;
            }
        }
        result.pairs = pair;
        if pair == 1 {
            block_long_enough(&result, &a.contract)?;
            // What the targets said of themselves: a difference the contracts do not show
            // (two servers at two URLs, one with more slots).
            if let [Some(x), Some(y)] = &targets {
                for (k, p, q) in crate::compare::target_facts_diff(x, y) {
                    result.differs.push(format!("{k} {p} → {q}"));
                }
            }
            result.null_check = result.differs.is_empty();
        }
        settle(&mut result, started);
        o.watch.line(&pair_line(&result));
        write(&parent, &result)?;
        if stats::finished(&result.design, &result.verdicts, pair) {
            break;
        }
    }
    settle(&mut result, started);
    notes(&mut result);
    write(&parent, &result)?;
    Ok((parent, result))
}

/// Runs one block: the side's contract with the pair's seed, against its running simulator
/// or its URL, into `pair-NN-a` or `pair-NN-b`.
async fn one_block(
    s: &Side,
    side: usize,
    pair: usize,
    sim: Option<&SimServer>,
    (parent, metrics, started): (&Bundle, &[Metric], Instant),
    o: &AbOptions,
) -> anyhow::Result<(BlockFigures, Sample, Option<TargetIdentity>)> {
    let name = ["A", "B"][side];
    let mut c = s.contract.clone();
    // Both blocks of a pair send the same requests; each pair draws new ones.
    c.workload.seed = s.contract.workload.seed.wrapping_add(pair as u64 - 1);
    let dir = parent
        .dir
        .join(format!("pair-{pair:02}-{}", name.to_lowercase()));
    let opts = RunOptions {
        out_root: o.out_root.clone(),
        watch: o.watch.clone(),
        argv: o.argv.clone(),
        overrides: Vec::new(),
        bundle_dir: Some(dir.clone()),
        wake_latency_hold: o.wake_latency_hold,
        signal: o.signal.clone(),
        live: None,
        simulator: sim.map(SimServer::base_url),
    };
    let at_s = started.elapsed().as_secs_f64();
    let r = run(c.clone(), s.inputs.clone(), opts, o.cancel.clone())
        .await
        .with_context(|| format!("pair {pair}, block {name} ({})", s.label))?;
    let sample = sample(&c, &r.records);
    let block = BlockFigures {
        pair,
        side: name.into(),
        at_s,
        requests: r.summary.steady.stats.requests,
        ok: r.summary.steady.stats.ok,
        valid: r.summary.validity.is_valid(),
        window_s: sample.window_s,
        values: metrics.iter().map(|m| figure(m, &sample)).collect(),
        bundle: dir,
        drafts: r
            .summary
            .steady
            .speculative
            .as_ref()
            .map(|x| [x.drafted, x.accepted]),
        tool_grades: r
            .summary
            .steady
            .tools
            .as_ref()
            .map(|t| [t.graded, t.correct]),
    };
    Ok((block, sample, r.summary.target))
}

/// The first pair's blocks must outlast their E2E tail: a block whose arrivals span less than
/// its slowest requests take is mostly its own start and drain, not the load the contract
/// names.
fn block_long_enough(r: &AbResult, c: &Contract) -> anyhow::Result<()> {
    let e2e = r
        .metrics
        .iter()
        .position(|m| matches!(m.kind, Kind::Percentile { latency: Latency::E2e, p } if p > 50.0));
    for b in &r.blocks {
        let Some(tail_ms) = e2e.and_then(|i| b.values[i]) else {
            continue;
        };
        let window = b.window_s;
        if window > 0.0 && window < tail_ms / 1000.0 {
            // A trace (its own rate) gets the floor of 10 requests.
            let rate = c.load.rate().unwrap_or(0.0);
            bail!(
                "a block is shorter than its E2E tail: block {} of pair {} sent its steady requests over {:.1} s, but its {} is {:.1} s, so the block is mostly its own start and drain rather than the load the contract names. Make the blocks longer: --requests {} or more (or --duration {}s). The blocks run so far are in {}",
                b.side,
                b.pair,
                window,
                r.metrics[e2e.unwrap_or(0)].name,
                tail_ms / 1000.0,
                (rate * tail_ms / 1000.0 * 4.0).ceil().max(10.0),
                (tail_ms / 1000.0 * 4.0).ceil(),
                b.bundle.parent().unwrap_or(Path::new(".")).display()
            );
        }
    }
    Ok(())
}

/// The verdicts replayed from the blocks, and the overall call and sentence.
fn settle(r: &mut AbResult, started: Instant) {
    let better: Vec<Better> = r.metrics.iter().map(|m| m.better).collect();
    r.verdicts = stats::replay(&r.design, &better, &r.series());
    r.elapsed_s = started.elapsed().as_secs_f64();
    let calls: Vec<Call> = r
        .verdicts
        .iter()
        .map(|v| match (&v.judged, v.decided_at) {
            (Some(j), Some(_)) => j.call,
            _ => Call::Open,
        })
        .collect();
    let names = |c: Call| -> Vec<&str> {
        r.metrics
            .iter()
            .zip(&calls)
            .filter(|(_, k)| **k == c)
            .map(|(m, _)| m.name.as_str())
            .collect()
    };
    let (worse, better_on, open) = (names(Call::Worse), names(Call::Better), names(Call::Open));
    let first_look = r.design.looks()[0];
    r.overall = if r.verdicts.iter().all(|v| v.judged.is_none()) {
        Overall::None
    } else if !worse.is_empty() && !better_on.is_empty() {
        Overall::Mixed
    } else if !worse.is_empty() {
        Overall::Worse
    } else if !better_on.is_empty() {
        Overall::Better
    } else if open.is_empty() {
        Overall::Same
    } else {
        Overall::Undecided
    };
    let mde = format!("{}%", crate::report::num(r.design.mde * 100.0));
    let still = if r.interrupted {
        "when interrupted"
    } else if r.pairs < r.design.max_pairs {
        "so far"
    } else {
        "at the budget"
    };
    r.sentence = match r.overall {
        Overall::None => format!(
            "no verdict: {} pairs run, the first look is at {first_look}",
            r.pairs
        ),
        Overall::Worse => format!("B worse: {}", worse.join(", ")),
        Overall::Better => format!("B better: {}", better_on.join(", ")),
        Overall::Mixed => format!(
            "mixed: B better on {}, worse on {}",
            better_on.join(", "),
            worse.join(", ")
        ),
        Overall::Same => format!("no difference larger than {mde} on any metric"),
        Overall::Undecided => format!(
            "no difference found; undecided {still} on {} (a difference of {mde} could still hide there)",
            open.join(", ")
        ),
    };
    if matches!(r.overall, Overall::Worse | Overall::Better | Overall::Mixed) && !open.is_empty() {
        r.sentence += &format!("; undecided {still} on {}", open.join(", "));
    }
}

/// Each side's pooled (acceptance, share of correct tool calls) over its blocks, `[A, B]`.
fn side_quality(r: &AbResult) -> [(Option<f64>, Option<f64>); 2] {
    let share = |pick: fn(&BlockFigures) -> Option<[u64; 2]>, side: &str| {
        let (n, k) = r
            .blocks
            .iter()
            .filter(|b| b.side == side)
            .filter_map(pick)
            .fold((0, 0), |(n, k), [x, y]| (n + x, k + y));
        (n > 0).then(|| k as f64 / n as f64)
    };
    ["A", "B"].map(|side| (share(|b| b.drafts, side), share(|b| b.tool_grades, side)))
}

/// The outputs held alike across A and B, as `compare`'s guard asks: speculative acceptance
/// within 5 points, correct tool calls not down by more than 2. When not, the speed verdict is
/// not a win.
fn quality_held(r: &mut AbResult) {
    let [a, b] = side_quality(r);
    if a == (None, None) && b == (None, None) {
        return;
    }
    match crate::compare::regime_words((a.0, b.0), (a.1, b.1)) {
        Some(why) => {
            r.notes.push(format!("QUALITY NOT HELD: {why}"));
            if matches!(r.overall, Overall::Better | Overall::Mixed) {
                r.sentence += "; not a win: quality not held (see the notes)";
            }
        }
        None => {
            let pct = |x: Option<f64>| x.map_or("—".into(), |x| format!("{:.1}%", x * 100.0));
            let mut held = Vec::new();
            if a.0.is_some() || b.0.is_some() {
                held.push(format!(
                    "speculative acceptance A {} vs B {}",
                    pct(a.0),
                    pct(b.0)
                ));
            }
            if a.1.is_some() || b.1.is_some() {
                held.push(format!(
                    "correct tool calls A {} vs B {}",
                    pct(a.1),
                    pct(b.1)
                ));
            }
            r.notes.push(format!("quality held: {}", held.join("; ")));
        }
    }
}

/// What a reader should know beside the verdict.
fn notes(r: &mut AbResult) {
    quality_held(r);
    let invalid: Vec<String> = r
        .blocks
        .iter()
        .filter(|b| !b.valid)
        .map(|b| format!("{}{}", b.pair, b.side))
        .collect();
    if !invalid.is_empty() {
        r.notes.push(format!(
            "{} of {} blocks were INVALID ({}): their client fell behind or their server did not keep up; their figures are in the verdict, and their bundles say why",
            invalid.len(),
            r.blocks.len(),
            invalid.join(", ")
        ));
    }
    if r.null_check {
        r.notes.push(match r.overall {
            Overall::Worse | Overall::Better | Overall::Mixed => "NULL CHECK FAILED: A against itself read a difference. The target does not hold still between blocks (another load, thermal throttling, a cache that grows): no A/B verdict on this target can be trusted until this passes".into(),
            _ => "null check: A against itself found no difference, as it must".into(),
        });
    } else {
        r.notes.push(format!(
            "no null check in this run: `goodput ab {}` pairs A with itself on this target and must find no difference",
            r.a
        ));
    }
    if r.interrupted {
        r.notes.push(format!(
            "interrupted after {} complete pairs: the verdict is the looks made so far",
            r.pairs
        ));
    }
}

/// A pair's line while the test runs.
fn pair_line(r: &AbResult) -> String {
    let decided = r.verdicts.iter().filter(|v| v.decided_at.is_some()).count();
    format!(
        "pair {}/{}: {} of {} metrics decided — {}",
        r.pairs,
        r.design.max_pairs,
        decided,
        r.metrics.len(),
        r.sentence
    )
}

fn write(parent: &Bundle, r: &AbResult) -> anyhow::Result<()> {
    parent.write_json("ab.json", r)?;
    parent.write("ab.md", &document(r).markdown())?;
    Ok(())
}

/// A difference in the metric's unit, signed.
fn signed(x: f64, unit: &str) -> String {
    let v = if unit == "share" {
        format!("{} pp", crate::report::num(x * 100.0))
    } else {
        format!("{} {unit}", crate::report::num(x))
    };
    if x > 0.0 { format!("+{v}") } else { v }
}

fn value(x: f64, unit: &str) -> String {
    if unit == "share" {
        format!("{:.1}%", x * 100.0)
    } else {
        crate::report::num(x)
    }
}

fn percent(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{:+.1}%", v * 100.0))
}

/// The verdict table's rows.
fn verdict_rows(r: &AbResult) -> Vec<Vec<String>> {
    r.metrics
        .iter()
        .zip(&r.verdicts)
        .map(|(m, v)| {
            let Some(j) = &v.judged else {
                return vec![
                    m.name.clone(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                    "not judged yet".into(),
                ];
            };
            let call = match (j.call, v.decided_at) {
                (Call::Worse, Some(n)) => format!("B worse (pair {n})"),
                (Call::Better, Some(n)) => format!("B better (pair {n})"),
                (Call::Same, Some(n)) => format!("no difference > MDE (pair {n})"),
                _ => "undecided".into(),
            };
            vec![
                m.name.clone(),
                value(j.mean_a, &m.unit),
                value(j.mean_b, &m.unit),
                format!(
                    "{} [{}, {}]",
                    signed(j.diff, &m.unit),
                    signed(j.ci[0], &m.unit),
                    signed(j.ci[1], &m.unit)
                ),
                format!(
                    "{} [{}, {}]",
                    percent(j.relative(j.diff)),
                    percent(j.relative(j.ci[0])),
                    percent(j.relative(j.ci[1]))
                ),
                j.relative(j.detectable)
                    .map_or("—".into(), |x| format!("{:.1}%", x * 100.0)),
                call,
            ]
        })
        .collect()
}

/// The method in one sentence.
fn method(r: &AbResult) -> String {
    let d = &r.design;
    format!(
        "Paired t over pairs of blocks (ABBA order, the two blocks of a pair sent the same requests); intervals at each look's share of a {}% familywise confidence over {} metrics and every look (Bonferroni across metrics, O'Brien–Fleming-type alpha spending across looks at pairs {}), so stopping early does not inflate false verdicts. A metric is decided when its interval excludes 0, or lies within ±{}% of A (MDE); \"detectable\" is the smallest difference its pairs would find with {}% power.",
        crate::report::num(d.confidence * 100.0),
        d.metrics,
        d.looks()
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        crate::report::num(d.mde * 100.0),
        crate::report::num(d.power * 100.0)
    )
}

/// The report: the verdict, each metric's paired difference, the blocks.
pub fn document(r: &AbResult) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput ab · {} vs {}", r.a, r.b));
    if r.null_check {
        d.line("Null check: A against itself.");
    } else {
        d.line(format!("B differs from A in: {}.", r.differs.join("; ")));
    }
    d.line(format!(
        "Blocks: {}; {} pairs run of a budget of {}, in {:.0} s.",
        r.block, r.pairs, r.design.max_pairs, r.elapsed_s
    ));
    d.toned(
        crate::report::Tone::warn_if(matches!(r.overall, Overall::Worse | Overall::Mixed)),
        format!("Verdict: {}.", r.sentence),
    );
    d.table(
        &[
            "metric",
            "A (mean of blocks)",
            "B",
            "B − A [CI]",
            "relative [CI]",
            "detectable",
            "verdict",
        ],
        verdict_rows(r),
    );
    d.line(method(r));
    for n in &r.notes {
        d.toned(
            crate::report::Tone::warn_if(n.starts_with("NULL CHECK FAILED")),
            n.clone(),
        );
    }
    d.h("Blocks");
    let rows = r
        .blocks
        .iter()
        .map(|b| {
            let mut row = vec![
                b.pair.to_string(),
                b.side.clone(),
                format!("{:.1}", b.at_s),
                format!("{}/{}", b.ok, b.requests),
                if b.valid { "VALID" } else { "INVALID" }.into(),
            ];
            row.extend(
                r.metrics
                    .iter()
                    .zip(&b.values)
                    .map(|(m, v)| v.map_or("—".into(), |x| value(x, &m.unit))),
            );
            row
        })
        .collect();
    let mut head = vec!["pair", "side", "at s", "ok", "validity"];
    head.extend(r.metrics.iter().map(|m| m.name.as_str()));
    d.table(&head, rows);
    d.line("Each block's bundle (pair-NN-a, pair-NN-b) holds its raw records and full report.");
    d
}

/// One tile per judged metric: its relative difference, and whether B is better or worse.
fn tiles(r: &AbResult) -> Vec<crate::report::html::Tile> {
    use crate::report::html::Tile;
    r.metrics
        .iter()
        .zip(&r.verdicts)
        .filter_map(|(m, v)| {
            let j = v.judged.as_ref()?;
            Some(Tile {
                name: m.name.clone(),
                value: percent(j.relative(j.diff)),
                detail: match (j.call, v.decided_at) {
                    (Call::Same, Some(_)) => "no difference larger than the MDE".into(),
                    (Call::Worse | Call::Better, Some(n)) => format!("decided at pair {n}"),
                    _ => "undecided".into(),
                },
                pass: match (j.call, v.decided_at) {
                    (Call::Worse, Some(_)) => Some(false),
                    (Call::Better, Some(_)) => Some(true),
                    _ => None,
                },
            })
        })
        .collect()
}

/// Each pair's B − A for the latencies, as a share of A's mean, against ± the MDE.
fn difference_chart(r: &AbResult) -> String {
    use crate::report::svg::Chart;
    let series = r.series();
    let mut chart = Chart::new("ab-diff", "B − A per pair, % of A's mean", "pair", "%")
        .hline(r.design.mde * 100.0, "+MDE")
        .hline(-r.design.mde * 100.0, "−MDE")
        .hline(0.0, "no difference");
    // The latencies: a share's relative change (attainment 2% → 1%) would swamp the scale.
    for (i, m) in r.metrics.iter().enumerate() {
        if !matches!(m.kind, Kind::Percentile { .. }) {
            continue;
        }
        let Some(j) = r.verdicts[i].judged.as_ref().filter(|j| j.mean_a != 0.0) else {
            continue;
        };
        let pts = series[i]
            .iter()
            .enumerate()
            .filter_map(|(k, p)| p.map(|(a, b)| ((k + 1) as f64, (b - a) / j.mean_a.abs() * 100.0)))
            .collect();
        chart = chart.line(&m.name, pts);
    }
    chart.render()
}

/// The page: the verdict banner, each metric's blocks over time (A and B), the paired
/// differences against ±MDE, then the tables.
pub fn html_page(r: &AbResult) -> String {
    use crate::report::html::banner_marked;
    use crate::report::svg::Chart;
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput ab · {} vs {}", r.a, r.b));
    let pass = match r.overall {
        Overall::Worse | Overall::Mixed => Some(false),
        Overall::Better => Some(true),
        _ => None,
    };
    let tiles = tiles(r);
    d.raw_html(banner_marked(
        &[format!("A/B: {}", r.sentence), method(r)],
        pass,
        &tiles,
        ["B better", "B worse"],
    ));
    d.h("Blocks over time");
    for (i, m) in r.metrics.iter().enumerate() {
        let pts = |s: &str| -> Vec<(f64, f64)> {
            r.blocks
                .iter()
                .filter(|b| b.side == s)
                .filter_map(|b| Some((b.at_s, b.values[i]?)))
                .collect()
        };
        d.figure(
            Chart::new(
                &format!("ab-{i}"),
                &m.name,
                "seconds since the start",
                &m.unit,
            )
            .line("A", pts("A"))
            .line("B", pts("B"))
            .render(),
        );
    }
    d.h("Paired differences");
    d.figure(difference_chart(r));
    let doc = document(r);
    d.blocks.extend(doc.blocks.into_iter().skip(1));
    crate::report::format::html::wrap(&format!("goodput ab · {} vs {}", r.a, r.b), &d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #70: an A/B run interrupted with metrics still open said "undecided at the
    /// budget", a budget it never reached.
    #[test]
    fn an_interrupted_run_is_undecided_when_interrupted_not_at_the_budget() {
        let block = |pair: usize, side: &str, x: f64| BlockFigures {
            pair,
            side: side.into(),
            at_s: pair as f64,
            requests: 50,
            ok: 50,
            valid: true,
            window_s: 10.0,
            values: vec![Some(x)],
            bundle: PathBuf::new(),
            drafts: None,
            tool_grades: None,
        };
        let mut r = AbResult {
            a: "a.toml".into(),
            b: "b.toml".into(),
            differs: vec!["load.rate 4 → 5".into()],
            null_check: false,
            design: Design {
                confidence: 0.95,
                power: 0.8,
                mde: 0.05,
                metrics: 1,
                min_pairs: 2,
                max_pairs: 40,
                look_every: 2,
            },
            block: "50 requests".into(),
            metrics: vec![Metric {
                name: "TTFT p50".into(),
                unit: "ms".into(),
                better: Better::Lower,
                kind: Kind::Percentile {
                    latency: Latency::Ttft,
                    p: 50.0,
                },
            }],
            // Noisy and alike: nothing decided after four pairs.
            blocks: (1..=4)
                .flat_map(|p| {
                    let wobble = if p % 2 == 0 { 1.3 } else { 0.7 };
                    [block(p, "A", 100.0), block(p, "B", 100.0 * wobble)]
                })
                .collect(),
            verdicts: Vec::new(),
            overall: Overall::None,
            sentence: String::new(),
            pairs: 4,
            interrupted: true,
            elapsed_s: 0.0,
            notes: Vec::new(),
        };
        settle(&mut r, Instant::now());
        assert_eq!(r.overall, Overall::Undecided, "{}", r.sentence);
        assert!(
            r.sentence.contains("undecided when interrupted"),
            "{}",
            r.sentence
        );
        r.interrupted = false;
        settle(&mut r, Instant::now());
        assert!(r.sentence.contains("undecided so far"), "{}", r.sentence);
    }
}
