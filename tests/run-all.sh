#!/usr/bin/env bash
# Runs every test suite of `make test` and prints one closing line
# "N passed, N failed" over all of them. Each suite also prints its own.
#   format       clang-format over the C sources
#   unit         C unit tests, built with ASan + UBSan
#   valgrind     the same unit tests under valgrind (no leaks, no errors)
#   fuzz         each libFuzzer target (HTTP, JSON, records, config) for 5 s
#   runner       the sandbox runner's own tests (Python, on the host)
#   integration  real dockerd, real Redis, the ASan daemon and ci-ctl; sharded
#                over INTEGRATION_WORKERS pytest-xdist workers (default 2; 0: one
#                process), whole files per worker
#   hostile      hostile code against the sandbox, the proxy and the API; serial
#                by default: test_cpu_spin_is_held_to_its_share measures a
#                container's CPU share, which a second worker starves
#                (HOSTILE_WORKERS=2 shards it anyway)
#   chaos        crashes, restarts and outages of the daemon, Redis and Docker;
#                serial: its end-of-run check counts containers of fixed prefixes
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
# Two lanes run side by side (docs/hacking.md, "The test suite's time"): the
# host lane (suites that need neither Docker nor a daemon, mostly CPU, then
# the small suites that run a daemon of their own and count nothing but
# their own labels and prefix) and the docker lane (the big Docker suites,
# mostly waiting on Docker, some of them counting machine-wide). Within a lane suites run one after another, in the order above.
# A suite's output is buffered and printed whole when it ends, with its wall
# time. TEST_LANES=1 runs every suite in one lane, streaming its output, as
# before lanes (also what a single selected suite does).
set -u
cd "$(dirname "$0")/.."

suites=${TEST_SUITES:-"format unit valgrind fuzz runner openapi mcp clients soak integration hostile chaos browser deploy"}

# The lane of a suite: "host" for the ones that touch no Docker, no daemon and
# no shared port; anything else (and any new suite, unless listed here) runs in
# the docker lane, serially with the other Docker suites, as it always did.
lane_of() {
	case $1 in
	format | unit | valgrind | fuzz | runner | openapi | mcp | clients | soak) echo host ;;
	*) echo docker ;;
	esac
}

# The command of a suite, one line each.
suite() {
	local s=$1
	local daemon_env=(env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl)
	local pytest=(/usr/bin/python3 -m pytest -q -p no:cacheprovider)
	case $s in
	format) sh -c 'make -s format-check && echo "format: 1 passed, 0 failed"' ;;
	unit) build/asan/unit-tests ;;
	fuzz) tests/fuzz/run.sh "${FUZZ_SECONDS:-5}" ;;
	valgrind) valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=9 build/unit-tests ;;
	runner) "${pytest[@]}" images/python/runner ${PYTEST_ARGS:-} ;;
	integration) "${daemon_env[@]}" CITEST_FIXER_PROBE=build/asan/tools/fixer-probe \
		CITEST_BLOB_TOOL=build/asan/tools/blob-tool \
		"${pytest[@]}" $(xdist_args "${INTEGRATION_WORKERS:-2}") tests/integration ${PYTEST_ARGS:-} ;;
	hostile) "${daemon_env[@]}" "${pytest[@]}" $(xdist_args "${HOSTILE_WORKERS:-0}") tests/hostile ${PYTEST_ARGS:-} ;;
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
trap 'rm -rf "$results"' EXIT

# The deploy suite needs the service's own images (images/service/build.sh:
# about 6 minutes from nothing, 1 s when they are current). A cold build is
# started, niced, at the start of the lane that runs deploy, so it runs while
# the suites before deploy do, and the deploy suite waits for it.
service_images_pid=""
start_service_images() {
	case " $* " in
	*" deploy "*)
		if [ "${SERVICE_IMAGES_BUILD:-1}" != 0 ] && ! images/service/build.sh --check >/dev/null 2>&1; then
			mkdir -p build
			printf '\n=== deploy: building the service images in the background (build/service-images.log)\n'
			nice -n 10 images/service/build.sh >build/service-images.log 2>&1 &
			service_images_pid=$!
		fi
		;;
	esac
}

# The background build's end, before the deploy suite: its log's tail and a
# failure when it failed.
wait_service_images() {
	[ -n "$service_images_pid" ] || return 0
	local rc=0
	wait "$service_images_pid" || rc=$?
	service_images_pid=""
	tail -n 8 build/service-images.log
	[ "$rc" -eq 0 ] || echo "deploy: the service images did not build (exit $rc; build/service-images.log)"
	return "$rc"
}

# Run one suite; its exit status and wall time go to $results/<name>.rc. In
# a lane of its own (stream=1) the output streams; otherwise it is buffered
# and printed whole, under a lock, so two lanes' suites never interleave.
run() {
	local name=$1 stream=$2 log=$results/$1.log rc start secs
	start=$(date +%s)
	if [ "$stream" = 1 ]; then
		printf '\n=== %s\n' "$name"
		suite "$name" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
	else
		suite "$name" >"$log" 2>&1
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

# One lane: its suites in order, the service images started first if it has deploy.
lane() {
	local stream=$1 s
	shift
	start_service_images "$@"
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

# Add the counts of a suite's closing line (pytest's or ours) to the totals.
total_pass=0
total_fail=0
failed=()
count() {
	local name=$1 log=$results/$1.log rc=1 secs=0 p f
	[ -f "$results/$name.rc" ] && read -r rc secs <"$results/$name.rc"
	p=$(grep -Eo '[0-9]+ passed' "$log" 2>/dev/null | tail -n 1 | grep -Eo '[0-9]+' || true)
	# failed and errors of the last summary line that names either (pytest
	# prints "4 failed, 439 passed, 1 error": 5)
	f=$(grep -E '[0-9]+ (failed|error|errors)' "$log" 2>/dev/null | tail -n 1 |
		grep -Eo '[0-9]+ (failed|error|errors)' | grep -Eo '[0-9]+' | awk '{ s += $1 } END { print s + 0 }' || true)
	p=${p:-0}
	f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed, or exited non-zero without saying what failed
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	[ "$f" -eq 0 ] || failed+=("$name")
	printf '  %-12s %5d passed %4d failed %5ds\n' "$name" "$p" "$f" "$secs"
}

echo
echo "suite times:"
for s in $suites; do
	count "$s"
done
# CPU time of everything the suites ran (user + system, children included).
times >"$results/times" # not in a pipeline: that would be a subshell's
cpu=$(tail -n 1 "$results/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
echo "wall ${wall}s, cpu ${cpu}s (user + system of the suites' processes)"
[ ${#failed[@]} -eq 0 ] || echo "failing suites: ${failed[*]}"
echo "all suites: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
