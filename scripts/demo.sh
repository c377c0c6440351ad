#!/usr/bin/env bash
# The product's main job on a fresh Debian/Ubuntu machine: builds smarticod and
# runs what exists of it against the built-in simulator.
#
# Today (see the issues): the protocol, the transport, the store, the session
# machine, the socket API server and the simulator exist; the daemon's driver that
# joins them is next. Until then this shows the parts that run on their own: the
# configuration check, and the simulator probed by the diagnostic client.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
echo "==> building (release)"
swift build -c release
BIN="$(swift build -c release --show-bin-path)"

echo
echo "==> smarticod --version"
"$BIN/smarticod" --version
echo
echo "==> smarticod --check-config config.example.json"
"$BIN/smarticod" --config config.example.json --check-config
echo
echo "==> a broken configuration is refused with one line per problem (exit 78)"
broken="$(mktemp)"
trap 'rm -f "$broken"' EXIT
cat > "$broken" <<'JSON'
{"server": {"label_key": "not-a-key", "url": "http://example.com"}, "session": {"keepalive_s": 0}, "colour": "blue"}
JSON
set +e
"$BIN/smarticod" --config "$broken" --check-config
echo "(exit $?)"
set -e
echo
echo "==> starting smartico-sim (the local Smartico server) on a free port"
simout="$(mktemp)"
"$BIN/smartico-sim" --port 0 --emit-every 2s >"$simout" 2>/dev/null &
sim=$!
trap 'kill $sim 2>/dev/null; rm -f "$broken" "$simout"' EXIT
for _ in $(seq 1 100); do [ "$(wc -l <"$simout")" -ge 3 ] && break; sleep 0.1; done
url="$(sed -n 2p "$simout")"
[ -n "$url" ] || { echo "smartico-sim did not start" >&2; exit 1; }
echo "    $url"
echo
echo "==> smartico-ws probe $url"
"$BIN/smartico-ws" probe "$url" --timeout 10
kill "$sim"; wait "$sim" 2>/dev/null || true
echo
echo "==> done: smartico-sim stopped"
