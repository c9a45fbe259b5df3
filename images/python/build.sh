#!/usr/bin/env bash
# Builds a sandbox image (default ci/python:latest) from Debian packages,
# without a container registry:
#
#   debootstrap (SUITE, minbase + the package lists) from this machine's own
#   apt mirror -> runner files into /opt/ci -> setup-rootfs.sh in a chroot ->
#   the profile's extra files -> the package versions into
#   /opt/ci/packages.json -> tar | docker import with the image's user, env,
#   workdir, CMD and labels.
#
# The package list is packages.txt, then packages.SUITE.txt when it exists,
# then the profile's packages.txt: one name a line, '#' starts a comment, and
# a line "-NAME" takes NAME out of what the lists before it named.
#
# Labels: ci.recipe=<sha256 of this script, the lists, setup-rootfs.sh, the
# runner files shipped in /opt/ci, the suite and the profile's files>;
# ci.image (the profile's name), ci.protocol, ci.suite, ci.debian,
# ci.python, and ci.packages=NAME=VERSION,... (the listed packages as dpkg
# installed them; GET /v1/images reads them). When the image already carries
# the recipe of the current tree, nothing is rebuilt.
#
# usage: images/python/build.sh [--force] [--tag TAG] [--suite SUITE]
#                               [--profile DIR] [--mirror URL] [--print]
#   --force         rebuild even when the image is up to date
#   --tag TAG       image tag (default ci/python:latest)
#   --suite SUITE   Debian suite (default trixie, Debian 13; bookworm builds
#                   Debian 12); overrides the profile's DIR/suite
#   --profile DIR   a profile: DIR/packages.txt (more packages, or -NAME to
#                   drop one), DIR/files/ (copied over the image's root),
#                   DIR/setup.sh (run in the image as root after that) and
#                   DIR/suite (its Debian suite, one word: profiles/bookworm
#                   is Debian 12); its name (label ci.image) is DIR's base name
#   --mirror URL    Debian mirror (default: the first URI of the machine's apt
#                   sources for SUITE, else the one for the host's own suite:
#                   one archive serves every suite)
#   --print         print what would be built (tag, name, suite, recipe, the
#                   merged package list) and exit: no root, nothing built
# Needs root (debootstrap, chroot), debootstrap and a running Docker engine.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAG="ci/python:latest"
# The default suite; a profile's DIR/suite, then --suite, override it.
DEFAULT_SUITE="trixie"
SUITE=""
FORCE=0
MIRROR=""
PROFILE=""
PRINT=0

say() { printf '[images/python] %s\n' "$*"; }
die() { printf 'images/python/build.sh: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift ;;
        --tag=*) TAG="${1#--tag=}" ;;
        --suite) [ $# -ge 2 ] || die "--suite needs a value"; SUITE="$2"; shift ;;
        --suite=*) SUITE="${1#--suite=}" ;;
        --profile) [ $# -ge 2 ] || die "--profile needs a value"; PROFILE="$2"; shift ;;
        --profile=*) PROFILE="${1#--profile=}" ;;
        --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; MIRROR="$2"; shift ;;
        --mirror=*) MIRROR="${1#--mirror=}" ;;
        --print) PRINT=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

if [ -n "$PROFILE" ]; then
    [ -d "$PROFILE" ] || die "--profile $PROFILE: not a directory"
    PROFILE="$(cd "$PROFILE" && pwd)"
    [ -f "$PROFILE/packages.txt" ] || [ -d "$PROFILE/files" ] || [ -f "$PROFILE/setup.sh" ] \
        || [ -f "$PROFILE/suite" ] \
        || die "--profile $PROFILE: has none of packages.txt, files/, setup.sh, suite"
    # The profile's own suite (profiles/bookworm keeps Debian 12), unless
    # --suite names one.
    if [ -z "$SUITE" ] && [ -f "$PROFILE/suite" ]; then
        SUITE="$(sed -e 's/#.*//' "$PROFILE/suite" | tr -d ' \t\n')"
        [ -n "$SUITE" ] || die "--profile $PROFILE: its suite file names no suite"
    fi
fi
[ -n "$SUITE" ] || SUITE="$DEFAULT_SUITE"
# A suite is a name debootstrap knows (bookworm, trixie, ...): it goes into
# paths, a label and debootstrap's command line.
case "$SUITE" in
    *[!a-z0-9-]*) die "--suite '$SUITE': a Debian suite name (trixie, bookworm)" ;;
esac
# The profile's name (label ci.image): python on the default suite,
# python-SUITE on another one, a profile directory's base name.
NAME="python"
[ "$SUITE" = "$DEFAULT_SUITE" ] || NAME="python-$SUITE"
if [ -n "$PROFILE" ]; then
    NAME="$(basename "$PROFILE")"
    case "$NAME" in
        *[!a-z0-9_-]*) die "--profile $PROFILE: its name '$NAME' must be [a-z0-9_-] (it is the image's ci.image label)" ;;
    esac
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
T_ALL="$(now)"

# ------------------------------------------------------------ package lists
# The lists, in order: the base, the suite's changes, the profile's.
package_lists() {
    printf '%s\n' "$HERE/packages.txt"
    [ ! -f "$HERE/packages.$SUITE.txt" ] || printf '%s\n' "$HERE/packages.$SUITE.txt"
    [ -z "$PROFILE" ] || [ ! -f "$PROFILE/packages.txt" ] || printf '%s\n' "$PROFILE/packages.txt"
}
# The merged list, one name a line, in first-named order: "-NAME" drops NAME.
packages() {
    package_lists | while IFS= read -r f; do sed -e 's/#.*//' "$f"; done \
        | tr -s ' \t' '\n\n' | awk '
            /^-/ { drop = substr($0, 2); if (drop in seen) { delete seen[drop] }; next }
            NF && !($0 in seen) { seen[$0] = ++n; order[n] = $0 }
            END { for (i = 1; i <= n; i++) if ((order[i] in seen) && seen[order[i]] == i) print order[i] }'
}

# ------------------------------------------------------------ recipe hash
# Files shipped in /opt/ci: everything in runner/ except tests and caches.
runner_files() {
    (cd "$HERE/runner" && find . -type f \
        ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' \
        ! -name 'test_*.py' ! -name 'conftest.py' ! -name '*.pyc' \
        | sed 's|^\./||' | LC_ALL=C sort)
}
# The profile's extra files, relative to DIR/files.
profile_files() {
    [ -n "$PROFILE" ] && [ -d "$PROFILE/files" ] || return 0
    (cd "$PROFILE/files" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort)
}
for f in build.sh packages.txt setup-rootfs.sh runner/supervisor.py runner/kernel.py; do
    [ -f "$HERE/$f" ] || die "missing $HERE/$f"
done
recipe() {
    {
        printf 'suite %s\nname %s\n' "$SUITE" "$NAME"
        for f in build.sh setup-rootfs.sh; do
            printf '%s %s\n' "$f" "$(sha256sum <"$HERE/$f" | cut -d' ' -f1)"
        done
        package_lists | while IFS= read -r f; do
            printf 'list %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)"
        done
        runner_files | while IFS= read -r f; do
            printf 'runner/%s %s\n' "$f" "$(sha256sum <"$HERE/runner/$f" | cut -d' ' -f1)"
        done
        if [ -n "$PROFILE" ] && [ -f "$PROFILE/setup.sh" ]; then
            printf 'setup.sh %s\n' "$(sha256sum <"$PROFILE/setup.sh" | cut -d' ' -f1)"
        fi
        profile_files | while IFS= read -r f; do
            if [ -L "$PROFILE/files/$f" ]; then
                printf 'files/%s -> %s\n' "$f" "$(readlink "$PROFILE/files/$f")"
            else
                printf 'files/%s %s %s\n' "$f" "$(stat -c %a "$PROFILE/files/$f")" \
                    "$(sha256sum <"$PROFILE/files/$f" | cut -d' ' -f1)"
            fi
        done
    } | sha256sum | cut -d' ' -f1
}
RECIPE="$(recipe)"
PACKAGES="$(packages | paste -sd, -)"
[ -n "$PACKAGES" ] || die "the package lists name no packages"
case ",$PACKAGES," in
    *,python3,*) ;;
    *) die "the package lists drop python3: the runner needs it" ;;
esac
if [ "$PRINT" = 1 ]; then
    printf 'tag %s\nname %s\nsuite %s\nrecipe %s\npackages %s\n' "$TAG" "$NAME" "$SUITE" "$RECIPE" \
        "$(printf '%s' "$PACKAGES" | tr , ' ')"
    exit 0
fi

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

# The first URI for suite $1 in the machine's apt sources: one-line
# "deb [opts] URI bookworm comps" or deb822 "Types: deb / URIs: / Suites:".
find_mirror() {
    local f suite="$1"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        case "$f" in
        *.sources)
            awk -v suite="$suite" '
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
            awk -v suite="$suite" '
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
    MIRROR="$(find_mirror "$SUITE" || true)"
fi
if [ -z "$MIRROR" ]; then
    # A host on bookworm building trixie: the archive that serves the host's
    # own suite serves every suite (deb.debian.org/debian does).
    HOST_SUITE="$(. /etc/os-release 2>/dev/null && printf '%s' "${VERSION_CODENAME:-}")"
    [ -z "$HOST_SUITE" ] || MIRROR="$(find_mirror "$HOST_SUITE" || true)"
    [ -n "$MIRROR" ] || die "no Debian $SUITE${HOST_SUITE:+ or $HOST_SUITE} mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/*.{list,sources}; pass --mirror URL"
fi
case "$MIRROR" in
    http://*|https://*|file:/*) ;;
    *) die "unsupported mirror URI '$MIRROR' (need http://, https:// or file:/)" ;;
esac


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
say "[1/5] debootstrap --variant=minbase (about 2 minutes; log in $WORK/debootstrap.log)"
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
say "[2/5] runner files into /opt/ci, user sandbox (1000:1000), font cache, strip"
install -d -m 0755 "$ROOTFS/opt/ci"
runner_files | while IFS= read -r f; do
    install -D -m 0644 "$HERE/runner/$f" "$ROOTFS/opt/ci/$f"
done
install -m 0755 "$HERE/setup-rootfs.sh" "$ROOTFS/tmp/setup-rootfs.sh"
packages >"$ROOTFS/tmp/packages.txt"
chmod 0644 "$ROOTFS/tmp/packages.txt"
in_root() {
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        chroot "$ROOTFS" "$@"
}
in_root /bin/sh /tmp/setup-rootfs.sh || die "setup-rootfs.sh failed in the chroot"
rm -f "$ROOTFS/tmp/setup-rootfs.sh"
say "      done in $(elapsed "$t") (rootfs $(du -sh --one-file-system "$ROOTFS" | cut -f1))"

# ------------------------------------------------------------ 3 profile, record
t="$(now)"
say "[3/5] ${PROFILE:+the files and setup.sh of profile $NAME, }package versions into /opt/ci/packages.json"
if [ -n "$PROFILE" ] && [ -d "$PROFILE/files" ]; then
    # Copied inside the chroot, so that a symlink in the root filesystem
    # (/etc/alternatives/* are absolute) resolves there and never on the
    # host; a file replaces what is there, owned by root, modes kept.
    mkdir "$ROOTFS/tmp/ci-profile-files"
    tar -C "$PROFILE/files" --no-same-owner -cf - . | tar -C "$ROOTFS/tmp/ci-profile-files" -xf - \
        || die "copying $PROFILE/files failed"
    in_root /bin/cp -a --no-preserve=ownership --remove-destination /tmp/ci-profile-files/. / \
        || die "installing $PROFILE/files in the image failed"
    rm -rf "$ROOTFS/tmp/ci-profile-files"
    in_root /usr/bin/python3 -m compileall -q /opt/ci >/dev/null || die "compileall /opt/ci failed"
fi
if [ -n "$PROFILE" ] && [ -f "$PROFILE/setup.sh" ]; then
    install -m 0755 "$PROFILE/setup.sh" "$ROOTFS/tmp/profile-setup.sh"
    in_root /bin/sh -e /tmp/profile-setup.sh || die "$PROFILE/setup.sh failed in the chroot"
    rm -f "$ROOTFS/tmp/profile-setup.sh"
fi
# What dpkg installed, recorded inside the image (for the sandbox's code and
# for a person reading it) and in the labels (for GET /v1/images, which reads
# them through the engine without starting a container).
# (setup-rootfs.sh emptied /tmp: the merged list goes in again)
packages >"$ROOTFS/tmp/packages.txt"
cat >"$ROOTFS/tmp/record.py" <<'RECORD'
import json, platform, subprocess, sys
suite, name, recipe = sys.argv[1:4]
out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"],
                     check=True, capture_output=True, text=True).stdout
installed = {}
for line in out.splitlines():
    pkg, ver, st = line.split("\t")
    if st.startswith("ii"):
        installed[pkg] = ver
with open("/tmp/packages.txt") as f:
    listed = [l.strip() for l in f if l.strip()]
missing = [p for p in listed if p not in installed]
if missing:
    sys.exit("listed but not installed: " + " ".join(missing))
with open("/etc/debian_version") as f:
    debian = f.read().strip()
rec = {"image": name, "suite": suite, "debian": debian, "python": platform.python_version(),
       "recipe": recipe, "listed": {p: installed[p] for p in listed}, "installed": installed}
with open("/opt/ci/packages.json", "w") as f:
    json.dump(rec, f, indent=1, sort_keys=True)
    f.write("\n")
print(debian, platform.python_version(), ",".join("%s=%s" % (p, installed[p]) for p in listed))
RECORD
RECORD="$(in_root /usr/bin/python3 -I /tmp/record.py "$SUITE" "$NAME" "$RECIPE")" \
    || die "recording the package versions failed"
chmod 0644 "$ROOTFS/opt/ci/packages.json"
rm -f "$ROOTFS/tmp/packages.txt" "$ROOTFS/tmp/record.py"
read -r DEBIAN_VERSION PYTHON_VERSION PACKAGE_LABEL <<<"$RECORD"
[ -n "$PACKAGE_LABEL" ] || die "no package versions recorded"
[ "$(recipe)" = "$RECIPE" ] || die "images/python changed while building; run the build again"
say "      done in $(elapsed "$t") (Debian $DEBIAN_VERSION, Python $PYTHON_VERSION)"

# ------------------------------------------------------------ 3 import
t="$(now)"
say "[4/5] tar | docker import"
OLD_ID="$(docker image inspect -f '{{.Id}}' "$TAG" 2>/dev/null || true)"
tar --numeric-owner -C "$ROOTFS" -cf - . | docker import \
    --change "LABEL ci.recipe=$RECIPE" \
    --change "LABEL ci.image=$NAME" \
    --change 'LABEL ci.protocol=1' \
    --change "LABEL ci.suite=$SUITE" \
    --change "LABEL ci.debian=$DEBIAN_VERSION" \
    --change "LABEL ci.python=$PYTHON_VERSION" \
    --change "LABEL ci.packages=$PACKAGE_LABEL" \
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
say "[5/5] checking the image"
docker run --rm --network none --read-only --tmpfs /tmp "$TAG" /usr/bin/python3 -I -c '
import os, sys
sys.path.insert(0, "/opt/ci")
import json, numpy, pandas, scipy, matplotlib, openpyxl, ci_frame, kernel, supervisor
import sklearn, statsmodels.api, numexpr, bottleneck, networkx, xlrd, bs4, IPython
assert os.getuid() == 1000 and os.getcwd() == "/workspace", (os.getuid(), os.getcwd())
assert os.path.isdir("/opt/ci/mplcache")
assert json.load(open("/opt/ci/packages.json"))["listed"]["python3"]
' || die "the new image failed its check"
say "      done in $(elapsed "$t")"

SIZE="$(docker image inspect -f '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1000000 }')"
say "built $TAG ${NEW_ID#sha256:} ($SIZE) in $(elapsed "$T_ALL"), label ci.recipe=$RECIPE"
