//! The terminal format: headings underlined, lines wrapped to 100 columns, tables aligned
//! (numbers right, words left); figures left out.

use std::fmt::Write;

use crate::report::{Block, Doc, WIDTH, wrap};

/// A document as aligned plain text, lines wrapped to [`WIDTH`] columns.
pub fn doc(d: &Doc) -> String {
    let mut out = String::new();
    for b in &d.blocks {
        match b {
            Block::Heading(h) => {
                let _ = writeln!(out, "\n{h}\n{}", "─".repeat(h.chars().count()));
            }
            Block::Line(l, _) => {
                let _ = writeln!(out, "{}", wrap(l, WIDTH));
            }
            Block::Figure(_) | Block::Html(_) => {}
            Block::Table { head, rows } => {
                let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
                for r in rows {
                    for (i, c) in r.iter().enumerate() {
                        w[i] = w[i].max(c.chars().count());
                    }
                }
                // Numbers (and their placeholders) align right; words align left.
                let numeric = |c: &str| {
                    c.parse::<f64>().is_ok()
                        || matches!(c, "—" | "-" | "n/a")
                        || c.trim_end_matches(['%', 'x', '×']).parse::<f64>().is_ok()
                };
                let right: Vec<bool> = (0..w.len())
                    .map(|i| {
                        i > 0
                            && rows.iter().all(|r| {
                                r.get(i)
                                    .is_none_or(|c| numeric(c.trim_start_matches(['+', '-'])))
                            })
                    })
                    .collect();
                let fmt_row = |r: &[String]| {
                    r.iter()
                        .enumerate()
                        .map(|(i, c)| {
                            if right[i] {
                                format!("{c:>w$}", w = w[i])
                            } else {
                                format!("{c:<w$}", w = w[i])
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("  ")
                        .trim_end()
                        .to_owned()
                };
                let _ = writeln!(out, "{}", fmt_row(head));
                for r in rows {
                    let _ = writeln!(out, "{}", fmt_row(r));
                }
            }
        }
    }
    out
}
