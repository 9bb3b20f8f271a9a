/* shape.h — shapes, shape constraints and the solver that infers them.
 *
 * The algebra is seed 000 ("Broadcasting Is an Order") with the data types of seed 004
 * (OCANNL's design doc); docs/inference.md describes it in those terms.  In short:
 *
 *   - A Dim is a size with a basis.  The claim-free unit 1_∅ (size 1, BASIS_NONE) is the only
 *     dimension that broadcasts; sizes the user writes carry BASIS_DEFAULT and never broadcast;
 *     named bases ("rgb") refuse to meet any other basis.  A Dim may instead be a variable.
 *   - A Row is a leading flank, an optional row variable at the marker, and a trailing flank:
 *     dims[0 .. lead) · <var> · dims[lead .. count).  A row without a variable is closed.
 *   - A Shape is three rows: batch | input -> output.
 *   - Constraints are dim/row equalities (einsum) and inequalities sub ⊑ super (broadcasting:
 *     pointwise and compose).  They are only queued when added; shape_solve() solves the queue
 *     to a fixpoint by variable elimination, so the result does not depend on the order in
 *     which constraints were added.
 *   - shape_close() commits what solving left free: leaves up to their least upper bound,
 *     solve again, interiors down; a parameter with a hole is an error.
 *
 * Every Dim and Row carries the OriginId of where it came from (a literal, a spec, a size
 * field) and every constraint the OriginId of the operation that emitted it; errors are
 * reported through diag.h with both sides as notes.  Row and dim arrays live in the solver's
 * arena: Rows are values and are never mutated once built. */
#ifndef TSR_SHAPE_H
#define TSR_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/diag.h"
#include "base/size.h"

typedef struct ShapeSolver ShapeSolver;
typedef uint32_t OriginId; /* 0: no origin */

enum { BASIS_NONE = 0, BASIS_DEFAULT = 1 }; /* named bases are interned from 2 on */

typedef struct Dim {
    uint32_t var;    /* a dim variable (then size and basis are unused), or 0 */
    uint32_t size;   /* >= 1 */
    uint32_t basis;  /* BASIS_NONE only with size 1: the claim-free unit */
    OriginId origin; /* where the size was written or the variable was created */
    uint32_t runtime; /* a ground run-time size (`?`, known when the program runs): its class,
                       * 1 … shape_runtime_count(); size is then 0 and basis BASIS_DEFAULT */
} Dim;

/* A ground dim's size as the later stages carry it (size.h). */
static inline uint64_t dim_extent(Dim d) { return d.runtime ? SIZE_RUNTIME_BASE + d.runtime : d.size; }

typedef struct Row {
    Dim *dims;       /* leading flank, then trailing flank */
    uint32_t count;
    uint32_t lead;   /* number of leading-flank dims; the marker sits after them */
    uint32_t var;    /* the row variable at the marker, or 0: closed */
    OriginId origin;
} Row;

typedef enum RowKind { ROW_BATCH, ROW_INPUT, ROW_OUTPUT, ROW_KINDS } RowKind;

typedef struct Shape {
    Row rows[ROW_KINDS]; /* indexed by RowKind */
} Shape;

/* What a leaf's holes mean at closing. */
typedef enum LeafKind {
    LEAF_CONSTANT,  /* closes up to its bound; holes take the least value */
    LEAF_PARAMETER, /* a hole is an error: the user forgot a hidden dimension */
} LeafKind;

ShapeSolver *shape_solver_new(void);
void shape_solver_free(ShapeSolver *solver);

/* Where things come from.  `what` is a short phrase used in messages ("the output axes of
 * 'x'", "label 'i' of the spec"); it is copied. */
OriginId shape_origin(ShapeSolver *solver, Span span, const char *what);
Span shape_origin_span(const ShapeSolver *solver, OriginId origin);
const char *shape_origin_what(const ShapeSolver *solver, OriginId origin);
/* The application of a user function the origin was made in (shape_set_context), a zero span
 * for none; *name gets the function's name. */
Span shape_origin_call(const ShapeSolver *solver, OriginId origin, const char **name);

/* Origins made from now on record `call` (an application of the user function `name`; a zero
 * span for none): errors then add "in this application of NAME" there. */
void shape_set_context(ShapeSolver *solver, Span call, const char *name);

/* Origins made from now on carry a note (`text` at `at`; NULL for none) that an error of their
 * constraint adds after its own: a parameter shared with an earlier application, say. */
void shape_set_note(ShapeSolver *solver, Span at, const char *text);

/* The same for a note that only a clash of two sizes adds (a spec's label written twice in one
 * slot: the sizes of its two axes must be equal). */
void shape_set_size_note(ShapeSolver *solver, Span at, const char *text);

/* While on, origins made do not add the hint that '*' is the matrix product to their errors: a
 * parameter times a tensor (a layer's weight), where the product is what is meant. */
void shape_set_product_meant(ShapeSolver *solver, bool on);
/* Marks an origin as a number the user gave a library function (~out:1), not a shape written. */
void shape_origin_given(ShapeSolver *solver, OriginId origin);

/* Every application of a user function in progress, for --explain (shape_explain): origins
 * made between a push and its pop record it, innermost first. */
void shape_push_call(ShapeSolver *solver, Span call, const char *name);
void shape_pop_call(ShapeSolver *solver);

uint32_t shape_basis(ShapeSolver *solver, const char *name); /* intern; "default" is BASIS_DEFAULT */
const char *shape_basis_name(const ShapeSolver *solver, uint32_t basis);

/* Terms. */
Dim dim_ground(uint32_t size, uint32_t basis, OriginId origin);
Dim dim_unit(OriginId origin); /* 1_∅ */
Dim shape_fresh_dim(ShapeSolver *solver, OriginId origin);
/* A run-time size `?` written at `origin` (docs/inference.md §4.9): a claimful axis whose size
 * the program learns when it runs.  While solving it is a variable that never takes the
 * claim-free unit (so broadcasting it into an axis equates them); two that meet become one
 * class, and one that meets a compile-time size takes that size (the declaration is then
 * static: shape_close warns).  shape_close makes each class still open a ground run-time size
 * before anything else closes, so closing's choices never decide it. */
Dim shape_runtime_dim(ShapeSolver *solver, OriginId origin, const char *name); /* name NULL: follows its uses */
/* After shape_close: the number of run-time size classes, and for class k (1 …) the
 * declarations that became it (the first written is [0]; none when closing made the class
 * another size: ground dims are then resolved to that). */
uint32_t shape_runtime_count(const ShapeSolver *solver);
const OriginId *shape_runtime_decls(const ShapeSolver *solver, uint32_t k, uint32_t *count);
/* The least size class k must have at run time (an index fixed in a spec reads that far), 1 when
 * nothing asks for more. */
uint32_t shape_runtime_min(const ShapeSolver *solver, uint32_t k);
/* The first `?` of class k (in the order written) that has a name: its name, the size symbol
 * whose value is the class's (plan.c); NULL when none has. */
const char *shape_runtime_class_name(const ShapeSolver *solver, uint32_t k);
/* After shape_close: the `?` written, in order (0 …): the name it was given (shape_runtime_dim;
 * NULL for an inline definition's, which follows its uses), where it was written, and its class
 * (0 when it became a compile-time size). */
uint32_t shape_runtime_decl_count(const ShapeSolver *solver);
uint32_t shape_runtime_decl(ShapeSolver *solver, uint32_t i, const char **name, OriginId *origin);
/* The `?` that `written` (a dim as shape_runtime_dim returned it) is, or UINT32_MAX. */
uint32_t shape_runtime_decl_of(const ShapeSolver *solver, Dim written);
/* Give `?` number i another name (a data item's, known only once the item binds it). */
void shape_runtime_rename(ShapeSolver *solver, uint32_t i, const char *name);
Row shape_fresh_row(ShapeSolver *solver, OriginId origin); /* a bare row variable <ρ> */
Row shape_row(ShapeSolver *solver, const Dim *lead, uint32_t lead_count, uint32_t var,
              const Dim *trail, uint32_t trail_count, OriginId origin); /* copies the dims */
Row shape_closed_row(ShapeSolver *solver, const Dim *dims, uint32_t count, OriginId origin);
Row shape_empty_row(OriginId origin);
Shape shape_fresh(ShapeSolver *solver, OriginId origin); /* three bare row variables */
/* `dims` prepended to the leading edge of `row` (a closed row stays closed). */
Row shape_row_prepend(ShapeSolver *solver, const Dim *dims, uint32_t count, Row row);

/* Constraints (queued; `why` is the operation that emitted them). */
void shape_dim_eq(ShapeSolver *solver, Dim a, Dim b, OriginId why);
void shape_dim_le(ShapeSolver *solver, Dim sub, Dim super, OriginId why);
void shape_dim_at_least(ShapeSolver *solver, Dim d, uint32_t size, OriginId why);
void shape_row_eq(ShapeSolver *solver, Row a, Row b, OriginId why);
void shape_row_le(ShapeSolver *solver, Row sub, Row super, OriginId why);
/* The axes of `row` hold `cells` cells in all (seed 004's Total_elems): a captured row variable
 * read with `dim` or sized with `set_dim`.  Settled at fixpoints, not while solving: a ground
 * row gives `cells` its product; a known `cells` solves the row's one unknown axis; at closing
 * a row variable still free takes one axis of the missing size (none when nothing is missing).
 * `cells` gets basis `default`. */
void shape_row_product(ShapeSolver *solver, Row row, Dim cells, OriginId why);
/* `row` = `front`, where `front` is written [leading axes]·<ρ>: the leading axes are the
 * leftmost axes of `row` (slicing with `@|`).  Applied once `row`'s leftmost axes are known --
 * it is closed or has a leading flank -- so that a row growing at its back is not taken for one
 * with new axes in front.  At closing, a row whose unknown stretch is still in front of its
 * written axes takes that stretch empty first. */
void shape_row_eq_front(ShapeSolver *solver, Row row, Row front, OriginId why);
/* ---- Windows: affine and strided axes (seed 004's Conv_input) -------------------------------
 *
 * An operand axis written `stride*over + offset + dilation*kernel` in a spec is read at that
 * index (less the left padding) for every position of `over` and `kernel`.  Its size `input`
 * relates to the sizes of `over` and `kernel` by the closed forms below, with K the dilated
 * extent dilation*(kernel-1)+1 (1 without a kernel):
 *   valid (`<`):  over = (input - offset - K) / stride + 1, needs input >= offset + K;
 *                 back: input = stride*(over-1) + offset + K
 *   same  (`=`):  over = ceil((input - offset) / stride), needs input > offset; left padding
 *                 (dilation*(kernel-1))/2; back: input = stride*over
 * A strided axis (no kernel) uses the `same` forms with no padding.  Lengths that the stride
 * does not divide keep the windows that start inside (valid: that fit) the input.
 *
 * A merged axis `(over, kernel)` is a window whose stride is the kernel's size (`merge`; the
 * stride field is unused): input = over * kernel exactly, any two of the three sizes giving the
 * third, and a size that does not divide is an error. */
typedef enum WindowPadding {
    WINDOW_PAD_INFERRED, /* not written: settled by the sizes, `valid` when nothing decides */
    WINDOW_PAD_SAME,
    WINDOW_PAD_VALID,
} WindowPadding;

typedef struct Window {
    uint32_t stride, dilation, offset; /* stride, dilation >= 1; offset < stride */
    bool has_kernel;
    WindowPadding padding; /* as written */
    bool merge;            /* a merged axis: stride = the kernel's size, padding valid */
} Window;

/* The size of `over` for an input of `input` cells and a kernel of `kernel` (ignored without a
 * kernel) under padding `pad` (not WINDOW_PAD_INFERRED); 0 when no window fits. */
uint64_t window_over_size(Window w, uint64_t input, uint64_t kernel, WindowPadding pad);
/* The input size that `over` positions cover exactly (the inverse, for an unknown input). */
uint64_t window_input_size(Window w, uint64_t over, uint64_t kernel, WindowPadding pad);
/* The left padding: (dilation*(kernel-1))/2 under `same` with a kernel, else 0. */
uint64_t window_left_pad(Window w, uint64_t kernel, WindowPadding pad);

/* Queue the window constraint `input` = stride*`over` + offset + dilation*`kernel` (`kernel`
 * is unused without one).  Settled at fixpoints: from a known input and kernel it sizes `over`
 * (or checks it and, when the padding was not written, decides the padding); where only `over`
 * and the kernel are known it sizes the input, before closing's leaves commit.  A merged axis
 * is settled as soon as two of its three sizes are known.  Returns a handle for
 * shape_window_padding. */
uint32_t shape_dim_window(ShapeSolver *solver, Dim input, Dim over, Dim kernel, Window w, OriginId why);
/* The padding a window ended with after shape_close (the written one, or the one settled). */
WindowPadding shape_window_padding(const ShapeSolver *solver, uint32_t handle);
/* The sizes of a window's `over` and `kernel` (1 without a kernel; 0 while unknown). */
void shape_window_sizes(ShapeSolver *solver, uint32_t handle, uint32_t *over, uint32_t *kernel);

/* ---- Concatenations: `a^b^...` axes ----------------------------------------------------------
 *
 * Queue `total` = parts[0] + ... + parts[count-1].  Settled at fixpoints: when every part is
 * known the total is equated with (or checked against) their sum; when the total and all parts
 * but one are known, that part is the difference, an error when it would be below 1.  Parts
 * with different named bases are an error; the total takes the parts' named basis.  A
 * concatenation still unsettled after closing is an error.  Returns a handle. */
uint32_t shape_dim_concat(ShapeSolver *solver, Dim total, const Dim *parts, uint32_t count, OriginId why);
/* The size part `part` of a concatenation ended with after shape_close (0 when unknown). */
uint32_t shape_concat_part_size(ShapeSolver *solver, uint32_t handle, uint32_t part);

/* Constraints queued while this is on come from a structural operation (compose, transpose,
 * einsum), not a pointwise one.  A parameter's row variable that took part in one is a hidden
 * dimension: at closing, a hole there is an error; a parameter row only ever broadcast
 * pointwise (a bias's input row) closes to empty (OCANNL's "safe to guess"). */
void shape_set_contracting(ShapeSolver *solver, bool on);
/* While on, shape_set_contracting marks nothing: the constraints of code's assignments
 * (routines, let%cd) relate tensors the model already made, so their einsums and composes do
 * not make a parameter's row a hidden dimension (Train.clip_grad_norm reads every gradient
 * through a spec with row variables; a bias's input row stays a pointwise row). */
void shape_code_constraints(ShapeSolver *solver, bool on);
/* The three rows pairwise. */
void shape_eq(ShapeSolver *solver, const Shape *a, const Shape *b, OriginId why);
void shape_le(ShapeSolver *solver, const Shape *sub, const Shape *super, OriginId why);

/* Register a shape for closing.  Leaves close up; every other registered shape (interior)
 * closes down.  `name` and `decl` are used in "forgot to specify" errors. */
void shape_add_leaf(ShapeSolver *solver, const Shape *shape, LeafKind kind, const char *name,
                    OriginId decl);
void shape_add_interior(ShapeSolver *solver, const Shape *shape);

/* Solve the queued constraints to a fixpoint.  Returns false when an error was reported. */
bool shape_solve(ShapeSolver *solver);
/* Solve, then run the closing policy.  Afterwards every registered shape is ground (unless
 * errors were reported).  Returns false when an error was reported. */
bool shape_close(ShapeSolver *solver);
unsigned shape_error_count(const ShapeSolver *solver);
/* Check the closed solution against every constraint emitted from outside the solver (and the
 * cells, front, window and concatenation constraints), from the definitions: a violation is
 * reported as an internal error at the constraint's source (terms closing left unsolved, in no
 * registered shape, are not checked).  shape_close
 * runs it whenever it reported no error.  Returns false when a violation was reported. */
bool shape_verify(ShapeSolver *solver);

/* Substitute what is known (resolve solved variables). */
Dim shape_resolve_dim(ShapeSolver *solver, Dim d);
Row shape_resolve_row(ShapeSolver *solver, Row r);
Shape shape_resolve(ShapeSolver *solver, const Shape *s);
bool shape_is_ground(ShapeSolver *solver, const Shape *s);

/* OCANNL's printed form with sizes: "batch|input->output", axes comma-separated; "4|3" with
 * no input axes, "5->16" with no batch axes, "16" output only, "1" for a shape without axes,
 * "rgb=3" for an axis with a named basis.  Unsolved parts print as variables ('a, ..r..). */
void shape_print(ShapeSolver *solver, FILE *out, const Shape *s);
char *shape_to_string(ShapeSolver *solver, const Shape *s); /* in the solver's arena */
char *shape_row_to_string(ShapeSolver *solver, Row r);

/* tsrc --explain: for every axis of `sh` (batch, input, output; leftmost first), its size and
 * how it was decided -- each variable it was bound through, with the constraint that bound it
 * (its phrase, file:line:col and source text) or closing's choice, down to the origin of the
 * size (a size written in the program, a literal's length, a captured size) or to closing's
 * claim-free unit.  Afterwards shape_close: every variable keeps its first binding for this. */
void shape_explain(ShapeSolver *solver, FILE *out, const Shape *sh);

/* Testing: how many queued constraints, and enabling a fixed permutation of the queue. */
uint32_t shape_queue_length(const ShapeSolver *solver);
void shape_shuffle_queue(ShapeSolver *solver, uint64_t seed);

#endif
