#!/bin/sh
# The ONNX importer from the command line: small models written as text
# protobufs (tests/onnx/models/*.txt, encoded here with protoc-c --encode
# against Debian's onnx.proto), run and checked over sizes in, at the ends
# of and above the --dims range on cpu and emu; bad models, each one clear
# error, exit 1, no output written.
#   cli.sh DCC SRCDIR
set -u
dcc=$1
src=$2
models=$src/tests/onnx/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # NAME RC PATTERN ARGS...
    name=$1 want=$2 pat=$3
    shift 3
    out=$("$dcc" "$@" --emit=te 2>&1)
    rc=$?
    lines=$(printf '%s\n' "$out" | grep -c 'error')
    case "$out" in
    *"$pat"*) [ "$rc" = "$want" ] && ok "$name: $(printf '%s' "$out" | head -1)" ||
                  bad "$name: exit $rc, expected $want" ;;
    *) bad "$name: expected '$pat', got: $out" ;;
    esac
    [ "$lines" -le 2 ] || bad "$name: $lines lines of errors"
}
checked() { # NAME PATTERN TARGETS ARGS...: `dcc run ARGS --check` prints PATTERN on each target
    name=$1 pat=$2 targets=$3
    shift 3
    for t in $targets; do
        out=$("$dcc" run "$@" --target=$t --check 2>&1)
        case $out in
        *$pat*) ok "$name on $t" ;;
        *) bad "$name on $t: $out" ;;
        esac
    done
}
for f in "$models"/*.txt; do
    n=$(basename "$f" .txt)
    grep -v '^#' "$f" | protoc-c --encode=onnx.ModelProto --proto_path=/usr/include/onnx onnx.proto \
        >"$tmp/$n.onnx" || bad "encoding $n.txt"
done

# good models: checked against the reference at several sizes
for args in "mlp batch=1..16 batch 1 7 16 40" "embed sequence=1..32 sequence 1 5 32 33" \
            "func batch=1..8 batch 1 3 8 9"; do
    set -- $args
    m=$1 range=$2 dim=$3
    shift 3
    for v in "$@"; do
        checked "$m $dim=$v" "matches the reference" "cpu emu" "$tmp/$m.onnx" --dims "$range" \
            --set "$dim=$v"
    done
done
# an Expand to Where(Equal(Shape(y), -1), 1, Shape(y))
for v in 1 8 9; do
    checked "where T=$v" "out matches the reference" cpu "$tmp/where.onnx" --dims T=1..8 --set "T=$v"
done
# a Reshape's target computed from Shape, Gather, Unsqueeze and Concat
for s in 1 13 64 70; do
    checked "heads sequence=$s" "y matches the reference*z matches the reference" "cpu emu" \
        "$tmp/heads.onnx" --dims batch=1..4,sequence=1..64 --set batch=3 --set "sequence=$s"
done
out=$("$dcc" "$tmp/heads.onnx" --dims batch=1..4,sequence=1..64 --emit=te)
case $out in
*"v[i0: batch, i1: sequence, i2: 2, i3: 4] = x[i0, i1, i2 * 4 + i3]"*) ok "the head split reads x plainly" ;;
*) bad "the head split: $out" ;;
esac
# a CNN over images of dynamic height and width: Conv, pooling and their
# padding over the dims, at the range's ends, ragged sizes and above it
for hw in "8 8" "9 13" "17 31" "40 40" "41 57"; do
    set -- $hw
    checked "cnn height=$1 width=$2" \
        "y matches the reference*z matches the reference*g matches the reference" "cpu emu" \
        "$tmp/cnn.onnx" --dims height=8..40,width=8..40 --set "height=$1" --set "width=$2"
done
expect cnn_small 1 "node 2 ('conv2', Conv): the window (3 elements) is larger than the padded input ((height + 1) / 2) on spatial axis 0 at some sizes in the declared ranges" \
    "$tmp/cnn.onnx" --dims height=4..40,width=8..40
# ceil_mode's last window and SAME's padding by the length mod the stride
for h in 5 6 7 8 9 20 23; do
    checked "pool1d height=$h" "a matches*b matches*c_2 matches*d matches*e matches the reference" \
        "cpu emu" "$tmp/pool1d.onnx" --dims height=5..20 --set "height=$h"
done
# extents that are different expressions of the dims, proven equal
for bs in "1 2" "3 7" "4 16" "5 23"; do
    set -- $bs
    checked "equal batch=$1 sequence=$2" \
        "y matches the reference*z matches the reference*w matches the reference*h matches the reference" \
        "cpu emu" "$tmp/equal.onnx" --dims batch=1..4,sequence=2..16 --set "batch=$1" --set "sequence=$2"
done
expect unequal 1 "node 0 ('add', Add): inputs do not broadcast: extents n and m on axis 1 are not proven equal" \
    "$tmp/unequal.onnx" --dims batch=1..4,n=1..4,m=1..4
# position ids from Range over the sequence dim: in range every size
# checks; past the position table (8 rows) the call fails naming it
for s in 1 5 8; do
    checked "positions sequence=$s" "y matches the reference" "cpu emu" "$tmp/positions.onnx" \
        --dims batch=1..2,sequence=1..8 --set batch=2 --set "sequence=$s"
done
out=$("$dcc" run "$tmp/positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=1 --set sequence=9 2>&1)
case $out in
*"index 8 of wpe on axis 0 is out of range -8..7"*) ok "positions past the table: $out" ;;
*) bad "positions past the table: $out" ;;
esac
# BERT's position ids: a constant table of 8 rows sliced to `sequence`
# columns, which holds up to the table's length: sizes above it are
# refused, and a range past the table is an error naming the Slice
for s in 1 8; do
    checked "slice_positions sequence=$s" "y matches the reference" cpu "$tmp/slice_positions.onnx" \
        --dims batch=1..2,sequence=1..8 --set batch=2 --set "sequence=$s"
done
out=$("$dcc" run "$tmp/slice_positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=2 --set sequence=9 2>&1)
case $out in
*"sequence = 9 is above the declared range 1..8"*) ok "slice_positions above the range: $out" ;;
*) bad "slice_positions above the range: $out" ;;
esac
expect slice_past 1 "node 3 ('slice', Slice): axis 1: the slice from 0 to sequence is not proven to lie within the axis of 8 elements" \
    "$tmp/slice_positions.onnx" --dims batch=1..2,sequence=1..9
# an id out of range fails the call naming the tensor, and writes nothing
printf 'input R[3] i64\noutput ids[i: 3] i64 = R[i] * 0 + 1 + i * 8\n' >"$tmp/ids.tex"
"$dcc" run "$tmp/ids.tex" --output "ids=$tmp/ids.npy" >/dev/null || bad "making ids"
out=$("$dcc" run "$tmp/embed.onnx" --dims sequence=1..32 --set sequence=3 --input "ids=$tmp/ids.npy" \
      --output "y=$tmp/y.npy" 2>&1)
rc=$?
case "$rc $out" in
"1 "*"index 17 of table on axis 0 is out of range -16..15"*)
    [ -e "$tmp/y.npy" ] && bad "an output was written" || ok "an id out of range: $out" ;;
*) bad "an id out of range: rc $rc: $out" ;;
esac

# weights as external data (ext.onnx: mlp.onnx's, in ext.bin beside it)
python3 -c "import struct, sys; sys.stdout.buffer.write(struct.pack('<15f', 0.1, -0.2, 0.3, 0.4, 0.5, \
-0.6, 0.7, 0.8, -0.9, 1.0, 1.1, -1.2, 0.01, 0.02, -0.03))" >"$tmp/ext.bin"
for t in cpu emu; do
    a=$("$dcc" run "$tmp/ext.onnx" --dims batch=1..16 --set batch=5 --target=$t 2>"$tmp/ext.err")
    b=$("$dcc" run "$tmp/mlp.onnx" --dims batch=1..16 --set batch=5 --target=$t 2>>"$tmp/ext.err")
    case $a in
    "y (5, 3): min"*) [ "$a" = "$b" ] && ok "external data on $t: as mlp" || bad "external data on $t: $a vs $b" ;;
    *) bad "external data on $t: $a $(cat "$tmp/ext.err")" ;;
    esac
done
mkdir "$tmp/sub"
cp "$tmp/ext.bin" "$tmp/sub/ext.bin"
ext_variant() { # NAME SED-EXPRESSION: ext.txt changed, as sub/NAME.onnx
    grep -v '^#' "$models/ext.txt" | sed "$2" |
        protoc-c --encode=onnx.ModelProto --proto_path=/usr/include/onnx onnx.proto >"$tmp/sub/$1.onnx"
}
ext_variant up '/"0" }/s|"ext.bin"|"../ext.bin"|'
expect ext_up 1 "tensor 'w': external data '../ext.bin' points outside the model's folder" "$tmp/sub/up.onnx" --dims batch=1..4
ext_variant abs '/"0" }/s|"ext.bin"|"/etc/passwd"|'
expect ext_abs 1 "tensor 'w': external data '/etc/passwd' points outside the model's folder" "$tmp/sub/abs.onnx" --dims batch=1..4
ln -s ../ext.bin "$tmp/sub/link.bin"
ext_variant link '/"0" }/s|"ext.bin"|"link.bin"|'
expect ext_link 1 "tensor 'w': external data 'link.bin' points outside the model's folder" "$tmp/sub/link.onnx" --dims batch=1..4
ext_variant past 's|"offset" value: "48" }|"offset" value: "52" }|'
expect ext_past 1 "tensor 'b': external data '$tmp/sub/ext.bin': 12 bytes at offset 52 run past its end (60 bytes)" "$tmp/sub/past.onnx" --dims batch=1..4
ext_variant length 's|value: "12" }|value: "16" }|'
expect ext_length 1 "tensor 'b': external data 'ext.bin' holds 16 bytes, its elements need 12" "$tmp/sub/length.onnx" --dims batch=1..4
ext_variant absent '/"0" }/s|"ext.bin"|"absent.bin"|'
expect ext_absent 1 "tensor 'w': external data '$tmp/sub/absent.bin': No such file or directory" "$tmp/sub/absent.onnx" --dims batch=1..4
ext_variant count 's|value: "0" }|value: "-1" }|'
expect ext_count 1 "external data: offset '-1' is not a byte count" "$tmp/sub/count.onnx" --dims batch=1..4

# --emit=tex: each model as a .tex program and its constants' .npy files;
# the program runs to the model's bytes at every size given, and reads
# back to the same text (but for a dim the model accepts above its range
# up to a table's length, which the .tex accepts within its range only)
npy_i64() { # FILE B S VALUE: an int64 .npy of shape (B, S), every element VALUE (0..255)
    h="{'descr': '<i8', 'fortran_order': False, 'shape': ($2, $3), }"
    while [ $(( (${#h} + 11) % 64 )) -ne 0 ]; do h="$h "; done
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf '%03o' $(( (${#h} + 1) % 256 )))\\$(printf '%03o' $(( (${#h} + 1) / 256 )))"
        printf '%s\n' "$h"
        i=0
        while [ $i -lt $(($2 * $3)) ]; do
            printf "\\$(printf '%03o' "$4")\000\000\000\000\000\000\000"
            i=$((i + 1))
        done
    } >"$1"
}
roundtrip() { # MODEL RANGES SETS...
    m=$1 ranges=$2
    shift 2
    rm -rf "$tmp/tex" && mkdir "$tmp/tex"
    if ! "$dcc" "$tmp/$m.onnx" --dims "$ranges" --emit=tex -o "$tmp/tex/$m.tex" 2>"$tmp/tex.err"; then
        bad "tex $m: $(cat "$tmp/tex.err")"; return
    fi
    "$dcc" "$tmp/tex/$m.tex" --emit=te >"$tmp/tex/again.te" 2>&1 &&
        "$dcc" "$tmp/$m.onnx" --dims "$ranges" --emit=te >"$tmp/tex/model.te" &&
        sed 's/= "\(.*\)"$/= FILE/; s/  # accepts no value above the range$//' "$tmp/tex/again.te" >"$tmp/tex/a" &&
        sed 's/= "\(.*\)"$/= FILE/; s/  # accepts no value above the range$//' "$tmp/tex/model.te" >"$tmp/tex/b" &&
        cmp -s "$tmp/tex/a" "$tmp/tex/b" || bad "tex $m: the .tex reads back to another program"
    for s in "$@"; do
        outs=$(grep '^output' "$tmp/tex/model.te" | sed 's/^output \([A-Za-z_0-9]*\).*/\1/')
        args_a= args_b=
        for o in $outs; do
            args_a="$args_a --output $o=$tmp/tex/$o.onnx.npy"
            args_b="$args_b --output $o=$tmp/tex/$o.tex.npy"
        done
        # shellcheck disable=SC2086 # SETS: --set NAME=V ..., and the outputs
        if ! "$dcc" run "$tmp/$m.onnx" --dims "$ranges" $s $args_a >/dev/null 2>"$tmp/tex.err" ||
           ! "$dcc" run "$tmp/tex/$m.tex" $s $args_b >/dev/null 2>>"$tmp/tex.err"; then
            bad "tex $m $s: $(cat "$tmp/tex.err")"; continue
        fi
        same=1
        for o in $outs; do cmp -s "$tmp/tex/$o.onnx.npy" "$tmp/tex/$o.tex.npy" || same=0; done
        [ $same -eq 1 ] && ok "tex $m $s: the same bytes" || bad "tex $m $s: the outputs differ"
    done
}
roundtrip mlp batch=1..16 "--set batch=1" "--set batch=7" "--set batch=40"
roundtrip embed sequence=1..32 "--set sequence=5" "--set sequence=33"
roundtrip heads batch=1..4,sequence=1..64 "--set batch=3 --set sequence=17"
roundtrip positions batch=1..2,sequence=1..8 "--set batch=2 --set sequence=8"
roundtrip where T=1..8 "--set T=1" "--set T=8"
roundtrip func batch=1..8 "--set batch=3"
roundtrip cnn height=8..40,width=8..40 "--set height=9 --set width=13" "--set height=41 --set width=57"
roundtrip equal batch=1..4,sequence=2..16 "--set batch=3 --set sequence=7"
roundtrip pool1d height=5..20 "--set height=7" "--set height=23"
# the exports of BERT and GPT-2 (two layers), token ids 3, mask 1, token types 0
for bs in "1 1" "2 16"; do
    set -- $bs
    npy_i64 "$tmp/ids_$1_$2.npy" "$1" "$2" 3
    npy_i64 "$tmp/mask_$1_$2.npy" "$1" "$2" 1
    npy_i64 "$tmp/types_$1_$2.npy" "$1" "$2" 0
done
ins() { echo "--set batch=$1 --set sequence=$2 --input input_ids=$tmp/ids_$1_$2.npy --input attention_mask=$tmp/mask_$1_$2.npy"; }
cp "$src/tests/onnx/exports/test_bert_dynamo/model.onnx" "$tmp/bert.onnx"
roundtrip bert batch=1..2,sequence=1..16 "$(ins 1 1) --input token_type_ids=$tmp/types_1_1.npy" \
    "$(ins 2 16) --input token_type_ids=$tmp/types_2_16.npy"
cp "$src/tests/onnx/exports/test_gpt2_dynamo/model.onnx" "$tmp/gpt2.onnx"
roundtrip gpt2 batch=1..2,sequence=1..16 "$(ins 1 1)" "$(ins 2 16)"
out=$("$dcc" "$tmp/mlp.onnx" --dims batch=1..4 --emit=tex 2>&1)
[ $? -eq 1 ] && [ "$out" = "dcc: error: --emit=tex writes the constants of mlp beside the program: give -o FILE.tex" ] &&
    ok "tex to stdout: $out" || bad "tex to stdout: $out"

# bad models and bad command lines
expect recursive 1 "node 0 ('call', local.Loop): calls to functions nest deeper than 16" "$tmp/recursive.onnx"
expect cycle 1 "node 0 ('first', Add): the graph has a cycle through this node" "$tmp/cycle.onnx"
expect missing 1 "input 'w' is no graph input, initializer or node's output" "$tmp/missing.onnx"
expect unsupported 1 "unsupported operators: Cos 2, TopK 1" "$tmp/unsupported.onnx"
expect double 1 "input 'x' is double: not supported yet" "$tmp/double.onnx"
expect opset 1 "default-domain opset 5: opsets 7 to 21 are supported" "$tmp/old_opset.onnx"
expect data_shape 1 "node 0 ('view', Reshape): the shape is not known when compiling" "$tmp/data_shape.onnx"
expect no_range 1 "dim 'batch' has no range: give it one with --dims batch=LO..HI" "$tmp/mlp.onnx"
expect wrong_dim 1 "--dims seq: no input of the model has a dim named 'seq'" "$tmp/mlp.onnx" --dims batch=1..4,seq=1..8
expect bad_range 2 "--dims expects" "$tmp/mlp.onnx" --dims batch=0..4
expect tex_dims 2 "--dims is for ONNX models" "$src/examples/softmax.tex" --dims T=1..4
head -c 40 "$tmp/mlp.onnx" >"$tmp/truncated.onnx"
expect truncated 1 "not an ONNX model (the protobuf does not decode)" "$tmp/truncated.onnx"
printf 'hello, this is no model\n' >"$tmp/text.onnx"
expect not_protobuf 1 "not an ONNX model" "$tmp/text.onnx"
expect no_file 1 "No such file or directory" "$tmp/absent.onnx"
echo "$((fails == 0 ? 1 : 0)) passed, $((fails == 0 ? 0 : 1)) failed"
[ "$fails" -eq 0 ]
