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
for f in "$models"/*.txt; do
    n=$(basename "$f" .txt)
    grep -v '^#' "$f" | protoc-c --encode=onnx.ModelProto --proto_path=/usr/include/onnx onnx.proto \
        >"$tmp/$n.onnx" || bad "encoding $n.txt"
done

# good models: checked against the reference at several sizes
for args in "mlp batch=1..16 batch 1 7 16 40" "embed sequence=1..32 sequence 1 5 32 33"; do
    set -- $args
    m=$1 range=$2 dim=$3
    shift 3
    for v in "$@"; do
        for t in cpu emu; do
            out=$("$dcc" run "$tmp/$m.onnx" --dims "$range" --set "$dim=$v" --target=$t --check 2>&1)
            case $out in
            *"matches the reference"*) ok "$m $dim=$v on $t" ;;
            *) bad "$m $dim=$v on $t: $out" ;;
            esac
        done
    done
done
# an Expand to Where(Equal(Shape(y), -1), 1, Shape(y))
for v in 1 8 9; do
    out=$("$dcc" run "$tmp/where.onnx" --dims T=1..8 --set "T=$v" --target=cpu --check 2>&1)
    case $out in
    *"out matches the reference"*) ok "where T=$v" ;;
    *) bad "where T=$v: $out" ;;
    esac
done
# a Reshape's target computed from Shape, Gather, Unsqueeze and Concat
for s in 1 13 64 70; do
    for t in cpu emu; do
        out=$("$dcc" run "$tmp/heads.onnx" --dims batch=1..4,sequence=1..64 --set batch=3 \
              --set "sequence=$s" --target=$t --check 2>&1)
        case $out in
        *"y matches the reference"*"z matches the reference"*) ok "heads sequence=$s on $t" ;;
        *) bad "heads sequence=$s on $t: $out" ;;
        esac
    done
done
out=$("$dcc" "$tmp/heads.onnx" --dims batch=1..4,sequence=1..64 --emit=te)
case $out in
*"v[i0: batch, i1: sequence, i2: 2, i3: 4] = x[i0, i1, i2 * 4 + i3]"*) ok "the head split reads x plainly" ;;
*) bad "the head split: $out" ;;
esac
# position ids from Range over the sequence dim: in range every size
# checks; past the position table (8 rows) the call fails naming it
for s in 1 5 8; do
    for t in cpu emu; do
        out=$("$dcc" run "$tmp/positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=2 \
              --set "sequence=$s" --target=$t --check 2>&1)
        case $out in
        *"y matches the reference"*) ok "positions sequence=$s on $t" ;;
        *) bad "positions sequence=$s on $t: $out" ;;
        esac
    done
done
out=$("$dcc" run "$tmp/positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=1 --set sequence=9 2>&1)
case $out in
*"index 8 of wpe on axis 0 is out of range -8..7"*) ok "positions past the table: $out" ;;
*) bad "positions past the table: $out" ;;
esac
# BERT's position ids: a constant table sliced to `sequence` columns, which
# holds only within the declared range: sizes above it are refused, and a
# range past the table is an error naming the Slice
for s in 1 8; do
    out=$("$dcc" run "$tmp/slice_positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=2 \
          --set "sequence=$s" --check 2>&1)
    case $out in
    *"y matches the reference"*) ok "slice_positions sequence=$s" ;;
    *) bad "slice_positions sequence=$s: $out" ;;
    esac
done
out=$("$dcc" run "$tmp/slice_positions.onnx" --dims batch=1..2,sequence=1..8 --set batch=2 --set sequence=9 2>&1)
case $out in
*"sequence = 9 is above the declared range 1..8"*) ok "slice_positions above the range: $out" ;;
*) bad "slice_positions above the range: $out" ;;
esac
expect slice_past 1 "node 3 ('slice', Slice): axis 1: the slice is not proven to lie within the axis" \
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

# bad models and bad command lines
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
