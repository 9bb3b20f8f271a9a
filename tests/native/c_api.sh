#!/bin/sh
# c_api.sh — the C interface of generated objects under misuse (run by tests/run.sh):
#   - null_state.c: every header function and runtime entry point given a NULL state;
#   - the generated header states the thread-safety and NULL rules;
#   - image_flip.c: damaged model images (every single-bit flip, random changes, truncation)
#     are refused by tsr_state_create.
# Usage: c_api.sh TSRC LIBDIR (LIBDIR holds libtsr.a).  One PASS/FAIL line per check; the last
# line is "N passed, N failed".
set -u
TSRC=$1
LIB=$2/libtsr.a
INC=runtime
T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-capi.XXXXXX")
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "$T/log" ] && sed -n '1,15s/^/    /p' "$T/log"; }

# A driver's own checks: its PASS/FAIL lines are ours, its summary is added in.
# driver NAME: compile tests/native/NAME.c against affine, run it.
driver() {
    if cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC "tests/native/$1.c" "$T/affine.o" "$LIB" -lm -lpthread \
          -o "$T/$1" >"$T/log" 2>&1; then
        # Under a memory and a time limit: a damaged image that is not refused may ask for
        # gigabytes (a flipped bit in a dimension).
        (ulimit -v 1048576; exec timeout 120 "$T/$1") >"$T/$1.out" 2>&1
        st=$?
        grep -E '^(PASS|FAIL) ' "$T/$1.out"
        p=$(sed -n 's/^\([0-9]*\) passed, [0-9]* failed$/\1/p' "$T/$1.out" | tail -n 1)
        f=$(sed -n 's/^[0-9]* passed, \([0-9]*\) failed$/\1/p' "$T/$1.out" | tail -n 1)
        if [ -z "$p" ] || { [ $st != 0 ] && [ "${f:-0}" = 0 ]; }; then
            cp "$T/$1.out" "$T/log"
            fail "$1 ran to its end (status $st)"
        fi
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0}))
    else
        fail "$1.c compiles against affine.h"
    fi
}

if "$TSRC" -c tests/native/affine.tsr -o "$T/affine.o" >"$T/log" 2>&1; then
    pass "tsrc -c tests/native/affine.tsr"
    if grep -q "must not be used by two threads at once" "$T/affine.h" && grep -q "the state" "$T/affine.h" &&
       grep -q "accessors return NULL" "$T/affine.h"; then pass "the header states the thread-safety and NULL rules"
    else fail "the header states the thread-safety and NULL rules"; fi
    driver null_state
    driver image_flip
else
    fail "tsrc -c tests/native/affine.tsr"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
