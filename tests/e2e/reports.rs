//! Snapshots of what a person reads (issue #17): the terminal report, default and `--verbose`,
//! the Markdown, `compare` with labels, and the summary `report --json` recomputes, all from
//! one fixed bundle (`tests/fixtures/bundles/small`, a 60-request run on the simulator). A
//! change to any of them shows as a reviewed diff: `INSTA_UPDATE=always cargo nextest run`
//! (or `cargo insta review`) writes the new snapshots under `tests/snapshots/`.

use std::process::Command;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bundles/small");

fn goodput(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A copy of the fixture bundle to edit.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(FIXTURE).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

/// Every line of a terminal report fits 100 columns.
fn assert_fits(text: &str) {
    for l in text.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

#[test]
fn the_default_terminal_report() {
    let text = goodput(&["report", FIXTURE]);
    assert_fits(&text);
    // Reading order: what, the verdicts, then the numbers.
    let pos = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s}: {text}"));
    assert!(pos("Target:") < pos("Validity:") && pos("Validity:") < pos("Comparability:"));
    assert!(pos("Comparability:") < pos("SLO") && pos("SLO") < pos("Steady state"));
    assert!(
        !text.contains("fingerprint") && !text.contains("95% CI"),
        "{text}"
    );
    insta::assert_snapshot!("report_default", text);
}

#[test]
fn the_verbose_terminal_report() {
    let text = goodput(&["report", "--verbose", FIXTURE]);
    assert_fits(&text);
    for more in [
        "fingerprint",
        "95% CI",
        "rests on",
        "woke late",
        "input requested",
    ] {
        assert!(text.contains(more), "{more}: {text}");
    }
    insta::assert_snapshot!("report_verbose", text);
}

#[test]
fn the_markdown_report() {
    let s = goodput::bundle::Bundle::load(std::path::Path::new(FIXTURE))
        .unwrap()
        .summary;
    insta::assert_snapshot!("report_markdown", goodput::report::document(&s).markdown());
}

#[test]
fn the_recomputed_summary() {
    insta::assert_snapshot!("summary_json", goodput(&["report", "--json", FIXTURE]));
}

#[test]
fn compare_with_labels() {
    let text = goodput(&[
        "compare", FIXTURE, FIXTURE, "--label", "before", "--label", "after",
    ]);
    assert!(text.contains("after vs baseline before"), "{text}");
    insta::assert_snapshot!("compare_labels", text);
}

/// A bundle written by an older schema: its fingerprints followed another definition, so
/// `audit` says so instead of calling the bundle inconsistent (every figure is recomputed).
#[test]
fn audit_of_an_older_schemas_bundle_does_not_call_its_fingerprints_inconsistent() {
    let dir = fixture_copy();
    let s = goodput::bundle::Bundle::load(dir.path()).unwrap().summary;
    let mut old = serde_json::to_value(&s).unwrap();
    old["schema_version"] = 2.into();
    old["fingerprints"]["load"] = "0123456789abcdef".into();
    std::fs::write(dir.path().join("summary.json"), old.to_string()).unwrap();
    let a = goodput::audit::audit(dir.path()).unwrap();
    assert!(
        !a.missing.iter().any(|m| m.contains("fingerprints")),
        "{:?}",
        a.missing
    );
    assert!(
        a.limits.iter().any(|l| l.contains("written with schema 2")),
        "{:?}",
        a.limits
    );
    // The same edit under the current schema is an inconsistency.
    old["schema_version"] = s.schema_version.into();
    std::fs::write(dir.path().join("summary.json"), old.to_string()).unwrap();
    let a = goodput::audit::audit(dir.path()).unwrap();
    assert!(
        a.missing
            .iter()
            .any(|m| m.starts_with("inconsistent: summary.json's fingerprints")),
        "{:?}",
        a.missing
    );
}

#[test]
fn the_html_report() {
    let html = goodput(&["report", "--html", FIXTURE]);
    assert!(html.starts_with("<!doctype html>"), "{}", &html[..100]);
    insta::assert_snapshot!("report_html", html);
}

const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.schema.json");

/// `docs/summary.schema.json` is the schema of the summary the code writes (regenerate it with
/// `UPDATE_SCHEMA=1 cargo nextest run --test reports`), and the summaries a run writes and
/// `report --json` recomputes are valid against it.
#[test]
fn summary_json_has_a_committed_schema() {
    let generated =
        serde_json::to_string_pretty(&goodput::analyze::summary_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(SCHEMA, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(SCHEMA).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/summary.schema.json is not the schema of Summary: review the change and regenerate it with UPDATE_SCHEMA=1"
    );
    let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let recomputed: serde_json::Value =
        serde_json::from_str(&goodput(&["report", "--json", FIXTURE])).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&recomputed)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // A summary that breaks it is caught: the schema is not vacuous.
    let mut broken = recomputed.clone();
    broken["steady"]["ok"] = "sixty".into();
    broken["grade"]["unheard_of"] = true.into();
    assert_eq!(validator.iter_errors(&broken).count(), 2);
    let mut missing = recomputed;
    missing.as_object_mut().unwrap().remove("validity");
    assert!(!validator.is_valid(&missing));
}

/// One `--format` for every command; the older flags mean the same format.
#[test]
fn every_command_takes_one_format() {
    assert_eq!(
        goodput(&["report", "--format", "json", FIXTURE]),
        goodput(&["report", "--json", FIXTURE])
    );
    assert_eq!(
        goodput(&["report", "--format", "html", FIXTURE]),
        goodput(&["report", "--html", FIXTURE])
    );
    let s = goodput::bundle::Bundle::load(std::path::Path::new(FIXTURE))
        .unwrap()
        .summary;
    assert_eq!(
        goodput(&["report", "--format", "markdown", FIXTURE]),
        goodput::report::document(&s).markdown()
    );
    let audit = goodput(&["audit", "--format", "json", FIXTURE]);
    assert!(
        serde_json::from_str::<serde_json::Value>(&audit).is_ok(),
        "{audit}"
    );
    assert!(goodput(&["audit", "--format", "markdown", FIXTURE]).starts_with("# "));
    let page = goodput(&["compare", "--format", "html", FIXTURE, FIXTURE]);
    assert!(page.starts_with("<!doctype html>") && page.contains("<table>"));
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["report", "--format", "csv", FIXTURE])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("possible values"),
        "{err}"
    );
}

/// A generated bundle of 20,000 steady requests (`record::synth`) in `dir`; `legacy`: chunks
/// in the format before compact encoding.
fn synthetic(dir: &std::path::Path, legacy: bool) {
    let spec = goodput::record::synth::Spec {
        requests: 20_000,
        ..Default::default()
    };
    goodput::record::synth::write_bundle(dir, &spec, legacy).unwrap();
}

/// Issue #23: records in the compact chunk encoding summarize to exactly what the same records
/// in the old `[[µs, tokens], …]` encoding do, and ITL (tallied per microsecond, not sorted as
/// a list) has the very percentiles of the list-sorting computation on every gap.
#[test]
fn compact_records_give_the_percentiles_of_the_old_format_and_of_a_sorted_list() {
    let dir = tempfile::tempdir().unwrap();
    let (compact, legacy) = (dir.path().join("compact"), dir.path().join("legacy"));
    synthetic(&compact, false);
    synthetic(&legacy, true);
    let size = |d: &std::path::Path| std::fs::metadata(d.join("requests.jsonl")).unwrap().len();
    assert!(
        size(&compact) * 3 < size(&legacy) * 2,
        "compact {} vs legacy {} bytes",
        size(&compact),
        size(&legacy)
    );
    let (a, b) = (
        goodput::bundle::Bundle::load(&compact).unwrap(),
        goodput::bundle::Bundle::load(&legacy).unwrap(),
    );
    assert_eq!(a.records, b.records);
    assert_eq!(
        serde_json::to_value(&a.summary).unwrap(),
        serde_json::to_value(&b.summary).unwrap()
    );
    let s = &a.summary.steady.stats;
    assert_eq!(s.requests, 20_000);
    // The old computation: every gap of every successful steady record, in ms, as a list.
    let gaps: Vec<f64> = a
        .records
        .iter()
        .filter(|r| r.phase == goodput::plan::Phase::Steady && r.is_ok())
        .flat_map(|r| {
            let c: Vec<(u64, u32)> = r.chunks.iter().collect();
            c.windows(2)
                .map(|w| (w[1].0 as f64 - w[0].0 as f64) / 1000.0)
                .collect::<Vec<_>>()
        })
        .collect();
    let list = goodput::analyze::Dist::of(gaps).unwrap();
    for tallied in [s.itl_ms.as_ref().unwrap(), s.itl_token_ms.as_ref().unwrap()] {
        let key = |d: &goodput::analyze::Dist| {
            (
                d.count, d.min, d.p50, d.p90, d.p95, d.p99, d.p99_9, d.max, d.ci95,
            )
        };
        assert_eq!(key(tallied), key(&list));
        assert!((tallied.mean - list.mean).abs() < 1e-9 * list.mean);
    }
}

/// Issue #23: `requests.jsonl` is read in 16 MB blocks on every core; what reading it says
/// names the file's own lines across blocks: a bad line far into the file, a request recorded
/// twice (the copy in another block), and a last record cut short by a kill (left out, warned).
#[test]
fn a_file_read_in_blocks_names_its_own_lines() {
    use goodput::record::read_jsonl_noted;
    let dir = tempfile::tempdir().unwrap();
    synthetic(dir.path(), false);
    let path = dir.path().join("requests.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.len() > 20 << 20,
        "{} bytes: not several blocks",
        text.len()
    );
    let lines: Vec<&str> = text.lines().collect();
    let (records, warning) = read_jsonl_noted(&path).unwrap();
    assert_eq!((records.len(), warning), (lines.len(), None));
    assert!(
        records.iter().zip(0..).all(|(r, i)| r.index == i),
        "file order kept"
    );
    let write = |ls: &[&str], tail: &str| {
        std::fs::write(&path, ls.join("\n") + "\n" + tail).unwrap();
    };
    // A bad line in the second half.
    let mut bad = lines.clone();
    bad[15_000] = "{not a record";
    write(&bad, "");
    let e = read_jsonl_noted(&path).unwrap_err();
    assert!(
        e.contains("requests.jsonl:15001: not a request record"),
        "{e}"
    );
    // Request 2 again at the end.
    let mut twice = lines.clone();
    twice.push(lines[2]);
    write(&twice, "");
    let e = read_jsonl_noted(&path).unwrap_err();
    let n = twice.len();
    assert!(
        e.contains(&format!(
            "requests.jsonl:{n}: request 2 again (first on line 3)"
        )),
        "{e}"
    );
    // Killed while writing the last record: every whole one read, the cut one named.
    write(&lines, &lines[5][..40]);
    let (records, warning) = read_jsonl_noted(&path).unwrap();
    assert_eq!(records.len(), lines.len());
    let w = warning.expect("a warning");
    assert!(
        w.contains(&format!(
            "requests.jsonl:{}: the last record is unfinished",
            lines.len() + 1
        )),
        "{w}"
    );
}

/// An INVALID run's SLO is not shown as met: the terminal says the run cannot support it, and
/// no headline tile is green under the red banner. (The fixture, judged with a dispatch-lag
/// bound no client meets, is INVALID with its SLO met.)
#[test]
fn an_invalid_runs_met_slo_is_not_shown_as_passing() {
    let dir = fixture_copy();
    let contract = dir.path().join("contract.toml");
    let text = std::fs::read_to_string(&contract).unwrap();
    let strict = text.replace("max_dispatch_lag_ms = 5.0", "max_dispatch_lag_ms = 0.001");
    assert_ne!(text, strict);
    std::fs::write(&contract, strict).unwrap();
    let d = dir.path().to_str().unwrap();
    let text = goodput(&["report", d]);
    assert!(text.contains("Validity: INVALID"), "{text}");
    assert!(
        text.contains("SLO met, but not supported (the run is INVALID)"),
        "{text}"
    );
    let html = goodput(&["report", "--html", d]);
    assert!(html.contains("INVALID ·"), "the banner says INVALID");
    assert!(
        html.contains("SLO met, not supported"),
        "the banner's verdict"
    );
    // The SLO's tiles (goodput, TTFT and TPOT at p90) are not green; the counts (completed
    // requests, errors) are facts of an INVALID run too.
    let tiles = &html[html.find(r#"id="tiles""#).unwrap()..];
    let tiles = &tiles[..tiles.find("</section>").unwrap()];
    let green = tiles.matches(r#"class="tile pass""#).count();
    assert_eq!(green, 2, "{tiles}");
    assert_eq!(
        tiles.matches("meets, but not supported").count(),
        3,
        "{tiles}"
    );
    // The VALID fixture's tiles are green: the check above is not vacuous.
    assert!(goodput(&["report", "--html", FIXTURE]).contains(r#"class="tile pass""#));
}
