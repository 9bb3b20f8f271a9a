/* shape_report.c — reading a closed solution back: shape_verify() checks every emitted
 * constraint on the ground terms from seed 000's definitions rather than the solver's
 * bookkeeping (a violation is an internal error at the constraint's source), and
 * shape_explain() prints a shape's derivation for `tsrc --explain`: for each axis, the chain of
 * constraints and closing choices that gave it its size, each with its place in the source.
 *
 * Requires: a closed solver (shape_close). */
#include "infer/shape_internal.h"

#include <stdarg.h>

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
