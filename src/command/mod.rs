//! The commands, one module each, with the arguments clap parses into beside it (`cli`
//! dispatches to them). A command returns [`Done`]: its typed result ([`Shown`]), the lines for
//! stderr that follow it and its status. The result reaches stdout only through [`emit`], the
//! one rendering seam, in the asked `--format` (terminal, Markdown, HTML or JSON); a run's
//! progress, notes and warnings go to stderr as they happen (`watch`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::contract;
use crate::report::Doc;
use crate::report::format::Format;

/// A line on stderr; like everything goodput prints, with every registered secret redacted.
macro_rules! say_err {
    ($($t:tt)*) => {
        eprintln!("{}", crate::secrets::redact(&format!($($t)*)))
    };
}

pub mod ab;
pub mod audit;
pub mod compare;
pub mod demo;
pub mod export;
pub mod gates;
pub mod history;
pub mod import;
pub mod init;
pub mod merge;
pub mod plan;
pub mod report;
pub mod run;
pub mod signals;
pub mod sim;
pub mod sweep;
pub mod tune;
mod watch;

pub use signals::failure_code;

/// A command's result as the seam shows it: a title, a document for people, a value for
/// programs, a page, and what a terminal shows around the document.
pub trait Shown {
    /// The page's title (HTML, and the document wrapped as a page).
    fn title(&self) -> String;
    /// The document for people; `full`: the whole of it (`--verbose`, and every format but
    /// the terminal).
    fn document(&self, full: bool) -> Doc;
    /// The command's value as JSON (field order kept).
    fn json(&self) -> String;
    /// The HTML page: by default the document wrapped as one; a command that draws figures
    /// (or wrote its page into a bundle) gives its own, and one that has none says why.
    fn page(&self) -> anyhow::Result<String> {
        Ok(document_page(self))
    }
    /// On a terminal, before the document (a repeat set's runs, one by one).
    fn terminal_before(&self) -> String {
        String::new()
    }
    /// On a terminal, after the document (where the bundle is); `verbose` as asked.
    fn terminal_after(&self, _verbose: bool) -> String {
        String::new()
    }
    /// A result that is text as it is, the same in every format ([`Text`]).
    fn as_text(&self) -> Option<&str> {
        None
    }
}

/// A result's document, whole, wrapped as a page under its title: the page of a command that
/// draws no figures.
pub fn document_page<S: Shown + ?Sized>(shown: &S) -> String {
    crate::report::format::html::wrap(&shown.title(), &shown.document(true))
}

/// A value as the JSON format writes it: pretty, field order kept, a newline at the end.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    crate::report::format::json::render(value)
}

/// Text a command prints as it is in every format (`init`'s note, `plan`'s lines, `export`'s
/// table of files, `sim`'s address).
#[derive(Debug)]
pub struct Text(pub String);

impl Shown for Text {
    fn title(&self) -> String {
        "goodput".into()
    }
    fn document(&self, _full: bool) -> Doc {
        Doc::default()
    }
    fn json(&self) -> String {
        self.0.clone()
    }
    fn as_text(&self) -> Option<&str> {
        Some(&self.0)
    }
}

/// The one rendering seam: a result in a format, as a string.
pub fn render(shown: &dyn Shown, format: Format, verbose: bool) -> anyhow::Result<Cow<'_, str>> {
    // Borrowed: a plan's million lines are not copied to be written.
    if let Some(text) = shown.as_text() {
        return Ok(Cow::Borrowed(text));
    }
    let full = verbose || format != Format::Terminal;
    Ok(match format {
        Format::Terminal => {
            shown.terminal_before()
                + &shown.document(full).terminal()
                + &shown.terminal_after(verbose)
        }
        Format::Markdown => shown.document(full).markdown(),
        Format::Html => shown.page()?,
        Format::Json => shown.json(),
    }
    .into())
}

/// Writes a result to stdout in a format (every registered secret redacted).
pub fn emit(shown: &dyn Shown, format: Format, verbose: bool) -> anyhow::Result<()> {
    say(&render(shown, format, verbose)?)?;
    Ok(())
}

/// What a command hands back: its result, the format and detail asked for, the lines for
/// stderr once the result is out (a failing gate, why a run gave up), and its status (or the
/// error it ends with, after its result).
pub struct Done {
    pub shown: Box<dyn Shown>,
    pub format: Format,
    pub verbose: bool,
    pub after: Vec<String>,
    pub status: anyhow::Result<ExitCode>,
}

impl Done {
    /// A result shown in `format`, ending in success.
    pub fn new(shown: impl Shown + 'static, format: Format, verbose: bool) -> Done {
        Done {
            shown: Box::new(shown),
            format,
            verbose,
            after: Vec::new(),
            status: Ok(ExitCode::SUCCESS),
        }
    }

    /// The same, ending in `status` (or the command's error) once the result is out.
    pub fn with_status(mut self, status: anyhow::Result<ExitCode>) -> Done {
        self.status = status;
        self
    }

    /// Text, ending in success.
    pub fn text(text: String) -> Done {
        Done::new(Text(text), Format::Terminal, false)
    }

    /// Writes the result, then the lines for stderr; gives the status.
    pub fn finish(self) -> anyhow::Result<ExitCode> {
        emit(&*self.shown, self.format, self.verbose)?;
        for l in &self.after {
            say_err!("{l}");
        }
        // Freeing a million records one by one takes the better part of a second; the
        // process ends here and the system takes the memory back at once.
        std::mem::forget(self.shown);
        self.status
    }
}

/// Where bundles go and how results are shown, for the commands that run load.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Directory that receives bundles.
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT")]
    pub out: PathBuf,
    /// No progress bar or notes; warnings still go to stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub format: FormatArgs,
    /// The whole report: also the contract card (fingerprints), requested/sent/reported token
    /// lengths, confidence intervals, each percentile's support and the dispatch lag split
    /// (always in report.html, report.md, and every `--format` but terminal).
    #[arg(long, short)]
    pub verbose: bool,
    /// Leave the CPUs' idle states alone and the dispatch thread at normal priority. By default
    /// a run asks the kernel (/dev/cpu_dma_latency, when writable) to keep idle CPUs quick to
    /// wake, and runs the thread that keeps the open-loop schedule at real-time priority 1 (when
    /// permitted), so the schedule is kept to the tens of microseconds; environment.json says
    /// whether each held.
    #[arg(long)]
    pub no_wake_latency_hold: bool,
}

/// How a command writes its result: one `--format` for every command. The older flags
/// (`--json`, `--markdown`, `--html`) still work and mean the same format.
#[derive(Debug, Default, clap::Args)]
pub struct FormatArgs {
    /// How to write the result: aligned text (the default), Markdown for a pull request, a
    /// self-contained HTML page (with figures where the command draws them), or the command's
    /// value as JSON.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Same as `--format markdown`.
    #[arg(long, conflicts_with_all = ["format", "json"])]
    pub markdown: bool,
    /// Same as `--format html`.
    #[arg(long, conflicts_with_all = ["format", "json", "markdown"])]
    pub html: bool,
}

impl FormatArgs {
    pub fn get(&self) -> Format {
        match (self.format, self.json, self.markdown, self.html) {
            (Some(f), ..) => f,
            (None, true, _, _) => Format::Json,
            (None, _, true, _) => Format::Markdown,
            (None, _, _, true) => Format::Html,
            _ => Format::Terminal,
        }
    }
}

/// A contract's (or simulator configuration's) text, size-limited; the error names the file.
pub(crate) fn read_contract(p: &Path) -> anyhow::Result<String> {
    crate::text::read_capped_string(p, crate::text::MAX_CONTRACT_BYTES)
        .with_context(|| format!("reading {}", p.display()))
}

/// Reads a bundle (recomputing its summary), saying on stderr what reading it noticed.
pub(crate) fn load_bundle(dir: &Path) -> anyhow::Result<crate::bundle::Loaded> {
    let b = crate::bundle::Bundle::load(dir)?;
    for w in &b.warnings {
        say_err!("warning: {w}");
    }
    Ok(b)
}

/// Changes to the contract for this run, written into its text before it is parsed (so the
/// bundle's resolved contract and every fingerprint hold what was run, and `command.json` lists
/// them). The same dotted keys as `sweep --vary`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Overrides {
    /// Set a contract field, e.g. `--set load.rate=5 --set slo.ttft_ms=300` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The server's base URL (`target.url`), e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub url: Option<String>,
    /// The model to ask for (`target.model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Open loop at this many requests per second (`load.rate`).
    #[arg(long, conflicts_with = "concurrency")]
    pub rate: Option<String>,
    /// Closed loop with this many users (`load.concurrency`).
    #[arg(long)]
    pub concurrency: Option<String>,
    /// Measured requests (`load.requests`).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<String>,
    /// Measured duration, e.g. 60s (`load.duration`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Further shorthands of one command (`run --shard`, `--start-at`): name and value.
    #[arg(skip)]
    pub more: Vec<(&'static str, String)>,
}

impl Overrides {
    /// The edits, shorthands first, then each `--set` in order; and how they read.
    pub(crate) fn edits(&self) -> anyhow::Result<(Vec<contract::edit::Edit>, Vec<String>)> {
        let mut edits = Vec::new();
        let mut said = Vec::new();
        for (name, v) in [
            ("url", &self.url),
            ("model", &self.model),
            ("rate", &self.rate),
            ("concurrency", &self.concurrency),
            ("requests", &self.requests),
            ("duration", &self.duration),
        ] {
            if let Some(v) = v {
                edits.extend(contract::edit::shorthand(name, v));
                said.push(format!("--{name} {v}"));
            }
        }
        for (name, v) in &self.more {
            edits.extend(contract::edit::shorthand(name, v));
            said.push(format!("--{name} {v}"));
        }
        for s in &self.set {
            edits.push(contract::edit::Edit::parse_set(s).map_err(anyhow::Error::msg)?);
            said.push(format!("--set {s}"));
        }
        Ok((edits, said))
    }

    /// The contract text with the changes made.
    pub(crate) fn apply(&self, src: &str, path: &Path) -> anyhow::Result<(String, Vec<String>)> {
        let (edits, said) = self.edits()?;
        let text = contract::edit::apply(src, &edits)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok((text, said))
    }
}

impl OutputArgs {
    /// How a run started from this command line writes and shows itself.
    pub(crate) fn run_options(&self) -> crate::run::RunOptions {
        crate::run::RunOptions {
            out_root: self.out.clone(),
            watch: if self.quiet {
                std::sync::Arc::new(watch::WarningsOnly)
            } else {
                std::sync::Arc::new(watch::Stderr::new())
            },
            argv: std::env::args().collect(),
            overrides: Vec::new(),
            bundle_dir: None,
            wake_latency_hold: !self.no_wake_latency_hold,
            signal: signals::CAUGHT.clone(),
            live: None,
            simulator: None,
        }
    }
}

/// Writes to stdout, returning the error (a closed pipe) instead of panicking like `print!`.
pub(crate) fn say(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(crate::secrets::redact(text).as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests;
