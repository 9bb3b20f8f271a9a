/* fuzz_parse.c — libFuzzer target over the front end and the loop IR.
 *
 * Built and run by `make fuzz` (tools/fuzz.sh) with AddressSanitizer and UBSan.  The first byte
 * chooses the entry point: odd → the spec parser alone on the rest (as if it were the inside of
 * a string literal), even → a whole module through parse_module (which also parses every spec
 * literal it meets), the AST printer and, when it parsed, elaborate() with shape inference and
 * — for well-shaped programs — assignments, lowering, the plan, optimisation and the IR
 * verifier (fuzz_common.c).  fuzz_compile.c takes the same programs on to native code.  Any
 * crash, hang, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdio.h>

#include "base/arena.h"
#include "base/diag.h"
#include "fuzz_common.h"
#include "front/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    if (size == 0) return 0;
    if (data[0] & 1) {
        Arena *arena = arena_new();
        uint32_t file = source_add("fuzz.tsr", (const char *)data + 1, size - 1);
        const Source *src = source_get(file);
        spec_parse(arena, span_make(file, 0, (uint32_t)src->len), src->text, src->len);
        diag_reset();
        source_free_all();
        arena_free(arena);
    } else {
        FuzzJob job = {.text = (const char *)data + 1, .len = size - 1, .stage = FUZZ_LOWER, .dump_ast = true};
        fuzz_compile(&job);
    }
    return 0;
}
