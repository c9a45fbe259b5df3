#!/usr/bin/env bash
# Run every fuzz target for N seconds (default 5) from its seed corpus;
# prints "fuzz: N passed, N failed". A crash leaves its input in build/fuzz/.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-5}
jobs=${FUZZ_JOBS:-2}
mkdir -p build/fuzz

# One target: its result line to build/fuzz/<name>.result ("ok ..." or
# "FAILED ..."), its log to build/fuzz/<name>.log.
one() {
	local src=$1 secs=$2 name bin corpus
	name=$(basename "$src" .c)
	bin=build/fuzz/$name
	# Every target in tests/fuzz/ must have been built (make fuzz): a missing
	# one is a failure, not a silent zero.
	if [ ! -x "$bin" ]; then
		echo "FAILED; $bin is not built (make fuzz)" >build/fuzz/"$name".result
		return
	fi
	corpus=build/fuzz/corpus/$name
	mkdir -p "$corpus"
	[ -d "tests/fuzz/corpus/$name" ] && cp -n tests/fuzz/corpus/$name/* "$corpus"/ 2>/dev/null
	if "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix=build/fuzz/"$name"- "$corpus" >build/fuzz/"$name".log 2>&1; then
		echo "ok ($(grep -Eo 'stat::number_of_executed_units: [0-9]+|#[0-9]+' build/fuzz/"$name".log | tail -n 1) runs in ${secs}s)" >build/fuzz/"$name".result
	else
		echo "FAILED; see build/fuzz/$name.log" >build/fuzz/"$name".result
	fi
}
export -f one

# FUZZ_JOBS targets at a time (default 2: each target is one process that
# runs for its whole time slice, so two use the two cores of a CI machine;
# one after another took 156 s of make test's 27 minutes).
rm -f build/fuzz/*.result
printf '%s\n' tests/fuzz/fuzz_*.c | xargs -P "$jobs" -I{} bash -c 'one "$1" "$2"' _ {} "$secs"

passed=0
failed=0
for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	result=$(cat build/fuzz/"$name".result 2>/dev/null || echo "FAILED; no result (the runner died)")
	echo "fuzz $name: $result"
	case $result in
	ok*) passed=$((passed + 1)) ;;
	*)
		failed=$((failed + 1))
		[ ! -f build/fuzz/"$name".log ] || tail -n 30 build/fuzz/"$name".log
		;;
	esac
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
