#!/bin/sh
# resume.sh — training that resumes (run by tests/run.sh): tests/native/resume.tsr run for 6
# epochs prints what a run of 3 epochs (which saves resume.npz) and a fresh process started
# with `--load resume.npz --start 4` print together, bit for bit, with each executor and with
# the checkpoint of either; a checkpoint stripped to the parameters alone (as numpy.savez of a
# state_dict would hold) loads too but does not continue the run (so the optimiser's state and
# the run counters are what make the runs equal); the seed is saved and taken back unless the
# command line gives one; two shuffle statements of one item resume too, and draw permutations
# (and token windows) of their own.
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
# The seed is in the checkpoint (tsrc.seed, int64) and comes with the counters: a run trained
# with --seed 7 resumes without --seed as itself; a --seed on the resuming command line wins.
(cd "$T" && timeout 60 $TSRC "$PROG" -o seeded) >"$T/log" 2>&1
(cd "$T" && ./seeded --seed 7) >"$T/seed_whole.out" 2>"$T/log"
(cd "$T" && ./seeded --seed 7 --epochs 3 --save seeded.npz) >"$T/seed_first.out" 2>"$T/log"
"$PYTHON" -c "
import sys, numpy as np
f = np.load(sys.argv[1])
assert f['tsrc.seed'].dtype == np.int64 and f['tsrc.seed'].tolist() == [7], f['tsrc.seed']" "$T/seeded.npz" 2>"$T/log"
check "the checkpoint holds the run's seed as tsrc.seed, an int64" $?
(cd "$T" && ./seeded --start 4 --load seeded.npz) >"$T/seed_rest.out" 2>"$T/log"
cat "$T/seed_first.out" "$T/seed_rest.out" | cmp -s "$T/seed_whole.out" -
check "a run of --seed 7 resumed without --seed continues it: 3 epochs + load + 3 epochs = 6 epochs" $?
(cd "$T" && ./seeded --start 4 --load seeded.npz --seed 0) >"$T/seed_other.out" 2>"$T/log"
status=$?
[ $status = 0 ] && ! cat "$T/seed_first.out" "$T/seed_other.out" | cmp -s "$T/seed_whole.out" - &&
    ! cmp -s "$T/seed_rest.out" "$T/seed_other.out"
check "a --seed given with --load is the run's seed: another seed goes on as another run" $?
# Two shuffle statements of one data item, both in each epoch, and a token file's
# random windows drawn by two statements: every shuffle takes the group's next permutation (or
# windows), and 2 epochs + save + load + 2 epochs prints what 4 epochs print.
printf 'option start = 1\noption epochs = 4\ndata d = range ~b:[8] ~dtype:"i32"\nlet%%op w = { w = 1.; o = [1] }\nmain =\n  for e = start to epochs do shuffle d; print d; shuffle d; print d done\n' >"$T/twice.tsr"
(cd "$T" && timeout 60 $TSRC "$T/twice.tsr" -o twice) >"$T/log" 2>&1
(cd "$T" && ./twice) >"$T/twice_whole.out" 2>"$T/log"
(cd "$T" && ./twice --epochs 2 --save twice.npz) >"$T/twice_first.out" 2>"$T/log"
(cd "$T" && ./twice --start 3 --load twice.npz) >"$T/twice_rest.out" 2>"$T/log"
cat "$T/twice_first.out" "$T/twice_rest.out" | cmp -s "$T/twice_whole.out" -
check "two shuffles of one item an epoch: 2 epochs + save + load + 2 epochs = 4 epochs" $?
[ "$(sed -n 2p "$T/twice_whole.out")" != "$(sed -n 4p "$T/twice_whole.out")" ] &&
   [ "$(grep -c . "$T/twice_whole.out")" = 16 ] && [ "$(sed -n '2~2p' "$T/twice_whole.out" | sort -u | wc -l)" = 8 ]
check "each shuffle of the item takes a permutation of its own" $?
"$PYTHON" -c "
import sys, numpy as np
h = np.zeros(256, np.int32); h[:3] = (20240520, 1, 60)
open(sys.argv[1], 'wb').write(h.tobytes() + np.arange(60, dtype=np.uint16).tobytes())" "$T/t60.bin"
printf 'data r = tokens "t60.bin" ~b:[4] ~o:[5] ~windows:"random" ~seed:3\nlet%%op w = { w = 1.; o = [1] }\nmain = shuffle r; print r; shuffle r; print r\n' >"$T/windows.tsr"
(cd "$T" && timeout 60 $TSRC --run windows.tsr) >"$T/windows.out" 2>"$T/log"
[ $? = 0 ] && [ "$(sed -n 2,5p "$T/windows.out")" != "$(sed -n 7,10p "$T/windows.out")" ]
check "two statements drawing a token file's random windows draw different windows" $?
# Gradient accumulation saved halfway through a batch: the gradients' sums so far are training
# state (layer.w.grad in the checkpoint of every parameter), so micro-batches 0-2 + save + load
# + micro-batches 3-5 and the update give the parameters of one uninterrupted run; a Train.step
# program's gradients, zeroed first by every step, are not saved.
MICRO=$(pwd)/tests/native/resume_micro.tsr
for mode in native interp; do
    run=$(tsrc_run $mode)
    (cd "$T" && timeout 60 $run "$MICRO" -- --save micro_whole.npz &&
        timeout 60 $run "$MICRO" -- --last 2 --upd 0 --save micro_half.npz &&
        timeout 60 $run "$MICRO" -- --first 3 --load micro_half.npz --save micro_rest.npz) >"$T/log" 2>&1
    status=$?
    "$PYTHON" -c "
import sys, numpy as np
whole, half, rest = (np.load(f) for f in sys.argv[1:4])
assert 'layer.w.grad' in half.files and np.abs(half['layer.w.grad']).max() > 0, half.files
assert not np.array_equal(half['layer.w'], whole['layer.w'])
for k in whole.files:
    assert np.array_equal(whole[k], rest[k]), k" "$T/micro_whole.npz" "$T/micro_half.npz" "$T/micro_rest.npz" 2>>"$T/log"
    [ $status = 0 ] && [ $? = 0 ]
    check "$mode: 3 micro-batches + save + load + 3 micro-batches and the update = the uninterrupted run" $?
done
"$PYTHON" -c "
import sys, numpy as np
assert not [k for k in np.load(sys.argv[1]).files if k.endswith('.grad')]" "$T/native/resume.npz" 2>"$T/log"
check "a Train.step program's checkpoint holds no gradient" $?
# A parameter whose name would be a checkpoint's counter or its parameters' names (a layer bound
# to `tsrc` with a parameter `runs` or `parameters`) is renamed (tsrc.runs#2): the checkpoint holds both, and loads back.
printf 'let%%op mk () x = x + { runs = [5.; 7.] } + { parameters = [1.; 1.] }\nlet tsrc = mk ()\nlet%%op y = tsrc [1.; 2.]\nroutine r = y.forward\nmain = run r; save "named.npz"; load "named.npz"; print y\n' >"$T/named.tsr"
(cd "$T" && timeout 60 $TSRC --run named.tsr) >"$T/named.out" 2>"$T/log"
[ $? = 0 ] && grep -q "7 10" "$T/named.out" && "$PYTHON" -c "
import sys, numpy as np
f = np.load(sys.argv[1])
assert f['tsrc.runs#2'].tolist() == [5, 7] and f['tsrc.runs'].shape == (2,), f.files
assert f['tsrc.parameters#2'].tolist() == [1, 1] and f['tsrc.parameters'].dtype == np.uint8, f.files" "$T/named.npz" 2>>"$T/log"
check "a parameter named like a checkpoint's counter is renamed, saved and loaded back" $?
# A save past the file-size limit (ulimit -f) fails with a message and leaves no temporary (the
# default SIGXFSZ killed the program mid-save, leaving seeded.npz.tmp…).
mkdir "$T/limit"
(cd "$T/limit" && ulimit -f 1 && ../seeded --epochs 1 --save big.npz) >"$T/log" 2>&1
status=$?
[ $status = 1 ] && grep -q "cannot write checkpoint '.*': File too large" "$T/log" && [ -z "$(ls -A "$T/limit")" ]
check "a save past the file-size limit is an error that leaves no file" $?
# A carried gradient named like a parameter (w.grad, a layer's parameter `grad`) is w.grad#2 in the
# checkpoint, which the program loads back (the array was written twice, and refused).
(cd "$T" && timeout 60 $TSRC --run "$(dirname "$MICRO")/resume_grad_name.tsr") >"$T/log" 2>&1
[ $? = 0 ] && "$PYTHON" -c "
import sys, numpy as np
assert sorted(np.load(sys.argv[1]).files) == ['tsrc.parameters', 'tsrc.runs', 'tsrc.seed', 'w', 'w.grad', 'w.grad#2', 'w.grad.grad'], np.load(sys.argv[1]).files" "$T/gc.npz" 2>>"$T/log"
check "a carried gradient named like a parameter is saved under a name of its own, and loads back" $?
finish
