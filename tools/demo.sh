#!/bin/sh
# demo.sh — `make demo`: run the compiler over the example programs on the CPU.
# Today tsrc implements its front end and shape inference; this demo parses every example,
# infers the shapes of the ones the current stages cover and prints them.  It grows with the
# pipeline.
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
