#!/bin/sh
# fake_golden.sh — one golden program of tests/native (its `(* args: … *)` and `(* gpu-args: … *)`
# headers as tests/run.sh reads them) built with --target=cuda and run, from the top of the
# tree, against the fake CUDA driver (tests/gpu/fake_cuda.c; fake_driver.sh runs it for every
# golden).  The kernels do not run, so what it prints is not checked; what is: the build (a
# program whose sizes are only known at run time is skipped, as the GPU leg skips it), no
# complaint from the fake driver (kernels that are .entries of the PTX, launches a GPU would
# take, copies within their allocations), exit status 0 (no error from the runtime's host side,
# no crash), and launches that are whole calls of the manifest's routines
# (tests/gpu/launch_trace.py).  Then the same executable with TSR_CUDA_GRAPHS=0 (each kernel
# launched alone, where the first run replayed CUDA graphs): the same output, and the same
# kernels launched with the same values of the parameters their code reads.  One line: PASS,
# FAIL or SKIP and the program.
# Usage: fake_golden.sh TSRC LIBFAKECUDA.so SCRATCH_DIR PROGRAM.tsr
set -u
TSRC=$1 FAKE=$2 T=$3 t=$4
PY=${PYTHON:-python3}
d=$T/$(basename "$t" .tsr)
mkdir -p "$d"
header=$(sed -n '1s/^(\* args: \(.*\) \*)$/\1/p' "$t")
gpu_args=$(sed -n '1,2s/^(\* gpu-args: \(.*\) \*)$/\1/p' "$t")
compile_args= program_args= after=no   # the options before `--`; after it, the program's own
for x in $header; do
    if [ "$x" = -- ]; then after=yes
    elif [ $after = yes ]; then program_args="$program_args $x"
    else compile_args="$compile_args $x"; fi
done
# shellcheck disable=SC2086
if ! "$TSRC" --target=cuda $compile_args $gpu_args "$t" -o "$d/exe" >"$d/log" 2>&1 ||
    ! "$TSRC" --emit=ptx $compile_args $gpu_args "$t" -o "$d/exe.ptx" >>"$d/log" 2>&1; then
    if grep -q "are not compiled for --target=cuda" "$d/log"; then echo "SKIP $t (run-time sizes)"
    else echo "FAIL $t: --target=cuda builds ($(grep -m1 error "$d/log"))"; fi
    exit 0
fi
# shellcheck disable=SC2086
rm -f "$d/trace" "$d/values" "$d/values0"
TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_TRACE=$d/trace TSR_FAKE_CUDA_VALUES=$d/values timeout 60 "$d/exe" $program_args \
    >"$d/out" 2>"$d/err"
st=$?
# shellcheck disable=SC2086
TSR_CUDA_GRAPHS=0 TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_VALUES=$d/values0 timeout 60 "$d/exe" $program_args \
    >"$d/out0" 2>"$d/err0"
st0=$?
if grep -q "fake CUDA driver" "$d/err" "$d/err0"; then echo "FAIL $t: $(grep -h -m1 'fake CUDA driver' "$d/err" "$d/err0" | head -1)"
elif [ $st != 0 ] || [ $st0 != 0 ]; then echo "FAIL $t: exit $st, $st0 without graphs ($(head -c 200 "$d/err" | head -1))"
elif [ -s "$d/trace" ] && ! "$PY" tests/gpu/launch_trace.py "$d/exe.json" "$d/trace" >"$d/lt" 2>&1; then
    echo "FAIL $t: $(head -1 "$d/lt")"
elif ! cmp -s "$d/out" "$d/out0"; then echo "FAIL $t: prints otherwise with TSR_CUDA_GRAPHS=0"
elif touch "$d/values" "$d/values0" && ! grep -v '^graph \|^instantiate ' "$d/values" | cmp -s - "$d/values0"; then
    echo "FAIL $t: its kernels' parameters differ from TSR_CUDA_GRAPHS=0's"
else echo "PASS $t"; fi
