#!/usr/bin/env bash
# Installs what building and testing smarticod needs on Debian/Ubuntu.
# Sourced by scripts/test.sh and scripts/demo.sh; safe to run again.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
for pkg in libssl-dev zlib1g-dev libsqlite3-dev pkg-config openssl python3-venv; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "==> installing system packages: ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v swift >/dev/null 2>&1; then
    if [ -x /opt/swift/usr/bin/swift ]; then export PATH="/opt/swift/usr/bin:$PATH"; else
        echo "error: the Swift toolchain (6.0 or newer) is not on PATH" >&2; exit 1
    fi
fi

# Python test peers (an independent WebSocket implementation) live in a local venv.
setup_python_venv() {
    local venv="$ROOT/.venv-test"
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import websockets' 2>/dev/null; then
        echo "==> creating the Python test environment in .venv-test"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/Tests/python-requirements.txt"
    fi
    export SMARTICO_TEST_PYTHON="$venv/bin/python"
}
