/* shape_close.c — closing (shape_close, seed 000's closing policy; docs/inference.md §4): what
 * the fixpoint leaves open gets its least value.  In order, at each fixpoint of closing: a
 * crossing's row variable gets the fewest axes that let its axes agree (close_crossings); the
 * rules kept out of the solver's race are settled — cells constraints (seed 004's Total_elems,
 * settle_products), slicing's front equalities, windows (Conv_input: a convolution's or a
 * pool's affine axes, settle_windows) and concatenations (an axis the sum of its pieces,
 * settle_concats); then the leaves commit: every open variable closes up to the meet of its
 * upper bounds, or to 1 or the empty row without one (close_leaves), and an interior shape left
 * with a hole is an error naming it.  Run-time sizes `?` become classes, each one symbol.
 *
 * Requires: shape.c's solver state and fixpoint (shape_internal.h); shape_report.c verifies
 * the closed solution. */
#include "infer/shape_internal.h"

#include <stdlib.h>
#include <string.h>

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
 * edge, each the meet of the bounds' axes there (equal axes stay, different ones meet at 1_∅,
 * made at `unit`); the row is made at `origin`. */
static Row meet_rows(ShapeSolver *s, Row *bounds, uint32_t n, OriginId origin, OriginId unit) {
    uint32_t m = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = bounds[i].var ? bounds[i].count - bounds[i].lead : bounds[i].count;
        if (t < m) m = t;
    }
    Dim *dims = arena_alloc(s->arena, (m ? m : 1) * sizeof *dims);
    for (uint32_t j = 0; j < m; j++) {
        Dim d = bounds[0].dims[bounds[0].count - m + j];
        for (uint32_t i = 1; i < n; i++)
            if (!dims_equal(d, bounds[i].dims[bounds[i].count - m + j])) d = dim_unit(unit);
        dims[j] = d;
    }
    return shape_closed_row(s, dims, m, origin);
}

static const char *row_kind_field(int k) { return k == ROW_BATCH ? "b" : k == ROW_INPUT ? "i" : "o"; }

/* A parameter that a standard library function made in the user's application of it: the
 * error is reported at that application, with the parameter as a note, since the user can pin
 * nothing inside the library (the tensor given to the layer lacks the axes it acts on).
 * Whether it was; `problem` is the error's text. */
static bool report_library_param(ShapeSolver *s, Registered *r, const char *problem) {
    const Origin *o = &s->origins[r->decl];
    if (!span_in_stdlib(o->span) || !o->call.file || span_in_stdlib(o->call)) return false;
    const char *fn = o->call_name ? o->call_name : "a function";
    diag_error(o->call, "in this application of '%s': %s", fn, problem);
    diag_note(o->span, "the parameter, made by the standard library's '%s'", fn);
    diag_note(o->call, "its sizes come from the tensors given to the layer: one of them has no axes where the layer "
              "reads its features (docs/stdlib.md says which axes each layer acts on)");
    return true;
}

/* A parameter made in an application of one of the user's functions, where others made another at
 * the same place (`mk ()` applied twice makes mk.w and mk#2.w): which application made this one. */
static void note_param_application(ShapeSolver *s, const Registered *r) {
    const Origin *o = &s->origins[r->decl];
    if (!o->call.file) return;
    bool twin = false;
    for (uint32_t i = 0; i < s->shape_count && !twin; i++) {
        const Registered *other = &s->shapes[i];
        twin = other != r && other->leaf && other->kind == r->kind && other->decl &&
               span_equal(s->origins[other->decl].span, o->span) && !span_equal(s->origins[other->decl].call, o->call);
    }
    if (twin) diag_note(o->call, "in this application of '%s', which made it", o->call_name ? o->call_name : "a function");
}

static void report_param_hole(ShapeSolver *s, Registered *r, int kind, bool axis, bool partly) {
    if (r->reported & (1u << kind)) return;
    r->reported |= (uint8_t)(1u << kind);
    Span at = s->origins[r->decl].span;
    /* A library layer's parameter left open after an error already reported is that error's
     * consequence (the user cannot pin it anyway): one error, not two. */
    if (s->errors > 0 && span_in_stdlib(at)) return;
    s->errors++;
    const char *problem = axis ? arena_printf(s->arena, "cannot infer the size of an %s axis of parameter '%s'",
                                              row_kind_name(kind), r->name)
                               : arena_printf(s->arena, "cannot infer the %s axes of parameter '%s'", row_kind_name(kind),
                                              r->name);
    if (report_library_param(s, r, problem)) return;
    diag_error(at, "%s: you forgot to specify a hidden dimension", problem);
    note_param_application(s, r);
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
    if (report_library_param(s, r, arena_printf(s->arena, "cannot infer the shape of parameter '%s'", r->name))) return;
    diag_error(at, "cannot infer the shape of parameter '%s': you forgot to specify the hidden dimension(s)", r->name);
    note_param_application(s, r);
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
                /* Named, so that --explain says where the row and its units come from. */
                Span at = s->origins[reg->decl ? reg->decl : r.origin].span;
                OriginId meet = shape_origin(s, at, arena_printf(s->arena, "the meet of its uses' %u bounds", distinct));
                OriginId unit = shape_origin(s, at, "its uses' bounds differ here, and sizes that differ meet at the "
                                                    "claim-free unit");
                value = meet_rows(s, bounds, distinct, meet, unit);
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

static bool close_interiors_but(ShapeSolver *s, const uint8_t *derived, uint8_t from);

/* The free dimension variables that an unsettled concatenation or merged axis derives from its
 * pieces (the concatenated axis, the merged axis): closing waits for the pieces, since closing
 * both at once to 1 would contradict the sum or the product (`(x, y) ++^ "a; i, j => a^j"` with
 * y's j from nothing: j is 1, then the axis is a + 1), CLOSE_LATER, and the pieces that are
 * never guessed, CLOSE_NEVER; marked in a fresh array by variable. */
enum { CLOSE_LATER = 1, CLOSE_NEVER = 2 };
static uint8_t *derived_dims(ShapeSolver *s) {
    uint8_t *derived = arena_alloc(s->arena, (s->dvar_count + 1) * sizeof *derived);
    for (uint32_t i = 0; i < s->concat_count + s->window_count; i++) {
        bool concat = i < s->concat_count;
        const ConcatC *c = concat ? &s->concats[i] : NULL;
        const WindowC *w = concat ? NULL : &s->windows[i - s->concat_count];
        if (concat ? c->settled : (w->settled || !w->w.merge)) continue;
        Dim d = shape_resolve_dim(s, concat ? c->total : w->input);
        if (d.var) derived[d.var] = CLOSE_LATER;
        /* Two or more unknown pieces of one concatenation are never guessed (docs/inference.md
         * §4.7): left open, they are the error "the sizes of this concatenation are not known". */
        uint32_t unknown = 0;
        for (uint32_t j = 0; concat && j < c->count; j++) unknown += shape_resolve_dim(s, c->parts[j]).var != 0;
        for (uint32_t j = 0; concat && unknown > 1 && j < c->count; j++) {
            Dim p = shape_resolve_dim(s, c->parts[j]);
            if (p.var) derived[p.var] = CLOSE_NEVER;
        }
    }
    /* A concatenation with a piece left open is not settled by closing its axis either (the
     * axis of (x, pre) ++^ "…p^r" when pre's r is such a piece): the error stays the first one. */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < s->concat_count; i++) {
            const ConcatC *c = &s->concats[i];
            Dim total = shape_resolve_dim(s, c->total);
            if (c->settled || !total.var || derived[total.var] == CLOSE_NEVER) continue;
            for (uint32_t j = 0; j < c->count && !changed; j++) {
                Dim p = shape_resolve_dim(s, c->parts[j]);
                if (p.var && derived[p.var] == CLOSE_NEVER) derived[total.var] = CLOSE_NEVER, changed = true;
            }
        }
    }
    return derived;
}

/* Commit every variable still free in a registered shape to the bottom of its order: those
 * no concatenation or merged axis derives first; if there were none, the derived axes. */
static bool close_interiors(ShapeSolver *s) {
    uint8_t *derived = derived_dims(s);
    if (close_interiors_but(s, derived, CLOSE_LATER)) return true;
    return close_interiors_but(s, derived, CLOSE_NEVER);
}

/* Close every free dimension of the registered shapes whose mark in `derived` is below `from`. */
static bool close_interiors_but(ShapeSolver *s, const uint8_t *derived, uint8_t from) {
    bool any = false;
    s->choosing = true;
    for (uint32_t i = 0; i < s->shape_count; i++) {
        for (int k = 0; k < ROW_KINDS; k++) {
            Row r = shape_resolve_row(s, s->shapes[i].shape.rows[k]);
            for (uint32_t j = 0; j < r.count; j++) {
                uint32_t v = r.dims[j].var;
                if (!v || s->dvars[v].solved || derived[v] >= from) continue;
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

/* An image too small for a convolution's or a pool's window is often PyTorch's layout, channels
 * first (1, 8, 8 read as 1 row of 8 pixels of 8 channels): a note saying Nn's is channels last. */
static void note_channels_last(ShapeSolver *s, const WindowC *c) {
    static const char *const layers[][2] = {{"conv2d", "h, w, ..c.."}, {"conv1d", "l, ..c.."},
                                            {"max_pool2d", "h, w, ..c.."}, {"avg_pool2d", "h, w, ..c.."}};
    const Origin *o = &s->origins[c->why];
    for (size_t i = 0; o->call_name && i < sizeof layers / sizeof layers[0]; i++)
        if (strcmp(o->call_name, layers[i][0]) == 0 && o->call.file) {
            diag_note(o->call, "'%s' takes its input channels last, ..b.. | %s (PyTorch's layout, channels first, "
                      "puts the channels where the %s belongs)", layers[i][0], layers[i][1],
                      i == 1 ? "length" : "height");
            return;
        }
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
    } else if ((o.var && is_fallback(s, k.origin)) || (k.var && is_fallback(s, o.origin))) {
        /* The one size besides the axis's is closing's guess (`x ++ "(g, c) => g"`: nothing but
         * the guess sizes g): splitting by it would decide the blocks by a default. */
        msg = arena_printf(s->arena, "the merged axis of %u cells needs %s: nothing gives it or %s (set_dim, or a size "
                           "written for another axis of either label)", n.size,
                           o.var ? "its inner size" : "its outer size", o.var ? "its outer size" : "its inner size");
    } else if (o.var) {
        if (n.size % k.size)
            msg = arena_printf(s->arena, "an axis of %u cells does not split into blocks of %u (the inner size)",
                               n.size, k.size);
    } else if (k.var) {
        if (n.size % o.size)
            msg = arena_printf(s->arena, "an axis of %u cells does not split into %u blocks (the outer size)",
                               n.size, o.size);
    } else if (product != n.size && (is_fallback(s, o.origin) || is_fallback(s, k.origin))) {
        /* closing gave a size to a block count or block size nothing else decided */
        bool outer = is_fallback(s, o.origin), inner = is_fallback(s, k.origin);
        msg = arena_printf(s->arena, "the merged axis of %u cells needs %s: nothing gives %s (set_dim, or a size "
                           "written for another axis of %s)", n.size, outer && inner ? "its outer or its inner size"
                           : outer ? "its outer size" : "its inner size", outer && inner ? "either" : "it",
                           outer && inner ? "either label" : "its label");
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

/* Settle what the windows can say now; returns whether a constraint was queued.  A window whose
 * input is known settles its output (or is checked against it).  With `defaults` (closing, before
 * the leaves commit) and nothing settled so: bounded outputs close to their bounds, then one
 * unknown input takes the largest least size its windows need, a padding nothing decided
 * becoming `valid` where that size is the window's own least input (each step for every window
 * first: the order windows were written in does not matter). */
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
                note_channels_last(s, c);
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
    }
    if (!defaults || progress) return progress;
    /* Closing's defaults, in two steps, each for every window before any value is used, so that
     * the order the windows were written in does not matter.  First an output bounded only from
     * above (it broadcasts into N) closes up to N, as closing would close it; here, before
     * closing could give the unsized input the claim-free unit (an even/odd split of an axis
     * that only its halves size). */
    for (uint32_t i = 0; i < s->window_count; i++) {
        WindowC *c = &s->windows[i];
        if (c->settled || c->w.merge || !shape_resolve_dim(s, c->input).var) continue;
        Dim over = shape_resolve_dim(s, c->over);
        DimVarInfo *info = over.var ? &s->dvars[over.var] : NULL;
        if (info && info->has_lub && !info->lub.runtime && !dim_is_unit(info->lub)) {
            shape_dim_eq(s, over, info->lub, info->lub_why);
            progress = true;
        }
    }
    if (progress) return progress;
    /* Then one unsized input, the first a window with a known output and kernel reads: the
     * largest of the least inputs that the windows over it need (the halves of an even/odd
     * split; convolutions of two strides over one leaf).  Each window takes a range of inputs
     * (stride - 1 more cells give no more positions), and the largest least one lies in every
     * range when any size fits them all; when none does, the next round's check of each window
     * against the input says which fails. */
    for (uint32_t i = 0; i < s->window_count; i++) {
        WindowC *c = &s->windows[i];
        if (c->settled || c->w.merge) continue;
        Dim input = shape_resolve_dim(s, c->input), over = shape_resolve_dim(s, c->over);
        Dim kernel = c->w.has_kernel ? shape_resolve_dim(s, c->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
        if (!input.var || over.var || kernel.var) continue;
        uint64_t size = 0;
        WindowC *largest = c;
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t j = 0; j < s->window_count; j++) {
                WindowC *d = &s->windows[j];
                if (d->settled || d->w.merge || !dims_equal(shape_resolve_dim(s, d->input), input)) continue;
                Dim d_over = shape_resolve_dim(s, d->over);
                Dim d_kernel = d->w.has_kernel ? shape_resolve_dim(s, d->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
                if (d_over.var || d_kernel.var) continue;
                WindowPadding pad = d->padding == WINDOW_PAD_INFERRED ? WINDOW_PAD_VALID : d->padding;
                uint64_t need = window_input_size(d->w, d_over.size, d_kernel.size, pad);
                if (pass == 0 && need > size) size = need, largest = d;
                /* Every window whose least input this is takes `valid`, as the one window settled
                 * alone does; the others choose at the check against the input, next round (two
                 * that tie are both valid, whichever was written first). */
                if (pass == 1 && need == size && d->padding == WINDOW_PAD_INFERRED) d->padding = WINDOW_PAD_VALID;
            }
        Dim largest_over = shape_resolve_dim(s, largest->over);
        Dim largest_kernel =
            largest->w.has_kernel ? shape_resolve_dim(s, largest->kernel) : dim_ground(1, BASIS_DEFAULT, 0);
        largest->settled = true;
        if (size > UINT32_MAX) {
            error_at(s, largest->why, largest_over.origin, largest_kernel.origin,
                     "the input of %u %s positions would hold more than %u cells", largest_over.size,
                     padding_word(largest->padding), UINT32_MAX);
            return true;
        }
        OriginId o = shape_origin(s, s->origins[largest->why].span,
                                  arena_printf(s->arena, "the %llu cells that %u positions of a stride %u window cover (%s)",
                                               (unsigned long long)size, largest_over.size, largest->w.stride,
                                               s->origins[largest->why].what));
        shape_dim_eq(s, input, dim_ground((uint32_t)size, BASIS_DEFAULT, o), largest->why);
        return true;
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
