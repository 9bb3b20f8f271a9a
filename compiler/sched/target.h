/* target.h — what the back half knows about the machine it generates code for (target.c).
 *
 * A Target is chosen once per compilation from --target and --cpu.  The schedule (compiler/sched/)
 * reads its parameters — vector width, register tile, cache sizes, thread-pool thresholds —
 * and the driver hands the scheduled program to its emitter.  Nothing here depends on the
 * program. */
#ifndef TSR_TARGET_H
#define TSR_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum TargetKind { TARGET_CPU, TARGET_CUDA } TargetKind;

typedef struct Target {
    TargetKind kind;
    const char *name;          /* "x86-64" */
    const char *triple;        /* NULL: the host's */
    const char *cpu;           /* NULL or "native": the host's */
    char cpu_shown[64];        /* the CPU the parameters were chosen for ("znver4", "x86-64-v3") */
    uint32_t cpu_features;     /* TSR_CPU_* bits (runtime/image_format.h): extensions the code may use */
    unsigned vector_floats;    /* floats in one vector register: 16 (AVX-512), 8 (AVX2), 4 (SSE) */
    unsigned tile_rows;        /* register tile of a contraction: rows (broadcast operand) … */
    unsigned tile_vectors;     /* … by vectors of the other operand: tile_rows·tile_vectors accumulators */
    uint64_t l1_bytes, l2_bytes;
    unsigned l1_ways;          /* the L1 data cache's associativity: 12 on CPUs with a 48 KiB L1d
                                * (Intel since Ice Lake, Zen 5), else 8 */
    uint64_t stream_bytes;     /* a contraction whose tiles read more than this of their broadcast
                                * operand once per panel is split along its reduction into
                                * blocks that read less (sched.c split_reduction): the share of
                                * the last-level cache such a stream may count on */
    double parallel_work;      /* a nest with at least this many cell-iterations runs on the thread pool */
    double grain_work;         /* in chunks of at least this much work */
    uint64_t nontemporal_bytes; /* a pointwise nest writing at least this much, and not reading
                                 * it, stores around the caches */
    bool bf16_convert;         /* AVX-512 BF16's VCVTNEPS2BF16 may round a vector to bf16 (cg_llvm.c) */
    bool bf16_pairs;           /* contractions of two bf16 operands may run on VDPBF16PS, pairs of
                                * reduction steps at once (sched_tile.c, LOOP_DOT_PAIRS) */
    uint32_t prefetch_cells;   /* a packed operand that tiles read as one forward stream is
                                * prefetched this many cells ahead (0: never; sched_tile.c) */
    /* TARGET_CUDA (sched_gpu.c, cg_ptx.c): the GPU architecture and the block size of a
     * kernel's innermost parallel loop. */
    const char *gpu_arch;      /* "sm_80", "sm_90" */
    unsigned gpu_threads;
    unsigned gpu_blocks;       /* the blocks a kernel needs to fill the GPU (--gpu-blocks): block
                                * tiles make at least this many, splitting a reduction if they must */
    bool reassociate;          /* --reassociate: sums and products may be reduced in another order
                                * (the GPU's block reductions, sched_gpu.c rewrite 7) */
} Target;

/* The target for --target TRIPLE (NULL: host) and --cpu CPU (NULL or "native": host).  The CPU's
 * vector width is read from the host's features, or from the name of a CPU or x86-64 level. */
void target_select(const char *triple, const char *cpu, Target *out);

/* --cpu=help: LLVM's names of the CPUs of `triple` (NULL: the host's), one a line, after
 * "native"; false when they cannot be had. */
bool target_print_cpus(const char *triple, FILE *out);
/* NULL when LLVM knows the CPU `cpu` for `triple` (NULL: the host's), or `cpu` is "native", or
 * LLVM's list cannot be had; else the error to report, with the closest known name. */
const char *target_cpu_problem(const char *triple, const char *cpu);

/* Whether --target names the GPU ("cuda", "nvptx64-nvidia-cuda"). */
bool target_is_cuda(const char *triple);
/* The GPU target for `arch` (NULL: sm_80); false, after reporting an error, for an arch that is
 * not sm_NN. */
bool target_select_cuda(const char *arch, Target *out);

#endif
