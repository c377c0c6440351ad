#!/usr/bin/env bash
# The product's main job on a fresh Debian/Ubuntu machine: builds smarticod and
# runs what exists of it against the built-in simulator.
#
# Today (see the issues): the protocol, transport, store, session machine and the
# simulator's logic exist; the daemon's driver and the simulator's WebSocket
# server are being joined. Until then this shows the parts that run on their own.
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
echo "==> smartico-sim --help"
"$BIN/smartico-sim" --help | head -40
