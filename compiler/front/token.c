/* token.c — how tokens are named in diagnostics.
 *
 * Token codes come from the Lemon grammar (build/gen/parser.h); this table gives each a
 * user-facing name.  ORDER: every %token of grammar/parser.y must have an entry here
 * (tests/unit/lex_test.c checks that none is missing). */
#include <string.h>

#include "front/lex.h"
#include "parser.h"

static const char *const token_names[] = {
    [TK_EOF] = "end of file",
    [TK_LET] = "'let'", [TK_LET_OP] = "'let%op'", [TK_LET_CD] = "'let%cd'", [TK_REC] = "'rec'",
    [TK_IN] = "'in'", [TK_FUN] = "'fun'", [TK_IF] = "'if'", [TK_THEN] = "'then'",
    [TK_ELSE] = "'else'", [TK_OPERATOR] = "'operator'", [TK_INDEX] = "'index'",
    [TK_DATA] = "'data'", [TK_OPTION] = "'option'", [TK_INPUT] = "'input'", [TK_ROUTINE] = "'routine'",
    [TK_MAIN] = "'main'", [TK_OPEN] = "'open'", [TK_FOR] = "'for'", [TK_TO] = "'to'",
    [TK_DOWNTO] = "'downto'", [TK_DO] = "'do'", [TK_DONE] = "'done'", [TK_TRUE] = "'true'",
    [TK_FALSE] = "'false'",
    [TK_LPAREN] = "'('", [TK_RPAREN] = "')'", [TK_LBRACKET] = "'['", [TK_RBRACKET] = "']'",
    [TK_LBRACKBAR] = "'[|'", [TK_BARRBRACKET] = "'|]'", [TK_LBRACE] = "'{'",
    [TK_RBRACE] = "'}'", [TK_CD_OPEN] = "'[%cd'", [TK_SEMI] = "';'", [TK_COMMA] = "','",
    [TK_COLON] = "':'", [TK_DOT] = "'.'", [TK_EQ] = "'='", [TK_ARROW] = "'->'",
    [TK_UNDERSCORE] = "'_'",
    [TK_TILDE_NAME] = "a labelled argument '~name'", [TK_TILDE_LABEL] = "a label '~name:'",
    [TK_QUEST_NAME] = "an optional argument '?name'", [TK_QUEST_LABEL] = "a label '?name:'",
    [TK_QUEST_LPAREN] = "'?('", [TK_LOGIC] = "'~logic:'", [TK_TILDE_TILDE] = "'~~'",
    [TK_INT] = "an integer", [TK_FLOAT] = "a number", [TK_STRING] = "a string",
    [TK_IDENT] = "an identifier", [TK_UIDENT] = "a module name",
    [TK_PREFIXOP] = "a prefix operator", [TK_MINUS] = "'-'", [TK_POWOP] = "an operator",
    [TK_MULOP] = "an operator", [TK_ADDOP] = "an operator", [TK_ATOP] = "an operator",
    [TK_CMPOP] = "an operator", [TK_AMPAMP] = "'&&'", [TK_BARBAR] = "'||'",
    [TK_ASSIGNOP] = "an assignment operator", [TK_QUESTION] = "'?'",
};

const char *lex_token_name(int kind) {
    if (kind == TK_ILLEGAL) return "an invalid token";
    if (kind < 0 || (size_t)kind >= sizeof token_names / sizeof *token_names || !token_names[kind])
        return NULL;
    return token_names[kind];
}

/* A token's text as a message quotes it: at most 64 bytes, then "..." (a line of 200 000 '-' is
 * one operator token; the caret shows where it is). */
const char *lex_quoted(Arena *arena, const char *text) {
    size_t n = strlen(text);
    if (n <= 64) return text;
    size_t cut = 60;
    while (cut > 0 && ((unsigned char)text[cut] & 0xc0) == 0x80) cut--; /* not inside a UTF-8 character */
    return arena_printf(arena, "%.*s...", (int)cut, text);
}

const char *lex_describe(Arena *arena, const Token *token) {
    const char *text = token->text ? lex_quoted(arena, token->text) : "";
    switch (token->kind) {
    case TK_EOF: return "end of file";
    case TK_IDENT: return arena_printf(arena, "identifier '%s'", text);
    case TK_UIDENT: return arena_printf(arena, "module name '%s'", text);
    case TK_INT: case TK_FLOAT: return arena_printf(arena, "number '%s'", text);
    case TK_STRING: return "a string literal";
    case TK_TILDE_NAME: return arena_printf(arena, "'~%s'", text);
    case TK_TILDE_LABEL: return arena_printf(arena, "'~%s:'", text);
    case TK_QUEST_NAME: return arena_printf(arena, "'?%s'", text);
    case TK_QUEST_LABEL: return arena_printf(arena, "'?%s:'", text);
    case TK_PREFIXOP: case TK_MINUS: case TK_POWOP: case TK_MULOP: case TK_ADDOP: case TK_ATOP:
    case TK_CMPOP: case TK_AMPAMP: case TK_BARBAR: case TK_ASSIGNOP:
        return arena_printf(arena, "'%s'", text);
    default: {
        const char *name = lex_token_name(token->kind);
        return name ? name : "a token";
    }
    }
}
