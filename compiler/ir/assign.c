/* assign.c — the tensor graph becomes buffers and assignments (ir.h, part 1).
 *
 * What it does: walks the tensors that the named tensors depend on, operands first, and gives
 * each what it needs to exist at run time:
 *   - literals, and stacks of literals, become buffers with their values (memory order);
 *   - a scalar literal, `ones ()`/`zeros ()`, `!.x`: a constant buffer (opt.c folds its reads);
 *   - parameters: a buffer initialised from their initial value (a number fills it, a literal
 *     tensor gives the values) or, without one, uniformly in [-1, 1) from the program's seed;
 *   - inputs and data: buffers filled from outside;
 *   - an operator application: its `forward` block instantiated — each assignment's left side
 *     and reads are slots (v/t/g = the result, v1/t1/g1 = operand 1, …) of one projections
 *     record inferred by proj.c from the operator's logic and the closed shapes;
 *   - `x @| i`: `r =: x` under the slice logic; a stack of computed tensors: one `r =: e_k`
 *     per element, writing the new axis at k.
 * An operator block may compute each cell with a whole scalar expression over its slots
 * (`g1 =+ neg (g * v1 / (v2 * v2))`): all slots are read at their own index maps; a local
 * definition `{ name } =: e` of a block stands for e in the statements after it.
 *
 * It also gives what code is collected from: a tensor's forward assignments with everything it
 * depends on (`t.forward`, the implicit `forward`), `print`'s fresh computations, and a
 * routine's standalone assignment with its own record.  routines.c puts those in order, and
 * grad.c differentiates from the records and blocks built here; assign_types.c types each
 * assignment (check_rhs_dtype) as it is made (assign_build.h is what the four files share).
 *
 * Requires: elaborate() succeeded (every shape closed). */
#include "ir/assign_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "infer/proj.h"
#include "ir/attention.h"
#include "runtime/tsr.h"

/* ---- Buffers ---------------------------------------------------------------------------------- */

static const char *tensor_label(IrProgram *ir, const Tensor *t) {
    if (t->shown) return t->shown;
    if (t->name) return arena_printf(ir->arena, "%s#t%u", t->name, t->id);
    const char *what = t->kind == TENSOR_OP ? t->op_name
                     : t->kind == TENSOR_SLICE ? "slice"
                     : t->kind == TENSOR_STACK ? "stack"
                     : t->kind == TENSOR_LITERAL ? "literal"
                     : t->kind == TENSOR_CONSTANT ? "constant"
                     : "tensor";
    return arena_printf(ir->arena, "_%s#t%u", what, t->id);
}

/* A run-time size on an axis other than the outermost in memory: its stride would not be known
 * at compile time (ir.h IrBuffer.size_symbol).  (Its value and its gradient repeat one error,
 * which diag drops.) */
static void runtime_axis_error(Builder *bld, const Tensor *t, const Shape *shape) {
    const char *name = t->shown ? t->shown : t->name;
    bld->failed = true;
    diag_error(t->span, "%s%s%s of shape %s has a run-time size on an axis other than its outermost (in memory order: "
               "batch, output, input); this version needs a run-time size to be each tensor's first axis",
               name ? "tensor '" : "this tensor", name ? name : "", name ? "'" : "",
               shape_to_string(bld->program->solver, shape));
}

/* The buffer of a tensor node (creating it on first use). */
uint32_t node_buffer(Builder *bld, TNode node) {
    IrProgram *ir = bld->ir;
    uint32_t *slot = node.grad ? &bld->out->grad_buffer[node.tensor->id] : &bld->out->value_buffer[node.tensor->id];
    if (*slot != UINT32_MAX) return *slot;
    Tensor *t = node.tensor;
    const Shape *shape = &bld->shapes[t->id];
    IrBuffer b = {0};
    b.id = ir->buffer_count;
    b.grad = node.grad;
    b.rank = proj_shape_rank(shape);
    b.dims = arena_alloc(ir->arena, (b.rank ? b.rank : 1) * sizeof *b.dims);
    proj_shape_dims(shape, b.dims);
    b.size = 1;
    for (uint32_t i = 0; i < b.rank; i++) {
        if (size_is_runtime(b.dims[i])) { /* the cells of one index of it (ir.h) */
            if (i > 0) runtime_axis_error(bld, t, shape);
            continue;
        }
        /* Saturates: the executor refuses what it cannot hold. */
        b.size = b.dims[i] && b.size > UINT64_MAX / b.dims[i] ? UINT64_MAX : b.size * b.dims[i];
    }
    const char *label = tensor_label(ir, t);
    b.name = node.grad ? arena_printf(ir->arena, "%s.grad", label) : label;
    b.shape_text = shape_to_string(bld->program->solver, shape);
    b.keep = t->shown != NULL;
    b.persistent = node.grad && !b.keep;
    b.dtype = (DType)t->dtype; /* a gradient's is its tensor's (an operation's is settled in build_operator) */
    if (node.grad) {
        b.kind = BUF_COMPUTED;
    } else {
        switch (t->kind) {
        case TENSOR_LITERAL: b.kind = BUF_LITERAL; break;
        case TENSOR_PARAM: b.kind = BUF_PARAM; b.keep = true; break;
        case TENSOR_CONSTANT: b.kind = BUF_CONSTANT; break;
        case TENSOR_INPUT: b.kind = BUF_INPUT; b.keep = true; break;
        case TENSOR_DATA: b.kind = BUF_DATA; b.keep = true; break;
        default: b.kind = BUF_COMPUTED; break;
        }
    }
    ARENA_PUSH(ir->arena, ir->buffers, ir->buffer_count, ir->buffer_cap, b);
    *slot = b.id;
    return b.id;
}

/* Buffer pointers are taken after creating the buffer (creating one may move the array). */
IrBuffer *buffer_of(Builder *b, TNode node) {
    uint32_t id = node_buffer(b, node);
    return &b->ir->buffers[id];
}

/* The values of a literal or a stack of literals, in memory order; NULL if not one. */
static double *literal_values(Builder *b, Tensor *t) {
    IrProgram *ir = b->ir;
    const Shape *shape = &b->shapes[t->id];
    uint32_t rank = proj_shape_rank(shape);
    uint64_t size = 1, dims[rank ? rank : 1];
    proj_shape_dims(shape, dims);
    for (uint32_t i = 0; i < rank; i++) size *= dims[i];
    if (t->kind == TENSOR_LITERAL && t->iota) { /* `iota ()`: one axis, so the cell number is the index */
        double *v = arena_alloc(ir->arena, (size ? size : 1) * sizeof *v);
        for (uint64_t i = 0; i < size; i++) v[i] = (double)i;
        return v;
    }
    if (t->kind == TENSOR_LITERAL) {
        if (size != t->value_count) return NULL;
        double *v = arena_alloc(ir->arena, size * sizeof *v);
        memcpy(v, t->values, size * sizeof *v);
        return v;
    }
    if (t->kind != TENSOR_STACK) return NULL;
    /* The new axis is the first of its row: find its memory-order position. */
    RowKind kind = ROW_OUTPUT;
    for (int k = 0; k < ROW_KINDS; k++)
        if (shape->rows[k].count && shape->rows[k].dims[0].size == t->operand_count &&
            shape->rows[k].count == b->shapes[t->operands[0]->id].rows[k].count + 1)
            kind = (RowKind)k;
    uint32_t pos = kind == ROW_BATCH ? 0 : kind == ROW_OUTPUT ? shape->rows[ROW_BATCH].count
                                                              : shape->rows[ROW_BATCH].count + shape->rows[ROW_OUTPUT].count;
    uint64_t outer = 1, inner = 1;
    for (uint32_t i = 0; i < pos; i++) outer *= dims[i];
    for (uint32_t i = pos + 1; i < rank; i++) inner *= dims[i];
    double *v = arena_alloc(ir->arena, (size ? size : 1) * sizeof *v);
    for (uint32_t k = 0; k < t->operand_count; k++) {
        double *e = literal_values(b, t->operands[k]);
        if (!e) return NULL;
        for (uint64_t o = 0; o < outer; o++)
            memcpy(&v[(o * t->operand_count + k) * inner], &e[o * inner], inner * sizeof *v);
    }
    return v;
}

/* ---- Assignments ------------------------------------------------------------------------------ */

void push_assignment(Arena *arena, AssignList *list, Assignment *a) {
    ARENA_PUSH(arena, list->items, list->count, list->cap, a);
}

static void add_forward(Builder *b, Assignment *a) {
    push_assignment(b->ir->arena, &b->info[b->current->id].forward, a);
}

static Projections *infer(Builder *b, Logic logic, Tensor **slots, uint32_t n, Tensor *owner,
                          const char *what) {
    Shape *shapes = arena_alloc(b->ir->arena, n * sizeof *shapes);
    for (uint32_t i = 0; i < n; i++) shapes[i] = b->shapes[slots[i]->id];
    ProjProblem p = {.logic = logic, .spec = owner->spec, .slot_count = n, .shapes = shapes,
                     .symbol = owner->index, .span = owner->span, .what = what};
    Projections *proj = proj_infer(b->ir->arena, &p);
    if (!proj) b->failed = true;
    return proj;
}

Assignment *new_assignment(Builder *b, Access lhs, AExprKind kind, const Projections *proj, Span span,
                           const char *what) {
    Assignment *a = arena_alloc(b->ir->arena, sizeof *a);
    a->lhs = lhs;
    a->accum = ACC_NONE;
    a->rhs = arena_alloc(b->ir->arena, sizeof *a->rhs);
    a->rhs->kind = kind;
    a->proj = proj;
    a->span = span;
    a->what = what;
    return a;
}

/* The index of `acc` among a's reads, adding it if new. */
static uint32_t add_read(Arena *arena, Assignment *a, Access acc) {
    for (uint32_t i = 0; i < a->read_count; i++)
        if (a->reads[i].node.tensor == acc.node.tensor && a->reads[i].node.grad == acc.node.grad &&
            a->reads[i].slot == acc.slot)
            return i;
    Access *grown = arena_alloc(arena, (a->read_count + 1) * sizeof *grown);
    if (a->read_count) memcpy(grown, a->reads, a->read_count * sizeof *grown);
    grown[a->read_count] = acc;
    a->reads = grown;
    return a->read_count++;
}

/* dst's cells from src's (a slice, one part of a stack, or the backward of either), where dst's
 * element type is settled: src's values converted to it where the two compute differently (an
 * i32 part of an i64 stack widened; an f64 stack's gradient rounded into an f32 part's). */
Assignment *copy_assignment(Builder *b, Tensor *dst, Tensor *src, const Projections *proj, Span span,
                            const char *what) {
    Assignment *a = new_assignment(b, (Access){.node = {dst, false}, .slot = 0}, AE_READ, proj, span, what);
    a->rhs->read = add_read(b->ir->arena, a, (Access){.node = {src, false}, .slot = 1});
    a->rhs_dtype = dst->dtype;
    if (ir_dtype_compute(src->dtype) != ir_dtype_compute(dst->dtype)) convert_in_place(b, a->rhs, dst->dtype);
    return a;
}


static bool is_rest_name(const char *name) {
    return (name[0] == 'v' || name[0] == 't' || name[0] == 'g') && name[1] == 'n' && name[2] == '\0';
}

static bool block_access(BlockContext *c, const Node *n, Access *out) {
    uint32_t slot;
    bool grad;
    if (n->kind == NODE_VAR && c->rest_slot && is_rest_name(n->name)) {
        *out = (Access){.node = {c->slots[c->rest_slot], n->name[0] == 'g'}, .slot = c->rest_slot};
        return true;
    }
    if (n->kind != NODE_VAR || !ast_slot_name(n->name, &slot, &grad)) return false;
    if (slot >= c->slot_count) {
        diag_error(n->span, "'%s' names operand %u, but this operator has %u", n->name, slot, c->slot_count - 1);
        c->b->failed = true;
        return false;
    }
    *out = (Access){.node = {c->slots[slot], grad}, .slot = slot};
    for (uint32_t k = 0; k < c->own_read_count; k++) /* an assignment with its own logic */
        if (c->own_reads[k] == n) out->slot = k + 1;
    return true;
}

static AExpr *block_expr(BlockContext *c, Assignment *a, const Node *n);

/* `random ()` in %cd code: the one primitive without operands, a uniform number in [0, 1) per
 * cell of the left side and per routine run (docs/ir.md §2.5, IR_RANDOM). */
static const char RANDOM_PRIMITIVE[] = "random";

static AExpr *random_expr(Arena *arena) {
    AExpr *e = arena_alloc(arena, sizeof *e);
    e->kind = AE_RANDOM;
    return e;
}

static AExpr *random_misused(Builder *b, Span span) {
    diag_error(span, "'%s' takes no operands: it is written '%s ()'", RANDOM_PRIMITIVE, RANDOM_PRIMITIVE);
    b->failed = true;
    return NULL;
}

static AExpr *op_expr(BlockContext *c, Assignment *a, ScalarOp op, const Node **args, uint32_t n, Span span) {
    if (n != scalar_op_arity(op)) {
        diag_error(span, "'%s' takes %u operand%s in code, but %u %s given", scalar_op_name(op), scalar_op_arity(op),
                   scalar_op_arity(op) == 1 ? "" : "s", n, n == 1 ? "is" : "are");
        c->b->failed = true;
        return NULL;
    }
    AExpr *e = arena_alloc(c->b->ir->arena, sizeof *e);
    e->kind = AE_OP;
    e->op = op;
    for (uint32_t i = 0; i < n; i++)
        if (!(e->args[i] = block_expr(c, a, args[i]))) return NULL;
    return e;
}

static AExpr *block_expr(BlockContext *c, Assignment *a, const Node *n) {
    Arena *arena = c->b->ir->arena;
    Access acc;
    switch (n->kind) {
    case NODE_INT:
    case NODE_FLOAT: {
        AExpr *e = arena_alloc(arena, sizeof *e);
        e->kind = AE_CONST;
        e->value = n->kind == NODE_INT ? (double)n->ival : n->fval;
        return e;
    }
    case NODE_VAR:
        for (uint32_t i = c->local_limit; i-- > 0;)
            if (strcmp(c->locals[i].name, n->name) == 0) {
                uint32_t limit = c->local_limit;
                c->local_limit = c->locals[i].visible;
                AExpr *e = block_expr(c, a, c->locals[i].value);
                c->local_limit = limit;
                return e;
            }
        if (!block_access(c, n, &acc)) {
            uint32_t slot;
            bool grad;
            if (ast_slot_name(n->name, &slot, &grad)) return NULL; /* reported: an operand it lacks */
            diag_error(n->span, "'%s' is neither a slot of the operator (v, v1, …, g, g1, …) nor a local value defined "
                       "before it in this block: an operator's blocks read their slots, their own locals ({ name } =: …) "
                       "and numbers, not values from outside (pass such a value as an operand)", n->name);
            c->b->failed = true;
            return NULL;
        }
        {
            AExpr *e = arena_alloc(arena, sizeof *e);
            e->kind = AE_READ;
            e->read = add_read(arena, a, acc);
            return e;
        }
    case NODE_UNOP:
        if (strcmp(n->name, "-") == 0) {
            const Node *args[1] = {n->a};
            return op_expr(c, a, SOP_NEG, args, 1, n->span);
        }
        break;
    case NODE_BINOP: {
        bool swapped;
        int op = scalar_op_code(n->name, true, &swapped);
        const Node *args[2] = {swapped ? n->b : n->a, swapped ? n->a : n->b};
        if (op >= 0) return op_expr(c, a, (ScalarOp)op, args, 2, n->span);
        diag_error(n->span, "'%s' is not a primitive operation of %%cd code", n->name);
        c->b->failed = true;
        return NULL;
    }
    case NODE_APP:
        if (n->a->kind == NODE_VAR && strcmp(n->a->name, RANDOM_PRIMITIVE) == 0)
            return n->list.count == 1 && n->list.items[0]->kind == NODE_UNIT ? random_expr(arena)
                                                                              : random_misused(c->b, n->span);
        if (n->a->kind == NODE_VAR) {
            int op = scalar_op_lookup(n->a->name, false);
            if (op < 0) {
                diag_error(n->a->span, "'%s' is not a primitive operation of %%cd code", n->a->name);
                c->b->failed = true;
                return NULL;
            }
            const Node *args[3];
            uint32_t count = 0;
            for (uint32_t i = 0; i < n->list.count; i++) {
                const Node *x = n->list.items[i];
                if (x->kind == NODE_TUPLE && n->list.count == 1) {
                    for (uint32_t j = 0; j < x->list.count && count < 3; j++) args[count++] = x->list.items[j];
                    if (x->list.count > 3) count = 4;
                } else if (count < 3) {
                    args[count++] = x;
                } else {
                    count = 4;
                }
            }
            return op_expr(c, a, (ScalarOp)op, args, count, n->span);
        }
        break;
    default: break;
    }
    diag_error(n->span, "this is not supported in an operator's code block yet: write slot names (v, v1, g1, …), "
               "numbers and primitive operations");
    c->b->failed = true;
    return NULL;
}

/* `{ name } =: expr` in an operator's block: `name` stands for expr's value at each point of the
 * operation's iteration space in the statements after it (no buffer is made). */
static void block_local(BlockContext *c, const Node *n) {
    const Node *def = n->a->list.count ? n->a->list.items[0] : NULL;
    if (n->a->list.count != 1 || def->a || strcmp(n->name, "=:") != 0 || n->c) {
        diag_error(n->span, "a local definition in an operator's block is written '{ name } =: expression'");
        c->b->failed = true;
        return;
    }
    uint32_t slot;
    bool grad;
    if (ast_slot_name(def->name, &slot, &grad)) {
        diag_error(def->span, "'%s' is a slot name; a local definition needs another name", def->name);
        c->b->failed = true;
        return;
    }
    BlockLocal local = {.name = def->name, .value = n->b, .visible = c->local_count};
    ARENA_PUSH(c->b->ir->arena, c->locals, c->local_count, c->local_cap, local);
    c->local_limit = c->local_count;
}

/* The projections of assignment `a` (node `n`) of a block whose operator has no ~logic:: its
 * own logic over its own slots, the left side then the slots read in the order written (the
 * slots elab/operators.c's emit_block_logics related the same way). */
static const Projections *own_projections(BlockContext *c, Assignment *a, const Node *n) {
    Arena *arena = c->b->ir->arena;
    uint32_t count = c->own_read_count + 1;
    Shape *shapes = arena_alloc(arena, count * sizeof *shapes);
    shapes[0] = c->b->shapes[a->lhs.node.tensor->id];
    a->lhs.slot = 0;
    for (uint32_t k = 0; k < c->own_read_count; k++) {
        uint32_t slot;
        bool grad;
        ast_slot_name(c->own_reads[k]->name, &slot, &grad);
        shapes[k + 1] = c->b->shapes[c->slots[slot]->id];
    }
    const Spec *spec = n->c->spec;
    ProjProblem p = {.logic = spec ? LOGIC_SPEC : logic_named(n->c->text[0]), .spec = spec, .slot_count = count, .shapes = shapes,
                     .span = c->span, .what = c->what};
    const Projections *proj = proj_infer(arena, &p);
    if (!proj) c->b->failed = true;
    return proj;
}

/* Whether `n` names the rest operand, directly or through the local definitions visible below
 * `limit`. */
static bool mentions_rest(const BlockContext *c, const Node *n, uint32_t limit) {
    if (!n) return false;
    if (n->kind == NODE_VAR) {
        for (uint32_t i = limit; i-- > 0;)
            if (strcmp(c->locals[i].name, n->name) == 0) return mentions_rest(c, c->locals[i].value, c->locals[i].visible);
        return is_rest_name(n->name);
    }
    if (mentions_rest(c, n->a, limit) || mentions_rest(c, n->b, limit) || mentions_rest(c, n->c, limit)) return true;
    for (uint32_t i = 0; i < n->list.count; i++)
        if (mentions_rest(c, n->list.items[i], limit)) return true;
    return false;
}

/* ---- Kernels (assign.h KernelKind) ----------------------------------------------------------------- */

typedef struct KernelForm {
    const char *name;
    KernelKind kind;
    bool causal;
    bool dropout;        /* a fourth operand, the rate */
    const char *written; /* the one way an operator's block writes it */
} KernelForm;

/* (ir.c's scalar_code_builtin knows their names, for the declaration's check of a block.) */
static const KernelForm KERNEL_FORMS[] = {
    {"attention", KERNEL_ATTENTION, false, false, "v =: attention v1 v2 v3"},
    {"causal_attention", KERNEL_ATTENTION, true, false, "v =: causal_attention v1 v2 v3"},
    {"dropout_attention", KERNEL_ATTENTION, false, true, "v =: dropout_attention v1 v2 v3 v4"},
    {"causal_dropout_attention", KERNEL_ATTENTION, true, true, "v =: causal_dropout_attention v1 v2 v3 v4"},
    {"attention_dq", KERNEL_ATTENTION_DQ, false, false, "g1 =+ attention_dq v1 v2 v3 v g"},
    {"attention_dk", KERNEL_ATTENTION_DK, false, false, "g2 =+ attention_dk v1 v2 v3 v g"},
    {"attention_dv", KERNEL_ATTENTION_DV, false, false, "g3 =+ attention_dv v1 v2 v3 v g"},
};

static const KernelForm *kernel_form(const Node *rhs) {
    if (rhs->kind != NODE_APP || rhs->a->kind != NODE_VAR) return NULL;
    for (size_t i = 0; i < sizeof KERNEL_FORMS / sizeof KERNEL_FORMS[0]; i++)
        if (strcmp(rhs->a->name, KERNEL_FORMS[i].name) == 0) return &KERNEL_FORMS[i];
    return NULL;
}

/* Appends a buffer of a kernel's own (not a tensor's) over buf.dims[0 … buf.rank), named after
 * the kernel's result and `what`: its size and shape text from the dims.  Returns its id. */
static uint32_t push_kernel_buffer(Builder *b, IrBuffer buf, const Tensor *result, const char *what) {
    IrProgram *ir = b->ir;
    char *shape = "";
    buf.id = ir->buffer_count;
    buf.size = 1;
    for (uint32_t i = 0; i < buf.rank; i++) {
        buf.size *= buf.dims[i];
        shape = arena_printf(ir->arena, "%s%s%llu", shape, i ? "," : "", (unsigned long long)buf.dims[i]);
    }
    buf.shape_text = shape;
    buf.name = arena_printf(ir->arena, "%s#%s", tensor_label(ir, result), what);
    ARENA_PUSH(ir->arena, ir->buffers, ir->buffer_count, ir->buffer_cap, buf);
    return buf.id;
}

/* A buffer of the kernel's own: the result's shape without its VALUE axes. */
static uint32_t row_buffer(Builder *b, const Tensor *result, const Assignment *a, const uint8_t *roles,
                           BufferKind kind, DType dtype, const char *what) {
    const Projections *p = a->proj;
    IrBuffer buf = {.kind = kind, .dtype = dtype, .init = INIT_NONE};
    buf.dims = arena_alloc(b->ir->arena, (p->rank[0] ? p->rank[0] : 1) * sizeof *buf.dims);
    for (uint32_t ax = 0; ax < p->rank[0]; ax++) {
        const ProjIndex *pi = &p->maps[0][ax];
        if (pi->kind == PIDX_ITER && roles[pi->iter] == ROLE_VALUE) continue;
        buf.dims[buf.rank++] = p->axis_size[0][ax];
    }
    return push_kernel_buffer(b, buf, result, what);
}

/* Causal attention's positions 0 … n-1, n the longer of the query and key axes. */
static uint32_t positions_buffer(Builder *b, const Projections *p, uint32_t query, uint32_t key, DType dtype) {
    IrProgram *ir = b->ir;
    uint64_t n = 1;
    if (query != UINT32_MAX && p->iter_size[query] > n) n = p->iter_size[query];
    if (key != UINT32_MAX && p->iter_size[key] > n) n = p->iter_size[key];
    IrBuffer buf = {.id = ir->buffer_count, .kind = BUF_LITERAL, .dtype = dtype, .rank = 1, .size = n, .init = INIT_IOTA};
    buf.dims = arena_alloc(ir->arena, sizeof *buf.dims);
    buf.dims[0] = n;
    buf.shape_text = arena_printf(ir->arena, "%llu", (unsigned long long)n);
    buf.name = arena_printf(ir->arena, "#positions%u", ir->buffer_count);
    ARENA_PUSH(ir->arena, ir->buffers, ir->buffer_count, ir->buffer_cap, buf);
    return buf.id;
}

/* Attention's dropout draws: a buffer over the rows and the keys (attention_drop_iters) that
 * only numbers the random draws (IR_RANDOM reads no memory), so it has no storage. */
static uint32_t drop_cells_buffer(Builder *b, const Tensor *result, const Projections *p, const uint8_t *roles) {
    uint32_t its[16];
    IrBuffer buf = {.kind = BUF_SCRATCH, .dtype = DTYPE_F32, .init = INIT_NONE, .is_virtual = true};
    buf.rank = attention_drop_iters(p, roles, its);
    buf.dims = arena_alloc(b->ir->arena, (buf.rank ? buf.rank : 1) * sizeof *buf.dims);
    for (uint32_t i = 0; i < buf.rank; i++) buf.dims[i] = p->iter_size[its[i]];
    return push_kernel_buffer(b, buf, result, "dropout");
}

/* Appends `acc` to a's reads (its buffer resolved later, with the others'). */
static void push_read(Builder *b, Assignment *a, Access acc) {
    acc.buffer = UINT32_MAX;
    Access *grown = arena_alloc(b->ir->arena, (a->read_count + 1) * sizeof *grown);
    if (a->read_count) memcpy(grown, a->reads, a->read_count * sizeof *grown);
    grown[a->read_count++] = acc;
    a->reads = grown;
}

static bool kernel_misused(BlockContext *c, const Node *n, const KernelForm *form) {
    diag_error(n->span, "'%s' is a kernel, written as the whole statement '%s'", form->name, form->written);
    c->b->failed = true;
    return true;
}

/* `lhs op name args…` where `name` is a kernel: fills a (its left side parsed) and adds it to
 * c->out.  False when the statement is not a kernel's; true otherwise, also after an error. */
static bool kernel_statement(BlockContext *c, Assignment *a, const Node *n) {
    const KernelForm *form = kernel_form(n->b);
    if (!form) return false;
    Builder *b = c->b;
    bool forward = form->kind == KERNEL_ATTENTION;
    uint32_t want_lhs = forward ? 0 : form->kind == KERNEL_ATTENTION_DQ ? 1 : form->kind == KERNEL_ATTENTION_DK ? 2 : 3;
    /* the forward's slots: the result, q, k, v and with dropout the rate; the gradients' the same */
    bool slots_fit = c->proj && (forward ? c->proj->slot_count == 4u + form->dropout
                                         : c->proj->slot_count == 4 || c->proj->slot_count == 5);
    if (!slots_fit || a->lhs.slot != want_lhs || a->lhs.node.grad == forward || a->accum != (forward ? ACC_NONE : ACC_ADD) ||
        a->reset || n->b->list.count != (forward ? 3u + form->dropout : 5u))
        return kernel_misused(c, n, form);
    for (uint32_t i = 0; i < n->b->list.count; i++) {
        Access acc;
        const Node *arg = n->b->list.items[i];
        if (arg->kind != NODE_VAR || !block_access(c, arg, &acc)) return kernel_misused(c, n, form);
        uint32_t slot = i < 3 ? i + 1 : forward ? 4 : 0;
        if (acc.slot != slot || acc.node.grad != (i == 4)) return kernel_misused(c, n, form);
        push_read(b, a, acc);
    }
    a->rhs = arena_alloc(b->ir->arena, sizeof *a->rhs);
    a->rhs->kind = AE_KERNEL;
    a->kernel = form->kind;
    a->proj = c->proj;
    a->span = c->span;
    a->what = c->what;

    uint8_t dtype = node_dtype(a->reads[0].node);
    for (uint32_t i = 0; i < 3; i++) {
        uint8_t d = node_dtype(a->reads[i].node);
        if (d != TSR_DTYPE_F32 && d != TSR_DTYPE_F64) {
            diag_error(c->span, "%s computes in f32 or f64, but %s is %s", c->what, node_text(b, a->reads[i].node),
                       dtype_word(d));
            diag_note(c->span, is_half_dtype(d) ? "widen it first (widen x), and round the result back with to_%s"
                                                : "convert it first (to_f32 x)", dtype_word(d));
            b->failed = true;
            return true;
        }
        if (d != dtype) {
            diag_error(c->span, "%s takes q, k and v of one element type, but %s is %s and %s is %s", c->what,
                       node_text(b, a->reads[0].node), dtype_word(dtype), node_text(b, a->reads[i].node), dtype_word(d));
            diag_note(c->span, "convert one of them with to_f64 or to_f32");
            b->failed = true;
            return true;
        }
    }
    if (forward && form->dropout) {
        uint8_t d = node_dtype(a->reads[3].node);
        if (d != TSR_DTYPE_F32 && d != TSR_DTYPE_F64) {
            diag_error(c->span, "%s takes its dropout rate in f32 or f64, but %s is %s", c->what,
                       node_text(b, a->reads[3].node), dtype_word(d));
            b->failed = true;
            return true;
        }
    }
    a->rhs_dtype = dtype;

    const Projections *p = c->proj;
    uint8_t *roles = arena_alloc(b->ir->arena, p->iter_count ? p->iter_count : 1);
    const char *why = NULL;
    if (forward) {
        a->causal = form->causal;
        a->dropout = form->dropout;
        if (!attention_roles(b->ir->arena, p, a->causal, roles, &why)) {
            diag_error(c->span, "%s: %s", c->what, why);
            b->failed = true;
            return true;
        }
    } else { /* the forward's choices and row statistics */
        const AssignList *fwd = &b->info[c->slots[0]->id].forward;
        const Assignment *f = fwd->count ? fwd->items[0] : NULL;
        if (!f || f->kernel != KERNEL_ATTENTION || f->dropout != (c->proj->slot_count == 5))
            return kernel_misused(c, n, form);
        a->causal = f->causal;
        a->stats = f->stats;
        a->positions = f->positions;
        a->dropout = f->dropout;
        a->drop_cells = f->drop_cells;
        if (a->dropout) push_read(b, a, f->reads[f->read_count - 1]); /* the forward's rate, the last read */
        attention_roles(b->ir->arena, p, a->causal, roles, &why);
    }
    DType compute = (DType)dtype;
    if (forward) {
        a->stats = row_buffer(b, c->slots[0], a, roles, BUF_COMPUTED, compute, "lse");
        b->ir->buffers[a->stats].persistent = true; /* the gradients read what the forward left */
        uint32_t query, key;
        attention_positions(p, roles, &query, &key);
        if (a->causal) a->positions = positions_buffer(b, p, query, key, compute);
        if (a->dropout) a->drop_cells = drop_cells_buffer(b, c->slots[0], p, roles);
    } else if (form->kind == KERNEL_ATTENTION_DK) {
        a->scratch = row_buffer(b, c->slots[0], a, roles, BUF_SCRATCH, compute, "delta");
    }
    ARENA_PUSH(b->ir->arena, c->out, c->out_count, c->out_cap, a);
    return true;
}

void block_statement(BlockContext *c, const Node *n) {
    if (c->b->failed) return;
    if (n->kind == NODE_ASSIGN && n->a->kind != NODE_RECORD && c->rest && !c->rest_slot &&
        mentions_rest(c, n, c->local_count)) {
        for (uint32_t s = c->rest; s < c->slot_count && !c->b->failed; s++) {
            c->rest_slot = s;
            block_statement(c, n);
        }
        c->rest_slot = 0;
        return;
    }
    switch (n->kind) {
    case NODE_CODE: block_statement(c, n->a); return;
    case NODE_COMMENTED: block_statement(c, n->b); return;
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) block_statement(c, n->list.items[i]);
        return;
    case NODE_ASSIGN: break;
    default:
        diag_error(n->span, "an operator's code block holds assignments only (no 'if', no calls of code functions): "
                   "a per-cell choice is 'where c a b'; a choice made when compiling is one of two operators");
        c->b->failed = true;
        return;
    }
    if (n->a->kind == NODE_RECORD) {
        block_local(c, n);
        return;
    }
    Assignment *a = arena_alloc(c->b->ir->arena, sizeof *a);
    if (!block_access(c, n->a, &a->lhs)) {
        if (!c->b->failed)
            diag_error(n->a->span, "the left side of an assignment in an operator's block is a slot name "
                       "(v, g, g1, …)");
        c->b->failed = true;
        return;
    }
    a->lhs_span = n->a->span;
    if (!accum_parse(n->name, &a->accum, &a->reset)) {
        diag_error(n->span, "unknown assignment operator '%s'", n->name);
        c->b->failed = true;
        return;
    }
    if (n->c && c->proj) {
        diag_error(n->c->span, "an assignment in an operator's block uses the operator's logic; "
                   "'~logic:' is not allowed here");
        c->b->failed = true;
        return;
    }
    if (!c->proj) { /* an operator without ~logic: (elab/operators.c check_block_logics) */
        c->own_reads = NULL;
        c->own_read_count = 0;
        uint32_t cap = 0;
        ast_code_reads(c->b->ir->arena, n->b, &c->own_reads, &c->own_read_count, &cap);
    }
    if (kernel_statement(c, a, n)) return;
    a->rhs = block_expr(c, a, n->b);
    if (!a->rhs) return;
    a->proj = c->proj ? c->proj : own_projections(c, a, n);
    c->own_read_count = 0;
    if (!a->proj) return;
    if (proj_gathers(a->proj)) {
        a->slot_values = arena_alloc(c->b->ir->arena, c->slot_count * sizeof *a->slot_values);
        for (uint32_t s = 0; s < c->slot_count; s++)
            a->slot_values[s] = (Access){.node = {c->slots[s], false}, .slot = s};
    }
    a->span = c->span;
    a->what = c->what;
    bool result = !a->lhs.node.grad && a->lhs.slot == 0; /* a forward block's: it takes the stored type */
    if (!check_rhs_dtype(c->b, a, result ? DTYPE_ANY : node_dtype(a->lhs.node)))
        return;
    ARENA_PUSH(c->b->ir->arena, c->out, c->out_count, c->out_cap, a);
}

const char *operation_what(Builder *b, const Tensor *t) {
    return t->logic == LOGIC_SPEC ? arena_printf(b->ir->arena, "einsum '%s'", t->op_name)
                                  : arena_printf(b->ir->arena, "'%s'", t->op_name);
}

/* Where in a data item a slice reads: the whole field (axis -1), or cells lo … hi-1 of one axis. */
typedef struct Region {
    int32_t axis;
    int64_t lo, hi;
} Region;

/* Whether copy `a` (its result slot 0 from its read's slot) keeps every axis in place, but
 * perhaps one that is a part of a concatenation in the read (a slice, `p^a => a`): then *sliced is
 * that axis and the part's cells are *lo … *hi-1 (else *sliced is -1).  False for anything else
 * (a transpose, a concatenation of several parts, an axis read at a point). */
static bool slice_in_place(const Assignment *a, int32_t *sliced, int64_t *lo, int64_t *hi) {
    const Projections *p = a->proj;
    uint32_t from = a->reads[a->rhs->read].slot, to = a->lhs.slot;
    *sliced = -1;
    if (!p || p->rank[from] != p->rank[to]) return false;
    for (uint32_t ax = 0; ax < p->rank[to]; ax++) {
        const ProjIndex *r = &p->maps[from][ax], *w = &p->maps[to][ax];
        if (w->kind == PIDX_FIXED && r->kind == PIDX_FIXED && w->fixed == 0 && r->fixed == 0 &&
            p->axis_size[from][ax] == 1)
            continue; /* an axis of one cell, on both sides */
        if (w->kind != PIDX_ITER) return false;
        if (r->kind == PIDX_ITER && r->iter == w->iter) continue;
        if (r->kind != PIDX_CONCAT || *sliced >= 0) return false;
        uint32_t j = 0;
        while (j < r->concat->count && (r->concat->gap[j] || r->concat->iter[j] != w->iter)) j++;
        if (j == r->concat->count) return false;
        *sliced = (int32_t)ax;
        *lo = r->concat->offset[j];
        *hi = *lo + (int64_t)p->iter_size[w->iter];
    }
    return true;
}

/* Which cells of its tensor slot `slot` of `p` reads: true when every cell (each axis at an
 * iterator of its own that spans it, as a transpose reads, or an axis of one cell), or the cells
 * at one point of one axis (`x ++ "... | 0 => ... | "`: *point is that axis and position, else
 * its axis is -1); false for anything else (a diagonal, a stride, a part of a concatenation, two
 * points). */
static bool slot_read_cells(const Projections *p, uint32_t slot, Region *point) {
    *point = (Region){.axis = -1};
    if (!p) return false;
    for (uint32_t ax = 0; ax < p->rank[slot]; ax++) {
        const ProjIndex *r = &p->maps[slot][ax];
        if (p->axis_size[slot][ax] == 1 && (r->kind == PIDX_FIXED || r->kind == PIDX_ITER)) continue;
        if (r->kind == PIDX_FIXED && point->axis < 0 && !r->symbol) {
            *point = (Region){(int32_t)ax, r->fixed, r->fixed + 1};
            continue;
        }
        if (r->kind != PIDX_ITER || p->iter_size[r->iter] != p->axis_size[slot][ax]) return false;
        for (uint32_t other = 0; other < ax; other++)
            if (p->maps[slot][other].kind == PIDX_ITER && p->maps[slot][other].iter == r->iter) return false;
    }
    return true;
}

/* The leaf whose values reach t unchanged — a data item's field or numbers written in the
 * program (a literal, a stack of them) — through slices and operations whose forward code only
 * copies one tensor (a spec's slice, a transpose, a point of an axis), or NULL; *region, the part
 * of t that matters (axis -1: all of it), becomes the part of the leaf that reaches it. */
static Tensor *copied_from(Builder *b, Tensor *t, Region *region) {
    for (int depth = 0; t && depth < 256; depth++) {
        if (t->kind == TENSOR_DATA || t->kind == TENSOR_LITERAL || t->kind == TENSOR_STACK) return t;
        if (t->kind == TENSOR_SLICE) { /* `x @| i`: every i is read in its turn */
            /* x has one more axis, the leftmost (its first batch axis): a region of the slice's
             * axes is one axis further in x's (gpt.tsr's `train @| b` cut into inputs and
             * targets, tests/native/bad_token_windows). */
            if (region->axis >= 0) region->axis++;
            t = t->operands[0];
            continue;
        }
        if (t->kind != TENSOR_OP || b->info[t->id].forward.count == 0) return NULL;
        Tensor *from = NULL;
        const AssignList *fwd = &b->info[t->id].forward;
        for (uint32_t i = 0; i < fwd->count; i++) {
            const Assignment *a = fwd->items[i];
            bool copy = a->rhs->kind == AE_READ && !a->reads[a->rhs->read].node.grad && (a->accum == ACC_NONE || adds_once(a));
            Tensor *read = copy ? a->reads[a->rhs->read].node.tensor : NULL;
            if (!read || (from && read != from)) return NULL;
            from = read;
            /* A slice narrows the region (in the read's coordinates: the offset added); a copy
             * that moves axes leaves a region nowhere to be (a whole field can go anywhere), but
             * one at a point of an axis makes that point the region; one that reads some of its
             * cells otherwise (a stride, a diagonal) is not followed. */
            int32_t sliced;
            int64_t lo = 0, hi = 0;
            bool in_place = slice_in_place(a, &sliced, &lo, &hi);
            Region point;
            if (!in_place && (region->axis >= 0 || !slot_read_cells(a->proj, a->reads[a->rhs->read].slot, &point)))
                return NULL;
            if (!in_place && point.axis >= 0) *region = point;
            if (in_place && sliced >= 0) {
                if (region->axis >= 0 && region->axis != sliced) return NULL; /* two axes: not followed */
                *region = region->axis < 0 ? (Region){sliced, lo, hi}
                                           : (Region){sliced, lo + region->lo, lo + region->hi};
            }
        }
        t = from;
    }
    return NULL;
}

/* Where the number `value` is written in the literal `init` (or a literal it stacks): the first
 * cell that holds it, or `otherwise`. */
static Span written_cell(const Tensor *init, double value, Span otherwise) {
    if (init->kind == TENSOR_STACK)
        for (uint32_t k = 0; k < init->operand_count; k++) {
            Span at = written_cell(init->operands[k], value, (Span){0});
            if (at.file) return at;
        }
    if (init->kind == TENSOR_LITERAL && init->value_spans)
        for (uint32_t i = 0; i < init->value_count; i++)
            if (init->values[i] == value) return init->value_spans[i];
    if (init->kind == TENSOR_LITERAL && init->value_count == 1 && init->values[0] == value) return init->span;
    return otherwise;
}

/* Numbers written in the program that reach a gathered axis of `size` cells as its positions
 * (the cells of `region` of the literal `leaf`) must be whole numbers in 0 … size-1, as a data
 * item's are: an id past an embedding's rows written as a literal is an error here, at the number,
 * not a row read at the clamp.  False after the error. */
static bool literal_positions_fit(Builder *b, const Tensor *t, Tensor *leaf, Region region, const Tensor *gathered,
                                  int64_t size) {
    double *values = literal_values(b, leaf);
    if (!values) return true;
    const IrBuffer *buf = buffer_of(b, (TNode){leaf, false});
    uint64_t inner = 1; /* the cells after the region's axis, in memory order */
    for (uint32_t i = (uint32_t)(region.axis + 1); region.axis >= 0 && i < buf->rank; i++) inner *= buf->dims[i];
    for (uint64_t i = 0; i < buf->size; i++) {
        if (region.axis >= 0) {
            int64_t at = (int64_t)(i / inner % buf->dims[region.axis]);
            if (at < region.lo || at >= region.hi) continue;
        }
        double v = values[i];
        if (v >= 0 && v < (double)size && v == floor(v)) continue;
        /* the tensor read: named, or (a library's own operation) by the application that reads it */
        const char *in = gathered->name ? node_text(b, (TNode){(Tensor *)gathered, false})
                       : b->call_name   ? arena_printf(b->ir->arena, "what '%s' gathers from", b->call_name)
                                        : "the tensor gathered";
        diag_error(written_cell(leaf, v, leaf->span), "%g is %s 0 … %lld: this literal's numbers are positions in %s, "
                   "along a gathered axis of %lld cell%s", v, v == floor(v) ? "outside" : "not a whole number in",
                   (long long)size - 1, in, (long long)size, size == 1 ? "" : "s");
        if (!span_in_stdlib(t->span)) diag_note(t->span, "'%s' reads the cells at them here", t->op_name);
        b->failed = true;
        return false;
    }
    return true;
}

/* A gathered axis of this operation whose positions come, unchanged, from a data item: that
 * item's values must be whole numbers below the axis's size, which the runtime checks when it
 * reads them (DataSource.bound, from the reaches recorded here: resolve_gather_bounds), so that
 * an id past an embedding's rows is an error, not a row read at the clamp.  Positions written in
 * the program are checked now (literal_positions_fit). */
static void bound_gathered_data(Builder *b, const Tensor *t, const Projections *p, Tensor **slots) {
    for (uint32_t s = 0; s < p->slot_count; s++)
        for (uint32_t a = 0; a < p->rank[s]; a++) {
            if (p->maps[s][a].kind != PIDX_GATHER) continue;
            /* the positions' cells this gather reads: all, or one point of an axis */
            Region region;
            uint32_t positions = p->maps[s][a].gather;
            if (!slot_read_cells(p, positions, &region)) continue;
            Tensor *leaf = copied_from(b, slots[positions], &region);
            int64_t size = (int64_t)p->axis_size[s][a];
            if (!leaf || size_is_runtime((uint64_t)size)) continue;
            if (leaf->kind != TENSOR_DATA) {
                if (!literal_positions_fit(b, t, leaf, region, slots[s], size)) return;
                continue;
            }
            ARENA_PUSH(b->ir->arena, b->reaches, b->reach_count, b->reach_cap,
                       ((GatherReach){leaf->source, leaf, region.axis, region.lo, region.hi, size}));
        }
}

/* Whether the reaches of `bound` into `d` (from `first` on) cover it: one reads it whole, or
 * slices of one axis of its only field span that axis. */
static bool reaches_cover(const Builder *b, const DataSource *d, uint32_t first, int64_t bound) {
    for (uint32_t i = first; i < b->reach_count; i++)
        if (b->reaches[i].source == d && b->reaches[i].bound == bound && b->reaches[i].axis < 0) return true;
    if (d->field_count != 1) return false;
    /* Slices only: all of one axis of the field, their cells marked a bit each. */
    const GatherReach *one = NULL;
    int64_t extent = 0;
    uint64_t *cells = NULL;
    bool covered = true;
    for (uint32_t i = first; i < b->reach_count && covered; i++) {
        const GatherReach *r = &b->reaches[i];
        if (r->source != d || r->bound != bound) continue;
        if (!one) {
            one = r;
            uint32_t v = b->out->value_buffer[r->field->id];
            extent = v != UINT32_MAX && (uint32_t)r->axis < b->ir->buffers[v].rank ? (int64_t)b->ir->buffers[v].dims[r->axis] : 0;
            if (extent <= 0 || extent > (1 << 24)) return false;
            cells = calloc((size_t)(extent + 63) / 64, sizeof *cells);
            if (!cells) diag_fatal_oom();
        }
        covered = r->field == one->field && r->axis == one->axis && r->lo >= 0 && r->hi <= extent;
        for (int64_t c = r->lo; covered && c < r->hi; c++) cells[c / 64] |= 1ull << (c % 64);
    }
    for (int64_t c = 0; c < extent && covered; c++) covered = cells[c / 64] >> (c % 64) & 1;
    free(cells);
    return covered && one;
}

void resolve_gather_bounds(Builder *b) {
    for (uint32_t i = 0; i < b->reach_count; i++) {
        DataSource *d = b->reaches[i].source;
        bool seen = false; /* each item once, at its first reach */
        for (uint32_t k = 0; k < i && !seen; k++) seen = b->reaches[k].source == d;
        if (seen) continue;
        int64_t least = b->reaches[i].bound;
        for (uint32_t k = i; k < b->reach_count; k++)
            if (b->reaches[k].source == d && b->reaches[k].bound < least) least = b->reaches[k].bound;
        d->bound = reaches_cover(b, d, i, least) ? least : 0;
    }
}

static void build_operator(Builder *b, Tensor *t) {
    uint32_t n = t->operand_count + 1;
    Tensor **slots = arena_alloc(b->ir->arena, n * sizeof *slots);
    slots[0] = t;
    for (uint32_t i = 1; i < n; i++) slots[i] = t->operands[i - 1];
    const char *what = operation_what(b, t);
    /* Without ~logic: each assignment of the blocks has its own projections (own_projections). */
    Projections *proj = t->logic == LOGIC_NONE ? NULL : infer(b, t->logic, slots, n, t, what);
    if (!proj && t->logic != LOGIC_NONE) return;
    b->info[t->id].slots = slots;
    b->info[t->id].slot_count = n;
    b->info[t->id].proj = proj;
    BlockContext c = {.b = b, .slots = slots, .slot_count = n, .proj = proj, .what = what, .span = t->span,
                      .rest = operator_rest(t->op)};
    block_statement(&c, t->op->a);
    uint8_t stored = DTYPE_ANY; /* the join of the types stored (float_join) */
    for (uint32_t i = 0; i < c.out_count; i++) {
        if (c.out[i]->lhs.node.grad || c.out[i]->lhs.node.tensor != t) {
            diag_error(c.out[i]->lhs_span, "an operator's forward block writes its result (v), not %s",
                       c.out[i]->lhs.node.grad ? "a gradient" : "an operand");
            b->failed = true;
            return;
        }
        uint8_t d = c.out[i]->rhs_dtype;
        if (d != DTYPE_ANY && stored != DTYPE_ANY && is_int_dtype(d) != is_int_dtype(stored)) {
            uint8_t number = is_int_dtype(d) ? stored : d, integer = is_int_dtype(d) ? d : stored;
            diag_error(t->span, "%s stores both %s and %s values into its result", what, dtype_word(integer),
                       dtype_word(number));
            diag_note(t->span, "convert the %s ones with to_%s", dtype_word(integer), dtype_word(number));
            b->failed = true;
            return;
        }
        if (d != DTYPE_ANY) stored = is_int_dtype(d) ? int_join(stored, d) : float_join(stored, d);
    }
    for (uint32_t i = 0; i < c.out_count; i++) { /* every store in the result's type */
        Assignment *a = c.out[i];
        uint8_t type = stored == DTYPE_ANY ? TSR_DTYPE_F32 : stored; /* numbers alone make an f32 */
        if (a->rhs_dtype != type) {
            numbers_as(b, a, a->rhs, a->rhs_dtype, type);
            a->rhs_dtype = type;
        }
        add_forward(b, a);
    }
    t->dtype = stored == DTYPE_ANY ? TSR_DTYPE_F32 : stored;
    if (proj && proj_gathers(proj)) bound_gathered_data(b, t, proj, slots);
}


/* The cells of a row of t's closed shape (1 for an empty row). */
static double row_cells(Builder *b, const Tensor *t, RowKind kind) {
    const Row *row = &b->shapes[t->id].rows[kind];
    double cells = 1;
    for (uint32_t i = 0; i < row->count; i++) cells *= (double)row->dims[i].size;
    return cells;
}

/* A parameter without an initial tensor: drawn as its RandomInit says (elab.h). */
static void random_param(Builder *b, Tensor *t, IrBuffer *buf) {
    const RandomInit *r = &t->random;
    double fan_in = row_cells(b, t, ROW_INPUT), fan_out = row_cells(b, t, ROW_OUTPUT);
    double fan = r->fan == FAN_IN ? fan_in : r->fan == FAN_OUT ? fan_out : r->fan == FAN_SUM ? fan_in + fan_out : 1;
    buf->init = r->normal ? INIT_NORMAL : INIT_UNIFORM;
    buf->fill = r->scale / sqrt(fan);
    buf->init_shift = r->shift;
}

/* The parameter's initial values, `count` of them from `init`, each within its element type's
 * range; false after an error at the number (or the parameter). */
static bool initial_values_fit(Builder *b, const Tensor *t, const Tensor *init, const double *values, uint64_t count) {
    for (uint64_t i = 0; i < count; i++)
        if (overflows_type(values[i], t->dtype)) {
            diag_error(written_cell(init, values[i], t->span), "the initial value %g of parameter '%s' is beyond the range of %s (largest %s): it would "
                       "be infinity", values[i], t->name, dtype_word(t->dtype), t->dtype == TSR_DTYPE_F16 ? "65504" : "3.4e38");
            b->failed = true;
            return false;
        }
    return true;
}

static void build_param(Builder *b, Tensor *t) {
    IrBuffer *buf = buffer_of(b, (TNode){t, false});
    if (!t->operand_count) {
        random_param(b, t, buf);
        return;
    }
    Tensor *init = t->operands[0];
    if ((init->kind == TENSOR_LITERAL || init->kind == TENSOR_CONSTANT) && init->value_count == 1) {
        if (!initial_values_fit(b, t, init, init->values, 1)) return;
        buf->init = INIT_FILL;
        buf->fill = init->values[0];
        return;
    }
    double *values = literal_values(b, init);
    if (values) {
        if (!initial_values_fit(b, t, init, values, buf->size)) return;
        buf->init = INIT_VALUES;
        buf->values = values;
        return;
    }
    diag_error(t->span, "the initial value of parameter '%s' must be a number or a literal tensor in this "
               "version", t->name);
    diag_note(init->span, "its value is this tensor, which the program computes or reads, not a literal");
    b->failed = true;
}

/* A stack's element type, into t->dtype: its parts' joined (the wider integer type, bool within
 * u8 within i32 within i64; f64 over the other number types, a type with itself, f32 for the
 * other mixes), each part then widened into it (copy_assignment).  Integers and numbers in one
 * stack are an error naming the first part of each kind and the casts; false after it. */
static bool stack_dtype(Builder *b, Tensor *t) {
    Tensor *first_int = NULL, *first_float = NULL;
    uint8_t ints = DTYPE_ANY, floats = DTYPE_ANY;
    for (uint32_t k = 0; k < t->operand_count; k++) {
        Tensor *part = t->operands[k];
        if (is_int_dtype(part->dtype)) {
            if (!first_int) first_int = part;
            ints = int_join(ints, part->dtype);
        } else {
            if (!first_float) first_float = part;
            floats = float_join(floats, part->dtype);
        }
    }
    if (first_int && first_float) {
        const char *int_word = dtype_word(ints), *float_word = dtype_word(floats);
        diag_error(t->span, "this stack holds %s and %s values: a stack has one element type", float_word, int_word);
        diag_note(first_int->span, "%s is %s and %s %s; convert the %s parts with to_%s (exact below 2^%s), or the %s "
                  "ones with to_%s (toward zero)", node_text(b, (TNode){first_int, false}), int_word,
                  node_text(b, (TNode){first_float, false}), float_word, int_word,
                  floats == TSR_DTYPE_F64 ? "f64" : "f32", floats == TSR_DTYPE_F64 ? "53" : "24", float_word,
                  ints == TSR_DTYPE_I64 ? "i64" : "i32");
        b->failed = true;
        return false;
    }
    t->dtype = first_int ? ints : floats == DTYPE_ANY ? TSR_DTYPE_F32 : floats;
    return true;
}

static void build_tensor_once(Builder *b, Tensor *t) {
    IrProgram *ir = b->ir;
    if (t->kind == TENSOR_STACK) {
        double *values = literal_values(b, t);
        if (values) {
            IrBuffer *buf = buffer_of(b, (TNode){t, false});
            buf->kind = BUF_LITERAL;
            buf->init = INIT_VALUES;
            buf->values = values;
            return;
        }
    }
    if (t->kind != TENSOR_PARAM) /* a parameter's initial value is not part of the computation */
        for (uint32_t i = 0; i < t->operand_count; i++) build_tensor(b, t->operands[i]);
    if (b->failed) return;
    b->current = t;
    switch (t->kind) {
    case TENSOR_LITERAL: {
        IrBuffer *buf = buffer_of(b, (TNode){t, false});
        if (t->value_count == 1 && buf->size == 1) {
            buf->kind = BUF_CONSTANT;
            buf->init = INIT_FILL;
            buf->fill = t->values[0];
        } else if (t->iota) { /* 0, 1, 2, …: made when the state is, not spelt out in the image */
            buf->init = INIT_IOTA;
        } else {
            buf->init = INIT_VALUES;
            buf->values = literal_values(b, t);
        }
        break;
    }
    case TENSOR_CONSTANT: {
        IrBuffer *buf = buffer_of(b, (TNode){t, false});
        buf->init = INIT_FILL;
        buf->fill = t->values[0];
        break;
    }
    case TENSOR_PARAM: build_param(b, t); break;
    case TENSOR_STATE: {
        IrBuffer *buf = buffer_of(b, (TNode){t, false});
        buf->keep = true;
        buf->training_state = true;
        buf->init = INIT_FILL;
        buf->fill = 0;
        break;
    }
    case TENSOR_INPUT:
    case TENSOR_DATA: node_buffer(b, (TNode){t, false}); break;
    case TENSOR_INDEX: break; /* read as the symbol's value, no storage */
    case TENSOR_OP: build_operator(b, t); break;
    case TENSOR_SLICE: {
        t->dtype = t->operands[0]->dtype; /* a slice holds its operand's values */
        Tensor *slots[2] = {t, t->operands[0]};
        Projections *proj = infer(b, LOGIC_SLICE, slots, 2, t, "'@|'");
        b->info[t->id].proj = proj;
        if (proj) add_forward(b, copy_assignment(b, t, t->operands[0], proj, t->span, "'@|'"));
        break;
    }
    case TENSOR_STACK: {
        if (!stack_dtype(b, t)) break;
        const Shape *shape = &b->shapes[t->id];
        RowKind kind = ROW_OUTPUT;
        for (int k = 0; k < ROW_KINDS; k++)
            if (shape->rows[k].count == b->shapes[t->operands[0]->id].rows[k].count + 1) kind = (RowKind)k;
        for (uint32_t k = 0; k < t->operand_count && !b->failed; k++) {
            Shape shapes[2] = {*shape, b->shapes[t->operands[k]->id]};
            ProjProblem p = {.logic = LOGIC_STACK, .slot_count = 2, .shapes = shapes, .stack_index = k,
                             .stack_row = kind, .span = t->span, .what = "stacking"};
            Projections *proj = proj_infer(ir->arena, &p);
            if (!proj) {
                b->failed = true;
                break;
            }
            add_forward(b, copy_assignment(b, t, t->operands[k], proj, t->operands[k]->span, "stacking"));
        }
        break;
    }
    }
}

/* t's buffers and forward assignments, operands first.  A failed build poisons t: building what
 * reads it fails silently (assign_build goes on with the next named tensor or routine). */
void build_tensor(Builder *b, Tensor *t) {
    if (b->failed) return;
    if (b->visited[t->id]) {
        b->failed = b->poisoned[t->id];
        return;
    }
    b->visited[t->id] = true;
    Span outer = b->call; /* the call its reader was made for */
    const char *outer_name = b->call_name;
    builder_set_call(b, t->call, t->call_name);
    build_tensor_once(b, t);
    builder_set_call(b, outer, outer_name);
    if (b->failed) b->poisoned[t->id] = true;
}

void builder_set_call(Builder *b, Span call, const char *name) {
    b->call = call;
    b->call_name = name;
    diag_set_user_call(call, name);
}

/* ---- Collecting code --------------------------------------------------------------------------- */

/* The forward assignments of t and of everything it depends on, operands first, each once per
 * generation. */
void collect_forward(Builder *b, Tensor *t, AssignList *out) {
    if (b->stamp[t->id] == b->generation) return;
    b->stamp[t->id] = b->generation;
    if (t->kind != TENSOR_PARAM)
        for (uint32_t i = 0; i < t->operand_count; i++) collect_forward(b, t->operands[i], out);
    const AssignList *f = &b->info[t->id].forward;
    for (uint32_t i = 0; i < f->count; i++) push_assignment(b->ir->arena, out, f->items[i]);
}

/* Like collect_forward, but tensors made before `fresh_from` are read as they are. */
void collect_fresh(Builder *b, Tensor *t, uint32_t fresh_from, AssignList *out) {
    if (t->id < fresh_from || b->stamp[t->id] == b->generation) return;
    b->stamp[t->id] = b->generation;
    if (t->kind != TENSOR_PARAM)
        for (uint32_t i = 0; i < t->operand_count; i++) collect_fresh(b, t->operands[i], fresh_from, out);
    const AssignList *f = &b->info[t->id].forward;
    for (uint32_t i = 0; i < f->count; i++) push_assignment(b->ir->arena, out, f->items[i]);
}

/* Standalone assignments: slot 0 is the left side, then one slot per tensor read, numbered by
 * elab/code.c in the order written (CodeExpr.slot); the assignment's logic relates them (a routine's
 * `c =:+ a * b ~logic:"@"` loops as the operator `*` would, `total =+ g ~logic:"i, j => i"`
 * reduces over j). */
static AExpr *standalone_expr(Builder *b, Assignment *a, const CodeExpr *x) {
    AExpr *e = arena_alloc(b->ir->arena, sizeof *e);
    switch (x->kind) {
    case CEXPR_CONST:
        e->kind = AE_CONST;
        e->value = x->value;
        return e;
    case CEXPR_TENSOR:
        e->kind = AE_READ;
        e->read = add_read(b->ir->arena, a, (Access){.node = {x->tensor, x->grad}, .slot = x->slot});
        return e;
    case CEXPR_OP: {
        if (!x->binary && strcmp(x->op, RANDOM_PRIMITIVE) == 0)
            return x->arg_count == 0 ? random_expr(b->ir->arena) : random_misused(b, x->span);
        bool swapped;
        int op = scalar_op_code(x->op, x->binary, &swapped);
        if (op < 0 || scalar_op_arity((ScalarOp)op) != x->arg_count)
            diag_internal("'%s' with %u operands passed elaboration", x->op, x->arg_count);
        e->kind = AE_OP;
        e->op = (ScalarOp)op;
        for (uint32_t i = 0; i < x->arg_count; i++) {
            const CodeExpr *arg = x->args[swapped ? 1 - i : i];
            if (!(e->args[i] = standalone_expr(b, a, arg))) return NULL;
        }
        return e;
    }
    }
    return NULL;
}

static void standalone_slots(const CodeExpr *x, Tensor **slots) {
    if (x->kind == CEXPR_TENSOR) slots[x->slot] = x->tensor;
    for (uint32_t i = 0; i < x->arg_count; i++) standalone_slots(x->args[i], slots);
}

Assignment *standalone(Builder *b, const CodeStep *step) {
    Arena *arena = b->ir->arena;
    Assignment *a = arena_alloc(arena, sizeof *a);
    if (!accum_parse(step->op, &a->accum, &a->reset)) {
        diag_error(step->span, "unknown assignment operator '%s'", step->op);
        b->failed = true;
        return NULL;
    }
    Tensor **slots = arena_alloc(arena, step->slot_count * sizeof *slots);
    slots[0] = step->tensor;
    standalone_slots(step->rhs, slots);
    for (uint32_t i = 0; i < step->slot_count; i++) build_tensor(b, slots[i]);
    if (b->failed) return NULL;
    a->lhs = (Access){.node = {step->tensor, step->grad}, .slot = 0};
    if (!(a->rhs = standalone_expr(b, a, step->rhs))) return NULL;
    Shape *shapes = arena_alloc(arena, step->slot_count * sizeof *shapes);
    for (uint32_t i = 0; i < step->slot_count; i++) shapes[i] = b->shapes[slots[i]->id];
    ProjProblem p = {.logic = step->logic, .spec = step->spec, .slot_count = step->slot_count, .shapes = shapes,
                     .span = step->span, .what = "this assignment"};
    if (!(a->proj = proj_infer(arena, &p))) {
        b->failed = true;
        return NULL;
    }
    a->span = step->span;
    a->what = "this assignment";
    if (!check_rhs_dtype(b, a, node_dtype(a->lhs.node))) return NULL;
    a->what = "assignment";
    return a;
}
