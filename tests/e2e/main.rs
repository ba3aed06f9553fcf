//! The end-to-end tests, one module per area, in one test binary: each of the ~30 areas as its
//! own binary linked the whole library again, which was a minute and a half of every CI run on
//! 2 cores. nextest still runs every test in its own process (`.config/nextest.toml` says which
//! run alone); `cargo nextest run -E 'test(/^timing::/)'` runs one area.
//!
//! `tests/real_engine.rs` stays a binary of its own: it needs the installed engine and runs in
//! its own CI stage.

mod common;

mod ab;
mod agents;
mod architecture;
mod attribution;
mod bounded;
mod bridge;
mod classes;
mod coldstart;
mod compare;
mod deploy;
mod docs;
mod efficiency;
mod export;
mod faults;
mod fuzz_replay;
mod gates;
mod guard;
mod history;
mod hostile;
mod html;
mod images;
mod import;
mod import_peers;
mod live;
mod provenance;
mod quality;
mod quickstart;
mod reports;
mod run;
mod scale_out;
mod secrets;
mod server_figures;
mod signals;
mod sim;
mod stages;
mod steadiness;
mod sweep;
mod timing;
mod tls;
mod tools;
mod traces;
mod trust;
mod tune;
mod verdicts;
mod workload;
