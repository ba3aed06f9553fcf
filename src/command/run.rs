//! `goodput run`: a contract run once (or `--repeats` times), its result the run's summary
//! (or the repeat set's), its status the run's and its gates'.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use super::plan::sample_plan;
use super::signals::{SelfStop, cancel_on_signals, exit_code};
use super::watch::watched;
use super::{Done, OutputArgs, Overrides, Shown, read_contract};
use crate::contract;
use crate::report::Doc;

// The arguments of `goodput run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Contract file (TOML). Default: the built-in example (`goodput init` writes it).
    contract: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    overrides: Overrides,
    /// Measure a cold start: wait for the server to become ready (launching it when the
    /// contract's [cold_start] says how) and report its first requests apart.
    #[arg(long)]
    cold_start: bool,
    /// Run the contract this many times (overrides [repeat] runs).
    #[arg(long)]
    repeats: Option<u32>,
    /// Write down expectations before the run, e.g. "ttft_p99<=300ms,goodput>=12"
    /// (overrides [prediction]); the report shows predicted vs measured.
    #[arg(long)]
    predict: Option<String>,
    /// Send only shard I (from 0) of N of the plan (`load.shard`): the arrivals whose plan
    /// index is I modulo N (whole sessions), for one client machine of N; `goodput merge`
    /// joins the N bundles. Needs --start-at.
    #[arg(long, value_name = "I/N", requires = "start_at")]
    shard: Option<String>,
    /// The common start instant of every shard's schedule, RFC 3339 (`load.start_at`), e.g.
    /// 2026-12-02T06:00:00Z; refused once past.
    #[arg(long, value_name = "INSTANT")]
    start_at: Option<String>,
    /// Exit with a status of its own when the result fails a gate, for CI (comma-separated,
    /// repeatable): invalid (4), slo (5), prediction (6), quality (7, with --baseline),
    /// regression (10, with --history). The first failing in that order sets the status;
    /// stderr names every failing gate and why.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GATES")]
    fail_on: Vec<crate::command::gates::Gate>,
    /// A bundle or repeat set whose outputs `--fail-on quality` holds this run's against (by
    /// the baseline's [quality] tolerances, as `compare` does).
    #[arg(long, value_name = "BUNDLE")]
    baseline: Option<PathBuf>,
    /// Watch the run on a terminal dashboard (on stderr): offered and achieved rate, in
    /// flight, latency percentiles over the last 10 s against the SLO, goodput, errors,
    /// dispatch lag, phase and time left. `q` or Ctrl-C stops the run (what was measured is
    /// kept). The bundle is the same with or without it.
    #[arg(long, conflicts_with = "repeats")]
    live: bool,
    /// Add the bundle (a repeat set: each run) to this history store (a SQLite file or a
    /// postgres:// URL, as `goodput history --store`) and say how its series stands.
    #[arg(long, value_name = "STORE")]
    history: Option<String>,
    /// With --history: how far for the worse the run may be before it counts as a
    /// regression, as `goodput history --threshold` (5% by default; `tpot_p50_ms=3%` for one
    /// metric); repeatable.
    #[arg(long, value_name = "PCT|METRIC=PCT", requires = "history")]
    regression_threshold: Vec<String>,
}

/// A run's contract: the file (or the built-in one) with the command line's changes made
/// (`--set`, the shorthands, `--shard`, `--start-at`); its path for messages, its text, and
/// how the changes read.
fn run_contract_text(
    contract: Option<&Path>,
    mut overrides: Overrides,
    shard: Option<String>,
    start_at: Option<String>,
) -> anyhow::Result<(PathBuf, String, Vec<String>)> {
    overrides.more.extend(shard.map(|v| ("shard", v)));
    overrides.more.extend(start_at.map(|v| ("start-at", v)));
    let (path, src) = match contract {
        Some(p) => (p.to_owned(), read_contract(p)?),
        None => (
            PathBuf::from("<built-in examples/chat.toml>"),
            contract::BUILTIN.to_owned(),
        ),
    };
    let (text, said) = overrides.apply(&src, &path)?;
    Ok((path, text, said))
}

impl RunArgs {
    /// The contract this command line would run, its changes made and its files read as
    /// `run` reads them, without sending anything. The documents' tests hold every
    /// `goodput run` line they show to it.
    pub fn contract(&self) -> anyhow::Result<contract::Contract> {
        let (path, text, _) = run_contract_text(
            self.contract.as_deref(),
            self.overrides.clone(),
            self.shard.clone(),
            self.start_at.clone(),
        )?;
        Ok(crate::workload::parse(&text, &path)?.0)
    }
}

/// Runs the contract; its result is the run's summary, its status the run's and its gates'.
pub async fn run(a: RunArgs) -> anyhow::Result<Done> {
    let RunArgs {
        contract,
        output,
        overrides,
        cold_start,
        repeats,
        predict,
        shard,
        start_at,
        fail_on,
        baseline,
        live,
        history,
        regression_threshold,
    } = a;
    let (path, text, said) = run_contract_text(contract.as_deref(), overrides, shard, start_at)?;
    let (mut c, inputs) = crate::workload::parse(&text, &path)?;
    crate::workload::environment::check_environment(&c, &text, &path)?;
    for n in &c.notes {
        say_err!("note: {n}");
    }
    if let Some(p) = sample_plan(&c, &inputs) {
        say_err!("note: {p}");
    }
    let mut options = output.run_options();
    options.overrides = said;
    run_flags(&mut c, cold_start, predict, repeats)?;
    let regression = fail_on.contains(&crate::command::gates::Gate::Regression);
    let thresholds = crate::history::Thresholds::parse(&regression_threshold)?;
    let history = history.map(|store| (store, thresholds));
    if regression && history.is_none() {
        bail!(
            "--fail-on regression needs --history STORE: a run is judged against the runs before it"
        );
    }
    if regression {
        never_judged(&c)?;
    }
    let gates = Gates::check(fail_on, baseline, &c)?;
    let cancel = cancel_on_signals("the records in flight");
    if c.repeat.runs > 1 {
        let (mut done, dir) = repeat_set(c, inputs, &output, options, cancel, &gates).await?;
        with_history(history.as_ref(), regression, &dir, &mut done).await?;
        return Ok(done);
    }
    let r = if live {
        let title = format!("goodput run {}", c.name);
        let board = crate::live::Board::new(Arc::new(c.clone()), None);
        watched(board, title, options, cancel, |o, k| {
            crate::run::run(c, inputs, o, k)
        })
        .await?
    } else {
        crate::run::run(c, inputs, options, cancel).await?
    };
    let mut after = Vec::new();
    let status = explain_failure(&r, (&path, &text)).map(|gave_up| {
        after.extend(gave_up);
        let (code, failed) = gates.exit(
            exit_code(r.summary.interrupted, SelfStop::of(&r)),
            &[&r.summary],
            &r.bundle.dir,
        );
        after.extend(failed);
        code
    });
    let dir = r.bundle.dir.clone();
    let mut done = Done {
        shown: Box::new(RunShown::of(r, "goodput run")),
        format: output.format.get(),
        verbose: output.verbose,
        after,
        status,
    };
    with_history(history.as_ref(), regression, &dir, &mut done).await?;
    Ok(done)
}

/// `--fail-on regression` refused before the run when the contract alone makes every point
/// it adds directional (no SLO, or no quality check): such points are shown and never judged,
/// so the gate could never fail. What the server may still say (its revisions) is judged after
/// the run ([`crate::history::History::unjudgeable`]).
fn never_judged(c: &crate::contract::Contract) -> anyhow::Result<()> {
    let why: Vec<String> = crate::analyze::contract_gaps(c)
        .into_iter()
        .map(|(gap, fix)| match fix {
            Some(fix) => format!("{gap}: {fix}"),
            None => format!("{gap} (no key makes such runs judgeable)"),
        })
        .collect();
    if why.is_empty() {
        return Ok(());
    }
    bail!(
        "--fail-on regression can never judge this contract's runs: every point it adds to the history is directional (shown, never used to decide), so the gate would pass forever. {}",
        why.join("; ")
    )
}

/// `--history STORE`: the bundle added, how its series stands said on stderr; with
/// `--fail-on regression`, exit 10 when it starts a change for the worse (and nothing else
/// failed first).
async fn with_history(
    history: Option<&(String, crate::history::Thresholds)>,
    regression: bool,
    bundle: &Path,
    done: &mut Done,
) -> anyhow::Result<()> {
    let Some((store, thresholds)) = history else {
        return Ok(());
    };
    if !matches!(done.status, Ok(ref c) if *c == ExitCode::SUCCESS) {
        done.after.push(format!(
            "not added to the history {store}: the run did not complete"
        ));
        return Ok(());
    }
    let (lines, series) = super::history::add_bundles(&[bundle.to_owned()], store).await?;
    done.after
        .extend(lines.into_iter().map(|l| format!("history: {l}")));
    let h = super::history::series_view(store, &series, thresholds).await?;
    for s in &h.series {
        done.after.push(format!(
            "history: series {} · {}",
            s.key,
            crate::history::view::newest_line(s).0
        ));
    }
    if regression && !h.regressions().is_empty() {
        done.status = Ok(ExitCode::from(super::history::EXIT_REGRESSION));
        done.after.push(
            "fail-on regression (exit 10): the run starts a change for the worse in its series"
                .into(),
        );
    } else if regression {
        let never = h.unjudgeable();
        if !never.is_empty() {
            done.status = Ok(ExitCode::from(super::history::EXIT_UNJUDGEABLE));
            done.after.extend(super::history::unjudgeable_lines(never));
        }
    }
    Ok(())
}

/// A run's result as the seam shows it: its summary, the page it wrote into its bundle, and
/// where the bundle is.
pub struct RunShown {
    pub title: &'static str,
    pub summary: crate::analyze::Summary,
    pub bundle: PathBuf,
}

impl RunShown {
    /// The run's summary and bundle, moved out of its result (its records are freed here).
    pub fn of(r: crate::run::RunResult, title: &'static str) -> RunShown {
        RunShown {
            title,
            summary: r.summary,
            bundle: r.bundle.dir,
        }
    }
}

impl Shown for RunShown {
    fn title(&self) -> String {
        self.title.into()
    }
    fn document(&self, full: bool) -> Doc {
        crate::report::document_at(&self.summary, full)
    }
    fn json(&self) -> String {
        super::json(&self.summary)
    }
    /// The page the run wrote into its bundle, with its figures.
    fn page(&self) -> anyhow::Result<String> {
        crate::text::read_capped_string(
            &self.bundle.join("report.html"),
            crate::text::MAX_FILE_BYTES,
        )
        .with_context(|| format!("reading {}", self.bundle.display()))
    }
    fn terminal_after(&self, _verbose: bool) -> String {
        format!("\nBundle: {}\n", self.bundle.display())
    }
}

/// The run's own flags, made into the contract: `--cold-start`, `--predict`, `--repeats`.
fn run_flags(
    c: &mut contract::Contract,
    cold_start: bool,
    predict: Option<String>,
    repeats: Option<u32>,
) -> anyhow::Result<()> {
    if cold_start && c.cold_start.is_none() {
        c.cold_start = Some(contract::ColdStart::default());
    }
    if let Some(p) = predict {
        contract::prediction::parse_list(&p).map_err(|e| anyhow::anyhow!("--predict: {e}"))?;
        c.prediction = Some(contract::PredictionSpec {
            expect: p
                .split(',')
                .map(|x| x.trim().to_owned())
                .filter(|x| !x.is_empty())
                .collect(),
        });
    }
    if let Some(n) = repeats {
        if n == 0 {
            bail!("--repeats must be at least 1");
        }
        c.repeat.runs = n;
    }
    if c.repeat.runs > 1 && c.load.shard.is_some() {
        bail!(
            "a shard runs once, at its start instant: repeat a sharded run by starting every shard again with a new --start-at"
        );
    }
    Ok(())
}

/// `run --repeats N` (or `[repeat] runs`): the runs, their overview and the repeat set.
async fn repeat_set(
    c: contract::Contract,
    inputs: crate::workload::Inputs,
    output: &OutputArgs,
    options: crate::run::RunOptions,
    cancel: CancellationToken,
    gates: &Gates,
) -> anyhow::Result<(Done, PathBuf)> {
    let (parent, rs, results) = crate::run::run_repeats(c, inputs, options, cancel).await?;
    let summaries: Vec<&crate::analyze::Summary> = results.iter().map(|r| &r.summary).collect();
    let (status, after) = gates.exit(
        exit_code(
            results.iter().any(|r| r.summary.interrupted),
            results
                .iter()
                .map(SelfStop::of)
                .find(|s| *s != SelfStop::No)
                .unwrap_or(SelfStop::No),
        ),
        &summaries,
        &parent.dir,
    );
    let shown = RepeatsShown {
        runs: results.into_iter().map(|r| r.summary).collect(),
        repeat: rs,
        bundle: Some(parent.dir.clone()),
        run_dirs: Vec::new(),
        page_refused: None,
    };
    Ok((
        Done {
            shown: Box::new(shown),
            format: output.format.get(),
            verbose: output.verbose,
            after,
            status: Ok(status),
        },
        parent.dir,
    ))
}

/// When the server refused the requests' images (a 400 that names images, as vLLM's
/// `--limit-mm-per-prompt` refusal and a decoder's do): the contract's key to change, with its
/// file and line.
fn refused_images(
    r: &crate::run::RunResult,
    (path, text): (&std::path::Path, &str),
    error: &str,
) -> String {
    let Some(most) = r
        .records
        .iter()
        .map(|x| x.images.len())
        .max()
        .filter(|&n| n > 0)
    else {
        return String::new();
    };
    if !(error.contains("HTTP 4") && error.to_ascii_lowercase().contains("image")) {
        return String::new();
    }
    let key = "workload.images.count";
    let at = crate::contract::source::line_of_key(text, key)
        .or_else(|| crate::contract::source::line_of_key(text, "workload.images"))
        .map_or(String::new(), |l| format!(":{l}"));
    format!(
        " — the server refuses the requests' images: {}{at}: {key} sent up to {} per request; lower it to the server's limit or raise the server's (vLLM: --limit-mm-per-prompt '{{\"image\": N}}')",
        path.display(),
        most
    )
}

/// A run that ended without a success: why, as a line for stderr (it gave up: exit 3 follows)
/// or as the command's error (nothing sent, nothing succeeded).
fn explain_failure(
    r: &crate::run::RunResult,
    contract: (&std::path::Path, &str),
) -> anyhow::Result<Option<String>> {
    let st = &r.summary.steady.stats;
    let first = || {
        let e = r
            .records
            .iter()
            .find_map(|x| x.error.clone())
            .unwrap_or_default();
        format!("{e}{}", refused_images(r, contract, &e))
    };
    if let Some(g) = r.summary.load_end.as_ref().and_then(|l| l.guard.as_ref()) {
        // Stopped on its own: the server fell behind. Said on stderr, with exit status 9.
        return Ok(Some(format!(
            "goodput: the progress guard stopped the load: {}. The bundle is kept at {}",
            g.why(),
            r.bundle.dir.display()
        )));
    }
    if let Some(why) = &r.aborted {
        // Stopped on its own: the target failed. Said on stderr, with exit status 3.
        let first = first();
        let first = if st.ok == 0 && !why.contains(&*first) {
            format!("; no request succeeded, the first failed with: {first}")
        } else if st.ok == 0 {
            "; no request succeeded".to_owned()
        } else {
            String::new()
        };
        return Ok(Some(format!(
            "goodput: {why}{first}. The bundle is kept at {}",
            r.bundle.dir.display()
        )));
    } else if st.ok == 0 && !r.summary.interrupted {
        let sent = r.records.iter().filter(|x| x.sent_us.is_some()).count();
        if sent == 0 {
            bail!(
                "no request was sent: the plan ended before its first send (is load.duration or load.requests too small?). The bundle is kept at {}",
                r.bundle.dir.display()
            );
        }
        bail!(
            "no request succeeded ({} failed); first error: {}. The bundle is kept at {}",
            r.records.len(),
            first(),
            r.bundle.dir.display()
        );
    }
    Ok(None)
}

/// `run --fail-on`: the gates asked for, checked against the contract before the run (a gate
/// that could never pass is a mistake in the command), and the baseline for `quality`, loaded
/// before the run too.
struct Gates {
    gates: Vec<crate::command::gates::Gate>,
    baseline: Option<crate::compare::Side>,
}

impl Gates {
    fn check(
        gates: Vec<crate::command::gates::Gate>,
        baseline: Option<PathBuf>,
        c: &contract::Contract,
    ) -> anyhow::Result<Gates> {
        use crate::command::gates::Gate;
        if gates.contains(&Gate::Slo) && !c.has_slo() {
            bail!("--fail-on slo: the contract has no [slo] thresholds to meet");
        }
        if gates.contains(&Gate::Prediction) && c.prediction.is_none() {
            bail!(
                "--fail-on prediction: nothing was predicted (--predict, or [prediction] expect)"
            );
        }
        let baseline = match (gates.contains(&Gate::Quality), baseline) {
            (true, None) => bail!(
                "--fail-on quality needs --baseline BUNDLE: a run's outputs are held against another run's"
            ),
            (false, Some(_)) => bail!("--baseline is read by --fail-on quality only"),
            (true, Some(p)) => Some(
                crate::compare::load_side(&p)
                    .with_context(|| format!("--baseline {}", p.display()))?,
            ),
            (false, None) => None,
        };
        Ok(Gates { gates, baseline })
    }

    /// The exit status: `code` when the run ended on a signal or gave up, else the first
    /// failing gate's, else success; and a line for stderr per failing gate.
    fn exit(
        &self,
        code: ExitCode,
        runs: &[&crate::analyze::Summary],
        bundle: &Path,
    ) -> (ExitCode, Vec<String>) {
        if self.gates.is_empty() || code != ExitCode::SUCCESS {
            return (code, Vec::new());
        }
        let quality = self
            .baseline
            .as_ref()
            .map(|b| match crate::compare::load_side(bundle) {
                Ok(this) => crate::compare::quality_guard(b, &this),
                Err(e) => crate::compare::QualityGuard {
                    status: crate::compare::GuardStatus::Unchecked,
                    detail: format!("reading {}: {e:#}", bundle.display()),
                    consistency: None,
                },
            });
        let failed = crate::command::gates::failed_gates(&self.gates, runs, quality.as_ref());
        let said = failed
            .iter()
            .map(|f| {
                format!(
                    "fail-on {} (exit {}): {}",
                    format!("{:?}", f.gate).to_lowercase(),
                    f.exit,
                    f.why
                )
            })
            .collect();
        let code = failed
            .first()
            .map_or(ExitCode::SUCCESS, |f| ExitCode::from(f.exit));
        (code, said)
    }
}

/// A repeat set as `run --repeats` and `report` show it: on a terminal each run's overview
/// first, then the aggregate; with `report --verbose`, each run's whole report after it.
pub struct RepeatsShown {
    pub runs: Vec<crate::analyze::Summary>,
    pub repeat: crate::run::RepeatSummary,
    /// The repeat set's bundle, named after the result (`run` only).
    pub bundle: Option<PathBuf>,
    /// Each run's bundle, for `report --verbose` to name before its report.
    pub run_dirs: Vec<PathBuf>,
    /// Why `--format html` is refused (`report`: its page is one run's).
    pub page_refused: Option<String>,
}

impl Shown for RepeatsShown {
    fn title(&self) -> String {
        "goodput repeats".into()
    }
    fn document(&self, _full: bool) -> Doc {
        crate::run::repeat_document(&self.repeat)
    }
    fn json(&self) -> String {
        super::json(&self.repeat)
    }
    fn page(&self) -> anyhow::Result<String> {
        match &self.page_refused {
            Some(why) => bail!("{why}"),
            None => Ok(super::document_page(self)),
        }
    }
    fn terminal_before(&self) -> String {
        runs_overview(&self.runs)
    }
    fn terminal_after(&self, verbose: bool) -> String {
        let mut out = String::new();
        if verbose {
            for (d, s) in self.run_dirs.iter().zip(&self.runs) {
                out += &format!("\n{}\n", d.display());
                out += &crate::report::document_at(s, true).terminal();
            }
        }
        if let Some(b) = &self.bundle {
            out += &format!("\nBundle: {}\n", b.display());
        }
        out
    }
}

/// Each run of a repeat set: its headline, every reason it is INVALID (one line each: a run
/// that fell behind its schedule may also have been overloaded, and a reader fixing the first
/// should know of the second), its SLO's verdict with its support, and how its predictions
/// fared.
fn runs_overview(runs: &[crate::analyze::Summary]) -> String {
    let mut out = String::new();
    for (i, s) in runs.iter().enumerate() {
        out += &format!("run {:02}: {}\n", i + 1, crate::report::headline(s));
        for r in &s.validity.reasons {
            out += &format!("  INVALID: {r}\n");
        }
        if let Some(slo) = &s.steady.slo {
            out += &format!(
                "  SLO {}\n",
                crate::report::slo_verdict_words(slo, s.validity.is_valid())
            );
        }
        for o in s.predictions.iter().flat_map(|p| &p.outcomes) {
            out += &format!(
                "  predicted {}: measured {}, {}\n",
                o.text,
                o.measured.map_or("nothing".into(), crate::report::num),
                match o.held {
                    Some(true) => "held",
                    Some(false) => "did not hold",
                    None => "not measured",
                }
            );
        }
    }
    out
}
