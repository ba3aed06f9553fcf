//! `goodput history`: a change is found where it happened and nowhere else (over 20 seeds on
//! the simulator's discrete-event clock, and through the binary with SQLite and a real
//! PostgreSQL), `--fail-on regression` fails on the run that starts it and no other,
//! incomparable results never share a series, and a bad store or bundle is an error that
//! changes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use goodput::history::{Point, Thresholds};

use crate::common::{des_records, parse};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// A small open-loop contract on the simulator, comparable (its outputs kept), decode steps of
/// `decode` ms.
fn text(decode: f64, seed: u64) -> String {
    text_at(decode, seed, 25)
}

/// [`text`] at `rate` req/s (the runs through the binary go faster: each second is a real one).
/// The client may fall 50 ms behind its schedule at p99 (5 ms by default): on a CI host busy
/// with other tests, requests waited 7 ms for the client's runtime, and an INVALID run is never
/// used to decide, so the gate cannot fail on it.
fn text_at(decode: f64, seed: u64, rate: u32) -> String {
    format!(
        "name = \"nightly\"\n[workload]\nseed = {seed}\ninput_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 16 }}\n[load]\nrate = {rate}\nrequests = 50\n[warmup]\nrequests = 8\n[slo]\nttft_ms = 150\ntpot_ms = 30\npercentile = 90\n[quality]\nmode = \"consistency\"\nprobes = 2\n[measurement]\nmax_dispatch_lag_ms = 50\n[target.simulator]\ndecode_base_ms = {decode}\n"
    )
}

/// One run on the discrete-event clock as a point of the series "des" (each run draws its own
/// workload seed: the noise of a nightly run's arrivals and lengths).
fn des_point(decode: f64, seed: u64, k: usize) -> Point {
    let c = parse(&text(decode, seed));
    let recs = des_records(&c, 10);
    let s = goodput::analyze::summarize(&c, &recs, &Default::default());
    let mut p = goodput::history::of_summary(
        &c,
        &s,
        Path::new("/nowhere"),
        format!("des-{seed}"),
        format!("2026-12-{:02}T00:00:00Z", k + 1),
        &[],
    );
    p.series = "des".into();
    p
}

/// 30 runs from `seed`, decode 12 ms, then `after` ms from run 20 on.
fn des_series(seed: u64, after: f64) -> Vec<Point> {
    (0..30)
        .map(|k| {
            des_point(
                if k >= 19 { after } else { 12.0 },
                seed * 1000 + k as u64,
                k,
            )
        })
        .collect()
}

#[test]
fn a_change_at_run_20_is_found_there_and_a_series_without_one_has_none_over_20_seeds() {
    let t = Thresholds::default();
    let (mut found, mut clean, mut gated) = (0, 0, 0);
    for seed in 0..20u64 {
        let changed = des_series(seed, 14.0);
        let s = goodput::history::series(changed.clone(), &t, None);
        let at: Vec<(usize, &str)> = s
            .changes
            .iter()
            .map(|c| (c.point, c.metric.as_str()))
            .collect();
        let tpot_at_20 = s
            .changes
            .iter()
            .any(|c| c.point == 20 && c.metric == "tpot_p50_ms" && c.worse);
        let only_20 = s.changes.iter().all(|c| c.point == 20);
        if tpot_at_20 && only_20 {
            found += 1;
        } else {
            eprintln!("seed {seed}, change at 20: found {at:?}");
        }
        // The gate, as each run is added: fails at run 20 and no other.
        let failing: Vec<usize> = (2..=30)
            .filter(|n| {
                let s = goodput::history::series(changed[..*n].to_vec(), &t, None);
                let bad = s.newest.regressions();
                if !bad.is_empty() && *n != 20 {
                    eprintln!(
                        "seed {seed} run {n}: {}",
                        goodput::history::view::newest_line(&s).0
                    );
                }
                !bad.is_empty()
            })
            .collect();
        if failing == [20] {
            gated += 1;
        } else {
            eprintln!("seed {seed}: --fail-on regression failed at runs {failing:?}");
        }
        let null = goodput::history::series(des_series(seed + 100, 12.0), &t, None);
        // Judged run by run, no point of it starts a regression either.
        let starts = null.beyond.iter().any(|b| b.iter().any(|(_, s)| *s));
        if null.changes.is_empty() && !starts {
            clean += 1;
        } else {
            eprintln!(
                "seed {seed}, no change: found {:?}",
                null.changes
                    .iter()
                    .map(goodput::history::view::change_line)
                    .collect::<Vec<_>>()
            );
        }
    }
    println!(
        "decode 12 → 14 ms at run 20 of 30: found at run 20 alone in {found}/20 seeds; --fail-on regression failed at run 20 alone in {gated}/20; 30 unchanged runs: no change found in {clean}/20"
    );
    assert_eq!((found, gated, clean), (20, 20, 20));
}

/// A store for a test: a SQLite file in `dir`, or a fresh database on the PostgreSQL server
/// `scripts/postgres.sh` runs (installing and starting it when it is not running).
fn stores(dir: &Path, name: &str) -> Vec<String> {
    let out = Command::new("scripts/postgres.sh")
        .args(["db", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/postgres.sh db {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    vec![dir.join("history.sqlite").display().to_string(), url]
}

/// `goodput ARGS` with the test server's password in PGPASSWORD: (status, stdout, stderr).
fn goodput(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("PGPASSWORD", "goodput-test")
        .env_remove("GOODPUT_HISTORY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One run of the nightly contract through the binary (decode steps of `decode` ms; `extra`
/// contract lines), its bundle's path.
fn run(dir: &Path, decode: f64, extra: &str) -> PathBuf {
    let (b, code, err) = run_with(dir, decode, extra, &[]);
    assert_eq!(code, 0, "{err}");
    b
}

/// [`run`] with more arguments: the bundle, the exit status and stderr.
fn run_with(dir: &Path, decode: f64, extra: &str, args: &[&str]) -> (PathBuf, i32, String) {
    let contract = dir.join(format!("c-{decode}.toml"));
    std::fs::write(&contract, format!("{}{extra}", text_at(decode, 1, 40))).unwrap();
    let runs = dir.join("runs");
    let before: Vec<PathBuf> = bundles(&runs);
    let mut all = vec![
        "run",
        "-q",
        contract.to_str().unwrap(),
        "--out",
        runs.to_str().unwrap(),
    ];
    all.extend(args);
    let (code, _, err) = goodput(&all);
    let after = bundles(&runs);
    (
        after.into_iter().find(|b| !before.contains(b)).unwrap(),
        code,
        err,
    )
}

fn bundles(runs: &Path) -> Vec<PathBuf> {
    let Ok(names) = std::fs::read_dir(runs) else {
        return Vec::new();
    };
    names
        .flatten()
        .flat_map(|c| std::fs::read_dir(c.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect()
}

fn json(store: &str, more: &[&str]) -> serde_json::Value {
    let mut args = vec!["history", "show", "--store", store, "--json"];
    args.extend(more);
    let (code, out, err) = goodput(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// Through the binary, into SQLite and PostgreSQL alike: 30 nightly runs of one contract,
/// its decode step 12 → 14 ms from run 20. Each run is added with `--fail-on regression`,
/// which fails at run 20 alone; both stores then hold the same series with TPOT's change at
/// run 20, what changed there named.
#[test]
fn thirty_nightly_runs_into_sqlite_and_postgres_fail_at_the_change_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let stores = stores(dir.path(), "history_nightly");
    let mut failed: Vec<Vec<usize>> = vec![Vec::new(); stores.len()];
    for k in 1..=30usize {
        // Into SQLite as the run ends (`run --history`), into PostgreSQL by `history add`.
        // Host noise on a busy CI machine moves a 20 ms TTFT by a few percent: 10% keeps the
        // gate on the target (the change is +16% TPOT).
        let (b, code, err) = run_with(
            dir.path(),
            if k >= 20 { 14.0 } else { 12.0 },
            "",
            &[
                "--history",
                &stores[0],
                "--fail-on",
                "regression",
                "--regression-threshold",
                "10%",
            ],
        );
        assert!(code == 0 || code == 10, "{err}");
        if code == 10 {
            assert!(
                err.contains("REGRESSION") && err.contains("TPOT p50"),
                "{err}"
            );
            eprintln!("run {k}, {}: {err}", stores[0]);
            failed[0].push(k);
        }
        let (code, out, err) = goodput(&[
            "history",
            "add",
            b.to_str().unwrap(),
            "--store",
            &stores[1],
            "--fail-on",
            "regression",
            "--threshold",
            "10%",
        ]);
        assert!(code == 0 || code == 10, "{out}{err}");
        if code == 10 {
            assert!(
                err.contains("REGRESSION") && err.contains("TPOT p50"),
                "{err}"
            );
            eprintln!("run {k}, {}: {err}", stores[1]);
            failed[1].push(k);
        }
    }
    let views: Vec<serde_json::Value> = stores.iter().map(|s| json(s, &[])).collect();
    for (i, v) in views.iter().enumerate() {
        let s = &v["series"][0];
        assert_eq!(v["series"].as_array().unwrap().len(), 1);
        assert_eq!(s["points"].as_array().unwrap().len(), 30);
        let changes: Vec<(u64, &str)> = s["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["point"].as_u64().unwrap(), c["metric"].as_str().unwrap()))
            .collect();
        println!(
            "{}: --fail-on regression failed at runs {:?}; change points {changes:?}",
            stores[i], failed[i]
        );
        // An INVALID or directional run is never used to decide: were run 20 one, the change
        // would be found, and the gate fail, at the first decisive run after it instead.
        let decisive = |p: &serde_json::Value| p["valid"] == true && p["comparable"] == true;
        let first = s["points"].as_array().unwrap()[19..]
            .iter()
            .position(decisive)
            .map(|k| k as u64 + 20)
            .expect("a decisive run from run 20 on");
        let tpot = s["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["metric"] == "tpot_p50_ms")
            .expect("TPOT's change");
        assert_eq!(tpot["point"], first);
        assert_eq!(tpot["worse"], true);
        let changed = tpot["changed"].to_string();
        assert!(
            changed.contains("target.simulator.decode_base_ms") && changed.contains("14"),
            "{changed}"
        );
        assert_eq!(
            failed[i],
            [first as usize],
            "{}\n{}",
            stores[i],
            goodput(&["history", "show", "--store", &stores[i]]).1
        );
    }
    // The same history in both: the same points (by content), the same change points.
    let keyed = |v: &serde_json::Value| {
        let s = &v["series"][0];
        (
            s["key"].clone(),
            s["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["bundle_id"].clone())
                .collect::<Vec<_>>(),
            s["changes"].clone(),
        )
    };
    assert_eq!(keyed(&views[0]), keyed(&views[1]));
    // The page and the exports of one store.
    let page = dir.path().join("history.html");
    let (code, _, err) = goodput(&[
        "history",
        "html",
        "--store",
        &stores[1],
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("TPOT p50") && html.contains("decode_base_ms"));
    let (_, csv, _) = goodput(&[
        "history", "export", "--store", &stores[0], "--format", "csv",
    ]);
    assert_eq!(csv.lines().count(), 31, "{csv}");
    let (_, bmf, _) = goodput(&[
        "history", "export", "--store", &stores[1], "--format", "bmf",
    ]);
    let bmf: serde_json::Value = serde_json::from_str(&bmf).unwrap();
    let bench = bmf.as_object().unwrap().values().next().unwrap();
    assert!(
        bench["tpot-p50-ms"]["value"].as_f64().unwrap() > 13.0,
        "{bmf}"
    );
}

/// Copies of one bundle that differ in when they ran: distinct points, each still
/// recomputing to its own summary.
fn copies(b: &Path, dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let to = dir.join(format!("copy-{i:02}"));
            std::fs::create_dir_all(&to).unwrap();
            for e in std::fs::read_dir(b).unwrap().flatten() {
                if e.path().is_file() {
                    std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
                }
            }
            let cmd = to.join("command.json");
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&cmd).unwrap()).unwrap();
            v["started_utc"] = format!("2026-01-01T00:{i:02}:00Z").into();
            std::fs::write(&cmd, v.to_string()).unwrap();
            to
        })
        .collect()
}

/// Two processes adding to one store at once (SQLite and PostgreSQL): nothing is lost, and
/// the bundle both add is kept once.
#[test]
fn two_processes_adding_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = run(dir.path(), 12.0, "");
    let all = copies(&b, dir.path(), 21);
    for store in stores(dir.path(), "history_concurrent") {
        let (first, second) = all.split_at(11);
        // Each side: its own ten, and the shared one (first[10]).
        let spawn = |set: Vec<&PathBuf>| {
            let mut c = Command::new(BIN);
            c.args(["history", "add", "--store", &store])
                .args(set)
                .env("PGPASSWORD", "goodput-test")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        };
        let mut one: Vec<&PathBuf> = first.iter().collect();
        one.rotate_left(5);
        let mut two: Vec<&PathBuf> = second.iter().collect();
        two.push(&first[10]);
        let (p1, p2) = (spawn(one), spawn(two));
        for p in [p1, p2] {
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v = json(&store, &[]);
        let points = v["series"][0]["points"].as_array().unwrap();
        assert_eq!(points.len(), 21, "{store}");
        let ids: std::collections::BTreeSet<String> =
            points.iter().map(|p| p["bundle_id"].to_string()).collect();
        assert_eq!(ids.len(), 21);
    }
}

/// Results of different workloads never share a series, and a directional one is marked in
/// every view (terminal, page, CSV, Bencher's format: kept there, never alerted on).
#[test]
fn other_workloads_are_other_series_and_a_directional_point_says_so_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    let a = run(dir.path(), 12.0, "");
    // Another output length: another workload.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        text_at(12.0, 1, 40).replace("value = 16 }", "value = 24 }"),
    )
    .unwrap();
    let (code, _, err) = goodput(&[
        "run",
        "-q",
        other.to_str().unwrap(),
        "--out",
        dir.path().join("other").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let b = bundles(&dir.path().join("other")).pop().unwrap();
    // No quality check: directional.
    let directional = dir.path().join("directional.toml");
    std::fs::write(
        &directional,
        text_at(12.0, 1, 40).replace("mode = \"consistency\"", "mode = \"none\""),
    )
    .unwrap();
    // A host busy with other tests can make so short a run INVALID (seen once in CI), which
    // every view then shows before "directional": such a run is made again, three at most.
    let mut verdicts = Vec::new();
    let d = (0..3)
        .find_map(|attempt| {
            let out = dir.path().join(format!("dir{attempt}"));
            let (code, _, err) = goodput(&[
                "run",
                "-q",
                directional.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ]);
            assert_eq!(code, 0, "{err}");
            let d = bundles(&out).pop().unwrap();
            let s: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap())
                    .unwrap();
            verdicts.push(s["validity"].to_string());
            (s["validity"]["verdict"] != "INVALID").then_some(d)
        })
        .unwrap_or_else(|| panic!("three INVALID runs in a row: {verdicts:#?}"));
    for x in [&a, &b, &d] {
        let (code, _, err) = goodput(&["history", "add", x.to_str().unwrap(), "--store", store]);
        assert_eq!(code, 0, "{err}");
    }
    let v = json(store, &[]);
    let series = v["series"].as_array().unwrap();
    // The directional run differs in its quality axis: its own series too.
    assert_eq!(series.len(), 3, "{v}");
    let keys: std::collections::BTreeSet<&str> =
        series.iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 3);
    let (_, shown, _) = goodput(&["history", "show", "--store", store]);
    assert!(shown.contains("directional"), "{shown}");
    assert!(
        shown.contains("not judged") && shown.contains("never used to decide"),
        "{shown}"
    );
    let (_, csv, _) = goodput(&["history", "export", "--store", store, "--format", "csv"]);
    assert!(csv.contains(",directional,"), "{csv}");
    let (_, bmf, _) = goodput(&["history", "export", "--store", store, "--format", "bmf"]);
    assert!(bmf.contains("-bencher-ignore"), "{bmf}");
    let page = dir.path().join("h.html");
    goodput(&[
        "history",
        "html",
        "--store",
        store,
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .contains("directional")
    );
}

/// Bad input, each a clear error that changes nothing stored: a damaged store, a store from a
/// newer goodput, an unreachable database, a password in the URL, a bundle whose summary does
/// not recompute (alone or beside good ones), a path that holds no bundle; a bundle that moved
/// is found again by its content.
#[test]
fn bad_stores_and_bundles_are_named_and_nothing_stored_changes() {
    let dir = tempfile::tempdir().unwrap();
    let b = run(dir.path(), 12.0, "");
    let good = copies(&b, dir.path(), 3);
    let store = dir.path().join("h.sqlite");
    let s = store.to_str().unwrap();
    let (code, _, err) = goodput(&["history", "add", good[0].to_str().unwrap(), "--store", s]);
    assert_eq!(code, 0, "{err}");
    let count = || {
        json(s, &[])["series"][0]["points"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(count(), 1);

    // A summary that does not recompute, added beside a good bundle: refused, nothing added.
    let summary = good[2].join("summary.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    v["steady"]["requests"] = 7.into();
    std::fs::write(&summary, v.to_string()).unwrap();
    let (code, _, err) = goodput(&[
        "history",
        "add",
        good[1].to_str().unwrap(),
        good[2].to_str().unwrap(),
        "--store",
        s,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("copy-02")
            && err.contains("does not recompute")
            && err.contains("steady request count"),
        "{err}"
    );
    assert_eq!(count(), 1);

    // Not a bundle.
    let (code, _, err) = goodput(&["history", "add", dir.path().to_str().unwrap(), "--store", s]);
    assert_eq!(code, 1);
    assert!(err.contains("not a run bundle"), "{err}");
    let (code, _, err) = goodput(&["history", "add", "/nonexistent/bundle", "--store", s]);
    assert_eq!(code, 1);
    assert!(err.contains("no bundle at /nonexistent/bundle"), "{err}");

    // A bundle that moved: found by its content, its place updated; gone, it is marked.
    let moved = dir.path().join("moved");
    std::fs::rename(&good[0], &moved).unwrap();
    let (_, shown, _) = goodput(&["history", "show", "--store", s]);
    assert!(
        shown.contains("bundle not found where it was added"),
        "{shown}"
    );
    let (code, out, err) = goodput(&["history", "add", moved.to_str().unwrap(), "--store", s]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("which was at") && out.contains("updated"),
        "{out}"
    );
    assert_eq!(count(), 1);
    let (code, out, _) = goodput(&["history", "add", moved.to_str().unwrap(), "--store", s]);
    assert_eq!(code, 0);
    assert!(out.contains("already point 1"), "{out}");

    // A store from a newer goodput: refused, untouched.
    let bytes = || std::fs::read(&store).unwrap();
    {
        let db = rusqlite::Connection::open(&store).unwrap();
        db.execute(
            "UPDATE goodput_history_meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    }
    let before = bytes();
    for args in [
        vec!["history", "show", "--store", s],
        vec!["history", "add", good[1].to_str().unwrap(), "--store", s],
    ] {
        let (code, _, err) = goodput(&args);
        assert_eq!(code, 1);
        assert!(
            err.contains("newer goodput") && err.contains("schema 99") && err.contains("h.sqlite"),
            "{err}"
        );
    }
    assert_eq!(before, bytes());

    // A damaged store: named, untouched.
    let damaged = dir.path().join("damaged.sqlite");
    std::fs::write(
        &damaged,
        b"not a database at all, just some bytes that are long enough to look like a header",
    )
    .unwrap();
    let before = std::fs::read(&damaged).unwrap();
    let (code, _, err) = goodput(&[
        "history",
        "add",
        good[1].to_str().unwrap(),
        "--store",
        damaged.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("damaged.sqlite is not an SQLite database"),
        "{err}"
    );
    assert_eq!(before, std::fs::read(&damaged).unwrap());
    // Another program's database: refused.
    let foreign = dir.path().join("foreign.sqlite");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE accounts (id INTEGER)")
        .unwrap();
    let (code, _, err) = goodput(&[
        "history",
        "add",
        good[1].to_str().unwrap(),
        "--store",
        foreign.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("another program's SQLite database") && err.contains("accounts"),
        "{err}"
    );

    // An unreachable database, and a password where it would be kept.
    let (code, _, err) = goodput(&[
        "history",
        "show",
        "--store",
        "postgres://goodput@127.0.0.1:1/x",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("postgres://goodput@127.0.0.1:1/x") && err.contains("cannot connect"),
        "{err}"
    );
    let (code, _, err) = goodput(&[
        "history",
        "show",
        "--store",
        "postgres://goodput:hunter2@127.0.0.1:1/x",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("PGPASSWORD") && !err.contains("hunter2"),
        "{err}"
    );
}

/// Issue #71: `--fail-on regression` over points that are never judged would pass forever.
/// A contract that makes every point directional (here: no quality check) is refused before
/// its run, naming the key that fixes it; a directional point added with the gate (by `history
/// add`) fails it with exit 11 and the reason, rather than exiting 0.
#[test]
fn the_regression_gate_refuses_a_series_it_can_never_judge() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite").display().to_string();
    let no_quality = "[quality]\nmode = \"none\"\n";
    let contract = dir.path().join("directional.toml");
    let text = text_at(12.0, 1, 40).replace("[quality]\nmode = \"consistency\"\nprobes = 2\n", "");
    std::fs::write(&contract, format!("{text}{no_quality}")).unwrap();
    let runs = dir.path().join("runs");
    let (code, _, err) = goodput(&[
        "run",
        "-q",
        contract.to_str().unwrap(),
        "--out",
        runs.to_str().unwrap(),
        "--history",
        &store,
        "--fail-on",
        "regression",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--fail-on regression can never judge this contract's runs")
            && err.contains("set [quality] mode = \"consistency\""),
        "{err}"
    );
    assert!(bundles(&runs).is_empty(), "refused before the run");

    // The same contract run without the gate, then added with it: exit 11, the reason named.
    let (code, _, err) = goodput(&[
        "run",
        "-q",
        contract.to_str().unwrap(),
        "--out",
        runs.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let b = bundles(&runs).pop().unwrap();
    let (code, out, err) = goodput(&[
        "history",
        "add",
        b.to_str().unwrap(),
        "--store",
        &store,
        "--fail-on",
        "regression",
    ]);
    assert_eq!(code, 11, "{out}{err}");
    assert!(
        err.contains("--fail-on regression cannot judge (exit 11)")
            && err.contains("the newest point is directional")
            && err.contains("no quality check"),
        "{err}"
    );
}
