//! The README and the user guide as a reader meets them (issue #47): every relative link
//! resolves, to a file and to a heading in it; every TOML block is a contract goodput accepts
//! (a fragment is laid over the built-in contract, as a user would paste it into one); every
//! `goodput` command line, in a shell block or in running text, parses as the binary parses it,
//! and a contract file it names loads. The quickstart is also run as written
//! (`quickstart.rs`).
//!
//! Markdown is read by hand, not with a Markdown crate: only fences, inline code spans and
//! `](target)` links are needed, and the files are this repository's own.

use std::path::{Path, PathBuf};

use clap::Parser;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The documents a user reads: the README, the guide and the other pages under `docs/`.
fn documents() -> Vec<PathBuf> {
    let mut out = vec![Path::new(ROOT).join("README.md")];
    for dir in ["docs", "docs/guide"] {
        let mut pages: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        pages.sort();
        out.extend(pages);
    }
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(ROOT).unwrap_or(p).display().to_string()
}

/// A fenced block: its info string, its first line's number and its text (the fence's
/// indentation taken off every line, as in a list item).
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The fenced blocks of a Markdown text, and the text outside them (blocks blanked, so line
/// numbers still hold).
fn blocks(md: &str) -> (Vec<Block>, String) {
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut open: Option<(usize, String, usize, Vec<&str>)> = None;
    for (i, line) in md.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed.starts_with("```") => {
                open = Some((indent, trimmed[3..].trim().to_owned(), i + 1, Vec::new()));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
            Some((ind, info, start, lines)) => {
                if trimmed.starts_with("```") {
                    out.push(Block {
                        info: std::mem::take(info),
                        line: *start,
                        text: lines.join("\n"),
                    });
                    open = None;
                } else {
                    lines.push(line.get(*ind..).unwrap_or(line.trim_start()));
                }
                prose.push('\n');
            }
        }
    }
    (out, prose)
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, every other character that is
/// not a letter, digit, `-` or `_` dropped; a repeated heading gets `-1`, `-2`…
fn anchors(md: &str) -> Vec<String> {
    let (_, prose) = blocks(md);
    let mut seen: Vec<String> = Vec::new();
    for line in prose.lines() {
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        let h = h.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let slug: String = h
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = seen
            .iter()
            .filter(|s| **s == slug || s.starts_with(&format!("{slug}-")))
            .count();
        seen.push(if n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
    }
    seen
}

/// Every `](target)` link outside code, with its line.
fn links(md: &str) -> Vec<(usize, String)> {
    let (_, prose) = blocks(md);
    let mut out = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        // Code spans hold examples, not links.
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push((i + 1, rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
    }
    out
}

/// What is wrong with each relative link of each document.
fn broken_links(docs: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for doc in docs {
        let md = std::fs::read_to_string(doc).unwrap();
        for (line, target) in links(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            let at = format!("{}:{line}: ({target})", rel(doc));
            if !file.exists() {
                broken.push(format!("{at}: no file {}", rel(&file)));
            } else if !anchor.is_empty() && file.extension().is_some_and(|x| x == "md") {
                let heads = anchors(&std::fs::read_to_string(&file).unwrap());
                if !heads.iter().any(|h| h == anchor) {
                    broken.push(format!("{at}: {} has no heading #{anchor}", rel(&file)));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let broken = broken_links(&documents());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The built-in contract with `fragment`'s tables laid over it. `[load]` and `[warmup]` are
/// each one choice (a rate or a concurrency, one warm-up rule), so a fragment's replaces the
/// built-in one whole; other tables merge key by key.
fn over_builtin(fragment: &toml::Table) -> String {
    fn merge(base: &mut toml::Table, top: &toml::Table, depth: usize) {
        for (k, v) in top {
            match (base.get_mut(k), v) {
                (Some(toml::Value::Table(b)), toml::Value::Table(t))
                    if !(depth == 0 && (k == "load" || k == "warmup")) =>
                {
                    merge(b, t, depth + 1)
                }
                _ => {
                    base.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let mut base: toml::Table = goodput::contract::BUILTIN.parse().unwrap();
    merge(&mut base, fragment, 0);
    toml::to_string(&base).unwrap()
}

/// Why a TOML block is not a contract goodput accepts, if it is not.
fn toml_problem(doc: &Path, b: &Block) -> Option<String> {
    let at = format!("{}:{}", rel(doc), b.line);
    let table: toml::Table = match b.text.parse() {
        Ok(t) => t,
        Err(e) => return Some(format!("{at}: not TOML: {e}")),
    };
    // A whole contract is taken as it is; a fragment on top of the built-in one.
    let text = if table.contains_key("load") && table.contains_key("name") {
        b.text.clone()
    } else {
        over_builtin(&table)
    };
    // Paths in a contract are relative to it; the examples' are to `examples/`.
    let path = Path::new(ROOT).join("examples/doc-snippet.toml");
    goodput::contract::parse(&text, &path)
        .err()
        .map(|e| format!("{at}: {e}"))
}

#[test]
fn every_toml_block_is_a_contract_goodput_accepts() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let (bs, _) = blocks(&std::fs::read_to_string(&doc).unwrap());
        for b in bs.iter().filter(|b| b.info == "toml") {
            checked += 1;
            problems.extend(toml_problem(&doc, b));
        }
    }
    assert!(checked >= 8, "only {checked} TOML blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Words of a shell command line, with single and double quotes taken off (the documents'
/// commands use no escapes or expansions inside quotes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The `goodput` command lines of a shell block: continuation lines joined, comments dropped,
/// each `&&`, `;`, `|` or `&` segment that runs goodput.
fn shell_commands(block: &str) -> Vec<String> {
    let joined = block.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let code = match line.find(" #") {
            Some(i) => &line[..i],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        for seg in code.split("&&").flat_map(|s| s.split([';', '|', '&'])) {
            let seg = seg.trim();
            if seg.starts_with("goodput ") {
                // The shell's variables, as the block sets them.
                out.push(
                    seg.replace("$START", "2099-01-01T00:00:00Z")
                        .replace("$(START_AT)", "2099-01-01T00:00:00Z")
                        .replace("$(JOB_COMPLETION_INDEX)", "0"),
                );
            }
        }
    }
    out
}

/// A running-text example's placeholders, as a user fills them in.
fn filled(span: &str) -> Option<String> {
    if span.contains("COMMAND") || span.contains("...") {
        return None;
    }
    let mut out = Vec::new();
    for w in span.split_whitespace() {
        let w = match w {
            "I/N" => "0/2",
            "T" => "2099-01-01T00:00:00Z",
            "N" => "2",
            "CONTRACT" => "examples/chat.toml",
            "TOOL" => "aiperf",
            "K=V,…" => "load.rate=1,2",
            "KEY=VALUE" => "slo.ttft_ms=300",
            "csv|parquet|jsonl" => "csv",
            "…" | "[C" | "…]" => continue,
            w if w.starts_with('[') && w.ends_with(']') => continue,
            w => w.trim_end_matches('…'),
        };
        out.push(w.to_owned());
    }
    Some(out.join(" "))
}

/// The command lines a document shows: those of its shell blocks, and its code spans that
/// start with `goodput ` (placeholders filled in).
fn command_lines(md: &str) -> Vec<(usize, String)> {
    let (bs, prose) = blocks(md);
    let mut out = Vec::new();
    for b in bs
        .iter()
        .filter(|b| matches!(b.info.as_str(), "sh" | "bash" | "shell" | "console"))
    {
        out.extend(shell_commands(&b.text).into_iter().map(|c| (b.line, c)));
    }
    // A code span may wrap onto the next line; a span of one or two words (`goodput plan`)
    // names a command rather than showing a command line.
    let mut offset = 0;
    for (k, span) in prose.split('`').enumerate() {
        let line = prose[..offset].matches('\n').count() + 1;
        offset += span.len() + 1;
        let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
        if k % 2 == 1 && span.starts_with("goodput ") && span.split(' ').count() >= 3 {
            out.extend(filled(&span).map(|c| (line, c)));
        }
    }
    out
}

/// Why a command line would not run as shown, if it would not: the binary's own parser
/// refuses it, or a contract file it names does not load.
fn command_problem(doc: &Path, line: usize, cmd: &str) -> Option<String> {
    let at = format!("{}:{line}: `{cmd}`", rel(doc));
    // A contract file of the repository is named from its root, as the documents run them;
    // a user's own (`my.toml`) is what `goodput init` writes, the built-in contract.
    let args: Vec<String> = words(cmd)
        .into_iter()
        .map(|a| match Path::new(ROOT).join(&a) {
            p if a.ends_with(".toml") && p.exists() => p.display().to_string(),
            _ if a.ends_with(".toml") && !a.contains('/') => {
                format!("{ROOT}/examples/chat.toml")
            }
            _ => a,
        })
        .collect();
    use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
    match goodput::cli::Cli::try_parse_from(&args) {
        // A run of the built-in contract or of a file in the repository: the contract it would
        // run, changes made, is read and validated as `run` reads it.
        Ok(cli) => {
            let runnable = args
                .iter()
                .filter(|a| a.ends_with(".toml"))
                .all(|a| Path::new(a).exists());
            if let (true, Some(Err(e))) = (runnable, cli.run_contract()) {
                return Some(format!("{at}: {e:#}"));
            }
        }
        Err(e) if matches!(e.kind(), DisplayHelp | DisplayVersion) => {}
        Err(e) => {
            let first = e.to_string();
            let first = first.lines().next().unwrap_or_default().to_owned();
            return Some(format!("{at}: {first}"));
        }
    }
    args.iter()
        .filter(|a| a.ends_with(".toml"))
        .map(|a| Path::new(ROOT).join(a))
        .filter(|p| p.starts_with(Path::new(ROOT).join("examples")) || p.exists())
        .find_map(|p| {
            goodput::contract::load(&p)
                .err()
                .map(|e| format!("{at}: {e}"))
        })
}

#[test]
fn every_goodput_command_line_parses_and_its_contract_loads() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let md = std::fs::read_to_string(&doc).unwrap();
        for (line, cmd) in command_lines(&md) {
            checked += 1;
            problems.extend(command_problem(&doc, line, &cmd));
        }
    }
    assert!(checked >= 30, "only {checked} command lines found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The README is a front door: short, with lines a reader does not scroll sideways.
#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines (at most 300)");
}

/// The checks catch what they must: a broken link, a missing heading, a fragment with a bad
/// value, a command the parser refuses.
#[test]
fn the_checks_catch_a_broken_document() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.md");
    std::fs::write(
        &page,
        "# Top\n\n## A `key`: here\n\n[ok](#a-key-here) [gone](nowhere.md) [bad](#nope)\n",
    )
    .unwrap();
    let broken = broken_links(std::slice::from_ref(&page));
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("no file") && broken[1].contains("no heading #nope"));

    let (bs, _) = blocks("```toml\n[load]\nrate = -1\n```\n");
    let problem = toml_problem(&page, &bs[0]).expect("a negative rate is refused");
    assert!(problem.contains("load.rate"), "{problem}");
    let (bs, _) = blocks("  ```toml\n  [slo]\n  ttft_ms = 300\n  ```\n");
    assert!(toml_problem(&page, &bs[0]).is_none());

    let cmds = command_lines(
        "```sh\ngoodput run x.toml --rate 5 && goodput bogus  # no\n```\nand `goodput sweep CONTRACT --vary K=V,…`\n",
    );
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    assert!(command_problem(&page, 1, &cmds[0].1).is_none());
    assert!(command_problem(&page, 1, &cmds[1].1).is_some());
    assert!(command_problem(&page, 1, &cmds[2].1).is_none());
    assert!(command_problem(&page, 1, "goodput run examples/missing.toml").is_some());
    // Parsed, but not a contract `run` would accept: the change is made and validated.
    let bad_rate = command_problem(&page, 1, "goodput run examples/classes.toml --rate fast");
    assert!(bad_rate.is_some_and(|p| p.contains("load.rate")));
    assert!(command_problem(&page, 1, "goodput run --set slo.percentile=120").is_some());
}
