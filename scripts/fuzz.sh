#!/usr/bin/env bash
# Builds the Fuzz package (libFuzzer + AddressSanitizer, in Fuzz/.build) and runs its targets for N
# seconds each, J at a time (docs/reliability.md, "Fuzzing").
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--no-build | --build-only] [TARGET...]
#
# TARGET: fuzz-frames fuzz-handshake fuzz-http-response fuzz-json-protocol fuzz-socket-request
# fuzz-config fuzz-wrapper (default: all). Each run reads the committed seeds (Fuzz/Corpus/TARGET) and writes
# the inputs it finds to a scratch corpus ($OUT/corpus/TARGET), never to the committed one; crash,
# leak and timeout reproducers go to $OUT/artifacts/TARGET/; OUT is $FUZZ_OUT, else
# ${TMPDIR:-/tmp}/smarticod-fuzz. Prints each target's executions and coverage (libFuzzer's final
# stats); exits 1 when any target crashed, leaked or timed out, naming the reproducer.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL=(fuzz-frames fuzz-handshake fuzz-http-response fuzz-json-protocol fuzz-socket-request fuzz-config fuzz-wrapper)
SECONDS_EACH=60
JOBS=1
BUILD=1
RUN=1
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_EACH="$2"; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --build-only) RUN=0; shift ;;
        -h|--help) sed -n 2,12p "$0"; exit 0 ;;
        fuzz-*) TARGETS+=("$1"); shift ;;
        *) echo "fuzz.sh: unknown argument \"$1\" (targets: ${ALL[*]})" >&2; exit 2 ;;
    esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
    [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (targets: ${ALL[*]})" >&2; exit 2; }
done
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
OUT="${FUZZ_OUT:-${TMPDIR:-/tmp}/smarticod-fuzz}"
BIN="$ROOT/Fuzz/.build/release"

if [ "$BUILD" = 1 ]; then
    echo "==> building the fuzz targets (Fuzz/.build, -sanitize=fuzzer,address)"
    start=$(date +%s)
    (cd "$ROOT/Fuzz" && swift build -c release --scratch-path .build \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing 2>&1 \
        | grep -v "Cannot export local symbol '__asan_extra_spill_area'")
    echo "    built in $(( $(date +%s) - start )) s"
fi
[ "$RUN" = 1 ] || exit 0

# One target: libFuzzer for SECONDS_EACH seconds. Swift's backtracer is off (under ASan it hangs
# on a crash); -timeout: one input running 25 s is a failure (a hang), with its reproducer.
run_one() {
    local t="$1"
    mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t"
    local status=0
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
        "$BIN/$t" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -max_len=8192 -timeout=25 \
        -rss_limit_mb=2048 -artifact_prefix="$OUT/artifacts/$t/" \
        "$OUT/corpus/$t" "$ROOT/Fuzz/Corpus/$t" >"$OUT/$t.log" 2>&1 || status=$?
    echo "$status" >"$OUT/$t.status"
}

rm -f "$OUT"/*.status "$OUT"/*.log
mkdir -p "$OUT"
echo "==> fuzzing ${#TARGETS[@]} target(s), ${SECONDS_EACH} s each, ${JOBS} at a time (logs, corpus and artifacts in $OUT)"
running=0
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

failed=0
printf '%-22s %12s %8s %8s %8s %s\n' target executions exec/s cov ft result
for t in "${TARGETS[@]}"; do
    log="$OUT/$t.log"
    status="$(cat "$OUT/$t.status" 2>/dev/null || echo 99)"
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
    last="$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)"
    cov="$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")"
    ft="$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")"
    result=ok
    artifact="$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //' || true)"
    if [ "$status" != 0 ] || [ -n "$artifact" ]; then
        failed=1
        kind="$(grep -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer): [a-z -]+|invariant broken: .*|Fatal error: .*' "$log" | head -1 || true)"
        result="FAILED (exit $status): ${kind:-see $log}; reproducer: ${artifact:-none written}"
    fi
    printf '%-22s %12s %8s %8s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ "$failed" != 0 ]; then
    echo "fuzz.sh: a target failed; rerun its reproducer with: SWIFT_BACKTRACE=enable=no $BIN/TARGET REPRODUCER" >&2
    exit 1
fi
