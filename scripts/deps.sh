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
# Node.js (18 or newer) runs the Node client's tests; Debian's nodejs when none is on PATH.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
# smartico-wrapper (Wrapper/): GTK 4's and WebKitGTK 6.0's headers to build it; an X server
# (xvfb) and a Wayland compositor (weston, headless), a session bus (dbus-x11, which brings the
# daemon and dbus-launch), xdotool and ImageMagick for its tests on a screen;
# desktop-file-validate for its desktop entry
# (scripts/package-wrapper.sh, scripts/check-package-wrapper.sh).
need_wrapper=()
for pkg in libwebkitgtk-6.0-dev libgtk-4-dev xvfb weston xdotool imagemagick dbus-x11 desktop-file-utils; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_wrapper+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ] || [ ${#need_wrapper[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    # WebKitGTK 6.0 is in Debian 12 and Ubuntu 23.04 and later. Where the distribution has none,
    # the daemon's packages are installed alone: the daemon needs none of the wrapper's.
    if [ ${#need_wrapper[@]} -gt 0 ]; then
        if apt-cache show libwebkitgtk-6.0-dev >/dev/null 2>&1; then
            need_apt+=("${need_wrapper[@]}")
        else
            echo "==> NOT installing what smartico-wrapper needs (${need_wrapper[*]}): this distribution has no libwebkitgtk-6.0-dev; the wrapper cannot be built here"
        fi
    fi
    if [ ${#need_apt[@]} -gt 0 ]; then
        echo "==> installing system packages: ${need_apt[*]}"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
    fi
fi

if ! command -v swift >/dev/null 2>&1; then
    if [ -x /opt/swift/usr/bin/swift ]; then export PATH="/opt/swift/usr/bin:$PATH"; else
        echo "error: the Swift toolchain (6.0 or newer) is not on PATH" >&2; exit 1
    fi
fi

# Python test peers (an independent WebSocket implementation) live in a local venv.
setup_python_venv() {
    local venv="$ROOT/.venv-test"
    # Re-installed when a package of Tests/python-requirements.txt is missing (one added since
    # the venv was made).
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import websockets, prometheus_client' 2>/dev/null; then
        echo "==> creating the Python test environment in .venv-test"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/Tests/python-requirements.txt"
    fi
    export SMARTICO_TEST_PYTHON="$venv/bin/python"
}

# Autobahn|Testsuite (the independent WebSocket conformance suite) is a Python 2.7
# program. The machine image ships CPython 2.7 under pyenv; find it and install the
# suite into a local folder.
setup_autobahn() {
    local dir="$ROOT/.venv-autobahn"
    local py=""
    for cand in python2.7 python2 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/2.7*/bin/python2.7; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; assert sys.version_info[:2] == (2, 7)' 2>/dev/null; then
            py="$(command -v "$cand")"; break
        fi
    done
    if [ -z "$py" ]; then
        echo "error: the conformance tests need CPython 2.7 (Autobahn|Testsuite is a Python 2 program); none found" >&2
        return 1
    fi
    if [ ! -f "$dir/.installed" ]; then
        echo "==> installing Autobahn|Testsuite into .venv-autobahn"
        rm -rf "$dir"
        "$py" -m pip install -q --disable-pip-version-check --target "$dir" autobahntestsuite==25.10.1 2>&1 | grep -v DEPRECATION || true
        "$py" -c "import site; site.addsitedir('$dir'); import autobahntestsuite.wstest" >/dev/null
        touch "$dir/.installed"
    fi
    export SMARTICO_AUTOBAHN_PYTHON="$py"
    export SMARTICO_AUTOBAHN_DIR="$dir"
}
