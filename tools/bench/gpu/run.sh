#!/bin/sh
# run.sh — the second half of `make bench-gpu`: runs what tools/bench/gpu/prepare.sh built, on a
# machine with an NVIDIA GPU, and prints the table of docs/performance.md's "GPU figures".
# Needs sh, awk, the CUDA driver, cuBLAS 13 (in /usr/local/cuda/lib64, or PyTorch's
# nvidia-cublas wheel) and, for the MLP's reference, python3 with PyTorch built with CUDA.
#
# Usage: sh tools/bench/gpu/run.sh OUTDIR      (run from anywhere; it works from the repository
#                                               root)
#
# Cases: fp32 C = A·B at each size of OUTDIR/sizes.txt, tsrc (bin/mm_tsrc_N) against cuBLAS
# (bin/mm_cublas N, plain FP32 without TF32), in GFLOP/s; the MLP training step (784-256-256-10,
# batch 128, SGD), tsrc (bin/mlp_tsrc) against PyTorch on the GPU (py_train_gpu.py), in ms per
# step.  ratio = tsrc's speed / the reference's (above 1: tsrc is faster).  Each program checks
# its own result (check=FAIL: a wrong result, which fails the line).  The RESULT and INFO lines go
# to OUTDIR/raw.txt, the table to OUTDIR/results.txt and stdout.  BENCH_GPU_BUDGET: about how
# many seconds each measurement takes (default 3).  Exit status 0, 1 when something failed or
# was wrong, 2 when there is no GPU (the first tsrc program cannot load the CUDA driver: "SKIP").
set -u

if [ $# -ne 1 ]; then
    echo "usage: sh tools/bench/gpu/run.sh OUTDIR" >&2
    exit 2
fi
OUT=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no directory $1" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT" || exit 2
PY=${PYTHON:-python3}
BUDGET=${BENCH_GPU_BUDGET:-3}
# cuBLAS: the toolkit's, else the one PyTorch brings (the nvidia-cublas wheel)
torch_cublas=$("$PY" -c 'import os, nvidia.cublas as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
LD_LIBRARY_PATH=/usr/local/cuda/lib64${torch_cublas:+:$torch_cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
RAW=$OUT/raw.txt
: >"$RAW"
failed=0
first=1

# measure LABEL COMMAND...: runs it; its RESULT and INFO lines go to raw.txt; prints its problems.
measure() {
    label=$1
    shift
    "$@" >"$OUT/out.txt" 2>"$OUT/err.txt"
    rc=$?
    if [ $first = 1 ] && [ $rc -ne 0 ] &&
        grep -qiE 'libcuda|cuda driver|no cuda|cuda device|no gpu|CUDA_ERROR_NO_DEVICE|cuInit' "$OUT/err.txt"; then
        echo "SKIP: no GPU: $label could not use one; nothing was measured:"
        sed -n '1,5s/^/    /p' "$OUT/err.txt"
        exit 2
    fi
    first=0
    grep -E '^(RESULT|INFO) ' "$OUT/out.txt" >>"$RAW"
    if [ $rc -ne 0 ]; then
        failed=1
        if grep -q 'check=FAIL' "$OUT/out.txt"; then
            echo "bench-gpu: $label: WRONG RESULT:"
            sed 's/^/    /' "$OUT/out.txt"
        else
            echo "bench-gpu: $label: failed with status $rc:"
            sed -n '1,20s/^/    /p' "$OUT/err.txt"
        fi
    fi
}

for n in $(cat "$OUT/sizes.txt"); do
    echo "bench-gpu: matmul n=$n"
    measure "tsrc matmul n=$n" "$OUT/bin/mm_tsrc_$n" "$BUDGET"
    if [ -x "$OUT/bin/mm_cublas" ]; then
        measure "cuBLAS matmul n=$n" "$OUT/bin/mm_cublas" "$n" "$BUDGET"
    fi
done
echo "bench-gpu: MLP training step"
[ -x "$OUT/bin/mlp_tsrc" ] && measure "tsrc MLP step" "$OUT/bin/mlp_tsrc" "$BUDGET"
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    measure "PyTorch MLP step" "$PY" tools/bench/gpu/py_train_gpu.py "$BUDGET"
else
    echo "bench-gpu: no PyTorch with CUDA under $PY: the MLP has no reference"
fi
rm -f "$OUT/out.txt" "$OUT/err.txt"

# The table: one row per case, a FAIL where a check failed.
awk -v device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" '
function field(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
/^RESULT / {
    kind = field("kind"); impl = field("impl"); n = field("n")
    key = kind " " n
    if (!(key in seen)) { seen[key] = 1; order[++count] = key }
    v = kind == "gpu_matmul" ? field("gflops") : field("ms")
    if (field("check") != "ok") v = v " (FAIL)"
    val[key, impl] = v; num[key, impl] = (field("check") == "ok") ? v + 0 : 0
}
END {
    printf "| case | tsrc | %s | ratio |\n|---|---|---|---|\n", "cuBLAS / PyTorch"
    for (c = 1; c <= count; c++) {
        split(order[c], p, " ")
        ref = p[1] == "gpu_matmul" ? "cublas" : "torch"
        t = ((order[c], "tsrc") in val) ? val[order[c], "tsrc"] : "-"
        r = ((order[c], ref) in val) ? val[order[c], ref] : "-"
        ratio = "-"
        if (num[order[c], "tsrc"] > 0 && num[order[c], ref] > 0)
            ratio = sprintf("%.2f", p[1] == "gpu_matmul" ? num[order[c], "tsrc"] / num[order[c], ref] \
                                                         : num[order[c], ref] / num[order[c], "tsrc"])
        if (p[1] == "gpu_matmul") printf "| fp32 matmul n=%s (GFLOP/s) | %s | %s | %s |\n", p[2], t, r, ratio
        else printf "| MLP 784-256-256-10 SGD step, batch %s (ms) | %s | %s | %s |\n", p[2], t, r, ratio
    }
    if (device != "") printf "\nGPU: %s\n", device
}' "$RAW" >"$OUT/results.txt"
echo
cat "$OUT/results.txt"
grep '^INFO ' "$RAW" | sed 's/^INFO /bench-gpu: /'
echo "bench-gpu: ratio = tsrc's speed / the reference's; RESULT lines in $RAW, table in $OUT/results.txt"
exit $failed
