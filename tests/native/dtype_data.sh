#!/bin/sh
# dtype_data.sh — int32 data and token files end to end (run by tests/run.sh; docs/runtime.md §4,
# §9, §13, §14, docs/python.md), in both executors (the executable and `tsrc --run --interp`):
#   - an i32 .npy item (int64 file, values up to int32's ends) prints its integers exactly, and a
#     one-cell i32 item through %d and %f;
#   - an int64 file with a value beyond int32 and a float32 file for the i32 item stop with
#     status 1 and the message naming the cell and value, or both types;
#   - a `tokens` item with sequential windows over a run-time batch prints exactly what NumPy's
#     sliding windows of the file give, as many rows as whole windows the file holds;
#   - random windows: the same in two runs and in both executors, every row a window of the file,
#     new windows after `shuffle`, other windows with another ~seed;
#   - a cut token file, a bad magic and a 100-byte file stop with status 1 and their messages;
#   - the header's accessor of the i32 tensor returns int32_t *, tsr_state_buffer_dtype says
#     TSR_I32 (-1 for a NULL state), and the manifest's dtype is "int32";
#   - Python: the tensor is an int32 view; assigning 2.5 raises tsr.Error.
# Usage: dtype_data.sh TSRC LIBDIR PYTHON.  Last line: "N passed, N failed".
set -u
PYTHON=${3:-/usr/bin/python3}
. "$(dirname "$0")/harness.sh"
harness_tools "$1" "$2"
harness_start dtype

# The files, and what NumPy says the programs print.
"$PYTHON" - "$T" >"$T/log" 2>&1 <<'EOF' || { fail "NumPy writes the data files"; finish; exit 1; }
import sys, numpy as np
d = sys.argv[1]
ids = np.arange(32, dtype=np.int64).reshape(4, 8) * 1000003 - 7
ids[0, 3], ids[1, 4] = 2**31 - 1, -2**31
np.save(f"{d}/ids.npy", ids)
with open(f"{d}/ids.want", "w") as f:
    f.write("".join("    " + " ".join(str(v) for v in row) + "\n" for row in ids))
big = ids.copy(); big[2, 5] = 2**32
np.save(f"{d}/big.npy", big)
np.save(f"{d}/float.npy", ids.astype(np.float32))
np.save(f"{d}/one.npy", np.array([-123456789], dtype=np.int32))
def token_file(path, tokens, version=1, magic=20240520, count=None):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = magic, version, len(tokens) if count is None else count
    with open(path, "wb") as f:
        f.write(header.tobytes() + tokens.astype(np.uint16 if version == 1 else np.uint32).tobytes())
tokens = (np.arange(75) * 37 % 50257).astype(np.uint16)
token_file(f"{d}/t.bin", tokens)
windows = np.lib.stride_tricks.sliding_window_view(tokens, 9)[::8]
with open(f"{d}/seq.want", "w") as f:
    f.write("".join("    " + " ".join(str(v) for v in row) + "\n" for row in windows))
np.save(f"{d}/tokens.npy", tokens.astype(np.int64))
token_file(f"{d}/cut.bin", tokens, count=100)
token_file(f"{d}/magic.bin", tokens, magic=12345)
open(f"{d}/short.bin", "wb").write(bytes(100))
EOF

printf 'data ids = npy "%s/ids.npy" ~b:[4] ~o:[8] ~dtype:"i32"\n' "$T" >"$T/ids.tsr"
printf 'data one = npy "%s/one.npy" ~o:[1] ~dtype:"i32"\n' "$T" >>"$T/ids.tsr"
cat >>"$T/ids.tsr" <<'EOF'
main = print ids; print "one %d %.1f" one one
EOF
printf 'data toks = tokens "%s/t.bin" ~b:[?] ~o:[9]\nmain = print toks\n' "$T" >"$T/seq.tsr"
for seed in 3 4; do
    printf 'data toks = tokens "%s/t.bin" ~b:[6] ~o:[9] ~windows:"random" ~seed:%s\n' "$T" $seed >"$T/random$seed.tsr"
    printf 'main = print toks; shuffle toks; print toks\n' >>"$T/random$seed.tsr"
done
for p in ids seq random3 random4; do
    "$TSRC" "$T/$p.tsr" -o "$T/$p" >"$T/log" 2>&1 || fail "$p.tsr compiles"
done

run_both ids
{ echo "ids : 4|8"; cat "$T/ids.want"; } >"$T/ids.grid"
for mode in native interp; do
    sed -n '1,5p' "$T/ids.$mode" >"$T/got"
    cp "$T/ids.$mode.err" "$T/log"
    if cmp -s "$T/got" "$T/ids.grid" && [ "$(sed -n 6p "$T/ids.$mode")" = "one -123456789 -123456789.0" ]; then pass
    else fail "$mode: an i32 .npy item prints its integers, %d and %f of its first cell"; fi
done
expect_error ids "data 'ids': '$T/big.npy': cell (2, 5) holds 4294967296, which does not fit int32 (-2147483648 to 2147483647)" \
    --data "ids=$T/big.npy"
expect_error ids "data 'ids': '$T/float.npy': the tensor is i32 but the file holds float32 numbers: convert it with numpy's astype(numpy.int32)" \
    --data "ids=$T/float.npy"

# Sequential windows over a run-time batch: 74 / 8 = 9 whole windows.
run_both seq
for mode in native interp; do
    sed -n '2,$p' "$T/seq.$mode" >"$T/got"
    cp "$T/seq.$mode.err" "$T/log"
    if cmp -s "$T/got" "$T/seq.want"; then pass
    else fail "$mode: sequential token windows are NumPy's sliding windows, 9 rows"; fi
done
expect_error seq "data 'toks': '$T/cut.bin': is truncated: its header declares 100 tokens (200 bytes), but 150 bytes follow it" \
    --data "toks=$T/cut.bin"
expect_error seq "data 'toks': '$T/magic.bin': is not a token file: its header starts with 12345, not the magic number 20240520" \
    --data "toks=$T/magic.bin"
expect_error seq "data 'toks': '$T/short.bin': is not a token file: it has 100 bytes, less than the 1024-byte header" \
    --data "toks=$T/short.bin"

# Random windows.
run_both random3
cp "$T/random3.native" "$T/first"
run_both random3
run_both random4
if "$PYTHON" - "$T" >"$T/log" 2>&1 <<'EOF'; then pass; else fail "random token windows"; fi
import sys, numpy as np
d = sys.argv[1]
def grids(name):
    lines = open(f"{d}/{name}").read().split("\n")
    rows = [list(map(int, l.split())) for l in lines if l.startswith("    ")]
    assert len(rows) == 12, rows
    return np.array(rows[:6]), np.array(rows[6:])
tokens = np.load(f"{d}/tokens.npy")
windows = {tuple(w) for w in np.lib.stride_tricks.sliding_window_view(tokens, 9)}
before, after = grids("random3.native")
assert all(tuple(r) in windows for r in np.concatenate([before, after])), "a row is not a window of the file"
assert (before != after).any(), "shuffle drew the same windows"
assert open(f"{d}/first").read() == open(f"{d}/random3.native").read(), "two runs differ"
assert open(f"{d}/random3.interp").read() == open(f"{d}/random3.native").read(), "the executors differ"
assert (grids("random4.native")[0] != before).any(), "another seed drew the same windows"
EOF

# The header, the C API and the manifest.
printf 'data ids = npy "%s/ids.npy" ~b:[4] ~o:[8] ~dtype:"i32"\n' "$T" >"$T/lib.tsr"
cat >"$T/driver.c" <<'EOF'
#include <stdio.h>
#include "lib.h"
int main(void) {
    lib_state *s = lib_create(1);
    if (!s) return 1;
    int32_t *ids = lib_ids(s);
    printf("%d %d %d %d\n", ids[3], ids[12], tsr_state_buffer_dtype((tsr_state *)s, 0),
           tsr_state_buffer_dtype(NULL, 0));
    lib_destroy(s);
    return 0;
}
EOF
if "$TSRC" -c "$T/lib.tsr" -o "$T/lib.o" >"$T/log" 2>&1 && grep -q 'static inline int32_t \*lib_ids(lib_state \*s)' "$T/lib.h" &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -Iruntime "$T/driver.c" "$T/lib.o" "$LIB" -lm -lpthread -o "$T/driver" \
      >"$T/log" 2>&1 && [ "$("$T/driver")" = "2147483647 -2147483648 1 -1" ] &&
   "$PYTHON" -c 'import json, sys; t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}
assert t["ids"]["dtype"] == "int32", t' "$T/lib.json" >>"$T/log" 2>&1; then pass
else fail "the header's accessor returns int32_t *, tsr_state_buffer_dtype says TSR_I32, the manifest int32"; fi

# Python.
if "$TSRC" --shared "$T/lib.tsr" -o "$T/liblib.so" >"$T/log" 2>&1 &&
   PYTHONPATH=runtime/python "$PYTHON" -c 'import sys, numpy as np, tsr
m = tsr.load(sys.argv[1] + "/liblib.so")
ids = m["ids"]
assert ids.dtype == np.int32 and m.dtype("ids") == np.int32 and (ids == np.load(sys.argv[1] + "/ids.npy")).all()
m["ids"] = np.arange(32.0).reshape(4, 8)
assert (m["ids"] == np.arange(32).reshape(4, 8)).all()
try:
    m["ids"] = 2.5
    raise SystemExit("2.5 was assigned")
except tsr.Error as e:
    assert "not an integer" in str(e), e' "$T" >>"$T/log" 2>&1; then pass
else fail "Python: an int32 view; a fraction assigned is a tsr.Error"; fi

finish
