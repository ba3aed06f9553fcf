#!/usr/bin/env bash
# The Kubernetes manifests in deploy/k8s/, checked offline against the Kubernetes API's own
# schemas (the `kubernetes-validate` package from PyPI, which carries them), and read as JSON
# for tests/deploy.rs.
#
#   scripts/k8s.sh validate      every manifest, strict (unknown fields are errors)
#   scripts/k8s.sh json FILE     the file's documents as one JSON array
#
# The validator lives in a venv under $GOODPUT_K8S_DIR (default ~/.cache/goodput/k8s), outside
# the repository; a second call only checks it is there.
set -euo pipefail

KV_VERSION="1.37.0"
K8S_VERSION="1.33"
DIR="${GOODPUT_K8S_DIR:-$HOME/.cache/goodput/k8s}"
PY="$DIR/venv/bin/python"
STAMP="$DIR/installed-$KV_VERSION"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

install() {
    [[ -f "$STAMP" && -x "$PY" ]] && return 0
    mkdir -p "$DIR"
    command -v python3 >/dev/null || { echo "k8s: python3 not found" >&2; exit 1; }
    [[ -x "$PY" ]] || python3 -m venv "$DIR/venv"
    echo "k8s: installing kubernetes-validate==$KV_VERSION into $DIR/venv" >&2
    "$PY" -m pip install --disable-pip-version-check -q "kubernetes-validate==$KV_VERSION" >&2 \
        || { echo "k8s: pip could not install kubernetes-validate (is the package registry reachable?)" >&2; exit 1; }
    touch "$STAMP"
}

case "${1:-}" in
    validate)
        install
        "$DIR/venv/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$HERE"/deploy/k8s/*.yaml
        ;;
    json)
        install
        "$PY" -c 'import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]))' "${2:?json needs a file}"
        ;;
    *)
        echo "usage: $0 validate | json FILE" >&2
        exit 2
        ;;
esac
