#!/bin/sh
# Tuning end to end (ctest: tune.*), through dcc:
#
#   run.sh DCC SRCDIR determinism   same --seed, same records and tree (model backend)
#   run.sh DCC SRCDIR cpu           a small CPU tuning run, then T across the range
#                                   (and above it) run with the tuned dispatch, checked
#   run.sh DCC SRCDIR resume        a run killed in the middle and resumed measures
#                                   nothing twice and loses no record
#   run.sh DCC SRCDIR records       damaged, foreign and old records (version 1,
#                                   another lowering), bad options
#   run.sh DCC SRCDIR points        --shapes-file: the listed points, joint and
#                                   per-shape; bad entries named
#   run.sh DCC SRCDIR report        dcc report's SVG read as XML: panels, series,
#                                   axes, one band per tree leaf
#   run.sh DCC SRCDIR spill         GPU kernels that spill are named in the summary (ptxas)
#   run.sh DCC SRCDIR fuse          the search overrules the cost model's fusion; the
#                                   records carry the choice to compiles and runs;
#                                   --fuse fixes it
#   run.sh DCC SRCDIR consts        records tuned with constant weights serve the same
#                                   program with other weights, not with them as inputs
#   run.sh DCC SRCDIR mpi-model     mpirun -n 3 (DC_MPIEXEC) on the model target: the
#                                   records and dispatch of a 1-rank run, byte for byte
#   run.sh DCC SRCDIR mpi-side      mpirun -n 3 on a BERT layer (model target): its
#                                   workloads searched side by side, the records
#                                   (in another order), trees and summary of a 1-rank run
#   run.sh DCC SRCDIR mpi-cpu       mpirun -n 3 on the CPU: valid records of this CPU's
#                                   arch, a dispatch that runs correctly
#   run.sh DCC SRCDIR mpi-kill      a measuring rank killed mid-run: the job ends, the
#                                   records are whole, the same command completes them
#                                   (as a 1-rank run would have)
#   run.sh DCC SRCDIR mpi-recover   the same under mpirun --enable-recovery: the run
#                                   finishes without the lost rank
set -u
dcc=$1
src=$2
what=$3
ex=$src/examples
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Prints "stage|mk|shape|class" for every record, class being baseline or
# joint: a key that appears twice was measured twice (a "turns" or "check"
# record is the selection's or the final check's deliberate second
# measurement of a close contender).
keys() {
    python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    again = ("turns", "check", "baseline-check")
    if not isinstance(r, dict) or "shape" not in r or r["kind"] in again:
        continue  # a dispatch tree, or measured again on purpose
    shape = ",".join("%s=%d" % kv for kv in sorted(r["shape"].items()))
    cls = "baseline" if r["kind"] == "baseline" else "joint"
    print("%s|%s|%s|%s" % (r["stage"], r["mk"], shape, cls))
PY
}

# Waits (at most 60 s) until FILE has at least N lines.
wait_lines() { # FILE N: until FILE has N lines, at most 300 s (a loaded machine tunes slowly)
    i=0
    while [ "$( { wc -l <"$1"; } 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 3000 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

# The records without their time stamps.
strip_ts() { sed 's/"ts":[0-9]*//' "$1"; }

# dcc under mpirun with N ranks: mpi N ARGS... (DC_MPIEXEC: CMake's
# MPIEXEC_EXECUTABLE; $mpiflags: more of mpirun's options)
mpiflags=
mpi() {
    n=$1
    shift
    # shellcheck disable=SC2086
    "${DC_MPIEXEC:-mpirun}" --allow-run-as-root --oversubscribe $mpiflags -n "$n" "$dcc" "$@"
}

# dcc ARGS... on 1 rank into $tmp/one.{jsonl,out,err} and on 3 into
# $tmp/three.{...}: both must finish, and rank 0 say the 2 others measured.
one_and_three() {
    "$dcc" "$@" --records "$tmp/one.jsonl" >"$tmp/one.out" 2>"$tmp/one.err" ||
        bad "1-rank tune failed: $(tail -1 "$tmp/one.err")"
    mpi 3 "$@" --records "$tmp/three.jsonl" >"$tmp/three.out" 2>"$tmp/three.err" ||
        bad "3-rank tune failed: $(grep -v '^tune: ' "$tmp/three.err" | head -5)"
    grep -q "^mpi: 3 ranks, measured on sm_80 by the 2 others" "$tmp/three.out" &&
        ok "rank 0 says the 2 others measured" || bad "no mpi line: $(head -3 "$tmp/three.out")"
}

# Kills rank 1 of the dcc writing records REC (SIGKILL) once REC has N lines.
kill_rank1() {
    wait_lines "$1" "$2"
    victim=
    for p in $(pgrep -f -- "--records $1"); do # the ranks (and mpirun)
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' &&
            victim=$p
    done
    [ -n "$victim" ] && kill -9 "$victim" && ok "rank 1 (pid $victim) killed after $(wc -l <"$1") records" ||
        bad "rank 1 not found among the ranks"
}

# Whether every line of FILE is a JSON object (records are whole lines).
whole_lines() {
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$1" 2>/dev/null
}

case $what in
determinism)
    for f in a b; do
        "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 24 --seed 7 \
            --records "$tmp/$f.jsonl" >"$tmp/$f.out" 2>"$tmp/$f.err" || bad "tune $f failed"
        "$dcc" "$ex/bert_qkv.tex" --target=nvptx --records "$tmp/$f.jsonl" --emit=dispatch \
            >"$tmp/$f.json" || bad "--emit=dispatch $f failed"
    done
    strip_ts "$tmp/a.jsonl" >"$tmp/a.s"
    strip_ts "$tmp/b.jsonl" >"$tmp/b.s"
    if cmp -s "$tmp/a.s" "$tmp/b.s" && cmp -s "$tmp/a.json" "$tmp/b.json" &&
        [ -s "$tmp/a.s" ]; then
        ok "the same seed gives the same records and dispatch"
    else
        bad "the same seed gave different records or dispatch"
    fi
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 24 --seed 8 \
        --records "$tmp/c.jsonl" >/dev/null 2>&1 || bad "tune seed 8 failed"
    strip_ts "$tmp/c.jsonl" >"$tmp/c.s"
    if cmp -s "$tmp/a.s" "$tmp/c.s"; then
        bad "another seed gave the same search"
    else
        ok "another seed searches differently"
    fi
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["v"]==2 and d["target"]=="model" and d["arch"]=="sm_80" and "Y" in d["stages"] and d["stages"]["Y"]["tree"] and len(d["stages"]["Y"]["workload"])==16' \
        "$tmp/a.json" && ok "--emit=dispatch is the JSON tree" || bad "--emit=dispatch JSON"
    # the tree is stored with the records, one line per tuned stage, and a
    # compile reads it back instead of fitting again
    python3 - "$tmp/a.jsonl" "$tmp/a.json" <<'PY' && ok "the stored tree is what --emit=dispatch prints" || bad "stored tree"
import json, sys
trees = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"tree"' in l]
d = json.load(open(sys.argv[2]))
assert len(trees) == 1 and trees[0]["stage"] == "Y" and trees[0]["arch"] == "sm_80"
assert trees[0]["workload"] == d["stages"]["Y"]["workload"]
kern = trees[0]["tree"]["kernels"]
leaves = []
def walk(n):
    if "kernel" in n: leaves.append(kern[n["kernel"]])
    else: walk(n["then"]); walk(n["else"])
walk(trees[0]["tree"]["tree"])
assert sorted(set(leaves)) == sorted(d["stages"]["Y"]["tree"]["kernels"])
PY
    # the GPU form of the tuned kernels, on the emulator, ragged and above range
    for T in 1 7 33 130; do
        "$dcc" run "$ex/bert_qkv.tex" --target=emu --records "$tmp/a.jsonl" --set T=$T --check \
            >/dev/null 2>"$tmp/emu.err" || { bad "emu T=$T: $(cat "$tmp/emu.err")"; }
    done
    ;;
cpu)
    rec=$tmp/r.jsonl
    "$dcc" tune "$ex/bert_qkv.tex" --trials 8 --shapes T=1..128:6 --records "$rec" \
        >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; bad "cpu tune failed"; }
    cat "$tmp/out"
    [ "$(grep -c '^tune: Y search round' "$tmp/err")" -ge 1 ] && ok "progress lines on stderr" ||
        bad "no progress lines"
    grep -q "^  dispatch: " "$tmp/out" && ok "dispatch report" || bad "no dispatch report"
    # one stage: the program's estimate is the stage's dispatched geomean, at
    # 6 points from T = 1 to 128
    stage=$(sed -n 's/^  latency geomean over the shapes: \([0-9.]*\) ms dispatched.*/\1/p' "$tmp/out")
    prog=$(sed -n 's/^program: estimated latency .*geomean \([0-9.]*\) ms over 6 shape points$/\1/p' "$tmp/out")
    [ -n "$stage" ] && [ "$stage" = "$prog" ] && grep -q "^  T=1: " "$tmp/out" &&
        grep -q "^  T=128: " "$tmp/out" && ok "program estimate" ||
        bad "program estimate '$prog' against the stage's '$stage'"
    # T across the range (ragged, tile multiples and not) and above it
    # dispatch to kernels that match the reference; tests/unit/test_tune.c
    # checks every T of a smaller program's range in-process
    n=0
    for T in 1 2 3 4 5 7 11 16 17 31 32 33 47 63 64 65 77 96 100 127 128 129 200 333; do
        if ! "$dcc" run "$ex/bert_qkv.tex" --records "$rec" --set T=$T --check \
            >/dev/null 2>"$tmp/run.err"; then
            bad "T=$T: $(cat "$tmp/run.err")"
        fi
        n=$((n + 1))
    done
    ok "$n shapes run with the tuned dispatch"
    # a compile with the records: the object dispatches too
    "$dcc" "$ex/bert_qkv.tex" --records "$rec" --emit=loops >"$tmp/loops" ||
        bad "--emit=loops with records"
    [ "$(grep -c '^kernel ' "$tmp/loops")" -ge 1 ] && ok "kernels with records" || bad "no kernels"
    # --probe-ms: QKV at T = 128 is about 0.45 GFLOP, over 0.01 ms at any
    # CPU's peak (10 TFLOP/s: 64 AVX-512 cores), so the first batch is run
    # at smaller shapes first (the summary counts them); 0: never
    for ms in 0.01 0; do
        "$dcc" tune "$ex/bert_qkv.tex" --trials 8 --shapes T=1..128:16 --probe-ms $ms \
            --records "$tmp/p$ms.jsonl" >"$tmp/p$ms.out" 2>"$tmp/p$ms.err" ||
            bad "--probe-ms $ms: $(tail -1 "$tmp/p$ms.err")"
    done
    grep -q '^  probes: [1-9][0-9]* candidates\{0,1\} run first at a smaller shape' "$tmp/p0.01.out" &&
        ! grep -q '^  probes:' "$tmp/p0.out" && ok "--probe-ms 0.01 probes, 0 does not" ||
        { cat "$tmp/p0.01.out" "$tmp/p0.out"; bad "--probe-ms"; }
    ;;
resume)
    rec=$tmp/r.jsonl
    args="tune $ex/bert_qkv.tex --trials 24 --shapes T=1..128:8 --records $rec --seed 3"
    # shellcheck disable=SC2086
    "$dcc" $args >"$tmp/out1" 2>&1 &
    pid=$!
    wait_lines "$rec" 12
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    cp "$rec" "$tmp/before"
    before=$(wc -l <"$tmp/before")
    [ "$before" -ge 12 ] && ok "killed after $before records" || bad "only $before records"
    # shellcheck disable=SC2086
    "$dcc" $args >"$tmp/out2" 2>"$tmp/err2" || { cat "$tmp/err2"; bad "resumed run failed"; }
    cat "$tmp/out2"
    head -n "$before" "$rec" | cmp -s - "$tmp/before" && ok "no record lost or changed" ||
        bad "records before the kill changed"
    dup=$(keys "$rec" | sort | uniq -d | wc -l)
    [ "$dup" -eq 0 ] && ok "nothing measured twice" || bad "$dup measurements taken twice"
    grep -q "from records" "$tmp/out2" &&
        [ "$(sed -n 's/.*search [0-9]* measured + \([0-9]*\) from records.*/\1/p' "$tmp/out2")" -ge 1 ] &&
        ok "the resumed run reused the search's records" || bad "nothing reused"
    # the noise the summary reports is what the new records hold: runs
    # kept (times_ms) and dropped ("dropped"), counted over them
    noise=$(sed -n 's/.*noise: \([0-9]*\) of \([0-9]*\) timed runs.*/\1 \2/p' "$tmp/out2")
    held=$(tail -n +"$((before + 1))" "$rec" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin]
recs = [r for r in recs if "times_ms" in r]
d = sum(r.get("dropped", 0) for r in recs)
print(d, d + sum(len(r["times_ms"]) for r in recs))')
    [ -n "$noise" ] && [ "$noise" = "$held" ] && ok "noise: $noise dropped of timed, as the records hold" ||
        bad "the summary's noise '$noise' is not the records' '$held'"
    # Ctrl-C: the run stops before its next measurement, says so in one
    # line, exits 1, and every line written is whole
    rec2=$tmp/int.jsonl
    "$dcc" tune "$ex/bert_qkv.tex" --trials 40 --shapes T=1..128:8 --records "$rec2" \
        >"$tmp/int.out" 2>"$tmp/int.err" &
    pid=$!
    wait_lines "$rec2" 6
    kill -INT $pid
    wait $pid
    st=$?
    if [ $st -eq 1 ] && grep -q "interrupted" "$tmp/int.err" && [ ! -s "$tmp/int.out" ] &&
        python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$rec2"; then
        ok "SIGINT: $(grep interrupted "$tmp/int.err")"
    else
        bad "SIGINT: status $st, $(cat "$tmp/int.err")"
    fi
    # a third run measures nothing at all
    # shellcheck disable=SC2086
    "$dcc" $args >"$tmp/out3" 2>/dev/null || bad "third run failed"
    grep -q "search 0 measured" "$tmp/out3" && grep -q "selection 0 measured" "$tmp/out3" &&
        ok "a complete records file is all reused" || { cat "$tmp/out3"; bad "third run measured"; }
    ;;
records)
    rec=$tmp/r.jsonl
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$rec" >/dev/null 2>&1 ||
        bad "model tune failed"
    n=$(wc -l <"$rec")
    printf '{"v": 1, "workload": "x", trunc\nnot json at all\n' >>"$rec"
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$rec" >"$tmp/out" \
        2>"$tmp/err" || bad "a damaged line was fatal"
    grep -q "r.jsonl:$((n + 1)):" "$tmp/err" && ok "a damaged line is reported with its line" ||
        { cat "$tmp/err"; bad "no warning for the damaged line"; }
    grep -q "search 0 measured" "$tmp/out" && ok "nothing lost to the damaged lines" ||
        bad "measured again after a damaged line"
    grep -q "noise:" "$tmp/out" && bad "the model's exact times reported as noise"
    # a longer search (many candidate reallocations: under ASan, the
    # population's pointers must stay valid)
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 96 --shapes T=1..128:8 \
        --records "$tmp/long.jsonl" >/dev/null 2>"$tmp/long.err" && ok "a 96-trial search" ||
        bad "96-trial search: $(head -3 "$tmp/long.err")"
    # a warm start from another workload's records: its search samples
    # (features and label, on this target and arch) train the model first;
    # they are not this workload's measurements, so nothing is reused
    "$dcc" tune "$ex/gelu_mlp.tex" --target=model --trials 6 --records "$tmp/w.jsonl" \
        --warm-start "$tmp/long.jsonl" >"$tmp/w.out" 2>"$tmp/w.err" &&
        nw=$(sed -n 's/^warm start: \([0-9]*\) search samples.*/\1/p' "$tmp/w.out") &&
        [ "${nw:-0}" -ge 96 ] && grep -q "search [1-9][0-9]* measured + 0 from records" "$tmp/w.out" &&
        ok "a warm start: $nw samples" || { cat "$tmp/w.out" "$tmp/w.err"; bad "warm start"; }
    # a layer of the same form (another width) warm-started from QKV's
    # records: kernels QKV's tree dispatches to that a cold search of it
    # never measures are among its first 8 trials (the default, 3
    # templates, then up to 4 of those)
    sed 's/2304/1024/g' "$ex/bert_qkv.tex" >"$tmp/narrow.tex"
    "$dcc" tune "$tmp/narrow.tex" --target=model --trials 12 --shapes T=1..128:8 \
        --records "$tmp/c.jsonl" >/dev/null 2>&1 &&
    "$dcc" tune "$tmp/narrow.tex" --target=model --trials 12 --shapes T=1..128:8 \
        --records "$tmp/n.jsonl" --warm-start "$tmp/long.jsonl" >"$tmp/n.out" 2>"$tmp/n.err" &&
        nk=$(sed -n 's/^warm start: .* and \([0-9]*\) chosen kernels\{0,1\} .*/\1/p' "$tmp/n.out") &&
        [ "${nk:-0}" -ge 1 ] && python3 - "$tmp/long.jsonl" "$tmp/c.jsonl" "$tmp/n.jsonl" <<'PY' &&
import json, sys
tree = [json.loads(l) for l in open(sys.argv[1]) if '"tree"' in l][-1]["tree"]
def leaves(n):
    return [n["kernel"]] if "kernel" in n else leaves(n["then"]) + leaves(n["else"])
chosen = {tree["kernels"][k] for k in leaves(tree["tree"])}
def trials(path, below):
    return {r["mk"] for r in map(json.loads, open(path))
            if r.get("kind") == "trial" and r["trial"] < below}
new = (chosen & trials(sys.argv[3], 8)) - trials(sys.argv[2], 12)
assert new, (chosen, trials(sys.argv[3], 8), trials(sys.argv[2], 12))
PY
        ok "a warm start measures the $nk kernels its trees chose first" ||
        { cat "$tmp/n.out" "$tmp/n.err"; bad "warm start's kernels"; }
    "$dcc" tune "$ex/gelu_mlp.tex" --target=model --trials 6 --records "$tmp/w2.jsonl" \
        --warm-start "$tmp/long.jsonl" --arch sm_90 >"$tmp/w.out" 2>&1 &&
        grep -q "^warm start: 0 search samples" "$tmp/w.out" &&
        ok "a warm start takes another arch's samples for none" || bad "warm start, another arch"
    "$dcc" tune "$ex/gelu_mlp.tex" --target=model --trials 6 --records "$tmp/w3.jsonl" \
        --warm-start "$tmp/absent.jsonl" >/dev/null 2>"$tmp/w.err"
    st=$?
    [ $st -eq 1 ] && grep -q "warm-start: .*absent.jsonl: .*No such file" "$tmp/w.err" &&
        [ ! -e "$tmp/w3.jsonl" ] && ok "a missing warm-start file: status 1, nothing written" ||
        bad "missing warm-start file: status $st, $(cat "$tmp/w.err")"
    # a renamed copy of the program keeps its records (the fingerprint is
    # the program's, not its file's)
    cp "$ex/bert_qkv.tex" "$tmp/renamed.tex"
    "$dcc" "$tmp/renamed.tex" --target=nvptx --records "$rec" --emit=dispatch >/dev/null 2>&1 &&
        ok "a renamed program finds its records" || bad "a renamed program lost its records"
    # without XGBoost the analytic model alone ranks candidates, with a warning
    DC_XGBOOST=/nonexistent/libxgboost.so "$dcc" tune "$ex/bert_qkv.tex" --target=model \
        --trials 12 --records "$tmp/noxgb.jsonl" >/dev/null 2>"$tmp/noxgb.err" &&
        [ "$(grep -c 'XGBoost is not available' "$tmp/noxgb.err")" -eq 1 ] &&
        ok "no XGBoost: one warning, tuning goes on" || bad "no XGBoost: $(cat "$tmp/noxgb.err")"
    # another workload in the same file is ignored, and leaves ours alone
    "$dcc" tune "$ex/softmax.tex" --target=model --trials 4 --records "$rec" >/dev/null 2>&1 ||
        bad "softmax tune failed"
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$rec" >"$tmp/out" 2>&1
    grep -q "search 0 measured" "$tmp/out" && ok "foreign records ignored" || bad "foreign records"
    # records of version 1 (an older dcc): one warning for all of them
    printf '{"v":1,"workload":"x","target":"model","stage":"Y"}\n{"v":1,"workload":"x"}\n' >>"$rec"
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$rec" >"$tmp/out" 2>"$tmp/err"
    [ "$(grep -c 'version 1' "$tmp/err")" -eq 1 ] && grep -q "2 records of version 1" "$tmp/err" &&
        ok "old records: $(grep 'version 1' "$tmp/err")" || bad "old records: $(cat "$tmp/err")"
    # records of another lowering (times of the kernels another dcc built
    # from the same micro-kernels; without the field, written before it was
    # versioned): one warning, measured anew, kept in the file as they were
    sed 's/"lowering":[0-9]*,//' "$rec" >"$tmp/low.jsonl"
    cp "$tmp/low.jsonl" "$tmp/low0.jsonl"
    n0=$(wc -l <"$tmp/low.jsonl")
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$tmp/low.jsonl" \
        >"$tmp/out" 2>"$tmp/err"
    [ "$(grep -c 'another lowering' "$tmp/err")" -eq 1 ] &&
        grep -q "^stage Y: search 8 measured + 0 from records" "$tmp/out" &&
        head -n "$n0" "$tmp/low.jsonl" | cmp -s - "$tmp/low0.jsonl" &&
        [ "$(wc -l <"$tmp/low.jsonl")" -gt "$n0" ] &&
        ok "another lowering's records: $(grep 'another lowering' "$tmp/err")" ||
        { cat "$tmp/out" "$tmp/err"; bad "another lowering's records were reused or lost"; }
    "$dcc" tune "$ex/bert_qkv.tex" --target=model --trials 8 --records "$tmp/low.jsonl" \
        >"$tmp/out" 2>"$tmp/err"
    grep -q "^stage Y: search 0 measured + 8 from records" "$tmp/out" &&
        grep -q 'another lowering' "$tmp/err" && ok "and this lowering's are reused" ||
        bad "this lowering's records after another's: $(cat "$tmp/out")"
    # stages that compute the same thing from different tensors are one
    # workload: the second is tuned from the first's records
    printf 'dim T in 1..64\ninput X[T, 32] f32\ninput A[16, 32] f32\ninput B[16, 32] f32\n%s\n%s\n' \
        'output Q[i: T, j: 16] = sum[k: 32](X[i, k] * A[j, k])' \
        'output K[i: T, j: 16] = sum[k: 32](X[i, k] * B[j, k])' >"$tmp/qk.tex"
    "$dcc" tune "$tmp/qk.tex" --target=model --trials 8 --records "$tmp/qk.jsonl" >"$tmp/qk.out" 2>&1
    grep -q "^stage Q: search 8 measured + 0 from records" "$tmp/qk.out" &&
        grep -q "^stage K: search 0 measured + 8 from records; selection 0 measured" "$tmp/qk.out" &&
        ok "one workload, tuned once" || bad "identical stages: $(cat "$tmp/qk.out")"
    # a record with a zero time is left out, not fatal
    sed -n '1s/"times_ms":\[[^]]*\],"median_ms":[^,]*/"times_ms":[0],"median_ms":0/p' "$rec" |
        sed 's/"kind":"trial"/"kind":"select"/' >>"$rec"
    "$dcc" "$ex/bert_qkv.tex" --target=nvptx --records "$rec" --emit=dispatch >/dev/null 2>"$tmp/z.err" &&
        ok "a zero-time record is left out" || bad "zero-time record: $(cat "$tmp/z.err")"
    # bad input: one line (usage: and a pointer to --help), exit 1 or 2, nothing written
    expect() { # STATUS DESCRIPTION CMD...
        want=$1 desc=$2
        shift 2
        "$@" >"$tmp/o" 2>"$tmp/e"
        st=$?
        # a usage error adds a second line pointing at --help
        if [ $st -eq "$want" ] && [ "$(wc -l <"$tmp/e")" -le $want ] && [ ! -s "$tmp/o" ]; then
            ok "$desc: $(head -1 "$tmp/e")"
        else
            bad "$desc: status $st, stderr: $(cat "$tmp/e")"
        fi
    }
    expect 1 "missing records" "$dcc" "$ex/bert_qkv.tex" --records "$tmp/none.jsonl" --emit=loops
    expect 1 "records of nothing usable" "$dcc" "$ex/softmax.tex" --records /dev/null --emit=loops
    expect 1 "unknown dim in --shapes" "$dcc" tune "$ex/bert_qkv.tex" --shapes X=1..4 \
        --records "$tmp/x.jsonl"
    expect 1 "--shapes below the range" "$dcc" tune "$ex/bert_qkv.tex" --shapes T=0..4 \
        --records "$tmp/x.jsonl"
    expect 2 "bad --shapes" "$dcc" tune "$ex/bert_qkv.tex" --shapes T=1-4
    expect 2 "bad --trials" "$dcc" tune "$ex/bert_qkv.tex" --trials 0
    expect 2 "bad tune target" "$dcc" tune "$ex/bert_qkv.tex" --target=gpu
    [ ! -e "$tmp/x.jsonl" ] && ok "no records file for a failed start" || bad "x.jsonl written"
    ;;
points)
    # --shapes-file: exactly the listed points (a repeated one once), joint
    # and per-shape; bad entries are named
    prog=$src/tests/aot/two_dims.tex
    printf '[{"B": 1, "T": 3}, {"T": 64, "B": 4}, {"B": 2, "T": 17}, {"B": 1, "T": 3}]\n' \
        >"$tmp/pts.json"
    for mode in joint per-shape; do
        flag=$([ $mode = per-shape ] && echo --per-shape)
        "$dcc" tune "$prog" --target=model --trials 6 --shapes-file "$tmp/pts.json" $flag \
            --records "$tmp/$mode.jsonl" >"$tmp/$mode.out" 2>"$tmp/$mode.err" ||
            bad "$mode tune with --shapes-file: $(cat "$tmp/$mode.err")"
        grep -q " 3 shape points" "$tmp/$mode.out" && ok "$mode: 3 shape points" ||
            bad "$mode: $(head -1 "$tmp/$mode.out")"
        shapes=$(keys "$tmp/$mode.jsonl" | cut -d'|' -f3 | sort -u | tr '\n' ' ')
        [ "$shapes" = "B=1,T=3 B=2,T=17 B=4,T=64 " ] && ok "$mode: measured at the listed points" ||
            bad "$mode: measured at $shapes"
    done
    expect_file() { # STATUS PATTERN JSON
        printf '%s\n' "$3" >"$tmp/bad.json"
        "$dcc" tune "$prog" --target=model --trials 4 --shapes-file "$tmp/bad.json" \
            --records "$tmp/bad.jsonl" >/dev/null 2>"$tmp/e"
        st=$?
        [ $st -eq "$1" ] && grep -q "$2" "$tmp/e" && ok "$(head -1 "$tmp/e")" ||
            bad "--shapes-file '$3': status $st: $(cat "$tmp/e")"
    }
    expect_file 1 "entry 1 names a dim the program does not have: 'Q'" '[{"B": 1, "T": 2}, {"Q": 1}]'
    expect_file 1 "entry 0 leaves out a dim: T" '[{"B": 1}]'
    expect_file 1 "entry 2 gives a dim a value below its declared range: T = 0" \
        '[{"B": 1, "T": 2}, {"B": 1, "T": 3}, {"B": 1, "T": 0}]'
    expect_file 1 "not a non-negative integer: B" '[{"B": 1.5, "T": 2}]'
    expect_file 1 "entry 0 is not an object" '[3]'
    expect_file 1 "expected a JSON array" '{"B": 1, "T": 2}'
    expect_file 1 "expected a JSON array" '[{"B": 1, "T": 2}'
    expect_file 1 "expected a JSON array" '[]'
    expect_file 1 "expected a JSON array" '[{"B": 1, "T": 2}] trailing'
    expect_file 1 "entry 0 gives a dim twice: B" '[{"B": 1, "T": 2, "B": 3}]'
    "$dcc" tune "$prog" --target=model --shapes-file "$tmp" --records "$tmp/bad.jsonl" \
        >/dev/null 2>"$tmp/e"
    [ $? -eq 1 ] && grep -q "not a regular file (it is a directory)" "$tmp/e" && ok "a directory: $(cat "$tmp/e")" ||
        bad "--shapes-file DIR: $(cat "$tmp/e")"
    [ ! -e "$tmp/bad.jsonl" ] && ok "no records file for a refused points file" || bad "bad.jsonl written"
    "$dcc" tune "$prog" --shapes-file "$tmp/pts.json" --shapes T=1..4 >/dev/null 2>"$tmp/e"
    [ $? -eq 2 ] && ok "--shapes with --shapes-file: $(head -1 "$tmp/e")" ||
        bad "--shapes with --shapes-file: $(cat "$tmp/e")"
    ;;
report)
    # dcc report: per stage a panel per dim with the three series, one band
    # per leaf of the stored tree in every panel, the history; bad input
    prog=$src/tests/aot/two_dims.tex
    "$dcc" tune "$prog" --target=model --trials 12 --records "$tmp/r.jsonl" >/dev/null 2>&1 &&
        "$dcc" tune "$prog" --target=model --trials 4 --per-shape --shapes T=1..64:5 \
            --records "$tmp/r.jsonl" >/dev/null 2>&1 || bad "tuning for the report failed"
    "$dcc" "$prog" --target=nvptx --records "$tmp/r.jsonl" --emit=dispatch >"$tmp/d.json" ||
        bad "--emit=dispatch failed"
    (cd "$tmp" && "$dcc" report --records r.jsonl >"$tmp/rep.out" 2>"$tmp/rep.err") &&
        grep -q "report: r.svg" "$tmp/rep.err" || bad "dcc report: $(cat "$tmp/rep.err")"
    python3 - "$tmp/r.svg" "$tmp/d.json" <<'PY' && ok "report: panels, series, axes, bands" || bad "report"
import json, sys
import xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
svg = ET.parse(sys.argv[1]).getroot()
stages = json.load(open(sys.argv[2]))["stages"]
def leaves(node):
    return 1 if "kernel" in node else leaves(node["then"]) + leaves(node["else"])
fails = 0
def check(cond, what):
    global fails
    if not cond:
        print("report: " + what)
        fails += 1
sections = svg.findall(".//s:g[@class='section']", ns)
check(sorted(s.get("data-stage") for s in sections) == sorted(stages), "one section per stage")
for sec in sections:
    st = stages[sec.get("data-stage")]
    want = leaves(st["tree"]["tree"])
    panels = sec.findall("s:g[@class='panel']", ns)
    check([p.get("data-dim") for p in panels] == st["tree"]["dims"], "a panel per dim")
    for p in panels:
        series = [g.get("data-series") for g in p.findall("s:g[@class='series']", ns)]
        for name in ("dispatched", "best measured", "per-shape"):
            check(name in series, "series %s in panel %s" % (name, p.get("data-dim")))
        check(p.find("s:g[@class='axis x']", ns) is not None and
              p.find("s:g[@class='axis y']", ns) is not None, "both axes")
        bands = p.findall("s:rect[@class='band']", ns)
        check(len(bands) == want, "%d bands for %d leaves" % (len(bands), want))
        pts = p.findall("s:g[@data-series='dispatched']/s:circle", ns)
        check(len(pts) > 0, "dispatched points")
    check(sec.find(".//s:g[@data-series='best so far']", ns) is not None, "the history")
sys.exit(1 if fails else 0)
PY
    # one dim (a line per series, one lane of bands), -o, to a descriptor
    "$dcc" tune "$ex/softmax.tex" --target=model --trials 6 --shapes T=1..128:6 \
        --records "$tmp/s.jsonl" >/dev/null 2>&1 || bad "softmax tune failed"
    "$dcc" report --records "$tmp/s.jsonl" -o /proc/self/fd/1 >"$tmp/s.svg" 2>"$tmp/e" &&
        python3 -c "
import sys, xml.etree.ElementTree as ET
ns = {'s': 'http://www.w3.org/2000/svg'}
svg = ET.parse(sys.argv[1]).getroot()
secs = svg.findall('.//s:g[@class=\'section\']', ns)
assert len(secs) >= 2, len(secs)
for sec in secs:
    p, = sec.findall('s:g[@class=\'panel\']', ns)
    assert p.find('s:g[@data-series=\'dispatched\']/s:polyline', ns) is not None
" "$tmp/s.svg" && ok "a one-dim report through /proc/self/fd/1" ||
        bad "one-dim report: $(cat "$tmp/e")"
    "$dcc" report --records "$tmp/s.jsonl" -o "$tmp/s.jsonl" >/dev/null 2>"$tmp/e"
    [ $? -eq 1 ] && grep -q "is also an input" "$tmp/e" && ok "report over its records: refused" ||
        bad "report over its records: $(cat "$tmp/e")"
    # strings from a records file are escaped: the SVG stays XML
    sed -n '1s/"stage":"[^"]*"/"stage":"Y\\"<\&\\u0001\\u00e9"/p' "$tmp/s.jsonl" >"$tmp/x.jsonl"
    "$dcc" report --records "$tmp/x.jsonl" -o "$tmp/x.svg" >/dev/null 2>"$tmp/e" &&
        python3 -c "import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])" "$tmp/x.svg" &&
        grep -q '&lt;&amp;' "$tmp/x.svg" && ok "crafted names escaped" ||
        bad "crafted names: $(cat "$tmp/e") $(grep -o 'stage Y[^<]*' "$tmp/x.svg")"
    "$dcc" report --records "$tmp/none.jsonl" >/dev/null 2>"$tmp/e"
    [ $? -eq 1 ] && [ ! -e "$tmp/none.jsonl" ] && ok "report of a missing file: $(cat "$tmp/e")" ||
        bad "report of a missing file: $(cat "$tmp/e")"
    : >"$tmp/empty.jsonl"
    "$dcc" report --records "$tmp/empty.jsonl" -o "$tmp/e.svg" >/dev/null 2>"$tmp/e"
    [ $? -eq 1 ] && [ ! -e "$tmp/e.svg" ] && ok "report of no measurement: $(cat "$tmp/e")" ||
        bad "report of no measurement: $(cat "$tmp/e")"
    "$dcc" report >/dev/null 2>"$tmp/e"
    [ $? -eq 2 ] && ok "report without --records: $(head -1 "$tmp/e")" || bad "report without --records"
    "$dcc" report "$prog" --records "$tmp/r.jsonl" >/dev/null 2>"$tmp/e"
    [ $? -eq 2 ] && ok "report of a program: $(head -1 "$tmp/e")" || bad "report of a program"
    ;;
fuse)
    # U is read 40 times inside Y's reduction: the cost model materialises
    # it, just (inlining costs 1.07 times as much in its units); on the
    # model target the search measures both and inlines it
    cat >"$tmp/fuse.tex" <<'EOF'
dim T in 1..64
input X[T, 256] f32
input W[40, 256] f32
U[i: T, k: 256] = X[i, k] + 1.0
output Y[i: T, n: 40] = sum[k: 256](U[i, k] * W[n, k])
EOF
    prog=$tmp/fuse.tex
    rec=$tmp/f.jsonl
    stages() { # the stages of the GPU plan at T = 5, comma-separated
        "$dcc" "$prog" --target=nvptx --emit=plan --set T=5 "$@" 2>/dev/null |
            sed -n 's/^stage \([A-Za-z0-9_]*\):.*/\1/p' | paste -sd, -
    }
    [ "$(stages)" = "U,Y" ] && ok "the cost model materialises U" || bad "untuned: $(stages)"
    "$dcc" tune "$prog" --target=model --trials 8 --shapes T=1..64:4 --records "$rec" \
        >"$tmp/out" 2>"$tmp/err" || bad "tune failed: $(tail -3 "$tmp/err")"
    grep -q "^fusion: U inlined: its stages .* ms summed over the shapes, .* ms materialised" \
        "$tmp/out" && ok "$(grep '^fusion' "$tmp/out")" || { cat "$tmp/out"; bad "no fusion choice"; }
    grep -q '"stage":"U","kind":"fuse","fuse":"inline"' "$rec" && ok "the records carry it" ||
        bad "no fuse line in the records"
    [ "$(stages --records "$rec")" = "Y" ] && ok "a compile with the records inlines U" ||
        bad "with records: $(stages --records "$rec")"
    [ "$(stages --records "$rec" --fuse U=materialize)" = "U,Y" ] &&
        ok "--fuse overrules the records" || bad "--fuse over records: $(stages --records "$rec" --fuse U=materialize)"
    # inlined as the records say (emu: the GPU form) or as --fuse says (cpu)
    runs=0
    for T in 1 37 64 100; do
        for how in "emu --records $rec" "cpu --fuse U=inline"; do
            "$dcc" run "$prog" --target=$how --set T=$T --check >"$tmp/run" 2>&1 &&
                grep -q "check: Y matches" "$tmp/run" && runs=$((runs + 1)) ||
                bad "run --target=$how T=$T: $(tail -2 "$tmp/run")"
        done
    done
    [ $runs -eq 8 ] && ok "U inlined checks on emu and cpu at T = 1, 37, 64, 100"
    # a resumed tune measures nothing again, of either fusion, and chooses
    # the same, writing no fuse line again
    n1=$(keys "$rec" | wc -l)
    f1=$(grep -c '"kind":"fuse"' "$rec")
    "$dcc" tune "$prog" --target=model --trials 8 --shapes T=1..64:4 --records "$rec" \
        >"$tmp/out2" 2>&1 && [ "$(keys "$rec" | wc -l)" -eq "$n1" ] &&
        [ "$(grep -c '"kind":"fuse"' "$rec")" -eq "$f1" ] &&
        grep -q "^fusion: U inlined" "$tmp/out2" && ok "a resumed tune chooses the same ($n1 measurements)" ||
        { cat "$tmp/out2"; bad "resumed fusion"; }
    # fixed by --fuse: not searched, recorded as given
    "$dcc" tune "$prog" --target=model --trials 8 --shapes T=1..64:4 --records "$tmp/g.jsonl" \
        --fuse U=materialize >"$tmp/out3" 2>&1 && ! grep -q "^fusion" "$tmp/out3" &&
        grep -q '"stage":"U","kind":"fuse","fuse":"materialize"' "$tmp/g.jsonl" &&
        [ "$(stages --records "$tmp/g.jsonl")" = "U,Y" ] &&
        ok "tune --fuse fixes U, and the compile follows" || { cat "$tmp/out3"; bad "tune --fuse"; }
    # a later tune's fusion replaces an earlier one's: V (read once, not a
    # close call) materialised by --fuse, then tuned again without it
    sed 's/Y\[i: T, n: 40\] = sum\[k: 256\](U\[i, k\] \* W\[n, k\])/Y[i: T, n: 40] = sum[k: 256](U[i, k] * W[n, k]) + V[i, n]/' \
        "$prog" >"$tmp/fuse2.tex"
    sed -i 's/^U\[/V[i: T, n: 40] = X[i, n] * 2.0\nU[/' "$tmp/fuse2.tex"
    "$dcc" tune "$tmp/fuse2.tex" --target=model --trials 4 --shapes T=1..64:2 --records "$tmp/h.jsonl" \
        --fuse V=materialize >/dev/null 2>&1 &&
    "$dcc" tune "$tmp/fuse2.tex" --target=model --trials 4 --shapes T=1..64:2 --records "$tmp/h.jsonl" \
        >/dev/null 2>&1 &&
        plan=$("$dcc" "$tmp/fuse2.tex" --target=nvptx --emit=plan --set T=5 --records "$tmp/h.jsonl" |
               sed -n 's/^stage \([A-Za-z0-9_]*\):.*/\1/p' | paste -sd, -) &&
        [ "$plan" = "Y" ] && grep -q '"stage":"V","kind":"fuse","fuse":"cost"' "$tmp/h.jsonl" &&
        ok "a later tune's fusion replaces an earlier one's" || bad "stale fuse line: plan ${plan:-?}"
    # a damaged fuse line is reported and left out: the cost model decides
    sed -n 's/"fuse":"inline"/"fuse":"sometimes"/p' "$rec" >"$tmp/d.jsonl"
    grep -v '"kind":"fuse"' "$rec" >>"$tmp/d.jsonl"
    [ "$(stages --records "$tmp/d.jsonl")" = "U,Y" ] &&
        "$dcc" "$prog" --target=nvptx --emit=plan --set T=5 --records "$tmp/d.jsonl" 2>&1 >/dev/null |
        grep -q 'd.jsonl:1: field "fuse" is not "inline", "materialize" or "cost"' &&
        ok "a damaged fuse line: a warning, the cost model's fusion" || bad "damaged fuse line"
    # what --fuse refuses, in one line (a usage error adds where help is)
    for case in "Y=inline:1:inputs and outputs" "Q=inline:1:no tensor" "U=maybe:2:expects"; do
        arg=${case%%:*}; rest=${case#*:}; want=${rest%%:*}; msg=${rest#*:}
        "$dcc" "$prog" --emit=te --fuse "$arg" >/dev/null 2>"$tmp/e"
        st=$?
        [ $st -eq "$want" ] && head -1 "$tmp/e" | grep -q "$msg" &&
            [ "$(grep -vc "dcc --help" "$tmp/e")" -eq 1 ] &&
            ok "--fuse $arg: status $st, $(head -1 "$tmp/e")" || bad "--fuse $arg: status $st, $(cat "$tmp/e")"
    done
    # two identical layers: their U is one fusion class, contested once
    # and inlined in both
    cat >"$tmp/fuse2.tex" <<'EOF'
dim T in 1..64
input X[T, 256] f32
input V[T, 256] f32
input W[40, 256] f32
U[i: T, k: 256] = X[i, k] + 1.0
Y[i: T, n: 40] = sum[k: 256](U[i, k] * W[n, k])
U2[i: T, k: 256] = V[i, k] + 1.0
Y2[i: T, n: 40] = sum[k: 256](U2[i, k] * W[n, k])
output Z[i: T, n: 40] = Y[i, n] + Y2[i, n]
EOF
    prog=$tmp/fuse2.tex
    "$dcc" tune "$prog" --target=model --trials 8 --shapes T=1..64:4 --records "$tmp/f2.jsonl" \
        >"$tmp/out2" 2>"$tmp/err2" || bad "two-layer tune failed: $(tail -3 "$tmp/err2")"
    [ "$(grep -c '^fusion: ' "$tmp/out2")" -eq 1 ] &&
        grep -q "^fusion: U2 and 1 like it inlined: their stages" "$tmp/out2" &&
        ok "$(grep '^fusion' "$tmp/out2")" || { cat "$tmp/out2"; bad "not one contest for U and U2"; }
    [ "$(stages --records "$tmp/f2.jsonl")" = "Y,Y2,Z" ] && ok "both inlined" ||
        bad "two layers with records: $(stages --records "$tmp/f2.jsonl")"
    # --contests N: only the N close calls whose other way changes the
    # most time are tuned both ways (0: none), the rest counted
    prog=$tmp/fuse.tex
    "$dcc" tune "$prog" --target=model --trials 8 --shapes T=1..64:4 --records "$tmp/f0.jsonl" \
        --contests 0 >"$tmp/out0" 2>"$tmp/err0" || bad "--contests 0 failed: $(tail -3 "$tmp/err0")"
    [ "$(grep -c '^fusion: ' "$tmp/out0")" -eq 1 ] &&
        grep -q "^fusion: 1 more close choice left as the cost model made it: beyond the 0 contested" \
            "$tmp/out0" && [ "$(stages --records "$tmp/f0.jsonl")" = "U,Y" ] &&
        ok "--contests 0: $(grep '^fusion' "$tmp/out0")" || { cat "$tmp/out0"; bad "--contests 0 contested"; }
    cat >"$tmp/fuse3.tex" <<'EOF'
dim T in 1..64
input X[T, 256] f32
input V[T, 256] f32
input W[40, 256] f32
input W2[400, 256] f32
U[i: T, k: 256] = X[i, k] + 1.0
Y[i: T, n: 40] = sum[k: 256](U[i, k] * W[n, k])
U2[i: T, k: 256] = V[i, k] * 2.0
Y2[i: T, n: 400] = sum[k: 256](U2[i, k] * W2[n, k])
output Z[i: T, n: 40] = Y[i, n] + Y2[i, n]
EOF
    "$dcc" tune "$tmp/fuse3.tex" --target=model --trials 8 --shapes T=1..64:4 --records "$tmp/f3.jsonl" \
        --contests 1 >"$tmp/out3" 2>"$tmp/err3" || bad "--contests 1 failed: $(tail -3 "$tmp/err3")"
    [ "$(grep -c '^fusion: U2 ' "$tmp/out3")" -eq 1 ] && ! grep -q '^fusion: U ' "$tmp/out3" &&
        grep -q "^fusion: 1 more close choice .* beyond the 1 contested" "$tmp/out3" &&
        ok "--contests 1: the larger layer's, $(grep '^fusion' "$tmp/out3" | paste -sd';')" ||
        { cat "$tmp/out3"; bad "--contests 1 did not contest U2 alone"; }
    ;;
consts)
    # A workload is its shapes and types, and which tensors are constants:
    # records tuned on constants.tex pick the same kernels for the program
    # whose constants have other values.
    prog=$src/tests/golden/accept/constants.tex
    sed 's/^const \([A-Za-z]*\)\[\([^]]*\)\] f32 = .*/input \1[\2] f32/' "$prog" >"$tmp/inputs.tex"
    # the same program beside other weights
    printf 'input R[16, 24] f32\noutput E[i: 16, j: 24] = R[i, j] * 3.0\n' >"$tmp/gen.tex"
    "$dcc" run "$tmp/gen.tex" --seed 5 --output "E=$tmp/constants_E.npy" || bad "making other weights"
    cp "$src/tests/golden/accept/constants_P.npy" "$src/tests/golden/accept/constants_bias.npy" "$tmp/"
    cp "$prog" "$tmp/constants.tex"
    "$dcc" tune "$prog" --trials 8 --shapes B=1..4:2 --shapes S=1..24:4 --records "$tmp/r.jsonl" \
        >"$tmp/t.out" 2>"$tmp/t.err" || bad "tune failed: $(cat "$tmp/t.err")"
    "$dcc" "$prog" --records "$tmp/r.jsonl" --emit=loops | grep "micro-kernel" >"$tmp/tuned.mk" ||
        bad "--emit=loops with the records"
    # the records are this program's (else --emit=dispatch refuses them)
    "$dcc" "$tmp/constants.tex" --records "$tmp/r.jsonl" --emit=dispatch >"$tmp/c.tree" 2>&1 ||
        bad "the records are not constants.tex's: $(cat "$tmp/c.tree")"
    "$dcc" "$tmp/constants.tex" --records "$tmp/r.jsonl" --emit=loops | grep "micro-kernel" >"$tmp/c.mk"
    if cmp -s "$tmp/tuned.mk" "$tmp/c.mk" && [ -s "$tmp/c.mk" ]; then
        ok "the records pick the same $(wc -l <"$tmp/c.mk") kernels for other weights"
    else
        bad "records tuned with the constants pick others for other weights: $(diff "$tmp/tuned.mk" "$tmp/c.mk")"
    fi
    # a constant is part of a workload (its panels are packed when
    # compiling, which a measurement includes): not the same as an input
    if "$dcc" "$tmp/inputs.tex" --records "$tmp/r.jsonl" --emit=dispatch >"$tmp/i.tree" 2>&1; then
        bad "records tuned with constants serve the program with them as inputs"
    else
        ok "the program with the constants as inputs is another workload"
    fi
    "$dcc" run "$tmp/constants.tex" --records "$tmp/r.jsonl" --set B=3 --set S=13 --check >"$tmp/c.out" ||
        bad "the other weights, tuned: $(cat "$tmp/c.out")"
    if cmp -s "$tmp/constants_E.npy" "$src/tests/golden/accept/constants_E.npy"; then
        bad "the other weights are the same"
    else
        ok "other weights run with the records and check"
    fi
    ;;
spill)
    # The GPU search and spills: every kernel the tree uses that ptxas says
    # spills is named so in the summary (it won by more than 5% over every
    # kernel without spills where it is used); skipped without ptxas.
    ptxas=${DC_PTXAS:-/usr/local/cuda/bin/ptxas}
    if [ ! -x "$ptxas" ]; then
        echo "skip: no ptxas ($ptxas)"
        exit 0
    fi
    cat >"$tmp/k4096.tex" <<'EOF'
dim T in 1..256
input H[T, 4096] f32
input W[1024, 4096] f32
input b[1024] f32
input R[T, 1024] f32
output Y[i: T, j: 1024] = sum[k: 4096](H[i, k] * W[j, k]) + b[j] + R[i, j]
EOF
    "$dcc" tune "$tmp/k4096.tex" --target=model --arch sm_90 --trials 48 --shapes T=1..256:16 \
        --records "$tmp/k.jsonl" >"$tmp/k.out" 2>"$tmp/k.err" || bad "the model tune failed: $(cat "$tmp/k.err")"
    nk=0
    grep "^  kernel: " "$tmp/k.out" >"$tmp/kernels"
    while IFS= read -r line; do
        mk=$(echo "$line" | sed 's/^  kernel: //; s/ (spills.*//')
        "$dcc" "$tmp/k4096.tex" --target=nvptx --arch sm_90 --emit=ptx --mk "Y=$mk" -o "$tmp/k.ptx" &&
            "$ptxas" -arch=sm_90 -v "$tmp/k.ptx" -o /dev/null >"$tmp/v" 2>&1 || bad "ptxas on '$mk'"
        spills=$(grep -o '[1-9][0-9]* bytes spill' "$tmp/v" | head -1)
        nk=$((nk + 1))
        if [ -n "$spills" ] && ! echo "$line" | grep -q "(spills"; then
            bad "kernel '$mk' spills ($spills) but the summary does not say so"
        elif [ -z "$spills" ] && echo "$line" | grep -q "(spills"; then
            bad "kernel '$mk' is said to spill; ptxas reports none"
        fi
    done <"$tmp/kernels"
    [ "$nk" -gt 0 ] && ok "$nk chosen kernels, spills reported as ptxas says" || bad "no kernel in the summary"
    # the preference itself: records where a kernel that spills (ptxas:
    # 1,264 bytes) is 3% faster than one that does not, at every point,
    # and both faster than all else: the one without spills is chosen; 15%
    # faster, the spilling one, and the summary says why
    "$dcc" tune "$tmp/k4096.tex" --target=model --arch sm_90 --trials 4 --shapes T=1..256:4 \
        --records "$tmp/sp.jsonl" >/dev/null 2>&1 || bad "the small model tune failed"
    for ratio in 0.97 0.85; do
        python3 - "$tmp/sp.jsonl" "$ratio" >"$tmp/sp$ratio.jsonl" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if '"kind":"tree"' not in l]
wl, lowering = (json.loads(lines[0])[k] for k in ("workload", "lowering"))
sys.stdout.writelines(lines)
spills = "threads [32, 32] tile [8, 8] rchunk 32 unroll 4 vec 4 staged"
clean = "threads [16, 16] tile [4, 4] rchunk 32 unroll 4 vec 4 staged"
for t in (1, 86, 171, 256):
    for mk, ms in ((clean, 0.001 * t), (spills, 0.001 * t * float(sys.argv[2]))):
        print(json.dumps({"v": 2, "lowering": lowering, "workload": wl, "target": "model",
                          "arch": "sm_90", "stage": "Y", "mk": mk, "shape": {"T": t},
                          "kind": "select", "trial": 0, "times_ms": [ms], "median_ms": ms,
                          "ts": 1}))
PY
        "$dcc" tune "$tmp/k4096.tex" --target=model --arch sm_90 --trials 4 --shapes T=1..256:4 \
            --records "$tmp/sp$ratio.jsonl" >"$tmp/sp.out" 2>&1 || bad "the tune over sp$ratio failed"
        if [ "$ratio" = 0.97 ]; then
            grep -q "kernel: threads \[16, 16\] tile \[4, 4\] rchunk 32" "$tmp/sp.out" &&
                ! grep -q "threads \[32, 32\] tile \[8, 8\]" "$tmp/sp.out" &&
                ok "3% faster with spills: the kernel without is chosen" ||
                bad "3% faster with spills: $(grep kernel: "$tmp/sp.out")"
        else
            grep -q "kernel: threads \[32, 32\] tile \[8, 8\].*(spills [0-9]* bytes: no kernel without spills within 5%" "$tmp/sp.out" &&
                ok "15% faster with spills: chosen, and the summary says why" ||
                bad "15% faster with spills: $(grep kernel: "$tmp/sp.out")"
        fi
    done
    ;;
gather)
    # Integer inputs that index a table are measured with values within
    # it: a 2-row table (BERT's token types) is tuned, not "nothing could
    # be measured"; the tuned program then checks at several sizes.
    cat >"$tmp/g.tex" <<'EOF'
dim T in 1..64
input ids[T] i64
input types[T] i64
input E[50, 32] f32
input Y[2, 32] f32
output H[t: T, d: 32] = E[ids[t], d] + Y[types[t], d]
EOF
    "$dcc" tune "$tmp/g.tex" --trials 4 --shapes T=1..64:3 --records "$tmp/g.jsonl" \
        >"$tmp/g.out" 2>"$tmp/g.err" && ok "a gather from a 2-row table tuned" ||
        bad "tuning a gather from a 2-row table: $(tail -2 "$tmp/g.err")"
    printf 'dim T in 1..64\ninput R[T] i64\noutput ids[i: T] i64 = R[i] * 0 + i %% 2\n' >"$tmp/ids.tex"
    for t in 1 37 64; do
        "$dcc" run "$tmp/ids.tex" --set T=$t --output "ids=$tmp/ids$t.npy" >/dev/null || bad "making ids"
        "$dcc" run "$tmp/g.tex" --set T=$t --records "$tmp/g.jsonl" --input "ids=$tmp/ids$t.npy" \
            --input "types=$tmp/ids$t.npy" --check >/dev/null 2>&1 && ok "the tuned gather at T=$t" ||
            bad "the tuned gather at T=$t"
    done
    # an integer stage computes the indices: what it leaves in its buffer
    # at one shape is no index at the next shape measured
    cat >"$tmp/p.tex" <<'EOF'
dim T in 1..64
input E[T, 8] f32
pos[i: T] i64 = T - 1 - i
output H[t: T, d: 8] = E[pos[t], d] * 2.0
EOF
    "$dcc" tune "$tmp/p.tex" --trials 4 --shapes T=1..64:4 --fuse pos=materialize \
        --records "$tmp/p.jsonl" >"$tmp/p.out" 2>"$tmp/p.err" &&
        ! grep -q "not measured" "$tmp/p.err" && ok "indices computed by a stage: every kernel measured" ||
        bad "indices computed by a stage: $(grep -m1 "not measured\|error" "$tmp/p.err")"
    ;;
mpi-model)
    # one candidate at a time to two measuring ranks, answers in any order:
    # rank 0 records them in the order it asked, so the file is the 1-rank one
    one_and_three tune "$ex/bert_qkv.tex" --target=model --trials 24 --seed 7 --shapes T=1..128:16
    [ "$(grep -c '^tune: bert_qkv' "$tmp/three.out")" -eq 1 ] && ok "one summary (rank 0's)" ||
        bad "the summary printed $(grep -c '^tune: bert_qkv' "$tmp/three.out") times"
    strip_ts "$tmp/one.jsonl" >"$tmp/one.s"
    strip_ts "$tmp/three.jsonl" >"$tmp/three.s"
    [ -s "$tmp/one.s" ] && cmp -s "$tmp/one.s" "$tmp/three.s" &&
        ok "3 ranks wrote the 1-rank run's records ($(wc -l <"$tmp/one.s") lines, time stamps aside)" ||
        bad "3 ranks wrote other records than 1 ($(diff "$tmp/one.s" "$tmp/three.s" | head -c 600))"
    for f in one three; do
        "$dcc" "$ex/bert_qkv.tex" --target=nvptx --records "$tmp/$f.jsonl" --emit=dispatch \
            >"$tmp/$f.json" || bad "--emit=dispatch with the $f-rank records"
    done
    cmp -s "$tmp/one.json" "$tmp/three.json" && grep -q '"tree"' "$tmp/one.json" &&
        ok "the same dispatch tree and kernels" || bad "another dispatch with 3 ranks"
    grep -v '^  time:\|^tune: bert\|^mpi:\|^records:' "$tmp/one.out" >"$tmp/one.sum"
    grep -v '^  time:\|^tune: bert\|^mpi:\|^records:' "$tmp/three.out" >"$tmp/three.sum"
    cmp -s "$tmp/one.sum" "$tmp/three.sum" && ok "the same summary" ||
        bad "another summary: $(diff "$tmp/one.sum" "$tmp/three.sum" | head -5)"
    # a measuring rank without ptxas: rank 0 says so, and the search goes
    # without ptxas's reports on every rank
    if [ -x "${DC_PTXAS:-/usr/local/cuda/bin/ptxas}" ]; then
        a="tune $ex/bert_qkv.tex --target=model --trials 4 --seed 7 --shapes T=1..128:4"
        # shellcheck disable=SC2086
        "${DC_MPIEXEC:-mpirun}" --allow-run-as-root --oversubscribe -n 2 "$dcc" $a \
            --records "$tmp/px.jsonl" : -n 1 env DC_PTXAS=/nonexistent "$dcc" $a \
            --records "$tmp/px.jsonl" >"$tmp/px.out" 2>"$tmp/px.err" || bad "tune with a rank lacking ptxas"
        grep -q "warning: rank 2 (.*) lacks ptxas, rank 0 (.*) has" "$tmp/px.err" &&
            ok "a rank without ptxas: $(grep -m1 'lacks ptxas' "$tmp/px.err")" ||
            bad "no word of the rank without ptxas: $(head -3 "$tmp/px.err")"
    else
        ok "no ptxas here: the check of a rank without it is left out"
    fi
    ;;
mpi-side)
    # 12 distinct workloads (and 17 stages, and the fusion contests' own):
    # two measuring ranks get the searches of several side by side, each
    # as it goes alone, so only the order of the records differs (fewer
    # trials and shapes where a sanitizer slows every rank: DC_TEST_MPI_QUICK)
    if [ -n "${DC_TEST_MPI_QUICK:-}" ]; then side="--trials 4 --shapes T=1..128:2"
    else side="--trials 8 --shapes T=1..128:4"; fi
    # shellcheck disable=SC2086
    one_and_three tune "$ex/bert_encoder.tex" --target=model --seed 7 $side
    strip_ts "$tmp/one.jsonl" | sort >"$tmp/one.s"
    strip_ts "$tmp/three.jsonl" | sort >"$tmp/three.s"
    [ -s "$tmp/one.s" ] && cmp -s "$tmp/one.s" "$tmp/three.s" &&
        ok "3 ranks wrote the 1-rank run's records ($(wc -l <"$tmp/one.s") lines, in another order)" ||
        bad "3 ranks wrote other records than 1 ($(diff "$tmp/one.s" "$tmp/three.s" | head -c 600))"
    # side by side: one workload's measurements resume after another's
    # began (one after another, each workload's lines are one stretch)
    python3 - "$tmp/one.jsonl" "$tmp/three.jsonl" <<'PY' && ok "searched side by side" || bad "not side by side"
import json, sys
def stretches(path):
    ws = [r["workload"] for r in map(json.loads, open(path)) if r["kind"] not in ("tree", "fuse")]
    return len(set(ws)), 1 + sum(a != b for a, b in zip(ws, ws[1:]))
one, three = stretches(sys.argv[1]), stretches(sys.argv[2])
print("workloads and their stretches of measurements: 1 rank %s, 3 ranks %s" % (one, three))
assert one[0] > 2 and one[0] == one[1], one
assert three[1] > three[0], three
PY
    for f in one three; do
        "$dcc" "$ex/bert_encoder.tex" --target=nvptx --records "$tmp/$f.jsonl" --emit=dispatch \
            >"$tmp/$f.json" || bad "--emit=dispatch with the $f-rank records"
    done
    cmp -s "$tmp/one.json" "$tmp/three.json" && [ "$(grep -o '"tree"' "$tmp/one.json" | wc -l)" -gt 3 ] &&
        ok "the same dispatch trees and kernels" || bad "another dispatch with 3 ranks"
    grep -v '^  time:\|^tune: bert\|^mpi:\|^records:' "$tmp/one.out" >"$tmp/one.sum"
    grep -v '^  time:\|^tune: bert\|^mpi:\|^records:' "$tmp/three.out" >"$tmp/three.sum"
    cmp -s "$tmp/one.sum" "$tmp/three.sum" && ok "the same summary" ||
        bad "another summary: $(diff "$tmp/one.sum" "$tmp/three.sum" | head -5)"
    ;;
mpi-cpu)
    rec=$tmp/r.jsonl
    mpi 3 tune "$ex/bert_qkv.tex" --trials 8 --shapes T=1..128:6 --records "$rec" \
        >"$tmp/out" 2>"$tmp/err" || bad "3-rank CPU tune failed: $(grep -v '^tune: Y' "$tmp/err" | head -5)"
    grep -q "^mpi: 3 ranks, measured on " "$tmp/out" && grep -q "^  dispatch: " "$tmp/out" &&
        ok "tuned on 3 ranks: $(grep '^mpi:' "$tmp/out")" || bad "no summary: $(head -3 "$tmp/out")"
    # the records' schema and arch: those of a tune on this machine (a
    # one-trial run here says which arch that is)
    "$dcc" tune "$ex/bert_qkv.tex" --trials 1 --shapes T=1..2 --records "$tmp/here.jsonl" \
        >/dev/null 2>&1 || bad "1-rank CPU tune failed"
    python3 - "$rec" "$tmp/here.jsonl" <<'PY' && ok "records whole, of this CPU's arch, the same fields" || bad "records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
here = [json.loads(l) for l in open(sys.argv[2])]
arch = {r["arch"] for r in here}
assert len(arch) == 1 and {r["arch"] for r in recs} == arch, ({r["arch"] for r in recs}, arch)
assert all(r["target"] == "cpu" and r["v"] == 2 for r in recs)
fields = {r["kind"]: set(r) - {"dropped"} for r in here}
assert "trial" in fields and "tree" in fields
trials = [r for r in recs if r["kind"] == "trial"]
assert len(trials) == 8, len(trials)
for r in recs:
    if r["kind"] in fields:
        assert set(r) - {"dropped"} == fields[r["kind"]], (set(r), fields[r["kind"]])
assert sum(r["kind"] == "tree" for r in recs) == 1
PY
    for T in 1 7 33 100 128 200; do
        "$dcc" run "$ex/bert_qkv.tex" --records "$rec" --set T=$T --check >/dev/null \
            2>"$tmp/run.err" || bad "T=$T with the 3-rank records: $(cat "$tmp/run.err")"
    done
    ok "the 3-rank dispatch runs correctly at T = 1, 7, 33, 100, 128, 200"
    ;;
mpi-kill)
    # Open MPI ends the job when a rank dies; rank 0's records are whole,
    # and the same command resumes: nothing measured twice, and the result
    # is the uninterrupted run's (the model target is deterministic)
    rec=$tmp/r.jsonl
    args="tune $ex/bert_qkv.tex --target=model --trials 64 --seed 5 --shapes T=1..128:16 --records $rec"
    # shellcheck disable=SC2086
    mpi 3 $args >"$tmp/out1" 2>"$tmp/err1" &
    pid=$!
    kill_rank1 "$rec" 16
    wait $pid
    st=$?
    [ $st -ne 0 ] && ok "the job ended, status $st" || bad "the job ended with status 0"
    cp "$rec" "$tmp/before"
    before=$(wc -l <"$tmp/before")
    whole_lines "$rec" && [ "$before" -ge 16 ] && ok "$before whole records" ||
        bad "records damaged or lost ($before lines)"
    # shellcheck disable=SC2086
    mpi 3 $args >"$tmp/out2" 2>"$tmp/err2" ||
        bad "the same command failed: $(grep -v '^tune: Y' "$tmp/err2" | head -5)"
    head -n "$before" "$rec" | cmp -s - "$tmp/before" && ok "no record lost or changed" ||
        bad "records before the kill changed"
    dup=$(keys "$rec" | sort | uniq -d | wc -l)
    [ "$dup" -eq 0 ] && ok "nothing measured twice" || bad "$dup measurements taken twice"
    reused=$(sed -n 's/.*search [0-9]* measured + \([0-9]*\) from records.*/\1/p' "$tmp/out2")
    [ "${reused:-0}" -ge 1 ] && ok "the rerun reused $reused of the search's trials" ||
        bad "nothing reused: $(grep '^stage' "$tmp/out2")"
    args1=$(echo "$args" | sed "s|$rec|$tmp/fresh.jsonl|")
    # shellcheck disable=SC2086
    "$dcc" $args1 >/dev/null 2>&1 || bad "the uninterrupted 1-rank run failed"
    strip_ts "$rec" >"$tmp/r.s"
    strip_ts "$tmp/fresh.jsonl" >"$tmp/fresh.s"
    cmp -s "$tmp/r.s" "$tmp/fresh.s" && ok "killed and resumed: the uninterrupted run's records" ||
        bad "killed and resumed differs from uninterrupted ($(diff "$tmp/r.s" "$tmp/fresh.s" | head -c 400))"
    ;;
mpi-recover)
    # with mpirun --enable-recovery the job outlives a rank: rank 0 takes a
    # rank that gives no answer within DC_MPI_TIMEOUT seconds as lost, hands
    # its candidate to another, and finishes as an uninterrupted run does
    # (DC_TEST_MPI_TIMEOUT: longer where a sanitizer slows a live rank)
    rec=$tmp/r.jsonl
    args="tune $ex/bert_qkv.tex --target=model --trials 40 --seed 5 --shapes T=1..128:16"
    mpiflags=--enable-recovery
    # shellcheck disable=SC2086
    DC_MPI_TIMEOUT=${DC_TEST_MPI_TIMEOUT:-3} mpi 3 $args --records "$rec" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    kill_rank1 "$rec" 16
    wait $pid
    st=$?
    [ $st -eq 0 ] && grep -q "^  dispatch: " "$tmp/out" && ok "the run finished without rank 1" ||
        bad "status $st: $(grep -v '^tune: Y' "$tmp/err" | head -5)"
    grep -q "warning: rank 1 (.*) is lost" "$tmp/err" && ok "$(grep -m1 'is lost' "$tmp/err")" ||
        bad "no word of the lost rank"
    # shellcheck disable=SC2086
    "$dcc" $args --records "$tmp/fresh.jsonl" >/dev/null 2>&1 || bad "the 1-rank run failed"
    strip_ts "$rec" >"$tmp/r.s"
    strip_ts "$tmp/fresh.jsonl" >"$tmp/fresh.s"
    cmp -s "$tmp/r.s" "$tmp/fresh.s" && ok "the records of a run that lost no rank" ||
        bad "records differ ($(diff "$tmp/r.s" "$tmp/fresh.s" | head -c 400))"
    ;;
*)
    echo "unknown test $what"
    exit 2
    ;;
esac
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
