//! A request's text-carrying chunks — arrival time and tokens of each — held compactly.
//!
//! A million-request bundle of 128-token answers holds 128 million chunks; as `(u64, u32)`
//! pairs in memory that is 2 GB, and as `[[µs, tokens], …]` JSON 2.2 GB of text. Here a chunk
//! costs about two bytes in memory and six on disk:
//!
//! - in memory, the first arrival, then each later arrival as its gap from the one before
//!   (Stream VByte: a control byte of four 2-bit widths, then four gaps of 1, 2, 3 or 8 bytes;
//!   a gap under 65.5 ms takes two bytes and a quarter, under 16.8 s three and a quarter), and
//!   tokens per chunk run-length encoded (an answer streamed a token a chunk is one run). The
//!   gaps are unsigned while no chunk arrived before the one before it (every run's, the
//!   client's clock being monotonic); a file that says otherwise has its gaps zigzag-encoded
//!   from then on, signed;
//! - in `requests.jsonl`, `{"at_us": first arrival, "gaps_us": [gap, …], "tokens": [[tokens,
//!   chunks in a row], …]}` — still JSON a reader or `jq` takes apart, with the same integers.
//!   The format before it, `[[µs, tokens], …]`, still loads.
//!
//! Every time stays the exact microsecond it was; nothing is rounded or sketched. The encoding
//! is hand-written because it is a few dozen lines private to this file (its bytes never leave
//! memory) and must append one gap at a time as a stream arrives, which the Stream VByte crates
//! (whole arrays of `u32`, encoded at once) do not do.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq)]
pub struct Chunks {
    len: u32,
    /// No chunk arrived before the one before it (true of every run: the client's clock is
    /// monotonic).
    in_order: bool,
    /// Bytes in `gaps` after the last group's control byte (where the next gap's code goes).
    back: u8,
    first_us: u64,
    last_us: u64,
    /// From the second chunk on: arrival minus the previous arrival, in groups of four (see
    /// [`put_gap`]); zigzag-encoded once one is negative (`in_order` false).
    gaps: Vec<u8>,
    /// Tokens per chunk, run-length: (tokens, chunks in a row).
    runs: Vec<(u32, u32)>,
}

/// Bytes a gap takes by its 2-bit code: any `i64` fits the last.
const WIDTH: [usize; 4] = [1, 2, 3, 8];
/// The width code of a gap that needs `i` + 1 bytes.
const CODE: [u8; 8] = [0, 1, 2, 3, 3, 3, 3, 3];
const MASK: [u64; 4] = [0xff, 0xffff, 0xff_ffff, u64::MAX];

/// Appends gap number `k` (from 0), `v`: zigzag-encoded when `signed`, else as it is (`v` ≥
/// 0). Gaps go in groups of four, a control byte holding each one's 2-bit width code, then
/// their bytes, little-endian (Stream VByte: Lemire, Kurz and Rupp, 2017): a gap under 65.5 ms
/// takes two bytes and a quarter, where LEB128 took three from 16.4 ms. `back` counts the
/// bytes after the group's control byte, so appending needs no search.
#[inline(always)]
fn put_gap(out: &mut Vec<u8>, back: &mut u8, k: u32, v: i64, signed: bool) {
    let z = if signed {
        ((v << 1) ^ (v >> 63)) as u64
    } else {
        v as u64
    };
    // A gap under 256 µs (the chunks of one read, a burst) takes one byte of width code 0:
    // written as such, without the general path's word and cut.
    if z < 0x100 {
        if k % 4 == 0 {
            *back = 1;
            out.extend_from_slice(&[0, z as u8]);
        } else {
            *back += 1;
            out.push(z as u8);
        }
        return;
    }
    // The width code from the bytes the gap needs (1 for 0).
    let code = CODE[(63 - (z | 1).leading_zeros() as usize) / 8];
    let n = WIDTH[usize::from(code)];
    let shift = 2 * (k % 4);
    // Eight bytes written, then cut back to the gap's own: a fixed-size copy is one store,
    // where a copy of `n` bytes was a call to memcpy per gap.
    let mut word = [0u8; 9];
    let start = if shift == 0 {
        *back = 0;
        word[0] = code;
        word[1..].copy_from_slice(&z.to_le_bytes());
        1
    } else {
        let ctl = out.len() - 1 - usize::from(*back);
        out[ctl] |= code << shift;
        word[..8].copy_from_slice(&z.to_le_bytes());
        0
    };
    let end = out.len() + start + n;
    out.extend_from_slice(&word);
    out.truncate(end);
    *back += n as u8;
}

/// Reads the gaps [`put_gap`] wrote, in order.
#[derive(Clone, Copy, Default)]
struct GapReader {
    at: usize,
    k: u32,
    ctl: u8,
}

impl GapReader {
    /// The next gap of `bytes` (only this file wrote them, `signed` as written).
    #[inline]
    fn next(&mut self, bytes: &[u8], signed: bool) -> i64 {
        if self.k % 4 == 0 {
            self.ctl = bytes[self.at];
            self.at += 1;
        }
        let code = usize::from((self.ctl >> (2 * (self.k % 4))) & 3);
        let n = WIDTH[code];
        // Eight bytes at once, masked to the gap's own, where there are eight to read (a
        // copy of `n` bytes was a call to memcpy per gap).
        let z = match bytes.get(self.at..self.at + 8) {
            Some(word) => u64::from_le_bytes(word.try_into().expect("eight")) & MASK[code],
            None => bytes[self.at..self.at + n]
                .iter()
                .rev()
                .fold(0, |z, &b| (z << 8) | u64::from(b)),
        };
        self.at += n;
        self.k += 1;
        if signed {
            ((z >> 1) as i64) ^ -((z & 1) as i64)
        } else {
            z as i64
        }
    }
}

/// `n` unsigned gaps written again zigzag-encoded, at the first that is negative; with the new
/// `back`.
fn signed(bytes: &[u8], n: u32) -> (Vec<u8>, u8) {
    let (mut out, mut back, mut read) =
        (Vec::with_capacity(bytes.len() + 9), 0, GapReader::default());
    for k in 0..n {
        put_gap(&mut out, &mut back, k, read.next(bytes, false), true);
    }
    (out, back)
}

impl Default for Chunks {
    fn default() -> Chunks {
        Chunks {
            len: 0,
            in_order: true,
            back: 0,
            first_us: 0,
            last_us: 0,
            gaps: Vec::new(),
            runs: Vec::new(),
        }
    }
}

impl Chunks {
    pub fn new() -> Chunks {
        Chunks::default()
    }

    /// Every arrival at or after the one before it.
    pub fn in_order(&self) -> bool {
        self.in_order
    }

    /// Every chunk carried exactly one token.
    pub fn one_token_each(&self) -> bool {
        matches!(self.runs[..], [] | [(1, _)])
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a chunk that arrived at `at_us` (at most `i64::MAX`) carrying `tokens`.
    pub fn push(&mut self, at_us: u64, tokens: u32) {
        if self.len == 0 {
            self.first_us = at_us;
        } else {
            let gap = at_us as i64 - self.last_us as i64;
            let k = self.len - 1;
            if gap < 0 && self.in_order {
                (self.gaps, self.back) = signed(&self.gaps, k);
                self.in_order = false;
            }
            put_gap(&mut self.gaps, &mut self.back, k, gap, !self.in_order);
        }
        self.last_us = at_us;
        self.len += 1;
        match self.runs.last_mut() {
            Some((k, n)) if *k == tokens => *n += 1,
            _ => self.runs.push((tokens, 1)),
        }
    }

    /// Appends `count` chunks that arrived together at `at_us` (at most `i64::MAX`), each
    /// carrying `tokens`: what `count` calls of [`push`](Self::push) make, with the gaps after
    /// the first (all zero, whose code and bytes are zero bytes) written at once. The events of
    /// one read arrive together: pushing them one at a time was a tenth of the client's work
    /// per event at its ceiling.
    pub fn push_many(&mut self, at_us: u64, tokens: u32, count: u32) {
        if count == 0 {
            return;
        }
        self.push(at_us, tokens);
        let rest = count - 1;
        if rest == 0 {
            return;
        }
        // Gap k (from 0) opens a group, a control byte and then its own, when k % 4 is 0.
        let (first, end) = (self.len - 1, self.len - 1 + rest);
        let opened = end.div_ceil(4) - first.div_ceil(4);
        self.gaps
            .resize(self.gaps.len() + (rest + opened) as usize, 0);
        // `back`: the bytes after the last group's control byte, which is the group of gap
        // `end - 1`; its gaps from the group's first, each a byte, are the zeros just written
        // (or, when no group opened, those of the group before plus them).
        self.back = if opened > 0 {
            ((end - 1) % 4 + 1) as u8
        } else {
            self.back + rest as u8
        };
        self.len += rest;
        // `push` just made the last run this one's.
        if let Some((_, n)) = self.runs.last_mut() {
            *n += rest;
        }
    }

    /// Makes room for `n` more chunks that arrive close together (a gap under 256 µs takes a
    /// byte and a quarter).
    pub fn reserve(&mut self, n: usize) {
        self.gaps.reserve(n + n / 4 + 1);
    }

    pub fn clear(&mut self) {
        *self = Chunks::default();
    }

    /// Every arrival `by_us` later (another clock's origin): the gaps stay as they are.
    pub fn shift(&mut self, by_us: u64) {
        if self.len > 0 {
            self.first_us = self.first_us.saturating_add(by_us);
            self.last_us = self.last_us.saturating_add(by_us);
        }
    }

    /// Every chunk, in order: (arrival µs, tokens).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            chunks: self,
            left: self.len,
            gaps: GapReader::default(),
            t: self.first_us,
            run: 0,
            run_left: self.runs.first().map_or(0, |r| r.1),
        }
    }

    pub fn first(&self) -> Option<(u64, u32)> {
        (self.len > 0).then(|| (self.first_us, self.runs[0].0))
    }

    pub fn last(&self) -> Option<(u64, u32)> {
        (self.len > 0).then(|| (self.last_us, self.runs[self.runs.len() - 1].0))
    }

    /// Chunk `i` (a walk from the first).
    pub fn get(&self, i: usize) -> Option<(u64, u32)> {
        self.iter().nth(i)
    }

    /// Tokens in all chunks (saturating: a hand-edited file cannot overflow it).
    pub fn tokens(&self) -> u32 {
        self.runs
            .iter()
            .fold(0u32, |s, &(k, n)| s.saturating_add(k.saturating_mul(n)))
    }

    /// Tokens in the first `n` chunks.
    pub fn tokens_in_first(&self, n: usize) -> u32 {
        let mut left = n.min(self.len()) as u32;
        let mut sum = 0;
        for &(k, c) in &self.runs {
            let take = c.min(left);
            sum = k.saturating_mul(take).saturating_add(sum);
            left -= take;
            if left == 0 {
                break;
            }
        }
        sum
    }

    /// The gaps between consecutive arrivals, µs (one fewer than the chunks).
    pub fn gaps_us(&self) -> impl Iterator<Item = i64> + '_ {
        let mut read = GapReader::default();
        (1..self.len).map(move |_| read.next(&self.gaps, !self.in_order))
    }

    /// Replaces each chunk's tokens (a recount), arrival times kept. `tokens` has one count per
    /// chunk.
    pub fn set_tokens(&mut self, tokens: impl IntoIterator<Item = u32>) {
        self.runs.clear();
        for k in tokens {
            match self.runs.last_mut() {
                Some((x, n)) if *x == k => *n += 1,
                _ => self.runs.push((k, 1)),
            }
        }
        debug_assert_eq!(self.runs.iter().map(|r| r.1).sum::<u32>(), self.len);
    }

    /// Applies `f` to every chunk's tokens.
    pub fn map_tokens(&mut self, f: impl Fn(u32) -> u32) {
        let new: Vec<u32> = self.iter().map(|c| f(c.1)).collect();
        self.set_tokens(new);
    }
}

impl std::fmt::Debug for Chunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<(u64, u32)> for Chunks {
    fn from_iter<I: IntoIterator<Item = (u64, u32)>>(it: I) -> Chunks {
        let mut c = Chunks::new();
        for (t, k) in it {
            c.push(t, k);
        }
        c
    }
}

impl<'a> IntoIterator for &'a Chunks {
    type Item = (u64, u32);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

pub struct Iter<'a> {
    chunks: &'a Chunks,
    left: u32,
    gaps: GapReader,
    t: u64,
    run: usize,
    run_left: u32,
}

impl Iterator for Iter<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        if self.left == 0 {
            return None;
        }
        if self.left < self.chunks.len {
            let gap = self.gaps.next(&self.chunks.gaps, !self.chunks.in_order);
            self.t = (self.t as i64 + gap) as u64;
        }
        self.left -= 1;
        while self.run_left == 0 {
            self.run += 1;
            self.run_left = self.chunks.runs[self.run].1;
        }
        self.run_left -= 1;
        Some((self.t, self.chunks.runs[self.run].0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl Chunks {
    /// The JSON that [`Serialize`] writes through serde_json, appended to `out` straight: the
    /// record writer's way (see `record::writer`), where serde's per-element path cost a
    /// 256-token record more than its client had spent reading the answer's events (about 110
    /// instructions a gap, against 45 here). A test holds the two to the same bytes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut n = itoa::Buffer::new();
        out.extend_from_slice(b"{\"at_us\":");
        out.extend_from_slice(n.format(self.first_us).as_bytes());
        out.extend_from_slice(b",\"gaps_us\":[");
        // Two bytes a gap at least: one reservation, not a growth check that grows.
        out.reserve(2 * self.len as usize + 24);
        for (i, gap) in self.gaps_us().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Most gaps are the chunks of one read: 0 to 9 µs, one digit, pushed as such (a
            // copy of itoa's few bytes was a call to memcpy per gap).
            if (0..10).contains(&gap) {
                out.push(b'0' + gap as u8);
            } else {
                n.format(gap).bytes().for_each(|b| out.push(b));
            }
        }
        out.extend_from_slice(b"],\"tokens\":[");
        for (i, &(tokens, count)) in self.runs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'[');
            out.extend_from_slice(n.format(tokens).as_bytes());
            out.push(b',');
            out.extend_from_slice(n.format(count).as_bytes());
            out.push(b']');
        }
        out.extend_from_slice(b"]}");
    }
}

impl Serialize for Chunks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Gaps<'a>(&'a Chunks);
        impl Serialize for Gaps<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.gaps_us())
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("at_us", &self.first_us)?;
        m.serialize_entry("gaps_us", &Gaps(self))?;
        m.serialize_entry("tokens", &self.runs)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Chunks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Chunks, D::Error> {
        d.deserialize_any(ChunksVisitor)
    }
}

struct ChunksVisitor;

thread_local! {
    /// The gaps of the record being read, before they are copied out at their size: grown
    /// here once per reading thread rather than a doubling at a time per record.
    static GAPS_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `bytes` in an allocation of their own size. `shrink_to_fit` may keep the larger block
/// (mimalloc keeps one at least half used), which held a third of a big bundle's gaps unused.
fn exact(bytes: &[u8]) -> Vec<u8> {
    bytes.to_vec()
}

/// Gaps pushed straight into their encoding as they parse (no `Vec<i64>` between),
/// with the running sum's range (so no arrival can fall outside `0..=i64::MAX`, whatever
/// a file says).
struct Gaps {
    bytes: Vec<u8>,
    back: u8,
    n: u32,
    sum: i64,
    lowest: i64,
    highest: i64,
    in_order: bool,
}
struct GapsSeed<'a>(&'a mut Gaps);
impl<'de> de::DeserializeSeed<'de> for GapsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}
impl<'de> Visitor<'de> for GapsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of gaps in µs")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let g = self.0;
        while let Some(gap) = seq.next_element::<i64>()? {
            if gap < 0 && g.in_order {
                (g.bytes, g.back) = signed(&g.bytes, g.n);
                g.in_order = false;
            }
            put_gap(&mut g.bytes, &mut g.back, g.n, gap, !g.in_order);
            g.n =
                g.n.checked_add(1)
                    .ok_or_else(|| de::Error::custom("chunks: too many gaps"))?;
            g.sum = g
                .sum
                .checked_add(gap)
                .ok_or_else(|| de::Error::custom("chunks: gaps beyond any time"))?;
            g.lowest = g.lowest.min(g.sum);
            g.highest = g.highest.max(g.sum);
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for ChunksVisitor {
    type Value = Chunks;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(r#"{"at_us", "gaps_us", "tokens"} or a list of [µs, tokens]"#)
    }

    /// The format before compact encoding: `[[µs, tokens], …]`.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Chunks, A::Error> {
        let mut c = Chunks::new();
        while let Some((t, k)) = seq.next_element::<(u64, u32)>()? {
            if i64::try_from(t).is_err() {
                return Err(de::Error::custom("chunks: an arrival beyond any time"));
            }
            c.push(t, k);
        }
        c.gaps = exact(&c.gaps);
        c.runs.shrink_to_fit();
        Ok(c)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Chunks, A::Error> {
        let (mut first, mut runs) = (None, None);
        let mut g = Gaps {
            bytes: GAPS_SCRATCH.take(),
            back: 0,
            n: 0,
            sum: 0,
            lowest: 0,
            highest: 0,
            in_order: true,
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "at_us" => first = Some(map.next_value::<u64>()?),
                "gaps_us" => map.next_value_seed(GapsSeed(&mut g))?,
                "tokens" => runs = Some(map.next_value::<Vec<(u32, u32)>>()?),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let first = first.ok_or_else(|| de::Error::missing_field("at_us"))?;
        let runs = runs.ok_or_else(|| de::Error::missing_field("tokens"))?;
        let len: u64 = runs.iter().map(|r| u64::from(r.1)).sum();
        if len != u64::from(g.n) + 1 || runs.iter().any(|r| r.1 == 0) {
            return Err(de::Error::custom(format!(
                "chunks: {} gaps need {} chunks in `tokens`, which counts {len}",
                g.n,
                u64::from(g.n) + 1
            )));
        }
        let at = |d: i64| i64::try_from(first).ok().and_then(|f| f.checked_add(d));
        if at(g.lowest).is_none_or(|t| t < 0) || at(g.highest).is_none() {
            return Err(de::Error::custom(
                "chunks: gaps run outside the run's clock",
            ));
        }
        // Read from a file, the list is whole: no room kept for more (a third of its memory).
        let gaps = exact(&g.bytes);
        g.bytes.clear();
        GAPS_SCRATCH.set(g.bytes);
        let mut runs = runs;
        runs.shrink_to_fit();
        Ok(Chunks {
            len: g.n + 1,
            in_order: g.in_order,
            back: g.back,
            first_us: first,
            last_us: at(g.sum).expect("within the range checked") as u64,
            gaps,
            runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Chunks;

    /// `push_many` is `push` that many times, after any chunks before it (gaps of every width,
    /// in order or not) and before any after it.
    #[test]
    fn many_at_once_are_the_same_as_one_at_a_time() {
        let before: [&[(u64, u32)]; 5] = [
            &[],
            &[(10, 1)],
            &[(10, 1), (20, 1), (300, 2)],
            &[(10, 1), (70_000, 1), (70_001, 1), (5, 1)],
            &[(10, 2), (11, 2), (12, 2), (13, 2), (14, 2), (20_000_000, 1)],
        ];
        for b in before {
            for count in 0..11 {
                for tokens in [1, 2] {
                    let (mut one, mut many): (Chunks, Chunks) =
                        (b.iter().copied().collect(), b.iter().copied().collect());
                    let at = b.last().map_or(7, |c| c.0 + 3);
                    for _ in 0..count {
                        one.push(at, tokens);
                    }
                    many.push_many(at, tokens, count);
                    for (t, k) in [(at + 300, 1), (at + 301, 1), (at + 70_000, 2)] {
                        one.push(t, k);
                        many.push(t, k);
                    }
                    assert!(one == many, "{b:?} then {count} of {tokens}");
                    assert_eq!(
                        many.iter().collect::<Vec<_>>(),
                        one.iter().collect::<Vec<_>>()
                    );
                }
            }
        }
    }

    #[test]
    fn holds_every_time_and_count_exactly_and_round_trips_both_formats() {
        let raw = vec![
            (1_000_000u64, 1u32),
            (1_015_123, 1),
            (1_015_123, 0),
            (3_400_000, 3),
            (3_400_001, 3),
            (3_399_990, 1),
        ];
        let c: Chunks = raw.iter().copied().collect();
        assert_eq!(c.iter().collect::<Vec<_>>(), raw);
        assert_eq!((c.len(), c.tokens(), c.tokens_in_first(4)), (6, 9, 5));
        assert_eq!(
            (c.first(), c.last(), c.get(3)),
            (Some(raw[0]), Some(raw[5]), Some(raw[3]))
        );
        assert_eq!(
            c.gaps_us().collect::<Vec<_>>(),
            vec![15_123, 0, 2_384_877, 1, -11]
        );
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"at_us":1000000,"gaps_us":[15123,0,2384877,1,-11],"tokens":[[1,2],[0,1],[3,2],[1,1]]}"#
        );
        assert_eq!(serde_json::from_str::<Chunks>(&json).unwrap(), c);
        let mut direct = Vec::new();
        c.write_json(&mut direct);
        assert_eq!(String::from_utf8(direct).unwrap(), json);
        let legacy = serde_json::to_string(&raw).unwrap();
        assert_eq!(serde_json::from_str::<Chunks>(&legacy).unwrap(), c);
        assert!(Chunks::new().iter().next().is_none());
        assert!(!c.in_order() && !c.one_token_each());
        let ordered: Chunks = raw[..2].iter().copied().collect();
        assert!(ordered.in_order() && ordered.one_token_each());
    }

    #[test]
    fn gaps_in_order_cost_two_bytes_and_a_quarter_under_65_ms_and_a_late_backward_one_keeps_them_all()
     {
        // 15.9 ms apart: two bytes a gap and a control byte for four (LEB128 zigzag took three).
        let even: Chunks = (0..100u64).map(|k| (k * 15_900, 1)).collect();
        assert_eq!((even.gaps.len(), even.in_order()), (2 * 99 + 25, true));
        // 65.5 ms and 256 µs are the edges of two bytes and one; 71 minutes takes eight.
        let wide: Chunks = [
            0,
            65_535,
            65_536 + 65_535,
            65_536 + 65_535 + 255,
            5_000_000_000,
        ]
        .into_iter()
        .map(|t| (t, 1))
        .collect();
        assert_eq!(wide.gaps.len(), 1 + 2 + 3 + 1 + 8);
        // The same, then one chunk 5 µs before the last: the gaps so far are written again
        // signed, and every time is still exact, read back and from its JSON alike.
        let mut raw: Vec<(u64, u32)> = (0..100u64).map(|k| (k * 15_900, 1)).collect();
        raw.push((99 * 15_900 - 5, 1));
        raw.push((99 * 15_900 + 20_000, 2));
        let c: Chunks = raw.iter().copied().collect();
        assert!(!c.in_order());
        assert_eq!(c.iter().collect::<Vec<_>>(), raw);
        let back: Chunks = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!((back.iter().collect::<Vec<_>>(), &back), (raw, &c));
    }

    /// Gaps of every width, one-byte ones (written on their own path) among the others at every
    /// place in a group of four, in order and then signed: every time comes back, and the
    /// record writer's JSON is serde's, byte for byte.
    #[test]
    fn gaps_of_mixed_widths_at_every_place_in_a_group_come_back() {
        use rand::{RngExt, SeedableRng};
        for seed in 0..50 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut at = 1_000u64;
            let mut raw = Vec::new();
            for i in 0..200 {
                at += match rng.random_range(0..4) {
                    0 => rng.random_range(0..256),
                    1 => rng.random_range(256..65_536),
                    2 => rng.random_range(65_536..16_777_216),
                    _ => rng.random_range(16_777_216..1 << 40),
                };
                // Past the middle, a chunk now and then before the one before it: signed gaps.
                let t = if i > 100 && i % 17 == 0 { at - 100 } else { at };
                raw.push((t, rng.random_range(0..3u32)));
            }
            let c: Chunks = raw.iter().copied().collect();
            assert_eq!(c.iter().collect::<Vec<_>>(), raw, "seed {seed}");
            for c in [c, raw[..1].iter().copied().collect()] {
                let mut direct = Vec::new();
                c.write_json(&mut direct);
                assert_eq!(direct, serde_json::to_vec(&c).unwrap(), "seed {seed}");
            }
        }
    }

    #[test]
    fn gaps_that_leave_the_clock_are_refused_not_wrapped() {
        for json in [
            r#"{"at_us":5,"gaps_us":[-6],"tokens":[[1,2]]}"#,
            r#"{"at_us":5,"gaps_us":[9223372036854775807,-9223372036854775807],"tokens":[[1,3]]}"#,
            r#"{"at_us":0,"gaps_us":[9223372036854775807,1],"tokens":[[1,3]]}"#,
        ] {
            let e = serde_json::from_str::<Chunks>(json)
                .unwrap_err()
                .to_string();
            assert!(e.contains("chunks: gaps"), "{json}: {e}");
        }
        // Tokens that would overflow a count saturate.
        let c: Chunks =
            serde_json::from_str(r#"{"at_us":1,"gaps_us":[1],"tokens":[[4294967295,2]]}"#).unwrap();
        assert_eq!(c.tokens(), u32::MAX);
    }

    #[test]
    fn a_compact_form_whose_tokens_do_not_cover_its_gaps_is_refused() {
        let e = serde_json::from_str::<Chunks>(r#"{"at_us":5,"gaps_us":[1,2],"tokens":[[1,2]]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 gaps need 3 chunks"), "{e}");
    }
}
