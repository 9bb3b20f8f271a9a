#!/bin/sh
# profile.sh — tsrc --profile (docs/runtime.md §17), run by tests/run.sh:
#   - an executable built with --profile prints exactly what one built without it prints
#     (stdout), and when main ends a table of its kernels (stderr) whose launch counts are the
#     program's: every kernel of `train` launched once per step (40 epochs x 20 batches of
#     docs/examples/train_moons.tsr), every kernel of `evaluate` once per epoch; labels name the
#     routine, the kernel's number and the tensors it writes;
#   - with TSR_PROFILE_ALL=1 every kernel has its line, none summed;
#   - -c --profile: the header declares MODEL_profile_report() and MODEL_profile_reset(); a C
#     driver runs, resets the counters, runs again and gets the table of the runs after the
#     reset; without --profile the header has no such function;
#   - --target=cuda --profile: the object's routines wait for each launch
#     (tsr_gpu_profile_wait) and it exports MODEL_profile_report(); without --profile neither;
#     the executable without a driver exits 1 with the driver's message (the timings themselves
#     are checked on a GPU by make check-gpu's examples__train_moons_profile);
#   - --profile with --interp, with --emit=ptx or with --check is a usage error (exit 2).
# Usage: profile.sh TSRC LIBDIR (LIBDIR holds libtsr.a).  Last line: "N passed, N failed".
set -u
TSRC=$1
LIB=$2/libtsr.a
. "$(dirname "$0")/harness.sh"
harness_start profile

moons=docs/examples/train_moons.tsr
"$TSRC" "$moons" -o "$T/plain" >"$T/log" 2>&1 && "$TSRC" --profile "$moons" -o "$T/prof" >>"$T/log" 2>&1 &&
    "$T/plain" >"$T/plain.out" 2>"$T/plain.err" && "$T/prof" >"$T/prof.out" 2>"$T/prof.err"
check "--profile builds and runs train_moons.tsr" $?
cmp -s "$T/plain.out" "$T/prof.out"
check "a profiled executable prints what the unprofiled one prints" $?
[ ! -s "$T/plain.err" ] && grep -q '^profile of prof: .* ms in [0-9]* launches of [0-9]* kernels' "$T/prof.err"
check "the profile goes to stderr when main ends, and only with --profile" $?
# Launch counts: 800 for every kernel of train, 40 for every kernel of evaluate (the lines of
# kernels under 0.1 % are summed, so only the listed ones are checked).
awk 'NR > 2 && $5 == "train" { if ($3 != 800) bad = 1; n++ }
     NR > 2 && $5 == "evaluate" { if ($3 != 40) bad = 1; m++ }
     END { exit (bad || n < 5 || m < 1) }' "$T/prof.err"
check "each kernel's launches are its routine's runs (train 800, evaluate 40)" $?
grep -Eq '^ +[0-9.]+ +[0-9.]+% +800 +[0-9.]+  train #[0-9]+  writes .*w1\.grad' "$T/prof.err"
check "a kernel's label names its routine, its number and the tensors it writes" $?
# TSR_PROFILE_ALL=1: every kernel has its line (the header's "of N" of them), none summed.
TSR_PROFILE_ALL=1 "$T/prof" >/dev/null 2>"$T/all.err"
kernels=$(sed -n '1s/.* launches of \([0-9]*\) kernels.*/\1/p' "$T/all.err")
listed=$(awk 'NR > 2' "$T/all.err" | wc -l)
[ -n "$kernels" ] && [ "$listed" -eq "$kernels" ] && ! grep -q 'kernels under 0.1 %' "$T/all.err" &&
    grep -q 'kernels under 0.1 %' "$T/prof.err"
check "TSR_PROFILE_ALL=1 lists every kernel ($listed of ${kernels:-?}); without it the small ones are summed" $?

"$TSRC" -c --profile tests/native/affine.tsr -o "$T/affine.o" >"$T/log" 2>&1 &&
    grep -q '^void affine_profile_report(void);' "$T/affine.h" && grep -q '^void affine_profile_reset(void);' "$T/affine.h"
check "-c --profile: the header declares affine_profile_report() and affine_profile_reset()" $?
cat >"$T/drive.c" <<'C'
#include "affine.h"
int main(void) {
    affine_state *s = affine_create(1);
    if (!s) return 1;
    for (int i = 0; i < 3; i++)
        if (affine_predict(s) != TSR_OK) return 1;
    affine_profile_reset(); /* the runs before are not counted */
    for (int i = 0; i < 2; i++)
        if (affine_predict(s) != TSR_OK) return 1;
    affine_destroy(s);
    affine_profile_report();
    return 0;
}
C
cc -std=c11 -Wall -Wextra -Werror -I"$T" -Iruntime "$T/drive.c" "$T/affine.o" "$LIB" -lm -lpthread -o "$T/drive" >"$T/log" 2>&1 &&
    "$T/drive" 2>"$T/drive.err" && grep -q '^profile of affine: .* ms in [0-9]* launches' "$T/drive.err" &&
    awk 'NR > 2 && $5 == "predict" { if ($3 != 2) bad = 1; n++ } END { exit (bad || n < 1) }' "$T/drive.err"
check "a C driver's call of affine_profile_report() prints the table (2 runs after affine_profile_reset(), 2 launches each)" $?
# States on four threads at once add to the same counters: each kernel's launches are every
# thread's (they were a load and a store each, and lost counts).
cat >"$T/threads.c" <<'C'
#include <pthread.h>
#include "affine.h"
enum { RUNS = 200000 };
static void *run(void *unused) {
    (void)unused;
    affine_state *s = affine_create(1);
    for (int i = 0; s && i < RUNS; i++) affine_predict(s);
    affine_destroy(s);
    return 0;
}
int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, run, 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    affine_profile_report();
    return 0;
}
C
cc -std=c11 -Wall -Wextra -Werror -I"$T" -Iruntime "$T/threads.c" "$T/affine.o" "$LIB" -lm -lpthread -o "$T/threads" >"$T/log" 2>&1 &&
    TSR_NUM_THREADS=1 "$T/threads" 2>"$T/threads.err" &&
    awk 'NR > 2 && $5 == "predict" { if ($3 != 800000) bad = 1; n++ } END { exit (bad || n < 1) }' "$T/threads.err"
check "states on four threads count every launch (800000 each kernel)" $?
"$TSRC" -c tests/native/affine.tsr -o "$T/plain_affine.o" >"$T/log" 2>&1 && ! grep -q 'profile_report' "$T/plain_affine.h"
check "without --profile the header has no profile_report" $?

mkdir -p "$T/gpu"
"$TSRC" -c --target=cuda --profile tests/native/affine.tsr -o "$T/gpu/affine.o" >"$T/log" 2>&1 &&
    nm "$T/gpu/affine.o" | grep -q ' U tsr_gpu_profile_wait$' && nm "$T/gpu/affine.o" | grep -q ' T affine_profile_report$' &&
    grep -q '^void affine_profile_report(void);' "$T/gpu/affine.h"
check "-c --target=cuda --profile: the routines wait for each launch, affine_profile_report() exported" $?
"$TSRC" -c --target=cuda tests/native/affine.tsr -o "$T/gpu_plain.o" >"$T/log" 2>&1 &&
    ! nm "$T/gpu_plain.o" | grep -q 'tsr_gpu_profile_wait\|profile_report'
check "-c --target=cuda without --profile: no waits, no profile_report" $?
"$TSRC" --target=cuda --profile "$moons" -o "$T/gpu_prof" >"$T/log" 2>&1 &&
    { TSR_CUDA_DRIVER="$T/none/libcuda.so.1" "$T/gpu_prof" >"$T/gpu.out" 2>"$T/gpu.err"; [ $? = 1 ]; } &&
    grep -q "no CUDA driver: cannot load $T/none/libcuda.so.1" "$T/gpu.err" && [ ! -s "$T/gpu.out" ]
check "--target=cuda --profile builds an executable; without a driver it exits 1 with the message" $?

for bad in "--run --interp" "--emit=ptx" "--check"; do
    # shellcheck disable=SC2086
    "$TSRC" --profile $bad "$moons" -o "$T/x" >"$T/log" 2>&1
    st=$?
    [ $st = 2 ] && grep -q "'--profile'" "$T/log"
    check "--profile $bad is a usage error (exit $st)" $?
done
finish
