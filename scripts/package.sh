#!/usr/bin/env bash
# Builds the release package of smarticod:
#   dist/smarticod_VERSION_ARCH.deb     (dpkg-deb, no debhelper)
#   dist/smarticod_VERSION_ARCH.tar.gz  (the same tree without DEBIAN/, to extract to /)
#
# The four executables are built with --static-swift-stdlib (nothing of the Swift toolchain in
# `ldd`) in .build-release/, apart from the debug build, and stripped. The tree laid out in
# dist/root/ is what both archives hold (docs/operations.md, "Package"). scripts/check-package.sh
# checks the result. `--build-only`: the release build and nothing else (scripts/test.sh runs it
# in the background while the suite runs). `--print-bin-path`: prints the directory of the release
# binaries and builds nothing (scripts/test.sh runs the Autobahn suite against that smartico-ws).
set -euo pipefail
umask 022
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Anything deps.sh prints goes to stderr, so that --print-bin-path prints only the path.
source scripts/deps.sh >&2

BUILD_PATH="$ROOT/.build-release"
# The release build: the one set of flags for the binaries, the package and the tests' path.
# --disable-local-rpath: no RUNPATH $ORIGIN in binaries that live in /usr/bin.
release_build() {
    swift build -c release --static-swift-stdlib --disable-local-rpath --build-path "$BUILD_PATH" "$@"
}
if [ "${1:-}" = "--print-bin-path" ]; then
    release_build --show-bin-path
    exit 0
fi

# dpkg-shlibdeps (dpkg-dev) computes Depends from the binaries' NEEDED libraries.
if ! command -v dpkg-shlibdeps >/dev/null 2>&1; then
    echo "==> installing dpkg-dev (dpkg-shlibdeps)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dpkg-dev
fi

DIST="$ROOT/dist"
STAGE="$DIST/root"
PRODUCTS=(smarticod smarticoctl smartico-sim smartico-ws)

echo "==> building the release binaries (--static-swift-stdlib, $BUILD_PATH)"
started=$(date +%s)
release_build
echo "    built in $(( $(date +%s) - started )) s"
[ "${1:-}" = "--build-only" ] && exit 0
BIN="$(release_build --show-bin-path)"

VERSION="$("$BIN/smarticod" --version)"
source_version="$(sed -n 's/.*public static let string = "\(.*\)".*/\1/p' Sources/SmarticoSocketAPI/SocketAPIShared.swift)"
if [ "$VERSION" != "$source_version" ]; then
    echo "error: smarticod --version says '$VERSION' but Sources/SmarticoSocketAPI/SocketAPIShared.swift says '$source_version'" >&2
    exit 1
fi
ARCH="$(dpkg --print-architecture)"
NAME="smarticod_${VERSION}_${ARCH}"
# File times: the last commit's, so that two builds of one commit give the same file list and times.
EPOCH="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
export SOURCE_DATE_EPOCH="$EPOCH"

echo "==> laying out $STAGE ($NAME)"
rm -rf "$STAGE"
mkdir -p "$STAGE"
r="$STAGE"

# Binaries: the daemon in /usr/sbin (smarticod(8), ExecStart= of the unit), the clients in /usr/bin.
install -d "$r/usr/sbin" "$r/usr/bin"
install -m 0755 "$BIN/smarticod" "$r/usr/sbin/smarticod"
for p in smarticoctl smartico-sim smartico-ws; do install -m 0755 "$BIN/$p" "$r/usr/bin/$p"; done
strip "$r/usr/sbin/smarticod" "$r/usr/bin/smarticoctl" "$r/usr/bin/smartico-sim" "$r/usr/bin/smartico-ws"

# systemd: the units, the user, the directories.
if ! grep -q '^ExecStart=/usr/sbin/smarticod ' systemd/smarticod.service; then
    echo "error: systemd/smarticod.service's ExecStart= is not /usr/sbin/smarticod, where the package puts the daemon" >&2
    exit 1
fi
install -d "$r/usr/lib/systemd/system" "$r/usr/lib/sysusers.d" "$r/usr/lib/tmpfiles.d"
install -m 0644 systemd/smarticod.service systemd/smarticod.socket "$r/usr/lib/systemd/system/"
install -m 0644 systemd/smarticod.sysusers "$r/usr/lib/sysusers.d/smarticod.conf"
install -m 0644 systemd/smarticod.tmpfiles "$r/usr/lib/tmpfiles.d/smarticod.conf"

# The configuration: the example, a conffile. 0640 from the start (it will hold the label key);
# the group smarticod comes from postinst's dpkg-statoverride (or by hand for the tarball).
install -d "$r/etc/smarticod"
install -m 0640 config.example.json "$r/etc/smarticod/config.json"

# Docs, flat in /usr/share/doc/smarticod (the unit's Documentation= names operations.md there):
# links between the docs keep working; the README's docs/ prefix is dropped.
doc="$r/usr/share/doc/smarticod"
install -d "$doc"
sed -e 's#](docs/#](#g' README.md >"$doc/README.md"
for f in docs/*.md; do install -m 0644 "$f" "$doc/"; done
sed -i -e 's#](\.\./config\.example\.json)#](config.example.json)#g' \
    -e 's#](\.\./systemd/smarticod\.\(service\|socket\))#](/usr/lib/systemd/system/smarticod.\1)#g' \
    -e 's#](\.\./systemd/smarticod\.sysusers)#](/usr/lib/sysusers.d/smarticod.conf)#g' \
    -e 's#](\.\./systemd/smarticod\.tmpfiles)#](/usr/lib/tmpfiles.d/smarticod.conf)#g' "$doc"/*.md
install -m 0644 config.example.json "$doc/config.example.json"
{
    cat packaging/copyright
    notice="$BUILD_PATH/checkouts/swift-log/NOTICE.txt"
    if [ -f "$notice" ]; then
        sed -e 's/[[:space:]]*$//' -e 's/^/ /' -e 's/^ $/ ./' "$notice"
    else
        echo " (NOTICE.txt of swift-log was not found in $BUILD_PATH/checkouts: see https://github.com/apple/swift-log/blob/main/NOTICE.txt)"
    fi
} >"$doc/copyright"
chmod 0644 "$doc"/*

# Man pages, with the version filled in, gzipped as Debian wants (-n: no name or time inside).
for page in man/smarticod.8 man/smarticoctl.1 man/smarticod.json.5; do
    section="${page##*.}"
    install -d "$r/usr/share/man/man$section"
    sed -e "s/@VERSION@/$VERSION/g" "$page" | gzip -9n >"$r/usr/share/man/man$section/$(basename "$page").gz"
    chmod 0644 "$r/usr/share/man/man$section/$(basename "$page").gz"
done

# Shell completions for smarticoctl, generated by ArgumentParser from the binary itself.
install -d "$r/usr/share/bash-completion/completions" "$r/usr/share/zsh/vendor-completions" "$r/usr/share/fish/vendor_completions.d"
"$r/usr/bin/smarticoctl" --generate-completion-script bash >"$r/usr/share/bash-completion/completions/smarticoctl"
"$r/usr/bin/smarticoctl" --generate-completion-script zsh >"$r/usr/share/zsh/vendor-completions/_smarticoctl"
"$r/usr/bin/smarticoctl" --generate-completion-script fish >"$r/usr/share/fish/vendor_completions.d/smarticoctl.fish"
chmod 0644 "$r/usr/share/bash-completion/completions/smarticoctl" "$r/usr/share/zsh/vendor-completions/_smarticoctl" \
    "$r/usr/share/fish/vendor_completions.d/smarticoctl.fish"

find "$r" -exec touch -h -d "@$EPOCH" {} +

echo "==> computing Depends"
# dpkg-shlibdeps maps each NEEDED library to its package and the lowest version that has every
# symbol used (it wants a debian/control and a DEBIAN/ beside the binaries: both temporary).
shlib_dir="$(mktemp -d)"
trap 'rm -rf "$shlib_dir"' EXIT
mkdir -p "$shlib_dir/debian" "$r/DEBIAN"
printf 'Source: smarticod\n\nPackage: smarticod\nArchitecture: any\n' >"$shlib_dir/debian/control"
shlibs="$(cd "$shlib_dir" && dpkg-shlibdeps -O -e"$r/usr/sbin/smarticod" -e"$r/usr/bin/smarticoctl" \
    -e"$r/usr/bin/smartico-sim" -e"$r/usr/bin/smartico-ws" 2>"$shlib_dir/warnings")"
if [ -s "$shlib_dir/warnings" ]; then sed 's/^/    /' "$shlib_dir/warnings"; fi
shlibs="${shlibs#shlibs:Depends=}"
if [ -z "$shlibs" ]; then echo "error: dpkg-shlibdeps found no dependencies" >&2; exit 1; fi
# postinst creates the user with systemd-sysusers (in the package systemd on Debian 12), or
# with adduser where there is none.
DEPENDS="$shlibs, systemd | adduser"
echo "    Depends: $DEPENDS"

echo "==> writing DEBIAN/"
installed_size="$(du -sk --exclude=DEBIAN "$r" | cut -f1)"
maintainer="${SMARTICOD_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || echo 'smarticod maintainers <root@localhost>')}"
cat >"$r/DEBIAN/control" <<EOF
Package: smarticod
Version: $VERSION
Architecture: $ARCH
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $DEPENDS
Section: net
Priority: optional
Description: session daemon for Smartico's engagement platform
 smarticod keeps a device's session with Smartico's engagement platform alive
 over a WebSocket (TLS, keepalive, reconnect, identify, de-duplication, a
 durable outbox) and hands what arrives - popups, mini-games, deep links,
 property changes - to local processes over a Unix socket.
 .
 This package holds the daemon (smarticod), its command-line client
 (smarticoctl), a local stand-in for Smartico's server (smartico-sim), a
 WebSocket diagnostic tool (smartico-ws), the systemd units and the
 documentation.
EOF
echo /etc/smarticod/config.json >"$r/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "packaging/debian/$s" "$r/DEBIAN/$s"; done
# md5sums of every file but the conffiles (dpkg tracks those itself), as dh_md5sums writes it.
(cd "$r" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$r/DEBIAN/md5sums"
chmod 0644 "$r/DEBIAN/control" "$r/DEBIAN/conffiles" "$r/DEBIAN/md5sums"
touch -h -d "@$EPOCH" "$r/DEBIAN" "$r/DEBIAN"/*

echo "==> building the archives"
rm -f "$DIST/$NAME.deb" "$DIST/$NAME.tar.gz"
dpkg-deb --root-owner-group -Zxz -z1 --build "$r" "$DIST/$NAME.deb"
# The tarball: the same entries as the .deb's data (./, directories, files), owned by root.
(cd "$r" && find . -path ./DEBIAN -prune -o -print0 | LC_ALL=C sort -z |
    tar --null --no-recursion -T - --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" -cf - | gzip -n) \
    >"$DIST/$NAME.tar.gz"

ls -l "$DIST/$NAME.deb" "$DIST/$NAME.tar.gz"
echo "package: $DIST/$NAME.deb"
echo "tarball: $DIST/$NAME.tar.gz"
