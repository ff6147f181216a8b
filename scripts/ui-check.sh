#!/usr/bin/env bash
# ui-check: opens the admin status page in a real headless Chromium (Debian's
# package, installed here if missing), takes a screenshot, and checks that
# the providers' charts rendered. Not part of make test.
#
#   make ui-check            (or: bash scripts/ui-check.sh [OUTDIR])
#
# It builds internal/cmd/uidemo, which serves the page of a scheduler whose
# registry had 20 s of scripted traffic against simulated providers (on
# loopback only), dumps the DOM and takes a screenshot with Chromium, then
# has uidemo check both: at least three SVG charts with rate lines of ten
# points or more, escaped names, and a screenshot that is not blank and
# shows the rate line's blue and the refusals' red. The screenshot and the
# DOM stay in OUTDIR (default: a new temporary directory), printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=${1:-$(mktemp -d -t forage-ui-check.XXXXXX)}
mkdir -p "$out"

if ! command -v chromium >/dev/null 2>&1; then
	echo "== installing Debian's chromium"
	if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

echo "== building internal/cmd/uidemo"
"$GO" build -o "$out/uidemo" ./internal/cmd/uidemo

ready="$out/ready"
rm -f "$ready"
"$out/uidemo" -addr 127.0.0.1:0 -traffic 20s -ready "$ready" -for 5m &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
echo "== scripted traffic for 20 s (uidemo pid $pid)"
for _ in $(seq 1 120); do
	[ -s "$ready" ] && break
	kill -0 "$pid" 2>/dev/null || { echo "ui-check: uidemo exited early" >&2; exit 1; }
	sleep 0.5
done
[ -s "$ready" ] || { echo "ui-check: the page was not ready within 60 s" >&2; exit 1; }
url=$(head -n1 "$ready")
echo "== page at $url"

chrome() {
	local profile
	profile=$(mktemp -d -t forage-ui-profile.XXXXXX)
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-dev-shm-usage --hide-scrollbars --user-data-dir="$profile" "$@" 2>>"$out/chromium.log"
	rm -rf "$profile"
}
chrome --dump-dom "$url" >"$out/status.html"
chrome --screenshot="$out/status.png" --window-size=1280,1500 "$url" >/dev/null
"$out/uidemo" -check -dom "$out/status.html" -png "$out/status.png"
echo "ui-check: ok — screenshot $out/status.png, DOM $out/status.html"
