#!/usr/bin/env bash
# Remakes the README's and the guide's pictures (docs/screenshots/*.png): the first 1400 × 900 screen of the
# run, compare, capacity-sweep and demo pages, made by the debug binary against the embedded
# simulator and shot by headless Chromium (scripts/check-html.sh shot).
#
#   cargo build && scripts/screenshots.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}/debug/goodput"
OUT="$HERE/docs/screenshots"
mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >c.toml <<'TOML'
name = "chat-example"
[workload]
output_tokens = { dist = "uniform", min = 16, max = 96 }
[load]
rate = 20
requests = 400
[warmup]
requests = 100
[slo]
ttft_ms = 300
tpot_ms = 40
[quality]
mode = "consistency"
TOML
"$BIN" run -q c.toml --out a >/dev/null
"$BIN" run -q c.toml --out b --rate 30 >/dev/null
a="$(ls -d a/*/*)"; b="$(ls -d b/*/*)"
"$BIN" compare "$a" "$b" --label "20 req/s" --label "30 req/s" --format html >compare.html || true
cat >s.toml <<'TOML'
name = "capacity"
[workload]
output_tokens = { dist = "fixed", value = 32 }
[load]
rate = 20
duration = "8s"
[warmup]
duration = "2s"
[slo]
ttft_ms = 300
percentile = 90
TOML
"$BIN" sweep -q s.toml --capacity --max-runs 6 --out s >/dev/null
"$BIN" demo --format html >demo.html
shot() { "$HERE/scripts/check-html.sh" shot "$1" 1400 900 "$OUT/$2.png"; }
shot "$a/report.html" run
shot compare.html compare
shot "$(ls s/*/*/sweep.html)" sweep
shot demo.html demo
ls -l "$OUT"
