#!/bin/sh
# fuzz.sh — `make fuzz`: build the libFuzzer targets of tests/fuzz/ with ASan + UBSan and run
# each in turn for a bounded time over a corpus seeded from the project's own inputs:
#   parse    lexer, parser, spec parser, elaboration, shape inference, lowering, optimisation
#            (fuzz_parse.c; seeds: every test, example and stdlib program, some specs)
#   compile  the programs that pass --check on to scheduling and an object through LLVM, in
#            memory (fuzz_compile.c; seeds: the same programs, at every -O level and CPU, as
#            executables and in object mode with the header and manifest)
#   data     the .npy, CSV and .npz checkpoint loaders (fuzz_data.c; seeds: data_seeds.py and
#            tests/native/data/)
#   image    the runtime's model image reader on images of real programs edited and given a
#            valid checksum (fuzz_image.c; seeds: tests/fuzz/regress/image/)
# The compiler and runtime are compiled once into DIR/obj; each target links them.  An input
# may take 30 s (parse, compile) or 10 s (data); the targets keep compile-time evaluation to a
# 32 MB budget and huge valid programs away from LLVM (tests/fuzz/fuzz_common.c), so only a
# hang comes near that.  Findings (crash-*, leak-*, timeout-*, oom-* files; slow-unit-* files
# are notes, not findings) land in DIR/crashes/TARGET/; the script ends with one line per
# target and exits 1 when any target found something.  Keep a finding, once fixed, in
# tests/fuzz/regress/TARGET/: `make check` replays those (tests/fuzz/replay.c).
# usage: fuzz.sh CC SECONDS DIR GEN [TARGET…]   (the Makefile passes them; default: all four)
set -eu
CC=$1 SECONDS_TO_RUN=$2 DIR=$3 GEN=$4
shift 4
TARGETS=${*:-parse compile data image}
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
PYTHON=${PYTHON:-python3}
JOBS=${FUZZ_JOBS:-2}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
FLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -iquote compiler -iquote . -iquote runtime -I$GEN -isystem $($LLVM_CONFIG --includedir)"
WARNINGS="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter"
mkdir -p "$DIR/obj"

# The compiler and the runtime, instrumented for coverage: an object is rebuilt when its source
# or any header is newer.
newest_header=$(ls -t compiler/*/*.h runtime/*.h "$GEN"/*.h | head -n 1)
echo "fuzz: compiling the compiler and runtime into $DIR/obj"
SOURCES=$(ls compiler/*/*.c runtime/*.c "$GEN"/*.c)
OBJECTS=$(for src in $SOURCES; do echo "$DIR/obj/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"; done)
for src in $SOURCES; do
    obj="$DIR/obj/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then echo "$src $obj"; fi
done | xargs -r -n 2 -P "$JOBS" sh -c '"$0" '"$FLAGS $SAN"' -fsanitize=fuzzer-no-link -w -c "$1" -o "$2"' "$CC"

corpus_programs() { # $1: the corpus; the first bytes cycle through 0 … $2-1, times $3
    k=0
    for f in $(find tests docs/examples stdlib -name '*.tsr' 2>/dev/null | sort); do
        { printf "\\$(printf '%03o' $((k % $2 * $3)))"; cat "$f"; } >"$1/$(echo "$f" | tr '/' '_')"
        k=$((k + 1))
    done
}

findings() { # the inputs libFuzzer saved in $1 as findings (not its slow-unit-* notes)
    ls "$1" | grep -c -E '^(crash|leak|timeout|oom)-' || true
}

status=0
summary=""
for t in $TARGETS; do
    case $t in
        parse) timeout=30 max_len=4096 dict=tests/fuzz/tsr.dict ;;
        compile) timeout=30 max_len=4096 dict=tests/fuzz/tsr.dict ;;
        data) timeout=10 max_len=16384 dict=tests/fuzz/data.dict ;;
        image) timeout=10 max_len=1024 dict= ;;
        *) echo "fuzz: no target '$t' (parse, compile, data, image)" >&2; exit 2 ;;
    esac
    corpus="$DIR/corpus/$t" crashes="$DIR/crashes/$t"
    mkdir -p "$corpus" "$crashes"
    echo "fuzz: building $DIR/fuzz_$t"
    # shellcheck disable=SC2086
    "$CC" $FLAGS $WARNINGS $SAN -fsanitize=fuzzer tests/fuzz/fuzz_$t.c tests/fuzz/fuzz_common.c $OBJECTS \
        -o "$DIR/fuzz_$t" \
        $($LLVM_CONFIG --ldflags --libs) -lm -pthread
    case $t in
        parse)
            corpus_programs "$corpus" 1 0
            for s in 'ij;jk=>ik' '...|i->j; ...|j->k => ...|i->k' \
                     '... | stride*oh=+kh, 2*ow<+1+kw, ..ic..; kh, kw, ..ic.. -> oc => ... | oh, ow, oc' \
                     'x, f; y, f => x^y, f' 'x, f => 1^x^1, 3^f' '..v..|_ 0 _ => ..v..' 'b00c=>c' 'i =>' 'i;=>i'; do
                printf '\001%s' "$s" >"$corpus/spec_$(echo "$s" | cksum | cut -d' ' -f1)"
            done ;;
        compile) corpus_programs "$corpus" 32 1 ;; # every -O level, CPU and mode
        data) "$PYTHON" tests/fuzz/data_seeds.py "$corpus" tests/native/data/* ;;
        image) cp tests/fuzz/regress/image/* "$corpus/" ;; # one per seed image, and past findings
    esac
    before=$(findings "$crashes")
    echo "fuzz: $t: running for $SECONDS_TO_RUN s (corpus $corpus, findings in $crashes)"
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$DIR/fuzz_$t" -max_total_time="$SECONDS_TO_RUN" -timeout="$timeout" -rss_limit_mb=2048 \
        -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$crashes/" \
        ${dict:+-dict="$dict"} "$corpus" >"$DIR/$t.log" 2>&1 || true
    tail -n 25 "$DIR/$t.log"
    found=$(($(findings "$crashes") - before))
    if [ "$found" -gt 0 ]; then
        status=1
        summary="$summary
fuzz: $t: $found new finding(s) in $crashes (log: $DIR/$t.log)"
    else
        summary="$summary
fuzz: $t: no finding in $SECONDS_TO_RUN s ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$DIR/$t.log" | grep -o '[0-9]*$' || echo '?') inputs)"
    fi
done
echo "$summary" | sed '/^$/d'
exit $status
