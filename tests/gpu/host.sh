#!/bin/sh
# host.sh — the GPU target on a machine without a GPU (run by tests/run.sh; docs/gpu.md):
#   - a --target=cuda executable, run where the CUDA driver cannot be loaded, exits 1 with a
#     message naming the missing driver, and prints nothing on stdout;
#   - an executable whose updates run as segments of one launch (gpu_many_params.tsr) builds
#     without a message and launches its routines' runs of kernels with tsr_gpu_launch_run;
#   - a -c --target=cuda object's header has the CPU header's API plus sync_host/sync_device,
#     its accessors go through tsr_state_host_buffer, it compiles and links with the runtime
#     alone, and MODEL_create returns NULL with the same message;
#   - --emit=ptx of docs/examples/mlp_lib.tsr writes PTX and a manifest whose kernels are the
#     PTX's entry points, each routine's launches naming them in order, with buffers and sizes;
#     ptxas -arch=sm_90 accepts it (where ptxas exists);
#   - bad combinations of options are errors (status 2 for the command line, 1 for an unknown
#     architecture or a libdevice that cannot be read), and leave no output file.
# Usage: host.sh TSRC BUILD.  One PASS/FAIL line per check; the last line is "N passed, N failed".
set -u
TSRC=$1
BUILD=$2
. tests/native/harness.sh
harness_start gpuhost
MISSING=$T/no-such-dir/libcuda.so.1

# ---- An executable without a driver ----------------------------------------------------------------
if "$TSRC" --target=cuda tests/proj/matmul.tsr -o "$T/mm" >"$T/log" 2>&1; then
    check "--target=cuda builds an executable" 0
    TSR_CUDA_DRIVER=$MISSING "$T/mm" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st = 1 ] && grep -q "mm: error: no CUDA driver: cannot load $MISSING" "$T/log" &&
        grep -q -- "--target=cuda and needs an NVIDIA GPU" "$T/log" && [ ! -s "$T/out" ]; then
        check "without a driver the executable exits 1, naming the driver it could not load" 0
    else
        fail "without a driver the executable exits 1, naming the driver (exit $st)"
    fi
    # The CUDA toolkit's stub libcuda (where the toolkit is installed): an error that gives the
    # driver's number, which the stub cannot name (it said "CUDA error" alone).
    STUB=/usr/local/cuda/lib64/stubs/libcuda.so
    if [ -f "$STUB" ]; then
        TSR_CUDA_DRIVER=$STUB "$T/mm" >"$T/out" 2>"$T/log"
        st=$?
        if [ $st = 1 ] && grep -q "CUDA error 34 (CUDA_ERROR_STUB_LIBRARY" "$T/log"; then
            check "the toolkit's stub driver: an error naming CUDA_ERROR_STUB_LIBRARY" 0
        else fail "the toolkit's stub driver: an error naming CUDA_ERROR_STUB_LIBRARY (exit $st)"; fi
    fi
else
    fail "--target=cuda builds an executable"
fi

# ---- Launches as runs of kernels ------------------------------------------------------------------
# gpu_many_params.tsr's routine `train` runs its AdamW updates as segments of one launch
# (sched/kernel.c) in two runs of kernels around its clipping's REDUCE: the host launches each
# run with one tsr_gpu_launch_run (a CUDA graph, runtime/cuda.c) and no kernel alone, and the
# build says nothing.  (Which kernels each run launches, in order, is fake_driver.sh's check.)
if "$TSRC" --target=cuda tests/native/gpu_many_params.tsr -o "$T/many" >"$T/log" 2>&1 && [ ! -s "$T/log" ]; then
    if command -v objdump >/dev/null 2>&1; then
        objdump -d "$T/many" >"$T/many.s"
        runs=$(grep -cE '(call|jmp) +[0-9a-f]+ <tsr_gpu_launch_run>' "$T/many.s")
        alone=$(grep -cE '(call|jmp) +[0-9a-f]+ <tsr_gpu_launch>' "$T/many.s")
        if [ "$runs" -gt 0 ] && [ "$alone" = 0 ]; then
            check "an executable's routines launch runs of kernels, not kernels alone ($runs call sites)" 0
        else
            fail "runs of kernels: $runs call sites of tsr_gpu_launch_run, $alone of tsr_gpu_launch (expected 0)"
        fi
    else
        check "--target=cuda builds an executable with segments silently (no objdump to count its launches)" 0
    fi
else
    fail "--target=cuda builds gpu_many_params.tsr's executable (segments) without a message"
fi

# ---- The driver's ABI, against the toolkit's cuda.h where it is installed --------------------------
# runtime/cuda_abi.h declares the kernel node's parameters (CUDA graphs) itself: its fields must
# lie where cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 has them, and the first ones where _v1 has them.
CUDA_H=${CUDA_HOME:-/usr/local/cuda}/include/cuda.h
if [ -f "$CUDA_H" ]; then
    fields="func gridDimX gridDimY gridDimZ blockDimX blockDimY blockDimZ sharedMemBytes kernelParams extra"
    layout() { # layout HEADER STRUCT V1_SIZE_EXPRESSION > a C program printing the layout
        printf '#include <stddef.h>\n#include <stdio.h>\n#include "%s"\nint main(void) {\n' "$1"
        printf '    printf("size %%zu\\n", sizeof(%s));\n' "$2"
        for f in $fields kern ctx; do printf '    printf("%s %%zu\\n", offsetof(%s, %s));\n' "$f" "$2" "$f"; done
        printf '    printf("v1 %%zu\\n", (size_t)(%s));\n    return 0;\n}\n' "$3"
    }
    layout "$PWD/runtime/cuda_abi.h" CuKernelNodeParams "offsetof(CuKernelNodeParams, extra) + sizeof(void *)" >"$T/ours.c"
    layout "$CUDA_H" CUDA_KERNEL_NODE_PARAMS_v2 "sizeof(CUDA_KERNEL_NODE_PARAMS_v1)" >"$T/theirs.c"
    if ${CC:-cc} "$T/ours.c" -o "$T/ours" 2>"$T/log" && ${CC:-cc} "$T/theirs.c" -o "$T/theirs" 2>>"$T/log" &&
        "$T/ours" >"$T/ours.txt" && "$T/theirs" >"$T/theirs.txt" && cmp -s "$T/ours.txt" "$T/theirs.txt"; then
        check "runtime/cuda_abi.h's kernel node parameters lie as cuda.h's (v2, and v1's first fields)" 0
    else
        fail "runtime/cuda_abi.h's kernel node parameters against cuda.h: $(diff "$T/ours.txt" "$T/theirs.txt" 2>&1 | head -3 | tr '\n' ' ')$(head -1 "$T/log")"
    fi
else
    echo "SKIP the kernel node's layout against cuda.h (no $CUDA_H)"
fi

# ---- An object and its header ----------------------------------------------------------------------
if "$TSRC" -c --target=cuda tests/proj/matmul.tsr -o "$T/m.o" >"$T/log" 2>&1; then
    check "-c --target=cuda writes an object, a header and a manifest" 0
    if grep -q 'm_sync_host(m_state \*s)' "$T/m.h" && grep -q 'm_sync_device(m_state \*s)' "$T/m.h" &&
        grep -q 'tsr_state_host_buffer(TSR_PTR_CAST(tsr_state \*, s), ' "$T/m.h" && grep -q 'int m_forward(m_state \*s);' "$T/m.h"; then
        check "the GPU header has the routines, sync_host, sync_device and accessors through the runtime" 0
    else
        fail "the GPU header has the routines, sync_host, sync_device and accessors through the runtime"
    fi
    cat >"$T/drv.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "m.h"
int main(void) {
    m_state *s = m_create(0);
    if (s) { puts("created"); m_destroy(s); return 0; }
    printf("%s\n", m_last_error());
    return strstr(m_last_error(), "no CUDA driver") ? 3 : 4;
}
EOF
    if ${CC:-cc} -Wall -Wextra -Werror -I runtime -I "$T" -o "$T/drv" "$T/drv.c" "$T/m.o" "$BUILD/libtsr.a" -lm -lpthread \
        >"$T/log" 2>&1; then
        check "a C program links the GPU object with libtsr.a alone (no CUDA library)" 0
        TSR_CUDA_DRIVER=$MISSING "$T/drv" >"$T/log" 2>&1
        if [ $? = 3 ]; then check "without a driver MODEL_create returns NULL and MODEL_last_error names the driver" 0
        else fail "without a driver MODEL_create returns NULL and MODEL_last_error names the driver"; fi
    else
        fail "a C program links the GPU object with libtsr.a alone (no CUDA library)"
    fi
else
    fail "-c --target=cuda writes an object, a header and a manifest"
fi

# ---- --emit=ptx and its manifest -------------------------------------------------------------------
if "$TSRC" --emit=ptx docs/examples/mlp_lib.tsr -o "$T/mlp.ptx" >"$T/log" 2>&1 && [ -s "$T/mlp.ptx" ] && [ -s "$T/mlp.json" ]; then
    check "--emit=ptx writes MODEL.ptx and MODEL.json" 0
    if "${PYTHON:-python3}" - "$T/mlp.ptx" "$T/mlp.json" >"$T/log" 2>&1 <<'EOF'
import json, re, sys
ptx = open(sys.argv[1]).read()
m = json.load(open(sys.argv[2]))
entries = re.findall(r"\.visible \.entry (\w+)\(", ptx)
names = [k["name"] for k in m["kernels"]]
assert names and names == entries, (names, entries)
assert m["arch"] == "sm_80" and m["ptx"] == "mlp.ptx" and m["module"] == "mlp"
ids = {b["id"]: b for b in m["buffers"]}
for k in m["kernels"]:
    assert all(g >= 1 for g in k["grid"]) and 1 <= k["block"][0] * k["block"][1] * k["block"][2] <= 1024, k
    bufs = [p for p in k["params"] if "buffer" in p]
    assert bufs and all(p["buffer"] in ids for p in bufs), k
    assert any(p["writes"] for p in bufs), k
    # one .param per symbol and per buffer, in that order
    body = ptx.split(".entry %s(" % k["name"])[1].split(")")[0]
    assert body.count(".param") == len(k["params"]), (k["name"], body)
for b in ids.values():
    assert b["dtype"] == "float32" and b["bytes"] == 4 * b["cells"] > 0, b
routines = {r["name"]: r["launches"] for r in m["routines"]}
assert routines.get("predict") and all(l in names for l in routines["predict"]), routines
print("manifest ok: %d kernels" % len(names))
EOF
    then check "the manifest's kernels are the PTX's entry points, with their parameters, launches and buffers" 0
    else fail "the manifest's kernels are the PTX's entry points, with their parameters, launches and buffers"; fi
    PTXAS=$(command -v ptxas 2>/dev/null || { [ -x /usr/local/cuda/bin/ptxas ] && echo /usr/local/cuda/bin/ptxas; })
    if [ -n "$PTXAS" ]; then
        "$TSRC" --emit=ptx --arch=sm_90 docs/examples/mlp_lib.tsr -o "$T/mlp90.ptx" >"$T/log" 2>&1 &&
            "$PTXAS" -arch=sm_90 "$T/mlp90.ptx" -o "$T/mlp90.cubin" >>"$T/log" 2>&1
        if [ $? = 0 ]; then check "ptxas -arch=sm_90 accepts docs/examples/mlp_lib.tsr's PTX" 0
        else fail "ptxas -arch=sm_90 accepts docs/examples/mlp_lib.tsr's PTX"; fi
    else
        echo "SKIP ptxas -arch=sm_90 on docs/examples/mlp_lib.tsr: no ptxas"
    fi
else
    fail "--emit=ptx writes MODEL.ptx and MODEL.json"
fi

# ---- Bad combinations --------------------------------------------------------------------------------
bad() { # bad WHAT STATUS MESSAGE ARGS…
    what=$1 want=$2 msg=$3
    shift 3
    rm -f "$T/bad.ptx" "$T/bad.json" "$T/bad"
    "$TSRC" "$@" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st = "$want" ] && grep -q -- "$msg" "$T/log" && [ ! -e "$T/bad.ptx" ] && [ ! -e "$T/bad.json" ] && [ ! -e "$T/bad" ]; then
        check "$what" 0
    else
        fail "$what (exit $st, expected $want)"
    fi
}
bad "--emit=ptx with a CPU target is a command-line error" 2 "generates GPU code" \
    --emit=ptx --target=x86_64-pc-linux-gnu tests/proj/matmul.tsr -o "$T/bad.ptx"
bad "--emit=llvm with --target=cuda is a command-line error" 2 "not --emit=llvm" \
    --emit=llvm --target=cuda tests/proj/matmul.tsr -o "$T/bad.ptx"
bad "--arch without --target=cuda is a command-line error" 2 "'--arch' goes with" \
    --arch=sm_90 tests/proj/matmul.tsr -o "$T/bad"
# --gpu-blocks N (a space) as --gpu-blocks=N; one block (nothing to fill) schedules products of one tile.
if "$TSRC" --emit=sched-ir --target=cuda --gpu-blocks 1 --reassociate tests/native/gpu_split.tsr -o "$T/one.ir" 2>"$T/log" &&
    grep -q "GPU block through shared memory" "$T/one.ir"; then check "--gpu-blocks 1: block kernels of one block" 0
else fail "--gpu-blocks 1 (exit or schedule)"; fi
bad "--gpu-blocks without --target=cuda is a command-line error" 2 "'--gpu-blocks' goes with" \
    --gpu-blocks=8 tests/proj/matmul.tsr -o "$T/bad"
for n in 0 65536 -3 8x ""; do
    bad "--gpu-blocks=$n is a command-line error" 2 "'--gpu-blocks' needs a number of blocks from 1 to 65535, not '$n'" \
        --emit=ptx --gpu-blocks=$n tests/proj/matmul.tsr -o "$T/bad.ptx"
done
bad "an unknown GPU architecture is an error" 1 "unknown GPU architecture 'sm_x'" \
    --emit=ptx --arch=sm_x tests/proj/matmul.tsr -o "$T/bad.ptx"
# Each buffer of the PTX manifest names its element type, with bytes to match.
"$TSRC" --emit=ptx tests/native/dtype_half.tsr -o "$T/half.ptx" >"$T/log" 2>&1 &&
    /usr/bin/python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
size = {"float32": 4, "float64": 8, "int32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "bool": 1, "int64": 8}
assert {"bfloat16", "float16", "float64", "int32"} <= {b["dtype"] for b in m["buffers"]}, m["buffers"]
assert all(b["bytes"] == size[b["dtype"]] * b["cells"] for b in m["buffers"])' "$T/half.json" >>"$T/log" 2>&1
check "the PTX manifest gives every buffer its dtype (dtype_half.tsr: bf16, f16, f64, i32)" $?
# A name that only begins with a known one is not that one (sm_80a was taken for sm_80: LLVM then
# ignored the processor, and a quote in the name made the manifest invalid JSON).
for a in sm_80a sm_80-junk 'sm_80", "x'; do
    bad "--arch=$a (a known name's prefix) is an error" 1 "unknown GPU architecture '$a'" \
        --emit=ptx --arch="$a" tests/proj/matmul.tsr -o "$T/bad.ptx"
done
# One the LLVM tsrc is built with does not generate (sm_100 under LLVM 19: PTX for a default
# target that ptxas refuses) is an error too, and --check says so.
bad "a GPU architecture LLVM does not target is an error" 1 "unknown GPU architecture 'sm_1000' (--arch= one of sm_50" \
    --emit=ptx --arch=sm_1000 tests/proj/matmul.tsr -o "$T/bad.ptx"
bad "--check of an architecture LLVM does not target is an error" 1 "unknown GPU architecture 'sm_1000'" \
    --check --target=cuda --arch=sm_1000 tests/proj/matmul.tsr
export TSR_LIBDEVICE="$T/no-libdevice.bc"
bad "with TSR_LIBDEVICE naming a missing file, a program that needs exp is refused" 1 \
    "cannot read libdevice '$T/no-libdevice.bc'" --emit=ptx tests/native/primitives_edge.tsr -o "$T/bad.ptx"
# A file that is not bitcode: tsrc's message with LLVM's reason (LLVM's own handler printed its
# reason bare and exited).
echo "not bitcode" >"$T/text.bc"
export TSR_LIBDEVICE="$T/text.bc"
bad "with TSR_LIBDEVICE naming a file that is not bitcode, tsrc says so" 1 \
    "^tsrc: error: '$T/text.bc' is not LLVM bitcode: .* (TSR_LIBDEVICE must name libdevice.10.bc)" \
    --emit=ptx tests/native/primitives_edge.tsr -o "$T/bad.ptx"
unset TSR_LIBDEVICE

finish
