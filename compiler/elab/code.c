/* code.c — `%cd` code: the statements of a routine (`t.forward`, `t.backprop`, `t.zero_grads`,
 * standalone assignments with their own logic, state tensors `{ x } =: …`, printed fresh
 * computations) as the CodeSteps that the assignment stage turns into assignments.  In code the
 * prelude's operators named as primitives (`fma`, `relu`) are the primitives.
 *
 * Requires: elab_internal.h; ir.h for the scalar primitives' names and arities. */
#include "elab/elab_internal.h"

#include <string.h>

#include "ir/ir.h"

/* ---- Routines ------------------------------------------------------------------------------ */

void add_step(Elab *e, Routine *r, CodeStep step) {
    if (!step.user_call.file) { /* where the assignments' errors in the library's code are reported */
        step.user_call = e->user_call;
        step.user_call_name = e->user_call_name;
    }
    ARENA_PUSH(e->arena, r->steps, r->step_count, r->step_cap, step);
}

/* A tensor named by `n` (a name, or `x.grad` / `x.value`); false after an error. */
bool code_tensor(Elab *e, const Node *n, Env *env, Tensor **t, bool *grad) {
    *grad = false;
    const Node *obj = n;
    if (n->kind == NODE_FIELD && (strcmp(n->name, "grad") == 0 || strcmp(n->name, "value") == 0)) {
        *grad = n->name[0] == 'g';
        obj = n->a;
        const Value *inner = obj->kind == NODE_FIELD && obj->a->kind == NODE_VAR ? lookup(e, env, obj->a->name) : NULL;
        if (inner && inner->kind == V_TENSOR && (strcmp(obj->name, "grad") == 0 || strcmp(obj->name, "value") == 0)) {
            diag_error(n->span, "'.%s.%s': a tensor's '.%s' has no fields of its own (a gradient is not differentiated "
                       "again): write 'x.grad' or 'x.value'", obj->name, n->name, obj->name);
            return false;
        }
    }
    Value *v = eval(e, obj, env, MODE_TENSOR);
    if (v->kind == V_ERROR) return false;
    if (v->kind != V_TENSOR) {
        diag_error(obj->span, "this names %s, not a tensor", kind_noun(v));
        return false;
    }
    *t = v->as.tensor;
    if (*grad && ((*t)->kind == TENSOR_DATA || (*t)->kind == TENSOR_INPUT) && ir_dtype_integer((*t)->dtype)) {
        const char *name = (*t)->shown ? (*t)->shown : (*t)->name ? (*t)->name : "this tensor";
        diag_error(n->span, "'%s' is %s: an integer tensor is never differentiated, so it has no gradient", name,
                   ir_dtype_word((*t)->dtype));
        return false;
    }
    const char *leaf = *grad ? kind_without_gradient((*t)->kind) : NULL;
    if (leaf) { /* read, it would be zeros nothing writes; written, a buffer only this code sees */
        diag_error(n->span, "'%s' has no gradient: it is %s (inputs, data, literals and constants have none; backprop "
                   "reaches parameters and the operations between them and the loss)",
                   (*t)->shown ? (*t)->shown : (*t)->name ? (*t)->name : "this tensor", leaf);
        return false;
    }
    return true;
}

void report_not_code_primitive(const char *name, bool binary, Span span) {
    diag_error(span, "'%s' is not a primitive operation of %%cd code", name);
    const char *near = scalar_op_closest(name, binary);
    if (near) diag_note(span, "did you mean '%s'?", near);
}

/* `name` applied to `count` operands in the right side of an assignment (infix when `binary`)
 * must be a primitive of %cd code (docs/language.md §3.7.3) taking that many; false after
 * reporting it, with the closest primitive's name when one is near (a misspelling). */
static bool check_code_primitive(const char *name, bool binary, uint32_t count, Span span) {
    bool swapped;
    int op = scalar_op_code(name, binary, &swapped);
    if (op < 0) {
        report_not_code_primitive(name, binary, span);
        return false;
    }
    unsigned arity = scalar_op_arity((ScalarOp)op);
    if (count != arity) {
        diag_error(span, "'%s' takes %u operand%s in code, but %u %s given", name, arity, arity == 1 ? "" : "s",
                   count, count == 1 ? "is" : "are");
        return false;
    }
    return true;
}

/* Whether `name`, applied in the right side of an assignment, is read as a primitive of code:
 * when it is not bound, or bound to the prelude's operator of that name (`relu`, `fma`, …:
 * docs/language.md §3.7.2 reads every primitive function as the per-cell primitive at any depth,
 * so `fma p q r ~logic:"@"` reads three tensors).  A name the program binds is its own. */
static bool code_primitive_name(Elab *e, Env *env, const char *name) {
    const Value *bound = lookup(e, env, name);
    bool swapped;
    return !bound || (bound->kind == V_OPERATOR && bound->as.op->span.file == e->prelude_file &&
                      scalar_op_code(name, false, &swapped) >= 0);
}

static CodeExpr *code_expr(Elab *e, const Node *n, Env *env) {
    CodeExpr *x = arena_alloc(e->arena, sizeof *x);
    x->span = n->span;
    if (n->kind == NODE_INT || n->kind == NODE_FLOAT) {
        x->kind = CEXPR_CONST;
        x->value = n->kind == NODE_INT ? (double)n->ival : n->fval;
        return x;
    }
    if (n->kind == NODE_BINOP && strcmp(n->name, "@|") != 0) {
        x->kind = CEXPR_OP;
        x->op = n->name;
        x->binary = true;
        x->arg_count = 2;
        if (!check_code_primitive(n->name, true, 2, n->span)) return NULL;
        if (!(x->args[0] = code_expr(e, n->a, env)) || !(x->args[1] = code_expr(e, n->b, env))) return NULL;
        return x;
    }
    if (n->kind == NODE_APP && n->a->kind == NODE_VAR && code_primitive_name(e, env, n->a->name)) {
        x->kind = CEXPR_OP;
        x->op = n->a->name;
        if (strcmp(n->a->name, "random") == 0) { /* `random ()`: the primitive without operands */
            if (n->list.count == 1 && n->list.items[0]->kind == NODE_UNIT) return x;
            diag_error(n->span, "'random' takes no operands: it is written 'random ()'");
            return NULL;
        }
        uint32_t count = 0; /* the operands: curried, or a tuple's items */
        for (uint32_t i = 0; i < n->list.count; i++) {
            const Node *arg = n->list.items[i];
            count += arg->kind == NODE_TUPLE && n->list.count == 1 ? arg->list.count : 1;
        }
        if (!check_code_primitive(n->a->name, false, count, n->a->span)) return NULL;
        for (uint32_t i = 0; i < n->list.count; i++) {
            const Node *arg = n->list.items[i];
            const NodeList *items = arg->kind == NODE_TUPLE && n->list.count == 1 ? &arg->list : NULL;
            for (uint32_t j = 0; j < (items ? items->count : 1); j++)
                if (!(x->args[x->arg_count++] = code_expr(e, items ? items->items[j] : arg, env))) return NULL;
        }
        return x;
    }
    Value *v = n->kind == NODE_FIELD ? NULL : eval(e, n, env, MODE_TENSOR);
    if (v && v->kind == V_ERROR) return NULL;
    if (v && is_number(v)) {
        x->kind = CEXPR_CONST;
        x->value = number_of(v);
        return x;
    }
    x->kind = CEXPR_TENSOR;
    if (v && v->kind == V_OPTION) return (x->tensor = option_tensor(e, v, n->span)) ? x : NULL;
    if (v && v->kind == V_TENSOR) {
        x->tensor = v->as.tensor;
        return x;
    }
    if (v) {
        diag_error(n->span, "this is %s, not a tensor or a number", kind_noun(v));
        return NULL;
    }
    return code_tensor(e, n, env, &x->tensor, &x->grad) ? x : NULL;
}

/* True for a tensor whose values are written in the program: a literal, or a stack of them. */
static bool is_written_literal(const Tensor *t) {
    if (t->kind == TENSOR_LITERAL) return true;
    if (t->kind != TENSOR_STACK) return false;
    for (uint32_t i = 0; i < t->operand_count; i++)
        if (!is_written_literal(t->operands[i])) return false;
    return true;
}

/* Code may assign to parameters and to what the program computes (and to their gradients), not to
 * tensors whose values come from elsewhere; reports the left side `at` otherwise. */
static bool check_assignable(const Tensor *t, Span at) {
    const char *name = t->name ? t->name : "this tensor";
    const char *why = NULL;
    switch (t->kind) {
    case TENSOR_INPUT:
        why = "is an input: the caller fills it before a routine runs (in an executable, from the seed), and "
              "code only reads it; assign to a tensor computed from it instead";
        break;
    case TENSOR_DATA: why = "is data: its values are loaded or generated when the program starts, and code only reads it"; break;
    case TENSOR_CONSTANT: why = "is a constant (such as ones ()), which code only reads"; break;
    case TENSOR_INDEX: why = "is the value of an index symbol, which only a loop of main or a setter changes"; break;
    default:
        if (is_written_literal(t)) why = "is a tensor literal: its values are written in the program, and code only reads it";
        break;
    }
    if (!why) return true;
    diag_error(at, "cannot assign to '%s': it %s", name, why);
    if (t->kind == TENSOR_INPUT || t->kind == TENSOR_DATA) diag_note(t->span, "'%s' is declared here", name);
    return false;
}

/* `{ name; o = […] } =: …` in code: a state tensor (elab.h TENSOR_STATE), bound to `name` for the
 * right side and the statements after it. */
static Tensor *state_tensor(Elab *e, const Node *rec, Env *env) {
    const Node *first = rec->list.items[0];
    if (first->a) {
        diag_error(first->a->span, "'{ %s }' on the left of an assignment is filled by the assignment; it takes "
                   "no initial value (it starts at 0)", first->name);
        return NULL;
    }
    Row rows[ROW_KINDS];
    bool given[ROW_KINDS];
    uint8_t dtype = e->code_subject ? e->code_subject->dtype : TSR_DTYPE_F32; /* an optimiser's: its parameter's */
    if (!record_sizes(e, rec, env, first->name, SIZES_FOLLOW, rows, given, &dtype)) return NULL;
    Tensor *t = new_tensor(e, TENSOR_STATE, rec->span);
    t->name = first->name;
    t->subject = e->code_namesake;
    t->dtype = dtype;
    OriginId o = origin(e, rec->span, "'%s' (state defined in code)", first->name);
    for (int k = 0; k < ROW_KINDS; k++) t->shape.rows[k] = given[k] ? rows[k] : shape_fresh_row(e->solver, o);
    return t;
}

/* A code function applied to all its arguments: its optional parameters left get their defaults;
 * false (reported) when a required one is missing. */
static bool finish_code(Elab *e, Closure *c, Span span) {
    for (; c->next < c->param_count; c->next++) {
        const Node *p = c->params[c->next];
        if (c->bound[c->next]) continue;
        if (p->flag != PARAM_OPTIONAL) {
            diag_error(span, "this code is %s applied to too few arguments: it still needs %s%s",
                       c->fn_name ? c->fn_name : "a function", p->flag == PARAM_LABELLED ? "~" : "its argument ",
                       p->name ? p->name : "()");
            return false;
        }
        c->env = env_bind(e, c->env, p->name, param_default(e, c, p));
    }
    return true;
}

/* The tensors an assignment's right side reads, in the order written: each gets its slot
 * (CodeExpr.slot, from 1; slot 0 is the left side). */
static void number_reads(Elab *e, CodeExpr *x, Tensor ***ts, uint32_t *count, uint32_t *cap) {
    if (x->kind == CEXPR_TENSOR) {
        x->slot = *count + 1;
        ARENA_PUSH(e->arena, *ts, *count, *cap, x->tensor);
    }
    for (uint32_t i = 0; i < x->arg_count; i++) number_reads(e, x->args[i], ts, count, cap);
}

/* The logic of an assignment of code, `~logic:` (docs/language.md §3.7.2): ".", "@", "T" or an
 * einsum spec literal; false after reporting anything else (a spec that did not parse was
 * reported by the parser). */
bool code_logic(const Node *logic, Logic *out, const Spec **spec) {
    *spec = NULL;
    if (logic->kind == NODE_VAR) {
        diag_error(logic->span, "'~logic:%s' is not a logic here: an assignment in code takes a string literal, "
                   "\".\", \"@\", \"T\" or an einsum spec (a logic named by a parameter is an operator's)",
                   logic->name);
        return false;
    }
    if (logic->kind != NODE_STRING) return false; /* the parser reported it */
    if (logic->spec) {
        *out = LOGIC_SPEC;
        *spec = logic->spec;
        return true;
    }
    if (logic->len != 1 || !strchr(".@T", logic->text[0])) return false; /* the parser reported it */
    *out = logic_named(logic->text[0]);
    return true;
}

/* A standalone assignment `lhs ACCUMOP rhs [~logic:…]` of code (a routine, a let%cd function,
 * a [%cd …] block of main).  The tensors the right side reads, in the order written, are the
 * operands of its logic (numbers are constants, no operands), and the left side is the result:
 * shape inference gets the constraints an operator application with that logic would emit
 * (emit_logic), and assign.c derives the loops from the same logic (proj.c).  Without
 * ~logic: the logic is pointwise: every tensor read broadcasts to the left side (seed 003's
 * producer regime).  A state definition `{ name } =: …` gets its shape from these
 * constraints alone (or its written sizes).  Returns the environment for the statements after
 * it. */
static Env *elab_assignment(Elab *e, Routine *r, const Node *n, Env *env) {
    CodeStep step = {.kind = STEP_ASSIGN, .op = n->name, .logic = LOGIC_POINTWISE, .span = n->span};
    const Spec *spec = NULL;
    if (n->c && !code_logic(n->c, &step.logic, &spec)) return env;
    if (n->a->kind == NODE_RECORD) {
        if (!(step.tensor = state_tensor(e, n->a, env))) return env;
        env = env_bind(e, env, n->a->list.items[0]->name, tensor_value(e, step.tensor));
    } else {
        if (!code_tensor(e, n->a, env, &step.tensor, &step.grad)) return env;
        if (!step.grad && !check_assignable(step.tensor, n->a->span)) return env;
    }
    if (!(step.rhs = code_expr(e, n->b, env))) return env;
    Tensor **ts = NULL;
    uint32_t count = 0, cap = 0;
    number_reads(e, step.rhs, &ts, &count, &cap);
    step.slot_count = count + 1;
    const char *needs = logic_operands_needed(step.logic, count);
    if (step.logic == LOGIC_SPEC && spec->rhs_count != count) {
        diag_error(spec->span, "this spec has %u operand slot%s, but the right side of the assignment reads %u "
                   "tensor%s", spec->rhs_count, spec->rhs_count == 1 ? "" : "s", count, count == 1 ? "" : "s");
        diag_note(n->b->span, "each tensor the right side reads, in the order written, fills the next operand slot");
        return env;
    }
    if (needs) {
        diag_error(n->c->span, "logic \"%c\" needs %s, but the right side of the assignment reads %u tensor%s",
                   n->c->text[0], needs, count, count == 1 ? "" : "s");
        diag_note(n->b->span, "each tensor the right side reads, in the order written, is an operand of the logic");
        return env;
    }
    if (step.logic == LOGIC_COMPOSE && !check_compose_products(n, "this assignment")) return env;
    shape_code_constraints(e->solver, true);
    step.spec = emit_logic(e, env, step.logic, spec, step.tensor, ts, count, NULL, n->span, n->name);
    shape_code_constraints(e->solver, false);
    add_step(e, r, step);
    return env;
}

/* `all_reduce_mean t` or `all_reduce_mean t.grad`, the primitive of code that averages across
 * processes, when n is one (its name not bound by the program): true when handled. */
static bool elab_all_reduce(Elab *e, Routine *r, const Node *n, Env *env) {
    if (n->kind != NODE_APP || n->a->kind != NODE_VAR || strcmp(n->a->name, "all_reduce_mean") != 0 ||
        lookup(e, env, n->a->name))
        return false;
    const Node *arg = n->list.count == 1 ? n->list.items[0] : NULL;
    if (!arg || arg->kind == NODE_ARG) {
        diag_error(n->span, "all_reduce_mean takes one tensor or gradient: all_reduce_mean t, all_reduce_mean t.grad");
        return true;
    }
    bool grad = arg->kind == NODE_FIELD && strcmp(arg->name, "grad") == 0;
    Value *v = eval(e, grad ? arg->a : arg, env, MODE_TENSOR);
    if (v->kind == V_ERROR) return true;
    if (v->kind != V_TENSOR) {
        diag_error(arg->span, "all_reduce_mean takes a tensor or a gradient, but this is %s", kind_noun(v));
        return true;
    }
    Tensor *t = v->as.tensor;
    if (!grad && t->kind != TENSOR_PARAM && t->kind != TENSOR_OP && t->kind != TENSOR_STATE) {
        diag_error(arg->span, "all_reduce_mean changes the tensor's cells, so it takes a parameter, a state tensor, "
                   "a tensor an operation computes or a gradient; an input, data, a literal or a constant is only read");
        return true;
    }
    add_step(e, r, (CodeStep){.kind = STEP_ALL_REDUCE, .tensor = t, .grad = grad, .span = n->span});
    return true;
}

/* Code that is a value: a `let%cd` definition, a code function applied (`Train.sgd ~lr p`), or
 * a name bound to one; its body is elaborated in its own environment. */
static void elab_code_value(Elab *e, Routine *r, const Node *n, Env *env) {
    if (elab_all_reduce(e, r, n, env)) return;
    Value *v = eval(e, n, env, MODE_VALUE);
    if (v->kind == V_ERROR) return;
    if (v->kind != V_CODE || !v->as.closure) {
        diag_error(n->span, "a routine holds code (t.forward, t.backprop, t.zero_grads, assignments, let%%cd "
                   "functions applied), but this is %s", kind_noun(v));
        if (v->kind == V_TENSOR && n->kind == NODE_VAR) /* `routine train = loss` */
            diag_note(n->span, "to compute the tensor, the routine runs its forward code: '%s.forward'", n->name);
        return;
    }
    Closure *c = copy_closure(e, v->as.closure);
    if (!finish_code(e, c, n->span)) return;
    /* An optimiser's last argument is the parameter it updates: the state tensors of its body
     * (Adam's m, v, t) are named after that parameter ("layer.w.m"), so a checkpoint's arrays say
     * whose they are.  Nested code keeps the subject of the code around it unless it has its own.
     * Code whose last argument is another tensor (Train.step's loss), outside any parameter's
     * code, names its state tensors after it ("loss.grad_scale": stable when the program changes
     * elsewhere), their element type their own. */
    Tensor *saved_subject = e->code_subject, *saved_namesake = e->code_namesake;
    const Node *last = c->param_count ? c->params[c->param_count - 1] : NULL;
    Value *arg = last && last->name ? lookup(e, c->env, last->name) : NULL;
    if (arg && arg->kind == V_TENSOR && arg->as.tensor->kind == TENSOR_PARAM) e->code_subject = arg->as.tensor;
    if (arg && arg->kind == V_TENSOR && (arg->as.tensor->kind == TENSOR_PARAM || !saved_subject))
        e->code_namesake = arg->as.tensor;
    /* Errors in the body lead with the user's application of the function (error "…"). */
    Span saved_call = e->user_call;
    const char *saved_call_name = e->user_call_name;
    if (c->user_call.file) set_user_call(e, c->user_call, c->user_call_name);
    else if (!span_in_stdlib(n->span)) set_user_call(e, n->span, c->fn_name ? c->fn_name : "an anonymous function");
    /* Shape errors of the body note the application too, as an %op function's do. */
    bool outermost = e->depth == 0 && e->user_call.file;
    if (outermost) shape_set_context(e->solver, e->user_call, e->user_call_name);
    if (++e->depth > MAX_EVAL_DEPTH) {
        diag_error(n->span, "code is nested too deeply (more than %d calls)", MAX_EVAL_DEPTH);
    } else {
        elab_code(e, r, c->body, c->env);
    }
    e->depth--;
    if (outermost) shape_set_context(e->solver, (Span){0, 0, 0}, NULL);
    set_user_call(e, saved_call, saved_call_name);
    e->code_subject = saved_subject;
    e->code_namesake = saved_namesake;
}

/* Elaborates the statements of `n` into r; returns the environment for the statements after it
 * (with the state tensors `n` defined). */
Env *elab_code(Elab *e, Routine *r, const Node *n, Env *env) {
    switch (n->kind) {
    case NODE_CODE: return elab_code(e, r, n->a, env);
    case NODE_COMMENTED: return elab_code(e, r, n->b, env);
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) env = elab_code(e, r, n->list.items[i], env);
        return env;
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return env;
        if (c->kind != V_BOOL) {
            diag_error(n->a->span, "the condition of 'if' in code is known at compile time and must be a boolean, "
                       "but this is %s", kind_noun(c));
            return env;
        }
        if (c->as.b) return elab_code(e, r, n->b, env);
        return n->c ? elab_code(e, r, n->c, env) : env;
    }
    case NODE_LET: {
        Value *v;
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag != 0, MODE_VALUE, false, false, env, &v);
        if (v->kind != V_ERROR) elab_code(e, r, n->b, inner);
        return env;
    }
    case NODE_FOR: {
        Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
        if (from->kind == V_ERROR || to->kind == V_ERROR) return env;
        if (from->kind != V_INT || to->kind != V_INT) {
            diag_error(n->span, "the bounds of 'for' in code must be integers known at compile time");
            return env;
        }
        int64_t step = n->flag ? -1 : 1;
        for (int64_t i = from->as.i; n->flag ? i >= to->as.i : i <= to->as.i; i += step)
            elab_code(e, r, n->c, env_bind(e, env, n->name, int_value(e, i)));
        return env;
    }
    case NODE_APP:
    case NODE_VAR: elab_code_value(e, r, n, env); return env;
    case NODE_FIELD: {
        CodeStepKind kind = strcmp(n->name, "forward") == 0      ? STEP_FORWARD
                          : strcmp(n->name, "backprop") == 0     ? STEP_BACKPROP
                          : strcmp(n->name, "zero_grads") == 0   ? STEP_ZERO_GRADS
                                                                 : STEP_ASSIGN;
        if (kind == STEP_ASSIGN) break;
        Value *v = eval(e, n->a, env, MODE_TENSOR);
        if (v->kind == V_ERROR) return env;
        if (v->kind != V_TENSOR) {
            diag_error(n->a->span, "'.%s' is code of a tensor, but this is %s", n->name, kind_noun(v));
            return env;
        }
        add_step(e, r, (CodeStep){.kind = kind, .tensor = v->as.tensor, .span = n->span, .user_call = e->user_call,
                                  .user_call_name = e->user_call_name});
        return env;
    }
    case NODE_ASSIGN: return elab_assignment(e, r, n, env);
    default: break;
    }
    static const char *const code_fields[] = {"forward", "backprop", "zero_grads"};
    const char *near = n->kind == NODE_FIELD ? diag_closest_name(n->name, code_fields, 3) : NULL;
    if (n->kind == NODE_FIELD && !near) /* PyTorch's words: backward(), zero_grad() */
        near = !strncmp(n->name, "back", 4) ? "backprop" : !strncmp(n->name, "zero", 4) ? "zero_grads" : NULL;
    /* C's `x += y` reads as an operator `+=`: the accumulating assignment puts '=' first. */
    bool c_style = n->kind == NODE_BINOP && n->name && strlen(n->name) == 2 && n->name[1] == '=' &&
                   strchr("+-*/", n->name[0]);
    if (c_style) {
        diag_error(n->span, "'%s' is not an assignment: code accumulates with '=%c' (the '=' first: %s =%c …)", n->name,
                   n->name[0], n->a && n->a->kind == NODE_VAR ? n->a->name : "t", n->name[0]);
        return env;
    }
    diag_error(n->span, "a routine holds t.forward, t.backprop, t.zero_grads, assignments, let%%cd code, and "
               "'if', 'let' and 'for' over them");
    if (near) diag_note(n->span, "did you mean '.%s'?", near);
    /* Python's `w = w - lr * g`: '=' compares in code. */
    if (n->kind == NODE_BINOP && n->name && strcmp(n->name, "=") == 0 && n->a && n->a->kind == NODE_VAR)
        diag_note(n->span, "'=' compares; an assignment is written with '=:' (%s =: …), or accumulates ('%s =- …' "
                  "subtracts from it)", n->a->name, n->a->name);
    return env;
}
