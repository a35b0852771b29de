#!/usr/bin/env bash
# Installs the Debian packages remat needs when they are missing: as root
# with apt-get, otherwise it prints the exact command and fails.
set -eu
pkgs="build-essential pkg-config libxml2-dev libopenblas-dev check python3 python3-numpy python3-torch clang libclang-rt-14-dev valgrind libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm librsvg2-bin mpich libmpich-dev help2man cmake python3-pip python3-setuptools python3-wheel"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$missing >/dev/null
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run: sudo apt-get install -y$missing" >&2
    exit 1
fi
