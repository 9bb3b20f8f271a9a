/* sched.c — the schedule: per-target rewrites of the loop IR's nests (sched.h).
 *
 * Lowering (lower.c) states what each cell is: a reduction is the canonical nest
 *     for p… parallel:  l = init;  for r… reduction: l = step(l);  C[p…] = l
 * and this stage decides how it runs on the target, in Halide's terms the schedule of that
 * algorithm (docs/ir.md §5).  A nest over a run-time size is first strip-mined into nests of
 * compile-time sizes inside loops of blocks ("Strip-mining run-time loops" below, docs/ir.md
 * §5.2).  A scatter through a window (a convolution's input gradient) is first untangled into
 * canonical nests, one per window position, inside a parallel loop over its batch (rewrite 0,
 * untangle_scatter).  A contraction of bf16 or f16 cells is first made an f32 one over widened
 * copies of its operands (reduce_in_f32, docs/ir.md §5.4; two bf16 operands stay bf16 where
 * the tiles take them in pairs, sched_tile.c tile_pairs), and any other reduction of half cells
 * accumulates in an f32 twin of its result.  Three rewrites, tried on every
 * top-level nest, then a fourth:
 *
 *   1. A contraction — the step is `l = fma(x, y, l)` with x and y loads, and an iterator J
 *      walks C with stride 1 and only one operand (B), another, I, walks C and the other
 *      operand (A) but not B — becomes register-tiled kernels over packed operands:
 *        - packing nests copy B into panels P[batch…, j/NR, r…, j%NR] and A into rows
 *          [batch…, i/MR, r…, i%MR], so that a tile reads NR (MR) adjacent values per
 *          reduction step whatever the layouts (transposed operands, the compose form `w * x`,
 *          gradients); a last partial panel or row block is padded with zeros; an operand
 *          that moves by one cell along the innermost reduction loop is copied in W×W blocks
 *          transposed in registers (LOOP_TRANSPOSE) rather than one value per row; one whose
 *          steps are a page apart, a group of blocks per pass (pack_group); an operand whose
 *          layout already suits the tiles is read in place (read_in_place); packed rows of A
 *          are prefetched ahead of the tiles' reads (IrBuffer.prefetch_cells);
 *        - tile nests keep an MR×NR block of C in a kernel-local tile T (registers: its loops
 *          are unrolled over rows and vectors, and vector over lanes) across all of the
 *          reduction loops; tiles over the padding store only the cells C has; a tile of few
 *          vectors takes more rows (enough accumulators to cover the FMA latency); when the J
 *          of stride 1 is narrower than a vector and the reduction long, another iterator
 *          that walks its operand with stride 1 gives the lanes (strided_lanes);
 *        - the pointwise nest right after, when it reads C cell by cell (a bias, an activation),
 *          is fused as the tiles' epilogue, and so are the nests after it that each read the one
 *          before's result cell by cell (stages: a bias, then its GELU); C, and a stage's result
 *          that only the next stage reads, get no storage when nothing else observes them;
 *        - with enough batch cells, one nest over the batch packs and tiles a cell at a time.
 *      Every cell still starts from the same value and takes the same fma steps in the same
 *      reduction order, so the result is bit-identical to the canonical nest.  After a
 *      function's rewrites, a packing that copies the same cells into the same layout as an
 *      earlier one, with nothing in between writing what it reads, is dropped and its readers
 *      read the earlier copy (rewrite 1c, share_packing: the q, k and v projections' input).
 *   2. Any other reduction whose innermost parallel iterator walks C and every load with
 *      stride 1 (or not at all) accumulates in place: the reduction loops move outside that
 *      iterator's loop, which becomes the inner loop of the nest and vectorises; each cell
 *      again takes the same steps in the same order.  One whose loads walk that iterator with
 *      another stride (a row's sum over its contiguous last axis) runs W rows a vector over W×W
 *      blocks of its operands transposed in registers (rewrite 2d, transpose_rows; each
 *      transposition prefetches the next block's rows) when the extents allow, else has that
 *      loop split into
 *      blocks of 8 cells whose chains of steps interleave (rewrite 2b, interleave_rows).  One
 *      whose only parallel loop is that iterator's (a column sum) has its cells split into
 *      chunks, a parallel loop over them outermost, so that it runs on the thread pool
 *      (rewrite 2c, column_chunks).
 *   3. A large pointwise nest that writes a buffer it does not read, by whole aligned vectors,
 *      stores around the caches (`nontemporal`); also one that touches bf16 or f16 cells, which
 *      the schedule otherwise leaves as lowered.
 *   4. Consecutive pointwise nests over loops of the same extents become one nest running their
 *      stores in order, when every buffer any of them stores is accessed by all of them at one
 *      index (fuse_pointwise): an optimiser's state and parameter updates in one pass.  Before
 *      that, a pointwise nest moves down past independent statements to the next pointwise nest
 *      of the same extents that uses what it touches (sink_pointwise): clipping's scaling of a
 *      gradient joins that parameter's optimiser pass.  Last, once every function is scheduled,
 *      a buffer that one fused nest alone touches and writes before it reads in each iteration
 *      becomes a local of that nest (rewrite 4b, local_cells: gradients passed along a layer
 *      norm's backward chain).
 *   5. For the GPU only (instead of 1–3): a reduction nest computes a tile of cells per thread
 *      (gpu_thread_tiles); then sched_gpu.c maps the outer parallel loops onto the grid.
 *   6. For the GPU, before 5: a large contraction becomes a block's kernel staging its operands
 *      through shared memory (gpu_block_tiles).
 *   7. For the GPU, before 5: a reduction with few cells and many steps reduces each cell
 *      across a block of threads (gpu_block_reduction).
 *
 * The tile sizes come from the Target (target.c), counted in the cells of the nest's element
 * type: a nest that touches f64 values has half as many lanes to a vector (Sched.lanes, set
 * per nest by schedule_stmt).  Packed panels and tiles are BUF_SCRATCH buffers of their
 * operand's (accumulator's) type; a tile is kernel_local (each run of a kernel has its own).
 *
 * Where each part lives (sched_internal.h): this file has the entry schedule(), rewrites 0, 2
 * and 3 and the strip-mining; rewrite 1 is sched_tile.c; rewrites 1c, 4 and 4b and the tools
 * every rewrite uses (building and cloning IR, recognising the reduction nest) are nest.c; rewrites 5–7 and the
 * mapping onto the GPU's grid are sched_gpu.c.
 *
 * Requires: a verified, optimised IrProgram (lower.c, opt.c); runs before image_build() so
 * that the image allocates the scratch buffers. */
#include "sched/sched_internal.h"

#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "sched/kernel.h"

/* ---- Rewrite 2: accumulating in place ------------------------------------------------------------- */

/* Where the statements replacing the nest's innermost parallel loop go: the body of the parallel
 * loop around it, emptied (the nest's outermost loop goes to `out`), or `out` itself when the
 * innermost loop is the only one. */
static IrBlock *innermost_place(Sched *s, Reduction *r, IrBlock *out) {
    if (r->npar < 2) return out;
    IrStmt *outer = r->par[r->npar - 2];
    outer->body = (IrBlock){0};
    ir_block_push(s->ir->arena, out, r->par[0]);
    return &outer->body;
}

/* Whether rewrite 2 takes the reduction: its innermost parallel iterator walks C with stride 1
 * and every load with stride 0 or 1. */
static bool in_place_ok(const Sched *s, const Reduction *r) {
    const IrProgram *ir = s->ir;
    if (r->npar < 1 || r->nred == 0 || !init_is_plain(ir, r)) return false;
    IrStmt *inner = r->par[r->npar - 1];
    uint32_t c = r->store->buffer;
    if (ir_flat_coef(ir, c, r->store->index, inner->iter) != 1) return false;
    bool bad = false;
    return scan_expr(ir, r->step->value, r->local, c, inner->iter, &bad) && !bad;
}

/* The statements that replace the nest go to `out` (the nest itself, rewritten, when it keeps
 * an outer parallel loop; else the cells' initial loop and the reduction loops). */
static bool accumulate_in_place(Sched *s, Reduction *r, IrBlock *out) {
    if (!in_place_ok(s, r)) return false;
    IrStmt *inner = r->par[r->npar - 1];
    uint32_t c = r->store->buffer;

    /* l is the cell itself from here on. */
    reset_subst(s);
    IrExpr *cell = new_load(s, c, r->store->index);
    LocalRepl repl = {r->local, cell, UINT32_MAX, NULL};
    if (r->npar == 1 && r->par[0]->comment) r->red[0]->comment = r->par[0]->comment;
    IrBlock *into = innermost_place(s, r, out);
    if (r->init->value->kind == IR_CONST) {
        IrStmt *init = new_loop(s, inner->iter, inner->extent, true, LOOP_PLAIN);
        ir_block_push(s->ir->arena, &init->body, new_store(s, c, r->store->index, r->init->value));
        ir_block_push(s->ir->arena, into, init);
        if (r->npar == 1) {
            init->comment = r->red[0]->comment;
            r->red[0]->comment = NULL;
        }
    }
    ir_block_push(s->ir->arena, into, r->red[0]);
    IrStmt *cells = new_loop(s, inner->iter, inner->extent, true, LOOP_PLAIN);
    ir_block_push(s->ir->arena, &cells->body, new_store(s, c, r->store->index, clone_expr(s, r->step->value, &repl)));
    IrStmt *last = r->red[r->nred - 1];
    last->body = (IrBlock){0};
    ir_block_push(s->ir->arena, &last->body, cells);
    return true;
}

/* Reduction `r`'s innermost parallel loop split into blocks of `cells` cells (`cells` divides
 * its extent): a parallel loop over the blocks, and in it the block's cells set to `init` (when
 * the accumulation resets; an update starts from the cell as it is), then the reduction loops
 * around a loop over the block's cells (of mode `mode`), each of which accumulates in place.
 * Each cell takes the canonical nest's steps in the same order.  Returns the blocks' loop. */
static IrStmt *blocks_in_place(Sched *s, Reduction *r, uint64_t cells, IrLoopMode mode) {
    const IrProgram *ir = s->ir;
    IrStmt *inner = r->par[r->npar - 1];
    uint32_t c = r->store->buffer;
    reset_subst(s);
    uint32_t block = new_iter(s), cell = new_iter(s);
    map_iter(s, inner->iter, (Affine){.terms = {{block, (int64_t)cells}, {cell, 1}}, .count = 2, .offset = 0});
    IrIndex *at = clone_index(s, r->store->index, ir->buffers[c].rank);
    LocalRepl repl = {r->local, new_load(s, c, at), UINT32_MAX, NULL};
    IrStmt *blocks = new_loop(s, block, inner->extent / cells, true, LOOP_PLAIN);
    if (r->init->value->kind == IR_CONST) {
        IrStmt *init = new_loop(s, cell, cells, true, mode);
        ir_block_push(s->ir->arena, &init->body, new_store(s, c, at, r->init->value));
        ir_block_push(s->ir->arena, &blocks->body, init);
    }
    IrBlock *into = &blocks->body;
    for (uint32_t k = 0; k < r->nred; k++) {
        IrStmt *lp = new_loop(s, r->red[k]->iter, r->red[k]->extent, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, into, lp);
        into = &lp->body;
    }
    IrStmt *each = new_loop(s, cell, cells, true, mode);
    ir_block_push(s->ir->arena, &each->body, new_store(s, c, at, clone_expr(s, r->step->value, &repl)));
    ir_block_push(s->ir->arena, into, each);
    reset_subst(s);
    return blocks;
}

/* ---- Rewrite 2c: column sums in chunks --------------------------------------------------------------- */

enum { COLUMN_CHUNK = 128 };

/* A reduction that rewrite 2 takes whose only parallel loop is the one it puts innermost — a
 * sum over the rows of a matrix into one cell per column: a bias's gradient, the squares of a
 * weight's gradient that gradient clipping adds up — would become a nest whose outer loops are
 * the reduction's, which runs on one thread.  At a top-level nest of enough work (the target's
 * parallel_work) whose cells make at least two chunks of COLUMN_CHUNK, the cells are split
 * instead into those chunks, a parallel loop over the chunks outermost; inside, a chunk's cells
 * are initialised, then accumulate in place over the reduction loops, the cells of the chunk
 * innermost (vectorised).  Each cell takes the same steps in the same order, so the result is
 * bit-identical; the thread pool splits the chunks.  The nest goes to `out`. */
static bool column_chunks(Sched *s, Reduction *r, IrBlock *out) {
    if (r->npar != 1 || !in_place_ok(s, r)) return false;
    IrStmt *inner = r->par[0];
    double work = (double)inner->extent;
    for (uint32_t k = 0; k < r->nred; k++) work *= (double)r->red[k]->extent;
    if (inner->iter >= s->old_iters || inner->extent % COLUMN_CHUNK != 0 || inner->extent < 2 * COLUMN_CHUNK ||
        work < s->target->parallel_work)
        return false;

    IrStmt *chunks = blocks_in_place(s, r, COLUMN_CHUNK, LOOP_PLAIN);
    chunks->comment = arena_printf(s->ir->arena, "%s%sschedule: columns in chunks of %u", inner->comment ? inner->comment : "",
                                   inner->comment ? "; " : "", (unsigned)COLUMN_CHUNK);
    ir_block_push(s->ir->arena, out, chunks);
    return true;
}

/* ---- Rewrite 2b: interleaving the rows' chains ------------------------------------------------------ */

enum { INTERLEAVED_ROWS = 8 };

/* A reduction that rewrite 2 cannot take — its loads walk the innermost parallel loop with a
 * stride other than 0 or 1, as a sum over the contiguous last axis of each row does (a layer
 * norm's statistics and their gradients) — is a chain of dependent steps per cell, each waiting
 * for the one before (4 cycles an fma).  Here the innermost parallel loop is split into blocks
 * of INTERLEAVED_ROWS cells, and inside a block the reduction loops run outside an unrolled loop
 * over its cells, which accumulate in place (as in rewrite 2): the cells' chains interleave,
 * INTERLEAVED_ROWS of them in flight.  Each cell takes the same steps in the same order, so the
 * result is bit-identical.  The nest replacing it goes to `out`. */
static bool interleave_rows(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (r->npar < 1 || r->nred == 0 || !init_is_plain(ir, r)) return false;
    IrStmt *inner = r->par[r->npar - 1];
    uint32_t c = r->store->buffer;
    DType type = (DType)ir->buffers[c].dtype;
    if (inner->iter >= s->old_iters || (type != DTYPE_F32 && type != DTYPE_F64) || inner->extent < 2 * INTERLEAVED_ROWS ||
        inner->extent % INTERLEAVED_ROWS != 0 || !mentions(ir, c, r->store->index, inner->iter))
        return false;
    bool reads_cell = false; /* the step reads the cell only through the local */
    if (!scan_expr(ir, r->step->value, r->local, c, UINT32_MAX, &reads_cell) || reads_cell) return false;

    IrStmt *blocks = blocks_in_place(s, r, INTERLEAVED_ROWS, LOOP_UNROLL);
    if (r->npar == 1) blocks->comment = inner->comment;
    ir_block_push(s->ir->arena, innermost_place(s, r, out), blocks);
    return true;
}

/* ---- Rewrite 2d: rows transposed in registers ---------------------------------------------------- */

enum { MAX_TRANSPOSED = 4 };

/* Which of found[0 … n) load `e` is (the same buffer at the same index), or n. */
static uint32_t transposed_operand(const IrProgram *ir, const IrExpr *const *found, uint32_t n, const IrExpr *e) {
    uint32_t t = 0;
    while (t < n && !(found[t]->buffer == e->buffer && ir_same_index(ir, e->buffer, found[t]->index, e->index))) t++;
    return t;
}

/* The loads of a row reduction's step that rewrite 2d transposes: those that move by one cell
 * along the reduction loop `k` and by some other nonzero stride along the rows `i` (a row's
 * contiguous cells).  Every other load must be a broadcast (moving along neither) or a vector
 * along the rows (stride 1 along i, none along k).  Returns false for any other load, a load of
 * another type than `type`, or more than MAX_TRANSPOSED distinct such loads. */
static bool row_operands(const IrProgram *ir, const IrExpr *e, uint32_t i, uint32_t k, DType type,
                         const IrExpr **found, uint32_t *n) {
    switch (e->kind) {
    case IR_LOAD: {
        int64_t along_i = ir_flat_coef(ir, e->buffer, e->index, i), along_k = ir_flat_coef(ir, e->buffer, e->index, k);
        if (along_k == 0) return along_i == 0 || along_i == 1;
        if (along_k != 1 || along_i == 0 || along_i == 1 || ir->buffers[e->buffer].dtype != type) return false;
        if (transposed_operand(ir, found, *n, e) < *n) return true;
        if (*n == MAX_TRANSPOSED) return false;
        found[(*n)++] = e;
        return true;
    }
    case IR_OP:
        for (unsigned a = 0; a < scalar_op_arity(e->op); a++)
            if (!row_operands(ir, e->args[a], i, k, type, found, n)) return false;
        return true;
    case IR_RANDOM: return false;
    default: return true;
    }
}

/* The step at the current substitution, its local the cell `cell` and each load of found[t]
 * the transposed copy `copies[t]`. */
static IrExpr *transposed_step(Sched *s, const IrExpr *e, const LocalRepl *cell, const IrExpr *const *found,
                               IrExpr *const *copies, uint32_t n) {
    uint32_t t = e->kind == IR_LOAD ? transposed_operand(s->ir, found, n, e) : n;
    if (t < n) return copies[t];
    if (e->kind != IR_OP) return clone_expr(s, e, cell);
    IrExpr *c = arena_alloc(s->ir->arena, sizeof *c);
    *c = *e;
    for (unsigned a = 0; a < scalar_op_arity(e->op); a++) c->args[a] = transposed_step(s, e->args[a], cell, found, copies, n);
    return c;
}

/* A reduction over one loop k of each row's contiguous cells (a layer norm's statistics and
 * their gradients, a softmax's sums), whose result is contiguous along its rows i: rewrite 2b
 * would run it as interleaved scalar chains, one load of each operand and one step per cell.
 * Here the rows go W (a vector's lanes) at a time and the reduction W steps at a time: each
 * operand's W×W block — W rows, W steps each, read as W vectors along its rows — is transposed
 * in registers into a kernel-local copy (LOOP_TRANSPOSE), and then each of the W steps, in order,
 * is one vector operation on the W rows' cells, accumulated in place.  Each cell takes the
 * canonical nest's steps in the same order, so the result is bit-identical.  Needs both extents
 * a multiple of W, C and the transposed operands of the nest's type (f32 or f64). */
static bool transpose_rows(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (s->target->kind != TARGET_CPU || r->npar < 1 || r->nred != 1 || !init_is_plain(ir, r)) return false;
    IrStmt *inner = r->par[r->npar - 1], *kl = r->red[0];
    uint32_t c = r->store->buffer;
    DType type = (DType)ir->buffers[c].dtype;
    uint64_t w = s->lanes;
    if (inner->iter >= s->old_iters || kl->iter >= s->old_iters || (type != DTYPE_F32 && type != DTYPE_F64) || w < 4 ||
        inner->extent % w != 0 || kl->extent % w != 0 || ir_flat_coef(ir, c, r->store->index, inner->iter) != 1 ||
        mentions(ir, c, r->store->index, kl->iter))
        return false;
    bool reads_cell = false; /* the step reads the cell only through the local */
    if (!scan_expr(ir, r->step->value, r->local, c, UINT32_MAX, &reads_cell) || reads_cell) return false;
    const IrExpr *found[MAX_TRANSPOSED];
    uint32_t n = 0;
    if (!row_operands(ir, r->step->value, inner->iter, kl->iter, type, found, &n) || n == 0) return false;

    Arena *arena = s->ir->arena;
    reset_subst(s);
    uint32_t block = new_iter(s), cell = new_iter(s), kb = new_iter(s), kk = new_iter(s);
    map_iter(s, inner->iter, (Affine){.terms = {{block, (int64_t)w}, {cell, 1}}, .count = 2, .offset = 0});
    map_iter(s, kl->iter, (Affine){.terms = {{kb, (int64_t)w}, {kk, 1}}, .count = 2, .offset = 0});
    IrIndex *at = clone_index(s, r->store->index, ir->buffers[c].rank);
    LocalRepl repl = {r->local, new_load(s, c, at), UINT32_MAX, NULL};
    IrStmt *blocks = new_loop(s, block, inner->extent / w, true, LOOP_PLAIN);
    if (r->npar == 1) blocks->comment = inner->comment;
    if (r->init->value->kind == IR_CONST) {
        IrStmt *init = new_loop(s, cell, w, true, LOOP_VECTOR);
        ir_block_push(arena, &init->body, new_store(s, c, at, r->init->value));
        ir_block_push(arena, &blocks->body, init);
    }
    IrStmt *steps = new_loop(s, kb, kl->extent / w, false, LOOP_PLAIN);
    steps->comment = arena_printf(arena, "schedule: rows %llu at a time, each operand's %llux%llu blocks transposed in registers",
                                  (unsigned long long)w, (unsigned long long)w, (unsigned long long)w);
    ir_block_push(arena, &blocks->body, steps);
    /* copy[kk·W + cell] = operand at (row block·W + cell, kb·W + kk) */
    const IrTerm terms[2] = {{kk, (int64_t)w}, {cell, 1}};
    IrExpr *copies[MAX_TRANSPOSED];
    for (uint32_t t = 0; t < n; t++) {
        uint32_t copy = new_scratch(s, arena_printf(arena, "%s.rows", ir->buffers[found[t]->buffer].name), w * w, type, true);
        copies[t] = new_load(s, copy, flat_index(s, terms, 2));
        IrStmt *u_loop = new_loop(s, cell, w, true, LOOP_TRANSPOSE), *v_loop = new_loop(s, kk, w, true, LOOP_VECTOR);
        u_loop->prefetch_rows = (uint32_t)w; /* the next block's rows, often far in memory */
        ir_block_push(arena, &v_loop->body, new_store(s, copy, flat_index(s, terms, 2), clone_expr(s, found[t], NULL)));
        ir_block_push(arena, &u_loop->body, v_loop);
        ir_block_push(arena, &steps->body, u_loop);
    }
    IrStmt *each_step = new_loop(s, kk, w, false, LOOP_UNROLL), *cells = new_loop(s, cell, w, true, LOOP_VECTOR);
    ir_block_push(arena, &cells->body, new_store(s, c, at, transposed_step(s, r->step->value, &repl, found, copies, n)));
    ir_block_push(arena, &each_step->body, cells);
    ir_block_push(arena, &steps->body, each_step);
    reset_subst(s);
    ir_block_push(arena, innermost_place(s, r, out), blocks);
    return true;
}

/* ---- Rewrite 0: scatters through a sliding window --------------------------------------------------- */

/* The backward of a convolution with respect to its input, as lowering states it, is a nest of
 * reduction loops only: a scatter through the window's index,
 *     for n, oh, ow, oc, kh, kw reduction:  X[n, oh + kh, ow + kw, c] = fma(G[n, oh, ow, oc], K[oc, kh, kw, c], X[…])
 * (every loop a reduction because two iterations write one cell).  For fixed window iterators
 * (kh, kw) the writes are distinct cells, so it is the canonical reduction nest, one per window
 * position:
 *     for kh', kw' (kh = KH-1-kh', kw = KW-1-kw'):  for n, c, oh, ow parallel:
 *         l = X[…]; for oc reduction: l = fma(G, K, l);  X[…] = l
 * which rewrites 1 and 2 then take (a contraction over oc, tiled along ow and c).  The order in
 * which each cell takes its steps is unchanged, so the result is bit-identical: the iterations
 * that write one cell (n, p, q, c) are ordered by (oh, ow, oc) in the original nest, where the
 * window iterators are determined (kh = p - oh), and by (kh descending, kw descending, oc) =
 * (oh, ow, oc) in the new one.  The conditions that make this hold in general:
 *   - every axis of X is indexed by at most two iterators, each iterator in at most one axis, no
 *     symbol; an axis of two, `s·p + d·w` with s, d > 0, pairs p (the outer loop of the two)
 *     with the window iterator w (the inner), and there is at least one pair;
 *   - every p loop is outside every loop of an iterator X's index lacks (the reductions R), so
 *     that the original order on one cell's iterations is the order on (p…, R…);
 *   - the value is X[same cell] + e, e + X[same cell] or fma(x, y, X[same cell]), e, x, y not
 *     reading X.
 * The window loops go outside, in the order of their partners, each reversed (p = (cell - d·w)/s
 * grows as w falls); the rest keep their order.  The result is appended to `out`. */
static bool untangle_scatter(Sched *s, IrStmt *top, IrBlock *out) {
    const IrProgram *ir = s->ir;
    IrStmt *loops[MAX_LOOPS];
    uint32_t n = 0;
    IrStmt *st = top;
    while (st->kind == IR_LOOP && !st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1 && n < MAX_LOOPS) {
        loops[n++] = st;
        st = st->body.items[0];
    }
    if (n < 2 || st->kind != IR_STORE || st->value->kind != IR_OP ||
        (st->value->op != SOP_ADD && st->value->op != SOP_FMA))
        return false;
    IrStmt *store = st;
    uint32_t c = store->buffer;
    const IrExpr *v = store->value;
    /* X + e, e + X, or fma(x, y, X) (a sum of products, lower.c) */
    bool is_fma = v->op == SOP_FMA;
    bool cell_first = !is_fma && v->args[0]->kind == IR_LOAD && v->args[0]->buffer == c;
    const IrExpr *cell = is_fma ? v->args[2] : v->args[cell_first ? 0 : 1], *e = v->args[cell_first ? 1 : 0];
    if (cell->kind != IR_LOAD || cell->buffer != c || !ir_same_index(ir, c, cell->index, store->index) ||
        ir_expr_loads(ir, e, c) || (is_fma && ir_expr_loads(ir, v->args[1], c)))
        return false;
    /* role per loop: 0 not in X's index (R), 1 alone in an axis (a cell), 2 p, 3 w */
    int role[MAX_LOOPS] = {0};
    uint32_t partner[MAX_LOOPS] = {0}, axis_of[MAX_LOOPS] = {0}, first_pair_axis = UINT32_MAX;
    const IrBuffer *cb = &ir->buffers[c];
    for (uint32_t a = 0; a < cb->rank; a++) {
        const IrIndex *ix = &store->index[a];
        if (ix->symbol || ix->term_count > 2) return false;
        uint32_t pos[2] = {0, 0};
        for (uint32_t t = 0; t < ix->term_count; t++) {
            uint32_t k = 0;
            while (k < n && loops[k]->iter != ix->terms[t].iter) k++;
            if (k == n || role[k] != 0 || ix->terms[t].coef == 0) return false;
            if (ix->term_count == 2 && ix->terms[t].coef < 0) return false;
            pos[t] = k;
            role[k] = 1;
            axis_of[k] = a;
        }
        if (ix->term_count == 2) {
            if (first_pair_axis == UINT32_MAX) first_pair_axis = a;
            if (pos[0] == pos[1]) return false;
            uint32_t p = pos[0] < pos[1] ? pos[0] : pos[1], w = pos[0] < pos[1] ? pos[1] : pos[0];
            role[p] = 2, role[w] = 3, partner[p] = w;
        }
    }
    bool pairs = false;
    uint32_t last_p = 0, first_r = n;
    for (uint32_t k = 0; k < n; k++) {
        if (role[k] == 2) pairs = true, last_p = k;
        if (role[k] == 0 && first_r == n) first_r = k;
    }
    if (!pairs || last_p > first_r) return false;

    /* The cells' loops of the axes before the window's (the batch) go outside the window loops,
     * parallel: a cell has one value of each, so no cell's order changes, the threads split
     * the batch, and one batch cell's part of X stays in cache across the window positions.
     * The nests inside then pack into buffers of their own (kernel_local), so only when those
     * are small: at most the nest's cells and its columns' padding times its steps, for each of
     * the two operands, within 64 KiB. */
    double inner_cells = 1, steps = 1, batch = 1;
    bool hoist[MAX_LOOPS] = {false};
    for (uint32_t k = 0; k < n; k++) {
        hoist[k] = role[k] == 1 && axis_of[k] < first_pair_axis;
        if (hoist[k]) batch *= (double)loops[k]->extent;
        else if (role[k] == 1 || role[k] == 2) inner_cells *= (double)loops[k]->extent;
        else if (role[k] == 0) steps *= (double)loops[k]->extent;
    }
    if (batch < 2 || 2.0 * (inner_cells + 32.0) * steps > 16384.0) memset(hoist, 0, sizeof hoist), batch = 1;

    /* The window loops, reversed, outermost (inside the batch); the indices rewritten for them. */
    Arena *arena = s->ir->arena;
    reset_subst(s);
    IrStmt *wtop = NULL;
    IrBlock *into = NULL;
    for (uint32_t k = 0; k < n; k++) {
        if (!hoist[k]) continue;
        loops[k]->body = (IrBlock){0};
        loops[k]->parallel = true;
        nest_push(s, &wtop, &into, loops[k]);
    }
    for (uint32_t k = 0; k < n; k++) {
        if (role[k] != 2) continue;
        const IrStmt *w = loops[partner[k]];
        uint32_t it = new_iter(s);
        map_iter(s, w->iter, affine1(it, -1, (int64_t)w->extent - 1));
        nest_push(s, &wtop, &into, new_loop(s, it, w->extent, false, LOOP_PLAIN));
    }
    IrIndex *index = clone_index(s, store->index, cb->rank);
    IrExpr *step_e = clone_expr(s, e, NULL), *step_y = is_fma ? clone_expr(s, v->args[1], NULL) : NULL;
    reset_subst(s);

    /* The canonical nest: the cells' and the p loops, parallel, in their order; l = X[cell];
     * the R loops; X[cell] = l. */
    Reduction r;
    memset(&r, 0, sizeof r);
    uint32_t l = s->fn->local_count++;
    IrStmt *init = arena_alloc(arena, sizeof *init), *step = arena_alloc(arena, sizeof *step);
    IrExpr *acc = arena_alloc(arena, sizeof *acc);
    *acc = (IrExpr){.kind = IR_LOCAL, .type = (DType)ir_dtype_compute(cb->dtype), .local = l};
    *init = (IrStmt){.kind = IR_SET_LOCAL, .local = l, .value = new_load(s, c, index)};
    *step = (IrStmt){.kind = IR_SET_LOCAL, .local = l,
                     .value = is_fma ? new_op(s, SOP_FMA, step_e, step_y, acc)
                                    : new_op(s, SOP_ADD, cell_first ? acc : step_e, cell_first ? step_e : acc, NULL)};
    IrStmt *cstore = new_store(s, c, index, acc);
    for (uint32_t k = 0; k < n; k++) {
        if (hoist[k]) continue;
        loops[k]->body = (IrBlock){0};
        if (role[k] == 1 || role[k] == 2) loops[k]->parallel = true, r.par[r.npar++] = loops[k];
        else if (role[k] == 0) r.red[r.nred++] = loops[k];
    }
    if (r.npar == 0) return false; /* not reached: a pair has a p */
    for (uint32_t k = 0; k + 1 < r.npar; k++) ir_block_push(arena, &r.par[k]->body, r.par[k + 1]);
    for (uint32_t k = 0; k + 1 < r.nred; k++) ir_block_push(arena, &r.red[k]->body, r.red[k + 1]);
    IrBlock *cellb = &r.par[r.npar - 1]->body;
    ir_block_push(arena, cellb, init);
    if (r.nred) {
        ir_block_push(arena, cellb, r.red[0]);
        ir_block_push(arena, &r.red[r.nred - 1]->body, step);
    } else {
        ir_block_push(arena, cellb, step);
    }
    ir_block_push(arena, cellb, cstore);
    r.init = init, r.step = step, r.store = cstore, r.local = l;
    const char *comment = arena_printf(arena, "%s%sschedule: %sone reduction nest per window position (a scatter untangled)",
                                       top->comment ? top->comment : "", top->comment ? "; " : "",
                                       batch > 1 ? "for each batch cell, " : "");
    top->comment = NULL;
    wtop->comment = comment;
    IrBlock *inner = into;
    IrBlock tiled = {0};
    uint32_t fused;
    s->local_scratch = batch > 1;
    s->outer_cells = batch;
    if (r.nred && tile_contraction(s, &r, NULL, 0, &tiled, &fused)) {
        for (uint32_t k = 0; k < tiled.count; k++) ir_block_push(arena, inner, tiled.items[k]);
    } else if (!(r.nred && accumulate_in_place(s, &r, inner))) {
        ir_block_push(arena, inner, r.par[0]);
    }
    s->local_scratch = false;
    s->outer_cells = 1;
    ir_block_push(arena, out, wtop);
    return true;
}

/* ---- Rewrite 3: streaming pointwise nests ---------------------------------------------------------- */

/* The flat offset of an access's constant part (no iterators). */
static int64_t flat_offset_const(const IrProgram *ir, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *b = &ir->buffers[buffer];
    int64_t flat = 0;
    for (uint32_t a = 0; a < b->rank; a++) flat = flat * (int64_t)b->dims[a] + index[a].offset;
    return flat;
}

/* Every load of e walks `iter` with stride 0 or 1, and e reads no local and not `avoid`. */
static bool lanes_contiguous(const IrProgram *ir, const IrExpr *e, uint32_t iter, uint32_t avoid) {
    switch (e->kind) {
    case IR_LOCAL: return false;
    case IR_LOAD: {
        int64_t c = ir_flat_coef(ir, e->buffer, e->index, iter);
        return e->buffer != avoid && (c == 0 || c == 1);
    }
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!lanes_contiguous(ir, e->args[i], iter, avoid)) return false;
        return true;
    case IR_CONST:
    case IR_SYMBOL:
    case IR_RANDOM: break;
    }
    return true;
}

/* A pointwise nest (parallel loops around one store) that writes a buffer of at least
 * target->nontemporal_bytes without reading it: its inner loop becomes vectors of W lanes, each
 * stored whole, aligned, and around the caches (a non-temporal store saves the read of every
 * line the store would otherwise allocate).  The same cells get the same values. */
static bool stream_pointwise(Sched *s, IrStmt *top) {
    const IrProgram *ir = s->ir;
    IrStmt *st = top, *inner = NULL;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1) {
        inner = st;
        st = st->body.items[0];
    }
    uint64_t w = s->lanes;
    if (!inner || st->kind != IR_STORE) return false;
    const IrBuffer *b = &ir->buffers[st->buffer];
    if ((double)b->size * ir_dtype_bytes(b->dtype) < (double)s->target->nontemporal_bytes || inner->extent % w || inner->extent < w) return false;
    uint32_t it = inner->iter;
    for (uint32_t a = 0; a < b->rank; a++)
        if (st->index[a].symbol) return false;
    if (ir_flat_coef(ir, st->buffer, st->index, it) != 1 || flat_offset_const(ir, st->buffer, st->index) % (int64_t)w)
        return false;
    /* Every other iterator moves the store by whole vectors, so each vector starts aligned. */
    for (IrStmt *l = top; l != inner; l = l->body.items[0])
        if (ir_flat_coef(ir, st->buffer, st->index, l->iter) % (int64_t)w) return false;
    if (!lanes_contiguous(ir, st->value, it, st->buffer)) return false;
    reset_subst(s);
    uint32_t lo = new_iter(s), lane = new_iter(s);
    map_iter(s, it, (Affine){.terms = {{lo, (int64_t)w}, {lane, 1}}, .count = 2});
    IrStmt *vec = new_loop(s, lane, w, true, LOOP_VECTOR);
    IrStmt *store = new_store(s, st->buffer, clone_index(s, st->index, b->rank), clone_expr(s, st->value, NULL));
    store->nontemporal = true;
    ir_block_push(s->ir->arena, &vec->body, store);
    inner->iter = lo;
    inner->extent /= w;
    inner->body = (IrBlock){0};
    ir_block_push(s->ir->arena, &inner->body, vec);
    const char *what = arena_printf(s->ir->arena, "schedule: %llu-lane vectors stored around the caches",
                                    (unsigned long long)w);
    top->comment = top->comment ? arena_printf(s->ir->arena, "%s; %s", top->comment, what) : what;
    return true;
}

/* ---- Driver ------------------------------------------------------------------------------------------ */

static bool split_reduction(Sched *s, IrStmt *st, const Reduction *r, IrBlock *out);

/* Schedule top-level statement `st` into `body` (rewrites 1-3); the statements after it
 * (`after`, `after_count` of them) may become a contraction's epilogue.  Returns how many did. */
static uint32_t schedule_stmt(Sched *s, IrStmt *st, IrStmt *const *after, uint32_t after_count, IrBlock *body) {
    Reduction r;
    s->cell_bytes = ir_stmt_f64(s->ir, st) ? 8 : 4;
    s->lanes = s->target->vector_floats * 4 / s->cell_bytes;
    if (st->kind == IR_LOOP && match_reduction(st, &r)) {
        if (split_reduction(s, st, &r, body)) return 0;
        IrBlock tiled = {0};
        uint32_t fused;
        if (tile_contraction(s, &r, after, after_count, &tiled, &fused)) {
            for (uint32_t k = 0; k < tiled.count; k++) ir_block_push(s->ir->arena, body, tiled.items[k]);
            return fused; /* the epilogue is in the tiles now */
        }
        IrBlock in_place = {0};
        if (column_chunks(s, &r, &in_place) || accumulate_in_place(s, &r, &in_place) ||
            transpose_rows(s, &r, &in_place) || interleave_rows(s, &r, &in_place)) {
            for (uint32_t k = 0; k < in_place.count; k++) ir_block_push(s->ir->arena, body, in_place.items[k]);
            return 0;
        }
    } else if (st->kind == IR_LOOP && !st->parallel && untangle_scatter(s, st, body)) {
        return 0;
    } else if (st->kind == IR_LOOP) {
        stream_pointwise(s, st);
    }
    ir_block_push(s->ir->arena, body, st);
    return 0;
}

/* ---- Strip-mining run-time loops --------------------------------------------------------------------
 *
 * The rewrites above size their tiles, vectors and unrolling from the extents, so a nest with a
 * loop of run-time extent n (docs/ir.md §2.7) is first strip-mined: its loop runs to a block of
 * 128 rows, and its indices add a symbol S, inside a LOOP_BLOCKS loop that sets S = 0, 128, … —
 * a nest of compile-time sizes, scheduled as any — then again for blocks of 16 of the rows left,
 * and for single rows (runtime_blocks).  Two forms are taken: the nest's outermost
 * loop is the run-time one (parallel: each block computes its own cells), or the run-time loop is
 * a reduction loop of a canonical reduction (each block goes on from the cells the blocks before
 * left: the cell's initial value, when it is not the cell itself, is stored first by a nest of its
 * own, and the blocked nest starts from the cell).  Either way each cell takes the same steps in
 * the same order, so the results are the same bits.  The run-time loop's iterator must walk its
 * axes with coefficient 1 (the symbol adds to an axis as an iterator of coefficient 1 would);
 * any other nest of run-time extent keeps its plain loops. */
/* The blocks of a strip-mined loop, largest first: each level takes the whole blocks that the
 * one before it left (so at most 127 rows run in blocks of 16 or alone). */
static const uint32_t runtime_blocks[] = {128, 16, 1};

/* The loops of run-time extent in a nest: the first into *found, their number returned. */
static uint32_t runtime_loops(IrStmt *st, IrStmt **found) {
    if (st->kind != IR_LOOP) return 0;
    uint32_t n = 0;
    if (size_is_runtime(st->extent)) {
        if (!*found) *found = st;
        n++;
    }
    for (uint32_t i = 0; i < st->body.count; i++) n += runtime_loops(st->body.items[i], found);
    return n;
}

/* Whether `it` appears in every axis of the index at most once, with coefficient 1, on an axis
 * without a symbol. */
static bool index_blockable(const IrIndex *index, uint32_t rank, uint32_t it) {
    for (uint32_t a = 0; a < rank; a++) {
        uint32_t seen = 0;
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == it && (index[a].terms[t].coef != 1 || seen++ || index[a].symbol)) return false;
    }
    return true;
}

static bool expr_blockable(const IrProgram *ir, const IrExpr *e, uint32_t it) {
    if ((e->kind == IR_LOAD || e->kind == IR_RANDOM) && !index_blockable(e->index, ir->buffers[e->buffer].rank, it))
        return false;
    for (unsigned i = 0; e->kind == IR_OP && i < scalar_op_arity(e->op); i++)
        if (!expr_blockable(ir, e->args[i], it)) return false;
    return true;
}

static bool stmt_blockable(const IrProgram *ir, const IrStmt *st, uint32_t it) {
    switch (st->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < st->body.count; i++)
            if (!stmt_blockable(ir, st->body.items[i], it)) return false;
        return true;
    case IR_STORE:
        return index_blockable(st->index, ir->buffers[st->buffer].rank, it) && expr_blockable(ir, st->value, it);
    case IR_SET_LOCAL: return expr_blockable(ir, st->value, it);
    case IR_BARRIER: return true;
    case IR_MMA: /* the GPU's */
    case IR_LDMATRIX:
    case IR_WGMMA:
    case IR_CALL: return false; /* top-level only */
    }
    return false;
}

/* A copy of an index whose axes that `it` walks add `symbol`. */
static IrIndex *blocked_index(Sched *s, const IrIndex *index, uint32_t rank, uint32_t it, const char *symbol) {
    IrIndex *ix = arena_alloc(s->ir->arena, (rank ? rank : 1) * sizeof *ix);
    for (uint32_t a = 0; a < rank; a++) {
        ix[a] = index[a];
        ix[a].terms = arena_alloc(s->ir->arena, (index[a].term_count ? index[a].term_count : 1) * sizeof *ix[a].terms);
        if (index[a].term_count) memcpy(ix[a].terms, index[a].terms, index[a].term_count * sizeof *ix[a].terms);
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == it) ix[a].symbol = symbol;
    }
    return ix;
}

static IrExpr *blocked_expr(Sched *s, const IrExpr *e, uint32_t it, const char *symbol) {
    IrExpr *c = arena_alloc(s->ir->arena, sizeof *c);
    *c = *e;
    if (e->kind == IR_LOAD || e->kind == IR_RANDOM)
        c->index = blocked_index(s, e->index, s->ir->buffers[e->buffer].rank, it, symbol);
    for (unsigned i = 0; e->kind == IR_OP && i < scalar_op_arity(e->op); i++)
        c->args[i] = blocked_expr(s, e->args[i], it, symbol);
    return c;
}

/* A copy of the nest in which `it`'s loop runs to `extent` and its axes add `symbol`; the
 * statement `from_cell` (a reduction's initial value), when met, starts from the cell `cell`. */
static IrStmt *blocked_stmt(Sched *s, const IrStmt *st, uint32_t it, const char *symbol, uint64_t extent,
                            const IrStmt *from_cell, const IrStmt *cell) {
    IrStmt *c = arena_alloc(s->ir->arena, sizeof *c);
    *c = *st;
    switch (st->kind) {
    case IR_LOOP:
        if (st->iter == it) c->extent = extent;
        c->body = (IrBlock){0};
        for (uint32_t i = 0; i < st->body.count; i++)
            ir_block_push(s->ir->arena, &c->body, blocked_stmt(s, st->body.items[i], it, symbol, extent, from_cell, cell));
        break;
    case IR_STORE:
        c->index = blocked_index(s, st->index, s->ir->buffers[st->buffer].rank, it, symbol);
        c->value = blocked_expr(s, st->value, it, symbol);
        break;
    case IR_SET_LOCAL:
        c->value = st == from_cell ? new_load(s, cell->buffer, blocked_index(s, cell->index, s->ir->buffers[cell->buffer].rank,
                                                                             it, symbol))
                                   : blocked_expr(s, st->value, it, symbol);
        break;
    case IR_BARRIER:
    case IR_MMA:
    case IR_LDMATRIX:
    case IR_WGMMA:
    case IR_CALL: break;
    }
    return c;
}

/* A symbol for a loop of blocks (never set from outside: its loop sets it). */
static uint32_t new_block_symbol(Sched *s) {
    IrProgram *ir = s->ir;
    IrSymbol *grown = arena_alloc(ir->arena, (ir->symbol_count + 1) * sizeof *grown);
    memcpy(grown, ir->symbols, ir->symbol_count * sizeof *grown);
    grown[ir->symbol_count] = (IrSymbol){.name = arena_printf(ir->arena, "block#%u", ir->symbol_count), .range = INT64_MAX};
    ir->symbols = grown;
    return ir->symbol_count++;
}

/* A reduction nest `st` about to be run in blocks of its reduction: when its cells start from
 * a constant, a nest of its own stores that first (the blocks then start from the cell). */
static void store_initial_values(Sched *s, const IrStmt *st, const Reduction *r, IrBlock *out) {
    if (r->init->value->kind != IR_CONST) return;
    IrStmt *top = NULL, *into = NULL;
    for (uint32_t k = 0; k < r->npar; k++) {
        IrStmt *l = new_loop(s, r->par[k]->iter, r->par[k]->extent, true, LOOP_PLAIN);
        if (into) ir_block_push(s->ir->arena, &into->body, l);
        else top = l;
        into = l;
    }
    ir_block_push(s->ir->arena, &into->body, new_store(s, r->store->buffer, r->store->index, r->init->value));
    top->comment = st->comment;
    schedule_stmt(s, top, NULL, 0, out);
}

static bool strip_mine(Sched *s, IrStmt *st, IrBlock *out) {
    const IrProgram *ir = s->ir;
    IrStmt *run = NULL;
    if (runtime_loops(st, &run) != 1 || run->mode != LOOP_PLAIN || !stmt_blockable(ir, st, run->iter)) return false;
    Reduction r;
    bool reduction = !run->parallel && match_reduction(st, &r) && init_is_plain(ir, &r);
    for (uint32_t k = 0; reduction && k < r.npar; k++) reduction = r.par[k] != run;
    if (!(run == st && st->parallel) && !reduction) return false;
    if (reduction) store_initial_values(s, st, &r, out);
    for (uint32_t level = 0; level < sizeof runtime_blocks / sizeof *runtime_blocks; level++) {
        uint32_t symbol = new_block_symbol(s);
        IrStmt *blocks = new_loop(s, new_iter(s), run->extent, run->parallel, LOOP_BLOCKS);
        blocks->block = runtime_blocks[level];
        blocks->block_after = level ? runtime_blocks[level - 1] : 0;
        blocks->block_symbol = symbol;
        IrStmt *nest = blocked_stmt(s, st, run->iter, ir->symbols[symbol].name, blocks->block,
                                    reduction ? r.init : NULL, reduction ? r.store : NULL);
        blocks->comment = level ? NULL : st->comment;
        nest->comment = NULL;
        schedule_stmt(s, nest, NULL, 0, &blocks->body);
        ir_block_push(s->ir->arena, out, blocks);
    }
    return true;
}

/* ---- Splitting a long reduction (docs/ir.md §5.3) ----------------------------------------------------
 *
 * A register-tiled contraction reads its whole broadcast operand A once per panel of B (rewrite
 * 1: the panel stays in L2, the rows of A stream past it).  When the part of A that the nest
 * reads is larger than the cache can be counted on to hold (Target.stream_bytes: an f64 matmul
 * at n = 2048 reads 32 MiB of A per panel), each panel's pass comes from memory, and the tiles
 * wait on it.  So do they when one panel (NR lanes over the whole reduction) is more than half
 * of L2 and more than one row block reads it (GPT-2's output head's input gradient, reduced
 * over 50 304 tokens: a panel of 12.9 MB, 3.2 MB in the 4 blocks the rows alone asked for).
 * The outermost reduction loop is then split into m blocks of K/m steps (the smallest m that
 * divides its K and brings the rows and the panel under their budgets, blocks of at least 128
 * steps): a LOOP_BLOCKS loop over blocks of compile-time extent whose symbol S adds to the
 * axes that loop walks, as strip-mining does (§5.2), around the nest over one block, which
 * rewrite 1 tiles as any.  The cells' initial value, when a constant, is stored first by a
 * nest of its own, and each block goes on from the cells the blocks before it left: every cell
 * takes the same steps in the same order, rounded to its own type in between as its tile is, so
 * the result is the same bits.  The block's nest takes no epilogue (the next nest reads C). */
static bool split_reduction(Sched *s, IrStmt *st, const Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    Contraction ct;
    if (!find_contraction(ir, r, &ct, true, s->lanes)) return false;
    IrStmt *red = r->red[0];
    double a_cells = (double)ct.i_loop->extent * (double)ct.k;
    for (uint32_t k = 0; k < ct.nbatch; k++)
        if (mentions(ir, ct.a->buffer, ct.a->index, ct.batch[k]->iter)) a_cells *= (double)ct.batch[k]->extent;
    double a_bytes = a_cells * ir_dtype_bytes(ir->buffers[ct.a->buffer].dtype);
    uint64_t w, nv;
    tile_columns(s, ct.j_loop->extent, &w, &nv);
    double panel_bytes = (double)(w * nv) * (double)ct.k * ir_dtype_bytes(ir->buffers[ct.b->buffer].dtype);
    double panel_budget = ct.i_loop->extent > s->target->tile_rows ? (double)s->target->l2_bytes / 2 : INFINITY;
    if ((a_bytes <= (double)s->target->stream_bytes && panel_bytes <= panel_budget) || size_is_runtime(red->extent) ||
        !stmt_blockable(ir, st, red->iter))
        return false;
    uint64_t blocks = 2;
    while (blocks <= red->extent / 128 && (red->extent % blocks || a_bytes / (double)blocks > (double)s->target->stream_bytes ||
                                           panel_bytes / (double)blocks > panel_budget))
        blocks++;
    if (blocks > red->extent / 128) return false;
    store_initial_values(s, st, r, out);
    uint32_t symbol = new_block_symbol(s);
    IrStmt *loop = new_loop(s, new_iter(s), red->extent, false, LOOP_BLOCKS);
    loop->block = (uint32_t)(red->extent / blocks);
    loop->block_symbol = symbol;
    IrStmt *nest = blocked_stmt(s, st, red->iter, ir->symbols[symbol].name, loop->block, r->init, r->store);
    bool rows = a_bytes > (double)s->target->stream_bytes, panels = panel_bytes > panel_budget;
    loop->comment = arena_printf(s->ir->arena, "%s%sschedule: the reduction in %llu blocks of %u steps, each block's "
                                 "%s%s%s%s%s kept in cache", st->comment ? st->comment : "", st->comment ? "; " : "",
                                 (unsigned long long)blocks, loop->block, rows ? "rows of " : "",
                                 rows ? ir->buffers[ct.a->buffer].name : "", rows && panels ? " and " : "",
                                 panels ? "panels of " : "", panels ? ir->buffers[ct.b->buffer].name : "");
    nest->comment = NULL;
    schedule_stmt(s, nest, NULL, 0, &loop->body);
    ir_block_push(s->ir->arena, out, loop);
    return true;
}

/* ---- Half-type contractions through f32 copies (CPU) --------------------------------------------
 *
 * A contraction that reads or writes bf16 or f16 cells (docs/ir.md §2.10) runs as the f32
 * contraction it is: each half buffer it reads is first widened into an f32 copy of the same
 * shape (a plain nest, exact), the contraction reads the copies and stores into an f32 copy of
 * its result, which a plain nest then rounds into the result.  The contraction itself touches
 * f32 cells only, so rewrite 1 tiles it; its cells start from the same values, take the same
 * steps in f32 and are rounded once when stored, as the canonical nest rounds them, so the bits
 * are the same.  The copies cost a pass over each operand, against a contraction's product of
 * sizes.  Nests of run-time size, gathers and i32 arithmetic are left as they are. */

/* An f32 buffer of the shape of half buffer `of`, private to the schedule. */
static uint32_t f32_twin(Sched *s, uint32_t of) {
    return ir_twin(s->ir, of, DTYPE_F32, arena_printf(s->ir->arena, "%s.f32#s%u", s->ir->buffers[of].name, s->scratch++));
}

/* The nest `to[i…] = from[i…]` over every cell of two buffers of one shape. */
static IrStmt *copy_nest(Sched *s, uint32_t to, uint32_t from) {
    const IrBuffer *b = &s->ir->buffers[from];
    uint32_t rank = b->rank;
    IrIndex *index = arena_alloc(s->ir->arena, rank * sizeof *index);
    IrStmt *outer = NULL, *inner = NULL;
    for (uint32_t d = 0; d < rank; d++) {
        IrStmt *loop = new_loop(s, new_iter(s), s->ir->buffers[from].dims[d], true, LOOP_PLAIN);
        IrTerm term = {loop->iter, 1};
        index[d] = *flat_index(s, &term, 1);
        if (inner) ir_block_push(s->ir->arena, &inner->body, loop);
        else outer = loop;
        inner = loop;
    }
    ir_block_push(s->ir->arena, &inner->body, new_store(s, to, index, new_load(s, from, index)));
    return outer;
}

/* The nest `to[index] = from[index]` over the cells reduction r stores (its parallel loops,
 * with new iterators; its store's index): the rounding of its f32 twin into a half result.  Only
 * those cells: a padded or concatenated axis is written by several nests, each a region of it,
 * and a copy of the whole twin put the zeros of the other regions over what they wrote. */
static IrStmt *copy_stored_cells(Sched *s, const Reduction *r, uint32_t to, uint32_t from) {
    reset_subst(s);
    IrStmt *outer = NULL, *inner = NULL;
    for (uint32_t k = 0; k < (r->npar ? r->npar : 1); k++) { /* no parallel loop: one of extent 1 */
        IrStmt *loop = new_loop(s, new_iter(s), r->npar ? r->par[k]->extent : 1, true, LOOP_PLAIN);
        if (r->npar) map_iter(s, r->par[k]->iter, affine1(loop->iter, 1, 0));
        if (inner) ir_block_push(s->ir->arena, &inner->body, loop);
        else outer = loop;
        inner = loop;
    }
    uint32_t rank = s->ir->buffers[to].rank;
    IrIndex *at = clone_index(s, r->store->index, rank), *again = clone_index(s, r->store->index, rank);
    ir_block_push(s->ir->arena, &inner->body, new_store(s, to, at, new_load(s, from, again)));
    reset_subst(s);
    return outer;
}

/* Loads of half buffers in e read their f32 twins (twin[buffer], made and filled before the
 * nest on first meeting: `before`). */
static void read_twins(Sched *s, IrExpr *e, uint32_t *twin, IrBlock *before) {
    if (e->kind == IR_LOAD && ir_dtype_half(s->ir->buffers[e->buffer].dtype)) {
        if (twin[e->buffer] == UINT32_MAX) {
            twin[e->buffer] = f32_twin(s, e->buffer);
            IrStmt *copy = copy_nest(s, twin[e->buffer], e->buffer);
            copy->comment = arena_printf(s->ir->arena, "schedule: widen %s into f32 for the reduction",
                                         s->ir->buffers[e->buffer].name);
            ir_block_push(s->ir->arena, before, copy);
        }
        e->buffer = twin[e->buffer];
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) read_twins(s, e->args[i], twin, before);
}

/* Whether e loads a buffer of run-time size. */
static bool reads_dynamic(const IrProgram *ir, const IrExpr *e) {
    if (e->kind == IR_LOAD && ir_buffer_dynamic(&ir->buffers[e->buffer])) return true;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (reads_dynamic(ir, e->args[i])) return true;
    return false;
}

/* Rewrites reduction `st` (a canonical reduction nest) that touches half cells to accumulate
 * in f32: a half result gets an f32 twin (widened from it first when the initial value reads
 * it), rounded into the result by a nest after it; a contraction also reads f32 twins of its
 * half operands (rewrite 1's tiles and panels are of f32 cells), unless its tiles take bf16
 * pairs (tile_pairs), while any other reduction (a bias gradient's sum over rows, a layer norm's
 * statistics) reads its half operands as they are, for rewrites 2 and 2b to accumulate in the
 * twin.  The copies in go to `before`, the rounding to `after`.  Returns whether it did. */
static bool reduce_in_f32(Sched *s, IrStmt *st, IrBlock *before, IrBlock *after) {
    const IrProgram *ir = s->ir;
    Reduction r;
    Contraction ct;
    IrStmt *run = NULL;
    if (st->kind != IR_LOOP || !ir_stmt_half(ir, st) || ir_stmt_gathers(ir, st) || ir_stmt_integer(st) ||
        ir_stmt_untiled_types(ir, st) || runtime_loops(st, &run) || !match_reduction(st, &r))
        return false;
    bool contraction = find_contraction(ir, &r, &ct, true, 0);
    uint32_t c = r.store->buffer;
    if (ir_buffer_dynamic(&ir->buffers[c]) || reads_dynamic(ir, r.init->value) || reads_dynamic(ir, r.step->value))
        return false;
    if (!contraction && ir_expr_loads(ir, r.step->value, c)) return false; /* the step reads the result */
    uint32_t *twin = arena_alloc(s->ir->arena, (s->ir->buffer_count + 1) * sizeof *twin);
    for (uint32_t b = 0; b < s->ir->buffer_count; b++) twin[b] = UINT32_MAX;
    read_twins(s, r.init->value, twin, before);
    if (contraction && !tile_pairs(s, &ct)) read_twins(s, r.step->value, twin, before); /* pairs read bf16 panels */
    if (ir_dtype_half(ir->buffers[c].dtype)) {
        uint32_t result = twin[c] != UINT32_MAX ? twin[c] : f32_twin(s, c);
        IrStmt *round = copy_stored_cells(s, &r, c, result);
        r.store->buffer = result;
        round->comment = arena_printf(s->ir->arena, "schedule: round the reduction's f32 cells into %s",
                                      ir->buffers[c].name);
        ir_block_push(s->ir->arena, after, round);
    }
    return true;
}

static void schedule_function(Sched *s) {
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *st = fn->body.items[i];
        IrStmt *run = NULL;
        IrBlock rounding = {0};
        if (reduce_in_f32(s, st, &body, &rounding)) { /* the copies in are in body now */
            /* the rounding into the half result becomes the tiles' epilogue where it can (its
             * loops' iterators are new: the substitution table must cover them) */
            cover_new_iters(s);
            uint32_t fused = schedule_stmt(s, st, rounding.items, rounding.count, &body);
            for (uint32_t k = fused; k < rounding.count; k++) ir_block_push(s->ir->arena, &body, rounding.items[k]);
            continue;
        }
        if (sched_keeps_lowered(s, st)) { /* indices that data chooses, i32 arithmetic:
                                            * plain loops, as lowered */
            /* but a large bf16 or f16 result written by whole vectors still streams around the
             * caches (rewrite 3: its cells converted in registers, cg_llvm.c) */
            if (s->target->kind != TARGET_CUDA && st->kind == IR_LOOP && ir_stmt_half(s->ir, st) &&
                !ir_stmt_gathers(s->ir, st) && !ir_stmt_integer(st) && !ir_stmt_untiled_types(s->ir, st) &&
                !runtime_loops(st, &run)) {
                s->cell_bytes = 4;
                s->lanes = s->target->vector_floats;
                stream_pointwise(s, st);
            }
            ir_block_push(s->ir->arena, &body, st);
            continue;
        }
        if (runtime_loops(st, &run)) {
            if (!strip_mine(s, st, &body)) ir_block_push(s->ir->arena, &body, st);
            continue;
        }
        i += schedule_stmt(s, st, fn->body.items + i + 1, fn->body.count - i - 1, &body);
    }
    fn->body = body;
    share_packing(s);
    fuse_pointwise(s);
}

void schedule(IrProgram *ir, const Target *target) {
    for (uint32_t f = 0; f < ir->function_count; f++) {
        Sched s = {.ir = ir, .fn = &ir->functions[f], .target = target, .outer_cells = 1};
        /* The substitution tables cover the iterators the function had before scheduling. */
        s.old_iters = s.fn->iter_count;
        s.subst = calloc(s.old_iters + 1, sizeof *s.subst);
        s.mapped = calloc(s.old_iters + 1, sizeof *s.mapped);
        if (!s.subst || !s.mapped) diag_fatal_oom();
        if (target->kind == TARGET_CUDA) schedule_gpu_function(&s);
        else schedule_function(&s);
        free(s.subst);
        free(s.mapped);
    }
    if (target->kind == TARGET_CUDA) {
        schedule_gpu(ir, target);
        for (uint32_t f = 0; f < ir->function_count; f++) kernel_order(ir, &ir->functions[f], target);
    } else {
        local_cells(ir);
    }
}
