#!/bin/sh
# checkpoint.sh — checkpoints end to end (run by tests/run.sh; docs/runtime.md §14).
#
#   - checkpoint_train.tsr trains, saves model.npz (every parameter) and head.npz (w2 and b1),
#     and prints its predictions; the executable and `tsrc --run --interp` write byte-identical
#     files, which numpy.load reads with the parameters' names, shapes and values;
#   - checkpoint_predict.tsr, untrained, with `--load model.npz` prints exactly the trained
#     predictions (both executors, either one's file); its `load "head.npz" [w2; b1]` changes
#     only those two; numpy.savez's own files (float64 too) load the same; a whole load into a
#     model lacking one of the file's trained parameters (tsrc.parameters) is refused;
#   - the header of `tsrc -c` has MODULE_save / MODULE_load: a C driver loads, saves an
#     identical file, and a failed load leaves the state as it was;
#   - errors: a missing file, a missing array, a wrong shape, not a zip, a compressed member, an
#     array twice, a
#     file cut short, a damaged member (CRC), a directory, an unwritable save, `--load` without
#     a path: each one message naming the file and the array, status 1 (2 for the command line),
#     the same from both executors, and a failed save leaves no file behind;
#   - --init-from reads the parameters a file shares with the model (a model grown by a
#     parameter, one lacking w2), keeps the others, says what it kept and left on stderr, and
#     refuses a file of none of them, a shared name of another shape and --load beside it;
#     tsr_state_init_from in C counts what it read;
#   - a hostile directory: a link planted where a temporary could be is not written through, and a
#     FIFO at the checkpoint's name is refused, not replaced;
#   - where --save points: a stream (/dev/stdout, /proc/self/fd/N) and a directory that takes no
#     new files are refused before main; a link to a file is written through; a data item's file
#     and the running executable are refused; SIGTERM mid-save removes the temporary.
# Usage: checkpoint.sh TSRC LIBDIR.  Last line: "N passed, N failed".
set -u
INC=$(pwd)/runtime
PY=${PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/harness.sh"
harness_tools "$1" "$2"
harness_start ckpt

mkdir "$T/native" "$T/interp"
cp tests/native/checkpoint_train.tsr tests/native/checkpoint_predict.tsr "$T/"
for p in checkpoint_train checkpoint_predict; do
    if ! "$TSRC" "$T/$p.tsr" -o "$T/$p" >"$T/log" 2>&1; then fail "$p.tsr compiles"; summary; exit 1; fi
done

# Train with both executors: the same output, the same bytes in the checkpoints.
(cd "$T/native" && ../checkpoint_train) >"$T/train.native" 2>"$T/log" && [ -s "$T/native/model.npz" ] &&
    [ -s "$T/native/head.npz" ] && [ -z "$(ls -A "$T/native" | grep -v '^head.npz$\|^model.npz$')" ] && pass || fail "the executable saves model.npz and head.npz"
(cd "$T/interp" && "$TSRC" --run --interp ../checkpoint_train.tsr) >"$T/train.interp" 2>"$T/log" &&
    cmp -s "$T/train.native" "$T/train.interp" && cmp -s "$T/native/model.npz" "$T/interp/model.npz" &&
    cmp -s "$T/native/head.npz" "$T/interp/head.npz" && pass ||
    fail "the reference executor prints the same and writes the same checkpoint bytes"

# numpy.load: names, shapes (memory order), values (w2 as the program printed it), CRCs.
if "$PY" - "$T/native" "$T/train.native" >"$T/log" 2>&1 <<'EOF'
import sys, zipfile, numpy as np
d, printed = sys.argv[1], open(sys.argv[2]).read().split("\n")
with zipfile.ZipFile(d + "/model.npz") as z:
    assert z.testzip() is None, "a CRC-32 does not match"
m = np.load(d + "/model.npz")
# Every parameter, the run counter of the training state (the program has no optimiser state)
# and the seed: tsrc.runs holds (high, low) 24-bit halves of the count of routine runs,
# tsrc.seed the run's seed (0, the default) as an int64.
# tsrc.parameters names the parameters the model trains, each followed by a newline (uint8).
assert sorted(m.files) == ["b1", "tsrc.parameters", "tsrc.runs", "tsrc.seed", "w1", "w2"], m.files
assert m["tsrc.parameters"].dtype == np.uint8 and bytes(m["tsrc.parameters"]) == b"w1\nb1\nw2\n", m["tsrc.parameters"]
runs = m["tsrc.runs"]
assert runs.shape == (2,) and runs[0] == 0 and runs[1] >= 1 and runs[1] == int(runs[1]), runs
assert m["tsrc.seed"].dtype == np.int64 and m["tsrc.seed"].tolist() == [0], m["tsrc.seed"]
assert m["w1"].shape == (4, 2) and m["b1"].shape == (4,) and m["w2"].shape == (1, 4), [m[k].shape for k in m.files]
assert all(m[k].dtype == np.float32 for k in m.files if k not in ("tsrc.seed", "tsrc.parameters"))
w2 = printed[printed.index("w2 : 4->1") + 1].split()
assert ["%g" % v for v in m["w2"][0]] == w2, (m["w2"], w2)
h = np.load(d + "/head.npz")
assert sorted(h.files) == ["b1", "w2"] and (h["w2"] == m["w2"]).all() and (h["b1"] == m["b1"]).all()
np.savez(d + "/numpy64.npz", w2=m["w2"].astype(np.float64), w1=m["w1"].astype(np.float64), b1=m["b1"])
np.savez(d + "/shape.npz", w1=np.ascontiguousarray(m["w1"].T), b1=m["b1"], w2=m["w2"])
np.savez_compressed(d + "/zipped.npz", **{k: m[k] for k in m.files if not k.startswith("tsrc.")})
import io, zipfile
with zipfile.ZipFile(d + "/twice.npz", "w") as z:  # w1 twice: numpy.load would take the second
    for k, v in (("w1", m["w1"]), ("w1", 0 * m["w1"]), ("b1", m["b1"]), ("w2", m["w2"])):
        b = io.BytesIO()
        np.save(b, v)
        z.writestr(k + ".npy", b.getvalue())
EOF
then pass; else fail "numpy.load reads model.npz and head.npz with the parameters' names, shapes and values"; fi

# The trained predictions: the first grid of the training run's output.
sed -n '/^predictions/,/^w2 /p' "$T/train.native" | sed '$d' >"$T/trained"
for exe in native interp; do
    run() { if [ $exe = native ]; then (cd "$T/native" && ../checkpoint_predict "$@"); else (cd "$T/native" && "$TSRC" --run --interp ../checkpoint_predict.tsr -- "$@"); fi; }
    for file in model.npz ../interp/model.npz numpy64.npz; do
        run --load "$file" >"$T/out" 2>"$T/log"
        n=$(grep -c '^predictions' "$T/out")
        awk '/^predictions/ { k++ } k == 1' "$T/out" >"$T/first"
        awk '/^predictions/ { k++ } k == 2' "$T/out" >"$T/second"
        if [ "$n" = 2 ] && cmp -s "$T/first" "$T/trained" && cmp -s "$T/second" "$T/trained"; then pass
        else fail "$exe: --load $file prints the trained predictions"; fi
    done
    run >"$T/out" 2>"$T/log"
    awk '/^predictions/ { k++ } k == 1' "$T/out" >"$T/first"
    awk '/^predictions/ { k++ } k == 2' "$T/out" >"$T/second"
    if ! cmp -s "$T/first" "$T/trained" && ! cmp -s "$T/second" "$T/trained" && ! cmp -s "$T/first" "$T/second"; then pass
    else fail "$exe: without --load, the untrained model predicts otherwise, and load of [w2; b1] changes only those"; fi
done

# Errors: one message naming the file and the array, status 1, from both executors alike.
# expect CASE STATUS MESSAGE ARGS…
expect() {
    name=$1 want=$2 msg=$3
    shift 3
    (cd "$T/native" && exec timeout 20 ../checkpoint_predict "$@") >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = "$want" ] && [ "$(cat "$T/err")" = "../checkpoint_predict: error: $msg" ] && [ ! -s "$T/out" ]; then pass
    else cp "$T/err" "$T/log"; fail "$name: the executable (status $st)"; fi
    (cd "$T/native" && exec timeout 20 "$TSRC" --run --interp ../checkpoint_predict.tsr -- "$@") >"$T/out" 2>"$T/err"
    st=$?
    if [ "$want" = 1 ]; then full="tsrc: error: run time: $msg"
    else full="checkpoint_predict: error: $(printf '%s' "$msg" | sed 's|\.\./checkpoint_predict --help|checkpoint_predict --help|')"; fi
    if [ $st = "$want" ] && [ "$(cat "$T/err")" = "$full" ] && [ ! -s "$T/out" ]; then pass
    else cp "$T/err" "$T/log"; fail "$name: tsrc --run --interp (status $st)"; fi
}
N=$T/native
expect missing 1 "cannot open checkpoint 'nowhere.npz': No such file or directory" --load nowhere.npz
expect missing-array 1 "checkpoint 'head.npz' has no array 'w1'" --load head.npz
expect wrong-shape 1 "checkpoint 'shape.npz': array 'w1': expected shape (4, 2), found (2, 4)" --load shape.npz
expect compressed 1 "checkpoint 'zipped.npz': array 'w1' is compressed (only stored members are read: write it with numpy.savez, not numpy.savez_compressed)" --load zipped.npz
expect twice 1 "checkpoint 'twice.npz' holds array 'w1' twice" --load twice.npz
cp tests/native/checkpoint.sh "$N/text.npz"
expect not-a-zip 1 "checkpoint 'text.npz' is not a readable .npz file: no zip directory at its end (not a zip file, or cut short)" --load text.npz
size=$(wc -c <"$N/model.npz")
head -c $((size - 30)) "$N/model.npz" >"$N/cut.npz"
expect truncated 1 "checkpoint 'cut.npz' is not a readable .npz file: no zip directory at its end (not a zip file, or cut short)" --load cut.npz
: >"$N/empty.npz"
expect empty 1 "checkpoint 'empty.npz' is not a readable .npz file: no zip directory at its end (not a zip file, or cut short)" --load empty.npz
# A byte of w1's data changed (the last of its 8 floats: w1's member comes first).
"$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); i = b.index(b"b1.npy") - 31; b[i] ^= 1; open(sys.argv[2], "wb").write(b)' \
    "$N/model.npz" "$N/flipped.npz"
expect crc 1 "checkpoint 'flipped.npz': array 'w1' is damaged (its CRC-32 does not match)" --load flipped.npz
# A member's name damaged in the zip directory alone (NUL bytes; another letter): refused, not
# read as an array the model does not need and left out of the load.
"$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); i = b.rindex(b"b1.npy"); b[i:i + 1] = sys.argv[3].encode(); open(sys.argv[2], "wb").write(b)' \
    "$N/model.npz" "$N/renamed.npz" "$(printf '\001')"
expect name-changed 1 "checkpoint 'renamed.npz' is not a readable .npz file: a member's name in the zip directory differs from its header's" --load renamed.npz
"$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); i = b.rindex(b"b1.npy"); b[i + 1] = 0; open(sys.argv[2], "wb").write(b)' \
    "$N/model.npz" "$N/nul2.npz"
expect name-nul2 1 "checkpoint 'nul2.npz' is not a readable .npz file: a member's name in its zip directory holds a NUL byte" --load nul2.npz
mkdir "$N/dir.npz"
expect directory 1 "checkpoint 'dir.npz' is not a regular file" --load dir.npz
expect no-path 2 "'--load' needs the path of a checkpoint (../checkpoint_predict --help lists the options)" --load=

# A program that gained a working parameter since the checkpoint was saved (a buffer that code
# writes and no backprop reaches: a sample buffer, a cache) loads it, the buffer keeping its
# initial value; one that gained a parameter that code never writes (weights meant to be loaded)
# does not: the checkpoint lacks what it needs.
{ sed -n '/^data /,/^routine predict/p' tests/native/checkpoint_predict.tsr
  printf '%s\n' 'let%op tally = { tally = 5.; o = [1] }' 'routine count = tally =+ 1' \
      'main = load "model.npz"; run count; run predict; print predictions; print tally'; } >"$T/grown.tsr"
{ sed -n '/^data /,/^let%op w2 /p' tests/native/checkpoint_predict.tsr
  printf '%s\n' 'let%op gain = { gain = 1.; o = [1] }' 'let%op predictions = gain *. (w2 * relu (b1 + w1 * moons.points))' \
      'routine predict = predictions.forward' 'main = load "model.npz"; run predict; print predictions'; } >"$T/frozen.tsr"
(cd "$N" && "$TSRC" --run --interp ../grown.tsr) >"$T/out" 2>"$T/err"
if [ $? = 0 ] && grep -q '^tally : 1$' "$T/out" && [ "$(tail -1 "$T/out")" = "    6" ] &&
   [ "$(sed -n '2,3p' "$T/out")" = "$(sed -n '2,3p' "$T/train.native" | head -2)" ]; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "a working parameter the checkpoint lacks keeps its initial value"; fi
(cd "$N" && "$TSRC" --run --interp ../frozen.tsr) >"$T/out" 2>"$T/err"
if [ $? = 1 ] && grep -q "checkpoint 'model.npz' has no array 'gain'" "$T/err"; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "a parameter that code never writes is required"; fi

# A checkpoint of a larger model: a whole load into checkpoint_features.tsr (w1 and b1, no w2) is
# refused, naming the parameter it would leave out (--load runs before main, so nothing prints);
# its main's load, which lists w1 and b1, takes them alone; a file without tsrc.parameters
# (numpy.savez's) is not checked.  One with only w1 counts the others it lacks.
cp tests/native/checkpoint_features.tsr "$T/"
(cd "$N" && "$TSRC" ../checkpoint_features.tsr -o ../checkpoint_features) >"$T/log" 2>&1 || fail "checkpoint_features.tsr compiles"
more="which this model does not have: the file was saved by another model (more layers or blocks?), and loading it would leave those weights out (a load that lists the tensors, load \"FILE\" [w; b], takes them alone)"
for exe in native interp; do
    run() { if [ $exe = native ]; then (cd "$N" && ../checkpoint_features "$@"); else (cd "$N" && "$TSRC" --run --interp ../checkpoint_features.tsr -- "$@"); fi; }
    prefix="../checkpoint_features: error:"
    [ $exe = interp ] && prefix="tsrc: error: run time:"
    run --load model.npz >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && [ "$(cat "$T/err")" = "$prefix checkpoint 'model.npz' holds parameter 'w2', $more" ] && [ ! -s "$T/out" ]; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: a whole load of a larger model's checkpoint is refused (status $st)"; fi
    run >"$T/out" 2>"$T/err" && "$PY" -c '
import sys, numpy as np
w1 = np.load(sys.argv[1] + "/model.npz")["w1"]
assert open(sys.argv[2]).read().split("\n")[1:5] == ["    %g %g" % tuple(r) for r in w1]' "$N" "$T/out" 2>>"$T/err" && pass ||
        { cat "$T/out" "$T/err" >"$T/log"; fail "$exe: a load that lists the tensors takes them alone"; }
    run --load numpy64.npz >"$T/out" 2>"$T/err" && pass ||
        { cat "$T/err" >"$T/log"; fail "$exe: a numpy.savez file (no tsrc.parameters) with more arrays loads"; }
done
sed -e 's/^let%op b1 .*//' -e 's/(b1 + w1 \* moons.points)/(w1 * moons.points)/' -e 's/\[w1; b1\]/[w1]/' \
    tests/native/checkpoint_features.tsr >"$T/first.tsr"
(cd "$N" && "$TSRC" --run --interp ../first.tsr -- --load model.npz) >"$T/out" 2>"$T/err"
if [ $? = 1 ] && [ "$(cat "$T/err")" = "tsrc: error: run time: checkpoint 'model.npz' holds parameter 'b1' (and 1 more), $more" ]; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "the refusal counts the other parameters the model lacks"; fi

# --init-from: checkpoint_init.tsr (the model and a new parameter, gain) reads the three
# parameters model.npz shares with it, keeps gain as initialised and says so on stderr, and
# prints the trained predictions; checkpoint_features.tsr (no w2) reads w1 and b1 and names the
# array it leaves; checkpoint_predict.tsr, which matches the file, says nothing.  A file holding
# none of the model's parameters, a shared name of another shape and --load beside it are errors.
cp tests/native/checkpoint_init.tsr "$T/"
(cd "$N" && "$TSRC" ../checkpoint_init.tsr -o ../checkpoint_init) >"$T/log" 2>&1 || fail "checkpoint_init.tsr compiles"
"$PY" -c 'import numpy as np, sys; np.savez(sys.argv[1], a=np.zeros(2, np.float32), b=np.ones(3, np.float32))' "$N/other.npz"
for exe in native interp; do
    prefix="../checkpoint_init:"
    [ $exe = interp ] && prefix="checkpoint_init:"
    run() { if [ $exe = native ]; then (cd "$N" && ../checkpoint_init "$@"); else (cd "$N" && "$TSRC" --run --interp ../checkpoint_init.tsr -- "$@"); fi; }
    run --init-from model.npz >"$T/out" 2>"$T/err"
    st=$?
    if [ $st = 0 ] && [ "$(cat "$T/err")" = "$prefix note: read 3 of 4 parameters from 'model.npz'; 1 kept as initialised ('gain')" ] &&
       cmp -s "$T/out" "$T/trained"; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: --init-from reads the shared parameters, keeps the new one, and says so (status $st)"; fi
    run --init-from head.npz >"$T/out" 2>"$T/err"
    if [ $? = 0 ] && [ "$(cat "$T/err")" = "$prefix note: read 2 of 4 parameters from 'head.npz'; 2 kept as initialised ('w1', 'gain')" ] &&
       ! cmp -s "$T/out" "$T/trained"; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: --init-from a file of two parameters reads those two"; fi
    error="$prefix error:"
    [ $exe = interp ] && error="tsrc: error: run time:"
    run --init-from other.npz >"$T/out" 2>"$T/err"
    if [ $? = 1 ] && [ ! -s "$T/out" ] &&
       [ "$(cat "$T/err")" = "$error checkpoint 'other.npz' holds none of the 4 parameters of this model ('w1', 'b1', 'w2' and 1 more); its arrays are 'a', 'b'" ]; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: --init-from a file of none of the model's parameters is an error"; fi
    run --init-from shape.npz >"$T/out" 2>"$T/err"
    if [ $? = 1 ] && [ "$(cat "$T/err")" = "$error checkpoint 'shape.npz': array 'w1': expected shape (4, 2), found (2, 4)" ]; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: --init-from a parameter of another shape is an error"; fi
    run --init-from model.npz --load model.npz >"$T/out" 2>"$T/err"
    if [ $? = 2 ] && grep -q "'--load' and '--init-from' both given" "$T/err"; then pass
    else cat "$T/out" "$T/err" >"$T/log"; fail "$exe: --init-from with --load is a bad command line"; fi
done
(cd "$N" && "$TSRC" --run --interp ../checkpoint_features.tsr -- --init-from model.npz) >"$T/out" 2>"$T/err"
if [ $? = 0 ] && [ "$(cat "$T/err")" = "checkpoint_features: note: read 2 of 2 parameters from 'model.npz'; 1 parameter of the file is not in this model ('w2')" ]; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "--init-from a larger model's checkpoint names the array it leaves"; fi
# The saving run's training state (Adam's moments and counts) is no parameter: a model of the
# same parameters trained otherwise reads them all and says nothing.
printf '%s\n' 'let%op w = { w = [1.; 2.] }' 'let%op loss = (w *. w) ++ "i => "' \
    'routine train = Train.step loss ~update:(Train.adam ~lr:0.1)' 'main = run train; save "adam.npz"' >"$T/adam.tsr"
printf '%s\n' 'let%op w = { w = [0.; 0.] }' 'let%op loss = (w *. w) ++ "i => "' \
    'routine train = Train.step loss ~update:(Train.sgd ~lr:0.1)' 'main = print w' >"$T/sgd.tsr"
(cd "$N" && "$TSRC" --run --interp ../adam.tsr && "$TSRC" --run --interp ../sgd.tsr -- --init-from adam.npz) >"$T/out" 2>"$T/err"
if [ $? = 0 ] && [ ! -s "$T/err" ] && [ "$(tail -1 "$T/out")" = "    0.9 1.9" ]; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "--init-from a checkpoint with another optimiser's state reads the parameters and says nothing"; fi
(cd "$N" && ../checkpoint_predict --init-from model.npz) >"$T/out" 2>"$T/err"
awk '/^predictions/ { k++ } k == 1' "$T/out" >"$T/first"
if [ $? = 0 ] && [ ! -s "$T/err" ] && cmp -s "$T/first" "$T/trained"; then pass
else cat "$T/out" "$T/err" >"$T/log"; fail "--init-from a file that matches the model says nothing"; fi

# A save that cannot be written (a directory has the name): an error, and no file left behind.
mkdir "$T/blocked" "$T/blocked/model.npz"
(cd "$T/blocked" && ../checkpoint_train) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && [ "$(cat "$T/err")" = "../checkpoint_train: error: cannot write checkpoint 'model.npz': it is a directory" ] &&
   [ "$(ls -A "$T/blocked")" = model.npz ] && [ -z "$(ls -A "$T/blocked/model.npz")" ]; then pass
else cp "$T/err" "$T/log"; fail "an unwritable save is an error and leaves nothing (status $st)"; fi

# A hostile directory (issue 25): a link planted at the old temporary's name is not written
# through (its target keeps its bytes, the checkpoint is whole); a FIFO at the checkpoint's name
# is refused, not replaced by a regular file; no temporary is left behind.
mkdir "$T/hostile"
echo "precious" >"$T/victim"
ln -s "$T/victim" "$T/hostile/model.npz.partial"
(cd "$T/hostile" && ../checkpoint_train) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 0 ] && [ "$(cat "$T/victim")" = precious ] && cmp -s "$T/hostile/model.npz" "$N/model.npz" &&
   [ -L "$T/hostile/model.npz.partial" ] && [ "$(ls -A "$T/hostile" | LC_ALL=C sort | tr '\n' ' ')" = "head.npz model.npz model.npz.partial " ]
then pass
else cp "$T/err" "$T/log"; ls -la "$T/hostile" >>"$T/log"; fail "a link planted beside the checkpoint is not written through (status $st)"; fi
mkdir "$T/fifo"
mkfifo "$T/fifo/model.npz"
(cd "$T/fifo" && timeout 20 ../checkpoint_train) >"$T/out" 2>"$T/err"
st=$?
if [ $st = 1 ] && [ "$(cat "$T/err")" = "../checkpoint_train: error: cannot write checkpoint 'model.npz': it is not a regular file" ] &&
   [ -p "$T/fifo/model.npz" ] && [ "$(ls -A "$T/fifo")" = model.npz ]; then pass
else cp "$T/err" "$T/log"; fail "a save onto a FIFO is refused and leaves it a FIFO (status $st)"; fi

# Where --save points: a stream (/dev/stdout, /proc/self/fd/N) is refused before main, and the
# link stays a link (as root, a rename once replaced /dev/stdout itself); a link to a file is
# written through, the link kept; the file a data item was read from, and the executable, are
# refused, both intact; a directory that takes no new files (/proc/1) is refused before main.
W="$T/where"
mkdir "$W"
save_refused() { # WHAT ARGS…: status 1, a "cannot write checkpoint" message, nothing printed
    what=$1
    shift
    (cd "$W" && "$@") >"$W/out.txt" 2>"$T/err"
    st=$?
    if [ $st = 1 ] && grep -q "error: cannot write checkpoint" "$T/err" && [ ! -s "$W/out.txt" ]; then pass
    else cp "$T/err" "$T/log"; fail "$what (status $st)"; fi
}
save_refused "--save /dev/stdout is refused before main" ../checkpoint_train --save /dev/stdout
grep -q "it names a stream or a descriptor" "$T/err" && [ -L /dev/stdout ] && pass || fail "/dev/stdout: the message names a stream, and /dev/stdout stays a link"
(cd "$W" && ../checkpoint_train --save /proc/self/fd/5 5>"$W/five.txt") >"$W/out.txt" 2>"$T/err"
[ $? = 1 ] && [ ! -s "$W/five.txt" ] && [ ! -s "$W/out.txt" ] && pass || { cp "$T/err" "$T/log"; fail "--save /proc/self/fd/5 is refused and writes nothing there"; }
save_refused "--save //proc/self/fd/1 is refused (the directory is resolved, not the text)" ../checkpoint_train --save //proc/self/fd/1
ln -s /proc/self/fd "$W/fds"
save_refused "--save through a link to /proc/self/fd is refused" ../checkpoint_train --save fds/1
save_refused "--save into /proc/1 is refused before main" ../checkpoint_train --save /proc/1/x.npz
ln -s real.npz "$W/link.npz"
(cd "$W" && ../checkpoint_train --save link.npz) >"$W/out.txt" 2>"$T/err"
if [ $? = 0 ] && [ -L "$W/link.npz" ] && [ "$(head -c 2 "$W/real.npz")" = PK ]; then pass
else cp "$T/err" "$T/log"; fail "--save through a link writes the file it names and keeps the link"; fi
cp "$T/checkpoint_train" "$W/exe_copy"
save_refused "--save onto the running executable is refused" ./exe_copy --save exe_copy
cmp -s "$W/exe_copy" "$T/checkpoint_train" && pass || fail "the executable --save named is intact"
"$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.arange(6, dtype=np.float32).reshape(3, 2))' "$W/xs.npy"
cp "$W/xs.npy" "$W/xs.copy"
printf '%s\n' 'data xs = npy "xs.npy" ~b:[3] ~o:[2]' 'let%op y = xs *. { w = 2. }' 'routine r = y.forward' \
    'main = run r; print y' >"$W/reads.tsr"
"$TSRC" "$W/reads.tsr" -o "$W/reads" >"$T/log" 2>&1 || fail "reads.tsr compiles"
save_refused "--save onto a data item's file is refused" ./reads --save xs.npy
grep -q "data 'xs' was read from it" "$T/err" && cmp -s "$W/xs.npy" "$W/xs.copy" && pass || fail "the data file --save named is intact, and the message names the item"

# A save stopped by SIGTERM removes its temporary (the old checkpoint stays): a checkpoint of 64 MB,
# the process stopped (SIGSTOP) once its temporary has grown, then terminated.  A save that ended
# before the stop is tried again; ten that all end first are a failure, not a pass.
printf '%s\n' 'let%op w = { w = 1.; o = [4096; 4096] }' 'let%op y = w ++ "i, j => 0"' 'routine r = y.forward' \
    'main = run r; print "%g" y' >"$W/big.tsr"
"$TSRC" "$W/big.tsr" -o "$W/big" >"$T/log" 2>&1 || fail "big.tsr compiles"
echo old >"$W/big.npz"
caught=0
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    (cd "$W" && exec ./big --save big.npz >/dev/null 2>&1) &
    pid=$!
    i=0
    while [ $i -lt 4000 ]; do
        sz=$(stat -c %s "$W"/big.npz.tmp* 2>/dev/null | head -n 1)
        [ -n "$sz" ] && [ "$sz" -gt 0 ] && break
        kill -0 $pid 2>/dev/null || break
        i=$((i + 1))
    done
    kill -STOP $pid 2>/dev/null
    if ls "$W"/big.npz.tmp* >/dev/null 2>&1; then
        kill -TERM $pid
        kill -CONT $pid
        wait $pid 2>/dev/null
        st=$?
        caught=1
        break
    fi
    kill -CONT $pid 2>/dev/null
    wait $pid 2>/dev/null
    echo old >"$W/big.npz"
done
if [ $caught = 1 ] && [ $st = 143 ] && [ "$(cat "$W/big.npz")" = old ] && ! ls "$W"/big.npz.tmp* >/dev/null 2>&1; then pass
else fail "a save stopped by SIGTERM leaves no temporary and the old checkpoint (caught $caught, status ${st:-none})"; fi

# Object mode: MODULE_save / MODULE_load.
cat >"$T/driver.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "predict.h"
int main(void) {
    predict_state *s = predict_create(7);
    if (!s) return 1;
    float before[PREDICT_W1_SIZE];
    memcpy(before, predict_w1(s), sizeof before);
    int bad = predict_load(s, "shape.npz");
    if (bad != TSR_ERR_DATA || strcmp(predict_last_error(), "checkpoint 'shape.npz': array 'w1': expected shape (4, 2), found (2, 4)") != 0 ||
        memcmp(before, predict_w1(s), sizeof before) != 0) { printf("a failed load: %d %s\n", bad, predict_last_error()); return 1; }
    if (predict_load(s, "model.npz") != TSR_OK) { printf("load: %s\n", predict_last_error()); return 1; }
    if (memcmp(before, predict_w1(s), sizeof before) == 0) { printf("load changed nothing\n"); return 1; }
    /* model.npz resumes a run (its tsrc.runs is past this state's 0): its seed, 0, comes with it */
    if (((tsr_state *)s)->seed != 0) { printf("the seed after load: %llu\n", (unsigned long long)((tsr_state *)s)->seed); return 1; }
    if (predict_save(s, "again.npz") != TSR_OK) { printf("save: %s\n", predict_last_error()); return 1; }
    if (predict_save(NULL, "x.npz") != TSR_ERR_ARGUMENT || predict_load(NULL, "x.npz") != TSR_ERR_ARGUMENT) return 1;
    predict_destroy(s);
    /* predict_init_from (tsr_state_init_from): the parameters the file holds, counted; a failed one changes nothing */
    s = predict_create(7);
    memcpy(before, predict_w1(s), sizeof before);
    uint32_t read = 99;
    if (tsr_state_init_from((tsr_state *)s, "other.npz", &read) != TSR_ERR_DATA || read != 0 ||
        memcmp(before, predict_w1(s), sizeof before) != 0) { printf("init_from other.npz: %s\n", predict_last_error()); return 1; }
    if (predict_init_from(s, "head.npz", &read) != TSR_OK || read != 2 ||
        memcmp(before, predict_w1(s), sizeof before) != 0) { printf("init_from head.npz: %u %s\n", read, predict_last_error()); return 1; }
    if (predict_init_from(s, "model.npz", NULL) != TSR_OK || memcmp(before, predict_w1(s), sizeof before) == 0 ||
        ((tsr_state *)s)->runs != 0) { printf("init_from model.npz: %s\n", predict_last_error()); return 1; }
    if (tsr_state_init_from(NULL, "x.npz", &read) != TSR_ERR_ARGUMENT || tsr_state_init_from((tsr_state *)s, "", NULL) != TSR_ERR_ARGUMENT) return 1;
    predict_destroy(s);
    return 0;
}
EOF
if "$TSRC" -c "$T/checkpoint_predict.tsr" -o "$T/predict.o" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -I"$INC" "$T/driver.c" "$T/predict.o" "$LIB" -lm -lpthread -o "$T/driver" >"$T/log" 2>&1 &&
   (cd "$N" && ../driver) >"$T/log" 2>&1 && cmp -s "$N/again.npz" "$N/model.npz"; then pass
else fail "object mode: predict_load reads model.npz (and its seed), predict_save writes the same bytes, a failed load changes nothing; tsr_state_init_from reads the parameters alone"; fi

summary
[ $failed = 0 ]
