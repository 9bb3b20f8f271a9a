/* spec.h — einsum spec strings: their syntax tree, parser entry point and canonical dump.
 *
 * What it does: an einsum spec is the text inside a string literal such as
 * "...|i->j; ...|j->k => ...|i->k".  spec_parse() turns those bytes into a Spec tree (a list of
 * operand slots and one result slot, each made of three rows of axes), reporting syntax and
 * simple semantic errors at the exact byte inside the literal; spec_dump() prints the tree in one
 * canonical line for --dump-ast golden files.  Requires arena.h (every node lives in the caller's
 * arena) and diag.h (spans, errors).  The lexer (grammar/spec_lexer.re) and the Lemon grammar
 * (grammar/spec_parser.y, %name SpecParse, tokens SPEC_TK_*) are internal to this module; the
 * second half of this header is their interface and is not for other stages.
 *
 * The spec language (decisions; docs/language.md copies them):
 *   spec   := slot (';' slot)* '=>' slot      one or more operand slots, then the result slot.
 *   slot   := batch '|' input '->' output  |  batch '|' output  |  input '->' output  |  output
 *             Rows that are not written are "omitted": closed and empty, and recorded as omitted.
 *             A written row may be empty ("|i->j": the batch row is written and empty).  A slot
 *             must contain at least one token, so a scalar operand is written e.g. "|" or "->".
 *   row    := elements separated by ',' (multichar mode; a trailing ',' is allowed).  At most one
 *             element is a row variable: "..." (the row kind's own variable: every "..." in batch
 *             rows of the spec is the same variable, likewise for input and output rows) or
 *             "..name.." (a named variable shared wherever the name appears).  Axes before the
 *             row variable are "leading", axes after it "trailing"; a row without a row variable
 *             is closed and all its axes are trailing (rows align at the right).
 *   axis   := label                              i, heads
 *           | INT                                fixed index: the axis is read/written at INT
 *           | '_'                                placeholder: EACH '_' is its own fresh axis
 *           | piece ('^' piece)+                 concatenation; a piece is a label or an INT
 *                                                (an INT piece is a fixed-size skipped/padded part)
 *           | [coeff '*'] over pad '+' [INT '+'] [coeff '*'] kernel
 *                                                affine (convolution) axis: stride*over, padding
 *                                                marker pad = '=' (padded) | '<' (valid) | nothing
 *                                                (unspecified), optional offset, dilation*kernel
 *           | [coeff '*'] over ['+' INT]         strided axis without kernel, optional offset
 *             (the plain label form "over" alone is a label)
 *           | '(' label ',' label ')'            merged axis: the two labels' axes as one, the
 *                                                first the outer (slower) one, the second the
 *                                                inner: index outer*size(inner) + inner
 *           | '[' INT ']'                        gathered axis: read at the position operand INT's
 *                                                value gives (an operand's axis only)
 *   coeff  := INT | IDENT                        an IDENT is a compile-time value spliced later
 *   An omitted stride or dilation is 1.  The offset must satisfy 0 <= offset < stride when the
 *   stride is a number; strides, dilations and concatenated sizes must be at least 1; a padding
 *   marker needs a kernel.  Integers must fit in int32.  A name may not be both an axis label and
 *   a row variable in one spec (coefficient names are a separate namespace).
 *   Lexing modes, chosen once for the whole string: MULTICHAR iff the text contains any of
 *   ',' '*' '+' '^' '&' '<' '(' ')' '[' ']' or a '=' not immediately followed by '>'; otherwise
 *   SINGLE-CHAR.
 *   Multichar: identifiers [A-Za-z][A-Za-z0-9_]*, integers [0-9]+, whitespace separates, two
 *   adjacent axes without ',' are an error, '&' is reserved.  Single-char: each letter is one
 *   axis, each digit one fixed index ("b00c" is four axes), '_' one placeholder, whitespace is
 *   ignored, row variable names are one letter ("..v..").  Any other byte is an error.
 *   Only the first error in a spec is reported. */
#ifndef TSR_SPEC_H
#define TSR_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/arena.h"
#include "base/diag.h"

/* ---- The tree (what later stages read) ---------------------------------------------------- */

/* A stride or dilation: a number or the name of a compile-time value. */
typedef enum SpecCoeffKind {
    SPEC_COEFF_INT,  /* as.value */
    SPEC_COEFF_NAME, /* as.name */
} SpecCoeffKind;

typedef struct SpecCoeff {
    SpecCoeffKind kind;
    bool implicit; /* not written: kind is SPEC_COEFF_INT, value 1, span is a point */
    union {
        int32_t value;
        const char *name;
    } as;
    Span span;
} SpecCoeff;

typedef enum SpecPadding {
    SPEC_PAD_UNSPECIFIED, /* plain '+' */
    SPEC_PAD_SAME,        /* '=+': padded so the output keeps the input's size */
    SPEC_PAD_VALID,       /* '<+': only windows that fit entirely */
} SpecPadding;

/* A label written in an affine axis (over or kernel). */
typedef struct SpecLabel {
    const char *name;
    Span span;
} SpecLabel;

/* stride*over[pad]+[offset+]dilation*kernel, or stride*over[+offset] when has_kernel is false
 * (then padding is SPEC_PAD_UNSPECIFIED and dilation/kernel are unused).  A merged axis
 * "(over, kernel)" is one too, `merged`, with the kernel's size as its stride (0 until shapes
 * are closed, then filled in with kernel_size), dilation 1, no offset and padding valid: the
 * windows lie side by side and cover the axis exactly. */
typedef struct SpecAffine {
    SpecCoeff stride;
    SpecLabel over;
    SpecPadding padding;
    Span padding_span;  /* the marker; a point when unspecified */
    int32_t offset;     /* 0 when not written */
    bool has_offset;
    Span offset_span;   /* a point when not written */
    bool has_kernel;
    bool merged; /* "(over, kernel)" */
    SpecCoeff dilation;
    SpecLabel kernel;
    /* Filled in by elaboration in an application's copy once shapes are closed: the sizes
     * inferred for `over` and `kernel` (1 without a kernel); padding is then settled. */
    uint32_t over_size, kernel_size;
} SpecAffine;

/* One component of a concatenation. */
typedef enum SpecPieceKind {
    SPEC_PIECE_LABEL, /* as.label: an axis label */
    SPEC_PIECE_SIZE,  /* as.size: a fixed-size piece that is skipped/padded */
} SpecPieceKind;

typedef struct SpecPiece {
    SpecPieceKind kind;
    union {
        const char *label;
        int32_t size;
    } as;
    Span span;
    /* Filled in by elaboration in an application's copy once shapes are closed: the size
     * inferred for the piece (a label's; an integer piece's own). */
    uint32_t inferred_size;
} SpecPiece;

typedef enum SpecAxisKind {
    SPEC_AXIS_LABEL,       /* as.label */
    SPEC_AXIS_FIXED,       /* as.fixed: the index */
    SPEC_AXIS_PLACEHOLDER, /* as.placeholder: its number in the spec (0, 1, ... in text order) */
    SPEC_AXIS_AFFINE,      /* as.affine */
    SPEC_AXIS_CONCAT,      /* as.concat: two or more pieces */
    SPEC_AXIS_GATHER,      /* as.gather: `[n]`, an operand's axis read at the position that operand
                              n's value gives at each point (an embedding's table read at the
                              ids); for shapes, an axis of its own, as a placeholder */
} SpecAxisKind;

typedef struct SpecAxis {
    SpecAxisKind kind;
    Span span; /* the whole axis expression */
    union {
        const char *label;
        int32_t fixed;
        uint32_t placeholder;
        SpecAffine affine;
        struct {
            SpecPiece *pieces;
            uint32_t count;
        } concat;
        uint32_t gather; /* the operand, from 1 */
    } as;
} SpecAxis;

typedef enum SpecRowVarKind {
    SPEC_ROWVAR_NONE,    /* closed row */
    SPEC_ROWVAR_DEFAULT, /* "...": the row kind's own variable */
    SPEC_ROWVAR_NAMED,   /* "..name..": name */
} SpecRowVarKind;

typedef struct SpecRowVar {
    SpecRowVarKind kind;
    const char *name; /* SPEC_ROWVAR_NAMED only, else NULL */
    Span span;        /* a point when kind is SPEC_ROWVAR_NONE */
} SpecRowVar;

typedef enum SpecRowKind { SPEC_ROW_BATCH, SPEC_ROW_INPUT, SPEC_ROW_OUTPUT, SPEC_ROW_KINDS } SpecRowKind;

typedef struct SpecRow {
    SpecRowKind kind;
    bool omitted; /* not written (then closed and empty, span a point at the slot's start) */
    Span span;    /* from the first to the last element; a point for an empty row */
    SpecAxis *leading; /* axes before the row variable (none when there is no row variable) */
    uint32_t leading_count;
    SpecRowVar row_var;
    SpecAxis *trailing; /* axes after the row variable, or all axes of a closed row */
    uint32_t trailing_count;
} SpecRow;

typedef struct SpecSlot {
    SpecRow rows[SPEC_ROW_KINDS]; /* indexed by SpecRowKind */
    Span span;
} SpecSlot;

typedef struct Spec {
    SpecSlot *rhs; /* the operand slots, in order (at least one) */
    uint32_t rhs_count;
    SpecSlot lhs;  /* the result slot */
    uint32_t placeholder_count;
    bool multichar; /* which lexing mode the text was read in */
    Span span;      /* the whole text */
} Spec;

/* Parse the spec text = the raw source bytes between the quotes of a string literal.  `where`
 * is the span of those bytes in the file: text[0] is at byte where.start, so every error points
 * at the exact character inside the string literal.  Returns NULL after reporting at least one
 * error through diag_error (never crashes, never loops, on any bytes). */
Spec *spec_parse(Arena *arena, Span where, const char *text, size_t len);

/* spec_parse, with the warning about a label written only in the result (a new axis: most often
 * a typo) given or not: not in an operator's backward block, where an operand's gradient is
 * broadcast back along the axes its forward summed (`g1 =+ g ~logic:"i => i, j"`). */
Spec *spec_parse_warning(Arena *arena, Span where, const char *text, size_t len, bool warn_new_axes);

/* That warning for a parsed spec, leaving out the labels and row variables named in `captured`
 * (`count` string literal nodes' texts, `captured_len` their lengths): a captured name given a
 * size by `set_dim` is a new axis on purpose (`t ++ "i => i, k" ["k"]`). */
void spec_warn_new_axes(Arena *arena, const Spec *spec, const char *const *captured, const size_t *captured_len,
                        uint32_t count);

/* A stable, canonical one-line rendering (no newline): slots joined by "; ", then " => " and
 * the result.  A slot is always "batch|input->output"; an omitted row is "~", a written empty
 * row is nothing.  Elements are joined by ", ": labels as written, fixed indices as numbers,
 * placeholders "_0", "_1", ... (numbered in text order), row variables "..." or "..name..",
 * concatenations "a^3^b", affine axes "S*over[=|<]+[offset+]D*kernel" with S and D always
 * written (1 when omitted) and the offset when it was written, strided axes "S*over[+offset]",
 * merged axes "(over, kernel)". */
void spec_dump(FILE *out, const Spec *spec);

/* ---- Internal: the lexer and grammar of this module --------------------------------------- */

/* One token.  text/len point into the parser's private copy of the spec text (for IDENT: the
 * name; for ROWVAR: the name between the dots; otherwise the token's bytes). */
typedef struct SpecToken {
    Span span;
    int32_t value; /* INT */
    const char *text;
    uint32_t len;
} SpecToken;

typedef struct SpecLexer {
    const unsigned char *base;   /* text copy, NUL at base[len] */
    const unsigned char *cursor;
    const unsigned char *limit;  /* base + len */
    Span where;
    bool multichar;
} SpecLexer;

/* True when the text is lexed in multichar mode (see above). */
bool spec_lex_is_multichar(const char *text, size_t len);
/* text must have a NUL at text[len]. */
void spec_lex_init(SpecLexer *lexer, const char *text, size_t len, Span where);
/* The next token's SPEC_TK_* code, 0 at the end (repeatedly), or -1 after reporting an error. */
int spec_lex_next(SpecLexer *lexer, SpecToken *token);

/* The parse state passed to every grammar action (%extra_argument). */
typedef struct SpecParseState SpecParseState;

/* One element of a row while it is being parsed: an axis or a row variable. */
typedef struct SpecElem {
    bool is_row_var;
    SpecAxis *axis;    /* !is_row_var */
    SpecRowVar row_var; /* is_row_var */
} SpecElem;

typedef struct SpecElemList SpecElemList;
typedef struct SpecPieceList SpecPieceList;
typedef struct SpecSlotList SpecSlotList;

/* A stride-or-dilation coefficient with its label: "coeff*label" or just "label". */
typedef struct SpecTerm {
    SpecCoeff coeff;
    SpecToken label;
} SpecTerm;

typedef struct SpecPadMark {
    SpecPadding padding;
    Span span;
} SpecPadMark;

SpecAxis *spec_build_label(SpecParseState *ps, SpecToken name);
SpecAxis *spec_build_fixed(SpecParseState *ps, SpecToken number);
SpecAxis *spec_build_placeholder(SpecParseState *ps, SpecToken underscore);
SpecPieceList *spec_build_pieces(SpecParseState *ps, SpecPieceList *list, SpecToken piece,
                                 bool is_size); /* list NULL: start a new list */
SpecAxis *spec_build_concat(SpecParseState *ps, SpecPieceList *pieces);
SpecCoeff spec_build_coeff(SpecParseState *ps, SpecToken token, bool is_name);
SpecTerm spec_build_term(SpecParseState *ps, const SpecCoeff *coeff, SpecToken label);
SpecAxis *spec_build_affine(SpecParseState *ps, SpecTerm over, SpecPadMark pad,
                            const SpecToken *offset, const SpecTerm *kernel);
SpecAxis *spec_build_gather(SpecParseState *ps, SpecToken lbracket, SpecToken operand, SpecToken rbracket);
SpecAxis *spec_build_merged(SpecParseState *ps, SpecToken lparen, SpecToken outer, SpecToken inner,
                            SpecToken rparen);
SpecElem spec_build_axis_elem(SpecAxis *axis);
SpecElem spec_build_row_var(SpecParseState *ps, SpecToken token, bool named);
SpecElemList *spec_build_elems(SpecParseState *ps, SpecElemList *list, SpecElem elem);
/* A NULL row has no elements.  The batch row is written iff bar is given, the input row iff
 * arrow is given, the output row always. */
SpecSlot *spec_build_slot(SpecParseState *ps, SpecElemList *batch, SpecElemList *input,
                          SpecElemList *output, const SpecToken *bar, const SpecToken *arrow);
SpecSlotList *spec_build_slots(SpecParseState *ps, SpecSlotList *list, SpecSlot *slot);
void spec_build_spec(SpecParseState *ps, SpecSlotList *rhs, SpecSlot *lhs);
/* Called from %syntax_error: reports the one error for an unexpected token (major 0: end). */
void spec_syntax_error(SpecParseState *ps, int major, SpecToken token);
void spec_stack_overflow(SpecParseState *ps);

/* Generated by Lemon from grammar/spec_parser.y. */
void *SpecParseAlloc(void *(*alloc)(size_t));
void SpecParseFree(void *parser, void (*release)(void *));
void SpecParse(void *parser, int major, SpecToken minor, SpecParseState *ps);

#endif
