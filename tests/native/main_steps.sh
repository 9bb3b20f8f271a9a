#!/bin/sh
# main_steps.sh — what the goldens of shuffle.tsr and record_plot.tsr cannot show (run by
# tests/run.sh): a shuffle is a function of --seed (the same seed gives the same rows in both
# executors, another seed other rows); the progress bar of record_plot.tsr goes to standard
# error only, as plain lines at every tenth when standard error is not a terminal (the same
# from both executors) and as one self-updating line with the rate when it is (under script(1)).
# Usage: main_steps.sh TSRC.  Last line: "N passed, N failed".
set -u
TSRC=$1
. "$(dirname "$0")/harness.sh"
harness_start steps

for p in shuffle record_plot; do
    if ! "$TSRC" tests/native/$p.tsr -o "$T/$p" >"$T/log" 2>&1; then fail "$p.tsr compiles"; summary; exit 1; fi
done

"$T/shuffle" --seed 3 >"$T/seed3" 2>"$T/log" && "$T/shuffle" --seed 3 >"$T/seed3b" 2>>"$T/log" &&
    "$TSRC" --run --interp tests/native/shuffle.tsr -- --seed 3 >"$T/seed3i" 2>>"$T/log" &&
    cmp -s "$T/seed3" "$T/seed3b" && cmp -s "$T/seed3" "$T/seed3i" && pass ||
    fail "shuffle: --seed 3 gives the same rows twice and in both executors"
"$T/shuffle" >"$T/seed0" 2>"$T/log" && cmp -s "$T/seed0" tests/native/shuffle.out && ! cmp -s "$T/seed0" "$T/seed3" && pass ||
    fail "shuffle: another seed gives other rows"

"$T/record_plot" >"$T/out" 2>"$T/err" && cmp -s "$T/out" tests/native/record_plot.out && pass ||
    fail "record_plot: standard output is the golden, without the bar"
printf 'step: %s\n' "2/12 (16%)" "3/12 (25%)" "4/12 (33%)" "5/12 (41%)" "6/12 (50%)" "8/12 (66%)" "9/12 (75%)" \
    "10/12 (83%)" "11/12 (91%)" "12/12 (100%)" >"$T/lines"
cmp -s "$T/err" "$T/lines" && pass || { cp "$T/err" "$T/log"; fail "progress: plain lines at every tenth on a standard error that is not a terminal"; }
"$TSRC" --run --interp tests/native/record_plot.tsr >/dev/null 2>"$T/err"
cmp -s "$T/err" "$T/lines" && pass || { cp "$T/err" "$T/log"; fail "progress: the reference executor prints the same lines"; }

# A second loop of the same counter's name: its bar shows the name as written (tests/native/progress_name.tsr).
printf 'e: %s\n' "1/4 (25%)" "2/4 (50%)" "3/4 (75%)" "4/4 (100%)" >"$T/lines"
"$TSRC" --run --interp tests/native/progress_name.tsr >/dev/null 2>"$T/err"
cmp -s "$T/err" "$T/lines" && pass || { cp "$T/err" "$T/log"; fail "progress: the bar of a second loop named e says e"; }

if command -v script >/dev/null 2>&1; then
    script -qc "$T/record_plot >/dev/null" /dev/null >"$T/tty" 2>&1 </dev/null
    if grep -q "$(printf '\r')" "$T/tty" && grep -q 'step \[#*\] 12/12 100%  .* it/s  in 0:0' "$T/tty" &&
       grep -q 'step \[\.*\] 0/12   0%' "$T/tty" && ! grep -q 'step: ' "$T/tty"; then pass
    else cp "$T/tty" "$T/log"; fail "progress: on a terminal, one line redrawn with the count, the rate and the time"; fi
fi

summary
[ $failed = 0 ]
