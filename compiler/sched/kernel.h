/* kernel.h — kernels: the top-level nests of a function, outlined for a backend (kernel.c). */
#ifndef TSR_KERNEL_H
#define TSR_KERNEL_H

#include "ir/ir.h"
#include "sched/target.h"

/* Statements stmts[0 … count) of a function that run as one kernel: a top-level nest, or the
 * statements that share its locals (a full reduction: set the local, loop, store); or, inside a
 * loop of blocks (`blocks`: a LOOP_BLOCKS top-level loop, docs/ir.md §5.2), a
 * nest of its body: the host runs the kernels of one such loop for each block, its symbol set in
 * the state's symbols.  Its
 * parameters are the state buffers it touches (in id order) and the index symbols; its
 * kernel-local buffers (tiles) live in each run.  When `threaded`, its outer loop (the launch
 * domain, 0 ≤ i < extent) is split over the thread pool in chunks of at least `grain`;
 * otherwise the host calls it once over the whole domain.  A GPU kernel is launched on the
 * grid of blocks its gpu.x/y/z loops give (one thread when it has none).  A call of the runtime
 * (IR_CALL, `call`) is a kernel of its own that the host carries out itself, between the
 * kernels before and after it; its buffers are the action's. */
typedef struct Kernel {
    IrStmt *const *stmts;
    uint32_t count;
    const IrStmt *blocks;
    uint32_t *buffers;       /* state buffers, in id order */
    uint32_t buffer_count;
    uint32_t *locals;        /* kernel-local buffers */
    uint32_t local_count;
    bool threaded;
    bool call;               /* stmts[0] is an IR_CALL: the host calls the runtime, no kernel */
    int64_t extent, grain;
    /* On a GPU (loops of modes gpu.x/y/z at its top, sched_gpu.c): the launch.  With
     * `segments`, its statements are independent nests run side by side in one launch, every
     * block of the widest one's threads: nests of gpu.x/y/z loops (threads along x alone) and
     * blocks' kernels (a reduction of each cell across a block; a product's block tiles, beside
     * segments of exactly their threads only: kernel.c shape_fits); statement i takes the next
     * blocks of the grid along x, as many as its own grid has
     * (with that many threads along x, for gpu.x; kernel_segment_grid; x fastest).  With
     * `chain`, its statements are kernels of one block each that came one after another (a
     * clipping norm's sums into its total), run in order by one block of the widest one's
     * threads, a barrier between each and the next: a kernel of statements outside GPU loops on
     * thread 0 (kernel_chain_thread0), a nest of gpu.x loops on as many threads as its extent,
     * a block's kernel on its thread loops. */
    uint32_t grid[3], block[3];
    bool segments, chain;
    /* A kernel of segments or a chain: its parts (segments; the chain's kernels), statements
     * part_first[p] … part_first[p + 1] − 1 (p < part_count), and the part that uses each
     * kernel-local buffer (local_part[i], of locals[i]).  A part has the kernel's shared memory
     * to itself (a block runs one segment; a chain's parts run one after another, a barrier
     * between): the backend lays out each part's shared buffers from the same start. */
    uint32_t part_count;
    uint32_t *part_first, *local_part;
} Kernel;

/* The host side of a function: its kernels, launched in order. */
typedef struct KernelList {
    const IrFunction *fn;
    Kernel *kernels;
    uint32_t count;
} KernelList;

/* Outline `fn` into kernels (in ir's arena), choosing which run on the thread pool from the
 * target's thresholds. */
KernelList kernel_outline(IrProgram *ir, const IrFunction *fn, const Target *target);

/* For a GPU target: put fn's top-level statements in the order kernel_outline launches them
 * (it moves segments up past statements they do not depend on, group), so that the function
 * the reference executor runs — the GPU schedule's emulation — is the order the GPU runs; the
 * outline of the reordered function is the same kernels. */
void kernel_order(IrProgram *ir, IrFunction *fn, const Target *target);

/* The launch (grid, block) of a kernel whose first statement is `s`: its gpu.x/y/z loops, or
 * its block loops and the longest of its thread loops (sched_gpu.c puts them at the top). */
void kernel_gpu_launch(Kernel *kn, const IrStmt *s);

/* The grid of segment `s` of a kernel of segments whose blocks have `threads` threads (its
 * gpu.x loop takes that many a block, its gpu.y and gpu.z loops theirs; a block's kernel: its
 * block loops); returns its blocks. */
uint64_t kernel_segment_grid(const IrStmt *s, uint32_t threads, uint32_t grid[3]);

/* Whether part p of a chain (Kernel.chain) is statements outside GPU loops, which thread 0 runs. */
bool kernel_chain_thread0(const Kernel *kn, uint32_t p);

/* Set written[b] for every buffer b that statement s (and the statements inside it) stores to. */
void kernel_note_stores(const IrStmt *s, bool *written);

#endif
