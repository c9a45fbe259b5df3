#!/usr/bin/env bash
# Runs every test suite of `make test` and prints one closing line
# "N passed, N failed" over all of them. Each suite also prints its own.
#   format       clang-format over the C sources
#   unit         C unit tests, built with ASan + UBSan
#   valgrind     the same unit tests under valgrind (no leaks, no errors)
#   fuzz         each libFuzzer target (HTTP, JSON, records, config) for 5 s
#   runner       the sandbox runner's own tests (Python, on the host)
#   integration  real dockerd, real Redis, the ASan daemon and ci-ctl
#   hostile      hostile code against the sandbox, the proxy and the API
#   chaos        crashes, restarts and outages of the daemon, Redis and Docker
#   browser      the reviewer's page in headless chromium (playwright-core)
#   deploy       deploy/: the systemd unit, the example config, the Kubernetes
#                manifests (offline schema check, tests/k8s), the service images with
#                docker-compose, the sidecar pod, the engines helper (tests/deploy/;
#                make test builds the service images first)
# Select suites with TEST_SUITES="unit integration"; pass pytest options with PYTEST_ARGS.
set -u
cd "$(dirname "$0")/.."

suites=${TEST_SUITES:-"format unit valgrind fuzz runner integration hostile chaos browser deploy"}
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
	deploy) run deploy env CITEST_DAEMON=build/asan/ci-daemon CITEST_CTL=build/asan/ci-ctl \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider -s tests/deploy ${PYTEST_ARGS:-} ;;
	*) echo "unknown suite $s" >&2; exit 2 ;;
	esac
done

echo
[ ${#failed[@]} -eq 0 ] || echo "failing suites: ${failed[*]}"
echo "all suites: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
