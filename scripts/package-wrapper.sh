#!/usr/bin/env bash
# Builds the release package of smartico-wrapper (Wrapper/, GTK 4 + WebKitGTK 6.0):
#   dist/smartico-wrapper_VERSION_ARCH.deb     (dpkg-deb, no debhelper)
#
# The wrapper is built in release mode in Wrapper/.build-release (apart from Wrapper/.build, the
# debug build), with --static-swift-stdlib: the Swift runtime is inside the binary (nothing of
# the toolchain in `ldd`), while GTK, WebKitGTK and GLib are the system's shared libraries,
# named in Depends by dpkg-shlibdeps. Beside it, /usr/lib/smartico-wrapper holds the wrapper's web
# process extension (plain C, no Swift runtime). The tree laid out in dist/root-wrapper/ is what the .deb
# holds (docs/operations.md, "The wrapper"). scripts/check-package-wrapper.sh checks the result.
# `--build-only`: the release build and nothing else. `--print-bin-path`: prints the directory of
# the release binary and builds nothing.
set -euo pipefail
umask 022
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Anything deps.sh prints goes to stderr, so that --print-bin-path prints only the path.
source scripts/deps.sh >&2
source scripts/package-lib.sh

BUILD_PATH="$ROOT/Wrapper/.build-release"
# The release build: the one set of flags for the binary, the package and the tests' path.
# --disable-local-rpath: no RUNPATH $ORIGIN in a binary that lives in /usr/bin.
release_build() {
    swift build -c release --static-swift-stdlib --disable-local-rpath \
        --package-path "$ROOT/Wrapper" --scratch-path "$BUILD_PATH" "$@"
}
if [ "${1:-}" = "--print-bin-path" ]; then
    release_build --show-bin-path
    exit 0
fi

need_dpkg_shlibdeps

DIST="$ROOT/dist"
STAGE="$DIST/root-wrapper"

echo "==> building smartico-wrapper (release, --static-swift-stdlib, $BUILD_PATH)"
started=$(date +%s)
release_build
echo "    built in $(( $(date +%s) - started )) s"
[ "${1:-}" = "--build-only" ] && exit 0
BIN="$(release_build --show-bin-path)"

# `smartico-wrapper --version` prints "smartico-wrapper VERSION" (SmarticoClient.version, the
# daemon's SmarticoVersion.string): one version for both packages.
version_line="$("$BIN/smartico-wrapper" --version)"
VERSION="${version_line#smartico-wrapper }"
check_version_line "$version_line" "smartico-wrapper "
ARCH="$(dpkg --print-architecture)"
NAME="smartico-wrapper_${VERSION}_${ARCH}"
set_package_epoch

echo "==> laying out $STAGE ($NAME)"
rm -rf "$STAGE"
mkdir -p "$STAGE"
r="$STAGE"

install -d "$r/usr/bin"
install -m 0755 "$BIN/smartico-wrapper" "$r/usr/bin/smartico-wrapper"
strip "$r/usr/bin/smartico-wrapper"

# The web process extension (Wrapper/WebExtension, C), which WebKit loads into the wrapper's web
# processes: the package's WebExtensionBuild plugin built it beside the release build. The wrapper
# looks for it in ../lib/smartico-wrapper from its bin (docs/wrapper.md, memory).
ext_name=libsmartico-wrapper-web-extension.so
ext="$(find "$BUILD_PATH/plugins/outputs" -name "$ext_name" -type f)"
if [ "$(grep -c . <<<"$ext")" -ne 1 ]; then
    echo "error: expected one $ext_name under $BUILD_PATH/plugins/outputs (the WebExtensionBuild plugin's), found: ${ext:-none}" >&2
    exit 1
fi
install -d "$r/usr/lib/smartico-wrapper"
install -m 0644 "$ext" "$r/usr/lib/smartico-wrapper/$ext_name"
strip --strip-unneeded "$r/usr/lib/smartico-wrapper/$ext_name"

# The user unit (started with the graphical session; enabled per user, not by the package).
if ! grep -q '^ExecStart=/usr/bin/smartico-wrapper$' systemd/user/smartico-wrapper.service; then
    echo "error: systemd/user/smartico-wrapper.service's ExecStart= is not /usr/bin/smartico-wrapper, where the package puts it" >&2
    exit 1
fi
install -d "$r/usr/lib/systemd/user"
install -m 0644 systemd/user/smartico-wrapper.service "$r/usr/lib/systemd/user/"

# The desktop entry ("Smartico": smartico-wrapper --open). desktop-file-utils' dpkg trigger
# updates the menus' cache; the package needs no maintainer script for it.
install -d "$r/usr/share/applications"
install -m 0644 packaging/smartico-wrapper.desktop "$r/usr/share/applications/smartico-wrapper.desktop"

doc="$r/usr/share/doc/smartico-wrapper"
install -d "$doc"
install -m 0644 packaging/smartico-wrapper.copyright "$doc/copyright"

# The man page, with the version filled in, gzipped as Debian wants (-n: no name or time inside).
install -d "$r/usr/share/man/man1"
sed -e "s/@VERSION@/$VERSION/g" man/smartico-wrapper.1 | gzip -9n >"$r/usr/share/man/man1/smartico-wrapper.1.gz"
chmod 0644 "$r/usr/share/man/man1/smartico-wrapper.1.gz"

find "$r" -exec touch -h -d "@$EPOCH" {} +

echo "==> computing Depends"
# dpkg-shlibdeps maps each NEEDED library to its package and the lowest version that has every
# symbol used (it wants a debian/control and a DEBIAN/ beside the binary: both temporary).
# webkitgtk-6.0.pc's Libs name pango, cairo, harfbuzz, soup and others the wrapper calls nothing
# of, so they are NEEDED and dpkg-shlibdeps warns "could avoid a useless dependency" for them;
# the packages it names are dependencies of libgtk-4-1 and libwebkitgtk-6.0-4 anyway.
# (-Xlinker --as-needed does not help: SwiftPM puts it after pkg-config's -l flags.)
shlib_dir="$(mktemp -d)"
trap 'rm -rf "$shlib_dir"' EXIT
mkdir -p "$shlib_dir/debian" "$r/DEBIAN"
printf 'Source: smartico-wrapper\n\nPackage: smartico-wrapper\nArchitecture: any\n' >"$shlib_dir/debian/control"
shlibs="$(cd "$shlib_dir" && dpkg-shlibdeps -O -e"$r/usr/bin/smartico-wrapper" -e"$r/usr/lib/smartico-wrapper/$ext_name" 2>"$shlib_dir/warnings")"
unused="$(grep -c 'useless dependency' "$shlib_dir/warnings" || true)"
[ "$unused" -eq 0 ] || echo "    dpkg-shlibdeps: $unused libraries linked but unused (pkg-config's Libs for webkitgtk-6.0)"
if grep -v 'useless dependency' "$shlib_dir/warnings" >"$shlib_dir/other"; then sed 's/^/    /' "$shlib_dir/other"; fi
shlibs="${shlibs#shlibs:Depends=}"
for lib in libwebkitgtk-6.0-4 libgtk-4-1; do
    if [[ ", $shlibs" != *", $lib"* ]]; then echo "error: dpkg-shlibdeps did not name $lib: $shlibs" >&2; exit 1; fi
done
DEPENDS="$shlibs"
echo "    Depends: $DEPENDS"

echo "==> writing DEBIAN/"
installed_size="$(du -sk --exclude=DEBIAN "$r" | cut -f1)"
maintainer="$(package_maintainer)"
cat >"$r/DEBIAN/control" <<EOF
Package: smartico-wrapper
Version: $VERSION
Architecture: $ARCH
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $DEPENDS
Recommends: smarticod
Section: x11
Priority: optional
Description: shows Smartico's popups, mini-games and widget (GTK 4, WebKitGTK)
 smartico-wrapper is the screen of smarticod, the session daemon for
 Smartico's engagement platform: in a graphical session it shows the
 engagements (popups), mini-games and the gamification widget (missions,
 tournaments, the store) that the daemon receives, in GTK 4 windows with
 WebKitGTK 6.0 web views, and relays the pages' messages back to it.
 .
 One instance runs per session, as a systemd user unit
 (systemctl --user enable --now smartico-wrapper); the desktop entry
 "Smartico" opens the widget. It needs smarticod's control role
 (see smartico-wrapper(1)).
EOF
# md5sums of every file, as dh_md5sums writes it (there is no conffile).
write_md5sums "$r"
chmod 0644 "$r/DEBIAN/control" "$r/DEBIAN/md5sums"
touch -h -d "@$EPOCH" "$r/DEBIAN" "$r/DEBIAN"/*

echo "==> building the .deb"
rm -f "$DIST/$NAME.deb"
dpkg-deb --root-owner-group -Zxz -z1 --build "$r" "$DIST/$NAME.deb"
ls -l "$DIST/$NAME.deb"
echo "package: $DIST/$NAME.deb"
