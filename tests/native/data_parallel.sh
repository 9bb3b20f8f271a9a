#!/bin/sh
# data_parallel.sh — data-parallel training on two processes under Open MPI (run by tests/run.sh;
# docs/runtime.md, "Training on several processes").
#
# The MLP of docs/examples/digits.tsr and the LeNet of docs/examples/lenet.tsr (and, below, the
# MLP with f64 and bf16 parameters and the GPT of docs/examples/gpt.tsr at a small size, on
# token files), each compiled twice from its own text: once as shipped (batches of 30, one
# process) and once with batches of 15, run by `mpirun -np 2` on the same files.  The split rule gives process r the samples r,
# r + 2, … of the file (a sample is one index of the batch axes: an image), so process 0's batch
# i and process 1's batch i are the even and the odd images of the one-process batch i.
# Train.step averages the gradients and the loss across the ranks, so:
#   - the two ranks hold the same parameters, bit for bit (--check-replicas), after every epoch;
#   - the losses printed (by rank 0 alone, once) equal the one-process losses to 1e-6 relative,
#     the test accuracies are the same, and rank 0's checkpoint holds the one-process parameters
#     to 1e-5;
#   - the reference executor under mpirun prints what the native executable prints, bit for bit;
#   - with --reduce=ordered, two runs print the same bytes;
#   - killing one rank mid-run ends the other, and mpirun, with a non-zero status within 30 s.
# Usage: data_parallel.sh TSRC [PYTHON].  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
PYTHON=${2:-/usr/bin/python3}
ROOT=$(pwd)
. "$(dirname "$0")/harness.sh"
harness_start data_parallel
if ! command -v mpirun >/dev/null 2>&1; then
    fail "mpirun is missing (tools/bootstrap.sh installs Debian's openmpi-bin)"
    finish
    exit
fi
# Open MPI wants slots for two processes on a small machine (--oversubscribe).
harness_mpi
MPIRUN="mpirun --oversubscribe -np 2"

"$PYTHON" tools/digits.py "$T" >"$T/log" 2>&1; check "tools/digits.py writes the digits" $?
mkdir "$T/one" "$T/two"
cp "$T"/digits_*.npy "$T/one/"
cp "$T"/digits_*.npy "$T/two/"

# The losses and accuracies of two outputs: the same count of lines, losses within 1e-6
# relative, accuracies equal.
same_losses() {
    "$PYTHON" -c "
import re, sys
a, b = (open(f).read().split('\n') for f in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 2, (len(a), len(b))
for x, y in zip(a, b):
    if not x: continue
    la, lb = (float(re.search(r'loss (\S+)', l).group(1)) for l in (x, y))
    assert abs(la - lb) <= 1e-6 * abs(la), (x, y)
    assert x.split('test')[1] == y.split('test')[1], (x, y)
" "$1" "$2" 2>"$T/log"
}

for example in digits lenet; do
    # Nine digits of the loss, and the two-process copy's batches of 15.
    sed -e 's/loss %\.4f/loss %.9g/' "$ROOT/docs/examples/$example.tsr" >"$T/$example.tsr"
    sed -e 's/^let batch = 30$/let batch = 15/' "$T/$example.tsr" >"$T/${example}2.tsr"
    grep -q '^let batch = 15$' "$T/${example}2.tsr"; check "$example: the copy of batches of 15" $?
    "$TSRC" "$T/$example.tsr" -o "$T/one/$example" 2>"$T/log" && "$TSRC" "$T/${example}2.tsr" -o "$T/two/$example" 2>"$T/log"
    check "$example: both programs compile" $?
    (cd "$T/one" && timeout 120 "./$example" --save one.npz) >"$T/$example.one" 2>"$T/log"
    check "$example: one process, batches of 30" $?
    (cd "$T/two" && timeout 120 $MPIRUN "./$example" --save two.npz --check-replicas) >"$T/$example.two" 2>"$T/log"
    check "$example: two processes, batches of 15: the ranks agree bit for bit (--check-replicas)" $?
    same_losses "$T/$example.one" "$T/$example.two"
    check "$example: rank 0 alone prints, the losses of one process to 1e-6, the same accuracies" $?
    "$PYTHON" -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files)
for k in a.files:
    if a[k].dtype.kind == 'f':
        assert np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6), (k, np.abs(a[k] - b[k]).max())
" "$T/one/one.npz" "$T/two/two.npz" 2>"$T/log"
    check "$example: rank 0's checkpoint holds the one-process parameters (1e-5)" $?
done

# The MLP with f64 and with bf16 parameters (mlp ~dtype; the loss summed in a state tensor of the
# network's type for f64), one process against two.  An f64 gradient's mean is taken in f64, so
# the losses and rank 0's checkpoint are one process's to 1e-12 (a mean in f32 would be 1e-7 off);
# a bf16 one in f32 and rounded once, and each process rounded its half of the batch's gradient
# to bf16 before the mean, so the losses are one process's to 1 % and the test accuracies to one
# image in a hundred; both keep the ranks' replicas equal, and --reduce=ordered prints the same
# bytes twice.
for dtype in f64 bf16; do
    sed -e "s/mlp ~hidden/mlp ~dtype:\"$dtype\" ~hidden/" -e 's/loss %\.4f/loss %.17g/' "$ROOT/docs/examples/digits.tsr" >"$T/d_$dtype.tsr"
    [ $dtype = f64 ] && sed -i -e 's/{ epoch_loss = 0\.; o = \[1\] }/{ epoch_loss = 0.; o = [1]; dtype = "f64" }/' "$T/d_$dtype.tsr"
    sed -e 's/^let batch = 30$/let batch = 15/' "$T/d_$dtype.tsr" >"$T/d2_$dtype.tsr"
    grep -q "dtype:\"$dtype\"" "$T/d_$dtype.tsr" && "$TSRC" "$T/d_$dtype.tsr" -o "$T/one/d_$dtype" 2>"$T/log" &&
        "$TSRC" "$T/d2_$dtype.tsr" -o "$T/two/d_$dtype" 2>"$T/log"
    check "digits in $dtype: both programs compile" $?
    (cd "$T/one" && timeout 120 "./d_$dtype" --save "one_$dtype.npz") >"$T/d_$dtype.one" 2>"$T/log" &&
        (cd "$T/two" && timeout 120 $MPIRUN "./d_$dtype" --save "two_$dtype.npz" --check-replicas) >"$T/d_$dtype.two" 2>"$T/log" &&
        (cd "$T/two" && timeout 120 $MPIRUN "./d_$dtype" --reduce=ordered) >"$T/d_$dtype.o1" 2>"$T/log" &&
        (cd "$T/two" && timeout 120 $MPIRUN "./d_$dtype" --reduce=ordered) >"$T/d_$dtype.o2" 2>"$T/log" &&
        cmp -s "$T/d_$dtype.o1" "$T/d_$dtype.o2"
    check "digits in $dtype: one process, two (--check-replicas), and --reduce=ordered twice the same" $?
    "$PYTHON" -c "
import re, sys
import numpy as np
dtype = sys.argv[1]
loss_tol, accuracy_tol, param_tol = (1e-12, 0, 1e-12) if dtype == 'f64' else (0.01, 1.0, None)
a, b = (open(f).read().split('\n') for f in sys.argv[2:4])
assert len(a) == len(b) and len(a) > 2, (len(a), len(b))
for x, y in zip(a, b):
    if not x: continue
    la, lb = (float(re.search(r'loss (\S+)', l).group(1)) for l in (x, y))
    aa, ab = (float(re.search(r'accuracy (\S+)%', l).group(1)) for l in (x, y))
    assert abs(la - lb) <= loss_tol * abs(la) and abs(aa - ab) <= accuracy_tol, (x, y)
one, two = np.load(sys.argv[4]), np.load(sys.argv[5])
if param_tol:
    assert one['layer.w'].dtype == np.float64, one['layer.w'].dtype
    for k in one.files:
        if one[k].dtype == np.float64:
            assert np.allclose(one[k], two[k], rtol=param_tol, atol=param_tol), (k, np.abs(one[k] - two[k]).max())
" $dtype "$T/d_$dtype.one" "$T/d_$dtype.two" "$T/one/one_$dtype.npz" "$T/two/two_$dtype.npz" 2>"$T/log"
    check "digits in $dtype: the losses and test accuracies of one process (f64: 1e-12, and the checkpoint)" $?
done

# The GPT example at a small size, whose training data are random windows of a token file:
# batches of 8 windows on one process, of 4 on each of two.  Process r's window k is window
# 2k + r of one process's draw (a window is a sample), so each step sees the same 8 windows and
# prints the same losses; the validation set is read whole by both.
mkdir "$T/gpt1" "$T/gpt2"
"$PYTHON" tools/gpt_data.py "$T/gpt1" >"$T/log" 2>&1 && cp "$T"/gpt1/gpt_*.bin "$T/gpt2/"
check "tools/gpt_data.py writes the token files" $?
sed -e 's/^let dim = 256/let dim = 32/' -e 's/^let heads = 4/let heads = 2/' -e 's/^let n_batches = 64/let n_batches = 4/' \
    -e 's/train loss %\.4f  validation loss %\.4f/train loss %.9g  validation loss %.9g/' \
    "$ROOT/docs/examples/gpt.tsr" >"$T/gpt8.tsr"
sed -e 's/^let batch = 8$/let batch = 4/' "$T/gpt8.tsr" >"$T/gpt4.tsr"
grep -q '^let batch = 4$' "$T/gpt4.tsr" && "$TSRC" "$T/gpt8.tsr" -o "$T/gpt1/gpt" 2>"$T/log" &&
    "$TSRC" "$T/gpt4.tsr" -o "$T/gpt2/gpt" 2>"$T/log"
check "gpt: the small example compiles with batches of 8 and of 4" $?
(cd "$T/gpt1" && timeout 120 ./gpt --epochs 2) >"$T/gpt.one" 2>"$T/log" &&
    (cd "$T/gpt2" && timeout 120 $MPIRUN ./gpt --epochs 2 --check-replicas) >"$T/gpt.two" 2>"$T/log"
check "gpt: one process and two (--check-replicas) train 2 epochs" $?
"$PYTHON" -c "
import re, sys
a, b = (open(f).read().split() for f in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 8, (a, b)
for x, y in zip(a, b):
    if re.fullmatch(r'[0-9.e+-]+', x) and '.' in x:
        assert abs(float(x) - float(y)) <= 1e-6 * abs(float(x)), (x, y)
    else:
        assert x == y, (x, y)
" "$T/gpt.one" "$T/gpt.two" 2>"$T/log"
check "gpt: the training and validation losses of one process to 1e-6" $?

# The mean in buckets that begin during the backward pass (--bucket-cells 100: the MLP's 12 731
# cells in two messages, the output layer's as soon as the backward pass has made it) computes
# what one message computes, bit for bit.
"$TSRC" --bucket-cells 100 --emit=sched-ir "$T/digits2.tsr" -o "$T/buckets.ir" 2>"$T/log" &&
    [ "$(grep -c 'call mean_across_processes_begin' "$T/buckets.ir")" -ge 2 ] &&
    grep -q 'call mean_across_processes_end' "$T/buckets.ir" &&
    "$TSRC" --bucket-cells 100 "$T/digits2.tsr" -o "$T/two/buckets" 2>"$T/log"
check "digits: --bucket-cells 100 cuts the mean into buckets that begin before its end" $?
(cd "$T/two" && timeout 120 $MPIRUN ./buckets --check-replicas) >"$T/digits.buckets" 2>"$T/log" &&
    cmp -s "$T/digits.two" "$T/digits.buckets"
check "digits: the mean in buckets prints what one message prints, bit for bit" $?
(cd "$T/two" && timeout 120 $MPIRUN ./buckets --reduce=ordered) >"$T/digits.bo" 2>"$T/log" &&
    (cd "$T/two" && timeout 120 $MPIRUN ./digits --reduce=ordered) >"$T/digits.o" 2>>"$T/log" && cmp -s "$T/digits.o" "$T/digits.bo"
check "digits: the same with --reduce=ordered" $?

# The reference executor takes part in a distributed run as a generated executable does.
(cd "$T/two" && timeout 300 $MPIRUN "$TSRC" --run --interp "$T/digits2.tsr") >"$T/digits.interp" 2>"$T/log"
check "digits: the reference executor on two processes" $?
cmp -s "$T/digits.two" "$T/digits.interp"; check "digits: it prints what the executable prints, bit for bit" $?

# The ordered reduction: the same bytes in two runs.
(cd "$T/two" && timeout 120 $MPIRUN ./lenet --reduce=ordered) >"$T/ordered1" 2>"$T/log" &&
    (cd "$T/two" && timeout 120 $MPIRUN ./lenet --reduce=ordered) >"$T/ordered2" 2>>"$T/log" &&
    cmp -s "$T/ordered1" "$T/ordered2" && same_losses "$T/lenet.one" "$T/ordered1"
check "lenet: --reduce=ordered prints the same bytes twice, the losses of one process" $?

# A rank killed mid-run: the other stops, mpirun ends non-zero, within 30 s.
sed -e 's/^let epochs = 4$/let epochs = 1000000/' "$T/lenet2.tsr" >"$T/forever.tsr"
"$TSRC" "$T/forever.tsr" -o "$T/two/forever" 2>"$T/log"; check "a program of a million epochs compiles" $?
(cd "$T/two" && exec $MPIRUN ./forever) >"$T/forever.out" 2>"$T/forever.err" &
launcher=$!
sleep 3
victim=$(pgrep -f "^./forever" | head -n 1)
[ -n "$victim" ] && kill -9 "$victim"
start=$(date +%s)
status=0
waited=0
while kill -0 "$launcher" 2>/dev/null && [ "$waited" -lt 40 ]; do sleep 1; waited=$((waited + 1)); done
if kill -0 "$launcher" 2>/dev/null; then
    status=hung
    pkill -9 -f "^./forever" 2>/dev/null
    kill -9 "$launcher" 2>/dev/null
fi
wait "$launcher" 2>/dev/null
rc=$?
elapsed=$(($(date +%s) - start))
cp "$T/forever.err" "$T/log"
[ -n "$victim" ] && [ "$status" = 0 ] && [ "$rc" != 0 ] && [ "$elapsed" -le 30 ] && [ -z "$(pgrep -f '^./forever')" ]
check "a rank killed mid-run: mpirun ends with status $rc after ${elapsed}s, no process left" $?

finish
