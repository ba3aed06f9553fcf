#!/usr/bin/env bash
# The Berkeley Function-Calling Leaderboard's data, for goodput's tool-call tests and examples:
# the `bfcl-eval` wheel from PyPI (downloaded, never installed: only its data files are read),
# unpacked into $GOODPUT_BFCL_DIR (default ~/.cache/goodput/bfcl).
#
#   scripts/bfcl.sh install   idempotent: download and unpack (a second run takes no time)
#   scripts/bfcl.sh data      prints the data directory (BFCL_v4_<category>.json, possible_answer/)
set -euo pipefail

BFCL_VERSION="2026.3.23"
DIR="${GOODPUT_BFCL_DIR:-$HOME/.cache/goodput/bfcl}"
STAMP="$DIR/installed-$BFCL_VERSION"
DATA="$DIR/bfcl_eval/data"

die() {
    echo "bfcl: $*" >&2
    exit 1
}

install() {
    if [[ -f "$STAMP" && -f "$DATA/BFCL_v4_simple_python.json" ]]; then
        return 0
    fi
    mkdir -p "$DIR"
    command -v python3 >/dev/null || die "python3 not found (pip downloads the wheel)"
    echo "bfcl: downloading bfcl-eval==$BFCL_VERSION (its data files only)" >&2
    python3 -m pip download --disable-pip-version-check -q --no-deps \
        "bfcl-eval==$BFCL_VERSION" -d "$DIR/wheel" >&2 ||
        die "pip could not download bfcl-eval (is the package registry reachable?)"
    python3 - "$DIR" <<'PY' || die "unpacking the wheel failed"
import glob, sys, zipfile
d = sys.argv[1]
whl = sorted(glob.glob(f"{d}/wheel/bfcl_eval-*.whl"))[-1]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith("bfcl_eval/data/"):
            z.extract(n, d)
PY
    touch "$STAMP"
}

case "${1:-}" in
    install) install ;;
    data) install && echo "$DATA" ;;
    *) die "usage: $0 install|data" ;;
esac
