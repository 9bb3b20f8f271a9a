/* fuzz_parse.c — libFuzzer target over the front end: lexer, parser and spec parser.
 *
 * Built and run by `make fuzz` (tools/fuzz.sh) with AddressSanitizer and UBSan.  The first byte
 * chooses the entry point: odd → the spec parser alone on the rest (as if it were the inside of
 * a string literal), even → a whole module through parse_module (which also parses every spec
 * literal it meets).  Any crash, hang, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "diag.h"
#include "parse.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) {
        sink = fopen("/dev/null", "w");
        diag_set_stream(sink);
        diag_set_max_errors(0);
    }
    if (size == 0) return 0;
    Arena *arena = arena_new();
    uint32_t file = source_add("fuzz.tsr", (const char *)data + 1, size - 1);
    const Source *src = source_get(file);
    if (data[0] & 1) {
        spec_parse(arena, span_make(file, 0, (uint32_t)src->len), src->text, src->len);
    } else {
        Module *module = parse_module(file, arena);
        if (diag_error_count() == 0) ast_dump(sink, module);
    }
    diag_reset();
    source_free_all();
    arena_free(arena);
    return 0;
}
