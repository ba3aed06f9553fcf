#!/usr/bin/env bash
# The client ceiling: how fast goodput can drive and parse a server that costs nothing, beside
# wrk (a C HTTP benchmark that parses nothing) on the same server in the same run.
#
#   bench/ceiling.sh [--quick] [--table] [SECTION…]
#
# SECTION: ceiling, ttft, lag, soak, streams (default: all of them).
# nginx (Debian) serves one fixed 256-token chat-completions SSE body at once, from one worker
# process, on 127.0.0.1; wrk and goodput take turns against it, five rounds, so drift on this
# noisy machine lands on both; over http, and over https (nginx's TLS with a self-signed
# certificate, which goodput trusts through target.tls.ca_file; wrk speaks TLS with OpenSSL).
# Then, against the same nginx: client-added TTFT at low load (everything nginx does not spend:
# goodput's own and loopback's time), and open-loop dispatch lag p99 at 1,000, 2,000, 5,000
# (five times) and 10,000 req/s (three times). Last, peak RSS per in-flight stream with 10,000
# streams held open by `goodput sim` (each stream lasts ~21 s), and the client's RSS over a
# soak: 750,000 requests at 5,000 req/s (two hours at 100 req/s).
# Installs nginx and wrk with apt when missing. `--quick`: one round and shorter runs.
# `--table`: print the performance guide's rows (docs/guide/performance.md) (Markdown) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0; table=0; sections=()
for a in "$@"; do
    case "$a" in
        --quick) quick=1 ;;
        --table) table=1 ;;
        ceiling|ttft|lag|soak|streams) sections+=("$a") ;;
        *) echo "usage: $0 [--quick] [--table] [ceiling|ttft|lag|soak|streams]…" >&2; exit 2 ;;
    esac
done
[[ ${#sections[@]} -gt 0 ]] || sections=(ceiling ttft lag soak streams)
want() { [[ " ${sections[*]} " == *" $1 "* ]]; }
rounds=5; secs=10; lag_secs=15; soak_secs=150
if [[ $quick -eq 1 ]]; then rounds=1; secs=5; lag_secs=8; soak_secs=70; fi
soak_k=$((soak_secs * 5))

need=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "ceiling: installing ${need[*]} from Debian (once per machine)" >&2
    sudo_cmd=""; [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq >&2
    $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}"
cargo build --release --quiet --bin goodput
G="$CARGO_TARGET_DIR/release/goodput"

work="$(mktemp -d)"
chmod 755 "$work"  # nginx workers run as nobody
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -f "$work/nginx.pid" ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# The body: a role chunk, 256 one-token chunks, usage, [DONE].
python3 - "$work/body.sse" <<'PY'
import json, sys
ev = lambda o: "data: " + json.dumps(o, separators=(",", ":")) + "\n\n"
base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench"}
parts = [ev({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
for i in range(256):
    parts.append(ev({**base, "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]}))
parts.append(ev({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                 "usage": {"prompt_tokens": 64, "completion_tokens": 256, "total_tokens": 320}}))
parts.append("data: [DONE]\n\n")
body = "".join(parts)
open(sys.argv[1], "w").write(body)
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# https: a self-signed certificate for 127.0.0.1 (a CA certificate, as `openssl req -x509`
# makes; goodput trusts it pinned through target.tls.ca_file).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 16000; }
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    client_body_temp_path $work/body;
    server {
        listen 127.0.0.1:$port reuseport backlog=4096;
        listen 127.0.0.1:$sport ssl reuseport backlog=4096;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        location = /v1/models { default_type application/json; return 200 '{"object":"list","data":[{"id":"bench","object":"model"}]}'; }
        # A POST to a file is refused (405) by nginx's static module; the refusal's page is the
        # file, fetched by an internal GET and sent with 200.
        location = /v1/chat/completions { error_page 405 =200 /body.sse; return 405; }
        location = /body.sse { internal; root $work; default_type text/event-stream; }
        location / { return 404; }
    }
}
CONF
"$NGINX" -c "$work/nginx.conf" -p "$work" -e "$work/error.log"
url="http://127.0.0.1:$port"
surl="https://127.0.0.1:$sport"
for _ in $(seq 50); do curl -sf "$url/v1/models" >/dev/null 2>&1 && break; sleep 0.1; done

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":256,"stream":true}'
LUA

contract() { # LOAD-LINES [WARMUP [URL [MODEL]]] → $work/c.toml
    local tls=""
    [[ "${3:-$url}" == https://* ]] && tls="tls = { ca_file = \"$work/cert.pem\" }"
    cat > "$work/c.toml" <<TOML
name = "ceiling"
[target]
url = "${3:-$url}"
model = "${4:-bench}"
timeout = "120s"
$tls
[workload]
input_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 256 }
[load]
$1
[warmup]
requests = ${2:-200}
[slo]
ttft_ms = 1000
[measurement]
server_metrics_interval = "0s"
[quality]
mode = "none"
TOML
}
# Runs goodput on the contract; prints the summary JSON's path.
run_goodput() {
    local out="$work/runs-$RANDOM"
    "$G" run "$work/c.toml" --quiet --out "$out" --format json > "$out.json" 2> "$out.err" || true
    [[ -n "${CEILING_DEBUG:-}" ]] && { cat "$out.err" >&2; python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps(s['validity'])[:1500], s['steady'].get('errors'))" "$out.json" >&2; }
    echo "$out.json"
}
get() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ceiling_rows=()
for u in "$url" "$surl"; do
    want ceiling || break
    scheme=${u%%:*}
    echo "== closed loop, 64 connections, ${secs}s each, ${rounds} rounds over $scheme: wrk vs goodput =="
    wrk_rps=(); g_rps=(); g_tps=(); ratios=()
    for r in $(seq "$rounds"); do
        w=$(wrk -t1 -c64 -d"${secs}s" -s "$work/post.lua" "$u/v1/chat/completions" | awk '/Requests\/sec/ {print $2}')
        contract "kind = \"closed\"
concurrency = 64
duration = \"${secs}s\"" 500 "$u"
        j=$(run_goodput)
        rps=$(get "$j" "round(s['steady']['throughput']['achieved_rps'])")
        tps=$(get "$j" "round(s['steady']['throughput']['output_tokens_per_s'])")
        ratio=$(python3 -c "print(f'{$rps/$w:.2f}')")
        echo "round $r: wrk $w req/s · goodput $rps req/s, $tps tokens/s · ratio $ratio"
        wrk_rps+=("$w"); g_rps+=("$rps"); g_tps+=("$tps"); ratios+=("$ratio")
    done
    m_ratio=$(median "${ratios[@]}"); m_wrk=$(median "${wrk_rps[@]}"); m_rps=$(median "${g_rps[@]}"); m_tps=$(median "${g_tps[@]}")
    echo "median over $scheme: goodput/wrk request rate $m_ratio (rounds ${ratios[*]}; wrk $m_wrk, goodput $m_rps req/s, $m_tps tokens/s)"
    ceiling_rows+=("| closed loop, 64 connections over $scheme: goodput / wrk request rate (median of $rounds; rounds ${ratios[*]}) | $m_ratio ($m_rps vs $m_wrk req/s; $m_tps tokens/s) |")
done

if want ttft; then
echo "== client-added TTFT at 50 req/s (nginx answers at once: every µs is the client's and loopback's) =="
contract "rate = 50.0
duration = \"${secs}s\"" 50
j=$(run_goodput)
ttft50=$(get "$j" "round(s['steady']['ttft_ms']['p50'], 3)")
ttft99=$(get "$j" "round(s['steady']['ttft_ms']['p99'], 3)")
echo "TTFT p50 $ttft50 ms, p99 $ttft99 ms"
fi

lag_rows=()
want lag && echo "== open loop, Poisson, ${lag_secs}s each: dispatch lag p99 and validity =="
# The warm-up covers the client's own first seconds at these rates (its connections opening,
# nginx's and the CPUs' ramp): with 2,000 requests, steady-state detection found TTFT still
# falling 2–5 s in at 5,000 req/s and called the run INVALID. CEILING_LAG_RATES picks the rates.
want lag && for rate in ${CEILING_LAG_RATES:-1000 2000 5000 5000 5000 5000 5000 10000 10000 10000}; do
    contract "rate = $rate.0
duration = \"${lag_secs}s\"
max_in_flight = 20000" $((rate * 6 > 2000 ? rate * 6 : 2000))
    j=$(run_goodput)
    lag=$(get "$j" "round(s['steady']['dispatch_lag_ms']['p99'], 3)")
    valid=$(get "$j" "s['validity']['verdict']")
    ach=$(get "$j" "round(s['steady']['throughput']['achieved_rps'])")
    echo "rate $rate: dispatch lag p99 $lag ms, $valid, achieved $ach req/s"
    lag_rows+=("$rate $lag $valid")
done

if want soak; then
echo "== soak: open loop at 5,000 req/s for ${soak_secs}s (${soak_k}k requests, $(python3 -c "print(round($soak_k * 10 / 3600, 1))") h at 100 req/s): client RSS =="
contract "rate = 5000.0
duration = \"${soak_secs}s\"
max_in_flight = 20000" 1000
"$G" run "$work/c.toml" --quiet --out "$work/soak" --format json > "$work/soak.json" 2> "$work/soak.err" &
soak_pid=$!; pids+=($soak_pid)
samples=()
for t in $(seq 2 2 $((soak_secs - 2))); do
    sleep 2
    samples+=("$t $(awk '/VmRSS/ {print $2}' /proc/$soak_pid/status 2>/dev/null || echo 0)")
done
wait "$soak_pid" || true
# Growth is a trend, not one sample: the median RSS of the first and the last third after the
# first minute (a transient pile-up of in-flight streams shows as the max, not as growth).
soak_line=$(printf '%s\n' "${samples[@]}" | python3 -c "
import sys, statistics as st
s = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
after = [(t, r) for t, r in s if t >= 60]
k = max(1, len(after) // 3)
a, b = st.median(r for _, r in after[:k]), st.median(r for _, r in after[-k:])
print(f'RSS median {a/1024:.0f} MB over {after[0][0]}-{after[k-1][0]} s, {b/1024:.0f} MB over {after[-k][0]}-{after[-1][0]} s ({(b/a-1)*100:+.0f}%); max {max(r for _, r in after)/1024:.0f} MB')
")
printf '%s\n' "${samples[@]}" | awk '{printf "%s:%dMB ", $1, $2/1024} END {print ""}'
echo "$soak_line"
fi

if want streams; then
echo "== 10,000 streams in flight against goodput sim (each ~21 s): peak RSS per stream =="
"$G" sim --port 0 --set decode_base_ms=80 --set decode_per_seq_ms=0 --set max_batch=100000 \
    --set kv_capacity_tokens=1000000000000 --set prefill_tokens_per_s=1e12 > "$work/sim.out" &
pids+=($!)
for _ in $(seq 100); do grep -q http:// "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
sim_url=$(grep -o 'http://[0-9.:]*' "$work/sim.out" | head -1)
stream_rss() { # concurrency → peak RSS kB of `goodput run`
    contract "kind = \"closed\"
concurrency = $1
requests = $1" 0 "$sim_url" goodput-sim-8b
    /usr/bin/time -f '%M' -o "$work/rss" "$G" run "$work/c.toml" --quiet --out "$work/sruns" --format json > "$work/s.json" 2>"$work/s.err" || true
    cat "$work/rss"
}
base_rss=$(stream_rss 10)
peak_rss=$(stream_rss 10000)
in_flight=$(get "$work/s.json" "s['steady']['ok']")
per_stream=$(python3 -c "print(round(($peak_rss - $base_rss) / 10000, 1))")
echo "peak RSS ${peak_rss} kB at 10,000 streams (${base_rss} kB at 10): ${per_stream} KiB per stream; ${in_flight} streams succeeded"
fi

if [[ $table -eq 1 ]]; then
    echo
    echo "| measure | value |"
    echo "|---|---|"
    for row in "${ceiling_rows[@]}"; do echo "$row"; done
    want ttft && echo "| client-added TTFT at 50 req/s, p50 / p99 | $ttft50 / $ttft99 ms |"
    for row in "${lag_rows[@]}"; do set -- $row; echo "| open loop $1 req/s: dispatch lag p99 | $2 ms, $3 |"; done
    want streams && echo "| RSS per in-flight stream at 10,000 streams | $per_stream KiB |"
    want soak && echo "| soak, ${soak_k}k requests at 5,000 req/s | $soak_line |"
fi
