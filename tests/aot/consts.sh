#!/bin/sh
# aot.consts: an object that carries constant tensors (their .npy files
# are not read at run time: the object is moved away from them) computes
# what `dcc run` computes, byte for byte, and its entry does not take them.
#   consts.sh DCC CC LIBDCRT SRCDIR
set -eu
dcc=$1 cc=$2 lib=$3 src=$4
prog=$src/tests/golden/accept/constants.tex
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" "$prog" --emit=obj,header -o "$work/constants"
if grep -q "const float \*E" "$work/constants.h"; then
    echo "FAIL: constants_run takes the constant E"; exit 1
fi
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" \
    "$src/tests/aot/client_consts.c" "$work/constants.o" "$lib" -lpthread -lm -ldl -o "$work/client"
for bs in 1,1 2,7 4,24 3,13; do
    B=${bs%,*} S=${bs#*,}
    "$dcc" run "$prog" --set B="$B" --set S="$S" --output "H=$work/h.npy" --output "Y=$work/y.npy"
    (cd / && "$work/client" "$B" "$S" "$work/ah.npy" "$work/ay.npy")
    cmp "$work/h.npy" "$work/ah.npy" && cmp "$work/y.npy" "$work/ay.npy" ||
        { echo "FAIL: B=$B S=$S differ"; exit 1; }
done
echo "aot.consts ok"
