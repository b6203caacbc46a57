#!/bin/sh
# aot.nvptx: dcc --target=nvptx --emit=obj,header for softmax, a client
# linked with libdcrt.a only; checks on a GPU, skips cleanly without one.
# With STUB (the toolkit's stub libcuda.so) the client also runs against
# it, on any machine, and dcrt_last_error() must name the stub.
#   run_gpu.sh DCC CC LIBDCRT SRCDIR [STUB]
set -eu
dcc=$1 cc=$2 lib=$3 src=$4 stub=${5:-}
prog=$src/examples/softmax.tex
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" "$prog" --target=nvptx --emit=obj,header -o "$work/softmax"
grep -q 'int softmax_launch(int64_t T, uint64_t X, uint64_t P, uint64_t workspace, void \*stream);' "$work/softmax.h"
grep -q 'size_t softmax_workspace_size(int64_t T);' "$work/softmax.h"
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" "$src/tests/aot/client_gpu.c" \
    "$work/softmax.o" "$lib" -lpthread -lm -ldl -o "$work/client"
if [ -n "$stub" ] && [ -f "$stub" ]; then
    mkdir "$work/stub"
    ln -s "$stub" "$work/stub/libcuda.so.1"
    out=$(LD_LIBRARY_PATH="$work/stub" "$work/client" 1 /dev/null)
    # not echoed as is: its "skipped: " would mark the test skipped on a GPU machine
    echo "$out" | grep -q "softmax_launch: no CUDA driver found (.*stub" ||
        { echo "FAIL: with the stub libcuda: $out"; exit 1; }
    echo "stub driver: ok, dcrt_last_error() names the stub"
fi
for T in 1 77 200; do
    "$dcc" run "$prog" --target=reference --set T=$T --output "P=$work/ref.npy"
    "$work/client" $T "$work/ref.npy"
done
