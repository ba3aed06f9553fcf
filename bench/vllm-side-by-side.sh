#!/usr/bin/env bash
# goodput and `vllm bench serve` side by side on one real vLLM server: the same API
# (completions, streamed), the same shape (24 prompt tokens of random text, 8 output tokens,
# EOS ignored), the same arrivals, below saturation and above it. Prints the table of docs/guide/real-engines.md:
# per metric, both tools' figures.
#
#   bench/vllm-side-by-side.sh URL      a running server (scripts/vllm.sh start PORT
#                                       --max-num-seqs 4), e.g. http://127.0.0.1:18102
#
# Below: 20 requests at 0.6 req/s, evenly spaced (goodput `arrival = "constant"`, vllm bench
# `--burstiness 100`: a gamma of shape 100, nearly even). Above: 40 requests at 1.5 req/s, as
# evenly spaced, about 1.6× what this server sustains on 2 cores; goodput twice, stopping once
# its verdict is decided (the default) and with `measurement.stop_when_decided = false`. Even
# spacing on both sides keeps the two tools' arrival draws from differing: with Poisson
# arrivals, 40 requests from two seeds offer visibly different loads (1.23 against 1.5 req/s
# in one try), and that, not a definition, would be most of the difference.
# Takes ~5 minutes; everything is written to a temporary directory, kept if KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
url="${1:?usage: bench/vllm-side-by-side.sh URL (a running vLLM; see scripts/vllm.sh start)}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}"
cargo build --release --quiet --bin goodput
G="$CARGO_TARGET_DIR/release/goodput"
PY="$(scripts/vllm.sh python)"
MODEL="$(scripts/vllm.sh model)"
work="$(mktemp -d)"
[[ "${KEEP:-0}" == 1 ]] && echo "results in $work" >&2 || trap 'rm -rf "$work"' EXIT

contract() { # NAME RATE ARRIVAL REQUESTS
    cat >"$work/$1.toml" <<TOML
name = "$1"
[target]
url = "$url"
api = "openai-completions"
model = "gemma-3-270m"
timeout = "300s"
[workload]
tokenizer = "server"
input_tokens = { dist = "fixed", value = 24 }
output_tokens = { dist = "fixed", value = 8 }
[load]
kind = "open"
rate = $2
arrival = "$3"
requests = $4
[warmup]
requests = 2
[quality]
mode = "none"
TOML
}
vbench() { # NAME RATE BURSTINESS REQUESTS
    mkdir -p "$work/$1"
    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 "$PY" -m vllm.entrypoints.cli.main \
        bench serve --backend openai --endpoint /v1/completions --base-url "$url" \
        --model gemma-3-270m --tokenizer "$MODEL" --dataset-name random \
        --random-input-len 24 --random-output-len 8 --ignore-eos \
        --num-prompts "$4" --request-rate "$2" --burstiness "$3" --num-warmups 2 \
        --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \
        --save-result --save-detailed --result-dir "$work/$1" >"$work/$1.log" 2>&1
}

contract below 0.6 constant 20
contract above 1.5 constant 40
echo "below saturation: goodput, then vllm bench serve" >&2
"$G" run -q "$work/below.toml" --out "$work/runs" >"$work/g-below.txt" || true
vbench vb-below 0.6 100 20
echo "above saturation: goodput (stops when decided), goodput (to the end), vllm bench serve" >&2
"$G" run -q "$work/above.toml" --out "$work/runs" >"$work/g-above.txt" || true
"$G" run -q "$work/above.toml" --out "$work/runs-full" --set measurement.stop_when_decided=false >"$work/g-above-full.txt" || true
vbench vb-above 1.5 100 40

"$PY" - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
def goodput(pattern):
    s = json.load(open(glob.glob(f"{work}/{pattern}/*/summary.json")[0]))
    st = s["steady"]
    d = lambda k, p: (st.get(k) or {}).get(p)
    return {
        "requests": f'{st["ok"]} ok, {st["failed"]} failed',
        "TTFT p50": d("ttft_ms", "p50"), "TTFT p99": d("ttft_ms", "p99"),
        "TPOT p50": d("tpot_ms", "p50"), "TPOT p99": d("tpot_ms", "p99"),
        "ITL p50": d("itl_ms", "p50"), "E2E p50": d("e2e_ms", "p50"), "E2E p99": d("e2e_ms", "p99"),
        "req/s": st["throughput"]["achieved_rps"],
        "validity": s["validity"]["verdict"],
    }
def vllm(name):
    v = json.load(open(glob.glob(f"{work}/{name}/*.json")[0]))
    return {
        "requests": f'{v["completed"]} ok, {v["failed"]} failed',
        "TTFT p50": v["median_ttft_ms"], "TTFT p99": v["p99_ttft_ms"],
        "TPOT p50": v["median_tpot_ms"], "TPOT p99": v["p99_tpot_ms"],
        "ITL p50": v["median_itl_ms"], "E2E p50": v["median_e2el_ms"], "E2E p99": v["p99_e2el_ms"],
        "req/s": v["request_throughput"], "validity": "(not judged)",
    }
cols = [("below", goodput("runs/below"), vllm("vb-below")),
        ("above", goodput("runs/above"), vllm("vb-above"))]
full = goodput("runs-full/above")
fmt = lambda x: x if isinstance(x, str) else ("—" if x is None else f"{x:.3g}" if x < 10 else f"{x:.0f}")
print("| metric (ms) | below: goodput | below: vllm bench | above: goodput | above: goodput, to the end | above: vllm bench |")
print("| --- | --- | --- | --- | --- | --- |")
for k in cols[0][1]:
    print(f"| {k} | {fmt(cols[0][1][k])} | {fmt(cols[0][2][k])} | {fmt(cols[1][1][k])} | {fmt(full[k])} | {fmt(cols[1][2][k])} |")
PY
