#!/bin/sh
# gpt_example.sh — docs/examples/gpt.tsr (run by tests/run.sh): tools/gpt_data.py writes its
# token files (llm.c's format) from Debian's licence texts; the example compiles as shipped; then
# the same program at a small size (32 features, 2 heads, 4 batches of random windows: the
# constants rewritten) is built natively and trained: the training loss falls from epoch 1 to
# epoch 2, 1 epoch + --save + a fresh process with --load --start 2 prints what 2 epochs print, an
# evaluation run (--epochs 0 --load, no --save) leaves the checkpoint as it was, a model of three
# blocks refuses the four-block checkpoint, and --generate
# draws samples from their prompts, the same for one seed in the executable, the reference
# executor and a C driver of the object, other ones for another seed; the logits of the cached
# step (a key/value cache, one position a run) and of the whole window's forward agree to 1e-6 at
# every position of a window, natively and in the reference executor, which print the same; and
# the model in bf16 (`let dtype = "bf16"`) ends within 1 % of the f32 loss.
# Usage: gpt_example.sh TSRC [PYTHON].  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
PYTHON=${2:-/usr/bin/python3}
LIB=$(dirname "$TSRC")/libtsr.a
RUNTIME=$(pwd)/runtime
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
(cd "$T" && timeout 60 ./small --start 0 --epochs 1) >"$T/start0.out" 2>"$T/log"
[ $? = 1 ] && [ ! -s "$T/start0.out" ] && grep -q "the loop runs 'epoch' over -1..0, outside its range" "$T/log"
check "--start 0 is an error (it trained an epoch at steps below 0, with a negative learning rate)" $?
cp "$T/gpt.npz" "$T/before.npz"
(cd "$T" && timeout 60 ./small --epochs 0 --load gpt.npz) >"$T/eval.out" 2>"$T/log" && cmp -s "$T/gpt.npz" "$T/before.npz"
check "an evaluation run without --save leaves the checkpoint alone" $?
# The same config with three blocks instead of four: --load of the four-block checkpoint is
# refused, naming a parameter of the block it lacks (it loaded, the fourth block left out).
sed -e '/^let stack = /{N;s/(); *\n *gpt_block ~dim ~heads ~dtype ()\]/()]/;}' -e '/^let%op [kv]_written4 = /d' \
    -e 's/; \([kv]_cache4\|[kv]_written4\)\]/]/' "$T/small.tsr" >"$T/small3.tsr"
[ "$(grep -c 'gpt_block ~dim' "$T/small3.tsr")" = 1 ] && [ "$(grep -o 'gpt_block ~dim' "$T/small3.tsr" | wc -l)" = 3 ] &&
    (cd "$T" && timeout 120 "$TSRC" --run --interp small3.tsr -- --epochs 0 --load gpt.npz) >"$T/out3" 2>"$T/log"
[ $? = 1 ] && [ ! -s "$T/out3" ] &&
    grep -q "checkpoint 'gpt.npz' holds parameter '[^']*' (and [0-9]* more), which this model does not have" "$T/log"
check "a checkpoint of four blocks does not load into a model of three" $?

# Mixed precision: the same small model with `let dtype = "bf16"` (bf16 parameters and
# activations, f32 master weights) ends its two epochs with a validation loss within 1 % of f32's.
sed 's/^let dtype = "f32"/let dtype = "bf16"/' "$T/small.tsr" >"$T/small_bf16.tsr"
grep -q '^let dtype = "bf16"' "$T/small_bf16.tsr" &&
    (cd "$T" && timeout 120 "$TSRC" small_bf16.tsr -o small_bf16 && timeout 120 ./small_bf16 --epochs 2) \
    >"$T/bf16.out" 2>"$T/log"
awk 'NR == FNR { f32 = $8; next } { bf16 = $8 } END {
       d = bf16 - f32; if (d < 0) d = -d; print "f32", f32, "bf16", bf16; exit !(FNR == 2 && f32 > 0 && d <= 0.01 * f32) }' \
    "$T/whole.out" "$T/bf16.out" >>"$T/log"
check "bf16 with f32 master weights: the validation loss after 2 epochs within 1 % of f32's" $?

# The key/value cache: --cross_checks 1 runs window 0 position by position through the cached
# step and compares its logits with the whole window's forward at each position.
(cd "$T" && timeout 60 ./small --load gpt.npz --epochs 0 --cross_checks 1) >"$T/cache.out" 2>"$T/log"
awk '$NF + 0 <= 1e-6 && $NF + 0 >= 0 { n++ } END { exit !(n == 64 && NR == 64) }' "$T/cache.out"
check "with the key/value cache and without it the logits agree to 1e-6 at all 64 positions" $?
(cd "$T" && timeout 120 "$TSRC" --run --interp small.tsr -- --load gpt.npz --epochs 0 --cross_checks 1) \
    >"$T/cache_interp.out" 2>"$T/log"
cmp -s "$T/cache.out" "$T/cache_interp.out"; check "the reference executor: the same comparison, the same figures" $?

# Samples (--generate): each starts with its validation window's first 16 characters and goes on
# with characters of the vocabulary; the same seed gives the same samples, in the executable, in
# the reference executor and from the C API (a driver that loads the checkpoint and runs the
# routines begin_sample, feed (the prompt into the caches) and grow as main does); another seed
# other ones.
(cd "$T" && timeout 60 ./small --load gpt.npz --epochs 0 --generate 2) >"$T/gen.out" 2>"$T/log"
(cd "$T" && timeout 60 ./small --load gpt.npz --epochs 0 --generate 2) >"$T/gen2.out" 2>>"$T/log"
"$PYTHON" - "$T" "$(dirname "$TOOL")" >>"$T/log" 2>&1 <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import gpt_data
d = sys.argv[1]
val = np.frombuffer(open(d + "/gpt_val.bin", "rb").read()[1024:], "<u2")
grids = []
for line in open(d + "/gen.out"):
    if line.startswith("text : "):
        grids.append([])
    elif line.startswith("    "):
        grids[-1].extend(float(v) for v in line.split())
assert len(grids) == 2 and all(len(g) == 64 for g in grids), [len(g) for g in grids]
for w, g in enumerate(grids):
    assert g[:16] == [float(t) for t in val[w * 64:w * 64 + 16]], (w, g[:16])
    assert all(v == int(v) and 0 <= v < 96 for v in g), g
texts = gpt_data.decode(open(d + "/gen.out").read().splitlines())
assert len(texts) == 2 and all(len(t) == 64 for t in texts), texts
EOF
check "--generate 2: two samples, each from its prompt, characters of the vocabulary" $?
cmp -s "$T/gen.out" "$T/gen2.out"; check "the same seed, the same samples" $?
(cd "$T" && timeout 120 "$TSRC" --run --interp small.tsr -- --load gpt.npz --epochs 0 --generate 2) \
    >"$T/gen_interp.out" 2>"$T/log"
cmp -s "$T/gen.out" "$T/gen_interp.out"; check "the reference executor draws the same samples" $?
(cd "$T" && timeout 60 ./small --load gpt.npz --epochs 0 --generate 2 --seed 7) >"$T/gen7.out" 2>"$T/log"
! cmp -s "$T/gen.out" "$T/gen7.out"; check "another seed, other samples" $?
cat >"$T/sample.c" <<'EOF'
#include <stdio.h>
#include "gpt.h"
/* The first sample as the executable's main draws it: window 0's prompt, fed into the caches at
   0 … 14, then grow at 15 … 62. */
int main(void) {
    gpt_state *s = gpt_create(0);
    if (!s || gpt_load(s, "gpt.npz") != TSR_OK || gpt_set_w(s, 0) != TSR_OK || gpt_begin_sample(s) != TSR_OK) {
        fprintf(stderr, "%s\n", gpt_last_error());
        return 1;
    }
    for (int p = 0; p <= 14; p++)
        if (gpt_set_p(s, p) != TSR_OK || gpt_feed(s) != TSR_OK) {
            fprintf(stderr, "%s\n", gpt_last_error());
            return 1;
        }
    for (int p = 15; p <= 62; p++)
        if (gpt_set_p(s, p) != TSR_OK || gpt_grow(s) != TSR_OK) {
            fprintf(stderr, "%s\n", gpt_last_error());
            return 1;
        }
    printf("text : 64\n   ");
    for (int i = 0; i < 64; i++) printf(" %g", gpt_text(s)[i]);
    printf("\n");
    gpt_destroy(s);
    return 0;
}
EOF
(cd "$T" && timeout 120 "$TSRC" -c --name=gpt small.tsr -o gpt.o &&
    cc -I. -I"$RUNTIME" sample.c gpt.o "$LIB" -lm -lpthread -o sample && ./sample) >"$T/capi.out" 2>"$T/log"
head -n 2 "$T/gen.out" | cmp -s - "$T/capi.out"; check "the C API draws the executable's first sample" $?
finish
