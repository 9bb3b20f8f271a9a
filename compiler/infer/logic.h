/* logic.h — the shape logics: for every logic, the relations between its slots' rows.
 *
 * An operation's slots are its result (slot 0) and its operands (slot i, the i-th).  A logic
 * says how the rows of the slots relate: row A of slot s lies below (⊑, A may broadcast) or
 * equals row B of slot t.  Both sides read the same relations: elaboration (elab/operators.c) emits them
 * to the shape solver as row inequalities and equalities (docs/inference.md §2), projection
 * inference (proj.c) reads them again over the closed shapes as equations (§10.2).  An einsum
 * spec relates each slot to its template instead: logic_spec_template() says which template
 * belongs to which slot, and in which order both stages match them.
 *
 * Requires: shape.h (row kinds) and spec.h (the templates); nothing of elaboration. */
#ifndef TSR_LOGIC_H
#define TSR_LOGIC_H

#include <stdbool.h>
#include <stdint.h>

#include "infer/shape.h"
#include "front/spec.h"

typedef enum Logic {
    LOGIC_NONE,
    LOGIC_POINTWISE, /* "."; also a routine's standalone assignment and a zero_grads fill */
    LOGIC_COMPOSE,   /* "@": operand 1's input row meets operand 2's output row (3rd: pointwise) */
    LOGIC_TRANSPOSE, /* "T" */
    LOGIC_SPEC,      /* an einsum spec: every slot equals its template */
    LOGIC_SLICE,     /* x @| i: slot 1 is x, slot 0 the slice */
    LOGIC_STACK,     /* a stack and one of its elements: slot 0 the stack, slot 1 the element */
} Logic;

/* The words for the row kinds in messages: "batch", "input", "output". */
extern const char *const logic_row_names[ROW_KINDS];

/* A relation's row kind that stands for each kind in turn, the same on both sides. */
#define LOGIC_EACH_KIND ROW_KINDS

/* An axis at the front of one side of an equality that the other side lacks. */
typedef enum LogicPin {
    LOGIC_PIN_NONE,
    LOGIC_PIN_SYMBOL,   /* the sub row's leftmost axis: the sliced axis, of the index's range, read at
                           the index symbol (x @| i) */
    LOGIC_PIN_POSITION, /* in the row of the stacked kind, the super row's leftmost axis: the stack's
                           new axis, of the element count, written at the element's position */
} LogicPin;

/* One relation of a logic's table: row `sub_kind` of slot `sub` ⊑ (or =) row `super_kind` of
 * slot `super`.  For an equality the two sides differ only where a pin says so. */
typedef struct LogicRelation {
    uint32_t sub;
    bool and_after;       /* also every slot after `sub` (the operands of a pointwise operation,
                             the addend of a fused multiply-add) */
    RowKind sub_kind;     /* or LOGIC_EACH_KIND (then super_kind is too) */
    uint32_t super;
    RowKind super_kind;
    bool equal;           /* =; else ⊑ */
    bool structural;      /* queued under shape_set_contracting (docs/inference.md §2) */
    LogicPin pin;
    const char *phrase;   /* the origin's text: "'OP' (PHRASE)" */
    bool names_kind;      /* the phrase goes on ", KIND axes" */
} LogicRelation;

/* One relation between two rows of one operation: a table row with its slots and kinds. */
typedef struct LogicPair {
    const LogicRelation *rel;
    uint32_t sub, super;
    RowKind sub_kind, super_kind;
    uint32_t sub_front, super_front; /* leading axes the other side lacks (its pin: 0 or 1) */
} LogicPair;

/* Walks the relations of an operation with `slot_count` slots: the table in order; a relation
 * for each kind goes kind by kind, and within a kind slot by slot.  `stacked` is the row kind
 * of a stack's new axis (LOGIC_STACK only).  Relations naming a slot the operation lacks are
 * skipped.  An einsum spec has none (logic_spec_template). */
typedef struct LogicWalk {
    Logic logic;
    uint32_t slot_count;
    RowKind stacked;
    uint32_t rel, kind, slot;
} LogicWalk;

LogicWalk logic_walk(Logic logic, uint32_t slot_count, RowKind stacked);
bool logic_next(LogicWalk *walk, LogicPair *out);

/* The logic written "." "@" "T". */
Logic logic_named(char c);
/* What a fixed logic needs when `n` operands do not fit it ("one operand"), else NULL. */
const char *logic_operands_needed(Logic logic, uint32_t n);

/* An einsum spec's templates in the order both stages match them: the operands' first, in
 * order, then the result's.  The i-th (0 ≤ i ≤ rhs_count), and in *slot the slot it belongs to
 * (operand j's template, spec->rhs[j - 1], to slot j; the result's, spec->lhs, to slot 0). */
const SpecSlot *logic_spec_template(const Spec *spec, uint32_t i, uint32_t *slot);

#endif
