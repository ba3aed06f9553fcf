//! `vllm bench sweep serve` (vLLM 0.32.0) as a `goodput tune`: its `--serve-cmd` becomes the
//! contract's `[cold_start] launch` (on a port goodput picks), its `--bench-cmd` the workload
//! (imported as `vllm bench serve` is), and the one key its `--serve-params` file varies the
//! setting the tune tries. vLLM's sweep runs the bench command at the rates it is given per
//! server setting; the tune searches each setting's capacity at the SLO instead, so the rates a
//! `--bench-params` file varies are not tried, and a file that varies the workload is refused.
//!
//! The parameter files are read as vLLM's `ParameterSweep.read_json` reads them (a list of
//! objects, or an object of named objects), and applied to a command as its `apply_to_cmd`
//! does: a key already on the command replaces the value after it (spelled with dashes or
//! underscores), else `--key-with-dashes value` is appended; `true` is the bare flag and
//! `false` its `--no-` form; an object is passed as JSON.

use std::path::Path;

use crate::peers::command_line::{Draft, ImportError, Imported, toml_string};
use crate::peers::flags::{Spec, Takes::*};

use super::VERSION;

/// Every flag of `vllm bench sweep serve` 0.32.0.
const FLAGS: &[(&str, crate::peers::flags::Takes)] = &[
    ("help", Nothing),
    ("serve-cmd", Text),
    ("bench-cmd", Text),
    ("after-bench-cmd", Text),
    ("show-stdout", Nothing),
    ("server-ready-timeout", Int),
    ("serve-params", Text),
    ("bench-params", Text),
    ("link-vars", Text),
    ("output-dir", Text),
    ("num-runs", Int),
    ("dry-run", Nothing),
    ("resume", Text),
];

const SPEC: Spec = Spec {
    tool: "vllm bench sweep serve",
    version: VERSION,
    flags: FLAGS,
    aliases: &[("-h", "help"), ("-o", "output-dir")],
    gone: &[],
    underscores: true,
    negatable: false,
    lists_accumulate: false,
};

/// The bench parameters that only set the load: the tune searches the rate itself.
const LOAD_KEYS: &[&str] = &[
    "request_rate",
    "max_concurrency",
    "num_prompts",
    "burstiness",
];

/// A command line of `vllm bench sweep serve` (the words `sweep serve` first, `vllm bench`
/// already read) as a tune's contract, and the `goodput tune` command that runs it.
pub fn import(args: &[String]) -> Result<Imported, ImportError> {
    let rest = match args.first().map(String::as_str) {
        Some("serve") => &args[1..],
        other => {
            return Err(ImportError(format!(
                "`vllm bench sweep {}`: goodput imports `vllm bench sweep serve` of vLLM's sweeps",
                other.unwrap_or("")
            )));
        }
    };
    let f = SPEC.read(rest, SPEC.tool)?;
    let need = |name: &str| {
        f.text(name)
            .ok_or_else(|| ImportError(format!("`--{name}` is required (as vLLM requires it)")))
    };
    let serve = split(need("serve-cmd")?, "--serve-cmd")?;
    let mut bench = split(need("bench-cmd")?, "--bench-cmd")?;
    let params = match f.text("serve-params") {
        Some(p) => records(Path::new(p), "--serve-params")?,
        None => Vec::new(),
    };
    let (key, values, fixed) = varied(&params)?;
    let mut notes = Vec::new();
    if let Some(p) = f.text("bench-params") {
        let recs = records(Path::new(p), "--bench-params")?;
        notes.extend(bench_params(&recs, &mut bench)?);
    }
    if bench.len() >= 3 && bench[0] == "vllm" && bench[1] == "bench" && bench[2] == "serve" {
        bench.drain(..3);
    } else {
        return Err(ImportError(format!(
            "`--bench-cmd {}`: not a `vllm bench serve` command",
            crate::peers::command_line::shown(&bench)
        )));
    }
    // The bench command read against `vllm bench serve`'s own flag table (underscores, `=`).
    let given = super::SPEC.read(&bench, super::SPEC.tool)?;
    let slo_given = given.has("goodput");
    if !given.num("request-rate").is_some_and(f64::is_finite) {
        bench.extend(["--request-rate".to_owned(), "1".to_owned()]);
        notes.push("the bench command gives no finite --request-rate: each setting's capacity search starts at 1 req/s (load.rate) and brackets from there".to_owned());
    }
    let mut d = super::draft(&bench, "imported-vllm-sweep")?;
    let launch = launch(&serve, &key, &values, &fixed, &mut d)?;
    server(&mut d, &f, &launch, &key);
    for n in notes {
        d.annotate(n);
    }
    unmapped(&f, &mut d);
    if !slo_given {
        d.annotate("the bench command gives no --goodput: goodput tune searches each setting's capacity at an SLO, so add one ([slo], e.g. ttft_ms = 500 and tpot_ms = 50) before running it");
    }
    let setting = format!("{key}={}", values.join(","));
    d.annotate(format!(
        "--serve-params: the setting the tune tries is {setting}; each value's server is launched, its capacity searched at the SLO, and stopped (vLLM's sweep runs its bench command at the given rates instead)"
    ));
    let mut imported = d.finish(&format!(
        "vllm bench sweep serve {}",
        crate::peers::command_line::shown(rest)
    ))?;
    // Quoted only when the shell would read it otherwise (a value with a space or a quote).
    let plain = setting
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_=,.:/+-".contains(c));
    let arg = match plain {
        true => setting,
        false => shlex::try_quote(&setting).map_or(setting.clone(), |q| q.into_owned()),
    };
    imported.next = Some(format!("goodput tune FILE --setting {arg}"));
    Ok(imported)
}

/// The target and `[cold_start]`: each setting's server launched with `launch` on a port
/// goodput picks, ready at vLLM's `/health`.
fn server(d: &mut Draft, f: &crate::peers::flags::Flags, launch: &[String], key: &str) {
    d.str(
        "target",
        "url",
        "http://127.0.0.1:{port}",
        "--serve-cmd: a free loopback port goodput picks for each setting's server",
    );
    d.unset("load", "concurrency");
    let launch_toml = toml_edit::Value::Array(launch.iter().map(String::as_str).collect());
    d.set(
        "cold_start",
        "launch",
        launch_toml.to_string(),
        format!("--serve-cmd with --serve-params' {key} as {{{key}}} and its port as {{port}}"),
    );
    d.str(
        "cold_start",
        "ready_path",
        "/health",
        "vLLM's readiness endpoint",
    );
    let (t, tfrom) = f.or("server-ready-timeout", 300.0);
    d.set(
        "cold_start",
        "ready_timeout",
        toml_string(&format!("{t}s")),
        tfrom,
    );
}

/// A command as vLLM splits it (`shlex.split`).
fn split(cmd: &str, flag: &str) -> Result<Vec<String>, ImportError> {
    match shlex::split(cmd) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(ImportError(format!(
            "`{flag}`: not a command line (empty, or an unclosed quote)"
        ))),
    }
}

/// A parameter file's records, as vLLM reads them: a list of objects, or an object whose
/// values are objects (their names are vLLM's labels, not parameters; read in the names'
/// order, where vLLM keeps the file's).
fn records(
    path: &Path,
    flag: &str,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, ImportError> {
    let at = path.display();
    let text = crate::text::read_capped_string(path, 16 << 20)
        .map_err(|e| ImportError(format!("{flag} {at}: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        ImportError(format!(
            "{flag} {at}: not JSON (line {}, column {}: {e})",
            e.line(),
            e.column()
        ))
    })?;
    let items: Vec<(String, serde_json::Value)> = match v {
        serde_json::Value::Array(a) => a
            .into_iter()
            .enumerate()
            .map(|(i, x)| (format!("[{i}]"), x))
            .collect(),
        serde_json::Value::Object(o) => o.into_iter().map(|(k, x)| (format!(".{k}"), x)).collect(),
        _ => {
            return Err(ImportError(format!(
                "{flag} {at}: a list of objects, or an object of named objects"
            )));
        }
    };
    items
        .into_iter()
        .map(|(at_key, x)| match x {
            serde_json::Value::Object(mut o) => {
                o.remove("_benchmark_name");
                Ok(o)
            }
            _ => Err(ImportError(format!(
                "{flag} {at}: item {at_key} is not an object of parameters"
            ))),
        })
        .collect()
}

/// The keys of `recs`, sorted: those some record gives otherwise than the first (or leaves
/// out), and those every record gives alike.
fn split_keys(recs: &[serde_json::Map<String, serde_json::Value>]) -> (Vec<&String>, Vec<&String>) {
    let mut keys: Vec<&String> = recs.iter().flat_map(|r| r.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .partition(|k| recs.iter().any(|r| r.get(*k) != recs[0].get(*k)))
}

/// The one key the records vary, its values as the command takes them, and the keys every
/// record gives alike.
#[allow(clippy::type_complexity)]
fn varied(
    recs: &[serde_json::Map<String, serde_json::Value>],
) -> Result<(String, Vec<String>, Vec<(String, serde_json::Value)>), ImportError> {
    let (varying, fixed) = split_keys(recs);
    let key = match varying.as_slice() {
        [one] => (*one).clone(),
        [] => {
            return Err(ImportError(
                "--serve-params varies no server setting (or is not given): goodput tune tries one setting's values; import the bench command alone (`goodput import vllm-bench -- vllm bench serve …`) to run one server".into(),
            ));
        }
        many => {
            return Err(ImportError(format!(
                "--serve-params varies {} together: goodput tune tries one launch setting at a time; give a file that varies one of them (the others fixed)",
                many.iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            )));
        }
    };
    let mut values = Vec::new();
    for r in recs {
        let v = r.get(&key).ok_or_else(|| {
            ImportError(format!(
                "--serve-params: a record leaves {key} out: every record must give the setting varied"
            ))
        })?;
        let text = match v {
            serde_json::Value::Bool(true) => format!("--{}", key.replace('_', "-")),
            serde_json::Value::Bool(false) => format!("--no-{}", key.replace('_', "-")),
            serde_json::Value::Null => {
                return Err(ImportError(format!(
                    "--serve-params: {key} is null in a record"
                )));
            }
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if text.contains(',') {
            return Err(ImportError(format!(
                "--serve-params: {key}'s value {text} holds a comma, which goodput tune's --setting list cannot carry"
            )));
        }
        if !values.contains(&text) {
            values.push(text);
        }
    }
    let fixed = fixed
        .into_iter()
        .filter_map(|k| recs.first()?.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    Ok((key, values, fixed))
}

/// Where `key` stands on `cmd` (with dashes or underscores, as vLLM looks for it).
fn position(cmd: &[String], key: &str) -> Option<usize> {
    let dashed = format!("--{}", key.replace('_', "-"));
    let under = format!("--{}", key.replace('-', "_"));
    cmd.iter().position(|a| *a == dashed || *a == under)
}

/// Where `key` or its `--no-` form stands on `cmd`.
fn flag_at(cmd: &[String], key: &str) -> Option<usize> {
    position(cmd, key).or_else(|| position(cmd, &format!("no-{key}")))
}

/// `key` set to `value` on `cmd`: the value after the flag replaced, else the flag appended;
/// a switch (`flag`: its whole text, `--x` or `--no-x`) replaces the flag itself.
fn apply(cmd: &mut Vec<String>, key: &str, value: &serde_json::Value) {
    let dashed = format!("--{}", key.replace('_', "-"));
    let at = flag_at(cmd, key);
    match value {
        serde_json::Value::Bool(b) => {
            let flag = if *b {
                dashed
            } else {
                format!("--no-{}", &dashed[2..])
            };
            match at {
                Some(i) => cmd[i] = flag,
                None => cmd.push(flag),
            }
        }
        v => {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match at {
                Some(i) if i + 1 < cmd.len() => cmd[i + 1] = text,
                _ => cmd.extend([dashed, text]),
            }
        }
    }
}

/// The launch command: the serve command with the fixed parameters applied, the setting's
/// placeholder where its value goes, and `{port}` for the port.
fn launch(
    serve: &[String],
    key: &str,
    values: &[String],
    fixed: &[(String, serde_json::Value)],
    d: &mut Draft,
) -> Result<Vec<String>, ImportError> {
    let mut cmd = credentials(serve, d);
    for (k, v) in fixed {
        apply(&mut cmd, k, v);
    }
    let mark = format!("{{{key}}}");
    let switch = values.iter().all(|v| v.starts_with("--"));
    if switch {
        match flag_at(&cmd, key) {
            Some(i) => cmd[i] = mark,
            None => cmd.push(mark),
        }
    } else {
        apply(&mut cmd, key, &serde_json::Value::String(mark));
    }
    match cmd.iter().position(|a| a == "--port") {
        Some(i) if i + 1 < cmd.len() => cmd[i + 1] = "{port}".into(),
        _ => match cmd.iter().position(|a| a.starts_with("--port=")) {
            Some(i) => cmd[i] = "--port={port}".into(),
            None => cmd.extend(["--port".to_owned(), "{port}".to_owned()]),
        },
    }
    match cmd.iter().position(|a| a == "--host") {
        Some(i) if i + 1 < cmd.len() => {
            if !matches!(
                cmd[i + 1].as_str(),
                "127.0.0.1" | "localhost" | "0.0.0.0" | "::1"
            ) {
                d.annotate(format!(
                    "--serve-cmd --host {}: goodput reaches each server on 127.0.0.1, so the host is set to it",
                    cmd[i + 1]
                ));
                cmd[i + 1] = "127.0.0.1".into();
            }
        }
        _ => cmd.extend(["--host".to_owned(), "127.0.0.1".to_owned()]),
    }
    Ok(cmd)
}

/// The serve command without its credentials (`--api-key KEY`, `--hf-token=…`): never written
/// into the contract, masked wherever the command line is echoed, and said how to give them.
fn credentials(serve: &[String], d: &mut Draft) -> Vec<String> {
    use crate::peers::command_line::credential_flag;
    let mut out = Vec::new();
    let mut it = serve.iter();
    while let Some(a) = it.next() {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) if credential_flag(f) => (f.to_owned(), Some(v.to_owned())),
            _ if credential_flag(a) => (a.clone(), it.next().cloned()),
            _ => {
                out.push(a.clone());
                continue;
            }
        };
        if let Some(v) = value {
            d.secret(&v);
        }
        d.annotate(format!(
            "--serve-cmd {flag}: a credential, not written into the launch command; give it to the server from its environment (vLLM reads VLLM_API_KEY for --api-key) and to goodput as [target.request] headers from an environment variable"
        ));
    }
    out
}

/// `--bench-params`: keys every record gives alike are applied to the bench command; keys
/// that vary only the load are left to the capacity search (said); any other that varies is a
/// second workload, refused.
fn bench_params(
    recs: &[serde_json::Map<String, serde_json::Value>],
    bench: &mut Vec<String>,
) -> Result<Vec<String>, ImportError> {
    let (varying, fixed) = split_keys(recs);
    for k in fixed {
        if let Some(v) = recs.first().and_then(|r| r.get(k)) {
            apply(bench, k, v);
        }
    }
    let mut notes = Vec::new();
    for k in varying {
        if !LOAD_KEYS.contains(&k.replace('-', "_").as_str()) {
            return Err(ImportError(format!(
                "--bench-params varies {k}, the workload itself: a tune holds the workload fixed; import one command per workload (its value fixed in --bench-cmd)"
            )));
        }
        notes.push(format!(
            "--bench-params varies {k}: not tried; goodput tune searches each setting's capacity (the open-loop rate at which it meets the SLO) instead"
        ));
    }
    Ok(notes)
}

/// The sweep's own flags goodput has no use for, each said.
fn unmapped(f: &crate::peers::flags::Flags, d: &mut Draft) {
    let said = [
        (
            "num-runs",
            "goodput's capacity search sizes each point's sample itself, and the best two settings are decided by a paired A/B (--decide-blocks)",
        ),
        (
            "link-vars",
            "goodput tune searches the open-loop rate, so no bench parameter follows a serve parameter",
        ),
        (
            "after-bench-cmd",
            "goodput runs nothing between points; each setting's server is launched afresh",
        ),
        (
            "output-dir",
            "goodput writes the tune's bundle under --out (runs/ by default)",
        ),
        (
            "resume",
            "goodput tune --resume TUNE_BUNDLE continues a stopped tune",
        ),
        (
            "dry-run",
            "goodput plan shows a contract's plan without sending",
        ),
        (
            "show-stdout",
            "each server's output is kept in its setting's bundle",
        ),
    ];
    for (flag, what) in said {
        if f.has(flag) {
            d.annotate(format!("{}: not mapped; {what}", f.from(flag)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        shlex::split(s).unwrap()
    }

    fn params(dir: &Path, name: &str, json: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, json).unwrap();
        p.display().to_string()
    }

    #[test]
    fn a_sweep_over_one_serve_setting_becomes_a_tune_contract() {
        let dir = tempfile::tempdir().unwrap();
        let sp = params(
            dir.path(),
            "serve.json",
            r#"[{"max_num_seqs": 1, "enable_prefix_caching": false}, {"max_num_seqs": 4, "enable_prefix_caching": false}]"#,
        );
        let cmd = format!(
            "vllm bench sweep serve --serve-cmd 'vllm serve m --port 8000 --max-num-seqs 64' --bench-cmd 'vllm bench serve --model m --random-input-len 24 --random-output-len 16 --num-prompts 20' --serve-params {sp} --num-runs 3"
        );
        let imp = crate::peers::Tool::VllmBench.import(&args(&cmd)).unwrap();
        let c = crate::contract::parse(&imp.contract, Path::new("x.toml")).unwrap();
        let launch = c.cold_start.unwrap().launch.unwrap();
        assert_eq!(
            launch,
            [
                "vllm",
                "serve",
                "m",
                "--port",
                "{port}",
                "--max-num-seqs",
                "{max_num_seqs}",
                "--no-enable-prefix-caching",
                "--host",
                "127.0.0.1"
            ]
        );
        assert_eq!(c.target.url.as_deref(), Some("http://127.0.0.1:{port}"));
        assert_eq!(c.load.rate, Some(1.0), "{}", imp.contract);
        assert_eq!(
            imp.next.as_deref(),
            Some("goodput tune FILE --setting max_num_seqs=1,4")
        );
        assert!(
            imp.breaks.iter().any(|b| b.contains("--num-runs")),
            "{:?}",
            imp.breaks
        );
        assert!(imp.keys.contains(&"cold_start.launch".to_owned()));
    }

    #[test]
    fn a_switch_and_named_records_are_read_as_vllm_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let sp = params(
            dir.path(),
            "serve.json",
            r#"{"on": {"enable_prefix_caching": true}, "off": {"enable_prefix_caching": false}}"#,
        );
        let bp = params(
            dir.path(),
            "bench.json",
            r#"[{"request_rate": 1, "random_input_len": 64}, {"request_rate": 4, "random_input_len": 64}]"#,
        );
        let cmd = format!(
            "sweep serve --serve-cmd 'vllm serve m --enable-prefix-caching' --bench-cmd 'vllm bench serve --model m --request-rate 2' --serve-params {sp} --bench-params {bp}"
        );
        let imp = crate::peers::Tool::VllmBench.import(&args(&cmd)).unwrap();
        let c = crate::contract::parse(&imp.contract, Path::new("x.toml")).unwrap();
        let launch = c.cold_start.unwrap().launch.unwrap();
        assert_eq!(launch[3], "{enable_prefix_caching}", "{launch:?}");
        assert_eq!(
            imp.next.as_deref(),
            // An object's records in the order of their names ("off" before "on").
            Some(
                "goodput tune FILE --setting enable_prefix_caching=--no-enable-prefix-caching,--enable-prefix-caching"
            )
        );
        assert_eq!(c.load.rate, Some(2.0));
        assert!(
            imp.breaks.iter().any(|b| b.contains("varies request_rate")),
            "{:?}",
            imp.breaks
        );
    }

    #[test]
    fn what_a_tune_cannot_mean_is_refused_naming_the_file_or_key() {
        let dir = tempfile::tempdir().unwrap();
        let two = params(
            dir.path(),
            "two.json",
            r#"[{"max_num_seqs": 1, "max_num_batched_tokens": 512}, {"max_num_seqs": 4, "max_num_batched_tokens": 1024}]"#,
        );
        let base =
            "sweep serve --serve-cmd 'vllm serve m' --bench-cmd 'vllm bench serve --model m'";
        let e = crate::peers::Tool::VllmBench
            .import(&args(&format!("{base} --serve-params {two}")))
            .unwrap_err();
        assert!(
            e.0.contains("max_num_batched_tokens and max_num_seqs together"),
            "{e}"
        );
        let bad = params(dir.path(), "bad.json", "[{\"max_num_seqs\": 1},");
        let e = crate::peers::Tool::VllmBench
            .import(&args(&format!("{base} --serve-params {bad}")))
            .unwrap_err();
        assert!(
            e.0.contains("bad.json") && e.0.contains("not JSON") && e.0.contains("line 1"),
            "{e}"
        );
        let e = crate::peers::Tool::VllmBench
            .import(&args(&format!(
                "{base} --serve-params {}/missing.json",
                dir.path().display()
            )))
            .unwrap_err();
        assert!(e.0.contains("missing.json"), "{e}");
        let sp = params(
            dir.path(),
            "one.json",
            r#"[{"max_num_seqs": 1}, {"max_num_seqs": 2}]"#,
        );
        let wl = params(
            dir.path(),
            "wl.json",
            r#"[{"random_input_len": 64}, {"random_input_len": 128}]"#,
        );
        let e = crate::peers::Tool::VllmBench
            .import(&args(&format!(
                "{base} --serve-params {sp} --bench-params {wl}"
            )))
            .unwrap_err();
        assert!(
            e.0.contains("random_input_len") && e.0.contains("workload"),
            "{e}"
        );
        let e = crate::peers::Tool::VllmBench
            .import(&args(base))
            .unwrap_err();
        assert!(e.0.contains("varies no server setting"), "{e}");
        let e = crate::peers::Tool::VllmBench
            .import(&args(
                "sweep serve --serve-cmd 'vllm serve m' --serve-params x.json",
            ))
            .unwrap_err();
        assert!(e.0.contains("--bench-cmd"), "{e}");
        let sp = params(
            dir.path(),
            "ok.json",
            r#"[{"max_num_seqs": 1}, {"max_num_seqs": 2}]"#,
        );
        let leaky = format!(
            "sweep serve --serve-cmd 'vllm serve m --api-key sk-secret123' --bench-cmd 'vllm bench serve --model m --header Authorization=\"Bearer sk-secret123\"' --serve-params {sp}"
        );
        let imp = crate::peers::Tool::VllmBench.import(&args(&leaky)).unwrap();
        assert!(!imp.contract.contains("sk-secret123"), "{}", imp.contract);
        assert!(imp.breaks.iter().all(|b| !b.contains("sk-secret123")));
        assert!(
            imp.breaks.iter().any(|b| b.contains("--api-key")),
            "{:?}",
            imp.breaks
        );
        let e = crate::peers::Tool::VllmBench
            .import(&args("sweep plot results/"))
            .unwrap_err();
        assert!(e.0.contains("sweep plot"), "{e}");
    }
}
