/* fuzz_parse.c — libFuzzer target over the front end and shape inference.
 *
 * Built and run by `make fuzz` (tools/fuzz.sh) with AddressSanitizer and UBSan.  The first byte
 * chooses the entry point: odd → the spec parser alone on the rest (as if it were the inside of
 * a string literal), even → a whole module through parse_module (which also parses every spec
 * literal it meets) and, when it parsed, elaborate() with shape inference and — for well-shaped
 * programs — projections, lowering, optimisation and the IR verifier, on a thread with the
 * large stack tsrc itself gives the compiler.  Any crash, hang, leak or sanitizer report is a
 * bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "diag.h"
#include "parse.h"
#include "spec.h"
#include "elab.h"
#include "assign.h"
#include "lower.h"
#include "opt.h"

#include <pthread.h>

/* Elaborate; when the program is well-shaped, also build its assignments and loop IR,
 * optimise and verify it (the verifier's findings are internal errors: abort). */
static void *elaborate_thread(void *module) {
    Program *program = elaborate(module, NULL);
    AssignResult ar;
    if (!diag_error_count() && assign_build(program, NULL, &ar)) {
        lower_function(ar.ir, ar.forward.name, ar.forward.items, ar.forward.count);
        for (uint32_t i = 0; i < ar.routine_count; i++)
            lower_function(ar.ir, ar.routines[i].name, ar.routines[i].items, ar.routines[i].count);
        if (ir_verify(ar.ir, stderr)) abort();
        optimise(ar.ir);
        if (ir_verify(ar.ir, stderr)) abort();
        arena_free(ar.ir->arena);
    }
    program_free(program);
    return NULL;
}

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
        if (diag_error_count() == 0) {
            ast_dump(sink, module);
            pthread_attr_t attr;
            pthread_t thread;
            pthread_attr_init(&attr);
            pthread_attr_setstacksize(&attr, (size_t)512 << 20);
            if (pthread_create(&thread, &attr, elaborate_thread, module) == 0) pthread_join(thread, NULL);
            pthread_attr_destroy(&attr);
        }
    }
    diag_reset();
    source_free_all();
    arena_free(arena);
    return 0;
}
