#!/bin/sh
# cuda.run: `dcc run --target=cuda` either runs and passes --check (a
# machine with a GPU) or, without a driver or device, prints exactly one
# line "dcc: error: no CUDA ..." and exits 1, without crashing. With the
# toolkit's stub libcuda (cuInit gives 34) it must say the same.
#   no_gpu.sh DCC PROG.tex [STUB_LIBCUDA]
set -u
dcc=$1 prog=$2 stub=${3:-}
err=$(mktemp)
trap 'rm -f "$err"; rm -rf "${stubdir:-}"' EXIT

check_no_gpu() { # $1: exit status, $2: what
    if [ "$1" -ne 1 ] || [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q '^dcc: error: no CUDA' "$err"; then
        echo "FAIL ($2): exit $1, stderr:"; cat "$err"; exit 1
    fi
    echo "$2: $(cat "$err")"
}

"$dcc" run "$prog" --target=cuda --set T=5 --check 2>"$err"
rc=$?
if [ $rc -eq 0 ]; then
    echo "a GPU is present: dcc run --target=cuda --check passed"
else
    check_no_gpu $rc "no driver"
fi
if [ -n "$stub" ] && [ -f "$stub" ]; then
    stubdir=$(mktemp -d)
    ln -s "$stub" "$stubdir/libcuda.so.1"
    LD_LIBRARY_PATH=$stubdir "$dcc" run "$prog" --target=cuda --set T=5 2>"$err"
    check_no_gpu $? "stub driver"
    grep -q stub "$err" || { echo "FAIL: the stub is not named"; exit 1; }
fi
exit 0
