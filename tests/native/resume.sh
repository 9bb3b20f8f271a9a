#!/bin/sh
# resume.sh — training that resumes (run by tests/run.sh): tests/native/resume.tsr run for 6
# epochs prints what a run of 3 epochs (which saves resume.npz) and a fresh process started
# with `--load resume.npz --start 4` print together, bit for bit, with each executor and with
# the checkpoint of either; a checkpoint stripped to the parameters alone (as numpy.savez of a
# state_dict would hold) loads too but does not continue the run (so the optimiser's state and
# the run counters are what make the runs equal).
# Usage: resume.sh TSRC [PYTHON].  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
PYTHON=${2:-/usr/bin/python3}
PROG=$(pwd)/tests/native/resume.tsr
. "$(dirname "$0")/harness.sh"
harness_start resume
for mode in native interp; do
    run=$(tsrc_run $mode)
    mkdir "$T/$mode"
    (cd "$T/$mode" && timeout 60 $run "$PROG") >"$T/$mode/whole.out" 2>"$T/log"
    [ "$(wc -l <"$T/$mode/whole.out")" = 6 ]; check "$mode: 6 epochs in one run" $?
    (cd "$T/$mode" && timeout 60 $run "$PROG" -- --epochs 3) >"$T/$mode/first.out" 2>"$T/log"
    check "$mode: 3 epochs, saved" $?
done
cmp -s "$T/native/whole.out" "$T/interp/whole.out"; check "both executors print the same 6 epochs" $?
cmp -s "$T/native/resume.npz" "$T/interp/resume.npz"; check "both write the same checkpoint after 3 epochs" $?
for mode in native interp; do
    for file in native interp; do
        run=$(tsrc_run $mode)
        cp "$T/$file/resume.npz" "$T/load.npz"
        (cd "$T" && timeout 60 $run "$PROG" -- --start 4 --load load.npz) >"$T/rest.out" 2>"$T/log"
        cat "$T/$mode/first.out" "$T/rest.out" >"$T/joined.out"
        cmp -s "$T/$mode/whole.out" "$T/joined.out"
        check "$mode, the $file executor's checkpoint: 3 epochs + load + 3 epochs = 6 epochs" $?
    done
done
"$PYTHON" -c "
import sys, numpy as np
f = np.load(sys.argv[1])
kept = {k: f[k] for k in f.files if k.count('.') == 1 and not k.startswith('tsrc.')}
assert sorted(kept) == ['layer.b', 'layer.w', 'rest.b', 'rest.w'], sorted(kept)
np.savez(sys.argv[2], **kept)" "$T/native/resume.npz" "$T/params.npz" 2>"$T/log"
check "the checkpoint names the optimiser's state after its parameter (layer.w.m) beside the parameters" $?
(cd "$T" && timeout 60 $TSRC --run "$PROG" -- --start 4 --load params.npz) >"$T/rest.out" 2>"$T/log"
status=$?
cat "$T/native/first.out" "$T/rest.out" >"$T/joined.out"
[ $status = 0 ] && ! cmp -s "$T/native/whole.out" "$T/joined.out"
check "a checkpoint of the parameters alone loads, but does not continue the run" $?
finish
