//! `run --fail-on`: the conditions a CI pipeline turns into exit statuses, judged on a run's
//! (or a repeat set's) summaries. The command's, not the run's: `run` measures, the command
//! decides what its exit status says.

use crate::analyze::Summary;

/// A condition `goodput run --fail-on` turns into its own exit status, for CI pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Gate {
    /// The run is INVALID (any run of a repeat set).
    Invalid,
    /// The SLO is not shown met (any run): exit 5 when it is missed (conclusively or at the
    /// point estimates), 8 when it is met but the sample does not yet support the pass.
    Slo,
    /// A prediction did not hold, or could not be measured (any run).
    Prediction,
    /// The outputs are not those of `--baseline` (its `[quality]` tolerances).
    Quality,
    /// With `--history STORE`: the run, added there, starts a change for the worse in its
    /// series (`goodput history`).
    Regression,
}

impl Gate {
    /// The exit status when this gate fails (after 3, "gave up"): documented in `run --help`.
    /// `slo` fails with 8 instead when the SLO is met but not yet supported.
    pub fn exit_code(self) -> u8 {
        match self {
            Gate::Invalid => 4,
            Gate::Slo => 5,
            Gate::Prediction => 6,
            Gate::Quality => 7,
            Gate::Regression => 10,
        }
    }
}

/// `--fail-on slo`'s status when every run met its SLO but some pass is not yet supported by
/// its sample: not a miss (5), and not a pass.
pub const EXIT_SLO_NOT_SUPPORTED: u8 = 8;

/// A gate that failed: its exit status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedGate {
    pub gate: Gate,
    pub exit: u8,
    pub why: String,
}

/// The gates that fail for these runs, each with why, in the order of [`Gate`] (the first
/// sets the exit status). `quality` is the check against a baseline, when one was given.
pub fn failed_gates(
    gates: &[Gate],
    runs: &[&Summary],
    quality: Option<&crate::compare::QualityGuard>,
) -> Vec<FailedGate> {
    let mut out = Vec::new();
    let mut gates = gates.to_vec();
    gates.sort();
    gates.dedup();
    for g in gates {
        let mut exit = g.exit_code();
        let why: Vec<String> = match g {
            // Judged by the command, against the store (`command::run`).
            Gate::Regression => Vec::new(),
            Gate::Invalid => runs
                .iter()
                .filter(|s| s.validity.verdict == crate::analyze::ValidityVerdict::Invalid)
                .map(|s| s.validity.reasons.first().cloned().unwrap_or_default())
                .collect(),
            Gate::Slo => {
                let (missed, why) = slo_failures(runs);
                if !missed {
                    exit = EXIT_SLO_NOT_SUPPORTED;
                }
                why
            }
            Gate::Prediction => runs
                .iter()
                .flat_map(|s| match &s.predictions {
                    None => vec!["no prediction was made (--predict, [prediction])".to_owned()],
                    Some(p) => p
                        .outcomes
                        .iter()
                        .filter(|o| o.held != Some(true))
                        .map(|o| match o.measured {
                            Some(m) => format!("{}: measured {}", o.text, crate::report::num(m)),
                            None => format!("{}: not measured", o.text),
                        })
                        .collect(),
                })
                .collect(),
            Gate::Quality => match quality {
                Some(q) if q.held() => Vec::new(),
                Some(q) => vec![format!("{}: {}", q.status, q.detail)],
                None => vec!["no --baseline to hold the outputs against".to_owned()],
            },
        };
        if !why.is_empty() {
            out.push(FailedGate {
                gate: g,
                exit,
                why: why.join("; "),
            });
        }
    }
    out
}

/// `--fail-on slo`: whether any run missed its SLO (a miss anywhere is a miss, 5; otherwise a
/// pass some run cannot support, 8), and why for each run that did not pass.
fn slo_failures(runs: &[&Summary]) -> (bool, Vec<String>) {
    // An agent task's own SLO (`slo.task_ms`) is judged beside the requests'.
    let task = |s: &Summary| s.steady.tasks.as_ref().and_then(|t| t.verdict());
    let missed = runs.iter().any(|s| {
        let requests = match &s.steady.slo {
            Some(x) => !x.verdict.met(),
            None => task(s).is_none(),
        };
        requests || task(s).is_some_and(|(met, _)| !met)
    });
    let task_misses: Vec<String> = runs
        .iter()
        .filter_map(|s| task(s))
        .filter(|(met, _)| !met)
        .map(|(_, why)| why)
        .collect();
    let why = runs
        .iter()
        .filter(|s| s.steady.slo.is_some() || task(s).is_none())
        .filter_map(|s| match &s.steady.slo {
            Some(slo) if slo.verdict == crate::analyze::SloVerdict::Met => None,
            Some(slo) if slo.verdict.met() => Some(format!(
                "the SLO is met, but not yet supported at {} confidence: {} (raise load.requests, or judge a lower slo.percentile or measurement.confidence)",
                crate::analyze::claims::percent(slo.confidence),
                slo.not_yet().unwrap_or_default()
            )),
            Some(slo) => Some(format!(
                "SLO {}: attainment {:.1}% (target {:.0}%){}",
                slo.verdict.words(slo.confidence),
                slo.attainment * 100.0,
                slo.attainment_target * 100.0,
                slo.per_metric
                    .iter()
                    .filter(|m| !m.pass)
                    .map(|m| format!(
                        ", {} {} ms",
                        m.metric,
                        m.value_ms.map_or("(failed requests)".into(), crate::report::num)
                    ))
                    .collect::<String>()
            )),
            None => Some("the contract has no [slo]".to_owned()),
        })
        .chain(task_misses)
        .collect();
    (missed, why)
}
