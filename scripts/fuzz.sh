#!/bin/sh
# Fuzzes with libFuzzer, each target for SECONDS (default 60):
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# TARGET is frontend (fuzz_frontend: .tex text through the lexer, parser
# and sema), records (fuzz_records: a records file through the reader,
# the dispatch trees and the schedule dcc takes from it) or onnx (fuzz_onnx:
# a model's bytes through protobuf-c and the importer); all by default.
# Configures build-fuzz with clang-14 and -DDC_FUZZ=ON (ASan + UBSan +
# coverage on all code), builds the targets and runs each on a scratch
# corpus (first: libFuzzer writes new inputs there) seeded from its corpus
# in tests/fuzz (second: read only), with its dictionary there. Exits
# non-zero on a crash, leak, sanitizer report or an input that runs over
# 10 s; the input that triggered it is left in build-fuzz/artifacts/. Once
# fixed, add it to the target's corpus as regress_NAME (a .tex worth
# reading also to tests/golden).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
case $secs in
'' | *[!0-9]*) echo "usage: $0 [SECONDS] [frontend|records|onnx...]" >&2; exit 2 ;;
esac
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- frontend records onnx
for t in "$@"; do
    case $t in
    frontend | records | onnx) ;;
    *) echo "usage: $0 [SECONDS] [frontend|records|onnx...]" >&2; exit 2 ;;
    esac
done
cc=${CC:-clang-14}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 2
fi

build=build-fuzz
CC=$cc cmake -S . -B $build -DDC_FUZZ=ON -DDC_WERROR=ON >/dev/null
targets=
for t in "$@"; do targets="$targets fuzz_$t"; done
# shellcheck disable=SC2086 # a list of targets
cmake --build $build --target $targets -j"$(nproc 2>/dev/null || echo 2)" >/dev/null

artifacts=$build/artifacts
mkdir -p $artifacts
failed=0
for t in "$@"; do
    case $t in
    frontend) corpus=tests/fuzz/corpus dict=tests/fuzz/frontend.dict maxlen=4096 ;;
    records) corpus=tests/fuzz/records_corpus dict=tests/fuzz/records.dict maxlen=4096 ;;
    onnx) corpus=tests/fuzz/onnx_corpus dict=tests/fuzz/onnx.dict maxlen=8192 ;;
    esac
    scratch=$build/fuzz-corpus-$t
    log=$build/fuzz-$t.log
    mkdir -p "$scratch"
    echo "fuzz.sh: fuzzing $t for ${secs}s (log: $log)"
    status=0
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ASAN_OPTIONS=detect_leaks=1 \
        $build/fuzz_$t -max_total_time="$secs" -max_len=$maxlen -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$artifacts/ \
        -dict=$dict "$scratch" $corpus >"$log" 2>&1 || status=$?
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb' \
        "$log" || true
    if [ $status -ne 0 ]; then
        tail -n 60 "$log"
        echo "fuzz.sh: $t FAILED (status $status); the input is in $artifacts/" >&2
        failed=1
    fi
done
if [ $failed -ne 0 ]; then
    exit 1
fi
echo "fuzz.sh: no crash, leak or timeout in ${secs}s of each of: $*"
