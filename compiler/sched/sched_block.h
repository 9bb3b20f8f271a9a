/* sched_block.h — the machinery that the GPU's block kernels share (sched_block.c): how a
 * block kernel covers a contraction (its tile, grid and split: rewrite 6s), the loop over its
 * reduction through shared panels, and how its cells start and are stored.  Rewrite 6 (block
 * tiles, sched_gpu.c) and rewrite 6t (the tensor cores, sched_mma.c) build on it.
 *
 * Requires: sched_internal.h's Sched, for a GPU target. */
#ifndef TSRC_SCHED_BLOCK_H
#define TSRC_SCHED_BLOCK_H

#include "sched/sched_internal.h"

enum { MAX_GRID_YZ = 65535, /* the most blocks of a grid along y or z */
       WIDE_TILE_J = 256    /* a wide tile's cells along J (plan_blocks) */ };

/* A block kernel's share of a split reduction (rewrite 6s below): the block loop `iter` over
 * the parts, each of `steps` steps of the innermost reduction loop (iter UINT32_MAX: no split). */
typedef struct Split {
    uint32_t iter, parts;
    uint64_t steps;
    /* outer: the loop split is the outermost reduction loop (the innermost too short to split),
     * its steps `steps` iterations of it: the block's part loop `part_iter` replaces it, and its
     * own iterator `outer_iter` is iter·steps + part_iter */
    bool outer;
    uint32_t outer_iter, part_iter;
    uint32_t partials; /* the buffer of its partial results (block_cell_store takes one); UINT32_MAX: none yet */
} Split;

/* One operand's panel: where it comes from and goes. */
typedef struct Panel {
    const IrExpr *operand;
    uint32_t tiled_iter;   /* its I (or J) iterator */
    uint32_t base_iter;    /* the block loop along it */
    uint32_t tile;         /* rewrite 6t: the block's cells along its tiled axis */
    uint32_t shared, regs; /* the shared panel, the per-thread registers of a fetch */
    bool k_along_x;        /* the reduction axis is its contiguous one: along threadIdx.x */
    int64_t k_stride, m_stride; /* the panel's cell for step kk and place m: kk·k_stride + m·m_stride (rewrite 6t) */
    IrCoreLayout core;     /* rewrite 6t on sm_90a: a stage's core matrices (ir.h, at 0) */
    bool rounds_in_shared; /* rewrite 6t, tf32 on sm_90a: the panel is copied from the operand's own cells, rounded to
                              tf32 in shared memory each turn (sched_mma.c) */
} Panel;

/* ---- The reduction loop of a block's kernel (rewrites 6 and 6t) ----------------------------------------- *
 *
 * Both block kernels take the reduction `step` steps at a time (BLOCK_K, MMA_K) through shared
 * panels, the next steps' panels fetched into registers while the block computes on the
 * current ones:
 *     for the outer reduction loops (if any), in order:
 *         fetch panels 0 into registers
 *         for kt < K/step − 1:  registers → shared panels;  barrier;
 *                               fetch panels kt + 1;  `step` steps on every cell;  barrier
 *         registers → shared panels;  barrier;  `step` steps on every cell
 *         barrier (when there are outer loops: their next turn overwrites the panels)
 * where K is the innermost reduction loop's extent (or a block's part of it, rewrite 6s), a
 * multiple of `step`.  A reduction over
 * several loops — a weight's gradient summed over a batch's sequences and their positions —
 * so takes its steps in the order of the loops, the reference's.  The kernels differ in how a
 * block's threads are numbered and what a fetch, a spill and a step are: a KLoop's hooks. */
typedef struct KLoop {
    const Reduction *r;
    uint64_t step;
    const Split *split; /* a block's part of the reduction (rewrite 6s) */
    void *tile;
    IrBlock *(*threads)(Sched *s, IrBlock *into, void *tile); /* a block's threads in `into`: their body */
    void (*fetch)(Sched *s, IrBlock *into, void *tile, uint32_t kt, int64_t k_offset); /* steps kt (UINT32_MAX: the first) */
    void (*spill)(Sched *s, IrBlock *into, void *tile);
    void (*compute)(Sched *s, IrBlock *thread, IrBlock *block, void *tile); /* a thread body after a fetch; the block's */
} KLoop;

/* A grid's block loops, x first. */
typedef struct Grid {
    uint32_t iter[3];
    uint64_t extent[3];
    unsigned count;
} Grid;

/* A block kernel's tile, grid and split (plan_blocks). */
typedef struct BlockPlan {
    uint32_t tile, tile_j;  /* cells a block along I and along J */
    uint32_t bi, bj;        /* UINT32_MAX where one tile covers I (J) */
    Grid grid;
    Split split;
} BlockPlan;

/* Appends iter·coef to a (nothing for UINT32_MAX). */
void affine_add(Affine *a, uint32_t iter, int64_t coef);
/* The place along the reduction of step kk + k_offset of panel kt (UINT32_MAX: the first) of
 * `step` steps, in a block's part of a split reduction. */
Affine k_place(Affine kk, uint32_t kt, uint64_t step, int64_t k_offset, const Split *split);
/* For a split of the outermost reduction loop, its iterator in the block's part. */
void map_outer_part(Sched *s, const Split *split);
/* A loop unrolled by the backend, in `into`; *iter its new iterator. */
IrStmt *unrolled(Sched *s, IrBlock *into, uint32_t *iter, uint64_t extent, bool parallel);
IrStmt *push_barrier(Sched *s, IrBlock *into); /* returns the barrier, for its flags (ir.h) */
/* The loops over r's outer reduction loops in `blk`; returns the innermost body. */
IrBlock *outer_reduction_loops(Sched *s, IrBlock *blk, const Reduction *r, const Split *split);
/* The steps of r's innermost reduction loop that one block takes. */
uint64_t part_steps(const Reduction *r, const Split *split);
/* The reduction loop of a block's kernel, panels through registers (above). */
void k_loop(Sched *s, IrBlock *blk, const KLoop *kl);
/* The tile, grid and split of a block kernel over contraction ct of r, `step` steps a panel
 * (`wide`: WIDE_TILE_J cells along J); false where none fits. */
bool plan_blocks(Sched *s, const Reduction *r, const Contraction *ct, uint64_t step, bool wide, BlockPlan *plan);
/* A large grid of row tiles × column tiles, built (top: its block loops, grid_loops), put in
 * the order that shares panels in L2 (groups of GROUP_ROWS row tiles: sched_block.c); the words
 * for the dump's schedule, "" where it keeps its order. */
const char *group_tile_rows(Sched *s, const BlockPlan *plan, IrStmt *top);
/* The grid's block loops; returns the outermost, *body the innermost's body. */
IrStmt *grid_loops(Sched *s, const Grid *g, IrBlock **body);
/* The store of a block's cell of r (`value`, the reduction's, or the part's partial result). */
IrStmt *block_cell_store(Sched *s, const Reduction *r, Split *split, IrExpr *value);
/* A block's cell's initial value: r's, or 0 for a part of a split reduction. */
IrExpr *block_cell_start(Sched *s, const Reduction *r, const Split *split);
/* The block kernel `top` (and, for a split, the nest adding the parts) into `out`, described
 * by `schedule`. */
void push_block_kernel(Sched *s, const Reduction *r, IrStmt *top, const Split *split, const char *schedule, IrBlock *out);

/* Rewrite 6t (sched_mma.c): contraction r on the tensor cores, into `out`; false where it does
 * not apply. */
bool gpu_mma_tiles(Sched *s, Reduction *r, IrBlock *out);

/* Rewrite 7s (sched_scatter.c): a scatter-add nest whose rows fit in shared memory, as blocks
 * that add there, into `out`; false where it does not apply. */
bool gpu_scatter_rows(Sched *s, IrStmt *top, IrBlock *out);

#endif
