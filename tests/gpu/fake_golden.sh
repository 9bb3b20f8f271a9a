#!/bin/sh
# fake_golden.sh — one golden program of tests/native (its `(* args: … *)` and `(* gpu-args: … *)`
# headers as tests/run.sh reads them) built with --target=cuda and run, from the top of the
# tree, against the fake CUDA driver (tests/gpu/fake_cuda.c; fake_driver.sh runs it for every
# golden).  The kernels do not run, so what it prints is not checked; what is: the build (a
# program whose sizes are only known at run time is skipped, as the GPU leg skips it), no
# complaint from the fake driver (kernels that are .entries of the PTX, launches a GPU would
# take, copies within their allocations), exit status 0 (no error from the runtime's host side,
# no crash), and launches that are whole calls of the manifest's routines
# (tests/gpu/launch_trace.py).  One line: PASS, FAIL or SKIP and the program.
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
TSR_CUDA_DRIVER=$FAKE TSR_FAKE_CUDA_TRACE=$d/trace timeout 60 "$d/exe" $program_args >"$d/out" 2>"$d/err"
st=$?
if grep -q "fake CUDA driver" "$d/err"; then echo "FAIL $t: $(grep -m1 'fake CUDA driver' "$d/err")"
elif [ $st != 0 ]; then echo "FAIL $t: exit $st ($(head -c 200 "$d/err" | head -1))"
elif [ -s "$d/trace" ] && ! "$PY" tests/gpu/launch_trace.py "$d/exe.json" "$d/trace" >"$d/lt" 2>&1; then
    echo "FAIL $t: $(head -1 "$d/lt")"
else echo "PASS $t"; fi
