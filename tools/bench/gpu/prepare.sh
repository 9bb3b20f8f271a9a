#!/bin/sh
# prepare.sh — the first half of `make bench-gpu`: builds the GPU benchmarks here (tsrc, a C
# compiler, the CUDA toolkit's headers and cuBLAS) so that tools/bench/gpu/run.sh can run them on
# a GPU machine that has only sh, python3 (with PyTorch for the MLP reference) and the CUDA
# driver and runtime libraries.
#
# Usage: sh tools/bench/gpu/prepare.sh TSRC BUILD OUTDIR     (from the repository root; BUILD
#        holds libtsr.a)
#
# OUTDIR (emptied first) receives bin.tar.xz, bin/ packed (tools/gpu_bin.sh: a GPU machine's
# copy of the working tree is limited to 64 MiB; run.sh unpacks it), bin/ holding:
#   mm_tsrc_N    tools/bench/matmul.tsr.in at size N (C = A·B, n×n fp32), `tsrc -c
#                --target=cuda --arch=ARCH --name=mm`, driven by mm_gpu_tsrc.c
#   mm_tsrc_T_N  the same in another type T at each size of BENCH_GPU_HALF_SIZES: tf32 (the f32
#                program compiled with --tf32), bf16 and f16 (the matrices' dtype), all on the
#                tensor cores (mm_gpu_tsrc.c built with -DMM_TF32, -DMM_BF16, -DMM_F16)
#   mlp_tsrc     tools/bench/mlp.tsr (one SGD step, 784-256-256-10, batch 128), driven by
#                mlp_gpu_tsrc.c
#   nn_mlp_B_H_T tools/bench/nn_mlp.tsr (Nn.mlp 784-H-H-10, Train.adam) at batch B in type T
#                (f32, or bf16: `mlp ~dtype:"bf16"`, f32 master weights), for each B:H of
#                BENCH_GPU_MLPS, driven by nn_mlp_gpu_tsrc.c
#   gpt_K        tools/bench/gpt.tsr.in at each configuration K:VOCAB:C:NH:T:B:L[:fused[:OPTIONS]]
#                of BENCH_GPU_GPT (tools/bench.sh's format: `fused` for attention in one kernel a
#                direction, gpt_block ~fused:true; OPTIONS, tsrc's options for this variant
#                separated by commas, `--gpu-blocks=256,--tf32`), compiled with --reassociate (block
#                reductions for its sums), driven by gpt_tsrc.c -DGPT_GPU; PyTorch's side is
#                tools/bench/py_gpt.py with BENCH_GPT_DEVICE=cuda; gpts.txt lists the configs
#   gpt_K_profile the same compiled with --profile (each launch waits for its kernel), driven
#                by gpt_tsrc.c -DGPT_PROFILE: its table of kernels by time
#   mm_cublas    mm_cublas.c: cuBLAS (cublasSgemm in plain FP32, cublasGemmEx for tf32, bf16 and
#                f16), linked against the toolkit's cuBLAS (dynamically: run.sh puts
#                /usr/local/cuda/lib64 on LD_LIBRARY_PATH) and its CUDA runtime (statically)
# and sizes.txt, half_sizes.txt, mlps.txt (the sizes).  The MLPs' PyTorch side
# (py_train_gpu.py) runs from the working tree.
# Environment: BENCH_GPU_SIZES (default "1024 2048 4096 8192"), BENCH_GPU_HALF_SIZES (default
# "4096 8192"), BENCH_GPU_MLPS (default "128:256 8192:4096"), BENCH_GPU_GPT (default
# "gpu_gpt:96:256:4:64:8:4 gpu_gpt124m:50304:768:12:64:4:12"): each set to "" leaves its cases
# out (unset: the default); BENCH_GPU_ARCH (default sm_90),
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
SIZES=${BENCH_GPU_SIZES-1024 2048 4096 8192}
HALF_SIZES=${BENCH_GPU_HALF_SIZES-4096 8192}
MLPS=${BENCH_GPU_MLPS-128:256 8192:4096}
GPTS=${BENCH_GPU_GPT-gpu_gpt:96:256:4:64:8:4 gpu_gpt124m:50304:768:12:64:4:12}
ARCH=${BENCH_GPU_ARCH:-sm_90}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
LIB=${TSR_RUNTIME:-$BUILD/libtsr.a}
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE"
status=0
. tools/gpu_bin.sh

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/obj" "$OUT/log" || exit 2
: >"$OUT/sizes.txt"
: >"$OUT/half_sizes.txt"
: >"$OUT/mlps.txt"
: >"$OUT/gpts.txt"

# tsrc_case DIR NAME TSR DRIVER EXE [TSRC_OPTIONS [CC_OPTIONS]]: tsrc -c --target=cuda into DIR,
# then the driver into bin/EXE.
tsrc_case() {
    mkdir -p "$1"
    if ! "$TSRC" -c --target=cuda --arch="$ARCH" ${6:-} --name="$2" "$3" -o "$1/$2.o" >"$1/tsrc.log" 2>&1; then
        echo "bench-gpu: $3: not supported by tsrc --target=cuda:"
        sed -n '1,12s/^/    /p' "$1/tsrc.log"
        return 1
    fi
    if ! $CC $CFLAGS ${7:-} -I"$1" -Iruntime -I"$BENCH" "$4" "$1/$2.o" "$LIB" -lm -lpthread -ldl \
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
    tsrc_case "$dir" mm "$dir/matmul.tsr" "$HERE/mm_gpu_tsrc.c" "mm_tsrc_$n" && echo "$n" >>"$OUT/sizes.txt"
done
for n in $HALF_SIZES; do
    for type in tf32 bf16 f16; do
        dir=$OUT/obj/mm_${type}_$n
        mkdir -p "$dir"
        dtype=$([ $type = tf32 ] || echo "; dtype = \"$type\"")
        sed -e "s/@N@/$n/" -e "s/@DTYPE@/$dtype/" "$BENCH/matmul.tsr.in" >"$dir/matmul.tsr"
        tsrc_case "$dir" mm "$dir/matmul.tsr" "$HERE/mm_gpu_tsrc.c" "mm_tsrc_${type}_$n" \
            "$([ $type = tf32 ] && echo --tf32)" "-DMM_$(echo $type | tr a-z A-Z)" || continue
    done
    echo "$n" >>"$OUT/half_sizes.txt"
done
tsrc_case "$OUT/obj/mlp" mlp "$BENCH/mlp.tsr" "$HERE/mlp_gpu_tsrc.c" mlp_tsrc
for mlp in $MLPS; do
    batch=${mlp%:*} hidden=${mlp#*:}
    for type in f32 bf16; do
        dir=$OUT/obj/nn_mlp_${batch}_${hidden}_$type
        mkdir -p "$dir"
        sed -e "s/^let batch = 128$/let batch = $batch/" \
            -e "s/^let net = mlp ~hidden:\[256; 256\] ~out:10 ()$/let net = mlp ~hidden:[$hidden; $hidden] ~out:10 ~dtype:\"$type\" ()/" \
            "$BENCH/nn_mlp.tsr" >"$dir/nn_mlp.tsr"
        grep -q "hidden:\[$hidden; $hidden\]" "$dir/nn_mlp.tsr" && grep -q "^let batch = $batch$" "$dir/nn_mlp.tsr" ||
            { echo "bench-gpu: FAIL: tools/bench/nn_mlp.tsr no longer has the lines prepare.sh rewrites"; status=1; continue; }
        tsrc_case "$dir" mlp "$dir/nn_mlp.tsr" "$HERE/nn_mlp_gpu_tsrc.c" "nn_mlp_${batch}_${hidden}_$type" "" \
            "-DKIND=\"gpu_nn_mlp_${hidden}_$type\""
    done
    echo "$batch $hidden" >>"$OUT/mlps.txt"
done
for config in $GPTS; do
    IFS=: read -r kind vocab c nh tt bb ll fused options <<CONFIG
$config
CONFIG
    fused=$([ "$fused" = fused ] && echo true || echo false)
    options=$(echo "$options" | tr , ' ')
    dir=$OUT/obj/$kind
    mkdir -p "$dir"
    sed -e "s/@VOCAB@/$vocab/; s/@DIM@/$c/; s/@HEADS@/$nh/; s/@CTX@/$tt/; s/@BATCH@/$bb/; s/@LAYERS@/$ll/" \
        -e "s/@FUSED@/$fused/" "$BENCH/gpt.tsr.in" >"$dir/gpt.tsr"
    tsrc_case "$dir" gpt "$dir/gpt.tsr" "$BENCH/gpt_tsrc.c" "$kind" "--reassociate $options" \
        "-DGPT_GPU -DVOCAB=$vocab -DKIND=\"$kind\"" &&
        echo "$kind $vocab $c $nh $tt $bb $ll" >>"$OUT/gpts.txt"
    tsrc_case "$OUT/obj/${kind}_profile" gpt "$dir/gpt.tsr" "$BENCH/gpt_tsrc.c" "${kind}_profile" "--reassociate --profile $options" \
        "-DGPT_GPU -DGPT_PROFILE -DVOCAB=$vocab -DKIND=\"${kind}_profile\""
done

if [ -f "$CUDA/include/cublas_v2.h" ]; then
    if $CC $CFLAGS -I"$CUDA/include" -I"$BENCH" -Iruntime "$HERE/mm_cublas.c" -L"$CUDA/lib64" -lcublas \
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
pack_bin "$OUT" || { echo "bench-gpu: FAIL: packing $OUT/bin into bin.tar.xz"; status=1; }
echo "bench-gpu: prepared in $OUT ($(du -sh "$OUT" | cut -f1)); run: sh $HERE/run.sh $OUT"
exit $status
