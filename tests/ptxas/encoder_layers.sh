#!/bin/sh
# Writes a program of N BERT-base encoder layers (examples/bert_encoder.tex
# repeated, each layer's tensors renamed NAME_l, layer l reading layer
# l - 1's output) to stdout: a GPU program of hundreds of buffers.
#   encoder_layers.sh SOURCE_DIR N
set -eu
src=$1 n=$2
layer=$src/examples/bert_encoder.tex
names='X Wq bq Wk bk Wv bv Wo bo g1 be1 W1 b1 W2 b2 g2 be2 Q K V S M E Z P C A Mu1 Va1 H1 F G Mu2 Va2 Y'
grep '^dim ' "$layer"
echo 'input X[T, 768] f32'
l=0
while [ "$l" -lt "$n" ]; do
    script=
    for t in $names; do
        script="$script s/\\b$t\\b/${t}_$l/g;"
    done
    prev=$((l - 1))
    # layer 0 reads X; layer l reads Y_(l-1); only the last layer's Y is an output
    grep -v -e '^dim ' -e '^#' -e '^input X\[' -e '^$' "$layer" | sed "$script" |
        sed -e "s/\\bX_$l\\b/$([ "$l" -eq 0 ] && echo X || echo "Y_$prev")/g" |
        if [ "$l" -lt $((n - 1)) ]; then sed 's/^output //'; else cat; fi
    l=$((l + 1))
done
