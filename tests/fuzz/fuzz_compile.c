/* fuzz_compile.c — libFuzzer target over the whole compiler, down to native code.
 *
 * Built and run by `make fuzz` (tools/fuzz.sh) with AddressSanitizer and UBSan.  The first byte
 * chooses how to compile: bits 0–1 the optimisation level (-O0 … -O3), bits 2–3 the CPU (the
 * host, x86-64, x86-64-v3, x86-64-v4 — the schedule's vector width and tiles follow it), bit 4
 * object mode (`tsrc -c`: no `main`, and the header and manifest are written too); the rest is
 * a module.  Programs that pass the checks of `tsrc --check` go on through
 * assignments, lowering, the plan, optimisation, scheduling, the model image and LLVM's code
 * generation into an object in memory (fuzz_common.c): nothing is linked or written.  A program
 * too large for the per-input time cap (the guards of fuzz_common.c) is skipped before LLVM;
 * libFuzzer's -timeout catches the rest.  Any crash, hang, leak, sanitizer report, malformed IR
 * or LLVM fatal error is a bug. */
#include <stdint.h>
#include <stdio.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const cpus[4] = {NULL, "x86-64", "x86-64-v3", "x86-64-v4"};
    if (size == 0) return 0;
    FuzzJob job = {.text = (const char *)data + 1,
                   .len = size - 1,
                   .stage = FUZZ_NATIVE,
                   .opt_level = data[0] & 3,
                   .cpu = cpus[(data[0] >> 2) & 3],
                   .object_mode = (data[0] & 16) != 0};
    fuzz_compile(&job);
    return 0;
}
