/* shape_internal.h — what the files of the shape solver (compiler/infer/shape*.c) share: the
 * solver's state (ShapeSolver: the queue, the variable environment, origins, the constraints
 * kept for closing and verification) and the functions one file calls in another.  Only those
 * files include it; the solver's interface is shape.h.
 *
 *   shape.c         terms, resolution, printing, errors, the queue, dims and rows, the fixpoint
 *   shape_close.c   closing: crossings, cells, fronts, windows, concatenations, leaves, run-time sizes
 *   shape_report.c  verification of the closed solution, --explain's derivations
 * Calls go from shape_close.c and shape_report.c down to shape.c, and from shape.c's shape_solve
 * nowhere else; shape_close.c calls shape_verify. */
#ifndef TSR_SHAPE_INTERNAL_H
#define TSR_SHAPE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/arena.h"
#include "infer/shape.h"

enum { MAX_ROW_RANK = 1 << 20 }; /* a last resort; cycles are caught by row_dims first */

typedef enum ConstraintKind { C_DIM_EQ, C_DIM_LE, C_DIM_AT_LEAST, C_ROW_EQ, C_ROW_LE } ConstraintKind;

typedef struct Constraint {
    ConstraintKind kind;
    uint32_t at_least; /* C_DIM_AT_LEAST */
    bool contracting;  /* C_ROW_*: from a structural operation (compose, transpose, einsum) */
    bool may_grow;     /* C_ROW_LE: taken at a fixpoint, so a too-short super row may grow now;
                        * C_ROW_EQ: so open rows with crossed flanks may merge now */
    bool closing;      /* a value closing chose (close_leaves): recorded for --explain */
    bool held;         /* C_ROW_EQ: held back once by take_row_equalities (a crossed pair on one variable) */
    Dim d1, d2;        /* C_DIM_*: d1 is the sub side of C_DIM_LE */
    Row r1, r2;        /* C_ROW_*: r1 is the sub side of C_ROW_LE */
    OriginId why;
    OriginId entered[2]; /* a constraint the solver derived: where its first and second side
                          * entered the library application `why` is in, as the constraint it
                          * came from knew (report_dim_clash's note), or 0 */
} Constraint;

typedef struct ConstraintList {
    Constraint *items;
    uint32_t count, cap;
} ConstraintList;

/* What a variable was first solved to, by which constraint (never compressed): the provenance
 * --explain prints (shape_explain). */
typedef struct Binding {
    union {
        Dim dim;      /* a dim variable's value */
        Row row;      /* a row variable's value */
    };
    OriginId why;     /* the constraint that solved it */
    bool closed;      /* chosen by the closing policy (shape_close), not forced by a constraint */
} Binding;

typedef struct DimVarInfo {
    uint32_t visited;     /* closing: the search (dim_hole_above) that last reached it */
    bool solved;
    Dim value;
    bool has_lub;
    Dim lub;
    OriginId lub_why;
    OriginId lub_entered; /* where the bound entered lub_why's library application, or 0 */
    uint32_t at_least;
    OriginId at_least_why;
    ConstraintList edges; /* C_DIM_LE between this and another unsolved variable */
    bool committed;       /* closing: a value was chosen in this round */
    Binding bound;        /* --explain: how it was solved (value is compressed, this is not) */
    OriginId unit_below;  /* a claim-free unit 1_∅ met it from below (its origin), or 0 */
    OriginId runtime;     /* a run-time size `?` became this variable (a declaration's origin):
                           * claimful, like an at-least size above 1 */
    uint32_t taken;       /* close_crossings: a value chosen in this call pairs it (= cross_stamp) */
} DimVarInfo;

typedef struct RowVarInfo {
    bool solved;
    bool grown;           /* the residue of a template: it already met a lower bound */
    bool contracted;      /* took part in a structural constraint: a hole here is a hidden dimension */
    uint32_t depth;       /* axes that templates grew into the variables this one descends from */
    uint32_t memo_stamp;  /* closing: memo holds this variable's bounds when it equals s->stamp */
    struct RowList *memo; /* shared by every variable of one strongly connected component */
    uint32_t visit_stamp; /* closing: order, low and on_stack are valid when it equals s->stamp */
    uint32_t order, low;  /* closing: Tarjan's visit number and lowest number reachable */
    bool on_stack;        /* closing: in the component being collected */
    struct RowList *own;  /* closing: what this variable contributes to its component's bounds */
    bool committed;       /* closing: a value was chosen in this round */
    uint32_t waited_for;  /* closing: a crossing waits for this variable's value (= cross_stamp) */
    Row value;
    ConstraintList upper; /* C_ROW_LE with this variable alone on the sub side */
    ConstraintList edges; /* C_ROW_LE between this and another bare row variable */
    ConstraintList deferred; /* C_ROW_LE <v> ⊑ X·<v>·Y: checked once v has a value */
    Binding bound;           /* --explain: how it was solved */
} RowVarInfo;

/* An application of a user function in progress (shape_push_call); frames are shared. */
typedef struct CallFrame {
    Span call;
    const char *name;
    const struct CallFrame *outer;
} CallFrame;

typedef struct Origin {
    Span span;
    const char *what;
    Span call;             /* the application of a user function this came from, if any */
    const char *call_name;
    const CallFrame *calls; /* --explain: every application in progress, innermost first */
    bool cycled;           /* a constraint that failed with a row-rank cycle: what closing the
                            * rows it left open does to it again is not reported */
    Span also;             /* shape_set_note: a note an error of this constraint adds, or none */
    const char *also_text;
    Span sizes_also;       /* shape_set_size_note: one that only a clash of two sizes adds */
    const char *sizes_also_text;
    bool product_meant;    /* shape_set_product_meant: no "'*' is the matrix product" hint */
    bool given;            /* shape_origin_given: a number given to a function (~out:1), not a
                            * shape written, so no hint to write a size 1 as (1 : _) */
} Origin;

/* shape_row_product: the axes of `row` hold as many cells as `cells` says. */
typedef struct Product {
    Row row;
    Dim cells;
    OriginId why;
    bool settled;
} Product;

/* shape_row_eq_front: an equality that waits until the row's front is known. */
typedef struct FrontEq {
    Row row, front;
    OriginId why;
    bool settled;
} FrontEq;

/* shape_dim_window: an affine or strided axis and the labels it is made of. */
typedef struct WindowC {
    Dim input, over, kernel;
    Window w;
    WindowPadding padding; /* the written one, or the one settled */
    OriginId why;
    bool settled;
} WindowC;

/* shape_dim_concat: a concatenated axis and its components. */
typedef struct ConcatC {
    Dim total;
    Dim *parts;
    uint32_t count;
    OriginId why;
    bool settled;
} ConcatC;

/* close_crossings: a trial of k axes for a row variable that crossings wait for takes the pairs
 * of axes they would bring together (see "Crossings" below).  An axis that is a variable, or one
 * of the k new axes, is a probe. */
typedef struct Probe {
    uint32_t key; /* a dim variable, or new_axis(j) for the j-th new axis */
    bool has_lo, has_hi;
    Dim lo, hi;   /* the atom an atom below it makes it; the atom it lies below */
    uint32_t at_least;
} Probe;

typedef struct TrialPair {
    uint32_t sub, super; /* probe index + 1, or 0 for a ground axis */
    Dim sub_dim, super_dim;
} TrialPair;

typedef struct Trial {
    Probe *probes;
    uint32_t count, cap;
    TrialPair *pairs;
    uint32_t pair_count, pair_cap;
} Trial;

/* A waiting crossing by the variable it waits for (close_crossings sorts them). */
typedef struct CrossRef {
    uint32_t var, index; /* the variable, the crossing's index in ShapeSolver.crossings */
    uint32_t axes;       /* the first of a variable's: its least axes, or UINT32_MAX if not ready */
} CrossRef;

/* A run-time size written (shape_runtime_dim), and a class of them after closing. */
typedef struct RuntimeDecl {
    uint32_t var;
    OriginId origin;
    const char *name;
} RuntimeDecl;

typedef struct RuntimeClass {
    OriginId *decls;   /* after shape_close: the declarations that became this class */
    uint32_t decl_count, decl_cap;
    uint32_t min;      /* the least size an index fixed in a spec needs */
    OriginId min_why;
    bool bound;        /* closing met it with another size: it is `value` (a compile-time size, or
                        * another class) */
    Dim value;
} RuntimeClass;

typedef struct Registered {
    Shape shape;
    bool leaf;
    LeafKind kind;
    const char *name;
    OriginId decl;
    uint8_t reported; /* bit k: a hole in row k was reported */
    uint8_t guessed;  /* bit k: row k closed to the empty row at a hole (closing's guess) */
} Registered;

struct ShapeSolver {
    Arena *arena;
    Origin *origins;
    uint32_t origin_count, origin_cap;
    uint64_t *library_clashes; /* error_at: each user application and user-side places of an error
                                * in library code reported so far (one error for one mistake) */
    uint32_t library_clash_count, library_clash_cap;
    const char **bases;
    uint32_t basis_count, basis_cap;
    DimVarInfo *dvars;
    uint32_t dvar_count, dvar_cap;
    RowVarInfo *rvars;
    uint32_t rvar_count, rvar_cap;
    Constraint *queue;
    uint32_t queue_head, queue_count, queue_cap;
    Registered *shapes;
    uint32_t shape_count, shape_cap;
    Product *products;
    uint32_t product_count, product_cap;
    FrontEq *fronts;
    uint32_t front_count, front_cap;
    WindowC *windows;
    uint32_t window_count, window_cap;
    ConcatC *concats;
    uint32_t concat_count, concat_cap;
    ConstraintList row_eqs; /* row equalities not yet taken (shape_solve takes them first) */
    ConstraintList growth; /* C_ROW_LE whose open super row is too short: grown at the fixpoint */
    ConstraintList crossings; /* C_ROW_LE whose sub row reaches across the super row's variable
                               * (row_le), as resolved then: they wait for their variables */
    uint32_t cross_stamp; /* close_crossings: the current call (RowVarInfo.waited_for, DimVarInfo.taken) */
    CrossRef *cross_refs; /* close_crossings: the waiting crossings, by variable */
    uint32_t cross_ref_count, cross_ref_cap;
    Trial trial;          /* close_crossings: reused by every trial */
    unsigned errors;
    Span error_call; /* the user application the last error reported points at (error_at) */
    OriginId entered[2]; /* the constraint being taken: where each side entered the library
                          * application it is in from outside (Constraint.entered), or 0 */
    Span context;              /* shape_set_context */
    const char *context_name;
    Span note;                 /* shape_set_note */
    const char *note_text;
    bool product_meant;        /* shape_set_product_meant */
    Span size_note;            /* shape_set_size_note */
    const char *size_note_text;
    const CallFrame *calls;    /* shape_push_call */
    bool contracting;  /* mark constraints queued from now on (shape_set_contracting) */
    bool in_code;      /* shape_code_constraints: mark none */
    bool committing;   /* mark constraints queued from now on as closing's choices */
    bool choosing;     /* the variables solved now are closing's choices (Binding.closed) */
    OriginId fallback; /* the origin of dims committed by closing's fallback */
    OriginId fallback_open; /* the same, for a dim that had a bound but also a use that leaves it open */
    uint32_t stamp;    /* closing: the current bound collection */
    uint32_t visits;   /* closing: visit numbers handed out in this collection */
    uint32_t *component_stack; /* closing: collect_row_bounds' variables of open components */
    uint32_t component_count, component_cap;
    uint64_t row_dims; /* axes in all row constraints added through the API: a bound on growth */
    uint32_t search;   /* closing: the current dim_hole_above search */
    uint32_t *hole_stack; /* closing: dim_hole_above's work list, reused */
    uint32_t hole_stack_cap;
    ConstraintList emitted; /* every constraint added from outside, for shape_verify */
    RuntimeDecl *runtime_decls; /* every `?` written (shape_runtime_dim) */
    uint32_t runtime_decl_count, runtime_decl_cap;
    RuntimeClass *runtimes;     /* the classes shape_close made, from 1 ([0] unused) */
    uint32_t runtime_count, runtime_cap;
    OriginId runtime_why;       /* why a class's variable became its ground size (for --explain) */
    uint32_t inside;        /* > 0 while solving or closing: constraints queued are derived */
};

/* ---- shape.c: terms, errors, dims and rows, the fixpoint -------------------------------------------- */

/* "batch", "input" or "output": the row of a kind, for messages. */
const char *row_kind_name(int k);

/* The cells a window of `kernel` taps spans: dilation × (kernel − 1) + 1 (1 without a kernel). */
uint64_t window_extent(Window w, uint64_t kernel);

bool dim_is_unit(Dim d);

bool row_is_ground(Row r);

char *dim_to_string(ShapeSolver *s, Dim d);

/* Whether a dim's origin is closing's fallback: the least value, given where nothing else could
 * be (fallback_open: although a use bounded it, another left it open). */
bool is_fallback(const ShapeSolver *s, OriginId o);

void note_origin(ShapeSolver *s, OriginId o, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void error_at(ShapeSolver *s, OriginId why, OriginId side_a, OriginId side_b, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

bool dims_equal(Dim a, Dim b);

/* Ground equality is identity of size and basis (seed 000): the claim-free unit 1_∅ is not
 * 1_default nor 1_mono.  (Letting 1_∅ equal any unit would make a variable keep whichever unit
 * reached it first, so results would depend on constraint order.) */
bool ground_eq(Dim a, Dim b);

bool ground_le(Dim sub, Dim super);

/* Bind variable v to value; everything v kept goes back on the queue against the value. */
void solve_dim_var(ShapeSolver *s, uint32_t v, Dim value, OriginId why);

void solve_row_var(ShapeSolver *s, uint32_t v, Row value, OriginId why);

/* A crossing (row_le) as its terms read now; true while it still waits, that is while neither
 * its super row's variable nor its sub row's has been solved since it was set aside. */
bool crossing_waits(ShapeSolver *s, const Constraint *c, Row *sub, Row *super);

#endif
