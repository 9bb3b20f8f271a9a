#!/bin/sh
# exe_options.sh — the command line of generated executables (run by tests/run.sh).
#
# tests/native/options.tsr is compiled once; its executable and `tsrc --run --interp … --`
# must answer --help (every option with its default, status 0), unknown options, bad values
# and missing values (status 2, one message), --data with an unknown name (2) or a file of
# another shape (1, naming the item, the file and both shapes), an option that takes a loop
# outside its index's range (1) or asks it for a negative count (1), and --seed / --threads as
# documented, identically; a program with two bad data files prints an error line for each;
# --help with a value, numbers out of range, and a --save path that cannot be written (said
# before main runs) are errors; a run whose standard output fails saves nothing; a bad
# TSR_NUM_THREADS is ignored with a warning.
# Usage: exe_options.sh TSRC.  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=$(mktemp -d /tmp/tsrc-options.XXXXXX)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL $1"; sed -n '1,8s/^/    /p' "$T/err" "$T/out"; }

cp tests/native/options.tsr "$T/opts.tsr"
if ! "$TSRC" "$T/opts.tsr" -o "$T/opts" >"$T/log" 2>&1; then
    echo "FAIL options.tsr does not compile"; sed -n '1,10s/^/    /p' "$T/log"; echo "0 passed, 1 failed"; exit 1
fi

# expect CASE STATUS MESSAGE ARGS…: the executable, run as ./opts in $T, and the reference
# executor both end with STATUS and print exactly "PROGRAM: error: MESSAGE", PROGRAM being what
# each was called (the reference executor names it 'opts', after the input, and words run-time
# errors "tsrc: error: run time: MESSAGE", docs/cli.md).
expect() {
    name=$1 want=$2 msg=$3
    shift 3
    (cd "$T" && exec timeout 20 ./opts "$@") >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = "$want" ] && [ "$(cat "$T/err")" = "./opts: error: $msg" ]; then ok; else bad "$name: the executable (status $st)"; fi
    (cd "$T" && exec timeout 20 "$TSRC" --run --interp opts.tsr -- "$@") >"$T/out" 2>"$T/err"
    st=$?
    if [ "$want" = 1 ]; then full="tsrc: error: run time: $msg"
    else full="opts: error: $(printf '%s' "$msg" | sed 's|\./opts --help|opts --help|')"; fi
    if [ $st = "$want" ] && [ "$(cat "$T/err")" = "$full" ]; then ok; else bad "$name: tsrc --run --interp (status $st)"; fi
}

see='(./opts --help lists the options)'
expect unknown 2 "unknown option '--epoch'; did you mean '--epochs'? $see" --epoch 3
expect unknown-far 2 "unknown option '--nothing_near' $see" --nothing_near 3
expect positional 2 "unexpected argument 'extra' $see" extra
expect no-value 2 "option '--epochs' needs a value $see" --epochs
expect not-integer 2 "option '--epochs' needs an integer, not '2.5' $see" --epochs 2.5
expect not-number 2 "option '--lr' needs a finite number, not 'inf' $see" --lr inf
# lr is read among f32 values (w =- lr * w): a value f32 cannot hold would be infinity there
expect f32-range 2 "option '--lr' = 1e300 is beyond f32's range (about ±3.4e38): the program computes with it among f32 values $see" --lr 1e300
expect help-value 2 "'--help' takes no value $see" --help=xs=a.npy
expect integer-range 2 "option '--epochs' needs an integer from -2^53 to 2^53 (9007199254740992), not '9007199254740993' $see" --epochs 9007199254740993
expect number-range 2 "option '--lr' needs a finite number (at most about ±1.8e308), not '1e400' $see" --lr 1e400
mkdir "$T/adir"
expect save-directory 1 "cannot write checkpoint 'adir': it is a directory" --save adir
expect save-no-directory 1 "cannot write checkpoint 'nodir/x.npz': No such file or directory" --save nodir/x.npz
expect bad-seed 2 "'--seed' needs a non-negative integer, not '-3' $see" --seed -3
expect bad-threads 2 "'--threads' needs a number of threads from 1 to 4096, not '0' $see" --threads 0
expect data-name 2 "'--data ys=a.npy': the program has no data named 'ys' $see" --data ys=a.npy
expect data-form 2 "'--data' takes NAME=PATH, not 'xs' $see" --data xs
wrong=$(pwd)/tests/native/data/wrong_shape.npy
expect data-shape 1 "data 'xs': '$wrong': expected shape (4, 3), found (4, 2)" --data "xs=$wrong"
expect loop-range 1 "the loop runs 'step' over 0..6, outside its range 0..5: its bounds come from --epochs 7" --epochs 7
expect loop-negative 1 "the loop of 'step' would run from 0 to -2, a negative number of times: its bounds come from --epochs -1, and a count below zero is a mistake" --epochs -1

# An integer option read among i32 values: a value beyond i32 would be clamped, then wrap.
printf '%s\n' 'option k = 3' 'data ids = range ~o:[3] ~dtype:"i32"' 'let%op a = ids + k' 'routine r = a.forward' \
    'main = run r; print a' >"$T/ints.tsr"
if "$TSRC" "$T/ints.tsr" -o "$T/ints" >"$T/log" 2>&1 && (cd "$T" && ./ints --k 3000000000) >"$T/out" 2>"$T/err"; then
    bad "i32-range: the executable ran"
elif [ "$(cat "$T/err")" = "./ints: error: option '--k' = 3000000000 is beyond i32's range (-2147483648 to 2147483647): the program computes with it among i32 values (./ints --help lists the options)" ] &&
     (cd "$T" && ./ints --k=-2147483648) >"$T/out" 2>&1 && grep -q -- "-2147483648 -2147483647 -2147483646" "$T/out"; then ok
else bad "i32-range: an integer option beyond i32, read among i32 values"; fi

# A number that underflows to a subnormal or to zero is a number (strtod's ERANGE is not an error).
if (cd "$T" && ./opts --lr 1e-310 --epochs 1) >"$T/out" 2>"$T/err" && grep -q "lr 1e-310" "$T/out"; then ok
else bad "--lr 1e-310 (a subnormal) is accepted"; fi
# Output that cannot be written fails the run, and a run that fails saves nothing; --help too.
(cd "$T" && ./opts --save lost.npz >/dev/full) 2>"$T/err"
if [ $? = 1 ] && grep -q "cannot write to the standard output" "$T/err" && [ ! -e "$T/lost.npz" ]; then ok
else bad "a run whose standard output fails saves no checkpoint"; fi
(cd "$T" && ./opts --help >/dev/full) 2>"$T/err"
if [ $? = 1 ] && grep -q "cannot write to the standard output" "$T/err"; then ok; else bad "--help into a full disk"; fi

# --help: every option and its default, on stdout, status 0; the same from both executors.
(cd "$T" && ./opts --help) >"$T/help" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ ! -s "$T/err" ] && grep -q -- '--epochs N  *an integer (default 2)$' "$T/help" &&
   grep -q -- '--lr X  *a number (default 0.1)$' "$T/help" && grep -q -- '--unused_default N  *an integer (default 7)$' "$T/help" &&
   grep -q -- '--seed N .*(default 0)$' "$T/help" && grep -q -- '--threads N' "$T/help" &&
   grep -q -- 'NAME is one of: xs$' "$T/help"; then ok; else bad "--help (status $st)"; cat "$T/help"; fi
(cd "$T" && "$TSRC" --run --interp opts.tsr -- --help) >"$T/help2" 2>&1
sed 's|^usage: \./opts|usage: opts|' "$T/help" >"$T/help1"
if cmp -s "$T/help1" "$T/help2"; then ok; else bad "--help: the reference executor prints another help"; diff "$T/help1" "$T/help2"; fi

# --seed: a parameter without initial values depends on it; the compile-time --seed is the
# default; --threads does not change a bit.
printf 'let%%op w = { w; o = [4] }\nmain = print w\n' >"$T/seeded.tsr"
"$TSRC" "$T/seeded.tsr" -o "$T/seeded" --seed 5 >"$T/log" 2>&1
"$T/seeded" >"$T/s5" && "$T/seeded" --seed 5 >"$T/s5b" && "$T/seeded" --seed=6 --threads 1 >"$T/s6" &&
    "$TSRC" --run --interp "$T/seeded.tsr" -- --seed 6 >"$T/s6i"
if cmp -s "$T/s5" "$T/s5b" && ! cmp -s "$T/s5" "$T/s6" && cmp -s "$T/s6" "$T/s6i"; then ok; else bad "--seed"; fi

# TSR_NUM_THREADS that is not a whole number, 1 or more, is ignored and said (once, status 0, the
# same output); a good one, or --threads beside a bad one, says nothing.
for v in abc 4abc 0 -1; do
    TSR_NUM_THREADS=$v "$T/seeded" >"$T/out" 2>"$T/err"
    if [ $? = 0 ] && cmp -s "$T/out" "$T/s5" &&
       [ "$(cat "$T/err")" = "$T/seeded: warning: TSR_NUM_THREADS='$v' is not a number of threads (a whole number, 1 or more): one thread per CPU" ]
    then ok; else bad "TSR_NUM_THREADS=$v is ignored with a warning"; fi
done
TSR_NUM_THREADS=' 3 ' "$T/seeded" >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && cmp -s "$T/out" "$T/s5" && ok || bad "TSR_NUM_THREADS=' 3 ' is read silently"
# A number past 256, however far past (beyond a long too), is 256, silently (it was ignored).
TSR_NUM_THREADS=99999999999999999999 "$T/seeded" >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && cmp -s "$T/out" "$T/s5" &&
    ok || bad "TSR_NUM_THREADS=99999999999999999999 is read silently as 256"
TSR_NUM_THREADS=abc "$T/seeded" --threads 2 >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && ok || bad "--threads beside a bad TSR_NUM_THREADS says nothing"

# A loop bound computed from an option that leaves the 64-bit integers is an error in both
# executors (issue 25: the sum wrapped, and the loop silently ran no iteration), and a loop of
# main nested in another keeps its counter in one stack slot (at -O0 a slot per iteration overflowed the stack).
printf 'option n = 1\nmain =\n  for e = n + 9223372036854775800 to 9223372036854775806 do print "e %%d" e done\n' >"$T/wrap.tsr"
"$TSRC" "$T/wrap.tsr" -o "$T/wrap" >"$T/log" 2>&1
msg="a loop bound overflows: option 'n' = 8 + 9223372036854775800 is outside the 64-bit integers"
"$T/wrap" --n 8 >"$T/out" 2>"$T/err"
if [ $? = 1 ] && [ "$(cat "$T/err")" = "$T/wrap: error: $msg" ] && [ ! -s "$T/out" ]; then ok; else bad "an overflowing loop bound (native)"; fi
"$TSRC" --run --interp "$T/wrap.tsr" -- --n 8 >"$T/out" 2>"$T/err"
if [ $? = 1 ] && [ "$(cat "$T/err")" = "tsrc: error: run time: $msg" ]; then ok; else bad "an overflowing loop bound (--interp)"; fi
"$T/wrap" >"$T/out" 2>"$T/err"
if [ $? = 0 ] && [ "$(wc -l <"$T/out")" = 6 ] && [ "$(tail -n 1 "$T/out")" = "e 9223372036854775806" ]; then ok
else bad "a loop bound that fits runs"; fi
printf 'option n = 400000\nlet%%op x = [1.]\nroutine r = x.forward\nmain =\n  for a = 1 to n do for b = 0 to 1 do run r done done\n' >"$T/nested.tsr"
"$TSRC" -O0 "$T/nested.tsr" -o "$T/nested" >"$T/log" 2>&1
(ulimit -s 1024; exec "$T/nested") >"$T/out" 2>"$T/err"
if [ $? = 0 ]; then ok; else bad "nested option loops in a 1 MiB stack"; fi

# Two data items with bad files (tests/native/data_errors_together.tsr): the executable reads
# every item and prints an error line for each that fails, under status 1, as --interp does.
"$TSRC" tests/native/data_errors_together.tsr -o "$T/two_bad" >"$T/log" 2>&1
"$T/two_bad" >"$T/out" 2>"$T/err"
st=$?
sed 's|^tsrc: error: run time: |PROGRAM: error: |' tests/native/data_errors_together.err >"$T/want"
sed "s|^$T/two_bad: error: |PROGRAM: error: |" "$T/err" >"$T/got"
if [ $st = 1 ] && [ "$(wc -l <"$T/got")" = 2 ] && cmp -s "$T/want" "$T/got" && [ ! -s "$T/out" ]; then ok
else bad "two bad data files: an error line for each (native)"; fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
