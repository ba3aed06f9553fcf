//! Per-request metrics, one definition each, derived from one record under the contract's
//! boundaries (the latency origin, the token source): TTFT, TTFO, E2E, TPOT, ITL per chunk and
//! per token, reasoning split from the answer, dispatch lag; and whether a request meets its
//! SLO. The summary, the live view, `compare` and `export` all read them from here.

use super::*;

/// Per-request metrics, derived from one record under the contract's boundaries. The latencies
/// are read through methods of their names (`Option<f64>`); each is kept in 8 bytes rather than
/// an `Option<f64>`'s 16, which was 48 MB of a million-request report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestMetrics {
    ttft_ms: Ms,
    e2e_ms: Ms,
    tpot_ms: Ms,
    dispatch_lag_ms: Ms,
    pub output_tokens: u32,
    pub output_from_usage: bool,
    pub input_tokens: u32,
    ttfo_ms: Ms,
    tpot_answer_ms: Ms,
    /// Reasoning tokens among the output tokens, when the request reasoned: the server's
    /// `completion_tokens_details.reasoning_tokens` when the token source is usage and it
    /// reported them, else the client's count of the reasoning chunks.
    pub reasoning_tokens: Option<u32>,
    pub reasoning_from_usage: bool,
    /// A tool dataset's request: whether its calls were graded correct (`None`: no tools, or
    /// not graded).
    pub tool_correct: Option<bool>,
}

/// A latency, ms, or none (NaN: no latency this module derives is NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ms(f64);

impl Default for Ms {
    fn default() -> Ms {
        Ms(f64::NAN)
    }
}

impl From<Option<f64>> for Ms {
    fn from(v: Option<f64>) -> Ms {
        Ms(v.unwrap_or(f64::NAN))
    }
}

impl Ms {
    fn get(self) -> Option<f64> {
        (!self.0.is_nan()).then_some(self.0)
    }
}

impl RequestMetrics {
    pub fn ttft_ms(&self) -> Option<f64> {
        self.ttft_ms.get()
    }
    pub fn e2e_ms(&self) -> Option<f64> {
        self.e2e_ms.get()
    }
    /// (E2E − TTFT) / (output tokens − tokens in the first text chunk): the mean time per
    /// token after the first chunk, exact however the server groups tokens into chunks.
    pub fn tpot_ms(&self) -> Option<f64> {
        self.tpot_ms.get()
    }
    pub fn dispatch_lag_ms(&self) -> Option<f64> {
        self.dispatch_lag_ms.get()
    }
    /// Time to first output: to the first *answer* token, after any reasoning streamed before
    /// it; TTFT when the first token was an answer token. `None`: no answer came.
    pub fn ttfo_ms(&self) -> Option<f64> {
        self.ttfo_ms.get()
    }
    /// (E2E − TTFO) / (answer tokens − tokens in the first answer chunk): TPOT of the answer
    /// alone; TPOT when there was no reasoning.
    pub fn tpot_answer_ms(&self) -> Option<f64> {
        self.tpot_answer_ms.get()
    }
}

pub(super) fn ms(a: u64, b: u64) -> f64 {
    (b as f64 - a as f64) / 1000.0
}

/// Where a request's latency counts from: its intended send (open loop; the actual send when
/// it has none) or its actual send.
pub(super) fn origin_us(r: &Record, origin: LatencyOrigin) -> Option<u64> {
    match origin {
        LatencyOrigin::Intended => r.intended_us.or(r.sent_us),
        LatencyOrigin::Sent => r.sent_us,
    }
}

/// Derives one request's metrics. Output tokens come from the token source (server `usage`
/// when reported, else the client's count); the first chunk's share of them is its share of
/// the client's count, so TPOT stays exact when usage and the client count the same tokens
/// and is scaled, not skewed, when they do not.
pub fn request_metrics(r: &Record, origin: LatencyOrigin, source: TokenSource) -> RequestMetrics {
    let o = origin_us(r, origin);
    let (output_tokens, output_from_usage) = match (source, r.usage_completion_tokens) {
        (TokenSource::Usage, Some(u)) => (u, true),
        _ => (r.client_output_tokens, false),
    };
    let ttft = o.zip(r.first_token_us).map(|(o, f)| ms(o, f));
    let e2e = o.zip(r.end_us).map(|(o, e)| ms(o, e));
    let counted: u32 = r.chunks.tokens();
    let first = match r.chunks.first() {
        Some((_, k)) if counted > 0 => f64::from(k) * f64::from(output_tokens) / f64::from(counted),
        _ => 1.0,
    };
    let after_first = f64::from(output_tokens) - first;
    let tpot = match (ttft, e2e) {
        // At least one token after the first chunk (a rounding hair below one still counts).
        (Some(t), Some(e)) if after_first > 0.999 => Some((e - t) / after_first),
        _ => None,
    };
    let reasoning = reasoning_split(r, source, output_tokens, counted);
    let ttfo = match reasoning {
        Some(ref x) => o.zip(x.first_answer_us).map(|(o, f)| ms(o, f)),
        None => ttft,
    };
    let tpot_answer = match reasoning {
        Some(ref x) => {
            let after = f64::from(output_tokens) - f64::from(x.tokens) - x.first_answer_tokens;
            match (ttfo, e2e) {
                (Some(t), Some(e)) if after > 0.999 => Some((e - t) / after),
                _ => None,
            }
        }
        None => tpot,
    };
    RequestMetrics {
        ttft_ms: ttft.into(),
        e2e_ms: e2e.into(),
        tpot_ms: tpot.into(),
        dispatch_lag_ms: dispatch_lag(r)[0].into(),
        output_tokens,
        output_from_usage,
        input_tokens: r.usage_prompt_tokens.unwrap_or(r.input_tokens_planned),
        ttfo_ms: ttfo.into(),
        tpot_answer_ms: tpot_answer.into(),
        reasoning_from_usage: reasoning.as_ref().is_some_and(|x| x.from_usage),
        reasoning_tokens: reasoning.map(|x| x.tokens),
        tool_correct: r.tool_grade.as_ref().map(|g| g.correct()),
    }
}

/// Adds a record's inter-token latencies to the tallies. ITL per chunk: the gaps between
/// consecutive text-carrying chunks. ITL per token: a chunk of k tokens after a gap g gives k
/// gaps of g/k (a chunk counted with no token adds its gap to the next one's).
pub fn add_itl(r: &Record, per_chunk: &mut Tally, per_token: &mut Tally) {
    let mut chunks = r.chunks.iter();
    let Some((mut since, _)) = chunks.next() else {
        return;
    };
    let mut last = since;
    for (t, k) in chunks {
        per_chunk.add_us(t as i64 - last as i64);
        last = t;
        if k == 0 {
            continue;
        }
        if k == 1 {
            per_token.add_us(t as i64 - since as i64);
        } else {
            per_token.add_ms(ms(since, t) / f64::from(k), k as usize);
        }
        since = t;
    }
}

/// ITL per chunk and per token of many records. A record streamed a token a chunk has the
/// same gaps in both: they are tallied once, in `both`.
#[derive(Debug, Default)]
pub struct Itl {
    both: Tally,
    per_chunk: Tally,
    per_token: Tally,
}

impl Itl {
    pub fn add(&mut self, r: &Record) {
        if r.chunks.one_token_each() {
            for gap in r.chunks.gaps_us() {
                self.both.add_us(gap);
            }
        } else {
            add_itl(r, &mut self.per_chunk, &mut self.per_token);
        }
    }

    pub fn per_chunk(&self) -> Tally {
        self.both.merged(&self.per_chunk)
    }

    pub fn per_token(&self) -> Tally {
        self.both.merged(&self.per_token)
    }
}

/// How a request that reasoned split its output: reasoning tokens, and where the answer began.
pub(super) struct ReasoningSplit {
    tokens: u32,
    from_usage: bool,
    /// Arrival of the first answer chunk (`None`: the answer never came).
    first_answer_us: Option<u64>,
    /// Tokens in that chunk, in the output count's units.
    first_answer_tokens: f64,
}

/// The reasoning part of a request's output, `None` when it did not reason (no reasoning chunk
/// streamed and no reasoning tokens reported). Chunk token counts are the client's; like
/// TPOT's first chunk they are scaled into the output count's units.
/// The request streamed reasoning or the server counted some: it has a [`ReasoningSplit`].
pub(super) fn reasons(r: &Record) -> bool {
    (r.reasoning_chunks > 0 && !r.chunks.is_empty())
        || r.usage_reasoning_tokens.is_some_and(|u| u > 0)
}

pub(super) fn reasoning_split(
    r: &Record,
    source: TokenSource,
    output_tokens: u32,
    counted: u32,
) -> Option<ReasoningSplit> {
    if !reasons(r) {
        return None;
    }
    let rc = (r.reasoning_chunks as usize).min(r.chunks.len());
    let usage = r.usage_reasoning_tokens.filter(|&u| u > 0);
    let scale = if counted > 0 {
        f64::from(output_tokens) / f64::from(counted)
    } else {
        1.0
    };
    let client: u32 = r.chunks.tokens_in_first(rc);
    let (tokens, from_usage) = match (source, usage) {
        (TokenSource::Usage, Some(u)) => (u, true),
        _ => ((f64::from(client) * scale).round() as u32, false),
    };
    let first = r.chunks.get(rc);
    Some(ReasoningSplit {
        tokens: tokens.min(output_tokens),
        from_usage,
        first_answer_us: first.map(|c| c.0),
        first_answer_tokens: first.map_or(0.0, |c| f64::from(c.1) * scale),
    })
}

/// Dispatch lag and its two parts, ms: actual − intended send; when the dispatch thread woke −
/// intended; actual send − wake. Open loop only; the parts need `dispatched_us`.
pub(super) fn dispatch_lag(r: &Record) -> [Option<f64>; 3] {
    let Some(i) = r.intended_us else {
        return [None; 3];
    };
    let (d, s) = (r.dispatched_us, r.sent_us);
    [
        s.map(|s| ms(i, s)),
        d.map(|d| ms(i, d)),
        d.zip(s).map(|(d, s)| ms(d, s)),
    ]
}

/// The figures of one slice of a run's requests (a replica's, a live demo's segment): how many,
/// how many succeeded, TTFT and E2E distributions of those, and the share of the slice that met
/// every SLO threshold (`None` without an SLO, or an empty slice).
#[derive(Debug, Default)]
pub struct SliceFigures {
    pub requests: u64,
    pub ok: u64,
    pub ttft: Option<Dist>,
    pub e2e: Option<Dist>,
    pub attainment: Option<f64>,
}

impl SliceFigures {
    pub fn of(c: &Contract, slice: &[&Record]) -> SliceFigures {
        let (origin, source) = (c.measurement.latency_origin, c.measurement.output_tokens);
        let metrics: Vec<RequestMetrics> = slice
            .iter()
            .filter(|r| r.is_ok())
            .map(|r| request_metrics(r, origin, source))
            .collect();
        let met = metrics.iter().filter(|m| meets_slo(c, m)).count();
        SliceFigures {
            requests: slice.len() as u64,
            ok: metrics.len() as u64,
            ttft: Dist::of(metrics.iter().filter_map(|m| m.ttft_ms()).collect()),
            e2e: Dist::of(metrics.iter().filter_map(|m| m.e2e_ms()).collect()),
            attainment: (c.slo.is_set() && !slice.is_empty())
                .then(|| met as f64 / slice.len() as f64),
        }
    }
}

/// Whether a successful request met every SLO threshold. A threshold whose metric does not
/// exist for the request (TTFT without streaming) is not met; TPOT of an output that came in
/// one chunk is.
/// Whether one request's metrics are within every SLO threshold (goodput counts those).
pub fn meets_slo(c: &Contract, m: &RequestMetrics) -> bool {
    within_slo(&c.slo, m)
}

/// [`meets_slo`] for a recorded request: against its traffic class's SLO when it has one.
pub fn record_meets_slo(c: &Contract, r: &Record, m: &RequestMetrics) -> bool {
    within_slo(slo_of(c, r), m)
}

/// The SLO a request is judged by: its class's (`[[class]]`), else the contract's.
pub fn slo_of<'a>(c: &'a Contract, r: &Record) -> &'a crate::contract::Slo {
    r.class
        .as_deref()
        .and_then(|n| c.classes.iter().find(|k| k.name == n))
        .map_or(&c.slo, |k| k.slo_or(&c.slo))
}

pub(super) fn within_slo(slo: &crate::contract::Slo, m: &RequestMetrics) -> bool {
    let within =
        |thr: Option<crate::contract::Millis>, v: Option<f64>, absent_ok: bool| match (thr, v) {
            (None, _) => true,
            (Some(t), Some(v)) => v <= t.0,
            (Some(_), None) => absent_ok,
        };
    // A tool request is on time and right, or it does not count (unless the contract says
    // correctness is reported beside the latency only).
    let right = slo.correct_tool_calls == Some(false) || m.tool_correct != Some(false);
    right
        && within(slo.ttft_ms, m.ttft_ms(), false)
        && within(slo.ttfo_ms, m.ttfo_ms(), false)
        && within(slo.tpot_ms, m.tpot_ms(), true)
        && within(slo.e2e_ms, m.e2e_ms(), false)
}
