/* lower.c — assignments with projections become loop nests (ir.h, part 2).
 *
 * What it does: for one assignment `lhs ⊕= f(reads)` and its projections record, emits
 *   - when it resets (`=:+` …) and the LHS map is not surjective, a nest that sets every cell
 *     of lhs to the accumulator's neutral value (the cells the map never reaches);
 *   - one parallel loop per product-space iterator the LHS map mentions (in the order of the
 *     LHS axes), then, when iterators are left over — the reduction axes, "what the output
 *     forgot to mention" (seed 003) — a local accumulator started at the neutral value (reset)
 *     or at the cell's current value, the reduction loops accumulating into it, and one store;
 *   - without reduction axes, one store per cell: `f(reads)` itself when the assignment resets
 *     and its map is injective (the plain write of seed 003), else `lhs ⊕ f(reads)`.
 * (An assignment that reads its own left side through another slot's map gets no parallel loop,
 * unless that map reaches the very cell being written: `m =: 0.9 * m + g`.)
 * Affine indices (convolution windows, strides): a padded one -- some points fall outside its
 * axis -- is never guarded; instead each window-position iterator is cut into segments (its
 * interior as one loop, each boundary value alone) and, per region of segments, the kernel
 * iterators run only over their in-bounds range, so padding reads nothing, which is reading the
 * accumulation's neutral element.  An LHS written through an affine index has no parallel loop
 * and no local accumulator: every point does its own read-modify-write (of a product added:
 * X = fma(x, y, X), as a reduction's step) -- except a merged
 * axis's index (g, o), which numbers the cells one to one: its iterators are parallel loops.
 * Through a gathered index (a scatter) the same read-modify-write, with parallel loops over the
 * iterators that index an LHS axis on their own.  Either scatter into a bf16 or f16 buffer
 * accumulates in an f32 twin of it (widened first, rounded into it after: one rounding a cell).
 * Concatenated indices: one region per choice of an active piece of every concatenated axis;
 * the other pieces' iterators get no loop, and a region in which the LHS or a read would use
 * one (or would reach a fixed-size gap) is left out.  Regions may add into one cell, so an
 * accumulating reset is a fill and every region then accumulates.
 * Every cell reached by the parallel loops is written exactly once, so reading the cell into
 * a local first and storing at the end is the read-modify-write of the seed, reassociated
 * nowhere: accumulation runs in the reduction loops' order.  A reduction `=+` of a product
 * `x * y` accumulates by fused multiply-add, `l = fma(x, y, l)` (one rounding per step; every
 * target and the reference executor compute it so).  Into a bf16 or f16 buffer the accumulator
 * is an f32 local and its one store rounds (docs/ir.md §2.10): a reduction accumulates in f32.
 * The loop order and everything else about
 * speed is the schedule's (sched.c): lowering states what is computed, not how fast.
 *
 * Requires: assignments from assign.c (each with its projections), buffers for every access. */
#include "ir/lower.h"

#include <stdlib.h>
#include <string.h>

#include "ir/assign.h"
#include "ir/attention.h"
#include "infer/proj.h"

typedef struct Lowerer {
    IrProgram *ir;
    const Assignment *a;
    DType lhs_type; /* the left side's buffer's compute type (f32 for bf16 and f16: a reduction
                     * into them accumulates in an f32 local and rounds once, at its store):
                     * the type of its accumulation steps and neutral values */
    IrFunction *fn;
    uint32_t base; /* the function's iterator for product iterator 0 of this assignment */
    int64_t *lo;   /* per product iterator: where the current region starts */
    uint32_t *choice; /* per concatenated axis: the part active in the current region */
    bool *inactive;   /* per product iterator: a concatenation part not active in the region */
} Lowerer;

/* An operation of type `type` on a and b (b NULL for one operand), and a constant of a type. */
static IrExpr *typed_op(Lowerer *l, ScalarOp op, DType type, IrExpr *a, IrExpr *b) {
    IrExpr *e = arena_alloc(l->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_OP, .op = op, .type = type, .args = {a, b}};
    return e;
}
static IrExpr *typed_const(Lowerer *l, double value, DType type) {
    IrExpr *e = arena_alloc(l->ir->arena, sizeof *e);
    *e = (IrExpr){.kind = IR_CONST, .type = type, .value = value};
    return e;
}

/* The index of `slot`'s map, each iterator starting at lo[iterator] (its region's first value). */
static IrIndex *access_index(Lowerer *l, const Projections *p, uint32_t slot) {
    uint32_t rank = p->rank[slot];
    IrIndex *ix = arena_alloc(l->ir->arena, (rank ? rank : 1) * sizeof *ix);
    for (uint32_t a = 0; a < rank; a++) {
        const ProjIndex *pi = &p->maps[slot][a];
        switch (pi->kind) {
        case PIDX_ITER:
            ix[a].terms = arena_alloc(l->ir->arena, sizeof *ix[a].terms);
            ix[a].terms[0] = (IrTerm){l->base + pi->iter, 1};
            ix[a].term_count = 1;
            ix[a].offset = l->lo[pi->iter];
            break;
        case PIDX_FIXED: ix[a].offset = pi->fixed; break;
        case PIDX_SYMBOL: ix[a].symbol = pi->symbol; break;
        case PIDX_AFFINE:
            ix[a].terms = arena_alloc(l->ir->arena, (pi->term_count ? pi->term_count : 1) * sizeof *ix[a].terms);
            ix[a].offset = pi->fixed;
            for (uint32_t t = 0; t < pi->term_count; t++) {
                ix[a].terms[t] = (IrTerm){l->base + pi->terms[t], pi->coef[t]};
                ix[a].offset += pi->coef[t] * l->lo[pi->terms[t]];
            }
            ix[a].term_count = pi->term_count;
            break;
        case PIDX_GATHER: { /* the gathering slot's value at this point, as an i32 (ir.h) */
            const Access *from = &l->a->slot_values[pi->gather];
            IrExpr *at = arena_alloc(l->ir->arena, sizeof *at);
            if (from->symbol) { /* `!@i`: the index symbol's value */
                at->kind = IR_SYMBOL;
                at->symbol = from->symbol;
            } else {
                at->kind = IR_LOAD;
                at->buffer = from->buffer;
                at->index = access_index(l, p, pi->gather);
            }
            DType type = from->symbol ? DTYPE_F32 : (DType)ir_dtype_compute(l->ir->buffers[from->buffer].dtype);
            if (type == DTYPE_I64) /* held to i32's range first (the axis clamps them further) */
                at = typed_op(l, SOP_MAX, DTYPE_I64, typed_op(l, SOP_MIN, DTYPE_I64, at, typed_const(l, INT32_MAX, DTYPE_I64)),
                              typed_const(l, INT32_MIN, DTYPE_I64));
            /* number positions converted toward zero, as to_i32 does; i64 ones by their low bits */
            ix[a].gather = type == DTYPE_I32 ? at : typed_op(l, SOP_TO_I32, DTYPE_I32, at, NULL);
            break;
        }
        case PIDX_CONCAT: { /* the active part (an access in this region reads no gap) */
            uint32_t j = l->choice[pi->concat->id], it = pi->concat->iter[j];
            ix[a].terms = arena_alloc(l->ir->arena, sizeof *ix[a].terms);
            ix[a].terms[0] = (IrTerm){l->base + it, 1};
            ix[a].term_count = 1;
            ix[a].offset = pi->concat->offset[j] + l->lo[it];
            break;
        }
        }
    }
    return ix;
}

/* Whether `slot` is accessed in the current region: it reads no iterator of an inactive
 * concatenation part, and no concatenated axis of it has a gap active. */
static bool slot_active(const Lowerer *l, const Projections *p, uint32_t slot) {
    for (uint32_t a = 0; a < p->rank[slot]; a++) {
        const ProjIndex *pi = &p->maps[slot][a];
        if (pi->kind == PIDX_ITER && l->inactive[pi->iter]) return false;
        if (pi->kind == PIDX_AFFINE)
            for (uint32_t t = 0; t < pi->term_count; t++)
                if (l->inactive[pi->terms[t]]) return false;
        if (pi->kind == PIDX_CONCAT) {
            uint32_t j = l->choice[pi->concat->id];
            if (pi->concat->gap[j] || l->inactive[pi->concat->iter[j]]) return false;
        }
    }
    return true;
}

/* Concatenation region `r` (0 … the product of the part counts): its part of every
 * concatenated axis, and the iterators of the other label parts, which are inactive. */
static void concat_region(Lowerer *l, const Projections *p, uint32_t r) {
    memset(l->inactive, 0, (p->iter_count ? p->iter_count : 1) * sizeof *l->inactive);
    for (uint32_t c = 0; c < p->concat_count; c++) {
        l->choice[c] = r % p->concats[c]->count;
        r /= p->concats[c]->count;
    }
    for (uint32_t c = 0; c < p->concat_count; c++)
        for (uint32_t j = 0; j < p->concats[c]->count; j++)
            if (j != l->choice[c] && !p->concats[c]->gap[j]) l->inactive[p->concats[c]->iter[j]] = true;
}

static IrExpr *new_expr(Lowerer *l, IrExprKind kind) {
    IrExpr *e = arena_alloc(l->ir->arena, sizeof *e);
    e->kind = kind;
    return e;
}

static IrExpr *constant(Lowerer *l, double v) {
    IrExpr *e = new_expr(l, IR_CONST);
    e->value = v;
    return e;
}

/* an accumulation into an i32 buffer is on i32s, into an f64 one on f64s */
static IrExpr *binary(Lowerer *l, ScalarOp op, IrExpr *a, IrExpr *b) { return typed_op(l, op, l->lhs_type, a, b); }

/* An accumulator's neutral value for the left side: the integer limits for max and min of i32s
 * and i64s, and of the storage types computed as i32 (u8: 0 and 255, bool: 0 and 1; the i32
 * limits stored into a bool cell are 1, from which a maximum then started). */
static IrExpr *neutral(Lowerer *l, AccumOp accum) {
    IrExpr *e = constant(l, accum_neutral(accum));
    e->type = l->lhs_type;
    if (l->lhs_type == DTYPE_I32 || l->lhs_type == DTYPE_I64) {
        uint8_t stored = l->ir->buffers[l->a->lhs.buffer].dtype;
        bool wide = l->lhs_type == DTYPE_I64; /* INT64_MAX's double is 2^63, which the constant holds to INT64_MAX */
        double least = stored == TSR_DTYPE_U8 || stored == TSR_DTYPE_BOOL ? 0 : wide ? -0x1p63 : INT32_MIN;
        double most = stored == TSR_DTYPE_U8 ? 255 : stored == TSR_DTYPE_BOOL ? 1 : wide ? 0x1p63 : INT32_MAX;
        if (accum == ACC_MAX) e->value = least;
        if (accum == ACC_MIN) e->value = most;
    }
    return e;
}

/* A factor of a product that a reduction sums: itself, or with --tf32 and an f32 accumulator
 * SOP_TO_TF32 of it (a load of a bf16 or f16 buffer is exact in tf32 already, and stays a load
 * for the GPU's tensor cores). */
static IrExpr *tf32_factor(Lowerer *l, IrExpr *x) {
    if (!l->ir->tf32_products || l->lhs_type != DTYPE_F32 || ir_expr_type(l->ir, x) != DTYPE_F32 ||
        (x->kind == IR_LOAD && ir_dtype_half(l->ir->buffers[x->buffer].dtype)))
        return x;
    IrExpr *e = new_expr(l, IR_OP);
    e->op = SOP_TO_TF32;
    e->type = DTYPE_F32;
    e->args[0] = x;
    return e;
}

/* One step of a reduction: acc ⊕ rhs; a sum of products (`=+`/`=:+` of x * y) by fused
 * multiply-add, fma(x, y, acc), one rounding (docs/ir.md, "FMA"), its factors rounded to tf32
 * first with --tf32 when it accumulates in f32; of i32 products, an add. */
static IrExpr *reduction_step(Lowerer *l, AccumOp accum, IrExpr *acc, IrExpr *rhs) {
    if (accum == ACC_ADD && rhs->kind == IR_OP && rhs->op == SOP_MUL && !ir_dtype_integer(l->lhs_type)) {
        IrExpr *e = new_expr(l, IR_OP);
        e->op = SOP_FMA;
        e->type = l->lhs_type;
        e->args[0] = tf32_factor(l, rhs->args[0]);
        e->args[1] = tf32_factor(l, rhs->args[1]);
        e->args[2] = acc;
        return e;
    }
    return binary(l, accum_scalar_op(accum), acc, rhs);
}

static IrExpr *lower_expr(Lowerer *l, const Assignment *a, const AExpr *x) {
    switch (x->kind) {
    case AE_CONST: {
        IrExpr *e = constant(l, x->value);
        e->type = (DType)x->type;
        return e;
    }
    case AE_READ: {
        const Access *acc = &a->reads[x->read];
        if (acc->symbol) { /* `!@i`: the symbol's value */
            IrExpr *e = new_expr(l, IR_SYMBOL);
            e->symbol = acc->symbol;
            return e;
        }
        IrExpr *e = new_expr(l, IR_LOAD);
        e->buffer = acc->buffer;
        e->index = access_index(l, a->proj, acc->slot);
        return e;
    }
    case AE_OP: {
        IrExpr *e = new_expr(l, IR_OP);
        e->op = x->op;
        e->type = (DType)x->type;
        for (unsigned i = 0; i < scalar_op_arity(x->op); i++) e->args[i] = lower_expr(l, a, x->args[i]);
        return e;
    }
    case AE_RANDOM: { /* the number of the cell being computed: the left side's, at its index */
        IrExpr *e = new_expr(l, IR_RANDOM);
        e->buffer = a->lhs.buffer;
        e->index = access_index(l, a->proj, a->lhs.slot);
        return e;
    }
    case AE_KERNEL: break; /* lower_attention.c builds a kernel's nests */
    }
    return NULL;
}

/* Whether two slots' index maps reach the same cell at every point of the product space: axis
 * for axis the same iterator or the same fixed position (an update `m =: 0.9 * m + g` reads
 * its left side through its own operand's slot, but only at the cell it writes). */
static bool same_cells(const Projections *p, uint32_t s1, uint32_t s2) {
    if (p->rank[s1] != p->rank[s2]) return false;
    for (uint32_t ax = 0; ax < p->rank[s1]; ax++) {
        const ProjIndex *x = &p->maps[s1][ax], *y = &p->maps[s2][ax];
        if (x->kind != y->kind || x->symbol || y->symbol) return false;
        if (x->kind == PIDX_ITER ? x->iter != y->iter : x->kind == PIDX_FIXED ? x->fixed != y->fixed : true) return false;
    }
    return true;
}

static IrStmt *loop(Lowerer *l, uint32_t iter, uint64_t extent, bool parallel) {
    IrStmt *s = arena_alloc(l->ir->arena, sizeof *s);
    s->kind = IR_LOOP;
    s->iter = iter;
    s->extent = extent;
    s->parallel = parallel;
    return s;
}

static IrStmt *store(Lowerer *l, uint32_t buffer, IrIndex *index, IrExpr *value) {
    IrStmt *s = arena_alloc(l->ir->arena, sizeof *s);
    s->kind = IR_STORE;
    s->buffer = buffer;
    s->index = index;
    s->value = value;
    return s;
}

/* Set every cell of `buffer` to `value` — or, with `value` NULL, to the same cell of `from`, a
 * buffer of its shape: one parallel loop per axis larger than one. */
static IrStmt *fill_nest(Lowerer *l, uint32_t buffer, IrExpr *value, uint32_t from) {
    const IrBuffer *b = &l->ir->buffers[buffer];
    IrIndex *ix = arena_alloc(l->ir->arena, (b->rank ? b->rank : 1) * sizeof *ix);
    IrStmt *outer = NULL, *inner = NULL;
    for (uint32_t a = 0; a < b->rank; a++) {
        if (b->dims[a] == 1) continue;
        uint32_t it = l->fn->iter_count++;
        ix[a].terms = arena_alloc(l->ir->arena, sizeof *ix[a].terms);
        ix[a].terms[0] = (IrTerm){it, 1};
        ix[a].term_count = 1;
        IrStmt *lp = loop(l, it, b->dims[a], true);
        if (inner) ir_block_push(l->ir->arena, &inner->body, lp);
        else outer = lp;
        inner = lp;
    }
    if (!value) {
        value = new_expr(l, IR_LOAD);
        value->buffer = from;
        value->index = ix;
    }
    IrStmt *st = store(l, buffer, ix, value);
    if (!inner) return st;
    ir_block_push(l->ir->arena, &inner->body, st);
    return outer;
}

/* The assignment's right side as written in the block, for the dump's comment; an infix
 * operation is parenthesised except at the top. */
static void print_aexpr(Lowerer *l, const Assignment *a, const AExpr *x, bool top, char **out) {
    Arena *arena = l->ir->arena;
    switch (x->kind) {
    case AE_CONST: *out = arena_printf(arena, "%s%g", *out, x->value); break;
    case AE_RANDOM: *out = arena_printf(arena, "%srandom ()", *out); break;
    case AE_KERNEL: break;
    case AE_READ: {
        const Access *acc = &a->reads[x->read];
        const char *name = acc->symbol ? arena_printf(arena, "!@%s", acc->symbol) : l->ir->buffers[acc->buffer].name;
        *out = arena_printf(arena, "%s%s", *out, name);
        break;
    }
    case AE_OP: {
        const char *name = scalar_op_name(x->op);
        bool infix = scalar_op_infix(x->op);
        if (!infix || !top) *out = arena_printf(arena, "%s%s(", *out, infix ? "" : name);
        for (unsigned i = 0; i < scalar_op_arity(x->op); i++) {
            if (i) *out = arena_printf(arena, infix ? "%s %s " : "%s, ", *out, name);
            print_aexpr(l, a, x->args[i], false, out);
        }
        if (!infix || !top) *out = arena_printf(arena, "%s)", *out);
        break;
    }
    }
}

static const char *describe(Lowerer *l, const Assignment *a, bool injective, bool surjective) {
    const char *where = "";
    if (a->span.file) {
        const Source *src = source_get(a->span.file);
        const char *path = src->path, *slash = strrchr(path, '/');
        unsigned line, col;
        span_line_col(a->span, &line, &col);
        where = arena_printf(l->ir->arena, " at %s:%u:%u", slash ? slash + 1 : path, line, col);
    }
    uint32_t lhs = a->lhs.buffer;
    char *rhs = "";
    print_aexpr(l, a, a->rhs, true, &rhs);
    return arena_printf(l->ir->arena, "%s%s: %s %s %s; lhs map %sinjective, %ssurjective", a->what, where,
                        l->ir->buffers[lhs].name, accum_text(a->accum, a->reset), rhs,
                        injective ? "" : "not ", surjective ? "" : "not ");
}

/* ---- Padding: regions of the product space where every access is inside its buffer ------------ */

/* A padded affine access: c + Σ coef·iterator must lie in [0, size). */
typedef struct Guard {
    int64_t c, size;
    uint32_t n;
    uint32_t it[2]; /* it[0] the `over` iterator when there are two */
    int64_t coef[2];
} Guard;

typedef struct Range {
    int64_t lo, hi; /* [lo, hi) */
} Range;

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

static void narrow(Range *r, int64_t lo, int64_t hi) {
    if (lo > r->lo) r->lo = lo;
    if (hi < r->hi) r->hi = hi;
    if (r->hi < r->lo) r->hi = r->lo;
}

typedef struct Padding {
    Guard *guards;
    uint32_t guard_count, guard_cap;
    bool *split;       /* per iterator: an `over` iterator, cut into segments */
    Range **segments;  /* per split iterator: boundary values one by one, the interior as one */
    uint32_t *segment_count;
    uint32_t region_count;
} Padding;

static void add_guards(Lowerer *l, Padding *pad, const Projections *p, uint32_t slot) {
    for (uint32_t a = 0; a < p->rank[slot]; a++) {
        const ProjIndex *pi = &p->maps[slot][a];
        if (pi->kind != PIDX_AFFINE || !pi->padded) continue;
        Guard g = {.c = pi->fixed, .size = (int64_t)p->axis_size[slot][a], .n = pi->term_count};
        for (uint32_t t = 0; t < pi->term_count; t++) g.it[t] = pi->terms[t], g.coef[t] = pi->coef[t];
        ARENA_PUSH(l->ir->arena, pad->guards, pad->guard_count, pad->guard_cap, g);
    }
}

/* Cut every `over` iterator of a two-term guard into segments: inside the interior segment
 * every kernel position is in bounds; each boundary value is a segment of its own, where the
 * kernel's range is narrowed.  Returns false (after an error) for a form this does not cover. */
static bool plan_padding(Lowerer *l, Padding *pad, const Projections *p, const Assignment *a) {
    Arena *arena = l->ir->arena;
    uint32_t n = p->iter_count;
    pad->split = arena_alloc(arena, (n ? n : 1) * sizeof *pad->split);
    pad->segments = arena_alloc(arena, (n ? n : 1) * sizeof *pad->segments);
    pad->segment_count = arena_alloc(arena, (n ? n : 1) * sizeof *pad->segment_count);
    pad->region_count = 1;
    for (uint32_t i = 0; i < pad->guard_count; i++)
        if (pad->guards[i].n == 2) pad->split[pad->guards[i].it[0]] = true;
    for (uint32_t i = 0; i < pad->guard_count; i++)
        if (pad->guards[i].n == 2 && pad->split[pad->guards[i].it[1]]) {
            diag_error(a->span, "an iterator that is both the window position of one padded axis and the kernel "
                       "position of another is not supported");
            return false;
        }
    for (uint32_t x = 0; x < n; x++) {
        if (!pad->split[x]) continue;
        int64_t extent = (int64_t)p->iter_size[x];
        Range inner = {0, extent};
        for (uint32_t i = 0; i < pad->guard_count; i++) {
            const Guard *g = &pad->guards[i];
            if (g->n != 2 || g->it[0] != x) continue;
            int64_t kernel_last = g->coef[1] * (int64_t)(p->iter_size[g->it[1]] - 1);
            narrow(&inner, ceil_div(-g->c, g->coef[0]), floor_div(g->size - 1 - g->c - kernel_last, g->coef[0]) + 1);
        }
        uint32_t count = 0;
        Range *seg = arena_alloc(arena, (size_t)(extent + 1) * sizeof *seg);
        if (inner.hi <= inner.lo) inner = (Range){extent, extent};
        for (int64_t v = 0; v < inner.lo; v++) seg[count++] = (Range){v, v + 1};
        if (inner.hi > inner.lo) seg[count++] = inner;
        for (int64_t v = inner.hi > inner.lo ? inner.hi : extent; v < extent; v++) seg[count++] = (Range){v, v + 1};
        pad->segments[x] = seg;
        pad->segment_count[x] = count;
        if ((uint64_t)pad->region_count * count > 4096) {
            diag_error(a->span, "the padding of this operation would need more than 4096 loop nests");
            return false;
        }
        pad->region_count *= count;
    }
    return true;
}

/* Region `r`'s range of every iterator; false when some point of it falls entirely outside. */
static void region_ranges(const Padding *pad, const Projections *p, uint32_t r, Range *range) {
    for (uint32_t it = 0; it < p->iter_count; it++) range[it] = (Range){0, (int64_t)p->iter_size[it]};
    for (uint32_t it = 0; it < p->iter_count; it++) {
        if (!pad->split[it]) continue;
        range[it] = pad->segments[it][r % pad->segment_count[it]];
        r /= pad->segment_count[it];
    }
    for (uint32_t i = 0; i < pad->guard_count; i++) {
        const Guard *g = &pad->guards[i];
        if (g->n == 0) {
            if (g->c < 0 || g->c >= g->size) /* every point outside: no point at all */
                for (uint32_t it = 0; it < p->iter_count; it++) range[it].hi = range[it].lo;
        } else if (g->n == 1) {
            narrow(&range[g->it[0]], ceil_div(-g->c, g->coef[0]), floor_div(g->size - 1 - g->c, g->coef[0]) + 1);
        } else if (range[g->it[0]].hi - range[g->it[0]].lo == 1) {
            int64_t c = g->c + g->coef[0] * range[g->it[0]].lo;
            narrow(&range[g->it[1]], ceil_div(-c, g->coef[1]), floor_div(g->size - 1 - c, g->coef[1]) + 1);
        }
    }
}

/* ---- One assignment ----------------------------------------------------------------------------- */

/* The right side of an assignment sees its left side as it was before the assignment
 * (docs/language.md §2.9): `m =: m ~logic:"i, j => j, i"` transposes, `c =:+ c * c` squares.
 * Reads at the very cell each point writes see that anyway, as long as nothing fills the left
 * side first; any other read of it — through another index map, or after a reset that fills it —
 * would see cells the nests have already written.  Then every read of the left side reads a copy
 * of it taken first (a scratch buffer `X.before#lN`), and the assignment returned reads that. */
static const Assignment *read_before_writing(Lowerer *l, const Assignment *a, bool surjective, bool skips_cells) {
    const Projections *p = a->proj;
    uint32_t lhs = a->lhs.buffer;
    bool fills_first = a->reset && (!surjective || (a->accum != ACC_NONE && (skips_cells || p->concat_count)));
    bool reads_written = false;
    for (uint32_t i = 0; i < a->read_count; i++)
        reads_written |= !a->reads[i].symbol && a->reads[i].buffer == lhs &&
                         (fills_first || !same_cells(p, a->reads[i].slot, a->lhs.slot));
    if (!reads_written) return a;
    IrProgram *ir = l->ir;
    const char *name = ir->buffers[lhs].name;
    uint32_t before = ir_twin(ir, lhs, ir->buffers[lhs].dtype, arena_printf(ir->arena, "%s.before#l%u", name, ir->buffer_count));
    IrStmt *copy = fill_nest(l, before, NULL, lhs);
    copy->comment = arena_printf(ir->arena, "%s as it is before the assignment below, which reads it", name);
    ir_block_push(ir->arena, &l->fn->body, copy);
    Assignment *reading = arena_alloc(ir->arena, sizeof *reading);
    *reading = *a;
    reading->reads = arena_alloc(ir->arena, a->read_count * sizeof *reading->reads);
    for (uint32_t i = 0; i < a->read_count; i++) {
        reading->reads[i] = a->reads[i];
        if (!a->reads[i].symbol && a->reads[i].buffer == lhs) reading->reads[i].buffer = before;
    }
    l->a = reading;
    return reading;
}

void lower_assignment(IrProgram *ir, IrFunction *fn, const Assignment *a) {
    const Projections *p = a->proj;
    Lowerer l = {ir, a, (DType)ir_dtype_compute(ir->buffers[a->lhs.buffer].dtype), fn, fn->iter_count, NULL, NULL, NULL};
    l.lo = arena_alloc(ir->arena, (p->iter_count ? p->iter_count : 1) * sizeof *l.lo);
    l.inactive = arena_alloc(ir->arena, (p->iter_count ? p->iter_count : 1) * sizeof *l.inactive);
    l.choice = arena_alloc(ir->arena, (p->concat_count ? p->concat_count : 1) * sizeof *l.choice);
    fn->iter_count += p->iter_count;
    uint32_t lhs = a->lhs.buffer;
    bool injective = proj_injective(p, a->lhs.slot), surjective = proj_surjective(p, a->lhs.slot);
    const char *comment = describe(&l, a, injective, surjective);

    /* Parallel iterators in the order of the LHS axes, then the reduction iterators.  An LHS
     * read at an affine index has no parallel loop: two points may write one cell. */
    uint32_t n = p->iter_count, parallel = 0;
    uint32_t *order = arena_alloc(ir->arena, (n ? n : 1) * sizeof *order);
    bool *used = arena_alloc(ir->arena, (n ? n : 1) * sizeof *used);
    const ProjIndex *map = p->maps[a->lhs.slot];
    bool lhs_affine = false, lhs_window = false;
    for (uint32_t ax = 0; ax < p->rank[a->lhs.slot]; ax++) {
        /* A strided axis `2*r+1` (one term, every point in bounds) reaches each cell from one
         * value of its iterator, as a plain one does: that iterator is parallel, and a sum into
         * it is a local accumulator stored once (in f32 for a half result, rounded once, where
         * read-modify-write at every point rounded at every step). */
        const ProjIndex *ix = &map[ax];
        bool strided = ix->kind == PIDX_AFFINE && !ix->dense && ix->term_count == 1 && !ix->padded && ix->coef[0] != 0 &&
                       !used[ix->terms[0]] && proj_iter_uses(p, a->lhs.slot, ix->terms[0]) == 1;
        if (strided) {
            used[ix->terms[0]] = true;
            order[parallel++] = ix->terms[0];
            continue;
        }
        /* (a gathered axis too: the data may send two points to one cell, a scatter) */
        lhs_window |= map[ax].kind == PIDX_AFFINE && !map[ax].dense;
        lhs_affine |= (map[ax].kind == PIDX_AFFINE && !map[ax].dense) || map[ax].kind == PIDX_GATHER;
        if (map[ax].kind == PIDX_ITER && !used[map[ax].iter]) {
            used[map[ax].iter] = true;
            order[parallel++] = map[ax].iter;
        }
        if (map[ax].kind == PIDX_AFFINE && map[ax].dense) /* a merged axis: its cells one to one */
            for (uint32_t t = 0; t < map[ax].term_count; t++)
                if (!used[map[ax].terms[t]]) {
                    used[map[ax].terms[t]] = true;
                    order[parallel++] = map[ax].terms[t];
                }
        if (map[ax].kind == PIDX_CONCAT) /* the parts of an LHS concatenation write in parallel */
            for (uint32_t j = 0; j < map[ax].concat->count; j++) {
                uint32_t it = map[ax].concat->iter[j];
                if (map[ax].concat->gap[j] || used[it]) continue;
                used[it] = true;
                order[parallel++] = it;
            }
    }
    uint32_t count = parallel;
    for (uint32_t it = 0; it < n; it++)
        if (!used[it]) order[count++] = it;

    /* Padding: the product space is cut into regions whose points are all in bounds. */
    Padding pad = {0};
    for (uint32_t i = 0; i < a->read_count; i++)
        if (!a->reads[i].symbol) add_guards(&l, &pad, p, a->reads[i].slot);
    add_guards(&l, &pad, p, a->lhs.slot);
    if (!plan_padding(&l, &pad, p, a)) return;
    Range **ranges = arena_alloc(ir->arena, pad.region_count * sizeof *ranges);
    bool skips_cells = false; /* some cell the map reaches is left out by the padding */
    for (uint32_t r = 0; r < pad.region_count; r++) {
        ranges[r] = arena_alloc(ir->arena, (n ? n : 1) * sizeof **ranges);
        region_ranges(&pad, p, r, ranges[r]);
        for (uint32_t i = 0; i < parallel; i++) {
            uint32_t it = order[i];
            Range whole = pad.split[it] ? pad.segments[it][0] : (Range){0, (int64_t)p->iter_size[it]};
            if (pad.split[it]) { /* the segment this region has */
                uint32_t rr = r;
                for (uint32_t j = 0; j < it; j++)
                    if (pad.split[j]) rr /= pad.segment_count[j];
                whole = pad.segments[it][rr % pad.segment_count[it]];
            }
            if (ranges[r][it].lo != whole.lo || ranges[r][it].hi != whole.hi) skips_cells = true;
        }
        if (parallel == n)
            for (uint32_t it = 0; it < n; it++)
                if (ranges[r][it].hi == ranges[r][it].lo) skips_cells = true;
    }
    /* Concatenations: one region per choice of a part of every concatenated axis.  Regions
     * may add to the same cells, so an accumulating reset is a fill, and every region then
     * accumulates into what is there. */
    uint64_t concat_regions = 1;
    for (uint32_t c = 0; c < p->concat_count; c++) concat_regions *= p->concats[c]->count;
    if (concat_regions * pad.region_count > 4096) {
        diag_error(a->span, "the concatenations and padding of this operation would need more than 4096 loop nests");
        return;
    }
    /* A scatter (an LHS written through a window or a gathered axis: several points a cell,
     * read-modify-write) into a bf16 or f16 buffer accumulates in an f32 twin of it, filled or
     * widened from it first and rounded into it after, so each cell is rounded once, as a
     * reduction's f32 local is (an embedding's gradient, adding one row per occurrence of a token,
     * rounded at every occurrence; a maximum or minimum rounds the same either way).  Not when
     * the right side still reads the left, at the very cell it writes (a read through another
     * map reads the snapshot read_before_writing takes). */
    a = read_before_writing(&l, a, surjective, skips_cells);
    uint32_t target = lhs; /* the buffer the nests accumulate in */
    bool in_twin = lhs_affine && ir_dtype_half(ir->buffers[lhs].dtype) && a->accum != ACC_NONE &&
                   a->accum != ACC_MAX && a->accum != ACC_MIN;
    for (uint32_t i = 0; i < a->read_count; i++) in_twin = in_twin && a->reads[i].buffer != lhs;
    if (in_twin) target = ir_twin(ir, lhs, DTYPE_F32, arena_printf(ir->arena, "%s.f32#l%u", ir->buffers[lhs].name, ir->buffer_count));
    bool reset = a->reset;
    if (reset && (!surjective || (skips_cells && a->accum != ACC_NONE) ||
                  (p->concat_count && a->accum != ACC_NONE))) {
        IrStmt *fill = fill_nest(&l, target, neutral(&l, a->accum), 0);
        fill->comment = comment;
        comment = NULL;
        ir_block_push(ir->arena, &fn->body, fill);
    } else if (in_twin) {
        IrStmt *widen = fill_nest(&l, target, NULL, lhs);
        widen->comment = comment;
        comment = NULL;
        ir_block_push(ir->arena, &fn->body, widen);
    }
    if (p->concat_count && a->accum != ACC_NONE) reset = false;

    /* A loop is parallel when its iterator addresses the stored cell (the right side reads its
     * left side, if at all, at that cell or in a copy: read_before_writing).  Through a gathered
     * LHS (an embedding's gradient, a scatter) two points may reach one cell, but only points
     * with the same values of the iterators that index an axis on their own (the prefix of
     * `order`): those loops are parallel, outermost, and each cell's steps stay in one iteration
     * of them, in order.  A window's scatter (an affine LHS) keeps every loop in order, for the
     * schedule's rewrite 0 (sched.c untangle_scatter), which makes its parallel loops itself. */
    bool in_order = lhs_window;
    ScalarOp acc_op = accum_scalar_op(a->accum);
    IrStmt *first = NULL;
    for (uint64_t rc = 0; rc < concat_regions * pad.region_count; rc++) {
        const Range *range = ranges[rc % pad.region_count];
        concat_region(&l, p, (uint32_t)(rc / pad.region_count));
        bool active = slot_active(&l, p, a->lhs.slot);
        for (uint32_t i = 0; i < a->read_count; i++)
            if (!a->reads[i].symbol) active = active && slot_active(&l, p, a->reads[i].slot);
        if (!active) continue;
        bool empty_parallel = false, no_reduction = true;
        for (uint32_t i = 0; i < parallel; i++)
            empty_parallel |= !l.inactive[order[i]] && range[order[i]].hi == range[order[i]].lo;
        bool empty_reduction = false;
        for (uint32_t i = parallel; i < n; i++) {
            if (l.inactive[order[i]]) continue;
            no_reduction = false;
            empty_reduction |= range[order[i]].hi == range[order[i]].lo;
        }
        if (empty_parallel || (empty_reduction && (lhs_affine || no_reduction))) continue;
        for (uint32_t it = 0; it < n; it++) l.lo[it] = l.inactive[it] ? 0 : range[it].lo;

        IrExpr *rhs = lower_expr(&l, a, a->rhs);
        IrIndex *lhs_index = access_index(&l, p, a->lhs.slot);
        IrExpr *current = new_expr(&l, IR_LOAD);
        current->buffer = target;
        current->index = lhs_index;
        IrBlock *into = &fn->body;
        IrStmt *region_first = NULL;
        uint32_t loops = lhs_affine ? n : parallel;
        for (uint32_t i = 0; i < loops; i++) {
            if (l.inactive[order[i]]) continue;
            IrStmt *lp = loop(&l, l.base + order[i], (uint64_t)(range[order[i]].hi - range[order[i]].lo),
                              !in_order && i < parallel);
            ir_block_push(ir->arena, into, lp);
            if (!region_first) region_first = lp;
            into = &lp->body;
        }
        IrStmt *last_store;
        if (lhs_affine) {
            /* Read-modify-write at every point: cells reached twice accumulate both, each point
             * a step of the reduction. */
            IrExpr *value = a->accum == ACC_NONE ? rhs : reduction_step(&l, a->accum, current, rhs);
            last_store = store(&l, target, lhs_index, value);
            ir_block_push(ir->arena, into, last_store);
        } else if (no_reduction) {
            IrExpr *value;
            if (a->accum == ACC_NONE) value = rhs;
            else if (reset && injective) {
                bool identity = a->accum == ACC_ADD || a->accum == ACC_MUL || a->accum == ACC_MAX || a->accum == ACC_MIN;
                value = identity ? rhs : binary(&l, acc_op, neutral(&l, a->accum), rhs);
            } else {
                value = binary(&l, acc_op, current, rhs);
            }
            last_store = store(&l, lhs, lhs_index, value);
            ir_block_push(ir->arena, into, last_store);
        } else {
            uint32_t local = fn->local_count++;
            IrStmt *init = arena_alloc(ir->arena, sizeof *init);
            init->kind = IR_SET_LOCAL;
            init->local = local;
            init->value = a->accum == ACC_NONE || !reset ? current : neutral(&l, a->accum);
            ir_block_push(ir->arena, into, init);
            if (!region_first) region_first = init;
            IrExpr *acc = new_expr(&l, IR_LOCAL);
            acc->local = local;
            acc->type = l.lhs_type;
            if (!empty_reduction) {
                IrBlock *inner = into;
                for (uint32_t i = parallel; i < n; i++) {
                    if (l.inactive[order[i]]) continue;
                    IrStmt *lp = loop(&l, l.base + order[i], (uint64_t)(range[order[i]].hi - range[order[i]].lo), false);
                    ir_block_push(ir->arena, inner, lp);
                    inner = &lp->body;
                }
                IrStmt *step = arena_alloc(ir->arena, sizeof *step);
                step->kind = IR_SET_LOCAL;
                step->local = local;
                step->value = a->accum == ACC_NONE ? rhs : reduction_step(&l, a->accum, acc, rhs);
                ir_block_push(ir->arena, inner, step);
            }
            last_store = store(&l, lhs, lhs_index, acc);
            ir_block_push(ir->arena, into, last_store);
        }
        if (!region_first) region_first = last_store;
        if (!first) first = region_first;
    }
    if (first && comment) first->comment = comment;
    if (in_twin) {
        IrStmt *round = fill_nest(&l, lhs, NULL, target);
        round->comment = arena_printf(ir->arena, "round the f32 sums into %s, once each cell", ir->buffers[lhs].name);
        ir_block_push(ir->arena, &fn->body, round);
    }
}

/* `all_reduce_mean` (assign.h: a collective): a REDUCE action of the buffers it averages, called
 * by the runtime at this point of the function. */
static void lower_collective(IrProgram *ir, IrFunction *fn, const Assignment *a) {
    IrAction action = {.kind = IRA_REDUCE, .text = "all_reduce_mean"};
    action.buffers = arena_alloc(ir->arena, (a->read_count + 1) * sizeof *action.buffers);
    for (uint32_t i = 0; i < a->read_count; i++) action.buffers[action.buffer_count++] = a->reads[i].buffer;
    ARENA_PUSH(ir->arena, ir->actions, ir->action_count, ir->action_cap, action);
    IrStmt *call = arena_alloc(ir->arena, sizeof *call);
    *call = (IrStmt){.kind = IR_CALL, .action = ir->action_count - 1, .comment = "the mean across processes"};
    ir_block_push(ir->arena, &fn->body, call);
}

IrFunction *lower_function(IrProgram *ir, const char *name, Assignment *const *assignments, uint32_t count) {
    IrFunction f = {.name = name};
    ARENA_PUSH(ir->arena, ir->functions, ir->function_count, ir->function_cap, f);
    IrFunction *fn = &ir->functions[ir->function_count - 1];
    for (uint32_t i = 0; i < count; i++) {
        if (assignments[i]->collective) lower_collective(ir, fn, assignments[i]);
        else if (assignments[i]->kernel != KERNEL_NONE) lower_attention(ir, fn, assignments[i]);
        else lower_assignment(ir, fn, assignments[i]);
    }
    return fn;
}
