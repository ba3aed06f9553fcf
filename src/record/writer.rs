//! The one collector: request tasks send finished records over a channel; one writer thread
//! appends each to `requests.jsonl` as it comes (flushing whenever the queue is empty, so a
//! killed run keeps every finished record but those of its last millisecond at most; see
//! [`Gather`]) and tells its observers (the progress view, the
//! `until_stable` warm-up rule; anything else that watches a run live implements
//! [`Observer`]). No lock is shared on the request path, and file I/O never runs on the async
//! workers (nor hops to tokio's blocking pool per write, as `tokio::fs` would).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{Outcome, Record};

/// Live counters for the progress display (approximate: all phases, origin = actual send).
#[derive(Debug)]
pub struct Live {
    pub finished: u64,
    pub errors: u64,
    /// TTFT in microseconds; HDR histogram: fixed memory, 3 significant digits.
    pub ttft_us: Histogram<u64>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            finished: 0,
            errors: 0,
            ttft_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("static bounds are valid"),
        }
    }
}

pub type LiveView = Arc<Mutex<Live>>;

/// Watches records as the collector writes them, on the collector's thread: keep it quick.
pub trait Observer: Send {
    fn observe(&mut self, rec: &Record);
}

impl Observer for LiveView {
    fn observe(&mut self, rec: &Record) {
        let mut l = self.lock().unwrap_or_else(|p| p.into_inner());
        l.finished += 1;
        if rec.outcome != Outcome::Ok {
            l.errors += 1;
        }

        if let (Some(f), Some(s)) = (rec.first_token_us, rec.sent_us) {
            let _ = l.ttft_us.record(f.saturating_sub(s).max(1));
        }
    }
}

/// The `until_stable` warm-up rule, watched by the collector.
#[derive(Debug, Clone)]
pub struct Stability {
    pub window: usize,
    pub threshold: f64,
    /// Set once the warm-up TTFT has settled; the driver reads it.
    pub flag: Arc<AtomicBool>,
    /// Warm-up TTFTs so far, µs.
    pub ttfts: Vec<f64>,
}

impl Observer for Stability {
    fn observe(&mut self, rec: &Record) {
        if rec.phase == crate::plan::Phase::Warmup
            && let (Some(f), Some(s)) = (rec.first_token_us, rec.sent_us)
        {
            self.ttfts.push(f.saturating_sub(s) as f64);
            if crate::stats::settled(&self.ttfts, self.window, self.threshold) {
                self.flag.store(true, Ordering::Release);
            }
        }
    }
}

/// Writes records until every sender is gone; returns how many it wrote. None is kept: the
/// file is the run's memory (read back when the load is over), so a run's memory does not
/// grow with its length. Blocking: run it on its own thread (`std::thread::spawn` or
/// `spawn_blocking`). Once `abandon` holds why the run stopped itself (its verdict decided, or
/// the progress guard), a request that stop cut off is written `abandoned` (a miss) with that
/// as its error, not `interrupted`.
///
/// A write that fails (a full disk, a removed directory, any I/O error) calls `failed` at
/// once, so the run stops within the record, not at the end of its schedule; the file is
/// cut back to its last whole line. Every record not yet on disk then (those of the batch the
/// failed write held) and every record of a request that finishes after it is still kept
/// ([`Lost`]): appended once the load is over if the file takes it then, else written to a
/// file of their own in the system's temporary directory, else counted (by phase, with their
/// indices). The error names the file and says where they went.
pub fn write_records(
    path: &Path,
    mut rx: UnboundedReceiver<Record>,
    observers: Vec<Box<dyn Observer>>,
    abandon: &std::sync::OnceLock<String>,
    failed: &(dyn Fn(String) + Send + Sync),
) -> Result<u64, WriteFailed> {
    let mut lines = match Lines::open(path) {
        Ok(l) => l,
        Err(e) => {
            let why = failure(path, &e);
            failed(why.clone());
            return Err(WriteFailed {
                error: std::io::Error::new(e.kind(), why),
                lost: keep_after_failure(path, rx, abandon, Held::default()),
            });
        }
    };
    match write_all(&mut lines, &mut rx, observers, abandon) {
        Ok(n) => Ok(n),
        Err(e) => {
            let why = failure(path, &e);
            failed(why.clone());
            let held = lines.unwritten();
            Err(WriteFailed {
                error: std::io::Error::new(e.kind(), why),
                lost: keep_after_failure(path, rx, abandon, held),
            })
        }
    }
}

fn failure(path: &Path, e: &std::io::Error) -> String {
    format!(
        "{} could not be written ({e}): the run stopped at once; the records written before are kept",
        path.display()
    )
}

/// The collector could not write `requests.jsonl`: the error, and what became of the records
/// it could not put there.
#[derive(Debug)]
pub struct WriteFailed {
    pub error: std::io::Error,
    pub lost: Lost,
}

/// Records of finished requests that did not reach `requests.jsonl` when a write failed
/// (`command.json` `lost_records`): where they were kept, or how many were lost, by phase.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Lost {
    /// Records that did not reach `requests.jsonl` in the run's own write.
    pub records: u64,
    /// They were appended to `requests.jsonl` once the load was over (the disk took them).
    #[serde(default)]
    pub appended_later: bool,
    /// Else written here, a file of their own (JSON Lines, as `requests.jsonl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_at: Option<std::path::PathBuf>,
    /// Else lost: how many of each phase, and their plan indices (the first [`MAX_INDICES`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub lost_by_phase: std::collections::BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_indices: Vec<u64>,
}

/// The most lost indices listed.
pub const MAX_INDICES: usize = 1000;

/// The most bytes of records held in memory after a failed write; past it, records are
/// counted as lost.
const MAX_HELD_BYTES: usize = 256 << 20;

impl Lost {
    /// Records counted lost, in all.
    pub fn lost(&self) -> u64 {
        self.lost_by_phase.values().sum()
    }

    /// Where the records went, in a few words.
    pub fn said(&self) -> String {
        let n = self.records;
        let lost = self.lost();
        let mut out = match (&self.kept_at, self.appended_later) {
            (_, true) => format!(
                "the {n} records not written then were appended to it once the load was over"
            ),
            (Some(p), _) => format!(
                "the {} records not written then are kept in {} (`goodput report` reads them with the bundle)",
                n - lost,
                p.display()
            ),
            (None, _) => String::new(),
        };
        if lost > 0 {
            if !out.is_empty() {
                out.push_str("; ");
            }
            let by: Vec<String> = self
                .lost_by_phase
                .iter()
                .map(|(p, k)| format!("{p} {k}"))
                .collect();
            out.push_str(&format!(
                "{lost} records of finished requests could not be kept anywhere and are lost ({})",
                by.join(", ")
            ));
        }
        out
    }
}

/// Lines not yet on disk: their bytes, and each one's plan index, phase and end in them.
#[derive(Debug, Default)]
struct Held {
    bytes: Vec<u8>,
    lines: Vec<(u64, crate::plan::Phase, usize)>,
    /// Records past [`MAX_HELD_BYTES`], not held.
    over: Vec<(u64, crate::plan::Phase)>,
}

impl Held {
    fn push(&mut self, rec: &Record, line: &[u8]) {
        if self.bytes.len() + line.len() > MAX_HELD_BYTES {
            self.over.push((rec.index, rec.phase));
            return;
        }
        self.bytes.extend_from_slice(line);
        self.lines.push((rec.index, rec.phase, self.bytes.len()));
    }
}

/// After a failed write: every record still to come is held (bounded), then all that were
/// not written are appended to `path` if it takes them now, else written to a file in the
/// temporary directory, else counted lost.
fn keep_after_failure(
    path: &Path,
    mut rx: UnboundedReceiver<Record>,
    abandon: &std::sync::OnceLock<String>,
    mut held: Held,
) -> Lost {
    let mut buf = Line(Vec::new());
    while let Some(mut rec) = rx.blocking_recv() {
        abandoned(&mut rec, abandon);
        if line_of(&mut rec, &mut buf).is_ok() {
            held.push(&rec, &buf.0);
        } else {
            held.over.push((rec.index, rec.phase));
        }
    }
    let mut lost = Lost {
        records: (held.lines.len() + held.over.len()) as u64,
        ..Lost::default()
    };
    if held.lines.is_empty() && held.over.is_empty() {
        return lost;
    }
    let append = |to: &Path, create: bool| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(create)
            .append(true)
            .open(to)?;
        f.write_all(&held.bytes)?;
        f.sync_data()
    };
    let mut unkept: Vec<(u64, crate::plan::Phase)> = held.over.clone();
    if !held.bytes.is_empty() {
        if append(path, false).is_ok() {
            lost.appended_later = true;
        } else {
            let _ = cut_to_last_line(path);
            let name = path
                .parent()
                .and_then(Path::file_name)
                .map_or("run".into(), |n| n.to_string_lossy().into_owned());
            let spare =
                std::env::temp_dir().join(format!("goodput-{name}-requests-after-failure.jsonl"));
            match append(&spare, true) {
                Ok(()) => lost.kept_at = Some(spare),
                Err(_) => unkept.extend(held.lines.iter().map(|(i, p, _)| (*i, *p))),
            }
        }
    }
    for (i, p) in unkept {
        *lost.lost_by_phase.entry(p.as_str().to_owned()).or_default() += 1;
        if lost.lost_indices.len() < MAX_INDICES {
            lost.lost_indices.push(i);
        }
    }
    lost
}

/// The file and the batch of whole lines not yet written to it.
struct Lines {
    file: std::fs::File,
    /// The file's length: whole lines up to here are on disk.
    len: u64,
    held: Held,
}

/// Bytes of lines gathered before they are written (what `BufWriter` held: 64 KiB).
const BATCH: usize = 64 << 10;

impl Lines {
    fn open(path: &Path) -> std::io::Result<Lines> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(Lines {
            file,
            len,
            held: Held::default(),
        })
    }

    /// One record's whole line (its newline included).
    fn push(&mut self, rec: &Record, line: &[u8]) -> std::io::Result<()> {
        self.held.bytes.extend_from_slice(line);
        self.held
            .lines
            .push((rec.index, rec.phase, self.held.bytes.len()));
        if self.held.bytes.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// The lines a failed write left unwritten: the batch's, past what reached the file whole
    /// (the file is cut back to its last whole line first).
    fn unwritten(&mut self) -> Held {
        let mut held = std::mem::take(&mut self.held);
        let on_disk = self
            .file
            .metadata()
            .map_or(self.len, |m| m.len())
            .saturating_sub(self.len) as usize;
        // The file is cut to a line's end: lines that end within `on_disk` bytes made it.
        let made = held.lines.partition_point(|(_, _, end)| *end <= on_disk);
        let from = if made == 0 { 0 } else { held.lines[made - 1].2 };
        held.bytes.drain(..from.min(held.bytes.len()));
        held.lines.drain(..made);
        for l in &mut held.lines {
            l.2 -= from;
        }
        held
    }
}

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.held.bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    /// The batch to the file in one write; what reached it whole is known after a failure.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.held.bytes.is_empty() {
            return Ok(());
        }
        let r = self.file.write_all(&self.held.bytes);
        if r.is_err() {
            let _ = self.file.sync_data();
            return r;
        }
        self.len += self.held.bytes.len() as u64;
        self.held.bytes.clear();
        self.held.lines.clear();
        Ok(())
    }
}

/// A record's line as serde_json writes it: in pieces of a byte or a few (a comma, a gap's
/// digits, a quote), which `Vec`'s own `write_all` copies with a call to `memcpy` each; a
/// 256-token record is over 500 such pieces.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.len() <= 4 {
            for &b in bytes {
                self.0.push(b);
            }
        } else {
            self.0.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How long the writer lets records gather once they come faster than one a millisecond.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// The writer's wait for its next record. Records that come slowly are each waited for (the
/// sending task wakes the writer), and each is on disk as soon as it is written. Once they come
/// faster than [`GATHER`] apart, the writer sleeps that long between batches instead and takes
/// what gathered without being woken: at 37,000 records a second, a wake-up per record (a futex
/// call on the request's worker, a sleep and a context switch on the writer, and a write of one
/// record) was a sixth of the client's CPU at its ceiling (`bench/ceiling.sh`). A record then
/// reaches the file at most [`GATHER`] after its request finished; what is waiting is written
/// whenever the queue is empty, so a killed run loses at most that last millisecond.
#[derive(Debug, Default)]
struct Gather {
    /// The last wait for a record was shorter than [`GATHER`].
    fast: bool,
}

impl Gather {
    /// The next record, `None` once every sender is gone and the queue is empty; flushes `out`
    /// before any wait.
    fn next(
        &mut self,
        rx: &mut UnboundedReceiver<Record>,
        out: &mut impl Write,
    ) -> std::io::Result<Option<Record>> {
        use tokio::sync::mpsc::error::TryRecvError;
        loop {
            match rx.try_recv() {
                Ok(rec) => return Ok(Some(rec)),
                Err(TryRecvError::Disconnected) => return Ok(None),
                Err(TryRecvError::Empty) => {}
            }
            out.flush()?;
            if self.fast {
                self.fast = false;
                std::thread::sleep(GATHER);
                // Anything gathered keeps the writer in this mode.
                if !rx.is_empty() {
                    self.fast = true;
                }
                continue;
            }
            let waited = std::time::Instant::now();
            let rec = rx.blocking_recv();
            self.fast = waited.elapsed() < GATHER;
            return Ok(rec);
        }
    }
}

/// Cuts a file back to just after its last newline (a record torn by a failed write).
fn cut_to_last_line(path: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut end = f.metadata()?.len();
    let mut block = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut block[..n])?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            return f.set_len(start + i as u64 + 1);
        }
        end = start;
    }
    f.set_len(0)
}

/// A record cut off by the run's own stop, written `abandoned` with why.
fn abandoned(rec: &mut Record, abandon: &std::sync::OnceLock<String>) {
    if rec.outcome == crate::record::Outcome::Interrupted
        && let Some(why) = abandon.get()
    {
        rec.outcome = crate::record::Outcome::Abandoned;
        rec.error = Some(why.as_str().into());
    }
}

/// A record's whole line (its newline included) in `buf`; the record as written (a secret a
/// server echoed redacted, so an observer sees it as the file does).
fn line_of(rec: &mut Record, buf: &mut Line) -> std::io::Result<()> {
    buf.0.clear();
    // The chunks are written last and straight (`Chunks::write_json`), not through serde.
    let chunks = std::mem::take(&mut rec.chunks);
    serde_json::to_writer(&mut *buf, &*rec).map_err(std::io::Error::other)?;
    let line = &mut buf.0;
    if !chunks.is_empty() {
        // A record is a JSON object: its chunks go in before its closing brace.
        debug_assert_eq!(line.last(), Some(&b'}'));
        line.pop();
        line.extend_from_slice(b",\"chunks\":");
        chunks.write_json(line);
        line.push(b'}');
    }
    rec.chunks = chunks;
    // A secret a server echoed (a 401 body quoting the key) never reaches the file, nor
    // an observer's message: they see the record as written.
    if crate::secrets::any()
        && let Ok(text) = std::str::from_utf8(line)
        && let std::borrow::Cow::Owned(clean) = crate::secrets::redact(text)
    {
        *rec = serde_json::from_str(&clean).map_err(std::io::Error::other)?;
        *line = clean.into_bytes();
    }
    line.push(b'\n');
    Ok(())
}

fn write_all(
    out: &mut Lines,
    rx: &mut UnboundedReceiver<Record>,
    mut observers: Vec<Box<dyn Observer>>,
    abandon: &std::sync::OnceLock<String>,
) -> std::io::Result<u64> {
    let mut written = 0;
    let mut buf = Line(Vec::new());
    let mut gather = Gather::default();
    while let Some(mut rec) = gather.next(rx, out)? {
        abandoned(&mut rec, abandon);
        line_of(&mut rec, &mut buf)?;
        out.push(&rec, &buf.0)?;
        for o in &mut observers {
            o.observe(&rec);
        }
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record; every other one with chunks (written apart from the rest of the record).
    fn record(i: u64) -> Record {
        let chunks = if i % 2 == 1 {
            format!(r#","chunks":{{"at_us":{i},"gaps_us":[0,{i},-1],"tokens":[[1,2],[3,2]]}}"#)
        } else {
            String::new()
        };
        serde_json::from_str(&format!(
            r#"{{"index":{i},"phase":"steady","request_id":"r-{i}","input_tokens_planned":1,"output_tokens_planned":1,"client_output_tokens":1,"outcome":"ok"{chunks}}}"#
        ))
        .unwrap()
    }

    fn lines(path: &Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    /// Polls the file (the writer's thread has no other signal) until it holds `n` records; a
    /// generous bound, for a busy host.
    fn until_lines(path: &Path, n: usize) {
        let start = std::time::Instant::now();
        while lines(path) < n {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "{} of {n} records on disk",
                lines(path)
            );
            std::thread::yield_now();
        }
    }

    /// A burst is gathered (no wake-up per record) and written whole, in order; a record that
    /// comes alone after it, and one before it, reach the file while the channel is still open
    /// and nothing more comes: a killed run keeps them.
    #[test]
    fn a_lone_record_is_on_disk_at_once_and_a_burst_is_written_whole_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.jsonl");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                write_records(&path, rx, Vec::new(), &std::sync::OnceLock::new(), &|_| {})
            })
        };
        tx.send(record(0)).unwrap();
        until_lines(&path, 1);
        for i in 1..=5000 {
            tx.send(record(i)).unwrap();
        }
        until_lines(&path, 5001);
        tx.send(record(5001)).unwrap();
        until_lines(&path, 5002);
        drop(tx);
        assert_eq!(writer.join().unwrap().unwrap(), 5002);
        // Each record reads back as it was sent, chunks and all, in order.
        let read = crate::record::read_jsonl(&path).unwrap();
        assert!(read.iter().enumerate().all(|(i, r)| *r == record(i as u64)));
    }
}
