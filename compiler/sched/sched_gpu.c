/* sched_gpu.c — the schedule for the GPU target (--target=cuda): the GPU's rewrites of
 * reduction nests, and which loops run on which GPU threads (sched.h).
 *
 * The rewrites, tried in this order on every reduction nest of a function
 * (schedule_gpu_function, which sched.c's schedule() calls for the GPU target):
 *   7r. first, where a reduction that 7 below takes runs over rows that pointwise nests and
 *      further such reductions right before and after it share (a layer norm), all of them
 *      become one kernel, a block a row (gpu_row_kernel);
 *   6t. a large contraction of bf16 or f16 operands, or of f32 ones rounded to tf32 (--tf32),
 *      becomes a block's kernel on the tensor cores (gpu_mma_tiles, sched_mma.c), for sm_80
 *      and later;
 *   6. a large contraction becomes a block's kernel staging its operands through shared memory
 *      (gpu_block_tiles), a sum over several loops walking the outer ones around its panels;
 *   6s. with --reassociate, one too small to fill the GPU (Target.gpu_blocks) has its
 *      reduction split across blocks, the parts added by a nest after it (plan_blocks,
 *      sched_block.c, which holds what the block kernels of 6 and 6t share);
 *   7. a reduction with few cells and many steps reduces each cell across a block of threads
 *      (gpu_block_reduction), as does a full reduction to one cell;
 *   7s. a scatter-add (a gather's gradient) whose rows fit in shared memory adds there, a block's
 *      rows copied in and out (gpu_scatter_rows, sched_scatter.c);
 *   5. any other reduction nest computes a tile of cells per thread (gpu_thread_tiles).
 * Then neighbouring pointwise nests are fused (nest.c's rewrite 4), and schedule_gpu() maps the
 * loops onto the grid.
 *
 * What it does.  Every top-level nest of a function becomes one kernel (kernel.c), and the
 * nest's outermost parallel loops become the kernel's launch domain:
 *
 *   - the chain of perfectly nested parallel loops at the top of a nest (each the only
 *     statement of its parent's body) is found; at most three of them are mapped, always a
 *     prefix of the chain, so that every thread runs the same code below them.  A chain of
 *     more than three is first reordered (its iterations are independent, so any order
 *     computes the same cells): the innermost loop and the two longest of the others, in
 *     their order, become its top, the rest run inside each thread (attention's scores over
 *     sequences, heads and two position tiles: 12 288 threads of 4 tiles each, where
 *     sequences, heads and row tiles mapped left 1 536 threads of 32 tiles each);
 *   - a chain whose innermost loop is shorter than a warp takes its longest loop of a warp or
 *     more as the innermost instead (full_warps: fused attention's 4 heads under 64 rows left
 *     28 of a warp's 32 threads idle);
 *   - the innermost mapped loop becomes `gpu.x`: iteration blockIdx.x · T + threadIdx.x with T
 *     threads a block (the target's gpu_threads, fewer for a short loop: a multiple of the warp
 *     size of 32), and a guard for the threads past the extent in the last block.  It is the
 *     loop nearest the innermost, the one that walks the stored cells with the smallest step,
 *     so a warp's 32 threads store (and mostly load) 32 neighbouring cells: coalesced accesses;
 *   - the loop around it becomes `gpu.y` (one block row per iteration), the one around that
 *     `gpu.z`, each only when its extent fits the grid's limit of 65535 (otherwise fewer loops
 *     are mapped);
 *   - everything below the mapped loops — inner parallel loops, reductions with their local
 *     accumulators — runs inside each thread, in the order the loop IR gives, so every cell is
 *     computed with the same operations in the same order as the reference executor computes it;
 *   - a nest with no parallel loop at its top (a full reduction `l = 0; for …; store`) runs on
 *     one thread.
 *
 * Before mapping, neighbouring pointwise nests over the same cells are fused (nest.c's
 * rewrite 4), as on the CPU: one kernel instead of one per nest.  The CPU's rewrites 1–3
 * (packing, register tiles, in-place accumulation, non-temporal stores) are not used here.
 *
 * Requires: a verified, optimised IrProgram (lower.c, opt.c), before image_build(). */
#include "sched/sched_block.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Mapping loops onto the grid --------------------------------------------------------------------- */

enum { WARP = 32 };

/* The threads of an x loop that asks for none: T, or fewer for a short loop. */
static uint32_t x_threads(const IrStmt *l, const Target *target) {
    uint64_t t = (l->extent + WARP - 1) / WARP * WARP;
    return t < target->gpu_threads ? (uint32_t)t : target->gpu_threads;
}

/* A chain of more than three perfectly nested parallel loops reordered so that its innermost
 * loop and the two longest of the others, in their order, are its top three (the loops' headers
 * move; the nodes, the top's comment and the innermost body stay). */
static void longest_first(IrStmt **chain, unsigned n) {
    bool mapped[MAX_LOOPS] = {false};
    mapped[n - 1] = true;
    for (int pick = 0; pick < 2; pick++) {
        unsigned best = n - 1;
        for (unsigned i = n - 1; i-- > 0;)
            if (!mapped[i] && (best == n - 1 || chain[i]->extent > chain[best]->extent)) best = i;
        mapped[best] = true;
    }
    uint32_t iter[MAX_LOOPS];
    uint64_t extent[MAX_LOOPS];
    unsigned order = 0;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < n; i++)
            if (mapped[i] == (pass == 0)) iter[order] = chain[i]->iter, extent[order++] = chain[i]->extent;
    for (unsigned i = 0; i < n; i++) chain[i]->iter = iter[i], chain[i]->extent = extent[i];
}

/* Whether a loop runs in s (s included) that is not parallel: a thread's steps of a reduction. */
static bool has_serial_loop(const IrStmt *s) {
    if (s->kind != IR_LOOP) return false;
    if (!s->parallel) return true;
    for (uint32_t i = 0; i < s->body.count; i++)
        if (has_serial_loop(s->body.items[i])) return true;
    return false;
}

/* A chain of at most three loops whose innermost is shorter than a warp, asks for no threads
 * and takes serial steps in each thread (fused attention's heads, 4 or 12, under its rows' 64
 * and its sequences, each row thousands of steps: blocks of 32 threads with 4 or 12 at work)
 * takes its longest loop, if it has a warp's worth of iterations, as the innermost instead:
 * the two loops' headers swap (their iterations are independent).  A nest of pointwise cells
 * keeps its order: its threads' few loads are better coalesced along the innermost loop. */
static void full_warps(IrStmt **chain, unsigned n) {
    IrStmt *inner = chain[n - 1]; /* (parallel: has_serial_loop looks below it) */
    if (inner->extent >= WARP || inner->threads || !has_serial_loop(inner)) return;
    unsigned longest = n - 1;
    for (unsigned i = 0; i + 1 < n; i++)
        if (!chain[i]->threads && chain[i]->extent >= WARP && chain[i]->extent > chain[longest]->extent) longest = i;
    if (longest == n - 1) return;
    uint32_t iter = inner->iter;
    uint64_t extent = inner->extent;
    inner->iter = chain[longest]->iter, inner->extent = chain[longest]->extent;
    chain[longest]->iter = iter, chain[longest]->extent = extent;
}

/* Map the top of one top-level nest onto the grid. */
static void map_nest(IrStmt *top, const Target *target) {
    IrStmt *chain[MAX_LOOPS];
    unsigned n = 0;
    for (IrStmt *s = top; n < MAX_LOOPS && s->kind == IR_LOOP && s->parallel && s->mode == LOOP_PLAIN;) {
        chain[n++] = s;
        if (s->body.count != 1 || s->body.items[0]->kind != IR_LOOP) break;
        s = s->body.items[0];
    }
    if (n == 0) return;
    if (n > 3) longest_first(chain, n);
    n = n < 3 ? n : 3;
    full_warps(chain, n);
    /* The block: the threads a loop asks for (thread tiles, rewrite 5 below), else T along x and one
     * along y and z. */
    uint32_t threads[3];
    for (unsigned i = 0; i < n; i++) threads[i] = chain[i]->threads ? chain[i]->threads : i + 1 == n ? x_threads(chain[i], target) : 1;
    /* The loops above the x loop must fit the grid's y and z dimensions. */
    while (n > 1) {
        bool fits = true;
        for (unsigned i = 0; i + 1 < n; i++) fits = fits && (chain[i]->extent + threads[i] - 1) / threads[i] <= MAX_GRID_YZ;
        if (fits) break;
        n--;
        if (!chain[n - 1]->threads) threads[n - 1] = x_threads(chain[n - 1], target);
    }
    static const IrLoopMode modes[3] = {LOOP_GPU_X, LOOP_GPU_Y, LOOP_GPU_Z};
    for (unsigned i = 0; i < n; i++) {
        chain[i]->mode = modes[n - 1 - i];
        chain[i]->threads = threads[i];
    }
}

void schedule_gpu(IrProgram *ir, const Target *target) {
    for (uint32_t f = 0; f < ir->function_count; f++) {
        IrFunction *fn = &ir->functions[f];
        for (uint32_t i = 0; i < fn->body.count; i++) map_nest(fn->body.items[i], target);
    }
}

/* ---- Rewrite 5, the GPU's: thread tiles -------------------------------------------------------------- *
 *
 * On the GPU (sched_gpu.c maps the outer parallel loops onto threads), a canonical reduction
 * nest with at least two parallel loops I (the outer) and J (the innermost) is unrolled and
 * jammed: each thread computes a TM×TN tile of cells, i = io·TM + r and j = c·(J/TN) + jo,
 * keeping their accumulators in a kernel-local tile (registers), so that one load of an operand
 * serves TN (or TM) cells: a matmul's thread loads TM + TN values per reduction step for TM·TN
 * fmas, not 2 per fma.  A thread's TN cells along J are adjacent (j = jo·TN + c), so its loads
 * and stores along J are vector loads, and a warp's together cover whole cache lines.  The
 * innermost reduction loop is unrolled by 4 where its extent allows, so that loads along the
 * reduction become vector loads too.  Each cell still starts from its own initial value and takes its
 * steps in the order of the reduction loops: bit for bit the reference's result.  The tile is
 * as large as 8×8 while the nest keeps at least GPU_MIN_THREADS threads, and each side divides
 * its loop's extent (no ragged tiles); otherwise the nest is left for sched_gpu.c as it is.
 * A nest of two batch loops (attention's gradients over sequences and heads) would leave one of
 * its four parallel loops to run serially in each thread (the grid has three axes): the
 * shorter batch loop, of at most GPU_MAX_JAM iterations, joins the tile instead, its cells
 * accumulated side by side with the others' in every reduction step (tb × tm × tn cells, at
 * most GPU_MAX_TILE² of them): as many chains of loads in flight a thread as cells, where the
 * serial loop waited out each chain in turn. */

enum { GPU_MIN_THREADS = 1 << 15, GPU_MAX_TILE = 8, GPU_MAX_JAM = 8, REDUCTION_UNROLL = 4 };

/* The largest power of two at most `most` that divides `extent`. */
static uint32_t tile_side(uint64_t extent, uint32_t most) {
    uint32_t t = most;
    while (t > 1 && extent % t) t /= 2;
    return t;
}

typedef struct ThreadTile {
    IrStmt *i, *j;      /* the loops tiled */
    IrStmt *jam;        /* a batch loop jammed into the tile, or NULL */
    uint32_t io, jo;    /* the loops over tiles */
    uint32_t tb, tm, tn; /* the tile's sides: tb along `jam` (1 without), tm along i, tn along j */
    uint32_t tile;      /* the kernel-local accumulators, tb·tm·tn cells */
    uint32_t k, ko, ku, unroll; /* the innermost reduction loop split: k = ko·unroll + ku (unroll > 1) */
} ThreadTile;

/* Unrolled loops over a tile's planes b (along the jammed loop), rows r and columns c in `into`,
 * with the jammed loop, i and j mapped onto them; returns the body to fill and the iterators
 * (*b unused without a jammed loop). */
static IrBlock *tile_cells(Sched *s, const ThreadTile *t, IrBlock *into, uint32_t *b, uint32_t *r, uint32_t *c) {
    *r = new_iter(s);
    *c = new_iter(s);
    IrStmt *rows = new_loop(s, *r, t->tm, true, LOOP_UNROLL), *cols = new_loop(s, *c, t->tn, true, LOOP_UNROLL);
    ir_block_push(s->ir->arena, &rows->body, cols);
    reset_subst(s);
    if (t->jam) {
        *b = new_iter(s);
        IrStmt *planes = new_loop(s, *b, t->tb, true, LOOP_UNROLL);
        ir_block_push(s->ir->arena, &planes->body, rows);
        ir_block_push(s->ir->arena, into, planes);
        map_iter(s, t->jam->iter, affine1(*b, 1, 0));
    } else {
        *b = UINT32_MAX;
        ir_block_push(s->ir->arena, into, rows);
    }
    map_iter(s, t->i->iter, (Affine){.terms = {{t->io, t->tm}, {*r, 1}}, .count = 2});
    map_iter(s, t->j->iter, (Affine){.terms = {{t->jo, t->tn}, {*c, 1}}, .count = 2});
    if (t->unroll > 1) map_iter(s, t->k, (Affine){.terms = {{t->ko, t->unroll}, {t->ku, 1}}, .count = 2});
    return &cols->body;
}

/* The tile's cell (b, r, c). */
static IrIndex *tile_index(Sched *s, const ThreadTile *t, uint32_t b, uint32_t r, uint32_t c) {
    IrTerm terms[3] = {{r, t->tn}, {c, 1}, {b, (int64_t)t->tm * t->tn}};
    return flat_index(s, terms, t->jam ? 3 : 2);
}

static bool gpu_thread_tiles(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (r->npar < 2 || r->nred == 0) return false;
    uint32_t c = r->store->buffer;
    if (!loads_only_at(ir, r->init->value, c, r->store->index) || !loads_only_at(ir, r->step->value, c, r->store->index))
        return false;
    ThreadTile t = {.i = r->par[r->npar - 2], .j = r->par[r->npar - 1], .tb = 1};
    /* Two batch loops: the shorter one, when short enough, joins the tile. */
    if (r->npar == 4) {
        IrStmt *shorter = r->par[0]->extent <= r->par[1]->extent ? r->par[0] : r->par[1];
        if (shorter->extent <= GPU_MAX_JAM && shorter->iter < s->old_iters) t.jam = shorter, t.tb = (uint32_t)shorter->extent;
    }
    double batch = 1;
    for (uint32_t k = 0; k + 2 < r->npar; k++) batch *= (double)r->par[k]->extent;
    batch /= t.tb;
    uint32_t most = GPU_MAX_TILE;
    for (; most >= 2; most /= 2) {
        t.tm = tile_side(t.i->extent, most);
        t.tn = tile_side(t.j->extent, most);
        while (t.tb * t.tm * t.tn > GPU_MAX_TILE * GPU_MAX_TILE) {
            if (t.tm >= t.tn) t.tm /= 2;
            else t.tn /= 2;
        }
        if (t.tb * t.tm * t.tn >= 4 && batch * (double)(t.i->extent / t.tm) * (double)(t.j->extent / t.tn) >= GPU_MIN_THREADS)
            break;
    }
    if (most < 2 && !t.jam) return false;
    if (most < 2) { /* the jammed loop alone: one cell along i and j a thread */
        t.tm = t.tn = 1;
        if (t.tb < 4 || batch * (double)t.i->extent * (double)t.j->extent < GPU_MIN_THREADS) return false;
    }
    t.io = new_iter(s);
    t.jo = new_iter(s);
    t.tile = new_scratch(s, "tile", (uint64_t)t.tb * t.tm * t.tn, DTYPE_F32, true);
    IrStmt *over_i = new_loop(s, t.io, t.i->extent / t.tm, true, LOOP_PLAIN);
    IrStmt *over_j = new_loop(s, t.jo, t.j->extent / t.tn, true, LOOP_PLAIN);
    /* sched_gpu.c gives over_j a row of threads and over_i one per block: a block's threads
     * then share the rows of the broadcast operand, one load each for a whole warp (square
     * blocks of 16×16, 32×8, 8×32 and 32×4 threads ran 8–15 % slower on an H100:
     * docs/performance.md). */
    ir_block_push(s->ir->arena, &over_i->body, over_j);
    const char *what = r->par[0]->comment ? r->par[0]->comment : "a reduction";
    uint32_t bb, rr, cc;
    /* Every cell's initial value. */
    IrBlock *body = tile_cells(s, &t, &over_j->body, &bb, &rr, &cc);
    ir_block_push(s->ir->arena, body, new_store(s, t.tile, tile_index(s, &t, bb, rr, cc), clone_expr(s, r->init->value, NULL)));
    /* The reduction loops, each step applied to every cell; the innermost split into steps of
     * REDUCTION_UNROLL, unrolled (k = ko·U + ku: the same order). */
    IrBlock *into = &over_j->body;
    const IrStmt *last = r->red[r->nred - 1];
    uint64_t unroll = last->extent % REDUCTION_UNROLL == 0 ? REDUCTION_UNROLL : 1;
    for (uint32_t k = 0; k < r->nred; k++) {
        bool split = k + 1 == r->nred && unroll > 1;
        IrStmt *l = new_loop(s, split ? new_iter(s) : r->red[k]->iter, r->red[k]->extent / (split ? unroll : 1), false,
                             LOOP_PLAIN);
        ir_block_push(s->ir->arena, into, l);
        into = &l->body;
        if (split) {
            IrStmt *u = new_loop(s, new_iter(s), unroll, false, LOOP_UNROLL);
            ir_block_push(s->ir->arena, into, u);
            into = &u->body;
            t.k = last->iter;
            t.ko = l->iter;
            t.ku = u->iter;
            t.unroll = (uint32_t)unroll;
        }
    }
    body = tile_cells(s, &t, into, &bb, &rr, &cc);
    LocalRepl repl = {r->local, new_load(s, t.tile, tile_index(s, &t, bb, rr, cc)), UINT32_MAX, NULL};
    ir_block_push(s->ir->arena, body, new_store(s, t.tile, tile_index(s, &t, bb, rr, cc), clone_expr(s, r->step->value, &repl)));
    /* The cells stored. */
    body = tile_cells(s, &t, &over_j->body, &bb, &rr, &cc);
    ir_block_push(s->ir->arena, body, new_store(s, c, clone_index(s, r->store->index, ir->buffers[c].rank),
                                                  new_load(s, t.tile, tile_index(s, &t, bb, rr, cc))));
    if (t.jam) { /* the other batch loop alone around the tiles */
        IrStmt *kept = t.jam == r->par[0] ? r->par[1] : r->par[0];
        IrStmt *outer = new_loop(s, kept->iter, kept->extent, true, LOOP_PLAIN);
        ir_block_push(s->ir->arena, &outer->body, over_i);
        ir_block_push(s->ir->arena, out, outer);
    } else if (r->npar > 2) {
        r->par[r->npar - 3]->body = (IrBlock){0};
        ir_block_push(s->ir->arena, &r->par[r->npar - 3]->body, over_i);
        ir_block_push(s->ir->arena, out, r->par[0]);
    } else {
        ir_block_push(s->ir->arena, out, over_i);
    }
    r->par[0]->comment = NULL;
    IrStmt *top = out->items[out->count - 1];
    top->comment = t.jam ? arena_printf(s->ir->arena, "%s; schedule: a %ux%ux%u tile of cells per GPU thread", what, t.tb, t.tm, t.tn)
                         : arena_printf(s->ir->arena, "%s; schedule: a %ux%u tile of cells per GPU thread", what, t.tm, t.tn);
    return true;
}

/* ---- Rewrite 6, the GPU's: block tiles through shared memory ----------------------------------------- *
 *
 * A contraction C[i, j] (+)= Σ_k A[i, k]·B[k, j] (find_contraction; at most two batch loops)
 * whose I and J extents are multiples of a block tile (128, else 64, as long as that makes
 * Target.gpu_blocks blocks: plan_blocks, sched_block.c) and whose innermost reduction loop's extent is a
 * multiple of BLOCK_K becomes a block's kernel (ir.h LOOP_BLOCK_X): each block of THREADS_SIDE²
 * threads computes tile² cells of C, each thread side² of them (side = tile / THREADS_SIDE: 8
 * or 4) in registers (a per-thread buffer), and the block stages the operands through shared
 * memory, BLOCK_K steps of the reduction at a time, the next steps' panels fetched into
 * registers while the block computes on the current ones (k_loop, sched_block.c, which also walks the
 * outer reduction loops of a sum over several axes).
 * The fetches follow each operand's layout so that neighbouring threads read neighbouring
 * cells (the reduction axis along threadIdx.x when it is the operand's contiguous one, else the
 * other axis, `side` cells a thread); the panels are stored [k][i] and [k][j], rows padded
 * by PANEL_PAD cells against bank conflicts, and a step reads a thread's cells of each as two
 * vectors (thread_cells).  Every cell takes its fma steps in the reduction's order: the reference's
 * result bit for bit.  Grids of fewer than Target.gpu_blocks blocks (128 unless --gpu-blocks
 * says otherwise: an H100 has 132 multiprocessors, and 64 blocks of 128² for a 1024² matmul
 * ran at 0.75 of rewrite 5's speed) keep rewrite 5, unless rewrite 6s splits their reduction. */

enum { BLOCK_K = 16, THREADS_SIDE = 16, PANEL_PAD = 4 };

/* A thread's cell: its halves and places along I (r1, r0) and J (c1, c0). */
typedef struct CellIters {
    uint32_t r1, r0, c1, c0;
} CellIters;

typedef struct BlockTile {
    const Contraction *ct;
    uint32_t tile, side;   /* cells a block and a thread along I and J (side = tile / THREADS_SIDE) */
    uint32_t k_iter, bi, bj, cells; /* bi, bj: UINT32_MAX where one block covers I, J */
    Panel a, b;
    uint32_t ty, tx;       /* the thread loops last opened (block_threads) */
    Split split;
} BlockTile;

static IrStmt *thread_loops(Sched *s, IrBlock *into, uint32_t *ty, uint32_t *tx) {
    *ty = new_iter(s);
    *tx = new_iter(s);
    IrStmt *ly = new_loop(s, *ty, THREADS_SIDE, true, LOOP_THREAD_Y), *lx = new_loop(s, *tx, THREADS_SIDE, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, &ly->body, lx);
    ir_block_push(s->ir->arena, into, ly);
    return lx;
}

/* The thread's (ty, tx) fetch register q. */
static IrIndex *fetch_index(Sched *s, const BlockTile *bt, uint32_t ty, uint32_t tx, uint32_t q) {
    IrTerm at[3] = {{ty, THREADS_SIDE * bt->side}, {tx, bt->side}, {q, 1}};
    return flat_index(s, at, 3);
}

/* In a thread's body: regs[q] = operand(tiled ↦ base·tile + m·side + q, k ↦ kt·BLOCK_K +
 * k_offset + kk) for its `side` cells (kt UINT32_MAX: none). */
static void fetch(Sched *s, IrBlock *into, const BlockTile *bt, const Panel *p, uint32_t ty, uint32_t tx, uint32_t kt,
                  int64_t k_offset) {
    uint32_t q;
    IrStmt *lq = unrolled(s, into, &q, bt->side, true);
    uint32_t kk = p->k_along_x ? tx : ty, m = p->k_along_x ? ty : tx;
    reset_subst(s);
    Affine tiled = {.terms = {{m, bt->side}, {q, 1}}, .count = 2};
    affine_add(&tiled, p->base_iter, bt->tile);
    map_iter(s, p->tiled_iter, tiled);
    map_iter(s, bt->k_iter, k_place(affine1(kk, 1, 0), kt, BLOCK_K, k_offset, &bt->split));
    map_outer_part(s, &bt->split);
    ir_block_push(s->ir->arena, &lq->body, new_store(s, p->regs, fetch_index(s, bt, ty, tx, q), clone_expr(s, p->operand, NULL)));
}

/* In a thread's body: shared[kk·(tile + PAD) + m·side + q] = regs[q]. */
static void spill(Sched *s, IrBlock *into, const BlockTile *bt, const Panel *p, uint32_t ty, uint32_t tx) {
    uint32_t q;
    IrStmt *lq = unrolled(s, into, &q, bt->side, true);
    uint32_t kk = p->k_along_x ? tx : ty, m = p->k_along_x ? ty : tx;
    IrTerm at[3] = {{kk, bt->tile + PANEL_PAD}, {m, bt->side}, {q, 1}};
    ir_block_push(s->ir->arena, &lq->body, new_store(s, p->shared, flat_index(s, at, 3), new_load(s, p->regs, fetch_index(s, bt, ty, tx, q))));
}

/* Loops over a thread's cells in `into`, with i and j mapped onto them; returns the body and
 * the cell's accumulator index.  A thread's `side` cells along J are two runs of side/2
 * adjacent cells, tile/2 apart (c1, c0: j = bj·tile + c1·tile/2 + tx·side/2 + c0), and likewise
 * along I: a warp's reads of a panel row then cover whole 128-byte
 * lines of shared memory without bank conflicts, and its stores of C are coalesced. */
static IrBlock *thread_cells(Sched *s, IrBlock *into, const BlockTile *bt, uint32_t ty, uint32_t tx, IrIndex **cell,
                             CellIters *it) {
    int64_t half = bt->side / 2, half_tile = bt->tile / 2;
    IrStmt *l = unrolled(s, into, &it->r1, 2, true);
    l = unrolled(s, &l->body, &it->r0, half, true);
    l = unrolled(s, &l->body, &it->c1, 2, true);
    l = unrolled(s, &l->body, &it->c0, half, true);
    reset_subst(s);
    Affine i = {.terms = {{it->r1, half_tile}, {ty, half}, {it->r0, 1}}, .count = 3};
    affine_add(&i, bt->bi, bt->tile);
    map_iter(s, bt->ct->i_loop->iter, i);
    Affine j = {.terms = {{it->c1, half_tile}, {tx, half}, {it->c0, 1}}, .count = 3};
    affine_add(&j, bt->bj, bt->tile);
    map_iter(s, bt->ct->j_loop->iter, j);
    IrTerm terms[6] = {{ty, THREADS_SIDE * bt->side * bt->side}, {tx, bt->side * bt->side},
                       {it->r1, half * bt->side}, {it->r0, bt->side}, {it->c1, half}, {it->c0, 1}};
    *cell = flat_index(s, terms, 6);
    return &l->body;
}

/* In a thread's body: BLOCK_K steps on each of its cells, from the shared panels. */
static void steps(Sched *s, IrBlock *into, const BlockTile *bt, uint32_t ty, uint32_t tx) {
    int64_t half = bt->side / 2, half_tile = bt->tile / 2;
    uint32_t kk;
    CellIters it;
    IrStmt *lk = unrolled(s, into, &kk, BLOCK_K, false);
    IrIndex *cell;
    IrBlock *body = thread_cells(s, &lk->body, bt, ty, tx, &cell, &it);
    IrTerm a_at[4] = {{kk, bt->tile + PANEL_PAD}, {it.r1, half_tile}, {ty, half}, {it.r0, 1}};
    IrTerm b_at[4] = {{kk, bt->tile + PANEL_PAD}, {it.c1, half_tile}, {tx, half}, {it.c0, 1}};
    IrExpr *a = new_load(s, bt->a.shared, flat_index(s, a_at, 4)), *b = new_load(s, bt->b.shared, flat_index(s, b_at, 4));
    ir_block_push(s->ir->arena, body, new_store(s, bt->cells, cell, new_step_fma(s, bt->ct->b_first, a, b, new_load(s, bt->cells, cell))));
}

/* Rewrite 6's hooks. */
static IrBlock *block_threads(Sched *s, IrBlock *into, void *tile) {
    BlockTile *bt = tile;
    return &thread_loops(s, into, &bt->ty, &bt->tx)->body;
}

static void block_fetch(Sched *s, IrBlock *into, void *tile, uint32_t kt, int64_t k_offset) {
    BlockTile *bt = tile;
    fetch(s, into, bt, &bt->a, bt->ty, bt->tx, kt, k_offset);
    fetch(s, into, bt, &bt->b, bt->ty, bt->tx, kt, k_offset);
}

static void block_spill(Sched *s, IrBlock *into, void *tile) {
    BlockTile *bt = tile;
    spill(s, into, bt, &bt->a, bt->ty, bt->tx);
    spill(s, into, bt, &bt->b, bt->ty, bt->tx);
}

static void block_steps(Sched *s, IrBlock *thread, IrBlock *block, void *tile) {
    (void)block;
    BlockTile *bt = tile;
    steps(s, thread, bt, bt->ty, bt->tx);
}

static void panel_init(Sched *s, const BlockTile *bt, Panel *p, const IrExpr *operand, uint32_t tiled_iter, uint32_t base_iter, uint32_t k_iter,
                       const char *name) {
    const IrProgram *ir = s->ir;
    *p = (Panel){.operand = operand, .tiled_iter = tiled_iter, .base_iter = base_iter};
    p->k_along_x = ir_flat_coef(ir, operand->buffer, operand->index, k_iter) == 1 &&
                   ir_flat_coef(ir, operand->buffer, operand->index, tiled_iter) != 1;
    p->shared = new_scratch(s, name, BLOCK_K * (bt->tile + PANEL_PAD), DTYPE_F32, true);
    s->ir->buffers[p->shared].gpu_shared = true;
    p->regs = new_scratch(s, "fetch", (uint64_t)THREADS_SIDE * THREADS_SIDE * bt->side, DTYPE_F32, true);
    s->ir->buffers[p->regs].thread_cells = bt->side;
}

static bool gpu_block_tiles(Sched *s, Reduction *r, IrBlock *out) {
    Contraction ct;
    BlockPlan plan;
    if (!find_contraction(s->ir, r, &ct, false, 0) || !plan_blocks(s, r, &ct, BLOCK_K, false, &plan)) return false;
    BlockTile bt = {.ct = &ct, .tile = plan.tile, .side = plan.tile / THREADS_SIDE, .k_iter = r->red[r->nred - 1]->iter,
                    .bi = plan.bi, .bj = plan.bj, .split = plan.split};
    panel_init(s, &bt, &bt.a, ct.a, ct.i_loop->iter, bt.bi, bt.k_iter, "a_panel");
    panel_init(s, &bt, &bt.b, ct.b, ct.j_loop->iter, bt.bj, bt.k_iter, "b_panel");
    bt.cells = new_scratch(s, "cells", (uint64_t)THREADS_SIDE * THREADS_SIDE * bt.side * bt.side, DTYPE_F32, true);
    s->ir->buffers[bt.cells].thread_cells = bt.side * bt.side;

    IrBlock *blk = NULL;
    IrStmt *top = grid_loops(s, &plan.grid, &blk);
    CellIters it;
    IrIndex *cell;
    /* Every cell's initial value, the reduction, the cells stored. */
    IrBlock *threads = block_threads(s, blk, &bt);
    IrBlock *body = thread_cells(s, threads, &bt, bt.ty, bt.tx, &cell, &it);
    ir_block_push(s->ir->arena, body, new_store(s, bt.cells, cell, block_cell_start(s, r, &bt.split)));
    k_loop(s, blk, &(KLoop){.r = r, .step = BLOCK_K, .split = &bt.split, .tile = &bt,
                            .threads = block_threads, .fetch = block_fetch, .spill = block_spill, .compute = block_steps});
    threads = block_threads(s, blk, &bt);
    body = thread_cells(s, threads, &bt, bt.ty, bt.tx, &cell, &it);
    ir_block_push(s->ir->arena, body, block_cell_store(s, r, &bt.split, new_load(s, bt.cells, cell)));

    const char *order = group_tile_rows(s, &plan, top);
    push_block_kernel(s, r, top, &bt.split,
                      arena_printf(s->ir->arena, "%ux%u cells a GPU block through shared memory, %ux%u a thread%s", bt.tile,
                                   bt.tile, bt.side, bt.side, order),
                      out);
    return true;
}

/* ---- Rewrite 7, the GPU's: reductions across a block's threads -------------------------------------- *
 *
 * A reduction with few cells (fewer than TREE_MAX_CELLS: a loss, a norm, a sum over a batch)
 * and many steps would run on few threads, each taking every step of its cell.  Instead each
 * cell gets a block of T threads (the largest power of two up to TREE_MAX_THREADS dividing the
 * innermost reduction loop's extent, at least TREE_MIN_THREADS): thread t takes the steps
 * k ≡ t (mod T) of the innermost reduction loop (neighbouring threads, neighbouring cells) and
 * every step of the loops around it, into a partial result in shared memory that starts at the
 * step's neutral element; then log2(T) phases halve the partials, `part[t] = part[t] ⊕
 * part[t + s]` for the threads t < s, barriers between; the cell is init ⊕ part[0].  The step
 * must be `l = fma(x, y, l)` (⊕ is +) or `l = l ⊕ e` with ⊕ one of + · max min.  For max and
 * min the result is the reference's.  Sums and products are added (multiplied) in another
 * order, so they round differently, as any parallel reduction does: only with --reassociate
 * (Target.reassociate); without it they keep the reference's order, one thread a cell, and the
 * GPU prints what the reference executor prints (a 16M-cell sum in float32 moved by 0.15 % on
 * an H100: tests/native/stream.tsr).  From TREE_MIN_STEPS steps on with --reassociate: a layer
 * norm's statistics over GPT-2's 768 channels at 256 positions ran one thread a row, 256
 * threads on the whole GPU, each waiting on 768 loads in turn; a block a row takes 3 steps a
 * thread and 8 halvings.  Without it, a maximum or minimum is reduced across a block from
 * TREE_MIN_STEPS_EXACT steps on, as before: the same value in any order, except where NaNs or
 * zeros of both signs meet (the reference's max is `a > b ? a : b`, which depends on the order
 * there). */

enum { TREE_MAX_THREADS = 256, TREE_MIN_THREADS = 32, TREE_MAX_CELLS = 4096, TREE_MIN_STEPS = 256,
       TREE_MIN_STEPS_EXACT = 2048, ROW_CELLS_MOST = 1 << 16 };

static bool reads_this_local(const IrExpr *e, uint32_t local) {
    if (e->kind == IR_LOCAL) return e->local == local;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (reads_this_local(e->args[i], local)) return true;
    return false;
}

/* The combining operation of a step `l = …` that folds one value into l, or SOP_COUNT. */
static ScalarOp step_combine(const IrExpr *v, uint32_t local) {
    if (v->kind != IR_OP) return SOP_COUNT;
    bool is_l[2] = {false, false};
    if (v->op == SOP_FMA) {
        bool l = v->args[2]->kind == IR_LOCAL && v->args[2]->local == local;
        return l && !reads_this_local(v->args[0], local) && !reads_this_local(v->args[1], local) ? SOP_ADD : SOP_COUNT;
    }
    if (v->op != SOP_ADD && v->op != SOP_MUL && v->op != SOP_MAX && v->op != SOP_MIN) return SOP_COUNT;
    for (int i = 0; i < 2; i++) is_l[i] = v->args[i]->kind == IR_LOCAL && v->args[i]->local == local;
    if (is_l[0] == is_l[1] || reads_this_local(v->args[is_l[0] ? 1 : 0], local)) return SOP_COUNT;
    return v->op;
}

/* The partial part[t + offset]: its index, and a load of it. */
static IrIndex *part_index(Sched *s, uint32_t t, int64_t offset) {
    IrTerm at[1] = {{t, 1}};
    IrIndex *ix = flat_index(s, at, 1);
    ix->offset = offset;
    return ix;
}

static IrExpr *part_at(Sched *s, uint32_t part, uint32_t t, int64_t offset) {
    return new_load(s, part, part_index(s, t, offset));
}

/* Whether r folds its steps in an order a block's threads may change (rewrites 7, 7c, 7r): its
 * step's combining operation in *op, max or min, or + and · with --reassociate; at most three
 * cell loops, the outer ones within the grid's y and z; *cells and *steps its extents. */
static bool foldable(const Sched *s, const Reduction *r, ScalarOp *op, double *cells, double *steps) {
    if (r->nred == 0 || r->npar > 3) return false;
    *op = step_combine(r->step->value, r->local);
    if (*op == SOP_COUNT || ((*op == SOP_ADD || *op == SOP_MUL) && !s->target->reassociate)) return false;
    *cells = *steps = 1;
    for (uint32_t k = 0; k < r->npar; k++) *cells *= (double)r->par[k]->extent;
    for (uint32_t k = 0; k < r->nred; k++) *steps *= (double)r->red[k]->extent;
    for (uint32_t k = 0; k + 1 < r->npar; k++)
        if (r->par[k]->extent > MAX_GRID_YZ) return false;
    return true;
}

static bool down_columns(const Sched *s, const Reduction *r);

/* The threads a block of rewrite 7 gives each cell of `r` (0: not for a block), and the step's
 * combining operation in *op.  In a row kernel (`row`, rewrite 7r) with --reassociate, from
 * TREE_MIN_THREADS steps and up to ROW_CELLS_MOST rows: with the nests around it in the same
 * launch, a row of 64 steps (a softmax over 64 positions) pays for its block.  A reduction down
 * columns (rewrite 7c) is no row kernel's: its rows would be columns. */
static uint32_t tree_threads(const Sched *s, const Reduction *r, bool row, ScalarOp *op) {
    double cells, steps;
    if (!foldable(s, r, op, &cells, &steps) || (row && down_columns(s, r))) return 0;
    const IrStmt *inner = r->red[r->nred - 1];
    uint32_t threads = (uint32_t)tile_side(inner->extent, TREE_MAX_THREADS);
    bool rows = row && s->target->reassociate;
    uint64_t min_steps = rows ? TREE_MIN_THREADS : s->target->reassociate ? TREE_MIN_STEPS : TREE_MIN_STEPS_EXACT;
    return cells >= (rows ? ROW_CELLS_MOST : TREE_MAX_CELLS) || steps < min_steps || threads < TREE_MIN_THREADS ? 0 : threads;
}

/* The iterators a reduction's cell loops are renamed to where it runs inside a row kernel
 * (rewrite 7r): rows[k] for its k-th parallel loop; count 0 leaves them as they are. */
typedef struct RowIters {
    uint32_t iters[3];
    uint32_t count;
} RowIters;

static void reset_to_rows(Sched *s, IrStmt *const *par, const RowIters *rows) {
    reset_subst(s);
    for (uint32_t k = 0; k < rows->count; k++) map_iter(s, par[k]->iter, affine1(rows->iters[k], 1, 0));
}

/* The element type of r's partial results: its step's (f32, f64, i32 or i64; an i32 maximum
 * kept in f32 partials was folded as float bit patterns). */
static DType partial_type(const Sched *s, const Reduction *r) { return ir_expr_type(s->ir, r->step->value); }

/* The neutral element of a step's combining operation in `type`: the partials' start (the
 * type's least and greatest values for an integer maximum and minimum). */
static IrExpr *neutral(Sched *s, ScalarOp op, DType type) {
    bool wide = type == DTYPE_I64, integer = type == DTYPE_I32 || wide;
    double lowest = integer ? (wide ? -0x1p63 : -0x1p31) : -INFINITY;
    double highest = integer ? (wide ? 0x1p63 : 0x1p31 - 1) : INFINITY; /* 2^63 holds to INT64_MAX (lower.c) */
    return new_const(s, op == SOP_ADD ? 0 : op == SOP_MUL ? 1 : op == SOP_MAX ? lowest : highest, type);
}

/* The halvings of `width` partials in part[] down to `lanes` of them: part[t] = part[t] ⊕
 * part[t + h] for the threads t < h, h = width/2 … lanes, each after a barrier; then a barrier. */
static void halve_partials(Sched *s, IrBlock *blk, uint32_t part, ScalarOp op, uint32_t width, uint32_t lanes) {
    for (uint32_t half = width / 2; half >= lanes; half /= 2) {
        push_barrier(s, blk);
        uint32_t th = new_iter(s);
        IrStmt *lh = new_loop(s, th, half, true, LOOP_THREAD_X);
        ir_block_push(s->ir->arena, blk, lh);
        ir_block_push(s->ir->arena, &lh->body, new_store(s, part, part_index(s, th, 0),
                                                         new_op(s, op, part_at(s, part, th, 0), part_at(s, part, th, half), NULL)));
    }
    push_barrier(s, blk);
}

/* The cell's store on thread t of the thread loop l, its initial value folded with part[t] (the
 * caller has mapped the cell's iterators onto t). */
static void store_cell(Sched *s, const Reduction *r, ScalarOp op, IrStmt *l, uint32_t part, uint32_t t) {
    const IrProgram *ir = s->ir;
    IrExpr *total = new_op(s, op, clone_expr(s, r->init->value, NULL), part_at(s, part, t, 0), NULL);
    ir_block_push(s->ir->arena, &l->body, new_store(s, r->store->buffer, clone_index(s, r->store->index, ir->buffers[r->store->buffer].rank), total));
}

/* A thread's loops over its steps of r under `into`: the outer reduction loops as they are, then
 * every `stride`-th step of the innermost (a loop of extent / stride over a new iterator, *kq,
 * which the caller maps with the thread's own); the innermost loop's body. */
static IrBlock *step_loops(Sched *s, const Reduction *r, IrBlock *into, uint32_t stride, uint32_t *kq) {
    for (uint32_t k = 0; k + 1 < r->nred; k++) {
        IrStmt *l = new_loop(s, r->red[k]->iter, r->red[k]->extent, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, into, l);
        into = &l->body;
    }
    *kq = new_iter(s);
    IrStmt *lq = new_loop(s, *kq, r->red[r->nred - 1]->extent / stride, false, LOOP_PLAIN);
    ir_block_push(s->ir->arena, into, lq);
    return &lq->body;
}

/* The phases of rewrite 7 for the cell that the block loops around `blk` name: the threads'
 * partial results, the halvings, the cell. */
static void tree_phases(Sched *s, const Reduction *r, ScalarOp op, uint32_t threads, IrBlock *blk,
                        const RowIters *rows) {
    const IrStmt *inner = r->red[r->nred - 1];
    uint32_t part = new_scratch(s, "partials", threads, partial_type(s, r), true);
    s->ir->buffers[part].gpu_shared = true;
    /* Each thread's partial result. */
    uint32_t t = new_iter(s);
    IrStmt *lt = new_loop(s, t, threads, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, lt);
    ir_block_push(s->ir->arena, &lt->body, new_store(s, part, part_index(s, t, 0), neutral(s, op, partial_type(s, r))));
    uint32_t kq;
    IrBlock *steps = step_loops(s, r, &lt->body, threads, &kq);
    reset_to_rows(s, r->par, rows);
    map_iter(s, inner->iter, (Affine){.terms = {{kq, threads}, {t, 1}}, .count = 2});
    LocalRepl repl = {r->local, part_at(s, part, t, 0), UINT32_MAX, NULL};
    ir_block_push(s->ir->arena, steps, new_store(s, part, part_index(s, t, 0), clone_expr(s, r->step->value, &repl)));
    halve_partials(s, blk, part, op, threads, 1);
    /* The cell: its initial value folded with the total (by the thread that made part[0]). */
    uint32_t t0 = new_iter(s);
    IrStmt *l0 = new_loop(s, t0, 1, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, l0);
    reset_to_rows(s, r->par, rows);
    store_cell(s, r, op, l0, part, t0);
}

/* The block loops of a block a cell (a row): the cells' own loops, innermost on x, or one block
 * for a single cell; or, `lanes` > 1, a block a run of that many cells along the innermost cell
 * loop (rewrite 7c), whose block loop takes iterator `run`.  *blk the innermost's body. */
static IrStmt *cell_blocks(Sched *s, const Reduction *r, uint32_t lanes, uint32_t run, IrBlock **blk) {
    static const IrLoopMode modes[3] = {LOOP_BLOCK_X, LOOP_BLOCK_Y, LOOP_BLOCK_Z};
    IrStmt *top = NULL;
    if (r->npar == 0) {
        top = new_loop(s, new_iter(s), 1, true, LOOP_BLOCK_X);
        *blk = &top->body;
    }
    for (uint32_t k = 0; k < r->npar; k++) {
        bool runs = lanes > 1 && k + 1 == r->npar;
        IrStmt *l = new_loop(s, runs ? run : r->par[k]->iter, r->par[k]->extent / (runs ? lanes : 1), true,
                             modes[r->npar - 1 - k]);
        if (!top) top = l;
        else ir_block_push(s->ir->arena, *blk, l);
        *blk = &l->body;
    }
    return top;
}

static bool gpu_block_reduction(Sched *s, const Reduction *r, IrBlock *out) {
    ScalarOp op;
    uint32_t threads = tree_threads(s, r, false, &op);
    if (!threads) return false;
    IrBlock *blk = out;
    IrStmt *top = cell_blocks(s, r, 1, UINT32_MAX, &blk);
    tree_phases(s, r, op, threads, blk, &(RowIters){.count = 0});
    const char *what = r->par[0] && r->par[0]->comment ? r->par[0]->comment : r->init->comment ? r->init->comment : "a reduction";
    top->comment = arena_printf(s->ir->arena, "%s; schedule: each cell reduced across a block of %u GPU threads", what, threads);
    ir_block_push(s->ir->arena, out, top);
    return true;
}

/* ---- Rewrite 7c, the GPU's: columns reduced across a block -------------------------------------------- *
 *
 * Rewrite 7 puts a block's threads along the innermost reduction loop, so that neighbouring
 * threads read neighbouring cells where that loop walks its operands with stride 1 (a row's
 * sum).  A reduction down the columns of a matrix — a weight's squares summed over its output
 * axes for each input cell (gradient clipping), a bias's gradient summed over the rows of a
 * batch — walks its operands with stride 1 along its cells instead: there rewrite 7's threads
 * each read a cache line of their own for 4 bytes of it (the clipping norm's squares of GPT-2
 * 124M's weights, a block a cell, read their 0.5 GB at 0.7 TB/s), and one thread a cell (the
 * token table's 50 304 columns of 768 steps) leaves a few hundred threads a multiprocessor, each
 * waiting on a long chain of loads.  Here, with the step's combining operation as rewrite 7 takes
 * it, where every load walks the innermost cell loop with a stride of 0 or 1, one walks it with
 * stride 1 and the innermost reduction loop with another stride, and the nest has
 * COLUMN_MIN_STEPS steps a cell, at most COLUMN_MAX_CELLS cells and COLUMN_MIN_WORK steps in
 * all (a bias's gradient over 256 rows is a few microseconds either way, and as rewrite 7 has
 * it, it shares a launch with its neighbours' smaller blocks): a block takes
 * COLUMN_LANES neighbouring cells (the innermost cell loop, whose extent that divides; the outer
 * cell loops are the grid's y and z), and its COLUMN_LANES × S threads (S: the largest of
 * COLUMN_SLICES, 4, 2 dividing the innermost reduction loop's extent) run as S slices of a warp:
 * lane l of slice j takes the steps k ≡ j (mod S) of the innermost reduction loop, and every step
 * of the loops around it, for cell l, into part[32·j + l] — a warp's loads are 32 neighbouring
 * cells, one 128-byte line.  Then the halvings of rewrite 7 fold the slices, part[t] ⊕=
 * part[t + 32·h], down to the first warp's, whose lanes store their cells.  Sums and products
 * are reordered (with --reassociate only), maxima and minima are not changed. */

enum { COLUMN_LANES = WARP, COLUMN_SLICES = 8, COLUMN_MIN_STEPS = 64, COLUMN_MAX_CELLS = 1 << 18, COLUMN_MIN_WORK = 1 << 19 };

/* Whether the loads of e leave rewrite 7c's warps reading whole lines: none at a gathered index,
 * each walking the cell loop `cell` with a stride of 0 or 1; *across set where one walks it with
 * stride 1 and the reduction loop `step` with a stride other than 0 or 1. */
static bool column_loads(const IrProgram *ir, const IrExpr *e, uint32_t cell, uint32_t step, bool *across) {
    if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!column_loads(ir, e->args[i], cell, step, across)) return false;
        return true;
    }
    if (e->kind != IR_LOAD) return true;
    for (uint32_t a = 0; a < ir->buffers[e->buffer].rank; a++)
        if (e->index[a].gather) return false;
    int64_t c = ir_flat_coef(ir, e->buffer, e->index, cell), k = ir_flat_coef(ir, e->buffer, e->index, step);
    if (c != 0 && c != 1) return false;
    if (c == 1 && k != 0 && k != 1) *across = true;
    return true;
}

/* The slices of a block of rewrite 7c for r (0: not for it), the step's combining operation in *op. */
static uint32_t column_slices(const Sched *s, const Reduction *r, ScalarOp *op) {
    double cells, steps;
    if (r->npar == 0 || !foldable(s, r, op, &cells, &steps)) return 0;
    const IrStmt *cell = r->par[r->npar - 1], *inner = r->red[r->nred - 1];
    bool across = false;
    if (cell->extent % COLUMN_LANES || cells > COLUMN_MAX_CELLS || steps < COLUMN_MIN_STEPS || cells * steps < COLUMN_MIN_WORK ||
        !column_loads(s->ir, r->step->value, cell->iter, inner->iter, &across) || !across)
        return 0;
    for (uint32_t slices = COLUMN_SLICES; slices >= 2; slices /= 2)
        if (inner->extent % slices == 0) return slices;
    return 0;
}

static bool down_columns(const Sched *s, const Reduction *r) {
    ScalarOp op;
    return column_slices(s, r, &op) != 0;
}

static bool gpu_column_reduction(Sched *s, const Reduction *r, IrBlock *out) {
    ScalarOp op;
    uint32_t slices = column_slices(s, r, &op);
    if (!slices) return false;
    const IrStmt *cell = r->par[r->npar - 1], *inner = r->red[r->nred - 1];
    /* The block loops: a run of COLUMN_LANES cells along x, the outer cell loops as they are. */
    IrBlock *blk = NULL;
    uint32_t bx = new_iter(s);
    IrStmt *top = cell_blocks(s, r, COLUMN_LANES, bx, &blk);
    uint32_t width = COLUMN_LANES * slices;
    uint32_t part = new_scratch(s, "partials", width, partial_type(s, r), true);
    s->ir->buffers[part].gpu_shared = true;
    /* Each thread's partial result: slice j, lane l (threadIdx.x = 32·j + l). */
    uint32_t j = new_iter(s), lane = new_iter(s);
    IrStmt *lj = new_loop(s, j, slices, true, LOOP_THREAD_X), *ll = new_loop(s, lane, COLUMN_LANES, true, LOOP_THREAD_X);
    lj->thread_stride = COLUMN_LANES;
    ir_block_push(s->ir->arena, blk, lj);
    ir_block_push(s->ir->arena, &lj->body, ll);
    IrTerm at[2] = {{j, COLUMN_LANES}, {lane, 1}};
    ir_block_push(s->ir->arena, &ll->body, new_store(s, part, flat_index(s, at, 2), neutral(s, op, partial_type(s, r))));
    uint32_t kq;
    IrBlock *steps = step_loops(s, r, &ll->body, slices, &kq);
    reset_subst(s);
    map_iter(s, cell->iter, (Affine){.terms = {{bx, COLUMN_LANES}, {lane, 1}}, .count = 2});
    map_iter(s, inner->iter, (Affine){.terms = {{kq, slices}, {j, 1}}, .count = 2});
    LocalRepl repl = {r->local, new_load(s, part, flat_index(s, at, 2)), UINT32_MAX, NULL};
    ir_block_push(s->ir->arena, steps, new_store(s, part, flat_index(s, at, 2), clone_expr(s, r->step->value, &repl)));
    halve_partials(s, blk, part, op, width, COLUMN_LANES);
    /* The cells: each lane of the first warp folds its cell's initial value with its column. */
    uint32_t t0 = new_iter(s);
    IrStmt *l0 = new_loop(s, t0, COLUMN_LANES, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, l0);
    reset_subst(s);
    map_iter(s, cell->iter, (Affine){.terms = {{bx, COLUMN_LANES}, {t0, 1}}, .count = 2});
    store_cell(s, r, op, l0, part, t0);
    const char *what = r->par[0]->comment ? r->par[0]->comment : r->init->comment ? r->init->comment : "a reduction";
    top->comment = arena_printf(s->ir->arena,
                                "%s; schedule: each run of %u cells reduced across a block of %u GPU threads, %u slices of the steps",
                                what, (unsigned)COLUMN_LANES, width, slices);
    ir_block_push(s->ir->arena, out, top);
    return true;
}

/* ---- Rewrite 7r, the GPU's: a row's reductions and pointwise nests in one block ----------------- *
 *
 * A layer norm over rows of C channels is two reductions of each row (its sum, then the sum of
 * the squares of its deviations) and pointwise nests over its cells (the deviations, the
 * normalised cells), each a launch of its own: the reductions a block a row (rewrite 7), the
 * pointwise nests a thread a cell; a softmax likewise (the maximum, the exponentials, their sum,
 * the normalised cells).  Where a reduction that rewrite 7 takes (with --reassociate, also one
 * of fewer steps or more rows: tree_threads) has nests over the same rows right before or after
 * it — pointwise nests whose outer parallel loops are the reduction's cell loops (a nest with no
 * loop below them: one thread's), further such reductions with as many threads — and every cell
 * that one of them writes is read and written by all of them only in its own row (the row
 * loops the whole index of the same axes in every access), they become one kernel: a block a
 * row, the nests' phases in their order with barriers between them (a block's writes to device
 * memory are visible to its threads past a barrier).  Each reduction's phases are rewrite 7's;
 * a pointwise nest's cells are spread over the same T threads along its innermost loop (cell
 * T·q + t on thread t, neighbouring threads on neighbouring cells), whose extent T must divide,
 * and consecutive ones over the same loops share a phase where each reads of the others' cells
 * only those its thread stored.  Every cell is computed with the same operations in the same
 * order as in the nests apart (a short reduction that a thread took alone apart: a tree now,
 * which --reassociate allows), so a layer norm's forward pass, five launches of GPT-2 with the
 * residual sum and a split product's sums before it, is one. */

/* At most ROW_MEMBERS_MOST nests a kernel; a pointwise nest joins where each thread takes at most
 * ROW_THREAD_CELLS_MOST cells of a row: over longer rows (a language model's head over 50 304
 * logits a row) one block a row would leave the whole pass to a few hundred blocks, each thread
 * walking hundreds of cells one after another, where a kernel of its own streams them from
 * every multiprocessor.  ROW_ACCESS_MOST: the loads and stores a phase keeps track of. */
enum { ROW_MEMBERS_MOST = 32, ROW_BEFORE_MOST = 4, ROW_THREAD_CELLS_MOST = 16, ROW_ACCESS_MOST = 32 };

typedef struct RowMember {
    IrStmt *st;
    bool reduction;
    Reduction r;                  /* a reduction's */
    ScalarOp op;
    IrStmt *chain[MAX_LOOPS];     /* a pointwise nest's loops, outermost first */
    uint32_t nchain;
} RowMember;

/* The cell loops of the member: a reduction's parallel loops, a pointwise nest's outer ones. */
static IrStmt *const *row_loops(const RowMember *m) { return m->reduction ? m->r.par : m->chain; }

/* A nest of parallel loops, each the only statement of its parent, around stores alone (no
 * local, no random number, no gathered index): its loops into m. */
static bool pointwise_chain(const Sched *s, IrStmt *st, RowMember *m) {
    m->nchain = 0;
    for (IrStmt *l = st;;) {
        if (l->kind != IR_LOOP || !l->parallel || l->mode != LOOP_PLAIN || size_is_runtime(l->extent) ||
            m->nchain == MAX_LOOPS)
            return false;
        m->chain[m->nchain++] = l;
        if (l->body.count == 1 && l->body.items[0]->kind == IR_LOOP) {
            l = l->body.items[0];
            continue;
        }
        for (uint32_t i = 0; i < l->body.count; i++) {
            const IrStmt *x = l->body.items[i];
            if (x->kind != IR_STORE || ir_expr_reads_local(x->value) || ir_expr_random(x->value)) return false;
        }
        return l->body.count > 0 && !ir_stmt_gathers(s->ir, st);
    }
}

/* Whether st can join a row kernel whose first member is `first`, with `threads` threads a
 * block: into m. */
static bool row_member(Sched *s, IrStmt *st, const RowMember *first, uint32_t threads, RowMember *m) {
    memset(m, 0, sizeof *m);
    m->st = st;
    if (st->kind != IR_LOOP || sched_keeps_lowered(s, st) || ir_stmt_gathers(s->ir, st) || ir_stmt_integer(st) ||
        ir_stmt_untiled_types(s->ir, st))
        return false;
    uint32_t rows = first->r.npar;
    if (match_reduction(st, &m->r)) {
        m->reduction = true;
        if (m->r.npar != rows || tree_threads(s, &m->r, true, &m->op) != threads) return false;
    } else {
        if (!pointwise_chain(s, st, m) || m->nchain < rows ||
            (m->nchain > rows && m->chain[m->nchain - 1]->extent % threads))
            return false;
        double cells = 1; /* a thread's share of a row */
        for (uint32_t k = rows; k < m->nchain; k++) cells *= (double)m->chain[k]->extent;
        if (cells > (double)threads * ROW_THREAD_CELLS_MOST) return false;
    }
    for (uint32_t k = 0; k < rows; k++)
        if (row_loops(m)[k]->extent != first->r.par[k]->extent) return false;
    return true;
}

/* What the members write (writes[b]), and along which axis of each such buffer each of the
 * row's loops goes (row_axis[b][k], ROW_AXIS_UNSET until an access says). */
enum { ROW_AXIS_UNSET = 0xFF };

typedef struct RowCheck {
    const IrProgram *ir;
    const bool *writes;
    uint8_t (*row_axis)[3];
    IrStmt *const *loops;
    uint32_t rows;
} RowCheck;

/* Whether an access of `buffer` at `index` reaches the row that the member's loops name alone:
 * each of those loops' iterators is the whole index of one axis — the same axis in every access
 * of the buffer — and no other axis mentions them. */
static bool row_access(const RowCheck *c, uint32_t buffer, const IrIndex *index) {
    uint8_t axis[3] = {ROW_AXIS_UNSET, ROW_AXIS_UNSET, ROW_AXIS_UNSET};
    for (uint32_t a = 0; a < c->ir->buffers[buffer].rank; a++) {
        const IrIndex *x = &index[a];
        for (uint32_t t = 0; t < x->term_count; t++)
            for (uint32_t k = 0; k < c->rows; k++)
                if (x->terms[t].iter == c->loops[k]->iter) {
                    if (x->term_count != 1 || x->terms[0].coef != 1 || x->offset || x->symbol || x->gather ||
                        axis[k] != ROW_AXIS_UNSET)
                        return false;
                    axis[k] = (uint8_t)a;
                }
    }
    for (uint32_t k = 0; k < c->rows; k++) {
        if (axis[k] == ROW_AXIS_UNSET) return false;
        if (c->row_axis[buffer][k] == ROW_AXIS_UNSET) c->row_axis[buffer][k] = axis[k];
        else if (c->row_axis[buffer][k] != axis[k]) return false;
    }
    return true;
}

static bool row_expr(const RowCheck *c, const IrExpr *e) {
    if (e->kind == IR_LOAD && c->writes[e->buffer] && !row_access(c, e->buffer, e->index)) return false;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!row_expr(c, e->args[i])) return false;
    return true;
}

static bool row_stmt(const RowCheck *c, const IrStmt *st) {
    switch (st->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < st->body.count; i++)
            if (!row_stmt(c, st->body.items[i])) return false;
        return true;
    case IR_STORE: return (!c->writes[st->buffer] || row_access(c, st->buffer, st->index)) && row_expr(c, st->value);
    case IR_SET_LOCAL: return row_expr(c, st->value);
    default: return false;
    }
}

static void mark_writes(const IrStmt *st, bool *writes) {
    if (st->kind == IR_STORE) writes[st->buffer] = true;
    if (st->kind == IR_LOOP)
        for (uint32_t i = 0; i < st->body.count; i++) mark_writes(st->body.items[i], writes);
}

static bool rows_independent(const IrProgram *ir, const RowMember *m, uint32_t count, uint32_t rows) {
    bool *writes = calloc(ir->buffer_count + 1, 1);
    uint8_t (*row_axis)[3] = malloc((ir->buffer_count + 1) * sizeof *row_axis);
    if (!writes || !row_axis) diag_fatal_oom();
    memset(row_axis, ROW_AXIS_UNSET, (ir->buffer_count + 1) * sizeof *row_axis);
    for (uint32_t i = 0; i < count; i++) mark_writes(m[i].st, writes);
    bool ok = true;
    for (uint32_t i = 0; i < count && ok; i++) {
        RowCheck c = {ir, writes, row_axis, row_loops(&m[i]), rows};
        ok = row_stmt(&c, m[i].st);
    }
    free(writes);
    free(row_axis);
    return ok;
}

/* A phase of pointwise members: their cells spread over the block's threads along the innermost
 * loop (cell T·q + t on thread t), the row's loops the kernel's, the loops between them new ones;
 * and what the members in it so far store and load there (in the phase's iterators).  A closed
 * phase takes no further member (there is none yet, a reduction came after it, or its lists are
 * full). */
typedef struct CellAccess {
    uint32_t buffer;
    const IrIndex *index;
} CellAccess;

typedef struct Phase {
    bool closed;
    IrBlock *cells;              /* the body of the loop over q */
    const RowMember *shape;      /* the member that made it: its loops' extents */
    uint32_t inner[MAX_LOOPS];   /* the iterators of the loops below the row's, q last */
    uint32_t t;
    CellAccess stored[ROW_ACCESS_MOST], loaded[ROW_ACCESS_MOST];
    uint32_t stores, loads;
} Phase;

static void map_to_phase(Sched *s, const RowMember *m, const Phase *p, uint32_t threads, const RowIters *rows) {
    reset_to_rows(s, m->chain, rows);
    if (m->nchain == rows->count) return; /* a cell a row */
    for (uint32_t k = rows->count; k + 1 < m->nchain; k++) map_iter(s, m->chain[k]->iter, affine1(p->inner[k - rows->count], 1, 0));
    uint32_t q = p->inner[m->nchain - 1 - rows->count];
    map_iter(s, m->chain[m->nchain - 1]->iter, (Affine){.terms = {{q, threads}, {p->t, 1}}, .count = 2});
}

static void phase_new(Sched *s, Phase *p, const RowMember *m, uint32_t threads, IrBlock *blk, const RowIters *rows) {
    *p = (Phase){.shape = m, .t = new_iter(s)};
    IrStmt *lt = new_loop(s, p->t, m->nchain == rows->count ? 1 : threads, true, LOOP_THREAD_X); /* a cell a row: one thread */
    lt->comment = m->st->comment;
    ir_block_push(s->ir->arena, blk, lt);
    IrBlock *into = &lt->body;
    for (uint32_t k = rows->count; k < m->nchain; k++) {
        uint64_t extent = m->chain[k]->extent / (k + 1 == m->nchain ? threads : 1);
        IrStmt *l = new_loop(s, p->inner[k - rows->count] = new_iter(s), extent, true, LOOP_PLAIN);
        ir_block_push(s->ir->arena, into, l);
        into = &l->body;
    }
    p->cells = into;
}

static bool phase_touches(const Phase *p, uint32_t buffer) {
    for (uint32_t i = 0; i < p->stores; i++)
        if (p->stored[i].buffer == buffer) return true;
    for (uint32_t i = 0; i < p->loads; i++)
        if (p->loaded[i].buffer == buffer) return true;
    return false;
}

/* Whether a load in e of what the phase stores reads the cell its thread stored (the same index),
 * noting e's loads (false where the list is full). */
static bool phase_loads(const IrProgram *ir, Phase *p, const IrExpr *e) {
    if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!phase_loads(ir, p, e->args[i])) return false;
        return true;
    }
    if (e->kind != IR_LOAD) return true;
    for (uint32_t i = 0; i < p->stores; i++)
        if (p->stored[i].buffer == e->buffer && !ir_same_index(ir, e->buffer, p->stored[i].index, e->index)) return false;
    if (p->loads == ROW_ACCESS_MOST) return false;
    p->loaded[p->loads++] = (CellAccess){e->buffer, e->index};
    return true;
}

/* A pointwise member's store x, cloned at the current substitution. */
static IrStmt *cell_clone(Sched *s, const IrStmt *x) {
    return new_store(s, x->buffer, clone_index(s, x->index, s->ir->buffers[x->buffer].rank), clone_expr(s, x->value, NULL));
}

/* The store c noted in *p, its loads first; false where a load reads another thread's cell of
 * what the phase stores, where `sharing` and c stores what the phase already touches, or where
 * the lists are full. */
static bool phase_note_store(const IrProgram *ir, Phase *p, IrStmt *c, bool sharing) {
    if (!phase_loads(ir, p, c->value) || (sharing && phase_touches(p, c->buffer)) || p->stores == ROW_ACCESS_MOST) return false;
    p->stored[p->stores++] = (CellAccess){c->buffer, c->index};
    return true;
}

/* A pointwise member into the phase *p where it can share it (its loops the same, each store
 * sharable), else into a new phase after a barrier. */
static void pointwise_phase(Sched *s, const RowMember *m, uint32_t threads, IrBlock *blk, const RowIters *rows, Phase *p) {
    const IrStmt *inner = m->chain[m->nchain - 1];
    IrStmt *st[ROW_ACCESS_MOST];
    bool shared = !p->closed && p->shape->nchain == m->nchain && inner->body.count <= ROW_ACCESS_MOST;
    for (uint32_t k = rows->count; shared && k < m->nchain; k++) shared = p->shape->chain[k]->extent == m->chain[k]->extent;
    if (shared) {
        Phase trial = *p;
        map_to_phase(s, m, &trial, threads, rows);
        for (uint32_t i = 0; shared && i < inner->body.count; i++)
            shared = phase_note_store(s->ir, &trial, st[i] = cell_clone(s, inner->body.items[i]), true);
        if (shared) {
            *p = trial;
            for (uint32_t i = 0; i < inner->body.count; i++) ir_block_push(s->ir->arena, p->cells, st[i]);
            return;
        }
    }
    if (blk->count) push_barrier(s, blk);
    phase_new(s, p, m, threads, blk, rows);
    map_to_phase(s, m, p, threads, rows);
    for (uint32_t i = 0; i < inner->body.count; i++) {
        IrStmt *c = cell_clone(s, inner->body.items[i]);
        ir_block_push(s->ir->arena, p->cells, c);
        if (!phase_note_store(s->ir, p, c, false)) p->closed = true; /* (a full list: no later member shares) */
    }
}

/* Rewrite 7r from statement i of the function: the statements it takes into one kernel (0
 * where fewer than two would join) — pointwise nests, then the reduction that decides the rows
 * and the threads, then the nests after it. */
static uint32_t gpu_row_kernel(Sched *s, uint32_t i, IrBlock *out) {
    const IrFunction *fn = s->fn;
    RowMember m[ROW_MEMBERS_MOST], first;
    memset(&first, 0, sizeof first);
    uint32_t j = i;
    for (; j < fn->body.count && j - i + 1 < ROW_MEMBERS_MOST; j++) {
        IrStmt *st = fn->body.items[j];
        if (st->kind != IR_LOOP) return 0;
        if (match_reduction(st, &first.r)) break;
        if (!pointwise_chain(s, st, &m[0])) return 0;
    }
    if (j == fn->body.count || j - i + 1 == ROW_MEMBERS_MOST) return 0;
    const Reduction *r = &first.r;
    first.reduction = true;
    uint32_t threads = tree_threads(s, r, true, &first.op);
    if (!threads || r->npar == 0) return 0;
    /* Before them, the pointwise nests that the schedule has just put out (the sums of a split
     * product's parts, sched_block.c), as many of the last ones as join with the rest. */
    uint32_t before = 0, count = 0;
    while (before < ROW_BEFORE_MOST && before < out->count && /* (plain nests: none the schedule has rewritten) */
           pointwise_chain(s, out->items[out->count - 1 - before], &m[0]) &&
           row_member(s, out->items[out->count - 1 - before], &first, threads, &m[0]))
        before++;
    for (;; before--) {
        count = 0;
        for (uint32_t k = 0; k < before + (j - i + 1); k++, count++) {
            IrStmt *st = k < before ? out->items[out->count - before + k] : fn->body.items[i + k - before];
            if (!row_member(s, st, &first, threads, &m[count]) || !rows_independent(s->ir, m, count + 1, r->npar)) break;
        }
        if (count == before + (j - i + 1)) break;
        if (before == 0) return 0;
    }
    while (count < ROW_MEMBERS_MOST && i + count - before < fn->body.count &&
           row_member(s, fn->body.items[i + count - before], &first, threads, &m[count]) &&
           rows_independent(s->ir, m, count + 1, r->npar))
        count++;
    if (count < 2) return 0;
    out->count -= before;
    RowIters rows = {.count = r->npar};
    for (uint32_t k = 0; k < r->npar; k++) rows.iters[k] = r->par[k]->iter;
    IrBlock *blk = out;
    IrStmt *top = cell_blocks(s, r, 1, UINT32_MAX, &blk);
    Phase phase = {.closed = true};
    for (uint32_t k = 0; k < count; k++) {
        if (!m[k].reduction) {
            pointwise_phase(s, &m[k], threads, blk, &rows, &phase);
            continue;
        }
        phase.closed = true;
        if (blk->count) push_barrier(s, blk);
        uint32_t at = blk->count;
        tree_phases(s, &m[k].r, m[k].op, threads, blk, &rows);
        blk->items[at]->comment = m[k].r.par[0]->comment;
    }
    const char *what = m[0].st->comment ? m[0].st->comment : "a row's nests";
    top->comment = arena_printf(s->ir->arena,
                                "%s; schedule: each row reduced across a block of %u GPU threads, with the %u nests after it "
                                "in the same kernel",
                                what, threads, count - 1);
    ir_block_push(s->ir->arena, out, top);
    return count - before;
}

/* A reduction to one cell at a function's top level: `l = init; for r…: l = step; C[…] = l`
 * (statements i, i+1, i+2), as a Reduction without parallel loops. */
static bool match_full_reduction(const IrFunction *fn, uint32_t i, Reduction *r) {
    memset(r, 0, sizeof *r);
    return i + 2 < fn->body.count && match_steps(fn->body.items[i], fn->body.items[i + 1], fn->body.items[i + 2], r);
}

/* ---- Rewrite 4v, the GPU's: adjacent cells a thread ------------------------------------------------- *
 *
 * A pointwise nest that maps one cell to a thread keeps one 4-byte load of each operand in flight
 * per thread: too few bytes on their way for the memory system to stream (the GPU needs
 * megabytes in flight; a thread waits out each load's latency before the next statement's), so
 * a large copy or an optimiser's update ran at a sixth of the memory's bandwidth.  Here the
 * innermost loop of such a nest (plain parallel loops, one inside the other, around stores
 * only, none at a gathered index), when every store walks it with stride 1, its extent is a
 * multiple of VECTOR_CELLS (and makes a warp's worth of threads) and the nest has at least
 * VECTOR_MIN_CELLS cells, gives each thread VECTOR_CELLS adjacent cells: the loop i becomes i = VECTOR_CELLS·o + u over an unrolled loop u inside the body.  The cells'
 * loads and stores along the loop are then adjacent in each thread, and LLVM's NVPTX back end
 * merges them into vector loads and stores where it can prove them aligned (16 bytes each for
 * 4-byte cells; the buffers are aligned to 256 bytes). Each cell takes
 * the same operations as before (the iterations are independent), so the result is the same. */

enum { VECTOR_CELLS = 4, VECTOR_MIN_CELLS = 1 << 16 };

/* The innermost loop of a pointwise nest whose stores all walk it with stride 1, or NULL;
 * *cells: the nest's cells. */
static IrStmt *vector_loop(const IrProgram *ir, IrStmt *top, double *cells) {
    IrStmt *l = top;
    *cells = 1;
    for (;;) {
        if (l->kind != IR_LOOP || !l->parallel || l->mode != LOOP_PLAIN || l->threads) return NULL;
        *cells *= (double)l->extent;
        if (l->body.count != 1 || l->body.items[0]->kind != IR_LOOP) break;
        l = l->body.items[0];
    }
    for (uint32_t i = 0; i < l->body.count; i++) {
        const IrStmt *st = l->body.items[i];
        if (st->kind != IR_STORE || st->nontemporal || ir_flat_coef(ir, st->buffer, st->index, l->iter) != 1) return NULL;
        for (uint32_t a = 0; a < ir->buffers[st->buffer].rank; a++)
            if (st->index[a].gather) return NULL;
    }
    return l;
}

static void gpu_vector_cells(Sched *s) {
    IrFunction *fn = s->fn;
    for (uint32_t i = 0; i < fn->body.count; i++) {
        double cells;
        IrStmt *l = vector_loop(s->ir, fn->body.items[i], &cells);
        if (!l || l->iter >= s->old_iters || l->extent % VECTOR_CELLS != 0 || l->extent < VECTOR_CELLS * WARP ||
            cells < VECTOR_MIN_CELLS)
            continue;
        uint32_t outer = new_iter(s), lane = new_iter(s);
        reset_subst(s);
        map_iter(s, l->iter, (Affine){.terms = {{outer, VECTOR_CELLS}, {lane, 1}}, .count = 2});
        IrStmt *lanes = new_loop(s, lane, VECTOR_CELLS, true, LOOP_UNROLL);
        for (uint32_t k = 0; k < l->body.count; k++) {
            const IrStmt *st = l->body.items[k];
            IrStmt *moved = new_store(s, st->buffer, clone_index(s, st->index, s->ir->buffers[st->buffer].rank),
                                      clone_expr(s, st->value, NULL));
            moved->comment = st->comment;
            ir_block_push(s->ir->arena, &lanes->body, moved);
        }
        l->iter = outer;
        l->extent /= VECTOR_CELLS;
        l->body = (IrBlock){0};
        ir_block_push(s->ir->arena, &l->body, lanes);
        IrStmt *top = fn->body.items[i];
        top->comment = arena_printf(s->ir->arena, "%s%sschedule: %u adjacent cells a GPU thread", top->comment ? top->comment : "",
                                    top->comment ? "; " : "", (unsigned)VECTOR_CELLS);
    }
}

/* The GPU's rewrites of one function: tensor-core, block and thread tiles, block reductions
 * (rewrites 6t, 6, 6s, 7, 5), then fused pointwise nests (rewrite 4), adjacent cells a thread
 * (4v) and grouped scalar stores (4s); schedule_gpu() then maps loops onto the grid. */
void schedule_gpu_function(Sched *s) {
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *st = fn->body.items[i];
        Reduction r;
        uint32_t joined = gpu_row_kernel(s, i, &body); /* (its reduction has too few cells for 6t and 6) */
        if (joined) {
            i += joined - 1;
            continue;
        }
        if (st->kind == IR_LOOP && !ir_stmt_gathers(s->ir, st) && !ir_stmt_integer(st) &&
            !ir_stmt_untiled_types(s->ir, st) &&
            match_reduction(st, &r) && gpu_mma_tiles(s, &r, &body))
            continue;
        if (sched_keeps_lowered(s, st)) { /* as lowered (sched.c) */
            if (gpu_scatter_rows(s, st, &body)) continue; /* but a scatter-add's rows in shared memory */
            /* except a nest kept only for its bf16/f16 cells: they are computed in f32 and
             * rounded once where stored, in thread tiles and block reductions (down columns
             * or not) as as lowered */
            if (sched_half_only(s, st) && match_reduction(st, &r) &&
                (gpu_column_reduction(s, &r, &body) || gpu_block_reduction(s, &r, &body) || gpu_thread_tiles(s, &r, &body)))
                continue;
            ir_block_push(s->ir->arena, &body, st);
            continue;
        }
        if (st->kind == IR_LOOP && match_reduction(st, &r) &&
            (gpu_block_tiles(s, &r, &body) || gpu_column_reduction(s, &r, &body) || gpu_block_reduction(s, &r, &body) ||
             gpu_thread_tiles(s, &r, &body)))
            continue;
        if (match_full_reduction(fn, i, &r) && gpu_block_reduction(s, &r, &body)) {
            i += 2; /* the local's initial value, the loop, the store */
            continue;
        }
        ir_block_push(s->ir->arena, &body, st);
    }
    fn->body = body;
    fuse_pointwise(s);
    gpu_vector_cells(s);
    group_scalar_stores(s);
}
