#!/usr/bin/env bash
# Renders a goodput HTML report in a real browser (Debian's headless Chromium) and checks it:
# every figure is in the rendered DOM, the page logs no console error, and a PNG screenshot is
# written. Installs chromium with apt when it is missing (CI machines start without it).
#
#   scripts/check-html.sh REPORT.html [SCREENSHOT.png]
#       GOODPUT_HTML_IDS="a b" checks those figure ids instead of a run report's (a sweep page's);
#       GOODPUT_HTML_MUST="text" also requires that text in the rendered page.
#   scripts/check-html.sh shot PAGE.html WIDTH HEIGHT OUT.png
#       a screenshot of PAGE's first WIDTH×HEIGHT (the README's and the guide's pictures).
#   scripts/check-html.sh layout PAGE.html WIDTH HEIGHT
#       renders PAGE at WIDTH×HEIGHT CSS pixels and prints, as JSON, what the layout tests read
#       from the rendered DOM: the figures (ids), every pair of text labels inside one figure
#       whose boxes overlap, whether the verdict banner and the tiles end within the first
#       screen, and the page's scroll width (a page wider than the screen scrolls sideways).
#       Exits 1 when the page logs a console error.
set -euo pipefail

install_chromium() {
    command -v chromium >/dev/null && return
    echo "check-html: installing Debian's chromium (once per machine)" >&2
    export DEBIAN_FRONTEND=noninteractive
    local sudo_cmd=""
    [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq >&2 || { echo "check-html: apt-get update failed (is the package registry reachable?)" >&2; exit 1; }
    $sudo_cmd apt-get install -y -qq chromium >/dev/null || { echo "check-html: could not install chromium" >&2; exit 1; }
}

if [[ "${1:-}" == shot ]]; then
    src="$(realpath "${2:?shot PAGE.html WIDTH HEIGHT OUT.png}")"; out="$(realpath -m "${5:?out}")"
    install_chromium
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$work/profile" --hide-scrollbars --window-size="${3:?width},${4:?height}" \
        --screenshot="$out" "file://$src" 2>/dev/null
    [[ -s "$out" ]] || { echo "check-html: no screenshot written" >&2; exit 1; }
    exit 0
fi

if [[ "${1:-}" == layout ]]; then
    src="$(realpath "${2:?layout PAGE.html WIDTH HEIGHT}")"; width="${3:?width}"; height="${4:?height}"
    install_chromium
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    # The page as written, framed at exactly WIDTH×HEIGHT (a headless window is at least 500
    # wide), measured from the frame's own DOM by a script of the outer page (the page itself
    # has none).
    cp "$src" "$work/page.html"
    cat >"$work/layout.html" <<HTML
<!doctype html><html><body style="margin:0">
<iframe id="f" src="page.html" style="width:${width}px;height:${height}px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {
  const win = this.contentWindow, doc = this.contentDocument;
  const r = { figures: [], overlaps: [], width: win.innerWidth,
              scroll_width: doc.documentElement.scrollWidth, first_screen: {} };
  const hit = (a, b) => a.width > 0 && b.width > 0 && a.left < b.right - 0.5 &&
      b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  doc.querySelectorAll('svg.chart').forEach(function (svg) {
    r.figures.push(svg.id);
    const t = Array.from(svg.querySelectorAll('text')).map(function (e) {
      return [e.textContent, e.getBoundingClientRect()];
    });
    for (let i = 0; i < t.length; i++)
      for (let j = i + 1; j < t.length; j++)
        if (hit(t[i][1], t[j][1])) r.overlaps.push(svg.id + ': "' + t[i][0] + '" over "' + t[j][0] + '" ' + [t[i][1].left, t[i][1].right, t[j][1].left, t[j][1].right].map(Math.round).join(','));
  });
  // Legend keys (HTML, under each figure): none over another, none past its figure.
  doc.querySelectorAll('figure').forEach(function (fig) {
    const f = fig.getBoundingClientRect();
    const k = Array.from(fig.querySelectorAll('.key')).map(function (e) {
      return [e.textContent, e.getBoundingClientRect()];
    });
    for (let i = 0; i < k.length; i++) {
      if (k[i][1].right > f.right + 0.5) r.overlaps.push('legend "' + k[i][0] + '" past its figure');
      for (let j = i + 1; j < k.length; j++)
        if (hit(k[i][1], k[j][1])) r.overlaps.push('legend "' + k[i][0] + '" over "' + k[j][0] + '"');
    }
  });
  ['verdict', 'tiles'].forEach(function (id) {
    const e = doc.getElementById(id);
    if (e) r.first_screen[id] = e.getBoundingClientRect().bottom <= win.innerHeight;
  });
  const pre = document.createElement('pre');
  pre.textContent = 'LAY' + 'OUT' + JSON.stringify(r) + 'END';
  document.body.appendChild(pre);
});
</script></body></html>
HTML
    # Twice at most: on a machine busy with a test suite, one start of Chromium can stall.
    for attempt in 1 2; do
        if out="$(timeout 90 chromium --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
            --disable-background-networking --disable-component-update --disable-sync \
            --allow-file-access-from-files --user-data-dir="$work/profile-$attempt" \
            --window-size="$((width + 40)),$((height + 40))" --virtual-time-budget=5000 \
            --enable-logging=stderr --v=0 --dump-dom "file://$work/layout.html" 2>"$work/log")" \
            && grep -q 'LAYOUT{' <<<"$out"; then
            break
        fi
        echo "check-html: Chromium gave no measurement (attempt $attempt, status $?)" >&2
    done
    if grep -E "CONSOLE|Uncaught" "$work/log" >&2; then
        echo "check-html: the page logged console errors (above)" >&2
        exit 1
    fi
    json="$(grep -o 'LAYOUT{.*}END' <<<"$out" | sed 's/^LAYOUT//; s/END$//')"
    [[ -n "$json" ]] || { echo "check-html: the measuring script did not run" >&2; exit 1; }
    # The DOM dump escapes < > & in text; the JSON has none but in quoted labels.
    sed 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g' <<<"$json"
    exit 0
fi

page="$(realpath "${1:?usage: $0 REPORT.html [SCREENSHOT.png]}")"
shot="${2:-${page%.html}.png}"
ids=(pct-ttft pct-tpot pct-itl pct-e2e pct-lag cdf-ttft cdf-tpot cdf-itl cdf-e2e timeline-load timeline-ttft lengths-input lengths-output)
if [[ -n "${GOODPUT_HTML_IDS:-}" ]]; then read -r -a ids <<<"$GOODPUT_HTML_IDS"; fi

install_chromium

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# Flags as this machine's closed network needs them: no background fetches, no first-run work.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$profile" --window-size=${GOODPUT_SHOT_WIDTH:-1000},${GOODPUT_SHOT_HEIGHT:-2400})

dom="$(timeout 60 chromium "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" 2>"$profile/log")"
for id in "${ids[@]}"; do
    grep -q "id=\"$id\"" <<<"$dom" || { echo "check-html: figure #$id not in the rendered page" >&2; exit 1; }
done
if [[ -n "${GOODPUT_HTML_MUST:-}" ]] && ! grep -qF "$GOODPUT_HTML_MUST" <<<"$dom"; then
    echo "check-html: \"$GOODPUT_HTML_MUST\" not in the rendered page" >&2
    exit 1
fi
if grep -E "CONSOLE|Uncaught" "$profile/log" >&2; then
    echo "check-html: the page logged console errors (above)" >&2
    exit 1
fi
timeout 60 chromium "${flags[@]}" --hide-scrollbars --force-device-scale-factor="${GOODPUT_SHOT_SCALE:-1}" \
    --screenshot="$shot" "file://$page" 2>/dev/null
[[ -s "$shot" ]] || { echo "check-html: no screenshot written" >&2; exit 1; }
echo "check-html: ${#ids[@]} figures rendered, no console error; screenshot $shot"
