#!/bin/sh
# fake_driver.sh — --target=cuda executables run end to end on a machine without a GPU, against
# tests/gpu/fake_cuda.c (a stand-in CUDA driver loaded through TSR_CUDA_DRIVER; run by
# tests/run.sh; docs/gpu.md).  The kernels do not run, so what is checked is the host side: each
# program exits 0 with nothing from the fake driver on stderr (every kernel it asks for is an
# .entry of its PTX, every launch names one with a grid, block, shared memory and parameters the
# driver accepts, every copy stays within its allocation), and the kernels it launched, in order,
# are whole calls of its routines as `--emit=ptx`'s manifest lists them (tests/gpu/launch_trace.py).
# The programs: concat's pieces (one forward), AdamW over 70 parameters (segments of one launch),
# AdamW's decay (one-thread scalar kernels), the split reductions of gpu_split.tsr (blocks and
# their partial sums), a clipping norm's squares (segments of blocks' reductions, their shared
# memory from one start: gpu_norm_segments.tsr), and sm_90a's warpgroup products (more than 48
# KiB of dynamic shared memory).
# Then CUDA graphs: replays launch what launches one at a time launch, with the same parameter
# values (the run's key, index symbols), and the fallbacks where a driver refuses or lacks them.
# Then every golden program of tests/native the same way, with graphs and without (tests/gpu/
# fake_golden.sh; those whose sizes are known only at run time skipped, as the GPU leg skips them).
# Then the Python package's views of a GPU model (tests/gpu/python_views.py).  Then two checks
# that the checks can fail: a trace against another program's manifest, and a kernel the module
# lacks (the fake driver told to hide one).
# Usage: fake_driver.sh TSRC.  One PASS/FAIL line per check; the last line is "N passed, N failed".
set -u
TSRC=$1
PY=${PYTHON:-python3}
. tests/native/harness.sh
harness_start fakecuda
FAKE=$T/libfakecuda.so

if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -shared -fPIC -Iruntime tests/gpu/fake_cuda.c -o "$FAKE" >"$T/log" 2>&1; then
    fail "the fake CUDA driver builds"
    finish
    exit
fi

# run_case NAME PROGRAM [TSRC OPTIONS…]: the executable and the manifest under one module name,
# the executable run against the fake driver, its launches against the manifest.
run_case() {
    name=$1 program=$2
    shift 2
    rm -f "$T/trace" "$T/log"
    if ! "$TSRC" --target=cuda "$@" "$program" -o "$T/$name" >"$T/log" 2>&1 ||
        ! "$TSRC" --emit=ptx "$@" "$program" -o "$T/$name.ptx" >>"$T/log" 2>&1; then
        fail "$program: --target=cuda builds an executable and a manifest"
        return
    fi
    TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_TRACE=$T/trace timeout 60 "$T/$name" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st != 0 ] || grep -q "fake CUDA driver" "$T/log"; then
        fail "$program: runs against the fake CUDA driver (exit $st)"
    elif ! [ -s "$T/trace" ]; then
        fail "$program: launched no kernel"
    elif ! "$PY" tests/gpu/launch_trace.py "$T/$name.json" "$T/trace" >"$T/log" 2>&1; then
        fail "$program: its launches are whole calls of its routines"
    else
        check "$program: the host side runs against the fake CUDA driver ($(cat "$T/log"))" 0
    fi
}

run_case pieces tests/concat/pieces.tsr
run_case many tests/native/gpu_many_params.tsr
run_case decay tests/native/adamw_decay.tsr
run_case split tests/native/gpu_split.tsr --reassociate --gpu-blocks=8
run_case norm tests/native/gpu_norm_segments.tsr --reassociate
run_case wgmma tests/native/tensor_cores_wgmma.tsr --arch=sm_90a --gpu-blocks=1

# The module compiled ahead of time (tsrc runs ptxas, $TSR_PTXAS, when it builds; make check sets
# it to none elsewhere): the executable carries a cubin for its --arch, which the runtime offers
# the driver first, and the PTX where the GPU runs no such cubin (the fake driver's pretend GPU
# runs none): "cubin" then "ptx", and the program runs.  Without ptxas, the PTX alone; where
# ptxas fails, a warning, and the program carries and runs its PTX alone; where $TSR_PTXAS
# cannot run, an error, exit status 1, and no executable.
PTXAS_FOUND=$(command -v ptxas 2>/dev/null || { [ -x /usr/local/cuda/bin/ptxas ] && echo /usr/local/cuda/bin/ptxas; })
modules_of() { # modules_of TSR_PTXAS: build tests/proj/matmul.tsr with it, run it, the modules offered
    rm -f "$T/modules" "$T/aot"
    TSR_PTXAS=$1 "$TSRC" --target=cuda --arch=sm_90 tests/proj/matmul.tsr -o "$T/aot" >"$T/aot.log" 2>&1 &&
        TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_MODULES=$T/modules timeout 60 "$T/aot" >"$T/out" 2>>"$T/aot.log" &&
        ! grep -q "fake CUDA driver" "$T/aot.log" && tr '\n' ' ' <"$T/modules"
}
if [ -n "$PTXAS_FOUND" ]; then
    got=$(modules_of "$PTXAS_FOUND")
    check "a cubin compiled by ptxas is offered first, the PTX after it where the GPU refuses it ('$got')" \
        "$([ "$got" = "cubin ptx " ] && echo 0 || echo 1)"
else
    echo "SKIP the module compiled ahead of time: no ptxas on PATH or in /usr/local/cuda/bin"
fi
got=$(modules_of none)
check "without ptxas the PTX alone is offered ('$got')" "$([ "$got" = "ptx " ] && echo 0 || echo 1)"
got=$(modules_of /bin/false)
warned=$(grep -c "warning: /bin/false could not compile the PTX for sm_90 (exit status 1); the program carries its PTX alone" "$T/aot.log")
check "a ptxas that fails: a warning, and the PTX alone ('$got', $warned warning)" \
    "$([ "$got" = "ptx " ] && [ "$warned" = 1 ] && echo 0 || echo 1)"
rm -f "$T/aot"
TSR_PTXAS=$T/no-such-ptxas "$TSRC" --target=cuda tests/proj/matmul.tsr -o "$T/aot" >"$T/aot.log" 2>&1
st=$?
check "a \$TSR_PTXAS that cannot run: exit status 1, an error naming it, no executable" \
    "$([ $st = 1 ] && grep -q "error: cannot run '$T/no-such-ptxas'" "$T/aot.log" && ! [ -e "$T/aot" ] && echo 0 || echo 1)"

# CUDA graphs (runtime/cuda.c, tsr_gpu_launch_run): a routine's run of kernels is made a graph
# once and replayed at every later call, and the kernels that read the run's key (dropout's
# masks), an index symbol (kv_cache's position p) or neither (AdamW's) launch with the values
# they get one at a time (TSR_CUDA_GRAPHS=0): the fake driver writes the values of the
# parameters each kernel's code reads.  graph_case NAME PROGRAM GRAPHS INSTANTIATED.
graph_case() {
    name=$1 program=$2 graphs=$3 made=$4
    rm -f "$T/values" "$T/values0"
    if ! "$TSRC" --target=cuda "$program" -o "$T/$name" >"$T/log" 2>&1; then
        fail "$program: --target=cuda builds"
        return
    fi
    TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_VALUES=$T/values "$T/$name" >"$T/out" 2>"$T/log" &&
        TSR_CUDA_GRAPHS=0 TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_VALUES=$T/values0 "$T/$name" >"$T/out0" 2>>"$T/log"
    st=$?
    got=$(grep -c '^graph ' "$T/values") got_made=$(grep -c '^instantiate ' "$T/values")
    if [ $st != 0 ] || [ -s "$T/log" ]; then
        fail "$program: runs with and without graphs (exit $st: $(head -1 "$T/log"))"
    elif [ "$got" != "$graphs" ] || [ "$got_made" != "$made" ]; then
        fail "$program: $graphs graph launches of $made graphs (got $got of $got_made)"
    elif ! grep -v '^graph \|^instantiate ' "$T/values" | cmp -s - "$T/values0" || ! cmp -s "$T/out" "$T/out0"; then
        fail "$program: graphs launch its kernels with the values of TSR_CUDA_GRAPHS=0"
    else
        check "$program: $graphs replays of $made CUDA graphs launch what TSR_CUDA_GRAPHS=0 launches, with the same values" 0
    fi
    cp "$T/values0" "$T/$name.values0" 2>/dev/null
    cp "$T/out0" "$T/$name.out0" 2>/dev/null
}
graph_case many_graphs tests/native/gpu_many_params.tsr 8 2
graph_case dropout tests/native/dropout_masks.tsr 3 1
graph_case kv tests/native/kv_cache.tsr 5 1

# A driver that refuses the graphs, or their launches: launched one at a time, unless
# TSR_CUDA_GRAPHS=1 asks for them.  refused_case VARIABLE WHAT MESSAGE: the fake driver told to
# refuse (VARIABLE=1) runs dropout as launched one at a time (instantiations aside), and with
# TSR_CUDA_GRAPHS=1 fails with MESSAGE.
refused_case() {
    variable=$1 what=$2 message=$3
    rm -f "$T/values"
    env "$variable=1" TSR_CUDA_DRIVER="$FAKE" TSR_FAKE_CUDA_VALUES="$T/values" "$T/dropout" >"$T/out" 2>/dev/null
    st=$?
    touch "$T/values"
    if [ $st = 0 ] && grep -v '^instantiate ' "$T/values" | cmp -s - "$T/dropout.values0" && cmp -s "$T/out" "$T/dropout.out0"; then
        check "$what the driver refuses: the kernels launched one at a time" 0
    else
        fail "$what the driver refuses: the kernels launched one at a time (exit $st)"
    fi
    env "$variable=1" TSR_CUDA_GRAPHS=1 TSR_CUDA_DRIVER="$FAKE" "$T/dropout" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st = 1 ] && grep -q "$message" "$T/log" && [ ! -s "$T/out" ]; then
        check "TSR_CUDA_GRAPHS=1 and $what refused: an error naming the kernels" 0
    else
        fail "TSR_CUDA_GRAPHS=1 and $what refused: an error naming the kernels (exit $st: $(head -1 "$T/log"))"
    fi
}
if [ -f "$T/dropout" ]; then
    refused_case TSR_FAKE_CUDA_REFUSE_GRAPHS graphs "cannot make a CUDA graph of GPU kernels 0 to 1"
    refused_case TSR_FAKE_CUDA_REFUSE_GRAPH_LAUNCHES "graph launches" "cannot launch the CUDA graph of GPU kernels 0 to 1"
    TSR_CUDA_GRAPHS=yes TSR_CUDA_DRIVER=$FAKE "$T/dropout" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st = 1 ] && grep -q "TSR_CUDA_GRAPHS=yes: expected 0" "$T/log" && [ ! -s "$T/out" ]; then
        check "TSR_CUDA_GRAPHS=yes: refused, naming the values it takes" 0
    else
        fail "TSR_CUDA_GRAPHS=yes: refused (exit $st: $(head -1 "$T/log"))"
    fi
fi
# A driver without graphs (before CUDA 11.4): the same, one at a time.
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -DFAKE_NO_GRAPHS -O1 -shared -fPIC -Iruntime tests/gpu/fake_cuda.c \
    -o "$T/libfakecuda_old.so" >"$T/log" 2>&1 && [ -f "$T/dropout" ]; then
    rm -f "$T/values"
    TSR_CUDA_DRIVER=$T/libfakecuda_old.so TSR_FAKE_CUDA_VALUES=$T/values "$T/dropout" >"$T/out" 2>/dev/null
    st=$?
    TSR_CUDA_GRAPHS=1 TSR_CUDA_DRIVER=$T/libfakecuda_old.so "$T/dropout" >/dev/null 2>"$T/log"
    st1=$?
    if [ $st = 0 ] && cmp -s "$T/values" "$T/dropout.values0" && [ $st1 = 1 ] && grep -q "the CUDA driver has no graphs" "$T/log"; then
        check "a driver without graphs: one at a time; with TSR_CUDA_GRAPHS=1 an error" 0
    else
        fail "a driver without graphs (exit $st, $st1: $(head -1 "$T/log"))"
    fi
else
    fail "the fake CUDA driver without graphs builds"
fi

# Every golden program of tests/native, built for the GPU and run the same way (host side only:
# tests/gpu/fake_golden.sh), two at a time.
for out in tests/native/*.out; do [ -f "${out%.out}.tsr" ] && echo "${out%.out}.tsr"; done |
    PYTHON=$PY xargs -P2 -n1 sh tests/gpu/fake_golden.sh "$TSRC" "$FAKE" "$T/goldens" >"$T/goldens.txt" 2>&1
while read -r verdict program rest; do
    case $verdict in
    PASS) check "$program: the host side runs against the fake CUDA driver" 0 ;;
    SKIP) echo "SKIP $program $rest" ;;
    *) fail "$program: $rest" ;;
    esac
done <"$T/goldens.txt"

# The checks can fail: pieces's launches are no calls of AdamW's routines …
rm -f "$T/log"
if [ -f "$T/pieces.json" ] && [ -f "$T/many.json" ]; then
    rm -f "$T/trace"
    TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_TRACE=$T/trace "$T/pieces" >/dev/null 2>&1
    if "$PY" tests/gpu/launch_trace.py "$T/many.json" "$T/trace" >"$T/log" 2>&1; then
        fail "a trace against another program's manifest is refused"
    elif grep -q "stop matching the manifest's routines at launch 1 " "$T/log"; then
        check "a trace against another program's manifest is refused" 0
    else
        fail "a trace against another program's manifest: an unexpected message"
    fi
fi
# … and a kernel the module lacks (TSR_FAKE_CUDA_HIDE) is an error the program reports.
rm -f "$T/log"
if [ -f "$T/pieces" ]; then
    TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_HIDE=pieces_forward_k1 "$T/pieces" >"$T/out" 2>"$T/log"
    st=$?
    if [ $st = 1 ] && grep -q "fake CUDA driver: no .entry in the module named: pieces_forward_k1" "$T/log" && [ ! -s "$T/out" ]; then
        check "a kernel missing from the module fails the program (exit 1, named, nothing printed)" 0
    else
        fail "a kernel missing from the module fails the program (exit $st)"
    fi
fi

# The Python package over a GPU library: a view held across routines stays the tensor (what is
# written through it after a routine reaches the GPU before the next; tests/gpu/python_views.py).
rm -f "$T/log"
if "$TSRC" --shared --target=cuda docs/examples/mlp_lib.tsr -o "$T/libgmlp.so" >"$T/log" 2>&1 &&
   TSR_CUDA_DRIVER=$FAKE "$PY" tests/gpu/python_views.py runtime/python "$T/libgmlp.so" >>"$T/log" 2>&1; then
    check "a Python view of a GPU model held across routines writes to the GPU and reads what is there" 0
else
    fail "a Python view of a GPU model held across routines writes to the GPU and reads what is there"
    sed -n '1,4s/^/    /p' "$T/log"
fi

finish
