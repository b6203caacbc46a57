#!/bin/sh
# ptx-loop-stats.sh FILE.ptx: per kernel, the instructions of its hottest
# loop (the innermost loop body with the most FMAs: the instructions from a
# label to the branch back to it), as counts per FMA. Evidence of what a
# kernel form costs where no GPU is at hand: the issue slots a chunk step
# takes beside its FMAs, shared and global loads, barriers, and 64-bit
# integer arithmetic.
#
#   bench/gpu/ptx-loop-stats.sh qkv.ptx
set -eu
[ $# -eq 1 ] || { echo "usage: ptx-loop-stats.sh FILE.ptx" >&2; exit 2; }
awk '
function flush_kernel() {
    if (kernel != "" && best_fma > 0)
        printf "%-28s loop %-10s %5d instr %5d fma  %5.2f instr/fma  %4d ld.shared %4d ld.global %3d bar %4d 64-bit int\n",
            kernel, best_label, best_n, best_fma, best_n / best_fma, best_lds, best_ldg, best_bar, best_i64
    best_fma = 0
}
/^\.visible \.entry|^\.entry/ { flush_kernel(); kernel = $NF; sub(/\(.*/, "", kernel); nl = 0; next }
/^\$L__/ { lab = $1; sub(/:$/, "", lab); nl++; label[nl] = lab; start[lab] = NR; n[lab] = 0; next }
/;/ && $1 !~ /^\/\// && $1 !~ /^\./ {
    line[NR] = $0
    # a branch back to an earlier label closes a loop: count its body
    if ($0 ~ /bra(\.uni)?[ \t]/) {
        tgt = $NF; sub(/;$/, "", tgt)
        if (tgt in start && start[tgt] < NR) {
            c = 0; f = 0; lds = 0; ldg = 0; bar = 0; i64 = 0
            for (i = start[tgt] + 1; i <= NR; i++) {
                if (!(i in line)) continue
                c++
                if (line[i] ~ /fma\.rn\.f32|fma\.rn\.ftz\.f32/) f++
                if (line[i] ~ /ld\.shared/) lds++
                if (line[i] ~ /ld\.global/) ldg++
                if (line[i] ~ /bar\.sync|barrier/) bar++
                if (line[i] ~ /\.(s|u|b)64[ \t]/ && line[i] !~ /ld\.|st\.|cvta|mov\.u64/) i64++
            }
            if (f > best_fma) { best_fma = f; best_n = c; best_label = tgt; best_lds = lds; best_ldg = ldg; best_bar = bar; best_i64 = i64 }
        }
    }
}
END { flush_kernel() }
' "$1"
