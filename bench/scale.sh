#!/usr/bin/env bash
# `goodput report` on a 1,000,000-request bundle (128 output tokens each, 1.25 GB of
# requests.jsonl): wall time and peak RSS, three runs, beside the same records in the chunk
# format before compact encoding (`--legacy`, 2.2 GB), which still loads.
#
#   bench/scale.sh [REQUESTS]      (default 1000000; the bundles go to a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}"
cargo build --release --quiet --bin goodput --example synth_bundle
G="$CARGO_TARGET_DIR/release/goodput"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$CARGO_TARGET_DIR/release/examples/synth_bundle" "$work/compact" --requests "$n"
"$CARGO_TARGET_DIR/release/examples/synth_bundle" "$work/legacy" --requests "$n" --legacy
sync  # the files just written are on disk, not being written back while a report reads
for b in compact legacy; do
    size=$(du -m "$work/$b/requests.jsonl" | cut -f1)
    for i in 1 2 3; do
        /usr/bin/time -f '%e %M' -o "$work/t" "$G" report "$work/$b" > "$work/$b.txt"
        read -r secs kb < "$work/t"
        echo "$b ($size MB): run $i: ${secs} s, peak RSS $((kb / 1024)) MB"
    done
done
cmp -s "$work/compact.txt" "$work/legacy.txt" && echo "the two reports are identical" || { echo "the reports differ"; diff "$work/compact.txt" "$work/legacy.txt" | head; exit 1; }
