//! The client: one HTTP connection pool, endpoint adapters behind one trait, and the exchange
//! that sends a request and timestamps every chunk as it arrives.
//!
//! It knows nothing of load models or phases: the driver hands it a prepared request and gets
//! back a filled [`Record`]. Per chunk it does one JSON parse (borrowing, so text without escapes
//! is not copied), or none when the chunk differs from the last parsed one only in its text
//! (`template`), one token count and one push; nothing is shared across requests.

pub mod direct;
pub mod flights;
pub mod h1;
mod pinned;
pub(crate) mod sse;
pub(crate) mod template;

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::api::Adapter;
use crate::contract::ClientTokenCount;
use crate::record::{Outcome, Record};
use sse::SseParser;

/// Everything shared by the requests of a run. Cheap to share behind an `Arc`.
pub struct Client {
    http: reqwest::Client,
    /// The load's pool, when the client has one: requests to http and https endpoints go
    /// on the client's own HTTP/1.1 connections (`direct`); the rest through `http`.
    direct: Option<direct::Direct>,
    /// Where requests go. Several (replicas, `target.urls`): each request goes to the one
    /// `spread` picks, and its record says which.
    endpoints: Vec<Endpoint>,
    spread: crate::contract::Spread,
    /// The headers every request of this API carries (its type, the API's own), made once.
    fixed_headers: HeaderMap,
    /// The API key's header, made once (`None`: no key, or one no header can carry).
    auth: Option<(HeaderName, HeaderValue)>,
    adapter: Box<dyn Adapter>,
    counting: ClientTokenCount,
    timeout: Duration,
    stream: bool,
    epoch: Instant,
    keep: KeepOutput,
    follow_redirects: bool,
    recount: bool,
    /// Keep each answer's text in its record (sessions).
    answers: bool,
    /// Requests sent and not yet finished, for the live view.
    in_flight: std::sync::atomic::AtomicU64,
    /// The load's requests in flight as the progress guard reads them (`driver::guard`).
    flights: Option<Arc<flights::Flights>>,
    /// When each request in flight got its first token, by plan index, when a run under way
    /// asks (the rule that stops a decided run); the driver removes a request when it ends.
    first_tokens: Option<FirstTokens>,
    /// Headers a traffic class's requests carry besides the pool's (`[[class]]`
    /// `request.headers`), by class name; secret ones marked sensitive.
    class_headers: std::collections::HashMap<String, reqwest::header::HeaderMap>,
    /// `[target.request]` headers that are credentials (read from the environment, or named
    /// like one): added per request rather than by the pools, so a redirect to another origin
    /// can go without them.
    credentials: HeaderMap,
}

/// First tokens of the requests in flight, by plan index (µs on the run's clock).
pub type FirstTokens = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u64, u64>>>;

/// What of the generated text a record keeps (`[quality]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeepOutput {
    #[default]
    Nothing,
    Digest,
    Text,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key is deliberately not shown.
        f.debug_struct("Client")
            .field(
                "endpoints",
                &self.endpoints.iter().map(|e| &e.url).collect::<Vec<_>>(),
            )
            .field("stream", &self.stream)
            .finish()
    }
}

pub use crate::contract::DEFAULT_KEEP_ALIVE;

/// Builds the HTTP connection pool used for a run: idle connections are reused for
/// `keep_alive`, and never when it is zero. `headers` (`[target.request] headers`: name, value,
/// secret) go with every request it sends, probes and scrapes too (a gateway that wants its
/// own key header wants it everywhere); secret ones are marked so no debug output shows them.
pub fn http_pool(
    keep_alive: Duration,
    headers: &[(String, String, bool)],
    tls: &crate::contract::Tls,
    connects: &ConnectLog,
) -> anyhow::Result<reqwest::Client> {
    pool_builder(keep_alive, headers, tls, connects, false)?
        .build()
        .or_else(|e| {
            // A machine with no CA certificates at all (a container from scratch) can still
            // measure plain-HTTP targets: without roots, only an https target fails, at its
            // handshake, with the hint `tls_hint` gives.
            if crate::text::error_chain(&e).contains("No CA certificates") {
                pool_builder(keep_alive, headers, tls, connects, true)?.build()
            } else {
                Err(e)
            }
            .map_err(anyhow::Error::from)
        })
        .map_err(|e| e.context("building the HTTP client"))
}

/// The pool the load's requests go through ([`direct`]): plain HTTP, and https with the trust
/// [`http_pool`] has; the same keep-alive, headers and connection log.
pub fn direct_pool(
    keep_alive: Duration,
    headers: &[(String, String, bool)],
    tls: &crate::contract::Tls,
    connects: &ConnectLog,
) -> direct::Direct {
    direct::Direct::new(
        keep_alive,
        pool_headers(headers),
        tls.clone(),
        connects.clone(),
    )
}

/// The rustls configuration of the direct pool's https connections: the platform's store,
/// `ca_file`'s certificates as roots and pinned ([`pinned`]), or nothing verified
/// (`insecure`); HTTP/1.1 offered by ALPN, as reqwest (built without HTTP/2) offers.
pub(crate) fn tls_config(tls: &crate::contract::Tls) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    install_tls_provider();
    let pinned = match &tls.ca_file {
        Some(f) => ca_certs(f)?,
        None => Vec::new(),
    };
    let verifier = pinned::PinnedOrVerified::new(pinned, false)?;
    let verifier = if tls.insecure {
        verifier.accepting_any()
    } else {
        verifier
    };
    let mut config = verifier.client_config()?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of `target.tls.ca_file` `f`.
fn ca_certs(
    f: &std::path::Path,
) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    let pem = crate::text::read_capped(f, crate::text::MAX_PEM_BYTES)
        .with_context(|| format!("reading target.tls.ca_file {}", f.display()))?;
    rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("target.tls.ca_file {}: not PEM certificates", f.display()))
}

/// The headers every request of a pool carries (name, value, secret); secret ones are marked
/// so no debug output shows them.
fn pool_headers(headers: &[(String, String, bool)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value, secret) in headers {
        // Validation checked both; a header that still does not parse is left out rather
        // than echoed into an error.
        if let (Ok(n), Ok(mut v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            v.set_sensitive(*secret);
            map.insert(n, v);
        }
    }
    map
}

/// The pool's settings; `roots_only`: trust only `target.tls.ca_file`, not the platform.
fn pool_builder(
    keep_alive: Duration,
    headers: &[(String, String, bool)],
    tls: &crate::contract::Tls,
    connects: &ConnectLog,
    roots_only: bool,
) -> anyhow::Result<reqwest::ClientBuilder> {
    use anyhow::Context;
    install_tls_provider();
    let idle = if keep_alive.is_zero() { 0 } else { usize::MAX };
    let map = pool_headers(headers);
    let mut b = reqwest::Client::builder();
    if tls.insecure {
        b = b.danger_accept_invalid_certs(true);
    } else if let Some(f) = &tls.ca_file {
        // The certificates in ca_file are roots, and each may be the server's own (pinned).
        let config = pinned::PinnedOrVerified::new(ca_certs(f)?, roots_only)
            .and_then(pinned::PinnedOrVerified::client_config)
            .with_context(|| format!("target.tls.ca_file {}", f.display()))?;
        b = b.tls_backend_preconfigured(config);
    } else if roots_only {
        b = b.tls_certs_only(Vec::new());
    }
    Ok(b.connector_layer(TimedConnects(connects.clone()))
        .default_headers(map)
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(keep_alive)
        .tcp_nodelay(TCP_NODELAY)
        .no_proxy()
        // Redirects are the client's decision, per request and recorded (`Client::execute`):
        // followed silently, a number would be another server's, with an extra round trip.
        .redirect(reqwest::redirect::Policy::none()))
}

/// Every new connection the pool opened: when, how long its setup took (DNS, TCP and, for
/// https, the TLS handshake, inside the request that needed it), and whether it succeeded.
/// Reused connections cost nothing and are not listed.
#[derive(Debug, Clone, Default)]
pub struct ConnectLog(Arc<Mutex<Connects>>);

#[derive(Debug, Default)]
struct Connects {
    /// When, how long, whether it succeeded.
    opened: Vec<(Instant, Duration, bool)>,
    /// The TLS sessions the direct pool negotiated (version, cipher suite, ALPN), counted.
    tls: std::collections::BTreeMap<String, u64>,
}

impl ConnectLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Connects> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, at: Instant, took: Duration, ok: bool) {
        self.lock().opened.push((at, took, ok));
    }

    /// A TLS session the direct pool negotiated, as `environment.json` names it.
    fn tls_session(&self, session: String) {
        *self.lock().tls.entry(session).or_default() += 1;
    }

    /// For `environment.json`: how many connections were opened (and failed), and their setup
    /// times in ms (p50, p99, max over the successful ones), from `since`; the TLS sessions
    /// the load's https connections negotiated.
    pub fn summary(&self, since: Instant) -> serde_json::Value {
        let v = self.lock();
        let mut ms: Vec<f64> = v
            .opened
            .iter()
            .filter(|c| c.2 && c.0 >= since)
            .map(|c| c.1.as_secs_f64() * 1e3)
            .collect();
        ms.sort_by(f64::total_cmp);
        let failed = v.opened.iter().filter(|c| !c.2 && c.0 >= since).count();
        let at = |p: f64| crate::stats::percentile_sorted(&ms, p);
        let mut out = serde_json::json!({
            "opened": ms.len(),
            "failed": failed,
            "setup_ms": { "p50": at(50.0), "p99": at(99.0), "max": ms.last() },
            "note": "DNS + TCP (+ TLS handshake for https) of each new connection, inside the latency of the request that opened it",
        });
        if !v.tls.is_empty() {
            out["tls_sessions"] = serde_json::json!(v.tls);
        }
        out
    }
}

/// The tower layer around reqwest's connector that times each connection it makes.
#[derive(Clone)]
struct TimedConnects(ConnectLog);

impl<S> tower::Layer<S> for TimedConnects {
    type Service = Timed<S>;
    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            log: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Timed<S> {
    inner: S,
    log: ConnectLog,
}

impl<S, R> tower::Service<R> for Timed<S>
where
    S: tower::Service<R>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let (at, log) = (Instant::now(), self.log.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let r = fut.await;
            log.push(at, at.elapsed(), r.is_ok());
            r
        })
    }
}

/// Makes ring rustls's crypto provider for the process (once; later calls do nothing). Every
/// HTTP client goodput builds needs one; a test building its own `reqwest` client calls this.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What to do about a failure whose cause is TLS (an untrusted certificate, a plain-HTTP port
/// spoken to as HTTPS), when it is; `chain` is the error's text.
pub fn tls_hint(chain: &str) -> Option<&'static str> {
    let c = chain.to_ascii_lowercase();
    if c.contains("causedasendentity") {
        // Said first: the general advice (set ca_file) may be what the user has already done.
        Some(
            "the server's certificate is itself a CA certificate (basicConstraints CA:TRUE, what `openssl req -x509` makes by default), which TLS accepts as a server's own only when pinned: put that very certificate in target.tls.ca_file (goodput then trusts it for its own names), or give the server a certificate the CA signs; target.tls.insecure = true skips verification, and is reported as such",
        )
    } else if c.contains("notvalidforname") || c.contains("not valid for name") {
        Some(
            "the server's certificate was not made for the host in target.url (its subjectAltName lists other names): use a name it was made for in target.url, or give the server a certificate for this host",
        )
    } else if c.contains("invalid peer certificate")
        || c.contains("unknownissuer")
        || c.contains("certificate") && c.contains("not trusted")
    {
        Some(
            "the server's TLS certificate is not trusted (not signed by a CA in the platform's store): set target.tls.ca_file to the PEM of the CA that signed it (or of the certificate itself, if self-signed); target.tls.insecure = true skips verification, and is reported as such",
        )
    } else if c.contains("wrong version number")
        || c.contains("corrupt message")
        || c.contains("invalidcontenttype")
    {
        Some("the server did not answer TLS: is it https, or plain http on this port?")
    } else {
        None
    }
}

/// Small writes (a request, a chunk) go out at once, without Nagle's wait for more.
const TCP_NODELAY: bool = true;

/// How [`http_pool`] connects, for `environment.json` (`client_http`): connection reuse is part of
/// what a latency includes.
pub fn http_pool_settings(keep_alive: Duration, tls: &crate::contract::Tls) -> PoolSettings {
    let trust = match (&tls.ca_file, tls.insecure) {
        (_, true) => "NOT VERIFIED (target.tls.insecure)".to_owned(),
        (Some(f), false) => format!("the platform's store and {}", f.display()),
        (None, false) => "the platform's store".to_owned(),
    };
    PoolSettings {
        http: "HTTP/1.1".to_owned(),
        // Which pool sends the load's requests (`Client::direct`; probes and scrapes always
        // go through reqwest).
        load_requests: "on goodput's own HTTP/1.1 connections and pool (src/client/h1.rs, src/client/direct.rs), over rustls for https://; probes and scrapes through reqwest".to_owned(),
        tls: format!("rustls (ring); certificates trusted: {trust}"),
        keep_alive_idle_s: keep_alive.as_secs_f64(),
        tcp_nodelay: TCP_NODELAY,
        proxy: "none".to_owned(), // `no_proxy()` above
        redirects: "not followed unless target.follow_redirects; each recorded".to_owned(),
        connections: None,
    }
}

/// The client's HTTP settings as `environment.json` keeps them (`client_http`), with how its
/// connections went during the load ([`Connects::summary`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PoolSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<serde_json::Value>,
    pub http: String,
    pub keep_alive_idle_s: f64,
    pub load_requests: String,
    pub proxy: String,
    pub redirects: String,
    pub tcp_nodelay: bool,
    pub tls: String,
}

/// One endpoint, worked out once: parsing the URL of every request was 2% of the client's CPU.
struct Endpoint {
    /// As given (for records and errors).
    url: String,
    /// Parsed; `None` where it does not parse (sent as text, it fails as it would have).
    parsed: Option<reqwest::Url>,
    /// As the direct pool reaches it, when it can.
    direct: Option<direct::Target>,
}

impl Endpoint {
    fn new(url: String) -> Endpoint {
        let parsed = reqwest::Url::parse(&url).ok();
        let direct = parsed.as_ref().and_then(direct::Target::of);
        Endpoint {
            url,
            parsed,
            direct,
        }
    }
}

/// Whether a redirect's endpoint is on the origin (scheme, host and port) the request was
/// first sent to: where credentials may go.
fn same_origin(e: &Endpoint, first: &Endpoint) -> bool {
    if std::ptr::eq(e, first) {
        return true;
    }
    match (&e.parsed, &first.parsed) {
        (Some(a), Some(b)) => {
            a.scheme() == b.scheme()
                && a.host_str() == b.host_str()
                && a.port_or_known_default() == b.port_or_known_default()
        }
        _ => false,
    }
}

/// The headers every request of `adapter`'s API carries: the body's type and the API's own
/// (Anthropic's `anthropic-version`).
fn fixed_headers(adapter: &dyn Adapter) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(8);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in adapter.headers() {
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            h.append(n, HeaderValue::from_static(value));
        }
    }
    h
}

/// The header that carries the API key, as `auth` asks for it; marked sensitive, so no debug
/// output shows it.
fn auth_header(key: &str, auth: crate::api::Auth) -> Option<(HeaderName, HeaderValue)> {
    let (name, value) = match auth {
        crate::api::Auth::Bearer => (header::AUTHORIZATION, format!("Bearer {key}")),
        crate::api::Auth::Header(name) => (
            HeaderName::from_bytes(name.as_bytes()).ok()?,
            key.to_owned(),
        ),
    };
    let mut value = HeaderValue::from_str(&value).ok()?;
    value.set_sensitive(true);
    Some((name, value))
}

/// Microseconds since `epoch`.
pub fn micros_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

impl Client {
    /// A client that counts tokens by chunk until told otherwise ([`Client::counting`]).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
        adapter: Box<dyn Adapter>,
        timeout: Duration,
        stream: bool,
        epoch: Instant,
    ) -> Client {
        let url = format!("{}{}", base_url.trim_end_matches('/'), adapter.path(stream));
        Client {
            http,
            direct: None,
            endpoints: vec![Endpoint::new(url)],
            spread: crate::contract::Spread::default(),
            fixed_headers: fixed_headers(adapter.as_ref()),
            auth: api_key.and_then(|k| auth_header(&k, adapter.auth())),
            adapter,
            counting: ClientTokenCount::Chunks,
            timeout,
            stream,
            epoch,
            keep: KeepOutput::Nothing,
            follow_redirects: false,
            recount: false,
            answers: false,
            first_tokens: None,
            in_flight: std::sync::atomic::AtomicU64::new(0),
            flights: None,
            class_headers: std::collections::HashMap::new(),
            credentials: HeaderMap::new(),
        }
    }

    /// How the client counts output tokens as the stream arrives
    /// (`measurement.client_token_count`).
    pub fn counting(mut self, counting: ClientTokenCount) -> Client {
        self.counting = counting;
        self
    }

    /// The `[target.request]` headers the pools were built without (name, value, secret):
    /// each request to the target's own origin carries them, none followed to another.
    pub fn credentials(mut self, headers: &[(String, String, bool)]) -> Client {
        self.credentials = pool_headers(headers);
        self
    }

    /// Headers each traffic class's requests carry (name, value, secret), by class name. A
    /// name or value the contract's validation let through is valid; one that is not is left
    /// out rather than failing every request.
    pub fn class_headers(
        mut self,
        classes: &[(String, crate::workload::environment::Headers)],
    ) -> Client {
        for (class, hs) in classes {
            let mut map = reqwest::header::HeaderMap::new();
            for (name, value, secret) in hs {
                if let (Ok(n), Ok(mut v)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    v.set_sensitive(*secret);
                    map.insert(n, v);
                }
            }
            self.class_headers.insert(class.clone(), map);
        }
        self
    }

    /// Sends each request to one of several replicas' base URLs, as `spread` picks it, and
    /// records which (`Record::url`). One URL or none: every request to the client's own.
    pub fn replicas(mut self, bases: &[String], spread: crate::contract::Spread) -> Client {
        if bases.len() > 1 {
            let path = self.adapter.path(self.stream);
            self.endpoints = bases
                .iter()
                .map(|b| Endpoint::new(format!("{}{path}", b.trim_end_matches('/'))))
                .collect();
            self.spread = spread;
        }
        self
    }

    /// Sends the requests to http and https endpoints through `pool`, on the client's own
    /// HTTP/1.1 connections (see [`direct`]), not through reqwest.
    pub fn direct(mut self, pool: direct::Direct) -> Client {
        self.direct = Some(pool);
        self
    }

    /// Keeps the generated text's digest (and the text) in every successful record.
    pub fn keep_output(mut self, keep: KeepOutput) -> Client {
        self.keep = keep;
        self
    }

    /// Follows redirects (at most [`MAX_REDIRECTS`]), each recorded in the request's record;
    /// without it a redirect is a failure of its own class naming where it pointed.
    pub fn follow_redirects(mut self, follow: bool) -> Client {
        self.follow_redirects = follow;
        self
    }

    /// Keeps the text as it arrived in a record whose count the run must redo in the model's
    /// tokens afterwards: one the server reported no usage for, or usage other than the
    /// client's count (chunks that carried several tokens).
    pub fn recount(mut self, recount: bool) -> Client {
        self.recount = recount;
        self
    }

    /// Keeps each successful answer's text (reasoning left out) in the record, in memory only
    /// ([`Record::answer`]): a session's next turn sends it back.
    pub fn keep_answers(mut self, keep: bool) -> Client {
        self.answers = keep;
        self
    }

    /// Notes each request's first token in `seen` (plan index → µs) as it arrives.
    pub fn first_tokens(mut self, seen: FirstTokens) -> Client {
        self.first_tokens = Some(seen);
        self
    }

    /// Tells `book` of every request from its send to its end (the progress guard's view).
    pub fn flights(mut self, book: Arc<flights::Flights>) -> Client {
        self.flights = Some(book);
        self
    }

    /// The text is collected as it arrives.
    /// A chunk of answer text counts as one token and no answer is kept (a session's or a
    /// task's).
    fn counts_chunks(&self) -> bool {
        !self.answers && self.counting == ClientTokenCount::Chunks
    }

    fn collects_text(&self) -> bool {
        self.keep != KeepOutput::Nothing || self.recount
    }

    /// A successful answer's text: its digest and text as `[quality]` asks, and what a
    /// recount needs.
    fn finished(&self, rec: &mut Record, text: Option<String>, chunk_bytes: Vec<u32>) {
        if self.answers && rec.answer.is_none() {
            rec.answer = Some(String::new());
        }
        // A tool dataset's answer is graded as it ends, so the run counts only right calls.
        if let Some(case) = rec.tool_case.clone() {
            rec.tool_grade = Some(crate::quality::tools::grade(&case, &rec.tool_calls));
        }
        self.keep(rec, text.as_deref());
        if self.recount && rec.usage_completion_tokens != Some(rec.client_output_tokens) {
            rec.received = Some(Box::new(crate::record::Received {
                text: text.unwrap_or_default(),
                chunk_bytes,
            }));
        }
    }

    fn keep(&self, rec: &mut Record, text: Option<&str>) {
        if self.keep == KeepOutput::Nothing {
            return;
        }
        let text = text.unwrap_or_default();
        rec.output_digest = Some(crate::quality::digest(text).into());
        // A quality probe keeps its text whatever the setting: probes are few, and compare
        // measures token agreement from them.
        if self.keep == KeepOutput::Text || rec.is_probe() {
            rec.output_text = Some(kept_text(text).into());
        }
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn now_us(&self) -> u64 {
        micros_since(self.epoch)
    }

    /// Requests being executed now (sent, or about to be, and not finished).
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn adapter(&self) -> &dyn Adapter {
        self.adapter.as_ref()
    }

    /// Sends `body` and fills `rec` with what happened. Never panics on server behaviour; every
    /// failure becomes an outcome with what was measured before it kept.
    pub async fn execute(&self, body: Bytes, rec: &mut Record, cancel: &CancellationToken) {
        let _in_flight = InFlight::enter(&self.in_flight);
        // The timeout and the cancellation are made once per request and polled by reference:
        // made afresh per chunk, each would register and deregister itself with the timer and
        // the run's token, locks shared by every request. The token is the request's own child,
        // so polling it locks nothing another request touches.
        let cancel = cancel.child_token();
        let cancelled = cancel.cancelled();
        if let Some(why) = rec.images.iter().find_map(|i| i.error.clone()) {
            return rec.fail(Outcome::Input, why, self.now_us());
        }
        let sent = self.now_us();
        rec.sent_us = Some(sent);
        let deadline_us = sent + self.timeout.as_micros() as u64;
        let timeout = tokio::time::sleep_until(tokio::time::Instant::from_std(
            self.epoch + Duration::from_micros(deadline_us),
        ));
        tokio::pin!(cancelled, timeout);
        let mut ends = Ends {
            timeout,
            cancelled,
            deadline_us,
            flight: self.flights.as_deref().map(|f| Flight::enter(f, sent)),
        };
        // Boxed: waiting for the head holds the request (and a connection's making) in 1.4 KB
        // that a future in place would keep for as long as the answer streams.
        let Some((resp, url)) = Box::pin(self.send(&body, rec, &mut ends)).await else {
            return;
        };
        if body.len() >= crate::record::UPLOAD_RECORDED_FROM {
            rec.request_bytes = Some(body.len() as u64);
            if let Answer::Direct(h, _) = &resp {
                rec.upload_us = h.written.map(|t| {
                    (t.saturating_duration_since(self.epoch).as_micros() as u64)
                        .saturating_sub(sent)
                });
            }
        }
        let Some(resp) = self.accept_head(resp, &url, rec, &mut ends).await else {
            return;
        };
        self.read_body(resp, &url, rec, &mut ends).await;
        if let Some(f) = &mut ends.flight
            && rec.is_ok()
        {
            f.ticket.ok_at = rec.end_us;
        }
    }

    /// Sends the request (again at once if a stale pooled connection swallowed it; to each
    /// redirect's target when following them) until an answer's head arrives; the answer and
    /// the URL that gave it. `None`: the failure is in `rec`.
    async fn send(
        &self,
        body: &Bytes,
        rec: &mut Record,
        ends: &mut Ends<'_, '_>,
    ) -> Option<(Answer, Cow<'_, str>)> {
        // Borrowed unless a redirect is followed: no allocation per request.
        let k = match self.endpoints.len() {
            1 => 0,
            n => {
                let k = self.spread.pick(rec.index, rec.conversation(), n);
                rec.url = Some(k as u32);
                k
            }
        };
        let first = &self.endpoints[k];
        // Where the last redirect pointed, worked out.
        let mut redirected: Option<Endpoint> = None;
        loop {
            let endpoint = redirected.as_ref().unwrap_or(first);
            let url = endpoint.url.as_str();
            let headers = self.request_headers(rec, same_origin(endpoint, first));
            let sent = self.post(endpoint, headers, body);
            let r = tokio::select! {
                r = sent => r,
                () = &mut ends.timeout => {
                    rec.fail(Outcome::Timeout, format!("no response headers within {:?}", self.timeout), self.now_us());
                    return None;
                }
                () = &mut ends.cancelled => {
                    rec.fail(Outcome::Interrupted, "run interrupted", self.now_us());
                    return None;
                }
            };
            let resp = match r {
                Ok(resp) => resp,
                // The pooled connection it was written to had been closed by the server, with
                // no byte of an answer: the server never saw this request. Sent again at once
                // on a new connection; the latency keeps the failed attempt's microseconds.
                Err(e) if rec.retried.is_none() && e.stale_connection() => {
                    rec.retried = Some(e.describe().into());
                    continue;
                }
                Err(e) => {
                    rec.fail(e.classify(), at_url(e.describe(), url), self.now_us());
                    return None;
                }
            };
            let status = resp.status();
            if !status.is_redirection() {
                let url = match redirected {
                    Some(e) => Cow::Owned(e.url),
                    None => Cow::Borrowed(first.url.as_str()),
                };
                return Some((resp, url));
            }
            match location(resp.headers(), url) {
                Some(next) if self.follow_redirects && rec.redirects.len() < MAX_REDIRECTS => {
                    rec.redirects.push(format!("{} {next}", status.as_u16()));
                    redirected = Some(Endpoint::new(next));
                }
                to => {
                    rec.http_status = Some(status.as_u16());
                    let why = if self.follow_redirects {
                        format!("more than {MAX_REDIRECTS} redirects")
                    } else {
                        "redirects are not followed (target.follow_redirects)".into()
                    };
                    let to = to.as_deref().unwrap_or("(no Location)");
                    rec.fail(
                        Outcome::Redirect,
                        format!("HTTP {status} from {url} to {to}: {why}"),
                        self.now_us(),
                    );
                    return None;
                }
            }
        }
    }

    /// One POST of the body to `endpoint`: on the client's own HTTP/1 pool when the endpoint
    /// is one it reaches, else through reqwest; the answer's head.
    async fn post(
        &self,
        endpoint: &Endpoint,
        headers: HeaderMap,
        body: &Bytes,
    ) -> Result<Answer, SendError> {
        let direct = self.direct.as_ref().zip(endpoint.direct.as_ref());
        if let Some((pool, target)) = direct {
            return pool
                .post(target, &headers, body)
                .await
                .map(|(head, conn)| Answer::Direct(head, conn))
                .map_err(SendError::Direct);
        }
        let req = match &endpoint.parsed {
            Some(u) => self.http.post(u.clone()),
            None => self.http.post(endpoint.url.as_str()),
        };
        // Boxed, as the direct pool's connecting is: reqwest's future is kilobytes.
        Box::pin(req.headers(headers).body(body.clone()).send())
            .await
            .map(Answer::Reqwest)
            .map_err(SendError::Reqwest)
    }

    /// The headers of one request: its API's, its own, its class's, the credentials and the
    /// key's (the pool's are added by whichever pool sends it, where the request does not set
    /// them). To another origin than the target's (a followed redirect), no credential goes:
    /// not the key, not a secret or credential-named header.
    fn request_headers(&self, rec: &Record, same_origin: bool) -> HeaderMap {
        let mut h = self.fixed_headers.clone();
        if let Ok(v) = HeaderValue::from_str(&rec.request_id) {
            h.insert(HeaderName::from_static("x-request-id"), v);
        }
        if let Some(v) = rec
            .trace_id
            .as_deref()
            .and_then(crate::otlp::traceparent)
            .and_then(|t| HeaderValue::from_str(&t).ok())
        {
            h.insert(HeaderName::from_static("traceparent"), v);
        }
        let credential = |name: &HeaderName, value: &HeaderValue| {
            value.is_sensitive() || crate::secrets::is_credential_header(name.as_str())
        };
        if let Some(hs) = rec.class.as_ref().and_then(|c| self.class_headers.get(c)) {
            for (name, value) in hs {
                if same_origin || !credential(name, value) {
                    h.append(name, value.clone());
                }
            }
        }
        if same_origin {
            for (name, value) in &self.credentials {
                if !h.contains_key(name) {
                    h.insert(name, value.clone());
                }
            }
            if let Some((name, value)) = &self.auth {
                h.insert(name, value.clone());
            }
        }
        h
    }

    /// The answer's head: a success status, and an event stream when one was asked for.
    /// `None`: the failure is in `rec`.
    async fn accept_head(
        &self,
        resp: Answer,
        url: &str,
        rec: &mut Record,
        ends: &mut Ends<'_, '_>,
    ) -> Option<Answer> {
        let status = resp.status();
        rec.http_status = Some(status.as_u16());
        if !status.is_success() {
            let snippet = self.read_snippet(resp, ends).await;
            rec.fail(
                Outcome::HttpStatus,
                format!("HTTP {status} from {url}: {snippet}"),
                self.now_us(),
            );
            return None;
        }
        let headers = resp.headers();
        // TGI states its timing in a whole answer's head (a streamed one's carries none).
        if let Some(t) =
            crate::api::timing::tgi_headers(|n| headers.get(n).and_then(|v| v.to_str().ok()))
        {
            rec.engine_timing = Some(t);
        }
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let framing = self.adapter.framing();
        if self.stream && !content_type.is_some_and(|v| framing.accepts(v)) {
            let ct = content_type.unwrap_or("none");
            rec.fail(
                Outcome::NotStreamed,
                format!(
                    "streaming was asked for but {url} answered with content-type {ct}, not {}",
                    framing.content_type()
                ),
                self.now_us(),
            );
            return None;
        }
        Some(resp.without_head())
    }

    /// The start of an error's body, for its message: what arrives of its first 300 bytes
    /// before the request's deadline. A body read to its end leaves its connection for the
    /// next request (a server answering 429s keeps its connections).
    async fn read_snippet(&self, mut resp: Answer, ends: &mut Ends<'_, '_>) -> String {
        let mut out = Vec::new();
        let ended = loop {
            let next = tokio::select! {
                biased;
                n = resp.chunk() => n,
                () = &mut ends.timeout => break false,
                () = &mut ends.cancelled => break false,
            };
            match next {
                Some(Ok(b)) => {
                    out.extend_from_slice(&b);
                    if out.len() > 300 {
                        break false;
                    }
                }
                Some(Err(_)) => break false,
                None => break true,
            }
        };
        if ended {
            resp.done(self.direct.as_ref());
        }
        out.truncate(300);
        String::from_utf8_lossy(&out).trim().to_owned()
    }

    /// Reads the body as it arrives, timestamping every event, until its end, the deadline,
    /// the cancellation or a limit.
    async fn read_body(
        &self,
        mut body: Answer,
        url: &str,
        rec: &mut Record,
        ends: &mut Ends<'_, '_>,
    ) {
        let mut parser = SseParser::for_framing(self.adapter.framing());
        let mut state = StreamState::default();
        let mut received = 0usize;
        let too_slow = || format!("response not complete within {:?}", self.timeout);
        loop {
            // The body first: a chunk that is ready is read without polling the others.
            let next = tokio::select! {
                biased;
                n = body.chunk() => n,
                () = &mut ends.timeout => return rec.fail(Outcome::Timeout, too_slow(), self.now_us()),
                () = &mut ends.cancelled => return rec.fail(Outcome::Interrupted, "run interrupted", self.now_us()),
            };
            let now = self.now_us();
            // A body that is never pending would never let the timer be polled.
            if now > ends.deadline_us {
                return rec.fail(Outcome::Timeout, too_slow(), now);
            }
            let bytes = match next {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => {
                    return rec.fail(Outcome::StreamBroken, at_url(e.describe(), url), now);
                }
                None => {
                    // A last JSON line without its line end is still an event.
                    let _ = parser.finish(&mut Taker::new(self, now, rec, &mut state));
                    if let Some((class, msg)) = state.failure.take() {
                        return rec.fail(class, msg, now);
                    }
                    body.done(self.direct.as_ref());
                    if state.done {
                        return self.stream_done(rec, state, url, now);
                    }
                    return self.body_ended(rec, state, now);
                }
            };
            received += bytes.len();
            if received > MAX_RESPONSE_BYTES {
                let limit = MAX_RESPONSE_BYTES >> 20;
                return rec.fail(
                    Outcome::TooLarge,
                    format!("the response from {url} passed {limit} MiB, the client's limit for one answer"),
                    now,
                );
            }
            if self.stream {
                let _ = parser.feed(&bytes, &mut Taker::new(self, now, rec, &mut state));
            } else {
                state.whole.extend_from_slice(&bytes);
            }
            ends.answered(now, rec);
            if let Some(why) = parser.too_large() {
                return rec.fail(Outcome::TooLarge, format!("{why} from {url}"), now);
            }
            if let Some((class, msg)) = state.failure.take() {
                return rec.fail(class, msg, now);
            }
            if state.done {
                body.done(self.direct.as_ref());
                return self.stream_done(rec, state, url, now);
            }
        }
    }

    /// The stream's end arrived (`[DONE]`, or the API's last event).
    fn stream_done(&self, rec: &mut Record, mut state: StreamState, url: &str, now: u64) {
        rec.end_us = Some(now);
        if !state.any_event {
            let msg = format!("{url} sent [DONE] before any event: nothing generated");
            return rec.fail(Outcome::Empty, msg, now);
        }
        if let Some(msg) = foreign_stream(&mut state, url) {
            return rec.fail(Outcome::Malformed, msg, now);
        }
        self.finished(rec, state.text, state.chunk_bytes)
    }

    /// The body ended (no `[DONE]` seen): a whole answer is parsed; a stream must have
    /// finished.
    fn body_ended(&self, rec: &mut Record, mut state: StreamState, now: u64) {
        rec.end_us = Some(now);
        if !self.stream {
            return self.finish_whole(&state.whole, rec, now);
        }
        if let Some(msg) = foreign_stream(&mut state, "the server") {
            return rec.fail(Outcome::Malformed, msg, now);
        }
        if rec.finish_reason.is_none() {
            rec.fail(
                Outcome::StreamBroken,
                "stream ended without [DONE] or a finish_reason",
                now,
            );
        } else {
            self.finished(rec, state.text, state.chunk_bytes);
        }
    }

    fn on_event(
        &self,
        data: &[u8],
        now: u64,
        rec: &mut Record,
        st: &mut StreamState,
    ) -> ControlFlow<()> {
        if data == b"[DONE]" {
            st.done = true;
            return ControlFlow::Break(());
        }
        st.any_event = true;
        // The usual token event, read from the last event's shape: its one text is all it says.
        if let Some((text, part)) = st.template.read(data) {
            self.on_shaped(text, part, now, rec, st);
            return ControlFlow::Continue(());
        }
        let ev = match self.adapter.parse_event(data) {
            Ok(ev) => {
                st.template.learn(data, &ev);
                ev
            }
            Err(e) => {
                let class = failure_class(&e);
                let shown = snippet(data);
                st.failure = Some((class, format!("{e}; event: {shown}")));
                return ControlFlow::Break(());
            }
        };
        if !st.understood {
            if ev.says_anything() {
                st.understood = true;
            } else {
                st.foreign += 1;
                if st.first_foreign.is_none() {
                    st.first_foreign = Some(snippet(data));
                }
            }
        }
        if rec.response_id.is_none() {
            rec.response_id = ev.id.map(Into::into);
        }
        if rec.response_model.is_none() {
            rec.response_model = ev.model.map(Into::into);
        }
        if let Some(f) = ev.finish_reason {
            rec.finish_reason = Some(f.into());
        }
        take_stated(rec, ev.usage.as_ref(), ev.timing);
        let reasoning = ev.reasoning.as_deref().filter(|t| !t.is_empty());
        let answer = ev.text.as_deref().filter(|t| !t.is_empty());
        if reasoning.is_some() || answer.is_some() {
            self.on_text(reasoning, answer, now, rec, st);
        } else if let Some(piece) = tool_piece(rec, &ev.tool_calls) {
            // A piece of a tool call is generated text: timed and counted as a chunk.
            self.on_text(None, Some(&piece), now, rec, st);
        } else if ev.choice {
            rec.bare_us.push(now);
        }
        // The API's last event ends the stream once what it carries is taken.
        if ev.done {
            st.done = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// An event of the kept shape arrived at `now`: its one text, in `part`, is all it says.
    fn on_shaped(
        &self,
        text: &str,
        part: template::Part,
        now: u64,
        rec: &mut Record,
        st: &mut StreamState,
    ) {
        st.understood = true;
        match part {
            template::Part::Text => self.on_text(None, Some(text), now, rec, st),
            template::Part::Reasoning => self.on_text(Some(text), None, now, rec, st),
        }
    }

    /// One chunk of generated text arrived at `now`: reasoning, answer, or both (at least one,
    /// neither empty).
    fn on_text(
        &self,
        reasoning: Option<&str>,
        answer: Option<&str>,
        now: u64,
        rec: &mut Record,
        st: &mut StreamState,
    ) {
        if self.answers
            && let Some(a) = answer
        {
            rec.answer.get_or_insert_with(String::new).push_str(a);
        }
        let parts = [reasoning, answer];
        if self.collects_text() {
            st.text.get_or_insert_with(String::new);
            st.keep_text(parts.iter().flatten().copied());
        }
        // A chunk of reasoning and answer text counts as one chunk.
        let n = match self.counting {
            ClientTokenCount::Chunks => 1,
            ClientTokenCount::Words => parts.iter().flatten().map(|p| self.count(p)).sum(),
        };
        // Reasoning before any answer text: the answer has not started yet.
        if answer.is_none() && rec.reasoning_chunks as usize == rec.chunks.len() {
            rec.reasoning_chunks += 1;
        }
        if rec.first_token_us.is_none() {
            rec.first_token_us = Some(now);
            if let Some(seen) = &self.first_tokens {
                seen.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(rec.index, now);
            }
            // Room for the answer the plan asked for, up to a bound (a stream's memory stays
            // small when `max_tokens` is large): growing these a doubling at a time was a
            // tenth of the time spent on each event.
            let expect = (rec.output_tokens_planned as usize).clamp(16, RESERVE_CHUNKS);
            rec.chunks.reserve(expect);
            if let Some(text) = &mut st.text {
                text.reserve(expect * 4);
                st.chunk_bytes.reserve(expect);
            }
        }
        rec.chunks.push(now, n);
        rec.client_output_tokens += n;
    }

    fn finish_whole(&self, body: &[u8], rec: &mut Record, now: u64) {
        match self.adapter.parse_event(body) {
            Ok(ev) if !ev.says_anything() => rec.fail(
                Outcome::Malformed,
                format!(
                    "the answer says nothing this API (target.api) says: is it the server's API? It began: {}",
                    snippet(body)
                ),
                now,
            ),
            Ok(ev) => {
                rec.response_id = ev.id.map(Into::into);
                rec.response_model = ev.model.map(Into::into);
                rec.finish_reason = ev.finish_reason.map(Into::into);
                take_stated(rec, ev.usage.as_ref(), ev.timing);
                let _ = tool_piece(rec, &ev.tool_calls);
                if self.answers {
                    rec.answer = Some(ev.text.as_deref().unwrap_or_default().to_owned());
                }
                let text = match (ev.reasoning, ev.text) {
                    (Some(r), Some(t)) => Some(format!("{r}{t}")),
                    (r, t) => r.or(t).map(Cow::into_owned),
                };
                rec.client_output_tokens = text.as_deref().map_or(0, |t| self.count(t));
                self.finished(rec, text, Vec::new());
            }
            Err(e) => rec.fail(failure_class(&e), e.to_string(), now),
        }
    }

    fn count(&self, text: &str) -> u32 {
        match self.counting {
            // A non-empty chunk carries at least one token even if it is all whitespace.
            ClientTokenCount::Words => crate::text::count_words(text).max(1),
            ClientTokenCount::Chunks => 1,
        }
    }
}

/// The start of what a server sent, for a message: at most 200 bytes, as text.
fn snippet(data: &[u8]) -> String {
    String::from_utf8_lossy(&data[..data.len().min(200)]).into_owned()
}

/// Gathers an event's pieces of tool calls into the record's calls; returns the text they
/// add (arguments, or a name alone), `None` when the event carries none.
fn tool_piece(rec: &mut Record, deltas: &[crate::api::ToolDelta<'_>]) -> Option<String> {
    if deltas.is_empty() {
        return None;
    }
    let mut piece = String::new();
    let rare: &mut crate::record::Rare = rec;
    for d in deltas {
        crate::api::gather_tool_call(&mut rare.tool_calls, d);
        match (&d.arguments, &d.name) {
            (Some(a), _) => piece.push_str(a),
            (None, Some(n)) => piece.push_str(n),
            _ => {}
        }
    }
    (!piece.is_empty()).then_some(piece)
}

/// A stream none of whose events said anything this API says: another API's stream (an
/// OpenAI chat stream read as Anthropic's, say), which would otherwise pass as a success
/// with no tokens. The message, when it was one.
fn foreign_stream(st: &mut StreamState, from: &str) -> Option<String> {
    (!st.understood && st.foreign > 0).then(|| {
        format!(
            "none of the {} events {from} sent is one this API (target.api) understands: is it the server's API? The first: {}",
            st.foreign,
            st.first_foreign.take().unwrap_or_default()
        )
    })
}

/// The class of an answer an adapter could not take: the server's own error, or not the API's
/// format.
fn failure_class(e: &crate::api::EventError) -> Outcome {
    match e {
        crate::api::EventError::Server(_) => Outcome::StreamError,
        crate::api::EventError::Malformed(_) => Outcome::Malformed,
    }
}

/// What the server stated of the request in an event (its usage, its own timing) into the
/// record.
fn take_stated(
    rec: &mut Record,
    usage: Option<&crate::api::Usage>,
    timing: Option<crate::record::EngineTiming>,
) {
    if let Some(u) = usage {
        take_usage(rec, u);
    }
    if let Some(t) = timing {
        rec.engine_timing = Some(t);
    }
}

/// The server's token usage into the record; a count an event leaves out keeps the one an
/// earlier event gave.
fn take_usage(rec: &mut Record, u: &crate::api::Usage) {
    rec.usage_prompt_tokens = u.prompt_tokens.or(rec.usage_prompt_tokens);
    rec.usage_completion_tokens = u.completion_tokens.or(rec.usage_completion_tokens);
    // (Rare fields are set only when there is a count: setting one boxes them.)
    if let Some(n) = u.cached_tokens() {
        rec.usage_cached_tokens = Some(n);
    }
    if let Some(n) = u.reasoning_tokens() {
        rec.usage_reasoning_tokens = Some(n);
    }
}

/// What can end a request before its answer does: the deadline and the run's cancellation,
/// made once per request and polled by reference.
struct Ends<'t, 'c> {
    timeout: std::pin::Pin<&'t mut tokio::time::Sleep>,
    cancelled: std::pin::Pin<&'t mut tokio_util::sync::WaitForCancellationFuture<'c>>,
    deadline_us: u64,
    /// The request's place in the progress guard's book, when the client keeps one.
    flight: Option<Flight<'c>>,
}

impl Ends<'_, '_> {
    /// Bytes of the answer arrived at `now`: the book hears of the progress, and of the first
    /// token once the record has it.
    #[inline]
    fn answered(&mut self, now: u64, rec: &Record) {
        if let Some(f) = &mut self.flight {
            f.book.progress(now);
            if let Some(at) = rec.first_token_us {
                f.book.first_token(&mut f.ticket, at);
            }
        }
    }
}

/// A request in the progress guard's book while it lives: it leaves when dropped, however the
/// request ends (a request future dropped mid-stream too).
struct Flight<'b> {
    book: &'b flights::Flights,
    ticket: flights::Ticket,
}

impl<'b> Flight<'b> {
    fn enter(book: &'b flights::Flights, now: u64) -> Flight<'b> {
        Flight {
            book,
            ticket: book.enter(now),
        }
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.book.leave(&self.ticket);
    }
}

#[derive(Default)]
struct StreamState {
    done: bool,
    /// An event other than `[DONE]` arrived.
    any_event: bool,
    /// Events other than `[DONE]` that said nothing this API says (see
    /// [`crate::api::StreamEvent::says_anything`]) before the first that did, and the first
    /// of them as received (its start): a stream of only such is another API's.
    foreign: u32,
    first_foreign: Option<String>,
    understood: bool,
    /// The generated text so far, when it is kept.
    text: Option<String>,
    /// Bytes of text each chunk added, when the text is kept.
    chunk_bytes: Vec<u32>,
    failure: Option<(Outcome, String)>,
    whole: Vec<u8>,
    /// The last parsed event's shape: the next of that shape is read without parsing.
    template: template::Template,
}

impl StreamState {
    /// A chunk's text (its parts, in order) added to the kept text, and its length in bytes to
    /// `chunk_bytes`, when the text is kept.
    fn keep_text<'a>(&mut self, parts: impl IntoIterator<Item = &'a str>) {
        if let Some(text) = &mut self.text {
            let before = text.len();
            parts.into_iter().for_each(|p| text.push_str(p));
            self.chunk_bytes.push((text.len() - before) as u32);
        }
    }
}

/// A stream's events as one read hands them over, all arriving at `now`.
struct Taker<'a> {
    client: &'a Client,
    now: u64,
    rec: &'a mut Record,
    st: &'a mut StreamState,
}

impl<'a> Taker<'a> {
    #[inline]
    fn new(client: &'a Client, now: u64, rec: &'a mut Record, st: &'a mut StreamState) -> Self {
        Taker {
            client,
            now,
            rec,
            st,
        }
    }
}

impl sse::Events for Taker<'_> {
    /// Events of the kept shape, taken whole from the read (see `Template::frame`). Answer text
    /// after the first token, when no answer is kept and a chunk counts as one token, is the
    /// same chunk at the same instant each time: such events in a row are pushed at once
    /// (`Chunks::push_many`), their text kept as [`Client::on_text`] keeps it; the rest go
    /// through `on_text` one by one, in order.
    fn whole(&mut self, bytes: &[u8]) -> usize {
        let by_chunk = self.client.counts_chunks();
        let (mut taken, mut pending) = (0, 0);
        while let Some((n, text, part)) = self.st.template.frame(&bytes[taken..]) {
            taken += n;
            if by_chunk && part == template::Part::Text && self.rec.first_token_us.is_some() {
                // Kept (for the quality check or a recount) exactly when `on_text` keeps it:
                // its first token made the text.
                self.st.keep_text([text]);
                pending += 1;
                continue;
            }
            self.counted(std::mem::take(&mut pending));
            self.client
                .on_shaped(text, part, self.now, self.rec, self.st);
        }
        self.counted(pending);
        taken
    }

    fn event(&mut self, data: &[u8]) -> ControlFlow<()> {
        self.client.on_event(data, self.now, self.rec, self.st)
    }
}

impl Taker<'_> {
    /// `n` chunks of answer text, a token each, after the first token, their text kept
    /// already: what [`Client::on_text`] makes of them one by one.
    fn counted(&mut self, n: u32) {
        if n > 0 {
            self.st.understood = true;
            self.rec.chunks.push_many(self.now, 1, n);
            self.rec.client_output_tokens += n;
        }
    }
}

/// The most bytes one response may carry (streamed or not): past it the request fails as
/// `too_large`. A 128k-token answer streamed as OpenAI chunks is about 30 MB.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// The most of an answer's text a record keeps (its digest is of the whole): a record stays
/// within the line a bundle's reader takes ([`crate::record::MAX_LINE_BYTES`]).
pub const MAX_KEPT_TEXT: usize = 32 << 20;

/// `text` cut at [`MAX_KEPT_TEXT`] bytes, at a character's start.
fn kept_text(text: &str) -> &str {
    if text.len() <= MAX_KEPT_TEXT {
        return text;
    }
    let mut at = MAX_KEPT_TEXT;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

/// The most chunks a stream makes room for when its first one arrives (then it grows as
/// vectors do).
const RESERVE_CHUNKS: usize = 1024;

/// Redirects followed for one request when `target.follow_redirects` is on.
pub const MAX_REDIRECTS: usize = 5;

/// Where a redirect points, resolved against the URL that answered.
fn location(headers: &HeaderMap, from: &str) -> Option<String> {
    let loc = headers.get(header::LOCATION)?.to_str().ok()?;
    let base = reqwest::Url::parse(from).ok()?;
    base.join(loc).ok().map(String::from)
}

/// An answer's head, and its body to come, from whichever pool sent the request.
enum Answer {
    Reqwest(reqwest::Response),
    Direct(h1::Head, direct::Conn),
}

impl Answer {
    fn status(&self) -> hyper::StatusCode {
        match self {
            Answer::Reqwest(r) => r.status(),
            Answer::Direct(h, _) => h.status,
        }
    }

    fn headers(&self) -> &HeaderMap {
        match self {
            Answer::Reqwest(r) => r.headers(),
            Answer::Direct(h, _) => &h.headers,
        }
    }

    /// The answer once its head has been read: its headers are not kept for as long as the
    /// answer streams.
    fn without_head(self) -> Answer {
        match self {
            Answer::Direct(mut head, conn) => {
                head.headers = HeaderMap::new();
                Answer::Direct(head, conn)
            }
            other => other,
        }
    }

    /// The body's next piece as it arrives; `None` at its end.
    async fn chunk(&mut self) -> Option<Result<Bytes, SendError>> {
        match self {
            Answer::Reqwest(r) => r.chunk().await.map_err(SendError::Reqwest).transpose(),
            Answer::Direct(_, conn) => conn.next_data().await.map(|d| d.map_err(SendError::Direct)),
        }
    }

    /// The answer was taken to its end (the body's, or the API's last event): its connection
    /// may serve the next request. (An answer dropped otherwise closes its connection.)
    fn done(self, pool: Option<&direct::Direct>) {
        if let (Answer::Direct(_, conn), Some(pool)) = (self, pool) {
            pool.done(conn);
        }
    }
}

/// Why a request got no answer, from whichever pool sent it.
enum SendError {
    Reqwest(reqwest::Error),
    Direct(direct::Error),
}

impl SendError {
    /// The class of a request that got no answer: the timeout, an answer that was not HTTP (or
    /// whose head passed hyper's limits: about 400 KiB and 100 headers), or no connection.
    fn classify(&self) -> Outcome {
        match self {
            SendError::Reqwest(e) if e.is_timeout() => Outcome::Timeout,
            SendError::Reqwest(e) => match cause::<hyper::Error>(e) {
                Some(h) if h.is_parse_too_large() => Outcome::TooLarge,
                Some(h) if h.is_parse() || h.is_parse_status() => Outcome::Protocol,
                _ => Outcome::Connect,
            },
            SendError::Direct(direct::Error::Http { error, .. }) => match error {
                h1::Error::TooLarge => Outcome::TooLarge,
                h1::Error::Parse(_) => Outcome::Protocol,
                h1::Error::Io(_) | h1::Error::Closed => Outcome::Connect,
            },
            SendError::Direct(direct::Error::Connect(_) | direct::Error::Tls(_)) => {
                Outcome::Connect
            }
        }
    }

    /// "Connection closed before message completed" with no byte of an answer: the request
    /// was written to a kept-alive connection the server had already closed. (llama.cpp's
    /// server closes every connection after a streamed response while its headers promise
    /// keep-alive, so a closed loop that sends the next request at once writes into a closed
    /// socket.)
    fn stale_connection(&self) -> bool {
        match self {
            SendError::Reqwest(e) => {
                cause::<hyper::Error>(e).is_some_and(|h| h.is_incomplete_message())
            }
            SendError::Direct(direct::Error::Http { stale, .. }) => *stale,
            SendError::Direct(direct::Error::Connect(_) | direct::Error::Tls(_)) => false,
        }
    }

    /// The error with its causes (e.g. "connection refused"), and what to do about a TLS one.
    fn describe(&self) -> String {
        let chain = match self {
            SendError::Reqwest(e) => crate::text::error_chain(e),
            SendError::Direct(e) => e.to_string(),
        };
        match tls_hint(&chain) {
            Some(hint) => format!("{chain} — {hint}"),
            None => chain,
        }
    }
}

/// The first error of type `T` in `e`'s chain of causes.
fn cause<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut src = e.source();
    while let Some(c) = src {
        if let Some(t) = c.downcast_ref::<T>() {
            return Some(t);
        }
        src = c.source();
    }
    None
}

/// A message that names the URL it is about (reqwest's own errors already do).
fn at_url(msg: String, url: &str) -> String {
    if msg.contains(url) {
        msg
    } else {
        format!("{msg} ({url})")
    }
}

/// Counts one request in flight while it lives (so a cancelled request future, dropped
/// mid-stream, still counts itself out).
struct InFlight<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(n: &'a std::sync::atomic::AtomicU64) -> InFlight<'a> {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A loopback server that runs `serve` on each connection it accepts, and counts them.
    async fn loopback<F, Fut>(serve: F) -> (std::net::SocketAddr, Arc<AtomicUsize>)
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(sock));
            }
        });
        (addr, accepted)
    }

    /// A keep-alive HTTP/1.1 server on loopback that answers every request `ok` and counts the
    /// connections it accepts.
    async fn counting_server() -> (String, Arc<AtomicUsize>) {
        let (addr, accepted) = loopback(|mut sock| async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while let Ok(n @ 1..) = sock.read(&mut chunk).await {
                buf.extend_from_slice(&chunk[..n]);
                // Requests here are bodiless GETs: one ends at its blank line.
                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    buf.drain(..end + 4);
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if sock.write_all(ok).await.is_err() {
                        return;
                    }
                }
            }
        })
        .await;
        (format!("http://{addr}/"), accepted)
    }

    async fn get(http: &reqwest::Client, url: &str) {
        let r = http.get(url).send().await.unwrap();
        assert_eq!(r.text().await.unwrap(), "ok");
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_while_idle_for_less_than_a_servers_keep_alive() {
        // The servers in front of vLLM, SGLang and llama.cpp close a connection idle for 5 s.
        let keep = DEFAULT_KEEP_ALIVE;
        assert!(keep + Duration::from_secs(1) <= Duration::from_secs(5));
        let (url, accepted) = counting_server().await;
        let http = http_pool(keep, &[], &Default::default(), &ConnectLog::default()).unwrap();
        reused_only_within(keep, &accepted, async || get(&http, &url).await).await;
    }

    /// `send` twice on a fresh pool opens one connection; after `keep` idle, a second.
    async fn reused_only_within(keep: Duration, accepted: &AtomicUsize, send: impl AsyncFn()) {
        send().await;
        send().await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "a fresh connection is reused"
        );
        // Idle past the keep-alive (the wait is the thing under test, not a stand-in for a signal).
        tokio::time::sleep(keep + Duration::from_millis(300)).await;
        send().await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "a connection idle for {keep:?} is not written to again"
        );
    }

    #[tokio::test]
    async fn no_keep_alive_opens_a_connection_for_every_request() {
        let (url, accepted) = counting_server().await;
        let http = http_pool(
            Duration::ZERO,
            &[],
            &Default::default(),
            &ConnectLog::default(),
        )
        .unwrap();
        for _ in 0..3 {
            get(&http, &url).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    /// A server that answers the first request on each connection (keeping it alive, as its
    /// headers say) and drops the connection, without a byte, when a second request arrives
    /// on it: what a client sees from llama.cpp when it reuses a connection the server closed
    /// after a streamed response. Counts the connections it accepts.
    async fn closing_server() -> (String, Arc<AtomicUsize>) {
        let (addr, accepted) = loopback(|mut sock| async move {
            let (mut buf, mut chunk, mut answered) = (Vec::new(), [0u8; 4096], false);
            while let Ok(n @ 1..) = sock.read(&mut chunk).await {
                buf.extend_from_slice(&chunk[..n]);
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() < end + 4 + len {
                    continue;
                }
                buf.drain(..end + 4 + len);
                if answered {
                    return; // the second request on this connection: dropped unread
                }
                answered = true;
                let body = r#"{"choices":[{"text":" ok","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nkeep-alive: timeout=5, max=100\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if sock.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
        })
        .await;
        (format!("http://{addr}"), accepted)
    }

    /// Regression: the real-engine "flake" (`connect: connection closed before message
    /// completed`, 0.1 ms after the send) was the client writing into a kept-alive connection
    /// the server had closed. Such a request never reached the server: it is re-sent once on a
    /// new connection and the record says so.
    #[tokio::test]
    async fn a_request_written_to_a_connection_the_server_closed_is_sent_again() {
        for plain in [false, true] {
            a_closed_connection_is_resent(plain).await;
        }
    }

    /// A client of the server at `url` whose pool sends `headers` and the API key `k`, through
    /// reqwest or (`plain`) the direct pool.
    fn client_of(url: &str, plain: bool, headers: &[(String, String, bool)]) -> Client {
        let connects = ConnectLog::default();
        let http = http_pool(DEFAULT_KEEP_ALIVE, headers, &Default::default(), &connects);
        let client = Client::new(
            http.unwrap(),
            url,
            Some("k".into()),
            crate::api::ApiKind::OpenAiCompletions.adapter(),
            Duration::from_secs(5),
            false,
            Instant::now(),
        );
        if plain {
            client.direct(direct_pool(
                DEFAULT_KEEP_ALIVE,
                headers,
                &Default::default(),
                &connects,
            ))
        } else {
            client
        }
    }

    /// A stream's events taken together from one read (whole frames, the answer's text pushed
    /// as one run of chunks) make the same chunks, counts and kept text as the same bytes
    /// arriving a byte at a time (each event through the parser and `on_text`), with and
    /// without the text kept for a recount.
    #[test]
    fn events_taken_together_make_what_they_make_one_at_a_time() {
        let ev = |text: &str, finish: &str| {
            format!(
                "data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\"finish_reason\":{finish}}}]}}\n\n",
                serde_json::to_string(text).unwrap()
            )
        };
        let mut stream: String = [
            "", "Hi", " a", " bb", " é", "x\"y", " c", " d", "日本", " e",
        ]
        .iter()
        .map(|t| ev(t, "null"))
        .collect();
        stream.push_str(&ev(" f", "\"length\""));
        stream.push_str("data: [DONE]\n\n");
        for recount in [false, true] {
            let http = http_pool(
                DEFAULT_KEEP_ALIVE,
                &[],
                &Default::default(),
                &ConnectLog::default(),
            );
            let client = Client::new(
                http.unwrap(),
                "http://127.0.0.1:9",
                None,
                crate::api::ApiKind::OpenAiChat.adapter(),
                Duration::from_secs(5),
                true,
                Instant::now(),
            )
            .recount(recount);
            let take = |pieces: Vec<&[u8]>| {
                let mut rec = Record::planned(&planned_request(), crate::plan::Phase::Steady, "");
                let mut st = StreamState::default();
                let mut parser = SseParser::for_framing(client.adapter.framing());
                for piece in pieces {
                    let mut taker = Taker {
                        client: &client,
                        now: 10,
                        rec: &mut rec,
                        st: &mut st,
                    };
                    let _ = parser.feed(piece, &mut taker);
                }
                let chunks: Vec<(u64, u32)> = rec.chunks.iter().collect();
                (
                    chunks,
                    rec.client_output_tokens,
                    st.text,
                    st.chunk_bytes,
                    st.done,
                )
            };
            let together = take(vec![stream.as_bytes()]);
            let apart = take(stream.as_bytes().chunks(1).collect());
            assert_eq!(together, apart, "recount {recount}");
            assert_eq!((together.0.len(), together.1, together.4), (10, 10, true));
            assert_eq!(together.2.is_some(), recount);
        }
    }

    fn planned_request() -> crate::plan::PlannedRequest {
        crate::plan::PlannedRequest {
            index: 0,
            phase: crate::plan::Phase::Steady,
            intended_us: None,
            input_tokens: 3,
            output_tokens: 1,
            prompt: "a b c".into(),
            messages: None,
            shared_tokens: None,
            class: None,
            stage: None,
            stage_rps: None,
            images: Vec::new(),
            tools: None,
            model: None,
        }
    }

    /// What a request holds while its answer streams is its future's size, at every one of
    /// 10,000 streams: a connection's making (a TLS handshake) and reqwest's send are boxed,
    /// and waiting for the head is too, so none of them sizes it (all in place: 6.2 KB).
    #[tokio::test]
    async fn a_streaming_requests_future_stays_small() {
        let client = client_of("http://127.0.0.1:9", true, &[]);
        let mut rec = Record::planned(&planned_request(), crate::plan::Phase::Steady, "t");
        let cancel = CancellationToken::new();
        let size = std::mem::size_of_val(&client.execute(Bytes::new(), &mut rec, &cancel));
        assert!(size <= 1536, "a request's future is {size} bytes");
    }

    async fn a_closed_connection_is_resent(plain: bool) {
        let (url, accepted) = closing_server().await;
        let client = client_of(&url, plain, &[]);
        let planned = planned_request();
        let cancel = CancellationToken::new();
        let mut recs = Vec::new();
        for _ in 0..3 {
            let mut rec = Record::planned(&planned, crate::plan::Phase::Steady, "t");
            client
                .execute(Bytes::from_static(b"{}"), &mut rec, &cancel)
                .await;
            recs.push(rec);
        }
        for r in &recs {
            assert_eq!(r.outcome, Outcome::Ok, "plain http {plain}: {r:?}");
        }
        // The first went out on a new connection; each later one was written to the kept one,
        // found it closed, and went again on a new one.
        assert!(recs[0].retried.is_none());
        for r in &recs[1..] {
            let why = r.retried.as_deref().unwrap();
            assert!(
                why.contains("connection closed before message completed"),
                "plain http {plain}: {why}"
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "plain http {plain}");
    }

    /// A server that answers one completion per connection and sends each request's head
    /// (lines after the request line, lowercased) over `heads`.
    async fn head_server() -> (String, tokio::sync::mpsc::UnboundedReceiver<Vec<String>>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (addr, _) = loopback(move |mut sock| {
            let tx = tx.clone();
            async move {
                let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
                while let Ok(n @ 1..) = sock.read(&mut chunk).await {
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let mut lines: Vec<String> = head.lines().map(str::to_owned).collect();
                    lines.sort();
                    let _ = tx.send(lines);
                    let body = r#"{"choices":[{"text":" ok","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    return;
                }
            }
        })
        .await;
        (format!("http://{addr}"), rx)
    }

    /// The direct pool sends what reqwest sent: the same request line and headers (the
    /// host, the type, the request id, the key, `accept`, the pool's own), so a server cannot
    /// tell which sent it.
    #[tokio::test]
    async fn the_direct_pool_sends_the_request_reqwest_sent() {
        let (url, mut heads) = head_server().await;
        let headers = [("x-team".to_owned(), "blue".to_owned(), false)];
        let planned = planned_request();
        let cancel = CancellationToken::new();
        let mut seen = Vec::new();
        for plain in [false, true] {
            let client = client_of(&url, plain, &headers);
            let mut rec = Record::planned(&planned, crate::plan::Phase::Steady, "t");
            rec.request_id = "req-1".into();
            client
                .execute(Bytes::from_static(b"{\"p\":1}"), &mut rec, &cancel)
                .await;
            assert_eq!(rec.outcome, Outcome::Ok, "plain http {plain}: {rec:?}");
            seen.push(heads.recv().await.unwrap());
        }
        assert_eq!(seen[0], seen[1]);
        let host = url.trim_start_matches("http://");
        for line in [
            "post /v1/completions http/1.1".to_owned(),
            format!("host: {host}"),
            "content-type: application/json".into(),
            "content-length: 7".into(),
            "x-request-id: req-1".into(),
            "authorization: bearer k".into(),
            "accept: */*".into(),
            "x-team: blue".into(),
        ] {
            assert!(seen[1].contains(&line), "{line} not in {:?}", seen[1]);
        }
    }

    /// An error whose body never ends fails at the request's deadline with what of it arrived,
    /// through either pool (it used to wait for the body's end, past any deadline).
    #[tokio::test]
    async fn an_error_whose_body_stalls_fails_at_the_deadline() {
        let (addr, _) = loopback(|mut sock| async move {
            let mut chunk = [0u8; 4096];
            let _ = sock.read(&mut chunk).await;
            let head = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 1000\r\n\r\nbusy, try";
            let _ = sock.write_all(head.as_bytes()).await;
            // Holds the connection open with the body unfinished until the client drops it.
            let _ = sock.read(&mut chunk).await;
        })
        .await;
        let url = format!("http://{addr}");
        let cancel = CancellationToken::new();
        for plain in [false, true] {
            let mut client = client_of(&url, plain, &[]);
            client.timeout = Duration::from_millis(300);
            let mut rec = Record::planned(&planned_request(), crate::plan::Phase::Steady, "t");
            client
                .execute(Bytes::from_static(b"{}"), &mut rec, &cancel)
                .await;
            assert_eq!(
                rec.outcome,
                Outcome::HttpStatus,
                "plain http {plain}: {rec:?}"
            );
            assert_eq!(rec.http_status, Some(503));
            let msg = rec.error.as_deref().unwrap_or_default();
            assert!(
                msg.contains("HTTP 503") && msg.contains("busy, try"),
                "{msg}"
            );
        }
    }

    async fn post_ok(pool: &direct::Direct, t: &direct::Target) {
        let (_, mut conn) = pool.post(t, &HeaderMap::new(), b"{}").await.unwrap();
        let mut body = Vec::new();
        while let Some(d) = conn.next_data().await {
            body.extend_from_slice(&d.unwrap());
        }
        assert_eq!(body, b"ok");
        pool.done(conn);
    }

    /// The direct pool keeps a connection while it is idle for less than its keep-alive,
    /// and none at all when that is zero.
    #[tokio::test]
    async fn the_direct_pool_reuses_a_connection_only_within_its_keep_alive() {
        let keep = Duration::from_millis(300);
        let (url, accepted) = counting_server().await;
        let t = direct::Target::of(&reqwest::Url::parse(&url).unwrap()).unwrap();
        let connects = ConnectLog::default();
        let pool = direct_pool(keep, &[], &Default::default(), &connects);
        reused_only_within(keep, &accepted, async || post_ok(&pool, &t).await).await;
        // Each new connection was timed.
        assert_eq!(connects.lock().opened.len(), 2);

        let (url, accepted) = counting_server().await;
        let t = direct::Target::of(&reqwest::Url::parse(&url).unwrap()).unwrap();
        let pool = direct_pool(Duration::ZERO, &[], &Default::default(), &connects);
        for _ in 0..3 {
            post_ok(&pool, &t).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    /// Only http and https URLs without credentials go through the direct pool; the Host
    /// header names the port only when the URL does; https ones carry the name to verify.
    #[test]
    fn which_urls_the_direct_pool_takes() {
        let of = |u: &str| direct::Target::of(&reqwest::Url::parse(u).unwrap());
        assert!(of("ftp://a.example/v1/x").is_none());
        assert!(of("http://user:pw@a.example/v1/x").is_none());
        assert!(of("https://user@a.example/v1/x").is_none());
        let t = format!("{:?}", of("https://a.example/v1/x").unwrap());
        assert!(
            t.contains(r#"key: "https://a.example:443""#) && t.contains(r#"addr: "a.example:443""#),
            "{t}"
        );
        assert!(t.contains("DnsName") && t.contains("a.example"), "{t}");
        let t = format!("{:?}", of("https://[::1]:8443/v1/x").unwrap());
        assert!(
            t.contains("IpAddress") && t.contains(r#"host: "[::1]:8443""#),
            "{t}"
        );
        let t = of("http://a.example/v1/x?y=1").unwrap();
        assert_eq!(
            format!("{t:?}"),
            format!("{:?}", of("http://a.example:80/v1/x?y=1").unwrap())
        );
        assert!(
            format!("{t:?}").contains(r#"addr: "a.example:80""#),
            "{t:?}"
        );
        assert!(format!("{t:?}").contains("/v1/x?y=1"), "{t:?}");
        let t = of("http://[::1]:8000/v1/x").unwrap();
        assert!(format!("{t:?}").contains(r#"addr: "[::1]:8000""#), "{t:?}");
    }
}
