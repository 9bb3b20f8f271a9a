#!/bin/sh
# drivers.sh — object mode and executables end to end (run by tests/run.sh):
#   - two models built with `tsrc -c` link into one C program and one C++ program, which
#     check what the models compute (driver.c, driver.cpp);
#   - the generated header is docs/runtime.md's and compiles cleanly as C and C++; every global
#     symbol of an object is prefixed by its module's name;
#   - executables that read a bad data file exit with status 1 and the runtime's message;
#   - a failing link, a program with errors and --emit=llvm/asm behave as docs/cli.md says;
#   - names: header clashes get suffixes, module names that would meet the runtime's are refused;
#   - options in object mode: MODULE_set_option and MODULE_option (object_options.tsr), and data
#     from other files: MODULE_create_data (runtime_data.tsr).
#   - a --shared model survives dlclose after its routine used the worker threads.
# Usage: drivers.sh TSRC LIBDIR (LIBDIR holds libtsr.a).  Last line: "N passed, N failed".
set -u
TSRC=$1
LIB=$2/libtsr.a
INC=runtime
. "$(dirname "$0")/harness.sh"
harness_start drivers

# Two models, object mode.
if "$TSRC" -c docs/examples/mlp_lib.tsr -o "$T/mlp.o" >"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/affine.tsr -o "$T/affine.o" >>"$T/log" 2>&1 &&
   [ -f "$T/mlp.h" ] && [ -f "$T/mlp.json" ] && [ -f "$T/affine.h" ] && [ -f "$T/affine.json" ]; then pass
else fail "tsrc -c writes MODEL.o, MODEL.h and MODEL.json"; fi

if /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); t={x["name"]:x for x in m["tensors"]};
assert m["module"]=="mlp" and [r["symbol"] for r in m["routines"]]==["mlp_predict"]
assert t["w1"]["dims"]==[64,10] and t["w1"]["kind"]=="parameter" and t["features"]["kind"]=="input"
assert t["scores"]["shape"]=="32|3" and t["scores"]["dtype"]=="float32"' "$T/mlp.json" >"$T/log" 2>&1; then pass
else fail "mlp.json lists the routine and the tensors with their shapes"; fi

# docs/runtime.md §2 shows this header whole: it must be what tsrc writes.
if awk '/^```c$/ && !n { getline; if ($0 ~ /^\/\* mlp\.h /) { n = 1; print; next } } n && /^```$/ { exit } n' \
       docs/runtime.md >"$T/doc_mlp.h" && [ -s "$T/doc_mlp.h" ] &&
   diff -u "$T/doc_mlp.h" "$T/mlp.h" >"$T/log" 2>&1; then pass
else fail "docs/runtime.md's mlp.h is the header tsrc -c writes for docs/examples/mlp_lib.tsr"; fi

for std in c11 c++11 c++17; do
    lang=c; [ $std != c11 ] && lang=c++
    printf '#include "mlp.h"\n#include "affine.h"\nint main(void) { return 0; }\n' >"$T/inc.$lang"
    if cc -x $lang -std=$std -Wall -Wextra -Werror -pedantic -I"$T" -I$INC -c "$T/inc.$lang" -o "$T/inc.o" >"$T/log" 2>&1
    then pass; else fail "the generated headers compile cleanly as $std"; fi
done
# ... and under clang's stricter warnings for C++ (named casts, nullptr) and C (casts that
# change alignment, sign or constness), with accessors of every element type (f64, i32, f16,
# bf16, u8, bool, i64), of run-time sizes and of a GPU model: headers a strict build can include.
if "$TSRC" -c tests/native/dtype_f64.tsr -o "$T/f64m.o" >"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/accuracy_ids.tsr -o "$T/ids.o" >>"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/runtime_mlp.tsr -o "$T/rsm.o" >>"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/dtype_half.tsr -o "$T/halfm.o" >>"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/dtype_bytes.tsr -o "$T/bytesm.o" >>"$T/log" 2>&1 &&
   "$TSRC" -c tests/native/dtype_i64.tsr -o "$T/i64m.o" >>"$T/log" 2>&1 &&
   "$TSRC" -c --target=cuda docs/examples/mlp_lib.tsr -o "$T/gpum.o" >>"$T/log" 2>&1 &&
   for h in mlp f64m ids rsm halfm bytesm i64m gpum; do printf '#include "%s.h"\n' $h; done >"$T/strict.c" &&
   printf 'int main(void) { return 0; }\n' >>"$T/strict.c" &&
   cp "$T/strict.c" "$T/strict.cpp" &&
   clang++ -std=c++11 -Werror -Wall -Wextra -pedantic -Wold-style-cast -Wzero-as-null-pointer-constant -Wcast-align \
       -Wcast-qual -I"$T" -I$INC -c "$T/strict.cpp" -o "$T/strict.o" >>"$T/log" 2>&1 &&
   clang -std=c11 -Werror -Wall -Wextra -pedantic -Wcast-align -Wcast-qual -Wconversion -Wsign-conversion \
       -I"$T" -I$INC -c "$T/strict.c" -o "$T/strict.o" >>"$T/log" 2>&1
then pass; else fail "the generated headers compile under clang++ -Wold-style-cast -Wzero-as-null-pointer-constant and clang -Wcast-align -Wconversion"; fi

# Options in object mode: MODULE_set_option sets one as the command line would (the routine's
# update reads the rate set), MODULE_option reads it, and a value it cannot take, or a name the
# program lacks, is TSR_ERR_ARGUMENT with a message and changes nothing; the manifest lists them.
cat >"$T/opts.c" <<'EOF2'
#include <stdio.h>
#include <string.h>
#include "object_options.h"
int main(void) {
    object_options_state *s = object_options_create(1);
    double lr = 0, steps = 0;
    if (!s || object_options_option(s, "lr", &lr) != TSR_OK || lr != 0.1) return 1;
    if (object_options_set_option(s, "lr", 0.25) != TSR_OK || object_options_train(s) != TSR_OK) return 2;
    if (object_options_w(s)[0] != 0.5f || object_options_w(s)[1] != 1.0f) return 3; /* w - 0.25 * 2w */
    if (object_options_set_option(s, "steps", 2.5) != TSR_ERR_ARGUMENT ||
        strcmp(object_options_last_error(), "option 'steps' needs an integer from -2^53 to 2^53 (9007199254740992), not 2.5"))
        return 4;
    if (object_options_set_option(s, "rate", 1) != TSR_ERR_ARGUMENT ||
        strcmp(object_options_last_error(), "no option 'rate' (the program's options: lr, steps)")) return 5;
    if (object_options_set_option(s, "lr", 1e39) != TSR_ERR_ARGUMENT || object_options_option(s, "lr", &lr) != TSR_OK ||
        lr != 0.25) return 6;
    if (object_options_set_option(s, "lr", 0.0 / 0.0) != TSR_ERR_ARGUMENT || /* not "-nan" */
        strcmp(object_options_last_error(), "option 'lr' needs a finite number, not NaN")) return 8;
    if (object_options_set_option(s, "steps", 7) != TSR_OK || object_options_option(s, "steps", &steps) != TSR_OK ||
        steps != 7) return 7;
    object_options_destroy(s);
    return 0;
}
EOF2
if "$TSRC" -c tests/native/object_options.tsr -o "$T/object_options.o" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC "$T/opts.c" "$T/object_options.o" "$LIB" -lm -lpthread -ldl \
       -o "$T/opts" >"$T/log" 2>&1 && "$T/opts" >"$T/log" 2>&1 &&
   /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
assert m["options"]==[{"name":"lr","kind":"number","default":0.1},{"name":"steps","kind":"integer","default":3}], m["options"]' \
       "$T/object_options.json" >"$T/log" 2>&1; then pass
else echo "status $?" >>"$T/log"; fail "object mode: MODULE_set_option and MODULE_option set and read the options, refusing what the command line refuses"; fi
printf '#include "object_options.h"\nint main(void) { return 0; }\n' >"$T/inc_opts.cpp"
if cc -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic -I"$T" -I$INC -c "$T/inc_opts.cpp" -o "$T/inc.o" >"$T/log" 2>&1 &&
   cc -x c++ -std=c++98 -Wall -Wextra -Werror -pedantic -I"$T" -I$INC -c "$T/inc_opts.cpp" -o "$T/inc.o" >"$T/log" 2>&1
then pass; else fail "a header with options compiles cleanly as C++11 and C++98 (tsr.h's enum had a trailing comma)"; fi

# Data from other files in object mode (an executable's --data): MODULE_create_data reads xs
# from a file of 7 rows, its run-time length; a name the program lacks is NULL with a message.
cat >"$T/rdata.c" <<'EOF2'
#include <stdio.h>
#include <string.h>
#include "runtime_data.h"
int main(int argc, char **argv) {
    (void)argc;
    const char *names[] = {"xs"}, *paths[] = {argv[1]}, *bad[] = {"ys"};
    runtime_data_state *s = runtime_data_create_data(1, names, paths, 1);
    if (!s || runtime_data_xs_dim0(s) != 7 || runtime_data_xs(s)[20] != 20.0f) return 1;
    runtime_data_destroy(s);
    if (runtime_data_create_data(1, bad, paths, 1) ||
        strcmp(runtime_data_last_error(), "create_data: the program has no data named 'ys' (its data: xs)")) return 2;
    if (runtime_data_create_data(1, names, bad, 1) || !strstr(runtime_data_last_error(), "'ys'")) return 3;
    return 0;
}
EOF2
/usr/bin/python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.arange(21, dtype=np.float32).reshape(7, 3))' "$T/seven.npy"
if "$TSRC" -c tests/native/runtime_data.tsr -o "$T/runtime_data.o" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC "$T/rdata.c" "$T/runtime_data.o" "$LIB" -lm -lpthread -ldl \
       -o "$T/rdata" >"$T/log" 2>&1 && "$T/rdata" "$T/seven.npy" >"$T/log" 2>&1; then pass
else echo "status $?" >>"$T/log"; fail "object mode: MODULE_create_data reads a data item from another file (a run-time length too)"; fi

bad_symbols=$(nm -g --defined-only "$T/mlp.o" "$T/affine.o" 2>"$T/log" | awk 'NF == 3 {print $3}' | grep -v -e '^mlp_' -e '^affine_')
if [ -z "$bad_symbols" ] && [ -s "$T/mlp.o" ]; then pass
else echo "$bad_symbols" >"$T/log"; fail "every global symbol is prefixed by the module name"; fi

if cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC tests/native/driver.c "$T/mlp.o" "$T/affine.o" "$LIB" -lm -lpthread \
      -o "$T/driver_c" >"$T/log" 2>&1 && "$T/driver_c" >"$T/log" 2>&1; then pass
else fail "a C driver links two models and checks them"; fi
if c++ -std=c++17 -Wall -Wextra -Werror -I"$T" -I$INC tests/native/driver.cpp "$T/mlp.o" "$T/affine.o" "$LIB" \
      -lm -lpthread -o "$T/driver_cpp" >"$T/log" 2>&1 && "$T/driver_cpp" >"$T/log" 2>&1; then pass
else fail "a C++ driver links two models and checks them"; fi

# The design's own example driver (docs/examples/mlp_main.c) builds and runs.
if cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC docs/examples/mlp_main.c "$T/mlp.o" "$LIB" -lm -lpthread \
      -o "$T/mlp_main" >"$T/log" 2>&1 && "$T/mlp_main" >"$T/log" 2>&1 && grep -q "^first row: " "$T/log"; then pass
else fail "docs/examples/mlp_main.c"; fi

# Executables reading bad data files: exit 1, the runtime's message (the same text as the
# reference executor's .err golden, after "run time: ").
for t in tests/native/bad_*.tsr; do
    want=$(sed -n 's/^tsrc: error: run time: //p' "${t%.tsr}.err")
    if "$TSRC" "$t" -o "$T/bad" >"$T/log" 2>&1; then
        "$T/bad" >"$T/out" 2>"$T/log"
        st=$?
        if [ $st = 1 ] && [ "$(cat "$T/log")" = "$T/bad: error: $want" ] && [ ! -s "$T/out" ]; then pass
        else fail "$t: the executable exits with 1 and says '$want' (status $st)"; fi
    else fail "$t compiles"; fi
done

# Errors leave no output behind.
printf 'let%%op y = { w; o = [3] } * [1.; 2.] + [1.; 2.; 3.; 4.]\nroutine r = y.forward\n' >"$T/broken.tsr"
"$TSRC" -c "$T/broken.tsr" -o "$T/broken.o" >"$T/log" 2>&1
st=$?
if [ $st = 1 ] && [ ! -e "$T/broken.o" ] && [ ! -e "$T/broken.h" ] && [ ! -e "$T/broken.json" ] &&
   grep -q "error:" "$T/log" && [ -z "$(ls "$T" | grep tmp)" ]; then pass
else fail "-c with a shape error writes nothing (status $st)"; fi
CC=false "$TSRC" docs/examples/shapes.tsr -o "$T/shapes" >"$T/log" 2>&1
st=$?
if [ $st = 1 ] && grep -q "linking '$T/shapes' failed" "$T/log" && [ ! -e "$T/shapes" ] && [ -z "$(ls "$T" | grep tmp)" ]
then pass; else fail "a failing link is an error and leaves no file (status $st)"; fi
"$TSRC" docs/examples/shapes.tsr -o /nonexistent-dir/shapes >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "cannot write\|cannot\|failed" "$T/log"; then pass; else fail "an unwritable output is an error"; fi

# Other outputs.
if "$TSRC" --emit=llvm docs/examples/shapes.tsr -o "$T/shapes.ll" >"$T/log" 2>&1 && grep -q "^define .*@shapes_forward" "$T/shapes.ll"
then pass; else fail "--emit=llvm"; fi
if "$TSRC" --emit=asm -O1 docs/examples/shapes.tsr -o "$T/shapes.s" >"$T/log" 2>&1 && grep -q "shapes_forward:" "$T/shapes.s"
then pass; else fail "--emit=asm"; fi
if "$TSRC" docs/examples/shapes.tsr -o "$T/shapes" >"$T/log" 2>&1 && "$T/shapes" >"$T/out" 2>"$T/log" &&
   grep -q "^y : 4|3" "$T/out" && grep -q "^l2.b : 3" "$T/out"; then pass
else fail "docs/examples/shapes.tsr compiles to an executable that runs"; fi
if "$TSRC" --target=x86_64-unknown-linux-gnu --cpu=x86-64 -c docs/examples/mlp_lib.tsr -o "$T/generic.o" >"$T/log" 2>&1
then pass; else fail "--target and --cpu"; fi
"$TSRC" --target=sparc-sun-solaris docs/examples/shapes.tsr -o "$T/x" >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "unknown target 'sparc-sun-solaris'" "$T/log"; then pass; else fail "an unknown target is an error"; fi
for mode in --emit=sched-ir "--run --interp"; do # modes that schedule but generate no code
    "$TSRC" $mode --target=aarch64-linux-gnu docs/examples/shapes.tsr >"$T/out" 2>"$T/log"
    if [ $? = 1 ] && grep -q "unknown target 'aarch64-linux-gnu': not an x86-64 triple" "$T/log" && [ ! -s "$T/out" ]; then pass
    else fail "an unknown target is an error with $mode too"; fi
done
"$TSRC" --emit=llvm --emit=asm docs/examples/shapes.tsr -o - >"$T/out" 2>"$T/log"
if [ $? = 2 ] && grep -q "'--emit=asm' conflicts with an earlier mode option ('--emit=llvm')" "$T/log" && [ ! -s "$T/out" ]; then pass
else fail "--emit=llvm --emit=asm is two modes"; fi

# Names: a tensor called like a setter gets its own accessor; loop counters of main get none.
printf 'input { set_x; o = [2] }\nlet%%op y = set_x + 1\nroutine r = y.forward\n' >"$T/names.tsr"
if timeout 20 "$TSRC" -c "$T/names.tsr" -o "$T/names.o" >"$T/log" 2>&1 && grep -q "float \*names_set_x(names_state" "$T/names.h"
then pass; else fail "a tensor named set_x gets an accessor"; fi
if "$TSRC" -c tests/native/loop.tsr -o "$T/loopm.o" >"$T/log" 2>&1 && grep -q "loopm_set_b(" "$T/loopm.h" &&
   ! grep -q "loopm_set_k" "$T/loopm.h"; then pass; else fail "setters for index items only, not for loop counters"; fi
# A tensor of run-time size adds x_dim0() and X_ROW_SIZE to its names: tensors named x_dim0 and
# x_row get a suffix instead of a header that does not compile.
printf 'input { x; b = [?]; o = [3] }\ninput { x_row; b = [2]; o = [5] }\nlet%%op x_dim0 = { w; o = [4] } * x_row\nlet%%op y = { v; o = [4] } * x\nroutine fwd = x_dim0.forward; y.forward\n' >"$T/rowclash.tsr"
printf '#include "rowclash.h"\nint main(void) { return rowclash_x_dim0(0) != 0 || ROWCLASH_X_ROW_SIZE != 3 || ROWCLASH_X_ROW_2_SIZE != 10; }\n' >"$T/rowclash.c"
# header_runs NAME PATTERN: $T/NAME.tsr compiled with -c, its header included by $T/NAME.c (which
# returns 0), compiled -Werror, linked and run, and the header holds PATTERN (grep).
header_runs() {
    "$TSRC" -c "$T/$1.tsr" -o "$T/$1.o" >"$T/log" 2>&1 &&
        cc -std=c11 -Wall -Wextra -Werror -I"$T" -I$INC "$T/$1.c" "$T/$1.o" "$LIB" -lm -lpthread -ldl -o "$T/$1" >>"$T/log" 2>&1 &&
        "$T/$1" && grep -q "$2" "$T/$1.h"
}
if header_runs rowclash "rowclash_x_dim0_2(rowclash_state"
then pass; else fail "tensors named x_dim0 and x_row beside x of run-time size get suffixes"; fi
# So does a routine named x_dim0: the tensor x then takes a suffix (x_2, x_2_dim0).
printf 'input { x; b = [?]; o = [2] }\nlet%%op y = x + 1.\nroutine x_dim0 = y.forward\n' >"$T/routineclash.tsr"
printf '#include "routineclash.h"\nint main(void) { return routineclash_x_2_dim0(0) != 0 || ROUTINECLASH_X_2_ROW_SIZE != 2; }\n' >"$T/routineclash.c"
if header_runs routineclash "^int routineclash_x_dim0(routineclash_state"
then pass; else fail "a routine named x_dim0 beside x of run-time size: the tensor gets a suffix"; fi
# The image's own symbols (MODULE__image, MODULE__image_size): a tensor named _image gets a
# suffix, a routine so named is an error; and names that would make a C library function the
# runtime calls (module posix's routine memalign, a module named pthread: pthread_create) are
# errors, not a runtime that calls the model's function instead.
printf '%s\n' 'input { x; b = [2]; o = [3] }' 'let%op _image = { w; o = [4] } * x' 'let%op _image_size = x + 1.' \
    'routine fwd = _image.forward; _image_size.forward' >"$T/imageclash.tsr"
printf '#include "imageclash.h"\nint main(void) { return imageclash__image_2(0) != 0 || IMAGECLASH__IMAGE_SIZE_2_SIZE != 6; }\n' >"$T/imageclash.c"
if header_runs imageclash "imageclash__image_2(imageclash_state"
then pass; else fail "tensors named _image and _image_size get suffixes"; sed -n '1,5s/^/    /p' "$T/log"; fi
printf '%s\n' 'input { x; b = [2]; o = [3] }' 'let%op y = x + 1.' 'routine _image = y.forward' 'routine memalign = y.forward' >"$T/posix.tsr"
"$TSRC" -c "$T/posix.tsr" -o "$T/posix.o" >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "routine '_image' would clash with the generated function posix__image" "$T/log" &&
   grep -q "routine 'memalign' would be the C function posix_memalign, which the C library defines" "$T/log" &&
   [ ! -e "$T/posix.o" ]; then pass; else fail "routines _image and posix's memalign are errors"; sed -n '1,6s/^/    /p' "$T/log"; fi
"$TSRC" --shared docs/examples/mlp_lib.tsr --name=pthread -o "$T/libpthreadm.so" >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "the module name 'pthread' would make the header's function pthread_create" "$T/log" &&
   [ ! -e "$T/libpthreadm.so" ]; then pass; else fail "a module named pthread is an error"; sed -n '1,4s/^/    /p' "$T/log"; fi
# A character outside ASCII in the output's name is one '_' of the module name, as tsr.compile
# makes it (modèle.o: mod_le; it was one '_' a byte, mod__le).
"$TSRC" -c docs/examples/mlp_lib.tsr -o "$T/mod$(printf '\303\250')le.o" >"$T/log" 2>&1
if [ $? = 0 ] && grep -q '"module": "mod_le"' "$T/mod$(printf '\303\250')le.json"; then pass
else fail "the module name of modèle.o is mod_le"; sed -n '1,4s/^/    /p' "$T/log"; fi
# A module named after a POSIX facility whose functions the header's would be (timer:
# timer_create of <time.h>): the header declared it with other types beside <time.h>.
"$TSRC" -c docs/examples/mlp_lib.tsr --name=timer -o "$T/timer.o" >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "the module name 'timer' would make the header's function timer_create" "$T/log" &&
   [ ! -e "$T/timer.o" ]; then pass; else fail "a module named timer is an error"; sed -n '1,4s/^/    /p' "$T/log"; fi
# A --shared model unloaded (dlclose) after its routine ran on the worker threads, then loaded
# and unloaded again: the process goes on (the library is never unmapped, -z nodelete: the
# workers run its code); it crashed in a worker once the library was gone.
if "$TSRC" --shared tests/native/wide_mlp.tsr -o "$T/libwide.so" >"$T/log" 2>&1 &&
   cc -std=c11 -Wall -Wextra -Werror tests/native/dlclose.c -o "$T/dlclose" -ldl >>"$T/log" 2>&1 &&
   TSR_NUM_THREADS=2 "$T/dlclose" "$T/libwide.so" libwide predict >>"$T/log" 2>&1 && grep -q '^unloaded twice$' "$T/log"
then pass; else fail "a --shared model survives dlclose after using the thread pool"; sed -n '1,4s/^/    /p' "$T/log"; fi
# abi.c's list of the C library's names that a model must not define holds every one the runtime
# calls (libtsr.a's undefined symbols).
missing=""
for sym in $(nm -u "$LIB" 2>/dev/null | awk '{print $2}' | grep -v '^tsr_\|^_' | sort -u); do
    grep -q "\"$sym\"" compiler/cg/abi.c || missing="$missing $sym"
done
if [ -z "$missing" ] && nm -u "$LIB" | grep -q pthread_create; then pass
else fail "compiler/cg/abi.c c_library_names lacks:$missing"; fi
# Module names: not the runtime's (tsr, tsr_...), starting with a letter.
for out in tsr.o tsr_state.o 3d.o; do
    "$TSRC" -c docs/examples/mlp_lib.tsr -o "$T/$out" >"$T/log" 2>&1
    if [ $? = 1 ] && grep -q "name the module with --name=NAME" "$T/log" && [ ! -e "$T/$out" ] &&
       [ ! -e "$T/${out%.o}.h" ]; then pass; else fail "-c -o $out is an error asking for --name"; fi
done
"$TSRC" -c docs/examples/mlp_lib.tsr --name=TSR_model -o "$T/m.o" >"$T/log" 2>&1
if [ $? = 2 ] && grep -q "'TSR_model' is tsr or starts with tsr_" "$T/log"; then pass; else fail "--name=TSR_model is refused"; fi
if "$TSRC" tests/native/short_names.tsr -o "$T/tsr_model" >"$T/log" 2>&1 && "$T/tsr_model" >"$T/out" 2>"$T/log" &&
   cmp -s "$T/out" tests/native/short_names.out; then pass
else fail "an executable named tsr_model runs (its internal symbols are not the runtime's)"; fi
# An executable whose output cannot be written fails.
if "$TSRC" tests/native/loop.tsr -o "$T/loop" >"$T/log" 2>&1 && ! "$T/loop" >/dev/full 2>"$T/log" &&
   grep -q "cannot write to the standard output" "$T/log"; then pass; else fail "writing to a full device is an error"; fi
# Bad requests: clean errors, no partial files.
"$TSRC" -c docs/examples/mlp_lib.tsr -o - >"$T/log" 2>&1
if [ $? = 2 ] && grep -q "need a file name" "$T/log"; then pass; else fail "-c -o - is refused"; fi
"$TSRC" --cpu=no-such-cpu docs/examples/shapes.tsr -o "$T/cpu" >"$T/log" 2>&1
if [ $? = 2 ] && [ "$(cat "$T/log")" = "tsrc: error: unknown CPU 'no-such-cpu' ('tsrc --cpu=help' lists them all) (see 'tsrc --help')" ] &&
   [ ! -e "$T/cpu" ]; then pass; else fail "an unknown --cpu is a usage error, before any work"; fi
"$TSRC" --cpu znver44 docs/examples/shapes.tsr -o "$T/cpu" >"$T/log" 2>&1
if [ $? = 2 ] && grep -q "unknown CPU 'znver44' (did you mean 'znver4'?" "$T/log" && [ ! -e "$T/cpu" ]; then pass
else fail "an unknown --cpu gets the closest name"; fi
"$TSRC" --cpu=help >"$T/cpus" 2>"$T/log"
if [ $? = 0 ] && [ "$(head -1 "$T/cpus")" = native ] && grep -qx x86-64-v3 "$T/cpus" && grep -qx znver4 "$T/cpus" &&
   ! grep -q ' ' "$T/cpus" && [ ! -s "$T/log" ]; then pass; else fail "--cpu=help lists LLVM's CPU names, one a line"; fi
"$TSRC" --target=aarch64-linux-gnu --cpu=help >"$T/cpus" 2>"$T/log"
if [ $? = 2 ] && [ ! -s "$T/cpus" ] && grep -q "no list of CPUs for target 'aarch64-linux-gnu': this tsrc generates x86-64" "$T/log"
then pass; else fail "--cpu=help for a target this tsrc does not generate says so (it printed nothing)"; fi
# LLVM knows 32-bit CPUs too, and refuses 64-bit code for them by a fatal error: a clean one.
"$TSRC" --cpu=i386 docs/examples/shapes.tsr -o "$T/cpu" >"$T/log" 2>&1
if [ $? = 1 ] && grep -q "tsrc: error: LLVM cannot generate this code" "$T/log" && [ ! -e "$T/cpu" ] &&
   [ -z "$(ls "$T" | grep tmp)" ]; then pass; else fail "a 32-bit --cpu is a clean error"; fi

# Positions (attention's masks, iota ()) are made when the state is, not spelt out by the
# compiler: a sequence of 700 million positions compiles in well under 1 GB (it took 8 GB).
printf '%s\n' 'open Nn' 'let%op x = { x = uniform (); b = [2]; o = [699999999; 16] }' \
    'let attn = attention ~heads:4 ~head_dim:4 ~causal:true ~fused:true ()' 'let%op y = attn x' \
    'let%op ix = { ix = 0.; o = [300000000] } + iota ()' >"$T/positions.tsr"
(ulimit -v 1048576; exec "$TSRC" --emit=ir -o "$T/positions.ir" "$T/positions.tsr") >"$T/log" 2>&1
if [ $? = 0 ] && grep -q "#positions.* iota" "$T/positions.ir" && grep -q " iota$" "$T/positions.ir"; then pass
else fail "attention's positions and iota () take no memory of their size when compiling"; sed -n '1,5s/^/    /p' "$T/log"; fi

summary
[ $failed = 0 ]
