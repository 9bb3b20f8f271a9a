#!/bin/sh
# output_safety.sh — what tsrc writes, and where, when the file system or the process is hostile
# (run by tests/run.sh; docs/cli.md "Output files"):
#   - odd file names (a path with a star-slash, a newline, quotes, a bidirectional override,
#     invalid UTF-8) reach the generated header only as escaped comment text: the header still
#     compiles as C and C++, and the manifest is valid JSON;
#   - links and files planted at the temporary names of earlier versions (FILE.tmpPID) are
#     neither followed nor overwritten; outputs get mode 0666 less the umask;
#   - -o naming the input (in every mode, through links, or -c's header or manifest) is
#     refused with status 1 and nothing written;
#   - outputs that are not regular files: character devices (a private /dev/null made by
#     mknod, as root; then /dev/null), FIFOs and /dev/fd/N are written as they are and stay;
#     directories and block devices are refused, and so is -c -o /dev/null, and a FIFO for
#     --emit=ptx or --shared (which write a manifest named after it);
#   - SIGINT, SIGTERM and SIGHUP during code generation, linking (a $CC that sleeps) and
#     --run (a program that computes for minutes) leave no temporary and no child behind,
#     and tsrc dies of the signal; a signal ignored by nohup stays ignored;
#   - --depfile's rule, and none after a failed compile.
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

# ---- Planted links and pre-existing temporaries -------------------------------------------
#
# tsrc once wrote FILE.tmpPID and FILE.o.tmpPID without O_EXCL, following a link planted
# there.  Each run below plants, under those names for its own PID (`exec` keeps the PID of
# the shell), a link to a victim file and a regular file: both must be left as they were, and
# the output must be complete.

# planted NAME MODE-ARGS... -- OUTPUTS...: run `tsrc MODE-ARGS` in a fresh directory $T/NAME,
# from a shell that first makes, for its own PID, links OUTPUT.tmpPID and OUTPUT.o.tmpPID to
# $T/NAME/victim and a regular file OUTPUT.json.tmpPID, then becomes tsrc.
planted() {
    name=$1
    shift
    d=$T/$name
    mkdir -p "$d"
    printf 'precious\n' >"$d/victim"
    args=
    while [ "$1" != -- ]; do args="$args $1"; shift; done
    shift
    outs=$*
    # The shell plants, for its own PID, then becomes tsrc.
    (cd "$d" && sh -c '
        for o in '"$outs"'; do
            ln -s victim "$o.tmp$$"
            ln -s victim "$o.o.tmp$$"
            printf "mine\n" >"$o.json.tmp$$" 2>/dev/null
        done
        exec "$0" "$@"' "$TSRC_ABS" $args) >"$T/log" 2>&1
    st=$?
    ok=1
    [ "$(cat "$d/victim")" = precious ] || ok=0
    for o in $outs; do
        [ -s "$d/$o" ] || ok=0
    done
    links=$(find "$d" -type l | wc -l)
    set -- $outs
    if [ $st = 0 ] && [ $ok = 1 ] && [ "$links" = $(($# * 2)) ]; then
        pass "$name: links planted at the old temporary names are not followed; the output is written"
    else
        fail "$name: links planted at the old temporary names are not followed (status $st, victim intact: $ok)"
    fi
    # Nothing of tsrc's own is left behind: only the planted names hold "tmp".
    left=$(ls -A "$d" | grep tmp | grep -v "\.tmp[0-9]*$")
    if [ -z "$left" ]; then pass "$name: no temporary left behind"
    else echo "$left" >"$T/log"; fail "$name: no temporary left behind"; fi
}

case $TSRC in /*) TSRC_ABS=$TSRC ;; *) TSRC_ABS=$PWD/$TSRC ;; esac
SRC=$PWD
planted exe "$SRC/$PROG" -o prog -- prog
planted object -c "$SRC/$PROG" -o m.o -- m.o m.h m.json
planted emit-obj --emit=obj "$SRC/$PROG" -o e.o -- e.o
planted emit-asm --emit=asm "$SRC/$PROG" -o e.s -- e.s
planted dump-ast --dump-ast "$SRC/$PROG" -o a.ast -- a.ast
planted emit-ir --emit=ir "$SRC/$PROG" -o a.ir -- a.ir
planted print-shapes --print-shapes "$SRC/$PROG" -o a.shapes -- a.shapes
if [ -x "$T/exe/prog" ] && "$T/exe/prog" >/dev/null 2>"$T/log"; then pass "exe: the executable written beside planted links runs"
else fail "exe: the executable written beside planted links runs"; fi

# Pre-existing regular files at the old temporary names are neither used nor removed.
d=$T/preexisting
mkdir -p "$d"
(cd "$d" && sh -c 'printf "mine\n" >"m.o.tmp$$"; printf "mine\n" >"m.h.tmp$$"; printf "mine\n" >"prog.tmp$$";
    printf "mine\n" >"prog.o.tmp$$"; exec "$0" -c "$1" -o m.o' "$TSRC_ABS" "$SRC/$PROG") >"$T/log" 2>&1
st=$?
kept=$(cat "$d"/*.tmp* | grep -c mine)
if [ $st = 0 ] && [ "$kept" = 4 ] && [ -s "$d/m.o" ] && [ -s "$d/m.h" ]; then
    pass "pre-existing files at the old temporary names are left as they were"
else fail "pre-existing files at the old temporary names are left as they were (status $st, kept $kept)"; fi

# The files tsrc writes get the usual mode, 0666 (0777 for executables) less the umask.
d=$T/modes
mkdir -p "$d"
if (umask 027 && "$TSRC" -c "$PROG" -o "$d/m.o" && "$TSRC" "$PROG" -o "$d/prog") >"$T/log" 2>&1 &&
   [ "$(stat -c %a "$d/m.o" "$d/m.h" "$d/m.json" "$d/prog" | tr '\n' ' ')" = "640 640 640 750 " ]
then pass "outputs have mode 0666/0777 less the umask"
else stat -c '%a %n' "$d"/* >>"$T/log" 2>&1; fail "outputs have mode 0666/0777 less the umask"; fi

# ---- -o naming the input ------------------------------------------------------------------
#
# The input is never overwritten: exit status 1, a message that says so, nothing written.
# same_as_input NAME INPUT ARGS...: run tsrc ARGS in $T/in-NAME (INPUT is a copy of $PROG
# there, under that name).
same_as_input() {
    name=$1 input=$2
    shift 2
    d=$T/in-$name
    mkdir -p "$d"
    cp "$PROG" "$d/$input"
    cp "$PROG" "$d/original"
    (cd "$d" && exec "$TSRC_ABS" "$@") >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "is the input file '.*': tsrc does not overwrite its input" "$T/log" &&
       cmp -s "$d/$input" "$d/original" && [ "$(ls -A "$d" | wc -l)" = 2 ]; then
        pass "$name: refused, the input intact, nothing written"
    else
        ls -A "$d" >>"$T/log"
        fail "$name: refused, the input intact, nothing written (status $st)"
    fi
}
same_as_input exe prog.tsr prog.tsr -o prog.tsr
same_as_input "exe, default output" prog prog
same_as_input "-c -o x.tsr" x.tsr -c x.tsr -o x.tsr
same_as_input "-c -o x.o with x.h the input" x.h -c x.h -o x.o
same_as_input "-c -o x.o with x.json the input" x.json -c x.json -o x.o
same_as_input "-c -o x with x.json the input" x.json -c x.json -o x
same_as_input "--emit=obj" p.tsr --emit=obj p.tsr -o p.tsr
same_as_input "--emit=llvm -o ./INPUT" p.tsr --emit=llvm p.tsr -o ./p.tsr
same_as_input "--emit=asm" p.tsr --emit=asm p.tsr -o p.tsr
same_as_input "--emit=ir" p.tsr --emit=ir p.tsr -o p.tsr
same_as_input "--dump-ast" p.tsr --dump-ast p.tsr -o p.tsr
same_as_input "--print-shapes" p.tsr --print-shapes p.tsr -o p.tsr
d=$T/in-link
mkdir -p "$d"
cp "$PROG" "$d/p.tsr" && cp "$PROG" "$d/original" && ln -s p.tsr "$d/sym" && ln "$d/p.tsr" "$d/hard"
for out in sym hard; do
    (cd "$d" && exec "$TSRC_ABS" -c p.tsr -o "$out") >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "the object '$out' is the input file 'p.tsr'" "$T/log" && cmp -s "$d/p.tsr" "$d/original" &&
       [ "$(ls -A "$d" | wc -l)" = 4 ]; then pass "-o through a $out link to the input: refused"
    else fail "-o through a $out link to the input: refused (status $st)"; fi
done

# ---- Outputs that are not regular files -------------------------------------------------
#
# A character device or a FIFO is written as it is, never replaced (as root, renaming a
# temporary onto /dev/null would make it a regular file); /dev/stdout, /dev/fd/N and
# /proc/self/fd/N name the descriptor; directories and block devices are refused; -c refuses
# a device as its object.  Root-only checks use a private copy of /dev/null made by mknod, so
# that a regression cannot damage the machine's own; /dev/null itself is used only after
# those passed.

is_char() { [ -c "$1" ] && [ ! -L "$1" ]; }
modes_to() { # modes_to LABEL TARGET: every mode with -o TARGET exits 0 and TARGET stays a device
    for m in "" --emit=obj --emit=asm --emit=llvm --emit=ir --dump-ast --print-shapes; do
        timeout 60 "$TSRC" $m "$PROG" -o "$2" >"$T/log" 2>&1
        st=$?
        if [ $st = 0 ] && is_char "$2"; then pass "${m:-executable} -o $1: written, still a character device"
        else fail "${m:-executable} -o $1: written, still a character device (status $st)"; fi
    done
}
# try_dev_null: whether /dev/null itself may be written to: not as root unless the private
# device node went through every mode unharmed (a regressed tsrc would replace /dev/null).
try_dev_null=1
if [ "$(id -u)" != 0 ]; then
    skip "running as $(id -un), not root: the checks that a device node is not replaced by a regular file (mknod) are skipped"
elif mknod "$T/dev-null" c 1 3 2>"$T/log"; then
    chmod 666 "$T/dev-null"
    before=$failed
    modes_to "a private /dev/null (mknod c 1 3)" "$T/dev-null"
    timeout 60 "$TSRC" -c "$PROG" -o "$T/dev-null" >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "cannot write '$T/dev-null': -c writes an object with a header and a manifest" "$T/log" &&
       is_char "$T/dev-null" && [ ! -e "$T/dev-null.h" ]; then pass "-c -o DEVICE is refused"
    else fail "-c -o DEVICE is refused (status $st)"; fi
    mknod "$T/blk" b 7 0 2>/dev/null
    if [ -b "$T/blk" ]; then
        timeout 60 "$TSRC" --emit=obj "$PROG" -o "$T/blk" >"$T/log" 2>&1
        st=$?
        if [ $st = 1 ] && grep -q "cannot write '$T/blk': it is a block device" "$T/log" && [ -b "$T/blk" ]
        then pass "a block device as output is refused and left as it was"
        else fail "a block device as output is refused and left as it was (status $st)"; fi
    fi
    [ $failed = $before ] || try_dev_null=0
else
    skip "root, but mknod failed: no private device node to try first, so /dev/null is not written to either"
    try_dev_null=0
fi
if [ $try_dev_null = 1 ]; then
    modes_to /dev/null /dev/null
    timeout 60 "$TSRC" -c "$PROG" -o /dev/null >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "cannot write '/dev/null': -c writes an object with a header and a manifest" "$T/log" &&
       is_char /dev/null && [ ! -e /dev/null.h ]; then pass "-c -o /dev/null is refused"
    else fail "-c -o /dev/null is refused (status $st)"; fi
else
    skip "-o /dev/null: not tried (see above)"
fi

# --emit=ptx and --shared write a manifest named after their output, so neither takes a FIFO (or
# /dev/null, whose /dev/null.json they created) for it: refused, nothing beside it.
mkfifo "$T/pipe" 2>/dev/null
for mode in --emit=ptx --shared; do
    timeout 60 "$TSRC" $mode "$PROG" -o "$T/pipe" >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "cannot write '$T/pipe': $mode writes a manifest named after it" "$T/log" &&
       [ -p "$T/pipe" ] && [ ! -e "$T/pipe.json" ]; then pass "$mode -o FIFO is refused, no manifest beside it"
    else fail "$mode -o FIFO is refused, no manifest beside it (status $st)"; fi
done

# -c: a header that is a link to a device is written to it.
d=$T/header-to-null
mkdir -p "$d"
ln -s /dev/null "$d/m.h"
[ -c "$T/dev-null" ] && ln -sf "$T/dev-null" "$d/m.h"
if timeout 60 "$TSRC" -c "$PROG" -o "$d/m.o" >"$T/log" 2>&1 && [ -L "$d/m.h" ] && [ -s "$d/m.o" ] && [ -s "$d/m.json" ] &&
   is_char "$(readlink "$d/m.h")"; then pass "-c with the header a link to a null device: the link stays, the other files are written"
else fail "-c with the header a link to a null device: the link stays, the other files are written"; fi

# A FIFO: what tsrc writes comes out of the other end, and the FIFO stays.
for m in --emit=asm executable; do
    rm -f "$T/fifo" "$T/fifo.out"
    mkfifo "$T/fifo"
    timeout 60 cat "$T/fifo" >"$T/fifo.out" &
    reader=$!
    [ $m = executable ] && m=
    timeout 60 "$TSRC" $m "$PROG" -o "$T/fifo" >"$T/log" 2>&1
    st=$?
    wait $reader
    if [ $st = 0 ] && [ -p "$T/fifo" ] && [ -s "$T/fifo.out" ] &&
       { [ -n "$m" ] || [ "$(head -c 4 "$T/fifo.out" | od -An -c | tr -d ' ')" = '177ELF' ]; }
    then pass "${m:-executable} -o FIFO: the output comes out of the FIFO, which stays"
    else fail "${m:-executable} -o FIFO: the output comes out of the FIFO, which stays (status $st)"; fi
done

# Descriptors by name: the output goes where the descriptor points (here a regular file the
# shell opened), and nothing in /dev or /proc is replaced.
for name in /dev/fd/1 /proc/self/fd/1 /dev/stdout; do
    # A regressed tsrc would replace the link /dev/stdout (as root): tried only when all passed.
    if [ $name = /dev/stdout ] && [ $failed != 0 ]; then skip "-o /dev/stdout: not tried after a failure"; continue; fi
    timeout 60 "$TSRC" --emit=llvm "$PROG" -o $name >"$T/fd.ll" 2>"$T/log"
    st=$?
    if [ $st = 0 ] && grep -q "^define" "$T/fd.ll" && [ -L /dev/stdout ]; then pass "--emit=llvm -o $name writes to the descriptor"
    else fail "--emit=llvm -o $name writes to the descriptor (status $st)"; fi
done
timeout 60 "$TSRC" "$PROG" -o /dev/fd/3 3>"$T/fd.exe" >"$T/log" 2>&1
st=$?
if [ $st = 0 ] && [ "$(head -c 4 "$T/fd.exe" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    pass "an executable to -o /dev/fd/3 is copied into the descriptor"
else fail "an executable to -o /dev/fd/3 is copied into the descriptor (status $st)"; fi

# A directory is an error before anything is compiled.
mkdir -p "$T/adir"
timeout 60 "$TSRC" "$PROG" -o "$T/adir" >"$T/log" 2>&1
st=$?
if [ $st = 1 ] && grep -q "cannot write '$T/adir': it is a directory" "$T/log" && [ -z "$(ls -A "$T/adir")" ] &&
   [ -z "$(ls -A "$T" | grep '^adir\.tmp')" ]; then pass "a directory as output is an error"
else fail "a directory as output is an error (status $st)"; fi

# A file in a directory that takes no new files (/proc): the error says so, not "No such file or
# directory" of a file that exists; /proc/version is untouched.
if [ -f /proc/version ]; then
    timeout 60 "$TSRC" --print-shapes "$PROG" -o /proc/version >"$T/log" 2>&1
    st=$?
    if [ $st = 1 ] && grep -q "cannot write '/proc/version': its directory '/proc' takes no new files" "$T/log"
    then pass "an output whose directory takes no new files is an error saying so"
    else fail "an output whose directory takes no new files is an error saying so (status $st)"; fi
fi

# ---- Signals -----------------------------------------------------------------------------
#
# tsrc killed by SIGINT, SIGTERM or SIGHUP while it generates code, while the linker runs and
# while --run's program runs leaves no temporary behind, no child running, and dies of the
# signal (status 128+N).  Each run starts in the background with the signals at their default
# action (a non-interactive shell starts background jobs with SIGINT ignored, and tsrc keeps
# an ignored signal ignored), and is signalled once the phase has been reached.

# with_default_signals CMD...: run CMD with SIGINT, SIGTERM and SIGHUP at their default action.
with_default_signals() {
    if env --default-signal=INT true 2>/dev/null; then exec env --default-signal=INT,TERM,HUP "$@"; fi
    exec /usr/bin/python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
# wait_for TEST-EXPRESSION: poll (20 s at most) until the shell expression holds.
wait_for() {
    i=0
    while ! eval "$1"; do
        i=$((i + 1))
        [ $i -gt 400 ] && return 1
        sleep 0.05
    done
}
# signal_number NAME
signal_number() { case $1 in INT) echo 2 ;; TERM) echo 15 ;; HUP) echo 1 ;; esac; }

# A program whose code generation takes seconds: hundreds of kernels (each layer reads the one
# before transposed, so the schedule cannot fuse neighbouring layers into one nest), each a
# different composition of five activations (the digits of i in base 4), so that no two are
# the same code and merging them (cg_cpu.c, "Splitting") does not make them one.
awk 'BEGIN { split("relu tanh sigmoid abs", f, " "); print "let%op x0 = { x0; o = [8; 8] }"
             for (i = 1; i < 500; i++) { e = "(x" (i - 1) " ++ \"a, b => b, a\") *. 1.0001"; n = i
                 for (d = 0; d < 5; d++) { e = f[n % 4 + 1] " (" e ")"; n = int(n / 4) }
                 printf "let%%op x%d = %s\n", i, e } }' >"$T/big.tsr"

# codegen LABEL SIGNAL ARGS...: tsrc ARGS (writing into $T/cg-LABEL) gets SIGNAL once a
# temporary exists there, which it makes just before generating code.
codegen() {
    label=$1 sig=$2
    shift 2
    d=$T/cg-$label
    mkdir -p "$d"
    (cd "$d" && with_default_signals "$TSRC_ABS" "$@") >"$T/log" 2>&1 &
    pid=$!
    if wait_for '[ -n "$(ls -A "$d" | grep tmp)" ] || ! kill -0 $pid 2>/dev/null'; then sleep 0.3; fi
    during=no
    [ -n "$(ls -A "$d" | grep tmp)" ] && during=yes
    kill -s "$sig" $pid 2>/dev/null
    { wait $pid; } 2>/dev/null # (no 'Terminated' from the shell)
    st=$?
    left=$(ls -A "$d")
    if [ $during = yes ] && [ $st = $((128 + $(signal_number "$sig"))) ] && [ -z "$left" ]; then
        pass "SIG$sig during code generation ($label): tsrc dies of it and leaves nothing behind"
    else
        echo "signalled during code generation: $during; left: $left" >>"$T/log"
        fail "SIG$sig during code generation ($label): tsrc dies of it and leaves nothing behind (status $st)"
    fi
}
codegen c INT -c "$T/big.tsr" -o big.o
codegen emit TERM --emit=obj "$T/big.tsr" -o big.o
codegen exe HUP "$T/big.tsr" -o big

# A linker that only waits: it writes its pid, then sleeps (the pid stays: exec).
cat >"$T/slow-cc" <<'CC'
#!/bin/sh
echo $$ >"$SLOW_CC_PID"
exec sleep 60
CC
chmod +x "$T/slow-cc"
for sig in INT TERM; do
    d=$T/link-$sig
    mkdir -p "$d"
    rm -f "$T/cc.pid"
    (cd "$d" && CC="$T/slow-cc" SLOW_CC_PID="$T/cc.pid" with_default_signals "$TSRC_ABS" "$SRC/$PROG" -o prog) \
        >"$T/log" 2>&1 &
    pid=$!
    wait_for '[ -s "$T/cc.pid" ] || ! kill -0 $pid 2>/dev/null'
    ccpid=$(cat "$T/cc.pid" 2>/dev/null)
    kill -s $sig $pid 2>/dev/null
    { wait $pid; } 2>/dev/null # (no 'Terminated' from the shell)
    st=$?
    cc_alive=no
    if [ -n "$ccpid" ] && kill -0 "$ccpid" 2>/dev/null; then cc_alive=yes; kill "$ccpid"; fi
    left=$(ls -A "$d")
    if [ -n "$ccpid" ] && [ $st = $((128 + $(signal_number $sig))) ] && [ -z "$left" ] && [ $cc_alive = no ]; then
        pass "SIG$sig while linking: the linker is stopped, tsrc dies of the signal, nothing is left"
    else
        echo "linker pid: ${ccpid:-none}, still running: $cc_alive; left: $left" >>"$T/log"
        fail "SIG$sig while linking: the linker is stopped, tsrc dies of the signal, nothing is left (status $st)"
    fi
done

# --run: a program that computes for minutes; its temporary directory is in $TMPDIR.
name=spin_$$
cat >"$T/$name.tsr" <<'TSR'
let%op a = { a; i = [128]; o = [128] }
let%op b = { b; i = [128]; o = [128] }
let%op c = a * b
routine r = c.forward
main =
  for s = 0 to 100000000 do run r done
TSR
for sig in INT TERM; do
    mkdir -p "$T/tmp-$sig"
    (TMPDIR="$T/tmp-$sig" with_default_signals "$TSRC_ABS" --run "$T/$name.tsr") >"$T/log" 2>&1 &
    pid=$!
    # Running: the executable is in place and the object is gone.
    wait_for '[ -n "$(ls "$T/tmp-$sig"/*/"$name" 2>/dev/null)" ] && [ -z "$(ls "$T/tmp-$sig"/*/object.o 2>/dev/null)" ] || ! kill -0 $pid 2>/dev/null'
    sleep 0.5
    running=$(ps -eo pid=,args= | awk -v n="$name" '$2 == n { print $1 }')
    kill -s $sig $pid 2>/dev/null
    { wait $pid; } 2>/dev/null # (no 'Terminated' from the shell)
    st=$?
    orphans=$(ps -eo pid=,args= | awk -v n="$name" '$2 == n { print $1 }')
    [ -n "$orphans" ] && kill $orphans
    left=$(ls -A "$T/tmp-$sig")
    if [ -n "$running" ] && [ -z "$orphans" ] && [ -z "$left" ] && [ $st = $((128 + $(signal_number $sig))) ]; then
        pass "SIG$sig during --run: the program is stopped, its directory removed, tsrc dies of the signal"
    else
        echo "program before: ${running:-not running}; after: ${orphans:-none}; left: $left" >>"$T/log"
        fail "SIG$sig during --run: the program is stopped, its directory removed, tsrc dies of the signal (status $st)"
    fi
done

# An ignored signal stays ignored (nohup): the compile finishes.
d=$T/nohup
mkdir -p "$d"
(cd "$d" && exec nohup "$TSRC_ABS" --emit=obj "$SRC/$PROG" -o p.o) >"$T/log" 2>&1 &
pid=$!
sleep 0.2
kill -s HUP $pid 2>/dev/null
{ wait $pid; } 2>/dev/null
st=$?
if [ $st = 0 ] && [ -s "$d/p.o" ]; then pass "SIGHUP ignored by nohup stays ignored"
else fail "SIGHUP ignored by nohup stays ignored (status $st)"; fi

# --depfile: a Make rule of every output on the program and the modules it opened (a name with
# a space escaped); nothing for a failed compile; refused where there is no output file.
mkdir -p "$T/dep dir"
printf 'let%%op k = { k = [ 1.; 2. ] }\n' >"$T/dep dir/consts.tsr"
printf 'open Consts\nlet%%op y = Consts.k *. 2.\nroutine go = y.forward\n' >"$T/dep dir/main.tsr"
tsrc_abs=$(cd "$(dirname "$TSRC")" && pwd)/$(basename "$TSRC")
if (cd "$T" && "$tsrc_abs" -c "dep dir/main.tsr" -o m.o --depfile=m.d) >"$T/log" 2>&1 &&
   [ "$(cat "$T/m.d")" = 'm.o m.h m.json: dep\ dir/main.tsr dep\ dir/consts.tsr' ] &&
   grep -q "\"sources\": \[\"$T/dep dir/main.tsr\", \"$T/dep dir/consts.tsr\"\]" "$T/m.json"; then
    pass "--depfile writes the rule of -c's outputs on the program and its module; the manifest lists them"
else fail "--depfile writes the rule of -c's outputs on the program and its module; the manifest lists them"; fi
printf 'let%%op y = [1.] + [1.; 2.]\n' >"$T/bad.tsr"
if ! "$TSRC" "$T/bad.tsr" -o "$T/bad" --depfile="$T/bad.d" >"$T/log" 2>&1 && [ ! -e "$T/bad.d" ]; then
    pass "a failed compile writes no depfile"
else fail "a failed compile writes no depfile"; fi
"$TSRC" --check "$T/bad.tsr" --depfile="$T/x.d" >"$T/log" 2>&1
if [ $? = 2 ] && grep -q "'--depfile' goes with an output file" "$T/log"; then pass "--depfile with --check is a usage error"
else fail "--depfile with --check is a usage error"; fi
# A depfile that would be the input or one of the outputs is refused before anything is
# written; one that cannot be written fails the compile before the outputs are made.
# depfile_refused MESSAGE ARGS…: tsrc ARGS, run in "dep dir", exits 1 saying MESSAGE and makes no k.o.
depfile_refused() {
    message=$1; shift
    (cd "$T/dep dir" && "$tsrc_abs" "$@") >"$T/log" 2>&1
    [ $? = 1 ] && grep -q "$message" "$T/log" && [ ! -e "$T/dep dir/k.o" ]
}
cp "$T/dep dir/main.tsr" "$T/dep dir/keep.tsr"
cp "$T/dep dir/consts.tsr" "$T/dep dir/consts.keep"
rm -f "$T/dep dir/fresh"
if depfile_refused "the --depfile 'keep.tsr' is the input file 'keep.tsr'" -c keep.tsr -o k.o --depfile=keep.tsr &&
   cmp -s "$T/dep dir/main.tsr" "$T/dep dir/keep.tsr"; then pass "a --depfile that is the input file is refused, the input untouched"
else fail "a --depfile that is the input file is refused, the input untouched"; fi
if depfile_refused "the --depfile 'k.h' is also an output of this compile ('k.h')" -c main.tsr -o k.o --depfile=k.h &&
   [ ! -e "$T/dep dir/k.h" ]; then pass "a --depfile that is one of the outputs is refused"
else fail "a --depfile that is one of the outputs is refused"; fi
if depfile_refused "the --depfile 'fresh' is also an output of this compile ('./fresh')" main.tsr -o ./fresh --depfile=fresh &&
   [ ! -e "$T/dep dir/fresh" ]; then pass "a --depfile that is an output not made yet, spelled otherwise, is refused"
else fail "a --depfile that is an output not made yet, spelled otherwise, is refused"; fi
if depfile_refused "the --depfile 'consts.tsr' is './consts.tsr', which the program opens" -c main.tsr -o k.o --depfile=consts.tsr &&
   cmp -s "$T/dep dir/consts.tsr" "$T/dep dir/consts.keep"; then pass "a --depfile that is a module the program opens is refused, the module untouched"
else fail "a --depfile that is a module the program opens is refused, the module untouched"; fi
# So is an output (-o) that is a module the program opens (it replaced the module's source with
# an object, or with --print-shapes' text), in every mode.
for args in "-c main.tsr -o consts.tsr" "main.tsr -o consts.tsr" "--print-shapes main.tsr -o consts.tsr" \
            "--emit=llvm main.tsr -o ./consts.tsr"; do
    # shellcheck disable=SC2086
    if depfile_refused "the output '[./]*consts.tsr' is '[./]*consts.tsr', which the program opens: tsrc does not overwrite its sources (choose another name with -o)" $args &&
       cmp -s "$T/dep dir/consts.tsr" "$T/dep dir/consts.keep"; then pass "an output that is a module the program opens is refused, the module untouched ($args)"
    else cp "$T/dep dir/consts.keep" "$T/dep dir/consts.tsr"; fail "an output that is a module the program opens is refused, the module untouched ($args)"; fi
done
mkdir -p "$T/dep dir/d.d"
(cd "$T/dep dir" && "$tsrc_abs" -c main.tsr -o k.o --depfile=d.d; echo "status $?" >status;
 "$tsrc_abs" -c main.tsr -o k.o --depfile=no/such/dir.d; echo "status $?" >>status) >"$T/log" 2>&1
if [ "$(cat "$T/dep dir/status")" = "status 1
status 1" ] && [ ! -e "$T/dep dir/k.o" ] && [ ! -e "$T/dep dir/k.h" ] && [ ! -e "$T/dep dir/k.json" ]; then
    pass "a --depfile that cannot be written fails the compile and leaves no output"
else fail "a --depfile that cannot be written fails the compile and leaves no output"; fi
# --shared whose link fails leaves the library an earlier run wrote as it was.
echo "earlier library" >"$T/libkeep.so"
CC=false "$TSRC" --shared "$T/dep dir/consts.tsr" -o "$T/libkeep.so" >"$T/log" 2>&1
if [ $? = 1 ] && [ "$(cat "$T/libkeep.so")" = "earlier library" ]; then
    pass "--shared whose link fails keeps the earlier library"
else fail "--shared whose link fails keeps the earlier library"; fi
# An output name too long for the file system is refused before anything is written (-c's
# manifest name is the longest of its three: the object and the header were renamed into place).
long=$(printf 'f%.0s' $(seq 1 251))
(cd "$T" && echo old >"$long.o" && "$tsrc_abs" -c "dep dir/consts.tsr" -o "$long.o") >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "cannot write the manifest '$long.json': File name too long" "$T/log" &&
   [ "$(cat "$T/$long.o")" = old ] && [ ! -e "$T/$long.h" ]; then
    pass "-c with a manifest name too long writes nothing"
else fail "-c with a manifest name too long writes nothing"; fi
# Standard output that cannot be written (a full disk): a message and status 1, in every mode
# that prints.
if [ -w /dev/full ]; then
    for mode in --print-shapes --emit=ir --dump-ast "--run --interp"; do
        "$TSRC" $mode "$T/dep dir/consts.tsr" >/dev/full 2>"$T/log"
        if [ $? = 1 ] && grep -q "^tsrc: error: cannot write to the standard output: No space left on device" "$T/log"; then
            pass "$mode to a full disk: a message"
        else fail "$mode to a full disk: a message"; fi
    done
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
