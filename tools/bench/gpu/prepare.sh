#!/bin/sh
# prepare.sh — the first half of `make bench-gpu`: builds the GPU benchmarks here (tsrc, a C
# compiler, the CUDA toolkit's headers and cuBLAS) so that tools/bench/gpu/run.sh can run them on
# a GPU machine that has only sh, python3 (with PyTorch for the MLP reference) and the CUDA
# driver and runtime libraries.
#
# Usage: sh tools/bench/gpu/prepare.sh TSRC BUILD OUTDIR     (from the repository root; BUILD
#        holds libtsr.a)
#
# OUTDIR (emptied first) receives bin/:
#   mm_tsrc_N    tools/bench/matmul.tsr.in at size N (C = A·B, n×n fp32), `tsrc -c
#                --target=cuda --arch=ARCH --name=mm`, driven by mm_gpu_tsrc.c
#   mlp_tsrc     tools/bench/mlp.tsr (one SGD step, 784-256-256-10, batch 128), driven by
#                mlp_gpu_tsrc.c
#   mm_cublas    mm_cublas.c: cublasSgemm in plain FP32, linked against the toolkit's cuBLAS
#                (dynamically: run.sh puts /usr/local/cuda/lib64 on LD_LIBRARY_PATH) and its
#                CUDA runtime (statically)
# and sizes.txt (the sizes N).  The MLP's PyTorch side (py_train_gpu.py) runs from the working tree.
# Environment: BENCH_GPU_SIZES (default "1024 2048 4096 8192"), BENCH_GPU_ARCH (default sm_90),
# CUDA_HOME (default /usr/local/cuda), CC (default cc), TSR_RUNTIME (the runtime library to
# link instead of BUILD/libtsr.a, as for tsrc).  A program tsrc cannot compile is reported and
# left out; a driver that does not build makes prepare.sh exit 1 (after building the rest).
set -u

if [ $# -ne 3 ]; then
    echo "usage: sh tools/bench/gpu/prepare.sh TSRC BUILD OUTDIR" >&2
    exit 2
fi
TSRC=$1 BUILD=$2 OUT=$3
HERE=tools/bench/gpu
BENCH=tools/bench
SIZES=${BENCH_GPU_SIZES:-1024 2048 4096 8192}
ARCH=${BENCH_GPU_ARCH:-sm_90}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
LIB=${TSR_RUNTIME:-$BUILD/libtsr.a}
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE"
status=0

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/obj" "$OUT/log" || exit 2
: >"$OUT/sizes.txt"

# tsrc_case DIR NAME TSR DRIVER EXE: tsrc -c --target=cuda into DIR, then the driver into bin/EXE.
tsrc_case() {
    mkdir -p "$1"
    if ! "$TSRC" -c --target=cuda --arch="$ARCH" --name="$2" "$3" -o "$1/$2.o" >"$1/tsrc.log" 2>&1; then
        echo "bench-gpu: $3: not supported by tsrc --target=cuda:"
        sed -n '1,12s/^/    /p' "$1/tsrc.log"
        return 1
    fi
    if ! $CC $CFLAGS -I"$1" -Iruntime -I"$BENCH" "$HERE/$4" "$1/$2.o" "$LIB" -lm -lpthread -ldl \
        -o "$OUT/bin/$5" >"$1/cc.log" 2>&1; then
        echo "bench-gpu: FAIL: building $HERE/$4 for $3:"
        grep -E 'error|undefined' "$1/cc.log" | sed -n '1,12s/^/    /p'
        status=1
        return 1
    fi
    echo "bench-gpu: built bin/$5 ($3)"
}

for n in $SIZES; do
    dir=$OUT/obj/mm_$n
    mkdir -p "$dir"
    sed -e "s/@N@/$n/" -e "s/@DTYPE@//" "$BENCH/matmul.tsr.in" >"$dir/matmul.tsr"
    tsrc_case "$dir" mm "$dir/matmul.tsr" mm_gpu_tsrc.c "mm_tsrc_$n" && echo "$n" >>"$OUT/sizes.txt"
done
tsrc_case "$OUT/obj/mlp" mlp "$BENCH/mlp.tsr" mlp_gpu_tsrc.c mlp_tsrc

if [ -f "$CUDA/include/cublas_v2.h" ]; then
    if $CC $CFLAGS -I"$CUDA/include" -I"$BENCH" "$HERE/mm_cublas.c" -L"$CUDA/lib64" -lcublas \
        -lcudart_static -ldl -lrt -lpthread -lm -Wl,-rpath,/usr/local/cuda/lib64 \
        -o "$OUT/bin/mm_cublas" >"$OUT/log/cublas.log" 2>&1; then
        echo "bench-gpu: built bin/mm_cublas (cuBLAS from $CUDA)"
    else
        echo "bench-gpu: FAIL: building $HERE/mm_cublas.c:"
        sed -n '1,12s/^/    /p' "$OUT/log/cublas.log"
        status=1
    fi
else
    echo "bench-gpu: FAIL: no $CUDA/include/cublas_v2.h (set CUDA_HOME to the CUDA toolkit)"
    status=1
fi
rm -f "$OUT"/obj/*/*.o
echo "bench-gpu: prepared in $OUT ($(du -sh "$OUT" | cut -f1)); run: sh $HERE/run.sh $OUT"
exit $status
