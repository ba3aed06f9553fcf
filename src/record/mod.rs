//! The per-request record: one JSON line in `requests.jsonl`, written as the request finishes.
//! It holds raw facts only (times, counts, outcome); every metric is derived from it in
//! `analyze`. Times are microseconds on the client's monotonic clock since the run started.

pub mod chunks;
pub mod recount;
#[doc(hidden)]
pub mod synth;
pub mod writer;

use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use crate::api::timing::{EngineTiming, TimingSource};
pub use chunks::Chunks;

use crate::plan::{Phase, PlannedRequest};

/// One request, as the client saw it.
///
/// The fields most records leave empty (sessions, tasks, classes, stages, failures, quality
/// text, …) live in one [`Rare`] behind a box that is allocated only when one of them is set,
/// and read as if they were the record's own (`record.class`, through `Deref`): a record of a
/// plain run is then 328 bytes rather than 592, which is 264 MB of a million-request bundle's
/// report. In `requests.jsonl` they are keys of the record like the others (written after them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the plan.
    pub index: u64,
    /// Run phase the request belongs to.
    pub phase: Phase,
    /// `X-Request-Id` sent with the request (run id and index), to join with server logs.
    pub request_id: String,
    /// The W3C trace id sent with it (`traceparent`), which the engine's spans of it carry;
    /// absent with `measurement.traces.propagate = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// When the schedule said to send it (open loop); absent in closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intended_us: Option<u64>,
    /// When the open-loop dispatcher woke to send it; absent in closed loop. `sent_us` minus
    /// this is the time the request waited for the client's async runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched_us: Option<u64>,
    /// When it was actually sent; absent when it never was (client-dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_us: Option<u64>,
    /// Arrival of the first chunk that carried generated text (role-only and empty chunks do
    /// not count). Non-streaming: absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_us: Option<u64>,
    /// End of the response (`[DONE]`, end of body, or the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_us: Option<u64>,
    /// Every text-carrying chunk: arrival µs and tokens in it (client count), compactly
    /// encoded ([`Chunks`]).
    #[serde(default, skip_serializing_if = "Chunks::is_empty")]
    pub chunks: Chunks,
    /// Arrival µs of every event that carried a choice but no text (OpenAI's role-only first
    /// chunk, a finish chunk with an empty delta, an empty `content` for a special token): not
    /// tokens, but events another tool's client counts (vLLM's benchmark starts TTFT at the
    /// first event with a choice and takes an ITL gap at every one after it), kept so that its
    /// definitions can be recomputed exactly. Usually none, one or two a request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bare_us: Vec<u64>,
    /// Prompt length as sent, in the workload tokenizer's tokens (see the summary's lengths).
    pub input_tokens_planned: u32,
    /// Output length the plan asked for (`max_tokens`).
    pub output_tokens_planned: u32,
    /// Server-reported prompt tokens (`usage.prompt_tokens`), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_prompt_tokens: Option<u32>,
    /// Server-reported output tokens (`usage.completion_tokens`), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_completion_tokens: Option<u32>,
    /// Output tokens counted by the client (method in the contract's measurement section,
    /// unless `counted` says otherwise).
    pub client_output_tokens: u32,
    /// `ok`, or the class of failure.
    pub outcome: Outcome,
    /// HTTP status, when a response arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The response's `model` field: the model that answered, as the server names it (shared
    /// between the records that name the same, see [`shared_str`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "shared_str::deserialize"
    )]
    pub response_model: Option<Arc<str>>,
    /// The response's `id` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<Box<str>>,
    /// The last `finish_reason` the server sent (shared like `response_model`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "shared_str::deserialize"
    )]
    pub finish_reason: Option<Arc<str>>,
    /// Kept with the record's own fields, not the rare ones: engines that report cached
    /// tokens report them on every answer, and `[quality]` digests every answer by default.
    /// Server-reported prompt tokens served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_cached_tokens: Option<u32>,
    /// SHA-256 (first 16 hex digits) of the generated text, when `[quality]` asks for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_digest: Option<Box<str>>,
    /// The fields few records set (`None`: all of them empty).
    #[serde(flatten, default, with = "rare_fields")]
    pub rare: Option<Box<Rare>>,
}

/// A [`Record`]'s rarely set fields (see there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rare {
    /// The session (its first turn's plan index) this request is a turn of
    /// (`[workload.sessions]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// Which turn of its session, from 0; with the turns its session planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<(u32, u32)>,
    /// The agent task (`[workload.task]`) this request is a model call of, and which call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Box<TaskStep>>,
    /// The shard of a sharded run that sent it, in a bundle `goodput merge` made (a shard's
    /// own bundle holds only its own requests and leaves it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Which of `target.urls` it was sent to (from 0), when the contract lists several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<u32>,
    /// The segment of a live demo it was sent in (`demo --live`): each change of the load
    /// starts one; the bundle's environment says what each was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<u32>,
    /// Its traffic class (`[[class]]`), when the contract has classes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The load program's stage it was scheduled in (`[[load.stage]]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// An edge search's step (`shape = "edge"`): the rate it offered, req/s, which the search
    /// chose as it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_rps: Option<f64>,
    /// The model (or adapter) name it asked for, when its class chose one instead of the
    /// target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How many of the first `chunks` carried reasoning (thinking) and no answer text: the
    /// answer's first token is in the chunk after them (TTFO). 0: no reasoning was streamed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_chunks: u32,
    /// Prompt tokens the plan expects a prefix cache to serve: the blocks a trace's prefix
    /// structure (Mooncake `hash_ids`) says this request shares with an earlier one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cached_tokens: Option<u32>,
    /// What the engine said of this request's time and prompt cache in its answer
    /// (llama.cpp's `timings`), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_timing: Option<EngineTiming>,
    /// The images its user message carried (`[workload.images]`): sizes, bytes and hashes,
    /// never the pixels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::plan::PlannedImage>,
    /// The request's body, bytes, when it was large enough (at least [`UPLOAD_RECORDED_FROM`])
    /// for its upload to take time of its own; with `upload_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// From the send to the last byte of the request written to the connection, µs: the
    /// upload inside the TTFT (goodput's own connections only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_us: Option<u64>,
    /// Server-reported reasoning tokens among the output tokens
    /// (`usage.completion_tokens_details.reasoning_tokens`), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_reasoning_tokens: Option<u32>,
    /// How `client_output_tokens` and the chunks' token counts were counted when not by the
    /// contract's `measurement.client_token_count` as the stream arrived (see [`Counted`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<Counted>,
    /// The text as it arrived, kept until the output is counted in the model's tokens after
    /// the run (usage absent, or not equal to the client's count). A record that still holds
    /// it was never recounted (the run was interrupted first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<Box<Received>>,
    /// What went wrong, in words (never contains secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Box<str>>,
    /// Sent twice: the first attempt was written to a kept-alive connection the server had
    /// already closed (this is its error); the record is the second, sent at once on a new
    /// connection, timed from the first send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried: Option<Box<str>>,
    /// Redirects followed (`target.follow_redirects`): status and where each pointed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
    /// The generated text itself, with `keep_text` or in `reference` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_text: Option<Box<str>>,
    /// The answer's text (reasoning left out), held in memory for a session's next turn and
    /// never written.
    #[serde(skip)]
    pub answer: Option<String>,
    /// The tool calls its answer made (a tool dataset's request), as they arrived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::api::ToolCall>,
    /// Their grade against the entry's expected calls (`quality::tools`), given by the client
    /// as the answer ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_grade: Option<crate::quality::tools::Grade>,
    /// The entry it asked (BFCL's id, or the line of goodput's own format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_entry: Option<String>,
    /// The entry's tools and expected calls, held while it runs, never written.
    #[serde(skip)]
    pub tool_case: Option<Arc<crate::quality::tools::ToolCase>>,
}

/// A request body at least this large has its upload timed and recorded (`upload_us`): an
/// image's megabytes take milliseconds to write, a text prompt's kilobytes none worth a field.
pub const UPLOAD_RECORDED_FROM: usize = 64 << 10;

impl Rare {
    /// Every field empty: what a record without a box reads.
    pub const NONE: Rare = Rare {
        session: None,
        turn: None,
        task: None,
        shard: None,
        url: None,
        segment: None,
        class: None,
        stage: None,
        stage_rps: None,
        model: None,
        reasoning_chunks: 0,
        expected_cached_tokens: None,
        engine_timing: None,
        images: Vec::new(),
        request_bytes: None,
        upload_us: None,
        usage_reasoning_tokens: None,
        counted: None,
        received: None,
        error: None,
        retried: None,
        redirects: Vec::new(),
        output_text: None,
        answer: None,
        tool_calls: Vec::new(),
        tool_grade: None,
        tool_entry: None,
        tool_case: None,
    };
}

impl Default for Rare {
    fn default() -> Rare {
        Rare::NONE
    }
}

static NO_RARE: Rare = Rare::NONE;

impl std::ops::Deref for Record {
    type Target = Rare;
    fn deref(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }
}

/// Setting a rare field (or borrowing one mutably) makes the record's box.
impl std::ops::DerefMut for Record {
    fn deref_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }
}

/// Strings nearly every record of a bundle repeats (the answering model's name, the finish
/// reason), read once per reading thread and shared rather than allocated per record: two
/// allocations a record, 30 MB of a million-request report.
pub mod shared_str {
    use serde::de::{Deserializer, Error, Visitor};
    use std::cell::RefCell;
    use std::sync::Arc;

    /// Distinct values kept per thread (a bundle has a few models and finish reasons).
    const KEEP: usize = 8;

    thread_local! {
        static RECENT: RefCell<Vec<Arc<str>>> = const { RefCell::new(Vec::new()) };
    }

    /// `s`, shared with the last value alike read on this thread.
    pub fn shared(s: &str) -> Arc<str> {
        RECENT.with_borrow_mut(|recent| {
            if let Some(a) = recent.iter().find(|a| &***a == s) {
                return a.clone();
            }
            if recent.len() == KEEP {
                recent.remove(0);
            }
            let a: Arc<str> = Arc::from(s);
            recent.push(a.clone());
            a
        })
    }

    struct Shared;

    impl<'de> Visitor<'de> for Shared {
        type Value = Option<Arc<str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
        fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
            Ok(Some(shared(s)))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
        d.deserialize_option(Shared)
    }
}

/// The rare fields as keys of the record itself, and no box when none of them is there.
mod rare_fields {
    use super::Rare;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(rare: &Option<Box<Rare>>, s: S) -> Result<S::Ok, S::Error> {
        rare.as_deref().unwrap_or(&Rare::NONE).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<Rare>>, D::Error> {
        let rare = Rare::deserialize(d)?;
        Ok((rare != Rare::NONE).then(|| Box::new(rare)))
    }
}

/// A model call of an agent task: which task and node, what it waited for, and the tool calls
/// on its way, so the task's critical path is rebuilt from the raw records alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskStep {
    /// The task: its arrival's plan index.
    pub task: u64,
    /// Which graph it ran (a file of recorded tasks has several; else 0).
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub graph: usize,
    /// The node's name and its position in the graph (every node after those it waits for).
    pub node: String,
    pub position: u32,
    /// Nodes on the longest chain of waits before it.
    pub depth: u32,
    /// Model calls the task planned.
    pub calls: u32,
    /// The task's intended start (its arrival), µs on the run's clock: its latency's origin.
    pub start_us: u64,
    /// The nodes it waited for (positions; model calls or tools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<u32>,
    /// The tool calls it waited for, directly or through other tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpan>,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// A tool call an agent task ran (it is not a request): its node, what it waited for, and when
/// it started and ended, µs on the run's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolSpan {
    pub node: String,
    pub position: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<u32>,
    pub start_us: u64,
    pub end_us: u64,
}

/// What the load of one segment of a live demo was (`Record::segment`), as its control set it
/// (`environment.json` `live.segments`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SegmentFacts {
    pub segment: u32,
    /// `open` or `closed`.
    #[serde(rename = "loop")]
    pub loop_kind: String,
    /// The offered load as a share of the engine's capacity.
    pub load: f64,
    /// The rate the load was meant to carry, req/s (open: the arrival rate; closed: what its
    /// users carry at unloaded latency).
    pub offered_rps: f64,
    /// Closed loop: its users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    /// When it started, µs on the run's clock.
    pub from_us: u64,
    /// When the next began (or the load ended), µs; `None` while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_us: Option<u64>,
}

/// How a record's output was counted, when not as the stream arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Recounted after the run by the workload's tokenizer file: every chunk's tokens exact.
    Tokenizer,
    /// Recounted after the run at the target's `/tokenize`: the whole output and the first
    /// chunk exact; the later chunks' share of the rest estimated by their length in bytes.
    Server,
    /// No tokenizer file and no `/tokenize`, and the client's count was not the model's tokens
    /// (chunks that carried several words, or usage that said otherwise): recounted as words
    /// after the run, an approximation (English averages about 1.3 tokens a word).
    Words,
}

impl Counted {
    pub fn as_str(self) -> &'static str {
        match self {
            Counted::Tokenizer => "tokenizer",
            Counted::Server => "server",
            Counted::Words => "words",
        }
    }
}

/// Generated text as it arrived: the whole of it, and the bytes each text chunk added.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Received {
    pub text: String,
    pub chunk_bytes: Vec<u32>,
}

/// How a request ended. Every failure is a record; none is excluded from counts.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// Could not connect or send.
    Connect,
    /// No complete answer within the contract's timeout.
    Timeout,
    /// The server answered with a non-success HTTP status.
    HttpStatus,
    /// The connection or stream broke before the end.
    StreamBroken,
    /// An event or body was not the JSON the API promises.
    Malformed,
    /// Streaming was asked for but the server answered without streaming.
    NotStreamed,
    /// The server reported an error inside the stream.
    StreamError,
    /// The open-loop schedule reached this request while `max_in_flight` were in flight.
    ClientDropped,
    /// The run was interrupted (a signal) while the request was in flight.
    Interrupted,
    /// The run stopped once its verdict was decided (`measurement.stop_when_decided`) while the
    /// request was in flight: a failure (a miss), unlike a user's interruption.
    Abandoned,
    /// The answer passed one of the client's limits (an SSE line or event, the headers, the
    /// whole response): the server sent far more than any API answer holds.
    TooLarge,
    /// The answer was not HTTP (a bad status line, garbage, a malformed header).
    Protocol,
    /// The server answered with a redirect (`target.follow_redirects` is off, or too many hops).
    Redirect,
    /// A success status and a well-formed end, but nothing generated: no text, no
    /// `finish_reason`, no usage (a stream of only `[DONE]`).
    Empty,
    /// Never sent: its input could not be made (an image file of the workload's folder
    /// unreadable or changed during the run).
    Input,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Connect => "connect",
            Outcome::Timeout => "timeout",
            Outcome::HttpStatus => "http_status",
            Outcome::StreamBroken => "stream_broken",
            Outcome::Malformed => "malformed",
            Outcome::NotStreamed => "not_streamed",
            Outcome::StreamError => "stream_error",
            Outcome::ClientDropped => "client_dropped",
            Outcome::Interrupted => "interrupted",
            Outcome::Abandoned => "abandoned",
            Outcome::TooLarge => "too_large",
            Outcome::Protocol => "protocol",
            Outcome::Redirect => "redirect",
            Outcome::Empty => "empty",
            Outcome::Input => "input",
        }
    }
}

impl Record {
    /// Planned prompt (`input`) or output length.
    /// A quality probe (kept with its text, compared run to run).
    pub fn is_probe(&self) -> bool {
        self.phase == Phase::Quality
    }

    /// The session or task it belongs to (`None`: a request of its own).
    pub fn conversation(&self) -> Option<u64> {
        self.session.or(self.task.as_ref().map(|t| t.task))
    }

    /// Not a session's follow-up nor a task's later call: a request of its own, a session's
    /// first turn or a task's first calls (whose prompt is the planned one, without a history).
    pub fn is_first_turn(&self) -> bool {
        self.turn.is_none_or(|t| t.0 == 0) && self.task.as_ref().is_none_or(|t| t.depth == 0)
    }

    pub fn planned_tokens(&self, input: bool) -> u32 {
        if input {
            self.input_tokens_planned
        } else {
            self.output_tokens_planned
        }
    }

    /// Server-reported prompt (`input`) or output length, when reported.
    pub fn reported_tokens(&self, input: bool) -> Option<u32> {
        if input {
            self.usage_prompt_tokens
        } else {
            self.usage_completion_tokens
        }
    }

    /// Every time in the record `by_us` later: the record on a clock whose origin is `by_us`
    /// earlier (a shard's records on the merged run's clock).
    pub fn shift(&mut self, by_us: u64) {
        for t in [
            &mut self.intended_us,
            &mut self.dispatched_us,
            &mut self.sent_us,
            &mut self.first_token_us,
            &mut self.end_us,
        ]
        .into_iter()
        .flatten()
        {
            *t = t.saturating_add(by_us);
        }
        for t in &mut self.bare_us {
            *t = t.saturating_add(by_us);
        }
        self.chunks.shift(by_us);
    }

    /// A record for a planned request, before it is sent.
    pub fn planned(p: &PlannedRequest, phase: Phase, run_id: &str) -> Record {
        let mut r = Record {
            index: p.index,
            phase,
            request_id: format!("{run_id}-{}", p.index),
            trace_id: None,
            intended_us: p.intended_us,
            dispatched_us: None,
            sent_us: None,
            first_token_us: None,
            end_us: None,
            chunks: Chunks::new(),
            bare_us: Vec::new(),
            input_tokens_planned: p.input_tokens,
            output_tokens_planned: p.output_tokens,
            usage_prompt_tokens: None,
            usage_completion_tokens: None,
            response_model: None,
            client_output_tokens: 0,
            outcome: Outcome::Ok,
            http_status: None,
            response_id: None,
            finish_reason: None,
            usage_cached_tokens: None,
            output_digest: None,
            rare: None,
        };
        // What the plan says of the request beyond its lengths (few plans say any of it).
        let says = p.class.is_some()
            || p.stage.is_some()
            || p.stage_rps.is_some()
            || p.model.is_some()
            || p.shared_tokens.is_some()
            || !p.images.is_empty()
            || p.tools.is_some();
        if says {
            let rare: &mut Rare = &mut r;
            rare.class = p.class.clone();
            rare.stage = p.stage.clone();
            rare.stage_rps = p.stage_rps;
            rare.model = p.model.clone();
            rare.expected_cached_tokens = p.shared_tokens;
            rare.images = p.images.clone();
            rare.tool_entry = p.tools.as_ref().map(|t| t.id.clone());
            rare.tool_case = p.tools.clone();
        }
        r
    }

    /// A request still in flight, as far as a run under way knows it: its index, phase and
    /// latency origin, sent at that origin, nothing back yet. What the rule that stops a
    /// decided run (`analyze::decided`) counts as in flight.
    pub fn in_flight(index: u64, phase: Phase, origin_us: u64) -> Record {
        let at = PlannedRequest {
            index,
            phase,
            intended_us: Some(origin_us),
            input_tokens: 0,
            output_tokens: 0,
            prompt: String::new(),
            messages: None,
            shared_tokens: None,
            class: None,
            model: None,
            stage: None,
            stage_rps: None,
            images: Vec::new(),
            tools: None,
        };
        let mut r = Record::planned(&at, phase, "");
        r.request_id.clear();
        r.dispatched_us = Some(origin_us);
        r.sent_us = Some(origin_us);
        r
    }

    /// Drops the generated text it kept, without making a box for its rare fields when it has
    /// none (a copy kept for a decision needs no text).
    pub fn forget_text(&mut self) {
        if let Some(rare) = self.rare.as_deref_mut() {
            rare.output_text = None;
        }
    }

    /// Marks the record failed, keeping whatever was measured before.
    pub fn fail(&mut self, outcome: Outcome, error: impl Into<String>, now_us: u64) {
        self.outcome = outcome;
        self.error = Some(error.into().into());
        self.end_us.get_or_insert(now_us);
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Reads `requests.jsonl`; errors name the file and line (see [`read_jsonl_noted`]).
pub fn read_jsonl(path: &std::path::Path) -> Result<Vec<Record>, String> {
    read_jsonl_noted(path).map(|(records, _)| records)
}

/// Reads `requests.jsonl`, with a warning for the reader when a record was left out.
///
/// A last line without its newline that does not parse is a record cut short by a kill in the
/// middle of writing it: it is left out (the warning says which line), and every whole record
/// is read. Anything else that does not parse is an error naming the file and line.
///
/// The file is read in as many parts as there are cores, each parsed on its own thread a line
/// at a time: the file's text is never held whole (a million-record file is gigabytes).
pub fn read_jsonl_noted(path: &std::path::Path) -> Result<(Vec<Record>, Option<String>), String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    // A symlink to a device reads as empty here (its length is 0), or without end, and a
    // named pipe waits for a writer: never a run's records.
    let meta = crate::text::regular_file(path).map_err(cannot)?;
    let size = meta.len();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Blocks of about 16 MB, parsed by every core and joined in file order as they finish:
    // only the blocks in flight are held twice, never the file's text or a second list.
    let blocks = size.div_ceil(16 << 20).max(1);
    let (starts, ends_with_newline) = block_starts(path, size, blocks).map_err(cannot)?;
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Part, String>)>();
    let mut joined = Joined::new(path, !ends_with_newline, (size / 1024) as usize);
    let result = std::thread::scope(|s| {
        for _ in 0..threads.min(blocks as usize) {
            let (tx, next, starts) = (tx.clone(), &next, &starts);
            s.spawn(move || {
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&[from, to]) = starts.get(b..b + 2) else {
                        break;
                    };
                    let part = std::fs::File::open(path)
                        .and_then(|mut f| f.seek(SeekFrom::Start(from)).map(|_| f))
                        .and_then(|f| {
                            parse_part(std::io::BufReader::with_capacity(
                                1 << 20,
                                f.take(to - from),
                            ))
                        })
                        .map_err(cannot);
                    // A bad line is the end only before a block's last line (that one may be a
                    // record cut short at the end of the file).
                    let failed = part
                        .as_ref()
                        .map_or(true, |p| p.bad.as_ref().is_some_and(|b| b.0 < p.lines));
                    if tx.send((b, part)).is_err() || failed {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Blocks arrive in any order; each is appended once those before it are.
        let mut waiting = std::collections::BTreeMap::new();
        let mut want = 0;
        for (b, part) in rx {
            waiting.insert(b, part);
            while let Some(part) = waiting.remove(&want) {
                joined.push(part?)?;
                want += 1;
            }
        }
        if want < blocks as usize {
            return Err(format!(
                "cannot read {}: a reader thread stopped",
                path.display()
            ));
        }
        Ok(())
    });
    result?;
    joined.finish()
}

/// Where each of `blocks` blocks of a file of `size` bytes starts (then the file's end), each
/// at the beginning of a line; and whether the file ends with a newline.
fn block_starts(
    path: &std::path::Path,
    size: u64,
    blocks: u64,
) -> std::io::Result<(Vec<u64>, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    // Each block starts at the beginning of a line: after the first newline at or past its share.
    let mut starts = vec![0u64];
    let mut too_long = false;
    for j in 1..blocks {
        let at = j * size / blocks - 1;
        let last = *starts.last().expect("one");
        // A block whose share the line before it overran is empty; past a line too long to be
        // a record nothing more is scanned (the block holding it is the error): a file with no
        // newline for gigabytes is read one line's limit, not once per block.
        if too_long || at < last {
            starts.push(last);
            continue;
        }
        let mut f = std::fs::File::open(path)?;
        f.seek(SeekFrom::Start(at))?;
        let n = skip_line(std::io::BufReader::new(f.take(MAX_LINE_BYTES + 1)))?;
        too_long = n > MAX_LINE_BYTES;
        // The block before runs to the end then: only it reads the long line (to its limit),
        // not every block after it as well.
        starts.push(if too_long { size } else { at + n });
    }
    starts.push(size);
    let ends_with_newline = size == 0 || {
        let mut f = std::fs::File::open(path)?;
        f.seek(SeekFrom::Start(size - 1))?;
        let mut last = [0u8];
        f.read_exact(&mut last)?;
        last[0] == b'\n'
    };
    Ok((starts, ends_with_newline))
}

/// The longest line of `requests.jsonl` read: a record keeps at most 32 MiB of an answer's text
/// (the client's `MAX_KEPT_TEXT`) beside its timings; a longer line (a file of one 4 GiB
/// line) is named, never read into memory whole. Under 64 MiB, so that the line's buffer,
/// grown by doubling, stays within 64 MiB.
pub const MAX_LINE_BYTES: u64 = 60 << 20;

const TOO_LONG: &str = "a line longer than";

/// Consumes one line (through its newline, or to the end); how many bytes. Nothing of it is
/// held: a line may be gigabytes.
fn skip_line(mut r: impl std::io::BufRead) -> std::io::Result<u64> {
    let mut n = 0u64;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(n);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(n + i as u64 + 1);
            }
            None => {
                let len = buf.len();
                r.consume(len);
                n += len as u64;
            }
        }
    }
}

/// [`read_jsonl_noted`] of a text already read (`path` names it in messages).
pub fn parse_jsonl_noted(
    path: &std::path::Path,
    text: &str,
) -> Result<(Vec<Record>, Option<String>), String> {
    let part = parse_part(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut joined = Joined::new(path, !text.is_empty() && !text.ends_with('\n'), 0);
    joined.push(part)?;
    joined.finish()
}

/// The records of a run of whole lines, until the first that does not parse.
struct Part {
    records: Vec<Record>,
    /// Line number within the part (1-based) of each record.
    lines_of: Vec<u32>,
    lines: u64,
    /// The first line that did not parse: its number within the part, and why.
    bad: Option<(u64, String)>,
}

fn parse_part(mut reader: impl std::io::BufRead) -> std::io::Result<Part> {
    let mut part = Part {
        records: Vec::new(),
        lines_of: Vec::new(),
        lines: 0,
        bad: None,
    };
    use std::io::{BufRead as _, Read as _};
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut line)?
            == 0
        {
            break;
        }
        part.lines += 1;
        if line.len() as u64 > MAX_LINE_BYTES {
            part.bad = Some((
                part.lines,
                format!(
                    "{TOO_LONG} {}, more than any record goodput writes",
                    crate::text::human_bytes(MAX_LINE_BYTES)
                ),
            ));
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(&line) {
            Ok(r) => {
                part.records.push(r);
                part.lines_of.push(part.lines as u32);
            }
            Err(e) => {
                part.bad = Some((part.lines, e.to_string()));
                break;
            }
        }
    }
    Ok(part)
}

/// The parts of a file joined in order, checked: the first bad line is an error unless it is
/// the file's last and unfinished; a request recorded twice is an error naming both lines.
struct Joined<'a> {
    path: &'a std::path::Path,
    cut_short: bool,
    records: Vec<Record>,
    /// (request index, line) of every record.
    lines_of: Vec<(u64, u64)>,
    lines: u64,
    /// The bad last line, when it is the last so far (any part after it makes it an error).
    bad_last: Option<(u64, String)>,
}

impl<'a> Joined<'a> {
    /// `expect`: about how many records (room never written to is never resident).
    fn new(path: &'a std::path::Path, cut_short: bool, expect: usize) -> Joined<'a> {
        Joined {
            path,
            cut_short,
            records: Vec::with_capacity(expect),
            lines_of: Vec::with_capacity(expect),
            lines: 0,
            bad_last: None,
        }
    }

    fn push(&mut self, p: Part) -> Result<(), String> {
        let path = self.path.display();
        if p.lines == 0 {
            return Ok(());
        }
        if let Some((line, e)) = self.bad_last.take() {
            return Err(format!("{path}:{line}: not a request record: {e}"));
        }
        let before = self.lines;
        self.lines_of.extend(
            p.records
                .iter()
                .zip(&p.lines_of)
                .map(|(r, &l)| (r.index, before + u64::from(l))),
        );
        self.records.extend(p.records);
        self.lines += p.lines;
        if let Some((at, e)) = p.bad {
            // A line too long to be a record is no record cut short by a kill.
            if at < p.lines || !self.cut_short || e.starts_with(TOO_LONG) {
                return Err(format!("{path}:{}: not a request record: {e}", before + at));
            }
            self.bad_last = Some((before + at, e));
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(Vec<Record>, Option<String>), String> {
        let path = self.path.display();
        let warning = self.bad_last.map(|(line, _)| {
            format!(
                "{path}:{line}: the last record is unfinished (the run was killed while writing it) and is left out"
            )
        });
        // A record appended twice (files concatenated, a copy gone wrong) would count its
        // request twice.
        self.lines_of.sort_unstable();
        if let Some(w) = self
            .lines_of
            .windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .min_by_key(|w| w[1].1)
        {
            return Err(format!(
                "{path}:{}: request {} again (first on line {}): a request has one record",
                w[1].1, w[0].0, w[0].1
            ));
        }
        Ok((self.records, warning))
    }
}

/// What this build's records keep beyond what every build's did, as `command.json` states it
/// (`records`): a reader that recomputes another tool's definitions from them knows whether
/// what it needs was recorded, rather than taking its absence for none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// Every event with a choice but no text is in [`Record::bare_us`].
    #[serde(default)]
    pub choice_events: bool,
}

impl Kept {
    /// What this build keeps.
    pub const THIS_BUILD: Kept = Kept {
        choice_events: true,
    };

    /// What every one of several runs' records keep (a merge of shards).
    pub fn of_all(kept: impl IntoIterator<Item = Kept>) -> Kept {
        let mut all = kept.into_iter();
        let first = all.next().unwrap_or_default();
        all.fold(first, |a, b| Kept {
            choice_events: a.choice_events && b.choice_events,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_names_are_read_once_and_shared_and_a_rare_field_boxes_only_its_records() {
        let line = |i: u32, model: &str, extra: &str| {
            format!(
                r#"{{"index":{i},"phase":"steady","request_id":"r-{i}","input_tokens_planned":1,"output_tokens_planned":1,"client_output_tokens":1,"outcome":"ok","response_model":{model},"finish_reason":"stop"{extra}}}"#
            )
        };
        let text = [
            line(
                0,
                r#""m""#,
                r#","usage_cached_tokens":3,"output_digest":"0123456789abcdef""#,
            ),
            line(1, r#""m""#, r#","class":"chat""#),
            line(2, r#""other""#, ""),
            line(3, "null", ""),
        ]
        .join("\n");
        let (r, _) =
            super::parse_jsonl_noted(std::path::Path::new("requests.jsonl"), &text).unwrap();
        let (a, b) = (r[0].response_model.clone(), r[1].response_model.clone());
        assert!(std::sync::Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
        assert_eq!(r[2].response_model.as_deref(), Some("other"));
        assert_eq!(
            (
                r[3].response_model.as_deref(),
                r[3].finish_reason.as_deref()
            ),
            (None, Some("stop"))
        );
        // Only the record with a class has its rare fields boxed, and it reads its class (a
        // cached-token count and a digest, which most answers carry, are the record's own).
        let boxed: Vec<bool> = r.iter().map(|x| x.rare.is_some()).collect();
        assert_eq!(boxed, [false, true, false, false]);
        assert_eq!(
            (r[1].class.as_deref(), r[0].class.as_deref()),
            (Some("chat"), None)
        );
        // Written again, each record reads back the same.
        for x in &r {
            let again: super::Record =
                serde_json::from_str(&serde_json::to_string(x).unwrap()).unwrap();
            assert_eq!(&again, x);
        }
    }

    #[test]
    fn a_duplicated_record_is_an_error_naming_both_lines() {
        let line = r#"{"index":7,"phase":"steady","request_id":"r-7","input_tokens_planned":1,"output_tokens_planned":1,"client_output_tokens":1,"outcome":"ok"}"#;
        let text = format!("{line}\n{line}\n");
        let e =
            super::parse_jsonl_noted(std::path::Path::new("requests.jsonl"), &text).unwrap_err();
        assert!(
            e.contains("requests.jsonl:2: request 7 again (first on line 1)"),
            "{e}"
        );
    }
}
