//! Token lengths three ways, for input and output: the distribution the contract requested, what
//! was sent (counted by the workload's tokenizer) and what the server reported; and the notes a
//! reader needs when they disagree.

use super::*;

/// Token lengths three ways, for input and output: the distribution the contract requested,
/// what was sent (counted by the workload's tokenizer), and what the server reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LengthCheck {
    /// Who counted the sent lengths, and whether that is exact for the target.
    #[serde(default)]
    pub counted_by: String,
    #[serde(default)]
    pub input: LengthDists,
    #[serde(default)]
    pub output: LengthDists,
    /// Prompt tokens the server served from its prefix cache, as it reported them
    /// (`usage.prompt_tokens_details.cached_tokens`): the cache state as realised.
    #[serde(default)]
    pub input_cached: Option<Dist>,
    /// Prompt tokens the server counted beyond those sent, per successful request
    /// (`usage.prompt_tokens` − sent): its chat template and special tokens such as BOS, when
    /// the sent lengths are counted in the model's tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_added: Option<Dist>,
    pub input_planned_mean: Option<f64>,
    /// From `usage.prompt_tokens`, over the requests that reported it.
    pub input_reported_mean: Option<f64>,
    pub output_planned_mean: Option<f64>,
    /// From `usage.completion_tokens`.
    pub output_reported_mean: Option<f64>,
}

/// One side's lengths: requested (the contract's distribution or source), sent (steady
/// requests, as planned) and reported (successful steady requests' `usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LengthDists {
    pub requested: Option<Dist>,
    pub sent: Option<Dist>,
    pub reported: Option<Dist>,
}

pub(super) fn length_check(
    c: &Contract,
    w: &Inputs,
    steady: &[&Record],
    ok: &[&&Record],
) -> LengthCheck {
    let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let requested = |input| {
        crate::plan::requested_lengths(c, w, input)
            .and_then(|v| Dist::of(v.into_iter().map(f64::from).collect()))
    };
    let side = |input: bool| LengthDists {
        requested: requested(input),
        sent: Dist::of(
            steady
                .iter()
                .filter(|r| r.sent_us.is_some())
                .map(|r| f64::from(r.planned_tokens(input)))
                .collect(),
        ),
        reported: Dist::of(
            ok.iter()
                .filter_map(|r| r.reported_tokens(input))
                .map(f64::from)
                .collect(),
        ),
    };
    let counted_by = match (&c.workload.tokenizer, c.embedded()) {
        (Some(_), _) if c.workload.server_tokenizer() => "the target's own tokenize endpoint (word costs measured and a sample of prompts checked before the load; environment.json `tokenizer`): exact".to_owned(),
        (Some(p), _) => format!(
            "{} (SHA-256 {}): exact for its model",
            p.display(),
            c.workload.tokenizer_sha256.as_deref().map_or("?", |s| &s[..s.len().min(12)])
        ),
        (None, true) => "the simulator's tokenizer (one token per word): exact".to_owned(),
        (None, false) => "whitespace-separated words (goodput's built-in count, one token a word), not the target's tokenizer: approximate (set workload.tokenizer for exact lengths)".to_owned(),
    };
    LengthCheck {
        counted_by,
        input: side(true),
        output: side(false),
        input_cached: Dist::of(
            ok.iter()
                .filter_map(|r| r.usage_cached_tokens)
                .map(f64::from)
                .collect(),
        ),
        input_added: Dist::of(
            ok.iter()
                .filter_map(|r| {
                    let sent = r.planned_tokens(true);
                    r.reported_tokens(true)
                        .map(|rep| f64::from(rep) - f64::from(sent))
                })
                .collect(),
        ),
        input_planned_mean: mean(ok.iter().map(|r| r.input_tokens_planned as f64).collect()),
        input_reported_mean: mean(
            ok.iter()
                .filter_map(|r| r.usage_prompt_tokens.map(f64::from))
                .collect(),
        ),
        output_planned_mean: mean(ok.iter().map(|r| r.output_tokens_planned as f64).collect()),
        output_reported_mean: mean(
            ok.iter()
                .filter_map(|r| r.usage_completion_tokens.map(f64::from))
                .collect(),
        ),
    }
}

/// Requests sent before a requested-vs-sent difference is a finding rather than sampling noise.
pub(super) const LENGTH_CHECK_MIN: usize = 100;

/// Requests of different lengths that must all show the same server-added prompt tokens
/// before, with approximate counting, the difference is taken for a template's constant.
pub(super) const CONSTANT_ADDED_MIN: usize = 10;

/// A request's images are prompt tokens the text's count cannot include: the images' own
/// figures say what they were (`analyze::images`).
fn images_note(c: &Contract, sent: &Dist, reported: &Dist) -> Option<String> {
    c.workload.images.as_ref()?;
    Some(format!(
        "Input lengths as the server counted them include the requests' images: sent text mean {:.1} tokens, reported {:.1} with the images (see Images).",
        sent.mean, reported.mean
    ))
}

/// Warnings where requested, sent and reported lengths part by more than the tolerance.
pub(super) fn length_notes(c: &Contract, l: &LengthCheck) -> Vec<String> {
    let tol = c.measurement.length_tolerance;
    let rel = |a: f64, b: f64| if b > 0.0 { (a - b) / b } else { 0.0 };
    let mut notes = Vec::new();
    // Unenforced output lengths end where the model stops: only enforced ones are checked.
    let enforced = c.workload.enforce_output_length;
    for (input, d, check_reported) in [(true, &l.input, true), (false, &l.output, enforced)] {
        let what = if input { "Input" } else { "Output" };
        if let (Some(r), Some(s)) = (&d.requested, &d.sent)
            && s.count >= LENGTH_CHECK_MIN
        {
            let worst = [rel(s.mean, r.mean), rel(s.p50, r.p50)]
                .into_iter()
                .fold(0.0_f64, |m, x| if x.abs() > m.abs() { x } else { m });
            if worst.abs() > tol {
                notes.push(format!(
                    "{what} lengths sent differ from those requested by {:+.0}% (requested mean {:.1}, p50 {:.0}; sent mean {:.1}, p50 {:.0} over {} requests).",
                    worst * 100.0, r.mean, r.p50, s.mean, s.p50, s.count
                ));
            }
        }
        if let (Some(s), Some(rep)) = (&d.sent, &d.reported)
            && check_reported
        {
            if input && let Some(n) = images_note(c, s, rep) {
                notes.push(n);
                continue;
            }
            // The same few tokens on every prompt: the server's chat template or BOS, known
            // exactly, not a length that missed. Trusted when the sent lengths are counted in
            // the model's tokens, or when enough prompts of different lengths agree (a
            // tokenizer that is not the model's would be off by more on longer prompts).
            let exact = c.workload.tokenizer.is_some() || c.embedded();
            let constant = l
                .input_added
                .as_ref()
                .filter(|a| input && a.min == a.max && a.count == rep.count)
                .filter(|a| exact || (a.count >= CONSTANT_ADDED_MIN && s.min < s.max))
                .map(|a| a.min);
            if let Some(n) = constant {
                let tokens = |k: f64| format!("{k:.0} token{}", if k == 1.0 { "" } else { "s" });
                if n > 0.0 {
                    notes.push(format!(
                        "The server adds {} to every prompt (its chat template or special tokens such as BOS): reported = sent + {n:.0} on all {} requests.",
                        tokens(n),
                        rep.count
                    ));
                } else if n < 0.0 {
                    notes.push(format!(
                        "The server counts {} fewer than were sent in every prompt: reported = sent − {:.0} on all {} requests.",
                        tokens(-n),
                        -n,
                        rep.count
                    ));
                }
                continue;
            }
            let x = rel(rep.mean, s.mean);
            if x.abs() > tol {
                let why = if !input {
                    "the server did not honour the requested length"
                } else if c.workload.tokenizer.is_some() {
                    "counted with the workload's tokenizer; the difference is the server's own additions (chat template, BOS token) or a tokenizer that is not the model's"
                } else {
                    "prompts were counted as whitespace-separated words, not the target's tokens (set workload.tokenizer, or tokenizer = \"server\"), and a chat template adds tokens"
                };
                notes.push(format!(
                    "{what} lengths as the server counted them differ from those sent: sent mean {:.1} tokens, reported {:.1} ({:+.0}%): {why}. Compare results at the reported lengths.",
                    s.mean, rep.mean, x * 100.0
                ));
            }
        }
    }
    notes
}
