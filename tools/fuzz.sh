#!/bin/sh
# fuzz.sh — `make fuzz`: build the libFuzzer target tests/fuzz/fuzz_parse.c with ASan + UBSan
# and run it for a bounded time over a corpus seeded from every test and example program.
# usage: fuzz.sh CC SECONDS DIR GEN   (the Makefile passes them; crashes land in DIR/crashes/)
set -eu
CC=$1 SECONDS_TO_RUN=$2 DIR=$3 GEN=$4
mkdir -p "$DIR/corpus" "$DIR/crashes"
SRC=$(ls compiler/*.c runtime/*.c "$GEN"/*.c | grep -v 'compiler/main.c')
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
echo "fuzz: building $DIR/fuzz_parse"
# shellcheck disable=SC2086
"$CC" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -iquote compiler -I"$GEN" -isystem "$($LLVM_CONFIG --includedir)" \
    tests/fuzz/fuzz_parse.c $SRC -o "$DIR/fuzz_parse" $($LLVM_CONFIG --ldflags --libs) -lm -pthread
for f in $(find tests docs/examples stdlib -name '*.tsr' 2>/dev/null); do
    # even first byte: a whole module
    { printf '\000'; cat "$f"; } >"$DIR/corpus/$(echo "$f" | tr '/' '_')"
done
for s in 'ij;jk=>ik' '...|i->j; ...|j->k => ...|i->k' '... | stride*oh=+kh, 2*ow<+1+kw, ..ic..; kh, kw, ..ic.. -> oc => ... | oh, ow, oc' \
         'x, f; y, f => x^y, f' 'x, f => 1^x^1, 3^f' '..v..|_ 0 _ => ..v..' 'b00c=>c'; do
    printf '\001%s' "$s" >"$DIR/corpus/spec_$(echo "$s" | cksum | cut -d' ' -f1)"
done
echo "fuzz: running for $SECONDS_TO_RUN s (corpus $DIR/corpus, crashes in $DIR/crashes)"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
"$DIR/fuzz_parse" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$DIR/crashes/" \
    -dict=tests/fuzz/tsr.dict "$DIR/corpus" 2>&1 | tail -n 25
