#!/bin/sh
# cmake.sh — find_package(tsrc) and tsrc_add_model (runtime/cmake/tsrcConfig.cmake), run by
# tests/run.sh:
#   - `make install` into a scratch prefix installs the CMake package;
#   - docs/examples/cmake/CMakeLists.txt (a copy, with the examples it names) configures against
#     that prefix, builds the MLP driver (tsrc runs at build time) and the driver prints what the
#     same driver built by hand with `tsrc -c` and cc prints;
#   - a second build with nothing changed runs nothing; after the .tsr file changes, tsrc runs
#     again; a C++-only project builds a model too; a bad TARGET is a configure error naming it.
# Usage: cmake.sh TSRC SAN (SAN: the Makefile's SAN, passed to make install).  Last line:
# "N passed, N failed".
set -u
TSRC=$1
SAN=${2:-}
. "$(dirname "$0")/harness.sh"
harness_start cmake

if ! command -v cmake >/dev/null 2>&1; then
    echo "SKIP cmake is not installed"
    finish
    exit $?
fi
make --no-print-directory install PREFIX="$T/prefix" SAN="$SAN" >"$T/log" 2>&1 &&
    [ -f "$T/prefix/lib/cmake/tsrc/tsrcConfig.cmake" ] && [ -x "$T/prefix/bin/tsrc" ]
check "make install puts the CMake package under PREFIX/lib/cmake/tsrc" $?

mkdir -p "$T/src/cmake"
cp docs/examples/cmake/CMakeLists.txt "$T/src/cmake/" && cp docs/examples/mlp_lib.tsr docs/examples/mlp_main.c "$T/src/"
cmake -S "$T/src/cmake" -B "$T/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 &&
    cmake --build "$T/build" >>"$T/log" 2>&1 && "$T/build/mlp_demo" >"$T/cmake.out" 2>>"$T/log"
check "docs/examples/cmake builds and runs the MLP driver with tsrc_add_model" $?

"$TSRC" -c --name=mlp docs/examples/mlp_lib.tsr -o "$T/mlp.o" >"$T/log" 2>&1 &&
    cc -I"$T" -Iruntime docs/examples/mlp_main.c "$T/mlp.o" "$(dirname "$TSRC")/libtsr.a" -lm -lpthread -ldl \
       -o "$T/by_hand" >>"$T/log" 2>&1 && "$T/by_hand" >"$T/hand.out" && cmp -s "$T/hand.out" "$T/cmake.out"
check "the CMake-built driver prints what the hand-built one prints" $?

cmake --build "$T/build" >"$T/again.log" 2>&1 && ! grep -q 'tsrc .*mlp_lib.tsr' "$T/again.log"
check "a second build with nothing changed does not run tsrc" $?
sleep 1
echo '(* changed *)' >>"$T/src/mlp_lib.tsr"
cmake --build "$T/build" >"$T/changed.log" 2>&1 && grep -q 'tsrc .*mlp_lib.tsr' "$T/changed.log"
check "a changed .tsr file runs tsrc again" $?

# A C++-only project (project(app CXX)): the model's library is archived by C++'s rules.
mkdir -p "$T/cxx"
cat >"$T/cxx/main.cpp" <<'CPP'
#include <cstdio>
#include "mlp.h"
int main() { mlp_state *s = mlp_create(7); int status = s ? 0 : 1; mlp_destroy(s); std::printf("created %d\n", status); return status; }
CPP
cat >"$T/cxx/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(cxxapp CXX)
find_package(tsrc REQUIRED)
tsrc_add_model(mlp SOURCE $T/src/mlp_lib.tsr)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE mlp)
CM
cmake -S "$T/cxx" -B "$T/cxx/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 &&
    cmake --build "$T/cxx/build" >>"$T/log" 2>&1 && [ "$("$T/cxx/build/app" 2>>"$T/log")" = "created 0" ]
check "tsrc_add_model in a C++-only project (project(app CXX)) builds and links" $?

mkdir -p "$T/bad"
cat >"$T/bad/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(bad C)
find_package(tsrc REQUIRED)
tsrc_add_model(m SOURCE $T/src/mlp_lib.tsr TARGET tpu)
CM
cmake -S "$T/bad" -B "$T/bad/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1
st=$?
[ $st != 0 ] && grep -q 'TARGET is cpu or cuda, not tpu' "$T/log"
check "TARGET tpu is a configure error naming it" $?
finish
