/* fuzz_common.h — what the libFuzzer targets of tests/fuzz/ share (fuzz_common.c): the
 * compiler's pipeline run on one program text, as far as a target wants it. */
#ifndef TSR_FUZZ_COMMON_H
#define TSR_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum FuzzStage {
    FUZZ_LOWER,  /* parse, elaborate, lower, optimise, verify */
    FUZZ_NATIVE, /* … then schedule, build the image and generate an object through LLVM */
    FUZZ_IMAGE,  /* parse, elaborate, lower, plan; hand back the model image (no optimisation) */
} FuzzStage;

typedef struct FuzzJob {
    const char *text; /* the program (need not be NUL-terminated) */
    size_t len;
    FuzzStage stage;
    int opt_level;    /* FUZZ_NATIVE: 0..3 */
    const char *cpu;  /* FUZZ_NATIVE: NULL (the host) or a CPU / x86-64 level */
    bool object_mode; /* FUZZ_NATIVE: as `tsrc -c` (no main; also the header and manifest) */
    bool dump_ast;    /* print the AST (to the sink) when it parsed */
    /* Out. */
    bool compiled;           /* every stage asked for ran without an error */
    bool skipped;            /* too large to compile natively within the time cap (a guard) */
    unsigned char *image;    /* FUZZ_IMAGE: malloc'd (the caller frees it), or NULL */
    size_t image_size;
} FuzzJob;

/* How many jobs so far ran every stage they asked for (replay.c reports it). */
extern unsigned long fuzz_compiled_total;

/* Send diagnostics to /dev/null, without an error limit (once per process). */
void fuzz_quiet(void);
/* Run `job` through the compiler on a thread with the stack tsrc gives its compiler, then
 * forget every source and diagnostic.  A malformed IR after any stage aborts (a finding). */
void fuzz_compile(FuzzJob *job);

#endif
