/* lexer.re — the tokens of .tsr programs (re2c).
 *
 * Generated into build/gen/lexer.c by `make`; never edit the output.  Requires the source text
 * to end with a NUL sentinel (diag.c's source table guarantees it); a NUL before the end is an
 * error, not the end.  Produces one Token per call with its byte span; literal values are
 * decoded here.  Errors are reported through diag and returned as TK_ILLEGAL.
 *
 * Operators are maximal runs of operator characters, as in OCaml, and their precedence class
 * is decided by their first characters (OCaml's rule), see classify_operator().  So `a+-b` is
 * the operator `+-`: write `a + -b`.  Every operator that begins with '=' (other than '='
 * itself) is an assignment operator and must be one of the %cd accumulation operators. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "front/lex.h"
#include "parser.h"

/*!re2c

    digit   = [0-9];
    ident_tail = [A-Za-z0-9_'];
    lower   = [a-z_] ident_tail*;
    upper   = [A-Z] ident_tail*;
    opchar  = [!$%&*+\-./:<=>?@^|~];
    opstart = [$%&*+\-/<=>@^|];
    exp     = [eE] [+-]? digit+;
*/

/* The assignment operators of %cd: '=' [':'] accumulator.  ORDER: docs/language.md's table. */
static const char *const assignment_operators[] = {
    "=:",  "=+",  "=:+", "=-",  "=:-", "=*",  "=:*", "=/",  "=:/", "=**", "=:**",
    "=?/", "=:?/", "=?^", "=:?^", "=||", "=:||", "=&&", "=:&&", "=@^", "=:@^", "=@-", "=:@-",
};

/* The prefix operators: '!' followed by operator characters. */
static const char *const prefix_operators[] = {"!.", "!..", "!@"};

static bool in_table(const char *const *table, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(table[i]) == len && memcmp(table[i], s, len) == 0) return true;
    return false;
}

static Span span_of(const Lexer *lx, const unsigned char *from, const unsigned char *to) {
    return span_make(lx->file, (uint32_t)(from - lx->text), (uint32_t)(to - lx->text));
}

static Token make(const Lexer *lx, int kind, const unsigned char *from, const unsigned char *to) {
    Token t;
    memset(&t, 0, sizeof t);
    t.kind = kind;
    t.span = span_of(lx, from, to);
    t.text = arena_strndup(lx->arena, (const char *)from, (size_t)(to - from));
    t.len = (size_t)(to - from);
    return t;
}

static Token illegal(const Lexer *lx, const unsigned char *from, const unsigned char *to) {
    Token t = make(lx, TK_ILLEGAL, from, to);
    return t;
}

/* Decide an operator run's token class by its first characters (OCaml's rule). */
static Token classify_operator(Lexer *lx, const unsigned char *from, const unsigned char *to) {
    const char *s = (const char *)from;
    size_t n = (size_t)(to - from);
    int kind;
    if (n == 1 && s[0] == '=') kind = TK_EQ;
    else if (s[0] == '=') {
        if (n == 2 && (s[1] == '=' || s[1] == '>')) {
            diag_error(span_of(lx, from, to), "unknown operator '%.*s'%s", (int)n, s,
                       s[1] == '=' ? "; equality is written '='" : "; '=>' appears only inside spec strings");
            if (s[1] == '>') diag_note(span_of(lx, from, to), "a function is written fun x -> …");
            return illegal(lx, from, to);
        }
        if (!in_table(assignment_operators, sizeof assignment_operators / sizeof *assignment_operators, s, n)) {
            diag_error(span_of(lx, from, to), "unknown assignment operator '%.*s'", (int)n, s);
            if (n >= 3 && s[n - 1] == ':') /* `=+:`: the reset's ':' comes first */
                diag_note(span_of(lx, from, to), "the reset ':' follows the '=': '=:%.*s'", (int)n - 2, s + 1);
            return illegal(lx, from, to);
        }
        kind = TK_ASSIGNOP;
    } else if (n == 2 && s[0] == '-' && s[1] == '>') kind = TK_ARROW;
    else if (n == 1 && s[0] == '-') kind = TK_MINUS;
    else if (s[0] == '-' || s[0] == '+') kind = TK_ADDOP;
    else if (n >= 2 && s[0] == '*' && s[1] == '*') kind = TK_POWOP;
    else if (s[0] == '*' || s[0] == '/' || s[0] == '%') kind = TK_MULOP;
    else if (s[0] == '@' || s[0] == '^') kind = TK_ATOP;
    else if ((n == 2 && s[0] == '&' && s[1] == '&') || (n == 1 && s[0] == '&')) kind = TK_AMPAMP;
    else if (n == 2 && s[0] == '|' && s[1] == '|') kind = TK_BARBAR;
    else kind = TK_CMPOP; /* < > | & $ and their runs */
    return make(lx, kind, from, to);
}

static Token prefix_operator(Lexer *lx, const unsigned char *from, const unsigned char *to) {
    size_t n = (size_t)(to - from);
    if (!in_table(prefix_operators, sizeof prefix_operators / sizeof *prefix_operators, (const char *)from, n)) {
        if (n == 2 && from[1] == '=') return make(lx, TK_CMPOP, from, to); /* != */
        diag_error(span_of(lx, from, to),
                   "unknown prefix operator '%.*s' (the prefix operators are '!.', '!..' and '!@')",
                   (int)n, (const char *)from);
        return illegal(lx, from, to);
    }
    return make(lx, TK_PREFIXOP, from, to);
}

/* Reserved words.  ORDER: docs/language.md's keyword list. */
static const struct {
    const char *word;
    int kind;
} keywords[] = {
    {"let", TK_LET},         {"rec", TK_REC},       {"in", TK_IN},       {"fun", TK_FUN},
    {"if", TK_IF},           {"then", TK_THEN},     {"else", TK_ELSE},   {"operator", TK_OPERATOR},
    {"index", TK_INDEX},     {"data", TK_DATA},     {"input", TK_INPUT}, {"routine", TK_ROUTINE},
    {"main", TK_MAIN},       {"open", TK_OPEN},     {"for", TK_FOR},     {"to", TK_TO},
    {"downto", TK_DOWNTO},   {"do", TK_DO},         {"done", TK_DONE},   {"true", TK_TRUE},
    {"false", TK_FALSE},     {"option", TK_OPTION},
};

static Token identifier(Lexer *lx, const unsigned char *from, const unsigned char *to) {
    size_t n = (size_t)(to - from);
    if (n == 1 && from[0] == '_') return make(lx, TK_UNDERSCORE, from, to);
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
        if (strlen(keywords[i].word) == n && memcmp(keywords[i].word, from, n) == 0)
            return make(lx, keywords[i].kind, from, to);
    return make(lx, TK_IDENT, from, to);
}

/* ~name, ~name:, ?name, ?name: — the token's text is the bare name. */
static Token label(Lexer *lx, int kind, const unsigned char *from, const unsigned char *to) {
    Token t = make(lx, kind, from, to);
    size_t skip = 1, drop = (kind == TK_TILDE_LABEL || kind == TK_QUEST_LABEL) ? 1 : 0;
    t.text = arena_strndup(lx->arena, (const char *)from + skip, (size_t)(to - from) - skip - drop);
    t.len = (size_t)(to - from) - skip - drop;
    if (kind == TK_TILDE_LABEL && strcmp(t.text, "logic") == 0) t.kind = TK_LOGIC;
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
        if (strcmp(keywords[i].word, t.text) == 0) { /* no parameter can have that name */
            diag_error(t.span, "'%s' is a keyword and cannot be a label's name (a parameter could never be named so)",
                       t.text);
            return illegal(lx, from, to);
        }
    return t;
}

static Token number(Lexer *lx, const unsigned char *from, const unsigned char *to, bool is_float) {
    Token t = make(lx, is_float ? TK_FLOAT : TK_INT, from, to);
    char *buf = arena_alloc(lx->arena, (size_t)(to - from) + 1); /* any length: 0.1 written with 5000 digits */
    size_t n = 0;
    for (const unsigned char *p = from; p < to; p++)
        if (*p != '_') buf[n++] = (char)*p;
    buf[n] = '\0';
    errno = 0;
    char *end;
    if (is_float) {
        t.fval = strtod(buf, &end);
        if (errno == ERANGE && isinf(t.fval)) {
            diag_error(t.span, "floating-point literal '%s' is out of range", lex_quoted(lx->arena, t.text));
            return illegal(lx, from, to);
        }
    } else {
        bool hex = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
        long long v = strtoll(hex ? buf + 2 : buf, &end, hex ? 16 : 10);
        if (*end != '\0' || (hex && buf[2] == '\0')) {
            diag_error(t.span, "malformed number '%s'", lex_quoted(lx->arena, t.text));
            return illegal(lx, from, to);
        }
        if (errno == ERANGE) {
            diag_error(t.span, "integer literal '%s' does not fit in 64 bits", lex_quoted(lx->arena, t.text));
            return illegal(lx, from, to);
        }
        t.ival = v;
    }
    return t;
}

static int utf8_sequence(const unsigned char *p, const unsigned char *lim) {
    unsigned c = p[0];
    int n;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3;
    else if (c >= 0xf0 && c <= 0xf4) n = 4;
    else return 0;
    if (lim - p < n) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && c == 0xe0 && p[1] < 0xa0) return 0;
    if (n == 3 && c == 0xed && p[1] >= 0xa0) return 0;
    if (n == 4 && c == 0xf0 && p[1] < 0x90) return 0;
    if (n == 4 && c == 0xf4 && p[1] >= 0x90) return 0;
    return n;
}

/* A string literal starting at `from` (the opening quote).  Decodes escapes; reports an
 * unterminated string at its opening quote. */
static Token string_literal(Lexer *lx, const unsigned char *from) {
    const unsigned char *lim = lx->text + lx->len, *p = from + 1;
    size_t cap = 32, n = 0;
    char *buf = arena_alloc(lx->arena, cap);
    bool ok = true;
    for (;;) {
        if (p >= lim) {
            diag_error(span_of(lx, from, from + 1), "unterminated string literal");
            lx->ran_off_end = true;
            if (lx->across_lines && lx->across_lines != from)
                diag_note(span_of(lx, lx->across_lines, lx->across_lines + 1),
                          "the string that starts here runs across lines: if its closing quote is missing, each quote "
                          "after it closes the string before and opens the next");
            lx->cursor = lim;
            return illegal(lx, from, lim);
        }
        unsigned c = *p;
        int out = -1;
        const unsigned char *seq = p;
        if (c == '"') {
            p++;
            break;
        }
        if (c == '\\') {
            if (p + 1 >= lim) {
                p++;
                continue;
            }
            unsigned e = p[1];
            switch (e) {
            case 'n': out = '\n'; p += 2; break;
            case 't': out = '\t'; p += 2; break;
            case 'r': out = '\r'; p += 2; break;
            case 'b': out = '\b'; p += 2; break;
            case '\\': out = '\\'; p += 2; break;
            case '"': out = '"'; p += 2; break;
            case '\'': out = '\''; p += 2; break;
            case ' ': out = ' '; p += 2; break;
            case '\r':
                if (p + 2 < lim && p[2] == '\n') p++; /* CRLF line endings */
                /* fall through */
            case '\n': /* line continuation: skip the newline and leading blanks */
                p += 2;
                while (p < lim && (*p == ' ' || *p == '\t')) p++;
                continue;
            case 'x':
                if (p + 3 < lim && isxdigit(p[2]) && isxdigit(p[3])) {
                    char hex[3] = {(char)p[2], (char)p[3], 0};
                    out = (int)strtol(hex, NULL, 16);
                    p += 4;
                    break;
                }
                diag_error(span_of(lx, p, p + 2), "'\\x' must be followed by two hexadecimal digits");
                ok = false;
                p += 2;
                continue;
            default:
                if (e >= '0' && e <= '9') {
                    if (p + 3 < lim && p[2] >= '0' && p[2] <= '9' && p[3] >= '0' && p[3] <= '9') {
                        int v = (e - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
                        if (v <= 255) {
                            out = v;
                            p += 4;
                            break;
                        }
                    }
                    {
                        const unsigned char *e_end = p + 2;
                        while (e_end < lim && e_end < p + 4 && *e_end >= '0' && *e_end <= '9') e_end++;
                        diag_error(span_of(lx, p, e_end), "a decimal escape needs three digits up to \\255");
                    }
                } else {
                    int len = e >= 0x80 ? utf8_sequence(p + 1, lim) : 1;
                    if (len == 0) len = 1;
                    diag_error(span_of(lx, p, p + 1 + len), "unknown escape sequence '\\%.*s'", len,
                               (e >= 0x20 && e != 0x7f) ? (const char *)p + 1 : "?");
                }
                ok = false;
                p += 2;
                continue;
            }
        } else if (c == 0) {
            diag_error(span_of(lx, p, p + 1), "NUL byte in string literal");
            ok = false;
            p++;
            continue;
        } else if (c >= 0x80) {
            int len = utf8_sequence(p, lim);
            if (len == 0) {
                diag_error(span_of(lx, p, p + 1), "invalid UTF-8 byte 0x%02X in string literal", c);
                ok = false;
                p++;
                continue;
            }
            if (n + (size_t)len + 1 >= cap) {
                char *grown = arena_alloc(lx->arena, cap * 2 + (size_t)len);
                memcpy(grown, buf, n);
                buf = grown;
                cap = cap * 2 + (size_t)len;
            }
            memcpy(buf + n, seq, (size_t)len);
            n += (size_t)len;
            p += len;
            continue;
        } else {
            if (c == '\n' && !lx->across_lines) lx->across_lines = from;
            out = (int)c;
            p++;
        }
        if (n + 2 >= cap) {
            char *grown = arena_alloc(lx->arena, cap * 2);
            memcpy(grown, buf, n);
            buf = grown;
            cap *= 2;
        }
        buf[n++] = (char)out;
    }
    lx->cursor = p;
    if (!ok) return illegal(lx, from, p);
    Token t = make(lx, TK_STRING, from, p);
    buf[n] = '\0';
    t.text = buf;
    t.len = n;
    return t;
}

/* Skip a (possibly nested) comment whose "(*" starts at `from`.  Returns false if unterminated. */
static bool skip_comment(Lexer *lx, const unsigned char *from) {
    const unsigned char *lim = lx->text + lx->len, *p = from + 2;
    enum { TRACKED = 64 };
    const unsigned char *openers[TRACKED]; /* where each still-open comment starts */
    const unsigned char *open_quote = NULL; /* a string in it that never closes */
    size_t depth = 1;
    openers[0] = from;
    while (p < lim) {
        if (p[0] == '(' && p + 1 < lim && p[1] == '*') {
            if (depth < TRACKED) openers[depth] = p;
            depth++;
            p += 2;
        } else if (p[0] == '*' && p + 1 < lim && p[1] == ')') {
            p += 2;
            if (--depth == 0) {
                lx->cursor = p;
                return true;
            }
        } else if (p[0] == '"') { /* strings inside comments are skipped whole, as in OCaml */
            const unsigned char *q = p + 1;
            while (q < lim && *q != '"') q += (*q == '\\' && q + 1 < lim) ? 2 : 1;
            if (q >= lim) {
                open_quote = p;
                break;
            }
            p = q + 1;
        } else {
            p++;
        }
    }
    diag_error(span_of(lx, from, from + 2), "unterminated comment");
    lx->ran_off_end = true;
    const unsigned char *op = from + 2; /* `(*.)`: an operator written against its parenthesis */
    while (op < lim && strchr("!$%&*+-./:<=>?@^|~", *op) && *op) op++;
    if (op > from + 2 && op < lim && *op == ')')
        diag_note(span_of(lx, from, op + 1), "'(*' starts a comment: an operator that begins with '*' is written with "
                  "spaces inside its parentheses, ( %.*s )", (int)(op - from - 1), (const char *)from + 1);
    if (open_quote)
        diag_note(span_of(lx, open_quote, open_quote + 1), "a '\"' inside a comment starts a string (as in OCaml) that "
                  "never ends, so the comment's closing '*)' is read as part of it");
    if (depth > 1) {
        const unsigned char *innermost = openers[(depth < TRACKED ? depth : TRACKED) - 1];
        diag_note(span_of(lx, innermost, innermost + 2), "the innermost comment still open starts here");
    }
    lx->cursor = lim;
    return false;
}

void lex_init(Lexer *lexer, uint32_t file, Arena *arena) {
    const Source *src = source_get(file);
    memset(lexer, 0, sizeof *lexer);
    lexer->file = file;
    lexer->arena = arena;
    lexer->text = (const unsigned char *)src->text;
    lexer->len = src->len;
    lexer->cursor = lexer->text;
}

Token lex_next(Lexer *lx) {
    const unsigned char *lim = lx->text + lx->len;
    for (;;) {
        const unsigned char *cur = lx->cursor, *mar = cur, *tok = cur;
        (void)mar;
        /*!re2c
        re2c:define:YYCTYPE = "unsigned char";
        re2c:define:YYCURSOR = "cur";
        re2c:define:YYMARKER = "mar";
        re2c:yyfill:enable = 0;
        re2c:eof = 0;
        re2c:define:YYLIMIT = "lim";
        re2c:indent:top = 1;

        $ { lx->cursor = lim; return make(lx, TK_EOF, lim, lim); }

        [ \t\r\n\f\v]+ { lx->cursor = cur; continue; }
        "(*" { lx->cursor = cur; if (!skip_comment(lx, tok)) return make(lx, TK_EOF, lim, lim); continue; }

        "let%op" { lx->cursor = cur; return make(lx, TK_LET_OP, tok, cur); }
        "let%cd" { lx->cursor = cur; return make(lx, TK_LET_CD, tok, cur); }
        "let%" [A-Za-z_]* {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "unknown extension '%.*s' (expected 'let%%op' or 'let%%cd')",
                       (int)(cur - tok), (const char *)tok);
            return illegal(lx, tok, cur);
        }
        "[%cd" { lx->cursor = cur; return make(lx, TK_CD_OPEN, tok, cur); }
        "[%" [A-Za-z_]* {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "unknown extension '%.*s' (expected '[%%cd')",
                       (int)(cur - tok), (const char *)tok);
            return illegal(lx, tok, cur);
        }

        lower { lx->cursor = cur; return identifier(lx, tok, cur); }
        upper { lx->cursor = cur; return make(lx, TK_UIDENT, tok, cur); }

        "~" lower       { lx->cursor = cur; return label(lx, TK_TILDE_NAME, tok, cur); }
        "~" lower ":"   { lx->cursor = cur; return label(lx, TK_TILDE_LABEL, tok, cur); }
        "?" lower       { lx->cursor = cur; return label(lx, TK_QUEST_NAME, tok, cur); }
        "?" lower ":"   { lx->cursor = cur; return label(lx, TK_QUEST_LABEL, tok, cur); }
        "?("            { lx->cursor = cur; return make(lx, TK_QUEST_LPAREN, tok, cur); }
        "?"             { lx->cursor = cur; return make(lx, TK_QUESTION, tok, cur); }
        "~~"            { lx->cursor = cur; return make(lx, TK_TILDE_TILDE, tok, cur); }

        digit [0-9_]*                                   { lx->cursor = cur; return number(lx, tok, cur, false); }
        "0" [xX] [0-9a-fA-F_]+                          { lx->cursor = cur; return number(lx, tok, cur, false); }
        digit [0-9_]* "." [0-9_]* exp?                  { lx->cursor = cur; return number(lx, tok, cur, true); }
        digit [0-9_]* exp                               { lx->cursor = cur; return number(lx, tok, cur, true); }
        digit [0-9_]* ("." [0-9_]*)? [eE] [+-] {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "malformed number '%.*s': its exponent has a sign and no digits",
                       (int)(cur - tok), (const char *)tok);
            return illegal(lx, tok, cur);
        }
        digit [0-9_]* ("." [0-9_]* exp?)? [A-Za-z_] ident_tail* {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "malformed number '%.*s'", (int)(cur - tok), (const char *)tok);
            return illegal(lx, tok, cur);
        }

        ["] { lx->cursor = tok; return string_literal(lx, tok); }

        "("  { lx->cursor = cur; return make(lx, TK_LPAREN, tok, cur); }
        ")"  { lx->cursor = cur; return make(lx, TK_RPAREN, tok, cur); }
        "["  { lx->cursor = cur; return make(lx, TK_LBRACKET, tok, cur); }
        "]"  { lx->cursor = cur; return make(lx, TK_RBRACKET, tok, cur); }
        "[|" { lx->cursor = cur; return make(lx, TK_LBRACKBAR, tok, cur); }
        "|]" { lx->cursor = cur; return make(lx, TK_BARRBRACKET, tok, cur); }
        "{"  { lx->cursor = cur; return make(lx, TK_LBRACE, tok, cur); }
        "}"  { lx->cursor = cur; return make(lx, TK_RBRACE, tok, cur); }
        ";"  { lx->cursor = cur; return make(lx, TK_SEMI, tok, cur); }
        ","  { lx->cursor = cur; return make(lx, TK_COMMA, tok, cur); }
        ":"  { lx->cursor = cur; return make(lx, TK_COLON, tok, cur); }
        "."  { lx->cursor = cur; return make(lx, TK_DOT, tok, cur); }

        opstart opchar* { lx->cursor = cur; return classify_operator(lx, tok, cur); }
        "!" opchar*     { lx->cursor = cur; return prefix_operator(lx, tok, cur); }
        ":" opchar+ | "." opchar+ | [~?] opchar* {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "unknown operator '%.*s'", (int)(cur - tok), (const char *)tok);
            if (cur - tok == 2 && tok[0] == ':' && tok[1] == '=') /* Pascal's and Go's := */
                diag_note(span_of(lx, tok, cur), "an assignment of code is written '=:' (x =: 1)");
            return illegal(lx, tok, cur);
        }

        [\x00] {
            lx->cursor = cur;
            diag_error(span_of(lx, tok, cur), "NUL byte in source");
            return illegal(lx, tok, cur);
        }
        * {
            int len = tok[0] >= 0x80 ? utf8_sequence(tok, lim) : 0;
            if (len > 0) { /* named by its code point too: a no-break or zero-width space, a smart quote */
                uint32_t code = len == 2 ? (tok[0] & 0x1fu) << 6 | (tok[1] & 0x3fu)
                              : len == 3 ? (tok[0] & 0x0fu) << 12 | (tok[1] & 0x3fu) << 6 | (tok[2] & 0x3fu)
                                         : (tok[0] & 0x07u) << 18 | (tok[1] & 0x3fu) << 12 | (tok[2] & 0x3fu) << 6 | (tok[3] & 0x3fu);
                lx->cursor = tok + len;
                bool invisible = code == 0xa0 || (code >= 0x2000 && code <= 0x200f) || code == 0x2028 || code == 0x2029 ||
                                 code == 0x202f || code == 0x205f || code == 0x3000 || code == 0xfeff;
                if (invisible)
                    diag_error(span_of(lx, tok, tok + len), "unexpected character U+%04X (a space that is not ' ')", code);
                else
                    diag_error(span_of(lx, tok, tok + len), "unexpected character '%.*s' (U+%04X)", len, (const char *)tok,
                               code);
            } else {
                lx->cursor = tok + 1;
                if (tok[0] >= 0x20 && tok[0] < 0x7f)
                    diag_error(span_of(lx, tok, tok + 1), "unexpected character '%c'", tok[0]);
                else
                    diag_error(span_of(lx, tok, tok + 1), "unexpected byte 0x%02X%s", tok[0],
                               tok[0] >= 0x80 ? " (not valid UTF-8)" : "");
            }
            return illegal(lx, tok, lx->cursor);
        }
        */
    }
}
