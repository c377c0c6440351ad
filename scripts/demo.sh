#!/usr/bin/env bash
# The product's main job on a fresh Debian/Ubuntu machine: builds smarticod and runs it
# against the built-in simulator (smartico-sim), and shows what a local app would see.
#
#   1. starts smartico-sim, which checks IDENTIFY hashes and pushes an engagement, a
#      mini-game, a deep link and a props change in turn every 1.5 s;
#   2. starts smarticod with a generated config (hash from user.hash_command);
#   3. identifies a demo user with smarticoctl and follows the events with `smarticoctl tail`;
#   4. restarts the simulator mid-way: the reconnect (backoff, INIT, IDENTIFY) shows in the tail;
#   5. stops everything cleanly (SIGTERM; the daemon exits 0).
#
# Everything lives in a temporary directory removed at the end; nothing is installed
# besides the system packages of scripts/deps.sh. DEMO_SECONDS sets the length (default 24).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
echo "==> building (release)"
swift build -c release
BIN="$(swift build -c release --show-bin-path)"
SECONDS_TOTAL="${DEMO_SECONDS:-24}"

work="$(mktemp -d /tmp/smarticod-demo.XXXXXX)"
sim=""; daemon=""; tailer=""; wrapper=""
cleanup() {
    for pid in ${wrapper:-} $tailer $daemon $sim; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

SALT="demo-salt"
start_sim() {  # $1: port (0 = any)
    "$BIN/smartico-sim" --port "$1" --hash-salt "$SALT" --ping-interval 10s \
        --emit-every 1500ms --emit-kinds engagement,show_spin,deeplink,props \
        >"$work/sim.out" 2>>"$work/sim.log" &
    sim=$!
    for _ in $(seq 1 100); do [ "$(wc -l <"$work/sim.out")" -ge 3 ] && return 0; sleep 0.1; done
    echo "smartico-sim did not start; its log:" >&2; cat "$work/sim.log" >&2; exit 1
}

echo
echo "==> starting smartico-sim (a local Smartico server)"
start_sim 0
port="$(sed -n 1p "$work/sim.out")"
url="$(sed -n 2p "$work/sim.out")"
echo "    $url"

# The hash Smartico expects: md5(lower(user:salt:validity_ms)):validity_ms. A real
# deployment asks its backend for it; here a small script plays the backend.
cat >"$work/hash.sh" <<EOF
#!/bin/sh
validity=\$(( \$(date +%s) * 1000 + 3600000 ))
digest=\$(printf '%s' "\$(printf '%s:$SALT:%s' "\$SMARTICO_EXT_USER_ID" "\$validity" | tr '[:upper:]' '[:lower:]')" | md5sum | cut -d' ' -f1)
echo "\$digest:\$validity"
EOF
chmod +x "$work/hash.sh"
cat >"$work/config.json" <<EOF
{
  "server": {"url": "$url", "label_key": "00000000-0000-0000-0000-000000000000-2"},
  "user": {"hash_command": ["$work/hash.sh"]},
  "session": {"reconnect": {"initial_ms": 500, "max_ms": 4000, "multiplier": 2.0}},
  "socket": {"path": "$work/smarticod.sock", "mode": "0600"},
  "state_dir": "$work/state",
  "log": {"level": "notice"}
}
EOF
mkdir -p -m 0700 "$work/state"   # the daemon refuses a state_dir others may write
export SMARTICOD_SOCKET="$work/smarticod.sock"

echo
echo "==> smarticod --config $work/config.json   (its log: $work/smarticod.log)"
"$BIN/smarticod" --config "$work/config.json" 2>"$work/smarticod.log" &
daemon=$!
for _ in $(seq 1 100); do [ -S "$SMARTICOD_SOCKET" ] && break; sleep 0.1; done
[ -S "$SMARTICOD_SOCKET" ] || { echo "smarticod did not open its socket; its log:" >&2; cat "$work/smarticod.log" >&2; exit 1; }

# With a display (and WebKitGTK 6.0), smartico-wrapper shows the popups, mini-games and the
# gamification widget on it while the events scroll by.
wrapper=""
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && pkg-config --exists webkitgtk-6.0 gtk4; then
    echo
    echo "==> building and starting smartico-wrapper on $DISPLAY$([ -n "${WAYLAND_DISPLAY:-}" ] && echo " $WAYLAND_DISPLAY")"
    swift build -c release --package-path Wrapper --product smartico-wrapper
    "$(swift build -c release --package-path Wrapper --show-bin-path)/smartico-wrapper" \
        --socket "$SMARTICOD_SOCKET" >"$work/wrapper.log" 2>&1 &
    wrapper=$!
else
    echo
    echo "==> no display: smartico-wrapper not started (run this from a desktop session to see the popups)"
fi

echo
echo "==> smarticoctl identify demo-user"
"$BIN/smarticoctl" identify demo-user

echo
echo "==> smarticoctl tail   (for ${SECONDS_TOTAL} s; the simulator restarts half-way)"
"$BIN/smarticoctl" tail --duration "$SECONDS_TOTAL" &
tailer=$!
sleep $(( SECONDS_TOTAL / 2 ))
echo "--- restarting smartico-sim on port $port ---"
kill "$sim"; wait "$sim" 2>/dev/null || true
sleep 1
start_sim "$port"
wait "$tailer" || true
tailer=""

echo
echo "==> smarticoctl status"
"$BIN/smarticoctl" status

echo
echo "==> stopping smarticod (SIGTERM)"
kill -TERM "$daemon"
status=0; wait "$daemon" || status=$?
daemon=""
echo "    smarticod exited with $status"
kill "$sim"; wait "$sim" 2>/dev/null || true
sim=""
echo "==> done"
[ "$status" -eq 0 ]
