# harness.sh — what the native test scripts share (sourced by drivers.sh, runtime_sizes.sh,
# checkpoint.sh, main_steps.sh, example_checkpoint.sh, resume.sh, gpt_example.sh, distributed.sh,
# data_parallel.sh, dtype_data.sh and dtype_f64_data.sh, which tests/run.sh runs from the
# repository's root):
#   harness_start NAME   a scratch directory $T (tsrc-NAME.XXXXXX under $TMPDIR or /tmp),
#                        removed when the script exits, and counters at zero;
#   pass, fail WHAT      count a check; fail also prints WHAT and the head of $T/log;
#   summary              the last line tests/run.sh reads: "N passed, N failed";
#   check WHAT STATUS    pass when STATUS is 0 (printing "PASS WHAT"), else fail WHAT;
#   tsrc_run MODE        the command that runs a program natively (native) or with the
#                        reference executor (interp), from $TSRC;
#   finish               summary, then the script's status: 0 when nothing failed.
harness_start() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-$1.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    passed=0
    failed=0
}
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "$T/log" ] && sed -n '1,15s/^/    /p' "$T/log"; }
summary() { echo "$passed passed, $failed failed"; }
check() {
    if [ "$2" = 0 ]; then pass; echo "PASS $1"; else fail "$1"; fi
}
tsrc_run() {
    if [ "$1" = native ]; then echo "$TSRC --run"; else echo "$TSRC --run --interp"; fi
}
finish() {
    summary
    [ "$failed" = 0 ]
}
