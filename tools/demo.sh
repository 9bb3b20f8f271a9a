#!/bin/sh
# demo.sh — `make demo`: run the compiler over the example programs on the CPU.
# Today tsrc implements its front end, shape and projection inference and a reference
# executor; this demo parses every example, infers the shapes of the ones the current stages
# cover, shows a loop nest and runs shapes.tsr.  It grows with the pipeline.
set -eu
TSRC=${1:-build/tsrc}
echo "== tsrc $($TSRC --version | cut -d' ' -f2): parsing the examples in docs/examples/"
for f in docs/examples/*.tsr; do
    "$TSRC" --parse-only "$f"
    echo "   ok  $f"
done
echo
echo "== docs/examples/shapes.tsr: no hidden size is written; tsrc --print-shapes infers them all"
"$TSRC" --print-shapes docs/examples/shapes.tsr | sed 's/^/   /'
echo
echo "== docs/examples/mlp_lib.tsr (tsrc --print-shapes)"
"$TSRC" --print-shapes docs/examples/mlp_lib.tsr | sed 's/^/   /'
echo
echo "== docs/examples/shapes.tsr: the loop nest of 'total' (tsrc --emit=ir): every loop is a reduction"
echo "   because the result's index map mentions none of them"
"$TSRC" --emit=ir docs/examples/shapes.tsr | sed -n '/einsum .++/,/total\[0\]/p' | sed 's/^/   /'
echo
echo "== docs/examples/shapes.tsr run by the reference executor (tsrc --run --interp), some tensors"
"$TSRC" --run --interp docs/examples/shapes.tsr | awk '/^[^ ]+ : /{show = ($1=="x"||$1=="y"||$1=="total"||$1=="row_sums")} show' | sed 's/^/   /'
