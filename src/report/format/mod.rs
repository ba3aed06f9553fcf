//! Output formats. Every command builds one [`Output`] (a document for people and a value
//! for programs) and the user's `--format` chooses how it is written.
//!
//! A seam: each format is one file with a `render(&Output) -> String`, and one variant of
//! [`Format`] that [`Format::render`] maps to it. Adding a format (CSV, say) is that file and
//! that variant; copy `json.rs`.

pub(crate) mod html;
pub(crate) mod json;
pub(crate) mod markdown;
pub(crate) mod terminal;

use super::Doc;

/// `--format`: how a command writes its result. (The variants' comments are `//` so that
/// clap keeps `--help` short: `[possible values: …]`.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // Aligned text, wrapped to 100 columns.
    #[default]
    Terminal,
    // GitHub-flavoured Markdown (for a pull request).
    Markdown,
    // A self-contained HTML page (with figures where the command draws them).
    Html,
    // The command's value as JSON (for programs).
    Json,
}

/// What a command hands to a format: a document for people, a value for programs.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a, T: serde::Serialize + ?Sized> {
    /// The page title (HTML).
    pub title: &'a str,
    pub doc: &'a Doc,
    /// Serialised as it is (field order kept), not through `serde_json::Value`.
    pub value: &'a T,
}

impl Format {
    pub fn render<T: serde::Serialize + ?Sized>(self, o: &Output<T>) -> String {
        match self {
            Format::Terminal => terminal::render(o),
            Format::Markdown => markdown::render(o),
            Format::Html => html::render(o),
            Format::Json => json::render(o),
        }
    }
}
