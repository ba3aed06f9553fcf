//! Writes a synthetic bundle for the scale benchmark (`bench/scale.sh`):
//!
//!     cargo run --release --example synth_bundle -- DIR [--requests N] [--output-tokens N] [--legacy]
//!
//! `--legacy` writes chunks in the format before compact encoding (`[[µs, tokens], …]`).

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let mut spec = goodput::record::synth::Spec::default();
    let mut legacy = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--requests" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => spec.requests = n,
                None => return usage("--requests needs a whole number"),
            },
            "--output-tokens" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => spec.output_tokens = n,
                _ => return usage("--output-tokens needs a whole number above 0"),
            },
            "--legacy" => legacy = true,
            _ if dir.is_none() && !a.starts_with('-') => dir = Some(std::path::PathBuf::from(a)),
            _ => return usage(&format!("unexpected argument {a}")),
        }
    }
    let Some(dir) = dir else {
        return usage("give the bundle's directory");
    };
    match goodput::record::synth::write_bundle(&dir, &spec, legacy) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("synth_bundle: {}: {e}", dir.display());
            std::process::ExitCode::FAILURE
        }
    }
}

fn usage(why: &str) -> std::process::ExitCode {
    eprintln!(
        "synth_bundle: {why}\nusage: synth_bundle DIR [--requests N] [--output-tokens N] [--legacy]"
    );
    std::process::ExitCode::from(2)
}
