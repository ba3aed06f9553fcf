#!/usr/bin/env bash
# Renders a goodput HTML report in a real browser (Debian's headless Chromium) and checks it:
# every figure is in the rendered DOM, the page logs no console error, and a PNG screenshot is
# written. Installs chromium with apt when it is missing (CI machines start without it).
#
#   scripts/check-html.sh REPORT.html [SCREENSHOT.png]
set -euo pipefail

page="$(realpath "${1:?usage: $0 REPORT.html [SCREENSHOT.png]}")"
shot="${2:-${page%.html}.png}"
ids=(cdf-ttft cdf-tpot cdf-itl cdf-e2e timeline-load timeline-ttft lengths-input lengths-output)

if ! command -v chromium >/dev/null; then
    echo "check-html: installing Debian's chromium (once per machine)" >&2
    export DEBIAN_FRONTEND=noninteractive
    sudo_cmd=""
    [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq >&2 || { echo "check-html: apt-get update failed (is the package registry reachable?)" >&2; exit 1; }
    $sudo_cmd apt-get install -y -qq chromium >/dev/null || { echo "check-html: could not install chromium" >&2; exit 1; }
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# Flags as this machine's closed network needs them: no background fetches, no first-run work.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$profile" --window-size=1000,${GOODPUT_SHOT_HEIGHT:-2400})

dom="$(timeout 60 chromium "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" 2>"$profile/log")"
for id in "${ids[@]}"; do
    grep -q "id=\"$id\"" <<<"$dom" || { echo "check-html: figure #$id not in the rendered page" >&2; exit 1; }
done
if grep -E "CONSOLE|Uncaught" "$profile/log" >&2; then
    echo "check-html: the page logged console errors (above)" >&2
    exit 1
fi
timeout 60 chromium "${flags[@]}" --hide-scrollbars --force-device-scale-factor="${GOODPUT_SHOT_SCALE:-1}" \
    --screenshot="$shot" "file://$page" 2>/dev/null
[[ -s "$shot" ]] || { echo "check-html: no screenshot written" >&2; exit 1; }
echo "check-html: ${#ids[@]} figures rendered, no console error; screenshot $shot"
