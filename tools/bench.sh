#!/bin/sh
# bench.sh TSRC BUILD — `make bench`: the code tsrc generates against OpenBLAS, NumPy and
# PyTorch, at 1 and 2 threads.  Figures and how to read them: docs/performance.md, "Backend".
#
#   matmul   C = A·B, n×n float32, n in $BENCH_SIZES (default 256 512 1024 2048), in three forms:
#            spec       c = a +* "i, k; k, j => i, j" b   (tools/bench/matmul.tsr.in)
#            compose    y = w * x, w : n->n, x : n|n      (matmul_compose.tsr.in), Y = X·Wᵀ
#            transposed c = a +* "k, i; k, j => i, j" b   (matmul_tn.tsr.in), C = Aᵀ·B
#            tsrc:     the program with the size filled in, `tsrc -c`, timed by
#                      tools/bench/mm_tsrc.c (TSR_NUM_THREADS)
#            OpenBLAS: cblas_sgemm with the matching transpose flags, tools/bench/mm_blas.c
#                      (OPENBLAS_NUM_THREADS)
#            NumPy:    a @ b, x @ w.T, a.T @ b, tools/bench/py_bench.py under /usr/bin/python3
#            PyTorch:  torch.mm, same script, for the spec form
#   f64      the same three forms with f64 matrices (`dtype = "f64"` on the inputs), at the same
#            sizes, against OpenBLAS's cblas_dgemm (mm_tsrc.c and mm_blas.c built with -DBENCH_F64)
#   half     the matmul's three forms with bf16 matrices (the schedule tiles them in f32 over
#            widened copies, or on AMD's Zen 4/5 in pairs of steps on VDPBF16PS, docs/ir.md §5.4)
#            against tsrc's f32 matmul of the same run, and the
#            elementwise chain below with bf16 storage (tools/bench/elementwise_bf16.tsr: read as
#            f32, computed in f32, rounded once into y) against the f32 chain: values per second
#   bmm      batch × (n×n)·(n×n), each of $BENCH_BMM (default "64x128 32x256"):
#            c = a +* "b, i, j; b, j, k => b, i, k" b (bmm.tsr.in) against np.matmul and a loop
#            of cblas_sgemm
#   elementwise  y = relu(a*b + c) - 0.5*a over 16M floats (tools/bench/elementwise.tsr);
#            tsrc (one fused loop) against NumPy's unfused expression; and the STREAM triad
#            a = b + s*c on as many floats in C (tools/bench/triad.c), whose bandwidth the chain's
#            is compared with
#   mlp      one SGD step of a 784-256-256-10 relu MLP, softmax cross-entropy, batch 128
#            (tools/bench/mlp.tsr, driver mlp_tsrc.c) against the same in PyTorch
#            (tools/bench/py_train.py), same data and initial parameters
#   nn_mlp   the same MLP written with Nn.mlp, Nn.cross_entropy and Train.step with Train.adam
#            (tools/bench/nn_mlp.tsr, driver nn_mlp_tsrc.c) against torch.optim.Adam
#   nn_mlp_dyn  the same program with its batch a run-time size `?` set to 128, against the
#            program with the batch written (docs/runtime.md §16)
#   moons    one step of the train routine of docs/examples/train_moons.tsr (2-32-1, batch 20;
#            driver moons_tsrc.c) against the same in PyTorch
#   python   the nn_mlp step from a Python loop through runtime/python/tsr (tools/bench/py_loop.py):
#            the step alone and with a NumPy batch copied in each step, against the C driver
#   gpt      one AdamW step (clipped) of docs/examples/gpt.tsr's GPT (L=4, C=256, NH=4, T=64, B=8,
#            vocabulary 96) and of GPT-2 124M's (L=12, C=768, NH=12, vocabulary 50 304; T=64, B=4),
#            and the example's at T=512, B=1 with attention materialised and fused
#            (tools/bench/gpt.tsr.in, driver gpt_tsrc.c; BENCH_GPT chooses) against the same model
#            in PyTorch (tools/bench/py_gpt.py), which loads the parameters tsrc started from; ten
#            steps on the same windows, whose losses must agree, then the step timed
#   dp       data-parallel training: the nn_mlp step (global batch 128) and the example's GPT step
#            (global batch 8) on one process of 1 and 2 threads and on two processes of one thread
#            each under mpirun, each with half the batch (tools/bench/dp_tsrc.c, docs/runtime.md
#            §19); steps per second and the share of the gradients' mean in the step
#   conv     the two 5x5 convolutions of LeNet-5, batch 64 (28x28x1 -> 6 channels, 12x12x6 -> 16),
#            Nn.conv2d channels last (tools/bench/conv.tsr, driver conv_tsrc.c), forward alone and
#            forward + backward (gradients of the kernel and the input) against
#            torch.nn.functional.conv2d in NCHW and channels last, the faster (py_conv.py)
#
# Every implementation's result is checked (256 cells of each product against a
# double-precision dot product, 64 in each of 4 products of a batch; every element of the chain
# and of the triad; the first training step's loss, gradients and updates against a
# double-precision step, and that the loss then falls; every cell of each convolution and of its
# gradients against a double-precision one) so the figures are of correct code.
# Each measurement: one warm-up run, then repetitions for about $BENCH_BUDGET seconds (default
# 1): at least 5, at most $BENCH_MAX_REPS (200), fewer when 5 would take over 10 budgets; a case
# whose warm-up alone takes over 10 budgets is reported from that one run (tools/bench/common.h,
# bench_measure).  Figures use the best time; the median is in the results file.
#
# Missing tools are installed with apt-get when running as root (libopenblas-dev,
# python3-torch; BENCH_INSTALL=no to never install), else their columns are skipped.  A program
# that tsrc cannot compile is reported as "not supported" (an UNSUPPORTED line in the results,
# "n/s" in the table) and skipped.
#
# Environment: BENCH_PROFILE=1 (also the GPT step's kernels by time, tsrc --profile),
# BENCH_ONLY (sections: matmul f64 half bmm ew train python gpt dp conv), BENCH_SIZES, BENCH_BMM, BENCH_THREADS (default "1 2"),
# BENCH_ROUNDS (default 2: the matmul section runs twice, every implementation in each round, and
# each figure is the best of its rounds, so a slow spell of a VM does not decide one point), BENCH_BUDGET,
# BENCH_MAX_REPS, BENCH_INSTALL, BENCH_CPU (tsrc's --cpu for the programs it compiles, default
# the host's: BENCH_CPU=x86-64-v3 with OPENBLAS_CORETYPE=Haswell measures the AVX2 schedule
# against OpenBLAS's AVX2 kernels on an AVX-512 machine), BENCH_PYTHON (default /usr/bin/python3, which has Debian's
# python3-numpy and python3-torch; the python3 first on PATH may lack them), CC.  Writes
# BUILD/bench/: the generated programs and drivers, results.txt (the RESULT, UNSUPPORTED and
# INFO lines) and table.md (the tables printed at the end).
# Exit status 1 when a result was wrong, a run failed, or tsrc and PyTorch disagree on the MLP's
# or the GPT's first loss or on a convolution's sums, else 0.
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
BMM=${BENCH_BMM:-64x128 32x256}
THREADS=${BENCH_THREADS:-1 2}
INSTALL=${BENCH_INSTALL:-yes}
BUDGET=${BENCH_BUDGET:-1}
MAX_REPS=${BENCH_MAX_REPS:-200}
ROUNDS=${BENCH_ROUNDS:-2}
export BENCH_BUDGET="$BUDGET" BENCH_MAX_REPS="$MAX_REPS"

started=$(date +%s)
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
CPU_OPT=${BENCH_CPU:+--cpu=$BENCH_CPU}
[ -n "$CPU_OPT" ] && info "tsrc compiles the programs with $CPU_OPT (BENCH_CPU)"
info "tsrc $("$TSRC" --version 2>&1 | head -n 1);" \
    "driver compiler $($CC --version 2>/dev/null | head -n 1)"
if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
    git -C "$ROOT" diff --quiet HEAD -- compiler runtime stdlib grammar 2>/dev/null ||
        rev="$rev + uncommitted changes to compiler/runtime"
    info "source $rev"
fi
# OpenBLAS's kernels: the host's best.  Debian's OpenBLAS (a DYNAMIC_ARCH build) misdetects
# some CPUs (AMD's Zen 4 and 5 get kernels without AVX-512), so the bench pins them from the
# CPU's flags: SkylakeX's with AVX-512, Haswell's with AVX2 and FMA, OpenBLAS's own choice
# otherwise.  A pin from the environment is kept when this CPU can run it, with a warning when
# it gives up AVX-512 that tsrc uses (the ratios would not be like for like); a pin to AVX-512
# kernels on a CPU without them (they would die of SIGILL, and NumPy and PyTorch with them) is
# replaced by the host's best.
has_flags() { for f in "$@"; do grep -q "^flags.* $f\( \|\$\)" /proc/cpuinfo 2>/dev/null || return 1; done; }
best=
if has_flags avx512f avx512bw avx512dq avx512vl avx512cd; then best=SkylakeX
elif has_flags avx2 fma; then best=Haswell; fi
case $avx512:${OPENBLAS_CORETYPE:-} in
    *:) [ -n "$best" ] && OPENBLAS_CORETYPE=$best ;;
    yes:[Ss][Kk][Yy][Ll][Aa][Kk][Ee][Xx] | yes:[Cc][Oo][Oo][Pp][Ee][Rr][Ll][Aa][Kk][Ee] | yes:[Ss][Aa][Pp][Pp][Hh][Ii][Rr][Ee]*) ;;
    no:[Ss][Kk][Yy][Ll][Aa][Kk][Ee][Xx] | no:[Cc][Oo][Oo][Pp][Ee][Rr][Ll][Aa][Kk][Ee] | no:[Ss][Aa][Pp][Pp][Hh][Ii][Rr][Ee]*)
        echo "bench: warning: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (from the environment) names AVX-512" \
             "kernels this CPU cannot run; using ${best:-OpenBLAS's own choice}"
        if [ -n "$best" ]; then OPENBLAS_CORETYPE=$best; else unset OPENBLAS_CORETYPE; fi ;;
    yes:*) echo "bench: warning: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (from the environment) gives OpenBLAS" \
            "kernels without AVX-512 on this AVX-512 CPU; for a like-for-like comparison run with" \
            "OPENBLAS_CORETYPE=SkylakeX"
       info "OpenBLAS kernels pinned by the environment to $OPENBLAS_CORETYPE (no AVX-512) on an AVX-512 CPU" ;;
esac
[ -n "${OPENBLAS_CORETYPE:-}" ] && export OPENBLAS_CORETYPE
info "OpenBLAS kernels: ${OPENBLAS_CORETYPE:-OpenBLAS's own choice}"
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
info "load average at start $load"
case $load in
    0.[0-4]*) ;;
    *) echo "bench: warning: the machine is busy (load average $load);" \
            "figures will be low and noisy" ;;
esac

# ---- installing what is missing --------------------------------------------------------------
# Like tools/bootstrap.sh, with apt-get, but only as root (the bench never asks for a password).
can_install() {
    [ "$INSTALL" != no ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}
# apt_install PACKAGE: install it, updating the package lists first if that fails.
apt_install() {
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" ||
        { apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1"; }
    } >>"$WORK/apt.log" 2>&1
}

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
elif can_install; then
    echo "bench: OpenBLAS is missing; installing libopenblas-dev (apt-get, log in $WORK/apt.log)"
    apt_install libopenblas-dev
    find_openblas && have_blas=yes
    [ $have_blas = yes ] ||
        info "OpenBLAS: installing libopenblas-dev failed (see $WORK/apt.log); skipped"
else
    info "OpenBLAS: not installed; skipped (install it with: sudo apt-get install libopenblas-dev)"
fi
if [ $have_blas = yes ]; then
    if ! $CC -O2 $BLAS_CFLAGS -I"$BENCH" "$BENCH/mm_blas.c" -o "$WORK/mm_blas" $BLAS_LIBS -lm \
        2>"$WORK/mm_blas.log" ||
        ! $CC -O2 -DBENCH_F64 $BLAS_CFLAGS -I"$BENCH" "$BENCH/mm_blas.c" -o "$WORK/mm_blas_f64" $BLAS_LIBS -lm \
            2>>"$WORK/mm_blas.log"; then
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
if [ $have_numpy = yes ] && ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    if [ "$PY" = /usr/bin/python3 ] && can_install; then
        echo "bench: PyTorch is missing; installing python3-torch (apt-get, log in $WORK/apt.log;" \
            "a few hundred MB, once)"
        apt_install python3-torch
        "$PY" -c 'import torch' >/dev/null 2>&1 ||
            info "PyTorch: installing python3-torch failed (see $WORK/apt.log); skipped"
    else
        info "PyTorch: not importable by $PY; skipped" \
            "(install it with: sudo apt-get install python3-torch)"
    fi
fi
if [ $have_numpy = yes ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
    have_torch=yes
    info "PyTorch: $("$PY" -c 'import torch; print(torch.__version__)') under $PY"
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

# build_tsrc DIR NAME TSR DRIVER KIND N [CFLAGS]: tsrc -c, then the driver against the generated
# header.  When tsrc cannot compile the program, the case is "not supported": said on the
# terminal and in an UNSUPPORTED line (kind KIND, size N), and skipped.
build_tsrc() {
    if ! "$TSRC" -c $CPU_OPT --name="$2" "$3" -o "$1/$2.o" 2>"$1/tsrc.log"; then
        echo "bench: $5 n=$6: not supported by tsrc: \`tsrc -c --name=$2 $3\` failed:"
        sed 's/^/    /' "$1/tsrc.log" | head -n 20
        say "UNSUPPORTED kind=$5 impl=tsrc n=$6 — $(grep -m 1 'error' "$1/tsrc.log")"
        return 1
    fi
    if ! $CC -O2 ${7:-} -I"$1" -I"$ROOT/runtime" -I"$BENCH" "$BENCH/$4" "$1/$2.o" \
        "$BUILD/libtsr.a" -lm -lpthread -o "$1/driver" 2>"$1/cc.log"; then
        echo "bench: building $4 for $3 failed:"; sed 's/^/    /' "$1/cc.log" | head -n 20
        failed=1; return 1
    fi
}

# torch_wait THREADS: what PyTorch runs with: with several threads, OpenMP workers that sleep
# between parallel regions instead of spinning (OMP_WAIT_POLICY=PASSIVE); nothing for one.
torch_wait() { if [ "$1" -gt 1 ]; then echo OMP_WAIT_POLICY=PASSIVE; fi; }

# BENCH_ONLY: the sections to run (default all: matmul f64 half bmm ew train python gpt dp conv).
want() { case " ${BENCH_ONLY:-matmul f64 half bmm ew train python gpt dp conv} " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- matmul: three forms ---------------------------------------------------------------------
# form: the .tsr.in, the driver's -D, the kind of its RESULT lines, mm_blas's and py_bench's form
mm_form() {
    case $1 in
        nn) tin=matmul.tsr.in def= kind=matmul ;;
        nt) tin=matmul_compose.tsr.in def=-DMM_FORM_COMPOSE kind=matmul_compose ;;
        tn) tin=matmul_tn.tsr.in def=-DMM_FORM_TN kind=matmul_tn ;;
    esac
}
# mm_section SECTION TYPE: the three forms at every size, f32 (TYPE empty) or f64 (TYPE f64: the
# programs' matrices f64, the drivers built with -DBENCH_F64, OpenBLAS's cblas_dgemm, no Python).
mm_section() {
    section=$1 type=$2 suffix= dtype= tdef=
    [ -n "$type" ] && suffix=_$type dtype="; dtype = \"$type\""
    [ "$type" = f64 ] && tdef=-DBENCH_F64
    [ "$type" = bf16 ] && tdef=-DBENCH_BF16
    want "$section" || return 0
    echo "bench: $section (spec, compose and transposed forms${type:+, $type}), n = $SIZES; threads $THREADS; $ROUNDS rounds"
    for round in $(seq "$ROUNDS"); do for n in $SIZES; do
        for form in nn nt tn; do
            mm_form $form
            kind=$kind$suffix
            dir=$WORK/${kind}_$n
            mkdir -p "$dir"
            if [ "$round" = 1 ]; then
                sed -e "s/@N@/$n/" -e "s/@DTYPE@/$dtype/" "$BENCH/$tin" >"$dir/$kind.tsr"
                build_tsrc "$dir" mm "$dir/$kind.tsr" mm_tsrc.c "$kind" "$n" "$def $tdef" || dir=
            elif [ ! -x "$dir/driver" ]; then
                dir=
            fi
            pyform=$form
            [ $form = nn ] && pyform=
            for t in $THREADS; do
                [ -n "$dir" ] && run "tsrc $kind n=$n threads=$t" \
                    env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
                [ $have_blas = yes ] && [ "$type" != bf16 ] && run "OpenBLAS $kind n=$n threads=$t" \
                    env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
                    "$WORK/mm_blas$suffix" "$n" "$BUDGET" "$MAX_REPS" "$t" "$form"
                [ -n "$type" ] && continue
                [ $have_numpy = yes ] && run "NumPy $kind n=$n threads=$t" \
                    env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
                    "$PY" "$BENCH/py_bench.py" numpy "$t" $pyform "$n"
                [ $have_torch = yes ] && [ $form = nn ] && run "PyTorch matmul n=$n threads=$t" \
                    env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $(torch_wait "$t") \
                    "$PY" "$BENCH/py_bench.py" torch "$t" "$n"
            done
        done
    done; done
}
mm_section matmul ""
mm_section f64 f64
mm_section half bf16

# ---- batched matmul ----------------------------------------------------------------------------
want bmm && echo "bench: batched matmul, batch x n = $BMM; threads $THREADS"
want bmm && for size in $BMM; do
    nb=${size%x*} n=${size#*x}
    dir=$WORK/bmm_$size
    mkdir -p "$dir"
    sed -e "s/@B@/$nb/" -e "s/@N@/$n/" "$BENCH/bmm.tsr.in" >"$dir/bmm.tsr"
    build_tsrc "$dir" mm "$dir/bmm.tsr" mm_tsrc.c bmm "$size" -DMM_FORM_BMM || dir=
    for t in $THREADS; do
        [ -n "$dir" ] && run "tsrc bmm $size threads=$t" \
            env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
        [ $have_blas = yes ] && run "OpenBLAS bmm $size threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
            "$WORK/mm_blas" "$n" "$BUDGET" "$MAX_REPS" "$t" bmm "$nb"
        [ $have_numpy = yes ] && run "NumPy bmm $size threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
            "$PY" "$BENCH/py_bench.py" numpy "$t" bmm "$size"
    done
done

# ---- elementwise ----------------------------------------------------------------------------
if want ew; then
count=$(sed -n 's/^let n = \([0-9_]*\).*/\1/p' "$BENCH/elementwise.tsr" | tr -d _)
echo "bench: elementwise chain, $count floats; threads $THREADS"
dir=$WORK/elementwise
mkdir -p "$dir"
build_tsrc "$dir" ew "$BENCH/elementwise.tsr" ew_tsrc.c ew "$count" -ffp-contract=off || dir=
triad=$WORK/triad
if ! $CC -O3 -march=native -ffp-contract=off -I"$BENCH" "$BENCH/triad.c" -o "$triad" -lm \
    -lpthread 2>"$WORK/triad.log"; then
    echo "bench: building tools/bench/triad.c failed:"; sed 's/^/    /' "$WORK/triad.log" | head
    failed=1 triad=
fi
for t in $THREADS; do
    [ -n "$triad" ] && run "STREAM triad threads=$t" "$triad" "$count" "$BUDGET" "$MAX_REPS" "$t"
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
fi
# The same chain with bf16 storage (tools/bench/elementwise_bf16.tsr): half the bytes.
if want half; then
count=$(sed -n 's/^let n = \([0-9_]*\).*/\1/p' "$BENCH/elementwise_bf16.tsr" | tr -d _)
echo "bench: elementwise chain, bf16 storage, $count values; threads $THREADS"
dir=$WORK/elementwise_bf16
mkdir -p "$dir"
build_tsrc "$dir" ew "$BENCH/elementwise_bf16.tsr" ew_tsrc.c ew_bf16 "$count" "-ffp-contract=off -DBENCH_BF16" || dir=
for t in $THREADS; do
    [ -n "$dir" ] && run "tsrc elementwise bf16 threads=$t" \
        env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
done
fi

# ---- training steps ---------------------------------------------------------------------------
if want train; then
# train_case KIND TITLE PROGRAM BATCH: one training step, tsrc (tools/bench/KIND_tsrc.c) against
# PyTorch (py_train.py KIND), at each thread count.
train_case() {
    echo "bench: $2; threads $THREADS"
    dir=$WORK/$1
    mkdir -p "$dir"
    build_tsrc "$dir" "$1" "$3" "${1}_tsrc.c" "$1" "$4" -ffp-contract=off || dir=
    for t in $THREADS; do
        [ -n "$dir" ] && run "tsrc $1 threads=$t" \
            env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
        [ $have_torch = yes ] && run "PyTorch $1 threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $(torch_wait "$t") \
            "$PY" "$BENCH/py_train.py" "$t" "$1"
    done
}
train_case mlp "MLP 784-256-256-10 training step, batch 128" "$BENCH/mlp.tsr" 128
train_case nn_mlp "MLP 784-256-256-10 training step with Nn and Train (Adam), batch 128" \
    "$BENCH/nn_mlp.tsr" 128
# The same step with the batch a run-time size (`b = [?]`, set to 128 by the driver): against
# the program with the batch written (docs/runtime.md §16).
echo "bench: the Nn/Train MLP step with a run-time batch of 128; threads $THREADS"
dir=$WORK/nn_mlp_dyn
mkdir -p "$dir"
sed 's/b = \[batch\]/b = [?]/g' "$BENCH/nn_mlp.tsr" >"$dir/nn_mlp_dyn.tsr"
build_tsrc "$dir" nn_mlp "$dir/nn_mlp_dyn.tsr" nn_mlp_tsrc.c nn_mlp_dyn 128 -ffp-contract=off || dir=
for t in $THREADS; do
    [ -n "$dir" ] && run "tsrc nn_mlp_dyn threads=$t" env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
done
train_case moons "moons perceptron training step (docs/examples/train_moons.tsr), batch 20" \
    "$ROOT/docs/examples/train_moons.tsr" 20
[ $have_torch = yes ] || info "PyTorch: not available; the training tables have no PyTorch column"
fi

# ---- Python: the same step from a Python loop (runtime/python/tsr) -------------------------------
if want python; then
echo "bench: the Nn/Train MLP step driven from Python (tsr.compile, m.step()); threads $THREADS"
for t in $THREADS; do
    run "Python loop nn_mlp threads=$t" "$PY" "$BENCH/py_loop.py" "$TSRC" "$t" "$WORK/py_cache"
done
fi

# ---- the GPT step -------------------------------------------------------------------------------
# The tsrc driver saves the parameters it starts from; PyTorch's side (py_gpt.py) loads them.
# BENCH_GPT: the configurations, KIND:VOCAB:C:NH:T:B:L[:fused] (default docs/examples/gpt.tsr's and
# GPT-2 124M's at T=64, B=4, then the example's blocks at T=512, B=1 with attention materialised
# and fused: Nn.gpt_block ~fused:true, core.tsr attend).
gpt_program() { # DIR KIND VOCAB C NH T B L [FUSED]: DIR/gpt.tsr from the template
    sed -e "s/@VOCAB@/$3/; s/@DIM@/$4/; s/@HEADS@/$5/; s/@CTX@/$6/; s/@BATCH@/$7/; s/@LAYERS@/$8/" \
        -e "s/@FUSED@/${9:-false}/" "$BENCH/gpt.tsr.in" >"$1/gpt.tsr"
}
if want gpt; then
for config in ${BENCH_GPT:-gpt:96:256:4:64:8:4 gpt124m:50304:768:12:64:4:12 gpt512:96:256:4:512:1:4 gpt512f:96:256:4:512:1:4:fused}; do
    IFS=: read -r kind vocab c nh tt bb ll fused <<CONFIG
$config
CONFIG
    fused=$([ "$fused" = fused ] && echo true || echo false)
    echo "bench: GPT training step $kind (L=$ll, C=$c, NH=$nh, T=$tt, B=$bb, V=$vocab, AdamW, attention fused: $fused); threads $THREADS"
    dir=$WORK/$kind
    mkdir -p "$dir"
    gpt_program "$dir" "$kind" "$vocab" "$c" "$nh" "$tt" "$bb" "$ll" "$fused"
    build_tsrc "$dir" gpt "$dir/gpt.tsr" gpt_tsrc.c "$kind" "$bb" "-ffp-contract=off -DVOCAB=$vocab -DKIND=\"$kind\"" || dir=
    for t in $THREADS; do
        [ -n "$dir" ] && run "tsrc $kind threads=$t" \
            env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS" "$dir/gpt_init.npz"
        [ -n "$dir" ] && [ $have_torch = yes ] && run "PyTorch $kind threads=$t" \
            env OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $(torch_wait "$t") \
            "$PY" "$BENCH/py_gpt.py" "$t" "$dir/gpt_init.npz" "$kind" "$vocab" "$c" "$nh" "$tt" "$bb" "$ll"
    done
done
[ $have_torch = yes ] || info "PyTorch: not available; the GPT table has no PyTorch column"
# BENCH_PROFILE=1: the step compiled with --profile, its kernels by time (docs/runtime.md §17).
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
    pdir=$WORK/gpt_profile
    mkdir -p "$pdir"
    gpt_program "$pdir" gpt 96 256 4 64 8 4
    if "$TSRC" --profile -c $CPU_OPT --name=gpt "$pdir/gpt.tsr" -o "$pdir/gpt.o" 2>"$pdir/tsrc.log" &&
       $CC -O2 -DGPT_PROFILE -I"$pdir" -I"$ROOT/runtime" -I"$BENCH" "$BENCH/gpt_tsrc.c" "$pdir/gpt.o" \
           "$BUILD/libtsr.a" -lm -lpthread -o "$pdir/driver" 2>"$pdir/cc.log"; then
        parts=
        for t in $THREADS; do
            echo "bench: the GPT step's kernels by time at $t thread(s) (tsrc --profile; the whole run):"
            env TSR_NUM_THREADS="$t" TSR_PROFILE_ALL=1 "$pdir/driver" "$BUDGET" "$MAX_REPS" "$pdir/gpt_init.npz" \
                2>"$pdir/profile_$t.txt" >/dev/null
            head -n 42 "$pdir/profile_$t.txt" | sed 's/^/    /'
            parts="$parts $t-thread=$pdir/profile_$t.txt"
        done
        # The same runs added up by the part of the model each kernel comes from.
        if "$TSRC" --emit=sched-ir $CPU_OPT "$pdir/gpt.tsr" -o "$pdir/gpt.sched" 2>>"$pdir/tsrc.log"; then
            echo "bench: the GPT step's time by part of the model (ms a step, the run's mean; tools/bench/profile_parts.py):"
            "$PY" "$BENCH/profile_parts.py" "$pdir/gpt.sched" "$ROOT/stdlib" step $parts | sed 's/^/    /' ||
                failed=1
        fi
    else
        echo "bench: building the profiled GPT step failed:"; cat "$pdir/tsrc.log" "$pdir/cc.log" | head -n 20
        failed=1
    fi
fi
fi

# ---- data-parallel training: processes against threads ----------------------------------------
# One step of nn_mlp (global batch 128) and of the example's GPT (global batch 8), on one process
# of 1 and 2 threads (the program with the whole batch) and on two processes of one thread each
# under mpirun (the program with half the batch each; docs/runtime.md §19), a fixed step count
# (tools/bench/dp_tsrc.c), compiled with --profile: process 0's profile says how much of the
# step the gradients' mean takes (it is not overlapped with the backward pass in this version).
dp_case() { # KIND PROGRAM-1 PROGRAM-2 VOCAB
    d1=$WORK/dp_$1_1 d2=$WORK/dp_$1_2
    mkdir -p "$d1" "$d2"
    for d in "$d1:$2" "$d2:$3"; do
        dir=${d%%:*} prog=${d#*:}
        if ! "$TSRC" --profile -c $CPU_OPT --name=dp "$prog" -o "$dir/dp.o" 2>"$dir/tsrc.log" ||
           ! $CC -O2 -DVOCAB="$4" -I"$dir" -I"$ROOT/runtime" -I"$BENCH" "$BENCH/dp_tsrc.c" "$dir/dp.o"                "$BUILD/libtsr.a" -lm -lpthread -ldl -o "$dir/driver" 2>"$dir/cc.log"; then
            echo "bench: building the $1 step for dp failed:"; cat "$dir/tsrc.log" "$dir/cc.log" | head -n 20
            failed=1; return
        fi
    done
    for t in 1 2; do
        env TSR_NUM_THREADS=$t "$d1/driver" "$DP_STEPS" "$1" 2>"$WORK/dp.prof" | grep '^DP ' | tee -a "$RESULTS"
    done
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --oversubscribe -np 2 -x TSR_NUM_THREADS=1 "$d2/driver" "$DP_STEPS" "$1" 2>"$WORK/dp.prof" |
        grep '^DP ' | tee -a "$RESULTS"
    grep 'means across processes' "$WORK/dp.prof" | head -n 1 | sed -e "s/^ */INFO dp $1 process 0's profile: /" \
        -e 's/ of \([^,]*\), .*/ of \1 and the rest/' |
        tee -a "$RESULTS"
}
if want dp; then
if command -v mpirun >/dev/null 2>&1; then
    DP_STEPS=${BENCH_DP_STEPS:-30}
    echo "bench: data-parallel steps: 1 process of 1 and 2 threads against 2 processes of 1 thread (mpirun), same global batch"
    sed -e 's/^let batch = 128$/let batch = 64/' "$BENCH/nn_mlp.tsr" >"$WORK/nn_mlp_half.tsr"
    dp_case nn_mlp "$BENCH/nn_mlp.tsr" "$WORK/nn_mlp_half.tsr" 10
    mkdir -p "$WORK/dp_gpt"
    gpt_program "$WORK/dp_gpt" gpt 96 256 4 64 8 4 && mv "$WORK/dp_gpt/gpt.tsr" "$WORK/dp_gpt/whole.tsr"
    gpt_program "$WORK/dp_gpt" gpt 96 256 4 64 4 4 && mv "$WORK/dp_gpt/gpt.tsr" "$WORK/dp_gpt/half.tsr"
    dp_case gpt "$WORK/dp_gpt/whole.tsr" "$WORK/dp_gpt/half.tsr" 96
else
    info "dp: mpirun is missing (Debian's openmpi-bin); no data-parallel figures"
fi
fi

# ---- convolutions -----------------------------------------------------------------------------
if want conv; then
echo "bench: LeNet-5 convolutions (5x5, batch 64), forward and forward+backward; threads $THREADS"
dir=$WORK/conv
mkdir -p "$dir"
build_tsrc "$dir" conv "$BENCH/conv.tsr" conv_tsrc.c conv 1 || dir=
for t in $THREADS; do
    [ -n "$dir" ] && run "tsrc conv threads=$t" \
        env TSR_NUM_THREADS="$t" "$dir/driver" "$BUDGET" "$MAX_REPS"
    [ $have_torch = yes ] && run "PyTorch conv threads=$t" \
        env OMP_NUM_THREADS="$t" $(torch_wait "$t") "$PY" "$BENCH/py_conv.py" "$t"
done
[ $have_torch = yes ] || info "PyTorch: not available; the convolution table has no PyTorch column"
fi
info "load average at end $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)"

# ---- the tables -----------------------------------------------------------------------------
echo
TPY=$PY
"$TPY" -c '' 2>/dev/null || TPY=python3
"$TPY" "$BENCH/table.py" "$RESULTS" >"$WORK/table.md" || failed=1
cat "$WORK/table.md"
grep '^INFO \(NumPy\|PyTorch\|OpenBLAS\)' "$RESULTS" | sed 's/^INFO //'
grep '^UNSUPPORTED ' "$RESULTS" | sed 's/^/bench: /'
echo "bench: results in $RESULTS; took $(($(date +%s) - started)) s"
exit $failed
