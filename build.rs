//! Records the git revision and the compiler version for `environment.json`.
//!
//! The build script reruns when the revision can have changed (`HEAD`, the branch it names) or
//! the sources it reports as modified (`-dirty`) have; never on `.git/index`, which `git status`
//! itself refreshes, so a fresh clone's `cargo build` then `cargo run` compiled the crate twice.

use std::path::Path;
use std::process::Command;

/// The files whose change makes a built binary's `-dirty` mark stale.
const SOURCES: [&str; 4] = ["src", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    let run = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let rev = run("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // `--no-optional-locks`: a status that leaves the index as it found it.
    let mut status = vec![
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
    ];
    status.extend(SOURCES);
    let dirty = run("git", &status).is_some();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = run(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!(
        "cargo:rustc-env=GOODPUT_GIT_REV={rev}{}",
        if dirty { "-dirty" } else { "" }
    );
    println!("cargo:rustc-env=GOODPUT_RUSTC={rustc_version}");
    // Only paths that exist: cargo reruns a script on every build for a path it cannot find.
    let mut watched: Vec<String> = SOURCES.iter().map(|s| (*s).to_owned()).collect();
    for name in ["HEAD", "packed-refs"] {
        watched.extend(run("git", &["rev-parse", "--git-path", name]));
    }
    if let Some(branch) = run("git", &["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(run("git", &["rev-parse", "--git-path", &branch]));
    }
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}
