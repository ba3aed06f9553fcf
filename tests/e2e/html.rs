//! The HTML pages as a reader sees them, rendered by a real browser (Debian's headless
//! Chromium, through `scripts/check-html.sh layout`): the run, compare (accepted and refused),
//! sweep (with its efficiency frontier) and demo pages at a laptop's 1400 px and a phone's 400 px — every figure present, no
//! two text boxes of a figure overlapping (labels, ticks, legend keys, band names), nothing
//! wider than the screen, no console error, and the verdict banner and headline tiles on the
//! first 1400 × 900 screen.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn goodput(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("goodput runs");
    assert!(
        out.status.success() || args[0] == "compare",
        "goodput {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn one_dir(root: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v.pop().unwrap()
}

#[derive(Debug, serde::Deserialize)]
struct Layout {
    figures: Vec<String>,
    overlaps: Vec<String>,
    width: f64,
    scroll_width: f64,
    first_screen: std::collections::BTreeMap<String, bool>,
}

fn layout(page: &Path, width: u32) -> Layout {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-html.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg("layout")
        .arg(page)
        .args([width.to_string(), "900".to_owned()])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: {}",
            page.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Checks one page at both widths.
fn check(page: &Path, figures: &[&str]) {
    for width in [1400, 400] {
        let l = layout(page, width);
        let name = format!("{} at {width} px", page.display());
        assert_eq!(l.width, f64::from(width), "{name}");
        for f in figures {
            assert!(
                l.figures.iter().any(|x| x == f),
                "{name}: no #{f} in {:?}",
                l.figures
            );
        }
        assert!(
            l.overlaps.is_empty(),
            "{name}: overlapping text: {:?}",
            l.overlaps
        );
        assert!(
            l.scroll_width <= l.width + 0.5,
            "{name}: the page is {} px wide on a {} px screen",
            l.scroll_width,
            l.width
        );
        if width == 1400 {
            assert_eq!(
                l.first_screen.get("verdict"),
                Some(&true),
                "{name}: the verdict banner is not on the first screen"
            );
            assert_eq!(
                l.first_screen.get("tiles"),
                Some(&true),
                "{name}: the headline tiles are not on the first screen"
            );
        }
    }
}

const RUN: &str = r#"name = "page"
[workload]
output_tokens = { dist = "uniform", min = 16, max = 48 }
[load]
rate = 30
requests = 200
[warmup]
requests = 40
[slo]
ttft_ms = 300
tpot_ms = 40
"#;

#[test]
fn every_page_reads_at_a_laptops_and_a_phones_width() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("c.toml"), RUN).unwrap();
    goodput(d, &["run", "-q", "c.toml", "--out", "a"]);
    goodput(d, &["run", "-q", "c.toml", "--out", "b", "--rate", "45"]);
    let (a, b) = (
        one_dir(&one_dir(&d.join("a"))),
        one_dir(&one_dir(&d.join("b"))),
    );
    let run = a.join("report.html");
    check(
        &run,
        &[
            "pct-ttft",
            "pct-tpot",
            "pct-itl",
            "pct-e2e",
            "pct-lag",
            "timeline-load",
            "timeline-ttft",
            "cdf-ttft",
            "lengths-input",
        ],
    );

    // Compare: accepted (the rate is the one variable), then refused.
    let (sa, sb) = (a.to_string_lossy(), b.to_string_lossy());
    let page = goodput(d, &["compare", &sa, &sb, "--format", "html"]);
    assert!(page.contains("ACCEPTED: one variable differs"), "{page}");
    std::fs::write(d.join("compare.html"), page).unwrap();
    check(
        &d.join("compare.html"),
        &["cmp-ttft", "cmp-tpot", "cmp-e2e", "cmp-lag", "cmp-timeline"],
    );
    std::fs::write(
        d.join("c2.toml"),
        RUN.replace("tpot_ms = 40", "tpot_ms = 80"),
    )
    .unwrap();
    goodput(
        d,
        &[
            "run",
            "-q",
            "c2.toml",
            "--out",
            "r",
            "--set",
            "workload.seed=9",
        ],
    );
    let r = one_dir(&one_dir(&d.join("r")));
    let page = goodput(
        d,
        &["compare", &sa, &r.to_string_lossy(), "--format", "html"],
    );
    assert!(page.contains("REFUSED"), "{page}");
    assert!(
        page.contains("slo differs") || page.contains("SLO differs"),
        "{page}"
    );
    assert!(
        !page.contains("<svg"),
        "a refused comparison draws no figure"
    );
    std::fs::write(d.join("refused.html"), page).unwrap();
    check(&d.join("refused.html"), &[]);

    // A capacity sweep: its bracket and every point's figures.
    std::fs::write(
        d.join("s.toml"),
        "name = \"cap\"\n[target.telemetry]\nurls = [\"/telemetry\"]\ninterval = \"200ms\"\n[target.declared]\nprice_per_hour = 4\ncurrency = \"USD\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 32 }\n[load]\nrate = 20\nduration = \"3s\"\n[warmup]\nduration = \"1s\"\n[slo]\nttft_ms = 300\n",
    )
    .unwrap();
    goodput(
        d,
        &[
            "sweep",
            "-q",
            "s.toml",
            "--capacity",
            "--max-runs",
            "4",
            "--out",
            "s",
        ],
    );
    let sweep = one_dir(&one_dir(&d.join("s"))).join("sweep.html");
    let text = std::fs::read_to_string(&sweep).unwrap();
    assert!(
        text.contains("CAPACITY") || text.contains("NO CAPACITY"),
        "{text}"
    );
    // Its efficiency frontier (simulated DCGM telemetry and a price): per accelerator and per
    // dollar, the pareto-optimal points ringed.
    assert!(text.contains("pareto-optimal"), "{text}");
    check(
        &sweep,
        &[
            "sweep-latency",
            "sweep-goodput",
            "frontier-accelerator",
            "frontier-cost",
        ],
    );

    let page = goodput(d, &["demo", "--format", "html"]);
    assert!(page.contains("COORDINATED OMISSION: from"), "{page}");
    assert!(page.contains("overload the closed loop hides"));
    std::fs::write(d.join("demo.html"), page).unwrap();
    check(&d.join("demo.html"), &["demo-ttft", "demo-sent"]);
}
