//! `goodput ab --plan`: power ahead of time. One pilot pair (an A block and a B block) gives
//! each metric's block-to-block spread (a bootstrap over the block's requests); the pairs a
//! metric needs to be decided within ± the MDE follow from [`super::stats::pairs_needed`].
//! The spread of a paired difference is taken as that of two independent blocks, which is
//! at least what pairing leaves (pairing removes the plan's share of it): the estimate errs
//! towards more blocks.

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::stats::{Design, pairs_needed, pairs_to_detect};
use super::{AbOptions, Metric, Sample, Side, figure};
use crate::bundle::Bundle;

/// Resamples of each pilot block.
const RESAMPLES: usize = 400;
/// The most pairs a plan looks for.
const LIMIT: usize = 2000;

/// One metric's plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanRow {
    pub metric: Metric,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// Standard deviation of a block's figure (the bootstrap over its requests), each side.
    pub spread: [Option<f64>; 2],
    /// Pairs needed to decide it within ± the MDE (`None`: beyond 2,000 pairs, or no figure).
    pub pairs: Option<usize>,
    /// When the pilot's difference is beyond the MDE and beyond the blocks' own spread (twice
    /// the paired difference's): the pairs that detect a difference that large, which decide
    /// the metric (better or worse) if the pilot's difference is real.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_if_real: Option<usize>,
    /// The smallest difference (relative to A) the budget's pairs detect.
    pub at_budget: Option<f64>,
}

/// What `--plan` found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbPlan {
    pub a: String,
    pub b: String,
    /// A against itself (no contract field and no target fact differs), else an A/B.
    #[serde(default)]
    pub null_check: bool,
    /// Every field in which B differs from A, the targets' own facts included.
    #[serde(default)]
    pub differs: Vec<String>,
    pub design: Design,
    pub rows: Vec<PlanRow>,
    /// Seconds the pilot's two blocks took, each.
    pub block_s: f64,
    /// Blocks needed for every metric (the largest of the rows), if any can be.
    pub blocks: Option<usize>,
    pub sentence: String,
    pub bundle: std::path::PathBuf,
}

/// The standard deviation of a metric's figure over bootstrap resamples of a block's requests.
fn spread(m: &Metric, s: &Sample, seed: u64) -> Option<f64> {
    if s.rows.len() < 2 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = s.rows.len();
    let values: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let rows = (0..n)
                .map(|_| s.rows[(rand::Rng::next_u64(&mut rng) % n as u64) as usize])
                .collect();
            figure(
                m,
                &Sample {
                    rows,
                    window_s: s.window_s,
                },
            )
        })
        .collect();
    let k = values.len() as f64;
    if k < 2.0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / k;
    Some((values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt())
}

/// Runs the pilot pair and plans the test.
pub async fn plan(a: Side, b: Side, o: &AbOptions) -> anyhow::Result<AbPlan> {
    let differs = super::check(&a, &b)?;
    let metrics = super::metrics(&a.contract, a.contract.load.requests());
    let design = super::design(&a.contract, &metrics, o);
    let parent = Bundle::create(&o.out_root, &a.contract)?;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut targets = Vec::new();
    for (i, s) in [&a, &b].into_iter().enumerate() {
        let sim = super::simulator(s).await?;
        let (block, sample, target) =
            super::one_block(s, i, 1, sim.as_ref(), (&parent, &metrics, started), o).await?;
        samples.push((block, sample));
        targets.push(target);
    }
    // What the targets said of themselves, as `ab` adds after its first pair: two servers at
    // two URLs, one with more slots, are an A/B the contracts do not show.
    let mut differs = differs;
    if let [Some(x), Some(y)] = &targets[..] {
        for (k, p, q) in crate::compare::target_facts_diff(x, y) {
            differs.push(format!("{k} {p} → {q}"));
        }
    }
    let block_s = started.elapsed().as_secs_f64() / 2.0;
    let rows = rows(&design, &metrics, &samples);
    let blocks = rows
        .iter()
        .map(|r| r.pairs)
        .collect::<Option<Vec<usize>>>()
        .and_then(|v| v.into_iter().max())
        .map(|p| 2 * p);
    let sentence = sentence(&design, &rows, blocks, block_s);
    let result = AbPlan {
        a: a.label.clone(),
        b: b.label.clone(),
        null_check: differs.is_empty(),
        differs,
        design,
        rows,
        block_s,
        blocks,
        sentence,
        bundle: parent.dir.clone(),
    };
    parent.write_json("ab-plan.json", &result)?;
    Ok(result)
}

/// The plan in one sentence: the blocks every metric needs if the pilot's differences are real
/// (when it shows any beyond the MDE) beside those equivalence within ± the MDE needs, and
/// whether the budget reaches them.
fn sentence(design: &Design, rows: &[PlanRow], blocks: Option<usize>, block_s: f64) -> String {
    let budget = 2 * design.max_pairs;
    let mde = crate::report::num(design.mde * 100.0);
    // A metric is decided by whichever comes first: its difference detected, or its
    // equivalence within ± the MDE shown. If the pilot's differences are real, that is the
    // sooner of the two for each metric.
    let if_real = rows
        .iter()
        .map(|r| match (r.pairs_if_real, r.pairs) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        })
        .collect::<Option<Vec<usize>>>()
        .and_then(|v| v.into_iter().max())
        .map(|p| 2 * p)
        .filter(|_| rows.iter().any(|r| r.pairs_if_real.is_some()));
    let minutes = |n: usize| n as f64 * block_s / 60.0;
    if let Some(n) = if_real {
        return format!(
            "the pilot shows differences beyond ±{mde}% ({}): if they are real, {n} blocks (about {:.0} min) decide every metric, the budget being {budget}; {}",
            rows.iter()
                .filter(|r| r.pairs_if_real.is_some())
                .map(|r| r.metric.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
            minutes(n),
            match blocks {
                Some(e) => format!(
                    "if B equals A within ±{mde}%, showing so takes {e} blocks (about {:.0} min)",
                    minutes(e)
                ),
                None => format!(
                    "if B equals A, showing it within ±{mde}% takes more than {LIMIT} pairs of these blocks"
                ),
            }
        );
    }
    match blocks {
        Some(n) if n <= budget => format!(
            "{n} blocks (about {:.0} min) decide every metric within ±{mde}%: the budget of {budget} blocks is enough",
            minutes(n)
        ),
        Some(n) => format!(
            "{n} blocks (about {:.0} min) decide every metric within ±{mde}%; the budget of {budget} blocks is not enough, so expect \"undecided at the budget\" on some: give --max-blocks {n}, or a larger --mde, or longer blocks",
            minutes(n)
        ),
        None => format!(
            "some metric cannot be decided within ±{mde}% in {LIMIT} pairs of these blocks: give a larger --mde, or longer blocks"
        ),
    }
}

/// Each metric's plan from the pilot pair's blocks.
fn rows(
    design: &Design,
    metrics: &[Metric],
    samples: &[(super::BlockFigures, Sample)],
) -> Vec<PlanRow> {
    metrics
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let spread = [
                spread(m, &samples[0].1, 1 + i as u64),
                spread(m, &samples[1].1, 1001 + i as u64),
            ];
            let (a, b) = (samples[0].0.values[i], samples[1].0.values[i]);
            let sd = spread[0]
                .zip(spread[1])
                .map(|(x, y)| (x * x + y * y).sqrt());
            let pairs = sd
                .zip(a)
                .and_then(|(sd, a)| pairs_needed(design, sd, a, LIMIT));
            let pairs_if_real = match (sd, a, b) {
                (Some(sd), Some(a), Some(b))
                    if (b - a).abs() > design.mde * a.abs() && (b - a).abs() > 2.0 * sd =>
                {
                    pairs_to_detect(design, sd, (b - a).abs(), LIMIT)
                }
                _ => None,
            };
            let at_budget = sd
                .zip(a)
                .filter(|(_, a)| *a != 0.0)
                .map(|(sd, a)| super::stats::detectable_at_budget(design, sd) / a.abs());
            PlanRow {
                metric: m.clone(),
                a,
                b,
                spread,
                pairs,
                pairs_if_real,
                at_budget,
            }
        })
        .collect()
}

/// The plan as a document.
pub fn document(p: &AbPlan) -> crate::report::Doc {
    let mut d = crate::report::Doc::default();
    d.h(format!(
        "goodput ab --plan · {} · {} vs {}",
        if p.null_check { "null check" } else { "A/B" },
        p.a,
        p.b
    ));
    if p.null_check {
        d.line("A null check: B is A (no contract field and no target fact differs), so the test must find no difference.");
    } else {
        d.line(format!(
            "A/B: B differs from A in {}.",
            p.differs.join("; ")
        ));
    }
    d.line(format!("Plan: {}.", p.sentence));
    let f = |x: Option<f64>| x.map_or("—".to_owned(), crate::report::num);
    let rows = p
        .rows
        .iter()
        .map(|r| {
            vec![
                r.metric.name.clone(),
                f(r.a),
                f(r.b),
                format!("{} / {}", f(r.spread[0]), f(r.spread[1])),
                r.pairs_if_real.map_or("—".into(), |n| (2 * n).to_string()),
                r.pairs.map_or("> 4000".into(), |n| (2 * n).to_string()),
                r.at_budget
                    .map_or("—".into(), |x| format!("{:.1}%", x * 100.0)),
            ]
        })
        .collect();
    d.table(
        &[
            "metric",
            "A (pilot)",
            "B (pilot)",
            "spread of a block (A / B)",
            "blocks if the pilot's difference is real",
            "blocks to show no difference beyond the MDE",
            "detectable at the budget",
        ],
        rows,
    );
    d.line(format!(
        "Each pilot block took {:.0} s. The spread is a bootstrap over the block's requests; the plan treats a pair's two blocks as independent, which needs at least as many blocks as pairing does.",
        p.block_s
    ));
    d
}
