#!/usr/bin/env bash
# Runs the runner's own tests (images/python/runner/test_runner.py) INSIDE a
# built image, with that image's Python (3.13 on trixie) and packages,
# without network: what the runner suite says of an image other than the
# host's Python. As on the host (make test runs it as root), the tests run
# as root with CAP_SYS_PTRACE: they watch the kernel through /proc (wchan,
# signal masks), which a non-dumpable process shows only to a tracer.
#
# usage: images/python/runner-in-image.sh TAG [pytest args...]
#
# The images carry no pytest; the host's (Debian's python3-pytest, pure
# Python) is mounted read-only beside the tree (read-only at /src).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 TAG [pytest args...]" >&2; exit 2; }
TAG="$1"
shift
DIST=/usr/lib/python3/dist-packages
mounts=()
for m in _pytest pytest pluggy iniconfig attr attrs packaging py py.py; do
    [ -e "$DIST/$m" ] || { echo "$0: $DIST/$m missing (apt-get install python3-pytest)" >&2; exit 1; }
    mounts+=(-v "$DIST/$m:/ci-pytest/$m:ro")
done
exec docker run --rm --network none --user 0:0 --cap-add SYS_PTRACE --tmpfs /tmp:exec \
    --label ci.test=runner-in-image \
    -v "$ROOT:/src:ro" \
    "${mounts[@]}" \
    -e PYTHONPATH=/ci-pytest -e PYTHONDONTWRITEBYTECODE=1 -e HOME=/tmp \
    -w /tmp "$TAG" /usr/bin/python3 -m pytest -q -p no:cacheprovider --rootdir /src \
    /src/images/python/runner "$@"
