#!/usr/bin/env bash
# Runs each fuzz target of `curlew-fuzz` (built with -sanitize=fuzzer,address) for SECONDS and prints one line per
# target: `fuzz NAME: N executions, K crashes`. Exits non-zero when any target found a crash; the input is kept under
# .build/fuzz/artifacts/NAME/ (add it to Tests/Fuzz/Corpus/NAME/ as a regression once fixed).
#
#     Tests/Fuzz/run-fuzz.sh BINARY SECONDS NAME...
set -uo pipefail
binary=$1 seconds=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$root/.build/fuzz/runs
failed=0
for name in "$@"; do
    corpus=$work/corpus/$name artifacts=$work/artifacts/$name/ log=$work/$name.log
    rm -rf "$artifacts" && mkdir -p "$corpus" "$artifacts"
    # New inputs go to the work corpus (first directory); the repository's seeds are only read.
    SWIFT_BACKTRACE=enable=no LSAN_OPTIONS="suppressions=$root/Tests/Fuzz/lsan-suppressions.txt" "$binary" "$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$artifacts" "$corpus" "$root/Tests/Fuzz/Corpus/$name" > "$log" 2>&1
    status=$?
    executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=$(find "$artifacts" -type f | wc -l)
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
    echo "fuzz $name: ${executions:-0} executions, $crashes crashes"
    if [ "$crashes" -ne 0 ]; then
        failed=1
        grep -E 'property failed|ERROR: AddressSanitizer|Fatal error|SUMMARY' "$log" | head -5 | sed 's/^/    /'
        echo "    input and log: $artifacts, $log"
    fi
done
exit $failed
