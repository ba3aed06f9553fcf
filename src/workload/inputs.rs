//! The inputs of a workload: the files its contract names (references, tokenizer, dataset,
//! lengths, trace), read beside the contract and kept *beside* it, never in it. Each file is
//! named in the contract by path and SHA-256, so a bundle says exactly what it was built
//! from, and a file changed since is refused rather than silently used. The contract itself
//! (`crate::contract`) is text and validation only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Prompt, Tokenizer, dataset, trace};
use crate::contract::{Contract, ContractError, DatasetFormat, LengthDist, Workload, source};
use crate::quality::Reference;

/// Everything read from a contract's files.
#[derive(Debug, Default)]
pub struct Sources {
    pub tokenizer: Tokenizer,
    pub prompts: Vec<Prompt>,
    /// Dataset entries skipped as unusable (ShareGPT conversations without an answered question).
    pub skipped: usize,
    pub trace: Vec<trace::Row>,
    /// `quality.references`.
    pub references: Vec<Reference>,
    /// `empirical` lengths (from their file or the dataset) for input and output; empty when
    /// the distribution is not empirical.
    pub input_lengths: Vec<u32>,
    pub output_lengths: Vec<u32>,
    /// Files a resolved contract names that are no longer there. Such a contract still reads
    /// (a bundle's records carry the lengths); `run` refuses it.
    pub missing: Vec<String>,
    /// `[workload.task]`'s graphs: one shape, or one per recorded task (arrival `i` runs
    /// graph `i mod n`).
    pub tasks: Vec<crate::contract::task::Graph>,
    /// `[workload.images] folder`'s files, by their headers, in name order (their pixels are
    /// read when a request sends them).
    pub images: Vec<super::images::ImageFile>,
}

/// A workload's inputs, shared (cheap to clone) and immutable once read.
#[derive(Debug, Clone, Default)]
pub struct Inputs(Arc<Sources>);

impl Inputs {
    pub fn new(s: Sources) -> Inputs {
        Inputs(Arc::new(s))
    }

    /// The `empirical` lengths of input (`true`) or output.
    pub fn lengths(&self, input: bool) -> &[u32] {
        if input {
            &self.0.input_lengths
        } else {
            &self.0.output_lengths
        }
    }
}

impl std::ops::Deref for Inputs {
    type Target = Sources;
    fn deref(&self) -> &Sources {
        &self.0
    }
}

/// Reads, validates and resolves a contract file, then the files it names.
pub fn load(path: &Path) -> Result<(Contract, Inputs), ContractError> {
    let src = crate::text::read_capped_string(path, crate::text::MAX_CONTRACT_BYTES).map_err(
        |cause| ContractError::Read {
            path: path.to_owned(),
            cause,
        },
    )?;
    parse(&src, path)
}

/// Parses contract text (`path` locates it and the files it names), then reads those files.
pub fn parse(src: &str, path: &Path) -> Result<(Contract, Inputs), ContractError> {
    let mut c = crate::contract::parse(src, path)?;
    let inputs = read(&mut c, src, path)?;
    Ok((c, inputs))
}

/// Reads the files a contract names (references, tokenizer, dataset, lengths, trace), checks
/// each against the SHA-256 the contract kept, and records the hashes it read.
pub fn read(c: &mut Contract, src: &str, path: &Path) -> Result<Inputs, ContractError> {
    let mut files = Files {
        path,
        src,
        missing: Vec::new(),
    };
    let mut sources = Sources::default();
    files.references(c, &mut sources)?;
    files.tls_ca(c)?;
    files.tokenizer(&mut c.workload, &mut sources)?;
    files.dataset(c, &mut sources)?;
    files.lengths(&mut c.workload, &mut sources)?;
    files.trace(c, &mut sources)?;
    files.tasks(c, &mut sources)?;
    files.images(c, &mut sources)?;
    sources.missing = files.missing;
    Ok(Inputs::new(sources))
}

/// The files of one contract: where they are (beside the contract), whether they are still the
/// files it was resolved against, and which of them are gone.
struct Files<'a> {
    /// The contract file, and its text (for the line of a key in errors).
    path: &'a Path,
    src: &'a str,
    /// Files a resolved contract names (with their hash) that are no longer there. Such a
    /// contract still reads (a bundle's records carry the lengths); `run` refuses it.
    missing: Vec<String>,
}

impl Files<'_> {
    fn invalid(&self, key: &str, message: String) -> ContractError {
        ContractError::Invalid {
            path: self.path.to_owned(),
            line: source::line_of_key(self.src, key),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// A path from the contract, relative to the contract's directory.
    fn beside(&self, rel: &Path) -> PathBuf {
        match self.path.parent() {
            Some(dir) if rel.is_relative() => dir.join(rel),
            _ => rel.to_owned(),
        }
    }

    /// The file as it is now must be the file the contract was resolved against (`kept`).
    fn check(
        &self,
        key: &str,
        file: &Path,
        sha: &str,
        kept: &Option<String>,
    ) -> Result<(), ContractError> {
        match kept {
            Some(k) if k != sha => Err(self.invalid(
                &format!("{key}_sha256"),
                format!(
                    "{} has changed since this contract was resolved (SHA-256 {sha}, expected {k})",
                    file.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// `rel` beside the contract, or `None` when a resolved contract's file is gone (noted).
    fn present(&mut self, rel: &Path, kept: &Option<String>) -> Option<PathBuf> {
        let file = self.beside(rel);
        if kept.is_some() && !file.exists() {
            self.missing.push(file.display().to_string());
            return None;
        }
        Some(file)
    }

    /// The text and SHA-256 of `file`, checked against `kept` (`key` names it in errors, and
    /// `sha_key` + `_sha256` the kept hash).
    fn read(
        &self,
        key: &str,
        sha_key: &str,
        file: &Path,
        kept: &Option<String>,
    ) -> Result<(String, String), ContractError> {
        let (text, sha) = super::read(file).map_err(|m| self.invalid(key, m))?;
        self.check(sha_key, file, &sha, kept)?;
        Ok((text, sha))
    }

    /// The file the contract names at `key` (if it names one and it is there): its path, text
    /// and SHA-256, checked against `kept`.
    fn named(
        &mut self,
        key: &str,
        rel: &Option<PathBuf>,
        kept: &Option<String>,
    ) -> Result<Option<(PathBuf, String, String)>, ContractError> {
        let Some(file) = rel.as_deref().and_then(|r| self.present(r, kept)) else {
            return Ok(None);
        };
        let (text, sha) = self.read(key, key, &file, kept)?;
        Ok(Some((file, text, sha)))
    }

    /// `target.tls.ca_file`: found beside the contract and holding PEM certificates; the
    /// contract keeps where it was found, which the run reads it from.
    fn tls_ca(&self, c: &mut Contract) -> Result<(), ContractError> {
        let key = "target.tls.ca_file";
        let Some(rel) = &c.target.tls.ca_file else {
            return Ok(());
        };
        let file = self.beside(rel);
        let pem = crate::text::read_capped(&file, crate::text::MAX_PEM_BYTES)
            .map_err(|e| self.invalid(key, format!("cannot read {}: {e}", file.display())))?;
        match reqwest::Certificate::from_pem_bundle(&pem) {
            Ok(certs) if !certs.is_empty() => {}
            Ok(_) => {
                return Err(self.invalid(
                    key,
                    format!(
                        "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                        file.display()
                    ),
                ));
            }
            Err(e) => {
                return Err(self.invalid(
                    key,
                    format!("{}: not PEM certificates: {e}", file.display()),
                ));
            }
        }
        c.target.tls.ca_file = Some(file);
        Ok(())
    }

    fn references(&self, c: &mut Contract, sources: &mut Sources) -> Result<(), ContractError> {
        let q = &mut c.quality;
        let Some(rel) = &q.references else {
            return Ok(());
        };
        let key = "quality.references";
        let file = self.beside(rel);
        let (items, sha) =
            crate::quality::load_references(&file).map_err(|m| self.invalid(key, m))?;
        self.check(key, &file, &sha, &q.references_sha256)?;
        q.references = Some(file);
        q.references_sha256 = Some(sha);
        sources.references = items;
        Ok(())
    }

    /// `[workload.images] folder`: every file an image a server takes, read by its header.
    fn images(&mut self, c: &mut Contract, sources: &mut Sources) -> Result<(), ContractError> {
        let key = "workload.images.folder";
        let Some(images) = c.workload.images.as_mut() else {
            return Ok(());
        };
        let Some(dir) = images
            .folder
            .clone()
            .and_then(|rel| self.present(&rel, &images.folder_sha256))
        else {
            return Ok(());
        };
        let (files, sha) = super::images::read_folder(&dir).map_err(|m| self.invalid(key, m))?;
        self.check(key, &dir, &sha, &images.folder_sha256)?;
        images.folder = Some(dir);
        images.folder_sha256 = Some(sha);
        sources.images = files;
        Ok(())
    }

    fn tokenizer(&mut self, w: &mut Workload, sources: &mut Sources) -> Result<(), ContractError> {
        let key = "workload.tokenizer";
        let Some(file) = w
            .tokenizer
            .clone()
            .filter(|_| !w.server_tokenizer())
            .and_then(|rel| self.present(&rel, &w.tokenizer_sha256))
        else {
            return Ok(());
        };
        let (t, sha) = Tokenizer::load(&file).map_err(|m| self.invalid(key, m))?;
        self.check(key, &file, &sha, &w.tokenizer_sha256)?;
        w.tokenizer = Some(file);
        w.tokenizer_sha256 = Some(sha);
        sources.tokenizer = t;
        Ok(())
    }

    fn dataset(&mut self, c: &mut Contract, sources: &mut Sources) -> Result<(), ContractError> {
        let key = "workload.dataset";
        let w = &mut c.workload;
        let rel = w.dataset.clone();
        let Some((file, text, sha)) = self.named(key, &w.dataset, &w.dataset_sha256)? else {
            return Ok(());
        };
        let format = w.dataset_format.unwrap_or_else(|| dataset::detect(&text));
        let (d, format) = match format {
            DatasetFormat::Bfcl => (self.bfcl(c, rel.as_deref(), &file, &text)?, format),
            _ => dataset::parse(&file, &text, Some(format)).map_err(|m| self.invalid(key, m))?,
        };
        self.tools_checked(c, &file, &d, format)?;
        let w = &mut c.workload;
        if let Some(item) = d.items.iter().find(|i| i.messages.is_some())
            && let Err(why) = c.target.api.check(true)
        {
            return Err(self.invalid(
                "target.api",
                format!("{} {} {why}", file.display(), item.at),
            ));
        }
        // Sessions replay each user message of a conversation: one without any is refused.
        if w.sessions.is_some()
            && let Some(item) = d.items.iter().find(|i| i.conversation.turns.is_empty())
        {
            return Err(self.invalid(
                key,
                format!(
                    "{} {}: a conversation with no user turn (sessions send each user message in turn)",
                    file.display(),
                    item.at
                ),
            ));
        }
        let t = &sources.tokenizer;
        sources.prompts = d
            .items
            .into_iter()
            .map(|i| Prompt {
                input_tokens: t.count(&i.prompt),
                answer: i.answer.clone(),
                output_tokens: i
                    .output_tokens
                    .or_else(|| i.answer.as_deref().map(|a| t.count(a).max(1))),
                prompt: i.prompt,
                messages: i.messages,
                at: i.at,
                system: i.conversation.system,
                tools: i.tools,
                turns: i
                    .conversation
                    .turns
                    .into_iter()
                    .map(|(text, answer)| crate::workload::DatasetTurn {
                        input_tokens: t.count(&text),
                        output_tokens: answer.as_deref().map(|a| t.count(a).max(1)),
                        text,
                        answer,
                    })
                    .collect(),
            })
            .collect();
        sources.skipped = d.skipped;
        w.dataset = Some(file);
        w.dataset_sha256 = Some(sha);
        w.dataset_format = Some(format);
        Ok(())
    }

    /// A dataset of tools: its rule written out, an API that takes tools, nothing it cannot go
    /// with, and the SLO's correctness on by default; `[workload.tools]` without one refused.
    fn tools_checked(
        &self,
        c: &mut Contract,
        file: &Path,
        d: &dataset::Dataset,
        format: DatasetFormat,
    ) -> Result<(), ContractError> {
        let w = &mut c.workload;
        if format.has_tools() {
            let tools = w.tools.get_or_insert_with(Default::default);
            if let Some(case) = d.items.iter().find_map(|i| i.tools.as_ref()) {
                tools.rule = Some(case.rule.name().to_owned());
            }
            if let Err(why) = c.target.api.check_tools() {
                return Err(self.invalid("target.api", format!("{} {why}", file.display())));
            }
            let other = [
                ("workload.sessions", w.sessions.is_some()),
                ("workload.task", w.task.is_some()),
                ("workload.images", w.images.is_some()),
            ];
            if let Some((k, _)) = other.iter().find(|(_, set)| *set) {
                return Err(self.invalid(
                    k,
                    format!(
                        "{} offers tools in single requests, graded as each answer ends: {k} cannot go with it yet",
                        file.display()
                    ),
                ));
            }
            // A tool request is right or it is not goodput, unless the contract says otherwise.
            c.slo.correct_tool_calls.get_or_insert(true);
        } else if w.tools.is_some() {
            return Err(self.invalid(
                "workload.tools",
                format!(
                    "{} is not a dataset of tools (dataset_format \"bfcl\" or \"tools\"): nothing to grade",
                    file.display()
                ),
            ));
        }
        Ok(())
    }

    /// BFCL's questions (`file`, `text`) and their answers (`workload.tools.answers`, by
    /// default `possible_answer/` beside the questions, as the `bfcl-eval` package lays them
    /// out), graded by the rule of their category.
    fn bfcl(
        &mut self,
        c: &mut Contract,
        rel: Option<&Path>,
        file: &Path,
        text: &str,
    ) -> Result<dataset::Dataset, ContractError> {
        use crate::quality::tools;
        let t = c.workload.tools.get_or_insert_with(Default::default);
        let category = match (&t.category, tools::bfcl_category(file)) {
            (Some(c), _) => c.clone(),
            (None, Some(c)) => c,
            (None, None) => {
                return Err(self.invalid(
                    "workload.dataset",
                    format!(
                        "{}: BFCL's category is not in the file's name (BFCL_v4_<category>.json): set workload.tools.category",
                        file.display()
                    ),
                ));
            }
        };
        let key = if t.category.is_some() {
            "workload.tools.category"
        } else {
            "workload.dataset"
        };
        let rule = tools::bfcl_rule(&category)
            .map_err(|why| self.invalid(key, format!("{}: {why}", file.display())))?;
        t.category = Some(category);
        let answers = t.answers.clone().or_else(|| {
            let rel = rel?;
            Some(rel.parent()?.join("possible_answer").join(rel.file_name()?))
        });
        let akey = "workload.tools.answers";
        let kept = t.answers_sha256.clone();
        let Some((afile, atext, asha)) = self.named(akey, &answers, &kept)? else {
            return Err(self.invalid(akey, format!("{}: no answers file", file.display())));
        };
        let entries = tools::parse_bfcl((file, text), (&afile, &atext), rule).map_err(|m| {
            let key = if m.starts_with(&afile.display().to_string()) {
                akey
            } else {
                "workload.dataset"
            };
            self.invalid(key, m)
        })?;
        let t = c.workload.tools.get_or_insert_with(Default::default);
        t.answers = Some(afile);
        t.answers_sha256 = Some(asha);
        Ok(dataset::Dataset {
            items: entries.into_iter().map(dataset::Item::of_tools).collect(),
            skipped: 0,
        })
    }

    /// `empirical` lengths (from a file of lengths, or from the dataset), and a check that
    /// `dataset` lengths exist for every entry.
    fn lengths(&mut self, w: &mut Workload, sources: &mut Sources) -> Result<(), ContractError> {
        let prompts = &sources.prompts;
        let (mut input_lengths, mut output_lengths) = (Vec::new(), Vec::new());
        let dataset_name = w
            .dataset
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        for (key, dist, input) in [
            ("workload.input_tokens", &mut w.input_tokens, true),
            ("workload.output_tokens", &mut w.output_tokens, false),
        ] {
            let from_dataset = || -> Result<Vec<u32>, ContractError> {
                prompts
                    .iter()
                    .map(|p| {
                        p.length(input).ok_or_else(|| {
                            self.invalid(
                                key,
                                format!(
                                    "{dataset_name} {}: no output length (add \"output_tokens\", or set {key} to a distribution)",
                                    p.at
                                ),
                            )
                        })
                    })
                    .collect()
            };
            match dist {
                Some(LengthDist::Dataset) => {
                    from_dataset()?;
                }
                Some(LengthDist::Empirical { file, file_sha256 }) => {
                    let v = match file.clone() {
                        None => from_dataset()?,
                        Some(rel) => match self.present(&rel, file_sha256) {
                            None => Vec::new(),
                            Some(f) => {
                                let (text, sha) =
                                    self.read(key, &format!("{key}.file"), &f, file_sha256)?;
                                let v = super::parse_lengths(&f, &text)
                                    .map_err(|m| self.invalid(key, m))?;
                                *file = Some(f);
                                *file_sha256 = Some(sha);
                                v
                            }
                        },
                    };
                    if input {
                        input_lengths = v;
                    } else {
                        output_lengths = v;
                    }
                }
                _ => {}
            }
        }
        sources.input_lengths = input_lengths;
        sources.output_lengths = output_lengths;
        Ok(())
    }

    /// A trace to replay; without `requests` or `duration`, the run replays it to its end.
    /// `[workload.task]`: its nodes, from the contract or its graph file, resolved into graphs;
    /// an error names the node's line and field (in the contract: `workload.task.node[k].F`).
    fn tasks(&mut self, c: &mut Contract, sources: &mut Sources) -> Result<(), ContractError> {
        let w = &c.workload;
        let Some(t) = &w.task else {
            return Ok(());
        };
        let dist = |d: &Option<LengthDist>| d.clone().unwrap_or(LengthDist::Fixed { value: 1 });
        let (input, output) = (dist(&w.input_tokens), dist(&w.output_tokens));
        let defaults = crate::contract::task::Defaults {
            input: &input,
            output: &output,
            context_tokens: t.context_tokens,
        };
        let key = "workload.task.graph";
        let graphs = match self.named(key, &t.graph, &t.graph_sha256)? {
            Some((file, text, sha)) => {
                let g = super::task::parse(&file, &text, t.format, &defaults)
                    .map_err(|m| self.invalid(key, m))?;
                if let Some(t) = &mut c.workload.task {
                    t.graph = Some(file);
                    t.graph_sha256 = Some(sha);
                }
                g
            }
            None if t.graph.is_some() => return Ok(()),
            None => crate::contract::task::resolve(&t.node, &defaults).map_err(|e| {
                self.invalid(
                    &format!("workload.task.node[{}].{}", e.node, e.field),
                    e.message,
                )
            })?,
        };
        sources.tasks = graphs;
        Ok(())
    }

    fn trace(&mut self, c: &mut Contract, sources: &mut Sources) -> Result<(), ContractError> {
        let key = "load.trace";
        let l = &mut c.load;
        let Some((file, text, sha)) = self.named(key, &l.trace, &l.trace_sha256)? else {
            return Ok(());
        };
        let rows = super::trace::parse(&file, &text).map_err(|m| self.invalid(key, m))?;
        let available = (rows.len() as u64).checked_sub(c.warmup.requests);
        if l.requests.is_none() && l.duration.is_none() {
            if c.warmup.duration.is_some() || c.warmup.until_stable.is_some() {
                return Err(self.invalid(
                    "load",
                    "a trace replayed to its end needs a warm-up by `requests` (or set load.requests or load.duration)".into(),
                ));
            }
            l.requests = Some(available.filter(|&n| n > 0).ok_or_else(|| {
                self.invalid(
                    "warmup.requests",
                    format!("leaves none of the trace's {} rows to measure", rows.len()),
                )
            })?);
        }
        if let Some(n) = l.requests
            && available.is_none_or(|a| n > a)
        {
            return Err(self.invalid(
                "load.requests",
                format!(
                    "= {n}: {} has {} rows, {} of them warm-up",
                    file.display(),
                    rows.len(),
                    c.warmup.requests
                ),
            ));
        }
        l.trace = Some(file);
        l.trace_sha256 = Some(sha);
        sources.trace = rows;
        Ok(())
    }
}
