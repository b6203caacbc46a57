#!/bin/sh
# aot.cpu.dispatch: objects whose one stage has three variants and a
# dispatch tree (tests/aot/dispatch_gen.c), a client linked with libdcrt.a
# and -lpthread -lm -ldl only, run for T on every leaf of the tree, ragged
# and above the declared range.
#   run_dispatch.sh GEN CC LIBDCRT SRCDIR T...
set -eu
gen=$1 cc=$2 lib=$3 src=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gen" "$work"
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" -I"$src/tests/aot" \
    "$src/tests/aot/client_dispatch.c" "$work/dense_dispatch.o" "$work/dense_dispatch_marked.o" \
    "$lib" -lpthread -lm -ldl -o "$work/client"
"$work/client" "$@"
echo "aot: dispatch ok"
