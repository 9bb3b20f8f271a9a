#!/bin/sh
# prepare.sh — the first half of `make check-gpu`: builds every GPU test case here (where tsrc,
# LLVM and a C compiler are), so that tests/gpu/run.sh can run them on a machine that has a GPU
# and nothing else (sh, python3, the CUDA driver).
#
# Usage: sh tests/gpu/prepare.sh TSRC OUTDIR        (from the repository root)
#
# The cases, each a `tsrc --target=cuda` executable and the reference executor's output:
#   * every tests/**/NAME.tsr with a NAME.out golden, found and given its `(* args: … *)` as
#     tests/run.sh does: the options before `--` go to tsrc (-I DIR, --no-opt…), the rest to
#     the program; a `(* gpu-args: … *)` line (first or second) adds tsrc options for the GPU
#     build only (--gpu-blocks=N);
#   * every docs/examples/NAME.tsr with a tests/native/examples/NAME.out, its arguments from
#     NAME.args (@DATA@: tools/digits.py's files, written to OUTDIR/data);
#   * the einsum differential: EINSUM_GPU_COUNT (default 200) random einsums of
#     tests/einsum/einsum_diff.py (seed EINSUM_GPU_SEED, default 3), checked against NumPy here
#     on the reference executor, built in batches of 20 (einsum_diff.py --emit-cases).
# The expected output is what the reference executor prints with every float in full
# (TSR_PRINT_EXACT=1 tsrc --run --interp …), written here; run.sh runs the executables the
# same way and compares with tests/gpu/compare.py (integers exact, 1e-5 relative otherwise).
#
# OUTDIR (emptied first) receives bin.tar.xz (bin/, the executables, packed: tools/gpu_bin.sh; a
# GPU machine's copy of the working tree is limited to 64 MiB, and run.sh unpacks it),
# expected/, data/, src/ (the einsum programs) and cases.txt: one line per case, fields separated by tabs:
#   NAME  EXECUTABLE  EXPECTED  ARGUMENTS
# EXECUTABLE and EXPECTED relative to OUTDIR (EXECUTABLE is "-" when the build failed: run.sh
# reports the case as failed), ARGUMENTS separated by spaces, @OUT@ standing for OUTDIR.  And
# tolerances.txt: "NAME<TAB>1e-2" for each case whose GPU schedule runs products on the tensor
# cores (their sums are added in the hardware's own order: compare.py --rel-tol); the others
# are compared within compare.py's 1e-5.
# Paths inside the programs (data files) are relative to the repository root: run.sh runs every
# case from there, on a copy of the working tree.
#
# Environment: TSR_GPU_ARCH (default sm_80) the --arch given to tsrc; TSR_GPU_TARGET=native
# builds CPU executables instead (to try the whole chain on a machine without a GPU);
# PYTHON (a python3 with NumPy, default /usr/bin/python3); TEST_TIMEOUT (seconds per reference
# run, default 120).  A build that fails is reported (FAIL build …) and prepare.sh exits 1
# after preparing everything else; the case stays in cases.txt.  A program that uses what
# --target=cuda refuses to compile in this version (run-time sizes) is reported as UNSUPPORTED
# and left out: neither run nor counted.
set -u

if [ $# -ne 2 ]; then
    echo "usage: sh tests/gpu/prepare.sh TSRC OUTDIR" >&2
    exit 2
fi
TSRC=$1
OUT=$2
PY=${PYTHON:-/usr/bin/python3}
ARCH=${TSR_GPU_ARCH:-sm_80}
TIMEOUT=${TEST_TIMEOUT:-120}
case ${TSR_GPU_TARGET:-cuda} in
    cuda) TARGET="--target=cuda --arch=$ARCH" ;;
    native) TARGET= ;;
    *) echo "prepare.sh: TSR_GPU_TARGET must be cuda or native" >&2; exit 2 ;;
esac
if [ ! -x "$TSRC" ]; then
    echo "prepare.sh: $TSRC is not an executable" >&2
    exit 2
fi
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/expected" "$OUT/data" "$OUT/log" || exit 2
CASES=$OUT/cases.txt
: >"$CASES"
: >"$OUT/tolerances.txt"
broken=0
. tools/gpu_bin.sh
unsupported=0
TAB=$(printf '\t')

# build NAME TSR [TSRC-OPTIONS...]: the executable OUTDIR/bin/NAME; its name, or "-" on failure,
# or "unsupported" when tsrc says the program uses what --target=cuda does not compile in this
# version (run-time sizes: docs/gpu.md "Limits"), which is reported and left out of cases.txt.
build() {
    name=$1 src=$2
    shift 2
    if "$TSRC" $TARGET "$src" "$@" -o "$OUT/bin/$name" >"$OUT/log/$name.build" 2>&1; then
        echo "bin/$name"
    elif grep -q "are not compiled for --target=cuda in this version" "$OUT/log/$name.build"; then
        echo "UNSUPPORTED $name ($src): $(grep -m1 'error:' "$OUT/log/$name.build" | sed 's/.*error: //')" >&2
        echo unsupported
    else
        echo "FAIL build $name ($src): tsrc exited with status $?:" >&2
        sed -n '1,12s/^/    /p' "$OUT/log/$name.build" >&2
        echo -
    fi
}

# loosen_if_tensor_cores NAME TSR [TSRC-OPTIONS...]: a line in tolerances.txt when the program's
# GPU schedule takes the tensor cores.
loosen_if_tensor_cores() {
    name=$1 src=$2
    shift 2
    [ -n "$TARGET" ] || return 0
    if "$TSRC" $TARGET --emit=sched-ir -o - "$src" "$@" 2>/dev/null | grep -q "on the tensor cores"; then
        printf '%s\t1e-2\n' "$name" >>"$OUT/tolerances.txt"
    fi
}

# expect NAME TSR ARGS...: the reference executor's output, every float in full.
expect() {
    name=$1
    shift
    if TSR_PRINT_EXACT=1 timeout "$TIMEOUT" "$TSRC" --run --interp "$@" >"$OUT/expected/$name.out" \
        2>"$OUT/log/$name.interp"; then
        return 0
    fi
    echo "FAIL reference $name: tsrc --run --interp $* failed:" >&2
    sed -n '1,12s/^/    /p' "$OUT/log/$name.interp" >&2
    broken=$((broken + 1))
    return 1
}

# The golden tests.
for t in $(find tests -name '*.tsr' | LC_ALL=C sort); do
    base=${t%.tsr}
    [ -f "$base.out" ] || continue
    name=$(echo "$base" | sed 's|^tests/||; s|/|__|g')
    args=$(sed -n '1s/^(\* args: \(.*\) \*)$/\1/p' "$t")
    gpu_args=$(sed -n '1,2s/^(\* gpu-args: \(.*\) \*)$/\1/p' "$t")
    [ -z "$TARGET" ] && gpu_args= # CPU executables (TSR_GPU_TARGET=native): no GPU options
    # split at "--": tsrc's options, then the program's
    topts='' pargs='' seen=''
    for a in $args; do
        if [ -n "$seen" ]; then pargs="$pargs${pargs:+ }$a"
        elif [ "$a" = -- ]; then seen=1
        else topts="$topts${topts:+ }$a"; fi
    done
    # shellcheck disable=SC2086
    expect "$name" "$t" $args || continue
    # shellcheck disable=SC2086
    exe=$(build "$name" "$t" $gpu_args $topts)
    [ "$exe" = unsupported ] && { unsupported=$((unsupported + 1)); continue; }
    # shellcheck disable=SC2086
    loosen_if_tensor_cores "$name" "$t" $gpu_args $topts
    printf '%s\t%s\t%s\t%s\n' "$name" "$exe" "expected/$name.out" "$pargs" >>"$CASES"
done

# The examples with a golden output.
if ! "$PY" tools/digits.py "$OUT/data" >"$OUT/log/digits.log" 2>&1; then
    echo "FAIL tools/digits.py $OUT/data:" >&2
    sed 's/^/    /' "$OUT/log/digits.log" >&2
    broken=$((broken + 1))
fi
for g in $(ls tests/native/examples/*.out 2>/dev/null | LC_ALL=C sort); do
    ex=$(basename "$g" .out)
    t=docs/examples/$ex.tsr
    name=examples__$ex
    a=${g%.out}.args
    pargs=
    [ -f "$a" ] && pargs=$(sed 's|@DATA@|@OUT@/data|g' "$a" | tr '\n' ' ' | sed 's/  */ /g; s/ $//')
    here=$(echo "$pargs" | sed "s|@OUT@|$OUT|g")
    if [ -n "$here" ]; then
        # shellcheck disable=SC2086
        expect "$name" "$t" -- $here || continue
    else
        expect "$name" "$t" || continue
    fi
    exe=$(build "$name" "$t")
    [ "$exe" = unsupported ] && { unsupported=$((unsupported + 1)); continue; }
    loosen_if_tensor_cores "$name" "$t"
    printf '%s\t%s\t%s\t%s\n' "$name" "$exe" "expected/$name.out" "$pargs" >>"$CASES"
done

# --profile on the GPU (each launch waits for its kernel): train_moons built with it must print
# what the reference executor prints (its table of kernels goes to stderr).
if [ -f "$OUT/expected/examples__train_moons.out" ] && [ -n "$TARGET" ]; then
    name=examples__train_moons_profile
    cp "$OUT/expected/examples__train_moons.out" "$OUT/expected/$name.out"
    exe=$(build "$name" docs/examples/train_moons.tsr --profile)
    printf '%s\t%s\t%s\t%s\n' "$name" "$exe" "expected/$name.out" "" >>"$CASES"
fi

# The einsum differential: checked against NumPy here, then built; appends to cases.txt.
etarget=cuda
[ -z "$TARGET" ] && etarget=native
"$PY" tests/einsum/einsum_diff.py --tsrc "$TSRC" --count "${EINSUM_GPU_COUNT:-200}" \
    --seed "${EINSUM_GPU_SEED:-3}" --batch 20 --emit-cases "$OUT" --target "$etarget" \
    --arch "$ARCH" >"$OUT/log/einsum.log" 2>&1
est=$?
tail -n 1 "$OUT/log/einsum.log" | sed 's/^/prepare.sh: einsum differential (reference executor against NumPy): /'
if [ $est -ne 0 ]; then
    grep -v '^ok ' "$OUT/log/einsum.log" | sed -n '1,30s/^/    /p' >&2
    broken=$((broken + 1))
fi

pack_bin "$OUT" || { echo "prepare.sh: FAIL: packing $OUT/bin into bin.tar.xz" >&2; broken=$((broken + 1)); }
total=$(wc -l <"$CASES")
unbuilt=$(grep -c "^[^$TAB]*$TAB-$TAB" "$CASES")
echo "prepare.sh: $total cases in $CASES, $unbuilt of them not built; $unsupported programs left out (UNSUPPORTED" \
    "above: what --target=cuda does not compile); $OUT holds $(du -sh "$OUT" | cut -f1)"
if [ $broken -ne 0 ] || [ "$unbuilt" -ne 0 ]; then
    echo "prepare.sh: FAILED: some cases could not be built or have no reference output (above)" >&2
    exit 1
fi
exit 0
