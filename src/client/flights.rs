//! The load's requests in flight as the progress guard (`driver::guard`) sees them: which still
//! wait for their first token and since when, how many stream at once (and the most seen), when
//! the server last sent a byte of any answer, and how many answers ended well. The client tells
//! it what happens to each request; the guard reads a [`Snapshot`] a few times a second.
//!
//! It knows nothing of the guard's rules, of phases or of the plan: a request is a ticket from
//! its send to its end, however it ends (a request future dropped mid-stream leaves too).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The book of the requests in flight. One lock taken three times per request (sent, first
/// token, ended), never per chunk: a chunk only stores the time of the last byte.
#[derive(Debug, Default)]
pub struct Flights {
    book: Mutex<Book>,
    /// When the server last sent a byte of any answer, or the book last went from idle to
    /// busy (µs on the run's clock): the stall's origin.
    last_progress_us: AtomicU64,
}

#[derive(Debug, Default)]
struct Book {
    /// The requests still waiting for their first token: (sent µs, ticket), oldest first.
    waiting: BTreeSet<(u64, u64)>,
    /// Requests that have their first token and have not ended.
    streaming: u64,
    /// The most requests ever streaming at once: what the server has shown it serves together.
    peak_streaming: u64,
    in_flight: u64,
    sent: u64,
    /// Requests that ended with a whole, successful answer, and when the last did.
    completed: u64,
    last_completed_us: Option<u64>,
    /// The time to first token of the first request that had one (µs from its send).
    first_ttft_us: Option<u64>,
    next_ticket: u64,
}

/// What the book holds at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub in_flight: u64,
    /// In flight, no token yet.
    pub waiting: u64,
    /// When the oldest of those was sent (µs on the run's clock).
    pub oldest_waiting_us: Option<u64>,
    pub streaming: u64,
    pub peak_streaming: u64,
    pub sent: u64,
    pub completed: u64,
    pub last_completed_us: Option<u64>,
    /// When the server last sent a byte of an answer, or requests were first in flight after
    /// none were (µs on the run's clock).
    pub last_progress_us: u64,
    pub first_ttft_us: Option<u64>,
}

/// One request's place in the book, from its send to its end ([`Flights::leave`]).
#[derive(Debug)]
pub struct Ticket {
    sent_us: u64,
    id: u64,
    /// Still in the waiting set.
    waiting: bool,
    /// The answer ended well, at this instant (µs on the run's clock).
    pub(crate) ok_at: Option<u64>,
}

impl Flights {
    /// A request is sent at `now`.
    pub fn enter(&self, now: u64) -> Ticket {
        let mut b = self.lock();
        let id = b.next_ticket;
        b.next_ticket += 1;
        b.waiting.insert((now, id));
        if b.in_flight == 0 {
            // Busy after idle: the wait for progress starts now, not at the last answer.
            self.last_progress_us.store(now, Ordering::Relaxed);
        }
        b.in_flight += 1;
        b.sent += 1;
        Ticket {
            sent_us: now,
            id,
            waiting: true,
            ok_at: None,
        }
    }

    /// A byte of some answer arrived at `now`: the server is doing something.
    #[inline]
    pub fn progress(&self, now: u64) {
        self.last_progress_us.store(now, Ordering::Relaxed);
    }

    /// The request's first token arrived at `at`.
    pub fn first_token(&self, t: &mut Ticket, at: u64) {
        if !t.waiting {
            return;
        }
        t.waiting = false;
        let mut b = self.lock();
        b.waiting.remove(&(t.sent_us, t.id));
        b.streaming += 1;
        b.peak_streaming = b.peak_streaming.max(b.streaming);
        b.first_ttft_us.get_or_insert(at.saturating_sub(t.sent_us));
    }

    /// The request ended (answered, failed, cancelled or dropped). A whole answer that came
    /// at once (not streamed) is its first token too.
    pub fn leave(&self, t: &Ticket) {
        let mut b = self.lock();
        if t.waiting {
            b.waiting.remove(&(t.sent_us, t.id));
            if let Some(at) = t.ok_at {
                b.first_ttft_us.get_or_insert(at.saturating_sub(t.sent_us));
            }
        } else {
            b.streaming = b.streaming.saturating_sub(1);
        }
        b.in_flight = b.in_flight.saturating_sub(1);
        if let Some(at) = t.ok_at {
            b.completed += 1;
            b.last_completed_us = Some(b.last_completed_us.map_or(at, |l| l.max(at)));
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let b = self.lock();
        Snapshot {
            in_flight: b.in_flight,
            waiting: b.waiting.len() as u64,
            oldest_waiting_us: b.waiting.first().map(|(at, _)| *at),
            streaming: b.streaming,
            peak_streaming: b.peak_streaming,
            sent: b.sent,
            completed: b.completed,
            last_completed_us: b.last_completed_us,
            last_progress_us: self.last_progress_us.load(Ordering::Relaxed),
            first_ttft_us: b.first_ttft_us,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_follows_each_request_from_its_send_to_its_end() {
        let f = Flights::default();
        let mut a = f.enter(100);
        let b = f.enter(200);
        let s = f.snapshot();
        assert_eq!((s.in_flight, s.waiting, s.streaming), (2, 2, 0));
        assert_eq!(s.oldest_waiting_us, Some(100));
        // Busy from idle at the first send: the stall counts from there.
        assert_eq!(s.last_progress_us, 100);
        f.progress(350);
        f.first_token(&mut a, 400);
        f.first_token(&mut a, 500); // once only
        let s = f.snapshot();
        assert_eq!((s.waiting, s.streaming, s.peak_streaming), (1, 1, 1));
        assert_eq!(s.oldest_waiting_us, Some(200));
        assert_eq!((s.first_ttft_us, s.last_progress_us), (Some(300), 350));
        a.ok_at = Some(900);
        f.leave(&a);
        f.leave(&b);
        let s = f.snapshot();
        assert_eq!((s.in_flight, s.waiting, s.streaming), (0, 0, 0));
        assert_eq!((s.sent, s.completed, s.peak_streaming), (2, 1, 1));
        assert_eq!(s.last_completed_us, Some(900));
        assert_eq!(s.oldest_waiting_us, None);
        // Busy again after idle: the origin moves to the new send. A whole answer (not
        // streamed) is its first token.
        let mut c = f.enter(9_000);
        assert_eq!(f.snapshot().last_progress_us, 9_000);
        let g = Flights::default();
        let mut d = g.enter(1_000);
        d.ok_at = Some(4_000);
        g.leave(&d);
        assert_eq!(g.snapshot().first_ttft_us, Some(3_000));
        c.ok_at = None;
        f.leave(&c);
    }
}
