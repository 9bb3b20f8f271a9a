/* shape.c — the shape solver: variable elimination over the broadcast order (seed 000), in the
 * data types of OCANNL's design (seed 004).  See shape.h for the terms and docs/inference.md
 * for the rules in the seeds' words.
 *
 * State: a FIFO queue of constraints and an environment with one entry per variable.  A dim
 * variable is either solved (bound to a Dim, possibly another variable) or bounded: it keeps a
 * least upper bound (one atom; a second, different atom collapses it to 1_∅), an at-least size
 * (from fixed indices) and the variable-variable inequalities it takes part in.  A row variable
 * is either solved (bound to a Row) or keeps its upper-bound rows and its variable-variable
 * inequalities.  Solving a variable puts everything it kept back on the queue, against the new
 * value; that is what makes the fixpoint independent of the order constraints arrive in.
 * Four choices are kept out of that race: row equalities are taken before the queue, those
 * between two open rows first (a row's marker then does not depend on which equality came
 * first); template growth waits for a fixpoint (it never runs ahead of an equality), and grows
 * a row by the axes it lacks, no more; a row inequality whose sub row reaches across the super
 * row's variable (a crossing) waits for that variable, which closing then gives the fewest axes
 * that let the crossing's axes agree, at its fixpoints and before the leaves commit; and cells
 * constraints, slicing's front equalities, windows (affine axes: seed 004's Conv_input) and
 * concatenations (an axis the sum of its pieces) are settled only at fixpoints of closing.
 *
 * Requires: diag.h for errors (every Span in an origin must belong to a registered source, or
 * be the zero span). */
#include "infer/shape.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

enum { MAX_ROW_RANK = 1 << 20 }; /* a last resort; cycles are caught by row_dims first */

typedef enum ConstraintKind { C_DIM_EQ, C_DIM_LE, C_DIM_AT_LEAST, C_ROW_EQ, C_ROW_LE } ConstraintKind;

typedef struct Constraint {
    ConstraintKind kind;
    uint32_t at_least; /* C_DIM_AT_LEAST */
    bool contracting;  /* C_ROW_*: from a structural operation (compose, transpose, einsum) */
    bool may_grow;     /* C_ROW_LE: taken at a fixpoint, so a too-short super row may grow now;
                        * C_ROW_EQ: so open rows with crossed flanks may merge now */
    bool closing;      /* a value closing chose (close_leaves): recorded for --explain */
    Dim d1, d2;        /* C_DIM_*: d1 is the sub side of C_DIM_LE */
    Row r1, r2;        /* C_ROW_*: r1 is the sub side of C_ROW_LE */
    OriginId why;
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
    Span context;              /* shape_set_context */
    const char *context_name;
    const CallFrame *calls;    /* shape_push_call */
    bool contracting;  /* mark constraints queued from now on (shape_set_contracting) */
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

/* ---- Allocation, origins, bases ------------------------------------------------------------ */

static void list_push(ShapeSolver *s, ConstraintList *l, Constraint c) {
    ARENA_PUSH(s->arena, l->items, l->count, l->cap, c);
}

ShapeSolver *shape_solver_new(void) {
    Arena *arena = arena_new();
    ShapeSolver *s = arena_alloc(arena, sizeof *s);
    s->arena = arena;
    Origin none = {{0, 0, 0}, "nowhere", {0, 0, 0}, NULL, NULL, false};
    ARENA_PUSH(arena, s->origins, s->origin_count, s->origin_cap, none);
    const char *none_name = "", *default_name = "default";
    ARENA_PUSH(arena, s->bases, s->basis_count, s->basis_cap, none_name);
    ARENA_PUSH(arena, s->bases, s->basis_count, s->basis_cap, default_name);
    DimVarInfo dv = {0};
    RowVarInfo rv = {0};
    ARENA_PUSH(arena, s->dvars, s->dvar_count, s->dvar_cap, dv); /* variable 0 means "none" */
    ARENA_PUSH(arena, s->rvars, s->rvar_count, s->rvar_cap, rv);
    s->fallback = shape_origin(s, (Span){0, 0, 0}, "closing: nothing determined this size");
    s->fallback_open = shape_origin(s, (Span){0, 0, 0}, "closing: a use left this size open");
    return s;
}

void shape_solver_free(ShapeSolver *s) {
    if (s) arena_free(s->arena);
}

void shape_set_context(ShapeSolver *s, Span call, const char *name) {
    s->context = call;
    s->context_name = name;
}

void shape_push_call(ShapeSolver *s, Span call, const char *name) {
    CallFrame *f = arena_alloc(s->arena, sizeof *f);
    *f = (CallFrame){call, name, s->calls};
    s->calls = f;
}

void shape_pop_call(ShapeSolver *s) {
    if (s->calls) s->calls = s->calls->outer;
}

OriginId shape_origin(ShapeSolver *s, Span span, const char *what) {
    Origin o = {span, arena_strndup(s->arena, what, strlen(what)), s->context, s->context_name, s->calls, false};
    ARENA_PUSH(s->arena, s->origins, s->origin_count, s->origin_cap, o);
    return s->origin_count - 1;
}

Span shape_origin_span(const ShapeSolver *s, OriginId o) {
    return o < s->origin_count ? s->origins[o].span : (Span){0, 0, 0};
}

const char *shape_origin_what(const ShapeSolver *s, OriginId o) {
    return o < s->origin_count ? s->origins[o].what : "nowhere";
}

Span shape_origin_call(const ShapeSolver *s, OriginId o, const char **name) {
    *name = o < s->origin_count && s->origins[o].call_name ? s->origins[o].call_name : "a function";
    return o < s->origin_count ? s->origins[o].call : (Span){0, 0, 0};
}

uint32_t shape_basis(ShapeSolver *s, const char *name) {
    for (uint32_t i = 1; i < s->basis_count; i++)
        if (strcmp(s->bases[i], name) == 0) return i;
    const char *copy = arena_strndup(s->arena, name, strlen(name));
    ARENA_PUSH(s->arena, s->bases, s->basis_count, s->basis_cap, copy);
    return s->basis_count - 1;
}

const char *shape_basis_name(const ShapeSolver *s, uint32_t basis) {
    return basis < s->basis_count ? s->bases[basis] : "?";
}

unsigned shape_error_count(const ShapeSolver *s) { return s->errors; }

/* ---- Terms --------------------------------------------------------------------------------- */

Dim dim_ground(uint32_t size, uint32_t basis, OriginId origin) {
    return (Dim){.var = 0, .size = size, .basis = basis, .origin = origin};
}

Dim dim_unit(OriginId origin) { return dim_ground(1, BASIS_NONE, origin); }

static bool dim_is_unit(Dim d) { return d.var == 0 && d.basis == BASIS_NONE; }

Dim shape_runtime_dim(ShapeSolver *s, OriginId origin, const char *name) {
    Dim d = shape_fresh_dim(s, origin);
    s->dvars[d.var].runtime = origin;
    RuntimeDecl decl = {.var = d.var, .origin = origin, .name = name ? arena_printf(s->arena, "%s", name) : NULL};
    ARENA_PUSH(s->arena, s->runtime_decls, s->runtime_decl_count, s->runtime_decl_cap, decl);
    return d;
}

uint32_t shape_runtime_count(const ShapeSolver *s) { return s->runtime_count ? s->runtime_count - 1 : 0; }

const OriginId *shape_runtime_decls(const ShapeSolver *s, uint32_t k, uint32_t *count) {
    *count = s->runtimes[k].decl_count;
    return s->runtimes[k].decls;
}

uint32_t shape_runtime_min(const ShapeSolver *s, uint32_t k) { return s->runtimes[k].min; }

uint32_t shape_runtime_decl_count(const ShapeSolver *s) { return s->runtime_decl_count; }

uint32_t shape_runtime_decl(ShapeSolver *s, uint32_t i, const char **name, OriginId *origin) {
    const RuntimeDecl *decl = &s->runtime_decls[i];
    *name = decl->name;
    *origin = decl->origin;
    return shape_resolve_dim(s, (Dim){.var = decl->var}).runtime;
}

void shape_runtime_rename(ShapeSolver *s, uint32_t i, const char *name) {
    s->runtime_decls[i].name = arena_printf(s->arena, "%s", name);
}

uint32_t shape_runtime_decl_of(const ShapeSolver *s, Dim written) {
    for (uint32_t i = 0; written.var && i < s->runtime_decl_count; i++)
        if (s->runtime_decls[i].var == written.var) return i;
    return UINT32_MAX;
}

/* A variable that cannot take the claim-free unit: an at-least size above 1, or a run-time size.
 * Below an atom it is that atom, and below another variable it equals it. */
static bool dim_var_claimful(const DimVarInfo *info) { return info->at_least > 1 || info->runtime; }

Dim shape_fresh_dim(ShapeSolver *s, OriginId origin) {
    DimVarInfo info = {0};
    ARENA_PUSH(s->arena, s->dvars, s->dvar_count, s->dvar_cap, info);
    return (Dim){.var = s->dvar_count - 1, .origin = origin};
}

static uint32_t fresh_row_var(ShapeSolver *s) {
    RowVarInfo info = {0};
    ARENA_PUSH(s->arena, s->rvars, s->rvar_count, s->rvar_cap, info);
    return s->rvar_count - 1;
}

Row shape_fresh_row(ShapeSolver *s, OriginId origin) {
    return (Row){.dims = NULL, .count = 0, .lead = 0, .var = fresh_row_var(s), .origin = origin};
}

Row shape_row(ShapeSolver *s, const Dim *lead, uint32_t lead_count, uint32_t var, const Dim *trail,
              uint32_t trail_count, OriginId origin) {
    Row r = {.count = lead_count + trail_count, .lead = lead_count, .var = var, .origin = origin};
    if (r.count) {
        r.dims = arena_alloc(s->arena, r.count * sizeof *r.dims);
        if (lead_count) memcpy(r.dims, lead, lead_count * sizeof *lead);
        if (trail_count) memcpy(r.dims + lead_count, trail, trail_count * sizeof *trail);
    }
    return r;
}

Row shape_closed_row(ShapeSolver *s, const Dim *dims, uint32_t count, OriginId origin) {
    return shape_row(s, NULL, 0, 0, dims, count, origin);
}

Row shape_empty_row(OriginId origin) { return (Row){.origin = origin}; }

Shape shape_fresh(ShapeSolver *s, OriginId origin) {
    Shape sh;
    for (int k = 0; k < ROW_KINDS; k++) sh.rows[k] = shape_fresh_row(s, origin);
    return sh;
}

Row shape_row_prepend(ShapeSolver *s, const Dim *dims, uint32_t count, Row row) {
    Row r = row;
    r.count = row.count + count;
    r.lead = row.var ? row.lead + count : 0;
    r.dims = arena_alloc(s->arena, (r.count ? r.count : 1) * sizeof *r.dims);
    if (count) memcpy(r.dims, dims, count * sizeof *dims);
    if (row.count) memcpy(r.dims + count, row.dims, row.count * sizeof *row.dims);
    return r;
}

/* ---- Resolution (substitution of solved variables) ----------------------------------------- */

/* Whether d is a ground run-time size whose class closing bound to another size. */
static bool runtime_bound(const ShapeSolver *s, Dim d) { return d.var == 0 && d.runtime && s->runtimes[d.runtime].bound; }

Dim shape_resolve_dim(ShapeSolver *s, Dim d) {
    if (d.var == 0 && !runtime_bound(s, d)) return d;
    Dim cur = d;
    while ((cur.var && s->dvars[cur.var].solved) || runtime_bound(s, cur))
        cur = cur.var ? s->dvars[cur.var].value : s->runtimes[cur.runtime].value;
    /* Path compression: every variable on the chain now points at the end. */
    Dim walk = d;
    while (walk.var && s->dvars[walk.var].solved) {
        Dim next = s->dvars[walk.var].value;
        s->dvars[walk.var].value = cur;
        walk = next;
    }
    return cur;
}

Row shape_resolve_row(ShapeSolver *s, Row r) {
    bool changed = r.var && s->rvars[r.var].solved;
    for (uint32_t i = 0; i < r.count && !changed; i++)
        if ((r.dims[i].var && s->dvars[r.dims[i].var].solved) || runtime_bound(s, r.dims[i])) changed = true;
    if (!changed) return r;
    Row inner = (Row){0};
    bool splice = r.var && s->rvars[r.var].solved;
    if (splice) {
        inner = shape_resolve_row(s, s->rvars[r.var].value);
        s->rvars[r.var].value = inner; /* compress */
    }
    Row out = {.count = r.count + inner.count, .origin = r.origin};
    out.dims = arena_alloc(s->arena, (out.count ? out.count : 1) * sizeof *out.dims);
    uint32_t n = 0;
    for (uint32_t i = 0; i < r.lead; i++) out.dims[n++] = shape_resolve_dim(s, r.dims[i]);
    if (splice) {
        for (uint32_t i = 0; i < inner.count; i++) out.dims[n++] = inner.dims[i];
        out.lead = r.lead + inner.lead;
        out.var = inner.var;
        if (!inner.var) out.origin = inner.origin; /* closedness came from the value */
    } else {
        out.lead = r.lead;
        out.var = r.var;
    }
    for (uint32_t i = r.lead; i < r.count; i++) out.dims[n++] = shape_resolve_dim(s, r.dims[i]);
    return out;
}

Shape shape_resolve(ShapeSolver *s, const Shape *sh) {
    Shape out;
    for (int k = 0; k < ROW_KINDS; k++) out.rows[k] = shape_resolve_row(s, sh->rows[k]);
    return out;
}

static bool row_is_ground(Row r) {
    if (r.var) return false;
    for (uint32_t i = 0; i < r.count; i++)
        if (r.dims[i].var) return false;
    return true;
}

bool shape_is_ground(ShapeSolver *s, const Shape *sh) {
    for (int k = 0; k < ROW_KINDS; k++)
        if (!row_is_ground(shape_resolve_row(s, sh->rows[k]))) return false;
    return true;
}

/* ---- Printing ------------------------------------------------------------------------------ */

static void print_dim(ShapeSolver *s, FILE *out, Dim d) {
    d = shape_resolve_dim(s, d);
    if (d.runtime || (d.var && s->dvars[d.var].runtime)) fputc('?', out);
    else if (d.var) fprintf(out, "'d%u", d.var);
    else if (d.basis > BASIS_DEFAULT) fprintf(out, "%s=%u", s->bases[d.basis], d.size);
    else fprintf(out, "%u", d.size);
}

static void print_row(ShapeSolver *s, FILE *out, Row r) {
    r = shape_resolve_row(s, r);
    bool first = true;
    for (uint32_t i = 0; i <= r.count; i++) {
        if (i == r.lead && r.var) {
            fprintf(out, "%s..r%u..", first ? "" : ",", r.var);
            first = false;
        }
        if (i == r.count) break;
        if (!first) fputc(',', out);
        print_dim(s, out, r.dims[i]);
        first = false;
    }
}

static bool row_is_empty(Row r) { return r.count == 0 && r.var == 0; }

void shape_print(ShapeSolver *s, FILE *out, const Shape *shape) {
    Shape sh = shape_resolve(s, shape);
    Row b = sh.rows[ROW_BATCH], i = sh.rows[ROW_INPUT], o = sh.rows[ROW_OUTPUT];
    if (row_is_empty(b) && row_is_empty(i) && row_is_empty(o)) {
        fputc('1', out);
        return;
    }
    if (!row_is_empty(b)) {
        print_row(s, out, b);
        fputc('|', out);
    }
    if (!row_is_empty(i)) {
        print_row(s, out, i);
        fputs("->", out);
    }
    print_row(s, out, o);
}

static char *to_string_with(ShapeSolver *s, void (*fn)(ShapeSolver *, FILE *, const void *),
                            const void *arg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) diag_fatal_oom();
    fn(s, f, arg);
    fclose(f);
    char *copy = arena_strndup(s->arena, buf, len);
    free(buf);
    return copy;
}

static void print_shape_thunk(ShapeSolver *s, FILE *f, const void *arg) { shape_print(s, f, arg); }
/* For messages: "[3, _, ...]" -- unknown sizes as _, a row variable as ..., no variable ids
 * (messages are golden-tested and must not depend on numbering). */
static void print_row_thunk(ShapeSolver *s, FILE *f, const void *arg) {
    Row r = shape_resolve_row(s, *(const Row *)arg);
    fputc('[', f);
    for (uint32_t i = 0; i <= r.count; i++) {
        if (i == r.lead && r.var) fprintf(f, "%s...", i ? ", " : "");
        if (i == r.count) break;
        if (r.count > 8 && i >= 3 && i + 2 < r.count) { /* a long row: its ends are enough */
            if (i == 3) fprintf(f, ", ... %u axes in all ...", r.count);
            continue;
        }
        if (i || (r.var && r.lead == 0)) fputs(", ", f);
        Dim d = shape_resolve_dim(s, r.dims[i]);
        if (d.var) fputc('_', f);
        else if (d.basis > BASIS_DEFAULT) fprintf(f, "%s=%u", s->bases[d.basis], d.size);
        else fprintf(f, "%u", d.size);
    }
    fputc(']', f);
}

static const char *axes_count(ShapeSolver *s, Row r) {
    r = shape_resolve_row(s, r);
    const char *noun = r.count == 1 ? "axis" : "axes";
    if (r.var) return arena_printf(s->arena, "at least %u %s", r.count, noun);
    return arena_printf(s->arena, "%u %s", r.count, noun);
}

char *shape_to_string(ShapeSolver *s, const Shape *sh) { return to_string_with(s, print_shape_thunk, sh); }
char *shape_row_to_string(ShapeSolver *s, Row r) { return to_string_with(s, print_row_thunk, &r); }

static char *dim_to_string(ShapeSolver *s, Dim d) {
    d = shape_resolve_dim(s, d);
    if (d.runtime || (d.var && s->dvars[d.var].runtime)) return arena_printf(s->arena, "? (a run-time size)");
    if (d.var) return arena_printf(s->arena, "an unknown size");
    if (d.basis == BASIS_NONE) return arena_printf(s->arena, "1 (broadcastable)");
    if (d.basis == BASIS_DEFAULT) return arena_printf(s->arena, "%u", d.size);
    return arena_printf(s->arena, "%s=%u", s->bases[d.basis], d.size);
}

/* ---- Errors -------------------------------------------------------------------------------- */

/* Whether a dim's origin is closing's fallback: the least value, given where nothing else could
 * be (fallback_open: although a use bounded it, another left it open). */
static bool is_fallback(const ShapeSolver *s, OriginId o) { return o == s->fallback || o == s->fallback_open; }

static void note_origin(ShapeSolver *s, OriginId o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_origin(ShapeSolver *s, OriginId o, const char *fmt, ...) {
    if (o == 0 || is_fallback(s, o)) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_note(s->origins[o].span, "%s: %s", msg, s->origins[o].what);
}

/* Report an error of constraint `why` whose two sides come from origins side_a and side_b. */
static void error_at(ShapeSolver *s, OriginId why, OriginId side_a, OriginId side_b, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void error_at(ShapeSolver *s, OriginId why, OriginId side_a, OriginId side_b, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->errors++;
    const Origin *o = &s->origins[why];
    if (o->cycled) diag_drop_next();
    /* The same constraint of a function body may fail in several applications: it is one
     * error when both sides come from the same places (the body's own literals), and one per
     * application when they differ (the arguments). */
    Span sa = s->origins[side_a].span, sb = s->origins[side_b].span;
    diag_dedupe_salt(((uint64_t)sa.start << 32 | sa.end) * 31 + ((uint64_t)sb.start << 32 | sb.end) +
                     ((uint64_t)sa.file << 56) + ((uint64_t)sb.file << 48));
    const char *fn = o->call_name ? o->call_name : "a function";
    if (o->call.file && span_in_stdlib(o->span) && !span_in_stdlib(o->call)) {
        /* Inside a library function: the user's call is where to look first. */
        diag_error(o->call, "in this application of '%s': %s: %s", fn, o->what, msg);
        diag_note(o->span, "the operation in the standard library's '%s' that fails", fn);
        return;
    }
    diag_error(o->span, "%s: %s", o->what, msg);
    if (o->call.file) diag_note(o->call, "in this application of '%s'", fn);
}

static void report_dim_clash(ShapeSolver *s, bool equality, Dim a, Dim b, OriginId why) {
    const char *as = dim_to_string(s, a), *bs = dim_to_string(s, b);
    if (a.size == b.size && a.basis != b.basis)
        error_at(s, why, a.origin, b.origin, "basis clash: an axis %s cannot meet an axis %s", as, bs);
    else if (equality)
        error_at(s, why, a.origin, b.origin, "size %s does not match size %s", as, bs);
    else
        error_at(s, why, a.origin, b.origin, "size %s cannot broadcast to size %s", as, bs);
    note_origin(s, a.origin, "size %s comes from", as);
    note_origin(s, b.origin, "size %s comes from", bs);
}

/* ---- The queue ----------------------------------------------------------------------------- */

void shape_set_contracting(ShapeSolver *s, bool on) { s->contracting = on; }

static void enqueue(ShapeSolver *s, Constraint c) {
    c.closing = c.closing || s->committing;
    if (c.kind == C_ROW_EQ || c.kind == C_ROW_LE) c.contracting = c.contracting || s->contracting;
    if (!s->inside) list_push(s, &s->emitted, c);
    if (c.kind == C_ROW_EQ) { /* taken before the queue, open ones first: see shape_solve */
        list_push(s, &s->row_eqs, c);
        return;
    }
    if (s->queue_head > 0 && s->queue_head == s->queue_count) s->queue_head = s->queue_count = 0;
    ARENA_PUSH(s->arena, s->queue, s->queue_count, s->queue_cap, c);
}

void shape_dim_eq(ShapeSolver *s, Dim a, Dim b, OriginId why) {
    enqueue(s, (Constraint){.kind = C_DIM_EQ, .d1 = a, .d2 = b, .why = why});
}
void shape_dim_le(ShapeSolver *s, Dim sub, Dim super, OriginId why) {
    enqueue(s, (Constraint){.kind = C_DIM_LE, .d1 = sub, .d2 = super, .why = why});
}
void shape_dim_at_least(ShapeSolver *s, Dim d, uint32_t size, OriginId why) {
    enqueue(s, (Constraint){.kind = C_DIM_AT_LEAST, .d1 = d, .at_least = size, .why = why});
}
void shape_row_eq(ShapeSolver *s, Row a, Row b, OriginId why) {
    s->row_dims += a.count + b.count;
    enqueue(s, (Constraint){.kind = C_ROW_EQ, .r1 = a, .r2 = b, .why = why});
}
void shape_row_le(ShapeSolver *s, Row sub, Row super, OriginId why) {
    s->row_dims += sub.count + super.count;
    enqueue(s, (Constraint){.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why});
}
void shape_eq(ShapeSolver *s, const Shape *a, const Shape *b, OriginId why) {
    for (int k = 0; k < ROW_KINDS; k++) shape_row_eq(s, a->rows[k], b->rows[k], why);
}
void shape_le(ShapeSolver *s, const Shape *sub, const Shape *super, OriginId why) {
    for (int k = 0; k < ROW_KINDS; k++) shape_row_le(s, sub->rows[k], super->rows[k], why);
}

void shape_row_product(ShapeSolver *s, Row row, Dim cells, OriginId why) {
    Product p = {row, cells, why, false};
    ARENA_PUSH(s->arena, s->products, s->product_count, s->product_cap, p);
}

void shape_row_eq_front(ShapeSolver *s, Row row, Row front, OriginId why) {
    FrontEq f = {row, front, why, false};
    ARENA_PUSH(s->arena, s->fronts, s->front_count, s->front_cap, f);
}

uint32_t shape_queue_length(const ShapeSolver *s) { return s->queue_count - s->queue_head + s->row_eqs.count; }

/* Fisher-Yates over items[0, n), drawing from the mixer state *x. */
static void shuffle_constraints(Constraint *items, uint32_t n, uint64_t *x) {
    for (uint32_t i = n; i > 1; i--) {
        *x ^= *x >> 33;
        *x *= 0xff51afd7ed558ccdull;
        *x ^= *x >> 33;
        uint32_t j = (uint32_t)(*x % i);
        Constraint t = items[i - 1];
        items[i - 1] = items[j];
        items[j] = t;
    }
}

void shape_shuffle_queue(ShapeSolver *s, uint64_t seed) {
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    shuffle_constraints(s->row_eqs.items, s->row_eqs.count, &x);
    shuffle_constraints(s->queue + s->queue_head, s->queue_count - s->queue_head, &x);
}

void shape_add_leaf(ShapeSolver *s, const Shape *shape, LeafKind kind, const char *name,
                    OriginId decl) {
    Registered r = {.shape = *shape, .leaf = true, .kind = kind, .name = name, .decl = decl};
    ARENA_PUSH(s->arena, s->shapes, s->shape_count, s->shape_cap, r);
}

void shape_add_interior(ShapeSolver *s, const Shape *shape) {
    Registered r = {.shape = *shape, .kind = LEAF_CONSTANT};
    ARENA_PUSH(s->arena, s->shapes, s->shape_count, s->shape_cap, r);
}

/* ---- Dimensions ---------------------------------------------------------------------------- */

static bool dims_equal(Dim a, Dim b) {
    return a.var ? a.var == b.var : (b.var == 0 && a.size == b.size && a.basis == b.basis && a.runtime == b.runtime);
}

/* Ground equality is identity of size and basis (seed 000): the claim-free unit 1_∅ is not
 * 1_default nor 1_mono.  (Letting 1_∅ equal any unit would make a variable keep whichever unit
 * reached it first, so results would depend on constraint order.) */
static bool ground_eq(Dim a, Dim b) { return a.size == b.size && a.basis == b.basis && a.runtime == b.runtime; }

static bool ground_le(Dim sub, Dim super) { return dim_is_unit(sub) || ground_eq(sub, super); }

static void now_claimful(ShapeSolver *s, Dim d);

/* Bind variable v to value; everything v kept goes back on the queue against the value. */
static void solve_dim_var(ShapeSolver *s, uint32_t v, Dim value, OriginId why) {
    DimVarInfo *info = &s->dvars[v];
    if (value.var == v) return;
    info->solved = true;
    info->value = value;
    info->bound = (Binding){.dim = value, .why = why, .closed = s->choosing};
    if (value.var && info->unit_below && !s->dvars[value.var].unit_below)
        s->dvars[value.var].unit_below = info->unit_below;
    if (value.var && info->runtime && !s->dvars[value.var].runtime) {
        bool was = dim_var_claimful(&s->dvars[value.var]);
        s->dvars[value.var].runtime = info->runtime;
        if (!was) now_claimful(s, value);
    }
    if (info->has_lub) shape_dim_le(s, value, info->lub, info->lub_why);
    if (info->at_least > 1) shape_dim_at_least(s, value, info->at_least, info->at_least_why);
    ConstraintList edges = info->edges;
    info->edges = (ConstraintList){0};
    for (uint32_t i = 0; i < edges.count; i++) enqueue(s, edges.items[i]);
}

/* Ground a and b differ and must be one size: when one is a run-time size and the other is not
 * the claim-free unit, the run-time size's class becomes the other (a compile-time size, or
 * another class: both are then one).  Returns whether it did. */
static void dim_at_least(ShapeSolver *s, Dim d, uint32_t n, OriginId why);

static bool bind_runtime(ShapeSolver *s, Dim a, Dim b) {
    if (!a.runtime || dim_is_unit(b)) {
        if (!b.runtime || dim_is_unit(a)) return false;
        Dim t = a;
        a = b;
        b = t;
    }
    RuntimeClass *c = &s->runtimes[a.runtime];
    c->bound = true;
    c->value = b;
    if (c->min > 1) dim_at_least(s, b, c->min, c->min_why);
    return true;
}

static void dim_eq(ShapeSolver *s, Dim a, Dim b, OriginId why) {
    a = shape_resolve_dim(s, a);
    b = shape_resolve_dim(s, b);
    if (a.var && b.var) {
        if (a.var != b.var) solve_dim_var(s, a.var, b, why);
    } else if (a.var) {
        solve_dim_var(s, a.var, b, why);
    } else if (b.var) {
        solve_dim_var(s, b.var, a, why);
    } else if (!ground_eq(a, b) && !bind_runtime(s, a, b)) {
        report_dim_clash(s, true, a, b, why);
    }
}

/* A new least upper bound `bound` for unsolved variable v (bound is a non-unit atom). */
static void dim_upper_bound(ShapeSolver *s, uint32_t v, Dim bound, OriginId why) {
    DimVarInfo *info = &s->dvars[v];
    if (dim_var_claimful(info)) { /* v cannot be the unit, so it must be the bound itself */
        shape_dim_eq(s, (Dim){.var = v, .origin = bound.origin}, bound, why);
        return;
    }
    if (info->has_lub) {
        if (dims_equal(info->lub, bound)) return;
        /* Two distinct atoms meet at the claim-free unit: the bound collapses. */
        solve_dim_var(s, v, dim_unit(why), why);
        return;
    }
    info->has_lub = true;
    info->lub = bound;
    info->lub_why = why;
    /* Everything below v is below the bound too. */
    for (uint32_t i = 0; i < info->edges.count; i++) {
        Constraint e = info->edges.items[i];
        if (shape_resolve_dim(s, e.d2).var == v) shape_dim_le(s, e.d1, bound, why);
    }
}

static void dim_le(ShapeSolver *s, Dim sub, Dim super, OriginId why) {
    sub = shape_resolve_dim(s, sub);
    super = shape_resolve_dim(s, super);
    if (dim_is_unit(sub)) { /* the bottom is below everything */
        /* Remembered: if nothing else sizes `super`, this unit is what bounds it (seed 000: a
         * constant's claim-free unit bounds a parameter scaled by it), not closing's fallback. */
        if (super.var && !s->dvars[super.var].unit_below) s->dvars[super.var].unit_below = sub.origin ? sub.origin : why;
        return;
    }
    if (sub.var == 0 && super.var == 0) {
        if (!ground_le(sub, super) && !bind_runtime(s, sub, super)) report_dim_clash(s, false, sub, super, why);
        return;
    }
    if (sub.var == 0) { /* a lower bound at an atom solves */
        solve_dim_var(s, super.var, sub, why);
        return;
    }
    if (super.var == 0) {
        if (dim_is_unit(super)) solve_dim_var(s, sub.var, super, why);
        else dim_upper_bound(s, sub.var, super, why);
        return;
    }
    if (sub.var == super.var) return;
    Constraint c = {.kind = C_DIM_LE, .d1 = sub, .d2 = super, .why = why};
    list_push(s, &s->dvars[sub.var].edges, c);
    list_push(s, &s->dvars[super.var].edges, c);
    if (s->dvars[super.var].has_lub) shape_dim_le(s, sub, s->dvars[super.var].lub, why);
    if (dim_var_claimful(&s->dvars[sub.var])) shape_dim_eq(s, sub, super, why);
}

static void dim_at_least(ShapeSolver *s, Dim d, uint32_t n, OriginId why) {
    d = shape_resolve_dim(s, d);
    if (d.runtime) { /* checked when the program runs */
        if (n > s->runtimes[d.runtime].min) s->runtimes[d.runtime].min = n, s->runtimes[d.runtime].min_why = why;
        return;
    }
    if (d.var == 0) {
        if (d.size < n) {
            error_at(s, why, d.origin, why, "index %u is out of range for an axis of size %u", n - 1, d.size);
            note_origin(s, d.origin, "size %u comes from", d.size);
        }
        return;
    }
    DimVarInfo *info = &s->dvars[d.var];
    if (n <= info->at_least) return;
    bool was = dim_var_claimful(info);
    info->at_least = n;
    info->at_least_why = why;
    if (n > 1 && !was) now_claimful(s, d);
}

/* Variable d has just become claimful: its upper bound, or every variable above it, is its
 * value. */
static void now_claimful(ShapeSolver *s, Dim d) {
    DimVarInfo *info = &s->dvars[d.var];
    if (info->has_lub) {
        shape_dim_eq(s, d, info->lub, info->lub_why);
        return;
    }
    for (uint32_t i = 0; i < info->edges.count; i++) {
        Constraint e = info->edges.items[i];
        if (shape_resolve_dim(s, e.d1).var == d.var) shape_dim_eq(s, e.d1, e.d2, e.why);
    }
}

/* ---- Rows ---------------------------------------------------------------------------------- */

static void report_rank(ShapeSolver *s, Row small, Row big, uint32_t need, OriginId why,
                        bool equality) {
    const char *ss = shape_row_to_string(s, small), *bs = shape_row_to_string(s, big);
    if (equality)
        error_at(s, why, small.origin, big.origin, "rank mismatch: %s (%s) cannot equal %s (%s)", ss, axes_count(s, small), bs,
                 axes_count(s, big));
    else
        error_at(s, why, small.origin, big.origin, "rank mismatch: %s (%s) cannot broadcast to %s, which is closed with %s", ss,
                 axes_count(s, small), bs, axes_count(s, big));
    (void)need;
    note_origin(s, small.origin, "axes %s come from", ss);
    note_origin(s, big.origin, "axes %s come from", bs);
}

static void report_cycle(ShapeSolver *s, Row a, Row b, OriginId why) {
    const char *as = shape_row_to_string(s, a), *bs = shape_row_to_string(s, b);
    error_at(s, why, a.origin, b.origin,
             "row-rank cycle: axes %s would have to contain axes %s, which contain themselves "
             "plus more axes",
             as, bs);
    note_origin(s, a.origin, "axes %s come from", as);
    note_origin(s, b.origin, "axes %s come from", bs);
    s->origins[why].cycled = true;
}

/* &r.dims[i], or NULL for a row without dims (pointer arithmetic on NULL is undefined). */
static Dim *dims_at(Row r, uint32_t i) { return r.dims ? r.dims + i : NULL; }

/* The closed piece r[from, to) of a closed row, keeping r's marker where it falls inside the
 * piece (clamped to its ends): equal rows have equal markers, whichever side was solved. */
static Row sub_row(ShapeSolver *s, Row r, uint32_t from, uint32_t to, OriginId origin) {
    Row piece = shape_closed_row(s, dims_at(r, from), to - from, origin);
    uint32_t lead = r.lead < from ? 0 : r.lead - from;
    piece.lead = lead > to - from ? to - from : lead;
    return piece;
}

static void solve_row_var(ShapeSolver *s, uint32_t v, Row value, OriginId why) {
    RowVarInfo *info = &s->rvars[v];
    if (value.var == v && value.count == 0) return;
    if (info->contracted && value.var && !s->rvars[value.var].grown) s->rvars[value.var].contracted = true;
    /* The variable that takes over v's unknown stretch descends from v: it inherits v's growth. */
    if (value.var && s->rvars[value.var].depth < info->depth) s->rvars[value.var].depth = info->depth;
    info->solved = true;
    info->value = value;
    info->bound = (Binding){.row = value, .why = why, .closed = s->choosing};
    ConstraintList upper = info->upper, edges = info->edges, deferred = info->deferred;
    info->upper = info->edges = info->deferred = (ConstraintList){0};
    for (uint32_t i = 0; i < upper.count; i++) enqueue(s, upper.items[i]);
    for (uint32_t i = 0; i < edges.count; i++) enqueue(s, edges.items[i]);
    for (uint32_t i = 0; i < deferred.count; i++) enqueue(s, deferred.items[i]);
}

static bool row_mentions(Row r, uint32_t var) { return var && r.var == var; }

static void row_eq(ShapeSolver *s, Row a, Row b, OriginId why, bool may_merge) {
    a = shape_resolve_row(s, a);
    b = shape_resolve_row(s, b);
    if (!a.var && b.var) {
        Row t = a;
        a = b;
        b = t;
    }
    if (!a.var) { /* both closed: flat sequences of the same length */
        if (a.count != b.count) {
            report_rank(s, a.count < b.count ? a : b, a.count < b.count ? b : a, 0, why, true);
            return;
        }
        for (uint32_t i = 0; i < a.count; i++) dim_eq(s, a.dims[i], b.dims[i], why);
        return;
    }
    uint32_t al = a.lead, at = a.count - a.lead;
    if (!b.var) { /* a open, b closed: the flanks take b's ends, the variable the interior */
        if (b.count < a.count) {
            report_rank(s, b, a, a.count, why, true);
            return;
        }
        for (uint32_t i = 0; i < al; i++) dim_eq(s, a.dims[i], b.dims[i], why);
        for (uint32_t i = 0; i < at; i++) dim_eq(s, a.dims[a.count - 1 - i], b.dims[b.count - 1 - i], why);
        /* The residue belongs to the open row; say so in messages about it. */
        solve_row_var(s, a.var, sub_row(s, b, al, b.count - at, b.count - at > al ? b.origin : a.origin), why);
        return;
    }
    uint32_t bl = b.lead, bt = b.count - b.lead;
    uint32_t ml = al < bl ? al : bl, mt = at < bt ? at : bt;
    for (uint32_t i = 0; i < ml; i++) dim_eq(s, a.dims[i], b.dims[i], why);
    for (uint32_t i = 0; i < mt; i++) dim_eq(s, a.dims[a.count - 1 - i], b.dims[b.count - 1 - i], why);
    if (a.var == b.var) {
        if (al + at != bl + bt) {
            report_cycle(s, al + at < bl + bt ? a : b, al + at < bl + bt ? b : a, why);
        } else if (al != bl) {
            /* [3]·<ρ> = <ρ>·[3]: the same number of axes on both sides, so no cycle; it holds
             * for ρ = [] when the flanks read flat agree.  It cannot solve ρ, so it waits for
             * ρ's value and is checked against it, like <ρ> ⊑ [3]·<ρ> (row_le). */
            Constraint c = {.kind = C_ROW_EQ, .r1 = a, .r2 = b, .why = why};
            list_push(s, &s->rvars[a.var].deferred, c);
        }
        return;
    }
    /* The longer flank on each side is absorbed by the other side's variable; both variables
     * then share one fresh residue. */
    Dim *a_extra_lead = dims_at(a, ml), *b_extra_lead = dims_at(b, ml);
    uint32_t a_xl = al - ml, b_xl = bl - ml, a_xt = at - mt, b_xt = bt - mt;
    Dim *a_extra_trail = dims_at(a, al), *b_extra_trail = dims_at(b, bl);
    if (!a_xl && !b_xl && !a_xt && !b_xt) {
        solve_row_var(s, a.var, (Row){.var = b.var, .origin = b.origin}, why);
        return;
    }
    if (((a_xl && b_xt) || (b_xl && a_xt)) && !may_merge) {
        /* Crossed flanks, [x]·<ρ> = <σ>·[y]: merging takes x and y for different axes (σ =
         * [x]·<r>, ρ = <r>·[y]), which is wrong if σ turns out empty (then x = y and ρ = []).
         * So the merge waits for a fixpoint, like growth (row_le): an equality that empties
         * one side has been applied by then, in every order. */
        list_push(s, &s->growth, (Constraint){.kind = C_ROW_EQ, .r1 = a, .r2 = b, .why = why});
        return;
    }
    uint32_t residue = fresh_row_var(s);
    solve_row_var(s, a.var, shape_row(s, b_extra_lead, b_xl, residue, b_extra_trail, b_xt, b.origin), why);
    solve_row_var(s, b.var, shape_row(s, a_extra_lead, a_xl, residue, a_extra_trail, a_xt, a.origin), why);
}

/* v ⊑ bound, where v is an unsolved row variable and bound is not the bare variable v. */
static void row_upper_bound(ShapeSolver *s, uint32_t v, Row bound, Row sub_for_errors, OriginId why) {
    if (row_mentions(bound, v)) {
        report_cycle(s, sub_for_errors, bound, why);
        return;
    }
    Constraint c = {.kind = C_ROW_LE, .r1 = {.var = v, .origin = sub_for_errors.origin},
                    .r2 = bound, .why = why};
    if (bound.var && bound.count == 0) { /* variable against variable */
        /* Once is enough.  The partner's list keeps an edge after this variable is solved, and
         * re-deriving it must not add a copy each time: in a cycle of inequalities the copies
         * double on every turn, and growth would never reach MAX_ROW_RANK. */
        const ConstraintList *mine = &s->rvars[v].edges;
        for (uint32_t i = 0; i < mine->count; i++)
            if (mine->items[i].r1.var == v && mine->items[i].r1.count == 0 &&
                mine->items[i].r2.var == bound.var && mine->items[i].r2.count == 0)
                return;
        list_push(s, &s->rvars[v].edges, c);
        list_push(s, &s->rvars[bound.var].edges, c);
        return;
    }
    list_push(s, &s->rvars[v].upper, c);
}

static void row_le(ShapeSolver *s, Row sub, Row super, OriginId why, bool may_grow) {
    Row sub_written = sub, super_written = super;
    sub = shape_resolve_row(s, sub);
    super = shape_resolve_row(s, super);
    uint32_t sl = sub.lead, st = sub.count - sl;
    if (!super.var) {
        /* A closed super-row is a flat sequence: the sub-row's flanks take its two ends and
         * what is left in the middle is the interior residue. */
        if (super.count < sub.count) {
            report_rank(s, sub, super, sub.count, why, false);
            return;
        }
        for (uint32_t i = 0; i < sl; i++) dim_le(s, sub.dims[i], super.dims[i], why);
        for (uint32_t i = 0; i < st; i++)
            dim_le(s, sub.dims[sub.count - 1 - i], super.dims[super.count - 1 - i], why);
        if (sub.var)
            row_upper_bound(s, sub.var, sub_row(s, super, sl, super.count - st, super.origin), sub, why);
        return;
    }
    uint32_t pl = super.lead, pt = super.count - super.lead;
    if (sl > pl || st > pt) {
        if (sub.var == super.var) {
            /* [3]·<ρ> ⊑ <ρ>·[3] holds for ρ = [] when the super row has as many axes; only a
             * longer sub row is a cycle.  Otherwise it waits for ρ's value (see below). */
            if (sub.count > super.count) report_cycle(s, super, sub, why);
            else list_push(s, &s->rvars[sub.var].deferred,
                           (Constraint){.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why});
            return;
        }
        if (sub.count <= super.count) {
            /* Enough axes, but a flank of the sub row is longer than the super row's on that
             * side: it reaches across the super row's variable into the other flank (a
             * crossing), and which axes it meets there depends on how many axes that variable
             * gets.  The axes at the outer edges are matched whatever it gets; the rest waits
             * for its value, which closing makes the least that lets the axes agree
             * (close_crossings; seed 004's stage 6 empties such a sandwiched variable). */
            uint32_t ml = sl < pl ? sl : pl, mt = st < pt ? st : pt;
            for (uint32_t i = 0; i < ml; i++) dim_le(s, sub.dims[i], super.dims[i], why);
            for (uint32_t i = 0; i < mt; i++)
                dim_le(s, sub.dims[sub.count - 1 - i], super.dims[super.count - 1 - i], why);
            list_push(s, &s->crossings, (Constraint){.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why});
            return;
        }
        /* The super row has too few axes: grow its variable by a template of fresh dims
         * around a fresh residue, then look again. */
        if (!may_grow) {
            /* Growing is a choice of where the new axes go (at the flanks, around a fresh
             * residue); an equality may still say otherwise (a closed row read flat).  So
             * growth waits until the queue is empty, when every equality the constraints
             * hold has been applied, and the choice is the same in every order. */
            Constraint c = {.kind = C_ROW_LE, .r1 = sub_written, .r2 = super_written, .why = why};
            list_push(s, &s->growth, c);
            return;
        }
        /* By as many axes as the super row lacks, and no more (seed 000: "enough additional
         * axes to bring super up to the required rank"; seed 004's template): every solution
         * has at least these.  A flank still longer than the super row's afterwards reaches
         * across the residue (a crossing, above).  The new axes go to the short flanks, the
         * trailing one first: when only one flank is short, all go there; when both are, each
         * gets what it lacks. */
        uint32_t grow = sub.count - super.count, xt = st > pt ? st - pt : 0;
        if (xt > grow) xt = grow;
        uint32_t xl = grow - xt;
        /* In a cycle through several variables it is the residues that keep growing, while
         * the rows compared at each turn ([f]·<ρ'> ⊑ <σ'>) stay short; so count the growth
         * along the chain of residues too.  Every model gives a variable at least the axes
         * its chain of templates grew (the flanks are anchored), and a satisfiable set never
         * forces more axes onto one variable than its row constraints mention (row_dims, a
         * longest path of the flank lengths): past that, it is a cycle. */
        uint32_t depth = s->rvars[super.var].depth + xl + xt;
        if (super.count + xl + xt > MAX_ROW_RANK || depth > s->row_dims) {
            /* Rows only grow this far when growing one makes another too short in turn: a
             * cycle through several row variables. */
            if (super.count + xl + xt > MAX_ROW_RANK)
                error_at(s, why, sub.origin, super.origin, "row-rank cycle: growing %s to fit %s makes it grow again (past %u axes)",
                         shape_row_to_string(s, super), shape_row_to_string(s, sub), MAX_ROW_RANK);
            else
                error_at(s, why, sub.origin, super.origin, "row-rank cycle: growing %s to fit %s makes it grow again (past the "
                         "%llu ax%s all the constraints mention)", shape_row_to_string(s, super),
                         shape_row_to_string(s, sub), (unsigned long long)s->row_dims,
                         s->row_dims == 1 ? "is" : "es");
            note_origin(s, sub.origin, "axes %s come from", shape_row_to_string(s, sub));
            note_origin(s, super.origin, "axes %s come from", shape_row_to_string(s, super));
            s->origins[why].cycled = true;
            return;
        }
        Dim *fresh = arena_alloc(s->arena, (xl + xt) * sizeof *fresh);
        for (uint32_t i = 0; i < xl + xt; i++) fresh[i] = shape_fresh_dim(s, super.origin);
        uint32_t residue = fresh_row_var(s);
        s->rvars[residue].grown = true;
        s->rvars[residue].depth = depth;
        solve_row_var(s, super.var, shape_row(s, fresh, xl, residue, fresh + xl, xt, super.origin), why);
        /* Look again: the same constraint, so not counted in row_dims. */
        enqueue(s, (Constraint){.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why, .may_grow = true});
        return;
    }
    for (uint32_t i = 0; i < sl; i++) dim_le(s, sub.dims[i], super.dims[i], why);
    for (uint32_t i = 0; i < st; i++)
        dim_le(s, sub.dims[sub.count - 1 - i], super.dims[super.count - 1 - i], why);
    if (!sub.var) return; /* the inserted units are below anything */
    if (sub.var == super.var) {
        /* <ρ> ⊑ X·<ρ>·Y with X or Y non-empty is no row-rank cycle: the super row is the longer
         * one, and it holds for ρ = [] (the sub row broadcasts into it).  It cannot bound ρ (a
         * bound containing ρ), so it waits for ρ's value and is checked against it. */
        if (sl != pl || st != pt) {
            Constraint c = {.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why};
            list_push(s, &s->rvars[sub.var].deferred, c);
        }
        return;
    }
    /* The interior of the super-row (its flanks past the sub-row's, and its variable) is the
     * upper bound of the sub-row's variable. */
    Row interior = shape_row(s, dims_at(super, sl), pl - sl, super.var, dims_at(super, pl), pt - st,
                             super.origin);
    row_upper_bound(s, sub.var, interior, sub, why);
}

/* ---- The fixpoint -------------------------------------------------------------------------- */

static void process(ShapeSolver *s, Constraint c) {
    s->choosing = c.closing;
    switch (c.kind) {
    case C_DIM_EQ: dim_eq(s, c.d1, c.d2, c.why); break;
    case C_DIM_LE: dim_le(s, c.d1, c.d2, c.why); break;
    case C_DIM_AT_LEAST: dim_at_least(s, c.d1, c.at_least, c.why); break;
    case C_ROW_EQ:
    case C_ROW_LE:
        if (c.contracting) {
            Row a = shape_resolve_row(s, c.r1), b = shape_resolve_row(s, c.r2);
            if (a.var) s->rvars[a.var].contracted = true;
            if (b.var) s->rvars[b.var].contracted = true;
        }
        if (c.kind == C_ROW_EQ) row_eq(s, c.r1, c.r2, c.why, c.may_grow);
        else row_le(s, c.r1, c.r2, c.why, c.may_grow);
        break;
    }
}

/* Take the pending row equalities: first every one whose two sides are still open, then the
 * rest in order.  Open rows merge their flanks around a shared residue, so once they have met,
 * the row of a class of equal variables holds every flank any of them was written with; a
 * closed row (written ones all have their marker in front) then fills the residue and keeps
 * those flanks' marker.  Taken in arrival order instead, a variable equated with a closed row
 * first would keep that row's marker, and an open row arriving later could not move it, so the
 * marker (where the row broadcasts) would depend on the order.  Row inequalities come after,
 * so none of them reads a marker that a pending equality would still set. */
static void take_row_equalities(ShapeSolver *s) {
    ConstraintList pending = s->row_eqs, closed = {0};
    s->row_eqs = (ConstraintList){0};
    for (uint32_t i = 0; i < pending.count; i++) {
        Row a = shape_resolve_row(s, pending.items[i].r1), b = shape_resolve_row(s, pending.items[i].r2);
        if (a.var && b.var) process(s, pending.items[i]);
        else list_push(s, &closed, pending.items[i]);
    }
    for (uint32_t i = 0; i < closed.count; i++) process(s, closed.items[i]);
}

/* A crossing (row_le) as its terms read now; true while it still waits, that is while neither
 * its super row's variable nor its sub row's has been solved since it was set aside. */
static bool crossing_waits(ShapeSolver *s, const Constraint *c, Row *sub, Row *super) {
    *sub = shape_resolve_row(s, c->r1);
    *super = shape_resolve_row(s, c->r2);
    return super->var == c->r2.var && sub->var == c->r1.var;
}

/* Queue again the crossings whose variables have been solved; true if there were any. */
static bool recheck_crossings(ShapeSolver *s) {
    uint32_t kept = 0, count = s->crossings.count;
    for (uint32_t i = 0; i < count; i++) {
        Constraint c = s->crossings.items[i];
        Row sub, super;
        if (crossing_waits(s, &c, &sub, &super)) s->crossings.items[kept++] = c;
        else enqueue(s, c);
    }
    s->crossings.count = kept;
    return kept != count;
}

bool shape_solve(ShapeSolver *s) {
    unsigned before = s->errors;
    s->inside++;
    for (;;) {
        if (s->row_eqs.count) {
            take_row_equalities(s);
            continue;
        }
        if (s->queue_head == s->queue_count) {
            /* A fixpoint: the crossings whose variables have values are looked at again; then
             * the rows that were too short may grow (row_le), and open rows with crossed flanks
             * may merge (row_eq). */
            if (recheck_crossings(s)) continue;
            if (!s->growth.count) break;
            ConstraintList pending = s->growth;
            s->growth = (ConstraintList){0};
            for (uint32_t i = 0; i < pending.count; i++) {
                pending.items[i].may_grow = true;
                enqueue(s, pending.items[i]);
            }
            continue; /* the equalities among them are taken first */
        }
        process(s, s->queue[s->queue_head++]);
    }
    s->queue_head = s->queue_count = 0;
    s->inside--;
    return s->errors == before;
}

/* ---- Closing ------------------------------------------------------------------------------- */

typedef struct Commit {
    bool row;
    uint32_t var;
    Dim dim;
    Row value;
} Commit;

typedef struct CommitList {
    Commit *items;
    uint32_t count, cap;
} CommitList;

static bool rows_equal(Row a, Row b) {
    if (a.var != b.var || a.count != b.count || (a.var && a.lead != b.lead)) return false;
    for (uint32_t i = 0; i < a.count; i++)
        if (!dims_equal(a.dims[i], b.dims[i])) return false;
    return true;
}

/* ---- Crossings ------------------------------------------------------------------------------
 *
 * A row inequality whose sub row reaches across the super row's variable v waits for v's value
 * (row_le: a crossing): with k axes in v, the sub row's longer flank meets those k axes and then
 * the super row's other flank.  Closing gives v its least value (close_crossings), the empty row
 * when the axes that brings together can agree, otherwise the fewest axes for which they can,
 * and at most as many as keep every such flank off the other one (what growing each flank by
 * what it lacks would give).  "Can agree" is judged on what is known, by a trial of the pairs of
 * axes by the dim rules of §3.1 (trial_holds): an axis that is a variable, or one of v's new
 * axes, is a probe that learns the atom an atom below it makes it, the atoms it lies below
 * (two different ones meet at 1_∅) and its at-least size, and two of those that disagree mean
 * no.  Like growth, this is a choice of how many axes a variable gets; it is made at the
 * fixpoints of closing, before the leaves commit, so that they see where the axes went. */

/* The key of the j-th new axis of the variable on trial (dim variables are numbered from 1). */
static uint32_t new_axis(uint32_t j) { return UINT32_MAX - j; }

/* The probe for `key` (dim variable d's, or a new axis when d is no variable), made once. */
static uint32_t probe_of(ShapeSolver *s, uint32_t key, Dim d) {
    Trial *t = &s->trial;
    for (uint32_t i = 0; i < t->count; i++)
        if (t->probes[i].key == key) return i + 1;
    Probe p = {.key = key};
    if (d.var) {
        const DimVarInfo *info = &s->dvars[d.var];
        p.has_hi = info->has_lub;
        p.hi = info->lub;
        p.at_least = info->at_least;
    }
    ARENA_PUSH(s->arena, t->probes, t->count, t->cap, p);
    return t->count;
}

/* A probe's facts agree: its atom from below fits its bound from above and its at-least size. */
static bool probe_ok(const Probe *p) {
    if (p->has_lo && ((p->has_hi && !dims_equal(p->lo, p->hi)) || p->lo.size < p->at_least)) return false;
    return !(p->has_hi && p->at_least > 1 && (dim_is_unit(p->hi) || p->hi.size < p->at_least));
}

/* Probe p learns an atom below it, or an atom above it (*changed when that is news); false when
 * its facts no longer agree. */
static bool probe_lo(Probe *p, Dim atom, bool *changed) {
    if (dim_is_unit(atom) || (p->has_lo && dims_equal(p->lo, atom))) return true;
    if (p->has_lo) return false; /* two different atoms below one axis */
    p->has_lo = *changed = true;
    p->lo = atom;
    return probe_ok(p);
}

static bool probe_hi(Probe *p, Dim atom, bool *changed) {
    if (p->has_hi && (dims_equal(p->hi, atom) || dim_is_unit(p->hi))) return true;
    p->hi = p->has_hi ? dim_unit(0) : atom;
    p->has_hi = *changed = true;
    return probe_ok(p);
}

/* Axis d of a row, or the new axis `fresh` (a new_axis key; 0 for none), as a side of a pair:
 * its probe's index + 1, or 0 with the ground dim in *ground. */
static uint32_t trial_side(ShapeSolver *s, Dim d, uint32_t fresh, Dim *ground) {
    if (fresh) return probe_of(s, fresh, (Dim){0});
    *ground = shape_resolve_dim(s, d);
    return ground->var ? probe_of(s, ground->var, *ground) : 0;
}

/* The pair "axis d lies below axis e", either of them possibly a new axis (see trial_side). */
static void trial_pair(ShapeSolver *s, Dim d, uint32_t d_fresh, Dim e, uint32_t e_fresh) {
    TrialPair pair = {0};
    pair.sub = trial_side(s, d, d_fresh, &pair.sub_dim);
    pair.super = trial_side(s, e, e_fresh, &pair.super_dim);
    ARENA_PUSH(s->arena, s->trial.pairs, s->trial.pair_count, s->trial.pair_cap, pair);
}

/* Whether the pairs of the trial can all hold: what each probe learns is propagated to a
 * fixpoint, and the first disagreement answers no. */
static bool trial_holds(Trial *t) {
    for (uint32_t i = 0; i < t->count; i++)
        if (!probe_ok(&t->probes[i])) return false;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < t->pair_count; i++) {
            const TrialPair *pr = &t->pairs[i];
            Probe *sub = pr->sub ? &t->probes[pr->sub - 1] : NULL, *super = pr->super ? &t->probes[pr->super - 1] : NULL;
            bool ok = true;
            if (!sub && !super) ok = ground_le(pr->sub_dim, pr->super_dim);
            else if (!sub) ok = probe_lo(super, pr->sub_dim, &changed);
            else if (!super) ok = probe_hi(sub, pr->super_dim, &changed);
            else {
                if (sub->has_lo) ok = probe_lo(super, sub->lo, &changed);
                if (ok && super->has_hi) ok = probe_hi(sub, super->hi, &changed);
                /* An axis that cannot be the unit (an at-least size above 1) below another is
                 * that axis (§3.1). */
                if (ok && sub->at_least > 1 && super->has_lo) ok = probe_lo(sub, super->lo, &changed);
            }
            if (!ok) return false;
        }
    }
    return true;
}

/* The crossings refs[0..n) all wait for variable v.  With k axes in v, can the pairs of axes
 * they bring together hold, and v's axes lie below v's upper bounds? */
static bool crossings_fit(ShapeSolver *s, const CrossRef *refs, uint32_t n, uint32_t v, uint32_t k) {
    s->trial.count = s->trial.pair_count = 0;
    for (uint32_t c = 0; c < n; c++) {
        Row sub, super;
        crossing_waits(s, &s->crossings.items[refs[c].index], &sub, &super);
        uint32_t flat = super.count + k, pl = super.lead;
        for (uint32_t i = 0; i < sub.count; i++) {
            uint32_t p = i < sub.lead ? i : flat - (sub.count - i); /* its place in the super row read flat */
            if (p >= pl && p < pl + k) trial_pair(s, sub.dims[i], 0, (Dim){0}, new_axis(p - pl));
            else trial_pair(s, sub.dims[i], 0, super.dims[p < pl ? p : p - k], 0);
        }
    }
    /* v's value, its k axes as a trailing flank, below each of its upper bounds (row_le). */
    const ConstraintList *upper = &s->rvars[v].upper;
    for (uint32_t u = 0; u < upper->count; u++) {
        Row b = shape_resolve_row(s, upper->items[u].r2);
        if (!b.var && b.count < k) return false;
        uint32_t bt = b.var ? b.count - b.lead : b.count;
        for (uint32_t q = 1; q <= k && q <= bt; q++) trial_pair(s, (Dim){0}, new_axis(k - q), b.dims[b.count - q], 0);
    }
    return trial_holds(&s->trial);
}

/* The fewest axes for v that let the crossings refs[0..n) waiting for it agree. */
static uint32_t least_axes(ShapeSolver *s, const CrossRef *refs, uint32_t n, uint32_t v) {
    uint32_t apart = 0;
    for (uint32_t c = 0; c < n; c++) {
        Row sub, super;
        crossing_waits(s, &s->crossings.items[refs[c].index], &sub, &super);
        uint32_t sl = sub.lead, st = sub.count - sl, pl = super.lead, pt = super.count - pl;
        uint32_t need = (sl > pl ? sl - pl : 0) + (st > pt ? st - pt : 0);
        if (need > apart) apart = need;
    }
    uint32_t k = 0;
    while (k < apart && !crossings_fit(s, refs, n, v, k)) k++;
    return k;
}

static int cross_ref_order(const void *a, const void *b) {
    const CrossRef *x = a, *y = b;
    if (x->var != y->var) return x->var < y->var ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* s->cross_refs: the crossings that still wait, by the variable they wait for; those variables
 * are marked for this call (waited_for). */
static void sort_crossings(ShapeSolver *s) {
    s->cross_stamp++;
    s->cross_ref_count = 0;
    for (uint32_t i = 0; i < s->crossings.count; i++) {
        Row sub, super;
        if (!crossing_waits(s, &s->crossings.items[i], &sub, &super)) continue;
        s->rvars[super.var].waited_for = s->cross_stamp;
        CrossRef r = {.var = super.var, .index = i};
        ARENA_PUSH(s->arena, s->cross_refs, s->cross_ref_count, s->cross_ref_cap, r);
    }
    qsort(s->cross_refs, s->cross_ref_count, sizeof *s->cross_refs, cross_ref_order);
}

/* Whether no crossing of refs[0..n) has a sub row with a variable that crossings wait for: the
 * variable they wait for is then chosen on every axis its crossings will bring. */
static bool crossings_ready(ShapeSolver *s, const CrossRef *refs, uint32_t n) {
    for (uint32_t c = 0; c < n; c++) {
        Row sub, super;
        crossing_waits(s, &s->crossings.items[refs[c].index], &sub, &super);
        if (sub.var && s->rvars[sub.var].waited_for == s->cross_stamp) return false;
    }
    return true;
}

/* Give variables that crossings wait for their least values; true if any got one.  A variable
 * is chosen once its crossings are ready (all of them when none is: a cycle, then one variable).
 * The variables that need axes go first, since their choice is forced and tells the others
 * more; in one call, only variables whose trials pair none of the same axes, so that no choice
 * is made blind to another. */
static bool close_crossings(ShapeSolver *s) {
    if (!s->crossings.count) return false;
    sort_crossings(s);
    uint32_t chosen = 0, count = s->cross_ref_count;
    CrossRef *refs = s->cross_refs;
    for (int pass = 0; pass < 2 && !chosen; pass++) {
        bool forced = false;
        for (uint32_t g = 0, e; g < count; g = e) {
            for (e = g + 1; e < count && refs[e].var == refs[g].var;) e++;
            refs[g].axes = UINT32_MAX;
            if (pass == 1 || crossings_ready(s, refs + g, e - g)) refs[g].axes = least_axes(s, refs + g, e - g, refs[g].var);
            forced |= refs[g].axes != UINT32_MAX && refs[g].axes > 0;
        }
        for (uint32_t g = 0, e; g < count && !(pass == 1 && chosen); g = e) {
            for (e = g + 1; e < count && refs[e].var == refs[g].var;) e++;
            uint32_t v = refs[g].var, k = refs[g].axes;
            if (k == UINT32_MAX || (forced && k == 0)) continue;
            crossings_fit(s, refs + g, e - g, v, k); /* the probes of the chosen trial */
            bool blind = false;
            for (uint32_t i = 0; i < s->trial.count; i++) {
                uint32_t key = s->trial.probes[i].key;
                if (key < s->dvar_count && s->dvars[key].taken == s->cross_stamp) blind = true;
            }
            if (blind) continue;
            for (uint32_t i = 0; i < s->trial.count; i++) {
                uint32_t key = s->trial.probes[i].key;
                if (key < s->dvar_count) s->dvars[key].taken = s->cross_stamp;
            }
            Row super = shape_resolve_row(s, s->crossings.items[refs[g].index].r2);
            Dim *dims = arena_alloc(s->arena, (k ? k : 1) * sizeof *dims);
            for (uint32_t j = 0; j < k; j++) dims[j] = shape_fresh_dim(s, super.origin);
            s->choosing = true;
            solve_row_var(s, v, shape_closed_row(s, dims, k, super.origin), s->fallback);
            s->choosing = false;
            chosen++;
        }
    }
    return chosen > 0;
}

typedef struct RowList {
    Row *items;
    uint32_t count, cap;
    bool hole; /* some path upward ends at a variable nothing bounds */
} RowList;

static void add_distinct(ShapeSolver *s, RowList *l, Row r) {
    for (uint32_t i = 0; i < l->count; i++)
        if (rows_equal(l->items[i], r)) return;
    ARENA_PUSH(s->arena, l->items, l->count, l->cap, r);
}

static void merge_bounds(ShapeSolver *s, RowList *into, const RowList *from) {
    for (uint32_t i = 0; i < from->count; i++) add_distinct(s, into, from->items[i]);
    into->hole |= from->hole;
}

/* The bound sets of the variables above v through var-var edges, one strongly connected
 * component at a time (Tarjan): the variables of a cycle of edges (ρ1 ⊑ ρ2 ⊑ ρ1, as the
 * tensors of a routine that update each other make) all have the same bounds, so each component
 * is collected once, and every variable of it gets the same memo.  A variable visited in this
 * collection (s->stamp) and still on the stack is in the component being built: its bounds are
 * added when the component closes.  An edge into another component that nothing bounds is a
 * hole (seed 000: the bound has no information there), as is a hole above that component. */
static void visit_row_bounds(ShapeSolver *s, uint32_t v);

static void follow_row_edge(ShapeSolver *s, uint32_t v, uint32_t w) {
    RowVarInfo *above = &s->rvars[w];
    if (above->visit_stamp != s->stamp) {
        visit_row_bounds(s, w);
        above = &s->rvars[w];
        if (above->low < s->rvars[v].low) s->rvars[v].low = above->low;
    } else if (above->on_stack && above->order < s->rvars[v].low) {
        s->rvars[v].low = above->order;
    }
    if (above->on_stack) return; /* the same component: its bounds are v's */
    const RowList *bounds = above->memo;
    merge_bounds(s, s->rvars[v].own, bounds);
    if (bounds->count == 0) s->rvars[v].own->hole = true;
}

static void visit_row_bounds(ShapeSolver *s, uint32_t v) {
    RowVarInfo *info = &s->rvars[v];
    info->visit_stamp = s->stamp;
    info->order = info->low = s->visits++;
    info->on_stack = true;
    info->own = arena_alloc(s->arena, sizeof *info->own);
    *info->own = (RowList){0};
    ARENA_PUSH(s->arena, s->component_stack, s->component_count, s->component_cap, v);
    for (uint32_t i = 0; i < s->rvars[v].upper.count; i++) {
        Row b = shape_resolve_row(s, s->rvars[v].upper.items[i].r2);
        if (b.var && b.count == 0) {
            if (!s->rvars[b.var].solved) follow_row_edge(s, v, b.var);
            continue;
        }
        add_distinct(s, s->rvars[v].own, b);
    }
    for (uint32_t i = 0; i < s->rvars[v].edges.count; i++) {
        Constraint e = s->rvars[v].edges.items[i];
        Row sub = shape_resolve_row(s, e.r1), super = shape_resolve_row(s, e.r2);
        if (sub.var != v || sub.count) continue;
        if (super.var && super.count == 0) {
            if (!s->rvars[super.var].solved && super.var != v) follow_row_edge(s, v, super.var);
        } else {
            add_distinct(s, s->rvars[v].own, super);
        }
    }
    info = &s->rvars[v];
    if (info->low != info->order) return;
    /* v is the root of a component: the members are v and everything pushed after it. */
    uint32_t first = s->component_count;
    while (s->component_stack[first - 1] != v) first--;
    first--;
    RowList *bounds = info->own;
    for (uint32_t k = first + 1; k < s->component_count; k++) merge_bounds(s, bounds, s->rvars[s->component_stack[k]].own);
    for (uint32_t k = first; k < s->component_count; k++) s->rvars[s->component_stack[k]].memo_stamp = s->stamp;
    /* The members are equal in every solution (ρ1 ⊑ ρ2 ⊑ ρ1).  A bound that holds a member,
     * X·<ρ2> above ρ1, is ρ ⊑ X·<ρ>: it cannot be a value to commit to (it contains the
     * variable), and it holds for ρ = [], so it bounds nothing here; it stays a constraint of
     * the variable, checked against the value the component takes. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < bounds->count; i++) {
        uint32_t u = bounds->items[i].var;
        if (u && s->rvars[u].on_stack && s->rvars[u].memo_stamp == s->stamp) continue;
        bounds->items[kept++] = bounds->items[i];
    }
    bounds->count = kept;
    for (uint32_t k = first; k < s->component_count; k++) {
        RowVarInfo *member = &s->rvars[s->component_stack[k]];
        member->on_stack = false;
        member->memo = bounds;
    }
    s->component_count = first;
}

/* Collect into `out` the distinct upper-bound rows of v and of every variable above it through
 * var-var edges, and whether some path upward has a hole.  Linear in the edges over a whole
 * closing snapshot (s->stamp): each component is collected once. */
static void collect_row_bounds(ShapeSolver *s, uint32_t v, RowList *out) {
    if (s->rvars[v].memo_stamp != s->stamp) visit_row_bounds(s, v);
    merge_bounds(s, out, s->rvars[v].memo);
}

/* The meet of several upper bounds: as many axes as all of them surely have at their trailing
 * edge, each the meet of the bounds' axes there (equal axes stay, different ones meet at 1_∅). */
static Row meet_rows(ShapeSolver *s, Row *bounds, uint32_t n, OriginId origin) {
    uint32_t m = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = bounds[i].var ? bounds[i].count - bounds[i].lead : bounds[i].count;
        if (t < m) m = t;
    }
    Dim *dims = arena_alloc(s->arena, (m ? m : 1) * sizeof *dims);
    for (uint32_t j = 0; j < m; j++) {
        Dim d = bounds[0].dims[bounds[0].count - m + j];
        for (uint32_t i = 1; i < n; i++)
            if (!dims_equal(d, bounds[i].dims[bounds[i].count - m + j])) d = dim_unit(origin);
        dims[j] = d;
    }
    return shape_closed_row(s, dims, m, origin);
}

static const char *row_kind_name(int k) {
    return k == ROW_BATCH ? "batch" : k == ROW_INPUT ? "input" : "output";
}
static const char *row_kind_field(int k) { return k == ROW_BATCH ? "b" : k == ROW_INPUT ? "i" : "o"; }

static void report_param_hole(ShapeSolver *s, Registered *r, int kind, bool axis, bool partly) {
    if (r->reported & (1u << kind)) return;
    r->reported |= (uint8_t)(1u << kind);
    s->errors++;
    Span at = s->origins[r->decl].span;
    if (axis)
        diag_error(at, "cannot infer the size of an %s axis of parameter '%s': you forgot to specify "
                   "a hidden dimension", row_kind_name(kind), r->name);
    else
        diag_error(at, "cannot infer the %s axes of parameter '%s': you forgot to specify a hidden "
                   "dimension", row_kind_name(kind), r->name);
    if (partly)
        diag_note(at, "a use of '%s' leaves its %s axes open (it is not used where they are known)",
                  r->name, row_kind_name(kind));
    else
        diag_note(at, "nothing that uses '%s' determines its %s axes", r->name, row_kind_name(kind));
    const char *base = strrchr(r->name, '.');
    base = base ? base + 1 : r->name;
    size_t blen = strcspn(base, "#");
    diag_note(at, "pin them where the parameter is declared, e.g. { %.*s; %s = [ ... ] }", (int)blen,
              base, row_kind_field(kind));
}

static void report_param_unsized(ShapeSolver *s, Registered *r) {
    r->reported = (1u << ROW_KINDS) - 1;
    s->errors++;
    Span at = s->origins[r->decl].span;
    diag_error(at, "cannot infer the shape of parameter '%s': you forgot to specify the hidden dimension(s)", r->name);
    diag_note(at, "nothing gives '%s' an axis: no use of it meets a tensor whose shape is known", r->name);
    const char *base = strrchr(r->name, '.');
    base = base ? base + 1 : r->name;
    size_t blen = strcspn(base, "#");
    diag_note(at, "pin them where the parameter is declared, e.g. { %.*s; o = [ ... ] }", (int)blen, base);
}

/* Whether a path of edges upward from v reaches an unsolved variable that nothing bounds (no
 * LUB, no at-least size above 1).  That variable will take the least value, 1_∅, and so must
 * everything below it, however bounded it is on another path.  *need: the largest at-least
 * size of the variables reached (0 when none has one). */
static bool dim_hole_above(ShapeSolver *s, uint32_t v, uint32_t *need) {
    uint32_t count = 0;
    bool hole = false;
    *need = 0;
    s->search++;
    s->dvars[v].visited = s->search;
    ARENA_PUSH(s->arena, s->hole_stack, count, s->hole_stack_cap, v);
    while (count && !hole) {
        uint32_t w = s->hole_stack[--count];
        const DimVarInfo *info = &s->dvars[w];
        for (uint32_t i = 0; i < info->edges.count && !hole; i++) {
            Dim sub = shape_resolve_dim(s, info->edges.items[i].d1), super = shape_resolve_dim(s, info->edges.items[i].d2);
            if (sub.var != w || !super.var || s->dvars[super.var].visited == s->search) continue;
            s->dvars[super.var].visited = s->search;
            if (s->dvars[super.var].at_least > *need) *need = s->dvars[super.var].at_least;
            if (!s->dvars[super.var].has_lub && s->dvars[super.var].at_least <= 1) hole = true;
            else ARENA_PUSH(s->arena, s->hole_stack, count, s->hole_stack_cap, super.var);
            info = &s->dvars[w];
        }
    }
    return hole;
}

static Dim close_dim_up(ShapeSolver *s, uint32_t v, bool *hole) {
    DimVarInfo *info = &s->dvars[v];
    /* v ⊑ … ⊑ w for an unsolved w that nothing bounds: a hole in v's bound (as for rows), so v
     * takes the least value; committing v to its own bound would leave w below it. */
    uint32_t need;
    if (dim_hole_above(s, v, &need)) {
        *hole = true;
        return dim_unit(s->dvars[v].has_lub ? s->fallback_open : s->fallback);
    }
    /* An axis above must be larger than v's bound (an at-least size, from a fixed index): v at
     * its bound would force that axis to the bound's size, so v takes the least value, which
     * lies below both. */
    info = &s->dvars[v];
    if (info->has_lub && !info->lub.runtime && need > info->lub.size) return dim_unit(info->lub.origin);
    if (info->has_lub) return info->lub;
    if (info->at_least > 1) return dim_ground(info->at_least, BASIS_DEFAULT, info->at_least_why);
    if (info->unit_below) return dim_unit(info->unit_below);
    *hole = true;
    return dim_unit(s->fallback);
}

static void close_leaves(ShapeSolver *s) {
    CommitList commits = {0};
    s->stamp++;
    s->visits = 0;
    for (uint32_t i = 0; i < s->shape_count; i++) {
        Registered *reg = &s->shapes[i];
        if (!reg->leaf) continue;
        for (int k = 0; k < ROW_KINDS; k++) {
            Row r = shape_resolve_row(s, reg->shape.rows[k]);
            for (uint32_t j = 0; j < r.count; j++) {
                Dim d = r.dims[j];
                if (!d.var || s->dvars[d.var].committed) continue;
                s->dvars[d.var].committed = true;
                bool hole = false; /* a parameter's hole is reported after closing */
                Dim value = close_dim_up(s, d.var, &hole);
                Commit c = {.row = false, .var = d.var, .dim = value};
                ARENA_PUSH(s->arena, commits.items, commits.count, commits.cap, c);
            }
            if (!r.var) continue;
            /* A parameter's hole is its own error, whichever leaf sharing the variable came
             * first in registration order; the value is chosen once. */
            bool taken = s->rvars[r.var].committed;
            if (taken && reg->kind != LEAF_PARAMETER) continue;
            s->rvars[r.var].committed = true;
            RowList found = {0}; /* distinct bounds: the same row reached twice is one bound */
            collect_row_bounds(s, r.var, &found);
            /* A bound that mentions the variable itself (reached through var-var edges, or
             * solved since it was recorded: <ρ> ⊑ [3]·<ρ>) holds for ρ = [] but cannot be ρ's
             * value; drop it here, the constraint is checked against the value chosen. */
            uint32_t distinct = 0;
            for (uint32_t b = 0; b < found.count; b++)
                if (found.items[b].var != r.var) found.items[distinct++] = found.items[b];
            Row *bounds = found.items;
            Row value;
            if (distinct == 0 || found.hole) {
                /* A hole: the least value, the empty row -- except for a parameter's row that
                 * took part in a compose, transpose or einsum (a hidden dimension). */
                if (reg->kind == LEAF_PARAMETER && s->rvars[r.var].contracted && !s->rvars[r.var].grown)
                    report_param_hole(s, reg, k, false, distinct > 0);
                reg->guessed |= (uint8_t)(1u << k);
                if (taken) continue;
                value = shape_empty_row(reg->decl);
            } else if (taken) {
                continue;
            } else if (distinct == 1) {
                value = bounds[0];
            } else {
                value = meet_rows(s, bounds, distinct, reg->decl);
            }
            Commit c = {.row = true, .var = r.var, .value = value};
            ARENA_PUSH(s->arena, commits.items, commits.count, commits.cap, c);
        }
    }
    s->committing = true;
    for (uint32_t i = 0; i < commits.count; i++) {
        Commit c = commits.items[i];
        if (c.row) shape_row_eq(s, (Row){.var = c.var}, c.value, c.value.origin);
        else shape_dim_eq(s, (Dim){.var = c.var}, c.dim, c.dim.origin);
    }
    s->committing = false;
}

/* Commit every variable still free in a registered shape to the bottom of its order. */
static bool close_interiors(ShapeSolver *s) {
    bool any = false;
    s->choosing = true;
    for (uint32_t i = 0; i < s->shape_count; i++) {
        for (int k = 0; k < ROW_KINDS; k++) {
            Row r = shape_resolve_row(s, s->shapes[i].shape.rows[k]);
            for (uint32_t j = 0; j < r.count; j++) {
                uint32_t v = r.dims[j].var;
                if (!v || s->dvars[v].solved) continue;
                DimVarInfo *info = &s->dvars[v];
                Dim value = info->at_least > 1 ? dim_ground(info->at_least, BASIS_DEFAULT, info->at_least_why)
                          : info->unit_below   ? dim_unit(info->unit_below)
                                               : dim_unit(s->fallback);
                solve_dim_var(s, v, value, s->fallback);
                any = true;
            }
            if (r.var && !s->rvars[r.var].solved) {
                solve_row_var(s, r.var, shape_empty_row(r.origin), s->fallback);
                any = true;
            }
        }
    }
    s->choosing = false;
    return any;
}

/* ---- Products (Total_elems) ------------------------------------------------------------------ */

/* r as messages show it, made once into *text. */
static const char *axes_text(ShapeSolver *s, Row r, const char **text) {
    if (!*text) *text = shape_row_to_string(s, r);
    return *text;
}

/* Settle what the products can say now; returns whether a constraint was queued.  Without
 * `default_rows` only what follows from the constraints is used: a ground row sizes its cell
 * count, and a known count sizes a closed row's one unknown axis.  With it (closing, before
 * the leaves commit), a row variable still free takes what is missing as one axis, or no axis
 * when nothing is (seed 004's stage 5); with unknown axes beside it, it takes none and they
 * are left to the count. */
static bool settle_products(ShapeSolver *s, bool default_rows) {
    bool progress = false;
    for (uint32_t i = 0; i < s->product_count; i++) {
        Product *p = &s->products[i];
        if (p->settled) continue;
        Row r = shape_resolve_row(s, p->row);
        Dim cells = shape_resolve_dim(s, p->cells);
        uint64_t known = 1;
        uint32_t unknown = 0, unknown_at = 0;
        for (uint32_t j = 0; j < r.count; j++) {
            Dim d = shape_resolve_dim(s, r.dims[j]);
            if (d.var) unknown++, unknown_at = j;
            else if ((known *= d.size) > UINT32_MAX) known = (uint64_t)UINT32_MAX + 1;
        }
        const char *rs = NULL; /* made by axes_text when a message or origin needs it */
        if (!unknown && !r.var) {
            p->settled = progress = true;
            if (known > UINT32_MAX) {
                error_at(s, p->why, r.origin, cells.origin, "the axes %s hold more than %u cells", axes_text(s, r, &rs), UINT32_MAX);
                note_origin(s, r.origin, "axes %s come from", axes_text(s, r, &rs));
                continue;
            }
            if (!cells.var && cells.size != known) {
                error_at(s, p->why, r.origin, cells.origin, "the axes %s hold %llu cells, not %u", axes_text(s, r, &rs),
                         (unsigned long long)known, cells.size);
                note_origin(s, r.origin, "axes %s come from", axes_text(s, r, &rs));
                note_origin(s, cells.origin, "%u cells come from", cells.size);
                continue;
            }
            OriginId o = shape_origin(s, s->origins[p->why].span,
                                      arena_printf(s->arena, "the %llu cells of axes %s (%s)",
                                                   (unsigned long long)known, axes_text(s, r, &rs), s->origins[p->why].what));
            shape_dim_eq(s, cells, dim_ground((uint32_t)known, BASIS_DEFAULT, o), p->why);
            continue;
        }
        if (cells.var) continue;
        if (known > cells.size || cells.size % known) {
            p->settled = true;
            error_at(s, p->why, r.origin, cells.origin,
                     "the axes %s hold a multiple of %llu cells, which cannot make %u cells", axes_text(s, r, &rs),
                     (unsigned long long)known, cells.size);
            note_origin(s, r.origin, "axes %s come from", axes_text(s, r, &rs));
            note_origin(s, cells.origin, "%u cells come from", cells.size);
            continue;
        }
        bool sizes_axis = unknown == 1 && !r.var;
        if (!sizes_axis && !(default_rows && r.var)) continue; /* wait for more */
        uint32_t missing = cells.size / (uint32_t)known;
        OriginId o = shape_origin(s, s->origins[p->why].span,
                                  arena_printf(s->arena, "what remains of %u cells after axes %s (%s)",
                                               cells.size, axes_text(s, r, &rs), s->origins[p->why].what));
        if (sizes_axis) {
            p->settled = progress = true;
            shape_dim_eq(s, r.dims[unknown_at], dim_ground(missing, BASIS_DEFAULT, o), p->why);
        } else {
            progress = true;
            Dim axis = dim_ground(missing, BASIS_DEFAULT, o);
            Row value = unknown || missing == 1 ? shape_empty_row(o) : shape_closed_row(s, &axis, 1, o);
            shape_row_eq(s, (Row){.var = r.var, .origin = o}, value, p->why);
        }
    }
    return progress;
}

/* Settle the front equalities whose row now has a known front; with `default_rows`, a row whose
 * unknown stretch lies in front of its written axes takes it empty (the written axes are the
 * leftmost), and a bare row variable is equated as it is.  Returns whether one was queued. */
static bool settle_fronts(ShapeSolver *s, bool default_rows) {
    bool progress = false;
    for (uint32_t i = 0; i < s->front_count; i++) {
        FrontEq *f = &s->fronts[i];
        if (f->settled) continue;
        Row r = shape_resolve_row(s, f->row);
        if (!r.var || r.lead > 0 || (default_rows && r.count == 0)) {
            f->settled = progress = true;
            shape_row_eq(s, f->row, f->front, f->why);
        } else if (default_rows) {
            progress = true;
            shape_row_eq(s, (Row){.var = r.var, .origin = r.origin}, shape_empty_row(r.origin), f->why);
        }
    }
    return progress;
}

/* ---- Windows (Conv_input) --------------------------------------------------------------------- */

static uint64_t window_extent(Window w, uint64_t kernel) {
    return w.has_kernel ? (uint64_t)w.dilation * (kernel - 1) + 1 : 1;
}

uint64_t window_over_size(Window w, uint64_t input, uint64_t kernel, WindowPadding pad) {
    /* The first window starts at `offset`; under `valid` it must also end inside. */
    uint64_t need = w.offset + (pad == WINDOW_PAD_VALID ? window_extent(w, kernel) : 1);
    if (input < need) return 0;
    return (input - need) / w.stride + 1;
}

uint64_t window_input_size(Window w, uint64_t over, uint64_t kernel, WindowPadding pad) {
    if (pad == WINDOW_PAD_VALID && w.has_kernel)
        return (uint64_t)w.stride * (over - 1) + w.offset + window_extent(w, kernel);
    return (uint64_t)w.stride * over;
}

uint64_t window_left_pad(Window w, uint64_t kernel, WindowPadding pad) {
    return pad == WINDOW_PAD_SAME && w.has_kernel ? (uint64_t)w.dilation * (kernel - 1) / 2 : 0;
}

uint32_t shape_dim_window(ShapeSolver *s, Dim input, Dim over, Dim kernel, Window w, OriginId why) {
    if (!w.has_kernel && w.padding == WINDOW_PAD_INFERRED) w.padding = WINDOW_PAD_SAME;
    WindowC c = {input, over, kernel, w, w.padding, why, false};
    ARENA_PUSH(s->arena, s->windows, s->window_count, s->window_cap, c);
    return s->window_count;
}

WindowPadding shape_window_padding(const ShapeSolver *s, uint32_t handle) {
    if (handle == 0 || handle > s->window_count) return WINDOW_PAD_INFERRED;
    return s->windows[handle - 1].padding;
}

void shape_window_sizes(ShapeSolver *s, uint32_t handle, uint32_t *over, uint32_t *kernel) {
    const WindowC *c = &s->windows[handle - 1];
    Dim o = shape_resolve_dim(s, c->over), k = shape_resolve_dim(s, c->kernel);
    *over = o.var ? 0 : o.size;
    *kernel = !c->w.has_kernel ? 1 : k.var ? 0 : k.size;
}

static const char *padding_word(WindowPadding pad) {
    return pad == WINDOW_PAD_SAME ? "padded ('=')" : pad == WINDOW_PAD_VALID ? "valid ('<')" : "unspecified";
}

/* The error of a window whose sizes do not fit: the input against the output or the kernel. */
static void window_mismatch(ShapeSolver *s, WindowC *c, Dim input, Dim over, Dim kernel, const char *msg) {
    c->settled = true;
    error_at(s, c->why, input.origin, over.var ? kernel.origin : over.origin, "%s", msg);
    note_origin(s, input.origin, "the input size %s comes from", dim_to_string(s, input));
    if (!over.var) note_origin(s, over.origin, "the output size %s comes from", dim_to_string(s, over));
    if (c->w.has_kernel) note_origin(s, kernel.origin, "the kernel size %s comes from", dim_to_string(s, kernel));
}

/* A merged axis (w.merge): input = over * kernel.  Any two known sizes give the third, which
 * must divide exactly.  Returns whether a constraint was queued. */
static bool settle_merge(ShapeSolver *s, WindowC *c) {
    Dim n = shape_resolve_dim(s, c->input), o = shape_resolve_dim(s, c->over), k = shape_resolve_dim(s, c->kernel);
    if ((n.var != 0) + (o.var != 0) + (k.var != 0) > 1) return false;
    uint64_t product = (uint64_t)o.size * k.size;
    const char *msg = NULL;
    if (n.var) {
        if (product > UINT32_MAX)
            msg = arena_printf(s->arena, "%u blocks of %u cells would hold more than %u cells", o.size, k.size, UINT32_MAX);
    } else if (o.var) {
        if (n.size % k.size)
            msg = arena_printf(s->arena, "an axis of %u cells does not split into blocks of %u (the inner size)",
                               n.size, k.size);
    } else if (k.var) {
        if (n.size % o.size)
            msg = arena_printf(s->arena, "an axis of %u cells does not split into %u blocks (the outer size)",
                               n.size, o.size);
    } else if (product != n.size) {
        msg = arena_printf(s->arena, "%u blocks of %u cells make %llu cells, not %u", o.size, k.size,
                           (unsigned long long)product, n.size);
    }
    c->settled = true;
    if (msg) {
        error_at(s, c->why, n.var ? o.origin : n.origin, k.var ? o.origin : k.origin, "%s", msg);
        if (!n.var) note_origin(s, n.origin, "the axis size %s comes from", dim_to_string(s, n));
        if (!o.var) note_origin(s, o.origin, "the outer size %s comes from", dim_to_string(s, o));
        if (!k.var) note_origin(s, k.origin, "the inner size %s comes from", dim_to_string(s, k));
        if (n.var || (!o.var && !k.var)) return false;
    }
    if (!n.var && !o.var && !k.var) return false; /* all three known, and they agree */
    Dim unknown = n.var ? c->input : o.var ? c->over : c->kernel;
    /* (After a division that does not come out even, the quotient rounded down, at least 1, so
     * that what depends on the unknown size does not fail again.) */
    uint32_t size = n.var ? (uint32_t)product : o.var ? n.size / k.size : n.size / o.size;
    if (size == 0) size = 1;
    const char *which = n.var ? "the cells of" : o.var ? "the outer size of" : "the inner size of";
    OriginId why = shape_origin(s, s->origins[c->why].span, arena_printf(s->arena, "%s %s", which,
                                                                         s->origins[c->why].what));
    shape_dim_eq(s, unknown, dim_ground(size, BASIS_DEFAULT, why), c->why);
    return true;
}

/* Settle what the windows can say now; returns whether a constraint was queued.  With
 * `defaults` (closing, before the leaves commit): an unknown input takes the size its known
 * output covers, and a padding nothing decided becomes `valid`. */
static bool settle_windows(ShapeSolver *s, bool defaults) {
    bool progress = false;
    for (uint32_t i = 0; i < s->window_count; i++) {
        WindowC *c = &s->windows[i];
        if (c->settled) continue;
        if (c->w.merge) {
            progress |= settle_merge(s, c);
            continue;
        }
        Dim input = shape_resolve_dim(s, c->input), over = shape_resolve_dim(s, c->over);
        Dim kernel = c->w.has_kernel ? shape_resolve_dim(s, c->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
        if (kernel.var) continue; /* the kernel is never derived from a window */
        const char *phrase = s->origins[c->why].what;
        if (!input.var) {
            WindowPadding pad = c->padding;
            if (pad == WINDOW_PAD_INFERRED) {
                if (over.var && !defaults) continue;
                pad = WINDOW_PAD_VALID;
                if (!over.var && window_over_size(c->w, input.size, kernel.size, WINDOW_PAD_SAME) == over.size)
                    pad = WINDOW_PAD_SAME;
                c->padding = pad;
            }
            uint64_t want = window_over_size(c->w, input.size, kernel.size, pad);
            if (want == 0) {
                window_mismatch(s, c, input, over, kernel,
                                arena_printf(s->arena, "no %s window fits: an input of %u cells is shorter than %s%llu",
                                             padding_word(pad), input.size,
                                             c->w.has_kernel ? "the dilated kernel and offset, " : "the offset plus one, ",
                                             (unsigned long long)(c->w.offset + window_extent(c->w, kernel.size))));
                continue;
            }
            if (!over.var && over.size != want) {
                window_mismatch(s, c, input, over, kernel,
                                arena_printf(s->arena,
                                             "stride %u over an input of %u cells gives %llu %s positions, not %u",
                                             c->w.stride, input.size, (unsigned long long)want, padding_word(pad),
                                             over.size));
                continue;
            }
            c->settled = progress = true;
            if (over.var) {
                OriginId o = shape_origin(s, s->origins[c->why].span,
                                          arena_printf(s->arena, "the %llu positions of a stride %u window over %u cells (%s)",
                                                       (unsigned long long)want, c->w.stride, input.size, phrase));
                shape_dim_eq(s, over, dim_ground((uint32_t)want, BASIS_DEFAULT, o), c->why);
            }
            continue;
        }
        if (!defaults) continue;
        if (over.var) {
            /* An output bounded only from above (it broadcasts into N) closes up to N, as closing
             * would close it; here, before closing could give the unsized input the claim-free
             * unit (an even/odd split of an axis that only its halves size). */
            DimVarInfo *info = &s->dvars[over.var];
            if (info->has_lub && !info->lub.runtime && !dim_is_unit(info->lub)) {
                shape_dim_eq(s, over, info->lub, info->lub_why);
                progress = true;
            }
            continue;
        }
        if (c->padding == WINDOW_PAD_INFERRED) c->padding = WINDOW_PAD_VALID;
        uint64_t size = window_input_size(c->w, over.size, kernel.size, c->padding);
        /* Windows over one unsized input (the halves of an even/odd split) each need at least
         * their own extent: the input is the largest, so the order they settle in does not
         * matter. */
        for (uint32_t j = 0; j < s->window_count; j++) {
            WindowC *d = &s->windows[j];
            if (j == i || d->settled || d->w.merge || !dims_equal(shape_resolve_dim(s, d->input), input)) continue;
            Dim other_over = shape_resolve_dim(s, d->over);
            Dim other_kernel = d->w.has_kernel ? shape_resolve_dim(s, d->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
            if (other_over.var || other_kernel.var) continue;
            WindowPadding pad = d->padding == WINDOW_PAD_INFERRED ? WINDOW_PAD_VALID : d->padding;
            uint64_t need = window_input_size(d->w, other_over.size, other_kernel.size, pad);
            if (need > size) size = need;
        }
        c->settled = progress = true;
        if (size > UINT32_MAX) {
            error_at(s, c->why, over.origin, kernel.origin, "the input of %u %s positions would hold more than %u cells",
                     over.size, padding_word(c->padding), UINT32_MAX);
            continue;
        }
        OriginId o = shape_origin(s, s->origins[c->why].span,
                                  arena_printf(s->arena, "the %llu cells that %u positions of a stride %u window cover (%s)",
                                               (unsigned long long)size, over.size, c->w.stride, phrase));
        shape_dim_eq(s, input, dim_ground((uint32_t)size, BASIS_DEFAULT, o), c->why);
    }
    return progress;
}

/* ---- Concatenations ------------------------------------------------------------------------- */

uint32_t shape_dim_concat(ShapeSolver *s, Dim total, const Dim *parts, uint32_t count, OriginId why) {
    ConcatC c = {total, arena_alloc(s->arena, count * sizeof *parts), count, why, false};
    memcpy(c.parts, parts, count * sizeof *parts);
    ARENA_PUSH(s->arena, s->concats, s->concat_count, s->concat_cap, c);
    return s->concat_count;
}

uint32_t shape_concat_part_size(ShapeSolver *s, uint32_t handle, uint32_t part) {
    Dim d = shape_resolve_dim(s, s->concats[handle - 1].parts[part]);
    return d.var ? 0 : d.size;
}

/* The notes of a concatenation error: where the total and every component got its size. */
static void concat_notes(ShapeSolver *s, const ConcatC *c, Dim total) {
    if (!total.var) note_origin(s, total.origin, "the concatenated size %s comes from", dim_to_string(s, total));
    for (uint32_t i = 0; i < c->count; i++) {
        Dim p = shape_resolve_dim(s, c->parts[i]);
        if (!p.var) note_origin(s, p.origin, "component %u, of size %s, comes from", i + 1, dim_to_string(s, p));
    }
}

/* Settle what the concatenations can say now; returns whether a constraint was queued.  All
 * components known: the total is their sum (or is checked against it); the total and all but
 * one known: that one is the difference, which must be at least 1.  Named bases of the
 * components must agree, and the total takes theirs. */
static bool settle_concats(ShapeSolver *s) {
    bool progress = false;
    for (uint32_t i = 0; i < s->concat_count; i++) {
        ConcatC *c = &s->concats[i];
        if (c->settled) continue;
        Dim total = shape_resolve_dim(s, c->total);
        uint64_t sum = 0;
        uint32_t unknown = 0, which = 0, basis = BASIS_DEFAULT, basis_part = 0;
        bool clash = false;
        for (uint32_t j = 0; j < c->count; j++) {
            Dim p = shape_resolve_dim(s, c->parts[j]);
            if (p.var) {
                unknown++, which = j;
                continue;
            }
            sum += p.size;
            if (p.basis == BASIS_NONE || p.basis == BASIS_DEFAULT) continue;
            if (basis != BASIS_DEFAULT && basis != p.basis) {
                clash = true;
                c->settled = true;
                Dim q = shape_resolve_dim(s, c->parts[basis_part]);
                error_at(s, c->why, q.origin, p.origin, "basis conflict between components %u (%s) and %u (%s)",
                         basis_part + 1, dim_to_string(s, q), j + 1, dim_to_string(s, p));
                concat_notes(s, c, total);
                break;
            }
            basis = p.basis, basis_part = j;
        }
        if (clash) continue;
        if (unknown == 0) {
            c->settled = progress = true;
            if (sum > UINT32_MAX) {
                error_at(s, c->why, c->total.origin, c->parts[0].origin, "the components add up to %llu, more than %u",
                         (unsigned long long)sum, UINT32_MAX);
                continue;
            }
            if (!total.var && total.size != sum) {
                error_at(s, c->why, total.origin, c->parts[0].origin,
                         "the components add up to %llu, but the concatenated axis has size %s", (unsigned long long)sum,
                         dim_to_string(s, total));
                concat_notes(s, c, total);
                continue;
            }
            OriginId o = shape_origin(s, s->origins[c->why].span,
                                      arena_printf(s->arena, "the sum of the components (%s)", s->origins[c->why].what));
            shape_dim_eq(s, total, dim_ground((uint32_t)sum, basis, o), c->why);
            continue;
        }
        if (total.var) {
            /* A concatenation of two or more components has at least two cells, so it cannot
             * be the claim-free unit: when its axis is only bounded from above (it broadcasts
             * into a size N), it is N, and the unknown components follow. */
            DimVarInfo *info = &s->dvars[total.var];
            if (sum + unknown > 1 && info->has_lub && !info->lub.runtime && !dim_is_unit(info->lub)) {
                OriginId o = shape_origin(s, s->origins[c->why].span,
                                          arena_printf(s->arena, "a concatenation of at least %llu cells, which cannot "
                                                       "broadcast (%s)", (unsigned long long)(sum + unknown),
                                                       s->origins[c->why].what));
                shape_dim_eq(s, total, info->lub, o);
                progress = true;
            }
            continue;
        }
        if (unknown > 1) continue;
        c->settled = progress = true;
        Dim part = shape_resolve_dim(s, c->parts[which]);
        if ((uint64_t)total.size <= sum) {
            error_at(s, c->why, total.origin, part.origin,
                     "component %u would have size %lld: the concatenated size %s minus the other components' %llu",
                     which + 1, (long long)total.size - (long long)sum, dim_to_string(s, total), (unsigned long long)sum);
            concat_notes(s, c, total);
            continue;
        }
        OriginId o = shape_origin(s, s->origins[c->why].span,
                                  arena_printf(s->arena, "the concatenated size %u less the other components' %llu (%s)",
                                               total.size, (unsigned long long)sum, s->origins[c->why].what));
        shape_dim_eq(s, part, dim_ground((uint32_t)(total.size - sum), basis, o), c->why);
    }
    return progress;
}

/* A cell count, window or concatenation with a run-time size among its axes (ground, or still a
 * variable a `?` became) is computed at compile time from sizes it cannot know: reported once,
 * and left settled. */
static void refuse_runtime(ShapeSolver *s, bool *settled, OriginId why, const Dim *dims, uint32_t count,
                           const char *message) {
    for (uint32_t i = 0; i < count; i++) {
        Dim d = shape_resolve_dim(s, dims[i]);
        OriginId decl = d.var ? s->dvars[d.var].runtime : d.runtime ? d.origin : 0; /* the `?` written */
        if (!decl) continue;
        *settled = true;
        error_at(s, why, decl, dims[i].origin, "%s", message);
        note_origin(s, decl, "the run-time size comes from");
        return;
    }
}

/* A cells constraint whose row is one run-time axis among axes of size 1 holds that run-time size
 * (`dim b` of a run-time batch: docs/inference.md §4.9); it is settled once closing has made the
 * size ground.  Any other row with a run-time axis is refused.  Returns whether it settled one. */
static bool settle_runtime_product(ShapeSolver *s, Product *p) {
    Row r = shape_resolve_row(s, p->row);
    Dim only = {0};
    uint32_t runtime = 0;
    bool ones = true;
    for (uint32_t j = 0; j < r.count; j++) {
        Dim d = shape_resolve_dim(s, r.dims[j]);
        if (d.runtime || (d.var && s->dvars[d.var].runtime)) runtime++, only = d;
        else ones = ones && d.var == 0 && d.size == 1;
    }
    if (!runtime || r.var) return false; /* (an open row: wait for its other axes) */
    if (runtime == 1 && ones && only.var) return false; /* wait for closing to ground it */
    if (runtime == 1 && ones) {
        p->settled = true;
        shape_dim_eq(s, p->cells, only, p->why);
        return true;
    }
    refuse_runtime(s, &p->settled, p->why, r.dims, r.count,
                   "'dim' and 'set_dim' take a row with a run-time size (?) only when that is its one axis of more "
                   "than one cell: the product of a run-time size and other sizes is not computed in this version");
    return false;
}

static bool refuse_runtime_sizes(ShapeSolver *s) {
    bool progress = false;
    for (uint32_t i = 0; i < s->product_count; i++)
        if (!s->products[i].settled) progress |= settle_runtime_product(s, &s->products[i]);
    for (uint32_t i = 0; i < s->window_count; i++) {
        WindowC *c = &s->windows[i];
        Dim dims[3] = {c->input, c->over, c->kernel};
        if (!c->settled)
            refuse_runtime(s, &c->settled, c->why, dims, c->w.has_kernel ? 3 : 2,
                           "a window or merged axis needs compile-time sizes, but an axis here is a run-time size (?)");
    }
    for (uint32_t i = 0; i < s->concat_count; i++) {
        ConcatC *c = &s->concats[i];
        if (c->settled) continue;
        static const char *concat = "a concatenation needs compile-time sizes, but an axis here is a run-time size (?)";
        refuse_runtime(s, &c->settled, c->why, &c->total, 1, concat);
        if (!c->settled) refuse_runtime(s, &c->settled, c->why, c->parts, c->count, concat);
    }
    return progress;
}

/* What waits for a fixpoint: cells constraints, front equalities, windows and concatenations. */
static bool settle(ShapeSolver *s, bool default_rows) {
    bool runtime = refuse_runtime_sizes(s);
    bool fronts = settle_fronts(s, default_rows);
    bool products = settle_products(s, default_rows);
    bool windows = settle_windows(s, default_rows);
    bool concats = settle_concats(s);
    return runtime || fronts || products || windows || concats;
}

/* Solve, settling what waits for a fixpoint and then the crossings (with `default_rows`: also the
 * defaults). */
static void solve_and_settle(ShapeSolver *s, bool default_rows) {
    shape_solve(s);
    while (settle(s, false) || close_crossings(s)) shape_solve(s);
    if (!default_rows) return;
    while (settle(s, true)) {
        shape_solve(s);
        while (settle(s, false) || close_crossings(s)) shape_solve(s);
    }
}

/* Make every run-time size class still open a ground run-time size, numbered in the order the
 * first of its declarations was written.  (Closing may still meet it with another size:
 * bind_runtime.) */
static void ground_runtime_sizes(ShapeSolver *s) {
    if (!s->runtime_count) {
        RuntimeClass none = {0};
        ARENA_PUSH(s->arena, s->runtimes, s->runtime_count, s->runtime_cap, none);
        s->runtime_why = shape_origin(s, (Span){0}, "a run-time size");
    }
    for (uint32_t i = 0; i < s->runtime_decl_count; i++) {
        RuntimeDecl *decl = &s->runtime_decls[i];
        Dim d = shape_resolve_dim(s, (Dim){.var = decl->var, .origin = decl->origin});
        if (d.var) {
            RuntimeClass c = {.min = 1};
            ARENA_PUSH(s->arena, s->runtimes, s->runtime_count, s->runtime_cap, c);
            uint32_t k = s->runtime_count - 1;
            Dim value = {.size = 0, .basis = BASIS_DEFAULT, .runtime = k, .origin = decl->origin};
            solve_dim_var(s, d.var, value, s->runtime_why);
        }
    }
    shape_solve(s);
}

/* After closing: each class's declarations, and a warning for a `?` that met a compile-time size.
 * A class whose every `?` follows its uses (an inline definition's: no name) has no value
 * anyone gives: an error. */
static void finish_runtime_sizes(ShapeSolver *s) {
    bool *named = arena_alloc(s->arena, (s->runtime_count + 1) * sizeof *named);
    memset(named, 0, (s->runtime_count + 1) * sizeof *named);
    for (uint32_t i = 0; i < s->runtime_decl_count; i++) {
        RuntimeDecl *decl = &s->runtime_decls[i];
        Dim d = shape_resolve_dim(s, (Dim){.var = decl->var, .origin = decl->origin});
        if (d.runtime) {
            RuntimeClass *c = &s->runtimes[d.runtime];
            ARENA_PUSH(s->arena, c->decls, c->decl_count, c->decl_cap, decl->origin);
            named[d.runtime] |= decl->name != NULL;
        } else if (d.var == 0 && decl->origin) {
            const char *size = dim_to_string(s, d);
            diag_warning(s->origins[decl->origin].span, "this run-time size is always %s: the program fixes it", size);
            note_origin(s, d.origin, "size %s comes from", size);
        }
    }
    for (uint32_t k = 1; k < s->runtime_count; k++) {
        RuntimeClass *c = &s->runtimes[k];
        if (!c->decl_count || named[k]) continue;
        s->errors++;
        diag_error(s->origins[c->decls[0]].span, "nothing gives this run-time size: no input or data file with a '?' "
                   "meets it (an inline definition's '?' takes the size of what it is used with)");
    }
}

const char *shape_runtime_class_name(const ShapeSolver *s, uint32_t k) {
    for (uint32_t i = 0; i < s->runtime_decl_count; i++) {
        const RuntimeDecl *decl = &s->runtime_decls[i];
        if (!decl->name || !decl->var) continue;
        Dim d = {.var = decl->var};
        while (d.var && s->dvars[d.var].solved) d = s->dvars[d.var].value;
        while (d.var == 0 && d.runtime && s->runtimes[d.runtime].bound) d = s->runtimes[d.runtime].value;
        if (d.var == 0 && d.runtime == k) return decl->name;
    }
    return NULL;
}

bool shape_close(ShapeSolver *s) {
    unsigned before = s->errors;
    s->inside++;
    solve_and_settle(s, false);
    ground_runtime_sizes(s);
    solve_and_settle(s, true);
    close_leaves(s);
    solve_and_settle(s, false);
    for (int round = 0; round < 64; round++) {
        if (!close_interiors(s)) break;
        solve_and_settle(s, false);
    }
    for (uint32_t i = 0; i < s->window_count; i++) {
        WindowC *c = &s->windows[i];
        if (c->settled || s->errors != before) continue;
        c->settled = true;
        Dim kernel = shape_resolve_dim(s, c->kernel);
        bool no_kernel = c->w.has_kernel && kernel.var && !c->w.merge;
        error_at(s, c->why, no_kernel ? c->kernel.origin : c->input.origin, c->over.origin,
                 c->w.merge ? "the sizes of this merged axis are not known: two of the axis, its outer label and "
                              "its inner label need a size (from an operand or set_dim)"
                 : no_kernel ? "the kernel size of this window is not known: give its label a size (a kernel operand, or set_dim)"
                             : "the sizes of this window are not known: neither its input nor its output is sized");
    }
    for (uint32_t i = 0; i < s->concat_count; i++) {
        ConcatC *c = &s->concats[i];
        if (c->settled || s->errors != before) continue;
        c->settled = true;
        error_at(s, c->why, c->total.origin, c->parts[0].origin,
                 "the sizes of this concatenation are not known: give its axis or all but one of its components a size");
    }
    /* A parameter whose axis only the fallback sized: nothing determined it.  A parameter left
     * with no axes at all, its output row empty because nothing bounded it (`{ p } + { q }`), is
     * not a scalar anyone asked for: OCANNL's "you forgot to specify the hidden dimension(s)".
     * (`{ p; o = [] }` asked for one.) */
    bool clean = s->errors == before;
    for (uint32_t i = 0; i < s->shape_count; i++) {
        Registered *reg = &s->shapes[i];
        if (!reg->leaf || reg->kind != LEAF_PARAMETER) continue;
        if ((reg->guessed & (1u << ROW_OUTPUT)) && !reg->reported && clean) {
            uint32_t axes = 0;
            for (int k = 0; k < ROW_KINDS; k++) axes += shape_resolve_row(s, reg->shape.rows[k]).count;
            if (axes == 0) {
                report_param_unsized(s, reg);
                continue;
            }
        }
        for (int k = 0; k < ROW_KINDS; k++) {
            Row r = shape_resolve_row(s, reg->shape.rows[k]);
            for (uint32_t j = 0; j < r.count; j++) {
                if (is_fallback(s, r.dims[j].origin)) {
                    report_param_hole(s, reg, k, true, r.dims[j].origin == s->fallback_open);
                    break;
                }
            }
        }
    }
    s->inside--;
    if (s->errors == before) finish_runtime_sizes(s);
    if (s->errors == before) shape_verify(s);
    return s->errors == before;
}

/* ---- Verification: the closed solution against every emitted constraint -------------------
 *
 * After closing, every constraint added from outside the solver (the log `emitted`, kept by
 * enqueue while not solving) and every cells, front, window and concatenation constraint is
 * checked on the ground terms, from the definitions of seed 000 rather than from the solver's
 * bookkeeping: dims equal by size and basis, 1_∅ ⊑ anything, a closed super row a flat
 * sequence against which the sub row's flanks are anchored.  Closing runs it whenever it
 * reported no error; a violation is an internal error at the constraint's source.  Terms that
 * closing leaves unsolved (they belong to no registered shape: a spec label no tensor uses, a
 * caller's scratch term) are not checked; registered shapes are ground after closing. */

static bool verify_row_eq(Row a, Row b) {
    if (a.count != b.count) return false;
    for (uint32_t i = 0; i < a.count; i++)
        if (!ground_eq(a.dims[i], b.dims[i])) return false;
    return true;
}

static bool verify_row_le(Row sub, Row super) {
    if (sub.count > super.count) return false;
    for (uint32_t i = 0; i < sub.lead; i++)
        if (!ground_le(sub.dims[i], super.dims[i])) return false;
    for (uint32_t i = 0; i < sub.count - sub.lead; i++)
        if (!ground_le(sub.dims[sub.count - 1 - i], super.dims[super.count - 1 - i])) return false;
    return true;
}

static void verify_failed(ShapeSolver *s, OriginId why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verify_failed(ShapeSolver *s, OriginId why, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->errors++;
    diag_error(s->origins[why].span, "internal error: the inferred shapes violate a constraint of %s: %s",
               why ? s->origins[why].what : "the solver's caller", msg);
    diag_note(s->origins[why].span, "this is a bug in tsrc's shape inference (compiler/infer/shape.c)");
}

static bool verify_constraint(ShapeSolver *s, const Constraint *c) {
    if (c->kind == C_ROW_EQ || c->kind == C_ROW_LE) {
        Row a = shape_resolve_row(s, c->r1), b = shape_resolve_row(s, c->r2);
        bool eq = c->kind == C_ROW_EQ;
        if (!row_is_ground(a) || !row_is_ground(b) || (eq ? verify_row_eq(a, b) : verify_row_le(a, b))) return true;
        verify_failed(s, c->why, "%s %s %s", shape_row_to_string(s, a), eq ? "=" : "⊑", shape_row_to_string(s, b));
        return false;
    }
    Dim a = shape_resolve_dim(s, c->d1), b = c->kind == C_DIM_AT_LEAST ? a : shape_resolve_dim(s, c->d2);
    bool holds = a.var != 0 || b.var != 0 ||
                 (c->kind == C_DIM_EQ   ? ground_eq(a, b)
                  : c->kind == C_DIM_LE ? ground_le(a, b)
                                        : a.size >= c->at_least || (a.runtime && s->runtimes[a.runtime].min >= c->at_least));
    if (holds) return true;
    if (c->kind == C_DIM_AT_LEAST)
        verify_failed(s, c->why, "size %s is not at least %u", dim_to_string(s, a), c->at_least);
    else
        verify_failed(s, c->why, "%s %s %s", dim_to_string(s, a), c->kind == C_DIM_EQ ? "=" : "⊑", dim_to_string(s, b));
    return false;
}

static uint64_t verify_cells(ShapeSolver *s, Row r, bool *ground) {
    uint64_t n = 1;
    *ground = row_is_ground(r);
    for (uint32_t i = 0; i < r.count && *ground; i++)
        n = n * r.dims[i].size > UINT32_MAX ? (uint64_t)UINT32_MAX + 1 : n * r.dims[i].size;
    (void)s;
    return n;
}

bool shape_verify(ShapeSolver *s) {
    unsigned before = s->errors;
    for (uint32_t i = 0; i < s->emitted.count; i++)
        if (!verify_constraint(s, &s->emitted.items[i])) break; /* one is enough: it is a bug */
    for (uint32_t i = 0; i < s->product_count && s->errors == before; i++) {
        const Product *p = &s->products[i];
        bool ground;
        Row r = shape_resolve_row(s, p->row);
        uint64_t n = verify_cells(s, r, &ground);
        Dim cells = shape_resolve_dim(s, p->cells);
        if (!ground || cells.var || cells.size != n)
            verify_failed(s, p->why, "the axes %s do not hold %s cells", shape_row_to_string(s, r), dim_to_string(s, cells));
    }
    for (uint32_t i = 0; i < s->front_count && s->errors == before; i++) {
        const FrontEq *f = &s->fronts[i];
        Row a = shape_resolve_row(s, f->row), b = shape_resolve_row(s, f->front);
        if (!row_is_ground(a) || !row_is_ground(b) || !verify_row_eq(a, b))
            verify_failed(s, f->why, "%s = %s", shape_row_to_string(s, a), shape_row_to_string(s, b));
    }
    for (uint32_t i = 0; i < s->window_count && s->errors == before; i++) {
        const WindowC *c = &s->windows[i];
        Dim in = shape_resolve_dim(s, c->input), over = shape_resolve_dim(s, c->over);
        Dim kernel = c->w.has_kernel ? shape_resolve_dim(s, c->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
        WindowPadding pad = c->padding == WINDOW_PAD_INFERRED ? WINDOW_PAD_VALID : c->padding;
        if (c->w.merge ? in.var || over.var || kernel.var || (uint64_t)over.size * kernel.size != in.size
                       : in.var || over.var || kernel.var || window_over_size(c->w, in.size, kernel.size, pad) != over.size)
            verify_failed(s, c->why, "a window over an input of %s with a kernel of %s does not give %s positions",
                          dim_to_string(s, in), dim_to_string(s, kernel), dim_to_string(s, over));
    }
    for (uint32_t i = 0; i < s->concat_count && s->errors == before; i++) {
        const ConcatC *c = &s->concats[i];
        Dim total = shape_resolve_dim(s, c->total);
        uint64_t sum = 0;
        bool ground = total.var == 0;
        for (uint32_t j = 0; j < c->count; j++) {
            Dim d = shape_resolve_dim(s, c->parts[j]);
            ground = ground && d.var == 0;
            sum += d.size;
        }
        if (!ground || sum != total.size)
            verify_failed(s, c->why, "the components do not add up to the concatenated axis %s", dim_to_string(s, total));
    }
    return s->errors == before;
}

/* ---- Explaining (tsrc --explain) ------------------------------------------------------------ */

/* "file:line:col" of a span, then its source text on one line (runs of blanks made one space,
 * cut at 60 bytes). */
static void print_place(FILE *out, Span span) {
    const Source *src = source_get(span.file);
    unsigned line, col;
    span_line_col(span, &line, &col);
    fprintf(out, "%s:%u:%u", src->path, line, col);
    if (span.end <= span.start) return;
    fputs(" `", out);
    span_print_text(out, span, 60);
    fputc('`', out);
}

/* An origin's phrase, then its place and the applications of user functions it was made in,
 * on lines of their own. */
static void print_origin(ShapeSolver *s, FILE *out, OriginId o) {
    const Origin *org = &s->origins[o];
    fprintf(out, "%s\n", org->what);
    if (org->span.file) {
        fputs("         at ", out);
        print_place(out, org->span);
        fputc('\n', out);
    }
    for (const CallFrame *f = org->calls; f; f = f->outer) {
        fprintf(out, "         in '%s' applied at ", f->name);
        print_place(out, f->call);
        fputc('\n', out);
    }
}

/* One link of a chain: a variable made at origin `made` was bound by `b`. */
static void explain_step(ShapeSolver *s, FILE *out, bool row, OriginId made, const Binding *b, OriginId *last) {
    if (b->why == *last && !b->closed) return; /* the same constraint again, one level in */
    *last = b->why;
    fprintf(out, "    <- %s of %s,\n", row ? "the row variable" : "the size variable", s->origins[made].what);
    if (b->closed && is_fallback(s, b->why)) {
        fputs(b->why == s->fallback ? "       left free by every constraint: closing committed it to the least value\n"
                                    : "       bounded by a use but left open by another: closing committed it to the least value\n",
              out);
        return;
    }
    fputs(b->closed ? "       committed by closing to the bound its uses gave it: " : "       bound by ", out);
    print_origin(s, out, b->why);
}

static void explain_dim(ShapeSolver *s, FILE *out, Dim d, OriginId *last) {
    while (d.var) {
        const DimVarInfo *info = &s->dvars[d.var];
        if (!info->solved) {
            fprintf(out, "    <- still unknown: %s\n", s->origins[d.origin].what);
            return;
        }
        uint32_t k = info->bound.why == s->runtime_why ? shape_resolve_dim(s, info->bound.dim).runtime : 0;
        if (k && s->runtime_why) { /* every `?` that met this variable is one run-time size */
            fputs("    = ? (a run-time size, known when the program runs)", out);
            fputs(s->runtimes[k].decl_count > 1 ? ", one size for all of:\n" : ": ", out);
            for (uint32_t i = 0; i < s->runtimes[k].decl_count; i++) {
                if (s->runtimes[k].decl_count > 1) fputs("       ", out);
                print_origin(s, out, s->runtimes[k].decls[i]);
            }
            if (s->runtimes[k].min > 1) fprintf(out, "       (at least %u when the program runs)\n", s->runtimes[k].min);
            return;
        }
        explain_step(s, out, false, d.origin, &info->bound, last);
        d = info->bound.dim;
    }
    d = shape_resolve_dim(s, d); /* a run-time size closing made another size */
    if (d.origin == 0 || is_fallback(s, d.origin)) {
        fputs(d.origin == s->fallback_open ? "    = 1: a use left it open; the closing policy made it the claim-free unit\n"
                                           : "    = 1: no constraint sized it; the closing policy made it the claim-free unit\n",
              out);
        return;
    }
    fprintf(out, "    = %s: ", dim_to_string(s, d));
    print_origin(s, out, d.origin);
}

/* Axis j of r as shape_resolve_row lays it out: a flank's dim, or one inside the value of r's
 * variable (one link, then the same question about the value). */
static void explain_axis(ShapeSolver *s, FILE *out, Row r, uint32_t j) {
    OriginId last = 0;
    for (;;) {
        if (j < r.lead) break;
        const RowVarInfo *info = r.var ? &s->rvars[r.var] : NULL;
        uint32_t inner = info && info->solved ? shape_resolve_row(s, info->bound.row).count : 0;
        if (j >= r.lead + inner) {
            j -= inner;
            break;
        }
        explain_step(s, out, true, r.origin, &info->bound, &last);
        j -= r.lead;
        r = info->bound.row;
    }
    explain_dim(s, out, r.dims[j], &last);
}

void shape_explain(ShapeSolver *s, FILE *out, const Shape *sh) {
    static const int order[ROW_KINDS] = {ROW_BATCH, ROW_INPUT, ROW_OUTPUT};
    bool any = false;
    for (int o = 0; o < ROW_KINDS; o++) {
        int k = order[o];
        Row r = shape_resolve_row(s, sh->rows[k]);
        for (uint32_t j = 0; j < r.count; j++) {
            fprintf(out, "  %s axis %u of %u: %s\n", row_kind_name(k), j + 1, r.count, dim_to_string(s, r.dims[j]));
            explain_axis(s, out, sh->rows[k], j);
            any = true;
        }
        if (r.var) fprintf(out, "  %s axes: still open (errors were reported)\n", row_kind_name(k));
    }
    if (!any) fputs("  no axes: a single cell\n", out);
}
