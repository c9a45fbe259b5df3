#!/bin/sh
# ci-engine: the entrypoint of ci/engine:latest (under tini). Starts dockerd
# on a socket in $CI_ENGINE_SOCKET_DIR (a volume the daemon's container
# mounts too), waits for it, then loads every sandbox image tarball in
# /images (NAME.tar with NAME.tar.meta: "tag TAG" and "recipe SHA256", written
# by images/service/build.sh) whose image is missing or carries another
# ci.recipe: no registry here, so this is how the engine gets the sandbox
# image. Idempotent: with the image already in /var/lib/docker (a volume),
# nothing is loaded. Writes $CI_ENGINE_SOCKET_DIR/ready when all is loaded
# (the healthcheck looks for it), and on SIGTERM stops dockerd, which stops
# its containers.
set -eu
dir=${CI_ENGINE_SOCKET_DIR:-/run/ci-engine}
sock=$dir/docker.sock
log() { printf 'ci-engine: %s\n' "$*" >&2; }

mkdir -p "$dir"
rm -f "$dir/ready" "$sock"
# The engine's own settings come as arguments (CMD), e.g. --storage-driver.
dockerd --host "unix://$sock" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT
export DOCKER_HOST="unix://$sock"

i=0
until docker version --format '{{.Server.Version}}' >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { log "dockerd exited during start"; wait "$pid" || exit $?; exit 1; }
    i=$((i + 1))
    [ "$i" -le 600 ] || { log "dockerd did not answer within 60 s"; kill -TERM "$pid"; exit 1; }
    sleep 0.1
done
log "dockerd $(docker version --format '{{.Server.Version}}') answers on $sock"

for meta in /images/*.tar.meta; do
    [ -f "$meta" ] || continue
    tarball=${meta%.meta}
    tag=$(sed -n 's/^tag //p' "$meta")
    recipe=$(sed -n 's/^recipe //p' "$meta")
    [ -n "$tag" ] && [ -f "$tarball" ] || { log "skipping $meta: no tag or no $tarball"; continue; }
    have=$(docker image inspect -f '{{ index .Config.Labels "ci.recipe" }}' "$tag" 2>/dev/null || true)
    if [ -n "$have" ] && [ "$have" = "$recipe" ]; then
        log "$tag present (recipe $(printf %.12s "$recipe")): not loaded"
        continue
    fi
    t0=$(date +%s%N)
    docker load -q -i "$tarball" >/dev/null || { log "docker load $tarball failed"; kill -TERM "$pid"; exit 1; }
    ms=$((($(date +%s%N) - t0) / 1000000))
    log "loaded $tag from $tarball in $ms ms"
done
: >"$dir/ready"
log "ready"

# wait returns early when the trap runs; then wait for dockerd's own exit.
while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" && rc=0 || rc=$?
done
rm -f "$dir/ready"
exit "${rc:-0}"
