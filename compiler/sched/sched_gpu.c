/* sched_gpu.c — the schedule for the GPU target (--target=cuda): the GPU's rewrites of
 * reduction nests, and which loops run on which GPU threads (sched.h).
 *
 * The rewrites, tried in this order on every reduction nest of a function
 * (schedule_gpu_function, which sched.c's schedule() calls for the GPU target):
 *   6t. a large contraction of bf16 or f16 operands, or of f32 ones rounded to tf32 (--tf32),
 *      becomes a block's kernel on the tensor cores (gpu_mma_tiles), for sm_80 and later;
 *   6. a large contraction becomes a block's kernel staging its operands through shared memory
 *      (gpu_block_tiles), a sum over several loops walking the outer ones around its panels;
 *   6s. with --reassociate, one too small to fill the GPU (Target.gpu_blocks) has its
 *      reduction split across blocks, the parts added by a nest after it (plan_blocks);
 *   7. a reduction with few cells and many steps reduces each cell across a block of threads
 *      (gpu_block_reduction), as does a full reduction to one cell;
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
#include "sched/sched_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Mapping loops onto the grid --------------------------------------------------------------------- */

enum { WARP = 32, MAX_GRID_YZ = 65535 };

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
 * Target.gpu_blocks blocks: plan_blocks below) and whose innermost reduction loop's extent is a
 * multiple of BLOCK_K becomes a block's kernel (ir.h LOOP_BLOCK_X): each block of THREADS_SIDE²
 * threads computes tile² cells of C, each thread side² of them (side = tile / THREADS_SIDE: 8
 * or 4) in registers (a per-thread buffer), and the block stages the operands through shared
 * memory, BLOCK_K steps of the reduction at a time, the next steps' panels fetched into
 * registers while the block computes on the current ones (k_loop below, which also walks the
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

/* The block tiles tried, largest first: cells a block along I and J (a thread: a sixteenth). */
static const uint32_t block_tiles[] = {128, 64};

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
} Split;

/* Appends iter·coef to a (nothing for UINT32_MAX). */
static void add_term(Affine *a, uint32_t iter, int64_t coef) {
    if (iter != UINT32_MAX) a->terms[a->count++] = (IrTerm){iter, coef};
}

/* The place along the reduction of step kk + k_offset of panel kt (UINT32_MAX: the first) of
 * `step` steps, in a block's part of a split reduction. */
static Affine k_place(Affine kk, uint32_t kt, uint64_t step, int64_t k_offset, const Split *split) {
    kk.offset += k_offset;
    add_term(&kk, kt, (int64_t)step);
    if (!split->outer) add_term(&kk, split->iter, (int64_t)split->steps);
    return kk;
}

/* For a split of the outermost reduction loop, its iterator in the block's part (after the
 * fetch's other mappings). */
static void map_outer_part(Sched *s, const Split *split) {
    if (split->outer)
        map_iter(s, split->outer_iter, (Affine){.terms = {{split->iter, (int64_t)split->steps}, {split->part_iter, 1}}, .count = 2});
}

/* One operand's panel: where it comes from and goes. */
typedef struct Panel {
    const IrExpr *operand;
    uint32_t tiled_iter;   /* its I (or J) iterator */
    uint32_t base_iter;    /* the block loop along it */
    uint32_t shared, regs; /* the shared panel, the per-thread registers of a fetch */
    bool k_along_x;        /* the reduction axis is its contiguous one: along threadIdx.x */
    int64_t k_stride, m_stride; /* the panel's cell for step kk and place m: kk·k_stride + m·m_stride (rewrite 6t) */
} Panel;

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

static IrStmt *unrolled(Sched *s, IrBlock *into, uint32_t *iter, uint64_t extent, bool parallel) {
    *iter = new_iter(s);
    IrStmt *l = new_loop(s, *iter, extent, parallel, LOOP_UNROLL);
    ir_block_push(s->ir->arena, into, l);
    return l;
}

static void push_barrier(Sched *s, IrBlock *into) {
    IrStmt *b = arena_alloc(s->ir->arena, sizeof *b);
    *b = (IrStmt){.kind = IR_BARRIER};
    ir_block_push(s->ir->arena, into, b);
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
    add_term(&tiled, p->base_iter, bt->tile);
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
    add_term(&i, bt->bi, bt->tile);
    map_iter(s, bt->ct->i_loop->iter, i);
    Affine j = {.terms = {{it->c1, half_tile}, {tx, half}, {it->c0, 1}}, .count = 3};
    add_term(&j, bt->bj, bt->tile);
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

/* The loops over r's outer reduction loops (a split's part loop for the outermost where the
 * split is of it), in `blk`; returns the innermost body (blk where there are none). */
static IrBlock *outer_reduction_loops(Sched *s, IrBlock *blk, const Reduction *r, const Split *split) {
    for (uint32_t q = 0; q + 1 < r->nred; q++) {
        bool part = q == 0 && split->iter != UINT32_MAX && split->outer;
        IrStmt *l = new_loop(s, part ? split->part_iter : r->red[q]->iter, part ? split->steps : r->red[q]->extent, false,
                             LOOP_PLAIN);
        ir_block_push(s->ir->arena, blk, l);
        blk = &l->body;
    }
    return blk;
}

/* The steps of r's innermost reduction loop that one block takes (its part, for a split of it). */
static uint64_t part_steps(const Reduction *r, const Split *split) {
    return split->iter != UINT32_MAX && !split->outer ? split->steps : r->red[r->nred - 1]->extent;
}

static void k_loop(Sched *s, IrBlock *blk, const KLoop *kl) {
    const Reduction *r = kl->r;
    blk = outer_reduction_loops(s, blk, r, kl->split);
    uint64_t k = part_steps(r, kl->split);
    kl->fetch(s, kl->threads(s, blk, kl->tile), kl->tile, UINT32_MAX, 0);
    if (k > kl->step) {
        uint32_t kt = new_iter(s);
        IrStmt *over_k = new_loop(s, kt, k / kl->step - 1, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, blk, over_k);
        kl->spill(s, kl->threads(s, &over_k->body, kl->tile), kl->tile);
        push_barrier(s, &over_k->body);
        IrBlock *thread = kl->threads(s, &over_k->body, kl->tile);
        kl->fetch(s, thread, kl->tile, kt, (int64_t)kl->step);
        kl->compute(s, thread, &over_k->body, kl->tile);
        push_barrier(s, &over_k->body);
    }
    kl->spill(s, kl->threads(s, blk, kl->tile), kl->tile);
    push_barrier(s, blk);
    kl->compute(s, kl->threads(s, blk, kl->tile), blk, kl->tile);
    if (r->nred > 1) push_barrier(s, blk);
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

/* ---- How a block kernel covers its contraction; rewrite 6s, split reductions --------------------------- *
 *
 * The tile is the largest of block_tiles dividing I's and J's extents that makes
 * Target.gpu_blocks blocks.  The grid's axes, x first, walk the tiles along J and along I (each
 * only where there is more than one), the batch loops and a split's parts: at most three.
 *
 * Rewrite 6s.  A contraction that no tile makes enough blocks of — GPT-2's projections over
 * 4 sequences of 64 positions: 48 blocks of 64² cells for an H100's 132 multiprocessors — would
 * leave most of the GPU idle while each block takes every step of a long reduction.  With
 * --reassociate (Target.reassociate), its innermost reduction loop is split into `parts` (a
 * power of two: the fewest that make Target.gpu_blocks blocks, more while a part is longer than
 * SPLIT_LONG_STEPS steps; each part at least SPLIT_MIN_STEPS steps and a whole number of
 * panels), each a block of its own along the grid's last axis.  Where the innermost loop is
 * too short for that (a weight's gradient over 8 sequences of 64 positions), the outermost
 * reduction loop is split instead, each part taking every step of the loops inside it.  Each block stores its cells'
 * partial results, each started from 0, into the function's buffer of partial results (one
 * buffer, as large as the largest split: the kernels run one after the other), part p's at
 * p·|C| + the cell's flat offset in C; a pointwise nest after the kernel then makes each cell
 * init + part 0 + part 1 + … in that order.  The sums are added in another order than the
 * reference's, so this is --reassociate's, as block reductions (rewrite 7) are. */

enum { SPLIT_MIN_STEPS = 64, SPLIT_LONG_STEPS = 4096 };

/* A grid's block loops, x first. */
typedef struct Grid {
    uint32_t iter[3];
    uint64_t extent[3];
    unsigned count;
} Grid;

static void grid_add(Grid *g, uint32_t iter, uint64_t extent) {
    g->iter[g->count] = iter;
    g->extent[g->count++] = extent;
}

typedef struct BlockPlan {
    uint32_t tile, bi, bj;  /* UINT32_MAX where one tile covers I (J) */
    Grid grid;
    Split split;
} BlockPlan;

/* The parts of rewrite 6s for a grid of `blocks` blocks over `dims` axes, steps a panel:
 * of the innermost reduction loop, or where that cannot make enough blocks (a weight's gradient
 * over 8 sequences of 64 positions), of the outermost (*outer), each part every step of the
 * loops inside it. */
static uint32_t split_parts(const Sched *s, const Reduction *r, uint64_t blocks, unsigned dims, uint64_t step,
                            bool *outer) {
    *outer = false;
    if (!s->target->reassociate || s->local_scratch || dims >= 3) return 1;
    uint64_t k = r->red[r->nred - 1]->extent;
    uint32_t parts = 1;
    while ((blocks * parts < s->target->gpu_blocks || k / parts > SPLIT_LONG_STEPS) && 2 * parts <= MAX_GRID_YZ &&
           k % (2 * parts) == 0 && k / (2 * parts) % step == 0 && k / (2 * parts) >= SPLIT_MIN_STEPS)
        parts *= 2;
    if (blocks * parts >= s->target->gpu_blocks || r->nred < 2) return parts;
    uint64_t e = r->red[0]->extent, inside = 1;
    for (uint32_t q = 1; q < r->nred; q++) inside *= r->red[q]->extent;
    uint32_t outer_parts = 1;
    while (blocks * outer_parts < s->target->gpu_blocks && 2 * outer_parts <= MAX_GRID_YZ && e % (2 * outer_parts) == 0 &&
           e / (2 * outer_parts) * inside >= SPLIT_MIN_STEPS)
        outer_parts *= 2;
    if (blocks * outer_parts < s->target->gpu_blocks) return parts;
    *outer = true;
    return outer_parts;
}

/* The tile, grid and split of a block kernel over contraction ct of r, `step` steps a panel;
 * false where none fits.  The grid's axes are those of more than one block: along J, along I,
 * the batch loops (innermost first), the split's parts — at most three. */
static bool plan_blocks(Sched *s, const Reduction *r, const Contraction *ct, uint64_t step, BlockPlan *plan) {
    uint64_t m = ct->i_loop->extent, n = ct->j_loop->extent, batch = 1;
    for (uint32_t k = 0; k < ct->nbatch; k++) {
        if (ct->batch[k]->extent > MAX_GRID_YZ) return false;
        batch *= ct->batch[k]->extent;
    }
    if (ct->nbatch > 2 || r->red[r->nred - 1]->extent % step) return false;
    for (size_t t = 0; t < sizeof block_tiles / sizeof *block_tiles; t++) {
        uint32_t tile = block_tiles[t];
        if (m % tile || n % tile || m / tile > MAX_GRID_YZ) continue;
        uint64_t blocks = batch * (m / tile) * (n / tile);
        unsigned dims = (n > tile) + (m > tile) + ct->nbatch;
        if (dims > 3) continue;
        bool outer = false;
        uint32_t parts = blocks >= s->target->gpu_blocks ? 1 : split_parts(s, r, blocks, dims, step, &outer);
        if (blocks * parts < s->target->gpu_blocks) continue;
        *plan = (BlockPlan){.tile = tile, .bi = m > tile ? new_iter(s) : UINT32_MAX, .bj = n > tile ? new_iter(s) : UINT32_MAX,
                            .split = {.iter = UINT32_MAX, .parts = parts}};
        if (plan->bj != UINT32_MAX) grid_add(&plan->grid, plan->bj, n / tile);
        if (plan->bi != UINT32_MAX) grid_add(&plan->grid, plan->bi, m / tile);
        for (uint32_t k = ct->nbatch; k-- > 0;) grid_add(&plan->grid, ct->batch[k]->iter, ct->batch[k]->extent);
        if (parts > 1) {
            plan->split.iter = new_iter(s);
            plan->split.outer = outer;
            plan->split.steps = r->red[outer ? 0 : r->nred - 1]->extent / parts;
            if (outer) plan->split.outer_iter = r->red[0]->iter, plan->split.part_iter = new_iter(s);
            grid_add(&plan->grid, plan->split.iter, parts);
        }
        if (!plan->grid.count) grid_add(&plan->grid, new_iter(s), 1); /* one block (--gpu-blocks=1) */
        return true;
    }
    return false;
}

/* The grid's block loops; returns the outermost, *body the innermost's body. */
static IrStmt *grid_loops(Sched *s, const Grid *g, IrBlock **body) {
    static const IrLoopMode modes[3] = {LOOP_BLOCK_X, LOOP_BLOCK_Y, LOOP_BLOCK_Z};
    IrStmt *top = NULL;
    for (unsigned d = g->count; d-- > 0;) {
        IrStmt *l = new_loop(s, g->iter[d], g->extent[d], true, modes[d]);
        if (top) ir_block_push(s->ir->arena, *body, l);
        else top = l;
        *body = &l->body;
    }
    return top;
}

/* The flat index into the partial results of C's cell at `index` (C's own, mapped): part
 * `part` of it, or the part of the split's block loop. */
static IrIndex *partial_index(Sched *s, uint32_t c, const IrIndex *index, const Split *split, int64_t part) {
    const IrBuffer *b = &s->ir->buffers[c];
    IrTerm terms[MAX_LOOPS * 4 + 1];
    uint32_t count = 0;
    int64_t stride = 1, offset = 0;
    for (uint32_t a = b->rank; a-- > 0;) {
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            uint32_t at = 0;
            while (at < count && terms[at].iter != index[a].terms[t].iter) at++;
            if (at == count) terms[count++] = (IrTerm){index[a].terms[t].iter, 0};
            terms[at].coef += index[a].terms[t].coef * stride;
        }
        offset += index[a].offset * stride;
        stride *= (int64_t)b->dims[a];
    }
    if (split->iter != UINT32_MAX && part < 0) terms[count++] = (IrTerm){split->iter, (int64_t)b->size};
    IrIndex *ix = flat_index(s, terms, count);
    ix->offset = offset + (part < 0 ? 0 : part * (int64_t)b->size);
    return ix;
}

/* The function's buffer of partial results, at least `cells` cells. */
static uint32_t split_partials(Sched *s, uint64_t cells) {
    if (s->split_partials == UINT32_MAX) {
        s->split_partials = new_scratch(s, "partials", cells, DTYPE_F32, false);
    } else {
        IrBuffer *b = &s->ir->buffers[s->split_partials];
        if (b->size < cells) {
            b->size = b->dims[0] = cells;
            b->shape_text = arena_printf(s->ir->arena, "%llu", (unsigned long long)cells);
        }
    }
    return s->split_partials;
}

/* The store of a block kernel's cell (C's index mapped onto the thread's cell): into C, or into
 * the partial results of the block's part. */
static IrStmt *cell_store(Sched *s, const Reduction *r, const Split *split, IrExpr *value) {
    uint32_t c = r->store->buffer;
    IrIndex *index = clone_index(s, r->store->index, s->ir->buffers[c].rank);
    if (split->iter == UINT32_MAX) return new_store(s, c, index, value);
    uint32_t partials = split_partials(s, (uint64_t)split->parts * s->ir->buffers[c].size);
    return new_store(s, partials, partial_index(s, c, index, split, -1), value);
}

/* A cell's value where a kernel starts: its initial value, or 0 for a part of a split. */
static IrExpr *cell_start(Sched *s, const Reduction *r, const Split *split) {
    return split->iter == UINT32_MAX ? clone_expr(s, r->init->value, NULL) : new_const(s, 0, DTYPE_F32);
}

/* A block kernel (its grid's loops, `top`) into `out`, its comment the nest's followed by
 * "; schedule: " and `schedule`; for a split, the nest that adds the parts after it. */
static void push_block_kernel(Sched *s, const Reduction *r, IrStmt *top, const Split *split, const char *schedule,
                              IrBlock *out) {
    const char *what = r->par[0]->comment ? r->par[0]->comment : "a contraction";
    if (split->iter != UINT32_MAX)
        schedule = arena_printf(s->ir->arena, "%s, the reduction split in %u parts", schedule, split->parts);
    top->comment = arena_printf(s->ir->arena, "%s; schedule: %s", what, schedule);
    ir_block_push(s->ir->arena, out, top);
    if (split->iter == UINT32_MAX) return;
    /* C = init + part 0 + part 1 + …, over C's cells in the nest's parallel loops. */
    reset_subst(s);
    IrBlock *at = out;
    IrStmt *first = NULL;
    for (uint32_t k = 0; k < r->npar; k++) {
        IrStmt *l = new_loop(s, r->par[k]->iter, r->par[k]->extent, true, LOOP_PLAIN);
        ir_block_push(s->ir->arena, at, l);
        if (!first) first = l;
        at = &l->body;
    }
    uint32_t c = r->store->buffer;
    IrExpr *value = clone_expr(s, r->init->value, NULL);
    for (uint32_t p = 0; p < split->parts; p++)
        value = new_op(s, SOP_ADD, value, new_load(s, s->split_partials, partial_index(s, c, r->store->index, split, p)), NULL);
    ir_block_push(s->ir->arena, at, new_store(s, c, clone_index(s, r->store->index, s->ir->buffers[c].rank), value));
    first->comment = arena_printf(s->ir->arena, "%s; schedule: the %u parts of the split reduction added", what, split->parts);
}

static bool gpu_block_tiles(Sched *s, Reduction *r, IrBlock *out) {
    Contraction ct;
    BlockPlan plan;
    if (!find_contraction(s->ir, r, &ct, false, 0) || !plan_blocks(s, r, &ct, BLOCK_K, &plan)) return false;
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
    ir_block_push(s->ir->arena, body, new_store(s, bt.cells, cell, cell_start(s, r, &bt.split)));
    k_loop(s, blk, &(KLoop){.r = r, .step = BLOCK_K, .split = &bt.split, .tile = &bt,
                            .threads = block_threads, .fetch = block_fetch, .spill = block_spill, .compute = block_steps});
    threads = block_threads(s, blk, &bt);
    body = thread_cells(s, threads, &bt, bt.ty, bt.tx, &cell, &it);
    ir_block_push(s->ir->arena, body, cell_store(s, r, &bt.split, new_load(s, bt.cells, cell)));

    push_block_kernel(s, r, top, &bt.split,
                      arena_printf(s->ir->arena, "%ux%u cells a GPU block through shared memory, %ux%u a thread", bt.tile,
                                   bt.tile, bt.side, bt.side),
                      out);
    return true;
}

/* ---- Rewrite 6t, the GPU's: tensor cores ------------------------------------------------------------- *
 *
 * A contraction of two bf16 operands or two f16 operands, accumulated in f32 (the canonical
 * half nest: its cells rounded once when stored), or of two f32 operands that its step rounds
 * to tf32 (--tf32: fma(to_tf32(x), to_tf32(y), l), lower.c), of the shape rewrite 6 takes, on
 * sm_80 or later, becomes a block's kernel whose products run on the tensor cores (ir.h IR_MMA:
 * mma.sync.m16n8k16, or m16n8k8 twice a step for tf32, whose panels hold the rounded values).
 * A block of MMA_WARPS warps computes tile² cells of C: the warps stand in MMA_WARPS_I rows of
 * MMA_WARPS_J, each over tile/MMA_WARPS_I rows and tile/MMA_WARPS_J columns, that is mt × nt
 * tiles of 16 × 8 cells (mt = tile/32, nt = tile/16), their accumulators in the threads'
 * registers as the fragment layout places them (a 128-wide tile: each warp's 64 × 64 cells
 * take 16 shared loads of A's pairs a step of 16 and 32 of B's cells or 16 of its pairs, for 32
 * products).  The threads are numbered t = x + 4y + 32z: z = MMA_WARPS_J·zi + zj is the warp
 * (zi its row, zj its column: two thread loops that split threadIdx.z, ir.h), y the lane's
 * group g and x its place q in the group, so that every index of the fragment layout is affine
 * in the thread loops.  The panels go through shared memory: bf16 and f16 ones copied there
 * asynchronously, several panels ahead (the pipeline below), where the operands' runs of cells
 * are aligned, MMA_ASYNC_STEPS steps a panel; the others as in rewrite 6, fetched into
 * registers a panel ahead, MMA_PANEL_BYTES of an operand's row a panel (64 bf16 or f16 steps,
 * 32 of tf32's f32 cells); either size halved, down to 16, where the reduction (or a part of a
 * split one) is not a whole number of panels.  A panel holds the operand's own
 * cells (tf32: the rounded f32 values), laid out as the operand is, so that a thread fetches a
 * run of neighbouring cells along the contiguous axis with one load and spills it with one
 * store (fetch_place): an operand along k is stored [m][k] in rows of step + HALF_ROW_PAD
 * (tf32: F32_ROW_PAD) cells, each 32-bit operand register's two neighbouring steps one 32-bit
 * load; one along the tile [k][m] in rows of tile + HALF_ROW_PAD cells, the register's two
 * cells a row apart.  Each panel is then step/16 steps of 16, each loading a warp's A and B
 * fragments from the panels into registers and taking mt·nt products (through registers):
 *     C registers ← C's initial value;  fetch panels 0
 *     for kt < K/step − 1:  registers → shared panels;  barrier;  fetch panels kt + 1;
 *                           step/16 × (fragments;  mt·nt products);  barrier
 *     registers → shared panels;  barrier;  step/16 × (fragments;  mt·nt products);  C ← C registers
 * The fragment reads conflict on no bank: along k, rows of step + 8 halves (12, 20 or 36 words)
 * put the eight g of a warp on different groups of four banks and the four q of a group on
 * neighbouring banks (tf32: rows of step + 4 words, the same); along the tile, two rows of
 * tile + 8 halves (tile + 8 words; tf32: one row) put the four q eight banks apart and the
 * eight g on four neighbouring banks (tf32: eight).  The reference executor takes each
 * product's sixteen steps in order (interp.c), so the schedule prints the canonical nest's
 * bits; the tensor cores add in an order of their own (docs/gpu.md). */

enum { MMA_WARPS_I = 2, MMA_WARPS_J = 2, MMA_WARPS = MMA_WARPS_I * MMA_WARPS_J, MMA_K = 16, MMA_MIN_ARCH = 80,
       MMA_PANEL_BYTES = 128, /* a panel's steps through registers, where the reduction allows: 128 bytes of a row */
       MMA_ASYNC_STEPS = 32,  /* a panel's steps copied asynchronously, where the reduction allows */
       MMA_STAGES = 3,        /* panels in flight or in use at once, copied asynchronously */
       HALF_ROW_PAD = 8, F32_ROW_PAD = 4 };

typedef struct MmaTile {
    const Contraction *ct;
    DType in;                   /* the operands' type */
    uint32_t tile, mt, nt;      /* cells a block along I and J; a warp's 16-row and 8-column tiles */
    uint32_t step;              /* the steps of a panel: MMA_ASYNC_STEPS or MMA_PANEL_BYTES of a row, or fewer (at least MMA_K) */
    uint32_t stages;            /* panels in shared memory at once, copied asynchronously; 0: through registers */
    uint32_t fetches;           /* cells of a panel a thread fetches: tile·step / (32·MMA_WARPS) */
    uint32_t k_iter, bi, bj;
    uint32_t afrag, bfrag, cells; /* per-thread registers: 8·mt, 4·nt, 4·mt·nt */
    Panel a, b;
    uint32_t th[4];             /* the thread loops last opened (mma_threads): x, y, zj, zi */
    Split split;
} MmaTile;

/* The block's threads, zi > zj (the warp z = MMA_WARPS_J·zi + zj: its row and column of the
 * block's grid of warps; ir.h: zi splits threadIdx.z) > y (g) > x (q); returns the innermost loop. */
static IrStmt *warp_loops(Sched *s, IrBlock *into, uint32_t th[4]) {
    static const uint64_t extent[4] = {4, 8, MMA_WARPS_J, MMA_WARPS_I};
    static const IrLoopMode mode[4] = {LOOP_THREAD_X, LOOP_THREAD_Y, LOOP_THREAD_Z, LOOP_THREAD_Z};
    IrBlock *at = into;
    IrStmt *l = NULL;
    for (int d = 3; d >= 0; d--) {
        th[d] = new_iter(s);
        l = new_loop(s, th[d], extent[d], true, mode[d]);
        if (d == 3) l->thread_stride = MMA_WARPS_J;
        ir_block_push(s->ir->arena, at, l);
        at = &l->body;
    }
    return l;
}

/* Register Σ more of a thread's `per_thread` registers: its index in the buffer that holds the
 * registers of every thread, thread t = x + 4y + 32z's copy at t·per_thread. */
static IrIndex *register_index(Sched *s, const uint32_t th[4], uint64_t per_thread, const IrTerm *more, uint32_t count) {
    IrTerm terms[8] = {{th[0], (int64_t)per_thread}, {th[1], 4 * (int64_t)per_thread}, {th[2], 32 * (int64_t)per_thread},
                       {th[3], 32 * MMA_WARPS_J * (int64_t)per_thread}};
    for (uint32_t k = 0; k < count; k++) terms[4 + k] = more[k];
    return flat_index(s, terms, 4 + count);
}

/* Cells a thread fetches together along the operand's contiguous axis: a quarter of a panel's
 * steps when that axis is the reduction's (8 bytes of halves for 16 steps, 16 for 32, 32 for 64;
 * twice that of f32), a 32nd of the tile's row otherwise (4 or 8 bytes of halves for a 64- or
 * 128-wide tile, 8 or 16 of f32). */
static uint32_t fetch_run(const MmaTile *mt, const Panel *p) { return p->k_along_x ? mt->step / 4 : mt->tile / 32; }

/* Where a thread's fetch register pass·run + c goes in a panel: its step kk and its place m
 * along the tile (terms of the thread and fetch iterators; z = zj + MMA_WARPS_J·zi the warp).
 * The operand's contiguous axis runs along the lanes, `run` cells a lane: along k, the four
 * x of a group cover a row's steps and the lanes' groups and the warps the rows (kk = run·x + c,
 * m = y + 8z + 8·MMA_WARPS·pass); along the tile, a warp's 32 lanes cover a row of the panel
 * and the warps the steps (m = run·(x + 4y) + c, kk = z + MMA_WARPS·pass). */
static void fetch_place(const MmaTile *mt, const Panel *p, const uint32_t th[4], uint32_t pass, uint32_t c, Affine *kk, Affine *m) {
    int64_t run = fetch_run(mt, p);
    if (p->k_along_x) {
        *kk = (Affine){.terms = {{c, 1}, {th[0], run}}, .count = 2};
        *m = (Affine){.terms = {{th[1], 1}, {th[2], 8}, {th[3], 8 * MMA_WARPS_J}, {pass, 8 * MMA_WARPS}}, .count = 4};
    } else {
        *m = (Affine){.terms = {{c, 1}, {th[0], run}, {th[1], 4 * run}}, .count = 3};
        *kk = (Affine){.terms = {{th[2], 1}, {th[3], MMA_WARPS_J}, {pass, MMA_WARPS}}, .count = 3};
    }
}

/* The fetch iterators pass < fetches/run and c < run, unrolled in `into`; returns the body. */
static IrBlock *fetch_loops(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, uint32_t *pass, uint32_t *c) {
    uint32_t run = fetch_run(mt, p);
    IrStmt *l = unrolled(s, into, pass, mt->fetches / run, true);
    return &unrolled(s, &l->body, c, run, true)->body;
}

static IrIndex *fetch_register(Sched *s, const MmaTile *mt, const Panel *p, const uint32_t th[4], uint32_t pass, uint32_t c) {
    IrTerm more[2] = {{c, 1}, {pass, fetch_run(mt, p)}};
    return register_index(s, th, mt->fetches, more, 2);
}

/* The cells of one of p's panels in shared memory (the buffer holds mt->stages of them, or one). */
static int64_t panel_cells(const MmaTile *mt, const Panel *p) {
    return p->k_along_x ? (int64_t)mt->tile * p->m_stride : (int64_t)mt->step * p->k_stride;
}

/* In a thread's body: its fetch registers ← the operand's cells of panel kt (UINT32_MAX: the first). */
static void mma_fetch(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, const uint32_t th[4], uint32_t kt, int64_t k_offset) {
    uint32_t pass, c;
    IrBlock *body = fetch_loops(s, into, mt, p, &pass, &c);
    Affine kk, m;
    fetch_place(mt, p, th, pass, c, &kk, &m);
    reset_subst(s);
    add_term(&m, p->base_iter, mt->tile);
    map_iter(s, p->tiled_iter, m);
    map_iter(s, mt->k_iter, k_place(kk, kt, mt->step, k_offset, &mt->split));
    map_outer_part(s, &mt->split);
    ir_block_push(s->ir->arena, body, new_store(s, p->regs, fetch_register(s, mt, p, th, pass, c), clone_expr(s, p->operand, NULL)));
}

/* In a thread's body: shared[kk·k_stride + m·m_stride] ← its fetch registers. */
static void mma_spill(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, const uint32_t th[4]) {
    uint32_t pass, c;
    IrBlock *body = fetch_loops(s, into, mt, p, &pass, &c);
    Affine kk, m;
    fetch_place(mt, p, th, pass, c, &kk, &m);
    IrTerm at[8];
    uint32_t n = 0;
    for (uint32_t k = 0; k < kk.count; k++) at[n++] = (IrTerm){kk.terms[k].iter, kk.terms[k].coef * p->k_stride};
    for (uint32_t k = 0; k < m.count; k++) at[n++] = (IrTerm){m.terms[k].iter, m.terms[k].coef * p->m_stride};
    ir_block_push(s->ir->arena, body, new_store(s, p->shared, flat_index(s, at, n), new_load(s, p->regs, fetch_register(s, mt, p, th, pass, c))));
}

/* A type's fragment layouts (ir.h IrMma), as what each bit of a register number adds to the
 * step kk and the place m of the panel cell it holds.  For a warp's 16-row tile i and a lane
 * (g, q), A register 8i + r holds the panel cell kk = kk_per_q·q + Σ a_kk[b], m = 16i + g +
 * Σ a_m[b] over the bits b set in r < 8; B register 4j + r the cell kk = kk_per_q·q + Σ b_kk[b]
 * over the bits of r < 4, m = z·tile/8 + 8j + g.  (tf32's registers 8i + 4h + r cover the two
 * halves h of the step of 16, each one m16n8k8 product: its bit 2 of A and bit 1 of B are h.) */
typedef struct FragmentLayout {
    int64_t kk_per_q;
    int64_t a_kk[3], a_m[3];
    int64_t b_kk[2];
} FragmentLayout;

static const FragmentLayout half_layout = {.kk_per_q = 2, .a_kk = {1, 0, 8}, .a_m = {0, 8, 0}, .b_kk = {1, 8}};
static const FragmentLayout tf32_layout = {.kk_per_q = 1, .a_kk = {0, 4, 8}, .a_m = {8, 0, 0}, .b_kk = {4, 8}};

/* `bits` unrolled loops of two iterations each, in `into`, their iterators in bit[] (the highest
 * bit outermost, so registers are filled in order); returns the innermost body. */
static IrBlock *bit_loops(Sched *s, IrBlock *into, uint32_t *bit, unsigned bits) {
    for (unsigned b = bits; b-- > 0;) into = &unrolled(s, into, &bit[b], 2, true)->body;
    return into;
}

/* In a thread's body: its A and B fragments of steps 16·sub … 16·sub + 15 of the panels, by
 * the layout of the tile's type. */
static void mma_fragments(Sched *s, IrBlock *into, const MmaTile *mt, const uint32_t th[4], uint32_t sub, uint32_t stage) {
    const FragmentLayout *lay = mt->in == DTYPE_F32 ? &tf32_layout : &half_layout;
    int64_t ak = mt->a.k_stride, am = mt->a.m_stride, bk = mt->b.k_stride, bm = mt->b.m_stride;
    uint32_t i, j, bit[3];
    IrBlock *body = bit_loops(s, &unrolled(s, into, &i, mt->mt, true)->body, bit, 3);
    IrTerm a_reg[4] = {{i, 8}, {bit[0], 1}, {bit[1], 2}, {bit[2], 4}};
    IrTerm a_at[7] = {{th[0], lay->kk_per_q * ak}, {th[3], mt->tile / MMA_WARPS_I * am}, {i, 16 * am}, {th[1], am}};
    for (unsigned b = 0; b < 3; b++) a_at[4 + b] = (IrTerm){bit[b], lay->a_kk[b] * ak + lay->a_m[b] * am};
    IrIndex *a_cell = flat_index(s, a_at, 7);
    a_cell->offset = (int64_t)MMA_K * sub * ak + stage * panel_cells(mt, &mt->a);
    ir_block_push(s->ir->arena, body, new_store(s, mt->afrag, register_index(s, th, 8 * mt->mt, a_reg, 4),
                                                new_load(s, mt->a.shared, a_cell)));
    body = bit_loops(s, &unrolled(s, into, &j, mt->nt, true)->body, bit, 2);
    IrTerm b_reg[3] = {{j, 4}, {bit[0], 1}, {bit[1], 2}};
    IrTerm b_at[6] = {{th[0], lay->kk_per_q * bk}, {th[2], mt->tile / MMA_WARPS_J * bm}, {j, 8 * bm}, {th[1], bm}};
    for (unsigned b = 0; b < 2; b++) b_at[4 + b] = (IrTerm){bit[b], lay->b_kk[b] * bk};
    IrIndex *b_cell = flat_index(s, b_at, 6);
    b_cell->offset = (int64_t)MMA_K * sub * bk + stage * panel_cells(mt, &mt->b);
    ir_block_push(s->ir->arena, body, new_store(s, mt->bfrag, register_index(s, th, 4 * mt->nt, b_reg, 3),
                                                new_load(s, mt->b.shared, b_cell)));
}

/* At the block's level: every warp's mt·nt products of 16 steps (tf32: two each, the halves
 * of the 16 in order). */
static void mma_products(Sched *s, IrBlock *into, const MmaTile *mt) {
    uint32_t halves = MMA_K / ir_mma_k(mt->in);
    for (uint32_t i = 0; i < mt->mt; i++)
        for (uint32_t j = 0; j < mt->nt; j++)
            for (uint32_t h = 0; h < halves; h++) {
                IrStmt *p = arena_alloc(s->ir->arena, sizeof *p);
                *p = (IrStmt){.kind = IR_MMA,
                              .mma = {.in = mt->in, .warps = MMA_WARPS, .a = mt->afrag, .b = mt->bfrag, .c = mt->cells,
                                      .a_at = 8 * i + 4 * h, .b_at = 4 * j + 2 * h, .c_at = 4 * (i * mt->nt + j)}};
                ir_block_push(s->ir->arena, into, p);
            }
}

/* Loops over a thread's cells of C in `into`, with I and J mapped onto them; returns the body
 * and the cell's register: C register 4(i·nt + j) + r0 + 2r1 holds
 * C[bi·tile + zi·tile/MMA_WARPS_I + 16i + g + 8r1][bj·tile + zj·tile/MMA_WARPS_J + 8j + 2q + r0]. */
static IrBlock *mma_cells(Sched *s, IrBlock *into, const MmaTile *mt, const uint32_t th[4], IrIndex **cell) {
    uint32_t i, j, r0, r1;
    IrStmt *l = unrolled(s, into, &i, mt->mt, true);
    l = unrolled(s, &l->body, &j, mt->nt, true);
    l = unrolled(s, &l->body, &r1, 2, true);
    l = unrolled(s, &l->body, &r0, 2, true);
    reset_subst(s);
    Affine rows = {.terms = {{th[3], mt->tile / MMA_WARPS_I}, {i, 16}, {th[1], 1}, {r1, 8}}, .count = 4};
    add_term(&rows, mt->bi, mt->tile);
    map_iter(s, mt->ct->i_loop->iter, rows);
    Affine cols = {.terms = {{th[2], mt->tile / MMA_WARPS_J}, {j, 8}, {th[0], 2}, {r0, 1}}, .count = 4};
    add_term(&cols, mt->bj, mt->tile);
    map_iter(s, mt->ct->j_loop->iter, cols);
    IrTerm reg[4] = {{i, 4 * mt->nt}, {j, 4}, {r0, 1}, {r1, 2}};
    *cell = register_index(s, th, 4 * mt->mt * mt->nt, reg, 4);
    return &l->body;
}

/* The reduction r with its step's tf32 roundings taken off (the factors' loads themselves), in
 * *bare (whose step is *step, its value *value), when its step is fma(to_tf32(load of f32),
 * to_tf32(load of f32), l): --tf32's contraction (lower.c). */
static bool tf32_step(const IrProgram *ir, const Reduction *r, Reduction *bare, IrStmt *step, IrExpr *value) {
    const IrExpr *v = r->step->value;
    if (v->kind != IR_OP || v->op != SOP_FMA) return false;
    *value = *v;
    for (int k = 0; k < 2; k++) {
        const IrExpr *f = v->args[k];
        if (f->kind != IR_OP || f->op != SOP_TO_TF32 || f->args[0]->kind != IR_LOAD ||
            ir->buffers[f->args[0]->buffer].dtype != DTYPE_F32)
            return false;
        value->args[k] = f->args[0];
    }
    *step = *r->step;
    step->value = value;
    *bare = *r;
    bare->step = step;
    return true;
}

/* Whether contraction ct of reduction r can run on the tensor cores, and in which type: the
 * operands' common half type, or DTYPE_F32 for tf32 (`tf32`: the step rounds both to tf32). */
static bool mma_type(const Sched *s, const Contraction *ct, const Reduction *r, bool tf32, DType *in) {
    const IrProgram *ir = s->ir;
    const char *arch = s->target->cpu;
    if (!arch || strncmp(arch, "sm_", 3) != 0 || atoi(arch + 3) < MMA_MIN_ARCH) return false;
    DType a = ir->buffers[ct->a->buffer].dtype, b = ir->buffers[ct->b->buffer].dtype;
    if (a != b || (tf32 ? a != DTYPE_F32 : !ir_dtype_half(a)) || ct->add) return false;
    if (r->step->value->type != DTYPE_F32) return false; /* the accumulator */
    *in = a;
    return true;
}

/* Whether the operand that loads `load` has the reduction's axis as its contiguous one. */
static bool mma_k_along(const IrProgram *ir, const IrExpr *load, uint32_t k_iter, uint32_t tiled_iter) {
    return ir_flat_coef(ir, load->buffer, load->index, k_iter) == 1 && ir_flat_coef(ir, load->buffer, load->index, tiled_iter) != 1;
}

/* The panel of the operand that loads `load`: `value` is what it holds (the load, or its tf32
 * rounding).  Its layout follows the operand's: [m][k] in rows of step + HALF_ROW_PAD (bf16,
 * f16) or step + F32_ROW_PAD (tf32) cells when the reduction axis is the contiguous one, [k][m]
 * in rows of tile + HALF_ROW_PAD cells otherwise, so that a fetch's run of cells is one store. */
static Panel mma_panel(Sched *s, const MmaTile *mt, const IrExpr *load, const IrExpr *value, uint32_t tiled_iter,
                       uint32_t base_iter, const char *name) {
    const IrProgram *ir = s->ir;
    Panel p = {.operand = value, .tiled_iter = tiled_iter, .base_iter = base_iter};
    p.k_along_x = mma_k_along(ir, load, mt->k_iter, tiled_iter);
    DType type = mt->in; /* tf32: f32 cells */
    if (p.k_along_x) p.k_stride = 1, p.m_stride = mt->step + (type == DTYPE_F32 ? F32_ROW_PAD : HALF_ROW_PAD);
    else p.k_stride = mt->tile + HALF_ROW_PAD, p.m_stride = 1;
    uint64_t stages = mt->stages ? mt->stages : 1;
    p.shared = new_scratch(s, name, stages * (p.k_along_x ? mt->tile * p.m_stride : mt->step * p.k_stride), type, true);
    s->ir->buffers[p.shared].gpu_shared = true;
    if (!mt->stages) {
        p.regs = new_scratch(s, "fetch", (uint64_t)32 * MMA_WARPS * mt->fetches, type, true);
        s->ir->buffers[p.regs].thread_cells = mt->fetches;
    }
    return p;
}

static uint32_t thread_registers(Sched *s, const char *name, uint32_t per_thread, DType type) {
    uint32_t b = new_scratch(s, name, (uint64_t)32 * MMA_WARPS * per_thread, type, true);
    s->ir->buffers[b].thread_cells = per_thread;
    return b;
}

/* What a panel of `load` holds: the load, or the step's tf32 rounding of it. */
static const IrExpr *panel_value(const Reduction *r, const IrExpr *load, bool tf32) {
    if (!tf32) return load;
    const IrExpr *v = r->step->value;
    return v->args[0]->args[0] == load ? v->args[0] : v->args[1];
}

/* Rewrite 6t's hooks (k_loop). */
static IrBlock *mma_threads(Sched *s, IrBlock *into, void *tile) {
    MmaTile *mt = tile;
    return &warp_loops(s, into, mt->th)->body;
}

static void mma_fetch_panels(Sched *s, IrBlock *into, void *tile, uint32_t kt, int64_t k_offset) {
    MmaTile *mt = tile;
    mma_fetch(s, into, mt, &mt->a, mt->th, kt, k_offset);
    mma_fetch(s, into, mt, &mt->b, mt->th, kt, k_offset);
}

static void mma_spill_panels(Sched *s, IrBlock *into, void *tile) {
    MmaTile *mt = tile;
    mma_spill(s, into, mt, &mt->a, mt->th);
    mma_spill(s, into, mt, &mt->b, mt->th);
}

/* A panel's steps, 16 at a time: fragments (the first in the fetch's thread body), products. */
static void mma_step(Sched *s, IrBlock *thread, IrBlock *block, void *tile) {
    MmaTile *mt = tile;
    for (uint32_t sub = 0; sub < mt->step / MMA_K; sub++) {
        mma_fragments(s, sub ? mma_threads(s, block, mt) : thread, mt, mt->th, sub, 0);
        mma_products(s, block, mt);
    }
}

/* ---- Rewrite 6t's asynchronous panels ---------------------------------------------------------------- *
 *
 * Where the operands are bf16 or f16 cells of device buffers whose runs (fetch_run) start at
 * addresses aligned to their bytes, the panels skip the registers: each thread copies its runs
 * straight into shared memory with cp.async (ir.h LOOP_ASYNC_COPY), MMA_STAGES panels at a
 * time, each copy landing while the block computes on the panels before it.  Panel p goes to
 * stage p mod S of each shared buffer (S = MMA_STAGES, or 2 for fewer panels); the copies of
 * one phase are one group, and a barrier after copies waits until only the groups of later
 * panels are in flight:
 *     copy panel 0;  …;  copy panel S − 2                      (S − 1 phases, S − 1 groups)
 *     for kt < P:  barrier after copies (min(kt + S − 1, P) − kt − 1 groups in flight);
 *                  copy panel kt + S − 1 into stage (kt + S − 1) mod S, if there is one;
 *                  step/16 × (fragments from stage kt mod S;  mt·nt products)
 * The barrier also tells every thread that the block has finished with panel kt − 1, whose
 * stage the copy after it overwrites.  The turns whose copies keep S − 2 groups in flight are
 * a loop over rounds of S turns (each turn's stages constant in the IR), the others unrolled. */

/* Whether every flat coefficient of the load's index but its contiguous axis's, and its
 * offset, are multiples of `run` cells (so that each run of cells is aligned to its bytes). */
static bool runs_aligned(const IrProgram *ir, const IrExpr *load, uint32_t contiguous, uint32_t run) {
    const IrBuffer *b = &ir->buffers[load->buffer];
    if (b->kernel_local || b->gpu_shared || run * ir_dtype_bytes(b->dtype) < 4) return false;
    int64_t stride = 1, offset = 0;
    for (uint32_t a = b->rank; a-- > 0;) {
        const IrIndex *ix = &load->index[a];
        if (ix->symbol || ix->gather) return false;
        offset += ix->offset * stride;
        for (uint32_t t = 0; t < ix->term_count; t++)
            if (ix->terms[t].iter != contiguous && ix->terms[t].coef * stride % run) return false;
        stride *= (int64_t)b->dims[a];
    }
    return offset % run == 0 && ir_flat_coef(ir, load->buffer, load->index, contiguous) == 1;
}

/* In `into` (a phase of its own): the block's copies of panel ko·coef + panel (ko UINT32_MAX:
 * panel alone) of the A and B operands into stage `stage`. */
static void mma_copy_panels(Sched *s, IrBlock *into, MmaTile *mt, uint32_t ko, int64_t coef, int64_t panel, uint32_t stage) {
    IrBlock *thread = mma_threads(s, into, mt);
    for (int op = 0; op < 2; op++) {
        const Panel *p = op ? &mt->b : &mt->a;
        uint32_t run = fetch_run(mt, p), pass, c = new_iter(s);
        IrStmt *lp = unrolled(s, thread, &pass, mt->fetches / run, true), *lc = new_loop(s, c, run, true, LOOP_ASYNC_COPY);
        ir_block_push(s->ir->arena, &lp->body, lc);
        Affine kk, m;
        fetch_place(mt, p, mt->th, pass, c, &kk, &m);
        IrTerm at[8];
        uint32_t n = 0;
        for (uint32_t k = 0; k < kk.count; k++) at[n++] = (IrTerm){kk.terms[k].iter, kk.terms[k].coef * p->k_stride};
        for (uint32_t k = 0; k < m.count; k++) at[n++] = (IrTerm){m.terms[k].iter, m.terms[k].coef * p->m_stride};
        IrIndex *to = flat_index(s, at, n);
        to->offset = stage * panel_cells(mt, p);
        reset_subst(s);
        add_term(&m, p->base_iter, mt->tile);
        map_iter(s, p->tiled_iter, m);
        kk.offset += panel * mt->step;
        add_term(&kk, ko, coef * mt->step);
        map_iter(s, mt->k_iter, k_place(kk, UINT32_MAX, 0, 0, &mt->split));
        map_outer_part(s, &mt->split);
        ir_block_push(s->ir->arena, &lc->body, new_store(s, p->shared, to, clone_expr(s, p->operand, NULL)));
    }
}

static void push_copy_barrier(Sched *s, IrBlock *into, uint32_t in_flight) {
    IrStmt *b = arena_alloc(s->ir->arena, sizeof *b);
    *b = (IrStmt){.kind = IR_BARRIER, .await_copies = true, .copies_in_flight = in_flight};
    ir_block_push(s->ir->arena, into, b);
}

/* One turn of the pipeline in `into`: the barrier, the copy of panel ko·S + `copy` (if `copy`
 * is not negative) into stage `copy` mod S, and the products of the panel in stage `stage`. */
static void mma_turn(Sched *s, IrBlock *into, MmaTile *mt, uint32_t ko, uint32_t in_flight, int64_t copy, uint32_t stage) {
    push_copy_barrier(s, into, in_flight);
    if (copy >= 0) mma_copy_panels(s, into, mt, ko, mt->stages, copy, (uint32_t)(copy % mt->stages));
    for (uint32_t sub = 0; sub < mt->step / MMA_K; sub++) {
        mma_fragments(s, mma_threads(s, into, mt), mt, mt->th, sub, stage);
        mma_products(s, into, mt);
    }
}

static void mma_pipeline(Sched *s, IrBlock *blk, MmaTile *mt, const Reduction *r) {
    blk = outer_reduction_loops(s, blk, r, &mt->split);
    int64_t panels = (int64_t)(part_steps(r, &mt->split) / mt->step), stages = mt->stages;
    for (int64_t p = 0; p + 1 < stages && p < panels; p++) mma_copy_panels(s, blk, mt, UINT32_MAX, 0, p, (uint32_t)p);
    int64_t steady = panels - stages + 1, rounds = steady > 0 ? steady / stages : 0;
    if (rounds) {
        uint32_t ko = new_iter(s);
        IrStmt *l = new_loop(s, ko, (uint64_t)rounds, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, blk, l);
        for (int64_t u = 0; u < stages; u++) mma_turn(s, &l->body, mt, ko, (uint32_t)stages - 2, u + stages - 1, (uint32_t)u);
    }
    for (int64_t kt = rounds * stages; kt < panels; kt++) {
        int64_t issued = kt + stages - 1 < panels ? kt + stages - 1 : panels;
        mma_turn(s, blk, mt, UINT32_MAX, (uint32_t)(issued - kt - 1), kt + stages - 1 < panels ? kt + stages - 1 : -1,
                 (uint32_t)(kt % stages));
    }
    if (r->nred > 1) push_barrier(s, blk);
}

static bool gpu_mma_tiles(Sched *s, Reduction *r, IrBlock *out) {
    Contraction ct;
    Reduction bare;
    IrStmt bare_step;
    IrExpr bare_value;
    bool tf32 = tf32_step(s->ir, r, &bare, &bare_step, &bare_value);
    DType in;
    BlockPlan plan;
    if (!find_contraction(s->ir, tf32 ? &bare : r, &ct, false, 0) || !mma_type(s, &ct, r, tf32, &in)) return false;
    /* Asynchronous panels of MMA_ASYNC_STEPS steps where both operands' runs are aligned (half
     * types: tf32's panels hold roundings), else panels through registers of MMA_PANEL_BYTES. */
    MmaTile mt;
    for (int async = !tf32; async >= 0; async--) {
        uint32_t step = async ? MMA_ASYNC_STEPS : MMA_PANEL_BYTES / ir_dtype_bytes(in);
        while (step >= MMA_K && !plan_blocks(s, r, &ct, step, &plan)) step /= 2;
        if (step < MMA_K) return false;
        mt = (MmaTile){.ct = &ct, .in = in, .tile = plan.tile, .mt = plan.tile / MMA_WARPS_I / 16, .nt = plan.tile / MMA_WARPS_J / 8,
                       .step = step, .fetches = plan.tile * step / (32 * MMA_WARPS), .k_iter = r->red[r->nred - 1]->iter,
                       .bi = plan.bi, .bj = plan.bj, .split = plan.split};
        if (!async) break;
        Panel pa = {.k_along_x = mma_k_along(s->ir, ct.a, mt.k_iter, ct.i_loop->iter)};
        Panel pb = {.k_along_x = mma_k_along(s->ir, ct.b, mt.k_iter, ct.j_loop->iter)};
        if (runs_aligned(s->ir, ct.a, pa.k_along_x ? mt.k_iter : ct.i_loop->iter, fetch_run(&mt, &pa)) &&
            runs_aligned(s->ir, ct.b, pb.k_along_x ? mt.k_iter : ct.j_loop->iter, fetch_run(&mt, &pb))) {
            mt.stages = part_steps(r, &plan.split) / step < MMA_STAGES ? 2 : MMA_STAGES;
            break;
        }
    }
    uint32_t tile = mt.tile, step = mt.step;
    mt.a = mma_panel(s, &mt, ct.a, panel_value(r, ct.a, tf32), ct.i_loop->iter, mt.bi, "a_panel");
    mt.b = mma_panel(s, &mt, ct.b, panel_value(r, ct.b, tf32), ct.j_loop->iter, mt.bj, "b_panel");
    mt.afrag = thread_registers(s, "a_fragment", 8 * mt.mt, in);
    mt.bfrag = thread_registers(s, "b_fragment", 4 * mt.nt, in);
    mt.cells = thread_registers(s, "c_fragment", 4 * mt.mt * mt.nt, DTYPE_F32);

    IrBlock *blk = NULL;
    IrStmt *top = grid_loops(s, &plan.grid, &blk);
    IrIndex *cell;
    /* Every cell's initial value, the reduction, the cells stored. */
    IrBlock *threads = mma_threads(s, blk, &mt);
    IrBlock *body = mma_cells(s, threads, &mt, mt.th, &cell);
    ir_block_push(s->ir->arena, body, new_store(s, mt.cells, cell, cell_start(s, r, &mt.split)));
    if (mt.stages) mma_pipeline(s, blk, &mt, r);
    else
        k_loop(s, blk, &(KLoop){.r = r, .step = step, .split = &mt.split, .tile = &mt,
                                .threads = mma_threads, .fetch = mma_fetch_panels, .spill = mma_spill_panels, .compute = mma_step});
    threads = mma_threads(s, blk, &mt);
    body = mma_cells(s, threads, &mt, mt.th, &cell);
    ir_block_push(s->ir->arena, body, cell_store(s, r, &mt.split, new_load(s, mt.cells, cell)));

    push_block_kernel(s, r, top, &mt.split,
                      arena_printf(s->ir->arena,
                                   "%ux%u cells a GPU block on the tensor cores (mma.m16n8k%u.%s), %u warps of %ux%u, panels of %u steps%s",
                                   tile, tile, ir_mma_k(in), in == DTYPE_F32 ? "tf32" : ir_dtype_word(in), MMA_WARPS,
                                   tile / MMA_WARPS_I, tile / MMA_WARPS_J, step,
                                   mt.stages ? arena_printf(s->ir->arena, " copied asynchronously, %u in shared memory", mt.stages) : ""),
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
       TREE_MIN_STEPS_EXACT = 2048 };

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

static bool gpu_block_reduction(Sched *s, const Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (r->nred == 0 || r->npar > 3) return false;
    ScalarOp op = step_combine(r->step->value, r->local);
    if (op == SOP_COUNT || ((op == SOP_ADD || op == SOP_MUL) && !s->target->reassociate)) return false;
    double cells = 1, steps = 1;
    for (uint32_t k = 0; k < r->npar; k++) cells *= (double)r->par[k]->extent;
    for (uint32_t k = 0; k < r->nred; k++) steps *= (double)r->red[k]->extent;
    for (uint32_t k = 0; k + 1 < r->npar; k++)
        if (r->par[k]->extent > 65535) return false;
    const IrStmt *inner = r->red[r->nred - 1];
    uint32_t threads = (uint32_t)tile_side(inner->extent, TREE_MAX_THREADS);
    uint64_t min_steps = s->target->reassociate ? TREE_MIN_STEPS : TREE_MIN_STEPS_EXACT;
    if (cells >= TREE_MAX_CELLS || steps < min_steps || threads < TREE_MIN_THREADS) return false;
    uint32_t part = new_scratch(s, "partials", threads, DTYPE_F32, true);
    s->ir->buffers[part].gpu_shared = true;
    /* The block loops: the cells' own loops (innermost on x), or one block for a single cell. */
    static const IrLoopMode modes[3] = {LOOP_BLOCK_X, LOOP_BLOCK_Y, LOOP_BLOCK_Z};
    IrStmt *top = NULL;
    IrBlock *blk = out;
    if (r->npar == 0) {
        top = new_loop(s, new_iter(s), 1, true, LOOP_BLOCK_X);
        blk = &top->body;
    }
    for (uint32_t k = 0; k < r->npar; k++) {
        IrStmt *l = new_loop(s, r->par[k]->iter, r->par[k]->extent, true, modes[r->npar - 1 - k]);
        if (!top) top = l;
        else ir_block_push(s->ir->arena, blk, l);
        blk = &l->body;
    }
    /* Each thread's partial result. */
    uint32_t t = new_iter(s);
    IrStmt *lt = new_loop(s, t, threads, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, lt);
    ir_block_push(s->ir->arena, &lt->body, new_store(s, part, part_index(s, t, 0),
                                                     new_const(s, op == SOP_ADD ? 0 : op == SOP_MUL ? 1
                                                                  : op == SOP_MAX ? -INFINITY : INFINITY, DTYPE_F32)));
    IrBlock *into = &lt->body;
    for (uint32_t k = 0; k + 1 < r->nred; k++) {
        IrStmt *l = new_loop(s, r->red[k]->iter, r->red[k]->extent, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, into, l);
        into = &l->body;
    }
    uint32_t kq = new_iter(s);
    IrStmt *lq = new_loop(s, kq, inner->extent / threads, false, LOOP_PLAIN);
    ir_block_push(s->ir->arena, into, lq);
    reset_subst(s);
    map_iter(s, inner->iter, (Affine){.terms = {{kq, threads}, {t, 1}}, .count = 2});
    LocalRepl repl = {r->local, part_at(s, part, t, 0), UINT32_MAX, NULL};
    ir_block_push(s->ir->arena, &lq->body, new_store(s, part, part_index(s, t, 0), clone_expr(s, r->step->value, &repl)));
    /* Halving the partials. */
    for (uint32_t half = threads / 2; half >= 1; half /= 2) {
        push_barrier(s, blk);
        uint32_t th = new_iter(s);
        IrStmt *lh = new_loop(s, th, half, true, LOOP_THREAD_X);
        ir_block_push(s->ir->arena, blk, lh);
        ir_block_push(s->ir->arena, &lh->body, new_store(s, part, part_index(s, th, 0),
                                                         new_op(s, op, part_at(s, part, th, 0), part_at(s, part, th, half), NULL)));
    }
    /* The cell: its initial value folded with the total (by the thread that made part[0]). */
    push_barrier(s, blk);
    uint32_t t0 = new_iter(s);
    IrStmt *l0 = new_loop(s, t0, 1, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, l0);
    reset_subst(s);
    IrExpr *total = new_op(s, op, clone_expr(s, r->init->value, NULL), part_at(s, part, t0, 0), NULL);
    ir_block_push(s->ir->arena, &l0->body, new_store(s, r->store->buffer, clone_index(s, r->store->index, ir->buffers[r->store->buffer].rank), total));
    const char *what = r->par[0] && r->par[0]->comment ? r->par[0]->comment : r->init->comment ? r->init->comment : "a reduction";
    top->comment = arena_printf(s->ir->arena, "%s; schedule: each cell reduced across a block of %u GPU threads", what, threads);
    ir_block_push(s->ir->arena, out, top);
    return true;
}

/* A reduction to one cell at a function's top level: `l = init; for r…: l = step; C[…] = l`
 * (statements i, i+1, i+2), as a Reduction without parallel loops. */
static bool match_full_reduction(const IrFunction *fn, uint32_t i, Reduction *r) {
    memset(r, 0, sizeof *r);
    return i + 2 < fn->body.count && match_steps(fn->body.items[i], fn->body.items[i + 1], fn->body.items[i + 2], r);
}

/* Whether st stays as lowered only because it computes bf16 or f16 cells: a loop nest without
 * gathered indices, integer arithmetic, f64 or the types the tiles leave alone. */
static bool half_only(const Sched *s, const IrStmt *st) {
    return st->kind == IR_LOOP && ir_stmt_half(s->ir, st) && !ir_stmt_gathers(s->ir, st) && !ir_stmt_integer(st) &&
           !ir_stmt_untiled_types(s->ir, st) && !ir_stmt_f64(s->ir, st);
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
        if (st->kind == IR_LOOP && !ir_stmt_gathers(s->ir, st) && !ir_stmt_integer(st) &&
            !ir_stmt_untiled_types(s->ir, st) &&
            match_reduction(st, &r) && gpu_mma_tiles(s, &r, &body))
            continue;
        if (sched_keeps_lowered(s, st)) { /* as lowered (sched.c) */
            /* except a nest kept only for its bf16/f16 cells: they are computed in f32 and
             * rounded once where stored, in thread tiles and block reductions as as lowered */
            if (half_only(s, st) && match_reduction(st, &r) &&
                (gpu_block_reduction(s, &r, &body) || gpu_thread_tiles(s, &r, &body)))
                continue;
            ir_block_push(s->ir->arena, &body, st);
            continue;
        }
        if (st->kind == IR_LOOP && match_reduction(st, &r) &&
            (gpu_block_tiles(s, &r, &body) || gpu_block_reduction(s, &r, &body) || gpu_thread_tiles(s, &r, &body)))
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
