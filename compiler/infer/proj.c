/* proj.c — projection inference for one operation (seed 003, "Contraction Is Emergent").
 *
 * What it does: proj_infer() takes an operation's logic and the closed shapes of its slots and
 * returns the product space and one index map per slot.  It follows the seed's discipline:
 *   1. freshen: every axis of every slot gets its own projection id (slot by slot, axes in
 *      memory order batch, output, input), so no identity is shared with any other operation;
 *   2. re-derive this operation's constraints, and only these, from the closed shapes — the
 *      relations of logic.c's table that elaboration (elab/operators.c) emitted for shape inference (docs/inference.md
 *      §2), or the einsum spec's templates — and read them as projection equations by the six
 *      rules:
 *        (1) d1 = d2              → Eq(d1, d2)
 *        (2) 1_∅ ⊑ d (broadcast)  → Eq(sub, Fix 0): the broadcasting axis is cut loose
 *        (3) d1 ⊑ d2 otherwise    → Eq(d1, d2)
 *        (4) R1 = R2              → align at the outer edges, (1) per pair
 *        (5) Rsub ⊑ Rsuper        → align the sub row's flanks at the outer edges (a closed
 *                                   super row is flat, inference.md §7 item 5), (2)/(3) per
 *                                   pair, Iter for the surplus interior axes
 *        (6) every axis of every slot → Iter (size-one axes need no loop: harmless)
 *      An einsum spec is re-solved locally: its labels and row variables are fresh for this
 *      derivation and bind to the axes they meet; a fixed index pins (Sol), a `@|` slice pins
 *      to its run-time symbol, a stacked element's new axis pins to its position; an affine
 *      axis is no class of its own: its `over` and `kernel` labels get two extra ids and its
 *      index is stride·over + dilation·kernel + offset − padding, read after labelling; a
 *      concatenated axis neither: each label piece gets an extra id (iterated even at size 1)
 *      and the axis reads the active piece's iterator at its offset (lower.c picks the piece);
 *   3. solve in an empty environment: union-find over ids (sizes must agree within a class),
 *      a pin per class (two different pins conflict), an iterate set; then label each class.
 * Iterators are numbered by first appearance scanning slots in order and axes in memory order,
 * so the result is canonical: it does not depend on the order of the equations (the unit test
 * tests/unit/proj_test.c shuffles them).
 *
 * Requires: shapes closed by shape.c (ground; an open row is an internal error); logic.h (the
 * relations of each logic); spec.h. */
#include "infer/proj.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "front/spec.h"

/* Memory order of the rows. */
static const RowKind memory_order[ROW_KINDS] = {ROW_BATCH, ROW_OUTPUT, ROW_INPUT};

uint32_t proj_shape_rank(const Shape *s) {
    return s->rows[0].count + s->rows[1].count + s->rows[2].count;
}

void proj_shape_dims(const Shape *s, uint64_t *dims) {
    uint32_t n = 0;
    for (int k = 0; k < ROW_KINDS; k++) {
        const Row *r = &s->rows[memory_order[k]];
        for (uint32_t j = 0; j < r->count; j++) dims[n++] = dim_extent(r->dims[j]);
    }
}

/* ---- Terms and equations --------------------------------------------------------------------- */

typedef struct Term {
    bool sol;      /* Sol(index) supplied from outside, else Proj(id) */
    uint32_t id;
    ProjIndex index;
} Term;

typedef struct Equation {
    bool iter;     /* Iter(a); else Eq(a, b) */
    Term a, b;
} Equation;

typedef struct Deriver {
    Arena *arena;
    const ProjProblem *p;
    uint32_t *base;      /* first id of each slot */
    uint32_t id_count;
    uint64_t *size;      /* per id */
    bool *unit;          /* per id: the claim-free unit 1_∅ (broadcasts) */
    Equation *eqs;
    uint32_t eq_count, eq_cap;
    bool failed;
    /* spec re-solve: what each label (one axis) and row variable (its axes) met first */
    struct Binding {
        const char *name; /* a label, "..v..", or "... of the KIND rows" */
        uint32_t *ids;
        uint32_t count;
    } *bindings;
    uint32_t binding_count, binding_cap;
    /* affine axes of a spec: the axis, and the two extra ids its `over` and `kernel` labels get */
    struct AffineDef {
        uint32_t axis, over, kernel;
        const SpecAffine *affine;
    } *affines;
    uint32_t affine_count, affine_cap;
    uint32_t next_extra; /* the next id reserved for affine labels */
    int32_t *affine_of;  /* per id: its entry in affines, or -1 */
    /* concatenated axes of a spec: the axis, its pieces, and the extra id of each label piece */
    struct ConcatDef {
        uint32_t axis;
        const SpecAxis *spec;
        uint32_t *ids;
    } *concat_defs;
    uint32_t concat_def_count, concat_def_cap;
    int32_t *concat_of; /* per id: its entry in concat_defs, or -1 */
    int32_t *gather_of; /* per id: the slot whose values a gathered axis reads at, or -1 */
} Deriver;

static Term proj_term(uint32_t id) { return (Term){.id = id}; }
static Term fixed_term(int64_t at) {
    return (Term){.sol = true, .index = {.kind = PIDX_FIXED, .fixed = at}};
}

static void push(Deriver *d, Equation e) {
    ARENA_PUSH(d->arena, d->eqs, d->eq_count, d->eq_cap, e);
}
static void eq(Deriver *d, Term a, Term b) { push(d, (Equation){.a = a, .b = b}); }
static void iter(Deriver *d, uint32_t id) { push(d, (Equation){.iter = true, .a = proj_term(id)}); }

/* Id of axis j of row kind k of slot s. */
static uint32_t axis_id(const Deriver *d, uint32_t slot, RowKind k, uint32_t j) {
    const Shape *sh = &d->p->shapes[slot];
    uint32_t off = d->base[slot];
    for (int m = 0; m < ROW_KINDS && memory_order[m] != k; m++) off += sh->rows[memory_order[m]].count;
    return off + j;
}

static const Row *row_of(const Deriver *d, uint32_t slot, RowKind k) { return &d->p->shapes[slot].rows[k]; }

static void fail(Deriver *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Deriver *d, const char *fmt, ...) {
    if (d->failed) return;
    d->failed = true;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    diag_error(d->p->span, "projection inference for %s: %s", d->p->what, message);
}

/* Rule 4: R1 = R2 (ranks must agree), each row less its first `skip` axes (a pinned axis). */
static void row_eq(Deriver *d, uint32_t s1, RowKind k1, uint32_t skip1, uint32_t s2, RowKind k2, uint32_t skip2) {
    const Row *a = row_of(d, s1, k1), *b = row_of(d, s2, k2);
    if (a->count - skip1 != b->count - skip2) {
        fail(d, "the %s axes disagree in number (%u against %u)", logic_row_names[k1], a->count - skip1,
             b->count - skip2);
        return;
    }
    for (uint32_t j = 0; j < b->count - skip2; j++)
        eq(d, proj_term(axis_id(d, s1, k1, j + skip1)), proj_term(axis_id(d, s2, k2, j + skip2)));
}

/* Rules 2, 3: one aligned pair of an inequality. */
static void dim_le(Deriver *d, uint32_t sub, uint32_t super) {
    if (d->unit[sub]) eq(d, proj_term(sub), fixed_term(0)); /* broadcasting severs */
    else eq(d, proj_term(sub), proj_term(super));
}

/* Rule 5: Rsub ⊑ Rsuper. */
static void row_le(Deriver *d, uint32_t s_sub, RowKind k_sub, uint32_t s_super, RowKind k_super) {
    const Row *sub = row_of(d, s_sub, k_sub), *super = row_of(d, s_super, k_super);
    if (sub->count > super->count) {
        fail(d, "%s axes of an operand outnumber the result's (%u against %u)", logic_row_names[k_sub],
             sub->count, super->count);
        return;
    }
    uint32_t trail = sub->count - sub->lead;
    for (uint32_t j = 0; j < sub->lead; j++)
        dim_le(d, axis_id(d, s_sub, k_sub, j), axis_id(d, s_super, k_super, j));
    for (uint32_t j = 0; j < trail; j++)
        dim_le(d, axis_id(d, s_sub, k_sub, sub->lead + j),
               axis_id(d, s_super, k_super, super->count - trail + j));
    for (uint32_t j = sub->lead; j < super->count - trail; j++) iter(d, axis_id(d, s_super, k_super, j));
}

/* ---- Einsum specs: the local re-solve ---------------------------------------------------------- */

/* A label or row variable meets `count` axes: the first time it binds them, later it equates. */
static void env_bind(Deriver *d, const char *name, const uint32_t *ids, uint32_t count) {
    for (uint32_t i = 0; i < d->binding_count; i++) {
        const struct Binding *b = &d->bindings[i];
        if (strcmp(b->name, name) != 0) continue;
        if (b->count != count) {
            fail(d, "row variable %s covers %u axes in one slot and %u in another", name, b->count, count);
            return;
        }
        for (uint32_t j = 0; j < count; j++) eq(d, proj_term(b->ids[j]), proj_term(ids[j]));
        return;
    }
    uint32_t *copy = arena_alloc(d->arena, (count ? count : 1) * sizeof *copy);
    memcpy(copy, ids, count * sizeof *copy);
    struct Binding b = {name, copy, count};
    ARENA_PUSH(d->arena, d->bindings, d->binding_count, d->binding_cap, b);
}

static void spec_axis(Deriver *d, const SpecAxis *ax, uint32_t id) {
    switch (ax->kind) {
    case SPEC_AXIS_LABEL: env_bind(d, ax->as.label, &id, 1); break;
    case SPEC_AXIS_FIXED:
        if ((uint64_t)ax->as.fixed >= d->size[id])
            fail(d, "fixed index %d is out of range for an axis of size %llu", ax->as.fixed,
                 (unsigned long long)d->size[id]);
        eq(d, proj_term(id), fixed_term(ax->as.fixed));
        break;
    case SPEC_AXIS_PLACEHOLDER: break; /* its own axis: iterated by rule 6 */
    case SPEC_AXIS_GATHER: d->gather_of[id] = (int32_t)ax->as.gather; break; /* read where the data says */
    case SPEC_AXIS_AFFINE: {
        /* The axis is not a loop of its own: its index is derived from the two labels, which
         * get ids of their own (sized by shape inference) and bind like any label. */
        const SpecAffine *a = &ax->as.affine;
        struct AffineDef def = {id, d->next_extra, d->next_extra + 1, a};
        d->next_extra += 2;
        d->size[def.over] = a->over_size;
        d->size[def.kernel] = a->kernel_size;
        d->affine_of[id] = (int32_t)d->affine_count;
        ARENA_PUSH(d->arena, d->affines, d->affine_count, d->affine_cap, def);
        env_bind(d, a->over.name, &def.over, 1);
        if (a->has_kernel) env_bind(d, a->kernel.name, &def.kernel, 1);
        break;
    }
    case SPEC_AXIS_CONCAT: {
        /* Like an affine axis, not a loop of its own: each label piece gets an id (sized by
         * shape inference) and binds like any label; the axis reads the active piece's. */
        uint32_t n = ax->as.concat.count;
        struct ConcatDef def = {id, ax, arena_alloc(d->arena, n * sizeof *def.ids)};
        uint64_t total = 0;
        for (uint32_t j = 0; j < n; j++) {
            const SpecPiece *piece = &ax->as.concat.pieces[j];
            total += piece->inferred_size;
            if (piece->kind != SPEC_PIECE_LABEL) continue;
            def.ids[j] = d->next_extra++;
            d->size[def.ids[j]] = piece->inferred_size;
            env_bind(d, piece->as.label, &def.ids[j], 1);
        }
        if (total != d->size[id])
            fail(d, "the pieces of a concatenated axis add up to %llu, not its size %llu", (unsigned long long)total,
                 (unsigned long long)d->size[id]);
        d->concat_of[id] = (int32_t)d->concat_def_count;
        ARENA_PUSH(d->arena, d->concat_defs, d->concat_def_count, d->concat_def_cap, def);
        break;
    }
    }
}

/* A template row against the closed row of kind k of slot s (an equality). */
static void spec_row(Deriver *d, const SpecRow *row, uint32_t slot, RowKind k) {
    const Row *r = row_of(d, slot, k);
    uint32_t lead = row->leading_count, trail = row->trailing_count;
    bool open = row->row_var.kind != SPEC_ROWVAR_NONE;
    if (open ? r->count < lead + trail : r->count != trail) {
        fail(d, "the spec's %s row does not fit the %u axes found there (it names %u)", logic_row_names[k],
             r->count, lead + trail);
        return;
    }
    for (uint32_t j = 0; j < lead; j++) spec_axis(d, &row->leading[j], axis_id(d, slot, k, j));
    for (uint32_t j = 0; j < trail; j++)
        spec_axis(d, &row->trailing[j], axis_id(d, slot, k, r->count - trail + j));
    if (open) {
        uint32_t middle = r->count - lead - trail;
        uint32_t *ids = arena_alloc(d->arena, (middle ? middle : 1) * sizeof *ids);
        for (uint32_t j = 0; j < middle; j++) ids[j] = axis_id(d, slot, k, lead + j);
        const char *key = row->row_var.kind == SPEC_ROWVAR_NAMED
                              ? arena_printf(d->arena, "..%s..", row->row_var.name)
                              : arena_printf(d->arena, "... of the %s rows", logic_row_names[k]);
        env_bind(d, key, ids, middle);
    }
}

static void spec_slot(Deriver *d, const SpecSlot *slot, uint32_t s) {
    for (int k = 0; k < ROW_KINDS; k++) spec_row(d, &slot->rows[k], s, (RowKind)k);
}

/* ---- Derivation --------------------------------------------------------------------------------- */

/* One relation of the logic's table (logic.c): ⊑ by rule 5, = by rule 4; a pinned axis (the
 * sliced one, a stack's new one) is read at its Sol and left out of the pairing. */
static void relate(Deriver *d, const LogicPair *r) {
    if (!r->rel->equal) {
        row_le(d, r->sub, r->sub_kind, r->super, r->super_kind);
        return;
    }
    if (r->sub_front) {
        if (row_of(d, r->sub, r->sub_kind)->count == 0) {
            fail(d, "the sliced tensor has no %s axis", logic_row_names[r->sub_kind]);
            return;
        }
        eq(d, proj_term(axis_id(d, r->sub, r->sub_kind, 0)),
           (Term){.sol = true, .index = {.kind = PIDX_SYMBOL, .symbol = d->p->symbol}});
    }
    if (r->super_front) {
        if (row_of(d, r->super, r->super_kind)->count == 0) {
            fail(d, "the stack has no %s axis", logic_row_names[r->super_kind]);
            return;
        }
        eq(d, proj_term(axis_id(d, r->super, r->super_kind, 0)), fixed_term(d->p->stack_index));
    }
    row_eq(d, r->sub, r->sub_kind, r->sub_front, r->super, r->super_kind, r->super_front);
}

static void derive(Deriver *d) {
    const ProjProblem *p = d->p;
    if (p->logic == LOGIC_SPEC)
        for (uint32_t i = 0; i <= p->spec->rhs_count; i++) {
            uint32_t slot;
            const SpecSlot *template = logic_spec_template(p->spec, i, &slot);
            if (slot < p->slot_count) spec_slot(d, template, slot);
        }
    LogicWalk walk = logic_walk(p->logic, p->slot_count, p->stack_row);
    LogicPair pair;
    while (logic_next(&walk, &pair)) relate(d, &pair);
    for (uint32_t id = 0; id < d->id_count; id++) iter(d, id); /* rule 6 */
}

/* ---- Solving: union-find with pins and an iterate set ------------------------------------------- */

typedef struct Solver {
    uint32_t *parent;
    bool *pinned;
    ProjIndex *pin;
    bool *iterate;
} Solver;

static uint32_t find(Solver *s, uint32_t x) {
    while (s->parent[x] != x) {
        s->parent[x] = s->parent[s->parent[x]];
        x = s->parent[x];
    }
    return x;
}

static bool same_index(ProjIndex a, ProjIndex b) {
    if (a.kind != b.kind) return false;
    return a.kind == PIDX_FIXED ? a.fixed == b.fixed : strcmp(a.symbol, b.symbol) == 0;
}

static const char *index_text(Arena *arena, ProjIndex i) {
    return i.kind == PIDX_FIXED ? arena_printf(arena, "position %lld", (long long)i.fixed)
                                : arena_printf(arena, "index '%s'", i.symbol);
}

static void pin_class(Deriver *d, Solver *s, uint32_t root, ProjIndex at) {
    if (s->pinned[root] && !same_index(s->pin[root], at)) {
        fail(d, "one axis would be read at both %s and %s", index_text(d->arena, s->pin[root]),
             index_text(d->arena, at));
        return;
    }
    s->pinned[root] = true;
    s->pin[root] = at;
}

static void solve_equation(Deriver *d, Solver *s, const Equation *e) {
    if (e->iter) {
        if (!e->a.sol) s->iterate[find(s, e->a.id)] = true;
        return;
    }
    if (e->a.sol && e->b.sol) {
        if (!same_index(e->a.index, e->b.index)) fail(d, "two fixed positions disagree");
        return;
    }
    if (e->a.sol || e->b.sol) {
        const Term *pr = e->a.sol ? &e->b : &e->a, *so = e->a.sol ? &e->a : &e->b;
        pin_class(d, s, find(s, pr->id), so->index);
        return;
    }
    uint32_t x = find(s, e->a.id), y = find(s, e->b.id);
    if (x == y) return;
    if (d->size[x] != d->size[y]) {
        fail(d, "two axes that must share a loop have different sizes (%llu and %llu)",
             (unsigned long long)d->size[x], (unsigned long long)d->size[y]);
        return;
    }
    if (y < x) { uint32_t t = x; x = y; y = t; }
    s->parent[y] = x;
    s->iterate[x] |= s->iterate[y];
    if (s->pinned[y]) pin_class(d, s, x, s->pin[y]);
}

static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- Labelling ------------------------------------------------------------------------------------ */

typedef struct Labeller {
    Deriver *d;
    Solver *s;
    Projections *out;
    uint32_t *class_iter;
    uint32_t concat_cap;
    bool *piece; /* per class root: it holds a concatenation piece (iterated even at size 1) */
} Labeller;

/* The index of id's class: its pin, else an iterator when iterated and larger than one (numbered
 * at first appearance), else Fix 0. */
static ProjIndex label(Labeller *l, uint32_t id) {
    uint32_t root = find(l->s, id);
    if (l->s->pinned[root]) return l->s->pin[root];
    if (l->s->iterate[root] && (l->d->size[root] > 1 || l->piece[root])) {
        if (l->class_iter[root] == UINT32_MAX) {
            l->class_iter[root] = l->out->iter_count;
            l->out->iter_size[l->out->iter_count++] = l->d->size[root];
        }
        return (ProjIndex){.kind = PIDX_ITER, .iter = l->class_iter[root]};
    }
    return (ProjIndex){.kind = PIDX_FIXED, .fixed = 0};
}

/* An affine axis: stride·over + offset + dilation·kernel − left padding, each label read by
 * its class; padded when some point falls outside the axis.  (A merged axis's stride is its
 * kernel's size, written into the spec after closing.) */
static ProjIndex label_affine(Labeller *l, const struct AffineDef *def) {
    const SpecAffine *a = def->affine;
    Window w = {(uint32_t)a->stride.as.value, a->has_kernel ? (uint32_t)a->dilation.as.value : 1,
                (uint32_t)a->offset, a->has_kernel,
                a->padding == SPEC_PAD_SAME ? WINDOW_PAD_SAME : WINDOW_PAD_VALID, a->merged};
    ProjIndex ix = {.kind = PIDX_AFFINE};
    ix.fixed = (int64_t)a->offset - (int64_t)window_left_pad(w, a->kernel_size, w.padding);
    int64_t lo = ix.fixed, hi = ix.fixed;
    uint32_t ids[2] = {def->over, def->kernel};
    int64_t coefs[2] = {w.stride, w.dilation};
    for (int t = 0; t < (a->has_kernel ? 2 : 1); t++) {
        ProjIndex part = label(l, ids[t]);
        if (part.kind == PIDX_FIXED) {
            ix.fixed += coefs[t] * part.fixed;
            lo += coefs[t] * part.fixed;
            hi += coefs[t] * part.fixed;
        } else if (part.kind == PIDX_ITER) {
            ix.terms[ix.term_count] = part.iter;
            ix.coef[ix.term_count++] = coefs[t];
            hi += coefs[t] * (int64_t)(l->d->size[ids[t]] - 1);
        } else {
            fail(l->d, "an affine axis cannot be read at a run-time index");
        }
    }
    ix.padded = lo < 0 || hi >= (int64_t)l->d->size[def->axis];
    ix.dense = a->merged && !ix.padded;
    return ix;
}

/* A concatenated axis: a PIDX_CONCAT whose label pieces read their classes' iterators. */
static ProjIndex label_concat(Labeller *l, const struct ConcatDef *def) {
    uint32_t n = def->spec->as.concat.count;
    ProjConcat *c = arena_alloc(l->d->arena, sizeof *c);
    c->id = l->out->concat_count;
    c->count = n;
    c->gap = arena_alloc(l->d->arena, n * sizeof *c->gap);
    c->iter = arena_alloc(l->d->arena, n * sizeof *c->iter);
    c->offset = arena_alloc(l->d->arena, n * sizeof *c->offset);
    int64_t offset = 0;
    for (uint32_t j = 0; j < n; j++) {
        const SpecPiece *piece = &def->spec->as.concat.pieces[j];
        c->offset[j] = offset;
        offset += piece->inferred_size;
        c->gap[j] = piece->kind != SPEC_PIECE_LABEL;
        if (c->gap[j]) continue;
        ProjIndex part = label(l, def->ids[j]);
        if (part.kind != PIDX_ITER) {
            fail(l->d, "the concatenation piece '%s' is also read at a fixed position", piece->as.label);
            return part;
        }
        c->iter[j] = part.iter;
    }
    ARENA_PUSH(l->d->arena, l->out->concats, l->out->concat_count, l->concat_cap, c);
    return (ProjIndex){.kind = PIDX_CONCAT, .concat = c};
}

/* Extra ids of a spec: two per affine axis (its `over` and `kernel` labels), one per label
 * piece of a concatenated axis. */
static uint32_t spec_extra_row(const SpecRow *row) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < row->leading_count + row->trailing_count; i++) {
        const SpecAxis *ax = i < row->leading_count ? &row->leading[i] : &row->trailing[i - row->leading_count];
        if (ax->kind == SPEC_AXIS_AFFINE) n += 2;
        if (ax->kind == SPEC_AXIS_CONCAT) n += ax->as.concat.count;
    }
    return n;
}

static uint32_t spec_extra_ids(const Spec *spec) {
    uint32_t n = 0;
    for (uint32_t i = 0; i <= spec->rhs_count; i++)
        for (int k = 0; k < SPEC_ROW_KINDS; k++)
            n += spec_extra_row(&(i < spec->rhs_count ? &spec->rhs[i] : &spec->lhs)->rows[k]);
    return n;
}

Projections *proj_infer(Arena *arena, const ProjProblem *p) {
    Deriver d = {.arena = arena, .p = p};
    d.base = arena_alloc(arena, (p->slot_count + 1) * sizeof *d.base);
    for (uint32_t s = 0; s < p->slot_count; s++) {
        for (int k = 0; k < ROW_KINDS; k++)
            if (p->shapes[s].rows[k].var) {
                diag_error(p->span, "internal error: projection inference for %s before its shapes are closed",
                           p->what);
                return NULL;
            }
        d.base[s] = d.id_count;
        d.id_count += proj_shape_rank(&p->shapes[s]);
    }
    uint32_t axis_ids = d.id_count;
    if (p->logic == LOGIC_SPEC) d.id_count += spec_extra_ids(p->spec);
    d.next_extra = axis_ids;
    d.size = arena_alloc(arena, (d.id_count + 1) * sizeof *d.size);
    d.unit = arena_alloc(arena, (d.id_count + 1) * sizeof *d.unit);
    d.affine_of = arena_alloc(arena, (d.id_count + 1) * sizeof *d.affine_of);
    d.concat_of = arena_alloc(arena, (d.id_count + 1) * sizeof *d.concat_of);
    d.gather_of = arena_alloc(arena, (d.id_count + 1) * sizeof *d.gather_of);
    for (uint32_t i = 0; i < d.id_count; i++) d.affine_of[i] = d.concat_of[i] = d.gather_of[i] = -1;
    for (uint32_t s = 0; s < p->slot_count; s++) {
        uint32_t n = d.base[s];
        for (int k = 0; k < ROW_KINDS; k++) {
            const Row *r = &p->shapes[s].rows[memory_order[k]];
            for (uint32_t j = 0; j < r->count; j++, n++) {
                d.size[n] = dim_extent(r->dims[j]);
                d.unit[n] = r->dims[j].size == 1 && r->dims[j].basis == BASIS_NONE;
            }
        }
    }
    derive(&d);
    if (d.failed) return NULL;

    /* A permuted order for the canonicity test. */
    uint32_t *order = arena_alloc(arena, (d.eq_count + 1) * sizeof *order);
    for (uint32_t i = 0; i < d.eq_count; i++) order[i] = i;
    if (p->shuffle_seed) {
        uint64_t st = p->shuffle_seed;
        for (uint32_t i = d.eq_count; i > 1; i--) {
            uint32_t j = (uint32_t)(next_random(&st) % i);
            uint32_t t = order[i - 1]; order[i - 1] = order[j]; order[j] = t;
        }
    }

    Solver s;
    s.parent = arena_alloc(arena, (d.id_count + 1) * sizeof *s.parent);
    s.pinned = arena_alloc(arena, (d.id_count + 1) * sizeof *s.pinned);
    s.pin = arena_alloc(arena, (d.id_count + 1) * sizeof *s.pin);
    s.iterate = arena_alloc(arena, (d.id_count + 1) * sizeof *s.iterate);
    for (uint32_t i = 0; i < d.id_count; i++) s.parent[i] = i;
    for (uint32_t i = 0; i < d.eq_count && !d.failed; i++) solve_equation(&d, &s, &d.eqs[order[i]]);
    if (d.failed) return NULL;

    /* Label the classes: pin, else an iterator when iterated and larger than one, else Fix 0. */
    Projections *out = arena_alloc(arena, sizeof *out);
    out->slot_count = p->slot_count;
    out->rank = arena_alloc(arena, p->slot_count * sizeof *out->rank);
    out->maps = arena_alloc(arena, p->slot_count * sizeof *out->maps);
    out->axis_size = arena_alloc(arena, p->slot_count * sizeof *out->axis_size);
    uint32_t *class_iter = arena_alloc(arena, (d.id_count + 1) * sizeof *class_iter);
    for (uint32_t i = 0; i < d.id_count; i++) class_iter[i] = UINT32_MAX;
    out->iter_size = arena_alloc(arena, (d.id_count + 1) * sizeof *out->iter_size);
    Labeller lab = {&d, &s, out, class_iter, 0, arena_alloc(arena, (d.id_count + 1) * sizeof(bool))};
    for (uint32_t i = 0; i < d.concat_def_count; i++)
        for (uint32_t j = 0; j < d.concat_defs[i].spec->as.concat.count; j++)
            if (d.concat_defs[i].spec->as.concat.pieces[j].kind == SPEC_PIECE_LABEL)
                lab.piece[find(&s, d.concat_defs[i].ids[j])] = true;
    for (uint32_t slot = 0; slot < p->slot_count; slot++) {
        uint32_t rank = proj_shape_rank(&p->shapes[slot]);
        out->rank[slot] = rank;
        out->maps[slot] = arena_alloc(arena, (rank ? rank : 1) * sizeof **out->maps);
        out->axis_size[slot] = arena_alloc(arena, (rank ? rank : 1) * sizeof **out->axis_size);
        for (uint32_t a = 0; a < rank; a++) {
            uint32_t id = d.base[slot] + a;
            out->axis_size[slot][a] = d.size[id];
            out->maps[slot][a] = d.affine_of[id] >= 0   ? label_affine(&lab, &d.affines[d.affine_of[id]])
                                 : d.concat_of[id] >= 0 ? label_concat(&lab, &d.concat_defs[d.concat_of[id]])
                                 : d.gather_of[id] >= 0 ? (ProjIndex){.kind = PIDX_GATHER, .gather = (uint32_t)d.gather_of[id]}
                                                        : label(&lab, id);
        }
    }
    if (d.failed) return NULL;
    return out;
}

/* An affine index may reach one cell from several points, and skips cells between strides; a
 * concatenated one has iterators that exist only in part of the product space: a map with
 * either is taken as neither injective nor surjective.  A merged axis's index (dense) numbers
 * its cells one to one and counts as its iterators. */
static bool has_affine(const Projections *p, uint32_t slot) {
    for (uint32_t a = 0; a < p->rank[slot]; a++)
        if ((p->maps[slot][a].kind == PIDX_AFFINE && !p->maps[slot][a].dense) || p->maps[slot][a].kind == PIDX_CONCAT ||
            p->maps[slot][a].kind == PIDX_GATHER)
            return true;
    return false;
}

bool proj_gathers(const Projections *p) {
    for (uint32_t s = 0; s < p->slot_count; s++)
        for (uint32_t a = 0; a < p->rank[s]; a++)
            if (p->maps[s][a].kind == PIDX_GATHER) return true;
    return false;
}

/* How many times iterator `it` appears in axes [0, end) of `slot`'s map (a dense index counts
 * its terms). */
static uint32_t uses_of(const Projections *p, uint32_t slot, uint32_t end, uint32_t it) {
    uint32_t n = 0;
    for (uint32_t a = 0; a < end; a++) {
        const ProjIndex *ix = &p->maps[slot][a];
        if (ix->kind == PIDX_ITER) n += ix->iter == it;
        if (ix->kind == PIDX_AFFINE)
            for (uint32_t t = 0; t < ix->term_count; t++) n += ix->terms[t] == it;
    }
    return n;
}

uint32_t proj_iter_uses(const Projections *p, uint32_t slot, uint32_t it) { return uses_of(p, slot, p->rank[slot], it); }

bool proj_injective(const Projections *p, uint32_t slot) {
    if (has_affine(p, slot)) return false;
    for (uint32_t it = 0; it < p->iter_count; it++)
        if (!uses_of(p, slot, p->rank[slot], it)) return false;
    return true;
}

/* Whether an axis of `slot` is concatenation `c` (its pieces lie in that slot). */
static bool slot_has_concat(const Projections *p, uint32_t slot, const ProjConcat *c) {
    for (uint32_t a = 0; a < p->rank[slot]; a++)
        if (p->maps[slot][a].kind == PIDX_CONCAT && p->maps[slot][a].concat == c) return true;
    return false;
}

/* Whether `slot` reads the iterator of a label part of concatenation `c` other than part `j`. */
static bool reads_other_part(const Projections *p, uint32_t slot, const ProjConcat *c, uint32_t j) {
    for (uint32_t k = 0; k < c->count; k++)
        if (k != j && !c->gap[k] && uses_of(p, slot, p->rank[slot], c->iter[k])) return true;
    return false;
}

bool proj_writes_once(const Projections *p, uint32_t slot) {
    if (has_affine(p, slot)) return false;
    for (uint32_t it = 0; it < p->iter_count; it++) {
        /* an iterator of one point reaches each cell once (a slice's offset axis, `p^a`) */
        if (uses_of(p, slot, p->rank[slot], it) || p->iter_size[it] == 1) continue;
        /* a part of a concatenation in this slot: its points lie in regions of their own; a
         * part of one in an operand whose other label part this slot reads (`p^a => a`, a
         * slice): where it is active, that part is not, and the slot is not written (lowering's
         * slot_active).  One in an operand's axis that the result sums away is a reduction like
         * any other (an integer sum over `3^a` kept only the last cell it read). */
        bool piece = false;
        for (uint32_t c = 0; c < p->concat_count && !piece; c++)
            for (uint32_t j = 0; j < p->concats[c]->count && !piece; j++)
                piece = !p->concats[c]->gap[j] && p->concats[c]->iter[j] == it &&
                        (slot_has_concat(p, slot, p->concats[c]) || reads_other_part(p, slot, p->concats[c], j));
        if (!piece) return false;
    }
    return true;
}

bool proj_surjective(const Projections *p, uint32_t slot) {
    if (has_affine(p, slot)) return false;
    for (uint32_t a = 0; a < p->rank[slot]; a++) {
        const ProjIndex *ix = &p->maps[slot][a];
        if (p->axis_size[slot][a] == 1) continue;
        if (ix->kind != PIDX_ITER && ix->kind != PIDX_AFFINE) return false;
        /* a diagonal reaches only part of the cells */
        uint32_t n = ix->kind == PIDX_ITER ? 1 : ix->term_count;
        for (uint32_t t = 0; t < n; t++)
            if (uses_of(p, slot, a, ix->kind == PIDX_ITER ? ix->iter : ix->terms[t])) return false;
        if (ix->kind == PIDX_AFFINE)
            for (uint32_t t = 0; t + 1 < n; t++)
                if (ix->terms[t] == ix->terms[t + 1]) return false;
    }
    return true;
}
