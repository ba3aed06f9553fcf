//! The images a workload sends (`[workload.images]`): a folder's files checked at load from
//! their headers alone, and each request's images made when its body is built — generated
//! as PNG from seeded noise, or read from the folder — then dropped once sent. No image is
//! held longer than its request's body, so memory is bounded by the requests built ahead.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::contract::images::{check_pixels, describe};

/// Most bytes one image file may hold: a 89 MP image (Pillow's limit) is ~270 MB as raw RGB,
/// and no API takes a request that large; 64 MiB is past any real photograph.
pub const MAX_IMAGE_BYTES: u64 = 64 << 20;

/// One file of a folder of images, as its header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    pub path: PathBuf,
    pub width: u32,
    pub height: u32,
    /// Its media type (`image/png`, …), from its header, not its name.
    pub mime: &'static str,
    pub bytes: u64,
}

/// Reads a folder of images: each file's header (format, size) and length, in name order,
/// and a SHA-256 over every file's name and content. Errors name the file.
pub fn read_folder(dir: &Path) -> Result<(Vec<ImageFile>, String), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read the folder: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        // Files, and links (a link to nothing is an error when read, not skipped).
        let is_file = e.file_type().map(|t| !t.is_dir()).unwrap_or(true);
        let hidden = e.file_name().to_string_lossy().starts_with('.');
        if is_file && !hidden && !e.path().is_dir() {
            paths.push(e.path());
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(format!("{}: holds no image files", dir.display()));
    }
    let mut all = Sha256::new();
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let f = read_one(&path, &mut all).map_err(|why| format!("{}: {why}", path.display()))?;
        files.push(f);
    }
    Ok((files, hex::encode(all.finalize())))
}

/// One file's header, length and hash (its name and bytes into `all`), streamed: the file is
/// never held whole.
fn read_one(path: &Path, all: &mut Sha256) -> Result<ImageFile, String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let bytes = f
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    if bytes == 0 {
        return Err("is empty".into());
    }
    if bytes > MAX_IMAGE_BYTES {
        return Err(format!(
            "is {bytes} bytes, more than the {MAX_IMAGE_BYTES} an image may be"
        ));
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    all.update(name.as_bytes());
    all.update([0]);
    let mut header = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("cannot read it: {e}"))?;
        if n == 0 {
            break;
        }
        if header.len() < 64 << 10 {
            header.extend_from_slice(&buf[..n.min((64 << 10) - header.len())]);
        }
        all.update(&buf[..n]);
    }
    let (mime, width, height) = describe(&header)?;
    Ok(ImageFile {
        path: path.to_owned(),
        width,
        height,
        mime,
        bytes,
    })
}

/// One image as sent: its media type and encoded bytes.
pub struct Encoded {
    pub mime: &'static str,
    pub data: Vec<u8>,
}

impl Encoded {
    /// The first 16 hex digits of its SHA-256: what the record keeps of it.
    pub fn short_hash(&self) -> String {
        let mut h = hex::encode(Sha256::digest(&self.data));
        h.truncate(16);
        h
    }

    /// As a `data:` URI, base64 (what the chat APIs' `image_url` takes).
    pub fn data_uri(&self) -> String {
        use base64::Engine;
        let mut s = String::with_capacity(self.data.len() * 4 / 3 + 32);
        s.push_str("data:");
        s.push_str(self.mime);
        s.push_str(";base64,");
        base64::engine::general_purpose::STANDARD.encode_string(&self.data, &mut s);
        s
    }
}

/// A `w`×`h` PNG of noise drawn from `pixels`: the same seed, the same bytes; two seeds, two
/// images with no pixel row in common. Noise, because it does not compress: its bytes are
/// its pixels' (3 a pixel), the upload a photograph of that size at its worst.
pub fn generate(w: u32, h: u32, pixels: u64) -> Result<Encoded, String> {
    check_pixels(w, h)?;
    let mut out = Vec::with_capacity((w as usize * 3 + 1) * h as usize + 1024);
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::NoCompression);
    let fail = |e: png::EncodingError| format!("encoding a {w}x{h} PNG: {e}");
    let mut writer = enc.write_header().map_err(fail)?;
    {
        let mut stream = writer.stream_writer().map_err(fail)?;
        let mut rng = ChaCha8Rng::seed_from_u64(pixels);
        let mut row = vec![0u8; w as usize * 3];
        for _ in 0..h {
            rng.fill_bytes(&mut row);
            stream
                .write_all(&row)
                .map_err(|e| format!("encoding a {w}x{h} PNG: {e}"))?;
        }
        stream.finish().map_err(fail)?;
    }
    writer.finish().map_err(fail)?;
    Ok(Encoded {
        mime: "image/png",
        data: out,
    })
}

/// A folder's file, read again when a request sends it (capped; checked against the size
/// it had at load, so a file changed under a run is an error, not a different workload).
pub fn read_file(f: &ImageFile) -> Result<Encoded, String> {
    let data = crate::text::read_capped(&f.path, MAX_IMAGE_BYTES)
        .map_err(|e| format!("{}: cannot read it: {e}", f.path.display()))?;
    if data.len() as u64 != f.bytes {
        return Err(format!(
            "{}: changed since the run began ({} bytes, then {})",
            f.path.display(),
            f.bytes,
            data.len()
        ));
    }
    Ok(Encoded { mime: f.mime, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_image_is_its_seed_and_reads_back_at_its_size() {
        let a = generate(64, 48, 7).unwrap();
        let b = generate(64, 48, 7).unwrap();
        let c = generate(64, 48, 8).unwrap();
        assert_eq!(a.data, b.data);
        assert_ne!(a.short_hash(), c.short_hash());
        assert_eq!(describe(&a.data).unwrap(), ("image/png", 64, 48));
        // Uncompressed noise: at least its pixels' bytes.
        assert!(a.data.len() >= 64 * 48 * 3);
        assert!(a.data_uri().starts_with("data:image/png;base64,iVBOR"));
    }

    #[test]
    fn a_folder_is_read_by_headers_and_refuses_what_no_server_takes() {
        let dir = std::env::temp_dir().join(format!("goodput-img-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.png"), generate(8, 4, 1).unwrap().data).unwrap();
        std::fs::write(dir.join("a.png"), generate(4, 8, 2).unwrap().data).unwrap();
        let (files, sha) = read_folder(&dir).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].width, files[0].height), (4, 8));
        assert_eq!(sha.len(), 64);
        assert_eq!(
            read_file(&files[1]).unwrap().data.len() as u64,
            files[1].bytes
        );
        std::fs::write(dir.join("c.txt"), "not an image").unwrap();
        let e = read_folder(&dir).unwrap_err();
        assert!(e.contains("c.txt") && e.contains("PNG, JPEG"), "{e}");
        std::fs::write(dir.join("c.txt"), "").unwrap();
        assert!(read_folder(&dir).unwrap_err().contains("is empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
