#!/bin/sh
# output_safety.sh — what tsrc writes, and where, when the file system or the process is hostile
# (run by tests/run.sh; docs/cli.md "Output files"):
#   - odd file names (a path with a star-slash, a newline, quotes, a bidirectional override,
#     invalid UTF-8) reach the generated header only as escaped comment text: the header still
#     compiles as C and C++, and the manifest is valid JSON.
# Usage: output_safety.sh TSRC.  One PASS/FAIL line per check (SKIP lines are not counted);
# the last line is "N passed, N failed".
set -u
TSRC=$1
INC=runtime
T=$(mktemp -d "${TMPDIR:-/tmp}/tsrc-outsafe.XXXXXX")
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "$T/log" ] && sed -n '1,15s/^/    /p' "$T/log"; }
skip() { echo "SKIP $1"; }

PROG=tests/native/affine.tsr

# ---- Odd file names in the generated header and manifest ------------------------------------

# A directory whose name ends a comment, starts a preprocessor line and opens a new comment:
# written raw into the header's first comment, it would stop the header from compiling.
odd=$(printf '%s/odd*/x"q'"'"'\\ ??/\n#error injected by the path\n/*y \342\200\256 \377' "$T")
mkdir -p "$odd" && cp "$PROG" "$odd/m.tsr"
if "$TSRC" -c "$odd/m.tsr" -o "$T/m.o" >"$T/log" 2>&1 && [ -f "$T/m.h" ]; then
    pass "-c compiles a program whose path holds a star-slash, a newline and quotes"
    for lang in c c++; do
        std=c11; [ $lang = c++ ] && std=c++17
        printf '#include "m.h"\nint main(void) { return 0; }\n' >"$T/inc.$lang"
        if cc -x $lang -std=$std -Wall -Wextra -Werror -pedantic -I"$T" -I$INC -c "$T/inc.$lang" -o "$T/inc.o" \
              >"$T/log" 2>&1; then pass "the header of an oddly named program compiles as $lang"
        else fail "the header of an oddly named program compiles as $lang"; fi
    done
    first=$(head -n 1 "$T/m.h")
    want='odd*\/x"q'"'"'\\ ?\?/\x0a#error injected by the path\x0a/\*y \u202e \xff/m.tsr.  Do not edit.'
    case $first in
        *"$want") pass "the path is escaped in the header's first line" ;;
        *) printf '%s\n' "$first" >"$T/log"; fail "the path is escaped in the header's first line" ;;
    esac
    if [ "$(grep -c 'injected' "$T/m.h")" = 1 ] && ! grep -q '^#error' "$T/m.h" &&
       [ "$(grep -c '\*/' "$T/m.h")" = "$(grep -c '/\*' "$T/m.h")" ]
    then pass "the path stays on the header's first line, inside its comment"
    else fail "the path stays on the header's first line, inside its comment"; fi
    if /usr/bin/python3 -c 'import json,sys; json.loads(open(sys.argv[1], encoding="utf-8").read())' "$T/m.json" \
          >"$T/log" 2>&1; then pass "the manifest of an oddly named program is valid JSON"
    else fail "the manifest of an oddly named program is valid JSON"; fi
else
    fail "-c compiles a program whose path holds a star-slash, a newline and quotes"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
