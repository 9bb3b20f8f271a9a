#!/bin/sh
# nccl.sh — the NCCL engine (--distributed=nccl, docs/runtime.md §19) on a GPU, in two halves
# like tests/gpu/prepare.sh and run.sh: `prepare` builds here (tsrc, LLVM, python3 with NumPy),
# `run` runs on the GPU machine (sh, coreutils, python3 and the NVIDIA driver; NCCL from the
# Python package nvidia-nccl-cu13).
#
# Usage: sh tests/gpu/nccl.sh prepare TSRC OUTDIR      (from the repository root)
#        sh tests/gpu/nccl.sh run OUTDIR               (from the repository root)
#
# prepare: the digits MLP of docs/examples/digits.tsr (it trains with Train.step), its loss
# printed in full, as --target=cuda executables (--arch TSR_GPU_ARCH, default sm_80): f32; f32
# with --bucket-cells 4096 (REDUCE_BEGIN/REDUCE_END: the buckets' means enqueued between the
# backward kernels); f64; bf16 (as tests/native/data_parallel.sh edits it), and the digits data
# of tools/digits.py, into OUTDIR (emptied first).
# run: each executable plainly and with --distributed=nccl (one process, no launcher: NCCL's
# communicator of one rank, every REDUCE an ncclAllReduce with ncclAvg on the GPU), each with
# --save: the printed output (losses, accuracies) must be the same bytes and the checkpoints
# (every parameter and optimiser state) the same SHA-256, exit status 0; with --reduce=ordered the
# NCCL engine takes the host path (the same output again); TSR_NCCL_LIBRARY naming no file is
# the engine's message and status 1.  NCCL's own log (NCCL_DEBUG=INFO into OUTDIR/runs/*.nccl-log.*)
# must show the in-place ncclAllReduce calls with ncclAvg in each variant's type, and none with
# --reduce=ordered.  NCCL is libnccl.so.2 in the lib/ of the Python package
# nvidia.nccl (TSR_NCCL_LIBRARY set to it unless already set).  Several ranks need several GPUs
# and are not tested here.  Lines PASS/FAIL, last line "N passed, M failed"; exit 1 on a failure,
# 2 with "SKIP: no GPU" when the first run cannot use a GPU.  About 10 runs of a second or two.
set -u

usage() {
    echo "usage: sh tests/gpu/nccl.sh prepare TSRC OUTDIR | sh tests/gpu/nccl.sh run OUTDIR" >&2
    exit 2
}
VARIANTS="f32 f32_buckets f64 bf16"

prepare() {
    TSRC=$1 OUT=$2
    PY=${PYTHON:-/usr/bin/python3}
    ARCH=${TSR_GPU_ARCH:-sm_80}
    [ -x "$TSRC" ] || { echo "nccl.sh: $TSRC is not an executable" >&2; exit 2; }
    rm -rf "$OUT"
    mkdir -p "$OUT/bin" "$OUT/data" "$OUT/src" "$OUT/log" || exit 2
    "$PY" tools/digits.py "$OUT/data" >"$OUT/log/digits.log" 2>&1 || { cat "$OUT/log/digits.log" >&2; exit 1; }
    ex=docs/examples/digits.tsr
    sed -e 's/loss %\.4f/loss %.9g/' "$ex" >"$OUT/src/f32.tsr"
    cp "$OUT/src/f32.tsr" "$OUT/src/f32_buckets.tsr"
    for dtype in f64 bf16; do
        sed -e "s/mlp ~hidden/mlp ~dtype:\"$dtype\" ~hidden/" -e 's/loss %\.4f/loss %.17g/' "$ex" >"$OUT/src/$dtype.tsr"
    done
    sed -i -e 's/{ epoch_loss = 0\.; o = \[1\] }/{ epoch_loss = 0.; o = [1]; dtype = "f64" }/' "$OUT/src/f64.tsr"
    status=0
    for v in $VARIANTS; do
        extra=
        [ $v = f32_buckets ] && extra="--bucket-cells 4096"
        # shellcheck disable=SC2086
        if "$TSRC" --target=cuda --arch="$ARCH" $extra "$OUT/src/$v.tsr" -o "$OUT/bin/$v" >"$OUT/log/$v.build" 2>&1; then
            echo "built $OUT/bin/$v"
        else
            echo "FAIL build $v:" >&2
            sed -n '1,12s/^/    /p' "$OUT/log/$v.build" >&2
            status=1
        fi
    done
    exit $status
}

run() {
    OUT=$(cd "$1" 2>/dev/null && pwd) || { echo "nccl.sh: no directory $1" >&2; exit 2; }
    [ -d "$OUT/bin" ] || { echo "nccl.sh: no $OUT/bin: run 'sh tests/gpu/nccl.sh prepare TSRC $1' first" >&2; exit 2; }
    PY=${PYTHON:-python3}
    R=$OUT/runs
    rm -rf "$R"
    mkdir -p "$R"
    passed=0 failed=0
    pass() { passed=$((passed + 1)); echo "PASS $1"; }
    fail() {
        failed=$((failed + 1))
        echo "FAIL $1"
        for f in ${2:-}; do [ -s "$f" ] && sed -n '1,8s/^/    /p' "$f"; done
    }
    D=$OUT/data
    DATA="--data train_x=$D/digits_train_x.npy --data train_y=$D/digits_train_y.npy --data test_x=$D/digits_test_x.npy --data test_y=$D/digits_test_y.npy"
    sha() { "$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1" 2>/dev/null; }
    # go NAME EXECUTABLE [ARGS...]: its stdout in $R/NAME.out, stderr in $R/NAME.err, --save $R/NAME.npz; the status.
    go() {
        name=$1 exe=$2
        shift 2
        # shellcheck disable=SC2086
        timeout 30 "$exe" $DATA --save "$R/$name.npz" "$@" >"$R/$name.out" 2>"$R/$name.err" </dev/null
    }

    # The GPU: the first plain run tells.
    go f32.plain "$OUT/bin/f32"
    st=$?
    if [ $st -ne 0 ] && grep -qiE 'libcuda|cuda driver|no cuda|cuda device|no gpu|CUDA_ERROR_NO_DEVICE|cuInit' "$R/f32.plain.err"; then
        echo "SKIP: no GPU: the plain f32 run could not use one; nothing was tested:"
        sed -n '1,5s/^/    /p' "$R/f32.plain.err"
        exit 2
    fi

    if [ -z "${TSR_NCCL_LIBRARY:-}" ]; then
        dir=$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>"$R/find.err")
        if [ -n "$dir" ] && [ -f "$dir/libnccl.so.2" ]; then
            TSR_NCCL_LIBRARY=$dir/libnccl.so.2
        else
            TSR_NCCL_LIBRARY=libnccl.so.2 # the system's, if it has one
            echo "note: no Python package nvidia.nccl ($(tail -n 1 "$R/find.err")): trying the system's libnccl.so.2"
        fi
    fi
    export TSR_NCCL_LIBRARY
    echo "NCCL: $TSR_NCCL_LIBRARY"

    # nccl_calls NAME TYPE: NCCL's log of run NAME (NCCL_DEBUG_FILE) shows in-place ncclAllReduce
    # calls with ncclAvg (op 4) of NCCL type TYPE (ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9);
    # TYPE "none": no call at all.  Prints the count.
    nccl_calls() {
        grep -h 'AllReduce: ' "$R/$1".nccl-log.* 2>/dev/null | grep -c " datatype $2 op 4 "
    }
    # same NAME A B: runs A and B (status 0 both) print the same bytes and save the same checkpoint.
    same() {
        if [ "$(cat "$R/$2.status")" != 0 ] || [ "$(cat "$R/$3.status")" != 0 ]; then
            fail "$1: exit statuses $(cat "$R/$2.status") and $(cat "$R/$3.status"), expected 0" "$R/$2.err $R/$3.err"
        elif ! [ -s "$R/$2.out" ] || [ "$(sha "$R/$2.out")" != "$(sha "$R/$3.out")" ]; then
            fail "$1: the printed losses and accuracies differ ($2, then $3)" "$R/$2.out $R/$3.out"
        elif [ -z "$(sha "$R/$2.npz")" ] || [ "$(sha "$R/$2.npz")" != "$(sha "$R/$3.npz")" ]; then
            fail "$1: the checkpoints differ (SHA-256 $(sha "$R/$2.npz") and $(sha "$R/$3.npz"))"
        else
            pass "$1 ($(tail -n 1 "$R/$2.out" | cut -c1-60); checkpoint $(sha "$R/$2.npz" | cut -c1-16))"
        fi
    }
    echo $st >"$R/f32.plain.status"
    for v in $VARIANTS; do
        if [ $v != f32 ]; then go $v.plain "$OUT/bin/$v"; echo $? >"$R/$v.plain.status"; fi
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE="$R/$v.nccl.nccl-log.%p" go $v.nccl "$OUT/bin/$v" --distributed=nccl
        echo $? >"$R/$v.nccl.status"
        same "$v: --distributed=nccl equals the plain run" $v.plain $v.nccl
        case $v in f64) type=8 ;; bf16) type=9 ;; *) type=7 ;; esac
        calls=$(nccl_calls $v.nccl $type)
        if [ "$calls" -gt 0 ]; then pass "$v: the means were NCCL's ($calls in-place ncclAllReduce calls of type $type with ncclAvg)"
        else fail "$v: NCCL's log shows no ncclAllReduce of type $type with ncclAvg" "$(ls "$R/$v".nccl-log.* 2>/dev/null | head -n 1)"; fi
    done
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE="$R/f32.ordered.nccl-log.%p" go f32.ordered "$OUT/bin/f32" --distributed=nccl --reduce=ordered
    echo $? >"$R/f32.ordered.status"
    same "f32: --distributed=nccl --reduce=ordered (the host path) equals the plain run" f32.plain f32.ordered
    if [ "$(grep -h 'AllReduce: ' "$R"/f32.ordered.nccl-log.* 2>/dev/null | grep -c .)" = 0 ]; then pass "f32: --reduce=ordered makes no NCCL call"
    else fail "f32: --reduce=ordered made NCCL calls (it takes the host path)"; fi

    TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2 timeout 30 "$OUT/bin/f32" $DATA --distributed=nccl >"$R/bad.out" 2>"$R/bad.err" </dev/null
    st=$?
    if [ $st = 1 ] && grep -qF "needs NCCL's library" "$R/bad.err" && grep -qF "/nonexistent/libnccl.so.2 cannot be loaded" "$R/bad.err" &&
        ! [ -s "$R/bad.out" ]; then
        pass "TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2: the message, status 1"
    else
        fail "TSR_NCCL_LIBRARY=/nonexistent/libnccl.so.2: status $st, expected 1 and the message" "$R/bad.err"
    fi
    echo "$passed passed, $failed failed"
    [ $failed = 0 ]
}

case ${1:-} in
    prepare) [ $# = 3 ] || usage; prepare "$2" "$3" ;;
    run) [ $# = 2 ] || usage; run "$2" ;;
    *) usage ;;
esac
