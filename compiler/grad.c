/* grad.c — reverse-mode differentiation: the assignments of `t.zero_grads` and `t.backprop`.
 *
 * What it does.  Both statements work on t's graph: t and every tensor it depends on through
 * operands (a parameter's operand, its initial value, is not part of the graph).  A depth-first
 * walk from t, operands in order, lists the graph operands before users: an order in which the
 * tensors could have been made (independent tensors may come in another order than their ids).
 *   - Which tensors need a gradient: a parameter; an operation, a slice or a stack with an
 *     operand that needs one.  Inputs, data, literals, constants and index values never do.
 *     The answer is kept per tensor (TensorInfo.needs_grad).
 *   - grad_zero: `n.grad =: 0` for every tensor n of the graph that needs a gradient, in the
 *     graph's order; each with its own one-slot pointwise record.
 *   - grad_backprop: for every tensor of the graph that needs a gradient, in the reverse order
 *     (users before operands, so that every use has added to a gradient before the gradient is
 *     propagated): an operation's `backward` block, instantiated over the operation's forward
 *     slots and forward record; only the assignments whose left side needs a gradient are kept.
 *     A backward assignment is a slot-permuted view of the forward one: `g1` is addressed
 *     through slot 1, the index map by which the forward assignment read operand 1, so backward
 *     code needs no projection inference of its own.  A slice `r = x @| i` gives `x.grad =+ r.grad` under the
 *     slice's record; a stack gives `e_k.grad =+ r.grad` under element k's record.  t.grad is
 *     not seeded.
 *   Errors: an operation that needs a gradient whose operator has no backward block; a
 *   backward block that writes a value, not a gradient.
 *
 * Requires: assign.c has built t (build_tensor): every operation's slots and record are in its
 * TensorInfo, and a stack's forward list holds one assignment per element, in order. */
#include "grad.h"

#include <string.h>

#include "diag.h"
#include "proj.h"

/* The tensors of t's graph, operands before users (a walk of its own generation). */
static void collect_graph(Builder *b, Tensor *t, Tensor ***out, uint32_t *count, uint32_t *cap) {
    if (b->stamp[t->id] == b->generation) return;
    b->stamp[t->id] = b->generation;
    if (t->kind != TENSOR_PARAM)
        for (uint32_t i = 0; i < t->operand_count; i++) collect_graph(b, t->operands[i], out, count, cap);
    ARENA_PUSH(b->ir->arena, *out, *count, *cap, t);
}

static Tensor **graph_of(Builder *b, Tensor *t, uint32_t *count) {
    Tensor **graph = NULL;
    uint32_t cap = 0;
    *count = 0;
    b->generation++;
    collect_graph(b, t, &graph, count, &cap);
    return graph;
}

static bool needs_grad(Builder *b, Tensor *t) {
    TensorInfo *info = &b->info[t->id];
    if (!info->needs_grad) {
        bool yes = t->kind == TENSOR_PARAM;
        if (t->kind == TENSOR_OP || t->kind == TENSOR_SLICE || t->kind == TENSOR_STACK)
            for (uint32_t i = 0; i < t->operand_count && !yes; i++) yes = needs_grad(b, t->operands[i]);
        info->needs_grad = yes ? 2 : 1;
    }
    return info->needs_grad == 2;
}

/* The backward assignments of one operation whose result needs a gradient. */
static void backward_of(Builder *b, Tensor *t, AssignList *out) {
    TensorInfo *info = &b->info[t->id];
    Arena *arena = b->ir->arena;
    if (t->kind == TENSOR_SLICE || t->kind == TENSOR_STACK) {
        for (uint32_t k = 0; k < t->operand_count; k++) {
            Tensor *src = t->operands[k];
            if (!needs_grad(b, src)) continue;
            const Projections *proj = t->kind == TENSOR_SLICE ? info->proj : info->forward.items[k]->proj;
            Assignment *a = copy_assignment(b, src, t, proj, t->span, t->kind == TENSOR_SLICE ? "'@|' (backward)" : "stacking (backward)");
            a->lhs = (Access){.node = {src, true}, .slot = 1};
            a->reads[0] = (Access){.node = {t, true}, .slot = 0};
            a->accum = ACC_ADD;
            push_assignment(arena, out, a);
        }
        return;
    }
    if (t->kind != TENSOR_OP) return;
    if (!t->op->b) {
        diag_error(t->span, "cannot backpropagate through '%s': its operator has no backward block", t->op_name);
        diag_note(t->op->span, "'%s' is declared here", t->op_name);
        b->failed = true;
        return;
    }
    const char *what = arena_printf(arena, "%s (backward)", operation_what(b, t));
    BlockContext c = {.b = b, .slots = info->slots, .slot_count = info->slot_count, .proj = info->proj,
                      .what = what, .span = t->span};
    block_statement(&c, t->op->b);
    for (uint32_t i = 0; i < c.out_count; i++) {
        Assignment *a = c.out[i];
        if (!a->lhs.node.grad) {
            diag_error(t->op->b->span, "an operator's backward block writes gradients (g1, g2, …)");
            b->failed = true;
            return;
        }
        if (needs_grad(b, a->lhs.node.tensor)) push_assignment(arena, out, a);
    }
}

/* `t.grad =: 0` over every cell (one slot, pointwise). */
static Assignment *zero_assignment(Builder *b, Tensor *t, Span span) {
    Shape shape = b->shapes[t->id];
    ProjProblem p = {.logic = PROJ_POINTWISE, .slot_count = 1, .shapes = &shape, .span = span, .what = "zero_grads"};
    const Projections *proj = proj_infer(b->ir->arena, &p);
    if (!proj) {
        b->failed = true;
        return NULL;
    }
    Assignment *a = new_assignment(b, (Access){.node = {t, true}, .slot = 0}, AE_CONST, proj, span, "zero_grads");
    a->rhs->value = 0.0;
    return a;
}

void grad_zero(Builder *b, Tensor *t, Span span, AssignList *out) {
    uint32_t count;
    Tensor **graph = graph_of(b, t, &count);
    for (uint32_t i = 0; i < count; i++)
        if (needs_grad(b, graph[i])) {
            Assignment *a = zero_assignment(b, graph[i], span);
            if (a) push_assignment(b->ir->arena, out, a);
        }
}

void grad_backprop(Builder *b, Tensor *t, AssignList *out) {
    uint32_t count;
    Tensor **graph = graph_of(b, t, &count);
    for (uint32_t i = count; i-- > 0 && !b->failed;)
        if (needs_grad(b, graph[i])) backward_of(b, graph[i], out);
}
