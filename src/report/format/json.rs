//! The JSON format: the command's value (a summary, a comparison, an audit…), pretty-printed,
//! for programs. The value's shape is the command's own (`summary.json`'s is
//! `docs/summary.schema.json`).

use super::Output;

pub fn render<T: serde::Serialize + ?Sized>(o: &Output<T>) -> String {
    serde_json::to_string_pretty(o.value).unwrap_or_default() + "\n"
}
