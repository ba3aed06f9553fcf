//! `goodput init --url`: a first contract sized to the server it points at, from a few bounded
//! probe requests, so the quick start cannot flood a server slower than the template assumes.
//!
//! The probes: two requests one at a time (the first may be cold), then 4 and 16 at once while
//! batching still pays (each burst only when the one before served clearly more per second
//! than one at a time). Every probe asks for [`PROBE_TOKENS`] tokens of the contract's prompt,
//! with a timeout of [`PROBE_TIMEOUT`]: at most 22 short requests, and none at all once one
//! fails. From them: the server's TTFT and time per output token alone, and how many short
//! requests a second it finished at best. The contract is then set to half of what that
//! suggests for its own request shape, with counts for about a minute, and every figure and
//! choice written into the file as comments (numbers only: nothing the server or the command
//! line said becomes file text). See docs/guide/safety.md.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::api::RequestSpec;
use crate::client::Client;
use crate::contract::Contract;
use crate::contract::edit::{As, Edit};
use crate::plan::{Phase, Plan};
use crate::record::Record;
use crate::workload::Inputs;

/// Output tokens each probe asks for.
const PROBE_TOKENS: u32 = 16;
/// The longest a probe may take; one slower than this makes the server "too slow to probe".
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server may take to accept a connection (`goodput sim … &` just started).
const READY_WAIT: Duration = Duration::from_secs(10);
/// Bursts of this many at once, while batching pays.
const BURSTS: [usize; 2] = [4, 16];
/// Share of the estimated capacity the sized rate offers.
const HEADROOM: f64 = 0.5;
/// What the sized counts aim at: a minute of steady load, 15 s of warm-up.
const STEADY_S: f64 = 60.0;
const WARMUP_S: f64 = 15.0;
/// A request of the contract's shape should take at most this long alone, or its outputs
/// are made shorter.
const LONGEST_ALONE_S: f64 = 20.0;

/// What one probe request showed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Probe {
    pub ttft_s: f64,
    pub e2e_s: f64,
    /// Seconds per output token after the first.
    pub tpot_s: f64,
    /// When its first token came and when it ended (seconds on the prober's clock).
    pub first_s: f64,
    pub end_s: f64,
}

/// A burst of probes sent at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burst {
    pub n: usize,
    /// Seconds until the last ended.
    pub took_s: f64,
    /// The most the server decoded at once: the most decode spans (first token to end) that
    /// cover one instant. One at a time reads 1, however many were sent.
    pub decoded_at_once: f64,
    /// Their mean time per output token.
    pub tpot_s: f64,
}

impl Burst {
    /// Output tokens a second while the most were decoded at once.
    fn tokens_per_s(&self) -> f64 {
        self.decoded_at_once / self.tpot_s.max(1e-6)
    }

    fn of(probes: &[Probe], took_s: f64) -> Burst {
        // Each span's start and end as +1 and −1, ends first at a tie (one ending as the next
        // begins is not two at once); the highest running count.
        let mut edges: Vec<(f64, i32)> = probes
            .iter()
            .flat_map(|p| [(p.first_s, 1), (p.end_s, -1)])
            .collect();
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut now, mut most) = (0i32, 1i32);
        for (_, d) in edges {
            now += d;
            most = most.max(now);
        }
        Burst {
            n: probes.len(),
            took_s,
            decoded_at_once: f64::from(most),
            tpot_s: probes.iter().map(|p| p.tpot_s).sum::<f64>() / probes.len().max(1) as f64,
        }
    }
}

/// What the probes measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    /// One at a time, then the bursts.
    Answered { alone: Probe, bursts: Vec<Burst> },
    /// No probe finished within [`PROBE_TIMEOUT`].
    TooSlow,
}

/// The contract's request shape: its planned prompt and output lengths on average, and the
/// longest output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub input_mean: f64,
    pub output_mean: f64,
    pub output_max: f64,
}

impl Shape {
    /// The first planned requests' lengths.
    pub fn of(c: &Contract, inputs: &Inputs) -> Shape {
        let plan = Plan::new(c, inputs);
        let n = plan.len().unwrap_or(200).clamp(1, 200);
        let (mut i, mut o, mut max) = (0.0, 0.0, 0.0f64);
        for k in 0..n {
            let r = plan.request(k);
            i += f64::from(r.input_tokens);
            o += f64::from(r.output_tokens);
            max = max.max(f64::from(r.output_tokens));
        }
        Shape {
            input_mean: i / n as f64,
            output_mean: o / n as f64,
            output_max: max,
        }
    }
}

/// The contract's changes, and the comment lines that say why.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    pub edits: Vec<Edit>,
    pub comment: Vec<String>,
}

/// Probes the contract's target: waits (bounded) for it to accept connections, asks it which
/// model it serves when the contract names none, then sends the probes. `say` hears each step.
pub async fn probe(c: &Contract, inputs: &Inputs, say: &dyn Fn(&str)) -> anyhow::Result<Measured> {
    use anyhow::Context;
    let base = c
        .target
        .url
        .as_deref()
        .context("no target.url to probe")?
        .trim_end_matches('/')
        .to_owned();
    let secrets = crate::workload::environment::request_secrets(c)
        .map_err(|(key, msg)| anyhow::anyhow!("`{key}` {msg}"))?;
    let (headers, api_key) = super::reach::pool_credentials(c, &secrets);
    let keep_alive = Duration::from_secs_f64(c.target.keep_alive.seconds());
    let http = crate::client::http_pool(
        keep_alive,
        &headers,
        &c.target.tls,
        &crate::client::ConnectLog::default(),
    )?;
    let models = ready(&http, &base, api_key.as_deref()).await?;
    let model = match &c.target.model {
        Some(m) => m.clone(),
        None => crate::env::first_model(&models).with_context(|| {
            format!("{base}/v1/models lists no model to probe with; pass --model NAME")
        })?,
    };
    let client = Client::new(
        http,
        &base,
        api_key,
        c.target.api.adapter(),
        PROBE_TIMEOUT.min(Duration::from_secs_f64(c.target.timeout.seconds())),
        c.workload.stream,
        Instant::now(),
    );
    // Prompts of their own: a cache warm from an earlier probe (or run) would flatter TTFT.
    let mut fresh = c.clone();
    fresh.workload.cache_nonce = Some(super::files::fresh_nonce());
    let prober = Prober {
        client,
        plan: Plan::new(&fresh, inputs),
        model,
        contract: c,
    };
    say(&format!(
        "probing {base}: {PROBE_TOKENS}-token requests, two one at a time, then a few at once (docs/guide/safety.md)"
    ));
    match prober.measure().await {
        Ok(m) => Ok(m),
        Err(Failed::Slow) => Ok(Measured::TooSlow),
        Err(Failed::Error(e)) => anyhow::bail!(
            "the probe request to {base} failed: {e}. Check --url and --model, or write the template unsized with --no-probe"
        ),
    }
}

/// The target's `/v1/models` answer, once it accepts connections (waiting up to
/// [`READY_WAIT`]).
async fn ready(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let from = Instant::now();
    loop {
        let models = crate::env::probe(http, base, crate::env::facts::Endpoint::Models, key).await;
        if models.get("status").is_some() {
            return Ok(models);
        }
        if from.elapsed() >= READY_WAIT {
            let why = models["absent"].as_str().unwrap_or("no answer");
            anyhow::bail!(
                "cannot reach {base} to size the contract to it: {why}. Start the server first, or write the template unsized with --no-probe"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

enum Failed {
    Slow,
    Error(String),
}

struct Prober<'c> {
    client: Client,
    plan: Plan,
    model: String,
    contract: &'c Contract,
}

impl Prober<'_> {
    /// Probe `k`: the plan's request `k` asking for [`PROBE_TOKENS`] tokens.
    async fn one(&self, k: u64) -> Result<Probe, Failed> {
        let mut p = self.plan.request(k);
        let images = crate::driver::image_uris(self.plan.inputs(), &mut p);
        let w = &self.contract.workload;
        let body = self.client.adapter().body(&RequestSpec {
            model: &self.model,
            prompt: &p.prompt,
            messages: p.messages.as_deref(),
            max_tokens: PROBE_TOKENS,
            stream: w.stream,
            exact_output: true,
            sampling: &w.sampling,
            batch: w.batch,
            extra: Some(self.plan.extra_body(&p)),
            images: &images,
            tools: None,
        });
        let mut rec = Record::planned(&p, Phase::Warmup, "goodput-init");
        self.client
            .execute(body.into(), &mut rec, &CancellationToken::new())
            .await;
        if rec.outcome == crate::record::Outcome::Timeout {
            return Err(Failed::Slow);
        }
        if !rec.is_ok() {
            return Err(Failed::Error(
                rec.error.as_deref().unwrap_or("no detail").to_owned(),
            ));
        }
        let (sent, end) = (rec.sent_us.unwrap_or(0), rec.end_us.unwrap_or(0));
        let first = rec.first_token_us.unwrap_or(end);
        let tokens = rec
            .usage_completion_tokens
            .unwrap_or(rec.client_output_tokens)
            .max(1);
        let s = |us: u64| us as f64 / 1e6;
        Ok(Probe {
            ttft_s: s(first.saturating_sub(sent)),
            e2e_s: s(end.saturating_sub(sent)),
            tpot_s: s(end.saturating_sub(first)) / f64::from(tokens - 1).max(1.0),
            first_s: s(first),
            end_s: s(end),
        })
    }

    /// Two probes one at a time (the faster kept: the first may pay for a cold start), then
    /// the bursts while the server decodes most of each together.
    async fn measure(&self) -> Result<Measured, Failed> {
        let (a, b) = (self.one(0).await?, self.one(1).await?);
        let alone = if b.e2e_s <= a.e2e_s { b } else { a };
        let mut bursts: Vec<Burst> = Vec::new();
        for (j, &n) in BURSTS.iter().enumerate() {
            // A burst takes at least a request's time: not for a server slow alone.
            if alone.e2e_s > 15.0 {
                break;
            }
            let first = 2 + BURSTS[..j].iter().sum::<usize>() as u64;
            let Some(b) = self.burst(first, n).await else {
                break;
            };
            // Tokens a second, decoding as it did: what a larger burst could add to.
            let before = bursts
                .last()
                .map_or(1.0 / alone.tpot_s.max(1e-6), Burst::tokens_per_s);
            bursts.push(b);
            // The server did not decode most of them together, or doing so did not make it
            // produce clearly more: a larger burst would only queue.
            if b.decoded_at_once < 0.6 * n as f64 || b.tokens_per_s() < 1.5 * before {
                break;
            }
        }
        Ok(Measured::Answered { alone, bursts })
    }

    /// `n` probes at once (plan indices from `first`); `None` when any failed.
    async fn burst(&self, first: u64, n: usize) -> Option<Burst> {
        let from = Instant::now();
        let all = futures_util::future::join_all((0..n as u64).map(|k| self.one(first + k))).await;
        let took = from.elapsed().as_secs_f64();
        let probes: Vec<Probe> = all.into_iter().collect::<Result<_, _>>().ok()?;
        Some(Burst::of(&probes, took))
    }
}

/// The contract sized to what was measured. `fixed` names the shorthands the command line
/// set itself (`rate`, `concurrency`, `requests`, `duration`), which sizing leaves alone.
pub fn size(c: &Contract, shape: Shape, m: &Measured, fixed: &[&str]) -> Sizing {
    let mut out = Sizer {
        load_fixed: fixed.iter().any(|f| ["rate", "concurrency"].contains(f)),
        count_fixed: fixed.iter().any(|f| ["requests", "duration"].contains(f)),
        sizing: Sizing {
            edits: Vec::new(),
            comment: Vec::new(),
        },
    };
    let Measured::Answered { alone, bursts } = m else {
        out.too_slow();
        return out.sizing;
    };
    out.say(format!(
        "# Sized by `goodput init` from {} probe requests of {PROBE_TOKENS} output tokens (docs/guide/safety.md):",
        2 + bursts.iter().map(|b| b.n).sum::<usize>()
    ));
    out.say(format!(
        "#   alone: TTFT {:.0} ms, {:.1} ms per output token after it, {:.2} s per probe",
        ms(alone.ttft_s),
        ms(alone.tpot_s),
        alone.e2e_s
    ));
    for b in bursts {
        out.say(format!(
            "#   {} at once: all done in {:.2} s, up to {:.0} of them decoded at once, {:.1} ms a token",
            b.n,
            b.took_s,
            b.decoded_at_once,
            ms(b.tpot_s)
        ));
    }
    let shape = out.outputs(alone, shape);
    let fixed_rate = c.load.rate().filter(|_| out.load_fixed);
    out.rate_and_counts(alone, bursts, shape, fixed_rate);
    out.slo_and_timeout(c, alone, shape);
    out.sizing
}

fn ms(s: f64) -> f64 {
    s * 1000.0
}

/// The seconds a request of `out` output tokens takes alone.
fn alone_s(alone: &Probe, out: f64) -> f64 {
    alone.ttft_s + (out - 1.0).max(0.0) * alone.tpot_s
}

/// A sizing under way: its edits and comment lines, and what the command line fixed.
struct Sizer {
    load_fixed: bool,
    count_fixed: bool,
    sizing: Sizing,
}

impl Sizer {
    fn say(&mut self, line: String) {
        debug_assert!(line.starts_with('#') && !line.contains('\n'));
        self.sizing.comment.push(line);
    }

    fn set(&mut self, key: &str, value: String) {
        self.sizing.edits.push(Edit::Set {
            key: key.to_owned(),
            value,
            as_: As::Toml,
        });
    }

    fn shorthand(&mut self, name: &str, value: &str) {
        self.sizing
            .edits
            .extend(crate::contract::edit::shorthand(name, value));
    }

    /// No probe answered in time: one user at a time, ten short requests.
    fn too_slow(&mut self) {
        self.say(format!(
            "# Sized by `goodput init`: no {PROBE_TOKENS}-token probe request finished within {} s, so",
            PROBE_TIMEOUT.as_secs()
        ));
        self.say("# this is the conservative contract: one user at a time (a closed loop), 10 short requests.".to_owned());
        self.say(
            "# Nothing is known of what the server sustains: read this run, then raise the load."
                .to_owned(),
        );
        if !self.load_fixed {
            self.shorthand("concurrency", "1");
        }
        if !self.count_fixed {
            self.shorthand("requests", "10");
        }
        self.set("warmup.requests", "1".into());
        self.set(
            "workload.output_tokens",
            "{ dist = \"uniform\", min = 8, max = 16 }".into(),
        );
    }

    /// Outputs short enough that a request takes at most [`LONGEST_ALONE_S`] alone: the shape
    /// the rest is sized for.
    fn outputs(&mut self, alone: &Probe, mut shape: Shape) -> Shape {
        if alone_s(alone, shape.output_max) <= LONGEST_ALONE_S || alone.tpot_s <= 0.0 {
            return shape;
        }
        let max = ((LONGEST_ALONE_S - alone.ttft_s) / alone.tpot_s)
            .floor()
            .max(16.0);
        let min = (max / 3.0).floor().max(8.0);
        shape.output_mean = (min + max) / 2.0;
        shape.output_max = max;
        self.set(
            "workload.output_tokens",
            format!("{{ dist = \"uniform\", min = {min}, max = {max} }}"),
        );
        self.say(format!(
            "#   the outputs asked for would take over {LONGEST_ALONE_S:.0} s alone: workload.output_tokens is {min:.0}-{max:.0} instead"
        ));
        shape
    }

    /// The rate: half the lower of what decoding bounds (the most requests decoded at once,
    /// each taking its outputs' time at the time per token seen then) and what prefill bounds
    /// (were prompts taken one at a time: one per TTFT alone), for the contract's shape. The
    /// counts: about a minute of it, and 15 s of warm-up.
    fn rate_and_counts(
        &mut self,
        alone: &Probe,
        bursts: &[Burst],
        shape: Shape,
        fixed_rate: Option<f64>,
    ) {
        let request_s = alone_s(alone, shape.output_mean);
        let (at_once, tpot) = bursts.iter().map(|b| (b.decoded_at_once, b.tpot_s)).fold(
            (1.0, alone.tpot_s),
            |best, b| if b.0 > best.0 { b } else { best },
        );
        let decode_bound = at_once / ((shape.output_mean - 1.0).max(1.0) * tpot).max(1e-6);
        let prefill_bound = 1.0 / alone.ttft_s.max(1e-6);
        let capacity = decode_bound.min(prefill_bound);
        let rate = nice_floor(HEADROOM * capacity);
        self.say(format!(
            "#   => a request of this contract's shape ({:.0} in, {:.0} out on average) takes {:.2} s alone; decoding {:.0} at once",
            shape.input_mean, shape.output_mean, request_s, at_once
        ));
        self.say(format!(
            "#   the server finishes about {decode_bound:.2} of them a second, and takes prompts at {prefill_bound:.1} a second one at a time:"
        ));
        self.say(format!(
            "#   about {capacity:.2} a second. load.rate = {rate} is half that, for room."
        ));
        self.say("#   That estimate is a floor (more at once may serve more): `goodput sweep <this file> --capacity`".to_owned());
        self.say("#   finds the highest rate that meets the SLO. The progress guard stops any run the server falls behind.".to_owned());
        if self.load_fixed {
            self.say("#   (the load you set on the command line is kept as you set it)".to_owned());
        } else {
            self.shorthand("rate", &rate.to_string());
            self.sizing.edits.push(Edit::Set {
                key: "description".to_owned(),
                value: format!(
                    "Poisson arrivals at {rate} req/s, sized to the server by goodput init (see the comments above)"
                ),
                as_: As::Str,
            });
        }
        // The counts at the contract's rate: the one set here, or the command line's (none
        // for a closed loop the command line asked for).
        let rate = if self.load_fixed {
            fixed_rate
        } else {
            Some(rate)
        };
        if self.count_fixed {
            self.say(
                "#   (the count you set on the command line is kept as you set it)".to_owned(),
            );
        } else if let Some(rate) = rate {
            let steady = (rate * STEADY_S).round().clamp(20.0, 600.0) as u64;
            self.say(format!(
                "#   load.requests = {steady}: {:.0} s at that rate, at least 20 (a p99 claim needs 459: raise it when you have the time);",
                steady as f64 / rate.max(1e-9)
            ));
            self.shorthand("requests", &steady.to_string());
        }
        if let Some(rate) = rate {
            let warmup = (rate * WARMUP_S.max(2.0 * request_s))
                .ceil()
                .clamp(3.0, 150.0) as u64;
            self.say(format!(
                "#   warmup.requests = {warmup}: {:.0} s, longer than two requests take alone.",
                warmup as f64 / rate.max(1e-9)
            ));
            self.set("warmup.requests", warmup.to_string());
        }
    }

    /// An SLO this server cannot meet even alone says nothing: raised above what it does
    /// alone. A timeout every request can finish within, even queued behind others.
    fn slo_and_timeout(&mut self, c: &Contract, alone: &Probe, shape: Shape) {
        if let Some(t) = c
            .slo
            .ttft_ms
            .map(|m| m.0)
            .filter(|t| ms(4.0 * alone.ttft_s) > *t)
        {
            let new = nice_ceil(ms(4.0 * alone.ttft_s));
            self.say(format!(
                "#   slo.ttft_ms = {new}: the template's {t:.0} ms is under 4 times what this server takes alone ({:.0} ms);",
                ms(alone.ttft_s)
            ));
            self.set("slo.ttft_ms", new.to_string());
        }
        if let Some(t) = c
            .slo
            .tpot_ms
            .map(|m| m.0)
            .filter(|t| ms(2.0 * alone.tpot_s) > *t)
        {
            let new = nice_ceil(ms(2.0 * alone.tpot_s));
            self.say(format!(
                "#   slo.tpot_ms = {new}: the template's {t:.0} ms is under twice what this server takes alone ({:.1} ms);",
                ms(alone.tpot_s)
            ));
            self.set("slo.tpot_ms", new.to_string());
        }
        self.say("#   put your own SLO in [slo].".to_owned());
        let longest = alone_s(alone, shape.output_max);
        if 4.0 * longest > c.target.timeout.seconds() {
            let new = nice_ceil(4.0 * longest);
            self.say(format!(
                "#   target.timeout = \"{new}s\": four times the longest request alone ({longest:.1} s)."
            ));
            self.set("target.timeout", format!("\"{new}s\""));
        }
    }
}

/// `x` rounded down to two significant digits (and at least 0.01).
fn nice_floor(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.01) {
        return 0.01;
    }
    let scale = 10f64.powf(x.log10().floor() - 1.0);
    let v = (x / scale).floor() * scale;
    // Printed without the binary fraction's tail (0.30000000000000004).
    format!("{v:.6}").parse().unwrap_or(v)
}

/// `x` rounded up to two significant digits, as a whole number.
fn nice_ceil(x: f64) -> u64 {
    if !(x.is_finite() && x > 1.0) {
        return 1;
    }
    let scale = 10f64.powf((x.log10().floor() - 1.0).max(0.0));
    ((x / scale).ceil() * scale) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> Contract {
        crate::contract::parse(crate::contract::BUILTIN, std::path::Path::new("c.toml")).unwrap()
    }

    const SHAPE: Shape = Shape {
        input_mean: 256.0,
        output_mean: 128.0,
        output_max: 192.0,
    };

    fn value(s: &Sizing, key: &str) -> Option<String> {
        s.edits.iter().rev().find_map(|e| match e {
            Edit::Set { key: k, value, .. } if k == key => Some(value.clone()),
            _ => None,
        })
    }

    #[test]
    fn a_batching_server_gets_half_its_estimate_and_a_minute_of_requests() {
        // 30 ms TTFT, 12 ms a token; 16 decoded at once at 12.5 ms a token.
        let alone = Probe {
            ttft_s: 0.03,
            e2e_s: 0.21,
            tpot_s: 0.012,
            ..Probe::default()
        };
        let burst = |n: usize, at_once: f64| Burst {
            n,
            took_s: 0.3,
            decoded_at_once: at_once,
            tpot_s: 0.0125,
        };
        let m = Measured::Answered {
            alone,
            bursts: vec![burst(4, 3.9), burst(16, 15.2)],
        };
        let s = size(&contract(), SHAPE, &m, &[]);
        // 15.2 at once, 127 tokens at 12.5 ms: 9.6 a second (prompts: 33 a second), half offered.
        let rate: f64 = value(&s, "load.rate").unwrap().parse().unwrap();
        assert_eq!(rate, 4.7, "{s:?}");
        assert_eq!(
            value(&s, "load.requests").unwrap(),
            format!("{}", (rate * 60.0).round())
        );
        // The template's SLO is kept: this server does better alone.
        assert_eq!(value(&s, "slo.ttft_ms"), None);
        assert!(
            s.comment
                .iter()
                .all(|l| l.starts_with('#') && !l.contains('\n'))
        );
        assert!(
            s.comment.join("\n").contains("TTFT 30 ms"),
            "{:?}",
            s.comment
        );
    }

    #[test]
    fn a_server_that_serves_one_at_a_time_slowly_gets_a_trickle_and_shorter_outputs() {
        // The simulator: one at a time, 200 ms a token.
        let alone = Probe {
            ttft_s: 0.23,
            e2e_s: 3.2,
            tpot_s: 0.2,
            ..Probe::default()
        };
        let m = Measured::Answered {
            alone,
            bursts: vec![Burst {
                n: 4,
                took_s: 12.8,
                decoded_at_once: 1.0,
                tpot_s: 0.2,
            }],
        };
        let s = size(&contract(), SHAPE, &m, &[]);
        let rate: f64 = value(&s, "load.rate").unwrap().parse().unwrap();
        assert!(rate < 0.1, "{rate} {s:?}");
        assert!(
            value(&s, "workload.output_tokens")
                .unwrap()
                .contains("max = 98"),
            "{s:?}"
        );
        assert_eq!(value(&s, "load.requests").unwrap(), "20");
        // Its SLO rises above what it does alone.
        assert_eq!(value(&s, "slo.tpot_ms").unwrap(), "400");
        // The rate the command line set is kept.
        let s = size(&contract(), SHAPE, &m, &["rate"]);
        assert_eq!(value(&s, "load.rate"), None);
    }

    #[test]
    fn a_server_too_slow_to_probe_gets_one_user_at_a_time() {
        let s = size(&contract(), SHAPE, &Measured::TooSlow, &[]);
        assert_eq!(value(&s, "load.concurrency").unwrap(), "1");
        assert_eq!(value(&s, "load.requests").unwrap(), "10");
        assert!(
            s.edits
                .iter()
                .any(|e| matches!(e, Edit::Unset { key } if key == "load.rate"))
        );
    }

    #[test]
    fn a_burst_decoded_one_at_a_time_reads_one_and_together_reads_all() {
        let p = |first_s: f64, end_s: f64| Probe {
            first_s,
            end_s,
            tpot_s: 0.1,
            ..Probe::default()
        };
        let serial = Burst::of(&[p(0.0, 1.0), p(1.0, 2.0), p(2.0, 3.0)], 3.0);
        assert!((serial.decoded_at_once - 1.0).abs() < 1e-9, "{serial:?}");
        let together = Burst::of(&[p(0.0, 1.0), p(0.1, 1.1), p(0.0, 1.0), p(0.05, 1.0)], 1.1);
        assert_eq!(together.decoded_at_once, 4.0, "{together:?}");
        // Two pairs apart: two at once.
        let pairs = Burst::of(&[p(0.0, 1.0), p(0.0, 1.0), p(5.0, 6.0), p(5.0, 6.0)], 6.0);
        assert_eq!(pairs.decoded_at_once, 2.0, "{pairs:?}");
    }

    #[test]
    fn rounding_keeps_two_digits() {
        assert_eq!(nice_floor(4.3571), 4.3);
        assert_eq!(nice_floor(0.0371), 0.037);
        assert_eq!(nice_floor(123.4), 120.0);
        assert_eq!(nice_floor(0.0), 0.01);
        assert_eq!(nice_ceil(923.0), 930);
        assert_eq!(nice_ceil(3.2), 4);
        assert_eq!(nice_ceil(1234.0), 1300);
    }
}
