# ci/engine:latest for machines that can pull from a registry; build.sh makes
# the same image with debootstrap. The build context is images/service:
#
#   docker build -f images/service/engine.Dockerfile -t ci/engine:latest images/service
#
# Run it as the compose files do (not --privileged: see docs/deploy.md).
FROM debian:bookworm-slim
ARG CI_RECIPE=dockerfile
LABEL ci.recipe=$CI_RECIPE ci.image=engine ci.suite=bookworm
RUN set -eux; apt-get update; \
    apt-get install -y --no-install-recommends docker.io containerd runc iptables tini; \
    rm -rf /var/lib/apt/lists/*; mkdir -p /var/lib/ci /run/ci-engine /images
COPY engine-entrypoint.sh /usr/local/sbin/ci-engine
VOLUME /var/lib/docker
ENV LANG=C.UTF-8
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/sbin/ci-engine"]
