#!/bin/sh
# bootstrap.sh — install what a fresh Debian 12 machine lacks to build and test tsrc.
# Run by `make` / `make check` when a tool is missing; safe to run again (installs nothing
# when everything is present).  Needs root (or sudo) for apt-get.  `bootstrap.sh ci` (.ci/run)
# also installs PyTorch (python3-torch, about 900 MB), so that CI runs the round trips of
# tests/python/weights.py through torch.nn, which make check skips without it.
set -eu

missing=""
need() { # need COMMAND-OR-TEST PACKAGE
    if ! sh -c "$1" >/dev/null 2>&1; then missing="$missing $2"; fi
}
need "command -v re2c"                         re2c
need "command -v lemon"                        lemon
need "command -v llvm-config-19"               llvm-19-dev
need "/usr/bin/python3 -c 'import numpy'"      python3-numpy
need "command -v clang"                        clang
need "command -v c++"                          g++
need "command -v pkg-config"                   pkgconf
need "command -v cmake"                        cmake
need "/usr/bin/python3 -c 'import ensurepip'"  python3-venv
need "command -v mpirun"                       openmpi-bin  # tests/native/distributed.sh; brings libmpi.so.40
need "test -e /usr/share/i18n/locales/de_DE"   locales      # tests/unit/data_test.c makes a German locale
need "test -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a || ! command -v clang-14" libclang-rt-14-dev
if [ "${1:-}" = ci ]; then
    need "/usr/bin/python3 -c 'import torch'" python3-torch
fi

if [ -z "$missing" ]; then
    exit 0
fi

echo "bootstrap: installing missing packages:$missing"
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "bootstrap: not root and no sudo; please run as root:" >&2
    echo "    apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "bootstrap: apt-get update"
$SUDO apt-get update -q >/dev/null
echo "bootstrap: apt-get install -y$missing"
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
echo "bootstrap: done"
