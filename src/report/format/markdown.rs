//! The Markdown format (GitHub-flavoured): for `report.md` and pull requests; figures left
//! out.

use std::fmt::Write;

use crate::report::{Block, Doc};

/// A document as GitHub-flavoured Markdown.
pub fn doc(d: &Doc) -> String {
    let mut out = String::new();
    for (i, b) in d.blocks.iter().enumerate() {
        match b {
            Block::Heading(h) => {
                let level = if i == 0 { "#" } else { "##" };
                let _ = writeln!(out, "\n{level} {h}\n");
            }
            Block::Line(l, _) => {
                let _ = writeln!(out, "{l}  ");
            }
            Block::Figure(_) | Block::Html(_) => {}
            Block::Table { head, rows } => {
                let _ = writeln!(out, "\n| {} |", head.join(" | "));
                let _ = writeln!(
                    out,
                    "|{}|",
                    head.iter().map(|_| "---").collect::<Vec<_>>().join("|")
                );
                for r in rows {
                    let _ = writeln!(out, "| {} |", r.join(" | "));
                }
                out.push('\n');
            }
        }
    }
    out.trim_start().to_owned()
}
