/* ast.c — node construction and the --dump-ast printer.
 *
 * The dump is one node per line, children indented by two spaces, each line ending with the
 * node's start as @line:col.  Its format is stable: golden tests (the .ast files under tests/ast) compare it
 * byte for byte, so change it only together with those files. */
#include "front/ast.h"

#include <inttypes.h>
#include <string.h>

#include "front/spec.h"

static const char *const kind_names[] = {
#define AST_NAME(kind, dump, fields) dump,
    AST_KINDS(AST_NAME)
#undef AST_NAME
};

const char *ast_kind_name(NodeKind kind) {
    return kind < NODE_KIND_COUNT ? kind_names[kind] : "?";
}

Node *ast_node(Arena *arena, NodeKind kind, Span span) {
    Node *n = arena_alloc(arena, sizeof *n);
    n->kind = kind;
    n->span = span;
    return n;
}

void ast_push(Arena *arena, NodeList *list, Node *node) {
    ARENA_PUSH(arena, list->items, list->count, list->cap, node);
}

static void print_string(FILE *out, const char *s, size_t len) {
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
            else fputc(c, out);
        }
    }
    fputc('"', out);
}

static void line_start(FILE *out, int indent) {
    for (int i = 0; i < indent; i++) fputs("  ", out);
}

static void line_end(FILE *out, const Node *n) {
    unsigned line, col;
    span_line_col(n->span, &line, &col);
    fprintf(out, " @%u:%u\n", line, col);
}

static void dump(FILE *out, const Node *n, int indent);

static void dump_list(FILE *out, const NodeList *list, int indent) {
    for (uint32_t i = 0; i < list->count; i++) dump(out, list->items[i], indent);
}

/* A labelled child: "then", "else", "in", ... on its own line, then the child below it. */
static void dump_labelled(FILE *out, const char *label, const Node *child, int indent) {
    if (!child) return;
    line_start(out, indent);
    fprintf(out, "%s:\n", label);
    dump(out, child, indent + 1);
}

static void dump_logic(FILE *out, const Node *logic, int indent) {
    if (!logic) return;
    line_start(out, indent);
    if (logic->kind == NODE_STRING && logic->spec) {
        fputs("logic spec ", out);
        spec_dump(out, logic->spec);
    } else if (logic->kind == NODE_STRING) {
        fputs("logic ", out);
        print_string(out, logic->text, logic->len);
    } else {
        fprintf(out, "logic %s", logic->name ? logic->name : "?");
    }
    line_end(out, logic);
}

static const char *let_keyword(int flags) {
    return (flags & LET_OP) ? "let%op" : (flags & LET_CD) ? "let%cd" : "let";
}

static void dump(FILE *out, const Node *n, int indent) {
    if (!n) return;
    line_start(out, indent);
    fputs(ast_kind_name(n->kind), out);
    switch (n->kind) {
    case NODE_INT: fprintf(out, " %" PRId64, n->ival); break;
    case NODE_FLOAT: fprintf(out, " %s", n->text); break;
    case NODE_STRING: fputc(' ', out); print_string(out, n->text, n->len); break;
    case NODE_BOOL: fputs(n->ival ? " true" : " false", out); break;
    case NODE_VAR: case NODE_MODULE: case NODE_BINOP: case NODE_UNOP: case NODE_ASSIGN:
    case NODE_RECORD: case NODE_FIELD_DEF: case ITEM_INDEX: case ITEM_DATA: case ITEM_ROUTINE:
    case ITEM_OPEN: case ITEM_INPUT: case ITEM_OPTION:
        fprintf(out, " %s", n->name);
        break;
    case NODE_FIELD: fprintf(out, " .%s", n->name); break;
    case NODE_ANNOT: fprintf(out, " : %s", n->name); break;
    case NODE_ARG:
        fprintf(out, " %c%s%s", (n->flag & ARG_OPTIONAL) ? '?' : '~', n->name, n->a ? ":" : "");
        break;
    case NODE_PARAM:
        switch (n->flag) {
        case PARAM_LABELLED: fprintf(out, " ~%s", n->name); break;
        case PARAM_OPTIONAL: fprintf(out, " ?%s%s", n->name, n->a ? " =" : ""); break;
        default: fprintf(out, " %s", n->name); break;
        }
        break;
    case NODE_LET: fprintf(out, "%s %s", n->flag ? " rec" : "", n->name); break;
    case NODE_FOR: fprintf(out, " %s %s", n->name, n->flag ? "downto" : "to"); break;
    case NODE_EINSUM:
        fprintf(out, " %s spec ", n->name);
        if (n->spec) spec_dump(out, n->spec);
        else fputs("<invalid>", out);
        break;
    case ITEM_LET:
        fprintf(out, "%s%s %s", strcmp(let_keyword(n->flag), "let") ? let_keyword(n->flag) + 3 : "",
                (n->flag & LET_REC) ? " rec" : "", n->name);
        break;
    case ITEM_OPERATOR: fprintf(out, " %s%s", n->name, (n->flag & OP_NO_GRADIENT) ? " (backward none)" : ""); break;
    default: break;
    }
    line_end(out, n);
    int in = indent + 1;
    switch (n->kind) {
    case NODE_LET:
        dump_list(out, &n->list, in);
        dump_labelled(out, "=", n->a, in);
        dump_labelled(out, "in", n->b, in);
        break;
    case ITEM_LET:
        dump_list(out, &n->list, in);
        dump_labelled(out, "=", n->a, in);
        break;
    case NODE_FUN:
        dump_list(out, &n->list, in);
        dump_labelled(out, "->", n->a, in);
        break;
    case NODE_IF:
        dump(out, n->a, in);
        dump_labelled(out, "then", n->b, in);
        dump_labelled(out, "else", n->c, in);
        break;
    case NODE_FOR:
        dump(out, n->a, in);
        dump(out, n->b, in);
        dump_labelled(out, "do", n->c, in);
        break;
    case NODE_ASSIGN:
        dump(out, n->a, in);
        dump(out, n->b, in);
        dump_logic(out, n->c, in);
        break;
    case NODE_EINSUM:
        dump(out, n->a, in);
        dump(out, n->b, in);
        dump_labelled(out, "captures", n->c, in);
        break;
    case ITEM_OPERATOR:
        dump_list(out, &n->list, in);
        dump_logic(out, n->c, in);
        dump_labelled(out, "forward", n->a, in);
        dump_labelled(out, "backward", n->b, in);
        break;
    case NODE_COMMENTED:
        dump(out, n->a, in);
        dump_labelled(out, "code", n->b, in);
        break;
    case NODE_PARAM:
        dump(out, n->a, in);
        break;
    default:
        dump(out, n->a, in);
        dump(out, n->b, in);
        dump(out, n->c, in);
        dump_list(out, &n->list, in);
        break;
    }
}

void ast_dump(FILE *out, const Module *module) {
    for (uint32_t i = 0; i < module->items.count; i++) dump(out, module->items.items[i], 0);
}

bool ast_slot_name(const char *name, uint32_t *slot, bool *grad) {
    char c = name[0];
    if (c != 'v' && c != 't' && c != 'g') return false;
    if (name[1] == '\0') *slot = 0;
    else if (name[1] >= '1' && name[1] <= '9' && name[2] == '\0') *slot = (uint32_t)(name[1] - '0');
    else return false;
    *grad = c == 'g';
    return true;
}

void ast_code_reads(Arena *arena, const Node *n, const Node ***out, uint32_t *count, uint32_t *cap) {
    if (!n) return;
    switch (n->kind) {
    case NODE_VAR: ARENA_PUSH(arena, *out, *count, *cap, n); return;
    case NODE_APP: /* the operands, not the primitive's name */
        if (n->a && n->a->kind != NODE_VAR) ast_code_reads(arena, n->a, out, count, cap);
        break;
    default:
        ast_code_reads(arena, n->a, out, count, cap);
        ast_code_reads(arena, n->b, out, count, cap);
        ast_code_reads(arena, n->c, out, count, cap);
        break;
    }
    for (uint32_t i = 0; i < n->list.count; i++) ast_code_reads(arena, n->list.items[i], out, count, cap);
}

int ast_einsum_arity(const char *op) {
    static const struct {
        const char *op;
        int arity;
    } table[] = {{"+*", 2}, {"+++", 2}, {"@^+", 2}, {"++", 1}, {"++^", 1}, {"@^^", 1}};
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].op, op) == 0) return table[i].arity;
    return 0;
}
