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
 * (An assignment that reads its own left side through another slot's map gets no parallel loop.)
 * Every cell reached by the parallel loops is written exactly once, so reading the cell into
 * a local first and storing at the end is the read-modify-write of the seed, reassociated
 * nowhere: accumulation runs in the reduction loops' order.  A reduction `=+` of a product
 * `x * y` accumulates by fused multiply-add, `l = fma(x, y, l)` (one rounding per step; every
 * target and the reference executor compute it so).  The loop order and everything else about
 * speed is the schedule's (sched.c): lowering states what is computed, not how fast.
 *
 * Requires: assignments from assign.c (each with its projections), buffers for every access. */
#include "lower.h"

#include <string.h>

#include "assign.h"
#include "proj.h"

typedef struct Lowerer {
    IrProgram *ir;
    IrFunction *fn;
    uint32_t base; /* the function's iterator for product iterator 0 of this assignment */
} Lowerer;

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
            break;
        case PIDX_FIXED: ix[a].offset = pi->fixed; break;
        case PIDX_SYMBOL: ix[a].symbol = pi->symbol; break;
        }
    }
    return ix;
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

static IrExpr *binary(Lowerer *l, ScalarOp op, IrExpr *a, IrExpr *b) {
    IrExpr *e = new_expr(l, IR_OP);
    e->op = op;
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

static IrExpr *lower_expr(Lowerer *l, const Assignment *a, const AExpr *x) {
    switch (x->kind) {
    case AE_CONST: return constant(l, x->value);
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
        for (unsigned i = 0; i < scalar_op_arity(x->op); i++) e->args[i] = lower_expr(l, a, x->args[i]);
        return e;
    }
    }
    return NULL;
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

/* Set every cell of `buffer` to `value`: one parallel loop per axis larger than one. */
static IrStmt *fill_nest(Lowerer *l, uint32_t buffer, double value) {
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
    IrStmt *st = store(l, buffer, ix, constant(l, value));
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

void lower_assignment(IrProgram *ir, IrFunction *fn, const Assignment *a) {
    Lowerer l = {ir, fn, fn->iter_count};
    const Projections *p = a->proj;
    fn->iter_count += p->iter_count;
    uint32_t lhs = a->lhs.buffer;
    bool injective = proj_injective(p, a->lhs.slot), surjective = proj_surjective(p, a->lhs.slot);
    const char *comment = describe(&l, a, injective, surjective);
    if (a->reset && !surjective) {
        IrStmt *reset = fill_nest(&l, lhs, accum_neutral(a->accum));
        reset->comment = comment;
        comment = NULL;
        ir_block_push(ir->arena, &fn->body, reset);
    }

    /* Parallel iterators in the order of the LHS axes, then the reduction iterators. */
    uint32_t n = p->iter_count, parallel = 0;
    uint32_t *order = arena_alloc(ir->arena, (n ? n : 1) * sizeof *order);
    bool *used = arena_alloc(ir->arena, (n ? n : 1) * sizeof *used);
    const ProjIndex *map = p->maps[a->lhs.slot];
    for (uint32_t ax = 0; ax < p->rank[a->lhs.slot]; ax++)
        if (map[ax].kind == PIDX_ITER && !used[map[ax].iter]) {
            used[map[ax].iter] = true;
            order[parallel++] = map[ax].iter;
        }
    uint32_t count = parallel;
    for (uint32_t it = 0; it < n; it++)
        if (!used[it]) order[count++] = it;

    IrExpr *r = lower_expr(&l, a, a->rhs);
    IrIndex *lhs_index = access_index(&l, p, a->lhs.slot);
    IrExpr *current = new_expr(&l, IR_LOAD);
    current->buffer = lhs;
    current->index = lhs_index;
    ScalarOp acc_op = accum_scalar_op(a->accum);

    /* A loop is parallel when its iterator addresses the stored cell — unless the assignment
     * reads its own left side through another index map, so that one iteration may read what
     * another writes: then every loop runs in order. */
    bool aliased = false;
    for (uint32_t i = 0; i < a->read_count; i++)
        if (a->reads[i].buffer == a->lhs.buffer && a->reads[i].slot != a->lhs.slot)
            aliased = true;
    IrBlock *into = &fn->body;
    IrStmt *first = NULL;
    for (uint32_t i = 0; i < parallel; i++) {
        IrStmt *lp = loop(&l, l.base + order[i], p->iter_size[order[i]], !aliased);
        ir_block_push(ir->arena, into, lp);
        if (!first) first = lp;
        into = &lp->body;
    }
    IrStmt *last_store;
    if (parallel == n) {
        IrExpr *value;
        if (a->accum == ACC_NONE) value = r;
        else if (a->reset && injective) {
            bool identity = a->accum == ACC_ADD || a->accum == ACC_MUL || a->accum == ACC_MAX || a->accum == ACC_MIN;
            value = identity ? r : binary(&l, acc_op, constant(&l, accum_neutral(a->accum)), r);
        } else {
            value = binary(&l, acc_op, current, r);
        }
        last_store = store(&l, lhs, lhs_index, value);
        ir_block_push(ir->arena, into, last_store);
    } else {
        uint32_t local = fn->local_count++;
        IrStmt *init = arena_alloc(ir->arena, sizeof *init);
        init->kind = IR_SET_LOCAL;
        init->local = local;
        init->value = a->accum == ACC_NONE || !a->reset ? current : constant(&l, accum_neutral(a->accum));
        ir_block_push(ir->arena, into, init);
        if (!first) first = init;
        IrBlock *inner = into;
        for (uint32_t i = parallel; i < n; i++) {
            IrStmt *lp = loop(&l, l.base + order[i], p->iter_size[order[i]], false);
            ir_block_push(ir->arena, inner, lp);
            inner = &lp->body;
        }
        IrExpr *acc = new_expr(&l, IR_LOCAL);
        acc->local = local;
        IrStmt *step = arena_alloc(ir->arena, sizeof *step);
        step->kind = IR_SET_LOCAL;
        step->local = local;
        if (a->accum == ACC_NONE) {
            step->value = r;
        } else if (a->accum == ACC_ADD && r->kind == IR_OP && r->op == SOP_MUL) {
            /* A sum of products accumulates by fused multiply-add (docs/ir.md, "FMA"). */
            step->value = new_expr(&l, IR_OP);
            step->value->op = SOP_FMA;
            step->value->args[0] = r->args[0];
            step->value->args[1] = r->args[1];
            step->value->args[2] = acc;
        } else {
            step->value = binary(&l, acc_op, acc, r);
        }
        ir_block_push(ir->arena, inner, step);
        last_store = store(&l, lhs, lhs_index, acc);
        ir_block_push(ir->arena, into, last_store);
    }
    if (!first) first = last_store;
    if (comment) first->comment = comment;
}

IrFunction *lower_function(IrProgram *ir, const char *name, Assignment *const *assignments, uint32_t count) {
    IrFunction f = {.name = name};
    ARENA_PUSH(ir->arena, ir->functions, ir->function_count, ir->function_cap, f);
    IrFunction *fn = &ir->functions[ir->function_count - 1];
    for (uint32_t i = 0; i < count; i++) lower_assignment(ir, fn, assignments[i]);
    return fn;
}
