//! Efficiency over the steady window: energy read from accelerator telemetry (`telemetry.jsonl`,
//! scraped from DCGM- or AMD-exporter-shaped pages) and the declared price, set against the
//! tokens and the SLO-meeting requests of the same window.
//!
//! Energy comes from a device's energy counter where it publishes one (its difference across
//! the window, each end interpolated between the scrapes around it, with bounds from the
//! scrapes themselves); otherwise from its power gauge integrated over the scrapes (trapezoids,
//! labelled so). Every derived figure names what it was computed from; one whose input is
//! missing is absent with the reason, never zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::contract::Contract;
use crate::env::prom::{self, Scrape};
use crate::record::Record;

/// An accelerator metric goodput reads: the exporters' names (AMD's exporter publishes its
/// names in lower case; both cases are read) and the factor to the unit used here.
struct Known {
    names: &'static [(&'static str, f64)],
}

/// Energy counters, to joules: DCGM's in millijoules since the driver loaded, AMD's in
/// microjoules.
const ENERGY: Known = Known {
    names: &[
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),
        ("gpu_energy_consumed", 1e-6),
    ],
};
/// Power gauges, watts.
const POWER: Known = Known {
    names: &[
        ("DCGM_FI_DEV_POWER_USAGE", 1.0),
        ("gpu_power_usage", 1.0),
        ("gpu_package_power", 1.0),
    ],
};
/// Utilisation, percent.
const UTIL: Known = Known {
    names: &[("DCGM_FI_DEV_GPU_UTIL", 1.0), ("gpu_gfx_activity", 1.0)],
};
/// Device memory used, MiB (AMD reports MB).
const MEMORY: Known = Known {
    names: &[
        ("DCGM_FI_DEV_FB_USED", 1.0),
        ("gpu_used_vram", 1e6 / 1048576.0),
    ],
};

impl Known {
    fn factor(&self, name: &str) -> Option<f64> {
        self.names
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, f)| *f)
    }
}

fn is_read(name: &str) -> bool {
    [&ENERGY, &POWER, &UTIL, &MEMORY]
        .iter()
        .any(|k| k.factor(name).is_some())
}

/// Whether a scrape publishes any accelerator metric goodput reads.
pub fn reads_any(series: &BTreeMap<String, f64>) -> bool {
    series.keys().any(|k| is_read(prom::name(k)))
}

/// The metric names of a scrape goodput does not read, sorted.
pub fn unread_names(series: &BTreeMap<String, f64>) -> Vec<String> {
    let mut out: Vec<String> = series
        .keys()
        .map(|k| prom::name(k))
        .filter(|n| !is_read(n))
        .map(str::to_owned)
        .collect();
    out.dedup();
    out
}

/// Which device a series is about: its UUID or serial number (unique anywhere), else its index
/// on the page it came from.
fn device_of(key: &str, source: &str) -> String {
    for label in ["UUID", "uuid", "serial_number"] {
        if let Some(v) = prom::label(key, label).filter(|v| !v.is_empty()) {
            return v.to_owned();
        }
    }
    let index = ["gpu", "gpu_id", "device"]
        .iter()
        .find_map(|l| prom::label(key, l))
        .unwrap_or("0");
    format!("{source}#{index}")
}

/// One accelerator over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Device {
    /// UUID or serial number (else page and index).
    pub id: String,
    /// Joules over the window.
    pub joules: Option<f64>,
    /// `counter` (energy counter difference) or `power` (power gauge integrated).
    pub source: Option<String>,
    /// Mean draw over the window, watts.
    pub mean_watts: Option<f64>,
    /// Mean utilisation of the scrapes inside the window, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_percent: Option<f64>,
    /// Largest memory use seen inside the window, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<f64>,
    /// Why this device has no energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent: Option<String>,
}

/// Energy of every device over the steady window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Energy {
    pub joules: f64,
    /// How it was measured, in words (counter difference, or power integrated).
    pub method: String,
    /// What the scrapes allow the true energy to be: a monotonic counter's difference lies
    /// between the scrapes just inside the window and those just outside it. Absent for
    /// integrated power.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds_joules: Option<[f64; 2]>,
    /// `joules` over the window's length.
    pub mean_watts: f64,
    /// Seconds between telemetry scrapes, median.
    pub scrape_interval_s: Option<f64>,
}

/// A derived figure, or why it is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figure {
    /// Stable name (`joules_per_output_token`, …) read by `compare` and `sweep`.
    pub key: String,
    pub label: String,
    pub unit: String,
    pub value: Option<f64>,
    /// What it was computed from, or why it is absent.
    pub basis: String,
}

/// The efficiency section of a summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Efficiency {
    /// The steady window the figures cover, seconds on the run's clock (the records' and the
    /// scrapes'), and its length.
    pub from_s: f64,
    pub to_s: f64,
    pub window_s: f64,
    /// Output tokens emitted inside the window (scaled to the server's usage counts, as the
    /// throughput is).
    pub output_tokens: f64,
    /// Input tokens read inside the window.
    pub input_tokens: f64,
    /// The window's output tokens that count as SLO-meeting: `output_tokens` × the share of the
    /// steady requests' output tokens from requests that met their SLO, as goodput is the
    /// achieved rate × the share of requests (absent without an SLO).
    pub slo_output_tokens: Option<f64>,
    /// SLO-meeting requests in the window: goodput × its length.
    pub slo_requests: Option<f64>,
    pub energy: Option<Energy>,
    /// Why there is no energy figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_absent: Option<String>,
    /// Per accelerator, as the telemetry saw them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// The divisor of per-accelerator figures, and where it came from.
    pub accelerators: Option<u32>,
    pub accelerators_basis: String,
    /// `target.declared.price_per_hour` and its currency.
    pub price_per_hour: Option<f64>,
    pub currency: Option<String>,
    pub figures: Vec<Figure>,
    /// Telemetry metric names published but not read (listed, ignored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_metrics: Vec<String>,
    /// Things a reader of these figures must know.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Efficiency {
    /// Devices whose energy was measured.
    pub fn measured_devices(&self) -> usize {
        self.devices.iter().filter(|d| d.joules.is_some()).count()
    }

    pub fn figure(&self, key: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.key == key)
    }

    pub fn value(&self, key: &str) -> Option<f64> {
        self.figure(key).and_then(|f| f.value)
    }
}

/// A telemetry page the run could not read, as `environment.json` keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageStatus {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent: Option<String>,
}

/// Linear interpolation of a sorted `(t, v)` series at `t`, with the samples around it.
fn around(series: &[(f64, f64)], t: f64) -> Option<((f64, f64), (f64, f64))> {
    let i = series.partition_point(|p| p.0 <= t);
    if i == 0 || i == series.len() && series[i - 1].0 < t {
        return None;
    }
    let a = series[i - 1];
    let b = if i == series.len() { a } else { series[i] };
    Some((a, b))
}

fn interpolate((a, b): ((f64, f64), (f64, f64)), t: f64) -> f64 {
    if b.0 <= a.0 {
        return a.1;
    }
    a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0)
}

/// A counter's difference over `[from, to]` with its bounds, or why it cannot be had.
fn counter_energy(series: &[(f64, f64)], from: f64, to: f64) -> Result<(f64, [f64; 2]), String> {
    if series.windows(2).any(|w| w[1].1 < w[0].1) {
        return Err("its energy counter went backwards (a driver reload or a wrap)".into());
    }
    let (Some(a), Some(b)) = (around(series, from), around(series, to)) else {
        return Err("no energy-counter scrape before the window's start and after its end".into());
    };
    let joules = interpolate(b, to) - interpolate(a, from);
    let bounds = [(b.0.1 - a.1.1).max(0.0), b.1.1 - a.0.1];
    Ok((joules, bounds))
}

/// Power integrated over `[from, to]` by trapezoids between samples (the ends interpolated).
fn integrated_power(series: &[(f64, f64)], from: f64, to: f64) -> Result<f64, String> {
    let (Some(a), Some(b)) = (around(series, from), around(series, to)) else {
        return Err("no power scrape before the window's start and after its end".into());
    };
    let mut pts = vec![(from, interpolate(a, from))];
    pts.extend(series.iter().copied().filter(|p| p.0 > from && p.0 < to));
    pts.push((to, interpolate(b, to)));
    Ok(pts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum())
}

#[derive(Default)]
struct Series {
    energy: Vec<(f64, f64)>,
    power: Vec<(f64, f64)>,
    util: Vec<(f64, f64)>,
    memory: Vec<(f64, f64)>,
}

/// What the window's tokens and requests were: computed by the caller with the throughput's
/// own rules.
pub struct Window<'a> {
    pub from_s: f64,
    pub to_s: f64,
    /// Its length as the summary states it (`steady.window_s`): the cost is computed from
    /// this very number.
    pub window_s: f64,
    pub records: &'a [Record],
    /// Output-token scale to the server's usage counts (1 when the client's counts stand).
    pub usage_scale: f64,
    /// Headline goodput, requests/s (absent without an SLO).
    pub goodput_rps: Option<f64>,
    /// Median TPOT of the steady requests that met their SLO (or of all, without one), ms.
    pub tpot_p50_ms: Option<f64>,
    /// The share of the steady requests' output tokens from requests that met their SLO
    /// (absent without an SLO).
    pub slo_share: Option<f64>,
}

/// The efficiency of the steady window `w`: the window's tokens, each accelerator's energy
/// over it, why energy is absent if it is, the divisor of per-accelerator figures, and the
/// figures made of them.
pub fn derive(c: &Contract, w: &Window, telemetry: &[Scrape], pages: &[PageStatus]) -> Efficiency {
    let tokens = Tokens::of(w);
    let (devices, ignored) = by_device(telemetry);
    let mut notes = Vec::new();
    let measured = measure(devices, w, &mut notes);
    let energy_absent = energy_absent(c, w.window_s, &measured, telemetry, pages);
    if energy_absent.is_none() {
        notes.extend(partial_energy_notes(pages, &measured.devices));
    }
    let energy = energy_absent
        .is_none()
        .then(|| measured.energy(w.window_s, median_interval(telemetry)));
    let (accelerators, accelerators_basis) = accelerators(c, measured.count, &mut notes);
    let figures = Figures {
        c,
        w,
        tokens: &tokens,
        energy: energy.as_ref(),
        no_energy: energy_absent.as_deref().unwrap_or(""),
        accelerators,
        accelerators_basis: &accelerators_basis,
    }
    .all();
    Efficiency {
        from_s: w.from_s,
        to_s: w.to_s,
        window_s: w.window_s,
        output_tokens: tokens.output,
        input_tokens: tokens.input,
        slo_output_tokens: tokens.slo_output,
        slo_requests: tokens.slo_requests,
        energy,
        energy_absent,
        devices: measured.devices,
        accelerators,
        accelerators_basis,
        price_per_hour: c.target.declared.price_per_hour,
        currency: c.target.declared.currency.clone(),
        figures,
        ignored_metrics: ignored,
        notes,
    }
}

/// The window's tokens, and the part of them (and of its requests) that met the SLO.
struct Tokens {
    input: f64,
    output: f64,
    slo_output: Option<f64>,
    slo_requests: Option<f64>,
}

impl Tokens {
    fn of(w: &Window) -> Tokens {
        let (from, to) = (w.from_s, w.to_s);
        let inside = |t: u64| {
            let t = t as f64 / 1e6;
            t >= from && t <= to
        };
        let (input, output) = super::window_tokens(w.records.iter(), inside);
        // SLO-meeting tokens as goodput counts requests: the window's output tokens times the
        // share of the steady requests' output that came from requests meeting their SLO (not
        // the tokens inside the window of those requests, which in a short overloaded run are
        // the early ones, all of which met it).
        Tokens {
            input: input as f64,
            output: output as f64 * w.usage_scale,
            slo_output: w
                .slo_share
                .map(|share| output as f64 * w.usage_scale * share),
            slo_requests: w.goodput_rps.map(|g| g * w.window_s),
        }
    }
}

/// The telemetry's series by device, and the metric names read but not used.
fn by_device(telemetry: &[Scrape]) -> (BTreeMap<String, Series>, Vec<String>) {
    let mut devices: BTreeMap<String, Series> = BTreeMap::new();
    let mut ignored: Vec<String> = Vec::new();
    for s in telemetry {
        let page = s.source.as_deref().unwrap_or("telemetry");
        for (k, &v) in &s.series {
            let name = prom::name(k);
            if !v.is_finite() {
                continue;
            }
            let d = || device_of(k, page);
            if let Some(f) = ENERGY.factor(name) {
                devices.entry(d()).or_default().energy.push((s.t_s, v * f));
            } else if let Some(f) = POWER.factor(name) {
                let e = devices.entry(d()).or_default();
                // One power gauge per device: AMD publishes two on some parts.
                if e.power.last().is_none_or(|p| p.0 < s.t_s) {
                    e.power.push((s.t_s, v * f));
                }
            } else if let Some(f) = UTIL.factor(name) {
                devices.entry(d()).or_default().util.push((s.t_s, v * f));
            } else if let Some(f) = MEMORY.factor(name) {
                devices.entry(d()).or_default().memory.push((s.t_s, v * f));
            } else if !ignored.iter().any(|n| n == name) {
                ignored.push(name.to_owned());
            }
        }
    }
    ignored.sort();
    (devices, ignored)
}

/// Every device's energy over the window, and their sum.
struct Measured {
    devices: Vec<Device>,
    joules: f64,
    /// The sum's bounds, when every device's energy came from a counter.
    bounds: Option<[f64; 2]>,
    methods: std::collections::BTreeSet<&'static str>,
    /// Devices whose energy was measured.
    count: u32,
}

impl Measured {
    fn energy(&self, window_s: f64, scrape_interval_s: Option<f64>) -> Energy {
        Energy {
            joules: self.joules,
            method: match (self.methods.contains("counter"), self.methods.contains("power")) {
                (true, false) => "energy counters' difference across the steady window, each end interpolated between the scrapes around it".to_owned(),
                (false, true) => "power gauges integrated over the scrapes (trapezoids): changes between scrapes are missed".to_owned(),
                _ => "energy counters where published, power integrated elsewhere".to_owned(),
            },
            bounds_joules: self.bounds,
            mean_watts: self.joules / window_s,
            scrape_interval_s,
        }
    }
}

fn measure(devices: BTreeMap<String, Series>, w: &Window, notes: &mut Vec<String>) -> Measured {
    let mut m = Measured {
        devices: Vec::new(),
        joules: 0.0,
        bounds: Some([0.0, 0.0]),
        methods: std::collections::BTreeSet::new(),
        count: 0,
    };
    for (id, mut s) in devices {
        for v in [&mut s.energy, &mut s.power, &mut s.util, &mut s.memory] {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let (mut dev, result) = device_energy(id, &s, w, notes);
        match result {
            Ok((j, b, method)) => {
                m.joules += j;
                m.count += 1;
                m.methods.insert(method);
                m.bounds = match (m.bounds, b) {
                    (Some([lo, hi]), Some([l, h])) => Some([lo + l, hi + h]),
                    _ => None,
                };
                dev.joules = Some(j);
                dev.source = Some(method.to_owned());
                dev.mean_watts = (w.window_s > 0.0).then(|| j / w.window_s);
            }
            Err(why) => dev.absent = Some(why),
        }
        m.devices.push(dev);
    }
    m
}

/// One device's figures over the window, and its energy (joules, bounds, method) or why not:
/// its energy counter's difference, else its power gauge integrated.
#[allow(clippy::type_complexity)]
fn device_energy(
    id: String,
    s: &Series,
    w: &Window,
    notes: &mut Vec<String>,
) -> (
    Device,
    Result<(f64, Option<[f64; 2]>, &'static str), String>,
) {
    let (from, to) = (w.from_s, w.to_s);
    let in_window = |v: &[(f64, f64)]| -> Vec<f64> {
        v.iter()
            .filter(|p| p.0 >= from && p.0 <= to)
            .map(|p| p.1)
            .collect()
    };
    let util = in_window(&s.util);
    let memory = in_window(&s.memory);
    let by_counter = (!s.energy.is_empty()).then(|| counter_energy(&s.energy, from, to));
    let result = match by_counter {
        Some(Ok((j, b))) => {
            // A counter that stands still between scrapes is refreshed less often than it
            // is scraped: its samples are older than their times.
            let steps: Vec<&[(f64, f64)]> = s
                .energy
                .windows(2)
                .filter(|p| p[1].0 >= from && p[0].0 <= to)
                .collect();
            let still = steps.iter().filter(|p| p[1].1 == p[0].1).count();
            if still > 0 && j > 0.0 {
                notes.push(format!(
                    "device {id}: its energy counter stood still across {still} of {} scrapes in the window: the exporter refreshes it less often than goodput scrapes (dcgm-exporter's collect interval, -c, is 30 s by default), so its samples are older than their times; lower that interval to the scrape interval or below",
                    steps.len()
                ));
            }
            Ok((j, Some(b), "counter"))
        }
        counter => {
            let why_not_counter = match counter {
                Some(Err(e)) => Some(e),
                _ => None,
            };
            if s.power.is_empty() {
                Err(why_not_counter.unwrap_or_else(|| {
                    "publishes neither an energy counter nor a power gauge".into()
                }))
            } else {
                if let Some(e) = &why_not_counter {
                    notes.push(format!(
                        "device {id}: {e}; its energy is its power integrated instead"
                    ));
                }
                integrated_power(&s.power, from, to).map(|j| (j, None, "power"))
            }
        }
    };
    let dev = Device {
        id,
        joules: None,
        source: None,
        mean_watts: None,
        util_percent: (!util.is_empty()).then(|| util.iter().sum::<f64>() / util.len() as f64),
        memory_used_mib: memory.iter().copied().reduce(f64::max),
        absent: None,
    };
    (dev, result)
}

/// The median interval between the first telemetry page's scrapes.
fn median_interval(telemetry: &[Scrape]) -> Option<f64> {
    let mut times: Vec<f64> = telemetry
        .iter()
        .filter(|s| s.source == telemetry.first().and_then(|f| f.source.clone()))
        .map(|s| s.t_s)
        .collect();
    times.sort_by(f64::total_cmp);
    let mut d: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    d.sort_by(f64::total_cmp);
    d.get(d.len() / 2).copied()
}

/// Why the run has no energy figure, if it has none.
fn energy_absent(
    c: &Contract,
    window_s: f64,
    measured: &Measured,
    telemetry: &[Scrape],
    pages: &[PageStatus],
) -> Option<String> {
    if c.target.telemetry.urls.is_empty() {
        return Some(
            "no energy measurement: no accelerator telemetry ([target.telemetry] urls)".to_owned(),
        );
    }
    if window_s <= 0.0 {
        return Some("no energy measurement: the run has no steady window".to_owned());
    }
    if measured.count > 0 {
        return None;
    }
    let mut why: Vec<String> = pages
        .iter()
        .filter_map(|p| {
            let absent = p.absent.as_deref()?;
            Some(format!("{} could not be read ({absent})", p.url))
        })
        .collect();
    why.extend(
        measured
            .devices
            .iter()
            .filter_map(|d| d.absent.as_ref().map(|a| format!("device {}: {a}", d.id))),
    );
    if why.is_empty() && telemetry.is_empty() {
        why.push("the bundle holds no telemetry scrapes (telemetry.jsonl)".to_owned());
    }
    if why.is_empty() {
        why.push("the telemetry pages publish no energy counter or power gauge goodput reads (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_POWER_USAGE, gpu_energy_consumed, gpu_power_usage)".into());
    }
    Some(format!("no energy measurement: {}", why.join("; ")))
}

/// With an energy figure: the pages and devices it leaves out.
fn partial_energy_notes(pages: &[PageStatus], devices: &[Device]) -> Vec<String> {
    let mut notes = Vec::new();
    for p in pages {
        if let Some(absent) = &p.absent {
            notes.push(format!(
                "telemetry page {} could not be read ({absent}): its accelerators' energy is not in these figures",
                p.url
            ));
        }
    }
    for d in devices {
        if let Some(absent) = &d.absent {
            notes.push(format!(
                "device {}: {absent}; its energy is not in these figures",
                d.id
            ));
        }
    }
    notes
}

/// The divisor of per-accelerator figures and where it comes from: declared, else the
/// devices the telemetry measured.
fn accelerators(c: &Contract, measured: u32, notes: &mut Vec<String>) -> (Option<u32>, String) {
    let declared = c.target.declared.accelerators;
    let seen = (measured > 0).then_some(measured);
    match (declared, seen) {
        (Some(d), Some(n)) if d != n => {
            notes.push(format!(
                "the contract declares {d} accelerators and the telemetry measured {n}: per-accelerator figures divide by the declared {d}, the energy is the {n} measured devices'"
            ));
            (Some(d), "declared".to_owned())
        }
        (Some(d), _) => (Some(d), "declared".to_owned()),
        (None, Some(n)) => (Some(n), "telemetry devices".to_owned()),
        (None, None) => (
            None,
            "accelerator count unknown: no telemetry device measured and no target.declared.accelerators".to_owned(),
        ),
    }
}

const NO_PRICE: &str = "no price: set target.declared.price_per_hour and target.declared.currency";
const NO_SLO: &str = "no SLO: no request can be counted as meeting it";

/// What the figures are made of.
struct Figures<'a> {
    c: &'a Contract,
    w: &'a Window<'a>,
    tokens: &'a Tokens,
    energy: Option<&'a Energy>,
    /// Why there is no energy figure ("" when there is one).
    no_energy: &'a str,
    accelerators: Option<u32>,
    accelerators_basis: &'a str,
}

/// A figure's value from what it needs: a number, or why it has none.
fn figure(key: &str, label: &str, unit: &str, v: Result<f64, String>, basis: &str) -> Figure {
    let (value, basis) = match v {
        Ok(x) if x.is_finite() => (Some(x), basis.to_owned()),
        Ok(_) => (None, "nothing to divide by in the window".to_owned()),
        Err(why) => (None, why),
    };
    Figure {
        key: key.into(),
        label: label.into(),
        unit: unit.into(),
        value,
        basis,
    }
}

fn need(x: Option<f64>, why: &str) -> Result<f64, String> {
    x.ok_or_else(|| why.to_owned())
}

fn positive(x: f64, what: &str) -> Result<f64, String> {
    if x > 0.0 {
        Ok(x)
    } else {
        Err(format!("no {what} in the steady window"))
    }
}

impl Figures<'_> {
    /// Every figure, in the report's order: energy, per accelerator and per user, cost.
    fn all(&self) -> Vec<Figure> {
        let mut out = self.energy_figures();
        out.extend(self.rate_figures());
        out.extend(self.cost_figures());
        out
    }

    fn energy_figures(&self) -> Vec<Figure> {
        let joules = self.energy.map(|e| e.joules);
        let kw = self.energy.map(|e| e.mean_watts / 1000.0);
        let no_energy = self.no_energy;
        vec![
            figure(
                "mean_power_w",
                "mean power",
                "W",
                need(self.energy.map(|e| e.mean_watts), no_energy),
                "energy ÷ window",
            ),
            figure(
                "joules_per_output_token",
                "energy per output token",
                "J/token",
                need(joules, no_energy)
                    .and_then(|j| Ok(j / positive(self.tokens.output, "output tokens")?)),
                "energy ÷ output tokens in the window",
            ),
            figure(
                "joules_per_slo_request",
                "energy per SLO-meeting request",
                "J/request",
                need(joules, no_energy).and_then(|j| {
                    let n = need(self.tokens.slo_requests, NO_SLO)?;
                    Ok(j / positive(n, "SLO-meeting requests")?)
                }),
                "energy ÷ (goodput × window)",
            ),
            figure(
                "goodput_per_kw",
                "goodput per kW",
                "req/s/kW",
                need(kw, no_energy).and_then(|k| Ok(need(self.w.goodput_rps, NO_SLO)? / k)),
                "goodput ÷ mean power",
            ),
        ]
    }

    fn rate_figures(&self) -> Vec<Figure> {
        let window_s = self.w.window_s;
        let basis = self.accelerators_basis;
        let per_acc = |x: f64| -> Result<f64, String> {
            let n = self.accelerators.ok_or_else(|| basis.to_owned())?;
            let per_s = (window_s > 0.0).then(|| x / window_s);
            Ok(per_s.unwrap_or(f64::NAN) / f64::from(n))
        };
        let n = self.accelerators.unwrap_or(0);
        vec![
            figure(
                "output_tps_per_accelerator",
                "output tok/s per accelerator",
                "tok/s",
                per_acc(self.tokens.output),
                &format!("output tok/s ÷ {n} ({basis})"),
            ),
            figure(
                "slo_output_tps_per_accelerator",
                "SLO-meeting output tok/s per accelerator",
                "tok/s",
                need(self.tokens.slo_output, NO_SLO).and_then(per_acc),
                &format!("SLO-meeting output tok/s ÷ {n} ({basis})"),
            ),
            figure(
                "tps_per_user",
                "output tok/s per user",
                "tok/s",
                need(
                    self.w.tpot_p50_ms.filter(|t| *t > 0.0).map(|t| 1000.0 / t),
                    "no TPOT: no request streamed more than one chunk",
                ),
                if self.w.slo_share.is_some() {
                    "1000 ÷ median TPOT (ms) of SLO-meeting requests"
                } else {
                    "1000 ÷ median TPOT (ms) of steady requests"
                },
            ),
        ]
    }

    /// Cost: the price of the window's length, over its tokens (exactly this arithmetic).
    fn cost_figures(&self) -> Vec<Figure> {
        let window_s = self.w.window_s;
        let price = self.c.target.declared.price_per_hour;
        let cur = self.c.target.declared.currency.clone().unwrap_or_default();
        let cost = |tokens: f64| -> Result<f64, String> {
            let p = price.ok_or_else(|| NO_PRICE.to_owned())?;
            Ok(p * window_s / 3600.0 / positive(tokens, "tokens")? * 1e6)
        };
        let slo_output = self.tokens.slo_output;
        vec![
            figure(
                "cost_per_m_slo_output_tokens",
                "cost per 1M SLO-meeting output tok",
                &cur,
                need(slo_output, NO_SLO).and_then(cost),
                "price/h × window (h) ÷ SLO-meeting output tok × 10⁶",
            ),
            figure(
                "cost_per_m_tokens",
                "cost per 1M tokens (input + output)",
                &cur,
                cost(self.tokens.input + self.tokens.output),
                "price/h × window (h) ÷ (input + output tok) × 10⁶",
            ),
            figure(
                "slo_output_tokens_per_currency",
                "SLO-meeting output tok per currency unit",
                &format!("tok/{cur}"),
                need(slo_output, NO_SLO).and_then(|t| {
                    let p = price.ok_or_else(|| NO_PRICE.to_owned())?;
                    Ok(t / (p * window_s / 3600.0))
                }),
                "SLO-meeting output tok ÷ (price/h × window (h))",
            ),
        ]
    }
}

/// Which points are pareto-optimal when more is better on both axes: no other point is at
/// least as good on both and better on one. A point with an axis absent is never optimal.
pub fn pareto(points: &[Option<(f64, f64)>]) -> Vec<bool> {
    points
        .iter()
        .map(|p| {
            let Some((x, y)) = *p else { return false };
            !points
                .iter()
                .flatten()
                .any(|&(a, b)| a >= x && b >= y && (a > x || b > y))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_keeps_the_undominated() {
        let pts = [
            Some((60.0, 100.0)),
            Some((50.0, 300.0)),
            Some((40.0, 250.0)),
            None,
            Some((30.0, 300.0)),
            Some((60.0, 100.0)),
        ];
        assert_eq!(
            pareto(&pts),
            vec![true, true, false, false, false, true],
            "ties are both optimal"
        );
    }

    #[test]
    fn counter_difference_interpolates_and_bounds() {
        // 100 W exactly: 100 J per second, sampled every 2 s.
        let s: Vec<(f64, f64)> = (0..6).map(|i| (2.0 * i as f64, 200.0 * i as f64)).collect();
        let (j, b) = counter_energy(&s, 3.0, 7.0).unwrap();
        assert!((j - 400.0).abs() < 1e-9);
        // Inside scrapes 4..6 (200 J), outside 2..8 (600 J).
        assert_eq!(b, [200.0, 600.0]);
        assert!(counter_energy(&s, -1.0, 3.0).is_err());
        assert!(counter_energy(&[(0.0, 5.0), (1.0, 1.0), (2.0, 3.0)], 0.5, 1.5).is_err());
        let p: Vec<(f64, f64)> = vec![(0.0, 100.0), (2.0, 300.0), (4.0, 300.0)];
        // Trapezoids: 1..2 at 200→300 (250 J), 2..3 at 300 (300 J).
        assert!((integrated_power(&p, 1.0, 3.0).unwrap() - 550.0).abs() < 1e-9);
    }

    #[test]
    fn devices_are_told_apart_by_uuid_or_page_and_index() {
        let k = prom::key(
            "DCGM_FI_DEV_POWER_USAGE",
            &[
                ("gpu".into(), "1".into()),
                ("UUID".into(), "GPU-abc".into()),
            ],
        );
        assert_eq!(device_of(&k, "p"), "GPU-abc");
        let amd = prom::key("gpu_power_usage", &[("gpu_id".into(), "3".into())]);
        assert_eq!(
            device_of(&amd, "http://h:5000/metrics"),
            "http://h:5000/metrics#3"
        );
        assert!(is_read("GPU_ENERGY_CONSUMED") && is_read("gpu_energy_consumed"));
        let mut series = BTreeMap::new();
        series.insert(k, 1.0);
        series.insert("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"}".to_owned(), 1.0);
        assert_eq!(
            unread_names(&series),
            vec!["DCGM_FI_DEV_SM_CLOCK".to_owned()]
        );
    }
}
