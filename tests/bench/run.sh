#!/usr/bin/env bash
# make bench: the benchmark harness (issue 6) against the optimised build.
#
# Prints one table at the end, also written to build/bench/results.md and
# build/bench/results.json. BENCH_QUICK=1 for a ~2-minute run; every
# iteration count has its own variable (see tests/bench/bench.py, CONFIG).
# BENCH_TIMEOUT_S bounds the whole run (default 900 s, 300 s quick).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CITEST_DAEMON=${CITEST_DAEMON:-build/ci-daemon}
mkdir -p build/bench

# The C load generator for the throughput row.
# shellcheck disable=SC2046 # pkg-config's flags are meant to be split
cc -O2 -Wall -Wextra -Werror tests/bench/loadgen.c -o build/bench/loadgen \
	$(pkg-config --cflags --libs libevent)

# The Jupyter baseline needs Debian's jupyter_client and ipykernel.
if ! /usr/bin/python3 -c 'import jupyter_client, ipykernel' 2>/dev/null; then
	echo "bench: installing python3-jupyter-client python3-ipykernel" >&2
	if ! (apt-get install -y python3-jupyter-client python3-ipykernel >/dev/null 2>&1 ||
		(apt-get update >/dev/null 2>&1 &&
			apt-get install -y python3-jupyter-client python3-ipykernel >/dev/null 2>&1)); then
		echo "bench: could not install them; the Jupyter row will say n/a" >&2
	fi
fi

export BENCH_RUN_ID=${BENCH_RUN_ID:-$(head -c5 /dev/urandom | od -An -tx1 | tr -d ' \n')}
inflight=build/bench/.inflight
rm -f "$inflight"
if [[ -n "${BENCH_QUICK:-}" && "${BENCH_QUICK}" != 0 ]]; then
	limit=${BENCH_TIMEOUT_S:-300}
else
	limit=${BENCH_TIMEOUT_S:-900}
fi

# bench.py cleans up after itself, also on SIGTERM. If it is killed outright
# (the time limit's second stage), remove what it noted in .inflight: its own
# processes by pid, its containers by label, its state directories.
# shellcheck disable=SC2317 # called by the EXIT trap
last_resort() {
	[[ -f "$inflight" ]] || return 0
	echo "bench: cleaning up after an interrupted run" >&2
	while read -r kind value; do
		case "$kind" in
		pid)
			if [[ -d /proc/$value ]] &&
				grep -qaE 'ci-daemon|redis-server|ipykernel' "/proc/$value/cmdline" 2>/dev/null; then
				kill "$value" 2>/dev/null || true
			fi
			;;
		label)
			docker ps -aq --filter "label=$value" | xargs -r docker rm -f >/dev/null 2>&1 || true
			;;
		dir)
			if [[ "$value" == /tmp/cit-* ]]; then
				umount -l "$value/s" 2>/dev/null || true # the daemon's IPC tmpfs
				rm -rf "$value"
			fi
			;;
		esac
	done <"$inflight"
	docker ps -aq --filter "label=ci.bench=$BENCH_RUN_ID" | xargs -r docker rm -f >/dev/null 2>&1 || true
	rm -f "$inflight"
}
trap last_resort EXIT

# A/B against the baseline commit (tests/bench/baseline-ref, BENCH_BASE):
# exec round trip and create-from-pool p50, both daemons in this same run.
# First, while the machine is quiet: the rows below leave the engine busy
# removing hundreds of containers for a while.
rc=0
if [[ "${BENCH_COMPARE:-1}" != 0 ]]; then
	echo
	echo "bench: A/B against the baseline commit (BENCH_COMPARE=0 skips it)"
	if base_bin=$(tests/bench/build-base.sh); then
		export BENCH_BASE_REF=${BENCH_BASE:-$(grep -v '^#' tests/bench/baseline-ref | head -n 1)}
		timeout --signal=TERM --kill-after=60 600 /usr/bin/python3 tests/bench/compare.py \
			"$base_bin" "$CITEST_DAEMON" || rc=$?
	else
		echo "bench: the baseline could not be built; no A/B rows" >&2
	fi
fi
# API keys (issue 11): exec round trip with a key vs without, and auth
# checks per second, two daemons of this build in this same run.
if [[ "${BENCH_KEYS:-1}" != 0 ]]; then
	echo
	echo "bench: API keys, with a key vs without (BENCH_KEYS=0 skips it)"
	timeout --signal=TERM --kill-after=60 300 /usr/bin/python3 tests/bench/keys.py \
		"$CITEST_DAEMON" || rc=$?
fi
# Runs (issue 12): a run whose first attempt succeeds vs a plain exec, and
# the stateless tier's round trip, in this same run.
if [[ "${BENCH_RUNS:-1}" != 0 ]]; then
	echo
	echo "bench: runs over plain execs, and the stateless tier (BENCH_RUNS=0 skips it)"
	timeout --signal=TERM --kill-after=60 300 /usr/bin/python3 tests/bench/runs.py \
		"$CITEST_DAEMON" || rc=$?
fi
# Time-boxed installs (issue 13): the window's overhead over pip's own run.
if [[ "${BENCH_INSTALL:-1}" != 0 ]]; then
	echo
	echo "bench: install-window overhead (BENCH_INSTALL=0 skips it)"
	timeout --signal=TERM --kill-after=60 600 /usr/bin/python3 tests/bench/install.py \
		"$CITEST_DAEMON" || rc=$?
fi
# Snapshots (issue 13): snapshot and restore-to-first-result for 10 MB and
# 100 MB workspaces, directory store and s3rver, beside a plain create and
# the files API moving the same bytes, in this same run.
if [[ "${BENCH_SNAPSHOTS:-1}" != 0 ]]; then
	echo
	echo "bench: snapshot and restore times (BENCH_SNAPSHOTS=0 skips it)"
	timeout --signal=TERM --kill-after=60 1200 /usr/bin/python3 tests/bench/snapshots.py \
		"$CITEST_DAEMON" || rc=$?
fi
# The exec round trip against files in /workspace (issue 17): 0, 1,000,
# 10,000 and 100,000 files, each against the empty workspace in this run.
if [[ "${BENCH_WORKSPACE_FILES:-1}" != 0 ]]; then
	echo
	echo "bench: exec round trip against workspace size (BENCH_WORKSPACE_FILES=0 skips it)"
	if [[ -n "${BENCH_QUICK:-}" && "${BENCH_QUICK}" != 0 ]]; then
		wsf_args=(--sizes 0,10000 --iterations 200)
	else
		wsf_args=(--sizes 0,1000,10000,100000 --iterations 500)
	fi
	timeout --signal=TERM --kill-after=60 900 /usr/bin/python3 tests/bench/workspace_files.py \
		"${wsf_args[@]}" --json build/bench/workspace_files.json || rc=$?
fi
# A burst of creates against the adaptive warm pool (issue 17), a fixed
# pool of 4 as the baseline in this run.
if [[ "${BENCH_POOL_BURST:-1}" != 0 ]]; then
	echo
	echo "bench: a burst of 50 creates, adaptive pool vs fixed (BENCH_POOL_BURST=0 skips it)"
	timeout --signal=TERM --kill-after=60 900 /usr/bin/python3 tests/bench/pool_burst.py \
		--burst "${BENCH_POOL_BURST_N:-50}" --json build/bench/pool_burst.json || rc=$?
fi
# Exec round trip with 50 sessions each executing back to back, against 1
# session, in this same run (issue 17).
if [[ "${BENCH_CONCURRENCY:-1}" != 0 ]]; then
	echo
	echo "bench: exec under concurrency, 50 sessions vs 1 (BENCH_CONCURRENCY=0 skips it)"
	timeout --signal=TERM --kill-after=60 600 /usr/bin/python3 tests/bench/exec_concurrency.py \
		--sessions "${BENCH_CONCURRENCY_N:-50}" --json build/bench/exec_concurrency.json || rc=$?
fi
# The capacity plan's per-node figures (issue 15): Redis commands per
# create, exec, keepalive, delete and idle second, memory per session, the
# most sessions this node held (docs/deploy.md, "Capacity plan").
if [[ "${BENCH_CAPACITY:-1}" != 0 ]]; then
	echo
	echo "bench: capacity figures (BENCH_CAPACITY=0 skips it)"
	timeout --signal=TERM --kill-after=60 900 /usr/bin/python3 tests/bench/bench_capacity.py || rc=$?
fi
# Forwarding (issue 15): exec round trip straight to the owner vs through
# another node, interleaved in this same run.
if [[ "${BENCH_FORWARD:-1}" != 0 ]]; then
	echo
	echo "bench: forwarded vs direct exec round trip (BENCH_FORWARD=0 skips it)"
	timeout --signal=TERM --kill-after=60 300 /usr/bin/python3 tests/bench/bench_forward.py \
		"$CITEST_DAEMON" || rc=$?
fi
timeout --signal=TERM --kill-after=120 "$limit" /usr/bin/python3 tests/bench/bench.py || rc=$?
if [[ $rc == 124 || $rc == 143 || $rc == 137 ]]; then
	echo "bench: stopped after the ${limit}s limit (BENCH_TIMEOUT_S)" >&2
fi

exit $rc
