//! `vllm bench serve --dataset-name random-mm`: its random text (as `random`) and, per request,
//! a number of random-pixel images drawn around `--random-mm-base-items-per-request`, each of
//! a size drawn from `--random-mm-bucket-config`, capped by `--random-mm-limit-mm-per-prompt`
//! — as `[workload.images]`.

use super::{Draft, Flags, ImportError};

/// vLLM's defaults for the three flags.
const BASE_ITEMS: f64 = 1.0;
const DEFAULT_BUCKETS: &str = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}";
const DEFAULT_IMAGE_LIMIT: u64 = 255;

/// The bucket config, `{(height, width, frames): probability, …}`: a Python dict literal of
/// tuple keys (or the same with each key quoted, as JSON has it), which vLLM reads with
/// `ast.literal_eval`. Read here by hand: no crate reads Python literals, and the grammar is
/// three whole numbers and a number per entry, so a scan of the numbers in order is exact.
fn buckets(text: &str) -> Result<Vec<(u32, u32, u32, f64)>, String> {
    let bad = || {
        format!(
            "`--random-mm-bucket-config {}`: not {{(height, width, frames): probability, …}}",
            crate::text::one_line(text).0
        )
    };
    let mut numbers = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-') {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                numbers.push(cur.parse::<f64>().map_err(|_| bad())?);
                cur.clear();
            }
            if !(c.is_whitespace() || "{}(),:\"'".contains(c)) {
                return Err(bad());
            }
        }
    }
    if numbers.is_empty() || numbers.len() % 4 != 0 {
        return Err(bad());
    }
    numbers
        .chunks(4)
        .map(|e| {
            let whole = |x: f64| {
                (x >= 0.0 && x.fract() == 0.0 && x <= f64::from(u32::MAX)).then_some(x as u32)
            };
            match (whole(e[0]), whole(e[1]), whole(e[2])) {
                (Some(h), Some(w), Some(t)) if e[3].is_finite() && e[3] >= 0.0 => {
                    Ok((h, w, t, e[3]))
                }
                _ => Err(bad()),
            }
        })
        .collect()
}

/// `--random-mm-limit-mm-per-prompt`'s image limit (vLLM's default 255).
fn image_limit(f: &Flags) -> Result<u64, ImportError> {
    let Some(t) = f.text("random-mm-limit-mm-per-prompt") else {
        return Ok(DEFAULT_IMAGE_LIMIT);
    };
    let v: serde_json::Value = serde_json::from_str(t).map_err(|_| {
        ImportError(format!(
            "`--random-mm-limit-mm-per-prompt {}`: not JSON such as {{\"image\": 3, \"video\": 0}}",
            crate::text::one_line(t).0
        ))
    })?;
    Ok(v["image"].as_u64().unwrap_or(0))
}

/// Images per request as vLLM draws them: uniform over [floor(n(1 − r)), ceil(n(1 + r))], the
/// top clamped to the limit; the TOML value and where it came from.
fn items(f: &Flags, limit: u64) -> Result<(String, String), ImportError> {
    let (n, n_from) = f.or("random-mm-base-items-per-request", BASE_ITEMS);
    let r = f.num("random-mm-num-mm-items-range-ratio").unwrap_or(0.0);
    if !(0.0..=1.0).contains(&r) || n < 0.0 {
        return Err(ImportError(format!(
            "`--random-mm-num-mm-items-range-ratio {r}`: must be in [0, 1] (and the base items >= 0)"
        )));
    }
    let lo = (n * (1.0 - r)).floor() as u64;
    let hi = ((n * (1.0 + r)).ceil() as u64).min(limit);
    if lo > hi {
        return Err(ImportError(format!(
            "--random-mm-base-items-per-request {n} with ratio {r} needs at least {lo} images, more than --random-mm-limit-mm-per-prompt's {limit} (vLLM refuses this too)"
        )));
    }
    let count = if lo == hi {
        format!("{{ dist = \"fixed\", value = {lo} }}")
    } else {
        format!("{{ dist = \"uniform\", min = {lo}, max = {hi} }}")
    };
    let count_from = format!(
        "{n_from}, {} (vLLM's items per request), at most --random-mm-limit-mm-per-prompt's {limit}",
        f.from("random-mm-num-mm-items-range-ratio")
    );
    Ok((count, count_from))
}

/// `[workload.images]` from the random-mm flags (the text is `random`'s, set before).
pub(super) fn random_mm(f: &Flags, d: &mut Draft) -> Result<(), ImportError> {
    // Images go only in chat-shaped requests, in vLLM as in goodput.
    let endpoint = f.text("endpoint").unwrap_or("/v1/completions");
    if !matches!(endpoint, "/v1/chat/completions" | "/v1/responses") {
        return Err(ImportError(format!(
            "--dataset-name random-mm sends images, which only a chat endpoint takes: {} (add --backend openai-chat --endpoint /v1/chat/completions, as vLLM needs too)",
            f.from("endpoint")
        )));
    }
    let (text, bucket_from) = match f.text("random-mm-bucket-config") {
        Some(t) => (t, f.from("random-mm-bucket-config")),
        None => (
            DEFAULT_BUCKETS,
            "vllm bench serve's default --random-mm-bucket-config".to_owned(),
        ),
    };
    let all = buckets(text).map_err(ImportError)?;
    let limit = image_limit(f)?;
    let (videos, images): (Vec<_>, Vec<_>) = all.into_iter().partition(|b| b.2 != 1);
    if videos.iter().any(|b| b.3 > 0.0) {
        d.annotate("--random-mm-bucket-config: its video buckets (frames > 1) are not sent: goodput sends images only; the image buckets' probabilities are renormalized, as vLLM does when a modality is capped");
    }
    let images: Vec<_> = images.into_iter().filter(|b| b.3 > 0.0).collect();
    if images.is_empty() || limit == 0 {
        return Err(ImportError(format!(
            "--dataset-name random-mm with no image to send ({}): goodput sends images, not videos",
            if limit == 0 {
                "--random-mm-limit-mm-per-prompt allows no image"
            } else {
                "no image bucket has a probability above 0"
            }
        )));
    }
    for &(h, w, _, _) in &images {
        if let Err(why) = crate::contract::images::check_pixels(w, h) {
            return Err(ImportError(format!("--random-mm-bucket-config: {why}")));
        }
    }
    let (count, count_from) = items(f, limit)?;
    d.set("workload.images", "count", count, count_from);
    // vLLM's buckets are (height, width); goodput's sizes are WIDTHxHEIGHT.
    let sizes: Vec<String> = images
        .iter()
        .map(|&(h, w, _, _)| crate::peers::command_line::toml_string(&format!("{w}x{h}")))
        .collect();
    d.set(
        "workload.images",
        "sizes",
        format!("[{}]", sizes.join(", ")),
        format!("{bucket_from} (height, width) as WIDTHxHEIGHT"),
    );
    let weights: Vec<String> = images.iter().map(|b| format!("{}", b.3)).collect();
    if images.windows(2).any(|p| p[0].3 != p[1].3) {
        d.set(
            "workload.images",
            "size_weights",
            format!("[{}]", weights.join(", ")),
            bucket_from,
        );
    }
    d.annotate("--dataset-name random-mm: vLLM sends random-pixel images as JPEG; goodput sends random-pixel PNG (no image repeats within or across runs; reuse = \"pool\" repeats them on purpose), so each request uploads more bytes for the same pixels and the same image tokens; the upload is timed apart from the TTFT");
    d.annotate("--dataset-name random-mm: set workload.images.tokens to your model's image-token rule (Qwen2-VL: { rule = \"grid\", px = 28, extra = 2 }) and the server's reported prompt tokens are checked against it");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_config_reads_as_vllm_writes_it() {
        assert_eq!(
            buckets("{(256, 256, 1): 0.25, (720, 1280, 1): 0.75}").unwrap(),
            vec![(256, 256, 1, 0.25), (720, 1280, 1, 0.75)]
        );
        assert_eq!(
            buckets(r#"{"(32, 32, 1)":0.5,"(32, 32, 2)":0.4}"#).unwrap(),
            vec![(32, 32, 1, 0.5), (32, 32, 2, 0.4)]
        );
        assert!(buckets("{(256, 256): 1}").is_err());
        assert!(buckets("{(256, 256, 1): x}").is_err());
        assert!(buckets("import os").is_err());
    }
}
