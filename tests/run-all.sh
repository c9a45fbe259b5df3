#!/usr/bin/env bash
# Runs every test suite of `make test` and prints one closing line
# "N passed, N failed" over all of them. Each suite also prints its own.
#   format       clang-format over the C sources
#   unit         C unit tests, built with ASan + UBSan
#   valgrind     the same unit tests under valgrind (no leaks, no errors)
#   fuzz         each libFuzzer target (HTTP, JSON, records, config) for 5 s
#   runner       the sandbox runner's own tests (Python, on the host)
#   scripts      the project's scripts: make bench's runner, deploy/setup.sh's
#                package sets (tests/scripts, no Docker)
#   integration  real dockerd, real Redis, the ASan daemon and ci-ctl; sharded
#                over INTEGRATION_WORKERS pytest-xdist workers (default 2; 0: one
#                process), whole files per worker
#   hostile      hostile code against the sandbox, the proxy and the API;
#                sharded over HOSTILE_WORKERS (default 2) as integration is
#   chaos        crashes, restarts and outages of the daemon, Redis and Docker
#   browser      the reviewer's page in headless chromium (playwright-core)
#   openapi      docs/openapi.yaml: Redocly's lint, the route table against the
#                spec, the drift check's own tests (tests/openapi; the check
#                itself runs on every integration answer, CITEST_OPENAPI=0: off)
#   mcp          the /mcp endpoint with the official MCP SDK's client and the
#                MCP Inspector's CLI (tests/mcp, node peers from npm)
#   clients      the client libraries of clients/ (Python, TypeScript, the OpenAI
#                run_code tool) against a live daemon; the TypeScript types are
#                checked against docs/openapi.yaml (CLIENTS_OPENAPI_SPEC: another path)
#   soak         SOAK_MINUTES (5) of churn against the release daemon, its fds,
#                RSS, containers, networks, Redis keys and state dirs flat at the
#                end (tests/soak/soak.py; `make soak` runs the hour)
#   deploy       deploy/: the systemd unit, the example config, the Kubernetes
#                manifests (offline schema check, tests/k8s), the service images with
#                docker-compose, the sidecar pod, the engines helper (tests/deploy/);
#                the service images it needs are built in the background while
#                the first suites run (SERVICE_IMAGES_BUILD=0: do not build them)
# Select suites with TEST_SUITES="unit integration"; pass pytest options with PYTEST_ARGS.
#
# Before the suites: the sandbox image (images/python/build.sh, about 5
# minutes from nothing, a second when current) builds in the background while
# the binaries the selected suites need are compiled (release, ASan, fuzz);
# a suite that needs Docker waits for the image, the others start at once.
# CITEST_BUILD=0 skips both (the caller built everything).
#
# Two lanes run side by side (docs/hacking.md, "The test suite's time"): the
# docker lane runs the two big Docker suites (integration, hostile), mostly
# waiting on Docker; the host lane runs every other suite, the CPU-bound ones
# first. Within a lane suites run one after another, in the order above.
# A suite's output is buffered and printed whole when it ends, with its wall
# time. TEST_LANES=1 runs every suite in one lane, streaming its output (also
# what a single selected suite does).
#
# CITEST_LOAD=N starts N busy-loop processes for the whole run (a shared CI
# machine), stopped by their pids at the end (docs/hacking.md, "A busy machine").
#
# Skips: every suite's skipped count is printed, and a skip whose reason is
# not listed in tests/skips.txt fails the run (a suite cannot vanish because
# a tool is missing).
set -u
cd "$(dirname "$0")/.."

suites=${TEST_SUITES:-"format unit valgrind fuzz runner openapi scripts mcp clients soak chaos browser deploy integration hostile"}

# The lane of a suite: the big Docker suites in one, everything else in the
# other. A new suite runs in the host lane unless listed here.
lane_of() {
	case $1 in
	integration | hostile) echo docker ;;
	*) echo host ;;
	esac
}

# The suites that need the sandbox image (and so Docker) before they start.
needs_image() {
	case $1 in
	format | unit | valgrind | fuzz | runner | openapi | scripts) return 1 ;;
	*) return 0 ;;
	esac
}

# The command of a suite, one line each.
suite() {
	local s=$1
	local daemon_env=(env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl)
	# -rs: every skip's reason in the summary, checked against tests/skips.txt
	local pytest=(/usr/bin/python3 -m pytest -q -rs -p no:cacheprovider)
	case $s in
	format) sh -c 'make -s format-check && echo "format: 1 passed, 0 failed"' ;;
	unit) build/asan/unit-tests ;;
	fuzz) tests/fuzz/run.sh "${FUZZ_SECONDS:-5}" ;;
	valgrind) valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=9 build/unit-tests ;;
	runner) "${pytest[@]}" images/python/runner ${PYTEST_ARGS:-} ;;
	scripts) "${pytest[@]}" tests/scripts ${PYTEST_ARGS:-} ;;
	integration) "${daemon_env[@]}" CITEST_FIXER_PROBE=build/asan/tools/fixer-probe \
		CITEST_BLOB_TOOL=build/asan/tools/blob-tool \
		"${pytest[@]}" --durations=10 $(xdist_args "${INTEGRATION_WORKERS:-2}") tests/integration ${PYTEST_ARGS:-} ;;
	hostile) "${daemon_env[@]}" "${pytest[@]}" --durations=10 $(xdist_args "${HOSTILE_WORKERS:-2}") tests/hostile ${PYTEST_ARGS:-} ;;
	chaos) "${daemon_env[@]}" "${pytest[@]}" tests/chaos ${PYTEST_ARGS:-} ;;
	browser) "${daemon_env[@]}" "${pytest[@]}" tests/browser ${PYTEST_ARGS:-} ;;
	openapi) "${pytest[@]}" tests/openapi ${PYTEST_ARGS:-} ;;
	mcp) "${daemon_env[@]}" "${pytest[@]}" tests/mcp ${PYTEST_ARGS:-} ;;
	clients) "${daemon_env[@]}" "${pytest[@]}" tests/clients ${PYTEST_ARGS:-} ;;
	# the release build (ASan's quarantine grows RSS by design); 2 workers
	# beside the integration suite's two (`make soak`: 4, for an hour)
	soak) env CITEST_DAEMON=build/ci-daemon /usr/bin/python3 tests/soak/soak.py \
		--minutes "${SOAK_MINUTES:-5}" --workers "${SOAK_WORKERS:-2}" ;;
	deploy)
		if wait_service_images; then
			"${daemon_env[@]}" "${pytest[@]}" -s tests/deploy ${PYTEST_ARGS:-}
		else
			echo "deploy: 0 passed, 1 failed"
			return 1
		fi
		;;
	*) echo "unknown suite $s" >&2; return 2 ;;
	esac
}

# pytest-xdist's options for N workers, whole files per worker (module-scoped
# fixtures and a file's order stay as they were). Nothing for N=0 or without
# xdist (python3-pytest-xdist, deploy/setup.sh): one process, as before.
xdist_args() {
	[ "${1:-0}" -gt 0 ] 2>/dev/null || return 0
	/usr/bin/python3 -c 'import xdist' 2>/dev/null || return 0
	echo "-n $1 --dist loadfile"
}

results=$(mktemp -d)
load_pids=()
stop_load() {
	local pid
	for pid in "${load_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${load_pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	load_pids=()
}
trap 'stop_load; rm -rf "$results"' EXIT
trap 'exit 130' INT TERM

# CITEST_LOAD=N: N processes that spin for the whole run, as other jobs of a
# shared machine would; each is stopped by its own pid (stop_load).
start_load() {
	local n=${CITEST_LOAD:-0} i
	[ "$n" -gt 0 ] 2>/dev/null || return 0
	for i in $(seq 1 "$n"); do
		bash -c 'while :; do :; done' &
		load_pids+=($!)
	done
	printf '=== CITEST_LOAD=%s: busy loops %s\n' "$n" "${load_pids[*]}"
}

selected() {
	local s
	for s in $suites; do
		[ "$s" = "$1" ] && return 0
	done
	return 1
}

any_selected() {
	local w
	for w in "$@"; do
		selected "$w" && return 0
	done
	return 1
}

any_needs_image() {
	local s
	for s in $suites; do
		needs_image "$s" && return 0
	done
	return 1
}

# The sandbox image, then (when deploy is selected) the service images, in
# one background job: the service images carry the sandbox image's tarball.
# Each writes its exit status to a file the lanes wait on.
start_images() {
	mkdir -p build
	if [ "${CITEST_BUILD:-1}" = 0 ] || ! any_needs_image; then
		echo 0 >"$results/image.rc"
	fi
	if ! selected deploy || [ "${SERVICE_IMAGES_BUILD:-1}" = 0 ]; then
		echo 0 >"$results/service.rc"
	fi
	[ ! -f "$results/image.rc" ] || [ ! -f "$results/service.rc" ] || return 0
	printf '=== images: the sandbox image builds in the background (build/image.log)\n'
	(
		if [ ! -f "$results/image.rc" ]; then
			rc=0
			images/python/build.sh >build/image.log 2>&1 || rc=$?
			echo "$rc" >"$results/image.rc"
		fi
		if [ ! -f "$results/service.rc" ]; then
			rc=0
			# The service images carry build/ci-daemon and build/ci-ctl:
			# they wait for the shared builds (bounded: a broken build
			# writes its mark too).
			for i in $(seq 1 7200); do
				[ -f "$results/builds.rc" ] && break
				sleep 0.5 # polling a file the main shell writes; bounded above
			done
			if ! images/service/build.sh --check >/dev/null 2>&1; then
				nice -n 10 images/service/build.sh >build/service-images.log 2>&1 || rc=$?
			fi
			echo "$rc" >"$results/service.rc"
		fi
	) &
}

# Wait (bounded: an hour is a broken build, not a slow one) for a background
# build's status file; its log's tail and a failure when it failed.
wait_build() {
	local what=$1 file=$2 log=$3 i rc
	for i in $(seq 1 7200); do
		[ -f "$file" ] && break
		sleep 0.5 # polling a file another process writes; bounded above
	done
	rc=$(cat "$file" 2>/dev/null || echo timeout)
	[ "$rc" = 0 ] && return 0
	echo "$what did not build ($rc; $log):"
	tail -n 20 "$log" 2>/dev/null
	return 1
}

wait_image() { wait_build "the sandbox image" "$results/image.rc" build/image.log; }
wait_service_images() {
	wait_build "the service images" "$results/service.rc" build/service-images.log &&
		{ [ ! -f build/service-images.log ] || tail -n 8 build/service-images.log; }
}

# The binaries the selected suites use, with -j JOBS, while the image builds.
shared_builds() {
	[ "${CITEST_BUILD:-1}" != 0 ] || return 0
	local j=${JOBS:-$(nproc 2>/dev/null || echo 2)} m=(make --no-print-directory -s)
	if any_selected valgrind soak scripts; then
		"${m[@]}" -j"$j" all build/unit-tests tools || return 1
	fi
	if any_selected unit integration hostile chaos browser mcp clients deploy; then
		"${m[@]}" -j"$j" SANITIZE=1 all build/asan/unit-tests tools || return 1
	fi
	if selected fuzz; then
		"${m[@]}" -j"$j" fuzz-build || return 1
	fi
}

# Run one suite; its exit status and wall time go to $results/<name>.rc. In
# a lane of its own (stream=1) the output streams; otherwise it is buffered
# and printed whole, under a lock, so two lanes' suites never interleave.
run() {
	local name=$1 stream=$2 log=$results/$1.log rc start secs
	if needs_image "$name" && ! wait_image >"$log" 2>&1; then
		echo "$name: 0 passed, 1 failed (no sandbox image)" >>"$log"
		echo "1 0" >"$results/$name.rc"
		[ "$stream" != 1 ] || cat "$log"
		return
	fi
	start=$(date +%s)
	if [ "$stream" = 1 ]; then
		printf '\n=== %s\n' "$name"
		suite "$name" 2>&1 | tee -a "$log"
		rc=${PIPESTATUS[0]}
	else
		suite "$name" >>"$log" 2>&1
		rc=$?
	fi
	secs=$(($(date +%s) - start))
	echo "$rc $secs" >"$results/$name.rc"
	if [ "$stream" != 1 ]; then
		{
			flock 9
			printf '\n=== %s (%ds)\n' "$name" "$secs"
			cat "$log"
		} 9>"$results/.lock"
	fi
}

# One lane: its suites in order.
lane() {
	local stream=$1 s
	shift
	for s in "$@"; do
		run "$s" "$stream"
	done
}

host_suites=() docker_suites=()
for s in $suites; do
	if [ "${TEST_LANES:-2}" = 1 ] || [ "$(lane_of "$s")" = docker ]; then
		docker_suites+=("$s")
	else
		host_suites+=("$s")
	fi
done

wall_start=$(date +%s)
start_load
start_images
builds_rc=0
shared_builds || builds_rc=$?
echo "$builds_rc" >"$results/builds.rc"
if [ "$builds_rc" != 0 ]; then
	echo "the build failed: no suite runs"
	echo "all suites: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
if [ ${#host_suites[@]} -eq 0 ] || [ ${#docker_suites[@]} -eq 0 ]; then
	lane 1 "${host_suites[@]}" "${docker_suites[@]}"
else
	printf '=== lanes: host (%s) beside docker (%s)\n' "${host_suites[*]}" "${docker_suites[*]}"
	lane 0 "${host_suites[@]}" &
	host_pid=$!
	lane 0 "${docker_suites[@]}"
	wait "$host_pid"
fi
wall=$(($(date +%s) - wall_start))
stop_load

# Skips: pytest's "SKIPPED [n] file:line: reason" lines (-rs), each matched
# against tests/skips.txt (one "suite: reason" a line; the reason is a
# fixed string that must occur in pytest's line). An unlisted skip fails.
allowed_skip() {
	local name=$1 line=$2 entry suite reason
	[ -f tests/skips.txt ] || return 1
	while IFS= read -r entry; do
		case $entry in '' | '#'*) continue ;; esac
		suite=${entry%%:*}
		reason=${entry#*: }
		[ "$suite" = "$name" ] || continue
		case $line in *"$reason"*) return 0 ;; esac
	done <tests/skips.txt
	return 1
}

# Add the counts of a suite's closing line (pytest's or ours) to the totals.
total_pass=0
total_fail=0
total_skip=0
failed=()
unlisted=()
count() {
	local name=$1 log=$results/$1.log rc=1 secs=0 p f k line
	[ -f "$results/$name.rc" ] && read -r rc secs <"$results/$name.rc"
	p=$(grep -Eo '[0-9]+ passed' "$log" 2>/dev/null | tail -n 1 | grep -Eo '[0-9]+' || true)
	# failed and errors of the last summary line that names either (pytest
	# prints "4 failed, 439 passed, 1 error": 5)
	f=$(grep -E '[0-9]+ (failed|error|errors)' "$log" 2>/dev/null | tail -n 1 |
		grep -Eo '[0-9]+ (failed|error|errors)' | grep -Eo '[0-9]+' | awk '{ s += $1 } END { print s + 0 }' || true)
	k=$(grep -Eo '[0-9]+ skipped' "$log" 2>/dev/null | tail -n 1 | grep -Eo '[0-9]+' || true)
	p=${p:-0}
	f=${f:-0}
	k=${k:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed, or exited non-zero without saying what failed
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		f=1 # ran nothing: a suite that vanished is a failure, not a zero
		echo "$name ran no test" >>"$results/unlisted"
	fi
	while IFS= read -r line; do
		allowed_skip "$name" "$line" || {
			unlisted+=("$name")
			echo "$name: $line" >>"$results/unlisted"
		}
	done < <(grep -E '^SKIPPED \[' "$log" 2>/dev/null || true)
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	total_skip=$((total_skip + k))
	[ "$f" -eq 0 ] || failed+=("$name")
	printf '  %-12s %5d passed %4d failed %4d skipped %5ds\n' "$name" "$p" "$f" "$k" "$secs"
}

echo
echo "suite times:"
for s in $suites; do
	count "$s"
done
# CPU time of everything the suites ran (user + system, children included).
times >"$results/times" # not in a pipeline: that would be a subshell's
cpu=$(tail -n 1 "$results/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
echo "wall ${wall}s, cpu ${cpu}s (user + system of the suites' processes)${CITEST_LOAD:+, under CITEST_LOAD=$CITEST_LOAD}"
if [ -s "$results/unlisted" ]; then
	echo "not accounted for (each fails the run): skips not in tests/skips.txt, suites that ran nothing"
	sed 's/^/  /' "$results/unlisted"
	total_fail=$((total_fail + ${#unlisted[@]}))
fi
[ ${#failed[@]} -eq 0 ] || echo "failing suites: ${failed[*]}"
echo "all suites: $total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
