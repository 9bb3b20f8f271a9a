/* assign.h — from the tensor graph to the assignment IR (ir.h, part 1).
 *
 * assign_build() makes one buffer per tensor node that computation needs and, for every
 * operation reachable from a named tensor, its forward assignments: an operator application
 * instantiates the operator's `forward` block with the slot names bound to the result and the
 * operands; a slice and a stack of computed tensors are built-in assignments.  A parameter's
 * initial value must be a number or a literal tensor: it becomes the buffer's initial contents.  Each operation's projections record comes from proj.c.  Literal tensors (and
 * stacks of them) become initialised buffers, not assignments.
 *
 * A routine's `t.zero_grads` and `t.backprop` are differentiated by grad.c (grad.h), which
 * instantiates the operators' `backward` blocks over the same records.
 *
 * Every access is resolved to its buffer (or index symbol) before assign_build() returns, so
 * lowering only reads the assignments.
 *
 * Requires closed shapes (elaborate() without errors). */
#ifndef TSR_ASSIGN_H
#define TSR_ASSIGN_H

#include "ir/ir.h"
#include "infer/proj.h"

/* ---- The assignment IR ------------------------------------------------------------------------ */

/* A tensor node: a tensor's value or its gradient. */
typedef struct TNode {
    Tensor *tensor;
    bool grad;
} TNode;

typedef struct Access {
    TNode node;
    uint32_t slot;      /* which index map of the record addresses it */
    /* Resolved when the assignments are complete (every buffer exists before lowering): */
    uint32_t buffer;    /* the node's buffer, or UINT32_MAX for an index symbol's value */
    const char *symbol; /* `!@i` read as a number: the index symbol, else NULL */
} Access;

typedef enum AExprKind {
    AE_CONST,  /* value */
    AE_READ,   /* reads[read] */
    AE_OP,     /* op(args) */
    AE_RANDOM, /* `random ()`: a uniform number in [0, 1) for the left side's cell in this
                * routine run (lowered to IR_RANDOM at the left side's index) */
    AE_KERNEL, /* the whole right side is a library kernel (Assignment.kernel) of the reads */
} AExprKind;

/* Kernels: operations that no per-cell expression states, whose nests lowering builds by hand
 * (lower_attention.c).  Each is written in an operator's block as an application of its name to
 * slot names, the whole right side of the assignment (`v =: attention v1 v2 v3`). */
typedef enum KernelKind {
    KERNEL_NONE,
    KERNEL_ATTENTION,    /* v =: attention v1 v2 v3 (or causal_attention, dropout_attention v1 v2 v3 v4,
                          * causal_dropout_attention): softmax attention */
    KERNEL_ATTENTION_DQ, /* g1 =+ attention_dq v1 v2 v3 v g: its gradients, from the */
    KERNEL_ATTENTION_DK, /*   forward's row statistics (Assignment.stats), the scores */
    KERNEL_ATTENTION_DV, /*   recomputed */
} KernelKind;

typedef struct AExpr AExpr;
struct AExpr {
    AExprKind kind;
    ScalarOp op;
    uint8_t type; /* TSR_DTYPE_*: AE_OP, the type it computes in (a conversion's: its result's);
                   * AE_CONST, the type of the number (assign.c expr_dtype; ir.h IrExpr.type) */
    double value;
    uint32_t read;
    AExpr *args[3];
};

typedef struct Assignment {
    Access lhs;
    AccumOp accum;
    bool reset;           /* the `:` */
    AExpr *rhs;
    uint8_t rhs_dtype;    /* the element type of rhs (TSR_DTYPE_*, or DTYPE_ANY for a constant):
                           * check_rhs_dtype() */
    Access *reads;
    uint32_t read_count;
    const Projections *proj;
    Access *slot_values;  /* when proj gathers (proj_gathers): every slot's tensor value, by slot, so
                           * that a gathered axis can read its positions from a slot that the
                           * assignment itself does not read (`v =: v1` of an embedding's take) */
    Span span;            /* the application (or definition) it came from */
    Span lhs_span;        /* an operator block's: its left side as written (v, g1, …) */
    const char *what;     /* "'*' (forward)", "stacking", … for dumps and errors */
    bool collective;      /* not an assignment but `all_reduce_mean` of the nodes in `reads`
                           * (consecutive ones of a routine fused): every cell of each becomes
                           * its mean across processes; lowered to a call of the runtime */
    /* A kernel (rhs->kind AE_KERNEL): `reads` are its operands in the order written. */
    KernelKind kernel;
    bool causal;          /* attention: query position t sees key positions s <= t only */
    uint32_t stats;       /* attention: the buffer of each query row's log-sum-exp of its scores,
                           * which the forward writes and the gradients read */
    uint32_t positions;   /* causal attention: a literal buffer 0, 1, … (the positions compared) */
    uint32_t scratch;     /* attention_dk, attention_dv: a buffer of one number per query row */
    bool dropout;         /* attention: the weights go through inverted dropout, the rate (one cell)
                           * being the last of `reads` */
    uint32_t drop_cells;  /* dropout: a buffer without storage over the rows and the keys
                           * (attention_drop_iters), whose cells number the random draws */
} Assignment;

/* The element type of an expression of constants alone: it takes the other side's. */
enum { DTYPE_ANY = 255 };

typedef struct AssignOptions {
    uint64_t seed; /* parameter initialisation */
} AssignOptions;

/* A list of assignments in execution order: a routine, or the implicit forward. */
typedef struct AssignList {
    const char *name;
    Assignment **items;
    uint32_t count, cap;
} AssignList;

/* The program's buffers and assignments: `forward` computes every named tensor; `routines`
 * are the program's routines (t.forward, t.backprop with the operators' backward blocks,
 * t.zero_grads, standalone pointwise assignments).  False after reporting errors. */
typedef struct AssignResult {
    IrProgram *ir;
    Program *program;
    uint32_t *value_buffer;    /* per tensor id: its value's buffer, or UINT32_MAX */
    uint32_t *grad_buffer;     /* per tensor id: its gradient's buffer, or UINT32_MAX */
    AssignList forward;
    AssignList *routines;
    uint32_t routine_count;
} AssignResult;

bool assign_build(Program *program, const AssignOptions *options, AssignResult *out);

#endif
