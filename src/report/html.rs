//! `report.html`: one self-contained file (inline CSS and SVG, no script, no network). The
//! first screen answers the question: a verdict banner and headline tiles, each passing or
//! failing in words as well as colour. Then the tails — TTFT, TPOT, ITL, E2E and the client's
//! dispatch lag by percentile on a log 1/(1−p) axis with the SLO and the 95% intervals drawn —
//! the run over time with its phases shaded, the whole text report, and the CDFs and length
//! distributions as secondary figures. The components here (tiles, percentile charts) serve
//! the compare, sweep and demo pages too.

use crate::analyze::classes::Standing;
use crate::analyze::{Itl, Second, Summary, Tally, request_metrics};
use crate::contract::Contract;
use crate::plan::Phase;
use crate::record::Record;
use crate::workload::Inputs;

use super::svg::{Chart, XScale, cdf, esc, percentile_points};

/// One headline tile: a name, a value, a line of detail, and whether it passes (`None`:
/// neither), said in words as well as colour.
pub struct Tile {
    pub name: String,
    pub value: String,
    pub detail: String,
    pub pass: Option<bool>,
}

impl Tile {
    /// The tile, its pass said as "✓ `yes`" or "✗ `no`" before its detail.
    fn html(&self, [yes, no]: [&str; 2]) -> String {
        let mark = |m: &str, w: &str| format!("<span class=\"mark\">{m} {}</span> ", esc(w));
        let (class, mark) = match self.pass {
            Some(true) => (" pass", mark("✓", yes)),
            Some(false) => (" fail", mark("✗", no)),
            None => ("", String::new()),
        };
        format!(
            r#"<div class="tile{class}"><div class="name">{}</div><div class="value">{}</div><div class="detail">{mark}{}</div></div>"#,
            esc(&self.name),
            esc(&self.value),
            esc(&self.detail)
        )
    }
}

/// The top of a page: a verdict banner (its lines, whether it passes) and headline tiles.
pub fn banner(lines: &[String], pass: bool, tiles: &[Tile]) -> String {
    banner_toned(lines, Some(pass), tiles)
}

/// [`banner`] that may be neither passing nor failing (`None`: a pass the sample does not yet
/// support).
pub fn banner_toned(lines: &[String], pass: Option<bool>, tiles: &[Tile]) -> String {
    banner_marked(lines, pass, tiles, ["meets", "misses"])
}

/// [`banner_toned`] whose tiles say their pass in other words than an SLO's "meets" and
/// "misses" (an A/B test's "better" and "worse").
pub fn banner_marked(
    lines: &[String],
    pass: Option<bool>,
    tiles: &[Tile],
    marks: [&str; 2],
) -> String {
    let mut out = format!(
        r#"<section class="banner {}" id="verdict">"#,
        match pass {
            Some(true) => "pass",
            Some(false) => "fail",
            None => "open",
        }
    );
    for (i, l) in lines.iter().enumerate() {
        if i == 0 {
            out += &format!(r#"<div class="verdict">{}</div>"#, esc(l));
        } else {
            out += &format!("<p>{}</p>", esc(l));
        }
    }
    out += r#"</section><section class="tiles" id="tiles">"#;
    for t in tiles {
        out += &t.html(marks);
    }
    out + "</section>\n"
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A run's verdict banner and headline tiles: VALID or not (with the first reason), comparable
/// or directional, the SLO met or not; goodput and attainment, each SLO metric at its
/// percentile against its threshold (with the interval), achieved against offered rate, errors.
pub fn verdicts(s: &Summary) -> String {
    if let Some(stages) = s.stages.as_ref().filter(|k| k.len() > 1) {
        return program_verdicts(s, stages);
    }
    let valid = s.validity.verdict == crate::analyze::ValidityVerdict::Valid;
    let slo = s.steady.slo.as_ref();
    use crate::analyze::SloVerdict;
    let mut tiles = Vec::new();
    if let Some(x) = slo {
        slo_tiles(s, x, &mut tiles);
    } else {
        for (name, d) in [
            ("TTFT p99", &s.steady.stats.ttft_ms),
            ("TPOT p99", &s.steady.stats.tpot_ms),
        ] {
            if let Some(d) = d {
                tiles.push(Tile {
                    name: name.into(),
                    value: ms(d.p99),
                    detail: "no SLO to judge it by".into(),
                    pass: None,
                });
            }
        }
    }
    // The SLO's tiles are the claims a verdict supports; the rate and the errors below are
    // counts, true of an INVALID run too.
    if !valid {
        unsupported(&mut tiles);
    }
    let task = s
        .steady
        .tasks
        .as_ref()
        .and_then(|t| Some((t, t.verdict()?)));
    if let Some((t, (met, _))) = task {
        tiles.push(Tile {
            name: format!("task latency p{}", t.percentile),
            value: t.slo_value_ms.map_or("failed".into(), ms),
            detail: format!(
                "task SLO ≤ {} ms · task goodput {} tasks/s",
                super::num(t.slo_ms.unwrap_or_default()),
                t.goodput_tps.map_or("—".into(), super::num)
            ),
            pass: Some(met),
        });
    }
    count_tiles(s, &mut tiles);
    efficiency_tiles(s, &mut tiles);
    let pass = match slo.map(|x| x.verdict) {
        _ if !valid => Some(false),
        _ if task.is_some_and(|(_, (met, _))| !met) => Some(false),
        None | Some(SloVerdict::Met) => Some(true),
        Some(SloVerdict::MetIndicated) => None,
        Some(_) => Some(false),
    };
    banner_toned(&banner_lines(s), pass, &tiles)
}

/// A load program's banner: the stages are its results, so each has a tile (its SLO verdict
/// and validity), and the whole run's mixed figures none.
fn program_verdicts(s: &Summary, stages: &[crate::analyze::stages::StageResult]) -> String {
    let word = |k: &crate::analyze::stages::StageResult| {
        let valid = k.validity.verdict == crate::analyze::ValidityVerdict::Valid;
        let slo = k.slo.as_ref().map_or("no SLO", |x| x.verdict.short());
        (valid, format!("{slo} · {}", k.validity.verdict))
    };
    let mut tiles: Vec<Tile> = stages
        .iter()
        .filter(|k| k.shape != "wait")
        .map(|k| {
            let (valid, value) = word(k);
            Tile {
                name: format!("stage {} ({})", k.name, k.offers),
                value,
                detail: match &k.recovery {
                    Some(r) => match r.recovered_after_s {
                        Some(t) => format!("recovered {t:.2} s after {}", r.after),
                        None => format!("did not recover from {}", r.after),
                    },
                    None => k
                        .stats
                        .ttft_ms
                        .as_ref()
                        .map_or(String::new(), |d| format!("TTFT p99 {}", ms(d.p99))),
                },
                // A step that met its SLO but is INVALID neither meets nor misses it: its
                // value says INVALID, and a "✗ misses" beside a TTFT under the SLO read as a
                // miss.
                pass: k
                    .slo
                    .as_ref()
                    .map(|x| x.verdict.met())
                    .filter(|&met| valid || !met),
            }
        })
        .collect();
    count_tiles(s, &mut tiles);
    let mut lines = match &s.edge {
        Some(e) => vec![
            format!(
                "EDGE SEARCH in {} steps · {} · each step judged on its own",
                e.searched.tried.len(),
                s.grade.verdict.as_str().to_uppercase()
            ),
            format!("{}.", e.answer()),
            format!("Steps (req/s): {}", e.trail()),
        ],
        None => vec![format!(
            "LOAD PROGRAM of {} stages · {} · each stage judged on its own",
            stages.len(),
            s.grade.verdict.as_str().to_uppercase()
        )],
    };
    lines.extend(
        s.validity
            .reasons
            .first()
            .map(|r| format!("The whole run: {r}.")),
    );
    lines.extend(s.grade.missing.first().map(|m| format!("Directional: {m}")));
    lines.push(super::headline(s));
    banner_toned(&lines, None, &tiles)
}

/// The banner's words: VALID or not, comparable or directional, the SLO's verdict; then the
/// first reason for each, and the headline.
fn banner_lines(s: &Summary) -> Vec<String> {
    use crate::analyze::SloVerdict;
    let v = &s.validity;
    let valid = v.verdict == crate::analyze::ValidityVerdict::Valid;
    let slo = s.steady.slo.as_ref();
    let mut lines = vec![format!(
        "{} · {} · {}",
        if valid { "VALID" } else { "INVALID" },
        s.grade.verdict.as_str().to_uppercase(),
        match slo.map(|x| x.verdict) {
            Some(v) if v.met() && !valid => "SLO met, not supported",
            Some(SloVerdict::Met) => "SLO met ✓",
            Some(SloVerdict::MetIndicated) => "SLO met, not yet supported",
            Some(SloVerdict::Missed) => "SLO NOT met ✗",
            Some(SloVerdict::MissedIndicated) => "SLO NOT met ✗ (not conclusive)",
            None => "no SLO",
        }
    )];
    if let Some((met, _)) = s.steady.tasks.as_ref().and_then(|t| t.verdict()) {
        lines[0].push_str(if met {
            " · task SLO met ✓"
        } else {
            " · task SLO NOT met ✗"
        });
    }
    if let Some(x) = slo {
        lines.push(format!("SLO {}.", super::slo_verdict_words(x, valid)));
    }
    if let Some((met, words)) = s.steady.tasks.as_ref().and_then(|t| t.verdict()) {
        lines.push(format!("{}{words}.", if met { "" } else { "✗ " }));
    }
    if let Some(l) = super::claims_line(s) {
        lines.push(l);
    }
    if let Some(r) = v.reasons.first() {
        lines.push(format!(
            "Invalid: {r}{}",
            if v.reasons.len() > 1 {
                format!(" (and {} more reasons, below)", v.reasons.len() - 1)
            } else {
                String::new()
            }
        ));
    }
    if let Some(m) = s.grade.missing.first() {
        lines.push(format!("Directional: {m}"));
    }
    lines.push(super::headline(s));
    lines
}

/// The SLO's tiles: goodput and attainment, a tile per class, each metric at its percentile.
fn slo_tiles(s: &Summary, x: &crate::analyze::SloResult, tiles: &mut Vec<Tile>) {
    tiles.push(Tile {
        name: "goodput (requests meeting every threshold)".into(),
        value: x
            .goodput_rps
            .map_or("—".into(), |g| format!("{g:.2} req/s")),
        detail: if s.classes.is_some() {
            format!(
                "attainment {:.1}%, each request by its class's SLO",
                x.attainment * 100.0
            )
        } else {
            format!(
                "attainment {:.1}% (target {:.0}%)",
                x.attainment * 100.0,
                x.attainment_target * 100.0
            )
        },
        pass: if let Some(k) = &s.classes {
            Some(k.iter().all(|k| k.slo.as_ref().is_none_or(|o| o.pass)))
        } else {
            verdict_pass(x.attainment_verdict)
        },
    });
    for k in s.classes.iter().flatten() {
        let own = k.slo.as_ref();
        let metrics: Vec<String> = own
            .map(|o| {
                o.per_metric
                    .iter()
                    .map(|m| {
                        format!(
                            "{} p{} {} (SLO ≤ {})",
                            m.metric.to_uppercase(),
                            o.percentile,
                            m.value_ms.map_or("—".into(), ms),
                            ms(m.threshold_ms)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let standing = k.standing();
        tiles.push(Tile {
            name: format!("class {} ({:.0}%)", k.name, k.share * 100.0),
            value: match standing {
                Standing::NoSlo => "no SLO",
                Standing::Meets => "meets its SLO",
                Standing::Indicated => "meets, not yet supported",
                Standing::Misses => "misses its SLO",
            }
            .into(),
            detail: format!(
                "{}{}{}",
                own.and_then(|o| o.not_yet())
                    .map_or(String::new(), |w| format!("{w} · ")),
                metrics.join(", "),
                own.map_or(String::new(), |o| format!(
                    " · attainment {:.1}% · goodput {}",
                    o.attainment * 100.0,
                    o.goodput_rps
                        .map_or("—".into(), |g| format!("{g:.2} req/s"))
                ))
            ),
            pass: match standing {
                Standing::NoSlo | Standing::Indicated => None,
                Standing::Meets => Some(true),
                Standing::Misses => Some(false),
            },
        });
    }
    slo_metric_tiles(s, x, tiles);
}

/// Each SLO metric at the SLO's percentile against its threshold, with what supports it and
/// its interval.
fn slo_metric_tiles(s: &Summary, x: &crate::analyze::SloResult, tiles: &mut Vec<Tile>) {
    use crate::analyze::SloVerdict;
    let st = &s.steady.stats;
    for m in &x.per_metric {
        let dist = st.dist(&m.metric);
        let ci = dist.and_then(|d| {
            let k = crate::stats::PERCENTILES
                .iter()
                .position(|(q, _)| (*q - x.percentile).abs() < 1e-9)?;
            d.ci95[k]
        });
        let conf = crate::analyze::claims::percent(x.confidence);
        let support = match m.verdict {
            SloVerdict::Met => m
                .upper_ms
                .map_or(String::new(), |u| format!(" · ≤ {} at {conf}", ms(u))),
            SloVerdict::MetIndicated => format!(
                " · not yet supported at {conf}: {}",
                crate::analyze::claims::needs_words(
                    m.needed,
                    m.misses,
                    crate::stats::min_requests_for(x.percentile, 0, x.confidence),
                    m.requests
                )
            ),
            SloVerdict::Missed => m.lower_ms.map_or_else(
                || format!(" · conclusive at {conf}"),
                |l| format!(" · ≥ {} at {conf}: conclusive", ms(l)),
            ),
            SloVerdict::MissedIndicated => format!(" · not conclusive at {conf}"),
        };
        tiles.push(Tile {
            name: format!(
                "{} {}",
                m.metric.to_uppercase(),
                crate::analyze::claims::pname(x.percentile)
            ),
            value: match m.value_ms {
                Some(v) => ms(v),
                None if m.misses > 0 => "a failed request".into(),
                None => "—".into(),
            },
            detail: format!(
                "SLO ≤ {}{support}{}",
                ms(m.threshold_ms),
                ci.map_or(String::new(), |[a, b]| format!(
                    " · 95% CI {:.0}–{:.0} ms",
                    a, b
                ))
            ),
            pass: verdict_pass(m.verdict),
        });
    }
}

/// The counts, true of an INVALID run too: completed against offered, and errors.
fn count_tiles(s: &Summary, tiles: &mut Vec<Tile>) {
    let st = &s.steady.stats;
    let t = &s.steady.throughput;
    if let Some(a) = t.achieved_rps {
        tiles.push(Tile {
            name: "completed requests".into(),
            value: format!("{a:.2} req/s"),
            // Kept up or not as the validity judged it: completions against the requests due
            // one median latency earlier (a short window beside a long E2E tail reads below
            // the offered rate on an idle server).
            detail: match (t.offered_rps, s.validity.kept_up) {
                (Some(o), Some(true)) => format!("of {o:.2} req/s offered: kept up"),
                (Some(o), Some(false)) => {
                    format!("of {o:.2} req/s offered: not kept up (see validity)")
                }
                (Some(o), None) => format!("of {o:.2} req/s offered"),
                (None, _) => "closed loop: no offered rate".into(),
            },
            pass: t.offered_rps.and(s.validity.kept_up),
        });
    }
    let errors: u64 = s.steady.errors.values().sum();
    tiles.push(Tile {
        name: "errors (steady)".into(),
        value: errors.to_string(),
        detail: if errors == 0 {
            format!("of {} requests", st.requests)
        } else {
            s.steady
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        pass: Some(errors == 0),
    });
}

/// A tile's standing from a verdict: green only when the sample supports the pass, neutral
/// while it only indicates one, red for any miss.
fn verdict_pass(v: crate::analyze::SloVerdict) -> Option<bool> {
    match v {
        crate::analyze::SloVerdict::Met => Some(true),
        crate::analyze::SloVerdict::MetIndicated => None,
        _ => Some(false),
    }
}

/// Under an INVALID verdict an SLO tile that would pass is not shown green: the run cannot
/// support it (the client fell behind, too few requests …). It turns neutral and says so; a
/// failing tile stays red, a warning either way.
fn unsupported(tiles: &mut [Tile]) {
    for t in tiles.iter_mut().filter(|t| t.pass == Some(true)) {
        t.pass = None;
        t.detail = format!(
            "meets, but not supported: the run is INVALID · {}",
            t.detail
        );
    }
}

/// Energy per token, cost per million SLO-meeting tokens and SLO-meeting tokens/s per
/// accelerator, when the run measured energy, declared a price or knows its accelerators; an
/// absent one says why in its detail.
fn efficiency_tiles(s: &Summary, tiles: &mut Vec<Tile>) {
    let Some(e) = &s.efficiency else { return };
    if e.energy.is_none() && e.price_per_hour.is_none() && e.accelerators.is_none() {
        return;
    }
    for key in [
        "joules_per_output_token",
        "cost_per_m_slo_output_tokens",
        "slo_output_tps_per_accelerator",
    ] {
        let Some(f) = e.figure(key) else { continue };
        let detail = match (key, f.value, &e.energy) {
            ("joules_per_output_token", Some(_), Some(en)) => format!(
                "mean {} W over {} accelerator{}; {}",
                super::sig(en.mean_watts),
                e.measured_devices(),
                if e.measured_devices() == 1 { "" } else { "s" },
                if en.bounds_joules.is_some() {
                    "energy counters"
                } else {
                    "power integrated"
                }
            ),
            ("cost_per_m_slo_output_tokens", Some(_), _) => format!(
                "at {} {} per hour (declared)",
                e.price_per_hour.map_or("—".into(), super::sig),
                e.currency.as_deref().unwrap_or("")
            ),
            (_, Some(_), _) => f.basis.clone(),
            (_, None, _) => format!("absent: {}", f.basis),
        };
        tiles.push(Tile {
            name: f.label.clone(),
            value: super::figure_value(f),
            detail,
            pass: None,
        });
    }
}

/// A latency-by-percentile chart of one or more named sets of values (each sorted here), with
/// the SLO threshold as a horizontal line and each set's 95% intervals as a band.
pub fn percentile_chart(
    id: &str,
    title: &str,
    y_label: &str,
    sets: Vec<(String, Vec<f64>)>,
    slo: Option<(f64, String)>,
) -> Option<Chart> {
    let mut chart = Chart::new(id, title, "percentile (log scale of 1/(1−p))", y_label)
        .x_scale(XScale::Percentile);
    let mut any = false;
    for (name, mut v) in sets {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            continue;
        }
        any = true;
        v.sort_by(f64::total_cmp);
        let pts = percentile_points(&v);
        let band = pts
            .iter()
            .filter_map(|(p, _, ci)| ci.map(|[a, b]| (*p, a, b)))
            .collect();
        chart = chart
            .line(
                &format!("{name} ({} values)", v.len()),
                pts.iter().map(|(p, x, _)| (*p, *x)).collect(),
            )
            .ci(band);
    }
    if let Some((y, name)) = slo {
        chart = chart.hline(y, &name);
    }
    any.then_some(chart)
}

/// A percentile chart from a CDF's points (value, fraction), for tallies too large to sort.
fn percentile_chart_of_cdf(
    id: &str,
    title: &str,
    y_label: &str,
    cdf: Vec<(f64, f64)>,
    n: usize,
) -> Option<Chart> {
    if cdf.is_empty() {
        return None;
    }
    let pts: Vec<(f64, f64)> = crate::report::svg::PLOT_PERCENTILES
        .iter()
        .filter(|p| n as f64 * (1.0 - *p / 100.0) >= 1.0 - 1e-9 || **p == 50.0)
        .filter_map(|&p| {
            let q = p / 100.0;
            cdf.iter().find(|(_, f)| *f >= q).map(|(x, _)| (p, *x))
        })
        .collect();
    Some(
        Chart::new(id, title, "percentile (log scale of 1/(1−p))", y_label)
            .x_scale(XScale::Percentile)
            .line(&format!("{title} ({n} values)"), pts),
    )
}

/// The page for one run: the verdict banner and headline tiles; the tails (latency by
/// percentile, the SLO drawn); the run over time; then the whole report, with the CDFs and
/// lengths as secondary figures.
pub fn page(
    c: &Contract,
    inputs: &Inputs,
    s: &Summary,
    records: &[Record],
    seconds: &[Second],
) -> String {
    let mut d = crate::report::Doc::default();
    d.h(format!("goodput · {}", s.contract));
    d.raw_html(verdicts(s));
    let p = Page::new(c, inputs, s, records);
    p.tails(&mut d);
    p.over_time(&mut d, seconds);
    p.sessions(&mut d);
    p.tasks(&mut d);
    if let Some(sp) = &s.steady.spans
        && sp.source.as_deref() != Some(crate::analyze::spans::NO_SOURCE)
    {
        d.h("Where the time went");
        super::spans::figures(&mut d, sp);
    }
    // The whole report: every table, every reason.
    let report = super::document(s);
    d.blocks.extend(report.blocks.into_iter().skip(1));
    p.distributions(&mut d);
    p.lengths(&mut d);
    super::format::html::wrap(&format!("goodput · {}", s.contract), &d)
}

type Pick = fn(&crate::analyze::RequestMetrics) -> Option<f64>;
const REQUESTS: &str = "share of requests";

/// What a run's page draws from: its steady requests that succeeded and their metrics.
struct Page<'a> {
    c: &'a Contract,
    inputs: &'a Inputs,
    s: &'a Summary,
    records: &'a [Record],
    steady: Vec<&'a Record>,
    m: Vec<crate::analyze::RequestMetrics>,
    /// Where latencies count from, in words.
    from: String,
    /// TTFO is drawn only when some request reasoned (otherwise it is TTFT).
    reasoned: bool,
    itl: Itl,
}

impl<'a> Page<'a> {
    fn new(c: &'a Contract, inputs: &'a Inputs, s: &'a Summary, records: &'a [Record]) -> Self {
        let steady: Vec<&Record> = records
            .iter()
            .filter(|r| r.phase == Phase::Steady && r.is_ok())
            .collect();
        let m: Vec<_> = steady
            .iter()
            .map(|r| request_metrics(r, c.measurement.latency_origin, c.measurement.output_tokens))
            .collect();
        let mut itl = Itl::default();
        for r in &steady {
            itl.add(r);
        }
        Page {
            c,
            inputs,
            s,
            records,
            reasoned: m.iter().any(|x| x.reasoning_tokens.is_some()),
            from: s.latency_origin.phrase().to_string(),
            steady,
            m,
            itl,
        }
    }

    /// The SLO line for a metric; with classes, the first class whose SLO sets the metric
    /// gives the line, named.
    fn threshold(&self, name: &str) -> Option<(f64, String)> {
        let s = self.s;
        let line = |slo: &crate::analyze::SloResult, who: &str| {
            slo.per_metric.iter().find(|x| x.metric == name).map(|x| {
                (
                    x.threshold_ms,
                    format!("{who}SLO p{} ≤ {} ms", slo.percentile, x.threshold_ms),
                )
            })
        };
        match &s.classes {
            Some(k) => k
                .iter()
                .find_map(|k| line(k.slo.as_ref()?, &format!("{}: ", k.name))),
            None => s.steady.slo.as_ref().and_then(|slo| line(slo, "")),
        }
    }

    /// Each class its own line: a mix's tail is its slowest class's, not a result of any.
    fn sets(&self, title: &str, pick: Pick) -> Vec<(String, Vec<f64>)> {
        let (c, m, steady) = (self.c, &self.m, &self.steady);
        match &c.classes[..] {
            [] => vec![(title.to_owned(), m.iter().filter_map(pick).collect())],
            classes => classes
                .iter()
                .map(|k| {
                    let v = steady
                        .iter()
                        .zip(m)
                        .filter(|(r, _)| r.class.as_deref() == Some(k.name.as_str()))
                        .filter_map(|(_, x)| pick(x))
                        .collect();
                    (k.name.clone(), v)
                })
                .collect(),
        }
    }

    /// Latency, ITL and dispatch lag by percentile, with the SLO's lines.
    fn tails(&self, d: &mut crate::report::Doc) {
        let (c, m, from) = (self.c, &self.m, &self.from[..]);
        d.h("Tails: latency by percentile, steady state");
        let tails: [(&str, &str, Pick, String); 4] = [
            ("TTFT", "ttft", |x| x.ttft_ms(), format!("ms from {from}")),
            (
                "TTFO (first answer token)",
                "ttfo",
                |x| x.ttfo_ms(),
                format!("ms from {from}"),
            ),
            (
                "TPOT",
                "tpot",
                |x| x.tpot_ms(),
                "ms per output token".to_owned(),
            ),
            ("E2E", "e2e", |x| x.e2e_ms(), format!("ms from {from}")),
        ];
        for (title, key, pick, unit) in tails {
            if key == "ttfo" && !self.reasoned {
                continue;
            }
            if let Some(ch) = percentile_chart(
                &format!("pct-{key}"),
                &format!("{title} by percentile"),
                &unit,
                self.sets(title, pick),
                self.threshold(key),
            ) {
                d.figure(ch.render());
            }
        }
        let mut per_chunk = self.itl.per_chunk();
        let n_chunks = per_chunk.len();
        if let Some(ch) = percentile_chart_of_cdf(
            "pct-itl",
            "ITL per chunk by percentile",
            "ms between chunks",
            per_chunk.quantiles(4000),
            n_chunks,
        ) {
            d.figure(
                ch.note("One value per gap between streamed chunks, not per request.")
                    .render(),
            );
        }
        let lag: Vec<f64> = m.iter().filter_map(|x| x.dispatch_lag_ms()).collect();
        if let Some(ch) = percentile_chart(
            "pct-lag",
            "Dispatch lag by percentile (the client's own delay)",
            "ms late against the schedule",
            vec![("dispatch lag".to_owned(), lag)],
            Some((
                c.measurement.max_dispatch_lag_ms.0,
                format!(
                    "p99 allowed ≤ {} ms (measurement.max_dispatch_lag_ms)",
                    c.measurement.max_dispatch_lag_ms.0
                ),
            )),
        ) {
            d.figure(
                ch.note("How late the client sent each request: a client problem shows here, not in the server's latency.")
                    .render(),
            );
        }
    }

    /// Load and TTFT each second, the phases shaded.
    fn over_time(&self, d: &mut crate::report::Doc, seconds: &[Second]) {
        let from = &self.from[..];
        if !seconds.is_empty() {
            d.h("Over time");
            let pts = |f: &dyn Fn(&Second) -> Option<f64>| -> Vec<(f64, f64)> {
                seconds
                    .iter()
                    .filter_map(|x| Some((x.t as f64, f(x)?)))
                    .collect()
            };
            let mut load = Chart::new(
                "timeline-load",
                "Load each second",
                "seconds since the run started",
                "requests",
            )
            .line("started in that second", pts(&|x| Some(x.starts as f64)))
            .line("in flight", pts(&|x| Some(x.in_flight as f64)));
            let mut ttft = Chart::new(
                "timeline-ttft",
                "TTFT of the requests sent each second",
                "seconds since the run started",
                &format!("ms from {from}"),
            )
            .line("TTFT p50", pts(&|x| x.ttft_p50_ms))
            .line("TTFT p99", pts(&|x| x.ttft_p99_ms));
            if let Some(stages) = self.stages() {
                // A load program: its stages are the bands, its offered rate a line, and a
                // recovery's time to recover a mark.
                load = load
                    .line("offered (req/s)", self.offered_each_second(seconds))
                    .line(
                        "completed in that second",
                        pts(&|x| Some(x.completions as f64)),
                    );
                for (name, a, b) in &stages {
                    load = load.band(*a, *b, name);
                    ttft = ttft.band(*a, *b, name);
                }
                for (x, name) in self.recoveries() {
                    ttft = ttft.vline(x, &name);
                }
            } else {
                for (name, a, b) in phase_spans(seconds) {
                    load = load.band(a, b, &name);
                    ttft = ttft.band(a, b, &name);
                }
            }
            if let Some((x, name)) = self.threshold("ttft") {
                ttft = ttft.hline(x, &name);
            }
            d.figure(load.render());
            d.figure(ttft.render());
        }
    }

    /// Where a load program started on the run's clock (its first arrival), seconds.
    fn program_start_s(&self) -> Option<f64> {
        self.records
            .iter()
            .filter(|r| r.stage.is_some())
            .filter_map(|r| r.intended_us)
            .min()
            .map(|t| t as f64 / 1e6)
    }

    /// A load program's stages on the run's clock: (name, from s, to s).
    fn stages(&self) -> Option<Vec<(String, f64, f64)>> {
        let at = self.program_start_s()?;
        let stages = self.s.stages.as_ref()?;
        Some(
            stages
                .iter()
                .map(|k| (k.name.clone(), at + k.from_s, at + k.to_s))
                .collect(),
        )
    }

    /// The rate the program offered in each second (a ramp's at the second's middle).
    fn offered_each_second(&self, seconds: &[Second]) -> Vec<(f64, f64)> {
        let (Some(at), Some(stages)) = (self.program_start_s(), self.s.stages.as_ref()) else {
            return Vec::new();
        };
        seconds
            .iter()
            .filter_map(|x| {
                let t = x.t as f64 + 0.5 - at;
                let k = stages.iter().find(|k| k.from_s <= t && t < k.to_s)?;
                // A written stage's rates; an edge step's as the search chose it.
                let (a, b) = match k.edge_rps {
                    Some(r) => (r, r),
                    None => self.c.load.stage.iter().find(|r| r.name == k.name)?.rates(),
                };
                let f = ((t - k.from_s) / (k.to_s - k.from_s).max(1e-9)).clamp(0.0, 1.0);
                Some((x.t as f64, a + (b - a) * f))
            })
            .collect()
    }

    /// Each recovery stage's recovery, as a mark on the run's clock.
    fn recoveries(&self) -> Vec<(f64, String)> {
        let (Some(at), Some(stages)) = (self.program_start_s(), self.s.stages.as_ref()) else {
            return Vec::new();
        };
        stages
            .iter()
            .filter_map(|k| {
                let r = k.recovery.as_ref()?;
                let t = r.recovered_after_s?;
                Some((
                    at + k.from_s + t,
                    format!("{} recovered ({t:.1} s)", k.name),
                ))
            })
            .collect()
    }

    /// With agent tasks: task latency by percentile against the task SLO, and the median
    /// and p99 tasks' timelines.
    fn tasks(&self, d: &mut crate::report::Doc) {
        let Some(t) = &self.s.steady.tasks else {
            return;
        };
        d.h("Agent tasks");
        let slo = t
            .slo_ms
            .map(|m| (m, format!("task SLO {} ms", super::num(m))));
        if let Some(ch) = percentile_chart(
            "pct-task",
            "Task latency by percentile (intended start to last answer, completed tasks)",
            "ms",
            vec![(
                "task latency".to_owned(),
                crate::analyze::tasks::latencies(&self.steady),
            )],
            slo,
        ) {
            d.figure(ch.render());
        }
        super::tasks::timelines(d, t);
    }

    /// With sessions: TTFT and prompt tokens by turn.
    fn sessions(&self, d: &mut crate::report::Doc) {
        let s = self.s;
        if let Some(ss) = &s.steady.sessions {
            d.h("Sessions");
            let by_turn = |f: &dyn Fn(&crate::analyze::sessions::TurnStats) -> Option<f64>| {
                ss.per_turn
                    .iter()
                    .filter_map(|t| Some((f64::from(t.turn), f(t)?)))
                    .collect::<Vec<_>>()
            };
            let mut ttft = Chart::new(
                "sessions-ttft",
                "Sessions: TTFT by turn (each turn carries the conversation so far)",
                "turn of the session",
                "ms",
            )
            .line("TTFT p50", by_turn(&|t| t.ttft_ms.as_ref().map(|d| d.p50)))
            .line("TTFT p99", by_turn(&|t| t.ttft_ms.as_ref().map(|d| d.p99)));
            if let Some((x, name)) = self.threshold("ttft") {
                ttft = ttft.hline(x, &name);
            }
            d.figure(ttft.render());
            let tokens = Chart::new(
                "sessions-tokens",
                "Sessions: prompt tokens by turn (means)",
                "turn of the session",
                "tokens",
            )
            .line(
                "prompt",
                by_turn(&|t| t.input_tokens.as_ref().map(|d| d.mean)),
            )
            .line(
                "history (reusable)",
                by_turn(&|t| t.reusable_tokens.as_ref().map(|d| d.mean)),
            )
            .line(
                "cached (server)",
                by_turn(&|t| t.cached_tokens.as_ref().map(|d| d.mean)),
            );
            d.figure(tokens.render());
        }
    }

    /// The CDFs of every latency, as secondary figures.
    fn distributions(&self, d: &mut crate::report::Doc) {
        let (m, from, reasoned, itl) = (&self.m, &self.from[..], self.reasoned, &self.itl);
        d.h("Distributions (CDF) and lengths");
        // CDF points, and how many values they are drawn from.
        type Cdf = (Vec<(f64, f64)>, usize);
        let of = |v: Vec<f64>| (cdf(&v, 400), v.len());
        let tallied = |mut t: Tally| (t.quantiles(400), t.len());
        let series: [(&str, &str, Cdf, &str); 6] = [
            (
                "TTFT",
                "ttft",
                of(m.iter().filter_map(|x| x.ttft_ms()).collect()),
                REQUESTS,
            ),
            (
                "TTFO (first answer token)",
                "ttfo",
                of(m.iter()
                    .filter(|_| reasoned)
                    .filter_map(|x| x.ttfo_ms())
                    .collect()),
                REQUESTS,
            ),
            (
                "TPOT",
                "tpot",
                of(m.iter().filter_map(|x| x.tpot_ms()).collect()),
                REQUESTS,
            ),
            (
                "ITL per chunk",
                "itl",
                tallied(itl.per_chunk()),
                "share of chunk gaps",
            ),
            (
                "ITL per token",
                "itl-token",
                tallied(itl.per_token()),
                "share of tokens after the first chunk",
            ),
            (
                "E2E",
                "e2e",
                of(m.iter().filter_map(|x| x.e2e_ms()).collect()),
                REQUESTS,
            ),
        ];
        for (title, key, (points, n), y) in series {
            if n == 0 {
                continue;
            }
            let mut chart = Chart::new(
                &format!("cdf-{key}"),
                &format!("{title} CDF, steady state ({n} values)"),
                // Gaps between tokens have no origin; the latencies count from one.
                &if matches!(key, "tpot" | "itl" | "itl-token") {
                    format!("{title} (ms)")
                } else {
                    format!("{title} (ms from {from})")
                },
                y,
            )
            .line(title, points)
            .y_max(1.0);
            if let Some((x, name)) = self.threshold(key) {
                chart = chart.vline(x, &name);
            }
            d.figure(chart.render());
        }
    }

    /// Input and output lengths: requested, sent and reported by the server.
    fn lengths(&self, d: &mut crate::report::Doc) {
        let (c, inputs, steady) = (self.c, self.inputs, &self.steady);
        let lengths = |planned: Vec<f64>, reported: Vec<f64>, input: bool, what: &str| {
            let requested = crate::plan::requested_lengths(c, inputs, input).unwrap_or_default();
            let mut ch = Chart::new(
                &format!("lengths-{}", what.to_lowercase()),
                &format!("{what} length: requested, sent, and reported by the server"),
                "tokens",
                "share of requests",
            );
            if !requested.is_empty() {
                let r: Vec<f64> = requested.into_iter().map(f64::from).collect();
                ch = ch.line("requested", cdf(&r, 200));
            }
            ch = ch.line("sent", cdf(&planned, 200)).y_max(1.0);
            if !reported.is_empty() {
                ch = ch.line("reported (usage)", cdf(&reported, 200));
            }
            ch.render()
        };
        // A session's later turns carry its history: its prompts are compared on first turns.
        let firsts: Vec<&&Record> = steady.iter().filter(|r| r.is_first_turn()).collect();
        for (input, what) in [(true, "Input"), (false, "Output")] {
            let of = if input {
                &firsts[..]
            } else {
                &steady.iter().collect::<Vec<_>>()[..]
            };
            d.figure(lengths(
                of.iter()
                    .map(|r| f64::from(r.planned_tokens(input)))
                    .collect(),
                of.iter()
                    .filter_map(|r| r.reported_tokens(input).map(f64::from))
                    .collect(),
                input,
                what,
            ));
        }
    }
}

/// Spans of seconds by the phase of the requests sent in them: a second with no send (a lull
/// in a slow run) does not end its phase's span, so each phase is one span unless another
/// phase came between.
fn phase_spans(seconds: &[Second]) -> Vec<(String, f64, f64)> {
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    for s in seconds {
        let Some(p) = s.phases.first() else { continue };
        match out.last_mut() {
            Some((name, _, end)) if name == p => *end = s.t as f64 + 1.0,
            _ => out.push((p.clone(), s.t as f64, s.t as f64 + 1.0)),
        }
    }
    out
}
