#!/bin/sh
# bench.sh TSRC BUILD — `make bench`: the native backend against OpenBLAS, NumPy and (if
# installed) PyTorch, on an fp32 matmul and a fused elementwise chain, at 1 and 2 threads.
# Figures and how to read them: docs/performance.md, "Backend: matmul and elementwise".
#
#   matmul   C = A·B, n×n float32, n in $BENCH_SIZES (default 256 512 1024 2048)
#            tsrc:     tools/bench/matmul.tsr.in with the size filled in, `tsrc -c`, timed by
#                      tools/bench/mm_tsrc.c (TSR_NUM_THREADS)
#            OpenBLAS: cblas_sgemm, tools/bench/mm_blas.c (OPENBLAS_NUM_THREADS)
#            NumPy:    a @ b, tools/bench/py_bench.py under /usr/bin/python3
#            PyTorch:  torch.mm, same script, when `import torch` works there
#   elementwise  y = relu(a*b + c) - 0.5*a over 16M floats (tools/bench/elementwise.tsr);
#            tsrc (one fused loop) against NumPy's unfused expression; OpenBLAS has no
#            equivalent.
#
# Every implementation's result is checked (256 cells of each product against a
# double-precision dot product; every element of the chain) so the figures are of correct code.
# Each measurement: one warm-up run, then repetitions for about $BENCH_BUDGET seconds (default
# 1): at least 5, at most $BENCH_MAX_REPS (200), fewer when 5 would take over 10 budgets; a case
# whose warm-up alone takes over 10 budgets is reported from that one run (tools/bench/common.h,
# bench_measure).  Figures use the best time; the median is in the results file.
#
# Environment: BENCH_SIZES, BENCH_THREADS (default "1 2"), BENCH_BUDGET, BENCH_MAX_REPS,
# BENCH_PYTHON (default /usr/bin/python3, which has Debian's python3-numpy; the python3 first
# on PATH may lack it), CC.  Writes BUILD/bench/: the generated programs and drivers,
# results.txt (the RESULT and INFO lines) and table.md (the tables printed at the end).
# Exit status 1 when a result was wrong or a run failed, else 0.
set -u

TSRC=${1:?usage: bench.sh TSRC BUILD}
BUILD=${2:?usage: bench.sh TSRC BUILD}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$BUILD" && BUILD=$(cd "$BUILD" && pwd) || exit 1
case $TSRC in /*) ;; */*) TSRC=$(pwd)/$TSRC ;; esac
BENCH=$ROOT/tools/bench
WORK=$BUILD/bench
CC=${CC:-cc}
PY=${BENCH_PYTHON:-/usr/bin/python3}
SIZES=${BENCH_SIZES:-256 512 1024 2048}
THREADS=${BENCH_THREADS:-1 2}
BUDGET=${BENCH_BUDGET:-1}
MAX_REPS=${BENCH_MAX_REPS:-200}
# Debian's OpenBLAS (a DYNAMIC_ARCH build) misdetects these CPUs; pin its kernels.
OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export OPENBLAS_CORETYPE BENCH_BUDGET="$BUDGET" BENCH_MAX_REPS="$MAX_REPS"

rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
RESULTS=$WORK/results.txt
: >"$RESULTS"
failed=0

say() { printf '%s\n' "$*" | tee -a "$RESULTS"; }
info() { say "INFO $*"; }

# ---- the machine ----------------------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
model=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
avx512=no
grep -q '^flags.* avx512f' /proc/cpuinfo 2>/dev/null && avx512=yes
info "date $(date -u '+%Y-%m-%d %H:%M UTC')"
info "cpu ${cpu:-unknown} (family ${fam:-?} model ${model:-?}), $(nproc) online CPUs," \
    "avx512f $avx512"
info "tsrc $("$TSRC" --version 2>&1 | head -n 1);" \
    "driver compiler $($CC --version 2>/dev/null | head -n 1)"
if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
    git -C "$ROOT" diff --quiet HEAD -- compiler runtime stdlib grammar 2>/dev/null ||
        rev="$rev + uncommitted changes to compiler/runtime"
    info "source $rev"
fi
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
info "load average at start $load"
case $load in
    0.[0-4]*) ;;
    *) echo "bench: warning: the machine is busy (load average $load);" \
            "figures will be low and noisy" ;;
esac

# ---- OpenBLAS -------------------------------------------------------------------------------
# Only OpenBLAS's own cblas.h: /usr/include/<triple>/cblas.h may be the reference BLAS.
find_openblas() {
    BLAS_CFLAGS= BLAS_LIBS=
    if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openblas 2>/dev/null; then
        BLAS_CFLAGS=$(pkg-config --cflags openblas)
        BLAS_LIBS="$(pkg-config --libs openblas)"
        BLAS_LIBS="$BLAS_LIBS -Wl,-rpath,$(pkg-config --variable=libdir openblas)"
        return 0
    fi
    triple=$($CC -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
    for v in openblas-pthread openblas-openmp openblas-serial; do
        inc=/usr/include/$triple/$v lib=/usr/lib/$triple/$v
        if [ -f "$inc/cblas.h" ] && [ -e "$lib/libopenblas.so" ]; then
            BLAS_CFLAGS="-I$inc" BLAS_LIBS="-L$lib -lopenblas -Wl,-rpath,$lib"
            return 0
        fi
    done
    return 1
}
have_blas=no
if find_openblas; then
    have_blas=yes
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench: OpenBLAS is missing; installing libopenblas-dev (apt-get, log in $WORK/apt.log)"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y libopenblas-dev ||
        { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y libopenblas-dev; }
    } >"$WORK/apt.log" 2>&1
    find_openblas && have_blas=yes
    [ $have_blas = yes ] ||
        info "OpenBLAS: installing libopenblas-dev failed (see $WORK/apt.log); skipped"
else
    info "OpenBLAS: not installed; skipped (install it with: sudo apt-get install libopenblas-dev)"
fi
if [ $have_blas = yes ]; then
    if ! $CC -O2 $BLAS_CFLAGS -I"$BENCH" "$BENCH/mm_blas.c" -o "$WORK/mm_blas" $BLAS_LIBS -lm \
        2>"$WORK/mm_blas.log"; then
        info "OpenBLAS: the driver does not build (see $WORK/mm_blas.log); skipped"
        have_blas=no
    fi
fi

# ---- Python ---------------------------------------------------------------------------------
have_numpy=no have_torch=no
if "$PY" -c 'import numpy' >/dev/null 2>&1; then
    have_numpy=yes
    info "NumPy: $("$PY" -c 'import numpy; print(numpy.__version__)') under $PY"
else
    info "NumPy: not importable by $PY; skipped" \
        "(install it with: sudo apt-get install python3-numpy)"
fi
if [ $have_numpy = yes ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
    have_torch=yes
    info "PyTorch: $("$PY" -c 'import torch; print(torch.__version__)') under $PY"
else
    info "PyTorch: not installed"
fi

# ---- running one measurement ----------------------------------------------------------------
# run LABEL COMMAND...: runs it, keeps its RESULT and INFO lines, notes a failure or a wrong result.
run() {
    label=$1
    shift
    out=$("$@" 2>"$WORK/stderr.txt")
    rc=$?
    printf '%s\n' "$out" | grep -E '^(RESULT|INFO) ' | sort -u | while IFS= read -r l; do
        grep -qxF "$l" "$RESULTS" || say "$l"
    done
    if [ $rc -ne 0 ]; then
        failed=1
        if printf '%s\n' "$out" | grep -q 'check=FAIL'; then
            echo "bench: $label: WRONG RESULT (see the RESULT line above)"
        else
            echo "bench: $label: failed with status $rc:"
            sed 's/^/    /' "$WORK/stderr.txt" | head -n 20
        fi
    fi
}

# build_tsrc DIR NAME TSR DRIVER [CFLAGS]: tsrc -c, then the driver against the generated header.
build_tsrc() {
    if ! "$TSRC" -c --name="$2" "$3" -o "$1/$2.o" 2>"$1/tsrc.log"; then
        echo "bench: tsrc -c $3 failed:"; sed 's/^/    /' "$1/tsrc.log" | head -n 20
        failed=1; return 1
    fi
    if ! $CC -O2 ${5:-} -I"$1" -I"$ROOT/runtime" -I"$BENCH" "$BENCH/$4" "$1/$2.o" \
        "$BUILD/libtsr.a" -lm -lpthread -o "$1/driver" 2>"$1/cc.log"; then
        echo "bench: building $4 for $3 failed:"; sed 's/^/    /' "$1/cc.log" | head -n 20
        failed=1; return 1
    fi
}

# torch_wait THREADS: what PyTorch runs with: with several threads, OpenMP workers that sleep
# between parallel regions instead of spinning (OMP_WAIT_POLICY=PASSIVE); nothing for one.
torch_wait() { if [ "$1" -gt 1 ]; then echo OMP_WAIT_POLICY=PASSIVE; fi; }

# ---- matmul ---------------------------------------------------------------------------------
echo "bench: matmul, n = $SIZES; threads $THREADS"
for n in $SIZES; do
    dir=$WORK/matmul_$n
    mkdir -p "$dir"
    sed "s/@N@/$n/" "$BENCH/matmul.tsr.in" >"$dir/matmul.tsr"
    build_tsrc "$dir" mm "$dir/matmul.tsr" mm_tsrc.c || dir=
    for t in $THREADS; do
        [ -n "$dir" ] && run "tsrc matmul n=$n threads=$t" \
            env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
        [ $have_blas = yes ] && run "OpenBLAS matmul n=$n threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
            "$WORK/mm_blas" "$n" "$BUDGET" "$MAX_REPS" "$t"
        [ $have_numpy = yes ] && run "NumPy matmul n=$n threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
            "$PY" "$BENCH/py_bench.py" numpy "$t" "$n"
        [ $have_torch = yes ] && run "PyTorch matmul n=$n threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $(torch_wait "$t") \
            "$PY" "$BENCH/py_bench.py" torch "$t" "$n"
    done
done

# ---- elementwise ----------------------------------------------------------------------------
count=$(sed -n 's/^let n = \([0-9_]*\).*/\1/p' "$BENCH/elementwise.tsr" | tr -d _)
echo "bench: elementwise chain, $count floats; threads $THREADS"
dir=$WORK/elementwise
mkdir -p "$dir"
build_tsrc "$dir" ew "$BENCH/elementwise.tsr" ew_tsrc.c -ffp-contract=off || dir=
for t in $THREADS; do
    [ -n "$dir" ] && run "tsrc elementwise threads=$t" \
        env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
    [ $have_numpy = yes ] && run "NumPy elementwise threads=$t" \
        env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        "$PY" "$BENCH/py_bench.py" numpy "$t" ew "$count"
    [ $have_torch = yes ] && run "PyTorch elementwise threads=$t" \
        env OMP_NUM_THREADS="$t" $(torch_wait "$t") \
        "$PY" "$BENCH/py_bench.py" torch "$t" ew "$count"
done
info "OpenBLAS has no elementwise-chain equivalent; the elementwise table has no OpenBLAS column"
info "load average at end $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)"

# ---- the tables -----------------------------------------------------------------------------
echo
TPY=$PY
"$TPY" -c '' 2>/dev/null || TPY=python3
"$TPY" "$BENCH/table.py" "$RESULTS" | tee "$WORK/table.md"
grep '^INFO \(NumPy\|PyTorch\|OpenBLAS\)' "$RESULTS" | sed 's/^INFO //'
echo "bench: results in $RESULTS"
exit $failed
