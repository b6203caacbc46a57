#!/bin/sh
# The demo: compile an example, show its checked form, run it for two
# sizes (one inside and one above the declared range) and check the result,
# then tune it briefly for the whole range, run the tuned dispatch and draw
# the tuning's report.
set -eu
dcc=${1:-build/dcc}
ex=examples/bert_qkv.tex
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "The program: $ex"
cat "$ex"
step "What dcc understood (dcc $ex --emit=te)"
"$dcc" "$ex" --emit=te
step "The kernel dcc generated for every T, as loop IR (dcc $ex --emit=loops)"
"$dcc" "$ex" --emit=loops
step "Compile for this CPU and run it for T=5 with seeded random inputs (dcc run $ex --set T=5)"
"$dcc" run "$ex" --set T=5
step "The same compiled kernel for T=77, checked against the reference interpreter"
"$dcc" run "$ex" --set T=77 --check
step "T=200 is above the declared range 1..128: it still runs correctly"
"$dcc" run "$ex" --set T=200 --check
step "How fast: 20 runs at T=128 (dcc run $ex --set T=128 --bench 20)"
"$dcc" run "$ex" --set T=128 --bench 20
rec=$(mktemp /tmp/dcc-demo-XXXXXX.jsonl)
step "Tune once for the whole range: a short joint search over 8 values of T (dcc tune $ex --trials 12 --shapes T=1..128:8)"
"$dcc" tune "$ex" --trials 12 --shapes T=1..128:8 --records "$rec" 2>/dev/null
step "The tuned kernels and their dispatch tree, at T=77 and T=128 (dcc run $ex --records R ...)"
"$dcc" run "$ex" --records "$rec" --set T=77 --check
"$dcc" run "$ex" --records "$rec" --set T=128 --bench 20
step "What the tuning found, as a picture (dcc report --records R -o /tmp/dcc-demo-report.svg)"
"$dcc" report --records "$rec" -o /tmp/dcc-demo-report.svg
rm -f "$rec"
step "A mistake gets a located error"
printf 'dim T in 1..128\ninput X[T, 768] f32\noutput Y[i: T] = X[i + 1, 0]\n' > /tmp/dcc-demo-bad.tex
"$dcc" /tmp/dcc-demo-bad.tex || echo "(exit status $?)"
rm -f /tmp/dcc-demo-bad.tex
