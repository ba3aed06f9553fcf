//! The leaf every layer may use: deterministic words and hashing shared by the plan
//! (synthetic prompts) and the simulator (its tokenizer and generated text), content hashes
//! (SHA-256) and URL parts.
//!
//! The simulator's tokenizer is deliberately simple and documented: **one token per
//! whitespace-separated word**. Synthetic prompts built from [`WORDS`] therefore have an exact
//! token count on the simulator; against a real engine their length is an approximation and the
//! bundle records the server-reported count beside the requested one.
//!
//! The hash is SplitMix64's finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014), hand-written because `std`'s `DefaultHasher` is not guaranteed to be
//! stable across Rust releases and plans and simulated outputs must be reproducible forever.

/// A fixed vocabulary: short, common English words, each a single simulator token.
pub const WORDS: [&str; 128] = [
    "the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "as", "by", "at",
    "from", "this", "which", "or", "be", "are", "an", "it", "not", "have", "but", "had", "his",
    "they", "were", "her", "one", "all", "their", "there", "been", "has", "when", "who", "will",
    "more", "no", "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them",
    "can", "only", "other", "new", "some", "could", "time", "these", "two", "may", "then", "do",
    "first", "any", "my", "now", "such", "like", "our", "over", "man", "me", "even", "most",
    "made", "after", "also", "did", "many", "before", "must", "through", "back", "years", "where",
    "much", "your", "way", "well", "down", "should", "because", "each", "just", "those", "people",
    "how", "too", "little", "state", "good", "very", "make", "world", "still", "own", "see", "men",
    "work", "long", "get", "here", "between", "both", "life", "being", "under", "never", "day",
    "same", "another", "know", "while", "last", "might", "us",
];

/// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines two values into one hash (order matters).
pub fn mix2(a: u64, b: u64) -> u64 {
    mix64(a ^ mix64(b))
}

/// A uniform number in [0, 1) derived from a hash: deterministic "coin flips" for faults.
pub fn unit_interval(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Stable hash of a string (FNV-1a 64, then mixed).
pub fn hash_str(s: &str) -> u64 {
    hash_bytes(s.as_bytes())
}

/// Stable hash of bytes (FNV-1a 64, then mixed).
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix64(h)
}

/// SHA-256 of bytes, hex: how files (contracts' inputs, predictions) are named by content.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// The first `n` bytes of the SHA-256 of bytes, hex (`2n` digits): short content names
/// (fingerprints, output digests, bundle directory names).
pub fn sha256_prefix(bytes: &[u8], n: usize) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(bytes)[..n])
}

/// The `host:port` part of a URL (`http://user:pw@127.0.0.1:8000/v1` → `127.0.0.1:8000`):
/// without the user and password, the path, the query or the fragment.
pub fn authority(url: &str) -> &str {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let hostport = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    hostport.rsplit_once('@').map_or(hostport, |(_, h)| h)
}

/// The host part of a URL, without its port.
pub fn host_of(url: &str) -> String {
    let hostport = authority(url);
    match hostport.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h.to_owned(),
        _ => hostport.to_owned(),
    }
}

/// The simulator's token count of a text: whitespace-separated words.
pub fn count_words(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}

/// The simulator's token ids of a text: one stable id per word.
pub fn word_ids(text: &str) -> Vec<u64> {
    text.split_whitespace().map(hash_str).collect()
}

/// Whether the server's name for a model is the name asked for: equal, or equal but for
/// Ollama's implicit `:latest` tag.
pub fn same_model(asked: &str, named: &str) -> bool {
    let bare = |s: &str| s.strip_suffix(":latest").unwrap_or(s).to_owned();
    asked == named || bare(asked) == bare(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_single_tokens() {
        for w in WORDS {
            assert_eq!(count_words(w), 1, "{w}");
        }
    }

    #[test]
    fn hashes_are_stable_across_releases() {
        // Pinned values: changing the hash silently changes every plan and simulated output.
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(hash_str("the"), hash_str("the"));
        assert_ne!(hash_str("the"), hash_str("of"));
        let u = unit_interval(mix64(7));
        assert!((0.0..1.0).contains(&u));
    }
}

/// The largest file goodput reads whole (a dataset, trace, length list, reference set or
/// tokenizer; a peer tool's result): ShareGPT's largest split is 0.7 GB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The largest PEM bundle read for `target.tls.ca_file` (a system's whole CA store is about
/// 200 KB).
pub const MAX_PEM_BYTES: u64 = 16 << 20;

/// The largest contract file: a contract is a page of TOML.
pub const MAX_CONTRACT_BYTES: u64 = 16 << 20;

/// Reads a whole file, refusing one larger than `limit` bytes before reading it (and a
/// device or pipe that goes on past it, like `/dev/zero`, once it has): a clear error, never
/// memory without bound.
pub fn read_capped(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    open_capped(path, limit)?.read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(out)
}

fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::other(format!(
        "larger than {}, the limit for a file goodput reads",
        human_bytes(limit)
    ))
}

/// A file opened to be read to at most `limit` bytes (one more, to tell that it went on): a
/// device or socket, or a file already larger, is refused before any of it is read.
fn open_capped(
    path: &std::path::Path,
    limit: u64,
) -> std::io::Result<std::io::Take<std::fs::File>> {
    use std::io::Read;
    regular_file(path)?;
    let f = std::fs::File::open(path)?;
    // Checked again on what was opened: the path may have been swapped in between.
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(not_a_file(&meta));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    Ok(f.take(limit + 1))
}

/// The metadata of `path` (through symlinks) when it is a regular file; else an error saying
/// what it is. Checked before opening: opening a named pipe waits for a writer without end,
/// and a device such as `/dev/zero` reads without end.
pub fn regular_file(path: &std::path::Path) -> std::io::Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path)?;
    match meta.is_file() {
        true => Ok(meta),
        false => Err(not_a_file(&meta)),
    }
}

fn not_a_file(meta: &std::fs::Metadata) -> std::io::Error {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    std::io::Error::other(if t.is_dir() {
        "a directory, not a file"
    } else if t.is_fifo() {
        "a named pipe (FIFO), not a file"
    } else if t.is_socket() {
        "a socket, not a file"
    } else {
        "a device, not a file"
    })
}

/// Each non-blank line of a file of at most `limit` bytes, read one at a time (only one line
/// is held, never the file's text), with its number from 1. An error names the file, and the
/// line where `each` gave one.
pub fn each_line_capped(
    path: &std::path::Path,
    limit: u64,
    mut each: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    use std::io::BufRead;
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut r = std::io::BufReader::new(open_capped(path, limit).map_err(named)?);
    let (mut line, mut read, mut n) = (String::new(), 0u64, 0usize);
    loop {
        line.clear();
        let got = r.read_line(&mut line).map_err(named)?;
        if got == 0 {
            return Ok(());
        }
        read += got as u64;
        if read > limit {
            return Err(named(too_large(limit)));
        }
        n += 1;
        if !line.trim().is_empty() {
            each(&line).map_err(|e| format!("{}:{n}: {e}", path.display()))?;
        }
    }
}

/// The last `n` bytes of a file at most (a server's log can be gigabytes), as text from its
/// first whole line.
pub fn read_tail(path: &std::path::Path, n: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(n);
    f.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    f.take(n).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(match (from > 0, text.find('\n')) {
        (true, Some(i)) => text[i + 1..].to_owned(),
        _ => text.into_owned(),
    })
}

/// An I/O error that names the file or directory it happened to ("No space left on device"
/// alone does not say where).
pub fn io_at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> std::io::Error + '_ {
    move |e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_string(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, limit)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// `1 GiB`, `16 MiB`, `512 B`.
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// An error with every cause after it (`error sending request: client error (Connect):
/// tcp connect error: Connection refused`): the outermost message alone rarely says why.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
}

/// Text made safe for one line of a TOML comment (or any one-line note a file keeps): every
/// control character is written as an escape (`\n`, `\r`, `\t`, `\u{7f}`), since a newline
/// would end the comment and make the rest of the text live TOML. Also says whether any was.
pub fn one_line(s: &str) -> (std::borrow::Cow<'_, str>, bool) {
    if !s.chars().any(char::is_control) {
        return (std::borrow::Cow::Borrowed(s), false);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    (std::borrow::Cow::Owned(out), true)
}

#[cfg(test)]
mod url_tests {
    #[test]
    fn one_line_escapes_every_control_character_and_says_so() {
        let (t, e) = super::one_line("a\nb = 1\r\t\u{7f}\u{85}é");
        assert!(e);
        assert_eq!(t, "a\\nb = 1\\r\\t\\u{7f}\\u{85}é");
        assert!(!t.chars().any(char::is_control));
        assert_eq!(super::one_line("plain"), ("plain".into(), false));
    }

    #[test]
    fn authority_leaves_out_user_password_path_and_query() {
        assert_eq!(
            super::authority("http://u:p@10.0.0.1:80/v1?x=1"),
            "10.0.0.1:80"
        );
        assert_eq!(super::authority("http://[::1]:8000"), "[::1]:8000");
        assert_eq!(
            super::host_of("https://a:b@example.com:443/x"),
            "example.com"
        );
    }

    #[test]
    fn a_device_as_an_input_file_is_refused_before_reading_it() {
        let e = super::read_capped(std::path::Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a device, not a file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        std::fs::write(&p, vec![b'a'; 2048]).unwrap();
        let e = super::read_capped(&p, 1024).unwrap_err();
        assert!(e.to_string().contains("larger than 1 KiB"), "{e}");
        assert_eq!(super::read_capped(&p, 4096).unwrap().len(), 2048);
    }
}
