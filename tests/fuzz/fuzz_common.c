/* fuzz_common.c — the compiler's pipeline for the libFuzzer targets (fuzz_common.h).
 *
 * fuzz_compile() runs one program text the way tsrc's driver (compiler/main.c) does: parse,
 * elaborate with shape inference on a thread with a 512 MB stack, build the assignments, lower
 * every routine (or the implicit forward), build the plan, and then, as the job asks, optimise,
 * schedule for a target and generate an object through LLVM into memory (in object mode also
 * the C header and JSON manifest, into /dev/null) — nothing is linked and no file is written —
 * or hand back the model image.  The IR verifier runs after every
 * stage; its findings are internal errors, so they abort (the fuzzer reports them).
 *
 * Guards keep each input within the fuzzer's per-input time cap: compile-time evaluation may
 * build FUZZ_EVAL_MEGABYTES (tsrc allows 256 MB and more for large files: a runaway recursion
 * took over 30 s to reach that under the fuzzer on a busy machine), and a program whose
 * buffers hold more than FUZZ_MAX_CELLS cells, or whose scheduled IR has more than
 * FUZZ_MAX_STMTS statements, is not handed to LLVM (job->skipped).  The caps are far above
 * what the test and example programs need (tools/fuzz.sh seeds the corpus with them).  Diagnostics go to
 * /dev/null; nothing else is printed. */
#include "fuzz_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "ir/assign.h"
#include "cg/cg_cpu.h"
#include "base/diag.h"
#include "elab/elab.h"
#include "cg/header.h"
#include "ir/image.h"
#include "ir/lower.h"
#include "ir/opt.h"
#include "front/parse.h"
#include "ir/plan.h"
#include "sched/sched.h"
#include "sched/target.h"

enum { FUZZ_MAX_CELLS = 1 << 24, FUZZ_MAX_STMTS = 20000, FUZZ_EVAL_MEGABYTES = 32, COMPILER_STACK = 512u << 20 };

static FILE *sink;
unsigned long fuzz_compiled_total;

void fuzz_quiet(void) {
    if (sink) return;
    sink = fopen("/dev/null", "w");
    if (!sink) abort();
    diag_set_stream(sink);
    diag_set_max_errors(0);
}

static void verify(const IrProgram *ir) {
    if (ir_verify(ir, stderr)) abort();
}

static uint64_t block_stmts(const IrBlock *b) {
    uint64_t n = b->count;
    for (uint32_t i = 0; i < b->count; i++)
        if (b->items[i]->kind == IR_LOOP) n += block_stmts(&b->items[i]->body);
    return n;
}

static bool too_large(const IrProgram *ir) {
    uint64_t cells = 0, stmts = 0;
    for (uint32_t b = 0; b < ir->buffer_count; b++) cells += ir->buffers[b].size;
    for (uint32_t f = 0; f < ir->function_count; f++) stmts += block_stmts(&ir->functions[f].body);
    return cells > FUZZ_MAX_CELLS || stmts > FUZZ_MAX_STMTS;
}

static void native(FuzzJob *job, IrProgram *ir) {
    Target target;
    target_select(NULL, job->cpu, &target);
    schedule(ir, &target);
    verify(ir);
    if (too_large(ir)) {
        job->skipped = true;
        return;
    }
    size_t size;
    unsigned char *image = image_build(ir, "fuzz", (ImageCpu){target.cpu_features, target.cpu_shown}, NULL, &size);
    CgOptions co = {.module = "fuzz", .opt_level = job->opt_level, .target = &target, .with_main = !job->object_mode};
    CgBytes bytes = {0};
    job->compiled = cg_cpu_emit(ir, image, size, &co, CG_OBJECT, &bytes) && !diag_error_count();
    if (job->compiled && bytes.size == 0) abort(); /* an object with nothing in it */
    free(bytes.data);
    if (job->compiled && job->object_mode) {
        header_write(ir, "fuzz", "fuzz.tsr", false, false, sink);
        manifest_write(ir, "fuzz", sink);
    }
}

typedef struct Parsed {
    FuzzJob *job;
    Module *module;
} Parsed;

/* Everything after parsing, on the large stack. */
static void *back_half(void *arg) {
    FuzzJob *job = ((Parsed *)arg)->job;
    Module *module = ((Parsed *)arg)->module;
    ElabOptions eo = {NULL, 0, FUZZ_EVAL_MEGABYTES};
    Program *program = elaborate(module, &eo);
    AssignResult ar;
    if (!diag_error_count() && assign_build(program, NULL, &ar)) {
        IrProgram *ir = ar.ir;
        if (ar.routine_count == 0) lower_function(ir, ar.forward.name, ar.forward.items, ar.forward.count);
        for (uint32_t i = 0; i < ar.routine_count; i++)
            lower_function(ir, ar.routines[i].name, ar.routines[i].items, ar.routines[i].count);
        verify(ir);
        if (plan_build(ir, &ar) && !diag_error_count()) {
            if (job->stage == FUZZ_IMAGE) {
                size_t size;
                const unsigned char *image = image_build(ir, "fuzz", (ImageCpu){0}, NULL, &size); /* in ir's arena */
                job->image = malloc(size);
                if (!job->image) abort();
                memcpy(job->image, image, size);
                job->image_size = size;
                job->compiled = true;
            } else if (too_large(ir)) {
                job->skipped = true;
            } else {
                optimise(ir, false);
                verify(ir);
                if (job->stage == FUZZ_NATIVE) native(job, ir);
                else job->compiled = !diag_error_count();
            }
        }
        arena_free(ir->arena);
    }
    program_free(program);
    return NULL;
}

void fuzz_compile(FuzzJob *job) {
    fuzz_quiet();
    job->compiled = job->skipped = false;
    job->image = NULL;
    job->image_size = 0;
    Arena *arena = arena_new();
    uint32_t file = source_add("fuzz.tsr", job->text, job->len);
    Module *module = parse_module(file, arena);
    if (diag_error_count() == 0) {
        if (job->dump_ast) ast_dump(sink, module);
        Parsed parsed = {job, module};
        pthread_attr_t attr;
        pthread_t thread;
        if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, COMPILER_STACK) != 0 ||
            pthread_create(&thread, &attr, back_half, &parsed) != 0)
            abort();
        pthread_join(thread, NULL);
        pthread_attr_destroy(&attr);
    }
    if (job->compiled) fuzz_compiled_total++;
    diag_reset();
    source_free_all();
    arena_free(arena);
}
