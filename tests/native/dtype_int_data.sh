#!/bin/sh
# dtype_int_data.sh — u8, bool and i64 data end to end (run by tests/run.sh; docs/language.md
# §3.9, docs/runtime.md, docs/python.md), in both executors (the executable and `tsrc --run
# --interp`):
#   - u8 items from a uint8 .npy and from an int64 one, a bool item from a bool .npy and from a
#     CSV of 0 and 1, computed on (sums counting past 255, to_u8 wrapping, a bool mask choosing
#     numbers); i64 items from an int64 .npy and a CSV holding int64's ends, computed on (wrapping
#     products, floor division, maxima): both executors print what NumPy computes;
#   - an int64 file with 300 for the u8 item, a float32 file for it, a CSV with 2 for the bool
#     item, a uint64 file and a CSV with 2^63 for i64 items stop with status 1 and the message
#     naming the cell and value, or both types;
#   - the header's accessors of u8 and bool tensors return uint8_t *, of an i64 one int64_t *,
#     tsr_state_buffer_dtype says TSR_U8, TSR_BOOL and TSR_I64, and the manifest's dtypes are
#     "uint8", "bool" and "int64";
#   - Python: uint8, bool and int64 views; 300 assigned to the u8 tensor and 2^63 to the i64 one
#     raise tsr.Error, numbers assigned to the bool tensor become whether they are not 0.
# Usage: dtype_int_data.sh TSRC LIBDIR PYTHON.  Last line: "N passed, N failed".
set -u
PYTHON=${3:-/usr/bin/python3}
. "$(dirname "$0")/harness.sh"
harness_tools "$1" "$2"
harness_start dtype_int

# The files, and what NumPy says the program prints.
"$PYTHON" - "$T" >"$T/log" 2>&1 <<'EOF' || { fail "NumPy writes the data files"; finish; exit 1; }
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
pix = rng.integers(0, 256, size=(3, 5)).astype(np.uint8)
pix[0, 0], pix[1, 1] = 255, 0
keep = rng.integers(0, 2, size=(3, 5)).astype(bool)
wide = rng.integers(0, 256, size=(3, 5)).astype(np.int64)
flags = np.array([[0, 1, 1], [1, 0, 0]])
np.save(f"{d}/pix.npy", pix)
np.save(f"{d}/keep.npy", keep)
np.save(f"{d}/wide.npy", wide)
np.savetxt(f"{d}/flags.csv", flags, fmt="%d", delimiter=",")
over = wide.copy(); over[1, 2] = 300
np.save(f"{d}/over.npy", over)
np.save(f"{d}/float.npy", pix.astype(np.float32))
with open(f"{d}/two.csv", "w") as f: f.write("0,2,1\n1,0,0\n")
big = rng.integers(-2**62, 2**62, size=(3, 4), dtype=np.int64)
big[0, 0], big[1, 1], big[2, 2] = 2**63 - 1, -2**63, -7
np.save(f"{d}/big.npy", big)
ends = np.array([[-2**63, 2**63 - 1], [0, -1]], dtype=np.int64)
np.savetxt(f"{d}/ends.csv", ends, fmt="%d", delimiter=",")
np.save(f"{d}/u64.npy", np.array([[1, 2**63, 3, 4]] * 3, dtype=np.uint64))
with open(f"{d}/beyond.csv", "w") as f: f.write("0,9223372036854775808\n1,2\n")
def grid(name, a):
    a = np.asarray(a)
    rows = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(1, -1)
    shape = "|".join(map(str, a.shape))
    return f"{name} : {shape}\n" + "".join("    " + " ".join("%g" % v for v in r) + "\n" for r in rows)
sums = pix.astype(np.int32).sum(axis=1)
wrapped = (pix.astype(np.int32) * 3 + wide.astype(np.int32)).astype(np.uint8)
masked = np.where(keep, pix.astype(np.float32), np.float32(-1))
with open(f"{d}/bytes.want", "w") as f:
    f.write(grid("pix", pix) + grid("keep", keep.astype(int)) + grid("wide", wide) + grid("flags", flags) +
            grid("sums", sums) + grid("wrapped", wrapped) + grid("masked", masked))
def igrid(name, a):  # integers exactly (%g would round an int64)
    rows = a.reshape(-1, a.shape[-1])
    return f"{name} : {'|'.join(map(str, a.shape))}\n" + "".join("    " + " ".join(str(int(v)) for v in r) + "\n" for r in rows)
with np.errstate(over="ignore"):
    mixed = (big * 5 + 3) // 2
with open(f"{d}/longs.want", "w") as f:
    f.write(igrid("big", big) + igrid("ends", ends) + igrid("mixed", mixed) + igrid("tops", big.max(axis=1)))
EOF

# expect_want NAME WHAT: $T/NAME.tsr compiles, and both executors print $T/NAME.want.
expect_want() {
    "$TSRC" "$T/$1.tsr" -o "$T/$1" >"$T/log" 2>&1 || fail "$1.tsr compiles"
    run_both "$1"
    for mode in native interp; do
        cp "$T/$1.$mode.err" "$T/log"
        diff "$T/$1.want" "$T/$1.$mode" >>"$T/log" 2>&1
        check "$mode: $2" $?
    done
}

cat >"$T/bytes.tsr" <<EOF
data pix = npy "$T/pix.npy" ~b:[3] ~o:[5] ~dtype:"u8"
data keep = npy "$T/keep.npy" ~b:[3] ~o:[5] ~dtype:"bool"
data wide = npy "$T/wide.npy" ~b:[3] ~o:[5] ~dtype:"u8"
data flags = csv "$T/flags.csv" ~b:[2] ~o:[3] ~dtype:"bool"
EOF
cat >>"$T/bytes.tsr" <<'EOF'
let%op sums = pix ++ "b | r => b"
let%op wrapped = to_u8 (pix *. 3 + wide)
let%op masked = where keep (to_f32 pix) (-1.)
routine all = sums.forward; wrapped.forward; masked.forward
main = run all; print pix; print keep; print wide; print flags; print sums; print wrapped; print masked
EOF
expect_want bytes "u8 and bool data computed on print what NumPy computes"
cat >"$T/longs.tsr" <<EOF
data big = npy "$T/big.npy" ~b:[3] ~o:[4] ~dtype:"i64"
data ends = csv "$T/ends.csv" ~b:[2] ~o:[2] ~dtype:"i64"
EOF
cat >>"$T/longs.tsr" <<'EOF'
let%op mixed = (big *. 5 + 3) /. 2
let%op tops = big @^^ "b | r => b"
routine all = mixed.forward; tops.forward
main = run all; print big; print ends; print mixed; print tops
EOF
expect_want longs "i64 data computed on print what NumPy's int64 computes, exactly"

expect_error bytes "data 'pix': '$T/over.npy': cell (1, 2) holds 300, which does not fit uint8 (0 to 255)" \
    --data "pix=$T/over.npy"
expect_error bytes "data 'pix': '$T/float.npy': the tensor is u8 but the file holds float32 numbers: convert it with numpy's astype(numpy.uint8)" \
    --data "pix=$T/float.npy"
expect_error bytes "data 'flags': '$T/two.csv':1:3: cell (0, 1) holds 2, which does not fit bool (0 to 1)" \
    --data "flags=$T/two.csv"
expect_error longs "data 'big': '$T/u64.npy': cell (0, 1) holds 9223372036854775808, which does not fit int64 (-9223372036854775808 to 9223372036854775807)" \
    --data "big=$T/u64.npy"
expect_error longs "data 'ends': '$T/beyond.csv':1:3: cell (0, 1) holds 9223372036854775808, which does not fit int64 (-9223372036854775808 to 9223372036854775807)" \
    --data "ends=$T/beyond.csv"

# The header, the C API and the manifest.
printf 'data pix = npy "%s/pix.npy" ~b:[3] ~o:[5] ~dtype:"u8"\n' "$T" >"$T/lib.tsr"
printf 'data keep = npy "%s/keep.npy" ~b:[3] ~o:[5] ~dtype:"bool"\n' "$T" >>"$T/lib.tsr"
printf 'data big = npy "%s/big.npy" ~b:[3] ~o:[4] ~dtype:"i64"\n' "$T" >>"$T/lib.tsr"
cat >"$T/driver.c" <<'EOF'
#include <stdio.h>
#include "lib.h"
int main(void) {
    lib_state *s = lib_create(1);
    if (!s) return 1;
    uint8_t *pix = lib_pix(s), *keep = lib_keep(s);
    int64_t *big = lib_big(s);
    int pix_type = -1, keep_type = -1, big_type = -1;
    for (uint32_t b = 0; b < 3; b++) {
        const float *buffer = ((tsr_state *)s)->buffers[b];
        if (buffer == (const float *)(void *)pix) pix_type = tsr_state_buffer_dtype((tsr_state *)s, b);
        if (buffer == (const float *)(void *)keep) keep_type = tsr_state_buffer_dtype((tsr_state *)s, b);
        if (buffer == (const float *)(void *)big) big_type = tsr_state_buffer_dtype((tsr_state *)s, b);
    }
    printf("%d %d %d %d %d %d %d %d\n", pix[0], pix[6], keep[0] <= 1, pix_type == TSR_U8, keep_type == TSR_BOOL,
           big[0] == INT64_MAX, big[5] == INT64_MIN, big_type == TSR_I64);
    lib_destroy(s);
    return 0;
}
EOF
if "$TSRC" -c "$T/lib.tsr" -o "$T/lib.o" >"$T/log" 2>&1 && grep -q 'static inline uint8_t \*lib_pix(lib_state \*s)' "$T/lib.h" &&
   grep -q 'static inline uint8_t \*lib_keep(lib_state \*s)' "$T/lib.h" &&
   grep -q 'static inline int64_t \*lib_big(lib_state \*s)' "$T/lib.h" &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -Iruntime "$T/driver.c" "$T/lib.o" "$LIB" -lm -lpthread -o "$T/driver" \
      >>"$T/log" 2>&1 && [ "$("$T/driver")" = "255 0 1 1 1 1 1 1" ] &&
   "$PYTHON" -c 'import json, sys; t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}
assert t["pix"]["dtype"] == "uint8" and t["keep"]["dtype"] == "bool" and t["big"]["dtype"] == "int64", t' "$T/lib.json" \
      >>"$T/log" 2>&1; then pass
else fail "the header's accessors return uint8_t * and int64_t *, tsr_state_buffer_dtype says TSR_U8, TSR_BOOL and TSR_I64, the manifest uint8, bool and int64"; fi

# Python.
if "$TSRC" --shared "$T/lib.tsr" -o "$T/liblib.so" >"$T/log" 2>&1 &&
   PYTHONPATH=runtime/python "$PYTHON" -c 'import sys, numpy as np, tsr
m = tsr.load(sys.argv[1] + "/liblib.so")
pix, keep = m["pix"], m["keep"]
assert pix.dtype == np.uint8 and m.dtype("pix") == np.uint8 and (pix == np.load(sys.argv[1] + "/pix.npy")).all()
assert keep.dtype == np.bool_ and (keep == np.load(sys.argv[1] + "/keep.npy")).all()
m["pix"] = np.arange(15.0).reshape(3, 5) * 17
assert (m["pix"] == np.arange(15).reshape(3, 5) * 17).all()
m["keep"] = np.array([0.0, 2.5, -1.0, 0.0, 1.0])
assert (m["keep"] == np.array([False, True, True, False, True])).all()
try:
    m["pix"] = 300
    raise SystemExit("300 was assigned")
except tsr.Error as e:
    assert "does not fit uint8" in str(e), e
big = np.load(sys.argv[1] + "/big.npy")
assert m["big"].dtype == np.int64 and m.dtype("big") == np.int64 and (m["big"] == big).all()
m["big"] = big[::-1] - 1 + 1
assert (m["big"] == big[::-1]).all()
for bad in (2**63, 2.0**63):
    try:
        m["big"] = bad
        raise SystemExit(f"{bad} was assigned")
    except tsr.Error as e:
        assert "does not fit int64" in str(e), e' "$T" >>"$T/log" 2>&1; then pass
else fail "Python: uint8, bool and int64 views; 300 assigned to u8 and 2^63 to i64 are tsr.Errors, numbers to bool are tests against 0"; fi

# Ids from a --data file that fall outside the gathered axis: the message names that file (the
# program's own file holds valid ids) and the cell in NumPy's form.
sed 's|badids.npy|ids.npy|' tests/native/bad_positions.tsr >"$T/positions.tsr"
if "$TSRC" "$T/positions.tsr" -o "$T/positions" >"$T/log" 2>&1 && "$T/positions" >"$T/log" 2>&1 &&
   ! "$T/positions" --data ids=tests/native/data/badids.npy >"$T/log" 2>&1 &&
   grep -q "data 'ids': 'tests/native/data/badids.npy': cell (1, 2) holds 99" "$T/log"; then pass
else fail "ids out of range in a --data file: the message names that file"; fi

finish
