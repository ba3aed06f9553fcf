//! `goodput demo`: the most common way a benchmark lies, one command away. On the simulator's
//! discrete-event clock (seconds of load in milliseconds), offered load rises from 50% to 120%
//! of the engine's capacity; at each step the same engine is driven open-loop (Poisson
//! arrivals, latency from the arrival) and closed-loop (a fixed number of users, each waiting
//! for its answer, think time set so the nominal rate is the same). Near saturation the
//! open-loop tail blows through the SLO; the closed loop slows its own arrivals down and hides
//! it (coordinated omission).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;

use crate::sim::SimConfig;
use crate::sim::des::{self, DesLoad, DesRequest};
use crate::sim::model::LengthAsk;
use crate::stats::percentile_sorted;

/// The demo's workload and SLO.
#[derive(Debug, Clone, Serialize)]
pub struct DemoSpec {
    pub input_tokens: usize,
    pub output_tokens: u32,
    /// Requests per load point and loop type.
    pub requests: usize,
    pub slo_ttft_p99_ms: f64,
    pub loads: Vec<f64>,
}

impl Default for DemoSpec {
    fn default() -> Self {
        DemoSpec {
            input_tokens: 256,
            output_tokens: 64,
            requests: 3000,
            slo_ttft_p99_ms: 500.0,
            loads: vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2],
        }
    }
}

/// One load point.
#[derive(Debug, Clone, Serialize)]
pub struct DemoPoint {
    /// Fraction of capacity offered.
    pub load: f64,
    pub offered_rps: f64,
    pub open_ttft_p50_ms: f64,
    pub open_ttft_p99_ms: f64,
    pub closed_ttft_p50_ms: f64,
    pub closed_ttft_p99_ms: f64,
    /// What the closed loop actually sent: it slows down as the server does.
    pub closed_achieved_rps: f64,
    /// Closed-loop users: the offered rate × the unloaded end-to-end time (Little's law).
    pub closed_users: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Demo {
    pub spec: DemoSpec,
    /// Completions per second with every request offered at once.
    pub capacity_rps: f64,
    pub points: Vec<DemoPoint>,
}

fn request(i: usize, spec: &DemoSpec, arrival_s: f64) -> DesRequest {
    // Unique first word: no prefix is shared, so the cache does not flatter either loop.
    let mut prompt = format!("demo{i}");
    for j in 1..spec.input_tokens {
        prompt.push(' ');
        prompt.push_str(crate::text::WORDS[j % crate::text::WORDS.len()]);
    }
    // Output lengths vary (½× to 1½× the nominal, fixed per request) so neither loop runs in
    // lock-step waves.
    let spread = u64::from(spec.output_tokens);
    let out = spec.output_tokens / 2 + (crate::text::mix2(7, i as u64) % spread.max(1)) as u32;
    DesRequest {
        arrival_s,
        prompt,
        ask: LengthAsk {
            max_tokens: Some(out.max(1)),
            min_tokens: None,
            ignore_eos: true,
        },
        priority: 0,
        model: None,
    }
}

fn ttft_ms(gt: &[crate::sim::GroundTruth], skip: usize) -> Vec<f64> {
    let mut v: Vec<f64> = gt
        .iter()
        .skip(skip)
        .filter_map(|g| Some((g.first_token_us? - g.arrival_us) as f64 / 1000.0))
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The engine's capacity for the demo's workload, req/s (every request offered at once;
/// completions over the span), and one request's end-to-end time alone, s.
pub fn capacity(cfg: &SimConfig, spec: &DemoSpec) -> Result<(f64, f64), String> {
    let burst: Vec<DesRequest> = (0..spec.requests).map(|i| request(i, spec, 0.0)).collect();
    let gt = des::run(cfg, DesLoad::Open(burst));
    let end = gt.iter().map(|g| g.end_us).max().unwrap_or(1) as f64 / 1e6;
    let capacity_rps = gt.iter().filter(|g| g.first_token_us.is_some()).count() as f64 / end;
    if !(capacity_rps.is_finite() && capacity_rps > 0.0) {
        return Err(format!(
            "this engine configuration completes no request of the demo's workload ({} input / {} output tokens): nothing to load",
            spec.input_tokens, spec.output_tokens
        ));
    }
    // Unloaded end-to-end time, for the closed loop's users.
    let alone = des::run(cfg, DesLoad::Open(vec![request(0, spec, 0.0)]));
    let e2e_alone_s = alone[0].end_us.saturating_sub(alone[0].arrival_us) as f64 / 1e6;
    Ok((capacity_rps, e2e_alone_s))
}

/// Runs the demo on `cfg`'s engine.
pub fn run(cfg: &SimConfig, spec: DemoSpec) -> Result<Demo, String> {
    let (capacity_rps, e2e_alone_s) = capacity(cfg, &spec)?;
    // The first tenth of each run is its warm-up, left out.
    let skip = spec.requests / 10;
    let mut points = Vec::new();
    for &load in &spec.loads {
        let rate = load * capacity_rps;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let gap = Exp::new(rate).map_err(|e| format!("load {load}: {e}"))?;
        let mut t = 0.0;
        let open: Vec<DesRequest> = (0..spec.requests)
            .map(|i| {
                t += gap.sample(&mut rng);
                request(i, &spec, t)
            })
            .collect();
        let o = ttft_ms(&des::run(cfg, DesLoad::Open(open)), skip);
        // As concurrency-capped benchmarks do: enough users to carry `rate` at the unloaded
        // latency (Little's law), each sending again as soon as answered.
        let users = ((rate * e2e_alone_s).round() as usize).max(1);
        let closed: Vec<DesRequest> = (0..spec.requests).map(|i| request(i, &spec, 0.0)).collect();
        let cg = des::run(
            cfg,
            DesLoad::Closed {
                concurrency: users,
                think_s: 0.0,
                // Users start spread over one cycle, as real ones drift apart.
                stagger_s: e2e_alone_s,
                requests: closed,
            },
        );
        let c = ttft_ms(&cg, skip);
        let span = cg
            .iter()
            .skip(skip)
            .map(|g| g.arrival_us)
            .fold((u64::MAX, 0), |(lo, hi), a| (lo.min(a), hi.max(a)));
        let sent = cg.len().saturating_sub(skip + 1) as f64;
        let p = |v: &[f64], q: f64| percentile_sorted(v, q).unwrap_or(f64::NAN);
        points.push(DemoPoint {
            load,
            offered_rps: rate,
            open_ttft_p50_ms: p(&o, 50.0),
            open_ttft_p99_ms: p(&o, 99.0),
            closed_ttft_p50_ms: p(&c, 50.0),
            closed_ttft_p99_ms: p(&c, 99.0),
            closed_achieved_rps: sent / ((span.1.saturating_sub(span.0)) as f64 / 1e6),
            closed_users: users,
        });
    }
    Ok(Demo {
        spec,
        capacity_rps,
        points,
    })
}

impl Demo {
    pub fn document(&self) -> crate::report::Doc {
        let mut d = crate::report::Doc::default();
        let s = &self.spec;
        d.h("goodput demo: open vs closed loop at the same nominal load");
        d.line(format!(
            "Simulated engine, {} input / {} output tokens; capacity {:.1} req/s (all offered at once). SLO: TTFT p99 ≤ {} ms. {} requests per point, the first tenth left out as warm-up.",
            s.input_tokens, s.output_tokens, self.capacity_rps, s.slo_ttft_p99_ms, s.requests
        ));
        let mark = |v: f64| {
            if v <= s.slo_ttft_p99_ms {
                format!("{v:.0} ✓")
            } else {
                format!("{v:.0} ✗")
            }
        };
        let rows = self
            .points
            .iter()
            .map(|p| {
                vec![
                    format!("{:.0}%", p.load * 100.0),
                    format!("{:.1}", p.offered_rps),
                    format!("{:.0}", p.open_ttft_p50_ms),
                    mark(p.open_ttft_p99_ms),
                    p.closed_users.to_string(),
                    format!("{:.0}", p.closed_ttft_p50_ms),
                    mark(p.closed_ttft_p99_ms),
                    format!("{:.1}", p.closed_achieved_rps),
                ]
            })
            .collect();
        d.table(
            &[
                "load",
                "offered req/s",
                "open p50",
                "open p99",
                "closed users",
                "closed p50",
                "closed p99",
                "closed sent req/s",
            ],
            rows,
        );
        d.line(
            "TTFT in ms. Open loop: requests arrive on schedule whatever the server is doing, and latency counts from the arrival, so a queue building near saturation shows in the tail. Closed loop (as a benchmark with a concurrency cap runs): enough users to carry the offered rate at unloaded latency, each waiting for its answer before sending again, so when the server slows down the load slows down with it — the queue never builds, the tail looks fine, and the 'sent' rate falls below what was offered. That is coordinated omission: the closed loop's numbers describe a lighter load than the one they are reported at. Use open loop for tail and capacity claims."
                .to_string()
        );
        d
    }
}

/// The contract of `demo --live`: the demo's workload and SLO against the embedded simulator
/// running `cfg`, open-loop Poisson at `load` × `capacity_rps` to start with (the keys change
/// it), 2 s of warm-up, and at most `duration_s` of load.
pub fn live_contract(
    cfg: &SimConfig,
    spec: &DemoSpec,
    capacity_rps: f64,
    load: f64,
    duration_s: f64,
) -> Result<String, String> {
    let sim = toml::Value::try_from(cfg).map_err(|e| format!("the engine's settings: {e}"))?;
    let mut t = toml::Table::new();
    t.insert("simulator".into(), sim);
    let target = toml::to_string(&toml::Value::Table(t)).map_err(|e| e.to_string())?;
    let out = spec.output_tokens;
    Ok(format!(
        r#"name = "demo-live"
description = "goodput demo --live: the demo's workload on the embedded simulator, its load changed in place by keys (each change a segment of the run)."

[target]
api = "openai-chat"
timeout = "120s"
{target_sim}

[workload]
seed = 7
stream = true
input_tokens = {{ dist = "fixed", value = {input} }}
output_tokens = {{ dist = "uniform", min = {lo}, max = {hi} }}
enforce_output_length = true

[load]
kind = "open"
arrival = "poisson"
rate = {rate}
max_in_flight = 4096
duration = "{duration_s}s"

[warmup]
duration = "2s"

[measurement]
# The live load is scheduled on tokio's timer (about a millisecond coarse), not the open-loop
# dispatch thread: the demo shows queues of hundreds of milliseconds.
max_dispatch_lag_ms = 20

[slo]
ttft_ms = {slo}
percentile = 99
attainment = 0.9
"#,
        target_sim = target.replace("[simulator", "[target.simulator"),
        input = spec.input_tokens,
        lo = out / 2,
        hi = out + out / 2,
        rate = (capacity_rps * load * 10.0).round() / 10.0,
        slo = spec.slo_ttft_p99_ms,
    ))
}

/// The tiles of the highest load: each loop's TTFT p99 against the SLO, and what the closed
/// loop sent of what was offered.
fn worst_tiles(worst: Option<&DemoPoint>, slo: f64) -> Vec<crate::report::html::Tile> {
    use crate::report::html::Tile;
    worst
        .map(|p| {
            vec![
                Tile {
                    name: format!("open loop TTFT p99 at {:.0}%", p.load * 100.0),
                    value: format!("{:.0} ms", p.open_ttft_p99_ms),
                    detail: format!("SLO ≤ {slo} ms"),
                    pass: Some(p.open_ttft_p99_ms <= slo),
                },
                Tile {
                    name: format!("closed loop TTFT p99 at {:.0}%", p.load * 100.0),
                    value: format!("{:.0} ms", p.closed_ttft_p99_ms),
                    detail: format!("SLO ≤ {slo} ms"),
                    pass: Some(p.closed_ttft_p99_ms <= slo),
                },
                Tile {
                    name: "what the closed loop sent".into(),
                    value: format!("{:.1} req/s", p.closed_achieved_rps),
                    detail: format!("of {:.1} offered", p.offered_rps),
                    pass: Some(p.closed_achieved_rps >= 0.95 * p.offered_rps),
                },
            ]
        })
        .unwrap_or_default()
}

/// The demo: the answer first, then both loops' TTFT p99 on the same axes with the SLO, the
/// loads where the closed loop hides an overload shaded, and what the closed loop really sent.
pub fn html_page(demo: &Demo) -> String {
    use crate::report::html::banner;
    let slo = demo.spec.slo_ttft_p99_ms;
    let mut d = crate::report::Doc::default();
    d.h("goodput demo: open vs closed loop at the same nominal load");
    // Loads where the open loop fails the SLO and the closed loop reports a pass.
    let hidden: Vec<&DemoPoint> = demo
        .points
        .iter()
        .filter(|p| p.open_ttft_p99_ms > slo && p.closed_ttft_p99_ms <= slo)
        .collect();
    let lines = vec![
        match (hidden.first(), hidden.last()) {
            (Some(a), Some(b)) => format!(
                "COORDINATED OMISSION: from {:.0}% to {:.0}% of capacity the open loop misses the SLO while the closed loop reports it met",
                a.load * 100.0,
                b.load * 100.0
            ),
            _ => "No load here where the closed loop hides an overload".to_owned(),
        },
        format!(
            "Simulated engine, capacity {:.1} req/s; SLO TTFT p99 ≤ {slo} ms; {} requests per point.",
            demo.capacity_rps, demo.spec.requests
        ),
    ];
    let tiles = worst_tiles(demo.points.last(), slo);
    d.raw_html(banner(&lines, hidden.is_empty(), &tiles));
    let pts = |f: fn(&DemoPoint) -> f64| -> Vec<(f64, f64)> {
        demo.points.iter().map(|p| (p.load * 100.0, f(p))).collect()
    };
    let mut chart = crate::report::svg::Chart::new(
        "demo-ttft",
        "TTFT p99: open loop vs closed loop, same nominal load",
        "offered load (% of capacity)",
        "TTFT p99 (ms)",
    )
    .line(
        "open loop p99 (from the intended send time)",
        pts(|p| p.open_ttft_p99_ms),
    )
    .line(
        "closed loop p99 (from the actual send)",
        pts(|p| p.closed_ttft_p99_ms),
    )
    .hline(slo, &format!("SLO p99 ≤ {slo} ms"));
    let mut sent = crate::report::svg::Chart::new(
        "demo-sent",
        "Offered vs what the closed loop sent",
        "offered load (% of capacity)",
        "req/s",
    )
    .line("offered", pts(|p| p.offered_rps))
    .line("closed loop sent", pts(|p| p.closed_achieved_rps));
    if let (Some(a), Some(b)) = (hidden.first(), hidden.last()) {
        // Half a step either side, so one hidden point still shows as a span.
        let step = demo
            .points
            .windows(2)
            .map(|w| (w[1].load - w[0].load) * 100.0)
            .fold(f64::INFINITY, f64::min);
        let half = if step.is_finite() { step / 2.0 } else { 5.0 };
        let name = "overload the closed loop hides";
        chart = chart.band(a.load * 100.0 - half, b.load * 100.0 + half, name);
        sent = sent.band(a.load * 100.0 - half, b.load * 100.0 + half, name);
    }
    d.figure(chart.render());
    d.figure(sent.render());
    let doc = demo.document();
    d.blocks.extend(doc.blocks.into_iter().skip(1));
    crate::report::format::html::wrap("goodput demo", &d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_tail_passes_the_slo_where_closed_loop_hides_it() {
        let spec = DemoSpec {
            requests: 1500,
            loads: vec![0.5, 1.1],
            ..DemoSpec::default()
        };
        let slo = spec.slo_ttft_p99_ms;
        let d = run(&SimConfig::default(), spec).unwrap();
        assert!(d.capacity_rps > 0.0);
        let (low, high) = (&d.points[0], &d.points[1]);
        // At half load both loops agree and meet the SLO.
        assert!(
            low.open_ttft_p99_ms <= slo && low.closed_ttft_p99_ms <= slo,
            "{low:?}"
        );
        // Past capacity the open-loop tail blows through the SLO; the closed loop reports a
        // tail within it, because it sent less than was offered.
        assert!(high.open_ttft_p99_ms > 2.0 * slo, "{high:?}");
        assert!(high.closed_ttft_p99_ms <= slo, "{high:?}");
        assert!(
            high.closed_achieved_rps < 0.97 * high.offered_rps,
            "{high:?}"
        );
    }
}
