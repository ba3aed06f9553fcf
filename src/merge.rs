//! `goodput merge`: the bundles of one sharded run (`goodput run --shard I/N`, one per client
//! machine) joined into the one bundle a single client would have written.
//!
//! The shards must be of one plan: the same contract but for `load.shard` (every fingerprint
//! equal), the same shard count and start instant, every shard present exactly once. Each
//! shard's records are on its own clock, whose origin is its process start; its schedule began
//! at the common start instant, `origin_us` on that clock. The merged clock puts every shard's
//! origin at the latest of them, so each record moves by `latest − origin_us` and intended send
//! times line up as the plan drew them. The raw records are concatenated (each marked with its
//! shard) and the summary recomputed from them, never by averaging the shards' percentiles.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::analyze::Summary;
use crate::analyze::shards::ShardFacts;
use crate::bundle::{
    Bundle, COMMAND, CONTRACT, CommandFile, ENVIRONMENT, EnvironmentFile, METRICS, REFERENCES,
    REQUESTS,
};
use crate::contract::{Contract, Shard, Written};
use crate::record::Record;
use jiff::Timestamp;

/// One shard's bundle, read.
struct Part {
    dir: PathBuf,
    contract: Contract,
    shard: Shard,
    start_at: Written<Timestamp>,
    /// Where the schedule began on the shard's clock, µs.
    origin_us: u64,
    environment: EnvironmentFile,
    command: CommandFile,
    records: Vec<Record>,
}

/// A merged run: its bundle and summary, and what the reader should know of its shards.
#[derive(Debug)]
pub struct Merged {
    pub bundle: Bundle,
    pub summary: Summary,
    pub warnings: Vec<String>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    crate::bundle::read_json(path)?.with_context(|| format!("{} is missing", path.display()))
}

fn read_part(dir: &Path) -> anyhow::Result<Part> {
    let bundle = Bundle::open(dir)?;
    let (contract, _) = crate::workload::load(&bundle.path(CONTRACT))?;
    let environment: EnvironmentFile = read_json(&bundle.path(ENVIRONMENT))?;
    let (Some(shard), Some(start_at)) = (contract.load.shard(), contract.load.start_at.clone())
    else {
        bail!(
            "{} is not a shard's bundle: its contract has no load.shard (it was not run with --shard I/N)",
            dir.display()
        );
    };
    let origin_us = environment.shard.as_ref().and_then(|s| s.origin_us).with_context(|| {
        format!(
            "{}: environment.json has no shard.origin_us (the shard stopped before its start instant?)",
            dir.display()
        )
    })?;
    let command: CommandFile = crate::bundle::read_json(&bundle.path(COMMAND))?.unwrap_or_default();
    let (records, warning) =
        crate::record::read_jsonl_noted(&bundle.path(REQUESTS)).map_err(anyhow::Error::msg)?;
    if let Some(w) = warning {
        bail!("{}: {w}", dir.display());
    }
    Ok(Part {
        dir: dir.to_owned(),
        contract,
        shard,
        start_at,
        origin_us,
        environment,
        command,
        records,
    })
}

/// Every check that the parts are the shards of one plan, each once; the parts in shard order.
fn check(mut parts: Vec<Part>) -> anyhow::Result<Vec<Part>> {
    let Some(first) = parts.first() else {
        bail!("nothing to merge: name the bundles of every shard");
    };
    let (n, start, name) = (first.shard.count, first.start_at.clone(), first.dir.clone());
    let axes = first.contract.unsharded().fingerprints_list();
    let names = first.contract.axes().map(|(name, _)| name);
    for p in &parts {
        if p.shard.count != n {
            bail!(
                "{} is shard {} (of {}), but {} is of {n}: these are not the shards of one run",
                p.dir.display(),
                p.shard,
                p.shard.count,
                name.display()
            );
        }
        if p.start_at.get() != start.get() {
            bail!(
                "{} (shard {}) started at {}, but {} at {}: the shards of one run share their start instant",
                p.dir.display(),
                p.shard,
                p.start_at.text(),
                name.display(),
                start.text()
            );
        }
        let differ: Vec<&str> = p
            .contract
            .unsharded()
            .fingerprints_list()
            .iter()
            .zip(&axes)
            .zip(names)
            .filter(|((a, b), _)| a != b)
            .map(|(_, name)| name)
            .collect();
        if !differ.is_empty() {
            bail!(
                "{} (shard {}) belongs to a different plan: its contract's {} differ from {}'s",
                p.dir.display(),
                p.shard,
                differ.join(", "),
                name.display()
            );
        }
    }
    parts.sort_by_key(|p| p.shard.index);
    for w in parts.windows(2) {
        if w[0].shard.index == w[1].shard.index {
            bail!(
                "shard {} is given twice: {} and {}",
                w[0].shard,
                w[0].dir.display(),
                w[1].dir.display()
            );
        }
    }
    let missing: Vec<String> = (0..n)
        .filter(|i| !parts.iter().any(|p| p.shard.index == *i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "shard {} missing: a merged run needs every shard of the plan (given: {})",
            missing.join(", "),
            parts
                .iter()
                .map(|p| format!("{} from {}", p.shard, p.dir.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(parts)
}

/// Every shard's records against the shard itself, before anything is written: none empty
/// (unless allowed), every record within the time its own run lasted on its own clock (a
/// record days away from it is another run's, or its clock jumped), and no request index in
/// two shards (each plan index belongs to one shard) or twice in one.
fn check_records(parts: &[Part], allow_empty: bool) -> anyhow::Result<()> {
    let mut seen: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    for p in parts {
        if p.records.is_empty() && !allow_empty {
            bail!(
                "{} (shard {}) holds no record: its client sent nothing. Merging it would claim its share of the plan was run; pass --allow-empty to merge it anyway",
                p.dir.display(),
                p.shard
            );
        }
        if let (Some(a), Some(b)) = (p.command.started_utc, p.command.ended_utc) {
            // The run's clock starts as the process does, before `started_utc`: a minute of
            // slack covers the probes and a slow start.
            let lasted_us = (b.duration_since(a).as_secs_f64().max(0.0) + 60.0) * 1e6;
            if let Some(r) = p
                .records
                .iter()
                .find(|r| r.end_us.or(r.sent_us).is_some_and(|t| t as f64 > lasted_us))
            {
                let t = r.end_us.or(r.sent_us).unwrap_or_default() as f64 / 1e6;
                bail!(
                    "{} (shard {}): request {} is at {t:.1} s on the shard's clock, but the shard ran for {:.1} s ({} to {}): its records are not this run's, or its clock jumped",
                    p.dir.display(),
                    p.shard,
                    r.index,
                    lasted_us / 1e6 - 60.0,
                    a,
                    b
                );
            }
        }
        for r in &p.records {
            if let Some(other) = seen.insert(r.index, p.shard.index) {
                bail!(
                    "request {} is in shard {other}/{n} and in {} (shard {}): each request of the plan belongs to one shard, once",
                    r.index,
                    p.dir.display(),
                    p.shard,
                    n = p.shard.count
                );
            }
        }
    }
    Ok(())
}

/// The shards' `command.json`s as one: when the first started and the last ended, and whether
/// any was interrupted or gave up (then the merged run was too).
fn command(parts: &[Part], argv: &[String]) -> CommandFile {
    let ended = parts
        .iter()
        .map(|p| p.command.ended_utc)
        .collect::<Option<Vec<_>>>();
    CommandFile {
        argv: argv.to_vec(),
        merged_from: Some(parts.iter().map(|p| p.dir.display().to_string()).collect()),
        tool_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        started_utc: parts.iter().filter_map(|p| p.command.started_utc).min(),
        ended_utc: ended.and_then(|e| e.into_iter().max()),
        interrupted: parts.iter().any(|p| p.command.interrupted),
        signal: parts.iter().find_map(|p| p.command.signal.clone()),
        aborted: parts.iter().find_map(|p| {
            p.command
                .aborted
                .as_ref()
                .map(|a| format!("shard {}: {a}", p.shard))
        }),
        records: crate::record::Kept::of_all(parts.iter().map(|p| p.command.records)),
        ..CommandFile::default()
    }
}

/// The shard bundles `paths` name: a bundle as it is; a directory that is not one (a contract's
/// directory of bundles, a volume the shards wrote to), every shard bundle in it started at
/// `start_at` (needed when it holds shards of more than one run). A merged bundle is never one.
pub fn shard_bundles(paths: &[PathBuf], start_at: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if Bundle::open(p).is_ok() {
            out.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p).with_context(|| {
            format!(
                "{} is neither a bundle nor a directory of bundles",
                p.display()
            )
        })?;
        let mut found: Vec<(Written<Timestamp>, PathBuf)> = Vec::new();
        for e in entries {
            let dir = e?.path();
            if Bundle::open(&dir).is_err() {
                continue;
            }
            let text = crate::text::read_capped_string(
                &dir.join(CONTRACT),
                crate::text::MAX_CONTRACT_BYTES,
            )
            .unwrap_or_default();
            let Ok(c) = crate::contract::parse(&text, &dir.join(CONTRACT)) else {
                continue;
            };
            if let (Some(_), Some(at)) = (c.load.shard(), c.load.start_at.clone()) {
                found.push((at, dir));
            }
        }
        // One run per instant, however each shard's contract wrote it.
        let runs: std::collections::BTreeMap<Timestamp, &str> =
            found.iter().map(|(a, _)| (*a.get(), a.text())).collect();
        let wanted: Written<Timestamp> = match (start_at, runs.len()) {
            (Some(at), _) => Written::parse(at).map_err(|e| anyhow::anyhow!("--start-at {e}"))?,
            (None, 0) => bail!("{} holds no shard's bundle", p.display()),
            (None, _) if runs.len() > 1 => bail!(
                "{} holds the shards of {} runs, started at {}: say which with --start-at",
                p.display(),
                runs.len(),
                runs.values().copied().collect::<Vec<_>>().join(", ")
            ),
            (None, _) => found[0].0.clone(),
        };
        let mut mine: Vec<PathBuf> = found
            .into_iter()
            .filter(|(a, _)| a.get() == wanted.get())
            .map(|(_, d)| d)
            .collect();
        if mine.is_empty() {
            bail!(
                "{} holds no shard started at {}",
                p.display(),
                wanted.text()
            );
        }
        mine.sort();
        out.extend(mine);
    }
    Ok(out)
}

/// Merges the shard bundles in `dirs` into a new bundle under `out_root`.
pub fn merge(
    dirs: &[PathBuf],
    out_root: &Path,
    argv: &[String],
    allow_empty: bool,
) -> anyhow::Result<Merged> {
    let parts = dirs
        .iter()
        .map(|d| read_part(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let parts = check(parts)?;
    check_records(&parts, allow_empty)?;
    let contract = parts[0].contract.unsharded();
    let latest = parts.iter().map(|p| p.origin_us).max().unwrap_or(0);
    let bundle = Bundle::create(out_root, &contract)
        .with_context(|| format!("creating a bundle under {}", out_root.display()))?;
    bundle.write(CONTRACT, &contract.to_toml())?;
    if parts[0].dir.join(REFERENCES).is_file() {
        std::fs::copy(parts[0].dir.join(REFERENCES), bundle.path(REFERENCES))?;
    }
    let (mut records, shards) = shifted_records(&parts, latest);
    // As they finished, on the merged clock.
    records.sort_by_key(|r| (r.end_us.or(r.sent_us).unwrap_or(0), r.index));
    bundle.rewrite_records(&records)?;
    // The target as shard 0 saw it (every shard probed the same one); each client's own facts
    // are under `shards`.
    let environment = EnvironmentFile {
        shard: None,
        shards,
        ..parts[0].environment.clone()
    };
    bundle.write_json(ENVIRONMENT, &environment)?;
    // The target's metrics as shard 0 scraped them, on the merged clock.
    let scrapes = shifted_scrapes(&parts[0], latest)?;
    if !scrapes.is_empty() {
        let lines: Vec<String> = scrapes
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        bundle.write(METRICS, &(lines.join("\n") + "\n"))?;
    }
    bundle.write_json(COMMAND, &command(&parts, argv))?;
    // The summary as `goodput report` will recompute it: from the bundle alone.
    let l = Bundle::load(&bundle.dir)?;
    bundle.write_documents(&l.contract, &l.inputs, &l.summary, &l.records)?;
    // A shard that never wrote its end is still running, or was killed: what it wrote so far
    // is merged, and the merged run counts as interrupted.
    let warnings = parts
        .iter()
        .filter(|p| p.command.ended_utc.is_none())
        .map(|p| {
            format!(
                "shard {} ({}) has no end time: it is still running, or was killed; its records so far are merged and the run counts as interrupted (merge again once it has ended)",
                p.shard,
                p.dir.display()
            )
        })
        .collect();
    Ok(Merged {
        bundle,
        summary: l.summary,
        warnings,
    })
}

/// Every shard's records moved onto the merged clock (the latest shard's origin) and tagged
/// with their shard; and each shard's facts.
fn shifted_records(parts: &[Part], latest: u64) -> (Vec<Record>, Vec<ShardFacts>) {
    let mut records = Vec::new();
    let mut shards = Vec::new();
    for p in parts {
        let by = latest - p.origin_us;
        records.extend(p.records.iter().cloned().map(|mut r| {
            r.shift(by);
            r.shard = Some(p.shard.index);
            r
        }));
        shards.push(ShardFacts {
            index: p.shard.index,
            count: p.shard.count,
            start_at: p.start_at.text().to_owned(),
            host: p.environment.probed.client.hostname.clone(),
            clock: p
                .environment
                .shard
                .as_ref()
                .map(|s| s.clock.clone())
                .unwrap_or_default(),
            bundle: Some(p.dir.display().to_string()),
            origin_us: Some(p.origin_us),
            shifted_us: Some(by),
        });
    }
    (records, shards)
}

/// Shard 0's `/metrics` scrapes moved onto the merged clock.
fn shifted_scrapes(p: &Part, latest: u64) -> anyhow::Result<Vec<crate::env::prom::Scrape>> {
    let path = p.dir.join(METRICS);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let by_s = (latest - p.origin_us) as f64 / 1e6;
    let mut scrapes = crate::env::prom::read(&path).map_err(anyhow::Error::msg)?;
    for s in &mut scrapes {
        s.t_s += by_s;
    }
    Ok(scrapes)
}
