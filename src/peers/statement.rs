//! What another tool's saved result states, in goodput's terms: each figure's kind (its
//! definition), statistic and value, the settings it records and, where the file keeps them,
//! its per-request values. Each peer reader (`peers::vllm_bench::result`, …) fills a [`Statement`]; the
//! side-by-side (`peers::beside`) holds it against a goodput run.

use serde::Serialize;

use crate::stats::Dist;

/// How vLLM's client ends TTFT, in the words `audit` and `compare` use (the guide's import
/// page says the same; a test reads both).
pub const TTFT_BY_CHOICES: &str =
    "TTFT to the first event with a choice, a role-only chunk included";

/// What a metric is, by definition (the same definition under different names: vLLM's TPOT
/// and AIPerf's ITL are both `PerRequestGap`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Kind {
    /// Send → first token.
    Ttft,
    /// (E2E − TTFT) / (output tokens − 1), one value per request.
    PerRequestGap,
    /// E2E / output tokens, one value per request (the first token's wait included).
    TpotWithFirst,
    /// Every gap between consecutive chunks, pooled over requests, a chunk counted as one.
    ChunkGap,
    /// Send → last token.
    E2e,
    /// Completed requests per second of the whole benchmark.
    RequestsPerS,
    /// Output tokens per second of the whole benchmark.
    OutputTokensPerS,
    /// Input tokens per request, as the tool counted them.
    InputTokens,
    /// Output tokens per request, as the tool counted them.
    OutputTokens,
    /// Requests completed.
    Completed,
}

/// Per kind, one unit per request in the order sent (a request's values: one, or its gaps).
pub type Samples = Vec<(Kind, Vec<Vec<f64>>)>;

/// Which of a stream's events the other tool's client takes as a token's arrival.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Events {
    /// Chunks that carry generated text (goodput's own rule).
    #[default]
    Text,
    /// Every event with a choice, text or not (vLLM 0.32's `bench serve`, `openai` and
    /// `openai-chat` backends): the first, a role-only chunk included, ends TTFT; every later
    /// one, a finish chunk with an empty delta included, makes an ITL gap and moves the
    /// request's end (E2EL), which TPOT divides.
    Choices,
}

/// A statistic of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
    /// A single figure (a count, a rate).
    Value,
}

impl Stat {
    pub(crate) fn of(self, d: &Dist) -> f64 {
        match self {
            Stat::Mean | Stat::Value => d.mean,
            Stat::P50 => d.p50,
            Stat::P90 => d.p90,
            Stat::P99 => d.p99,
        }
    }
    /// The statistic of raw values (reordered), as [`Dist`] computes it.
    pub(crate) fn of_values(self, v: &mut [f64]) -> f64 {
        match self {
            Stat::Mean | Stat::Value => v.iter().sum::<f64>() / v.len().max(1) as f64,
            Stat::P50 | Stat::P90 | Stat::P99 => {
                v.sort_unstable_by(f64::total_cmp);
                let p = match self {
                    Stat::P50 => 50.0,
                    Stat::P90 => 90.0,
                    _ => 99.0,
                };
                crate::stats::percentile_sorted(v, p).unwrap_or(f64::NAN)
            }
        }
    }
    pub(crate) fn word(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "median",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Value => "",
        }
    }
}

/// One figure the other tool's result states: its name there, its kind, the statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct Stated {
    pub name: &'static str,
    pub kind: Kind,
    pub stat: Stat,
    pub value: f64,
}

/// What a peer format's reader says of one result, for the side-by-side.
#[derive(Debug, Clone, Default)]
pub struct Statement {
    pub figures: Vec<Stated>,
    /// Figures the result has that are not finite, non-negative numbers, by field (`NaN`).
    pub left_out: Vec<String>,
    /// The settings the result records, to hold against the run's contract: (what, value).
    pub load: Vec<(&'static str, String)>,
    /// Settings the result has that are absurd, negative, non-finite or of the wrong type:
    /// the workload cannot be known to be the same.
    pub unreadable: Vec<String>,
    /// Which of several benchmarks in the file was taken, when it held several.
    pub picked: Option<String>,
    /// The tool's duration starts one arrival gap before its first send (vLLM: its clock
    /// starts, then it waits the first gap; AIPerf: its profiling phase starts, then its rate
    /// timer waits one interval), so its throughput divides by that gap too.
    pub lead_gap: bool,
    /// The tool scales its drawn gaps so the last request leaves at exactly n / rate (vLLM's
    /// rule), so its request throughput is near the rate by construction.
    pub pinned_total: bool,
    /// Which events its client counts as tokens' arrivals.
    pub events: Events,
    /// Its per-request values where the file keeps them (vLLM's `--save-detailed`): per kind,
    /// one unit per successful request in the order sent (a request's values: one, or its
    /// gaps), for the noise on each row.
    pub samples: Samples,
    /// Each of those requests' send and end, s on its own clock (empty when not kept): its
    /// busy periods, which the noise resamples.
    pub sample_spans: Vec<(f64, f64)>,
    /// The rate its requests were sent at, as measured (vLLM's `start_times`), req/s.
    pub sent_rps: Option<(f64, usize)>,
}

/// The rate requests were sent at, from their send times (seconds on one clock, any order):
/// (requests − 1) over the first to the last send, and how many; `None` for fewer than two
/// sends or none apart.
pub fn sent_rate(starts: impl IntoIterator<Item = f64>) -> Option<(f64, usize)> {
    let mut starts: Vec<f64> = starts.into_iter().filter(|t| t.is_finite()).collect();
    starts.sort_by(f64::total_cmp);
    let (first, last) = (*starts.first()?, *starts.last()?);
    (starts.len() > 1 && last > first)
        .then(|| ((starts.len() - 1) as f64 / (last - first), starts.len()))
}
