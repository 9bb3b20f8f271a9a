#!/bin/sh
# transcendentals.sh — tsrc's own exp, log, tanh and sigmoid (compiler/ir/approx.c, cg/cg_approx.c):
# native code equals the reference executor bit for bit (run by tests/run.sh).
#   - tests/native/transcendentals.tsr compiled with -c for each CPU level this machine runs
#     (tests/host_cpus.sh: host, x86-64-v4, x86-64-v3) and driven by transcendentals_driver.c, which
#     compares every lane against approx.c's functions on special values and 16.8 million bit
#     patterns spread over all floats;
#   - the vector code calls no libm function for them (the --emit=asm of a vector loop of exp
#     has no call of expf, logf or tanhf), and its loop takes four vectors an iteration.
# Usage: transcendentals.sh TSRC LIBDIR (LIBDIR holds libtsr.a).  Last line: "N passed, N failed".
set -u
TSRC=$1
LIB=$2/libtsr.a
. "$(dirname "$0")/harness.sh"
harness_start transcendentals

for cpu in $(sh tests/host_cpus.sh native x86-64-v4 x86-64-v3); do
    if "$TSRC" -c --cpu="$cpu" tests/native/transcendentals.tsr -o "$T/transcendentals.o" >"$T/log" 2>&1 &&
       cc -std=c11 -O2 -Wall -Wextra -Werror -I"$T" -Iruntime -Icompiler tests/native/transcendentals_driver.c compiler/ir/approx.c \
          "$T/transcendentals.o" "$LIB" -lm -lpthread -o "$T/driver" >"$T/log" 2>&1; then
        "$T/driver" >"$T/log" 2>&1
        check "--cpu=$cpu: native exp, log, tanh and sigmoid equal the reference executor's" $?
    else
        fail "--cpu=$cpu: transcendentals.tsr compiles and links with transcendentals_driver.c"
    fi
done

"$TSRC" --emit=asm --cpu=x86-64-v3 -o "$T/transcendentals.s" tests/native/transcendentals.tsr >"$T/log" 2>&1
st=$?
if [ $st = 0 ] && grep -q 'vfmadd' "$T/transcendentals.s" && ! grep -Eq 'call.*(expf|logf|tanhf)' "$T/transcendentals.s"; then
    pass; echo "PASS the vector code computes exp, log and tanh inline (fused multiply-adds, no libm call)"
else
    echo "(exit $st)" >>"$T/log"
    fail "the vector code computes exp, log and tanh inline (fused multiply-adds, no libm call)"
fi
# The four results are one fused loop over x's 4099 cells; its vector body takes four vectors of
# cells an iteration (cg_loop_hints.c: the chains of operations side by side), so
# tanh's and sigmoid's divisions appear 8 times in one basic block (2 with one vector).
for cpu in x86-64-v4 x86-64-v3; do
    "$TSRC" --emit=asm --cpu=$cpu -o "$T/chains.s" tests/native/transcendentals.tsr >"$T/log" 2>&1
    st=$?
    most=$(awk '/^\.LBB/ { block = $1 } /vdivps/ { n[block]++ } END { m = 0; for (b in n) if (n[b] > m) m = n[b]; print m }' "$T/chains.s")
    if [ $st = 0 ] && [ "$most" = 8 ]; then
        pass; echo "PASS --cpu=$cpu: the loop of exp, log, tanh and sigmoid runs four vectors of cells an iteration"
    else
        echo "(exit $st; the most vdivps in one block: $most, 8 expected)" >>"$T/log"
        fail "--cpu=$cpu: the loop of exp, log, tanh and sigmoid runs four vectors of cells an iteration"
    fi
done
finish
