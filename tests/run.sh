#!/bin/sh
# run.sh — the test runner behind `make check`.
#
# Every tests/**/*.tsr is run by build/tsrc and compared with the golden files beside it; the
# golden file's extension says what is compared:
#   NAME.ast   stdout of `tsrc --dump-ast NAME.tsr`        (exit status 0)
#   NAME.shapes  stdout of `tsrc --print-shapes NAME.tsr` (exit status 0); tests/explain/ gives
#              `(* args: --explain=… *)`, so there it is the stdout of --explain; NAME.warn
#              beside it is the run's stderr (its warnings), which is otherwise not compared
#   NAME.err   stderr of `tsrc --parse-only NAME.tsr`      (exit status 1); under
#              tests/shape_errors/ the default is `tsrc --check NAME.tsr`, under tests/proj/
#              `tsrc --run --interp NAME.tsr`
#   NAME.ir    stdout of `tsrc --emit=ir NAME.tsr`         (exit status 0)
#   NAME.out   stdout of `tsrc --run --interp NAME.tsr`    (exit status 0); then, with every
#              float printed in full too (TSR_PRINT_EXACT=2: `%g@%.9g`, so that the run
#              that gives the golden's text gives the bits as well), the reference executor on the
#              unscheduled IR (`--no-sched`), the program compiled to an executable
#              (`tsrc --run`) and, for a program that differentiates, the reference executor
#              on the IR without its optimisations (`--no-opt`) must print exactly what the
#              reference executor printed on the scheduled IR (a test may have both; `(* args: … *)` options are added to all,
#              after the file name, so `-- ARGS` gives ARGS to the program itself)
#   (none)     `tsrc --parse-only NAME.tsr` must succeed silently
# tests/shapes/examples/NAME.shapes is the golden of `tsrc --print-shapes docs/examples/NAME.tsr`.
# A first line `(* args: OPTIONS *)` replaces the default option (--dump-ast / --parse-only).
# Every docs/examples/*.tsr and stdlib/*.tsr must pass --parse-only too.  Then come the
# robustness checks (inputs generated here), the C unit tests in $UNIT_DIR, the fuzz targets
# replayed over their seeds and past findings ($FUZZ_REPLAY_DIR, tests/fuzz/), the einsum
# differential test against NumPy, the gathered-axes test against NumPy (tests/einsum/gather_diff.py),
# the convolution and pooling test against NumPy
# (tests/conv/conv_diff.py), the gradient checks against finite differences
# (tests/grad/gradcheck.py, nn_gradcheck.py), the native sweep against the reference executor
# (tests/native_sweep.sh; NATIVE_SWEEP_COUNT cases, default 1500), both differential tests again
# with every tensor f64 (--dtype f64; EINSUM_F64_COUNT cases, default 600, and
# NATIVE_SWEEP_F64_COUNT, default 300) and with every tensor bf16, then f16 (--dtype bf16,
# --dtype f16; EINSUM_HALF_COUNT cases of each, default 300, and NATIVE_SWEEP_HALF_COUNT,
# default 150), and with every tensor i32, then i64 (--dtype i32, --dtype i64; EINSUM_INT_COUNT
# cases of each, default 300, and NATIVE_SWEEP_INT_COUNT, default 100), the compile-time and
# memory test (tests/scale/compile_scale.py), the README's shell lines (tests/readme_lines.py),
# the layout of the source tree (tests/layout.py: file sizes, include and call cycles),
# whose own closing "N passed, N failed" lines are
# added in.
#
# The differential sweeps run in the background from the start (below: sweeps), beside the
# golden tests; their summaries print where they stand in this list.  The golden tests and the
# examples run in TEST_JOBS workers (default 2: in_parallel), their lines printed in order.
# One line per test; the last line is "N passed, N failed".  UPDATE=1 rewrites the goldens
# from the current output instead of comparing (review the diff before committing).
set -u

TSRC=${TSRC:-build/tsrc}
UNIT_DIR=${UNIT_DIR:-build/unit}
PYTHON=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-tests.XXXXXX")
check_start=$(date +%s)
trap 'rm -rf "$TMP"' EXIT INT TERM
passed=0
failed=0

# The source tree's files (build/ and .git/ aside), to check at the end that no test left a new
# one there: tests write under build/ or a temporary directory.
source_files() { find . \( -path ./build -o -path ./.git \) -prune -o -type f -print | LC_ALL=C sort; }
source_files >"$TMP/tree.before"

# The differential sweeps -- against NumPy, finite differences and the reference executor, each
# described where its summary stands below -- and four sub-suites in temporary directories of
# their own take about five minutes of one core and read
# nothing the tests before them write: they start here, in the background, one after another,
# beside the golden tests (a second core's work), and their summaries are added where they stand
# below, in that order (sweep_summary).  SWEEPS_IN_BACKGROUND=0 runs them at the first summary
# instead.  sweep NAME COMMAND…: its output in $TMP/NAME.out, its exit status in $TMP/NAME.status.
sweep() {
    name=$1
    shift
    start=$(date +%s)
    "$@" >"$TMP/$name.out" 2>&1
    echo $? >"$TMP/$name.status"
    echo $(($(date +%s) - start)) >"$TMP/$name.seconds"
}
sweeps() {
    sweep einsum "$PYTHON" tests/einsum/einsum_diff.py --tsrc "$TSRC" --count "${EINSUM_COUNT:-600}" --seed 1
    sweep einsum_f64 "$PYTHON" tests/einsum/einsum_diff.py --tsrc "$TSRC" --count "${EINSUM_F64_COUNT:-600}" --seed 1 --dtype f64
    for type in bf16 f16; do
        sweep einsum_$type "$PYTHON" tests/einsum/einsum_diff.py --tsrc "$TSRC" --count "${EINSUM_HALF_COUNT:-300}" --seed 1 --dtype $type
    done
    for type in i32 i64; do
        sweep einsum_$type "$PYTHON" tests/einsum/einsum_diff.py --tsrc "$TSRC" --count "${EINSUM_INT_COUNT:-300}" --seed 1 --dtype $type
    done
    sweep gather "$PYTHON" tests/einsum/gather_diff.py --tsrc "$TSRC" --count "${GATHER_COUNT:-60}" --seed 1
    sweep conv "$PYTHON" tests/conv/conv_diff.py --tsrc "$TSRC" --count "${CONV_COUNT:-520}" --concat-count "${CONCAT_COUNT:-200}" \
        --group-count "${GROUP_COUNT:-140}" --seed 1
    sweep window_orders "$PYTHON" tests/shapes/window_orders.py --tsrc "$TSRC" --count "${WINDOW_ORDER_COUNT:-150}" --seed 1
    sweep gradcheck "$PYTHON" tests/grad/gradcheck.py --tsrc "$TSRC" --programs "${GRADCHECK_PROGRAMS:-4}" --native 2 --seed 1
    sweep gradcheck_f64 "$PYTHON" tests/grad/gradcheck.py --tsrc "$TSRC" --programs 2 --native 1 --seed 2 --dtype f64
    sweep nn_gradcheck "$PYTHON" tests/grad/nn_gradcheck.py --tsrc "$TSRC" --programs "${GRADCHECK_PROGRAMS:-4}" --native 1 --seed 1
    sweep attention_dropout "$PYTHON" tests/grad/attention_dropout.py --tsrc "$TSRC" --programs 6 --seed 1
    sweep contractions "$PYTHON" tests/native/contractions.py --tsrc "$TSRC" --count "${CONTRACTION_COUNT:-300}" --seed 1
    sweep contractions_f64 "$PYTHON" tests/native/contractions.py --tsrc "$TSRC" --count "${CONTRACTION_F64_COUNT:-100}" --seed 2 \
        --dtype f64
    sweep contractions_bf16 "$PYTHON" tests/native/contractions.py --tsrc "$TSRC" --count "${CONTRACTION_BF16_COUNT:-50}" --seed 3 \
        --dtype bf16 --cpus "native x86-64-v4 x86-64-v3 znver4"
    sweep native_sweep env PYTHON="$PYTHON" sh tests/native_sweep.sh --tsrc "$TSRC" --count "${NATIVE_SWEEP_COUNT:-1500}" --seed 1
    sweep native_sweep_f64 env PYTHON="$PYTHON" sh tests/native_sweep.sh --tsrc "$TSRC" --count "${NATIVE_SWEEP_F64_COUNT:-300}" \
        --seed 1 --dtype f64
    for type in bf16 f16; do
        sweep native_sweep_$type env PYTHON="$PYTHON" sh tests/native_sweep.sh --tsrc "$TSRC" \
            --count "${NATIVE_SWEEP_HALF_COUNT:-150}" --seed 1 --dtype $type
    done
    for type in i32 i64; do
        sweep native_sweep_$type env PYTHON="$PYTHON" sh tests/native_sweep.sh --tsrc "$TSRC" \
            --count "${NATIVE_SWEEP_INT_COUNT:-100}" --seed 1 --dtype $type
    done
    # Sub-suites of their own temporary directories, summarised near the end (late_suites).
    sweep tensor_cores sh tests/native/tensor_cores.sh "$TSRC"
    sweep gpt_example sh tests/native/gpt_example.sh "$TSRC" "$PYTHON"
    sweep fakecuda env PYTHON="$PYTHON" sh tests/gpu/fake_driver.sh "$TSRC"
    sweep scale "$PYTHON" tests/scale/compile_scale.py --tsrc "$TSRC"
}
sweeps_pid=
sweeps_done=no sweeps_awaited=$check_start sweeps_waited=0
if [ "${SWEEPS_IN_BACKGROUND:-1}" = 1 ]; then
    sweeps &
    sweeps_pid=$!
    trap 'if [ -n "$sweeps_pid" ]; then kill "$sweeps_pid" 2>/dev/null; fi; rm -rf "$TMP"' EXIT INT TERM
fi
# sweep_summary NAME LABEL: the summary of sweep NAME, with the seconds it took (the first call
# waits for them all).
sweep_summary() {
    if [ $sweeps_done = no ]; then
        sweeps_awaited=$(date +%s)
        if [ -n "$sweeps_pid" ]; then wait "$sweeps_pid"; else sweeps; fi
        sweeps_done=yes sweeps_pid= sweeps_waited=$(($(date +%s) - sweeps_awaited))
    fi
    add_summary "$2 [$(cat "$TMP/$1.seconds" 2>/dev/null || echo ?) s]" "$(cat "$TMP/$1.status" 2>/dev/null || echo missing)" "$TMP/$1.out"
}

pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
    failed=$((failed + 1))
    echo "FAIL $1${2:+ ($2)}"
    if [ -n "${3:-}" ] && [ -f "$3" ]; then sed -n '1,20s/^/    /p' "$3"; fi
}

# Run tsrc with a time limit (TEST_TIMEOUT seconds: 60, or 120 under `make check SAN=1`);
# stdout/stderr/status land in $TMP/out, $TMP/err, $TMP/status.
run_tsrc() {
    timeout "${TEST_TIMEOUT:-60}" "$TSRC" "$@" >"$TMP/out" 2>"$TMP/err"
    echo $? >"$TMP/status"
}

status() { cat "$TMP/status"; }

# A TSR_PRINT_EXACT=2 output as it prints without it: each float's `@` and all its digits dropped
# (runtime/print.c).
short_digits() { sed 's/@[-+.0-9a-z]*//g'; }

# The GPU leg on this machine (docs/gpu.md): the program scheduled for the GPU (--target=cuda),
# run by the reference executor, which steps through its grids of blocks and threads with their
# guards and its blocks' phases, must print EXPECTED (with every float in full) -- exactly, or,
# where the schedule reduces cells across a block's threads (which adds in another order),
# within tests/gpu/compare.py's tolerance (relative 1e-5, integers exact); and its PTX for sm_80
# and sm_90 must pass ptxas (/usr/local/cuda/bin/ptxas or on PATH; a SKIP line where there is
# none).
PTXAS=$(command -v ptxas 2>/dev/null || { [ -x /usr/local/cuda/bin/ptxas ] && echo /usr/local/cuda/bin/ptxas; })
ptxas_skipped=0
gpu_skipped=""
# gpu_schedule_run LABEL LATE [TSRC ARGS…]: test $gt's GPU schedule run by the reference
# executor (asynchronous copies landing late where LATE is 1) against $expected, exactly or,
# where $reordered, within 1e-5; with TSR_INTERP_RACES=1, so that a cell two threads of a block
# touch between two barriers, or two blocks of a kernel, one of them writing it, fails the run.
gpu_schedule_run() {
    label=$1 late=$2
    shift 2
    suffix=$([ "$late" = 1 ] && echo ", copies landing late")
    TSR_INTERP_RACES=1 TSR_INTERP_LATE_COPIES=$late TSR_PRINT_EXACT=2 run_tsrc --run --interp --target=cuda "$gt" "$@"
    if [ "$(status)" != 0 ]; then fail "$gt ($label$suffix)" "exit $(status), expected 0" "$TMP/err"
    elif [ $reordered = no ] && diff -u "$expected" "$TMP/out" >"$TMP/diff" 2>&1; then pass "$gt ($label = interp$suffix)"
    elif [ $reordered = yes ] && "$PYTHON" tests/gpu/compare.py "$expected" "$TMP/out" >"$TMP/diff" 2>&1; then
        pass "$gt ($label = interp, block reductions within 1e-5$suffix)"
    else fail "$gt ($label$suffix)" "the $label, run by the reference executor, prints differently" "$TMP/diff"; fi
}

gpu_checks() { # gpu_checks TEST EXPECTED [TSRC ARGS…]
    gt=$1 expected=$2
    shift 2
    compile_args=""   # the options before `--` (after it: the program's own arguments)
    for x in "$@"; do [ "$x" = -- ] && break; compile_args="$compile_args $x"; done
    run_tsrc --emit=sched-ir --target=cuda -o - "$gt" $compile_args
    # Run-time sizes are compiled for the CPU only (docs/runtime.md §16): listed as skipped.
    if [ "$(status)" = 1 ] && grep -q "are not compiled for --target=cuda in this version" "$TMP/err"; then
        gpu_skipped="$gpu_skipped $gt"
        return
    fi
    reordered=no
    grep -qE "reduced across a block|reduction split in" "$TMP/out" && reordered=yes
    gpu_schedule_run "GPU schedule" 0 "$@"
    # Where sm_90a schedules warpgroup products (wgmma: sched_mma.c), that schedule too, with
    # asynchronous copies landing at once and as late as they may (the reference executor
    # reports a race on panels or accumulators), and its PTX through ptxas below.
    run_tsrc --emit=sched-ir --target=cuda --arch=sm_90a -o - "$gt" $compile_args
    archs="sm_80 sm_90"
    if grep -q "on the tensor cores (wgmma\." "$TMP/out"; then
        archs="$archs sm_90a"
        for late in 0 1; do gpu_schedule_run "sm_90a schedule" $late --arch=sm_90a "$@"; done
    fi
    if [ -z "$PTXAS" ]; then ptxas_skipped=$((ptxas_skipped + 1)); return; fi
    for arch in $archs; do
        run_tsrc --emit=ptx --arch=$arch -o "$TMP/kernels.ptx" "$gt" $compile_args
        if [ "$(status)" != 0 ]; then fail "$gt (PTX $arch)" "exit $(status), expected 0" "$TMP/err"
        elif ! "$PTXAS" -arch=$arch "$TMP/kernels.ptx" -o "$TMP/kernels.cubin" >"$TMP/err" 2>&1; then fail "$gt (ptxas $arch)" "ptxas rejects the PTX" "$TMP/err"
        elif grep -qi "serialized" "$TMP/err"; then fail "$gt (ptxas $arch)" "ptxas serialises wgmma" "$TMP/err"
        else pass "$gt (ptxas $arch)"; fi
    done
}

check_golden() { # check_golden TEST ACTUAL GOLDEN
    if [ "${UPDATE:-}" = 1 ]; then cp "$2" "$3"; fi
    if diff -u "$3" "$2" >"$TMP/diff" 2>&1; then
        return 0
    fi
    return 1
}

# in_parallel FUNCTION ITEM…: FUNCTION ITEM for every item, in TEST_JOBS workers (default 2,
# beside the sweeps: the golden tests are most of this script's time, and each is independent
# of the others), each in a temporary directory of its own, taking the next item that no worker
# has taken yet (the one whose mkdir of the item's claim succeeds), so that no worker idles
# while items are left.  Each item's lines go to a file of their own, printed in the items'
# order once every worker is done, and the workers' counts are added to this shell's.
in_parallel() {
    fn=$1
    shift
    jobs=${TEST_JOBS:-2} dir=$TMP/$fn pids=""
    w=0
    while [ $w -lt "$jobs" ]; do
        (
            TMP=$dir/w$w passed=0 failed=0 ptxas_skipped=0 gpu_skipped="" i=0
            mkdir -p "$TMP"
            for item in "$@"; do
                if mkdir "$dir/claim.$i" 2>/dev/null; then "$fn" "$item" >"$dir/$i.log" 2>&1; fi
                i=$((i + 1))
            done
            echo "$passed $failed $ptxas_skipped" >"$TMP/counts"
            echo "$gpu_skipped" >"$TMP/gpu_skipped"
        ) &
        pids="$pids $!"
        w=$((w + 1))
    done
    wait $pids
    i=0
    for item in "$@"; do
        cat "$dir/$i.log" 2>/dev/null || fail "$item" "its worker stopped before it"
        i=$((i + 1))
    done
    w=0
    while [ $w -lt "$jobs" ]; do
        read -r p f x <"$dir/w$w/counts" || { p=0 f=1 x=0; echo "FAIL worker $w of $fn: no counts"; }
        passed=$((passed + p)) failed=$((failed + f)) ptxas_skipped=$((ptxas_skipped + x))
        gpu_skipped="$gpu_skipped$(cat "$dir/w$w/gpu_skipped")"
        w=$((w + 1))
    done
}

golden_test() { # golden_test TEST: the checks of one test (its golden files say which: above)
    t=$1
    base=${t%.tsr}
    args=$(sed -n '1s/^(\* args: \(.*\) \*)$/\1/p' "$t")
    gpu_args=$(sed -n '1,2s/^(\* gpu-args: \(.*\) \*)$/\1/p' "$t") # for the GPU leg only
    if [ -f "$base.ir" ] || [ -f "$base.out" ]; then
        for kind in ir out; do
            [ -f "$base.$kind" ] || continue
            if [ $kind = ir ]; then run_tsrc --emit=ir $args "$t"
            else # one run for the golden (the %g part) and the bits (interp.out: below)
                TSR_PRINT_EXACT=2 run_tsrc --run --interp "$t" $args
                cp "$TMP/out" "$TMP/interp.out"
                short_digits <"$TMP/interp.out" >"$TMP/out"
            fi
            if [ "$(status)" != 0 ]; then fail "$t ($kind)" "exit $(status), expected 0" "$TMP/err"
            elif check_golden "$t" "$TMP/out" "$base.$kind"; then pass "$t ($kind)"
            else fail "$t ($kind)" "output differs from $base.$kind" "$TMP/diff"; fi
            [ $kind = out ] || continue
            # Bit for bit (every float printed with all its digits too): the reference executor
            # on the scheduled IR (the default, above), on the IR as lowered, and the program
            # compiled natively all print the same.
            TSR_PRINT_EXACT=2 run_tsrc --run --interp --no-sched "$t" $args
            if [ "$(status)" != 0 ]; then fail "$t (unscheduled)" "exit $(status), expected 0" "$TMP/err"
            elif diff -u "$TMP/interp.out" "$TMP/out" >"$TMP/diff" 2>&1; then pass "$t (scheduled = unscheduled)"
            else fail "$t (unscheduled)" "the scheduled and the unscheduled IR print differently" "$TMP/diff"; fi
            # A program that differentiates, without the loop IR optimisations too: reading a
            # gradient's copy from its source (opt.c rule 8) may only change unobserved zeros.
            if grep -qE 'backprop|Train\.|\.grad' "$t"; then
                TSR_PRINT_EXACT=2 run_tsrc --run --interp --no-opt "$t" $args
                if [ "$(status)" != 0 ]; then fail "$t (unoptimised)" "exit $(status), expected 0" "$TMP/err"
                elif diff -u "$TMP/interp.out" "$TMP/out" >"$TMP/diff" 2>&1; then pass "$t (optimised = unoptimised)"
                else fail "$t (unoptimised)" "the IR with and without its optimisations print differently" "$TMP/diff"; fi
            fi
            TSR_PRINT_EXACT=2 run_tsrc --run "$t" $args
            if [ "$(status)" != 0 ]; then fail "$t (native)" "exit $(status), expected 0" "$TMP/err"
            elif diff -u "$TMP/interp.out" "$TMP/out" >"$TMP/diff" 2>&1; then pass "$t (native = interp)"
            else fail "$t (native)" "the executable's output differs from the reference executor's" "$TMP/diff"; fi
            gpu_checks "$t" "$TMP/interp.out" $gpu_args $args
        done
        return
    fi
    if [ -f "$base.ast" ]; then
        run_tsrc ${args:---dump-ast} "$t"
        if [ "$(status)" != 0 ]; then fail "$t" "exit $(status), expected 0" "$TMP/err"
        elif check_golden "$t" "$TMP/out" "$base.ast"; then pass "$t"
        else fail "$t" "AST differs from $base.ast" "$TMP/diff"; fi
    elif [ -f "$base.shapes" ]; then
        run_tsrc ${args:---print-shapes} "$t"
        if [ "$(status)" != 0 ]; then fail "$t" "exit $(status), expected 0" "$TMP/err"
        elif ! check_golden "$t" "$TMP/out" "$base.shapes"; then fail "$t" "shapes differ from $base.shapes" "$TMP/diff"
        elif [ -f "$base.warn" ] && ! check_golden "$t" "$TMP/err" "$base.warn"; then
            fail "$t" "warnings differ from $base.warn" "$TMP/diff"
        else pass "$t"; fi
    elif [ -f "$base.err" ]; then
        case $t in
            tests/shape_errors/*) default=--check ;;
            tests/proj/*|tests/native/*) default="--run --interp" ;;
            *) default=--parse-only ;;
        esac
        run_tsrc ${args:-$default} "$t"
        if [ "$(status)" != 1 ]; then fail "$t" "exit $(status), expected 1" "$TMP/err"
        elif check_golden "$t" "$TMP/err" "$base.err"; then pass "$t"
        else fail "$t" "diagnostics differ from $base.err" "$TMP/diff"; fi
    else
        run_tsrc ${args:---parse-only} "$t"
        if [ "$(status)" = 0 ] && [ ! -s "$TMP/err" ]; then pass "$t"
        else fail "$t" "exit $(status)" "$TMP/err"; fi
    fi
}
in_parallel golden_test $(find tests -name '*.tsr' | LC_ALL=C sort)

# TSR_PRINT_EXACT=2, which the golden tests above read (runtime/print.c): each float as its %g
# text, `@` and all its digits.  Dropping the `@…` parts gives the plain output, and dropping the
# text before each `@` gives TSR_PRINT_EXACT=1's (tensors of f32, f64, bf16 and f16).
for t in tests/native/dtype_f64.tsr tests/native/dtype_half.tsr; do
    run_tsrc --run --interp "$t"
    cp "$TMP/out" "$TMP/plain.out"
    TSR_PRINT_EXACT=1 run_tsrc --run --interp "$t"
    cp "$TMP/out" "$TMP/all.out"
    TSR_PRINT_EXACT=2 run_tsrc --run --interp "$t"
    if [ "$(status)" = 0 ] && grep -q '[0-9]@-\{0,1\}[0-9]' "$TMP/out" && short_digits <"$TMP/out" | cmp -s - "$TMP/plain.out" &&
        sed 's/ [^ @]*@/ /g' "$TMP/out" | cmp -s - "$TMP/all.out"; then
        pass "$t (TSR_PRINT_EXACT=2: the plain text and every digit)"
    else fail "$t (TSR_PRINT_EXACT=2)" "its two parts are not the plain output and TSR_PRINT_EXACT=1's" "$TMP/out"; fi
done

for g in $(ls tests/shapes/examples/*.shapes 2>/dev/null | LC_ALL=C sort); do
    t=docs/examples/$(basename "$g" .shapes).tsr
    run_tsrc --print-shapes "$t"
    if [ "$(status)" != 0 ]; then fail "$t (shapes)" "exit $(status), expected 0" "$TMP/err"
    elif check_golden "$t" "$TMP/out" "$g"; then pass "$t (shapes)"
    else fail "$t (shapes)" "shapes differ from $g" "$TMP/diff"; fi
done

# Example programs with a golden output: the reference executor prints it, and the program
# compiled to an executable prints the same bits (TSR_PRINT_EXACT=2, as golden_test).  A NAME.args beside the golden holds the program's own
# arguments, with @DATA@ standing for $EXAMPLE_DATA, where tools/digits.py writes the .npy
# files of docs/examples/digits.tsr (generated here, not committed).
EXAMPLE_DATA=$(dirname "$TSRC")/example-data
if "${PYTHON:-/usr/bin/python3}" tools/digits.py "$EXAMPLE_DATA" >"$TMP/err" 2>&1; then pass "tools/digits.py writes the digits data"
else fail "tools/digits.py writes the digits data" "" "$TMP/err"; fi
example_test() { # example_test GOLDEN
    g=$1
    t=docs/examples/$(basename "$g" .out).tsr
    a=${g%.out}.args
    set --
    if [ -f "$a" ]; then set -- -- $(sed "s|@DATA@|$EXAMPLE_DATA|g" "$a"); fi
    TSR_PRINT_EXACT=2 run_tsrc --run --interp "$t" "$@"
    cp "$TMP/out" "$TMP/interp.out"
    short_digits <"$TMP/interp.out" >"$TMP/out"
    if [ "$(status)" != 0 ]; then fail "$t (out)" "exit $(status), expected 0" "$TMP/err"
    elif check_golden "$t" "$TMP/out" "$g"; then pass "$t (out)"
    else fail "$t (out)" "output differs from $g" "$TMP/diff"; fi
    TSR_PRINT_EXACT=2 run_tsrc --run "$t" "$@"
    if [ "$(status)" != 0 ]; then fail "$t (native)" "exit $(status), expected 0" "$TMP/err"
    elif diff -u "$TMP/interp.out" "$TMP/out" >"$TMP/diff" 2>&1; then pass "$t (native = interp)"
    else fail "$t (native)" "the executable's output differs from the reference executor's" "$TMP/diff"; fi
    gpu_checks "$t" "$TMP/interp.out" "$@"
}
in_parallel example_test $(ls tests/native/examples/*.out 2>/dev/null | LC_ALL=C sort)
# The examples without a golden output: their PTX passes ptxas too (a model the size of the GPT
# example takes LLVM about 15 s for its kernels and ptxas as long: a minute is allowed for each).
# An item is a program and an architecture, so that the GPT example's two go to two workers.
example_ptx() { # example_ptx PROGRAM:ARCH
    t=${1%:*} arch=${1##*:}
    if [ -z "$PTXAS" ]; then [ $arch = sm_80 ] && ptxas_skipped=$((ptxas_skipped + 1)); return; fi
    timeout $((${TEST_TIMEOUT:-60} * 3)) "$TSRC" --emit=ptx --arch=$arch -o "$TMP/kernels.ptx" -I docs/examples "$t" \
        >"$TMP/out" 2>"$TMP/err"
    echo $? >"$TMP/status"
    if [ "$(status)" != 0 ]; then fail "$t (PTX $arch)" "exit $(status), expected 0" "$TMP/err"
    elif "$PTXAS" -arch=$arch "$TMP/kernels.ptx" -o "$TMP/kernels.cubin" >"$TMP/err" 2>&1; then pass "$t (ptxas $arch)"
    else fail "$t (ptxas $arch)" "ptxas rejects the PTX" "$TMP/err"; fi
}
in_parallel example_ptx $(for t in $(ls docs/examples/*.tsr | LC_ALL=C sort); do
                              [ -f "tests/native/examples/$(basename "$t" .tsr).out" ] || echo "$t:sm_80 $t:sm_90"; done)
[ -n "$gpu_skipped" ] && echo "SKIP GPU schedule and PTX of programs with run-time sizes (CPU only):$gpu_skipped"
[ "$ptxas_skipped" -gt 0 ] && echo "SKIP ptxas: no ptxas on PATH or in /usr/local/cuda/bin ($ptxas_skipped programs' PTX not assembled)"

for t in $(ls docs/examples/*.tsr stdlib/*.tsr 2>/dev/null | LC_ALL=C sort); do
    run_tsrc --parse-only "$t"
    if [ "$(status)" = 0 ] && [ ! -s "$TMP/err" ]; then pass "$t"
    else fail "$t" "exit $(status)" "$TMP/err"; fi
done

# Robustness: hostile inputs get a message and exit status 1 -- never a crash or a hang.
robust() { # robust NAME FILE EXPECTED-STATUS
    run_tsrc --parse-only "$2"
    st=$(status)
    if [ "$st" = "$3" ] && { [ "$3" = 0 ] || grep -q 'error' "$TMP/err"; }; then pass "robustness: $1"
    else fail "robustness: $1" "exit $st, expected $3" "$TMP/err"; fi
}
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "("; print "" }' >"$TMP/deep.tsr"
robust "100000 nested parentheses" "$TMP/deep.tsr" 1
awk 'BEGIN { printf "let%%op x = "; for (i = 0; i < 100000; i++) printf "[|"; print "" }' >"$TMP/deep2.tsr"
robust "100000 nested array brackets" "$TMP/deep2.tsr" 1
# Nesting up to the tree's limit (1000 levels) parses, whatever the construct: the parser's own
# stack is deep enough for it (666 'let … in' once ran it out first).
for construct in "let a = 1 in" "if true then 1 else" "fun a ->"; do
    awk -v c="$construct" 'BEGIN { printf "let x = "; for (i = 0; i < 990; i++) printf "%s ", c; print "1"; print "main = print \"%d\" x" }' >"$TMP/nest.tsr"
    robust "990 nested '$construct' (valid)" "$TMP/nest.tsr" 0
done
awk 'BEGIN { printf "let x = "; for (i = 0; i < 990; i++) printf "let a%d = %d in ", i, i; print "a989"; print "main = print \"%d\" x" }' >"$TMP/nest.tsr"
run_tsrc --run "$TMP/nest.tsr"
if [ "$(status)" = 0 ] && [ "$(cat "$TMP/out")" = 989 ]; then pass "990 nested 'let … in' evaluate"
else fail "990 nested 'let … in' evaluate" "exit $(status)" "$TMP/err"; fi
awk 'BEGIN { printf "let x = 1"; for (i = 0; i < 100000; i++) printf " + 1"; print "" }' >"$TMP/chain.tsr"
robust "an operator chain 100000 long" "$TMP/chain.tsr" 1
awk 'BEGIN { printf "let x = \""; for (i = 0; i < 1048576; i++) printf "a"; print "\"" }' >"$TMP/longline.tsr"
robust "a 1 MB line (valid)" "$TMP/longline.tsr" 0
awk 'BEGIN { printf "let%%op x = a +* \""; for (i = 0; i < 1048576; i++) printf "i"; print "=>i\" b" }' >"$TMP/longspec.tsr"
robust "a 1 MB spec string" "$TMP/longspec.tsr" 0
awk 'BEGIN { printf "let x = "; for (i = 0; i < 1048576; i++) printf "#"; print "" }' >"$TMP/longbad.tsr"
robust "a 1 MB line of junk" "$TMP/longbad.tsr" 1
awk 'BEGIN { printf "main = f 0"; for (i = 0; i < 100000; i++) printf "; f %d", i; print "" }' >"$TMP/seq.tsr"
robust "a sequence of 100000 statements (valid)" "$TMP/seq.tsr" 0
awk 'BEGIN { printf "let%%op t = [0."; for (i = 0; i < 100000; i++) printf "; %d.", i; print "]" }' >"$TMP/list.tsr"
robust "a literal of 100000 numbers (valid)" "$TMP/list.tsr" 0
awk 'BEGIN { printf "let t = (0"; for (i = 0; i < 100000; i++) printf ", %d", i; print ")" }' >"$TMP/tuple.tsr"
robust "a tuple of 100000 elements (valid)" "$TMP/tuple.tsr" 0
: >"$TMP/empty.tsr"
robust "an empty file" "$TMP/empty.tsr" 0
if grep -q "warning: .* contains no top-level items" "$TMP/err"; then pass "robustness: an empty file is reported"
else fail "robustness: an empty file is reported" "no warning" "$TMP/err"; fi
printf 'let x = 1\000 + 2\n' >"$TMP/nul.tsr"
robust "a NUL byte" "$TMP/nul.tsr" 1
printf 'let x = \"\377\376\"\nlet y = \303\n' >"$TMP/utf8.tsr"
robust "invalid UTF-8" "$TMP/utf8.tsr" 1
head -c 65536 /dev/urandom >"$TMP/junk.tsr" 2>/dev/null || printf '\001\002\003' >"$TMP/junk.tsr"
robust "64 KiB of random bytes" "$TMP/junk.tsr" 1
run_tsrc --parse-only "$TMP/does-not-exist.tsr"
if [ "$(status)" = 1 ] && grep -q "cannot open" "$TMP/err"; then pass "robustness: a missing file"
else fail "robustness: a missing file" "exit $(status)" "$TMP/err"; fi
run_tsrc --parse-only "$TMP"
if [ "$(status)" = 1 ] && grep -q "directory" "$TMP/err"; then pass "robustness: a directory"
else fail "robustness: a directory" "exit $(status)" "$TMP/err"; fi

# An input that never ends: the reader stops at its cap (256 MiB) while reading, within a 1 GiB
# address-space limit, instead of reading to the end of input.  (Under `make check SAN=1` the
# limit is left out: AddressSanitizer reserves terabytes of address space for its shadow memory
# and cannot start under it.  The message and status still show that the reader stopped.)
([ "${SAN:-}" = 1 ] || ulimit -v 1048576; exec timeout 20 "$TSRC" --check /dev/zero) >"$TMP/out" 2>"$TMP/err"
st=$?
if [ $st = 1 ] && [ "$(cat "$TMP/err")" = "tsrc: error: '/dev/zero' is too large: a source file is at most 256 MiB" ]
then pass "robustness: an endless input (/dev/zero)"
else fail "robustness: an endless input (/dev/zero)" "exit $st" "$TMP/err"; fi
# A message naming a long identifier is whole (it was cut at 1 KiB, in the middle of the name).
long_name=$(head -c 3000 /dev/zero | tr '\0' a)
printf 'let y = %sb + 1\n' "$long_name" >"$TMP/long_name.tsr"
run_tsrc --check "$TMP/long_name.tsr"
if [ "$(status)" = 1 ] && [ "$(sed -n 1p "$TMP/err")" = "$TMP/long_name.tsr:1:9: error: '${long_name}b' is not defined" ]
then pass "robustness: a message naming a 3001-character identifier is whole"
else fail "robustness: a message naming a 3001-character identifier is whole" "exit $(status)" "$TMP/err"; fi
# A module's file read the same way (elab.c, diag.c file_read_all): one that never ends (a link
# to /dev/zero) stops at the cap, a directory of its name is no module; each a located error.
mkdir -p "$TMP/mod"
printf 'open Foo\nlet x = Foo.y\n' >"$TMP/mod/prog.tsr"
ln -sf /dev/zero "$TMP/mod/foo.tsr"
([ "${SAN:-}" = 1 ] || ulimit -v 1048576; exec timeout 20 "$TSRC" --check "$TMP/mod/prog.tsr") >"$TMP/out" 2>"$TMP/err"
st=$?
if [ $st = 1 ] && [ "$(sed -n 1p "$TMP/err")" = "$TMP/mod/prog.tsr:1:6: error: '$TMP/mod/foo.tsr' is too large: a source file is at most 256 MiB" ]
then pass "robustness: a module's file that never ends (a link to /dev/zero)"
else fail "robustness: a module's file that never ends (a link to /dev/zero)" "exit $st" "$TMP/err"; fi
rm "$TMP/mod/foo.tsr"
mkdir "$TMP/mod/foo.tsr"
run_tsrc --check "$TMP/mod/prog.tsr"
if [ "$(status)" = 1 ] && [ "$(sed -n 1p "$TMP/err")" = "$TMP/mod/prog.tsr:1:6: error: cannot read '$TMP/mod/foo.tsr': it is a directory" ]
then pass "robustness: a directory where a module's file would be"
else fail "robustness: a directory where a module's file would be" "exit $(status)" "$TMP/err"; fi
# Opens that make a cycle (C opens D, D opens C), and a program that opens its own file: errors
# at the open that closes the cycle (its module's name), with the other open as a note.
mkdir -p "$TMP/cyc"
printf 'open D\nlet xc = 1\n' >"$TMP/cyc/c.tsr"
printf 'open C\nlet xd = 2\n' >"$TMP/cyc/d.tsr"
printf 'open C\nmain = print "%%d" xc\n' >"$TMP/cyc/main.tsr"
run_tsrc --check "$TMP/cyc/main.tsr"
if [ "$(status)" = 1 ] && [ "$(sed -n 1p "$TMP/err")" = "$TMP/cyc/d.tsr:1:6: error: the opens make a cycle: C -> D -> C (a module cannot use definitions that come after its own open)" ] &&
   grep -q "^$TMP/cyc/c.tsr:1:6: note: module 'C' opens 'D' here" "$TMP/err"
then pass "modules: opens that make a cycle are an error naming it"
else fail "modules: opens that make a cycle are an error naming it" "exit $(status)" "$TMP/err"; fi
# A module's main runs compiled alone and when opened by a program without a main; a program
# with its own main runs that one alone (the two were "defined twice").
printf 'let base = 40\nmain = print "module %%d" base\n' >"$TMP/cyc/lib.tsr"
printf 'open Lib\nmain = print "program %%d" (base + 2)\n' >"$TMP/cyc/app.tsr"
printf 'open Lib\nlet x = base\n' >"$TMP/cyc/quiet.tsr"
run_tsrc --run "$TMP/cyc/app.tsr"; app="$(status) $(cat "$TMP/out" "$TMP/err")"
run_tsrc --run "$TMP/cyc/quiet.tsr"; quiet="$(status) $(cat "$TMP/out" "$TMP/err")"
run_tsrc --run "$TMP/cyc/lib.tsr"; alone="$(status) $(cat "$TMP/out" "$TMP/err")"
if [ "$app" = "0 program 42" ] && [ "$quiet" = "0 module 40" ] && [ "$alone" = "0 module 40" ]
then pass "modules: a program's own main runs, not an opened module's; without one, the module's"
else fail "modules: a program's own main runs, not an opened module's; without one, the module's" "app '$app', quiet '$quiet', alone '$alone'" /dev/null; fi
# A module is a unit of its own: it sees the built-ins, the prelude and its own definitions, not
# the program's (a name the program defined before the open is not defined there), and computes
# the same whatever the program defines; `open` makes its names the program's from there on.
printf 'let k = 3\nlet scaled x = k * x\n' >"$TMP/cyc/unit.tsr"
printf 'let k = 100\nopen Unit\nlet k2 = k\nlet k = 7\nmain = print "%%d %%d %%d %%d" (scaled 2) k2 k (Unit.scaled 1)\n' >"$TMP/cyc/unit_user.tsr"
printf 'let scaled x = factor * x\n' >"$TMP/cyc/leak.tsr"
printf 'let factor = 2\nopen Leak\nmain = print "%%d" (scaled 2)\n' >"$TMP/cyc/leak_user.tsr"
run_tsrc --run "$TMP/cyc/unit_user.tsr"; unit="$(status) $(cat "$TMP/out" "$TMP/err")"
run_tsrc --check "$TMP/cyc/leak_user.tsr"
if [ "$unit" = "0 6 3 7 3" ] && [ "$(status)" = 1 ] &&
   [ "$(sed -n 1p "$TMP/err")" = "$TMP/cyc/leak.tsr:1:16: error: 'factor' is not defined" ]
then pass "modules: a module sees its own names, not the program's; open gives the program the module's"
else fail "modules: a module sees its own names, not the program's; open gives the program the module's" "unit '$unit', leak exit $(status)" "$TMP/err"; fi
# An open passes on the module's own definitions, not those it has from its own opens (a helper
# that opens Unit does not bring Unit's k back over the program's); every definition, options
# too, is also Helper.x.
printf 'open Unit\noption reps = 2\nlet twice x = scaled (scaled x)\n' >"$TMP/cyc/helper.tsr"
printf 'let k = 5\nopen Helper\nmain = print "%%d %%d %%d" k (twice 1) Helper.reps\n' >"$TMP/cyc/helper_user.tsr"
run_tsrc --run "$TMP/cyc/helper_user.tsr"
if [ "$(status) $(cat "$TMP/out" "$TMP/err")" = "0 5 9 2" ]
then pass "modules: open passes on a module's own definitions only; options are qualified names too"
else fail "modules: open passes on a module's own definitions only; options are qualified names too" "exit $(status)" "$TMP/err"; fi
# Helper.scaled, a name Helper has from its own open of Unit, is an error whose note names Unit
# (and a stdlib module the same way: Opener.softmax, softmax Nn's, though Alias, loaded first,
# has the same value as its own softmax).
printf 'open Nn\nlet two = 2\n' >"$TMP/cyc/opener.tsr"
printf 'let softmax = Nn.softmax\n' >"$TMP/cyc/alias.tsr"
printf 'let a = Helper.scaled 1\nlet q = Alias.softmax\nlet b = Opener.softmax\n' >"$TMP/cyc/helper_qualified.tsr"
run_tsrc --check "$TMP/cyc/helper_qualified.tsr"
if [ "$(status)" = 1 ] && grep -q "error: module 'Helper' has no definition 'scaled'" "$TMP/err" &&
   grep -q "note: 'scaled' is Unit's, which Helper opens; a module's open does not pass the names on: write 'Unit.scaled'" "$TMP/err" &&
   grep -q "note: 'softmax' is Nn's, which Opener opens; .* write 'Nn.softmax'" "$TMP/err"
then pass "modules: M.x for a name M has from its own open notes the module it is from"
else fail "modules: M.x for a name M has from its own open notes the module it is from" "exit $(status)" "$TMP/err"; fi
# A module's private names (beginning with '_') are its own: its functions use them, but open
# does not pass them on (the program's _step stays the program's) and Privy._step is an error
# with a note saying why; Nn's helpers are private too (Nn._refuse_size).
printf 'let _step = 10\nlet up x = x + _step\n' >"$TMP/cyc/privy.tsr"
printf 'let _step = 1\nopen Privy\nmain = print "%%d %%d" (up 1) _step\n' >"$TMP/cyc/privy_user.tsr"
printf 'let a = Privy._step\nlet b = Nn._refuse_size\n' >"$TMP/cyc/privy_qualified.tsr"
run_tsrc --run "$TMP/cyc/privy_user.tsr"; privy="$(status) $(cat "$TMP/out" "$TMP/err")"
run_tsrc --check "$TMP/cyc/privy_qualified.tsr"
if [ "$privy" = "0 11 1" ] && [ "$(status)" = 1 ] &&
   grep -q "error: module 'Privy' has no definition '_step'" "$TMP/err" &&
   grep -q "note: a name beginning with '_' is its module's own: it is reachable inside the module alone" "$TMP/err" &&
   grep -q "error: module 'Nn' has no definition '_refuse_size'" "$TMP/err"
then pass "modules: names beginning with '_' are a module's own: not passed on by open, not reachable as M._x"
else fail "modules: names beginning with '_' are a module's own: not passed on by open, not reachable as M._x" "privy '$privy', exit $(status)" "$TMP/err"; fi
printf 'open Self\nlet a = 1\n' >"$TMP/cyc/self.tsr"
run_tsrc --check "$TMP/cyc/self.tsr"
if [ "$(status)" = 1 ] && grep -q "error: module 'Self' is this program's own file" "$TMP/err"
then pass "modules: a program that opens its own file is an error"
else fail "modules: a program that opens its own file is an error" "exit $(status)" "$TMP/err"; fi
printf 'let g = 1\n' >"$TMP/cyc/Upper.tsr"
printf 'open Upper\nlet a = g\n' >"$TMP/cyc/upper_user.tsr"
run_tsrc --check "$TMP/cyc/upper_user.tsr"
if [ "$(status)" = 1 ] && grep -q "note: '.*/Upper.tsr' exists, but module Upper is read from 'upper.tsr'" "$TMP/err" &&
   grep -q "module 'Upper' did not load" "$TMP/err"
then pass "modules: a module file named as the module is written gets a note; its names too"
else fail "modules: a module file named as the module is written gets a note; its names too" "exit $(status)" "$TMP/err"; fi

# The command line.
run_tsrc --no-such-flag x.tsr
if [ "$(status)" = 2 ] && grep -q "unknown option '--no-such-flag'" "$TMP/err"; then pass "cli: unknown option"
else fail "cli: unknown option" "exit $(status)" "$TMP/err"; fi
run_tsrc --chekc x.tsr
if [ "$(status)" = 2 ] && grep -q "unknown option '--chekc'; did you mean '--check'?" "$TMP/err"; then pass "cli: did you mean"
else fail "cli: did you mean" "exit $(status)" "$TMP/err"; fi
# Hostile command lines (CLI review): an output named like an option links (cc read '-foo.tmp…'
# as one); an empty -I is a usage error (it searched /); --version to a full disk says so (it
# exited 0); an output descriptor open for reading is said, not "out of memory".
tsrc_path=$(cd "$(dirname "$TSRC")" && pwd)/$(basename "$TSRC")
(root=$PWD && cd "$TMP" && "$tsrc_path" "$root/tests/proj/matmul.tsr" -o -dash >"$TMP/err" 2>&1 && [ -x "$TMP/-dash" ] &&
    rm -f -- "$TMP/-dash")
if [ $? = 0 ]; then pass "cli: an output named '-dash' links"; else fail "cli: an output named '-dash' links" "exit $?" "$TMP/err"; fi
run_tsrc -I '' --check tests/proj/matmul.tsr
if [ "$(status)" = 2 ] && grep -q "'-I' needs a directory, not an empty name" "$TMP/err"; then pass "cli: an empty -I is a usage error"
else fail "cli: an empty -I is a usage error" "exit $(status)" "$TMP/err"; fi
"$TSRC" --version >/dev/full 2>"$TMP/err"
if [ $? = 1 ] && grep -q "cannot write to the standard output" "$TMP/err"; then pass "cli: --version to a full disk says so"
else fail "cli: --version to a full disk says so" "status" "$TMP/err"; fi
"$TSRC" --emit=ir tests/proj/matmul.tsr -o /dev/fd/0 </dev/null >"$TMP/out" 2>"$TMP/err"
if [ $? = 1 ] && grep -q "cannot write '/dev/fd/0'" "$TMP/err"; then pass "cli: an output open for reading is said"
else fail "cli: an output open for reading is said" "status" "$TMP/err"; fi
# The program's own option after its file, without '--': said where it goes.
run_tsrc --run docs/examples/moons.tsr --epochs 2
if [ "$(status)" = 2 ] && grep -qF "unknown option '--epochs' (with --run, the program's own options follow '--': tsrc --run docs/examples/moons.tsr -- --epochs …)" "$TMP/err"
then pass "cli: a program's option after its file points at '--'"
else fail "cli: a program's option after its file points at '--'" "exit $(status)" "$TMP/err"; fi
# A long option's value after a space, as after '=' (issue 25).
run_tsrc --explain=l2.w docs/examples/shapes.tsr
cp "$TMP/out" "$TMP/explain_eq"
run_tsrc --explain l2.w --cpu x86-64-v3 docs/examples/shapes.tsr
if [ "$(status)" = 0 ] && [ -s "$TMP/out" ] && cmp -s "$TMP/out" "$TMP/explain_eq"; then pass "cli: --explain NAME as --explain=NAME"
else fail "cli: --explain NAME as --explain=NAME" "exit $(status)" "$TMP/err"; fi
# An unknown name among known ones: the error, and nothing explained (every name is checked first).
run_tsrc --explain=l2.w --explain=nope docs/examples/shapes.tsr
if [ "$(status)" = 1 ] && [ ! -s "$TMP/out" ] && grep -q "no tensor named 'nope'" "$TMP/err"; then pass "cli: --explain checks every name first"
else fail "cli: --explain checks every name first" "exit $(status)" "$TMP/out"; fi
# A number is digits only: a sign or a blank is refused (' -18446744073709551615' wrapped to 1).
for seed in +5 " 5" " -18446744073709551615"; do
    run_tsrc --seed="$seed" --check docs/examples/shapes.tsr
    if [ "$(status)" = 2 ] && grep -q "'--seed' needs an integer from 0 to 2^63-1, not '$seed'" "$TMP/err"; then pass "cli: --seed='$seed' is refused"
    else fail "cli: --seed='$seed' is refused" "exit $(status)" "$TMP/err"; fi
done
# An empty value after '=' is a missing value, said so (it was 'unknown option --cpu='); -O4
# names the levels.
run_tsrc --cpu= docs/examples/shapes.tsr
if [ "$(status)" = 2 ] && grep -q "'--cpu' needs a value ('--cpu=VALUE' or '--cpu VALUE')" "$TMP/err"; then pass "cli: --cpu= needs a value"
else fail "cli: --cpu= needs a value" "exit $(status)" "$TMP/err"; fi
run_tsrc -O4 docs/examples/shapes.tsr
if [ "$(status)" = 2 ] && grep -q "unknown option '-O4': the optimisation levels are -O0 to -O3" "$TMP/err"; then pass "cli: -O4 names the levels"
else fail "cli: -O4 names the levels" "exit $(status)" "$TMP/err"; fi
run_tsrc --explain
if [ "$(status)" = 2 ] && grep -q "'--explain' needs a value" "$TMP/err"; then pass "cli: a valued option without its value"
else fail "cli: a valued option without its value" "exit $(status)" "$TMP/err"; fi
run_tsrc docs/examples/moons.tsr -o ''
if [ "$(status)" = 2 ] && grep -q "'-o' needs a file name" "$TMP/err"; then pass "cli: an empty -o is a bad command line"
else fail "cli: an empty -o is a bad command line" "exit $(status)" "$TMP/err"; fi
run_tsrc
if [ "$(status)" = 2 ] && grep -q "no input file" "$TMP/err"; then pass "cli: no input file"
else fail "cli: no input file" "exit $(status)" "$TMP/err"; fi
run_tsrc --help
if [ "$(status)" = 0 ] && grep -q "usage: tsrc" "$TMP/out"; then pass "cli: --help"
else fail "cli: --help" "exit $(status)" "$TMP/err"; fi
# docs/cli.md shows that summary as it is (the block after "`tsrc --help` prints this summary:").
awk '/^`tsrc --help` prints this summary:$/ { f = 1; next } f && /^```text$/ { g = 1; next } g && /^```$/ { exit } g' \
    docs/cli.md >"$TMP/help.md"
if cmp -s "$TMP/out" "$TMP/help.md"; then pass "cli: docs/cli.md shows tsrc --help as it is"
else fail "cli: docs/cli.md shows tsrc --help as it is" "differs" "$TMP/help.md"; fi
run_tsrc --version
if [ "$(status)" = 0 ] && grep -q "^tsrc [0-9]" "$TMP/out"; then pass "cli: --version"
else fail "cli: --version" "exit $(status)" "$TMP/err"; fi
printf 'let%%op y = x +* "i;i" z\n' >"$TMP/bad.tsr"
rm -f "$TMP/bad.ast"
run_tsrc --dump-ast -o "$TMP/bad.ast" "$TMP/bad.tsr"
if [ "$(status)" = 1 ] && [ ! -e "$TMP/bad.ast" ] && [ -z "$(ls "$TMP" | grep tmp)" ]; then pass "cli: no output file after an error"
else fail "cli: no output file after an error" "exit $(status)" "$TMP/err"; fi
printf 'let%%op y = x +* "i;j=>ij" z\n' >"$TMP/good.tsr"
run_tsrc --dump-ast -o "$TMP/good.ast" "$TMP/good.tsr"
if [ "$(status)" = 0 ] && grep -q "einsum +\*" "$TMP/good.ast"; then pass "cli: -o writes the output"
else fail "cli: -o writes the output" "exit $(status)" "$TMP/err"; fi

# The schedule fuses consecutive pointwise nests over the same cells (nest.c, rewrite 4): the
# three updates of tests/native/fused_updates.tsr become one nest, and the transposed read after
# them, which reads the parameter at other cells, does not join.
run_tsrc --emit=sched-ir -o - tests/native/fused_updates.tsr
if [ "$(status)" = 0 ] && [ "$(grep -c 'fused with the next nest' "$TMP/out")" = 1 ] &&
   [ "$(grep -o 'fused with the next nest' "$TMP/out" | wc -l)" = 2 ] && grep -q '^  # assignment at fused_updates.tsr:12' "$TMP/out"
then pass "schedule: neighbouring pointwise nests fuse, a transposed read stays apart"
else fail "schedule: neighbouring pointwise nests fuse" "exit $(status)" "$TMP/out"; fi
# A clipped Adam step (tests/native/sink_updates.tsr, whose golden checks the values): each
# gradient's scaling moves down to its own parameter's Adam passes and fuses with them
# (nest.c sink_pointwise), one nest for each of the four parameters.
run_tsrc --emit=sched-ir -o - tests/native/sink_updates.tsr
if [ "$(status)" = 0 ] && [ "$(grep -c 'grad =\* loss\.scale[^;]*; lhs map injective, surjective; schedule: fused with the next nest' "$TMP/out")" = 4 ]
then pass "schedule: clipping's scaling of each gradient joins its Adam pass"
else fail "schedule: clipping's scaling of each gradient joins its Adam pass" "exit $(status)" "$TMP/out"; fi

# Row reductions (tests/native/row_reductions.tsr, whose golden checks the values): sums and
# maxima over each row's contiguous cells run W rows a vector over W×W blocks transposed in
# registers (sched.c rewrite 2d) wherever the rows come in multiples of W: at x86-64-v4 the f32
# rows of 16 and the f64 rows of 40 (12 nests; the f32 rows of 40 keep rewrite 2b), at
# x86-64-v3 (8 floats, 4 doubles a vector) all three (18).
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/row_reductions.tsr
v4=$(grep -c 'rows 16 at a time\|rows 8 at a time' "$TMP/out")
run_tsrc --emit=sched-ir --cpu=x86-64-v3 -o - tests/native/row_reductions.tsr
v3=$(grep -c 'rows 8 at a time\|rows 4 at a time' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$v4" = 12 ] && [ "$v3" = 18 ]
then pass "schedule: row reductions transpose W rows at a time (x86-64-v4 12 nests, v3 18)"
else fail "schedule: row reductions transpose W rows at a time" "x86-64-v4: $v4 nests (12 expected), x86-64-v3: $v3 (18)" "$TMP/out"; fi
# Each of those transpositions (14 operands' at x86-64-v4, 21 at v3) prefetches the rows of the
# next block (IrStmt.prefetch_rows), and the code holds the prefetches (prefetcht1: into L2).
for cpu in x86-64-v4:14 x86-64-v3:21; do
    run_tsrc --emit=sched-ir --cpu=${cpu%:*} -o - tests/native/row_reductions.tsr
    ahead=$(grep -c 'parallel transpose prefetching [0-9]* rows ahead:' "$TMP/out")
    run_tsrc --emit=asm --cpu=${cpu%:*} -o - tests/native/row_reductions.tsr
    if [ "$(status)" = 0 ] && [ "$ahead" = "${cpu#*:}" ] && grep -q 'prefetcht1' "$TMP/out"
    then pass "schedule: row reductions prefetch the next block's rows (${cpu%:*})"
    else fail "schedule: row reductions prefetch the next block's rows (${cpu%:*})" "$ahead transpositions prefetch (${cpu#*:} expected)" "$TMP/out"; fi
done

# One packed copy for two products (tests/native/shared_packing.tsr, whose golden checks the
# values; sched/nest.c rewrite 1c): routine `both` packs a once for its two products, routine
# `apart`, which halves a between them, twice — at x86-64-v4 and at x86-64-v3.
for cpu in x86-64-v4 x86-64-v3; do
    run_tsrc --emit=sched-ir --cpu=$cpu -o - tests/native/shared_packing.tsr
    shared=$(grep -c 'also read in place of a.rows' "$TMP/out")
    packs=$(grep -c 'schedule: pack a into' "$TMP/out")
    if [ "$(status)" = 0 ] && [ "$shared" = 1 ] && [ "$packs" = 3 ]
    then pass "schedule: two products share one packed copy of a, not across a change of it ($cpu)"
    else fail "schedule: two products share one packed copy ($cpu)" "$shared shared (1 expected), $packs packings (3)" "$TMP/out"; fi
done

# Epilogues of several stages (tests/native/epilogue_chain.tsr, whose golden checks the values;
# sched_tile.c): each routine's product of h takes the bias and the GELU, y's the GELU, the relu
# and the scaling, q's the bias and the relu but not the product that reads p again; z's bias
# result gets no storage.
run_tsrc --emit=sched-ir -o - tests/native/epilogue_chain.tsr
h=$(grep -c 'register tile .*through the epilogue into _+#t[0-9]*, then h$' "$TMP/out")
y=$(grep -c 'register tile .*through the epilogue into _gelu#t[0-9]*, then _relu#t[0-9]*, then y (the last columns)$' "$TMP/out")
q=$(grep -c 'register tile .*through the epilogue into _+#t[0-9]*, then _relu#t[0-9]*$' "$TMP/out")
z=$(grep -c 'register tile .*through the epilogue into _+#t[0-9]* (not stored), then z' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$h$y$q$z" = 2221 ] && ! grep -q 'then q' "$TMP/out"
then pass "schedule: epilogues of several stages (bias then GELU, three activations, a buffer not stored)"
else fail "schedule: epilogues of several stages" "h $h (2 expected), y $y (2), q $q (2), z $z (1)" "$TMP/out"; fi

# A half result's rounding (tests/native/half_tiles.tsr, whose golden checks the values;
# sched.c reduce_in_f32, docs/ir.md §5.4) is its tiles' epilogue: y's and gram's f32 copies
# are never stored, w.grad's is (the gradient adds into it), and no rounding nest is left — at
# x86-64-v4 (bf16 pairs or 16 lanes: 4 tile nests) and x86-64-v3 (8 lanes: 8).
for cpu_tiles in x86-64-v4:4 x86-64-v3:8; do
    cpu=${cpu_tiles%:*}
    run_tsrc --emit=sched-ir --cpu=$cpu -o - tests/native/half_tiles.tsr
    rounded=$(grep -c 'stored through the epilogue into \(y\|gram\)\( (the last columns)\)\{0,1\}$' "$TMP/out")
    kept=$(grep -c 'stored, and through the epilogue into w.grad' "$TMP/out")
    apart=$(grep -c '^  # schedule: round the reduction' "$TMP/out")
    if [ "$(status)" = 0 ] && [ "$rounded" = "${cpu_tiles#*:}" ] && [ "$kept" = 2 ] && [ "$apart" = 0 ]
    then pass "schedule: a half result is rounded in its tiles' epilogue ($cpu)"
    else fail "schedule: a half result is rounded in its tiles' epilogue ($cpu)" "$rounded unstored f32 copies (${cpu_tiles#*:} expected), $kept kept (2), $apart rounding nests (0)" "$TMP/out"; fi
done

# bf16 and f16 nests on the GPU (tests/native/half_gpu_tiles.tsr, whose golden the GPU schedule
# prints exactly under the reference executor): the product y (forward and, fused, its uses),
# the f16 product z in thread tiles, the f16 maximum reduced across a block.
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/half_gpu_tiles.tsr
tiles=$(grep -c '^  # .*schedule: a 2x2 tile of cells per GPU thread' "$TMP/out")
blocks=$(grep -c "^  # einsum '@^^'.*reduced across a block" "$TMP/out")
if [ "$(status)" = 0 ] && [ "$tiles" = 4 ] && [ "$blocks" = 1 ]
then pass "GPU schedule: bf16/f16 nests take thread tiles (4) and block reductions (1)"
else fail "GPU schedule: bf16/f16 nests take thread tiles and block reductions" "$tiles tiled nests (4 expected), $blocks block reductions (1)" "$TMP/out"; fi

# Block tiles on a GPU of 8 blocks (tests/native/gpu_split.tsr, whose golden the GPU leg checks):
# with --reassociate the reductions of 7 products too small to fill it are split across blocks
# (y twice, heads, long, y16 on the tensor cores, acc's product; wo's outer loop), each followed by the nest
# adding its parts; wg and wg16, summed over two loops, take block tiles and the tensor cores
# unsplit.  Without --reassociate nothing is split, and wg and wg16 still take them.
run_tsrc --emit=sched-ir --target=cuda --gpu-blocks=8 --reassociate -o - tests/native/gpu_split.tsr
split=$(grep -c '^  # .*GPU block.*the reduction split in' "$TMP/out")
added=$(grep -c '^  # .*parts of the split reduction added' "$TMP/out")
run_tsrc --emit=sched-ir --target=cuda --gpu-blocks=8 -o - tests/native/gpu_split.tsr
exact=$(grep -c '^  # .*GPU block' "$TMP/out")
exact_split=$(grep -c 'split in' "$TMP/out")
# The nest adding heads' parts walks 4 loops (sequences, heads, positions, features): the grid
# takes the features (contiguous) on x and the two longest of the others, the 2 sequences run
# inside each thread (sched_gpu.c map_nest).
run_tsrc --emit=sched-ir --target=cuda --gpu-blocks=8 --reassociate -o - tests/native/gpu_split.tsr
deep=$(grep -A4 "heads =:+ x \* h.*parts of the split reduction added" "$TMP/out" | tail -2 |
       sed -n 's/^ *for i[0-9]* < \([0-9]*\) parallel\(.*\):$/\1\2/p' | tr '\n' ' ')
if [ "$deep" = "64 gpu.x(64 threads) 2 " ]; then pass "GPU schedule: a nest of 4 parallel loops maps its innermost one on x and runs its shortest inside each thread"
else fail "GPU schedule: a nest of 4 parallel loops" "its last two loops: '$deep' ('64 gpu.x(64 threads) 2 ' expected)" "$TMP/out"; fi
if [ "$split" = 7 ] && [ "$added" = 7 ] && [ "$exact" = 2 ] && [ "$exact_split" = 0 ]
then pass "GPU schedule: 7 reductions split across blocks with --reassociate, none without; wg and wg16 in block kernels"
else fail "GPU schedule: split reductions" "$split split, $added adding nests (7 each expected); without --reassociate $exact block kernels (2), $exact_split split (0)" "$TMP/out"; fi
# Block tiles of 16x16 threads as segments (sched/kernel.c): the split products take four
# buffers of partial results in turn (sched_block.c), so y's two products, heads's and long's,
# each writing its own, and wg's tiles, which nothing between reads or writes, run side by side:
# one launch of five (two before, when every split wrote one buffer and waited for the sums of
# the one before); acc's and wo's, later, another of two.  Blocks of exactly their threads (any
# tile that runs beside another needs its block's shape).
run_tsrc --emit=ptx --gpu-blocks=8 --reassociate -o "$TMP/split.ptx" tests/native/gpu_split.tsr
tiles=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, re, sys
m = json.load(open(sys.argv[1]))
names = {b["id"]: re.sub(r"#s[0-9]+$", "#s", b["name"]) for b in m["buffers"]}  # (scratch numbers vary)
print(" ".join("+".join(sorted(names[p["buffer"]] for p in k["params"] if p.get("writes"))) for k in m["kernels"]
               if k["block"] == [16, 16, 1] and sum(bool(p.get("writes")) for p in k["params"]) > 1),
      len({p["buffer"] for k in m["kernels"] for p in k["params"] if "buffer" in p and names[p["buffer"]] == "partials#s"}))' "$TMP/split.json")
if [ "$tiles" = "partials#s+partials#s+partials#s+partials#s+wg partials#s+partials#s 4" ]
then pass "kernels: independent products' block tiles (16x16 threads), split or not, as segments of one launch (5, then 2)"
else fail "kernels: block tiles as segments" "launches of 16x16 threads writing more than one tensor, then the buffers of partial results: '$tiles' ('partials#s+partials#s+partials#s+partials#s+wg partials#s+partials#s 4' expected)" "$TMP/err"; fi

# Pointwise nests of at least 65 536 cells whose stores walk their innermost loop with stride 1
# give each GPU thread 4 adjacent cells (tests/native/gpu_vector.tsr, whose golden the GPU leg
# checks; sched_gpu.c rewrite 4v): prepare's x and k, update's four fused statements, the
# dropout mask; not q (257 cells a row) nor s (32 768 cells).  In the PTX, update's kernel loads
# its four tensors and stores its three 16 bytes at a time.
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/gpu_vector.tsr
vector=$(grep -c '^  # .*schedule: 4 adjacent cells a GPU thread' "$TMP/out")
run_tsrc --emit=ptx -o "$TMP/vector.ptx" tests/native/gpu_vector.tsr
update=$(awk '/\.entry vector_update_k0\(/,/^}/' "$TMP/vector.ptx")
v4=$(printf '%s\n' "$update" | grep -cE 'ld\.global(\.nc)?\.v4\.f32')/$(printf '%s\n' "$update" | grep -c 'st\.global\.v4\.f32')
if [ "$vector" = 3 ] && [ "$v4" = 4/3 ]
then pass "GPU schedule: 3 pointwise nests take 4 adjacent cells a thread; their PTX moves 16 bytes at a time"
else fail "GPU schedule: 4 adjacent cells a thread" "$vector nests (3 expected); update's 16-byte loads/stores $v4 (4/3 expected)" "$TMP/out"; fi

# Products with two batch loops (tests/native/gpu_jam.tsr, whose golden the GPU leg checks): the
# 4 sequences join each thread's tile, first batch loop (s) or second (t), each computed twice,
# alone (4x1x1) or, with threads enough, beside a 2x2 tile of positions (u: 4x2x2).
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/gpu_jam.tsr
jammed=$(grep -c '^  # .*schedule: a 4x1x1 tile of cells per GPU thread' "$TMP/out")/$(grep -c '^  # .*schedule: a 4x2x2 tile of cells per GPU thread' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$jammed" = 4/2 ]; then pass "GPU schedule: the shorter of two batch loops joins the thread tile (4 nests alone, 2 beside a 2x2 tile)"
else fail "GPU schedule: a batch loop jammed into the thread tile" "nests with a 4x1x1/4x2x2 tile: $jammed (4/2 expected)" "$TMP/out"; fi

# Consecutive scalar statements make one kernel (sched/kernel.c), and on the GPU the scalar
# stores move together past the statements independent of them (sched/nest.c rewrite 4s): AdamW's
# step counts and bias corrections of 4 parameters (tests/native/adamw_decay.tsr) were 24
# launches of one thread on a GPU, 18 of them right after another; then 8 (each parameter's
# scalars one launch, between the parameters' updates); then 6, one launch of the scalars of
# both parameters of each routine, 2 of them after another (a loss's serial sum, then the
# gradient's seed, which shares no local with it); now 4, none after another: consecutive
# kernels of one block make one launch, a chain (the loss's sum and the seed).  The reference
# executor runs the moved statements and prints the golden exactly (the GPU leg).
run_tsrc --emit=ptx -o "$TMP/adamw.ptx" tests/native/adamw_decay.tsr
single=$([ "$(status)" = 0 ] && "$PYTHON" tests/gpu/single_launches.py "$TMP/adamw.json")
if [ "$single" = "4 0" ]; then pass "kernels: scalar statements grouped into one launch (4 one-thread launches, none adjacent)"
else fail "kernels: scalar statements grouped" "one-thread launches, adjacent: '$single' ('4 0' expected)" "$TMP/err"; fi

# AdamW over 70 parameters (tests/native/gpu_many_params.tsr, whose golden the GPU leg checks):
# their 280 scalar tensors make 2 one-thread kernels of at most 256 buffers (sched/kernel.c), not
# one whose parameters would pass the 4 KiB a GPU kernel takes (runtime/model.c refuses it),
# one after the other (a chain of both would pass 256 buffers), and the loss's serial sum with
# the gradient's seed, which read the 70 parameters themselves since their differences from the
# targets are recomputed where read (docs/ir.md §4, step 5; before, a launch of their own), one
# more before the gradients: 3 one-thread launches (72 before the scalar stores were grouped, 4
# before chains), 1 after another, 6 launches in all (7 before step 5).
run_tsrc --emit=ptx -o "$TMP/many.ptx" tests/native/gpu_many_params.tsr
many=$([ "$(status)" = 0 ] && "$PYTHON" tests/gpu/single_launches.py "$TMP/many.json")
most=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys
m = json.load(open(sys.argv[1]))
print(max(sum("buffer" in p for p in k["params"]) for k in m["kernels"]))' "$TMP/many.json")
launches=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["kernels"]))' "$TMP/many.json")
if [ "$many" = "3 1" ] && [ "$most" = 256 ] && [ "$launches" = 6 ]; then pass "kernels: 280 scalar tensors grouped into one-thread kernels of at most 256 buffers (6 launches)"
else fail "kernels: scalar runs within the GPU's parameter space" "one-thread launches, adjacent: '$many' ('3 1' expected); most buffers a kernel: $most (256); launches: $launches (6)" "$TMP/err"; fi
# The same 70 parameters' AdamW updates, 70 independent nests of gpu loops, run as segments of
# 2 launches (sched/kernel.c; 70 launches before), each within the 256 buffers above; the
# golden's GPU leg checks their values on the reference executor, make check-gpu on a GPU.
updates=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys
m = json.load(open(sys.argv[1]))
names = {b["id"]: b["name"] for b in m["buffers"]}
print(sum(any(names[p["buffer"]].endswith(".m") for p in k["params"] if p.get("writes")) for k in m["kernels"]))' "$TMP/many.json")
if [ "$updates" = 2 ]; then pass "kernels: 70 parameters' updates as segments of 2 launches"
else fail "kernels: independent GPU nests as segments" "launches that update moments: '$updates' (2 expected)" "$TMP/err"; fi
# Mixed precision (tests/native/gpu_mixed_updates.tsr, whose golden the GPU leg checks): AdamW's
# per-cell passes over a bf16 and an f16 parameter — the f32 master's start, the moments read
# from the half gradient, the master's step, the master rounded into the parameter — fuse into
# one nest each, as the f32 parameter's do (docs/gpu.md, rewrite 4): one launch writes each
# parameter, its master and its moments (three each before), 10 launches in all (12 before).
run_tsrc --emit=ptx -o "$TMP/mixed.ptx" tests/native/gpu_mixed_updates.tsr
mixed=$([ "$(status)" = 0 ] && "$PYTHON" tests/gpu/update_passes.py "$TMP/mixed.json" w v u)
if [ "$mixed" = "w:1:one v:1:one u:1:one 10" ]; then pass "kernels: a bf16 and an f16 parameter's AdamW passes in one launch each, as an f32 one's"
else fail "kernels: mixed-precision updates fused" "launches writing each parameter's state: '$mixed' ('w:1:one v:1:one u:1:one 10' expected)" "$TMP/err"; fi
# The same on the CPU (nest.c fusion_keeps_apart): one nest stores each parameter, its f32
# master and its moments (five nests for a half parameter before), at x86-64-v4 and x86-64-v3.
mixed=
for cpu in x86-64-v4 x86-64-v3; do
    run_tsrc --emit=sched-ir --cpu=$cpu -o - tests/native/gpu_mixed_updates.tsr
    for p in w v u; do
        nests=$([ "$(status)" = 0 ] && awk -v p="$p" '/^  [^ #]/ { nest++ }
            /^ +[^ ]+\[.*\] = / { b = $1; sub(/\[.*/, "", b); if (b == p || b == p ".m" || b == p ".v" || b == p ".master") seen[nest] = 1 }
            END { for (k in seen) c++; print c + 0 }' "$TMP/out")
        mixed="$mixed $cpu:$p:$nests"
    done
done
if [ "$mixed" = " x86-64-v4:w:1 x86-64-v4:v:1 x86-64-v4:u:1 x86-64-v3:w:1 x86-64-v3:v:1 x86-64-v3:u:1" ]
then pass "schedule: a bf16 and an f16 parameter's AdamW passes are one nest each on the CPU, as an f32 one's"
else fail "schedule: mixed-precision updates fused on the CPU" "nests storing each parameter, its master and moments:$mixed (1 each expected)" "$TMP/out"; fi
# Small nests recomputed where they are read (opt.c rule 7, docs/ir.md §4 step 5;
# tests/native/local_cells.tsr, whose golden the GPU leg checks): the softmax's gradient of its
# sums, more than 3 operations a row and read by one statement, is no launch of its own: 19 launches
# (20 when only values of at most 3 operations were recomputed); the layer norm's gradient of its
# variance, read by two statements, stays one.
run_tsrc --emit=ptx -o "$TMP/cells.ptx" tests/native/local_cells.tsr
cells=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys
m = json.load(open(sys.argv[1]))
names = {b["id"]: b["name"] for b in m["buffers"]}
alone = [w for w in ([names[p["buffer"]] for p in k["params"] if p.get("writes")] for k in m["kernels"])
         if len(w) == 1 and w[0].startswith("_++#") and w[0].endswith(".grad")]
print(len(m["kernels"]), len(alone))' "$TMP/cells.json")
if [ "$cells" = "19 1" ]; then pass "kernels: a softmax's gradient of its sums recomputed where read (19 launches)"
else fail "kernels: larger small nests recomputed by their one reader" "launches, and launches writing a row sum's gradient alone: '$cells' ('19 1' expected)" "$TMP/err"; fi
# A row's nests in one block (tests/native/gpu_rows.tsr, whose golden the GPU leg checks, with
# races reported; sched_gpu.c rewrite 7r): with --reassociate two layer norms' forward passes —
# each row's statistics reduced across a block of threads, the pointwise nests between and
# after them — are one launch that writes h and y (13 before), and a softmax's over rows of 64
# (its maximum, exponentials, sum and normalised cells: 4 before) one that writes att and the
# maxima; the program's routines 14 launches (48 before), the probe's sums over a nest whose
# loops have the rows' extents but not their axes each a launch of their own.
run_tsrc --emit=ptx --reassociate -o "$TMP/rows.ptx" tests/native/gpu_rows.tsr
rows=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys
m = json.load(open(sys.argv[1]))
names = {b["id"]: b["name"] for b in m["buffers"]}
writes = [{names[p["buffer"]] for p in k["params"] if p.get("writes")} for k in m["kernels"]]
softmax = sum("att" in w and any(n.startswith("_@^^#") for n in w) for w in writes)
print(len(writes), sum({"h", "y"} <= w for w in writes), softmax)' "$TMP/rows.json")
if [ "$rows" = "14 2 1" ]; then pass "kernels: layer norms and a softmax forward in one launch each, one block a row (14 launches)"
else fail "kernels: a row's reductions and pointwise nests in one block" "launches, those writing both norms' outputs, those writing the softmax and its maxima: '$rows' ('14 2 1' expected)" "$TMP/err"; fi
# Gradient clipping's norm (tests/native/gpu_norm_segments.tsr, whose golden the GPU leg checks):
# each parameter's squares, a nest of GPU loops or a block's kernel that reduces each cell across
# a block, alternate with the sums into the one-cell total; outlining moves them past those sums
# and runs all four side by side, one launch (sched/kernel.c; four before), a segment of blocks'
# kernels with its shared memory from the same start as the others'.  The four sums into the
# total, each a block's reduction or one thread's loop, then run as one chain of one block with
# the scale after them: the total is written by 2 launches (its zero, the chain; 5 before).
run_tsrc --emit=ptx --reassociate -o "$TMP/norm.ptx" tests/native/gpu_norm_segments.tsr
norm=$([ "$(status)" = 0 ] && "$PYTHON" -c 'import json, sys
m = json.load(open(sys.argv[1]))
names = {b["id"]: b["name"] for b in m["buffers"]}
writes = [[names[p["buffer"]] for p in k["params"] if p.get("writes")] for k in m["kernels"]]
squares = [sum(w.endswith(".squares") for w in ws) for ws in writes]
print(" ".join(str(n) for n in squares if n), sum(any(w.endswith(".total") for w in ws) for ws in writes))' "$TMP/norm.json")
if [ "$norm" = "4 2" ]; then pass "kernels: 4 parameters' squares as segments of 1 launch, the sums into the total 1 chain"
else fail "kernels: a norm's squares as segments, its sums as a chain" "squares written by each launch that writes any, then launches that write the total: '$norm' ('4 2' expected)" "$TMP/err"; fi
# The GPU's scheduled IR holds its statements in launch order (kernel_order), the squares before
# the sums, so that the golden's GPU leg runs them so; the CPU's keeps the program's alternation.
sq=$(grep -n 'squares; dtype' stdlib/train.tsr | cut -d: -f1)   # _add_squared_grad's two lines
order_of() { sed -n "s/^  # assignment at train.tsr:\($sq\|$((sq + 1))\):.*/\1/p" "$TMP/out" | tr '\n' ' '; }
run_tsrc --emit=sched-ir --target=cuda --reassociate -o - tests/native/gpu_norm_segments.tsr
gpu_order=$(order_of)
run_tsrc --emit=sched-ir --reassociate -o - tests/native/gpu_norm_segments.tsr
cpu_order=$(order_of)
s1=$((sq + 1))
if [ "$gpu_order" = "$sq $sq $sq $sq $s1 $s1 $s1 $s1 " ] && [ "$cpu_order" = "$sq $s1 $sq $s1 $sq $s1 $sq $s1 " ]
then pass "kernels: the GPU's scheduled IR in launch order (a norm's squares moved before its sums), the CPU's as written"
else fail "kernels: the GPU's scheduled IR in launch order" "squares ($sq) and sums ($s1): GPU '$gpu_order', CPU '$cpu_order'" "$TMP/out"; fi

# Scatter-adds whose rows fit in shared memory (tests/native/gpu_scatter_rows.tsr, whose golden
# the GPU leg checks, with races reported; sched_scatter.c rewrite 7s): the gradients of t's two
# gathers (40 rows of 64 cells) and u's (24 rows of 2 x 32) add in shared memory, a block's
# rows copied in and out (3 kernels); big's 600 rows of 32 cells keep a thread a cell.
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/gpu_scatter_rows.tsr
scatters=$(grep -c "schedule: the rows of [0-9]* cells a GPU block ([0-9]* rows) added in shared memory" "$TMP/out")
plain=$(grep -c "^  # einsum 'gather' (backward) at gpu_scatter_rows.tsr:26:16: big.grad =+ brows.grad; lhs map not injective, not surjective$" "$TMP/out")
if [ "$(status)" = 0 ] && [ "$scatters" = 3 ] && [ "$plain" = 1 ]
then pass "GPU schedule: 3 gathers' gradients add their rows in shared memory; one of 600 rows keeps a thread a cell"
else fail "GPU schedule: scatter-adds in shared memory" "$scatters in shared memory (3 expected), big's plain: $plain (1)" "$TMP/out"; fi

# Reductions down columns (tests/native/gpu_columns.tsr, whose golden the GPU leg checks, with
# races reported; sched_gpu.c rewrite 7c): with --reassociate the four f32 column reductions,
# the bf16 matrix's two and clipping's squares of the weight's gradient each take 32 cells a
# block, the rows in slices of a warp (7); without it only the two maxima, whose values no
# order changes (2).
run_tsrc --emit=sched-ir --target=cuda --reassociate -o - tests/native/gpu_columns.tsr
columns=$(grep -c "each run of 32 cells reduced across a block of [0-9]* GPU threads, [0-9] slices of the steps" "$TMP/out")
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/gpu_columns.tsr
exact_columns=$(grep -c "slices of the steps" "$TMP/out")
if [ "$columns" = 7 ] && [ "$exact_columns" = 2 ]
then pass "GPU schedule: 7 reductions down columns (2 of bf16 cells), 32 cells a block, with --reassociate; the maxima alone without"
else fail "GPU schedule: reductions down columns" "$columns column kernels with --reassociate (7 expected), $exact_columns without (2)" "$TMP/out"; fi

# A large grid's tiles in groups of rows (tests/native/gpu_tile_groups.tsr, whose golden the GPU
# leg checks with its gpu-args, races reported; sched_block.c): with --gpu-blocks=4 the f32 block
# tiles and the bf16 tensor-core tiles (sm_80's mma.sync, sm_90a's warpgroups) run in groups of
# 4 rows; with the default 128 blocks, grids of 32 blocks keep their order.
groups=0
for arch in sm_80 sm_90a; do
    run_tsrc --emit=sched-ir --target=cuda --arch=$arch --gpu-blocks=4 -o - tests/native/gpu_tile_groups.tsr
    groups=$((groups + $(grep -c "tiles in groups of 4 rows" "$TMP/out")))
done
run_tsrc --emit=sched-ir --target=cuda -o - tests/native/gpu_tile_groups.tsr
ungrouped=$(grep -c "tiles in groups" "$TMP/out")
if [ "$groups" = 4 ] && [ "$ungrouped" = 0 ]
then pass "GPU schedule: 4 grids of block tiles in groups of 4 rows with --gpu-blocks=4; none at 128 blocks"
else fail "GPU schedule: block tiles in groups of rows" "$groups grouped grids with --gpu-blocks=4 (4 expected), $ungrouped at the default (0)" "$TMP/out"; fi

# Gradients passed along inside one fused backward nest (tests/native/local_cells.tsr, whose
# golden checks the values) live in locals of the nest (sched/nest.c rewrite 4b): the layer
# norm's and the softmax's widening and scalings, 5 buffers at x86-64-v4 and at x86-64-v3; the
# named h keeps its gradient's buffer.  (The softmax widening's gradient was a sixth: its copy,
# read by later nests, is now read from it (opt.c rule 8), so it is stored and the copy is not.)
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/local_cells.tsr
v4=$(grep -o "schedule: [^;]*never stored" "$TMP/out" | grep -c '^schedule: _')
h4=$(grep -c "h.grad's cells kept" "$TMP/out")
run_tsrc --emit=sched-ir --cpu=x86-64-v3 -o - tests/native/local_cells.tsr
v3=$(grep -o "schedule: [^;]*never stored" "$TMP/out" | grep -c '^schedule: _')
if [ "$(status)" = 0 ] && [ "$v4" = 5 ] && [ "$v3" = 5 ] && [ "$h4" = 0 ]
then pass "schedule: gradients inside one fused nest are locals (5 at x86-64-v4 and v3; not the named h's)"
else fail "schedule: gradients inside one fused nest are locals" "x86-64-v4: $v4 (5 expected), x86-64-v3: $v3 (5), h: $h4 (0)" "$TMP/out"; fi

# A convolution's backward pass (tests/native/conv_schedule.tsr, whose .out golden checks the
# values natively): at x86-64-v4 the forward's one-vector tile takes 8 rows, the input gradient
# is untangled inside a parallel loop over the batch, and the kernel gradient over 6 input
# channels takes its 16 lanes along the output channels (sched_tile.c, docs/ir.md §5).
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/conv_schedule.tsr
if [ "$(status)" = 0 ] && grep -q 'register tile 8x16 of y over 150 reduction cells' "$TMP/out" &&
   grep -q 'for each batch cell, one reduction nest per window position' "$TMP/out" &&
   grep -q 'register tile 6x16 of k.grad over 512 reduction cells, lanes strided in the result' "$TMP/out"
then pass "schedule: a convolution's tiles, untangled input gradient and strided-lane kernel gradient"
else fail "schedule: a convolution's tiles and gradients" "exit $(status)" "$TMP/out"; fi

# A transposed product's broadcast operand, its reduction steps more than a page apart, is packed
# a group of row blocks per pass down it (tests/native/packed_groups.tsr, sched_tile.c pack_group).
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/packed_groups.tsr
v4=$(grep -c 'pack a into panels of 12 for the register tile, 5 panels a pass' "$TMP/out")
prefetched=$(grep -c '^  a.rows#s[0-9]* : [0-9]*  scratch prefetch 512 \[' "$TMP/out")
run_tsrc --emit=sched-ir --cpu=x86-64-v3 -o - tests/native/packed_groups.tsr
v3=$(grep -c 'pack a into panels of 6 for the register tile, 19 panels a pass' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$v4" -ge 1 ] && [ "$v3" -ge 1 ] && [ "$prefetched" -ge 1 ]
then pass "schedule: a transposed operand packed a group of row blocks per pass, prefetched"
else fail "schedule: a transposed operand packed a group of row blocks per pass, prefetched" "v4 $v4, v3 $v3, prefetched $prefetched" "$TMP/out"; fi
# ... and the native code prefetches it
run_tsrc --emit=asm --cpu=x86-64-v4 -o - tests/native/packed_groups.tsr
if [ "$(status)" = 0 ] && grep -q 'prefetcht0' "$TMP/out"; then pass "native code prefetches a packed operand's stream"
else fail "native code prefetches a packed operand's stream" "exit $(status)" "$TMP/out"; fi
# Row sums over a contiguous axis (tests/native/row_sums.tsr, whose .out golden checks the bits in
# every executor): the layer norm's reductions over 40 rows run as blocks of 8 rows whose chains
# interleave (sched.c rewrite 2b), and the 3 rows of a sum per head stay one chain each.
run_tsrc --emit=sched-ir -o - tests/native/row_sums.tsr
blocks=$(grep -c 'for i[0-9]* < 8 parallel unroll:' "$TMP/out"); heads=$(grep -A3 "row_sums.tsr:12:16" "$TMP/out" | grep -c 'l[0-9]* = 0')
if [ "$(status)" = 0 ] && [ "$blocks" -ge 4 ] && [ "$heads" = 1 ]
then pass "schedule: row sums over a contiguous axis interleave 8 rows' chains"
else fail "schedule: row sums over a contiguous axis interleave 8 rows' chains" "unrolled blocks $blocks, per-head chain $heads" "$TMP/out"; fi
# A streamed bf16/f16 result (tests/native/stream_half.tsr, whose .out golden checks its values)
# leaves through non-temporal stores at both vector widths: on AVX-512 by the vmovntdq that
# cg_llvm.c writes out, never by vpmovdw's truncating store to memory, which goes through the
# caches (LLVM folds a plain non-temporal store of the narrowed cells into it).
run_tsrc --emit=asm --cpu=x86-64-v4 -o - tests/native/stream_half.tsr
v4_nt=$(grep -c 'vmovntdq[[:space:]]*%ymm' "$TMP/out"); v4_trunc=$(grep -c 'vpmovdw[[:space:]]*%zmm[0-9]*, [^%]' "$TMP/out")
run_tsrc --emit=asm --cpu=x86-64-v3 -o - tests/native/stream_half.tsr
v3_nt=$(grep -c 'vmovntdq[[:space:]]*%xmm' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$v4_nt" -ge 2 ] && [ "$v4_trunc" = 0 ] && [ "$v3_nt" -ge 2 ]
then pass "native code streams bf16 and f16 results around the caches (AVX-512 and AVX2)"
else fail "native code streams bf16 and f16 results around the caches (AVX-512 and AVX2)" "v4 vmovntdq $v4_nt, v4 vpmovdw to memory $v4_trunc, v3 vmovntdq $v3_nt" "$TMP/out"; fi

# bf16 and f16 contractions run as register-tiled f32 ones: their half operands widened into f32
# copies, the result rounded from one in the tiles' epilogue (sched.c reduce_in_f32; the .out
# golden of tests/native/half_tiles.tsr checks the bits in every executor).
run_tsrc --emit=sched-ir --cpu=x86-64-v3 -o - tests/native/half_tiles.tsr
if [ "$(status)" = 0 ] && grep -q 'schedule: widen w into f32 for the reduction' "$TMP/out" &&
   grep -q 'schedule: widen w.grad into f32 for the reduction' "$TMP/out" &&
   grep -q 'register tile 6x16 of y.f32#s[0-9]* over 40 reduction cells' "$TMP/out" &&
   grep -q 'register tile 6x16 of gram.f32#s[0-9]* over 24 reduction cells' "$TMP/out" &&
   grep -q "epilogue: round the reduction's f32 cells into w.grad" "$TMP/out"
then pass "schedule: bf16 and f16 contractions tiled in f32"
else fail "schedule: bf16 and f16 contractions tiled in f32" "exit $(status)" "$TMP/out"; fi

# Other reductions of half cells accumulate in an f32 copy of their result (sched.c
# reduce_in_f32; tests/native/half_reductions.tsr, whose .out golden checks the bits in every
# executor): a bf16 column sum in place, a vector of cells at a time (rewrite 2), an f16 row sum
# along the contiguous axis in blocks of 8 rows (rewrite 2b), each rounded into its result after.
run_tsrc --emit=sched-ir -o - tests/native/half_reductions.tsr
if [ "$(status)" = 0 ] && grep -q "schedule: round the reduction's f32 cells into col" "$TMP/out" &&
   grep -q 'col.f32#s[0-9]*\[i[0-9]*\] = (col.f32#s[0-9]*\[i[0-9]*\] + g\[' "$TMP/out" &&
   grep -q 'schedule: widen col into f32 for the reduction' "$TMP/out" &&
   grep -A3 "half_reductions.tsr:17:57" "$TMP/out" | grep -q 'for i[0-9]* < 8 parallel unroll:'
then pass "schedule: bf16 and f16 sums accumulate in f32 copies (rewrites 2 and 2b)"
else fail "schedule: bf16 and f16 sums accumulate in f32 copies" "exit $(status)" "$TMP/out"; fi

# bf16 pairs (tests/native/bf16_pairs.tsr; sched_tile.c tile_pairs, docs/ir.md §5.4): for AMD's
# Zen 4 the schedule packs bf16 × bf16 contractions in pairs of steps (LOOP_DOT_PAIRS) and native
# code runs them on VDPBF16PS where no operand is tiny; Sapphire Rapids (the instruction at half
# the f32 rate there) and x86-64-v4 (no AVX-512 BF16) keep the f32 tiles.  The reference executor
# runs the znver4 schedule to the unscheduled program's bits on every machine; native code for
# znver4 runs where this machine has AVX-512 BF16, and is only compiled elsewhere.
run_tsrc --emit=sched-ir --cpu=znver4 -o - tests/native/bf16_pairs.tsr
paired=$(grep -c 'register tile [0-9x]* of [a-z.#0-9]* over [0-9]* reduction cells in bf16 pairs' "$TMP/out")
loops=$(grep -c 'reduction dot_pairs unless l[0-9]*:' "$TMP/out")
run_tsrc --emit=sched-ir --cpu=sapphirerapids -o - tests/native/bf16_pairs.tsr
spr=$(grep -c 'dot_pairs' "$TMP/out")
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/bf16_pairs.tsr
v4=$(grep -c 'dot_pairs' "$TMP/out")
run_tsrc --emit=asm --cpu=znver4 -o - tests/native/bf16_pairs.tsr
instructions=$(grep -c 'vdpbf16ps' "$TMP/out")
if [ "$(status)" = 0 ] && [ "$paired" -ge 4 ] && [ "$loops" -ge 4 ] && [ "$spr" = 0 ] && [ "$v4" = 0 ] && [ "$instructions" -ge 1 ]
then pass "schedule: bf16 contractions in pairs for znver4 (VDPBF16PS), not for sapphirerapids or x86-64-v4"
else fail "schedule: bf16 contractions in pairs for znver4" "znver4 tiles $paired, loops $loops, vdpbf16ps $instructions; sapphirerapids $spr, v4 $v4" "$TMP/out"; fi
# gw's A (a weight gradient's form, lanes adjacent): its 6 full panels packed 6 a pass, each
# pair of rows' 6 lanes interleaved as one shuffle of vectors (sched_tile.c pairs_group, cg_llvm.c
# interleave_pairs); with a pass per block or a copy per cell, neither.
run_tsrc --emit=sched-ir --cpu=znver4 -o - tests/native/bf16_pairs.tsr
grouped=$([ "$(status)" = 0 ] && grep -c 'pack gx into panels of 6 for the register tile, in pairs of steps, counting tiny values, 6 panels a pass' "$TMP/out")
run_tsrc --emit=llvm --cpu=znver4 -o - tests/native/bf16_pairs.tsr
interleaved=$([ "$(status)" = 0 ] && grep -c 'shufflevector <6 x i16>' "$TMP/out")
if [ "$grouped" = 1 ] && [ "${interleaved:-0}" -ge 1 ]
then pass "schedule: bf16 pairs of adjacent lanes packed a group of panels a pass, interleaved as vectors"
else fail "schedule: bf16 pairs packed a group of panels a pass" "grouped packs: '$grouped' (1 expected), <6 x i16> shuffles: '$interleaved' (1 or more)" "$TMP/out"; fi
TSR_PRINT_EXACT=1 run_tsrc --run --interp --no-sched tests/native/bf16_pairs.tsr
cp "$TMP/out" "$TMP/pairs_ref.out"
TSR_PRINT_EXACT=1 run_tsrc --run --interp --cpu=znver4 tests/native/bf16_pairs.tsr
if [ "$(status)" = 0 ] && diff -u "$TMP/pairs_ref.out" "$TMP/out" >"$TMP/diff" 2>&1
then pass "tests/native/bf16_pairs.tsr (the znver4 schedule on the reference executor = unscheduled)"
else fail "tests/native/bf16_pairs.tsr (the znver4 schedule on the reference executor)" "exit $(status)" "$TMP/diff"; fi
if [ -n "$(sh tests/host_cpus.sh znver4)" ]; then
    TSR_PRINT_EXACT=1 run_tsrc --run -O3 --cpu=znver4 tests/native/bf16_pairs.tsr
    if [ "$(status)" = 0 ] && diff -u "$TMP/pairs_ref.out" "$TMP/out" >"$TMP/diff" 2>&1
    then pass "tests/native/bf16_pairs.tsr (native --cpu=znver4, VDPBF16PS = reference executor)"
    else fail "tests/native/bf16_pairs.tsr (native --cpu=znver4)" "exit $(status)" "$TMP/diff"; fi
else
    echo "INFO this machine has no AVX-512 BF16: tests/native/bf16_pairs.tsr's znver4 code is compiled, not run"
    run_tsrc --emit=obj -O3 --cpu=znver4 -o "$TMP/pairs.o" tests/native/bf16_pairs.tsr
    if [ "$(status)" = 0 ] && [ -s "$TMP/pairs.o" ]; then pass "tests/native/bf16_pairs.tsr (compiled for znver4)"
    else fail "tests/native/bf16_pairs.tsr (compiled for znver4)" "exit $(status)" "$TMP/err"; fi
fi

# Code for a named CPU uses only the extensions the model image records (compiler/cg/cg_module.c
# unrecorded_extensions): znver4's f16 code used SSE4a (insertq), a SIGILL on Intel CPUs that have
# every recorded extension.
run_tsrc --emit=asm -O3 --cpu=znver4 -o - tests/native/f16_linear_step.tsr
if [ "$(status)" = 0 ] && ! grep -qE '[[:space:]](insertq|extrq|movntss|movntsd)[[:space:]]' "$TMP/out"
then pass "tests/native/f16_linear_step.tsr (znver4 code without SSE4a, which the image does not record)"
else fail "tests/native/f16_linear_step.tsr (znver4 code without SSE4a)" "exit $(status), or an SSE4a instruction" "$TMP/err"; fi
if [ -n "$(sh tests/host_cpus.sh znver4)" ]; then
    run_tsrc --run --interp tests/native/f16_linear_step.tsr
    cp "$TMP/out" "$TMP/step_ref.out"
    run_tsrc --run -O3 --cpu=znver4 tests/native/f16_linear_step.tsr
    if [ "$(status)" = 0 ] && diff -u "$TMP/step_ref.out" "$TMP/out" >"$TMP/diff" 2>&1
    then pass "tests/native/f16_linear_step.tsr (native --cpu=znver4 = reference executor)"
    else fail "tests/native/f16_linear_step.tsr (native --cpu=znver4)" "exit $(status)" "$TMP/diff"; fi
fi

# A contraction whose broadcast operand (an f64 A of 17 MB) is more than the cache can be counted
# on to hold has its reduction split into blocks (sched.c split_reduction; the .out golden of
# tests/native/split_reduction.tsr checks the values in every executor).
run_tsrc --emit=sched-ir --cpu=x86-64-v3 -o - tests/native/split_reduction.tsr
if [ "$(status)" = 0 ] && grep -q 'schedule: the reduction in 2 blocks of 1050 steps' "$TMP/out" &&
   grep -q 'reduction blocks of 1050, setting block#' "$TMP/out" && grep -q 'register tile 6x8 of c over 1050 reduction cells' "$TMP/out"
then pass "schedule: a long reduction over a large operand split into blocks"
else fail "schedule: a long reduction over a large operand split into blocks" "exit $(status)" "$TMP/out"; fi

# Panels of B that outgrow the cache (tests/native/panels_in_cache.tsr, whose .out golden checks
# the values in every executor): a weight's 17 panels shared by 3 sequences are the outermost loop,
# each packed there and serving every sequence's full and last rows (sched_tile.c), but 5 panels
# are not (the batch loop stays outermost); one panel over a reduction of
# 4224 steps (1.1 MB) has the reduction split into blocks (sched.c split_reduction).
run_tsrc --emit=sched-ir --cpu=x86-64-v4 -o - tests/native/panels_in_cache.tsr
outside=$(awk '/each panel of w for every row of every batch cell/ { getline; print; exit }' "$TMP/out")
if [ "$(status)" = 0 ] && echo "$outside" | grep -q '^  for i[0-9]* < 17 parallel:$' &&
   grep -A 2 'each panel of w for every row' "$TMP/out" | grep -q '# schedule: pack this panel of w' &&
   grep -A 30 'each panel of w for every row' "$TMP/out" | grep -q 'register tile 6x64 of c over 256 reduction cells (the last rows)' &&
   grep -q "the reduction in 3 blocks of 1408 steps, each block's panels of h kept in cache" "$TMP/out" &&
   grep -q 'register tile 6x64 of e over 1408 reduction cells' "$TMP/out" &&
   ! grep -q 'each panel of v for every row' "$TMP/out" && grep -q 'register tile 6x64 of f over 1152 reduction cells' "$TMP/out"
then pass "schedule: panels outgrowing the cache: the panel loop outermost (8 panels or more), a long reduction split"
else fail "schedule: panels outgrowing the cache" "exit $(status); after the comment: $outside" "$TMP/out"; fi

# A sub-suite that prints its own "N passed, N failed" as its last such line: its counts join
# ours.  add_summary LABEL STATUS OUTPUT-FILE
add_summary() {
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$3" | tail -n 1)
    p=$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
    f=$(echo "$summary" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
    if [ -z "$summary" ] || [ "$2" != 0 ]; then
        failed=$((failed + ${f:-0} + 1))
        passed=$((passed + ${p:-0}))
        echo "FAIL $1 (exit $2)"
        grep -v '^PASS' "$3" | sed -n '1,40s/^/    /p'
    else
        passed=$((passed + p))
        echo "PASS $1 ($summary)"
    fi
}

# C unit tests.
for u in $(ls "$UNIT_DIR"/*_test 2>/dev/null | LC_ALL=C sort); do
    "$u" >"$TMP/unit.out" 2>&1
    add_summary "unit: $(basename "$u")" $? "$TMP/unit.out"
done

# The fuzz targets, replayed without libFuzzer (tests/fuzz/replay.c) over their seeds — every
# program, at every -O level, CPU and mode for the compile target; data_seeds.py's files — and over
# past findings kept in tests/fuzz/regress/TARGET/.
# replay TARGET MIN ARGS…: replay.c's arguments, then the target's past findings; at least MIN
# programs must get through every stage the target runs (so a harness that silently stopped
# compiling anything fails).
replay() {
    t=$1 min=$2
    shift 2
    if [ -d "tests/fuzz/regress/$t" ]; then set -- "$@" --cycle 0 "tests/fuzz/regress/$t"; fi
    "$FUZZ_REPLAY_DIR/$t" "$@" >"$TMP/replay_$t.out" 2>&1
    st=$?
    compiled=$(tail -n 1 "$TMP/replay_$t.out" | sed -n 's/^replay: [0-9]* inputs, \([0-9]*\) compiled$/\1/p')
    if [ $st = 0 ] && [ "${compiled:-0}" -ge "$min" ]; then
        pass "fuzz target $t: seeds and past findings replayed ($(tail -n 1 "$TMP/replay_$t.out" | cut -d' ' -f2-))"
    else
        fail "fuzz target $t: seeds and past findings replayed" "exit $st" "$TMP/replay_$t.out"
    fi
}
if [ -n "${FUZZ_REPLAY_DIR:-}" ]; then
    programs=$(find tests docs/examples stdlib -name '*.tsr' | LC_ALL=C sort)
    "$PYTHON" tests/fuzz/data_seeds.py "$TMP/data_seeds" tests/native/data/*
    # shellcheck disable=SC2086
    replay parse 60 --cycle 1 $programs
    # shellcheck disable=SC2086
    replay compile 60 --cycle 32 $programs
    replay data 3 "$TMP/data_seeds"
    # the seed images unchanged (tests/fuzz/regress/image/), then edited by the data seeds' bytes
    replay image 3 --cycle 11 "$TMP/data_seeds"
fi

# Object mode, drivers in C and C++ linking two models, bad data in executables, outputs.
sh tests/native/drivers.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/drivers.out" 2>&1
add_summary "native: object mode, drivers, executables" $? "$TMP/drivers.out"

# --profile: the kernel table of executables and objects, results unchanged.
sh tests/native/profile.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/profile.out" 2>&1
add_summary "native: --profile" $? "$TMP/profile.out"

# tsrc's own exp, log, tanh and sigmoid: native code equals the reference executor's C sequence
# on 16.8 million inputs at every CPU level the machine runs, and calls no libm for them.
sh tests/native/transcendentals.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/transcendentals.out" 2>&1
add_summary "native: exp, log, tanh and sigmoid, bit for bit" $? "$TMP/transcendentals.out"

# Run-time sizes: an object driven from C at several batches, executables at every CPU level.
sh tests/native/runtime_sizes.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/sizes.out" 2>&1
add_summary "native: run-time sizes, object and executables" $? "$TMP/sizes.out"

# i32 data (.npy of integers, checked to fit) and token files (sequential and random windows, bad
# files), printed by both executors; the header's int32_t accessor, the manifest, Python's int32
# views (tests/native/dtype_data.sh).
sh tests/native/dtype_data.sh "$TSRC" "$(dirname "$TSRC")" "$PYTHON" >"$TMP/dtype.out" 2>&1
add_summary "native: i32 data and token files" $? "$TMP/dtype.out"
# f64 data (.npy of every float and integer kind, CSV), an f64 parameter trained and saved as
# float64, NumPy's float64 checkpoint loaded, the header's double * accessor
# (tests/native/dtype_f64_data.sh).
sh tests/native/dtype_f64_data.sh "$TSRC" "$PYTHON" >"$TMP/dtype_f64.out" 2>&1
add_summary "native: f64 data, parameters and checkpoints" $? "$TMP/dtype_f64.out"
# bf16 and f16 data (.npy of float16/32/64 and int32, CSV, each value rounded once), bf16 and f16
# parameters trained, saved (float32 and float16 arrays), resumed and loaded from NumPy, the
# header's uint16_t * accessors, the manifest, Python's views (tests/native/dtype_half_data.sh).
sh tests/native/dtype_half_data.sh "$TSRC" "$(dirname "$TSRC")" "$PYTHON" >"$TMP/dtype_half.out" 2>&1
add_summary "native: bf16 and f16 data, parameters and checkpoints" $? "$TMP/dtype_half.out"
# u8, bool and i64 data (.npy of uint8, int64 and bool, CSV of 0 and 1 and of int64's ends,
# checked to fit) computed on and printed by both executors as NumPy computes, bad files, the
# header's uint8_t * and int64_t * accessors, the manifest, Python's uint8, bool and int64 views
# (tests/native/dtype_int_data.sh).
sh tests/native/dtype_int_data.sh "$TSRC" "$(dirname "$TSRC")" "$PYTHON" >"$TMP/dtype_int.out" 2>&1
add_summary "native: u8, bool and i64 data, header, manifest and Python" $? "$TMP/dtype_int.out"
# bf16 and f16 values (tests/native/dtype_half.tsr, whose golden the loop above checks in every
# executor) against NumPy's float16 and a bf16 rounding of float32 (tests/native/dtype_half.py).
{ TSR_PRINT_EXACT=1 "$TSRC" --run --interp tests/native/dtype_half.tsr >"$TMP/half.out" &&
    "$PYTHON" tests/native/dtype_half.py "$TMP/half.out"; } >"$TMP/half_check.out" 2>&1
add_summary "native: bf16 and f16 values against NumPy" $? "$TMP/half_check.out"

# docs/examples/checkpoint.tsr: train, save, load in a fresh run, the same predictions.
sh tests/native/example_checkpoint.sh "$TSRC" >"$TMP/excp.out" 2>&1
add_summary "docs/examples/checkpoint.tsr: the checkpoint round trip" $? "$TMP/excp.out"
# Training that resumes: N epochs = K epochs, save, a fresh process with --load, N - K epochs.
sh tests/native/resume.sh "$TSRC" "$PYTHON" >"$TMP/resume.out" 2>&1
add_summary "native: a resumed run continues the run it resumes" $? "$TMP/resume.out"
# Data-parallel training on two processes under Open MPI: the MLP and LeNet examples against one
# process, a killed rank (tests/native/data_parallel.sh).
sh tests/native/data_parallel.sh "$TSRC" "$PYTHON" >"$TMP/dp.out" 2>&1
add_summary "native: data-parallel training on two processes (mpirun)" $? "$TMP/dp.out"

# Fused attention at 256 positions stores no positions x positions buffer and agrees with the
# materialised form (tests/native/attention_memory.sh).
sh tests/native/attention_memory.sh "$TSRC" >"$TMP/attention_memory.out" 2>&1
add_summary "native: fused attention's memory, against the materialised form" $? "$TMP/attention_memory.out"
# make check-gpu's comparison rules (tests/gpu/compare.py --self-test: integers exact, 1e-5
# relative, --rel-tol for programs on the tensor cores).
"$PYTHON" tests/gpu/compare.py --self-test >"$TMP/compare_self.out" 2>&1
add_summary "GPU runs' comparison rules (tests/gpu/compare.py --self-test)" $? "$TMP/compare_self.out"
# GPT-2's weights in PyTorch's names and layouts, converted (tools/gpt2_weights.py) and loaded:
# the loss and logits of GPT-2's definition computed in NumPy, in both executors.
"$PYTHON" tests/native/gpt2_import.py --tsrc "$TSRC" >"$TMP/gpt2.out" 2>&1
add_summary "GPT-2 weights from PyTorch: tools/gpt2_weights.py" $? "$TMP/gpt2.out"
# CMake: make install's package, tsrc_add_model building docs/examples/cmake (docs/runtime.md §18).
sh tests/native/cmake.sh "$TSRC" "$SAN" >"$TMP/cmake.out" 2>&1
add_summary "CMake: find_package(tsrc), tsrc_add_model" $? "$TMP/cmake.out"
# Python: tsrc --shared and the package runtime/python/tsr (docs/python.md).
"$PYTHON" tests/python/binding.py --tsrc "$TSRC" >"$TMP/python.out" 2>&1
add_summary "Python binding: tsrc --shared, runtime/python/tsr" $? "$TMP/python.out"
"$PYTHON" tests/python/weights.py --tsrc "$TSRC" >"$TMP/weights.out" 2>&1
add_summary "Python: weights to and from PyTorch (MLP, LeNet, GPT-2)" $? "$TMP/weights.out"

# `make install` into a scratch prefix: the installed tsrc finds its runtime, pkg-config links.
if ${MAKE:-make} -s install PREFIX="$TMP/prefix" >"$TMP/install.log" 2>&1 &&
   "$TMP/prefix/bin/tsrc" -c docs/examples/mlp_lib.tsr -o "$TMP/mlp.o" >>"$TMP/install.log" 2>&1 &&
   cc -I"$TMP" docs/examples/mlp_main.c "$TMP/mlp.o" $(PKG_CONFIG_PATH="$TMP/prefix/lib/pkgconfig" pkg-config --cflags --libs tsr) \
      -o "$TMP/mlp_main" >>"$TMP/install.log" 2>&1 &&
   "$TMP/mlp_main" >>"$TMP/install.log" 2>&1 && "$TMP/prefix/bin/tsrc" docs/examples/shapes.tsr -o "$TMP/shapes" \
      >>"$TMP/install.log" 2>&1 && "$TMP/shapes" >/dev/null 2>>"$TMP/install.log" &&
   PYTHONPATH="$TMP/prefix/share/tsrc/python" "$PYTHON" -c 'import tsr, tsr.weights' >>"$TMP/install.log" 2>&1 &&
   { "$PYTHON" "$TMP/prefix/share/tsrc/tools/gpt2_weights.py" >>"$TMP/install.log" 2>&1; [ $? = 2 ]; } &&
   grep -q "usage: gpt2_weights.py" "$TMP/install.log" && [ -f "$TMP/prefix/share/tsrc/tools/gpt_data.py" ] &&
   [ -f "$TMP/prefix/share/tsrc/tools/digits.py" ]
then pass "make install: tsrc, libtsr.a, tsr.h, tsr.pc, the Python package and the data tools work from the prefix"
else fail "make install" "" "$TMP/install.log"; fi

# The reference executor against NumPy's einsum over random specs (tests/einsum/einsum_diff.py;
# `make check-einsum` runs a longer sweep).
sweep_summary einsum "einsum vs NumPy"
# The same with every tensor f64, against NumPy in float64 within the error bound of double
# precision (einsum_diff.py's header; a few seconds).
sweep_summary einsum_f64 "f64 einsum vs NumPy"
# The same with every tensor bf16, then f16, exactly: values and sums exact in f32, NumPy's
# result rounded once to the type (einsum_diff.py's header; a few seconds).
for half in bf16 f16; do sweep_summary einsum_$half "$half einsum vs NumPy"; done
# The same with every tensor i32, then i64, exactly: NumPy's wrapping int32 and int64 einsum
# (einsum_diff.py's header; a few seconds).
for int in i32 i64; do sweep_summary einsum_$int "$int einsum vs NumPy"; done

# Gathered axes (`[n]`, an embedding's read) and their scatter-add gradients against NumPy's
# indexing and np.add.at, i32 and f32 ids, ids out of range clamped; interpreted and natively
# (tests/einsum/gather_diff.py).
sweep_summary gather "gathered axes vs NumPy"

# Affine and strided axes -- convolution, max-plus pooling, padding, strides, and inputs sized
# from outputs -- against NumPy loops over the windows, interpreted and natively, with the
# inferred sizes checked against docs/inference.md's closed forms; concatenations; merged axes
# (grouped convolutions, axes split and joined) (tests/conv/conv_diff.py).
sweep_summary conv "convolution, pooling, concatenation and merged axes vs NumPy"

# Windows over one shared leaf (strided reads, valid and padded convolutions): the same shapes,
# or an error, in every order of their definitions, and never an internal error
# (tests/shapes/window_orders.py; docs/inference.md §4.6, closing order).
sweep_summary window_orders "windows over a shared leaf: the same outcome in every order"

# Every differentiable prelude operation's gradient against central finite differences in
# float64 at random shapes (tests/grad/gradcheck.py; tolerance in its header), two of the
# programs also natively, bit for bit.
sweep_summary gradcheck "gradients vs finite differences"
# The same with f64 parameters: computed in double precision, checked to 1e-8 (two programs, one
# also natively).
sweep_summary gradcheck_f64 "f64 gradients vs finite differences"
# The same for the layers, activations and losses of stdlib/nn.tsr (tests/grad/nn_gradcheck.py),
# one program also natively.
sweep_summary nn_gradcheck "Nn gradients vs finite differences"
# Dropout inside the fused attention kernel against NumPy, its random numbers recomputed by the
# definition of docs/ir.md §2.5 (tests/grad/attention_dropout.py): forward and gradients, f64.
sweep_summary attention_dropout "attention dropout vs NumPy"

# The optimisers of stdlib/train.tsr against the same steps in NumPy (tests/train/optimisers.py),
# with the reference executor (scheduled and unscheduled) and natively, and gradient clipping.
"$PYTHON" tests/train/optimisers.py --tsrc "$TSRC" --native >"$TMP/optimisers.out" 2>&1
add_summary "optimisers vs NumPy" $? "$TMP/optimisers.out"
# f32 master weights of bf16 and f16 parameters, dynamic loss scaling that skips an overflowing
# f16 step, and a bf16/f16 MLP that trains to within 1 % of its f32 loss
# (tests/train/mixed_precision.py).
"$PYTHON" tests/train/mixed_precision.py --tsrc "$TSRC" --native >"$TMP/mixed_precision.out" 2>&1
add_summary "mixed precision vs NumPy" $? "$TMP/mixed_precision.out"
# Every ```tsr block of README.md and docs/*.md compiles with `tsrc --check` (a fragment with the
# context an HTML comment above it gives), and every block marked ```tsr error fails with a
# located error (tests/docs_blocks.py), so the docs show only forms that compile; and a block of
# a command's output under a `<!-- tsr-golden FILE -->` comment shows the lines of that golden,
# which the tests above compare with the real output.
"$PYTHON" tests/docs_blocks.py --tsrc "$TSRC" >"$TMP/docblocks.out" 2>&1
add_summary "documentation: tsr blocks compile as marked, outputs as their goldens" $? "$TMP/docblocks.out"
# Every shell line of README.md's command blocks, as written, in a scratch copy of the tree
# (tests/readme_lines.py).
"$PYTHON" tests/readme_lines.py --tsrc "$TSRC" >"$TMP/readme.out" 2>&1
add_summary "README: every shell line runs as written" $? "$TMP/readme.out"
"$PYTHON" tests/train/schedules.py --tsrc "$TSRC" >"$TMP/schedules.out" 2>&1
add_summary "learning-rate schedules vs NumPy" $? "$TMP/schedules.out"

# Random contractions (plain, transposed, batched, compose, and their gradients), register-tiled
# by the schedule: the reference executor on the scheduled and the lowered IR and native code at
# -O3 for the host, x86-64-v4 and x86-64-v3 all print the same bits (tests/native/contractions.py).
sweep_summary contractions "contractions: scheduled = lowered = native (host, v4, v3 where this machine runs them)"
# The same in f64: tiles, panels and vectors of doubles (--dtype f64).
sweep_summary contractions_f64 "contractions in f64: scheduled = lowered = native (host, v4, v3 where this machine runs them)"
# The same in bf16, with the znver4 schedule's pairs run by the reference executor and natively
# where this machine has AVX-512 BF16 (--dtype bf16).
sweep_summary contractions_bf16 "contractions in bf16: scheduled (and in pairs for znver4) = lowered = native"

# The command line of executables: --help, options, --data, --seed (tests/native/exe_options.sh).
sh tests/native/exe_options.sh "$TSRC" >"$TMP/exe_options.out" 2>&1
add_summary "native: executables' command line" $? "$TMP/exe_options.out"

# Checkpoints: save, load, --load, numpy.load, MODULE_save/load, their errors
# (tests/native/checkpoint.sh).
sh tests/native/checkpoint.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/checkpoint.out" 2>&1
add_summary "native: checkpoints" $? "$TMP/checkpoint.out"

# Several processes under mpirun: process 0 alone prints and saves, the agreement check, no MPI
# library, --check-replicas, the communicator's unit test (tests/native/distributed.sh).
sh tests/native/distributed.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/distributed.out" 2>&1
add_summary "native: several processes (MPI)" $? "$TMP/distributed.out"

# shuffle under --seed, progress bars on and off a terminal (tests/native/main_steps.sh).
sh tests/native/main_steps.sh "$TSRC" >"$TMP/main_steps.out" 2>&1
add_summary "native: shuffle seeds, progress bars" $? "$TMP/main_steps.out"

# Hostile data files: not regular files, endless, cut short (tests/native/hostile_data.sh).
sh tests/native/hostile_data.sh "$TSRC" >"$TMP/hostile.out" 2>&1
add_summary "native: hostile data files" $? "$TMP/hostile.out"

# The C interface under misuse: NULL states, damaged model images (tests/native/c_api.sh).
sh tests/native/c_api.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/capi.out" 2>&1
add_summary "native: the C API under misuse" $? "$TMP/capi.out"

# The GPU target without a GPU: executables and objects name the missing driver, --emit=ptx's
# manifest matches its PTX, bad option combinations (tests/gpu/host.sh; docs/gpu.md).
sh tests/gpu/host.sh "$TSRC" "$(dirname "$TSRC")" >"$TMP/gpuhost.out" 2>&1
add_summary "GPU target on the host: no driver, objects, --emit=ptx" $? "$TMP/gpuhost.out"


# Outputs under hostile conditions: odd names, planted links, -o naming the input, device
# nodes, signals (tests/native/output_safety.sh).
sh tests/native/output_safety.sh "$TSRC" >"$TMP/outsafe.out" 2>&1
add_summary "native: output safety" $? "$TMP/outsafe.out"
# The sub-suites that ran in the background with the sweeps (late suites):
# The GPU schedule's tensor cores: which products take them, for which GPUs, and their PTX
# (tests/native/tensor_cores.sh; the program's outputs are checked by the golden tests).
sweep_summary tensor_cores "GPU schedule: bf16, f16 and --tf32 products on the tensor cores"
# docs/examples/gpt.tsr: its data script, the shipped size compiles, a small size trains natively
# and resumes (tests/native/gpt_example.sh).
sweep_summary gpt_example "docs/examples/gpt.tsr: data, training, resuming"
# The GPU target's host side end to end without a GPU: executables against a stand-in CUDA
# driver that checks modules, launches, CUDA graphs and copies, their launches against their
# manifests — six chosen programs, three whose runs of kernels are replayed graphs against the
# same launched one at a time, then every golden of tests/native with graphs and without
# (tests/gpu/fake_driver.sh, fake_golden.sh, fake_cuda.c).
sweep_summary fakecuda "GPU target's host side against a fake CUDA driver"
# Compile time and memory: generated 1 000- and 10 000-line programs (an elementwise chain with
# sharing, a deep MLP, a long routine) compile within 60 s and 2 GB, and runaway compile-time
# evaluation stops at its budget (tests/scale/compile_scale.py; docs/performance.md).
sweep_summary scale "compile time and memory"

# Native code (-O3, for this machine's CPU, x86-64-v4 and x86-64-v3) against the reference
# executor over random einsums and tests/native/sweep_regress.tsr (tests/native_sweep.sh;
# `make check-native` runs a longer sweep).
sweep_summary native_sweep "native sweep vs reference executor"
# The same with every tensor f64, every value printed in full (--dtype f64; about 30 s).
sweep_summary native_sweep_f64 "f64 native sweep vs reference executor"
# The same with every tensor bf16, then f16, every value printed in full (--dtype bf16,
# --dtype f16; about 20 s each).
for half in bf16 f16; do sweep_summary native_sweep_$half "$half native sweep vs reference executor"; done
# The same with every tensor i32, then i64: integers whose products overflow an i32, printed
# exactly (--dtype i32, --dtype i64; a few seconds each).
for int in i32 i64; do sweep_summary native_sweep_$int "$int native sweep vs reference executor"; done

# The house (tests/layout.py): no file of compiler/ or runtime/ over 1500 lines, no cycle of
# includes or of calls between files (read from this build's objects), and the compiler reaches
# into the runtime only through tsr.h and image_format.h.
"$PYTHON" tests/layout.py --objects "${OBJ_DIR:-build/obj}" >"$TMP/layout.out" 2>&1
layout_status=$?
while IFS= read -r line; do
    case $line in
        "PASS "*) pass "${line#PASS }" ;;
        "FAIL "*) fail "${line#FAIL }" ;;
        *) echo "$line" ;;
    esac
done <"$TMP/layout.out"
if [ $layout_status != 0 ] && ! grep -q '^FAIL ' "$TMP/layout.out"; then
    fail "tests/layout.py exited with status $layout_status"
fi

# No test left a file in the source tree.
source_files >"$TMP/tree.after"
LC_ALL=C comm -13 "$TMP/tree.before" "$TMP/tree.after" >"$TMP/tree.new"
if [ ! -s "$TMP/tree.new" ]; then pass "the tests left no new file in the source tree"
else fail "the tests left new files in the source tree (tests write under build/ or a temporary directory)" \
    "" "$TMP/tree.new"; fi

echo "INFO the tests took $(($(date +%s) - check_start)) s; the sweeps beside them ([N s] each, one after another) were awaited" \
    "from $((sweeps_awaited - check_start)) s for $sweeps_waited s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
