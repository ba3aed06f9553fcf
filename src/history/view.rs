//! The history as people and other programs read it: the document (terminal, Markdown), the
//! page (each judged metric over time, change points marked), a CSV of the points and the
//! newest point in Bencher Metric Format.

use std::path::Path;

use serde::Serialize;

use super::{Change, MEASURES, Measure, Newest, Series, Thresholds, measure};
use crate::report::{Doc, num};

/// `history show` (and `add`, `html`, `export`): the store's series, analysed.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub store: String,
    pub thresholds: Thresholds,
    /// `--metric`: the one metric shown and judged.
    pub metric: Option<String>,
    pub series: Vec<Series>,
    /// What `add` did, a line per bundle (empty for `show`).
    pub added: Vec<String>,
}

/// A change in its metric's words: `+16.4%` (`+3.2 points` for a share).
fn shift(m: &Measure, v: f64) -> String {
    if m.share {
        format!("{:+.1} points", v * 100.0)
    } else {
        format!("{:+.1}%", v * 100.0)
    }
}

fn value(m: &Measure, v: f64) -> String {
    if m.share {
        format!("{:.1}%", v * 100.0)
    } else {
        format!("{} {}", num(v), m.unit)
    }
}

/// What changed, in a line: `target.simulator.decode_base_ms 12 → 14; …` (or that nothing
/// the run knew of did).
pub fn changed_words(c: &[(String, String, String)]) -> String {
    if c.is_empty() {
        return "nothing the runs recorded (the target's settings and facts, goodput's version)"
            .into();
    }
    c.iter()
        .map(|(k, a, b)| format!("{k} {a} → {b}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn m_of(key: &str) -> &'static Measure {
    measure(key).unwrap_or(&MEASURES[0])
}

/// A change point, in a line.
pub fn change_line(c: &Change) -> String {
    let m = m_of(&c.metric);
    format!(
        "point {}: {} {} → {} ({}{}, p = {:.4}){}, {}; last good point {}; changed there: {}",
        c.point,
        c.label,
        value(m, c.before),
        value(m, c.after),
        shift(m, c.shift),
        c.ci.map(|[lo, hi]| format!(" [{}, {}]", shift(m, lo), shift(m, hi)))
            .unwrap_or_default(),
        c.p,
        if c.own_point != c.point {
            format!(" (on its own, at point {})", c.own_point)
        } else {
            String::new()
        },
        if c.worse { "worse" } else { "better" },
        c.last_good,
        changed_words(&c.changed)
    )
}

/// The newest point's judgement, in a sentence; `true` when a change for the worse starts
/// there.
pub fn newest_line(s: &Series) -> (String, bool) {
    let n: &Newest = &s.newest;
    if let Some(why) = &n.not_judged {
        return (
            format!("Newest point {}: not judged: {why}.", n.point),
            false,
        );
    }
    let bad = n.regressions();
    if bad.is_empty() {
        let beyond: Vec<&str> = n
            .judged
            .iter()
            .filter(|j| j.beyond)
            .map(|j| j.label.as_str())
            .collect();
        return (
            format!(
                "Newest point {}: no change for the worse starts here ({} metrics judged against the points since their last change, each at α = {:.2e}, thresholds {}){}.",
                n.point,
                n.judged.len(),
                s.alpha,
                thresholds_words(n),
                if beyond.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; but still worse beyond the bound on {}, continuing the change for the worse that started at point {} (not yet confirmed by a change point: that needs more points after it)",
                        beyond.join(", "),
                        started(s).map_or("?".into(), |p| p.to_string())
                    )
                }
            ),
            false,
        );
    }
    let what: Vec<String> = bad
        .iter()
        .map(|j| {
            let m = m_of(&j.metric);
            format!(
                "{} {} ({} for the worse against the mean {} of {} points; threshold {}{})",
                j.label,
                value(m, j.value),
                shift(m, j.worse_by).trim_start_matches('+'),
                value(m, j.baseline_mean),
                j.baseline,
                shift(m, j.threshold).trim_start_matches('+'),
                j.bound
                    .map(|b| format!(", bound {}", value(m, b)))
                    .unwrap_or_default()
            )
        })
        .collect();
    (
        format!(
            "REGRESSION at the newest point {}: {}; last good point {}; changed since: {}.",
            n.point,
            what.join("; "),
            n.last_good.map_or("none".into(), |g| g.to_string()),
            changed_words(&n.changed)
        ),
        true,
    )
}

/// The last point (1-based) at which a change for the worse started.
fn started(s: &Series) -> Option<usize> {
    s.beyond
        .iter()
        .rposition(|b| b.iter().any(|(_, starts)| *starts))
        .map(|i| i + 1)
}

/// The newest point continues a change for the worse not yet confirmed by a change point.
pub fn continuing(s: &Series) -> bool {
    s.newest.regressions().is_empty() && s.newest.judged.iter().any(|j| j.beyond)
}

fn thresholds_words(n: &Newest) -> String {
    let mut t: Vec<String> = n
        .judged
        .iter()
        .map(|j| {
            shift(m_of(&j.metric), j.threshold)
                .trim_start_matches('+')
                .to_owned()
        })
        .collect();
    t.dedup();
    t.join(", ")
}

/// The columns a series' table shows: the one `--metric`, else the headline latencies and
/// goodput (throughput without an SLO).
fn columns(s: &Series, metric: Option<&str>) -> Vec<&'static Measure> {
    if let Some(m) = metric.and_then(measure) {
        return vec![m];
    }
    let has = |k: &str| s.points.iter().any(|p| p.figures.contains_key(k));
    let mut cols: Vec<&'static Measure> = ["ttft_p50_ms", "tpot_p50_ms", "e2e_p50_ms"]
        .iter()
        .filter_map(|k| measure(k))
        .collect();
    cols.push(
        measure(if has("goodput_rps") {
            "goodput_rps"
        } else {
            "output_tokens_per_s"
        })
        .unwrap_or(&MEASURES[0]),
    );
    cols
}

/// The point's standing, what it was worse on when judged in turn, and whether its bundle is
/// still where the store says.
fn standing(p: &super::Point, beyond: &[(String, bool)]) -> String {
    let mut s = p.standing().to_owned();
    if !beyond.is_empty() {
        let names: Vec<&str> = beyond.iter().map(|(l, _)| l.as_str()).collect();
        s += &format!(
            " · worse: {}{}",
            names.join(", "),
            if beyond.iter().any(|(_, st)| *st) {
                " (starts here)"
            } else {
                ""
            }
        );
    }
    if !Path::new(&p.bundle).join(crate::bundle::REQUESTS).is_file() {
        s += " · bundle not found where it was added";
    }
    s
}

impl History {
    /// `--fail-on regression`: the series whose newest point starts a change for the worse.
    pub fn regressions(&self) -> Vec<String> {
        self.series
            .iter()
            .filter_map(|s| {
                let (line, bad) = newest_line(s);
                bad.then(|| format!("series {} ({}): {line}", s.key, s.name))
            })
            .collect()
    }

    /// `--fail-on regression` that can never judge: the series whose newest point is
    /// directional (VALID, but its contract or facts are incomplete), with what makes it so.
    /// Each such point is shown and never used to decide, so a gate over them would pass
    /// forever; an INVALID point is a measurement's failure, not the series', and is left to
    /// `--fail-on invalid`.
    pub fn unjudgeable(&self) -> Vec<String> {
        self.series
            .iter()
            .filter_map(|s| {
                let p = s.points.last()?;
                (p.valid && !p.comparable).then(|| {
                    format!(
                        "series {} ({}): the newest point is directional, so no point like it is ever judged: {}",
                        s.key,
                        s.name,
                        p.missing.join("; ")
                    )
                })
            })
            .collect()
    }

    pub fn document(&self) -> Doc {
        let mut d = Doc::default();
        d.h(format!("goodput history · {}", self.store));
        for a in &self.added {
            d.line(a.clone());
        }
        if self.series.is_empty() {
            d.line("No points yet.");
        }
        for s in &self.series {
            series_document(&mut d, s, self.metric.as_deref());
        }
        d
    }

    /// The page: per series, its judgement and each judged metric over time with its change
    /// points, then the document.
    pub fn page(&self) -> String {
        use crate::report::html::banner_toned;
        let mut d = Doc::default();
        d.h(format!("goodput history · {}", self.store));
        let bad = self.regressions();
        let judged = self
            .series
            .iter()
            .filter(|s| s.newest.not_judged.is_none())
            .count();
        let (first, pass) = if !bad.is_empty() {
            (
                format!("{} series with a regression at its newest point", bad.len()),
                Some(false),
            )
        } else if let Some(s) = self.series.iter().find(|s| continuing(s)) {
            (
                format!(
                    "Series {}: a change for the worse continues, not yet confirmed",
                    s.key
                ),
                None,
            )
        } else if judged == 0 {
            (
                "No newest point judged: each is INVALID, directional or its series' first"
                    .to_owned(),
                None,
            )
        } else {
            (
                format!("{judged} series judged at its newest point, no regression"),
                Some(true),
            )
        };
        let mut lines = vec![first];
        lines.extend(self.series.iter().map(|s| newest_line(s).0));
        d.raw_html(banner_toned(&lines, pass, &[]));
        for (k, s) in self.series.iter().enumerate() {
            d.h(format!("Series {} · {} · {}", s.key, s.name, s.load));
            for key in charted(s, self.metric.as_deref()) {
                d.figure(chart(s, k, m_of(&key)));
            }
        }
        let doc = self.document();
        d.blocks.extend(doc.blocks.into_iter().skip(1));
        crate::report::format::html::wrap(&format!("goodput history · {}", self.store), &d)
    }

    /// Every point as a row: series, number, when, standing, bundle, every metric, and what
    /// changed from the point before.
    pub fn csv(&self) -> anyhow::Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut head = vec![
            "series",
            "name",
            "point",
            "started_utc",
            "standing",
            "bundle",
            "store_id",
        ];
        head.extend(MEASURES.iter().map(|m| m.key));
        head.push("changed");
        w.write_record(&head)?;
        for s in &self.series {
            for (i, p) in s.points.iter().enumerate() {
                let mut row = vec![
                    s.key.clone(),
                    s.name.clone(),
                    (i + 1).to_string(),
                    p.started_utc.clone(),
                    p.standing().to_owned(),
                    p.bundle.clone(),
                    p.id.to_string(),
                ];
                row.extend(MEASURES.iter().map(|m| {
                    p.figures
                        .get(m.key)
                        .map_or(String::new(), |f| f.value.to_string())
                }));
                row.push(
                    s.steps[i]
                        .iter()
                        .map(|(k, a, b)| format!("{k} {a} → {b}"))
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                w.write_record(&row)?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// The newest point of each series in Bencher Metric Format: one benchmark per series
    /// (`NAME/SERIES`), one measure per metric (its key in kebab case), with the run's own
    /// interval where it has one. A directional or INVALID point is exported with
    /// `-bencher-ignore` on its name, so Bencher keeps it but does not alert on it.
    pub fn bmf(&self) -> String {
        let mut out = serde_json::Map::new();
        for s in &self.series {
            let Some(p) = s.points.last() else { continue };
            let mut measures = serde_json::Map::new();
            for m in MEASURES {
                let Some(f) = p.figures.get(m.key) else {
                    continue;
                };
                let mut v = serde_json::json!({ "value": f.value });
                if let Some([lo, hi]) = f.ci95 {
                    v["lower_value"] = lo.into();
                    v["upper_value"] = hi.into();
                }
                measures.insert(m.key.replace('_', "-"), v);
            }
            let name = format!(
                "{}/{}{}",
                s.name,
                s.key,
                if p.decisive() { "" } else { "-bencher-ignore" }
            );
            out.insert(name, serde_json::Value::Object(measures));
        }
        crate::report::format::json::render(&serde_json::Value::Object(out))
    }
}

/// The metrics a series' page draws: those with a change point, then the table's columns.
fn charted(s: &Series, metric: Option<&str>) -> Vec<String> {
    let mut keys: Vec<String> = s.changes.iter().map(|c| c.metric.clone()).collect();
    keys.extend(columns(s, metric).iter().map(|m| m.key.to_owned()));
    let mut seen = std::collections::BTreeSet::new();
    keys.retain(|k| seen.insert(k.clone()) && metric.is_none_or(|m| m_of(m).key == k));
    keys
}

/// One metric over the series' points: the decisive points joined, the others apart and
/// named, each change point a vertical line with its shift and what changed there.
fn chart(s: &Series, k: usize, m: &Measure) -> String {
    use crate::report::svg::Chart;
    let scale = if m.share { 100.0 } else { 1.0 };
    let unit = if m.share { "%" } else { m.unit };
    let at = |decisive: bool| -> Vec<(f64, f64, String)> {
        s.points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.decisive() == decisive)
            .filter_map(|(i, p)| {
                Some((
                    (i + 1) as f64,
                    p.figures.get(m.key)?.value * scale,
                    p.standing().to_owned(),
                ))
            })
            .collect()
    };
    let mut c = Chart::new(
        &format!("history-{k}-{}", m.key),
        &format!("{} over the series' points", m.label),
        "point",
        unit,
    )
    .x_tight()
    .line(
        "VALID and comparable (decide)",
        at(true).into_iter().map(|(x, y, _)| (x, y)).collect(),
    );
    let others = at(false);
    if !others.is_empty() {
        c = c.scatter("INVALID or directional (shown, not used)", others);
    }
    for ch in s.changes.iter().filter(|c| c.metric == m.key) {
        let what = ch
            .changed
            .first()
            .map(|(k, a, b)| format!(" · {} {a} → {b}", k.rsplit('.').next().unwrap_or(k)))
            .unwrap_or_default();
        c = c.vline(
            ch.point as f64 - 0.5,
            &format!("{}{what}", shift(m, ch.shift)),
        );
    }
    c.render()
}

fn series_document(d: &mut Doc, s: &Series, metric: Option<&str>) {
    let decisive = s.points.iter().filter(|p| p.decisive()).count();
    d.h(format!(
        "Series {} · {} · {} · {} points ({} VALID and comparable)",
        s.key,
        s.name,
        s.load,
        s.points.len(),
        decisive
    ));
    let (line, bad) = newest_line(s);
    if bad {
        d.warn(line);
    } else {
        d.line(line);
    }
    let changes: Vec<&Change> = s
        .changes
        .iter()
        .filter(|c| metric.is_none_or(|m| m_of(m).key == c.metric))
        .collect();
    if changes.is_empty() {
        d.line(format!(
            "Change points: none (E-divisive means with a permutation test, each metric at α = {:.2e}: {} judged; INVALID and directional points are not used).",
            s.alpha,
            s.judged.len()
        ));
    } else {
        d.line(format!(
            "Change points (E-divisive means with a permutation test, each metric at α = {:.2e}; shifts with their {:.0}% interval):",
            s.alpha,
            s.confidence * 100.0
        ));
        for c in changes {
            let line = format!("- {}", change_line(c));
            if c.worse {
                d.warn(line);
            } else {
                d.line(line);
            }
        }
    }
    let cols = columns(s, metric);
    let mut head = vec!["#", "started (UTC)", "standing"];
    head.extend(cols.iter().map(|m| m.label));
    head.push("changed from the point before");
    let rows = s
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row = vec![
                (i + 1).to_string(),
                p.started_utc.chars().take(19).collect(),
                standing(p, &s.beyond[i]),
            ];
            row.extend(cols.iter().map(|m| {
                p.figures
                    .get(m.key)
                    .map_or("—".into(), |f| value(m, f.value))
            }));
            row.push(if i == 0 {
                String::new()
            } else {
                s.steps[i]
                    .iter()
                    .map(|(k, a, b)| format!("{k} {a} → {b}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            row
        })
        .collect();
    d.table(&head, rows);
}
