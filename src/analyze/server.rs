//! What the server's own metrics say about the steady window: queue time, running and waiting
//! requests, KV-cache usage. Read from the scrapes kept in `metrics.jsonl`, by each engine's
//! published metric names (vLLM's first; the simulator publishes the same names).
//!
//! Every figure of a histogram comes from one pair of scrapes: its count, sum and buckets
//! differenced between the scrapes taken at the steady window's edges (`steady_start`,
//! `steady_end`, taken when the first and last steady request were sent), so its mean and its
//! percentiles are of one set of requests — those the server finished between them (vLLM
//! observes queue time when a request finishes). The client's count of the requests that
//! finished in the same span stands beside it. A percentile is the bucket it falls in, not a
//! point interpolated inside it.

use serde::{Deserialize, Serialize};

use crate::env::prom::{self, Scrape};

/// One engine's metric names.
struct Names {
    engine: &'static str,
    running: &'static str,
    waiting: &'static str,
    /// KV-cache usage as a fraction (vLLM renamed its gauge in V1; both are read).
    kv: &'static [&'static str],
    /// Histogram of seconds from arrival to scheduling.
    queue: Option<&'static str>,
}

const ENGINES: [Names; 4] = [
    Names {
        engine: "vllm",
        running: "vllm:num_requests_running",
        waiting: "vllm:num_requests_waiting",
        kv: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        queue: Some("vllm:request_queue_time_seconds"),
    },
    Names {
        engine: "sglang",
        running: "sglang:num_running_reqs",
        waiting: "sglang:num_queue_reqs",
        kv: &["sglang:token_usage"],
        queue: Some("sglang:queue_time_seconds"),
    },
    Names {
        engine: "tgi",
        running: "tgi_batch_current_size",
        waiting: "tgi_queue_size",
        kv: &[],
        queue: Some("tgi_request_queue_duration"),
    },
    Names {
        engine: "llama.cpp",
        running: "llamacpp:requests_processing",
        waiting: "llamacpp:requests_deferred",
        kv: &["llamacpp:kv_cache_usage_ratio"],
        queue: None,
    },
];

/// Mean and maximum of a gauge over the scrapes inside the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gauge {
    pub mean: f64,
    pub max: f64,
    pub samples: usize,
}

/// Server-reported queue time over the window, from the histogram's change between the two
/// scrapes the window is read between: count, sum and buckets of the same requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueTime {
    /// Requests the histogram counted between the two scrapes (vLLM: those that finished).
    pub requests: f64,
    pub mean_ms: f64,
    /// The bucket the median falls in (`None` when the scrapes kept no buckets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_bucket_ms: Option<Bucket>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_bucket_ms: Option<Bucket>,
}

/// A histogram bucket, ms: `(from, to]`; `to` absent for the last, unbounded one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bucket {
    pub from: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<f64>,
}

/// The server's view of the steady window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerSide {
    /// Whose metric names were found.
    pub engine: String,
    /// Scrapes taken in all, and the span (s, run clock) the figures below cover: between the
    /// two scrapes they are differenced between.
    pub scrapes: usize,
    pub from_s: f64,
    pub to_s: f64,
    /// Which two scrapes: `steady window edges` (taken when the first and last steady request
    /// were sent), or `nearest scrapes` (a bundle without them: the last before the window and
    /// the first after it).
    #[serde(default)]
    pub between: String,
    /// Requests the client saw finish (any phase, any outcome) between the two scrapes: what
    /// the server's counts there should agree with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_finished: Option<u64>,
    pub running: Option<Gauge>,
    pub waiting: Option<Gauge>,
    pub kv_cache_usage: Option<Gauge>,
    pub queue_time: Option<QueueTime>,
    /// The multimodal (encoder) cache's item queries and hits between the two scrapes
    /// (vLLM's `vllm:mm_cache_queries` and `vllm:mm_cache_hits`), when it published them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mm_cache: Option<ItemCache>,
    /// Speculative decoding's draft tokens proposed and accepted between the two scrapes
    /// (vLLM's and llama.cpp's `spec_decode_num_draft_tokens` and `…_accepted_tokens`), when
    /// it drafted any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafts: Option<Drafts>,
}

/// Draft tokens proposed and accepted over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drafts {
    pub drafted: u64,
    pub accepted: u64,
}

/// A cache's queries and hits, in items, over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ItemCache {
    pub queries: u64,
    pub hits: u64,
}

/// The multimodal cache's queries and hits between two scrapes (vLLM's), when it had any.
fn item_cache(start: &Scrape, end: &Scrape) -> Option<ItemCache> {
    let (queries, hits) = grown_pair(
        (start, end),
        &["vllm:mm_cache_queries_total", "vllm:mm_cache_queries"],
        &["vllm:mm_cache_hits_total", "vllm:mm_cache_hits"],
    )?;
    Some(ItemCache { queries, hits })
}

/// Speculative decoding's draft tokens between two scrapes (vLLM's or llama.cpp's), when it
/// drafted any.
fn drafts(start: &Scrape, end: &Scrape) -> Option<Drafts> {
    let (drafted, accepted) = grown_pair(
        (start, end),
        &[
            "vllm:spec_decode_num_draft_tokens_total",
            "llamacpp:spec_decode_num_draft_tokens_total",
        ],
        &[
            "vllm:spec_decode_num_accepted_tokens_total",
            "llamacpp:spec_decode_num_accepted_tokens_total",
        ],
    )?;
    Some(Drafts { drafted, accepted })
}

/// Two counters' growth between two scrapes — a total and the part of it that succeeded —
/// when both are published and the total grew.
fn grown_pair((a, b): (&Scrape, &Scrape), total: &[&str], part: &[&str]) -> Option<(u64, u64)> {
    grown(a, b, total)
        .zip(grown(a, b, part))
        .filter(|&(t, _)| t > 0)
}

/// A counter's growth from `a` to `b` (both scrapes must publish it).
fn grown(a: &Scrape, b: &Scrape, names: &[&str]) -> Option<u64> {
    names.iter().find_map(|n| {
        let d = total(b, n)? - total(a, n)?;
        Some(d.max(0.0).round() as u64)
    })
}

/// The requests a scrape says the server is running and holding waiting, by the first engine
/// whose names it publishes: (engine, running, waiting).
pub fn busy(s: &Scrape) -> Option<(&'static str, f64, f64)> {
    ENGINES.iter().find_map(|e| {
        let running = total(s, e.running)?;
        let waiting = total(s, e.waiting)?;
        Some((e.engine, running, waiting))
    })
}

/// Sum of every series of one metric (across label sets) in a scrape.
fn total(s: &Scrape, name: &str) -> Option<f64> {
    let mut found = None;
    for (k, v) in &s.series {
        if prom::name(k) == name && v.is_finite() {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// A gauge's mean over the scrapes, each weighted by the ticks it stands for (a thinned
/// scrape stands for `thinned` of them, so a long run's later, sparser scrapes count as much
/// of the time as they cover), and its highest value.
fn gauge(scrapes: &[&Scrape], names: &[&str]) -> Option<Gauge> {
    let values: Vec<(f64, f64)> = scrapes
        .iter()
        .filter_map(|s| {
            let v = names.iter().find_map(|n| total(s, n))?;
            Some((v, s.thinned.filter(|&n| n > 0).unwrap_or(1) as f64))
        })
        .collect();
    if values.is_empty() {
        return None;
    }
    let weight: f64 = values.iter().map(|v| v.1).sum();
    Some(Gauge {
        mean: values.iter().map(|(v, w)| v * w).sum::<f64>() / weight,
        max: values.iter().map(|v| v.0).fold(f64::MIN, f64::max),
        samples: values.len(),
    })
}

/// Cumulative bucket counts `(le, count)` of a histogram, summed across label sets.
fn buckets(s: &Scrape, name: &str) -> Vec<(f64, f64)> {
    let bucket = format!("{name}_bucket");
    let mut by_le: std::collections::BTreeMap<u64, (f64, f64)> = Default::default();
    for (k, v) in &s.series {
        if prom::name(k) != bucket {
            continue;
        }
        let Some(le) = prom::label(k, "le").and_then(|l| match l {
            "+Inf" => Some(f64::INFINITY),
            l => l.parse::<f64>().ok(),
        }) else {
            continue;
        };
        by_le.entry(le.to_bits()).or_insert((le, 0.0)).1 += v;
    }
    let mut out: Vec<(f64, f64)> = by_le.into_values().collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The bucket holding the q-quantile of a histogram's cumulative counts `(le, count)`: the
/// first whose count reaches rank q·n (the lowest starts at 0). Where in the bucket the value
/// lies is unknown, so the bucket is the answer (Prometheus' `histogram_quantile` interpolates
/// linearly inside it, which reads as a measurement it is not: "p50 ≈ 181 ms" for requests that
/// all queued under a millisecond in a 0–300 ms bucket). Hand-written: a few lines on data held.
pub fn bucket_of(q: f64, cumulative: &[(f64, f64)]) -> Option<Bucket> {
    let n = cumulative.last()?.1;
    if n <= 0.0 {
        return None;
    }
    let rank = (q * n).max(f64::MIN_POSITIVE);
    let mut from = 0.0;
    for &(le, count) in cumulative {
        if count >= rank {
            return Some(Bucket {
                from,
                to: le.is_finite().then_some(le),
            });
        }
        from = le;
    }
    Some(Bucket { from, to: None })
}

/// A histogram (in seconds) between two scrapes: count and mean, and the buckets of its median
/// and p99, every figure from the same two scrapes (no buckets: no percentiles).
fn queue_time(from: &Scrape, to: &Scrape, name: &str) -> Option<QueueTime> {
    let sum = total(to, &format!("{name}_sum"))? - total(from, &format!("{name}_sum"))?;
    let count = total(to, &format!("{name}_count"))? - total(from, &format!("{name}_count"))?;
    if count <= 0.0 {
        return None;
    }
    let (b0, b1) = (buckets(from, name), buckets(to, name));
    let delta: Vec<(f64, f64)> = if b0.is_empty() || b1.is_empty() {
        Vec::new()
    } else {
        b1.iter()
            .map(|&(le, c)| {
                let before = b0.iter().find(|x| x.0 == le).map_or(0.0, |x| x.1);
                (le, c - before)
            })
            .collect()
    };
    let ms = |b: Bucket| Bucket {
        from: b.from * 1000.0,
        to: b.to.map(|t| t * 1000.0),
    };
    Some(QueueTime {
        requests: count,
        mean_ms: sum / count * 1000.0,
        p50_bucket_ms: bucket_of(0.5, &delta).map(ms),
        p99_bucket_ms: bucket_of(0.99, &delta).map(ms),
    })
}

/// The server's view of the window `[from_s, to_s]` (run clock, seconds): between the scrapes
/// taken at its edges (`steady_start`, `steady_end`), or, in a bundle without them, the last
/// scrape at or before its start and the first at or after its end. Gauges average the scrapes
/// between the two; the queue-time histogram is differenced between the same two, count, sum
/// and buckets alike. `finished_us`: when each of the run's requests ended (µs, run clock), to
/// count those that finished between the two scrapes.
pub fn derive(
    scrapes: &[Scrape],
    from_s: f64,
    to_s: f64,
    finished_us: &[u64],
) -> Option<ServerSide> {
    let names = ENGINES.iter().find(|n| {
        scrapes
            .iter()
            .any(|s| s.series.keys().any(|k| prom::name(k) == n.running))
    })?;
    let tagged = |when: &str| {
        scrapes
            .iter()
            .find(|s| s.when == when && s.source.is_none())
    };
    let (start, end, between) = match (tagged("steady_start"), tagged("steady_end")) {
        (Some(a), Some(b)) if b.t_s >= a.t_s => (a, b, "steady window edges"),
        _ => (
            scrapes
                .iter()
                .rev()
                .find(|s| s.t_s <= from_s)
                .or(scrapes.first())?,
            scrapes.iter().find(|s| s.t_s >= to_s).or(scrapes.last())?,
            "nearest scrapes",
        ),
    };
    let inside: Vec<&Scrape> = scrapes
        .iter()
        .filter(|s| s.t_s >= start.t_s && s.t_s <= end.t_s)
        .collect();
    let (a_us, b_us) = ((start.t_s * 1e6) as u64, (end.t_s * 1e6) as u64);
    Some(ServerSide {
        engine: names.engine.to_owned(),
        scrapes: scrapes.len(),
        from_s: start.t_s,
        to_s: end.t_s,
        between: between.to_owned(),
        client_finished: Some(
            finished_us
                .iter()
                .filter(|&&t| t > a_us && t <= b_us)
                .count() as u64,
        ),
        running: gauge(&inside, &[names.running]),
        waiting: gauge(&inside, &[names.waiting]),
        kv_cache_usage: gauge(&inside, names.kv),
        queue_time: names.queue.and_then(|q| queue_time(start, end, q)),
        mm_cache: item_cache(start, end),
        drafts: drafts(start, end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn scrape(t: f64, when: &str, series: &[(&str, f64)]) -> Scrape {
        Scrape {
            t_s: t,
            when: when.into(),
            source: None,
            series: series
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
            thinned: None,
        }
    }

    #[test]
    fn a_percentile_is_the_bucket_it_falls_in() {
        // 10 observations ≤ 0.1, 10 more in (0.1, 0.2], none above.
        let b = [(0.1, 10.0), (0.2, 20.0), (f64::INFINITY, 20.0)];
        let at = |q| bucket_of(q, &b).unwrap();
        assert_eq!(
            at(0.5),
            Bucket {
                from: 0.0,
                to: Some(0.1)
            }
        );
        assert_eq!(
            at(0.75),
            Bucket {
                from: 0.1,
                to: Some(0.2)
            }
        );
        // A rank in +Inf: above the highest finite bound.
        let c = [(0.1, 1.0), (f64::INFINITY, 10.0)];
        assert_eq!(
            bucket_of(0.99, &c),
            Some(Bucket {
                from: 0.1,
                to: None
            })
        );
        assert_eq!(bucket_of(0.5, &[(1.0, 0.0)]), None);
    }

    /// Issue #45: against vLLM, a window's mean came from the scrapes nearest the window and its
    /// percentiles from the whole run's buckets: "mean 0.03 ms over 5 requests; p99 ≈ 39413
    /// ms". Every figure now comes from the two scrapes at the window's edges.
    #[test]
    fn every_figure_comes_from_the_scrapes_at_the_windows_edges() {
        let q = "vllm:request_queue_time_seconds";
        let b = |le: &str| format!("{q}_bucket{{le=\"{le}\"}}");
        let (b1, b2, b3, binf) = (b("0.3"), b("1"), b("40"), b("+Inf"));
        let (sum, count) = (format!("{q}_sum"), format!("{q}_count"));
        let run = "vllm:num_requests_running{engine=\"0\"}";
        let run2 = "vllm:num_requests_running{engine=\"1\"}";
        let hist = |t: f64, when: &str, n0: f64, n1: f64, n2: f64, sum_s: f64, running: f64| {
            scrape(
                t,
                when,
                &[
                    (run, running),
                    (&b1, n0),
                    (&b2, n0 + n1),
                    (&b3, n0 + n1 + n2),
                    (&binf, n0 + n1 + n2),
                    (&sum, sum_s),
                    (&count, n0 + n1 + n2),
                ],
            )
        };
        let s = vec![
            hist(0.0, "before", 0.0, 0.0, 0.0, 0.0, 0.0),
            // Warm-up: 10 requests finished, queued about 0.5 s each.
            hist(1.0, "steady_start", 0.0, 10.0, 0.0, 5.0, 4.0),
            scrape(
                2.0,
                "during",
                &[(run, 9.0), (run2, 1.0), (&sum, 5.01), (&count, 11.0)],
            ),
            // The window: 20 more finished, each queued 1 ms.
            hist(3.0, "steady_end", 20.0, 10.0, 0.0, 5.02, 8.0),
            // Drain: 15 that had queued 30 s finish late.
            hist(5.0, "after", 20.0, 10.0, 15.0, 455.02, 0.0),
        ];
        let finished = [500_000, 1_500_000, 2_000_000, 2_900_000, 4_000_000];
        // The steady window as the client saw it (first to last steady origin).
        let d = derive(&s, 1.2, 2.8, &finished).unwrap();
        assert_eq!(d.engine, "vllm");
        assert_eq!((d.from_s, d.to_s), (1.0, 3.0));
        assert_eq!(d.between, "steady window edges");
        assert_eq!(d.client_finished, Some(3));
        let r = d.running.unwrap();
        // Label sets are summed: 4, 9+1, 8.
        assert_eq!(r.samples, 3);
        assert!((r.mean - 22.0 / 3.0).abs() < 1e-9);
        let qt = d.queue_time.unwrap();
        assert_eq!(qt.requests, 20.0);
        assert!((qt.mean_ms - 1.0).abs() < 1e-6, "{}", qt.mean_ms);
        // Both percentiles in the first bucket, of the same 20 requests: not the warm-up's
        // half-second queues nor the drain's 30 s ones.
        let first = Bucket {
            from: 0.0,
            to: Some(300.0),
        };
        assert_eq!(qt.p50_bucket_ms, Some(first));
        assert_eq!(qt.p99_bucket_ms, Some(first));
    }

    /// A bundle without the edge scrapes: the nearest scrapes bracket the window, and without
    /// buckets in them there are no percentiles (never the whole run's).
    #[test]
    fn without_edge_scrapes_the_nearest_pair_and_no_borrowed_buckets() {
        let q = "vllm:request_queue_time_seconds";
        let (sum, count) = (format!("{q}_sum"), format!("{q}_count"));
        let binf = format!("{q}_bucket{{le=\"+Inf\"}}");
        let run = "vllm:num_requests_running";
        let s = vec![
            scrape(
                0.0,
                "before",
                &[(run, 0.0), (&binf, 0.0), (&sum, 0.0), (&count, 0.0)],
            ),
            scrape(1.0, "during", &[(run, 3.0), (&sum, 0.1), (&count, 10.0)]),
            scrape(3.0, "during", &[(run, 3.0), (&sum, 0.3), (&count, 30.0)]),
            scrape(
                4.0,
                "after",
                &[(run, 0.0), (&binf, 40.0), (&sum, 9.0), (&count, 40.0)],
            ),
        ];
        let d = derive(&s, 1.5, 2.5, &[]).unwrap();
        assert_eq!(d.between, "nearest scrapes");
        assert_eq!((d.from_s, d.to_s), (1.0, 3.0));
        let qt = d.queue_time.unwrap();
        assert_eq!(qt.requests, 20.0);
        assert!((qt.mean_ms - 10.0).abs() < 1e-9);
        assert_eq!((qt.p50_bucket_ms, qt.p99_bucket_ms), (None, None));
        assert!(d.waiting.is_none());
    }

    #[test]
    fn unknown_engine_yields_nothing() {
        let s = vec![scrape(0.0, "before", &[("process_cpu_seconds_total", 1.0)])];
        assert!(derive(&s, 0.0, 1.0, &[]).is_none());
    }
}
