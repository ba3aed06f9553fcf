//! The load's requests, straight on HTTP/1.1 connections of the client's own (`h1`, over rustls
//! for https), from a pool of its own.
//!
//! Why not reqwest here: at the client's ceiling (`bench/ceiling.sh`, closed loop, 64 streams
//! against nginx) about a quarter of the client's CPU went to reqwest's layers around each
//! request. Its redirect policy formats and parses the URL twice per request even with
//! redirects off, its retry policy clones the request's headers, each request clones a boxed
//! connector and the pool's client. A benchmark client needs none of them: redirects are the
//! client's own decision, recorded (`Client::send`), and so is the one resend of a request that
//! a connection the server had closed swallowed. Probes and scrapes go through reqwest, as does
//! a URL with a user name or password in it.
//!
//! The pool keeps what reqwest's pool kept: idle connections per scheme, host and port, each
//! reused while idle for less than `keep_alive` (none at all when it is zero), `TCP_NODELAY`,
//! every new connection timed into the [`ConnectLog`] (with its TLS handshake), the trust
//! reqwest's has ([`super::direct_pool`]: the platform's store, `target.tls.ca_file`, or
//! `insecure`), and the pool's headers (`[target.request] headers`, and reqwest's
//! `accept: */*`) on every request that does not set its own. Each TLS session's version,
//! cipher suite and ALPN protocol are counted into the log for `environment.json`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::header::{self, HeaderMap, HeaderValue};
use tokio_rustls::rustls::pki_types::ServerName;

use super::ConnectLog;
use super::h1::{self, Connection};

/// An idle connection, and since when.
type Idle = (Box<Connection>, Instant);

/// How much of an answer's body is read after its API's last event, and for how long, so that
/// its connection can serve the next request (hyper's connection read on the same way).
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// The pool of connections of a run's load; its clones share it (as reqwest's do).
#[derive(Clone)]
pub struct Direct(Arc<Pool>);

/// Why the TLS client configuration could not be built (a CA file that does not read), kept
/// once and given to every connection that needs it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
struct TlsSetup(String);

struct Pool {
    keep_alive: Duration,
    /// Sent with every request that does not set the header itself.
    headers: HeaderMap,
    /// What https connections trust; their connector is made at the first (loading the
    /// platform's certificates costs a plain-HTTP run a third of its start-up instructions).
    trust: crate::contract::Tls,
    tls: std::sync::OnceLock<Result<tokio_rustls::TlsConnector, TlsSetup>>,
    connects: ConnectLog,
    /// Idle connections by `scheme://host:port`, the most recently used last.
    idle: Mutex<HashMap<Arc<str>, Vec<Idle>>>,
}

/// An endpoint as the pool reaches it, worked out once.
#[derive(Debug, Clone)]
pub struct Target {
    /// `scheme://host:port`: keys the pool (shared with each request's `Conn`).
    key: Arc<str>,
    /// `host:port`, to connect to.
    addr: Arc<str>,
    /// https: the name the server's certificate must hold (also sent as SNI, unless an IP).
    tls: Option<ServerName<'static>>,
    /// The `Host` header: the host, with the port when the URL names one.
    host: HeaderValue,
    /// The path and query, as the request line carries them.
    path: Box<str>,
}

impl Target {
    /// `url` when the pool can reach it: `http` or `https`, with no user name or password in
    /// it (reqwest sends those as basic auth; such a URL keeps going through reqwest).
    pub fn of(url: &reqwest::Url) -> Option<Target> {
        let https = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        if !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        let tls = if https {
            // An IPv6 host comes bracketed; the certificate names the address without them.
            let name = host.trim_start_matches('[').trim_end_matches(']');
            Some(ServerName::try_from(name.to_owned()).ok()?)
        } else {
            None
        };
        Some(Target {
            key: format!("{}://{host}:{port}", url.scheme()).into(),
            addr: format!("{host}:{port}").into(),
            tls,
            host: HeaderValue::from_str(&host_header).ok()?,
            path: match url.query() {
                Some(q) => format!("{}?{q}", url.path()).into(),
                None => url.path().into(),
            },
        })
    }
}

/// A connection with a request on it, until its answer has been read to the end.
pub struct Conn {
    c: Box<Connection>,
    key: Arc<str>,
}

impl Conn {
    /// The next piece of the answer's body as it arrives; `None` at its end.
    pub async fn next_data(&mut self) -> Option<Result<bytes::Bytes, Error>> {
        let next = self.c.next_data().await?;
        Some(next.map_err(|error| Error::Http {
            error,
            stale: false,
        }))
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum Error {
    /// No connection: DNS or TCP connect.
    Connect(std::io::Error),
    /// The TLS handshake failed (an untrusted certificate, a server that does not speak TLS).
    Tls(std::io::Error),
    /// On the connection; `stale` when it was a reused one that ended before a byte of an
    /// answer: the server had closed it, and never saw the request.
    Http { error: h1::Error, stale: bool },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Connect(e) => write!(f, "tcp connect error: {e}"),
            Error::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            Error::Http { error, .. } => write!(f, "{error}"),
        }
    }
}

impl Direct {
    pub fn new(
        keep_alive: Duration,
        headers: HeaderMap,
        trust: crate::contract::Tls,
        connects: ConnectLog,
    ) -> Direct {
        let mut headers = headers;
        headers
            .entry(header::ACCEPT)
            .or_insert(HeaderValue::from_static("*/*"));
        Direct(Arc::new(Pool {
            keep_alive,
            headers,
            trust,
            tls: std::sync::OnceLock::new(),
            connects,
            idle: Mutex::new(HashMap::new()),
        }))
    }

    /// Sends a POST of `body` with `headers` (the pool's own added) to `t`; the answer's head
    /// and the connection to give back ([`Direct::done`]) once its body has been read.
    pub async fn post(
        &self,
        t: &Target,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(h1::Head, Conn), Error> {
        let request = h1::request_bytes(&t.path, &t.host, headers, &self.0.headers, body);
        let (mut c, reused) = self.checkout(t).await?;
        match c.request(&request).await {
            Ok(head) => Ok((
                head,
                Conn {
                    c,
                    key: t.key.clone(),
                },
            )),
            Err((error, answered)) => {
                let stale =
                    reused && !answered && matches!(error, h1::Error::Closed | h1::Error::Io(_));
                Err(Error::Http { error, stale })
            }
        }
    }

    /// The answer on `conn` was taken to its end (its body's, or its API's last event): the
    /// connection waits for the next request, while kept-alive connections are reused. What
    /// is left of its body is read first: at once if it has arrived, else in a task of its own
    /// for up to a second.
    pub fn done(&self, mut conn: Conn) {
        if self.0.keep_alive.is_zero() {
            return;
        }
        if conn.c.reusable() || conn.c.finish_now(DRAIN_BYTES) {
            return self.idle(conn);
        }
        if !conn.c.may_be_reused() {
            return;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let drained = tokio::time::timeout(DRAIN_WAIT, conn.c.finish(DRAIN_BYTES)).await;
            if drained == Ok(true) {
                pool.idle(conn);
            }
        });
    }

    fn idle(&self, conn: Conn) {
        let now = Instant::now();
        let mut idle = self.0.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(conn.key).or_default();
        list.retain(|(_, since)| now - *since < self.0.keep_alive);
        list.push((conn.c, now));
    }

    /// An idle connection to `t` that the server has not closed, or a new one; and whether
    /// it was reused.
    async fn checkout(&self, t: &Target) -> Result<(Box<Connection>, bool), Error> {
        loop {
            let next = {
                let mut idle = self.0.idle.lock().unwrap_or_else(|p| p.into_inner());
                idle.get_mut(&t.key).and_then(Vec::pop)
            };
            let Some((mut c, since)) = next else { break };
            // Idle as long as a server's keep-alive: it may be closing it right now.
            if since.elapsed() < self.0.keep_alive && c.still_idle() {
                return Ok((c, true));
            }
        }
        let at = Instant::now();
        // Boxed: connecting (a TLS handshake's state above all) is rare, and in place it would
        // size every request's future, for as long as its answer streams, at 5 KB.
        let made = Box::pin(self.connect(t)).await;
        self.0.connects.push(at, at.elapsed(), made.is_ok());
        Ok((Box::new(Connection::new(made?)), false))
    }

    async fn connect(&self, t: &Target) -> Result<h1::Io, Error> {
        let tcp = tokio::net::TcpStream::connect(&*t.addr)
            .await
            .map_err(Error::Connect)?;
        tcp.set_nodelay(super::TCP_NODELAY)
            .map_err(Error::Connect)?;
        let Some(name) = &t.tls else {
            return Ok(h1::Io::Left(tcp));
        };
        let connector = self.0.tls.get_or_init(|| {
            super::tls_config(&self.0.trust)
                .map(tokio_rustls::TlsConnector::from)
                .map_err(|e| TlsSetup(crate::text::error_chain(&*e)))
        });
        let connector = connector
            .as_ref()
            .map_err(|e| Error::Tls(std::io::Error::other(e.clone())))?;
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .map_err(Error::Tls)?;
        let (_, session) = tls.get_ref();
        self.0.connects.tls_session(format!(
            "{}, {}, ALPN {}",
            session
                .protocol_version()
                .map_or("?".into(), |v| format!("{v:?}")),
            session
                .negotiated_cipher_suite()
                .map_or("?".into(), |c| format!("{:?}", c.suite())),
            session
                .alpn_protocol()
                .map_or("none".into(), |p| String::from_utf8_lossy(p).into_owned()),
        ));
        Ok(h1::Io::Right(Box::new(tls)))
    }
}
