/* grad.c — reverse-mode differentiation: the assignments of `t.zero_grads` and `t.backprop`.
 *
 * What it does.  Both statements work on t's graph: t and every tensor it depends on through
 * operands (a parameter's operand, its initial value, is not part of the graph).  A depth-first
 * walk from t, operands in order, lists the graph operands before users: an order in which the
 * tensors could have been made (independent tensors may come in another order than their ids).
 *   - Which tensors need a gradient: a parameter; an operation, a slice or a stack with an
 *     operand that needs one, except an operation whose operator is declared `backward none`
 *     (comparisons, sign, floor, stop_gradient: no gradient flows through it) and a tensor of an
 *     integer type.  Inputs, data, literals, constants and index values never do.
 *     The answer is kept per tensor (TensorInfo.needs_grad).  Of those, a gradient exists only
 *     where it is *reached*: t's own, and each one that a reached operation's backward block
 *     writes.  So the condition of `where` (whose block writes g2 and g3, not g1), a comparison
 *     of parameters say, has none, and its operator needs no backward block.
 *   - grad_zero: `n.grad =: 0` for every tensor n of the graph whose gradient is reached, in
 *     the graph's order; each with its own one-slot pointwise record.
 *   - grad_backprop: for every tensor of the graph whose gradient is reached, in the reverse order
 *     (users before operands, so that every use has added to a gradient before the gradient is
 *     propagated): an operation's `backward` block, instantiated over the operation's forward
 *     slots and forward record; only the assignments whose left side needs a gradient are kept.
 *     A backward assignment is a slot-permuted view of the forward one: `g1` is addressed
 *     through slot 1, the index map by which the forward assignment read operand 1, so backward
 *     code needs no projection inference of its own.  A slice `r = x @| i` gives `x.grad =+ r.grad` under the
 *     slice's record; a stack gives `e_k.grad =+ r.grad` under element k's record.  Before
 *     them, the gradient of every computed tensor of the graph (not t's, not a parameter's, not
 *     one the routine wrote earlier) is set to 0: only parameters' gradients accumulate across
 *     backprops, as PyTorch's leaves do, so micro-batches can be accumulated.  A t of
 *     one cell is seeded first (`t.grad =: 1`) unless the routine assigned t.grad before the
 *     statement (the caller says which); a larger t is never seeded: its seed is the program's.
 *   Errors: an operation that needs a gradient whose operator has no backward block; a
 *   backward block that writes a value, not a gradient; a backprop of a tensor that needs no
 *   gradient while its graph holds parameters (every path from them passes through an operation
 *   that lets no gradient through, argmax's say: the backprop would train nothing).
 *
 * Requires: assign.c has built t (build_tensor): every operation's slots and record are in its
 * TensorInfo, and a stack's forward list holds one assignment per element, in order. */
#include "ir/grad.h"

#include <inttypes.h>
#include <string.h>

#include "base/diag.h"
#include "infer/proj.h"

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
    if (tsr_dtype_integer(t->dtype)) return false; /* integers (i32, u8, bool) are not differentiated */
    TensorInfo *info = &b->info[t->id];
    if (!info->needs_grad) {
        bool yes = t->kind == TENSOR_PARAM;
        bool passes = t->kind != TENSOR_OP || !(t->op->flag & OP_NO_GRADIENT);
        if (passes && (t->kind == TENSOR_OP || t->kind == TENSOR_SLICE || t->kind == TENSOR_STACK))
            for (uint32_t i = 0; i < t->operand_count && !yes; i++) yes = needs_grad(b, t->operands[i]);
        info->needs_grad = yes ? 2 : 1;
    }
    return info->needs_grad == 2;
}

/* Where t was made by a library function the user applied (argmax, sample, accuracy), a note at
 * that application: it is what has no gradient. */
static void note_library_call(const Tensor *t) {
    if (span_in_stdlib(t->span) && t->call.file && !span_in_stdlib(t->call) && t->call_name)
        diag_note(t->call, "'%s' has no gradient: the loss reaches the parameters through this application of it "
                  "(a loss must be differentiable; argmax, sample and the accuracies are for evaluation)", t->call_name);
}

/* The backward assignments of one operation whose result needs a gradient; every tensor whose
 * gradient one of them writes is marked in `reached`. */
static void backward_of(Builder *b, Tensor *t, bool *reached, AssignList *out) {
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
            reached[src->id] = true;
            push_assignment(arena, out, a);
        }
        return;
    }
    if (t->kind != TENSOR_OP) return;
    if (!t->op->b) {
        diag_error(t->span, "cannot backpropagate through '%s': its operator has no backward block (write one, or "
                   "'backward none' if no gradient flows through it)", t->op_name);
        diag_note(t->op->span, "'%s' is declared here", t->op_name);
        note_library_call(t);
        b->failed = true;
        return;
    }
    const char *what = arena_printf(arena, "%s (backward)", operation_what(b, t));
    BlockContext c = {.b = b, .slots = info->slots, .slot_count = info->slot_count, .proj = info->proj,
                      .what = what, .span = t->span, .rest = operator_rest(t->op)};
    block_statement(&c, t->op->b);
    for (uint32_t i = 0; i < c.out_count; i++) {
        Assignment *a = c.out[i];
        if (!a->lhs.node.grad || a->lhs.node.tensor == t) { /* t: the result, slot 0 of the operator */
            diag_error(a->lhs_span, "an operator's backward block writes its operands' gradients (g1, g2, …), not %s",
                       a->lhs.node.grad ? "g, the result's gradient, which it reads" : "a value");
            b->failed = true;
            return;
        }
        if (needs_grad(b, a->lhs.node.tensor)) {
            reached[a->lhs.node.tensor->id] = true;
            push_assignment(arena, out, a);
        }
    }
}

/* `t.grad =: value` over every cell (one slot, pointwise), the number in the gradient's type. */
static Assignment *fill_assignment(Builder *b, Tensor *t, double value, Span span, const char *what) {
    Shape shape = b->shapes[t->id];
    ProjProblem p = {.logic = LOGIC_POINTWISE, .slot_count = 1, .shapes = &shape, .span = span, .what = what};
    const Projections *proj = proj_infer(b->ir->arena, &p);
    if (!proj) {
        b->failed = true;
        return NULL;
    }
    Assignment *a = new_assignment(b, (Access){.node = {t, true}, .slot = 0}, AE_CONST, proj, span, what);
    a->rhs->value = value;
    a->rhs->type = t->dtype;
    a->rhs_dtype = t->dtype;
    return a;
}

/* The cells of t's shape. */
static uint64_t cell_count(Builder *b, const Tensor *t) {
    const Shape *shape = &b->shapes[t->id];
    uint32_t rank = proj_shape_rank(shape);
    uint64_t *dims = arena_alloc(b->ir->arena, (rank ? rank : 1) * sizeof *dims), cells = 1;
    proj_shape_dims(shape, dims);
    for (uint32_t i = 0; i < rank; i++) cells *= dims[i];
    return cells;
}

/* The backward assignments of t's graph, users before operands, into `out`; `reached` (by tensor
 * id) ends up marking t and every tensor whose gradient they write. */
static void backward_pass(Builder *b, Tensor *t, Tensor **graph, uint32_t count, bool *reached, AssignList *out) {
    reached[t->id] = true;
    for (uint32_t i = count; i-- > 0 && !b->failed;)
        if (needs_grad(b, graph[i]) && reached[graph[i]->id]) backward_of(b, graph[i], reached, out);
}

static bool *reached_marks(Builder *b) {
    return arena_alloc(b->ir->arena, (b->program->tensor_count + 1) * sizeof(bool));
}

void grad_zero(Builder *b, Tensor *t, Span span, AssignList *out, bool *written) {
    uint32_t count;
    Tensor **graph = graph_of(b, t, &count);
    bool *reached = reached_marks(b);
    AssignList unused = {0};
    backward_pass(b, t, graph, count, reached, &unused);
    for (uint32_t i = 0; i < count && !b->failed; i++)
        if (needs_grad(b, graph[i]) && reached[graph[i]->id]) {
            Assignment *a = fill_assignment(b, graph[i], 0.0, span, "zero_grads");
            if (a) push_assignment(b->ir->arena, out, a);
            written[graph[i]->id] = false;
        }
}

/* A backprop of a tensor of more than one cell that the routine does not seed: its gradient is
 * whatever the buffer holds (0 unless code elsewhere, or the C caller, wrote it), most often a
 * loss left unreduced, which trains nothing.  Warned at the user's application of the standard
 * library's code (Train.step loss …) where the statement is in it. */
/* How a message names the tensor of a backprop statement ('loss', "the result of '+'"), and
 * where it points: the statement, or the user's application of the library function it is in. */
typedef struct BackpropSite {
    const char *name; /* the tensor's name, or NULL */
    const char *what;
    bool in_library;
    Span at;
} BackpropSite;

static BackpropSite backprop_site(Builder *b, const CodeStep *step) {
    const Tensor *t = step->tensor;
    BackpropSite site = {.name = t->shown ? t->shown : t->name};
    site.what = site.name ? arena_printf(b->ir->arena, "'%s'", site.name)
              : t->kind == TENSOR_OP ? arena_printf(b->ir->arena, "the result of '%s'", t->op_name)
                                     : "an unnamed tensor";
    site.in_library = step->user_call.file && span_in_stdlib(step->span) && !span_in_stdlib(step->user_call);
    site.at = site.in_library ? step->user_call : step->span;
    return site;
}

static void warn_unseeded(Builder *b, const CodeStep *step) {
    const Tensor *t = step->tensor;
    uint64_t cells = cell_count(b, t);
    BackpropSite site = backprop_site(b, step);
    const char *name = site.name, *what = site.what;
    bool in_library = site.in_library;
    Span at = site.at;
    const char *function = step->user_call_name ? step->user_call_name : "function";
    if (in_library) { /* the library zeroes the gradients first: nothing the caller writes can seed it */
        diag_error(at, "'%s' needs a loss of one cell: the backprop of %s, of %" PRIu64 " cells, would start from a "
                   "gradient of 0 and train nothing (only a one-cell loss is seeded with 1)", function, what, cells);
        diag_note(step->span, "the backprop in the standard library's '%s'", function);
        if (name)
            diag_note(at, "reduce it to one cell (Nn.mean () %s, a loss of Nn), or seed %s.grad in a routine of your own "
                      "that runs its backprop", name, name);
        else
            diag_note(at, "reduce it to one cell (Nn.mean () of it, a loss of Nn), or name it with let%%op and seed its "
                      ".grad in a routine of your own that runs its backprop");
        return;
    }
    diag_warning(at, "backprop of %s, of %" PRIu64 " cells, starts from its gradient as it is (0 unless written): only a "
                 "one-cell tensor is seeded with 1", what, cells);
    if (name)
        diag_note(at, "reduce it to one cell (Nn.mean () %s, a loss of Nn) or assign %s.grad in the routine before it (after any zero_grads)", name, name);
    else
        diag_note(at, "reduce it to one cell (Nn.mean () of it, a loss of Nn), or name it with let%%op and assign its "
                  ".grad in the routine before it (after any zero_grads)");
}

/* What cuts t's graph off from its parameters when t needs no gradient: the tensor nearest t that
 * needs none while an operand needs one (an operation declared `backward none`, or one of an
 * integer type), or NULL. */
static Tensor *gradient_cut(Builder *b, Tensor **graph, uint32_t count) {
    for (uint32_t i = count; i-- > 0;) {
        Tensor *n = graph[i];
        if (needs_grad(b, n) || (n->kind != TENSOR_OP && n->kind != TENSOR_SLICE && n->kind != TENSOR_STACK)) continue;
        for (uint32_t k = 0; k < n->operand_count; k++)
            if (needs_grad(b, n->operands[k])) return n;
    }
    return NULL;
}

/* A backprop that would train nothing: t needs no gradient although parameters feed it, every
 * path from them passing through an operation that lets no gradient through. */
static void refuse_cut_backprop(Builder *b, const CodeStep *step, Tensor *cut) {
    BackpropSite site = backprop_site(b, step);
    const char *why = cut->kind == TENSOR_OP && (cut->op->flag & OP_NO_GRADIENT) ? "which lets no gradient through"
                    : arena_printf(b->ir->arena, "whose result is %s (integers are not differentiated)",
                                   ir_dtype_word(cut->dtype));
    const char *through = cut->kind == TENSOR_OP ? arena_printf(b->ir->arena, "'%s'", cut->op_name) : "a slice";
    diag_error(site.at, "the backprop of %s trains nothing: its parameters reach it only through %s, %s", site.what,
               through, why);
    if (site.in_library) diag_note(step->span, "the backprop in the standard library's '%s'",
                              step->user_call_name ? step->user_call_name : "function");
    diag_note(cut->span, "no gradient flows through this %s", cut->kind == TENSOR_OP ? "operation" : "tensor");
    note_library_call(cut);
    b->failed = true;
}

void grad_backprop(Builder *b, const CodeStep *step, bool may_seed, const bool *written, AssignList *out) {
    Tensor *t = step->tensor;
    Span span = step->span;
    uint32_t count;
    Tensor **graph = graph_of(b, t, &count);
    Tensor *cut = needs_grad(b, t) ? NULL : gradient_cut(b, graph, count);
    if (cut) {
        refuse_cut_backprop(b, step, cut);
        return;
    }
    if (may_seed && needs_grad(b, t) && cell_count(b, t) == 1) {
        Assignment *seed = fill_assignment(b, t, 1.0, span, "backprop (seed)");
        if (!seed) return;
        push_assignment(b->ir->arena, out, seed);
    } else if (may_seed && needs_grad(b, t)) {
        warn_unseeded(b, step);
    }
    bool *reached = reached_marks(b);
    AssignList backward = {0};
    backward_pass(b, t, graph, count, reached, &backward);
    /* Only a parameter's gradient accumulates from one backprop to the next (PyTorch's leaves):
     * the gradient of every tensor computed in the graph starts from 0 here, so that two backprops
     * without zero_grads between them (gradient accumulation over micro-batches) add the two
     * parameter gradients rather than propagating the first pass's interior gradients twice.
     * t's own gradient is the seed; one the routine wrote before this statement is kept. */
    for (uint32_t i = 0; i < count && !b->failed; i++) {
        Tensor *n = graph[i];
        if (n == t || n->kind == TENSOR_PARAM || !needs_grad(b, n) || !reached[n->id] || (written && written[n->id]))
            continue;
        Assignment *a = fill_assignment(b, n, 0.0, span, "backprop (fresh gradient)");
        if (a) push_assignment(b->ir->arena, out, a);
    }
    for (uint32_t i = 0; i < backward.count; i++) push_assignment(b->ir->arena, out, backward.items[i]);
}
