#!/bin/sh
# demo.sh — `make demo`: the main job on the CPU.  Shows the shapes tsrc infers for an example,
# then compiles docs/examples/train_moons.tsr to a native executable and runs it: a small
# perceptron trained on the half-moons data set, printing its loss and accuracy per epoch.
set -eu
TSRC=${1:-build/tsrc}
OUT=${2:-build/demo}
mkdir -p "$OUT"
echo "== tsrc $($TSRC --version | cut -d' ' -f2)"
echo
echo "== docs/examples/shapes.tsr: no hidden size is written; tsrc --print-shapes infers them all"
"$TSRC" --print-shapes docs/examples/shapes.tsr | sed 's/^/   /'
echo
echo "== docs/examples/train_moons.tsr: shapes of the training program"
"$TSRC" --print-shapes docs/examples/train_moons.tsr | sed 's/^/   /'
echo
echo "== tsrc docs/examples/train_moons.tsr -o $OUT/train_moons   (LLVM, -O3, this CPU)"
"$TSRC" docs/examples/train_moons.tsr -o "$OUT/train_moons"
echo "== $OUT/train_moons"
"$OUT/train_moons" | sed 's/^/   /'
