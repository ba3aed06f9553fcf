//! The fuzz smoke on the stable toolchain: every fuzz target (src/fuzz.rs) run on its seed
//! corpus (fuzz/seeds), on every input a fuzzer once crashed it with (tests/fixtures/fuzz), and
//! on a few thousand seeded mutations of each seed. The long libFuzzer runs are
//! `scripts/fuzz.sh` (docs/guide/testing.md, "Fuzzing"); this keeps their findings fixed on every CI run.

use std::path::Path;

use rand::{RngExt, SeedableRng};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 10] = [
    ("sse", goodput::fuzz::sse),
    ("event", goodput::fuzz::event),
    ("contract", goodput::fuzz::contract),
    ("dataset", goodput::fuzz::dataset),
    ("trace", goodput::fuzz::trace),
    ("peer_result", goodput::fuzz::peer_result),
    ("records", goodput::fuzz::records),
    ("prom", goodput::fuzz::prom),
    ("import", goodput::fuzz::import),
    ("spans", goodput::fuzz::spans),
];

fn files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
    v.sort();
    v.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// A mutation of the kinds libFuzzer makes: flip, insert, erase, duplicate a run, truncate.
fn mutate(seed: &[u8], rng: &mut rand_chacha::ChaCha8Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..rng.random_range(1..6) {
        let n = v.len();
        match rng.random_range(0..5) {
            0 if n > 0 => {
                let i = rng.random_range(0..n);
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let i = rng.random_range(0..=n);
                let b = *b"\n\r:{}[]\",0-9ae \x00\xff"
                    .get(rng.random_range(0..17))
                    .unwrap_or(&b'x');
                v.insert(i, b);
            }
            2 if n > 0 => {
                let i = rng.random_range(0..n);
                let j = rng.random_range(i..n.min(i + 64) + 1).min(n);
                v.drain(i..j);
            }
            3 if n > 0 => {
                let i = rng.random_range(0..n);
                let j = (i + rng.random_range(1..32)).min(n);
                let run = v[i..j].to_vec();
                v.splice(i..i, run);
            }
            _ => v.truncate(rng.random_range(0..=n)),
        }
    }
    v
}

#[test]
fn every_target_survives_its_seeds_past_crashes_and_mutations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in TARGETS {
        let seeds = files(&root.join("fuzz/seeds").join(name));
        assert!(!seeds.is_empty(), "fuzz/seeds/{name} has no seed");
        for input in seeds
            .iter()
            .chain(&files(&root.join("tests/fixtures/fuzz").join(name)))
        {
            target(input);
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
        for k in 0..3000 {
            target(&mutate(&seeds[k % seeds.len()], &mut rng));
        }
    }
}
