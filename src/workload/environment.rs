//! What a contract takes from the environment when a run starts: the API key and header values
//! it names by variable. Like the files a contract names, they are inputs read outside the
//! contract itself (a bundle's contract still parses on a machine without them); unlike files,
//! they are secrets, registered for redaction as they are read and never written.

use std::path::Path;

use crate::contract::{Contract, ContractError, HeaderSource, source};

/// Headers to send: name, value, and whether the value is a secret.
pub type Headers = Vec<(String, String, bool)>;

/// What a run reads from the environment when it starts: the API key and the headers' values.
/// Every value read from the environment is registered as a secret as it is read.
#[derive(Default)]
pub struct RequestSecrets {
    pub api_key: Option<String>,
    /// Every `[target.request] headers` entry, with its value, and whether it is a secret.
    pub headers: Headers,
    /// Each class's own `request.headers`, by class name, alike.
    pub class_headers: Vec<(String, Headers)>,
}

impl std::fmt::Debug for RequestSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values are deliberately not shown.
        let names: Vec<&str> = self.headers.iter().map(|h| h.0.as_str()).collect();
        f.debug_struct("RequestSecrets")
            .field("api_key", &self.api_key.is_some())
            .field("headers", &names)
            .finish()
    }
}

/// Reads what the contract takes from the environment. `Err`: the key that names an unset
/// variable, and what to do.
pub fn request_secrets(c: &Contract) -> Result<RequestSecrets, (String, String)> {
    let read = |key: String, var: &str| {
        let v = std::env::var(var).map_err(|_| {
                (
                    key,
                    format!("names the environment variable `{var}`, which is not set (export it, or remove the key)"),
                )
            })?;
        crate::secrets::register(&v);
        Ok::<String, (String, String)>(v)
    };
    let mut out = RequestSecrets::default();
    if let Some(var) = &c.target.api_key_env {
        out.api_key = Some(read("target.api_key_env".into(), var)?);
    }
    out.headers = headers("target.request", &c.target.request.headers, &read)?;
    for (k, class) in c.classes.iter().enumerate() {
        if !class.request.headers.is_empty() {
            let prefix = crate::contract::classes::key(k, "request");
            let hs = headers(&prefix, &class.request.headers, &read)?;
            out.class_headers.push((class.name.clone(), hs));
        }
    }
    Ok(out)
}

type Problem = (String, String);

/// The longest header value read from the environment (as the contract's own are bounded).
const MAX_HEADER_VALUE_BYTES: usize = 8 << 10;
/// Reads an environment variable named at a key (the key, the variable's name).
type ReadVar = dyn Fn(String, &str) -> Result<String, Problem>;

/// One table of headers, each env-sourced value read (a secret) and checked.
fn headers(
    prefix: &str,
    table: &std::collections::BTreeMap<String, HeaderSource>,
    read: &ReadVar,
) -> Result<Headers, Problem> {
    let mut out = Vec::new();
    for (name, src) in table {
        let (value, secret) = match src {
            // A credential written literally is still a credential (registered as a secret
            // when the contract was read).
            HeaderSource::Value(v) => (v.clone(), crate::secrets::is_credential_header(name)),
            HeaderSource::Env { env } => {
                let key = format!("{prefix}.headers.{name}.env");
                let v = read(key.clone(), env)?;
                if v.len() > MAX_HEADER_VALUE_BYTES {
                    // A secret: its size said, never its value.
                    return Err((
                        key,
                        format!(
                            "names `{env}`, whose value is {} long; at most {} (servers refuse larger headers, often as 431)",
                            crate::text::human_bytes(v.len() as u64),
                            crate::text::human_bytes(MAX_HEADER_VALUE_BYTES as u64)
                        ),
                    ));
                }
                if reqwest::header::HeaderValue::from_str(&v).is_err() {
                    // The value is a secret: said to be wrong, never shown.
                    return Err((
                        key,
                        format!(
                            "names `{env}`, whose value is not a valid HTTP header value (visible ASCII only)"
                        ),
                    ));
                }
                (v, true)
            }
        };
        out.push((name.clone(), value, secret));
    }
    Ok(out)
}

/// [`request_secrets`] for a run about to start from contract text, its error located
/// in that text, so an unset variable stops the run before any request is sent.
pub fn check_environment(c: &Contract, src: &str, path: &Path) -> Result<(), ContractError> {
    request_secrets(c)
        .map(drop)
        .map_err(|(key, message)| ContractError::Invalid {
            path: path.to_owned(),
            line: source::line_of_key(src, &key),
            key: Some(key),
            message,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Contract, ContractError> {
        crate::contract::parse(s, Path::new("c.toml"))
    }

    /// `[target.request]`: every mistake is a contract error with file, line and key, before
    /// any request; an unset variable is found when a run is about to start.
    #[test]
    fn request_extras_are_checked_and_located() {
        let load = "[load]\nkind = \"open\"\nrate = 1\nrequests = 10\n";
        let t = "[target]\nurl = \"http://h:1\"\n";
        for (src, want) in [
            (
                format!("{t}api = \"openai-chit\"\n{load}"),
                "c.toml:3: `target.api`: unknown variant `openai-chit`",
            ),
            (
                format!("{t}[target.request]\nextra_body = \"thinking\"\n{load}"),
                "c.toml:4: `target.request.extra_body`: extra_body must be a table",
            ),
            (
                format!("{t}[target.request]\nextra_body = {{ max_tokens = 9 }}\n{load}"),
                "c.toml:4: `target.request.extra_body.max_tokens`: `max_tokens` is a field goodput sets itself",
            ),
            (
                format!("{t}[target.request]\n\nextra_body = {{ stream_options = {{}} }}\n{load}"),
                "c.toml:5: `target.request.extra_body.stream_options`",
            ),
            (
                format!("{t}[target.request]\nheaders = {{ \"x request\" = \"1\" }}\n{load}"),
                "is not a valid HTTP header name",
            ),
            (
                format!("{t}[target.request]\nheaders = {{ x-request-id = \"1\" }}\n{load}"),
                "`target.request.headers.x-request-id`: cannot be set here: goodput sets it",
            ),
            (
                format!("{t}[target.request]\nheaders = {{ x-k = {{ env = \"A=b\" }} }}\n{load}"),
                "`target.request.headers.x-k.env`: must be the *name*",
            ),
            // Issue #21: what an API cannot do is refused where the contract asks for it.
            (
                format!(
                    "{t}api = \"anthropic-messages\"\n[workload]\nenforce_output_length = true\n{load}"
                ),
                "c.toml:5: `workload.enforce_output_length`: api = \"anthropic-messages\" has no field that asks for an exact output length",
            ),
            (
                format!("{t}api = \"openai-embeddings\"\n[workload]\nstream = true\n{load}"),
                "c.toml:5: `workload.stream`: api = \"openai-embeddings\" answers whole, never streamed",
            ),
            (
                format!("{t}[workload]\nbatch = 4\n{load}"),
                "c.toml:4: `workload.batch`: is 4, but only api = \"openai-embeddings\" sends several inputs per request",
            ),
            (
                format!(
                    "{t}api = \"openai-embeddings\"\n[quality]\nmode = \"consistency\"\n{load}"
                ),
                "`quality.mode`: api = \"openai-embeddings\" generates no text to compare or score",
            ),
            (
                format!(
                    "{t}[target.request]\nextra_body = {{ stream_options = {{ include_usage = false }} }}\n{load}"
                ),
                "`target.request.extra_body.stream_options.include_usage`: `stream_options.include_usage` is a field goodput sets itself",
            ),
            (
                format!(
                    "{t}api = \"tgi-generate\"\n[target.request]\nextra_body = {{ parameters = {{ max_new_tokens = 3 }} }}\n{load}"
                ),
                "`target.request.extra_body.parameters.max_new_tokens`",
            ),
            (
                format!(
                    "{t}api = \"anthropic-messages\"\napi_key_env = \"K\"\n[target.request]\nheaders = {{ x-api-key = \"k\" }}\n{load}"
                ),
                "`target.request.headers.x-api-key`: cannot be set here: target.api_key_env sets it for this API",
            ),
            (
                format!(
                    "{t}api = \"anthropic-messages\"\n[target.request]\nheaders = {{ anthropic-version = \"2024-01-01\" }}\n{load}"
                ),
                "`target.request.headers.anthropic-version`: cannot be set here: the API's adapter sets it",
            ),
        ] {
            let e = parse_str(&src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
        // The API's limits turn defaults off (written so in the bundle's contract), and a
        // nested extra field that goodput does not set reaches its table.
        let tgi = parse_str(&format!(
            "{t}api = \"tgi-generate\"\n[target.request]\nextra_body = {{ parameters = {{ repetition_penalty = 1.1 }} }}\n{load}"
        ))
        .unwrap();
        assert!(!tgi.workload.enforce_output_length);
        assert!(tgi.to_toml().contains("enforce_output_length = false"));
        let emb = parse_str(&format!("{t}api = \"openai-embeddings\"\n{load}")).unwrap();
        assert!(!emb.workload.stream);
        // A field goodput does not set for this contract may be sent: `ignore_eos` when the
        // output length is not enforced, `seed` without a sampling seed.
        let src = format!(
            "{t}[target.request]\nextra_body = {{ ignore_eos = false, seed = 3, chat_template_kwargs = {{ enable_thinking = true }} }}\nheaders = {{ x-session = \"a\", x-key = {{ env = \"GOODPUT_TEST_SURELY_UNSET\" }} }}\n[workload]\nenforce_output_length = false\n{load}"
        );
        let c = parse_str(&src).unwrap();
        assert_eq!(c.target.request.extra_body.len(), 3);
        // Parsing does not read the environment (a bundle read elsewhere still loads); a run
        // about to start does, and says where the variable is named.
        let e = check_environment(&c, &src, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.toml:5: `target.request.headers.x-key.env`: names the environment variable `GOODPUT_TEST_SURELY_UNSET`, which is not set"),
            "{e}"
        );
        // Different extra fields are a different target.
        let other = parse_str(&src.replace("seed = 3", "seed = 4")).unwrap();
        assert_ne!(c.fingerprints().target, other.fingerprints().target);
        // Without extras, the target fingerprint is what it was before they existed.
        let plain = parse_str(&format!("{t}{load}")).unwrap();
        assert!(!plain.to_toml().contains("[target.request]"));
    }
}
