/* sched_block.c — the machinery that the GPU's block kernels share (sched_block.h): which tile,
 * grid and split a block kernel takes for a contraction (plan_blocks, rewrite 6s below), the
 * loop over its reduction with panels through registers (k_loop), the loops and barriers of
 * its phases, and how its cells start and are stored, whole or as a part of a split
 * reduction that a nest after the kernel adds up.
 *
 * Requires: a Sched over a function scheduled for a GPU target (sched_gpu.c). */
#include "sched/sched_block.h"

#include <string.h>

/* The block tiles tried, largest first: cells a block along I and J (a thread: a sixteenth). */
static const uint32_t block_tiles[] = {128, 64};

/* Appends iter·coef to a (nothing for UINT32_MAX). */
void affine_add(Affine *a, uint32_t iter, int64_t coef) {
    if (iter != UINT32_MAX) a->terms[a->count++] = (IrTerm){iter, coef};
}

/* The place along the reduction of step kk + k_offset of panel kt (UINT32_MAX: the first) of
 * `step` steps, in a block's part of a split reduction. */
Affine k_place(Affine kk, uint32_t kt, uint64_t step, int64_t k_offset, const Split *split) {
    kk.offset += k_offset;
    affine_add(&kk, kt, (int64_t)step);
    if (!split->outer) affine_add(&kk, split->iter, (int64_t)split->steps);
    return kk;
}

/* For a split of the outermost reduction loop, its iterator in the block's part (after the
 * fetch's other mappings). */
void map_outer_part(Sched *s, const Split *split) {
    if (split->outer)
        map_iter(s, split->outer_iter, (Affine){.terms = {{split->iter, (int64_t)split->steps}, {split->part_iter, 1}}, .count = 2});
}

IrStmt *unrolled(Sched *s, IrBlock *into, uint32_t *iter, uint64_t extent, bool parallel) {
    *iter = new_iter(s);
    IrStmt *l = new_loop(s, *iter, extent, parallel, LOOP_UNROLL);
    ir_block_push(s->ir->arena, into, l);
    return l;
}

IrStmt *push_barrier(Sched *s, IrBlock *into) {
    IrStmt *b = arena_alloc(s->ir->arena, sizeof *b);
    *b = (IrStmt){.kind = IR_BARRIER};
    ir_block_push(s->ir->arena, into, b);
    return b;
}

/* The loops over r's outer reduction loops (a split's part loop for the outermost where the
 * split is of it), in `blk`; returns the innermost body (blk where there are none). */
IrBlock *outer_reduction_loops(Sched *s, IrBlock *blk, const Reduction *r, const Split *split) {
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
uint64_t part_steps(const Reduction *r, const Split *split) {
    return split->iter != UINT32_MAX && !split->outer ? split->steps : r->red[r->nred - 1]->extent;
}

void k_loop(Sched *s, IrBlock *blk, const KLoop *kl) {
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
 * partial results, each started from 0, into a buffer of partial results, part p's at
 * p·|C| + the cell's flat offset in C.  A function's splits take POOL_TURNS buffers in
 * turn (each as large as the largest split that takes it): neighbouring split products — a
 * transformer's q, k and v projections of one input — write different buffers, so nothing
 * orders them but their data, and the kernels' outlining runs them side by side (kernel.c);
 * with one buffer each waited for the previous one's sums.  A pointwise nest after the kernel then makes each cell
 * init + part 0 + part 1 + … in that order.  The sums are added in another order than the
 * reference's, so this is --reassociate's, as block reductions (rewrite 7) are. */

enum { SPLIT_MIN_STEPS = 64, SPLIT_LONG_STEPS = 4096 };

static void grid_add(Grid *g, uint32_t iter, uint64_t extent) {
    g->iter[g->count] = iter;
    g->extent[g->count++] = extent;
}

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
 * false where none fits.  The tiles are square, the largest that fits first, or (`wide`, for
 * sm_90a's warpgroups: sched_mma.c) 128 or 64 cells along I and 256 along J.  The grid's axes are
 * those of more than one block: along J, along I, the batch loops (innermost first), the
 * split's parts — at most three. */
bool plan_blocks(Sched *s, const Reduction *r, const Contraction *ct, uint64_t step, bool wide, BlockPlan *plan) {
    uint64_t m = ct->i_loop->extent, n = ct->j_loop->extent, batch = 1;
    for (uint32_t k = 0; k < ct->nbatch; k++) {
        if (ct->batch[k]->extent > MAX_GRID_YZ) return false;
        batch *= ct->batch[k]->extent;
    }
    if (ct->nbatch > 2 || r->red[r->nred - 1]->extent % step) return false;
    for (size_t t = 0; t < sizeof block_tiles / sizeof *block_tiles; t++) {
        uint32_t tile = block_tiles[t], tile_j = wide ? WIDE_TILE_J : tile;
        if (m % tile || n % tile_j || m / tile > MAX_GRID_YZ) continue;
        uint64_t blocks = batch * (m / tile) * (n / tile_j);
        unsigned dims = (n > tile_j) + (m > tile) + ct->nbatch;
        if (dims > 3) continue;
        bool outer = false;
        uint32_t parts = blocks >= s->target->gpu_blocks ? 1 : split_parts(s, r, blocks, dims, step, &outer);
        if (blocks * parts < s->target->gpu_blocks) continue;
        *plan = (BlockPlan){.tile = tile, .tile_j = tile_j, .bi = m > tile ? new_iter(s) : UINT32_MAX,
                            .bj = n > tile_j ? new_iter(s) : UINT32_MAX, .split = {.iter = UINT32_MAX, .parts = parts, .partials = UINT32_MAX}};
        if (plan->bj != UINT32_MAX) grid_add(&plan->grid, plan->bj, n / tile_j);
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

/* ---- The order of a large grid's tiles ---------------------------------------------------------------- *
 *
 * A grid of row tiles (bi, y) × column tiles (bj, x) starts its blocks x first: a wave of the
 * GPU's blocks takes a few rows of tiles across every column, so it reads a few panels of A
 * and the whole of B, which (n = 8192 in bf16: 128 MB) the 50 MB of an H100's L2 cannot keep
 * from one row of tiles to the next — at n = 4096 B fits, and the warpgroup kernels ran at
 * 0.78× cuBLAS there against 0.64× at 8192.  Here, where the grid is exactly those two loops
 * (no batch, no split) with at least GROUP_MIN_WAVES waves of Target.gpu_blocks blocks and at
 * least 2 columns, the tiles run in groups of G rows (G the largest of GROUP_ROWS_MOST, 4 and 2
 * that leaves at least two groups and divides the rows): x the row tile within its group (ii),
 * y the column tile, z the group (g), bi = G·g + ii, so that a wave takes G rows across a few
 * columns, and each panel of B it reads serves G tiles in a row (as CUTLASS's and Triton's
 * grouped orders do).  Which block computes which tile changes, not what any tile computes. */

enum { GROUP_ROWS_MOST = 8, GROUP_MIN_WAVES = 4 };

/* A tile row `from` and what replaces it: group·g + ii. */
typedef struct Regroup {
    uint32_t from, g, ii;
    int64_t group;
} Regroup;

static void regroup_expr(Sched *s, IrExpr *e, const Regroup *rg);

/* In index[0 … rank), the tile row replaced. */
static void regroup_index(Sched *s, IrIndex *index, uint32_t rank, const Regroup *rg) {
    for (uint32_t a = 0; a < rank; a++) {
        IrIndex *x = &index[a];
        if (x->gather) regroup_expr(s, x->gather, rg);
        for (uint32_t t = 0; t < x->term_count; t++) {
            if (x->terms[t].iter != rg->from) continue;
            IrTerm *terms = arena_alloc(s->ir->arena, (x->term_count + 1) * sizeof *terms);
            memcpy(terms, x->terms, x->term_count * sizeof *terms);
            terms[x->term_count] = (IrTerm){rg->g, terms[t].coef * rg->group};
            terms[t].iter = rg->ii;
            x->terms = terms;
            x->term_count++;
            break;
        }
    }
}

static void regroup_expr(Sched *s, IrExpr *e, const Regroup *rg) {
    if (e->kind == IR_LOAD || e->kind == IR_RANDOM) regroup_index(s, e->index, s->ir->buffers[e->buffer].rank, rg);
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) regroup_expr(s, e->args[i], rg);
}

static void regroup_block(Sched *s, IrBlock *b, const Regroup *rg) {
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *st = b->items[i];
        if (st->kind == IR_LOOP) regroup_block(s, &st->body, rg);
        if (st->kind == IR_STORE) regroup_index(s, st->index, s->ir->buffers[st->buffer].rank, rg);
        if ((st->kind == IR_STORE || st->kind == IR_SET_LOCAL) && st->value) regroup_expr(s, st->value, rg);
    }
}

const char *group_tile_rows(Sched *s, const BlockPlan *plan, IrStmt *top) {
    const Grid *grid = &plan->grid;
    if (grid->count != 2 || grid->iter[0] != plan->bj || grid->iter[1] != plan->bi || plan->split.iter != UINT32_MAX)
        return "";
    uint64_t rows = grid->extent[1], columns = grid->extent[0], group = GROUP_ROWS_MOST;
    while (group >= 2 && (rows % group || rows / group < 2)) group /= 2;
    if (group < 2 || columns < 2 || columns > MAX_GRID_YZ || rows * columns < (uint64_t)GROUP_MIN_WAVES * s->target->gpu_blocks)
        return "";
    /* top: for bi < rows (block.y) { for bj < columns (block.x) { body } } becomes
     * for g < rows/group (block.z) { for bj (block.y) { for ii < group (block.x) { body } } } */
    IrStmt *column = top->body.count == 1 ? top->body.items[0] : NULL;
    if (!column || column->kind != IR_LOOP || column->iter != plan->bj || top->iter != plan->bi) return "";
    uint32_t g = new_iter(s), ii = new_iter(s);
    IrStmt *inner = new_loop(s, ii, group, true, LOOP_BLOCK_X);
    inner->body = column->body;
    column->body = (IrBlock){0};
    ir_block_push(s->ir->arena, &column->body, inner);
    column->mode = LOOP_BLOCK_Y;
    top->iter = g;
    top->extent = rows / group;
    top->mode = LOOP_BLOCK_Z;
    regroup_block(s, &inner->body, &(Regroup){plan->bi, g, ii, (int64_t)group});
    return arena_printf(s->ir->arena, ", tiles in groups of %u rows", (unsigned)group);
}

/* The grid's block loops; returns the outermost, *body the innermost's body. */
IrStmt *grid_loops(Sched *s, const Grid *g, IrBlock **body) {
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

/* The store of a block kernel's cell (C's index mapped onto the thread's cell): into C, or into
 * the partial results of the block's part (the split's buffer, taken here). */
IrStmt *block_cell_store(Sched *s, const Reduction *r, Split *split, IrExpr *value) {
    uint32_t c = r->store->buffer;
    IrIndex *index = clone_index(s, r->store->index, s->ir->buffers[c].rank);
    if (split->iter == UINT32_MAX) return new_store(s, c, index, value);
    if (split->partials == UINT32_MAX) split->partials = pool_take(s, &s->split_partials, "partials", (uint64_t)split->parts * s->ir->buffers[c].size);
    return new_store(s, split->partials, partial_index(s, c, index, split, -1), value);
}

/* A cell's value where a kernel starts: its initial value, or 0 for a part of a split. */
IrExpr *block_cell_start(Sched *s, const Reduction *r, const Split *split) {
    return split->iter == UINT32_MAX ? clone_expr(s, r->init->value, NULL) : new_const(s, 0, DTYPE_F32);
}

/* A block kernel (its grid's loops, `top`) into `out`, its comment the nest's followed by
 * "; schedule: " and `schedule`; for a split, the nest that adds the parts after it. */
void push_block_kernel(Sched *s, const Reduction *r, IrStmt *top, const Split *split, const char *schedule,
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
        value = new_op(s, SOP_ADD, value, new_load(s, split->partials, partial_index(s, c, r->store->index, split, p)), NULL);
    ir_block_push(s->ir->arena, at, new_store(s, c, clone_index(s, r->store->index, s->ir->buffers[c].rank), value));
    first->comment = arena_printf(s->ir->arena, "%s; schedule: the %u parts of the split reduction added", what, split->parts);
}
