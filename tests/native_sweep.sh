#!/bin/sh
# native_sweep.sh — the native backend against the reference executor on random einsums.
#
# tests/native/sweep_gen.py writes COUNT random einsum cases (its header says what they cover),
# BATCH to a program; tests/native/sweep_regress.tsr adds einsums that once went wrong.  Every
# program is run by the reference executor (tsrc --run --interp) and compiled natively at -O3
# for each CPU of CPUS (default: this machine's, x86-64-v4 and x86-64-v3) and run (tsrc --run);
# what the executable prints must equal what the reference executor prints, byte for byte, with
# every value printed in full (TSR_PRINT_EXACT=1: an f32's nine digits tell its bits apart).
# When a program's outputs differ, the einsums whose printed tensors differ are named, with
# their spec, their shapes, the first differing line and their program text; when an executable
# fails, each case of the program is compiled alone to find the one(s) responsible.  A CPU whose
# code this machine cannot run (x86-64-v4 without AVX-512, say) is compiled for but not run.
#
# The last line is "N passed, N failed" (cases; a case passes when every CPU agrees with the
# reference executor); exit status 1 when a case failed, 2 for a bad command line or setup.
# tests/run.sh runs the default 1500 cases (1-2 minutes on 2 cores); `make check-native`
# runs a longer sweep (--count 20000).  It also says (INFO) whether this LLVM still has the SLP
# vectorizer bug of tests/native/avx512_slp_repro.ll (docs/notes/llvm19-slp-miscompile.md),
# which cg_llvm.c works around.
#
# --dtype f64 makes every tensor of the generated programs f64 (docs/language.md §3.9; how, and
# with what numbers, in sweep_gen.py's header), each value printed in full (%.17g for an f64,
# so the comparison is of the doubles' bits); the f32
# tests/native/sweep_regress.tsr is left out.  tests/run.sh runs 300 such cases (--count 300,
# about 30 s on 2 cores), `make check-native` 5000 (--count 5000).
#
# --dtype bf16 and --dtype f16 do the same with every tensor of that storage type (computed in
# f32, rounded to nearest even where stored; sweep_gen.py's header), each value printed as its
# f32 widening in full (%.9g), so native code must accumulate in f32 in the reference
# executor's order and round as it does.  tests/run.sh runs 150 cases of each (about 20 s
# each on 2 cores), `make check-native` 3000 of each (4-5 minutes each).
#
# --dtype i32 and --dtype i64 make every tensor that integer type, operands of 21 (41) bits
# whose products overflow it (sweep_gen.py's header): the printed integers must be equal.
# tests/run.sh runs 100 cases of each, `make check-native` 2000 of each.
#
# Usage: tests/native_sweep.sh [--tsrc PATH] [--count N] [--seed S] [--batch B] [--jobs J]
#                              [--cpus "native x86-64-v4 …"] [--keep DIR] [--no-regress]
#                              [--dtype f32|f64|bf16|f16|i32|i64]
# Environment: PYTHON (default /usr/bin/python3, which has NumPy).
set -u

TSRC=build/tsrc
COUNT=1500
SEED=1
BATCH=50
JOBS=$(nproc 2>/dev/null || echo 2)
CPUS="native x86-64-v4 x86-64-v3"
KEEP=
REGRESS=tests/native/sweep_regress.tsr
PY=${PYTHON:-/usr/bin/python3}
LIMIT=300      # seconds per tsrc run
DTYPE=f32

usage() { echo "usage: $0 [--tsrc PATH] [--count N] [--seed S] [--batch B] [--jobs J] [--cpus LIST] [--keep DIR] [--no-regress] [--dtype f32|f64|bf16|f16|i32|i64]" >&2; exit 2; }

# ---- one program (run by xargs below): PROGRAM.tsr -> PROGRAM.report, PROGRAM.detail --------
# The report has one line "BAD CASE CPU" per failing case and CPU ("interp" when the reference
# executor itself failed); the detail is the human-readable explanation.
if [ "${1:-}" = --worker ]; then
    prog=$2
    base=${prog%.tsr}
    rep=$base.report det=$base.detail
    : >"$rep"; : >"$det"
    cases=$(sed -n 's/^let%op \([A-Za-z0-9]*\)_r = .*/\1/p' "$prog")
    if ! timeout $LIMIT "$SWEEP_TSRC" --run --interp "$prog" >"$base.interp" 2>"$base.interp.err"; then
        for c in $cases; do echo "BAD $c interp" >>"$rep"; done
        { echo "the reference executor failed on $prog:"; sed -n '1,10s/^/    /p' "$base.interp.err"; } >>"$det"
        exit 0
    fi
    # single CASE CPU: compiles and runs the case alone; 0 when it matches the reference.
    single() {
        mkdir -p "$(dirname "$base")/single"
        s=$(dirname "$base")/single/$(basename "$base").$1.tsr
        grep -E "^(data|let%op) $1_" "$prog" >"$s"
        timeout $LIMIT "$SWEEP_TSRC" --run --interp "$s" >"$s.interp" 2>/dev/null &&
            timeout $LIMIT "$SWEEP_TSRC" --run -O3 --cpu="$2" "$s" >"$s.out" 2>"$s.err" &&
            cmp -s "$s.interp" "$s.out"
    }
    for cpu in $SWEEP_CPUS; do
        out=$base.$cpu.out
        if ! echo " $SWEEP_RUNNABLE " | grep -q " $cpu "; then
            timeout $LIMIT "$SWEEP_TSRC" --emit=obj -O3 --cpu="$cpu" "$prog" -o "$base.$cpu.o" 2>"$out.err" || {
                for c in $cases; do echo "BAD $c $cpu" >>"$rep"; done
                { echo "tsrc --emit=obj -O3 --cpu=$cpu $prog failed:"; sed -n '1,10s/^/    /p' "$out.err"; } >>"$det"
            }
            rm -f "$base.$cpu.o"
            continue
        fi
        timeout $LIMIT "$SWEEP_TSRC" --run -O3 --cpu="$cpu" "$prog" >"$out" 2>"$out.err"
        st=$?
        if [ $st = 0 ]; then
            cmp -s "$base.interp" "$out" && continue
            "$SWEEP_PY" tests/native/sweep_gen.py diff "$prog" "$base.interp" "$out" >"$out.diff" 2>&1
            named=$(sed -n 's/^  \([A-Za-z0-9]*\)_[A-Za-z0-9]*[:,].*/\1/p' "$out.diff" | sort -u)
            if [ -n "$named" ]; then
                for c in $named; do echo "BAD $c $cpu" >>"$rep"; done
                { echo "--cpu=$cpu: the executable's output differs from the reference executor's:"
                  cat "$out.diff"; } >>"$det"
                continue
            fi
        fi
        # The executable failed (or differs outside any tensor): find the case(s) alone.
        if [ $st = 0 ]; then echo "--cpu=$cpu: the output differs outside any tensor's printout:" >>"$det"
        else { echo "--cpu=$cpu: tsrc --run $prog failed (status $st):"; sed -n '1,6s/^/    /p' "$out.err"; } >>"$det"; fi
        found=0
        for c in $cases; do
            if ! single "$c" "$cpu"; then
                echo "BAD $c $cpu" >>"$rep"; found=1
                { echo "  $c alone fails:"; sed -n '1,6s/^/    /p' "$(dirname "$base")/single/$(basename "$base").$c.tsr.err"; } >>"$det"
            fi
        done
        [ $found = 1 ] || for c in $cases; do echo "BAD $c $cpu" >>"$rep"; done
    done
    exit 0
fi

while [ $# -gt 0 ]; do
    case $1 in
        --tsrc) TSRC=${2:?}; shift ;;
        --count) COUNT=${2:?}; shift ;;
        --seed) SEED=${2:?}; shift ;;
        --batch) BATCH=${2:?}; shift ;;
        --jobs) JOBS=${2:?}; shift ;;
        --cpus) CPUS=${2:?}; shift ;;
        --keep) KEEP=${2:?}; shift ;;
        --no-regress) REGRESS= ;;
        --dtype) DTYPE=${2:?}; shift ;;
        *) usage ;;
    esac
    shift
done
case $COUNT$SEED$BATCH$JOBS in *[!0-9]*|'') usage ;; esac
# Every value in full -- f32 (and bf16 and f16 as their f32 widening) with %.9g, f64 with %.17g
# -- in every run of tsrc and of the executables it builds, so the comparison is of the bits,
# not of six printed digits.
TSR_PRINT_EXACT=1; export TSR_PRINT_EXACT
case $DTYPE in
    f32) ;;
    f64|bf16|f16|i32|i64) REGRESS= ;;
    *) usage ;;
esac
[ -x "$TSRC" ] || { echo "native_sweep.sh: $TSRC is not an executable" >&2; exit 2; }
# Paths from here on are the repository's; make the caller's absolute first.
case $TSRC in /*) ;; */*) TSRC=$(pwd)/$TSRC ;; esac
case $KEEP in /*|'') ;; *) KEEP=$(pwd)/$KEEP ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd) && cd "$ROOT" || exit 2
"$PY" -c 'import numpy' 2>/dev/null || { echo "native_sweep.sh: $PY cannot import NumPy" >&2; exit 2; }

if [ -n "$KEEP" ]; then W=$KEEP; rm -rf "$W"; mkdir -p "$W" || exit 2
else W=$(mktemp -d "${TMPDIR:-/tmp}/native-sweep.XXXXXX") || exit 2; trap 'rm -rf "$W"' EXIT INT TERM; fi

# CPUs whose code this machine can run (the x86-64 micro-architecture levels: tests/host_cpus.sh).
RUNNABLE=$(sh tests/host_cpus.sh $CPUS)
for cpu in $CPUS; do
    echo " $RUNNABLE " | grep -q " $cpu " || echo "INFO this machine cannot run --cpu=$cpu code: compiled, not run"
done

"$PY" tests/native/sweep_gen.py gen --count "$COUNT" --seed "$SEED" --batch "$BATCH" --dtype "$DTYPE" --out "$W" || exit 2
[ -n "$REGRESS" ] && cp "$REGRESS" "$W/regress.tsr"

SWEEP_TSRC=$TSRC SWEEP_CPUS=$CPUS SWEEP_RUNNABLE=$RUNNABLE SWEEP_PY=$PY
export SWEEP_TSRC SWEEP_CPUS SWEEP_RUNNABLE SWEEP_PY
ls "$W"/*.tsr | xargs -n 1 -P "$JOBS" sh "$ROOT/tests/native_sweep.sh" --worker

passed=0 failed=0
for prog in $(ls "$W"/*.tsr | LC_ALL=C sort); do
    base=${prog%.tsr}
    name=$(basename "$base")
    cases=$(sed -n 's/^let%op \([A-Za-z0-9]*\)_r = .*/\1/p' "$prog")
    n=$(echo $cases | wc -w)
    bad=$(awk '$1 == "BAD" {print $2}' "$base.report" 2>/dev/null | sort -u)
    nb=$(echo $bad | wc -w)
    if [ ! -f "$base.report" ]; then bad=$cases; nb=$n; echo "no report for $name" >"$base.detail"; fi
    passed=$((passed + n - nb)) failed=$((failed + nb))
    if [ "$nb" = 0 ]; then
        echo "PASS $name ($n cases: $(echo $cases | cut -d' ' -f1)-$(echo $cases | awk '{print $NF}'); $(echo $CPUS | sed 's/ /, /g'))"
        continue
    fi
    echo "FAIL $name: $nb of $n cases differ: $(for c in $bad; do printf '%s(%s) ' "$c" \
        "$(awk -v c="$c" '$1 == "BAD" && $2 == c {printf "%s%s", s, $3; s=","}' "$base.report")"; done)"
    sed 's/^/    /' "$base.detail"
    for c in $bad; do
        echo "    program of $c:"
        grep -E "^(data|let%op) ${c}_" "$prog" | cut -c1-400 | sed 's/^/      /'
    done
done

# Does this LLVM still have the SLP bug that cg_llvm.c works around?
REPRO=tests/native/avx512_slp_repro.ll
if command -v opt-19 >/dev/null 2>&1 && command -v lli-19 >/dev/null 2>&1 && [ -f "$REPRO" ]; then
    if opt-19 -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64-v4 -passes=slp-vectorizer "$REPRO" -o "$W/repro.bc" 2>/dev/null; then
        if lli-19 "$W/repro.bc" >/dev/null 2>&1; then
            echo "INFO $REPRO: this LLVM's SLP vectorizer no longer miscompiles it (see docs/notes/llvm19-slp-miscompile.md: the workaround may go)"
        else
            echo "INFO $REPRO: this LLVM's SLP vectorizer still miscompiles it (cg_llvm.c's workaround is needed)"
        fi
    fi
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
