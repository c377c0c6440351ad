#!/usr/bin/env bash
# Differential fuzzing of Transport's DeflateDecoder against zlib, with libFuzzer and
# AddressSanitizer (docs/transport.md, "Inflate"). Not part of the test suite: run it after
# changing the decoder.   usage: scripts/fuzz-inflate.sh [seconds, default 300]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-300}"
OUT="${TMPDIR:-/tmp}/smartico-fuzz-inflate"
mkdir -p "$OUT/corpus"
PATH="$PATH:/opt/swift/usr/bin"
swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name FuzzInflate \
    -I "$ROOT/scripts/fuzz" \
    "$ROOT/Sources/Transport/WebSocket/DeflateDecoder.swift" "$ROOT/scripts/fuzz/inflate.swift" \
    -o "$OUT/fuzz-inflate"
# Seeds: real permessage-deflate streams (python's zlib, raw deflate, sync flush, tail stripped).
python3 - "$OUT/corpus" <<'PY'
import os, random, sys, zlib
out = sys.argv[1]
random.seed(7)
texts = [b'{"cid":110,"engagement_uid":"%032x","template_html":"' % random.getrandbits(128) + b'x' * n + b'"}' for n in (0, 50, 1651)]
texts += [bytes(random.getrandbits(8) for _ in range(300)), b'spin the wheel ' * 40, b'', b'a']
for i, (level, strategy, wbits) in enumerate([(6, zlib.Z_DEFAULT_STRATEGY, 15), (9, zlib.Z_FIXED, 15), (1, zlib.Z_HUFFMAN_ONLY, 9),
                                              (0, zlib.Z_DEFAULT_STRATEGY, 12), (6, zlib.Z_RLE, 10)]):
    c = zlib.compressobj(level, zlib.DEFLATED, -wbits, 8, strategy)
    parts = []
    for t in random.sample(texts, 4):
        m = c.compress(t) + c.flush(zlib.Z_SYNC_FLUSH)
        parts.append(m[:-4] if m.endswith(b'\x00\x00\xff\xff') else m)
    with open(os.path.join(out, 'seed%d' % i), 'wb') as f:
        f.write(bytes([wbits - 8]) + b'\xa5\x5a'.join(parts))
PY
# A disagreement stops the run with "Fatal error: DeflateDecoder and zlib disagree" and a crash-*
# file holding the input. Swift's own backtracer is off: under ASan it hangs on the crash.
SWIFT_BACKTRACE=enable=no "$OUT/fuzz-inflate" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$OUT/" "$OUT/corpus" 2>&1 | grep -v "^#\|^NEW\|^REDUCE\|^pulse\|^\s*\"" | tail -25
