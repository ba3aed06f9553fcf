//! The scheduler and cost model of the simulated engine: continuous batching over one FCFS
//! waiting queue, KV-cache admission control, optional chunked prefill, a prefix cache, stalls
//! and a warm-up penalty.
//!
//! It owns no clock and does no I/O: a runner asks it for the next step at a time it chooses and
//! is told when the step ends and what happened. The HTTP runner sleeps until then; the
//! discrete-event runner jumps there. Both therefore share every scheduling decision.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::sim_config::{Scheduling, SimConfig};
use crate::text::mix2;

/// A request handed to the engine.
#[derive(Debug, Clone)]
pub struct Submission {
    /// Identifier chosen by the runner (the server's arrival number).
    pub id: u64,
    /// Prompt token ids (the simulator tokenizer's).
    pub prompt_ids: Vec<u64>,
    /// Exact number of tokens to generate.
    pub output_tokens: u32,
    /// The generated tokens' ids, when the runner knows them: the finished sequence (prompt
    /// and answer) becomes cacheable, as vLLM's prefix cache keeps the generated tokens' blocks
    /// too, so a conversation's next turn finds its previous answer cached. Empty: the prompt
    /// alone is cached.
    pub output_ids: Vec<u64>,
    /// The body's `priority` (lower first under `scheduling = "priority"`; 0 when absent).
    pub priority: i64,
    /// Milliseconds its admission adds to the step that starts its prefill (an adapter's).
    pub extra_ms: f64,
    /// Its images, by content hash and prompt tokens: each not in the encoder cache adds
    /// `vision.ms_per_token` a token to the step that admits it.
    pub images: Vec<(u64, u32)>,
}

/// What a step did, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Admitted to the running batch at the step's start; `cached_tokens` skipped prefill.
    Admitted { id: u64, cached_tokens: u32 },
    /// Can never fit in the KV cache (prompt + output exceed its capacity): refused at once.
    Rejected { id: u64 },
    /// Its images were encoded as it was admitted: how many it had, how many the encoder
    /// cache held, and the encoding's time, µs.
    Encoded {
        id: u64,
        images: u32,
        hits: u32,
        vision_us: u64,
    },
    /// Tokens `first_index .. first_index + tokens` were emitted at the step's end.
    Chunk {
        id: u64,
        first_index: u32,
        tokens: u32,
    },
    /// Speculative decoding: the draft tokens proposed for it in all, and those accepted
    /// (said once, just before `Finished`).
    Drafted {
        id: u64,
        drafted: u32,
        accepted: u32,
    },
    /// All output emitted at the step's end.
    Finished { id: u64 },
}

/// Timing of one step, seconds on the runner's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub start: f64,
    pub end: f64,
}

#[derive(Debug)]
struct Seq {
    id: u64,
    prompt_len: u64,
    prefill_left: u64,
    prefill_now: u64,
    target: u32,
    generated: u32,
    pending: u32,
    /// A chunk has been emitted (the next ones hold `tokens_per_chunk`).
    streaming: bool,
    kv_reserved: u64,
    block_hashes: Vec<u64>,
    prompt_ids: Vec<u64>,
    /// Block hashes of prompt and answer, inserted when it finishes (see
    /// [`Submission::output_ids`]).
    finished_hashes: Vec<u64>,
    priority: i64,
    extra_ms: f64,
    images: Vec<(u64, u32)>,
    /// Speculative decoding: its acceptance probability (drawn from its prompt), and the draft
    /// tokens proposed and accepted so far.
    acceptance: f64,
    drafted: u32,
    accepted: u32,
}

/// Salt of the speculative draws.
const SPEC_SALT: u64 = 0x7370_6563;

/// One decode step's draft for `s`: up to `draft_tokens` (never past the answer's end), the
/// target accepting a leading run of them, each with the sequence's acceptance; returns the
/// tokens accepted, and counts the draft on the sequence and in the `/metrics` counters.
fn draft_step(cfg: &SimConfig, s: &mut Seq, counters: &mut Counters) -> u32 {
    let k = cfg.speculative.draft_tokens;
    let left = s.target.saturating_sub(s.generated + 1);
    let k = k.min(left);
    if k == 0 {
        return 0;
    }
    let step = u64::from(s.generated);
    let mut accepted = 0;
    for j in 0..k {
        let u = crate::text::unit_interval(crate::text::mix2(
            crate::text::mix2(cfg.seed ^ SPEC_SALT, s.id),
            step << 8 | u64::from(j),
        ));
        if u >= s.acceptance {
            break;
        }
        accepted += 1;
    }
    s.drafted += k;
    s.accepted += accepted;
    counters.spec_drafts += 1;
    counters.spec_draft_tokens += u64::from(k);
    counters.spec_accepted += u64::from(accepted);
    counters.generation_tokens += u64::from(accepted);
    accepted
}

/// Counters for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub prefix_queries: u64,
    pub prefix_hits: u64,
    pub steps: u64,
    /// Images looked up in the encoder cache, and found there.
    pub mm_queries: u64,
    pub mm_hits: u64,
    /// Speculative decoding: verify steps, draft tokens proposed, draft tokens accepted.
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted: u64,
}

/// The engine state.
#[derive(Debug)]
pub struct Engine {
    cfg: SimConfig,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    kv_used: u64,
    cache: PrefixCache,
    counters: Counters,
    /// Requests submitted so far (the drift fault's clock).
    submitted: u64,
    /// The encoder cache: every image encoded so far, by content hash (emptied when it
    /// passes [`ENCODER_CACHE_ITEMS`]).
    encoded: std::collections::HashSet<u64>,
}

/// Images the encoder cache holds at most.
const ENCODER_CACHE_ITEMS: usize = 1 << 16;

impl Engine {
    pub fn new(cfg: SimConfig) -> Self {
        let cache = PrefixCache::new(cfg.prefix_cache_blocks);
        Engine {
            cfg,
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv_used: 0,
            cache,
            counters: Counters::default(),
            submitted: 0,
            encoded: Default::default(),
        }
    }

    /// Queues a request (FCFS).
    pub fn submit(&mut self, s: Submission) {
        self.submitted += 1;
        let prompt_len = s.prompt_ids.len() as u64;
        let finished_hashes = if s.output_ids.is_empty() || self.cfg.prefix_cache_blocks == 0 {
            Vec::new()
        } else {
            let mut all = s.prompt_ids.clone();
            all.extend_from_slice(&s.output_ids);
            block_hashes(&all, self.cfg.prefix_block_tokens as usize)
        };
        let u = crate::text::unit_interval(crate::text::mix2(
            self.cfg.seed ^ SPEC_SALT,
            super::model::prompt_hash(&s.prompt_ids),
        ));
        let acceptance = self.cfg.speculative.acceptance_of(u);
        self.waiting.push_back(Seq {
            id: s.id,
            acceptance,
            drafted: 0,
            accepted: 0,
            prompt_len,
            prefill_left: prompt_len,
            prefill_now: 0,
            target: s.output_tokens.max(1),
            generated: 0,
            pending: 0,
            streaming: false,
            kv_reserved: 0,
            block_hashes: Vec::new(),
            prompt_ids: s.prompt_ids,
            finished_hashes,
            priority: s.priority,
            extra_ms: s.extra_ms,
            images: s.images,
        });
    }

    /// Removes a request wherever it is (client went away); frees its KV reservation.
    pub fn abort(&mut self, id: u64) {
        if let Some(i) = self.running.iter().position(|s| s.id == id) {
            let s = self.running.swap_remove(i);
            self.kv_used -= s.kv_reserved;
        } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(i);
        }
    }

    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }
    pub fn running(&self) -> usize {
        self.running.len()
    }
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
    pub fn kv_usage(&self) -> f64 {
        self.kv_used as f64 / self.cfg.kv_capacity_tokens as f64
    }
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The first moment at or after `t` that is not inside a stall.
    fn after_stall(&self, t: f64) -> f64 {
        let f = &self.cfg.faults;
        if f.stall_every_ms <= 0.0 || f.stall_for_ms <= 0.0 {
            return t;
        }
        let (period, len) = (f.stall_every_ms / 1000.0, f.stall_for_ms / 1000.0);
        let phase = t.rem_euclid(period);
        if phase < len { t + (len - phase) } else { t }
    }

    /// End of a step that starts at `start` and needs `work` seconds of unstalled time.
    fn end_with_stalls(&self, start: f64, work: f64) -> f64 {
        let f = &self.cfg.faults;
        if f.stall_every_ms <= 0.0 || f.stall_for_ms <= 0.0 {
            return start + work;
        }
        let (period, len) = (f.stall_every_ms / 1000.0, f.stall_for_ms / 1000.0);
        let mut t = start;
        let mut left = work;
        loop {
            let next_stall = ((t / period).floor() + 1.0) * period;
            if t + left <= next_stall {
                return t + left;
            }
            left -= next_stall - t;
            t = next_stall + len;
        }
    }

    fn warmup_factor(&self) -> f64 {
        let n = self.cfg.warmup_steps;
        if n == 0 || self.counters.steps >= n {
            return 1.0;
        }
        let left = 1.0 - self.counters.steps as f64 / n as f64;
        1.0 + (self.cfg.warmup_slowdown - 1.0) * left
    }

    /// `faults.slow_factor` once `faults.slow_after_requests` have arrived, else 1.
    fn drift_factor(&self) -> f64 {
        let f = &self.cfg.faults;
        if f.slow_after_requests > 0 && self.submitted >= f.slow_after_requests {
            f.slow_factor
        } else {
            1.0
        }
    }

    /// Runs one step starting no earlier than `now`. Returns `None` when there is nothing to do.
    /// Events are appended to `events` (cleared first): admissions and rejections happen at
    /// `start`, chunks and completions at `end`.
    pub fn step(&mut self, now: f64, events: &mut Vec<Event>) -> Option<Step> {
        events.clear();
        if self.is_idle() {
            return None;
        }
        let start = self.after_stall(now);
        let extra_ms = self.admit(events);
        if self.running.is_empty() {
            // Only rejections happened.
            return Some(Step { start, end: start });
        }

        let (prefill, kv) = self.share_prefill();
        let work = (self.cfg.step_seconds(self.running.len(), prefill, kv) + extra_ms / 1000.0)
            * self.warmup_factor()
            * self.drift_factor()
            * self.draft_factor();
        let end = self.end_with_stalls(start, work);
        self.counters.steps += 1;
        self.counters.prompt_tokens += prefill;

        let (per_chunk, first) = (self.cfg.tokens_per_chunk, self.cfg.first_chunk_tokens);
        let mut i = 0;
        while i < self.running.len() {
            let s = &mut self.running[i];
            let mut emitted = false;
            if s.prefill_now > 0 {
                s.prefill_left -= s.prefill_now;
                if s.prefill_left == 0 {
                    // Prefill done: the KV now exists, so the prompt's blocks become cacheable,
                    // and the first token exists (sent at once unless the first chunk holds more).
                    self.cache.insert(&s.block_hashes);
                    s.prompt_ids = Vec::new();
                    s.generated = 1;
                    s.pending = 1;
                    emitted = true;
                }
            } else if s.prefill_left == 0 {
                // One token, and with a draft the leading run of its tokens the target accepts.
                let extra = draft_step(&self.cfg, s, &mut self.counters);
                s.generated += 1 + extra;
                s.pending += 1 + extra;
                emitted = true;
            }
            if emitted {
                let due = if s.streaming { per_chunk } else { first };
                if s.pending >= due || s.generated >= s.target {
                    events.push(Event::Chunk {
                        id: s.id,
                        first_index: s.generated - s.pending,
                        tokens: s.pending,
                    });
                    s.pending = 0;
                    s.streaming = true;
                }
                self.counters.generation_tokens += 1;
            }
            if s.generated >= s.target {
                if s.drafted > 0 {
                    events.push(Event::Drafted {
                        id: s.id,
                        drafted: s.drafted,
                        accepted: s.accepted,
                    });
                }
                events.push(Event::Finished { id: s.id });
                if !s.finished_hashes.is_empty() {
                    self.cache.insert(&s.finished_hashes);
                }
                self.kv_used -= s.kv_reserved;
                self.running.remove(i);
            } else {
                i += 1;
            }
        }
        Some(Step { start, end })
    }

    /// How much longer a step is with a draft: `draft_cost` of a step per draft token.
    fn draft_factor(&self) -> f64 {
        let d = &self.cfg.speculative;
        1.0 + d.draft_cost * f64::from(d.draft_tokens)
    }

    /// This step's prefill: each running sequence's share of the chunk budget, in order; and
    /// the tokens of prefill and of KV the step's cost depends on.
    fn share_prefill(&mut self) -> (u64, u64) {
        let mut budget = match self.cfg.prefill_chunk_tokens {
            0 => u64::MAX,
            n => n,
        };
        let (mut prefill, mut kv) = (0u64, 0u64);
        for s in &mut self.running {
            if s.prefill_left > 0 {
                let take = s.prefill_left.min(budget);
                s.prefill_now = take;
                budget -= take;
                prefill += take;
            } else {
                s.prefill_now = 0;
                kv += s.prompt_len + u64::from(s.generated);
            }
        }
        (prefill, kv)
    }

    /// The next request to admit: the head of the queue (FCFS), or the most urgent by
    /// priority, then arrival.
    fn next_waiting(&self) -> Option<usize> {
        match self.cfg.scheduling {
            Scheduling::Fcfs => (!self.waiting.is_empty()).then_some(0),
            Scheduling::Priority => self
                .waiting
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.priority, s.id))
                .map(|(i, _)| i),
        }
    }

    /// Encodes `s`'s images, those the encoder cache does not hold; the milliseconds that
    /// adds to the step.
    fn encode(&mut self, s: &Seq, events: &mut Vec<Event>) -> f64 {
        let (mut hits, mut tokens) = (0u32, 0u64);
        for &(hash, n) in &s.images {
            if self.encoded.len() >= ENCODER_CACHE_ITEMS {
                self.encoded.clear();
            }
            if self.encoded.insert(hash) {
                tokens += u64::from(n);
            } else {
                hits += 1;
            }
        }
        let images = s.images.len() as u32;
        self.counters.mm_queries += u64::from(images);
        self.counters.mm_hits += u64::from(hits);
        let ms = tokens as f64 * self.cfg.vision.ms_per_token;
        events.push(Event::Encoded {
            id: s.id,
            images,
            hits,
            vision_us: (ms * 1000.0).round() as u64,
        });
        ms
    }

    /// Admits what fits; the milliseconds the admitted requests' adapters add to this step.
    fn admit(&mut self, events: &mut Vec<Event>) -> f64 {
        let block = self.cfg.prefix_block_tokens as usize;
        let mut extra_ms = 0.0;
        while self.running.len() < self.cfg.max_batch as usize {
            let Some(next) = self.next_waiting() else {
                break;
            };
            let head = &self.waiting[next];
            let need = head.prompt_len + u64::from(head.target);
            if need > self.cfg.kv_capacity_tokens {
                let s = self.waiting.remove(next).expect("head exists");
                events.push(Event::Rejected { id: s.id });
                continue;
            }
            if self.kv_used + need > self.cfg.kv_capacity_tokens {
                break; // The head waits for room, and so does everyone behind it.
            }
            let mut s = self.waiting.remove(next).expect("head exists");
            extra_ms += s.extra_ms;
            if !s.images.is_empty() {
                extra_ms += self.encode(&s, events);
            }
            s.block_hashes = block_hashes(&s.prompt_ids, block);
            let hit_blocks = self.cache.lookup(&s.block_hashes);
            self.counters.prefix_queries += s.prompt_len;
            // At least one prompt token is always computed, as real engines do.
            let cached = (hit_blocks as u64 * block as u64).min(s.prompt_len.saturating_sub(1));
            self.counters.prefix_hits += cached;
            s.prefill_left = s.prompt_len - cached;
            s.kv_reserved = need;
            self.kv_used += need;
            events.push(Event::Admitted {
                id: s.id,
                cached_tokens: cached as u32,
            });
            // The step's prefill budget goes to running requests in order: by priority under
            // priority scheduling, else by admission.
            let at = match self.cfg.scheduling {
                Scheduling::Fcfs => self.running.len(),
                Scheduling::Priority => self
                    .running
                    .partition_point(|r| (r.priority, r.id) <= (s.priority, s.id)),
            };
            self.running.insert(at, s);
        }
        extra_ms
    }
}

/// Chain hashes of the prompt's full blocks: block k's hash covers blocks 0..=k, so a hit on
/// block k implies the whole prefix up to it matches (as vLLM's automatic prefix caching does).
fn block_hashes(ids: &[u64], block: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(ids.len() / block);
    let mut h = 0x5eed_u64;
    for chunk in ids.chunks_exact(block) {
        for id in chunk {
            h = mix2(h, *id);
        }
        out.push(h);
    }
    out
}

/// A least-recently-used set of prefix blocks.
#[derive(Debug)]
struct PrefixCache {
    capacity: u64,
    tick: u64,
    stamp_of: HashMap<u64, u64>,
    by_stamp: BTreeMap<u64, u64>,
}

impl PrefixCache {
    fn new(capacity: u64) -> Self {
        PrefixCache {
            capacity,
            tick: 0,
            stamp_of: HashMap::new(),
            by_stamp: BTreeMap::new(),
        }
    }

    fn touch(&mut self, h: u64) {
        self.tick += 1;
        if let Some(old) = self.stamp_of.insert(h, self.tick) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(self.tick, h);
    }

    /// Number of leading blocks present; those are refreshed.
    fn lookup(&mut self, hashes: &[u64]) -> usize {
        let n = hashes
            .iter()
            .take_while(|h| self.stamp_of.contains_key(h))
            .count();
        for h in &hashes[..n] {
            self.touch(*h);
        }
        n
    }

    fn insert(&mut self, hashes: &[u64]) {
        if self.capacity == 0 {
            return;
        }
        for h in hashes {
            self.touch(*h);
        }
        while self.stamp_of.len() as u64 > self.capacity {
            let (stamp, h) = self
                .by_stamp
                .pop_first()
                .expect("non-empty when over capacity");
            let _ = stamp;
            self.stamp_of.remove(&h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SimConfig {
        SimConfig {
            prefill_tokens_per_s: 10_000.0,
            decode_base_ms: 20.0,
            decode_per_seq_ms: 0.5,
            max_batch: 8,
            ..SimConfig::default()
        }
    }

    fn sub(id: u64, prompt: usize, out: u32) -> Submission {
        Submission {
            id,
            prompt_ids: (0..prompt as u64).map(|i| i + id * 1_000_000).collect(),
            output_tokens: out,
            output_ids: Vec::new(),
            priority: 0,
            extra_ms: 0.0,
            images: Vec::new(),
        }
    }

    /// Runs to completion from t=0, returning (id, time) of every chunk.
    fn run(e: &mut Engine) -> Vec<(u64, f64, u32)> {
        let (mut now, mut ev, mut out) = (0.0, Vec::new(), Vec::new());
        while let Some(step) = e.step(now, &mut ev) {
            for x in &ev {
                if let Event::Chunk { id, tokens, .. } = x {
                    out.push((*id, step.end, *tokens));
                }
            }
            now = step.end;
        }
        out
    }

    /// Under chunked prefill a long prompt that came first takes each step's budget first
    /// (FCFS), so a short one behind it waits for its whole prefill; under priority scheduling
    /// the short, more urgent one prefills in the first step. An adapter's cost lengthens the
    /// step that admits it.
    #[test]
    fn priority_takes_the_prefill_budget_first_and_adapters_cost_their_step() {
        let first_token = |scheduling, extra_ms: f64| {
            let mut e = Engine::new(SimConfig {
                prefill_chunk_tokens: 500,
                scheduling,
                ..cfg()
            });
            e.submit(Submission {
                priority: 10,
                ..sub(1, 4000, 2)
            });
            e.submit(Submission {
                priority: 0,
                extra_ms,
                ..sub(2, 100, 2)
            });
            run(&mut e).iter().find(|c| c.0 == 2).map(|c| c.1).unwrap()
        };
        let fcfs = first_token(Scheduling::Fcfs, 0.0);
        let prio = first_token(Scheduling::Priority, 0.0);
        // FCFS: eight steps of the long prompt's chunks before the short one's turn.
        assert!(fcfs > 0.4, "{fcfs}");
        // Priority: the first step prefills the short prompt (100 tokens) and 400 of the other.
        let step = 0.020 + 2.0 * 0.0005 + 500.0 / 10_000.0;
        assert!((prio - step).abs() < 1e-9, "{prio} vs {step}");
        let adapter = first_token(Scheduling::Priority, 7.0);
        assert!((adapter - prio - 0.007).abs() < 1e-9, "{adapter} vs {prio}");
    }

    #[test]
    fn lone_request_follows_the_cost_model() {
        let mut e = Engine::new(cfg());
        e.submit(sub(1, 1000, 4));
        let chunks = run(&mut e);
        assert_eq!(chunks.len(), 4);
        let ttft = 0.020 + 0.0005 + 1000.0 / 10_000.0;
        assert!((chunks[0].1 - ttft).abs() < 1e-9);
        for w in chunks.windows(2) {
            assert!((w[1].1 - w[0].1 - 0.0205).abs() < 1e-9);
        }
        assert!(e.is_idle());
        assert_eq!(e.kv_usage(), 0.0);
    }

    #[test]
    fn ninth_request_waits_for_a_slot() {
        let mut e = Engine::new(cfg());
        for id in 0..9 {
            e.submit(sub(id, 10, 5));
        }
        let mut ev = Vec::new();
        e.step(0.0, &mut ev).unwrap();
        let admitted = ev
            .iter()
            .filter(|x| matches!(x, Event::Admitted { .. }))
            .count();
        assert_eq!(admitted, 8);
        assert_eq!(e.waiting(), 1);
    }

    #[test]
    fn kv_capacity_blocks_admission_and_rejects_the_impossible() {
        let mut e = Engine::new(SimConfig {
            kv_capacity_tokens: 100,
            ..cfg()
        });
        e.submit(sub(1, 60, 10)); // needs 70
        e.submit(sub(2, 30, 10)); // needs 40: must wait
        e.submit(sub(3, 200, 1)); // never fits
        let mut ev = Vec::new();
        e.step(0.0, &mut ev).unwrap();
        assert_eq!(e.running(), 1);
        let out = run(&mut e);
        assert!(out.iter().any(|c| c.0 == 2));
        assert!(!out.iter().any(|c| c.0 == 3));
    }

    #[test]
    fn multi_token_chunks_send_the_first_token_alone() {
        let mut e = Engine::new(SimConfig {
            tokens_per_chunk: 4,
            ..cfg()
        });
        e.submit(sub(1, 10, 10));
        let sizes: Vec<u32> = run(&mut e).iter().map(|c| c.2).collect();
        assert_eq!(sizes, vec![1, 4, 4, 1]);
    }

    #[test]
    fn a_coalesced_first_chunk_carries_several_tokens() {
        let mut e = Engine::new(SimConfig {
            tokens_per_chunk: 4,
            first_chunk_tokens: 4,
            ..cfg()
        });
        e.submit(sub(1, 10, 10));
        let sizes: Vec<u32> = run(&mut e).iter().map(|c| c.2).collect();
        assert_eq!(sizes, vec![4, 4, 2]);
    }

    #[test]
    fn prefix_cache_skips_shared_blocks() {
        let mut e = Engine::new(cfg());
        e.submit(sub(1, 320, 1));
        let cold = run(&mut e)[0].1;
        e.submit(sub(1, 320, 1)); // same ids: fully cached but one token
        let mut ev = Vec::new();
        let step = e.step(10.0, &mut ev).unwrap();
        assert!(ev.contains(&Event::Admitted {
            id: 1,
            cached_tokens: 319
        }));
        // Only the one uncached token is prefilled: the cost model says exactly how long.
        let hot = 0.020 + 0.0005 + 1.0 / 10_000.0;
        assert!((step.end - step.start - hot).abs() < 1e-9);
        assert!((cold - (0.0205 + 320.0 / 10_000.0)).abs() < 1e-9);
    }

    #[test]
    fn stalls_freeze_steps() {
        let mut c = cfg();
        c.faults.stall_every_ms = 1000.0;
        c.faults.stall_for_ms = 300.0;
        let e = Engine::new(c);
        assert_eq!(e.after_stall(1.1), 1.3);
        assert_eq!(e.after_stall(1.5), 1.5);
        assert!((e.end_with_stalls(0.95, 0.1) - 1.35).abs() < 1e-9);
    }

    #[test]
    fn warmup_penalty_decays() {
        let mut e = Engine::new(SimConfig {
            warmup_slowdown: 3.0,
            warmup_steps: 10,
            ..cfg()
        });
        e.submit(sub(1, 1, 30));
        let t = run(&mut e);
        let first = t[1].1 - t[0].1;
        let last = t[29].1 - t[28].1;
        assert!(first > 2.0 * last, "{first} vs {last}");
        assert!((last - 0.0205).abs() < 1e-9);
    }

    #[test]
    fn drift_slows_every_step_after_its_time() {
        let mut c = cfg();
        c.faults.slow_after_requests = 2;
        c.faults.slow_factor = 2.0;
        let mut e = Engine::new(c);
        e.submit(sub(1, 1, 10));
        let before = run(&mut e);
        e.submit(sub(2, 1, 10));
        let after = run(&mut e);
        let gap = |t: &[(u64, f64, u32)]| t[5].1 - t[4].1;
        assert!(
            (gap(&after) / gap(&before) - 2.0).abs() < 1e-9,
            "{before:?} then {after:?}"
        );
    }
}
