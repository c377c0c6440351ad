# What the package makers (package.sh, package-wrapper.sh) and their checks (check-package.sh,
# check-package-wrapper.sh) share. Sourced after ROOT is set (and, for the makers, deps.sh).

# The version in the code (SmarticoVersion.string): one version for every package.
code_version() {
    sed -n 's/.*public static let string = "\(.*\)".*/\1/p' "$ROOT/Sources/SmarticoSocketAPI/SocketAPIShared.swift"
}

# Exits when an executable's `--version` line ($1) is not $2 followed by the code's version.
check_version_line() {
    local line="$1" prefix="$2" expected
    expected="$prefix$(code_version)"
    if [ "$line" != "$expected" ]; then
        echo "error: --version says '$line' but Sources/SmarticoSocketAPI/SocketAPIShared.swift says '$expected'" >&2
        exit 1
    fi
}

# dpkg-shlibdeps (dpkg-dev) computes Depends from the binaries' NEEDED libraries.
need_dpkg_shlibdeps() {
    if ! command -v dpkg-shlibdeps >/dev/null 2>&1; then
        echo "==> installing dpkg-dev (dpkg-shlibdeps)"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dpkg-dev
    fi
}

# File times: the last commit's, so that two builds of one commit give the same file list and
# times. Sets EPOCH and exports SOURCE_DATE_EPOCH.
set_package_epoch() {
    EPOCH="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)"
    export SOURCE_DATE_EPOCH="$EPOCH"
}

package_maintainer() {
    echo "${SMARTICOD_MAINTAINER:-$(git -C "$ROOT" log -1 --format='%an <%ae>' 2>/dev/null || echo 'smarticod maintainers <root@localhost>')}"
}

# DEBIAN/md5sums of every file of the tree $1 as dh_md5sums writes it; more arguments are `find`
# paths to leave out as well (the conffiles, which dpkg tracks itself).
write_md5sums() {
    local r="$1"; shift
    local prune=(-path ./DEBIAN -prune)
    for p in "$@"; do prune+=(-o -path "$p" -prune); done
    (cd "$r" && find . "${prune[@]}" -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$r/DEBIAN/md5sums"
}

# The checks' verdicts: the first failure exits 1 with the reason.
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }
skip() { echo "  SKIPPED: $*"; }

# Runs $1/pkg/inside.sh (written by the caller; $1/pkg is /pkg inside) as root in a chroot of a
# throwaway overlay of /, in a mount namespace of its own. The overlay's writable layer is on a
# tmpfs of the namespace: / may itself be an overlay (a container), and an overlay's upper
# directory cannot be on one. Returns the script's status, or 99 when no overlay can be mounted
# here ($2/mount.err says why).
run_in_overlay() {
    local O="$1" T="$2" status=0
    unshare -m sh -c "
        mount -t tmpfs tmpfs $O/rw || exit 99
        mkdir -p $O/rw/upper $O/rw/work
        mount -t overlay overlay -o lowerdir=/,upperdir=$O/rw/upper,workdir=$O/rw/work $O/merged 2>$T/mount.err || exit 99
        set -e
        mount -t proc proc $O/merged/proc
        mkdir -p $O/merged/pkg
        mount --bind $O/pkg $O/merged/pkg
        exec chroot $O/merged /bin/sh /pkg/inside.sh" 2>&1 || status=$?
    return $status
}
