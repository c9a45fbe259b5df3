# ci/daemon:latest for machines that can pull from a registry. build.sh makes
# the same image from Debian packages with debootstrap (no registry): Debian 12
# (the binaries are built on it), the binaries' runtime libraries, iptables.
# The build context is the repository's root, after `make all`:
#
#   docker build -f images/service/daemon.Dockerfile -t ci/daemon:latest .
#
# The library list below is what build.sh reads from ldd on this tree's
# binaries (libevent, OpenSSL, curl, yajl, hiredis, uuid); build.sh is the
# authority, this file follows it.
FROM debian:bookworm-slim
ARG CI_RECIPE=dockerfile
LABEL ci.recipe=$CI_RECIPE ci.image=daemon ci.suite=bookworm
RUN set -eux; apt-get update; \
    apt-get install -y --no-install-recommends iptables libevent-2.1-7 libevent-core-2.1-7 \
        libevent-openssl-2.1-7 libssl3 libcurl4 libyajl2 libhiredis0.14 libuuid1; \
    rm -rf /var/lib/apt/lists/*; mkdir -p /var/lib/ci /run/ci
COPY build/ci-daemon build/ci-ctl /usr/local/bin/
ENV CID_STATE_DIR=/var/lib/ci LANG=C.UTF-8
ENTRYPOINT ["/usr/local/bin/ci-daemon"]
