#!/usr/bin/env bash
# Checks what scripts/package-wrapper.sh made (dist/smartico-wrapper_VERSION_ARCH.deb): unpacks it
# with `dpkg-deb -x` into a temporary root and checks it from there: control, the file list, the
# binary (ldd, --version, --help, exit codes), the user unit (systemd-analyze --user verify), the
# desktop entry (desktop-file-validate), the man page (groff/man warnings, every option and key
# named); then starts the packaged binary on a virtual display (Xvfb) with a session bus, and
# installs and removes the .deb with dpkg in a throwaway overlay of this system. Each check prints
# what it checked; the first failure exits 1 with the reason. A check whose tool is missing is
# SKIPPED, saying so (scripts/deps.sh installs them all).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

source scripts/package-lib.sh

VERSION="$(code_version)"
ARCH="$(dpkg --print-architecture)"
NAME="smartico-wrapper_${VERSION}_${ARCH}"
DEB="$ROOT/dist/$NAME.deb"
[ -f "$DEB" ] || fail "$DEB is missing: run scripts/package-wrapper.sh first"

T="$(mktemp -d /tmp/smartico-wrapper-check-package.XXXXXX)"
primary=""
cleanup() {
    if [ -n "$primary" ]; then kill -- "$primary" 2>/dev/null || true; fi
    rm -rf "$T"
}
trap cleanup EXIT
R="$T/root"
dpkg-deb -x "$DEB" "$R"
dpkg-deb -e "$DEB" "$T/DEBIAN"
echo "==> checking $NAME.deb, unpacked with dpkg-deb -x into $R"
W="$R/usr/bin/smartico-wrapper"

echo "--> control"
field() { sed -n "s/^$1: //p" "$T/DEBIAN/control"; }
[ "$(field Package)" = smartico-wrapper ] || fail "control: Package is '$(field Package)', not smartico-wrapper"
[ "$(field Version)" = "$VERSION" ] || fail "control: Version is '$(field Version)', the code's SmarticoVersion.string is '$VERSION'"
[ "$(field Architecture)" = "$ARCH" ] || fail "control: Architecture is '$(field Architecture)', dpkg --print-architecture says '$ARCH'"
depends="$(field Depends)"
for lib in libc6 libgtk-4-1 libwebkitgtk-6.0-4 libglib2.0-0; do
    [[ ",$depends" == *", $lib "* || ",$depends" == *",$lib "* || ",$depends," == *", $lib,"* ]] || fail "control: Depends does not name $lib: $depends"
done
[ "$(field Recommends)" = smarticod ] || fail "control: Recommends is '$(field Recommends)', not smarticod"
ok "Package smartico-wrapper, Version $VERSION, Architecture $ARCH, Recommends smarticod; Depends: $depends"
extra="$(ls "$T/DEBIAN" | grep -v -x -e control -e md5sums || true)"
[ -z "$extra" ] || fail "DEBIAN/ holds more than control and md5sums (no conffile or maintainer script is expected): $extra"
(cd "$R" && md5sum --quiet -c "$T/DEBIAN/md5sums") || fail "md5sums does not match the files (above)"
ok "DEBIAN/: control and md5sums only; md5sums matches every file"

echo "--> files"
expected="usr/bin/smartico-wrapper
usr/lib/smartico-wrapper/libsmartico-wrapper-web-extension.so
usr/lib/systemd/user/smartico-wrapper.service
usr/share/applications/smartico-wrapper.desktop
usr/share/doc/smartico-wrapper/copyright
usr/share/man/man1/smartico-wrapper.1.gz"
actual="$(cd "$R" && find . -type f -printf '%P\n' | LC_ALL=C sort)"
[ "$actual" = "$expected" ] || fail "the package's files are not the expected ones:
$(diff <(echo "$expected") <(echo "$actual") || true)"
for f in $expected; do [ -s "$R/$f" ] || fail "/$f is empty"; done
modes="$(cd "$R" && stat -c '%a %n' $expected)"
[ "$(head -1 <<<"$modes")" = "755 usr/bin/smartico-wrapper" ] || fail "modes: $modes"
[ "$(tail -n +2 <<<"$modes" | grep -vc '^644 ')" = 0 ] || fail "a data file is not 0644: $modes"
owners="$(dpkg-deb --fsys-tarfile "$DEB" | tar -tv --numeric-owner | awk '{print $2}' | sort -u)"
[ "$owners" = "0/0" ] || fail "entries not owned by root: $owners"
ok "exactly $(wc -l <<<"$expected") files: $(tr '\n' ' ' <<<"$expected")(binary 0755, the rest 0644, all root:root)"

echo "--> the binary"
out="$(ldd "$W")" || fail "ldd /usr/bin/smartico-wrapper failed: $out"
if grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime|/swift/' <<<"$out"; then
    fail "/usr/bin/smartico-wrapper links a Swift toolchain library (above): it must be built with --static-swift-stdlib"
fi
if grep 'not found' <<<"$out"; then fail "/usr/bin/smartico-wrapper needs a library this machine does not have (above)"; fi
if readelf -d "$W" | grep -E 'RPATH|RUNPATH'; then fail "/usr/bin/smartico-wrapper has an RPATH/RUNPATH (above); package-wrapper.sh builds with --disable-local-rpath"; fi
if readelf -S "$W" | grep -q ' \.symtab '; then fail "/usr/bin/smartico-wrapper is not stripped (it has a .symtab)"; fi
needed="$(readelf -d "$W" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
for lib in libwebkitgtk-6.0.so.4 libgtk-4.so.1; do
    [[ " $needed" == *" $lib "* ]] || fail "/usr/bin/smartico-wrapper does not link $lib: $needed"
done
ok "no Swift library in ldd ($(wc -l <<<"$out") libraries, all found), no RUNPATH, stripped ($(stat -c %s "$W") bytes); NEEDED: $needed"

echo "--> the web process extension"
E="$R/usr/lib/smartico-wrapper/libsmartico-wrapper-web-extension.so"
ext_needed="$(readelf -d "$E" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
# WebKit loads it into the web process, in its sandbox: nothing of the Swift toolchain may be in it.
if grep -E 'swift|Foundation|dispatch|BlocksRuntime' <<<"$ext_needed"; then fail "the web process extension links a Swift library: $ext_needed"; fi
[[ " $ext_needed" == *" libwebkitgtk-6.0.so.4 "* ]] || fail "the web process extension does not link libwebkitgtk-6.0.so.4: $ext_needed"
if readelf -d "$E" | grep -E 'RPATH|RUNPATH'; then fail "the web process extension has an RPATH/RUNPATH (above)"; fi
if readelf -S "$E" | grep -q ' \.symtab '; then fail "the web process extension is not stripped (it has a .symtab)"; fi
readelf --dyn-syms -W "$E" | grep -q ' FUNC  *GLOBAL  *DEFAULT  *[0-9][0-9]* webkit_web_process_extension_initialize$' ||
    fail "the web process extension does not export webkit_web_process_extension_initialize"
ok "the web process extension exports webkit_web_process_extension_initialize, is stripped, no RUNPATH; NEEDED: $ext_needed"
# --version and --help with nothing of a session: they must not need a display or a bus.
v="$(env -i PATH=/usr/bin:/bin "$W" --version)" || fail "smartico-wrapper --version failed"
[ "$v" = "smartico-wrapper $VERSION" ] || fail "smartico-wrapper --version prints '$v', not 'smartico-wrapper $VERSION'"
help="$(env -i PATH=/usr/bin:/bin "$W" --help)" || fail "smartico-wrapper --help failed"
grep -q '^usage: smartico-wrapper ' <<<"$help" || fail "smartico-wrapper --help does not start with its usage: $help"
ok "--version prints '$v'; --help exits 0 and prints the usage ($(wc -l <<<"$help") lines), without a display"
set +e
env -i PATH=/usr/bin:/bin "$W" --no-such-option >/dev/null 2>"$T/usage.err"; s_usage=$?
printf '{"kiosk": "yes", "no_such_key": 1}' >"$T/bad.json"
env -i PATH=/usr/bin:/bin "$W" --config "$T/bad.json" >/dev/null 2>"$T/config.err"; s_config=$?
env -i PATH=/usr/bin:/bin "$W" --config "$T/missing.json" >/dev/null 2>"$T/missing.err"; s_missing=$?
set -e
[ $s_usage -eq 2 ] || fail "an unknown option gave exit $s_usage, not 2: $(cat "$T/usage.err")"
[ $s_config -eq 78 ] || fail "an invalid --config gave exit $s_config, not 78: $(cat "$T/config.err")"
grep -q '"kiosk" must be true or false' "$T/config.err" && grep -q 'unknown key "no_such_key"' "$T/config.err" ||
    fail "the invalid --config's problems were not both reported: $(cat "$T/config.err")"
[ $s_missing -eq 78 ] || fail "a missing --config gave exit $s_missing, not 78: $(cat "$T/missing.err")"
ok "exit 2 on a usage error; exit 78 on an invalid --config (both problems reported) and on a missing one"

echo "--> the user unit"
unit="$R/usr/lib/systemd/user/smartico-wrapper.service"
setting() { sed -n "s/^$1=//p" "$unit"; }
[ "$(setting PartOf)" = graphical-session.target ] || fail "the unit's PartOf= is '$(setting PartOf)'"
[ "$(setting After)" = graphical-session.target ] || fail "the unit's After= is '$(setting After)'"
[ "$(setting WantedBy)" = graphical-session.target ] || fail "the unit's WantedBy= is '$(setting WantedBy)'"
[ "$(setting Restart)" = on-failure ] || fail "the unit's Restart= is '$(setting Restart)'"
[ "$(setting RestartPreventExitStatus)" = "2 78" ] || fail "the unit's RestartPreventExitStatus= is '$(setting RestartPreventExitStatus)'"
[ "$(setting ExecStart)" = /usr/bin/smartico-wrapper ] || fail "the unit's ExecStart= is '$(setting ExecStart)'"
ok "PartOf=, After=, WantedBy=graphical-session.target; Restart=on-failure but not on 2 or 78; ExecStart=/usr/bin/smartico-wrapper"
if command -v systemd-analyze >/dev/null 2>&1; then
    # Offline (no user manager runs here): --user needs a runtime directory of its own. ExecStart=
    # points at the unpacked binary (verify checks that it exists and is executable), and
    # MANPATH at the unpacked pages, so Documentation=man:smartico-wrapper(1) must be the
    # package's own page.
    mkdir -m 0700 "$T/runtime" "$T/units"
    sed "s#^ExecStart=/usr/bin/smartico-wrapper\$#ExecStart=$W#" "$unit" >"$T/units/smartico-wrapper.service"
    set +e
    XDG_RUNTIME_DIR="$T/runtime" MANPATH="$R/usr/share/man" SYSTEMD_LOG_COLOR=0 \
        systemd-analyze --user verify "$T/units/smartico-wrapper.service" >"$T/verify.out" 2>&1
    status=$?
    set -e
    [ $status -eq 0 ] && [ ! -s "$T/verify.out" ] || fail "systemd-analyze --user verify (exit $status): $(cat "$T/verify.out")"
    ok "systemd-analyze --user verify: no warning (Documentation= resolved to the package's man page)"
else
    skip "the user unit was NOT verified: systemd-analyze is not installed"
fi

echo "--> the desktop entry"
desktop="$R/usr/share/applications/smartico-wrapper.desktop"
if command -v desktop-file-validate >/dev/null 2>&1; then
    out="$(desktop-file-validate "$desktop" 2>&1)" || fail "desktop-file-validate: $out"
    [ -z "$out" ] || fail "desktop-file-validate warns: $out"
    ok "desktop-file-validate: no error, no warning"
else
    skip "the desktop entry was NOT validated: desktop-file-validate is not installed (apt-get install desktop-file-utils)"
fi
for kv in "Type=Application" "Name=Smartico" "Exec=smartico-wrapper --open" "Categories=Game;" "StartupNotify=false" "DBusActivatable=false"; do
    grep -qx -- "$kv" "$desktop" || fail "the desktop entry has no line '$kv'"
done
ok "Type=Application, Name=Smartico, Exec=smartico-wrapper --open (a binary the package installs), Categories=Game;, StartupNotify=false, DBusActivatable=false"

echo "--> the man page"
gz="$R/usr/share/man/man1/smartico-wrapper.1.gz"
gzip -t "$gz" || fail "/usr/share/man/man1/smartico-wrapper.1.gz is not valid gzip"
if zgrep -q '@VERSION@' "$gz"; then fail "the man page still says @VERSION@"; fi
if command -v groff >/dev/null 2>&1; then
    warnings="$(zcat "$gz" | groff -man -Tutf8 -ww -z 2>&1)"
    [ -z "$warnings" ] || fail "groff warns about smartico-wrapper.1: $warnings"
    lines="$(zcat "$gz" | groff -man -Tutf8 2>/dev/null | wc -l)"
    [ "$lines" -gt 100 ] || fail "smartico-wrapper.1 renders to only $lines lines"
    ok "groff -man -Tutf8 -ww: $lines lines, no warning"
else
    skip "the man page was NOT rendered with groff: it is not installed (apt-get install groff-base)"
fi
if command -v man >/dev/null 2>&1; then
    warnings="$(MANWIDTH=80 man --warnings -l "$gz" 2>&1 >/dev/null)"
    [ -z "$warnings" ] || fail "man --warnings -l warns about smartico-wrapper.1: $warnings"
    ok "man --warnings -l: no warning"
fi
# What the page must name, from the code: every option of --help, every key of WrapperConfig, and
# the sections the brief of the page asks for.
python3 - "$gz" "$ROOT/Wrapper/Sources/SmarticoWrapperCore/WrapperConfig.swift" "$help" <<'EOF' || fail "the man page does not document what the code has (above)"
import gzip, re, sys
page = gzip.open(sys.argv[1], "rt").read()
text = re.sub(r"\\f[BIRP]|\\\|", "", page).replace("\\-", "-")
source = open(sys.argv[2]).read()
m = re.search(r"static let keys: Set<String> = \[(.*?)\]", source, re.S)
keys = re.findall(r'"([a-z_]+)"', m.group(1)) if m else []
missing = [] if keys else ["no keys found in WrapperConfig.swift (static let keys)"]
for key in keys:
    # An entry: a .TP whose tag line names the key (".BR widget_width \", \" widget_height ...").
    if not re.search(r"^\.TP\n\.BR? [^\n]*(?<![\w.])" + re.escape(key) + r"(?![\w.])", text, re.M):
        missing.append(f"the key {key} of WrapperConfig has no entry (a .TP tag naming it)")
for flag in sorted(set(re.findall(r"(--[a-z][\w-]*|-h\b)", sys.argv[3]))):
    if not re.search(re.escape(flag) + r"(?![\w-])", text):
        missing.append(f"the option {flag} of --help is not named")
for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "CONFIGURATION", "PERMISSIONS", "SECURITY", "EXIT STATUS", "FILES", "SEE ALSO"]:
    if not re.search(r'^\.SH "?' + section + r'"?$', text, re.M):
        missing.append(f"no {section} section")
for status in ["0", "1", "2", "78"]:
    if not re.search(r"^\.TP\n\.B " + status + r"$", text, re.M):
        missing.append(f"EXIT STATUS does not list {status}")
for m in missing:
    print("  " + m)
print(f"  {len(keys)} keys, every option of --help, 10 sections, exit statuses 0 1 2 78" if not missing else "", end="")
sys.exit(1 if missing else 0)
EOF
echo
ok "the man page names every key of WrapperConfig, every option of --help, and has the sections and exit statuses"

echo "--> the packaged binary on a virtual display (Xvfb, a session bus)"
if ! command -v xvfb-run >/dev/null 2>&1 || ! command -v dbus-run-session >/dev/null 2>&1; then
    skip "the binary was NOT started: xvfb-run or dbus-run-session is missing (apt-get install xvfb dbus-x11)"
else
    # The first instance (no daemon at the socket: it must keep running and retry); a second
    # invocation with --open hands over to it over the session bus and exits 0; SIGTERM stops
    # the first with exit 0.
    cat >"$T/session.sh" <<'EOF'
set -u
W="$1"; T="$2"
"$W" --socket "$T/no-daemon.sock" --log-level debug >"$T/primary.log" 2>&1 &
pid=$!
echo "$pid" >"$T/primary.pid"
for _ in $(seq 1 300); do
    grep -q 'started; smarticod at' "$T/primary.log" && break
    kill -0 "$pid" 2>/dev/null || { echo "the first instance exited before it started"; exit 11; }
    sleep 0.1
done
grep -q 'started; smarticod at' "$T/primary.log" || { echo "the first instance did not log 'started' in 30 s"; exit 12; }
timeout 30 "$W" --open dp:gf_missions >"$T/second.log" 2>&1
second=$?
[ $second -eq 0 ] || { echo "the second invocation (--open) exited $second"; cat "$T/second.log"; exit 13; }
for _ in $(seq 1 100); do
    grep -q -- '--open: waiting for the gamification URL' "$T/primary.log" && break
    sleep 0.1
done
grep -q -- '--open: waiting for the gamification URL' "$T/primary.log" || { echo "the first instance did not get the second's --open"; exit 14; }
kill -0 "$pid" 2>/dev/null || { echo "the first instance died"; exit 15; }
kill -TERM "$pid"
wait "$pid"
status=$?
[ $status -eq 0 ] || { echo "SIGTERM: the first instance exited $status"; exit 16; }
exit 0
EOF
    set +e
    timeout 120 xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$T/session.sh" "$W" "$T" >"$T/session.out" 2>&1
    status=$?
    set -e
    primary="$(cat "$T/primary.pid" 2>/dev/null || true)"
    if [ $status -ne 0 ]; then
        cat "$T/session.out" >&2
        echo "--- the first instance's log:" >&2
        cat "$T/primary.log" >&2 2>/dev/null || true
        fail "the packaged binary on Xvfb (exit $status, above)"
    fi
    primary=""
    grep -q 'lost smarticod' "$T/primary.log" || fail "the first instance did not say that the daemon is unreachable: $(cat "$T/primary.log")"
    grep -q "web process extension: $R/usr/lib/smartico-wrapper/libsmartico-wrapper-web-extension.so" "$T/primary.log" ||
        fail "the packaged binary did not find the packaged web process extension: $(cat "$T/primary.log")"
    ok "started on Xvfb without a daemon (it retries: '$(grep -m1 -o 'lost smarticod ([^;]*' "$T/primary.log" | cut -c1-80)…'); found its web process extension in ../lib/smartico-wrapper; a second 'smartico-wrapper --open dp:gf_missions' handed over and exited 0; SIGTERM: exit 0"
fi

echo "--> install and remove with dpkg (in a throwaway copy of this system)"
# dpkg -i for real in a chroot on an overlay of / (a private mount namespace: nothing reaches this
# machine). Needs root and the right to mount (CAP_SYS_ADMIN), and the Depends installed here.
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1; then
    skip "dpkg -i was NOT run: this needs root and unshare (dpkg-deb -x checks above only)"
else
    O="$T/overlay"
    mkdir -p "$O/rw" "$O/merged" "$O/pkg"
    cp "$DEB" "$O/pkg/smartico-wrapper.deb"
    cat >"$O/pkg/inside.sh" <<EOF
set -eu
bad() { echo "FAIL (in the chroot): \$*" >&2; exit 1; }
dpkg -i /pkg/smartico-wrapper.deb >/pkg/install.log 2>&1 || { cat /pkg/install.log >&2; bad "dpkg -i failed"; }
[ "\$(dpkg-query -W -f='\${Status}' smartico-wrapper)" = "install ok installed" ] || bad "smartico-wrapper is not 'install ok installed'"
verify="\$(dpkg --verify smartico-wrapper 2>&1)"; [ -z "\$verify" ] || bad "dpkg --verify smartico-wrapper: \$verify"
[ "\$(/usr/bin/smartico-wrapper --version)" = "smartico-wrapper $VERSION" ] || bad "the installed smartico-wrapper --version is not $VERSION"
[ -f /usr/lib/systemd/user/smartico-wrapper.service ] && [ -f /usr/share/applications/smartico-wrapper.desktop ] || bad "the unit or the desktop entry is missing after dpkg -i"
[ ! -e /etc/systemd/user/graphical-session.target.wants/smartico-wrapper.service ] || bad "the package enabled the user unit for every user (it must not)"
echo "    install: dpkg -i, dpkg --verify clean, /usr/bin/smartico-wrapper --version $VERSION, the unit not enabled globally"
dpkg -r smartico-wrapper >/pkg/remove.log 2>&1 || { cat /pkg/remove.log >&2; bad "dpkg -r failed"; }
for f in /usr/bin/smartico-wrapper /usr/lib/smartico-wrapper /usr/lib/systemd/user/smartico-wrapper.service /usr/share/applications/smartico-wrapper.desktop /usr/share/man/man1/smartico-wrapper.1.gz; do
    [ ! -e "\$f" ] || bad "dpkg -r left \$f"
done
dpkg -P smartico-wrapper >/pkg/purge.log 2>&1 || { cat /pkg/purge.log >&2; bad "dpkg -P failed"; }
dpkg-query -W smartico-wrapper >/dev/null 2>&1 && bad "dpkg -P left smartico-wrapper known to dpkg"
echo "    remove, purge: every file gone"
EOF
    status=0
    run_in_overlay "$O" "$T" || status=$?
    if [ $status -eq 99 ]; then
        skip "dpkg -i was NOT run: cannot mount a tmpfs and an overlay of / here ($(cat "$T/mount.err" 2>/dev/null))"
    elif [ $status -ne 0 ]; then
        fail "dpkg -i / -r / -P of the package failed (above)"
    else
        ok "dpkg -i, dpkg --verify, dpkg -r and dpkg -P in an overlay of this system"
    fi
fi

echo "==> package checks passed: $NAME.deb"
