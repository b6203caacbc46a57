#!/bin/sh
# GPU check, for a machine with an NVIDIA GPU and the CUDA driver (it may
# lack LLVM: pass a statically linked dcc). NOT part of ctest or CI; it
# needs a GPU and prints what it runs before running it. It never runs for
# more than 5 minutes: the whole script re-executes itself under
# `timeout 300`, and each command has its own shorter limit.
#
#   scripts/gpu-check.sh [DCC]      (default build/dcc)
#
# 1. `dcc run --target=cuda --check` for every example, for sizes across
#    its declared range and above it (not multiples of any tile), against
#    the reference interpreter on the host CPU;
# 2. bert_qkv against cuBLAS (through PyTorch, when importable): the time
#    of `dcc run --target=cuda --bench 20` next to torch's X @ W^T + b for
#    the same T.
# Exit status: 0 when every check passed, 1 otherwise, 124 on the 5-minute
# limit.
set -u
if [ -z "${DC_GPU_CHECK_INNER:-}" ]; then
    DC_GPU_CHECK_INNER=1 exec timeout -k 5 300 sh "$0" "$@"
fi
cd "$(dirname "$0")/.."
dcc=${1:-build/dcc}
fails=0

say() { printf '\n== %s\n' "$*"; }
run() { # runs and reports one command, limited to 60 s
    echo "+ $*"
    if ! timeout -k 2 60 "$@"; then
        echo "FAILED: $*"
        fails=$((fails + 1))
    fi
}

say "the GPU and driver"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "(nvidia-smi not found)"
if ! "$dcc" --version >/dev/null 2>&1; then
    echo "cannot run $dcc (build it, or carry a statically linked one)"; exit 1
fi
# one line and exit 1 when there is no usable GPU: stop here
if ! out=$(timeout 60 "$dcc" run examples/softmax.tex --target=cuda --set T=1 --check 2>&1); then
    echo "$out"; echo "no usable GPU: nothing checked"; exit 1
fi

say "1. every example on the GPU, checked against the reference"
for ex in examples/*.tex; do
    dim=$(sed -n 's/^dim \([A-Za-z_][A-Za-z_0-9]*\) in \([0-9]*\)\.\.\([0-9]*\).*/\1 \2 \3/p' "$ex" | head -1)
    [ -n "$dim" ] || continue
    set -- $dim
    name=$1 lo=$2 hi=$3
    # LO, small odd sizes, the middle, HI, and above HI
    for v in $lo $((lo + 2)) 7 $(((lo + hi) / 2 + 1)) $hi $((hi + hi / 2 + 3)); do
        [ "$v" -ge "$lo" ] || continue
        run "$dcc" run "$ex" --target=cuda --set "$name=$v" --check
    done
done

say "2. bert_qkv: dcc against cuBLAS (PyTorch)"
for T in 1 16 77 128; do
    run "$dcc" run examples/bert_qkv.tex --target=cuda --set T=$T --bench 20
done
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "+ python3 (torch X @ W.T + b, cuBLAS), median of 20 after a warm-up"
    timeout -k 2 120 python3 - <<'PY' || fails=$((fails + 1))
import torch
W = torch.randn(2304, 768, device="cuda"); b = torch.randn(2304, device="cuda")
for T in (1, 16, 77, 128):
    X = torch.randn(T, 768, device="cuda")
    for _ in range(5):
        torch.addmm(b, X, W.t())
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); torch.addmm(b, X, W.t()); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    print(f"cublas T={T}: median {ts[len(ts)//2]:.3f} ms, min {ts[0]:.3f} ms")
PY
else
    echo "(PyTorch with CUDA not importable: no cuBLAS comparison)"
fi

say "done: $fails failure(s)"
[ "$fails" -eq 0 ]
