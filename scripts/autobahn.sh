#!/usr/bin/env bash
# Runs the Autobahn|Testsuite client conformance suite against smartico-ws.
#
# usage: scripts/autobahn.sh [--cases "1.*,2.*,..."] [--case-timeout S] [--release] [--keep]
#   --cases    Autobahn case patterns (default: every group, 1-7, 9, 10, 12, 13)
#   --case-timeout  seconds one case may take (default 300: the 12.x/13.x cases take up to
#              ~50 s each on a busy 2-core machine)
#   --release  build smartico-ws in release mode (the default debug build is fast enough: the
#              Python fuzzing server is the bottleneck)
#   --keep     keep the report directory (printed at the end; HTML in index.html)
#
# Starts the fuzzing server on a free loopback port (its embedded web server, port 8080 by
# default, is disabled), runs `smartico-ws autobahn` against it,
# prints counts by result and every case that is not OK / NON-STRICT / INFORMATIONAL, and
# exits non-zero if there is any such case. See docs/conformance.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CASES='1.*,2.*,3.*,4.*,5.*,6.*,7.*,9.*,10.*,12.*,13.*'
CONFIG=debug
KEEP=0
CASE_TIMEOUT=300
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) CASES="$2"; shift 2 ;;
        --case-timeout) CASE_TIMEOUT="$2"; shift 2 ;;
        --release) CONFIG=release; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

source scripts/deps.sh
setup_autobahn

echo "==> building smartico-ws ($CONFIG)"
swift build -c "$CONFIG" --product smartico-ws >/dev/null
BIN="$(swift build -c "$CONFIG" --show-bin-path)/smartico-ws"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/smartico-autobahn.XXXXXX")"
SERVER_PID=""
cleanup() {
    # SIGTERM, then SIGKILL after 3 s: the fuzzing server does not always exit on SIGTERM.
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ "$KEEP" -eq 0 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# A free loopback port (the kernel picks it; the tiny race with other programs is retried below).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_server() {
    PORT="$(free_port)"
    python3 - "$WORK/fuzzingserver.json" "$PORT" "$WORK/reports" "$CASES" <<'PY'
import json, sys
path, port, outdir, cases = sys.argv[1:]
json.dump({"url": "ws://127.0.0.1:%s" % port, "outdir": outdir,
           "cases": [c.strip() for c in cases.split(",") if c.strip()],
           "exclude-cases": [], "exclude-agent-cases": {}}, open(path, "w"))
PY
    "$SMARTICO_AUTOBAHN_PYTHON" Tests/conformance/wstest27.py "$SMARTICO_AUTOBAHN_DIR" \
        -m fuzzingserver -u 0 -s "$WORK/fuzzingserver.json" >"$WORK/fuzzingserver.log" 2>&1 &
    SERVER_PID=$!
    # Wait (at most 30 s) until it accepts connections.
    for _ in $(seq 300); do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then return 1; fi
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

started=0
for attempt in 1 2 3; do
    if start_server; then started=1; break; fi
    echo "fuzzing server did not start on port $PORT (attempt $attempt):" >&2
    tail -5 "$WORK/fuzzingserver.log" >&2
    kill "$SERVER_PID" 2>/dev/null || true
done
[ "$started" -eq 1 ] || { echo "error: cannot start the Autobahn fuzzing server" >&2; exit 1; }

AGENT="smartico-ws"
echo "==> fuzzing server on ws://127.0.0.1:$PORT (cases: $CASES); reports in $WORK/reports"
START=$(date +%s)
set +e
"$BIN" autobahn "ws://127.0.0.1:$PORT" --agent "$AGENT" --case-timeout "$CASE_TIMEOUT"
CLIENT_STATUS=$?
set -e
END=$(date +%s)
echo "==> client finished with status $CLIENT_STATUS in $((END - START)) s"

if [ ! -f "$WORK/reports/index.json" ]; then
    echo "error: no report was written ($WORK/reports/index.json); fuzzing server log:" >&2
    tail -20 "$WORK/fuzzingserver.log" >&2
    exit 1
fi
COUNT="$(grep -o 'will run [0-9]* test cases' "$WORK/fuzzingserver.log" | grep -o '[0-9]*' || echo 0)"
set +e
python3 Tests/conformance/report.py "$WORK/reports" "$AGENT" "$COUNT"
REPORT_STATUS=$?
set -e
if [ "$KEEP" -eq 1 ]; then echo "==> report kept in $WORK/reports (index.html)"; fi
if [ "$REPORT_STATUS" -ne 0 ] || [ "$CLIENT_STATUS" -ne 0 ]; then exit 1; fi
echo "==> all $COUNT cases passed (OK, NON-STRICT or INFORMATIONAL)"
