#!/bin/sh
# dtype_half_data.sh — bf16 and f16 data, parameters and checkpoints end to end (run by
# tests/run.sh; docs/language.md §3.9, docs/runtime.md §4, §9, §14, docs/python.md), in both
# executors (the executable and `tsrc --run --interp`):
#   - .npy files of float64 (1/3, 0.1, 65519, -2.5, 1 + 2^-8 + 2^-30, 1e-7), of those values as
#     float32 and as float16, of int32 (1, -2, 65519, 65520, 2^24 + 1, 257) and a CSV of the
#     float64s (17 digits) read into a bf16 and an f16 item: every cell prints (TSR_PRINT_EXACT=1)
#     the value rounded once, to nearest even, from what the file holds — NumPy's float16 for f16,
#     an exact rational rounding for bf16 (so 1 + 2^-8 + 2^-30 from float64 is the bf16
#     1.0078125, not the 1 a rounding through float32 gives);
#   - a bf16 and an f16 parameter trained two steps by Train.adamw: both executors print the same
#     bits; the checkpoint holds w (bf16) as a float32 array, v (f16) as a float16 one, each the
#     printed values, and their f32 master copies (v's rounding to v) and f32 moments; a run of 2 epochs, saved, loaded by a
#     fresh process that runs 2 more, prints what a run of 4 prints, bit for bit;
#   - a float64 array written by NumPy loads into the parameters rounded once; under mpirun (when
#     installed) two processes average the bf16 and f16 gradients and keep equal replicas;
#   - the header's accessors of bf16 and f16 tensors return uint16_t * (a C driver reads the bits
#     through them and tsr.h's conversions), the manifest says "bfloat16" and "float16";
#   - Python: an f16 tensor is a float16 view, a bf16 tensor a uint16 view of its bits;
#     tsr.float32_to_bf16 / bf16_to_float32 agree with the runtime's rounding; numbers assigned
#     round to nearest even, a uint16 array keeps its bits (a NaN payload too) through a save and
#     a load.
# Usage: dtype_half_data.sh TSRC BUILD_DIR PYTHON.  Last line: "N passed, N failed".
set -u
PYTHON=${3:-/usr/bin/python3}
. "$(dirname "$0")/harness.sh"
harness_tools "$1" "$2"
harness_start halfdata
export TSR_PRINT_EXACT=1

"$PYTHON" - "$T" >"$T/log" 2>&1 <<'PY' || { fail "NumPy writes the data files"; finish; exit 1; }
import sys, math
from fractions import Fraction
import numpy as np
d = sys.argv[1]

def bf16(v):
    """The bfloat16 nearest to the exact value v (ties to even), as a Python float."""
    if math.isnan(v):
        return v
    x = Fraction(v)
    if x == 0:
        return v
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 7)
    q, r = divmod(x, ulp)
    if r > ulp / 2 or (r == ulp / 2 and q % 2 == 1):
        q += 1
    y = q * ulp
    return sign * (math.inf if y >= Fraction(2) ** 128 else float(y))

x = np.array([[1 / 3, 0.1, 65519.0], [-2.5, 1 + 2**-8 + 2**-30, 1e-7]])
xi = np.array([[1, -2, 65519], [65520, 2**24 + 1, 257]], dtype=np.int32)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/x32.npy", x.astype(np.float32))
with np.errstate(over="ignore"):
    np.save(f"{d}/x16.npy", x.astype(np.float16))
np.save(f"{d}/xi.npy", xi)
np.savetxt(f"{d}/x.csv", x, delimiter=",", fmt="%.17g")

def grid(a):  # as tsrc prints half cells under TSR_PRINT_EXACT=1: %.9g of the float value
    return "x : 2|3\n" + "".join("    " + " ".join("%.9g" % v for v in row) + "\n" for row in a)

def want(name, values):
    open(f"{d}/{name}.want", "w").write(grid(values))

with np.errstate(over="ignore"):
    for src, values in [("x", x), ("x32", x.astype(np.float32)), ("x16", x.astype(np.float16)), ("xi", xi)]:
        exact = values.astype(np.float64)  # every source value, exactly
        want(f"bf16_{src}", np.vectorize(bf16)(exact))
        want(f"f16_{src}", exact.astype(np.float16).astype(np.float64))  # NumPy: one rounding from float64
np.savez(f"{d}/third.npz", w=np.full(3, 1 / 3), v=np.array([1 / 3, 0.1, 1e5]))
open(f"{d}/third.want", "w").write("w : 3\n    " + " ".join(["%.9g" % bf16(1 / 3)] * 3) + "\nv : 3\n    " +
                                   " ".join("%.9g" % v for v in np.array([1 / 3, 0.1, np.inf], np.float16)) + "\n")
PY

for t in bf16 f16; do
    printf 'data x = npy "%s/x.npy" ~b:[2] ~o:[3] ~dtype:"%s"\nmain = print x\n' "$T" $t >"$T/read_$t.tsr"
    printf 'data x = csv "%s/x.csv" ~b:[2] ~o:[3] ~dtype:"%s"\nmain = print x\n' "$T" $t >"$T/csv_$t.tsr"
done
cat >"$T/train.tsr" <<'TSR'
data xs = range ~b:[3] ~o:[3] ~dtype:"bf16"
data hs = range ~b:[3] ~o:[3] ~dtype:"f16"
let%op w = { w = 0.25; o = [3]; dtype = "bf16" }
let%op v = { v = 0.5; o = [3]; dtype = "f16" }
let%op loss = to_f32 (((w *. (xs /. 7.) - 0.1) ** 2.) ++ "...|... => 0") + to_f32 (((v *. (hs /. 7.) - 0.1) ** 2.) ++ "...|... => 0")
routine step = Train.step loss ~update:(Train.adamw ~lr:0.1)
option epochs = 2
main = for e = 1 to epochs do run step; print loss done; print w; print v; save "w.npz"
TSR
cat >"$T/show.tsr" <<'TSR'
let%op w = { w = 0.25; o = [3]; dtype = "bf16" }
let%op v = { v = 0.5; o = [3]; dtype = "f16" }
main = print w; print v
TSR
for p in read_bf16 csv_bf16 read_f16 csv_f16 train show; do
    "$TSRC" "$T/$p.tsr" -o "$T/$p" >"$T/log" 2>&1 || fail "$p.tsr compiles"
done

# expect_grid NAME WANT WHAT ARGS…: both executors print the grid $T/WANT.want.
expect_grid() {
    name=$1 want=$2 what=$3
    shift 3
    run_both "$name" "$@"
    cat "$T/$name.native.err" "$T/$name.interp.err" >"$T/log"
    if [ $native = 0 ] && [ $interp = 0 ] && cmp -s "$T/$name.native" "$T/$want.want" &&
       cmp -s "$T/$name.interp" "$T/$want.want"; then pass
    else { cat "$T/$name.native"; cat "$T/$want.want"; } >>"$T/log"; fail "$what"; fi
}
for t in bf16 f16; do
    expect_grid read_$t ${t}_x "a float64 .npy file into a $t item, rounded once"
    expect_grid read_$t ${t}_x32 "a float32 .npy file into a $t item" --data "x=$T/x32.npy"
    expect_grid read_$t ${t}_x16 "a float16 .npy file into a $t item" --data "x=$T/x16.npy"
    expect_grid read_$t ${t}_xi "an int32 .npy file into a $t item" --data "x=$T/xi.npy"
    expect_grid csv_$t ${t}_x "a CSV of 17-digit numbers into a $t item, as the float64 file"
done

# Training, its checkpoint, and a resumed run.
run_both train
cat "$T/train.native.err" "$T/train.interp.err" >"$T/log"
if [ $native = 0 ] && [ $interp = 0 ] && cmp -s "$T/train.native" "$T/train.interp"; then pass
else cat "$T/train.native" "$T/train.interp" >>"$T/log"; fail "bf16 and f16 parameters trained by Train.adamw: both executors print the same bits"; fi
"$PYTHON" - "$T" >"$T/log" 2>&1 <<'PY' && pass || fail "the checkpoint: bf16 tensors as float32 arrays, f16 ones as float16, the printed values"
import sys, numpy as np
d = sys.argv[1]
ck = np.load(f"{d}/run/w.npz")
out = open(f"{d}/train.native").read()
printed = {n: [float(v) for v in out.split(f"{n} : 3\n")[1].split("\n")[0].split()] for n in ("w", "v")}
# %.9g tells every float32 apart: the printed text read back to the type is the value
assert ck["w"].dtype == np.float32 and (ck["w"] == np.float32(printed["w"])).all(), (ck["w"], printed["w"])
assert ck["v"].dtype == np.float16 and (ck["v"] == np.float16(printed["v"])).all(), (ck["v"], printed["v"])
# mixed precision: each parameter's f32 master copy (its value, rounded, is the parameter's) and
# its f32 moments
for p in ("w", "v"):
    moments = [k for k in ck.files if k.startswith(p + ".") and ck[k].shape == (3,)]
    assert len(moments) >= 3 and all(ck[k].dtype == np.float32 for k in moments), (p, {k: ck[k].dtype for k in ck.files})
assert (ck["v.master"].astype(np.float16) == ck["v"]).all(), (ck["v.master"], ck["v"])
bits = ck["w"].view(np.uint32)
assert (bits & 0xFFFF == 0).all(), "a bf16 value saved as float32 has low bits"
PY
rm -rf "$T/run"
run_both train --epochs 4
cp "$T/train.native" "$T/four"
rm -rf "$T/run"
run_both train
cp "$T/run/w.npz" "$T/two.npz"   # each executor's run writes w.npz again
run_both train --load "$T/two.npz"
if [ $native = 0 ] && [ $interp = 0 ] && [ "$(tail -n 4 "$T/train.native")" = "$(tail -n 4 "$T/four")" ] &&
   [ "$(tail -n 4 "$T/train.interp")" = "$(tail -n 4 "$T/four")" ]; then pass
else { cat "$T/train.native.err" "$T/train.interp.err"; tail -n 4 "$T/train.native"; tail -n 4 "$T/four"; } >"$T/log"; fail "2 epochs, saved, loaded and 2 more print what 4 epochs print (bf16 and f16 moments)"; fi
run_both show --load "$T/third.npz"
cat "$T/show.native.err" "$T/show.interp.err" >"$T/log"
if [ $native = 0 ] && [ $interp = 0 ] && cmp -s "$T/show.native" "$T/third.want" && cmp -s "$T/show.interp" "$T/third.want"; then pass
else cat "$T/show.native" "$T/third.want" >>"$T/log"; fail "a float64 array written by NumPy loads into bf16 and f16 parameters, rounded once"; fi

# Two processes: the bf16 and f16 gradients are averaged (in f32, rounded once; the exact cases
# are tests/native/means_by_type.tsr): the run prints once, its replicas agree bit for bit, and
# the library's sum and the ordered one print the same (two terms add in either order alike).
if command -v mpirun >/dev/null 2>&1; then
    mkdir -p "$T/mpi"
    harness_mpi
    for reduce in fast ordered; do
        (cd "$T/mpi" && timeout 60 mpirun --oversubscribe -np 2 "$T/train" --check-replicas --reduce=$reduce) \
            >"$T/mpi.$reduce" 2>"$T/log"
        echo $? >"$T/mpi.$reduce.status"
    done
    if [ "$(cat "$T/mpi.fast.status")" = 0 ] && [ "$(cat "$T/mpi.ordered.status")" = 0 ] &&
       [ "$(grep -c '^w :' "$T/mpi.fast")" = 1 ] && cmp -s "$T/mpi.fast" "$T/mpi.ordered"
    then pass; else fail "two processes: bf16 and f16 gradients averaged, replicas equal, fast = ordered"; fi
fi

# The header, a C driver and the manifest.
cat >"$T/driver.c" <<'EOF'
#include <stdio.h>
#include "show.h"
int main(void) {
    show_state *s = show_create(1);
    if (!s) return 1;
    uint16_t *w = show_w(s), *v = show_v(s);
    w[1] = tsr_f32_to_bf16(0.1f);
    v[2] = tsr_f32_to_f16(65520.0f);
    printf("%04x %04x %g %g %04x %g %d %d\n", w[0], w[1], tsr_bf16_to_f32(w[1]), tsr_f16_to_f32(v[0]), v[2],
           tsr_f16_to_f32(v[2]), tsr_state_buffer_dtype((tsr_state *)s, 0), tsr_state_buffer_dtype((tsr_state *)s, 1));
    show_destroy(s);
    return 0;
}
EOF
if (cd "$T" && "$TSRC" -c "$T/show.tsr" -o "$T/show.o") >"$T/log" 2>&1 &&
   grep -q 'static inline uint16_t \*show_w(show_state \*s)' "$T/show.h" &&
   grep -q 'static inline uint16_t \*show_v(show_state \*s)' "$T/show.h" &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -Iruntime "$T/driver.c" "$T/show.o" "$LIB" -lm -lpthread -o "$T/driver" \
      >"$T/log" 2>&1 && [ "$("$T/driver")" = "3e80 3dcd 0.100098 0.5 7c00 inf 3 4" ] &&
   "$PYTHON" -c 'import json, sys; t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}
assert t["w"]["dtype"] == "bfloat16" and t["v"]["dtype"] == "float16", t' "$T/show.json" >>"$T/log" 2>&1; then pass
else "$T/driver" >>"$T/log" 2>&1; fail "the header's accessors of bf16 and f16 tensors return uint16_t *, the manifest says bfloat16 and float16"; fi

# Python: a float16 view, a uint16 view of bf16 bits, the conversions, assignment, a checkpoint.
if "$TSRC" --shared "$T/show.tsr" -o "$T/libshow.so" >"$T/log" 2>&1 &&
   PYTHONPATH=runtime/python "$PYTHON" - "$T" >>"$T/log" 2>&1 <<'PY'; then pass
import sys, numpy as np, tsr
d = sys.argv[1]
m = tsr.load(d + "/libshow.so")
w, v = m["w"], m["v"]
assert v.dtype == np.float16 and m.dtype("v") == np.float16 and (v == 0.5).all(), v
assert w.dtype == np.uint16 and m.dtype("w") == np.uint16 and m.is_bf16("w") and not m.is_bf16("v"), w
assert (w == 0x3E80).all() and (tsr.bf16_to_float32(w) == 0.25).all(), w
assert tsr.float32_to_bf16(np.float32(0.1)) == 0x3DCD and tsr.float32_to_bf16(1 + 2**-8 + 2**-30) == 0x3F81
assert tsr.bf16_to_float32(tsr.float32_to_bf16(np.float32([np.inf, -0.0, 3.4e38]))).tolist() == [np.inf, -0.0, np.inf]
m["w"] = [1 / 3, 0.1, -2.5]
assert m["w"].tolist() == [0x3EAB, 0x3DCD, 0xC020], m["w"]
m["v"] = [1 / 3, 0.1, 1e5]
assert m["v"].view(np.uint16).tolist() == [0x3555, 0x2E66, 0x7C00], m["v"]
m["w"] = np.array([0x3F80, 0x7FA1, 0x8000], dtype=np.uint16)  # bit patterns, a NaN's payload among them
m.save(d + "/py.npz")
m["w"] = 0
m.load(d + "/py.npz")
assert m["w"].tolist() == [0x3F80, 0x7FA1, 0x8000], m["w"]
assert np.load(d + "/py.npz")["w"].dtype == np.float32
PY
else fail "Python: float16 and uint16 views; tsr.float32_to_bf16 rounds as the runtime; bits survive a checkpoint"; fi
finish
