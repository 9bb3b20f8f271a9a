/* explain.c — `tsrc --explain=NAME`: why a tensor has its shape, and how it is computed.
 *
 * For a named tensor (as --print-shapes names it; `NAME.grad` for its gradient, which has its
 * shape), prints `NAME : SHAPE`, then per axis the chain of constraints that decided its size
 * (shape_explain: the provenance the solver records when it binds a variable), then every
 * assignment that writes the tensor, forward and backward: its loop nest, which loops are summed
 * and why (the written side's index map does not use them), and whether the cells start from
 * the accumulator's neutral element (`=:+` resets).
 *
 * Requires: a program elaborated without errors (closed shapes); the assignments are built here
 * with assign_build, as code generation would build them (nothing is lowered). */
#include "infer/explain.h"

#include <string.h>

#include "base/arena.h"
#include "ir/assign.h"

static const char *kind_names[ROW_KINDS] = {[ROW_BATCH] = "batch", [ROW_INPUT] = "input", [ROW_OUTPUT] = "output"};

/* A loop's extent: a number, or `?` for a run-time size. */
static void print_size(FILE *out, uint64_t n) {
    if (size_is_runtime(n)) fputc('?', out);
    else fprintf(out, "%llu", (unsigned long long)n);
}

/* Memory-order axis `a` of `sh` (batch, output, input) as "input axis 2". */
static void print_axis_name(FILE *out, const Shape *sh, uint32_t a) {
    static const RowKind memory[ROW_KINDS] = {ROW_BATCH, ROW_OUTPUT, ROW_INPUT};
    for (int m = 0; m < ROW_KINDS; m++) {
        uint32_t n = sh->rows[memory[m]].count;
        if (a < n) {
            fprintf(out, "%s axis %u", kind_names[memory[m]], a + 1);
            return;
        }
        a -= n;
    }
}

/* 'x', 'x.grad', or an unnamed tensor's source text: `y *. y`. */
static void print_node(FILE *out, TNode n) {
    const char *name = n.tensor->shown ? n.tensor->shown : n.tensor->name;
    if (name) {
        fprintf(out, "'%s%s'", name, n.grad ? ".grad" : "");
        return;
    }
    fputc('`', out);
    span_print_text(out, n.tensor->span, 40);
    fprintf(out, "`%s", n.grad ? "'s gradient" : "");
}

/* Where iterator `it` is read: "input axis 1 of 'w2', output axis 1 of 'h'". */
static void print_uses(FILE *out, ShapeSolver *solver, const Assignment *a, uint32_t it) {
    const char *sep = "";
    for (uint32_t r = 0; r < a->read_count; r++) {
        const Access *acc = &a->reads[r];
        const Projections *p = a->proj;
        if (acc->symbol || acc->slot >= p->slot_count) continue;
        Shape sh = shape_resolve(solver, &acc->node.tensor->shape);
        for (uint32_t x = 0; x < p->rank[acc->slot]; x++) {
            const ProjIndex *ix = &p->maps[acc->slot][x];
            bool uses = ix->kind == PIDX_ITER ? ix->iter == it : false;
            for (uint32_t t = 0; ix->kind == PIDX_AFFINE && t < ix->term_count; t++) uses |= ix->terms[t] == it;
            if (!uses) continue;
            fputs(sep, out);
            print_axis_name(out, &sh, x);
            fputs(" of ", out);
            print_node(out, acc->node);
            sep = ", ";
        }
    }
    if (!*sep) fputs("no operand", out);
}

static void explain_assignment(FILE *out, ShapeSolver *solver, const Assignment *a, const char *routine) {
    const Projections *p = a->proj;
    unsigned line, col;
    fputs("  written", out);
    if (routine) fprintf(out, " in routine '%s'", routine);
    fprintf(out, " by %s", a->what);
    if (a->span.file) {
        span_line_col(a->span, &line, &col);
        fprintf(out, " at %s:%u:%u", source_get(a->span.file)->path, line, col);
    }
    fprintf(out, ", with %s\n", accum_text(a->accum, a->reset));
    if (!p) return;
    Shape lhs = shape_resolve(solver, &a->lhs.node.tensor->shape);
    fputs("    loops:", out);
    if (!p->iter_count) fputs(" none (a single cell)", out);
    for (uint32_t it = 0; it < p->iter_count; it++) {
        fprintf(out, " i%u (", it);
        print_size(out, p->iter_size[it]);
        fputc(')', out);
    }
    fputc('\n', out);
    uint32_t summed = 0;
    for (uint32_t it = 0; it < p->iter_count; it++) {
        bool written = false;
        for (uint32_t x = 0; x < p->rank[a->lhs.slot] && !written; x++) {
            const ProjIndex *ix = &p->maps[a->lhs.slot][x];
            written = ix->kind == PIDX_ITER && ix->iter == it;
            for (uint32_t t = 0; ix->kind == PIDX_AFFINE && t < ix->term_count; t++) written |= ix->terms[t] == it;
        }
        if (written) continue;
        summed++;
        fprintf(out, "    i%u (", it);
        print_size(out, p->iter_size[it]);
        fprintf(out, ") is %s: the written side's index map does not use it; it indexes ",
                a->accum == ACC_NONE ? "not summed but overwritten (the last wins)" : "reduced");
        print_uses(out, solver, a, it);
        fputc('\n', out);
    }
    for (uint32_t x = 0; x < p->rank[a->lhs.slot]; x++) {
        const ProjIndex *ix = &p->maps[a->lhs.slot][x];
        if (ix->kind == PIDX_ITER) continue;
        fputs("    the written ", out);
        print_axis_name(out, &lhs, x);
        if (ix->kind == PIDX_FIXED) fprintf(out, " is read at the fixed position %lld\n", (long long)ix->fixed);
        else if (ix->kind == PIDX_SYMBOL) fprintf(out, " is read at index symbol '%s'\n", ix->symbol);
        else fputs(" is an affine or concatenated index\n", out);
    }
    if (!summed) fputs("    nothing is summed: every loop indexes the written cells\n", out);
    bool surjective = proj_surjective(p, a->lhs.slot);
    if (a->reset && a->accum != ACC_NONE)
        fprintf(out, "    every cell starts at %g first: `%s` resets it to the neutral element of `%s`, then the loops "
                "accumulate\n", (double)accum_neutral(a->accum), accum_text(a->accum, true), accum_text(a->accum, false));
    else if (a->reset && !surjective)
        fputs("    the index map does not reach every cell: the cells it skips are set to 0 first\n", out);
    else if (!a->reset && a->accum != ACC_NONE)
        fputs("    no reset: it accumulates into what the cells hold (a gradient adds every use's part)\n", out);
}

/* The named tensor NAME (or NAME.grad's tensor), or NULL after an error listing the names. */
static Tensor *named_tensor(Program *p, const char *name) {
    size_t len = strlen(name);
    bool grad = len > 5 && strcmp(name + len - 5, ".grad") == 0;
    Tensor *t = NULL;
    for (uint32_t i = 0; i < p->named_count && !t; i++) {
        const char *n = p->shown_names[i];
        if (grad ? strlen(n) == len - 5 && strncmp(n, name, len - 5) == 0 : strcmp(n, name) == 0) t = p->named[i];
    }
    if (!t) {
        char list[512] = "none";
        size_t at = 0;
        for (uint32_t i = 0; i < p->named_count && at < sizeof list - 8; i++) {
            int n = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", p->shown_names[i]);
            at = n < 0 || (size_t)n >= sizeof list - at ? sizeof list : at + (size_t)n;
        }
        if (at >= sizeof list - 8) strcpy(list + sizeof list - 8, ", ...");
        diag_error_noloc("no tensor named '%s' (names: %s)", name, list);
    }
    return t;
}

static bool explain_one(Program *p, const AssignResult *ar, FILE *out, const char *name) {
    size_t len = strlen(name);
    bool grad = len > 5 && strcmp(name + len - 5, ".grad") == 0;
    Tensor *t = named_tensor(p, name);
    if (!t) return false;
    fprintf(out, "%s : ", name);
    shape_print(p->solver, out, &t->shape);
    fputc('\n', out);
    if (grad) fprintf(out, "  (a gradient has the shape of its tensor, '%.*s')\n", (int)(len - 5), name);
    shape_explain(p->solver, out, &t->shape);
    if (!ar) return true;
    /* A value is computed by the forward (as every routine's t.forward computes it); a gradient
     * only in routines (t.zero_grads, t.backprop). */
    const AssignList *lists = grad ? ar->routines : &ar->forward;
    uint32_t list_count = grad ? ar->routine_count : 1;
    bool any = false;
    for (uint32_t l = 0; l < list_count; l++)
        for (uint32_t i = 0; i < lists[l].count; i++) {
            const Assignment *a = lists[l].items[i];
            if (a->lhs.node.tensor != t || a->lhs.node.grad != grad) continue;
            explain_assignment(out, p->solver, a, grad ? lists[l].name : NULL);
            any = true;
        }
    const char *leaf = kind_without_gradient(t->kind);
    if (!any && grad && leaf)
        fprintf(out, "  no routine computes it: '%.*s' is %s, which has no gradient (backprop reaches parameters and "
                "the operations between them and the loss)\n", (int)(len - 5), name, leaf);
    else if (!any && grad) fputs("  no routine computes it: a routine's t.backprop would\n", out);
    if (!any && !grad) fprintf(out, "  no assignment writes it: its cells are %s\n",
                               t->kind == TENSOR_PARAM ? "a parameter's, initialised before the program runs"
                               : t->kind == TENSOR_INPUT || t->kind == TENSOR_DATA ? "filled by the caller or its data set"
                                                                                 : "known when the program is compiled");
    return true;
}

bool explain_tensors(Program *p, FILE *out, const char *const *names, uint32_t count, uint64_t seed) {
    bool ok = true; /* every name known before anything is printed */
    for (uint32_t i = 0; i < count; i++) ok = named_tensor(p, names[i]) && ok;
    if (!ok) return false;
    AssignOptions ao = {seed};
    AssignResult ar;
    bool built = assign_build(p, &ao, &ar);
    for (uint32_t i = 0; i < count; i++) {
        if (i) fputc('\n', out);
        ok = explain_one(p, built ? &ar : NULL, out, names[i]) && ok;
    }
    if (built) arena_free(ar.ir->arena);
    return ok && built;
}
