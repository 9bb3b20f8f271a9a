#!/bin/sh
# distributed.sh — runs of several processes under Open MPI's mpirun (run by tests/run.sh;
# docs/runtime.md §19).
#
# tests/native/checkpoint_train.tsr (it trains, saves two checkpoints and prints) is compiled
# once.  Under `mpirun --oversubscribe -np 2` it must print once (process 0) and write its
# checkpoints once (process 1, started in another directory, writes nothing); with
# --distributed=none both processes run alone and print; processes started with different seeds
# (MPMD) both stop with the agreement message and status 1, not a hang, as do two programs, and
# checkpoints of other run counters; one program compiled for two CPU levels runs; --check-replicas passes
# where the processes agree; --reduce=ordered is accepted; TSR_MPI_LIBRARY naming no library
# makes --distributed=mpi a clear error with status 1; the reference executor prints once too;
# --distributed=nccl where no GPU is needed (a CPU program, a missing NCCL, a bad timeout).
# tests/native/means_by_type.tsr averages gradients of each float type (bf16, f16, f64, f32).
# build/unit/dist_test runs under mpirun (its mean, ordered mean and agreement check).
# Every run has a time limit, so a hang fails.  Open MPI's own banners on stderr ("Primary job
# terminated normally, but 1 process returned a non-zero exit code") are tolerated: the checks
# look for the runtime's lines.
# Usage: distributed.sh TSRC BUILD_DIR.  Last line: "N passed, N failed".  Without mpirun every
# case fails (tools/bootstrap.sh installs openmpi-bin).
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BUILD=$(cd "$2" && pwd)
. "$(dirname "$0")/harness.sh"
harness_start distributed
# A case's outcome: fail shows the head of $T/log, here the run's stderr and stdout.
ok() { pass; }
bad() { cat "$T/err" "$T/out" >"$T/log" 2>/dev/null; fail "$1"; }
harness_mpi
MPIRUN="timeout 60 mpirun --oversubscribe"

if ! command -v mpirun >/dev/null 2>&1; then
    fail "mpirun is not installed (tools/bootstrap.sh installs openmpi-bin)"; finish; exit
fi
cp tests/native/checkpoint_train.tsr "$T/p.tsr"
if ! "$TSRC" "$T/p.tsr" -o "$T/p" >"$T/log" 2>&1; then
    fail "checkpoint_train.tsr does not compile"; finish; exit
fi
mkdir "$T/a" "$T/b"

# Two processes: one print of each tensor, the run's status 0.
(cd "$T/a" && $MPIRUN -np 2 ../p) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(grep -c '^w2 :' "$T/out")" = 1 ] && [ "$(grep -c '^predictions :' "$T/out")" = 1 ]; then ok
else bad "two processes print once (status $st)"; fi
# The same numbers as one process (the replicas run the same program on the same data).
(cd "$T/a" && timeout 60 ../p) >"$T/one" 2>>"$T/err"
if cmp -s "$T/out" "$T/one"; then ok; else bad "two processes print what one prints"; fi

# Checkpoints: process 0 (in a/) writes them, process 1 (in b/) writes nothing.
rm -f "$T"/a/*.npz "$T"/b/*.npz
$MPIRUN -np 1 --wdir "$T/a" "$T/p" --save all.npz : -np 1 --wdir "$T/b" "$T/p" --save all.npz >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ -s "$T/a/model.npz" ] && [ -s "$T/a/head.npz" ] && [ -s "$T/a/all.npz" ] && [ -z "$(ls "$T/b")" ]; then ok
else bad "process 0 alone writes the checkpoints (status $st; b/ holds: $(ls "$T/b"))"; fi

# --distributed=none: every process is a run of its own and prints.
(cd "$T/a" && $MPIRUN -np 2 ../p --distributed=none) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(grep -c '^w2 :' "$T/out")" = 2 ]; then ok; else bad "--distributed=none prints twice (status $st)"; fi

# Different seeds: the agreement check stops both processes, each with the message, status 1.
(cd "$T/a" && $MPIRUN -np 1 ../p --seed 1 : -np 1 ../p --seed 2) >"$T/out" 2>"$T/err"
st=$?
msg="the processes disagree on --seed: process 0 has 1, process 1 has 2; every process of a distributed run needs the same seed, options and data sizes"
if [ $st = 1 ] && grep -qxF "../p: error: process 0 of 2: $msg" "$T/err" && grep -qxF "../p: error: process 1 of 2: $msg" "$T/err" &&
   ! grep -q '^w2' "$T/out"; then ok
else bad "different seeds: both processes stop with the agreement message (status $st)"; fi
# An option's value.
(cd "$T/a" && $MPIRUN -np 1 ../p --steps 2 : -np 1 ../p --steps 3) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && [ "$(grep -c "disagree on option '--steps': process 0 has 2, process 1 has 3" "$T/err")" = 2 ]; then ok
else bad "different option values: both processes stop (status $st)"; fi

# Two programs (one more run of its routine a step): the agreement check compares the programs'
# hashes first, and both processes stop with "run different programs" before any collective
# call pairs the wrong steps (the runs printed wrong losses, then hung); the same program
# compiled for another CPU level and -O agrees.
sed 's/for b = 0 to 1 do run train done/for b = 0 to 1 do run train done; run train/' "$T/p.tsr" >"$T/q.tsr"
"$TSRC" "$T/q.tsr" -o "$T/q" >"$T/log" 2>&1 && "$TSRC" "$T/p.tsr" -o "$T/pv3" --cpu=x86-64-v3 -O1 >>"$T/log" 2>&1
(cd "$T/a" && $MPIRUN -np 1 ../p : -np 1 ../q) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && [ "$(grep -c "the processes run different programs: process 0's and process 1's were compiled from different code" "$T/err")" = 2 ] &&
   ! grep -q '^w2' "$T/out"; then ok
else bad "two programs: both processes stop with 'run different programs' (status $st)"; fi
(cd "$T/a" && $MPIRUN -np 1 ../p : -np 1 ../pv3) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && cmp -s "$T/out" "$T/one"; then ok; else bad "one program compiled for two CPU levels runs as one (status $st)"; fi
# A comment more and another file name are the same program.
{ echo '(* one more line *)'; cat "$T/p.tsr"; } >"$T/renamed.tsr"
"$TSRC" "$T/renamed.tsr" -o "$T/renamed" >"$T/log" 2>&1
(cd "$T/a" && $MPIRUN -np 1 ../p : -np 1 ../renamed) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && cmp -s "$T/out" "$T/one"; then ok; else bad "a comment and a file name do not make another program (status $st)"; fi

# --check-replicas where the replicas agree; --reduce=ordered.
(cd "$T/a" && $MPIRUN -np 2 ../p --check-replicas --reduce=ordered) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(grep -c '^w2 :' "$T/out")" = 1 ]; then ok; else bad "--check-replicas --reduce=ordered pass (status $st)"; fi
(cd "$T/a" && timeout 60 ../p --check-replicas --reduce=fast --distributed=auto) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ]; then ok; else bad "--check-replicas alone (status $st)"; fi
(cd "$T/a" && timeout 60 ../p --reduce=sum) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 2 ] && grep -qF "'--reduce' takes fast or ordered, not 'sum'" "$T/err"; then ok; else bad "--reduce=sum is refused (status $st)"; fi

# No MPI library: a clear message, status 1.
(cd "$T/a" && TSR_MPI_LIBRARY=/nonexistent timeout 60 ../p --distributed=mpi) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && grep -qF "../p: error: a distributed run needs an MPI library" "$T/err" && grep -qF "/nonexistent" "$T/err" &&
   [ ! -s "$T/out" ]; then ok
else bad "TSR_MPI_LIBRARY=/nonexistent --distributed=mpi (status $st)"; fi
# A library that is not Open MPI (libm has no ompi_mpi_comm_world).
(cd "$T/a" && TSR_MPI_LIBRARY=libm.so.6 timeout 60 ../p --distributed=mpi) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && grep -qF "supports only Open MPI's ABI" "$T/err"; then ok; else bad "a library that is not Open MPI (status $st)"; fi
# --distributed=mpi without a launcher: one process of MPI.
(cd "$T/a" && timeout 60 ../p --distributed=mpi) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && cmp -s "$T/out" "$T/one"; then ok; else bad "--distributed=mpi without mpirun (status $st)"; fi

# The reference executor goes through the same start: it prints once too.
(cd "$T/a" && $MPIRUN -np 2 "$TSRC" --run --interp ../p.tsr) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(grep -c '^w2 :' "$T/out")" = 1 ]; then ok; else bad "the reference executor prints once (status $st)"; fi

# Means of every float type (tests/native/means_by_type.tsr, its golden means_by_type.np2): bf16
# and f16 gradients averaged in f32 and rounded once to nearest even, f64 ones in f64, f32 ones in
# f32; the same bits with --reduce=ordered, in buckets that mix the types (--bucket-cells 6: the
# loss, ws.grad and wd.grad in one, wh.grad and wb.grad in another), and in the reference executor.
mkdir "$T/m"
src=$(pwd)/tests/native/means_by_type
if "${PYTHON:-/usr/bin/python3}" "$src.py" "$T/m" >"$T/log" 2>&1 && "$TSRC" "$src.tsr" -o "$T/m/means" >>"$T/log" 2>&1 &&
   "$TSRC" --bucket-cells 6 "$src.tsr" -o "$T/m/buckets" >>"$T/log" 2>&1; then
    for run in "./means" "./means --reduce=ordered" "./buckets" "./buckets --reduce=ordered" "$TSRC --run --interp $src.tsr"; do
        (cd "$T/m" && TSR_PRINT_EXACT=1 $MPIRUN -np 2 $run) >"$T/out" 2>"$T/err"
        st=$?
        if [ $st = 0 ] && cmp -s "$T/out" "$src.np2"; then ok
        else diff "$src.np2" "$T/out" >>"$T/err" 2>&1; bad "means of bf16, f16, f64 and f32 gradients: $run (status $st)"; fi
    done
else fail "means_by_type: its data or its executables"; fi

# The communicator's operations (tests/unit/dist_test.c) under two and three processes.
for n in 2 3; do
    $MPIRUN -np $n "$BUILD/unit/dist_test" >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 0 ] && grep -q '^[1-9][0-9]* passed, 0 failed$' "$T/out"; then ok; else bad "dist_test under $n processes (status $st)"; fi
done

# The NCCL engine (--distributed=nccl) where no GPU is needed: a CPU program is refused naming
# its target (alone, under mpirun, and in the reference executor), before NCCL is looked for;
# a --target=cuda program with TSR_NCCL_LIBRARY naming no library is the library's message,
# status 1 (alone and on both processes of mpirun); a misspelt engine is a usage error.  The
# means themselves need a GPU: tests/gpu/nccl.sh.
cpu_msg="--distributed=nccl averages gradients between NVIDIA GPUs, and this program was compiled for the CPU (its target is not cuda)"
(cd "$T/a" && TSR_NCCL_LIBRARY=/nonexistent timeout 60 ../p --distributed=nccl) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && grep -qxF "../p: error: $cpu_msg: compile it with --target=cuda, or run it with --distributed=mpi (or auto)" "$T/err" &&
   [ ! -s "$T/out" ]; then ok
else bad "a CPU program with --distributed=nccl is refused (status $st)"; fi
(cd "$T/a" && $MPIRUN -np 2 ../p --distributed=nccl) >"$T/out" 2>"$T/err"
st=$?
if [ $st != 0 ] && [ "$(grep -cF "../p: error: $cpu_msg" "$T/err")" = 2 ] && ! grep -q '^w2' "$T/out"; then ok
else bad "a CPU program with --distributed=nccl under mpirun: both processes refuse (status $st)"; fi
(cd "$T/a" && timeout 60 "$TSRC" --run --interp ../p.tsr -- --distributed=nccl) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && grep -qxF "tsrc: error: run time: $cpu_msg: compile it with --target=cuda, or run it with --distributed=mpi (or auto)" "$T/err"; then ok; else bad "the reference executor refuses --distributed=nccl (status $st)"; fi
(cd "$T/a" && timeout 60 ../p --distributed=ncl) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 2 ] && grep -qF "'--distributed' takes auto, mpi, nccl or none, not 'ncl'" "$T/err"; then ok
else bad "--distributed=ncl is a usage error (status $st)"; fi
if "$TSRC" --target=cuda "$T/p.tsr" -o "$T/g" >"$T/log" 2>&1; then
    lib_msg="../g: error: the NCCL engine (--distributed=nccl) needs NCCL's library (libnccl.so.2: NVIDIA's libnccl2 package, or lib/ of the Python package nvidia-nccl-cu12 or -cu13), and /nonexistent/libnccl.so.2 cannot be loaded (/nonexistent/libnccl.so.2: cannot open shared object file: No such file or directory); set TSR_NCCL_LIBRARY to its path, or use --distributed=mpi"
    (cd "$T/a" && TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2 timeout 60 ../g --distributed=nccl) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && grep -qxF "$lib_msg" "$T/err" && [ ! -s "$T/out" ]; then ok
    else bad "TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2 --distributed=nccl (status $st)"; fi
    (cd "$T/a" && TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2 $MPIRUN -x TSR_NCCL_LIBRARY -np 2 ../g --distributed=nccl) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st != 0 ] && [ "$(grep -cxF "$lib_msg" "$T/err")" = 2 ]; then ok
    else bad "a missing NCCL under mpirun: both processes say so (status $st)"; fi
    (cd "$T/a" && TSR_NCCL_TIMEOUT=0 timeout 60 ../g --distributed=nccl) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && grep -qF "../g: error: TSR_NCCL_TIMEOUT=0: it must be a number of seconds greater than 0" "$T/err"; then ok
    else bad "TSR_NCCL_TIMEOUT=0 is refused at the start (status $st)"; fi
else fail "checkpoint_train.tsr does not compile with --target=cuda"; fi

# tests/native/dist_train.tsr, in dt/ with its data: a constant table without batch axes is read
# whole by every process (it was split, and 4 numbers failed on two processes), so two processes
# of 2·2 samples print what one process of 2·4 prints — reading the same 8-row file, whose rows
# one process takes as its 2·4 samples as two do; --check-replicas passes although `correct`
# counts each process's own hits (working state is the process's own).
mkdir "$T/dt"
"${PYTHON:-/usr/bin/python3}" -c '
import sys, numpy as np
r = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", r.normal(size=(8, 3)).astype(np.float32))
np.save(sys.argv[1] + "/y.npy", np.sign(r.normal(size=(8, 1))).astype(np.float32))
np.save(sys.argv[1] + "/scale.npy", np.array([1, 2, 3, 4], np.float32))
np.save(sys.argv[1] + "/x9.npy", r.normal(size=(9, 3)).astype(np.float32))' "$T/dt" >"$T/log" 2>&1
sed 's/^let batch = 2$/let batch = 4/' tests/native/dist_train.tsr >"$T/dt/one.tsr"
if "$TSRC" tests/native/dist_train.tsr -o "$T/dt/two" >>"$T/log" 2>&1 && "$TSRC" "$T/dt/one.tsr" -o "$T/dt/one" >>"$T/log" 2>&1; then
    (cd "$T/dt" && timeout 60 ./one) >"$T/one" 2>"$T/err"
    (cd "$T/dt" && $MPIRUN -np 2 ./two --check-replicas) >"$T/out" 2>>"$T/err"
    st=$?
    if [ $st = 0 ] && [ -s "$T/one" ] && cmp -s "$T/out" "$T/one"; then ok
    else bad "a table without batch axes is not split; 2 processes of 2·2 print what 1 of 2·4 prints (status $st)"; fi

    # The agreement check covers the run's own options and what --load brings: --reduce,
    # --save and --check-replicas given to one process, and checkpoints that differ, stop both
    # with status 1 (they hung, or ran apart).
    # Process 0 runs ./two as it is, process 1 with the arguments given.
    one_apart() { (cd "$T/dt" && $MPIRUN -np 1 ./two : -np 1 ./two "$@") >"$T/out" 2>"$T/err"; }
    for case in "--reduce=ordered|disagree on --reduce: process 0 has fast, process 1 has ordered" \
                "--save s.npz|disagree on --save: process 1 was started with it and process 0 without" \
                "--check-replicas|disagree on --check-replicas: process 1 was started with it and process 0 without"; do
        extra=${case%%|*} want=${case#*|}
        # shellcheck disable=SC2086
        one_apart $extra
        st=$?
        if [ $st = 1 ] && [ "$(grep -cF "$want" "$T/err")" = 2 ] && ! grep -q '^epoch' "$T/out" && [ ! -e "$T/dt/s.npz" ]; then ok
        else bad "$extra on one process only: both stop at the start (status $st)"; fi
    done
    # A process that ends before the run (--help, a bad command line) or runs alone
    # (--distributed=none) among processes that run together: the others waited in MPI_Init until
    # mpirun's time ran out; now every process votes first, and all stop with status 2, process 0
    # saying which began otherwise (and one with a bad command line what it was).
    for case in "--help|process 0 runs, process 1 was asked for --help" \
                "--distributed=none|process 0 runs, process 1 was started with --distributed=none" \
                "--bogus|process 0 runs, process 1 has a bad command line"; do
        extra=${case%%|*} want=${case#*|}
        # shellcheck disable=SC2086
        one_apart $extra
        st=$?
        if [ $st = 2 ] && grep -qF "the processes began differently: $want" "$T/err" && ! grep -q '^epoch' "$T/out" &&
           { [ "$extra" != --bogus ] || grep -qF "error: process 1: unknown option '--bogus'" "$T/err"; }; then ok
        else bad "$extra on one process only: all stop at once, with status 2 (status $st)"; fi
    done
    # Two bad command lines that differ: each process says its own (the vote carries the message).
    (cd "$T/dt" && $MPIRUN -np 1 ./two --aaa : -np 1 ./two --bbb) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 2 ] && grep -qF "process 0 has a bad command line, process 1 has another bad command line" "$T/err" &&
       grep -qF "unknown option '--aaa'" "$T/err" && grep -qF "error: process 1: unknown option '--bbb'" "$T/err"; then ok
    else bad "two different bad command lines: each is said (status $st)"; fi
    # Every process alike: --help printed once, status 0; --distributed=none, each runs alone (of
    # the whole data: one's batch).
    (cd "$T/dt" && $MPIRUN -np 2 ./two --help) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 0 ] && [ "$(grep -c '^usage:' "$T/out")" = 1 ]; then ok; else bad "--help on every process: printed once (status $st)"; fi
    (cd "$T/dt" && $MPIRUN -np 2 ./one --distributed=none) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 0 ] && [ "$(grep -c '^epoch 3' "$T/out")" = 2 ]; then ok
    else bad "--distributed=none on every process: each runs alone (status $st)"; fi
    (cd "$T/dt" && timeout 60 ./one --save a.npz && timeout 60 ./one --seed 3 --save b.npz) >/dev/null 2>&1
    "${PYTHON:-/usr/bin/python3}" -c '
import sys, numpy as np
a = dict(np.load(sys.argv[1] + "/a.npz"))
name = sorted(k for k in a if a[k].dtype == np.float32 and a[k].size > 1)[0]
a[name] = a[name] + 1
np.savez(sys.argv[1] + "/c.npz", **a)' "$T/dt" >"$T/log" 2>&1
    (cd "$T/dt" && $MPIRUN -np 1 ./two --load a.npz : -np 1 ./two --load b.npz) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(grep -cF "disagree on the seed (--seed, or the one --load read): process 0 has 0, process 1 has 3" "$T/err")" = 2 ]; then ok
    else bad "checkpoints of other seeds on the two processes: both stop (status $st)"; fi
    (cd "$T/dt" && $MPIRUN -np 1 ./two --load a.npz : -np 1 ./two --load c.npz) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(grep -cF "disagree on the parameters they start from" "$T/err")" = 2 ] && ! grep -q '^epoch' "$T/out"; then ok
    else bad "checkpoints of other parameters on the two processes: both stop (status $st)"; fi
    # Another --bucket-cells is another program: its collective calls differ (the run hung).
    if "$TSRC" tests/native/dist_train.tsr -o "$T/dt/buckets" --bucket-cells 1 >"$T/log" 2>&1; then
        (cd "$T/dt" && $MPIRUN -np 1 ./two : -np 1 ./buckets) >"$T/out" 2>"$T/err"
        st=$?
        if [ $st = 1 ] && [ "$(grep -c "the processes run different programs" "$T/err")" = 2 ]; then ok
        else bad "another --bucket-cells is another program (status $st)"; fi
    else fail "dist_train.tsr compiles with --bucket-cells 1"; fi
    # A checkpoint whose run counter differs (the shuffles' too: the permutation a shuffle draws
    # must be one on every process, and the replicas alone would not show it).
    "${PYTHON:-/usr/bin/python3}" -c '
import sys, numpy as np
a = dict(np.load(sys.argv[1] + "/a.npz"))
a["tsrc.runs"] = a["tsrc.runs"] + 1
np.savez(sys.argv[1] + "/r.npz", **a)' "$T/dt" >"$T/log" 2>&1
    (cd "$T/dt" && $MPIRUN -np 1 ./two --load a.npz : -np 1 ./two --load r.npz) >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(grep -cF "disagree on the run counters (tsrc.runs and tsrc.shuffles)" "$T/err")" = 2 ] && ! grep -q '^epoch' "$T/out"; then ok
    else bad "checkpoints of other run counters on the two processes: both stop (status $st)"; fi

    # The reference executor whose start fails on one process (a data file of 9 samples): the run
    # ends (MPI_Abort), the message naming the process, instead of the other waiting forever.
    dt_src=$(pwd)/tests/native/dist_train.tsr
    (cd "$T/dt" && $MPIRUN -np 1 "$TSRC" --run --interp "$dt_src" : -np 1 "$TSRC" --run --interp "$dt_src" -- --data xs=x9.npy) \
        >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && grep -qF "tsrc: error: run time: process 1 of 2: data 'xs': a run of 2 processes needs 8 samples in x9.npy" "$T/err"; then ok
    else bad "the reference executor failing to start on one process ends the run (status $st)"; fi
else
    fail "dist_train.tsr does not compile, or its data"
fi

# --help and a bad command line under mpirun: said once, by the process the launcher numbers 0
# (before MPI starts: OMPI_COMM_WORLD_RANK); they were printed once per process.
(cd "$T/a" && $MPIRUN -np 2 ../p --help) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(grep -c '^usage: ' "$T/out")" = 1 ]; then ok; else bad "--help under mpirun prints once (status $st)"; fi
(cd "$T/a" && $MPIRUN -np 2 ../p --no-such-option) >"$T/out" 2>"$T/err"
st=$?
if [ $st != 0 ] && [ "$(grep -c "error: unknown option '--no-such-option'" "$T/err")" = 1 ]; then ok
else bad "a usage error under mpirun is said once (status $st)"; fi

finish
