#!/bin/sh
# The command line as a careful user and an adversary use it: output paths
# (symlinks, devices, FIFOs, an input named as output, all or nothing),
# write errors on stdout, the exit-code rule (2: the command line itself;
# 1: everything else), messages that point the right way, -o without
# --emit, AOT headers of one program side by side.
#
#   tests/cli/run.sh DCC CC DCRT_LIB SOURCE_DIR
#
# Every case prints a line when it fails; exit status 1 if any did.
set -u
dcc=$1 cc=$2 dcrt=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0

bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# expect STATUS GREP-PATTERN -- COMMAND...: the exit status, and the pattern
# in stderr (empty pattern: no check).
expect() {
    want=$1 pat=$2
    shift 3
    "$@" >out.txt 2>err.txt
    got=$?
    [ "$got" -eq "$want" ] || bad "'$*' exited $got, expected $want: $(cat err.txt)"
    if [ -n "$pat" ] && ! grep -q -- "$pat" err.txt; then
        bad "'$*': stderr lacks '$pat': $(cat err.txt)"
    fi
}

cat >prog.tex <<'EOF'
dim T in 1..64
input X[T, 8] f32
output Y[i: T, j: 8] = X[i, j] * 2.0
output Z[i: T] = sum[j: 8](X[i, j])
EOF
cp prog.tex prog.orig
cat >nan.tex <<'EOF'
dim T in 1..64
input X[T] f32
output Y[i: T] = sqrt(X[i] - 2.0)
EOF

# ---- 1. output paths ----
echo keep >target.txt
ln -s target.txt link.txt
expect 0 "" -- "$dcc" prog.tex --emit=te -o link.txt
[ -L link.txt ] || bad "-o through a symlink replaced the link"
grep -q "dim T in 1..64" target.txt || bad "-o through a symlink did not write its target"
ln -s sub/new.txt dangling.txt
mkdir sub
expect 0 "" -- "$dcc" prog.tex --emit=te -o dangling.txt
[ -L dangling.txt ] && [ -f sub/new.txt ] || bad "a dangling symlink's target was not created"
expect 1 "is also an input" -- "$dcc" prog.tex --emit=te -o prog.tex
expect 1 "is also an input" -- "$dcc" prog.tex --emit=te -o ./sub/../prog.tex
ln -s prog.tex prog_link.tex
expect 1 "is also an input" -- "$dcc" prog_link.tex --emit=te -o prog.tex
cmp -s prog.tex prog.orig || bad "-o naming the input changed it"
# Devices: as root, a dcc that replaced its output would destroy /dev/full,
# so root uses private copies of /dev/full and /dev/null (skipped where
# mknod is not allowed); others cannot replace /dev entries anyway.
full=/dev/full null=/dev/null
if [ "$(id -u)" = 0 ]; then
    full= null=
    mknod full c 1 7 2>/dev/null && mknod null c 1 3 2>/dev/null && full=$work/full null=$work/null
fi
if [ -n "$full" ]; then
    expect 1 "No space left" -- "$dcc" prog.tex --emit=te -o "$full"
    expect 1 "No space left" -- "$dcc" run prog.tex --set T=3 --output Y="$full"
    [ -c "$full" ] || bad "$full is no longer a character device"
    expect 0 "" -- "$dcc" prog.tex --emit=te -o "$null"
    [ -c "$null" ] || bad "$null is no longer a character device"
fi
mkfifo fifo
(timeout 10 cat fifo >from_fifo.txt 2>/dev/null </dev/null &)
expect 0 "" -- "$dcc" prog.tex --emit=te -o fifo
sleep 1
[ -p fifo ] || bad "a FIFO output was replaced by a regular file"
grep -q "dim T in 1..64" from_fifo.txt || bad "a FIFO output was not written through"
# The descriptor names: /proc/self/fd/1 always (nothing can be renamed
# over procfs), /dev/stdout only when not root (a dcc that replaced it
# would break the machine for everyone).
stdout_names=/proc/self/fd/1
[ "$(id -u)" != 0 ] && stdout_names="$stdout_names /dev/stdout"
for so in $stdout_names; do
    echo first >appended.txt
    "$dcc" run prog.tex --set T=2 --output Z="$so" >>appended.txt 2>err.txt ||
        bad "--output Z=$so failed: $(cat err.txt)"
    head -n 1 appended.txt | grep -q "^first$" || bad "--output to $so clobbered a >> file"
    [ "$(wc -c <appended.txt)" -gt 100 ] || bad "--output to $so wrote nothing"
    # one file named twice, once through the descriptor: refused, o.txt kept
    echo keep >o.txt
    "$dcc" run prog.tex --set T=2 --output Y=o.txt --output Z="$so" >>o.txt 2>err.txt
    [ $? -eq 1 ] && grep -q "same file" err.txt || bad "o.txt named twice through $so: $(cat err.txt)"
    [ "$(cat o.txt)" = keep ] || bad "o.txt named twice through $so was changed"
done
mkdir adir
expect 1 "is a directory" -- "$dcc" prog.tex --emit=te -o adir
expect 1 "same file" -- "$dcc" run prog.tex --set T=3 --output Y=a.npy --output Z=./a.npy
[ -e a.npy ] && bad "refused outputs left a.npy"

# ---- 2. write errors on stdout ----
if [ -w /dev/full ]; then
    expect 1 "standard output" -- sh -c "'$dcc' prog.tex --emit=te >/dev/full"
    expect 1 "standard output" -- sh -c "'$dcc' prog.tex --emit=llvm >/dev/full"
    expect 1 "standard output" -- sh -c "'$dcc' run prog.tex --set T=4 >/dev/full"
    expect 1 "standard output" -- sh -c "'$dcc' --help >/dev/full"
fi

# a closed stdout: the summary cannot be printed, so no file is written
rm -f y3.npy
expect 1 "standard output" -- sh -c "'$dcc' run prog.tex --set T=4 --output Y=y3.npy >&-"
[ -e y3.npy ] && bad "a run whose stdout was closed wrote y3.npy"
expect 0 "" -- sh -c "'$dcc' run prog.tex --set T=4 --output Y=y3.npy --output Z=z3.npy >&-"
[ -s y3.npy ] && [ -s z3.npy ] || bad "a run printing nothing failed for a closed stdout"
# a closed stderr does not make the next file opened receive messages
expect 1 "" -- sh -c "'$dcc' run prog.tex --set T=0 --output Y=y5.npy 2>&-"
[ -e y5.npy ] && bad "a failing run with stderr closed wrote y5.npy"

# ---- 3. no partial outputs ----
echo old >y.npy
expect 1 "nodir/z.npy" -- "$dcc" run prog.tex --set T=3 --output Y=y.npy --output Z=nodir/z.npy
[ "$(cat y.npy)" = old ] || bad "a failing run replaced y.npy"
expect 0 "" -- "$dcc" run prog.tex --set T=3 --output Y=y.npy --output Z=z.npy
[ -s z.npy ] && [ "$(head -c 6 y.npy | tail -c 5)" = NUMPY ] || bad "run did not write both outputs"
ls ./*.tmp.* >/dev/null 2>&1 && bad "temporary files left behind: $(ls ./*.tmp.*)"

# the second of STEM.o and STEM.h cannot be written: neither is
mkdir -p stem2.h
echo old >stem2.o
expect 1 "stem2.h" -- "$dcc" prog.tex -o stem2
[ "$(cat stem2.o)" = old ] || bad "a failing -o STEM replaced STEM.o"
expect 2 "names a directory" -- "$dcc" prog.tex -o adir/
expect 2 "names a directory" -- "$dcc" prog.tex -o .
ls ./*.tmp.* adir/.* >/dev/null 2>&1 | grep -q tmp && bad "temporaries left behind"

# ---- 4. --stop-after with --emit ----
expect 0 "" -- "$dcc" prog.tex --emit=loops --stop-after=tile
grep -q "kernel" out.txt || bad "--emit=loops --stop-after printed no loop IR"
expect 2 "stop-after" -- "$dcc" prog.tex --emit=llvm --stop-after=tile
expect 2 "stop-after" -- "$dcc" prog.tex --emit=te --stop-after=tile

# ---- 7. one rule for exit codes ----
expect 2 "NAME=INTEGER" -- "$dcc" run prog.tex --set T=abc
expect 2 "NAME=INTEGER" -- "$dcc" prog.tex --emit=plan --set T=abc
expect 2 "--seed" -- "$dcc" run prog.tex --set T=3 --seed abc
expect 2 "--seed" -- "$dcc" tune prog.tex --seed -1
expect 2 "--bench" -- "$dcc" run prog.tex --set T=3 --bench 0
expect 2 "cpu target" -- "$dcc" run prog.tex --set T=3 --profile --target=emu
# --profile: a row per stage (GB/s elementwise, GFLOP/s with a reduction),
# shares that add up
expect 0 "" -- "$dcc" run prog.tex --set T=5 --profile --bench 3
grep -q "^Y .*GB/s" out.txt && grep -q "^Z .*GFLOP/s" out.txt &&
    grep -q "^total (launches) .* 100.0%" out.txt && grep -q "median of 3 runs" out.txt ||
    bad "--profile: $(cat out.txt)"
expect 2 "--trials" -- "$dcc" tune prog.tex --trials x
for ms in x -1 nan inf 1e7 5ms; do
    expect 2 "--probe-ms: '$ms' is not a valid time in ms" -- "$dcc" tune prog.tex --probe-ms "$ms"
done
expect 2 "given twice" -- "$dcc" run prog.tex --set T=3 --set T=4
expect 2 "given twice" -- "$dcc" run prog.tex --set T=3 --input X=a.npy --input X=b.npy
expect 2 "given twice" -- "$dcc" run prog.tex --set T=3 --output Y=a.npy --output Y=b.npy
expect 2 "given twice" -- "$dcc" prog.tex --emit=te --records=a --records=b
expect 2 "given twice" -- "$dcc" run prog.tex --set T=3 --records=a --records=b
expect 2 "given twice" -- "$dcc" tune prog.tex --shapes T=1..4 --shapes T=2..8
expect 2 "given twice" -- "$dcc" prog.tex --emit=te -o a -o b
expect 2 "given twice" -- "$dcc" prog.tex --emit=te --emit=loops
expect 2 "given twice" -- "$dcc" run prog.tex --set T=3 --target cpu --target loops
expect 2 "LO <= HI" -- "$dcc" tune prog.tex --shapes T=64..3
expect 2 "GPU architecture" -- "$dcc" tune prog.tex --arch=sm_90
expect 2 "is for --target=emu and --target=cuda" -- "$dcc" run prog.tex --set T=3 --arch=sm_75
expect 2 "expected sm_75, sm_80" -- "$dcc" run prog.tex --set T=3 --target=emu --arch=sm_70
# a GPU form of an architecture on the emulator: sm_75 stages through
# registers, sm_80 through cp.async; both check
for a in sm_75 sm_80; do
    expect 0 "" -- "$dcc" run "$src/examples/bert_qkv.tex" --target=emu --arch=$a --set T=37 --check \
        --mk 'Y=threads [2, 16] tile [2, 2] rchunk 64 unroll 1 vec 4 along reduction staged pipelined'
    grep -q "matches the reference" out.txt || bad "emu --arch=$a: $(cat out.txt)"
done
# 66 KB of staging: dynamic shared memory on sm_80 (more than 48 KB)
expect 0 "" -- "$dcc" run "$src/examples/bert_qkv.tex" --target=emu --set T=77 --check \
    --mk 'Y=threads [16, 16] tile [8, 8] rchunk 32 unroll 1 vec 4 staged strided pipelined'
grep -q "matches the reference" out.txt || bad "emu, dynamic shared memory: $(cat out.txt)"
# atomic split-K: an opt-in of GPU tuning, recorded in the trees; a tree
# with atomic kernels but without the opt-in is a damaged line
expect 2 "is for the GPU" -- "$dcc" tune prog.tex --atomic-split
expect 2 "micro-kernel" -- "$dcc" prog.tex --emit=loops --mk \
    'Z=threads [1, 8] tile [1, 1] rchunk 8 unroll 1 vec 1 atomic' # atomic needs a split
expect 0 "" -- "$dcc" run "$src/examples/bert_qkv.tex" --target=emu --set T=9 --check \
    --mk 'Y=threads [2, 32] tile [2, 2] rchunk 16 unroll 1 vec 1 staged pipelined split 8 atomic'
grep -q "matches the reference" out.txt || bad "emu, atomic split-K: $(cat out.txt)"
cat >gemv.tex <<'EOF'
dim T in 1..4
input X[T, 2048] f32
input W[64, 2048] f32
input b[64] f32
output Y[i: T, j: 64] = sum[k: 2048](X[i, k] * W[j, k]) + b[j]
EOF
expect 0 "" -- "$dcc" tune gemv.tex --target=model --atomic-split --trials 48 --records atomic.jsonl
grep '"kind":"tree"' atomic.jsonl | grep -q '"atomic_split":true' ||
    bad "tune --atomic-split: no tree with the opt-in in $(cat atomic.jsonl | grep tree)"
for t in 1 4 5; do
    expect 0 "" -- "$dcc" run gemv.tex --target=emu --records atomic.jsonl --set T=$t --check
    grep -q "matches the reference" out.txt || bad "emu from atomic records, T=$t: $(cat out.txt)"
done
# more than a warp along the reduction: the warps' sums through shared
# memory, across and above the range (T = 5), staged on sm_80 too
for t in 1 3 5; do
    for mk in 'rchunk 1024 unroll 1 vec 4 along reduction rthreads 256' \
              'rchunk 64 unroll 1 vec 1 staged pipelined rthreads 64'; do
        expect 0 "" -- "$dcc" run gemv.tex --target=emu --set T=$t --check \
            --mk "Y=threads [1, 2] tile [1, 3] $mk"
        grep -q "matches the reference" out.txt || bad "emu, $mk, T=$t: $(cat out.txt)"
    done
done
sed 's/,"atomic_split":true//' atomic.jsonl >plain.jsonl
expect 0 '"atomic_split" is not true' -- "$dcc" gemv.tex --target=nvptx --records plain.jsonl --emit=plan --set T=1
# nor does a tree fitted to the bare measurements pick an atomic kernel,
# however fast its records say it is
sed '/ atomic/s/"times_ms":\[[^]]*\],"median_ms":[0-9.e-]*/"times_ms":[1e-06],"median_ms":1e-06/' \
    plain.jsonl >fast.jsonl
for t in 1 2 3 4; do
    expect 0 "" -- "$dcc" gemv.tex --target=nvptx --records fast.jsonl --emit=plan --set T=$t
    grep -q "atomically" out.txt && bad "records without the opt-in gave an atomic kernel: $(cat out.txt)"
done
expect 2 "object and a header" -- "$dcc" prog.tex -o x --stop-after=tile
expect 2 "unknown option" -- "$dcc" prog.tex --bogus
expect 2 "is for dcc run" -- "$dcc" prog.tex --check
expect 2 "takes no value" -- "$dcc" run prog.tex --set T=3 --check=yes
expect 2 "needs a value" -- "$dcc" run prog.tex --set
expect 2 "micro-kernel" -- "$dcc" prog.tex --emit=loops --mk Y=nonsense
expect 2 "micro-kernel" -- "$dcc" prog.tex --emit=loops \
    --mk 'Y=threads [1, 8] tile [1, 1] rchunk 8 unroll 1 vec 1 split 0' # prints as no split
expect 2 "more than one input" -- "$dcc" prog.tex prog.tex
expect 2 "no input file" -- "$dcc" run --set T=3
expect 1 "no dim named" -- "$dcc" run prog.tex --set T=3 --set Q=1
expect 1 "below the declared range" -- "$dcc" run prog.tex --set T=0
expect 1 "missing --set" -- "$dcc" run prog.tex
expect 1 "" -- "$dcc" missing.tex --emit=te
expect 1 "no tensor named" -- "$dcc" prog.tex --emit=loops --mk Q='threads [1, 8] tile [1, 1] rchunk 8 unroll 1 vec 1'

# ---- 8. messages that point the right way ----
expect 2 "--output NAME=PATH.npy" -- "$dcc" run prog.tex --set T=1 -o x
grep -q "needs a value" err.txt && bad "run -o x still says '-o needs a value'"
expect 2 "not a dcc command" -- "$dcc" reprot --records=x
expect 1 "x: cannot open: No such file" -- "$dcc" report --records=x
expect 0 "" -- "$dcc" run nan.tex --set T=5
grep -q "every element is NaN" out.txt || bad "all-NaN summary: $(cat out.txt)"
grep -q "inf" out.txt && bad "all-NaN summary mentions inf: $(cat out.txt)"
printf '{"v": 2, "broken\nnot json at all\n' >corrupt.jsonl
expect 1 "corrupt.jsonl:1" -- "$dcc" run prog.tex --set T=3 --records=corrupt.jsonl
grep -q "corrupt.jsonl:2" err.txt || bad "run --records does not warn about each damaged line"

# ---- integer and boolean inputs from .npy: the declared type or an error ----
cat >typed.tex <<'EOF'
dim T in 1..8
input ids[T] i32
input m[T] bool
input E[6, 4] f32
output Y[t: T, d: 4] = select(m[t], E?[ids[t], d], 0.5)
EOF
for target in cpu loops emu; do
    expect 0 "" -- "$dcc" run typed.tex --set T=6 --input ids="$src/tests/data/npy/i32_6.npy" \
        --target $target --check
    grep -q "Y matches" out.txt || bad "typed inputs, target $target: $(cat out.txt err.txt)"
done
expect 1 "i64_2x2.npy: the file holds int64, but input ids is i32" -- \
    "$dcc" run typed.tex --set T=4 --input ids="$src/tests/data/npy/i64_2x2.npy"
expect 1 "the file holds int32, but input m is bool" -- \
    "$dcc" run typed.tex --set T=6 --input m="$src/tests/data/npy/i32_6.npy"

# ---- a gather's index out of range: exit 1, the message, no output written ----
cat >gather.tex <<'EOF'
dim T in 1..8
input ids[T] i32
input E[3, 3] f32
output Y[t: T, d: 3] = E[ids[t], d]
EOF
echo keep >ykeep.npy
for target in cpu loops emu; do
    expect 1 "index 3 of E on axis 0 is out of range -3..2 (computing Y\[5, 0\])" -- \
        "$dcc" run gather.tex --set T=6 --input ids="$src/tests/data/npy/i32_6.npy" \
        --target $target --output Y=ykeep.npy
    [ "$(cat ykeep.npy)" = keep ] || bad "a failed gather replaced its output ($target)"
done
# generated integer inputs index every table in range: a model runs
# without --input (before, ids of -2..13 failed the gather of 3 rows)
for target in cpu loops emu; do
    expect 0 "" -- "$dcc" run gather.tex --set T=8 --seed 5 --check --target $target
    grep -q "Y matches the reference" out.txt || bad "generated ids on $target: $(cat out.txt err.txt)"
done
# a gather fused into its reader's reduction names the reader's element
cat >gather_fused.tex <<'EOF'
dim T in 1..8
input ids[T] i32
input E[3, 3] f32
G[t: T, d: 3] = E[ids[t], d] * 2.0
output Y[t: T] = sum[d: 3](G[t, d])
EOF
for target in cpu loops emu; do
    expect 1 "index 3 of E on axis 0 is out of range -3..2 (computing Y\[5\])" -- \
        "$dcc" run gather_fused.tex --set T=6 --input ids="$src/tests/data/npy/i32_6.npy" \
        --target $target
done

# ---- constants: not an input the command line may replace ----
expect 1 "is a constant (its values come from constants_E.npy)" -- \
    "$dcc" run "$src/tests/golden/accept/constants.tex" --set B=1 --set S=2 \
    --input E="$src/tests/data/npy/f32_3d.npy"

# ---- NaN in min/max reductions: every target as the reference ----
cat >mixnan.tex <<'EOF'
dim T in 1..64
input X[T, 37] f32
output Y[i: T, j: 37] = sqrt(X[i, j] + f32(i % 2) * 2.0)
EOF
cat >maxnan.tex <<'EOF'
dim T in 1..64
input X[T, 37] f32
output M[i: T] = max[j: 37](X[i, j])
output N[i: T] = min[j: 37](relu(X[i, j]) - 1.0)
EOF
for T in 13 70; do
    expect 0 "" -- "$dcc" run mixnan.tex --set T=$T --output Y=mix$T.npy # NaN in even rows
    for target in cpu loops emu; do
        expect 0 "" -- "$dcc" run maxnan.tex --set T=$T --input X=mix$T.npy --target $target --check
        grep -q "M matches" out.txt && grep -q "N matches" out.txt ||
            bad "NaN in max/min reductions, T=$T, target $target: $(cat out.txt err.txt)"
    done
done

# ---- 9 and 12. AOT headers; -o without --emit ----
expect 0 "" -- "$dcc" prog.tex -o cpu_prog
[ -f cpu_prog.o ] && [ -f cpu_prog.h ] || bad "-o without --emit did not write cpu_prog.o and .h"
expect 0 "" -- "$dcc" prog.tex --target=nvptx -o gpu_prog
[ -f gpu_prog.o ] && [ -f gpu_prog.h ] || bad "--target=nvptx -o did not write gpu_prog.o and .h"
expect 0 "" -- "$dcc" prog.tex --emit=header -o other_stem.h
grep -q "^#ifndef DCC_CPU_PROG_H" cpu_prog.h || bad "cpu_prog.h: include guard not from the -o stem"
grep -q "^#ifndef DCC_OTHER_STEM_H" other_stem.h || bad "other_stem.h: include guard not from the -o stem"
grep -q "const float \*X" cpu_prog.h || bad "inputs are not declared const float *"
cat >both.c <<'EOF'
#include "cpu_prog.h"
#include "gpu_prog.h"
#include "other_stem.h"
int main(void) { return 0; }
EOF
"$cc" -std=c11 -Wall -Werror -c both.c -o both.o 2>err.txt ||
    bad "the CPU and GPU headers of one program do not compile together: $(cat err.txt)"
cat >client.c <<'EOF'
#include "cpu_prog.h"
#include <stdio.h>
int main(void)
{
    const float x[3 * 8] = {1, 2, 3};
    float y[3 * 8], z[3];
    int rc = prog_run(3, x, y, z, NULL);
    printf("%d %g %g\n", rc, y[1], z[0]);
    return rc != 0 || y[1] != 4.0f || z[0] != 6.0f;
}
EOF
"$cc" -std=c11 -Wall -Werror ${DC_CLIENT_FLAGS:-} client.c cpu_prog.o "$dcrt" -lpthread -lm -ldl -o client 2>err.txt &&
    ./client >/dev/null || bad "a client passing const inputs does not build or run: $(cat err.txt)"

# ---- 13. files read: only regular files, and a FIFO never hangs ----
mkfifo rfifo
for cmd in "rfifo --emit=te" "run rfifo --set T=2" "run prog.tex --set T=2 --input X=rfifo" \
    "run prog.tex --set T=2 --records rfifo" "tune prog.tex --shapes-file rfifo --records r13.jsonl" \
    "tune prog.tex --warm-start rfifo --records r13.jsonl" "report --records rfifo -o r13.svg"; do
    # shellcheck disable=SC2086 # the words of cmd are its arguments
    expect 1 "rfifo: not a regular file (it is a FIFO)" -- timeout 10 "$dcc" $cmd
done
expect 1 "adir: not a regular file (it is a directory)" -- "$dcc" adir --emit=te
expect 1 "nosuch.jsonl: cannot open: No such file" -- "$dcc" run prog.tex --set T=2 --records nosuch.jsonl

# ---- 14. an output that is also an input, in every command ----
cp prog.tex tuneme.tex
expect 1 "is also an input" -- "$dcc" tune tuneme.tex --trials 1 --records tuneme.tex
cmp -s tuneme.tex prog.tex || bad "tune --records naming the program changed it"
echo '[{"T": 3}]' >pts.json
cp pts.json pts.orig
expect 1 "is also an input" -- "$dcc" tune prog.tex --trials 1 --shapes-file pts.json --records ./pts.json
cmp -s pts.json pts.orig || bad "tune --records naming the shapes file changed it"

# ---- 15. -o naming a stream: written there, no name derived from it ----
if [ -n "$null" ]; then
    expect 0 "" -- "$dcc" prog.tex -o "$null"
    [ -e "$null.o" ] || [ -e "$null.h" ] && bad "-o $null derived $null.o or $null.h"
    [ -c "$null" ] || bad "$null is no longer a character device"
fi
"$dcc" prog.tex -o - >stdout.bin 2>err.txt || bad "-o - failed: $(cat err.txt)"
[ "$(head -c 4 stdout.bin | od -An -c | tr -d ' ')" = "177ELF" ] || bad "-o - did not write the object to stdout"
grep -q "prog_run(" stdout.bin || bad "-o - did not write the header after the object"
"$dcc" prog.tex --emit=header -o - >stdout.h 2>err.txt && grep -q "^int prog_run(" stdout.h ||
    bad "--emit=header -o - did not print the header: $(cat err.txt)"
"$dcc" run prog.tex --set T=3 --output Y=- --output Z=z15.npy >stdout.npy 2>err.txt &&
    [ "$(head -c 6 stdout.npy | tail -c 5)" = NUMPY ] || bad "--output Y=- did not write .npy to stdout"
"$dcc" report --records corrupt.jsonl -o - >stdout.svg 2>err.txt
[ -e ./- ] || [ -e prog.o ] || [ -e prog.h ] && bad "a file named -, prog.o or prog.h was created"

# ---- 16. a file-size limit: status 1, "File too large", no temporary ----
printf 'dim T in 1..100000\ninput X[T] f32\noutput Y[i: T] = X[i]\n' >big.tex
(ulimit -f 8 && "$dcc" run big.tex --set T=20000 --output Y=big.npy) >out.txt 2>err.txt
[ $? -eq 1 ] && grep -q "File too large" err.txt || bad "ulimit -f: $(cat err.txt)"
ls big.npy* >/dev/null 2>&1 && bad "ulimit -f left $(ls big.npy*)"

# ---- 17. names: the runtime's, and C and C++ keywords in a header ----
cp prog.tex dcrt.tex
cp prog.tex rt_pool.tex
expect 1 "program name 'dcrt' is reserved" -- "$dcc" dcrt.tex -o dcrt_obj
expect 1 "program name 'dcrt' is reserved" -- timeout 20 "$dcc" run dcrt.tex --set T=2
expect 1 "program name 'rt_pool' is reserved" -- "$dcc" rt_pool.tex -o rt_pool_obj
{
    echo 'dim int in 1..8'
    for t in workspace float return_ return NULL stream class INT64_MAX __x; do
        echo "input $t[int] f32"
    done
    echo 'output this[i: int] = workspace[i] + float[i] + return_[i] + return[i] + NULL[i] + stream[i] + class[i] + INT64_MAX[i] + __x[i]'
} >kw.tex
expect 0 "" -- "$dcc" kw.tex -o kw_cpu
expect 0 "" -- "$dcc" kw.tex --target=nvptx -o kw_gpu
printf '#include "kw_cpu.h"\n#include "kw_gpu.h"\nint main(void) { return 0; }\n' >kw.c
"$cc" -std=c11 -Wall -Werror -c kw.c -o kw.o 2>err.txt || bad "a header with keyword names: $(cat err.txt)"
if command -v c++ >/dev/null 2>&1; then
    c++ -x c++ -Wall -Werror -c kw.c -o kw.o 2>err.txt || bad "the header in C++: $(cat err.txt)"
fi

# ---- 18. messages ----
expect 2 "stops before there is loop IR" -- "$dcc" prog.tex --stop-after=inline --emit=loops
"$dcc" tune prog.tex --trials 1 --records cpu18.jsonl >/dev/null 2>&1
expect 1 "the file has records of target cpu" -- "$dcc" run prog.tex --target=emu --set T=2 --records cpu18.jsonl
printf 'dim T in 1..64\ninput X[T, 8] f32\noutput Y[i: T, j: 8] = X[i, j] * 2.0\n' >p2.tex
"$dcc" tune p2.tex --trials 2 --records p2.jsonl >/dev/null 2>&1
sed -E '/"tree"/ s/threads \[([0-9]+), [0-9]+\] tile \[([0-9]+), [0-9]+\]/threads [\1] tile [\2]/g' p2.jsonl >p2bad.jsonl
expect 0 "stored tree of Y is not used: its kernels are of rank 1" -- "$dcc" run p2.tex --records p2bad.jsonl --set T=3 --check
awk 'BEGIN { for (i = 0; i < 40; i++) print "dim D" i " in 1..4"; print "input X[D0] f32";
             print "output Y[i: D0] = X[i]" }' >dims40.tex
expect 1 "the default grid of the program's dims" -- "$dcc" tune dims40.tex --trials 1 --records d40.jsonl
awk 'BEGIN { printf "dim T in 1..8\ninput X[T] f32\noutput Y[i: T] = X[i]";
             for (i = 0; i < 20000; i++) printf " + X[i]"; print " + Q[i]" }' >longline.tex
"$dcc" longline.tex --emit=te >out.txt 2>err.txt
[ "$(wc -c <err.txt)" -lt 1000 ] && grep -q '^ \.\.\..*\.\.\.$' err.txt || bad "a long line's diagnostic is not cut: $(head -c 300 err.txt)"
# threads the system cannot give (their stacks over an address-space
# limit): the message says how many were asked for and by whom (not
# under a sanitizer, whose shadow memory the limit refuses first)
(ulimit -v 3000000 && DCRT_NUM_THREADS=4096 exec "$dcc" run prog.tex --set T=4) >out.txt 2>err.txt
st=$?
if ! grep -q Sanitizer err.txt; then
    [ $st -eq 1 ] && grep -q "cannot start a thread pool of 4096 threads (DCRT_NUM_THREADS=4096)" err.txt ||
        bad "DCRT_NUM_THREADS=4096 refused: status $st, $(cat err.txt)"
fi

# ---- 14. micro-kernel budgets: a kernel accepted runs (issue 31 items 3, 4) ----
cat >dense.tex <<'EOF'
dim T in 1..64
input X[T, 64] f32
input W[64, 64] f32
output Y[i: T, j: 64] = sum[k: 64](X[i, k] * W[j, k])
EOF
big='Y=threads [16, 32] tile [64, 64] rchunk 64 unroll 1 vec 16 staged'
expect 1 "dcc: error: --mk Y: micro-kernel needs 8 MiB of accumulators on a CPU block's stack (512 threads x tile 64 x 64 x 4 bytes); the limit is 3 MiB" \
    -- "$dcc" run dense.tex --set T=64 --mk "$big"
expect 1 "needs 8 MiB of accumulators" -- "$dcc" dense.tex --emit=obj,header -o dense.o --mk "$big"
[ -e dense.o ] || [ -e dense.h ] && bad "a refused --mk left an output file"
expect 1 "Y: micro-kernel needs 256 registers of accumulators a thread (tile 16 x 16); the limit is 255" \
    -- "$dcc" dense.tex --target=nvptx --emit=ptx --mk 'Y=threads [16, 16] tile [16, 16] rchunk 16 unroll 1 vec 4 staged'
expect 0 "" -- "$dcc" run dense.tex --set T=64 --check --mk 'Y=threads [16, 2] tile [4, 32] rchunk 64 unroll 1 vec 16 staged'
for t in '16, 16, 16, 16' '8, 8, 8, 8'; do
    expect 1 "O: micro-kernel unrolls its update into 4096 statements (tile ${t%%,*} x" -- timeout 20 "$dcc" run \
        "$src/examples/conv3x3.tex" --set N=1 --mk "O=threads [1, 1, 1, 1] tile [$t] rchunk 64 unroll 1 vec 16"
done

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "cli: all cases pass"
