/* spec_parser.y — Lemon grammar of einsum spec strings ("...|i->j; ...|j->k => ...|i->k").
 *
 * What it does: accepts the token stream of one spec (from grammar/spec_lexer.re, driven by
 * spec_parse() in compiler/front/spec.c) and calls the spec_build_* builders of compiler/front/spec.h for
 * every construct; the builders make the Spec tree and report semantic errors.  Requires spec.h
 * (token type SpecToken, the parse state, the builders).  Produces build/gen/spec_parser.c/.h
 * (parser SpecParse, token codes SPEC_TK_*).  The token order below is the codes' order.
 * Syntax errors go to spec_syntax_error(), which knows the context and words one precise
 * message; the driver stops at the first error, so nothing cascades.
 *
 * The grammar is exactly the language documented in spec.h: rows are comma lists with an
 * optional trailing comma (in single-character mode the driver inserts the commas), and the
 * axis forms are told apart by one token of lookahead ('^', '*', '+', '=', '<'); a merged axis
 * starts with '('. */

%name SpecParse
%token_prefix SPEC_TK_
%token_type {SpecToken}
%extra_argument {SpecParseState *ps}
%start_symbol spec

%include {
#include <assert.h>
#include <stddef.h>

#include "front/spec.h"
}

%syntax_error {
    spec_syntax_error(ps, yymajor, TOKEN);
}

/* Tokens own nothing (the tree lives in the arena); this only marks the value as used. */
%token_destructor { (void)$$; }

%stack_overflow {
    spec_stack_overflow(ps);
}

%token IDENT INT UNDERSCORE ELLIPSIS ROWVAR COMMA BAR ARROW SEMI FATARROW PLUS STAR CARET EQ LT LPAREN RPAREN LBRACKET RBRACKET.

%type operands {SpecSlotList *}
%type slot {SpecSlot *}
%type row {SpecElemList *}
%type nrow {SpecElemList *}
%type elems {SpecElemList *}
%type elem {SpecElem}
%type axis {SpecAxis *}
%type pstart {SpecPieceList *}
%type pieces {SpecPieceList *}
%type over {SpecTerm}
%type kernel {SpecTerm}
%type coeff {SpecCoeff}
%type pad {SpecPadMark}

spec ::= operands(L) FATARROW slot(R).          { spec_build_spec(ps, L, R); }

operands(A) ::= slot(S).                        { A = spec_build_slots(ps, NULL, S); }
operands(A) ::= operands(L) SEMI slot(S).       { A = spec_build_slots(ps, L, S); }

/* A slot with no token at all is the scalar slot ("i =>", "i; => i"); otherwise a lone output
 * row must be non-empty. */
slot(A) ::= .                                   { A = spec_build_slot(ps, NULL, NULL, NULL, NULL, NULL); }
slot(A) ::= nrow(O).                            { A = spec_build_slot(ps, NULL, NULL, O, NULL, NULL); }
slot(A) ::= row(B) BAR(T) row(O).               { A = spec_build_slot(ps, B, NULL, O, &T, NULL); }
slot(A) ::= row(I) ARROW(T) row(O).             { A = spec_build_slot(ps, NULL, I, O, NULL, &T); }
slot(A) ::= row(B) BAR(T) row(I) ARROW(U) row(O). { A = spec_build_slot(ps, B, I, O, &T, &U); }

row(A) ::= .                                    { A = NULL; }
row(A) ::= nrow(R).                             { A = R; }

nrow(A) ::= elems(L).                           { A = L; }
nrow(A) ::= elems(L) COMMA.                     { A = L; }

elems(A) ::= elem(E).                           { A = spec_build_elems(ps, NULL, E); }
elems(A) ::= elems(L) COMMA elem(E).            { A = spec_build_elems(ps, L, E); }

elem(A) ::= axis(X).                            { A = spec_build_axis_elem(X); }
elem(A) ::= ELLIPSIS(T).                        { A = spec_build_row_var(ps, T, false); }
elem(A) ::= ROWVAR(T).                          { A = spec_build_row_var(ps, T, true); }

axis(A) ::= IDENT(T).                           { A = spec_build_label(ps, T); }
axis(A) ::= INT(T).                             { A = spec_build_fixed(ps, T); }
axis(A) ::= UNDERSCORE(T).                      { A = spec_build_placeholder(ps, T); }
axis(A) ::= pieces(P).                          { A = spec_build_concat(ps, P); }
axis(A) ::= LPAREN(L) IDENT(O) COMMA IDENT(I) RPAREN(R). { A = spec_build_merged(ps, L, O, I, R); }
axis(A) ::= LBRACKET(L) INT(N) RBRACKET(R).     { A = spec_build_gather(ps, L, N, R); }
axis(A) ::= over(O) pad(P) PLUS kernel(K).      { A = spec_build_affine(ps, O, P, NULL, &K); }
axis(A) ::= over(O) pad(P) PLUS INT(N) PLUS kernel(K). { A = spec_build_affine(ps, O, P, &N, &K); }
axis(A) ::= over(O) pad(P) PLUS INT(N).         { A = spec_build_affine(ps, O, P, &N, NULL); }
axis(A) ::= coeff(C) STAR IDENT(L). {
    SpecTerm over = spec_build_term(ps, &C, L);
    SpecPadMark none = {SPEC_PAD_UNSPECIFIED, {0, 0, 0}};
    A = spec_build_affine(ps, over, none, NULL, NULL);
}

/* Concatenation: two or more pieces joined by '^'. */
pstart(A) ::= IDENT(T) CARET.                   { A = spec_build_pieces(ps, NULL, T, false); }
pstart(A) ::= INT(T) CARET.                     { A = spec_build_pieces(ps, NULL, T, true); }
pstart(A) ::= pieces(L) CARET.                  { A = L; }
pieces(A) ::= pstart(L) IDENT(T).               { A = spec_build_pieces(ps, L, T, false); }
pieces(A) ::= pstart(L) INT(T).                 { A = spec_build_pieces(ps, L, T, true); }

over(A) ::= IDENT(L).                           { A = spec_build_term(ps, NULL, L); }
over(A) ::= coeff(C) STAR IDENT(L).             { A = spec_build_term(ps, &C, L); }
kernel(A) ::= IDENT(L).                         { A = spec_build_term(ps, NULL, L); }
kernel(A) ::= coeff(C) STAR IDENT(L).           { A = spec_build_term(ps, &C, L); }

coeff(A) ::= INT(T).                            { A = spec_build_coeff(ps, T, false); }
coeff(A) ::= IDENT(T).                          { A = spec_build_coeff(ps, T, true); }

/* The unspecified marker's span is filled in by spec_build_affine (a point after 'over'). */
pad(A) ::= .                                    { A.padding = SPEC_PAD_UNSPECIFIED; A.span = (Span){0, 0, 0}; }
pad(A) ::= EQ(T).                               { A.padding = SPEC_PAD_SAME; A.span = T.span; }
pad(A) ::= LT(T).                               { A.padding = SPEC_PAD_VALID; A.span = T.span; }
