#!/bin/sh
# cmake.sh — find_package(tsrc) and tsrc_add_model (runtime/cmake/tsrcConfig.cmake), run by
# tests/run.sh:
#   - `make install` into a scratch prefix installs the CMake package;
#   - docs/examples/cmake/CMakeLists.txt (a copy, with the examples it names) configures against
#     that prefix, builds the MLP driver (tsrc runs at build time) and the driver prints what the
#     same driver built by hand with `tsrc -c` and cc prints;
#   - a second build with nothing changed runs nothing; after the .tsr file changes, tsrc runs
#     again, and so after a module it opens changes (tsrc --depfile); find_package(tsrc 0.1)
#     finds the version file and 1.0 is refused; a C++-only project builds a model too; a bad
#     TARGET is a configure error naming it.
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

# model_project DIR LANGUAGE VERSION MODEL SOURCE APP: DIR/CMakeLists.txt of a project in LANGUAGE
# that finds tsrc (VERSION, or any) and links app, built from APP, with the model.
model_project() {
    cat >"$1/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(app $2)
find_package(tsrc $3 REQUIRED)
tsrc_add_model($4 SOURCE $5)
add_executable(app $6)
target_link_libraries(app PRIVATE $4)
CM
}

# A module the program opens from beside it is a dependency too (tsrc --depfile): editing it
# runs tsrc again, and the driver sees the new values.
mkdir -p "$T/dep"
printf 'let%%op k = { k = [ 1.; 2. ] }\n' >"$T/dep/consts.tsr"
printf 'open Consts\nlet%%op y = Consts.k *. 2.\nroutine go = y.forward\n' >"$T/dep/main.tsr"
cat >"$T/dep/app.c" <<'C'
#include <stdio.h>
#include "depm.h"
int main(void) { depm_state *s = depm_create(1); depm_go(s); printf("%g %d\n", depm_y(s)[0], (int)DEPM_Y_SIZE); depm_destroy(s); return 0; }
C
model_project "$T/dep" C 0.1 depm "$T/dep/main.tsr" app.c
cmake -S "$T/dep" -B "$T/dep/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 &&
    cmake --build "$T/dep/build" >>"$T/log" 2>&1 && [ "$("$T/dep/build/app" 2>>"$T/log")" = "2 2" ]
check "find_package(tsrc 0.1) (the version file) and a model that opens a module beside it" $?
sleep 1
printf 'let%%op k = { k = [ 10.; 20.; 30. ] }\n' >"$T/dep/consts.tsr"
cmake --build "$T/dep/build" >"$T/log" 2>&1 && [ "$("$T/dep/build/app" 2>>"$T/log")" = "20 3" ]
check "a changed module the program opens runs tsrc again (its depfile)" $?
mkdir -p "$T/old"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(old C)\nfind_package(tsrc 1.0 REQUIRED)\n' >"$T/old/CMakeLists.txt"
! cmake -S "$T/old" -B "$T/old/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 && grep -q 'version' "$T/log"
check "find_package(tsrc 1.0) is refused by tsrc 0.1 (the version file)" $?

# A C++-only project (project(app CXX)): the model's library is archived by C++'s rules.
mkdir -p "$T/cxx"
cat >"$T/cxx/main.cpp" <<'CPP'
#include <cstdio>
#include "mlp.h"
int main() { mlp_state *s = mlp_create(7); int status = s ? 0 : 1; mlp_destroy(s); std::printf("created %d\n", status); return status; }
CPP
model_project "$T/cxx" CXX "" mlp "$T/src/mlp_lib.tsr" main.cpp
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
sed 's/tsrc_add_model(m SOURCE \(.*\) TARGET tpu)/tsrc_add_model(my-model SOURCE \1)/' "$T/bad/CMakeLists.txt" >"$T/bad/c" &&
    mv "$T/bad/c" "$T/bad/CMakeLists.txt" && rm -rf "$T/bad/build"
cmake -S "$T/bad" -B "$T/bad/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1
st=$?
[ $st != 0 ] && grep -q 'tsrc_add_model(my-model): the name is the module' "$T/log"
check "a NAME that is not a C identifier (my-model) is a configure error, not a build error" $?
# Ninja, in a project of cmake_minimum_required 3.16 (policy CMP0116 OLD there), with a module
# opened from a relative -I directory of OPTIONS (resolved against the source directory, as
# SOURCE is): a second build runs nothing (Ninja wanted the depfile's paths relative to the build
# directory, and ran tsrc at every build), and a changed module runs tsrc again.
if command -v ninja >/dev/null 2>&1; then
    mkdir -p "$T/nj/inc dir"
    printf 'let%%op k = { k = [ 1.; 2. ] }\n' >"$T/nj/inc dir/consts.tsr"
    printf 'open Consts\nlet%%op y = Consts.k *. 2.\nroutine go = y.forward\n' >"$T/nj/main.tsr"
    sed 's/depm/njm/g; s/DEPM/NJM/g' "$T/dep/app.c" >"$T/nj/app.c"
    cat >"$T/nj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(tsrc REQUIRED)
tsrc_add_model(njm SOURCE main.tsr OPTIONS -I "inc dir")
add_executable(app app.c)
target_link_libraries(app PRIVATE njm)
CM
    cmake -G Ninja -S "$T/nj" -B "$T/nj/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 &&
        cmake --build "$T/nj/build" >>"$T/log" 2>&1 && [ "$("$T/nj/build/app" 2>>"$T/log")" = "2 2" ]
    check "Ninja: a model opening a module from a relative -I directory of OPTIONS builds" $?
    cmake --build "$T/nj/build" >"$T/log" 2>&1 && grep -q "no work to do" "$T/log"
    check "Ninja under cmake_minimum_required 3.16: a second build runs nothing" $?
    sleep 1
    printf 'let%%op k = { k = [ 10.; 20.; 30. ] }\n' >"$T/nj/inc dir/consts.tsr"
    cmake --build "$T/nj/build" >"$T/log" 2>&1 && [ "$("$T/nj/build/app" 2>>"$T/log")" = "20 3" ]
    check "Ninja: a changed module of an -I directory runs tsrc again" $?
else
    echo "SKIP ninja is not installed (the Ninja generator's checks)"
fi
finish
