//! Per-request decisions shared by both runners: output length, fault rolls, generated text.

use crate::sim_config::SimConfig;
use crate::text::{WORDS, mix2, unit_interval};

/// What the client asked for, in the simulator's terms.
#[derive(Debug, Clone, Copy, Default)]
pub struct LengthAsk {
    pub max_tokens: Option<u32>,
    pub min_tokens: Option<u32>,
    pub ignore_eos: bool,
}

/// How long the output will be and why it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputPlan {
    pub tokens: u32,
    /// `"length"` when `max_tokens` cut it, else `"stop"`.
    pub finish_reason: &'static str,
}

/// Decides the output length: exactly `max_tokens` with `ignore_eos`, else the prompt's
/// deterministic natural length clamped to `[min_tokens, max_tokens]`.
pub fn output_plan(cfg: &SimConfig, prompt_hash: u64, ask: LengthAsk) -> OutputPlan {
    let max = ask.max_tokens.unwrap_or(cfg.default_max_tokens).max(1);
    let min = ask.min_tokens.unwrap_or(0).min(max);
    if ask.ignore_eos {
        return OutputPlan {
            tokens: max,
            finish_reason: "length",
        };
    }
    let span = u64::from(cfg.natural_max_tokens - cfg.natural_min_tokens) + 1;
    let natural = cfg.natural_min_tokens + (mix2(cfg.seed, prompt_hash) % span) as u32;
    let tokens = natural.clamp(min, max);
    OutputPlan {
        tokens,
        finish_reason: if natural >= max { "length" } else { "stop" },
    }
}

/// The output plan, cut short when the truncation fault strikes this prompt (even under
/// `ignore_eos`: that is the bug it imitates).
pub fn degraded_output_plan(cfg: &SimConfig, prompt_hash: u64, ask: LengthAsk) -> OutputPlan {
    let plan = output_plan(cfg, prompt_hash, ask);
    if degraded(cfg, prompt_hash, Degrade::Truncate) && plan.tokens > 1 {
        return OutputPlan {
            tokens: plan.tokens / 2,
            finish_reason: "stop",
        };
    }
    plan
}

/// The kinds of fault, each with its own independent roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Error = 1,
    Drop = 2,
    Malformed = 3,
    SlowHeaders = 4,
}

/// Whether fault `kind` strikes the request that arrived `seq`-th.
pub fn fault_strikes(cfg: &SimConfig, seq: u64, kind: FaultKind) -> bool {
    let rate = match kind {
        FaultKind::Error => cfg.faults.error_rate,
        FaultKind::Drop => cfg.faults.drop_rate,
        FaultKind::Malformed => cfg.faults.malformed_rate,
        FaultKind::SlowHeaders => cfg.faults.slow_headers_rate,
    };
    rate > 0.0 && unit_interval(mix2(mix2(cfg.seed, seq), kind as u64)) < rate
}

/// Hash of a prompt's token ids, the seed of its generated text and natural length.
pub fn prompt_hash(ids: &[u64]) -> u64 {
    ids.iter().fold(0x7072_6f6d_7074, |h, id| mix2(h, *id))
}

/// Degradations of output quality, each struck per prompt (not per arrival), so the same
/// prompts are degraded in every run of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degrade {
    /// The text departs from the reference text after its first few tokens.
    Perturb = 11,
    /// The output stops at half its length with `finish_reason: "stop"`.
    Truncate = 12,
}

/// Whether `kind` degrades the output for this prompt.
pub fn degraded(cfg: &SimConfig, prompt_hash: u64, kind: Degrade) -> bool {
    let rate = match kind {
        Degrade::Perturb => cfg.faults.perturb_rate,
        Degrade::Truncate => cfg.faults.truncate_rate,
    };
    rate > 0.0 && unit_interval(mix2(mix2(cfg.seed, prompt_hash), kind as u64)) < rate
}

/// Tokens of a perturbed output that still match the unperturbed text.
const PERTURB_AFTER: u32 = 3;

/// Appends generated tokens `first .. first + n` of a prompt to `out`, each as `" word"`: the
/// text depends only on the seed, the prompt and the position, so runs are reproducible (a
/// perturbed prompt's text departs after `PERTURB_AFTER` tokens).
pub fn push_text(cfg: &SimConfig, prompt_hash: u64, first: u32, n: u32, out: &mut String) {
    for w in output_words(cfg, prompt_hash, first, n) {
        out.push(' ');
        out.push_str(w);
    }
}

/// The words of output tokens `first..first + n`, as [`push_text`] writes them.
pub fn output_words(
    cfg: &SimConfig,
    prompt_hash: u64,
    first: u32,
    n: u32,
) -> impl Iterator<Item = &'static str> {
    let base = mix2(cfg.seed, prompt_hash);
    let perturb = degraded(cfg, prompt_hash, Degrade::Perturb);
    (first..first + n).map(move |j| {
        let b = if perturb && j >= PERTURB_AFTER {
            mix2(base, 0x5045_5254)
        } else {
            base
        };
        WORDS[(mix2(b, u64::from(j)) % WORDS.len() as u64) as usize]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_eos_gives_exact_length() {
        let c = SimConfig::default();
        let ask = LengthAsk {
            max_tokens: Some(77),
            min_tokens: None,
            ignore_eos: true,
        };
        assert_eq!(output_plan(&c, 1, ask).tokens, 77);
    }

    #[test]
    fn natural_length_respects_min_and_max() {
        let c = SimConfig::default();
        for h in 0..200 {
            let p = output_plan(
                &c,
                h,
                LengthAsk {
                    max_tokens: Some(100),
                    min_tokens: Some(40),
                    ignore_eos: false,
                },
            );
            assert!((40..=100).contains(&p.tokens));
        }
    }

    #[test]
    fn text_is_deterministic_and_one_word_per_token() {
        let c = SimConfig {
            seed: 3,
            ..SimConfig::default()
        };
        let (mut a, mut b) = (String::new(), String::new());
        push_text(&c, 9, 0, 5, &mut a);
        push_text(&c, 9, 0, 2, &mut b);
        push_text(&c, 9, 2, 3, &mut b);
        assert_eq!(a, b);
        assert_eq!(crate::text::count_words(&a), 5);
    }

    #[test]
    fn degradations_strike_the_configured_fraction_of_prompts() {
        let mut c = SimConfig::default();
        c.faults.perturb_rate = 0.3;
        c.faults.truncate_rate = 0.1;
        let n = 4000;
        let perturbed = (0..n)
            .filter(|h| degraded(&c, *h, Degrade::Perturb))
            .count();
        let truncated = (0..n)
            .filter(|h| degraded(&c, *h, Degrade::Truncate))
            .count();
        // Binomial sd at n = 4000: ≈ 29 and 19.
        assert!((perturbed as f64 - 1200.0).abs() < 120.0, "{perturbed}");
        assert!((truncated as f64 - 400.0).abs() < 80.0, "{truncated}");
        let h = (0..n).find(|h| degraded(&c, *h, Degrade::Perturb)).unwrap();
        let clean = SimConfig::default();
        let (mut good, mut bad) = (String::new(), String::new());
        push_text(&clean, h, 0, 8, &mut good);
        push_text(&c, h, 0, 8, &mut bad);
        let (g, b): (Vec<&str>, Vec<&str>) = (good.split(' ').collect(), bad.split(' ').collect());
        assert_eq!(g[..4], b[..4], "the first {PERTURB_AFTER} tokens agree");
        assert_ne!(g, b);
        let ask = LengthAsk {
            max_tokens: Some(40),
            min_tokens: None,
            ignore_eos: true,
        };
        let t = (0..n)
            .find(|h| degraded(&c, *h, Degrade::Truncate))
            .unwrap();
        assert_eq!(
            degraded_output_plan(&c, t, ask),
            OutputPlan {
                tokens: 20,
                finish_reason: "stop"
            }
        );
    }
}
