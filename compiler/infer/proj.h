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

#include "ir/ir.h"
#include "elab/elab.h"
#include "infer/logic.h"

/* ---- Projections (proj.c; seed 003) --------------------------------------------------------- */

typedef enum ProjIndexKind {
    PIDX_ITER,   /* driven by product-space iterator `iter` */
    PIDX_FIXED,  /* pinned to position `fixed` */
    PIDX_SYMBOL, /* the run-time value of index symbol `symbol` (a `@|` slice) */
    PIDX_AFFINE, /* fixed + Σ coef[t]·iterator terms[t] (an affine or strided axis of a spec) */
    PIDX_CONCAT, /* a concatenated axis of a spec: `concat` */
    PIDX_GATHER, /* a gathered axis of a spec (`[n]`): at the value of slot `gather` (operand n)
                  * at the point, read at that slot's own map; no iterator of its own */
} ProjIndexKind;

/* A concatenated axis `a^b^…`: its index space is the disjoint union of its parts', one after
 * another.  The product space has one iterator per label part; in a point where part j is the
 * active one, the axis reads offset[j] + part[j] and the iterators of the other label parts do
 * not exist.  A fixed-size part (`1^x`) has no iterator: it is a gap no point reaches. */
typedef struct ProjConcat {
    uint32_t id;      /* 0, 1, … within its Projections */
    uint32_t count;
    bool *gap;        /* per part: a fixed-size part */
    uint32_t *iter;   /* per label part: its iterator */
    int64_t *offset;  /* per part: the sum of the sizes before it */
} ProjConcat;

typedef struct ProjIndex {
    ProjIndexKind kind;
    uint32_t iter;
    int64_t fixed;      /* PIDX_FIXED: the position; PIDX_AFFINE: the constant */
    const char *symbol;
    uint32_t term_count; /* PIDX_AFFINE: at most two terms (stride·over, dilation·kernel) */
    uint32_t terms[2];
    int64_t coef[2];
    bool padded;        /* PIDX_AFFINE: some points fall outside the axis (padding): lowering
                         * skips them, which reads the operation's neutral element there */
    bool dense;         /* PIDX_AFFINE of a merged axis (g, c): its terms number the axis's
                         * cells one to one, so the map is as its iterators alone would be */
    const ProjConcat *concat; /* PIDX_CONCAT */
    uint32_t gather;    /* PIDX_GATHER: the slot whose value gives the position */
} ProjIndex;

/* One record per operation: the product space and one index map per slot (slot 0 is the
 * operation's result, slot i its i-th operand). */
typedef struct Projections {
    uint32_t iter_count;
    uint64_t *iter_size;   /* the product space R_1 × … × R_m */
    uint32_t slot_count;
    uint32_t *rank;        /* per slot */
    uint64_t **axis_size;  /* per slot, per axis in memory order */
    ProjIndex **maps;      /* per slot, per axis in memory order */
    uint32_t concat_count; /* the concatenated axes of all maps, by ProjConcat.id */
    const ProjConcat **concats;
} Projections;

typedef struct ProjProblem {
    Logic logic;           /* its relations: logic.c's table */
    const Spec *spec;      /* LOGIC_SPEC */
    uint32_t slot_count;
    const Shape *shapes;   /* closed (ground) shapes, slot_count of them */
    const char *symbol;    /* LOGIC_SLICE */
    uint32_t stack_index;  /* LOGIC_STACK */
    RowKind stack_row;     /* LOGIC_STACK */
    Span span;             /* where errors point */
    const char *what;      /* the operation, for messages: "'*'", "einsum '+*'" */
    uint64_t shuffle_seed; /* testing: solve the equations in a permuted order (0: as derived) */
} ProjProblem;

/* The projections record, in `arena`; NULL after reporting an error. */
Projections *proj_infer(Arena *arena, const ProjProblem *problem);

/* Memory-order axis count and sizes of a ground shape (batch, output, input). */
uint32_t proj_shape_rank(const Shape *shape);
void proj_shape_dims(const Shape *shape, uint64_t *dims);

/* Whether some map of the record has a gathered axis (PIDX_GATHER). */
bool proj_gathers(const Projections *p);

/* How many times iterator `it` appears in the axes of `slot`'s map (an affine axis counts each
 * of its terms). */
uint32_t proj_iter_uses(const Projections *p, uint32_t slot, uint32_t it);

/* Is the map of `slot` injective / surjective onto that slot's cells? */
bool proj_injective(const Projections *p, uint32_t slot);
/* Whether no cell of `slot` is reached by two points of one region: every iterator is in its map,
 * or is a concatenation part's (whose points, where that part is active, are a region of their
 * own).  An accumulation written so only adds each value once (a slice through a spec). */
bool proj_writes_once(const Projections *p, uint32_t slot);
bool proj_surjective(const Projections *p, uint32_t slot);

#endif
