#!/bin/sh
# GPU check, for a machine with an NVIDIA GPU, the CUDA driver and toolkit
# (cuBLAS) and a C compiler, which may lack LLVM. NOT part of ctest or CI.
# On this project's build machine, build a statically linked dcc and the
# runtime once:
#
#   cmake -S . -B build-static -DDC_STATIC_LLVM=ON
#   cmake --build build-static -j4 --target dcc dcrt
#
# carry build-static/dcc and build-static/libdcrt.a to the GPU machine with
# the source tree (and, where that machine lacks them, the shared libraries
# `ldd build-static/dcc` names beyond libc, libm, libz and libzstd —
# libcjson — and libxgboost with its libdmlc and libgomp, which the tuner
# loads, in build-static/lib/),
# and there run, from the repository root:
#
#   scripts/gpu-check.sh build-static/dcc
#
# (DCC defaults to build/dcc; libdcrt.a is taken from the directory of
# DCC; CUDA_HOME, default /usr/local/cuda, locates cuBLAS.) It never runs
# for more than 5 minutes: the whole script re-executes itself under
# `timeout 300`, and each command has its own shorter limit. Without a
# usable GPU it prints one line and exits 1.
#
# 1. bert: dcc's kernels against cuBLAS on BERT-base's four dense layers
#    (QKV 768->2304, attention output 768->768, FFN1 768->3072, FFN2
#    3072->768, each with bias) for every T = 1..128: dcc emits an object
#    and a header for examples/bert_qkv.tex and bench/layers/*.tex, and
#    bench/gpu/cublas_bert.c, linked with them, libdcrt.a, cuBLAS and the
#    CUDA runtime, times NAME_launch and cublasSgemm (what it compares is
#    written at the top of its output), checks dcc's results against
#    cuBLAS's, and prints the geometric mean of cublas_time / dcc_time per
#    layer, per band of T and overall, with the weights warm in L2 and
#    cold (rotated among copies larger than twice L2); at most 60 s.
#    With DC_GPU_TUNE=N the four layers are first tuned on the GPU (`dcc
#    tune --target=cuda --trials N`, T = 1..128, at most 37 s a layer, 150 s
#    in all) and the objects built with the tuned kernels and dispatch
#    trees (`--records`);
# 2. `dcc run --target=cuda --check` for every example, for sizes across
#    its declared range and above it (not multiples of any tile), against
#    the reference interpreter on the host CPU, and one `--bench` run;
# 3. each GPU kernel form a tuned kernel may take (threads of a warp along
#    the reduction, split-K, strided 8 x 8 tiles, double-buffered staging),
#    given with --mk, checked at T = 1, 77 and 200 and timed at 1 and 128;
# 4. the whole encoder layer (examples/bert_encoder.tex, some 20 launches a
#    call) at T = 1 and 16, its launches replayed as one CUDA graph
#    (the default) and launched one by one (DCRT_CUDA_GRAPHS=0), each timed
#    over 50 calls and then checked against the reference;
# 5. the encoder layer (default kernels, graphs on) against PyTorch eager in
#    FP32 with TF32 off (bench/gpu/encoder_torch.py, the layer of
#    bench/encoder.py) at T = 1, 16, 64 and 128, when PYTHON (default
#    python3) has PyTorch with CUDA; skipped otherwise.
# 6. tuning under mpirun with one measuring rank per GPU (issue 35): QKV
#    tuned on cuda with 8 trials by 1 rank and by `mpirun -n GPUS+1`, the
#    wall time of each and the tuned kernels' latency at T = 1 and 128;
#    skipped, with the reason, on one GPU, with DC_GPU_TUNE (the 5
#    minutes), without Open MPI's mpirun or with a dcc built without MPI
#    (a static dcc from a build machine without Open MPI's development
#    files); at most 90 s.
# Exit status: 0 when every check passed, 1 otherwise, 124 on the 5-minute
# limit.
set -u
if [ -z "${DC_GPU_CHECK_INNER:-}" ]; then
    DC_GPU_CHECK_INNER=1 exec timeout -k 5 300 sh "$0" "$@"
fi
cd "$(dirname "$0")/.."
dcc=${1:-build/dcc}
lib=$(dirname "$dcc")/libdcrt.a
# the shared libraries dcc needs beyond libc (XGBoost and cJSON, for the
# tuner) may be carried in a lib/ folder beside it: dcc alone runs with
# them (a wrapper), so the C compiler and cuBLAS keep the system's
if [ -d "$(dirname "$dcc")/lib" ]; then
    wrap=$(mktemp -d)
    trap 'rm -rf "$wrap"' EXIT
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
        "$(cd "$(dirname "$dcc")/lib" && pwd)" "$(cd "$(dirname "$dcc")" && pwd)/$(basename "$dcc")" \
        >"$wrap/dcc"
    chmod +x "$wrap/dcc"
    dcc=$wrap/dcc
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
fails=0

say() { printf '\n== %s\n' "$*"; }
limited() { # runs and reports one command, limited to $1 seconds
    lim=$1
    shift
    echo "+ $*"
    if ! timeout -k 2 "$lim" "$@"; then
        echo "FAILED: $*"
        fails=$((fails + 1))
    fi
}
run() { limited 60 "$@"; }

# one line and exit 1 when something needed is missing or there is no usable GPU
if ! "$dcc" --version >/dev/null 2>&1; then
    echo "gpu-check: cannot run $dcc (build it, or carry a statically linked one)"; exit 1
fi
if ! out=$(timeout 60 "$dcc" run examples/softmax.tex --target=cuda --set T=1 --check 2>&1); then
    echo "gpu-check: no usable GPU, nothing checked: $(echo "$out" | tail -1)"; exit 1
fi

say "the GPU and driver"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "(nvidia-smi not found)"
"$dcc" --version

say "1. bert: dcc against cuBLAS, every T in 1..128"
work=$(mktemp -d)
trap 'rm -rf "$work" ${wrap:+"$wrap"}' EXIT
if [ ! -f "$lib" ]; then
    echo "FAILED: no $lib beside $dcc"; fails=$((fails + 1))
elif [ ! -f "$cuda/include/cublas_v2.h" ]; then
    echo "FAILED: no cuBLAS under $cuda (set CUDA_HOME)"; fails=$((fails + 1))
else
    built=1
    for tex in examples/bert_qkv.tex bench/layers/bert_attn_out.tex bench/layers/bert_ffn1.tex \
               bench/layers/bert_ffn2.tex; do
        name=$(basename "$tex" .tex)
        records=
        if [ -n "${DC_GPU_TUNE:-}" ]; then
            # tuned on this GPU first: the joint search, DC_GPU_TUNE trials
            limited 37 "$dcc" tune "$tex" --target=cuda --trials "$DC_GPU_TUNE" \
                --records "$work/$name.jsonl" >"$work/$name.tune" 2>/dev/null
            grep -E '^(tune|stage|  dispatch|  latency)' "$work/$name.tune"
            records="--records $work/$name.jsonl"
        fi
        # shellcheck disable=SC2086
        timeout 60 "$dcc" "$tex" $records --target=nvptx --emit=obj,header -o "$work/$name" ||
            built=0
    done
    libdir=$cuda/lib64
    [ -d "$libdir" ] || libdir=$cuda/lib
    echo "+ cc bench/gpu/cublas_bert.c (4 dcc objects, $lib, -lcublas -lcudart from $libdir)"
    if [ "$built" -eq 1 ] &&
        cc -O2 -std=c11 -I"$work" -Iinclude -I"$cuda/include" bench/gpu/cublas_bert.c \
            "$work"/bert_qkv.o "$work"/bert_attn_out.o "$work"/bert_ffn1.o "$work"/bert_ffn2.o \
            "$lib" -L"$libdir" -Wl,-rpath,"$libdir" -lcublas -lcudart -ldl -lpthread -lm \
            -o "$work/cublas_bert"; then
        # its own budget ends it with a partial summary before this limit
        limited 65 "$work/cublas_bert" --budget 55
    else
        echo "FAILED: building the cuBLAS benchmark"; fails=$((fails + 1))
    fi
fi

say "2. every example on the GPU, checked against the reference"
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
run "$dcc" run examples/bert_qkv.tex --target=cuda --set T=77 --bench 20

say "3. the GPU kernel forms, checked and timed (QKV)"
while IFS='|' read -r form mk; do
    for T in 1 77 200; do
        run "$dcc" run examples/bert_qkv.tex --target=cuda --set T=$T --check --mk "Y=$mk"
    done
    for T in 1 128; do
        printf '%-12s T=%-4s ' "$form" "$T"
        timeout 30 "$dcc" run examples/bert_qkv.tex --target=cuda --set T=$T --bench 20 --mk "Y=$mk" |
            grep '^bench' || { echo "FAILED"; fails=$((fails + 1)); }
    done
done <<'FORMS'
default|threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged
pipelined|threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged pipelined
warp-gemv|threads [1, 8] tile [1, 1] rchunk 128 unroll 1 vec 4 along reduction rthreads 32
split4|threads [8, 32] tile [4, 4] rchunk 16 unroll 4 vec 4 staged split 4 pipelined
strided8x8|threads [16, 16] tile [8, 8] rchunk 8 unroll 2 vec 4 staged strided pipelined
FORMS

say "4. the encoder layer: CUDA graphs against launches one by one"
for T in 1 16; do
    for graphs in 1 0; do
        printf 'encoder T=%-4s graphs=%s ' "$T" "$graphs"
        if out=$(DCRT_CUDA_GRAPHS=$graphs timeout 45 "$dcc" run examples/bert_encoder.tex \
                 --target=cuda --set T=$T --bench 50 --check 2>&1) &&
            echo "$out" | grep '^bench'; then
            :
        else
            echo "FAILED: $(echo "$out" | tail -1)"; fails=$((fails + 1))
        fi
    done
done

say "5. the encoder layer against PyTorch eager (FP32, TF32 off)"
# PyTorch from PYTHON (default python3); without it or without CUDA in it,
# this section says so and is skipped
if torch_out=$(timeout 90 "${PYTHON:-python3}" bench/gpu/encoder_torch.py 1 16 64 128 2>&1); then
    for T in 1 16 64 128; do
        eager=$(echo "$torch_out" | awk -v t="$T" '$1 == "T" && $2 == t { print $4 }')
        ms=$(timeout 45 "$dcc" run examples/bert_encoder.tex --target=cuda --set T=$T --bench 50 \
             2>/dev/null | sed -n 's/^bench: median \([0-9.]*\) ms.*/\1/p')
        if [ -n "$eager" ] && [ -n "$ms" ]; then
            echo "encoder T=$T: dcc $ms ms, PyTorch eager $eager ms, eager/dcc" \
                "$(awk -v a="$eager" -v b="$ms" 'BEGIN { printf "%.2fx", a / b }')"
        else
            echo "FAILED: encoder T=$T"; fails=$((fails + 1))
        fi
    done
else
    echo "skipped: $(echo "$torch_out" | tail -1)"
fi

say "6. tuning under mpirun, one measuring rank per GPU"
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
mpi="mpirun --allow-run-as-root --oversubscribe"
tune="tune examples/bert_qkv.tex --target=cuda"
# shellcheck disable=SC2086
if [ "$ngpu" -lt 2 ]; then
    echo "skipped: $ngpu GPU(s); one measuring rank per GPU needs 2 or more"
elif [ -n "${DC_GPU_TUNE:-}" ]; then
    echo "skipped: DC_GPU_TUNE took this section's time"
elif ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    echo "skipped: no Open MPI mpirun (openmpi-bin)"
elif ! timeout 20 $mpi -n 2 "$dcc" $tune --trials 1 --shapes T=1..2 --records "$work/probe.jsonl" \
        >"$work/probe.tune" 2>&1 || grep -q "built without MPI" "$work/probe.tune"; then
    echo "skipped: $(grep -m1 'without MPI\|error' "$work/probe.tune" || echo 'a 2-rank tune failed')"
else
    t0=$(date +%s.%N)
    ok=1
    timeout -k 2 25 "$dcc" $tune --trials 8 --records "$work/one.jsonl" >"$work/one.tune" 2>&1 ||
        { echo "FAILED: 1-rank tune: $(tail -1 "$work/one.tune")"; ok=0; }
    t1=$(date +%s.%N)
    timeout -k 2 25 $mpi -n $((ngpu + 1)) "$dcc" $tune --trials 8 --records "$work/many.jsonl" \
        >"$work/many.tune" 2>&1 ||
        { echo "FAILED: $((ngpu + 1))-rank tune: $(tail -1 "$work/many.tune")"; ok=0; }
    t2=$(date +%s.%N)
    if [ "$ok" -eq 0 ]; then
        fails=$((fails + 1))
    else
        grep '^mpi:' "$work/many.tune"
        echo "1 rank $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s," \
             "$((ngpu + 1)) ranks $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }') s"
        for T in 1 128; do
            for f in one many; do
                printf 'QKV T=%-4s %-4s records ' "$T" "$f"
                timeout 10 "$dcc" run examples/bert_qkv.tex --target=cuda --set T=$T --bench 20 \
                    --records "$work/$f.jsonl" | grep '^bench' || { echo "FAILED"; fails=$((fails + 1)); }
            done
        done
    fi
fi

say "done: $fails failure(s)"
[ "$fails" -eq 0 ]
