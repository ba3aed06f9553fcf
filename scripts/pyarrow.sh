#!/usr/bin/env bash
# A reader of Parquet files that is not goodput's own (Apache Arrow's pyarrow, from PyPI), for
# tests/export.rs: it reads a file back and prints its rows as JSON, so the test holds them
# against the bundle's requests.jsonl.
#
#   scripts/pyarrow.sh read FILE.parquet     the rows, one JSON array of objects
#
# pyarrow lives in a venv under $GOODPUT_PY_DIR (default ~/.cache/goodput/pyarrow), outside
# the repository; a second call only checks it is there.
set -euo pipefail

PYARROW_VERSION="22.0.0"
DIR="${GOODPUT_PY_DIR:-$HOME/.cache/goodput/pyarrow}"
PY="$DIR/venv/bin/python"
STAMP="$DIR/installed-$PYARROW_VERSION"

install() {
    [[ -f "$STAMP" && -x "$PY" ]] && return 0
    mkdir -p "$DIR"
    [[ -x "$PY" ]] || python3 -m venv "$DIR/venv"
    echo "pyarrow: installing pyarrow==$PYARROW_VERSION into $DIR/venv" >&2
    "$PY" -m pip install --disable-pip-version-check -q "pyarrow==$PYARROW_VERSION" >&2 \
        || { echo "pyarrow: pip could not install pyarrow (is the package registry reachable?)" >&2; exit 1; }
    touch "$STAMP"
}

case "${1:-}" in
    read)
        install
        "$PY" -c 'import json, sys, pyarrow.parquet as pq; t = pq.read_table(sys.argv[1]); print(json.dumps({"schema": {f.name: str(f.type) for f in t.schema}, "rows": t.to_pylist()}))' "${2:?read needs a file}"
        ;;
    *)
        echo "usage: $0 read FILE.parquet" >&2
        exit 2
        ;;
esac
