#!/bin/sh
# Installs the Debian packages dietcode-c needs, only those that are missing.
# Runs `apt-get update` at most once. Without root it only reports what is
# missing, so a developer's `make` never silently tries to use sudo.
#
#   scripts/install-deps.sh            build + test packages
#   scripts/install-deps.sh --bench    also the benchmark packages
#   scripts/install-deps.sh --bench-model
#                                      those, python3-venv, and PyTorch, numpy,
#                                      transformers, onnx, onnxscript and
#                                      onnxruntime from PyPI in .venv-model
#                                      (about 6 GB; bench/model.py, bench/onnx_models.py,
#                                      scripts/make-onnx-tests.py)
set -eu

pkgs="cmake make gcc g++ llvm-19-dev libcjson-dev libcmocka-dev llvm-19-tools \
libxgboost-dev clang-14 libclang-rt-14-dev zlib1g-dev libzstd-dev python3 pkg-config \
libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata libopenmpi-dev openmpi-bin"
case "${1:-}" in
--bench) pkgs="$pkgs libopenblas-dev libdnnl-dev" ;;
--bench-model) pkgs="$pkgs libopenblas-dev libdnnl-dev python3-venv python3-dev" ;;
esac

# The model benchmark's Python: a venv beside the sources, made once.
venv() {
    [ "${1:-}" = "--bench-model" ] || return 0
    dir="$(cd "$(dirname "$0")/.." && pwd)/.venv-model"
    if [ -x "$dir/bin/python" ] &&
        "$dir/bin/python" -c "import torch, numpy, transformers, onnx, onnxscript, onnxruntime" 2>/dev/null; then
        return 0
    fi
    echo "install-deps: creating $dir with PyTorch, numpy and ONNX's tools from PyPI (about 6 GB)" >&2
    python3 -m venv "$dir"
    # the versions bench/README.md's figures were measured with
    "$dir/bin/pip" install -q --disable-pip-version-check torch==2.15.0 numpy==2.4.6 \
        transformers==5.25.0 onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0
}

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    venv "${1:-}"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run 'make' as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
venv "${1:-}"
