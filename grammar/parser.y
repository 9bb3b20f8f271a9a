/* parser.y — the grammar of .tsr programs (Lemon).
 *
 * This file is the source of truth for the syntax; docs/language.md describes it for users and
 * must agree with it.  build/gen/parser.c is generated from it by `make` and never edited.
 * Actions are one line each and call builders in compiler/front/parse.c, which also owns the token
 * loop, error messages and recovery.
 *
 * Operator precedence follows OCaml's table (an operator's class is decided by its first
 * characters, see grammar/lexer.re), from loosest to tightest:
 *   let fun          (bodies extend as far right as possible)
 *   ;                sequence
 *   if               (dangling else binds to the nearest if)
 *   =: =+ =:+ …      assignment (%cd only), right
 *   ~logic:          the logic of an assignment, after its right-hand side
 *   ,                tuple
 *   || &&            right
 *   = < > <> |> …    comparison, left
 *   @… ^…            right  (@^+ @^^ @| …)
 *   + - +* ++ …      left
 *   * / % *. /. …    left
 *   **…              right
 *   - (prefix)
 *   application, labelled arguments
 *   .field
 *   !. !.. !@        prefix constants
 */

%name TsrParse
%token_prefix TK_
%token_type {Token}
%default_type {Node *}
%extra_argument {ParseState *ps}
%stack_size 8000
%start_symbol program

%include {
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "front/ast.h"
#include "front/lex.h"
#include "front/parse.h"
}

%syntax_error { parse_syntax_error(ps, &yyminor, yypParser); }
%stack_overflow { parse_stack_overflow(ps); }
%parse_failure { ps->failed = true; }

/* The order of these fixes the token codes; lexer and messages rely only on the names. */
%token LET LET_OP LET_CD REC IN FUN IF THEN ELSE OPERATOR INDEX DATA INPUT ROUTINE MAIN OPEN OPTION
       FOR TO DOWNTO DO DONE TRUE FALSE.
%token LPAREN RPAREN LBRACKET RBRACKET LBRACKBAR BARRBRACKET LBRACE RBRACE CD_OPEN
       SEMI COMMA COLON DOT EQ ARROW UNDERSCORE.
%token TILDE_NAME TILDE_LABEL QUEST_NAME QUEST_LABEL QUEST_LPAREN LOGIC TILDE_TILDE.
%token INT FLOAT STRING IDENT UIDENT.
%token PREFIXOP MINUS POWOP MULOP ADDOP ATOP CMPOP AMPAMP BARBAR ASSIGNOP.
%token QUESTION.

%nonassoc LET FUN.
%right SEMI.
%nonassoc IF.
%nonassoc THEN.
%nonassoc ELSE.
%right ASSIGNOP.
%nonassoc LOGIC.
%left COMMA.
%right BARBAR.
%right AMPAMP.
%left EQ CMPOP.
%right ATOP.
%left ADDOP MINUS.
%left MULOP.
%right POWOP.
%nonassoc UMINUS.
%nonassoc DOT.
%nonassoc PREFIXOP TILDE_TILDE.

/* ===================================================================== Top-level items */

program ::= items.
items ::= .
items ::= items item(I).                                 { parse_add_item(ps, I); }

item(R) ::= LET(K) binding(B).                           { R = parse_item_let(ps, &K, B, LET_PLAIN); }
item(R) ::= LET_OP(K) binding(B).                        { R = parse_item_let(ps, &K, B, LET_OP); }
item(R) ::= LET_CD(K) binding(B).                        { R = parse_item_let(ps, &K, B, LET_CD); }
item(R) ::= OPERATOR(K) op_name(N) params(P) logic(L) EQ op_clauses(C).
                                                         { R = parse_item_operator(ps, &K, N, P, L, C); }
item(R) ::= INDEX(K) IDENT(N) COLON expr(E).             { R = parse_item_named(ps, ITEM_INDEX, &K, &N, E); }
item(R) ::= DATA(K) IDENT(N) EQ expr(E).                 { R = parse_item_named(ps, ITEM_DATA, &K, &N, E); }
item(R) ::= INPUT(K) record(E).                          { R = parse_item_input(ps, &K, E); }
item(R) ::= ROUTINE(K) IDENT(N) EQ seq_expr(E).          { R = parse_item_named(ps, ITEM_ROUTINE, &K, &N, E); }
item(R) ::= MAIN(K) EQ seq_expr(E).                      { R = parse_item_main(ps, &K, E); }
item(R) ::= OPEN(K) UIDENT(N).                           { R = parse_item_open(ps, &K, &N); }
item(R) ::= OPTION(K) IDENT(N) EQ expr(E).               { R = parse_item_named(ps, ITEM_OPTION, &K, &N, E); }

/* `let f x = e` and `let rec f x = e`; the same shape serves `let … in`. */
binding(R) ::= IDENT(N) params(P) EQ seq_expr(E).        { R = parse_binding(ps, &N, P, E, false); }
binding(R) ::= REC IDENT(N) params(P) EQ seq_expr(E).    { R = parse_binding(ps, &N, P, E, true); }
binding(R) ::= UNDERSCORE(N) params(P) EQ seq_expr(E).   { R = parse_binding(ps, &N, P, E, false); }

%type params {NodeList}
params(R) ::= .                                          { R = (NodeList){0}; }
params(R) ::= params(L) param(P).                        { R = L; parse_push(ps, &R, P); }

param(R) ::= IDENT(N).                                   { R = parse_param(ps, &N, PARAM_POSITIONAL, NULL, NULL); }
param(R) ::= UNDERSCORE(N).                              { R = parse_param(ps, &N, PARAM_WILDCARD, NULL, NULL); }
param(R) ::= LPAREN(N) RPAREN(E).                        { R = parse_param(ps, &N, PARAM_UNIT, NULL, &E); }
param(R) ::= TILDE_NAME(N).                              { R = parse_param(ps, &N, PARAM_LABELLED, NULL, NULL); }
param(R) ::= QUEST_NAME(N).                              { R = parse_param(ps, &N, PARAM_OPTIONAL, NULL, NULL); }
param(R) ::= QUEST_LPAREN(N) IDENT(X) EQ expr(D) RPAREN(E).
                                                         { R = parse_param_default(ps, &N, &X, D, &E); }

/* operator ( + ) t1 t2 ~logic:"." = forward [%cd …] backward [%cd …] */
op_name(R) ::= IDENT(N).                                 { R = parse_op_name(ps, &N, NULL); }
op_name(R) ::= LPAREN(L) any_op(O) RPAREN(E).            { R = parse_op_name(ps, &O, &E); (void)L; }
%type any_op {Token}
any_op(R) ::= MINUS(O).                                  { R = O; }
any_op(R) ::= POWOP(O).                                  { R = O; }
any_op(R) ::= MULOP(O).                                  { R = O; }
any_op(R) ::= ADDOP(O).                                  { R = O; }
any_op(R) ::= ATOP(O).                                   { R = O; }
any_op(R) ::= CMPOP(O).                                  { R = O; }
any_op(R) ::= EQ(O).                                     { R = O; }
any_op(R) ::= AMPAMP(O).                                 { R = O; }
any_op(R) ::= BARBAR(O).                                 { R = O; }
any_op(R) ::= PREFIXOP(O).                               { R = O; }

logic(R) ::= .                                           { R = NULL; }
logic(R) ::= LOGIC simple(E).                            { R = parse_logic(ps, E); }

%type op_clauses {NodeList}
op_clauses(R) ::= op_clause(C).                          { R = (NodeList){0}; parse_push(ps, &R, C); }
op_clauses(R) ::= op_clauses(L) op_clause(C).            { R = L; parse_push(ps, &R, C); }
op_clause(R) ::= IDENT(N) code_block(B).                 { R = parse_op_clause(ps, &N, B); }
op_clause(R) ::= IDENT(N) IDENT(W).                      { R = parse_op_clause_word(ps, &N, &W); }

code_block(R) ::= CD_OPEN(O) seq_expr(E) RBRACKET(C).    { R = parse_code_block(ps, &O, E, &C); }

/* ===================================================================== Expressions */

/* A sequence `e1; e2; …`.  Lists and records separate their elements with `;` too, so their
 * elements are `expr`, which has no top-level sequence (as in OCaml). */
seq_expr(R) ::= expr(E). [LET]                           { R = E; }
seq_expr(R) ::= seq_expr(A) SEMI expr(B).                { R = parse_seq(ps, A, B); }

expr(R) ::= app(E).                                      { R = E; }
expr(R) ::= LET(K) binding(B) IN seq_expr(E). [LET]      { R = parse_let_in(ps, &K, B, E); }
expr(R) ::= FUN(K) params(P) ARROW seq_expr(E). [FUN]    { R = parse_fun(ps, &K, P, E); }
expr(R) ::= IF(K) expr(C) THEN expr(T) ELSE expr(E).     { R = parse_if(ps, &K, C, T, E); }
expr(R) ::= IF(K) expr(C) THEN expr(T). [IF]             { R = parse_if(ps, &K, C, T, NULL); }
expr(R) ::= expr(A) ASSIGNOP(O) expr(B).                 { R = parse_assign(ps, A, &O, B, NULL); }
expr(R) ::= expr(A) ASSIGNOP(O) expr(B) LOGIC simple(L). { R = parse_assign(ps, A, &O, B, L); }
expr(R) ::= expr(A) COMMA expr(B).                       { R = parse_tuple(ps, A, B); }
expr(R) ::= expr(A) BARBAR(O) expr(B).                   { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) AMPAMP(O) expr(B).                   { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) EQ(O) expr(B).                       { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) CMPOP(O) expr(B).                    { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) ATOP(O) expr(B).                     { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) ADDOP(O) expr(B).                    { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) MINUS(O) expr(B).                    { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) MULOP(O) expr(B).                    { R = parse_binop(ps, A, &O, B); }
expr(R) ::= expr(A) POWOP(O) expr(B).                    { R = parse_binop(ps, A, &O, B); }
expr(R) ::= MINUS(O) expr(A). [UMINUS]                   { R = parse_unop(ps, &O, A); }
expr(R) ::= FOR(K) IDENT(N) EQ seq_expr(A) TO seq_expr(B) DO seq_expr(C) DONE(E).
                                                         { R = parse_for(ps, &K, &N, A, B, C, &E, 0); }
expr(R) ::= FOR(K) IDENT(N) EQ seq_expr(A) DOWNTO seq_expr(B) DO seq_expr(C) DONE(E).
                                                         { R = parse_for(ps, &K, &N, A, B, C, &E, 1); }

/* Application: a simple expression followed by arguments. */
app(R) ::= simple(E).                                    { R = E; }
app(R) ::= simple(F) args(A).                            { R = parse_app(ps, F, A); }

%type args {NodeList}
args(R) ::= arg(A).                                      { R = (NodeList){0}; parse_push(ps, &R, A); }
args(R) ::= args(L) arg(A).                              { R = L; parse_push(ps, &R, A); }

arg(R) ::= simple(E).                                    { R = E; }
arg(R) ::= TILDE_NAME(L).                                { R = parse_arg(ps, &L, NULL, ARG_LABELLED); }
arg(R) ::= TILDE_LABEL(L) simple(E).                     { R = parse_arg(ps, &L, E, ARG_LABELLED); }
arg(R) ::= QUEST_NAME(L).                                { R = parse_arg(ps, &L, NULL, ARG_OPTIONAL); }
arg(R) ::= QUEST_LABEL(L) simple(E).                     { R = parse_arg(ps, &L, E, ARG_OPTIONAL); }

simple(R) ::= IDENT(T).                                  { R = parse_leaf(ps, NODE_VAR, &T); }
simple(R) ::= UIDENT(T).                                 { R = parse_leaf(ps, NODE_MODULE, &T); }
simple(R) ::= INT(T).                                    { R = parse_leaf(ps, NODE_INT, &T); }
simple(R) ::= FLOAT(T).                                  { R = parse_leaf(ps, NODE_FLOAT, &T); }
simple(R) ::= STRING(T).                                 { R = parse_leaf(ps, NODE_STRING, &T); }
simple(R) ::= TRUE(T).                                   { R = parse_leaf(ps, NODE_BOOL, &T); }
simple(R) ::= QUESTION(T).                               { R = parse_leaf(ps, NODE_RUNTIME_SIZE, &T); }
simple(R) ::= FALSE(T).                                  { R = parse_leaf(ps, NODE_BOOL, &T); }
simple(R) ::= LPAREN(L) RPAREN(E).                       { R = parse_unit(ps, &L, &E); }
simple(R) ::= LPAREN(L) seq_expr(X) RPAREN(E).           { R = parse_paren(ps, &L, X, &E); }
simple(R) ::= LPAREN(L) seq_expr(X) COLON IDENT(B) RPAREN(E).
                                                         { R = parse_annot(ps, &L, X, &B, &E); }
simple(R) ::= LPAREN(L) seq_expr(X) COLON UNDERSCORE(B) RPAREN(E).
                                                         { R = parse_annot(ps, &L, X, &B, &E); }
simple(R) ::= LBRACKET(L) RBRACKET(E).                   { R = parse_list(ps, NODE_LIST, &L, (NodeList){0}, &E); }
simple(R) ::= LBRACKET(L) elements(X) RBRACKET(E).       { R = parse_list(ps, NODE_LIST, &L, X, &E); }
simple(R) ::= LBRACKBAR(L) BARRBRACKET(E).               { R = parse_list(ps, NODE_ARRAY, &L, (NodeList){0}, &E); }
simple(R) ::= LBRACKBAR(L) elements(X) BARRBRACKET(E).   { R = parse_list(ps, NODE_ARRAY, &L, X, &E); }
simple(R) ::= record(E).                                 { R = E; }
simple(R) ::= code_block(E).                             { R = E; }
simple(R) ::= simple(X) DOT IDENT(N).                    { R = parse_field(ps, X, &N); }
simple(R) ::= simple(X) DOT UIDENT(N).                   { R = parse_field(ps, X, &N); }
simple(R) ::= PREFIXOP(O) simple(X).                     { R = parse_unop(ps, &O, X); }
simple(R) ::= TILDE_TILDE(T) simple(X).                  { R = parse_commented(ps, &T, X); }

%type elements {NodeList}
elements(R) ::= expr(E).                                 { R = (NodeList){0}; parse_push(ps, &R, E); }
elements(R) ::= elements(L) SEMI expr(E).                { R = L; parse_push(ps, &R, E); }
elements(R) ::= elements(L) SEMI.                        { R = L; }

/* Inline definitions: { w }, { b = 0.; o = [ hid ] } — the first field names the tensor. */
record(R) ::= LBRACE(L) fields(F) RBRACE(E).             { R = parse_record(ps, &L, F, &E); }
%type fields {NodeList}
fields(R) ::= field(F).                                  { R = (NodeList){0}; parse_push(ps, &R, F); }
fields(R) ::= fields(L) SEMI field(F).                   { R = L; parse_push(ps, &R, F); }
fields(R) ::= fields(L) SEMI.                            { R = L; }
field(R) ::= IDENT(N).                                   { R = parse_field_def(ps, &N, NULL); }
field(R) ::= IDENT(N) EQ expr(E).                        { R = parse_field_def(ps, &N, E); }

/* ===================================================================== Expected tokens */

%code {
/* Does the parser, in its current state, accept `token` next?  Simulates the LR automaton on a
 * copy of the state stack without running any action, so syntax errors can say what was
 * expected. */
static int tsr_parse_accepts(yyParser *parser, int token) {
    int count = (int)(parser->yytos - parser->yystack) + 1;
    int cap = count + 64;
    int *stack = malloc((size_t)cap * sizeof *stack);
    if (!stack) return 0;
    for (int i = 0; i < count; i++) stack[i] = parser->yystack[i].stateno;
    int top = count - 1, act = stack[top], result = 0;
    for (int steps = 0; steps < 100000; steps++) {
        act = yy_find_shift_action((YYCODETYPE)token, (YYACTIONTYPE)act);
        if (act >= YY_MIN_REDUCE && act <= YY_MAX_REDUCE) {
            int rule = act - YY_MIN_REDUCE;
            int base = top + yyRuleInfoNRhs[rule];
            if (base < 0) break;
            act = yy_find_reduce_action((YYACTIONTYPE)stack[base], yyRuleInfoLhs[rule]);
            top = base + 1;
            if (top >= cap) {
                int *grown = realloc(stack, (size_t)(cap *= 2) * sizeof *stack);
                if (!grown) break;
                stack = grown;
            }
            stack[top] = act;
        } else {
            result = act <= YY_MAX_SHIFTREDUCE || act == YY_ACCEPT_ACTION;
            break;
        }
    }
    free(stack);
    return result;
}

int TsrParseAccepts(void *parser, int token) { return tsr_parse_accepts((yyParser *)parser, token); }

int TsrParseExpected(void *parser, int *tokens, int max) {
    int n = 0;
    for (int t = 1; t < YYNTOKEN && n < max; t++)
        if (tsr_parse_accepts((yyParser *)parser, t)) tokens[n++] = t;
    return n;
}
}
