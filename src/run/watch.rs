//! What a run tells whoever started it while it runs: the [`Watch`] trait (progress every
//! 200 ms, warnings, notes), its silent implementation and the progress line's text.

use crate::record::writer::LiveView;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a run tells whoever started it, while it runs: its progress (every 200 ms) and
/// warnings. The library prints nothing; the command line shows these on stderr.
pub trait Watch: Send + Sync + std::fmt::Debug {
    fn progress(&self, _p: &Progress) {}
    /// The run (or one run of a repeat set) is over: clear what `progress` drew.
    fn finished(&self) {}
    fn warn(&self, _message: &str) {}
    /// Something the user should know that is not wrong (a shard waiting for its start).
    fn note(&self, _message: &str) {}
    /// A result as soon as it is known (a sweep's point when it finishes), one line.
    fn line(&self, _message: &str) {}
}

/// Watches nothing (tests, library use).
#[derive(Debug, Default)]
pub struct Silent;

impl Watch for Silent {}

/// A run's progress at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub elapsed: Duration,
    pub finished: u64,
    /// Requests planned (warm-up and measured), when a count bounds them.
    pub planned: Option<u64>,
    pub errors: u64,
    /// TTFT percentiles so far (all phases, from the actual send; approximate).
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
}

impl Progress {
    /// One line: requests done of planned, the completion rate so far, errors, TTFT, and the
    /// time left at that rate.
    pub fn line(&self) -> String {
        progress_line(
            self.elapsed,
            self.finished,
            self.planned,
            self.errors,
            self.ttft_p50_ms,
            self.ttft_p99_ms,
        )
    }
}

/// One progress line: requests done of planned, the completion rate so far, errors, TTFT, and
/// the time left at that rate.
fn progress_line(
    elapsed: Duration,
    finished: u64,
    planned: Option<u64>,
    errors: u64,
    p50: f64,
    p99: f64,
) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        finished as f64 / secs
    } else {
        0.0
    };
    let (of, eta) = match planned {
        // Past the plan: the load stays on (drain) until the last measured request ends, then
        // the quality probes go.
        Some(n) if finished > n => (
            format!(
                "{n}/{n} requests, finishing (+{} after the plan)",
                finished - n
            ),
            String::new(),
        ),
        Some(n) => (
            format!(
                "{finished}/{n} requests ({:.0}%)",
                finished as f64 / n.max(1) as f64 * 100.0
            ),
            if rate > 0.0 && n > finished {
                format!(" · ETA {:.0} s", (n - finished) as f64 / rate)
            } else {
                String::new()
            },
        ),
        None => (format!("{finished} requests"), String::new()),
    };
    let ttft = if p50.is_finite() {
        format!(" · TTFT p50 {p50:.1} ms p99 {p99:.1} ms")
    } else {
        String::new()
    };
    format!(
        "progress {:.0} s: {of} · {rate:.1} req/s · {errors} errors{ttft}{eta}",
        secs
    )
}

/// Tells the watcher the progress, and applies the fail-fast rule, until `done`.
pub(super) async fn monitor(
    live: LiveView,
    planned: Option<u64>,
    watch: Arc<dyn Watch>,
    done: CancellationToken,
) {
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (finished, errors, p50, p99) = {
            let l = live.lock().unwrap_or_else(|p| p.into_inner());
            let h = &l.ttft_us;
            let q = |x: f64| {
                if h.is_empty() {
                    f64::NAN
                } else {
                    h.value_at_quantile(x) as f64 / 1000.0
                }
            };
            (l.finished, l.errors, q(0.5), q(0.99))
        };
        watch.progress(&Progress {
            elapsed: started.elapsed(),
            finished,
            planned,
            errors,
            ttft_p50_ms: p50,
            ttft_p99_ms: p99,
        });
    }
    watch.finished();
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn progress_lines_say_done_rate_errors_and_time_left() {
        assert_eq!(
            progress_line(Duration::from_secs(10), 200, Some(600), 3, 71.06, 202.4),
            "progress 10 s: 200/600 requests (33%) · 20.0 req/s · 3 errors · TTFT p50 71.1 ms p99 202.4 ms · ETA 20 s"
        );
        assert_eq!(
            progress_line(
                Duration::from_secs(50),
                885,
                Some(750),
                0,
                f64::NAN,
                f64::NAN
            ),
            "progress 50 s: 750/750 requests, finishing (+135 after the plan) · 17.7 req/s · 0 errors"
        );
        // Before the first token, and with a duration-bound run (no plan length).
        assert_eq!(
            progress_line(Duration::from_secs(2), 0, None, 0, f64::NAN, f64::NAN),
            "progress 2 s: 0 requests · 0.0 req/s · 0 errors"
        );
    }
}
