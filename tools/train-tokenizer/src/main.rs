//! Trains a byte-level BPE (GPT-2's pre-tokenizer, model and decoder) on text written for this
//! project: the ShareGPT-format sample in `examples/data/` and the simulator's word list. The
//! result is small (a few hundred merges) and ours to ship, yet behaves like a real model's
//! tokenizer: words split into several tokens, spaces attach to the following word, and any
//! byte sequence can be encoded.

use std::path::Path;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

fn main() {
    let out = std::env::args()
        .nth(1)
        .expect("usage: train-tokenizer OUT.json");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sample = std::fs::read_to_string(root.join("examples/data/sharegpt-sample.json"))
        .expect("read the ShareGPT sample");
    let convs: serde_json::Value = serde_json::from_str(&sample).expect("sample is JSON");
    let mut corpus = Vec::new();
    for c in convs.as_array().expect("array") {
        for turn in c["conversations"].as_array().expect("conversations") {
            corpus.push(turn["value"].as_str().expect("value").to_owned());
        }
    }
    let words = std::fs::read_to_string(root.join("src/text.rs")).expect("read src/text.rs");
    let list: String = words
        .split("WORDS: [&str; 128] = [")
        .nth(1)
        .and_then(|s| s.split("];").next())
        .expect("word list")
        .replace(['"', ','], " ");
    corpus.push(list.split_whitespace().collect::<Vec<_>>().join(" "));
    let dir = std::env::temp_dir().join("train-tokenizer");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("corpus.txt");
    std::fs::write(&file, corpus.join("\n")).expect("write corpus");

    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(640)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![AddedToken::from("<|endoftext|>", true)])
        .build()
        .into();
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_decoder(Some(ByteLevelDecoder::default()));
    tokenizer
        .train_from_files(&mut trainer, vec![file.display().to_string()])
        .expect("train");
    tokenizer.save(&out, false).expect("save");
    let t = Tokenizer::from_file(&out).expect("reload");
    let e = t
        .encode("How do I keep bread from going stale?", false)
        .expect("encode");
    eprintln!(
        "vocab {} · sample → {:?}",
        t.get_vocab_size(true),
        e.get_tokens()
    );
}
