/* elab.h — elaboration: running the compile-time language of a module to build its tensor
 * graph, and emitting the shape constraints of every tensor operation into a ShapeSolver.
 *
 * The compile-time language (docs/language.md §1.2, §3) is evaluated here: integers, floats,
 * strings, lists, closures with positional, labelled and optional parameters, `let … in`,
 * `if`, `let rec`.  Tensor operators are `operator` declarations of the standard library
 * (stdlib/core.tsr, opened implicitly); applying one makes a Tensor node and emits the
 * constraints of its shape logic.  Applying a tensor function re-runs its body, so each
 * application gets fresh shape variables (seed 000: polymorphism by re-evaluation).  Inline
 * parameters `{ w }` belong to a parameter scope: a `()` parameter opens a fresh scope when it
 * is applied; a `let%op` function without `()` owns one scope for all its uses. */
#ifndef TSR_ELAB_H
#define TSR_ELAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "front/ast.h"
#include "infer/logic.h"
#include "infer/shape.h"
#include "front/spec.h"
#include "runtime/image_format.h"

typedef enum TensorKind {
    TENSOR_LITERAL,  /* numbers written in the program: exact shape */
    TENSOR_STACK,    /* a literal of tensors: operands stacked along a new axis */
    TENSOR_PARAM,    /* an inline definition in %op: a trainable parameter (leaf) */
    TENSOR_INPUT,    /* `input { … }`: filled by the caller (exact shape) */
    TENSOR_DATA,     /* a field of a `data` set (exact shape) */
    TENSOR_CONSTANT, /* `ones ()` and friends: a leaf whose shape the context decides */
    TENSOR_INDEX,    /* `!@i`: the run-time value of an index symbol, a scalar */
    TENSOR_OP,       /* an operator application: interior */
    TENSOR_SLICE,    /* `x @| i` */
    TENSOR_STATE,    /* `{ x } =: …` in a routine: code-written state (an optimiser's buffer), starts
                        at 0, kept between runs, no gradient */
} TensorKind;

/* What a tensor of kind `k` is when it never has a gradient, whatever routine runs backprop (an
 * input, data, a literal, a constant, an index's value, code's state: no backprop reaches them),
 * for messages ("'x' is an input"); NULL for a parameter or an operation's result. */
static inline const char *kind_without_gradient(TensorKind k) {
    switch (k) {
    case TENSOR_INPUT: return "an input";
    case TENSOR_DATA: return "a data item";
    case TENSOR_LITERAL: return "a literal";
    case TENSOR_CONSTANT: return "a constant";
    case TENSOR_INDEX: return "an index symbol's value";
    case TENSOR_STATE: return "a state tensor of code";
    default: return NULL;
    }
}

/* A parameter's random initialisation (docs/language.md §3.5.3): shift + scale / sqrt(fan) * r,
 * r uniform in [-1, 1) or standard normal, fan a product of the parameter's axes (1 if none). */
typedef enum InitFan {
    FAN_NONE, /* fan = 1 */
    FAN_IN,   /* the input axes */
    FAN_OUT,  /* the output axes */
    FAN_SUM,  /* fan_in + fan_out (Xavier/Glorot) */
} InitFan;

typedef struct RandomInit {
    bool normal;
    InitFan fan;
    double scale, shift;
} RandomInit;

/* The default of a parameter without an initial value: uniform in ±1/sqrt(fan_in) (as PyTorch's
 * Linear); a parameter without input axes has fan_in 1, so uniform in [-1, 1). */
#define RANDOM_INIT_DEFAULT ((RandomInit){.normal = false, .fan = FAN_IN, .scale = 1.0, .shift = 0.0})

typedef struct Tensor Tensor;
typedef struct DataSource DataSource;
struct Tensor {
    uint32_t id;
    TensorKind kind;
    const char *name;  /* the name it was defined or bound with, or NULL */
    const char *shown; /* the name --print-shapes shows (parameters qualified), or NULL */
    Span span;         /* the expression that made it */
    Shape shape;
    const Node *op;    /* TENSOR_OP: the `operator` declaration */
    const char *op_name;
    Logic logic;
    const Spec *spec;  /* LOGIC_SPEC */
    Tensor **operands;
    uint32_t operand_count;
    double *values;    /* TENSOR_LITERAL: the numbers; TENSOR_CONSTANT: one fill value */
    uint32_t value_count;
    const Span *value_spans; /* TENSOR_LITERAL written as [a; b; …]: where each number is written */
    bool iota;         /* TENSOR_LITERAL of `iota ()`: 0, 1, 2, … along its one axis, whose size is
                        * inferred (values NULL until assign.c knows the size) */
    const Node *init;  /* TENSOR_PARAM: the initial value expression, or NULL */
    const Tensor *subject; /* TENSOR_STATE: the tensor it is named after: the parameter the code
                            * that made it updates (an optimiser's last argument), or the loss of
                            * Train.step's (the last tensor argument of code outside a parameter's) */
    RandomInit random; /* TENSOR_PARAM without an initial tensor: how its cells are drawn */
    const char *index; /* TENSOR_SLICE, TENSOR_INDEX: the index symbol */
    uint32_t index_range;
    DataSource *source; /* TENSOR_DATA: where its values come from, and which field it is */
    uint32_t field;
    Span call;          /* the application the user wrote that was being evaluated when it was made
                         * (a zero span: none): an error the assignments find in the standard
                         * library's code for it is reported there (diag_set_user_call) */
    const char *call_name;
    Span first_call;    /* TENSOR_PARAM: the user's application of a function in which an operator
                         * first read it (a zero span: none, or outside any application) */
    const char *first_call_name;
    bool read_by_operator;
    uint8_t dtype;      /* its element type, TSR_DTYPE_* (docs/language.md §3.9): declared on an input,
                         * a data item, a parameter or a state tensor (an optimiser's state: its
                         * parameter's), inferred for an operation from its forward code
                         * (assign.c), f32 for everything else */
};

/* A `data` item: a generator or a file, and the tensors it fills (docs/language.md §3.2.6). */
struct DataSource {
    const char *name;      /* the item's name */
    const char *generator; /* half_moons circles spirals range uniform npy csv tokens */
    const char *path;      /* npy, csv: the file, read at run time relative to the working directory */
    int64_t count, seed;   /* tokens: count 1 for random windows, 0 for sequential ones */
    double noise, factor;
    int64_t bound;         /* > 0: its values are positions of a gathered axis of this many cells
                            * (an embedding's rows), so each must be a whole number in 0 … bound-1;
                            * the runtime checks them when they are read (assign.c sets it) */
    Tensor *fields[2];
    uint32_t field_count;
    uint32_t option;       /* generator "option": the option it holds, an index into Program.options */
    Span span;
};

/* An `option` item: a number the command line may set (docs/language.md §3.2.11). */
typedef struct ProgramOption {
    const char *name;
    bool is_float;
    double value;   /* the default */
    uint8_t among;  /* TSR_OPTION_AMONG_* bits: the narrower types its reads meet (assign_types.c) */
    Span span;
    Tensor *tensor; /* the one-cell data tensor that holds it, once it is used as a tensor */
} ProgramOption;

/* An `index` symbol, or a counter of a `for` loop in `main`. */
typedef struct IndexSymbol {
    const char *name;
    int64_t range;
    Span span;    /* its range as written (a loop's counter: its name) */
    Span item;    /* the whole `index` item (a loop's counter: its name) */
    bool counter; /* a loop counter of main, not an `index` item */
} IndexSymbol;

/* The code of a routine (docs/language.md §3.2.8), as elaborated: a sequence of steps. */
typedef enum CodeStepKind {
    STEP_FORWARD,    /* t.forward: compute t and everything it depends on */
    STEP_BACKPROP,   /* t.backprop: the backward blocks of t's graph, last operation first */
    STEP_ZERO_GRADS, /* t.zero_grads: every gradient of t's graph set to 0 */
    STEP_ASSIGN,     /* a standalone assignment, under its logic (docs/language.md §3.7.2) */
    STEP_COMPUTE,    /* compute t from the current values of the tensors made before it (ids below
                        `fresh_from`): what `print` does with an expression of `main` */
    STEP_ALL_REDUCE, /* all_reduce_mean t (or t.grad, with `grad`): t's cells become their mean
                        across the processes of a distributed run (docs/language.md §3.2.8) */
} CodeStepKind;

typedef enum CodeExprKind { CEXPR_CONST, CEXPR_TENSOR, CEXPR_OP } CodeExprKind;

typedef struct CodeExpr CodeExpr;
struct CodeExpr {
    CodeExprKind kind;
    double value;            /* CEXPR_CONST */
    Tensor *tensor;          /* CEXPR_TENSOR */
    bool grad;               /* CEXPR_TENSOR: its gradient */
    uint32_t slot;           /* CEXPR_TENSOR: its slot of the assignment's logic (1, 2, …: the
                                tensors read, in the order written; slot 0 is the left side) */
    const char *op;          /* CEXPR_OP: the primitive as written ("+", "relu") */
    bool binary;             /* CEXPR_OP: written infix */
    CodeExpr *args[3];
    uint32_t arg_count;
    Span span;
};

typedef struct CodeStep {
    CodeStepKind kind;
    Tensor *tensor;          /* FORWARD/BACKPROP/ZERO_GRADS/ALL_REDUCE; ASSIGN: the left side */
    bool grad;               /* ASSIGN: the left side is the gradient; ALL_REDUCE: t.grad */
    const char *op;          /* ASSIGN: the assignment operator ("=:", "=+") */
    CodeExpr *rhs;           /* ASSIGN */
    Logic logic;             /* ASSIGN: LOGIC_POINTWISE without ~logic: */
    const Spec *spec;        /* ASSIGN under LOGIC_SPEC: this assignment's copy (affine axes) */
    uint32_t slot_count;     /* ASSIGN: 1 + the tensors read (CodeExpr.slot) */
    uint32_t fresh_from;     /* COMPUTE */
    Span span;
    Span user_call;          /* in the standard library's code: the application the user wrote
                              * (Train.step loss …), where an error or a warning about it points */
    const char *user_call_name;
} CodeStep;

typedef struct Routine {
    const char *name;
    Span span;
    bool hidden;  /* made by `main` (a [%cd …] block, a printed expression): not exported */
    CodeStep *steps;
    uint32_t step_count, step_cap;
} Routine;

/* `main` (docs/language.md §3.2.9), as elaborated: loops over index symbols, routine runs,
 * prints, and the statements the runtime carries out (checkpoints, shuffles, series). */
typedef enum MainStepKind {
    MAIN_FOR, MAIN_RUN, MAIN_PRINT, MAIN_SAVE, MAIN_LOAD, MAIN_SHUFFLE, MAIN_RECORD, MAIN_PLOT
} MainStepKind;
typedef enum PrintArgKind { PARG_INT, PARG_FLOAT, PARG_INDEX, PARG_TENSOR, PARG_OPTION } PrintArgKind;

typedef struct PrintArg {
    PrintArgKind kind;
    int64_t i;          /* PARG_INT */
    double f;           /* PARG_FLOAT */
    uint32_t index;     /* PARG_INDEX: into Program.indexes; PARG_OPTION: into Program.options
                           (plus `i`) */
    Tensor *tensor;     /* PARG_TENSOR */
    bool grad;          /* PARG_TENSOR: its gradient (`print p.grad`), not its values */
    bool wants_float;   /* its conversion is a floating one (%f %g …) */
    bool text;          /* %s: a tensor of any number of cells, printed as bytes */
    const char *conversion; /* that conversion, in the format (conversion_len bytes) */
    int conversion_len;
    bool float_option;  /* PARG_OPTION: the option is a number, not an integer */
    Span span;
} PrintArg;

typedef struct MainStep MainStep;
struct MainStep {
    MainStepKind kind;
    Span span;
    uint32_t index;         /* FOR: the loop's symbol (Program.indexes) */
    int64_t from, to;       /* FOR: inclusive bounds (added to the options' values when set) */
    uint32_t from_option, to_option; /* FOR: a bound read from an option, or UINT32_MAX */
    bool down;              /* FOR: downto */
    bool progress;          /* FOR: wrapped in `progress`: show a progress bar */
    MainStep *body;         /* FOR */
    uint32_t body_count;
    uint32_t routine;       /* RUN: into Program.routines; PRINT: the routine computing printed
                               expressions, or UINT32_MAX */
    const char *format;     /* PRINT: a printf-like format, or NULL: print args[0] as a grid */
    const char *label;      /* PRINT as a grid: the name shown; FOR: the counter's name as written
                               (its symbol's may be made unique: e#2), which a progress bar shows */
    PrintArg *args;
    uint32_t arg_count;
    const char *text;       /* SAVE, LOAD: the file; RECORD, PLOT: the series' name */
    Tensor **tensors;       /* SAVE, LOAD: the listed parameters (none: all); RECORD: the value */
    uint32_t tensor_count;
    uint32_t source;        /* SHUFFLE: into Program.sources */
    uint32_t series;        /* RECORD, PLOT: the series' number (Program.series) */
};

/* An affine axis of one application's spec and its window in the shape solver. */
typedef struct ProgramWindow {
    SpecAffine *affine; /* the application's copy: its padding is settled after closing */
    Span span;
    bool inferred;      /* the spec left the padding open: --print-shapes reports the choice */
    uint32_t handle;    /* shape_dim_window's */
} ProgramWindow;

/* A concatenated axis of one application's spec and its constraint in the shape solver. */
typedef struct ProgramConcat {
    SpecPiece *pieces; /* the application's copy: their sizes are filled in after closing */
    uint32_t count;
    uint32_t handle; /* shape_dim_concat's */
} ProgramConcat;

typedef struct Program {
    Arena *arena;
    ShapeSolver *solver;
    Tensor **tensors; /* every tensor, in creation order */
    uint32_t tensor_count, tensor_cap;
    Tensor **named;   /* what --print-shapes lists, in order; a tensor may appear under
                         several names (see shown_names) */
    const char **shown_names;
    uint32_t named_count, named_cap;
    Routine *routines;  /* in declaration order */
    uint32_t routine_count, routine_cap;
    bool has_main;
    Span main_span; /* the `main` item, when has_main */
    MainStep *main;     /* the statements of `main` */
    uint32_t main_count;
    IndexSymbol *indexes; /* every index symbol, declared or a loop counter of main */
    uint32_t index_count, index_cap;
    DataSource **sources; /* every data item, in declaration order */
    uint32_t source_count, source_cap;
    ProgramOption *options; /* every `option` item, in declaration order */
    uint32_t option_count, option_cap;
    const char **series;    /* the names `record` gives series, in order of first use */
    uint32_t series_count, series_cap;
    ProgramWindow *windows; /* every affine axis of every spec application */
    uint32_t window_count, window_cap;
    ProgramConcat *concats; /* every concatenated axis of every spec application */
    uint32_t concat_count, concat_cap;
} Program;

typedef struct ElabOptions {
    const char **include_dirs;
    int include_count;
    size_t eval_megabytes; /* evaluation's memory budget; 0: the default (elab_internal.h, MAX_EVAL_STEPS) */
} ElabOptions;

/* Elaborate a parsed module (after the standard library prelude), then solve and close the
 * shapes.  Errors are reported through diag; the caller checks diag_error_count(). */
Program *elaborate(Module *module, const ElabOptions *options);
void program_free(Program *program);

/* One line per named tensor: "NAME : SHAPE". */
void program_print_shapes(Program *program, FILE *out);

/* The position (from 1) of an operator declaration's rest operand `tn`, its last positional
 * parameter, which stands for that operand and every one given after it (docs/language.md
 * §3.2.4); 0 when the operator has none. */
uint32_t operator_rest(const Node *op);

#endif
