//! One HTTP/1.1 client connection of the load: a request written whole, its answer's head
//! parsed by `httparse` (hyper's own parser), its body read as it arrives (a `content-length`,
//! chunked, or to the connection's close) in the request's own task.
//!
//! Why not hyper's client connection: it costs a stream 28 KB that a benchmark client does not
//! need (DHAT, 1,000 streams: the first block of its request channel, 9 KB; a write buffer kept
//! from the start, 8 KiB; a read buffer of at least 8 KiB; a task of its own, 1.5 KB), and every
//! request and every piece of a body crosses from that task to the request's through a channel
//! and a wake-up. Here a connection is its socket and one read buffer that starts at 4 KiB and
//! grows while reads fill it; the request's bytes live only while they are written. What hyper's
//! connection decided stays decided the same way: the framing of RFC 9112 §6.3, keep-alive by
//! version and `connection`, interim (1xx) answers skipped, a head bounded at hyper's limits
//! (100 headers, about 400 KiB).

use std::future::Future;
use std::io::Write as _;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use hyper::StatusCode;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection's socket: plain, or TLS over it (boxed: rustls's state is kilobytes).
pub type Io =
    tokio_util::either::Either<TcpStream, Box<tokio_rustls::client::TlsStream<TcpStream>>>;

/// hyper's limits for an answer's head: its header count, and its read buffer's maximum.
const MAX_HEADERS: usize = 100;
const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// A chunk-size line or a trailer line longer than this is not HTTP.
const MAX_LINE: usize = 4096;
/// The read buffer's first size, and the most it grows to while reads fill it.
const FIRST_READ: usize = 4096;
const MOST_READ: usize = 64 * 1024;

/// Why an answer could not be read.
#[derive(Debug)]
pub enum Error {
    /// The socket failed (reset, broken pipe, a TLS alert).
    Io(std::io::Error),
    /// The connection closed before the answer was complete.
    Closed,
    /// What arrived is not an HTTP/1 answer (or its framing is broken).
    Parse(String),
    /// The answer's head passed the limits.
    TooLarge,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "connection error: {e}"),
            Error::Closed => f.write_str("connection closed before message completed"),
            Error::Parse(why) => write!(f, "invalid HTTP response: {why}"),
            Error::TooLarge => write!(
                f,
                "message head is too large (more than {MAX_HEADERS} headers or {} KiB)",
                MAX_HEAD_BYTES >> 10
            ),
        }
    }
}

/// How the current answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    /// This many bytes still to come.
    Length(u64),
    /// Chunked: at a chunk's size line, inside a chunk (bytes left), at the line end after
    /// one, or among the trailers after the last.
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    /// At the connection's close.
    ToClose,
    /// Read to its end.
    End,
}

/// An answer's head.
pub struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// When the request's last byte had been written (and flushed) to the connection.
    pub written: Option<std::time::Instant>,
}

pub struct Connection {
    io: Io,
    buf: BytesMut,
    /// What the next read may fill: doubled while reads fill it, up to `MOST_READ`.
    read_size: usize,
    body: Body,
    /// The last answer's head allows another request on this connection.
    keep_alive: bool,
    /// A request was written and its answer not yet read to its end: dropped so (a request
    /// cancelled, timed out, or its stream broken), the connection is aborted, not closed.
    pending: bool,
}

impl Drop for Connection {
    /// A connection dropped in the middle of an exchange is reset (`SO_LINGER` 0: an RST, not
    /// a FIN). A server then drops the request at once: one that had not yet accepted the
    /// connection reads a reset instead of a whole request it would serve to nobody. llama.cpp
    /// (four HTTP threads) still served the ~190 requests a stopped run had left in its accept
    /// queue, slots busy over 30 s after goodput exited, when they were closed with a FIN.
    fn drop(&mut self) {
        if self.pending {
            let tcp = match &self.io {
                tokio_util::either::Either::Left(tcp) => tcp,
                tokio_util::either::Either::Right(tls) => tls.get_ref().0,
            };
            let _ = tcp.set_zero_linger();
        }
    }
}

impl Connection {
    pub fn new(io: Io) -> Connection {
        Connection {
            io,
            buf: BytesMut::new(),
            read_size: FIRST_READ,
            body: Body::End,
            keep_alive: true,
            pending: false,
        }
    }

    /// Writes `request` (a head and its body, whole) and reads the answer's head; `Err` also
    /// says whether any byte of an answer had arrived.
    pub async fn request(&mut self, request: &[u8]) -> Result<Head, (Error, bool)> {
        debug_assert!(self.reusable());
        self.pending = true;
        let write = async {
            self.io.write_all(request).await?;
            self.io.flush().await
        };
        if let Err(e) = write.await {
            // A server may answer before it has read the whole body, then close: an axum
            // or hyper server refuses a body over its limit with 413 at once. The answer is
            // in the receive queue before the reset that broke the write: read it.
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            if matches!(e.kind(), BrokenPipe | ConnectionReset)
                && let Some(head) = self.early_answer().await
            {
                self.keep_alive = false;
                return Ok(head);
            }
            return Err((Error::Io(e), false));
        }
        let written = Some(std::time::Instant::now());
        loop {
            match self.parse_head() {
                Ok(Some(head)) => return Ok(Head { written, ..head }),
                Ok(None) => {}
                Err(e) => return Err((e, true)),
            }
            let answered = !self.buf.is_empty();
            match self.fill().await {
                Ok(0) => return Err((Error::Closed, answered)),
                Ok(_) => {}
                Err(e) => return Err((Error::Io(e), answered)),
            }
        }
    }

    /// The head of an answer the server sent before its end of the connection, when one had
    /// arrived; the connection is closed, so every read ends.
    async fn early_answer(&mut self) -> Option<Head> {
        loop {
            if let Ok(Some(head)) = self.parse_head() {
                return Some(head);
            }
            match self.fill().await {
                Ok(1..) => {}
                _ => return None,
            }
        }
    }

    /// The next piece of the body as it arrives; `None` at its end.
    pub async fn next_data(&mut self) -> Option<Result<Bytes, Error>> {
        loop {
            match self.step() {
                Ok(Some(data)) => return Some(Ok(data)),
                Ok(None) if self.body == Body::End => {
                    self.pending = false;
                    return None;
                }
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            match self.fill().await {
                Ok(0) if self.body == Body::ToClose => {
                    self.body = Body::End;
                    self.pending = false;
                    return None;
                }
                Ok(0) => return Some(Err(Error::Closed)),
                Ok(_) => {}
                Err(e) => return Some(Err(Error::Io(e))),
            }
        }
    }

    /// The body was read to its end and the answer kept the connection alive.
    pub fn reusable(&self) -> bool {
        self.body == Body::End && self.keep_alive
    }

    /// The answer keeps the connection alive once its body has been read.
    pub fn may_be_reused(&self) -> bool {
        self.keep_alive
    }

    /// Reads what has already arrived of the body, without waiting: true when it ended there
    /// (an answer taken at its API's last event has often not yet read its last chunk's end).
    /// At most `limit` bytes are read.
    pub fn finish_now(&mut self, limit: usize) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = 0;
        while self.body != Body::End && read <= limit {
            let next = pin!(self.next_data()).poll(&mut cx);
            match next {
                Poll::Ready(Some(Ok(data))) => read += data.len(),
                Poll::Ready(Some(Err(_))) => {
                    self.keep_alive = false;
                    return false;
                }
                Poll::Ready(None) => break,
                Poll::Pending => return false,
            }
        }
        self.reusable()
    }

    /// The rest of the body, read and dropped; true when it ended within `limit` bytes.
    pub async fn finish(&mut self, limit: usize) -> bool {
        let mut read = 0;
        while read <= limit {
            match self.next_data().await {
                Some(Ok(data)) => read += data.len(),
                Some(Err(_)) => return false,
                None => return self.reusable(),
            }
        }
        false
    }

    /// An idle connection the server has not closed, nor written to, since its last answer.
    pub fn still_idle(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut b = tokio::io::ReadBuf::new(&mut byte);
        matches!(
            std::pin::Pin::new(&mut self.io).poll_read(&mut cx, &mut b),
            Poll::Pending
        )
    }

    /// One read into the buffer; the bytes read (0 at the connection's end).
    async fn fill(&mut self) -> std::io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < self.read_size / 2 {
            self.buf.reserve(self.read_size);
        }
        let room = self.buf.capacity() - self.buf.len();
        let n = self.io.read_buf(&mut self.buf).await?;
        if n == room && self.read_size < MOST_READ {
            self.read_size *= 2;
        }
        Ok(n)
    }

    /// The answer's head when the buffer holds it whole (interim 1xx answers skipped).
    fn parse_head(&mut self) -> Result<Option<Head>, Error> {
        loop {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut slots);
            let n = match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD_BYTES => {
                    return Err(Error::TooLarge);
                }
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(httparse::Error::TooManyHeaders) => return Err(Error::TooLarge),
                Err(e) => return Err(Error::Parse(e.to_string())),
            };
            let code = resp.code.unwrap_or_default();
            let status =
                StatusCode::from_u16(code).map_err(|_| Error::Parse(format!("status {code}")))?;
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(Error::Parse("an upgrade that was not asked for".into()));
            }
            if status.is_informational() {
                self.buf.advance(n);
                continue;
            }
            let mut headers = HeaderMap::with_capacity(resp.headers.len());
            for h in resp.headers.iter() {
                let name = HeaderName::from_bytes(h.name.as_bytes());
                let value = HeaderValue::from_bytes(h.value);
                let (Ok(name), Ok(value)) = (name, value) else {
                    return Err(Error::Parse(format!("header {:?}", h.name)));
                };
                headers.append(name, value);
            }
            let http10 = resp.version == Some(0);
            self.buf.advance(n);
            self.frame(status, &headers, http10)?;
            return Ok(Some(Head {
                status,
                headers,
                written: None,
            }));
        }
    }

    /// The body's framing and the connection's keep-alive, from the answer's head (RFC 9112
    /// §6.3 and §9.3).
    fn frame(&mut self, status: StatusCode, h: &HeaderMap, http10: bool) -> Result<(), Error> {
        let has = |name: hyper::header::HeaderName, token: &str| {
            h.get_all(name).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            })
        };
        use hyper::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
        self.keep_alive = if http10 {
            has(CONNECTION, "keep-alive")
        } else {
            !has(CONNECTION, "close")
        };
        self.body = if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
            Body::End
        } else if let Some(te) = h.get_all(TRANSFER_ENCODING).iter().next_back() {
            let last = te.to_str().ok().and_then(|v| v.rsplit(',').next());
            if last.is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked")) {
                Body::Size
            } else {
                Body::ToClose
            }
        } else if let Some(len) = h.get(CONTENT_LENGTH) {
            // Repeated equal values ("12, 12") are one length.
            let mut lens = len
                .to_str()
                .unwrap_or("x")
                .split(',')
                .map(|v| v.trim().parse());
            let first: u64 = lens
                .next()
                .and_then(Result::ok)
                .ok_or_else(|| Error::Parse("content-length".into()))?;
            if lens.any(|l| l != Ok(first)) {
                return Err(Error::Parse("content-length".into()));
            }
            if first == 0 {
                Body::End
            } else {
                Body::Length(first)
            }
        } else {
            Body::ToClose
        };
        if self.body == Body::ToClose {
            self.keep_alive = false;
        }
        Ok(())
    }

    /// Moves the body on by what the buffer holds: a piece of data, or `None` when it needs
    /// more bytes (or the body has ended).
    fn step(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            match self.body {
                Body::End => return Ok(None),
                Body::ToClose if self.buf.is_empty() => return Ok(None),
                Body::ToClose => return Ok(Some(self.buf.split().freeze())),
                Body::Length(left) | Body::Data(left) => {
                    if self.buf.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(self.buf.len() as u64);
                    let rest = left - take;
                    self.body = match self.body {
                        Body::Length(_) if rest == 0 => Body::End,
                        Body::Length(_) => Body::Length(rest),
                        _ if rest == 0 => Body::DataEnd,
                        _ => Body::Data(rest),
                    };
                    return Ok(Some(self.buf.split_to(take as usize).freeze()));
                }
                Body::Size => match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.buf.advance(n);
                        self.body = if size == 0 {
                            Body::Trailers
                        } else {
                            Body::Data(size)
                        };
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() > MAX_LINE => {
                        return Err(Error::Parse("chunk size line too long".into()));
                    }
                    Ok(httparse::Status::Partial) => return Ok(None),
                    Err(_) => return Err(Error::Parse("invalid chunk size".into())),
                },
                Body::DataEnd | Body::Trailers => {
                    let Some(end) = memchr::memchr(b'\n', &self.buf) else {
                        if self.buf.len() > MAX_LINE {
                            return Err(Error::Parse("line too long in a chunked body".into()));
                        }
                        return Ok(None);
                    };
                    let blank = self.buf[..end] == *b"" || self.buf[..end] == *b"\r";
                    self.buf.advance(end + 1);
                    self.body = match self.body {
                        Body::DataEnd if blank => Body::Size,
                        Body::DataEnd => {
                            return Err(Error::Parse("a chunk longer than its size".into()));
                        }
                        // A trailer line is skipped; the blank line ends the body.
                        _ if blank => Body::End,
                        _ => Body::Trailers,
                    };
                }
            }
        }
    }
}

/// A POST's bytes: its line, `host`, `headers`, those of `defaults` that `headers` does not
/// set, its length, and `body`. (`host`, `content-length` and `transfer-encoding` are the
/// connection's to say.)
pub fn request_bytes(
    path: &str,
    host: &HeaderValue,
    headers: &HeaderMap,
    defaults: &HeaderMap,
    body: &[u8],
) -> Vec<u8> {
    use hyper::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
    let lines = headers.len() + defaults.len();
    let mut out = Vec::with_capacity(128 + path.len() + 64 * lines + body.len());
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    let defaulted = defaults.iter().filter(|(n, _)| !headers.contains_key(*n));
    for (name, value) in headers.iter().chain(defaulted) {
        if name == HOST || name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
    }
    // Written into the buffer, not through a String of its own per request.
    let _ = write!(out, "\r\ncontent-length: {}\r\n\r\n", body.len());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection on a loopback socket (its peer kept open), for the parser's own tests.
    async fn connection() -> (Connection, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (
            Connection::new(Io::Left(client.unwrap())),
            server.unwrap().0,
        )
    }

    /// A request dropped before its answer is whole (cancelled, timed out) resets its
    /// connection: a server that had not yet accepted it reads a reset, not a request it would
    /// serve to nobody. One whose answer was read to its end closes as usual.
    #[tokio::test]
    async fn a_connection_dropped_mid_exchange_is_reset_and_a_finished_one_closed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // In the listener's backlog, not yet accepted: the request is written, no answer read.
        let mut c = Connection::new(Io::Left(TcpStream::connect(addr).await.unwrap()));
        let asked = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            c.request(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n"),
        )
        .await;
        assert!(asked.is_err(), "no answer was coming");
        drop(c);
        let (mut server, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 256];
        let mut read = Ok(0);
        // What the server reads: a reset (or, had the request arrived whole first, the request
        // and then a reset) — never the request and a clean end.
        for _ in 0..2 {
            read = server.read(&mut buf).await;
            if read.is_err() {
                break;
            }
        }
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionReset)
        );
        // A finished exchange closes cleanly.
        let (mut c, mut server) = connection().await;
        let answer = tokio::spawn(async move {
            let mut buf = [0u8; 256];
            let _ = server.read(&mut buf).await;
            server
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await
                .unwrap();
            server
        });
        c.request(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(&c.next_data().await.unwrap().unwrap()[..], b"ok");
        assert!(c.next_data().await.is_none());
        drop(c);
        let mut server = answer.await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 0, "a clean end");
    }

    /// Feeds `raw` to the head parser and the body's framing `piece` bytes at a time, as reads
    /// would; the status, the body, whether the connection may be reused, and what is left.
    fn read_in_pieces(c: &mut Connection, raw: &[u8], piece: usize) -> (u16, Vec<u8>, bool) {
        c.buf.clear();
        let mut pieces = raw.chunks(piece);
        let head = loop {
            if let Some(head) = c.parse_head().unwrap() {
                break head;
            }
            c.buf
                .extend_from_slice(pieces.next().expect("the head ends"));
        };
        let mut body = Vec::new();
        loop {
            while let Some(data) = c.step().unwrap() {
                body.extend_from_slice(&data);
            }
            if c.body == Body::End {
                break;
            }
            match pieces.next() {
                Some(p) => c.buf.extend_from_slice(p),
                None => break,
            }
        }
        (head.status.as_u16(), body, c.reusable())
    }

    /// Every framing, split at every size down to single bytes, reads the same body, and
    /// leaves the connection reusable exactly when its answer allows.
    #[tokio::test]
    async fn answers_read_the_same_however_their_bytes_arrive() {
        let cases: &[(&[u8], u16, &[u8], bool)] = &[
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", 200, b"hello", true),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nx-trailer: y\r\n\r\n",
                200,
                b"hello world!",
                true,
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\ncontent-length: 4\r\n\r\nbusy",
                503,
                b"busy",
                true,
            ),
            (b"HTTP/1.1 204 No Content\r\ncontent-length: 9\r\n\r\n", 204, b"", true),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok", 200, b"ok", false),
            (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok", 200, b"ok", false),
            (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: Keep-Alive\r\n\r\nok", 200, b"ok", true),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok", 200, b"ok", true),
        ];
        let (mut c, _peer) = connection().await;
        for (raw, status, body, reusable) in cases {
            for piece in [1, 2, 3, 5, 8, 13, raw.len()] {
                let got = read_in_pieces(&mut c, raw, piece);
                let what = format!("{} in pieces of {piece}", String::from_utf8_lossy(raw));
                assert_eq!(got, (*status, body.to_vec(), *reusable), "{what}");
                assert!(c.buf.is_empty(), "{what}: {:?} left", c.buf);
            }
        }
    }

    #[tokio::test]
    async fn what_is_not_http_is_named_and_a_head_past_the_limits_is_too_large() {
        let (mut c, _peer) = connection().await;
        let mut head_of = |raw: &[u8]| {
            c.buf.clear();
            c.buf.extend_from_slice(raw);
            c.parse_head().map(|h| h.map(|h| h.status))
        };
        assert!(matches!(
            head_of(b"HTTP/1.1 OKAY fine\r\n\r\n"),
            Err(Error::Parse(_))
        ));
        assert!(matches!(
            head_of(b"\x00\x13garbage\r\n\r\n"),
            Err(Error::Parse(_))
        ));
        assert!(matches!(
            head_of(b"HTTP/1.1 101 Switching\r\n\r\n"),
            Err(Error::Parse(_))
        ));
        let conflicting = b"HTTP/1.1 200 OK\r\ncontent-length: 2, 3\r\n\r\n";
        assert!(matches!(head_of(conflicting), Err(Error::Parse(_))));
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(head_of(&many), Err(Error::TooLarge)));
        let mut long = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
        long.resize(MAX_HEAD_BYTES + 1, b'a');
        assert!(matches!(head_of(&long), Err(Error::TooLarge)));
        assert!(matches!(head_of(b"HTTP/1.1 200 OK\r\nx-big: aa"), Ok(None)));

        for bad in [&b"zz\r\nhello\r\n0\r\n\r\n"[..], b"2\r\nhello\r\n0\r\n\r\n"] {
            c.buf.clear();
            c.buf
                .extend_from_slice(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
            c.buf.extend_from_slice(bad);
            c.parse_head().unwrap().unwrap();
            let mut step = || c.step();
            let err = loop {
                match step() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("{bad:?} read as a body"),
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, Error::Parse(_)), "{bad:?}: {err}");
        }
    }

    /// Sends `req` on `c` while `peer` reads it whole, answers `raw` and (`close`) shuts its
    /// side; the answer's head, and the request as the peer read it.
    async fn exchange(
        c: &mut Connection,
        peer: &mut TcpStream,
        req: &[u8],
        raw: &[u8],
        close: bool,
    ) -> (Head, Vec<u8>) {
        let mut got = vec![0u8; req.len()];
        let (head, ()) = tokio::join!(c.request(req), async {
            peer.read_exact(&mut got).await.unwrap();
            peer.write_all(raw).await.unwrap();
            if close {
                peer.shutdown().await.unwrap();
            }
        });
        (head.map_err(|e| e.0.to_string()).unwrap(), got)
    }

    /// Over a socket: a body to the connection's close ends there; an answer cut short is
    /// `Closed`; an answer taken at its last event finishes when its last chunk's end arrives
    /// later, and the connection serves the next request.
    #[tokio::test]
    async fn bodies_end_where_their_framing_says_over_a_socket() {
        let (mut c, mut peer) = connection().await;
        let req = request_bytes(
            "/v1/x",
            &HeaderValue::from_static("h"),
            &HeaderMap::new(),
            &HeaderMap::new(),
            b"{}",
        );

        let sse = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\ne\r\ndata: [DONE]\n\n\r\n";
        let (head, got) = exchange(&mut c, &mut peer, &req, sse, false).await;
        assert_eq!(got, req);
        assert_eq!(head.status, 200);
        let data = c.next_data().await.unwrap().unwrap();
        assert_eq!(&data[..], b"data: [DONE]\n\n");
        assert!(
            !c.finish_now(1024),
            "its last chunk's end has not been sent"
        );
        peer.write_all(b"0\r\n\r\n").await.unwrap();
        assert!(c.finish(1024).await);
        assert!(c.still_idle());

        let cut = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf";
        exchange(&mut c, &mut peer, &req, cut, true).await;
        assert_eq!(&c.next_data().await.unwrap().unwrap()[..], b"half");
        assert!(matches!(c.next_data().await, Some(Err(Error::Closed))));
        assert!(!c.reusable());

        let (mut c, mut peer) = connection().await;
        let to_close = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: 1\n\n";
        exchange(&mut c, &mut peer, &req, to_close, true).await;
        let mut body = Vec::new();
        while let Some(d) = c.next_data().await {
            body.extend_from_slice(&d.unwrap());
        }
        assert_eq!(body, b"data: 1\n\n");
        assert!(
            !c.reusable(),
            "a body read to the close leaves no connection"
        );
    }

    /// The request's own headers win over the pool's defaults; the connection alone says the
    /// host, the length and the framing.
    #[test]
    fn a_request_says_each_header_once() {
        let mut own = HeaderMap::new();
        own.insert("accept", HeaderValue::from_static("text/event-stream"));
        own.insert("content-length", HeaderValue::from_static("999"));
        let mut defaults = HeaderMap::new();
        defaults.insert("accept", HeaderValue::from_static("*/*"));
        defaults.insert("x-team", HeaderValue::from_static("a"));
        let host = HeaderValue::from_static("example:8000");
        let req = request_bytes("/v1/x?y=1", &host, &own, &defaults, b"{}");
        assert_eq!(
            String::from_utf8(req).unwrap(),
            "POST /v1/x?y=1 HTTP/1.1\r\nhost: example:8000\r\naccept: text/event-stream\r\n\
             x-team: a\r\ncontent-length: 2\r\n\r\n{}"
        );
    }
}
