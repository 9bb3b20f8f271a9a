#!/bin/sh
# demo.sh — `make demo`: the main job on the CPU.  Shows the shapes tsrc infers for an example,
# then compiles docs/examples/moons.tsr (the design's training example: `open Nn`, `Train.step`,
# `Train.sgd` with momentum) to a native executable and runs it: a 2-16-16-1 perceptron trained
# on the half-moons data set, printing its loss per epoch and its final accuracy.
set -eu
TSRC=${1:-build/tsrc}
OUT=${2:-build/demo}
mkdir -p "$OUT"
echo "== tsrc $($TSRC --version | cut -d' ' -f2)"
echo
echo "== docs/examples/shapes.tsr: no hidden size is written; tsrc --print-shapes infers them all"
"$TSRC" --print-shapes docs/examples/shapes.tsr | sed 's/^/   /'
echo
echo "== docs/examples/moons.tsr: shapes of the training program"
"$TSRC" --print-shapes docs/examples/moons.tsr | sed 's/^/   /'
echo
echo "== tsrc docs/examples/moons.tsr -o $OUT/moons   (LLVM, -O3, this CPU)"
"$TSRC" docs/examples/moons.tsr -o "$OUT/moons"
echo "== $OUT/moons"
"$OUT/moons" | sed 's/^/   /'
