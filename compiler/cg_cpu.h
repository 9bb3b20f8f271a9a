/* cg_cpu.h — code generation for the CPU: the loop IR to native code through LLVM (cg_cpu.c). */
#ifndef TSR_CG_CPU_H
#define TSR_CG_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

typedef enum CgFormat { CG_OBJECT, CG_ASM, CG_LLVM } CgFormat;

typedef struct CgOptions {
    const char *module;   /* prefix of every exported symbol (a C identifier) */
    int opt_level;        /* 0..3 */
    const char *triple;   /* NULL: the host's */
    const char *cpu;      /* NULL: the host's (with its features) */
    bool with_main;       /* define `main` from the program plan (executables) */
    const char *shown_path; /* the output's name in messages (the file written is a temporary) */
} CgOptions;

/* Generate the module and write it to `path` (the caller renames it into place).  The object
 * defines `MODULE__image` / `MODULE__image_size` (the model image), one function
 * `int MODULE_ROUTINE(tsr_state *)` per exported routine and, with_main, `main`.  False after
 * reporting an error (an unknown target or CPU, a write error). */
bool cg_cpu_emit(const IrProgram *ir, const unsigned char *image, size_t image_size, const CgOptions *options,
                 CgFormat format, const char *path);

#endif
