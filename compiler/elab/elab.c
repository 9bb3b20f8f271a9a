/* elab.c — elaboration: evaluate the compile-time language, build the tensor graph, emit
 * shape constraints (see elab.h; the relations of each logic are logic.c's table,
 * docs/inference.md §2 lists them).
 *
 * Values are arena-allocated and immutable.  An environment is a linked list of bindings.  A
 * closure is a parameter list, a body, the environment it was made in, the parameters bound so
 * far (partial application) and the parameter scope its inline definitions go to.
 *
 * Two evaluation modes: in a `let%op` body (tensor mode) numbers and containers are tensor
 * literals and arithmetic on numbers makes tensors (`0. + 0.` is a tensor whose shape the
 * context decides); everywhere else (value mode) they are compile-time values.  Arguments of
 * `!.` `!..`, labelled arguments, size fields and conditions are always evaluated in value mode.
 *
 * Requires: a parsed module (parse.h), the embedded standard library (build/gen/stdlib_blob.c,
 * made from the .tsr files of stdlib/ by tools/embed.sh), shape.h for the constraints and logic.h
 * for the relations they come from. */
#include "elab/elab.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "front/parse.h"

/* ---- The embedded standard library --------------------------------------------------------- */

typedef struct StdlibFile {
    const char *name; /* "core.tsr" */
    const char *text;
    unsigned len;
} StdlibFile;
extern const StdlibFile tsr_stdlib_files[];
extern const unsigned tsr_stdlib_file_count;

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
 * generation it was made in, so a closure sees exactly the globals defined before it. */
struct Env {
    const char *name; /* NULL: the globals of generation `gen` */
    Value *value;
    Env *next;
    uint32_t gen;
};

typedef struct GlobalEntry GlobalEntry;
struct GlobalEntry {
    const char *name;
    Value *value;
    uint32_t gen;
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

/* `dim NAME`: a number tensor whose value is the captured size, read after closing. */
typedef struct DimReading {
    Tensor *tensor;
    Dim dim;
    const char *name;
    Span span;
} DimReading;

/* `equate NAME1 NAME2`: two captured names of a scope, equated once elaboration is done (a
 * spec later in the text may be the one that captures them). */
typedef struct Equation {
    Scope *scope;
    const Node *names[2];
    Span span;
    OriginId why;
} Equation;

struct Elab {
    DimReading *readings;
    uint32_t reading_count, reading_cap;
    Equation *equations;
    uint32_t equation_count, equation_cap;
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
    unsigned long long steps;
    size_t bytes_at_start; /* arena_total_bytes() when elaboration began */
    size_t byte_budget;    /* what evaluation may build (MAX_EVAL_STEPS' comment) */
    bool out_of_steps;     /* a budget ran out: evaluation stops */
    const ElabOptions *options;
    const char **opened;
    uint32_t opened_count, opened_cap;
    const char *main_dir;
    uint32_t prelude_file; /* the source of core.tsr, whose operators named as primitives are them in code */
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

static Value error_value = {.kind = V_ERROR};
static Value unit_value = {.kind = V_UNIT};
static Value runtime_size_value = {.kind = V_RUNTIME_SIZE};

static Value *new_value(Elab *e, ValueKind kind) {
    Value *v = arena_alloc(e->arena, sizeof *v);
    v->kind = kind;
    return v;
}

static Value *int_value(Elab *e, int64_t i) {
    Value *v = new_value(e, V_INT);
    v->as.i = i;
    return v;
}

static Value *float_value(Elab *e, double f) {
    Value *v = new_value(e, V_FLOAT);
    v->as.f = f;
    return v;
}

static Value *bool_value(Elab *e, bool b) {
    Value *v = new_value(e, V_BOOL);
    v->as.b = b;
    return v;
}

static Value *tensor_value(Elab *e, Tensor *t) {
    if (!t) return &error_value;
    Value *v = new_value(e, V_TENSOR);
    v->as.tensor = t;
    return v;
}

static const char *kind_noun(const Value *v) {
    switch (v->kind) {
    case V_ERROR: return "an erroneous value";
    case V_UNIT: return "()";
    case V_INT: return "an integer";
    case V_FLOAT: return "a float";
    case V_BOOL: return "a boolean";
    case V_STRING: return "a string";
    case V_LIST: return "a list";
    case V_ARRAY: return "an array";
    case V_TUPLE: return "a tuple";
    case V_CLOSURE: return "a function";
    case V_TENSOR: return "a tensor";
    case V_OPERATOR: return "an operator";
    case V_BUILTIN: return "a built-in function";
    case V_INDEX: return "an index symbol";
    case V_DATASET: return "a data set";
    case V_CODE: return "code";
    case V_OPTION: return "an option (its value is known when the program runs)";
    case V_INIT: return "an initialiser";
    case V_RUNTIME_SIZE: return "a run-time size '?'";
    }
    return "a value";
}

static bool is_number(const Value *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
static double number_of(const Value *v) { return v->kind == V_INT ? (double)v->as.i : v->as.f; }

static Env *bind(Elab *e, Env *env, const char *name, Value *value) {
    Env *b = arena_alloc(e->arena, sizeof *b);
    b->name = name;
    b->value = value;
    b->next = env;
    return b;
}

static uint32_t name_hash(const char *name) {
    uint32_t h = 2166136261u;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
    return h;
}

static Value *lookup_global(Elab *e, const char *name, uint32_t gen) {
    for (GlobalEntry *g = e->global_table[name_hash(name) % GLOBAL_BUCKETS]; g; g = g->next)
        if (g->gen <= gen && strcmp(g->name, name) == 0) return g->value;
    return NULL;
}

static Value *lookup(Elab *e, Env *env, const char *name) {
    for (; env; env = env->next) {
        if (!env->name) return lookup_global(e, name, env->gen);
        if (strcmp(env->name, name) == 0) return env->value;
    }
    return NULL;
}

/* The name in scope at `env` closest to `name` (a misspelling: diag_closest_name), or NULL:
 * the local bindings, then every global defined before `env`'s generation; none for a name
 * of one or two letters. */
static const char *closest_in_scope(Elab *e, Env *env, const char *name) {
    if (strlen(name) < 3) return NULL; /* every other short name is an edit away: no hint in that */
    const char **names = NULL;
    uint32_t count = 0, cap = 0, gen = 0;
    for (; env; env = env->next) {
        if (!env->name) {
            gen = env->gen;
            break;
        }
        if (isalpha((unsigned char)env->name[0]) || env->name[0] == '_') ARENA_PUSH(e->arena, names, count, cap, env->name);
    }
    for (uint32_t b = 0; b < GLOBAL_BUCKETS; b++) /* names, not operators ("( > )" is bound as ">") */
        for (GlobalEntry *g = e->global_table[b]; g; g = g->next)
            if (g->gen <= gen && (isalpha((unsigned char)g->name[0]) || g->name[0] == '_'))
                ARENA_PUSH(e->arena, names, count, cap, g->name);
    return diag_closest_name(name, names, count);
}

/* Define a global; returns the marker of the new generation. */
static Env *bind_global(Elab *e, const char *name, Value *value) {
    GlobalEntry *g = arena_alloc(e->arena, sizeof *g);
    uint32_t b = name_hash(name) % GLOBAL_BUCKETS;
    g->name = name;
    g->value = value;
    g->gen = ++e->generation;
    g->next = e->global_table[b];
    e->global_table[b] = g;
    Env *marker = arena_alloc(e->arena, sizeof *marker);
    marker->gen = e->generation;
    e->globals = marker;
    return marker;
}

/* ---- Tensors ------------------------------------------------------------------------------- */

static Tensor *new_tensor(Elab *e, TensorKind kind, Span span) {
    Program *p = e->program;
    Tensor *t = arena_alloc(e->arena, sizeof *t);
    t->id = p->tensor_count;
    t->kind = kind;
    t->span = span;
    ARENA_PUSH(e->arena, p->tensors, p->tensor_count, p->tensor_cap, t);
    return t;
}

static OriginId origin(Elab *e, Span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static OriginId origin(Elab *e, Span span, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return shape_origin(e->solver, span, buf);
}

/* Three closed empty rows, each with an origin saying so ("this tensor literal: no batch
 * axes"), for messages about a rank mismatch. */
static Shape closed_shape(Elab *e, Span span, const char *what) {
    Shape s;
    for (int k = 0; k < ROW_KINDS; k++)
        s.rows[k] = shape_empty_row(origin(e, span, "%s: no %s axes", what, logic_row_names[k]));
    return s;
}

/* A number in a tensor expression: exact shape, one claim-free output axis (seed 000: scalar
 * literals are seeded at []·◇·[1_∅]), or a unit axis of the given basis. */
static Tensor *scalar_literal(Elab *e, double value, Span span, uint32_t basis) {
    Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
    OriginId o = origin(e, span, "this number");
    t->shape = closed_shape(e, span, "this number");
    Dim d = basis ? dim_ground(1, basis, o) : dim_unit(o);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &d, 1, o);
    t->values = arena_alloc(e->arena, sizeof *t->values);
    t->values[0] = value;
    t->value_count = 1;
    return t;
}

static Tensor *option_tensor(Elab *e, const Value *v, Span span);

static Tensor *as_tensor(Elab *e, Value *v, Span span, const char *what) {
    switch (v->kind) {
    case V_TENSOR: return v->as.tensor;
    case V_OPTION: return option_tensor(e, v, span);
    case V_INT:
    case V_FLOAT: return scalar_literal(e, number_of(v), span, 0);
    case V_ERROR: return NULL;
    default:
        diag_error(span, "%s needs a tensor here, but this is %s", what, kind_noun(v));
        return NULL;
    }
}

/* ---- Errors -------------------------------------------------------------------------------- */

static Value *fail(Span span, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static Value *fail(Span span, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    diag_error(span, "%s", buf);
    return &error_value;
}

/* ---- Scopes -------------------------------------------------------------------------------- */

static Scope *new_scope(Elab *e, const char *fn_name, bool toplevel) {
    Scope *s = arena_alloc(e->arena, sizeof *s);
    s->id = e->scope_count;
    s->fn_name = fn_name;
    s->toplevel = toplevel;
    ARENA_PUSH(e->arena, e->scopes, e->scope_count, e->scope_cap, s);
    return s;
}

/* The captured name `name` of scope s, created on first mention (the pointer is valid until the
 * next capture of the scope is created). */
static ScopeDim *scope_dim(Elab *e, Scope *s, const char *name, Span span) {
    for (uint32_t i = 0; i < s->dim_count; i++)
        if (strcmp(s->dims[i].name, name) == 0) return &s->dims[i];
    ScopeDim d = {name, shape_fresh_dim(e->solver, origin(e, span, "captured dimension '%s'", name)), 0, false,
                  {0, 0, 0}};
    ARENA_PUSH(e->arena, s->dims, s->dim_count, s->dim_cap, d);
    return &s->dims[s->dim_count - 1];
}

/* The parameter scope of the code being elaborated; at the top level, one per item. */
static Scope *current_scope(Elab *e) {
    if (!e->scope) e->scope = new_scope(e, NULL, true);
    return e->scope;
}

/* ---- Forward declarations ------------------------------------------------------------------ */

static Value *eval(Elab *e, const Node *n, Env *env, Mode mode);
static Value *apply(Elab *e, Value *fn, Arg *args, uint32_t count, Span span);

/* ---- Shape logics -------------------------------------------------------------------------- */

/* What a slice or a stack adds at the front of one side of its equality (LOGIC_PIN_*): the
 * axis, the origin of the row it makes, and what the origins add ("of size 4 for index 'i'"). */
typedef struct PinnedAxis {
    Dim axis;
    OriginId row_origin;
    const char *detail;
} PinnedAxis;

/* The relations of a fixed logic (logic.c's table) between the shapes of an operation's `n`
 * slots (slot 0 its result) as constraints: ⊑ a row inequality, = a row equality; a pinned
 * axis is put in front of its side, and a slice's is a front equality (shape_row_eq_front).
 * `what` names the operation in the origins ("'+'"); relations in a row with one text share
 * their origin. */
static void emit_relations(Elab *e, Logic logic, Shape *const *slots, uint32_t n, RowKind stacked,
                           const PinnedAxis *pinned, Span span, const char *what) {
    ShapeSolver *s = e->solver;
    LogicWalk walk = logic_walk(logic, n, stacked);
    LogicPair p;
    char last[512] = "";
    OriginId why = 0;
    while (logic_next(&walk, &p)) {
        const LogicRelation *rel = p.rel;
        Row sub = slots[p.sub]->rows[p.sub_kind], super = slots[p.super]->rows[p.super_kind];
        char text[512];
        snprintf(text, sizeof text, "%s (%s%s%s%s%s)", what, rel->phrase, rel->names_kind ? ", " : "",
                 rel->names_kind ? logic_row_names[p.sub_kind] : "", rel->names_kind ? " axes" : "",
                 pinned ? pinned->detail : "");
        if (!why || strcmp(text, last) != 0) {
            why = origin(e, span, "%s", text);
            memcpy(last, text, sizeof last);
        }
        shape_set_contracting(s, rel->structural);
        if (p.sub_front) {
            Row front = shape_row_prepend(s, &pinned->axis, 1, super);
            front.origin = pinned->row_origin;
            shape_row_eq_front(s, sub, front, why);
        } else if (p.super_front) {
            Row front = shape_row_prepend(s, &pinned->axis, 1, sub);
            front.origin = pinned->row_origin;
            shape_row_eq(s, front, super, why);
        } else if (rel->equal) {
            shape_row_eq(s, sub, super, why);
        } else {
            shape_row_le(s, sub, super, why);
        }
    }
    shape_set_contracting(s, false);
}

/* A stack's shape, made from its element's by the stacking logic's equalities instead of solved
 * for: each row of slot 0 is slot 1's, sharing its row variable, with the pinned axis in front
 * of the stacked kind's. */
static void define_by_relations(Elab *e, Logic logic, Shape *const *slots, RowKind stacked, const PinnedAxis *pinned) {
    LogicWalk walk = logic_walk(logic, 2, stacked);
    LogicPair p;
    while (logic_next(&walk, &p)) {
        Row sub = slots[p.sub]->rows[p.sub_kind], *defined = &slots[p.super]->rows[p.super_kind];
        *defined = p.super_front ? shape_row_prepend(e->solver, &pinned->axis, 1, sub) : sub;
        if (p.super_front) defined->origin = pinned->row_origin;
    }
}

/* The variables of one application of a spec. */
typedef struct SpecVars {
    const char **labels;
    Dim *dims;
    uint32_t label_count, label_cap;
    const char **row_names;
    uint32_t *row_vars;
    uint32_t row_count, row_cap;
    uint32_t default_rows[ROW_KINDS];
    Scope *scope;
    const Node *captures;
    bool result; /* the result slot is being built */
} SpecVars;

static bool is_captured(const Node *captures, const char *label) {
    if (!captures) return false;
    for (uint32_t i = 0; i < captures->list.count; i++) {
        const Node *c = captures->list.items[i];
        if (c->kind == NODE_STRING && strlen(label) == c->len && memcmp(c->text, label, c->len) == 0)
            return true;
    }
    return false;
}

static Dim spec_label(Elab *e, SpecVars *sv, const char *label, Span span) {
    for (uint32_t i = 0; i < sv->label_count; i++)
        if (strcmp(sv->labels[i], label) == 0) return sv->dims[i];
    Dim d;
    if (sv->scope && is_captured(sv->captures, label)) {
        ScopeDim *c = scope_dim(e, sv->scope, label, span);
        if (!c->label && !c->row_var) c->captured = span;
        c->label = true;
        d = c->dim;
    } else {
        d = shape_fresh_dim(e->solver, origin(e, span, "label '%s' of the spec", label));
    }
    uint32_t n = sv->label_count, cap = sv->label_cap;
    ARENA_PUSH(e->arena, sv->labels, sv->label_count, sv->label_cap, label);
    ARENA_PUSH(e->arena, sv->dims, n, cap, d);
    return d;
}

static uint32_t spec_row_var(Elab *e, SpecVars *sv, const SpecRow *row) {
    if (row->row_var.kind == SPEC_ROWVAR_DEFAULT) {
        if (!sv->default_rows[row->kind])
            sv->default_rows[row->kind] = shape_fresh_row(e->solver, 0).var;
        return sv->default_rows[row->kind];
    }
    for (uint32_t i = 0; i < sv->row_count; i++)
        if (strcmp(sv->row_names[i], row->row_var.name) == 0) return sv->row_vars[i];
    uint32_t v;
    if (sv->scope && is_captured(sv->captures, row->row_var.name)) {
        /* A captured row variable is the scope's: every spec of the scope that captures the
         * name shares it, and the captured dimension counts its cells. */
        ScopeDim *c = scope_dim(e, sv->scope, row->row_var.name, row->row_var.span);
        if (!c->row_var) {
            if (!c->label) c->captured = row->row_var.span;
            c->row_var = shape_fresh_row(e->solver, 0).var;
            shape_row_product(e->solver, (Row){.var = c->row_var}, c->dim,
                              origin(e, row->row_var.span, "captured row variable '%s'", row->row_var.name));
        }
        v = c->row_var;
    } else {
        v = shape_fresh_row(e->solver, 0).var;
    }
    uint32_t n = sv->row_count, cap = sv->row_cap;
    ARENA_PUSH(e->arena, sv->row_names, sv->row_count, sv->row_cap, row->row_var.name);
    ARENA_PUSH(e->arena, sv->row_vars, n, cap, v);
    return v;
}

static Dim spec_affine(Elab *e, SpecVars *sv, const SpecAxis *ax);
static Dim spec_concat(Elab *e, SpecVars *sv, const SpecAxis *ax);

static bool spec_axis(Elab *e, SpecVars *sv, const SpecAxis *ax, Dim *out) {
    switch (ax->kind) {
    case SPEC_AXIS_LABEL: *out = spec_label(e, sv, ax->as.label, ax->span); return true;
    case SPEC_AXIS_PLACEHOLDER:
        *out = shape_fresh_dim(e->solver, origin(e, ax->span, "placeholder '_' of the spec"));
        return true;
    case SPEC_AXIS_FIXED: {
        OriginId o = origin(e, ax->span, "fixed index %d of the spec", ax->as.fixed);
        *out = shape_fresh_dim(e->solver, o);
        shape_dim_at_least(e->solver, *out, (uint32_t)ax->as.fixed + 1, o);
        return true;
    }
    case SPEC_AXIS_AFFINE:
        if (sv->result && ax->as.affine.has_kernel && !ax->as.affine.merged) {
            diag_error(ax->span, "an affine axis with a kernel may only be written in an operand slot, "
                       "not in the result (a strided axis such as 2*i+1 may be, and a merged axis (g, o))");
            return false;
        }
        *out = spec_affine(e, sv, ax);
        return true;
    case SPEC_AXIS_CONCAT: *out = spec_concat(e, sv, ax); return true;
    }
    return false;
}

static bool spec_row(Elab *e, SpecVars *sv, const SpecRow *row, OriginId o, Row *out) {
    uint32_t n = row->leading_count + row->trailing_count;
    Dim *dims = arena_alloc(e->arena, (n ? n : 1) * sizeof *dims);
    for (uint32_t i = 0; i < row->leading_count; i++)
        if (!spec_axis(e, sv, &row->leading[i], &dims[i])) return false;
    for (uint32_t i = 0; i < row->trailing_count; i++)
        if (!spec_axis(e, sv, &row->trailing[i], &dims[row->leading_count + i])) return false;
    uint32_t var = row->row_var.kind == SPEC_ROWVAR_NONE ? 0 : spec_row_var(e, sv, row);
    *out = shape_row(e->solver, dims, row->leading_count, var, dims + row->leading_count,
                     row->trailing_count, o);
    return true;
}

static bool spec_slot(Elab *e, SpecVars *sv, const SpecSlot *slot, Shape *out, const char *what) {
    for (int k = 0; k < ROW_KINDS; k++) {
        OriginId o = origin(e, slot->rows[k].omitted ? slot->span : slot->rows[k].span,
                            "%s of the spec (%s axes%s)", what, logic_row_names[k],
                            slot->rows[k].omitted ? ", not written: none" : "");
        if (!spec_row(e, sv, &slot->rows[k], o, &out->rows[k])) return false;
    }
    return true;
}

static void emit_spec_slots(Elab *e, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                            const Node *captures, Span span, const char *op);

/* ---- Affine and strided axes: a copy of the spec per application -------------------------- */

static bool needs_copy(SpecAxisKind k) { return k == SPEC_AXIS_AFFINE || k == SPEC_AXIS_CONCAT; }

static bool spec_has_affine_row(const SpecRow *row) {
    for (uint32_t i = 0; i < row->leading_count; i++)
        if (needs_copy(row->leading[i].kind)) return true;
    for (uint32_t i = 0; i < row->trailing_count; i++)
        if (needs_copy(row->trailing[i].kind)) return true;
    return false;
}

static bool spec_has_affine_slot(const SpecSlot *slot) {
    for (int k = 0; k < SPEC_ROW_KINDS; k++)
        if (spec_has_affine_row(&slot->rows[k])) return true;
    return false;
}

/* A stride or dilation as a number: written, or the name of an integer value in `env`. */
static bool resolve_coeff(Elab *e, Env *env, SpecCoeff *c, const char *role) {
    if (c->kind == SPEC_COEFF_INT) return true;
    Value *v = env ? lookup(e, env, c->as.name) : NULL;
    if (!v) {
        diag_error(c->span, "the %s '%s' is not defined here: it must name an integer value in scope", role,
                   c->as.name);
        return false;
    }
    if (v->kind != V_INT || v->as.i < 1 || v->as.i > INT32_MAX) {
        diag_error(c->span, "the %s '%s' must be a positive integer, but it is %s", role, c->as.name,
                   v->kind == V_INT ? arena_printf(e->arena, "%lld", (long long)v->as.i) : kind_noun(v));
        return false;
    }
    c->kind = SPEC_COEFF_INT;
    c->as.value = (int32_t)v->as.i;
    return true;
}

static bool resolve_axes(Elab *e, Env *env, SpecAxis **axes, uint32_t count) {
    if (!count) return true;
    SpecAxis *copy = arena_alloc(e->arena, count * sizeof *copy);
    memcpy(copy, *axes, count * sizeof *copy);
    *axes = copy;
    for (uint32_t i = 0; i < count; i++) {
        if (copy[i].kind == SPEC_AXIS_CONCAT) { /* its pieces get this application's sizes */
            SpecPiece *pieces = arena_alloc(e->arena, copy[i].as.concat.count * sizeof *pieces);
            memcpy(pieces, copy[i].as.concat.pieces, copy[i].as.concat.count * sizeof *pieces);
            copy[i].as.concat.pieces = pieces;
        }
        if (copy[i].kind != SPEC_AXIS_AFFINE || copy[i].as.affine.merged) continue;
        SpecAffine *a = &copy[i].as.affine;
        if (!resolve_coeff(e, env, &a->stride, "stride")) return false;
        if (a->has_kernel && !resolve_coeff(e, env, &a->dilation, "dilation")) return false;
        if (a->offset >= a->stride.as.value) {
            diag_error(a->offset_span, "the offset %d is not below the stride %d", a->offset, a->stride.as.value);
            return false;
        }
    }
    return true;
}

/* The spec of one application: its affine axes copied with the strides and dilations
 * resolved to numbers, so that projection inference reads them and the padding the shape
 * solver settles can be written into them, and its concatenations copied to receive their
 * pieces' sizes.  A spec with neither is shared. */
static const Spec *spec_for_application(Elab *e, Env *env, const Spec *spec) {
    bool any = spec_has_affine_slot(&spec->lhs);
    for (uint32_t i = 0; i < spec->rhs_count; i++) any = any || spec_has_affine_slot(&spec->rhs[i]);
    if (!any) return spec;
    Spec *copy = arena_alloc(e->arena, sizeof *copy);
    *copy = *spec;
    copy->rhs = arena_alloc(e->arena, spec->rhs_count * sizeof *copy->rhs);
    memcpy(copy->rhs, spec->rhs, spec->rhs_count * sizeof *copy->rhs);
    for (uint32_t i = 0; i <= spec->rhs_count; i++) {
        SpecSlot *slot = i < spec->rhs_count ? &copy->rhs[i] : &copy->lhs;
        for (int k = 0; k < SPEC_ROW_KINDS; k++) {
            SpecRow *row = &slot->rows[k];
            if (!resolve_axes(e, env, &row->leading, row->leading_count)) return NULL;
            if (!resolve_axes(e, env, &row->trailing, row->trailing_count)) return NULL;
        }
    }
    return copy;
}

/* An affine or strided axis: a fresh size for the operand's axis, tied to its labels by a
 * window constraint (shape.h); the padding it ends with is written back after closing. */
static Dim spec_affine(Elab *e, SpecVars *sv, const SpecAxis *ax) {
    SpecAffine *a = (SpecAffine *)&ax->as.affine; /* this application's copy */
    const char *pad = a->padding == SPEC_PAD_SAME ? "=" : a->padding == SPEC_PAD_VALID ? "<" : "";
    OriginId o = a->merged       ? origin(e, ax->span, "merged axis '(%s, %s)' of the spec", a->over.name, a->kernel.name)
                 : a->has_kernel ? origin(e, ax->span, "affine axis '%d*%s%s+%d*%s' of the spec", a->stride.as.value,
                                          a->over.name, pad, a->dilation.as.value, a->kernel.name)
                                 : origin(e, ax->span, "strided axis '%d*%s' of the spec", a->stride.as.value,
                                          a->over.name);
    Dim input = shape_fresh_dim(e->solver, o);
    Dim over = spec_label(e, sv, a->over.name, a->over.span);
    Dim kernel = a->has_kernel ? spec_label(e, sv, a->kernel.name, a->kernel.span) : input;
    Window w = {.stride = (uint32_t)a->stride.as.value,
                .dilation = a->has_kernel ? (uint32_t)a->dilation.as.value : 1,
                .offset = (uint32_t)a->offset,
                .has_kernel = a->has_kernel,
                .padding = a->padding == SPEC_PAD_SAME    ? WINDOW_PAD_SAME
                           : a->padding == SPEC_PAD_VALID ? WINDOW_PAD_VALID
                                                          : WINDOW_PAD_INFERRED,
                .merge = a->merged};
    ProgramWindow pw = {a, ax->span, a->padding == SPEC_PAD_UNSPECIFIED && a->has_kernel,
                        shape_dim_window(e->solver, input, over, kernel, w, o)};
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->windows, p->window_count, p->window_cap, pw);
    return input;
}

/* A concatenated axis: a fresh size for the axis, the sum of its pieces' (shape.h); the
 * pieces' sizes are written back after closing. */
static Dim spec_concat(Elab *e, SpecVars *sv, const SpecAxis *ax) {
    uint32_t n = ax->as.concat.count;
    OriginId o = origin(e, ax->span, "concatenated axis '%s' of the spec",
                        arena_printf(e->arena, "%.*s", (int)(ax->span.end - ax->span.start),
                                     source_get(ax->span.file)->text + ax->span.start));
    Dim total = shape_fresh_dim(e->solver, o);
    Dim *parts = arena_alloc(e->arena, n * sizeof *parts);
    for (uint32_t i = 0; i < n; i++) {
        const SpecPiece *piece = &ax->as.concat.pieces[i];
        parts[i] = piece->kind == SPEC_PIECE_LABEL
                       ? spec_label(e, sv, piece->as.label, piece->span)
                       : dim_ground((uint32_t)piece->as.size, BASIS_DEFAULT,
                                    origin(e, piece->span, "the fixed component %d of the spec", piece->as.size));
    }
    ProgramConcat pc = {(SpecPiece *)ax->as.concat.pieces, n, shape_dim_concat(e->solver, total, parts, n, o)};
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->concats, p->concat_count, p->concat_cap, pc);
    return total;
}

/* After closing: every affine axis takes the padding its window settled (a merged axis its
 * stride, the inner size), every concatenation piece its size. */
static void settle_paddings(Elab *e) {
    for (uint32_t i = 0; i < e->program->concat_count; i++) {
        ProgramConcat *pc = &e->program->concats[i];
        for (uint32_t j = 0; j < pc->count; j++)
            pc->pieces[j].inferred_size = shape_concat_part_size(e->solver, pc->handle, j);
    }
    for (uint32_t i = 0; i < e->program->window_count; i++) {
        ProgramWindow *pw = &e->program->windows[i];
        WindowPadding pad = shape_window_padding(e->solver, pw->handle);
        if (pw->affine->has_kernel)
            pw->affine->padding = pad == WINDOW_PAD_SAME ? SPEC_PAD_SAME : SPEC_PAD_VALID;
        shape_window_sizes(e->solver, pw->handle, &pw->affine->over_size, &pw->affine->kernel_size);
        if (pw->affine->merged) pw->affine->stride.as.value = (int32_t)pw->affine->kernel_size;
    }
}

/* The spec the tensor keeps (this application's copy when it has affine axes), or NULL. */
static const Spec *emit_spec(Elab *e, Env *env, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                             const Node *captures, Span span, const char *op) {
    if (spec->rhs_count != n) {
        diag_error(spec->span, "this spec has %u operand slot%s, but '%s' takes %u operand%s",
                   spec->rhs_count, spec->rhs_count == 1 ? "" : "s", op, n, n == 1 ? "" : "s");
        return spec;
    }
    const Spec *applied = spec_for_application(e, env, spec);
    if (!applied) return spec;
    shape_set_contracting(e->solver, true);
    emit_spec_slots(e, r, ops, n, applied, captures, span, op);
    shape_set_contracting(e->solver, false);
    return applied;
}

static void emit_spec_slots(Elab *e, Tensor *r, Tensor **ops, uint32_t n, const Spec *spec,
                            const Node *captures, Span span, const char *op) {
    SpecVars sv = {0};
    sv.scope = e->scope;
    sv.captures = captures;
    if (captures) sv.scope = current_scope(e);
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t s;
        const SpecSlot *template = logic_spec_template(spec, i, &s);
        Shape slot;
        char what[32];
        if (s) snprintf(what, sizeof what, "operand %u", s);
        else snprintf(what, sizeof what, "the result");
        sv.result = s == 0;
        if (!spec_slot(e, &sv, template, &slot, what)) return;
        if (s) shape_eq(e->solver, &ops[s - 1]->shape, &slot,
                        origin(e, span, "einsum '%s' (operand %u against its slot of the spec)", op, s));
        else shape_eq(e->solver, &r->shape, &slot, origin(e, span, "einsum '%s' (the result against its slot)", op));
    }
    if (captures) {
        for (uint32_t i = 0; i < captures->list.count; i++) {
            const Node *c = captures->list.items[i];
            bool found = false;
            for (uint32_t j = 0; j < sv.label_count && !found; j++)
                found = strlen(sv.labels[j]) == c->len && memcmp(sv.labels[j], c->text, c->len) == 0;
            for (uint32_t j = 0; j < sv.row_count && !found; j++)
                found = strlen(sv.row_names[j]) == c->len && memcmp(sv.row_names[j], c->text, c->len) == 0;
            if (!found)
                diag_error(c->span, "the spec has no label or row variable '%.*s' to capture", (int)c->len, c->text);
        }
    }
}

/* ---- Operator application ------------------------------------------------------------------ */

static uint32_t operator_arity(const Node *op) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_POSITIONAL) n++;
    return n;
}

/* `tn`, `vn`, `gn`: the slot names of the rest operand. */
static bool is_rest_slot_name(const char *name) {
    return strchr("tvg", name[0]) && name[1] == 'n' && name[2] == '\0';
}

uint32_t operator_rest(const Node *op) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_POSITIONAL) {
            k++;
            if (strcmp(op->list.items[i]->name, "tn") == 0) return k;
        }
    return 0;
}

/* Reports the slot names of an operator's code block (t1, v2, g3, …) that name an operand the
 * operator does not have; false when there is one. */
static bool check_slot_names(const Node *n, const char *op_name, uint32_t arity, bool rest) {
    if (!n) return true;
    bool ok = true;
    if (n->kind == NODE_VAR && strchr("tvg", n->name[0]) && n->name[1] >= '1' && n->name[1] <= '9' &&
        n->name[2] == '\0' && (uint32_t)(n->name[1] - '0') > arity) {
        diag_error(n->span, "'%s' names operand %c, but operator '%s' has %u", n->name, n->name[1], op_name, arity);
        ok = false;
    }
    if (n->kind == NODE_VAR && !rest && is_rest_slot_name(n->name)) {
        diag_error(n->span, "'%s' names the rest operand, but operator '%s' has none (its last operand would be "
                   "named tn)", n->name, op_name);
        ok = false;
    }
    ok &= check_slot_names(n->a, op_name, arity, rest);
    ok &= check_slot_names(n->b, op_name, arity, rest);
    ok &= check_slot_names(n->c, op_name, arity, rest);
    for (uint32_t i = 0; i < n->list.count; i++) ok &= check_slot_names(n->list.items[i], op_name, arity, rest);
    return ok;
}

/* Under the compose logic a forward assignment accumulates products over the contracted axes,
 * so its right-hand side must be a semiring product: `*` (with `+`, max or min accumulation),
 * `+` (max-plus, min-plus; or a fused add after a product) or `&&` (with `||`).  `/`, `**`,
 * `-` and the gates are not: contracting them would depend on the order of the sum (OCANNL
 * rejects them too).  The same holds for an assignment of a routine under "@".  `what` names
 * the owner in the message ("operator 'foo'", "this assignment").  Reports each offending
 * assignment; false when there is one. */
static bool check_compose_products(const Node *n, const char *what) {
    if (!n) return true;
    if (n->kind == NODE_ASSIGN) {
        const Node *r = n->b;
        if (r && r->kind == NODE_BINOP && strcmp(r->name, "*") != 0 && strcmp(r->name, "+") != 0 &&
            strcmp(r->name, "&&") != 0) {
            diag_error(r->span, "%s has the compose logic \"@\", but '%s' is not a semiring product "
                       "to sum over the contracted axes", what, r->name);
            diag_note(r->span, "a compose accumulates a product of its operands ('*'; '+' for max-plus; '&&'); "
                      "for '%s', use the pointwise logic \".\"", r->name);
            return false;
        }
        return true;
    }
    bool ok = check_compose_products(n->a, what) & check_compose_products(n->b, what);
    for (uint32_t i = 0; i < n->list.count; i++) ok &= check_compose_products(n->list.items[i], what);
    return ok;
}

/* The assignments of an operator's code block, in order (a block is a sequence, possibly
 * commented). */
static void block_assignments(Arena *arena, const Node *n, const Node ***out, uint32_t *count, uint32_t *cap) {
    if (!n) return;
    if (n->kind == NODE_CODE) block_assignments(arena, n->a, out, count, cap);
    else if (n->kind == NODE_COMMENTED) block_assignments(arena, n->b, out, count, cap);
    else if (n->kind == NODE_SEQ)
        for (uint32_t i = 0; i < n->list.count; i++) block_assignments(arena, n->list.items[i], out, count, cap);
    else if (n->kind == NODE_ASSIGN) ARENA_PUSH(arena, *out, *count, *cap, n);
}

/* An operator declared without ~logic: takes its shapes and loops from its blocks (as OCANNL's
 * operations do from their assignments): every assignment of both blocks has a logic of its own,
 * `v =:+ v1 * v2 ~logic:"i, j; j, k => i, k"`, whose operands are the slots the right side
 * reads, in the order written, as in a routine's assignment (§3.7.2).  Such blocks define no
 * local values (`{ x } =: …` would hide which slots an assignment reads).  Reports what does
 * not fit; false then. */
static bool check_block_logics(const Node *op, Span keyword) {
    const char *name = op->name;
    bool ok = true, any = false;
    for (uint32_t i = 0; i < op->list.count; i++)
        if (op->list.items[i]->flag == PARAM_LABELLED) {
            diag_error(op->list.items[i]->span, "'~%s' would be a spec parameter, but operator '%s' has no ~logic: "
                       "to give it to", op->list.items[i]->name, name);
            ok = false;
        }
    const Node *blocks[2] = {op->a, op->b};
    for (int k = 0; k < 2; k++) {
        Arena *scratch = arena_new();
        const Node **as = NULL;
        uint32_t count = 0, cap = 0;
        block_assignments(scratch, blocks[k], &as, &count, &cap);
        for (uint32_t i = 0; i < count; i++) {
            const Node *a = as[i];
            any = true;
            if (a->a->kind == NODE_RECORD) {
                diag_error(a->span, "operator '%s' has no ~logic:, so its blocks define no local values (each "
                           "assignment reads the slots it names)", name);
                ok = false;
            } else if (!a->c) {
                diag_error(a->span, "operator '%s' has no ~logic:, so this assignment needs a logic of its own "
                           "(~logic:\".\", \"@\", \"T\" or an einsum spec)", name);
                diag_note(keyword, "or give the operator one: write ~logic: before '=', with \".\" (pointwise), "
                          "\"@\" (compose), \"T\" (transpose), an einsum spec, or a labelled spec parameter "
                          "(~logic:spec)");
                ok = false;
            } else if (a->c->kind == NODE_STRING && a->c->len == 1 && a->c->text[0] == '@') {
                char what[160];
                snprintf(what, sizeof what, "this assignment of operator '%s'", name);
                ok &= check_compose_products(a, what);
            }
            const Node **reads = NULL;
            uint32_t read_count = 0, read_cap = 0;
            ast_code_reads(scratch, a->b, &reads, &read_count, &read_cap);
            for (uint32_t j = 0; j < read_count; j++) {
                uint32_t slot;
                bool grad;
                if (!ast_slot_name(reads[j]->name, &slot, &grad)) {
                    diag_error(reads[j]->span, "'%s' is not a slot of operator '%s' (v, v1, g, g1, …)",
                               reads[j]->name, name);
                    ok = false;
                }
            }
            if (a->c && a->c->kind == NODE_STRING && a->c->spec && a->c->spec->rhs_count != read_count) {
                diag_error(a->c->spec->span, "this spec has %u operand slot%s, but the right side of the assignment "
                           "reads %u slot%s", a->c->spec->rhs_count, a->c->spec->rhs_count == 1 ? "" : "s",
                           read_count, read_count == 1 ? "" : "s");
                diag_note(a->b->span, "each slot the right side reads, in the order written, fills the next operand "
                          "slot of the spec");
                ok = false;
            }
        }
        arena_free(scratch);
    }
    if (!any) {
        diag_error(keyword, "operator '%s' has no shape logic: write ~logic: before '=', with \".\" (pointwise), "
                   "\"@\" (compose), \"T\" (transpose), an einsum spec, or a labelled spec parameter (~logic:spec)",
                   name);
        ok = false;
    }
    return ok;
}

/* Checks an operator declaration (docs/language.md §3.2.4) before anything applies it: a shape
 * logic is required, the parameters are operands (t1 t2 …) and labelled spec parameters, each
 * named once, a fixed logic fits the number of operands, and the code blocks name no operand
 * beyond them.  Reports every problem; true when there is none. */
static bool check_operator(const Node *op) {
    const char *name = op->name;
    bool ok = true;
    for (uint32_t i = 0; i < op->list.count; i++) {
        const Node *p = op->list.items[i];
        if (p->flag != PARAM_POSITIONAL && p->flag != PARAM_LABELLED) {
            diag_error(p->span, "an operator's parameters are its tensor operands (t1 t2 …) and labelled spec "
                       "parameters (~spec); '%s' is neither", p->flag == PARAM_WILDCARD ? "_" : p->name);
            ok = false;
            continue;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(op->list.items[j]->name, p->name) == 0) {
                diag_error(p->span, "operator '%s' has two parameters named '%s'", name, p->name);
                diag_note(op->list.items[j]->span, "the first is here");
                ok = false;
                break;
            }
    }
    uint32_t arity = operator_arity(op);
    uint32_t rest = operator_rest(op);
    Span keyword = span_make(op->span.file, op->span.start, op->span.start + (uint32_t)strlen("operator"));
    if (rest && rest != arity) {
        for (uint32_t i = 0; i < op->list.count; i++)
            if (op->list.items[i]->flag == PARAM_POSITIONAL && strcmp(op->list.items[i]->name, "tn") == 0)
                diag_error(op->list.items[i]->span, "the rest operand 'tn' of operator '%s' must be its last operand",
                           name);
        ok = false;
    }
    if (arity && !(check_slot_names(op->a, name, arity, rest != 0) & check_slot_names(op->b, name, arity, rest != 0)))
        ok = false;
    if (arity == 0) {
        diag_error(keyword, "operator '%s' has no tensor operand: name its operands after the operator's name, "
                   "as in 'operator %s t1 ~logic:\".\" = …'", name, name);
        ok = false;
    }
    const Node *logic = op->c;
    if (!logic) return check_block_logics(op, keyword) && ok;
    for (uint32_t i = 0; i < op->list.count; i++) {
        const Node *p = op->list.items[i];
        if (p->flag == PARAM_LABELLED && (logic->kind != NODE_VAR || strcmp(p->name, logic->name) != 0)) {
            diag_error(p->span, "'~%s' is not the spec parameter of operator '%s' (that would be ~logic:%s); "
                       "an operator's other parameters are its tensor operands", p->name, name, p->name);
            ok = false;
        }
    }
    if (logic->kind == NODE_VAR) {
        bool named = false;
        for (uint32_t i = 0; i < op->list.count; i++)
            named |= op->list.items[i]->flag == PARAM_LABELLED && strcmp(op->list.items[i]->name, logic->name) == 0;
        if (!named) {
            diag_error(logic->span, "'~logic:%s' names no labelled parameter ~%s of the operator", logic->name,
                       logic->name);
            ok = false;
        }
    } else if (logic->kind != NODE_STRING || (!logic->spec && logic->len != 1)) {
        ok = false; /* the parser reported it */
    } else if (logic->spec) {
        if (arity && logic->spec->rhs_count != arity && !(rest && logic->spec->rhs_count > arity)) {
            diag_error(logic->spec->span, "this spec has %u operand slot%s, but operator '%s' has %u operand%s",
                       logic->spec->rhs_count, logic->spec->rhs_count == 1 ? "" : "s", name, arity,
                       arity == 1 ? "" : "s");
            ok = false;
        }
    } else if (arity && ((logic->text[0] == '@' && arity != 2 && arity != 3) || (logic->text[0] == 'T' && arity != 1))) {
        diag_error(logic->span, "logic \"%c\" needs %s, but operator '%s' has %u", logic->text[0],
                   logic->text[0] == '@' ? "two or three operands" : "one operand", name, arity);
        ok = false;
    } else if (logic->text[0] == '@') {
        char what[160];
        snprintf(what, sizeof what, "operator '%s'", name);
        ok &= check_compose_products(op->a, what);
    }
    return ok;
}

/* The shape constraints of one operation under its logic: result `r`, operands `ts` (which
 * fit the logic; a spec's slot count is checked here).  Operator applications and the
 * assignments of routines both come here, so an assignment `c =:+ a * b ~logic:"@"` relates
 * its tensors as `a * b` relates its operands and result.  Returns the spec the operation
 * keeps (this application's copy, emit_spec), NULL for the fixed logics. */
static const Spec *emit_logic(Elab *e, Env *env, Logic logic, const Spec *spec, Tensor *r, Tensor **ts, uint32_t n,
                              const Node *captures, Span span, const char *op) {
    if (logic == LOGIC_SPEC) return emit_spec(e, env, r, ts, n, spec, captures, span, op);
    Shape *few[8], **slots = n < 8 ? few : arena_alloc(e->arena, (n + 1) * sizeof *slots);
    slots[0] = &r->shape;
    for (uint32_t i = 0; i < n; i++) slots[i + 1] = &ts[i]->shape;
    char what[160];
    snprintf(what, sizeof what, "'%s'", op);
    emit_relations(e, logic, slots, n + 1, ROW_KINDS, NULL, span, what);
    return NULL;
}

static bool code_logic(const Node *logic, Logic *out, const Spec **spec);

/* The shape constraints of an operator without ~logic: (check_block_logics): those of each
 * assignment of its forward block under that assignment's own logic, the left side (`v`) as the
 * result and the slots read as operands, in the order written.  The backward block adds none:
 * its projections are derived from the closed shapes (assign.c), which these constraints
 * settle. */
static bool emit_block_logics(Elab *e, Env *env, const Node *op, Tensor *r, Tensor **ops, Span span) {
    const Node **as = NULL;
    uint32_t count = 0, cap = 0;
    block_assignments(e->arena, op->a, &as, &count, &cap);
    for (uint32_t i = 0; i < count; i++) {
        Logic logic;
        const Spec *spec;
        if (!code_logic(as[i]->c, &logic, &spec)) return false;
        const Node **reads = NULL;
        uint32_t read_count = 0, read_cap = 0;
        ast_code_reads(e->arena, as[i]->b, &reads, &read_count, &read_cap);
        Tensor **ts = arena_alloc(e->arena, (read_count ? read_count : 1) * sizeof *ts);
        for (uint32_t j = 0; j < read_count; j++) {
            uint32_t slot;
            bool grad;
            ast_slot_name(reads[j]->name, &slot, &grad);
            ts[j] = slot == 0 ? r : ops[slot - 1];
        }
        const char *needs = logic_operands_needed(logic, read_count);
        if (needs) {
            diag_error(as[i]->c->span, "logic \"%c\" needs %s, but the right side of the assignment reads %u slot%s",
                       as[i]->c->text[0], needs, read_count, read_count == 1 ? "" : "s");
            diag_note(span, "operator '%s' is applied here", op->name);
            return false;
        }
        emit_logic(e, env, logic, spec, r, ts, read_count, NULL, span, op->name);
    }
    return true;
}

/* Apply operator declaration `op` to tensor operands; `spec` for ~logic:spec operators. */
static Value *apply_operator(Elab *e, Env *env, const Node *op, Value **operands, uint32_t n, const Spec *spec,
                             const Node *captures, Span span) {
    const char *name = op->name;
    uint32_t arity = operator_arity(op);
    bool rest = operator_rest(op) != 0;
    if (rest ? n < arity : n != arity)
        return fail(span, "'%s' takes %s%u tensor operand%s, but %u %s given", name, rest ? "at least " : "", arity,
                    arity == 1 ? "" : "s", n, n == 1 ? "is" : "are");
    Tensor **ts = arena_alloc(e->arena, (n ? n : 1) * sizeof *ts);
    for (uint32_t i = 0; i < n; i++) {
        char what[128];
        snprintf(what, sizeof what, "'%s'", name);
        ts[i] = as_tensor(e, operands[i], span, what);
        if (!ts[i]) return &error_value;
    }
    const Node *logic = op->c;
    Tensor *r = new_tensor(e, TENSOR_OP, span);
    r->op = op;
    r->op_name = name;
    r->operands = ts;
    r->operand_count = n;
    r->shape = shape_fresh(e->solver, origin(e, span, "the result of '%s'", name));
    if (!logic) {
        r->logic = LOGIC_NONE;
        return emit_block_logics(e, env, op, r, ts, span) ? tensor_value(e, r) : &error_value;
    }
    if (logic->kind == NODE_VAR) {
        if (!spec) return fail(span, "'%s' needs an einsum spec: write it after the operator, as in "
                               "a %s \"i, j; j, k => i, k\" b", name, name);
        r->logic = LOGIC_SPEC;
    } else if (logic->spec) {
        r->logic = LOGIC_SPEC;
        spec = logic->spec;
    } else {
        r->logic = logic_named(logic->len ? logic->text[0] : '.');
        const char *needs = logic_operands_needed(r->logic, n);
        if (needs) return fail(logic->span, "logic \"%c\" needs %s", logic->text[0], needs);
    }
    r->spec = emit_logic(e, env, r->logic, spec, r, ts, n, captures, span, name);
    return tensor_value(e, r);
}

static Value *lookup_operator(Elab *e, Env *env, const char *name) {
    Value *v = lookup(e, env, name);
    return v && v->kind == V_OPERATOR ? v : NULL;
}

/* ---- Literals ------------------------------------------------------------------------------ */

static RowKind container_row(NodeKind kind) {
    return kind == NODE_ARRAY ? ROW_BATCH : kind == NODE_TUPLE ? ROW_INPUT : ROW_OUTPUT;
}

static const char *container_noun(NodeKind kind) {
    return kind == NODE_ARRAY ? "array" : kind == NODE_TUPLE ? "tuple" : "list";
}

static Value *eval_literal(Elab *e, const Node *n, Env *env, uint32_t basis);

/* `(e : _)`: the axis is the claim-free unit 1_∅, which broadcasts (seed 000; OCANNL's
 * bcast_if_1).  Only a size-1 axis can be; a basis argument, never an interned basis. */
enum { BASIS_CLAIM_FREE = UINT32_MAX };
static bool is_claim_free_annot(const Node *n) { return n->kind == NODE_ANNOT && strcmp(n->name, "_") == 0; }

/* A literal element: numbers stay numbers, containers become tensors. */
static Value *eval_element(Elab *e, const Node *n, Env *env) {
    if (n->kind == NODE_LIST || n->kind == NODE_ARRAY || (n->kind == NODE_TUPLE))
        return eval_literal(e, n, env, 0);
    return eval(e, n, env, MODE_TENSOR);
}

static Value *eval_literal(Elab *e, const Node *n, Env *env, uint32_t basis) {
    uint32_t count = n->list.count;
    if (count == 0) return fail(n->span, "an empty %s has no shape to give a tensor", container_noun(n->kind));
    Value **items = arena_alloc(e->arena, count * sizeof *items);
    bool numbers = true, tensors = true;
    for (uint32_t i = 0; i < count; i++) {
        items[i] = eval_element(e, n->list.items[i], env);
        if (items[i]->kind == V_ERROR) return &error_value;
        if (!is_number(items[i])) numbers = false;
        if (items[i]->kind != V_TENSOR) tensors = false;
    }
    RowKind kind = container_row(n->kind);
    OriginId o = origin(e, n->span, "this tensor literal (%s axis)", logic_row_names[kind]);
    if (basis == BASIS_CLAIM_FREE && count != 1)
        return fail(n->span, "only a size-1 axis can be marked broadcastable with '(… : _)', but this %s has %u elements",
                    container_noun(n->kind), count);
    Dim axis = basis == BASIS_CLAIM_FREE ? dim_unit(o) : dim_ground(count, basis ? basis : BASIS_DEFAULT, o);
    if (numbers) {
        Tensor *t = new_tensor(e, TENSOR_LITERAL, n->span);
        t->shape = closed_shape(e, n->span, "this tensor literal");
        t->shape.rows[kind] = shape_closed_row(e->solver, &axis, 1, o);
        t->values = arena_alloc(e->arena, count * sizeof *t->values);
        for (uint32_t i = 0; i < count; i++) t->values[i] = number_of(items[i]);
        t->value_count = count;
        return tensor_value(e, t);
    }
    if (!tensors) {
        for (uint32_t i = 0; i < count; i++)
            if (items[i]->kind != V_TENSOR && !is_number(items[i]))
                return fail(n->list.items[i]->span, "a tensor literal holds numbers or tensors, not %s",
                            kind_noun(items[i]));
        return fail(n->span, "this %s mixes numbers and tensors; write every element as a tensor "
                    "of the same shape", container_noun(n->kind));
    }
    Tensor *t = new_tensor(e, TENSOR_STACK, n->span);
    t->operands = arena_alloc(e->arena, count * sizeof *t->operands);
    t->operand_count = count;
    Tensor *first = items[0]->as.tensor;
    for (uint32_t i = 0; i < count; i++) {
        t->operands[i] = items[i]->as.tensor;
        if (i > 0)
            shape_eq(e->solver, &items[i]->as.tensor->shape, &first->shape,
                     origin(e, n->list.items[i]->span,
                            "element %u of this %s (every element must have the shape of the first)",
                            i + 1, container_noun(n->kind)));
    }
    Shape *slots[2] = {&t->shape, &first->shape};
    define_by_relations(e, LOGIC_STACK, slots, kind, &(PinnedAxis){axis, o, ""});
    return tensor_value(e, t);
}

/* ---- Sizes (`o = [ … ]` fields, `input`) ---------------------------------------------------- */

/* The `?` written for axis `axis` of `count` of row `row` ('b', 'i', 'o') of `tensor`, named for
 * its setter: "x.b" (the row's one axis), "x.o0" (axis 0 of several; a run-time axis is the
 * outermost).  In an inline definition (`follow`) it has no setter: it is whatever run-time size
 * its uses give it. */
static Dim runtime_size_dim(Elab *e, Span span, const char *tensor, char row, uint32_t axis, uint32_t count, bool follow) {
    if (follow)
        return shape_runtime_dim(e->solver, origin(e, span, "the run-time size written for '%s' (its uses give it)", tensor),
                                 NULL);
    const char *name = count == 1 ? arena_printf(e->arena, "%s.%c", tensor, row)
                                  : arena_printf(e->arena, "%s.%c%u", tensor, row, axis);
    return shape_runtime_dim(e->solver, origin(e, span, "the run-time size written for '%s'", tensor), name);
}

/* The `?` of a data item's tensor were named after its source ("npy.b"): now after the item. */
static void name_runtime_sizes(Elab *e, const Tensor *t, const char *item) {
    for (int k = 0; k < ROW_KINDS; k++)
        for (uint32_t j = 0; j < t->shape.rows[k].count; j++) {
            uint32_t i = shape_runtime_decl_of(e->solver, t->shape.rows[k].dims[j]);
            if (i == UINT32_MAX) continue;
            const char *old;
            OriginId o;
            shape_runtime_decl(e->solver, i, &old, &o);
            shape_runtime_rename(e->solver, i, arena_printf(e->arena, "%s%s", item, strchr(old, '.')));
        }
}

/* A size `?` in `o = [ … ]` fields: an input's declares a run-time size, an inline definition's
 * takes the one its uses give it. */
typedef enum RuntimeSizes { SIZES_DECLARE, SIZES_FOLLOW } RuntimeSizes;

static bool eval_sizes(Elab *e, const Node *n, Env *env, const char *field, const char *tensor, RuntimeSizes runtime,
                       Row *out) {
    if (n->kind != NODE_LIST) {
        diag_error(n->span, "'%s' takes a list of sizes, e.g. %s = [ 16 ]", field, field);
        return false;
    }
    uint32_t count = n->list.count;
    Dim *dims = arena_alloc(e->arena, (count ? count : 1) * sizeof *dims);
    const char *row = field[0] == 'b' ? "batch" : field[0] == 'i' ? "input" : "output";
    for (uint32_t i = 0; i < count; i++) {
        const Node *item = n->list.items[i];
        uint32_t basis = BASIS_DEFAULT;
        if (is_claim_free_annot(item)) {
            basis = BASIS_NONE;
            item = item->a;
        } else if (item->kind == NODE_ANNOT) {
            basis = shape_basis(e->solver, item->name);
            item = item->a;
        }
        Value *v = eval(e, item, env, MODE_VALUE);
        if (v->kind == V_ERROR) return false;
        if (v->kind == V_RUNTIME_SIZE) {
            if (basis != BASIS_DEFAULT) {
                diag_error(n->list.items[i]->span, "a run-time size '?' cannot carry a basis in this version");
                return false;
            }
            dims[i] = runtime_size_dim(e, item->span, tensor, field[0], i, count, runtime == SIZES_FOLLOW);
            continue;
        }
        if (v->kind != V_INT) {
            diag_error(item->span, "a size must be an integer, but this is %s", kind_noun(v));
            return false;
        }
        if (v->as.i < 1 || v->as.i > INT32_MAX) {
            diag_error(item->span, v->as.i < 1 ? "a size must be at least 1, but this is %lld"
                                               : "a size must fit in 32 bits, but this is %lld",
                       (long long)v->as.i);
            return false;
        }
        if (basis == BASIS_NONE && v->as.i != 1) {
            diag_error(item->span, "only a size-1 axis can be marked broadcastable with '(1 : _)', but this is %lld",
                       (long long)v->as.i);
            return false;
        }
        dims[i] = dim_ground((uint32_t)v->as.i, basis,
                             origin(e, item->span, "the %s sizes written for '%s'", row, tensor));
    }
    *out = shape_closed_row(e->solver, dims, count, origin(e, n->span, "the %s sizes written for '%s'", row, tensor));
    return true;
}

/* Parse the size fields of a record (first field excluded).  given[k] says which rows. */
static bool record_sizes(Elab *e, const Node *rec, Env *env, const char *tensor, RuntimeSizes runtime, Row rows[ROW_KINDS],
                         bool given[ROW_KINDS]) {
    for (int k = 0; k < ROW_KINDS; k++) given[k] = false;
    for (uint32_t i = 1; i < rec->list.count; i++) {
        const Node *f = rec->list.items[i];
        int k = strcmp(f->name, "b") == 0 ? ROW_BATCH : strcmp(f->name, "i") == 0 ? ROW_INPUT
              : strcmp(f->name, "o") == 0 ? ROW_OUTPUT : -1;
        if (k < 0) {
            diag_error(f->span, "unknown field '%s' in the definition of '%s': the sizes are given by "
                       "'b' (batch), 'i' (input) and 'o' (output)", f->name, tensor);
            return false;
        }
        if (given[k]) {
            diag_error(f->span, "field '%s' is given twice", f->name);
            return false;
        }
        if (!f->a) {
            diag_error(f->span, "field '%s' needs a list of sizes, e.g. %s = [ 16 ]", f->name, f->name);
            return false;
        }
        if (!eval_sizes(e, f->a, env, f->name, tensor, runtime, &rows[k])) return false;
        given[k] = true;
    }
    return true;
}

/* ---- Inline definitions (parameters) -------------------------------------------------------- */

static Value *eval_inline_param(Elab *e, const Node *rec, Env *env) {
    Scope *scope = current_scope(e);
    for (uint32_t i = 0; i < scope->param_count; i++)
        if (scope->params[i].node == rec) return tensor_value(e, scope->params[i].tensor);
    const Node *first = rec->list.items[0];
    Row rows[ROW_KINDS];
    bool given[ROW_KINDS];
    if (!record_sizes(e, rec, env, first->name, SIZES_FOLLOW, rows, given)) return &error_value;
    Tensor *t = new_tensor(e, TENSOR_PARAM, rec->span);
    t->name = first->name;
    OriginId o = origin(e, rec->span, "parameter '%s'", first->name);
    for (int k = 0; k < ROW_KINDS; k++) {
        if (given[k]) t->shape.rows[k] = rows[k];
        else if (k == ROW_BATCH) /* parameters have no batch axes */
            t->shape.rows[k] = shape_empty_row(origin(e, rec->span, "parameter '%s': no batch axes", first->name));
        else t->shape.rows[k] = shape_fresh_row(e->solver, o);
    }
    t->init = first->a;
    t->random = RANDOM_INIT_DEFAULT;
    Value *init = first->a ? eval(e, first->a, env, MODE_TENSOR) : NULL;
    if (init && init->kind == V_ERROR) return &error_value;
    if (init && init->kind == V_INIT) t->random = init->as.init;
    else if (init) {
        if (is_number(init)) init = tensor_value(e, scalar_literal(e, number_of(init), first->a->span, 0));
        if (init->kind != V_TENSOR)
            return fail(first->a->span, "the initial value of '%s' must be a number or a tensor, but "
                        "this is %s", first->name, kind_noun(init));
        Tensor *iv = init->as.tensor;
        bool scalar = iv->kind == TENSOR_LITERAL && iv->value_count == 1 &&
                      first->a->kind != NODE_LIST && first->a->kind != NODE_ARRAY &&
                      first->a->kind != NODE_TUPLE && first->a->kind != NODE_ANNOT;
        if (!scalar) /* a tensor value gives the exact shape */
            shape_eq(e->solver, &t->shape, &iv->shape,
                     origin(e, first->a->span, "the initial value of '%s'", first->name));
        t->operands = arena_alloc(e->arena, sizeof *t->operands);
        t->operands[0] = iv;
        t->operand_count = 1;
    }
    ScopeParam sp = {rec, t};
    ARENA_PUSH(e->arena, scope->params, scope->param_count, scope->param_cap, sp);
    NamedEntry ne = {t, NULL, scope, first->name};
    ARENA_PUSH(e->arena, e->entries, e->entry_count, e->entry_cap, ne);
    return tensor_value(e, t);
}

/* ---- Closures and application --------------------------------------------------------------- */

static Closure *new_closure(Elab *e, const NodeList *params, const Node *body, Env *env, Mode mode,
                            const char *fn_name) {
    Closure *c = arena_alloc(e->arena, sizeof *c);
    c->params = arena_alloc(e->arena, (params->count ? params->count : 1) * sizeof *c->params);
    for (uint32_t i = 0; i < params->count; i++) c->params[i] = params->items[i];
    c->param_count = params->count;
    c->bound = arena_alloc(e->arena, (params->count ? params->count : 1) * sizeof *c->bound);
    c->body = body;
    c->env = env;
    c->mode = mode;
    c->scope = e->scope;
    c->fn_name = fn_name;
    return c;
}

static Closure *copy_closure(Elab *e, const Closure *c) {
    Closure *d = arena_alloc(e->arena, sizeof *d);
    *d = *c;
    d->bound = arena_alloc(e->arena, (c->param_count ? c->param_count : 1) * sizeof *d->bound);
    memcpy(d->bound, c->bound, c->param_count * sizeof *d->bound);
    return d;
}

static Value *closure_value(Elab *e, Closure *c) {
    Value *v = new_value(e, c->code ? V_CODE : V_CLOSURE);
    v->as.closure = c;
    return v;
}

static bool has_unit_param(const NodeList *params) {
    for (uint32_t i = 0; i < params->count; i++)
        if (params->items[i]->flag == PARAM_UNIT) return true;
    return false;
}

static Value *param_default(Elab *e, Closure *c, const Node *p) {
    if (!p->a) return &unit_value; /* ?x without a default: absent */
    return eval(e, p->a, c->env, MODE_VALUE);
}

static Value *run_body(Elab *e, Closure *c, Span span) {
    if (c->code) return closure_value(e, c);
    if (++e->depth > MAX_EVAL_DEPTH) {
        e->depth--;
        return fail(span, "evaluation is nested too deeply (more than %d calls): is a recursion "
                    "missing its base case?", MAX_EVAL_DEPTH);
    }
    Scope *saved = e->scope;
    e->scope = c->scope;
    bool outermost = e->depth == 1 && span.file;
    if (outermost) shape_set_context(e->solver, span, c->fn_name ? c->fn_name : "an anonymous function");
    if (span.file) shape_push_call(e->solver, span, c->fn_name ? c->fn_name : "an anonymous function");
    Value *v = eval(e, c->body, c->env, c->mode);
    if (span.file) shape_pop_call(e->solver);
    if (outermost) shape_set_context(e->solver, (Span){0, 0, 0}, NULL);
    e->scope = saved;
    e->depth--;
    return v;
}

static Value *apply_closure(Elab *e, const Closure *orig, Arg *args, uint32_t count, Span span) {
    Closure *c = copy_closure(e, orig);
    /* Labelled arguments go to their parameters wherever these are. */
    for (uint32_t a = 0; a < count; a++) {
        if (!args[a].label) continue;
        bool found = false;
        for (uint32_t i = c->next; i < c->param_count && !found; i++) {
            const Node *p = c->params[i];
            if ((p->flag != PARAM_LABELLED && p->flag != PARAM_OPTIONAL) || c->bound[i]) continue;
            if (strcmp(p->name, args[a].label) != 0) continue;
            found = true;
            c->bound[i] = true;
            c->env = bind(e, c->env, p->name, args[a].value);
        }
        if (!found)
            return fail(args[a].span, "%s has no parameter %c%s%s", c->fn_name ? c->fn_name : "this function",
                        args[a].optional ? '?' : '~', args[a].label,
                        c->next >= c->param_count ? "" : " (or it was given twice)");
    }
    uint32_t pos = 0;
    while (pos < count && args[pos].label) pos++;
    for (;;) {
        if (c->next == c->param_count) {
            Value *result = run_body(e, c, span);
            /* Positional arguments left over go to the function the body returned. */
            uint32_t rest = 0;
            for (uint32_t a = pos; a < count; a++)
                if (!args[a].label) rest++;
            if (rest == 0 || result->kind == V_ERROR) return result;
            /* A %cd function's body is code, run where the routine runs it: there is no
             * function it returns to take the rest (and applying the code again would go on
             * without end). */
            if (c->code) {
                uint32_t extra = pos;
                while (args[extra].label) extra++;
                return fail(args[extra].span, "%s is given %u argument%s more than it takes: a %%cd function returns "
                            "no function to take %s", c->fn_name ? c->fn_name : "this function", rest,
                            rest == 1 ? "" : "s", rest == 1 ? "it" : "them");
            }
            Arg *more = arena_alloc(e->arena, rest * sizeof *more);
            uint32_t m = 0;
            for (uint32_t a = pos; a < count; a++)
                if (!args[a].label) more[m++] = args[a];
            return apply(e, result, more, m, span);
        }
        const Node *p = c->params[c->next];
        if (c->bound[c->next]) {
            c->next++;
            continue;
        }
        bool have = pos < count;
        switch (p->flag) {
        case PARAM_LABELLED:
            if (have)
                return fail(args[pos].span, "%s needs its argument ~%s before this one",
                            c->fn_name ? c->fn_name : "this function", p->name);
            return closure_value(e, c);
        case PARAM_OPTIONAL:
            if (!have) return closure_value(e, c);
            c->env = bind(e, c->env, p->name, param_default(e, c, p));
            c->next++;
            break;
        default:
            if (!have) return closure_value(e, c);
            if (p->flag == PARAM_POSITIONAL) c->env = bind(e, c->env, p->name, args[pos].value);
            else if (p->flag == PARAM_UNIT && args[pos].value->kind != V_UNIT &&
                     args[pos].value->kind != V_ERROR)
                return fail(args[pos].span, "%s expects () here, but this is %s",
                            c->fn_name ? c->fn_name : "this function", kind_noun(args[pos].value));
            if (p->flag == PARAM_UNIT && c->scope_at_unit) c->scope = new_scope(e, c->fn_name, false);
            pos++;
            while (pos < count && args[pos].label) pos++;
            c->next++;
            break;
        }
    }
}

static Value *apply(Elab *e, Value *fn, Arg *args, uint32_t count, Span span) {
    if (fn->kind == V_ERROR) return fn;
    for (uint32_t i = 0; i < count; i++)
        if (args[i].value->kind == V_ERROR) return &error_value;
    switch (fn->kind) {
    case V_CLOSURE:
    case V_CODE:
        if (fn->kind == V_CODE && !fn->as.closure) return fail(span, "code cannot be applied");
        return apply_closure(e, fn->as.closure, args, count, span);
    case V_BUILTIN: return fn->as.builtin.fn(e, args, count, span);
    case V_OPERATOR: {
        Value **ops = arena_alloc(e->arena, (count ? count : 1) * sizeof *ops);
        uint32_t n = 0;
        for (uint32_t i = 0; i < count; i++) {
            if (args[i].label)
                return fail(args[i].span, "'%s' takes no labelled argument ~%s here", fn->as.op->name,
                            args[i].label);
            ops[n++] = args[i].value;
        }
        return apply_operator(e, NULL, fn->as.op, ops, n, NULL, NULL, span);
    }
    default:
        return fail(span, "this is %s, not a function, so it cannot be applied", kind_noun(fn));
    }
}

/* ---- Builtins ------------------------------------------------------------------------------ */

static Value *constant_tensor(Elab *e, Arg *args, uint32_t count, Span span, double fill, const char *name) {
    if (count != 1 || args[0].label || args[0].value->kind != V_UNIT)
        return fail(span, "'%s' is applied to () and makes a tensor whose shape the context decides", name);
    Tensor *t = new_tensor(e, TENSOR_CONSTANT, span);
    t->shape = shape_fresh(e->solver, origin(e, span, "'%s ()'", name));
    t->values = arena_alloc(e->arena, sizeof *t->values);
    t->values[0] = fill;
    t->value_count = 1;
    return tensor_value(e, t);
}

static Value *builtin_ones(Elab *e, Arg *args, uint32_t count, Span span) {
    return constant_tensor(e, args, count, span, 1.0, "ones");
}
static Value *builtin_zeros(Elab *e, Arg *args, uint32_t count, Span span) {
    return constant_tensor(e, args, count, span, 0.0, "zeros");
}

static const Arg *find_arg(Arg *args, uint32_t count, const char *label) {
    for (uint32_t i = 0; i < count; i++)
        if (args[i].label && strcmp(args[i].label, label) == 0) return &args[i];
    return NULL;
}

static bool int_arg(Arg *args, uint32_t count, const char *label, Span span, const char *fn,
                    int64_t dflt, bool required, int64_t *out) {
    const Arg *a = find_arg(args, count, label);
    if (!a) {
        if (required) {
            diag_error(span, "'%s' needs ~%s", fn, label);
            return false;
        }
        *out = dflt;
        return true;
    }
    if (a->value->kind != V_INT) {
        diag_error(a->span, "~%s of '%s' must be an integer, but this is %s", label, fn, kind_noun(a->value));
        return false;
    }
    *out = a->value->as.i;
    return true;
}

/* A new index symbol (an `index` item, or a loop counter of `main`). */
static Value *index_value(Elab *e, const char *name, int64_t range, Span span, bool counter) {
    Program *p = e->program;
    const char *base = name; /* unique: a loop counter may reuse a name */
    for (uint32_t k = 2, clash = 1; clash; k++) {
        clash = 0;
        for (uint32_t i = 0; i < p->index_count && !clash; i++) clash = strcmp(p->indexes[i].name, name) == 0;
        if (clash) name = arena_printf(e->arena, "%s#%u", base, k);
    }
    Value *v = new_value(e, V_INDEX);
    v->as.index.name = name;
    v->as.index.range = (uint32_t)range;
    v->as.index.span = span;
    v->as.index.id = p->index_count;
    ARENA_PUSH(e->arena, p->indexes, p->index_count, p->index_cap, ((IndexSymbol){name, range, span, counter}));
    return v;
}

/* ---- Data sources (docs/language.md §3.2.6) ---------------------------------------------------- */

/* Every argument is labelled with one of `allowed` ("~count ~noise"); with `path_first`, the
 * first may be positional. */
static bool check_labels(Arg *args, uint32_t count, const char *fn, const char *allowed, bool path_first) {
    for (uint32_t i = 0; i < count; i++) {
        const char *l = args[i].label;
        if (!l && path_first && i == 0) continue;
        char want[64], padded[160];
        snprintf(want, sizeof want, " ~%s ", l ? l : "");
        snprintf(padded, sizeof padded, " %s ", allowed);
        if (!l || !strstr(padded, want)) {
            diag_error(args[i].span, "'%s' takes %s%s", fn, path_first ? "a path and " : "", allowed);
            return false;
        }
    }
    return true;
}

static bool number_arg(Arg *args, uint32_t count, const char *label, const char *fn, double dflt, double *out) {
    const Arg *a = find_arg(args, count, label);
    *out = dflt;
    if (!a) return true;
    if (!is_number(a->value)) {
        diag_error(a->span, "~%s of '%s' must be a number, but this is %s", label, fn, kind_noun(a->value));
        return false;
    }
    *out = number_of(a->value);
    return true;
}

static DataSource *new_source(Elab *e, const char *generator, Span span) {
    DataSource *d = arena_alloc(e->arena, sizeof *d);
    d->generator = generator;
    d->span = span;
    return d;
}

static Tensor *data_tensor(Elab *e, DataSource *d, uint32_t field, Span span) {
    Tensor *t = new_tensor(e, TENSOR_DATA, span);
    t->source = d;
    t->field = field;
    d->fields[field] = t;
    if (d->field_count <= field) d->field_count = field + 1;
    return t;
}

/* An option used as a tensor: a one-cell data tensor (generator "option") that the runtime fills
 * with the option's value when the state is made; one per option, shared by every use. */
static Tensor *option_tensor(Elab *e, const Value *v, Span span) {
    ProgramOption *o = &e->program->options[v->as.option.id];
    if (v->as.option.offset) {
        diag_error(span, "'%s' plus an integer is a loop bound of main; in a tensor expression, write the "
                   "arithmetic on the tensor ('%s' is a one-cell tensor there)", o->name, o->name);
        return NULL;
    }
    if (o->tensor) return o->tensor;
    DataSource *d = new_source(e, "option", o->span);
    d->name = d->path = o->name;
    Tensor *t = data_tensor(e, d, 0, o->span);
    OriginId why = origin(e, o->span, "option '%s'", o->name);
    t->shape = closed_shape(e, o->span, arena_printf(e->arena, "option '%s'", o->name));
    Dim unit = dim_unit(why);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &unit, 1, why);
    ARENA_PUSH(e->arena, e->program->sources, e->program->source_count, e->program->source_cap, d);
    return o->tensor = t;
}

/* half_moons / circles / spirals ~count ~noise ~seed ~batches (~factor): two classes of 2-D
 * points, fields `points` (batches, count/batches | 2) and `labels` (… | 1, values ±1). */
static Value *point_set(Elab *e, const char *fn, Arg *args, uint32_t count, Span span) {
    bool circles = strcmp(fn, "circles") == 0;
    if (!check_labels(args, count, fn, circles ? "~count ~noise ~seed ~batches ~factor" : "~count ~noise ~seed ~batches",
                      false))
        return &error_value;
    int64_t n, batches, seed;
    double noise, factor;
    if (!int_arg(args, count, "count", span, fn, 0, true, &n) ||
        !int_arg(args, count, "batches", span, fn, 1, false, &batches) ||
        !int_arg(args, count, "seed", span, fn, 0, false, &seed) ||
        !number_arg(args, count, "noise", fn, 0.0, &noise) || !number_arg(args, count, "factor", fn, 0.5, &factor))
        return &error_value;
    if (n < 1 || batches < 1 || n % batches != 0 || n > INT32_MAX)
        return fail(span, "'%s' needs ~count a positive multiple of ~batches (%lld and %lld)", fn, (long long)n,
                    (long long)batches);
    if (noise < 0) return fail(find_arg(args, count, "noise")->span, "~noise of '%s' must not be negative", fn);
    if (circles && !(factor > 0 && factor < 1))
        return fail(find_arg(args, count, "factor")->span, "~factor of 'circles' must be between 0 and 1");
    DataSource *d = new_source(e, fn, span);
    d->count = n;
    d->seed = seed;
    d->noise = noise;
    d->factor = factor;
    Value *v = new_value(e, V_DATASET);
    v->as.dataset.count = 2;
    v->as.dataset.source = d;
    v->as.dataset.fields = arena_alloc(e->arena, 2 * sizeof(Field));
    const char *names[2] = {"points", "labels"};
    for (uint32_t f = 0; f < 2; f++) {
        Tensor *t = data_tensor(e, d, f, span);
        OriginId o = origin(e, span, "the %s of '%s'", names[f], fn);
        t->shape = closed_shape(e, span, names[f]);
        Dim b[2];
        uint32_t nb = 0;
        if (batches > 1) b[nb++] = dim_ground((uint32_t)batches, BASIS_DEFAULT, o);
        b[nb++] = dim_ground((uint32_t)(n / batches), BASIS_DEFAULT, o);
        Dim out = dim_ground(f == 0 ? 2 : 1, BASIS_DEFAULT, o);
        t->shape.rows[ROW_BATCH] = shape_closed_row(e->solver, b, nb, o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &out, 1, o);
        v->as.dataset.fields[f] = (Field){names[f], tensor_value(e, t)};
    }
    return v;
}

static Value *builtin_half_moons(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "half_moons", args, count, span);
}
static Value *builtin_circles(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "circles", args, count, span);
}
static Value *builtin_spirals(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "spirals", args, count, span);
}

/* The shape of a one-tensor source: ~b ~i ~o lists of sizes (each optional, at least one). */
static bool source_shape(Elab *e, const char *fn, Arg *args, uint32_t count, Span span, Shape *out) {
    *out = closed_shape(e, span, fn);
    static const char *labels[ROW_KINDS] = {"b", "i", "o"};
    static const RowKind kinds[ROW_KINDS] = {ROW_BATCH, ROW_INPUT, ROW_OUTPUT};
    bool any = false;
    for (int k = 0; k < ROW_KINDS; k++) {
        const Arg *a = find_arg(args, count, labels[k]);
        if (!a) continue;
        any = true;
        if (a->value->kind != V_LIST) {
            diag_error(a->span, "~%s of '%s' takes a list of sizes, e.g. ~%s:[ 16 ]", labels[k], fn, labels[k]);
            return false;
        }
        uint32_t n = a->value->as.list.count;
        Dim *dims = arena_alloc(e->arena, (n ? n : 1) * sizeof *dims);
        OriginId o = origin(e, a->span, "the sizes written for '%s'", fn);
        for (uint32_t i = 0; i < n; i++) {
            Value *x = a->value->as.list.items[i];
            if (x->kind == V_RUNTIME_SIZE) { /* a .npy file's length: named after the item later */
                if (strcmp(fn, "npy") != 0) {
                    diag_error(a->span, "~%s of '%s' cannot be a run-time size '?': only a .npy file gives its length "
                               "when the program runs", labels[k], fn);
                    return false;
                }
                dims[i] = runtime_size_dim(e, a->span, fn, labels[k][0], i, n, false);
                continue;
            }
            /* `(5 : idx)`, a size with a basis as in an inline definition, arrives evaluated:
             * a one-cell literal whose axis carries the basis. */
            uint32_t basis = BASIS_DEFAULT;
            double size = x->kind == V_INT ? (double)x->as.i : 0;
            if (x->kind == V_TENSOR && x->as.tensor->kind == TENSOR_LITERAL && x->as.tensor->value_count == 1 &&
                x->as.tensor->shape.rows[ROW_OUTPUT].count == 1 &&
                x->as.tensor->shape.rows[ROW_OUTPUT].dims[0].basis != BASIS_DEFAULT) {
                basis = x->as.tensor->shape.rows[ROW_OUTPUT].dims[0].basis; /* BASIS_NONE: (1 : _) */
                size = x->as.tensor->values[0];
            }
            if (size < 1 || size > INT32_MAX || size != (double)(uint32_t)size || (basis == BASIS_NONE && size != 1)) {
                diag_error(a->span, "~%s of '%s' takes positive integer sizes, each optionally with a basis "
                           "as in (5 : idx), or (1 : _) for a broadcastable unit", labels[k], fn);
                return false;
            }
            dims[i] = dim_ground((uint32_t)size, basis, o);
        }
        out->rows[kinds[k]] = shape_closed_row(e->solver, dims, n, o);
    }
    if (!any) {
        diag_error(span, "'%s' needs the shape of its tensor: ~b, ~i and/or ~o lists of sizes, e.g. ~b:[100] ~o:[2]",
                   fn);
        return false;
    }
    return true;
}

/* npy "file.npy" / csv "file.csv" / range / uniform ~seed, each with ~b ~i ~o: one tensor. */
static Value *single_source(Elab *e, const char *fn, Arg *args, uint32_t count, Span span) {
    bool file = strcmp(fn, "npy") == 0 || strcmp(fn, "csv") == 0;
    bool seeded = strcmp(fn, "uniform") == 0;
    if (!check_labels(args, count, fn, seeded ? "~seed ~b ~i ~o" : "~b ~i ~o", file))
        return &error_value;
    DataSource *d = new_source(e, fn, span);
    if (file) {
        if (count == 0 || args[0].label || args[0].value->kind != V_STRING)
            return fail(count ? args[0].span : span, "'%s' takes the file's path first, as a string: %s \"data.%s\" ~b:[…]",
                        fn, fn, fn);
        d->path = args[0].value->as.str.text;
        if (args[0].value->as.str.len == 0 || strlen(d->path) != args[0].value->as.str.len)
            return fail(args[0].span, "the path of '%s' must be a non-empty string without NUL bytes", fn);
    }
    if (seeded && !int_arg(args, count, "seed", span, fn, 0, false, &d->seed)) return &error_value;
    Shape shape;
    if (!source_shape(e, fn, args, count, span, &shape)) return &error_value;
    Tensor *t = data_tensor(e, d, 0, span);
    t->shape = shape;
    Value *v = new_value(e, V_DATASET);
    v->as.dataset.source = d;
    v->as.dataset.count = 1;
    v->as.dataset.fields = arena_alloc(e->arena, sizeof(Field));
    v->as.dataset.fields[0] = (Field){NULL, tensor_value(e, t)};
    return v;
}

static Value *builtin_npy(Elab *e, Arg *args, uint32_t count, Span span) { return single_source(e, "npy", args, count, span); }
static Value *builtin_csv(Elab *e, Arg *args, uint32_t count, Span span) { return single_source(e, "csv", args, count, span); }
static Value *builtin_range(Elab *e, Arg *args, uint32_t count, Span span) {
    return single_source(e, "range", args, count, span);
}
/* ---- Lists and parameters (what an optimiser iterates over) ---------------------------------- */

static void collect_params(Elab *e, Tensor *t, bool *seen, Value *list, uint32_t *cap) {
    if (seen[t->id]) return;
    seen[t->id] = true;
    if (t->kind == TENSOR_PARAM) {
        ARENA_PUSH(e->arena, list->as.list.items, list->as.list.count, *cap, tensor_value(e, t));
        return;
    }
    for (uint32_t i = 0; i < t->operand_count; i++) collect_params(e, t->operands[i], seen, list, cap);
}

/* params t: the parameters t depends on, as a list, each once, in the order a depth-first walk of
 * its operands (left to right) meets them. */
static Value *builtin_params(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label || args[0].value->kind != V_TENSOR)
        return fail(span, "'params' takes one tensor: params loss");
    Value *list = new_value(e, V_LIST);
    uint32_t cap = 0;
    bool *seen = arena_alloc(e->arena, (e->program->tensor_count + 1) * sizeof *seen);
    collect_params(e, args[0].value->as.tensor, seen, list, &cap);
    return list;
}

/* is_tensor x: whether x is a tensor (an optimiser's ~lr may be a number or a schedule tensor). */
static Value *builtin_is_tensor(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_tensor' takes one value: is_tensor x");
    return bool_value(e, args[0].value->kind == V_TENSOR);
}

static Value *builtin_length(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label || (args[0].value->kind != V_LIST && args[0].value->kind != V_ARRAY))
        return fail(span, "'length' takes one list or array: length xs");
    return int_value(e, args[0].value->as.list.count);
}

/* iota n: the tensor literal [0.; 1.; …; n-1.], one output axis of size n (one-hot encodings
 * compare class ids with it).  iota (): the same along one output axis whose size its use
 * decides (positions along an axis, Nn.rope); assign.c writes the values. */
static Value *builtin_iota(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count == 1 && !args[0].label && args[0].value->kind == V_UNIT) {
        Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
        OriginId o = origin(e, span, "'iota ()' (output axis)");
        t->shape = closed_shape(e, span, "'iota ()'");
        Dim axis = shape_fresh_dim(e->solver, o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &axis, 1, o);
        t->iota = true;
        return tensor_value(e, t);
    }
    if (count != 1 || args[0].label || args[0].value->kind != V_INT)
        return fail(span, "'iota' takes one integer or (): iota n is the tensor [0.; 1.; ...; n-1.], iota () "
                    "the same along an axis whose size its use decides");
    int64_t n = args[0].value->as.i;
    if (n < 1 || n > INT32_MAX)
        return fail(args[0].span, "'iota': the size %lld is not between 1 and %d", (long long)n, INT32_MAX);
    Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
    OriginId o = origin(e, span, "'iota %lld' (output axis)", (long long)n);
    t->shape = closed_shape(e, span, "'iota'");
    Dim axis = dim_ground((uint32_t)n, BASIS_DEFAULT, o);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &axis, 1, o);
    t->values = arena_alloc(e->arena, (size_t)n * sizeof *t->values);
    for (int64_t i = 0; i < n; i++) t->values[i] = (double)i;
    t->value_count = (uint32_t)n;
    return tensor_value(e, t);
}

/* nth xs i: element i (from 0) of a list or array. */
static Value *builtin_nth(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 2 || args[0].label || args[1].label ||
        (args[0].value->kind != V_LIST && args[0].value->kind != V_ARRAY) || args[1].value->kind != V_INT)
        return fail(span, "'nth' takes a list or array and an integer: nth xs i");
    int64_t i = args[1].value->as.i;
    if (i < 0 || i >= (int64_t)args[0].value->as.list.count)
        return fail(args[1].span, "'nth': index %lld is outside the %u elements", (long long)i,
                    args[0].value->as.list.count);
    return args[0].value->as.list.items[i];
}

/* init n f: the list [f 0; f 1; …; f (n-1)], each application evaluated in order (OCaml's
 * List.init): a list whose length is computed (Nn.split's parts). */
static Value *builtin_init(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 2 || args[0].label || args[1].label || args[0].value->kind != V_INT ||
        (args[1].value->kind != V_CLOSURE && args[1].value->kind != V_BUILTIN && args[1].value->kind != V_OPERATOR))
        return fail(span, "'init' takes a count and a function: init n f is the list [f 0; f 1; ...; f (n-1)]");
    int64_t n = args[0].value->as.i;
    enum { MAX_INIT = 1 << 20 };
    if (n < 0 || n > MAX_INIT)
        return fail(args[0].span, "'init': the count %lld is not between 0 and %d", (long long)n, (int)MAX_INIT);
    Value *list = new_value(e, V_LIST);
    list->as.list.count = (uint32_t)n;
    list->as.list.items = arena_alloc(e->arena, (n ? (size_t)n : 1) * sizeof(Value *));
    for (int64_t i = 0; i < n; i++) {
        Arg a = {.value = int_value(e, i), .span = args[0].span};
        Value *x = apply(e, args[1].value, &a, 1, span);
        if (x->kind == V_ERROR) return x;
        list->as.list.items[i] = x;
    }
    return list;
}

/* ---- Initialisers (docs/language.md §3.5.3) ------------------------------------------------- */

/* `fn ?label… ()`: the optional labels are the numbers `allowed` names ("~low ~high"). */
static bool initialiser_args(Arg *args, uint32_t count, const char *fn, const char *allowed, Span span) {
    uint32_t units = 0;
    for (uint32_t i = 0; i < count; i++)
        if (!args[i].label) {
            if (args[i].value->kind != V_UNIT || units++) {
                diag_error(args[i].span, "'%s' is written '%s %s ()': its labelled arguments, then ()", fn, fn,
                           allowed);
                return false;
            }
        } else if (!check_labels(&args[i], 1, fn, allowed, false)) {
            return false;
        }
    if (!units) {
        diag_error(span, "'%s' is applied to () to make an initialiser: %s %s ()", fn, fn, allowed);
        return false;
    }
    return true;
}

static Value *initialiser(Elab *e, const char *fn, Arg *args, uint32_t count, Span span, bool normal, InitFan fan,
                          double gain_scale, double default_gain) {
    double gain;
    if (!initialiser_args(args, count, fn, "~gain", span) || !number_arg(args, count, "gain", fn, default_gain, &gain))
        return &error_value;
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = normal, .fan = fan, .scale = gain * gain_scale, .shift = 0.0};
    return v;
}

static bool has_unit_arg(Arg *args, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        if (!args[i].label && args[i].value->kind == V_UNIT) return true;
    return false;
}

/* uniform ?low ?high (): the initialiser; uniform ~seed ~b ~i ~o: the data source. */
static Value *builtin_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    if (!has_unit_arg(args, count)) return single_source(e, "uniform", args, count, span);
    double low, high;
    if (!initialiser_args(args, count, "uniform", "~low ~high", span) ||
        !number_arg(args, count, "low", "uniform", -1.0, &low) || !number_arg(args, count, "high", "uniform", 1.0, &high))
        return &error_value;
    if (!(low <= high)) return fail(span, "'uniform' needs ~low <= ~high, but they are %g and %g", low, high);
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = false, .fan = FAN_NONE, .scale = (high - low) / 2, .shift = (high + low) / 2};
    return v;
}

static Value *builtin_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    double mean, std;
    if (!initialiser_args(args, count, "normal", "~mean ~std", span) ||
        !number_arg(args, count, "mean", "normal", 0.0, &mean) || !number_arg(args, count, "std", "normal", 1.0, &std))
        return &error_value;
    if (!(std >= 0)) return fail(span, "'normal' needs ~std >= 0, but it is %g", std);
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = true, .fan = FAN_NONE, .scale = std, .shift = mean};
    return v;
}

/* Xavier/Glorot: bound gain * sqrt(6 / (fan_in + fan_out)), or std gain * sqrt(2 / (…)). */
static Value *builtin_xavier_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "xavier_uniform", args, count, span, false, FAN_SUM, sqrt(6.0), 1.0);
}
static Value *builtin_xavier_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "xavier_normal", args, count, span, true, FAN_SUM, sqrt(2.0), 1.0);
}
/* Kaiming/He (fan-in mode): bound gain * sqrt(3 / fan_in), or std gain / sqrt(fan_in); the
 * default gain sqrt 2 is ReLU's. */
static Value *builtin_kaiming_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "kaiming_uniform", args, count, span, false, FAN_IN, sqrt(3.0), sqrt(2.0));
}
static Value *builtin_kaiming_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "kaiming_normal", args, count, span, true, FAN_IN, 1.0, sqrt(2.0));
}

typedef struct BuiltinEntry {
    const char *name;
    BuiltinFn fn;
} BuiltinEntry;

static const BuiltinEntry builtins[] = {
    {"ones", builtin_ones},
    {"zeros", builtin_zeros},
    {"half_moons", builtin_half_moons},
    {"circles", builtin_circles},
    {"spirals", builtin_spirals},
    {"npy", builtin_npy},
    {"csv", builtin_csv},
    {"range", builtin_range},
    {"uniform", builtin_uniform},
    {"normal", builtin_normal},
    {"params", builtin_params},
    {"length", builtin_length},
    {"is_tensor", builtin_is_tensor},
    {"nth", builtin_nth},
    {"init", builtin_init},
    {"iota", builtin_iota},
    {"xavier_uniform", builtin_xavier_uniform},
    {"xavier_normal", builtin_xavier_normal},
    {"kaiming_uniform", builtin_kaiming_uniform},
    {"kaiming_normal", builtin_kaiming_normal},
};

/* set_dim NAME n: a captured dimension gets a size (NAME is a label of a capture list). */
static Value *eval_set_dim(Elab *e, const Node *app, Env *env) {
    if (app->list.count != 2 || app->list.items[0]->kind != NODE_VAR || app->list.items[1]->kind == NODE_ARG)
        return fail(app->span, "'set_dim' is written 'set_dim NAME SIZE', NAME a label captured by a spec");
    const Node *name = app->list.items[0];
    Value *size = eval(e, app->list.items[1], env, MODE_VALUE);
    if (size->kind == V_ERROR) return size;
    if (size->kind != V_INT || size->as.i < 1 || size->as.i > INT32_MAX)
        return fail(app->list.items[1]->span, "the size given to 'set_dim' must be a positive integer");
    Dim d = scope_dim(e, current_scope(e), name->name, name->span)->dim;
    OriginId o = origin(e, app->span, "'set_dim %s %lld'", name->name, (long long)size->as.i);
    shape_dim_eq(e->solver, d, dim_ground((uint32_t)size->as.i, BASIS_DEFAULT, o), o);
    return &unit_value;
}

/* equate NAME1 NAME2: two captured labels get one size and basis, or two captured row
 * variables the same axes; recorded here, emitted by solve_equations once every spec of the
 * scope has captured what it captures. */
static Value *eval_equate(Elab *e, const Node *app) {
    if (app->list.count != 2 || app->list.items[0]->kind != NODE_VAR || app->list.items[1]->kind != NODE_VAR)
        return fail(app->span, "'equate' is written 'equate NAME1 NAME2', each NAME a label or row variable "
                    "captured by a spec");
    const Node *a = app->list.items[0], *b = app->list.items[1];
    Equation q = {current_scope(e), {a, b}, app->span, origin(e, app->span, "'equate %s %s'", a->name, b->name)};
    ARENA_PUSH(e->arena, e->equations, e->equation_count, e->equation_cap, q);
    return &unit_value;
}

static ScopeDim *find_scope_dim(Scope *s, const char *name) {
    for (uint32_t i = 0; i < s->dim_count; i++)
        if (strcmp(s->dims[i].name, name) == 0) return &s->dims[i];
    return NULL;
}

static void note_equation_call(Elab *e, const Equation *q) {
    const char *fn;
    Span call = shape_origin_call(e->solver, q->why, &fn);
    if (call.file) diag_note(call, "in this application of '%s'", fn);
}

static const char *size_text(Elab *e, Dim d) {
    if (d.basis == BASIS_NONE) return "1 (broadcastable)";
    if (d.basis == BASIS_DEFAULT) return arena_printf(e->arena, "%u", d.size);
    return arena_printf(e->arena, "%s=%u", shape_basis_name(e->solver, d.basis), d.size);
}

/* Two captured labels that the rest of the program has already sized differently: reported
 * here, naming each label, the spec that captures it and where its size comes from. */
static bool equation_clash(Elab *e, const Equation *q, ScopeDim *const c[2]) {
    Dim d[2] = {shape_resolve_dim(e->solver, c[0]->dim), shape_resolve_dim(e->solver, c[1]->dim)};
    if (d[0].var || d[1].var || (d[0].size == d[1].size && d[0].basis == d[1].basis)) return false;
    const char *t[2] = {size_text(e, d[0]), size_text(e, d[1])};
    diag_error(q->span, "'equate %s %s': '%s' has size %s but '%s' has size %s", c[0]->name, c[1]->name, c[0]->name,
               t[0], c[1]->name, t[1]);
    note_equation_call(e, q);
    for (int k = 0; k < 2; k++) {
        diag_note(c[k]->captured, "'%s' is captured here", c[k]->name);
        diag_note(shape_origin_span(e->solver, d[k].origin), "size %s of '%s' comes from: %s", t[k], c[k]->name,
                  shape_origin_what(e->solver, d[k].origin));
    }
    return true;
}

/* The equations of `equate`: both names must be captured in the scope, both as labels (their
 * dims are equated) or both as row variables (their rows are equated).  What the program says
 * otherwise is solved first, so that an equation that contradicts it is the one reported. */
static void solve_equations(Elab *e) {
    if (!e->equation_count) return;
    bool *ok = arena_alloc(e->arena, e->equation_count * sizeof *ok);
    for (uint32_t i = 0; i < e->equation_count; i++) {
        const Equation *q = &e->equations[i];
        ScopeDim *c[2];
        ok[i] = true;
        for (int k = 0; k < 2; k++) {
            c[k] = find_scope_dim(q->scope, q->names[k]->name);
            if (c[k] && (c[k]->label || c[k]->row_var)) continue;
            diag_error(q->names[k]->span, "'equate': no spec in this scope captures '%s' (a label or row variable "
                       "is captured by naming it in the list after its spec, [\"%s\"])", q->names[k]->name,
                       q->names[k]->name);
            note_equation_call(e, q);
            ok[i] = false;
        }
        if (ok[i] && (c[0]->row_var != 0) != (c[1]->row_var != 0)) {
            int r = c[0]->row_var ? 0 : 1;
            diag_error(q->span, "'equate %s %s': '%s' is a captured row variable and '%s' a captured label; equate "
                       "relates two labels (one axis each) or two row variables", q->names[0]->name,
                       q->names[1]->name, c[r]->name, c[1 - r]->name);
            note_equation_call(e, q);
            diag_note(c[r]->captured, "'..%s..' is captured as a row variable here", c[r]->name);
            diag_note(c[1 - r]->captured, "'%s' is captured as a label here", c[1 - r]->name);
            ok[i] = false;
        }
    }
    shape_solve(e->solver);
    for (uint32_t i = 0; i < e->equation_count; i++) {
        if (!ok[i]) continue;
        const Equation *q = &e->equations[i];
        ScopeDim *c[2] = {find_scope_dim(q->scope, q->names[0]->name), find_scope_dim(q->scope, q->names[1]->name)};
        if (c[0]->row_var) {
            Row rows[2];
            for (int k = 0; k < 2; k++)
                rows[k] = (Row){.var = c[k]->row_var,
                                .origin = origin(e, c[k]->captured, "captured row variable '%s'", c[k]->name)};
            shape_row_eq(e->solver, rows[0], rows[1], q->why);
        } else if (!equation_clash(e, q, c)) {
            shape_dim_eq(e->solver, c[0]->dim, c[1]->dim, q->why);
        }
    }
}

/* dim NAME: the size of a captured label, or the cells of a captured row variable, as a number
 * tensor; the size is known once shapes are closed (fill_dim_readings). */
static Value *eval_dim(Elab *e, const Node *app) {
    if (app->list.count != 1 || app->list.items[0]->kind != NODE_VAR)
        return fail(app->span, "'dim' is written 'dim NAME', NAME a label or row variable captured by a spec");
    const Node *name = app->list.items[0];
    Tensor *t = scalar_literal(e, 0., app->span, 0);
    DimReading r = {t, scope_dim(e, current_scope(e), name->name, name->span)->dim, name->name, app->span};
    ARENA_PUSH(e->arena, e->readings, e->reading_count, e->reading_cap, r);
    return tensor_value(e, t);
}

static void fill_dim_readings(Elab *e) {
    for (uint32_t i = 0; i < e->reading_count; i++) {
        DimReading *r = &e->readings[i];
        Dim d = shape_resolve_dim(e->solver, r->dim);
        if (d.var) {
            diag_error(r->span, "the size of '%s' is not known: no spec in this scope captures it, and no "
                       "'set_dim' gives it", r->name);
            continue;
        }
        if (d.runtime) { /* read when the program runs: the value of the class's size symbol */
            r->tensor->kind = TENSOR_INDEX;
            r->tensor->index = shape_runtime_class_name(e->solver, d.runtime);
            continue;
        }
        r->tensor->values[0] = d.size;
    }
}

/* ---- Expressions --------------------------------------------------------------------------- */

static Value *arith(Elab *e, const char *op, Value *a, Value *b, Span span) {
    if (a->kind == V_OPTION || b->kind == V_OPTION) {
        /* option ± integer, integer + option: a loop bound of main, read at run time */
        Value *o = a->kind == V_OPTION ? a : b, *k = a->kind == V_OPTION ? b : a;
        int64_t sum;
        bool sub = strcmp(op, "-") == 0;
        if ((strcmp(op, "+") == 0 || (sub && o == a)) && k->kind == V_INT &&
            !e->program->options[o->as.option.id].is_float &&
            !__builtin_add_overflow(o->as.option.offset, sub ? -k->as.i : k->as.i, &sum) && k->as.i != INT64_MIN) {
            Value *v = new_value(e, V_OPTION);
            v->as.option.id = o->as.option.id;
            v->as.option.offset = sum;
            return v;
        }
        return fail(span, "'%s' on an option: an option's value is known only when the program runs, so it can "
                    "be a loop bound of main (an integer option plus or minus an integer), a value that main "
                    "prints, or a number in a tensor expression", op);
    }
    bool fl = a->kind == V_FLOAT || b->kind == V_FLOAT || strchr(op, '.') != NULL;
    if (!is_number(a) || !is_number(b)) {
        if (strcmp(op, "^") == 0 && a->kind == V_STRING && b->kind == V_STRING) {
            Value *v = new_value(e, V_STRING);
            char *s = arena_alloc(e->arena, a->as.str.len + b->as.str.len + 1);
            memcpy(s, a->as.str.text, a->as.str.len);
            memcpy(s + a->as.str.len, b->as.str.text, b->as.str.len);
            v->as.str.text = s;
            v->as.str.len = a->as.str.len + b->as.str.len;
            return v;
        }
        if ((strcmp(op, "=") == 0 || strcmp(op, "<>") == 0) && a->kind == b->kind &&
            (a->kind == V_BOOL || a->kind == V_STRING)) {
            bool eq = a->kind == V_BOOL ? a->as.b == b->as.b
                                        : a->as.str.len == b->as.str.len &&
                                              memcmp(a->as.str.text, b->as.str.text, a->as.str.len) == 0;
            return bool_value(e, op[0] == '=' ? eq : !eq);
        }
        return fail(span, "'%s' is not defined on %s and %s", op, kind_noun(a), kind_noun(b));
    }
    double x = number_of(a), y = number_of(b);
    if (strcmp(op, "<") == 0) return bool_value(e, x < y);
    if (strcmp(op, ">") == 0) return bool_value(e, x > y);
    if (strcmp(op, "<=") == 0) return bool_value(e, x <= y);
    if (strcmp(op, ">=") == 0) return bool_value(e, x >= y);
    if (strcmp(op, "=") == 0 || strcmp(op, "==") == 0) return bool_value(e, x == y);
    if (strcmp(op, "<>") == 0 || strcmp(op, "!=") == 0) return bool_value(e, x != y);
    if (strcmp(op, "**") == 0) return float_value(e, pow(x, y));
    char c = op[0];
    if (!fl) {
        int64_t i = a->as.i, j = b->as.i, r;
        switch (c) {
        case '+': if (__builtin_add_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '-': if (__builtin_sub_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '*': if (__builtin_mul_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '/':
            if (j == 0) return fail(span, "division by zero");
            if (i == INT64_MIN && j == -1) goto overflow;
            return int_value(e, i / j);
        }
        if (strcmp(op, "mod") == 0) {
            if (j == 0) return fail(span, "division by zero");
            if (i == INT64_MIN && j == -1) return int_value(e, 0);
            return int_value(e, i % j);
        }
    } else {
        switch (c) {
        case '+': return float_value(e, x + y);
        case '-': return float_value(e, x - y);
        case '*': return float_value(e, x * y);
        case '/': return float_value(e, x / y);
        }
    }
    return fail(span, "'%s' is not defined on numbers", op);
overflow:
    return fail(span, "integer overflow in '%s'", op);
}

static Value *eval_binop(Elab *e, const Node *n, Env *env, Mode mode) {
    const char *op = n->name;
    if (strcmp(op, "&&") == 0 || strcmp(op, "||") == 0) {
        Value *a = eval(e, n->a, env, MODE_VALUE);
        if (a->kind == V_ERROR) return a;
        if (a->kind != V_BOOL) return fail(n->a->span, "'%s' needs a boolean, but this is %s", op, kind_noun(a));
        if (a->as.b == (op[0] == '|')) return a;
        Value *b = eval(e, n->b, env, MODE_VALUE);
        if (b->kind != V_BOOL && b->kind != V_ERROR)
            return fail(n->b->span, "'%s' needs a boolean, but this is %s", op, kind_noun(b));
        return b;
    }
    if (strcmp(op, "@|") == 0) {
        Value *a = eval(e, n->a, env, MODE_TENSOR);
        if (a->kind == V_ERROR) return a;
        Tensor *t = as_tensor(e, a, n->a->span, "'@|'");
        if (!t) return &error_value;
        Value *i = eval(e, n->b, env, MODE_VALUE);
        if (i->kind == V_ERROR) return i;
        if (i->kind != V_INDEX)
            return fail(n->b->span, "'@|' slices by an index symbol (declared with 'index'), but this is %s",
                        kind_noun(i));
        Tensor *r = new_tensor(e, TENSOR_SLICE, n->span);
        r->operands = arena_alloc(e->arena, sizeof *r->operands);
        r->operands[0] = t;
        r->operand_count = 1;
        r->index = i->as.index.name;
        r->index_range = i->as.index.range;
        r->shape = shape_fresh(e->solver, origin(e, n->span, "the result of '@|'"));
        PinnedAxis pin = {
            dim_ground(i->as.index.range, BASIS_DEFAULT,
                       origin(e, i->as.index.span, "the range of index '%s'", i->as.index.name)),
            origin(e, n->span, "'@|' needs a leftmost batch axis of size %u (the range of '%s')",
                   i->as.index.range, i->as.index.name),
            arena_printf(e->arena, ", of size %u for index '%s'", i->as.index.range, i->as.index.name)};
        Shape *slots[2] = {&r->shape, &t->shape};
        emit_relations(e, LOGIC_SLICE, slots, 2, ROW_KINDS, &pin, n->span, "'@|'");
        return tensor_value(e, r);
    }
    Value *a = eval(e, n->a, env, mode);
    Value *b = eval(e, n->b, env, mode);
    if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
    bool tensors = a->kind == V_TENSOR || b->kind == V_TENSOR;
    Value *opv = lookup_operator(e, env, op);
    bool a_num = is_number(a) || a->kind == V_OPTION, b_num = is_number(b) || b->kind == V_OPTION;
    if (tensors && (a->kind == V_OPTION || b->kind == V_OPTION) && opv) {
        if (a->kind == V_OPTION) a = tensor_value(e, option_tensor(e, a, n->a->span));
        if (b->kind == V_OPTION) b = tensor_value(e, option_tensor(e, b, n->b->span));
        if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
    }
    if (!tensors && mode == MODE_TENSOR && opv && a_num && b_num && (a->kind == V_OPTION || b->kind == V_OPTION)) {
        a = tensor_value(e, as_tensor(e, a, n->a->span, "an option"));
        b = tensor_value(e, as_tensor(e, b, n->b->span, "an option"));
        if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
        tensors = true;
    }
    if (tensors || (mode == MODE_TENSOR && opv && is_number(a) && is_number(b))) {
        if (!opv) return fail(n->span, "'%s' is not a tensor operator", op);
        /* A number operand is a scalar literal where it is written. */
        if (is_number(a)) a = tensor_value(e, scalar_literal(e, number_of(a), n->a->span, 0));
        if (is_number(b)) b = tensor_value(e, scalar_literal(e, number_of(b), n->b->span, 0));
        Value *ops[2] = {a, b};
        return apply_operator(e, env, opv->as.op, ops, 2, NULL, NULL, n->span);
    }
    return arith(e, op, a, b, n->span);
}

static Value *eval_unop(Elab *e, const Node *n, Env *env, Mode mode) {
    const char *op = n->name;
    if (strcmp(op, "!.") == 0 || strcmp(op, "!..") == 0) {
        Value *v = eval(e, n->a, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (!is_number(v)) return fail(n->a->span, "'%s' makes a scalar tensor from a number, but this is %s",
                                       op, kind_noun(v));
        return tensor_value(e, scalar_literal(e, number_of(v), n->span, 0));
    }
    if (strcmp(op, "!@") == 0) {
        Value *v = eval(e, n->a, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (v->kind != V_INDEX)
            return fail(n->a->span, "'!@' reads an index symbol (declared with 'index'), but this is %s",
                        kind_noun(v));
        Tensor *t = new_tensor(e, TENSOR_INDEX, n->span);
        OriginId o = origin(e, n->span, "'!@%s'", v->as.index.name);
        t->shape = closed_shape(e, n->span, "'!@'");
        Dim d = dim_unit(o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &d, 1, o);
        t->index = v->as.index.name;
        t->index_range = v->as.index.range;
        return tensor_value(e, t);
    }
    Value *v = eval(e, n->a, env, mode);
    if (v->kind == V_ERROR) return v;
    if (v->kind == V_INT) {
        if (v->as.i == INT64_MIN) return fail(n->span, "integer overflow in '-'");
        return int_value(e, -v->as.i);
    }
    if (v->kind == V_FLOAT) return float_value(e, -v->as.f);
    if (v->kind == V_TENSOR) {
        Value *neg = lookup_operator(e, env, "neg");
        if (!neg) return fail(n->span, "unary '-' on a tensor needs the operator 'neg'");
        return apply_operator(e, env, neg->as.op, &v, 1, NULL, NULL, n->span);
    }
    return fail(n->span, "'-' is not defined on %s", kind_noun(v));
}

static Value *eval_app(Elab *e, const Node *n, Env *env, Mode mode) {
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "set_dim") == 0 && !lookup(e, env, "set_dim"))
        return eval_set_dim(e, n, env);
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "dim") == 0 && !lookup(e, env, "dim"))
        return eval_dim(e, n);
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "equate") == 0 && !lookup(e, env, "equate"))
        return eval_equate(e, n);
    Value *fn = eval(e, n->a, env, mode);
    if (fn->kind == V_ERROR) return fn;
    uint32_t count = n->list.count;
    Arg *args = arena_alloc(e->arena, (count ? count : 1) * sizeof *args);
    const Spec *spec = NULL; /* `op ~spec:"…" a b c`: an operator applied like a function */
    for (uint32_t i = 0; i < count; i++) {
        const Node *a = n->list.items[i];
        if (fn->kind == V_OPERATOR && a->kind == NODE_ARG && strcmp(a->name, "spec") == 0 && a->a &&
            a->a->kind == NODE_STRING) {
            spec = a->a->spec; /* parsed with the program (parse.c) */
            if (!spec) return &error_value;
            args[i].value = &unit_value; /* not passed on */
            args[i].label = "spec";
            continue;
        }
        if (a->kind == NODE_ARG) {
            args[i].label = a->name;
            args[i].optional = (a->flag & ARG_OPTIONAL) != 0;
            args[i].span = a->span;
            if (a->a) {
                args[i].value = eval(e, a->a, env, MODE_VALUE);
            } else {
                Value *v = lookup(e, env, a->name);
                args[i].value = v ? v : fail(a->span, "'~%s' passes the variable '%s', which is not defined",
                                             a->name, a->name);
            }
        } else {
            args[i].span = a->span;
            args[i].value = eval(e, a, env, mode);
        }
        if (args[i].value->kind == V_ERROR) return &error_value;
    }
    if (spec) {
        if (!fn->as.op->c || fn->as.op->c->kind != NODE_VAR)
            return fail(n->span, "'%s' takes no einsum spec: its logic is fixed by its declaration", fn->as.op->name);
        Value **ops = arena_alloc(e->arena, (count ? count : 1) * sizeof *ops);
        uint32_t k = 0;
        for (uint32_t i = 0; i < count; i++) {
            if (args[i].label && strcmp(args[i].label, "spec") == 0) continue;
            if (args[i].label)
                return fail(args[i].span, "'%s' takes no labelled argument ~%s here", fn->as.op->name, args[i].label);
            Value *v = args[i].value;
            if (is_number(v)) v = tensor_value(e, scalar_literal(e, number_of(v), args[i].span, 0));
            ops[k++] = v;
        }
        return apply_operator(e, env, fn->as.op, ops, k, spec, NULL, n->span);
    }
    return apply(e, fn, args, count, n->span);
}

static Value *eval_einsum(Elab *e, const Node *n, Env *env) {
    Value *opv = lookup_operator(e, env, n->name);
    if (!opv) return fail(n->span, "'%s' is not defined as an operator", n->name);
    /* `(a, b, c) ++^ spec`: an operator with a rest operand (`tn`) written after a tuple takes the
     * tuple's tensors as its operands, one slot each. */
    uint32_t rest = operator_rest(opv->as.op);
    bool spread = rest && !n->b && (n->a->kind == NODE_TUPLE || rest > 1);
    if (spread && n->a->kind != NODE_TUPLE)
        return strcmp(n->name, "++^") == 0
                   ? fail(n->a->span, "'++^' concatenates a tuple of tensors: write (a, b) ++^ \"x, f; y, f => x^y, f\"")
                   : fail(n->a->span, "'%s' takes a tuple of at least %u tensors, one per operand slot of its spec",
                          n->name, operator_arity(opv->as.op));
    const Node *const *items = spread ? (const Node *const *)n->a->list.items : (const Node *const[]){ n->a, n->b };
    uint32_t count = spread ? n->a->list.count : n->b ? 2 : 1;
    Value **ops = arena_alloc(e->arena, count * sizeof *ops);
    for (uint32_t i = 0; i < count; i++) {
        ops[i] = eval(e, items[i], env, MODE_TENSOR);
        if (ops[i]->kind == V_ERROR) return &error_value;
        if (is_number(ops[i])) /* a scalar literal where it is written */
            ops[i] = tensor_value(e, scalar_literal(e, number_of(ops[i]), items[i]->span, 0));
    }
    if (!n->spec) return &error_value; /* the parser reported the spec */
    return apply_operator(e, env, opv->as.op, ops, count, n->spec, n->c, n->span);
}

static Value *eval_container(Elab *e, const Node *n, Env *env, Mode mode) {
    if (mode == MODE_TENSOR) return eval_literal(e, n, env, 0);
    Value *v = new_value(e, n->kind == NODE_LIST ? V_LIST : n->kind == NODE_ARRAY ? V_ARRAY : V_TUPLE);
    v->as.list.count = n->list.count;
    v->as.list.items = arena_alloc(e->arena, (n->list.count ? n->list.count : 1) * sizeof(Value *));
    for (uint32_t i = 0; i < n->list.count; i++) {
        v->as.list.items[i] = eval(e, n->list.items[i], env, mode);
        if (v->as.list.items[i]->kind == V_ERROR) return &error_value;
    }
    return v;
}

static Value *qualified_name(Elab *e, const Node *n);

static Value *eval_field(Elab *e, const Node *n, Env *env, Mode mode) {
    if (n->a->kind == NODE_MODULE) return qualified_name(e, n);
    Value *obj = eval(e, n->a, env, mode);
    if (obj->kind == V_ERROR) return obj;
    if (obj->kind == V_DATASET) {
        if (!obj->as.dataset.source->name)
            return fail(n->span, "a data source is read through a 'data' item: data d = … (then d.%s)", n->name);
        for (uint32_t i = 0; i < obj->as.dataset.count; i++)
            if (obj->as.dataset.fields[i].name && strcmp(obj->as.dataset.fields[i].name, n->name) == 0) return obj->as.dataset.fields[i].value;
        const char **names = arena_alloc(e->arena, (obj->as.dataset.count + 1) * sizeof *names);
        uint32_t named = 0;
        for (uint32_t i = 0; i < obj->as.dataset.count; i++)
            if (obj->as.dataset.fields[i].name) names[named++] = obj->as.dataset.fields[i].name;
        const char *near = diag_closest_name(n->name, names, named);
        Value *err = fail(n->span, "the data set has no field '%s'", n->name);
        if (near) diag_note(n->span, "did you mean '.%s'?", near);
        return err;
    }
    if (obj->kind == V_TENSOR) {
        static const char *const tensor_fields[] = {"forward", "backprop", "zero_grads", "grad", "value"};
        const char *near = diag_closest_name(n->name, tensor_fields, 5);
        if (near) {
            Value *err = fail(n->span, "a tensor has no field '.%s'", n->name);
            diag_note(n->span, "did you mean '.%s'?", near);
            return err;
        }
        return fail(n->span, "the field '.%s' of a tensor is code or a gradient, usable in %%cd code and "
                    "routines, not in a tensor expression", n->name);
    }
    return fail(n->span, "%s has no fields", kind_noun(obj));
}

/* Bind `let name params = value` (params may be empty) in env; returns the new env. */
static Env *eval_binding(Elab *e, const char *name, const NodeList *params, const Node *value, bool rec,
                         Mode mode, bool code, bool global, Env *env, Value **out) {
    Value *v;
    if (params->count > 0 || code) {
        Closure *c = new_closure(e, params, value, env, mode, name);
        c->code = code;
        if (mode == MODE_TENSOR && params->count > 0) {
            if (has_unit_param(params)) c->scope_at_unit = true;
            else c->scope = new_scope(e, name, true); /* parameters shared by every use */
        }
        v = closure_value(e, c);
        if (rec) {
            env = global ? bind_global(e, name, v) : bind(e, env, name, v);
            c->env = env;
        }
    } else {
        if (rec) {
            diag_error(value->span, "'let rec' defines functions; '%s' has no parameters", name);
            v = &error_value;
        } else {
            v = eval(e, value, env, mode);
        }
    }
    /* A scope opened by `()` in this very binding is named after it: `let l1 = layer () in`. */
    if (v->kind == V_CLOSURE && v->as.closure->scope && !v->as.closure->scope->binding &&
        !v->as.closure->scope->toplevel && strcmp(name, "_") != 0)
        v->as.closure->scope->binding = name;
    if (out) *out = v;
    if (strcmp(name, "_") == 0 || (rec && (params->count > 0 || code))) return env;
    return global ? bind_global(e, name, v) : bind(e, env, name, v);
}

static Value *eval(Elab *e, const Node *n, Env *env, Mode mode) {
    if (e->out_of_steps) return &error_value;
    if (++e->steps > MAX_EVAL_STEPS) {
        diag_error(n->span, "evaluation takes too long: it has run out of its budget of %llu steps "
                   "(is a loop or a recursion unbounded?)", MAX_EVAL_STEPS);
        e->out_of_steps = true;
        return &error_value;
    }
    if (e->steps % EVAL_MEMORY_CHECK == 0 && arena_total_bytes() - e->bytes_at_start > e->byte_budget) {
        diag_error(n->span, "evaluation builds too much: it has run out of its budget of %zu MB "
                   "(is a loop or a recursion making tensors without bound?)", e->byte_budget >> 20);
        e->out_of_steps = true;
        return &error_value;
    }
    switch (n->kind) {
    case NODE_INT: return int_value(e, n->ival);
    case NODE_FLOAT: return float_value(e, n->fval);
    case NODE_BOOL: return bool_value(e, n->ival != 0);
    case NODE_UNIT: return &unit_value;
    case NODE_RUNTIME_SIZE: return &runtime_size_value; /* a size of an input or a .npy file: eval_sizes, source_shape */
    case NODE_STRING: {
        Value *v = new_value(e, V_STRING);
        v->as.str.text = n->text;
        v->as.str.len = n->len;
        return v;
    }
    case NODE_VAR: {
        Value *v = lookup(e, env, n->name);
        if (!v) {
            if (strcmp(n->name, "set_dim") == 0)
                return fail(n->span, "'set_dim' is written 'set_dim NAME SIZE'");
            if (strcmp(n->name, "dim") == 0) return fail(n->span, "'dim' is written 'dim NAME'");
            if (strcmp(n->name, "equate") == 0) return fail(n->span, "'equate' is written 'equate NAME1 NAME2'");
            const char *near = closest_in_scope(e, env, n->name);
            Value *err = fail(n->span, "'%s' is not defined", n->name);
            if (near) diag_note(n->span, "did you mean '%s'?", near);
            return err;
        }
        return v;
    }
    case NODE_MODULE:
        return fail(n->span, "qualified names ('%s.…') are not supported in this version yet; use 'open %s'",
                    n->name, n->name);
    case NODE_FIELD: return eval_field(e, n, env, mode);
    case NODE_APP: return eval_app(e, n, env, mode);
    case NODE_ARG: return fail(n->span, "a labelled argument must follow a function");
    case NODE_BINOP: return eval_binop(e, n, env, mode);
    case NODE_UNOP: return eval_unop(e, n, env, mode);
    case NODE_EINSUM: return eval_einsum(e, n, env);
    case NODE_TUPLE:
    case NODE_LIST:
    case NODE_ARRAY: return eval_container(e, n, env, mode);
    case NODE_RECORD:
        if (mode != MODE_TENSOR)
            return fail(n->span, "an inline definition '{ %s }' makes a parameter; it belongs in a let%%op "
                        "definition", n->list.items[0]->name);
        return eval_inline_param(e, n, env);
    case NODE_FIELD_DEF: return fail(n->span, "unexpected field definition");
    case NODE_ANNOT: {
        uint32_t basis = is_claim_free_annot(n) ? BASIS_CLAIM_FREE : shape_basis(e->solver, n->name);
        const Node *inner = n->a;
        if (inner->kind == NODE_LIST || inner->kind == NODE_ARRAY || inner->kind == NODE_TUPLE)
            return eval_literal(e, inner, env, basis);
        Value *v = eval(e, inner, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (!is_number(v))
            return fail(n->span, "a basis annotation '(… : %s)' applies to a tensor literal or a number",
                        n->name);
        return tensor_value(e, scalar_literal(e, number_of(v), n->span, basis == BASIS_CLAIM_FREE ? 0 : basis));
    }
    case NODE_SEQ: {
        Value *v = &unit_value;
        for (uint32_t i = 0; i < n->list.count; i++) {
            v = eval(e, n->list.items[i], env, mode);
            if (v->kind == V_ERROR) return v;
        }
        return v;
    }
    case NODE_LET: {
        Value *v;
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag != 0, mode, false, false, env, &v);
        if (v->kind == V_ERROR) return v;
        return eval(e, n->b, inner, mode);
    }
    case NODE_FUN: return closure_value(e, new_closure(e, &n->list, n->a, env, mode, NULL));
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return c;
        if (c->kind != V_BOOL) return fail(n->a->span, "the condition of 'if' must be a boolean, but this is %s",
                                           kind_noun(c));
        if (c->as.b) return eval(e, n->b, env, mode);
        return n->c ? eval(e, n->c, env, mode) : &unit_value;
    }
    case NODE_FOR: {
        Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
        if (from->kind == V_ERROR || to->kind == V_ERROR) return &error_value;
        if (from->kind != V_INT || to->kind != V_INT)
            return fail(n->span, "the bounds of 'for' must be integers");
        int64_t step = n->flag ? -1 : 1;
        for (int64_t i = from->as.i; n->flag ? i >= to->as.i : i <= to->as.i; i += step) {
            Value *v = eval(e, n->c, bind(e, env, n->name, int_value(e, i)), mode);
            if (v->kind == V_ERROR) return v;
        }
        return &unit_value;
    }
    case NODE_ASSIGN:
    case NODE_CODE:
    case NODE_COMMENTED: {
        Value *v = new_value(e, V_CODE);
        v->as.closure = NULL;
        return v;
    }
    case NODE_PARAM:
    case ITEM_LET:
    case ITEM_OPERATOR:
    case ITEM_INDEX:
    case ITEM_DATA:
    case ITEM_INPUT:
    case ITEM_ROUTINE:
    case ITEM_MAIN:
    case ITEM_OPEN:
    case ITEM_OPTION:
    case NODE_KIND_COUNT: break;
    }
    return fail(n->span, "this cannot be evaluated here");
}

/* ---- Items --------------------------------------------------------------------------------- */

static void add_named(Elab *e, Tensor *t, const char *name) {
    if (t->kind == TENSOR_PARAM && t->name && strcmp(t->name, name) == 0) return; /* listed already */
    if (!t->name) t->name = name;
    NamedEntry ne = {t, name, NULL, NULL};
    ARENA_PUSH(e->arena, e->entries, e->entry_count, e->entry_cap, ne);
}

static void elab_module(Elab *e, Module *m);

static char *read_file_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, cap);
            if (!nb) diag_fatal_oom();
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Loads module `name` once (by `open`, or by the first qualified name `M.x`): its items are
 * elaborated as the program's own, and each top-level name is bound as `M.name` too. */
static void load_module(Elab *e, const char *name, Span span) {
    for (uint32_t i = 0; i < e->opened_count; i++)
        if (strcmp(e->opened[i], name) == 0) return;
    ARENA_PUSH(e->arena, e->opened, e->opened_count, e->opened_cap, name);
    char file[256];
    snprintf(file, sizeof file, "%s.tsr", name);
    file[0] = (char)tolower((unsigned char)file[0]);
    uint32_t src = 0;
    for (unsigned i = 0; i < tsr_stdlib_file_count && !src; i++)
        if (strcmp(tsr_stdlib_files[i].name, file) == 0) {
            char path[300];
            snprintf(path, sizeof path, "<stdlib>/%s", file);
            src = source_add(path, tsr_stdlib_files[i].text, tsr_stdlib_files[i].len);
        }
    for (int i = -1; i < (e->options ? e->options->include_count : 0) && !src; i++) {
        const char *dir = i < 0 ? e->main_dir : e->options->include_dirs[i];
        char *path = arena_printf(e->arena, "%s/%s", dir, file);
        size_t len;
        char *text = read_file_text(path, &len);
        if (text) {
            src = source_add(path, text, len);
            free(text);
        }
    }
    if (!src) {
        diag_error(span, "module '%s' not found: no '%s' in the standard library%s", name, file,
                   e->options && e->options->include_count ? ", the -I directories or beside the program"
                                                            : " or beside the program (add directories with -I)");
        return;
    }
    Module *m = parse_module(src, e->arena);
    if (diag_error_count()) return;
    Scope *scope = e->scope; /* a qualified name may load a module in the middle of an item */
    elab_module(e, m);
    e->scope = scope;
    for (uint32_t i = 0; i < m->items.count; i++) {
        const Node *item = m->items.items[i];
        if ((item->kind != ITEM_LET && item->kind != ITEM_OPERATOR) || strcmp(item->name, "_") == 0) continue;
        Value *v = lookup_global(e, item->name, e->generation);
        if (v) bind_global(e, arena_printf(e->arena, "%s.%s", name, item->name), v);
    }
}

static void open_module(Elab *e, const Node *item) { load_module(e, item->name, item->span); }

/* M.name: loads M when it is not yet. */
static Value *qualified_name(Elab *e, const Node *n) {
    load_module(e, n->a->name, n->a->span);
    if (diag_error_count()) return &error_value;
    Value *v = lookup_global(e, arena_printf(e->arena, "%s.%s", n->a->name, n->name), e->generation);
    if (!v) return fail(n->span, "module '%s' has no definition '%s'", n->a->name, n->name);
    return v;
}

/* ---- Routines ------------------------------------------------------------------------------ */

static void add_step(Elab *e, Routine *r, CodeStep step) {
    ARENA_PUSH(e->arena, r->steps, r->step_count, r->step_cap, step);
}

/* A tensor named by `n` (a name, or `x.grad` / `x.value`); false after an error. */
static bool code_tensor(Elab *e, const Node *n, Env *env, Tensor **t, bool *grad) {
    *grad = false;
    const Node *obj = n;
    if (n->kind == NODE_FIELD && (strcmp(n->name, "grad") == 0 || strcmp(n->name, "value") == 0)) {
        *grad = n->name[0] == 'g';
        obj = n->a;
    }
    Value *v = eval(e, obj, env, MODE_TENSOR);
    if (v->kind == V_ERROR) return false;
    if (v->kind != V_TENSOR) {
        diag_error(obj->span, "this names %s, not a tensor", kind_noun(v));
        return false;
    }
    *t = v->as.tensor;
    return true;
}

/* `name` applied to `count` operands in the right side of an assignment (infix when `binary`)
 * must be a primitive of %cd code (docs/language.md §3.7.3) taking that many; false after
 * reporting it, with the closest primitive's name when one is near (a misspelling). */
static bool check_code_primitive(const char *name, bool binary, uint32_t count, Span span) {
    bool swapped;
    int op = scalar_op_code(name, binary, &swapped);
    if (op < 0) {
        diag_error(span, "'%s' is not a primitive operation of %%cd code", name);
        const char *near = scalar_op_closest(name, binary);
        if (near) diag_note(span, "did you mean '%s'?", near);
        return false;
    }
    unsigned arity = scalar_op_arity((ScalarOp)op);
    if (count != arity) {
        diag_error(span, "'%s' takes %u operand%s in code, but %u %s given", name, arity, arity == 1 ? "" : "s",
                   count, count == 1 ? "is" : "are");
        return false;
    }
    return true;
}

/* Whether `name`, applied in the right side of an assignment, is read as a primitive of code:
 * when it is not bound, or bound to the prelude's operator of that name (`relu`, `fma`, …:
 * docs/language.md §3.7.2 reads every primitive function as the per-cell primitive at any depth,
 * so `fma p q r ~logic:"@"` reads three tensors).  A name the program binds is its own. */
static bool code_primitive_name(Elab *e, Env *env, const char *name) {
    const Value *bound = lookup(e, env, name);
    bool swapped;
    return !bound || (bound->kind == V_OPERATOR && bound->as.op->span.file == e->prelude_file &&
                      scalar_op_code(name, false, &swapped) >= 0);
}

static CodeExpr *code_expr(Elab *e, const Node *n, Env *env) {
    CodeExpr *x = arena_alloc(e->arena, sizeof *x);
    x->span = n->span;
    if (n->kind == NODE_INT || n->kind == NODE_FLOAT) {
        x->kind = CEXPR_CONST;
        x->value = n->kind == NODE_INT ? (double)n->ival : n->fval;
        return x;
    }
    if (n->kind == NODE_BINOP && strcmp(n->name, "@|") != 0) {
        x->kind = CEXPR_OP;
        x->op = n->name;
        x->binary = true;
        x->arg_count = 2;
        if (!check_code_primitive(n->name, true, 2, n->span)) return NULL;
        if (!(x->args[0] = code_expr(e, n->a, env)) || !(x->args[1] = code_expr(e, n->b, env))) return NULL;
        return x;
    }
    if (n->kind == NODE_APP && n->a->kind == NODE_VAR && code_primitive_name(e, env, n->a->name)) {
        x->kind = CEXPR_OP;
        x->op = n->a->name;
        if (strcmp(n->a->name, "random") == 0) { /* `random ()`: the primitive without operands */
            if (n->list.count == 1 && n->list.items[0]->kind == NODE_UNIT) return x;
            diag_error(n->span, "'random' takes no operands: it is written 'random ()'");
            return NULL;
        }
        uint32_t count = 0; /* the operands: curried, or a tuple's items */
        for (uint32_t i = 0; i < n->list.count; i++) {
            const Node *arg = n->list.items[i];
            count += arg->kind == NODE_TUPLE && n->list.count == 1 ? arg->list.count : 1;
        }
        if (!check_code_primitive(n->a->name, false, count, n->a->span)) return NULL;
        for (uint32_t i = 0; i < n->list.count; i++) {
            const Node *arg = n->list.items[i];
            const NodeList *items = arg->kind == NODE_TUPLE && n->list.count == 1 ? &arg->list : NULL;
            for (uint32_t j = 0; j < (items ? items->count : 1); j++)
                if (!(x->args[x->arg_count++] = code_expr(e, items ? items->items[j] : arg, env))) return NULL;
        }
        return x;
    }
    Value *v = n->kind == NODE_FIELD ? NULL : eval(e, n, env, MODE_TENSOR);
    if (v && v->kind == V_ERROR) return NULL;
    if (v && is_number(v)) {
        x->kind = CEXPR_CONST;
        x->value = number_of(v);
        return x;
    }
    x->kind = CEXPR_TENSOR;
    if (v && v->kind == V_OPTION) return (x->tensor = option_tensor(e, v, n->span)) ? x : NULL;
    if (v && v->kind == V_TENSOR) {
        x->tensor = v->as.tensor;
        return x;
    }
    if (v) {
        diag_error(n->span, "this is %s, not a tensor or a number", kind_noun(v));
        return NULL;
    }
    return code_tensor(e, n, env, &x->tensor, &x->grad) ? x : NULL;
}

/* True for a tensor whose values are written in the program: a literal, or a stack of them. */
static bool is_written_literal(const Tensor *t) {
    if (t->kind == TENSOR_LITERAL) return true;
    if (t->kind != TENSOR_STACK) return false;
    for (uint32_t i = 0; i < t->operand_count; i++)
        if (!is_written_literal(t->operands[i])) return false;
    return true;
}

/* Code may assign to parameters and to what the program computes (and to any gradient), not to
 * tensors whose values come from elsewhere; reports the left side `at` otherwise. */
static bool check_assignable(const Tensor *t, Span at) {
    const char *name = t->name ? t->name : "this tensor";
    const char *why = NULL;
    switch (t->kind) {
    case TENSOR_INPUT:
        why = "is an input: the caller fills it before a routine runs (in an executable, from the seed), and "
              "code only reads it; assign to a tensor computed from it instead";
        break;
    case TENSOR_DATA: why = "is data: its values are loaded or generated when the program starts, and code only reads it"; break;
    case TENSOR_CONSTANT: why = "is a constant (such as ones ()), which code only reads"; break;
    case TENSOR_INDEX: why = "is the value of an index symbol, which only a loop of main or a setter changes"; break;
    default:
        if (is_written_literal(t)) why = "is a tensor literal: its values are written in the program, and code only reads it";
        break;
    }
    if (!why) return true;
    diag_error(at, "cannot assign to '%s': it %s", name, why);
    if (t->kind == TENSOR_INPUT || t->kind == TENSOR_DATA) diag_note(t->span, "'%s' is declared here", name);
    return false;
}

/* `{ name; o = […] } =: …` in code: a state tensor (elab.h TENSOR_STATE), bound to `name` for the
 * right side and the statements after it. */
static Tensor *state_tensor(Elab *e, const Node *rec, Env *env) {
    const Node *first = rec->list.items[0];
    if (first->a) {
        diag_error(first->a->span, "'{ %s }' on the left of an assignment is filled by the assignment; it takes "
                   "no initial value (it starts at 0)", first->name);
        return NULL;
    }
    Row rows[ROW_KINDS];
    bool given[ROW_KINDS];
    if (!record_sizes(e, rec, env, first->name, SIZES_FOLLOW, rows, given)) return NULL;
    Tensor *t = new_tensor(e, TENSOR_STATE, rec->span);
    t->name = first->name;
    OriginId o = origin(e, rec->span, "'%s' (state defined in code)", first->name);
    for (int k = 0; k < ROW_KINDS; k++) t->shape.rows[k] = given[k] ? rows[k] : shape_fresh_row(e->solver, o);
    return t;
}

/* A code function applied to all its arguments: its optional parameters left get their defaults;
 * false (reported) when a required one is missing. */
static bool finish_code(Elab *e, Closure *c, Span span) {
    for (; c->next < c->param_count; c->next++) {
        const Node *p = c->params[c->next];
        if (c->bound[c->next]) continue;
        if (p->flag != PARAM_OPTIONAL) {
            diag_error(span, "this code is %s applied to too few arguments: it still needs %s%s",
                       c->fn_name ? c->fn_name : "a function", p->flag == PARAM_LABELLED ? "~" : "its argument ",
                       p->name ? p->name : "()");
            return false;
        }
        c->env = bind(e, c->env, p->name, param_default(e, c, p));
    }
    return true;
}

/* The tensors an assignment's right side reads, in the order written: each gets its slot
 * (CodeExpr.slot, from 1; slot 0 is the left side). */
static void number_reads(Elab *e, CodeExpr *x, Tensor ***ts, uint32_t *count, uint32_t *cap) {
    if (x->kind == CEXPR_TENSOR) {
        x->slot = *count + 1;
        ARENA_PUSH(e->arena, *ts, *count, *cap, x->tensor);
    }
    for (uint32_t i = 0; i < x->arg_count; i++) number_reads(e, x->args[i], ts, count, cap);
}

/* The logic of an assignment of code, `~logic:` (docs/language.md §3.7.2): ".", "@", "T" or an
 * einsum spec literal; false after reporting anything else (a spec that did not parse was
 * reported by the parser). */
static bool code_logic(const Node *logic, Logic *out, const Spec **spec) {
    *spec = NULL;
    if (logic->kind == NODE_VAR) {
        diag_error(logic->span, "'~logic:%s' is not a logic here: an assignment in code takes a string literal, "
                   "\".\", \"@\", \"T\" or an einsum spec (a logic named by a parameter is an operator's)",
                   logic->name);
        return false;
    }
    if (logic->kind != NODE_STRING) return false; /* the parser reported it */
    if (logic->spec) {
        *out = LOGIC_SPEC;
        *spec = logic->spec;
        return true;
    }
    if (logic->len != 1 || !strchr(".@T", logic->text[0])) return false; /* the parser reported it */
    *out = logic_named(logic->text[0]);
    return true;
}

/* A standalone assignment `lhs ACCUMOP rhs [~logic:…]` of code (a routine, a let%cd function,
 * a [%cd …] block of main).  The tensors the right side reads, in the order written, are the
 * operands of its logic (numbers are constants, no operands), and the left side is the result:
 * shape inference gets the constraints an operator application with that logic would emit
 * (emit_logic), and assign.c derives the loops from the same logic (proj.c).  Without
 * ~logic: the logic is pointwise: every tensor read broadcasts to the left side (seed 003's
 * producer regime).  A state definition `{ name } =: …` gets its shape from these
 * constraints alone (or its written sizes).  Returns the environment for the statements after
 * it. */
static Env *elab_assignment(Elab *e, Routine *r, const Node *n, Env *env) {
    CodeStep step = {.kind = STEP_ASSIGN, .op = n->name, .logic = LOGIC_POINTWISE, .span = n->span};
    const Spec *spec = NULL;
    if (n->c && !code_logic(n->c, &step.logic, &spec)) return env;
    if (n->a->kind == NODE_RECORD) {
        if (!(step.tensor = state_tensor(e, n->a, env))) return env;
        env = bind(e, env, n->a->list.items[0]->name, tensor_value(e, step.tensor));
    } else {
        if (!code_tensor(e, n->a, env, &step.tensor, &step.grad)) return env;
        if (!step.grad && !check_assignable(step.tensor, n->a->span)) return env;
    }
    if (!(step.rhs = code_expr(e, n->b, env))) return env;
    Tensor **ts = NULL;
    uint32_t count = 0, cap = 0;
    number_reads(e, step.rhs, &ts, &count, &cap);
    step.slot_count = count + 1;
    const char *needs = logic_operands_needed(step.logic, count);
    if (step.logic == LOGIC_SPEC && spec->rhs_count != count) {
        diag_error(spec->span, "this spec has %u operand slot%s, but the right side of the assignment reads %u "
                   "tensor%s", spec->rhs_count, spec->rhs_count == 1 ? "" : "s", count, count == 1 ? "" : "s");
        diag_note(n->b->span, "each tensor the right side reads, in the order written, fills the next operand slot");
        return env;
    }
    if (needs) {
        diag_error(n->c->span, "logic \"%c\" needs %s, but the right side of the assignment reads %u tensor%s",
                   n->c->text[0], needs, count, count == 1 ? "" : "s");
        diag_note(n->b->span, "each tensor the right side reads, in the order written, is an operand of the logic");
        return env;
    }
    if (step.logic == LOGIC_COMPOSE && !check_compose_products(n, "this assignment")) return env;
    step.spec = emit_logic(e, env, step.logic, spec, step.tensor, ts, count, NULL, n->span, n->name);
    add_step(e, r, step);
    return env;
}

static Env *elab_code(Elab *e, Routine *r, const Node *n, Env *env);

/* Code that is a value: a `let%cd` definition, a code function applied (`Train.sgd ~lr p`), or
 * a name bound to one; its body is elaborated in its own environment. */
static void elab_code_value(Elab *e, Routine *r, const Node *n, Env *env) {
    Value *v = eval(e, n, env, MODE_VALUE);
    if (v->kind == V_ERROR) return;
    if (v->kind != V_CODE || !v->as.closure) {
        diag_error(n->span, "a routine holds code (t.forward, t.backprop, t.zero_grads, assignments, let%%cd "
                   "functions applied), but this is %s", kind_noun(v));
        return;
    }
    Closure *c = copy_closure(e, v->as.closure);
    if (!finish_code(e, c, n->span)) return;
    if (++e->depth > MAX_EVAL_DEPTH) {
        diag_error(n->span, "code is nested too deeply (more than %d calls)", MAX_EVAL_DEPTH);
    } else {
        elab_code(e, r, c->body, c->env);
    }
    e->depth--;
}

/* Elaborates the statements of `n` into r; returns the environment for the statements after it
 * (with the state tensors `n` defined). */
static Env *elab_code(Elab *e, Routine *r, const Node *n, Env *env) {
    switch (n->kind) {
    case NODE_CODE: return elab_code(e, r, n->a, env);
    case NODE_COMMENTED: return elab_code(e, r, n->b, env);
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) env = elab_code(e, r, n->list.items[i], env);
        return env;
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return env;
        if (c->kind != V_BOOL) {
            diag_error(n->a->span, "the condition of 'if' in code is known at compile time and must be a boolean, "
                       "but this is %s", kind_noun(c));
            return env;
        }
        if (c->as.b) return elab_code(e, r, n->b, env);
        return n->c ? elab_code(e, r, n->c, env) : env;
    }
    case NODE_LET: {
        Value *v;
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag != 0, MODE_VALUE, false, false, env, &v);
        if (v->kind != V_ERROR) elab_code(e, r, n->b, inner);
        return env;
    }
    case NODE_FOR: {
        Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
        if (from->kind == V_ERROR || to->kind == V_ERROR) return env;
        if (from->kind != V_INT || to->kind != V_INT) {
            diag_error(n->span, "the bounds of 'for' in code must be integers known at compile time");
            return env;
        }
        int64_t step = n->flag ? -1 : 1;
        for (int64_t i = from->as.i; n->flag ? i >= to->as.i : i <= to->as.i; i += step)
            elab_code(e, r, n->c, bind(e, env, n->name, int_value(e, i)));
        return env;
    }
    case NODE_APP:
    case NODE_VAR: elab_code_value(e, r, n, env); return env;
    case NODE_FIELD: {
        CodeStepKind kind = strcmp(n->name, "forward") == 0      ? STEP_FORWARD
                          : strcmp(n->name, "backprop") == 0     ? STEP_BACKPROP
                          : strcmp(n->name, "zero_grads") == 0   ? STEP_ZERO_GRADS
                                                                 : STEP_ASSIGN;
        if (kind == STEP_ASSIGN) break;
        Value *v = eval(e, n->a, env, MODE_TENSOR);
        if (v->kind == V_ERROR) return env;
        if (v->kind != V_TENSOR) {
            diag_error(n->a->span, "'.%s' is code of a tensor, but this is %s", n->name, kind_noun(v));
            return env;
        }
        add_step(e, r, (CodeStep){.kind = kind, .tensor = v->as.tensor, .span = n->span});
        return env;
    }
    case NODE_ASSIGN: return elab_assignment(e, r, n, env);
    default: break;
    }
    static const char *const code_fields[] = {"forward", "backprop", "zero_grads"};
    const char *near = n->kind == NODE_FIELD ? diag_closest_name(n->name, code_fields, 3) : NULL;
    diag_error(n->span, "a routine holds t.forward, t.backprop, t.zero_grads, assignments, let%%cd code, and "
               "'if', 'let' and 'for' over them");
    if (near) diag_note(n->span, "did you mean '.%s'?", near);
    return env;
}

/* ---- main (docs/language.md §3.2.9) -------------------------------------------------------------- */

typedef struct MainList {
    MainStep *items;
    uint32_t count, cap;
} MainList;

static void elab_main(Elab *e, const Node *n, Env *env, MainList *out);

static const Routine *find_routine(const Program *p, const char *name, uint32_t *at) {
    for (uint32_t i = 0; i < p->routine_count; i++)
        if (!p->routines[i].hidden && strcmp(p->routines[i].name, name) == 0) {
            *at = i;
            return &p->routines[i];
        }
    return NULL;
}

static uint32_t add_routine(Elab *e, Routine r) {
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->routines, p->routine_count, p->routine_cap, r);
    return p->routine_count - 1;
}

/* The text of a span, for labels. */
static const char *span_text(Elab *e, Span span) {
    const Source *src = source_get(span.file);
    return arena_printf(e->arena, "%.*s", (int)(span.end - span.start), src->text + span.start);
}

/* The largest width and precision a print conversion may have: printf needs memory in
 * proportion to them ("%.999999999f" asked for gigabytes when the program ran). */
enum { PRINT_FIELD_MAX = 1000 };

/* Reads the digits at f[*j] (up to `len`) as a width or precision; false, with an error, when
 * the number is above PRINT_FIELD_MAX. */
static bool format_field(const Node *fmt, size_t len, size_t *j, const char *what) {
    const char *f = fmt->text;
    size_t start = *j;
    uint64_t value = 0;
    for (; *j < len && f[*j] >= '0' && f[*j] <= '9'; (*j)++)
        if (value <= PRINT_FIELD_MAX) value = value * 10 + (uint64_t)(f[*j] - '0');
    if (value <= PRINT_FIELD_MAX) return true;
    diag_error(fmt->span, "the %s '%.*s' in the format of 'print' is too large (at most %d)", what,
               (int)(*j - start < 24 ? *j - start : 24), f + start, PRINT_FIELD_MAX);
    return false;
}

/* Check a print format; mark which arguments its conversions read as floats.  Conversions:
 * %[flags][width][.precision] then d i u x X o c (integer) or f F e E g G a A (floating), and %%;
 * width and precision are at most PRINT_FIELD_MAX. */
static bool check_format(const Node *fmt, PrintArg *args, uint32_t count) {
    const char *f = fmt->text;
    uint32_t used = 0;
    for (size_t i = 0; i < fmt->len; i++) {
        if (f[i] != '%') continue;
        if (i + 1 < fmt->len && f[i + 1] == '%') {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < fmt->len && strchr("-+ #0", f[j])) j++;
        if (!format_field(fmt, fmt->len, &j, "width")) return false;
        if (j < fmt->len && f[j] == '.') {
            j++;
            if (!format_field(fmt, fmt->len, &j, "precision")) return false;
        }
        if (j - i > 24 || j >= fmt->len || !strchr("diuxXocfFeEgGaA", f[j])) {
            diag_error(fmt->span, "bad conversion in the format of 'print' at '%.*s': use %%d, %%x, %%c for integers, "
                       "%%f, %%e, %%g for numbers, %%%% for a percent sign", (int)(j < fmt->len ? j - i + 1 : j - i), f + i);
            return false;
        }
        if (used < count) {
            args[used].wants_float = strchr("fFeEgGaA", f[j]) != NULL;
            if (!args[used].wants_float && (args[used].kind == PARG_TENSOR || args[used].kind == PARG_FLOAT ||
                                            (args[used].kind == PARG_OPTION && args[used].float_option))) {
                diag_error(args[used].span, "the format's conversion '%.*s' is for an integer, but this is a number; "
                           "use %%f, %%e or %%g", (int)(j - i + 1), f + i);
                return false;
            }
        }
        used++;
        i = j;
    }
    if (used != count) {
        diag_error(fmt->span, "the format of 'print' has %u conversion%s but %u value%s follow%s", used,
                   used == 1 ? "" : "s", count, count == 1 ? "" : "s", count == 1 ? "s" : "");
        return false;
    }
    return true;
}

static void main_print(Elab *e, const Node *n, Env *env, MainList *out) {
    MainStep step = {.kind = MAIN_PRINT, .span = n->span, .routine = UINT32_MAX};
    uint32_t count = n->list.count;
    const Node *fmt = count ? n->list.items[0] : NULL;
    bool formatted = fmt && fmt->kind == NODE_STRING;
    if (!count || (!formatted && count != 1)) {
        diag_error(n->span, "'print' takes a format and its values (print \"loss %%.4f\" loss) or one tensor (print w)");
        return;
    }
    uint32_t first = formatted ? 1 : 0;
    step.arg_count = count - first;
    step.args = arena_alloc(e->arena, (step.arg_count ? step.arg_count : 1) * sizeof *step.args);
    uint32_t fresh_from = e->program->tensor_count;
    Routine compute = {.name = arena_printf(e->arena, "main.print@%u", n->span.start), .span = n->span, .hidden = true};
    for (uint32_t i = 0; i < step.arg_count; i++) {
        const Node *a = n->list.items[first + i];
        PrintArg *p = &step.args[i];
        p->span = a->span;
        if (a->kind == NODE_ARG) {
            diag_error(a->span, "'print' takes no labelled arguments");
            return;
        }
        if (a->kind == NODE_FIELD && strcmp(a->name, "grad") == 0) { /* print p.grad: the gradient as it is */
            Tensor *t;
            bool grad;
            if (!code_tensor(e, a, env, &t, &grad)) return;
            *p = (PrintArg){.kind = PARG_TENSOR, .tensor = t, .grad = true, .span = a->span};
            continue;
        }
        Value *v = eval(e, a, env, MODE_TENSOR);
        if (v->kind == V_ERROR) return;
        switch (v->kind) {
        case V_INT: p->kind = PARG_INT; p->i = v->as.i; break;
        case V_FLOAT: p->kind = PARG_FLOAT; p->f = v->as.f; break;
        case V_INDEX: p->kind = PARG_INDEX; p->index = v->as.index.id; break;
        case V_OPTION:
            p->kind = PARG_OPTION;
            p->index = v->as.option.id;
            p->float_option = e->program->options[p->index].is_float;
            p->i = v->as.option.offset;
            break;
        case V_TENSOR:
            if (v->as.tensor->kind == TENSOR_INDEX) { /* !@i */
                diag_error(a->span, "print the index itself ('%s'), not '!@%s'", v->as.tensor->index, v->as.tensor->index);
                return;
            }
            p->kind = PARG_TENSOR;
            p->tensor = v->as.tensor;
            if (p->tensor->id >= fresh_from)
                add_step(e, &compute, (CodeStep){.kind = STEP_COMPUTE, .tensor = p->tensor, .fresh_from = fresh_from,
                                                 .span = a->span});
            break;
        default:
            diag_error(a->span, "'print' prints numbers, index symbols and tensors, but this is %s", kind_noun(v));
            return;
        }
    }
    if (formatted) {
        if (!check_format(fmt, step.args, step.arg_count)) return;
        step.format = fmt->text;
    } else {
        if (step.args[0].kind != PARG_TENSOR) {
            diag_error(step.args[0].span, "without a format, 'print' prints a tensor as a grid; use a format to print "
                       "a number: print \"%%d\" i");
            return;
        }
        step.label = span_text(e, step.args[0].span);
    }
    if (compute.step_count) step.routine = add_routine(e, compute);
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* A bound of a loop of main: an integer, or an integer option plus an integer (read at run time). */
static bool loop_bound(Elab *e, const Node *n, Value *v, int64_t *value, uint32_t *option) {
    *option = UINT32_MAX;
    if (v->kind == V_INT) {
        *value = v->as.i;
        return true;
    }
    if (v->kind == V_OPTION && !e->program->options[v->as.option.id].is_float) {
        *option = v->as.option.id;
        *value = v->as.option.offset;
        return true;
    }
    if (v->kind != V_ERROR)
        diag_error(n->span, "the bounds of a loop in 'main' must be integers known at compile time or integer "
                   "options, but this is %s", v->kind == V_OPTION ? "an option that is a number" : kind_noun(v));
    return false;
}

static void main_for(Elab *e, const Node *n, Env *env, MainList *out, bool progress) {
    Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
    MainStep step = {.kind = MAIN_FOR, .span = n->span, .down = n->flag == 1, .progress = progress};
    if (!loop_bound(e, n->a, from, &step.from, &step.from_option) | !loop_bound(e, n->b, to, &step.to, &step.to_option))
        return;
    bool at_run_time = step.from_option != UINT32_MAX || step.to_option != UINT32_MAX;
    int64_t lo = step.down ? step.to : step.from, hi = step.down ? step.from : step.to;
    Value *sym = lookup(e, env, n->name);
    if (sym && sym->kind == V_INDEX) {
        if (!at_run_time && lo <= hi && (lo < 0 || hi >= sym->as.index.range)) {
            diag_error(lo < 0 ? (step.down ? n->b : n->a)->span : (step.down ? n->a : n->b)->span,
                       "the loop runs '%s' over %lld..%lld, outside its range 0..%u", n->name, (long long)lo,
                       (long long)hi, sym->as.index.range - 1);
            diag_note(sym->as.index.span, "the range of '%s'", n->name);
            return;
        }
    } else if (at_run_time) { /* checked when the loop starts: counts from 0 up */
        sym = index_value(e, n->name, INT64_MAX, n->span, true);
    } else {
        if (lo <= hi && lo < 0) {
            diag_error(n->span, "a loop counter of 'main' counts from 0 up (this loop reaches %lld)", (long long)lo);
            return;
        }
        /* The counter's range is hi + 1 values, saturated where hi is the largest 64-bit integer. */
        sym = index_value(e, n->name, hi >= lo && hi >= 0 ? (hi < INT64_MAX ? hi + 1 : INT64_MAX) : 1, n->span, true);
    }
    step.index = sym->as.index.id;
    MainList body = {0};
    elab_main(e, n->c, bind(e, env, n->name, sym), &body);
    step.body = body.items;
    step.body_count = body.count;
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* save "file.npz" [p; …] and load "file.npz" [p; …]: a checkpoint of the listed parameters,
 * or of every parameter. */
static void main_checkpoint(Elab *e, const Node *n, Env *env, MainList *out, MainStepKind kind) {
    const char *verb = kind == MAIN_SAVE ? "save" : "load";
    uint32_t count = n->list.count;
    const Node *file = count ? n->list.items[0] : NULL, *list = count == 2 ? n->list.items[1] : NULL;
    if (!file || file->kind != NODE_STRING || count > 2 || (list && list->kind != NODE_LIST)) {
        diag_error(n->span, "'%s' takes a file name and optionally a list of parameters: %s \"model.npz\" or "
                   "%s \"model.npz\" [w; b]", verb, verb, verb);
        return;
    }
    if (file->len == 0 || memchr(file->text, 0, file->len)) {
        diag_error(file->span, "the file of '%s' needs a name", verb);
        return;
    }
    MainStep step = {.kind = kind, .span = n->span, .routine = UINT32_MAX, .text = file->text};
    if (list) {
        if (list->list.count == 0) {
            diag_error(list->span, "the list of '%s' is empty; leave it out to %s every parameter", verb, verb);
            return;
        }
        step.tensor_count = list->list.count;
        step.tensors = arena_alloc(e->arena, step.tensor_count * sizeof *step.tensors);
        for (uint32_t i = 0; i < step.tensor_count; i++) {
            const Node *a = list->list.items[i];
            Value *v = eval(e, a, env, MODE_TENSOR);
            if (v->kind == V_ERROR) return;
            if (v->kind != V_TENSOR || v->as.tensor->kind != TENSOR_PARAM) {
                diag_error(a->span, "a checkpoint holds parameters, but this is %s",
                           v->kind == V_TENSOR ? "a tensor that is not a parameter" : kind_noun(v));
                return;
            }
            step.tensors[i] = v->as.tensor;
        }
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* The data item (not an option) named `name`, or UINT32_MAX. */
static uint32_t data_item_number(const Program *p, const char *name) {
    for (uint32_t i = 0; i < p->source_count; i++)
        if (strcmp(p->sources[i]->name, name) == 0 && strcmp(p->sources[i]->generator, "option") != 0) return i;
    return UINT32_MAX;
}

/* shuffle NAME, or shuffle (NAME, NAME, …): permute the rows of the data items, all by one
 * permutation (plan.c checks they have the same rows).  The step lists every field of every
 * item; `source` is the first item, whose number keys the permutation. */
static void main_shuffle(Elab *e, const Node *n, MainList *out) {
    const Node *arg = n->list.count == 1 ? n->list.items[0] : NULL;
    const Node *const *names = arg && arg->kind == NODE_TUPLE ? (const Node *const *)arg->list.items : &arg;
    uint32_t name_count = arg && arg->kind == NODE_TUPLE ? arg->list.count : 1;
    for (uint32_t k = 0; k < name_count; k++)
        if (!names[k] || names[k]->kind != NODE_VAR) {
            diag_error(names[k] ? names[k]->span : n->span,
                       "'shuffle' takes a data item, or a tuple of data items shuffled alike: shuffle moons, "
                       "shuffle (images, labels)");
            return;
        }
    const Program *p = e->program;
    MainStep step = {.kind = MAIN_SHUFFLE, .span = n->span, .routine = UINT32_MAX};
    uint32_t field_count = 0, *items = arena_alloc(e->arena, name_count * sizeof *items);
    for (uint32_t k = 0; k < name_count; k++) {
        if ((items[k] = data_item_number(p, names[k]->name)) == UINT32_MAX) {
            diag_error(names[k]->span, "there is no data item '%s' to shuffle (data items are declared before 'main')",
                       names[k]->name);
            return;
        }
        for (uint32_t j = 0; j < k; j++)
            if (items[j] == items[k]) {
                diag_error(names[k]->span, "'%s' is listed twice in this shuffle", names[k]->name);
                diag_note(names[j]->span, "first listed here");
                return;
            }
        field_count += p->sources[items[k]]->field_count;
    }
    step.source = items[0];
    step.tensors = arena_alloc(e->arena, field_count * sizeof *step.tensors);
    for (uint32_t k = 0; k < name_count; k++) {
        const DataSource *d = p->sources[items[k]];
        for (uint32_t f = 0; f < d->field_count; f++) step.tensors[step.tensor_count++] = d->fields[f];
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* The number of series `name`; a new one when `create`, else UINT32_MAX if there is none. */
static uint32_t series_number(Elab *e, const char *name, bool create) {
    Program *p = e->program;
    for (uint32_t i = 0; i < p->series_count; i++)
        if (strcmp(p->series[i], name) == 0) return i;
    if (!create) return UINT32_MAX;
    ARENA_PUSH(e->arena, p->series, p->series_count, p->series_cap, name);
    return p->series_count - 1;
}

/* record NAME t: append t (one cell) to series NAME; plot NAME: draw the series. */
static void main_series(Elab *e, const Node *n, Env *env, MainList *out, MainStepKind kind) {
    uint32_t want = kind == MAIN_RECORD ? 2 : 1;
    const Node *name = n->list.count == want ? n->list.items[0] : NULL;
    if (!name || name->kind != NODE_VAR) {
        diag_error(n->span, kind == MAIN_RECORD ? "'record' takes a series name and a one-cell tensor: record losses loss"
                                                : "'plot' takes the name of a recorded series: plot losses");
        return;
    }
    MainStep step = {.kind = kind, .span = n->span, .routine = UINT32_MAX, .text = name->name,
                     .series = series_number(e, name->name, kind == MAIN_RECORD)};
    if (step.series == UINT32_MAX) {
        diag_error(name->span, "no series '%s' is recorded before this plot (record %s x, in a loop of main)", name->name,
                   name->name);
        return;
    }
    if (kind == MAIN_RECORD) {
        const Node *a = n->list.items[1];
        uint32_t fresh_from = e->program->tensor_count;
        Value *v = eval(e, a, env, MODE_TENSOR);
        if (v->kind == V_ERROR) return;
        if (v->kind != V_TENSOR || v->as.tensor->kind == TENSOR_INDEX) {
            diag_error(a->span, "'record' records a one-cell tensor, but this is %s",
                       v->kind == V_TENSOR ? "an index value" : kind_noun(v));
            return;
        }
        step.tensors = arena_alloc(e->arena, sizeof *step.tensors);
        step.tensors[0] = v->as.tensor;
        step.tensor_count = 1;
        if (v->as.tensor->id >= fresh_from) { /* an expression: computed just before it is recorded */
            Routine compute = {.name = arena_printf(e->arena, "main.record@%u", n->span.start), .span = n->span,
                               .hidden = true};
            add_step(e, &compute, (CodeStep){.kind = STEP_COMPUTE, .tensor = v->as.tensor, .fresh_from = fresh_from,
                                             .span = a->span});
            step.routine = add_routine(e, compute);
        }
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

static void elab_main(Elab *e, const Node *n, Env *env, MainList *out) {
    switch (n->kind) {
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) elab_main(e, n->list.items[i], env, out);
        return;
    case NODE_UNIT: return;
    case NODE_FOR: main_for(e, n, env, out, false); return;
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return;
        if (c->kind != V_BOOL) {
            diag_error(n->a->span, "a condition in 'main' is decided at compile time; this is %s", kind_noun(c));
            return;
        }
        if (c->as.b) elab_main(e, n->b, env, out);
        else if (n->c) elab_main(e, n->c, env, out);
        return;
    }
    case NODE_LET: {
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag, MODE_TENSOR, false, false, env, NULL);
        elab_main(e, n->b, inner, out);
        return;
    }
    case NODE_CODE: {
        Routine r = {.name = arena_printf(e->arena, "main.cd@%u", n->span.start), .span = n->span, .hidden = true};
        elab_code(e, &r, n, env);
        MainStep step = {.kind = MAIN_RUN, .span = n->span, .routine = add_routine(e, r)};
        ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
        return;
    }
    case NODE_APP:
        if (n->a->kind == NODE_VAR && !lookup(e, env, n->a->name)) {
            if (strcmp(n->a->name, "run") == 0) {
                const Node *arg = n->list.count == 1 ? n->list.items[0] : NULL;
                if (!arg || arg->kind != NODE_VAR) {
                    diag_error(n->span, "'run' takes the name of one routine: run train");
                    return;
                }
                uint32_t at;
                if (!find_routine(e->program, arg->name, &at)) {
                    diag_error(arg->span, "there is no routine '%s' (routines are declared before 'main')", arg->name);
                    return;
                }
                MainStep step = {.kind = MAIN_RUN, .span = n->span, .routine = at};
                ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
                return;
            }
            if (strcmp(n->a->name, "print") == 0) {
                main_print(e, n, env, out);
                return;
            }
            if (strcmp(n->a->name, "save") == 0 || strcmp(n->a->name, "load") == 0) {
                main_checkpoint(e, n, env, out, n->a->name[0] == 's' ? MAIN_SAVE : MAIN_LOAD);
                return;
            }
            if (strcmp(n->a->name, "shuffle") == 0) {
                main_shuffle(e, n, out);
                return;
            }
            if (strcmp(n->a->name, "record") == 0 || strcmp(n->a->name, "plot") == 0) {
                main_series(e, n, env, out, n->a->name[0] == 'r' ? MAIN_RECORD : MAIN_PLOT);
                return;
            }
            if (strcmp(n->a->name, "progress") == 0) {
                const Node *loop = n->list.count == 1 ? n->list.items[0] : NULL;
                if (!loop || loop->kind != NODE_FOR) {
                    diag_error(n->span, "'progress' takes one loop: progress (for epoch = 1 to epochs do … done)");
                    return;
                }
                main_for(e, loop, env, out, true);
                return;
            }
        }
        break;
    default: break;
    }
    diag_error(n->span, "'main' runs routines (run r), prints (print \"…\" x), loops (for i = a to b do … done) and "
               "the statements of docs/language.md §3.2.9 (save, load, shuffle, record, plot, progress); this is not "
               "one of them");
}

/* option NAME = DEFAULT: an integer or a number that `--NAME VALUE` sets when the program runs. */
static void elab_option(Elab *e, const Node *item) {
    static const char *const reserved[] = {"help", "seed", "threads", "data", "load"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(item->name, reserved[i]) == 0) {
            diag_error(item->span, "'--%s' is an option of every executable; choose another name for this option",
                       item->name);
            return;
        }
    Program *p = e->program;
    for (uint32_t i = 0; i < p->option_count; i++)
        if (strcmp(p->options[i].name, item->name) == 0) {
            diag_error(item->span, "option '%s' is declared twice", item->name);
            diag_note(p->options[i].span, "the first declaration");
            return;
        }
    Value *v = eval(e, item->a, e->globals, MODE_VALUE);
    if (v->kind == V_ERROR) return;
    if (!is_number(v) || (v->kind == V_INT && (v->as.i > (INT64_C(1) << 53) || v->as.i < -(INT64_C(1) << 53))) ||
        (v->kind == V_FLOAT && !isfinite(v->as.f))) {
        diag_error(item->a->span, "an option's default is an integer (at most 2^53 in size) or a finite number, but "
                   "this is %s", is_number(v) ? "out of that range" : kind_noun(v));
        return;
    }
    ProgramOption o = {item->name, v->kind == V_FLOAT, number_of(v), item->span, NULL};
    ARENA_PUSH(e->arena, p->options, p->option_count, p->option_cap, o);
    Value *opt = new_value(e, V_OPTION);
    opt->as.option.id = p->option_count - 1;
    bind_global(e, item->name, opt);
}

static void elab_item(Elab *e, const Node *item) {
    e->scope = NULL;
    switch (item->kind) {
    case ITEM_LET: {
        Mode mode = (item->flag & LET_OP) ? MODE_TENSOR : MODE_VALUE;
        bool code = (item->flag & LET_CD) != 0;
        Value *v;
        if (mode == MODE_TENSOR && item->list.count == 0) e->scope = new_scope(e, item->name, true);
        e->globals = eval_binding(e, item->name, &item->list, item->a, (item->flag & LET_REC) != 0, mode,
                                  code, true, e->globals, &v);
        if ((item->flag & LET_OP) && v->kind == V_TENSOR && strcmp(item->name, "_") != 0)
            add_named(e, v->as.tensor, item->name);
        break;
    }
    case ITEM_OPERATOR: {
        Value *v = &error_value; /* a malformed declaration: its uses stay silent */
        if (check_operator(item)) {
            v = new_value(e, V_OPERATOR);
            v->as.op = item;
        }
        bind_global(e, item->name, v);
        break;
    }
    case ITEM_INDEX: {
        Value *r = eval(e, item->a, e->globals, MODE_VALUE);
        if (r->kind == V_ERROR) break;
        if (r->kind != V_INT || r->as.i < 1 || r->as.i > INT32_MAX) {
            if (r->kind == V_INT)
                diag_error(item->a->span, "the range of an index must be a positive integer, but this is %lld",
                           (long long)r->as.i);
            else
                diag_error(item->a->span, "the range of an index must be a positive integer, but this is %s",
                           kind_noun(r));
            break;
        }
        bind_global(e, item->name, index_value(e, item->name, r->as.i, item->a->span, false));
        break;
    }
    case ITEM_DATA: {
        Value *v = eval(e, item->a, e->globals, MODE_VALUE);
        if (v->kind == V_ERROR) break;
        if (v->kind != V_DATASET) {
            diag_error(item->a->span, "'data' takes a data source such as half_moons or npy, but this is %s",
                       kind_noun(v));
            break;
        }
        DataSource *d = v->as.dataset.source;
        if (d->name) {
            diag_error(item->a->span, "this data source already belongs to '%s'", d->name);
            break;
        }
        d->name = item->name;
        ARENA_PUSH(e->arena, e->program->sources, e->program->source_count, e->program->source_cap, d);
        v->as.dataset.name = item->name;
        if (v->as.dataset.count == 1 && !v->as.dataset.fields[0].name) { /* one tensor: the item is it */
            name_runtime_sizes(e, v->as.dataset.fields[0].value->as.tensor, item->name);
            add_named(e, v->as.dataset.fields[0].value->as.tensor, item->name);
            bind_global(e, item->name, v->as.dataset.fields[0].value);
            break;
        }
        for (uint32_t i = 0; i < v->as.dataset.count; i++) {
            Field *f = &v->as.dataset.fields[i];
            add_named(e, f->value->as.tensor, arena_printf(e->arena, "%s.%s", item->name, f->name));
        }
        bind_global(e, item->name, v);
        break;
    }
    case ITEM_INPUT: {
        const Node *rec = item->a;
        const Node *first = rec->list.items[0];
        if (first->a) {
            diag_error(first->span, "an input is filled by the caller; it takes no initial value");
            break;
        }
        Row rows[ROW_KINDS];
        bool given[ROW_KINDS];
        if (!record_sizes(e, rec, e->globals, first->name, SIZES_DECLARE, rows, given)) break;
        Tensor *t = new_tensor(e, TENSOR_INPUT, rec->span);
        Shape none = closed_shape(e, rec->span, arena_printf(e->arena, "input '%s'", first->name));
        for (int k = 0; k < ROW_KINDS; k++) t->shape.rows[k] = given[k] ? rows[k] : none.rows[k];
        add_named(e, t, first->name);
        bind_global(e, first->name, tensor_value(e, t));
        break;
    }
    case ITEM_OPEN: open_module(e, item); break;
    case ITEM_OPTION: elab_option(e, item); break;
    case ITEM_ROUTINE: {
        Routine r = {.name = item->name, .span = item->span};
        elab_code(e, &r, item->a, e->globals);
        Program *p = e->program;
        for (uint32_t i = 0; i < p->routine_count; i++)
            if (strcmp(p->routines[i].name, item->name) == 0) {
                diag_error(item->span, "routine '%s' is defined twice", item->name);
                diag_note(p->routines[i].span, "the first definition");
                return;
            }
        ARENA_PUSH(e->arena, p->routines, p->routine_count, p->routine_cap, r);
        break;
    }
    case ITEM_MAIN: {
        Program *p = e->program;
        if (p->has_main) {
            diag_error(item->span, "'main' is defined twice");
            break;
        }
        p->has_main = true;
        MainList steps = {0};
        elab_main(e, item->a, e->globals, &steps);
        p->main = steps.items;
        p->main_count = steps.count;
        break;
    }
    default: break;
    }
    e->scope = NULL;
}

static void elab_module(Elab *e, Module *m) {
    for (uint32_t i = 0; i < m->items.count; i++) elab_item(e, m->items.items[i]);
}

/* ---- Names shown by --print-shapes ---------------------------------------------------------- */

/* A set of names (open addressing) for making shown names unique. */
typedef struct NameSet {
    const char **slots;
    unsigned *next_suffix; /* per slot: the next #k to try when this name is a base again */
    uint32_t cap, count;
} NameSet;

/* Returns the slot of name, adding it if absent (*added says which). */
static uint32_t name_set_add(Elab *e, NameSet *set, const char *name, bool *added) {
    if (2 * (set->count + 1) > set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 64;
        NameSet grown = {arena_alloc(e->arena, cap * sizeof(char *)), arena_alloc(e->arena, cap * sizeof(unsigned)),
                         cap, 0};
        for (uint32_t i = 0; i < set->cap; i++) {
            if (!set->slots[i]) continue;
            bool dummy;
            grown.next_suffix[name_set_add(e, &grown, set->slots[i], &dummy)] = set->next_suffix[i];
        }
        *set = grown;
    }
    for (uint32_t i = name_hash(name) % set->cap;; i = (i + 1) % set->cap) {
        if (!set->slots[i]) {
            set->slots[i] = name;
            set->next_suffix[i] = 2;
            set->count++;
            *added = true;
            return i;
        }
        if (strcmp(set->slots[i], name) == 0) {
            *added = false;
            return i;
        }
    }
}

/* base, or base#2, base#3, ... the first not taken. */
static const char *unique(Elab *e, NameSet *set, const char *base) {
    bool added;
    uint32_t slot = name_set_add(e, set, base, &added);
    while (!added) {
        unsigned k = set->next_suffix[slot]++;
        const char *name = arena_printf(e->arena, "%s#%u", base, k);
        name_set_add(e, set, name, &added);
        if (added) return name;
        slot = name_set_add(e, set, base, &added); /* the set may have grown */
    }
    return base;
}

static void assign_names(Elab *e) {
    NameSet qual = {0};
    for (uint32_t i = 0; i < e->scope_count; i++) {
        Scope *s = e->scopes[i];
        if (s->toplevel || (!s->binding && !s->fn_name)) continue;
        s->shown = unique(e, &qual, s->binding ? s->binding : s->fn_name);
    }
    NameSet names = {0};
    Program *p = e->program;
    for (uint32_t i = 0; i < e->entry_count; i++) {
        NamedEntry *ne = &e->entries[i];
        const char *base = ne->name;
        if (!base) base = ne->scope && ne->scope->shown ? arena_printf(e->arena, "%s.%s", ne->scope->shown,
                                                                        ne->param_name)
                                                        : ne->param_name;
        const char *shown = unique(e, &names, base);
        if (!ne->tensor->shown) ne->tensor->shown = shown;
        uint32_t c = p->named_count, cap = p->named_cap;
        ARENA_PUSH(e->arena, p->named, p->named_count, p->named_cap, ne->tensor);
        ARENA_PUSH(e->arena, p->shown_names, c, cap, shown);
    }
}

/* ---- Driver -------------------------------------------------------------------------------- */

static void register_shapes(Elab *e) {
    Program *p = e->program;
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        switch (t->kind) {
        case TENSOR_PARAM:
            shape_add_leaf(e->solver, &t->shape, LEAF_PARAMETER, t->shown ? t->shown : t->name,
                           origin(e, t->span, "parameter '%s'", t->shown ? t->shown : t->name));
            break;
        case TENSOR_CONSTANT:
            shape_add_leaf(e->solver, &t->shape, LEAF_CONSTANT, "constant", 0);
            break;
        default: shape_add_interior(e->solver, &t->shape); break;
        }
    }
}

/* Once shapes are closed: every tensor's cells must fit in a 64-bit size, at most 2^63 - 1 cells
 * (what the runtime holds; the buffers' sizes are computed from these shapes).  A tensor made from
 * an operand reported already is not reported again. */
static void check_cell_counts(Elab *e) {
    Program *p = e->program;
    bool *reported = arena_alloc(e->arena, (p->tensor_count + 1) * sizeof *reported);
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        reported[t->id] = false;
        Shape s = shape_resolve(e->solver, &t->shape);
        bool zero = false, over = false;
        uint64_t cells = 1;
        for (int k = 0; k < ROW_KINDS; k++)
            for (uint32_t j = 0; j < s.rows[k].count; j++) {
                uint64_t d = s.rows[k].dims[j].size;
                if (d == 0) zero = true;
                else if (!over && (cells > (uint64_t)INT64_MAX / d)) over = true;
                else if (!over) cells *= d;
            }
        if (zero || !over) continue;
        reported[t->id] = true;
        bool inherited = false;
        for (uint32_t k = 0; k < t->operand_count && !inherited; k++)
            inherited = t->operands[k]->id < t->id && reported[t->operands[k]->id];
        if (inherited) continue;
        const char *name = t->shown ? t->shown : t->name;
        if (name)
            diag_error(t->span, "tensor '%s' of shape %s has too many cells: more than 2^63 - 1, the most a "
                       "64-bit size holds", name, shape_to_string(e->solver, &t->shape));
        else
            diag_error(t->span, "this tensor of shape %s has too many cells: more than 2^63 - 1, the most a "
                       "64-bit size holds", shape_to_string(e->solver, &t->shape));
    }
}

/* Whether a `?` was written in t's definition. */
static bool writes_runtime_size(Elab *e, const Tensor *t) {
    for (int k = 0; k < ROW_KINDS; k++)
        for (uint32_t j = 0; j < t->shape.rows[k].count; j++)
            if (shape_runtime_decl_of(e->solver, t->shape.rows[k].dims[j]) != UINT32_MAX) return true;
    return false;
}

/* Once shapes are closed: a parameter is made and initialised when the state is, so none of its
 * axes may be a run-time size (docs/inference.md §4.9) -- unless its definition asks for one
 * (`{ h; b = [?] }`: it is made anew whenever that size is set). */
static void check_runtime_parameters(Elab *e) {
    Program *p = e->program;
    if (!shape_runtime_count(e->solver)) return;
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind != TENSOR_PARAM || writes_runtime_size(e, t)) continue;
        Shape s = shape_resolve(e->solver, &t->shape);
        const Dim *d = NULL;
        for (int k = 0; k < ROW_KINDS && !d; k++)
            for (uint32_t j = 0; j < s.rows[k].count && !d; j++)
                if (s.rows[k].dims[j].runtime) d = &s.rows[k].dims[j];
        if (!d) continue;
        diag_error(t->span, "parameter '%s' of shape %s has a run-time size: a parameter's sizes must be known at "
                   "compile time", t->shown ? t->shown : t->name, shape_to_string(e->solver, &t->shape));
        diag_note(shape_origin_span(e->solver, d->origin), "the run-time size comes from here");
    }
}

Program *elaborate(Module *module, const ElabOptions *options) {
    Arena *arena = arena_new();
    Program *p = arena_alloc(arena, sizeof *p);
    p->arena = arena;
    p->solver = shape_solver_new();
    Elab e = {0};
    e.bytes_at_start = arena_total_bytes();
    e.program = p;
    e.arena = arena;
    e.solver = p->solver;
    e.options = options;
    const char *path = source_get(module->file)->path;
    e.byte_budget = options && options->eval_megabytes
                        ? options->eval_megabytes << 20
                        : ((size_t)EVAL_MEGABYTES << 20) + EVAL_BYTES_PER_SOURCE_BYTE * source_get(module->file)->len;
    const char *slash = strrchr(path, '/');
    e.global_table = arena_alloc(arena, GLOBAL_BUCKETS * sizeof *e.global_table);
    e.globals = arena_alloc(arena, sizeof *e.globals); /* generation 0: no globals */
    e.main_dir = slash ? arena_strndup(arena, path, (size_t)(slash - path)) : ".";
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        Value *v = new_value(&e, V_BUILTIN);
        v->as.builtin.name = builtins[i].name;
        v->as.builtin.fn = builtins[i].fn;
        bind_global(&e, builtins[i].name, v);
    }
    /* The prelude. */
    for (unsigned i = 0; i < tsr_stdlib_file_count; i++) {
        if (strcmp(tsr_stdlib_files[i].name, "core.tsr") != 0) continue;
        uint32_t src = source_add("<stdlib>/core.tsr", tsr_stdlib_files[i].text, tsr_stdlib_files[i].len);
        e.prelude_file = src;
        Module *core = parse_module(src, arena);
        if (diag_error_count()) return p;
        elab_module(&e, core);
    }
    elab_module(&e, module);
    solve_equations(&e);
    if (diag_error_count()) {
        /* Still report the shape errors of what did elaborate; closing would only add noise
         * about tensors whose uses were lost to the errors. */
        shape_solve(p->solver);
        return p;
    }
    assign_names(&e);
    register_shapes(&e);
    if (shape_close(p->solver)) {
        settle_paddings(&e);
        fill_dim_readings(&e);
        check_cell_counts(&e);
        check_runtime_parameters(&e);
    }
    return p;
}

void program_free(Program *p) {
    if (!p) return;
    shape_solver_free(p->solver);
    arena_free(p->arena);
}

void program_print_shapes(Program *p, FILE *out) {
    for (uint32_t i = 0; i < p->named_count; i++) {
        fprintf(out, "%s : ", p->shown_names[i]);
        shape_print(p->solver, out, &p->named[i]->shape);
        fputc('\n', out);
    }
    /* The paddings shape inference chose where the spec left them open. */
    for (uint32_t i = 0; i < p->window_count; i++) {
        const ProgramWindow *pw = &p->windows[i];
        if (!pw->inferred) continue;
        unsigned line, col;
        span_line_col(pw->span, &line, &col);
        const SpecAffine *a = pw->affine;
        fprintf(out, "%s:%u:%u: padding of %d*%s+%d*%s : %s\n", source_get(pw->span.file)->path, line, col,
                a->stride.as.value, a->over.name, a->dilation.as.value, a->kernel.name,
                a->padding == SPEC_PAD_SAME ? "'=' (same)" : "'<' (valid)");
    }
}
