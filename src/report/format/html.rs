//! The HTML format: one self-contained page (inline CSS and SVG, no script, no network): a
//! responsive grid of figures, print-friendly.

use std::fmt::Write;

use crate::report::{Block, Doc, Tone};

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;max-width:1400px;margin:1.2em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0;display:block;overflow-x:auto;max-width:100%}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}h1,h2,p,div{overflow-wrap:anywhere}p.warn{color:#a33}td.flag{color:#a33;font-weight:700;background:#fdf2f2}\
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:18px 22px;margin:.6em 0}\
figure{margin:0;min-width:0}svg.chart{width:100%;height:auto;background:#fff;display:block}\
.ftitle{font-weight:600;font-size:13px;margin-bottom:2px}.tick{font-size:11px;fill:#555}.axislabel{font-size:11px;fill:#333}.point-label{font-size:10px;fill:#333}circle.mark{stroke-width:2}\
.keys{font-size:12px;display:flex;flex-wrap:wrap;gap:2px 14px}.key{overflow-wrap:anywhere}.sw{display:inline-block;width:14px;height:4px;margin:0 5px 3px 0;vertical-align:middle}\
.sw.dash{border-top:2px dashed #D55E00;height:0}.sw.ring{width:8px;height:8px;border:1.5px solid #555;border-radius:50%}.sw.b0,.sw.b1,.sw.b2{height:10px}\
.note{font-size:12px;color:#555;margin:.2em 0}.ci{opacity:.18}\
line.grid{stroke:#eee}.axis,.tickmark{stroke:#888}.series{stroke-width:1.8}\
.threshold{stroke:#D55E00;stroke-width:1.5;stroke-dasharray:5 3}\
.band{opacity:.45}.b0{fill:#f2e6c9;background:#f2e6c9}.b1{fill:#dcebf5;background:#dcebf5}.b2{fill:#e3f1e3;background:#e3f1e3}.bandlabel{font-size:11px;fill:#555}\
.banner{border-radius:6px;padding:.7em 1em;margin:.4em 0 .8em;border:1px solid}.banner.pass{background:#e8f5ec;border-color:#7bbf8e}.banner.fail{background:#fbeaea;border-color:#d99}.banner.open{background:#fdf7e6;border-color:#d9bf6a}\
.banner .verdict{font-size:1.25em;font-weight:700}.banner p{margin:.25em 0}\
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,200px),1fr));gap:10px;margin:.4em 0 1em}\
.tile{border:1px solid #ccc;border-radius:6px;padding:.5em .7em;background:#fafafa}.tile.pass{border-color:#7bbf8e;background:#f1f9f3}.tile.fail{border-color:#d99;background:#fdf2f2}\
.tile .name{font-size:12px;color:#555;overflow-wrap:anywhere}.tile .value{font-size:1.35em;font-weight:700}.tile .detail{font-size:12px;color:#444}.tile .mark{font-weight:700}\
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}\
@media print{body{max-width:none}.figs{grid-template-columns:repeat(2,1fr)}figure{break-inside:avoid}details{display:block}}";

/// The verdicts a table cell shouts in the terminal report, which the page marks too.
const FLAGS: [&str; 4] = ["DIFFERS", "INVALID", "REGRESSED", "REGRESSION"];

/// Whether a table cell is a verdict every reader must see: it starts with one of [`FLAGS`].
fn flagged(cell: &str) -> bool {
    let word: &str = cell.split([' ', '(', ',', ':']).next().unwrap_or("");
    FLAGS.contains(&word)
}

/// A document as a self-contained page.
pub fn wrap(title: &str, d: &Doc) -> String {
    let body = doc(d);
    let title = title.replace('&', "&amp;").replace('<', "&lt;");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{title}</title><style>{CSS}</style></head><body>\n{body}</body></html>\n"
    )
}

/// The body of an HTML page (headings, paragraphs, tables, inline SVG figures).
pub fn doc(d: &Doc) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = String::new();
    // Consecutive figures share one grid (two or three a row on a laptop, one on a phone).
    let mut in_grid = false;
    for (i, b) in d.blocks.iter().enumerate() {
        let figure = matches!(b, Block::Figure(_));
        if in_grid && !figure {
            out.push_str("</div>\n");
            in_grid = false;
        }
        match b {
            Block::Heading(h) => {
                let tag = if i == 0 { "h1" } else { "h2" };
                let _ = writeln!(out, "<{tag}>{}</{tag}>", esc(h));
            }
            Block::Line(l, tone) => {
                let class = match tone {
                    Tone::Warn => " class=\"warn\"",
                    Tone::Plain => "",
                };
                let _ = writeln!(out, "<p{class}>{}</p>", esc(l));
            }
            Block::Table { head, rows } => {
                out.push_str("<table><thead><tr>");
                for h in head {
                    let _ = write!(out, "<th>{}</th>", esc(h));
                }
                out.push_str("</tr></thead><tbody>");
                for r in rows {
                    out.push_str("<tr>");
                    for c in r {
                        let class = if flagged(c) { " class=\"flag\"" } else { "" };
                        let _ = write!(out, "<td{class}>{}</td>", esc(c));
                    }
                    out.push_str("</tr>");
                }
                out.push_str("</tbody></table>\n");
            }
            Block::Figure(svg) => {
                if !in_grid {
                    out.push_str("<div class=\"figs\">\n");
                    in_grid = true;
                }
                let _ = writeln!(out, "<figure>{svg}</figure>");
            }
            Block::Html(h) => out.push_str(h),
        }
    }
    if in_grid {
        out.push_str("</div>\n");
    }
    out
}
