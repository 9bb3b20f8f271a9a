/* parse.c — the parsing stage: tokens in, a Module's AST out.
 *
 * Requires a registered source (diag.h).  Runs the re2c lexer and feeds each token to the
 * Lemon parser generated from grammar/parser.y, whose actions call the builders below.
 *
 * Before a token reaches the parser, a bracket stack checks ( [ [| { [%cd against their closers,
 * so a mismatch is reported as "expected ')' to close '(' at 3:14" with a note at the opener,
 * and runaway nesting is cut off before it can exhaust any stack.  Other syntax errors name
 * what the grammar would have accepted (computed from the LR tables).  After an error the
 * parser resynchronises at the next top-level keyword that starts a line, so one run reports
 * the errors of several items.
 *
 * Two normalisations happen while building (see ast.h): einsum operators take their spec
 * string and capture list out of the application on their right, and every spec string —
 * einsum specs, `~logic:` specs and string literals passed as `~spec:` — is parsed at compile
 * time by spec.c, so a malformed spec is reported with a caret on the exact character inside
 * the literal.  A final walk checks
 * that assignments appear only in code (%cd) contexts. */
#include "front/parse.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "parser.h"
#include "front/spec.h"

enum {
    MAX_BRACKET_NESTING = 256, /* ( [ { nested deeper than this is refused */
    MAX_TREE_DEPTH = 1000,     /* operator chains and nesting deeper than this are refused */
    MAX_EXPECTED = 80,
};

/* ------------------------------------------------------------------ building nodes */

static uint32_t depth_of(const Node *n) { return n ? n->depth : 0; }

static Node *check_depth(ParseState *ps, Node *n);

/* Compute a node's depth from its children and refuse trees too deep to walk safely. */
static Node *finish(ParseState *ps, Node *n) {
    uint32_t d = depth_of(n->a);
    if (depth_of(n->b) > d) d = depth_of(n->b);
    if (depth_of(n->c) > d) d = depth_of(n->c);
    for (uint32_t i = 0; i < n->list.count; i++)
        if (depth_of(n->list.items[i]) > d) d = depth_of(n->list.items[i]);
    n->depth = d + 1;
    return check_depth(ps, n);
}

static Node *check_depth(ParseState *ps, Node *n) {
    if (n->depth > MAX_TREE_DEPTH && !ps->failed) {
        diag_error(n->span, "expression is nested too deeply (more than %d levels)", MAX_TREE_DEPTH);
        ps->failed = true;
    }
    return n;
}

static Node *node(ParseState *ps, NodeKind kind, Span span) { return ast_node(ps->arena, kind, span); }

static Span span_of_nodes(const Node *a, const Node *b) { return span_join(ast_written_span(a), ast_written_span(b)); }

void parse_push(ParseState *ps, NodeList *list, Node *n) { ast_push(ps->arena, list, n); }

void parse_add_item(ParseState *ps, Node *item) {
    if (item) ast_push(ps->arena, &ps->module->items, item);
}

/* Parse the text of a string literal token/node as a spec; the span points inside the quotes. */
static void attach_spec_captured(ParseState *ps, Node *str, const Node *caps) {
    const Source *src = source_get(str->span.file);
    uint32_t start = str->span.start + 1, end = str->span.end > start ? str->span.end - 1 : start;
    bool in_backward = ps->item_keyword == TK_OPERATOR && ps->backward_from && str->span.start >= ps->backward_from;
    str->spec = spec_parse_warning(ps->arena, span_make(str->span.file, start, end), src->text + start, end - start,
                                   false);
    if (!str->spec || in_backward) return;
    uint32_t n = caps ? caps->list.count : 0;
    const char **names = arena_alloc(ps->arena, (n + 1) * sizeof *names);
    size_t *lens = arena_alloc(ps->arena, (n + 1) * sizeof *lens);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (caps->list.items[i]->kind == NODE_STRING) {
            names[k] = caps->list.items[i]->text;
            lens[k++] = caps->list.items[i]->len;
        }
    spec_warn_new_axes(ps->arena, str->spec, names, lens, k);
}

static void attach_spec(ParseState *ps, Node *str) { attach_spec_captured(ps, str, NULL); }

/* ------------------------------------------------------------------ items */

/* A function's parameters bind distinct names (`_` and `()` bind none): `let f x x` or
 * `fun ~a ?a ->` would leave one argument unreachable. */
static void check_param_names(NodeList params) {
    for (uint32_t i = 1; i < params.count; i++) {
        const Node *p = params.items[i];
        if (p->flag == PARAM_WILDCARD || p->flag == PARAM_UNIT) continue;
        for (uint32_t j = 0; j < i; j++) {
            const Node *q = params.items[j];
            if (q->flag == PARAM_WILDCARD || q->flag == PARAM_UNIT || strcmp(p->name, q->name) != 0) continue;
            diag_error(p->span, "'%s' is bound twice in this function's parameters", p->name);
            diag_note(q->span, "the first '%s' is here; each parameter needs a name of its own", q->name);
            break;
        }
    }
}

Node *parse_binding(ParseState *ps, const Token *name, NodeList params, Node *value, bool rec) {
    check_param_names(params);
    Node *n = node(ps, NODE_LET, span_join(name->span, ast_written_span(value)));
    n->name = name->text;
    n->list = params;
    n->a = value;
    n->flag = rec;
    return finish(ps, n);
}

Node *parse_item_let(ParseState *ps, const Token *kw, Node *binding, int flags) {
    Node *n = node(ps, ITEM_LET, span_join(kw->span, binding->span));
    n->name = binding->name;
    n->list = binding->list;
    n->a = binding->a;
    n->flag = flags | (binding->flag ? LET_REC : 0);
    return finish(ps, n);
}

Node *parse_op_name(ParseState *ps, const Token *op, const Token *close) {
    Node *n = node(ps, NODE_VAR, close ? span_join(op->span, close->span) : op->span);
    n->name = op->text;
    return finish(ps, n);
}

/* "." "@" "T" written literally (three source bytes with the quotes; an escape is not a name). */
static bool is_logic_name(const Node *s) {
    return s->kind == NODE_STRING && s->span.end - s->span.start == 3 && s->len == 1 &&
           (s->text[0] == '.' || s->text[0] == '@' || s->text[0] == 'T');
}

Node *parse_logic(ParseState *ps, Node *logic) {
    if (logic->kind == NODE_STRING) {
        if (!is_logic_name(logic) && logic->text && !strstr(logic->text, "=>")) /* ~logic:"X" */
            diag_error(logic->span, "'~logic:' takes \".\" (pointwise), \"@\" (compose), \"T\" (transpose) or an "
                       "einsum spec with '=>'; \"%s\" is none of them", lex_quoted(ps->arena, logic->text));
        else if (!is_logic_name(logic)) attach_spec(ps, logic);
    } else if (logic->kind != NODE_VAR) {
        diag_error(logic->span, "'~logic:' takes a string literal (\".\", \"@\", \"T\" or an einsum spec) or a name");
    }
    return logic;
}

Node *parse_op_clause(ParseState *ps, const Token *name, Node *block) {
    if (strcmp(name->text, "forward") != 0 && strcmp(name->text, "backward") != 0)
        diag_error(name->span, "expected 'forward' or 'backward' before a [%%cd …] block, found '%s'", name->text);
    Node *n = node(ps, NODE_FIELD_DEF, span_join(name->span, block->span));
    n->name = name->text;
    n->a = block;
    return finish(ps, n);
}

Node *parse_op_clause_word(ParseState *ps, const Token *name, const Token *word) {
    if (strcmp(name->text, "backward") != 0 || strcmp(word->text, "none") != 0) {
        if (strcmp(name->text, "forward") == 0)
            diag_error(word->span, "expected a [%%cd …] block after 'forward', found '%s'", word->text);
        else if (strcmp(name->text, "backward") == 0)
            diag_error(word->span, "'backward' takes a [%%cd …] block, or 'none' (no gradient flows through the "
                       "operator), not '%s'", word->text);
        else
            diag_error(name->span, "expected 'forward [%%cd …]' or 'backward [%%cd …]' (or 'backward none'), found '%s'",
                       name->text);
    }
    Node *n = node(ps, NODE_FIELD_DEF, span_join(name->span, word->span));
    n->name = name->text;
    n->a = NULL;
    n->flag = 1; /* `none` */
    return finish(ps, n);
}

Node *parse_item_operator(ParseState *ps, const Token *kw, Node *name, NodeList params, Node *logic,
                          NodeList clauses) {
    Node *last = clauses.items[clauses.count - 1];
    Node *n = node(ps, ITEM_OPERATOR, span_join(kw->span, last->span));
    n->name = name->name;
    n->list = params;
    n->c = logic;
    Node *forward = NULL, *backward = NULL;
    bool misspelt = false;
    for (uint32_t i = 0; i < clauses.count; i++) {
        Node *cl = clauses.items[i];
        bool is_fwd = strcmp(cl->name, "forward") == 0;
        Node **slot = is_fwd ? &forward : &backward;
        if (!is_fwd && strcmp(cl->name, "backward") != 0) { /* already reported */
            misspelt = true;
            continue;
        }
        if (*slot) {
            diag_error(cl->span, "operator '%s' has two '%s' blocks", n->name, cl->name);
            diag_note((*slot)->span, "the first '%s' block is here", cl->name);
            continue;
        }
        if (is_fwd && backward) {
            diag_error(cl->span, "the 'forward' block must come before the 'backward' block");
            diag_note(backward->span, "the 'backward' block is here");
        }
        *slot = cl;
    }
    if (!forward && !misspelt)
        diag_error(kw->span, "operator '%s' has no 'forward' block (write forward [%%cd …])", n->name);
    n->a = forward ? forward->a : NULL;
    n->b = backward ? backward->a : NULL;
    if (backward && backward->flag) n->flag |= OP_NO_GRADIENT;
    return finish(ps, n);
}

Node *parse_item_named(ParseState *ps, NodeKind kind, const Token *kw, const Token *name, Node *value) {
    Node *n = node(ps, kind, span_join(kw->span, ast_written_span(value)));
    n->name = name->text;
    n->a = value;
    return finish(ps, n);
}

Node *parse_item_input(ParseState *ps, const Token *kw, Node *record) {
    Node *n = node(ps, ITEM_INPUT, span_join(kw->span, ast_written_span(record)));
    n->name = record->name;
    n->a = record;
    return finish(ps, n);
}

Node *parse_item_main(ParseState *ps, const Token *kw, Node *body) {
    Node *n = node(ps, ITEM_MAIN, span_join(kw->span, ast_written_span(body)));
    n->a = body;
    return finish(ps, n);
}

Node *parse_item_open(ParseState *ps, const Token *kw, const Token *name) {
    Node *n = node(ps, ITEM_OPEN, span_join(kw->span, name->span));
    n->name = name->text;
    return finish(ps, n);
}

/* ------------------------------------------------------------------ parameters and code */

Node *parse_param(ParseState *ps, const Token *tok, int kind, Node *dflt, const Token *end) {
    Node *n = node(ps, NODE_PARAM, end ? span_join(tok->span, end->span) : tok->span);
    n->name = kind == PARAM_UNIT ? "()" : tok->text;
    n->flag = kind;
    n->a = dflt;
    return finish(ps, n);
}

Node *parse_param_default(ParseState *ps, const Token *open, const Token *name, Node *dflt,
                          const Token *close) {
    Node *n = node(ps, NODE_PARAM, span_join(open->span, close->span));
    n->name = name->text;
    n->flag = PARAM_OPTIONAL;
    n->a = dflt;
    return finish(ps, n);
}

Node *parse_code_block(ParseState *ps, const Token *open, Node *body, const Token *close) {
    Node *n = node(ps, NODE_CODE, span_join(open->span, close->span));
    n->a = body;
    return finish(ps, n);
}

/* ------------------------------------------------------------------ expressions */

/* `a; b; c` and `a, b, c` become one flat node, unless the left part was parenthesised.  The
 * depth is updated incrementally: recomputing it over the list would be quadratic. */
static Node *flatten(ParseState *ps, NodeKind kind, Node *left, Node *right) {
    if (left->kind == kind && !left->parenthesised) {
        parse_push(ps, &left->list, right);
        left->span = span_of_nodes(left, right);
        if (right->depth + 1 > left->depth) left->depth = right->depth + 1;
        return check_depth(ps, left);
    }
    Node *n = node(ps, kind, span_of_nodes(left, right));
    parse_push(ps, &n->list, left);
    parse_push(ps, &n->list, right);
    return finish(ps, n);
}

Node *parse_seq(ParseState *ps, Node *first, Node *next) { return flatten(ps, NODE_SEQ, first, next); }

Node *parse_let_in(ParseState *ps, const Token *kw, Node *binding, Node *body) {
    binding->span = span_join(kw->span, ast_written_span(body));
    binding->b = body;
    return finish(ps, binding);
}

Node *parse_fun(ParseState *ps, const Token *kw, NodeList params, Node *body) {
    Node *n = node(ps, NODE_FUN, span_join(kw->span, ast_written_span(body)));
    n->list = params;
    n->a = body;
    if (params.count == 0) diag_error(kw->span, "'fun' needs at least one parameter before '->'");
    check_param_names(params);
    return finish(ps, n);
}

Node *parse_if(ParseState *ps, const Token *kw, Node *cond, Node *then_branch, Node *else_branch) {
    Node *n = node(ps, NODE_IF, span_join(kw->span, ast_written_span(else_branch ? else_branch : then_branch)));
    n->a = cond;
    n->b = then_branch;
    n->c = else_branch;
    return finish(ps, n);
}

Node *parse_assign(ParseState *ps, Node *lhs, const Token *op, Node *rhs, Node *logic) {
    Node *n = node(ps, NODE_ASSIGN, span_join(ast_written_span(lhs), ast_written_span(logic ? logic : rhs)));
    n->name = op->text;
    n->a = lhs;
    n->b = rhs;
    n->c = logic ? parse_logic(ps, logic) : NULL;
    return finish(ps, n);
}

Node *parse_tuple(ParseState *ps, Node *left, Node *right) { return flatten(ps, NODE_TUPLE, left, right); }

static bool is_plain(const Node *n, NodeKind kind) { return n && n->kind == kind && !n->parenthesised; }

/* A capture list is a list literal that starts with a string literal; any other list (such as
 * a tensor literal [1.; 2.]) is an operand. */
static bool is_capture_list(const Node *n) {
    return is_plain(n, NODE_LIST) && n->list.count > 0 && n->list.items[0]->kind == NODE_STRING;
}

/* The leftmost leaf of an expression: where a spec string ends up when a tighter operator
 * captured it, as in x ++ "i=>0" * 2. */
static const Node *leftmost(const Node *n) {
    while (n && !n->parenthesised && (n->kind == NODE_BINOP || n->kind == NODE_APP || n->kind == NODE_EINSUM))
        n = n->a;
    return n;
}

/* Rebuild an application from fn and args[from, to). */
static Node *reapply(ParseState *ps, Node *fn, Node **args, uint32_t from, uint32_t to) {
    if (from >= to) return fn;
    Node *app = node(ps, NODE_APP, span_join(ast_written_span(fn), ast_written_span(args[to - 1])));
    app->a = fn;
    for (uint32_t i = from; i < to; i++) parse_push(ps, &app->list, args[i]);
    return finish(ps, app);
}

static Node *build_einsum(ParseState *ps, Node *left, const Token *op, Node *right, int arity) {
    Node *spec = NULL, *caps = NULL, *operand = NULL;
    if (is_plain(right, NODE_STRING)) {
        spec = right;
    } else if (is_plain(right, NODE_APP)) {
        Node **args = right->list.items;
        uint32_t n = right->list.count;
        if (is_plain(right->a, NODE_STRING)) { /* a +* "spec" [caps] b */
            spec = right->a;
            uint32_t i = 0;
            if (n > 0 && is_capture_list(args[0])) caps = args[i++];
            if (i < n) operand = reapply(ps, args[i], args, i + 1, n);
        } else if (n >= 2 && is_capture_list(args[n - 1]) && is_plain(args[n - 2], NODE_STRING)) {
            spec = args[n - 2]; /* a +* b "spec" [caps] */
            caps = args[n - 1];
            operand = reapply(ps, right->a, args, 0, n - 2);
        } else if (n >= 1 && is_plain(args[n - 1], NODE_STRING)) {
            spec = args[n - 1]; /* a +* b "spec" */
            operand = reapply(ps, right->a, args, 0, n - 1);
        }
    }
    Node *e = node(ps, NODE_EINSUM, span_join(ast_written_span(left), ast_written_span(right)));
    e->name = op->text;
    e->a = left;
    const Node *first = leftmost(right);
    if (!spec && first && first->kind == NODE_STRING && first != right) {
        diag_error(first->span, "the spec of '%s' was taken into the operand of a tighter operator; "
                                "put the einsum in parentheses, as in (x %s \"…\"%s) %s z",
                   op->text, op->text, arity == 2 ? " y" : "", right->kind == NODE_BINOP ? right->name : "*");
        e->b = right;
        return finish(ps, e);
    }
    if (!spec) {
        diag_error(op->span, "einsum operator '%s' needs a spec string literal, as in %s", op->text,
                   arity == 2 ? "a +* \"i,j;j,k => i,k\" b" : "x ++ \"...|... => 0\"");
        e->b = right;
        return finish(ps, e);
    }
    if (arity == 2 && !operand)
        diag_error(spec->span, "einsum operator '%s' needs a second operand after its spec", op->text);
    if (arity == 1 && operand)
        diag_error(operand->span, "einsum operator '%s' takes one operand; this one is extra", op->text);
    if (operand && operand->kind == NODE_ARG)
        diag_error(operand->span, "an einsum operand cannot be a labelled argument");
    if (caps)
        for (uint32_t i = 0; i < caps->list.count; i++)
            if (caps->list.items[i]->kind != NODE_STRING)
                diag_error(caps->list.items[i]->span,
                           "a capture list holds string literals naming labels of the spec");
    /* a + b ++ "…" is (a + b) ++ "…": one precedence, grouping to the left, whatever the eye
     * reads (a + Σb); as C compilers warn of a & b == c, say so and ask for parentheses. */
    if (op->text[0] == '+' && is_plain(left, NODE_BINOP) && (left->name[0] == '+' || left->name[0] == '-')) {
        diag_warning(op->span, "'%s' takes all of the '%s' on its left as its operand: '+', '-' and the einsum "
                     "operators beginning with '+' are of one precedence and group to the left; put parentheses "
                     "around the operand you mean", op->text, left->name);
        diag_note(left->span, "the operand of '%s'", op->text);
    }
    attach_spec_captured(ps, spec, caps);
    e->b = arity == 2 ? operand : NULL;
    e->c = caps;
    e->spec = spec->spec;
    e->text = spec->text;
    e->len = spec->len;
    return finish(ps, e);
}

Node *parse_binop(ParseState *ps, Node *left, const Token *op, Node *right) {
    int arity = ast_einsum_arity(op->text);
    if (arity) return build_einsum(ps, left, op, right, arity);
    Node *n = node(ps, NODE_BINOP, span_of_nodes(left, right));
    n->name = op->text;
    n->a = left;
    n->b = right;
    return finish(ps, n);
}

Node *parse_unop(ParseState *ps, const Token *op, Node *operand) {
    Node *n = node(ps, NODE_UNOP, span_join(op->span, ast_written_span(operand)));
    n->name = op->text;
    n->a = operand;
    return finish(ps, n);
}

Node *parse_for(ParseState *ps, const Token *kw, const Token *var, Node *from, Node *to, Node *body,
                const Token *done, int downto) {
    Node *n = node(ps, NODE_FOR, span_join(kw->span, done->span));
    n->name = var->text;
    n->a = from;
    n->b = to;
    n->c = body;
    n->flag = downto;
    return finish(ps, n);
}

Node *parse_app(ParseState *ps, Node *fn, NodeList args) {
    Node *n = node(ps, NODE_APP, span_join(ast_written_span(fn), ast_written_span(args.items[args.count - 1])));
    n->a = fn;
    n->list = args;
    return finish(ps, n);
}

Node *parse_arg(ParseState *ps, const Token *label, Node *value, int flags) {
    /* `op ~spec:"…" a b`: the spec of an operator applied like a function (einsum3). */
    if (value && value->kind == NODE_STRING && strcmp(label->text, "spec") == 0) attach_spec(ps, value);
    Node *n = node(ps, NODE_ARG, value ? span_join(label->span, ast_written_span(value)) : label->span);
    n->name = label->text;
    n->a = value;
    n->flag = flags;
    return finish(ps, n);
}

Node *parse_leaf(ParseState *ps, NodeKind kind, const Token *tok) {
    Node *n = node(ps, kind, tok->span);
    switch (kind) {
    case NODE_INT: n->ival = tok->ival; break;
    case NODE_FLOAT: n->fval = tok->fval; n->text = tok->text; break;
    case NODE_STRING: n->text = tok->text; n->len = tok->len; break;
    case NODE_BOOL: n->ival = tok->kind == TK_TRUE; break;
    default: n->name = tok->text; break;
    }
    return finish(ps, n);
}

Node *parse_unit(ParseState *ps, const Token *open, const Token *close) {
    return finish(ps, node(ps, NODE_UNIT, span_join(open->span, close->span)));
}

Node *parse_paren(ParseState *ps, const Token *open, Node *inner, const Token *close) {
    inner->parenthesised = true;
    inner->paren = span_join(open->span, close->span); /* ((x)): the outer pair, reduced last */
    return inner;
}

Node *parse_annot(ParseState *ps, const Token *open, Node *inner, const Token *basis, const Token *close) {
    Node *n = node(ps, NODE_ANNOT, span_join(open->span, close->span));
    n->a = inner;
    n->name = basis->text;
    n->parenthesised = true;
    return finish(ps, n);
}

Node *parse_list(ParseState *ps, NodeKind kind, const Token *open, NodeList items, const Token *close) {
    Node *n = node(ps, kind, span_join(open->span, close->span));
    n->list = items;
    /* `[1., 2., 3.]`, Python's list: one item, a tuple (in a tensor literal, one row of input
     * axes), which is rarely what is meant; `[(1., 2., 3.)]` says it is. */
    const Node *only = items.count == 1 ? items.items[0] : NULL;
    if (only && only->kind == NODE_TUPLE && !only->parenthesised) {
        const char *opens = kind == NODE_ARRAY ? "[|" : "[", *closes = kind == NODE_ARRAY ? "|]" : "]";
        const char *text = source_get(only->span.file)->text;
        char meant[96] = "";
        for (uint32_t i = 0; i < only->list.count && strlen(meant) < 64; i++) { /* the items, with ';' */
            Span s = ast_written_span(only->list.items[i]);
            snprintf(meant + strlen(meant), sizeof meant - strlen(meant), "%s%.*s", i ? "; " : "",
                     (int)(s.end - s.start), text + s.start);
        }
        bool short_enough = strlen(meant) < 64;
        diag_warning(only->span, "this %s holds one item, a tuple of %u: the items of %s are separated by ';'%s%s%s%s",
                     kind == NODE_ARRAY ? "array" : "list", only->list.count, kind == NODE_ARRAY ? "an array" : "a list",
                     short_enough ? " (" : "", short_enough ? opens : "", short_enough ? meant : "",
                     short_enough ? (kind == NODE_ARRAY ? "|])" : "])") : "");
        diag_note(only->span, "a tuple as its one item is written in parentheses, %s(…, …)%s (in a tensor literal, "
                  "a row of input axes)", opens, closes);
    }
    return finish(ps, n);
}

Node *parse_field(ParseState *ps, Node *object, const Token *name) {
    Node *n = node(ps, NODE_FIELD, span_join(ast_written_span(object), name->span));
    n->a = object;
    n->name = name->text;
    return finish(ps, n);
}

Node *parse_commented(ParseState *ps, const Token *tilde, Node *inner) {
    Node *n = node(ps, NODE_COMMENTED, span_join(tilde->span, inner->span));
    if (inner->kind != NODE_SEQ || inner->list.count < 2) {
        diag_error(inner->span, "a block comment is written ~~(comment; code)");
        n->b = inner;
        return finish(ps, n);
    }
    n->a = inner->list.items[0];
    if (inner->list.count == 2) {
        n->b = inner->list.items[1];
    } else {
        Node *rest = node(ps, NODE_SEQ, span_join(inner->list.items[1]->span,
                                                  inner->list.items[inner->list.count - 1]->span));
        for (uint32_t i = 1; i < inner->list.count; i++) parse_push(ps, &rest->list, inner->list.items[i]);
        n->b = finish(ps, rest);
    }
    return finish(ps, n);
}

Node *parse_record(ParseState *ps, const Token *open, NodeList fields, const Token *close) {
    Node *n = node(ps, NODE_RECORD, span_join(open->span, close->span));
    n->list = fields;
    n->name = fields.items[0]->name;
    if (fields.count > 256) {
        diag_error(n->span, "an inline definition has at most 256 fields, this one has %u", fields.count);
        return finish(ps, n);
    }
    for (uint32_t i = 1; i < fields.count; i++)
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(fields.items[i]->name, fields.items[j]->name) == 0) {
                diag_error(fields.items[i]->span, "field '%s' appears twice in this inline definition",
                           fields.items[i]->name);
                diag_note(fields.items[j]->span, "first given here");
                break;
            }
    return finish(ps, n);
}

Node *parse_field_def(ParseState *ps, const Token *name, Node *value) {
    Node *n = node(ps, NODE_FIELD_DEF, value ? span_join(name->span, ast_written_span(value)) : name->span);
    n->name = name->text;
    n->a = value;
    return finish(ps, n);
}

/* ------------------------------------------------------------------ syntax errors */

typedef struct OpenBracket {
    int kind;
    Span span;
} Open;

static bool starts_item(const Token *t);
static int closer_of(int opener);
static void describe_open(const Open *open, char *buf, size_t size);

static bool has(const int *tokens, int n, int kind) {
    for (int i = 0; i < n; i++)
        if (tokens[i] == kind) return true;
    return false;
}

static int drop(int *tokens, int n, const int *kinds, size_t count) {
    int out = 0;
    for (int i = 0; i < n; i++) {
        bool keep = true;
        for (size_t k = 0; k < count; k++)
            if (tokens[i] == kinds[k]) keep = false;
        if (keep) tokens[out++] = tokens[i];
    }
    return out;
}

#define DROP(tokens, n, ...)                                                                \
    drop((tokens), (n), (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

/* Describe the expected set in a few words: "an expression", "an operator", "'='"... */
static const char *describe_expected(ParseState *ps, int *tokens, int n) {
    const char *parts[16];
    int count = 0;
    if (has(tokens, n, TK_INT)) {
        parts[count++] = "an expression";
        n = DROP(tokens, n, TK_IDENT, TK_UIDENT, TK_INT, TK_FLOAT, TK_STRING, TK_TRUE, TK_FALSE, TK_LPAREN,
                 TK_LBRACKET, TK_LBRACKBAR, TK_LBRACE, TK_CD_OPEN, TK_PREFIXOP, TK_TILDE_TILDE, TK_MINUS,
                 TK_LET, TK_FUN, TK_IF, TK_FOR, TK_TILDE_NAME, TK_TILDE_LABEL, TK_QUEST_NAME, TK_QUEST_LABEL,
                 TK_QUESTION);
    }
    if (has(tokens, n, TK_ADDOP)) {
        parts[count++] = "an operator";
        n = DROP(tokens, n, TK_MINUS, TK_POWOP, TK_MULOP, TK_ADDOP, TK_ATOP, TK_CMPOP, TK_AMPAMP, TK_BARBAR,
                 TK_EQ, TK_ASSIGNOP, TK_COMMA, TK_DOT, TK_LOGIC);
    }
    if (has(tokens, n, TK_TILDE_NAME) && has(tokens, n, TK_QUEST_LPAREN)) {
        parts[count++] = "a parameter";
        n = DROP(tokens, n, TK_IDENT, TK_UNDERSCORE, TK_LPAREN, TK_TILDE_NAME, TK_QUEST_NAME, TK_QUEST_LPAREN);
    }
    if (has(tokens, n, TK_OPERATOR)) {
        parts[count++] = "a top-level item";
        n = DROP(tokens, n, TK_LET, TK_LET_OP, TK_LET_CD, TK_OPERATOR, TK_INDEX, TK_DATA, TK_INPUT,
                 TK_ROUTINE, TK_MAIN, TK_OPEN, TK_OPTION);
    }
    for (int i = 0; i < n && count < 16; i++) {
        const char *name = lex_token_name(tokens[i]);
        if (name) parts[count++] = name;
    }
    if (count == 0 || count > 6) return NULL;
    char *out = "";
    for (int i = 0; i < count; i++)
        out = arena_printf(ps->arena, "%s%s%s", out, i == 0 ? "" : i == count - 1 ? " or " : ", ", parts[i]);
    return out;
}

static bool is_binary_operator(int kind) {
    switch (kind) {
    case TK_MINUS: case TK_POWOP: case TK_MULOP: case TK_ADDOP: case TK_ATOP: case TK_CMPOP:
    case TK_AMPAMP: case TK_BARBAR: case TK_EQ: case TK_ASSIGNOP: case TK_ARROW: case TK_COMMA:
    case TK_SEMI: case TK_IN: case TK_THEN: case TK_ELSE: case TK_DO: case TK_TO: case TK_DOWNTO:
    case TK_PREFIXOP: case TK_LOGIC: case TK_TILDE_LABEL: case TK_QUEST_LABEL:
        return true;
    default:
        return false;
    }
}

/* Whether a ';' stands between `else` and the `then` before it (`if c then a; b else d`). */
static bool then_branch_sequence(const Token *token) {
    const char *text = source_get(token->span.file)->text;
    bool semicolon = false;
    for (uint32_t at = token->span.start, seen = 0; at >= 4 && seen < 4000; at--, seen++) {
        if (text[at - 1] == ';') semicolon = true;
        if (memcmp(text + at - 4, "then", 4) == 0 && (at == 4 || !isalnum((unsigned char)text[at - 5])) &&
            !isalnum((unsigned char)text[at]))
            return semicolon;
    }
    return false;
}

/* Whether `token` follows `for NAME` in its line (`for i in …`: the loop's counter, not a `let`). */
static bool after_for_counter(const Token *token) {
    const char *text = source_get(token->span.file)->text;
    uint32_t at = token->span.start;
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) at--;
    uint32_t name_end = at;
    while (at > 0 && (isalnum((unsigned char)text[at - 1]) || text[at - 1] == '_' || text[at - 1] == '\'')) at--;
    if (at == name_end) return false;
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) at--;
    return at >= 3 && memcmp(text + at - 3, "for", 3) == 0 &&
           (at == 3 || !(isalnum((unsigned char)text[at - 4]) || text[at - 4] == '_'));
}

static bool starts_item(const Token *t);

/* A note for a name where an item begins: another language's keyword (`def`, `import`), a
 * misspelt item keyword (`lett`), or a statement that belongs in main. */
static void item_word_note(const Token *token) {
    static const char *const foreign[][2] = {
        {"def", "let f x = …"}, {"fn", "let f x = …"}, {"function", "let f x = …"}, {"fun", "let f = fun x -> …"},
        {"var", "let x = …"}, {"val", "let x = …"}, {"const", "let x = …"}, {"import", "open Module"},
        {"include", "open Module"}, {"from", "open Module"}, {"require", "open Module"}, {"use", "open Module"}};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        if (strcmp(token->text, foreign[i][0]) == 0) {
            diag_note(token->span, "'%s' is not a keyword of .tsr: %s", token->text, foreign[i][1]);
            return;
        }
    static const char *const statements[] = {"print", "run", "save", "load", "shuffle", "record", "plot", "progress"};
    static const char *const items[] = {"let", "main", "data", "input", "option", "index", "operator", "routine", "open"};
    bool statement = false;
    for (size_t i = 0; i < sizeof statements / sizeof *statements; i++) statement |= !strcmp(token->text, statements[i]);
    const char *near = statement ? NULL : diag_closest_name(token->text, items, sizeof items / sizeof *items);
    if (near) diag_note(token->span, "did you mean '%s'?", near);
    else diag_note(token->span, "a statement such as 'print' goes in 'main = …'");
}

void parse_syntax_error(ParseState *ps, const Token *token, void *parser) {
    if (token->kind == TK_EOF && ps->quiet_end) {
        ps->failed = true;
        return;
    }
    if (ps->failed) return;
    ps->failed = true;
    int tokens[MAX_EXPECTED];
    int n = TsrParseExpected(parser, tokens, MAX_EXPECTED);
    const char *found = lex_describe(ps->arena, token);
    bool wants_expression = has(tokens, n, TK_INT);
    bool only_items = n > 0 && has(tokens, n, TK_OPERATOR) && !wants_expression && !has(tokens, n, TK_ADDOP);
    bool wants_clause = n == 1 && tokens[0] == TK_IDENT && ps->item_keyword == TK_OPERATOR;
    const char *expected = describe_expected(ps, tokens, n);
    const Token *prev = &ps->previous;
    if (ps->bracket_depth > 0 && (starts_item(token) || token->kind == TK_EOF)) {
        const Open *open = &ps->brackets[ps->bracket_depth - 1];
        char where[96];
        describe_open(open, where, sizeof where);
        diag_error(token->span, "expected %s to close %s, found %s", lex_token_name(closer_of(open->kind)),
                   where, found);
        diag_note(open->span, "to close this");
    } else if (wants_clause) {
        diag_error(token->span, "expected 'forward [%%cd …]' (and optionally 'backward [%%cd …]'), found %s", found);
    } else if (only_items && token->kind != TK_EOF && !prev->kind) {
        diag_error(token->span, "expected an item (let, main, data, input, option, index, operator, routine or open), "
                   "found %s", found);
        if (token->kind == TK_IDENT) item_word_note(token);
    } else if (only_items && token->kind != TK_EOF) {
        diag_error(token->span, "unexpected %s: the definition before it is complete", found);
        if (token->kind == TK_LOGIC)
            diag_note(token->span, "'~logic:' follows the right-hand side of an assignment in %%cd code, "
                                   "or the parameters of an operator declaration");
        else if (token->kind == TK_QUEST_LPAREN)
            diag_note(token->span, "'?(x = default)' declares an optional parameter; an optional argument "
                                   "is passed as ?x:value");
        else if ((ps->item_keyword == TK_MAIN || ps->item_keyword == TK_ROUTINE) && prev->kind && token->kind == TK_IDENT)
            diag_note(prev->span, "the statements of %s are separated by ';': put one after this", ps->item_keyword == TK_MAIN ? "main" : "a routine");
    } else if (wants_expression && prev->kind && is_binary_operator(prev->kind) && !has(tokens, n, TK_OPERATOR)) {
        diag_error(token->span, "expected an expression after %s, found %s", lex_describe(ps->arena, prev), found);
        if ((prev->kind == TK_TILDE_LABEL || prev->kind == TK_QUEST_LABEL) && token->kind == TK_MINUS)
            diag_note(token->span, "a negative argument goes in parentheses: %.*s(-…)", (int)(prev->span.end - prev->span.start),
                      source_get(prev->span.file)->text + prev->span.start);
        else if (prev->kind == TK_EQ && (token->kind == TK_LET || token->kind == TK_LET_OP) && starts_item(token))
            diag_note(token->span, "%s in column 1 begins a new item: inside a definition, indent it", found);
    } else if (token->kind == TK_EOF) {
        if (expected) diag_error(token->span, "unexpected end of file: expected %s", expected);
        else diag_error(token->span, "unexpected end of file");
    } else if (expected) {
        diag_error(token->span, "expected %s, found %s", expected, found);
    } else {
        diag_error(token->span, "unexpected %s", found);
    }
    const char *text = source_get(token->span.file)->text;
    if (token->kind == TK_SEMI && prev->kind == TK_SEMI && prev->span.end == token->span.start)
        diag_note(token->span, "';;' ends OCaml's top-level phrases: .tsr needs none (an item begins in column 1)");
    else if (token->kind == TK_DOT && isdigit((unsigned char)text[token->span.end])) {
        int digits = (int)strspn(text + token->span.end, "0123456789");
        diag_note(token->span, "a number is written with its leading 0: 0.%.*s", digits > 20 ? 20 : digits,
                  text + token->span.end);
    }
    /* What a 'done' or an 'in' it wants would close (a loop or a let left open above). */
    int cap = (int)(sizeof ps->loops / sizeof ps->loops[0]);
    if (has(tokens, n, TK_DONE) && ps->loop_count > 0 && ps->loop_count <= cap)
        diag_note(ps->loops[ps->loop_count - 1], "the loop that 'done' would close begins here");
    else if (has(tokens, n, TK_IN) && ps->let_count > 0 && ps->let_count <= cap)
        diag_note(ps->lets[ps->let_count - 1], "the 'let' that 'in' would end: inside a definition, 'let x = … in …'");
    if (token->kind == TK_IN && !wants_expression)
        diag_note(token->span, after_for_counter(token) ? "a loop is written 'for i = a to b do … done'"
                                                        : "'in' belongs to 'let … in'; a top-level 'let' has no 'in'");
    if (token->kind == TK_ELSE && prev->kind && !wants_expression && then_branch_sequence(token)) /* `if c then a; b else d` */
        diag_note(token->span, "a 'then' branch of several statements is parenthesised: if c then (a; b) else d");
    if (token->kind == TK_COLON && expected && strstr(expected, "'}'")) /* `{ w; o: [3] }` */
        diag_note(token->span, "a field's value is written after '=': { w; o = [3] }");
    if (token->kind == TK_IDENT && prev->kind == TK_LPAREN && expected && strcmp(expected, "')'") == 0)
        diag_note(token->span, "a parameter is a bare name, let f x = …; '()' alone is the unit parameter");
    if (expected && strstr(expected, "'='") && token->text && token->text[0] == '=' && token->text[1] &&
        strchr("+-*/", token->text[1]) && !token->text[2]) /* `let x=-1` */
        diag_note(token->span, "'%s' is an assignment operator: with a space, '= %c…' is '=' and a %s", token->text,
                  token->text[1], token->text[1] == '-' ? "negative number" : "number");
}

void parse_stack_overflow(ParseState *ps) {
    if (!ps->failed) diag_error(ps->previous.span, "program is nested too deeply for the parser");
    ps->failed = true;
}

/* ------------------------------------------------------------------ the token loop */

/* The token that starts an item: its keyword, and no operator's 'backward' seen yet. */
static void begin_item(ParseState *ps, int keyword) {
    ps->item_keyword = keyword;
    ps->backward_from = 0;
    ps->loop_count = ps->let_count = 0;
}

/* Keeps ps's open loops and inner lets as token t is fed: `for` begins a loop that `do` opens and
 * `done` closes; a `let` that does not start an item is closed by `in`. */
static void track_blocks(ParseState *ps, const Token *t, bool starts) {
    int cap = (int)(sizeof ps->loops / sizeof ps->loops[0]);
    switch (t->kind) {
    case TK_FOR: ps->pending_for = t->span; break;
    case TK_DO:
        if (ps->loop_count < cap) ps->loops[ps->loop_count] = ps->pending_for.file ? span_join(ps->pending_for, t->span) : t->span;
        ps->loop_count++;
        ps->pending_for = (Span){0};
        break;
    case TK_DONE: if (ps->loop_count > 0) ps->loop_count--; break;
    case TK_LET: case TK_LET_OP: case TK_LET_CD:
        if (starts) break;
        if (ps->let_count < cap) ps->lets[ps->let_count] = t->span;
        ps->let_count++;
        break;
    case TK_IN: if (ps->let_count > 0) ps->let_count--; break;
    default: break;
    }
}


static int closer_of(int opener) {
    switch (opener) {
    case TK_LPAREN: case TK_QUEST_LPAREN: return TK_RPAREN;
    case TK_LBRACKET: case TK_CD_OPEN: return TK_RBRACKET;
    case TK_LBRACKBAR: return TK_BARRBRACKET;
    case TK_LBRACE: return TK_RBRACE;
    default: return 0;
    }
}

static bool is_opener(int kind) { return closer_of(kind) != 0; }

static bool is_closer(int kind) {
    return kind == TK_RPAREN || kind == TK_RBRACKET || kind == TK_BARRBRACKET || kind == TK_RBRACE;
}

static bool starts_item(const Token *t) {
    switch (t->kind) {
    case TK_LET: case TK_LET_OP: case TK_LET_CD: case TK_OPERATOR: case TK_INDEX: case TK_DATA:
    case TK_INPUT: case TK_ROUTINE: case TK_MAIN: case TK_OPEN: case TK_OPTION: {
        unsigned line, col;
        span_line_col(t->span, &line, &col);
        return col == 1;
    }
    default:
        return false;
    }
}

static void describe_open(const Open *open, char *buf, size_t size) {
    unsigned line, col;
    span_line_col(open->span, &line, &col);
    const Source *src = source_get(open->span.file);
    snprintf(buf, size, "'%.*s' at %u:%u", (int)(open->span.end - open->span.start),
             src->text + open->span.start, line, col);
}

/* Check a closer against the bracket stack; report a mismatch.  Returns false on error. */
static bool check_closer(ParseState *ps, Open *stack, int *depth, const Token *t) {
    if (*depth == 0) {
        diag_error(t->span, "unmatched %s", lex_token_name(t->kind));
        return false;
    }
    Open *top = &stack[*depth - 1];
    if (closer_of(top->kind) != t->kind) {
        char where[96];
        describe_open(top, where, sizeof where);
        diag_error(t->span, "expected %s to close %s, found %s", lex_token_name(closer_of(top->kind)), where,
                   lex_token_name(t->kind));
        diag_note(top->span, "to close this");
        return false;
    }
    (*depth)--;
    return true;
}

/* Assignments belong to code: let%cd bodies, [%cd …] blocks, routines and operator blocks. */
static void check_contexts(const Node *n, bool in_code) {
    if (!n) return;
    if (n->kind == NODE_CODE) in_code = true;
    if (n->kind == NODE_ASSIGN && !in_code) {
        diag_error(n->span, "assignment '%s' outside %%cd code (assignments belong in 'let%%cd' definitions, "
                            "'[%%cd …]' blocks, routines and operator blocks)", n->name);
        in_code = true; /* report the outermost one only */
    }
    check_contexts(n->a, in_code);
    check_contexts(n->b, in_code);
    check_contexts(n->c, in_code);
    for (uint32_t i = 0; i < n->list.count; i++) check_contexts(n->list.items[i], in_code);
}

/* The statements of a let%cd body are code: an arithmetic expression or a literal where a
 * statement belongs (`let%cd y = relu x + 1`) is a tensor meant for let%op, which every use of
 * `y` as code would report at the use, not here. */
static void check_code_statements(const Node *n, const Node *item) {
    if (!n) return;
    switch (n->kind) {
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) check_code_statements(n->list.items[i], item);
        return;
    case NODE_LET: check_code_statements(n->b, item); return;
    case NODE_IF: check_code_statements(n->b, item); check_code_statements(n->c, item); return;
    case NODE_FOR: check_code_statements(n->c, item); return;
    case NODE_BINOP: case NODE_UNOP: case NODE_INT: case NODE_FLOAT: case NODE_LIST: case NODE_ARRAY:
        /* `w = w - …`, `w += …`: an assignment meant, which code's elaboration explains */
        if (n->kind == NODE_BINOP && n->name[0] && n->name[strlen(n->name) - 1] == '=') return;
        diag_error(n->span, "'let%%cd %s' holds code — assignments (t =: …), t.forward, t.backprop — but this is "
                   "a value", item->name);
        diag_note(item->span, "a tensor computed from others is defined with let%%op: let%%op %s%s = …", item->name,
                  item->list.count ? " …" : "");
        return;
    default: return;
    }
}

Module *parse_module(uint32_t file, Arena *arena) {
    const Source *src = source_get(file);
    Module *module = arena_alloc(arena, sizeof *module);
    module->path = src->path;
    module->file = file;
    module->arena = arena;

    ParseState ps = {.arena = arena, .module = module, .file = file};
    Lexer lexer;
    lex_init(&lexer, file, arena);
    void *parser = TsrParseAlloc(malloc);
    if (!parser) diag_fatal_oom();
    Open stack[MAX_BRACKET_NESTING];
    int depth = 0;
    bool skipping = false; /* after an error: discard tokens up to the next item */

    for (;;) {
        Token t = lex_next(&lexer);
        ps.quiet_end = t.kind == TK_EOF && lexer.ran_off_end; /* the item it cut short is reported */
        if (skipping) {
            if (t.kind != TK_EOF && !starts_item(&t)) continue;
            skipping = false;
            TsrParseFree(parser, free);
            parser = TsrParseAlloc(malloc);
            if (!parser) diag_fatal_oom();
            ps.failed = false;
            ps.previous = (Token){0};
            begin_item(&ps, t.kind);
            depth = 0;
        }
        bool ok = t.kind != TK_ILLEGAL;
        if (ok && is_opener(t.kind)) {
            if (depth == MAX_BRACKET_NESTING) {
                diag_error(t.span, "brackets are nested too deeply (more than %d levels)", MAX_BRACKET_NESTING);
                ok = false;
            } else {
                stack[depth++] = (Open){t.kind, t.span};
            }
        } else if (ok && is_closer(t.kind)) {
            ok = check_closer(&ps, stack, &depth, &t);
        } else if (ok && t.kind == TK_EOF && depth > 0 && ps.quiet_end) {
            ok = false;
        } else if (ok && t.kind == TK_EOF && depth > 0) {
            char where[96];
            describe_open(&stack[depth - 1], where, sizeof where);
            diag_error(t.span, "unexpected end of file: expected %s to close %s",
                       lex_token_name(closer_of(stack[depth - 1].kind)), where);
            diag_note(stack[depth - 1].span, "to close this");
            ok = false;
        } else if (ok && starts_item(&t)) {
            /* A top-level keyword in column 1 always starts a new item (docs/language.md): if the
             * current item is not complete, that is the error. */
            if (TsrParseAccepts(parser, TK_OPERATOR)) {
                begin_item(&ps, t.kind);
            } else {
                ps.brackets = stack;
                ps.bracket_depth = depth;
                parse_syntax_error(&ps, &t, parser);
                ok = false;
            }
        }
        if (ok && t.kind == TK_IDENT && depth == 0 && ps.item_keyword == TK_OPERATOR && strcmp(t.text, "backward") == 0)
            ps.backward_from = t.span.start + 1;
        if (ok) {
            ps.brackets = stack;
            ps.bracket_depth = depth - (is_opener(t.kind) ? 1 : 0);
            track_blocks(&ps, &t, starts_item(&t));
            TsrParse(parser, t.kind, t, &ps);
            ps.previous = t;
        }
        if (!ok || ps.failed) {
            if (t.kind == TK_EOF) break;
            skipping = true;
            if (starts_item(&t) && !is_closer(t.kind)) {
                /* The token that revealed the error starts the next item: restart on it. */
                TsrParseFree(parser, free);
                parser = TsrParseAlloc(malloc);
                if (!parser) diag_fatal_oom();
                ps.failed = false;
                ps.previous = (Token){0};
                begin_item(&ps, t.kind);
                depth = 0;
                skipping = false;
                TsrParse(parser, t.kind, t, &ps);
                ps.previous = t;
                if (ps.failed) skipping = true;
            }
            continue;
        }
        if (t.kind == TK_EOF) break;
    }
    TsrParseFree(parser, free);
    for (uint32_t i = 0; i < module->items.count; i++) {
        Node *item = module->items.items[i];
        bool code = item->kind == ITEM_ROUTINE || (item->kind == ITEM_LET && (item->flag & LET_CD));
        check_contexts(item, code);
        if (item->kind == ITEM_LET && (item->flag & LET_CD)) check_code_statements(item->a, item);
    }
    return module;
}
