//! A small chart builder that writes SVG: linear or percentile (log 1/(1−p)) x axes with
//! rounded ticks, line series with optional confidence bands, threshold lines (vertical or
//! horizontal) and shaded bands. Hand-written rather than plotters because plotters lays out
//! text with a font backend (a font file to ship, or system fontconfig to require); a browser
//! lays out SVG `<text>` itself. Every element is placed through the one `Scale` pair, so
//! nothing is hand-positioned elsewhere.
//!
//! Text never sits on the data: the title and the legend (series, thresholds, bands) are HTML
//! around the `<svg>` (they wrap on a narrow screen), and band labels go in a strip above the
//! plot, on a second row when two would touch, dropped to the legend when they would still.

use std::fmt::Write;

const W: f64 = 480.0;
const H: f64 = 270.0;
const RIGHT: f64 = 14.0;
/// Room above the plot for two rows of band labels.
const TOP: f64 = 36.0;
const BOTTOM: f64 = 40.0;
/// Width of one character of an 11 px label, for keeping labels apart (generous: DejaVu Sans,
/// Linux's usual face, averages about 0.65 em).
const CHAR_W: f64 = 7.6;

/// Colours of successive series (colour-blind-safe, Okabe–Ito).
pub const PALETTE: [&str; 6] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
];

#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        let span = (self.hi - self.lo).max(f64::MIN_POSITIVE);
        self.from + (v - self.lo) / span * (self.to - self.from)
    }
}

/// "Nice" tick values covering `[lo, hi]` (1, 2 or 5 × a power of ten apart).
pub fn ticks(lo: f64, hi: f64, want: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    // From the last round value at or below `lo` to the first at or above `hi`, so the axis
    // covers every point.
    let mut t = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let mut out = Vec::new();
    while t <= end + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn label(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Escapes text for HTML and SVG (text and attribute values).
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum XScale {
    #[default]
    Linear,
    /// x is a percentile (0–100) placed at log10(1 / (1 − p/100)): p50, p90, p99, p99.9 and
    /// p99.99 evenly apart, so the tail gets the room the median gets (HdrHistogram's plot).
    Percentile,
}

/// Where a percentile sits on a [`XScale::Percentile`] axis.
pub fn percentile_x(p: f64) -> f64 {
    (1.0 / (1.0 - (p / 100.0).min(0.999_999))).log10()
}

/// A confidence band: (x, low, high) points.
type Band = Vec<(f64, f64, f64)>;
/// Points to ring, and what they are.
type Marks = (Vec<(f64, f64)>, String);

/// A chart under construction.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    id: String,
    title: String,
    x_label: String,
    y_label: String,
    x_scale: XScale,
    series: Vec<(String, Vec<(f64, f64)>)>,
    /// Per series (by index): a confidence band, (x, low, high).
    bands_ci: Vec<(usize, Band)>,
    vlines: Vec<(f64, String)>,
    hlines: Vec<(f64, String)>,
    bands: Vec<(f64, f64, String)>,
    y_max: Option<f64>,
    /// Points to mark on a series (by index): drawn as rings, named in the legend.
    marks: Vec<(usize, Marks)>,
    /// Series (by index) drawn as labelled points without a line: one label per point.
    scatter: Vec<(usize, Vec<String>)>,
    /// The x axis spans the data only, not from 0 (a frontier's points sit far from it).
    x_tight: bool,
    note: Option<String>,
}

impl Chart {
    /// `id` becomes the `<svg>` element's id (so a page's figures can be found and checked).
    pub fn new(id: &str, title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Chart::default()
        }
    }

    /// The x axis spans the data (with a margin) instead of starting at 0.
    pub fn x_tight(mut self) -> Chart {
        self.x_tight = true;
        self
    }

    pub fn x_scale(mut self, x: XScale) -> Chart {
        self.x_scale = x;
        self
    }

    pub fn line(mut self, name: &str, points: Vec<(f64, f64)>) -> Chart {
        self.series.push((name.into(), points));
        self
    }

    /// Points not joined by a line (a sweep's runs, whose order means nothing on these axes),
    /// each labelled beside it.
    pub fn scatter(mut self, name: &str, points: Vec<(f64, f64, String)>) -> Chart {
        let labels = points.iter().map(|p| p.2.clone()).collect();
        self.series.push((
            name.into(),
            points.into_iter().map(|p| (p.0, p.1)).collect(),
        ));
        self.scatter.push((self.series.len() - 1, labels));
        self
    }

    /// A 95% confidence band around the last series added: (x, low, high).
    pub fn ci(mut self, band: Vec<(f64, f64, f64)>) -> Chart {
        if let Some(i) = self.series.len().checked_sub(1) {
            self.bands_ci.push((i, band));
        }
        self
    }

    /// Points of the last series added to ring, named in the legend (client-limited runs).
    pub fn mark(mut self, points: Vec<(f64, f64)>, name: &str) -> Chart {
        if let Some(i) = self.series.len().checked_sub(1)
            && !points.is_empty()
        {
            self.marks.push((i, (points, name.into())));
        }
        self
    }

    /// A vertical marker (an SLO threshold, a capacity).
    pub fn vline(mut self, x: f64, name: &str) -> Chart {
        self.vlines.push((x, name.into()));
        self
    }

    /// A horizontal marker (an SLO threshold on a latency axis).
    pub fn hline(mut self, y: f64, name: &str) -> Chart {
        self.hlines.push((y, name.into()));
        self
    }

    /// A shaded span of x (a phase, a hidden overload).
    pub fn band(mut self, x0: f64, x1: f64, name: &str) -> Chart {
        self.bands.push((x0, x1, name.into()));
        self
    }

    /// Fixes the top of the y axis (e.g. 1 for a CDF).
    pub fn y_max(mut self, y: f64) -> Chart {
        self.y_max = Some(y);
        self
    }

    /// A sentence under the figure (what it shows, in words).
    pub fn note(mut self, text: &str) -> Chart {
        self.note = Some(text.into());
        self
    }

    fn x_of(&self, x: f64) -> f64 {
        match self.x_scale {
            XScale::Linear => x,
            XScale::Percentile => percentile_x(x),
        }
    }

    /// The figure: its title, the `<svg>`, and its legend, as HTML.
    pub fn render(&self) -> String {
        let frame = self.frame();
        let Frame { sx, left, .. } = &frame;
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" id="{}" viewBox="0 0 {W} {H}" class="chart" role="img" aria-label="{}"><title>{}</title>"#,
            esc(&self.id),
            esc(&self.title),
            esc(&self.title)
        );
        let legend_bands = self.draw_bands(&mut o, sx, *left);
        self.draw_axes(&mut o, &frame);
        self.draw_data(&mut o, &frame);
        o.push_str("</svg>");
        let legend = self.legend(legend_bands);
        let note = self.note.as_ref().map_or(String::new(), |n| {
            format!(r#"<p class="note">{}</p>"#, esc(n))
        });
        format!(
            r#"<div class="ftitle">{}</div>{o}<div class="keys">{legend}</div>{note}"#,
            esc(&self.title)
        )
    }

    /// The plot's scales and ticks, from every value drawn.
    fn frame(&self) -> Frame {
        let xs = self
            .series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.0))
            .chain(self.vlines.iter().map(|v| v.0))
            .chain(self.bands.iter().flat_map(|b| [b.0, b.1]))
            .filter(|x| x.is_finite())
            .map(|x| self.x_of(x));
        let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        let y_top = self.y_max.unwrap_or_else(|| {
            self.series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.1))
                .chain(self.hlines.iter().map(|h| h.0))
                .chain(
                    self.bands_ci
                        .iter()
                        .flat_map(|(_, b)| b.iter().map(|q| q.2)),
                )
                .filter(|y| y.is_finite())
                .fold(0.0, f64::max)
        });
        let yt = ticks(0.0, if y_top > 0.0 { y_top } else { 1.0 }, 5);
        // Room on the left for the widest y tick label and, beyond it, the axis name.
        let widest = yt.iter().map(|t| label(*t).len()).max().unwrap_or(1) as f64;
        let left = 30.0 + widest * CHAR_W;
        let xt = self.x_ticks(x_lo, x_hi);
        let sx = Scale {
            lo: xt.first().map_or(0.0, |t| t.0),
            hi: xt.last().map_or(1.0, |t| t.0),
            from: left,
            to: W - RIGHT,
        };
        let sy = Scale {
            lo: 0.0,
            hi: *yt.last().unwrap_or(&1.0),
            from: H - BOTTOM,
            to: TOP,
        };
        Frame {
            sx,
            sy,
            left,
            yt,
            xt,
        }
    }

    /// x ticks over `[x_lo, x_hi]`: round values on a linear axis; the named percentiles on a
    /// percentile one.
    fn x_ticks(&self, x_lo: f64, x_hi: f64) -> Vec<(f64, String)> {
        match self.x_scale {
            XScale::Linear => {
                let (lo, hi) = if x_lo.is_finite() && self.x_tight {
                    let pad = 0.1 * (x_hi - x_lo).max(0.05 * x_hi.abs()).max(1e-9);
                    ((x_lo - pad).max(x_lo.min(0.0)), x_hi + pad)
                } else if x_lo.is_finite() {
                    (x_lo.min(0.0), x_hi)
                } else {
                    (0.0, 1.0)
                };
                ticks(lo, if hi > lo { hi } else { lo + 1.0 }, 6)
                    .into_iter()
                    .map(|t| (t, label(t)))
                    .collect()
            }
            XScale::Percentile => {
                // Up to the first named percentile at or beyond the data, so every point is on
                // the axis.
                let top = if x_hi.is_finite() { x_hi } else { 2.0 };
                let mut v = Vec::new();
                for p in [50.0, 90.0, 99.0, 99.9, 99.99, 99.999] {
                    let x = percentile_x(p);
                    v.push((x, format!("p{p}")));
                    if x >= top - 1e-9 && p >= 99.0 {
                        break;
                    }
                }
                v
            }
        }
    }

    /// The shaded bands, and their labels in the strip above the plot (a second row when two
    /// would touch); the bands whose label fits neither row, for the legend.
    fn draw_bands(&self, o: &mut String, sx: &Scale, left: f64) -> Vec<(usize, String)> {
        // Band labels: in the strip above the plot, a second row when two would touch; a
        // label that fits neither row is named in the legend only.
        // One colour, one label and at most one legend entry per band name (a phase drawn as
        // several spans is still one phase): the label sits over the name's widest span.
        let mut rows_end = [f64::NEG_INFINITY; 2];
        let mut legend_bands: Vec<(usize, String)> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for (_, _, name) in &self.bands {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let colour = |name: &str| names.iter().position(|n| *n == name).unwrap_or(0) % 3;
        for (a, b, name) in &self.bands {
            let (xa, xb) = (sx.at(self.x_of(*a)), sx.at(self.x_of(*b)));
            let _ = write!(
                o,
                r#"<rect class="band b{}" x="{xa:.1}" y="{TOP}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
                colour(name),
                (xb - xa).max(0.5),
                H - BOTTOM - TOP,
                esc(name),
            );
        }
        for name in &names {
            let Some((a, b)) = self
                .bands
                .iter()
                .filter(|(_, _, n)| n == name)
                .map(|(a, b, _)| (sx.at(self.x_of(*a)), sx.at(self.x_of(*b))))
                .max_by(|p, q| (p.1 - p.0).total_cmp(&(q.1 - q.0)))
            else {
                continue;
            };
            let w = name.chars().count() as f64 * CHAR_W;
            // Centred over the span when it fits, else from its start, kept inside the plot.
            let x = if b - a >= w { a + (b - a - w) / 2.0 } else { a }
                .max(left)
                .min(W - RIGHT - w);
            match rows_end.iter().position(|end| x >= end + 6.0) {
                Some(row) => {
                    rows_end[row] = x + w;
                    let _ = write!(
                        o,
                        r#"<text class="bandlabel label" x="{x:.1}" y="{:.1}">{}</text>"#,
                        12.0 + 16.0 * row as f64,
                        esc(name)
                    );
                }
                None => legend_bands.push((colour(name), (*name).to_owned())),
            }
        }
        legend_bands
    }

    /// The grid, ticks, axes and axis names.
    fn draw_axes(&self, o: &mut String, f: &Frame) {
        let Frame {
            sx,
            sy,
            left,
            yt,
            xt,
        } = f;
        let left = *left;
        for t in yt {
            let y = sy.at(*t);
            let _ = write!(
                o,
                r#"<line class="grid" x1="{left:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                W - RIGHT,
                left - 6.0,
                y + 4.0,
                label(*t)
            );
        }
        for (k, (t, name)) in xt.iter().enumerate() {
            let x = sx.at(*t);
            // The first label starts at the axis, clear of the y axis's lowest label; the last
            // ends at it, inside the figure.
            let (lx, anchor) = match k {
                0 => (x + 2.0, "start"),
                k if k + 1 == xt.len() => (x, "end"),
                _ => (x, "middle"),
            };
            let _ = write!(
                o,
                r#"<line class="tickmark" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick label" x="{lx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                H - BOTTOM,
                H - BOTTOM + 4.0,
                H - BOTTOM + 17.0,
                esc(name)
            );
        }
        let _ = write!(
            o,
            r#"<line class="axis" x1="{left:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/><line class="axis" x1="{left:.1}" x2="{left:.1}" y1="{TOP}" y2="{:.1}"/>"#,
            W - RIGHT,
            H - BOTTOM,
            H - BOTTOM,
            H - BOTTOM
        );
        let _ = write!(
            o,
            r#"<text class="axislabel label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="axislabel label" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (left + W - RIGHT) / 2.0,
            H - 6.0,
            esc(&self.x_label),
            (TOP + H - BOTTOM) / 2.0,
            esc(&self.y_label)
        );
    }

    /// The confidence bands, series, marks and threshold lines.
    fn draw_data(&self, o: &mut String, f: &Frame) {
        let Frame { sx, sy, left, .. } = f;
        let left = *left;
        let clamp_y = |y: f64| sy.at(y.min(sy.hi));
        for (i, band) in &self.bands_ci {
            let colour = PALETTE[i % PALETTE.len()];
            let pts: Vec<&(f64, f64, f64)> = band
                .iter()
                .filter(|(x, lo, hi)| x.is_finite() && lo.is_finite() && hi.is_finite())
                .collect();
            if pts.len() < 2 {
                continue;
            }
            let upper = pts
                .iter()
                .map(|(x, _, hi)| format!("{:.1},{:.1}", sx.at(self.x_of(*x)), clamp_y(*hi)));
            let lower = pts
                .iter()
                .rev()
                .map(|(x, lo, _)| format!("{:.1},{:.1}", sx.at(self.x_of(*x)), clamp_y(*lo)));
            let _ = write!(
                o,
                r#"<polygon class="ci" fill="{colour}" points="{}"><title>95% confidence interval</title></polygon>"#,
                upper.chain(lower).collect::<Vec<_>>().join(" ")
            );
        }
        self.draw_series(o, f);
        for (i, (pts, name)) in &self.marks {
            let colour = PALETTE[i % PALETTE.len()];
            for (x, y) in pts {
                let _ = write!(
                    o,
                    r#"<circle class="mark" cx="{:.1}" cy="{:.1}" r="6" fill="none" stroke="{colour}"><title>{}</title></circle>"#,
                    sx.at(self.x_of(*x)),
                    clamp_y(*y),
                    esc(name)
                );
            }
        }
        for (x, name) in &self.vlines {
            let px = sx.at(self.x_of(*x));
            let _ = write!(
                o,
                r#"<line class="threshold" x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{:.1}"><title>{}</title></line>"#,
                H - BOTTOM,
                esc(name),
            );
        }
        for (y, name) in &self.hlines {
            let py = clamp_y(*y);
            let _ = write!(
                o,
                r#"<line class="threshold" x1="{left:.1}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}"><title>{}</title></line>"#,
                W - RIGHT,
                esc(name),
            );
        }
    }

    /// Each series: a line (its points dotted when few), or labelled points for a scatter.
    fn draw_series(&self, o: &mut String, f: &Frame) {
        let Frame { sx, sy, .. } = f;
        let clamp_y = |y: f64| sy.at(y.min(sy.hi));
        for (i, (name, pts)) in self.series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            if let Some((_, labels)) = self.scatter.iter().find(|s| s.0 == i) {
                // A label that would cover one already placed is left to the point's tooltip.
                let mut placed: Vec<(f64, f64, f64)> = Vec::new();
                for ((x, y), l) in pts.iter().zip(labels) {
                    if !(x.is_finite() && y.is_finite()) {
                        continue;
                    }
                    let (px, py) = (sx.at(self.x_of(*x)), clamp_y(*y));
                    let _ = write!(
                        o,
                        r#"<circle class="dot point" cx="{px:.1}" cy="{py:.1}" r="3.6" fill="{colour}"><title>{}: {}</title></circle>"#,
                        esc(name),
                        esc(l),
                    );
                    let (lx, ly, w) = (px + 6.0, py - 6.0, l.chars().count() as f64 * 6.0);
                    let clear = placed.iter().all(|&(ax, ay, aw)| {
                        lx + w < ax - 2.0 || ax + aw < lx - 2.0 || (ly - ay).abs() > 12.0
                    });
                    if clear && lx + w <= W - 4.0 {
                        placed.push((lx, ly, w));
                        let _ = write!(
                            o,
                            r#"<text class="point-label" x="{lx:.1}" y="{ly:.1}">{}</text>"#,
                            esc(l)
                        );
                    }
                }
                continue;
            }
            let d: Vec<String> = pts
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| format!("{:.1},{:.1}", sx.at(self.x_of(*x)), clamp_y(*y)))
                .collect();
            let _ = write!(
                o,
                r#"<polyline class="series" fill="none" stroke="{colour}" points="{}"><title>{}</title></polyline>"#,
                d.join(" "),
                esc(name)
            );
            // A series of few points shows them, so a reader can tell measured from drawn.
            if d.len() <= 24 {
                for p in &d {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(
                        o,
                        r#"<circle class="dot" cx="{x}" cy="{y}" r="2.6" fill="{colour}"/>"#
                    );
                }
            }
        }
    }

    /// The legend, in HTML under the plot: it wraps, and never covers a curve.
    fn legend(&self, legend_bands: Vec<(usize, String)>) -> String {
        let mut legend = String::new();
        for (i, (name, _)) in self.series.iter().enumerate() {
            let ci = if self.bands_ci.iter().any(|(k, _)| *k == i) {
                " (band: 95% CI)"
            } else {
                ""
            };
            let _ = write!(
                legend,
                r#"<span class="key"><i class="sw" style="background:{}"></i>{}{ci}</span>"#,
                PALETTE[i % PALETTE.len()],
                esc(name)
            );
        }
        for (_, (_, name)) in &self.marks {
            let _ = write!(
                legend,
                r#"<span class="key"><i class="sw ring"></i>{}</span>"#,
                esc(name)
            );
        }
        for (_, name) in self.vlines.iter().chain(&self.hlines) {
            let _ = write!(
                legend,
                r#"<span class="key"><i class="sw dash"></i>{}</span>"#,
                esc(name)
            );
        }
        for (colour, name) in legend_bands {
            let _ = write!(
                legend,
                r#"<span class="key"><i class="sw b{colour}"></i>{}</span>"#,
                esc(&name)
            );
        }
        legend
    }
}

/// Where a chart's values land: its scales, the plot's left edge and the ticks.
struct Frame {
    sx: Scale,
    sy: Scale,
    left: f64,
    yt: Vec<f64>,
    xt: Vec<(f64, String)>,
}

/// Percentiles a percentile plot draws, as far as `n` values support them (the p-th needs at
/// least one value beyond it: n × (1 − p) ≥ 1).
pub const PLOT_PERCENTILES: [f64; 22] = [
    50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 99.3, 99.5,
    99.7, 99.8, 99.9, 99.95, 99.99, 99.999,
];

/// A percentile plot's points of sorted values: (p, value at p, its 95% interval where the
/// count supports one), by the summary's own definitions (`percentile_sorted`,
/// `percentile_ci`), so the plot and the tables agree.
pub fn percentile_points(sorted: &[f64]) -> Vec<(f64, f64, Option<[f64; 2]>)> {
    let n = sorted.len() as f64;
    PLOT_PERCENTILES
        .iter()
        .filter(|p| n * (1.0 - *p / 100.0) >= 1.0 - 1e-9 || **p == 50.0)
        .filter_map(|&p| {
            let v = crate::stats::percentile_sorted(sorted, p)?;
            Some((p, v, crate::stats::percentile_ci(sorted, p)))
        })
        .collect()
}

/// Empirical CDF points of `values` (sorted copy), at most `max_points` of them.
pub fn cdf(values: &[f64], max_points: usize) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let step = (n / max_points.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    out.push((v[n - 1], 1.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        let t = ticks(0.0, 437.0, 6);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(t.last(), Some(&500.0), "the axis covers the largest value");
        assert!(t.windows(2).all(|w| (w[1] - w[0] - 100.0).abs() < 1e-9));
        assert_eq!(ticks(0.0, 144.0, 6).last(), Some(&150.0));
    }

    #[test]
    fn cdf_ends_at_one_and_is_monotone() {
        let c = cdf(&[3.0, 1.0, 2.0, f64::NAN], 100);
        assert_eq!(c.last(), Some(&(3.0, 1.0)));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn a_chart_places_series_thresholds_and_bands() {
        let svg = Chart::new("cdf-ttft", "TTFT <CDF>", "ms", "fraction")
            .line("steady", vec![(0.0, 0.0), (100.0, 1.0)])
            .vline(50.0, "SLO 50 ms")
            .band(0.0, 20.0, "warmup")
            .y_max(1.0)
            .render();
        // The title and legend are HTML around the SVG, never on it.
        assert!(svg.starts_with(r#"<div class="ftitle">TTFT &lt;CDF&gt;</div><svg"#));
        assert_eq!(svg.matches("</svg>").count(), 1);
        assert!(svg.contains(r#"<span class="key"><i class="sw dash"></i>SLO 50 ms</span>"#));
        assert!(svg.contains(r#"id="cdf-ttft""#));
        assert!(svg.contains("TTFT &lt;CDF&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains(r#"class="threshold""#) && svg.contains("SLO 50 ms"));
        assert!(svg.contains(r#"class="band b0""#));
    }

    /// A phase drawn as many spans (a slow run's seconds without a send) is one phase: one
    /// colour, one label, no legend entry per span (issue #44: "steady" twenty times).
    #[test]
    fn a_band_name_drawn_as_many_spans_is_labelled_once() {
        let mut ch = Chart::new("timeline", "load", "s", "requests")
            .line("in flight", vec![(0.0, 1.0), (100.0, 2.0)])
            .band(0.0, 10.0, "warmup");
        for i in 0..20 {
            let a = 10.0 + 4.0 * f64::from(i);
            ch = ch.band(a, a + 2.0, "steady");
        }
        let svg = ch.band(90.0, 100.0, "drain").render();
        assert_eq!(
            svg.matches(r#"class="band b1""#).count(),
            20,
            "steady one colour"
        );
        assert_eq!(svg.matches(r#"class="band b0""#).count(), 1);
        assert_eq!(svg.matches(r#"class="band b2""#).count(), 1);
        for name in ["warmup", "steady", "drain"] {
            let labels = svg.matches(r#"class="bandlabel label""#).count();
            assert!(labels <= 3, "{labels}");
            let shown = svg.matches(&format!(">{name}</text>")).count()
                + svg.matches(&format!("</i>{name}</span>")).count();
            assert_eq!(shown, 1, "{name} named once: {svg}");
        }
    }

    #[test]
    fn the_percentile_plot_shows_the_summarys_percentiles_and_intervals() {
        // A skewed latency sample, as the summary would take it.
        let values: Vec<f64> = (0..2000u32)
            .map(|i| 20.0 + f64::from(i % 97) + f64::from(i).powf(1.6) / 40.0)
            .collect();
        let d = crate::analyze::Dist::of(values.clone()).unwrap();
        let mut sorted = values;
        sorted.sort_by(f64::total_cmp);
        let pts = percentile_points(&sorted);
        let at = |p: f64| {
            pts.iter()
                .find(|x| (x.0 - p).abs() < 1e-9)
                .copied()
                .unwrap()
        };
        for (k, (p, v)) in [
            (50.0, d.p50),
            (90.0, d.p90),
            (95.0, d.p95),
            (99.0, d.p99),
            (99.9, d.p99_9),
        ]
        .into_iter()
        .enumerate()
        {
            let (_, y, ci) = at(p);
            assert_eq!(y, v, "p{p}");
            assert_eq!(ci, d.ci95[k], "p{p} interval");
        }
        // Only percentiles the count supports: 2000 values reach p99.95, not p99.99.
        assert_eq!(pts.last().map(|x| x.0), Some(99.95));
        // Placed evenly per decade of the tail.
        let gap = |a: f64, b: f64| percentile_x(b) - percentile_x(a);
        assert!((gap(90.0, 99.0) - gap(99.0, 99.9)).abs() < 1e-9);
        let svg = Chart::new("pct", "t", "p", "ms")
            .x_scale(XScale::Percentile)
            .line("x", pts.iter().map(|(p, y, _)| (*p, *y)).collect())
            .hline(300.0, "SLO")
            .render();
        for label in ["p50", "p90", "p99", "p99.9", "p99.99"] {
            assert!(svg.contains(&format!(">{label}<")), "{label}");
        }
        assert!(
            !svg.contains(">p99.999<"),
            "no tick beyond the data's decade"
        );
    }
}
