//! The `goodput` binary: builds the runtime, parses the command line, runs, and turns errors
//! into a message and a non-zero exit (never a backtrace for a user's mistake).

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than glibc's malloc: the client's many small allocations, often freed on
/// another thread, cost it an eighth of its CPU at its ceiling (docs/guide/performance.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = goodput::cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("goodput: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(goodput::cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`goodput plan … | head`) is not a failure.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("goodput: {}", goodput::secrets::redact(&format!("{e:#}")));
            goodput::cli::failure_code()
        }
    }
}
