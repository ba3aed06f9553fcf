#!/usr/bin/env bash
# A reader of Parquet files that is not goodput's own (Apache Arrow's pyarrow, from PyPI), for
# tests/e2e/export.rs: it reads a file back and prints its schema and rows as JSON, so the test
# holds them against the bundle's requests.jsonl.
#
#   scripts/pyarrow.sh read FILE.parquet
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$("$HERE/scripts/pyvenv.sh" pyarrow pyarrow==22.0.0)"

case "${1:-}" in
    read)
        "$bin/python" -c 'import json, sys, pyarrow.parquet as pq; t = pq.read_table(sys.argv[1]); print(json.dumps({"schema": {f.name: str(f.type) for f in t.schema}, "rows": t.to_pylist()}))' "${2:?read needs a file}"
        ;;
    *)
        echo "usage: $0 read FILE.parquet" >&2
        exit 2
        ;;
esac
