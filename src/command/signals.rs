//! Signals and exit statuses: the one shutdown path (SIGINT, SIGTERM, SIGHUP), and the status
//! a command ends with.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// The signal that interrupted this process, if one did (see [`cancel_on_signals`]).
pub(crate) static CAUGHT: std::sync::LazyLock<Arc<OnceLock<&'static str>>> =
    std::sync::LazyLock::new(Arc::default);

/// The signals goodput treats as "stop now, keep everything": Ctrl-C, and what `timeout`,
/// `docker stop`, Kubernetes, systemd and CI cancellation send.
const STOP_SIGNALS: [(&str, i32); 3] = [
    ("SIGINT", libc::SIGINT),
    ("SIGTERM", libc::SIGTERM),
    ("SIGHUP", libc::SIGHUP),
];

/// The one shutdown path. SIGINT, SIGTERM and SIGHUP each cancel the token: the run stops
/// sending, marks its requests in flight interrupted, writes every record and the summary,
/// names the signal in the bundle and stops a server it launched. A second signal ends the
/// process at once (the records already written are kept; a launched server's guard stops it).
pub(crate) fn cancel_on_signals(in_flight: &'static str) -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    let mut streams = stop_signal_streams();
    tokio::spawn(async move {
        loop {
            let waits = streams.iter_mut().map(|(name, s)| {
                let name: &'static str = name;
                Box::pin(async move { s.recv().await.map(|()| name) })
            });
            let (got, _, _) = futures_util::future::select_all(waits).await;
            let Some(name) = got else { return };
            if CAUGHT.set(name).is_err() {
                say_err!("{name} again: stopping at once; the records already written are kept");
                std::process::exit(signal_exit(name).into());
            }
            say_err!("interrupted by {name}: finishing {in_flight}… (again to stop at once)");
            on_signal.cancel();
        }
    });
    cancel
}

/// A stream per stop signal, each with its name (one that cannot be handled is said and left).
pub(crate) fn stop_signal_streams() -> Vec<(&'static str, tokio::signal::unix::Signal)> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut streams = Vec::new();
    for (name, n) in STOP_SIGNALS {
        match signal(SignalKind::from_raw(n)) {
            Ok(s) => streams.push((name, s)),
            Err(e) => say_err!("warning: cannot handle {name}: {e}"),
        }
    }
    streams
}

/// 128 + the signal's number: the shell's convention for a process a signal ended.
fn signal_exit(name: &str) -> u8 {
    let n = STOP_SIGNALS
        .iter()
        .find(|(s, _)| *s == name)
        .map_or(libc::SIGINT, |(_, n)| *n);
    128 + n as u8
}

/// Exit status when the run stopped on its own because the target failed (every request
/// that reached it failed, or it stopped answering).
const EXIT_GAVE_UP: u8 = 3;

/// Exit status when the progress guard stopped the load: the server fell hopelessly behind
/// (docs/guide/safety.md).
pub(crate) const EXIT_GUARD: u8 = 9;

/// How a run stopped on its own, for its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelfStop {
    /// It did not (or only once its verdict was decided, which is a result).
    No,
    /// It gave up: the target failed.
    GaveUp,
    /// The progress guard stopped it.
    Guard,
}

impl SelfStop {
    /// How `r` stopped on its own.
    pub(crate) fn of(r: &crate::run::RunResult) -> SelfStop {
        if r.aborted.is_some() {
            SelfStop::GaveUp
        } else if r
            .summary
            .load_end
            .as_ref()
            .is_some_and(|l| l.guard.is_some())
        {
            SelfStop::Guard
        } else {
            SelfStop::No
        }
    }
}

/// 128 + the signal when one interrupted the run, [`EXIT_GAVE_UP`] when it gave up,
/// [`EXIT_GUARD`] when the progress guard stopped it, else success.
pub(crate) fn exit_code(interrupted: bool, stopped: SelfStop) -> ExitCode {
    match CAUGHT.get() {
        Some(name) if interrupted => ExitCode::from(signal_exit(name)),
        _ if stopped == SelfStop::GaveUp => ExitCode::from(EXIT_GAVE_UP),
        _ if stopped == SelfStop::Guard => ExitCode::from(EXIT_GUARD),
        _ if interrupted => ExitCode::from(signal_exit("SIGINT")),
        _ => ExitCode::SUCCESS,
    }
}

/// The exit status of a command that failed: 128 + the signal if one interrupted it (an
/// interrupted wait is an error, "nothing was measured"), else 1.
pub fn failure_code() -> ExitCode {
    CAUGHT
        .get()
        .map_or(ExitCode::FAILURE, |name| ExitCode::from(signal_exit(name)))
}
