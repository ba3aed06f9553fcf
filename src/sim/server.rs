//! The HTTP runner: an OpenAI-compatible server on loopback whose engine is [`Engine`].
//!
//! One OS thread runs the scheduler loop (continuous batching for every sequence; no task or
//! timer per token) and sleeps with `std::thread::sleep`, whose sub-millisecond precision keeps
//! step timing faithful where tokio's 1 ms timer wheel would not. Handlers talk to it through a
//! channel and stream what it delivers. Endpoints: every API of [`super::wire`] (OpenAI's
//! chat, completions, Responses and embeddings, Anthropic's Messages, TGI's `/generate_stream`
//! and `/generate`, Ollama's `/api/chat`), `GET /v1/models`, `GET /health`, `GET /version`,
//! `POST /tokenize`, `GET /metrics`, `GET /telemetry` (the accelerators' power, DCGM-shaped),
//! `GET /ground_truth` (JSONL of finished requests) and `GET /ground_truth/energy`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

use super::engine::{Engine, Event, Submission};
use super::ledger::{GroundTruth, Ledger, SimOutcome};
use super::metrics::MetricsState;
use super::model::{
    FaultKind, LengthAsk, degraded_output_plan, fault_strikes, output_words, prompt_hash, push_text,
};
use super::wire::{Api, Ask, Counts, Reply, Wire};
use crate::sim_config::SimConfig;
use crate::text::word_ids;

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] crate::sim_config::ConfigError),
    // `cause`, not `source`: the message says it, and a source would print it twice in a chain.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("cannot create ground-truth file {path}: {cause}")]
    GroundTruthFile {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot start the engine thread: {0}")]
    Thread(std::io::Error),
}

enum Msg {
    Arrive(Pending),
    Shutdown,
}

#[derive(Debug)]
enum Delivery {
    Chunk {
        first_index: u32,
        tokens: u32,
    },
    /// Finished; `cached` prompt tokens came from the prefix cache; its timing for answers
    /// that state it (`timings`).
    Done {
        cached: u32,
        timings: Option<super::wire::Timings>,
    },
    Rejected,
}

struct Shared {
    cfg: SimConfig,
    epoch: Instant,
    model_json: String,
    created: u64,
    arrivals: AtomicU64,
    metrics: Mutex<MetricsState>,
    /// The accelerators' energy over the model's step timeline.
    meter: Mutex<super::power::Meter>,
    done: Mutex<Vec<GroundTruth>>,
    /// Tool answers' truth by arrival, until the request's ground truth is recorded.
    tool_truth: Mutex<HashMap<u64, (u32, Option<&'static str>)>>,
    gt_file: Mutex<Option<BufWriter<File>>>,
    engine: Sender<Msg>,
    /// Where finished requests' server spans go (`--otlp-traces-endpoint`), and the wall-clock
    /// time of `epoch`, ns.
    spans: Option<crate::otlp::export::Batcher>,
    epoch_unix_ns: u64,
}

impl Shared {
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    fn ready(&self) -> bool {
        self.now() * 1000.0 >= self.cfg.load_time_ms
    }

    fn record(&self, mut g: GroundTruth) {
        if let Some((calls, error)) = lock(&self.tool_truth).remove(&g.seq) {
            g.tool_calls = calls;
            g.tool_error = error.map(str::to_owned);
        }
        if let Some(b) = &self.spans
            && let Some(span) = g.span(self.epoch_unix_ns, &self.cfg.model)
        {
            b.push(span);
        }
        if let Some(f) = lock(&self.gt_file).as_mut() {
            // Ground truth is a test aid: a full disk must not take the server down.
            let _ = serde_json::to_writer(&mut *f, &g);
            let _ = f.write_all(b"\n");
            let _ = f.flush();
        }
        lock(&self.done).push(g);
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running simulator. Dropping it stops the engine thread and the listener.
pub struct SimServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    engine_thread: Option<std::thread::JoinHandle<()>>,
    cancel: CancellationToken,
}

/// Every route the simulator serves: each API's completion path, the models list, health,
/// version, `/tokenize` (when on), its metrics, telemetry and ground truth.
fn routes(shared: Arc<Shared>) -> Router {
    let mut app = Router::new();
    for api in Api::ALL {
        app = app.route(
            api.route(),
            post(
                move |State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes| {
                    complete(s, headers, body, api)
                },
            ),
        );
    }
    let mut app = app
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/version", get(version));
    if shared.cfg.tokenize {
        app = app.route("/tokenize", post(tokenize));
    }
    app.route("/metrics", get(metrics))
        .route("/telemetry", get(telemetry))
        .route("/ground_truth", get(ground_truth_jsonl))
        .route("/ground_truth/energy", get(ground_truth_energy))
        // A request with images is megabytes (axum's default refuses bodies past 2 MB).
        .layer(axum::extract::DefaultBodyLimit::max(
            (shared.cfg.max_body_mb as usize) << 20,
        ))
        .with_state(shared)
}

impl SimServer {
    /// Validates `cfg`, binds `addr` (port 0 = ephemeral) and starts serving.
    pub async fn start(
        cfg: SimConfig,
        addr: SocketAddr,
        ground_truth: Option<PathBuf>,
    ) -> Result<SimServer, SimError> {
        Self::start_traced(cfg, addr, ground_truth, None).await
    }

    /// As [`SimServer::start`], and every request that finishes sends its server span (as
    /// vLLM's `llm_request`, from the ground truth) to `traces`: an OTLP endpoint and protocol.
    pub async fn start_traced(
        cfg: SimConfig,
        addr: SocketAddr,
        ground_truth: Option<PathBuf>,
        traces: Option<(String, crate::otlp::export::Protocol)>,
    ) -> Result<SimServer, SimError> {
        cfg.validate()?;
        let gt_file = match ground_truth {
            Some(path) => {
                Some(BufWriter::new(File::create(&path).map_err(|cause| {
                    SimError::GroundTruthFile { path, cause }
                })?))
            }
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|cause| SimError::Bind { addr, cause })?;
        let addr = listener
            .local_addr()
            .map_err(|cause| SimError::Bind { addr, cause })?;
        let (tx, rx) = std::sync::mpsc::channel();
        let meter = super::power::Meter::new(cfg.power.clone(), cfg.max_batch);
        let drafts = cfg.speculative.draft_tokens > 0;
        let epoch = Instant::now();
        let shared = Arc::new(Shared {
            model_json: serde_json::to_string(&cfg.model).unwrap_or_else(|_| "\"sim\"".into()),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            cfg,
            epoch,
            arrivals: AtomicU64::new(0),
            metrics: Mutex::new(MetricsState {
                drafts,
                ..MetricsState::default()
            }),
            meter: Mutex::new(meter),
            done: Mutex::new(Vec::new()),
            tool_truth: Mutex::new(HashMap::new()),
            gt_file: Mutex::new(gt_file),
            engine: tx,
            spans: traces.map(|(endpoint, protocol)| {
                crate::otlp::export::Batcher::spawn(endpoint, protocol, "goodput-sim")
            }),
            epoch_unix_ns: crate::otlp::origin_unix_ns(epoch),
        });
        let engine_shared = shared.clone();
        let engine_thread = std::thread::Builder::new()
            .name("goodput-sim-engine".into())
            .spawn(move || engine_loop(engine_shared, rx))
            .map_err(SimError::Thread)?;
        let app = routes(shared.clone());
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        // Token-by-token SSE is many small writes: without TCP_NODELAY, Nagle's algorithm and
        // delayed ACKs hold chunks back by up to 40 ms (real engine servers set it too).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Ok(SimServer {
            addr,
            shared,
            engine_thread: Some(engine_thread),
            cancel,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn config(&self) -> &SimConfig {
        &self.shared.cfg
    }

    /// Ground truth of every request finished so far, in completion order.
    pub fn ground_truth(&self) -> Vec<GroundTruth> {
        lock(&self.shared.done).clone()
    }

    /// Seconds on the simulator's clock (ground-truth times are microseconds on it).
    pub fn now_s(&self) -> f64 {
        self.shared.now()
    }

    /// Energy every simulated GPU drew together over `[from_s, to_s]` (simulator clock),
    /// joules: the truth `/telemetry` publishes samples of.
    pub fn energy_between(&self, from_s: f64, to_s: f64) -> f64 {
        lock(&self.shared.meter).joules_between(from_s, to_s)
    }

    /// The current Prometheus exposition.
    pub fn metrics_text(&self) -> String {
        lock(&self.shared.metrics).render(&self.shared.cfg.model)
    }

    /// Stops accepting connections and ends the engine thread.
    pub fn stop(&mut self) {
        self.cancel.cancel();
        let _ = self.shared.engine.send(Msg::Shutdown);
        if let Some(t) = self.engine_thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An arrival not yet handed to the engine.
struct Pending {
    seq: u64,
    t: f64,
    request_id: Option<String>,
    traceparent: Option<String>,
    prompt_ids: Vec<u64>,
    output_tokens: u32,
    /// How many of the first output tokens are reasoning.
    reasoning_tokens: u32,
    /// The prompt's text, with `record_prompts`.
    prompt: Option<String>,
    /// The answer's token ids (chat requests), so prompt and answer are cached together.
    output_ids: Vec<u64>,
    fault: Option<SimOutcome>,
    reply: UnboundedSender<Delivery>,
    /// The body's `priority`, and what its adapter adds to its first step (ms).
    priority: i64,
    extra_ms: f64,
    /// Its images: content hash and prompt tokens.
    images: Vec<(u64, u32)>,
}

fn engine_loop(shared: Arc<Shared>, rx: Receiver<Msg>) {
    let mut l = EngineLoop::new(shared);
    loop {
        let Some(resumed_from_idle) = l.receive(&rx) else {
            return;
        };
        let start = l.step_start(resumed_from_idle);
        l.admit_arrived(start);
        l.reap_gone(start);
        let Some(step) = l.engine.step(start, &mut l.events) else {
            continue;
        };
        // The step's power is known from its start: a scrape while it runs reads it.
        lock(&l.shared.meter).step(step.start, step.end, l.engine.running());
        l.at_step_start(step.start);
        let deadline = l.shared.epoch + Duration::from_secs_f64(step.end);
        let now = Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
        let t = l.shared.now();
        l.deliver(t);
        l.publish();
        l.release();
        l.last_end = Some(step.end);
        l.last_dur = step.end - step.start;
    }
}

/// The engine thread's state: the engine on its clock, the ground truth, where each
/// request's chunks go, and what the next `/metrics` scrape reads.
struct EngineLoop {
    shared: Arc<Shared>,
    engine: Engine,
    ledger: Ledger,
    replies: HashMap<u64, UnboundedSender<Delivery>>,
    events: Vec<Event>,
    gone: Vec<u64>,
    queue_obs: Vec<f64>,
    ttft_obs: Vec<f64>,
    /// Finished requests whose end is told only after `publish`: a client that has its
    /// answer must find it counted in `/metrics`.
    finished: Vec<(UnboundedSender<Delivery>, u32, Option<super::wire::Timings>)>,
    pending: std::collections::VecDeque<Pending>,
    last_end: Option<f64>,
    last_dur: f64,
    finished_ok: u64,
    /// When the requests were last checked for a client gone (s, the engine's clock).
    reaped_at: f64,
}

impl EngineLoop {
    fn new(shared: Arc<Shared>) -> EngineLoop {
        EngineLoop {
            engine: Engine::new(shared.cfg.clone()),
            shared,
            ledger: Ledger::default(),
            replies: HashMap::new(),
            events: Vec::new(),
            gone: Vec::new(),
            queue_obs: Vec::new(),
            ttft_obs: Vec::new(),
            finished: Vec::new(),
            pending: std::collections::VecDeque::new(),
            last_end: None,
            last_dur: 0.0,
            finished_ok: 0,
            reaped_at: 0.0,
        }
    }

    /// Takes every arrival waiting, waiting for one when the engine is idle; whether it was
    /// idle, or `None` on shutdown.
    fn receive(&mut self, rx: &Receiver<Msg>) -> Option<bool> {
        let resumed_from_idle = self.engine.is_idle() && self.pending.is_empty();
        let pending = &mut self.pending;
        let mut take = |m: Msg| match m {
            Msg::Shutdown => None,
            Msg::Arrive(p) => {
                pending.push_back(p);
                Some(())
            }
        };
        if resumed_from_idle {
            take(rx.recv().ok()?)?;
        }
        loop {
            match rx.try_recv() {
                Ok(m) => take(m)?,
                Err(TryRecvError::Empty) => return Some(resumed_from_idle),
                Err(TryRecvError::Disconnected) => return None,
            }
        }
    }

    /// When the next step starts on the model's clock. The clock stays contiguous while the
    /// engine is busy: a thread that wakes late (sleep overshoot, a busy machine) runs the
    /// overdue steps back to back to catch up rather than opening a step the cost model would
    /// not have. Only a real hiccup (longer than three steps, or 2 ms for near-zero-cost steps)
    /// resynchronises to real time, and after idleness the next step starts when the first
    /// waiting request arrived.
    fn step_start(&self, resumed_from_idle: bool) -> f64 {
        let now = self.shared.now();
        let catch_up = (3.0 * self.last_dur).max(0.002);
        let mut start = match self.last_end {
            Some(end) if !resumed_from_idle && now - end < catch_up => end,
            Some(end) if resumed_from_idle => self.pending.front().map_or(now, |p| p.t.max(end)),
            _ => now,
        };
        // An idle engine starts its next step when the next request arrives.
        if self.engine.is_idle()
            && let Some(first) = self.pending.front()
        {
            start = start.max(first.t);
        }
        start
    }

    /// Only requests that had arrived when the step starts join it; one that arrived while
    /// this thread was catching up waits for the next step, as in the discrete-event runner.
    fn admit_arrived(&mut self, start: f64) {
        while self.pending.front().is_some_and(|p| p.t <= start) {
            let p = self.pending.pop_front().expect("front exists");
            let ledger = &mut self.ledger;
            ledger.arrive(p.seq, p.request_id, p.t, p.prompt_ids.len() as u32);
            ledger.set_trace(p.seq, p.traceparent);
            ledger.set_reasoning(p.seq, p.reasoning_tokens);
            if !p.images.is_empty() {
                let tokens = p.images.iter().map(|i| i.1).sum();
                ledger.set_images(p.seq, p.images.len() as u32, tokens);
            }
            if let Some(text) = p.prompt {
                ledger.set_prompt(p.seq, text);
            }
            if let Some(f) = p.fault {
                ledger.set_outcome(p.seq, f);
            }
            self.replies.insert(p.seq, p.reply);
            self.engine.submit(Submission {
                id: p.seq,
                prompt_ids: p.prompt_ids,
                output_tokens: p.output_tokens,
                output_ids: p.output_ids,
                priority: p.priority,
                extra_ms: p.extra_ms,
                images: p.images,
            });
        }
    }

    /// Aborts every request whose client has gone (its answer's receiver dropped: the
    /// connection closed), waiting or running, as vLLM aborts a request whose client
    /// disconnected and llama.cpp frees its slot: a client that stops early leaves the server
    /// idle, not serving a queue nobody reads. A request still running is also caught when its
    /// next chunk finds nobody ([`EngineLoop::deliver`]); this catches the waiting ones, at most
    /// every [`REAP_EVERY_S`] of the engine's clock.
    fn reap_gone(&mut self, t: f64) {
        if t - self.reaped_at < REAP_EVERY_S {
            return;
        }
        self.reaped_at = t;
        self.gone.extend(
            self.replies
                .iter()
                .filter(|(_, tx)| tx.is_closed())
                .map(|(id, _)| *id),
        );
        if !self.gone.is_empty() {
            self.abort_gone(t);
            // `/metrics` reads the queue without them at once: the engine may now be idle, with
            // no step to publish after.
            self.publish();
        }
    }

    /// Aborts the requests in `gone`, their ground truth finished `ClientGone` at `t`.
    fn abort_gone(&mut self, t: f64) {
        for id in self.gone.drain(..) {
            self.engine.abort(id);
            self.replies.remove(&id);
            if let Some(g) = self.ledger.finish(id, t, SimOutcome::ClientGone) {
                self.queue_obs.extend(g.queue_us.map(|q| q as f64 / 1e6));
                self.shared.record(g);
            }
        }
    }

    /// What happens as the step starts: admissions and rejections.
    fn at_step_start(&mut self, start: f64) {
        for ev in &self.events {
            match *ev {
                // Queue time is observed when the request finishes, as vLLM's
                // `vllm:request_queue_time_seconds` is (its finished-request stats), not when it
                // is admitted: a window's histogram counts the requests finished in it.
                Event::Admitted { id, cached_tokens } => {
                    self.ledger.admit(id, start, cached_tokens);
                }
                Event::Encoded {
                    id,
                    hits,
                    vision_us,
                    ..
                } => self.ledger.encoded(id, hits, vision_us),
                Event::Drafted {
                    id,
                    drafted,
                    accepted,
                } => self.ledger.drafted(id, drafted, accepted),
                Event::Rejected { id } => {
                    self.ledger.set_outcome(id, SimOutcome::RejectedTooLong);
                    if let Some(g) = self.ledger.finish(id, start, SimOutcome::RejectedTooLong) {
                        self.shared.record(g);
                    }
                    if let Some(tx) = self.replies.remove(&id) {
                        let _ = tx.send(Delivery::Rejected);
                    }
                }
                _ => {}
            }
        }
    }

    /// The step's chunks and ends, delivered at its end `t`; a client gone is aborted.
    fn deliver(&mut self, t: f64) {
        for ev in &self.events {
            match *ev {
                Event::Chunk {
                    id,
                    first_index,
                    tokens,
                } => {
                    if let Some(ttft) = self.ledger.chunk(id, t, tokens) {
                        self.ttft_obs.push(ttft);
                    }
                    let sent = self.replies.get(&id).map(|tx| {
                        tx.send(Delivery::Chunk {
                            first_index,
                            tokens,
                        })
                    });
                    if matches!(sent, Some(Err(_))) {
                        self.gone.push(id);
                    }
                }
                Event::Finished { id } => {
                    // Ground truth first, the answer after `publish`: a client that has seen
                    // [DONE] must find it recorded and counted.
                    let (mut cached, mut timings) = (0, None);
                    if let Some(g) = self.ledger.finish(id, t, SimOutcome::Ok) {
                        self.finished_ok += u64::from(g.outcome == SimOutcome::Ok);
                        cached = g.cached_tokens;
                        if self.shared.cfg.timings {
                            timings = g.timings();
                        }
                        self.queue_obs.extend(g.queue_us.map(|q| q as f64 / 1e6));
                        self.shared.record(g);
                    }
                    if let Some(tx) = self.replies.remove(&id) {
                        self.finished.push((tx, cached, timings));
                    }
                }
                _ => {}
            }
        }
        self.abort_gone(t);
    }

    /// Tells the step's finished requests they are done.
    fn release(&mut self) {
        for (tx, cached, timings) in self.finished.drain(..) {
            let _ = tx.send(Delivery::Done { cached, timings });
        }
    }

    /// The figures `/metrics` publishes, as of the step's end.
    fn publish(&mut self) {
        let mut m = lock(&self.shared.metrics);
        m.running = self.engine.running();
        m.waiting = self.engine.waiting();
        m.kv_usage = self.engine.kv_usage();
        m.counters = self.engine.counters();
        m.requests_ok = self.finished_ok;
        for q in self.queue_obs.drain(..) {
            m.queue_time.observe(q);
        }
        for x in self.ttft_obs.drain(..) {
            m.ttft.observe(x);
        }
    }
}

/// How often the engine looks for requests whose client has gone (s of its clock).
const REAP_EVERY_S: f64 = 0.05;

fn error_response(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "error": { "message": message, "type": "invalid_request_error", "code": status.as_u16() }
    });
    (status, axum::Json(body)).into_response()
}

/// An error answer's status and message.
type Refusal = (StatusCode, String);

/// Whether a request names one of the served adapters (`Ok(false)`: the base model or none);
/// a model the server does not serve is a 404 naming what it serves.
fn on_adapter(cfg: &SimConfig, model: Option<&str>) -> Result<bool, Refusal> {
    match model.map(|m| (m, cfg.serves(m))) {
        Some((m, None)) => {
            let mut served = vec![format!("`{}`", cfg.model)];
            served.extend(cfg.adapters.iter().map(|a| format!("`{a}`")));
            Err((
                StatusCode::NOT_FOUND,
                format!(
                    "The model `{m}` does not exist; this server serves {}.",
                    served.join(", ")
                ),
            ))
        }
        Some((_, Some(adapter))) => Ok(adapter),
        None => Ok(false),
    }
}

/// The prompt's token ids (a chat prompt behind its template's, its images' after its text);
/// an empty prompt, or more images than `vision.max_images`, is a 400.
fn prompt_ids(cfg: &SimConfig, ask: &Ask) -> Result<Vec<u64>, Refusal> {
    let mut ids = word_ids(&ask.prompt);
    if ask.chat && !ids.is_empty() {
        ids.splice(0..0, template_ids(cfg.chat_template_tokens));
    }
    let limit = cfg.vision.max_images as usize;
    if ask.images.len() > limit {
        // vLLM's words for its --limit-mm-per-prompt.
        return Err((
            StatusCode::BAD_REQUEST,
            format!("At most {limit} image(s) may be provided in one prompt."),
        ));
    }
    for i in &ask.images {
        let n = cfg.vision.tokens(i.width, i.height);
        ids.extend((0..u64::from(n)).map(|k| crate::text::mix2(i.hash, k)));
    }
    if ids.is_empty() {
        return Err((
            StatusCode::BAD_REQUEST,
            format!("`{}` holds no tokens", ask.prompt_field),
        ));
    }
    Ok(ids)
}

/// A request's images as the engine takes them: content hash and prompt tokens.
fn image_costs(cfg: &SimConfig, ask: &Ask) -> Vec<(u64, u32)> {
    ask.images
        .iter()
        .map(|i| (i.hash, cfg.vision.tokens(i.width, i.height)))
        .collect()
}

/// The id prefix of an answer, as each API's servers write it.
fn id_prefix(api: Api) -> &'static str {
    match api {
        Api::Chat => "chatcmpl",
        Api::Completions => "cmpl",
        Api::Responses => "resp",
        Api::Messages => "msg",
        Api::Embeddings => "embd",
        Api::TgiStream | Api::TgiWhole => "tgi",
        Api::Ollama => "ollama",
    }
}

/// A request as the simulator admits it: what it asks, the prompt's token ids and hash, the
/// output planned for it and its reasoning share.
struct Admitted {
    wire: &'static dyn Wire,
    ask: Ask,
    on_adapter: bool,
    ids: Vec<u64>,
    phash: u64,
    plan: super::model::OutputPlan,
    reasoning: u32,
}

/// Reads and plans a request, or the answer that refuses it: a body the API cannot read, an
/// unknown model or adapter, or more tokens than the model's context holds.
fn admit(cfg: &SimConfig, api: Api, body: &[u8]) -> Result<Admitted, Box<Response>> {
    let wire = api.wire();
    let ask = match wire.ask(body) {
        Ok(a) => a,
        Err(e) => return Err(Box::new(error_response(StatusCode::BAD_REQUEST, &e))),
    };
    let (on_adapter, ids) =
        match on_adapter(cfg, ask.model.as_deref()).and_then(|a| Ok((a, prompt_ids(cfg, &ask)?))) {
            Ok(x) => x,
            Err((status, message)) => return Err(Box::new(error_response(status, &message))),
        };
    let phash = prompt_hash(&ids);
    let plan = degraded_output_plan(
        cfg,
        phash,
        LengthAsk {
            max_tokens: ask.max_tokens,
            min_tokens: ask.min_tokens,
            ignore_eos: ask.ignore_eos,
        },
    );
    let prompt_tokens = ids.len() as u32;
    let reasoning = if ask.chat && ask.thinking {
        (cfg.reasoning_share * f64::from(plan.tokens)).floor() as u32
    } else {
        0
    };
    if u64::from(prompt_tokens) + u64::from(plan.tokens) > u64::from(cfg.max_model_len) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            &format!(
                "This model's maximum context length is {} tokens; the request asks for {} \
                 ({} in the prompt, {} to generate).",
                cfg.max_model_len,
                prompt_tokens + plan.tokens,
                prompt_tokens,
                plan.tokens
            ),
        )));
    }
    Ok(Admitted {
        wire,
        ask,
        on_adapter,
        ids,
        phash,
        plan,
        reasoning,
    })
}

/// The stream faults that strike request `seq`: the token after which its connection is cut,
/// the token at which one event is malformed, and the outcome the ground truth records.
fn stream_faults(
    cfg: &SimConfig,
    seq: u64,
    stream: bool,
    tokens: u32,
) -> (Option<u32>, Option<u32>, Option<SimOutcome>) {
    let at = (tokens / 2).max(1);
    let drop_after = (stream && fault_strikes(cfg, seq, FaultKind::Drop)).then_some(at);
    let malformed_at = (stream && fault_strikes(cfg, seq, FaultKind::Malformed)).then_some(at);
    let fault = if drop_after.is_some() {
        Some(SimOutcome::Dropped)
    } else if malformed_at.is_some() {
        Some(SimOutcome::Malformed)
    } else {
        None
    };
    (drop_after, malformed_at, fault)
}

/// One request to an API's route: admitted or refused, sent to the engine (or failed by an
/// injected fault), and answered as a stream or whole.
async fn complete(s: Arc<Shared>, headers: HeaderMap, body: Bytes, api: Api) -> Response {
    let t = s.now();
    if !s.ready() {
        let seq = s.arrivals.fetch_add(1, Ordering::Relaxed);
        s.record(closed_record(seq, &headers, t, SimOutcome::RefusedLoading));
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "model is still loading");
    }
    let a = match admit(&s.cfg, api, &body) {
        Ok(a) => a,
        Err(refused) => return *refused,
    };
    let (ask, plan, prompt_tokens) = (a.ask, a.plan, a.ids.len() as u32);
    let seq = s.arrivals.fetch_add(1, Ordering::Relaxed);
    if fault_strikes(&s.cfg, seq, FaultKind::Error) {
        let status = StatusCode::from_u16(s.cfg.faults.error_status)
            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let mut g = closed_record(seq, &headers, t, SimOutcome::Error(status.as_u16()));
        g.prompt_tokens = prompt_tokens;
        s.record(g);
        return error_response(status, "injected fault");
    }
    let (tools, plan) = tool_answer(&s, seq, &ask, plan);
    let (drop_after, malformed_at, fault) = stream_faults(&s.cfg, seq, ask.stream, plan.tokens);
    let (tx, rx) = unbounded_channel();
    let sent = s.engine.send(Msg::Arrive(Pending {
        seq,
        t,
        request_id: request_id(&headers),
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        prompt_ids: a.ids,
        output_tokens: plan.tokens,
        reasoning_tokens: a.reasoning,
        prompt: s.cfg.record_prompts.then(|| ask.prompt.clone()),
        output_ids: if ask.chat {
            output_ids(&s.cfg, a.phash, plan.tokens)
        } else {
            Vec::new()
        },
        fault,
        reply: tx,
        priority: ask.priority,
        extra_ms: if a.on_adapter {
            s.cfg.adapter_cost_ms
        } else {
            0.0
        },
        images: image_costs(&s.cfg, &ask),
    }));
    if sent.is_err() {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "engine stopped");
    }
    if fault_strikes(&s.cfg, seq, FaultKind::SlowHeaders) {
        tokio::time::sleep(Duration::from_secs_f64(
            s.cfg.faults.slow_headers_ms / 1000.0,
        ))
        .await;
    }
    let out = Output {
        shared: s.clone(),
        wire: a.wire,
        id: format!("{}-{seq}", id_prefix(api)),
        phash: a.phash,
        prompt_tokens,
        reasoning: a.reasoning,
        finish_reason: plan.finish_reason,
        inputs: ask.inputs,
        usage: !ask.stream || (s.cfg.stream_usage && ask.include_usage),
        tools,
    };
    if ask.stream {
        stream_response(out, rx, drop_after, malformed_at)
    } else {
        full_response(out, rx).await
    }
}

/// A request that offers tools to an API that takes them: the calls it answers with (the
/// simulator's rule, `sim::tools`) as pieces, one a token, and the output plan they make — as
/// many tokens as pieces, cut by `max_tokens`. The truth waits for the request's record.
fn tool_answer(
    s: &Shared,
    seq: u64,
    ask: &Ask,
    plan: super::model::OutputPlan,
) -> (
    Option<Arc<Vec<super::tools::Piece>>>,
    super::model::OutputPlan,
) {
    if ask.tools.is_empty() {
        return (None, plan);
    }
    let in_engine = {
        let m = lock(&s.metrics);
        m.running + m.waiting
    };
    let a = super::tools::answer(&s.cfg, seq, &ask.tools, &ask.prompt, in_engine);
    lock(&s.tool_truth).insert(seq, (a.calls.len() as u32, a.error.map(|e| e.name())));
    // No call: a text answer of the planned length.
    if a.calls.is_empty() {
        return (None, plan);
    }
    let pieces = super::tools::pieces(&a.calls);
    let max = ask.max_tokens.unwrap_or(s.cfg.default_max_tokens).max(1);
    let n = pieces.len() as u32;
    let plan = super::model::OutputPlan {
        tokens: n.min(max),
        finish_reason: if n > max { "length" } else { "tool_calls" },
    };
    (Some(Arc::new(pieces)), plan)
}

/// The ids of every generated token (reasoning, then answer), cached with the prompt when the
/// request finishes. A client sends the answer back in the next turn without the reasoning (as
/// chat templates do), so after a reasoning answer only the prompt's blocks match again, as in
/// a real engine.
fn output_ids(cfg: &SimConfig, phash: u64, tokens: u32) -> Vec<u64> {
    if cfg.prefix_cache_blocks == 0 {
        return Vec::new();
    }
    output_words(cfg, phash, 0, tokens)
        .map(crate::text::hash_str)
        .collect()
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn closed_record(seq: u64, headers: &HeaderMap, t: f64, outcome: SimOutcome) -> GroundTruth {
    let mut l = Ledger::default();
    l.arrive(seq, request_id(headers), t, 0);
    l.set_outcome(seq, outcome);
    l.finish(seq, t, outcome).expect("just opened")
}

/// Everything needed to render one response's events.
struct Output {
    shared: Arc<Shared>,
    wire: &'static dyn Wire,
    id: String,
    phash: u64,
    prompt_tokens: u32,
    /// The first this many output tokens are reasoning.
    reasoning: u32,
    finish_reason: &'static str,
    inputs: u32,
    /// Usage is reported.
    usage: bool,
    /// A tool answer's pieces, one a token (instead of words).
    tools: Option<Arc<Vec<super::tools::Piece>>>,
}

impl Output {
    fn reply(&self) -> Reply<'_> {
        Reply {
            id: &self.id,
            model: &self.shared.cfg.model,
            model_json: &self.shared.model_json,
            created: self.shared.created,
        }
    }

    fn counts(
        &self,
        completion: u32,
        cached: u32,
        timings: Option<super::wire::Timings>,
    ) -> Counts {
        Counts {
            prompt: self.prompt_tokens,
            completion,
            cached,
            reasoning: self.reasoning.min(completion),
            reasons: self.shared.cfg.reasoning_share > 0.0,
            usage: self.usage,
            finish: self.finish_reason,
            inputs: self.inputs,
            timings,
        }
    }

    fn text(&self, first: u32, n: u32) -> String {
        let mut s = String::with_capacity(n as usize * 7);
        push_text(&self.shared.cfg, self.phash, first, n, &mut s);
        s
    }

    /// The text of tokens `first..first + n`, split into its reasoning and answer parts.
    fn parts(&self, first: u32, n: u32) -> (Option<String>, Option<String>) {
        let r = (first + n).min(self.reasoning).saturating_sub(first);
        (
            (r > 0).then(|| self.text(first, r)),
            (n > r).then(|| self.text(first + r, n - r)),
        )
    }
}

struct StreamState {
    out: Output,
    rx: UnboundedReceiver<Delivery>,
    drop_after: Option<u32>,
    malformed_at: Option<u32>,
    generated: u32,
    started: bool,
    finished: bool,
}

impl StreamState {
    /// The bytes of one chunk of tokens, or the configured fault: the connection cut once
    /// `drop_after` tokens are out, or one malformed event at `malformed_at`.
    async fn chunk(
        &mut self,
        first_index: u32,
        tokens: u32,
        mut buf: String,
    ) -> Result<Bytes, std::io::Error> {
        self.generated += tokens;
        if self.drop_after.is_some_and(|d| self.generated >= d) {
            self.finished = true;
            // Let hyper flush what was already yielded, so the cut falls mid-stream as
            // configured rather than before the headers reach the client.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let e = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "fault: drop");
            return Err(e);
        }
        let reply = self.out.reply();
        if self.malformed_at.is_some_and(|m| self.generated >= m) {
            self.malformed_at = None;
            self.out.wire.malformed(&reply, &mut buf);
        }
        if let Some(pieces) = &self.out.tools {
            let at = (first_index as usize).min(pieces.len());
            let to = (at + tokens as usize).min(pieces.len());
            self.out.wire.tool_chunk(&reply, &mut buf, &pieces[at..to]);
            return Ok(Bytes::from(buf));
        }
        let (r, c) = self.out.parts(first_index, tokens);
        self.out
            .wire
            .chunk(&reply, &mut buf, r.as_deref(), c.as_deref());
        Ok(Bytes::from(buf))
    }
}

fn stream_response(
    out: Output,
    rx: UnboundedReceiver<Delivery>,
    drop_after: Option<u32>,
    malformed_at: Option<u32>,
) -> Response {
    let content_type = out.wire.content_type();
    let state = StreamState {
        out,
        rx,
        drop_after,
        malformed_at,
        generated: 0,
        started: false,
        finished: false,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        let mut buf = String::new();
        if !st.started {
            st.started = true;
            // What an API sends before any token exists (vLLM's role-only chat chunk, Anthropic's
            // message_start): a client that takes it for the first token under-reports TTFT.
            st.out.wire.open(&st.out.reply(), &mut buf);
            if !buf.is_empty() {
                return Some((Ok(Bytes::from(buf)), st));
            }
        }
        match st.rx.recv().await {
            Some(Delivery::Chunk {
                first_index,
                tokens,
            }) => {
                let piece = st.chunk(first_index, tokens, buf).await;
                Some((piece, st))
            }
            Some(Delivery::Done { cached, timings }) => {
                st.finished = true;
                let counts = st.out.counts(st.generated, cached, timings);
                st.out.wire.end(&st.out.reply(), &mut buf, &counts);
                Some((Ok(Bytes::from(buf)), st))
            }
            Some(Delivery::Rejected) => {
                st.finished = true;
                st.out
                    .wire
                    .refused(&mut buf, "request does not fit in the KV cache");
                Some((Ok(Bytes::from(buf)), st))
            }
            None => {
                st.finished = true;
                let e = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "engine stopped");
                Some((Err(e), st))
            }
        }
    });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

async fn full_response(out: Output, mut rx: UnboundedReceiver<Delivery>) -> Response {
    let (mut reasoning, mut text) = (String::new(), String::new());
    let mut generated = 0;
    let (cached, timings) = loop {
        match rx.recv().await {
            Some(Delivery::Chunk {
                first_index,
                tokens,
            }) => {
                let (r, c) = out.parts(first_index, tokens);
                reasoning.push_str(r.as_deref().unwrap_or_default());
                text.push_str(c.as_deref().unwrap_or_default());
                generated += tokens;
            }
            Some(Delivery::Done { cached, timings }) => break (cached, timings),
            Some(Delivery::Rejected) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "request does not fit in the KV cache",
                );
            }
            None => return error_response(StatusCode::SERVICE_UNAVAILABLE, "engine stopped"),
        }
    };
    let counts = out.counts(generated, cached, timings);
    let whole = match &out.tools {
        Some(pieces) => {
            let mut calls: Vec<(String, String)> = Vec::new();
            for p in pieces.iter().take(generated as usize) {
                match &p.name {
                    Some(n) => calls.push((n.clone(), p.arguments.clone())),
                    None => {
                        if let Some(c) = calls.last_mut() {
                            c.1.push_str(&p.arguments);
                        }
                    }
                }
            }
            out.wire.whole_tools(&out.reply(), &calls, &counts)
        }
        None => out.wire.whole(&out.reply(), &reasoning, &text, &counts),
    };
    let mut resp = axum::Json(whole).into_response();
    for (name, value) in out.wire.head(&counts) {
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().insert(name, v);
        }
    }
    resp
}

async fn models(State(s): State<Arc<Shared>>) -> Response {
    // Adapters are listed after the base model, naming it as their parent (as vLLM lists
    // LoRA modules), so "the first model listed" stays the base.
    let mut data = vec![serde_json::json!({
        "id": s.cfg.model, "object": "model", "created": s.created, "owned_by": "goodput-sim",
        "root": s.cfg.model, "parent": null, "max_model_len": s.cfg.max_model_len,
    })];
    data.extend(s.cfg.adapters.iter().map(|a| {
        serde_json::json!({
            "id": a, "object": "model", "created": s.created, "owned_by": "goodput-sim",
            "root": a, "parent": s.cfg.model, "max_model_len": s.cfg.max_model_len,
        })
    }));
    axum::Json(serde_json::json!({ "object": "list", "data": data })).into_response()
}

async fn health(State(s): State<Arc<Shared>>) -> StatusCode {
    if s.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// The token ids of a chat template's `n` tokens (the same for every prompt).
fn template_ids(n: u32) -> impl Iterator<Item = u64> {
    (0..u64::from(n)).map(|i| crate::text::hash_str(&format!("<template {i}>")))
}

/// `POST /tokenize` in vLLM's shape (`{"model", "prompt"}` or `{"messages"}` → `{"count",
/// "max_model_len", "tokens"}`), also reading llama.cpp's `content` and TGI's `inputs`; counted as
/// the simulator counts prompts, one token per word.
async fn tokenize(State(s): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let v: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("invalid JSON: {e}")).into_response();
        }
    };
    let (text, template) = match ["prompt", "content", "inputs"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|x| x.as_str()))
    {
        Some(t) => (t.to_owned(), 0),
        // Messages are counted with the chat template, as vLLM counts them.
        None => (
            v["messages"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter_map(|x| x["content"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
            s.cfg.chat_template_tokens,
        ),
    };
    let tokens: Vec<u32> = template_ids(template)
        .chain(word_ids(&text))
        .map(|id| id as u32)
        .collect();
    axum::Json(serde_json::json!({
        "count": tokens.len(), "max_model_len": s.cfg.max_model_len, "tokens": tokens,
    }))
    .into_response()
}

async fn version() -> Response {
    axum::Json(serde_json::json!({
        "engine": "goodput-sim", "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let text = lock(&s.metrics).render(&s.cfg.model);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The simulated GPUs as NVIDIA's DCGM exporter publishes them (its metric names, units and
/// `gpu`/`UUID` labels), at this instant.
async fn telemetry(State(s): State<Arc<Shared>>) -> Response {
    let busy = lock(&s.metrics).running > 0;
    let text = lock(&s.meter).render(s.now(), busy);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[derive(Deserialize)]
struct Span {
    from_s: f64,
    to_s: f64,
}

/// `GET /ground_truth/energy?from_s=A&to_s=B`: joules every GPU drew over `[A, B]`, seconds on
/// the simulator's clock (the clock of `/ground_truth`'s microsecond times).
async fn ground_truth_energy(
    State(s): State<Arc<Shared>>,
    axum::extract::Query(span): axum::extract::Query<Span>,
) -> Response {
    let joules = lock(&s.meter).joules_between(span.from_s, span.to_s);
    axum::Json(serde_json::json!({
        "from_s": span.from_s, "to_s": span.to_s, "joules": joules, "gpus": s.cfg.power.gpus,
    }))
    .into_response()
}

async fn ground_truth_jsonl(State(s): State<Arc<Shared>>) -> Response {
    let mut out = String::new();
    for g in lock(&s.done).iter() {
        if let Ok(line) = serde_json::to_string(g) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    ([(header::CONTENT_TYPE, "application/jsonl")], out).into_response()
}
