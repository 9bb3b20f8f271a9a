/* eval.c — evaluating expressions: closures (inline definitions `{ w }`, partial application,
 * labelled and optional parameters, a parameter scope per application) and apply(); the size
 * equations of parameter scopes (`set_dim`, `equate`, `dim`); arithmetic in value and tensor
 * mode; applications, einsum expressions, containers, fields, bindings (`let`, `let rec`); and
 * eval(), the one entry every other file of the stage calls.
 *
 * Requires: elab_internal.h; operators.c to apply operators, builtins.c for the built-ins;
 * ir.h for the element types' words. */
#include "elab/elab_internal.h"

#include <math.h>
#include <string.h>

#include "ir/ir.h"

/* ---- Inline definitions (parameters) -------------------------------------------------------- */

/* A later application of a function whose inline definition made parameter `t` (a function
 * without `()` shares it): the sizes and element type this application writes must be t's, or
 * `layer ~hid:4 x` after `layer ~hid:3 x` would be given the 3 without a word. */
static void check_shared_param(Elab *e, const Node *rec, Env *env, Tensor *t) {
    Row rows[ROW_KINDS];
    bool given[ROW_KINDS];
    uint8_t dtype = t->dtype;
    if (!record_sizes(e, rec, env, t->name, SIZES_FOLLOW, rows, given, &dtype)) return;
    if (dtype != t->dtype)
        diag_error(rec->span, "parameter '%s' is %s, from the application that made it; this one writes %s (a "
                   "function without a '()' parameter shares its parameters between applications: docs/language.md "
                   "§3.3)", t->name, ir_dtype_word(t->dtype), ir_dtype_word(dtype));
    OriginId why = origin(e, rec->span, "parameter '%s' (made by an earlier application of its function, which this one "
                          "shares: a function without '()' creates its parameters once)", t->name);
    for (int k = 0; k < ROW_KINDS; k++)
        if (given[k]) shape_row_eq(e->solver, t->shape.rows[k], rows[k], why);
}

static Value *eval_inline_param(Elab *e, const Node *rec, Env *env) {
    Scope *scope = current_scope(e);
    for (uint32_t i = 0; i < scope->param_count; i++)
        if (scope->params[i].node == rec) {
            check_shared_param(e, rec, env, scope->params[i].tensor);
            return tensor_value(e, scope->params[i].tensor);
        }
    const Node *first = rec->list.items[0];
    Row rows[ROW_KINDS];
    bool given[ROW_KINDS];
    uint8_t dtype = TSR_DTYPE_F32;
    if (!record_sizes(e, rec, env, first->name, SIZES_FOLLOW, rows, given, &dtype)) return &error_value;
    Tensor *t = new_tensor(e, TENSOR_PARAM, rec->span);
    t->dtype = dtype;
    t->name = first->name;
    OriginId o = origin(e, rec->span, "parameter '%s'", first->name);
    for (int k = 0; k < ROW_KINDS; k++) {
        if (given[k]) t->shape.rows[k] = rows[k];
        else if (k == ROW_BATCH) /* parameters have no batch axes */
            t->shape.rows[k] = shape_empty_row(origin(e, rec->span, "parameter '%s': no batch axes", first->name));
        else t->shape.rows[k] = shape_fresh_row(e->solver, o);
    }
    t->init = first->a;
    t->random = RANDOM_INIT_DEFAULT;
    Value *init = first->a ? eval(e, first->a, env, MODE_TENSOR) : NULL;
    if (init && init->kind == V_ERROR) return &error_value;
    if (init && init->kind == V_INIT) t->random = init->as.init;
    else if (init) {
        if (is_number(init)) init = tensor_value(e, scalar_literal(e, number_of(init), first->a->span, 0));
        if (init->kind != V_TENSOR)
            return fail(first->a->span, "the initial value of '%s' must be a number or a tensor, but "
                        "this is %s", first->name, kind_noun(init));
        Tensor *iv = init->as.tensor;
        bool scalar = iv->kind == TENSOR_LITERAL && iv->value_count == 1 &&
                      first->a->kind != NODE_LIST && first->a->kind != NODE_ARRAY &&
                      first->a->kind != NODE_TUPLE && first->a->kind != NODE_ANNOT;
        if (!scalar) /* a tensor value gives the exact shape */
            shape_eq(e->solver, &t->shape, &iv->shape,
                     origin(e, first->a->span, "the initial value of '%s'", first->name));
        t->operands = arena_alloc(e->arena, sizeof *t->operands);
        t->operands[0] = iv;
        t->operand_count = 1;
    }
    ScopeParam sp = {rec, t};
    ARENA_PUSH(e->arena, scope->params, scope->param_count, scope->param_cap, sp);
    NamedEntry ne = {t, NULL, scope, first->name};
    ARENA_PUSH(e->arena, e->entries, e->entry_count, e->entry_cap, ne);
    return tensor_value(e, t);
}

/* ---- Closures and application --------------------------------------------------------------- */

static Closure *new_closure(Elab *e, const NodeList *params, const Node *body, Env *env, Mode mode,
                            const char *fn_name) {
    Closure *c = arena_alloc(e->arena, sizeof *c);
    c->params = arena_alloc(e->arena, (params->count ? params->count : 1) * sizeof *c->params);
    for (uint32_t i = 0; i < params->count; i++) c->params[i] = params->items[i];
    c->param_count = params->count;
    c->bound = arena_alloc(e->arena, (params->count ? params->count : 1) * sizeof *c->bound);
    c->body = body;
    c->env = env;
    c->mode = mode;
    c->scope = e->scope;
    c->fn_name = fn_name;
    return c;
}

Closure *copy_closure(Elab *e, const Closure *c) {
    Closure *d = arena_alloc(e->arena, sizeof *d);
    *d = *c;
    d->bound = arena_alloc(e->arena, (c->param_count ? c->param_count : 1) * sizeof *d->bound);
    memcpy(d->bound, c->bound, c->param_count * sizeof *d->bound);
    return d;
}

static Value *closure_value(Elab *e, Closure *c) {
    Value *v = new_value(e, c->code ? V_CODE : V_CLOSURE);
    v->as.closure = c;
    return v;
}

static bool has_unit_param(const NodeList *params) {
    for (uint32_t i = 0; i < params->count; i++)
        if (params->items[i]->flag == PARAM_UNIT) return true;
    return false;
}

Value *param_default(Elab *e, Closure *c, const Node *p) {
    if (!p->a) return &unit_value; /* ?x without a default: absent */
    return eval(e, p->a, c->env, MODE_VALUE);
}

static Value *run_body(Elab *e, Closure *c, Span span) {
    if (c->code) return closure_value(e, c);
    if (++e->depth > MAX_EVAL_DEPTH) {
        e->depth--;
        return fail(span, "evaluation is nested too deeply (more than %d calls): is a recursion "
                    "missing its base case?", MAX_EVAL_DEPTH);
    }
    Scope *saved = e->scope;
    e->scope = c->scope;
    bool outermost = e->depth == 1 && span.file;
    const char *name = c->fn_name ? c->fn_name : c->shown_as ? c->shown_as : "an anonymous function";
    if (outermost) shape_set_context(e->solver, span, name);
    if (span.file) shape_push_call(e->solver, span, name);
    Span saved_call = e->user_call;
    const char *saved_call_name = e->user_call_name;
    /* A function applying itself from its own body (a recursion) keeps the application that began
     * it: an error inside is noted there (`fact 25`), not at the call that overlaps it. */
    Span body = c->body ? c->body->span : (Span){0, 0, 0};
    bool recursing = e->user_call.file && span.file == body.file && span.start >= body.start && span.end <= body.end;
    if (span.file && !span_in_stdlib(span) && !recursing) set_user_call(e, span, name);
    Value *v = eval(e, c->body, c->env, c->mode);
    set_user_call(e, saved_call, saved_call_name);
    if (span.file) shape_pop_call(e->solver);
    if (outermost) shape_set_context(e->solver, (Span){0, 0, 0}, NULL);
    e->scope = saved;
    e->depth--;
    return v;
}

/* A labelled argument that no open parameter of c takes: one given twice, or a name c does not
 * have, with the closest of its labelled parameters ("did you mean ~k?") or the list of them
 * (cut with ", …" past about 500 bytes). */
static Value *unknown_label(Elab *e, const Closure *c, const Arg *arg) {
    const char *fn = c->fn_name ? c->fn_name : "this function";
    char mark = arg->optional ? '?' : '~';
    const char **names = arena_alloc(e->arena, (c->param_count + 1) * sizeof *names);
    size_t count = 0;
    char list[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < c->param_count; i++) {
        const Node *p = c->params[i];
        if (p->flag != PARAM_LABELLED && p->flag != PARAM_OPTIONAL) continue;
        if (strcmp(p->name, arg->label) == 0 && (i < c->next || c->bound[i]))
            return fail(arg->span, "%s's parameter ~%s is given twice", fn, arg->label);
        if (i < c->next || c->bound[i]) continue;
        names[count++] = p->name;
        if (used + strlen(p->name) + 8 < sizeof list - 8)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s~%s", used ? ", " : "", p->name);
        else if (!strstr(list, ", …"))
            used += (size_t)snprintf(list + used, sizeof list - used, ", …");
    }
    Value *err = fail(arg->span, "%s has no parameter %c%s", fn, mark, arg->label);
    const char *near = strlen(arg->label) > 1 ? diag_closest_name(arg->label, names, count) : NULL;
    if (near) diag_note(arg->span, "did you mean ~%s?", near);
    else if (count) diag_note(arg->span, "the labelled parameters %s still takes: %s", fn, list);
    else diag_note(arg->span, "%s takes no labelled argument here: its labelled parameters are all given", fn);
    return err;
}

static Value *apply_closure(Elab *e, const Closure *orig, Arg *args, uint32_t count, Span span) {
    Closure *c = copy_closure(e, orig);
    if (c->code && !c->user_call.file && span.file && !span_in_stdlib(span)) {
        c->user_call = span;
        c->user_call_name = c->fn_name ? c->fn_name : c->shown_as ? c->shown_as : "an anonymous function";
    }
    /* Labelled arguments go to their parameters wherever these are. */
    for (uint32_t a = 0; a < count; a++) {
        if (!args[a].label) continue;
        bool found = false;
        for (uint32_t i = c->next; i < c->param_count && !found; i++) {
            const Node *p = c->params[i];
            if ((p->flag != PARAM_LABELLED && p->flag != PARAM_OPTIONAL) || c->bound[i]) continue;
            if (strcmp(p->name, args[a].label) != 0) continue;
            found = true;
            c->bound[i] = true;
            c->env = env_bind(e, c->env, p->name, args[a].value);
        }
        if (!found) return unknown_label(e, c, &args[a]);
    }
    uint32_t pos = 0;
    while (pos < count && args[pos].label) pos++;
    for (;;) {
        if (c->next == c->param_count) {
            Value *result = run_body(e, c, span);
            /* Positional arguments left over go to the function the body returned. */
            uint32_t rest = 0;
            for (uint32_t a = pos; a < count; a++)
                if (!args[a].label) rest++;
            if (rest == 0 || result->kind == V_ERROR) return result;
            /* A %cd function's body is code, run where the routine runs it: there is no
             * function it returns to take the rest (and applying the code again would go on
             * without end). */
            if (c->code) {
                uint32_t extra = pos;
                while (args[extra].label) extra++;
                return fail(args[extra].span, "%s is given %u argument%s more than it takes: a %%cd function returns "
                            "no function to take %s", c->fn_name ? c->fn_name : "this function", rest,
                            rest == 1 ? "" : "s", rest == 1 ? "it" : "them");
            }
            Arg *more = arena_alloc(e->arena, rest * sizeof *more);
            uint32_t m = 0;
            for (uint32_t a = pos; a < count; a++)
                if (!args[a].label) more[m++] = args[a];
            if (result->kind != V_CLOSURE && result->kind != V_CODE && result->kind != V_BUILTIN &&
                result->kind != V_OPERATOR)
                return fail(more[0].span, "%s%s%s is given %u argument%s more than it takes: it returns %s, which "
                            "takes none", c->fn_name ? "'" : "", c->fn_name ? c->fn_name : "this function",
                            c->fn_name ? "'" : "", rest, rest == 1 ? "" : "s", kind_noun(result));
            return apply(e, result, more, m, span);
        }
        const Node *p = c->params[c->next];
        if (c->bound[c->next]) {
            c->next++;
            continue;
        }
        bool have = pos < count;
        switch (p->flag) {
        case PARAM_LABELLED:
            if (have)
                return fail(args[pos].span, "%s needs its argument ~%s before this one",
                            c->fn_name ? c->fn_name : "this function", p->name);
            return closure_value(e, c);
        case PARAM_OPTIONAL:
            if (!have) return closure_value(e, c);
            c->env = env_bind(e, c->env, p->name, param_default(e, c, p));
            c->next++;
            break;
        default:
            if (!have) {
                bool some = false; /* some positional argument given (a layer's `()` is none) */
                for (uint32_t i = 0; i < c->next; i++) some |= c->params[i]->flag == PARAM_POSITIONAL;
                if (p->flag == PARAM_POSITIONAL && some) c->partial = span;
                return closure_value(e, c);
            }
            if (p->flag == PARAM_POSITIONAL) c->env = env_bind(e, c->env, p->name, args[pos].value);
            else if (p->flag == PARAM_UNIT && args[pos].value->kind != V_UNIT &&
                     args[pos].value->kind != V_ERROR) {
                Value *err = fail(args[pos].span, "%s expects () here, but this is %s",
                                  c->fn_name ? c->fn_name : "this function", kind_noun(args[pos].value));
                /* `let net = mlp ~out:3` then `net x`: the () belongs where the layer is made,
                 * once; written at each application, it would make new parameters each time. */
                if (args[pos].value->kind == V_TENSOR && pos == 0 && c->next > 0)
                    diag_note(args[pos].span, "a layer's '()' makes its parameters: write it once where the layer is "
                              "made (let net = %s … ()), not at each application, which would make new ones each time",
                              c->fn_name ? c->fn_name : "f");
                return err;
            }
            if (p->flag == PARAM_UNIT && c->scope_at_unit) c->scope = new_scope(e, c->fn_name, false);
            pos++;
            while (pos < count && args[pos].label) pos++;
            c->next++;
            break;
        }
    }
}

Value *apply(Elab *e, Value *fn, Arg *args, uint32_t count, Span span) {
    if (fn->kind == V_ERROR) return fn;
    for (uint32_t i = 0; i < count; i++)
        if (args[i].value->kind == V_ERROR) return &error_value;
    switch (fn->kind) {
    case V_CLOSURE:
    case V_CODE:
        if (fn->kind == V_CODE && !fn->as.closure) return fail(span, "code cannot be applied");
        return apply_closure(e, fn->as.closure, args, count, span);
    case V_BUILTIN: return fn->as.builtin.fn(e, args, count, span);
    case V_OPERATOR: {
        Value **ops = arena_alloc(e->arena, (count ? count : 1) * sizeof *ops);
        uint32_t n = 0;
        for (uint32_t i = 0; i < count; i++) {
            if (args[i].label)
                return fail(args[i].span, "'%s' takes no labelled argument ~%s here", fn->as.op->name,
                            args[i].label);
            ops[n++] = args[i].value;
        }
        return apply_operator(e, NULL, fn->as.op, ops, n, NULL, NULL, span);
    }
    default: {
        Value *err = fail(span, "this is %s, not a function, so it cannot be applied", kind_noun(fn));
        /* `q mod 7`, OCaml's infix: here mod, max, min … are applied to their operands. */
        if (count && !args[0].label && args[0].value->kind == V_OPERATOR)
            diag_note(args[0].span, "'%s' is written before its operands, as a function is applied: %s a b",
                      args[0].value->as.op->name, args[0].value->as.op->name);
        return err;
    }
    }
}

static Value *eval_set_dim(Elab *e, const Node *app, Env *env) {
    if (app->list.count != 2 || app->list.items[0]->kind != NODE_VAR || app->list.items[1]->kind == NODE_ARG)
        return fail(app->span, "'set_dim' is written 'set_dim NAME SIZE', NAME a label captured by a spec");
    const Node *name = app->list.items[0];
    Value *size = eval(e, app->list.items[1], env, MODE_VALUE);
    if (size->kind == V_ERROR) return size;
    if (size->kind != V_INT || size->as.i < 1 || size->as.i > INT32_MAX)
        return size->kind == V_INT ? fail(app->list.items[1]->span, "the size given to 'set_dim' must be a positive "
                                          "integer below 2^31, but this is %lld", (long long)size->as.i)
                                   : fail(app->list.items[1]->span, "the size given to 'set_dim' must be a positive "
                                          "integer below 2^31, but this is %s", kind_noun(size));
    Dim d = scope_dim(e, current_scope(e), name->name, name->span)->dim;
    OriginId o = origin(e, app->span, "'set_dim %s %lld'", name->name, (long long)size->as.i);
    /* The size of the library's set_dim of a number the user gave it (conv2d's ~groups:4) comes
     * from that number. */
    bool given = span_in_stdlib(app->span) && size->written.file && !span_in_stdlib(size->written);
    OriginId from = given ? origin(e, size->written, "the number given to '%s' here (the library's 'set_dim %s %lld')",
                                   e->user_call_name ? e->user_call_name : "the library", name->name,
                                   (long long)size->as.i)
                          : o;
    if (given) shape_origin_given(e->solver, from);
    Equation sizing = {current_scope(e), {name, NULL}, app->span, o};
    ARENA_PUSH(e->arena, e->sizings, e->sizing_count, e->sizing_cap, sizing);
    shape_dim_eq(e->solver, d, dim_ground((uint32_t)size->as.i, BASIS_DEFAULT, from), o);
    return &unit_value;
}

/* equate NAME1 NAME2: two captured labels get one size and basis, or two captured row
 * variables the same axes; recorded here, emitted by solve_equations once every spec of the
 * scope has captured what it captures. */
static Value *eval_equate(Elab *e, const Node *app) {
    if (app->list.count != 2 || app->list.items[0]->kind != NODE_VAR || app->list.items[1]->kind != NODE_VAR)
        return fail(app->span, "'equate' is written 'equate NAME1 NAME2', each NAME a label or row variable "
                    "captured by a spec");
    const Node *a = app->list.items[0], *b = app->list.items[1];
    Equation q = {current_scope(e), {a, b}, app->span, origin(e, app->span, "'equate %s %s'", a->name, b->name)};
    ARENA_PUSH(e->arena, e->equations, e->equation_count, e->equation_cap, q);
    return &unit_value;
}

static ScopeDim *find_scope_dim(Scope *s, const char *name) {
    for (uint32_t i = 0; i < s->dim_count; i++)
        if (strcmp(s->dims[i].name, name) == 0) return &s->dims[i];
    return NULL;
}

static void note_equation_call(Elab *e, const Equation *q) {
    const char *fn;
    Span call = shape_origin_call(e->solver, q->why, &fn);
    if (call.file) diag_note(call, "in this application of '%s'", fn);
}

static const char *size_text(Elab *e, Dim d) {
    if (d.basis == BASIS_NONE) return "1 (broadcastable)";
    if (d.basis == BASIS_DEFAULT) return arena_printf(e->arena, "%u", d.size);
    return arena_printf(e->arena, "%s=%u", shape_basis_name(e->solver, d.basis), d.size);
}

/* Two captured labels that the rest of the program has already sized differently: reported
 * here, naming each label, the spec that captures it and where its size comes from. */
static bool equation_clash(Elab *e, const Equation *q, ScopeDim *const c[2]) {
    Dim d[2] = {shape_resolve_dim(e->solver, c[0]->dim), shape_resolve_dim(e->solver, c[1]->dim)};
    if (d[0].var || d[1].var || (d[0].size == d[1].size && d[0].basis == d[1].basis)) return false;
    const char *t[2] = {size_text(e, d[0]), size_text(e, d[1])};
    diag_error(q->span, "'equate %s %s': '%s' has size %s but '%s' has size %s", c[0]->name, c[1]->name, c[0]->name,
               t[0], c[1]->name, t[1]);
    note_equation_call(e, q);
    for (int k = 0; k < 2; k++) {
        diag_note(c[k]->captured, "'%s' is captured here", c[k]->name);
        diag_note(shape_origin_span(e->solver, d[k].origin), "size %s of '%s' comes from: %s", t[k], c[k]->name,
                  shape_origin_what(e->solver, d[k].origin));
    }
    return true;
}

/* The equations of `equate`: both names must be captured in the scope, both as labels (their
 * dims are equated) or both as row variables (their rows are equated).  What the program says
 * otherwise is solved first, so that an equation that contradicts it is the one reported. */
void solve_equations(Elab *e) {
    for (uint32_t i = 0; i < e->sizing_count; i++) { /* set_dim of a name no spec captures sizes nothing */
        const Equation *q = &e->sizings[i];
        ScopeDim *c = find_scope_dim(q->scope, q->names[0]->name);
        if (c && (c->label || c->row_var)) continue;
        /* In the library, after an error: the application stopped before the spec that captures
         * it (attention ~head_dim:(-8) stops at its set_dim k), not a missing capture. */
        if (span_in_stdlib(q->names[0]->span) && diag_error_count() > 0) continue;
        diag_error(q->names[0]->span, "'set_dim': no spec in this scope captures '%s' (a label is captured by naming "
                   "it in the list after its spec, [\"%s\"])", q->names[0]->name, q->names[0]->name);
        note_equation_call(e, q);
    }
    if (!e->equation_count) return;
    bool *ok = arena_alloc(e->arena, e->equation_count * sizeof *ok);
    for (uint32_t i = 0; i < e->equation_count; i++) {
        const Equation *q = &e->equations[i];
        ScopeDim *c[2];
        ok[i] = true;
        for (int k = 0; k < 2; k++) {
            c[k] = find_scope_dim(q->scope, q->names[k]->name);
            if (c[k] && (c[k]->label || c[k]->row_var)) continue;
            diag_error(q->names[k]->span, "'equate': no spec in this scope captures '%s' (a label or row variable "
                       "is captured by naming it in the list after its spec, [\"%s\"])", q->names[k]->name,
                       q->names[k]->name);
            note_equation_call(e, q);
            ok[i] = false;
        }
        if (ok[i] && (c[0]->row_var != 0) != (c[1]->row_var != 0)) {
            int r = c[0]->row_var ? 0 : 1;
            diag_error(q->span, "'equate %s %s': '%s' is a captured row variable and '%s' a captured label; equate "
                       "relates two labels (one axis each) or two row variables", q->names[0]->name,
                       q->names[1]->name, c[r]->name, c[1 - r]->name);
            note_equation_call(e, q);
            diag_note(c[r]->captured, "'..%s..' is captured as a row variable here", c[r]->name);
            diag_note(c[1 - r]->captured, "'%s' is captured as a label here", c[1 - r]->name);
            ok[i] = false;
        }
    }
    shape_solve(e->solver);
    for (uint32_t i = 0; i < e->equation_count; i++) {
        if (!ok[i]) continue;
        const Equation *q = &e->equations[i];
        ScopeDim *c[2] = {find_scope_dim(q->scope, q->names[0]->name), find_scope_dim(q->scope, q->names[1]->name)};
        if (c[0]->row_var) {
            Row rows[2];
            for (int k = 0; k < 2; k++)
                rows[k] = (Row){.var = c[k]->row_var,
                                .origin = origin(e, c[k]->captured, "captured row variable '%s'", c[k]->name)};
            shape_row_eq(e->solver, rows[0], rows[1], q->why);
        } else if (!equation_clash(e, q, c)) {
            shape_dim_eq(e->solver, c[0]->dim, c[1]->dim, q->why);
        }
    }
}

/* dim NAME: the size of a captured label, or the cells of a captured row variable, as a number
 * tensor; the size is known once shapes are closed (fill_dim_readings). */
static Value *eval_dim(Elab *e, const Node *app) {
    if (app->list.count != 1 || app->list.items[0]->kind != NODE_VAR)
        return fail(app->span, "'dim' is written 'dim NAME', NAME a label or row variable captured by a spec");
    const Node *name = app->list.items[0];
    Tensor *t = scalar_literal(e, 0., app->span, 0);
    DimReading r = {t, scope_dim(e, current_scope(e), name->name, name->span)->dim, name->name, app->span, NULL};
    ARENA_PUSH(e->arena, e->readings, e->reading_count, e->reading_cap, r);
    return tensor_value(e, t);
}

/* input_axes T: how many input axes T has once shapes are closed (a weight's `i -> o` has its
 * inputs; a bias, a gain or a state tensor none), as a number tensor: Train.adamw ~decay:"weights"
 * decays the parameters that map inputs to outputs and leaves the others. */
static Value *eval_input_axes(Elab *e, const Node *app, Env *env) {
    if (app->list.count != 1)
        return fail(app->span, "'input_axes' is written 'input_axes T', T a tensor");
    Value *v = eval(e, app->list.items[0], env, MODE_VALUE);
    if (v->kind == V_ERROR) return v;
    if (v->kind != V_TENSOR)
        return fail(app->list.items[0]->span, "'input_axes' takes a tensor, not %s", kind_noun(v));
    Tensor *t = scalar_literal(e, 0., app->span, 0);
    DimReading r = {.tensor = t, .name = "input_axes", .span = app->span, .axes_of = v->as.tensor};
    ARENA_PUSH(e->arena, e->readings, e->reading_count, e->reading_cap, r);
    return tensor_value(e, t);
}

void fill_dim_readings(Elab *e) {
    for (uint32_t i = 0; i < e->reading_count; i++) {
        DimReading *r = &e->readings[i];
        if (r->axes_of) {
            Row inputs = shape_resolve_row(e->solver, r->axes_of->shape.rows[ROW_INPUT]);
            r->tensor->values[0] = inputs.count;
            continue;
        }
        Dim d = shape_resolve_dim(e->solver, r->dim);
        if (d.var) {
            diag_error(r->span, "the size of '%s' is not known: no spec in this scope captures it, and no "
                       "'set_dim' gives it", r->name);
            continue;
        }
        if (d.runtime) { /* read when the program runs: the value of the class's size symbol */
            r->tensor->kind = TENSOR_INDEX;
            r->tensor->index = shape_runtime_class_name(e->solver, d.runtime);
            continue;
        }
        r->tensor->values[0] = d.size;
    }
}

/* ---- Expressions --------------------------------------------------------------------------- */

static Value *arith(Elab *e, const char *op, Value *a, Value *b, Span span) {
    bool sub = strcmp(op, "-") == 0;
    if ((a->kind == V_INDEX && b->kind == V_INT && (sub || strcmp(op, "+") == 0)) ||
        (b->kind == V_INDEX && a->kind == V_INT && strcmp(op, "+") == 0)) {
        /* index ± integer, integer + index: a number that print shows (epoch k + 1) */
        Value *x = a->kind == V_INDEX ? a : b, *k = a->kind == V_INDEX ? b : a;
        int64_t sum;
        if (k->as.i == INT64_MIN || __builtin_add_overflow(x->as.index.offset, sub ? -k->as.i : k->as.i, &sum))
            return fail(span, "integer overflow in '%s'", op);
        Value *v = new_value(e, V_INDEX);
        v->as.index = x->as.index;
        v->as.index.offset = sum;
        return v;
    }
    if ((a->kind == V_INDEX && is_number(b)) || (b->kind == V_INDEX && is_number(a))) {
        const Value *x = a->kind == V_INDEX ? a : b;
        Value *r = fail(span, "'%s' on an index: an index is known only when the program runs, so print can show it "
                        "plus or minus an integer (k + 1, k - 1), and no other arithmetic", op);
        if (strchr(op, '.')) /* a tensor's operator: the index's value was meant */
            diag_note(span, "in a tensor expression its value is the tensor '!@%s' (0.1 *. !@%s)", x->as.index.name,
                      x->as.index.name);
        return r;
    }
    if (a->kind == V_OPTION || b->kind == V_OPTION) {
        /* option ± integer, integer + option: a loop bound of main, read at run time */
        Value *o = a->kind == V_OPTION ? a : b, *k = a->kind == V_OPTION ? b : a;
        int64_t sum;
        if ((strcmp(op, "+") == 0 || (sub && o == a)) && k->kind == V_INT &&
            !e->program->options[o->as.option.id].is_float &&
            !__builtin_add_overflow(o->as.option.offset, sub ? -k->as.i : k->as.i, &sum) && k->as.i != INT64_MIN) {
            Value *v = new_value(e, V_OPTION);
            v->as.option.id = o->as.option.id;
            v->as.option.offset = sum;
            return v;
        }
        return fail(span, "'%s' on an option: an option's value is known only when the program runs, so it can "
                    "be a loop bound of main (an integer option plus or minus an integer), a value that main "
                    "prints, or a number in a tensor expression", op);
    }
    bool fl = a->kind == V_FLOAT || b->kind == V_FLOAT || strchr(op, '.') != NULL;
    if (!is_number(a) || !is_number(b)) {
        if (strcmp(op, "^") == 0 && a->kind == V_STRING && b->kind == V_STRING) {
            Value *v = new_value(e, V_STRING);
            char *s = arena_alloc(e->arena, a->as.str.len + b->as.str.len + 1);
            memcpy(s, a->as.str.text, a->as.str.len);
            memcpy(s + a->as.str.len, b->as.str.text, b->as.str.len);
            v->as.str.text = s;
            v->as.str.len = a->as.str.len + b->as.str.len;
            return v;
        }
        if ((strcmp(op, "=") == 0 || strcmp(op, "<>") == 0) && a->kind == b->kind &&
            (a->kind == V_BOOL || a->kind == V_STRING)) {
            bool eq = a->kind == V_BOOL ? a->as.b == b->as.b
                                        : a->as.str.len == b->as.str.len &&
                                              memcmp(a->as.str.text, b->as.str.text, a->as.str.len) == 0;
            return bool_value(e, op[0] == '=' ? eq : !eq);
        }
        Value *err = fail(span, "'%s' is not defined on %s and %s", op, kind_noun(a), kind_noun(b));
        note_data_fields(e, a->kind == V_DATASET ? a : b, span);
        if (strcmp(op, "-") == 0 && (a->kind == V_CLOSURE || a->kind == V_BUILTIN || a->kind == V_OPERATOR) &&
            is_number(b))
            diag_note(span, "'f -1' subtracts 1 from f; a negative argument goes in parentheses: f (-1)");
        return err;
    }
    double x = number_of(a), y = number_of(b);
    if (strcmp(op, "<") == 0) return bool_value(e, x < y);
    if (strcmp(op, ">") == 0) return bool_value(e, x > y);
    if (strcmp(op, "<=") == 0) return bool_value(e, x <= y);
    if (strcmp(op, ">=") == 0) return bool_value(e, x >= y);
    if (strcmp(op, "=") == 0 || strcmp(op, "==") == 0) return bool_value(e, x == y);
    if (strcmp(op, "<>") == 0 || strcmp(op, "!=") == 0) return bool_value(e, x != y);
    if (strcmp(op, "**") == 0) return float_value(e, pow(x, y));
    char c = op[0];
    /* + - * /, and *. /. (float arithmetic): '+-', '*+' or '+.' name no operation */
    if (!strchr("+-*/", c) || (op[1] && (op[1] != '.' || op[2] || c == '+' || c == '-'))) {
        Value *err = fail(span, "'%s' is not defined on numbers", op);
        if ((c == '+' || c == '-') && op[1] == '.' && !op[2]) /* OCaml's float +. and -. */
            diag_note(span, "numbers add and subtract with '%c', floats and integers alike", c);
        return err;
    }
    if (!fl) {
        int64_t i = a->as.i, j = b->as.i, r;
        switch (c) {
        case '+': if (__builtin_add_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '-': if (__builtin_sub_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '*': if (__builtin_mul_overflow(i, j, &r)) goto overflow; return int_value(e, r);
        case '/':
            if (j == 0) return fail(span, "division by zero");
            if (i == INT64_MIN && j == -1) goto overflow;
            return int_value(e, i / j);
        }
        if (strcmp(op, "mod") == 0) {
            if (j == 0) return fail(span, "division by zero");
            if (i == INT64_MIN && j == -1) return int_value(e, 0);
            return int_value(e, i % j);
        }
    } else {
        switch (c) {
        case '+': return float_value(e, x + y);
        case '-': return float_value(e, x - y);
        case '*': return float_value(e, x * y);
        case '/': return float_value(e, x / y);
        }
    }
    return fail(span, "'%s' is not defined on numbers", op);
overflow:
    return fail(span, "integer overflow in '%s'", op);
}

static Value *eval_binop(Elab *e, const Node *n, Env *env, Mode mode) {
    const char *op = n->name;
    if (strcmp(op, "&&") == 0 || strcmp(op, "||") == 0) {
        Value *a = eval(e, n->a, env, MODE_VALUE);
        if (a->kind == V_ERROR) return a;
        if (a->kind != V_BOOL) return fail(n->a->span, "'%s' needs a boolean, but this is %s", op, kind_noun(a));
        if (a->as.b == (op[0] == '|')) return a;
        Value *b = eval(e, n->b, env, MODE_VALUE);
        if (b->kind != V_BOOL && b->kind != V_ERROR)
            return fail(n->b->span, "'%s' needs a boolean, but this is %s", op, kind_noun(b));
        return b;
    }
    if (strcmp(op, "@|") == 0) {
        Value *a = eval(e, n->a, env, MODE_TENSOR);
        if (a->kind == V_ERROR) return a;
        Tensor *t = as_tensor(e, a, n->a->span, "'@|'");
        if (!t) return &error_value;
        Value *i = eval(e, n->b, env, MODE_VALUE);
        if (i->kind == V_ERROR) return i;
        if (i->kind != V_INDEX || i->as.index.offset)
            return fail(n->b->span, "'@|' slices by an index symbol (declared with 'index'), but this is %s",
                        kind_noun(i));
        Tensor *r = new_tensor(e, TENSOR_SLICE, n->span);
        r->operands = arena_alloc(e->arena, sizeof *r->operands);
        r->operands[0] = t;
        r->operand_count = 1;
        r->index = i->as.index.name;
        r->index_range = i->as.index.range;
        r->shape = shape_fresh(e->solver, origin(e, n->span, "the result of '@|'"));
        PinnedAxis pin = {
            dim_ground(i->as.index.range, BASIS_DEFAULT,
                       origin(e, i->as.index.span, "the range of index '%s'", i->as.index.name)),
            origin(e, n->span, "'@|' needs a leftmost batch axis of size %u (the range of '%s')",
                   i->as.index.range, i->as.index.name),
            arena_printf(e->arena, ", of size %u for index '%s'", i->as.index.range, i->as.index.name)};
        Shape *slots[2] = {&r->shape, &t->shape};
        emit_relations(e, LOGIC_SLICE, slots, 2, ROW_KINDS, &pin, n->span, "'@|'");
        return tensor_value(e, r);
    }
    Value *a = eval(e, n->a, env, mode);
    Value *b = eval(e, n->b, env, mode);
    if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
    bool tensors = a->kind == V_TENSOR || b->kind == V_TENSOR;
    Value *opv = lookup_operator(e, env, op);
    bool a_num = is_number(a) || a->kind == V_OPTION, b_num = is_number(b) || b->kind == V_OPTION;
    if (tensors && (a->kind == V_OPTION || b->kind == V_OPTION) && opv) {
        if (a->kind == V_OPTION) a = tensor_value(e, option_tensor(e, a, n->a->span));
        if (b->kind == V_OPTION) b = tensor_value(e, option_tensor(e, b, n->b->span));
        if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
    }
    if (!tensors && mode == MODE_TENSOR && opv && a_num && b_num && (a->kind == V_OPTION || b->kind == V_OPTION)) {
        a = tensor_value(e, as_tensor(e, a, n->a->span, "an option"));
        b = tensor_value(e, as_tensor(e, b, n->b->span, "an option"));
        if (a->kind == V_ERROR || b->kind == V_ERROR) return &error_value;
        tensors = true;
    }
    if (!tensors && mode == MODE_TENSOR && opv && is_number(a) && is_number(b) && strcmp(op, "*") == 0) {
        /* Two numbers: their product (the pointwise one), not a composition of one-cell literals,
         * which has no input axis to compose along. */
        Value *times = lookup_operator(e, env, "*.");
        if (times) opv = times;
    }
    if (tensors && opv) /* the operand that is no tensor, where it is written */
        for (int k = 0; k < 2; k++) {
            const Value *x = k ? b : a;
            const Node *at = k ? n->b : n->a;
            if (x->kind == V_TENSOR || is_number(x) || x->kind == V_OPTION || x->kind == V_INDEX) continue;
            Value *err = fail(at->span, "'%s' needs a tensor here, but this is %s", op, kind_noun(x));
            note_data_fields(e, x, at->span);
            if (at->kind == NODE_VAR && (x->kind == V_LIST || x->kind == V_ARRAY || x->kind == V_TUPLE))
                diag_note(at->span, "'%s' was made by a plain 'let', where a list stays a list: in a let%%op "
                          "definition it is a tensor literal", at->name);
            return err;
        }
    if (tensors || (mode == MODE_TENSOR && opv && is_number(a) && is_number(b))) {
        if (!opv) {
            Value *err = fail(n->span, "'%s' is not a tensor operator", op);
            size_t len = strlen(op); /* `a+-a`: OCaml reads one operator; `a + -a` is two */
            if (len == 2 && op[1] == '-' && strchr("+-*/", op[0]))
                diag_note(n->span, "'%s' is read as one operator: with a space, '%c -…' is '%c' and a negation", op,
                          op[0], op[0]);
            for (int k = 0; k < 2; k++) { /* a name the caller gave a tensor where a number was meant */
                const Node *at = k ? n->b : n->a;
                bool local = false; /* a function's parameter (or a let … in): not a global tensor */
                for (const Env *l = env; at->kind == NODE_VAR && l && l->name && !local; l = l->next)
                    local = strcmp(l->name, at->name) == 0;
                if (local && (k ? b : a)->kind == V_TENSOR) {
                    diag_note(at->span, "'%s' is a tensor here: in a let%%op, an argument written as arithmetic on "
                              "numbers ('f (3 - 1)') is a tensor; pass a number as a labelled argument "
                              "('~%s:(3 - 1)') or compute it with a plain let", at->name, at->name);
                    break;
                }
            }
            if (strcmp(op, "/") == 0)
                diag_note(n->span, "tensors divide with '/.'; '/' divides numbers (in a let%%op body, an operator "
                          "between numbers such as '(3 + 4)' already makes a tensor)");
            return err;
        }
        /* A number operand is a scalar literal where it is written. */
        if (is_number(a)) a = tensor_value(e, scalar_literal(e, number_of(a), n->a->span, 0));
        if (is_number(b)) b = tensor_value(e, scalar_literal(e, number_of(b), n->b->span, 0));
        Value *ops[2] = {a, b};
        return apply_operator(e, env, opv->as.op, ops, 2, NULL, NULL, n->span);
    }
    /* In a tensor expression, `x *. (1 / 2)` multiplies by 0: integers divide as integers. */
    if (mode == MODE_TENSOR && strcmp(op, "/") == 0 && a->kind == V_INT && b->kind == V_INT && b->as.i != 0 &&
        b->as.i != -1 && a->as.i % b->as.i != 0) { /* (a / -1 leaves no remainder, and may overflow: arith says so) */
        Value *q = arith(e, op, a, b, n->span);
        if (q->kind == V_INT)
            diag_warning(n->span, "'/' of two integers is integer division, toward zero: %lld / %lld is %lld; "
                         "%lld. /. %lld. is the fraction (compute an integer quotient with a plain let to say it is "
                         "meant)", (long long)a->as.i, (long long)b->as.i, (long long)q->as.i, (long long)a->as.i,
                         (long long)b->as.i);
        return q;
    }
    return arith(e, op, a, b, n->span);
}

static Value *eval_unop(Elab *e, const Node *n, Env *env, Mode mode) {
    const char *op = n->name;
    if (strcmp(op, "!.") == 0 || strcmp(op, "!..") == 0) {
        Value *v = eval(e, n->a, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (!is_number(v)) return fail(n->a->span, "'%s' makes a scalar tensor from a number, but this is %s",
                                       op, kind_noun(v));
        return tensor_value(e, scalar_literal(e, number_of(v), n->span, 0));
    }
    if (strcmp(op, "!@") == 0) {
        Value *v = eval(e, n->a, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (v->kind != V_INDEX || v->as.index.offset)
            return fail(n->a->span, "'!@' reads an index symbol (declared with 'index'), but this is %s",
                        kind_noun(v));
        Tensor *t = new_tensor(e, TENSOR_INDEX, n->span);
        OriginId o = origin(e, n->span, "'!@%s'", v->as.index.name);
        t->shape = closed_shape(e, n->span, "'!@'");
        Dim d = dim_unit(o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &d, 1, o);
        t->index = v->as.index.name;
        t->index_range = v->as.index.range;
        return tensor_value(e, t);
    }
    Value *v = eval(e, n->a, env, mode);
    if (v->kind == V_ERROR) return v;
    if (v->kind == V_INT) {
        if (v->as.i == INT64_MIN) return fail(n->span, "integer overflow in '-'");
        return int_value(e, -v->as.i);
    }
    if (v->kind == V_FLOAT) return float_value(e, -v->as.f);
    if (v->kind == V_TENSOR) {
        Value *neg = lookup_operator(e, env, "neg");
        if (!neg) return fail(n->span, "unary '-' on a tensor needs the operator 'neg'");
        return apply_operator(e, env, neg->as.op, &v, 1, NULL, NULL, n->span);
    }
    return fail(n->span, "'-' is not defined on %s", kind_noun(v));
}

static Value *eval_app(Elab *e, const Node *n, Env *env, Mode mode) {
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "set_dim") == 0 && !lookup(e, env, "set_dim"))
        return eval_set_dim(e, n, env);
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "dim") == 0 && !lookup(e, env, "dim"))
        return eval_dim(e, n);
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "input_axes") == 0 && !lookup(e, env, "input_axes"))
        return eval_input_axes(e, n, env);
    if (n->a->kind == NODE_VAR && strcmp(n->a->name, "equate") == 0 && !lookup(e, env, "equate"))
        return eval_equate(e, n);
    Value *fn = eval(e, n->a, env, mode);
    if (fn->kind == V_ERROR) return fn;
    /* `let dim = 64` hides the built-ins `dim NAME`, `set_dim NAME N` and `equate A B`, which
     * are read only where the name is not the program's own: `dim d` then fails at `d`. */
    static const char *const hidden_builtins[] = {"dim", "set_dim", "equate", "input_axes"};
    for (size_t i = 0; n->a->kind == NODE_VAR && fn->kind != V_CLOSURE && fn->kind != V_BUILTIN &&
                       i < sizeof hidden_builtins / sizeof *hidden_builtins; i++)
        if (strcmp(n->a->name, hidden_builtins[i]) == 0 && n->list.count && n->list.items[0]->kind == NODE_VAR &&
            !lookup(e, env, n->list.items[0]->name)) {
            Value *err = fail(n->list.items[0]->span, "'%s' is not defined", n->list.items[0]->name);
            diag_note(n->a->span, "'%s' here is the program's own (%s), which hides the built-in '%s NAME': give it "
                      "another name", n->a->name, kind_noun(fn), n->a->name);
            return err;
        }
    uint32_t count = n->list.count;
    Arg *args = arena_alloc(e->arena, (count ? count : 1) * sizeof *args);
    const Spec *spec = NULL; /* `op ~spec:"…" a b c`: an operator applied like a function */
    const Node *spec_arg = NULL;
    for (uint32_t i = 0; i < count; i++) {
        const Node *a = n->list.items[i];
        if (fn->kind == V_OPERATOR && a->kind == NODE_ARG && strcmp(a->name, "spec") == 0 && a->a &&
            a->a->kind == NODE_STRING) {
            if (spec_arg) {
                diag_error(a->span, "%s's parameter ~spec is given twice", fn->as.op->name);
                diag_note(spec_arg->span, "the first ~spec is here");
                return &error_value;
            }
            spec_arg = a;
            spec = a->a->spec; /* parsed with the program (parse.c) */
            if (!spec) return &error_value;
            args[i].value = &unit_value; /* not passed on */
            args[i].label = "spec";
            continue;
        }
        if (fn->kind == V_OPERATOR && a->kind == NODE_ARG && strcmp(a->name, "spec") == 0 && fn->as.op->c &&
            fn->as.op->c->kind == NODE_VAR) /* `~spec:s`: a spec is parsed with the program */
            return fail(a->span, "'%s' takes its ~spec as a string written here, ~spec:\"i, j => j\": a spec is read "
                        "with the program, not computed", fn->as.op->name);
        if (a->kind == NODE_ARG) {
            args[i].label = a->name;
            args[i].optional = (a->flag & ARG_OPTIONAL) != 0;
            args[i].span = a->span;
            if (a->a) {
                args[i].value = eval(e, a->a, env, MODE_VALUE);
            } else {
                Value *v = lookup(e, env, a->name);
                args[i].value = v ? v : fail(a->span, "'~%s' passes the variable '%s', which is not defined",
                                             a->name, a->name);
            }
        } else {
            args[i].span = a->span;
            args[i].value = eval(e, a, env, mode);
        }
        if (args[i].value->kind == V_ERROR) return &error_value;
    }
    if (spec) {
        if (!fn->as.op->c || fn->as.op->c->kind != NODE_VAR)
            return fail(n->span, "'%s' takes no einsum spec: its logic is fixed by its declaration", fn->as.op->name);
        Value **ops = arena_alloc(e->arena, (count ? count : 1) * sizeof *ops);
        uint32_t k = 0;
        for (uint32_t i = 0; i < count; i++) {
            if (args[i].label && strcmp(args[i].label, "spec") == 0) continue;
            if (args[i].label)
                return fail(args[i].span, "'%s' takes no labelled argument ~%s here", fn->as.op->name, args[i].label);
            Value *v = args[i].value;
            if (is_number(v)) v = tensor_value(e, scalar_literal(e, number_of(v), args[i].span, 0));
            ops[k++] = v;
        }
        return apply_operator(e, env, fn->as.op, ops, k, spec, NULL, n->span);
    }
    if (fn->kind == V_CLOSURE && !fn->as.closure->fn_name && n->a->kind == NODE_VAR) {
        Value *named = new_value(e, V_CLOSURE);
        named->as.closure = copy_closure(e, fn->as.closure);
        named->as.closure->shown_as = n->a->name;
        fn = named;
    }
    return apply(e, fn, args, count, n->span);
}

static Value *eval_einsum(Elab *e, const Node *n, Env *env) {
    Value *opv = lookup_operator(e, env, n->name);
    if (!opv) return fail(n->span, "'%s' is not defined as an operator", n->name);
    /* `(a, b, c) ++^ spec`: an operator with a rest operand (`tn`) written after a tuple takes the
     * tuple's tensors as its operands, one slot each. */
    uint32_t rest = operator_rest(opv->as.op);
    bool spread = rest && !n->b && (n->a->kind == NODE_TUPLE || rest > 1);
    if (spread && n->a->kind != NODE_TUPLE)
        return strcmp(n->name, "++^") == 0
                   ? fail(n->a->span, "'++^' concatenates a tuple of tensors: write (a, b) ++^ \"x, f; y, f => x^y, f\"")
                   : fail(n->a->span, "'%s' takes a tuple of at least %u tensors, one per operand slot of its spec",
                          n->name, operator_arity(opv->as.op));
    const Node *const *items = spread ? (const Node *const *)n->a->list.items : (const Node *const[]){ n->a, n->b };
    uint32_t count = spread ? n->a->list.count : n->b ? 2 : 1;
    Value **ops = arena_alloc(e->arena, count * sizeof *ops);
    for (uint32_t i = 0; i < count; i++) {
        ops[i] = eval(e, items[i], env, MODE_TENSOR);
        if (ops[i]->kind == V_ERROR) return &error_value;
        if (is_number(ops[i])) /* a scalar literal where it is written */
            ops[i] = tensor_value(e, scalar_literal(e, number_of(ops[i]), items[i]->span, 0));
    }
    if (!n->spec) return &error_value; /* the parser reported the spec */
    if (!opv->as.op->c || opv->as.op->c->kind != NODE_VAR) { /* declared again, with a logic of its own */
        diag_error(n->span, "'%s' takes no einsum spec: its logic is fixed by its declaration", n->name);
        diag_note(opv->as.op->span, "'%s' is declared here", n->name);
        return &error_value;
    }
    return apply_operator(e, env, opv->as.op, ops, count, n->spec, n->c, n->span);
}

static Value *eval_container(Elab *e, const Node *n, Env *env, Mode mode) {
    if (mode == MODE_TENSOR) return eval_literal(e, n, env, 0);
    Value *v = new_value(e, n->kind == NODE_LIST ? V_LIST : n->kind == NODE_ARRAY ? V_ARRAY : V_TUPLE);
    v->as.list.count = n->list.count;
    v->as.list.items = arena_alloc(e->arena, (n->list.count ? n->list.count : 1) * sizeof(Value *));
    for (uint32_t i = 0; i < n->list.count; i++) {
        v->as.list.items[i] = eval(e, n->list.items[i], env, mode);
        if (v->as.list.items[i]->kind == V_ERROR) return &error_value;
    }
    return v;
}

/* A parameter named `name` that `t` is computed from (`{ w … }` written inside its definition), or
 * NULL; at most *budget tensors are looked at. */
static const Tensor *inline_param_named(const Tensor *t, const char *name, int *budget) {
    if (!t || (*budget)-- <= 0) return NULL;
    if (t->kind == TENSOR_PARAM) return t->name && strcmp(t->name, name) == 0 ? t : NULL;
    for (uint32_t i = 0; i < t->operand_count; i++) {
        const Tensor *found = inline_param_named(t->operands[i], name, budget);
        if (found) return found;
    }
    return NULL;
}

static Value *eval_field(Elab *e, const Node *n, Env *env, Mode mode) {
    if (n->a->kind == NODE_MODULE) return qualified_name(e, n);
    Value *obj = eval(e, n->a, env, mode);
    if (obj->kind == V_ERROR) return obj;
    if (obj->kind == V_DATASET) {
        if (!obj->as.dataset.source->name)
            return fail(n->span, "a data source is read through a 'data' item: data d = … (then d.%s)", n->name);
        for (uint32_t i = 0; i < obj->as.dataset.count; i++)
            if (obj->as.dataset.fields[i].name && strcmp(obj->as.dataset.fields[i].name, n->name) == 0) return obj->as.dataset.fields[i].value;
        const char **names = arena_alloc(e->arena, (obj->as.dataset.count + 1) * sizeof *names);
        uint32_t named = 0;
        for (uint32_t i = 0; i < obj->as.dataset.count; i++)
            if (obj->as.dataset.fields[i].name) names[named++] = obj->as.dataset.fields[i].name;
        const char *near = diag_closest_name(n->name, names, named);
        Value *err = fail(n->span, "the data set has no field '%s'", n->name);
        if (near) diag_note(n->span, "did you mean '.%s'?", near);
        return err;
    }
    if (obj->kind == V_TENSOR) {
        static const char *const tensor_fields[] = {"forward", "backprop", "zero_grads", "grad", "value"};
        const char *near = diag_closest_name(n->name, tensor_fields, 5);
        if (near) {
            Value *err = fail(n->span, "a tensor has no field '.%s'", n->name);
            diag_note(n->span, "did you mean '.%s'?", near);
            return err;
        }
        if (strcmp(n->name, "value") == 0)
            return fail(n->span, "'.value' names a tensor's values in %%cd code; in a tensor expression the tensor "
                        "itself is its value");
        if (strcmp(n->name, "b") == 0 || strcmp(n->name, "i") == 0 || strcmp(n->name, "o") == 0)
            return fail(n->span, "a tensor's sizes are not fields: '.%s' names its %s axes only where a run-time "
                        "size is given (the executable's --size NAME.%s=N, the header's setter); in a tensor "
                        "function, 'dim' of a captured label reads a size (docs/language.md §5.8)", n->name,
                        n->name[0] == 'b' ? "batch" : n->name[0] == 'i' ? "input" : "output", n->name);
        Value *err = fail(n->span, "a tensor has no field '.%s': its fields are its code (.forward, .backprop, "
                          ".zero_grads), its gradient (.grad) and .value, in %%cd code and routines", n->name);
        int budget = 10000;
        const Tensor *param = inline_param_named(obj->as.tensor, n->name, &budget);
        if (param)
            diag_note(param->span, "'%s' is a parameter written inside the definition of '%s', here: it has no name "
                      "outside it; to name it, define it apart (let%%op %s = { %s … }) and use %s there", n->name,
                      obj->as.tensor->name ? obj->as.tensor->name : "this tensor", n->name, n->name, n->name);
        return err;
    }
    return fail(n->span, "%s has no fields", kind_noun(obj));
}

/* Bind `let name params = value` (params may be empty) in env; returns the new env. */
Env *eval_binding(Elab *e, const char *name, const NodeList *params, const Node *value, bool rec,
                  Mode mode, bool code, bool global, Env *env, Value **out) {
    Value *v;
    if (params->count > 0 || code) {
        Closure *c = new_closure(e, params, value, env, mode, name);
        c->code = code;
        if (mode == MODE_TENSOR && params->count > 0) {
            if (has_unit_param(params)) c->scope_at_unit = true;
            else c->scope = new_scope(e, name, true); /* parameters shared by every use */
        }
        v = closure_value(e, c);
        if (rec) {
            env = global ? bind_global(e, name, v) : env_bind(e, env, name, v);
            c->env = env;
        }
    } else {
        if (rec) {
            diag_error(value->span, "'let rec' defines functions; '%s' has no parameters", name);
            v = &error_value;
        } else {
            v = eval(e, value, env, mode);
        }
    }
    /* A scope opened by `()` in this very binding is named after it: `let l1 = layer () in`. */
    if (v->kind == V_CLOSURE && v->as.closure->scope && !v->as.closure->scope->binding &&
        !v->as.closure->scope->toplevel && strcmp(name, "_") != 0)
        v->as.closure->scope->binding = name;
    if (out) *out = v;
    if (strcmp(name, "_") == 0 || (rec && (params->count > 0 || code))) return env;
    return global ? bind_global(e, name, v) : env_bind(e, env, name, v);
}

Value *eval(Elab *e, const Node *n, Env *env, Mode mode) {
    if (e->out_of_steps) return &error_value;
    if (++e->steps > MAX_EVAL_STEPS) {
        diag_error(n->span, "evaluation takes too long: it has run out of its budget of %llu steps "
                   "(is a loop or a recursion unbounded?)", MAX_EVAL_STEPS);
        e->out_of_steps = true;
        return &error_value;
    }
    if (e->steps % EVAL_MEMORY_CHECK == 0 && arena_total_bytes() - e->bytes_at_start > e->byte_budget) {
        diag_error(n->span, "evaluation builds too much: it has run out of its budget of %zu MB "
                   "(is a loop or a recursion making tensors without bound?)", e->byte_budget >> 20);
        e->out_of_steps = true;
        return &error_value;
    }
    switch (n->kind) {
    case NODE_INT: {
        Value *v = int_value(e, n->ival);
        v->written = n->span;
        return v;
    }
    case NODE_FLOAT: return float_value(e, n->fval);
    case NODE_BOOL: return bool_value(e, n->ival != 0);
    case NODE_UNIT: return &unit_value;
    case NODE_RUNTIME_SIZE: return &runtime_size_value; /* a size of an input or a .npy file: eval_sizes, source_shape */
    case NODE_STRING: {
        Value *v = new_value(e, V_STRING);
        v->as.str.text = n->text;
        v->as.str.len = n->len;
        return v;
    }
    case NODE_VAR: {
        Value *v = lookup(e, env, n->name);
        if (!v) {
            if (strcmp(n->name, "set_dim") == 0)
                return fail(n->span, "'set_dim' is written 'set_dim NAME SIZE'");
            if (strcmp(n->name, "dim") == 0) return fail(n->span, "'dim' is written 'dim NAME'");
            if (strcmp(n->name, "equate") == 0) return fail(n->span, "'equate' is written 'equate NAME1 NAME2'");
            const char *near = closest_in_scope(e, env, n->name);
            Value *err = fail(n->span, "'%s' is not defined", n->name);
            if (near) diag_note(n->span, "did you mean '%s'?", near);
            if (strcmp(n->name, "and") == 0 || strcmp(n->name, "or") == 0)
                diag_note(n->span, "the boolean '%s' is written '%s'", n->name, n->name[0] == 'a' ? "&&" : "||");
            if (dtype_of_word(n->name) >= 0)
                diag_note(n->span, "an element type is written as a string: dtype = \"%s\"", n->name);
            bool itself = e->user_call_name && strcmp(e->user_call_name, n->name) == 0; /* a note below */
            if (!itself) note_name_elsewhere(e, env, n->name, n->span);
            if (e->failed_module_count)
                diag_note(n->span, "module '%s' did not load (the error above): '%s' may be one of its definitions",
                          e->failed_modules[0], n->name);
            if (itself)
                diag_note(n->span, "'%s' is the function being applied, defined with 'let': a function that calls "
                          "itself is defined with 'let rec %s …'", n->name, n->name);
            unsigned line, col;
            span_line_col(n->span, &line, &col);
            if (col == 1 && line > 1)
                diag_note(n->span, "a line that starts in column 1 without an item keyword (let, main, data, …) continues "
                          "the item above it; a statement such as 'print' goes in 'main'");
            return err;
        }
        return v;
    }
    case NODE_MODULE:
        return fail(n->span, "'%s' is a module, not a value: name one of its definitions ('%s.name'), or 'open %s' "
                    "to use them unqualified", n->name, n->name, n->name);
    case NODE_FIELD: return eval_field(e, n, env, mode);
    case NODE_APP: return eval_app(e, n, env, mode);
    case NODE_ARG: return fail(n->span, "a labelled argument must follow a function");
    case NODE_BINOP: return eval_binop(e, n, env, mode);
    case NODE_UNOP: return eval_unop(e, n, env, mode);
    case NODE_EINSUM: return eval_einsum(e, n, env);
    case NODE_TUPLE:
    case NODE_LIST:
    case NODE_ARRAY: return eval_container(e, n, env, mode);
    case NODE_RECORD:
        if (mode != MODE_TENSOR)
            return fail(n->span, "an inline definition '{ %s }' makes a parameter; it belongs in a let%%op "
                        "definition", n->list.items[0]->name);
        return eval_inline_param(e, n, env);
    case NODE_FIELD_DEF: return fail(n->span, "unexpected field definition");
    case NODE_ANNOT: {
        uint32_t basis = is_claim_free_annot(n) ? BASIS_CLAIM_FREE : shape_basis(e->solver, n->name);
        const Node *inner = n->a;
        if (inner->kind == NODE_LIST || inner->kind == NODE_ARRAY || inner->kind == NODE_TUPLE)
            return eval_literal(e, inner, env, basis);
        Value *v = eval(e, inner, env, MODE_VALUE);
        if (v->kind == V_ERROR) return v;
        if (!is_number(v))
            return fail(n->span, "a basis annotation '(… : %s)' applies to a tensor literal or a number",
                        n->name);
        return tensor_value(e, scalar_literal(e, number_of(v), n->span, basis == BASIS_CLAIM_FREE ? 0 : basis));
    }
    case NODE_SEQ: {
        Value *v = &unit_value;
        for (uint32_t i = 0; i < n->list.count; i++) {
            v = eval(e, n->list.items[i], env, mode);
            if (v->kind == V_ERROR) return v;
        }
        return v;
    }
    case NODE_LET: {
        Value *v;
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag != 0, mode, false, false, env, &v);
        if (v->kind == V_ERROR) return v;
        return eval(e, n->b, inner, mode);
    }
    case NODE_FUN: return closure_value(e, new_closure(e, &n->list, n->a, env, mode, NULL));
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return c;
        if (c->kind != V_BOOL) return fail(n->a->span, "the condition of 'if' must be a boolean, but this is %s",
                                           kind_noun(c));
        if (c->as.b) return eval(e, n->b, env, mode);
        return n->c ? eval(e, n->c, env, mode) : &unit_value;
    }
    case NODE_FOR: {
        Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
        if (from->kind == V_ERROR || to->kind == V_ERROR) return &error_value;
        if (from->kind != V_INT || to->kind != V_INT)
            return fail(n->span, "the bounds of 'for' must be integers");
        int64_t step = n->flag ? -1 : 1;
        for (int64_t i = from->as.i; n->flag ? i >= to->as.i : i <= to->as.i; i += step) {
            Value *v = eval(e, n->c, env_bind(e, env, n->name, int_value(e, i)), mode);
            if (v->kind == V_ERROR) return v;
        }
        return &unit_value;
    }
    case NODE_ASSIGN:
    case NODE_CODE:
    case NODE_COMMENTED: {
        Value *v = new_value(e, V_CODE);
        v->as.closure = NULL;
        return v;
    }
    case NODE_PARAM:
    case ITEM_LET:
    case ITEM_OPERATOR:
    case ITEM_INDEX:
    case ITEM_DATA:
    case ITEM_INPUT:
    case ITEM_ROUTINE:
    case ITEM_MAIN:
    case ITEM_OPEN:
    case ITEM_OPTION:
    case NODE_KIND_COUNT: break;
    }
    return fail(n->span, "this cannot be evaluated here");
}
