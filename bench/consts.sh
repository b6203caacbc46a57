#!/bin/sh
# Constant weights against weights as inputs (issue 32): the BERT encoder
# layer of examples/bert_encoder.tex as it is, and with its sixteen weights
# and biases as `const` tensors (random weights made by dcc run itself,
# seed 1). For each: the time to compile the object and its size, then
# `dcc run --bench` (the object JIT-compiled, default kernels) at T = 1,
# 16, 64, 128, the two forms alternated in rounds, on the same weights
# (the inputs form is given the constants' files with --input: values
# change the speed, through denormals). With TRIALS, each form is then
# tuned (dcc tune --trials TRIALS, its time printed) and the same table
# measured again with each form's records. Run it on a quiet machine.
#   bench/consts.sh [DCC] [ROUNDS] [TRIALS]
set -eu
dcc=${1:-build/dcc}
rounds=${2:-3}
trials=${3:-}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
enc=$src/examples/bert_encoder.tex
# the weights: outputs of a program whose inputs dcc seeds
gen=$work/gen.tex
consts=$work/bert_encoder_const.tex
: >"$gen"
outs=""
grep '^input' "$enc" | grep -v '^input X\[' | while read -r line; do
    name=$(echo "$line" | sed 's/^input \([A-Za-z0-9_]*\)\[.*/\1/')
    ext=$(echo "$line" | sed 's/^[^[]*\[\([^]]*\)\].*/\1/')
    ty=$(echo "$line" | sed 's/.*\] *//')
    echo "input R_$name[$ext] $ty" >>"$gen"
    axes=$(echo "$ext" | awk -F', ' '{for (i = 1; i <= NF; i++) printf "%sa%d: %s", (i > 1 ? ", " : ""), i, $i}')
    idx=$(echo "$ext" | awk -F', ' '{for (i = 1; i <= NF; i++) printf "%sa%d", (i > 1 ? ", " : ""), i}')
    echo "output $name[$axes] = R_$name[$idx] * 0.05" >>"$gen"
done
ins=""
for name in $(grep '^output' "$gen" | sed 's/^output \([A-Za-z0-9_]*\).*/\1/'); do
    outs="$outs --output $name=$work/$name.npy"
    ins="$ins --input $name=$work/$name.npy"
done
# shellcheck disable=SC2086
"$dcc" run "$gen" $outs >/dev/null
sed 's/^input \([A-Za-z0-9_]*\)\[\([^]]*\)\] f32$/const \1[\2] f32 = "\1.npy"/; s/^const X\[T, 768\] f32 = "X.npy"$/input X[T, 768] f32/' \
    "$enc" >"$consts"
grep -c '^const' "$consts" | sed 's/^/constants: /'
for form in inputs consts; do
    prog=$enc
    [ "$form" = consts ] && prog=$consts
    t0=$(date +%s.%N)
    "$dcc" "$prog" --emit=obj -o "$work/$form.o"
    t1=$(date +%s.%N)
    printf '%-7s compile %.2f s, object %d bytes\n' "$form" "$(echo "$t1 - $t0" | bc)" \
        "$(stat -c %s "$work/$form.o")"
done
# The table: each form's median ms per call, a column per round; with
# records when $1 is "tuned".
table() {
    for T in 1 16 64 128; do
        for r in $(seq "$rounds"); do
            for form in inputs consts; do
                prog=$enc args=$ins
                [ "$form" = consts ] && prog=$consts args=
                [ "$1" = tuned ] && args="$args --records $work/$form.jsonl"
                # shellcheck disable=SC2086
                ms=$("$dcc" run "$prog" --set T="$T" $args --bench 30 |
                     sed -n 's/^bench: median \([0-9.]*\) ms.*/\1/p')
                echo "T=$T $form $ms"
            done
        done
    done | awk -v k="$1" '{ key = $1 " " $2; v[key] = v[key] " " $3 }
                 END { for (key in v) print k " " key ":" v[key] }' | sort -t= -k2 -n
}
table default
[ -n "$trials" ] || exit 0
for form in inputs consts; do
    prog=$enc
    [ "$form" = consts ] && prog=$consts
    t0=$(date +%s.%N)
    "$dcc" tune "$prog" --trials "$trials" --records "$work/$form.jsonl" >/dev/null 2>"$work/tune.err" ||
        { cat "$work/tune.err" >&2; exit 1; }
    t1=$(date +%s.%N)
    printf '%-7s tune %.1f s\n' "$form" "$(echo "$t1 - $t0" | bc)"
done
table tuned
