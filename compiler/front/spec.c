/* spec.c — parsing einsum spec strings into Spec trees, and their canonical dump; see spec.h.
 *
 * What it does: spec_parse() copies the spec text (so the lexer has a NUL sentinel), lexes it
 * (grammar/spec_lexer.re) and feeds the tokens to the Lemon parser (grammar/spec_parser.y),
 * whose actions call the spec_build_* builders below; they make the tree in the caller's arena
 * and check what the grammar cannot (one row variable per row, a name not both label and row
 * variable, offset < stride, sizes >= 1, two different labels in a merged axis).  In single-character mode the driver inserts the
 * commas between adjacent elements, so one grammar serves both modes.  The driver also keeps a
 * small picture of where it is inside the current axis and slot (the Stage below), which is
 * all spec_syntax_error() needs to word one precise message for any unexpected token; a spec
 * that uses "->" without "=>" also gets a note, with its tsrc form when it is written in NumPy's
 * notation ("bij,bjk->bik").  Only the first error of a spec is reported: after it, nothing
 * more is fed to the parser.  An empty slot is the scalar slot ("i =>").
 * Requires arena.h, diag.h and the generated spec_parser.h.  Produces Spec trees and dumps. */
#include "front/spec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "spec_parser.h"

/* ---- Parse state --------------------------------------------------------------------------- */

/* Where the driver is inside the current row element (after the last token it fed). */
typedef enum Stage {
    ST_ROW,         /* at a row position: an element or the end of the row may follow */
    ST_LABEL,       /* IDENT starting an axis */
    ST_FIXED,       /* INT starting an axis */
    ST_ATOM,        /* '_', '...' or '..v..' */
    ST_CARET,       /* after '^' */
    ST_PIECE,       /* a concatenation piece after '^' */
    ST_STRIDE_STAR, /* coeff '*' */
    ST_OVER,        /* coeff '*' IDENT */
    ST_PAD,         /* over '=' or over '<' */
    ST_PLUS1,       /* over [pad] '+' */
    ST_PLUS1_INT,   /* ... '+' INT: an offset or a dilation */
    ST_PLUS1_IDENT, /* ... '+' IDENT: a kernel or a dilation */
    ST_PLUS2,       /* ... '+' offset '+' */
    ST_DIL_INT,     /* ... '+' offset '+' INT: a dilation, '*' must follow */
    ST_PLUS2_IDENT, /* ... '+' offset '+' IDENT */
    ST_DIL_STAR,    /* dilation '*' */
    ST_KERNEL,      /* dilation '*' IDENT */
    ST_LPAREN,      /* '(' starting a merged axis */
    ST_MERGE_OUTER, /* '(' IDENT */
    ST_MERGE_COMMA, /* '(' IDENT ',' */
    ST_MERGE_INNER, /* '(' IDENT ',' IDENT */
    ST_MERGED,      /* the whole merged axis */
    ST_LBRACKET,    /* '[' starting a gathered axis */
    ST_GATHER_INT,  /* '[' INT */
    ST_GATHERED,    /* the whole gathered axis */
} Stage;

typedef struct NameEntry {
    const char *name; /* interned in the arena */
    uint32_t len;
    bool is_row_var;
    Span span; /* first use in that role */
} NameEntry;

enum { TK_START = -2 }; /* "previous token" before the first one */

struct SpecParseState {
    Arena *arena;
    Span where;
    const char *text; /* the NUL-terminated copy */
    bool failed;
    Spec *result;
    uint32_t placeholders;
    bool multichar;
    /* Names seen so far (open addressing; cap is a power of two). */
    NameEntry *names;
    size_t name_count, name_cap;
    /* What the driver has fed so far. */
    Stage stage;
    int prev_kind;
    SpecToken prev;
    uint32_t axis_start; /* byte offset in the file of the current element's first token */
    Span caret;          /* the last '^' */
    bool has_bar, has_arrow, has_fat;
    Span bar, arrow, fat; /* in the current slot; fat: the spec's '=>' */
};

struct SpecElemList {
    SpecElem *items;
    size_t count, cap;
    size_t row_var_index; /* valid when has_row_var */
    bool has_row_var;
};

struct SpecPieceList {
    SpecPiece *items;
    size_t count, cap;
};

struct SpecSlotList {
    SpecSlot **items;
    size_t count, cap;
};

/* True when this is the spec's first error (the caller then reports it). */
static bool first_error(SpecParseState *ps) {
    if (ps->failed) return false;
    ps->failed = true;
    return true;
}

static Span point(Span at) { return span_make(at.file, at.start, at.start); }
static Span point_end(Span at) { return span_make(at.file, at.end, at.end); }

static const char *copy_name(SpecParseState *ps, const SpecToken *token) {
    return arena_strndup(ps->arena, token->text, token->len);
}

/* ---- Names: a label may not also be a row variable ---------------------------------------- */

static uint64_t hash_name(const char *text, uint32_t len) {
    uint64_t h = 1469598103934665603u;
    for (uint32_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211u;
    return h;
}

static NameEntry *name_slot(NameEntry *table, size_t cap, const char *text, uint32_t len) {
    size_t i = (size_t)hash_name(text, len) & (cap - 1);
    while (table[i].name &&
           (table[i].len != len || memcmp(table[i].name, text, len) != 0))
        i = (i + 1) & (cap - 1);
    return &table[i];
}

/* Records a use of a name and returns its interned copy; reports a label/row variable clash. */
static const char *use_name(SpecParseState *ps, const SpecToken *token, bool is_row_var) {
    if (ps->name_count * 2 >= ps->name_cap) {
        size_t cap = ps->name_cap ? ps->name_cap * 2 : 64;
        NameEntry *table = arena_alloc(ps->arena, cap * sizeof *table);
        for (size_t i = 0; i < ps->name_cap; i++)
            if (ps->names[i].name)
                *name_slot(table, cap, ps->names[i].name, ps->names[i].len) = ps->names[i];
        ps->names = table;
        ps->name_cap = cap;
    }
    NameEntry *entry = name_slot(ps->names, ps->name_cap, token->text, token->len);
    if (!entry->name) {
        entry->name = copy_name(ps, token);
        entry->len = token->len;
        entry->is_row_var = is_row_var;
        entry->span = token->span;
        ps->name_count++;
    } else if (entry->is_row_var != is_row_var && first_error(ps)) {
        diag_error(token->span, "'%s' is used both as an axis label and as a row variable",
                   entry->name);
        if (entry->is_row_var)
            diag_note(entry->span, "'..%s..' is a row variable here", entry->name);
        else
            diag_note(entry->span, "'%s' is an axis label here", entry->name);
    }
    return entry->name;
}

/* ---- Builders (called by the grammar actions) ---------------------------------------------- */

static SpecAxis *new_axis(SpecParseState *ps, SpecAxisKind kind, Span span) {
    SpecAxis *axis = arena_alloc(ps->arena, sizeof *axis);
    axis->kind = kind;
    axis->span = span;
    return axis;
}

SpecAxis *spec_build_label(SpecParseState *ps, SpecToken name) {
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_LABEL, name.span);
    axis->as.label = use_name(ps, &name, false);
    return axis;
}

SpecAxis *spec_build_fixed(SpecParseState *ps, SpecToken number) {
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_FIXED, number.span);
    axis->as.fixed = number.value;
    return axis;
}

SpecAxis *spec_build_placeholder(SpecParseState *ps, SpecToken underscore) {
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_PLACEHOLDER, underscore.span);
    axis->as.placeholder = ps->placeholders++;
    return axis;
}

SpecPieceList *spec_build_pieces(SpecParseState *ps, SpecPieceList *list, SpecToken piece,
                                 bool is_size) {
    if (!list) list = arena_alloc(ps->arena, sizeof *list);
    SpecPiece p = {.kind = is_size ? SPEC_PIECE_SIZE : SPEC_PIECE_LABEL, .span = piece.span};
    if (is_size) {
        p.as.size = piece.value;
        if (piece.value < 1 && first_error(ps))
            diag_error(piece.span, "a concatenated size must be at least 1");
    } else {
        p.as.label = use_name(ps, &piece, false);
    }
    ARENA_PUSH(ps->arena, list->items, list->count, list->cap, p);
    return list;
}

SpecAxis *spec_build_concat(SpecParseState *ps, SpecPieceList *pieces) {
    Span span = span_join(pieces->items[0].span, pieces->items[pieces->count - 1].span);
    /* One label is one index space: twice in an axis it would be two places of one cell.  Labels
     * are interned (use_name), so a set of their pointers finds the first repeat in one pass. */
    size_t cap = 16;
    while (cap < 2 * pieces->count) cap *= 2;
    const char **seen = arena_alloc(ps->arena, cap * sizeof *seen);
    memset(seen, 0, cap * sizeof *seen);
    for (size_t i = 0; i < pieces->count && !ps->failed; i++) {
        const SpecPiece *b = &pieces->items[i];
        if (b->kind != SPEC_PIECE_LABEL) continue;
        size_t h = ((uintptr_t)b->as.label >> 3) & (cap - 1);
        while (seen[h] && seen[h] != b->as.label) h = (h + 1) & (cap - 1);
        if (!seen[h]) {
            seen[h] = b->as.label;
            continue;
        }
        const SpecPiece *a = pieces->items;
        while (a->kind != SPEC_PIECE_LABEL || a->as.label != b->as.label) a++;
        first_error(ps);
        diag_error(b->span, "label '%s' is a component of this concatenation twice", b->as.label);
        diag_note(a->span, "its first place is here; concatenating a tensor with itself takes it "
                  "twice as operands: (a, a) ++^ \"x; y => x^y\"");
    }
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_CONCAT, span);
    axis->as.concat.pieces = pieces->items;
    axis->as.concat.count = (uint32_t)pieces->count;
    return axis;
}

SpecCoeff spec_build_coeff(SpecParseState *ps, SpecToken token, bool is_name) {
    SpecCoeff coeff = {.kind = is_name ? SPEC_COEFF_NAME : SPEC_COEFF_INT, .span = token.span};
    if (is_name) coeff.as.name = copy_name(ps, &token);
    else coeff.as.value = token.value;
    return coeff;
}

SpecTerm spec_build_term(SpecParseState *ps, const SpecCoeff *coeff, SpecToken label) {
    (void)ps;
    SpecTerm term = {.label = label};
    if (coeff) {
        term.coeff = *coeff;
    } else {
        term.coeff.kind = SPEC_COEFF_INT;
        term.coeff.implicit = true;
        term.coeff.as.value = 1;
        term.coeff.span = point(label.span);
    }
    return term;
}

static void check_at_least_one(SpecParseState *ps, const SpecCoeff *coeff, const char *what) {
    if (coeff->kind == SPEC_COEFF_INT && coeff->as.value < 1 && first_error(ps))
        diag_error(coeff->span, "%s must be at least 1", what);
}

SpecAxis *spec_build_affine(SpecParseState *ps, SpecTerm over, SpecPadMark pad,
                            const SpecToken *offset, const SpecTerm *kernel) {
    Span start = over.coeff.implicit ? over.label.span : over.coeff.span;
    Span end = kernel ? kernel->label.span : offset ? offset->span : over.label.span;
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_AFFINE, span_join(start, end));
    SpecAffine *a = &axis->as.affine;
    a->stride = over.coeff;
    check_at_least_one(ps, &a->stride, "stride");
    a->over.name = use_name(ps, &over.label, false);
    a->over.span = over.label.span;
    a->padding = pad.padding;
    a->padding_span = pad.padding == SPEC_PAD_UNSPECIFIED ? point_end(over.label.span) : pad.span;
    if (pad.padding != SPEC_PAD_UNSPECIFIED && !kernel && first_error(ps))
        diag_error(pad.span, "padding marker '%c' needs a kernel after the '+'",
                   pad.padding == SPEC_PAD_SAME ? '=' : '<');
    if (offset) {
        a->has_offset = true;
        a->offset = offset->value;
        a->offset_span = offset->span;
        if (a->stride.kind == SPEC_COEFF_INT && offset->value >= a->stride.as.value &&
            first_error(ps)) {
            if (a->stride.implicit)
                diag_error(offset->span, "an offset needs a stride larger than it, as in '%d*%.*s+%d'",
                           (int)offset->value + 1, (int)over.label.len, over.label.text,
                           (int)offset->value);
            else
                diag_error(offset->span, "offset %d must be smaller than the stride %d",
                           (int)offset->value, (int)a->stride.as.value);
        }
    } else {
        a->offset_span = point_end(over.label.span);
    }
    if (kernel) {
        a->has_kernel = true;
        a->dilation = kernel->coeff;
        check_at_least_one(ps, &a->dilation, "dilation");
        a->kernel.name = use_name(ps, &kernel->label, false);
        a->kernel.span = kernel->label.span;
    }
    return axis;
}

SpecAxis *spec_build_gather(SpecParseState *ps, SpecToken lbracket, SpecToken operand, SpecToken rbracket) {
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_GATHER, span_join(lbracket.span, rbracket.span));
    axis->as.gather = operand.value > 0 ? (uint32_t)operand.value : 0;
    if (operand.value < 1 && first_error(ps))
        diag_error(operand.span, "a gathered axis names an operand by its number, from 1: '[2]' is read at operand 2's values");
    return axis;
}

SpecAxis *spec_build_merged(SpecParseState *ps, SpecToken lparen, SpecToken outer, SpecToken inner,
                            SpecToken rparen) {
    SpecAxis *axis = new_axis(ps, SPEC_AXIS_AFFINE, span_join(lparen.span, rparen.span));
    SpecAffine *a = &axis->as.affine;
    a->merged = a->has_kernel = true;
    a->stride = (SpecCoeff){.kind = SPEC_COEFF_INT, .implicit = true, .as.value = 0, .span = point(outer.span)};
    a->dilation = (SpecCoeff){.kind = SPEC_COEFF_INT, .implicit = true, .as.value = 1, .span = point(inner.span)};
    a->over.name = use_name(ps, &outer, false);
    a->over.span = outer.span;
    a->kernel.name = use_name(ps, &inner, false);
    a->kernel.span = inner.span;
    a->padding = SPEC_PAD_VALID;
    a->padding_span = a->offset_span = point_end(outer.span);
    if (a->over.name == a->kernel.name && first_error(ps))
        diag_error(inner.span, "a merged axis joins two different labels, not '%s' twice", a->kernel.name);
    return axis;
}

SpecElem spec_build_axis_elem(SpecAxis *axis) {
    return (SpecElem){.is_row_var = false, .axis = axis};
}

SpecElem spec_build_row_var(SpecParseState *ps, SpecToken token, bool named) {
    SpecElem elem = {.is_row_var = true};
    elem.row_var.kind = named ? SPEC_ROWVAR_NAMED : SPEC_ROWVAR_DEFAULT;
    elem.row_var.span = token.span;
    if (named) elem.row_var.name = use_name(ps, &token, true);
    return elem;
}

static const char *row_var_text(SpecParseState *ps, const SpecRowVar *var) {
    if (var->kind == SPEC_ROWVAR_NAMED) return arena_printf(ps->arena, "..%s..", var->name);
    return "...";
}

SpecElemList *spec_build_elems(SpecParseState *ps, SpecElemList *list, SpecElem elem) {
    if (!list) list = arena_alloc(ps->arena, sizeof *list);
    if (elem.is_row_var) {
        if (!list->has_row_var) {
            list->has_row_var = true;
            list->row_var_index = list->count;
        } else if (first_error(ps)) {
            const SpecRowVar *old = &list->items[list->row_var_index].row_var;
            bool same = old->kind == elem.row_var.kind &&
                        (old->kind == SPEC_ROWVAR_DEFAULT || old->name == elem.row_var.name);
            if (same) {
                diag_error(elem.row_var.span, "row variable '%s' appears twice in one row",
                           row_var_text(ps, old));
            } else {
                diag_error(elem.row_var.span,
                           "a row can have only one row variable ('%s' is already here)",
                           row_var_text(ps, old));
                diag_note(old->span, "'%s' is here", row_var_text(ps, old));
            }
        }
    }
    ARENA_PUSH(ps->arena, list->items, list->count, list->cap, elem);
    return list;
}

static Span elem_span(const SpecElem *elem) {
    return elem->is_row_var ? elem->row_var.span : elem->axis->span;
}

static SpecAxis *copy_axes(SpecParseState *ps, const SpecElem *elems, size_t count) {
    if (count == 0) return NULL;
    SpecAxis *axes = arena_alloc(ps->arena, count * sizeof *axes);
    for (size_t i = 0; i < count; i++) axes[i] = *elems[i].axis;
    return axes;
}

/* `empty_at` is the row's span when it is written and empty. */
static void build_row(SpecParseState *ps, SpecRow *row, SpecRowKind kind, const SpecElemList *list,
                      bool written, Span empty_at) {
    row->kind = kind;
    row->omitted = !written;
    row->row_var.kind = SPEC_ROWVAR_NONE;
    if (!list || list->count == 0) {
        row->span = empty_at;
        row->row_var.span = empty_at;
        return;
    }
    row->span = span_join(elem_span(&list->items[0]), elem_span(&list->items[list->count - 1]));
    if (!list->has_row_var) {
        row->row_var.span = point_end(row->span);
        row->trailing = copy_axes(ps, list->items, list->count);
        row->trailing_count = (uint32_t)list->count;
        return;
    }
    /* After a second row variable (an error already reported) the rest counts as trailing. */
    size_t v = list->row_var_index;
    row->row_var = list->items[v].row_var;
    row->leading = copy_axes(ps, list->items, v);
    row->leading_count = (uint32_t)v;
    size_t n = 0;
    SpecAxis *trailing = arena_alloc(ps->arena, (list->count - v) * sizeof *trailing);
    for (size_t i = v + 1; i < list->count; i++)
        if (!list->items[i].is_row_var) trailing[n++] = *list->items[i].axis;
    row->trailing = n ? trailing : NULL;
    row->trailing_count = (uint32_t)n;
}

SpecSlot *spec_build_slot(SpecParseState *ps, SpecElemList *batch, SpecElemList *input,
                          SpecElemList *output, const SpecToken *bar, const SpecToken *arrow) {
    SpecSlot *slot = arena_alloc(ps->arena, sizeof *slot);
    /* The slot's extent: from its first written part to its last; an empty slot (the scalar
     * slot) is the point after the ';' or '=>' before it, or the start of the spec. */
    bool has_b = batch && batch->count, has_i = input && input->count;
    bool has_o = output && output->count;
    Span first = has_b ? elem_span(&batch->items[0]) : bar ? bar->span
                 : has_i ? elem_span(&input->items[0]) : arrow ? arrow->span
                 : has_o ? elem_span(&output->items[0]) : point_end(ps->prev.span);
    Span last = has_o ? elem_span(&output->items[output->count - 1]) : arrow ? arrow->span
                : has_i ? elem_span(&input->items[input->count - 1]) : bar ? bar->span
                : has_b ? elem_span(&batch->items[batch->count - 1]) : first;
    slot->span = span_join(first, last);
    Span omitted = point(slot->span);
    build_row(ps, &slot->rows[SPEC_ROW_BATCH], SPEC_ROW_BATCH, batch, bar != NULL,
              bar ? point(bar->span) : omitted);
    build_row(ps, &slot->rows[SPEC_ROW_INPUT], SPEC_ROW_INPUT, input, arrow != NULL,
              arrow ? point(arrow->span) : omitted);
    Span output_at = arrow ? point_end(arrow->span) : bar ? point_end(bar->span) : omitted;
    build_row(ps, &slot->rows[SPEC_ROW_OUTPUT], SPEC_ROW_OUTPUT, output, true, output_at);
    return slot;
}

SpecSlotList *spec_build_slots(SpecParseState *ps, SpecSlotList *list, SpecSlot *slot) {
    if (!list) list = arena_alloc(ps->arena, sizeof *list);
    ARENA_PUSH(ps->arena, list->items, list->count, list->cap, slot);
    return list;
}

void spec_build_spec(SpecParseState *ps, SpecSlotList *rhs, SpecSlot *lhs) {
    Spec *spec = arena_alloc(ps->arena, sizeof *spec);
    spec->rhs = arena_alloc(ps->arena, rhs->count * sizeof *spec->rhs);
    for (size_t i = 0; i < rhs->count; i++) spec->rhs[i] = *rhs->items[i];
    spec->rhs_count = (uint32_t)rhs->count;
    spec->lhs = *lhs;
    spec->placeholder_count = ps->placeholders;
    spec->multichar = ps->multichar;
    spec->span = ps->where;
    ps->result = spec;
}

void spec_stack_overflow(SpecParseState *ps) {
    if (first_error(ps)) diag_error(ps->prev.span, "einsum spec is too deeply nested");
}

/* ---- Syntax errors ------------------------------------------------------------------------- */

static bool starts_element(int kind) {
    return kind == SPEC_TK_IDENT || kind == SPEC_TK_INT || kind == SPEC_TK_UNDERSCORE ||
           kind == SPEC_TK_ELLIPSIS || kind == SPEC_TK_ROWVAR || kind == SPEC_TK_LPAREN || kind == SPEC_TK_LBRACKET;
}

static bool is_complete(Stage stage) {
    switch (stage) {
    case ST_LABEL: case ST_FIXED: case ST_ATOM: case ST_PIECE: case ST_OVER:
    case ST_PLUS1_INT: case ST_PLUS1_IDENT: case ST_PLUS2_IDENT: case ST_KERNEL: case ST_MERGED: case ST_GATHERED:
        return true;
    default:
        return false;
    }
}

/* The source text of [from, to) in the file, quoted, whitespace runs shown as one space and
 * long texts shortened. */
static const char *quote_range(SpecParseState *ps, uint32_t from, uint32_t to) {
    enum { MAX_SHOWN = 40 };
    const char *text = ps->text + (from - ps->where.start);
    size_t len = to - from;
    char *out = arena_alloc(ps->arena, MAX_SHOWN + 8);
    size_t n = 0;
    out[n++] = '\'';
    size_t i = 0;
    for (; i < len && n <= MAX_SHOWN; i++) {
        char c = text[i];
        bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
        if (space && out[n - 1] == ' ') continue;
        out[n++] = space ? ' ' : c;
    }
    if (i < len) n = (size_t)(stpcpy(out + n, "...") - out);
    out[n++] = '\'';
    out[n] = '\0';
    return out;
}

static const char *quote_token(SpecParseState *ps, int kind, const SpecToken *token) {
    if (kind == 0) return "the end of the spec";
    return quote_range(ps, token->span.start, token->span.end);
}

/* "expected WHAT after AFTER before <token>", or the ends-too-early form at the end. */
static void expected(SpecParseState *ps, int kind, const SpecToken *token, const char *what,
                     const char *after) {
    if (kind == 0)
        diag_error(token->span, "einsum spec ends too early: expected %s after %s", what, after);
    else
        diag_error(token->span, "expected %s after %s before %s", what, after,
                   quote_token(ps, kind, token));
}

static void unexpected_in_axis(SpecParseState *ps, int kind, const SpecToken *token) {
    const char *t = quote_token(ps, kind, token);
    const char *p = quote_token(ps, ps->prev_kind, &ps->prev);
    switch (ps->stage) {
    case ST_ROW:
        if (kind == SPEC_TK_CARET) diag_error(token->span, "'^' needs a component on both sides");
        else diag_error(token->span,
                        "expected an axis, a row variable or the end of the row before %s", t);
        return;
    case ST_PIECE:
        diag_error(token->span, "a concatenation component cannot be an affine expression");
        return;
    case ST_FIXED:
        diag_error(token->span, "unexpected %s after the fixed index %s", t, p);
        return;
    case ST_ATOM:
        if (kind == SPEC_TK_CARET)
            diag_error(ps->prev.span,
                       "a concatenation component must be a label or a number, not %s", p);
        else
            diag_error(token->span, "unexpected %s after %s", t, p);
        return;
    case ST_GATHERED:
        if (kind == SPEC_TK_CARET) diag_error(token->span, "a concatenation component cannot be a gathered axis");
        else diag_error(token->span, "unexpected %s after the gathered axis %s", t,
                        quote_range(ps, ps->axis_start, ps->prev.span.end));
        return;
    default: { /* an affine or a merged axis */
        bool merged = ps->stage == ST_MERGED;
        if (kind == SPEC_TK_CARET)
            diag_error(token->span, "a concatenation component cannot be %s",
                       merged ? "a merged axis" : "an affine expression");
        else
            diag_error(token->span, "unexpected %s %s %s", t, merged ? "after the merged axis" : "in the affine axis",
                       quote_range(ps, ps->axis_start, ps->prev.span.end));
        return;
    }
    }
}

/* ---- A note for specs written in NumPy's notation ------------------------------------------ */

/* The tsrc form of a NumPy einsum spec such as "bij,bjk->bik" ("b, i, j; b, j, k => b, i, k"):
 * operands of letters and at most one "...", separated by ',', then "->" and the result.  NULL
 * when the text is not of that form.  Whitespace is ignored, as NumPy ignores it. */
static const char *numpy_translation(SpecParseState *ps) {
    size_t len = ps->where.end - ps->where.start;
    const char *text = ps->text, *arrow = strstr(text, "->");
    if (!arrow || strstr(arrow + 2, "->") || strlen(text) != len) return NULL;
    char *out = arena_alloc(ps->arena, 4 * len + 8);
    size_t n = 0;
    bool in_result = false, first_axis = true, ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        const char *axis = NULL;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            axis = text + i;
        } else if (c == '.' && strncmp(text + i, "...", 3) == 0 && !ellipsis) {
            axis = "...";
            ellipsis = true;
            i += 2;
        } else if (c == ',' && !in_result) {
            n += (size_t)sprintf(out + n, ";");
            first_axis = true, ellipsis = false;
            continue;
        } else if (text + i == arrow) {
            n += (size_t)sprintf(out + n, n ? " =>" : "=>");
            in_result = true, first_axis = true, ellipsis = false;
            i++;
            continue;
        } else {
            return NULL;
        }
        n += (size_t)sprintf(out + n, "%s%.*s", first_axis ? (n ? " " : "") : ", ", axis[0] == '.' ? 3 : 1, axis);
        first_axis = false;
    }
    out[n] = '\0';
    return out;
}

/* After an error in a spec that has "->" but no "=>": how tsrc's notation differs from NumPy's,
 * with the spec rewritten when it is NumPy's notation. */
static void note_numpy_notation(SpecParseState *ps) {
    const char *arrow = strstr(ps->text, "->");
    if (!arrow || strstr(ps->text, "=>")) return;
    uint32_t at = ps->where.start + (uint32_t)(arrow - ps->text);
    Span span = span_make(ps->where.file, at, at + 2);
    const char *tsrc_form = numpy_translation(ps);
    const char *roles = "';' separates operands and '=>' comes before the result; '->' separates a slot's "
                        "input axes from its output axes, as in batch|input->output";
    if (tsrc_form) diag_note(span, "in NumPy's notation? tsrc writes this \"%s\" (%s)", tsrc_form, roles);
    else diag_note(span, "in tsrc, %s", roles);
}

static void report_syntax_error(SpecParseState *ps, int kind, SpecToken token);

void spec_syntax_error(SpecParseState *ps, int kind, SpecToken token) {
    if (!first_error(ps)) return;
    report_syntax_error(ps, kind, token);
    note_numpy_notation(ps);
}

/* The one message for an unexpected token (`kind` 0: the end of the spec). */
static void report_syntax_error(SpecParseState *ps, int kind, SpecToken token) {
    const SpecToken *tok = &token;
    const char *t = quote_token(ps, kind, tok);
    const char *p = quote_token(ps, ps->prev_kind, &ps->prev);

    /* Inside an unfinished axis: say what it still needs. */
    switch (ps->stage) {
    case ST_CARET:
        if (kind == SPEC_TK_LPAREN)
            diag_error(tok->span, "a concatenation component cannot be a merged axis");
        else if (kind == SPEC_TK_UNDERSCORE || kind == SPEC_TK_ELLIPSIS || kind == SPEC_TK_ROWVAR)
            diag_error(tok->span, "a concatenation component must be a label or a number, not %s",
                       t);
        else
            diag_error(ps->caret, "'^' needs a component on both sides");
        return;
    case ST_STRIDE_STAR:
    case ST_DIL_STAR:
        expected(ps, kind, tok, "an axis label", "'*'");
        return;
    case ST_PAD:
        expected(ps, kind, tok, "'+'", arena_printf(ps->arena, "the padding marker %s", p));
        if (ps->prev.span.end > ps->prev.span.start && ps->text && !strstr(ps->text, "=>") &&
            strcmp(p, "'='") == 0) /* `"ab;bc=ac"`: the arrow lost its '>' */
            diag_note(ps->prev.span, "a spec's result comes after '=>': did you mean '=>' here?");
        return;
    case ST_PLUS1:
        expected(ps, kind, tok, "an offset or a kernel axis", "'+'");
        return;
    case ST_PLUS2:
        expected(ps, kind, tok, "a kernel axis", "'+'");
        return;
    case ST_DIL_INT:
        expected(ps, kind, tok, "'*'", arena_printf(ps->arena, "the dilation %s", p));
        return;
    case ST_LPAREN:
        expected(ps, kind, tok, "the outer label of a merged axis '(outer, inner)'", "'('");
        return;
    case ST_MERGE_OUTER:
        if (kind == SPEC_TK_RPAREN) diag_error(tok->span, "a merged axis joins two labels: '(outer, inner)'");
        else expected(ps, kind, tok, "',' and the inner label of a merged axis '(outer, inner)'",
                      arena_printf(ps->arena, "the label %s", p));
        return;
    case ST_MERGE_COMMA:
        expected(ps, kind, tok, "the inner label of a merged axis '(outer, inner)'", "','");
        return;
    case ST_MERGE_INNER:
        if (kind == SPEC_TK_COMMA) diag_error(tok->span, "a merged axis joins exactly two labels: '(outer, inner)'");
        else expected(ps, kind, tok, "')' closing the merged axis", arena_printf(ps->arena, "the label %s", p));
        return;
    case ST_LBRACKET:
        expected(ps, kind, tok, "the number of the operand whose values give the position, as in '[2]'", "'['");
        return;
    case ST_GATHER_INT:
        expected(ps, kind, tok, "']' closing the gathered axis", arena_printf(ps->arena, "the operand %s", p));
        return;
    default:
        break;
    }

    switch (kind) {
    case SPEC_TK_IDENT: case SPEC_TK_INT: case SPEC_TK_UNDERSCORE:
    case SPEC_TK_ELLIPSIS: case SPEC_TK_ROWVAR:
        if (is_complete(ps->stage)) {
            bool axes = ps->prev_kind != SPEC_TK_ELLIPSIS && ps->prev_kind != SPEC_TK_ROWVAR &&
                        kind != SPEC_TK_ELLIPSIS && kind != SPEC_TK_ROWVAR;
            diag_error(tok->span, "expected ',' between %s%s and %s", axes ? "axes " : "",
                       quote_range(ps, ps->axis_start, ps->prev.span.end), t);
            return;
        }
        break;
    case SPEC_TK_CARET: case SPEC_TK_STAR: case SPEC_TK_PLUS: case SPEC_TK_EQ: case SPEC_TK_LT:
    case SPEC_TK_COMMA:
        unexpected_in_axis(ps, kind, tok);
        return;
    case SPEC_TK_LPAREN:
        if (is_complete(ps->stage)) {
            diag_error(tok->span, "expected ',' between %s and a merged axis",
                       quote_range(ps, ps->axis_start, ps->prev.span.end));
            return;
        }
        if (ps->stage != ST_ROW) {
            diag_error(tok->span, "a merged axis '(outer, inner)' is an axis of its own; it cannot be part of "
                       "another axis");
            return;
        }
        break;
    case SPEC_TK_RPAREN:
        diag_error(tok->span, "unexpected ')' outside a merged axis");
        return;
    case SPEC_TK_BAR:
        if (ps->has_bar) {
            diag_error(tok->span, "unexpected second '|' in one slot");
            diag_note(ps->bar, "the batch row ends at this '|'");
            return;
        }
        if (ps->has_arrow) {
            diag_error(tok->span,
                       "unexpected '|' after '->': the batch row comes first (batch|input->output)");
            return;
        }
        break;
    case SPEC_TK_ARROW:
        if (ps->has_arrow) {
            diag_error(tok->span, "unexpected '->' after the output row");
            diag_note(ps->arrow, "the output row starts after this '->'");
            return;
        }
        break;
    case SPEC_TK_SEMI:
        if (ps->has_fat) {
            diag_error(tok->span, "unexpected ';' after '=>': the result is a single slot");
            return;
        }
        break;
    case SPEC_TK_FATARROW:
        if (ps->has_fat) {
            diag_error(tok->span, "unexpected second '=>'");
            diag_note(ps->fat, "the first '=>' is here");
            return;
        }
        break;
    case 0:
        if (ps->prev_kind == TK_START) {
            diag_error(tok->span, "einsum spec is empty");
            return;
        }
        if (!ps->has_fat) {
            diag_error(tok->span, "einsum spec needs '=>' followed by the result slot");
            return;
        }
        break;
    default:
        break;
    }
    diag_error(tok->span, "unexpected %s in einsum spec", t);
}

/* ---- The driver ---------------------------------------------------------------------------- */

/* Records a token the parser accepted: the new Stage and slot picture. */
static void track(SpecParseState *ps, int kind, const SpecToken *token) {
    Stage s = ps->stage;
    switch (kind) {
    case SPEC_TK_COMMA:
        s = s == ST_MERGE_OUTER ? ST_MERGE_COMMA : ST_ROW;
        break;
    case SPEC_TK_LPAREN:
        s = ST_LPAREN;
        break;
    case SPEC_TK_RPAREN:
        s = ST_MERGED;
        break;
    case SPEC_TK_LBRACKET:
        s = ST_LBRACKET;
        break;
    case SPEC_TK_RBRACKET:
        s = ST_GATHERED;
        break;
    case SPEC_TK_BAR:
        s = ST_ROW;
        ps->has_bar = true;
        ps->bar = token->span;
        break;
    case SPEC_TK_ARROW:
        s = ST_ROW;
        ps->has_arrow = true;
        ps->arrow = token->span;
        break;
    case SPEC_TK_FATARROW:
        ps->has_fat = true;
        ps->fat = token->span;
        /* fall through */
    case SPEC_TK_SEMI:
        s = ST_ROW;
        ps->has_bar = ps->has_arrow = false;
        break;
    case SPEC_TK_IDENT:
        s = s == ST_ROW ? ST_LABEL : s == ST_LPAREN ? ST_MERGE_OUTER : s == ST_MERGE_COMMA ? ST_MERGE_INNER
            : s == ST_CARET ? ST_PIECE : s == ST_STRIDE_STAR ? ST_OVER
            : s == ST_DIL_STAR ? ST_KERNEL : s == ST_PLUS1 ? ST_PLUS1_IDENT : ST_PLUS2_IDENT;
        break;
    case SPEC_TK_INT:
        s = s == ST_ROW ? ST_FIXED : s == ST_CARET ? ST_PIECE : s == ST_PLUS1 ? ST_PLUS1_INT
            : s == ST_LBRACKET ? ST_GATHER_INT : ST_DIL_INT;
        break;
    case SPEC_TK_UNDERSCORE: case SPEC_TK_ELLIPSIS: case SPEC_TK_ROWVAR:
        s = ST_ATOM;
        break;
    case SPEC_TK_CARET:
        s = ST_CARET;
        ps->caret = token->span;
        break;
    case SPEC_TK_STAR:
        s = s == ST_LABEL || s == ST_FIXED ? ST_STRIDE_STAR : ST_DIL_STAR;
        break;
    case SPEC_TK_EQ: case SPEC_TK_LT:
        s = ST_PAD;
        break;
    case SPEC_TK_PLUS:
        s = s == ST_PLUS1_INT ? ST_PLUS2 : ST_PLUS1;
        break;
    default:
        break;
    }
    if (ps->stage == ST_ROW && starts_element(kind)) ps->axis_start = token->span.start;
    ps->stage = s;
    ps->prev_kind = kind;
    ps->prev = *token;
}

static void feed(SpecParseState *ps, void *parser, int kind, const SpecToken *token) {
    SpecParse(parser, kind, *token, ps);
    if (!ps->failed) track(ps, kind, token);
}

/* ---- Labels that occur only in the result ---------------------------------------------------- */

/* A label's occurrences in one spec (names are interned per spec: one pointer per name). */
typedef struct LabelCount {
    const char *name;
    Span first_in_result;
    unsigned in_operands, in_result;
} LabelCount;

typedef struct LabelCounts {
    LabelCount *items;
    uint32_t count, cap;
    Arena *arena;
} LabelCounts;

static void count_label(LabelCounts *c, const char *name, Span span, bool in_result) {
    uint32_t i = 0;
    while (i < c->count && c->items[i].name != name) i++;
    if (i == c->count) {
        if (c->count == c->cap) {
            uint32_t cap = c->cap ? c->cap * 2 : 16;
            LabelCount *grown = arena_alloc(c->arena, cap * sizeof *grown);
            if (c->count) memcpy(grown, c->items, c->count * sizeof *grown);
            c->items = grown;
            c->cap = cap;
        }
        c->items[c->count++] = (LabelCount){.name = name};
    }
    LabelCount *l = &c->items[i];
    if (in_result && l->in_result++ == 0) l->first_in_result = span;
    if (!in_result) l->in_operands++;
}

/* Only a plain label of the result counts as in the result: a piece of a concatenation there is
 * padding, sized by its capture or elsewhere, and counts as a use like an operand's. */
static void count_axis_labels(LabelCounts *c, const SpecAxis *axis, bool in_result) {
    switch (axis->kind) {
    case SPEC_AXIS_LABEL: count_label(c, axis->as.label, axis->span, in_result); break;
    case SPEC_AXIS_AFFINE:
        count_label(c, axis->as.affine.over.name, axis->as.affine.over.span, false);
        if (axis->as.affine.has_kernel) count_label(c, axis->as.affine.kernel.name, axis->as.affine.kernel.span, false);
        break;
    case SPEC_AXIS_CONCAT:
        for (uint32_t i = 0; i < axis->as.concat.count; i++)
            if (axis->as.concat.pieces[i].kind == SPEC_PIECE_LABEL)
                count_label(c, axis->as.concat.pieces[i].as.label, axis->as.concat.pieces[i].span, false);
        break;
    default: break;
    }
}

static void count_slot_labels(LabelCounts *c, const SpecSlot *slot, bool in_result) {
    for (int k = 0; k < SPEC_ROW_KINDS; k++) {
        const SpecRow *row = &slot->rows[k];
        for (uint32_t i = 0; i < row->leading_count; i++) count_axis_labels(c, &row->leading[i], in_result);
        for (uint32_t i = 0; i < row->trailing_count; i++) count_axis_labels(c, &row->trailing[i], in_result);
    }
}

/* A label written once, in the result, relates the result to nothing: most often a typo for an
 * operand's label (unless it is captured: spec.h).  The result gets a new axis (its size from elsewhere), so this is a warning,
 * with the summed labels as likely meanings; '_' says a new axis is meant.  A label written
 * twice in the result (a diagonal) is deliberate. */
static bool named_in(const char *name, const char *const *names, const size_t *lens, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        if (strlen(name) == lens[i] && memcmp(name, names[i], lens[i]) == 0) return true;
    return false;
}

void spec_warn_new_axes(Arena *arena, const Spec *spec, const char *const *captured, const size_t *captured_len,
                        uint32_t count) {
    LabelCounts c = {.arena = arena};
    for (uint32_t i = 0; i < spec->rhs_count; i++) count_slot_labels(&c, &spec->rhs[i], false);
    count_slot_labels(&c, &spec->lhs, true);
    for (uint32_t i = 0; i < c.count; i++) {
        const LabelCount *l = &c.items[i];
        if (l->in_operands || l->in_result != 1 || named_in(l->name, captured, captured_len, count)) continue;
        diag_warning(l->first_in_result, "label '%s' occurs only in the result: it is a new axis, along which the "
                     "value is repeated, of a size that comes from elsewhere", l->name);
        char summed[256] = "";
        size_t used = 0;
        unsigned summed_count = 0;
        for (uint32_t j = 0; j < c.count; j++)
            if (c.items[j].in_operands && !c.items[j].in_result && used + strlen(c.items[j].name) + 8 < sizeof summed)
                used += (size_t)snprintf(summed + used, sizeof summed - used, "%s'%s'", summed_count++ ? ", " : "",
                                         c.items[j].name);
        if (summed_count == 1)
            diag_note(l->first_in_result, "did you mean %s? it occurs in the operands but not in the result, so "
                      "it is summed", summed);
        else if (summed_count > 1)
            diag_note(l->first_in_result, "did you mean one of %s? they occur in the operands but not in the "
                      "result, so they are summed", summed);
        diag_note(l->first_in_result, "for a new axis on purpose, write '_' in its place");
    }
    /* The same of a named row variable: one written only in the result takes its axes from
     * elsewhere, and one written only in the operands is summed away; together, most often a
     * misspelling ("b | ..r.. => b | ..s.."). */
    for (int k = 0; k < SPEC_ROW_KINDS; k++) {
        const SpecRowVar *v = &spec->lhs.rows[k].row_var;
        if (v->kind != SPEC_ROWVAR_NAMED || named_in(v->name, captured, captured_len, count)) continue;
        bool in_operands = false;
        const char *summed = NULL;
        for (uint32_t i = 0; i < spec->rhs_count; i++)
            for (int j = 0; j < SPEC_ROW_KINDS; j++) {
                const SpecRowVar *w = &spec->rhs[i].rows[j].row_var;
                if (w->kind != SPEC_ROWVAR_NAMED) continue;
                if (strcmp(w->name, v->name) == 0) in_operands = true;
                bool in_result = false;
                for (int r = 0; r < SPEC_ROW_KINDS; r++)
                    in_result |= spec->lhs.rows[r].row_var.kind == SPEC_ROWVAR_NAMED &&
                                 strcmp(spec->lhs.rows[r].row_var.name, w->name) == 0;
                if (!in_result && !summed) summed = w->name;
            }
        if (in_operands) continue;
        diag_warning(v->span, "row variable '..%s..' occurs only in the result: its axes come from elsewhere (none "
                     "if nothing gives them)", v->name);
        if (summed)
            diag_note(v->span, "did you mean '..%s..'? it occurs in the operands but not in the result, so its axes "
                      "are summed", summed);
    }
}

Spec *spec_parse(Arena *arena, Span where, const char *text, size_t len) {
    return spec_parse_warning(arena, where, text, len, true);
}

Spec *spec_parse_warning(Arena *arena, Span where, const char *text, size_t len, bool warn_new_axes) {
    if (len > UINT32_MAX / 2 || where.start > UINT32_MAX - len) {
        diag_error(point(where), "einsum spec is too long");
        return NULL;
    }
    where.end = where.start + (uint32_t)len;
    char *copy = malloc(len + 1);
    if (!copy) diag_fatal_oom();
    if (len) memcpy(copy, text, len);
    copy[len] = '\0';

    SpecParseState ps = {.arena = arena, .where = where, .text = copy, .stage = ST_ROW,
                         .prev_kind = TK_START};
    ps.prev.span = point(where);
    SpecLexer lexer;
    spec_lex_init(&lexer, copy, len, where);
    ps.multichar = lexer.multichar;
    void *parser = SpecParseAlloc(malloc);
    if (!parser) diag_fatal_oom();
    for (;;) {
        SpecToken token;
        int kind = spec_lex_next(&lexer, &token);
        if (kind < 0) {
            ps.failed = true;
            break;
        }
        /* Single-character mode: adjacent elements are separated by an implied ','. */
        if (!lexer.multichar && starts_element(kind) && is_complete(ps.stage)) {
            SpecToken comma = {.span = point(token.span), .text = "", .len = 0};
            feed(&ps, parser, SPEC_TK_COMMA, &comma);
            if (ps.failed) break;
        }
        feed(&ps, parser, kind, &token);
        if (ps.failed || kind == 0) break;
    }
    SpecParseFree(parser, free);
    free(copy);
    if (ps.failed) return NULL;
    if (!ps.result) { /* cannot happen: the end token either completes the parse or fails */
        diag_error(point_end(where), "einsum spec could not be parsed");
        return NULL;
    }
    if (warn_new_axes) spec_warn_new_axes(arena, ps.result, NULL, NULL, 0);
    return ps.result;
}

/* ---- Dump ---------------------------------------------------------------------------------- */

static void dump_coeff(FILE *out, const SpecCoeff *coeff) {
    if (coeff->kind == SPEC_COEFF_NAME) fputs(coeff->as.name, out);
    else fprintf(out, "%d", (int)coeff->as.value);
}

static void dump_axis(FILE *out, const SpecAxis *axis) {
    switch (axis->kind) {
    case SPEC_AXIS_LABEL:
        fputs(axis->as.label, out);
        break;
    case SPEC_AXIS_FIXED:
        fprintf(out, "%d", (int)axis->as.fixed);
        break;
    case SPEC_AXIS_PLACEHOLDER:
        fprintf(out, "_%u", (unsigned)axis->as.placeholder);
        break;
    case SPEC_AXIS_GATHER:
        fprintf(out, "[%u]", (unsigned)axis->as.gather);
        break;
    case SPEC_AXIS_CONCAT:
        for (uint32_t i = 0; i < axis->as.concat.count; i++) {
            const SpecPiece *piece = &axis->as.concat.pieces[i];
            if (i) fputc('^', out);
            if (piece->kind == SPEC_PIECE_LABEL) fputs(piece->as.label, out);
            else fprintf(out, "%d", (int)piece->as.size);
        }
        break;
    case SPEC_AXIS_AFFINE: {
        const SpecAffine *a = &axis->as.affine;
        if (a->merged) {
            fprintf(out, "(%s, %s)", a->over.name, a->kernel.name);
            break;
        }
        dump_coeff(out, &a->stride);
        fprintf(out, "*%s", a->over.name);
        if (a->has_kernel) {
            if (a->padding == SPEC_PAD_SAME) fputc('=', out);
            else if (a->padding == SPEC_PAD_VALID) fputc('<', out);
            fputc('+', out);
            if (a->has_offset) fprintf(out, "%d+", (int)a->offset);
            dump_coeff(out, &a->dilation);
            fprintf(out, "*%s", a->kernel.name);
        } else if (a->has_offset) {
            fprintf(out, "+%d", (int)a->offset);
        }
        break;
    }
    }
}

static void dump_axes(FILE *out, const SpecAxis *axes, uint32_t count, bool *first) {
    for (uint32_t i = 0; i < count; i++) {
        if (!*first) fputs(", ", out);
        *first = false;
        dump_axis(out, &axes[i]);
    }
}

static void dump_row(FILE *out, const SpecRow *row) {
    if (row->omitted) {
        fputc('~', out);
        return;
    }
    bool first = true;
    dump_axes(out, row->leading, row->leading_count, &first);
    if (row->row_var.kind != SPEC_ROWVAR_NONE) {
        if (!first) fputs(", ", out);
        first = false;
        if (row->row_var.kind == SPEC_ROWVAR_DEFAULT) fputs("...", out);
        else fprintf(out, "..%s..", row->row_var.name);
    }
    dump_axes(out, row->trailing, row->trailing_count, &first);
}

static void dump_slot(FILE *out, const SpecSlot *slot) {
    dump_row(out, &slot->rows[SPEC_ROW_BATCH]);
    fputc('|', out);
    dump_row(out, &slot->rows[SPEC_ROW_INPUT]);
    fputs("->", out);
    dump_row(out, &slot->rows[SPEC_ROW_OUTPUT]);
}

void spec_dump(FILE *out, const Spec *spec) {
    for (uint32_t i = 0; i < spec->rhs_count; i++) {
        if (i) fputs("; ", out);
        dump_slot(out, &spec->rhs[i]);
    }
    fputs(" => ", out);
    dump_slot(out, &spec->lhs);
}
