#!/usr/bin/env bash
# The product's main job on a fresh Debian/Ubuntu machine: builds smarticod and
# runs it against the built-in simulator, showing events as they arrive.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
echo "==> building"
swift build -c release
BIN="$(swift build -c release --show-bin-path)"
"$BIN/smarticod" --help
