#!/bin/sh
# aot.nvptx: dcc --target=nvptx --emit=obj,header for softmax, a client
# linked with libdcrt.a only; checks on a GPU, skips cleanly without one.
#   run_gpu.sh DCC CC LIBDCRT SRCDIR
set -eu
dcc=$1 cc=$2 lib=$3 src=$4
prog=$src/examples/softmax.tex
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" "$prog" --target=nvptx --emit=obj,header -o "$work/softmax"
grep -q 'int softmax_launch(int64_t T, uint64_t X, uint64_t P, void \*stream);' "$work/softmax.h"
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" "$src/tests/aot/client_gpu.c" \
    "$work/softmax.o" "$lib" -lpthread -lm -ldl -o "$work/client"
for T in 1 77 200; do
    "$dcc" run "$prog" --target=reference --set T=$T --output "P=$work/ref.npy"
    "$work/client" $T "$work/ref.npy"
done
