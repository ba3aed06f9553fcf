#!/usr/bin/env bash
# Instruction counts of goodput's hot paths under callgrind (valgrind), held to the budgets in
# bench/instructions.toml: a run's cost per request and per SSE event against a canned server,
# `goodput report` of a 100,000-request bundle, `goodput plan` of 100,000 requests. Counts do not
# swing with the host's speed as wall-clock times do, so a change that makes a hot path costlier
# fails them whatever the machine did that hour (examples/instructions.rs says how each figure is
# made).
#
#   bench/instructions.sh [--release] [--update] [--built] [--keep DIR] [--only run|offline]
#
# Default: the tests' build (`cargo test --no-run`, the dev profile CI checks). `--release`: the
# release build, whose figures the performance guide quotes. `--update`: write the measured
# figures as that profile's budgets (commit them on their own, saying why). Installs Debian's
# valgrind when missing. `--built`: the build is there already, run no cargo (CI, whose tests built
# it, runs this beside cargo commands of its own). Exit status 1 when a figure is over its budget
# by more than its margin. `--keep DIR`: keep callgrind's file of each run there, for
# `callgrind_annotate` (where did the instructions go?). `--only run`: the two figures of `goodput
# run`, which drive a server and so want a quiet machine (a process starved of CPU for seconds
# takes other paths); `--only offline`: `report` and `plan`, computation alone, fine at any
# priority (CI runs them at the idle class beside its other stages).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=dev; update=(); built=0; keep=(); only=()
while [[ $# -gt 0 ]]; do
    a="$1"; shift
    case "$a" in
        --keep) keep=(--keep "${1:?--keep needs a directory}"); shift ;;
        --only) only=(--only "${1:?--only needs run or offline}"); shift ;;
        --release) profile=release ;;
        --update) update=(--update) ;;
        --built) built=1 ;;
        *) echo "usage: $0 [--release] [--update] [--built] [--keep DIR] [--only run|offline]" >&2; exit 2 ;;
    esac
done
if ! command -v valgrind >/dev/null; then
    echo "instructions: installing Debian's valgrind (once per machine)" >&2
    sudo_cmd=""; [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq >&2
    $sudo_cmd apt-get install -y -qq valgrind >/dev/null
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}"
# As CI builds (.ci/run): incremental compilation splits the crate differently, which moved the
# dev build's counts by up to 0.6%.
export CARGO_INCREMENTAL=0
if [[ $profile == release ]]; then
    [[ $built -eq 1 ]] || cargo build --release --quiet --bin goodput --example instructions --example synth_bundle
    dir="$CARGO_TARGET_DIR/release"
else
    # The very build the tests use (`cargo nextest run` made it: then this builds nothing);
    # `cargo build` would build the library again without the tests' dev-dependency features.
    [[ $built -eq 1 ]] || cargo test --no-run --quiet
    dir="$CARGO_TARGET_DIR/debug"
fi
exec "$dir/examples/instructions" --bin "$dir" --profile "$profile" \
    --budgets bench/instructions.toml "${update[@]}" "${keep[@]}" "${only[@]}"
