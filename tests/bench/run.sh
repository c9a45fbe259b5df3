#!/usr/bin/env bash
# make bench: the benchmark harness (issue 6) against the optimised build.
#
# Runs a list of steps (below, `tests/bench/run.sh --list` prints them), each
# a script with its own time limit. A step that fails or runs out of time does
# not stop the others. At the end a closing table names every step, ok or
# FAILED (or skipped), the first line of its reason (or of its note when it
# passed) and its wall time; it is also written to build/bench/steps.md. The
# run exits 1 when a step failed, 0 otherwise (2 on a bad selection).
#
#   BENCH_STEPS=ab,headline   run only these steps, in the list's order
#   BENCH_KEYS=0 (and so on)  skip one step (its variable is in the list)
#   BENCH_EXTRA_STEPS=DIR     every executable file in DIR is one more step,
#                             named after the file (without .sh), run after
#                             the built-in ones, limit BENCH_EXTRA_STEP_TIMEOUT_S
#                             (300 s); tests/scripts/test_bench_runner.py
#                             injects a failing step this way
#   BENCH_QUICK=1             smaller counts; every count has its own
#                             variable (tests/bench/bench.py, CONFIG)
#   BENCH_TIMEOUT_S           the headline step's limit (900 s, 300 s quick)
#   BENCH_OUT=DIR             where the step logs and the closing table go
#                             (build/bench)
#
# A step's reason: what it wrote to the file named by $BENCH_STEP_NOTE (its
# first line), else the last line it printed, with its exit status. The
# headline table (tests/bench/bench.py) also goes to build/bench/results.md.
# The step functions are called by name (step_<name>), the commas in
# --sizes are the script's own syntax:
# shellcheck disable=SC2317,SC2054
set -uo pipefail # no -e: one failing step must not stop the others
cd "$(dirname "$0")/../.." || exit 2
export CITEST_DAEMON=${CITEST_DAEMON:-build/ci-daemon}
export PYTHONUNBUFFERED=1 # a step's output reaches its log in order
out=${BENCH_OUT:-build/bench}
export BENCH_OUT=$out
export BENCH_LOADGEN=${BENCH_LOADGEN:-build/bench/loadgen}
mkdir -p "$out/steps" build/bench

quick=0
[[ -n "${BENCH_QUICK:-}" && "${BENCH_QUICK}" != 0 ]] && quick=1

# ------------------------------------------------------------------ the steps
# name | variable that skips it (=0) | time limit (s) | what it measures.
# Each step_<name> function (dashes as underscores) runs it.
STEP_TABLE="
ab|BENCH_COMPARE|600|A/B against the baseline commit (tests/bench/baseline-ref)
keys|BENCH_KEYS|300|API keys, with a key vs without
runs|BENCH_RUNS|300|runs over plain execs, and the stateless tier
install|BENCH_INSTALL|600|install-window overhead
snapshots|BENCH_SNAPSHOTS|1200|snapshot and restore times
workspace-files|BENCH_WORKSPACE_FILES|900|exec round trip against workspace size
pool-burst|BENCH_POOL_BURST|900|a burst of creates, adaptive pool vs fixed
concurrency|BENCH_CONCURRENCY|600|exec under concurrency, many sessions vs 1
capacity|BENCH_CAPACITY|900|capacity figures
forward|BENCH_FORWARD|300|forwarded vs direct exec round trip
headline|BENCH_HEADLINE|-|the headline table: ci against Jupyter, Docker exec, docker run; pool against cold
"

names=() skipvar=() limits=() descs=() cmds=()
while IFS='|' read -r n v l d; do
	[[ -z "$n" ]] && continue
	if [[ $l == - ]]; then
		if ((quick)); then l=${BENCH_TIMEOUT_S:-300}; else l=${BENCH_TIMEOUT_S:-900}; fi
	fi
	names+=("$n") skipvar+=("$v") limits+=("$l") descs+=("$d") cmds+=("")
done <<<"$STEP_TABLE"
if [[ -n "${BENCH_EXTRA_STEPS:-}" ]]; then
	for f in "$BENCH_EXTRA_STEPS"/*; do
		[[ -f "$f" && -x "$f" ]] || continue
		n=$(basename "$f")
		n=${n%.sh}
		names+=("$n") skipvar+=("") limits+=("${BENCH_EXTRA_STEP_TIMEOUT_S:-300}")
		descs+=("$f (BENCH_EXTRA_STEPS)") cmds+=("$f")
	done
fi

if [[ "${1:-}" == --list ]]; then
	for i in "${!names[@]}"; do
		printf '%-16s %-31s %5ss  %s\n' "${names[$i]}" "${skipvar[$i]:+${skipvar[$i]}=0 skips}" \
			"${limits[$i]}" "${descs[$i]}"
	done
	exit 0
fi

# BENCH_STEPS: a comma- or space-separated selection; every name must exist.
declare -A selected=()
if [[ -n "${BENCH_STEPS:-}" ]]; then
	for s in ${BENCH_STEPS//,/ }; do
		found=0
		for n in "${names[@]}"; do [[ $n == "$s" ]] && found=1; done
		if ((!found)); then
			echo "bench: BENCH_STEPS names an unknown step '$s'; the steps: ${names[*]}" >&2
			exit 2
		fi
		selected[$s]=1
	done
fi

# ------------------------------------------------------------------ helpers
# The C load generator (the throughput rows of keys, concurrency, headline).
need_loadgen() {
	[[ -x $BENCH_LOADGEN && $BENCH_LOADGEN -nt tests/bench/loadgen.c ]] && return 0
	# shellcheck disable=SC2046 # pkg-config's flags are meant to be split
	cc -O2 -Wall -Wextra -Werror tests/bench/loadgen.c -o "$BENCH_LOADGEN" \
		$(pkg-config --cflags --libs libevent)
}

export BENCH_RUN_ID=${BENCH_RUN_ID:-$(head -c5 /dev/urandom | od -An -tx1 | tr -d ' \n')}
inflight=$out/.inflight
rm -f "$inflight"

# bench.py cleans up after itself, also on SIGTERM. If it is killed outright
# (the time limit's second stage), remove what it noted in .inflight: its own
# processes by pid, its containers by label, its state directories.
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

# A command under the step's time limit: SIGTERM (the scripts clean up on
# it), SIGKILL a minute later.
limited() {
	timeout --signal=TERM --kill-after=60 "$STEP_LIMIT" "$@"
}

# ------------------------------------------------------------------ the step functions
# A/B: exec round trip and create-from-pool p50, this build and the baseline
# commit's, both daemons in this same run. First, while the machine is quiet:
# the rows below leave the engine busy removing hundreds of containers.
step_ab() {
	local base_bin
	if ! base_bin=$(tests/bench/build-base.sh); then
		echo "bench: the baseline commit could not be built (tests/bench/build-base.sh)" >"$BENCH_STEP_NOTE"
		return 1
	fi
	BENCH_BASE_REF=${BENCH_BASE:-$(grep -v '^#' tests/bench/baseline-ref | head -n 1)} \
		limited /usr/bin/python3 tests/bench/compare.py "$base_bin" "$CITEST_DAEMON"
}
# API keys (issue 11): exec round trip with a key vs without, auth checks/s.
step_keys() {
	need_loadgen || return 1
	limited /usr/bin/python3 tests/bench/keys.py "$CITEST_DAEMON"
}
# Runs (issue 12): a run whose first attempt succeeds vs a plain exec, and
# the stateless tier's round trip.
step_runs() {
	limited /usr/bin/python3 tests/bench/runs.py "$CITEST_DAEMON"
}
# Time-boxed installs (issue 13): the window's overhead over pip's own run.
step_install() {
	limited /usr/bin/python3 tests/bench/install.py "$CITEST_DAEMON"
}
# Snapshots (issue 13): snapshot and restore-to-first-result for 10 MB and
# 100 MB workspaces, directory store and s3rver, beside a plain create and
# the files API moving the same bytes.
step_snapshots() {
	limited /usr/bin/python3 tests/bench/snapshots.py "$CITEST_DAEMON"
}
# The exec round trip against files in /workspace (issue 17).
step_workspace_files() {
	local args=(--sizes 0,1000,10000,100000 --iterations 500)
	((quick)) && args=(--sizes 0,10000 --iterations 200)
	limited /usr/bin/python3 tests/bench/workspace_files.py "${args[@]}" \
		--json build/bench/workspace_files.json
}
# A burst of creates against the adaptive warm pool (issue 17), a fixed pool
# of 4 as the baseline in this run.
step_pool_burst() {
	limited /usr/bin/python3 tests/bench/pool_burst.py --burst "${BENCH_POOL_BURST_N:-50}" \
		--json build/bench/pool_burst.json
}
# Exec round trip with many sessions each executing back to back, against 1.
step_concurrency() {
	need_loadgen || return 1
	limited /usr/bin/python3 tests/bench/exec_concurrency.py \
		--sessions "${BENCH_CONCURRENCY_N:-50}" --json build/bench/exec_concurrency.json
}
# The capacity plan's per-node figures (issue 15, docs/deploy.md).
step_capacity() {
	limited /usr/bin/python3 tests/bench/bench_capacity.py
}
# Forwarding (issue 15): exec round trip to the owner vs through another node.
step_forward() {
	limited /usr/bin/python3 tests/bench/bench_forward.py "$CITEST_DAEMON"
}
# The headline table (tests/bench/bench.py): every row and its baselines.
step_headline() {
	need_loadgen || return 1
	# The Jupyter baseline needs Debian's jupyter_client and ipykernel.
	if ! /usr/bin/python3 -c 'import jupyter_client, ipykernel' 2>/dev/null; then
		echo "bench: installing python3-jupyter-client python3-ipykernel" >&2
		if ! (apt-get install -y python3-jupyter-client python3-ipykernel >/dev/null 2>&1 ||
			(apt-get update >/dev/null 2>&1 &&
				apt-get install -y python3-jupyter-client python3-ipykernel >/dev/null 2>&1)); then
			echo "bench: could not install them; the Jupyter row will say n/a" >&2
		fi
	fi
	limited /usr/bin/python3 tests/bench/bench.py
}

# ------------------------------------------------------------------ the run
# The first line of a step's reason (failed) or note (passed).
reason_of() {
	local rc=$1 log=$2 note=$3 line=""
	if [[ -s $note ]]; then
		line=$(grep -m1 -v '^[[:space:]]*$' "$note")
	elif ((rc != 0)) && [[ -s $log ]]; then
		line=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
	fi
	line=$(printf '%s' "$line" | tr -d '\r' | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^[[:space:]]*//')
	if ((rc == 124 || rc == 137)); then
		line="stopped at its ${STEP_LIMIT}s limit${line:+; last: $line}"
	elif ((rc != 0)); then
		line="exit $rc${line:+: $line}"
	fi
	printf '%s' "$line"
}

r_name=() r_status=() r_reason=() r_wall=()
failed=0
for i in "${!names[@]}"; do
	n=${names[$i]}
	if [[ -n "${BENCH_STEPS:-}" && -z "${selected[$n]:-}" ]]; then
		continue
	fi
	v=${skipvar[$i]}
	if [[ -n $v && "${!v:-1}" == 0 ]]; then
		r_name+=("$n") r_status+=("skipped") r_reason+=("$v=0") r_wall+=("")
		continue
	fi
	log=$out/steps/$n.log
	export BENCH_STEP_NOTE=$out/steps/$n.note
	rm -f "$log" "$BENCH_STEP_NOTE"
	STEP_LIMIT=${limits[$i]}
	echo
	echo "bench: step $n: ${descs[$i]} (limit ${STEP_LIMIT}s${v:+; $v=0 skips it})"
	t0=$(date +%s%N)
	if [[ -n ${cmds[$i]} ]]; then
		limited "${cmds[$i]}" 2>&1 | tee "$log"
	else
		"step_${n//-/_}" 2>&1 | tee "$log"
	fi
	rc=${PIPESTATUS[0]}
	t1=$(date +%s%N)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { s = (b - a) / 1e9; printf(s < 10 ? "%.1f s" : "%.0f s", s) }')
	r_name+=("$n") r_reason+=("$(reason_of "$rc" "$log" "$BENCH_STEP_NOTE")") r_wall+=("$wall")
	if ((rc == 0)); then
		r_status+=("ok")
	else
		r_status+=("FAILED")
		failed=$((failed + 1))
	fi
	unset BENCH_STEP_NOTE
done

# The closing table: on stdout, and as markdown in $out/steps.md.
w=4
for n in "${r_name[@]}"; do ((${#n} > w)) && w=${#n}; done
{
	echo
	echo "bench: the steps (logs in $out/steps/)"
	printf '%-*s  %-7s  %8s  %s\n' "$w" step status wall "reason (failed) or note"
	printf '%-*s  %-7s  %8s  %s\n' "$w" "$(printf '%*s' "$w" '' | tr ' ' -)" ------- -------- \
		-----------------------
	for i in "${!r_name[@]}"; do
		printf '%-*s  %-7s  %8s  %s\n' "$w" "${r_name[$i]}" "${r_status[$i]}" "${r_wall[$i]}" \
			"${r_reason[$i]:0:160}"
	done
} | sed 's/[[:space:]]*$//' | tee "$out/steps.txt"
{
	echo "| step | status | wall | reason (failed) or note |"
	echo "|---|---|---:|---|"
	for i in "${!r_name[@]}"; do
		echo "| ${r_name[$i]} | ${r_status[$i]} | ${r_wall[$i]} | ${r_reason[$i]//|/\\|} |"
	done
} >"$out/steps.md"
total=${#r_name[@]}
if ((failed > 0)); then
	echo "bench: $failed of $total steps FAILED"
	exit 1
fi
echo "bench: all $total steps ok (or skipped)"
exit 0
