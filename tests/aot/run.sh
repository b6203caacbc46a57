#!/bin/sh
# aot.cpu: compiles PROG.tex to an object and a header with dcc, builds
# tests/aot/client.c against them with libdcrt.a and -lpthread -lm -ldl
# only (no LLVM), runs it for several T (inside and above the declared
# range, not multiples of any tile) and compares with the reference.
#   run.sh DCC CC LIBDCRT SRCDIR PROG.tex DEFINE T...
# $DC_DCC_FLAGS, if set, is passed to dcc (e.g. --records FILE: the object
# then holds the tuned kernels and their dispatch tree); $DC_DCC_MK, if set,
# as one --mk argument (a micro-kernel's text has spaces). $DC_LEVELS, if
# set (e.g. "3 2"), also runs the client with DCRT_CPU_LEVEL at each of
# those x86-64 levels (the kernels the object holds for that level), and
# checks that the object holds one program table per vector width.
set -eu
dcc=$1 cc=$2 lib=$3 src=$4 prog=$5 def=$6
shift 6
name=$(basename "$prog" .tex)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086
"$dcc" "$prog" ${DC_DCC_FLAGS:-} ${DC_DCC_MK:+--mk "$DC_DCC_MK"} --emit=obj,header -o "$work/$name"
test -s "$work/$name.o" && test -s "$work/$name.h"
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -D"$def" -I"$work" -I"$src/include" \
    "$src/tests/aot/client.c" "$work/$name.o" "$lib" -lpthread -lm -ldl -o "$work/client"
"$work/client" --errors
out=$(grep '^output' "$prog" | sed 's/^output *\([A-Za-z_0-9]*\).*/\1/')
if [ -n "${DC_LEVELS:-}" ]; then
    tables=$(nm "$work/$name.o" | grep -c "${name}__program")
    [ "$tables" -eq 3 ] ||
        { echo "FAIL: $name.o holds $tables program tables (one per vector width: 3 expected)"; exit 1; }
fi
for T in "$@"; do
    "$dcc" run "$prog" --target=reference --set T="$T" --output "$out=$work/ref.npy"
    "$work/client" "$T" "$work/ref.npy"
    for level in ${DC_LEVELS:-}; do
        DCRT_CPU_LEVEL=$level "$work/client" "$T" "$work/ref.npy"
    done
done
echo "aot: $name ok"
