//! Output formats: how a [`Doc`](super::Doc) (or a command's value) is written as aligned
//! text, Markdown, an HTML page or JSON. `command::render`, the one rendering seam, chooses
//! among them by the user's `--format`; adding a format (CSV, say) is a file here, a variant
//! of [`Format`] and its arm in that seam.

pub(crate) mod html;
pub(crate) mod json;
pub(crate) mod markdown;
pub(crate) mod terminal;

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
