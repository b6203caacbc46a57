#!/bin/sh
# aot.bytewise: what `dcc run` computes is what the object ships, bit for
# bit. A program of two dims with intermediates is tuned (a short
# per-shape CPU run, so its dispatch tree has leaves to pick from), its
# object built from the records (default instruction sets: the CPU the
# records were tuned on, this one, as the JIT compiles for it), and for
# shapes across both ranges and above them the client's output .npy is
# compared with `dcc run --records --output` byte for byte.
#   bytewise.sh DCC CC LIBDCRT SRCDIR
set -eu
dcc=$1 cc=$2 lib=$3 src=$4
prog=$src/tests/aot/two_dims.tex
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" tune "$prog" --per-shape --trials 3 --shapes B=1..4:2 --shapes T=1..64:3 \
    --records "$work/r.jsonl" >"$work/tune.out" 2>/dev/null
grep -q "dispatch:" "$work/tune.out"
"$dcc" "$prog" --records "$work/r.jsonl" --emit=obj,header -o "$work/two_dims"
grep -q "Instruction sets (x86-64 level): native" "$work/two_dims.h" ||
    { echo "FAIL: the object does not hold the records' CPU first"; grep -i "instruction" "$work/two_dims.h"; exit 1; }
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" \
    "$src/tests/aot/client_npy.c" "$work/two_dims.o" "$lib" -lpthread -lm -ldl -o "$work/client"
variants=$("$dcc" "$prog" --records "$work/r.jsonl" --emit=loops | grep -c '^kernel ')
n=0
for bt in 1,1 1,64 2,17 3,33 4,5 4,64 2,65 5,9 7,100; do
    B=${bt%,*} T=${bt#*,}
    "$dcc" run "$prog" --records "$work/r.jsonl" --set B="$B" --set T="$T" --output "Y=$work/run.npy"
    "$work/client" "$B" "$T" "$work/aot.npy"
    cmp "$work/run.npy" "$work/aot.npy" || { echo "FAIL: B=$B T=$T differ"; exit 1; }
    n=$((n + 1))
done
echo "aot.bytewise: $n shapes identical, $variants kernels in the tuned program"
