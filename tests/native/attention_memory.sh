#!/bin/sh
# attention_memory.sh TSRC — Nn.attention ~fused:true at 256 positions stores no buffer of
# positions × positions cells (core.tsr attend, docs/ir.md §3.4), where the materialised form
# (~fused:false) does; both train a step natively and print the same loss and input gradient to
# 1e-5 (relative to the largest value); with dropout the fused form stores none either; the
# fused kernels' tiles are four rows on the CPU, one for --target=cuda.  Last line: "N passed, N failed".
set -u
TSRC=${1:-build/tsrc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
T=256
for fused in true false; do
    cat >"$TMP/a_$fused.tsr" <<TSR
open Nn
let%op x = { x = uniform (); b = [2]; o = [$T; 32] }
let%op y = attention ~heads:2 ~head_dim:16 ~causal:true ~fused:$fused () x
let%op loss = (y *. y) ++ "b | t, d => "
routine step = loss.forward; loss.zero_grads; loss.backprop
main = run step; print loss; print x.grad
TSR
    "$TSRC" --emit=sched-ir -o "$TMP/ir_$fused" "$TMP/a_$fused.tsr" || { bad "fused:$fused compiles"; continue; }
    # The largest buffer, in cells: the product of the dimensions a buffer line ends with.
    largest=$(sed -n 's/^  [^ ].* : .*\[\([0-9, ]*\)\].*$/\1/p' "$TMP/ir_$fused" |
              awk -F', *' '{ c = 1; for (i = 1; i <= NF; i++) c *= $i; if (c > m) m = c } END { print m + 0 }')
    if [ $fused = true ] && [ "$largest" -lt $((T * T)) ]; then ok "fused: largest buffer $largest cells < $T x $T"
    elif [ $fused = false ] && [ "$largest" -ge $((T * T)) ]; then ok "materialised: largest buffer $largest cells >= $T x $T"
    else bad "fused:$fused: largest buffer $largest cells"; fi
    if TSR_PRINT_EXACT=1 "$TSRC" --run "$TMP/a_$fused.tsr" >"$TMP/out_$fused" 2>"$TMP/err"; then ok "fused:$fused runs natively"
    else bad "fused:$fused runs natively"; sed 's/^/    /' "$TMP/err"; fi
done
# With dropout (applied with ~train:true) the fused kernels draw each weight's random number where
# they use it: still no buffer of T x T cells (the draws' numbering buffer has no storage).
cat >"$TMP/a_dropout.tsr" <<TSR
open Nn
let%op x = { x = uniform (); b = [2]; o = [$T; 32] }
let attn = attention ~heads:2 ~head_dim:16 ~causal:true ~dropout:0.1 ~fused:true ()
let%op y = attn ~train:true x
let%op loss = (y *. y) ++ "b | t, d => "
routine step = loss.forward; loss.zero_grads; loss.backprop
main = run step; print loss
TSR
if "$TSRC" --emit=sched-ir -o "$TMP/ir_dropout" "$TMP/a_dropout.tsr" && grep -q 'random(' "$TMP/ir_dropout"; then
    largest=$(sed -n 's/^  [^ ].* : .*\[\([0-9, ]*\)\].*$/\1/p' "$TMP/ir_dropout" |
              awk -F', *' '{ c = 1; for (i = 1; i <= NF; i++) c *= $i; if (c > m) m = c } END { print m + 0 }')
    if [ "$largest" -lt $((T * T)) ] && "$TSRC" --run "$TMP/a_dropout.tsr" >/dev/null 2>"$TMP/err"; then
        ok "fused with dropout: largest buffer $largest cells < $T x $T, runs natively"
    else bad "fused with dropout: largest buffer $largest cells, or it does not run"; fi
else bad "fused with dropout compiles and draws in the kernel"; fi
# On the CPU each run of the fused kernels handles four rows (docs/ir.md §3.1): their tiles of
# scores have 4 x T cells; for the GPU one row a thread, T cells.
if grep -q "#scores[0-9]* : 4,$T  scratch local" "$TMP/ir_true" &&
   ! grep -q "#scores[0-9]* : $T  scratch" "$TMP/ir_true"; then ok "fused, CPU: tiles of scores of four rows (4,$T)"
else bad "fused, CPU: tiles of scores of four rows"; grep "#scores" "$TMP/ir_true" | sed 's/^/    /'; fi
if "$TSRC" --emit=sched-ir --target=cuda -o "$TMP/ir_cuda" "$TMP/a_true.tsr" &&
   grep -q "#scores[0-9]* : $T  scratch local" "$TMP/ir_cuda" && ! grep -q "#scores[0-9]* : 4,$T" "$TMP/ir_cuda"; then
    ok "fused, GPU: tiles of scores of one row ($T)"
else bad "fused, GPU: tiles of scores of one row"; fi
# The numbers of both outputs, side by side: within 1e-5 of the largest magnitude.
tr -s ' ' '\n' <"$TMP/out_true" | grep -E '^-?[0-9.]+(e[-+]?[0-9]+)?$' >"$TMP/n_true"
tr -s ' ' '\n' <"$TMP/out_false" | grep -E '^-?[0-9.]+(e[-+]?[0-9]+)?$' >"$TMP/n_false"
if [ -s "$TMP/n_true" ] && paste "$TMP/n_true" "$TMP/n_false" | awk '
    { a[NR] = $1; b[NR] = $2; m = ($1 < 0 ? -$1 : $1) > m ? ($1 < 0 ? -$1 : $1) : m }
    END { for (i = 1; i <= NR; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-5 * m) exit 1 } exit NR == 0 }'; then
    ok "fused and materialised agree to 1e-5 ($(wc -l <"$TMP/n_true") numbers)"
else
    bad "fused and materialised differ"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
