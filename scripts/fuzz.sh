#!/bin/sh
# Fuzzes the frontend with libFuzzer for SECONDS (default 60):
#
#   scripts/fuzz.sh [SECONDS]
#
# Configures build-fuzz with clang-14 and -DDC_FUZZ=ON (ASan + UBSan +
# coverage on all code), builds fuzz_frontend and runs it on a scratch
# corpus (first: libFuzzer writes new inputs there) seeded from
# tests/fuzz/corpus (second: read only), with the keywords and builtins of
# tests/fuzz/frontend.dict. Exits non-zero on a crash, leak, sanitizer
# report or an input that runs over 10 s; the input that triggered it is
# left in build-fuzz/artifacts/. Once fixed, add it to tests/fuzz/corpus as
# regress_NAME.tex (and, if it is a program worth reading, to tests/golden).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
case $secs in
'' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
cc=${CC:-clang-14}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 2
fi

build=build-fuzz
CC=$cc cmake -S . -B $build -DDC_FUZZ=ON -DDC_WERROR=ON >/dev/null
cmake --build $build --target fuzz_frontend -j"$(nproc 2>/dev/null || echo 2)" >/dev/null

scratch=$build/fuzz-corpus
artifacts=$build/artifacts
mkdir -p $scratch $artifacts
log=$build/fuzz.log
echo "fuzz.sh: fuzzing the frontend for ${secs}s (log: $log)"
status=0
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
ASAN_OPTIONS=detect_leaks=1 \
    $build/fuzz_frontend -max_total_time="$secs" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$artifacts/ \
    -dict=tests/fuzz/frontend.dict \
    $scratch tests/fuzz/corpus >$log 2>&1 || status=$?
grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' $log || true
if [ $status -ne 0 ]; then
    tail -n 60 $log
    echo "fuzz.sh: FAILED (status $status); the input is in $artifacts/" >&2
    exit 1
fi
echo "fuzz.sh: no crash, leak or timeout in ${secs}s"
