//! The JSON format: the command's value (a summary, a comparison, an audit…), pretty-printed,
//! for programs. The value's shape is the command's own (`summary.json`'s is
//! `docs/summary.schema.json`).

/// A value, pretty-printed, with a newline at the end.
pub fn render<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}
