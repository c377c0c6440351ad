#!/usr/bin/env bash
# The whole Swift test suite under a sanitizer: `scripts/sanitize.sh address` (AddressSanitizer
# with LeakSanitizer) or `scripts/sanitize.sh thread` (ThreadSanitizer). Extra arguments go to
# `swift test` (e.g. `--filter SocketAPIServerTests` to rerun one suite).
#
# Builds everything (tests, smarticod, smarticoctl, smartico-sim, smartico-ws) sanitized in its
# own build path (.build-asan / .build-tsan; .build stays as it is), runs the suite the way
# scripts/test.sh does (one test at a time), niced, and fails when a test fails OR any process
# wrote a sanitizer report: the test process and every child it spawns write their reports to
# files under the run's log directory (log_path=), because many tests discard or delete a child's
# stderr. The tests hand these settings on to the package's executables they start
# (Tests/SmarticoTestSupport/SanitizerEnvironment.swift).
#
# Not part of CI (scripts/test.sh): the sanitized suite takes far longer than the CI budget
# (docs/reliability.md has the measured times). Needs what scripts/test.sh installs
# (scripts/deps.sh) for the tests that run Python peers and the Autobahn suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

kind="${1:-}"
case "$kind" in
    address) short=asan ;;
    thread) short=tsan ;;
    *) echo "usage: $0 address|thread [swift test arguments]" >&2; exit 64 ;;
esac
shift

BUILD_PATH="$ROOT/.build-$short"
RUN_DIR="$BUILD_PATH/sanitizer-logs/$(date -u +%Y%m%dT%H%M%SZ)"
REPORTS="$RUN_DIR/reports"
mkdir -p "$REPORTS"
# Children started under another uid (setpriv in EnginePeerLimitsTests) write here too.
chmod 1777 "$REPORTS"
SUPPRESSIONS="$ROOT/Tests/sanitizers"

# The Python environments the suite's peers and the Autobahn run need, and SMARTICO_TEST_PYTHON
# (as scripts/test.sh; quick when they exist).
source scripts/deps.sh
setup_python_venv
setup_autobahn

echo "==> building with --sanitize=$kind in $BUILD_PATH"
start=$(date +%s)
nice -n 10 swift build --build-tests --build-path "$BUILD_PATH" --sanitize="$kind"
echo "==> build: $(( $(date +%s) - start )) s"

# The tests find the executables beside the test bundle first (BuiltExecutable.find); make sure
# the sanitized ones are there, so that no test falls back to an unsanitized .build/debug binary.
bin="$(swift build --build-path "$BUILD_PATH" --sanitize="$kind" --show-bin-path)"
for exe in smarticod smarticoctl smartico-sim smartico-ws; do
    # grep -c, not -q: -q stops reading early and nm's SIGPIPE would fail the pipe (pipefail).
    if ! nm "$bin/$exe" 2>/dev/null | grep -c " T __${short}_init$" >/dev/null; then
        echo "sanitize.sh: $bin/$exe is missing or not built with --sanitize=$kind" >&2
        exit 1
    fi
done

symbolizer="$(command -v llvm-symbolizer || true)"
common="log_path=$REPORTS/$short:symbolize=1"
[ -n "$symbolizer" ] && common="$common:external_symbolizer_path=$symbolizer"
export SMARTICO_SANITIZER_RUN="$kind"
# The one timeout knob (SanitizerEnvironment.timeScale): only the throughput waits that a
# sanitized run was measured to need use it (docs/reliability.md, "Sanitizers"). address: from
# the measured ASan runs; thread: not measured yet (TSan is usually slower than ASan).
if [ "$kind" = address ]; then export SMARTICO_SANITIZER_TIME_SCALE=4; else export SMARTICO_SANITIZER_TIME_SCALE=10; fi
# Swift's own backtracer would catch the crash signal before the sanitizer's report is written.
export SWIFT_BACKTRACE=enable=no
if [ "$kind" = address ]; then
    export ASAN_OPTIONS="$common:detect_leaks=1:abort_on_error=0"
    export LSAN_OPTIONS="suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=1"
else
    export TSAN_OPTIONS="$common:halt_on_error=0:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp"
fi

echo "==> testing under $kind sanitizer; reports go to $REPORTS"
start=$(date +%s)
set +e
nice -n 10 swift test --skip-build --no-parallel --build-path "$BUILD_PATH" --sanitize="$kind" "$@" \
    2>&1 | tee "$RUN_DIR/test.log"
status=${PIPESTATUS[0]}
set -e
echo "==> tests: $(( $(date +%s) - start )) s, swift test exited $status"

shopt -s nullglob
# A report: a sanitizer's ERROR/WARNING line. Files with nothing but LeakSanitizer's table of
# suppressions used (print_suppressions) are listed, not counted.
pattern='(ERROR|WARNING): (AddressSanitizer|LeakSanitizer|ThreadSanitizer|UndefinedBehaviorSanitizer)'
reports=()
for r in "$REPORTS"/*; do
    if grep -Eq "$pattern" "$r"; then reports+=("$r"); else echo "==> no report, only: $(head -c 300 "$r")"; fi
done
if [ ${#reports[@]} -gt 0 ]; then
    echo "==> ${#reports[@]} sanitizer report file(s) (one per process that reported):"
    for r in "${reports[@]}"; do
        echo "---- $r"
        head -n 60 "$r"
    done
fi
echo "==> log: $RUN_DIR/test.log"
if [ "$status" -ne 0 ] || [ ${#reports[@]} -gt 0 ]; then
    echo "==> FAILED: swift test exited $status, ${#reports[@]} process(es) with a sanitizer report" >&2
    exit 1
fi
echo "==> clean: the suite passed and no process wrote a sanitizer report"
