#!/bin/sh
# demo.sh — `make demo`: run the compiler over the example programs on the CPU.
# Today tsrc implements its front end (lexer, parser, spec parser); this demo parses every
# example and shows the tree the later stages start from.  It grows with the pipeline.
set -eu
TSRC=${1:-build/tsrc}
echo "== tsrc $($TSRC --version | cut -d' ' -f2): parsing the examples in docs/examples/"
for f in docs/examples/*.tsr; do
    "$TSRC" --parse-only "$f"
    echo "   ok  $f"
done
echo
echo "== the syntax tree of docs/examples/gnn.tsr's 'edges' operator (tsrc --dump-ast):"
"$TSRC" --dump-ast docs/examples/gnn.tsr | awk '/^let%op edges/ { on = 1 } on && /^let/ && !/edges/ { exit } on'
