//! Traffic classes (`[[class]]`): one run, several workloads, each with its share of the
//! arrivals, its own lengths and SLO, and what its requests carry beyond the body goodput
//! composes (a model or LoRA adapter name, a `priority`, extra body fields and headers).
//! Without `[[class]]` a contract is one implicit class, exactly as before.

use serde::{Deserialize, Serialize};

use super::validate::{Problem, problem};
use super::{LengthDist, RequestExtras, Slo};

/// `[[class]]`: one class of the traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    /// Its name in reports, records and `compare`; unique within the contract.
    #[serde(default)]
    pub name: String,
    /// Its share of the arrivals (of the requests, in closed loop): the shares sum to 1 (or to
    /// 100, read as percent; the resolved contract writes fractions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// Its lengths; a length it does not set is the contract's `[workload]` one.
    #[serde(default, skip_serializing_if = "ClassWorkload::is_empty")]
    pub workload: ClassWorkload,
    /// Its SLO, whole: thresholds, percentile and attainment (absent: the contract's `[slo]`,
    /// which the resolved contract writes here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// The model (or LoRA adapter) name its requests send instead of `target.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Several model or adapter names, one drawn per request (recorded in its record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<ModelMix>,
    /// Sent as the body's `priority` (vLLM's priority scheduling serves lower values first;
    /// SGLang's order depends on its `--schedule-low-priority-values-first`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Body fields and headers its requests carry besides `[target.request]`'s (its own win).
    #[serde(default, skip_serializing_if = "RequestExtras::is_empty")]
    pub request: RequestExtras,
}

/// `[class.workload]`: the lengths a class asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassWorkload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<LengthDist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
}

impl ClassWorkload {
    pub fn is_empty(&self) -> bool {
        self.input_tokens.is_none() && self.output_tokens.is_none()
    }
}

/// `[class.models]`: model or adapter names and how a request's is drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMix {
    pub names: Vec<String>,
    /// `uniform` (the default), `weighted` (by `weights`) or `zipf` (name k of n drawn with
    /// weight 1 / k^`exponent`, the first the most often, as vLLM's and SGLang's LoRA
    /// benchmarks assign adapters).
    #[serde(default)]
    pub pick: Pick,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exponent: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pick {
    #[default]
    Uniform,
    Weighted,
    Zipf,
}

impl ModelMix {
    /// Each name's probability, in order.
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.names.len();
        let w: Vec<f64> = match self.pick {
            Pick::Uniform => vec![1.0; n],
            Pick::Weighted => self.weights.clone(),
            Pick::Zipf => {
                let s = self.exponent.unwrap_or(1.0);
                (1..=n).map(|k| 1.0 / (k as f64).powf(s)).collect()
            }
        };
        let total: f64 = w.iter().sum();
        w.iter().map(|x| x / total).collect()
    }
}

impl Class {
    /// The SLO this class is judged by (resolved: always present).
    pub fn slo_or<'a>(&'a self, contract: &'a Slo) -> &'a Slo {
        self.slo.as_ref().unwrap_or(contract)
    }
}

/// The index a uniform draw `u` in [0, 1) falls in, by cumulative `weights` (summing to 1);
/// the last one when rounding leaves `u` past their sum.
pub fn pick_index(weights: impl IntoIterator<Item = f64>, u: f64) -> usize {
    let (mut acc, mut last) = (0.0, 0);
    for (k, w) in weights.into_iter().enumerate() {
        acc += w;
        if u < acc {
            return k;
        }
        last = k;
    }
    last
}

/// The key of class `k`'s field, as errors name it (`class[1].share`).
pub fn key(k: usize, field: &str) -> String {
    if field.is_empty() {
        format!("class[{k}]")
    } else {
        format!("class[{k}].{field}")
    }
}

/// Class `k`'s share of the arrivals: given, and more than 0.
fn check_share(k: usize, name: &str, share: Option<f64>) -> Result<(), Problem> {
    match share {
        None => {
            return problem(
                &key(k, "share"),
                format!(
                    "class {name:?} has no share: give each class its share of the arrivals (`share = 0.3`)"
                ),
            );
        }
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return problem(&key(k, "share"), format!("= {s}: a share must be > 0"));
        }
        Some(_) => {}
    }
    Ok(())
}

/// Class `k`'s name: present, without surrounding spaces or control characters, and unique
/// among those `seen` so far.
fn check_name(
    k: usize,
    c: &Class,
    seen: &mut std::collections::BTreeSet<String>,
) -> Result<(), Problem> {
    let name = c.name.trim();
    if name.is_empty() {
        return problem(
            &key(k, "name"),
            format!(
                "class {} has no name: every [[class]] needs `name = \"…\"`, unique in the contract",
                k + 1
            ),
        );
    }
    if name != c.name || name.chars().any(|ch| ch.is_control()) {
        return problem(
            &key(k, "name"),
            format!(
                "= {:?}: a name without leading or trailing spaces or control characters",
                c.name
            ),
        );
    }
    if !seen.insert(name.to_owned()) {
        return problem(
            &key(k, "name"),
            format!("= {name:?}: another class has this name; each class needs its own"),
        );
    }
    Ok(())
}

/// Checks the classes and fills what they inherit: names present and unique, shares positive
/// and summing to 1 or 100 (written back as fractions), lengths and SLOs valid, one way of
/// naming the model. `slo`: the contract's `[slo]`, which a class without its own takes.
pub(super) fn resolve(
    classes: &mut [Class],
    slo: &Slo,
    check_dist: impl Fn(&str, &LengthDist) -> Result<(), Problem>,
    check_slo: impl Fn(&str, &Slo) -> Result<(), Problem>,
) -> Result<(), Problem> {
    let mut seen = std::collections::BTreeSet::new();
    for (k, c) in classes.iter().enumerate() {
        check_name(k, c, &mut seen)?;
        let name = c.name.trim();
        check_share(k, name, c.share)?;
        for (field, d) in [
            ("workload.input_tokens", &c.workload.input_tokens),
            ("workload.output_tokens", &c.workload.output_tokens),
        ] {
            if let Some(d) = d {
                if matches!(
                    d,
                    LengthDist::Empirical { .. } | LengthDist::Dataset | LengthDist::Trace
                ) {
                    return problem(
                        &key(k, field),
                        "a class's lengths are drawn from a distribution (fixed, uniform, normal, lognormal); file- and dataset-based lengths are the contract's [workload] alone",
                    );
                }
                check_dist(&key(k, field), d)?;
            }
        }
        if let Some(s) = &c.slo {
            check_slo(&key(k, "slo"), s)?;
        }
        if c.model.is_some() && c.models.is_some() {
            return problem(
                &key(k, "models"),
                "a class names its model once: `model = \"…\"` or `[class.models]`, not both",
            );
        }
        if let Some(m) = &c.model
            && m.trim().is_empty()
        {
            return problem(&key(k, "model"), "must not be empty");
        }
        if let Some(mix) = &c.models {
            models(k, mix)?;
        }
        if c.priority.is_some() && c.request.extra_body.contains_key("priority") {
            return problem(
                &key(k, "request.extra_body.priority"),
                "the class sets `priority` already; set it once",
            );
        }
    }
    let total: f64 = classes.iter().filter_map(|c| c.share).sum();
    let scale = if (total - 1.0).abs() <= 1e-6 {
        1.0
    } else if (total - 100.0).abs() <= 1e-4 {
        100.0
    } else {
        let shares: Vec<String> = classes
            .iter()
            .map(|c| format!("{} {}", c.name, c.share.unwrap_or(0.0)))
            .collect();
        return problem(
            &key(0, "share"),
            format!(
                "the classes' shares sum to {total} ({}): they must sum to 1 (or to 100, as percent)",
                shares.join(", ")
            ),
        );
    };
    for c in classes.iter_mut() {
        c.share = c.share.map(|s| s / scale);
        if c.slo.is_none() {
            c.slo = Some(slo.clone());
        }
    }
    Ok(())
}

fn models(k: usize, mix: &ModelMix) -> Result<(), Problem> {
    if mix.names.is_empty() || mix.names.iter().any(|n| n.trim().is_empty()) {
        return problem(
            &key(k, "models.names"),
            "must list at least one name, none empty",
        );
    }
    let weights_ok = mix.weights.len() == mix.names.len()
        && mix.weights.iter().all(|w| w.is_finite() && *w >= 0.0)
        && mix.weights.iter().sum::<f64>() > 0.0;
    match mix.pick {
        Pick::Weighted if !weights_ok => {
            return problem(
                &key(k, "models.weights"),
                format!(
                    "`pick = \"weighted\"` needs one weight >= 0 per name ({} names), not all 0",
                    mix.names.len()
                ),
            );
        }
        Pick::Uniform | Pick::Zipf if !mix.weights.is_empty() => {
            return problem(
                &key(k, "models.weights"),
                "weights are read only with `pick = \"weighted\"`",
            );
        }
        _ => {}
    }
    if let Some(s) = mix.exponent
        && (mix.pick != Pick::Zipf || !(s.is_finite() && s > 0.0))
    {
        return problem(
            &key(k, "models.exponent"),
            "is read only with `pick = \"zipf\"`, and must be > 0",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_favours_the_first_name_and_picks_cover_every_name() {
        let mix = ModelMix {
            names: vec!["a".into(), "b".into(), "c".into()],
            pick: Pick::Zipf,
            weights: vec![],
            exponent: Some(1.0),
        };
        let p = mix.probabilities();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((p[0] / p[1] - 2.0).abs() < 1e-12 && (p[0] / p[2] - 3.0).abs() < 1e-12);
        assert_eq!(pick_index(p.iter().copied(), 0.0), 0);
        assert_eq!(pick_index(p.iter().copied(), 0.999_999), 2);
        assert_eq!(pick_index([0.25, 0.75], 0.25), 1);
    }
}
