/* cg_cpu.h — code generation for the CPU: the scheduled loop IR to native code through LLVM
 * (cg_cpu.c, on the shared emission of cg_llvm.c). */
#ifndef TSR_CG_CPU_H
#define TSR_CG_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "cg/cg_llvm.h"
#include "ir/ir.h"
#include "sched/target.h"

typedef struct CgOptions {
    const char *module;   /* prefix of every exported symbol (a C identifier) */
    int opt_level;        /* 0..3 */
    const Target *target; /* triple, CPU, schedule parameters */
    bool with_main;       /* define `main` from the program plan (executables) */
    bool shared_api;      /* --shared: define the model's C API as functions (MODULE_create,
                           * _destroy, _last_error, _save, _load, _set_symbol, and for a GPU model
                           * _host_buffer, _sync_host, _sync_device), the only symbols a shared
                           * library exports besides the routines and the image */
    bool profile;         /* --profile: time every kernel launch; define MODULE_profile_report(),
                           * which `main` calls when it ends, and MODULE_profile_reset()
                           * (docs/runtime.md §17) */
    const uint32_t *gpu_first; /* a --target=cuda program (cg_ptx.c): function f's kernels are GPU
                                * kernels gpu_first[f] … gpu_first[f + 1] - 1, which its routine
                                * launches through tsr_gpu_launch(); NULL: CPU kernels */
    const Target *gpu_target;  /* with gpu_first: the GPU target the kernels were outlined for
                                * (kernel_outline groups a GPU's nests into segments), which the
                                * host's launches must follow */
} CgOptions;

/* Generate the module as `format` into *out (malloc'd; the driver writes it).  The object
 * defines `MODULE__image` / `MODULE__image_size` (the model image), one function
 * `int MODULE_ROUTINE(tsr_state *)` per exported routine, with profile
 * `void MODULE_profile_report(void)` and `MODULE_profile_reset(void)` and, with_main, `main`.  False after
 * reporting an error (an unknown target or CPU). */
bool cg_cpu_emit(const IrProgram *ir, const unsigned char *image, size_t image_size, const CgOptions *options,
                 CgFormat format, CgBytes *out);

#endif
