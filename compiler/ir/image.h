/* image.h — the model image: the loop IR's buffers, data sets, symbols and prints as the byte
 * array that generated objects carry and the runtime's tsr_state_create() reads (image.c;
 * the format is documented in runtime/internal.h). */
#ifndef TSR_IMAGE_H
#define TSR_IMAGE_H

#include <stddef.h>

#include "ir/ir.h"

/* One GPU kernel of a --target=cuda program, as the runtime launches it (runtime/cuda.c): its
 * entry in the PTX, the launch domain, which of its by-value parameters (one i64 per index
 * symbol, then the run's random key) its code reads, and its buffer parameters, each marked
 * when the kernel stores into it. */
typedef struct GpuKernelInfo {
    const char *name;
    uint32_t grid[3], block[3];
    uint32_t shared_bytes;
    uint8_t scalars; /* TSR_GPU_READS_* (runtime/image_format.h) */
    uint32_t param_count;
    const uint32_t *params; /* buffers */
    const bool *writes;     /* per param */
} GpuKernelInfo;

/* The GPU section of an image: the PTX module and its kernels, numbered as the host code's
 * tsr_gpu_launch() calls number them. */
typedef struct GpuImage {
    const char *ptx;
    const char *arch; /* "sm_80" */
    const unsigned char *cubin; /* the PTX compiled by ptxas for `arch` (cubin_size 0: none) */
    size_t cubin_size;
    const GpuKernelInfo *kernels;
    uint32_t kernel_count;
} GpuImage;

/* The CPU the image's native code was generated for: the TSR_CPU_* extensions it may use
 * (runtime/image_format.h), which the runtime checks before it runs any, and the name its
 * message gives ("x86-64-v4").  Zero features for the reference executor, which runs no
 * native code. */
typedef struct ImageCpu {
    uint32_t features;
    const char *name;
} ImageCpu;

/* The image of `ir` (after optimisation: virtual buffers get no storage), allocated in its
 * arena, for native code made for `cpu`; with a GPU section when `gpu` is not NULL. */
unsigned char *image_build(const IrProgram *ir, const char *module, ImageCpu cpu, const GpuImage *gpu, size_t *size);

#endif
