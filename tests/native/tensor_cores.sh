#!/bin/sh
# tensor_cores.sh TSRC — the GPU schedule runs tests/native/tensor_cores.tsr's bf16 and f16
# contractions on the tensor cores (sched_gpu.c rewrite 6t) for sm_80 and later, and not for
# earlier GPUs; the PTX holds mma.sync of both types and ptxas accepts it for sm_80 and sm_90
# (where ptxas is installed).  tests/run.sh runs the program itself on every executor,
# the GPU schedule's emulation included.  Last line: "N passed, N failed".
set -u
TSRC=${1:-build/tsrc}
PROGRAM=tests/native/tensor_cores.tsr
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
PTXAS=$(command -v ptxas 2>/dev/null || { [ -x /usr/local/cuda/bin/ptxas ] && echo /usr/local/cuda/bin/ptxas; })

count() { grep -c "$1" "$2" || true; }
# sm_80: the four products (c, d, e and the accumulation into acc) on the tensor cores.
if "$TSRC" --target=cuda --emit=sched-ir -o "$TMP/sm80.ir" "$PROGRAM" 2>"$TMP/err"; then
    bf16=$(count "on the tensor cores (mma.m16n8k16.bf16)" "$TMP/sm80.ir")
    f16=$(count "on the tensor cores (mma.m16n8k16.f16)" "$TMP/sm80.ir")
    big=$(count "128x128 cells a GPU block on the tensor cores" "$TMP/sm80.ir")
    if [ "$bf16" = 3 ] && [ "$f16" = 1 ] && [ "$big" = 1 ]; then ok "sm_80: 3 bf16 and 1 f16 products on the tensor cores, one of 128 x 128 blocks"
    else bad "sm_80: $bf16 bf16, $f16 f16, $big of 128 x 128 on the tensor cores (expected 3, 1, 1)"; fi
else
    bad "sm_80: sched-ir"; sed -n '1,5p' "$TMP/err"
fi
# sm_75 has no bf16 mma.sync: the same products as lowered, no IR_MMA.
if "$TSRC" --target=cuda --arch=sm_75 --emit=sched-ir -o "$TMP/sm75.ir" "$PROGRAM" 2>"$TMP/err"; then
    n=$(count "mma\." "$TMP/sm75.ir")
    if [ "$n" = 0 ]; then ok "sm_75: no tensor-core products"; else bad "sm_75: $n tensor-core lines"; fi
else
    bad "sm_75: sched-ir"; sed -n '1,5p' "$TMP/err"
fi
for arch in sm_80 sm_90; do
    if ! "$TSRC" --emit=ptx --arch=$arch -o "$TMP/$arch.ptx" "$PROGRAM" 2>"$TMP/err"; then
        bad "$arch: --emit=ptx"; sed -n '1,5p' "$TMP/err"; continue
    fi
    b=$(count "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "$TMP/$arch.ptx")
    h=$(count "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "$TMP/$arch.ptx")
    if [ "$b" -gt 0 ] && [ "$h" -gt 0 ]; then ok "$arch: the PTX has mma.sync for bf16 ($b) and f16 ($h)"
    else bad "$arch: mma.sync for bf16 $b, f16 $h"; fi
    if [ -z "$PTXAS" ]; then echo "SKIP $arch: no ptxas"; continue; fi
    if "$PTXAS" -arch=$arch "$TMP/$arch.ptx" -o "$TMP/$arch.cubin" >"$TMP/err" 2>&1; then ok "$arch: ptxas accepts it"
    else bad "$arch: ptxas"; sed -n '1,5p' "$TMP/err"; fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
