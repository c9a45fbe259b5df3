#!/usr/bin/env bash
# The machine set-up of `make run` and `make test` on Debian 12, one idempotent
# step, for a set of packages:
#
#   deploy/setup.sh [run|test]        set this machine up for SET (as root)
#   deploy/setup.sh --list run|test   print every Debian package SET may
#                                     install, one a line, and nothing else
#                                     (no root, no network)
#
#   run    what the daemon needs to run and what builds it: the compiler, the
#          -dev libraries and llhttp's sources, the engine, Redis, iptables,
#          bubblewrap and python3 (the stateless tier), e2fsprogs (workspace
#          disks), the CA certificates, debootstrap (the sandbox image). `make
#          run` uses it.
#   test   run, and the test toolchain: pytest and xdist, valgrind, clang and
#          clang-format, chromium and nodejs, prometheus (promtool), zsh,
#          docker-compose, redis-sentinel, ...; and the npm test peers (npm ci
#          of six directories, npm itself installed when one is needed). `make
#          test`, `make bench`, `make soak`, ... use it.
#
# No argument means test: every message that says "run deploy/setup.sh" (the
# tests' own, for a missing tool) and every machine set up before the sets
# existed keep meaning the whole set-up, so a bare call never leaves a test
# machine half set up. The lean set is asked for by name, as `make run` does;
# the Makefile's targets always name their set.
#
# The steps, each checking first, so a machine already set up costs about a second:
#   1. install the set's Debian packages that are missing,
#   2. (test) the npm test peers whose node_modules were not made from their lock,
#   3. start dockerd when no engine answers (waiting on the socket, bounded),
#   4. start or reuse a Redis on 127.0.0.1:6379 (for `make run`; tests start
#      their own); SETUP_SKIP_REDIS=1 skips it,
#   5. build the sandbox image when it is missing or its recipe changed
#      (images/python/build.sh); SETUP_SKIP_IMAGE=1 skips it.
# SETUP_DRY_RUN=1 says what each step would do and changes nothing (no root).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
usage() { # usage [STATUS]: to stderr unless asked for (-h)
	local text='usage: deploy/setup.sh [run|test]\n       deploy/setup.sh --list run|test\n'
	# shellcheck disable=SC2059 # the text is ours
	if [ "${1:-2}" = 0 ]; then printf "$text"; else printf "$text" >&2; fi
	exit "${1:-2}"
}

# The run set: the daemon, its build and its image. Each names its user.
RUN_PACKAGES=(
	# the build (the Makefile's PKGS: libevent, libevent_openssl, openssl,
	# libcurl, yajl, hiredis, uuid)
	gcc make pkg-config libevent-dev libssl-dev libcurl4-openssl-dev libyajl-dev libhiredis-dev uuid-dev
	# llhttp's C sources (/usr/share/llhttp), built with the daemon (see the Makefile)
	node-llhttp
	# the engine, and the daemon's host firewall rules (daemon/network.c)
	docker.io containerd runc iptables
	# the Redis of `make run` (redis-cli: step 4's check)
	redis-server redis-tools
	# the stateless tier: python3 run once in bubblewrap (daemon/stateless.c,
	# --stateless-bwrap, --stateless-python; Debian 12's bwrap: 0.8.0)
	bubblewrap python3
	# workspace disks (daemon/workspace_disk.c): mkfs.ext4, mount, mountpoint
	e2fsprogs mount util-linux
	# the system's CA store, which libcurl verifies https peers against: the
	# fixer model, an S3 snapshot store, webhooks, forwarding to peers
	ca-certificates
	# the sandbox image is built from Debian packages, no registry: Debian 13
	# by default, whose release key debootstrap takes from the keyring
	debootstrap debian-archive-keyring
)

# The test set adds these to the run set.
TEST_PACKAGES=(
	# --redis sentinel://: the chaos suite runs sentinels of its own; the
	# package's service is kept from starting and disabled (install_packages)
	redis-sentinel
	# deploy/compose/ and its suite (tests/deploy/): Debian 12's docker-compose 1.29
	docker-compose
	# tests (pytest-xdist shards the integration suite, tests/run-all.sh);
	# openpyxl: tests/integration/test_seed.py writes a workbook, and
	# test_stateless.py proves that the stateless tier cannot import it;
	# openssl: the TLS tests' certificates; valgrind: the unit tests; clang
	# and its runtime: the fuzz targets; clang-format: make format-check
	python3-pytest python3-pytest-xdist python3-openpyxl openssl valgrind clang-format clang libclang-rt-14-dev
	# the runner suite runs the kernel on the host: magics, shell escapes and
	# text/plain come from IPython's input transformer and pretty printer;
	# its display cases render DataFrames, arrays and figures as the image
	# does (without them 8 cases skipped, which make test counts as failures)
	python3-ipython python3-numpy python3-pandas python3-matplotlib
	# ci-ctl's zsh completion is syntax-checked with zsh -n (tests/integration/test_ctl_cli.py)
	zsh
	# the reviewer page's browser test (tests/browser/): Debian's chromium, driven by
	# playwright-core from npm (install_npm_test_peers)
	chromium nodejs
	# promtool, which checks the live /metrics page; only the tool is used, the
	# server is kept from starting (install_packages)
	prometheus
	# deploy_files: systemd-analyze verify and security of deploy/systemd (the
	# tools only; the tests need no running systemd); setpriv is util-linux's
	systemd
	# and the Kubernetes manifests' cross-checks (tests/deploy/test_k8s_manifests.py)
	python3-yaml
	# the clients suite: the OpenAI run_code tool's schema check (tests/clients)
	# the OpenAPI drift check of every integration test's answer (tests/openapi)
	python3-jsonschema
)
# Installed by the test set only when an npm ci is needed (npm_test_peers): a
# machine whose node_modules are current needs neither npm nor the network.
TEST_ON_DEMAND=(npm)

# The arguments: SET, or --list SET.
LIST=0
SET=
while [ $# -gt 0 ]; do
	case $1 in
	--list) LIST=1 ;;
	run | test) [ -z "$SET" ] || usage; SET=$1 ;;
	-h | --help) usage 0 ;;
	*) printf 'setup: unknown argument: %s\n' "$1" >&2; usage ;;
	esac
	shift
done
if [ -z "$SET" ]; then
	[ "$LIST" = 0 ] || usage # --list names its set
	SET="test"
fi

PACKAGES=("${RUN_PACKAGES[@]}")
[ "$SET" = run ] || PACKAGES+=("${TEST_PACKAGES[@]}")

if [ "$LIST" = 1 ]; then
	printf '%s\n' "${PACKAGES[@]}"
	[ "$SET" = run ] || printf '%s\n' "${TEST_ON_DEMAND[@]}"
	exit 0
fi

DRY=${SETUP_DRY_RUN:-0}
if [ "$DRY" = 1 ]; then
	say "set $SET, dry run: nothing is changed"
else
	say "set $SET"
fi

need_root() {
	[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts dockerd)"
}

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		say "packages: all ${#PACKAGES[@]} of set $SET present"
		[ "$DRY" = 1 ] || disable_sentinel_service
		return
	fi
	if [ "$DRY" = 1 ]; then
		say "packages: would install ${missing[*]}"
		return
	fi
	need_root
	say "packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# No package may start a service here (prometheus's postinst would start
	# its server, listening on :9090): invoke-rc.d asks policy-rc.d, and 101
	# means "not now". An existing policy is left as it is.
	local policy=/usr/sbin/policy-rc.d made_policy=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		made_policy=1
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || {
		[ "$made_policy" = 0 ] || rm -f "$policy"
		die "apt-get install failed"
	}
	[ "$made_policy" = 0 ] || rm -f "$policy"
	# systemd units are enabled by the postinst even when not started.
	if [ -d /run/systemd/system ] && systemctl is-enabled prometheus >/dev/null 2>&1; then
		systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
	disable_sentinel_service
}

# Debian's redis-sentinel enables its unit (a sentinel on :26379 watching a
# master on 127.0.0.1:6379) even when policy-rc.d kept it from starting; tests
# start sentinels of their own, so the package's must neither run nor come
# back at boot. Checked on every run: it costs a dpkg query.
disable_sentinel_service() {
	dpkg-query -W -f='${Status}' redis-sentinel 2>/dev/null | grep -q 'install ok installed' || return 0
	if [ -d /run/systemd/system ]; then
		systemctl disable --now redis-sentinel >/dev/null 2>&1 || true
	else
		# No systemd running (a container): what `systemctl disable` removes.
		rm -f /etc/systemd/system/multi-user.target.wants/redis-sentinel.service \
			/etc/systemd/system/sentinel.service
	fi
	[ ! -x /etc/init.d/redis-sentinel ] || update-rc.d redis-sentinel disable >/dev/null 2>&1 || true
	if [ -e /run/sentinel/redis-sentinel.pid ]; then
		local pid
		pid=$(cat /run/sentinel/redis-sentinel.pid 2>/dev/null || true)
		[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	fi
}

docker_answers() {
	timeout 5 docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1
}

start_docker() {
	if docker_answers; then
		say "docker: engine answers"
		return
	fi
	if [ "$DRY" = 1 ]; then
		say "docker: would start dockerd"
		return
	fi
	need_root
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		say "docker: starting with systemctl"
		systemctl start docker || true
	fi
	if ! docker_answers; then
		say "docker: starting dockerd (log: /var/log/ci-dockerd.log)"
		# setsid: dockerd must outlive this shell and the make that ran it.
		setsid nohup dockerd >/var/log/ci-dockerd.log 2>&1 </dev/null &
	fi
	local i
	for i in $(seq 1 120); do
		docker_answers && { say "docker: ready after ${i} checks"; return; }
		sleep 0.5
	done
	tail -n 20 /var/log/ci-dockerd.log >&2 || true
	die "dockerd did not answer within 60 s"
}

start_redis() {
	if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
		say "redis: answers on 127.0.0.1:6379"
		return
	fi
	if [ "$DRY" = 1 ]; then
		say "redis: would start redis-server on 127.0.0.1:6379"
		return
	fi
	need_root
	say "redis: starting redis-server on 127.0.0.1:6379"
	redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no \
		--logfile /var/log/ci-redis.log
	local i
	for i in $(seq 1 50); do
		redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG && return
		sleep 0.1
	done
	die "redis-server did not answer within 5 s"
}

# The test peers from npm, each at the exact versions of its directory's
# package-lock.json: npm ci when node_modules was not made from this lock (a
# stamp holds the lock's hash), so that a machine already set up needs no
# network. usage: npm_test_peers DIR WHAT PRESENT_PATH [ENV=VALUE]
#   PRESENT_PATH: a path under node_modules that exists once installed.
npm_test_peers() {
	local rel=$1 what=$2 present=$3 dir=$here/$1 stamp want
	shift 3
	[ -f "$dir/package-lock.json" ] || return 0
	stamp=$dir/node_modules/.ci-lock-sha256
	want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -e "$dir/node_modules/$present" ]; then
		say "$what present ($rel)"
		return
	fi
	if [ "$DRY" = 1 ]; then
		say "$what: would run npm ci in $rel"
		command -v npm >/dev/null || say "$what: would install npm first"
		return
	fi
	if ! command -v npm >/dev/null; then
		need_root
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm >/dev/null ||
			die "apt-get install npm failed"
	fi
	say "$what: npm ci in $rel"
	(cd "$dir" && env "$@" npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null) ||
		die "npm ci in $rel failed"
	printf '%s\n' "$want" >"$stamp"
}

# The browser test's playwright-core (no browser is downloaded: the test
# uses Debian's chromium); the S3 peers of tests/integration/test_blobstore.py
# (s3rver, and the official @aws-sdk/client-s3 for the interop check); the
# Kubernetes manifest check of tests/deploy (kubernetes-models and yaml); the
# TypeScript client's compiler and type generator (tests/clients); the MCP
# clients of tests/mcp (the official SDK, the Inspector's CLI); the OpenAPI
# lint of tests/openapi (@redocly/cli).
install_npm_test_peers() {
	npm_test_peers tests/browser "browser test: playwright-core" playwright-core \
		PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
	npm_test_peers tests/s3 "s3 test: s3rver and @aws-sdk/client-s3" .bin/s3rver
	npm_test_peers tests/k8s "k8s test: kubernetes-models and yaml" kubernetes-models
	npm_test_peers clients/typescript "TypeScript client: typescript and openapi-typescript" .bin/tsc
	npm_test_peers tests/mcp "mcp test: @modelcontextprotocol/sdk and inspector-cli" \
		.bin/mcp-inspector-cli
	npm_test_peers tests/openapi "openapi lint: @redocly/cli" @redocly/cli
}

build_image() {
	if [ "${SETUP_SKIP_IMAGE:-0}" = 1 ]; then
		say "image: skipped (SETUP_SKIP_IMAGE=1)"
	elif [ "$DRY" = 1 ]; then
		say "image: would run images/python/build.sh (it builds only when the recipe changed)"
	else
		"$here/images/python/build.sh"
	fi
}

install_packages
[ "$SET" = run ] || install_npm_test_peers
start_docker
if [ "${SETUP_SKIP_REDIS:-0}" = 1 ]; then
	say "redis: skipped (SETUP_SKIP_REDIS=1)"
else
	start_redis
fi
build_image
