//! `goodput tune`: the engine's launch settings tried one at a time for the highest capacity at
//! the SLO. The contract's `[cold_start] launch` names the engine's command with a placeholder
//! per setting (`{max_batch}`, `{parallel}` …) beside `{port}`; for each value the engine is
//! launched (its time to ready recorded), probed, searched for its capacity exactly as
//! `sweep --capacity` searches (one bundle per setting, its points inside), and stopped, so the
//! machine is left as it was found. A setting that cannot start is a named failure with the
//! engine's own last log line, never a gap.
//!
//! The settings' capacities come from different minutes of the same machine, so the best two
//! are then decided by a paired, interleaved A/B (`goodput ab`'s machinery) at the winner's
//! capacity, both engines up at once on their own ports (each idle while the other's block
//! runs). Without it (`--decide-blocks 0`, an interrupted tune) the report says the ranking is
//! undecided, and calls two capacities within the search's resolution of each other no winner.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::bundle::Bundle;
use crate::contract::Contract;
use crate::report::{Doc, Tone};
use crate::sweep::{Capacity, SweepOptions, Vary};

/// One setting tried: how its engine came up, what it said of itself, its capacity at the SLO
/// and how it stopped; or why it could not be searched.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tried {
    /// The setting's value, as written.
    pub value: String,
    /// The launch command as run (its placeholders filled).
    pub launch: Vec<String>,
    /// Launch to ready, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
    /// What the engine said of itself (probed by the search's first run): engine, slots,
    /// context length, … .
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<(String, String)>,
    /// The capacity search's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// The setting's bundle: its server's logs and the capacity search's.
    pub bundle: PathBuf,
    /// Why it has no answer: it did not start, was not ready, or its search failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// How its server stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// A signal cut it short (its launch or its search): a resumed tune tries it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Whether its outputs are those of the first setting with a capacity: `goodput
    /// compare`'s quality guard on the two searches' first points (the same requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Outputs>,
}

/// A setting's outputs against the first setting's (the quality guard).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outputs {
    /// The setting compared against, `KEY=VALUE`.
    pub against: String,
    /// `held`, `not held` or `unchecked` (`[quality] mode = "none"`, or no output kept).
    pub status: String,
    /// What was measured, in words.
    pub detail: String,
}

impl Outputs {
    fn differ(&self) -> bool {
        self.status == crate::compare::GuardStatus::NotHeld.to_string()
    }
}

impl Tried {
    /// A setting about to be tried: its value, launch command and bundle.
    fn new(value: &str, launch: &[String], bundle: &Path) -> Tried {
        Tried {
            value: value.to_owned(),
            launch: launch.to_vec(),
            ready_s: None,
            facts: Vec::new(),
            capacity: None,
            bundle: bundle.to_owned(),
            failure: None,
            stopped: None,
            cut: false,
            outputs: None,
        }
    }

    /// The capacity found: the rate the passing point offered, else its nominal rate.
    pub fn capacity_rps(&self) -> Option<f64> {
        let c = self.capacity.as_ref()?;
        c.offered_rps.or(c.capacity_rps)
    }

    fn supported(&self) -> bool {
        self.capacity
            .as_ref()
            .is_some_and(|c| c.supported_rps.is_some() && c.supported_rps == c.capacity_rps)
    }
}

/// The paired A/B between the best two settings, at the winner's capacity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decided {
    /// Side A: the runner-up; side B: the winner (by capacity).
    pub a: String,
    pub b: String,
    /// The open-loop rate both sides were offered: the winner's capacity (nominal), req/s.
    pub rate: f64,
    /// How the two were run.
    pub how: String,
    /// The A/B's verdict on B's goodput against A's (requests within the SLO per second: what
    /// a capacity is), and each side's mean goodput over the pairs, req/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<crate::ab::stats::Call>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput_rps: Option<[f64; 2]>,
    /// The A/B's verdict over every headline metric, its sentence and its pairs of blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall: Option<crate::ab::Overall>,
    pub sentence: String,
    pub pairs: usize,
    /// Its bundle (`ab.json`, a block per run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<PathBuf>,
}

/// What `goodput tune` found (`tune.json`, rewritten as each setting ends: `interrupted` stays
/// true until the tune has ended).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneResult {
    pub contract: String,
    /// The setting varied (a placeholder of the launch command) and its values.
    pub setting: Vary,
    pub tried: Vec<Tried>,
    /// The search's resolution: capacities closer than it are not told apart.
    pub resolution: f64,
    /// Most runs of each capacity search, and the longest each may spend confirming, s: with
    /// the resolution, what a resumed tune must search with again.
    #[serde(default)]
    pub max_runs: usize,
    #[serde(default)]
    pub confirm_within_s: f64,
    /// The best two decided by a paired A/B, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
    pub interrupted: bool,
}

impl TuneResult {
    /// A tune before its first setting: nothing tried, not yet ended.
    fn begun(c: &Contract, setting: &Vary, search: Search) -> TuneResult {
        TuneResult {
            contract: c.name.clone(),
            setting: setting.clone(),
            tried: Vec::new(),
            resolution: search.resolution,
            max_runs: search.max_runs,
            confirm_within_s: search.confirm_within.as_secs_f64(),
            decided: None,
            interrupted: true,
        }
    }

    /// The settings with a capacity, best first; a search a signal cut short is not ranked
    /// (its bracket never closed).
    pub fn ranked(&self) -> Vec<&Tried> {
        let mut v: Vec<&Tried> = self
            .tried
            .iter()
            .filter(|t| t.capacity_rps().is_some() && !t.cut)
            .collect();
        v.sort_by(|a, b| {
            b.capacity_rps()
                .unwrap_or(0.0)
                .total_cmp(&a.capacity_rps().unwrap_or(0.0))
        });
        v
    }
}

/// The placeholder a setting fills in the launch command.
fn placeholder(key: &str) -> String {
    format!("{{{key}}}")
}

/// The launch command and target URL of one setting, on `port`.
fn filled(c: &Contract, key: &str, value: &str, port: u16) -> (Vec<String>, Option<String>) {
    let fill = |s: &str| {
        s.replace(&placeholder(key), value)
            .replace("{port}", &port.to_string())
    };
    let launch = c
        .cold_start
        .as_ref()
        .and_then(|cs| cs.launch.as_ref())
        .map(|l| l.iter().map(|a| fill(a)).collect())
        .unwrap_or_default();
    (launch, c.target.url.as_deref().map(fill))
}

/// The contract each setting's capacity search runs: the tune's own, attached to the launched
/// engine (`target.url` filled, no `[cold_start]`: the engine is up before the search and stays
/// up through all its points).
fn search_text(src: &str, url: &str) -> anyhow::Result<String> {
    let mut doc: toml_edit::DocumentMut = src.parse().context("the contract is not TOML")?;
    doc.remove("cold_start");
    crate::sweep::set_key(&doc.to_string(), "target.url", &format!("\"{url}\""))
        .map_err(|e| anyhow::anyhow!("target.url: {e}"))
}

/// Refuses a tune that could not mean what it says, before anything is launched.
fn check(path: &Path, src: &str, c: &Contract, setting: &Vary) -> anyhow::Result<()> {
    let at = path.display();
    let Some(launch) = c.cold_start.as_ref().and_then(|cs| cs.launch.as_ref()) else {
        bail!(
            "{at}: goodput tune launches the engine once per setting: give the contract [cold_start] launch = [\"…\", \"{}\", …] with the setting's placeholder",
            placeholder(&setting.key)
        );
    };
    let mark = placeholder(&setting.key);
    if !launch.iter().any(|a| a.contains(&mark)) {
        bail!(
            "{at}: cold_start.launch: the placeholder {mark} of --setting {} appears nowhere in it ({}): every value would launch the same engine",
            setting.key,
            launch.join(" ")
        );
    }
    let url = c.target.url.as_deref().unwrap_or_default();
    if !url.contains("{port}") && !launch.iter().any(|a| a.contains("{port}")) {
        bail!(
            "{at}: target.url: give it a {{port}} (and the launch command the same), so each setting's engine gets a free port goodput picks"
        );
    }
    for v in &setting.values {
        let (_, url) = filled(c, &setting.key, v, 1);
        let (each, _) = crate::workload::parse(&search_text(src, &url.unwrap_or_default())?, path)
            .with_context(|| format!("--setting {}={v}", setting.key))?;
        // Refused before any engine is launched, not once per setting after it is up.
        crate::sweep::capacity_needs(&each).map_err(|e| {
            anyhow::anyhow!(
                "{at}: goodput tune searches each setting's capacity: {}",
                e.to_string().trim_start_matches("--capacity ")
            )
        })?;
    }
    Ok(())
}

/// The last line the engine wrote, for a failure's one-line reason.
fn last_line(tail: &str) -> &str {
    tail.lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("--- "))
        .unwrap_or("(the engine wrote nothing)")
}

/// How each setting's capacity is searched (as `sweep --capacity` takes them), and the best
/// two decided.
#[derive(Debug, Clone, Copy)]
pub struct Search {
    pub resolution: f64,
    pub max_runs: usize,
    pub confirm_within: std::time::Duration,
    /// Most blocks of the deciding A/B (pairs × 2); 0: none.
    pub decide_blocks: usize,
}

/// What every setting's try shares.
struct At<'a> {
    path: &'a Path,
    src: &'a str,
    c: &'a Contract,
    setting: &'a Vary,
    search: Search,
    o: &'a SweepOptions,
    http: reqwest::Client,
}

/// Tries each value of `setting` in turn: launch, ready, capacity search, stop; `resume`: the
/// bundle of an interrupted tune of the same contract, whose finished settings are kept.
pub async fn tune(
    path: &Path,
    src: &str,
    setting: &Vary,
    search: Search,
    o: &SweepOptions,
    resume: Option<&Path>,
) -> anyhow::Result<(Bundle, TuneResult)> {
    let (c, _) = crate::workload::parse(src, path)?;
    check(path, src, &c, setting)?;
    let (parent, kept, kept_decided) = match resume {
        Some(dir) => resumed(dir, src, setting, search, o)?,
        None => (fresh(&c, src, o)?, Vec::new(), None),
    };
    let at = At {
        path,
        src,
        c: &c,
        setting,
        search,
        o,
        http: {
            crate::client::install_tls_provider();
            reqwest::Client::new()
        },
    };
    // Written as each setting ends, so a tune stopped by anything keeps every finished one.
    let mut result = TuneResult::begun(&c, setting, search);
    let mut stopped_early = false;
    for (i, value) in setting.values.iter().enumerate() {
        if let Some(t) = kept.iter().find(|t| &t.value == value) {
            o.watch.line(&format!(
                "setting {} of {}: {}={value}: kept from the interrupted tune",
                i + 1,
                setting.values.len(),
                setting.key
            ));
            result.tried.push(t.clone());
            continue;
        }
        if o.cancel.is_cancelled() {
            stopped_early = true;
            continue;
        }
        let dir = next_setting_dir(&parent.dir)?;
        let (t, cut) = at.try_one(i, value, dir).await?;
        stopped_early |= cut;
        if let Some(f) = &t.failure {
            o.watch.note(f);
        } else {
            o.watch.line(&line(&setting.key, &t));
        }
        result.tried.push(t);
        parent.write_json("tune.json", &result)?;
    }
    let interrupted = stopped_early || o.cancel.is_cancelled();
    guard_outputs(&mut result);
    if let [b, a, ..] = result.ranked().as_slice()
        && search.decide_blocks >= 4
        && !interrupted
    {
        let (a, b) = ((*a).clone(), (*b).clone());
        result.decided =
            match kept_decided.filter(|d| d.a == at.side_name(&a) && d.b == at.side_name(&b)) {
                Some(d) => {
                    o.watch
                        .line("the paired A/B of the best two: kept from the tune resumed");
                    Some(d)
                }
                None => Some(at.decide(&a, &b, &parent).await?),
            };
    }
    result.interrupted = interrupted || o.cancel.is_cancelled();
    write(&parent, &result)?;
    Ok((parent, result))
}

/// A new tune's bundle under the output root, its contract in it.
fn fresh(c: &Contract, src: &str, o: &SweepOptions) -> anyhow::Result<Bundle> {
    let parent = Bundle::create(&o.out_root, c)
        .with_context(|| format!("creating a bundle under {}", o.out_root.display()))?;
    parent.write("contract.toml", src)?;
    Ok(parent)
}

/// The tune's answer into its bundle: `tune.json`, `tune.md`, `tune.html`.
fn write(parent: &Bundle, r: &TuneResult) -> anyhow::Result<()> {
    parent.write_json("tune.json", r)?;
    let doc = document(r);
    parent.write("tune.md", &doc.markdown())?;
    parent.write(
        "tune.html",
        &crate::report::format::html::wrap("goodput tune", &doc),
    )?;
    Ok(())
}

/// The next `setting-N` directory of the tune's bundle not yet used (a resumed tune's new
/// tries never overwrite an earlier one's).
fn next_setting_dir(parent: &Path) -> anyhow::Result<PathBuf> {
    let dir = (1..)
        .map(|n| parent.join(format!("setting-{n}")))
        .find(|d| !d.exists())
        .unwrap_or_else(|| parent.join("setting"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// An interrupted tune's bundle, to continue: its settings that ended (not cut short by a
/// signal) and its A/B when that ended. Refused, naming the difference, when the contract,
/// the setting's name or the search differ: the kept capacities would answer another question.
fn resumed(
    dir: &Path,
    src: &str,
    setting: &Vary,
    search: Search,
    o: &SweepOptions,
) -> anyhow::Result<(Bundle, Vec<Tried>, Option<Decided>)> {
    let at = dir.display();
    let old = load_tried(dir)?;
    let kept_src = std::fs::read_to_string(dir.join("contract.toml"))
        .with_context(|| format!("--resume {at}: reading its contract.toml"))?;
    let now = crate::secrets::redact(src);
    if kept_src != now {
        let line = kept_src
            .lines()
            .zip(now.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| kept_src.lines().count().min(now.lines().count()));
        bail!(
            "--resume {at}: the contract (with its overrides) differs from the one the tune searched, first at line {} ({:?} against {:?}): a resumed tune must search the same contract; start a new tune instead",
            line + 1,
            kept_src.lines().nth(line).unwrap_or("(end)"),
            now.lines().nth(line).unwrap_or("(end)")
        );
    }
    if old.setting.key != setting.key {
        bail!(
            "--resume {at}: it tuned {}, not {}: a resumed tune varies the same setting",
            old.setting.key,
            setting.key
        );
    }
    let asked = [
        ("--resolution", old.resolution, search.resolution),
        ("--max-runs", old.max_runs as f64, search.max_runs as f64),
        (
            "--confirm-within (s)",
            old.confirm_within_s,
            search.confirm_within.as_secs_f64(),
        ),
    ];
    for (flag, was, now) in asked {
        if (was - now).abs() > 1e-9 {
            bail!(
                "--resume {at}: {flag} was {was} and is now {now}: its settings were searched with the first; give the same"
            );
        }
    }
    let (kept, cut): (Vec<Tried>, Vec<Tried>) = old.tried.into_iter().partition(|t| !t.cut);
    for t in &cut {
        if setting.values.contains(&t.value) {
            o.watch.note(&format!(
                "{}={}: cut short by a signal last time: tried again (what it measured stays in {})",
                setting.key,
                t.value,
                t.bundle.display()
            ));
        }
    }
    let decided = if old.interrupted { None } else { old.decided };
    Ok((
        Bundle {
            dir: dir.to_owned(),
        },
        kept,
        decided,
    ))
}

/// A tune's `tune.json`, its paths moved to where the bundle is now.
fn load_tried(dir: &Path) -> anyhow::Result<TuneResult> {
    let file = dir.join("tune.json");
    let mut r: TuneResult = crate::bundle::read_json(&file)?.with_context(|| {
        format!(
            "{} has no tune.json: not a goodput tune bundle, or one stopped before its first setting ended (start it afresh)",
            dir.display()
        )
    })?;
    for t in &mut r.tried {
        if let Some(name) = t.bundle.file_name() {
            t.bundle = dir.join(name);
        }
    }
    if let Some(b) = r.decided.as_mut().and_then(|d| d.bundle.as_mut())
        && let Some(name) = b.file_name()
    {
        *b = dir.join("decide").join(name);
    }
    Ok(r)
}

/// A tune rebuilt from its bundles (`goodput report`): the settings from `tune.json`, each
/// capacity from its own search's `sweep.json`, the deciding verdict from its A/B's `ab.json`.
pub fn load(dir: &Path) -> anyhow::Result<TuneResult> {
    let mut r = load_tried(dir)?;
    for t in r.tried.iter_mut().filter(|t| t.failure.is_none() && !t.cut) {
        if let Some(sweep) = find_file(&t.bundle, "sweep.json", 3) {
            let v: Option<serde_json::Value> = crate::bundle::read_json(&sweep)?;
            if let Some(cap) = v.as_ref().and_then(|v| v.get("capacity")) {
                t.capacity = Some(
                    serde_json::from_value(cap.clone())
                        .with_context(|| format!("reading {}: key `capacity`", sweep.display()))?,
                );
            }
        }
    }
    guard_outputs(&mut r);
    if let Some(d) = r.decided.as_mut()
        && let Some(b) = d.bundle.clone()
        && let Some(ab) = crate::bundle::read_json::<crate::ab::AbResult>(&b.join("ab.json"))?
    {
        judged(d, &ab);
    }
    Ok(r)
}

/// The bundle of a setting's first point: the contract as written, at its own rate, so every
/// setting's first point sent the same requests (later points run at rates of their own, and a
/// run's probes follow its plan: two settings' capacity points need not share a prompt).
fn first_point(setting_dir: &Path) -> Option<PathBuf> {
    let sweep = find_file(setting_dir, "sweep.json", 3)?;
    let first = sweep.parent()?.join("point-01");
    first
        .join(crate::bundle::REQUESTS)
        .is_file()
        .then_some(first)
}

/// Each setting's outputs held against the first setting with a capacity, on their first
/// points (the same requests in each): a setting that changes outputs (a quantization, a draft
/// model) is never called a win.
fn guard_outputs(r: &mut TuneResult) {
    let key = r.setting.key.clone();
    let mut base: Option<(String, crate::compare::Side)> = None;
    for t in &mut r.tried {
        t.outputs = None;
        let Some(side) = first_point(&t.bundle).and_then(|p| crate::compare::load_side(&p).ok())
        else {
            continue;
        };
        match &base {
            None => base = Some((format!("{key}={}", t.value), side)),
            Some((name, b)) => {
                let g = crate::compare::quality_guard(b, &side);
                t.outputs = Some(Outputs {
                    against: name.clone(),
                    status: g.status.to_string(),
                    detail: g.detail,
                });
            }
        }
    }
}

/// The first file named `name` at most `depth` directories below `dir`.
fn find_file(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let here = dir.join(name);
    if here.is_file() {
        return Some(here);
    }
    if depth == 0 {
        return None;
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subs.sort();
    subs.iter().find_map(|d| find_file(d, name, depth - 1))
}

/// The A/B's verdict on goodput, its sentence and pairs, into `d`.
fn judged(d: &mut Decided, r: &crate::ab::AbResult) {
    let judged = r
        .metrics
        .iter()
        .position(|m| matches!(m.kind, crate::ab::Kind::Goodput))
        .and_then(|i| r.verdicts.get(i))
        .and_then(|v| v.judged.clone());
    d.goodput = judged.as_ref().map(|j| j.call);
    d.goodput_rps = judged.map(|j| [j.mean_a, j.mean_b]);
    d.overall = Some(r.overall);
    d.sentence = r.sentence.clone();
    d.pairs = r.pairs;
}

impl At<'_> {
    /// A setting as a side of the deciding A/B: `KEY=VALUE`.
    fn side_name(&self, t: &Tried) -> String {
        format!("{}={}", self.setting.key, t.value)
    }

    /// One side of the deciding A/B: `t`'s engine launched afresh (its log in
    /// `decide-VALUE`), and its contract at `rate` against it; or why it did not come up.
    async fn side(
        &self,
        t: &Tried,
        rate: f64,
        parent: &Bundle,
    ) -> anyhow::Result<Result<(crate::coldstart::Launched, crate::ab::Side), String>> {
        let key = &self.setting.key;
        let dir = parent.dir.join(format!("decide-{}", t.value));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let (launch, url) = filled(self.c, key, &t.value, free_port()?);
        let url = url.unwrap_or_default();
        let server = match self.up(&launch, &url, &dir).await {
            Ok((server, _)) => server,
            Err((why, _)) => return Ok(Err(why)),
        };
        let text = crate::sweep::set_key(
            &search_text(self.src, &url)?,
            "load.rate",
            &format!("{rate:.4}"),
        )
        .map_err(|e| anyhow::anyhow!("load.rate: {e}"))?;
        let (contract, inputs) = crate::workload::parse(&text, self.path)?;
        let side = crate::ab::Side {
            label: format!("{key}={}", t.value),
            contract,
            inputs,
        };
        Ok(Ok((server, side)))
    }

    /// How the deciding A/B runs: into `decide/` of the tune's bundle, its budget of blocks.
    fn ab_options(&self, parent: &Bundle) -> crate::ab::AbOptions {
        let blocks = self.search.decide_blocks;
        crate::ab::AbOptions {
            out_root: parent.dir.join("decide"),
            watch: self.o.watch.clone(),
            argv: self.o.argv.clone(),
            cancel: self.o.cancel.clone(),
            signal: self.o.signal.clone(),
            wake_latency_hold: self.o.wake_latency_hold,
            min_pairs: (blocks / 2).min(4),
            max_pairs: blocks / 2,
            mde: 0.05,
            power: 0.8,
        }
    }

    /// Side A (the runner-up) against B (the winner) in paired, interleaved blocks at the
    /// winner's capacity, both engines launched afresh and up at once.
    async fn decide(&self, a: &Tried, b: &Tried, parent: &Bundle) -> anyhow::Result<Decided> {
        let key = &self.setting.key;
        let rate = b
            .capacity
            .as_ref()
            .and_then(|c| c.capacity_rps)
            .unwrap_or_default();
        let mut d = Decided {
            a: self.side_name(a),
            b: self.side_name(b),
            rate,
            how: "Both engines launched afresh and up at once, each on its own port (each idle while the other's block runs); blocks interleaved A then B, then B then A".into(),
            goodput: None,
            goodput_rps: None,
            overall: None,
            sentence: String::new(),
            pairs: 0,
            bundle: None,
        };
        self.o.watch.line(&format!(
            "deciding {} against {} by a paired A/B at {rate:.2} req/s",
            d.a, d.b
        ));
        let mut servers = Vec::new();
        let mut sides = Vec::new();
        for t in [a, b] {
            match self.side(t, rate, parent).await? {
                Ok((server, side)) => {
                    servers.push(server);
                    sides.push(side);
                }
                Err(why) => {
                    for s in servers {
                        s.stop().await;
                    }
                    d.sentence = format!(
                        "not decided: {key}={} did not come up again: {why}",
                        t.value
                    );
                    return Ok(d);
                }
            }
        }
        let opts = self.ab_options(parent);
        let (side_b, side_a) = (sides.pop(), sides.pop());
        let outcome = match (side_a, side_b) {
            (Some(x), Some(y)) => crate::ab::ab(x, y, &opts).await,
            _ => Err(anyhow::anyhow!("a side was not built")),
        };
        for s in servers {
            s.stop().await;
        }
        match outcome {
            Ok((bundle, r)) => {
                judged(&mut d, &r);
                d.bundle = Some(bundle.dir);
            }
            Err(e) => d.sentence = format!("not decided: {e:#}"),
        }
        Ok(d)
    }

    /// The engine launched with `launch` and waited for until ready at `url` (its log in
    /// `dir`): it and its time to ready, s; or why not, and how it stopped.
    async fn up(
        &self,
        launch: &[String],
        url: &str,
        dir: &Path,
    ) -> Result<(crate::coldstart::Launched, f64), (String, Option<String>)> {
        let this = crate::contract::ColdStart {
            launch: Some(launch.to_vec()),
            ..self.c.cold_start.clone().unwrap_or_default()
        };
        let started = Instant::now();
        let mut server =
            crate::coldstart::Launched::spawn(&this, dir).map_err(|e| (e.to_string(), None))?;
        let ready = tokio::select! {
            r = crate::coldstart::wait_ready(&self.http, url, &this, Some(&mut server), started) => r.map(|_| ()).map_err(|e| e.to_string()),
            () = self.o.cancel.cancelled() => Err("stopped by a signal while it came up".to_owned()),
        };
        match ready {
            Ok(()) => Ok((server, started.elapsed().as_secs_f64())),
            Err(e) => {
                let tail = server.log_tail();
                let stopped = server.stop().await;
                let first = e.lines().next().unwrap_or_default();
                let first = first.trim_end_matches("; last lines of its log:");
                Err((
                    format!("{first}; its last log line: {}", last_line(&tail)),
                    Some(stopped),
                ))
            }
        }
    }

    /// One setting: its engine launched on a free port, its capacity searched, the engine
    /// stopped. Whether a signal cut its search short.
    async fn try_one(&self, i: usize, value: &str, dir: PathBuf) -> anyhow::Result<(Tried, bool)> {
        let key = &self.setting.key;
        let (launch, url) = filled(self.c, key, value, free_port()?);
        let dir = &dir;
        let url = url.unwrap_or_default();
        let name = format!("{key}={value}");
        self.o.watch.line(&format!(
            "setting {} of {}: {name}: launching `{}`",
            i + 1,
            self.setting.values.len(),
            launch.join(" ")
        ));
        let mut t = Tried::new(value, &launch, dir);
        // Another server already on the port would be searched in this setting's name.
        let authority = crate::text::authority(&url).to_owned();
        if tokio::net::TcpStream::connect(&authority).await.is_ok() {
            t.failure = Some(format!(
                "{name}: something already answers at {authority} before the launch: not searched (it would not be this setting's engine)"
            ));
            return Ok((t, false));
        }
        let server = match self.up(&launch, &url, dir).await {
            Ok((server, ready_s)) => {
                t.ready_s = Some(ready_s);
                server
            }
            Err((why, stopped)) => {
                t.failure = Some(format!("{name}: {why}"));
                t.stopped = stopped;
                t.cut = self.o.cancel.is_cancelled();
                let cut = t.cut;
                return Ok((t, cut));
            }
        };
        let inner = SweepOptions {
            out_root: dir.clone(),
            ..self.o.clone()
        };
        let s = self.search;
        let searched = crate::sweep::capacity(
            self.path,
            &search_text(self.src, &url)?,
            s.resolution,
            s.max_runs,
            s.confirm_within,
            &inner,
        )
        .await;
        let cut = match searched {
            Ok((_, r)) => {
                t.facts = r
                    .points
                    .first()
                    .map(|p| probed(&p.bundle))
                    .unwrap_or_default();
                t.capacity = r.capacity;
                r.interrupted
            }
            Err(e) => {
                t.failure = Some(format!(
                    "{name}: the capacity search failed: {e:#}; the engine's last log line: {}",
                    last_line(&server.log_tail())
                ));
                self.o.cancel.is_cancelled()
            }
        };
        t.stopped = Some(server.stop().await);
        t.facts.extend(crate::coldstart::stated_memory(dir));
        t.cut = cut;
        Ok((t, cut))
    }
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(l.local_addr()?.port())
}

/// The facts a run probed that tell one engine setting from another.
fn probed(bundle: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(bundle.join(crate::bundle::ENVIRONMENT)) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    [
        "engine",
        "slots",
        "max_model_len",
        "parallelism",
        "precision",
    ]
    .iter()
    .filter_map(|k| {
        let value = v["facts"]["facts"][k]["value"].as_str()?;
        Some(((*k).to_owned(), value.to_owned()))
    })
    .collect()
}

/// One setting's outcome in a line.
fn line(key: &str, t: &Tried) -> String {
    match (&t.failure, t.capacity_rps()) {
        (Some(f), _) => format!("  {f}"),
        (None, Some(rps)) => format!(
            "  {key}={}: capacity {rps:.2} req/s ({}), ready in {} s",
            t.value,
            if t.supported() {
                "supported"
            } else {
                "indicated"
            },
            crate::report::num(t.ready_s.unwrap_or_default())
        ),
        (None, None) if t.cut => format!(
            "  {key}={}: cut short by a signal (a resume tries it again)",
            t.value
        ),
        (None, None) => format!("  {key}={}: no rate tried met the SLO", t.value),
    }
}

/// The tune as a document: the answer, the table of settings, what is not yet claimed.
pub fn document(r: &TuneResult) -> Doc {
    let mut d = Doc::default();
    let key = &r.setting.key;
    d.h(format!("goodput tune · {} · {key}", r.contract));
    answer(&mut d, r);
    d.figure(frontier(r));
    let mut head = vec![
        "setting",
        "capacity req/s",
        "support",
        "ready s",
        "engine said",
    ];
    // A column when some setting's outputs were compared; one line when none could be.
    let unchecked = crate::compare::GuardStatus::Unchecked.to_string();
    let against = r.tried.iter().find_map(|t| {
        t.outputs
            .as_ref()
            .filter(|o| o.status != unchecked)
            .map(|o| format!("outputs vs {}", o.against))
    });
    if let Some(a) = &against {
        head.push(a);
    }
    d.table(&head, rows(r, against.is_some()));
    if against.is_none()
        && let Some(o) = r.tried.iter().find_map(|t| t.outputs.as_ref())
    {
        d.line(format!(
            "Outputs across settings not compared: {} (the quality guard needs [quality] mode = \"consistency\" or \"reference\").",
            o.detail
        ));
    }
    for t in &r.tried {
        if let Some(f) = &t.failure {
            d.toned(Tone::Warn, f.clone());
        }
        if let Some(o) = t.outputs.as_ref().filter(|o| o.differ()) {
            d.toned(
                Tone::Warn,
                format!(
                    "{key}={}: its outputs differ from {}'s: {}.",
                    t.value, o.against, o.detail
                ),
            );
        }
    }
    if let Some(rule) = r
        .tried
        .iter()
        .find_map(|t| t.capacity.as_ref().map(|c| c.rule.clone()))
    {
        d.line(format!("Capacity rule: {rule}."));
    }
    if r.interrupted {
        d.toned(
            Tone::Warn,
            "Interrupted: the settings not listed were not tried (`goodput tune … --resume TUNE_BUNDLE` continues it, keeping every setting that ended).",
        );
    }
    d
}

/// How the best is named: only "so far" while settings remain untried.
fn best(r: &TuneResult) -> &'static str {
    if r.interrupted { "Best so far" } else { "Best" }
}

/// The best setting and its gain over the next, or why there is none; what is not claimed.
fn answer(d: &mut Doc, r: &TuneResult) {
    let key = &r.setting.key;
    let ranked = r.ranked();
    match ranked.as_slice() {
        [] if r.interrupted => d.toned(
            Tone::Warn,
            "No setting's search has ended yet: the tune was interrupted (a setting cut short is not ranked).",
        ),
        [] => d.toned(
            Tone::Warn,
            "No setting has a capacity at the SLO: every one failed to start, or met the SLO at no rate tried.",
        ),
        [one] => d.line(format!(
            "{}: {key}={} at {:.2} req/s, the only setting with a capacity.",
            best(r),
            one.value,
            one.capacity_rps().unwrap_or_default()
        )),
        [a, b, ..] => {
            let (x, y) = (
                a.capacity_rps().unwrap_or_default(),
                b.capacity_rps().unwrap_or_default(),
            );
            let gain = if y > 0.0 { x / y - 1.0 } else { f64::INFINITY };
            let differ = [*a, *b]
                .into_iter()
                .find_map(|t| t.outputs.as_ref().filter(|o| o.differ()).map(|o| (t, o)));
            if let Some((t, o)) = differ {
                d.toned(
                    Tone::Warn,
                    format!(
                        "Most capacity: {key}={} at {x:.2} req/s against {key}={} at {y:.2} req/s, but {key}={}'s outputs differ from {}'s ({}): not called a win (the quality guard).",
                        a.value, b.value, t.value, o.against, o.detail
                    ),
                );
            } else if gain <= r.resolution {
                d.line(format!(
                    "No clear best: {key}={} ({x:.2} req/s) and {key}={} ({y:.2} req/s) lie within the search's resolution ({:.0}%) of each other.",
                    a.value,
                    b.value,
                    r.resolution * 100.0
                ));
            } else {
                d.line(format!(
                    "{}: {key}={} at {x:.2} req/s, +{:.0}% over {key}={} ({y:.2} req/s).",
                    best(r),
                    a.value,
                    gain * 100.0,
                    b.value
                ));
            }
            decided(d, r);
        }
    }
}

/// What the paired A/B between the best two said, or that none decided them.
fn decided(d: &mut Doc, r: &TuneResult) {
    let Some(x) = &r.decided else {
        d.toned(
            Tone::Warn,
            "Not decided by a paired A/B: each capacity comes from its own minutes of this machine, so a gain near the resolution may be noise (run without --decide-blocks 0, or `goodput ab` on the two settings' servers).",
        );
        return;
    };
    use crate::ab::stats::Call;
    let gain = x.goodput_rps.map_or(String::new(), |[a, b]| {
        format!(" (goodput {b:.2} against {a:.2} req/s)")
    });
    let verdict = match x.goodput {
        Some(Call::Better) => format!(
            "decided: {} serves more within the SLO than {}{gain}",
            x.b, x.a
        ),
        Some(Call::Worse) => format!(
            "the A/B reverses the ranking: {} serves more within the SLO than {} at that rate",
            x.a, x.b
        ),
        Some(Call::Same) => format!(
            "no difference in goodput as large as 5% between {} and {} at that rate: no clear best",
            x.a, x.b
        ),
        Some(Call::Open) | None => "goodput not decided within its budget of blocks".to_owned(),
    };
    let tone = Tone::warn_if(x.goodput != Some(Call::Better));
    d.toned(
        tone,
        format!(
            "Paired A/B at {:.2} req/s (the winner's capacity, its nominal load.rate), {} pairs of blocks: {verdict}. Every metric: {}. {}.",
            x.rate, x.pairs, x.sentence, x.how
        ),
    );
}

/// One row per setting tried; `outputs`: with the quality guard's column.
fn rows(r: &TuneResult, outputs: bool) -> Vec<Vec<String>> {
    let key = &r.setting.key;
    r.tried
        .iter()
        .map(|t| {
            let mut row = vec![
                format!("{key}={}", t.value),
                t.capacity_rps().map_or("—".into(), |c| format!("{c:.2}")),
                match (&t.failure, t.capacity.is_some()) {
                    _ if t.cut => "cut short (a resume retries it)".into(),
                    (Some(_), _) => "failed".into(),
                    (None, true) if t.capacity_rps().is_none() => "none met the SLO".into(),
                    (None, true) if t.supported() => "supported".into(),
                    (None, true) => "indicated".into(),
                    (None, false) => "—".into(),
                },
                t.ready_s.map_or("—".into(), crate::report::num),
                t.facts
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ];
            if outputs {
                row.push(t.outputs.as_ref().map_or_else(
                    || {
                        if t.capacity_rps().is_some() {
                            "(the reference)".to_owned()
                        } else {
                            "—".to_owned()
                        }
                    },
                    |o| o.status.clone(),
                ));
            }
            row
        })
        .collect()
}

/// The settings' capacities as bars, in the order tried: solid where supported, hatched pale
/// where only indicated, a failed setting named where its bar would be.
fn frontier(r: &TuneResult) -> String {
    use std::fmt::Write as _;
    let esc = crate::report::svg::esc;
    let (w, row, left, top) = (560.0, 26.0, 150.0, 34.0);
    let h = top + row * r.tried.len() as f64 + 16.0;
    let most = r
        .tried
        .iter()
        .filter_map(Tried::capacity_rps)
        .fold(1e-9, f64::max);
    let x = |v: f64| (w - left - 90.0) * (v / most);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="tune-frontier" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" class="chart" role="img" aria-label="Capacity at the SLO by setting" font-family="sans-serif" font-size="12"><text x="8" y="18" font-size="14" font-weight="bold">Capacity at the SLO by {} (req/s; pale: indicated only)</text>"#,
        esc(&r.setting.key)
    );
    for (k, t) in r.tried.iter().enumerate() {
        let y = top + row * k as f64;
        let _ = write!(
            s,
            r#"<text x="8" y="{}">{}={}</text>"#,
            y + 14.0,
            esc(&r.setting.key),
            esc(&t.value)
        );
        match t.capacity_rps() {
            Some(c) => {
                let fill = if t.supported() { "#4a7ebb" } else { "#a9c4e4" };
                let _ = write!(
                    s,
                    r#"<rect x="{left}" y="{}" width="{}" height="18" fill="{fill}"/><text x="{}" y="{}">{}</text>"#,
                    y + 1.0,
                    x(c).max(1.0),
                    left + x(c) + 6.0,
                    y + 14.0,
                    crate::report::num(c)
                );
            }
            None => {
                let what = if t.failure.is_some() {
                    "failed (see below)"
                } else {
                    "no rate met the SLO"
                };
                let _ = write!(
                    s,
                    r##"<text x="{left}" y="{}" fill="#b94a48">{what}</text>"##,
                    y + 14.0
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}
