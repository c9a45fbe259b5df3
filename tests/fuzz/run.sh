#!/usr/bin/env bash
# Run every fuzz target for N seconds (default 5) from its seed corpus;
# prints "fuzz: N passed, N failed". A crash leaves its input in build/fuzz/.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-5}
passed=0
failed=0
# Every target in tests/fuzz/ must have been built (make fuzz): a missing
# one is a failure, not a silent zero.
for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	bin=build/fuzz/$name
	if [ ! -x "$bin" ]; then
		echo "fuzz $name: FAILED; $bin is not built (make fuzz)"
		failed=$((failed + 1))
		continue
	fi
	corpus=build/fuzz/corpus/$name
	mkdir -p "$corpus"
	[ -d "tests/fuzz/corpus/$name" ] && cp -n tests/fuzz/corpus/$name/* "$corpus"/ 2>/dev/null
	if "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix=build/fuzz/"$name"- "$corpus" >build/fuzz/"$name".log 2>&1; then
		echo "fuzz $name: ok ($(grep -Eo 'stat::number_of_executed_units: [0-9]+|#[0-9]+' build/fuzz/"$name".log | tail -n 1) runs in ${secs}s)"
		passed=$((passed + 1))
	else
		echo "fuzz $name: FAILED; see build/fuzz/$name.log"
		tail -n 30 build/fuzz/"$name".log
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
