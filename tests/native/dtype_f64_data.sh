#!/bin/sh
# dtype_f64_data.sh — f64 data, parameters and checkpoints end to end (run by tests/run.sh;
# docs/language.md §3.9, docs/runtime.md §4, §9, §14), in both executors (the executable and
# `tsrc --run --interp`):
#   - a float64 .npy item (1/3, 1e-300, 1e300, pi, -0.0, 2^53 - 1) prints every double exactly
#     (TSR_PRINT_EXACT=1, 17 digits); a float32 file widens exactly, an int64 file converts; a CSV
#     of 17-digit numbers reads the same doubles as strtod;
#   - an f64 parameter trained two steps by Train.adamw: both executors print the same bits, and
#     its `save` is a float64 array (with float64 moments) that numpy.load reads; a float64 array
#     written by NumPy loads into it exactly (`--load`);
#   - the header's accessor of an f64 tensor returns double *, and the manifest says "float64";
#   - Python: the tensor is a float64 view, and a double assigned keeps its bits.
# Usage: dtype_f64_data.sh TSRC PYTHON.  Last line: "N passed, N failed".
set -u
PYTHON=${2:-/usr/bin/python3}
. "$(dirname "$0")/harness.sh"
harness_tools "$1"
harness_start f64data
export TSR_PRINT_EXACT=1

"$PYTHON" - "$T" >"$T/log" 2>&1 <<'PY' || { fail "NumPy writes the data files"; finish; exit 1; }
import sys, numpy as np
d = sys.argv[1]
x = np.array([[1 / 3, 1e-300, 1e300], [np.pi, -0.0, 2.0**53 - 1]])
np.save(f"{d}/x.npy", x)
with np.errstate(over="ignore"):
    x32 = x.astype(np.float32)  # 1e300 becomes inf, 1e-300 0
np.save(f"{d}/x32.npy", x32)
np.save(f"{d}/xi.npy", np.array([[1, -2, 3], [2**53 - 1, 0, -(2**40)]], dtype=np.int64))
np.savetxt(f"{d}/x.csv", x, delimiter=",", fmt="%.17g")
def grid(a):  # as tsrc prints f64 cells under TSR_PRINT_EXACT=1: C's %.17g
    return "".join("    " + " ".join("%.17g" % v for v in row) + "\n" for row in a)
open(f"{d}/x.want", "w").write(grid(x))
open(f"{d}/x32.want", "w").write(grid(x32.astype(np.float64)))
open(f"{d}/xi.want", "w").write(grid(np.array([[1, -2, 3], [2**53 - 1, 0, -(2**40)]], dtype=np.float64)))
np.savez(f"{d}/third.npz", w=np.full(3, 1 / 3))
PY

printf 'data x = npy "%s/x.npy" ~b:[2] ~o:[3] ~dtype:"f64"\nmain = print x\n' "$T" >"$T/read.tsr"
printf 'data x = csv "%s/x.csv" ~b:[2] ~o:[3] ~dtype:"f64"\nmain = print x\n' "$T" >"$T/csv.tsr"
cat >"$T/train.tsr" <<'TSR'
data xs = range ~b:[3] ~o:[3] ~dtype:"f64"
let%op w = { w = 0.25; o = [3]; dtype = "f64" }
let%op loss = ((w *. (xs /. 7.) - 0.1) ** 2.) ++ "...|... => 0"
routine step = Train.step loss ~update:(Train.adamw ~lr:0.1)
main = for e = 1 to 2 do run step; print loss done; print w; save "w.npz"
TSR
printf 'let%%op w = { w = 0.25; o = [3]; dtype = "f64" }\nmain = print w\n' >"$T/show.tsr"
for p in read csv train show; do "$TSRC" "$T/$p.tsr" -o "$T/$p" >"$T/log" 2>&1 || fail "$p.tsr compiles"; done

# expect_grid NAME WANT WHAT ARGS…: both executors print `x : 2|3` and the grid WANT.
expect_grid() {
    name=$1 want=$2 what=$3
    shift 3
    run_both "$name" "$@"
    cat "$T/$name.native.err" "$T/$name.interp.err" >"$T/log"
    { echo "x : 2|3"; cat "$T/$want"; } >"$T/grid"
    if [ $native = 0 ] && [ $interp = 0 ] && cmp -s "$T/$name.native" "$T/grid" && cmp -s "$T/$name.interp" "$T/grid"; then pass
    else { cat "$T/$name.native"; cat "$T/grid"; } >>"$T/log"; fail "$what"; fi
}
expect_grid read x.want "a float64 .npy file reads every double exactly"
expect_grid read x32.want "a float32 file widens exactly into an f64 item" --data "x=$T/x32.npy"
expect_grid read xi.want "an int64 file converts into an f64 item (2^53 - 1 exactly)" --data "x=$T/xi.npy"
expect_grid csv x.want "a CSV of 17-digit numbers reads the doubles strtod reads"

run_both train
cat "$T/train.native.err" "$T/train.interp.err" >"$T/log"
if [ $native = 0 ] && [ $interp = 0 ] && cmp -s "$T/train.native" "$T/train.interp"; then pass
else cat "$T/train.native" "$T/train.interp" >>"$T/log"; fail "an f64 parameter trained by Train.adamw: both executors print the same bits"; fi
"$PYTHON" - "$T" >"$T/log" 2>&1 <<'PY' && pass || fail "the checkpoint holds float64 arrays: w as printed, its moments"
import sys, numpy as np
d = sys.argv[1]
ck = np.load(f"{d}/run/w.npz")
printed = [float(v) for v in open(f"{d}/train.native").read().split("w : 3\n")[1].split()]
assert ck["w"].dtype == np.float64, ck["w"].dtype
assert ck["w"].tolist() == printed, (ck["w"].tolist(), printed)
moments = [k for k in ck.files if k != "w" and ck[k].dtype == np.float64 and ck[k].shape == (3,)]
assert len(moments) >= 2, ck.files
PY
run_both show --load "$T/third.npz"
cat "$T/show.native.err" "$T/show.interp.err" >"$T/log"
want=$("$PYTHON" -c 'print("w : 3\n    " + " ".join(["%.17g" % (1 / 3)] * 3))')
if [ $native = 0 ] && [ $interp = 0 ] && [ "$(cat "$T/show.native")" = "$want" ] && [ "$(cat "$T/show.interp")" = "$want" ]; then pass
else cat "$T/show.native" >>"$T/log"; fail "a float64 array written by NumPy loads into an f64 parameter exactly"; fi

(cd "$T" && "$TSRC" -c "$T/show.tsr" -o "$T/show.o") >"$T/log" 2>&1
if grep -q 'static inline double \*show_w(show_state \*s)' "$T/show.h" && grep -q '"dtype": "float64"' "$T/show.json"; then pass
else cat "$T/show.h" >>"$T/log" 2>&1; fail "the header's accessor of an f64 tensor returns double *, the manifest says float64"; fi

# Python: a float64 view; a value assigned keeps every bit of its double.
if "$TSRC" --shared "$T/show.tsr" -o "$T/libshow.so" >"$T/log" 2>&1 &&
   PYTHONPATH=runtime/python "$PYTHON" -c 'import sys, numpy as np, tsr
m = tsr.load(sys.argv[1] + "/libshow.so")
w = m["w"]
assert w.dtype == np.float64 and m.dtype("w") == np.float64 and (w == 0.25).all(), w
m["w"] = [1 / 3, 1e-300, np.pi]
assert m["w"].tolist() == [1 / 3, 1e-300, np.pi], m["w"]' "$T" >>"$T/log" 2>&1; then pass
else fail "Python: a float64 view; a double assigned keeps its bits"; fi
finish
