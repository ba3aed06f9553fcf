#!/usr/bin/env bash
# The Kubernetes manifests in deploy/k8s/, checked offline against the Kubernetes API's own
# schemas (the `kubernetes-validate` package from PyPI, which carries them), and read as JSON
# for tests/e2e/deploy.rs.
#
#   scripts/k8s.sh validate      every manifest, strict (unknown fields are errors)
#   scripts/k8s.sh json FILE     the file's documents as one JSON array
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="1.33"
bin="$("$HERE/scripts/pyvenv.sh" k8s kubernetes-validate==1.37.0)"

case "${1:-}" in
    validate)
        "$bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$HERE"/deploy/k8s/*.yaml
        ;;
    json)
        "$bin/python" -c 'import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]))' "${2:?json needs a file}"
        ;;
    *)
        echo "usage: $0 validate | json FILE" >&2
        exit 2
        ;;
esac
