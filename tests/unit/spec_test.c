/* spec_test.c — unit tests of the einsum spec parser (compiler/front/spec.c and its grammar).
 *
 * What it does: parses valid specs and compares spec_dump() with the expected canonical line;
 * parses invalid specs and compares the first diagnostic line ("t.tsr:1:COL: error: MESSAGE",
 * the spec sitting between quotes in a fake one-line file) and checks that exactly one error
 * was reported; checks a few tree fields and spans directly; and runs robustness loops (random
 * bytes, random token soups, a 1 MB spec, 100000 repeated tokens) that must neither crash nor
 * break the "NULL iff exactly one error" contract.  Requires build/libtsrc.a.  Produces one
 * line per failing case and a last line "N passed, N failed"; exits 1 on any failure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/diag.h"
#include "front/spec.h"

#include "check.h"

typedef struct Result {
    Spec *spec;
    char *diags;     /* everything printed */
    unsigned errors; /* diag_error_count() */
    char *dump;      /* spec_dump() when spec != NULL */
    uint32_t file;
} Result;

/* Parses `spec` (len bytes) placed between quotes in a new fake file "t.tsr". */
static Result parse_bytes(Arena *arena, const char *spec, size_t len) {
    char *file_text = malloc(len + 2);
    file_text[0] = '"';
    memcpy(file_text + 1, spec, len);
    file_text[len + 1] = '"';
    Result r = {0};
    r.file = source_add("t.tsr", file_text, len + 2);
    free(file_text);

    size_t diag_len = 0;
    FILE *diag_out = open_memstream(&r.diags, &diag_len);
    diag_set_stream(diag_out);
    diag_reset();
    r.spec = spec_parse(arena, span_make(r.file, 1, 1 + (uint32_t)len), spec, len);
    r.errors = diag_error_count();
    diag_set_stream(NULL);
    fclose(diag_out);
    if (r.spec) {
        size_t dump_len = 0;
        FILE *dump_out = open_memstream(&r.dump, &dump_len);
        spec_dump(dump_out, r.spec);
        fclose(dump_out);
    }
    return r;
}

static void free_result(Result *r) {
    free(r->diags);
    free(r->dump);
}

static void ok(const char *spec, const char *expected) {
    Arena *arena = arena_new();
    Result r = parse_bytes(arena, spec, strlen(spec));
    char what[512];
    snprintf(what, sizeof what, "ok \"%s\"", spec);
    if (!r.spec || r.errors) {
        char *nl = strchr(r.diags, '\n');
        if (nl) *nl = '\0';
        check(false, what, r.diags);
    } else if (strcmp(r.dump, expected) != 0) {
        char detail[1024];
        snprintf(detail, sizeof detail, "dump\n    got:      %s\n    expected: %s", r.dump,
                 expected);
        check(false, what, detail);
    } else {
        check(true, what, NULL);
    }
    free_result(&r);
    arena_free(arena);
}

static void err_bytes(const char *spec, size_t len, const char *expected) {
    Arena *arena = arena_new();
    Result r = parse_bytes(arena, spec, len);
    char what[512];
    snprintf(what, sizeof what, "error \"%.*s\"", (int)len, spec);
    char *nl = strchr(r.diags, '\n');
    if (nl) *nl = '\0';
    if (r.spec) {
        check(false, what, r.dump ? r.dump : "parsed");
    } else if (r.errors != 1) {
        char detail[64];
        snprintf(detail, sizeof detail, "%u errors reported, expected 1", r.errors);
        check(false, what, detail);
    } else if (strcmp(r.diags, expected) != 0) {
        char detail[1024];
        snprintf(detail, sizeof detail, "\n    got:      %s\n    expected: %s", r.diags, expected);
        check(false, what, detail);
    } else {
        check(true, what, NULL);
    }
    free_result(&r);
    arena_free(arena);
}

static void err(const char *spec, const char *expected) { err_bytes(spec, strlen(spec), expected); }

static void valid_specs(void) {
    /* The classic forms, single-character mode. */
    ok("ij;jk=>ik", "~|~->i, j; ~|~->j, k => ~|~->i, k");
    ok("m n; n p => m p", "~|~->m, n; ~|~->n, p => ~|~->m, p");
    ok("b00c=>c", "~|~->b, 0, 0, c => ~|~->c");
    ok("i;j;k=>ijk", "~|~->i; ~|~->j; ~|~->k => ~|~->i, j, k");
    ok("...|i->j => ...|j", "...|i->j => ...|~->j");
    ok("...|i->j; ...|j->k => ...|i->k", "...|i->j; ...|j->k => ...|i->k");
    ok("..v..|... => ..v..", "..v..|~->... => ~|~->..v..");
    ok("2..v..|... => ..v..", "2, ..v..|~->... => ~|~->..v..");
    ok("_ _ => _", "~|~->_0, _1 => ~|~->_2");
    ok("b|i->o; b|o->p => b|i->p", "b|i->o; b|o->p => b|i->p");
    ok("i->j;j->k=>i->k", "~|i->j; ~|j->k => ~|i->k");
    ok("...->... => ...", "~|...->... => ~|~->...");
    ok("..a..|..b..->..c.. => ..a..|..b..->..c..", "..a..|..b..->..c.. => ..a..|..b..->..c..");
    ok(" \t i j \n => i ", "~|~->i, j => ~|~->i");
    ok("a...b => ...", "~|~->a, ..., b => ~|~->...");
    /* Written empty rows versus omitted ones. */
    ok("|i->j => j", "|i->j => ~|~->j");
    ok("i-> => i", "~|i-> => ~|~->i");
    ok("| => |", "|~-> => |~->");
    ok("a => i ->", "~|~->a => ~|i->");
    ok("-> => ->", "~|-> => ~|->");
    /* An empty slot is the scalar slot, in any position. */
    ok("i =>", "~|~->i => ~|~->");
    ok("=> i", "~|~-> => ~|~->i");
    ok("i;;j => i", "~|~->i; ~|~->; ~|~->j => ~|~->i");
    ok("i; => i", "~|~->i; ~|~-> => ~|~->i");
    ok("i;=>i", "~|~->i; ~|~-> => ~|~->i");
    ok("=>", "~|~-> => ~|~->");
    /* Multichar mode. */
    ok("abc, => abc", "~|~->abc => ~|~->abc");
    ok("a1_b, c => c", "~|~->a1_b, c => ~|~->c");
    ok("heads, d; d, k => heads, k", "~|~->heads, d; ~|~->d, k => ~|~->heads, k");
    ok("a, ..., b => ...", "~|~->a, ..., b => ~|~->...");
    ok("..ab.., i => ..ab..", "~|~->..ab.., i => ~|~->..ab..");
    ok("_, _ => _", "~|~->_0, _1 => ~|~->_2");
    ok("3 , 7 => 3", "~|~->3, 7 => ~|~->3");
    ok("2147483647, a => a", "~|~->2147483647, a => ~|~->a");
    ok("i,j,; k, => i,", "~|~->i, j; ~|~->k => ~|~->i");
    /* Convolutions and strides. */
    ok("... | stride*oh=+kh, stride*ow=+kw, ..ic..; kh, kw, ..ic.. -> oc => ... | oh, ow, oc",
       "...|~->stride*oh=+1*kh, stride*ow=+1*kw, ..ic..; ~|kh, kw, ..ic..->oc => ...|~->oh, ow, oc");
    ok("... | 2*oh<+wh, 2*ow<+ww, ..c..; wh, ww => ... | oh, ow, ..c..",
       "...|~->2*oh<+1*wh, 2*ow<+1*ww, ..c..; ~|~->wh, ww => ...|~->oh, ow, ..c..");
    ok("... | ... -> ..., 2*i + 1 => ... | ... -> ..., i", "...|...->..., 2*i+1 => ...|...->..., i");
    ok("2*o<+1+k; k => o", "~|~->2*o<+1+1*k; ~|~->k => ~|~->o");
    ok("i+k => i", "~|~->1*i+1*k => ~|~->i");
    ok("s*o=+d*k => o", "~|~->s*o=+d*k => ~|~->o");
    ok("2*o=+1+d*k => o", "~|~->2*o=+1+d*k => ~|~->o");
    ok("2 * i => i", "~|~->2*i => ~|~->i");
    ok("s*i+1 => i", "~|~->s*i+1 => ~|~->i");
    ok("i+0 => i", "~|~->1*i+0 => ~|~->i");
    ok("2*i+0+k => i", "~|~->2*i+0+1*k => ~|~->i");
    ok("3*i+2+2*k, 3^a => i", "~|~->3*i+2+2*k, 3^a => ~|~->i");
    ok("i<+k; k => i", "~|~->1*i<+1*k; ~|~->k => ~|~->i");
    /* Concatenation. */
    ok("x, f; y, f => x^y, f", "~|~->x, f; ~|~->y, f => ~|~->x^y, f");
    ok("x, f => 1^x^1, f", "~|~->x, f => ~|~->1^x^1, f");
    ok("i^j^k, l => i", "~|~->i^j^k, l => ~|~->i");
    ok("a ^ 2 => a", "~|~->a^2 => ~|~->a");
    /* Merged axes. */
    ok("b, (g, c) => b, g, c", "~|~->b, (g, c) => ~|~->b, g, c");
    ok("(g,c); c -> (g,o) => (g , o)", "~|~->(g, c); ~|c->(g, o) => ~|~->(g, o)");
}

#define AT(col) "t.tsr:1:" #col ": error: "

static void invalid_specs(void) {
    /* Overall form. */
    err("", AT(2) "einsum spec is empty");
    err("  ", AT(4) "einsum spec is empty");
    err("ij", AT(4) "einsum spec needs '=>' followed by the result slot");
    err("i|", AT(4) "einsum spec needs '=>' followed by the result slot");
    err("i;", AT(4) "einsum spec needs '=>' followed by the result slot");
    err("bij,bjk->bik", AT(14) "einsum spec needs '=>' followed by the result slot");
    err("i => j => k", AT(9) "unexpected second '=>'");
    err("i => j; k", AT(8) "unexpected ';' after '=>': the result is a single slot");
    /* Slots. */
    err("a|b|c => a", AT(5) "unexpected second '|' in one slot");
    err("a->b->c => a", AT(6) "unexpected '->' after the output row");
    err("i -> j -> k", AT(9) "unexpected '->' after the output row");
    err("a->b|c => a", AT(6) "unexpected '|' after '->': the batch row comes first "
                          "(batch|input->output)");
    /* Rows and row variables. */
    err("..v.., ..v.. => i", AT(9) "row variable '..v..' appears twice in one row");
    err("..a.., ..b.. => i", AT(9) "a row can have only one row variable ('..a..' is already here)");
    err("... ... => i", AT(6) "row variable '...' appears twice in one row");
    err("..a..b..c.. => i", AT(8) "a row can have only one row variable ('..a..' is already here)");
    err("i, ..i.. => i", AT(5) "'i' is used both as an axis label and as a row variable");
    err("..k.., a; k => a", AT(12) "'k' is used both as an axis label and as a row variable");
    err("i, j; x^..j.. => i", AT(10) "a concatenation component must be a label or a number, "
                                     "not '..j..'");
    err("..v => v", AT(2) "unclosed row variable: expected '..' after '..v'");
    err("..ab.. => i", AT(2) "unclosed row variable: expected '..' after '..a'");
    err("..abc, => i", AT(2) "unclosed row variable: expected '..' after '..abc'");
    err(".. => i", AT(2) "expected a row variable name after '..'");
    err("i, + j => i", AT(5) "expected an axis, a row variable or the end of the row before '+'");
    err("i | , => i", AT(6) "expected an axis, a row variable or the end of the row before ','");
    err("i,, => i", AT(4) "expected an axis, a row variable or the end of the row before ','");
    /* Missing commas. */
    err("i j, k => i", AT(4) "expected ',' between axes 'i' and 'j'");
    err("i, j k => i", AT(7) "expected ',' between axes 'j' and 'k'");
    err("2*i + 1 k, a => i", AT(10) "expected ',' between axes '2*i + 1' and 'k'");
    err("i => ..., j k", AT(14) "expected ',' between axes 'j' and 'k'");
    err("... j, a => i", AT(6) "expected ',' between '...' and 'j'");
    err("2..v.., a => a", AT(3) "expected ',' between '2' and '..v..'");
    /* Axes. */
    err("o+1+k => o", AT(4) "an offset needs a stride larger than it, as in '2*o+1'");
    err("2*o+2+k => o", AT(6) "offset 2 must be smaller than the stride 2");
    err("i+1 => i", AT(4) "an offset needs a stride larger than it, as in '2*i+1'");
    err("2*i=+1, a => i", AT(5) "padding marker '=' needs a kernel after the '+'");
    err("0*i+k => i", AT(2) "stride must be at least 1");
    err("i+0*k => i", AT(4) "dilation must be at least 1");
    err("2* => i", AT(5) "expected an axis label after '*' before '=>'");
    err("2*", AT(4) "einsum spec ends too early: expected an axis label after '*'");
    err("i*2 => i", AT(4) "expected an axis label after '*' before '2'");
    err("i=j => i", AT(4) "expected '+' after the padding marker '=' before 'j'");
    err("i+ => i", AT(5) "expected an offset or a kernel axis after '+' before '=>'");
    err("2*i+1+ => i", AT(9) "expected a kernel axis after '+' before '=>'");
    err("2*i+1+2 => i", AT(10) "expected '*' after the dilation '2' before '=>'");
    err("2*i+1+k*, a => i", AT(10) "expected an axis label after '*' before ','");
    err("2*i*j => i", AT(5) "unexpected '*' in the affine axis '2*i'");
    err("2*i+k+j => i", AT(7) "unexpected '+' in the affine axis '2*i+k'");
    err("3+k, a => i", AT(3) "unexpected '+' after the fixed index '3'");
    err("...+i => i", AT(5) "unexpected '+' after '...'");
    err("99999999999, a => a", AT(2) "number too large");
    err("2147483648, a => a", AT(2) "number too large");
    /* Concatenation. */
    err("a^ , b => a", AT(3) "'^' needs a component on both sides");
    err("^a, b => a", AT(2) "'^' needs a component on both sides");
    err("a^", AT(3) "'^' needs a component on both sides");
    err("a^^b => a", AT(3) "'^' needs a component on both sides");
    err("2*i^j, a => i", AT(5) "a concatenation component cannot be an affine expression");
    err("i^j+k => i", AT(5) "a concatenation component cannot be an affine expression");
    err("_^i, a => i", AT(2) "a concatenation component must be a label or a number, not '_'");
    err("i^_, a => i", AT(4) "a concatenation component must be a label or a number, not '_'");
    err("0^i, a => i", AT(2) "a concatenated size must be at least 1");
    /* Merged axes. */
    err("(g) => g", AT(4) "a merged axis joins two labels: '(outer, inner)'");
    err("(gc) => g", AT(5) "a merged axis joins two labels: '(outer, inner)'"); /* '(' is multichar */
    err("(g, c, d) => g", AT(7) "a merged axis joins exactly two labels: '(outer, inner)'");
    err("(g c) => g", AT(5) "expected ',' and the inner label of a merged axis '(outer, inner)' after the label "
                          "'g' before 'c'");
    err("( => g", AT(4) "expected the outer label of a merged axis '(outer, inner)' after '(' before '=>'");
    err("(g, 2) => g", AT(6) "expected the inner label of a merged axis '(outer, inner)' after ',' before '2'");
    err("(g, c => g", AT(8) "expected ')' closing the merged axis after the label 'c' before '=>'");
    err("a(g, c) => g", AT(3) "expected ',' between 'a' and a merged axis");
    err("(g, c)^a => g", AT(8) "a concatenation component cannot be a merged axis");
    err("a^(g, c) => g", AT(4) "a concatenation component cannot be a merged axis");
    err("2*(g, c) => g", AT(4) "expected an axis label after '*' before '('");
    err("(g, c)*2 => g", AT(8) "unexpected '*' after the merged axis '(g, c)'");
    err("(g, g) => g", AT(6) "a merged axis joins two different labels, not 'g' twice");
    err("(g, ..c..) => g", AT(6) "expected the inner label of a merged axis '(outer, inner)' after ',' before "
                               "'..c..'");
    err("a) => a", AT(3) "unexpected ')' outside a merged axis");
    /* Characters. */
    err("a & b, c => a", AT(4) "'&' is reserved");
    err("i#j => i", AT(3) "unexpected character '#' in spec");
    err("i\xffj => i", AT(3) "unexpected byte 0xFF in spec (not valid UTF-8)");
    err_bytes("i\0j => i", 8, AT(3) "unexpected byte 0x00 in spec");
    err("i\"j => i", AT(3) "unexpected character '\"' in spec");
    err("\\", AT(2) "unexpected character '\\' in spec");
    err("i - j => i", AT(4) "unexpected character '-' in spec");
    err("i > j", AT(4) "unexpected character '>' in spec");
    err("i. => i", AT(3) "unexpected character '.' in spec");
    err("\xc3\xa9 => i", AT(2) "unexpected character '\xc3\xa9' in spec");
    /* The first error wins, even when the lexer would find a later one. */
    err("i j, # => i", AT(4) "expected ',' between axes 'i' and 'j'");
}

/* Tree fields and spans that later stages read. */
static void tree_fields(void) {
    Arena *arena = arena_new();

    Result r = parse_bytes(arena, "ij;jk=>ik", 9);
    Spec *s = r.spec;
    check(s && s->rhs_count == 2 && !s->multichar, "ij;jk=>ik: two operands, single-char", NULL);
    if (s) {
        const SpecRow *out = &s->rhs[0].rows[SPEC_ROW_OUTPUT];
        check(s->rhs[0].rows[SPEC_ROW_BATCH].omitted && s->rhs[0].rows[SPEC_ROW_INPUT].omitted &&
                  !out->omitted,
              "ij: batch and input omitted, output written", NULL);
        check(out->row_var.kind == SPEC_ROWVAR_NONE && out->leading_count == 0 &&
                  out->trailing_count == 2,
              "ij: closed row, axes trailing", NULL);
        check(out->trailing_count == 2 && out->trailing[1].kind == SPEC_AXIS_LABEL &&
                  strcmp(out->trailing[1].as.label, "j") == 0 &&
                  out->trailing[1].span.start == 2 && out->trailing[1].span.end == 3,
              "ij: span of j", NULL);
        check(s->lhs.span.start == 8 && s->lhs.span.end == 10, "ik: slot span", NULL);
        check(s->span.file == r.file && s->span.start == 1 && s->span.end == 10, "spec span",
              NULL);
    }
    free_result(&r);

    const char *conv = "..b..|2*o<+1+d*k, ...; k => o";
    r = parse_bytes(arena, conv, strlen(conv));
    s = r.spec;
    check(s && s->multichar, "conv: multichar", NULL);
    if (s) {
        const SpecRow *b = &s->rhs[0].rows[SPEC_ROW_BATCH];
        const SpecRow *o = &s->rhs[0].rows[SPEC_ROW_OUTPUT];
        check(b->row_var.kind == SPEC_ROWVAR_NAMED && strcmp(b->row_var.name, "b") == 0 &&
                  b->row_var.span.start == 1 && b->row_var.span.end == 6,
              "conv: named row variable and its span", NULL);
        check(o->leading_count == 1 && o->row_var.kind == SPEC_ROWVAR_DEFAULT &&
                  o->trailing_count == 0,
              "conv: leading axis before '...'", NULL);
        if (o->leading_count == 1) {
            const SpecAxis *ax = &o->leading[0];
            const SpecAffine *a = &ax->as.affine;
            check(ax->kind == SPEC_AXIS_AFFINE && a->stride.kind == SPEC_COEFF_INT &&
                      a->stride.as.value == 2 && !a->stride.implicit &&
                      a->padding == SPEC_PAD_VALID && a->has_offset && a->offset == 1 &&
                      a->has_kernel && a->dilation.kind == SPEC_COEFF_NAME &&
                      strcmp(a->dilation.as.name, "d") == 0 && strcmp(a->kernel.name, "k") == 0,
                  "conv: affine fields", NULL);
            check(ax->span.start == 7 && ax->span.end == 17 && a->over.span.start == 9 &&
                      a->padding_span.start == 10 && a->offset_span.start == 12 &&
                      a->kernel.span.start == 16,
                  "conv: affine spans", NULL);
        }
        check(o->span.start == 7 && o->span.end == 22, "conv: output row span", NULL);
    }
    free_result(&r);

    r = parse_bytes(arena, "_ a _ => _", 10);
    s = r.spec;
    check(s && s->placeholder_count == 3 &&
              s->rhs[0].rows[SPEC_ROW_OUTPUT].trailing[2].as.placeholder == 1,
          "placeholders numbered in text order", NULL);
    free_result(&r);

    r = parse_bytes(arena, "|i->j => j", 10);
    s = r.spec;
    check(s && !s->rhs[0].rows[SPEC_ROW_BATCH].omitted &&
              s->rhs[0].rows[SPEC_ROW_BATCH].span.start == 1 &&
              s->rhs[0].rows[SPEC_ROW_BATCH].span.end == 1,
          "written empty batch row: a point at '|'", NULL);
    free_result(&r);

    /* The note of a two-row-variable error points at the first one. */
    r = parse_bytes(arena, "..a.., ..b.. => i", 17);
    check(r.diags && strstr(r.diags, "t.tsr:1:2: note: '..a..' is here") != NULL,
          "note at the first row variable", r.diags);
    free_result(&r);
    r = parse_bytes(arena, "i, ..i.. => i", 13);
    check(r.diags && strstr(r.diags, "t.tsr:1:2: note: 'i' is an axis label here") != NULL,
          "note at the other use of a name", r.diags);
    free_result(&r);
    arena_free(arena);
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* The contract on any input: NULL iff exactly one error was reported. */
static bool contract(Arena *arena, const char *text, size_t len, FILE *sink) {
    diag_set_stream(sink);
    diag_reset();
    Spec *spec = spec_parse(arena, span_make(0, 0, (uint32_t)len), text, len);
    unsigned errors = diag_error_count();
    diag_set_stream(NULL);
    if (spec) spec_dump(sink, spec);
    return spec ? errors == 0 : errors == 1;
}

static void robustness(void) {
    FILE *sink = fopen("/dev/null", "w");
    Arena *arena = arena_new();
    char buf[128];
    unsigned bad = 0;
    for (int i = 0; i < 4000; i++) {
        size_t len = rnd(65);
        for (size_t j = 0; j < len; j++) buf[j] = (char)rnd(256);
        if (!contract(arena, buf, len, sink)) bad++;
    }
    check(bad == 0, "random bytes keep the contract", NULL);

    static const char *const soup[] = {
        "i", "j", "abc", "0", "7", "12", "_", "...", "..v..", "..w..", ",", "|", "->", "=>",
        ";", "+", "*", "^", "=", "<", " ", "&", "..", ".", "-", ">", "2147483648", "..x",
    };
    const size_t soup_count = sizeof soup / sizeof soup[0];
    bad = 0;
    unsigned parsed = 0;
    for (int i = 0; i < 20000; i++) {
        size_t len = 0, tokens = rnd(16);
        for (size_t j = 0; j < tokens; j++) {
            const char *t = soup[rnd((uint32_t)soup_count)];
            size_t n = strlen(t);
            if (len + n + 1 >= sizeof buf) break;
            memcpy(buf + len, t, n);
            len += n;
            if (rnd(3) == 0) buf[len++] = ' ';
        }
        diag_reset();
        if (!contract(arena, buf, len, sink)) bad++;
        else if (diag_error_count() == 0) parsed++;
        if (i % 1000 == 999) { /* keep the arena small */
            arena_free(arena);
            arena = arena_new();
        }
    }
    check(bad == 0, "token soups keep the contract", NULL);
    check(parsed > 0, "some token soups parse", NULL);

    /* Big inputs finish promptly. */
    size_t big = 1 << 20;
    char *text = malloc(big + 16);
    clock_t t0 = clock();
    for (size_t j = 0; j + 2 <= big; j += 2) memcpy(text + j, "i,", 2);
    memcpy(text + big - 4, "=>i,", 4);
    bool ok1 = contract(arena, text, big, sink);
    for (size_t j = 0; j < big; j++) text[j] = (char)('a' + j % 26);
    memcpy(text + big - 3, "=>a", 3);
    bool ok2 = contract(arena, text, big, sink);
    for (size_t j = 0; j < big; j++) text[j] = "abcdefgh"[j % 8];
    text[big - 1] = '#';
    bool ok3 = contract(arena, text, big, sink);
    for (size_t j = 0; j < big; j++) text[j] = ' ';
    bool ok4 = contract(arena, text, big, sink);
    /* 100000 distinct names, 100000 operand slots, a 100000-piece concatenation. */
    size_t n = 0;
    for (int j = 0; j < 100000; j++) n += (size_t)sprintf(text + n, "a%d,", j);
    n += (size_t)sprintf(text + n, "=>a1");
    bool ok5 = contract(arena, text, n, sink);
    n = 0;
    for (int j = 0; j < 100000; j++) n += (size_t)sprintf(text + n, "i;");
    n += (size_t)sprintf(text + n, "i=>i");
    bool ok6 = contract(arena, text, n, sink);
    n = 0;
    for (int j = 0; j < 100000; j++) n += (size_t)sprintf(text + n, "x^");
    n += (size_t)sprintf(text + n, "1=>x");
    bool ok7 = contract(arena, text, n, sink);
    double seconds = (double)(clock() - t0) / CLOCKS_PER_SEC;
    check(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7, "big specs keep the contract", NULL);
    char detail[64];
    snprintf(detail, sizeof detail, "%.1f s", seconds);
    check(seconds < 20.0, "big specs finish promptly", detail);
    free(text);
    arena_free(arena);
    fclose(sink);
}

int main(void) {
    diag_set_max_errors(1000000);
    valid_specs();
    invalid_specs();
    tree_fields();
    robustness();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
