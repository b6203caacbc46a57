#!/bin/sh
# install: `cmake --install` of this build into a fresh prefix, then, with
# nothing of the source tree on any include or library path:
#   - each public header but dietcode/codegen_llvm.h compiles alone without
#     LLVM's include path (and that one with pkg-config's Cflags);
#   - examples/embed.c and examples/embed_onnx.c (the ONNX importer, on
#     the small BERT export) build with `pkg-config dietcode` and run;
#   - they build again in a CMake project through find_package(dietcode)
#     and run;
#   - the installed dcc writes an object and header for examples/softmax.tex,
#     tests/aot/client.c links them with `pkg-config dcrt` alone and matches
#     the reference interpreter.
#   run.sh BUILD SRCDIR CC
# $DC_CLIENT_FLAGS, if set, goes to every compile and link (sanitizer builds).
set -eu
build=$1 src=$2 cc=$3
flags=${DC_CLIENT_FLAGS:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install failed"
for f in bin/dcc lib/libdcrt.a lib/libdietcode.a lib/pkgconfig/dietcode.pc \
         lib/pkgconfig/dcrt.pc lib/cmake/dietcode/dietcodeConfig.cmake \
         lib/cmake/dietcode/dietcodeConfigVersion.cmake include/dietcode/dietcode.h; do
    test -s "$prefix/$f" || fail "$f not installed"
done

# The rule on headers; vacuous where cc finds LLVM's headers by itself.
if echo '#include <llvm-c/Core.h>' | "$cc" -fsyntax-only -x c - 2>/dev/null; then
    echo "install: note: cc finds llvm-c/Core.h without -I, the header check proves less"
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
for h in "$prefix"/include/dietcode/*.h; do
    name=dietcode/$(basename "$h")
    extra=""
    [ "$name" = dietcode/codegen_llvm.h ] && extra=$(pkg-config --cflags dietcode)
    # shellcheck disable=SC2086
    echo "#include \"$name\"" | "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only \
        -I"$prefix/include" $extra -x c - || fail "$name does not compile alone"
done

# (a) pkg-config
cp "$src/examples/embed.c" "$work/embed.c"
# shellcheck disable=SC2046,SC2086
"$cc" $flags -std=c11 -Wall -Werror "$work/embed.c" -o "$work/embed_pc" \
    $(pkg-config --cflags --libs dietcode) || fail "embed.c does not build with pkg-config dietcode"
"$work/embed_pc" >/dev/null || fail "embed (pkg-config) failed"
model=$src/tests/onnx/exports/test_bert_dynamo/model.onnx
dims=batch=1..2,sequence=1..5
cp "$src/examples/embed_onnx.c" "$work/embed_onnx.c"
# shellcheck disable=SC2046,SC2086
"$cc" $flags -std=c11 -Wall -Werror "$work/embed_onnx.c" -o "$work/embed_onnx_pc" \
    $(pkg-config --cflags --libs dietcode) || fail "embed_onnx.c does not build with pkg-config dietcode"
"$work/embed_onnx_pc" "$model" "$dims" >/dev/null || fail "embed_onnx (pkg-config) failed"

# (b) find_package(dietcode)
mkdir "$work/cm"
cp "$work/embed.c" "$work/embed_onnx.c" "$work/cm/"
cat >"$work/cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(embed_client C)
find_package(dietcode 0.1 REQUIRED)
add_executable(embed embed.c)
target_link_libraries(embed PRIVATE dietcode::dietcode)
add_executable(embed_onnx embed_onnx.c)
target_link_libraries(embed_onnx PRIVATE dietcode::dietcode)
EOF
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/cm.log" 2>&1 ||
    { cat "$work/cm.log" >&2; fail "find_package(dietcode) failed"; }
grep -q "^dietcode_DIR:PATH=$prefix/lib/cmake/dietcode\$" "$work/cm/build/CMakeCache.txt" ||
    fail "find_package(dietcode) found another dietcode: $(grep '^dietcode_DIR' "$work/cm/build/CMakeCache.txt")"
cmake --build "$work/cm/build" >"$work/cm.log" 2>&1 ||
    { cat "$work/cm.log" >&2; fail "embed.c does not build with dietcode::dietcode"; }
"$work/cm/build/embed" >/dev/null || fail "embed (find_package) failed"
"$work/cm/build/embed_onnx" "$model" "$dims" >/dev/null || fail "embed_onnx (find_package) failed"

# (c) an AOT client of the installed dcc and libdcrt.a, no LLVM
case "$(pkg-config --libs dcrt)" in *LLVM* | *llvm*) fail "dcrt.pc names LLVM" ;; esac
"$prefix/bin/dcc" "$src/examples/softmax.tex" --emit=obj,header -o "$work/softmax" ||
    fail "installed dcc --emit=obj,header failed"
# shellcheck disable=SC2046,SC2086
"$cc" $flags -std=c11 -Wall -Wextra -Werror -DPROG_SOFTMAX -I"$work" "$src/tests/aot/client.c" \
    "$work/softmax.o" $(pkg-config --cflags --libs dcrt) -o "$work/client" ||
    fail "the AOT client does not build with pkg-config dcrt"
"$work/client" --errors || fail "AOT client --errors failed"
"$prefix/bin/dcc" run "$src/examples/softmax.tex" --target=reference --set T=77 \
    --output "P=$work/ref.npy" >/dev/null
"$work/client" 77 "$work/ref.npy" || fail "AOT client differs from the reference"
echo "install: ok"
