#!/usr/bin/env bash
# The whole test suite, from a fresh Debian/Ubuntu machine: installs what it
# needs, builds, runs every test target, fuzzes each parser for a minute, then builds the release
# package and checks it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
setup_python_venv
setup_autobahn

echo "==> building"
swift build --build-tests
# Two builds the suite does not use, the fuzz targets (Fuzz/) and the package's
# release binaries, compile meanwhile at idle CPU priority (SCHED_IDLE: they get
# only what the tests leave, and the tests' waits are unaffected), so they cost little wall time.
BG_LOGS="$(mktemp -d)"
setsid chrt --idle 0 bash scripts/fuzz.sh --build-only >"$BG_LOGS/fuzz-build.log" 2>&1 &
fuzz_build=$!
setsid chrt --idle 0 bash scripts/package.sh --build-only >"$BG_LOGS/release-build.log" 2>&1 &
release_build=$!
# smartico-wrapper (Wrapper/, GTK 4 + WebKitGTK 6.0) and its tests, a package of its own.
wrapper_build=0
if pkg-config --exists webkitgtk-6.0 gtk4; then
    setsid chrt --idle 0 swift build --package-path Wrapper --build-tests >"$BG_LOGS/wrapper-build.log" 2>&1 &
    wrapper_build=$!
fi
# On a failure before they are done: stop them (each is a session of its own, its compilers included).
trap 'kill -- -$fuzz_build -$release_build 2>/dev/null || true; [ "$wrapper_build" -eq 0 ] || kill -- -$wrapper_build 2>/dev/null || true' EXIT
# Waits for a background build; its log on failure.
finish_build() {
    local pid="$1" log="$2"
    if ! wait "$pid"; then
        echo "error: a background build failed ($log):" >&2
        tail -n 60 "$log" >&2
        exit 1
    fi
    tail -n 1 "$log"
}
echo "==> testing"
# One test at a time: the suite holds CPU-heavy tests (16 MiB echoes, 1,000-peer servers,
# the Autobahn run with its Python 2 server) whose bounded waits were sized for a loaded
# machine, not for all of them at once on 2 cores in a debug build; run together they
# starved each other (15 CPU-minutes of contention) until waits expired.
# Every test but the Autobahn run, which goes after the release build (below).
swift test --skip-build --no-parallel --skip ConformanceTests
echo "==> fuzzing: every libFuzzer target of Fuzz/ for 60 s, 2 at a time (scripts/fuzz.sh; docs/reliability.md)"
finish_build "$fuzz_build" "$BG_LOGS/fuzz-build.log"
bash scripts/fuzz.sh --seconds 60 --jobs 2 --no-build
echo "==> testing the Python client (clients/python) against the built daemon and simulator"
"$SMARTICO_TEST_PYTHON" -m pip install -q --disable-pip-version-check ./clients/python
SMARTICOD_BIN="$ROOT/.build/debug/smarticod" SMARTICO_SIM_BIN="$ROOT/.build/debug/smartico-sim" \
    "$SMARTICO_TEST_PYTHON" -m unittest discover -s clients/python/tests -v
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node_major" -ge 18 ]; then
    echo "==> testing the Node.js client (clients/node) against the built daemon and simulator"
    SMARTICOD_BIN="$ROOT/.build/debug/smarticod" SMARTICO_SIM_BIN="$ROOT/.build/debug/smartico-sim" \
        node --test clients/node/test/*.test.js
else
    # node:test needs Node 18; older distributions (Ubuntu 22.04's nodejs 12) cannot run them.
    echo "==> NOT testing the Node.js client: node $(node --version 2>/dev/null || echo missing) is older than 18"
fi
if [ "$wrapper_build" -ne 0 ]; then
    echo "==> waiting for smartico-wrapper's build (Wrapper/.build)"
    finish_build "$wrapper_build" "$BG_LOGS/wrapper-build.log"
    echo "==> testing smartico-wrapper's logic (SmarticoWrapperCore, no display)"
    swift test --package-path Wrapper --skip-build
    echo "==> testing smartico-wrapper on a screen (Xvfb, xdotool; the real daemon, simulator and wrapper)"
    SMARTICOD_BIN="$ROOT/.build/debug/smarticod" SMARTICO_SIM_BIN="$ROOT/.build/debug/smartico-sim" \
        SMARTICO_WRAPPER_BIN="$ROOT/Wrapper/.build/debug/smartico-wrapper" \
        "$SMARTICO_TEST_PYTHON" -m unittest discover -s Wrapper/tests -v
else
    echo "==> NOT testing smartico-wrapper: this system has no WebKitGTK 6.0 (libwebkitgtk-6.0-dev)"
fi
echo "==> waiting for the release build (.build-release)"
finish_build "$release_build" "$BG_LOGS/release-build.log"
# The Autobahn conformance run (ConformanceTests) against the release smartico-ws, the build users
# get: the debug client took about as much CPU as the Python fuzzing server and made this the
# longest test by far (docs/conformance.md has the figures). Same cases, same verdicts required.
echo "==> Autobahn conformance (ConformanceTests) against the release smartico-ws"
# (An assignment of its own, so that a failure of package.sh stops the script here.)
release_bin="$(bash scripts/package.sh --print-bin-path)"
SMARTICO_WS_BINARY="$release_bin/smartico-ws" swift test --skip-build --no-parallel --filter ConformanceTests
echo "==> packaging (.build-release)"
bash scripts/package.sh
echo "==> checking the package"
bash scripts/check-package.sh
# smartico-wrapper's package (Wrapper/.build-release); only where WebKitGTK 6.0 exists (deps.sh).
if pkg-config --exists webkitgtk-6.0 gtk4; then
    echo "==> packaging smartico-wrapper (Wrapper/.build-release)"
    bash scripts/package-wrapper.sh
    echo "==> checking the wrapper's package"
    bash scripts/check-package-wrapper.sh
else
    echo "==> NOT packaging smartico-wrapper: no WebKitGTK 6.0 here"
fi
