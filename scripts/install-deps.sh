#!/bin/sh
# Installs the Debian packages dietcode-c needs, only those that are missing.
# Runs `apt-get update` at most once. Without root it only reports what is
# missing, so a developer's `make` never silently tries to use sudo.
#
#   scripts/install-deps.sh            build + test packages
#   scripts/install-deps.sh --bench    also the benchmark packages
set -eu

pkgs="cmake make gcc g++ llvm-19-dev libcjson-dev libcmocka-dev llvm-19-tools \
libxgboost-dev clang-14 libclang-rt-14-dev zlib1g-dev libzstd-dev python3 pkg-config"
if [ "${1:-}" = "--bench" ]; then
    pkgs="$pkgs libopenblas-dev libdnnl-dev"
fi

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

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
