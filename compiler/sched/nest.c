/* nest.c — the schedule's tools over loop nests, shared by the CPU's rewrites (sched.c,
 * sched_tile.c) and the GPU's (sched_gpu.c): building IR statements and expressions in the
 * program's arena; cloning indices and expressions under a substitution of iterators by affine
 * expressions of new ones (map_iter, Affine); scratch buffers (packed panels, tiles); recognising
 * the canonical reduction nest `for p…: l = init; for r…: l = step(l); C[p…] = l` (Reduction) and
 * what an index or expression does with an iterator; and rewrite 4, which both targets run last:
 * a pointwise nest moved down to the next pointwise nest over the same extents that uses what it
 * touches, past independent statements (sink_pointwise), then neighbouring pointwise nests over
 * loops of the same extents fused into one (fuse_pointwise).  Also the CPU's rewrite 1c, one
 * packed copy read by every product that would pack the same cells alike (share_packing), and
 * rewrite 4b, a buffer that lives only inside one fused nest kept in a local (local_cells).
 *
 * Requires: a verified, optimised IrProgram; a Sched whose substitution table covers the
 * function's iterators from before scheduling (sched.c's schedule()). */
#include "sched/sched_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- Building and cloning IR ------------------------------------------------------------------- */

IrStmt *new_loop(Sched *s, uint32_t iter, uint64_t extent, bool parallel, IrLoopMode mode) {
    IrStmt *l = arena_alloc(s->ir->arena, sizeof *l);
    *l = (IrStmt){.kind = IR_LOOP, .iter = iter, .extent = extent, .parallel = parallel, .mode = mode};
    return l;
}

IrStmt *new_store(Sched *s, uint32_t buffer, IrIndex *index, IrExpr *value) {
    IrStmt *st = arena_alloc(s->ir->arena, sizeof *st);
    *st = (IrStmt){.kind = IR_STORE, .buffer = buffer, .index = index, .value = value};
    return st;
}

IrExpr *new_load(Sched *s, uint32_t buffer, IrIndex *index) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_LOAD, .buffer = buffer, .index = index};
    return e;
}

IrExpr *new_const(Sched *s, double v, DType type) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_CONST, .value = v, .type = type};
    return e;
}

/* op(a, b, c), c NULL for a binary operation. */
IrExpr *new_op(Sched *s, ScalarOp op, IrExpr *a, IrExpr *b, IrExpr *c) {
    IrExpr *e = arena_alloc(s->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_OP, .op = op, .args = {a, b, c}, .type = ir_expr_type(s->ir, a)};
    return e;
}

/* fma(a, b, acc) of a contraction's step, its operands in the order the step had them. */
IrExpr *new_step_fma(Sched *s, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc) {
    return new_op(s, SOP_FMA, b_first ? b : a, b_first ? a : b, acc);
}

/* The step of a contraction whose step is fma(x, y, l), or (a scatter's, rewrite 0) l + x·y
 * with two roundings, l on the side it had: `add` and `acc_first` say which. */
IrExpr *new_step(Sched *s, bool add, bool acc_first, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc) {
    if (!add) return new_step_fma(s, b_first, a, b, acc);
    IrExpr *prod = new_op(s, SOP_MUL, b_first ? b : a, b_first ? a : b, NULL);
    return new_op(s, SOP_ADD, acc_first ? acc : prod, acc_first ? prod : acc, NULL);
}

uint32_t new_iter(Sched *s) { return s->fn->iter_count++; }

/* A one-axis index: Σ terms. */
IrIndex *flat_index(Sched *s, const IrTerm *terms, uint32_t count) {
    IrIndex *ix = arena_alloc(s->ir->arena, sizeof *ix);
    ix->terms = arena_alloc(s->ir->arena, (count ? count : 1) * sizeof *ix->terms);
    memcpy(ix->terms, terms, count * sizeof *terms);
    ix->term_count = count;
    return ix;
}

void cover_new_iters(Sched *s) {
    uint32_t count = s->fn->iter_count;
    if (count <= s->old_iters) return;
    Affine *subst = realloc(s->subst, (count + 1) * sizeof *subst);
    bool *mapped = realloc(s->mapped, (count + 1) * sizeof *mapped);
    if (!subst || !mapped) diag_fatal_oom();
    memset(subst + s->old_iters, 0, (count + 1 - s->old_iters) * sizeof *subst);
    memset(mapped + s->old_iters, 0, (count + 1 - s->old_iters) * sizeof *mapped);
    s->subst = subst;
    s->mapped = mapped;
    s->old_iters = count;
}

void map_iter(Sched *s, uint32_t old, Affine a) {
    s->subst[old] = a;
    s->mapped[old] = true;
}

Affine affine1(uint32_t iter, int64_t coef, int64_t offset) {
    return (Affine){.terms = {{iter, coef}}, .count = 1, .offset = offset};
}

IrIndex *clone_index(Sched *s, const IrIndex *index, uint32_t rank) {
    IrIndex *ix = arena_alloc(s->ir->arena, (rank ? rank : 1) * sizeof *ix);
    for (uint32_t a = 0; a < rank; a++) {
        ix[a].offset = index[a].offset;
        ix[a].symbol = index[a].symbol;
        ix[a].gather = index[a].gather ? clone_expr(s, index[a].gather, NULL) : NULL;
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
IrExpr *clone_expr(Sched *s, const IrExpr *e, const LocalRepl *repl) {
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

bool sched_keeps_lowered(const Sched *s, const IrStmt *st) {
    return ir_stmt_as_lowered(s->ir, st) || (s->target->kind == TARGET_CUDA && ir_stmt_f64(s->ir, st));
}

bool sched_half_only(const Sched *s, const IrStmt *st) {
    return st->kind == IR_LOOP && ir_stmt_half(s->ir, st) && !ir_stmt_gathers(s->ir, st) && !ir_stmt_integer(st) &&
           !ir_stmt_untiled_types(s->ir, st) && !ir_stmt_f64(s->ir, st);
}

void reset_subst(Sched *s) {
    memset(s->mapped, 0, s->old_iters * sizeof *s->mapped);
}

uint32_t new_scratch(Sched *s, const char *what, uint64_t size, DType dtype, bool kernel_local) {
    IrBuffer b = {.id = s->ir->buffer_count, .kind = BUF_SCRATCH, .rank = 1, .size = size, .init = INIT_NONE, .dtype = dtype,
                  .kernel_local = kernel_local || s->local_scratch};
    b.dims = arena_alloc(s->ir->arena, sizeof *b.dims);
    b.dims[0] = size;
    b.name = arena_printf(s->ir->arena, "%s#s%u", what, s->scratch++);
    b.shape_text = arena_printf(s->ir->arena, "%llu", (unsigned long long)size);
    ARENA_PUSH(s->ir->arena, s->ir->buffers, s->ir->buffer_count, s->ir->buffer_cap, b);
    return b.id;
}

uint32_t pool_take(Sched *s, ScratchPool *pool, const char *what, uint64_t cells) {
    uint32_t k = pool->next++ % POOL_TURNS;
    if (k == pool->made) return pool->buffers[pool->made++] = new_scratch(s, what, cells, DTYPE_F32, false);
    IrBuffer *b = &s->ir->buffers[pool->buffers[k]];
    if (b->size < cells) {
        b->size = b->dims[0] = cells;
        b->shape_text = arena_printf(s->ir->arena, "%llu", (unsigned long long)cells);
    }
    return pool->buffers[k];
}

/* ---- Recognising the canonical reduction nest ----------------------------------------------------- */

/* `l = init; for r… reduction: l = step; C[…] = l`: the three statements of a reduction's
 * cell, into r (its parallel loops aside). */
bool match_steps(IrStmt *init, IrStmt *loop, IrStmt *store, Reduction *r) {
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

bool match_reduction(IrStmt *top, Reduction *r) {
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
bool mentions(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter) {
    for (uint32_t a = 0; a < ir->buffers[buffer].rank; a++)
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == iter) return true;
    return false;
}

/* Whether e reads local `local`; *bad when a load reads `avoid` or walks `iter` with a stride
 * other than 0 or 1. */
bool scan_expr(const IrProgram *ir, const IrExpr *e, uint32_t local, uint32_t avoid, uint32_t iter, bool *bad) {
    switch (e->kind) {
    case IR_LOCAL: return e->local == local;
    case IR_LOAD: {
        int64_t c = ir_flat_coef(ir, e->buffer, e->index, iter);
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
bool init_is_plain(const IrProgram *ir, const Reduction *r) {
    const IrExpr *v = r->init->value;
    return v->kind == IR_CONST ||
           (v->kind == IR_LOAD && v->buffer == r->store->buffer && ir_same_index(ir, v->buffer, v->index, r->store->index));
}

/* Every load of `buffer` in e is at `index`. */
bool loads_only_at(const IrProgram *ir, const IrExpr *e, uint32_t buffer, const IrIndex *index) {
    switch (e->kind) {
    case IR_LOAD: return e->buffer != buffer || ir_same_index(ir, buffer, e->index, index);
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!loads_only_at(ir, e->args[i], buffer, index)) return false;
        return true;
    default: return true;
    }
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

/* Whether a pointwise nest stays out of rewrite 4 (sinking and fusing): one kept as lowered,
 * except one kept only for its bf16 or f16 cells, a plain pointwise nest whose stores each
 * round to their buffer's type wherever they run (a later store of the iteration reads the
 * rounded cell, as in a pass of its own): Train's mixed-precision
 * updates of a parameter (its f32 master's start from the parameter, the moments read from the
 * bf16 gradient, the master's step, the master rounded into the parameter) and a forward
 * chain's f32 result with its bf16 copy then take one pass over the cells, as in f32. */
static bool fusion_keeps_apart(const Sched *s, const IrStmt *top) {
    return sched_keeps_lowered(s, top) && !sched_half_only(s, top);
}

/* Whether two nests' loops (pointwise_store's) have the same extents, outermost first. */
static bool same_extents(IrStmt *const *a, uint32_t na, IrStmt *const *b, uint32_t nb) {
    if (na != nb) return false;
    for (uint32_t k = 0; k < na; k++)
        if (a[k]->extent != b[k]->extent) return false;
    return true;
}

/* The buffers a top-level statement loads and stores, as bit sets over the program's buffers;
 * `everything` for a call of the runtime. */
typedef struct Touched {
    uint64_t *loads, *stores;
    bool everything;
} Touched;

static void mark(uint64_t *set, uint32_t buffer) { set[buffer / 64] |= 1ull << (buffer % 64); }

static void mark_load(void *ctx, uint32_t buffer) { mark(((Touched *)ctx)->loads, buffer); }

static void stmt_accesses(const IrProgram *ir, const IrStmt *st, Touched *t) {
    switch (st->kind) {
    case IR_STORE:
        mark(t->stores, st->buffer);
        ir_index_each_load(ir, st->buffer, st->index, mark_load, t);
        ir_expr_each_load(ir, st->value, mark_load, t);
        break;
    case IR_SET_LOCAL: ir_expr_each_load(ir, st->value, mark_load, t); break;
    case IR_LOOP:
        for (uint32_t i = 0; i < st->body.count; i++) stmt_accesses(ir, st->body.items[i], t);
        break;
    case IR_BARRIER: break; /* inside a block's kernel: its threads wait for each other, nothing more */
    case IR_MMA: /* inside a block's kernel: its registers */
        mark(t->loads, st->mma.a);
        mark(t->loads, st->mma.b);
        mark(t->loads, st->mma.c);
        mark(t->stores, st->mma.c);
        break;
    case IR_LDMATRIX: /* inside a block's kernel: its panel into its registers */
        mark(t->loads, st->ldmatrix.panel);
        mark(t->stores, st->ldmatrix.regs);
        break;
    case IR_WGMMA: /* inside a block's kernel: its panels and registers */
        mark(t->loads, st->wgmma.a);
        mark(t->loads, st->wgmma.b);
        mark(t->loads, st->wgmma.c);
        mark(t->stores, st->wgmma.c);
        break;
    case IR_CALL: t->everything = true; break;
    }
}

/* Whether b must stay after a: one stores what the other loads or stores. */
static bool depends(const Touched *a, const Touched *b, uint32_t words) {
    if (a->everything || b->everything) return true;
    for (uint32_t w = 0; w < words; w++)
        if ((a->stores[w] & (b->loads[w] | b->stores[w])) | (a->loads[w] & b->stores[w])) return true;
    return false;
}

/* How far down sink_pointwise looks for a nest's next user (statements). */
enum { SINK_REACH = 1024 };

/* What each statement of `body` touches (sets[] holds the bit sets; free both), or NULL without
 * memory. */
static Touched *touched_by(const IrProgram *ir, const IrBlock *body, uint32_t words, uint64_t **sets) {
    Touched *touched = calloc(body->count + 1, sizeof *touched);
    *sets = calloc((size_t)(body->count + 1) * 2 * (words ? words : 1), sizeof **sets);
    if (!touched || !*sets) {
        free(touched);
        free(*sets);
        return NULL;
    }
    for (uint32_t i = 0; i < body->count; i++) {
        touched[i].loads = *sets + (size_t)i * 2 * words;
        touched[i].stores = touched[i].loads + words;
        stmt_accesses(ir, body->items[i], &touched[i]);
    }
    return touched;
}

/* Statement `from` of `body` moved to place `to`, the ones between shifted by one (their
 * Touched with them). */
static void move_stmt(IrBlock *body, Touched *touched, uint32_t from, uint32_t to) {
    IrStmt *st = body->items[from];
    Touched t = touched[from];
    if (from < to) {
        memmove(&body->items[from], &body->items[from + 1], (to - from) * sizeof *body->items);
        memmove(&touched[from], &touched[from + 1], (to - from) * sizeof *touched);
    } else {
        memmove(&body->items[to + 1], &body->items[to], (from - to) * sizeof *body->items);
        memmove(&touched[to + 1], &touched[to], (from - to) * sizeof *touched);
    }
    body->items[to] = st;
    touched[to] = t;
}

/* Before the fusion: a pointwise nest moves down, past statements that neither access what it
 * stores nor store what it reads, to just before the next statement that does when that one is
 * a pointwise nest over loops of the same extents: gradient clipping's scaling of each gradient,
 * which runs for every parameter before the first update, then sits right before its own
 * optimiser's passes over the same cells and fuses with them (one pass over the gradient fewer).
 * The statements moved past are independent of it, so every buffer is read after the same
 * writes as before and each cell's values are the same. */
static void sink_pointwise(Sched *s) {
    IrBlock *body = &s->fn->body;
    uint32_t count = body->count, words = (s->ir->buffer_count + 63) / 64;
    if (count < 3) return;
    uint64_t *sets;
    Touched *touched = touched_by(s->ir, body, words, &sets);
    if (!touched) return; /* the move is an optimisation: without memory, none */
    IrStmt *loops[MAX_LOOPS], *next_loops[MAX_LOOPS];
    uint32_t n, next_n;
    for (uint32_t i = count - 1; i-- > 0;) { /* from the bottom: each statement considered once */
        IrStmt *top = body->items[i], *st = pointwise_store(top, loops, &n);
        if (!st || fusion_keeps_apart(s, top)) continue;
        uint32_t j = i + 1, end = count - i - 1 > SINK_REACH ? i + 1 + SINK_REACH : count;
        while (j < end && !depends(&touched[i], &touched[j], words)) j++;
        if (j == i + 1 || j == end) continue;
        IrStmt *user = body->items[j];
        if (!pointwise_store(user, next_loops, &next_n) || fusion_keeps_apart(s, user) ||
            !same_extents(next_loops, next_n, loops, n))
            continue;
        move_stmt(body, touched, i, j - 1);
    }
    free(sets);
    free(touched);
}

/* A store of one cell outside any loop that reads no local: it may run anywhere between the
 * statements it depends on (kernel.c makes a run of them one launch of one thread). */
static bool scalar_store(const IrProgram *ir, const IrStmt *st) {
    if (st->kind != IR_STORE || reads_local(st->value)) return false;
    for (uint32_t a = 0; a < ir->buffers[st->buffer].rank; a++)
        if (st->index[a].gather && reads_local(st->index[a].gather)) return false;
    return true;
}

/* The nearest scalar store to statement i of `body` in direction `dir` (1: below, -1: above),
 * at most SINK_REACH statements away and reached past statements independent of i only;
 * UINT32_MAX where there is none. */
static uint32_t nearest_scalar_store(const IrProgram *ir, const IrBlock *body, const Touched *touched, uint32_t words,
                                     uint32_t i, int dir) {
    for (uint32_t step = 1; step <= SINK_REACH && (dir < 0 ? step <= i : i + step < body->count); step++) {
        uint32_t j = dir < 0 ? i - step : i + step;
        if (scalar_store(ir, body->items[j])) return j;
        if (depends(&touched[i], &touched[j], words)) break;
    }
    return UINT32_MAX;
}

void group_scalar_stores(Sched *s) {
    IrBlock *body = &s->fn->body;
    uint32_t count = body->count, words = (s->ir->buffer_count + 63) / 64;
    if (count < 3) return;
    uint64_t *sets;
    Touched *touched = touched_by(s->ir, body, words, &sets);
    if (!touched) return; /* an optimisation: without memory, none */
    /* Down, from the bottom: each scalar store to just before the next one below it. */
    for (uint32_t i = count - 1; i-- > 0;) {
        uint32_t j = scalar_store(s->ir, body->items[i]) ? nearest_scalar_store(s->ir, body, touched, words, i, 1) : UINT32_MAX;
        if (j != UINT32_MAX && j > i + 1) move_stmt(body, touched, i, j - 1);
    }
    /* Up, from the top: each scalar store to just after the nearest one above it. */
    for (uint32_t i = 1; i < count; i++) {
        uint32_t j = scalar_store(s->ir, body->items[i]) ? nearest_scalar_store(s->ir, body, touched, words, i, -1) : UINT32_MAX;
        if (j != UINT32_MAX && j + 1 < i) move_stmt(body, touched, i, j + 1);
    }
    free(sets);
    free(touched);
}

/* Consecutive pointwise nests over loops of the same extents — an optimiser's updates of its
 * state and of the parameter, a forward chain with several outputs — become one nest whose body
 * runs their stores in order, one pass over memory instead of one per nest (joins() keeps each
 * cell's values).  At most MAX_FUSED stores a nest: the check is quadratic in them, and one
 * kernel of thousands of statements would be more than LLVM should see at once. */
void fuse_pointwise(Sched *s) {
    sink_pointwise(s);
    IrFunction *fn = s->fn;
    IrBlock body = {0};
    IrStmt *group_loops[MAX_LOOPS], *loops[MAX_LOOPS];
    uint32_t group_n = 0, n;
    IrBlock *group = NULL;
    for (uint32_t i = 0; i < fn->body.count; i++) {
        IrStmt *top = fn->body.items[i];
        IrStmt *st = pointwise_store(top, loops, &n);
        if (st && fusion_keeps_apart(s, top)) st = NULL; /* as lowered stay apart */
        bool same = group && st && group->count < MAX_FUSED && same_extents(loops, n, group_loops, group_n);
        for (uint32_t k = 0; same && k < n; k++) same = loops[k]->iter < s->old_iters;
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

/* ---- Rewrite 4b: cells that never leave their nest ------------------------------------------------ */

/* The innermost loop of a fused pointwise nest (fuse_pointwise's: parallel plain loops, one
 * inside the other, around two or more stores), or NULL for any other statement. */
static IrStmt *fused_stores(IrStmt *top) {
    IrStmt *st = top;
    uint32_t depth = 0;
    while (st->kind == IR_LOOP && st->parallel && st->mode == LOOP_PLAIN && depth < MAX_LOOPS) {
        depth++;
        if (st->body.count != 1 || st->body.items[0]->kind != IR_LOOP) break;
        st = st->body.items[0];
    }
    if (st->kind != IR_LOOP || !st->parallel || st->mode != LOOP_PLAIN || st->body.count < 2) return NULL;
    for (uint32_t i = 0; i < st->body.count; i++)
        if (st->body.items[i]->kind != IR_STORE) return NULL;
    return st;
}

/* In e, every load of `buffer` becomes a read of local `local` (of `type`).  The caller made sure
 * that no other statement holds these nodes: nothing outside the nest loads the buffer. */
static void loads_to_local(IrExpr *e, uint32_t buffer, uint32_t local, DType type) {
    if (e->kind == IR_LOAD && e->buffer == buffer) {
        *e = (IrExpr){.kind = IR_LOCAL, .type = type, .local = local};
    } else if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) loads_to_local(e->args[i], buffer, local, type);
    }
}

/* Whether buffer b of the fused stores `body` can live in a local: its first access there is a
 * store whose value does not read it, so every cell it reads in an iteration was written
 * earlier in the same iteration (fuse_pointwise joined the stores only where every buffer they
 * store is accessed at one index). */
static bool written_first(const IrProgram *ir, const IrBlock *body, uint32_t b) {
    for (uint32_t i = 0; i < body->count; i++) {
        const IrStmt *st = body->items[i];
        if (ir_expr_loads(ir, st->value, b)) return false;
        if (st->buffer == b) return true;
    }
    return false;
}

/* Buffers that something other than the loop IR sees: kept (named, parameters, inputs),
 * training state (checkpoints), data sets' fields, prints, exports and the runtime's actions. */
static void mark_seen_outside(const IrProgram *ir, bool *seen) {
    for (uint32_t b = 0; b < ir->buffer_count; b++) {
        const IrBuffer *buf = &ir->buffers[b];
        seen[b] = buf->keep || buf->training_state || buf->is_virtual || buf->kernel_local ||
                  (buf->dtype != DTYPE_F32 && buf->dtype != DTYPE_F64);
    }
    for (uint32_t d = 0; d < ir->dataset_count; d++)
        for (uint32_t f = 0; f < ir->datasets[d].field_count; f++) seen[ir->datasets[d].fields[f]] = true;
    for (uint32_t p = 0; p < ir->print_count; p++)
        for (uint32_t a = 0; a < ir->prints[p].arg_count; a++)
            if (ir->prints[p].args[a].kind == IRP_BUFFER) seen[ir->prints[p].args[a].ref] = true;
    for (uint32_t e = 0; e < ir->export_count; e++) seen[ir->exports[e].buffer] = true;
    for (uint32_t a = 0; a < ir->action_count; a++)
        for (uint32_t k = 0; k < ir->actions[a].buffer_count; k++) seen[ir->actions[a].buffers[k]] = true;
}

/* How many top-level statements of the whole program touch each buffer, into `touching`; false
 * (nothing counted) when a statement other than a call of the runtime touches what it cannot
 * name. */
static bool count_touching(const IrProgram *ir, uint32_t *touching) {
    uint32_t words = (ir->buffer_count + 63) / 64;
    uint64_t *sets = calloc(2 * (size_t)(words ? words : 1), sizeof *sets);
    if (!sets) return false;
    bool ok = true;
    for (uint32_t f = 0; f < ir->function_count && ok; f++)
        for (uint32_t i = 0; i < ir->functions[f].body.count && ok; i++) {
            const IrStmt *top = ir->functions[f].body.items[i];
            memset(sets, 0, 2 * (size_t)words * sizeof *sets);
            Touched t = {sets, sets + words, false};
            stmt_accesses(ir, top, &t);
            if (t.everything && top->kind != IR_CALL) ok = false;
            for (uint32_t b = 0; b < ir->buffer_count; b++)
                if (((t.loads[b / 64] | t.stores[b / 64]) >> (b % 64)) & 1) touching[b]++;
        }
    free(sets);
    return ok;
}

void local_cells(IrProgram *ir) {
    uint32_t *touching = calloc(ir->buffer_count + 1, sizeof *touching);
    bool *seen = calloc(ir->buffer_count + 1, sizeof *seen);
    if (!touching || !seen || !count_touching(ir, touching)) { /* an optimisation: without it, none */
        free(touching);
        free(seen);
        return;
    }
    mark_seen_outside(ir, seen);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        IrFunction *fn = &ir->functions[f];
        for (uint32_t i = 0; i < fn->body.count; i++) {
            IrStmt *top = fn->body.items[i], *inner = fused_stores(top);
            if (!inner || ir_stmt_gathers(ir, top)) continue;
            IrBlock *body = &inner->body;
            for (uint32_t k = 0; k < body->count; k++) {
                IrStmt *st = body->items[k];
                uint32_t b = st->kind == IR_STORE ? st->buffer : UINT32_MAX;
                if (b == UINT32_MAX || touching[b] != 1 || seen[b] || !written_first(ir, body, b)) continue;
                uint32_t local = fn->local_count++;
                DType type = ir->buffers[b].dtype;
                for (uint32_t j = 0; j < body->count; j++) {
                    IrStmt *other = body->items[j];
                    if (other->kind == IR_STORE || other->kind == IR_SET_LOCAL) loads_to_local(other->value, b, local, type);
                    if (other->kind == IR_STORE && other->buffer == b)
                        *other = (IrStmt){.kind = IR_SET_LOCAL, .local = local, .value = other->value,
                                          .comment = other->comment};
                }
                touching[b] = 0;
                top->comment = arena_printf(ir->arena, "%s; schedule: %s's cells kept in l%u, never stored",
                                            top->comment ? top->comment : "a pointwise nest", ir->buffers[b].name, local);
            }
        }
    }
    free(touching);
    free(seen);
}

/* ---- Rewrite 1c: one packed copy of an operand for several products ------------------------------ */

/* The one buffer that top-level statement `st` stores, when it is a scratch copy the schedule
 * made (a packing nest: a loop that stores only into one BUF_SCRATCH buffer of the state and
 * does not read it); else UINT32_MAX. */
static uint32_t packed_copy(const IrProgram *ir, const IrStmt *st, const Touched *t) {
    if (st->kind != IR_LOOP || t->everything) return UINT32_MAX;
    uint32_t words = (ir->buffer_count + 63) / 64, found = UINT32_MAX;
    for (uint32_t w = 0; w < words; w++) {
        if (!t->stores[w]) continue;
        if (found != UINT32_MAX || (t->stores[w] & (t->stores[w] - 1))) return UINT32_MAX; /* two buffers */
        found = w * 64 + (uint32_t)__builtin_ctzll(t->stores[w]);
    }
    if (found == UINT32_MAX) return UINT32_MAX;
    const IrBuffer *b = &ir->buffers[found];
    if (b->kind != BUF_SCRATCH || b->kernel_local || ((t->loads[found / 64] >> (found % 64)) & 1)) return UINT32_MAX;
    return found;
}

/* Whether two statements are the same up to a renaming of their loops' iterators (`map`, from
 * b's to a's, filled as their loops pair up; NULL: none renamed) and of buffer `from` in b to
 * `to` in a. */
typedef struct SameNest {
    const IrProgram *ir;
    uint32_t *map; /* per iterator of b: a's, or UINT32_MAX */
    uint32_t from, to;
} SameNest;

static bool same_expr(SameNest *m, const IrExpr *a, const IrExpr *b);

static bool same_indices(SameNest *m, uint32_t buffer, const IrIndex *a, const IrIndex *b) {
    for (uint32_t k = 0; k < m->ir->buffers[buffer].rank; k++) {
        if (a[k].offset != b[k].offset || a[k].term_count != b[k].term_count || a[k].symbol != b[k].symbol ||
            !a[k].gather != !b[k].gather || (a[k].gather && !same_expr(m, a[k].gather, b[k].gather)))
            return false;
        for (uint32_t t = 0; t < a[k].term_count; t++)
            if (a[k].terms[t].coef != b[k].terms[t].coef ||
                (m->map ? m->map[b[k].terms[t].iter] : b[k].terms[t].iter) != a[k].terms[t].iter)
                return false;
    }
    return true;
}

bool same_cell(const IrProgram *ir, uint32_t buffer, const IrIndex *a, const IrIndex *b) {
    SameNest m = {.ir = ir, .map = NULL, .from = UINT32_MAX, .to = UINT32_MAX};
    return same_indices(&m, buffer, a, b);
}

static bool same_buffer(const SameNest *m, uint32_t a, uint32_t b) { return a == (b == m->from ? m->to : b); }

static bool same_expr(SameNest *m, const IrExpr *a, const IrExpr *b) {
    if (a->kind != b->kind || a->type != b->type) return false;
    switch (a->kind) {
    case IR_CONST: return a->value == b->value || (a->value != a->value && b->value != b->value);
    case IR_LOAD:
    case IR_RANDOM: return same_buffer(m, a->buffer, b->buffer) && same_indices(m, a->buffer, a->index, b->index);
    case IR_LOCAL: return a->local == b->local;
    case IR_SYMBOL: return a->symbol == b->symbol;
    case IR_OP:
        if (a->op != b->op) return false;
        for (unsigned i = 0; i < scalar_op_arity(a->op); i++)
            if (!same_expr(m, a->args[i], b->args[i])) return false;
        return true;
    }
    return false;
}

static bool same_stmt(SameNest *m, const IrStmt *a, const IrStmt *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case IR_LOOP:
        if (a->extent != b->extent || a->parallel != b->parallel || a->mode != b->mode || a->block != b->block ||
            a->block_after != b->block_after || a->block_symbol != b->block_symbol || a->local != b->local ||
            a->body.count != b->body.count || m->map[b->iter] != UINT32_MAX)
            return false;
        m->map[b->iter] = a->iter;
        for (uint32_t i = 0; i < a->body.count; i++)
            if (!same_stmt(m, a->body.items[i], b->body.items[i])) return false;
        return true;
    case IR_STORE:
        return same_buffer(m, a->buffer, b->buffer) && a->nontemporal == b->nontemporal &&
               same_indices(m, a->buffer, a->index, b->index) && same_expr(m, a->value, b->value);
    case IR_SET_LOCAL: return a->local == b->local && same_expr(m, a->value, b->value);
    default: return false;
    }
}

/* Every iterator of st's loops unpaired in `map` (same_stmt pairs them). */
static void unpair_loops(const IrStmt *st, uint32_t *map) {
    if (st->kind != IR_LOOP) return;
    map[st->iter] = UINT32_MAX;
    for (uint32_t i = 0; i < st->body.count; i++) unpair_loops(st->body.items[i], map);
}

/* Whether a statement before a packing changes what it reads (so an earlier copy of the same
 * cells is not this one's). */
static bool disturbs(const Touched *between, const Touched *second, uint32_t words) {
    if (between->everything) return true;
    for (uint32_t w = 0; w < words; w++)
        if (between->stores[w] & second->loads[w]) return true;
    return false;
}

/* How far back share_packing looks for an equal copy (statements). */
enum { SHARE_REACH = 256 };

void share_packing(Sched *s) {
    const IrProgram *ir = s->ir;
    IrBlock *body = &s->fn->body;
    uint32_t count = body->count, words = (ir->buffer_count + 63) / 64;
    if (count < 2 || !words) return;
    Touched *touched = calloc(count, sizeof *touched);
    uint64_t *sets = calloc((size_t)count * 2 * words, sizeof *sets);
    uint32_t *copy = calloc(count, sizeof *copy), *map = malloc((s->fn->iter_count + 1) * sizeof *map);
    if (map)
        for (uint32_t it = 0; it <= s->fn->iter_count; it++) map[it] = UINT32_MAX;
    bool *removed = calloc(count, sizeof *removed);
    if (!touched || !sets || !copy || !map || !removed) { /* an optimisation: without memory, none */
        free(touched), free(sets), free(copy), free(map), free(removed);
        return;
    }
    for (uint32_t i = 0; i < count; i++) {
        touched[i].loads = sets + (size_t)i * 2 * words;
        touched[i].stores = touched[i].loads + words;
        stmt_accesses(ir, body->items[i], &touched[i]);
        copy[i] = packed_copy(ir, body->items[i], &touched[i]);
    }
    /* Only a copy that nothing else writes (not an f32 twin a reduction then accumulates in). */
    for (uint32_t i = 0; i < count; i++)
        if (copy[i] != UINT32_MAX)
            for (uint32_t k = 0; k < count; k++)
                if (copy[k] != copy[i] && ((touched[k].stores[copy[i] / 64] >> (copy[i] % 64)) & 1)) {
                    copy[i] = UINT32_MAX;
                    break;
                }
    for (uint32_t j = 0; j < count; j++) {
        if (copy[j] == UINT32_MAX) continue;
        /* A copy is one or two statements (full panels, then the padded last one). */
        uint32_t nj = j + 1 < count && copy[j + 1] == copy[j] ? 2 : 1;
        for (uint32_t i = j, steps = 0; i-- > 0 && steps < SHARE_REACH; steps++) {
            if (removed[i]) continue;
            if (disturbs(&touched[i], &touched[j], words) || (nj == 2 && disturbs(&touched[i], &touched[j + 1], words)))
                break;
            if (copy[i] == UINT32_MAX) continue;
            uint32_t first = i; /* the start of copy i's statements */
            if (first > 0 && copy[first - 1] == copy[i]) first--;
            uint32_t ni = i - first + 1;
            const IrBuffer *a = &ir->buffers[copy[i]], *b = &ir->buffers[copy[j]];
            bool same = ni == nj && a->size == b->size && a->dtype == b->dtype;
            for (uint32_t k = 0; same && k < nj; k++) {
                SameNest m = {ir, map, copy[j], copy[i]};
                same = same_stmt(&m, body->items[first + k], body->items[j + k]);
                unpair_loops(body->items[j + k], map); /* ready for the next comparison */
            }
            if (same) {
                uint32_t from = copy[j], to = copy[i];
                for (uint32_t k = 0; k < nj; k++) removed[j + k] = true;
                for (uint32_t k = j + nj; k < count; k++) (void)ir_rename_loads(body->items[k], from, to);
                IrBuffer *kept = &s->ir->buffers[to];
                if (s->ir->buffers[from].prefetch_cells > kept->prefetch_cells)
                    kept->prefetch_cells = s->ir->buffers[from].prefetch_cells;
                IrStmt *head = body->items[first];
                head->comment = arena_printf(s->ir->arena, "%s; schedule: also read in place of %s, a copy of the same cells",
                                             head->comment ? head->comment : "a packing nest", s->ir->buffers[from].name);
                break;
            }
        }
        j += nj - 1;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < count; i++)
        if (!removed[i]) body->items[kept++] = body->items[i];
    body->count = kept;
    free(touched), free(sets), free(copy), free(map), free(removed);
}
