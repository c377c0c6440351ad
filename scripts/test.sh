#!/usr/bin/env bash
# The whole test suite, from a fresh Debian/Ubuntu machine: installs what it
# needs, builds, and runs every test target.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
setup_python_venv
setup_autobahn

echo "==> building"
swift build --build-tests
echo "==> testing"
swift test --skip-build
