#!/usr/bin/env bash
# Builds the Docker image ci/python:latest from Debian packages, without a
# container registry:
#
#   debootstrap (bookworm, minbase + packages.txt) from this machine's own apt
#   mirror -> runner files into /opt/ci -> setup-rootfs.sh in a chroot ->
#   tar | docker import with the image's user, env, workdir, CMD and labels.
#
# The image carries the label ci.recipe=<sha256 of this script, packages.txt,
# setup-rootfs.sh and the runner files shipped in /opt/ci>; when the image
# already carries the recipe of the current tree, nothing is rebuilt.
#
# usage: images/python/build.sh [--force] [--tag TAG] [--mirror URL]
#   --force        rebuild even when the image is up to date
#   --tag TAG      image tag (default ci/python:latest)
#   --mirror URL   Debian mirror (default: the first bookworm URI of the
#                  machine's apt sources)
# Needs root (debootstrap, chroot), debootstrap and a running Docker engine.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAG="ci/python:latest"
SUITE="bookworm"
FORCE=0
MIRROR=""

say() { printf '[images/python] %s\n' "$*"; }
die() { printf 'images/python/build.sh: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift ;;
        --tag=*) TAG="${1#--tag=}" ;;
        --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; MIRROR="$2"; shift ;;
        --mirror=*) MIRROR="${1#--mirror=}" ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
T_ALL="$(now)"

# ------------------------------------------------------------ recipe hash
# Files shipped in /opt/ci: everything in runner/ except tests and caches.
runner_files() {
    (cd "$HERE/runner" && find . -type f \
        ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' \
        ! -name 'test_*.py' ! -name 'conftest.py' ! -name '*.pyc' \
        | sed 's|^\./||' | LC_ALL=C sort)
}
for f in build.sh packages.txt setup-rootfs.sh runner/supervisor.py runner/kernel.py; do
    [ -f "$HERE/$f" ] || die "missing $HERE/$f"
done
recipe() {
    {
        for f in build.sh packages.txt setup-rootfs.sh; do
            printf '%s %s\n' "$f" "$(sha256sum <"$HERE/$f" | cut -d' ' -f1)"
        done
        runner_files | while IFS= read -r f; do
            printf 'runner/%s %s\n' "$f" "$(sha256sum <"$HERE/runner/$f" | cut -d' ' -f1)"
        done
    } | sha256sum | cut -d' ' -f1
}
RECIPE="$(recipe)"

command -v docker >/dev/null || die "docker is not installed"
if [ "$FORCE" = 0 ]; then
    have="$(docker image inspect -f '{{ index .Config.Labels "ci.recipe" }}' "$TAG" 2>/dev/null || true)"
    if [ "$have" = "$RECIPE" ]; then
        say "image $TAG is up to date (recipe ${RECIPE:0:12}, checked in $(elapsed "$T_ALL"))"
        exit 0
    fi
fi

# ------------------------------------------------------------ preconditions
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"
for c in debootstrap chroot tar sha256sum awk; do
    command -v "$c" >/dev/null || die "$c is not installed (apt-get install -y debootstrap)"
done
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "cannot reach the Docker engine (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"

# The first Debian bookworm URI of the machine's apt sources: one-line
# "deb [opts] URI bookworm comps" or deb822 "Types: deb / URIs: / Suites:".
find_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        case "$f" in
        *.sources)
            awk -v suite="$SUITE" '
                function flush() {
                    if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") &&
                        tolower(enabled) != "no" && uris != "") {
                        split(uris, u, " "); print u[1]; found = 1; exit
                    }
                    types = uris = suites = enabled = ""; last = ""
                }
                /^[ \t]*#/ { next }
                /^[ \t]*$/ { flush(); next }
                /^[ \t]/ { if (last == "uris") uris = uris " " $0; else if (last == "suites") suites = suites " " $0; next }
                {
                    key = tolower($0); sub(/:.*/, "", key)
                    val = $0; sub(/^[^:]*:[ \t]*/, "", val); gsub(/[ \t]+/, " ", val)
                    last = key
                    if (key == "types") types = val
                    else if (key == "uris") uris = val
                    else if (key == "suites") suites = val
                    else if (key == "enabled") enabled = val
                }
                END { if (!found) flush() }' "$f"
            ;;
        *)
            awk -v suite="$SUITE" '
                /^[ \t]*deb[ \t]/ {
                    line = $0; sub(/#.*/, "", line); gsub(/\[[^]]*\]/, "", line)
                    n = split(line, w, /[ \t]+/)
                    i = (w[1] == "") ? 2 : 1
                    if (w[i] == "deb" && w[i+2] == suite) { print w[i+1]; exit }
                }' "$f"
            ;;
        esac | grep -m1 . && return 0
    done
    return 1
}
if [ -z "$MIRROR" ]; then
    MIRROR="$(find_mirror || true)"
    [ -n "$MIRROR" ] || die "no Debian $SUITE mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/*.{list,sources}; pass --mirror URL"
fi
case "$MIRROR" in
    http://*|https://*|file:/*) ;;
    *) die "unsupported mirror URI '$MIRROR' (need http://, https:// or file:/)" ;;
esac

PACKAGES="$(sed -e 's/#.*//' "$HERE/packages.txt" | tr -s ' \t\n' '\n' | grep . | paste -sd, -)"
[ -n "$PACKAGES" ] || die "packages.txt lists no packages"

# ------------------------------------------------------------ work dir
WORK=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        # an interrupted debootstrap can leave /proc or /sys mounted in the rootfs
        awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r |
            while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p /var/tmp
WORK="$(mktemp -d /var/tmp/ci-python-image.XXXXXX)"
ROOTFS="$WORK/rootfs"

say "building $TAG (recipe ${RECIPE:0:12}) from $MIRROR, suite $SUITE"
say "packages: $PACKAGES"

# ------------------------------------------------------------ 1 debootstrap
t="$(now)"
say "[1/4] debootstrap --variant=minbase (about 2 minutes; log in $WORK/debootstrap.log)"
if ! debootstrap --variant=minbase --components=main --include="$PACKAGES" \
        "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 30 "$WORK/debootstrap.log" >&2 || true
    if [ -f "$ROOTFS/debootstrap/debootstrap.log" ]; then
        tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2 || true
    fi
    die "debootstrap failed (mirror $MIRROR)"
fi
say "      done in $(elapsed "$t")"

# ------------------------------------------------------------ 2 runner + setup
t="$(now)"
say "[2/4] runner files into /opt/ci, user sandbox (1000:1000), font cache, strip"
install -d -m 0755 "$ROOTFS/opt/ci"
runner_files | while IFS= read -r f; do
    install -D -m 0644 "$HERE/runner/$f" "$ROOTFS/opt/ci/$f"
done
install -m 0755 "$HERE/setup-rootfs.sh" "$ROOTFS/tmp/setup-rootfs.sh"
install -m 0644 "$HERE/packages.txt" "$ROOTFS/tmp/packages.txt"
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    chroot "$ROOTFS" /bin/sh /tmp/setup-rootfs.sh || die "setup-rootfs.sh failed in the chroot"
rm -f "$ROOTFS/tmp/setup-rootfs.sh" "$ROOTFS/tmp/packages.txt"
[ "$(recipe)" = "$RECIPE" ] || die "images/python changed while building; run the build again"
say "      done in $(elapsed "$t") (rootfs $(du -sh --one-file-system "$ROOTFS" | cut -f1))"

# ------------------------------------------------------------ 3 import
t="$(now)"
say "[3/4] tar | docker import"
OLD_ID="$(docker image inspect -f '{{.Id}}' "$TAG" 2>/dev/null || true)"
tar --numeric-owner -C "$ROOTFS" -cf - . | docker import \
    --change "LABEL ci.recipe=$RECIPE" \
    --change 'LABEL ci.image=python' \
    --change 'LABEL ci.protocol=1' \
    --change 'USER 1000:1000' \
    --change 'WORKDIR /workspace' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change 'ENV SANDBOX_IPC=/run/ci/ipc.sock' \
    --change 'ENV HOME=/tmp/home' \
    --change 'ENV MPLBACKEND=module://ci_display' \
    --change 'ENV MPLCONFIGDIR=/tmp/.mpl' \
    --change 'ENV PYTHONPATH=/opt/ci' \
    --change 'CMD ["/usr/bin/python3", "-I", "/opt/ci/supervisor.py"]' \
    - "$TAG" >/dev/null || die "docker import failed"
NEW_ID="$(docker image inspect -f '{{.Id}}' "$TAG")"
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$NEW_ID" ]; then
    docker image rm "$OLD_ID" >/dev/null 2>&1 || true   # still used by a container: kept
fi
say "      done in $(elapsed "$t")"

# ------------------------------------------------------------ 4 check
t="$(now)"
say "[4/4] checking the image"
docker run --rm --network none --read-only --tmpfs /tmp "$TAG" /usr/bin/python3 -I -c '
import os, sys
sys.path.insert(0, "/opt/ci")
import numpy, pandas, scipy, matplotlib, openpyxl, ci_frame, kernel, supervisor
assert os.getuid() == 1000 and os.getcwd() == "/workspace", (os.getuid(), os.getcwd())
assert os.path.isdir("/opt/ci/mplcache")
' || die "the new image failed its check"
say "      done in $(elapsed "$t")"

SIZE="$(docker image inspect -f '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1000000 }')"
say "built $TAG ${NEW_ID#sha256:} ($SIZE) in $(elapsed "$T_ALL"), label ci.recipe=$RECIPE"
