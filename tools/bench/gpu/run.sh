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
# (bin/mm_cublas N, plain FP32 without TF32), in GFLOP/s; the same in tf32, bf16 and f16 at each
# size of half_sizes.txt (bin/mm_tsrc_T_N against mm_cublas N … T, tensor cores on both sides);
# the MLP training step (784-256-256-10, batch 128, SGD), tsrc (bin/mlp_tsrc) against PyTorch on
# the GPU (py_train_gpu.py), in ms per step; Nn.mlp's Adam step at each batch and width of
# mlps.txt in bf16 against the same step in f32 (both tsrc); the GPT steps of gpts.txt
# (bin/gpu_gpt…, gpt_tsrc.c) against PyTorch eager fp32 on the GPU (py_gpt.py from the same
# initial parameters, the same windows; measured once a configuration: a variant built with
# other tsrc options is set against the PyTorch step of the first), in ms per step, and against themselves with their
# kernels launched one at a time (TSR_CUDA_GRAPHS=0) rather than as CUDA graphs, their ten losses compared on an INFO
# line, and each GPT step's kernels by time (bin/gpu_gpt…_profile, tsrc --profile: a launch
# waits for its kernel) in OUTDIR/KIND_profile.txt, its first lines printed.
# ratio = tsrc's speed / the reference's (above 1: tsrc is faster).  Each program checks
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
. tools/gpu_bin.sh
unpack_bin "$OUT" "$PY" || { echo "run.sh: cannot unpack $OUT/bin.tar.xz" >&2; exit 2; }
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
    grep -E '^(RESULT|INFO) ' "$OUT/out.txt" | sed "s/ impl=tsrc / impl=${impl_as:-tsrc} /" >>"$RAW"
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
for n in $(cat "$OUT/half_sizes.txt" 2>/dev/null); do
    for type in tf32 bf16 f16; do
        echo "bench-gpu: $type matmul n=$n"
        [ -x "$OUT/bin/mm_tsrc_${type}_$n" ] && measure "tsrc $type matmul n=$n" "$OUT/bin/mm_tsrc_${type}_$n" "$BUDGET"
        [ -x "$OUT/bin/mm_cublas" ] && measure "cuBLAS $type matmul n=$n" "$OUT/bin/mm_cublas" "$n" "$BUDGET" 1000 "$type"
    done
done
have_torch=no
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && have_torch=yes
echo "bench-gpu: MLP training step"
[ -x "$OUT/bin/mlp_tsrc" ] && measure "tsrc MLP step" "$OUT/bin/mlp_tsrc" "$BUDGET"
if [ $have_torch = yes ]; then
    measure "PyTorch MLP step" "$PY" tools/bench/gpu/py_train_gpu.py "$BUDGET"
else
    echo "bench-gpu: no PyTorch with CUDA under $PY: the MLP and the GPT have no reference"
fi
while read -r batch hidden; do
    for type in f32 bf16; do
        echo "bench-gpu: Nn.mlp Adam step, batch $batch, width $hidden, $type"
        exe=$OUT/bin/nn_mlp_${batch}_${hidden}_$type
        [ -x "$exe" ] && measure "tsrc Nn.mlp $batch $hidden $type" "$exe" "$BUDGET"
    done
done <"$OUT/mlps.txt"
# The GPT steps' kernels by time (--profile: each launch waits for its kernel), a file each,
# before the GPT timings: on a GPU lent for minutes, the tables are what tell where time goes.
while read -r kind rest; do
    [ -x "$OUT/bin/${kind}_profile" ] || continue
    echo "bench-gpu: $kind's kernels by time (tsrc --profile, the timed steps after ten first ones)"
    TSR_PROFILE_ALL=1 "$OUT/bin/${kind}_profile" 1 20 "$OUT/${kind}_profile_init.npz" >/dev/null \
        2>"$OUT/${kind}_profile.txt" || { echo "bench-gpu: the profiled $kind failed"; failed=1; }
    head -n 25 "$OUT/${kind}_profile.txt" | sed 's/^/    /'
done <"$OUT/gpts.txt"
measured_configs=""   # "CONFIG=KIND …": PyTorch measured once a configuration, for its variants too
while read -r kind vocab c nh tt bb ll; do
    echo "bench-gpu: GPT step $kind (L=$ll, C=$c, NH=$nh, T=$tt, B=$bb, V=$vocab, AdamW)"
    measure "tsrc $kind" "$OUT/bin/$kind" "$BUDGET" 200 "$OUT/${kind}_init.npz"
    impl_as=tsrc_one_at_a_time measure "tsrc $kind, kernels launched one at a time" \
        env TSR_CUDA_GRAPHS=0 "$OUT/bin/$kind" "$BUDGET" 200 "$OUT/${kind}_init.npz"
    config=$vocab-$c-$nh-$tt-$bb-$ll
    earlier=$(printf '%s\n' $measured_configs | sed -n "s/^$config=//p" | head -n 1)
    if [ -n "$earlier" ]; then # a variant of a configuration measured: the same PyTorch step
        grep "^RESULT kind=$earlier impl=torch " "$RAW" | sed "s/^RESULT kind=$earlier /RESULT kind=$kind /" >>"$RAW.variant"
        cat "$RAW.variant" >>"$RAW" && rm -f "$RAW.variant"
    elif [ $have_torch = yes ] && [ -f "$OUT/${kind}_init.npz" ]; then
        measure "PyTorch $kind" env BENCH_GPT_DEVICE=cuda BENCH_BUDGET="$BUDGET" \
            "$PY" tools/bench/py_gpt.py 1 "$OUT/${kind}_init.npz" "$kind" "$vocab" "$c" "$nh" "$tt" "$bb" "$ll"
        grep -q "^RESULT kind=$kind impl=torch " "$RAW" && measured_configs="$measured_configs $config=$kind"
    fi
done <"$OUT/gpts.txt"
rm -f "$OUT/out.txt" "$OUT/err.txt"

# The GPT losses: tsrc's ten against PyTorch's, the largest relative difference.
awk '/^RESULT / && / losses=/ {
    kind = ""; impl = ""; losses = ""
    for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "kind") kind = kv[2]; if (kv[1] == "impl") impl = kv[2]
                                if (kv[1] == "losses") losses = kv[2] }
    l[kind, impl] = losses; kinds[kind] = 1
}
END {
    for (k in kinds) if ((k, "tsrc") in l && (k, "torch") in l) {
        na = split(l[k, "tsrc"], a, ","); split(l[k, "torch"], b, ","); worst = 0
        for (i = 1; i <= na; i++) { d = a[i] - b[i]; if (d < 0) d = -d; d /= (b[i] < 0 ? -b[i] : b[i]); if (d > worst) worst = d }
        printf "INFO %s: tsrc losses %s, PyTorch %s: they differ by at most %.2g relative\n", k, a[1] "…" a[na], b[1] "…" b[na], worst
    }
}' "$RAW" >>"$RAW"

# The table: one row per case, a FAIL where a check failed.  A matmul's figure is GFLOP/s against
# cuBLAS's; a step's is ms against PyTorch's, except a bf16 Nn.mlp step's, which is set against
# the f32 step of the same size (both tsrc).
awk -v device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" '
function field(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
function matmul(kind) { return kind ~ /^gpu_matmul/ }
/^RESULT / {
    kind = field("kind"); impl = field("impl"); n = field("n")
    key = kind " " n
    if (!(key in seen)) { seen[key] = 1; order[++count] = key }
    v = matmul(kind) ? field("gflops") : field("ms") != "" ? field("ms") : sprintf("%.4f", field("best_s") * 1e3)
    if (field("check") != "ok") v = v " (FAIL)"
    val[key, impl] = v; num[key, impl] = (field("check") == "ok") ? v + 0 : 0
}
END {
    printf "| case | tsrc | reference | ratio |\n|---|---|---|---|\n"
    for (c = 1; c <= count; c++) {
        split(order[c], p, " ")
        kind = p[1]; n = p[2]; t = ((order[c], "tsrc") in val) ? val[order[c], "tsrc"] : "-"
        if (kind ~ /^gpu_nn_mlp_.*_f32$/) continue
        if (kind ~ /^gpu_nn_mlp_.*_bf16$/) {
            ref_key = substr(kind, 1, length(kind) - 4) "f32 " n; ref_impl = "tsrc"
            width = kind; sub(/^gpu_nn_mlp_/, "", width); sub(/_bf16$/, "", width)
            label = sprintf("Nn.mlp 784-%s-%s-10 Adam step, batch %s: bf16 against f32 (ms)", width, width, n)
        } else {
            ref_key = order[c]; ref_impl = matmul(kind) ? "cublas" : "torch"
            if (matmul(kind)) { type = kind; sub(/^gpu_matmul_?/, "", type); label = sprintf("%s matmul n=%s (GFLOP/s)", type == "" ? "fp32" : type, n) }
            else if (kind == "gpu_mlp") label = sprintf("MLP 784-256-256-10 SGD step, batch %s (ms)", n)
            else label = sprintf("%s step, batch %s, against PyTorch eager fp32 (ms)", kind, n)
        }
        if ((order[c], "tsrc_one_at_a_time") in val) { # the same step without CUDA graphs
            r = val[order[c], "tsrc_one_at_a_time"]; ratio = "-"
            if (num[order[c], "tsrc"] > 0 && num[order[c], "tsrc_one_at_a_time"] > 0)
                ratio = sprintf("%.2f", num[order[c], "tsrc_one_at_a_time"] / num[order[c], "tsrc"])
            printf "| %s step, batch %s: CUDA graphs against kernels launched one at a time (ms) | %s | %s | %s |\n", kind, n, t, r, ratio
        }
        r = ((ref_key, ref_impl) in val) ? val[ref_key, ref_impl] : "-"
        ratio = "-"
        if (num[order[c], "tsrc"] > 0 && num[ref_key, ref_impl] > 0)
            ratio = sprintf("%.2f", matmul(kind) ? num[order[c], "tsrc"] / num[ref_key, ref_impl] \
                                                 : num[ref_key, ref_impl] / num[order[c], "tsrc"])
        printf "| %s | %s | %s | %s |\n", label, t, r, ratio
    }
    if (device != "") printf "\nGPU: %s\n", device
}' "$RAW" >"$OUT/results.txt"
echo
cat "$OUT/results.txt"
grep '^INFO ' "$RAW" | sed 's/^INFO /bench-gpu: /'
echo "bench-gpu: ratio = tsrc's speed / the reference's; RESULT lines in $RAW, table in $OUT/results.txt"
exit $failed
