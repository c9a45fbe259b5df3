# ci/redis:latest for machines that can pull from a registry (where the
# official redis image does as well); build.sh makes it with debootstrap.
#
#   docker build -f images/service/redis.Dockerfile -t ci/redis:latest images/service
FROM debian:bookworm-slim
ARG CI_RECIPE=dockerfile
LABEL ci.recipe=$CI_RECIPE ci.image=redis ci.suite=bookworm
RUN set -eux; apt-get update; apt-get install -y --no-install-recommends redis-server; \
    rm -rf /var/lib/apt/lists/*
USER redis
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
