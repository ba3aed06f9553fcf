//! What the server's own metrics say about the steady window: queue time, running and waiting
//! requests, KV-cache usage. Read from the scrapes kept in `metrics.jsonl`, by each engine's
//! published metric names (vLLM's first; the simulator publishes the same names).

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

/// Server-reported queue time over the window, from the histogram's change across it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueTime {
    /// Requests the histogram counted in the window.
    pub requests: f64,
    pub mean_ms: f64,
    /// Estimated from bucket counts by linear interpolation (Prometheus' `histogram_quantile`):
    /// exact only to the bucket's width.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// The server's view of the steady window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerSide {
    /// Whose metric names were found.
    pub engine: String,
    /// Scrapes taken in all, and the span (s, run clock) the figures below cover.
    pub scrapes: usize,
    pub from_s: f64,
    pub to_s: f64,
    pub running: Option<Gauge>,
    pub waiting: Option<Gauge>,
    pub kv_cache_usage: Option<Gauge>,
    pub queue_time: Option<QueueTime>,
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

fn gauge(scrapes: &[&Scrape], names: &[&str]) -> Option<Gauge> {
    let values: Vec<f64> = scrapes
        .iter()
        .filter_map(|s| names.iter().find_map(|n| total(s, n)))
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(Gauge {
        mean: values.iter().sum::<f64>() / values.len() as f64,
        max: values.iter().copied().fold(f64::MIN, f64::max),
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

/// Prometheus' `histogram_quantile`: find the bucket holding rank q·n and interpolate linearly
/// inside it (the lowest bucket starts at 0; a rank in the +Inf bucket returns the highest
/// finite bound). Hand-written because it is the documented 10-line rule, on data we already hold.
pub fn histogram_quantile(q: f64, cumulative: &[(f64, f64)]) -> Option<f64> {
    let n = cumulative.last()?.1;
    if n <= 0.0 {
        return None;
    }
    let rank = q * n;
    let mut prev = (0.0, 0.0);
    for &(le, count) in cumulative {
        if count >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let in_bucket = count - prev.1;
            let frac = if in_bucket > 0.0 {
                (rank - prev.1) / in_bucket
            } else {
                1.0
            };
            return Some(prev.0 + (le - prev.0) * frac);
        }
        prev = (le, count);
    }
    Some(prev.0)
}

fn queue_time(from: &Scrape, to: &Scrape, name: &str) -> Option<QueueTime> {
    let sum = total(to, &format!("{name}_sum"))? - total(from, &format!("{name}_sum"))?;
    let count = total(to, &format!("{name}_count"))? - total(from, &format!("{name}_count"))?;
    if count <= 0.0 {
        return None;
    }
    let (b0, b1) = (buckets(from, name), buckets(to, name));
    let delta: Vec<(f64, f64)> = b1
        .iter()
        .map(|&(le, c)| {
            let before = b0.iter().find(|x| x.0 == le).map_or(0.0, |x| x.1);
            (le, c - before)
        })
        .collect();
    let ms = |s: f64| s * 1000.0;
    Some(QueueTime {
        requests: count,
        mean_ms: ms(sum / count),
        p50_ms: histogram_quantile(0.5, &delta).map(ms),
        p99_ms: histogram_quantile(0.99, &delta).map(ms),
    })
}

/// The server's view of the window `[from_s, to_s]` (run clock, seconds). Gauges average the
/// scrapes inside it; the queue-time histogram is differenced between the last scrape at or
/// before its start and the first at or after its end (scrapes keep buckets only before and
/// after the load, so percentiles are estimated over the whole run unless the run has no
/// warm-up; the mean is always the window's).
pub fn derive(scrapes: &[Scrape], from_s: f64, to_s: f64) -> Option<ServerSide> {
    let names = ENGINES.iter().find(|n| {
        scrapes
            .iter()
            .any(|s| s.series.keys().any(|k| prom::name(k) == n.running))
    })?;
    let inside: Vec<&Scrape> = scrapes
        .iter()
        .filter(|s| s.t_s >= from_s && s.t_s <= to_s)
        .collect();
    let start = scrapes
        .iter()
        .rev()
        .find(|s| s.t_s <= from_s)
        .or(scrapes.first())?;
    let end = scrapes.iter().find(|s| s.t_s >= to_s).or(scrapes.last())?;
    let queue = names.queue.and_then(|q| {
        let with_buckets = |s: &&Scrape| !buckets(s, q).is_empty();
        // Percentiles need bucket counts at both ends: fall back to the before/after scrapes.
        let (from, to) = if with_buckets(&start) && with_buckets(&end) {
            (start, end)
        } else {
            (
                scrapes.iter().find(with_buckets)?,
                scrapes.iter().rev().find(with_buckets)?,
            )
        };
        let mut qt = queue_time(start, end, q)?;
        let spread = queue_time(from, to, q)?;
        qt.p50_ms = spread.p50_ms;
        qt.p99_ms = spread.p99_ms;
        Some(qt)
    });
    Some(ServerSide {
        engine: names.engine.to_owned(),
        scrapes: scrapes.len(),
        from_s: start.t_s,
        to_s: end.t_s,
        running: gauge(&inside, &[names.running]),
        waiting: gauge(&inside, &[names.waiting]),
        kv_cache_usage: gauge(&inside, names.kv),
        queue_time: queue,
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
        }
    }

    #[test]
    fn quantile_interpolates_inside_the_bucket() {
        // 10 observations ≤ 0.1, 10 more in (0.1, 0.2], none above.
        let b = [(0.1, 10.0), (0.2, 20.0), (f64::INFINITY, 20.0)];
        assert!((histogram_quantile(0.5, &b).unwrap() - 0.1).abs() < 1e-12);
        assert!((histogram_quantile(0.75, &b).unwrap() - 0.15).abs() < 1e-12);
        assert!((histogram_quantile(0.25, &b).unwrap() - 0.05).abs() < 1e-12);
        // A rank in +Inf answers the highest finite bound.
        let c = [(0.1, 1.0), (f64::INFINITY, 10.0)];
        assert_eq!(histogram_quantile(0.99, &c), Some(0.1));
        assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0)]), None);
    }

    #[test]
    fn window_gauges_and_queue_delta() {
        let q = "vllm:request_queue_time_seconds";
        let b = |le: &str| format!("{q}_bucket{{le=\"{le}\"}}");
        let (b1, b2, binf) = (b("0.01"), b("0.1"), b("+Inf"));
        let (sum, count) = (format!("{q}_sum"), format!("{q}_count"));
        let run = "vllm:num_requests_running{engine=\"0\"}";
        let run2 = "vllm:num_requests_running{engine=\"1\"}";
        let s = vec![
            scrape(
                0.0,
                "before",
                &[
                    (run, 0.0),
                    (&b1, 0.0),
                    (&b2, 0.0),
                    (&binf, 0.0),
                    (&sum, 0.0),
                    (&count, 0.0),
                ],
            ),
            // Warm-up: 10 requests queued 1 ms each.
            scrape(1.0, "during", &[(run, 9.0), (&sum, 0.01), (&count, 10.0)]),
            scrape(
                2.0,
                "during",
                &[(run, 4.0), (run2, 2.0), (&sum, 0.51), (&count, 20.0)],
            ),
            scrape(3.0, "during", &[(run, 8.0), (&sum, 1.01), (&count, 30.0)]),
            scrape(
                4.0,
                "after",
                &[
                    (run, 0.0),
                    (&b1, 10.0),
                    (&b2, 30.0),
                    (&binf, 30.0),
                    (&sum, 1.01),
                    (&count, 30.0),
                ],
            ),
        ];
        let d = derive(&s, 1.0, 3.0).unwrap();
        assert_eq!(d.engine, "vllm");
        assert_eq!((d.from_s, d.to_s), (1.0, 3.0));
        let r = d.running.unwrap();
        // Label sets are summed: 9, 4+2, 8.
        assert_eq!(r.samples, 3);
        assert!((r.mean - 23.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.max, 9.0);
        let qt = d.queue_time.unwrap();
        assert_eq!(qt.requests, 20.0);
        assert!((qt.mean_ms - 50.0).abs() < 1e-6, "{}", qt.mean_ms);
        // Buckets exist only before/after: spread over the whole run (10 ≤ 10 ms, 20 ≤ 100 ms).
        assert!((qt.p50_ms.unwrap() - 32.5).abs() < 1e-6, "{:?}", qt.p50_ms);
        assert!(d.waiting.is_none());
    }

    #[test]
    fn unknown_engine_yields_nothing() {
        let s = vec![scrape(0.0, "before", &[("process_cpu_seconds_total", 1.0)])];
        assert!(derive(&s, 0.0, 1.0).is_none());
    }
}
