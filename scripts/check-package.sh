#!/usr/bin/env bash
# Checks what scripts/package.sh made (dist/smarticod_VERSION_ARCH.deb and .tar.gz): unpacks the
# .deb with `dpkg-deb -x` into a temporary root and checks it from there. Each check prints what
# it checked; the first failure exits 1 with the reason. Run by scripts/test.sh after the Swift
# tests (docs/operations.md, "Package").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

source scripts/package-lib.sh

VERSION="$(code_version)"
ARCH="$(dpkg --print-architecture)"
NAME="smarticod_${VERSION}_${ARCH}"
DEB="$ROOT/dist/$NAME.deb"
TGZ="$ROOT/dist/$NAME.tar.gz"
[ -f "$DEB" ] || fail "$DEB is missing: run scripts/package.sh first"
[ -f "$TGZ" ] || fail "$TGZ is missing: run scripts/package.sh first"

T="$(mktemp -d /tmp/smarticod-check-package.XXXXXX)"
cleanup() { rm -rf "$T"; }
trap cleanup EXIT
R="$T/root"
dpkg-deb -x "$DEB" "$R"
dpkg-deb -e "$DEB" "$T/DEBIAN"
echo "==> checking $NAME.deb, unpacked with dpkg-deb -x into $R"

BINARIES=(usr/sbin/smarticod usr/bin/smarticoctl usr/bin/smartico-sim usr/bin/smartico-ws)

echo "--> control"
field() { sed -n "s/^$1: //p" "$T/DEBIAN/control"; }
[ "$(field Package)" = smarticod ] || fail "control: Package is '$(field Package)', not smarticod"
[ "$(field Version)" = "$VERSION" ] || fail "control: Version is '$(field Version)', the code's SmarticoVersion.string is '$VERSION'"
[ "$(field Architecture)" = "$ARCH" ] || fail "control: Architecture is '$(field Architecture)', dpkg --print-architecture says '$ARCH'"
depends="$(field Depends)"
for lib in libc6 libssl3 zlib1g libsqlite3-0; do
    [[ ",$depends" == *", $lib "* || ",$depends" == *",$lib "* ]] || fail "control: Depends does not name $lib: $depends"
done
ok "Package smarticod, Version $VERSION, Architecture $ARCH; Depends: $depends"
[ "$(cat "$T/DEBIAN/conffiles")" = /etc/smarticod/config.json ] || fail "conffiles is not exactly /etc/smarticod/config.json: $(cat "$T/DEBIAN/conffiles")"
ok "conffiles: /etc/smarticod/config.json"
for s in postinst prerm postrm; do
    [ -x "$T/DEBIAN/$s" ] || fail "DEBIAN/$s is missing or not executable"
    sh -n "$T/DEBIAN/$s" || fail "DEBIAN/$s: sh -n found a syntax error"
done
ok "maintainer scripts postinst, prerm, postrm: executable, sh -n clean"

echo "--> files"
for f in "${BINARIES[@]}" \
    usr/lib/systemd/system/smarticod.service usr/lib/systemd/system/smarticod.socket \
    usr/lib/sysusers.d/smarticod.conf usr/lib/tmpfiles.d/smarticod.conf etc/smarticod/config.json \
    usr/share/doc/smarticod/README.md usr/share/doc/smarticod/operations.md usr/share/doc/smarticod/copyright \
    usr/share/man/man8/smarticod.8.gz usr/share/man/man1/smarticoctl.1.gz usr/share/man/man5/smarticod.json.5.gz \
    usr/share/bash-completion/completions/smarticoctl usr/share/zsh/vendor-completions/_smarticoctl \
    usr/share/fish/vendor_completions.d/smarticoctl.fish; do
    [ -s "$R/$f" ] || fail "/$f is missing or empty in the package"
done
ok "the binaries, units, sysusers.d and tmpfiles.d files, config, docs, man pages and completions are all there"
mode="$(stat -c %a "$R/etc/smarticod/config.json")"
[ "$mode" = 640 ] || fail "/etc/smarticod/config.json has mode $mode in the package, not 640 (it holds the label key)"
ok "/etc/smarticod/config.json is 0640"

echo "--> binaries (ldd)"
for b in "${BINARIES[@]}"; do
    out="$(ldd "$R/$b")" || fail "ldd /$b failed: $out"
    if grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime|libicu|/swift/' <<<"$out"; then
        fail "/$b links a Swift toolchain library (above): it must be built with --static-swift-stdlib"
    fi
    if grep 'not found' <<<"$out"; then fail "/$b needs a library this machine does not have (above)"; fi
    if readelf -d "$R/$b" | grep -E 'RPATH|RUNPATH'; then fail "/$b has an RPATH/RUNPATH (above); package.sh builds with --disable-local-rpath"; fi
    if readelf -S "$R/$b" | grep -q ' \.symtab '; then fail "/$b is not stripped (it has a .symtab)"; fi
    v="$("$R/$b" --version)" || fail "/$b --version failed"
    [ "$v" = "$VERSION" ] || fail "/$b --version prints '$v', not $VERSION"
    ok "/$b: $(awk '{print $1}' <<<"$out" | grep -v linux-vdso | tr '\n' ' ')(stripped, no RUNPATH, --version $v)"
done
ctl="$(ldd "$R/usr/bin/smarticoctl")"
if grep -E 'libssl|libcrypto|libsqlite3' <<<"$ctl"; then fail "/usr/bin/smarticoctl links OpenSSL or SQLite (above); it only talks to a Unix socket"; fi
ok "/usr/bin/smarticoctl links neither OpenSSL nor SQLite"

echo "--> smarticod --check-config on the shipped /etc/smarticod/config.json"
set +e
out="$("$R/usr/sbin/smarticod" --config "$R/etc/smarticod/config.json" --check-config 2>&1)"
status=$?
set -e
[ $status -eq 78 ] || fail "the shipped config (placeholder label key) gave exit $status, not 78: $out"
grep -q 'server.label_key: is the all-zero placeholder' <<<"$out" || fail "the shipped config failed, but not for its placeholder label key: $out"
ok "as shipped it fails (exit 78) on the placeholder label key: $(head -1 <<<"$out")"
# A copy with a real-looking label key, and socket.path and state_dir moved into the temporary root
# (so the socket directory check looks there, not at this machine's /run); server.tls.ca_file is
# null in the shipped file (the system store), so there is no CA path to move.
python3 - "$R/etc/smarticod/config.json" "$T/config.json" "$R" <<'EOF'
import json, sys
src, dst, root = sys.argv[1:]
with open(src) as f:
    c = json.load(f)
c["server"]["label_key"] = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"
c["socket"]["path"] = root + c["socket"]["path"]
c["state_dir"] = root + c["state_dir"]
assert c["server"]["tls"]["ca_file"] is None, "the shipped config sets server.tls.ca_file; move it into the root too"
with open(dst, "w") as f:
    json.dump(c, f, indent=2)
EOF
set +e
out="$("$R/usr/sbin/smarticod" --config "$T/config.json" --check-config 2>&1)"
status=$?
set -e
[ $status -eq 0 ] || fail "the shipped config with a real-looking label key gave exit $status, not 0: $out"
grep -q "^configuration OK: $T/config.json" <<<"$out" || fail "--check-config passed without saying 'configuration OK': $out"
ok "with server.label_key set (and socket.path, state_dir under the temporary root) it passes: $(head -1 <<<"$out")"

echo "--> units (systemd-analyze verify --root)"
# The unpacked package is not a whole system: systemd-analyze --root looks for everything the units
# name inside the root (sysinit.target, sockets.target, network-online.target from systemd's own
# units; /bin/kill of ExecReload=). So the check verifies a copy of the root with those added from
# this machine, as a system where the package's dependencies are installed has them; MANPATH points
# man(1) at the root, so Documentation=man:smarticod(8) must name a page the package installs.
# Offline: no systemd as PID 1 is needed.
if ! command -v systemd-analyze >/dev/null 2>&1; then
    # The package systemd, for its tools only (nothing is started in a container without systemd).
    echo "  installing systemd (systemd-analyze, systemd-sysusers, systemd-tmpfiles)"
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq systemd; } >/dev/null ||
        fail "systemd-analyze is not installed and apt-get install systemd failed: the units cannot be verified"
fi
V="$T/vroot"
cp -a "$R" "$V"
cp -an /usr/lib/systemd/system/. "$V/usr/lib/systemd/system/"
[ -e "$V/bin" ] || ln -s usr/bin "$V/bin"
[ -x /bin/kill ] || fail "/bin/kill (ExecReload= of the unit) is missing on this machine (apt-get install procps)"
cp /bin/kill "$V/usr/bin/kill"
for u in smarticod.service smarticod.socket; do
    for doc in $(sed -n 's/^Documentation=//p' "$R/usr/lib/systemd/system/$u"); do
        case "$doc" in
        file://*) [ -f "$R${doc#file://}" ] || fail "$u: Documentation=$doc is not a file the package installs" ;;
        man:*) ;;
        *) fail "$u: Documentation=$doc is neither file:// nor man:" ;;
        esac
    done
done
out="$(cd "$T" && MANPATH="$V/usr/share/man" SYSTEMD_LOG_COLOR=0 systemd-analyze verify --root="$V" \
    /usr/lib/systemd/system/smarticod.service /usr/lib/systemd/system/smarticod.socket 2>&1)" ||
    fail "systemd-analyze verify --root=$V rejects the units: $out"
[ -z "$out" ] || fail "systemd-analyze verify --root=$V warns: $out"
ok "systemd-analyze verify --root accepts smarticod.service and smarticod.socket, no warning (ExecStart= /usr/sbin/smarticod and Documentation= resolved in the root)"
out="$(systemd-sysusers --root="$V" smarticod.conf 2>&1)" || fail "systemd-sysusers --root: $out"
uid="$(awk -F: '$1 == "smarticod" {print $3}' "$V/etc/passwd")"
[ -n "$uid" ] || fail "systemd-sysusers --root created no user smarticod: $out"
out="$(systemd-tmpfiles --root="$V" --create smarticod.conf 2>&1)" || fail "systemd-tmpfiles --root --create: $out"
for d in "run/smarticod 755" "var/lib/smarticod 700"; do
    set -- $d
    got="$(stat -c '%a %u' "$V/$1")"
    [ "$got" = "$2 $uid" ] || fail "tmpfiles.d made /$1 with mode and owner '$got', not '$2 $uid' (the unit's StateDirectoryMode/RuntimeDirectory)"
done
ok "sysusers.d creates the user smarticod (uid $uid in the root); tmpfiles.d creates /run/smarticod 0755 and /var/lib/smarticod 0700 owned by it"

echo "--> man pages"
renderer=""
if command -v groff >/dev/null 2>&1; then renderer=groff; elif command -v mandoc >/dev/null 2>&1; then renderer=mandoc; fi
for page in man8/smarticod.8 man1/smarticoctl.1 man5/smarticod.json.5; do
    gz="$R/usr/share/man/$page.gz"
    gzip -t "$gz" || fail "/usr/share/man/$page.gz is not valid gzip"
    case "$renderer" in
    groff)
        warnings="$(zcat "$gz" | groff -man -Tutf8 -ww -z 2>&1)"
        [ -z "$warnings" ] || fail "groff warns about /usr/share/man/$page.gz: $warnings"
        lines="$(zcat "$gz" | groff -man -Tutf8 2>/dev/null | wc -l)"
        [ "$lines" -gt 20 ] || fail "/usr/share/man/$page.gz renders to only $lines lines"
        ok "$page renders with groff -man -Tutf8 -ww: $lines lines, no warning" ;;
    mandoc)
        zcat "$gz" | mandoc -T lint -W warning || fail "mandoc -T lint warns about /usr/share/man/$page.gz"
        ok "$page passes mandoc -T lint" ;;
    *)
        skip "$page is not rendered: neither groff nor mandoc is installed (apt-get install groff-base)" ;;
    esac
done
# What the pages must name, from the code: every smarticoctl subcommand (a .SS heading) and every
# long option (--experimental-dump-help); every smarticod option (--help); every key of the config.
python3 - "$R" <<'EOF' || fail "a man page does not document what the code has (above)"
import gzip, json, re, subprocess, sys
root = sys.argv[1]
def source(page):
    text = gzip.open(f"{root}/usr/share/man/{page}.gz", "rt").read()
    return re.sub(r"\\f[BIRP]|\\\|", "", text).replace("\\-", "-")
missing = []
ctl = source("man1/smarticoctl.1")
headings = {m.split()[0] for m in re.findall(r'^\.SS "([^"]+)', ctl, re.M)}
info = json.loads(subprocess.run([f"{root}/usr/bin/smarticoctl", "--experimental-dump-help"], capture_output=True, check=True).stdout)
def walk(command, top):
    if not top and command["commandName"] not in headings:
        missing.append(f"smarticoctl(1): no .SS section for the subcommand '{command['commandName']}'")
    for a in command.get("arguments", []):
        if a.get("kind") == "positional" or not a.get("shouldDisplay", True):
            continue
        for n in a.get("names", []):
            flag = ("--" if n["kind"] == "long" else "-") + n["name"]
            if not re.search(re.escape(flag) + r"(?![\w-])", ctl):
                missing.append(f"smarticoctl(1): the option {flag} of '{command['commandName']}' is not named")
    for s in command.get("subcommands", []):
        walk(s, False)
walk(info["command"], True)
daemon = source("man8/smarticod.8")
help_text = subprocess.run([f"{root}/usr/sbin/smarticod", "--help"], capture_output=True, text=True, check=True).stdout
for flag in sorted(set(re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", help_text, re.M))):
    if flag not in daemon:
        missing.append(f"smarticod(8): the option {flag} of smarticod --help is not named")
conf = source("man5/smarticod.json.5")
def keys(obj, prefix=""):
    for k, v in obj.items():
        if isinstance(v, dict) and v:
            yield from keys(v, prefix + k + ".")
        else:
            yield prefix + k
for key in keys(json.load(open(f"{root}/etc/smarticod/config.json"))):
    if not re.search(re.escape(key) + r"(?![\w.])", conf):
        missing.append(f"smarticod.json(5): the key {key} of the shipped config is not named")
for m in missing:
    print("  " + m)
sys.exit(1 if missing else 0)
EOF
ok "smarticoctl(1) names every subcommand and option of the binary; smarticod(8) every option of --help; smarticod.json(5) every key of the shipped config"

echo "--> completions"
comp_bash="$R/usr/share/bash-completion/completions/smarticoctl"
bash -n "$comp_bash" || fail "bash -n rejects $comp_bash"
for f in "$comp_bash" "$R/usr/share/zsh/vendor-completions/_smarticoctl" "$R/usr/share/fish/vendor_completions.d/smarticoctl.fish"; do
    for sub in status tail identify log-level report; do
        grep -q -- "$sub" "$f" || fail "${f#$R} does not mention the subcommand $sub"
    done
done
ok "bash (bash -n clean), zsh and fish completions present and name the subcommands"
if command -v zsh >/dev/null 2>&1; then zsh -n "$R/usr/share/zsh/vendor-completions/_smarticoctl" || fail "zsh -n rejects _smarticoctl"; ok "zsh -n clean"; fi
if command -v fish >/dev/null 2>&1; then fish -n "$R/usr/share/fish/vendor_completions.d/smarticoctl.fish" || fail "fish -n rejects smarticoctl.fish"; ok "fish -n clean"; fi

echo "--> the tarball holds the same tree as the .deb"
# Mode, owner, size and name of every entry (times are the same by construction, not compared).
listing() {
    awk '{ name = $6; for (i = 7; i <= NF; i++) name = name " " $i; print name, $1, $2, $3 }' |
        sed -e 's#^\./##' -e 's#^ #. #' -e 's#/ # #' | LC_ALL=C sort
}
dpkg-deb --fsys-tarfile "$DEB" | tar -tv --numeric-owner | listing >"$T/deb.list"
tar -tzv --numeric-owner -f "$TGZ" | listing >"$T/tgz.list"
if ! diff -u "$T/deb.list" "$T/tgz.list" >"$T/list.diff"; then
    head -40 "$T/list.diff" >&2
    fail "$NAME.tar.gz and the .deb's data differ (above: - the .deb, + the tarball)"
fi
ok "$(wc -l <"$T/deb.list") entries, the same names, modes, owners and sizes in both"

echo "--> install, upgrade, remove, purge with dpkg, then the tarball by hand (in a throwaway copy of this system)"
# dpkg -i for real, with the maintainer scripts, in a chroot on an overlay of / (a private mount
# namespace: nothing reaches this machine). Needs root and the right to mount (CAP_SYS_ADMIN).
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1; then
    skip "the maintainer scripts were NOT run: this needs root and unshare"
else
    O="$T/overlay"
    mkdir -p "$O/rw" "$O/merged" "$O/pkg"
    cp "$DEB" "$O/pkg/smarticod.deb"
    cp "$TGZ" "$O/pkg/smarticod.tar.gz"
    cat >"$O/pkg/inside.sh" <<'EOF'
set -eu
step() { echo "    $*"; }
bad() { echo "FAIL (in the chroot): $*" >&2; exit 1; }
dpkg -i /pkg/smarticod.deb >/pkg/install.log 2>&1 || { cat /pkg/install.log >&2; bad "dpkg -i failed"; }
getent passwd smarticod >/dev/null || bad "postinst did not create the user smarticod"
[ "$(stat -c '%U:%G %a' /etc/smarticod/config.json)" = "root:smarticod 640" ] || bad "/etc/smarticod/config.json is $(stat -c '%U:%G %a' /etc/smarticod/config.json), not root:smarticod 640"
[ "$(stat -c '%U %a' /var/lib/smarticod)" = "smarticod 700" ] || bad "/var/lib/smarticod is $(stat -c '%U %a' /var/lib/smarticod), not smarticod 700"
[ -L /etc/systemd/system/sockets.target.wants/smarticod.socket ] || bad "postinst did not enable smarticod.socket"
[ -L /etc/systemd/system/multi-user.target.wants/smarticod.service ] || bad "postinst did not enable smarticod.service"
grep -q "does not pass" /pkg/install.log || bad "postinst did not say that the placeholder config keeps the service from starting"
verify="$(dpkg --verify smarticod 2>&1)"; [ -z "$verify" ] || bad "dpkg --verify smarticod: $verify"
step "install: user smarticod, config root:smarticod 0640, /var/lib/smarticod 0700, socket and service enabled; dpkg --verify clean"
sed -i 's/00000000-0000-0000-0000-000000000000-2/6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2/' /etc/smarticod/config.json
echo state >/var/lib/smarticod/marker
dpkg -i /pkg/smarticod.deb >/pkg/upgrade.log 2>&1 || { cat /pkg/upgrade.log >&2; bad "dpkg -i (again) failed"; }
grep -q 6816f0c2 /etc/smarticod/config.json || bad "the upgrade replaced the edited conffile"
[ "$(stat -c '%U:%G %a' /etc/smarticod/config.json)" = "root:smarticod 640" ] || bad "after the upgrade the config is $(stat -c '%U:%G %a' /etc/smarticod/config.json)"
/usr/sbin/smarticod --config /etc/smarticod/config.json --check-config >/dev/null || bad "the edited config does not pass --check-config"
step "upgrade (dpkg -i again): the edited config is kept, still root:smarticod 0640, and passes --check-config"
dpkg -r smarticod >/pkg/remove.log 2>&1 || { cat /pkg/remove.log >&2; bad "dpkg -r failed"; }
[ ! -e /usr/sbin/smarticod ] || bad "dpkg -r left /usr/sbin/smarticod"
[ -f /etc/smarticod/config.json ] && [ -f /var/lib/smarticod/marker ] || bad "dpkg -r removed the config or the state"
step "remove: the binaries are gone, the config and /var/lib/smarticod stay"
dpkg -P smarticod >/pkg/purge.log 2>&1 || { cat /pkg/purge.log >&2; bad "dpkg -P failed"; }
[ ! -e /etc/smarticod ] && [ ! -e /var/lib/smarticod ] || bad "dpkg -P left /etc/smarticod or /var/lib/smarticod"
! dpkg-statoverride --list /etc/smarticod/config.json >/dev/null || bad "dpkg -P left the statoverride"
getent passwd smarticod >/dev/null || bad "dpkg -P removed the user (Debian keeps it)"
[ ! -e /etc/systemd/system/sockets.target.wants/smarticod.socket ] || bad "dpkg -P left the socket enabled"
step "purge: /etc/smarticod, /var/lib/smarticod and the statoverride are gone; the user smarticod stays"
# The tarball, with the steps of docs/operations.md (all but systemctl: no systemd runs here).
tar -xzf /pkg/smarticod.tar.gz -C / --no-overwrite-dir
systemd-sysusers smarticod.conf
chgrp smarticod /etc/smarticod/config.json
systemd-tmpfiles --create smarticod.conf
[ -x /usr/sbin/smarticod ] && [ -s /usr/share/man/man8/smarticod.8.gz ] || bad "the tarball did not install /usr/sbin/smarticod and its man page"
[ "$(stat -c '%U:%G %a' /etc/smarticod/config.json)" = "root:smarticod 640" ] || bad "tarball: the config is $(stat -c '%U:%G %a' /etc/smarticod/config.json)"
[ "$(stat -c '%U %a' /var/lib/smarticod)" = "smarticod 700" ] || bad "tarball: /var/lib/smarticod is $(stat -c '%U %a' /var/lib/smarticod)"
sed -i 's/00000000-0000-0000-0000-000000000000-2/6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2/' /etc/smarticod/config.json
tar -xzf /pkg/smarticod.tar.gz -C / --no-overwrite-dir --exclude=./etc/smarticod/config.json
grep -q 6816f0c2 /etc/smarticod/config.json || bad "the tarball upgrade replaced the edited config"
step "tarball: extract, sysusers, chgrp, tmpfiles give the same owners and modes; the upgrade keeps the edited config"
tar -tzf /pkg/smarticod.tar.gz | grep -v '/$' | grep -v '^\./etc/' | sed 's#^\.##' | xargs rm -f --
rmdir /usr/share/doc/smarticod
for f in /usr/sbin/smarticod /usr/bin/smarticoctl /usr/lib/systemd/system/smarticod.service /usr/share/man/man1/smarticoctl.1.gz; do
    [ ! -e "$f" ] || bad "the tarball uninstall left $f"
done
[ -f /etc/smarticod/config.json ] || bad "the tarball uninstall removed the config"
step "tarball: the uninstall removes every file but the config"
EOF
    status=0
    run_in_overlay "$O" "$T" || status=$?
    if [ $status -eq 99 ]; then
        skip "the maintainer scripts were NOT run: cannot mount a tmpfs and an overlay of / here ($(cat "$T/mount.err" 2>/dev/null))"
    elif [ $status -ne 0 ]; then
        fail "the maintainer scripts failed (above)"
    else
        ok "dpkg -i, dpkg -i again, dpkg -r, dpkg -P, and the tarball's install, upgrade and uninstall: as docs/operations.md says"
    fi
fi

echo "==> package checks passed: $NAME.deb and $NAME.tar.gz"
