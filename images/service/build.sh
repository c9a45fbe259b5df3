#!/usr/bin/env bash
# Builds the images of the service itself from Debian packages, without a
# container registry (issue 15): debootstrap --variant=minbase of Debian 12
# (bookworm: the suite the host built build/ci-daemon on, so the shared
# libraries match) from this machine's own apt mirror, the image's files, then
# tar | docker import with its entrypoint and labels.
#
#   ci/daemon:latest  build/ci-daemon and build/ci-ctl, the runtime libraries
#                     ldd names for them (mapped to their Debian packages with
#                     dpkg -S, never guessed) and iptables (network.c runs it to
#                     fence the sandbox bridge); nothing else beyond minbase.
#   ci/engine:latest  docker.io, containerd, runc, iptables and an entrypoint
#                     (engine-entrypoint.sh) that starts dockerd and loads the
#                     sandbox image's tarball when the image is missing.
#   ci/redis:latest   redis-server, for the compose files (no registry here
#                     means no redis image to pull either).
#   sandbox tarball   build/service-images/python.tar: `docker save` of the
#                     sandbox image (ci/python:latest) with python.tar.meta
#                     (tag and ci.recipe), which the engine loads at start.
#
# Each image carries ci.recipe=<sha256 of this script, its Dockerfile, its
# files and package list; for ci/daemon also both binaries>: an image with the
# current recipe is not rebuilt, a tarball with the current recipe not saved.
#
# usage: images/service/build.sh [--force] [--check] [--mirror URL] [daemon|engine|redis|sandbox...]
#   (no names: all four). Needs root, debootstrap and a running Docker engine.
#   --check   build nothing: print "current NAME" or "stale NAME" for each, and
#             exit 1 when one is stale (what `make service-images` would redo)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SUITE=bookworm
FORCE=0
CHECK=0
MIRROR=""
OUT="${CI_SERVICE_IMAGES_OUT:-$ROOT/build/service-images}"
SANDBOX_TAG="${CI_SANDBOX_IMAGE:-ci/python:latest}"
DAEMON_BIN="${CI_DAEMON_BIN:-$ROOT/build/ci-daemon}"
CTL_BIN="${CI_CTL_BIN:-$ROOT/build/ci-ctl}"

say() { printf '[images/service] %s\n' "$*"; }
die() { printf 'images/service/build.sh: error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

NAMES=()
while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --check) CHECK=1 ;;
        --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; MIRROR="$2"; shift ;;
        --mirror=*) MIRROR="${1#--mirror=}" ;;
        daemon|engine|redis|sandbox) NAMES+=("$1") ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
[ ${#NAMES[@]} -gt 0 ] || NAMES=(daemon engine redis sandbox)

# The mirror lookup of the sandbox image's build (images/python/build.sh's
# find_mirror), taken from that script as it stands rather than copied, so
# both builds read the machine's apt sources the same way. That script runs
# when sourced, so only the function's text is evaluated.
eval "$(sed -n '/^find_mirror() {$/,/^}$/p' "$ROOT/images/python/build.sh")"
declare -F find_mirror >/dev/null || die "no find_mirror() in images/python/build.sh"

command -v docker >/dev/null || die "docker is not installed"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "cannot reach the Docker engine"

# ------------------------------------------------------------ recipes
sha() { sha256sum <"$1" | cut -d' ' -f1; }
# Files of image $1: what goes into its recipe besides this script.
image_files() {
    case "$1" in
        daemon) printf '%s\n' "$HERE/daemon.Dockerfile" "$HERE/packages.daemon.txt" ;;
        engine) printf '%s\n' "$HERE/engine.Dockerfile" "$HERE/packages.engine.txt" "$HERE/engine-entrypoint.sh" ;;
        redis) printf '%s\n' "$HERE/redis.Dockerfile" "$HERE/packages.redis.txt" ;;
    esac
}
# The runtime libraries' packages of the two binaries: ldd's paths, asked of
# dpkg in one call under each name they may have (usrmerge: dpkg may know a
# library by /lib/... or /usr/lib/..., ldd may give either); a library that
# no package owns fails the build.
lib_packages() {
    local libs owned lib real found
    libs="$(ldd "$DAEMON_BIN" "$CTL_BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' | LC_ALL=C sort -u)"
    [ -n "$libs" ] || die "ldd names no library of $DAEMON_BIN"
    owned="$(printf '%s\n' "$libs" | while IFS= read -r lib; do
            real="$(readlink -f "$lib")"
            printf '%s\n' "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr${lib#/usr}" "/usr${real#/usr}"
        done | LC_ALL=C sort -u | xargs dpkg -S 2>/dev/null || true)"
    while IFS= read -r lib; do
        real="$(readlink -f "$lib")"
        found="$(printf '%s\n' "$owned" | awk -v a="${lib#/usr}" -v b="${real#/usr}" '
            { p = $NF; sub(/^\/usr/, "", p) } p == a || p == b { sub(/:.*/, "", $1); print $1; exit }')"
        [ -n "$found" ] || die "no Debian package owns $lib (ldd of the binaries)"
        printf '%s\n' "$found"
    done <<<"$libs" | LC_ALL=C sort -u
}
list_packages() { sed -e 's/#.*//' "$1" | tr -s ' \t' '\n\n' | awk 'NF'; }
packages_of() {
    { list_packages "$HERE/packages.$1.txt"; [ "$1" != daemon ] || lib_packages; } | awk '!seen[$0]++' | paste -sd, -
}
recipe_of() {
    {
        printf 'suite %s\nimage %s\nbuild.sh %s\n' "$SUITE" "$1" "$(sha "$HERE/build.sh")"
        image_files "$1" | while IFS= read -r f; do printf '%s %s\n' "${f#"$HERE"/}" "$(sha "$f")"; done
        printf 'packages %s\n' "$(packages_of "$1")"
        if [ "$1" = daemon ]; then
            printf 'ci-daemon %s\nci-ctl %s\n' "$(sha "$DAEMON_BIN")" "$(sha "$CTL_BIN")"
        fi
    } | sha256sum | cut -d' ' -f1
}
image_recipe() { docker image inspect -f '{{ index .Config.Labels "ci.recipe" }}' "$1" 2>/dev/null || true; }

# ------------------------------------------------------------ one image
WORK=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r |
            while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_image() {
    local name="$1" tag="ci/$1:latest" t0 t recipe pkgs rootfs
    t0="$(now)"
    if [ "$name" = daemon ]; then
        [ -x "$DAEMON_BIN" ] && [ -x "$CTL_BIN" ] || die "build $DAEMON_BIN and $CTL_BIN first (make all)"
    fi
    recipe="$(recipe_of "$name")"
    if [ "$FORCE" = 0 ] && [ "$(image_recipe "$tag")" = "$recipe" ]; then
        say "$tag is up to date (recipe ${recipe:0:12})"
        return
    fi
    [ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"
    command -v debootstrap >/dev/null || die "debootstrap is not installed"
    if [ -z "$MIRROR" ]; then
        MIRROR="$(find_mirror "$SUITE" || true)"
        [ -n "$MIRROR" ] || die "no Debian $SUITE mirror in the machine's apt sources; pass --mirror URL"
    fi
    pkgs="$(packages_of "$name")"
    mkdir -p /var/tmp
    WORK="$(mktemp -d /var/tmp/ci-service-image.XXXXXX)"
    rootfs="$WORK/rootfs"
    say "building $tag (recipe ${recipe:0:12}) from $MIRROR: minbase + $pkgs"
    t="$(now)"
    if ! nice -n 10 debootstrap --variant=minbase --components=main --include="$pkgs" \
            "$SUITE" "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
        tail -n 30 "$WORK/debootstrap.log" >&2 || true
        die "debootstrap of $tag failed (mirror $MIRROR)"
    fi
    say "  debootstrap: $(elapsed "$t")"
    # What a running container never needs: apt's lists and caches, docs,
    # man pages, locales other than C.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/debootstrap 2>/dev/null || true
    local changes=()
    case "$name" in
    daemon)
        # The binaries without their debug sections (the recipe hashes them as built).
        install -d -m 0755 "$rootfs/usr/local/bin"
        objcopy --strip-debug "$DAEMON_BIN" "$rootfs/usr/local/bin/ci-daemon"
        objcopy --strip-debug "$CTL_BIN" "$rootfs/usr/local/bin/ci-ctl"
        chmod 0755 "$rootfs/usr/local/bin/ci-daemon" "$rootfs/usr/local/bin/ci-ctl"
        install -d -m 0755 "$rootfs/var/lib/ci" "$rootfs/run/ci"
        # every library resolves in the image, or the build fails here
        if chroot "$rootfs" /usr/bin/ldd /usr/local/bin/ci-daemon /usr/local/bin/ci-ctl 2>&1 | grep -q 'not found'; then
            chroot "$rootfs" /usr/bin/ldd /usr/local/bin/ci-daemon /usr/local/bin/ci-ctl | grep 'not found' >&2
            die "a library of the binaries is missing from $tag"
        fi
        changes=(--change 'ENTRYPOINT ["/usr/local/bin/ci-daemon"]'
                 --change 'ENV CID_STATE_DIR=/var/lib/ci')
        ;;
    engine)
        install -m 0755 "$HERE/engine-entrypoint.sh" "$rootfs/usr/local/sbin/ci-engine"
        install -d -m 0755 "$rootfs/var/lib/ci" "$rootfs/run/ci-engine" "$rootfs/images"
        changes=(--change 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/sbin/ci-engine"]'
                 --change 'VOLUME /var/lib/docker')
        ;;
    redis)
        changes=(--change 'USER redis'
                 --change 'ENTRYPOINT ["/usr/bin/redis-server"]'
                 --change 'CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]')
        ;;
    esac
    t="$(now)"
    local old
    old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
    tar --numeric-owner -C "$rootfs" -cf - . | nice -n 10 docker import \
        --change "LABEL ci.recipe=$recipe" \
        --change "LABEL ci.image=$name" \
        --change "LABEL ci.suite=$SUITE" \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        "${changes[@]}" - "$tag" >/dev/null || die "docker import of $tag failed"
    local new
    new="$(docker image inspect -f '{{.Id}}' "$tag")"
    [ -z "$old" ] || [ "$old" = "$new" ] || docker image rm "$old" >/dev/null 2>&1 || true
    say "  import: $(elapsed "$t")"
    rm -rf --one-file-system "$WORK"
    WORK=""
    say "built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{ printf "%.0f MB", $1 / 1e6 }')) in $(elapsed "$t0")"
}

# ------------------------------------------------------------ sandbox tarball
# The engine has no registry to pull from: it loads this at start when the
# image is missing (engine-entrypoint.sh). Saved again only when the sandbox
# image's recipe changed; written under a temporary name, then renamed.
save_sandbox() {
    local t0 recipe meta="$OUT/python.tar.meta"
    t0="$(now)"
    recipe="$(image_recipe "$SANDBOX_TAG")"
    [ -n "$recipe" ] || die "no sandbox image $SANDBOX_TAG with a ci.recipe label (make image)"
    if [ "$FORCE" = 0 ] && [ -f "$OUT/python.tar" ] && [ -f "$meta" ] &&
        grep -qx "recipe $recipe" "$meta" && grep -qx "tag $SANDBOX_TAG" "$meta"; then
        say "$OUT/python.tar is up to date ($SANDBOX_TAG, recipe ${recipe:0:12})"
        return
    fi
    mkdir -p "$OUT"
    nice -n 10 docker save -o "$OUT/python.tar.tmp" "$SANDBOX_TAG" || die "docker save $SANDBOX_TAG failed"
    chmod 0644 "$OUT/python.tar.tmp"
    mv -f "$OUT/python.tar.tmp" "$OUT/python.tar"
    printf 'tag %s\nrecipe %s\n' "$SANDBOX_TAG" "$recipe" >"$meta.tmp" && mv -f "$meta.tmp" "$meta"
    say "saved $SANDBOX_TAG to $OUT/python.tar ($(du -h "$OUT/python.tar" | cut -f1)) in $(elapsed "$t0")"
}

if [ "$CHECK" = 1 ]; then
    stale=0
    for n in "${NAMES[@]}"; do
        if [ "$n" = sandbox ]; then
            r="$(image_recipe "$SANDBOX_TAG")"
            if [ -n "$r" ] && [ -f "$OUT/python.tar" ] && grep -qx "recipe $r" "$OUT/python.tar.meta" 2>/dev/null; then
                echo "current sandbox"
            else
                echo "stale sandbox"; stale=1
            fi
        elif [ "$(image_recipe "ci/$n:latest")" = "$(recipe_of "$n")" ]; then
            echo "current $n"
        else
            echo "stale $n"; stale=1
        fi
    done
    exit "$stale"
fi

T_ALL="$(now)"
for n in "${NAMES[@]}"; do
    case "$n" in
        sandbox) save_sandbox ;;
        *) build_image "$n" ;;
    esac
done
say "done in $(elapsed "$T_ALL")"
