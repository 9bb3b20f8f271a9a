/* ast.h — the syntax tree of a .tsr module.
 *
 * One tagged union, Node, for expressions, code and top-level items; every node carries the
 * Span of the source it came from.  Nodes live in the module's arena.  The tree is what the
 * parser saw, with two normalisations: einsum operators hold their spec (parsed at compile
 * time, see spec.h) and capture list in named fields, and `~logic:` strings of assignments and
 * operator declarations are parsed the same way unless they name a built-in logic ("." "@" "T").
 * Nothing here knows what a name means; that is elaboration's job.
 *
 * Which fields a kind uses is listed next to it in AST_KINDS (ORDER: ast.c's dump follows the
 * same table). */
#ifndef TSR_AST_H
#define TSR_AST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/arena.h"
#include "base/diag.h"

typedef struct Spec Spec;
typedef struct Node Node;

typedef struct NodeList {
    Node **items;
    uint32_t count, cap;
} NodeList;

/*      kind            dump name      fields used */
#define AST_KINDS(X)                                                                       \
    X(NODE_INT,         "int",         "ival")                                             \
    X(NODE_FLOAT,       "float",       "fval, text")                                       \
    X(NODE_STRING,      "string",      "text, len; spec when used as a spec")              \
    X(NODE_BOOL,        "bool",        "ival (0 or 1)")                                    \
    X(NODE_UNIT,        "unit",        "-")                                                \
    X(NODE_RUNTIME_SIZE, "runtime-size", "- (`?`: a size known when the program runs)")     \
    X(NODE_VAR,         "var",         "name")                                             \
    X(NODE_MODULE,      "module",      "name (a capitalised module name)")                 \
    X(NODE_FIELD,       "field",       "a (object), name")                                 \
    X(NODE_APP,         "app",         "a (function), list (arguments: NODE_ARG or exprs)")\
    X(NODE_ARG,         "arg",         "name (label), a (value or NULL when punned), flag (ARG_*)") \
    X(NODE_BINOP,       "binop",       "name (operator), a, b")                            \
    X(NODE_UNOP,        "unop",        "name (operator: '-' or a '!' prefix), a")          \
    X(NODE_EINSUM,      "einsum",      "name (operator), a, b (NULL if unary), spec, c (captures list or NULL)") \
    X(NODE_TUPLE,       "tuple",       "list")                                             \
    X(NODE_LIST,        "list",        "list")                                             \
    X(NODE_ARRAY,       "array",       "list")                                             \
    X(NODE_RECORD,      "inline",      "list (NODE_FIELD_DEF; the first names the tensor)")\
    X(NODE_FIELD_DEF,   "def",         "name, a (value or NULL)")                          \
    X(NODE_ANNOT,       "annot",       "a, name (basis)")                                  \
    X(NODE_SEQ,         "seq",         "list")                                             \
    X(NODE_LET,         "let",         "name, list (params), a (value), b (body), flag (rec)") \
    X(NODE_FUN,         "fun",         "list (params), a (body)")                          \
    X(NODE_IF,          "if",          "a (condition), b (then), c (else or NULL)")        \
    X(NODE_FOR,         "for",         "name, a (from), b (to), c (body), flag (1: downto)") \
    X(NODE_ASSIGN,      "assign",      "name (operator), a (lhs), b (rhs), c (logic or NULL)") \
    X(NODE_CODE,        "code",        "a (the %cd block)")                                \
    X(NODE_COMMENTED,   "comment",     "a (comment), b (code)")                            \
    X(NODE_PARAM,       "param",       "name, a (default), flag (PARAM_*)")                \
    X(ITEM_LET,         "let",         "name, list (params), a (value), flag (LET_*)")     \
    X(ITEM_OPERATOR,    "operator",    "name, list (params), c (logic), a (forward), b (backward or NULL), flag (OP_*)") \
    X(ITEM_INDEX,       "index",       "name, a (range)")                                  \
    X(ITEM_DATA,        "data",        "name, a (source)")                                 \
    X(ITEM_INPUT,       "input",       "a (inline definition)")                            \
    X(ITEM_ROUTINE,     "routine",     "name, a (code)")                                   \
    X(ITEM_MAIN,        "main",        "a (statements)")                                   \
    X(ITEM_OPEN,        "open",        "name")                                             \
    X(ITEM_OPTION,      "option",      "name, a (default value)")

typedef enum {
#define AST_ENUM(kind, dump, fields) kind,
    AST_KINDS(AST_ENUM)
#undef AST_ENUM
    NODE_KIND_COUNT
} NodeKind;

/* NODE_ARG flags: how an argument was passed. */
enum { ARG_LABELLED = 1, /* ~x:e or ~x */ ARG_OPTIONAL = 2 /* ?x:e or ?x */ };
/* NODE_PARAM flags. */
enum {
    PARAM_POSITIONAL, /* x */
    PARAM_WILDCARD,   /* _ */
    PARAM_UNIT,       /* () : the configuration boundary */
    PARAM_LABELLED,   /* ~x */
    PARAM_OPTIONAL,   /* ?x or ?(x = default) */
};
/* ITEM_OPERATOR flags: `backward none`, no gradient flows through it (its result is a constant to
 * differentiation: comparisons, sign, floor, stop_gradient). */
enum { OP_NO_GRADIENT = 1 };
/* ITEM_LET flags. */
enum { LET_PLAIN = 0, LET_OP = 1, LET_CD = 2, LET_REC = 4 };

struct Node {
    NodeKind kind;
    Span span;
    const char *name;    /* identifier, operator lexeme, label, basis */
    Node *a, *b, *c;
    NodeList list;
    int64_t ival;
    double fval;
    const char *text;    /* string contents (decoded) or float spelling */
    size_t len;
    Spec *spec;          /* parsed spec of a spec string */
    int flag;
    bool parenthesised;  /* written inside ( ) : stops tuple flattening */
    Span paren;          /* parenthesised by parse_paren: from its outermost '(' to its ')' (the
                          * span stays the inner expression's, where messages point; a node built
                          * around it covers the parentheses: ast_written_span) */
    uint32_t depth;      /* height of the subtree (the parser bounds it) */
};

/* The source text node `n` was written as: its span, with its parentheses around it if any. */
static inline Span ast_written_span(const Node *n) { return n->paren.end > n->paren.start ? n->paren : n->span; }

typedef struct Module {
    const char *path;
    uint32_t file;
    NodeList items;
    Arena *arena;
} Module;

const char *ast_kind_name(NodeKind kind);
Node *ast_node(Arena *arena, NodeKind kind, Span span);
void ast_push(Arena *arena, NodeList *list, Node *node);

/* A slot name of an operator's code blocks (docs/language.md §3.7.3): `v`, `t`, `g` name slot 0
 * (the result), `v1`…`v9`, `t1`…`t9`, `g1`…`g9` operand K; *grad for the `g` names. */
bool ast_slot_name(const char *name, uint32_t *slot, bool *grad);

/* The einsum operators (+*, +++, @^+, ++, @^^, ++^), whose right side carries a spec string
 * literal (and optionally a capture list), right after the operator or after the last
 * operand: their operand count; 0 for any other operator. */
int ast_einsum_arity(const char *op);

/* The names a code expression reads, in the order written, each occurrence once (the function
 * named by an application is not a read): appended to *out. */
void ast_code_reads(Arena *arena, const Node *n, const Node ***out, uint32_t *count, uint32_t *cap);

/* Print the tree in the stable form used by --dump-ast golden tests. */
void ast_dump(FILE *out, const Module *module);

#endif
