#!/bin/sh
# tune.aot: a small CPU tuning run of a dense layer (per shape: its winners
# differ, so the tree has leaves to pick from), then its AOT object
# built with the records (tuned kernels and the dispatch tree as compares
# in PROG_run), linked with libdcrt.a only and checked against the
# reference at T across the range and above it (tests/aot/run.sh).
#   aot.sh DCC CC LIBDCRT SRCDIR
set -eu
dcc=$1 cc=$2 lib=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=$src/tests/golden/accept/linear_bias.tex
"$dcc" tune "$prog" --per-shape --trials 4 --shapes T=1..32:6 --records "$tmp/r.jsonl" >"$tmp/out" 2>/dev/null
cat "$tmp/out"
"$dcc" "$prog" --records "$tmp/r.jsonl" --emit=loops | grep -c '^kernel ' |
    sed 's/^/kernels in the tuned program: /'
DC_DCC_FLAGS="--records $tmp/r.jsonl" sh "$src/tests/aot/run.sh" "$dcc" "$cc" "$lib" "$src" \
    "$prog" PROG_LINEAR 1 2 3 5 8 13 17 24 31 32 33 50 100
