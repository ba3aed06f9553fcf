//! `vllm bench serve`'s tool-call and speculative-decoding datasets, as goodput workloads:
//! - **BFCL** (`--dataset-name hf --dataset-path gorilla-llm/Berkeley-Function-Calling-Leaderboard
//!   --bfcl-categories …`): vLLM downloads `BFCL_v3_<category>.json` from the Hub, interleaves the
//!   categories, sends each entry's first turn with its functions as `tools` (`tool_choice`
//!   `auto`) to the chat API and never grades the answers; goodput reads the same files from
//!   disk, with their `possible_answer/` beside them, one category a run, and grades every answer
//!   by BFCL's rule for it.
//! - **SpecBench** (`--dataset-name spec_bench --dataset-path question.jsonl`): lines of
//!   `{category, turns}`, each prompt the first turn; goodput reads JSON lines of `prompt`, so the
//!   contract names the file a one-line `jq` makes from it (`--spec-bench-category` a filter).
//! - **SPEED-Bench** (`--dataset-name speed_bench --dataset-path DIR`): `DIR/<subset>.jsonl` as
//!   its download script writes it, each prompt the first message's content; read the same way.
//!
//! Acceptance needs no flag in either tool: goodput reads it from what the engine returns (see
//! [`crate::analyze::speculative`]).

use super::{Draft, Flags, ImportError, length};

/// The Hub dataset vLLM 0.32.0 recognises as BFCL.
pub(super) const BFCL_HUB: &str = "gorilla-llm/Berkeley-Function-Calling-Leaderboard";

/// vLLM's categories when `--bfcl-categories` is absent (`BFCLDataset.DEFAULT_CATEGORIES`).
const BFCL_DEFAULT: [&str; 3] = ["simple", "live_simple", "multiple"];

/// vLLM's output length for BFCL (`BFCLDataset.DEFAULT_OUTPUT_LEN`), unless `--hf-output-len`.
const BFCL_OUTPUT: f64 = 512.0;

/// Whether the command asks for vLLM's BFCL dataset (its path or `--hf-name` the Hub id).
pub(super) fn is_bfcl(f: &Flags) -> bool {
    f.text("dataset-path") == Some(BFCL_HUB) || f.text("hf-name") == Some(BFCL_HUB)
}

/// `--dataset-name hf` with BFCL's Hub id.
pub(super) fn bfcl(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    if f.text("backend").unwrap_or("openai") != "openai-chat" {
        return Err(ImportError(format!(
            "`--dataset-path {BFCL_HUB}` needs --backend openai-chat (vLLM refuses BFCL with another backend too: it sends tools in chat requests)"
        )));
    }
    let given: Vec<&str> = f
        .text("bfcl-categories")
        .map(|c| {
            c.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let (categories, from) = if given.is_empty() {
        (
            BFCL_DEFAULT.to_vec(),
            "vLLM's default BFCL categories".to_owned(),
        )
    } else {
        (given, f.from("bfcl-categories"))
    };
    // The first category goodput can grade is this contract's; the others are named.
    let gradable: Vec<&str> = categories
        .iter()
        .copied()
        .filter(|c| crate::quality::tools::bfcl_rule(c).is_ok())
        .collect();
    let Some(first) = gradable.first() else {
        let why = crate::quality::tools::bfcl_rule(categories[0]).unwrap_err();
        return Err(ImportError(format!(
            "`--bfcl-categories {}`: no category goodput can grade per request ({why})",
            categories.join(",")
        )));
    };
    // A local copy's folder (`--dataset-path DIR --hf-name <hub id>`), else beside the contract.
    let dir = f
        .text("dataset-path")
        .filter(|p| *p != BFCL_HUB)
        .map(|p| format!("{}/", p.trim_end_matches('/')))
        .unwrap_or_default();
    let file = format!("{dir}BFCL_v3_{first}.json");
    super::prompts_from(
        f,
        d,
        (&file, from.clone()),
        ("bfcl", from),
        "each BFCL question's own length",
    );
    let (out, ofrom) = match f.num("hf-output-len") {
        Some(n) => (n, f.from("hf-output-len")),
        None => (BFCL_OUTPUT, "vLLM's BFCL output length".to_owned()),
    };
    d.set("workload", "output_tokens", length(out, 0.0), ofrom);
    d.annotate(format!(
        "BFCL: vLLM downloads {file_name} from the Hub ({BFCL_HUB}) and sends its tools without grading the answers; goodput reads it from disk with possible_answer/{file_name} beside it (e.g. `huggingface-cli download --repo-type dataset {BFCL_HUB} {file_name} possible_answer/{file_name} --local-dir .`, or bfcl-eval's BFCL_v4 files) and grades every answer by BFCL's rule for {first}; slo.correct_tool_calls (on for a dataset of tools) counts only right, on-time answers",
        file_name = format!("BFCL_v3_{first}.json"),
    ));
    other_categories(d, &categories, &gradable);
    d.annotate("BFCL: vLLM sends tool_choice \"auto\", the APIs' default when tools are offered; goodput sends none");
    Ok(())
}

/// vLLM interleaves several categories; goodput grades one a run: the others to run again,
/// and those it cannot grade, named.
fn other_categories(d: &mut Draft, categories: &[&str], gradable: &[&str]) {
    let again = &gradable[1..];
    let ungraded: Vec<&str> = categories
        .iter()
        .copied()
        .filter(|c| !gradable.contains(c))
        .collect();
    if categories.len() > 1 {
        let mut note = format!(
            "--bfcl-categories: vLLM interleaves {}; goodput grades one category a run",
            categories.join(", ")
        );
        if !again.is_empty() {
            note += &format!(
                ": run this contract again with workload.dataset = BFCL_v3_<category>.json for {}",
                again.join(", ")
            );
        }
        if !ungraded.is_empty() {
            note += &format!(
                "; {} not imported: no per-call answer goodput grades (irrelevance, multi-turn and Java/JavaScript categories)",
                ungraded.join(", ")
            );
        }
        d.annotate(note);
    }
}

/// `--dataset-name spec_bench`: the prompts of SpecBench's `question.jsonl`, each its first turn.
pub(super) fn spec_bench(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let path = f.text("dataset-path").ok_or_else(|| {
        ImportError(
            "`--dataset-name spec_bench` needs --dataset-path (SpecBench's question.jsonl; vLLM refuses it without one too)".into(),
        )
    })?;
    let (out, ofrom) = f.or("spec-bench-output-len", 256.0);
    first_turns(
        f,
        d,
        path,
        ".turns[0]",
        f.text("spec-bench-category"),
        "spec_bench",
    );
    d.set("workload", "output_tokens", length(out, 0.0), ofrom);
    Ok(())
}

/// `--dataset-name speed_bench`: SPEED-Bench's `<subset>.jsonl` in the folder its download
/// script makes, each prompt its first message's content.
pub(super) fn speed_bench(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    let dir = f.text("dataset-path").ok_or_else(|| {
        ImportError(
            "`--dataset-name speed_bench` needs --dataset-path (the folder SPEED-Bench's download script fills; vLLM refuses it without one too)".into(),
        )
    })?;
    let subset = f
        .text("speed-bench-dataset-subset")
        .unwrap_or("qualitative");
    let file = format!("{}/{subset}.jsonl", dir.trim_end_matches('/'));
    first_turns(
        f,
        d,
        &file,
        ".messages[0].content",
        f.text("speed-bench-category"),
        "speed_bench",
    );
    let (out, ofrom) = f.or("speed-bench-output-len", 4096.0);
    d.set("workload", "output_tokens", length(out, 0.0), ofrom);
    Ok(())
}

/// A speculative-decoding prompt set that vLLM reads as one prompt a line (`prompt` the text
/// at `field`, lines of `category` only when one is given): the contract reads the JSON lines
/// of `prompt` a `jq` line makes from it, beside the source.
fn first_turns(
    f: &Flags,
    d: &mut Draft,
    source: &str,
    field: &str,
    category: Option<&str>,
    name: &str,
) {
    let stem = source.strip_suffix(".jsonl").unwrap_or(source);
    let prompts = match category {
        Some(c) => format!("{stem}.{c}.prompts.jsonl"),
        None => format!("{stem}.prompts.jsonl"),
    };
    super::prompts_from(
        f,
        d,
        (&prompts, f.from("dataset-path")),
        ("jsonl", f.from("dataset-name")),
        "each prompt's own length",
    );
    let select = category.map_or(String::new(), |c| {
        format!("select(.category == {}) | ", serde_json::json!(c))
    });
    d.annotate(format!(
        "{name}: goodput reads JSON lines of `prompt`; make them from {source} as vLLM takes its prompts: jq -c '{select}{{prompt: {field}}}' {source} > {prompts}"
    ));
    d.annotate(crate::peers::ACCEPTANCE);
}
