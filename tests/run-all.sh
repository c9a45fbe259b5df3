#!/usr/bin/env bash
# Runs every test suite of `make test` and prints one closing line
# "N passed, N failed" over all of them. Each suite also prints its own.
#   format       clang-format over the C sources
#   unit         C unit tests, built with ASan + UBSan
#   valgrind     the same unit tests under valgrind (no leaks, no errors)
#   fuzz         each libFuzzer target (HTTP, JSON, records, config) for 5 s
#   runner       the sandbox runner's own tests (Python, on the host)
#   openapi      docs/openapi.yaml: Redocly's lint, the route table against the
#                spec, the drift check's own tests (tests/openapi; the check
#                itself runs on every integration answer)
#   integration  real dockerd, real Redis, the ASan daemon and ci-ctl
#   hostile      hostile code against the sandbox, the proxy and the API
#   chaos        crashes, restarts and outages of the daemon, Redis and Docker
#   browser      the reviewer's page in headless chromium (playwright-core)
#   clients      the client libraries of clients/ (Python, TypeScript, the OpenAI
#                run_code tool) against a live daemon; the TypeScript types are
#                checked against docs/openapi.yaml (CLIENTS_OPENAPI_SPEC: another path)
#   soak         5 minutes of churn against the release daemon, its fds, RSS,
#                containers, networks, Redis keys and state dirs flat at the end
#                (tests/soak/soak.py; SOAK_MINUTES; `make soak` runs the hour)
#   mcp          the /mcp endpoint with the official MCP SDK's client and the
#                MCP Inspector's CLI (tests/mcp, node peers from npm)
#   deploy       deploy/: the systemd unit, the example config, the Kubernetes
#                manifests (offline schema check, tests/k8s), the service images with
#                docker-compose, the sidecar pod, the engines helper (tests/deploy/);
#                the service images it needs are built in the background while
#                the first suites run (SERVICE_IMAGES_BUILD=0: do not build them)
# Select suites with TEST_SUITES="unit integration"; pass pytest options with PYTEST_ARGS.
set -u
cd "$(dirname "$0")/.."

suites=${TEST_SUITES:-"format unit valgrind fuzz runner openapi integration hostile chaos browser mcp clients soak deploy"}
total_pass=0
total_fail=0
failed=()

# Add the counts of a suite's closing line (pytest's or ours) to the totals.
count() {
	local log=$1 rc=$2 name=$3 p f
	p=$(grep -Eo '[0-9]+ passed' "$log" | tail -n 1 | grep -Eo '[0-9]+' || true)
	f=$(grep -Eo '[0-9]+ (failed|error|errors)' "$log" | tail -n 1 | grep -Eo '[0-9]+' || true)
	p=${p:-0}
	f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed, or exited non-zero without saying what failed
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	[ "$f" -eq 0 ] || failed+=("$name")
}

# The deploy suite needs the service's own images (images/service/build.sh:
# about 6 minutes from nothing, 1 s when they are current). A cold build is
# started here, niced, so it runs while the suites before deploy do, and the
# deploy suite waits for it.
service_images_pid=""
case " $suites " in
*" deploy "*)
	if [ "${SERVICE_IMAGES_BUILD:-1}" != 0 ] && ! images/service/build.sh --check >/dev/null 2>&1; then
		mkdir -p build
		printf '\n=== deploy: building the service images in the background (build/service-images.log)\n'
		nice -n 10 images/service/build.sh >build/service-images.log 2>&1 &
		service_images_pid=$!
	fi
	;;
esac

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

run() {
	local name=$1
	shift
	local log
	log=$(mktemp)
	printf '\n=== %s: %s\n' "$name" "$*"
	"$@" 2>&1 | tee "$log"
	count "$log" "${PIPESTATUS[0]}" "$name"
	rm -f "$log"
}

for s in $suites; do
	case $s in
	format) run format sh -c 'make -s format-check && echo "format: 1 passed, 0 failed"' ;;
	unit) run unit build/asan/unit-tests ;;
	fuzz) run fuzz tests/fuzz/run.sh "${FUZZ_SECONDS:-5}" ;;
	valgrind) run valgrind valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=9 build/unit-tests ;;
	runner) run runner /usr/bin/python3 -m pytest -q -p no:cacheprovider images/python/runner ${PYTEST_ARGS:-} ;;
	openapi) run openapi /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/openapi ${PYTEST_ARGS:-} ;;
	integration) run integration env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		CITEST_FIXER_PROBE=build/asan/tools/fixer-probe \
		CITEST_BLOB_TOOL=build/asan/tools/blob-tool \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration ${PYTEST_ARGS:-} ;;
	hostile) run hostile env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/hostile ${PYTEST_ARGS:-} ;;
	chaos) run chaos env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/chaos ${PYTEST_ARGS:-} ;;
	browser) run browser env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/browser ${PYTEST_ARGS:-} ;;
	clients) run clients env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/clients ${PYTEST_ARGS:-} ;;
	soak) run soak env CITEST_DAEMON=build/ci-daemon \
		/usr/bin/python3 tests/soak/soak.py --minutes "${SOAK_MINUTES:-5}" ;;
	mcp) run mcp env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/mcp ${PYTEST_ARGS:-} ;;
	deploy)
		if wait_service_images; then
			run deploy env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
				/usr/bin/python3 -m pytest -q -p no:cacheprovider -s tests/deploy ${PYTEST_ARGS:-}
		else
			run deploy sh -c 'echo "deploy: 0 passed, 1 failed"; exit 1'
		fi
		;;
	*) echo "unknown suite $s" >&2; exit 2 ;;
	esac
done

echo
[ ${#failed[@]} -eq 0 ] || echo "failing suites: ${failed[*]}"
echo "all suites: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
