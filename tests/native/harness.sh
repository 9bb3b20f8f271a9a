# harness.sh — what the native test scripts share (sourced by drivers.sh, runtime_sizes.sh,
# checkpoint.sh and main_steps.sh, which tests/run.sh runs from the repository's root):
#   harness_start NAME   a scratch directory $T (tsrc-NAME.XXXXXX under $TMPDIR or /tmp),
#                        removed when the script exits, and counters at zero;
#   pass, fail WHAT      count a check; fail also prints WHAT and the head of $T/log;
#   summary              the last line tests/run.sh reads: "N passed, N failed".
harness_start() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-$1.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    passed=0
    failed=0
}
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "$T/log" ] && sed -n '1,15s/^/    /p' "$T/log"; }
summary() { echo "$passed passed, $failed failed"; }
