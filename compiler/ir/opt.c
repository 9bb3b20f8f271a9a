/* opt.c — optimisations of the loop IR, to a fixpoint:
 *
 *   1. Constant buffers (`ones ()`, `zeros ()`, scalar literals, `!.x`: every cell one known
 *      value, never stored to) are read as that constant.  Parameters are never folded: their
 *      values change (training, or the caller through an accessor).
 *   2. Constant folding and simplification, NaN-safe: an operation on constants is evaluated
 *      in single precision as the executor would; `x * 1`, `1 * x`, `x / 1` and `x - 0` become
 *      `x` (exact for every x, NaN and ±0 included), `where c a b` of a known c becomes a or b
 *      (Train's optimisers write `where apply new old` with apply 1 unless a step may be
 *      skipped); a bf16 (f16) store of `to_bf16 x` (`to_f16 x`) of an f32 x stores x, which it
 *      rounds the same; nothing like `x * 0 → 0` is done.
 *   3. Virtualisation: a buffer that is not observable (not named, not a parameter or
 *      gradient…), written by exactly one plain store — every cell once, by loops that are
 *      all its iterators — and read by exactly one load whose loops all appear in its index
 *      (so each cell is computed once, where it is used), is inlined: the load becomes the
 *      stored expression with the producer's iterators replaced by the load's indices, and the
 *      producer's loop nest disappears (a bf16 or f16 buffer's value is rounded there as its
 *      store would have rounded it: to_bf16, to_f16).  Nothing it reads may be stored in between.  A
 *      buffer whose store draws random numbers (IR_RANDOM) is never inlined: it is materialised
 *      once per run, so every reader, in any routine, sees the same mask.
 *   4. Dead stores: stores to buffers that nothing reads and nobody observes are removed,
 *      and loops left empty with them.
 *   5. Overwritten fills: a nest setting every cell of a buffer to a constant (zero_grads) goes
 *      when the next statement touching that buffer stores every cell from at most the cell's
 *      own value, which it then reads as the constant (drop_overwritten_fills).
 *   6. State that no routine carries: a persistent buffer (an unnamed tensor's gradient, whose
 *      value `=+` would carry from one run of a routine to the next) that every function
 *      overwrites, every cell, before it reads it — backprop's fresh start, once rule 5 has
 *      folded the zeros in — holds nothing between runs, and becomes an ordinary computed
 *      buffer that rules 3 and 4 (and the schedule's epilogues) may then remove
 *      (release_overwritten_state); the rounds run again.
 *   7. Small nests recomputed where they are read (only where each nest costs a launch: the
 *      GPU; optimise's `launches`): a buffer of at most SMALL_CELLS cells that rule 3 leaves
 *      (read more than once, or by loops its index does not all name: a row's statistic read
 *      by every cell of the row), under the same conditions otherwise, whose value is a few
 *      operations (at most SMALL_OPS: a layer norm's rsqrt(var/n + eps), a softmax's
 *      reciprocal, a negated maximum; up to SMALL_OPS_MOST for one reading statement whose
 *      iterations times the operations stay within RECOMPUTE_WORK: a layer norm's gradient of
 *      its variance), is inlined into every load of it: each reader computes it again (the same
 *      operations on the same cells, so the same bits), and the nest that stored it, a launch
 *      of a few hundred threads, goes.
 *   8. Copies read from their source: a buffer nobody observes, stored once by a copy of another
 *      of the same type and axes (`b = a`, or a gradient's first contribution `0 + a`), and
 *      read only after it in the same function while the source is not stored again, is read
 *      from the source; rule 4 removes the copy (forward_copies_round says why a gradient's
 *      `0 +` may go).
 * Buffers left with no access and no observer are marked virtual (no storage).
 *
 * Requires: a verified IrProgram (ir_verify). */
#include "ir/opt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Walking -------------------------------------------------------------------------------- */

/* Per buffer: how many stores and loads the program has, and where the last of each is (the
 * function and its top-level statement), which is where the only one is when there is one. */
typedef struct Counts {
    const IrProgram *ir;
    uint32_t *stores, *loads;
    uint32_t *store_fn, *store_top, *load_fn, *load_top;
    uint32_t *first_load_fn, *first_load_top; /* where the first load is */
    uint32_t *gathered; /* a buffer read to gather, read or stored through a gathered axis, or
                         * stored from a gathering read: never virtualised (subst_index keeps to
                         * terms) */
    uint32_t fn, top; /* the statement being counted */
} Counts;

static void count_expr(Counts *c, const IrExpr *e, bool in_gather);

/* The gathers' positions of an access of `indexed`; whether the access has any (the buffer is
 * then read or stored through a gathered axis: subst_index, which keeps to terms, would drop
 * the gather, and the access would read position 0). */
static bool count_gathers(Counts *c, uint32_t indexed, const IrIndex *index) {
    bool any = false;
    for (uint32_t a = 0; a < c->ir->buffers[indexed].rank; a++)
        if (index[a].gather) count_expr(c, index[a].gather, true), any = true;
    return any;
}

static void count_expr(Counts *c, const IrExpr *e, bool in_gather) {
    if (e->kind == IR_LOAD) {
        if (!c->loads[e->buffer]) c->first_load_fn[e->buffer] = c->fn, c->first_load_top[e->buffer] = c->top;
        c->loads[e->buffer]++;
        c->load_fn[e->buffer] = c->fn;
        c->load_top[e->buffer] = c->top;
        if (count_gathers(c, e->buffer, e->index) || in_gather) c->gathered[e->buffer] = 1;
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) count_expr(c, e->args[i], in_gather);
}

static void count_block(Counts *c, const IrBlock *b) {
    for (uint32_t i = 0; i < b->count; i++) {
        const IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) count_block(c, &s->body);
        else if (s->kind == IR_CALL) { /* the runtime reads and writes them: kept as they are */
            const IrAction *a = &c->ir->actions[s->action];
            for (uint32_t k = 0; k < a->buffer_count; k++) {
                uint32_t buf = a->buffers[k];
                if (!c->loads[buf]) c->first_load_fn[buf] = c->fn, c->first_load_top[buf] = c->top;
                c->loads[buf]++;
                c->stores[buf]++;
                c->load_fn[buf] = c->store_fn[buf] = c->fn;
                c->load_top[buf] = c->store_top[buf] = c->top;
                c->gathered[buf] = 1;
            }
        } else {
            count_expr(c, s->value, false);
            if (s->kind == IR_STORE) {
                c->stores[s->buffer]++;
                c->store_fn[s->buffer] = c->fn;
                c->store_top[s->buffer] = c->top;
                count_gathers(c, s->buffer, s->index);
                if (ir_stmt_gathers(c->ir, s)) c->gathered[s->buffer] = 1;
            }
        }
    }
}

static void count_all(const IrProgram *ir, Counts *c) {
    memset(c->stores, 0, ir->buffer_count * sizeof *c->stores);
    memset(c->loads, 0, ir->buffer_count * sizeof *c->loads);
    memset(c->gathered, 0, ir->buffer_count * sizeof *c->gathered);
    c->ir = ir;
    for (c->fn = 0; c->fn < ir->function_count; c->fn++) {
        const IrBlock *body = &ir->functions[c->fn].body;
        for (c->top = 0; c->top < body->count; c->top++) {
            IrBlock one = {&body->items[c->top], 1, 1};
            count_block(c, &one);
        }
    }
}

/* ---- 1 and 2: constants ----------------------------------------------------------------------- */

static bool is_const(const IrExpr *e, double v) { return e->kind == IR_CONST && e->value == v && !signbit(e->value) == !signbit(v); }

/* Returns the (possibly replaced) expression. */
static IrExpr *simplify(IrProgram *ir, const Counts *c, IrExpr *e, bool *changed) {
    if (e->kind == IR_LOAD) {
        const IrBuffer *b = &ir->buffers[e->buffer];
        if (b->kind == BUF_CONSTANT && b->init == INIT_FILL && c->stores[e->buffer] == 0 && !ir_dtype_integer(b->dtype)) {
            IrExpr *k = arena_alloc(ir->arena, sizeof *k);
            k->kind = IR_CONST;
            k->type = (DType)ir_dtype_compute(b->dtype);
            if (ir_dtype_half(b->dtype)) { /* the cell the runtime fills: the double rounded once */
                IrValue fill[3] = {ir_const_value(DTYPE_F64, b->fill)};
                k->value = ir_op_eval(ir_dtype_rounding(b->dtype), DTYPE_F32, DTYPE_F64, fill).f;
            } else {
                k->value = ir_value_number(b->dtype, ir_const_value(b->dtype, b->fill));
            }
            *changed = true;
            return k;
        }
        return e;
    }
    if (e->kind != IR_OP) return e;
    unsigned n = scalar_op_arity(e->op);
    bool all_const = true;
    for (unsigned i = 0; i < n; i++) {
        e->args[i] = simplify(ir, c, e->args[i], changed);
        if (e->args[i]->kind != IR_CONST) all_const = false;
    }
    if (all_const) { /* computed as the executors compute it, in the operation's types */
        unsigned operands = scalar_op_conversion(e->op) ? e->args[0]->type : e->type;
        IrValue x[3] = {{0}, {0}, {0}};
        for (unsigned i = 0; i < n; i++) x[i] = ir_const_value(e->args[i]->type, e->args[i]->value);
        IrExpr *k = arena_alloc(ir->arena, sizeof *k);
        k->kind = IR_CONST;
        k->type = e->type;
        k->value = ir_value_number(e->type, ir_op_eval(e->op, e->type, operands, x));
        *changed = true;
        return k;
    }
    IrExpr *a = e->args[0], *b = e->args[1];
    if (e->op == SOP_WHERE && a->kind == IR_CONST) { /* a known condition (NaN counts as true) */
        *changed = true;
        return a->value != 0.0 ? b : e->args[2];
    }
    if ((e->op == SOP_MUL && is_const(b, 1)) || (e->op == SOP_DIV && is_const(b, 1)) ||
        (e->op == SOP_SUB && is_const(b, 0))) {
        *changed = true;
        return a;
    }
    if (e->op == SOP_MUL && is_const(a, 1)) {
        *changed = true;
        return b;
    }
    return e;
}

static void simplify_block(IrProgram *ir, const Counts *c, IrBlock *b, bool *changed) {
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) simplify_block(ir, c, &s->body, changed);
        else if (s->kind != IR_CALL) s->value = simplify(ir, c, s->value, changed);
        /* A bf16 or f16 store rounds what it stores: rounding an f32 value to the type first
         * changes nothing (the rounding is idempotent), so the store takes the value itself. */
        if (s->kind == IR_STORE && ir_dtype_half(ir->buffers[s->buffer].dtype) && s->value->kind == IR_OP &&
            s->value->op == ir_dtype_rounding(ir->buffers[s->buffer].dtype) &&
            ir_expr_type(ir, s->value->args[0]) == DTYPE_F32) {
            s->value = s->value->args[0];
            *changed = true;
        }
    }
}

/* ---- 4: dead stores ------------------------------------------------------------------------------ */

static void prune_block(IrProgram *ir, const Counts *c, IrBlock *b, bool *changed) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *s = b->items[i];
        bool drop = false;
        if (s->kind == IR_LOOP) {
            prune_block(ir, c, &s->body, changed);
            drop = s->body.count == 0;
        } else if (s->kind == IR_STORE) {
            drop = !ir->buffers[s->buffer].keep && c->loads[s->buffer] == 0;
        }
        if (drop) {
            *changed = true;
            continue;
        }
        b->items[kept++] = s;
    }
    b->count = kept;
}

/* ---- 3: virtualisation ------------------------------------------------------------------------- */

typedef struct Found {
    IrStmt *store;       /* the producer store */
    IrExpr **load;       /* where the consumer's load pointer lives */
    uint32_t loops[64];  /* enclosing loop iterators */
    uint32_t depth;
    bool all_parallel;
} Found;

static bool find_store(IrBlock *b, uint32_t buffer, uint32_t *loops, uint32_t depth, bool parallel, Found *f) {
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) {
            if (depth >= 64) return false;
            loops[depth] = s->iter;
            if (find_store(&s->body, buffer, loops, depth + 1, parallel && s->parallel, f)) return true;
        } else if (s->kind == IR_STORE && s->buffer == buffer) {
            f->store = s;
            memcpy(f->loops, loops, depth * sizeof *loops);
            f->depth = depth;
            f->all_parallel = parallel;
            return true;
        }
    }
    return false;
}

static bool find_load_expr(IrExpr **slot, uint32_t buffer, Found *f) {
    IrExpr *e = *slot;
    if (e->kind == IR_LOAD && e->buffer == buffer) {
        f->load = slot;
        return true;
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (find_load_expr(&e->args[i], buffer, f)) return true;
    return false;
}

static bool find_load(IrBlock *b, uint32_t buffer, uint32_t *loops, uint32_t depth, Found *f) {
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) {
            if (depth >= 64) return false;
            loops[depth] = s->iter;
            if (find_load(&s->body, buffer, loops, depth + 1, f)) return true;
        } else if (s->kind != IR_CALL && find_load_expr(&s->value, buffer, f)) {
            memcpy(f->loops, loops, depth * sizeof *loops);
            f->depth = depth;
            return true;
        }
    }
    return false;
}

/* Where every buffer is stored: for buffer b, entries first[b] … first[b+1]-1 of `at`, each a
 * (function, top-level statement) in program order.  Built once per round of optimise(); a
 * store removed during the round stays listed (a false hazard, retried in the next round). */
typedef struct StoreSites {
    const IrProgram *ir;
    uint32_t *first;
    uint64_t *at; /* function << 32 | statement */
} StoreSites;

static void list_store_sites(const IrBlock *b, uint64_t site, StoreSites *ss, uint32_t *fill) {
    for (uint32_t i = 0; i < b->count; i++) {
        const IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) list_store_sites(&s->body, site, ss, fill);
        else if (s->kind == IR_STORE) ss->at[ss->first[s->buffer] + fill[s->buffer]++] = site;
        else if (s->kind == IR_CALL)
            for (uint32_t k = 0; k < ss->ir->actions[s->action].buffer_count; k++) {
                uint32_t buf = ss->ir->actions[s->action].buffers[k];
                ss->at[ss->first[buf] + fill[buf]++] = site;
            }
    }
}

static bool store_sites_build(const IrProgram *ir, const Counts *c, StoreSites *ss) {
    ss->ir = ir;
    ss->first = calloc(ir->buffer_count + 1, sizeof *ss->first);
    uint32_t *fill = calloc(ir->buffer_count + 1, sizeof *fill);
    uint32_t total = 0;
    for (uint32_t b = 0; b < ir->buffer_count; b++) total += c->stores[b];
    ss->at = malloc((total + 1) * sizeof *ss->at);
    if (!ss->first || !fill || !ss->at) {
        free(fill);
        return false;
    }
    for (uint32_t b = 0; b < ir->buffer_count; b++) ss->first[b + 1] = ss->first[b] + c->stores[b];
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const IrBlock *body = &ir->functions[f].body;
        for (uint32_t i = 0; i < body->count; i++) {
            IrBlock one = {&body->items[i], 1, 1};
            list_store_sites(&one, (uint64_t)f << 32 | i, ss, fill);
        }
    }
    free(fill);
    return true;
}

/* Whether `buffer` is stored by a top-level statement of function f in (after, upto]. */
static bool stored_between(const StoreSites *ss, uint32_t buffer, uint32_t f, uint32_t after, uint32_t upto) {
    uint64_t lo = (uint64_t)f << 32 | after, hi = (uint64_t)f << 32 | upto;
    uint32_t a = ss->first[buffer], z = ss->first[buffer + 1];
    while (a < z) { /* the first site after `lo` */
        uint32_t m = a + (z - a) / 2;
        if (ss->at[m] <= lo) a = m + 1;
        else z = m;
    }
    return a < ss->first[buffer + 1] && ss->at[a] <= hi;
}

/* Whether e loads a buffer that is stored in (after, upto] of f, or `self`. */
static bool reads_stored_between(const IrExpr *e, const StoreSites *ss, uint32_t self, uint32_t f, uint32_t after,
                                 uint32_t upto) {
    if (e->kind == IR_LOAD) return e->buffer == self || stored_between(ss, e->buffer, f, after, upto);
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (reads_stored_between(e->args[i], ss, self, f, after, upto)) return true;
    return false;
}

/* The producer iterator of axis a, or UINT32_MAX for an axis read at 0 (size one). */
typedef struct Subst {
    uint32_t iter_count;
    const uint32_t *iters;   /* producer iterators */
    const IrIndex **by;      /* their replacement */
} Subst;

static IrIndex *subst_index(IrProgram *ir, const IrIndex *ix, uint32_t rank, const Subst *s) {
    IrIndex *out = arena_alloc(ir->arena, (rank ? rank : 1) * sizeof *out);
    for (uint32_t a = 0; a < rank; a++) {
        out[a].offset = ix[a].offset;
        out[a].symbol = ix[a].symbol;
        uint32_t cap = ix[a].term_count;
        for (uint32_t t = 0; t < ix[a].term_count; t++)
            for (uint32_t k = 0; k < s->iter_count; k++)
                if (s->iters[k] == ix[a].terms[t].iter) cap += s->by[k]->term_count;
        out[a].terms = arena_alloc(ir->arena, (cap ? cap : 1) * sizeof *out[a].terms);
        for (uint32_t t = 0; t < ix[a].term_count; t++) {
            const IrTerm *term = &ix[a].terms[t];
            const IrIndex *r = NULL;
            for (uint32_t k = 0; k < s->iter_count && !r; k++)
                if (s->iters[k] == term->iter) r = s->by[k];
            if (!r) {
                out[a].terms[out[a].term_count++] = *term;
                continue;
            }
            out[a].offset += term->coef * r->offset;
            for (uint32_t u = 0; u < r->term_count; u++)
                out[a].terms[out[a].term_count++] = (IrTerm){r->terms[u].iter, term->coef * r->terms[u].coef};
        }
    }
    return out;
}

static IrExpr *subst_expr(IrProgram *ir, const IrExpr *e, const Subst *s) {
    IrExpr *c = arena_alloc(ir->arena, sizeof *c);
    *c = *e;
    if (e->kind == IR_LOAD || e->kind == IR_RANDOM) c->index = subst_index(ir, e->index, ir->buffers[e->buffer].rank, s);
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) c->args[i] = subst_expr(ir, e->args[i], s);
    return c;
}

static bool index_mentions(const IrIndex *ix, uint32_t rank, uint32_t iter) {
    for (uint32_t a = 0; a < rank; a++)
        for (uint32_t t = 0; t < ix[a].term_count; t++)
            if (ix[a].terms[t].iter == iter) return true;
    return false;
}

/* Whether the store found in `prod` writes every cell of b once: each axis one distinct loop
 * iterator with coefficient 1 and no offset (or, on a size-one axis, 0), every loop of the
 * producer used so; iters[k] the k-th such iterator, axis[k] its axis, *n how many. */
static bool plain_write(const IrBuffer *b, const Found *prod, uint32_t *iters, uint32_t *axis, uint32_t *n) {
    *n = 0;
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *ix = &prod->store->index[a];
        if (ix->symbol || ix->offset || ix->gather) return false;
        if (ix->term_count == 0) {
            if (b->dims[a] != 1) return false;
            continue;
        }
        if (ix->term_count != 1 || ix->terms[0].coef != 1 || *n >= 64) return false;
        for (uint32_t k = 0; k < *n; k++)
            if (iters[k] == ix->terms[0].iter) return false;
        iters[*n] = ix->terms[0].iter;
        axis[(*n)++] = a;
    }
    return *n == prod->depth;
}

/* Inline `buffer`, stored once by top-level statement top_store of function f and loaded once
 * by top_load (Counts), when the conditions of 3 hold. */
static bool try_virtualise(IrProgram *ir, uint32_t f, uint32_t buffer, uint32_t top_store, uint32_t top_load,
                           const StoreSites *sites) {
    IrFunction *fn = &ir->functions[f];
    IrBuffer *b = &ir->buffers[buffer];
    uint32_t loops[64];
    Found prod = {0}, cons = {0};
    if (top_load <= top_store) return false;
    IrBlock producer = {&fn->body.items[top_store], 1, 1}, consumer = {&fn->body.items[top_load], 1, 1};
    if (!find_store(&producer, buffer, loops, 0, true, &prod) || !find_load(&consumer, buffer, loops, 0, &cons))
        return false;
    /* A random tensor (a dropout mask) is computed where the program computes it and stored:
     * its numbers belong to the routine run that stores them, and a reader in another function
     * (the backward pass of a later run) must see those, not draw again. */
    if (!prod.all_parallel || ir_expr_reads_local(prod.store->value) || ir_expr_random(prod.store->value)) return false;
    uint32_t iters[64], axis[64], n;
    const IrIndex *by[64];
    const IrIndex *load_index = (*cons.load)->index;
    if (!plain_write(b, &prod, iters, axis, &n)) return false;
    for (uint32_t k = 0; k < n; k++) {
        if (load_index[axis[k]].symbol) return false;
        by[k] = &load_index[axis[k]];
    }
    /* The consumer reads each cell once: all of its loops appear in the load's index. */
    for (uint32_t d = 0; d < cons.depth; d++)
        if (!index_mentions(load_index, b->rank, cons.loops[d])) return false;
    /* Nothing the producer reads changes before the consumer runs. */
    if (reads_stored_between(prod.store->value, sites, buffer, f, top_store, top_load)) return false;
    Subst s = {n, iters, by};
    *cons.load = subst_expr(ir, prod.store->value, &s);
    if (ir_dtype_half(b->dtype)) { /* the value the cell would have held: rounded as a store rounds */
        IrExpr *round = arena_alloc(ir->arena, sizeof *round);
        *round = (IrExpr){.kind = IR_OP, .op = ir_dtype_rounding(b->dtype), .type = DTYPE_F32,
                          .args = {*cons.load}};
        *cons.load = round;
    }
    /* Remove the producer store; pruning drops its loops. */
    prod.store->kind = IR_LOOP;
    prod.store->body = (IrBlock){0};
    prod.store->iter = 0;
    b->is_virtual = true;
    return true;
}

/* ---- 7: small nests recomputed where they are read ------------------------------------------ */

/* A nest of at most SMALL_OPS operations is recomputed by any readers; one of up to
 * SMALL_OPS_MOST by a single reading statement whose iterations times those operations are at
 * most RECOMPUTE_WORK — a few microseconds of a GPU, about a launch's cost: a layer norm's
 * gradient of its variance (about 18 operations on 256 rows, read by each of the rows' 768
 * cells).  (Recomputed by two readers, a larger value can leave its launch's other work where
 * it was and split the readers' launches: more launches, not fewer.) */
enum { SMALL_CELLS = 1 << 16, SMALL_OPS = 3, SMALL_OPS_MOST = 24 };
#define RECOMPUTE_WORK ((double)(1 << 24))

/* The operations in e (a load or a constant: none), or more than `most` once past it. */
static unsigned expr_ops(const IrExpr *e, unsigned most) {
    if (e->kind != IR_OP) return e->kind == IR_LOAD || e->kind == IR_CONST ? 0 : most + 1;
    unsigned n = 1;
    for (unsigned i = 0; i < scalar_op_arity(e->op) && n <= most; i++) n += expr_ops(e->args[i], most);
    return n;
}

/* Where rule 7 looks for the loads of a buffer: counting them (and the iterations that run them,
 * `work`, with `trips` the iterations of the loops around the statement at hand), or replacing
 * each with `value`. */
typedef struct LoadScan {
    uint32_t loads;
    double work, trips;
} LoadScan;

/* The loads of `buffer` in *slot (and below): counted in *scan where `value` is NULL, each
 * replaced by `value` with the producer's iterators `iters` as the load's indices otherwise.
 * False where a load's index has a symbol (never replaced then: the caller counts first). */
static bool recompute_loads(IrProgram *ir, IrExpr **slot, uint32_t buffer, const IrExpr *value, uint32_t n,
                            const uint32_t *iters, const uint32_t *axis, LoadScan *scan) {
    IrExpr *e = *slot;
    if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!recompute_loads(ir, &e->args[i], buffer, value, n, iters, axis, scan)) return false;
        return true;
    }
    if (e->kind != IR_LOAD || e->buffer != buffer) return true;
    const IrIndex *by[64];
    for (uint32_t k = 0; k < n; k++) {
        by[k] = &e->index[axis[k]];
        if (by[k]->symbol || by[k]->gather) return false;
    }
    scan->loads++;
    scan->work += scan->trips;
    if (value) {
        Subst sub = {n, iters, by};
        *slot = subst_expr(ir, value, &sub);
    }
    return true;
}

static bool recompute_block(IrProgram *ir, IrBlock *b, uint32_t buffer, const IrExpr *value, uint32_t n, const uint32_t *iters,
                            const uint32_t *axis, LoadScan *scan) {
    for (uint32_t i = 0; i < b->count; i++) {
        IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) {
            double trips = scan->trips;
            scan->trips *= (double)s->extent; /* a run-time extent (2^40 and up) is past any budget */
            bool ok = recompute_block(ir, &s->body, buffer, value, n, iters, axis, scan);
            scan->trips = trips;
            if (!ok) return false;
        } else if (s->kind == IR_STORE || s->kind == IR_SET_LOCAL) {
            if (!recompute_loads(ir, &s->value, buffer, value, n, iters, axis, scan)) return false;
        }
    }
    return true;
}

/* Rule 7 for `buffer`, stored once by top-level statement top_store of function f. */
static bool try_recompute(IrProgram *ir, const Counts *c, uint32_t f, uint32_t buffer, uint32_t top_store, const StoreSites *sites) {
    IrFunction *fn = &ir->functions[f];
    IrBuffer *b = &ir->buffers[buffer];
    uint32_t loops[64];
    Found prod = {0};
    IrBlock producer = {&fn->body.items[top_store], 1, 1};
    unsigned ops = 0;
    if (!find_store(&producer, buffer, loops, 0, true, &prod) || !prod.all_parallel || ir_expr_reads_local(prod.store->value) ||
        ir_expr_random(prod.store->value) || prod.store->value->type != DTYPE_F32 ||
        (ops = expr_ops(prod.store->value, SMALL_OPS_MOST)) > SMALL_OPS_MOST)
        return false;
    uint32_t iters[64], axis[64], n;
    if (!plain_write(b, &prod, iters, axis, &n)) return false;
    /* Every load in the statements after the store (all of the program's: none elsewhere), none
     * with a symbol in its index; nothing the value reads stored before the last of them; a
     * value of more than SMALL_OPS operations only where its readers' work stays in budget. */
    LoadScan scan = {.trips = 1};
    uint32_t last = top_store, readers = 0;
    for (uint32_t i = top_store + 1; i < fn->body.count; i++) {
        uint32_t before = scan.loads;
        IrBlock one = {&fn->body.items[i], 1, 1};
        if (!recompute_block(ir, &one, buffer, NULL, n, iters, axis, &scan)) return false;
        if (scan.loads > before) last = i, readers++;
    }
    bool small = ops <= SMALL_OPS || (readers == 1 && ops * scan.work <= RECOMPUTE_WORK);
    if (scan.loads != c->loads[buffer] || !scan.loads || !small ||
        reads_stored_between(prod.store->value, sites, buffer, f, top_store, last))
        return false;
    for (uint32_t i = top_store + 1; i <= last; i++) {
        IrBlock one = {&fn->body.items[i], 1, 1};
        recompute_block(ir, &one, buffer, prod.store->value, n, iters, axis, &scan);
    }
    prod.store->kind = IR_LOOP; /* the producer's store goes; pruning drops its loops */
    prod.store->body = (IrBlock){0};
    prod.store->iter = 0;
    b->is_virtual = true;
    return true;
}

static bool recompute_round(IrProgram *ir, Counts *c, bool *changed) {
    StoreSites sites;
    if (!store_sites_build(ir, c, &sites)) return false;
    for (uint32_t b = 0; b < ir->buffer_count; b++) {
        IrBuffer *buf = &ir->buffers[b];
        if (buf->keep || buf->persistent || buf->is_virtual || buf->kind != BUF_COMPUTED || buf->dtype != DTYPE_F32 ||
            buf->size > SMALL_CELLS || c->stores[b] != 1 || c->loads[b] == 0 || c->gathered[b])
            continue;
        if (try_recompute(ir, c, c->store_fn[b], b, c->store_top[b], &sites)) {
            *changed = true;
            break; /* the counts and the store sites are stale now: the next round */
        }
    }
    free(sites.first);
    free(sites.at);
    return true;
}

/* ---- Fills that the next access overwrites ----------------------------------------------------- */

/* The statement inside a nest's chain of parallel loops (each with a one-statement body, or the
 * innermost with the three statements of a reduction), and those loops. */
static const IrBlock *nest_cells(const IrStmt *top, const IrStmt **loops, uint32_t *nloops) {
    const IrStmt *s = top;
    *nloops = 0;
    while (s->kind == IR_LOOP && s->parallel && *nloops < 64) {
        loops[(*nloops)++] = s;
        if (s->body.count != 1 || s->body.items[0]->kind != IR_LOOP) return &s->body;
        s = s->body.items[0];
    }
    return NULL;
}

/* `index` reaches every cell of `buffer` once over these loops: one loop per axis larger than
 * one, of the axis's size, with coefficient 1; index 0 on the others. */
static bool every_cell_once(const IrProgram *ir, const IrStmt *const *loops, uint32_t nloops, uint32_t buffer,
                            const IrIndex *index) {
    const IrBuffer *b = &ir->buffers[buffer];
    uint32_t used = 0;
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *x = &index[a];
        if (x->symbol || x->offset || x->gather) return false;
        if (x->term_count == 0 && b->dims[a] == 1) continue;
        if (x->term_count != 1 || x->terms[0].coef != 1) return false;
        bool found = false;
        for (uint32_t k = 0; k < nloops; k++)
            if (loops[k]->iter == x->terms[0].iter) found = loops[k]->extent == b->dims[a];
        for (uint32_t p = 0; p < a; p++)
            if (index[p].term_count == 1 && index[p].terms[0].iter == x->terms[0].iter) found = false;
        if (!found) return false;
        used++;
    }
    return used == nloops;
}

/* Loads of `buffer` in e at `index` become `value`; false when e loads it anywhere else. */
static bool replace_cell_loads(const IrProgram *ir, IrExpr **slot, uint32_t buffer, const IrIndex *index, IrExpr *value) {
    IrExpr *e = *slot;
    if (e->kind == IR_LOAD && e->buffer == buffer) {
        if (!ir_same_index(ir, buffer, e->index, index)) return false;
        *slot = value;
        return true;
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (!replace_cell_loads(ir, &e->args[i], buffer, index, value)) return false;
    return true;
}

/* Every buffer a statement stores or loads (in its values, its gathered indices, its tensor-core
 * operations, its runtime call), each passed to `visit` (some more than once).  The one
 * definition of what "touches" means: touches() asks it about one buffer, TouchIndex about all. */
typedef struct BufferVisit {
    void (*visit)(struct BufferVisit *v, uint32_t buffer);
    uint32_t buffer; /* touches(): the buffer asked about, and whether it was met */
    bool found;
    uint32_t stmt;   /* TouchIndex: the statement being listed, and the lists being built */
    struct TouchIndex *index;
} BufferVisit;

static void visit_load(void *ctx, uint32_t buffer) {
    BufferVisit *v = ctx;
    v->visit(v, buffer);
}

static void stmt_buffers(const IrProgram *ir, const IrStmt *s, BufferVisit *v) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++) stmt_buffers(ir, s->body.items[i], v);
        return;
    case IR_STORE:
        v->visit(v, s->buffer);
        ir_expr_each_load(ir, s->value, visit_load, v);
        ir_index_each_load(ir, s->buffer, s->index, visit_load, v);
        return;
    case IR_SET_LOCAL: ir_expr_each_load(ir, s->value, visit_load, v); return;
    case IR_BARRIER: return;
    case IR_MMA: v->visit(v, s->mma.a), v->visit(v, s->mma.b), v->visit(v, s->mma.c); return;
    case IR_LDMATRIX: v->visit(v, s->ldmatrix.panel), v->visit(v, s->ldmatrix.regs); return;
    case IR_WGMMA: v->visit(v, s->wgmma.a), v->visit(v, s->wgmma.b), v->visit(v, s->wgmma.c); return;
    case IR_CALL:
        for (uint32_t k = 0; k < ir->actions[s->action].buffer_count; k++) v->visit(v, ir->actions[s->action].buffers[k]);
        return;
    }
}

static void note_if_asked(BufferVisit *v, uint32_t buffer) { v->found |= buffer == v->buffer; }

static bool touches(const IrProgram *ir, const IrStmt *s, uint32_t buffer) {
    BufferVisit v = {.visit = note_if_asked, .buffer = buffer};
    stmt_buffers(ir, s, &v);
    return v.found;
}

/* For each buffer, the top-level statements of a function that touch it, in order (`stmts` from
 * `start[b]` to `start[b + 1]`): built in one pass, so that the first statement after a position
 * that touches a buffer is a search, not a scan of the function (a program of a thousand
 * layers has thousands of fills and of persistent buffers, and scans made it quadratic). */
typedef struct TouchIndex {
    uint32_t *start, *stmts, *last; /* last[b]: the statement that listed b last (+1), to list it once */
    bool counting;                  /* the first pass counts into start[b + 1]; the second fills */
    uint32_t *fill;
} TouchIndex;

static void list_touch(BufferVisit *v, uint32_t buffer) {
    TouchIndex *t = v->index;
    if (t->last[buffer] == v->stmt + 1) return;
    t->last[buffer] = v->stmt + 1;
    if (t->counting) t->start[buffer + 1]++;
    else t->stmts[t->fill[buffer]++] = v->stmt;
}

static bool touch_index_build(const IrProgram *ir, const IrFunction *fn, TouchIndex *t) {
    size_t n = ir->buffer_count + 1;
    t->start = calloc(n + 1, sizeof *t->start);
    t->last = calloc(n, sizeof *t->last);
    t->fill = calloc(n, sizeof *t->fill);
    t->stmts = NULL;
    if (!t->start || !t->last || !t->fill) return false;
    BufferVisit v = {.visit = list_touch, .index = t};
    for (int pass = 0; pass < 2; pass++) {
        t->counting = pass == 0;
        memset(t->last, 0, n * sizeof *t->last);
        for (v.stmt = 0; v.stmt < fn->body.count; v.stmt++) stmt_buffers(ir, fn->body.items[v.stmt], &v);
        if (pass == 0) {
            for (size_t b = 0; b < n; b++) t->start[b + 1] += t->start[b];
            memcpy(t->fill, t->start, n * sizeof *t->fill);
            if (!(t->stmts = malloc(((size_t)t->start[n] + 1) * sizeof *t->stmts))) return false;
        }
    }
    return true;
}

static void touch_index_free(TouchIndex *t) {
    free(t->start);
    free(t->stmts);
    free(t->last);
    free(t->fill);
}

/* The first top-level statement after `after` (UINT32_MAX: from the first) that touches `buffer`,
 * or `count` (the function's statements) when none does. */
static uint32_t first_touch(const TouchIndex *t, uint32_t buffer, uint32_t after, uint32_t count) {
    uint32_t lo = t->start[buffer], hi = t->start[buffer + 1];
    while (lo < hi) { /* the first listed statement > after */
        uint32_t mid = lo + (hi - lo) / 2;
        if (after != UINT32_MAX && t->stmts[mid] <= after) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->start[buffer + 1] ? t->stmts[lo] : count;
}

/* A top-level nest that sets every cell of a buffer to a constant (zero_grads, a reset), when
 * the next statement of the function that touches the buffer stores every one of its cells
 * from, at most, the cell's own value — an update `g = g + f`, a reduction starting from the
 * cell, a plain overwrite — goes: that statement reads the constant instead.  Each cell gets
 * the same value as before (the constant stands where the cell held it), one pass fewer. */
static void drop_overwritten_fills(IrProgram *ir, IrFunction *fn) {
    const IrStmt *loops[64], *wloops[64];
    uint32_t nloops, nw;
    bool *drop = calloc(fn->body.count + 1, sizeof *drop);
    TouchIndex index = {0};
    if (!drop || !touch_index_build(ir, fn, &index)) {
        free(drop);
        touch_index_free(&index);
        return;
    }
    for (uint32_t z = 0; z < fn->body.count; z++) {
        const IrBlock *cells = nest_cells(fn->body.items[z], loops, &nloops);
        if (!cells || cells->count != 1 || cells->items[0]->kind != IR_STORE ||
            cells->items[0]->value->kind != IR_CONST)
            continue;
        const IrStmt *fill = cells->items[0];
        uint32_t g = fill->buffer;
        if (!every_cell_once(ir, loops, nloops, g, fill->index)) continue;
        /* The index stays right while fills go: a rewrite below replaces loads of g alone, in the
         * statement that also stores g. */
        uint32_t w = first_touch(&index, g, z, fn->body.count);
        if (w == fn->body.count) continue;
        const IrBlock *wc = nest_cells(fn->body.items[w], wloops, &nw);
        if (!wc) continue;
        IrExpr *constant = fill->value;
        if (wc->count == 1 && wc->items[0]->kind == IR_STORE) { /* g[cell] = f(g[cell], …) */
            IrStmt *st = wc->items[0];
            if (st->buffer != g || !every_cell_once(ir, wloops, nw, g, st->index)) continue;
            if (!replace_cell_loads(ir, &st->value, g, st->index, constant)) continue;
        } else if (wc->count == 3 && wc->items[0]->kind == IR_SET_LOCAL && wc->items[2]->kind == IR_STORE) {
            /* l = g[cell]; reduction loops (not reading g); g[cell] = l */
            IrStmt *init = wc->items[0], *st = wc->items[2];
            if (st->buffer != g || !every_cell_once(ir, wloops, nw, g, st->index) || touches(ir, wc->items[1], g)) continue;
            if (!replace_cell_loads(ir, &init->value, g, st->index, constant)) continue;
        } else {
            continue;
        }
        drop[z] = true;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < fn->body.count; i++) {
        if (drop[i]) {
            /* keep its description with the statement that follows */
            if (fn->body.items[i]->comment && i + 1 < fn->body.count && !fn->body.items[i + 1]->comment)
                fn->body.items[i + 1]->comment = fn->body.items[i]->comment;
            continue;
        }
        fn->body.items[k++] = fn->body.items[i];
    }
    fn->body.count = k;
    free(drop);
    touch_index_free(&index);
}

/* Virtualisation, rounds to a fixpoint.  Each round counts the accesses once, finds where each
 * buffer's only store and only load are (Counts) and where every store is (StoreSites), and
 * tries every candidate buffer; a candidate whose producer or consumer statement an earlier
 * success of the round changed waits for the next round (its positions are stale).  A chain of
 * n single-use definitions takes O(log n) rounds, each linear in the program. */
static bool virtualise_round(IrProgram *ir, Counts *c, bool *changed) {
    StoreSites sites;
    if (!store_sites_build(ir, c, &sites)) return false;
    uint32_t *base = calloc(ir->function_count + 1, sizeof *base);
    if (!base) {
        free(sites.first);
        free(sites.at);
        return false;
    }
    for (uint32_t f = 0; f < ir->function_count; f++) base[f + 1] = base[f] + ir->functions[f].body.count;
    bool *touched = calloc(base[ir->function_count] + 1, sizeof *touched);
    for (uint32_t b = 0; touched && b < ir->buffer_count; b++) {
        IrBuffer *buf = &ir->buffers[b];
        if (buf->keep || buf->persistent || buf->is_virtual || buf->kind != BUF_COMPUTED || c->stores[b] != 1 ||
            c->loads[b] != 1 || c->gathered[b])
            continue;
        uint32_t f = c->store_fn[b], i = c->store_top[b], j = c->load_top[b];
        if (c->load_fn[b] != f || touched[base[f] + i] || touched[base[f] + j]) continue;
        if (try_virtualise(ir, f, b, i, j, &sites)) {
            touched[base[f] + i] = touched[base[f] + j] = true;
            *changed = true;
        }
    }
    bool ok = touched != NULL;
    free(touched);
    free(base);
    free(sites.first);
    free(sites.at);
    return ok;
}

/* Whether the first statement of `fn` that touches `buffer` stores every one of its cells without
 * reading it (a plain overwrite, or a reduction whose cells start from something else); true
 * when nothing in `fn` touches it. */
static bool overwritten_first(const IrProgram *ir, const IrFunction *fn, const TouchIndex *index, uint32_t buffer) {
    const IrStmt *loops[64];
    uint32_t nloops;
    uint32_t i = first_touch(index, buffer, UINT32_MAX, fn->body.count);
    if (i == fn->body.count) return true;
    const IrBlock *cells = nest_cells(fn->body.items[i], loops, &nloops);
    if (!cells) return false;
    const IrStmt *st = cells->items[cells->count - 1];
    if (st->kind != IR_STORE || st->buffer != buffer || !every_cell_once(ir, loops, nloops, buffer, st->index))
        return false;
    if (cells->count == 1) return !ir_expr_loads(ir, st->value, buffer);
    return cells->count == 3 && cells->items[0]->kind == IR_SET_LOCAL && !touches(ir, cells->items[0], buffer) &&
           !touches(ir, cells->items[1], buffer) && !ir_expr_loads(ir, st->value, buffer);
}

/* Rule 6: a persistent buffer that every function overwrites before reading carries nothing
 * between runs.  True when one was released. */
static bool release_overwritten_state(IrProgram *ir) {
    bool released = false, ok = true;
    TouchIndex *index = calloc(ir->function_count + 1, sizeof *index);
    for (uint32_t f = 0; index && f < ir->function_count; f++) ok &= touch_index_build(ir, &ir->functions[f], &index[f]);
    for (uint32_t b = 0; index && ok && b < ir->buffer_count; b++) {
        IrBuffer *buf = &ir->buffers[b];
        if (!buf->persistent || buf->keep) continue;
        bool dead_at_entry = true;
        for (uint32_t f = 0; f < ir->function_count && dead_at_entry; f++)
            dead_at_entry = overwritten_first(ir, &ir->functions[f], &index[f], b);
        if (dead_at_entry) {
            buf->persistent = false;
            released = true;
        }
    }
    for (uint32_t f = 0; index && f < ir->function_count; f++) touch_index_free(&index[f]);
    free(index);
    return released;
}

/* ---- 8: copies read from their source ---------------------------------------------------------- */

/* The buffer that the top-level nest `top` copies into `b`, every cell once from the same cell
 * of a buffer of the same element type and axes (`b[cell] = a[cell]`, or `-0 + a[cell]`, or
 * `0 + a[cell]` of integers, exact; or, when b is a gradient, `0 + a[cell]`: a gradient's first
 * contribution added to its zeros), or UINT32_MAX when `top` is not such a copy. */
static uint32_t copy_source(const IrProgram *ir, const IrStmt *top, uint32_t b) {
    const IrStmt *loops[64];
    uint32_t nloops;
    const IrBlock *cells = nest_cells(top, loops, &nloops);
    if (!cells || cells->count != 1 || cells->items[0]->kind != IR_STORE) return UINT32_MAX;
    const IrStmt *st = cells->items[0];
    const IrBuffer *to = &ir->buffers[b];
    if (st->buffer != b || !every_cell_once(ir, loops, nloops, b, st->index)) return UINT32_MAX;
    const IrExpr *v = st->value;
    if (v->kind == IR_OP && v->op == SOP_ADD) {
        for (unsigned k = 0; k < 2; k++) {
            const IrExpr *zero = v->args[k];
            if (is_const(zero, -0.0) || (is_const(zero, 0) && (to->grad || ir_dtype_integer(to->dtype)))) {
                v = v->args[1 - k];
                break;
            }
        }
    }
    if (v->kind != IR_LOAD || v->buffer == b) return UINT32_MAX;
    const IrBuffer *from = &ir->buffers[v->buffer];
    if (from->dtype != to->dtype || from->rank != to->rank || from->size_symbol != to->size_symbol ||
        memcmp(from->dims, to->dims, to->rank * sizeof *to->dims) != 0 || !ir_same_index(ir, b, v->index, st->index))
        return UINT32_MAX;
    return v->buffer;
}

/* Rule 8: a buffer that nothing observes, stored once by a copy of another buffer (copy_source)
 * and read only after it in the same function, while that buffer is not stored again, is read
 * from that buffer instead; rule 4 then removes the copy.  Backprop makes such copies wherever a
 * gradient passes through unchanged (the operands of a residual `+`, of a bias's add): each a
 * pass over memory, and a buffer, for values another buffer holds.  Reading the source is exact
 * for a plain copy.  For a gradient's `0 + a` it differs only where a cell of a is -0 (the copy
 * held +0), and a gradient reaches what is observed only through products and selections, which
 * keep a zero a zero, and sums that start from +0 (an observed gradient is accumulated onto its
 * zeros, a contraction from a zero accumulator), which make every zero +0: what any executor
 * prints, exports or carries to the next run is the same bits either way (docs/ir.md §4).  A
 * buffer whose loads moved this round (the source of a copy forwarded) is tried in the next,
 * once its reads are counted again. */
static bool forward_copies_round(IrProgram *ir, const Counts *c, bool *changed) {
    StoreSites sites;
    if (!store_sites_build(ir, c, &sites)) return false;
    bool *gained = calloc(ir->buffer_count + 1, sizeof *gained);
    for (uint32_t b = 0; gained && b < ir->buffer_count; b++) {
        const IrBuffer *buf = &ir->buffers[b];
        if (buf->keep || buf->persistent || buf->is_virtual || buf->kind != BUF_COMPUTED || c->stores[b] != 1 ||
            c->loads[b] == 0 || c->gathered[b] || gained[b])
            continue;
        uint32_t f = c->store_fn[b], i = c->store_top[b];
        if (c->first_load_fn[b] != f || c->load_fn[b] != f || c->first_load_top[b] <= i) continue;
        IrFunction *fn = &ir->functions[f];
        uint32_t from = copy_source(ir, fn->body.items[i], b);
        if (from == UINT32_MAX || stored_between(&sites, from, f, i, c->load_top[b])) continue;
        for (uint32_t k = i + 1; k <= c->load_top[b]; k++) {
            IrStmt *top = fn->body.items[k];
            if (ir_rename_loads(top, b, from)) /* (b is not gathered by); the dump says where its reads went */
                top->comment = arena_printf(ir->arena, "%s%s%s read from %s, of which it was a copy",
                                            top->comment ? top->comment : "", top->comment ? "; " : "",
                                            ir->buffers[b].name, ir->buffers[from].name);
        }
        gained[from] = true;
        *changed = true;
    }
    bool ok = gained != NULL;
    free(gained);
    free(sites.first);
    free(sites.at);
    return ok;
}

/* Rules 1 to 4 and 8 (and 7 where `launches`) to a fixpoint. */
static void rounds(IrProgram *ir, Counts *c, bool launches) {
    bool changed = true;
    for (int round = 0; changed && round < 1000; round++) {
        changed = false;
        count_all(ir, c);
        for (uint32_t f = 0; f < ir->function_count; f++) simplify_block(ir, c, &ir->functions[f].body, &changed);
        count_all(ir, c);
        if (!forward_copies_round(ir, c, &changed)) break;
        count_all(ir, c);
        if (!virtualise_round(ir, c, &changed)) break;
        count_all(ir, c);
        if (launches && !changed) { /* rule 7 where nothing else changed; recounted where it did */
            if (!recompute_round(ir, c, &changed)) break;
            if (changed) count_all(ir, c);
        }
        for (uint32_t f = 0; f < ir->function_count; f++) prune_block(ir, c, &ir->functions[f].body, &changed);
    }
}

void optimise(IrProgram *ir, bool launches) {
    Counts c;
    size_t n = ir->buffer_count + 1;
    uint32_t *all = calloc(9 * n, sizeof *all);
    if (!all) return; /* optimisation is optional */
    c.stores = all, c.loads = all + n, c.store_fn = all + 2 * n, c.store_top = all + 3 * n;
    c.load_fn = all + 4 * n, c.load_top = all + 5 * n, c.gathered = all + 6 * n;
    c.first_load_fn = all + 7 * n, c.first_load_top = all + 8 * n;
    rounds(ir, &c, launches);
    for (uint32_t f = 0; f < ir->function_count; f++) drop_overwritten_fills(ir, &ir->functions[f]);
    if (release_overwritten_state(ir)) rounds(ir, &c, launches);
    count_all(ir, &c);
    for (uint32_t b = 0; b < ir->buffer_count; b++)
        if (!ir->buffers[b].keep && c.loads[b] == 0 && c.stores[b] == 0) ir->buffers[b].is_virtual = true;
    free(all);
}
