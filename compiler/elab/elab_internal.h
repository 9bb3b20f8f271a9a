/* elab_internal.h — what the files of elaboration (compiler/elab/) share: the values of the
 * compile-time language, environments, closures, parameter scopes and the elaborator's state
 * (Elab), and the functions that one file of the stage calls in another.  Only the stage's own
 * files include it; its interface is elab.h.
 *
 * The files, in the order a program meets them:
 *   elab.c        the driver elaborate(): modules and their items, names for --print-shapes
 *   values.c      values, environments, tensors as values, errors, parameter scopes
 *   eval.c        expressions: closures and apply(), arithmetic, fields, bindings, size equations
 *   operators.c   operator applications: shape logics and specs as constraints, affine and
 *                 strided axes, `operator` checks, literals, sizes
 *   builtins.c    the built-in functions: constants, data sources, lists, initialisers
 *   code.c        `%cd` code: routines' statements
 *   main_block.c  `main`: prints, loops, checkpoints, shuffles, series
 * Calls go from elab.c down to the others and among them (eval() is everyone's entry); nothing
 * calls back into elab.c but qualified_name(). */
#ifndef TSR_ELAB_INTERNAL_H
#define TSR_ELAB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elab/elab.h"

/* ---- Values -------------------------------------------------------------------------------- */

typedef enum ValueKind {
    V_ERROR, /* an error was reported; propagates silently */
    V_UNIT,
    V_INT,
    V_FLOAT,
    V_BOOL,
    V_STRING,
    V_LIST,
    V_ARRAY,
    V_TUPLE,
    V_CLOSURE,
    V_TENSOR,
    V_OPERATOR,
    V_BUILTIN,
    V_INDEX,
    V_DATASET,
    V_CODE,
    V_OPTION, /* an `option` item (plus an integer offset): its value is known at run time */
    V_INIT, /* an initialiser (`kaiming_normal ()`): the initial value of a parameter */
    V_RUNTIME_SIZE, /* `?`: a size of an input or a .npy data file, known when the program runs */
} ValueKind;

typedef enum Mode { MODE_VALUE, MODE_TENSOR } Mode;

typedef struct Value Value;
typedef struct Env Env;
typedef struct Scope Scope;
typedef struct Elab Elab;
typedef struct Closure Closure;

typedef struct Arg {
    const char *label; /* NULL: positional */
    bool optional;     /* ?x:e */
    Value *value;
    Span span;
} Arg;

typedef Value *(*BuiltinFn)(Elab *e, Arg *args, uint32_t count, Span span);

typedef struct Field {
    const char *name;
    Value *value;
} Field;

struct Value {
    ValueKind kind;
    Span written; /* V_INT: where the number was written (a size given to a library function is
                   * reported there, not at the library's line that uses it); else none */
    union {
        int64_t i;
        double f;
        bool b;
        struct {
            const char *text;
            size_t len;
        } str;
        struct {
            Value **items;
            uint32_t count;
        } list;
        Closure *closure;
        Tensor *tensor;
        const Node *op;
        struct {
            const char *name;
            BuiltinFn fn;
        } builtin;
        struct {
            const char *name;
            uint32_t range;
            Span span;
            uint32_t id; /* into Program.indexes */
            bool counter; /* a loop counter of main, not an `index` item */
            int64_t offset; /* `k + 1`, `k - 1`: an integer added, which only print takes */
        } index;
        struct {
            const char *name;
            Field *fields;
            uint32_t count; /* 0 with `single`: the source is one tensor, bound as the item */
            DataSource *source;
        } dataset;
        struct {
            uint32_t id; /* into Program.options */
            int64_t offset;
        } option;
        RandomInit init;
    } as;
};

/* A local environment is a chain of bindings ending in a marker (name NULL) that stands for
 * the globals defined so far: globals live in a hash table, each binding stamped with the
 * generation it was made in, so a closure sees exactly the globals defined before it, and with
 * its owner: the unit whose items made it.  Owner 0 (OWNER_BASE) is the built-ins and the
 * prelude, which every unit sees; the program and each module it loads are units of their own,
 * which see their own globals and OWNER_BASE's alone (an `open` copies the module's globals into
 * the opener), so a module computes the same whatever the program defined before loading it. */
struct Env {
    const char *name; /* NULL: the globals of generation `gen` owned by `owner` (and OWNER_BASE) */
    Value *value;
    Env *next;
    uint32_t gen, owner;
};

enum { OWNER_BASE = 0 };

typedef struct GlobalEntry GlobalEntry;
struct GlobalEntry {
    const char *name;
    Value *value;
    uint32_t gen, owner;
    const char *opened_from; /* a copy an `open` made of module M's definition: M (not passed on), else NULL */
    GlobalEntry *next; /* same bucket, newer first */
};

enum { GLOBAL_BUCKETS = 4096 };

struct Closure {
    const Node **params;
    uint32_t param_count;
    uint32_t next;      /* first parameter not yet consumed in order */
    bool *bound;        /* labelled parameters bound out of order */
    const Node *body;
    Env *env;
    Mode mode;
    bool code;          /* a let%cd function: code, not evaluated here */
    bool scope_at_unit; /* a let%op function: its `()` opens a parameter scope */
    Scope *scope;
    const char *fn_name;
    const char *shown_as; /* a function without a name (`fun x -> …`, what `gpt_block ()` returns)
                           * applied through a variable: that variable's name, for messages
                           * ("in this application of 'blk'"); never a scope's name */
    Span user_call;     /* a let%cd function: the first application of it the user wrote
                         * (`Train.adamw ~lr ~decay:"x"`), which errors in its body lead with
                         * when the library applies it further and elaborates it later */
    const char *user_call_name;
    Span partial;       /* the application that gave it some of its positional arguments and not all
                         * (`mse y`): a function, where a let%op without parameters meant a tensor */
};

/* Inline definitions and captured dims of one parameter scope. */
typedef struct ScopeParam {
    const Node *node;
    Tensor *tensor;
} ScopeParam;

/* A captured name: a label's dimension, or for a captured row variable the number of cells
 * its axes hold (then `row_var` is the variable, shared by the scope's specs).  `label` says a
 * spec captured it as a label; `captured` is where a spec first captured it (for `equate`). */
typedef struct ScopeDim {
    const char *name;
    Dim dim;
    uint32_t row_var;
    bool label;
    Span captured;
} ScopeDim;

struct Scope {
    uint32_t id;
    const char *binding; /* the name a `let` bound its closure to */
    const char *fn_name; /* the function whose `()` opened it */
    bool toplevel;       /* unqualified names */
    const char *shown;   /* the qualifier --print-shapes uses */
    ScopeParam *params;
    uint32_t param_count, param_cap;
    ScopeDim *dims;
    uint32_t dim_count, dim_cap;
};

typedef struct NamedEntry {
    Tensor *tensor;
    const char *name; /* NULL for a parameter: its name comes from the scope */
    Scope *scope;
    const char *param_name;
} NamedEntry;

/* `dim NAME`: a number tensor whose value is the captured size, read after closing; or
 * `input_axes T` (axes_of set): the number of input axes of T, counted after closing. */
typedef struct DimReading {
    Tensor *tensor;
    Dim dim;
    const char *name;
    Span span;
    const Tensor *axes_of;
} DimReading;

/* `equate NAME1 NAME2`: two captured names of a scope, equated once elaboration is done (a
 * spec later in the text may be the one that captures them). */
typedef struct Equation {
    Scope *scope;
    const Node *names[2];
    Span span;
    OriginId why;
} Equation;

/* `settled x` evaluated: x, where, and the user's application it was evaluated in. */
typedef struct SettledUse {
    Tensor *tensor;
    Span at;
    Span call;
    const char *call_name;
} SettledUse;

struct Elab {
    DimReading *readings;
    uint32_t reading_count, reading_cap;
    Equation *equations;
    uint32_t equation_count, equation_cap;
    Equation *sizings; /* the set_dim of each (names[0] alone): its name must be captured */
    uint32_t sizing_count, sizing_cap;
    Program *program;
    Arena *arena;
    ShapeSolver *solver;
    Env *globals; /* the marker of the current generation */
    GlobalEntry **global_table;
    uint32_t generation;
    Scope *scope;
    Scope **scopes;
    uint32_t scope_count, scope_cap;
    NamedEntry *entries;
    uint32_t entry_count, entry_cap;
    unsigned depth;
    Tensor *code_subject;      /* the parameter the code being elaborated updates (the last
                                  argument of the innermost let%cd function applied, when it is
                                  a parameter), or NULL: state tensors take its element type */
    Tensor *code_namesake;     /* the tensor state tensors are named after: code_subject, or the
                                  last tensor argument (a loss) of code outside any parameter's */
    Span user_call;            /* the innermost application being evaluated that the user wrote
                                  (not the standard library's); zero span outside any */
    const char *user_call_name;
    unsigned long long steps;
    size_t bytes_at_start; /* arena_total_bytes() when elaboration began */
    size_t byte_budget;    /* what evaluation may build (MAX_EVAL_STEPS' comment) */
    bool out_of_steps;     /* a budget ran out: evaluation stops */
    const ElabOptions *options;
    struct SettledUse *settled;  /* `settled x`: tensors whose uses must not add axes (check_settled) */
    uint32_t settled_count, settled_cap;
    const char **failed_modules; /* modules whose loading reported an error */
    uint32_t failed_module_count, failed_module_cap;
    const char **opened;
    uint32_t *opened_owner; /* per opened module: the owner of its globals */
    uint32_t opened_count, opened_cap, opened_owner_count, opened_owner_cap;
    uint32_t owner, owner_count; /* the unit being elaborated (its globals' owner), and how many there are */
    const NodeList *items;       /* the items of the unit being elaborated, and the one at hand */
    uint32_t item_at;
    const char **loading; /* the modules being loaded, outermost first, and the opens that began them */
    Span *loading_at;
    uint32_t loading_count, loading_cap, loading_at_count, loading_at_cap;
    bool program_file_has_main; /* the program's own file has a main: an opened module's is not run */
    const char *main_path; /* the program's own file: no module may be it */
    struct ShuffleGroup *shuffle_groups; /* the sets of data items main shuffles (main_shuffle) */
    uint32_t shuffle_group_count, shuffle_group_cap;
    const Node **run_time_items; /* the index, data and input items so far (declared_once) */
    uint32_t run_time_item_count, run_time_item_cap;
    const char *main_dir;
    uint32_t prelude_file; /* the source of core.tsr, whose operators named as primitives are them in code */
    const Tensor **kinds_moved; /* operands a library's spec slot gave their axes in other kinds
                                   (slot_kinds_moved): reported at the first such slot only */
    uint32_t kinds_moved_count, kinds_moved_cap;
};

enum { MAX_EVAL_DEPTH = 20000 };
/* The compile-time language can loop (`for`, recursion).  Evaluation has two budgets, so that
 * a runaway program stops within about a second and a few hundred MB with an error rather
 * than hanging the compiler or exhausting memory: evaluation steps (a 10 000-line program
 * takes under 100 000), and the memory that elaboration has built (values, tensors, shape
 * constraints: arena_total_bytes() since it began), checked every EVAL_MEMORY_CHECK steps:
 * EVAL_MEGABYTES, plus EVAL_BYTES_PER_SOURCE_BYTE for each byte of the program's file (a
 * 10 000-line chain of definitions builds about 550 bytes per byte of source).  A caller may
 * set a smaller memory budget (ElabOptions.eval_megabytes: the fuzz targets, whose programs are
 * at most a few KB, so that a runaway program stops well within their per-input time cap). */
#define MAX_EVAL_STEPS 2000000ull
enum { EVAL_MEGABYTES = 256, EVAL_BYTES_PER_SOURCE_BYTE = 1024, EVAL_MEMORY_CHECK = 1024 };

/* What a slice or a stack adds at the front of one side of its equality (LOGIC_PIN_*): the
 * axis, the origin of the row it makes, and what the origins add ("of size 4 for index 'i'"). */
typedef struct PinnedAxis {
    Dim axis;
    OriginId row_origin;
    const char *detail;
} PinnedAxis;

/* A size `?` in `o = [ … ]` fields: an input's declares a run-time size, an inline definition's
 * takes the one its uses give it. */
typedef enum RuntimeSizes { SIZES_DECLARE, SIZES_FOLLOW } RuntimeSizes;
typedef struct MainList {
    MainStep *items;
    uint32_t count, cap;
} MainList;

/* `(e : _)`: the axis is the claim-free unit 1_∅, which broadcasts (seed 000; OCANNL's
 * bcast_if_1).  Only a size-1 axis can be; a basis argument, never an interned basis. */
enum { BASIS_CLAIM_FREE = UINT32_MAX };

/* ---- values.c: values, environments, tensors as values, errors, scopes ------------------------------ */

extern Value error_value;
extern Value unit_value;
extern Value runtime_size_value;
Value *new_value(Elab *e, ValueKind kind);
Value *int_value(Elab *e, int64_t i);
Value *float_value(Elab *e, double f);
Value *bool_value(Elab *e, bool b);
Value *tensor_value(Elab *e, Tensor *t);
const char *kind_noun(const Value *v);
bool is_number(const Value *v);
double number_of(const Value *v);
Env *env_bind(Elab *e, Env *env, const char *name, Value *value);
uint32_t name_hash(const char *name);
/* The global `name` that unit `owner` sees at generation `gen` (its own, or OWNER_BASE's). */
Value *lookup_global(Elab *e, const char *name, uint32_t gen, uint32_t owner);
Value *lookup(Elab *e, Env *env, const char *name);
const char *closest_in_scope(Elab *e, Env *env, const char *name);
/* For a data set used as a tensor: a note listing its fields (moons.points, moons.labels). */
void note_data_fields(Elab *e, const Value *v, Span span);
const char *closest_in_module(Elab *e, const char *module, const char *name);
/* The standard library module (not the prelude) that defines `name`, as "Nn", or NULL (elab.c). */
const char *stdlib_module_defining(Elab *e, const char *name);
/* For a name not defined at `env`: a note when it is defined later in the same unit, or by
 * another unit (a module that is not open there, or the program, whose names a module does not
 * see). */
void note_name_elsewhere(Elab *e, Env *env, const char *name, Span span);
/* Whether loading module `name` reported an error (elab.c). */
bool module_failed(const Elab *e, const char *name);
Env *bind_global(Elab *e, const char *name, Value *value);
/* bind_global for unit `owner` (a module's qualified names, OWNER_BASE; an open's copies, which
 * name the module `opened_from`: not passed on by a later open of the opener). */
Env *bind_global_of(Elab *e, uint32_t owner, const char *name, Value *value, const char *opened_from);
/* A marker for the current unit's globals as they are now (after another unit's were made). */
Env *globals_now(Elab *e);
Tensor *new_tensor(Elab *e, TensorKind kind, Span span);
/* An element type written in the program ("f32", "i32": a string, docs/language.md §3.9) into
 * *out (TSR_DTYPE_*); false after a located error, or at once for an erroneous value (its error
 * was reported where it was made). */
bool dtype_of_value(const Value *v, Span span, const char *what, uint8_t *out);
/* The element type an element-type word names ("f32", "i32", …), or -1. */
int dtype_of_word(const char *text);
OriginId origin(Elab *e, Span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Shape closed_shape(Elab *e, Span span, const char *what);
Tensor *scalar_literal(Elab *e, double value, Span span, uint32_t basis);
Tensor *as_tensor(Elab *e, Value *v, Span span, const char *what);
Value *fail(Span span, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Make `call` (named `name`; a zero span: none) the application the user wrote that is being
 * evaluated: Elab.user_call, and diag's, which puts the standard library's errors there. */
void set_user_call(Elab *e, Span call, const char *name);
Scope *new_scope(Elab *e, const char *fn_name, bool toplevel);
ScopeDim *scope_dim(Elab *e, Scope *s, const char *name, Span span);
Scope *current_scope(Elab *e);

/* ---- eval.c: closures, application, size equations, expressions ------------------------------------- */

Closure *copy_closure(Elab *e, const Closure *c);
Value *param_default(Elab *e, Closure *c, const Node *p);
Value *apply(Elab *e, Value *fn, Arg *args, uint32_t count, Span span);
void solve_equations(Elab *e);
void fill_dim_readings(Elab *e);
Env *eval_binding(Elab *e, const char *name, const NodeList *params, const Node *value, bool rec,
                  Mode mode, bool code, bool global, Env *env, Value **out);
Value *eval(Elab *e, const Node *n, Env *env, Mode mode);

/* ---- operators.c: shape logics, specs, operator declarations and applications, literals, sizes ------ */

void emit_relations(Elab *e, Logic logic, Shape *const *slots, uint32_t n, RowKind stacked,
                    const PinnedAxis *pinned, Span span, const char *what);
void settle_paddings(Elab *e);
uint32_t operator_arity(const Node *op);
bool check_compose_products(const Node *n, const char *what);
/* code.c: the error that `name` (infix when `binary`) is no primitive of %cd code, with the
 * closest primitive's name when one is near. */
void report_not_code_primitive(const char *name, bool binary, Span span);
bool check_operator(const Node *op);
const Spec *emit_logic(Elab *e, Env *env, Logic logic, const Spec *spec, Tensor *r, Tensor **ts, uint32_t n,
                       const Node *captures, Span span, const char *op);
Value *apply_operator(Elab *e, Env *env, const Node *op, Value **operands, uint32_t n, const Spec *spec,
                      const Node *captures, Span span);
Value *lookup_operator(Elab *e, Env *env, const char *name);
bool is_claim_free_annot(const Node *n);
Value *eval_literal(Elab *e, const Node *n, Env *env, uint32_t basis);
Dim runtime_size_dim(Elab *e, Span span, const char *tensor, char row, uint32_t axis, uint32_t count, bool follow);
void name_runtime_sizes(Elab *e, const Tensor *t, const char *item);
/* The size fields of a record (b, i, o) into rows/given; with `dtype` (a parameter's or a state
 * tensor's record), its `dtype` field too, f32 or f64 (left as it is when not written). */
bool record_sizes(Elab *e, const Node *rec, Env *env, const char *tensor, RuntimeSizes runtime, Row rows[ROW_KINDS],
                  bool given[ROW_KINDS], uint8_t *dtype);

/* ---- builtins.c: the built-in functions ------------------------------------------------------------- */

Value *index_value(Elab *e, const char *name, int64_t range, Span span, Span item, bool counter);
Tensor *option_tensor(Elab *e, const Value *v, Span span);
void bind_builtins(Elab *e);

/* ---- code.c: routines' statements ------------------------------------------------------------------- */

void add_step(Elab *e, Routine *r, CodeStep step);
bool code_tensor(Elab *e, const Node *n, Env *env, Tensor **t, bool *grad);
bool code_logic(const Node *logic, Logic *out, const Spec **spec);
Env *elab_code(Elab *e, Routine *r, const Node *n, Env *env);

/* ---- main_block.c: main ----------------------------------------------------------------------------- */

void elab_main(Elab *e, const Node *n, Env *env, MainList *out);

/* ---- elab.c: items, modules and the driver ---------------------------------------------------------- */

Value *qualified_name(Elab *e, const Node *n);

#endif
