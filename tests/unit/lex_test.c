/* lex_test.c — unit tests of the lexer (grammar/lexer.re) and the token name table.
 *
 * Each case lexes a string and compares the token stream, written as "KIND:text" words, with
 * the expected one; error cases compare the first diagnostic line.  Ends with the runner's
 * "N passed, N failed" line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/lex.h"
#include "parser.h"

static int passed, failed;

static const char *kind_tag(int kind) {
    switch (kind) {
    case TK_IDENT: return "id";
    case TK_UIDENT: return "mod";
    case TK_INT: return "int";
    case TK_FLOAT: return "float";
    case TK_STRING: return "str";
    case TK_ASSIGNOP: return "asg";
    case TK_ADDOP: return "add";
    case TK_MULOP: return "mul";
    case TK_POWOP: return "pow";
    case TK_ATOP: return "at";
    case TK_CMPOP: return "cmp";
    case TK_PREFIXOP: return "pre";
    case TK_MINUS: return "minus";
    case TK_TILDE_NAME: return "~name";
    case TK_TILDE_LABEL: return "~label";
    case TK_QUEST_NAME: return "?name";
    case TK_QUEST_LABEL: return "?label";
    case TK_LOGIC: return "logic";
    case TK_ILLEGAL: return "ILLEGAL";
    default: return NULL;
    }
}

/* Lex `text` and render the tokens; diagnostics go to `diags`. */
static char *render(const char *text, size_t len, FILE *diags) {
    static char out[4096];
    out[0] = '\0';
    diag_set_stream(diags);
    uint32_t file = source_add("t.tsr", text, len);
    Arena *arena = arena_new();
    Lexer lx;
    lex_init(&lx, file, arena);
    size_t used = 0;
    for (int guard = 0; guard < 200; guard++) {
        Token t = lex_next(&lx);
        if (t.kind == TK_EOF) break;
        const char *tag = kind_tag(t.kind);
        char word[256];
        if (tag && t.kind == TK_INT) snprintf(word, sizeof word, "int:%lld", (long long)t.ival);
        else if (tag && t.kind == TK_FLOAT) snprintf(word, sizeof word, "float:%g", t.fval);
        else if (tag) snprintf(word, sizeof word, "%s:%s", tag, t.text);
        else snprintf(word, sizeof word, "%s", lex_token_name(t.kind));
        used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", used ? " " : "", word);
        if (used >= sizeof out) break;
    }
    arena_free(arena);
    return out;
}

static void expect_tokens(const char *text, const char *expected) {
    FILE *diags = tmpfile();
    const char *got = render(text, strlen(text), diags);
    long errors = ftell(diags);
    if (strcmp(got, expected) == 0 && errors == 0) {
        passed++;
    } else {
        failed++;
        printf("FAIL lex %s\n  expected: %s\n  got:      %s%s\n", text, expected, got,
               errors ? " (with diagnostics)" : "");
    }
    fclose(diags);
}

static void expect_error(const char *text, size_t len, const char *expected_first_line) {
    FILE *diags = tmpfile();
    render(text, len, diags);
    char line[512] = "";
    rewind(diags);
    if (!fgets(line, sizeof line, diags)) line[0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (strcmp(line, expected_first_line) == 0) {
        passed++;
    } else {
        failed++;
        printf("FAIL lex error %.*s\n  expected: %s\n  got:      %s\n", (int)len, text, expected_first_line, line);
    }
    fclose(diags);
}

int main(void) {
    /* Every token code of the grammar has a user-facing name. */
    for (int kind = 1; kind < TK_ASSIGNOP + 1; kind++) {
        if (lex_token_name(kind)) passed++;
        else {
            failed++;
            printf("FAIL token %d has no name in compiler/front/token.c\n", kind);
        }
    }

    expect_tokens("let%op x = 1", "'let%op' id:x '=' int:1");
    expect_tokens("let%cd rec in fun", "'let%cd' 'rec' 'in' 'fun'");
    expect_tokens("(* a (* nested *) comment \"*)\" *) x", "id:x");
    expect_tokens("~x ~lr: ?k ?k: ?( ~logic: ~~", "~name:x ~label:lr ?name:k ?label:k '?(' logic:logic '~~'");
    expect_tokens("1 1. 1e-4 0.5 1_000 0x1F 2.5e3", "int:1 float:1 float:0.0001 float:0.5 int:1000 int:31 float:2500");
    expect_tokens("\"a\\n\\t\\\"\\\\\\x41\\065\"", "str:a\n\t\"\\AA");
    expect_tokens("=: =+ =:+ =- =:- =* =:* =/ =:/ =** =:** =?/ =:?/",
                  "asg:=: asg:=+ asg:=:+ asg:=- asg:=:- asg:=* asg:=:* asg:=/ asg:=:/ asg:=** asg:=:** asg:=?/ asg:=:?/");
    expect_tokens("=?^ =:?^ =|| =:|| =&& =:&& =@^ =:@^ =@- =:@-",
                  "asg:=?^ asg:=:?^ asg:=|| asg:=:|| asg:=&& asg:=:&& asg:=@^ asg:=:@^ asg:=@- asg:=:@-");
    expect_tokens("+* ++ +++ ++^ @^+ @^^ @| -?/ *. /. ** **.",
                  "add:+* add:++ add:+++ add:++^ at:@^+ at:@^^ at:@| add:-?/ mul:*. mul:/. pow:** pow:**.");
    expect_tokens("!.x !..n !@i", "pre:!. id:x pre:!.. id:n pre:!@ id:i");
    expect_tokens("a - b -> c", "id:a minus:- id:b '->' id:c");
    expect_tokens("[| x |] [||] [%cd v ]", "'[|' id:x '|]' '[|' '|]' '[%cd' id:v ']'");
    expect_tokens("< <> > |> && || & = !=", "cmp:< cmp:<> cmp:> cmp:|> '&&' '||' '&&' '=' cmp:!=");
    expect_tokens("x.grad Train.step", "id:x '.' id:grad mod:Train '.' id:step");
    expect_tokens("x' _ _a", "id:x' '_' id:_a");
    expect_tokens("index data input routine main open operator", "'index' 'data' 'input' 'routine' 'main' 'open' 'operator'");
    expect_tokens("a+-b", "id:a add:+- id:b"); /* maximal munch, as in OCaml */
    expect_tokens("010 0x1f 1_0", "int:10 int:31 int:10"); /* decimal even with a leading zero */
    expect_tokens("\"a\\\r\n   b\"", "str:ab");           /* line continuation with CRLF */

    expect_error("v =:% x", 7, "t.tsr:1:3: error: unknown assignment operator '=:%'");
    expect_error("!? x", 4, "t.tsr:1:1: error: unknown prefix operator '!?' (the prefix operators are '!.', '!..' and '!@')");
    expect_error("x \"abc", 6, "t.tsr:1:3: error: unterminated string literal");
    expect_error("(* (* *)", 8, "t.tsr:1:1: error: unterminated comment");
    expect_error("12ab", 4, "t.tsr:1:1: error: malformed number '12ab'");
    expect_error("0x_", 3, "t.tsr:1:1: error: malformed number '0x_'");
    expect_error("99999999999999999999", 20, "t.tsr:1:1: error: integer literal '99999999999999999999' does not fit in 64 bits");
    expect_error("a # b", 5, "t.tsr:1:3: error: unexpected character '#'");
    expect_error("a \xff b", 5, "t.tsr:1:3: error: unexpected byte 0xFF (not valid UTF-8)");
    expect_error("a \xc3\xa9 b", 6, "t.tsr:1:3: error: unexpected character '\xc3\xa9' (U+00E9)");
    expect_error("a \xc2\xa0 b", 6, "t.tsr:1:3: error: unexpected character U+00A0 (a space that is not ' ')");
    expect_error("a \xf0\x9f\x98\x80 b", 8, "t.tsr:1:3: error: unexpected character '\xf0\x9f\x98\x80' (U+1F600)");
    expect_error("a \xe2\x80\x9c b", 7, "t.tsr:1:3: error: unexpected character '\xe2\x80\x9c' (U+201C)");
    expect_error("a \0 b", 5, "t.tsr:1:3: error: NUL byte in source");
    expect_error("\"a\\qb\"", 6, "t.tsr:1:3: error: unknown escape sequence '\\q'");
    expect_error("let%foo", 7, "t.tsr:1:1: error: unknown extension 'let%foo' (expected 'let%op' or 'let%cd')");
    expect_error("[%op x]", 7, "t.tsr:1:1: error: unknown extension '[%op' (expected '[%cd')");
    expect_error("\"\xff\"", 3, "t.tsr:1:2: error: invalid UTF-8 byte 0xFF in string literal");

    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
