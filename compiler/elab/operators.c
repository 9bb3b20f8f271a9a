/* operators.c — applying tensor operators: an operation's shape logic (logic.c's relations, an
 * einsum spec's slots, pinned axes of slices and stacks) emitted as constraints of the shape
 * solver; affine, strided and concatenated axes (a copy of the spec per application, paddings
 * settled at the end); the checks an `operator` declaration gets (arity, slot names, block
 * logics); the application itself (a TENSOR_OP node and its constraints); tensor literals; and
 * sizes (`o = [ … ]` fields, `input`, run-time sizes `?`).
 *
 * Requires: elab_internal.h; logic.h for the relations, shape.h for the constraints. */
#include "elab/elab_internal.h"

#include <ctype.h>
#include <string.h>

#include "ir/ir.h"

/* ---- Shape logics -------------------------------------------------------------------------- */

/* The relations of a fixed logic (logic.c's table) between the shapes of an operation's `n`
 * slots (slot 0 its result) as constraints: ⊑ a row inequality, = a row equality; a pinned
 * axis is put in front of its side, and a slice's is a front equality (shape_row_eq_front).
 * `what` names the operation in the origins ("'+'"); relations in a row with one text share
 * their origin. */
void emit_relations(Elab *e, Logic logic, Shape *const *slots, uint32_t n, RowKind stacked,
                    const PinnedAxis *pinned, Span span, const char *what) {
    ShapeSolver *s = e->solver;
    LogicWalk walk = logic_walk(logic, n, stacked);
    LogicPair p;
    char last[512] = "";
    OriginId why = 0;
    while (logic_next(&walk, &p)) {
        const LogicRelation *rel = p.rel;
        Row sub = slots[p.sub]->rows[p.sub_kind], super = slots[p.super]->rows[p.super_kind];
        char text[512];
        snprintf(text, sizeof text, "%s (%s%s%s%s%s)", what, rel->phrase, rel->names_kind ? ", " : "",
                 rel->names_kind ? logic_row_names[p.sub_kind] : "", rel->names_kind ? " axes" : "",
                 pinned ? pinned->detail : "");
        if (!why || strcmp(text, last) != 0) {
            why = origin(e, span, "%s", text);
            memcpy(last, text, sizeof last);
        }
        shape_set_contracting(s, rel->structural);
        if (p.sub_front) {
            Row front = shape_row_prepend(s, &pinned->axis, 1, super);
            front.origin = pinned->row_origin;
            shape_row_eq_front(s, sub, front, why);
        } else if (p.super_front) {
            Row front = shape_row_prepend(s, &pinned->axis, 1, sub);
            front.origin = pinned->row_origin;
            shape_row_eq(s, front, super, why);
        } else if (rel->equal) {
            shape_row_eq(s, sub, super, why);
        } else {
            shape_row_le(s, sub, super, why);
        }
    }
    shape_set_contracting(s, false);
}

/* A stack's shape, made from its element's by the stacking logic's equalities instead of solved
 * for: each row of slot 0 is slot 1's, sharing its row variable, with the pinned axis in front
 * of the stacked kind's. */
static void define_by_relations(Elab *e, Logic logic, Shape *const *slots, RowKind stacked, const PinnedAxis *pinned) {
    LogicWalk walk = logic_walk(logic, 2, stacked);
    LogicPair p;
    while (logic_next(&walk, &p)) {
        Row sub = slots[p.sub]->rows[p.sub_kind], *defined = &slots[p.super]->rows[p.super_kind];
        *defined = p.super_front ? shape_row_prepend(e->solver, &pinned->axis, 1, sub) : sub;
        if (p.super_front) defined->origin = pinned->row_origin;
    }
}

/* The variables of one application of a spec. */
typedef struct SpecVars {
    const char **labels;
    Dim *dims;
    uint32_t label_count, label_cap;
    const char **row_names;
    uint32_t *row_vars;
    uint32_t row_count, row_cap;
    uint32_t default_rows[ROW_KINDS];
    Scope *scope;
    const Node *captures;
    bool result; /* the result slot is being built */
    uint32_t slot, operand_count; /* the slot being built (0: the result) and the spec's operands */
} SpecVars;

static bool is_captured(const Node *captures, const char *label) {
    if (!captures) return false;
    for (uint32_t i = 0; i < captures->list.count; i++) {
        const Node *c = captures->list.items[i];
        if (c->kind == NODE_STRING && strlen(label) == c->len && memcmp(c->text, label, c->len) == 0)
            return true;
    }
    return false;
}

static Dim spec_label(Elab *e, SpecVars *sv, const char *label, Span span) {
    for (uint32_t i = 0; i < sv->label_count; i++)
        if (strcmp(sv->labels[i], label) == 0) return sv->dims[i];
    Dim d;
    if (sv->scope && is_captured(sv->captures, label)) {
        ScopeDim *c = scope_dim(e, sv->scope, label, span);
        if (!c->label && !c->row_var) c->captured = span;
        c->label = true;
        d = c->dim;
    } else {
        d = shape_fresh_dim(e->solver, origin(e, span, "label '%s' of the spec", label));
    }
    uint32_t n = sv->label_count, cap = sv->label_cap;
    ARENA_PUSH(e->arena, sv->labels, sv->label_count, sv->label_cap, label);
    ARENA_PUSH(e->arena, sv->dims, n, cap, d);
    return d;
}

static uint32_t spec_row_var(Elab *e, SpecVars *sv, const SpecRow *row) {
    if (row->row_var.kind == SPEC_ROWVAR_DEFAULT) {
        if (!sv->default_rows[row->kind])
            sv->default_rows[row->kind] = shape_fresh_row(e->solver, 0).var;
        return sv->default_rows[row->kind];
    }
    for (uint32_t i = 0; i < sv->row_count; i++)
        if (strcmp(sv->row_names[i], row->row_var.name) == 0) return sv->row_vars[i];
    uint32_t v;
    if (sv->scope && is_captured(sv->captures, row->row_var.name)) {
        /* A captured row variable is the scope's: every spec of the scope that captures the
         * name shares it, and the captured dimension counts its cells. */
        ScopeDim *c = scope_dim(e, sv->scope, row->row_var.name, row->row_var.span);
        if (!c->row_var) {
            if (!c->label) c->captured = row->row_var.span;
            c->row_var = shape_fresh_row(e->solver, 0).var;
            shape_row_product(e->solver, (Row){.var = c->row_var}, c->dim,
                              origin(e, row->row_var.span, "captured row variable '%s'", row->row_var.name));
        }
        v = c->row_var;
    } else {
        v = shape_fresh_row(e->solver, 0).var;
    }
    uint32_t n = sv->row_count, cap = sv->row_cap;
    ARENA_PUSH(e->arena, sv->row_names, sv->row_count, sv->row_cap, row->row_var.name);
    ARENA_PUSH(e->arena, sv->row_vars, n, cap, v);
    return v;
}

static Dim spec_affine(Elab *e, SpecVars *sv, const SpecAxis *ax);
static Dim spec_concat(Elab *e, SpecVars *sv, const SpecAxis *ax);

static bool spec_axis(Elab *e, SpecVars *sv, const SpecAxis *ax, Dim *out) {
    switch (ax->kind) {
    case SPEC_AXIS_LABEL: *out = spec_label(e, sv, ax->as.label, ax->span); return true;
    case SPEC_AXIS_PLACEHOLDER:
        *out = shape_fresh_dim(e->solver, origin(e, ax->span, "placeholder '_' of the spec"));
        return true;
    case SPEC_AXIS_GATHER: /* an axis of its own, as '_'; the operand it reads is checked here */
        if (sv->result) {
            diag_error(ax->span, "a gathered axis '[%u]' reads an operand at positions that data chooses; it belongs "
                       "in an operand slot, not the result", ax->as.gather);
            return false;
        }
        if (ax->as.gather > sv->operand_count || ax->as.gather == sv->slot) {
            diag_error(ax->span, ax->as.gather == sv->slot
                           ? "a gathered axis '[%u]' of operand %u reads its positions from another operand"
                           : "a gathered axis '[%u]' names an operand the spec does not have (it has %u)",
                       ax->as.gather, ax->as.gather == sv->slot ? sv->slot : sv->operand_count);
            return false;
        }
        *out = shape_fresh_dim(e->solver, origin(e, ax->span, "gathered axis '[%u]' of the spec", ax->as.gather));
        return true;
    case SPEC_AXIS_FIXED: {
        OriginId o = origin(e, ax->span, "fixed index %d of the spec", ax->as.fixed);
        *out = shape_fresh_dim(e->solver, o);
        shape_dim_at_least(e->solver, *out, (uint32_t)ax->as.fixed + 1, o);
        return true;
    }
    case SPEC_AXIS_AFFINE:
        if (sv->result && ax->as.affine.has_kernel && !ax->as.affine.merged) {
            diag_error(ax->span, "an affine axis with a kernel may only be written in an operand slot, "
                       "not in the result (a strided axis such as 2*i+1 may be, and a merged axis (g, o))");
            return false;
        }
        *out = spec_affine(e, sv, ax);
        return true;
    case SPEC_AXIS_CONCAT: *out = spec_concat(e, sv, ax); return true;
    }
    return false;
}

static bool spec_row(Elab *e, SpecVars *sv, const SpecRow *row, OriginId o, Row *out) {
    uint32_t n = row->leading_count + row->trailing_count;
    Dim *dims = arena_alloc(e->arena, (n ? n : 1) * sizeof *dims);
    for (uint32_t i = 0; i < row->leading_count; i++)
        if (!spec_axis(e, sv, &row->leading[i], &dims[i])) return false;
    for (uint32_t i = 0; i < row->trailing_count; i++)
        if (!spec_axis(e, sv, &row->trailing[i], &dims[row->leading_count + i])) return false;
    uint32_t var = row->row_var.kind == SPEC_ROWVAR_NONE ? 0 : spec_row_var(e, sv, row);
    *out = shape_row(e->solver, dims, row->leading_count, var, dims + row->leading_count,
                     row->trailing_count, o);
    return true;
}

static bool spec_slot(Elab *e, SpecVars *sv, const SpecSlot *slot, Shape *out, const char *what) {
    for (int k = 0; k < ROW_KINDS; k++) {
        OriginId o = origin(e, slot->rows[k].omitted ? slot->span : slot->rows[k].span,
                            "%s of the spec (%s axes%s)", what, logic_row_names[k],
                            !slot->rows[k].omitted ? ""
                            : k == ROW_BATCH       ? ", not written: none; batch axes go before '|'"
                            : k == ROW_INPUT       ? ", not written: none; input axes go before '->'"
                                                   : ", not written: none");
        if (!spec_row(e, sv, &slot->rows[k], o, &out->rows[k])) return false;
    }
    return true;
}

static void emit_spec_slots(Elab *e, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                            const Node *captures, Span span, const char *op);

/* ---- Affine and strided axes: a copy of the spec per application -------------------------- */

static bool needs_copy(SpecAxisKind k) { return k == SPEC_AXIS_AFFINE || k == SPEC_AXIS_CONCAT; }

static bool spec_has_affine_row(const SpecRow *row) {
    for (uint32_t i = 0; i < row->leading_count; i++)
        if (needs_copy(row->leading[i].kind)) return true;
    for (uint32_t i = 0; i < row->trailing_count; i++)
        if (needs_copy(row->trailing[i].kind)) return true;
    return false;
}

static bool spec_has_affine_slot(const SpecSlot *slot) {
    for (int k = 0; k < SPEC_ROW_KINDS; k++)
        if (spec_has_affine_row(&slot->rows[k])) return true;
    return false;
}

/* A stride or dilation as a number: written, or the name of an integer value in `env`. */
static bool resolve_coeff(Elab *e, Env *env, SpecCoeff *c, const char *role) {
    if (c->kind == SPEC_COEFF_INT) return true;
    Value *v = env ? lookup(e, env, c->as.name) : NULL;
    if (!v) {
        diag_error(c->span, "the %s '%s' is not defined here: it must name an integer value in scope", role,
                   c->as.name);
        return false;
    }
    if (v->kind != V_INT || v->as.i < 1 || v->as.i > INT32_MAX) {
        diag_error(c->span, "the %s '%s' must be a positive integer, but it is %s", role, c->as.name,
                   v->kind == V_INT ? arena_printf(e->arena, "%lld", (long long)v->as.i) : kind_noun(v));
        return false;
    }
    c->kind = SPEC_COEFF_INT;
    c->as.value = (int32_t)v->as.i;
    return true;
}

static bool resolve_axes(Elab *e, Env *env, SpecAxis **axes, uint32_t count) {
    if (!count) return true;
    SpecAxis *copy = arena_alloc(e->arena, count * sizeof *copy);
    memcpy(copy, *axes, count * sizeof *copy);
    *axes = copy;
    for (uint32_t i = 0; i < count; i++) {
        if (copy[i].kind == SPEC_AXIS_CONCAT) { /* its pieces get this application's sizes */
            SpecPiece *pieces = arena_alloc(e->arena, copy[i].as.concat.count * sizeof *pieces);
            memcpy(pieces, copy[i].as.concat.pieces, copy[i].as.concat.count * sizeof *pieces);
            copy[i].as.concat.pieces = pieces;
        }
        if (copy[i].kind != SPEC_AXIS_AFFINE || copy[i].as.affine.merged) continue;
        SpecAffine *a = &copy[i].as.affine;
        if (!resolve_coeff(e, env, &a->stride, "stride")) return false;
        if (a->has_kernel && !resolve_coeff(e, env, &a->dilation, "dilation")) return false;
        if (a->offset >= a->stride.as.value) {
            diag_error(a->offset_span, "the offset %d is not below the stride %d", a->offset, a->stride.as.value);
            return false;
        }
    }
    return true;
}

/* The spec of one application: its affine axes copied with the strides and dilations
 * resolved to numbers, so that projection inference reads them and the padding the shape
 * solver settles can be written into them, and its concatenations copied to receive their
 * pieces' sizes.  A spec with neither is shared. */
static const Spec *spec_for_application(Elab *e, Env *env, const Spec *spec) {
    bool any = spec_has_affine_slot(&spec->lhs);
    for (uint32_t i = 0; i < spec->rhs_count; i++) any = any || spec_has_affine_slot(&spec->rhs[i]);
    if (!any) return spec;
    Spec *copy = arena_alloc(e->arena, sizeof *copy);
    *copy = *spec;
    copy->rhs = arena_alloc(e->arena, spec->rhs_count * sizeof *copy->rhs);
    memcpy(copy->rhs, spec->rhs, spec->rhs_count * sizeof *copy->rhs);
    for (uint32_t i = 0; i <= spec->rhs_count; i++) {
        SpecSlot *slot = i < spec->rhs_count ? &copy->rhs[i] : &copy->lhs;
        for (int k = 0; k < SPEC_ROW_KINDS; k++) {
            SpecRow *row = &slot->rows[k];
            if (!resolve_axes(e, env, &row->leading, row->leading_count)) return NULL;
            if (!resolve_axes(e, env, &row->trailing, row->trailing_count)) return NULL;
        }
    }
    return copy;
}

/* An affine or strided axis: a fresh size for the operand's axis, tied to its labels by a
 * window constraint (shape.h); the padding it ends with is written back after closing. */
static Dim spec_affine(Elab *e, SpecVars *sv, const SpecAxis *ax) {
    SpecAffine *a = (SpecAffine *)&ax->as.affine; /* this application's copy */
    /* Named as written (its offset too: '2*i+1'), blanks and all. */
    const char *text = source_get(ax->span.file)->text + ax->span.start;
    int len = (int)(ax->span.end - ax->span.start);
    OriginId o = origin(e, ax->span, "%s axis '%.*s' of the spec",
                        a->merged ? "merged" : a->has_kernel ? "affine" : "strided", len, text);
    Dim input = shape_fresh_dim(e->solver, o);
    Dim over = spec_label(e, sv, a->over.name, a->over.span);
    Dim kernel = a->has_kernel ? spec_label(e, sv, a->kernel.name, a->kernel.span) : input;
    Window w = {.stride = (uint32_t)a->stride.as.value,
                .dilation = a->has_kernel ? (uint32_t)a->dilation.as.value : 1,
                .offset = (uint32_t)a->offset,
                .has_kernel = a->has_kernel,
                .padding = a->padding == SPEC_PAD_SAME    ? WINDOW_PAD_SAME
                           : a->padding == SPEC_PAD_VALID ? WINDOW_PAD_VALID
                                                          : WINDOW_PAD_INFERRED,
                .merge = a->merged};
    ProgramWindow pw = {a, ax->span, a->padding == SPEC_PAD_UNSPECIFIED && a->has_kernel,
                        shape_dim_window(e->solver, input, over, kernel, w, o)};
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->windows, p->window_count, p->window_cap, pw);
    return input;
}

/* A concatenated axis: a fresh size for the axis, the sum of its pieces' (shape.h); the
 * pieces' sizes are written back after closing. */
static Dim spec_concat(Elab *e, SpecVars *sv, const SpecAxis *ax) {
    uint32_t n = ax->as.concat.count;
    OriginId o = origin(e, ax->span, "concatenated axis '%s' of the spec",
                        arena_printf(e->arena, "%.*s", (int)(ax->span.end - ax->span.start),
                                     source_get(ax->span.file)->text + ax->span.start));
    Dim total = shape_fresh_dim(e->solver, o);
    Dim *parts = arena_alloc(e->arena, n * sizeof *parts);
    for (uint32_t i = 0; i < n; i++) {
        const SpecPiece *piece = &ax->as.concat.pieces[i];
        parts[i] = piece->kind == SPEC_PIECE_LABEL
                       ? spec_label(e, sv, piece->as.label, piece->span)
                       : dim_ground((uint32_t)piece->as.size, BASIS_DEFAULT,
                                    origin(e, piece->span, "the fixed component %d of the spec", piece->as.size));
    }
    ProgramConcat pc = {(SpecPiece *)ax->as.concat.pieces, n, shape_dim_concat(e->solver, total, parts, n, o)};
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->concats, p->concat_count, p->concat_cap, pc);
    return total;
}

/* After closing: every affine axis takes the padding its window settled (a merged axis its
 * stride, the inner size), every concatenation piece its size. */
void settle_paddings(Elab *e) {
    for (uint32_t i = 0; i < e->program->concat_count; i++) {
        ProgramConcat *pc = &e->program->concats[i];
        for (uint32_t j = 0; j < pc->count; j++)
            pc->pieces[j].inferred_size = shape_concat_part_size(e->solver, pc->handle, j);
    }
    for (uint32_t i = 0; i < e->program->window_count; i++) {
        ProgramWindow *pw = &e->program->windows[i];
        WindowPadding pad = shape_window_padding(e->solver, pw->handle);
        if (pw->affine->has_kernel)
            pw->affine->padding = pad == WINDOW_PAD_SAME ? SPEC_PAD_SAME : SPEC_PAD_VALID;
        shape_window_sizes(e->solver, pw->handle, &pw->affine->over_size, &pw->affine->kernel_size);
        if (pw->affine->merged) pw->affine->stride.as.value = (int32_t)pw->affine->kernel_size;
    }
}

/* The spec the tensor keeps (this application's copy when it has affine axes), or NULL. */
static const Spec *emit_spec(Elab *e, Env *env, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                             const Node *captures, Span span, const char *op) {
    if (spec->rhs_count != n) {
        bool written_here = spec->span.file == span.file && spec->span.start >= span.start && spec->span.end <= span.end;
        if (written_here) {
            diag_error(spec->span, "this spec has %u operand slot%s, but '%s' takes %u operand%s",
                       spec->rhs_count, spec->rhs_count == 1 ? "" : "s", op, n, n == 1 ? "" : "s");
        } else { /* an operator's own spec (a rest operand: as many operands as the application gives) */
            diag_error(span, "this application gives '%s' %u operand%s, but its spec has %u operand slot%s", op, n,
                       n == 1 ? "" : "s", spec->rhs_count, spec->rhs_count == 1 ? "" : "s");
            diag_note(spec->span, "the spec of '%s'", op);
        }
        return spec;
    }
    const Spec *applied = spec_for_application(e, env, spec);
    if (!applied) return spec;
    shape_set_contracting(e->solver, true);
    emit_spec_slots(e, r, ops, n, applied, captures, span, op);
    shape_set_contracting(e->solver, false);
    return applied;
}

/* The labelled axes of a slot, in the order written (at most `max`); their count. */
static uint32_t slot_labels(const SpecSlot *slot, const SpecAxis **out, uint32_t max) {
    uint32_t count = 0;
    for (int k = 0; k < SPEC_ROW_KINDS; k++) {
        const SpecRow *row = &slot->rows[k];
        for (int part = 0; part < 2; part++) {
            const SpecAxis *axes = part ? row->trailing : row->leading;
            uint32_t n = part ? row->trailing_count : row->leading_count;
            for (uint32_t i = 0; i < n && count < max; i++)
                if (axes[i].kind == SPEC_AXIS_LABEL) out[count++] = &axes[i];
        }
    }
    return count;
}

/* The slots' labels seen so far in one spec, each with the slot it was first written in, and
 * the rows of theirs that have a row variable ("..." is one per row kind, "..name.." one per
 * name). */
typedef struct SeenLabels {
    const SpecAxis *axes[64];
    char slots[64][32];
    uint32_t count;
    const SpecRow *open_rows[64];
    uint32_t open_count;
} SeenLabels;

/* Whether the slot has a row variable an earlier slot has too (a clash may then be in its axes). */
static bool shares_row_var(const SpecSlot *slot, const SeenLabels *seen) {
    for (int k = 0; k < SPEC_ROW_KINDS; k++) {
        const SpecRow *row = &slot->rows[k];
        if (row->row_var.kind == SPEC_ROWVAR_NONE) continue;
        for (uint32_t j = 0; j < seen->open_count; j++) {
            const SpecRow *other = seen->open_rows[j];
            bool same = row->row_var.kind == SPEC_ROWVAR_NAMED
                            ? other->row_var.kind == SPEC_ROWVAR_NAMED &&
                                  strcmp(other->row_var.name, row->row_var.name) == 0
                            : other->row_var.kind == SPEC_ROWVAR_DEFAULT && other->kind == row->kind;
            if (same) return true;
        }
    }
    return false;
}

/* A label written twice in one slot ("a, a"; "i | i") makes its two axes one (a diagonal), and a
 * label written in an earlier slot too (the "j" of "i, j; j, k") names one axis in both: a clash
 * of sizes between them gets a note at the label here, which the sides' origins (the operands'
 * own sizes) would not show.  The slot's labels are then added to `seen`. */
static void note_label_ties(Elab *e, const SpecSlot *slot, const char *what, SeenLabels *seen) {
    const SpecAxis *labels[64];
    uint32_t count = slot_labels(slot, labels, 64);
    char text[256];
    text[0] = '\0';
    const SpecAxis *at = NULL;
    for (uint32_t i = 0; i < count && !at; i++)
        for (uint32_t j = 0; j < i && !at; j++)
            if (strcmp(labels[j]->as.label, labels[i]->as.label) == 0) {
                snprintf(text, sizeof text, "the label '%s' is written twice in the slot of %s: its two axes are one "
                         "axis (a diagonal), of one size", labels[i]->as.label, what);
                at = labels[i];
            }
    /* A label an earlier slot has too, when it is the only tie (one such label, no row variable
     * shared): a clash of this slot's sizes is then at that label. */
    uint32_t shared = 0, first = 0, earlier = 0;
    for (uint32_t i = 0; i < count && !at; i++)
        for (uint32_t j = 0; j < seen->count; j++)
            if (strcmp(seen->axes[j]->as.label, labels[i]->as.label) == 0) {
                if (shared++ == 0) first = i, earlier = j;
                break;
            }
    if (!at && shared == 1 && !shares_row_var(slot, seen)) {
        snprintf(text, sizeof text, "the label '%s' is written in the slots of %s and of %s: it names one axis in both, "
                 "of one size", labels[first]->as.label, seen->slots[earlier], what);
        at = labels[first];
    }
    if (at) shape_set_size_note(e->solver, at->span, text);
    for (uint32_t i = 0; i < count && seen->count < 64; i++) {
        seen->axes[seen->count] = labels[i];
        snprintf(seen->slots[seen->count++], sizeof seen->slots[0], "%s", what);
    }
    for (int k = 0; k < SPEC_ROW_KINDS; k++)
        if (slot->rows[k].row_var.kind != SPEC_ROWVAR_NONE && seen->open_count < 64)
            seen->open_rows[seen->open_count++] = &slot->rows[k];
}

/* "N KIND axis/axes" for each kind of axes with some, joined by "and"; "no axes" for none. */
static void describe_axis_counts(char *out, size_t size, const uint32_t counts[SPEC_ROW_KINDS]) {
    static const char *const kind_names[] = {"batch", "input", "output"};
    int kinds = 0;
    for (int k = 0; k < SPEC_ROW_KINDS; k++) kinds += counts[k] != 0;
    out[0] = '\0';
    for (int k = 0, written = 0; k < SPEC_ROW_KINDS; k++)
        if (counts[k]) {
            const char *joint = written == 0 ? "" : written == kinds - 1 ? " and " : ", ";
            snprintf(out + strlen(out), size - strlen(out), "%s%u %s %s", joint, counts[k], kind_names[k],
                     counts[k] == 1 ? "axis" : "axes");
            written++;
        }
    if (!out[0]) snprintf(out, size, "no axes");
}

/* An operand slot whose rows hold as many axes as the operand's only with its '|' and '->'
 * moved (`"b -> i"` for a tensor of one batch and one output axis): one error saying so, with
 * the slot as it would fit, in place of a rank mismatch in each of two kinds of axes.  Only for
 * an operand whose rows are closed and a slot without row variables, whose axes are then all it
 * has (one dim each); a second slot of the standard library's for the same operand (an
 * embedding's table, checked and then read) adds nothing.  Returns whether it reported, now or
 * before. */
static bool slot_kinds_moved(Elab *e, const SpecSlot *slot, bool multichar, const Tensor *operand, const char *what,
                             const char *op) {
    uint32_t written[SPEC_ROW_KINDS], has[SPEC_ROW_KINDS], total_written = 0, total_has = 0, differ = 0;
    for (int k = 0; k < SPEC_ROW_KINDS; k++) {
        const SpecRow *row = &slot->rows[k];
        if (row->row_var.kind != SPEC_ROWVAR_NONE) return false;
        Row r = shape_resolve_row(e->solver, operand->shape.rows[k]);
        if (r.var) return false;
        written[k] = row->trailing_count;
        has[k] = r.count;
        total_written += written[k];
        total_has += has[k];
        differ += written[k] != has[k];
    }
    if (differ < 2 || total_written != total_has) return false;
    bool library = span_in_stdlib(slot->span);
    for (uint32_t i = 0; library && i < e->kinds_moved_count; i++) /* the library's slots: one error a tensor */
        if (e->kinds_moved[i] == operand) return true;
    if (library) ARENA_PUSH(e->arena, e->kinds_moved, e->kinds_moved_count, e->kinds_moved_cap, operand);
    char gives[160], holds[160];
    describe_axis_counts(gives, sizeof gives, written);
    describe_axis_counts(holds, sizeof holds, has);
    const char *text = source_get(slot->span.file)->text;
    diag_error(slot->span, "einsum '%s': the slot of %s, \"%.*s\", gives it %s, but it has %s (%s)", op, what,
               (int)(slot->span.end - slot->span.start), text + slot->span.start, gives, holds,
               shape_to_string(e->solver, &operand->shape));
    /* The same axes in the order written, split as the operand's rows are. */
    char rows[SPEC_ROW_KINDS][160] = {"", "", ""};
    uint32_t kind = 0, in_kind = 0;
    for (int k = 0; k < SPEC_ROW_KINDS; k++)
        for (uint32_t i = 0; i < slot->rows[k].trailing_count; i++) {
            while (in_kind == has[kind]) kind++, in_kind = 0; /* the totals are equal: kind stays in range */
            Span at = slot->rows[k].trailing[i].span;
            char *out = rows[kind];
            snprintf(out + strlen(out), sizeof rows[0] - strlen(out), "%s%.*s", !in_kind ? "" : multichar ? ", " : " ", /* blanks are ignored in one-letter specs */
                     (int)(at.end - at.start), text + at.start);
            in_kind++;
        }
    if (library && operand->span.file && !span_in_stdlib(operand->span)) {
        /* The library's spec is not the user's to change: the tensor given to it is. */
        diag_note(operand->span, "%s is this tensor, which the standard library needs with %s", what, gives);
        return true;
    }
    char fit[512];
    snprintf(fit, sizeof fit, "%s%s%s%s%s", rows[SPEC_ROW_BATCH], rows[SPEC_ROW_BATCH][0] ? " | " : "",
             rows[SPEC_ROW_INPUT], rows[SPEC_ROW_INPUT][0] ? " -> " : "", rows[SPEC_ROW_OUTPUT]);
    diag_note(slot->span, "batch axes go before '|' and input axes before '->': \"%s\" would fit it", fit);
    return true;
}

static void emit_spec_slots(Elab *e, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                            const Node *captures, Span span, const char *op) {
    SpecVars sv = {0};
    sv.scope = e->scope;
    sv.captures = captures;
    if (captures) sv.scope = current_scope(e);
    SeenLabels seen;
    seen.count = seen.open_count = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t s;
        const SpecSlot *template = logic_spec_template(spec, i, &s);
        Shape slot;
        char what[32];
        if (s) snprintf(what, sizeof what, "operand %u", s);
        else snprintf(what, sizeof what, "the result");
        sv.result = s == 0;
        sv.slot = s;
        sv.operand_count = n;
        if (!spec_slot(e, &sv, template, &slot, what)) return;
        note_label_ties(e, template, what, &seen);
        if (s && slot_kinds_moved(e, template, spec->multichar, ops[s - 1], what, op)) {
            shape_set_size_note(e->solver, (Span){0, 0, 0}, NULL);
            continue;
        }
        if (s) shape_eq(e->solver, &ops[s - 1]->shape, &slot,
                        origin(e, span, "einsum '%s' (operand %u against its slot of the spec)", op, s));
        else shape_eq(e->solver, &r->shape, &slot, origin(e, span, "einsum '%s' (the result against its slot)", op));
        shape_set_size_note(e->solver, (Span){0, 0, 0}, NULL);
    }
    if (captures) {
        for (uint32_t i = 0; i < captures->list.count; i++) {
            const Node *c = captures->list.items[i];
            bool found = false;
            for (uint32_t j = 0; j < sv.label_count && !found; j++)
                found = strlen(sv.labels[j]) == c->len && memcmp(sv.labels[j], c->text, c->len) == 0;
            for (uint32_t j = 0; j < sv.row_count && !found; j++)
                found = strlen(sv.row_names[j]) == c->len && memcmp(sv.row_names[j], c->text, c->len) == 0;
            if (!found) {
                diag_error(c->span, "the spec has no label or row variable '%.*s' to capture", (int)c->len, c->text);
                if (c->len > 4 && memcmp(c->text, "..", 2) == 0 && memcmp(c->text + c->len - 2, "..", 2) == 0)
                    diag_note(c->span, "a row variable is captured by its bare name: \"%.*s\" for %.*s", (int)c->len - 4,
                              c->text + 2, (int)c->len, c->text);
            }
        }
    }
}

/* ---- Operator application ------------------------------------------------------------------ */

uint32_t operator_arity(const Node *op) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_POSITIONAL) n++;
    return n;
}

/* `tn`, `vn`, `gn`: the slot names of the rest operand. */
static bool is_rest_slot_name(const char *name) {
    return strchr("tvg", name[0]) && name[1] == 'n' && name[2] == '\0';
}

uint32_t operator_rest(const Node *op) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_POSITIONAL) {
            k++;
            if (strcmp(op->list.items[i]->name, "tn") == 0) return k;
        }
    return 0;
}

/* Reports the slot names of an operator's code block (t1, v2, g3, …) that name an operand the
 * operator does not have; false when there is one. */
static bool check_slot_names(const Node *n, const char *op_name, uint32_t arity, bool rest) {
    if (!n) return true;
    bool ok = true;
    if (n->kind == NODE_VAR && strchr("tvg", n->name[0]) && n->name[1] >= '1' && n->name[1] <= '9' &&
        n->name[2] == '\0' && (uint32_t)(n->name[1] - '0') > arity) {
        diag_error(n->span, "'%s' names operand %c, but operator '%s' has %u", n->name, n->name[1], op_name, arity);
        ok = false;
    }
    if (n->kind == NODE_VAR && !rest && is_rest_slot_name(n->name)) {
        diag_error(n->span, "'%s' names the rest operand, but operator '%s' has none (its last operand would be "
                   "named tn)", n->name, op_name);
        ok = false;
    }
    ok &= check_slot_names(n->a, op_name, arity, rest);
    ok &= check_slot_names(n->b, op_name, arity, rest);
    ok &= check_slot_names(n->c, op_name, arity, rest);
    for (uint32_t i = 0; i < n->list.count; i++) ok &= check_slot_names(n->list.items[i], op_name, arity, rest);
    return ok;
}

/* Under the compose logic a forward assignment accumulates products over the contracted axes,
 * so its right-hand side must be a semiring product: `*` (with `+`, max or min accumulation),
 * `+` (max-plus, min-plus; or a fused add after a product) or `&&` (with `||`).  `/`, `**`,
 * `-` and the gates are not: contracting them would depend on the order of the sum (OCANNL
 * rejects them too).  The same holds for an assignment of a routine under "@".  `what` names
 * the owner in the message ("operator 'foo'", "this assignment").  Reports each offending
 * assignment; false when there is one. */
bool check_compose_products(const Node *n, const char *what) {
    if (!n) return true;
    if (n->kind == NODE_ASSIGN) {
        const Node *r = n->b;
        if (r && r->kind == NODE_BINOP && strcmp(r->name, "*") != 0 && strcmp(r->name, "+") != 0 &&
            strcmp(r->name, "&&") != 0) {
            diag_error(r->span, "%s has the compose logic \"@\", but '%s' is not a semiring product "
                       "to sum over the contracted axes", what, r->name);
            diag_note(r->span, "a compose accumulates a product of its operands ('*'; '+' for max-plus; '&&'); "
                      "for '%s', use the pointwise logic \".\"", r->name);
            return false;
        }
        return true;
    }
    bool ok = check_compose_products(n->a, what) & check_compose_products(n->b, what);
    for (uint32_t i = 0; i < n->list.count; i++) ok &= check_compose_products(n->list.items[i], what);
    return ok;
}

/* The assignments of an operator's code block, in order (a block is a sequence, possibly
 * commented). */
static void block_assignments(Arena *arena, const Node *n, const Node ***out, uint32_t *count, uint32_t *cap) {
    if (!n) return;
    if (n->kind == NODE_CODE) block_assignments(arena, n->a, out, count, cap);
    else if (n->kind == NODE_COMMENTED) block_assignments(arena, n->b, out, count, cap);
    else if (n->kind == NODE_SEQ)
        for (uint32_t i = 0; i < n->list.count; i++) block_assignments(arena, n->list.items[i], out, count, cap);
    else if (n->kind == NODE_ASSIGN) ARENA_PUSH(arena, *out, *count, *cap, n);
}

/* An operator declared without ~logic: takes its shapes and loops from its blocks (as OCANNL's
 * operations do from their assignments): every assignment of both blocks has a logic of its own,
 * `v =:+ v1 * v2 ~logic:"i, j; j, k => i, k"`, whose operands are the slots the right side
 * reads, in the order written, as in a routine's assignment (§3.7.2).  Such blocks define no
 * local values (`{ x } =: …` would hide which slots an assignment reads).  Reports what does
 * not fit; false then. */
static bool check_block_logics(const Node *op, Span keyword) {
    const char *name = op->name;
    bool ok = true, any = false;
    if (operator_rest(op)) {
        const Node *tn = op->list.items[0];
        for (uint32_t i = 0; i < op->list.count; i++)
            if (strcmp(op->list.items[i]->name, "tn") == 0) tn = op->list.items[i];
        diag_error(tn->span, "operator '%s' has a rest operand (tn) but no ~logic:: the rest's slots (vn, gn) are "
                   "those of one logic over all the operands", name);
        diag_note(keyword, "give the operator a logic: write ~logic: before '=' (an einsum spec with a slot for each "
                  "operand, or \".\")");
        return false;
    }
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_LABELLED) {
            diag_error(op->list.items[i]->span, "'~%s' would be a spec parameter, but operator '%s' has no ~logic: "
                       "to give it to", op->list.items[i]->name, name);
            ok = false;
        }
    const Node *blocks[2] = {op->a, op->b};
    for (int k = 0; k < 2; k++) {
        Arena *scratch = arena_new();
        const Node **as = NULL;
        uint32_t count = 0, cap = 0;
        block_assignments(scratch, blocks[k], &as, &count, &cap);
        for (uint32_t i = 0; i < count; i++) {
            const Node *a = as[i];
            any = true;
            if (a->a->kind == NODE_RECORD) {
                diag_error(a->span, "operator '%s' has no ~logic:, so its blocks define no local values (each "
                           "assignment reads the slots it names)", name);
                ok = false;
            } else if (!a->c) {
                diag_error(a->span, "operator '%s' has no ~logic:, so this assignment needs a logic of its own "
                           "(~logic:\".\", \"@\", \"T\" or an einsum spec)", name);
                diag_note(keyword, "or give the operator one: write ~logic: before '=', with \".\" (pointwise), "
                          "\"@\" (compose), \"T\" (transpose), an einsum spec, or a labelled spec parameter "
                          "(~logic:spec)");
                ok = false;
            } else if (a->c->kind == NODE_STRING && a->c->len == 1 && a->c->text[0] == '@') {
                char what[160];
                snprintf(what, sizeof what, "this assignment of operator '%s'", name);
                ok &= check_compose_products(a, what);
            }
            const Node **reads = NULL;
            uint32_t read_count = 0, read_cap = 0;
            ast_code_reads(scratch, a->b, &reads, &read_count, &read_cap);
            for (uint32_t j = 0; j < read_count; j++) {
                uint32_t slot;
                bool grad;
                if (!ast_slot_name(reads[j]->name, &slot, &grad)) {
                    diag_error(reads[j]->span, "'%s' is not a slot of operator '%s' (v, v1, g, g1, …)",
                               reads[j]->name, name);
                    ok = false;
                }
            }
            if (a->c && a->c->kind == NODE_STRING && a->c->spec && a->c->spec->rhs_count != read_count) {
                diag_error(a->c->spec->span, "this spec has %u operand slot%s, but the right side of the assignment "
                           "reads %u slot%s", a->c->spec->rhs_count, a->c->spec->rhs_count == 1 ? "" : "s",
                           read_count, read_count == 1 ? "" : "s");
                diag_note(a->b->span, "each slot the right side reads, in the order written, fills the next operand "
                          "slot of the spec");
                ok = false;
            }
        }
        arena_free(scratch);
    }
    if (!any) {
        diag_error(keyword, "operator '%s' has no shape logic: write ~logic: before '=', with \".\" (pointwise), "
                   "\"@\" (compose), \"T\" (transpose), an einsum spec, or a labelled spec parameter (~logic:spec)",
                   name);
        ok = false;
    }
    return ok;
}

/* A backward block adds into its operands' gradients (g1 =+ …): the operand's other uses add
 * theirs into the same gradient, before or after, so an assignment that resets one (=:, =:+) or
 * accumulates it otherwise would drop or change those.  True when every one adds. */
static bool check_backward_accumulates(const Node *op) {
    if (!op->b) return true;
    Arena *scratch = arena_new();
    const Node **as = NULL;
    uint32_t count = 0, cap = 0;
    block_assignments(scratch, op->b, &as, &count, &cap);
    bool ok = true;
    for (uint32_t i = 0; i < count; i++) {
        const Node *a = as[i];
        uint32_t slot;
        bool grad;
        if (a->a->kind != NODE_VAR) continue;
        bool operand_grad = strcmp(a->a->name, "gn") == 0 || (ast_slot_name(a->a->name, &slot, &grad) && grad && slot > 0);
        if (!operand_grad || strcmp(a->name, "=+") == 0 || strcmp(a->name, "=-") == 0) continue;
        diag_error(a->span, "'%s %s' in a backward block: an operand's gradient is added into ('%s =+ …' or '%s =- …'), "
                   "since the operand's other uses add theirs to it too", a->a->name, a->name, a->a->name, a->a->name);
        ok = false;
    }
    arena_free(scratch);
    return ok;
}

/* What each block writes, where the operator is declared (as its application would find):
 * the forward block its result v, the backward block its operands' gradients g1, g2, … (or gn),
 * neither an operand, nor g, which the backward block reads.  True when every target fits. */
static bool check_block_targets(const Node *op) {
    bool ok = true;
    const Node *blocks[2] = {op->a, op->b};
    for (int k = 0; k < 2; k++) {
        if (!blocks[k]) continue;
        Arena *scratch = arena_new();
        const Node **as = NULL;
        uint32_t count = 0, cap = 0;
        block_assignments(scratch, blocks[k], &as, &count, &cap);
        for (uint32_t i = 0; i < count; i++) {
            const Node *lhs = as[i]->a;
            uint32_t slot = 0;
            bool grad = false;
            if (lhs->kind != NODE_VAR) continue;
            bool rest = strcmp(lhs->name, "vn") == 0 || strcmp(lhs->name, "gn") == 0 || strcmp(lhs->name, "tn") == 0;
            if (rest) grad = lhs->name[0] == 'g', slot = 1;
            else if (!ast_slot_name(lhs->name, &slot, &grad)) continue;
            if (k == 0 && (grad || slot > 0 || lhs->name[0] == 't')) {
                diag_error(lhs->span, "an operator's forward block writes its result (v), not %s",
                           grad ? "a gradient" : "an operand");
                ok = false;
            } else if (k == 1 && (!grad || slot == 0)) {
                diag_error(lhs->span, "an operator's backward block writes its operands' gradients (g1, g2, …), not %s",
                           grad ? "g, the result's gradient, which it reads" : "a value");
                ok = false;
            }
        }
        arena_free(scratch);
    }
    return ok;
}

/* Checks an operator declaration (docs/language.md §3.2.4) before anything applies it: a shape
 * logic is required, the parameters are operands (t1 t2 …) and labelled spec parameters, each
 * named once, a fixed logic fits the number of operands, and the code blocks name no operand
 * beyond them.  Reports every problem; true when there is none. */
/* The names the expression n reads (not a primitive's name) that are neither slots (v, v1, g2,
 * tn, …: check_slot_names bounds them) nor one of the `nlocals` locals defined before it. */
static bool check_read_names(const Node *n, const char *const *locals, uint32_t nlocals) {
    if (!n) return true;
    bool ok = true;
    if (n->kind == NODE_VAR) {
        uint32_t slot;
        bool grad, local = false;
        for (uint32_t i = 0; i < nlocals && !local; i++) local = strcmp(locals[i], n->name) == 0;
        if (!local && !ast_slot_name(n->name, &slot, &grad) && !is_rest_slot_name(n->name)) {
            diag_error(n->span, "'%s' is neither a slot of the operator (v, v1, …, g, g1, …) nor a local value defined "
                       "before it in this block: an operator's blocks read their slots, their own locals ({ name } =: …) "
                       "and numbers, not values from outside (pass such a value as an operand)", n->name);
            ok = false;
        }
        return ok;
    }
    /* A function applied must be a primitive of code (what applying the operator would report,
     * ir/assign.c), with the closest one's name. */
    bool swapped, binary = n->kind == NODE_BINOP && strcmp(n->name, "@|") != 0;
    const Node *applied = n->kind == NODE_APP && n->a && n->a->kind == NODE_VAR ? n->a : binary ? n : NULL;
    if (applied && (binary ? scalar_op_code(n->name, true, &swapped) < 0
                           : scalar_op_lookup(applied->name, false) < 0 && !scalar_code_builtin(applied->name))) {
        report_not_code_primitive(applied->name, binary, applied->span);
        ok = false;
    }
    if (n->kind != NODE_APP || !n->a || n->a->kind != NODE_VAR) ok &= check_read_names(n->a, locals, nlocals);
    ok &= check_read_names(n->b, locals, nlocals);
    ok &= check_read_names(n->c, locals, nlocals);
    for (uint32_t i = 0; i < n->list.count; i++) ok &= check_read_names(n->list.items[i], locals, nlocals);
    return ok;
}

/* The statements of a code block, in order: each assignment reads only slots and the locals
 * defined before it (`{ x } =: …`), and under an operator's own logic carries no ~logic: of its
 * own — what applying the operator would report (ir/assign.c), said at the declaration.  Other
 * statements are left to that check. */
static bool check_block_statements(const Node *n, bool operator_logic, const char **locals, uint32_t *nlocals,
                                   uint32_t cap) {
    if (!n) return true;
    bool ok = true;
    switch (n->kind) {
    case NODE_CODE: return check_block_statements(n->a, operator_logic, locals, nlocals, cap);
    case NODE_COMMENTED: return check_block_statements(n->b, operator_logic, locals, nlocals, cap);
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++)
            ok &= check_block_statements(n->list.items[i], operator_logic, locals, nlocals, cap);
        return ok;
    case NODE_ASSIGN:
        if (n->c && operator_logic) {
            diag_error(n->c->span, "an assignment in an operator's block uses the operator's logic; "
                       "'~logic:' is not allowed here");
            ok = false;
        }
        ok &= check_read_names(n->b, locals, *nlocals);
        if (n->a && n->a->kind == NODE_RECORD) { /* a local: `{ name } =: expression` (ir/assign.c block_local) */
            const Node *def = n->a->list.count ? n->a->list.items[0] : NULL;
            uint32_t slot;
            bool grad;
            if (n->a->list.count != 1 || def->a || strcmp(n->name, "=:") != 0 || n->c) {
                diag_error(n->span, "a local definition in an operator's block is written '{ name } =: expression'");
                ok = false;
            } else if (ast_slot_name(def->name, &slot, &grad)) {
                diag_error(def->span, "'%s' is a slot name; a local definition needs another name", def->name);
                ok = false;
            }
            if (def && *nlocals < cap) locals[(*nlocals)++] = def->name; /* no second error at its reads */
        }
        return ok;
    default: return true;
    }
}

static bool check_block_names(const Node *op) {
    const char *locals[256];
    bool ok = true;
    for (int b = 0; b < 2; b++) {
        uint32_t nlocals = 0; /* each block's locals are its own */
        ok &= check_block_statements(b ? op->b : op->a, op->c != NULL, locals, &nlocals, 256);
    }
    return ok;
}

/* Operators that are syntax of their own, evaluated before any declaration is looked up: a
 * declaration under one of these names would be accepted and never used. */
static const char *const FIXED_SYNTAX[][2] = {
    {"!.", "makes a scalar tensor from a number"}, {"!..", "makes a scalar tensor from a number"},
    {"!@", "reads an index symbol"},              {"@|", "slices a tensor by an index symbol"},
    {"&&", "is the boolean 'and' of compile-time values"}, {"||", "is the boolean 'or' of compile-time values"},
};

bool check_operator(const Node *op) {
    const char *name = op->name;
    for (size_t i = 0; i < sizeof FIXED_SYNTAX / sizeof *FIXED_SYNTAX; i++)
        if (strcmp(name, FIXED_SYNTAX[i][0]) == 0) {
            diag_error(op->span, "'%s' cannot be declared as an operator: it is fixed syntax, which %s "
                       "(docs/language.md §2.10); choose another name", name, FIXED_SYNTAX[i][1]);
            return false;
        }
    bool ok = check_backward_accumulates(op) & check_block_targets(op) & check_block_names(op);
    for (uint32_t i = 0; i < op->list.count; i++) {
        const Node *p = op->list.items[i];
        if (p->flag != PARAM_POSITIONAL && p->flag != PARAM_LABELLED) {
            diag_error(p->span, "an operator's parameters are its tensor operands (t1 t2 …) and labelled spec "
                       "parameters (~spec); '%s' is neither", p->flag == PARAM_WILDCARD ? "_" : p->name);
            ok = false;
            continue;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(op->list.items[j]->name, p->name) == 0) {
                diag_error(p->span, "operator '%s' has two parameters named '%s'", name, p->name);
                diag_note(op->list.items[j]->span, "the first is here");
                ok = false;
                break;
            }
    }
    uint32_t arity = operator_arity(op);
    uint32_t rest = operator_rest(op);
    Span keyword = span_make(op->span.file, op->span.start, op->span.start + (uint32_t)strlen("operator"));
    if (rest && rest != arity) {
        for (uint32_t i = 0; i < op->list.count; i++)
            if (op->list.items[i]->flag == PARAM_POSITIONAL && strcmp(op->list.items[i]->name, "tn") == 0)
                diag_error(op->list.items[i]->span, "the rest operand 'tn' of operator '%s' must be its last operand",
                           name);
        ok = false;
    }
    if (arity && !(check_slot_names(op->a, name, arity, rest != 0) & check_slot_names(op->b, name, arity, rest != 0)))
        ok = false;
    if (arity == 0) {
        diag_error(keyword, "operator '%s' has no tensor operand: name its operands after the operator's name, "
                   "as in 'operator %s t1 ~logic:\".\" = …'", name, name);
        ok = false;
    }
    const Node *logic = op->c;
    if (!logic) return check_block_logics(op, keyword) && ok;
    for (uint32_t i = 0; i < op->list.count; i++) {
        const Node *p = op->list.items[i];
        if (p->flag == PARAM_LABELLED && (logic->kind != NODE_VAR || strcmp(p->name, logic->name) != 0)) {
            diag_error(p->span, "'~%s' is not the spec parameter of operator '%s' (that would be ~logic:%s); "
                       "an operator's other parameters are its tensor operands", p->name, name, p->name);
            ok = false;
        }
    }
    if (logic->kind == NODE_VAR && !isalpha((unsigned char)name[0]) && name[0] != '_' && !ast_einsum_arity(name)) {
        diag_error(logic->span, "operator '%s' is infix, so it cannot take a spec: only the einsum operators (+*, +++, "
                   "@^+, ++, @^^, ++^) carry one after them", name);
        diag_note(keyword, "give it a name applied as a function (operator my_op t1 t2 ~spec ~logic:spec, used as "
                  "my_op ~spec:\"…\" a b), or a fixed ~logic:");
        ok = false;
    }
    if (logic->kind == NODE_VAR) {
        bool named = false;
        for (uint32_t i = 0; i < op->list.count; i++)
            named |= op->list.items[i]->flag == PARAM_LABELLED && strcmp(op->list.items[i]->name, logic->name) == 0;
        if (!named) {
            diag_error(logic->span, "'~logic:%s' names no labelled parameter ~%s of the operator", logic->name,
                       logic->name);
            ok = false;
        } else if (strcmp(logic->name, "spec") != 0) {
            diag_error(logic->span, "an operator's spec parameter is named spec (~spec ~logic:spec): a string written "
                       "as ~spec:\"…\" at a use is read as a spec with the program, and no other label is");
            ok = false;
        }
    } else if (logic->kind != NODE_STRING || (!logic->spec && logic->len != 1)) {
        ok = false; /* the parser reported it */
    } else if (logic->spec) {
        if (arity && logic->spec->rhs_count != arity && !(rest && logic->spec->rhs_count > arity)) {
            diag_error(logic->spec->span, "this spec has %u operand slot%s, but operator '%s' has %u operand%s",
                       logic->spec->rhs_count, logic->spec->rhs_count == 1 ? "" : "s", name, arity,
                       arity == 1 ? "" : "s");
            ok = false;
        }
    } else if (arity && ((logic->text[0] == '@' && arity != 2 && arity != 3) || (logic->text[0] == 'T' && arity != 1))) {
        diag_error(logic->span, "logic \"%c\" needs %s, but operator '%s' has %u", logic->text[0],
                   logic->text[0] == '@' ? "two or three operands" : "one operand", name, arity);
        ok = false;
    } else if (logic->text[0] == '@') {
        char what[160];
        snprintf(what, sizeof what, "operator '%s'", name);
        ok &= check_compose_products(op->a, what);
    }
    return ok;
}

/* The shape constraints of one operation under its logic: result `r`, operands `ts` (which
 * fit the logic; a spec's slot count is checked here).  Operator applications and the
 * assignments of routines both come here, so an assignment `c =:+ a * b ~logic:"@"` relates
 * its tensors as `a * b` relates its operands and result.  Returns the spec the operation
 * keeps (this application's copy, emit_spec), NULL for the fixed logics. */
const Spec *emit_logic(Elab *e, Env *env, Logic logic, const Spec *spec, Tensor *r, Tensor **ts, uint32_t n,
                       const Node *captures, Span span, const char *op) {
    if (logic == LOGIC_SPEC) return emit_spec(e, env, r, ts, n, spec, captures, span, op);
    Shape *few[8], **slots = n < 8 ? few : arena_alloc(e->arena, (n + 1) * sizeof *slots);
    slots[0] = &r->shape;
    for (uint32_t i = 0; i < n; i++) slots[i + 1] = &ts[i]->shape;
    char what[160];
    snprintf(what, sizeof what, "'%s'", op);
    emit_relations(e, logic, slots, n + 1, ROW_KINDS, NULL, span, what);
    return NULL;
}

/* The shape constraints of an operator without ~logic: (check_block_logics): those of each
 * assignment of its forward block under that assignment's own logic, the left side (`v`) as the
 * result and the slots read as operands, in the order written.  The backward block adds none:
 * its projections are derived from the closed shapes (assign.c), which these constraints
 * settle. */
static bool emit_block_logics(Elab *e, Env *env, const Node *op, Tensor *r, Tensor **ops, Span span) {
    const Node **as = NULL;
    uint32_t count = 0, cap = 0;
    block_assignments(e->arena, op->a, &as, &count, &cap);
    for (uint32_t i = 0; i < count; i++) {
        Logic logic;
        const Spec *spec;
        if (!code_logic(as[i]->c, &logic, &spec)) return false;
        const Node **reads = NULL;
        uint32_t read_count = 0, read_cap = 0;
        ast_code_reads(e->arena, as[i]->b, &reads, &read_count, &read_cap);
        Tensor **ts = arena_alloc(e->arena, (read_count ? read_count : 1) * sizeof *ts);
        for (uint32_t j = 0; j < read_count; j++) {
            uint32_t slot;
            bool grad;
            ast_slot_name(reads[j]->name, &slot, &grad);
            ts[j] = slot == 0 ? r : ops[slot - 1];
        }
        const char *needs = logic_operands_needed(logic, read_count);
        if (needs) {
            diag_error(as[i]->c->span, "logic \"%c\" needs %s, but the right side of the assignment reads %u slot%s",
                       as[i]->c->text[0], needs, read_count, read_count == 1 ? "" : "s");
            diag_note(span, "operator '%s' is applied here", op->name);
            return false;
        }
        emit_logic(e, env, logic, spec, r, ts, read_count, NULL, span, op->name);
    }
    return true;
}

/* A parameter among `ts` that an operator read first in another of the user's applications
 * (a layer made once and applied twice): the constraints of this application say so when they
 * fail, at that application, since its sizes are the parameter's.  Marks each parameter read. */
static void note_shared_parameters(Elab *e, Tensor **ts, uint32_t n) {
    const Tensor *shared = NULL;
    for (uint32_t i = 0; i < n; i++) {
        Tensor *t = ts[i];
        if (t->kind != TENSOR_PARAM) continue;
        if (!t->read_by_operator) {
            t->read_by_operator = true;
            t->first_call = e->user_call;
            t->first_call_name = e->user_call_name;
        } else if (!shared && t->first_call.file && !span_equal(t->first_call, e->user_call)) {
            shared = t;
        }
    }
    if (!shared) {
        shape_set_note(e->solver, (Span){0, 0, 0}, NULL);
        return;
    }
    const char *name = shared->shown ? shared->shown : shared->name;
    char text[512];
    snprintf(text, sizeof text, "this earlier application of '%s' set the sizes this one must meet: a layer made once "
             "and applied twice shares its parameters%s%s%s", shared->first_call_name ? shared->first_call_name :
             "a function", name ? " ('" : "", name ? name : "", name ? "' among them)" : "");
    shape_set_note(e->solver, shared->first_call, text);
}

/* Apply operator declaration `op` to tensor operands; `spec` for ~logic:spec operators. */
Value *apply_operator(Elab *e, Env *env, const Node *op, Value **operands, uint32_t n, const Spec *spec,
                      const Node *captures, Span span) {
    const char *name = op->name;
    uint32_t arity = operator_arity(op);
    bool rest = operator_rest(op) != 0;
    if (rest ? n < arity : n != arity)
        return fail(span, "'%s' takes %s%u tensor operand%s, but %u %s given", name, rest ? "at least " : "", arity,
                    arity == 1 ? "" : "s", n, n == 1 ? "is" : "are");
    Tensor **ts = arena_alloc(e->arena, (n ? n : 1) * sizeof *ts);
    for (uint32_t i = 0; i < n; i++) {
        char what[128];
        snprintf(what, sizeof what, "'%s'", name);
        ts[i] = as_tensor(e, operands[i], span, what);
        if (!ts[i]) return &error_value;
    }
    const Node *logic = op->c;
    Tensor *r = new_tensor(e, TENSOR_OP, span);
    r->op = op;
    r->op_name = name;
    r->operands = ts;
    r->operand_count = n;
    r->shape = shape_fresh(e->solver, origin(e, span, "the result of '%s'", name));
    if (!logic) {
        r->logic = LOGIC_NONE;
        note_shared_parameters(e, ts, n);
        bool ok = emit_block_logics(e, env, op, r, ts, span);
        shape_set_note(e->solver, (Span){0, 0, 0}, NULL);
        return ok ? tensor_value(e, r) : &error_value;
    }
    if (logic->kind == NODE_VAR) {
        if (!spec && (isalpha((unsigned char)name[0]) || name[0] == '_')) /* applied as a function */
            return fail(span, "'%s' needs an einsum spec: give it as its labelled argument, as in %s ~%s:\"…\" "
                        "with one operand slot for each of its %u operand%s", name, name, logic->name, n, n == 1 ? "" : "s");
        if (!spec) return fail(span, "'%s' needs an einsum spec: write it after the operator, as in "
                               "a %s \"i, j; j, k => i, k\" b", name, name);
        r->logic = LOGIC_SPEC;
    } else if (logic->spec) {
        r->logic = LOGIC_SPEC;
        spec = logic->spec;
    } else {
        r->logic = logic_named(logic->len ? logic->text[0] : '.');
        const char *needs = logic_operands_needed(r->logic, n);
        if (needs) return fail(logic->span, "logic \"%c\" needs %s", logic->text[0], needs);
    }
    note_shared_parameters(e, ts, n);
    bool parameter_operand = false;
    for (uint32_t i = 0; i < n; i++) parameter_operand |= ts[i]->kind == TENSOR_PARAM;
    shape_set_product_meant(e->solver, parameter_operand);
    r->spec = emit_logic(e, env, r->logic, spec, r, ts, n, captures, span, name);
    shape_set_product_meant(e->solver, false);
    shape_set_note(e->solver, (Span){0, 0, 0}, NULL);
    return tensor_value(e, r);
}

Value *lookup_operator(Elab *e, Env *env, const char *name) {
    Value *v = lookup(e, env, name);
    return v && v->kind == V_OPERATOR ? v : NULL;
}

/* ---- Literals ------------------------------------------------------------------------------ */

static RowKind container_row(NodeKind kind) {
    return kind == NODE_ARRAY ? ROW_BATCH : kind == NODE_TUPLE ? ROW_INPUT : ROW_OUTPUT;
}

static const char *container_noun(NodeKind kind) {
    return kind == NODE_ARRAY ? "array" : kind == NODE_TUPLE ? "tuple" : "list";
}

bool is_claim_free_annot(const Node *n) { return n->kind == NODE_ANNOT && strcmp(n->name, "_") == 0; }

/* A literal element: numbers stay numbers, containers become tensors. */
static Value *eval_element(Elab *e, const Node *n, Env *env) {
    if (n->kind == NODE_LIST || n->kind == NODE_ARRAY || (n->kind == NODE_TUPLE))
        return eval_literal(e, n, env, 0);
    return eval(e, n, env, MODE_TENSOR);
}

Value *eval_literal(Elab *e, const Node *n, Env *env, uint32_t basis) {
    uint32_t count = n->list.count;
    if (count == 0) return fail(n->span, "an empty %s has no shape to give a tensor", container_noun(n->kind));
    Value **items = arena_alloc(e->arena, count * sizeof *items);
    bool numbers = true, tensors = true;
    for (uint32_t i = 0; i < count; i++) {
        items[i] = eval_element(e, n->list.items[i], env);
        if (items[i]->kind == V_ERROR) return &error_value;
        if (!is_number(items[i])) numbers = false;
        if (items[i]->kind != V_TENSOR) tensors = false;
    }
    RowKind kind = container_row(n->kind);
    OriginId o = origin(e, n->span, "this tensor literal (%s axis)", logic_row_names[kind]);
    if (basis == BASIS_CLAIM_FREE && count != 1)
        return fail(n->span, "only a size-1 axis can be marked broadcastable with '(… : _)', but this %s has %u elements",
                    container_noun(n->kind), count);
    Dim axis = basis == BASIS_CLAIM_FREE ? dim_unit(o) : dim_ground(count, basis ? basis : BASIS_DEFAULT, o);
    if (numbers) {
        Tensor *t = new_tensor(e, TENSOR_LITERAL, n->span);
        t->shape = closed_shape(e, n->span, "this tensor literal");
        t->shape.rows[kind] = shape_closed_row(e->solver, &axis, 1, o);
        t->values = arena_alloc(e->arena, count * sizeof *t->values);
        Span *spans = arena_alloc(e->arena, count * sizeof *spans);
        for (uint32_t i = 0; i < count; i++) {
            t->values[i] = number_of(items[i]);
            spans[i] = n->list.items[i]->span;
        }
        t->value_count = count;
        t->value_spans = spans;
        return tensor_value(e, t);
    }
    if (!tensors) {
        for (uint32_t i = 0; i < count; i++)
            if (items[i]->kind != V_TENSOR && !is_number(items[i]))
                return fail(n->list.items[i]->span, "a tensor literal holds numbers or tensors, not %s",
                            kind_noun(items[i]));
        return fail(n->span, "this %s mixes numbers and tensors; write every element as a tensor "
                    "of the same shape", container_noun(n->kind));
    }
    Tensor *t = new_tensor(e, TENSOR_STACK, n->span);
    t->operands = arena_alloc(e->arena, count * sizeof *t->operands);
    t->operand_count = count;
    Tensor *first = items[0]->as.tensor;
    for (uint32_t i = 0; i < count; i++) {
        t->operands[i] = items[i]->as.tensor;
        if (i > 0)
            shape_eq(e->solver, &items[i]->as.tensor->shape, &first->shape,
                     origin(e, n->list.items[i]->span,
                            "element %u of this %s (every element must have the shape of the first)",
                            i + 1, container_noun(n->kind)));
    }
    Shape *slots[2] = {&t->shape, &first->shape};
    define_by_relations(e, LOGIC_STACK, slots, kind, &(PinnedAxis){axis, o, ""});
    return tensor_value(e, t);
}

/* ---- Sizes (`o = [ … ]` fields, `input`) ---------------------------------------------------- */

/* The `?` written for axis `axis` of `count` of row `row` ('b', 'i', 'o') of `tensor`, named for
 * its setter: "x.b" (the row's one axis), "x.o0" (axis 0 of several; a run-time axis is the
 * outermost).  In an inline definition (`follow`) it has no setter: it is whatever run-time size
 * its uses give it. */
Dim runtime_size_dim(Elab *e, Span span, const char *tensor, char row, uint32_t axis, uint32_t count, bool follow) {
    if (follow)
        return shape_runtime_dim(e->solver, origin(e, span, "the run-time size written for '%s' (its uses give it)", tensor),
                                 NULL);
    const char *name = count == 1 ? arena_printf(e->arena, "%s.%c", tensor, row)
                                  : arena_printf(e->arena, "%s.%c%u", tensor, row, axis);
    return shape_runtime_dim(e->solver, origin(e, span, "the run-time size written for '%s'", tensor), name);
}

/* The `?` of a data item's tensor were named after its source ("npy.b"): now after the item. */
void name_runtime_sizes(Elab *e, const Tensor *t, const char *item) {
    for (int k = 0; k < ROW_KINDS; k++)
        for (uint32_t j = 0; j < t->shape.rows[k].count; j++) {
            uint32_t i = shape_runtime_decl_of(e->solver, t->shape.rows[k].dims[j]);
            if (i == UINT32_MAX) continue;
            const char *old;
            OriginId o;
            shape_runtime_decl(e->solver, i, &old, &o);
            shape_runtime_rename(e->solver, i, arena_printf(e->arena, "%s%s", item, strchr(old, '.')));
        }
}

static bool eval_sizes(Elab *e, const Node *n, Env *env, const char *field, const char *tensor, RuntimeSizes runtime,
                       Row *out) {
    if (n->kind != NODE_LIST) {
        diag_error(n->span, "'%s' takes a list of sizes, e.g. %s = [ 16 ]", field, field);
        return false;
    }
    uint32_t count = n->list.count;
    Dim *dims = arena_alloc(e->arena, (count ? count : 1) * sizeof *dims);
    const char *row = field[0] == 'b' ? "batch" : field[0] == 'i' ? "input" : "output";
    for (uint32_t i = 0; i < count; i++) {
        const Node *item = n->list.items[i];
        uint32_t basis = BASIS_DEFAULT;
        if (is_claim_free_annot(item)) {
            basis = BASIS_NONE;
            item = item->a;
        } else if (item->kind == NODE_ANNOT) {
            basis = shape_basis(e->solver, item->name);
            item = item->a;
        }
        Value *v = eval(e, item, env, MODE_VALUE);
        if (v->kind == V_ERROR) return false;
        if (v->kind == V_RUNTIME_SIZE) {
            if (basis != BASIS_DEFAULT) {
                diag_error(n->list.items[i]->span, "a run-time size '?' cannot carry a basis in this version");
                return false;
            }
            dims[i] = runtime_size_dim(e, item->span, tensor, field[0], i, count, runtime == SIZES_FOLLOW);
            continue;
        }
        if (v->kind != V_INT) {
            diag_error(item->span, "a size must be an integer, but this is %s", kind_noun(v));
            return false;
        }
        if (v->as.i < 1 || v->as.i > INT32_MAX) {
            diag_error(item->span, v->as.i < 1 ? "a size must be at least 1, but this is %lld"
                                               : "a size must fit in 32 bits, but this is %lld",
                       (long long)v->as.i);
            return false;
        }
        if (basis == BASIS_NONE && v->as.i != 1) {
            diag_error(item->span, "only a size-1 axis can be marked broadcastable with '(1 : _)', but this is %lld",
                       (long long)v->as.i);
            return false;
        }
        /* A size the standard library writes from a number the user gave it (~dim:8): that
         * number is where the size comes from. */
        bool given = span_in_stdlib(item->span) && v->written.file && !span_in_stdlib(v->written);
        OriginId from = given ? origin(e, v->written, "the number given to '%s' here (the %s size of its parameter '%s')",
                                       e->user_call_name ? e->user_call_name : "the library", row, tensor)
                              : origin(e, item->span, "the %s sizes written for '%s'", row, tensor);
        if (given) shape_origin_given(e->solver, from);
        dims[i] = dim_ground((uint32_t)v->as.i, basis, from);
    }
    *out = shape_closed_row(e->solver, dims, count, origin(e, n->span, "the %s sizes written for '%s'", row, tensor));
    return true;
}

/* Parse the size fields of a record (first field excluded).  given[k] says which rows. */
bool record_sizes(Elab *e, const Node *rec, Env *env, const char *tensor, RuntimeSizes runtime, Row rows[ROW_KINDS],
                  bool given[ROW_KINDS], uint8_t *dtype) {
    for (int k = 0; k < ROW_KINDS; k++) given[k] = false;
    for (uint32_t i = 1; i < rec->list.count; i++) {
        const Node *f = rec->list.items[i];
        int k = strcmp(f->name, "b") == 0 ? ROW_BATCH : strcmp(f->name, "i") == 0 ? ROW_INPUT
              : strcmp(f->name, "o") == 0 ? ROW_OUTPUT : -1;
        if (strcmp(f->name, "dtype") == 0) { /* an input's element type: the caller reads it */
            if (runtime == SIZES_DECLARE) continue;
            Value *v = f->a && dtype ? eval(e, f->a, env, MODE_VALUE) : NULL;
            uint8_t written = TSR_DTYPE_F32;
            if (!dtype || !v) {
                diag_error(f->span, "'%s' takes no element type: an element type is declared on an input, a data "
                           "item, a parameter or a state tensor, and computed tensors take theirs from their "
                           "operands (docs/language.md §3.9)", tensor);
                return false;
            }
            if (!dtype_of_value(v, f->a->span, arena_printf(e->arena, "'%s'", tensor), &written)) return false;
            if (tsr_dtype_integer(written)) {
                diag_error(f->a->span, "'%s' cannot be %s: a parameter or state of code is a number (\"f32\" or "
                           "\"f64\", \"bf16\", \"f16\"), differentiated or updated with numbers", tensor, ir_dtype_word(written));
                return false;
            }
            *dtype = written;
            continue;
        }
        if (k < 0) {
            diag_error(f->span, "unknown field '%s' in the definition of '%s': the sizes are given by "
                       "'b' (batch), 'i' (input) and 'o' (output)", f->name, tensor);
            return false;
        }
        if (given[k]) {
            diag_error(f->span, "field '%s' is given twice", f->name);
            return false;
        }
        if (!f->a) {
            diag_error(f->span, "field '%s' needs a list of sizes, e.g. %s = [ 16 ]", f->name, f->name);
            return false;
        }
        if (!eval_sizes(e, f->a, env, f->name, tensor, runtime, &rows[k])) return false;
        given[k] = true;
    }
    return true;
}
