#!/bin/sh
# run.sh — the second half of `make check-gpu`: runs the cases that tests/gpu/prepare.sh built
# and compares each one's output with the reference executor's (tests/gpu/compare.py: text
# equal, integers exact, other numbers within 1e-5 relative, or
# prepare.sh's tolerances.txt for programs on the tensor cores).  Needs only sh, coreutils'
# timeout, python3 and the CUDA driver: no tsrc, no compiler.
#
# Usage: sh tests/gpu/run.sh OUTDIR      (run from anywhere; it runs the cases from the
#                                         repository root, where their data paths point)
#
# Each case runs as TSR_PRINT_EXACT=1 OUTDIR/bin/NAME ARGS (GPU_TEST_TIMEOUT seconds, default
# 120), with TSR_CUDA_GRAPHS=1 (its routines' runs of kernels as CUDA graphs, which the driver
# must make; TSR_CUDA_GRAPHS=0 in the environment checks the kernels launched one at a time);
# its stdout goes to OUTDIR/actual/NAME.out.  One line per case, PASS or FAIL (with the
# first differences or the program's messages), then "N passed, N failed"; exit status 1 when a
# case failed, 0 when all passed.  When the first case to run fails with a message about the
# CUDA driver or a missing GPU (libcuda.so.1 not found, no CUDA device…), the machine has no
# GPU: run.sh says so on a line "SKIP: no GPU …" and exits 2 without counting anything.
set -u

if [ $# -ne 1 ]; then
    echo "usage: sh tests/gpu/run.sh OUTDIR" >&2
    exit 2
fi
OUT=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no directory $1" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COMPARE=$ROOT/tests/gpu/compare.py
PY=${PYTHON:-python3}
TIMEOUT=${GPU_TEST_TIMEOUT:-120}
GRAPHS=${TSR_CUDA_GRAPHS:-1}
if [ ! -f "$OUT/cases.txt" ]; then
    echo "run.sh: no $OUT/cases.txt: run tests/gpu/prepare.sh first" >&2
    exit 2
fi
cd "$ROOT" || exit 2
. tools/gpu_bin.sh
unpack_bin "$OUT" "$PY" || { echo "run.sh: cannot unpack $OUT/bin.tar.xz" >&2; exit 2; }
mkdir -p "$OUT/actual"
passed=0
failed=0
first=1
TAB=$(printf '\t')

pass() { passed=$((passed + 1)); echo "PASS $1"; }
# The relative tolerance of case $1: prepare.sh's tolerances.txt (tensor-core programs), else 1e-5.
tolerance() {
    t=$(awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$OUT/tolerances.txt" 2>/dev/null)
    echo "${t:-1e-5}"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL $1${2:+ ($2)}"
    if [ -n "${3:-}" ] && [ -s "$3" ]; then sed -n '1,12s/^/    /p' "$3"; fi
}

while IFS="$TAB" read -r name exe expected args; do
    [ -n "$name" ] || continue
    if [ "$exe" = - ]; then
        fail "$name" "not built: see prepare.sh's output"
        continue
    fi
    actual=$OUT/actual/$name.out
    err=$OUT/actual/$name.err
    args=$(printf '%s' "$args" | sed "s|@OUT@|$OUT|g")
    # shellcheck disable=SC2086
    TSR_CUDA_GRAPHS=$GRAPHS TSR_PRINT_EXACT=1 timeout "$TIMEOUT" "$OUT/$exe" $args >"$actual" 2>"$err" </dev/null
    rc=$?
    if [ $first = 1 ] && [ $rc -ne 0 ] &&
        grep -qiE 'libcuda|cuda driver|no cuda|cuda device|no gpu|CUDA_ERROR_NO_DEVICE|cuInit' "$err" "$actual"; then
        echo "SKIP: no GPU: the first case ($name) could not use one; nothing was tested:"
        sed -n '1,5s/^/    /p' "$err"
        exit 2
    fi
    first=0
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        fail "$name" "timed out after $TIMEOUT s" "$err"
    elif [ $rc -ne 0 ]; then
        fail "$name" "exit $rc, expected 0" "$err"
    elif "$PY" "$COMPARE" --rel-tol "$(tolerance "$name")" "$OUT/$expected" "$actual" 2>"$OUT/actual/$name.diff"; then
        pass "$name"
    else
        fail "$name" "output differs from the reference executor's ($expected)" "$OUT/actual/$name.diff"
    fi
done <"$OUT/cases.txt"

if [ $((passed + failed)) = 0 ]; then
    echo "run.sh: $OUT/cases.txt lists no cases" >&2
    exit 2
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
