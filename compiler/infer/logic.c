/* logic.c — the one table of shape logics (see logic.h).
 *
 * What it does: holds, for every logic (pointwise, compose, transpose, slice, stack), the
 * relations between its slots' rows, and walks them for an operation with a given number of
 * slots; for an einsum spec, says which template belongs to which slot.  elaboration (elab/operators.c) emits what the
 * walk yields to the shape solver (⊑ as a row inequality, = as a row equality, a pin as the
 * axis the slice or stack adds), proj.c reads the same walk as projection equations (⊑ by
 * rules 2, 3 and 5, = by rules 1 and 4, a pin as Sol).  A new form of relation is added here
 * and read in those two places; the phrases are the texts of the origins that messages show.
 *
 * Requires: shape.h (row kinds) and spec.h; it keeps no state. */
#include "infer/logic.h"

#include <stddef.h>

const char *const logic_row_names[ROW_KINDS] = {"batch", "input", "output"};

#define EACH LOGIC_EACH_KIND

/* Every operand's rows ⊑ the result's rows of the same kind. */
static const LogicRelation pointwise[] = {
    {.sub = 1, .and_after = true, .sub_kind = EACH, .super = 0, .super_kind = EACH, .phrase = "pointwise",
     .names_kind = true},
};

/* t1.batch, t2.batch ⊑ r.batch; t2.output ⊑ t1.input (the contraction); t2.input ⊑ r.input;
 * t1.output ⊑ r.output; all structural.  A third operand (fused multiply-add) is added to the
 * product: pointwise, not structural. */
static const LogicRelation compose[] = {
    {.sub = 1, .sub_kind = ROW_BATCH, .super = 0, .super_kind = ROW_BATCH, .structural = true, .phrase = "compose",
     .names_kind = true},
    {.sub = 2, .sub_kind = ROW_BATCH, .super = 0, .super_kind = ROW_BATCH, .structural = true, .phrase = "compose",
     .names_kind = true},
    {.sub = 2, .sub_kind = ROW_OUTPUT, .super = 1, .super_kind = ROW_INPUT, .structural = true,
     .phrase = "compose: the left operand's input axes against the right operand's output axes"},
    {.sub = 2, .sub_kind = ROW_INPUT, .super = 0, .super_kind = ROW_INPUT, .structural = true,
     .phrase = "compose, input axes of the right operand"},
    {.sub = 1, .sub_kind = ROW_OUTPUT, .super = 0, .super_kind = ROW_OUTPUT, .structural = true,
     .phrase = "compose, output axes of the left operand"},
    {.sub = 3, .and_after = true, .sub_kind = EACH, .super = 0, .super_kind = EACH, .phrase = "pointwise",
     .names_kind = true},
};

/* t.batch ⊑ r.batch, t.output ⊑ r.input, t.input ⊑ r.output; all structural. */
static const LogicRelation transpose[] = {
    {.sub = 1, .sub_kind = ROW_BATCH, .super = 0, .super_kind = ROW_BATCH, .structural = true,
     .phrase = "transpose", .names_kind = true},
    {.sub = 1, .sub_kind = ROW_OUTPUT, .super = 0, .super_kind = ROW_INPUT, .structural = true,
     .phrase = "transpose, output axes become input axes"},
    {.sub = 1, .sub_kind = ROW_INPUT, .super = 0, .super_kind = ROW_OUTPUT, .structural = true,
     .phrase = "transpose, input axes become output axes"},
};

/* x.batch = [the index's range]·r.batch, x.input = r.input, x.output = r.output. */
#define SLICED "slicing removes the leftmost batch axis"
static const LogicRelation slice[] = {
    {.sub = 1, .sub_kind = ROW_BATCH, .super = 0, .super_kind = ROW_BATCH, .equal = true, .pin = LOGIC_PIN_SYMBOL,
     .phrase = SLICED},
    {.sub = 1, .sub_kind = ROW_INPUT, .super = 0, .super_kind = ROW_INPUT, .equal = true, .phrase = SLICED},
    {.sub = 1, .sub_kind = ROW_OUTPUT, .super = 0, .super_kind = ROW_OUTPUT, .equal = true, .phrase = SLICED},
};

/* The stack's rows are the element's, with the new axis in front of the stacked kind's. */
static const LogicRelation stack[] = {
    {.sub = 1, .sub_kind = EACH, .super = 0, .super_kind = EACH, .equal = true, .pin = LOGIC_PIN_POSITION,
     .phrase = "stacking", .names_kind = true},
};

#define TABLE(t) {t, sizeof t / sizeof *t}
static const struct {
    const LogicRelation *relations;
    uint32_t count;
} tables[] = {
    [LOGIC_POINTWISE] = TABLE(pointwise), [LOGIC_COMPOSE] = TABLE(compose), [LOGIC_TRANSPOSE] = TABLE(transpose),
    [LOGIC_SLICE] = TABLE(slice),         [LOGIC_STACK] = TABLE(stack),
};

LogicWalk logic_walk(Logic logic, uint32_t slot_count, RowKind stacked) {
    /* No logic written is pointwise; a spec relates slots to templates, not to each other. */
    if (logic == LOGIC_NONE) logic = LOGIC_POINTWISE;
    return (LogicWalk){.logic = logic, .slot_count = slot_count, .stacked = stacked};
}

bool logic_next(LogicWalk *w, LogicPair *out) {
    if (w->logic == LOGIC_SPEC) return false;
    for (; w->rel < tables[w->logic].count; w->rel++, w->kind = 0, w->slot = 0) {
        const LogicRelation *r = &tables[w->logic].relations[w->rel];
        if (r->super >= w->slot_count) continue;
        uint32_t kinds = r->sub_kind == EACH ? ROW_KINDS : 1;
        uint32_t end = r->and_after ? w->slot_count : r->sub + 1;
        if (end > w->slot_count) end = w->slot_count;
        for (; w->kind < kinds; w->kind++, w->slot = 0) {
            if (w->slot < r->sub) w->slot = r->sub;
            if (w->slot >= end) continue;
            RowKind sub_kind = r->sub_kind == EACH ? (RowKind)w->kind : r->sub_kind;
            RowKind super_kind = r->super_kind == EACH ? (RowKind)w->kind : r->super_kind;
            *out = (LogicPair){r, w->slot, r->super, sub_kind, super_kind, r->pin == LOGIC_PIN_SYMBOL,
                               r->pin == LOGIC_PIN_POSITION && super_kind == w->stacked};
            w->slot++;
            return true;
        }
    }
    return false;
}

Logic logic_named(char c) {
    return c == '@' ? LOGIC_COMPOSE : c == 'T' ? LOGIC_TRANSPOSE : LOGIC_POINTWISE;
}

const char *logic_operands_needed(Logic logic, uint32_t n) {
    if (logic == LOGIC_COMPOSE && n != 2 && n != 3) return "two or three operands";
    if (logic == LOGIC_TRANSPOSE && n != 1) return "one operand";
    return NULL;
}

const SpecSlot *logic_spec_template(const Spec *spec, uint32_t i, uint32_t *slot) {
    *slot = i < spec->rhs_count ? i + 1 : 0;
    return i < spec->rhs_count ? &spec->rhs[i] : &spec->lhs;
}
