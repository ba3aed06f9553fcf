#!/usr/bin/env bash
# Fuzzing with cargo-fuzz (libFuzzer) on the nightly toolchain. The targets are in fuzz/, each a
# thin call into src/fuzz.rs; their seed corpora (real captures from llama.cpp and the
# simulator, the example files, peer-tool results) are in fuzz/seeds/<target>.
#
#   scripts/fuzz.sh install            cargo-fuzz, if missing (needs `rustup toolchain list` to show nightly)
#   scripts/fuzz.sh list               the targets
#   scripts/fuzz.sh run TARGET [RUNS]  RUNS executions (default 10 million), corpus in fuzz/corpus/TARGET
#   scripts/fuzz.sh all [RUNS]         every target in turn
#
# A crash leaves its input in fuzz/artifacts/TARGET/; copy it into tests/fixtures/fuzz/TARGET/
# once fixed, where `cargo nextest run` (tests/e2e/fuzz_replay.rs) replays it on every CI run.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(sse event contract dataset trace peer_result records prom import spans)
install() {
    rustup toolchain list | grep -q nightly || { echo "fuzzing needs the nightly toolchain" >&2; exit 1; }
    command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
}
run() {
    local t=$1 runs=${2:-10000000}
    mkdir -p "fuzz/corpus/$t"
    # -rss_limit_mb: the parsers' memory is bounded; a leak or unbounded growth is a failure.
    # -max_len: inputs up to 4 KiB (the limits themselves are unit-tested at their edges).
    (cd fuzz && cargo +nightly fuzz run -O -s none "$t" "corpus/$t" "seeds/$t" -- \
        -runs="$runs" -rss_limit_mb=2048 -max_len=4096 -timeout=10 -print_final_stats=1)
}
case "${1:-}" in
    install) install ;;
    list) printf '%s\n' "${targets[@]}" ;;
    run) install; run "${2:?target}" "${3:-}" ;;
    all) install; for t in "${targets[@]}"; do run "$t" "${2:-}"; done ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
esac
