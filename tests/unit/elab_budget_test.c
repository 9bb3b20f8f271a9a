/* elab_budget_test.c — unit tests of the memory budget a caller gives compile-time evaluation
 * (ElabOptions.eval_megabytes, compiler/elab/elab.c).
 *
 * What it does: elaborates a recursion that builds tensors without bound (the program of
 * tests/shape_errors/eval_too_much.tsr) under budgets of 8, 16 and 32 MB and checks that it
 * stops with the one error that names that budget, having built not much more than it; and
 * that a small well-formed program elaborates without an error under the smallest budget.  The
 * fuzz targets (tests/fuzz/fuzz_common.c) rely on this to keep a runaway program within their
 * per-input time cap.  Elaboration runs on a thread with tsrc's 512 MB stack.  Requires
 * build/libtsrc.a.  Prints one line per failing case and a last line "N passed, N failed";
 * exits 1 on any failure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/diag.h"
#include "elab/elab.h"
#include "front/parse.h"

#include "check.h"

static const char RUNAWAY[] =
    "input { x; b = [4]; o = [8] }\n"
    "let%op layer ~hid () x = relu ({ w } * x + { b = 0.; o = [ hid ] })\n"
    "let rec stack n x = if n = 0 then layer ~hid:8 () x else stack (n - 1) x + stack (n - 1) x\n"
    "let%op y = stack 640 x\n";

static const char SMALL[] =
    "input { x; b = [4]; o = [8] }\n"
    "let%op layer ~hid () x = relu ({ w } * x + { b = 0.; o = [ hid ] })\n"
    "let%op y = layer ~hid:3 () (layer ~hid:16 () x)\n";

typedef struct Job {
    Module *module;
    size_t megabytes;
    size_t grown; /* arena bytes elaboration left allocated before program_free */
} Job;

static void *elaborate_job(void *arg) {
    Job *job = arg;
    ElabOptions eo = {NULL, 0, job->megabytes};
    size_t before = arena_total_bytes();
    Program *program = elaborate(job->module, &eo);
    job->grown = arena_total_bytes() - before;
    program_free(program);
    return NULL;
}

/* Elaborate `text` under `megabytes`; what diag printed (malloc'd), the error count, growth. */
static char *run(const char *text, size_t megabytes, unsigned *errors, size_t *grown) {
    char *out = NULL;
    size_t out_len = 0;
    FILE *stream = open_memstream(&out, &out_len);
    if (!stream) abort();
    diag_set_stream(stream);
    Arena *arena = arena_new();
    uint32_t file = source_add("t.tsr", text, strlen(text));
    Job job = {parse_module(file, arena), megabytes, 0};
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, (size_t)512 << 20) != 0 ||
        pthread_create(&thread, &attr, elaborate_job, &job) != 0)
        abort();
    pthread_join(thread, NULL);
    pthread_attr_destroy(&attr);
    *errors = diag_error_count();
    *grown = job.grown;
    diag_reset();
    source_free_all();
    arena_free(arena);
    fclose(stream);
    diag_set_stream(stderr);
    return out;
}

int main(void) {
    char detail[512];
    static const size_t budgets[] = {8, 16, 32};
    for (unsigned i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        unsigned errors;
        size_t grown;
        char *out = run(RUNAWAY, budgets[i], &errors, &grown);
        char want[96];
        snprintf(want, sizeof want, "error: evaluation builds too much: it has run out of its budget of %zu MB",
                 budgets[i]);
        snprintf(detail, sizeof detail, "budget %zu MB: %u errors, output: %.300s", budgets[i], errors, out);
        check(errors == 1 && strstr(out, want) != NULL, "a runaway recursion stops at the caller's budget", detail);
        /* Checked every EVAL_MEMORY_CHECK steps: a little past the budget at most. */
        snprintf(detail, sizeof detail, "budget %zu MB: %zu MB built", budgets[i], grown >> 20);
        check(grown < (budgets[i] << 20) * 2 + ((size_t)8 << 20), "evaluation builds not much more than its budget",
              detail);
        free(out);
    }
    unsigned errors;
    size_t grown;
    char *out = run(SMALL, 8, &errors, &grown);
    snprintf(detail, sizeof detail, "%u errors, output: %.300s", errors, out);
    check(errors == 0, "a small program elaborates within 8 MB", detail);
    free(out);
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
