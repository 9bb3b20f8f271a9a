/* proj.h — projection inference: the loop nest of one operation (seed 003).
 *
 * Given an operation's shape logic and the closed shapes of its slots (slot 0 the result,
 * slot i the i-th operand), proj_infer() derives the operation's constraints again over fresh
 * per-axis projection ids, reads them as equations (Eq / Iter, the six rules of seed 003),
 * solves them with union-find, pins and an iterate set, and labels each class: pinned classes
 * read at their pin, iterated classes of size > 1 get an iterator of the product space, the
 * rest read at 0.  Nothing global is consulted, so sizes made equal elsewhere never fuse
 * loops here ("global sizes, local identities").  Conflicts are reported as located errors. */
#ifndef TSR_PROJ_H
#define TSR_PROJ_H

#include "ir.h"

typedef enum ProjLogic {
    PROJ_POINTWISE, /* every row of each operand ⊑ the result's row */
    PROJ_COMPOSE,   /* "@": operand 1's input row meets operand 2's output row (3rd: pointwise) */
    PROJ_TRANSPOSE, /* "T" */
    PROJ_SPEC,      /* an einsum spec: every slot equals its template */
    PROJ_SLICE,     /* x @| i: the leftmost batch axis of slot 1 is read at symbol i */
    PROJ_STACK,     /* slot 0's new leading axis of row `stack_row` is written at stack_index */
} ProjLogic;

typedef struct ProjProblem {
    ProjLogic logic;
    const Spec *spec;      /* PROJ_SPEC */
    uint32_t slot_count;
    const Shape *shapes;   /* closed (ground) shapes, slot_count of them */
    const char *symbol;    /* PROJ_SLICE */
    uint32_t stack_index;  /* PROJ_STACK */
    RowKind stack_row;     /* PROJ_STACK */
    Span span;             /* where errors point */
    const char *what;      /* the operation, for messages: "'*'", "einsum '+*'" */
    uint64_t shuffle_seed; /* testing: solve the equations in a permuted order (0: as derived) */
} ProjProblem;

/* The projections record, in `arena`; NULL after reporting an error. */
Projections *proj_infer(Arena *arena, const ProjProblem *problem);

/* Memory-order axis count and sizes of a ground shape (batch, output, input). */
uint32_t proj_shape_rank(const Shape *shape);
void proj_shape_dims(const Shape *shape, uint64_t *dims);

/* Is the map of `slot` injective / surjective onto that slot's cells? */
bool proj_injective(const Projections *p, uint32_t slot);
bool proj_surjective(const Projections *p, uint32_t slot);

#endif
