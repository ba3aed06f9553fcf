//! Redaction in one place. Every secret goodput learns is registered here once, as it learns
//! it: the API key (`target.api_key_env`), a password in `target.url`, the values of
//! `[cold_start] env` (with the `Basic` credential a URL's user and password become). Every file
//! a bundle writes, every request record, every contract written out and every line goodput
//! prints passes through [`redact`], so a secret a server echoes back (a 401 body quoting the
//! key, a probe answer repeating a header) is replaced by [`MASK`] too.
//!
//! Values shorter than [`MIN_LEN`] are not registered: replacing every `0` or `true` in a
//! bundle would destroy it, and so short a value is no secret. Registration is process-wide,
//! like the environment the secrets come from.

use std::borrow::Cow;
use std::sync::RwLock;

/// What a secret is replaced by.
pub const MASK: &str = "[redacted]";

/// The shortest value treated as a secret.
pub const MIN_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Whether a header of this name carries a credential, whatever its value's source: its value
/// is redacted everywhere even when written literally in a contract, and it is not sent on to
/// another origin when a redirect is followed (as curl and browsers drop them).
pub fn is_credential_header(name: &str) -> bool {
    is_credential_name(name)
}

/// Whether a name (a header's, a flag's, a span attribute's, a JSON key's) says it holds a
/// credential. Its words are split at dashes, underscores, dots and spaces: one of secret,
/// password, passwd, auth, authorization, cookie, credential(s), apikey anywhere, or `key` /
/// `token` as the last word unless a counting word comes before it (`time_to_first_token`,
/// `cache.key` and `max_tokens` are figures, not credentials). `x-api-key`, `api_key`,
/// `--hf-token`, `Ocp-Apim-Subscription-Key` and `http.request.header.authorization` are;
/// `--tokenizer` and `x-request-id` are not.
pub fn is_credential_name(name: &str) -> bool {
    const ANYWHERE: [&str; 9] = [
        "apikey",
        "secret",
        "password",
        "passwd",
        "auth",
        "authorization",
        "cookie",
        "credential",
        "credentials",
    ];
    // Words before `key` or `token` that make it a figure or an index, not a credential.
    const COUNTING: [&str; 20] = [
        "first",
        "last",
        "next",
        "per",
        "input",
        "output",
        "prompt",
        "completion",
        "generated",
        "max",
        "min",
        "num",
        "total",
        "cache",
        "cached",
        "partition",
        "sort",
        "routing",
        "hash",
        "idempotency",
    ];
    let words: Vec<&str> = name
        .split(['-', '_', '.', ' '])
        .filter(|w| !w.is_empty())
        .collect();
    if words
        .iter()
        .any(|w| ANYWHERE.iter().any(|c| w.eq_ignore_ascii_case(c)))
    {
        return true;
    }
    match words.as_slice() {
        [.., before, last]
            if ["key", "token"]
                .iter()
                .any(|c| last.eq_ignore_ascii_case(c)) =>
        {
            !COUNTING.iter().any(|c| before.eq_ignore_ascii_case(c))
        }
        [only] => ["key", "token"]
            .iter()
            .any(|c| only.eq_ignore_ascii_case(c)),
        _ => false,
    }
}

/// A value as any file keeps it, under `name`: [`MASK`] whole when the name says it holds a
/// credential; else with a URL's password masked and every registered secret redacted. The one
/// rule the span store, the importer and the record writer share.
pub fn scrub<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if is_credential_name(name) {
        return Cow::Borrowed(MASK);
    }
    let url = url_without_password(value);
    match redact(&url) {
        Cow::Borrowed(_) if url == value => Cow::Borrowed(value),
        r => Cow::Owned(r.into_owned()),
    }
}

/// Registers a secret (ignored when shorter than [`MIN_LEN`]); longer ones are matched first.
pub fn register(secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let mut s = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !s.iter().any(|x| x == secret) {
        s.push(secret.to_owned());
        s.sort_by_key(|x| std::cmp::Reverse(x.len()));
    }
}

/// Registers what a URL carries: its password (raw and percent-decoded), and the `Basic`
/// credential an HTTP client sends for its user and password.
pub fn register_url(url: &str) {
    let Some((user, pass)) = userinfo(url) else {
        return;
    };
    register(pass);
    let user_d = percent_decode(user);
    let pass_d = percent_decode(pass);
    register(&pass_d);
    use base64::Engine;
    register(&base64::engine::general_purpose::STANDARD.encode(format!("{user_d}:{pass_d}")));
}

/// `text` with every registered secret replaced by [`MASK`] (borrowed when none occurs).
pub fn redact(text: &str) -> Cow<'_, str> {
    let s = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if s.is_empty() || !s.iter().any(|x| text.contains(x.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for x in s.iter() {
        if out.contains(x.as_str()) {
            out = out.replace(x.as_str(), MASK);
        }
    }
    Cow::Owned(out)
}

/// Whether any secret is registered (a caller may skip its own work when none is).
pub fn any() -> bool {
    !SECRETS.read().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// A URL with its password replaced by [`MASK`] (the user name kept); any other text as it is.
pub fn url_without_password(url: &str) -> String {
    match userinfo(url) {
        Some((_, pass)) if !pass.is_empty() => {
            let at = url.find("://").map_or(0, |i| i + 3);
            let end = at + url[at..].find('@').unwrap_or(0);
            let colon = at + url[at..end].find(':').unwrap_or(0);
            format!("{}:{MASK}{}", &url[..colon], &url[end..])
        }
        _ => url.to_owned(),
    }
}

/// `user` and `password` of `scheme://user:password@host…`, as written (percent-encoded).
fn userinfo(url: &str) -> Option<(&str, &str)> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let info = &authority[..authority.rfind('@')?];
    Some(info.split_once(':').unwrap_or((info, "")))
}

/// Percent-decoding (RFC 3986) of a URL's user or password; bytes that do not decode stay.
/// Hand-written: the few lines do not justify a crate for one field.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_hold_credentials_are_told_from_those_that_do_not() {
        for yes in [
            "Authorization",
            "x-api-key",
            "api_key",
            "hf-token",
            "X-Auth-Token",
            "http.request.header.authorization",
            "Cookie",
            "client_secret",
            "token",
            "--hf-token",
            "Ocp-Apim-Subscription-Key",
            "Private-Token",
        ] {
            assert!(is_credential_name(yes), "{yes}");
        }
        for no in [
            "max_tokens",
            "tokenizer",
            "x-request-id",
            "traceparent",
            "gen_ai.usage.input_tokens",
            "content-type",
            "gen_ai.latency.time_to_first_token",
            "cache.key",
            "inter_token_latency",
            "Idempotency-Key",
        ] {
            assert!(!is_credential_name(no), "{no}");
        }
        assert_eq!(scrub("api_key", "sk-1"), MASK);
        assert_eq!(
            scrub("url.full", "http://u:pw@h:1/x"),
            "http://u:[redacted]@h:1/x"
        );
        assert_eq!(scrub("name", "plain"), "plain");
    }

    #[test]
    fn a_url_password_is_masked_and_registered_with_its_basic_credential() {
        let url = "http://alice:pa%21ss-word@10.0.0.1:8000/v1";
        assert_eq!(
            url_without_password(url),
            "http://alice:[redacted]@10.0.0.1:8000/v1"
        );
        register_url(url);
        assert_eq!(redact("pw pa!ss-word here"), "pw [redacted] here");
        // base64("alice:pa!ss-word")
        assert_eq!(redact("Basic YWxpY2U6cGEhc3Mtd29yZA=="), "Basic [redacted]");
        assert_eq!(url_without_password("http://host:80/x"), "http://host:80/x");
        assert_eq!(
            url_without_password("http://bob@host/x"),
            "http://bob@host/x"
        );
    }

    #[test]
    fn short_values_are_not_secrets_and_text_without_one_is_borrowed() {
        register("0");
        register("sk-test-abcdef");
        assert!(matches!(redact("0 1 2"), Cow::Borrowed(_)));
        assert_eq!(redact("key=sk-test-abcdef."), "key=[redacted].");
    }
}
