#!/bin/sh
# gpt_example.sh — docs/examples/gpt.tsr (run by tests/run.sh): tools/gpt_data.py writes its
# token files (llm.c's format) from Debian's licence texts; the example compiles as shipped; then
# the same program at a small size (32 features, 2 heads, 4 batches of random windows: the
# constants rewritten) is built natively and trained: the training loss falls from epoch 1 to epoch 2,
# 1 epoch + --save + a fresh process with --load --start 2 prints what 2 epochs print, and an
# evaluation run (--epochs 0 --load, no --save) leaves the checkpoint as it was.
# Usage: gpt_example.sh TSRC [PYTHON].  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
PYTHON=${2:-/usr/bin/python3}
EX=$(pwd)/docs/examples/gpt.tsr
TOOL=$(pwd)/tools/gpt_data.py
. "$(dirname "$0")/harness.sh"
harness_start gpt
"$PYTHON" "$TOOL" "$T" >"$T/log" 2>&1 &&
    "$PYTHON" -c "
import sys, numpy as np
def tokens(path):
    raw = open(path, 'rb').read()
    head = np.frombuffer(raw[:1024], '<i4')
    assert head[0] == 20240520 and head[1] == 1 and len(raw) == 1024 + 2 * head[2], head[:3]
    return np.frombuffer(raw[1024:], '<u2')
t, v = tokens(sys.argv[1] + '/gpt_train.bin'), tokens(sys.argv[1] + '/gpt_val.bin')
assert len(t) == 64 * 8 * 64 + 1 and len(v) == 64 * 64 + 1 and t.max() < 96 and v.max() < 96
assert t[-1] == v[0]   # the validation text starts where the training text ends" "$T" >>"$T/log" 2>&1
check "tools/gpt_data.py writes the token files" $?
timeout 60 "$TSRC" --check "$EX" >"$T/log" 2>&1; check "docs/examples/gpt.tsr compiles as shipped" $?
sed -e 's/^let dim = 256/let dim = 32/' -e 's/^let heads = 4/let heads = 2/' -e 's/^let n_batches = 64/let n_batches = 4/' \
    "$EX" >"$T/small.tsr"
(cd "$T" && timeout 120 "$TSRC" small.tsr -o small) >"$T/log" 2>&1; check "the example at a small size builds natively" $?
(cd "$T" && timeout 60 ./small --epochs 2) >"$T/whole.out" 2>"$T/log"
awk '{ loss[NR] = $5 } END { exit !(NR == 2 && loss[2] < loss[1]) }' "$T/whole.out"
check "two epochs: the training loss falls" $?
(cd "$T" && timeout 60 ./small --epochs 1 --save gpt.npz && timeout 60 ./small --start 2 --epochs 2 --load gpt.npz) \
    >"$T/joined.out" 2>"$T/log"
cmp -s "$T/whole.out" "$T/joined.out"; check "1 epoch + --save + --load --start 2 = 2 epochs" $?
cp "$T/gpt.npz" "$T/before.npz"
(cd "$T" && timeout 60 ./small --epochs 0 --load gpt.npz) >"$T/eval.out" 2>"$T/log" && cmp -s "$T/gpt.npz" "$T/before.npz"
check "an evaluation run without --save leaves the checkpoint alone" $?
finish
