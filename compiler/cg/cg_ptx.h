/* cg_ptx.h — code generation for NVIDIA GPUs: the scheduled loop IR's kernels as one PTX module
 * (cg_ptx.c, on the shared emission of cg_llvm.c). */
#ifndef TSR_CG_PTX_H
#define TSR_CG_PTX_H

#include <stdbool.h>

#include "cg/cg_llvm.h"
#include "ir/image.h"
#include "ir/ir.h"
#include "sched/target.h"

/* The GPU half of a program: the PTX text, its kernels as the runtime launches them, and where
 * each function's launches start (functions run kernels function_first[f] …
 * function_first[f + 1] - 1, in order). */
struct PtxModule {
    CgBytes ptx;              /* NUL-terminated text (size excludes the NUL) */
    CgBytes cubin;            /* the text compiled ahead of time by ptxas (main.c), or empty */
    GpuImage gpu;             /* gpu.ptx points into `ptx`, gpu.cubin into `cubin` */
    uint32_t *function_first; /* function_count + 1 entries, in the IR's arena */
};
typedef struct PtxModule PtxModule;

/* A file of the CUDA toolkit, `relative` to its root: $CUDA_HOME/relative, else
 * /usr/local/cuda/relative, where access(2) allows `mode` (R_OK, X_OK); NULL when neither does. */
const char *cg_cuda_toolkit_file(Arena *arena, const char *relative, int mode);

/* Emit every kernel of every function of `ir` (scheduled for `target`, a TARGET_CUDA one) as
 * PTX for target->gpu_arch; kernel names start with `module`.  False after reporting an error
 * (no libdevice for a program that needs it, LLVM refusing the code). */
bool cg_ptx_emit(IrProgram *ir, const Target *target, int opt_level, const char *module, PtxModule *out);

#endif
