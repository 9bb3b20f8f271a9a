/* sched.c — the schedule: per-target rewrites of the loop IR's nests (sched.h).
 *
 * Lowering (lower.c) states what each cell is: a reduction is the canonical nest
 *     for p… parallel:  l = init;  for r… reduction: l = step(l);  C[p…] = l
 * and this stage decides how it runs on the target, in Halide's terms the schedule of that
 * algorithm (docs/ir.md §5).  A nest over a run-time size is first strip-mined into nests of
 * compile-time sizes inside loops of blocks ("Strip-mining run-time loops" below, docs/ir.md
 * §5.2).  A scatter through a window (a convolution's input gradient) is first untangled into
 * canonical nests, one per window position, inside a parallel loop over its batch (rewrite 0,
 * untangle_scatter).  Three rewrites, tried on every top-level nest, then a fourth:
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
 *        - the pointwise nest right after, when it is C's only reader (a bias, an activation),
 *          is fused as the tiles' epilogue, and C gets no storage;
 *        - with enough batch cells, one nest over the batch packs and tiles a cell at a time.
 *      Every cell still starts from the same value and takes the same fma steps in the same
 *      reduction order, so the result is bit-identical to the canonical nest.
 *   2. Any other reduction whose innermost parallel iterator walks C and every load with
 *      stride 1 (or not at all) accumulates in place: the reduction loops move outside that
 *      iterator's loop, which becomes the inner loop of the nest and vectorises; each cell
 *      again takes the same steps in the same order.
 *   3. A large pointwise nest that writes a buffer it does not read, by whole aligned vectors,
 *      stores around the caches (`nontemporal`).
 *   4. Consecutive pointwise nests over loops of the same extents become one nest running their
 *      stores in order, when every buffer any of them stores is accessed by all of them at one
 *      index (fuse_pointwise): an optimiser's state and parameter updates in one pass.
 *   5. For the GPU only (instead of 1–3): a reduction nest computes a tile of cells per thread
 *      (gpu_thread_tiles); then sched_gpu.c maps the outer parallel loops onto the grid.
 *   6. For the GPU, before 5: a large contraction becomes a block's kernel staging its operands
 *      through shared memory (gpu_block_tiles).
 *   7. For the GPU, before 5: a reduction with few cells and many steps reduces each cell
 *      across a block of threads (gpu_block_reduction).
 *
 * The tile sizes come from the Target (target.c).  Packed panels and tiles are BUF_SCRATCH
 * buffers; a tile is kernel_local (each run of a kernel has its own).
 *
 * Requires: a verified, optimised IrProgram (lower.c, opt.c); runs before image_build() so
 * that the image allocates the scratch buffers. */
#include "sched/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

enum { MAX_LOOPS = 32, MAX_TERMS = 40, MAX_FUSED = 16 };

/* The replacement of an iterator by an affine expression of new iterators. */
typedef struct Affine {
    IrTerm terms[4];
    uint32_t count;
    int64_t offset;
} Affine;

typedef struct Sched {
    IrProgram *ir;
    IrFunction *fn;
    const Target *target;
    uint32_t old_iters;   /* iterators of the function before scheduling (the subst table's size) */
    Affine *subst;        /* per old iterator */
    bool *mapped;
    uint32_t scratch;     /* scratch buffers made so far (for names) */
    const uint32_t *outer_batch; /* while a contraction runs inside its batch loops: their iterators */
    bool local_scratch;   /* new scratch buffers are kernel_local (a nest inside a parallel loop) */
    double outer_cells;   /* iterations of the parallel loops around the nest being scheduled */
} Sched;

/* ---- Building and cloning IR ------------------------------------------------------------------- */

static IrStmt *new_loop(Sched *s, uint32_t iter, uint64_t extent, bool parallel, IrLoopMode mode) {
    IrStmt *l = arena_alloc(s->ir->arena, sizeof *l);
    *l = (IrStmt){.kind = IR_LOOP, .iter = iter, .extent = extent, .parallel = parallel, .mode = mode};
    return l;
}

static IrStmt *new_store(Sched *s, uint32_t buffer, IrIndex *index, IrExpr *value) {
    IrStmt *st = arena_alloc(s->ir->arena, sizeof *st);
    *st = (IrStmt){.kind = IR_STORE, .buffer = buffer, .index = index, .value = value};
    return st;
}

static IrExpr *new_load(Sched *s, uint32_t buffer, IrIndex *index) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_LOAD, .buffer = buffer, .index = index};
    return e;
}

static IrExpr *new_const(Sched *s, double v) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_CONST, .value = v};
    return e;
}

/* op(a, b, c), c NULL for a binary operation. */
static IrExpr *new_op(Sched *s, ScalarOp op, IrExpr *a, IrExpr *b, IrExpr *c) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_OP, .op = op, .args = {a, b, c}};
    return e;
}

/* fma(a, b, acc) of a contraction's step, its operands in the order the step had them. */
static IrExpr *new_step_fma(Sched *s, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc) {
    return new_op(s, SOP_FMA, b_first ? b : a, b_first ? a : b, acc);
}

/* The step of a contraction whose step is fma(x, y, l), or (a scatter's, rewrite 0) l + x·y
 * with two roundings, l on the side it had: `add` and `acc_first` say which. */
static IrExpr *new_step(Sched *s, bool add, bool acc_first, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc) {
    if (!add) return new_step_fma(s, b_first, a, b, acc);
    IrExpr *prod = new_op(s, SOP_MUL, b_first ? b : a, b_first ? a : b, NULL);
    return new_op(s, SOP_ADD, acc_first ? acc : prod, acc_first ? prod : acc, NULL);
}

static uint32_t new_iter(Sched *s) { return s->fn->iter_count++; }

/* A one-axis index: Σ terms. */
static IrIndex *flat_index(Sched *s, const IrTerm *terms, uint32_t count) {
    IrIndex *ix = arena_alloc(s->ir->arena, sizeof *ix);
    ix->terms = arena_alloc(s->ir->arena, (count ? count : 1) * sizeof *ix->terms);
    memcpy(ix->terms, terms, count * sizeof *terms);
    ix->term_count = count;
    return ix;
}

static void map_iter(Sched *s, uint32_t old, Affine a) {
    s->subst[old] = a;
    s->mapped[old] = true;
}

static Affine affine1(uint32_t iter, int64_t coef, int64_t offset) {
    return (Affine){.terms = {{iter, coef}}, .count = 1, .offset = offset};
}

static IrIndex *clone_index(Sched *s, const IrIndex *index, uint32_t rank) {
    IrIndex *ix = arena_alloc(s->ir->arena, (rank ? rank : 1) * sizeof *ix);
    for (uint32_t a = 0; a < rank; a++) {
        ix[a].offset = index[a].offset;
        ix[a].symbol = index[a].symbol;
        uint32_t n = 0;
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            uint32_t it = index[a].terms[t].iter;
            n += it < s->old_iters && s->mapped[it] ? s->subst[it].count : 1;
        }
        ix[a].terms = arena_alloc(s->ir->arena, (n ? n : 1) * sizeof *ix[a].terms);
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            IrTerm term = index[a].terms[t];
            if (term.iter < s->old_iters && s->mapped[term.iter]) {
                const Affine *af = &s->subst[term.iter];
                for (uint32_t k = 0; k < af->count; k++)
                    ix[a].terms[ix[a].term_count++] = (IrTerm){af->terms[k].iter, af->terms[k].coef * term.coef};
                ix[a].offset += af->offset * term.coef;
            } else {
                ix[a].terms[ix[a].term_count++] = term;
            }
        }
    }
    return ix;
}

/* A copy of e under the current substitution; a read of local `local` becomes `value`, and a
 * load of buffer `buffer` (when not UINT32_MAX) becomes `buffer_value`. */
typedef struct LocalRepl {
    uint32_t local;
    IrExpr *value;
    uint32_t buffer;
    IrExpr *buffer_value;
} LocalRepl;

static IrExpr *clone_expr(Sched *s, const IrExpr *e, const LocalRepl *repl) {
    IrExpr *c = arena_alloc(s->ir->arena, sizeof *c);
    *c = *e;
    switch (e->kind) {
    case IR_LOAD:
        if (repl && repl->buffer != UINT32_MAX && e->buffer == repl->buffer) return repl->buffer_value;
        c->index = clone_index(s, e->index, s->ir->buffers[e->buffer].rank);
        break;
    case IR_RANDOM: c->index = clone_index(s, e->index, s->ir->buffers[e->buffer].rank); break;
    case IR_LOCAL:
        if (repl && e->local == repl->local) return repl->value;
        break;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) c->args[i] = clone_expr(s, e->args[i], repl);
        break;
    case IR_CONST:
    case IR_SYMBOL: break;
    }
    return c;
}

static void reset_subst(Sched *s) {
    memset(s->mapped, 0, s->old_iters * sizeof *s->mapped);
}

static uint32_t new_scratch(Sched *s, const char *what, uint64_t size, bool kernel_local) {
    IrBuffer b = {.id = s->ir->buffer_count, .kind = BUF_SCRATCH, .rank = 1, .size = size, .init = INIT_NONE,
                  .kernel_local = kernel_local || s->local_scratch};
    b.dims = arena_alloc(s->ir->arena, sizeof *b.dims);
    b.dims[0] = size;
    b.name = arena_printf(s->ir->arena, "%s#s%u", what, s->scratch++);
    b.shape_text = arena_printf(s->ir->arena, "%llu", (unsigned long long)size);
    ARENA_PUSH(s->ir->arena, s->ir->buffers, s->ir->buffer_count, s->ir->buffer_cap, b);
    return b.id;
}

/* ---- Recognising the canonical reduction nest ----------------------------------------------------- */

typedef struct Reduction {
    IrStmt *par[MAX_LOOPS];   /* parallel loops, outermost first */
    uint32_t npar;
    IrStmt *red[MAX_LOOPS];   /* reduction loops, outermost first */
    uint32_t nred;
    IrStmt *init, *step, *store;
    uint32_t local;
} Reduction;

/* `l = init; for r… reduction: l = step; C[…] = l`: the three statements of a reduction's
 * cell, into r (its parallel loops aside). */
static bool match_steps(IrStmt *init, IrStmt *loop, IrStmt *store, Reduction *r) {
    if (init->kind != IR_SET_LOCAL || loop->kind != IR_LOOP || store->kind != IR_STORE ||
        store->value->kind != IR_LOCAL || store->value->local != init->local)
        return false;
    r->init = init;
    r->store = store;
    r->local = init->local;
    IrStmt *st = loop;
    while (st->kind == IR_LOOP && !st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1 &&
           r->nred < MAX_LOOPS) {
        r->red[r->nred++] = st;
        st = st->body.items[0];
    }
    if (st->kind != IR_SET_LOCAL || st->local != r->local) return false;
    r->step = st;
    return true;
}

static bool match_reduction(IrStmt *top, Reduction *r) {
    memset(r, 0, sizeof *r);
    IrStmt *st = top;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && r->npar < MAX_LOOPS) {
        r->par[r->npar++] = st;
        if (st->body.count == 1 && st->body.items[0]->kind == IR_LOOP && st->body.items[0]->parallel)
            st = st->body.items[0];
        else
            break;
    }
    if (r->npar == 0) return false;
    const IrBlock *body = &r->par[r->npar - 1]->body;
    return body->count == 3 && match_steps(body->items[0], body->items[1], body->items[2], r);
}

/* The coefficient of `iter` in the flat (row-major) offset of an access. */
static int64_t flat_coef(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter) {
    const IrBuffer *b = &ir->buffers[buffer];
    int64_t coef = 0, stride = 1;
    for (uint32_t a = b->rank; a-- > 0;) {
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == iter) coef += index[a].terms[t].coef * stride;
        stride *= (int64_t)b->dims[a];
    }
    return coef;
}

static bool mentions(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter) {
    for (uint32_t a = 0; a < ir->buffers[buffer].rank; a++)
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == iter) return true;
    return false;
}

/* Whether e reads local `local`; *bad when a load reads `avoid` or walks `iter` with a stride
 * other than 0 or 1. */
static bool scan_expr(const IrProgram *ir, const IrExpr *e, uint32_t local, uint32_t avoid, uint32_t iter, bool *bad) {
    switch (e->kind) {
    case IR_LOCAL: return e->local == local;
    case IR_LOAD: {
        int64_t c = flat_coef(ir, e->buffer, e->index, iter);
        if (e->buffer == avoid || (c != 0 && c != 1)) *bad = true;
        return false;
    }
    case IR_OP: {
        bool uses = false;
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) uses |= scan_expr(ir, e->args[i], local, avoid, iter, bad);
        return uses;
    }
    case IR_CONST:
    case IR_SYMBOL:
    case IR_RANDOM: break; /* computed from the cell's position, read from nowhere */
    }
    return false;
}

/* The initial value is the neutral constant (a reset) or the cell itself (an update). */
static bool init_is_plain(const IrProgram *ir, const Reduction *r) {
    const IrExpr *v = r->init->value;
    return v->kind == IR_CONST ||
           (v->kind == IR_LOAD && v->buffer == r->store->buffer && ir_same_index(ir, v->buffer, v->index, r->store->index));
}

/* ---- Rewrite 2: accumulating in place ------------------------------------------------------------- */

/* The statements that replace the nest go to `out` (the nest itself, rewritten, when it keeps
 * an outer parallel loop; else the cells' initial loop and the reduction loops). */
static bool accumulate_in_place(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (r->npar < 1 || r->nred == 0 || !init_is_plain(ir, r)) return false;
    IrStmt *inner = r->par[r->npar - 1];
    uint32_t c = r->store->buffer;
    if (flat_coef(ir, c, r->store->index, inner->iter) != 1) return false;
    bool bad = false;
    if (!scan_expr(ir, r->step->value, r->local, c, inner->iter, &bad) || bad) return false;

    /* l is the cell itself from here on. */
    reset_subst(s);
    IrExpr *cell = new_load(s, c, r->store->index);
    LocalRepl repl = {r->local, cell, UINT32_MAX, NULL};
    IrBlock *into = out;
    if (r->npar >= 2) {
        IrStmt *outer = r->par[r->npar - 2];
        outer->body = (IrBlock){0};
        into = &outer->body;
        ir_block_push(s->ir->arena, out, r->par[0]);
    } else if (r->par[0]->comment) {
        r->red[0]->comment = r->par[0]->comment;
    }
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

/* ---- Rewrite 1: register-tiled contractions -------------------------------------------------------- */

typedef struct Contraction {
    const Reduction *r;
    uint32_t c;                /* the result buffer */
    const IrExpr *a, *b;       /* the broadcast operand and the packed one */
    bool b_first;              /* the step is fma(b, a, l) */
    bool add, acc_first;       /* the step is l + x·y (acc_first) or x·y + l, not an fma */
    IrStmt *i_loop, *j_loop;
    IrStmt *batch[MAX_LOOPS];  /* the other parallel loops, outermost first */
    uint32_t nbatch;
    uint64_t k;                /* cells of the reduction */
    bool strided_lanes;        /* J walks C with a stride other than 1 (find_contraction's `narrow`) */
} Contraction;

/* The loop I for lanes J: the innermost other parallel loop that walks C and A but not B. */
static IrStmt *find_rows(const IrProgram *ir, const Reduction *r, const Contraction *ct) {
    for (uint32_t in = r->npar; in-- > 0;) {
        uint32_t i = r->par[in]->iter;
        if (r->par[in] == ct->j_loop) continue;
        if (flat_coef(ir, ct->c, r->store->index, i) != 0 && mentions(ir, ct->a->buffer, ct->a->index, i) &&
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
static bool find_contraction(const IrProgram *ir, const Reduction *r, Contraction *ct, bool allow_add,
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
        if (flat_coef(ir, ct->c, r->store->index, j) != 1) continue;
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
                flat_coef(ir, ct->c, r->store->index, lj->iter) == 0)
                continue;
            bool in_x = flat_coef(ir, x->buffer, x->index, lj->iter) == 1 && !mentions(ir, y->buffer, y->index, lj->iter);
            bool in_y = flat_coef(ir, y->buffer, y->index, lj->iter) == 1 && !mentions(ir, x->buffer, x->index, lj->iter);
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

/* A pointwise nest that reads a contraction's result C cell by cell, right after it — a bias, an
 * activation, `logits =: b + w * h`, an update `w =- lr * w.grad`.  When it is C's only reader
 * and C is not observable, the tile stores its value instead of C's, and C needs no storage;
 * otherwise (`keep_c`) the tile stores both, and the nest's pass over C is saved. */
typedef struct Epilogue {
    IrStmt *nest;
    const IrStmt *store;          /* D[…] = f(…, C[cell], …) */
    uint32_t axis_iter[MAX_LOOPS]; /* per axis of C: the nest's iterator that walks it (UINT32_MAX: a size-one axis) */
    bool keep_c;                  /* C is stored too */
} Epilogue;

static unsigned stmt_reads(const IrStmt *st, uint32_t buffer) {
    switch (st->kind) {
    case IR_LOOP: {
        unsigned n = 0;
        for (uint32_t i = 0; i < st->body.count; i++) n += stmt_reads(st->body.items[i], buffer);
        return n;
    }
    case IR_STORE: return ir_expr_loads(st->value, buffer);
    case IR_SET_LOCAL: return ir_expr_loads(st->value, buffer);
    case IR_BARRIER: return 0;
    }
    return 0;
}

/* The stores into `buffer` in st. */
static unsigned stmt_stores(const IrStmt *st, uint32_t buffer) {
    if (st->kind == IR_STORE) return st->buffer == buffer;
    unsigned n = 0;
    if (st->kind == IR_LOOP)
        for (uint32_t i = 0; i < st->body.count; i++) n += stmt_stores(st->body.items[i], buffer);
    return n;
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

/* Every load of `buffer` in e is at `index`. */
static bool loads_only_at(const IrProgram *ir, const IrExpr *e, uint32_t buffer, const IrIndex *index) {
    switch (e->kind) {
    case IR_LOAD: return e->buffer != buffer || ir_same_index(ir, buffer, e->index, index);
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!loads_only_at(ir, e->args[i], buffer, index)) return false;
        return true;
    default: return true;
    }
}

/* Whether the reduction stores every cell of C: each axis of C is one of its parallel loops,
 * with C's size, from 0 (or a size-one axis at 0).  A padded window's nests each store a part of
 * C (the border positions apart from the interior), and none of them may take the epilogue:
 * it would compute the next nest's cells only where that part lies. */
static bool stores_every_cell(const IrProgram *ir, const Reduction *r) {
    const IrStmt *st = r->store;
    const IrBuffer *cb = &ir->buffers[st->buffer];
    for (uint32_t a = 0; a < cb->rank; a++) {
        const IrIndex *ix = &st->index[a];
        if (ix->symbol || ix->offset) return false;
        if (ix->term_count == 0) {
            if (cb->dims[a] != 1) return false;
            continue;
        }
        if (ix->term_count != 1 || ix->terms[0].coef != 1) return false;
        bool full = false;
        for (uint32_t k = 0; k < r->npar; k++)
            if (r->par[k]->iter == ix->terms[0].iter) full = r->par[k]->extent == cb->dims[a];
        for (uint32_t b = 0; b < a; b++)
            if (st->index[b].term_count == 1 && st->index[b].terms[0].iter == ix->terms[0].iter) full = false;
        if (!full) return false;
    }
    return true;
}

static bool find_epilogue(const Sched *s, const Reduction *r, IrStmt *next, Epilogue *ep) {
    const IrProgram *ir = s->ir;
    uint32_t c = r->store->buffer;
    const IrBuffer *cb = &ir->buffers[c];
    if (!next || next->kind != IR_LOOP || cb->kind != BUF_COMPUTED || cb->rank > MAX_LOOPS) return false;
    if (!stores_every_cell(ir, r)) return false;
    memset(ep, 0, sizeof *ep);
    ep->nest = next;
    const IrStmt *st = next;
    const IrStmt *loops[MAX_LOOPS];
    uint32_t nloops = 0;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1 && nloops < MAX_LOOPS) {
        loops[nloops++] = st;
        st = st->body.items[0];
    }
    if (st->kind != IR_STORE || st->buffer == c || nloops == 0) return false;
    ep->store = st;
    bool seen = false;
    for (uint32_t a = 0; a < cb->rank; a++) ep->axis_iter[a] = UINT32_MAX;
    if (!loads_cellwise(ir, st->value, c, ep->axis_iter, &seen) || !seen) return false;
    /* The nest's loops are C's axes, one for one, with C's sizes. */
    uint32_t covered = 0;
    for (uint32_t a = 0; a < cb->rank; a++) {
        if (ep->axis_iter[a] == UINT32_MAX) continue;
        bool found = false;
        for (uint32_t k = 0; k < nloops; k++)
            if (loops[k]->iter == ep->axis_iter[a]) found = loops[k]->extent == cb->dims[a];
        for (uint32_t b = 0; b < a; b++) found &= ep->axis_iter[b] != ep->axis_iter[a];
        if (!found) return false;
        covered++;
    }
    if (covered != nloops) return false;
    for (uint32_t a = 0; a < cb->rank; a++) /* C's own size-one axes are stored at 0 too */
        if (ep->axis_iter[a] == UINT32_MAX && (r->store->index[a].term_count || r->store->index[a].offset)) return false;
    /* The nest reads D only at the cell it stores (an update in place), so running it tile by
     * tile reads what it would have read. */
    if (!loads_only_at(ir, st->value, st->buffer, st->index)) return false;
    /* Unless C is observable or has another reader or writer anywhere in the program, it needs
     * no storage.  (Another routine that computes the same tensor, whose own tile was scheduled
     * first and kept C because this nest read it then, still stores C.) */
    unsigned readers = 0, writers = 0;
    for (uint32_t f = 0; f < ir->function_count; f++)
        for (uint32_t i = 0; i < ir->functions[f].body.count; i++) {
            readers += stmt_reads(ir->functions[f].body.items[i], c) ? 1 : 0;
            writers += stmt_stores(ir->functions[f].body.items[i], c) ? 1 : 0;
        }
    ep->keep_c = cb->keep || cb->persistent || readers != 1 || writers != 1;
    return true;
}

/* The store of one cell of the tile, at the current substitution: C[cell] = T, or with an
 * epilogue D[…] = f(…, T, …). */
static IrStmt *cell_store(Sched *s, const Reduction *r, const Epilogue *ep, IrExpr *tile_value) {
    uint32_t c = r->store->buffer, rank = s->ir->buffers[c].rank;
    IrIndex *cell = clone_index(s, r->store->index, rank);
    if (!ep) return new_store(s, c, cell, tile_value);
    for (uint32_t a = 0; a < rank; a++) {
        if (ep->axis_iter[a] == UINT32_MAX) continue;
        Affine af = {.offset = cell[a].offset};
        for (uint32_t t = 0; t < cell[a].term_count && af.count < 4; t++) af.terms[af.count++] = cell[a].terms[t];
        map_iter(s, ep->axis_iter[a], af);
    }
    LocalRepl repl = {UINT32_MAX, NULL, c, tile_value};
    const IrStmt *st = ep->store;
    return new_store(s, st->buffer, clone_index(s, st->index, s->ir->buffers[st->buffer].rank),
                     clone_expr(s, st->value, &repl));
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
    bool batch[MAX_LOOPS];     /* which of ct->batch index the operand (and so the panels) */
    bool in_place;             /* the full blocks are read where the operand is (read_in_place);
                                * only a last partial block is packed */
    uint64_t first_packed;     /* the first block the buffer holds (pk->full when in_place) */
} Packed;

/* Σ batch·stride + (panel + first)·(K·width) + (row-major reduction position)·width, added to
 * `t` (which holds the lane terms). */
static void panel_terms(const Contraction *ct, const Packed *pk, const uint32_t *batch_iter, uint32_t panel_iter,
                        uint64_t first, const uint32_t *red_iter, Terms *t) {
    const Reduction *r = ct->r;
    uint64_t blocks = pk->full + (pk->rem != 0) - pk->first_packed;
    int64_t stride = (int64_t)(blocks * ct->k * pk->width);
    for (uint32_t k = ct->nbatch; k-- > 0;) {
        if (!pk->batch[k]) continue;
        add_term(t, batch_iter[k], stride);
        stride *= (int64_t)ct->batch[k]->extent;
    }
    if (panel_iter != UINT32_MAX) add_term(t, panel_iter, (int64_t)(ct->k * pk->width));
    t->offset += (int64_t)((first - pk->first_packed) * ct->k * pk->width);
    int64_t rs = (int64_t)pk->width;
    for (uint32_t k = r->nred; k-- > 0;) {
        add_term(t, red_iter[k], rs);
        rs *= (int64_t)r->red[k]->extent;
    }
}

/* Append `loop` inside the nest being built (*top is its outermost loop, *into the body new
 * loops go in). */
static void nest_push(Sched *s, IrStmt **top, IrBlock **into, IrStmt *loop) {
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
    uint64_t w = s->target->vector_floats;
    if (w < 2 || r->red[r->nred - 1]->extent < w || lanes < 2) return false;
    if (flat_coef(s->ir, e->buffer, e->index, r->red[r->nred - 1]->iter) != 1) return false;
    int64_t along = flat_coef(s->ir, e->buffer, e->index, pk->lane_loop->iter);
    return along != 0 && along != 1 && (lanes <= w || lanes % w == 0);
}

/* The store of the copy P[…] = operand, at the current substitution: `t` holds the lane terms,
 * red_iter the iterators of the reduction position (the innermost may be UINT32_MAX when `t`
 * already holds its terms). */
static IrStmt *pack_store(Sched *s, const Contraction *ct, const Packed *pk, const uint32_t *batch_iter,
                          uint32_t panel, uint64_t first, const uint32_t *red_iter, Terms t) {
    panel_terms(ct, pk, batch_iter, panel, first, red_iter, &t);
    return new_store(s, pk->buffer, terms_index(s, &t), clone_expr(s, pk->operand, NULL));
}

/* Narrow blocks of an operand whose reduction steps are a page or more apart (A of a transposed
 * product, a[k, i], in rows of 6) are copied a group of blocks at a time, the group's loop
 * outside the reduction loops: one pass down the operand per group, reading up to 128 adjacent
 * values of each step, where a pass per block touches every page of the operand for 6 values (a
 * TLB miss per step).  The blocks of a group: the largest divisor of `blocks` that keeps it
 * within 128 values, or 1. */
static uint64_t pack_group(const Sched *s, const Contraction *ct, const Packed *pk, uint64_t blocks, uint64_t lanes) {
    const Reduction *r = ct->r;
    uint64_t group = 1;
    if (!pack_transposes(s, ct, pk, lanes) && lanes == pk->width &&
        flat_coef(s->ir, pk->operand->buffer, pk->operand->index, pk->lane_loop->iter) == 1 &&
        flat_coef(s->ir, pk->operand->buffer, pk->operand->index, r->red[r->nred - 1]->iter) * 4 >= 4096)
        for (uint64_t g = 2; g <= blocks && g * pk->width <= 128; g++)
            if (blocks % g == 0) group = g;
    return group;
}

/* One packing nest: for batch…, block < blocks (from block `first`), reduction…, lane < lanes:
 * P[…] = operand at lane loop = block·width + lane (or 0 for the padding lanes [lanes, width)),
 * `group` blocks a pass (pack_group; 1: a pass per block).
 * A transposing pack (pack_transposes) splits the innermost reduction loop into blocks of W (the
 * vector width) and the lanes into blocks of at most W, and copies each W×W block with one
 * LOOP_TRANSPOSE; the reduction cells past the last whole block are copied plainly. */
static IrStmt *pack_nest(Sched *s, const Contraction *ct, const Packed *pk, uint64_t first, uint64_t blocks,
                         uint64_t lanes, uint64_t group) {
    Arena *arena = s->ir->arena;
    const Reduction *r = ct->r;
    bool transpose = pack_transposes(s, ct, pk, lanes);
    uint32_t outer_red = transpose ? r->nred - 1 : r->nred, last = r->nred - 1;
    reset_subst(s);
    uint32_t batch_iter[MAX_LOOPS], red_iter[MAX_LOOPS];
    IrStmt *top = NULL;
    IrBlock *into = NULL;
    batch_loops(s, ct, pk->batch, batch_iter, &top, &into);
    uint32_t panel = new_iter(s), lane = new_iter(s);
    uint32_t group_iter = group > 1 ? new_iter(s) : UINT32_MAX;
    if (group > 1) nest_push(s, &top, &into, new_loop(s, group_iter, blocks / group, true, LOOP_PLAIN));
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
        uint64_t w = s->target->vector_floats, lane_block = lanes < w ? lanes : w;
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
        add_term(&t, group_iter, (int64_t)(group * ct->k * pk->width));
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
        panel_terms(ct, pk, batch_iter, panel, first, red_iter, &tp);
        ir_block_push(arena, &pad->body, new_store(s, pk->buffer, terms_index(s, &tp), new_const(s, 0)));
        ir_block_push(arena, pad_into, pad);
    }
    return top;
}

/* Whether the tiles read an operand's full blocks where it is instead of from panels.  Packing
 * copies the operand once per call, which costs as much as a pass over it; it pays where the
 * layout would make the tiles' reads slow.  A, broadcast one value per row and reduction step,
 * is read in place when it moves by one cell along the innermost reduction loop: MR sequential
 * streams, or when its MR rows are adjacent and a step moves by at most a cache line.  B, whose
 * NR lanes are read as vectors, is read in place when its reduction steps are not a multiple of
 * 4 KiB apart (steps at such strides fall into the same cache sets and evict each other) and it
 * is at most half of the L2 cache, so that a block stays there while the tiles sweep the other
 * operand.  Never when the epilogue writes the operand's buffer (the tiles must read it first). */
static bool read_in_place(const Sched *s, const Contraction *ct, const IrExpr *operand, const IrStmt *lane_loop,
                          bool broadcast, const Epilogue *ep) {
    const IrProgram *ir = s->ir;
    const Reduction *r = ct->r;
    if (ep && ep->store->buffer == operand->buffer) return false;
    int64_t along_lane = flat_coef(ir, operand->buffer, operand->index, lane_loop->iter);
    int64_t along_red = flat_coef(ir, operand->buffer, operand->index, r->red[r->nred - 1]->iter);
    /* A broadcast operand is read one value at a time, so in place whenever each step's values
     * lie together: along the reduction (A's rows), or a block of adjacent rows that moves by at
     * most a cache line per step (a window of channels). */
    if (broadcast && (along_red == 1 || (along_lane == 1 && along_red > 0 && along_red <= 16))) return true;
    /* Steps a cache line or more apart (a transposed A: MR values of a new line each step) are
     * packed: in place, lines at a stride of 1 KiB fall into a few cache sets, which B's panel
     * shares (C = Aᵀ·B at n = 256 on a Zen 3: 70 GFLOP/s in place, 93 packed). */
    if (broadcast) return false;
    const IrBuffer *b = &ir->buffers[operand->buffer];
    return along_lane == 1 && (along_red * 4) % 4096 != 0 && (double)b->size * 4.0 <= (double)s->target->l2_bytes / 2;
}

/* Pack `operand` (its full blocks unless they are read in place, then a padded last block) into
 * nests appended to `out`. */
static void pack_operand(Sched *s, const Contraction *ct, const IrExpr *operand, const IrStmt *lane_loop,
                         uint64_t width, const char *what, bool in_place, Packed *pk, IrBlock *out) {
    Arena *arena = s->ir->arena;
    *pk = (Packed){.operand = operand, .lane_loop = lane_loop, .width = width, .full = lane_loop->extent / width,
                   .rem = lane_loop->extent % width};
    pk->in_place = in_place && pk->full;
    pk->first_packed = pk->in_place ? pk->full : 0;
    for (uint32_t k = 0; k < ct->nbatch; k++)
        pk->batch[k] = mentions(s->ir, operand->buffer, operand->index, ct->batch[k]->iter);
    if (pk->in_place && !pk->rem) return;
    uint64_t cells = (pk->full + (pk->rem != 0) - pk->first_packed) * ct->k * width;
    for (uint32_t k = 0; k < ct->nbatch; k++)
        if (pk->batch[k]) cells *= ct->batch[k]->extent;
    pk->buffer = new_scratch(s, arena_printf(arena, "%s.%s", s->ir->buffers[operand->buffer].name, what), cells, false);
    const char *comment = arena_printf(arena, "schedule: pack %s into panels of %llu for the register tile",
                                       s->ir->buffers[operand->buffer].name, (unsigned long long)width);
    if (pk->full && !pk->in_place) {
        uint64_t group = pack_group(s, ct, pk, pk->full, width);
        IrStmt *nest = pack_nest(s, ct, pk, 0, pk->full, width, group);
        if (group > 1) comment = arena_printf(arena, "%s, %llu panels a pass", comment, (unsigned long long)group);
        nest->comment = comment;
        comment = NULL;
        ir_block_push(arena, out, nest);
    }
    if (pk->rem) {
        IrStmt *nest = pack_nest(s, ct, pk, pk->full, 1, pk->rem, 1);
        nest->comment = comment ? comment : "schedule: the last panel, padded with zeros";
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

/* One tile nest over row blocks [row0, row0+rows) and panels [col0, col0+cols), appended to
 * `out`: for batch, the two block loops: T = init; for r: T = fma(A, B, T); then the first
 * `store_rows` rows and `store_cols` columns of T go to C. */
static void tile_nest(Sched *s, const Tiling *tl, uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols,
                      uint64_t store_rows, uint64_t store_cols, IrBlock *out) {
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
    uint32_t jo = cols > 1 ? new_iter(s) : UINT32_MAX, io = rows > 1 ? new_iter(s) : UINT32_MAX;
    IrStmt *jl_ = jo != UINT32_MAX ? new_loop(s, jo, cols, true, LOOP_PLAIN) : NULL;
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
#define TILE_WIDE(stmt_expr, block)                                                         \
    do {                                                                                    \
        IrStmt *l_ii = new_loop(s, ii, mr, true, LOOP_UNROLL);                              \
        IrStmt *l_jv = new_loop(s, jv, nv, true, LOOP_UNROLL);                              \
        IrStmt *l_jl = new_loop(s, jl, w, true, LOOP_VECTOR);                               \
        ir_block_push(arena, &l_jl->body, (stmt_expr));                                     \
        ir_block_push(arena, &l_jv->body, l_jl);                                            \
        ir_block_push(arena, &l_ii->body, l_jv);                                            \
        ir_block_push(arena, (block), l_ii);                                                \
    } while (0)

    /* The initial value: 0, or C's cell (read only where C has cells: a partial tile starts
     * its padding lanes at 0). */
    if (r->init->value->kind == IR_CONST || (store_rows == mr && store_cols == nr)) {
        IrExpr *init = clone_expr(s, r->init->value, NULL);
        TILE_WIDE(new_store(s, tl->tile, flat_index(s, cell, 3), init), body);
    } else {
        TILE_WIDE(new_store(s, tl->tile, flat_index(s, cell, 3), new_const(s, 0)), body);
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
    IrBlock *red_into = body;
    uint32_t red_iter[MAX_LOOPS] = {0};
    for (uint32_t k = 0; k < r->nred; k++) {
        red_iter[k] = new_iter(s);
        IrStmt *l = new_loop(s, red_iter[k], r->red[k]->extent, false, LOOP_PLAIN);
        ir_block_push(arena, red_into, l);
        red_into = &l->body;
    }
    Terms at = {0}, bt = {0};
    add_term(&at, ii, 1);
    panel_terms(ct, tl->pa, batch_iter, io, row0, red_iter, &at);
    add_term(&bt, jv, (int64_t)w);
    add_term(&bt, jl, 1);
    panel_terms(ct, tl->pb, batch_iter, jo, col0, red_iter, &bt);
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
        if (tl->epilogue && tl->epilogue->keep_c)
            TILE_WIDE(cell_store(s, r, NULL, new_load(s, tl->tile, flat_index(s, cell, 3))), body);
        TILE_WIDE(cell_store(s, r, tl->epilogue, new_load(s, tl->tile, flat_index(s, cell, 3))), body);
    } else { /* the cells C has: rows unrolled (the tile stays in registers), each a vector of its cells */
        uint32_t jr = new_iter(s);
        Affine aj2 = {.terms = {{jr, 1}}, .count = 1, .offset = (int64_t)(col0 * nr)};
        if (jo != UINT32_MAX) aj2.terms[aj2.count++] = (IrTerm){jo, (int64_t)nr};
        map_iter(s, ct->j_loop->iter, aj2);
        IrTerm part[2] = {{ii, (int64_t)nr}, {jr, 1}};
        IrStmt *l_ii = new_loop(s, ii, store_rows, true, LOOP_UNROLL);
        IrStmt *l_jr = new_loop(s, jr, store_cols, true, store_cols > 1 ? LOOP_VECTOR : LOOP_UNROLL);
        if (tl->epilogue && tl->epilogue->keep_c)
            ir_block_push(arena, &l_jr->body, cell_store(s, r, NULL, new_load(s, tl->tile, flat_index(s, part, 2))));
        ir_block_push(arena, &l_jr->body, cell_store(s, r, tl->epilogue, new_load(s, tl->tile, flat_index(s, part, 2))));
        ir_block_push(arena, &l_ii->body, l_jr);
        ir_block_push(arena, body, l_ii);
    }
#undef TILE_WIDE
    top->comment = arena_printf(arena, "schedule: register tile %llux%llu of %s over %llu reduction cells%s%s%s%s",
                                (unsigned long long)mr, (unsigned long long)nr, s->ir->buffers[c].name,
                                (unsigned long long)ct->k, ct->strided_lanes ? ", lanes strided in the result" : "",
                                !tl->epilogue           ? ""
                                : tl->epilogue->keep_c ? ", stored, and through the epilogue into "
                                                       : ", stored through the epilogue into ",
                                tl->epilogue ? s->ir->buffers[tl->epilogue->store->buffer].name : "",
                                store_rows < mr && store_cols < nr ? " (the last rows and columns)"
                                : store_rows < mr                  ? " (the last rows)"
                                : store_cols < nr                  ? " (the last columns)"
                                                                   : "");
    ir_block_push(arena, out, top);
}

/* Tile the contraction `r`; `next` is the statement after it, fused as its epilogue when it is
 * one (*fused says so). */
static bool tile_contraction(Sched *s, const Reduction *r, IrStmt *next, IrBlock *out, bool *fused) {
    Contraction ct;
    *fused = false;
    if (!find_contraction(s->ir, r, &ct, true, s->target->vector_floats)) return false;
    /* The target's tile, narrowed to the result when it has fewer rows or vector columns: the
     * narrowest vector (of at least 4 floats) that holds half the columns or more (6 columns take
     * one vector of 8, 10 columns one vector of 16 on AVX-512: one operation where two narrower
     * ones would cover the same lanes). */
    const Target *tg = s->target;
    uint64_t ni = ct.i_loop->extent, nj = ct.j_loop->extent, w = tg->vector_floats;
    while (w > 4 && 2 * nj <= w) w /= 2;
    uint64_t vectors = (nj + w - 1) / w;
    uint64_t nv = vectors < tg->tile_vectors ? vectors : tg->tile_vectors;
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
    /* Worth it: 16384 multiply-adds in all, and 512 per batch cell. */
    double cell_work = (double)ni * (double)nj * (double)ct.k;
    if (cell_work * batch_cells * s->outer_cells < 16384.0 || cell_work < 512.0 || r->nred > MAX_LOOPS - 8)
        return false;
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
    *fused = !ct.strided_lanes && find_epilogue(s, r, next, &ep);
    pack_operand(s, &ct, ct.b, ct.j_loop, nr, "panels", read_in_place(s, &ct, ct.b, ct.j_loop, false, *fused ? &ep : NULL),
                 &pb, out);
    pack_operand(s, &ct, ct.a, ct.i_loop, mr, "rows", read_in_place(s, &ct, ct.a, ct.i_loop, true, *fused ? &ep : NULL),
                 &pa, out);
    /* A packed A is one stream read a value at a time, which the hardware prefetcher follows
     * too late: prefetched ahead, a transposed product at n = 2048 ran 12 % faster. */
    if (!pa.in_place && pa.full) s->ir->buffers[pa.buffer].prefetch_cells = s->target->prefetch_cells;
    Tiling tl = {&ct, *fused ? &ep : NULL, &pa, &pb, w, nv, mr, nr,
                 new_scratch(s, arena_printf(arena, "%s.tile", s->ir->buffers[ct.c].name), mr * nr, true)};

    /* Full tiles, then the last panel (partial columns), the last row block (partial rows), and
     * their corner: every cell of C once. */
    if (pa.full && pb.full) tile_nest(s, &tl, 0, pa.full, 0, pb.full, mr, nr, out);
    if (pa.full && pb.rem) tile_nest(s, &tl, 0, pa.full, pb.full, 1, mr, pb.rem, out);
    if (pa.rem && pb.full) tile_nest(s, &tl, pa.full, 1, 0, pb.full, pa.rem, nr, out);
    if (pa.rem && pb.rem) tile_nest(s, &tl, pa.full, 1, pb.full, 1, pa.rem, pb.rem, out);
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
        if (next->comment)
            for (uint32_t k = 0; k < out->count; k++)
                if (strstr(out->items[k]->comment ? out->items[k]->comment : "", "register tile")) {
                    out->items[k]->comment = arena_printf(arena, "%s; epilogue: %s", out->items[k]->comment, next->comment);
                    break;
                }
    }
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
        ir_expr_loads(e, c) || (is_fma && ir_expr_loads(v->args[1], c)))
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
    *acc = (IrExpr){.kind = IR_LOCAL, .local = l};
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
    bool fused;
    s->local_scratch = batch > 1;
    s->outer_cells = batch;
    if (r.nred && tile_contraction(s, &r, NULL, &tiled, &fused)) {
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
        int64_t c = flat_coef(ir, e->buffer, e->index, iter);
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
    uint64_t w = s->target->vector_floats;
    if (!inner || st->kind != IR_STORE) return false;
    const IrBuffer *b = &ir->buffers[st->buffer];
    if ((double)b->size * 4.0 < (double)s->target->nontemporal_bytes || inner->extent % w || inner->extent < w) return false;
    uint32_t it = inner->iter;
    for (uint32_t a = 0; a < b->rank; a++)
        if (st->index[a].symbol) return false;
    if (flat_coef(ir, st->buffer, st->index, it) != 1 || flat_offset_const(ir, st->buffer, st->index) % (int64_t)w)
        return false;
    /* Every other iterator moves the store by whole vectors, so each vector starts aligned. */
    for (IrStmt *l = top; l != inner; l = l->body.items[0])
        if (flat_coef(ir, st->buffer, st->index, l->iter) % (int64_t)w) return false;
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

/* ---- Rewrite 4: fusing neighbouring pointwise nests -------------------------------------------------- */

static bool reads_local(const IrExpr *e) {
    if (e->kind == IR_LOCAL) return true;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (reads_local(e->args[i])) return true;
    return false;
}

/* The store of a pointwise nest — plain parallel loops, each with a one-statement body, around
 * one store that reads no local — and its loops; NULL for any other statement. */
static IrStmt *pointwise_store(IrStmt *top, IrStmt **loops, uint32_t *nloops) {
    IrStmt *st = top;
    *nloops = 0;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && st->body.count == 1 && *nloops < MAX_LOOPS) {
        loops[(*nloops)++] = st;
        st = st->body.items[0];
    }
    return *nloops && st->kind == IR_STORE && !st->nontemporal && !reads_local(st->value) ? st : NULL;
}

/* Whether store `b` can join the stores `group` (all over the same cells, in order) without
 * changing what any of them reads: every buffer either side stores is accessed, by both sides,
 * only at one index, so each cell's statements still see each other's values as before. */
static bool joins(const IrProgram *ir, const IrBlock *group, const IrStmt *b) {
    for (uint32_t k = 0; k < group->count; k++) {
        const IrStmt *a = group->items[k];
        if (a->buffer == b->buffer && !ir_same_index(ir, a->buffer, a->index, b->index)) return false;
        if (!loads_only_at(ir, b->value, a->buffer, a->index)) return false;
        if (!loads_only_at(ir, a->value, b->buffer, b->index)) return false;
    }
    return true;
}

/* Consecutive pointwise nests over loops of the same extents — an optimiser's updates of its
 * state and of the parameter, a forward chain with several outputs — become one nest whose body
 * runs their stores in order, one pass over memory instead of one per nest (joins() keeps each
 * cell's values).  At most MAX_FUSED stores a nest: the check is quadratic in them, and one
 * kernel of thousands of statements would be more than LLVM should see at once. */
static void fuse_pointwise(Sched *s) {
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    IrStmt *group_loops[MAX_LOOPS], *loops[MAX_LOOPS];
    uint32_t group_n = 0, n;
    IrBlock *group = NULL;
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *top = fn->body.items[i];
        IrStmt *st = pointwise_store(top, loops, &n);
        bool same = group && st && n == group_n && group->count < MAX_FUSED;
        for (uint32_t k = 0; same && k < n; k++)
            same = loops[k]->extent == group_loops[k]->extent && loops[k]->iter < s->old_iters;
        if (same) {
            reset_subst(s);
            for (uint32_t k = 0; k < n; k++) map_iter(s, loops[k]->iter, affine1(group_loops[k]->iter, 1, 0));
            IrStmt *moved = new_store(s, st->buffer, clone_index(s, st->index, s->ir->buffers[st->buffer].rank),
                                      clone_expr(s, st->value, NULL));
            if (joins(s->ir, group, moved)) {
                ir_block_push(s->ir->arena, group, moved);
                IrStmt *head = body.items[body.count - 1];
                const char *what = top->comment ? top->comment : "a pointwise nest";
                head->comment = arena_printf(s->ir->arena, "%s; schedule: fused with the next nest: %s",
                                             head->comment ? head->comment : "a pointwise nest", what);
                continue;
            }
        }
        group = st ? &loops[n - 1]->body : NULL;
        group_n = n;
        memcpy(group_loops, loops, n * sizeof *loops);
        ir_block_push(s->ir->arena, &body, top);
    }
    fn->body = body;
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
 * its loop's extent (no ragged tiles); otherwise the nest is left for sched_gpu.c as it is. */

enum { GPU_MIN_THREADS = 1 << 15, GPU_MAX_TILE = 8, REDUCTION_UNROLL = 4 };

/* The largest power of two at most `most` that divides `extent`. */
static uint32_t tile_side(uint64_t extent, uint32_t most) {
    uint32_t t = most;
    while (t > 1 && extent % t) t /= 2;
    return t;
}

typedef struct ThreadTile {
    IrStmt *i, *j;      /* the loops tiled */
    uint32_t io, jo;    /* the loops over tiles */
    uint32_t tm, tn;
    uint32_t tile;      /* the kernel-local accumulators, tm·tn cells */
    uint32_t k, ko, ku, unroll; /* the innermost reduction loop split: k = ko·unroll + ku (unroll > 1) */
} ThreadTile;

/* Unrolled loops over a tile's rows r and columns c in `into`, with i and j mapped onto them;
 * returns the body to fill and the iterators. */
static IrBlock *tile_cells(Sched *s, const ThreadTile *t, IrBlock *into, uint32_t *r, uint32_t *c) {
    *r = new_iter(s);
    *c = new_iter(s);
    IrStmt *rows = new_loop(s, *r, t->tm, true, LOOP_UNROLL), *cols = new_loop(s, *c, t->tn, true, LOOP_UNROLL);
    ir_block_push(s->ir->arena, &rows->body, cols);
    ir_block_push(s->ir->arena, into, rows);
    reset_subst(s);
    map_iter(s, t->i->iter, (Affine){.terms = {{t->io, t->tm}, {*r, 1}}, .count = 2});
    map_iter(s, t->j->iter, (Affine){.terms = {{t->jo, t->tn}, {*c, 1}}, .count = 2});
    if (t->unroll > 1) map_iter(s, t->k, (Affine){.terms = {{t->ko, t->unroll}, {t->ku, 1}}, .count = 2});
    return &cols->body;
}

/* The tile's cell (r, c). */
static IrIndex *tile_index(Sched *s, const ThreadTile *t, uint32_t r, uint32_t c) {
    IrTerm terms[2] = {{r, t->tn}, {c, 1}};
    return flat_index(s, terms, 2);
}

static bool gpu_thread_tiles(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    if (r->npar < 2 || r->nred == 0) return false;
    uint32_t c = r->store->buffer;
    if (!loads_only_at(ir, r->init->value, c, r->store->index) || !loads_only_at(ir, r->step->value, c, r->store->index))
        return false;
    ThreadTile t = {.i = r->par[r->npar - 2], .j = r->par[r->npar - 1]};
    double batch = 1;
    for (uint32_t k = 0; k + 2 < r->npar; k++) batch *= (double)r->par[k]->extent;
    uint32_t most = GPU_MAX_TILE;
    for (; most >= 2; most /= 2) {
        t.tm = tile_side(t.i->extent, most);
        t.tn = tile_side(t.j->extent, most);
        if (t.tm * t.tn >= 4 && batch * (double)(t.i->extent / t.tm) * (double)(t.j->extent / t.tn) >= GPU_MIN_THREADS)
            break;
    }
    if (most < 2) return false;
    t.io = new_iter(s);
    t.jo = new_iter(s);
    t.tile = new_scratch(s, "tile", (uint64_t)t.tm * t.tn, true);
    IrStmt *over_i = new_loop(s, t.io, t.i->extent / t.tm, true, LOOP_PLAIN);
    IrStmt *over_j = new_loop(s, t.jo, t.j->extent / t.tn, true, LOOP_PLAIN);
    /* sched_gpu.c gives over_j a row of threads and over_i one per block: a block's threads
     * then share the rows of the broadcast operand, one load each for a whole warp (square
     * blocks of 16×16, 32×8, 8×32 and 32×4 threads ran 8–15 % slower on an H100:
     * docs/performance.md). */
    ir_block_push(s->ir->arena, &over_i->body, over_j);
    const char *what = r->par[0]->comment ? r->par[0]->comment : "a reduction";
    uint32_t rr, cc;
    /* Every cell's initial value. */
    IrBlock *body = tile_cells(s, &t, &over_j->body, &rr, &cc);
    ir_block_push(s->ir->arena, body, new_store(s, t.tile, tile_index(s, &t, rr, cc), clone_expr(s, r->init->value, NULL)));
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
    body = tile_cells(s, &t, into, &rr, &cc);
    LocalRepl repl = {r->local, new_load(s, t.tile, tile_index(s, &t, rr, cc)), UINT32_MAX, NULL};
    ir_block_push(s->ir->arena, body, new_store(s, t.tile, tile_index(s, &t, rr, cc), clone_expr(s, r->step->value, &repl)));
    /* The cells stored. */
    body = tile_cells(s, &t, &over_j->body, &rr, &cc);
    ir_block_push(s->ir->arena, body, new_store(s, c, clone_index(s, r->store->index, ir->buffers[c].rank),
                                                  new_load(s, t.tile, tile_index(s, &t, rr, cc))));
    if (r->npar > 2) {
        r->par[r->npar - 3]->body = (IrBlock){0};
        ir_block_push(s->ir->arena, &r->par[r->npar - 3]->body, over_i);
        ir_block_push(s->ir->arena, out, r->par[0]);
    } else {
        ir_block_push(s->ir->arena, out, over_i);
    }
    r->par[0]->comment = NULL;
    IrStmt *top = out->items[out->count - 1];
    top->comment = arena_printf(s->ir->arena, "%s; schedule: a %ux%u tile of cells per GPU thread", what, t.tm, t.tn);
    return true;
}

/* ---- Rewrite 6, the GPU's: block tiles through shared memory ----------------------------------------- *
 *
 * A contraction C[i, j] (+)= Σ_k A[i, k]·B[k, j] (find_contraction: one reduction loop, at most one
 * batch loop) whose I and J extents are multiples of a block tile (128, else 64, as long as
 * that makes MIN_BLOCKS blocks) and whose K is a multiple of BLOCK_K becomes a block's kernel
 * (ir.h LOOP_BLOCK_X): each block of THREADS_SIDE² threads computes tile² cells of C, each
 * thread side² of them (side = tile / THREADS_SIDE: 8 or 4) in registers (a per-thread
 * buffer), and the block stages the operands through shared memory, BLOCK_K steps
 * of the reduction at a time.  The panels of the next steps are fetched into registers while
 * the block computes on the current ones:
 *     fetch panels 0 into registers
 *     for kt < K/BLOCK_K − 1:  registers → shared panels;  barrier;
 *                              fetch panels kt + 1;  BLOCK_K steps on every cell;  barrier
 *     registers → shared panels;  barrier;  BLOCK_K steps on every cell
 * The fetches follow each operand's layout so that neighbouring threads read neighbouring
 * cells (the reduction axis along threadIdx.x when it is the operand's contiguous one, else the
 * other axis, `side` cells a thread); the panels are stored [k][i] and [k][j], rows padded
 * by PANEL_PAD cells against bank conflicts, and a step reads a thread's cells of each as two
 * vectors (thread_cells).  Every cell takes its fma steps in the reduction's order: the reference's
 * result bit for bit.  Grids of fewer than MIN_BLOCKS blocks keep rewrite 5 (an H100 has 132
 * multiprocessors: 64 blocks of 128² for a 1024² matmul ran at 0.75 of rewrite 5's speed). */

enum { BLOCK_K = 16, THREADS_SIDE = 16, PANEL_PAD = 4, MIN_BLOCKS = 128 };

/* The block tiles tried, largest first: cells a block along I and J (a thread: a sixteenth). */
static const uint32_t block_tiles[] = {128, 64};

/* One operand's panel: where it comes from and goes. */
typedef struct Panel {
    const IrExpr *operand;
    uint32_t tiled_iter;   /* its I (or J) iterator */
    uint32_t base_iter;    /* the block loop along it */
    uint32_t shared, regs; /* the shared panel, the per-thread registers of a fetch */
    bool k_along_x;        /* the reduction axis is its contiguous one: along threadIdx.x */
} Panel;

/* A thread's cell: its halves and places along I (r1, r0) and J (c1, c0). */
typedef struct CellIters {
    uint32_t r1, r0, c1, c0;
} CellIters;

typedef struct BlockTile {
    const Contraction *ct;
    uint32_t tile, side;   /* cells a block and a thread along I and J (side = tile / THREADS_SIDE) */
    uint32_t k_iter, bi, bj, cells;
    Panel a, b;
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
    map_iter(s, p->tiled_iter, (Affine){.terms = {{p->base_iter, bt->tile}, {m, bt->side}, {q, 1}}, .count = 3});
    map_iter(s, bt->k_iter, kt == UINT32_MAX ? (Affine){.terms = {{kk, 1}}, .count = 1, .offset = k_offset}
                                             : (Affine){.terms = {{kt, BLOCK_K}, {kk, 1}}, .count = 2, .offset = k_offset});
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
    map_iter(s, bt->ct->i_loop->iter, (Affine){.terms = {{bt->bi, bt->tile}, {it->r1, half_tile}, {ty, half}, {it->r0, 1}}, .count = 4});
    map_iter(s, bt->ct->j_loop->iter, (Affine){.terms = {{bt->bj, bt->tile}, {it->c1, half_tile}, {tx, half}, {it->c0, 1}}, .count = 4});
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

static void panel_init(Sched *s, const BlockTile *bt, Panel *p, const IrExpr *operand, uint32_t tiled_iter, uint32_t base_iter, uint32_t k_iter,
                       const char *name) {
    const IrProgram *ir = s->ir;
    *p = (Panel){.operand = operand, .tiled_iter = tiled_iter, .base_iter = base_iter};
    p->k_along_x = flat_coef(ir, operand->buffer, operand->index, k_iter) == 1 &&
                   flat_coef(ir, operand->buffer, operand->index, tiled_iter) != 1;
    p->shared = new_scratch(s, name, BLOCK_K * (bt->tile + PANEL_PAD), true);
    s->ir->buffers[p->shared].gpu_shared = true;
    p->regs = new_scratch(s, "fetch", (uint64_t)THREADS_SIDE * THREADS_SIDE * bt->side, true);
    s->ir->buffers[p->regs].thread_cells = bt->side;
}

static bool gpu_block_tiles(Sched *s, Reduction *r, IrBlock *out) {
    const IrProgram *ir = s->ir;
    Contraction ct;
    if (!find_contraction(ir, r, &ct, false, 0) || r->nred != 1 || ct.nbatch > 1) return false;
    uint64_t m = ct.i_loop->extent, n = ct.j_loop->extent, k = ct.k;
    uint64_t batch = ct.nbatch ? ct.batch[0]->extent : 1;
    uint32_t tile = 0;
    for (size_t t = 0; t < sizeof block_tiles / sizeof *block_tiles && !tile; t++) {
        uint32_t b = block_tiles[t];
        if (m % b == 0 && n % b == 0 && m / b <= 65535 && batch * (m / b) * (n / b) >= MIN_BLOCKS) tile = b;
    }
    if (!tile || k % BLOCK_K || batch > 65535) return false;
    BlockTile bt = {.ct = &ct, .tile = tile, .side = tile / THREADS_SIDE, .k_iter = r->red[0]->iter, .bi = new_iter(s),
                    .bj = new_iter(s)};
    panel_init(s, &bt, &bt.a, ct.a, ct.i_loop->iter, bt.bi, bt.k_iter, "a_panel");
    panel_init(s, &bt, &bt.b, ct.b, ct.j_loop->iter, bt.bj, bt.k_iter, "b_panel");
    bt.cells = new_scratch(s, "cells", (uint64_t)THREADS_SIDE * THREADS_SIDE * bt.side * bt.side, true);
    s->ir->buffers[bt.cells].thread_cells = bt.side * bt.side;

    IrStmt *over_i = new_loop(s, bt.bi, m / bt.tile, true, LOOP_BLOCK_Y);
    IrStmt *over_j = new_loop(s, bt.bj, n / bt.tile, true, LOOP_BLOCK_X);
    ir_block_push(s->ir->arena, &over_i->body, over_j);
    IrBlock *blk = &over_j->body;
    uint32_t ty, tx;
    CellIters it;
    IrIndex *cell;
    /* Every cell's initial value, and the first panels fetched. */
    IrStmt *lx = thread_loops(s, blk, &ty, &tx);
    IrBlock *body = thread_cells(s, &lx->body, &bt, ty, tx, &cell, &it);
    ir_block_push(s->ir->arena, body, new_store(s, bt.cells, cell, clone_expr(s, r->init->value, NULL)));
    fetch(s, &lx->body, &bt, &bt.a, ty, tx, UINT32_MAX, 0);
    fetch(s, &lx->body, &bt, &bt.b, ty, tx, UINT32_MAX, 0);
    /* All but the last BLOCK_K steps: store the fetched panels, fetch the next, compute. */
    if (k > BLOCK_K) {
        uint32_t kt = new_iter(s);
        IrStmt *over_k = new_loop(s, kt, k / BLOCK_K - 1, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, blk, over_k);
        lx = thread_loops(s, &over_k->body, &ty, &tx);
        spill(s, &lx->body, &bt, &bt.a, ty, tx);
        spill(s, &lx->body, &bt, &bt.b, ty, tx);
        push_barrier(s, &over_k->body);
        lx = thread_loops(s, &over_k->body, &ty, &tx);
        fetch(s, &lx->body, &bt, &bt.a, ty, tx, kt, BLOCK_K);
        fetch(s, &lx->body, &bt, &bt.b, ty, tx, kt, BLOCK_K);
        steps(s, &lx->body, &bt, ty, tx);
        push_barrier(s, &over_k->body);
    }
    /* The last steps. */
    lx = thread_loops(s, blk, &ty, &tx);
    spill(s, &lx->body, &bt, &bt.a, ty, tx);
    spill(s, &lx->body, &bt, &bt.b, ty, tx);
    push_barrier(s, blk);
    lx = thread_loops(s, blk, &ty, &tx);
    steps(s, &lx->body, &bt, ty, tx);
    /* The cells stored. */
    body = thread_cells(s, &lx->body, &bt, ty, tx, &cell, &it);
    ir_block_push(s->ir->arena, body, new_store(s, ct.c, clone_index(s, r->store->index, ir->buffers[ct.c].rank),
                                                  new_load(s, bt.cells, cell)));

    IrStmt *top = over_i;
    if (ct.nbatch) {
        IrStmt *over_b = new_loop(s, ct.batch[0]->iter, batch, true, LOOP_BLOCK_Z);
        ir_block_push(s->ir->arena, &over_b->body, over_i);
        top = over_b;
    }
    const char *what = r->par[0]->comment ? r->par[0]->comment : "a contraction";
    top->comment = arena_printf(s->ir->arena, "%s; schedule: %ux%u cells a GPU block through shared memory, %ux%u a thread",
                                what, bt.tile, bt.tile, bt.side, bt.side);
    ir_block_push(s->ir->arena, out, top);
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
 * an H100: tests/native/stream.tsr). */

enum { TREE_MAX_THREADS = 256, TREE_MIN_THREADS = 32, TREE_MAX_CELLS = 4096, TREE_MIN_STEPS = 2048 };

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
    if (cells >= TREE_MAX_CELLS || steps < TREE_MIN_STEPS || threads < TREE_MIN_THREADS) return false;
    uint32_t part = new_scratch(s, "partials", threads, true);
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
                                                                  : op == SOP_MAX ? -INFINITY : INFINITY)));
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

/* ---- Driver ------------------------------------------------------------------------------------------ */

/* Schedule top-level statement `st` into `body` (rewrites 1-3); `next`, the statement after it,
 * may become a contraction's epilogue.  Returns whether it did. */
static bool schedule_stmt(Sched *s, IrStmt *st, IrStmt *next, IrBlock *body) {
    Reduction r;
    if (st->kind == IR_LOOP && match_reduction(st, &r)) {
        IrBlock tiled = {0};
        bool fused;
        if (tile_contraction(s, &r, next, &tiled, &fused)) {
            for (uint32_t k = 0; k < tiled.count; k++) ir_block_push(s->ir->arena, body, tiled.items[k]);
            return fused; /* the epilogue is in the tiles now */
        }
        IrBlock in_place = {0};
        if (accumulate_in_place(s, &r, &in_place)) {
            for (uint32_t k = 0; k < in_place.count; k++) ir_block_push(s->ir->arena, body, in_place.items[k]);
            return false;
        }
    } else if (st->kind == IR_LOOP && !st->parallel && untangle_scatter(s, st, body)) {
        return false;
    } else if (st->kind == IR_LOOP) {
        stream_pointwise(s, st);
    }
    ir_block_push(s->ir->arena, body, st);
    return false;
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
    case IR_BARRIER: break;
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

static bool strip_mine(Sched *s, IrStmt *st, IrBlock *out) {
    const IrProgram *ir = s->ir;
    IrStmt *run = NULL;
    if (runtime_loops(st, &run) != 1 || run->mode != LOOP_PLAIN || !stmt_blockable(ir, st, run->iter)) return false;
    Reduction r;
    bool reduction = !run->parallel && match_reduction(st, &r) && init_is_plain(ir, &r);
    for (uint32_t k = 0; reduction && k < r.npar; k++) reduction = r.par[k] != run;
    if (!(run == st && st->parallel) && !reduction) return false;
    if (reduction && r.init->value->kind == IR_CONST) { /* the cells' initial value, stored first */
        IrStmt *top = NULL, *into = NULL;
        for (uint32_t k = 0; k < r.npar; k++) {
            IrStmt *l = new_loop(s, r.par[k]->iter, r.par[k]->extent, true, LOOP_PLAIN);
            if (into) ir_block_push(s->ir->arena, &into->body, l);
            else top = l;
            into = l;
        }
        ir_block_push(s->ir->arena, &into->body, new_store(s, r.store->buffer, r.store->index, r.init->value));
        top->comment = st->comment;
        schedule_stmt(s, top, NULL, out);
    }
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
        schedule_stmt(s, nest, NULL, &blocks->body);
        ir_block_push(s->ir->arena, out, blocks);
    }
    return true;
}

static void schedule_function(Sched *s) {
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *st = fn->body.items[i];
        IrStmt *run = NULL;
        if (runtime_loops(st, &run)) {
            if (!strip_mine(s, st, &body)) ir_block_push(s->ir->arena, &body, st);
            continue;
        }
        IrStmt *next = i + 1 < fn->body.count ? fn->body.items[i + 1] : NULL;
        if (schedule_stmt(s, st, next, &body)) i++;
    }
    fn->body = body;
    fuse_pointwise(s);
}

/* The GPU's rewrites here: thread tiles (rewrite 5) and fused pointwise nests (rewrite 4);
 * sched_gpu.c then maps loops onto the grid. */
static void schedule_gpu_function(Sched *s) {
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *st = fn->body.items[i];
        Reduction r;
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
    if (target->kind == TARGET_CUDA) schedule_gpu(ir, target);
}
