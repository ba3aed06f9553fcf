//! The one collector: request tasks send finished records over a channel; one writer thread
//! appends each to `requests.jsonl` at once (flushing whenever the queue is empty, so a killed
//! run keeps every finished record) and tells its observers (the progress view, the
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
/// `spawn_blocking`). Once `decided` holds why the run stopped itself (its verdict decided), a
/// request that stop cut off is written `abandoned` (a miss), not `interrupted`.
///
/// A write that fails (a full disk, a removed directory, any I/O error) calls `failed` at
/// once, so the run stops within the record, not at the end of its schedule; the file is
/// cut back to its last whole line, and the error returned names it.
pub fn write_records(
    path: &Path,
    rx: UnboundedReceiver<Record>,
    observers: Vec<Box<dyn Observer>>,
    decided: &std::sync::OnceLock<String>,
    failed: &(dyn Fn(String) + Send + Sync),
) -> std::io::Result<u64> {
    let r = write_all(path, rx, observers, decided);
    if let Err(e) = &r {
        let why = format!(
            "{} could not be written ({e}): the run stopped at once; the records written before are kept",
            path.display()
        );
        failed(why.clone());
        // A torn last line is cut off: what stays is every record written whole.
        let _ = cut_to_last_line(path);
        return Err(std::io::Error::new(e.kind(), why));
    }
    r
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

fn write_all(
    path: &Path,
    mut rx: UnboundedReceiver<Record>,
    mut observers: Vec<Box<dyn Observer>>,
    decided: &std::sync::OnceLock<String>,
) -> std::io::Result<u64> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut out = std::io::BufWriter::new(file);
    let mut written = 0;
    let mut line = Vec::new();
    while let Some(mut rec) = rx.blocking_recv() {
        if rec.outcome == crate::record::Outcome::Interrupted
            && let Some(why) = decided.get()
        {
            rec.outcome = crate::record::Outcome::Abandoned;
            rec.error =
                Some(format!("in flight when the run stopped, its verdict decided ({why})").into());
        }
        line.clear();
        serde_json::to_writer(&mut line, &rec).map_err(std::io::Error::other)?;
        // A secret a server echoed (a 401 body quoting the key) never reaches the file, nor
        // an observer's message: they see the record as written.
        if crate::secrets::any()
            && let Ok(text) = std::str::from_utf8(&line)
            && let std::borrow::Cow::Owned(clean) = crate::secrets::redact(text)
        {
            rec = serde_json::from_str(&clean).map_err(std::io::Error::other)?;
            line = clean.into_bytes();
        }
        out.write_all(&line)?;
        out.write_all(b"\n")?;
        if rx.is_empty() {
            out.flush()?;
        }
        for o in &mut observers {
            o.observe(&rec);
        }
        written += 1;
    }
    out.flush()?;
    Ok(written)
}
