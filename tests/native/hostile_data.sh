#!/bin/sh
# hostile_data.sh — data files that are not what they claim (run by tests/run.sh).
#
# Two programs, one reading '$T/p.npy' and one reading '$T/q.csv' (both of shape (4, 3)), are
# compiled once; then each case puts a hostile thing at that path -- a directory, a FIFO with
# and without a writer, a link to /dev/zero, a .npy with a gigabyte after its data, CSV files
# cut inside the last number or before the last newline, an endless line, a sparse gigabyte of
# NUL bytes -- and both the executable (under a 256 MiB memory limit) and `tsrc --run
# --interp` must stop within the time limit with exit status 1 and exactly the expected
# message.  A third program loads the checkpoint '$T/m.npz' (docs/runtime.md §14), which meets
# a FIFO with a writer, a link to /dev/zero, a sparse gigabyte, an archive whose directory
# claims a 2 GiB member, one whose end record counts fewer entries than its directory holds, and
# (loaded by a program that shuffles) a count of 2^48 shuffles.  A fourth gives its length to a run-time size from a .npy whose header
# claims 1.2 GB over 32 bytes.  Usage: hostile_data.sh TSRC.  Last line: "N passed, N failed".
set -u
TSRC=$1
T=$(mktemp -d /tmp/tsrc-hostile.XXXXXX)
writer=
trap 'if [ -n "$writer" ]; then kill "$writer" 2>/dev/null; fi; rm -rf "$T"' EXIT
passed=0
failed=0

printf 'data p = npy "%s/p.npy" ~b:[4] ~o:[3]\n' "$T" >"$T/npy.tsr"
printf 'data q = csv "%s/q.csv" ~b:[4] ~o:[3]\n' "$T" >"$T/csv.tsr"
for prog in npy csv; do
    if ! "$TSRC" "$T/$prog.tsr" -o "$T/$prog" >"$T/log" 2>&1; then
        echo "FAIL $prog.tsr does not compile"
        sed -n '1,10s/^/    /p' "$T/log"
        echo "0 passed, 1 failed"
        exit 1
    fi
done

# expect CASE PROGRAM MESSAGE: both runs of PROGRAM fail with "data 'NAME': 'PATH'MESSAGE".
expect() {
    case $2 in npy) data="data 'p': '$T/p.npy'" ;; *) data="data 'q': '$T/q.csv'" ;; esac
    (ulimit -v 262144; exec timeout 20 "$T/$2") >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "$T/$2: error: $data$3" ] && [ ! -s "$T/out" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $1: the executable (status $st), expected '$data$3'"
        sed -n '1,5s/^/    /p' "$T/err"
    fi
    timeout 20 "$TSRC" --run --interp "$T/$2.tsr" >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "tsrc: error: run time: $data$3" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $1: tsrc --run --interp (status $st), expected '$data$3'"
        sed -n '1,5s/^/    /p' "$T/err"
    fi
}

# clear_path NAME: remove whatever is at $T/NAME (files, links, FIFOs, directories), so that
# what is written next is a new regular file (not written through a link to /dev/zero).
clear_path() { rm -rf "${T:?}/$1"; }

# A .npy header for float32 data of shape (4, 3), padded to 128 bytes as numpy writes it (the
# header's text is 118 bytes: octal 166).
dict="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }"
printf '\223NUMPY\001\000\166\000%s%*s\n' "$dict" $((118 - ${#dict} - 1)) '' >"$T/header.bin"

for prog in npy csv; do
    name=p.npy
    [ $prog = csv ] && name=q.csv
    clear_path $name
    mkdir "$T/$name"
    expect "$prog: a directory" $prog ": is a directory, not a regular file"
    clear_path $name
    mkfifo "$T/$name"
    expect "$prog: a FIFO without a writer" $prog ": is a FIFO (named pipe), not a regular file"
    clear_path $name
    ln -s /dev/zero "$T/$name"
    expect "$prog: a link to /dev/zero" $prog ": is a character device, not a regular file"
done

# A FIFO that a writer fills with a .npy header and endless zeros.
clear_path p.npy
mkfifo "$T/p.npy"
(cat "$T/header.bin" /dev/zero >"$T/p.npy") 2>/dev/null &
writer=$!
expect "npy: a FIFO streaming endless data" npy ": is a FIFO (named pipe), not a regular file"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
writer=

# A gigabyte (sparse) after the data: counted from the file's size, not read.
clear_path p.npy
{ cat "$T/header.bin"; head -c 48 /dev/zero; } >"$T/p.npy"
truncate -s $((128 + 48 + 1073741824)) "$T/p.npy"
expect "npy: a gigabyte after the data" npy ": has 1073741824 bytes after its 48 data bytes"

# CSV files cut short: inside the last number, before the last newline, after a whole row.
clear_path q.csv
printf '1,2,3\n4,5,6\n7,8,9\n10,11,1' >"$T/q.csv"
expect "csv: cut inside the last number" csv \
    ":4:8: the last line does not end with a newline: the file looks truncated"
printf '1,2,3\n4,5,6\n7,8,9\n10,11,12' >"$T/q.csv"
expect "csv: cut before the last newline" csv \
    ":4:9: the last line does not end with a newline: the file looks truncated"
printf '1,2,3\n4,5,6\n7,8,9\n' >"$T/q.csv"
expect "csv: cut after a row" csv ": has 3 rows, expected 4 for shape (4, 3)"

# A line longer than a row of three numbers can need, 2 MiB of "1 " without a newline, stops at
# the limit, 1 MiB + 512 bytes per number; a sparse gigabyte of NUL bytes at its first byte (no
# text holds one: a binary file, or UTF-16, whose ASCII characters have a NUL byte each).
awk 'BEGIN { for (i = 0; i < 1048576; i++) printf "1 " }' >"$T/q.csv"
expect "csv: a 2 MiB line" csv ":1:1050113: line is longer than 1050112 bytes, more than shape (4, 3) needs"
awk 'BEGIN { for (i = 0; i < 200000; i++) printf "%d,%d,%d\r", i, i, i }' >"$T/q.csv"
expect "csv: 2 MB of lines ended by '\\r' alone" csv ":1:1050113: line is longer than 1050112 bytes, more than shape (4, 3) needs (its lines end in '\\r' alone, old Mac OS text, where CSV lines end in '\\n')"
clear_path q.csv
truncate -s 1073741824 "$T/q.csv"
expect "csv: a gigabyte of NUL bytes" csv ":1:1: holds a NUL byte: this is no CSV text (a binary file, or text in UTF-16)"
printf '1\0002\0003\000\n\000' >"$T/q.csv"
expect "csv: a NUL byte inside a number" csv ":1:2: holds a NUL byte: this is no CSV text (a binary file, or text in UTF-16)"

# Checkpoints: the loader reads the end of the file and the members the model needs, never the
# whole file, and never more than the model's arrays can hold.
printf 'let%%op w = { w = [1.; 2.; 3.] }\nmain = load "%s/m.npz"; print w\n' "$T" >"$T/ckpt.tsr"
if ! "$TSRC" "$T/ckpt.tsr" -o "$T/ckpt" >"$T/log" 2>&1; then
    failed=$((failed + 1)); echo "FAIL ckpt.tsr does not compile"; sed -n '1,10s/^/    /p' "$T/log"
fi
expect_checkpoint() {
    (ulimit -v 262144; exec timeout 20 "$T/ckpt") >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "$T/ckpt: error: checkpoint '$T/m.npz'$2" ] && [ ! -s "$T/out" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL $1: the executable (status $st)"; sed -n '1,5s/^/    /p' "$T/err"
    fi
    timeout 20 "$TSRC" --run --interp "$T/ckpt.tsr" >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "tsrc: error: run time: checkpoint '$T/m.npz'$2" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL $1: tsrc --run --interp (status $st)"; sed -n '1,5s/^/    /p' "$T/err"
    fi
}
mkfifo "$T/m.npz"
(cat /dev/zero >"$T/m.npz") 2>/dev/null &
writer=$!
expect_checkpoint "checkpoint: a FIFO streaming zeros" " is not a regular file"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
writer=
clear_path m.npz
ln -s /dev/zero "$T/m.npz"
expect_checkpoint "checkpoint: a link to /dev/zero" " is not a regular file"
clear_path m.npz
truncate -s 1073741824 "$T/m.npz"
expect_checkpoint "checkpoint: a sparse gigabyte" \
    " is not a readable .npz file: no zip directory at its end (not a zip file, or cut short)"
clear_path m.npz
/usr/bin/python3 -c '
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z: z.writestr("w.npy", b"x" * 100)
b = bytearray(open(sys.argv[1], "rb").read())
c = b.rindex(b"PK\x01\x02")
b[c + 20:c + 28] = (0x7fffffff).to_bytes(4, "little") * 2
open(sys.argv[1], "wb").write(b)' "$T/m.npz"
expect_checkpoint "checkpoint: a member claiming 2 GiB" \
    ": array 'w' holds 2147483647 bytes, more than its shape can need"
# An end record counting fewer entries than the directory holds: the entry it leaves out (here a
# second 'w', which numpy.load would take) would be a member no reader here sees.
clear_path m.npz
/usr/bin/python3 -c '
import io, sys, zipfile
import numpy as np
def npy(a):
    f = io.BytesIO(); np.save(f, np.asarray(a, np.float32)); return f.getvalue()
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("w.npy", npy([1, 2, 3])); z.writestr("w.npy", npy([7, 8, 9]))
b = bytearray(open(sys.argv[1], "rb").read())
e = b.rindex(b"PK\x05\x06")
b[e + 8:e + 12] = (1).to_bytes(2, "little") * 2
open(sys.argv[1], "wb").write(b)' "$T/m.npz" 2>/dev/null
expect_checkpoint "checkpoint: an end record counting one entry of two" \
    " is not a readable .npz file: its zip directory holds more than the entries its end record counts"
# A shuffle count no run reached (2^48 - 1, past the 2^20 allowed beyond the runs): replaying it
# would never end, so the load is refused at once.
printf 'data d = range ~b:[4] ~o:[1]\nmain = shuffle d; load "%s/m.npz"; print d\n' "$T" >"$T/ckpt.tsr"
if ! "$TSRC" "$T/ckpt.tsr" -o "$T/ckpt" >"$T/log" 2>&1; then
    failed=$((failed + 1)); echo "FAIL ckpt.tsr (shuffle) does not compile"; sed -n '1,10s/^/    /p' "$T/log"
fi
clear_path m.npz
/usr/bin/python3 -c '
import sys
import numpy as np
top = float(2 ** 24 - 1)
np.savez(sys.argv[1], **{"tsrc.runs": np.array([0, 5], np.float32),
                         "tsrc.shuffles": np.array([[top, top]], np.float32)})' "$T/m.npz"
expect_checkpoint "checkpoint: 2^48 shuffles" \
    " counts 281474976710655 shuffles of a data set in a run of 5 routine runs: a damaged file (more than 2^20 shuffles beyond the runs are refused)"
# A checkpoint of a program with another number of shuffle statements: said so, not as a shape.
clear_path m.npz
/usr/bin/python3 -c '
import sys
import numpy as np
np.savez(sys.argv[1], **{"tsrc.runs": np.array([0, 5], np.float32),
                         "tsrc.shuffles": np.array([[0, 1], [0, 2]], np.float32)})' "$T/m.npz"
expect_checkpoint "checkpoint: two shuffle statements' counts for one" \
    " counts the permutations of 2 shuffle statements, and this program has 1: it was saved by a program that shuffles its data otherwise, whose data order cannot be resumed (a load that lists the tensors, load \"FILE\" [w; b], takes them alone)"

# A .npy file that gives its length to a run-time size (`~b:[?]`) and whose header claims shape
# (100000000, 3), 1.2 GB, over 32 bytes of data: refused from the file's size before anything
# is allocated, within the 256 MiB limit.
printf 'data r = npy "%s/r.npy" ~b:[?] ~o:[3]\nlet%%op total = r ++ "... | ... => 0"\n' "$T" >"$T/rt.tsr"
/usr/bin/python3 -c '
import sys
head = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (100000000, 3), }"
head += " " * (117 - len(head)) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + bytes(32))' "$T/r.npy"
msg="data 'r': '$T/r.npy': is truncated: its header declares shape (100000000, 3), 1200000000 data bytes, but 32 follow it"
if "$TSRC" "$T/rt.tsr" -o "$T/rt" >"$T/log" 2>&1; then
    (ulimit -v 262144; exec timeout 20 "$T/rt") >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "$T/rt: error: $msg" ]; then passed=$((passed + 1))
    else failed=$((failed + 1)); echo "FAIL a .npy of run-time length claiming 1.2 GB (status $st)"; sed -n '1,5s/^/    /p' "$T/err"; fi
    timeout 20 "$TSRC" --run --interp "$T/rt.tsr" >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "tsrc: error: run time: $msg" ]; then passed=$((passed + 1))
    else failed=$((failed + 1)); echo "FAIL a .npy of run-time length claiming 1.2 GB, --interp (status $st)"; sed -n '1,5s/^/    /p' "$T/err"; fi
else
    failed=$((failed + 1)); echo "FAIL rt.tsr does not compile"; sed -n '1,5s/^/    /p' "$T/log"
fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
