//! The run's own files in its bundle: the bundle opened (a prediction kept beside the contract),
//! `command.json` as the run starts and as it ends, and the cache nonce that keeps one run's
//! prompts from another's cache.

use super::RunOptions;
use crate::bundle::{Bundle, COMMAND, CONTRACT, CommandFile, PREDICTION, REFERENCES};
use crate::contract::Contract;
use anyhow::Context;

/// Every run its own cache nonce (kept in the bundle's contract): prompts of an earlier run
/// share nothing with this one's beyond the run lead, so `cold` is cold across runs too. The
/// shards of one run share theirs (one plan): it is drawn from their start instant.
pub(super) fn cache_nonce(contract: &Contract) -> String {
    match &contract.load.start_at {
        // The instant, not its spelling: every shard of the run draws the same nonce.
        Some(at) => crate::text::sha256_prefix(at.get().to_string().as_bytes(), 8),
        None => fresh_nonce(),
    }
}

/// `command.json`: how the run was started and, rewritten when it ends, how it ended.
pub(super) struct CommandRecord<'a> {
    pub(super) opts: &'a RunOptions,
    pub(super) started_utc: jiff::Timestamp,
    pub(super) prediction_sha256: Option<String>,
}

impl<'a> CommandRecord<'a> {
    /// The record of a run starting now, written.
    pub(super) fn started(
        opts: &'a RunOptions,
        prediction_sha256: Option<&String>,
        bundle: &Bundle,
    ) -> anyhow::Result<CommandRecord<'a>> {
        let command = CommandRecord {
            opts,
            started_utc: jiff::Timestamp::now(),
            prediction_sha256: prediction_sha256.cloned(),
        };
        bundle.write_json(
            COMMAND,
            &command.file(None, false, &None, None, (&None, &Default::default())),
        )?;
        Ok(command)
    }

    pub(super) fn file(
        &self,
        end: Option<jiff::Timestamp>,
        interrupted: bool,
        aborted: &Option<String>,
        signal: Option<&str>,
        (decided, load_end): (&Option<String>, &crate::driver::guard::LoadEnd),
    ) -> CommandFile {
        CommandFile {
            argv: self.opts.argv.clone(),
            overrides: self.opts.overrides.clone(),
            cwd: std::env::current_dir().ok(),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            started_utc: Some(self.started_utc),
            ended_utc: end,
            interrupted,
            signal: signal.map(str::to_owned),
            aborted: aborted.clone(),
            decided: decided.clone(),
            load_end: (!load_end.is_empty()).then(|| load_end.clone()),
            prediction_sha256: self.prediction_sha256.clone(),
            records: crate::record::Kept::THIS_BUILD,
            ..CommandFile::default()
        }
    }
}

/// The run's bundle (created now unless a launched server's log already needed it), with the
/// reference set copied in, the contract as it will run, and the prediction written (and its
/// hash returned) before the first request.
pub(super) fn prepare_bundle(
    bundle: Option<Bundle>,
    opts: &RunOptions,
    contract: &mut Contract,
) -> anyhow::Result<(
    Bundle,
    Option<(crate::contract::prediction::Prediction, String)>,
)> {
    let bundle = match bundle {
        Some(b) => b,
        None => new_bundle(opts, contract)?,
    };
    // A reference set travels with the bundle, so the bundle alone recomputes its scores.
    if let Some(src) = contract.quality.references.clone() {
        std::fs::copy(&src, bundle.path(REFERENCES))
            .with_context(|| format!("copying {} into the bundle", src.display()))?;
        contract.quality.references = Some(REFERENCES.into());
    }
    bundle.write(CONTRACT, &contract.to_toml())?;
    // A prediction is written, and its hash recorded, before the first request is sent.
    let prediction = match &contract.prediction {
        Some(spec) => {
            let expect = spec
                .expect
                .iter()
                .map(|e| crate::contract::prediction::parse(e))
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            let p = crate::contract::prediction::Prediction {
                made_utc: jiff::Timestamp::now().to_string(),
                expect,
            };
            let bytes = serde_json::to_vec_pretty(&p)?;
            let path = bundle.path(PREDICTION);
            std::fs::write(&path, &bytes).map_err(crate::text::io_at(&path))?;
            Some((p, crate::contract::prediction::hash(&bytes)))
        }
        None => None,
    };
    Ok((bundle, prediction))
}

/// A new cache nonce: 8 hex digits that differ from run to run. Uniqueness, not secrecy, is
/// needed: std's `RandomState` is keyed from the OS per process (and per instance within
/// one), and the clock separates runs further.
pub(super) fn fresh_nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:08x}", h.finish() as u32)
}

pub(super) fn new_bundle(opts: &RunOptions, c: &Contract) -> anyhow::Result<Bundle> {
    match &opts.bundle_dir {
        Some(dir) => Bundle::create_at(dir),
        None => Bundle::create(&opts.out_root, c),
    }
    .with_context(|| format!("creating a bundle under {}", opts.out_root.display()))
}
