# harness.sh — what the native test scripts share (sourced by drivers.sh, runtime_sizes.sh,
# checkpoint.sh, main_steps.sh, example_checkpoint.sh, resume.sh, gpt_example.sh, distributed.sh,
# data_parallel.sh, dtype_data.sh, dtype_f64_data.sh, dtype_half_data.sh and dtype_int_data.sh,
# and by tests/gpu/host.sh and fake_driver.sh, which tests/run.sh runs from the repository's root):
#   harness_tools TSRC [LIBDIR]  $TSRC, the compiler's path made absolute (the programs run in
#                        the scratch directory), and $LIB, LIBDIR's libtsr.a, absolute too;
#   harness_start NAME   a scratch directory $T (tsrc-NAME.XXXXXX under $TMPDIR or /tmp),
#                        removed when the script exits, and counters at zero;
#   pass, fail WHAT      count a check; fail also prints WHAT and the head of $T/log;
#   summary              the last line tests/run.sh reads: "N passed, N failed";
#   check WHAT STATUS    pass when STATUS is 0 (printing "PASS WHAT"), else fail WHAT;
#   tsrc_run MODE        the command that runs a program natively (native) or with the
#                        reference executor (interp), from $TSRC;
#   finish               summary, then the script's status: 0 when nothing failed;
#   run_both NAME ARGS…  the executable $T/NAME and the reference executor on $T/NAME.tsr, both
#                        with ARGS in $T/run (a checkpoint's directory): their stdout in
#                        $T/NAME.native and $T/NAME.interp, stderr in $T/NAME.native.err and
#                        $T/NAME.interp.err, status in $native and $interp;
#   expect_error NAME MESSAGE ARGS…  run_both, and both executors stop with status 1 and MESSAGE;
#   harness_mpi          the environment of mpirun here (call it from the repository's root):
#                        root allowed, processes on this machine only (no network interface but
#                        loopback in some sandboxes), and for an instrumented tsrc (`make check
#                        SAN=1`) Open MPI's own leaks suppressed (tests/native/open_mpi.supp), with
#                        the full unwinder: Open MPI unloads its components before the leak
#                        check, and fast unwinding stops at their frames.
harness_tools() {
    TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    if [ $# -ge 2 ]; then LIB=$(cd "$2" && pwd)/libtsr.a; fi
}
harness_start() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-$1.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    passed=0
    failed=0
}
harness_mpi() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(pwd)/tests/native/open_mpi.supp"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
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
run_both() {
    name=$1
    shift
    mkdir -p "$T/run"
    (cd "$T/run" && "$T/$name" "$@") >"$T/$name.native" 2>"$T/$name.native.err"
    native=$?
    (cd "$T/run" && "$TSRC" --run --interp "$T/$name.tsr" -- "$@") >"$T/$name.interp" 2>"$T/$name.interp.err"
    interp=$?
}
expect_error() {
    name=$1 message=$2
    shift 2
    run_both "$name" "$@"
    if [ $native = 1 ] && [ "$(cat "$T/$name.native.err")" = "$T/$name: error: $message" ] &&
       [ $interp = 1 ] && [ "$(cat "$T/$name.interp.err")" = "tsrc: error: run time: $message" ]; then pass
    else
        cat "$T/$name.native.err" "$T/$name.interp.err" >"$T/log"
        fail "both executors: $message"
    fi
}
