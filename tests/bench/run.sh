#!/usr/bin/env bash
# make bench: every benchmark in tests/bench, against the optimised build.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CITEST_DAEMON=${CITEST_DAEMON:-build/ci-daemon}
mkdir -p build/bench
/usr/bin/python3 tests/bench/exec_rtt.py --json build/bench/exec_rtt.json
