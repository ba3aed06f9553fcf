//! Images in the workload (`[workload.images]`): how many each request carries, their sizes,
//! where their pixels come from (generated from the seed, or a folder), whether they repeat,
//! and the rule a model counts their tokens by. The contract holds the shape; the pixels are
//! made (or read) per request, when its body is built, and never kept.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::LengthDist;
use super::validate::{Problem, problem};

/// Most images one request may carry, whatever the contract asks: engines cap it far lower
/// (vLLM's `--limit-mm-per-prompt`), and each is a body of its own size.
pub const MAX_IMAGES_PER_REQUEST: u32 = 64;

/// Most pixels one image may have: Pillow's decompression-bomb limit (`Image.MAX_IMAGE_PIXELS`,
/// 89,478,485), past which vLLM, SGLang and TGI, which decode images with Pillow, warn and,
/// at twice it, refuse. A generated image past it is a contract error; a file past it too.
pub const MAX_IMAGE_PIXELS: u64 = 89_478_485;

/// `[workload.images]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Images {
    /// Images per request, drawn per request (default one).
    #[serde(default = "one_image")]
    pub count: LengthDist,
    /// Sizes of generated images, `"WIDTHxHEIGHT"` in pixels; each image draws one uniformly.
    /// Required without `folder`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
    /// How often each size is drawn, relative (absent: all alike), as vLLM's
    /// `--random-mm-bucket-config` weighs its buckets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub size_weights: Vec<f64>,
    /// A folder of PNG, JPEG, WebP or GIF files, relative to the contract, sent instead of
    /// generated images: each image draws a file uniformly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<PathBuf>,
    /// SHA-256 over the folder's files (names and contents, in name order), filled when the
    /// contract is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder_sha256: Option<String>,
    /// `distinct` (default): no two generated images of a run share their pixels, and none
    /// shares them with another run's (the run's cache nonce is in them), so a server's
    /// encoder and prefix caches cannot serve one; `pool`: images are drawn from `pool`
    /// distinct ones, so repeats are deliberate and hits expected.
    #[serde(default, skip_serializing_if = "ImageReuse::is_distinct")]
    pub reuse: ImageReuse,
    /// Distinct images with `reuse = "pool"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<u32>,
    /// How the model counts an image's tokens, when it is known: the expected counts are then
    /// held against what the server reports (never assumed when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<ImageTokens>,
}

fn one_image() -> LengthDist {
    LengthDist::Fixed { value: 1 }
}

/// Whether images repeat within a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageReuse {
    #[default]
    Distinct,
    Pool,
}

impl ImageReuse {
    fn is_distinct(&self) -> bool {
        *self == ImageReuse::Distinct
    }
}

/// A model's rule for an image's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum ImageTokens {
    /// The same count for every image (LLaVA-1.5's 576, Gemma 3's 256).
    Fixed { per_image: u32 },
    /// One token per `px`×`px` tile of the image, its edges rounded up (Qwen2-VL's rule with
    /// 14-pixel patches merged 2×2 is `px = 28`), plus `extra` per image (begin and end
    /// markers).
    Grid {
        px: u32,
        #[serde(default)]
        extra: u32,
    },
}

impl ImageTokens {
    /// The tokens of one `w`×`h` image by this rule.
    pub fn of(&self, w: u32, h: u32) -> u64 {
        match *self {
            ImageTokens::Fixed { per_image } => u64::from(per_image),
            ImageTokens::Grid { px, extra } => crate::sim_config::grid_tokens(w, h, px, extra),
        }
    }
}

/// A `"WIDTHxHEIGHT"` size, or why it is not one.
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("\"{s}\" is not WIDTHxHEIGHT in pixels, such as \"512x512\"");
    let (w, h) = s.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    check_pixels(w, h)?;
    Ok((w, h))
}

/// An image of `w`×`h` pixels is one a server decodes: neither side zero, and no more than
/// [`MAX_IMAGE_PIXELS`].
pub fn check_pixels(w: u32, h: u32) -> Result<(), String> {
    if w == 0 || h == 0 {
        return Err(format!("{w}x{h} has no pixels"));
    }
    let n = u64::from(w) * u64::from(h);
    if n > MAX_IMAGE_PIXELS {
        return Err(format!(
            "{w}x{h} is {:.1} megapixels, more than the {MAX_IMAGE_PIXELS} pixels past which Pillow (which vLLM, SGLang and TGI decode images with) takes an image for a decompression bomb",
            n as f64 / 1e6
        ));
    }
    Ok(())
}

/// The media type of an image format the chat APIs accept (OpenAI's list: PNG, JPEG, WebP,
/// non-animated GIF); `None` for any other.
fn mime_of(t: imagesize::ImageType) -> Option<&'static str> {
    match t {
        imagesize::ImageType::Png => Some("image/png"),
        imagesize::ImageType::Jpeg => Some("image/jpeg"),
        imagesize::ImageType::Webp => Some("image/webp"),
        imagesize::ImageType::Gif => Some("image/gif"),
        _ => None,
    }
}

/// An image's media type and size from its first bytes (its header, read by `imagesize`; its
/// pixels are never decoded), or why it is not one a server takes: what the folder reader and
/// the simulator both ask of an image.
pub fn describe(header: &[u8]) -> Result<(&'static str, u32, u32), String> {
    let t = imagesize::image_type(header).map_err(|_| {
        "not an image goodput can send: PNG, JPEG, WebP or GIF (the formats the chat APIs accept)"
            .to_owned()
    })?;
    let mime = mime_of(t).ok_or_else(|| {
        format!("a {t:?} image, which the chat APIs refuse: send PNG, JPEG, WebP or GIF")
    })?;
    let size = imagesize::blob_size(header)
        .map_err(|e| format!("its header does not give its size ({e})"))?;
    let (w, h) = (
        u32::try_from(size.width).unwrap_or(u32::MAX),
        u32::try_from(size.height).unwrap_or(u32::MAX),
    );
    check_pixels(w, h)?;
    Ok((mime, w, h))
}

impl Images {
    /// The most images a request can carry by `count`.
    pub fn most(&self) -> u32 {
        match &self.count {
            LengthDist::Fixed { value } => *value,
            LengthDist::Uniform { max, .. }
            | LengthDist::Normal { max, .. }
            | LengthDist::Lognormal { max, .. } => *max,
            _ => MAX_IMAGES_PER_REQUEST,
        }
    }

    /// Which size a uniform draw `u` in [0, 1) picks: by `size_weights`, else all alike.
    pub fn size_at(&self, u: f64) -> usize {
        let n = self.sizes.len().max(1);
        if self.size_weights.len() != self.sizes.len() {
            return ((u * n as f64) as usize).min(n - 1);
        }
        let total: f64 = self.size_weights.iter().sum();
        let mut at = u * total;
        for (i, w) in self.size_weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        // Rounding past the last weight: the last size with any weight.
        self.size_weights
            .iter()
            .rposition(|w| *w > 0.0)
            .unwrap_or(0)
    }

    /// The sizes, parsed (checked by [`Images::check`]).
    pub fn parsed_sizes(&self) -> Vec<(u32, u32)> {
        self.sizes
            .iter()
            .filter_map(|s| parse_size(s).ok())
            .collect()
    }

    /// Checks the table (its files are read with the workload's).
    pub(super) fn check(&self) -> Result<(), Problem> {
        self.check_count()?;
        self.check_sizes()?;
        self.check_reuse_and_tokens()
    }

    /// Images per request: a fixed count or a uniform range, at most
    /// [`MAX_IMAGES_PER_REQUEST`].
    fn check_count(&self) -> Result<(), Problem> {
        match &self.count {
            LengthDist::Fixed { .. } | LengthDist::Uniform { .. } => {}
            _ => {
                return problem(
                    &format!("{K}.count"),
                    "images per request: a fixed count ({ value = 1 }) or a uniform range ({ dist = \"uniform\", min = 1, max = 2 })",
                );
            }
        }
        if let LengthDist::Uniform { min, max } = self.count
            && min > max
        {
            return problem(
                &format!("{K}.count.min"),
                format!("= {min}: must be <= max ({max})"),
            );
        }
        if self.most() > MAX_IMAGES_PER_REQUEST {
            return problem(
                &format!("{K}.count"),
                format!(
                    "asks for up to {} images per request; goodput sends at most {MAX_IMAGES_PER_REQUEST} (engines cap it lower: vLLM's --limit-mm-per-prompt)",
                    self.most()
                ),
            );
        }
        Ok(())
    }

    /// Sizes or a folder (one of them), each size one a server decodes, and their weights.
    fn check_sizes(&self) -> Result<(), Problem> {
        match (&self.folder, self.sizes.is_empty()) {
            (None, true) => {
                return problem(
                    &format!("{K}.sizes"),
                    "name the generated images' sizes (sizes = [\"512x512\"]) or a folder of images (folder = \"images/\")",
                );
            }
            (Some(_), false) => {
                return problem(
                    &format!("{K}.sizes"),
                    "a folder's images have their own sizes: set sizes or folder, not both",
                );
            }
            _ => {}
        }
        for (i, s) in self.sizes.iter().enumerate() {
            if let Err(why) = parse_size(s) {
                return problem(&format!("{K}.sizes[{i}]"), why);
            }
        }
        if self.size_weights.is_empty() {
            return Ok(());
        }
        if self.size_weights.len() != self.sizes.len() {
            return problem(
                &format!("{K}.size_weights"),
                format!(
                    "has {} weights for {} sizes: one per size",
                    self.size_weights.len(),
                    self.sizes.len()
                ),
            );
        }
        let ok = self.size_weights.iter().all(|w| w.is_finite() && *w >= 0.0);
        if !ok || self.size_weights.iter().sum::<f64>() <= 0.0 {
            return problem(
                &format!("{K}.size_weights"),
                "weights are numbers >= 0, at least one above 0",
            );
        }
        Ok(())
    }

    /// A pool only with `reuse = "pool"` (and generated images); a token rule's numbers.
    fn check_reuse_and_tokens(&self) -> Result<(), Problem> {
        match (self.reuse, self.pool) {
            (ImageReuse::Pool, None | Some(0)) => {
                return problem(
                    &format!("{K}.pool"),
                    "reuse = \"pool\" draws images from a pool: set its size (pool = 4)",
                );
            }
            (ImageReuse::Distinct, Some(_)) => {
                return problem(
                    &format!("{K}.pool"),
                    "applies with reuse = \"pool\" only (distinct images never repeat)",
                );
            }
            (ImageReuse::Pool, Some(_)) if self.folder.is_some() => {
                return problem(
                    &format!("{K}.reuse"),
                    "a folder's files are what they are: its images repeat once each has been sent; pool applies to generated images",
                );
            }
            _ => {}
        }
        match self.tokens {
            Some(ImageTokens::Grid { px: 0, .. }) => {
                problem(&format!("{K}.tokens.px"), "must be at least 1 pixel")
            }
            Some(ImageTokens::Fixed { per_image: 0 }) => {
                problem(&format!("{K}.tokens.per_image"), "must be at least 1 token")
            }
            _ => Ok(()),
        }
    }
}

/// The table's key, in errors.
const K: &str = "workload.images";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_refuse_what_no_server_decodes() {
        assert_eq!(parse_size("512x384"), Ok((512, 384)));
        assert_eq!(parse_size(" 64 X 32 "), Ok((64, 32)));
        assert!(parse_size("512").unwrap_err().contains("WIDTHxHEIGHT"));
        assert!(parse_size("0x512").unwrap_err().contains("no pixels"));
        // 100 megapixels: past Pillow's limit.
        assert!(parse_size("10000x10000").unwrap_err().contains("Pillow"));
        assert!(parse_size("9000x9000").is_ok());
    }

    #[test]
    fn token_rules_count_as_the_models_do() {
        let qwen = ImageTokens::Grid { px: 28, extra: 2 };
        // 448/28 = 16 by 336/28 = 12, plus the two markers.
        assert_eq!(qwen.of(448, 336), 16 * 12 + 2);
        // Edges round up: 29 px is two tiles.
        assert_eq!(qwen.of(29, 28), 2 + 2);
        assert_eq!(ImageTokens::Fixed { per_image: 576 }.of(1, 1), 576);
    }
}
