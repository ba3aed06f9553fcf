//! The HTML format: one self-contained page (inline CSS and SVG, no script, no network).

use std::fmt::Write;

use super::Output;
use crate::report::{Block, Doc, Tone};

pub fn render<T: serde::Serialize + ?Sized>(o: &Output<T>) -> String {
    wrap(o.title, o.doc)
}

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}p.warn{color:#a33}\
figure{margin:1em 0}svg.chart{width:100%;max-width:640px;height:auto;background:#fff}\
.title{font-weight:600;font-size:13px}.tick{font-size:10px;fill:#555}.axislabel{font-size:11px;fill:#333}\
.legend{font-size:11px}.grid{stroke:#eee}.axis,.tickmark{stroke:#888}.series{stroke-width:1.8}\
.threshold{stroke:#D55E00;stroke-width:1.5;stroke-dasharray:5 3}.thresholdlabel{font-size:10px;fill:#D55E00}\
.band{opacity:.35}.b0{fill:#f2e6c9}.b1{fill:#dcebf5}.b2{fill:#e3f1e3}.bandlabel{font-size:10px;fill:#666}";

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
    for (i, b) in d.blocks.iter().enumerate() {
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
                        let _ = write!(out, "<td>{}</td>", esc(c));
                    }
                    out.push_str("</tr>");
                }
                out.push_str("</tbody></table>\n");
            }
            Block::Figure(svg) => {
                let _ = writeln!(out, "<figure>{svg}</figure>");
            }
        }
    }
    out
}
