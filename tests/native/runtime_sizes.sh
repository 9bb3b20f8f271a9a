#!/bin/sh
# runtime_sizes.sh — run-time sizes (`?`, docs/runtime.md §16) end to end (run by tests/run.sh):
#   - runtime_mlp.tsr compiled with -c and driven from C (runtime_driver.c) with batches of 1,
#     37 and 128 in one process, against a reference computed in the driver; mismatched sizes
#     and unset sizes are error statuses with messages;
#   - the header and the manifest describe the sizes and the tensors they size;
#   - an executable takes its sizes from --size NAME=N at -O3 for the host, x86-64-v4 and
#     x86-64-v3, and prints what the reference executor prints for batches of 1, 7, 64 and 150
#     (the strip-mined nests' whole blocks of 64 and their remainders) at the levels this machine
#     runs (tests/host_cpus.sh), and a level it cannot run refuses to start with a message;
#   - a program over a run-time batch (runtime_mse.tsr: Nn.mse, whose mean reads `dim b` when the
#     program runs) prints the same bits as the same program with the batch written as a number,
#     at batches of 1, 70 and 130;
#   - a .npy data file gives its length to a `?` (runtime_data.tsr): files of 4 and 7 rows, the
#     executable as the reference executor; a file of the wrong row shape or a CSV file is a
#     message;
#   - every size of a class a data file gives its length to takes it (an input's too);
#   - bad --size requests and unset or mismatched sizes end with a message, never a crash;
#   - a checkpoint saved or loaded before a run-time length parameter's size is set is an error.
# Usage: runtime_sizes.sh TSRC LIBDIR (LIBDIR holds libtsr.a).  Last line: "N passed, N failed".
set -u
TSRC=$1
LIB=$2/libtsr.a
INC=runtime
. "$(dirname "$0")/harness.sh"
harness_start sizes

# Object mode: the driver.
if "$TSRC" -c tests/native/runtime_mlp.tsr -o "$T/runtime_mlp.o" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC tests/native/runtime_driver.c "$T/runtime_mlp.o" "$LIB" -lm -lpthread \
      -o "$T/driver" >"$T/log" 2>&1 && "$T/driver" >"$T/log" 2>&1 && grep -q '^ok$' "$T/log"; then pass
else fail "a C driver runs the object at batches of 1, 37 and 128 and sees mismatches refused"; fi
if grep -q 'static inline int runtime_mlp_set_x_b(runtime_mlp_state \*s, int64_t size)' "$T/runtime_mlp.h" &&
   grep -q 'RUNTIME_MLP_X_ROW_SIZE 784ULL' "$T/runtime_mlp.h" && grep -q 'runtime_mlp_x_dim0(' "$T/runtime_mlp.h" &&
   ! grep -q 'RUNTIME_MLP_X_SIZE' "$T/runtime_mlp.h"; then pass
else fail "the header has a setter per size and run-time lengths for the tensors they size"; fi
if /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); t={x["name"]:x for x in m["tensors"]}
s={x["name"]:x for x in m["sizes"]}
assert s["x.b"]["equals"]=="x.b" and s["t.b"]["equals"]=="x.b" and s["t.b"]["setter"]=="runtime_mlp_set_t_b"
assert t["x"]["dims"]==["x.b",784] and t["x"]["row_size"]==784 and "size" not in t["x"]
assert t["scores"]["dims"]==["x.b",10] and t["w1"]["dims"]==[32,784] and m["indexes"]==[]' "$T/runtime_mlp.json" \
      >"$T/log" 2>&1; then pass
else fail "the manifest lists the sizes and marks the dynamic axes"; fi

# Executables: the same numbers as the reference executor, at every CPU level this machine can
# run (tests/host_cpus.sh); a level it cannot run is compiled, and its executable refuses to start.
runnable=$(sh tests/host_cpus.sh native x86-64-v4 x86-64-v3)
for cpu in native x86-64-v4 x86-64-v3; do
    "$TSRC" -O3 --cpu=$cpu tests/native/runtime_train.tsr -o "$T/train_$cpu" >"$T/log" 2>&1 ||
        fail "runtime_train compiles for --cpu=$cpu"
done
for n in 1 7 64 150; do
    TSR_PRINT_EXACT=1 "$TSRC" --run --interp tests/native/runtime_train.tsr -- --size x.b=$n --size y.b=$n \
        >"$T/want" 2>"$T/log" || fail "the reference executor at batch $n"
    for cpu in $runnable; do
        if TSR_PRINT_EXACT=1 "$T/train_$cpu" --size x.b=$n --size y.b=$n >"$T/got" 2>"$T/log" &&
           cmp -s "$T/want" "$T/got"; then pass
        else fail "runtime_train at batch $n, --cpu=$cpu, prints what the reference executor prints"; fi
    done
done
for cpu in native x86-64-v4 x86-64-v3; do
    case " $runnable " in *" $cpu "*) continue ;; esac
    "$T/train_$cpu" --size x.b=1 --size y.b=1 >"$T/got" 2>"$T/log"
    if [ $? = 1 ] && [ ! -s "$T/got" ] && grep -q "generated for $cpu and uses instructions this CPU lacks" "$T/log"
    then pass
    else fail "runtime_train for --cpu=$cpu, which this machine cannot run, refuses to start with a message"; fi
done

# The same program with the batch written: the same bits (the shapes print `?` for the number).
for n in 1 70 130; do
    sed "s/\[?\]/[$n]/g" tests/native/runtime_mse.tsr >"$T/static.tsr"
    if "$TSRC" tests/native/runtime_mse.tsr -o "$T/mse" >"$T/log" 2>&1 && "$TSRC" "$T/static.tsr" -o "$T/static" >"$T/log" 2>&1 &&
       TSR_PRINT_EXACT=1 "$T/mse" --size x.b=$n --size t.b=$n 2>"$T/log" | sed "s/?|/$n|/" >"$T/got" &&
       TSR_PRINT_EXACT=1 "$T/static" >"$T/want" 2>"$T/log" && cmp -s "$T/want" "$T/got" && grep -q '^loss ' "$T/got"
    then pass
    else diff "$T/want" "$T/got" >"$T/log" 2>&1; fail "runtime_mse at batch $n prints what the program with [$n] prints"; fi
done

# A data file's length.
if "$TSRC" tests/native/runtime_data.tsr -o "$T/data" >"$T/log" 2>&1; then pass; else fail "runtime_data compiles"; fi
for f in points rows7; do
    TSR_PRINT_EXACT=1 "$TSRC" --run --interp tests/native/runtime_data.tsr -- --data xs=tests/native/data/$f.npy \
        >"$T/want" 2>"$T/log"
    rows=$(grep -c '^    ' "$T/want")
    if TSR_PRINT_EXACT=1 "$T/data" --data xs=tests/native/data/$f.npy >"$T/got" 2>"$T/log" && cmp -s "$T/want" "$T/got" &&
       [ "$rows" -gt 2 ]; then pass
    else fail "runtime_data with $f.npy: the executable prints what the reference executor prints"; fi
done
if grep -q '^    ' "$T/got" && [ "$(sed -n '/^xs /,/^w /p' "$T/got" | grep -c '^    ')" = 7 ]; then pass
else fail "the 7-row file gives xs 7 rows"; fi

# `shuffle` of a data item of run-time length permutes all of its rows (as many as the file has).
cat >"$T/shuffle.tsr" <<'TSR'
data xs = npy "tests/native/data/rows7.npy" ~b:[?] ~o:[3]
let%op total = xs ++ "... | ... => 0"
routine sum = total.forward
main = shuffle xs; print xs; run sum; print total
TSR
if TSR_PRINT_EXACT=1 "$TSRC" --run --interp "$T/shuffle.tsr" >"$T/want" 2>"$T/log" &&
   "$TSRC" "$T/shuffle.tsr" -o "$T/shuffle" >"$T/log" 2>&1 && TSR_PRINT_EXACT=1 "$T/shuffle" >"$T/got" 2>"$T/log" &&
   cmp -s "$T/want" "$T/got" && [ "$(sed -n '/^xs /,/^total /p' "$T/got" | grep -c '^    ')" = 7 ] &&
   ! sed -n '2p' "$T/got" | grep -q '^    -2.5 -2.25 -2$' && grep -A1 '^total' "$T/got" | grep -q '^    0$'; then pass
else fail "shuffle of a data item of run-time length"; fi

# Bad requests and unset or mismatched sizes.
check_error() { # check_error STATUS TEXT DESCRIPTION -- COMMAND…
    want=$1 text=$2 what=$3
    shift 4
    "$@" >"$T/log" 2>&1
    st=$?
    if [ $st = "$want" ] && grep -qF -- "$text" "$T/log"; then pass; else fail "$what (status $st)"; fi
}
E=$T/train_native
check_error 1 "run-time size 'x.b' is not set" "an unset size" -- "$E"
check_error 1 "run-time sizes 'x.b' = 3 and 'y.b' = 4 differ" "mismatched sizes" -- "$E" --size x.b=3 --size y.b=4
check_error 2 "has no run-time size named 'z.b'" "an unknown size" -- "$E" --size z.b=3
check_error 2 "'--size x.b=0' needs a positive integer size" "a size of 0" -- "$E" --size x.b=0
check_error 2 "'--size' takes NAME=N" "a malformed --size" -- "$E" --size 3
check_error 0 "NAME is one of: x.b y.b" "--help lists the sizes" -- "$E" --help
check_error 1 "run-time size 'x.b' is not set" "the reference executor: an unset size" -- \
    "$TSRC" --run --interp tests/native/runtime_train.tsr
check_error 1 "expected shape (?, 3), found (4, 2) ('?' the run-time length the file gives)" "a data file of another row shape" -- \
    "$T/data" --data xs=tests/native/data/wrong_shape.npy
check_error 1 "a CSV file cannot give a run-time length" "a CSV file for a run-time length" -- \
    "$T/data" --data xs=tests/native/data/points.csv

# Two data files that give their length to one run-time size class must agree, and --size cannot
# change a length a file gave (either would give a tensor new rows of zeros: issue 25).
/usr/bin/python3 -c 'import numpy as np, sys
d = sys.argv[1]
np.save(d + "/x7.npy", np.arange(21, dtype=np.float32).reshape(7, 3))
np.save(d + "/y7.npy", np.arange(7, dtype=np.float32).reshape(7, 1))
np.save(d + "/y4.npy", np.arange(4, dtype=np.float32).reshape(4, 1))' "$T"
cat >"$T/pair.tsr" <<TSR
data xs = npy "$T/x7.npy" ~b:[?] ~o:[3]
data ys = npy "$T/y7.npy" ~b:[?] ~o:[1]
let%op err = ({ w = 1.0; o = [1] } * xs - ys) ++ "... | ... => 0"
TSR
"$TSRC" "$T/pair.tsr" -o "$T/pair" >"$T/log" 2>&1 || fail "pair.tsr compiles"
check_error 0 "189" "two files of one size class with the same length" -- "$T/pair"
for run in "$T/pair" "$TSRC --run --interp $T/pair.tsr --"; do
    check_error 1 "data 'ys': '$T/y4.npy' has 4 rows, but data 'xs' file '$T/x7.npy' has 7: both give their length to run-time size 'xs.b'" \
        "two files of one size class with different lengths ($run)" -- $run --data ys="$T/y4.npy"
    check_error 1 "run-time size 'xs.b' is the length of data 'xs' file '$T/x7.npy' (7 rows); it cannot be set to 100" \
        "--size on a size a data file gave ($run)" -- $run --size xs.b=100
    check_error 1 "run-time size 'ys.b' equals 'xs.b', which is the length of data 'xs' file '$T/x7.npy' (7 rows)" \
        "--size on a size of the class a data file gave ($run)" -- $run --size ys.b=5
done
check_error 0 "189" "--size equal to the length a data file gave" -- "$T/pair" --size xs.b=7
# Items of '?' rows shuffled together join one size class: files of different lengths are refused
# when read (the shuffle permuted the longer one in blocks, breaking the pairs), equal ones keep
# every row beside its partner.
cat >"$T/shuffled.tsr" <<TSR
data xs = npy "$T/x7.npy" ~b:[?] ~o:[3]
data ys = npy "$T/y7.npy" ~b:[?] ~o:[1]
main = shuffle (xs, ys); print xs; print ys
TSR
"$TSRC" "$T/shuffled.tsr" -o "$T/shuffled" >"$T/log" 2>&1 || fail "shuffled.tsr compiles"
for run in "$T/shuffled" "$TSRC --run --interp $T/shuffled.tsr --"; do
    check_error 1 "data 'ys': '$T/y4.npy' has 4 rows, but data 'xs' file '$T/x7.npy' has 7: their run-time sizes 'ys.b' and 'xs.b' must be equal (the program shuffles the items together" \
        "items of '?' rows shuffled together, files of different lengths ($run)" -- $run --data ys="$T/y4.npy"
    if $run >"$T/out" 2>&1 && /usr/bin/python3 -c 'import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith(" ")]
xs, ys = rows[:7], rows[7:]
paired = all([float(v) for v in x] == [3 * float(y[0]) + k for k in range(3)] for x, y in zip(xs, ys))
sys.exit(not (len(ys) == 7 and sorted(float(y[0]) for y in ys) == list(range(7)) and paired))' "$T/out"
    then pass
    else fail "items of '?' rows shuffled together keep their rows paired ($run)" "$T/out"; fi
done
# An input combined with such data takes the file's length: no --size (it could only repeat it).
cat >"$T/mixed.tsr" <<TSR
data xs = npy "$T/x7.npy" ~b:[?] ~o:[3]
input { x; b = [?]; o = [3] }
let%op total = (xs + x *. 0) ++ "... | ... => 0"
TSR
if "$T/pair" --help >"$T/help" 2>&1 && grep -q "sizes that data files give (the length of their first axis): xs.b ys.b$" "$T/help" &&
   ! grep -q -- "--size NAME=N" "$T/help"; then pass
else fail "--help lists the sizes data files give apart from those --size sets"; fi
for run in "$TSRC --run --interp $T/mixed.tsr --" "$T/mixed"; do
    [ "$run" = "$T/mixed" ] && { "$TSRC" "$T/mixed.tsr" -o "$T/mixed" >"$T/log" 2>&1 || fail "mixed.tsr compiles"; }
    check_error 0 "210" "an input in the size class of a data file takes the file's length ($run)" -- $run
done

# A parameter of run-time length (an inline definition over a `?` axis): a checkpoint saved or
# loaded before its size is set is an error naming it (a save left it out, and the file did
# not load once the size was set); once set, it round-trips.
printf 'input { x; b = [?]; o = [3] }\nlet%%op w = { w; i = [3]; o = [2] }\nlet%%op y = w * (x + { h0 = 0.5; b = [?]; o = [3] })\nroutine run = y.forward\n' >"$T/rtparam.tsr"
cat >"$T/rtparam.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "rtparam.h"
int main(int argc, char **argv) {
    (void)argc;
    char early[4096], late[4096];
    snprintf(early, sizeof early, "%s/early.npz", argv[1]);
    snprintf(late, sizeof late, "%s/late.npz", argv[1]);
    rtparam_state *s = rtparam_create(1), *t = rtparam_create(2);
    int bad = 0;
    if (rtparam_save(s, early) == 0 || !strstr(rtparam_last_error(), "'h0' has a run-time size that is not set")) bad |= 1;
    FILE *f = fopen(early, "rb");
    if (f) bad |= 2, fclose(f);
    rtparam_set_x_b(s, 4);
    for (int i = 0; i < 12; i++) rtparam_h0(s)[i] = (float)i;
    if (rtparam_save(s, late) != 0) bad |= 4;
    if (rtparam_load(t, late) == 0 || !strstr(rtparam_last_error(), "'h0' has a run-time size that is not set")) bad |= 8;
    rtparam_set_x_b(t, 4);
    if (rtparam_load(t, late) != 0 || rtparam_h0(t)[5] != 5.0f) bad |= 16;
    rtparam_destroy(s);
    rtparam_destroy(t);
    printf("%d\n", bad);
    return bad;
}
C
if "$TSRC" -c "$T/rtparam.tsr" -o "$T/rtparam.o" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC "$T/rtparam.c" "$T/rtparam.o" "$LIB" -lm -lpthread -ldl -o "$T/rtparam" >>"$T/log" 2>&1 &&
   "$T/rtparam" "$T" >>"$T/log" 2>&1; then pass
else fail "a checkpoint of a parameter of run-time length before its size is set is an error; after, it round-trips"; fi

summary
[ $failed = 0 ]
