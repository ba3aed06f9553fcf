//! How right a tool dataset's calls were (`dataset_format` `bfcl` or `tools`), from the grades
//! the client gave each request as it ended: correct and wrong by verdict in the steady window,
//! by phase, and how many requests were on time but wrong — the ones latency alone would have
//! counted as goodput.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::request::{RequestMetrics, within_slo};
use crate::contract::Contract;
use crate::quality::tools::Verdict;
use crate::record::Record;

/// The tool calls' grades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolsResult {
    /// The grading rule, in words.
    pub rule: String,
    /// Whether a request meets the SLO only when its calls are correct
    /// (`slo.correct_tool_calls`).
    pub counted_in_slo: bool,
    /// Steady requests that succeeded and were graded, and those graded correct.
    pub graded: u64,
    pub correct: u64,
    /// `correct / graded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct_share: Option<f64>,
    /// Steady graded requests by verdict (`correct`, `no_call`, `unparsable`, `wrong_count`,
    /// `wrong_name`, `wrong_arguments`).
    pub verdicts: BTreeMap<String, u64>,
    /// With an SLO: steady graded requests within its latency thresholds, and those of them
    /// graded correct. The difference is what latency alone would have counted wrongly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_time_and_correct: Option<u64>,
    /// Graded and correct by phase (`warmup`, `steady`, `drain`, …).
    pub by_phase: BTreeMap<String, PhaseGrades>,
    /// The first wrong steady answers: the entry and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// One phase's graded and correct requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseGrades {
    pub graded: u64,
    pub correct: u64,
}

/// Wrong answers shown as examples.
const EXAMPLES: usize = 3;

/// The grades of a tool dataset's run; `None` for any other workload.
pub fn summarize(
    c: &Contract,
    records: &[Record],
    steady: &[&Record],
    metrics: &[RequestMetrics],
) -> Option<ToolsResult> {
    c.workload.tools.as_ref()?;
    let mut by_phase: BTreeMap<String, PhaseGrades> = BTreeMap::new();
    for r in records {
        if let Some(g) = &r.tool_grade {
            let p = by_phase.entry(r.phase.as_str().to_owned()).or_default();
            p.graded += 1;
            p.correct += u64::from(g.correct());
        }
    }
    let mut verdicts: BTreeMap<String, u64> = Verdict::ALL
        .iter()
        .map(|v| (v.key().to_owned(), 0))
        .collect();
    let mut examples = Vec::new();
    let latency_only = crate::contract::Slo {
        correct_tool_calls: Some(false),
        ..c.slo.clone()
    };
    let (mut on_time, mut on_time_and_correct) = (0, 0);
    for (r, m) in steady.iter().zip(metrics) {
        let (Some(g), true) = (&r.tool_grade, r.is_ok()) else {
            continue;
        };
        *verdicts.entry(g.verdict.key().to_owned()).or_default() += 1;
        if !g.correct() && examples.len() < EXAMPLES {
            examples.push(format!(
                "{}: {}",
                r.tool_entry.as_deref().unwrap_or("?"),
                g.why.as_deref().unwrap_or(g.verdict.name())
            ));
        }
        if within_slo(&latency_only, m) {
            on_time += 1;
            on_time_and_correct += u64::from(g.correct());
        }
    }
    let graded: u64 = verdicts.values().sum();
    let correct = verdicts[Verdict::Correct.key()];
    // From the contract, so the summary a bundle recomputes says the same.
    let rule = c.workload.tools.as_ref().and_then(|t| t.rule.as_deref());
    let has_slo = c.slo.is_set();
    Some(ToolsResult {
        rule: rule
            .and_then(crate::quality::tools::Rule::named)
            .map_or_else(
                || rule.unwrap_or("?").to_owned(),
                |r| r.describe().to_owned(),
            ),
        counted_in_slo: c.slo.correct_tool_calls != Some(false),
        graded,
        correct,
        correct_share: (graded > 0).then(|| correct as f64 / graded as f64),
        verdicts,
        on_time: has_slo.then_some(on_time),
        on_time_and_correct: has_slo.then_some(on_time_and_correct),
        by_phase,
        examples,
    })
}
