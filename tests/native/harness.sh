# harness.sh — what the shell tests of tests/native share; sourced (`. tests/native/harness.sh`)
# with HARNESS set to the test's name: a scratch directory $T (tsrc-$HARNESS.XXXXXX, removed at
# exit), `check NAME STATUS` (one PASS or FAIL line; a failure shows the first lines of $T/log),
# `tsrc_run MODE` (the command that runs a program natively or, MODE interp, with the reference
# executor; $TSRC must be set), and `finish` (the closing "N passed, N failed" line and the
# script's exit status).
T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-${HARNESS:-test}.XXXXXX")
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
check() { # check NAME COMMAND-STATUS
    if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "PASS $1"
    else failed=$((failed + 1)); echo "FAIL $1"; sed -n '1,12s/^/    /p' "$T/log" 2>/dev/null; fi
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}
tsrc_run() {
    if [ "$1" = native ]; then echo "$TSRC --run"; else echo "$TSRC --run --interp"; fi
}
