#!/bin/sh
# cuda.fake_driver: a GPU object of constants.tex (constants, checked
# gathers, two kernels) called through libdcrt.a on the fake driver
# (tests/cuda/fake_libcuda.c): what it loads, uploads, captures and
# frees (constants_release), and the kernel parameters of every launch;
# then with every graph capture failing (FAKE_CUDA_FAIL_CAPTURE=1).
#   fake_driver.sh DCC CC LIBDCRT SRCDIR FAKE_LIBCUDA_DIR
set -eu
dcc=$1 cc=$2 lib=$3 src=$4 fake=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dcc" "$src/tests/golden/accept/constants.tex" --target=nvptx --emit=obj,header -o "$work/constants"
grep -q '^void constants_release(void);' "$work/constants.h" ||
    { echo "FAIL: constants.h declares no constants_release"; exit 1; }
"$cc" ${DC_CLIENT_FLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$work" -I"$src/include" \
    "$src/tests/cuda/fake_client.c" "$work/constants.o" "$lib" -lpthread -lm -ldl -o "$work/client"
for bs in "1 1" "2 7" "4 24"; do
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$fake" "$work/client" $bs
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$fake" FAKE_CUDA_FAIL_CAPTURE=1 "$work/client" $bs
done
