#!/usr/bin/env bash
# A Python virtual environment of pinned packages from PyPI for a tool the tests use, kept
# outside the repository under ~/.cache/goodput/NAME (or $GOODPUT_PYVENV_ROOT/NAME); prints its
# bin directory. A second call with the same packages only checks the stamp.
#
#   scripts/pyvenv.sh NAME PACKAGE==VERSION…
set -euo pipefail
name="${1:?usage: pyvenv.sh NAME PACKAGE==VERSION…}"
shift
[[ $# -gt 0 ]] || { echo "pyvenv: name at least one package" >&2; exit 2; }
dir="${GOODPUT_PYVENV_ROOT:-$HOME/.cache/goodput}/$name"
stamp="$dir/installed-$(printf '%s ' "$@" | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" || ! -x "$dir/venv/bin/python" ]]; then
    command -v python3 >/dev/null || { echo "pyvenv: python3 not found" >&2; exit 1; }
    mkdir -p "$dir"
    [[ -x "$dir/venv/bin/python" ]] || python3 -m venv "$dir/venv"
    echo "pyvenv: installing $* into $dir/venv" >&2
    "$dir/venv/bin/python" -m pip install --disable-pip-version-check -q "$@" >&2 \
        || { echo "pyvenv: pip could not install $* (is the package registry reachable?)" >&2; exit 1; }
    touch "$stamp"
fi
echo "$dir/venv/bin"
