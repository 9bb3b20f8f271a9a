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
 * Four choices are kept out of that race: row equalities are taken before the queue, those between
 * two open rows first (a row's marker then does not depend on which equality came first), and
 * those that equate one variable with open rows whose flanks cross are held back a round and then
 * taken in a fixed order (take_row_equalities); template growth waits for a fixpoint (it never
 * runs ahead of an equality), and grows a row by the axes it lacks, no more; a row inequality
 * whose sub row reaches across the super row's variable (a crossing) waits for that variable,
 * which closing then gives the fewest axes that let the crossing's axes agree, at its fixpoints
 * and before the leaves commit; and cells constraints, slicing's front equalities, windows (affine
 * axes: seed 004's Conv_input) and concatenations (an axis the sum of its pieces) are settled only
 * at fixpoints of closing.
 *
 * Where each part lives (shape_internal.h): this file has the solver's terms, the queue and the
 * fixpoint (shape_solve); shape_close.c has closing (shape_close) with the rules settled at its
 * fixpoints (crossings, cells, fronts, windows, concatenations, run-time sizes); shape_report.c
 * reads a closed solution back (shape_verify, shape_explain).
 *
 * Requires: diag.h for errors (every Span in an origin must belong to a registered source, or
 * be the zero span). */
#include "infer/shape_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- Allocation, origins, bases ------------------------------------------------------------ */

static void list_push(ShapeSolver *s, ConstraintList *l, Constraint c) {
    ARENA_PUSH(s->arena, l->items, l->count, l->cap, c);
}

ShapeSolver *shape_solver_new(void) {
    Arena *arena = arena_new();
    ShapeSolver *s = arena_alloc(arena, sizeof *s);
    s->arena = arena;
    Origin none = {.span = {0, 0, 0}, .what = "nowhere"};
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

void shape_set_note(ShapeSolver *s, Span at, const char *text) {
    s->note = at;
    s->note_text = text ? arena_strndup(s->arena, text, strlen(text)) : NULL;
}

void shape_set_size_note(ShapeSolver *s, Span at, const char *text) {
    s->size_note = at;
    s->size_note_text = text ? arena_strndup(s->arena, text, strlen(text)) : NULL;
}

void shape_set_product_meant(ShapeSolver *s, bool on) { s->product_meant = on; }

void shape_push_call(ShapeSolver *s, Span call, const char *name) {
    CallFrame *f = arena_alloc(s->arena, sizeof *f);
    *f = (CallFrame){call, name, s->calls};
    s->calls = f;
}

void shape_pop_call(ShapeSolver *s) {
    if (s->calls) s->calls = s->calls->outer;
}

OriginId shape_origin(ShapeSolver *s, Span span, const char *what) {
    Origin o = {span, arena_strndup(s->arena, what, strlen(what)), s->context, s->context_name, s->calls, false,
                s->note, s->note_text, s->size_note, s->size_note_text, s->product_meant, false};
    ARENA_PUSH(s->arena, s->origins, s->origin_count, s->origin_cap, o);
    return s->origin_count - 1;
}

void shape_origin_given(ShapeSolver *s, OriginId o) {
    if (o < s->origin_count) s->origins[o].given = true;
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

bool dim_is_unit(Dim d) { return d.var == 0 && d.basis == BASIS_NONE; }

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

bool row_is_ground(Row r) {
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

char *dim_to_string(ShapeSolver *s, Dim d) {
    d = shape_resolve_dim(s, d);
    if (d.runtime || (d.var && s->dvars[d.var].runtime)) return arena_printf(s->arena, "? (a run-time size)");
    if (d.var) return arena_printf(s->arena, "an unknown size");
    if (d.basis == BASIS_NONE) return arena_printf(s->arena, "1 (broadcastable)");
    if (d.basis == BASIS_DEFAULT) return arena_printf(s->arena, "%u", d.size);
    return arena_printf(s->arena, "%s=%u", s->bases[d.basis], d.size);
}

/* "batch", "input" or "output": the row of a kind, for messages. */
const char *row_kind_name(int k) {
    return k == ROW_BATCH ? "batch" : k == ROW_INPUT ? "input" : "output";
}

/* The sizes of a window's axes (seed 004's Conv_input): the arithmetic shape_close.c settles
 * windows with and shape_report.c verifies them by. */

uint64_t window_extent(Window w, uint64_t kernel) {
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

/* ---- Errors -------------------------------------------------------------------------------- */

/* Whether a dim's origin is closing's fallback: the least value, given where nothing else could
 * be (fallback_open: although a use bounded it, another left it open). */
bool is_fallback(const ShapeSolver *s, OriginId o) { return o == s->fallback || o == s->fallback_open; }

void note_origin(ShapeSolver *s, OriginId o, const char *fmt, ...) {
    if (o == 0 || is_fallback(s, o)) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_note(s->origins[o].span, "%s: %s", msg, s->origins[o].what);
    /* A place in the standard library: which of the user's applications made it. */
    const Origin *g = &s->origins[o];
    Span said = s->error_call; /* the error already points there */
    if (g->call.file && span_in_stdlib(g->span) && !span_in_stdlib(g->call) &&
        !span_equal(said, g->call))
        diag_note(g->call, "which the standard library's code made in this application");
}

/* A key of a place in the source, for clash_reported. */
static uint64_t span_key(Span span) {
    return (((uint64_t)span.file << 56) ^ ((uint64_t)span.start << 28) ^ span.end) * 0x9e3779b97f4a7c15ull ^
           0x2545f4914f6cdd1dull;
}

static bool clash_seen(const ShapeSolver *s, uint64_t key) {
    for (uint32_t i = 0; i < s->library_clash_count; i++)
        if (s->library_clashes[i] == key) return true;
    return false;
}

/* Whether `key` was reported before; it is from now on. */
static bool clash_reported(ShapeSolver *s, uint64_t key) {
    if (clash_seen(s, key)) return true;
    ARENA_PUSH(s->arena, s->library_clashes, s->library_clash_count, s->library_clash_cap, key);
    return false;
}

/* Whether the note shape_set_note gave constraint `o` (the earlier application of a layer whose
 * parameters this one shares) belongs to the error being reported: a side of it came in through
 * that application (s->entered, set by the reporter), so the parameter's sizes set there are in
 * the clash.  A batch size the loss's targets brought is not. */
static bool note_applies(const ShapeSolver *s, const Origin *o) {
    for (int k = 0; k < 2; k++)
        if (s->entered[k] && span_equal(s->origins[s->entered[k]].call, o->also)) return true;
    return false;
}

/* Report an error of constraint `why` whose two sides come from origins side_a and side_b. */
void error_at(ShapeSolver *s, OriginId why, OriginId side_a, OriginId side_b, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->errors++;
    const Origin *o = &s->origins[why];
    s->error_call = o->call;
    if (o->cycled) diag_drop_next();
    /* The same constraint of a function body may fail in several applications: it is one
     * error when both sides come from the same places (the body's own literals), and one per
     * application when they differ (the arguments). */
    Span sa = s->origins[side_a].span, sb = s->origins[side_b].span;
    bool in_library = o->call.file && span_in_stdlib(o->span) && !span_in_stdlib(o->call);
    /* An error reported at the user's application of a library function: sides inside the
     * library do not tell two errors apart (attention's three projections of one x fail alike,
     * one error at the call) */
    if (in_library && span_in_stdlib(sa)) sa = (Span){0, 0, 0};
    if (in_library && span_in_stdlib(sb)) sb = (Span){0, 0, 0};
    uint64_t sides = ((uint64_t)sa.start << 32 | sa.end) * 31 + ((uint64_t)sb.start << 32 | sb.end) +
                     ((uint64_t)sa.file << 56) + ((uint64_t)sb.file << 48);
    diag_dedupe_salt(sides);
    const char *fn = o->call_name ? o->call_name : "a function";
    if (in_library) {
        /* One error for one mistake: an argument that fails several of the library's operations
         * (ids given to accuracy fail its max and its subtraction) is reported at the first. */
        uint64_t call = span_key(o->call);
        bool call_seen = clash_reported(s, call ^ 0x5bd1e9955bd1e995ull);
        /* Likewise a later error of the application with a side of the user's that an earlier
         * error met against the library alone, which makes that side the mistake: the same
         * argument met again (ids against accuracy's max, then against the logits in its
         * subtraction).  An error between two of the user's places (a cache against the heads
         * given to the block) does not say which is the mistake, and marks neither. */
        bool side_seen =
            (sa.file && clash_seen(s, call ^ span_key(sa))) || (sb.file && clash_seen(s, call ^ span_key(sb)));
        /* Nor is an error between two of the library's own places, after one at the same
         * application: a consequence of that one (a cached attention step given three positions
         * fails its bias's sum once the positions were refused). */
        if ((call_seen && sides == 0) || side_seen || clash_reported(s, call ^ sides)) diag_drop_next();
        else if (!sa.file != !sb.file) clash_reported(s, call ^ span_key(sa.file ? sa : sb));
        /* Inside a library function: the user's call is where to look first.  The library
         * function is the one the user's code applied last on the way in: the innermost
         * application written in the user's file (`net a` inside the user's `loss_of`), which
         * is not the outermost one the error is reported at when the user's own functions
         * stand between. */
        const CallFrame *lib = o->calls;
        while (lib && span_in_stdlib(lib->call)) lib = lib->outer;
        const char *lib_fn = lib && lib->name ? lib->name : fn;
        diag_error(o->call, "in this application of '%s': %s: %s", fn, o->what, msg);
        if (lib && !span_equal(lib->call, o->call)) diag_note(lib->call, "in this application of '%s'", lib_fn);
        diag_note(o->span, "the operation in the standard library's '%s' that fails", lib_fn);
        if (o->also_text && note_applies(s, o)) diag_note(o->also, "%s", o->also_text);
        return;
    }
    /* One error for one conflict: an operation whose slots fail alike (the same sizes from the
     * same places, `a =+ b * a ~logic:"i; i => i"`: operand 2 and the result are both a) is
     * reported at the first slot. */
    uint64_t op = span_key(o->span), key = op ^ sides ^ 0x9e3779b97f4a7c15ull;
    for (const char *c = msg; *c; c++) key = (key ^ (unsigned char)*c) * 1099511628211ull;
    /* Nor twice in mirror image: the same two places met the other way round by the same slots
     * of an operation (`a +* "i, j; j, i => i, i" a`: size 2 against 3, then 3 against 2; a
     * transpose added to itself clashes in its input and its output axes, two errors). */
    uint64_t ka = span_key(sa), kb = span_key(sb);
    uint64_t pair = op * 0xff51afd7ed558ccdull ^ (ka < kb ? ka * 31 + kb : kb * 31 + ka);
    for (const char *c = o->what; *c; c++) pair = (pair ^ (unsigned char)*c) * 1099511628211ull; /* the same slots */
    bool mirrored = sa.file && sb.file && (sa.start != sb.start || sa.end != sb.end) && clash_seen(s, pair);
    if (sa.file && sb.file) clash_reported(s, pair);
    if (clash_reported(s, key) || mirrored) diag_drop_next();
    diag_error(o->span, "%s: %s", o->what, msg);
    if (o->call.file) diag_note(o->call, "in this application of '%s'", fn);
    if (o->also_text && note_applies(s, o)) diag_note(o->also, "%s", o->also_text);
    if (!o->product_meant && strncmp(o->what, "'*' (compose: the left operand's input axes", 43) == 0)
        diag_note(o->span, "'*' is the matrix product; the product of each cell with its match is '*.'");
}

/* ---- Where a size entered an application ------------------------------------------------ */

/* An error inside a library application reads as the library's fault.  When one side's size came
 * in from outside that application (a loss whose targets sized the network's result through the
 * loss's equality), a note says through which constraint: the first one on the chain of variables
 * from the operation's slot to the size that lies outside the application and relates to it
 * (relates_to_application).  Chains of solved variables are read back (Binding); a bound a
 * variable keeps (its least upper bound) and the constraints derived from it carry where the
 * bound entered (Constraint.entered).  The same chains, in an application of any function, tell
 * whether a shared parameter's earlier application is in the clash (note_applies). */
static bool in_library_application(const ShapeSolver *s, OriginId why) {
    const Origin *o = &s->origins[why];
    return o->call.file && span_in_stdlib(o->span) && !span_in_stdlib(o->call);
}

static bool in_application(const ShapeSolver *s, OriginId why) { return s->origins[why].call.file != 0; }

/* Whether constraint `by` lies outside the application constraint `why` is in. */
static bool outside_application(const ShapeSolver *s, OriginId by, OriginId why) {
    return by && !is_fallback(s, by) && s->origins[by].span.file && !span_equal(s->origins[by].call, s->origins[why].call);
}

/* Whether constraint `by`, outside why's application, relates to that application as what it
 * can say a size came through: the application or operation that uses its result, written
 * around it (`cross_entropy (net x) y` around `net x`), or another application sharing its
 * parameters (the shared-parameter note points from one to the other).  A chain of bindings is
 * not the way a size travelled (union-find binds whichever variable it meets: an `one_hot`'s
 * constraint can be what bound the network's result), so a constraint that is neither, though
 * on the chain, says nothing true and is passed over. */
static bool relates_to_application(const ShapeSolver *s, OriginId by, OriginId why) {
    const Origin *g = &s->origins[by], *o = &s->origins[why];
    Span place = g->call.file ? g->call : g->span;
    bool around = place.file == o->call.file && place.start <= o->call.start && place.end >= o->call.end &&
                  !span_equal(place, o->call);
    bool shared = (o->also_text && span_equal(g->call, o->also)) || (g->also_text && span_equal(g->also, o->call));
    return around || shared;
}

/* Where `written` (a slot of `why`) entered why's application: the first constraint on its chain
 * of variables outside the application that relates to it (above), or else `known` (what the
 * constraint being taken knew). */
static OriginId dim_entered_at(const ShapeSolver *s, Dim written, OriginId why, OriginId known) {
    if (!in_application(s, why)) return 0;
    for (Dim d = written; d.var && s->dvars[d.var].solved; d = s->dvars[d.var].bound.dim) {
        OriginId by = s->dvars[d.var].bound.why;
        if (outside_application(s, by, why) && relates_to_application(s, by, why)) return by;
    }
    return known;
}

static OriginId row_entered_at(const ShapeSolver *s, Row written, OriginId why, OriginId known) {
    if (!in_application(s, why)) return 0;
    for (uint32_t v = written.var; v && s->rvars[v].solved; v = s->rvars[v].bound.row.var) {
        OriginId by = s->rvars[v].bound.why;
        if (outside_application(s, by, why) && relates_to_application(s, by, why)) return by;
    }
    return known;
}

/* The note of a size that entered a library application from outside it. */
static void note_entry(ShapeSolver *s, OriginId by, OriginId why, const char *size) {
    if (!by) return;
    const Origin *g = &s->origins[by], *o = &s->origins[why];
    const char *fn = o->call_name ? o->call_name : "the function";
    /* Another application of the same function that reads a parameter this one read first
     * (its constraints carry the shared-parameter note pointing here): the size came through
     * that parameter, set there.  The other way round, the shared-parameter note of this
     * application already points there. */
    bool same = g->call_name && strcmp(g->call_name, fn) == 0 && g->call.file;
    if (same && g->also_text && span_equal(g->also, o->call)) {
        diag_note(g->call, "size %s reached this application through this other application of '%s': a function "
                  "applied twice shares its parameters, and this one set their sizes", size, fn);
        return;
    }
    if (same && o->also_text && span_equal(o->also, g->call)) return;
    if (!in_library_application(s, why)) return;
    if (in_library_application(s, by))
        diag_note(g->call, "size %s reached '%s' through this %sapplication of '%s'", size, fn, same ? "other " : "",
                  g->call_name ? g->call_name : "a function");
    else
        diag_note(g->call.file ? g->call : g->span, "size %s reached '%s' through: %s", size, fn, g->what);
}

static void report_dim_clash(ShapeSolver *s, bool equality, Dim a, Dim b, Dim written_a, Dim written_b,
                             OriginId why) {
    const char *as = dim_to_string(s, a), *bs = dim_to_string(s, b);
    /* The sides' entries, for error_at's shared-parameter note and the notes below; the row's
     * are restored after (the rest of the row's dims are still to be taken). */
    OriginId rows_entered[2] = {s->entered[0], s->entered[1]};
    s->entered[0] = dim_entered_at(s, written_a, why, rows_entered[0]);
    s->entered[1] = dim_entered_at(s, written_b, why, rows_entered[1]);
    if (a.size == b.size && a.basis != b.basis)
        error_at(s, why, a.origin, b.origin, "basis clash: an axis %s cannot meet an axis %s", as, bs);
    else if (equality)
        error_at(s, why, a.origin, b.origin, "size %s does not match size %s", as, bs);
    else
        error_at(s, why, a.origin, b.origin, "size %s cannot broadcast to size %s", as, bs);
    note_origin(s, a.origin, "size %s comes from", as);
    note_origin(s, b.origin, "size %s comes from", bs);
    note_entry(s, s->entered[0], why, as);
    note_entry(s, s->entered[1], why, bs);
    s->entered[0] = rows_entered[0];
    s->entered[1] = rows_entered[1];
    if (s->origins[why].sizes_also_text) diag_note(s->origins[why].sizes_also, "%s", s->origins[why].sizes_also_text);
    /* NumPy would broadcast a size 1 here; a size 1 written in a shape is a size (§3.5.2) */
    Dim one = a.size == 1 ? a : b;
    if (!equality && (a.size == 1) != (b.size == 1) && one.basis == BASIS_DEFAULT && one.origin &&
        !is_fallback(s, one.origin) && !s->origins[one.origin].given)
        diag_note(s->origins[one.origin].span, "an axis of size 1 is a size, not a broadcast: a broadcastable unit axis "
                  "is written (1 : _) (docs/language.md §3.5.2)");
}

/* ---- The queue ----------------------------------------------------------------------------- */

void shape_set_contracting(ShapeSolver *s, bool on) { s->contracting = on && !s->in_code; }

void shape_code_constraints(ShapeSolver *s, bool on) {
    s->in_code = on;
    if (on) s->contracting = false;
}

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

/* A constraint of two dims, with where its sides entered why's application when the solver
 * derives it from one that knew (0: the constraint is written, or nothing knew). */
static void derive_dim(ShapeSolver *s, ConstraintKind kind, Dim d1, Dim d2, OriginId why, OriginId entered1,
                       OriginId entered2) {
    enqueue(s, (Constraint){.kind = kind, .d1 = d1, .d2 = d2, .why = why, .entered = {entered1, entered2}});
}
void shape_dim_eq(ShapeSolver *s, Dim a, Dim b, OriginId why) { derive_dim(s, C_DIM_EQ, a, b, why, 0, 0); }
void shape_dim_le(ShapeSolver *s, Dim sub, Dim super, OriginId why) { derive_dim(s, C_DIM_LE, sub, super, why, 0, 0); }
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

bool dims_equal(Dim a, Dim b) {
    return a.var ? a.var == b.var : (b.var == 0 && a.size == b.size && a.basis == b.basis && a.runtime == b.runtime);
}

/* Ground equality is identity of size and basis (seed 000): the claim-free unit 1_∅ is not
 * 1_default nor 1_mono.  (Letting 1_∅ equal any unit would make a variable keep whichever unit
 * reached it first, so results would depend on constraint order.) */
bool ground_eq(Dim a, Dim b) { return a.size == b.size && a.basis == b.basis && a.runtime == b.runtime; }

bool ground_le(Dim sub, Dim super) { return dim_is_unit(sub) || ground_eq(sub, super); }

static void now_claimful(ShapeSolver *s, Dim d);

/* Bind variable v to value; everything v kept goes back on the queue against the value. */
void solve_dim_var(ShapeSolver *s, uint32_t v, Dim value, OriginId why) {
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
    if (info->has_lub) derive_dim(s, C_DIM_LE, value, info->lub, info->lub_why, 0, info->lub_entered);
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

static void dim_eq(ShapeSolver *s, Dim written_a, Dim written_b, OriginId why) {
    Dim a = shape_resolve_dim(s, written_a), b = shape_resolve_dim(s, written_b);
    if (a.var && b.var) {
        if (a.var != b.var) solve_dim_var(s, a.var, b, why);
    } else if (a.var) {
        solve_dim_var(s, a.var, b, why);
    } else if (b.var) {
        solve_dim_var(s, b.var, a, why);
    } else if (!ground_eq(a, b) && !bind_runtime(s, a, b)) {
        report_dim_clash(s, true, a, b, written_a, written_b, why);
    }
}

/* A new least upper bound `bound` for unsolved variable v (bound is a non-unit atom). */
static void dim_upper_bound(ShapeSolver *s, uint32_t v, Dim bound, OriginId why, OriginId entered) {
    DimVarInfo *info = &s->dvars[v];
    if (dim_var_claimful(info)) { /* v cannot be the unit, so it must be the bound itself */
        derive_dim(s, C_DIM_EQ, (Dim){.var = v, .origin = bound.origin}, bound, why, 0, entered);
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
    info->lub_entered = entered;
    /* Everything below v is below the bound too. */
    for (uint32_t i = 0; i < info->edges.count; i++) {
        Constraint e = info->edges.items[i];
        if (shape_resolve_dim(s, e.d2).var == v) derive_dim(s, C_DIM_LE, e.d1, bound, why, 0, entered);
    }
}

static void dim_le(ShapeSolver *s, Dim written_sub, Dim written_super, OriginId why) {
    Dim sub = shape_resolve_dim(s, written_sub), super = shape_resolve_dim(s, written_super);
    if (dim_is_unit(sub)) { /* the bottom is below everything */
        /* Remembered: if nothing else sizes `super`, this unit is what bounds it (seed 000: a
         * constant's claim-free unit bounds a parameter scaled by it), not closing's fallback. */
        if (super.var && !s->dvars[super.var].unit_below) s->dvars[super.var].unit_below = sub.origin ? sub.origin : why;
        return;
    }
    if (sub.var == 0 && super.var == 0) {
        if (!ground_le(sub, super) && !bind_runtime(s, sub, super)) report_dim_clash(s, false, sub, super, written_sub, written_super, why);
        return;
    }
    if (sub.var == 0) { /* a lower bound at an atom solves */
        solve_dim_var(s, super.var, sub, why);
        return;
    }
    if (super.var == 0) {
        if (dim_is_unit(super)) solve_dim_var(s, sub.var, super, why);
        else dim_upper_bound(s, sub.var, super, why, dim_entered_at(s, written_super, why, s->entered[1]));
        return;
    }
    if (sub.var == super.var) return;
    Constraint c = {.kind = C_DIM_LE, .d1 = sub, .d2 = super, .why = why};
    list_push(s, &s->dvars[sub.var].edges, c);
    list_push(s, &s->dvars[super.var].edges, c);
    if (s->dvars[super.var].has_lub)
        derive_dim(s, C_DIM_LE, sub, s->dvars[super.var].lub, why, 0, s->dvars[super.var].lub_entered);
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
        derive_dim(s, C_DIM_EQ, d, info->lub, info->lub_why, 0, info->lub_entered);
        return;
    }
    for (uint32_t i = 0; i < info->edges.count; i++) {
        Constraint e = info->edges.items[i];
        if (shape_resolve_dim(s, e.d1).var == d.var) shape_dim_eq(s, e.d1, e.d2, e.why);
    }
}

/* ---- Rows ---------------------------------------------------------------------------------- */

/* "axes [16, 32] come from: …" for row r, then a note for each axis whose size was written
 * somewhere else than the row (an embedding's width after the ids' positions), each place once. */
static void note_row_origin(ShapeSolver *s, Row r, const char *text) {
    note_origin(s, r.origin, "axes %s come from", text);
    Span row_span = s->origins[r.origin].span;
    for (uint32_t i = 0; i < r.count; i++) {
        OriginId o = r.dims[i].origin;
        if (!o || is_fallback(s, o) || r.dims[i].var) continue;
        Span at = s->origins[o].span;
        bool said = at.file == row_span.file && at.start >= row_span.start && at.end <= row_span.end; /* within */
        for (uint32_t j = 0; j < i && !said; j++) {
            Span before = s->origins[r.dims[j].origin].span;
            said = !r.dims[j].var && r.dims[j].origin && span_equal(at, before);
        }
        if (!said) note_origin(s, o, "of them, size %s (axis %u) comes from", dim_to_string(s, r.dims[i]), i + 1);
    }
}

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
    note_row_origin(s, small, ss);
    note_row_origin(s, big, bs);
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

void solve_row_var(ShapeSolver *s, uint32_t v, Row value, OriginId why) {
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

/* The dims of resolved row `r` as its constraint wrote them, where they sit at the same places
 * (the written row was closed, or its variable is unsolved): the dims dim_eq and dim_le take, so
 * that a clash can follow a written variable to where its size came from (report_dim_clash). */
static Dim *written_slots(const ShapeSolver *s, Row resolved, Row written) {
    /* A bare variable solved to a row: the row it was first solved to is as written, one step on
     * (w's input axes <ρ> that a template grew to [d]·<r>, d sized by another application). */
    while (written.count == 0 && written.var && s->rvars[written.var].solved) written = s->rvars[written.var].bound.row;
    bool aligned = (!written.var || !s->rvars[written.var].solved) && written.count == resolved.count &&
                   written.lead == resolved.lead;
    return aligned ? written.dims : resolved.dims;
}

static void row_eq(ShapeSolver *s, Row a_written, Row b_written, OriginId why, bool may_merge) {
    Row a = shape_resolve_row(s, a_written), b = shape_resolve_row(s, b_written);
    if (!a.var && b.var) {
        Row t = a;
        a = b;
        b = t;
        t = a_written;
        a_written = b_written;
        b_written = t;
        OriginId e = s->entered[0];
        s->entered[0] = s->entered[1];
        s->entered[1] = e;
    }
    const Dim *a_at = written_slots(s, a, a_written), *b_at = written_slots(s, b, b_written);
    if (!a.var) { /* both closed: flat sequences of the same length */
        if (a.count != b.count) {
            report_rank(s, a.count < b.count ? a : b, a.count < b.count ? b : a, 0, why, true);
            return;
        }
        for (uint32_t i = 0; i < a.count; i++) dim_eq(s, a_at[i], b_at[i], why);
        return;
    }
    uint32_t al = a.lead, at = a.count - a.lead;
    if (!b.var) { /* a open, b closed: the flanks take b's ends, the variable the interior */
        if (b.count < a.count) {
            report_rank(s, b, a, a.count, why, true);
            return;
        }
        for (uint32_t i = 0; i < al; i++) dim_eq(s, a_at[i], b_at[i], why);
        for (uint32_t i = 0; i < at; i++) dim_eq(s, a_at[a.count - 1 - i], b_at[b.count - 1 - i], why);
        /* The residue belongs to the open row; say so in messages about it. */
        solve_row_var(s, a.var, sub_row(s, b, al, b.count - at, b.origin), why);
        return;
    }
    uint32_t bl = b.lead, bt = b.count - b.lead;
    uint32_t ml = al < bl ? al : bl, mt = at < bt ? at : bt;
    for (uint32_t i = 0; i < ml; i++) dim_eq(s, a_at[i], b_at[i], why);
    for (uint32_t i = 0; i < mt; i++) dim_eq(s, a_at[a.count - 1 - i], b_at[b.count - 1 - i], why);
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
                    .r2 = bound, .why = why, .entered = {s->entered[0], s->entered[1]}};
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
    const Dim *sub_at = written_slots(s, sub, sub_written);
    /* A bound kept for the sub row's variable holds the super row's dims as written too. */
    Row super_slots = super;
    super_slots.dims = written_slots(s, super, super_written);
    const Dim *super_at = super_slots.dims;
    uint32_t sl = sub.lead, st = sub.count - sl;
    if (!super.var) {
        /* A closed super-row is a flat sequence: the sub-row's flanks take its two ends and
         * what is left in the middle is the interior residue. */
        if (super.count < sub.count) {
            report_rank(s, sub, super, sub.count, why, false);
            return;
        }
        for (uint32_t i = 0; i < sl; i++) dim_le(s, sub_at[i], super_at[i], why);
        for (uint32_t i = 0; i < st; i++)
            dim_le(s, sub_at[sub.count - 1 - i], super_at[super.count - 1 - i], why);
        if (sub.var)
            row_upper_bound(s, sub.var, sub_row(s, super_slots, sl, super.count - st, super.origin), sub, why);
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
            for (uint32_t i = 0; i < ml; i++) dim_le(s, sub_at[i], super_at[i], why);
            for (uint32_t i = 0; i < mt; i++)
                dim_le(s, sub_at[sub.count - 1 - i], super_at[super.count - 1 - i], why);
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
        enqueue(s, (Constraint){.kind = C_ROW_LE, .r1 = sub, .r2 = super, .why = why, .may_grow = true,
                                .entered = {s->entered[0], s->entered[1]}});
        return;
    }
    for (uint32_t i = 0; i < sl; i++) dim_le(s, sub_at[i], super_at[i], why);
    for (uint32_t i = 0; i < st; i++)
        dim_le(s, sub_at[sub.count - 1 - i], super_at[super.count - 1 - i], why);
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
    Row interior = shape_row(s, dims_at(super_slots, sl), pl - sl, super.var, dims_at(super_slots, pl), pt - st,
                             super.origin);
    row_upper_bound(s, sub.var, interior, sub, why);
}

/* ---- The fixpoint -------------------------------------------------------------------------- */

static void process(ShapeSolver *s, Constraint c) {
    s->choosing = c.closing;
    s->entered[0] = c.entered[0];
    s->entered[1] = c.entered[1];
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
        s->entered[0] = row_entered_at(s, c.r1, c.why, c.entered[0]);
        s->entered[1] = row_entered_at(s, c.r2, c.why, c.entered[1]);
        if (c.kind == C_ROW_EQ) row_eq(s, c.r1, c.r2, c.why, c.may_grow);
        else row_le(s, c.r1, c.r2, c.why, c.may_grow);
        break;
    }
    s->entered[0] = s->entered[1] = 0;
}

/* The variable of an open-open equality that is bare on one side (`<ρ> = [x]·<σ>`), and the
 * other side in *row; 0 when neither side is a bare variable. */
static uint32_t bare_side(ShapeSolver *s, const Constraint *c, Row *row) {
    Row a = shape_resolve_row(s, c->r1), b = shape_resolve_row(s, c->r2);
    if (!a.var || !b.var || a.var == b.var) return 0;
    if (a.count == 0) return *row = b, a.var;
    if (b.count == 0) return *row = a, b.var;
    return 0;
}

/* An equality with a bare variable on one side: the variable, its place in the pending list,
 * and the other side. */
typedef struct BareEquality {
    uint32_t var, index;
    Row row;
} BareEquality;

/* By variable, then by leading axes. */
static int by_variable(const void *a, const void *b) {
    const BareEquality *x = a, *y = b;
    if (x->var != y->var) return x->var < y->var ? -1 : 1;
    if (x->row.lead != y->row.lead) return x->row.lead < y->row.lead ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static uint32_t trailing(Row r) { return r.count - r.lead; }

/* The order a held equality is taken in (take_row_equalities): still open before closed, then
 * by the leading axes of its row (the side that is not a bare variable), fewest first. */
static uint32_t held_key(ShapeSolver *s, const Constraint *c) {
    Row a = shape_resolve_row(s, c->r1), b = shape_resolve_row(s, c->r2);
    Row row = a.var && a.count == 0 ? b : a;
    return (a.var && b.var ? 0 : 1u << 31) | (row.lead < (1u << 30) ? row.lead : (1u << 30));
}

typedef struct HeldOrder {
    uint32_t key, index;
} HeldOrder;

static int by_held_key(const void *a, const void *b) {
    const HeldOrder *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
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
    ConstraintList pending = s->row_eqs, closed = {0}, held = {0}, was_held = {0};
    s->row_eqs = (ConstraintList){0};
    /* A variable equated with two open rows whose flanks cross takes the first as its value, and
     * the second waits as a crossed merge (row_eq); if a closed row then empties the second's
     * variable, the axis it had in front is the first's trailing one, and the variable keeps the
     * first row's marker, whichever came first.  So such equalities are held back once, until
     * this round's closed rows have been applied, and then taken in an order of their own
     * (held_key), whatever the order they came in.  Equalities between two bare variables are
     * taken first, so that a variable passed through another (j = k ++ "... => ...") is one
     * variable when the crossings are looked for. */
    bool *taken = pending.count ? arena_alloc(s->arena, pending.count * 2 * sizeof *taken) : NULL;
    bool *hold = taken + pending.count;
    for (uint32_t i = 0; i < pending.count; i++) {
        Row a = shape_resolve_row(s, pending.items[i].r1), b = shape_resolve_row(s, pending.items[i].r2);
        taken[i] = !pending.items[i].held && a.var && b.var && a.count == 0 && b.count == 0;
        if (taken[i]) process(s, pending.items[i]);
    }
    /* The candidates (a bare variable on one side, not held before), grouped by that variable:
     * within a group, each one crossed with another is held.  Sorting keeps this n log n on the
     * thousands of equalities of a large model; groups are small. */
    BareEquality *cands = pending.count ? arena_alloc(s->arena, pending.count * sizeof *cands) : NULL;
    uint32_t cand_count = 0;
    for (uint32_t i = 0; i < pending.count; i++) {
        hold[i] = false;
        Row r;
        uint32_t v = pending.items[i].held || taken[i] ? 0 : bare_side(s, &pending.items[i], &r);
        if (v) cands[cand_count++] = (BareEquality){v, i, r};
    }
    if (cand_count > 1) qsort(cands, cand_count, sizeof *cands, by_variable);
    for (uint32_t g = 0, end; g < cand_count; g = end) {
        for (end = g + 1; end < cand_count && cands[end].var == cands[g].var;) end++;
        /* Two open rows have crossed flanks when one has more leading axes and the other more
         * trailing ones (`[x]·<σ>` and `<ρ>·[y]`), so that equating both with one variable makes
         * it depend on which came first whether x and y are one axis or two.  Ordered by leading
         * axes, a row is crossed with another when one with fewer leading axes has more trailing
         * ones, or one with more leading axes fewer. */
        uint32_t most = 0, fewest = UINT32_MAX; /* of the ones with fewer, and with more, leading axes */
        for (uint32_t i = g, k; i < end; i = k) {
            for (k = i; k < end && cands[k].row.lead == cands[i].row.lead; k++)
                hold[cands[k].index] |= most > trailing(cands[k].row);
            for (uint32_t j = i; j < k; j++) most = trailing(cands[j].row) > most ? trailing(cands[j].row) : most;
        }
        for (uint32_t i = end, k; i > g; i = k) {
            for (k = i; k > g && cands[k - 1].row.lead == cands[i - 1].row.lead; k--)
                hold[cands[k - 1].index] |= fewest < trailing(cands[k - 1].row);
            for (uint32_t j = k; j < i; j++) fewest = trailing(cands[j].row) < fewest ? trailing(cands[j].row) : fewest;
        }
    }
    for (uint32_t i = 0; i < pending.count; i++) {
        if (taken[i]) continue;
        Row a = shape_resolve_row(s, pending.items[i].r1), b = shape_resolve_row(s, pending.items[i].r2);
        if (hold[i]) {
            pending.items[i].held = true; /* once: taken in the next round */
            list_push(s, &held, pending.items[i]);
        } else if (pending.items[i].held) {
            list_push(s, &was_held, pending.items[i]);
        } else if (a.var && b.var) {
            process(s, pending.items[i]);
        } else {
            list_push(s, &closed, pending.items[i]);
        }
    }
    /* The ones held in the round before: the still-open ones (crossed among themselves) before
     * this round's closed rows, the variable taking the one with the fewest leading axes first (a
     * trailing flank: NumPy's alignment); those closed meanwhile after them, fewest leading axes
     * (the marker in front) first.  Keys are taken before any is processed; ties keep the
     * arrival order. */
    HeldOrder *order = was_held.count ? arena_alloc(s->arena, was_held.count * sizeof *order) : NULL;
    for (uint32_t i = 0; i < was_held.count; i++) order[i] = (HeldOrder){held_key(s, &was_held.items[i]), i};
    if (was_held.count > 1) qsort(order, was_held.count, sizeof *order, by_held_key);
    uint32_t open_held = 0;
    while (open_held < was_held.count && !(order[open_held].key >> 31)) open_held++;
    for (uint32_t i = 0; i < open_held; i++) process(s, was_held.items[order[i].index]);
    for (uint32_t i = 0; i < closed.count; i++) process(s, closed.items[i]);
    for (uint32_t i = open_held; i < was_held.count; i++) process(s, was_held.items[order[i].index]);
    for (uint32_t i = 0; i < held.count; i++) list_push(s, &s->row_eqs, held.items[i]);
}

/* A crossing (row_le) as its terms read now; true while it still waits, that is while neither
 * its super row's variable nor its sub row's has been solved since it was set aside. */
bool crossing_waits(ShapeSolver *s, const Constraint *c, Row *sub, Row *super) {
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
