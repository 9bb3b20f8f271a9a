/* sched_tile.c — rewrite 1 of the CPU schedule: a contraction becomes register-tiled kernels
 * over packed operands (sched.c's paragraph says what the tiles and panels are; docs/ir.md §5).
 * find_contraction() recognises the step `l = fma(x, y, l)` with its lanes J (stride 1 in C and
 * in B only) and rows I; the packing nests copy B into panels and A into row blocks (transposed
 * in registers, grouped, or read in place when the layout already suits); tile_contraction()
 * builds the MR×NR register tiles over them, with the fused epilogue of the pointwise nests after
 * it that read C, and then each the one before's result, cell by cell (find_epilogue's stages).
 * Every cell takes the same steps in the same order as in the canonical nest, so results are
 * bit-identical.  Two bf16 operands on a Target with
 * bf16_pairs (tile_pairs) are packed in pairs of reduction steps, with a count of tiny values
 * per block, for LOOP_DOT_PAIRS tiles that native code runs on VDPBF16PS (docs/ir.md §5.4).
 *
 * Requires: nest.c's tools; the tile sizes of the Target (target.c). */
#include "sched/sched_internal.h"

#include <string.h>

/* ---- Rewrite 1: register-tiled contractions -------------------------------------------------------- */

/* The loop I for lanes J: the innermost other parallel loop that walks C and A but not B. */
static IrStmt *find_rows(const IrProgram *ir, const Reduction *r, const Contraction *ct) {
    for (uint32_t in = r->npar; in-- > 0;) {
        uint32_t i = r->par[in]->iter;
        if (r->par[in] == ct->j_loop) continue;
        if (ir_flat_coef(ir, ct->c, r->store->index, i) != 0 && mentions(ir, ct->a->buffer, ct->a->index, i) &&
            !mentions(ir, ct->b->buffer, ct->b->index, i))
            return r->par[in];
    }
    return NULL;
}

/* `allow_add`: also a step l + x·y (rounded twice, as a program may write it).
 * `narrow` (0: never): when the loop that walks C with stride 1 has fewer cells than that (a
 * convolution's kernel gradient over 6 input channels) and the reduction is long, a loop of at
 * least twice as many cells that walks its operand with stride 1 gives the lanes instead: the
 * tile then stores its cells lane by lane, once per `ct->k` steps (strided_lanes). */
bool find_contraction(const IrProgram *ir, const Reduction *r, Contraction *ct, bool allow_add,
                      uint64_t narrow) {
    memset(ct, 0, sizeof *ct);
    ct->r = r;
    ct->c = r->store->buffer;
    const IrExpr *v = r->step->value;
    if (r->npar < 2 || r->nred == 0 || !init_is_plain(ir, r) || v->kind != IR_OP) return false;
    const IrExpr *x, *y;
    if (v->op == SOP_FMA) {
        if (v->args[2]->kind != IR_LOCAL || v->args[2]->local != r->local) return false;
        x = v->args[0], y = v->args[1];
    } else if (allow_add && v->op == SOP_ADD) {
        ct->add = true;
        ct->acc_first = v->args[0]->kind == IR_LOCAL && v->args[0]->local == r->local;
        const IrExpr *acc = v->args[ct->acc_first ? 0 : 1], *prod = v->args[ct->acc_first ? 1 : 0];
        if (acc->kind != IR_LOCAL || acc->local != r->local || prod->kind != IR_OP || prod->op != SOP_MUL) return false;
        x = prod->args[0], y = prod->args[1];
    } else {
        return false;
    }
    if (x->kind != IR_LOAD || y->kind != IR_LOAD || x->buffer == ct->c || y->buffer == ct->c) return false;
    for (uint32_t jn = r->npar; jn-- > 0 && !ct->j_loop;) {
        uint32_t j = r->par[jn]->iter;
        if (ir_flat_coef(ir, ct->c, r->store->index, j) != 1) continue;
        bool in_x = mentions(ir, x->buffer, x->index, j), in_y = mentions(ir, y->buffer, y->index, j);
        if (in_x == in_y) continue;
        ct->j_loop = r->par[jn];
        ct->b = in_x ? x : y;
        ct->a = in_x ? y : x;
        ct->b_first = in_x;
    }
    if (!ct->j_loop) return false;
    ct->k = 1;
    for (uint32_t k = 0; k < r->nred; k++) ct->k *= r->red[k]->extent;
    ct->i_loop = find_rows(ir, r, ct);
    if (narrow && ct->j_loop->extent < narrow && ct->k >= 256) {
        Contraction alt = *ct;
        for (uint32_t jn = r->npar; jn-- > 0;) {
            IrStmt *lj = r->par[jn];
            if (lj == ct->j_loop || lj->extent < 2 * ct->j_loop->extent ||
                ir_flat_coef(ir, ct->c, r->store->index, lj->iter) == 0)
                continue;
            bool in_x = ir_flat_coef(ir, x->buffer, x->index, lj->iter) == 1 && !mentions(ir, y->buffer, y->index, lj->iter);
            bool in_y = ir_flat_coef(ir, y->buffer, y->index, lj->iter) == 1 && !mentions(ir, x->buffer, x->index, lj->iter);
            if (!in_x && !in_y) continue;
            alt.j_loop = lj, alt.b = in_x ? x : y, alt.a = in_x ? y : x, alt.b_first = in_x;
            if ((alt.i_loop = find_rows(ir, r, &alt))) {
                *ct = alt;
                ct->strided_lanes = true;
                break;
            }
        }
    }
    if (!ct->i_loop) return false;
    for (uint32_t k = 0; k < r->npar; k++)
        if (r->par[k] != ct->i_loop && r->par[k] != ct->j_loop) ct->batch[ct->nbatch++] = r->par[k];
    return true;
}

/* ---- Epilogues ---------------------------------------------------------------------------------------- */

/* The pointwise nests right after a contraction that read its result C cell by cell, in a chain
 * (stages): a bias, an activation, `logits =: b + w * h`, an update `w =- lr * w.grad`; then an
 * activation of that (`gelu (b + w * x)`: the bias's nest, then the GELU's).  Stage 0 reads C,
 * stage k the buffer that stage k−1 stores, each at the cell it stores.  The tile computes each
 * stage's cell from its own value, in order, instead of the stages' passes over memory.  A
 * buffer (C, or a stage's but the last's) that its next stage alone reads, and that is not
 * observable, needs no storage: the next stage reads the value itself; otherwise (`keep_c`,
 * `keep`) the tile stores it too and the next stage reads it back. */
#define MAX_EPILOGUE_STAGES 4

typedef struct EpilogueStage {
    IrStmt *nest;
    const IrStmt *store;           /* D[…] = f(…, S[cell], …), S: C or the stage before's D */
    uint32_t axis_iter[MAX_LOOPS]; /* per axis of S: the nest's iterator that walks it (UINT32_MAX: a size-one axis) */
    bool keep;                     /* D is stored (the last stage's always is) */
} EpilogueStage;

typedef struct Epilogue {
    EpilogueStage stage[MAX_EPILOGUE_STAGES];
    uint32_t count;
    bool keep_c; /* C is stored too */
} Epilogue;

static unsigned stmt_reads(const IrProgram *ir, const IrStmt *st, uint32_t buffer) {
    switch (st->kind) {
    case IR_LOOP: {
        unsigned n = 0;
        for (uint32_t i = 0; i < st->body.count; i++) n += stmt_reads(ir, st->body.items[i], buffer);
        return n;
    }
    case IR_STORE: return ir_expr_loads(ir, st->value, buffer);
    case IR_SET_LOCAL: return ir_expr_loads(ir, st->value, buffer);
    case IR_BARRIER: return 0;
    case IR_MMA: return st->mma.a == buffer || st->mma.b == buffer || st->mma.c == buffer;
    case IR_LDMATRIX: return st->ldmatrix.panel == buffer;
    case IR_WGMMA: return st->wgmma.a == buffer || st->wgmma.b == buffer || st->wgmma.c == buffer;
    case IR_CALL: return ir_call_touches(ir, st, buffer); /* the runtime reads it */
    }
    return 0;
}

/* Every load of `buffer` in e walks its axes with the iterators `axis_iter` (first use fills
 * them in); false for any other index. */
static bool loads_cellwise(const IrProgram *ir, const IrExpr *e, uint32_t buffer, uint32_t *axis_iter, bool *seen) {
    if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!loads_cellwise(ir, e->args[i], buffer, axis_iter, seen)) return false;
        return true;
    }
    if (e->kind != IR_LOAD || e->buffer != buffer) return true;
    const IrBuffer *b = &ir->buffers[buffer];
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *x = &e->index[a];
        uint32_t it = UINT32_MAX;
        if (x->symbol) return false;
        if (x->term_count == 1 && x->terms[0].coef == 1 && x->offset == 0) it = x->terms[0].iter;
        else if (x->term_count != 0 || x->offset != 0 || b->dims[a] != 1) return false;
        if (*seen && axis_iter[a] != it) return false;
        axis_iter[a] = it;
    }
    *seen = true;
    return true;
}

/* Whether `st` stores every cell of its buffer once over the loops `loops`: each axis is one of
 * them (a different one each), with the buffer's size, from 0, or a size-one axis at 0.
 * *walked counts the axes that a loop walks. */
static bool stores_each_cell(const IrProgram *ir, const IrStmt *st, IrStmt *const *loops, uint32_t nloops,
                             uint32_t *walked) {
    const IrBuffer *b = &ir->buffers[st->buffer];
    *walked = 0;
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *ix = &st->index[a];
        if (ix->symbol || ix->gather || ix->offset) return false;
        if (ix->term_count == 0) {
            if (b->dims[a] != 1) return false;
            continue;
        }
        if (ix->term_count != 1 || ix->terms[0].coef != 1) return false;
        bool full = false;
        for (uint32_t k = 0; k < nloops; k++)
            if (loops[k]->iter == ix->terms[0].iter) full = loops[k]->extent == b->dims[a];
        for (uint32_t c = 0; c < a; c++)
            if (st->index[c].term_count == 1 && st->index[c].terms[0].iter == ix->terms[0].iter) full = false;
        if (!full) return false;
        (*walked)++;
    }
    return true;
}

/* Whether the reduction stores every cell of C over its parallel loops.  A padded window's nests
 * each store a part of C (the border positions apart from the interior), and none of them may
 * take the epilogue: it would compute the next nest's cells only where that part lies. */
static bool stores_every_cell(const IrProgram *ir, const Reduction *r) {
    uint32_t walked;
    return stores_each_cell(ir, r->store, r->par, r->npar, &walked);
}

/* Whether the buffer needs storage though the epilogue computes its cells: it is observable,
 * or some statement of the program other than the one next stage reads it, or another writes
 * it.  (Another routine that computes the same tensor, whose own tile was scheduled first and
 * kept the buffer because this nest read it then, still stores it.) */
static bool needs_storage(const IrProgram *ir, uint32_t buffer) {
    const IrBuffer *b = &ir->buffers[buffer];
    unsigned readers = 0, writers = 0;
    for (uint32_t f = 0; f < ir->function_count; f++)
        for (uint32_t i = 0; i < ir->functions[f].body.count; i++) {
            readers += stmt_reads(ir, ir->functions[f].body.items[i], buffer) ? 1 : 0;
            writers += ir_stmt_writes(ir, ir->functions[f].body.items[i], buffer);
        }
    return b->keep || b->persistent || readers != 1 || writers != 1;
}

/* Whether `nest` rounds the f32 cells of `source` into a bf16 or f16 buffer, D[…] = S[…]: the
 * nest that reduce_in_f32 (sched.c) puts after a reduction of half cells accumulated in its f32
 * twin.  As an epilogue stage it is the last one (find_epilogue): the value it stores is not
 * the value it computes, so no stage may take that value on. */
static bool rounds_into_half(const IrProgram *ir, const IrStmt *nest, uint32_t source) {
    const IrStmt *st = nest;
    while (st->kind == IR_LOOP && st->body.count == 1) st = st->body.items[0];
    return st->kind == IR_STORE && st->value->kind == IR_LOAD && st->value->buffer == source &&
           ir->buffers[source].dtype == DTYPE_F32 && ir_dtype_half(ir->buffers[st->buffer].dtype);
}

/* Whether `nest` is a stage that reads `source` (C, or the stage before's buffer) cell by cell:
 * perfectly nested parallel loops around one store, whose loops are the source's axes one for
 * one with its sizes, and which reads its own buffer only at the cell it stores (an update in
 * place: running it tile by tile reads what it would have read).  Fills in the stage. */
static bool match_stage(const Sched *s, IrStmt *nest, uint32_t source, EpilogueStage *stage) {
    const IrProgram *ir = s->ir;
    const IrBuffer *sb = &ir->buffers[source];
    if (!nest || nest->kind != IR_LOOP || (sched_keeps_lowered(s, nest) && !rounds_into_half(ir, nest, source)) ||
        sb->rank > MAX_LOOPS)
        return false;
    memset(stage, 0, sizeof *stage);
    stage->nest = nest;
    const IrStmt *st = nest;
    const IrStmt *loops[MAX_LOOPS];
    uint32_t nloops = 0;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1 && nloops < MAX_LOOPS) {
        loops[nloops++] = st;
        st = st->body.items[0];
    }
    if (st->kind != IR_STORE || st->buffer == source || nloops == 0) return false;
    stage->store = st;
    bool seen = false;
    for (uint32_t a = 0; a < sb->rank; a++) stage->axis_iter[a] = UINT32_MAX;
    if (!loads_cellwise(ir, st->value, source, stage->axis_iter, &seen) || !seen) return false;
    uint32_t covered = 0;
    for (uint32_t a = 0; a < sb->rank; a++) {
        if (stage->axis_iter[a] == UINT32_MAX) continue;
        bool found = false;
        for (uint32_t k = 0; k < nloops; k++)
            if (loops[k]->iter == stage->axis_iter[a]) found = loops[k]->extent == sb->dims[a];
        for (uint32_t b = 0; b < a; b++) found &= stage->axis_iter[b] != stage->axis_iter[a];
        if (!found) return false;
        covered++;
    }
    return covered == nloops && loads_only_at(ir, st->value, st->buffer, st->index);
}

/* Whether a stage's store walks every cell of its buffer once (stores_each_cell over the nest's
 * loops), every loop an axis: the next stage then finds each cell it reads computed by the tile
 * at that cell. */
static bool stage_stores_every_cell(const IrProgram *ir, const EpilogueStage *stage) {
    IrStmt *loops[MAX_LOOPS];
    uint32_t nloops = 0, walked;
    for (IrStmt *l = stage->nest; l->kind == IR_LOOP && nloops < MAX_LOOPS; l = l->body.items[0]) loops[nloops++] = l;
    return stores_each_cell(ir, stage->store, loops, nloops, &walked) && walked == nloops;
}

/* Whether the chain so far (the contraction and stages 0 … n−1) leaves stage n's buffer D alone
 * and stage n reads nothing the chain writes but the stage before's buffer: then running stage n
 * cell by cell inside the tiles reads and writes what its own pass would have.  The tiles read
 * the operands A and B (in place or while packing panels), so D is neither. */
static bool stage_independent(const IrProgram *ir, const Contraction *ct, const Epilogue *ep, const EpilogueStage *stage) {
    uint32_t d = stage->store->buffer, n = ep->count;
    if (d == ct->c || d == ct->a->buffer || d == ct->b->buffer) return false;
    if (ir_expr_loads(ir, stage->store->value, ct->c)) return false;
    for (uint32_t k = 0; k < n; k++) {
        if (ep->stage[k].store->buffer == d || ir_expr_loads(ir, ep->stage[k].store->value, d)) return false;
        if (k + 1 < n && ir_expr_loads(ir, stage->store->value, ep->stage[k].store->buffer)) return false;
    }
    return true;
}

/* Stage 0 of the contraction's epilogue: `nest` reads C cell by cell, and the reduction stores
 * every cell of C (C's own size-one axes at 0). */
static bool first_stage(const Sched *s, const Reduction *r, IrStmt *nest, EpilogueStage *stage) {
    const IrProgram *ir = s->ir;
    uint32_t c = r->store->buffer;
    const IrBuffer *cb = &ir->buffers[c];
    if (!stores_every_cell(ir, r) || !match_stage(s, nest, c, stage)) return false;
    /* C is a tensor of the program, or the f32 twin of a half one (sched.c reduce_in_f32) */
    if (cb->kind != BUF_COMPUTED && !(cb->kind == BUF_SCRATCH && rounds_into_half(ir, nest, c))) return false;
    for (uint32_t a = 0; a < cb->rank; a++)
        if (stage->axis_iter[a] == UINT32_MAX && (r->store->index[a].term_count || r->store->index[a].offset)) return false;
    return true;
}

/* The chain of stages after the contraction among the statements `after` (ep->count: how many;
 * 0: none). */
static uint32_t find_epilogue(const Sched *s, const Contraction *ct, IrStmt *const *after, uint32_t after_count,
                              Epilogue *ep) {
    const IrProgram *ir = s->ir;
    memset(ep, 0, sizeof *ep);
    if (!after_count || !first_stage(s, ct->r, after[0], &ep->stage[0])) return 0;
    /* An f32 twin is read by its rounding alone, so it needs no storage, unless the reduction
     * adds into the cells it holds (`=+`: a copy of the half result fills it first). */
    ep->keep_c = ir->buffers[ct->c].kind == BUF_SCRATCH ? ir_expr_loads(ir, ct->r->init->value, ct->c)
                                                      : needs_storage(ir, ct->c);
    ep->count = 1;
    /* Further stages, while each reads the one before's buffer cell by cell (of the
     * contraction's element width: the tile's vectors are sized for it). */
    while (ep->count < MAX_EPILOGUE_STAGES && ep->count < after_count) {
        const EpilogueStage *prev = &ep->stage[ep->count - 1];
        EpilogueStage next;
        if (ir_dtype_half(ir->buffers[prev->store->buffer].dtype) || !stage_stores_every_cell(ir, prev) ||
            !match_stage(s, after[ep->count], prev->store->buffer, &next) ||
            ir_stmt_f64(ir, next.nest) != (s->cell_bytes == 8) || !stage_independent(ir, ct, ep, &next))
            break;
        ep->stage[ep->count++] = next;
    }
    for (uint32_t k = 0; k + 1 < ep->count; k++) ep->stage[k].keep = needs_storage(ir, ep->stage[k].store->buffer);
    ep->stage[ep->count - 1].keep = true;
    return ep->count;
}

/* The stores of one cell of the tile, at the current substitution, into `into`: C[cell] = T,
 * or with an epilogue each stage's D[…] = f(…, S[cell], …) in order, S's cell being T for
 * stage 0 and the stage before's value (its store read back, when it has storage) after it;
 * C, and each stage's buffer that needs no storage, are not stored. */
static void cell_stores(Sched *s, const Reduction *r, const Epilogue *ep, IrExpr *tile_value, IrBlock *into) {
    Arena *arena = s->ir->arena;
    uint32_t c = r->store->buffer, rank = s->ir->buffers[c].rank;
    IrIndex *cell = clone_index(s, r->store->index, rank);
    if (!ep || ep->keep_c) ir_block_push(arena, into, new_store(s, c, cell, tile_value));
    if (!ep) return;
    IrExpr *source_value = tile_value; /* NULL: the source is read back */
    for (uint32_t k = 0; k < ep->count; k++) {
        const EpilogueStage *stage = &ep->stage[k];
        const IrStmt *st = stage->store;
        uint32_t source = k ? ep->stage[k - 1].store->buffer : c;
        for (uint32_t a = 0; a < s->ir->buffers[source].rank; a++) {
            if (stage->axis_iter[a] == UINT32_MAX) continue;
            Affine af = {0};
            if (k) { /* where the stage before stored this axis */
                af = s->subst[ep->stage[k - 1].store->index[a].terms[0].iter];
            } else {
                af.offset = cell[a].offset;
                for (uint32_t t = 0; t < cell[a].term_count && af.count < 4; t++) af.terms[af.count++] = cell[a].terms[t];
            }
            map_iter(s, stage->axis_iter[a], af);
        }
        LocalRepl repl = {UINT32_MAX, NULL, source_value ? source : UINT32_MAX, source_value};
        IrExpr *value = clone_expr(s, st->value, &repl);
        if (stage->keep)
            ir_block_push(arena, into, new_store(s, st->buffer, clone_index(s, st->index, s->ir->buffers[st->buffer].rank), value));
        source_value = stage->keep ? NULL : value;
    }
}

typedef struct Terms {
    IrTerm items[MAX_TERMS];
    uint32_t count;
    int64_t offset;
} Terms;

static void add_term(Terms *t, uint32_t iter, int64_t coef) {
    if (t->count < MAX_TERMS) t->items[t->count++] = (IrTerm){iter, coef};
}

static IrIndex *terms_index(Sched *s, const Terms *t) {
    IrIndex *ix = flat_index(s, t->items, t->count);
    ix->offset = t->offset;
    return ix;
}

/* An operand copied into panels: for each of its batch cells and each block of `width` values
 * of its lane loop (J for B, I for A), the reduction cells in order, each a run of `width`
 * values adjacent in memory.  A last block that the lane loop does not fill is padded with
 * zeros (tiles compute those lanes and never store them). */
typedef struct Packed {
    uint32_t buffer;
    const IrExpr *operand;
    const IrStmt *lane_loop;
    uint64_t width, full, rem; /* full blocks, and the lanes of a last partial one (0: none) */
    uint64_t stride;           /* cells from one block to the next: K·width, and a cache line more
                                * where that is a multiple of 4 KiB (panel_stride) */
    bool batch[MAX_LOOPS];     /* which of ct->batch index the operand (and so the panels) */
    bool in_place;             /* the full blocks are read where the operand is (read_in_place);
                                * only a last partial block is packed */
    uint64_t first_packed;     /* the first block the buffer holds (pk->full when in_place) */
    /* Pairs of bf16 steps (tile_pairs): a block's reduction steps 2p and 2p+1 of each lane share
     * a 32-bit cell, step 2p in its high half, and `tiny` (an i32 cell per block) counts the
     * block's values that are nonzero and below 2^-56 in magnitude (LOOP_DOT_PAIRS, ir.h). */
    bool pairs;
    uint32_t tiny;
} Packed;

/* Σ batch·stride + (block + first)·cells, added to `t`: the first cell of a block of `cells`. */
static void block_terms(const Contraction *ct, const Packed *pk, const uint32_t *batch_iter, uint32_t block_iter,
                        uint64_t first, uint64_t cells, Terms *t) {
    uint64_t blocks = pk->full + (pk->rem != 0) - pk->first_packed;
    int64_t stride = (int64_t)(blocks * cells);
    for (uint32_t k = ct->nbatch; k-- > 0;) {
        if (!pk->batch[k]) continue;
        add_term(t, batch_iter[k], stride);
        stride *= (int64_t)ct->batch[k]->extent;
    }
    if (block_iter != UINT32_MAX) add_term(t, block_iter, (int64_t)cells);
    t->offset += (int64_t)((first - pk->first_packed) * cells);
}

/* Σ batch·stride + (panel + first)·(K·width) + (row-major reduction position)·width, added to
 * `t` (which holds the lane terms).  With pairs (Packed.pairs), red_iter's innermost counts
 * pairs and `pair_iter` (e < 2) the step in the pair, 2p + e: the lanes are 2 cells apart and
 * step 2p + e lies at 1 − e. */
static void panel_terms(const Contraction *ct, const Packed *pk, const uint32_t *batch_iter, uint32_t panel_iter,
                        uint64_t first, const uint32_t *red_iter, uint32_t pair_iter, Terms *t) {
    const Reduction *r = ct->r;
    if (pk->pairs) {
        for (uint32_t i = 0; i < t->count; i++) t->items[i].coef *= 2;
        t->offset *= 2;
    }
    block_terms(ct, pk, batch_iter, panel_iter, first, pk->stride, t);
    int64_t rs = (int64_t)pk->width;
    for (uint32_t k = r->nred; k-- > 0;) {
        if (pk->pairs && k == r->nred - 1) {
            add_term(t, red_iter[k], 2 * rs);
            add_term(t, pair_iter, -1);
            t->offset += 1;
        } else {
            add_term(t, red_iter[k], rs);
        }
        rs *= (int64_t)r->red[k]->extent;
    }
}

/* Append `loop` inside the nest being built (*top is its outermost loop, *into the body new
 * loops go in). */
void nest_push(Sched *s, IrStmt **top, IrBlock **into, IrStmt *loop) {
    if (*into) ir_block_push(s->ir->arena, *into, loop);
    else *top = loop;
    *into = &loop->body;
}

/* One loop per batch loop of the contraction (only those `only` marks, when given), each mapping
 * the batch iterator to its own; batch_iter[k] is the new iterator or UINT32_MAX. */
static void batch_loops(Sched *s, const Contraction *ct, const bool *only, uint32_t *batch_iter, IrStmt **top,
                        IrBlock **into) {
    for (uint32_t k = 0; k < ct->nbatch; k++) {
        batch_iter[k] = UINT32_MAX;
        if (only && !only[k]) continue;
        if (s->outer_batch) { /* inside the batch loops already (tile_contraction) */
            batch_iter[k] = s->outer_batch[k];
            map_iter(s, ct->batch[k]->iter, affine1(batch_iter[k], 1, 0));
            continue;
        }
        batch_iter[k] = new_iter(s);
        map_iter(s, ct->batch[k]->iter, affine1(batch_iter[k], 1, 0));
        nest_push(s, top, into, new_loop(s, batch_iter[k], ct->batch[k]->extent, true, LOOP_PLAIN));
    }
}

/* Whether a block of `lanes` lanes of `pk` is packed by transposing in registers: its operand
 * moves by one cell along the innermost reduction loop and by more along its lanes (the compose
 * form's weight, a transposed operand, the rows of A), so a plain copy would read one value per
 * row; it instead reads vectors along the reduction and transposes them (LOOP_TRANSPOSE). */
static bool pack_transposes(const Sched *s, const Contraction *ct, const Packed *pk, uint64_t lanes) {
    const Reduction *r = ct->r;
    const IrExpr *e = pk->operand;
    uint64_t w = s->lanes;
    if (w < 2 || r->red[r->nred - 1]->extent < w || lanes < 2) return false;
    if (ir_flat_coef(s->ir, e->buffer, e->index, r->red[r->nred - 1]->iter) != 1) return false;
    int64_t along = ir_flat_coef(s->ir, e->buffer, e->index, pk->lane_loop->iter);
    return along != 0 && along != 1 && (lanes <= w || lanes % w == 0);
}

/* The store of the copy P[…] = operand, at the current substitution: `t` holds the lane terms,
 * red_iter the iterators of the reduction position (the innermost may be UINT32_MAX when `t`
 * already holds its terms). */
static IrStmt *pack_store(Sched *s, const Contraction *ct, const Packed *pk, const uint32_t *batch_iter,
                          uint32_t panel, uint64_t first, const uint32_t *red_iter, Terms t) {
    panel_terms(ct, pk, batch_iter, panel, first, red_iter, UINT32_MAX, &t);
    return new_store(s, pk->buffer, terms_index(s, &t), clone_expr(s, pk->operand, NULL));
}

/* The largest divisor of `blocks` whose blocks of `width` lanes keep within 128 lanes (1 when
 * none does): the blocks a packing pass takes together (pack_group, pairs_group). */
static uint64_t blocks_within_128_lanes(uint64_t blocks, uint64_t width) {
    uint64_t group = 1;
    for (uint64_t g = 2; g <= blocks && g * width <= 128; g++)
        if (blocks % g == 0) group = g;
    return group;
}

/* Narrow blocks of an operand whose reduction steps are a page or more apart (A of a transposed
 * product, a[k, i], in rows of 6) are copied a group of blocks at a time, the group's loop
 * outside the reduction loops: one pass down the operand per group, reading up to 128 adjacent
 * values of each step, where a pass per block touches every page of the operand for 6 values (a
 * TLB miss per step).  The blocks of a group: blocks_within_128_lanes, or 1. */
static uint64_t pack_group(const Sched *s, const Contraction *ct, const Packed *pk, uint64_t blocks, uint64_t lanes) {
    const Reduction *r = ct->r;
    if (!pack_transposes(s, ct, pk, lanes) && lanes == pk->width &&
        ir_flat_coef(s->ir, pk->operand->buffer, pk->operand->index, pk->lane_loop->iter) == 1 &&
        ir_flat_coef(s->ir, pk->operand->buffer, pk->operand->index, r->red[r->nred - 1]->iter) *
                ir_dtype_bytes(s->ir->buffers[pk->operand->buffer].dtype) >= 4096)
        return blocks_within_128_lanes(blocks, pk->width);
    return 1;
}

/* One packing nest: for batch…, block < blocks (from block `first`), reduction…, lane < lanes:
 * P[…] = operand at lane loop = block·width + lane (or 0 for the padding lanes [lanes, width)),
 * `group` blocks a pass (pack_group; 1: a pass per block).  With `panel_iter` (UINT32_MAX:
 * none), the one block at that iterator of the caller's loop over blocks, inside it (a loop of
 * one holds the copy; `blocks` is 1 and `group` 1).
 * A transposing pack (pack_transposes) splits the innermost reduction loop into blocks of W (the
 * vector width) and the lanes into blocks of at most W, and copies each W×W block with one
 * LOOP_TRANSPOSE; the reduction cells past the last whole block are copied plainly. */
static IrStmt *pack_nest(Sched *s, const Contraction *ct, const Packed *pk, uint64_t first, uint64_t blocks,
                         uint64_t lanes, uint64_t group, uint32_t panel_iter) {
    Arena *arena = s->ir->arena;
    const Reduction *r = ct->r;
    bool transpose = pack_transposes(s, ct, pk, lanes);
    uint32_t outer_red = transpose ? r->nred - 1 : r->nred, last = r->nred - 1;
    reset_subst(s);
    uint32_t batch_iter[MAX_LOOPS], red_iter[MAX_LOOPS];
    IrStmt *top = NULL;
    IrBlock *into = NULL;
    batch_loops(s, ct, pk->batch, batch_iter, &top, &into);
    uint32_t panel = panel_iter != UINT32_MAX ? panel_iter : new_iter(s), lane = new_iter(s);
    uint32_t group_iter = group > 1 ? new_iter(s) : UINT32_MAX;
    if (group > 1) nest_push(s, &top, &into, new_loop(s, group_iter, blocks / group, true, LOOP_PLAIN));
    else if (panel_iter != UINT32_MAX) nest_push(s, &top, &into, new_loop(s, new_iter(s), 1, true, LOOP_PLAIN));
    else nest_push(s, &top, &into, new_loop(s, panel, blocks, true, LOOP_PLAIN));
    for (uint32_t k = 0; k < outer_red; k++) {
        red_iter[k] = new_iter(s);
        map_iter(s, r->red[k]->iter, affine1(red_iter[k], 1, 0));
        nest_push(s, &top, &into, new_loop(s, red_iter[k], r->red[k]->extent, true, LOOP_PLAIN));
    }
    if (group > 1) nest_push(s, &top, &into, new_loop(s, panel, group, true, LOOP_PLAIN));
    int64_t lane0 = (int64_t)(first * pk->width);
    uint64_t red_cells = r->red[last]->extent, plain_from = 0;
    if (transpose) {
        uint64_t w = s->lanes, lane_block = lanes < w ? lanes : w;
        uint32_t rb = new_iter(s), lb = new_iter(s), u = new_iter(s), v = new_iter(s);
        IrStmt *rb_loop = new_loop(s, rb, red_cells / w, true, LOOP_PLAIN);
        IrStmt *lb_loop = new_loop(s, lb, lanes / lane_block, true, LOOP_PLAIN);
        IrStmt *u_loop = new_loop(s, u, lane_block, true, LOOP_TRANSPOSE);
        IrStmt *v_loop = new_loop(s, v, w, true, LOOP_VECTOR);
        map_iter(s, r->red[last]->iter, (Affine){.terms = {{rb, (int64_t)w}, {v, 1}}, .count = 2});
        map_iter(s, pk->lane_loop->iter, (Affine){.terms = {{panel, (int64_t)pk->width}, {lb, (int64_t)lane_block}, {u, 1}},
                                                  .count = 3, .offset = lane0});
        Terms t = {0};
        add_term(&t, u, 1);
        add_term(&t, lb, (int64_t)lane_block);
        add_term(&t, rb, (int64_t)(w * pk->width));
        red_iter[last] = v;
        ir_block_push(arena, &v_loop->body, pack_store(s, ct, pk, batch_iter, panel, first, red_iter, t));
        ir_block_push(arena, &u_loop->body, v_loop);
        ir_block_push(arena, &lb_loop->body, u_loop);
        ir_block_push(arena, &rb_loop->body, lb_loop);
        ir_block_push(arena, into, rb_loop);
        plain_from = red_cells / w * w;
    }
    IrBlock *copy_into = into;
    if (transpose) { /* the last reduction cells, and the padding below, get a loop of their own */
        red_iter[last] = new_iter(s);
        if (plain_from < red_cells) {
            IrStmt *rest = new_loop(s, red_iter[last], red_cells - plain_from, true, LOOP_PLAIN);
            ir_block_push(arena, into, rest);
            copy_into = &rest->body;
        } else {
            copy_into = NULL;
        }
        map_iter(s, r->red[last]->iter, affine1(red_iter[last], 1, (int64_t)plain_from));
    }
    map_iter(s, pk->lane_loop->iter, (Affine){.terms = {{panel, (int64_t)pk->width}, {lane, 1}}, .count = 2, .offset = lane0});
    Terms t = {0};
    add_term(&t, lane, 1);
    if (group > 1) { /* block = group_iter·group + panel */
        Affine *a = &s->subst[pk->lane_loop->iter];
        a->terms[a->count++] = (IrTerm){group_iter, (int64_t)(group * pk->width)};
        add_term(&t, group_iter, (int64_t)(group * pk->stride));
    }
    if (copy_into) {
        Terms tc = t;
        tc.offset += transpose ? (int64_t)(plain_from * pk->width) : 0;
        IrStmt *copy = new_loop(s, lane, lanes, true, LOOP_PLAIN);
        ir_block_push(arena, &copy->body, pack_store(s, ct, pk, batch_iter, panel, first, red_iter, tc));
        ir_block_push(arena, copy_into, copy);
    }
    if (lanes < pk->width) {
        IrBlock *pad_into = into;
        if (transpose) { /* over every reduction cell */
            IrStmt *all = new_loop(s, red_iter[last], red_cells, true, LOOP_PLAIN);
            ir_block_push(arena, into, all);
            pad_into = &all->body;
        }
        IrStmt *pad = new_loop(s, lane, pk->width - lanes, true, LOOP_PLAIN);
        Terms tp = t;
        tp.offset += (int64_t)lanes;
        panel_terms(ct, pk, batch_iter, panel, first, red_iter, UINT32_MAX, &tp);
        ir_block_push(arena, &pad->body, new_store(s, pk->buffer, terms_index(s, &tp), new_const(s, 0, s->ir->buffers[pk->buffer].dtype)));
        ir_block_push(arena, pad_into, pad);
    }
    return top;
}

/* 1 (an i32) where `operand` is tiny for VDPBF16PS: nonzero and below 2^-56 in magnitude (a
 * product of two values from 2^-56 up is a multiple of 2^-126, and so is every sum of such
 * products rounded to f32: none is subnormal, so none is flushed; LOOP_DOT_PAIRS, ir.h). */
static IrExpr *tiny_for_pairs(Sched *s, const IrExpr *operand) {
    IrExpr *above_zero = new_op(s, SOP_LT, new_const(s, 0, DTYPE_F32),
                                new_op(s, SOP_ABS, clone_expr(s, operand, NULL), NULL, NULL), NULL);
    IrExpr *below = new_op(s, SOP_LT, new_op(s, SOP_ABS, clone_expr(s, operand, NULL), NULL, NULL),
                           new_const(s, 0x1p-56, DTYPE_F32), NULL);
    IrExpr *tiny = new_op(s, SOP_WHERE, new_op(s, SOP_AND, above_zero, below, NULL), new_const(s, 1, DTYPE_I32),
                          new_const(s, 0, DTYPE_I32));
    tiny->type = DTYPE_I32;
    return tiny;
}

/* The blocks a pass of pack_pairs_nest: where the operand's lanes are adjacent (its steps a row
 * apart), the largest divisor of `blocks` within 128 lanes, the group's loop inside the pairs'
 * loop, so that a pass reads the group's adjacent lanes of each row, where a pass per block read
 * 6 of them from every row: an MLP's 512 × 1024 bf16 gradient packed in panels of 6, 17 a pass,
 * with each pair of rows' lanes interleaved as vectors (cg_llvm.c interleave_pairs) took
 * 137–147 µs on a Zen 4, 226 a block a pass (either change alone: no gain); the group is
 * blocks_within_128_lanes.  Else 1. */
static uint64_t pairs_group(const Sched *s, const Contraction *ct, const Packed *pk, uint64_t blocks, uint64_t lanes) {
    const Reduction *r = ct->r;
    const IrExpr *op = pk->operand;
    if (ir_flat_coef(s->ir, op->buffer, op->index, r->red[r->nred - 1]->iter) != 1 && lanes == pk->width &&
        ir_flat_coef(s->ir, op->buffer, op->index, pk->lane_loop->iter) == 1)
        return blocks_within_128_lanes(blocks, pk->width);
    return 1;
}

/* One packing nest of pairs (Packed.pairs): for batch…, block < blocks (from block `first`): for
 * the reduction's pairs (the outer reduction loops, p < half the innermost) and lanes < `lanes`,
 * steps 2p and 2p+1 into one 32-bit cell, swapped (panel_terms), the operand's contiguous axis
 * innermost (the lanes of B in a row-major product, the reduction along the rows of A); the
 * padding lanes [lanes, width) get zeros.  Then tiny[block] counts the block's tiny values, in
 * one pass along the block just written.  With `group` blocks a pass (pairs_group; 1: a pass per
 * block), the group's blocks are copied inside the loop over pairs and counted after it. */
static IrStmt *pack_pairs_nest(Sched *s, const Contraction *ct, const Packed *pk, uint64_t first, uint64_t blocks,
                               uint64_t lanes, uint64_t group) {
    Arena *arena = s->ir->arena;
    const Reduction *r = ct->r;
    uint32_t last = r->nred - 1;
    reset_subst(s);
    uint32_t batch_iter[MAX_LOOPS], red_iter[MAX_LOOPS];
    IrStmt *top = NULL;
    IrBlock *into = NULL;
    batch_loops(s, ct, pk->batch, batch_iter, &top, &into);
    uint32_t block = new_iter(s), lane = new_iter(s), e = new_iter(s);
    bool reduction_inside = ir_flat_coef(s->ir, pk->operand->buffer, pk->operand->index, r->red[last]->iter) == 1;
    uint32_t group_iter = group > 1 ? new_iter(s) : UINT32_MAX;
    nest_push(s, &top, &into, group > 1 ? new_loop(s, group_iter, blocks / group, true, LOOP_PLAIN)
                                        : new_loop(s, block, blocks, true, LOOP_PLAIN));
    IrBlock *block_body = into;
    for (uint32_t k = 0; k < r->nred; k++) {
        red_iter[k] = new_iter(s);
        if (k < last) map_iter(s, r->red[k]->iter, affine1(red_iter[k], 1, 0));
    }
    for (uint32_t k = 0; k < last; k++) nest_push(s, &top, &into, new_loop(s, red_iter[k], r->red[k]->extent, true, LOOP_PLAIN));
    uint64_t pairs = r->red[last]->extent / 2, w = s->lanes, lane_block = lanes < w ? lanes : w, plain_from = 0;
    if (reduction_inside && w >= 2 && pairs >= w && lanes % lane_block == 0) {
        /* Blocks of W pairs by up to W lanes transposed in registers (LOOP_TRANSPOSE of pairs,
         * cg_llvm.c): the pairs of a lane are adjacent in the operand, one 32-bit cell each. */
        uint32_t pb = new_iter(s), lb = new_iter(s), u = new_iter(s), v = new_iter(s);
        IrStmt *pb_loop = new_loop(s, pb, pairs / w, true, LOOP_PLAIN);
        IrStmt *lb_loop = new_loop(s, lb, lanes / lane_block, true, LOOP_PLAIN);
        IrStmt *u_loop = new_loop(s, u, lane_block, true, LOOP_TRANSPOSE);
        IrStmt *v_loop = new_loop(s, v, w, true, LOOP_VECTOR);
        IrStmt *ve_loop = new_loop(s, e, 2, true, LOOP_UNROLL);
        map_iter(s, r->red[last]->iter, (Affine){.terms = {{pb, (int64_t)(2 * w)}, {v, 2}, {e, 1}}, .count = 3});
        map_iter(s, pk->lane_loop->iter, (Affine){.terms = {{block, (int64_t)pk->width}, {lb, (int64_t)lane_block}, {u, 1}},
                                                  .count = 3, .offset = (int64_t)(first * pk->width)});
        uint32_t red_at[MAX_LOOPS];
        memcpy(red_at, red_iter, sizeof red_at);
        red_at[last] = v;
        Terms tb = {0};
        add_term(&tb, u, 1);
        add_term(&tb, lb, (int64_t)lane_block);
        add_term(&tb, pb, (int64_t)(w * pk->width)); /* (2·W·pb pairs' steps)·width, halved by the pairs' doubling */
        panel_terms(ct, pk, batch_iter, block, first, red_at, e, &tb);
        ir_block_push(arena, &ve_loop->body, new_store(s, pk->buffer, terms_index(s, &tb), clone_expr(s, pk->operand, NULL)));
        ir_block_push(arena, &v_loop->body, ve_loop);
        ir_block_push(arena, &u_loop->body, v_loop);
        ir_block_push(arena, &lb_loop->body, u_loop);
        ir_block_push(arena, &pb_loop->body, lb_loop);
        ir_block_push(arena, into, pb_loop);
        plain_from = pairs / w * w;
    }
    if (plain_from < pairs) { /* the pairs not transposed, lane by lane */
        map_iter(s, r->red[last]->iter, (Affine){.terms = {{red_iter[last], 2}, {e, 1}}, .count = 2,
                                                 .offset = (int64_t)(2 * plain_from)});
        map_iter(s, pk->lane_loop->iter, (Affine){.terms = {{block, (int64_t)pk->width}, {lane, 1}, {group_iter, (int64_t)(group * pk->width)}},
                                                  .count = group > 1 ? 3 : 2, .offset = (int64_t)(first * pk->width)});
        IrStmt *pair_loop = new_loop(s, red_iter[last], pairs - plain_from, true, LOOP_PLAIN);
        IrStmt *lane_loop = new_loop(s, lane, lanes, true, LOOP_PLAIN);
        IrStmt *e_loop = new_loop(s, e, 2, true, LOOP_UNROLL);
        Terms t = {0};
        add_term(&t, lane, 1);
        t.offset = (int64_t)(plain_from * pk->width); /* doubled by panel_terms: 2·plain_from·width */
        panel_terms(ct, pk, batch_iter, block, first, red_iter, e, &t);
        if (group > 1) add_term(&t, group_iter, (int64_t)(group * pk->stride));
        ir_block_push(arena, &e_loop->body, new_store(s, pk->buffer, terms_index(s, &t), clone_expr(s, pk->operand, NULL)));
        IrStmt *outer = reduction_inside ? lane_loop : pair_loop, *inner = reduction_inside ? pair_loop : lane_loop;
        ir_block_push(arena, &inner->body, e_loop);
        if (group > 1) { /* the group's blocks between the pairs and the lanes */
            IrStmt *block_loop = new_loop(s, block, group, true, LOOP_PLAIN);
            ir_block_push(arena, &block_loop->body, inner);
            inner = block_loop;
        }
        ir_block_push(arena, &outer->body, inner);
        ir_block_push(arena, into, outer);
    }
    if (lanes < pk->width) { /* the padding: zeros, at every pair */
        IrStmt *pad_pairs = new_loop(s, red_iter[last], pairs, true, LOOP_PLAIN);
        IrStmt *pad = new_loop(s, lane, pk->width - lanes, true, LOOP_PLAIN);
        IrStmt *pad_e = new_loop(s, e, 2, true, LOOP_UNROLL);
        Terms tp = {0};
        add_term(&tp, lane, 1);
        tp.offset = (int64_t)lanes;
        panel_terms(ct, pk, batch_iter, block, first, red_iter, e, &tp);
        ir_block_push(arena, &pad_e->body, new_store(s, pk->buffer, terms_index(s, &tp), new_const(s, 0, DTYPE_F32)));
        ir_block_push(arena, &pad->body, pad_e);
        ir_block_push(arena, &pad_pairs->body, pad);
        ir_block_push(arena, into, pad_pairs);
    }
    /* tiny[block] = 0; for c < K·width: tiny[block] += tiny(P[block's cell c]), for each block of
     * the group after the group's pass */
    Terms tt = {0}, tc = {0};
    uint32_t counted = group > 1 ? new_iter(s) : block;
    block_terms(ct, pk, batch_iter, counted, first, 1, &tt);
    uint32_t cell = new_iter(s);
    add_term(&tc, cell, 1);
    block_terms(ct, pk, batch_iter, counted, first, pk->stride, &tc);
    if (group > 1) {
        add_term(&tt, group_iter, (int64_t)group);
        add_term(&tc, group_iter, (int64_t)(group * pk->stride));
        IrStmt *count_blocks = new_loop(s, counted, group, true, LOOP_PLAIN);
        ir_block_push(arena, block_body, count_blocks);
        block_body = &count_blocks->body;
    }
    ir_block_push(arena, block_body, new_store(s, pk->tiny, terms_index(s, &tt), new_const(s, 0, DTYPE_I32)));
    IrStmt *count_loop = new_loop(s, cell, ct->k * pk->width, false, LOOP_PLAIN);
    IrExpr *count = new_op(s, SOP_ADD, new_load(s, pk->tiny, terms_index(s, &tt)),
                           tiny_for_pairs(s, new_load(s, pk->buffer, terms_index(s, &tc))), NULL);
    ir_block_push(arena, &count_loop->body, new_store(s, pk->tiny, terms_index(s, &tt), count));
    ir_block_push(arena, block_body, count_loop);
    return top;
}

/* Whether the tiles read an operand's full blocks where it is instead of from panels.  Packing
 * copies the operand once per call, which costs as much as a pass over it; it pays where the
 * layout would make the tiles' reads slow.  A, broadcast one value per row and reduction step,
 * is read in place when it moves by one cell along the innermost reduction loop: MR sequential
 * streams (unless its rows are a multiple of 4 KiB apart and the L1 cache has fewer than 2·MR
 * ways or the MR rows take more than half of it), or when its MR rows are adjacent and
 * a step moves by at most a cache line.  B, whose NR lanes are read as vectors, is read in place
 * when its reduction steps are not a multiple of 4 KiB apart (steps at such strides fall into
 * the same cache sets and evict each other) and it is at most half of the L2 cache, so that a
 * block stays there while the tiles sweep the other operand.  Never when the epilogue writes the operand's buffer (the tiles must read it first). */
static bool read_in_place(const Sched *s, const Contraction *ct, const IrExpr *operand, const IrStmt *lane_loop,
                          bool broadcast, uint64_t mr, const Epilogue *ep) {
    const IrProgram *ir = s->ir;
    const Reduction *r = ct->r;
    if (ep && ep->stage[0].store->buffer == operand->buffer) return false;
    int64_t along_lane = ir_flat_coef(ir, operand->buffer, operand->index, lane_loop->iter);
    int64_t along_red = ir_flat_coef(ir, operand->buffer, operand->index, r->red[r->nred - 1]->iter);
    /* A broadcast operand is read one value at a time, so in place whenever each step's values
     * lie together: along the reduction (A's rows), or a block of adjacent rows that moves by at
     * most a cache line per step (a window of channels).  But rows a multiple of 4 KiB apart fall
     * into one set of the L1 cache, MR lines of it at a time; with 8 ways that leaves B's panel
     * too few and they are packed (an f64 matmul at n = 2048 in place: 27 GFLOP/s on a Zen 3,
     * packed 41; f32's compose form 65, packed 81).  With 12 ways, half of them left, they are
     * read in place when the MR rows fit in half the L1 cache (B's panel streams through the
     * rest), so that every panel after the first finds them there: an MLP's down-projection
     * over 1024 features (24 KiB of rows) took 1.49 ms in place against 1.51 + 0.18 for the
     * tiles and the copy on an Emerald Rapids VM; an f64 matmul at n = 2048 (blocks of 1024
     * steps, 48 KiB of rows) 2-5 % longer in place than packed. */
    unsigned cell = ir_dtype_bytes(ir->buffers[operand->buffer].dtype);
    if (broadcast && along_red == 1 && (along_lane * (int64_t)cell) % 4096 == 0 &&
        (s->target->l1_ways < 2 * mr || (double)mr * (double)ct->k * cell > (double)s->target->l1_bytes / 2))
        return false;
    if (broadcast && (along_red == 1 || (along_lane == 1 && along_red > 0 && along_red <= 16))) return true;
    /* Steps a cache line or more apart (a transposed A: MR values of a new line each step) are
     * packed: in place, lines at a stride of 1 KiB fall into a few cache sets, which B's panel
     * shares (C = Aᵀ·B at n = 256 on a Zen 3: 70 GFLOP/s in place, 93 packed). */
    if (broadcast) return false;
    const IrBuffer *b = &ir->buffers[operand->buffer];
    double bytes = (double)b->size * ir_dtype_bytes(b->dtype);
    return along_lane == 1 && (along_red * ir_dtype_bytes(b->dtype)) % 4096 != 0 && bytes <= (double)s->target->l2_bytes / 2;
}

/* The cells from one block of panels to the next, for blocks of `cells` cells of `bytes` each:
 * `cells`, and a cache line more when the blocks would be a multiple of 4 KiB apart.  A copy
 * writes the panels of a group side by side (pack_group: up to 21 of them a step); at such a
 * stride all their lines fall into the same cache sets, more streams than the sets have ways,
 * so each line is evicted before it is whole (the panels of 6 of an MLP's 1024-feature gradient,
 * 12 KiB apart).  The tiles read a block's cells in order, wherever it starts. */
static uint64_t panel_stride(uint64_t cells, unsigned bytes) {
    return (cells * bytes) % 4096 == 0 ? cells + 64 / bytes : cells;
}

/* Pack `operand` (its full blocks unless they are read in place or `per_block`, then a padded
 * last block) into nests appended to `out`.  `per_block`: the caller packs each full block inside
 * its loop over them, just before the tiles read it (pack_nest's panel_iter). */
static void pack_operand(Sched *s, const Contraction *ct, const IrExpr *operand, const IrStmt *lane_loop,
                         uint64_t width, const char *what, bool in_place, bool pairs, bool per_block, Packed *pk,
                         IrBlock *out) {
    Arena *arena = s->ir->arena;
    *pk = (Packed){.operand = operand, .lane_loop = lane_loop, .width = width, .full = lane_loop->extent / width,
                   .rem = lane_loop->extent % width, .pairs = pairs, .tiny = UINT32_MAX};
    pk->in_place = in_place && pk->full && !pairs;
    pk->first_packed = pk->in_place ? pk->full : 0;
    for (uint32_t k = 0; k < ct->nbatch; k++)
        pk->batch[k] = mentions(s->ir, operand->buffer, operand->index, ct->batch[k]->iter);
    if (pk->in_place && !pk->rem) return;
    pk->stride = panel_stride(ct->k * width, ir_dtype_bytes(s->ir->buffers[operand->buffer].dtype));
    uint64_t cells = (pk->full + (pk->rem != 0) - pk->first_packed) * pk->stride;
    for (uint32_t k = 0; k < ct->nbatch; k++)
        if (pk->batch[k]) cells *= ct->batch[k]->extent;
    pk->buffer = new_scratch(s, arena_printf(arena, "%s.%s", s->ir->buffers[operand->buffer].name, what), cells,
                             s->ir->buffers[operand->buffer].dtype, false);
    const char *comment = arena_printf(arena, "schedule: pack %s into panels of %llu for the register tile",
                                       s->ir->buffers[operand->buffer].name, (unsigned long long)width);
    if (pairs) {
        uint64_t blocks = pk->full + (pk->rem != 0);
        for (uint32_t k = 0; k < ct->nbatch; k++)
            if (pk->batch[k]) blocks *= ct->batch[k]->extent;
        pk->tiny = new_scratch(s, arena_printf(arena, "%s.tiny", s->ir->buffers[operand->buffer].name), blocks, DTYPE_I32, false);
        comment = arena_printf(arena, "%s, in pairs of steps, counting tiny values", comment);
        if (pk->full) {
            uint64_t group = pairs_group(s, ct, pk, pk->full, width);
            IrStmt *nest = pack_pairs_nest(s, ct, pk, 0, pk->full, width, group);
            if (group > 1) comment = arena_printf(arena, "%s, %llu panels a pass", comment, (unsigned long long)group);
            nest->comment = comment;
            ir_block_push(arena, out, nest);
        }
        if (pk->rem) {
            IrStmt *nest = pack_pairs_nest(s, ct, pk, pk->full, 1, pk->rem, 1);
            nest->comment = pk->full ? "schedule: the last panel in pairs, padded with zeros" : comment;
            ir_block_push(arena, out, nest);
        }
        return;
    }
    if (pk->full && !pk->in_place && !per_block) {
        uint64_t group = pack_group(s, ct, pk, pk->full, width);
        IrStmt *nest = pack_nest(s, ct, pk, 0, pk->full, width, group, UINT32_MAX);
        if (group > 1) comment = arena_printf(arena, "%s, %llu panels a pass", comment, (unsigned long long)group);
        nest->comment = comment;
        comment = NULL;
        ir_block_push(arena, out, nest);
    }
    if (pk->rem) {
        IrStmt *nest = pack_nest(s, ct, pk, pk->full, 1, pk->rem, 1, UINT32_MAX);
        nest->comment = comment && !per_block ? comment : "schedule: the last panel, padded with zeros";
        ir_block_push(arena, out, nest);
    }
}

/* The tile shape and everything a tile nest reads. */
typedef struct Tiling {
    const Contraction *ct;
    const Epilogue *epilogue;     /* or NULL */
    const Packed *pa, *pb;
    uint64_t w, nv, mr, nr;
    uint32_t tile;             /* the kernel-local MR×NR tile */
} Tiling;

/* The buffers an epilogue's stages store, in order, for the tiles' comment: "D0, then D1"
 * ("D0 (not stored), then D1" where D0 needs no storage). */
static const char *epilogue_buffers(Sched *s, const Epilogue *ep) {
    const char *text = "";
    for (uint32_t k = 0; k < ep->count; k++)
        text = arena_printf(s->ir->arena, "%s%s%s%s", text, k ? ", then " : "", s->ir->buffers[ep->stage[k].store->buffer].name,
                            ep->stage[k].keep ? "" : " (not stored)");
    return text;
}

/* The loops over every cell of a tile, appended to `block`: for ii < mr unroll, jv < nv unroll,
 * jl < w vector; the innermost body returned, for the statements of one vector of cells. */
static IrBlock *tile_wide(Sched *s, uint32_t ii, uint32_t jv, uint32_t jl, uint64_t mr, uint64_t nv, uint64_t w,
                          IrBlock *block) {
    Arena *arena = s->ir->arena;
    IrStmt *l_ii = new_loop(s, ii, mr, true, LOOP_UNROLL);
    IrStmt *l_jv = new_loop(s, jv, nv, true, LOOP_UNROLL);
    IrStmt *l_jl = new_loop(s, jl, w, true, LOOP_VECTOR);
    ir_block_push(arena, &l_jv->body, l_jl);
    ir_block_push(arena, &l_ii->body, l_jv);
    ir_block_push(arena, block, l_ii);
    return &l_jl->body;
}

/* One tile nest over row blocks [row0, row0+rows) and panels [col0, col0+cols), appended to
 * `out`: for batch, the two block loops: T = init; for r: T = fma(A, B, T); then the first
 * `store_rows` rows and `store_cols` columns of T go to C.  `col_iter` (UINT32_MAX: none) is
 * the iterator of the caller's loop over the `cols` panels, which `out` is inside: the nest
 * then runs the batch and row blocks of that panel. */
static void tile_nest(Sched *s, const Tiling *tl, uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols,
                      uint32_t col_iter, uint64_t store_rows, uint64_t store_cols, IrBlock *out) {
    const Contraction *ct = tl->ct;
    const Reduction *r = ct->r;
    Arena *arena = s->ir->arena;
    uint64_t w = tl->w, nv = tl->nv, mr = tl->mr, nr = tl->nr;
    reset_subst(s);
    IrStmt *top = NULL;
    IrBlock *into = NULL;
    uint32_t batch_iter[MAX_LOOPS];
    batch_loops(s, ct, NULL, batch_iter, &top, &into);
    /* The block loops, the longer outside (the one the thread pool splits when no batch loop
     * is); a single block is no loop. */
    uint32_t jo = col_iter != UINT32_MAX ? col_iter : cols > 1 ? new_iter(s) : UINT32_MAX;
    uint32_t io = rows > 1 ? new_iter(s) : UINT32_MAX;
    IrStmt *jl_ = jo != UINT32_MAX && col_iter == UINT32_MAX ? new_loop(s, jo, cols, true, LOOP_PLAIN) : NULL;
    IrStmt *il_ = io != UINT32_MAX ? new_loop(s, io, rows, true, LOOP_PLAIN) : NULL;
    bool cols_outside = cols >= 8 || cols >= rows;
    if (cols_outside && jl_) nest_push(s, &top, &into, jl_);
    if (il_) nest_push(s, &top, &into, il_);
    if (!cols_outside && jl_) nest_push(s, &top, &into, jl_);
    uint32_t ii = new_iter(s), jv = new_iter(s), jl = new_iter(s);
    Affine ai = {.count = 0, .offset = (int64_t)(row0 * mr)}, aj = {.count = 0, .offset = (int64_t)(col0 * nr)};
    if (io != UINT32_MAX) ai.terms[ai.count++] = (IrTerm){io, (int64_t)mr};
    ai.terms[ai.count++] = (IrTerm){ii, 1};
    if (jo != UINT32_MAX) aj.terms[aj.count++] = (IrTerm){jo, (int64_t)nr};
    aj.terms[aj.count++] = (IrTerm){jv, (int64_t)w};
    aj.terms[aj.count++] = (IrTerm){jl, 1};
    map_iter(s, ct->i_loop->iter, ai);
    map_iter(s, ct->j_loop->iter, aj);
    IrTerm cell[3] = {{ii, (int64_t)nr}, {jv, (int64_t)w}, {jl, 1}};
    IrBlock *body = into;
    if (!body) { /* one block of one panel with no batch: a loop of one to hold it */
        top = new_loop(s, new_iter(s), 1, true, LOOP_PLAIN);
        body = &top->body;
    }

    /* A tile-wide statement: for ii unroll, jv unroll, jl vector: stmt. */
#define TILE_WIDE(stmt_expr, block) ir_block_push(arena, tile_wide(s, ii, jv, jl, mr, nv, w, (block)), (stmt_expr))

    /* The initial value: 0, or C's cell (read only where C has cells: a partial tile starts
     * its padding lanes at 0). */
    if (r->init->value->kind == IR_CONST || (store_rows == mr && store_cols == nr)) {
        IrExpr *init = clone_expr(s, r->init->value, NULL);
        TILE_WIDE(new_store(s, tl->tile, flat_index(s, cell, 3), init), body);
    } else {
        TILE_WIDE(new_store(s, tl->tile, flat_index(s, cell, 3), new_const(s, 0, s->ir->buffers[tl->tile].dtype)), body);
        uint32_t jr = new_iter(s);
        map_iter(s, ct->j_loop->iter, (Affine){.terms = {{jr, 1}}, .count = 1 + (jo != UINT32_MAX),
                                                .offset = (int64_t)(col0 * nr)});
        if (jo != UINT32_MAX) s->subst[ct->j_loop->iter].terms[1] = (IrTerm){jo, (int64_t)nr};
        IrTerm part[2] = {{ii, (int64_t)nr}, {jr, 1}};
        IrStmt *l_ii = new_loop(s, ii, store_rows, true, LOOP_UNROLL);
        IrStmt *l_jr = new_loop(s, jr, store_cols, true, store_cols > 1 ? LOOP_VECTOR : LOOP_UNROLL);
        ir_block_push(arena, &l_jr->body, new_store(s, tl->tile, flat_index(s, part, 2), clone_expr(s, r->init->value, NULL)));
        ir_block_push(arena, &l_ii->body, l_jr);
        ir_block_push(arena, body, l_ii);
        map_iter(s, ct->j_loop->iter, aj);
    }
    /* With pairs, the guard: the tiny values of the tile's row block and panel. */
    bool pairs = tl->pb->pairs;
    uint32_t guard = UINT32_MAX, pair_iter = UINT32_MAX;
    if (pairs) {
        guard = s->fn->local_count++;
        Terms ta = {0}, tb = {0};
        block_terms(ct, tl->pa, batch_iter, io, row0, 1, &ta);
        block_terms(ct, tl->pb, batch_iter, jo, col0, 1, &tb);
        IrStmt *set = arena_alloc(arena, sizeof *set);
        *set = (IrStmt){.kind = IR_SET_LOCAL, .local = guard,
                        .value = new_op(s, SOP_ADD, new_load(s, tl->pa->tiny, terms_index(s, &ta)),
                                        new_load(s, tl->pb->tiny, terms_index(s, &tb)), NULL)};
        ir_block_push(arena, body, set);
        pair_iter = new_iter(s);
    }
    IrBlock *red_into = body;
    uint32_t red_iter[MAX_LOOPS] = {0};
    for (uint32_t k = 0; k < r->nred; k++) {
        red_iter[k] = new_iter(s);
        bool pair_loop = pairs && k == r->nred - 1;
        IrStmt *l = new_loop(s, red_iter[k], pair_loop ? r->red[k]->extent / 2 : r->red[k]->extent, false,
                             pair_loop ? LOOP_DOT_PAIRS : LOOP_PLAIN);
        ir_block_push(arena, red_into, l);
        red_into = &l->body;
        if (pair_loop) { /* for e < 2 unroll: step 2p + e */
            l->local = guard;
            IrStmt *pl = new_loop(s, pair_iter, 2, false, LOOP_UNROLL);
            ir_block_push(arena, red_into, pl);
            red_into = &pl->body;
        }
    }
    Terms at = {0}, bt = {0};
    add_term(&at, ii, 1);
    panel_terms(ct, tl->pa, batch_iter, io, row0, red_iter, pair_iter, &at);
    add_term(&bt, jv, (int64_t)w);
    add_term(&bt, jl, 1);
    panel_terms(ct, tl->pb, batch_iter, jo, col0, red_iter, pair_iter, &bt);
    /* Full blocks of an operand read in place: the operand itself at i (j) = the tile's row
     * (column) and the reduction at its iterators. */
    for (uint32_t k = 0; k < r->nred; k++) map_iter(s, r->red[k]->iter, affine1(red_iter[k], 1, 0));
    IrExpr *a_val = tl->pa->in_place && row0 < tl->pa->full ? clone_expr(s, ct->a, NULL)
                                                           : new_load(s, tl->pa->buffer, terms_index(s, &at));
    IrExpr *b_val = tl->pb->in_place && col0 < tl->pb->full ? clone_expr(s, ct->b, NULL)
                                                           : new_load(s, tl->pb->buffer, terms_index(s, &bt));
    IrExpr *fma = new_step(s, ct->add, ct->acc_first, ct->b_first, a_val, b_val,
                           new_load(s, tl->tile, flat_index(s, cell, 3)));
    TILE_WIDE(new_store(s, tl->tile, flat_index(s, cell, 3), fma), red_into);
    uint32_t c = ct->c;
    if (store_rows == mr && store_cols == nr) {
        cell_stores(s, r, tl->epilogue, new_load(s, tl->tile, flat_index(s, cell, 3)), tile_wide(s, ii, jv, jl, mr, nv, w, body));
    } else { /* the cells C has: rows unrolled (the tile stays in registers), each a vector of its cells */
        uint32_t jr = new_iter(s);
        Affine aj2 = {.terms = {{jr, 1}}, .count = 1, .offset = (int64_t)(col0 * nr)};
        if (jo != UINT32_MAX) aj2.terms[aj2.count++] = (IrTerm){jo, (int64_t)nr};
        map_iter(s, ct->j_loop->iter, aj2);
        IrTerm part[2] = {{ii, (int64_t)nr}, {jr, 1}};
        IrStmt *l_ii = new_loop(s, ii, store_rows, true, LOOP_UNROLL);
        IrStmt *l_jr = new_loop(s, jr, store_cols, true, store_cols > 1 ? LOOP_VECTOR : LOOP_UNROLL);
        cell_stores(s, r, tl->epilogue, new_load(s, tl->tile, flat_index(s, part, 2)), &l_jr->body);
        ir_block_push(arena, &l_ii->body, l_jr);
        ir_block_push(arena, body, l_ii);
    }
#undef TILE_WIDE
    top->comment = arena_printf(arena, "schedule: register tile %llux%llu of %s over %llu reduction cells%s%s%s%s%s",
                                (unsigned long long)mr, (unsigned long long)nr, s->ir->buffers[c].name,
                                (unsigned long long)ct->k, pairs ? " in bf16 pairs" : "",
                                ct->strided_lanes ? ", lanes strided in the result" : "",
                                !tl->epilogue           ? ""
                                : tl->epilogue->keep_c ? ", stored, and through the epilogue into "
                                                       : ", stored through the epilogue into ",
                                tl->epilogue ? epilogue_buffers(s, tl->epilogue) : "",
                                store_rows < mr && store_cols < nr ? " (the last rows and columns)"
                                : store_rows < mr                  ? " (the last rows)"
                                : store_cols < nr                  ? " (the last columns)"
                                                                   : "");
    ir_block_push(arena, out, top);
}

/* Worth tiling: 16384 multiply-adds in all, and 512 per batch cell. */
static bool tile_worth_it(const Sched *s, const Contraction *ct) {
    double batch_cells = 1;
    for (uint32_t k = 0; k < ct->nbatch; k++) batch_cells *= (double)ct->batch[k]->extent;
    double cell_work = (double)ct->i_loop->extent * (double)ct->j_loop->extent * (double)ct->k;
    return cell_work * batch_cells * s->outer_cells >= 16384.0 && cell_work >= 512.0 && ct->r->nred <= MAX_LOOPS - 8;
}

bool tile_pairs(const Sched *s, const Contraction *ct) {
    const IrProgram *ir = s->ir;
    const Reduction *r = ct->r;
    return s->target->kind == TARGET_CPU && s->target->bf16_pairs && s->target->vector_floats == 16 && !ct->add &&
           !ct->strided_lanes && ir->buffers[ct->a->buffer].dtype == DTYPE_BF16 &&
           ir->buffers[ct->b->buffer].dtype == DTYPE_BF16 && r->red[r->nred - 1]->extent % 2 == 0 &&
           ct->j_loop->extent >= 16 && tile_worth_it(s, ct);
}

/* The columns of the tile over `nj` lanes: *w lanes to a vector, *nv vectors.  The target's
 * tile, narrowed to the result when it has fewer vector columns: the narrowest vector (of at
 * least 128 bits: 4 floats, 2 doubles) that holds half the columns or more (6 columns take one
 * vector of 8, 10 columns one vector of 16 on AVX-512: one operation where two narrower ones
 * would cover the same lanes). */
void tile_columns(const Sched *s, uint64_t nj, uint64_t *w, uint64_t *nv) {
    *w = s->lanes;
    while (*w > 16 / s->cell_bytes && 2 * nj <= *w) *w /= 2;
    uint64_t vectors = (nj + *w - 1) / *w;
    *nv = vectors < s->target->tile_vectors ? vectors : s->target->tile_vectors;
}

/* Tile the contraction `r`; the statements after it (`after`, `after_count` of them) that make
 * its epilogue are fused into the tiles: *fused says how many. */
bool tile_contraction(Sched *s, const Reduction *r, IrStmt *const *after, uint32_t after_count, IrBlock *out,
                      uint32_t *fused) {
    Contraction ct;
    *fused = 0;
    if (!find_contraction(s->ir, r, &ct, true, s->lanes)) return false;
    const Target *tg = s->target;
    bool pairs = tile_pairs(s, &ct);
    uint64_t ni = ct.i_loop->extent, nj = ct.j_loop->extent, w, nv;
    tile_columns(s, nj, &w, &nv);
    /* A tile of fewer vectors than the target's takes more rows, up to as many accumulators (at
     * most twice the rows): a one-vector tile of 6 rows leaves the FMA units waiting on their
     * latency.  The rows are then balanced over the blocks (16 rows: two blocks of 8, not 12 + 4). */
    uint64_t rows = tg->tile_rows;
    if (nv < tg->tile_vectors) {
        uint64_t most = tg->tile_rows * tg->tile_vectors / nv;
        if (most > 2 * (uint64_t)tg->tile_rows) most = 2 * (uint64_t)tg->tile_rows;
        uint64_t blocks = (ni + most - 1) / most;
        rows = (ni + blocks - 1) / blocks;
    }
    uint64_t mr = ni < rows ? ni : rows, nr = w * nv;
    /* With enough batch cells, each of which both operands have their own, one loop nest runs
     * over the batch and packs and tiles one batch cell at a time: its panels stay in cache, and
     * the thread pool splits the batch. */
    double batch_cells = 1;
    bool per_batch = ct.nbatch > 0;
    for (uint32_t k = 0; k < ct.nbatch; k++) {
        batch_cells *= (double)ct.batch[k]->extent;
        per_batch &= mentions(s->ir, ct.a->buffer, ct.a->index, ct.batch[k]->iter) &&
                     mentions(s->ir, ct.b->buffer, ct.b->index, ct.batch[k]->iter);
    }
    if (!tile_worth_it(s, &ct)) return false;
    Arena *arena = s->ir->arena;
    per_batch &= batch_cells >= 4;
    IrBlock *final_out = out, batch_body = {0};
    IrStmt *batch_top = NULL;
    uint32_t outer[MAX_LOOPS];
    if (per_batch) {
        IrBlock *into = NULL;
        for (uint32_t k = 0; k < ct.nbatch; k++) {
            outer[k] = new_iter(s);
            nest_push(s, &batch_top, &into, new_loop(s, outer[k], ct.batch[k]->extent, true, LOOP_PLAIN));
        }
        batch_top->comment = "schedule: one batch cell at a time: pack its operands, then its register tiles";
        s->outer_batch = outer;
        out = &batch_body;
    }

    /* Both operands in panels: B in columns of NR (vectors), A in rows of MR (broadcasts). */
    Packed pa, pb;
    Epilogue ep;
    *fused = ct.strided_lanes ? 0 : find_epilogue(s, &ct, after, after_count, &ep);
    /* When every batch cell reads the same panels of B (B walks no batch loop: a sequence's
     * positions against one weight) and they are more than L2 holds, a loop over the panels is
     * outermost and each panel serves every batch cell's full and last rows while it is in
     * cache; batch cells first, each panel would come from memory once per batch cell and again
     * for the last rows (GPT-2's output head: 154 MB of panels read 8 times a step).  Each full
     * panel is then copied inside that loop, just before its tiles read it from cache (into its
     * place in the buffer of all panels, whose lines still go back to memory: what is saved is
     * reading them back), unless B is read in place or packed in bf16 pairs (before the loop). */
    bool b_batched = false;
    for (uint32_t k = 0; k < ct.nbatch; k++) b_batched |= mentions(s->ir, ct.b->buffer, ct.b->index, ct.batch[k]->iter);
    uint64_t b_panels = nj / nr, a_rows = ni / mr;
    double panels_bytes = (double)b_panels * (double)ct.k * (double)nr * ir_dtype_bytes(s->ir->buffers[ct.b->buffer].dtype);
    /* At least 8 panels, as for the panel loop outside the row blocks (tile_nest): the loop
     * outermost is what the thread pool splits, and 3 panels on 2 threads would leave one idle
     * a third of the time where the batch loop split evenly. */
    bool panels_outside = !per_batch && ct.nbatch > 0 && !b_batched && b_panels >= 8 && a_rows &&
                          panels_bytes > (double)s->target->l2_bytes;
    bool copy_in_loop = panels_outside && !pairs; /* each full panel copied in its iteration */
    pack_operand(s, &ct, ct.b, ct.j_loop, nr, "panels", read_in_place(s, &ct, ct.b, ct.j_loop, false, mr, *fused ? &ep : NULL),
                 pairs, copy_in_loop, &pb, out);
    pack_operand(s, &ct, ct.a, ct.i_loop, mr, "rows", read_in_place(s, &ct, ct.a, ct.i_loop, true, mr, *fused ? &ep : NULL),
                 pairs, false, &pa, out);
    /* A packed A is one stream read a value at a time, which the hardware prefetcher follows
     * too late: prefetched ahead, a transposed product at n = 2048 ran 12 % faster. */
    if (!pa.in_place && pa.full && !pairs) s->ir->buffers[pa.buffer].prefetch_cells = s->target->prefetch_cells;
    Tiling tl = {&ct, *fused ? &ep : NULL, &pa, &pb, w, nv, mr, nr,
                 new_scratch(s, arena_printf(arena, "%s.tile", s->ir->buffers[ct.c].name), mr * nr,
                             ir_expr_type(s->ir, r->step->value), true)};

    /* Full tiles, then the last panel (partial columns), the last row block (partial rows), and
     * their corner: every cell of C once; with the panels outermost, each full panel copied
     * first in its iteration (the last, partial one was packed before the loop). */
    if (panels_outside) {
        IrStmt *panels = new_loop(s, new_iter(s), pb.full, true, LOOP_PLAIN);
        if (copy_in_loop && !pb.in_place) {
            IrStmt *pack = pack_nest(s, &ct, &pb, 0, 1, nr, 1, panels->iter);
            pack->comment = arena_printf(arena, "schedule: pack this panel of %s", s->ir->buffers[ct.b->buffer].name);
            ir_block_push(arena, &panels->body, pack);
        }
        tile_nest(s, &tl, 0, pa.full, 0, pb.full, panels->iter, mr, nr, &panels->body);
        if (pa.rem) tile_nest(s, &tl, pa.full, 1, 0, pb.full, panels->iter, pa.rem, nr, &panels->body);
        panels->comment = arena_printf(arena, "schedule: each panel of %s for every row of every batch cell",
                                       s->ir->buffers[ct.b->buffer].name);
        ir_block_push(arena, out, panels);
        if (pb.rem) tile_nest(s, &tl, 0, pa.full, pb.full, 1, UINT32_MAX, mr, pb.rem, out);
    } else {
        if (pa.full && pb.full) tile_nest(s, &tl, 0, pa.full, 0, pb.full, UINT32_MAX, mr, nr, out);
        if (pa.full && pb.rem) tile_nest(s, &tl, 0, pa.full, pb.full, 1, UINT32_MAX, mr, pb.rem, out);
        if (pa.rem && pb.full) tile_nest(s, &tl, pa.full, 1, 0, pb.full, UINT32_MAX, pa.rem, nr, out);
    }
    if (pa.rem && pb.rem) tile_nest(s, &tl, pa.full, 1, pb.full, 1, UINT32_MAX, pa.rem, pb.rem, out);
    if (per_batch) { /* the innermost batch loop (the one still empty) holds the nests */
        IrStmt *inner = batch_top;
        while (inner->body.count) inner = inner->body.items[0];
        inner->body = batch_body;
        s->outer_batch = NULL;
        out = final_out;
        ir_block_push(arena, out, batch_top);
    }
    if (r->par[0]->comment && out->count)
        out->items[0]->comment = arena_printf(arena, "%s; %s", r->par[0]->comment, out->items[0]->comment);
    if (*fused) {
        if (!ep.keep_c) s->ir->buffers[ct.c].is_virtual = true; /* stored nowhere any more */
        for (uint32_t k = 0; k < ep.count; k++)
            if (!ep.stage[k].keep) s->ir->buffers[ep.stage[k].store->buffer].is_virtual = true;
        const char *said = "";
        for (uint32_t k = 0; k < ep.count; k++)
            if (ep.stage[k].nest->comment) { /* a nest the schedule made says so: not again here */
                static const char made[] = "schedule: ";
                const char *what = ep.stage[k].nest->comment;
                if (strncmp(what, made, sizeof made - 1) == 0) what += sizeof made - 1;
                said = arena_printf(arena, "%s%s%s", said, *said ? "; then: " : "", what);
            }
        if (*said)
            for (uint32_t k = 0; k < out->count; k++)
                if (strstr(out->items[k]->comment ? out->items[k]->comment : "", "register tile")) {
                    out->items[k]->comment = arena_printf(arena, "%s; epilogue: %s", out->items[k]->comment, said);
                    break;
                }
    }
    return true;
}
