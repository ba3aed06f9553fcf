#!/usr/bin/env bash
# goodput as one statically linked binary (glibc with crt-static: no loader, no shared
# library), for the Containerfile's image FROM scratch, and the proof that it runs with nothing
# else present.
#
#   scripts/static.sh build [--release]          builds it; prints its path
#   scripts/static.sh context DIR [--release]    the image's build context: Containerfile,
#                                                the binary and the CA certificates
#   scripts/static.sh check [--release]          builds the context, lays out an empty root
#                                                from the Containerfile's COPY lines, and runs
#                                                `goodput --version` and a short run against a
#                                                simulator on loopback inside it (chroot, as
#                                                the image's user 65532)
#
# The image is built with --release; CI checks the dev build (the same code and link, minutes
# faster). Needs root for chroot; the CA certificates come from Debian's ca-certificates.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}"
TARGET=x86_64-unknown-linux-gnu
CA=/etc/ssl/certs/ca-certificates.crt

die() { echo "static: $*" >&2; exit 1; }

profile=dev; dir=debug
for a in "$@"; do [[ "$a" == --release ]] && { profile=release; dir=release; }; done
# The dev build of the check compiles this crate unoptimised (its dependencies stay as the test
# build has them, so they come from the cache): a third of the time, the same code and link.
[[ $profile == dev ]] && export CARGO_PROFILE_DEV_OPT_LEVEL=0

build() {
    # Only the target's code is linked statically (--target keeps build scripts and
    # procedural macros ordinary host programs).
    RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
        cargo build --quiet --profile "$profile" --target "$TARGET" --bin goodput >&2
    local bin="$CARGO_TARGET_DIR/$TARGET/$dir/goodput"
    # A program the kernel starts without a loader has no PT_INTERP header.
    if readelf -l "$bin" | grep -q INTERP; then die "$bin is not statically linked"; fi
    echo "$bin"
}

context() {
    local out="${1:?context needs a directory}"
    if [[ ! -f "$CA" ]]; then
        echo "static: installing Debian's ca-certificates for $CA" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 && apt-get install -y -qq ca-certificates >/dev/null
    fi
    local bin; bin=$(build)
    mkdir -p "$out"
    cp Containerfile "$out/Containerfile"
    cp "$bin" "$out/goodput"
    cp "$CA" "$out/ca-certificates.crt"
    echo "$out"
}

check() {
    [[ $(id -u) -eq 0 ]] || die "check needs root (chroot)"
    work=$(mktemp -d)
    sim_pid=""
    trap 'rm -rf "$work"; [[ -n "$sim_pid" ]] && kill "$sim_pid" 2>/dev/null || true' EXIT
    context "$work/context" >/dev/null
    # The image's root: exactly what the Containerfile copies, and nothing else.
    local root="$work/root"
    mkdir -p "$root"
    grep -E '^COPY ' Containerfile | while read -r _ src dst; do
        mkdir -p "$root$(dirname "$dst")"
        cp "$work/context/$src" "$root$dst"
    done
    [[ $(find "$root" -type f | wc -l) -eq 2 ]] || die "the root should hold the binary and the certificates only"
    # What Kubernetes (or any runtime) mounts into every container: the hosts file, here naming
    # the server, and a writable directory for the bundles.
    mkdir -p "$root/etc" "$root/work"
    echo "127.0.0.1 engine" > "$root/etc/hosts"
    chown 65532:65532 "$root/work"
    local in_root=(chroot --userspec=65532:65532 "$root" /goodput)
    "${in_root[@]}" --version
    # A simulator on loopback (the binary itself, outside the root), and a short run inside.
    local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$root/goodput" sim --port "$port" >"$work/sim.log" 2>&1 &
    sim_pid=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.1
    done
    cat > "$root/work/c.toml" <<TOML
name = "static-check"
[target]
url = "http://engine:$port"
[workload]
output_tokens = { dist = "fixed", value = 8 }
[load]
rate = 20
requests = 20
[warmup]
requests = 0
TOML
    chown 65532:65532 "$root/work/c.toml"
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "${in_root[@]}" run /work/c.toml --out /work/runs --quiet --format json > "$work/summary.json" \
        || die "goodput run failed inside the empty root"
    python3 - "$work/summary.json" <<'PY' || die "the run inside the empty root measured nothing"
import json, sys
s = json.load(open(sys.argv[1]))
ok = s["phases"]["steady"]["ok"]
assert ok == 20, f"{ok} of 20 steady requests ok"
print(f"static: the run inside the empty root: {ok} of 20 steady requests ok against http://engine (named in /etc/hosts)")
PY
    ls "$root"/work/runs/static-check/*/requests.jsonl >/dev/null || die "no bundle written inside the empty root"
}

case "${1:-}" in
    build) build ;;
    context) context "${2:?context needs a directory}" ;;
    check) check ;;
    *) echo "usage: $0 build|context DIR|check [--release]" >&2; exit 2 ;;
esac
