//! How a run shows itself while it runs: progress and warnings on stderr, warnings only
//! (`--quiet`), or a dashboard that holds them until it closes.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::signals::CAUGHT;

/// Shows a run's progress and warnings on stderr: on a terminal a bar redrawn in place,
/// otherwise (CI, a log file) one line every `GOODPUT_PROGRESS_SECS` (10 s).
#[derive(Debug)]
pub(crate) struct Stderr {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
    /// `None` on a terminal; else the interval between lines and when the next is due.
    lines: Option<(Duration, std::sync::Mutex<Duration>)>,
}

impl Stderr {
    pub(crate) fn new() -> Stderr {
        use std::io::IsTerminal;
        let every = std::env::var("GOODPUT_PROGRESS_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(Duration::from_secs(10), Duration::from_secs_f64);
        Stderr {
            bar: std::sync::Mutex::new(None),
            lines: (!std::io::stderr().is_terminal())
                .then(|| (every, std::sync::Mutex::new(every))),
        }
    }
}

impl crate::run::Watch for Stderr {
    fn progress(&self, p: &crate::run::Progress) {
        match &self.lines {
            Some((every, next)) => {
                let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                if p.elapsed >= *next {
                    say_err!("{}", p.line());
                    *next += *every;
                }
            }
            None => {
                let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
                let b = bar.get_or_insert_with(|| {
                    let b = match p.planned {
                        Some(n) => indicatif::ProgressBar::new(n),
                        None => indicatif::ProgressBar::new_spinner(),
                    };
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                        .progress_chars("=> "),
                    );
                    b
                });
                b.set_position(p.finished);
                b.set_message(format!(
                    "errors {} · TTFT p50 {:.1} ms p99 {:.1} ms",
                    p.errors, p.ttft_p50_ms, p.ttft_p99_ms
                ));
            }
        }
    }

    fn finished(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
        if let Some((every, next)) = &self.lines {
            *next.lock().unwrap_or_else(|e| e.into_inner()) = *every;
        }
    }

    fn warn(&self, message: &str) {
        say_err!("warning: {message}");
    }

    fn note(&self, message: &str) {
        say_err!("note: {message}");
    }

    fn line(&self, message: &str) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            b.suspend(|| say_err!("{message}"));
        } else {
            say_err!("{message}");
        }
    }
}

/// `--quiet`: no progress, but every warning still reaches stderr (an unreachable telemetry
/// page, a client falling behind) — quiet is for logs, not for hiding what went wrong.
#[derive(Debug)]
pub(crate) struct WarningsOnly;

impl crate::run::Watch for WarningsOnly {
    fn warn(&self, message: &str) {
        say_err!("warning: {message}");
    }
}

/// Runs `run` with a dashboard on the terminal, fed by `board`: its warnings and notes are
/// held until the dashboard has closed; its `q` or Ctrl-C stops the run as a signal would
/// (a live demo's `q` instead ends its load gracefully, through the board's control). The
/// terminal is restored however the run ends.
pub(crate) async fn watched<F, Fut>(
    board: Arc<crate::live::Board>,
    title: String,
    mut options: crate::run::RunOptions,
    cancel: CancellationToken,
    run: F,
) -> anyhow::Result<crate::run::RunResult>
where
    F: FnOnce(crate::run::RunOptions, CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<crate::run::RunResult>>,
{
    let later = Arc::new(Later::default());
    options.watch = later.clone();
    options.live = Some(board.clone());
    // A live demo's `q` and Ctrl-C (keys, not signals) end its load through the board's
    // control; a run's stop it as a signal would.
    if board.control().is_none() {
        let (quit, cancel) = (board.quit.clone(), cancel.clone());
        let b = board.clone();
        tokio::spawn(async move {
            quit.cancelled().await;
            let _ = CAUGHT.set(match b.quit_by.get() {
                Some(&"Ctrl-C") => "SIGINT",
                _ => "the dashboard's q",
            });
            cancel.cancel();
        });
    }
    let dash = crate::live::tui::Dashboard::start(board, title)?;
    let r = run(options, cancel).await;
    drop(dash);
    later.say();
    r
}

/// Holds a run's warnings and notes while the dashboard has the terminal; says them after.
#[derive(Debug, Default)]
struct Later(std::sync::Mutex<Vec<String>>);

impl Later {
    fn say(&self) {
        for m in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            say_err!("{m}");
        }
    }
}

impl crate::run::Watch for Later {
    fn warn(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("warning: {message}"));
    }

    fn note(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("note: {message}"));
    }

    fn line(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.to_owned());
    }
}
