#!/bin/sh
# tensor_cores.sh TSRC — the GPU schedule runs tests/native/tensor_cores.tsr's bf16 and f16
# contractions, and with --tf32 tests/native/tensor_cores_tf32.tsr's f32 ones, on the tensor
# cores (sched_mma.c, rewrite 6t) for sm_80 and later, and neither for earlier GPUs nor f32
# without --tf32; the PTX holds mma.sync of each type and ptxas accepts it for sm_80 and sm_90
# (where ptxas is installed), its fragments loaded with ldmatrix; on sm_90a (below) bf16, f16 and
# tf32 products run on warpgroups' wgmma.  tests/run.sh runs the programs themselves on every executor,
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
# expect WANT GOT PASSING WHAT: PASS PASSING where the counts GOT (a list) are WANT, else FAIL
# saying WHAT and the counts.
expect() { if [ "$2" = "$1" ]; then ok "$3"; else bad "$4: $2 (expected $1)"; fi; }
# sched_ir NAME ARGS…: the GPU schedule of ARGS into $TMP/NAME.ir; a failure counted and shown.
sched_ir() {
    name=$1
    shift
    if "$TSRC" --target=cuda --emit=sched-ir -o "$TMP/$name.ir" "$@" 2>"$TMP/err"; then return 0; fi
    bad "$name: sched-ir"; sed -n '1,5p' "$TMP/err"
    return 1
}
# sm_80: the four products (c, d, e and the accumulation into acc) on the tensor cores.
if sched_ir sm80 "$PROGRAM"; then
    bf16=$(count "on the tensor cores (mma.m16n8k16.bf16)" "$TMP/sm80.ir")
    f16=$(count "on the tensor cores (mma.m16n8k16.f16)" "$TMP/sm80.ir")
    big=$(count "128x128 cells a GPU block on the tensor cores" "$TMP/sm80.ir")
    if [ "$bf16" = 3 ] && [ "$f16" = 1 ] && [ "$big" = 1 ]; then ok "sm_80: 3 bf16 and 1 f16 products on the tensor cores, one of 128 x 128 blocks"
    else bad "sm_80: $bf16 bf16, $f16 f16, $big of 128 x 128 on the tensor cores (expected 3, 1, 1)"; fi
fi
# Panel sizes (tensor_cores_panels*.tsr): bf16 and f16 products copy panels of 32 steps
# asynchronously, as many in shared memory as the reduction has up to 3 (2 for c, 1 for d and
# e; 3 for c, d and h of tensor_cores_pipeline.tsr); tf32's go through registers, 32 steps
# (128 bytes of a row) each.
if sched_ir panels tests/native/tensor_cores_panels.tsr && sched_ir panels_tf32 --tf32 tests/native/tensor_cores_panels_tf32.tsr &&
   sched_ir pipe_panels --gpu-blocks=1 tests/native/tensor_cores_pipeline.tsr; then
    p2=$(count "on the tensor cores (mma.m16n8k16.*panels of 32 steps copied asynchronously, 2 in shared memory" "$TMP/panels.ir")
    p1=$(count "on the tensor cores (mma.m16n8k16.*panels of 32 steps copied asynchronously, 1 in shared memory" "$TMP/panels.ir")
    p3=$(count "on the tensor cores (mma.m16n8k16.*panels of 32 steps copied asynchronously, 3 in shared memory" "$TMP/pipe_panels.ir")
    t32=$(count "on the tensor cores (mma.m16n8k8.tf32).*panels of 32 steps$" "$TMP/panels_tf32.ir")
    expect "1 2 3 3" "$p2 $p1 $p3 $t32" "panels: bf16/f16 of 32 steps copied asynchronously (2 in shared memory 1, 1 in shared memory 2, 3 in shared memory 3), tf32 of 32 through registers (3)" \
        "panels: bf16/f16 with 2, 1 and 3 panels in shared memory, tf32 of 32 steps"
fi
# Asynchronous copies (tensor_cores_pipeline.tsr, small products on few blocks): the GPU
# schedule, run by the reference executor, prints the reference's bits, with each copy landing
# at once and with each landing as late as the GPU may (TSR_INTERP_LATE_COPIES=1: at the
# barrier that waits for it; a wait for too few groups then reads a stage before its copy
# lands, and a copy with no barrier after the block's last read of its stage is reported);
# split across blocks (--reassociate) it adds the parts in another order, so its bf16 cells
# may differ by one unit of their last place (1/128 relative).  The IR holds the copies and the
# barriers that wait for them: one group in flight while the pipeline runs, none for the last
# panel of each product.
PIPE=tests/native/tensor_cores_pipeline.tsr
PYTHON=${PYTHON:-python3}
if TSR_PRINT_EXACT=1 "$TSRC" --run --interp "$PIPE" >"$TMP/pipe_ref.out" 2>"$TMP/err"; then
    for mode in "--gpu-blocks=1" "--reassociate --gpu-blocks=8"; do
        sched_ir pipe $mode "$PIPE" || continue
        copies=$(count "async_copy" "$TMP/pipe.ir")
        waits=$(count "barrier after copies, 1 group in flight" "$TMP/pipe.ir")
        last=$(count "barrier after copies, 0 groups in flight" "$TMP/pipe.ir")
        if [ "$copies" -gt 0 ] && [ "$waits" -gt 0 ] && [ "$last" -ge 3 ]; then ok "$mode: panels copied asynchronously ($copies copy loops, $waits barriers with one group in flight, $last with none)"
        else bad "$mode: $copies copy loops, $waits barriers with one group in flight, $last with none"; fi
        for late in 0 1; do
            how=$([ $late = 1 ] && echo "copies landing late" || echo "copies landing at once")
            if ! TSR_INTERP_LATE_COPIES=$late TSR_PRINT_EXACT=1 "$TSRC" --run --interp --target=cuda $mode "$PIPE" >"$TMP/pipe_gpu.out" 2>"$TMP/err"; then
                bad "$mode, $how: the GPU schedule does not run"; sed -n '1,5p' "$TMP/err"
            elif [ "$mode" = --gpu-blocks=1 ] && cmp -s "$TMP/pipe_ref.out" "$TMP/pipe_gpu.out"; then ok "$mode, $how: the GPU schedule prints the reference's bits"
            elif [ "$mode" != --gpu-blocks=1 ] && grep -q "reduction split in 8 parts" "$TMP/pipe.ir" &&
                 "$PYTHON" tests/gpu/compare.py --rel-tol 0.008 "$TMP/pipe_ref.out" "$TMP/pipe_gpu.out" >"$TMP/diff" 2>&1; then
                ok "$mode, $how: h split in 8 parts, within a bf16 unit of the reference"
            else bad "$mode, $how: the GPU schedule prints differently"; sed -n '1,5p' "$TMP/diff" 2>/dev/null; fi
        done
    done
    for arch in sm_80 sm_90; do
        [ -n "$PTXAS" ] || { echo "SKIP pipeline PTX: no ptxas"; break; }
        if "$TSRC" --emit=ptx --arch=$arch --gpu-blocks=1 -o "$TMP/pipe.ptx" "$PIPE" 2>"$TMP/err" &&
           "$PTXAS" -arch=$arch "$TMP/pipe.ptx" -o "$TMP/pipe.cubin" >"$TMP/err" 2>&1 &&
           [ "$(count "cp.async.commit_group" "$TMP/pipe.ptx")" -gt 0 ] && [ "$(count "cp.async.wait_group" "$TMP/pipe.ptx")" -gt 0 ]; then
            ok "$arch: the pipeline's PTX has cp.async, its groups and waits, and ptxas accepts it"
        else bad "$arch: the pipeline's PTX"; sed -n '1,5p' "$TMP/err"; fi
    done
else
    bad "tensor_cores_pipeline.tsr: the reference executor"; sed -n '1,5p' "$TMP/err"
fi
# tensor_cores_panels.tsr's GPU schedule with copies landing late prints what it prints with
# copies landing at once (tests/run.sh compares that with the golden).
if TSR_PRINT_EXACT=1 "$TSRC" --run --interp --target=cuda tests/native/tensor_cores_panels.tsr >"$TMP/panels_now.out" 2>"$TMP/err" &&
   TSR_INTERP_LATE_COPIES=1 TSR_PRINT_EXACT=1 "$TSRC" --run --interp --target=cuda tests/native/tensor_cores_panels.tsr >"$TMP/panels_late.out" 2>>"$TMP/err" &&
   cmp -s "$TMP/panels_now.out" "$TMP/panels_late.out"; then ok "tensor_cores_panels.tsr: the same bits with copies landing late"
else bad "tensor_cores_panels.tsr with copies landing late"; sed -n '1,5p' "$TMP/err"; fi
# sm_90a (tests/native/tensor_cores_wgmma.tsr, tensor_cores_panels.tsr): products whose panels
# are copied asynchronously run on wgmma (sched_mma.c): tiles of 128 x 256 on two
# warpgroups where J allows, else 128- and 64-wide tiles on one, operands along k and along the
# tile, every panel swizzled (64 steps a panel where the reduction allows: 128-byte rows along
# k; else 32: 64-byte rows); their GPU schedule, run by the reference
# executor (which reads each panel by its core-matrix layout and places each accumulator by
# wgmma's), prints the reference's bits with copies landing at once and late; the PTX has
# wgmma.mma_async with its fence, commit and wait, and ptxas accepts it for sm_90a.  sm_90
# (no "a") keeps mma.sync.
WG=tests/native/tensor_cores_wgmma.tsr
if sched_ir wg90a --arch=sm_90a --gpu-blocks=1 "$WG" && sched_ir wg90 --arch=sm_90 --gpu-blocks=1 "$WG" &&
   sched_ir panels90a --arch=sm_90a tests/native/tensor_cores_panels.tsr; then
    w128=$(count "128x128 cells a GPU block on the tensor cores (wgmma.m64n128k16.*one warpgroup" "$TMP/wg90a.ir")
    wide=$(count "128x256 cells a GPU block on the tensor cores (wgmma.m64n256k16.*2 warpgroups of 64x256" "$TMP/wg90a.ir")
    w64=$(count "64x64 cells a GPU block on the tensor cores (wgmma.m64n64k16.*one warpgroup" "$TMP/wg90a.ir")
    wp=$(count "(wgmma.m64n64k16" "$TMP/panels90a.ir")
    plain=$(count "wgmma\.m64" "$TMP/wg90.ir")
    expect "2 1 1 3 0" "$wide $w128 $w64 $wp $plain" "sm_90a: wgmma for 2 products in wide tiles of 128 x 256 (two warpgroups), 1 of 128 x 128 and 1 of 64 (tensor_cores_wgmma.tsr), 3 of 64 (tensor_cores_panels.tsr); none for sm_90" \
        "sm_90a: wgmma for wide, 128-wide and 64-wide products, in tensor_cores_panels.tsr, wgmma lines for sm_90"
    # Over more than 2 panels (c's 3, g's 10, e's 4) each turn's products run on into the next: 4
    # stages, copies two ahead; g's 10 turns are a loop of 4 (2 rounds) and 2 more, 9 of the 12
    # statements left running.
    running=$(count "each panel's products running on into the next turn" "$TMP/wg90a.ir")
    stages=$(count "4 in shared memory, each panel's products running on" "$TMP/wg90a.ir")
    left=$(awk '/# einsum/{p=0} /g =:\+ gp/{p=1} /^$/{p=0} p' "$TMP/wg90a.ir" | grep -c "warpgroups*, left running")
    narrow=$(count "64x256 cells a GPU block on the tensor cores (wgmma.m64n256k16.f16), one warpgroup" "$TMP/wg90a.ir")
    expect "3 3 5 1" "$running $stages $left $narrow" "sm_90a: products left running into the next turn in 3 kernels of 4 stages, 5 wgmma statements of g's left running (4 in its loop, 1 after); e in a wide tile of 64 x 256 on one warpgroup" \
        "sm_90a: products left running (kernels, stages, g's statements)"
    # Panels of 64 steps for d, g and e (reductions of 64, 640 and 256), 32 for c (96) and f
    # (32); every operand swizzled: along k by its rows' bytes (c's and f's A 64, d's and g's B
    # 128), along the tile by 128.
    p64=$(count "(wgmma.*panels of 64 steps" "$TMP/wg90a.ir")
    p32=$(count "(wgmma.*panels of 32 steps" "$TMP/wg90a.ir")
    k64=$(grep -o "k-major swizzled 64B" "$TMP/wg90a.ir" | wc -l)
    k128=$(grep -o "k-major swizzled 128B" "$TMP/wg90a.ir" | wc -l)
    wgs=$(grep -c "^ *wgmma\.m.* += " "$TMP/wg90a.ir")
    both=$(grep "^ *wgmma\.m.* += " "$TMP/wg90a.ir" | grep -c "swizzled.*swizzled")
    expect "3 2 4 7 15 15" "$p64 $p32 $k64 $k128 $wgs $both" \
        "sm_90a: panels of 64 steps for 3 products and of 32 for 2; both operands of all 15 wgmma statements swizzled (K-major ones by their rows' 64 or 128 bytes: 4 and 7)" \
        "sm_90a: products in panels of 64 and 32 steps, K-major operands swizzled by 64 and 128 bytes, wgmma statements, of them with both operands swizzled"
fi
for prog in "$WG" tests/native/tensor_cores_panels.tsr; do
    if ! TSR_PRINT_EXACT=1 "$TSRC" --run --interp "$prog" >"$TMP/wg_ref.out" 2>"$TMP/err"; then
        bad "$prog: the reference executor"; sed -n '1,5p' "$TMP/err"; continue
    fi
    for late in 0 1; do
        if TSR_INTERP_LATE_COPIES=$late TSR_PRINT_EXACT=1 "$TSRC" --run --interp --target=cuda --arch=sm_90a --gpu-blocks=1 "$prog" \
               >"$TMP/wg_gpu.out" 2>"$TMP/err" && cmp -s "$TMP/wg_ref.out" "$TMP/wg_gpu.out"; then
            ok "sm_90a $(basename "$prog") (copies landing $([ $late = 1 ] && echo late || echo at once)): the warpgroup schedule prints the reference's bits"
        else bad "sm_90a $(basename "$prog"), TSR_INTERP_LATE_COPIES=$late: the warpgroup schedule prints differently"; sed -n '1,5p' "$TMP/err"; fi
    done
done
if "$TSRC" --emit=ptx --arch=sm_90a --gpu-blocks=1 -o "$TMP/wg.ptx" "$WG" 2>"$TMP/err"; then
    m=$(count "wgmma.mma_async.sync.aligned.m64n128k16.f32" "$TMP/wg.ptx")
    m256=$(count "wgmma.mma_async.sync.aligned.m64n256k16.f32" "$TMP/wg.ptx")
    f=$(count "wgmma.fence.sync.aligned" "$TMP/wg.ptx")
    w=$(count "wgmma.wait_group.sync.aligned 0" "$TMP/wg.ptx")
    w1=$(count "wgmma.wait_group.sync.aligned 1" "$TMP/wg.ptx")
    old=$(count "mma.sync\|ldmatrix" "$TMP/wg.ptx")
    if [ "$m" -gt 0 ] && [ "$m256" -gt 0 ] && [ "$f" -gt 0 ] && [ "$w1" -gt 0 ] && [ $((w + w1)) = "$f" ] && [ "$old" = 0 ]; then
        ok "sm_90a: the PTX has wgmma.mma_async m64n128k16 ($m) and m64n256k16 ($m256), each statement fenced and awaited ($f: $w1 leaving one group running), no mma.sync"
    else bad "sm_90a: $m wgmma m64n128k16, $m256 m64n256k16, $f fences, $w waits for all, $w1 for all but one, $old mma.sync/ldmatrix"; fi
    if [ -z "$PTXAS" ]; then echo "SKIP sm_90a: no ptxas"
    elif "$PTXAS" -arch=sm_90a "$TMP/wg.ptx" -o "$TMP/wg.cubin" >"$TMP/err" 2>&1 && ! grep -qi "serialized" "$TMP/err"; then ok "sm_90a: ptxas accepts the warpgroup kernels (no serialized wgmma)"
    else bad "sm_90a: ptxas"; sed -n '1,5p' "$TMP/err"; fi
else bad "sm_90a: --emit=ptx"; sed -n '1,5p' "$TMP/err"; fi
# tensor_cores_strided.tsr: operands read along strided axes, whose runs no copy can prove
# aligned, take the panels through registers, and their fragments still come from ldmatrix,
# .trans for both (each laid out along the tile).
if sched_ir strided --gpu-blocks=1 tests/native/tensor_cores_strided.tsr &&
   "$TSRC" --emit=ptx --gpu-blocks=1 -o "$TMP/strided.ptx" tests/native/tensor_cores_strided.tsr 2>"$TMP/err"; then
    through=$(count "on the tensor cores (mma.m16n8k16.*panels of 32 steps$" "$TMP/strided.ir")
    turned=$(count "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" "$TMP/strided.ptx")
    if [ "$through" = 2 ] && [ "$turned" -gt 0 ]; then ok "strided operands: both products' panels through registers, fragments by ldmatrix.trans ($turned)"
    else bad "strided operands: $through products through registers, $turned ldmatrix.trans (expected 2, some)"; fi
else bad "tensor_cores_strided.tsr: its schedule or PTX"; sed -n '1,5p' "$TMP/err"; fi
# sm_75 has no bf16 mma.sync: the same products as lowered, no IR_MMA.
if sched_ir sm75 --arch=sm_75 "$PROGRAM"; then
    n=$(count "mma\." "$TMP/sm75.ir")
    if [ "$n" = 0 ]; then ok "sm_75: no tensor-core products"; else bad "sm_75: $n tensor-core lines"; fi
fi
# tf32: the four f32 products with --tf32, none without it.
TF32=tests/native/tensor_cores_tf32.tsr
if sched_ir tf32 --tf32 "$TF32" && sched_ir f32 "$TF32"; then
    n=$(count "on the tensor cores (mma.m16n8k8.tf32)" "$TMP/tf32.ir")
    big=$(count "128x128 cells a GPU block on the tensor cores" "$TMP/tf32.ir")
    plain=$(count "mma\." "$TMP/f32.ir")
    if [ "$n" = 4 ] && [ "$big" = 1 ] && [ "$plain" = 0 ]; then ok "--tf32: 4 f32 products on the tensor cores, one of 128 x 128 blocks; none without --tf32"
    else bad "--tf32: $n tf32 products ($big of 128 x 128), $plain tensor-core lines without --tf32 (expected 4, 1, 0)"; fi
fi
for arch in sm_80 sm_90; do
    if ! "$TSRC" --tf32 --emit=ptx --arch=$arch -o "$TMP/tf32_$arch.ptx" "$TF32" 2>"$TMP/err"; then
        bad "$arch: --tf32 --emit=ptx"; sed -n '1,5p' "$TMP/err"; continue
    fi
    t=$(count "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" "$TMP/tf32_$arch.ptx")
    # tf32's panels laid out along k load their f32 fragments with ldmatrix (no .trans: it
    # would split the cells).
    l=$(count "ldmatrix.sync.aligned.m8n8.x4.shared.b16" "$TMP/tf32_$arch.ptx")
    lt=$(count "ldmatrix.*trans" "$TMP/tf32_$arch.ptx")
    if [ "$t" -gt 0 ] && [ "$l" -gt 0 ] && [ "$lt" = 0 ]; then ok "$arch: the PTX has mma.sync for tf32 ($t), ldmatrix.x4 ($l) and no .trans"
    else bad "$arch: tf32 mma.sync $t, ldmatrix.x4 $l, .trans $lt (expected some, some, 0)"; fi
    if [ -z "$PTXAS" ]; then echo "SKIP $arch: no ptxas"; continue; fi
    if "$PTXAS" -arch=$arch "$TMP/tf32_$arch.ptx" -o "$TMP/$arch.cubin" >"$TMP/err" 2>&1; then ok "$arch: ptxas accepts the tf32 PTX"
    else bad "$arch: ptxas (tf32)"; sed -n '1,5p' "$TMP/err"; fi
done
# tf32 on sm_90a (tests/native/tensor_cores_wgmma_tf32.tsr): products whose reductions take
# panels of 32 steps run on wgmma.m64nNk8.tf32 over K-major panels of 32 steps (rows of 128
# bytes) copied asynchronously (wgmma reads tf32 K-major alone): an operand laid out along k
# has its panels copied from its own cells and rounded in shared memory each turn (a phase of
# to_tf32 over the stage's cells, then a barrier), any other is copied, rounded, into a K-major
# buffer first (transposed through shared memory in tiles of 32 x 32, or, past three axes, by
# a pointwise nest).  c, acc and acc2 in wide tiles of 128 x 256, their 3 panels' products
# left running into the next turn, A rounded in shared memory, B c's one transposed copy
# (acc and acc2 read it: nothing between writes b); d, e, f, r and s in tiles of 64: r reads
# both operands in place, f neither (6 copies, 5 transposed; 7 products round A or B in
# shared memory, in 17 turns).  sm_90 keeps mma.sync and copies nothing.  The PTX has
# wgmma.mma_async.m64n256k8.f32.tf32.tf32 and m64n64k8 (no transposition flags) and ptxas
# accepts it for sm_90a.  (tests/run.sh runs the sm_90a schedule on the reference executor,
# copies landing at once and late, races reported.)
WT=tests/native/tensor_cores_wgmma_tf32.tsr
if sched_ir wt90a --tf32 --arch=sm_90a --gpu-blocks=1 "$WT" && sched_ir wt90 --tf32 --arch=sm_90 --gpu-blocks=1 "$WT"; then
    wide=$(count "128x256 cells a GPU block on the tensor cores (wgmma.m64n256k8.tf32, A rounded in shared memory, B copied K-major), 2 warpgroups.*running on" "$TMP/wt90a.ir")
    narrow=$(count "64x64 cells a GPU block on the tensor cores (wgmma.m64n64k8.tf32, A [A-Za-z -]*, B [A-Za-z -]*), one warpgroup" "$TMP/wt90a.ir")
    copies=$(count "rounded to tf32 and copied K-major for" "$TMP/wt90a.ir")
    turned=$(count "rounded to tf32 and copied K-major for.*transposed through shared memory" "$TMP/wt90a.ir")
    rounding=$(count "on the tensor cores (wgmma.*rounded in shared memory" "$TMP/wt90a.ir")
    both=$(count "A rounded in shared memory, B rounded in shared memory" "$TMP/wt90a.ir")
    turns=$(count "= to_tf32([ab]_panel" "$TMP/wt90a.ir")
    fenced=$(count "barrier, shared stores fenced for the async proxy" "$TMP/wt90a.ir")
    k128=$(grep "^ *wgmma\.m.* += " "$TMP/wt90a.ir" | grep -c "k-major swizzled 128B.*k-major swizzled 128B")
    plain=$(count "wgmma\.m64\|copied K-major\|rounded in shared" "$TMP/wt90.ir")
    mma=$(count "on the tensor cores (mma.m16n8k8.tf32)" "$TMP/wt90.ir")
    expect "3 5 6 5 7 1 17 15 0 8" "$wide $narrow $copies $turned $rounding $both $turns $fenced $plain $mma" \
        "sm_90a --tf32: 3 products in wide tiles (left running) and 5 of 64 on wgmma.tf32, over 6 K-major copies (5 transposed), 7 rounding in shared memory (one both operands: 17 panels rounded in 15 turns, each turn's stores fenced for the async proxy before its barrier); sm_90: 8 on mma.sync, no copies" \
        "sm_90a --tf32: wide and 64-wide wgmma products, copies, transposed copies, products, panels and fenced turns rounding in shared memory; sm_90's wgmma lines and copies, mma.sync products"
    if [ "$k128" -gt 0 ] && [ "$k128" = "$(grep -c "^ *wgmma\.m.* += " "$TMP/wt90a.ir")" ]; then ok "sm_90a --tf32: every wgmma statement ($k128) reads both panels K-major in swizzled rows of 128 bytes"
    else bad "sm_90a --tf32: $k128 wgmma statements with both panels K-major in rows of 128 bytes, of $(grep -c "^ *wgmma\.m.* += " "$TMP/wt90a.ir")"; fi
fi
if "$TSRC" --tf32 --emit=ptx --arch=sm_90a --gpu-blocks=1 -o "$TMP/wt.ptx" "$WT" 2>"$TMP/err"; then
    m256=$(count "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {.*}, %rd[0-9]*, %rd[0-9]*, p, 1, 1;" "$TMP/wt.ptx")
    m64=$(count "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {.*}, %rd[0-9]*, %rd[0-9]*, p, 1, 1;" "$TMP/wt.ptx")
    old=$(count "mma.sync\|ldmatrix" "$TMP/wt.ptx")
    if [ "$m256" -gt 0 ] && [ "$m64" -gt 0 ] && [ "$old" = 0 ]; then ok "sm_90a --tf32: the PTX has wgmma.mma_async m64n256k8 ($m256) and m64n64k8 ($m64) on tf32, no mma.sync"
    else bad "sm_90a --tf32: $m256 wgmma m64n256k8.tf32, $m64 m64n64k8.tf32, $old mma.sync/ldmatrix"; fi
    # Each turn's rounded stores: fence.proxy.async (the writers' side) right before its bar.sync.
    fences=$(awk '/^[ \t]*\/\//{next} /bar\.sync/{ if (prev ~ /fence\.proxy\.async\.shared::cta;/) n++ } {prev=$0} END{print n+0}' "$TMP/wt.ptx")
    expect 15 "$fences" "sm_90a --tf32: the 15 rounding turns' barriers each follow a fence.proxy.async" "sm_90a --tf32: bar.sync right after fence.proxy.async"
    if [ -z "$PTXAS" ]; then echo "SKIP sm_90a --tf32: no ptxas"
    elif "$PTXAS" -arch=sm_90a "$TMP/wt.ptx" -o "$TMP/wt.cubin" >"$TMP/err" 2>&1 && ! grep -qi "serialized" "$TMP/err"; then ok "sm_90a --tf32: ptxas accepts the warpgroup kernels and the copies"
    else bad "sm_90a --tf32: ptxas"; sed -n '1,5p' "$TMP/err"; fi
else bad "sm_90a --tf32: --emit=ptx"; sed -n '1,5p' "$TMP/err"; fi
# Long reductions rounded in shared memory keep within the registers: wide tiles of 128 x 256
# whose operands are both read in place, over 1024 steps (z) and over 3 x 256 (f, an operand of
# three axes whose copies' addresses are sums of terms, cg_llvm.c), and the bench's 4096²
# product (A in place); ptxas spilled up to 1340 bytes in them before each rounded cell's
# address took its whole periods after the swizzle and the copies' sources were one sum.
if [ -n "$PTXAS" ]; then
    cat >"$TMP/long.tsr" <<'TSR'
data gs = range ~o:[3; 128; 256]
data hs = range ~o:[3; 256; 256]
data xs = range ~o:[128; 1024]
data ys = range ~o:[256; 1024]
data ps = range ~o:[4096; 4096]
data qs = range ~o:[4096; 4096]
let%op g = sin (gs *. 0.031)
let%op h = cos (hs *. 0.017)
let%op x = sin (xs *. 0.013)
let%op y = cos (ys *. 0.007)
let%op p = sin (ps *. 0.013)
let%op q = cos (qs *. 0.007)
let%op f = g +* "s, i, t; s, j, t => i, j" h
let%op z = x +* "i, k; j, k => i, j" y
let%op c = p +* "i, k; k, j => i, j" q
routine products = g.forward; h.forward; x.forward; y.forward; p.forward; q.forward; f.forward; z.forward; c.forward
main = run products; print f; print z
TSR
    if sched_ir long --tf32 --arch=sm_90a --gpu-blocks=1 "$TMP/long.tsr" &&
       "$TSRC" --tf32 --emit=ptx --arch=sm_90a --gpu-blocks=1 -o "$TMP/long.ptx" "$TMP/long.tsr" 2>"$TMP/err" &&
       "$PTXAS" -arch=sm_90a -v "$TMP/long.ptx" -o "$TMP/long.cubin" >"$TMP/ptxas.txt" 2>&1; then
        wide=$(count "128x256 cells a GPU block on the tensor cores (wgmma.m64n256k8.tf32, A rounded in shared memory, B" "$TMP/long.ir")
        spilled=$(grep -c "[1-9][0-9]* bytes spill stores" "$TMP/ptxas.txt" || true)
        expect "3 0" "$wide $spilled" "sm_90a --tf32: 3 long products rounding in shared memory in wide tiles, no kernel spills" \
            "sm_90a --tf32: wide tiles rounding in shared memory, kernels that spill"
    else bad "sm_90a --tf32: the long products' PTX"; sed -n '1,5p' "$TMP/err"; fi
fi
for arch in sm_80 sm_90; do
    if ! "$TSRC" --emit=ptx --arch=$arch -o "$TMP/$arch.ptx" "$PROGRAM" 2>"$TMP/err"; then
        bad "$arch: --emit=ptx"; sed -n '1,5p' "$TMP/err"; continue
    fi
    b=$(count "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "$TMP/$arch.ptx")
    h=$(count "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "$TMP/$arch.ptx")
    if [ "$b" -gt 0 ] && [ "$h" -gt 0 ]; then ok "$arch: the PTX has mma.sync for bf16 ($b) and f16 ($h)"
    else bad "$arch: mma.sync for bf16 $b, f16 $h"; fi
    # The tensor-core kernels move runs of cells (sched_mma.c, rewrite 6t): each fetch is one
    # load of 2 to 8 neighbouring cells of the operand's contiguous axis, each spill one store
    # of them into a panel laid out along that axis, so no 16-bit global load and no 16-bit
    # shared store is left (a panel stored [j][k] from an operand along j took one 16-bit
    # store a cell, eight lanes on one bank); every fragment comes from ldmatrix (x4, and
    # x4.trans for a panel laid out along the tile), no other shared load.
    moves=$(awk 'function done() { if (km) { m += km; g += kg; s += ks; l += kl; t += kt; r += kr } km = kg = ks = kl = kt = kr = 0 }
                 /\.entry / { done() } /mma\.sync/ { km++ }
                 $1 ~ /^ld\.global/ && $1 ~ /\.(u|b)16$/ && $1 !~ /\.v[24]\./ { kg++ }
                 $1 ~ /^st\.shared/ && $1 ~ /\.(u|b)16$/ && $1 !~ /\.v[24]\./ { ks++ }
                 $1 == "ldmatrix.sync.aligned.m8n8.x4.shared.b16" { kl++ }
                 $1 == "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" { kt++ }
                 $1 ~ /^ld\.shared/ { kr++ }
                 END { done(); printf "%d %d %d %d %d %d", m, g, s, l, t, r }' "$TMP/$arch.ptx")
    set -- $moves
    if [ "$1" -gt 0 ] && [ "$2" = 0 ] && [ "$3" = 0 ] && [ "$4" -gt 0 ] && [ "$5" -gt 0 ] && [ "$6" = 0 ]; then ok "$arch: fetches and spills move runs of cells, fragments come from ldmatrix ($4 x4, $5 x4.trans for $1 mma.sync)"
    else bad "$arch: $2 16-bit global loads, $3 16-bit shared stores, $4 ldmatrix.x4, $5 ldmatrix.x4.trans, $6 other shared loads in the kernels of $1 mma.sync (expected 0, 0, some, some, 0)"; fi
    if [ -z "$PTXAS" ]; then echo "SKIP $arch: no ptxas"; continue; fi
    if "$PTXAS" -arch=$arch "$TMP/$arch.ptx" -o "$TMP/$arch.cubin" >"$TMP/err" 2>&1; then ok "$arch: ptxas accepts it"
    else bad "$arch: ptxas"; sed -n '1,5p' "$TMP/err"; fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
