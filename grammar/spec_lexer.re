/* spec_lexer.re — re2c lexer for einsum spec strings, in its two modes.
 *
 * What it does: cuts the bytes of one spec (the text between the quotes of a string literal)
 * into SPEC_TK_* tokens for grammar/spec_parser.y.  The mode is chosen once for the whole text
 * by spec_lex_is_multichar(): MULTICHAR when the text has any of , * + ^ & < ( ) [ ] or an '=' that
 * is not part of "=>", SINGLE-CHAR otherwise (each letter and each digit is its own token there,
 * and row variable names are one letter).  Lexical errors (stray bytes, '&', unclosed "..v..",
 * numbers over int32) are reported here through diag_error at the exact byte, and
 * spec_lex_next() then returns -1.  Requires spec.h (SpecLexer, SpecToken), the generated
 * spec_parser.h (token codes) and a NUL byte at text[len] (the sentinel: a NUL before the end
 * is an ordinary bad byte).  Produces build/gen/spec_lexer.c. */
#include <stdint.h>
#include <string.h>

#include "front/spec.h"
#include "spec_parser.h"

bool spec_lex_is_multichar(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        switch (text[i]) {
        case ',': case '*': case '+': case '^': case '&': case '<': case '(': case ')': case '[': case ']':
            return true;
        case '=':
            if (i + 1 >= len || text[i + 1] != '>') return true;
            break;
        default:
            break;
        }
    }
    return false;
}

void spec_lex_init(SpecLexer *lexer, const char *text, size_t len, Span where) {
    lexer->base = (const unsigned char *)text;
    lexer->cursor = lexer->base;
    lexer->limit = lexer->base + len;
    lexer->where = where;
    lexer->multichar = spec_lex_is_multichar(text, len);
}

static Span span_of(const SpecLexer *lexer, const unsigned char *from, const unsigned char *to) {
    uint32_t start = lexer->where.start + (uint32_t)(from - lexer->base);
    return span_make(lexer->where.file, start, start + (uint32_t)(to - from));
}

static void set_token(const SpecLexer *lexer, SpecToken *token, const unsigned char *from,
                      const unsigned char *to) {
    token->span = span_of(lexer, from, to);
    token->value = 0;
    token->text = (const char *)from;
    token->len = (uint32_t)(to - from);
}

/* Stop lexing after an error: later calls return the end. */
static int fail(SpecLexer *lexer) {
    lexer->cursor = lexer->limit;
    return -1;
}

static int bad_byte(SpecLexer *lexer, const unsigned char *at) {
    unsigned c = *at;
    Span span = span_of(lexer, at, at + 1);
    int n = 0; /* length of a valid UTF-8 sequence at `at` */
    if (c >= 0xc2 && c <= 0xf4) {
        n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        for (int i = 1; i < n; i++)
            if (at + i >= lexer->limit || (at[i] & 0xc0) != 0x80) n = 0;
    }
    if (c > 0x20 && c < 0x7f) diag_error(span, "unexpected character '%c' in spec", (int)c);
    else if (n) diag_error(span_of(lexer, at, at + n), "unexpected character '%.*s' in spec", n, (const char *)at);
    else diag_error(span, "unexpected byte 0x%02X in spec%s", c, c >= 0x80 ? " (not valid UTF-8)" : "");
    return fail(lexer);
}

static int number(SpecLexer *lexer, SpecToken *token, const unsigned char *from,
                  const unsigned char *to) {
    int64_t value = 0;
    for (const unsigned char *p = from; p < to; p++) {
        value = value * 10 + (*p - '0');
        if (value > INT32_MAX) {
            diag_error(span_of(lexer, from, to), "number too large");
            return fail(lexer);
        }
    }
    set_token(lexer, token, from, to);
    token->value = (int32_t)value;
    return SPEC_TK_INT;
}

/* "..name.." : the token's text is the name. */
static int row_var(SpecLexer *lexer, SpecToken *token, const unsigned char *from,
                   const unsigned char *to) {
    set_token(lexer, token, from, to);
    token->text = (const char *)from + 2;
    token->len = (uint32_t)(to - from - 4);
    return SPEC_TK_ROWVAR;
}

static int unclosed_row_var(SpecLexer *lexer, const unsigned char *from, const unsigned char *to) {
    Span span = span_of(lexer, from, to);
    diag_error(span, "unclosed row variable: expected '..' after '%.*s'", (int)(to - from),
               (const char *)from);
    unsigned next = *to;
    if (!lexer->multichar && to < lexer->limit &&
        ((next | 0x20) - 'a' < 26 || next - '0' < 10 || next == '_'))
        diag_note(span, "in a spec without ',' '*' '+' '^' '<' or '=' every name is one letter; "
                        "a trailing ',' after a row allows longer names");
    return fail(lexer);
}

static int no_row_var_name(SpecLexer *lexer, const unsigned char *from) {
    diag_error(span_of(lexer, from, from + 2), "expected a row variable name after '..'");
    return fail(lexer);
}

static int lex_multichar(SpecLexer *lexer, SpecToken *token) {
    const unsigned char *cur = lexer->cursor, *mar = cur, *start;
    int kind;
next:
    start = cur;
    /*!re2c
        re2c:define:YYCTYPE = "unsigned char";
        re2c:define:YYCURSOR = cur;
        re2c:define:YYMARKER = mar;
        re2c:yyfill:enable = 0;

        ident = [A-Za-z][A-Za-z0-9_]*;
        space = [ \t\r\n\v\f]+;

        "\x00" {
            if (start == lexer->limit) {
                lexer->cursor = start;
                set_token(lexer, token, start, start);
                return 0;
            }
            return bad_byte(lexer, start);
        }
        space        { goto next; }
        ident        { kind = SPEC_TK_IDENT; goto done; }
        [0-9]+       { lexer->cursor = cur; return number(lexer, token, start, cur); }
        "_"          { kind = SPEC_TK_UNDERSCORE; goto done; }
        "..."        { kind = SPEC_TK_ELLIPSIS; goto done; }
        ".." ident ".." { lexer->cursor = cur; return row_var(lexer, token, start, cur); }
        ".." ident   { return unclosed_row_var(lexer, start, cur); }
        ".."         { return no_row_var_name(lexer, start); }
        ","          { kind = SPEC_TK_COMMA; goto done; }
        "|"          { kind = SPEC_TK_BAR; goto done; }
        "->"         { kind = SPEC_TK_ARROW; goto done; }
        ";"          { kind = SPEC_TK_SEMI; goto done; }
        "=>"         { kind = SPEC_TK_FATARROW; goto done; }
        "+"          { kind = SPEC_TK_PLUS; goto done; }
        "*"          { kind = SPEC_TK_STAR; goto done; }
        "^"          { kind = SPEC_TK_CARET; goto done; }
        "="          { kind = SPEC_TK_EQ; goto done; }
        "<"          { kind = SPEC_TK_LT; goto done; }
        "("          { kind = SPEC_TK_LPAREN; goto done; }
        ")"          { kind = SPEC_TK_RPAREN; goto done; }
        "["          { kind = SPEC_TK_LBRACKET; goto done; }
        "]"          { kind = SPEC_TK_RBRACKET; goto done; }
        "&" {
            diag_error(span_of(lexer, start, cur), "'&' is reserved");
            return fail(lexer);
        }
        *            { return bad_byte(lexer, start); }
    */
done:
    lexer->cursor = cur;
    set_token(lexer, token, start, cur);
    return kind;
}

static int lex_single(SpecLexer *lexer, SpecToken *token) {
    const unsigned char *cur = lexer->cursor, *mar = cur, *start;
    int kind;
next:
    start = cur;
    /*!re2c
        letter = [A-Za-z];

        "\x00" {
            if (start == lexer->limit) {
                lexer->cursor = start;
                set_token(lexer, token, start, start);
                return 0;
            }
            return bad_byte(lexer, start);
        }
        space        { goto next; }
        letter       { kind = SPEC_TK_IDENT; goto done; }
        [0-9]        { lexer->cursor = cur; return number(lexer, token, start, cur); }
        "_"          { kind = SPEC_TK_UNDERSCORE; goto done; }
        "..."        { kind = SPEC_TK_ELLIPSIS; goto done; }
        ".." letter ".." { lexer->cursor = cur; return row_var(lexer, token, start, cur); }
        ".." letter  { return unclosed_row_var(lexer, start, cur); }
        ".."         { return no_row_var_name(lexer, start); }
        "|"          { kind = SPEC_TK_BAR; goto done; }
        "->"         { kind = SPEC_TK_ARROW; goto done; }
        ";"          { kind = SPEC_TK_SEMI; goto done; }
        "=>"         { kind = SPEC_TK_FATARROW; goto done; }
        *            { return bad_byte(lexer, start); }
    */
done:
    lexer->cursor = cur;
    set_token(lexer, token, start, cur);
    return kind;
}

int spec_lex_next(SpecLexer *lexer, SpecToken *token) {
    memset(token, 0, sizeof *token);
    return lexer->multichar ? lex_multichar(lexer, token) : lex_single(lexer, token);
}
