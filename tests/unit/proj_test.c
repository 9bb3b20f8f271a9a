/* proj_test.c — unit tests of projection inference (compiler/infer/proj.c, seed 003).
 *
 * What it does: generates many random operations whose closed shapes satisfy their logic —
 * pointwise with broadcasting units, compose with a third (added) operand, transpose, einsum
 * specs with shared labels, diagonals, fixed indices, placeholders and row variables — and for
 * each one checks
 *   - canonicity: solving the same equations in 8 shuffled orders gives exactly the same
 *     projections (iterators are numbered by first appearance, so "up to renaming" is
 *     equality here);
 *   - soundness against the shapes: every iterator ranges over the size of every axis it
 *     drives, every size-one axis reads at 0, every pin is inside its axis;
 *   - the seed's worked examples: matmul reduces j and its result map is not injective, a
 *     scalar broadcast is pinned at 0, an outer product of axes of equal size stays two loops.
 * Requires build/libtsrc.a.  One line per failure; last line "N passed, N failed". */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/diag.h"
#include "infer/proj.h"
#include "front/spec.h"

static unsigned passed, failed;

static void check(bool ok, const char *what, uint64_t seed) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s (case seed %" PRIu64 ")\n", what, seed);
    }
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) { /* 0 .. n-1 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

static Arena *arena;

static Row row_of(const uint32_t *sizes, uint32_t count, uint32_t lead, bool units) {
    Row r = {0};
    r.dims = arena_alloc(arena, (count ? count : 1) * sizeof *r.dims);
    for (uint32_t i = 0; i < count; i++) {
        r.dims[i].size = sizes[i];
        r.dims[i].basis = units && sizes[i] == 1 ? BASIS_NONE : BASIS_DEFAULT;
    }
    r.count = count;
    r.lead = lead;
    return r;
}

static Row random_row(uint32_t max) {
    uint32_t n = rnd(max + 1), sizes[8];
    for (uint32_t i = 0; i < n; i++) sizes[i] = 1 + rnd(4);
    return row_of(sizes, n, 0, false);
}

/* A row that broadcasts to `super`: its flanks aligned at the outer edges, each axis either
 * the super's or the claim-free unit. */
static Row sub_row(Row super) {
    uint32_t lead = rnd(super.count + 1), trail = rnd(super.count - lead + 1), sizes[8], n = 0;
    Row r = {0};
    r.dims = arena_alloc(arena, (lead + trail + 1) * sizeof *r.dims);
    for (uint32_t i = 0; i < lead; i++, n++) r.dims[n] = rnd(3) ? super.dims[i] : (Dim){.size = 1, .basis = BASIS_NONE};
    for (uint32_t i = 0; i < trail; i++, n++)
        r.dims[n] = rnd(3) ? super.dims[super.count - trail + i] : (Dim){.size = 1, .basis = BASIS_NONE};
    (void)sizes;
    r.count = n;
    r.lead = lead;
    return r;
}

static bool same_proj(const Projections *a, const Projections *b) {
    if (a->iter_count != b->iter_count || a->slot_count != b->slot_count) return false;
    for (uint32_t i = 0; i < a->iter_count; i++)
        if (a->iter_size[i] != b->iter_size[i]) return false;
    for (uint32_t s = 0; s < a->slot_count; s++) {
        if (a->rank[s] != b->rank[s]) return false;
        for (uint32_t x = 0; x < a->rank[s]; x++) {
            const ProjIndex *p = &a->maps[s][x], *q = &b->maps[s][x];
            if (p->kind != q->kind) return false;
            if (p->kind == PIDX_ITER && p->iter != q->iter) return false;
            if (p->kind == PIDX_FIXED && p->fixed != q->fixed) return false;
        }
    }
    return true;
}

static bool sound(const Projections *p) {
    for (uint32_t s = 0; s < p->slot_count; s++)
        for (uint32_t x = 0; x < p->rank[s]; x++) {
            const ProjIndex *ix = &p->maps[s][x];
            uint64_t size = p->axis_size[s][x];
            if (size == 1 && !(ix->kind == PIDX_FIXED && ix->fixed == 0)) return false;
            if (ix->kind == PIDX_ITER && (ix->iter >= p->iter_count || p->iter_size[ix->iter] != size)) return false;
            if (ix->kind == PIDX_FIXED && (ix->fixed < 0 || (uint64_t)ix->fixed >= size)) return false;
        }
    for (uint32_t i = 0; i < p->iter_count; i++)
        if (p->iter_size[i] < 2) return false;
    return true;
}

/* Solve in the derived order and in 8 shuffled orders; all must agree and be sound. */
static const Projections *solve_all_orders(ProjProblem *p, uint64_t seed, const char *what) {
    p->shuffle_seed = 0;
    const Projections *base = proj_infer(arena, p);
    check(base != NULL, what, seed);
    if (!base) return NULL;
    check(sound(base), what, seed);
    bool same = true;
    for (uint64_t k = 1; k <= 8; k++) {
        p->shuffle_seed = seed * 131 + k;
        const Projections *other = proj_infer(arena, p);
        same = same && other && same_proj(base, other);
    }
    check(same, what, seed);
    return base;
}

static void pointwise_case(uint64_t seed) {
    Shape shapes[3];
    for (int k = 0; k < ROW_KINDS; k++) shapes[0].rows[k] = random_row(3);
    uint32_t n = 2 + rnd(2);
    for (uint32_t s = 1; s < n; s++)
        for (int k = 0; k < ROW_KINDS; k++) shapes[s].rows[k] = sub_row(shapes[0].rows[k]);
    ProjProblem p = {.logic = LOGIC_POINTWISE, .slot_count = n, .shapes = shapes, .what = "pointwise"};
    solve_all_orders(&p, seed, "pointwise: canonical and sound");
}

static void compose_case(uint64_t seed) {
    Shape s[4];
    for (int k = 0; k < ROW_KINDS; k++) s[0].rows[k] = random_row(2);
    Row contracted = random_row(3);
    s[1].rows[ROW_BATCH] = sub_row(s[0].rows[ROW_BATCH]);
    s[1].rows[ROW_OUTPUT] = sub_row(s[0].rows[ROW_OUTPUT]);
    s[1].rows[ROW_INPUT] = contracted;
    s[2].rows[ROW_BATCH] = sub_row(s[0].rows[ROW_BATCH]);
    s[2].rows[ROW_OUTPUT] = sub_row(contracted);
    s[2].rows[ROW_INPUT] = sub_row(s[0].rows[ROW_INPUT]);
    for (int k = 0; k < ROW_KINDS; k++) s[3].rows[k] = sub_row(s[0].rows[k]);
    ProjProblem p = {.logic = LOGIC_COMPOSE, .slot_count = 3 + rnd(2), .shapes = s, .what = "compose"};
    solve_all_orders(&p, seed, "compose: canonical and sound");
}

static void transpose_case(uint64_t seed) {
    Shape s[2];
    for (int k = 0; k < ROW_KINDS; k++) s[0].rows[k] = random_row(3);
    s[1].rows[ROW_BATCH] = sub_row(s[0].rows[ROW_BATCH]);
    s[1].rows[ROW_OUTPUT] = sub_row(s[0].rows[ROW_INPUT]);
    s[1].rows[ROW_INPUT] = sub_row(s[0].rows[ROW_OUTPUT]);
    ProjProblem p = {.logic = LOGIC_TRANSPOSE, .slot_count = 2, .shapes = s, .what = "transpose"};
    solve_all_orders(&p, seed, "transpose: canonical and sound");
}

/* ---- Einsum specs ------------------------------------------------------------------------------ */

typedef struct Gen {
    char text[512];
    size_t len;
    uint32_t label_size[6];
    bool label_used[6];
    uint32_t ell_count[ROW_KINDS]; /* axes under each kind's "..." */
    uint32_t ell_size[ROW_KINDS][3];
    bool ell_used;
} Gen;

static void put(Gen *g, const char *s) {
    size_t n = strlen(s);
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
}

/* One row of a slot: writes its text and the axes it stands for. */
static void gen_row(Gen *g, RowKind kind, bool result, uint32_t *sizes, uint32_t *count, uint32_t *lead) {
    uint32_t n = rnd(3);
    bool ellipsis = rnd(2);
    *count = 0;
    *lead = 0;
    bool first = true;
    uint32_t where = ellipsis ? rnd(n + 1) : 0;
    for (uint32_t i = 0; i <= n; i++) {
        if (ellipsis && i == where) {
            put(g, first ? "..." : ", ...");
            first = false;
            *lead = *count;
            for (uint32_t j = 0; j < g->ell_count[kind]; j++) sizes[(*count)++] = g->ell_size[kind][j];
            g->ell_used = true;
        }
        if (i == n) break;
        uint32_t choice = rnd(10);
        char item[16];
        uint32_t size;
        if (!result && choice == 0) { /* a fixed index */
            size = 1 + rnd(4);
            snprintf(item, sizeof item, "%u", rnd(size));
        } else if (!result && choice == 1) { /* a placeholder */
            size = 1 + rnd(4);
            snprintf(item, sizeof item, "_");
        } else {
            uint32_t l = rnd(6);
            g->label_used[l] = true;
            size = g->label_size[l];
            snprintf(item, sizeof item, "%c", 'a' + l);
        }
        put(g, first ? "" : ", ");
        put(g, item);
        first = false;
        sizes[(*count)++] = size;
    }
    if (!ellipsis) *lead = 0;
    if (!first) put(g, ","); /* a trailing ',' is allowed and keeps the multichar mode */
}

/* A slot "b|i->o": three rows, always all written (a trailing ',' keeps multichar mode). */
static Shape gen_slot(Gen *g, bool result) {
    Shape s;
    static const RowKind order[3] = {ROW_BATCH, ROW_INPUT, ROW_OUTPUT};
    static const char *const sep[3] = {"|", "->", ""};
    for (int r = 0; r < 3; r++) {
        uint32_t sizes[8], count, lead;
        gen_row(g, order[r], result, sizes, &count, &lead);
        put(g, sep[r]);
        s.rows[order[r]] = row_of(sizes, count, lead, false);
    }
    return s;
}

static void einsum_case(uint64_t seed) {
    Gen g = {0};
    for (int l = 0; l < 6; l++) g.label_size[l] = 1 + rnd(4);
    for (int k = 0; k < ROW_KINDS; k++) {
        g.ell_count[k] = rnd(3);
        for (uint32_t j = 0; j < g.ell_count[k]; j++) g.ell_size[k][j] = 1 + rnd(3);
    }
    uint32_t n = 1 + rnd(3);
    Shape shapes[4];
    for (uint32_t i = 0; i < n; i++) {
        if (i) put(&g, "; ");
        shapes[i + 1] = gen_slot(&g, false);
    }
    put(&g, " => ");
    /* The result uses only labels the operands have (a result-only label is sized by nothing). */
    bool operand_labels[6];
    memcpy(operand_labels, g.label_used, sizeof operand_labels);
    size_t mark = g.len;
    Shape result;
    for (int attempt = 0;; attempt++) {
        g.len = mark;
        memset(g.label_used, 0, sizeof g.label_used);
        result = gen_slot(&g, true);
        bool ok = true;
        for (int l = 0; l < 6; l++) ok &= !g.label_used[l] || operand_labels[l];
        if (ok) break;
        if (attempt > 50) return; /* give up on this case */
    }
    shapes[0] = result;
    source_free_all();
    uint32_t file = source_add("t.tsr", g.text, g.len);
    diag_reset();
    Spec *spec = spec_parse(arena, span_make(file, 0, (uint32_t)g.len), g.text, g.len);
    check(spec != NULL, "einsum: the generated spec parses", seed);
    if (!spec) {
        printf("    spec: %s\n", g.text);
        return;
    }
    ProjProblem p = {.logic = LOGIC_SPEC, .spec = spec, .slot_count = n + 1, .shapes = shapes, .what = "einsum"};
    if (!solve_all_orders(&p, seed, "einsum: canonical and sound")) printf("    spec: %s\n", g.text);
}

/* ---- The seed's worked examples -------------------------------------------------------------- */

static Spec *parse(const char *text) {
    source_free_all();
    uint32_t file = source_add("t.tsr", text, strlen(text));
    return spec_parse(arena, span_make(file, 0, (uint32_t)strlen(text)), text, strlen(text));
}

static Shape out_shape(uint32_t a, uint32_t b, uint32_t count) {
    Shape s = {0};
    uint32_t sizes[2] = {a, b};
    s.rows[ROW_BATCH] = row_of(NULL, 0, 0, false);
    s.rows[ROW_INPUT] = row_of(NULL, 0, 0, false);
    s.rows[ROW_OUTPUT] = row_of(sizes, count, 0, true);
    return s;
}

static void worked_examples(void) {
    /* matmul a;b=>c: three iterators, j reduced, c's map not injective but surjective. */
    Shape mm[3] = {out_shape(2, 4, 2), out_shape(2, 3, 2), out_shape(3, 4, 2)};
    ProjProblem p = {.logic = LOGIC_SPEC, .spec = parse("i, j; j, k => i, k"), .slot_count = 3, .shapes = mm,
                     .what = "matmul"};
    const Projections *r = proj_infer(arena, &p);
    check(r && r->iter_count == 3, "matmul: three iterators", 0);
    check(r && !proj_injective(r, 0) && proj_surjective(r, 0), "matmul: result map not injective, surjective", 0);
    check(r && r->maps[0][0].iter == r->maps[1][0].iter && r->maps[1][1].iter == r->maps[2][0].iter &&
              r->maps[0][1].iter == r->maps[2][1].iter, "matmul: i, j, k shared as the spec says", 0);
    /* The gradient views: slot 1 (a) omits k, slot 2 (b) omits i. */
    check(r && !proj_injective(r, 1) && !proj_injective(r, 2), "matmul: gradient slots reduce too", 0);

    /* scalar * matrix: the scalar's unit axis pinned at 0, the matrix and result co-iterate. */
    Shape sm[3] = {out_shape(2, 3, 2), out_shape(1, 0, 1), out_shape(2, 3, 2)};
    ProjProblem q = {.logic = LOGIC_POINTWISE, .slot_count = 3, .shapes = sm, .what = "scalar"};
    r = proj_infer(arena, &q);
    check(r && r->iter_count == 2 && r->maps[1][0].kind == PIDX_FIXED && r->maps[1][0].fixed == 0,
          "scalar broadcast: pinned at 0", 0);
    check(r && proj_injective(r, 0) && proj_surjective(r, 0), "scalar broadcast: plain store", 0);

    /* Outer product of two axes of equal size: two loops, not a diagonal. */
    Shape op[3] = {out_shape(3, 3, 2), out_shape(3, 0, 1), out_shape(3, 0, 1)};
    ProjProblem o = {.logic = LOGIC_SPEC, .spec = parse("i; j => i, j"), .slot_count = 3, .shapes = op,
                     .what = "outer"};
    r = proj_infer(arena, &o);
    check(r && r->iter_count == 2 && proj_injective(r, 0) && proj_surjective(r, 0),
          "outer product of equal sizes: two loops", 0);

    /* A diagonal write "i => i, i" is injective and not surjective. */
    Shape dg[2] = {out_shape(3, 3, 2), out_shape(3, 0, 1)};
    ProjProblem d = {.logic = LOGIC_SPEC, .spec = parse("i => i, i"), .slot_count = 2, .shapes = dg, .what = "diag"};
    r = proj_infer(arena, &d);
    check(r && r->iter_count == 1 && proj_injective(r, 0) && !proj_surjective(r, 0), "diagonal write", 0);

    /* A size conflict inside a class is a located error, not an assert. */
    Shape bad[3] = {out_shape(2, 4, 2), out_shape(2, 3, 2), out_shape(5, 4, 2)};
    ProjProblem e = {.logic = LOGIC_SPEC, .spec = parse("i, j; j, k => i, k"), .slot_count = 3, .shapes = bad,
                     .what = "bad"};
    FILE *sink = fopen("/dev/null", "w");
    diag_set_stream(sink);
    diag_reset();
    r = proj_infer(arena, &e);
    check(r == NULL && diag_error_count() == 1, "sizes disagreeing in a class: one error", 0);
    diag_set_stream(NULL);
    if (sink) fclose(sink);
}

int main(int argc, char **argv) {
    uint64_t base = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    arena = arena_new();
    worked_examples();
    for (uint64_t i = 0; i < 1500; i++) {
        uint64_t seed = base * 1000003 + i;
        rng_state = seed;
        switch (i % 4) {
        case 0: pointwise_case(seed); break;
        case 1: compose_case(seed); break;
        case 2: transpose_case(seed); break;
        case 3: einsum_case(seed); break;
        }
        if (i % 100 == 99) { /* keep memory bounded */
            arena_free(arena);
            arena = arena_new();
        }
    }
    arena_free(arena);
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
