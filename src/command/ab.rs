//! `goodput ab`: A against B in paired, interleaved blocks, until the verdict is known.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::signals::{cancel_on_signals, exit_code};
use super::{Done, OutputArgs, Overrides, Shown, read_contract};
use crate::ab::{AbOptions, AbResult, Side};
use crate::report::Doc;

/// `--fail-on worse` exits with this when B is worse on some metric.
pub const EXIT_B_WORSE: u8 = 9;

/// What `--fail-on` can fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AbGate {
    /// Some metric decided worse for B (exit 9).
    Worse,
}

/// A share on the command line: `5%` or `0.05`.
fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}`: give a share such as 5% or 0.05"))?;
    if !(v > 0.0 && v < 1.0) {
        return Err(format!("`{s}`: must be between 0 and 100%"));
    }
    Ok(v)
}

// The arguments of `goodput ab`.
#[derive(Debug, clap::Args)]
pub struct AbArgs {
    /// A's contract (the baseline).
    a: PathBuf,
    /// B's contract; left out, B is A with the `--b` changes, or A itself (the null check).
    b: Option<PathBuf>,
    /// B is A with this change, KEY=VALUE (repeatable), e.g.
    /// `--b target.url=http://127.0.0.1:8001`.
    #[arg(long = "b", value_name = "KEY=VALUE", conflicts_with = "b")]
    b_set: Vec<String>,
    /// The smallest difference worth finding, relative to A (e.g. 5%): a metric whose
    /// interval lies within ± this is decided as "no difference".
    #[arg(long, default_value = "5%", value_parser = parse_share)]
    mde: f64,
    /// The power at which the detectable difference is stated.
    #[arg(long, default_value = "80%", value_parser = parse_share)]
    power: f64,
    /// The first look, in blocks (A and B count one each; even, at least 4).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(4..))]
    min_blocks: u64,
    /// The budget, in blocks: the run stops here, decided or not.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(4..))]
    max_blocks: u64,
    /// Power ahead of time: run one pilot pair and say how many blocks the MDE needs,
    /// metric by metric, and whether the budget reaches it.
    #[arg(long)]
    plan: bool,
    /// Exit 9 when B is worse on some metric (for CI).
    #[arg(long, value_enum)]
    fail_on: Option<AbGate>,
    #[command(flatten)]
    output: OutputArgs,
    /// Changes to both contracts (e.g. `--requests 200` for the block's size).
    #[command(flatten)]
    overrides: Overrides,
}

/// Reads one side's contract with the shared changes (and B's own).
fn side(path: &Path, overrides: &Overrides, extra: &[String]) -> anyhow::Result<Side> {
    let src = read_contract(path)?;
    let (mut src, _) = overrides.apply(&src, path)?;
    if !extra.is_empty() {
        let o = Overrides {
            set: extra.to_vec(),
            ..Default::default()
        };
        src = o.apply(&src, path).context("--b")?.0;
    }
    let (contract, inputs) = crate::workload::parse(&src, path)?;
    crate::workload::environment::check_environment(&contract, &src, path)?;
    Ok(Side {
        label: path.display().to_string(),
        contract,
        inputs,
    })
}

/// Runs the A/B test and shows its verdict.
pub async fn ab(args: AbArgs) -> anyhow::Result<Done> {
    let AbArgs {
        a,
        b,
        b_set,
        mde,
        power,
        min_blocks,
        max_blocks,
        plan,
        fail_on,
        output,
        overrides,
    } = args;
    if min_blocks % 2 == 1 || max_blocks % 2 == 1 {
        bail!("--min-blocks and --max-blocks count A and B blocks together: give even numbers");
    }
    if min_blocks > max_blocks {
        bail!("--min-blocks {min_blocks} is more than --max-blocks {max_blocks}");
    }
    let side_a = side(&a, &overrides, &[])?;
    let mut side_b = match &b {
        Some(p) => side(p, &overrides, &[])?,
        None => side(&a, &overrides, &b_set)?,
    };
    if b.is_none() && !b_set.is_empty() {
        side_b.label = format!("{} with {}", a.display(), b_set.join(", "));
    }
    let cancel = cancel_on_signals("the block in flight");
    let opts = output.run_options();
    let o = AbOptions {
        out_root: opts.out_root,
        watch: opts.watch,
        argv: opts.argv,
        cancel,
        signal: opts.signal,
        wake_latency_hold: opts.wake_latency_hold,
        min_pairs: (min_blocks / 2) as usize,
        max_pairs: (max_blocks / 2) as usize,
        mde,
        power,
    };
    if plan {
        let p = crate::ab::plan::plan(side_a, side_b, &o).await?;
        return Ok(Done::new(PlanShown(p), output.format.get(), output.verbose));
    }
    let (bundle, r) = crate::ab::ab(side_a, side_b, &o).await?;
    let status = if r.interrupted {
        exit_code(true, super::signals::SelfStop::No)
    } else if fail_on == Some(AbGate::Worse) && r.worse() {
        ExitCode::from(EXIT_B_WORSE)
    } else {
        ExitCode::SUCCESS
    };
    let shown = AbShown {
        result: r,
        bundle: bundle.dir.clone(),
    };
    Ok(Done::new(shown, output.format.get(), output.verbose).with_status(Ok(status)))
}

/// An A/B test as the seam shows it.
pub struct AbShown {
    pub result: AbResult,
    pub bundle: PathBuf,
}

impl Shown for AbShown {
    fn title(&self) -> String {
        "goodput ab".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::ab::document(&self.result)
    }
    fn json(&self) -> String {
        super::json(&self.result)
    }
    fn page(&self) -> anyhow::Result<String> {
        Ok(crate::ab::html_page(&self.result))
    }
    fn terminal_after(&self, _verbose: bool) -> String {
        format!("\nA/B bundle: {}\n", self.bundle.display())
    }
}

/// `--plan`'s result as the seam shows it.
pub struct PlanShown(pub crate::ab::plan::AbPlan);

impl Shown for PlanShown {
    fn title(&self) -> String {
        "goodput ab --plan".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::ab::plan::document(&self.0)
    }
    fn json(&self) -> String {
        super::json(&self.0)
    }
    fn page(&self) -> anyhow::Result<String> {
        let d = self.document(true);
        Ok(crate::report::format::html::wrap("goodput ab --plan", &d))
    }
    fn terminal_after(&self, _verbose: bool) -> String {
        format!("\nPilot bundle: {}\n", self.0.bundle.display())
    }
}
