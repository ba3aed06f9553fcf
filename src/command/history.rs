//! `goodput history`: bundles kept as points of a series in a store (SQLite file or
//! PostgreSQL), change points found, the newest point judged (`--fail-on regression`), the
//! series drawn and exported.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use super::{Done, FormatArgs, Shown};
use crate::history::store::{Added, Store};
use crate::history::view::History;
use crate::report::Doc;

/// `goodput history`'s exit status when the newest point of a series starts a change for
/// the worse (`--fail-on regression`): after `ab`'s 9.
pub const EXIT_REGRESSION: u8 = 10;

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Add bundles (a repeat set: each of its runs) to the store; the series they join are
    /// then shown. Adding a bundle already there changes nothing; a failed add changes
    /// nothing.
    Add(AddArgs),
    /// The series: each point, the change points found and the newest point's judgement.
    Show(Judge),
    /// The series as a page: each metric over the points, change points marked.
    Html(HtmlArgs),
    /// The points as CSV, or the newest point of each series in Bencher Metric Format.
    Export(ExportArgs),
}

/// Where the history is kept.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// The store: a SQLite file (created on the first add), or a PostgreSQL URL
    /// (postgres://USER@HOST[:PORT]/DB, the password in PGPASSWORD, never in the URL).
    #[arg(long, env = "GOODPUT_HISTORY", default_value = crate::history::store::DEFAULT)]
    pub store: String,
}

/// Which series, which metric, and what counts as a regression.
#[derive(Debug, clap::Args)]
pub struct Judge {
    #[command(flatten)]
    store: StoreArgs,
    /// One series (its key, or the first characters of it).
    #[arg(long, value_name = "KEY")]
    series: Option<String>,
    /// One metric (e.g. tpot_p50_ms, "TPOT p50"): shown, judged and drawn alone.
    #[arg(long, value_name = "METRIC")]
    metric: Option<String>,
    /// How far for the worse the newest point may be: a share of the baseline's mean
    /// (points, for attainment and errors), for every metric (`5%`, the default) or one
    /// (`tpot_p50_ms=3%`); repeatable.
    #[arg(long, value_name = "PCT|METRIC=PCT")]
    threshold: Vec<String>,
    /// Exit 10 when the newest point of a series starts a change for the worse beyond its
    /// threshold at the series' confidence.
    #[arg(long, value_enum, value_name = "WHAT")]
    fail_on: Option<FailOn>,
    #[command(flatten)]
    format: FormatArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// The newest point starts a change for the worse.
    Regression,
}

#[derive(Debug, clap::Args)]
struct AddArgs {
    /// Bundles or repeat sets.
    #[arg(required = true)]
    bundles: Vec<PathBuf>,
    #[command(flatten)]
    judge: Judge,
}

#[derive(Debug, clap::Args)]
struct HtmlArgs {
    #[command(flatten)]
    judge: Judge,
    /// Where to write the page.
    #[arg(long, short, default_value = "history.html")]
    output: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ExportArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// One series (its key, or the first characters of it).
    #[arg(long, value_name = "KEY")]
    series: Option<String>,
    /// csv: every point, every metric; bmf: the newest point of each series, in Bencher
    /// Metric Format (`bencher run --adapter json --file FILE`).
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Where to write it (default: stdout).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    Csv,
    Bmf,
}

pub async fn history(a: HistoryArgs) -> anyhow::Result<Done> {
    match a.action {
        Action::Add(x) => add(x).await,
        Action::Show(j) => {
            let h = judged(&j, Vec::new()).await?;
            Ok(shown(h, j.fail_on, j.format.get()))
        }
        Action::Html(x) => {
            let h = judged(&x.judge, Vec::new()).await?;
            std::fs::write(&x.output, h.page())
                .with_context(|| format!("writing {}", x.output.display()))?;
            let (status, after) = status(&h, x.judge.fail_on);
            let mut d = Done::text(format!(
                "{} series → {}\n",
                h.series.len(),
                x.output.display()
            ))
            .with_status(status);
            d.after = after;
            Ok(d)
        }
        Action::Export(x) => {
            let mut store = Store::open(&x.store.store, false).await?;
            let h = read(&mut store, x.series.as_deref(), &Default::default(), None).await?;
            let text = match x.format {
                ExportFormat::Csv => h.csv()?,
                ExportFormat::Bmf => h.bmf(),
            };
            match &x.output {
                Some(path) => {
                    std::fs::write(path, text)
                        .with_context(|| format!("writing {}", path.display()))?;
                    Ok(Done::text(format!(
                        "{} series → {}\n",
                        h.series.len(),
                        path.display()
                    )))
                }
                None => Ok(Done::text(text)),
            }
        }
    }
}

/// The store read and analysed as `j` asks.
async fn judged(j: &Judge, added: Vec<String>) -> anyhow::Result<History> {
    let thresholds = crate::history::Thresholds::parse(&j.threshold)?;
    let metric = j
        .metric
        .as_deref()
        .map(|m| {
            crate::history::measure(m).with_context(|| {
                format!(
                    "--metric {m}: no such metric; the metrics are {}",
                    crate::history::MEASURES.map(|m| m.key).join(", ")
                )
            })
        })
        .transpose()?;
    let mut store = Store::open(&j.store.store, false).await?;
    let mut h = read(&mut store, j.series.as_deref(), &thresholds, metric).await?;
    h.added = added;
    Ok(h)
}

/// The status `--fail-on` gives a history, each regression named on stderr.
fn status(h: &History, fail_on: Option<FailOn>) -> (anyhow::Result<ExitCode>, Vec<String>) {
    let bad = match fail_on {
        Some(FailOn::Regression) => h.regressions(),
        None => Vec::new(),
    };
    let never = match fail_on {
        Some(FailOn::Regression) => h.unjudgeable(),
        None => Vec::new(),
    };
    if bad.is_empty() && !never.is_empty() {
        return (
            Ok(ExitCode::from(EXIT_UNJUDGEABLE)),
            unjudgeable_lines(never),
        );
    }
    if bad.is_empty() {
        (Ok(ExitCode::SUCCESS), Vec::new())
    } else {
        (
            Ok(ExitCode::from(EXIT_REGRESSION)),
            bad.into_iter()
                .map(|b| format!("--fail-on regression: {b}"))
                .collect(),
        )
    }
}

/// The exit status of `--fail-on regression` over a series it can never judge (its newest
/// point is directional): a gate that would pass forever is a failure, named.
pub const EXIT_UNJUDGEABLE: u8 = 11;

/// Each series `--fail-on regression` cannot judge, and what would make it judgeable.
pub fn unjudgeable_lines(never: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = never
        .into_iter()
        .map(|n| format!("--fail-on regression cannot judge (exit {EXIT_UNJUDGEABLE}): {n}"))
        .collect();
    out.push("Each reason names the key that fixes it: a [quality] mode (\"consistency\" or \"reference\"), an [slo], or the facts the server does not say, declared in [target.declared] (engine_revision, model_revision, hardware, precision). Points added before the fix stay directional; the series is judged from its first comparable points.".to_owned());
    out
}

/// The history shown, with its status.
fn shown(h: History, fail_on: Option<FailOn>, format: crate::report::format::Format) -> Done {
    let (status, after) = status(&h, fail_on);
    let mut d = Done::new(HistoryShown(h), format, false).with_status(status);
    d.after = after;
    d
}

/// The store's points (of the series whose key starts with `series`), analysed.
async fn read(
    store: &mut Store,
    series: Option<&str>,
    thresholds: &crate::history::Thresholds,
    metric: Option<&'static crate::history::Measure>,
) -> anyhow::Result<History> {
    let name = store.to_string();
    let mut points = store
        .points(None)
        .await
        .with_context(|| format!("reading the history store {name}"))?;
    if let Some(k) = series {
        points.retain(|p| p.series.starts_with(k));
        if points.is_empty() {
            bail!("history store {name}: no series {k} (`goodput history show` lists them)");
        }
        let keys: std::collections::BTreeSet<&str> =
            points.iter().map(|p| p.series.as_str()).collect();
        if keys.len() > 1 {
            bail!(
                "--series {k} names {} series ({}): give more of the key",
                keys.len(),
                keys.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(History {
        store: name,
        thresholds: thresholds.clone(),
        metric: metric.map(|m| m.key.to_owned()),
        series: crate::history::analyse(points, thresholds, metric),
        added: Vec::new(),
    })
}

/// The series with these keys in the store, analysed as by default (`run --history`).
pub async fn series_view(
    location: &str,
    keys: &[String],
    thresholds: &crate::history::Thresholds,
) -> anyhow::Result<History> {
    let mut store = Store::open(location, false).await?;
    let mut h = read(&mut store, None, thresholds, None).await?;
    h.series.retain(|s| keys.contains(&s.key));
    Ok(h)
}

/// The bundles given, a repeat set as its runs.
fn expand(bundles: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for b in bundles {
        match crate::bundle::repeat_runs(b).with_context(|| format!("reading {}", b.display()))? {
            Some(runs) => out.extend(runs),
            None => out.push(b.clone()),
        }
    }
    Ok(out)
}

/// Reads every bundle first (so a bad one changes nothing), adds them in one transaction,
/// then shows the series they joined.
async fn add(a: AddArgs) -> anyhow::Result<Done> {
    let (lines, series) = add_bundles(&a.bundles, &a.judge.store.store).await?;
    let mut h = judged(&a.judge, lines).await?;
    // The series the bundles joined, and only they decide the status.
    h.series.retain(|s| series.contains(&s.key));
    Ok(shown(h, a.judge.fail_on, a.judge.format.get()))
}

/// Adds bundles to the store at `location`: a line per bundle saying what was done, and the
/// series they belong to. `run --history` adds its bundle through here.
pub async fn add_bundles(
    bundles: &[PathBuf],
    location: &str,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let dirs = expand(bundles)?;
    let points = dirs
        .iter()
        .map(|d| crate::history::point(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut store = Store::open(location, true).await?;
    let name = store.to_string();
    let done = store
        .add(&points)
        .await
        .with_context(|| format!("adding to the history store {name} (nothing was changed)"))?;
    let lines = dirs
        .iter()
        .zip(&done)
        .map(|(d, x)| match x {
            Added::New(id) => format!("added {} as point {id}", d.display()),
            Added::Already { id, at } => {
                format!(
                    "{} is already point {id} (at {at}): nothing changed",
                    d.display()
                )
            }
            Added::Moved { id, from } => format!(
                "{} is point {id}, which was at {from} (no longer there): its place is updated",
                d.display()
            ),
        })
        .collect();
    let mut series: Vec<String> = points.iter().map(|p| p.series.clone()).collect();
    series.dedup();
    Ok((lines, series))
}

/// The history as the seam shows it.
struct HistoryShown(History);

impl Shown for HistoryShown {
    fn title(&self) -> String {
        "goodput history".into()
    }
    fn document(&self, _full: bool) -> Doc {
        self.0.document()
    }
    fn json(&self) -> String {
        super::json(&self.0)
    }
    fn page(&self) -> anyhow::Result<String> {
        Ok(self.0.page())
    }
}
