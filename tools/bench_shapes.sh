#!/bin/sh
# bench_shapes.sh — `make bench-shapes`: time tsrc --check (shape inference, then the assignments
# and loops) on generated MLPs of 10, 100, 1000 and 3000 layers and print the time per layer.
# A benchmark, not a test: it asserts nothing; docs/performance.md records its output.
#   sh tools/bench_shapes.sh [TSRC]
set -eu
TSRC=${1:-build/tsrc}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

gen() { # gen LAYERS FILE: an MLP whose every layer is a fresh application of one layer function
    n=$1
    {
        echo "input { x; b = [32]; o = [64] }"
        echo "let%op layer ~hid () x = relu ({ w } * x + { b = 0.; o = [ hid ] })"
        echo "let%op h0 = x"
        i=1
        while [ "$i" -le "$n" ]; do
            echo "let%op h$i = layer ~hid:64 () h$((i - 1))"
            i=$((i + 1))
        done
    } >"$2"
}

now() { date +%s.%N; }

printf '%8s %12s %14s\n' layers seconds us/layer
for n in 10 100 1000 3000; do
    gen "$n" "$TMP/mlp$n.tsr"
    best=
    for rep in 1 2 3; do
        t0=$(now)
        "$TSRC" --check "$TMP/mlp$n.tsr"
        t1=$(now)
        t=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    done
    printf '%8d %12.4f %14.1f\n' "$n" "$best" "$(echo "$best * 1000000 / $n" | bc -l)"
done
