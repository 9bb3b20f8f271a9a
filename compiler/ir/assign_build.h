/* assign_build.h — internal to the assignment stage: what assign.c (buffers, forward
 * assignments), assign_types.c (their element types), grad.c (gradients) and routines.c (the
 * stage's entry, collecting the code) share.  Only those four files include it; the stage's
 * interface is assign.h.
 *
 * The Builder is assign_build()'s state.  It holds the closed shapes and one TensorInfo per
 * tensor: the tensor's forward assignments and its operation's slots and projections record,
 * which the backward assignments reuse.  It also holds the collection marks (stamp,
 * generation): a walk over the graph starts a new generation, and a tensor whose stamp equals
 * the generation has been visited in this walk.  The constructors below make assignments in the
 * IR's arena.  block_statement() instantiates one code block of an operator (its forward or its
 * backward block) over a BlockContext, and binds the slot names (v, g, v1, g1, …) to the
 * context's slots and the names of the block's local definitions to their values. */
#ifndef TSR_ASSIGN_BUILD_H
#define TSR_ASSIGN_BUILD_H

#include "ir/assign.h"

/* What one tensor contributes: its forward assignments and its operation's record. */
typedef struct TensorInfo {
    AssignList forward;        /* a stack's: one per element, in order */
    Tensor **slots;            /* the operation's slots: the tensor, then its operands */
    uint32_t slot_count;
    const Projections *proj;   /* operator applications and slices */
    int needs_grad;            /* grad.c's memo: 0 unknown, 1 no, 2 yes */
} TensorInfo;

/* A gathered axis whose positions come, unchanged, from a data item's field: all of it (axis
 * -1), or the cells lo … hi-1 of one of its axes (a slice: Nn.slice_last cuts a token window into
 * inputs and targets).  resolve_gather_bounds turns an item's reaches into its DataSource.bound. */
typedef struct GatherReach {
    DataSource *source;
    const Tensor *field;
    int32_t axis;
    int64_t lo, hi;
    int64_t bound;     /* the gathered axis's cells */
} GatherReach;

typedef struct Builder {
    IrProgram *ir;
    Program *program;
    AssignResult *out;         /* value_buffer, grad_buffer */
    Shape *shapes;             /* per tensor id: the closed shape (resolved) */
    bool *visited;
    TensorInfo *info;          /* by tensor id */
    uint32_t *stamp;           /* by tensor id: collection marks */
    uint32_t generation;
    Tensor *current;           /* the tensor being built */
    bool failed;               /* an error in the unit being built (a named tensor, a routine) */
    bool *poisoned;            /* by tensor id: its build failed; whatever reads it fails silently */
    Span call;                 /* the user's application an error in the library's code is
                                * reported at (diag_set_user_call): the tensor's or the step's */
    const char *call_name;
    GatherReach *reaches;      /* bound_gathered_data's, in build order */
    uint32_t reach_count, reach_cap;
} Builder;

/* Each data item's bound (DataSource.bound) from the reaches recorded while building: the least
 * gathered axis, when the reaches of that size cover every cell the runtime checks (the whole
 * item, or slices that together span an axis of its one field); else none (a cell no such
 * gather reads may hold anything). */
void resolve_gather_bounds(Builder *b);

/* Errors in the standard library's code are reported at `call` from now on (the user's
 * application that made what is being built; a zero span: none), in b and in diag. */
void builder_set_call(Builder *b, Span call, const char *name);

/* Instantiating operator blocks: the assignments of one block, appended to `out`. */
/* A block's local definition `{ name } =: expr`: a per-cell value of the operation's iteration
 * space, written in place of `name` where later statements read it. */
typedef struct BlockLocal {
    const char *name;
    const Node *value;
    uint32_t visible;  /* the locals its value may read: those defined before it */
} BlockLocal;

typedef struct BlockContext {
    Builder *b;
    Tensor **slots;   /* slot 0 = result */
    uint32_t slot_count;
    const Projections *proj; /* the operator's; NULL without ~logic: each assignment has its own */
    const Node **own_reads;  /* an assignment with its own logic: the slot names it reads, in the
                                order written (its operands 1, 2, …; ast_code_reads) */
    uint32_t own_read_count;
    const char *what;
    Span span;
    Assignment **out;
    uint32_t out_count, out_cap;
    BlockLocal *locals;
    uint32_t local_count, local_cap;
    uint32_t local_limit; /* the locals a name may refer to where an expression is read */
    uint32_t rest;        /* the slot of the operator's rest operand `tn` (elab.h operator_rest), or 0 */
    uint32_t rest_slot;   /* the slot `vn`, `gn`, `tn` name in the statement being instantiated */
} BlockContext;

/* A statement that names the rest operand (`vn`, `gn`, `tn`, also through a local definition) is
 * instantiated once per operand from the rest operand's position on, in order. */
void block_statement(BlockContext *c, const Node *n);

/* What dumps and errors call an operator application: "'*'" or "einsum '+*'". */
const char *operation_what(Builder *b, const Tensor *t);

void push_assignment(Arena *arena, AssignList *list, Assignment *a);

/* An assignment `lhs =: ?` with one right-hand node of `kind` (filled in by the caller). */
Assignment *new_assignment(Builder *b, Access lhs, AExprKind kind, const Projections *proj, Span span,
                           const char *what);

/* A copy assignment `dst =: src` (slot 0 written, slot 1 read) under `proj`. */
Assignment *copy_assignment(Builder *b, Tensor *dst, Tensor *src, const Projections *proj, Span span,
                            const char *what);

/* Building the tensor graph (assign.c), for routines.c and grad.c. */

/* Gives t (and, first, everything it depends on) its buffers, forward assignments and record. */
void build_tensor(Builder *b, Tensor *t);
/* The buffer of a value or gradient node (made now if it was not yet); its record. */
uint32_t node_buffer(Builder *b, TNode node);
IrBuffer *buffer_of(Builder *b, TNode node);
/* The forward assignments of t and of everything it depends on, operands first, each once per
 * generation (b->generation); collect_fresh reads the tensors made before `fresh_from` as they
 * are. */
void collect_forward(Builder *b, Tensor *t, AssignList *out);
void collect_fresh(Builder *b, Tensor *t, uint32_t fresh_from, AssignList *out);
/* A routine's standalone assignment (`c =:+ a * b ~logic:"@"`) with its own record; NULL after an
 * error (b->failed). */
Assignment *standalone(Builder *b, const CodeStep *step);

/* ---- Element types (assign_types.c) ---------------------------------------------------------- */

/* The type of a's right side into a->rhs_dtype, converted to what the left side keeps where that
 * is allowed; false after an error.  `lhs_dtype` is the type the left side keeps (DTYPE_ANY: the
 * left side takes the right side's, an operation's result). */
bool check_rhs_dtype(Builder *b, Assignment *a, uint8_t lhs_dtype);
/* e, of some element type, converted to `to` in place (a conversion wrapped around it). */
void convert_in_place(Builder *b, AExpr *e, uint8_t to);
/* e, an expression of numbers of type `from` (DTYPE_ANY: constants), as type `to`. */
void numbers_as(Builder *b, const Assignment *a, AExpr *e, uint8_t from, uint8_t to);
/* Whether a is `=:+` of one read that reaches each cell once (a copy). */
bool adds_once(const Assignment *a);
/* A type in messages: its word ("f32"), or "number" for DTYPE_ANY. */
const char *dtype_word(uint8_t dtype);
bool is_half_dtype(uint8_t dtype);
bool is_int_dtype(uint8_t dtype);
/* The wider of two integer types, and the type an operation on two number types gives (DTYPE_ANY:
 * a constant, which takes the other's). */
uint8_t int_join(uint8_t a, uint8_t b);
uint8_t float_join(uint8_t a, uint8_t b);
/* A node in messages ("'w'", "the result of '*'"), and its element type (a gradient's is its
 * tensor's). */
const char *node_text(Builder *b, TNode node);
/* Whether f32 (dtype F32) or a half type rounds the finite `value` to infinity. */
bool overflows_type(double value, uint8_t dtype);
uint8_t node_dtype(TNode node);

#endif
