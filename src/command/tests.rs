//! The seam, per command and per format: every command's result written as a terminal would
//! show it, as Markdown, as an HTML page and as JSON, from the fixture bundle.

use std::path::{Path, PathBuf};

use super::compare::CompareShown;
use super::report::ReportShown;
use super::run::{RepeatsShown, RunShown};
use super::sweep::SweepShown;
use super::{Shown, Text, render};
use crate::report::format::Format;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/small")
}

fn loaded() -> crate::bundle::Loaded {
    crate::bundle::Bundle::load(&fixture()).unwrap()
}

/// The formats that hold for every result: Markdown's headings are `#` lines and the
/// terminal's are underlined; the page is one whole document; the JSON is `value`'s.
fn check_formats(shown: &dyn Shown, value: serde_json::Value) -> (String, String) {
    let terminal = render(shown, Format::Terminal, false).unwrap().into_owned();
    let markdown = render(shown, Format::Markdown, false).unwrap().into_owned();
    let json = render(shown, Format::Json, false).unwrap().into_owned();
    assert!(
        terminal.contains("\n───") || terminal.contains("─\n"),
        "{terminal}"
    );
    assert!(!terminal.lines().any(|l| l.starts_with("# ")), "{terminal}");
    assert!(markdown.lines().any(|l| l.starts_with('#')), "{markdown}");
    assert!(!markdown.contains("───"), "{markdown}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).unwrap(),
        value
    );
    assert!(json.ends_with("}\n") || json.ends_with("]\n"), "{json}");
    (terminal, markdown)
}

fn check_page(shown: &dyn Shown) -> String {
    let page = render(shown, Format::Html, false).unwrap().into_owned();
    assert!(page.starts_with("<!doctype html>"), "{}", &page[..80]);
    assert!(page.trim_end().ends_with("</html>"));
    page
}

#[test]
fn a_runs_result_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let b = loaded();
    let page = ReportShown(loaded()).page().unwrap();
    std::fs::write(dir.path().join("report.html"), &page).unwrap();
    let shown = RunShown {
        title: "goodput run",
        summary: b.summary.clone(),
        bundle: dir.path().to_owned(),
    };
    let (terminal, _) = check_formats(&shown, serde_json::to_value(&b.summary).unwrap());
    // After the report, where the bundle is: on a terminal only.
    let bundle_line = format!("\nBundle: {}\n", dir.path().display());
    assert!(terminal.ends_with(&bundle_line), "{terminal}");
    assert!(
        !render(&shown, Format::Markdown, false)
            .unwrap()
            .contains("Bundle:")
    );
    // The page is the one the run wrote into its bundle, with its figures.
    assert_eq!(check_page(&shown), page);
    assert!(page.contains("<svg"));
    // --verbose shows the whole report on a terminal; the other formats always do.
    let verbose = render(&shown, Format::Terminal, true).unwrap().into_owned();
    assert!(verbose.len() > terminal.len(), "{verbose}");
}

#[test]
fn a_reports_result_in_every_format() {
    let b = loaded();
    let shown = ReportShown(loaded());
    let (terminal, markdown) = check_formats(&shown, serde_json::to_value(&b.summary).unwrap());
    assert!(!terminal.contains("Bundle:"));
    assert_eq!(markdown, crate::report::document(&b.summary).markdown());
    let page = check_page(&shown);
    assert!(page.contains("<svg"), "a report's page draws its figures");
}

#[test]
fn a_repeat_sets_result_in_every_format() {
    let b = loaded();
    let runs = vec![b.summary.clone(), b.summary.clone()];
    let refs: Vec<&crate::analyze::Summary> = runs.iter().collect();
    let repeat = crate::run::repeat_summary(&b.contract, &refs);
    let value = serde_json::to_value(&repeat).unwrap();
    let shown = RepeatsShown {
        runs,
        repeat,
        bundle: Some(PathBuf::from("runs/chat/set")),
        run_dirs: vec![PathBuf::from("run-01"), PathBuf::from("run-02")],
        page_refused: None,
    };
    let (terminal, markdown) = check_formats(&shown, value);
    // On a terminal each run's overview comes first, and the set's bundle last.
    assert!(terminal.starts_with("run 01: "), "{terminal}");
    assert!(terminal.contains("\nrun 02: "), "{terminal}");
    assert!(
        terminal.ends_with("\nBundle: runs/chat/set\n"),
        "{terminal}"
    );
    assert!(!markdown.contains("run 01: "), "{markdown}");
    // --verbose: each run's whole report after the aggregate, under its bundle's name.
    let verbose = render(&shown, Format::Terminal, true).unwrap().into_owned();
    assert!(verbose.contains("\nrun-02\n"), "{verbose}");
    check_page(&shown);
    // `report` of a repeat set refuses a page: the page is one run's.
    let refused = RepeatsShown {
        page_refused: Some("--format html reports one run".into()),
        ..shown
    };
    let e = render(&refused, Format::Html, false).unwrap_err();
    assert!(e.to_string().contains("reports one run"), "{e}");
}

#[test]
fn a_comparisons_result_in_every_format() {
    let side = || crate::compare::load_side(&fixture()).unwrap();
    let (a, b) = (side(), side());
    let comparisons = vec![crate::compare::compare(&a, &b, 0.05)];
    let value = serde_json::to_value(&comparisons).unwrap();
    let shown = CompareShown {
        sides: vec![a, b],
        comparisons,
    };
    check_formats(&shown, value);
    let page = check_page(&shown);
    assert!(
        page.contains("<table>"),
        "the comparison's page has its table"
    );
}

#[test]
fn an_audits_result_in_every_format() {
    let a = crate::audit::audit(&fixture()).unwrap();
    let value = serde_json::to_value(&a).unwrap();
    let shown = super::audit::AuditShown(a);
    check_formats(&shown, value);
    // Its page is its document wrapped: the same title the JSON and Markdown formats name.
    assert!(check_page(&shown).contains("<title>goodput audit</title>"));
}

#[test]
fn a_sweeps_result_in_every_format() {
    let b = loaded();
    let point = |v: &str| crate::sweep::SweepPoint::of(v, &b.bundle, &b.summary);
    let result = crate::sweep::SweepResult {
        contract: b.contract.name.clone(),
        vary: crate::sweep::Vary::parse(&["load.rate=1,2".into()]).unwrap(),
        capacity: None,
        points: vec![point("1"), point("2")],
        interrupted: false,
    };
    let value = serde_json::to_value(&result).unwrap();
    let shown = SweepShown {
        result,
        bundle: PathBuf::from("runs/chat/sweep"),
    };
    let (terminal, _) = check_formats(&shown, value);
    assert!(
        terminal.ends_with("\nSweep bundle: runs/chat/sweep\n"),
        "{terminal}"
    );
    assert!(
        check_page(&shown).contains("<svg"),
        "a sweep's page draws its curves"
    );
}

#[test]
fn the_demos_result_in_every_format() {
    let cfg = crate::sim::SimConfig::default();
    let spec = crate::demo::DemoSpec {
        requests: 300,
        ..Default::default()
    };
    let demo = crate::demo::run(&cfg, spec).unwrap();
    let value = serde_json::to_value(&demo).unwrap();
    let shown = super::demo::DemoShown(demo);
    check_formats(&shown, value);
    assert!(
        check_page(&shown).contains("<svg"),
        "the demo's page draws both curves"
    );
}

/// `init`, `plan`, `export` and `sim` say a text: the same in every format.
#[test]
fn a_text_is_the_same_in_every_format() {
    let shown = Text("wrote a.toml; run it with: goodput run a.toml\n".into());
    for f in [
        Format::Terminal,
        Format::Markdown,
        Format::Html,
        Format::Json,
    ] {
        assert_eq!(render(&shown, f, false).unwrap(), shown.0, "{f:?}");
    }
}
