#!/bin/sh
# example_checkpoint.sh — the round trip of docs/examples/checkpoint.tsr (run by tests/run.sh):
# trained natively and with the reference executor, the two print the golden
# tests/native/example_checkpoint.out and write the same moons_net.npz; a fresh run with
# `--epochs 0 --load moons_net.npz` prints the same lines, with either executor and either
# file, while `--epochs 0` without `--load` does not (so loading is what makes them equal).
# Usage: example_checkpoint.sh TSRC.  Last line: "N passed, N failed".
set -u
TSRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
EX=$(pwd)/docs/examples/checkpoint.tsr
GOLDEN=$(pwd)/tests/native/example_checkpoint.out
. "$(dirname "$0")/harness.sh"
harness_start excp
mkdir "$T/native" "$T/interp"
(cd "$T/native" && timeout 60 "$TSRC" --run "$EX") >"$T/train.native" 2>"$T/log"
cmp -s "$GOLDEN" "$T/train.native"; check "checkpoint.tsr trains natively and prints the golden" $?
(cd "$T/interp" && timeout 60 "$TSRC" --run --interp "$EX") >"$T/train.interp" 2>"$T/log"
cmp -s "$GOLDEN" "$T/train.interp"; check "the reference executor prints the golden too" $?
cmp -s "$T/native/moons_net.npz" "$T/interp/moons_net.npz"; check "both write the same moons_net.npz" $?
for mode in native interp; do
    for file in native interp; do
        run=$(tsrc_run $mode)
        cp "$T/$file/moons_net.npz" "$T/load.npz"
        (cd "$T" && timeout 60 $run "$EX" -- --epochs 0 --load load.npz) >"$T/load.out" 2>"$T/log"
        cmp -s "$GOLDEN" "$T/load.out"; check "--load of the $file executor's file, $mode: the trained predictions" $?
    done
done
(cd "$T" && timeout 60 "$TSRC" --run "$EX" -- --epochs 0) >"$T/fresh.out" 2>"$T/log"
[ -s "$T/fresh.out" ] && ! cmp -s "$GOLDEN" "$T/fresh.out"; check "without --load an untrained run prints other predictions" $?
finish
