#!/bin/sh
# aot.gather: an object whose kernels gather rows by an i32 tensor's
# values, called from C (tests/aot/client_gather.c) for several T: in-range
# indices computed right, an out-of-range one refused with DCRT_ERR_INDEX.
#   gather.sh DCC CC LIBDCRT SRCDIR T...
set -eu
dcc=$1 cc=$2 lib=$3 src=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" "$src/tests/golden/accept/gather_out_of_range.tex" --emit=obj,header \
    -o "$work/gather_out_of_range"
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" \
    -I"$src/tests/aot" "$src/tests/aot/client_gather.c" "$work/gather_out_of_range.o" "$lib" \
    -lpthread -lm -ldl -o "$work/client"
for T in "$@"; do
    "$work/client" "$T"
done
echo "aot.gather ok"
