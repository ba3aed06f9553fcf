//! A small chart builder that writes SVG: linear axes with rounded ticks, line series, vertical
//! threshold lines and shaded bands. Hand-written rather than plotters because plotters lays out
//! text with a font backend (a font file to ship, or system fontconfig to require); a browser
//! lays out SVG `<text>` itself. Every element is placed through the one `Scale` pair, so
//! nothing is hand-positioned elsewhere.

use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A chart under construction.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    id: String,
    title: String,
    x_label: String,
    y_label: String,
    series: Vec<(String, Vec<(f64, f64)>)>,
    vlines: Vec<(f64, String)>,
    bands: Vec<(f64, f64, String)>,
    y_max: Option<f64>,
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

    pub fn line(mut self, name: &str, points: Vec<(f64, f64)>) -> Chart {
        self.series.push((name.into(), points));
        self
    }

    /// A vertical marker (an SLO threshold, a capacity).
    pub fn vline(mut self, x: f64, name: &str) -> Chart {
        self.vlines.push((x, name.into()));
        self
    }

    /// A shaded span of x (a phase).
    pub fn band(mut self, x0: f64, x1: f64, name: &str) -> Chart {
        self.bands.push((x0, x1, name.into()));
        self
    }

    /// Fixes the top of the y axis (e.g. 1 for a CDF).
    pub fn y_max(mut self, y: f64) -> Chart {
        self.y_max = Some(y);
        self
    }

    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.0))
            .chain(self.vlines.iter().map(|v| v.0))
            .chain(self.bands.iter().flat_map(|b| [b.0, b.1]))
            .filter(|x| x.is_finite());
        let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        let (x_lo, x_hi) = if x_lo.is_finite() {
            (x_lo.min(0.0), x_hi)
        } else {
            (0.0, 1.0)
        };
        let y_top = self.y_max.unwrap_or_else(|| {
            self.series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.1))
                .filter(|y| y.is_finite())
                .fold(0.0, f64::max)
        });
        let yt = ticks(0.0, if y_top > 0.0 { y_top } else { 1.0 }, 5);
        let xt = ticks(x_lo, if x_hi > x_lo { x_hi } else { x_lo + 1.0 }, 6);
        let sx = Scale {
            lo: *xt.first().unwrap_or(&x_lo),
            hi: *xt.last().unwrap_or(&x_hi),
            from: LEFT,
            to: W - RIGHT,
        };
        let sy = Scale {
            lo: 0.0,
            hi: *yt.last().unwrap_or(&1.0),
            from: H - BOTTOM,
            to: TOP,
        };
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" id="{}" viewBox="0 0 {W} {H}" class="chart" role="img"><title>{}</title>"#,
            esc(&self.id),
            esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{LEFT}" y="18" class="title">{}</text>"#,
            esc(&self.title)
        );
        for (i, (a, b, name)) in self.bands.iter().enumerate() {
            let (xa, xb) = (sx.at(*a), sx.at(*b));
            let _ = write!(
                o,
                r#"<rect class="band b{}" x="{xa:.1}" y="{TOP}" width="{:.1}" height="{:.1}"><title>{}</title></rect><text class="bandlabel" x="{:.1}" y="{:.1}">{}</text>"#,
                i % 3,
                (xb - xa).max(0.5),
                H - BOTTOM - TOP,
                esc(name),
                xa + 3.0,
                TOP + 12.0,
                esc(name)
            );
        }
        for t in &yt {
            let y = sy.at(*t);
            let _ = write!(
                o,
                r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                label(*t)
            );
        }
        for t in &xt {
            let x = sx.at(*t);
            let _ = write!(
                o,
                r#"<line class="tickmark" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                H - BOTTOM,
                H - BOTTOM + 4.0,
                H - BOTTOM + 16.0,
                label(*t)
            );
        }
        let _ = write!(
            o,
            r#"<line class="axis" x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/><line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{:.1}"/>"#,
            W - RIGHT,
            H - BOTTOM,
            H - BOTTOM,
            H - BOTTOM
        );
        let _ = write!(
            o,
            r#"<text class="axislabel" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="axislabel" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 6.0,
            esc(&self.x_label),
            (TOP + H - BOTTOM) / 2.0,
            esc(&self.y_label)
        );
        for (i, (name, pts)) in self.series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let d: Vec<String> = pts
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| format!("{:.1},{:.1}", sx.at(*x), sy.at(y.min(sy.hi))))
                .collect();
            let _ = write!(
                o,
                r#"<polyline class="series" fill="none" stroke="{colour}" points="{}"><title>{}</title></polyline>"#,
                d.join(" "),
                esc(name)
            );
            let _ = write!(
                o,
                r#"<text class="legend" x="{:.1}" y="{:.1}" fill="{colour}">{}</text>"#,
                W - RIGHT - 150.0,
                TOP + 14.0 + 14.0 * i as f64,
                esc(name)
            );
        }
        for (x, name) in &self.vlines {
            let px = sx.at(*x);
            // Labels near the right edge go to the line's left, so they are not cut off.
            let (lx, anchor) = if px > W - RIGHT - 120.0 {
                (px - 3.0, "end")
            } else {
                (px + 3.0, "start")
            };
            let _ = write!(
                o,
                r#"<line class="threshold" x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{:.1}"><title>{}</title></line><text class="thresholdlabel" x="{lx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                H - BOTTOM,
                esc(name),
                TOP + 26.0,
                esc(name)
            );
        }
        o.push_str("</svg>");
        o
    }
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
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"id="cdf-ttft""#));
        assert!(svg.contains("TTFT &lt;CDF&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains(r#"class="threshold""#) && svg.contains("SLO 50 ms"));
        assert!(svg.contains(r#"class="band b0""#));
    }
}
