/* values.c — the values of elaboration's compile-time language and where they live: making
 * values (numbers, booleans, tensors), naming their kinds for messages, environments (bind,
 * lookup, the global table, did-you-mean over the names in scope), tensors as values (new
 * tensors, origins for the shape solver, scalar literals, a value used as a tensor), the error
 * value that propagates silently after a reported error, and parameter scopes.
 *
 * Requires: elab_internal.h's types; of the other files only builtins.c (an `option` read as a
 * tensor, option_tensor). */
#include "elab/elab_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <string.h>

Value error_value = {.kind = V_ERROR};
Value unit_value = {.kind = V_UNIT};
Value runtime_size_value = {.kind = V_RUNTIME_SIZE};

Value *new_value(Elab *e, ValueKind kind) {
    Value *v = arena_alloc(e->arena, sizeof *v);
    v->kind = kind;
    return v;
}

Value *int_value(Elab *e, int64_t i) {
    Value *v = new_value(e, V_INT);
    v->as.i = i;
    return v;
}

Value *float_value(Elab *e, double f) {
    Value *v = new_value(e, V_FLOAT);
    v->as.f = f;
    return v;
}

Value *bool_value(Elab *e, bool b) {
    Value *v = new_value(e, V_BOOL);
    v->as.b = b;
    return v;
}

Value *tensor_value(Elab *e, Tensor *t) {
    if (!t) return &error_value;
    Value *v = new_value(e, V_TENSOR);
    v->as.tensor = t;
    return v;
}

const char *kind_noun(const Value *v) {
    switch (v->kind) {
    case V_ERROR: return "an erroneous value";
    case V_UNIT: return "()";
    case V_INT: return "an integer";
    case V_FLOAT: return "a float";
    case V_BOOL: return "a boolean";
    case V_STRING: return "a string";
    case V_LIST: return "a list";
    case V_ARRAY: return "an array";
    case V_TUPLE: return "a tuple";
    case V_CLOSURE: return "a function";
    case V_TENSOR: return "a tensor";
    case V_OPERATOR: return "an operator";
    case V_BUILTIN: return "a built-in function";
    case V_INDEX: return v->as.index.offset ? "an index plus an integer"
                         : v->as.index.counter ? "a loop counter of main (an index known when the program runs)"
                                               : "an index symbol";
    case V_DATASET: return "a data set";
    case V_CODE: return "code";
    case V_OPTION: return "an option (its value is known when the program runs)";
    case V_INIT: return "an initialiser";
    case V_RUNTIME_SIZE: return "a run-time size '?'";
    }
    return "a value";
}

bool is_number(const Value *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
double number_of(const Value *v) { return v->kind == V_INT ? (double)v->as.i : v->as.f; }

Env *env_bind(Elab *e, Env *env, const char *name, Value *value) {
    Env *b = arena_alloc(e->arena, sizeof *b);
    b->name = name;
    b->value = value;
    b->next = env;
    return b;
}

uint32_t name_hash(const char *name) {
    uint32_t h = 2166136261u;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
    return h;
}

static bool visible(const GlobalEntry *g, uint32_t gen, uint32_t owner) {
    return g->gen <= gen && (g->owner == owner || g->owner == OWNER_BASE);
}

Value *lookup_global(Elab *e, const char *name, uint32_t gen, uint32_t owner) {
    for (GlobalEntry *g = e->global_table[name_hash(name) % GLOBAL_BUCKETS]; g; g = g->next)
        if (visible(g, gen, owner) && strcmp(g->name, name) == 0) return g->value;
    return NULL;
}

Value *lookup(Elab *e, Env *env, const char *name) {
    for (; env; env = env->next) {
        if (!env->name) return lookup_global(e, name, env->gen, env->owner);
        if (strcmp(env->name, name) == 0) return env->value;
    }
    return NULL;
}

/* The name in scope at `env` closest to `name` (a misspelling: diag_closest_name), or NULL:
 * the local bindings, then every global defined before `env`'s generation; none for a name
 * of one or two letters. */
const char *closest_in_scope(Elab *e, Env *env, const char *name) {
    if (strlen(name) < 3) return NULL; /* every other short name is an edit away: no hint in that */
    const char **names = NULL;
    uint32_t count = 0, cap = 0, gen = 0, owner = OWNER_BASE;
    for (; env; env = env->next) {
        if (!env->name) {
            gen = env->gen;
            owner = env->owner;
            break;
        }
        if (isalpha((unsigned char)env->name[0]) || env->name[0] == '_') ARENA_PUSH(e->arena, names, count, cap, env->name);
    }
    for (uint32_t b = 0; b < GLOBAL_BUCKETS; b++) /* names, not operators ("( > )" is bound as ">") */
        for (GlobalEntry *g = e->global_table[b]; g; g = g->next)
            if (visible(g, gen, owner) && (isalpha((unsigned char)g->name[0]) || g->name[0] == '_'))
                ARENA_PUSH(e->arena, names, count, cap, g->name);
    return diag_closest_name(name, names, count);
}

/* The globals' marker that ends `env`, or NULL. */
static const Env *env_marker(const Env *env) {
    for (; env; env = env->next)
        if (!env->name) return env;
    return NULL;
}

void note_name_elsewhere(Elab *e, Env *env, const char *name, Span span) {
    const Env *marker = env_marker(env);
    uint32_t mine = marker ? marker->owner : OWNER_BASE, gen = marker ? marker->gen : 0, owner = OWNER_BASE;
    bool later = false;
    for (GlobalEntry *g = e->global_table[name_hash(name) % GLOBAL_BUCKETS]; g; g = g->next) {
        if (strcmp(g->name, name) != 0) continue;
        if (g->owner == mine && g->gen > gen) later = true;
        else if (g->owner != mine && g->owner != OWNER_BASE && !g->opened_from && owner == OWNER_BASE) owner = g->owner;
    }
    if (later) {
        diag_note(span, "'%s' is defined after this point: a definition is usable below it, and a function only calls "
                  "those defined before it", name);
        return;
    }
    /* An item below, not run yet, of the unit whose name it is (a module's function applied by the
     * program does not see the program's items). */
    for (uint32_t i = e->item_at + 1; e->items && mine == e->owner && i < e->items->count; i++) {
        const Node *item = e->items->items[i];
        if (item->kind == ITEM_LET && item->name && strcmp(item->name, name) == 0) {
            diag_note(item->span, "'%s' is defined here, below its use: a definition is usable after it", name);
            return;
        }
    }
    const char *library = owner == OWNER_BASE ? stdlib_module_defining(e, name) : NULL;
    if (library) /* a module no use has loaded yet */
        diag_note(span, "'%s' is a definition of the standard library's module '%s', which is not open here: write "
                  "'%s.%s', or 'open %s'", name, library, library, name, library);
    if (owner == OWNER_BASE) return;
    const char *module = NULL;
    for (uint32_t i = 0; i < e->opened_count; i++)
        if (e->opened_owner[i] == owner) module = e->opened[i];
    if (module && name[0] == '_')
        diag_note(span, "'%s' is module '%s''s own: a name beginning with '_' is reachable inside its module alone", name,
                  module);
    else if (module)
        diag_note(span, "'%s' is a definition of module '%s', which is not open here: write '%s.%s', or 'open %s'", name,
                  module, module, name, module);
    else
        diag_note(span, "'%s' is defined by the program, which a module does not see: a module sees the built-ins, the "
                  "prelude, its own definitions and those of the modules it opens", name);
}

/* The definition of module `module` closest to `name` (Nn.softmaxx: softmax), or NULL. */
const char *closest_in_module(Elab *e, const char *module, const char *name) {
    if (strlen(name) < 3) return NULL;
    size_t prefix = strlen(module);
    const char **names = NULL;
    uint32_t count = 0, cap = 0;
    for (uint32_t b = 0; b < GLOBAL_BUCKETS; b++)
        for (GlobalEntry *g = e->global_table[b]; g; g = g->next)
            if (strncmp(g->name, module, prefix) == 0 && g->name[prefix] == '.' && isalpha((unsigned char)g->name[prefix + 1]))
                ARENA_PUSH(e->arena, names, count, cap, g->name + prefix + 1);
    return diag_closest_name(name, names, count);
}

Env *globals_now(Elab *e) {
    Env *marker = arena_alloc(e->arena, sizeof *marker);
    marker->gen = e->generation;
    marker->owner = e->owner;
    return e->globals = marker;
}

Env *bind_global_of(Elab *e, uint32_t owner, const char *name, Value *value, const char *opened_from) {
    GlobalEntry *g = arena_alloc(e->arena, sizeof *g);
    uint32_t b = name_hash(name) % GLOBAL_BUCKETS;
    g->name = name;
    g->value = value;
    g->gen = ++e->generation;
    g->owner = owner;
    g->opened_from = opened_from;
    g->next = e->global_table[b];
    e->global_table[b] = g;
    return globals_now(e);
}

/* Define a global of the current unit; returns the marker of the new generation. */
Env *bind_global(Elab *e, const char *name, Value *value) { return bind_global_of(e, e->owner, name, value, NULL); }

/* ---- Tensors ------------------------------------------------------------------------------- */

Tensor *new_tensor(Elab *e, TensorKind kind, Span span) {
    Program *p = e->program;
    Tensor *t = arena_alloc(e->arena, sizeof *t);
    t->id = p->tensor_count;
    t->kind = kind;
    t->span = span;
    t->call = e->user_call;
    t->call_name = e->user_call_name;
    ARENA_PUSH(e->arena, p->tensors, p->tensor_count, p->tensor_cap, t);
    return t;
}

int dtype_of_word(const char *text) {
#define DTYPE_WORD(name, word, numpy, ctype) word,
    static const char *const words[] = {TSR_DTYPE_KINDS(DTYPE_WORD)};
#undef DTYPE_WORD
    for (int i = 0; i < TSR_DTYPE_COUNT; i++)
        if (strcmp(text, words[i]) == 0) return i;
    return -1;
}

bool dtype_of_value(const Value *v, Span span, const char *what, uint8_t *out) {
    int dtype = v->kind == V_STRING ? dtype_of_word(v->as.str.text) : -1;
    if (dtype >= 0) {
        *out = (uint8_t)dtype;
        return true;
    }
    if (v->kind == V_ERROR) return false; /* reported where it was made */
    diag_error(span, "the element type of %s must be one of \"f32\", \"f64\", \"bf16\", \"f16\", \"i32\", \"i64\", \"u8\" "
               "or \"bool\", but this is %s", what, v->kind == V_STRING ? "another string" : kind_noun(v));
    static const char *const numpy_names[][2] = {{"float32", "f32"}, {"float64", "f64"}, {"float16", "f16"},
                                                 {"bfloat16", "bf16"}, {"int32", "i32"}, {"int64", "i64"},
                                                 {"uint8", "u8"}, {"float", "f32"}, {"double", "f64"}, {"int", "i32"}};
    for (size_t i = 0; v->kind == V_STRING && i < sizeof numpy_names / sizeof *numpy_names; i++)
        if (strcmp(v->as.str.text, numpy_names[i][0]) == 0) diag_note(span, "did you mean \"%s\"?", numpy_names[i][1]);
    return false;
}

OriginId origin(Elab *e, Span span, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return shape_origin(e->solver, span, buf);
}

/* Three closed empty rows, each with an origin saying so ("this tensor literal: no batch
 * axes"), for messages about a rank mismatch. */
Shape closed_shape(Elab *e, Span span, const char *what) {
    Shape s;
    for (int k = 0; k < ROW_KINDS; k++)
        s.rows[k] = shape_empty_row(origin(e, span, "%s: no %s axes", what, logic_row_names[k]));
    return s;
}

/* A number in a tensor expression: exact shape, one claim-free output axis (seed 000: scalar
 * literals are seeded at []·◇·[1_∅]), or a unit axis of the given basis. */
Tensor *scalar_literal(Elab *e, double value, Span span, uint32_t basis) {
    Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
    OriginId o = origin(e, span, "this number");
    t->shape = closed_shape(e, span, "this number");
    Dim d = basis ? dim_ground(1, basis, o) : dim_unit(o);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &d, 1, o);
    t->values = arena_alloc(e->arena, sizeof *t->values);
    t->values[0] = value;
    t->value_count = 1;
    return t;
}

void note_data_fields(Elab *e, const Value *v, Span span) {
    if (v->kind != V_DATASET || !v->as.dataset.count) return;
    const char *name = v->as.dataset.source ? v->as.dataset.source->name : v->as.dataset.name;
    char list[256] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < v->as.dataset.count && used < sizeof list - 64; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s.%s", i ? ", " : "", name ? name : "data",
                                 v->as.dataset.fields[i].name);
    (void)e;
    diag_note(span, "a data set's tensors are its fields: %s", list);
}

/* Whether the text of `call` holds `()`: a unit written as an argument. */
static bool call_writes_unit(Span call) {
    const char *text = source_get(call.file)->text;
    for (uint32_t i = call.start; i + 1 < call.end; i++)
        if (text[i] == '(') {
            uint32_t j = i + 1;
            while (j < call.end && (text[j] == ' ' || text[j] == '\t')) j++;
            if (j < call.end && text[j] == ')') return true;
        }
    return false;
}

Tensor *as_tensor(Elab *e, Value *v, Span span, const char *what) {
    switch (v->kind) {
    case V_TENSOR: return v->as.tensor;
    case V_OPTION: return option_tensor(e, v, span);
    case V_INT:
    case V_FLOAT: return scalar_literal(e, number_of(v), span, 0);
    case V_ERROR: return NULL;
    default:
        diag_error(span, "%s needs a tensor here, but this is %s", what, kind_noun(v));
        note_data_fields(e, v, span);
        if (v->kind == V_INDEX)
            diag_note(span, "'!@%s' is the value of '%s' as a one-cell tensor", v->as.index.name, v->as.index.name);
        /* `softmax () x`: a library function of tensors alone given a layer's (); without a `()`
         * written at the call, an optional argument left out (its value is ()) */
        if (v->kind == V_UNIT && span_in_stdlib(span) && e->user_call.file && !span_in_stdlib(e->user_call)) {
            const char *name = e->user_call_name ? e->user_call_name : "this function";
            /* The name the call is written with: a layer already made (`l () x`, l = linear …
             * ()) is called by its own name, and the fix is `l x`, not `linear x`. */
            const char *text = source_get(e->user_call.file)->text;
            uint32_t start = e->user_call.start, end = start;
            while (end < e->user_call.end && (isalnum((unsigned char)text[end]) || text[end] == '_' ||
                                              text[end] == '.' || text[end] == '\''))
                end++;
            int head = (int)(end - start);
            uint32_t last = end; /* the name's last part: `Nn.softmax` is softmax */
            while (last > start && text[last - 1] != '.') last--;
            bool made = head > 0 && ((size_t)(end - last) != strlen(name) || strncmp(text + last, name, end - last) != 0);
            if (call_writes_unit(e->user_call) && made)
                diag_note(e->user_call, "'%.*s' is a layer '%s' made, and takes its tensors directly: its '()' was given "
                          "when it was made: %.*s x", head, text + start, name, head, text + start);
            else if (call_writes_unit(e->user_call))
                diag_note(e->user_call, "'%s' takes its tensors directly, with no '()' before them (a layer's '()' "
                          "makes its parameters): %s x", name, e->user_call_name ? e->user_call_name : "f");
            else
                diag_note(e->user_call, "an optional argument that this application of '%s' leaves out is () there: "
                          "its documentation says which arguments go together", name);
        }
        return NULL;
    }
}

/* ---- Errors -------------------------------------------------------------------------------- */

Value *fail(Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_verror(span, fmt, ap);
    va_end(ap);
    return &error_value;
}

void set_user_call(Elab *e, Span call, const char *name) {
    e->user_call = call;
    e->user_call_name = name;
    diag_set_user_call(call, name);
}

/* ---- Scopes -------------------------------------------------------------------------------- */

Scope *new_scope(Elab *e, const char *fn_name, bool toplevel) {
    Scope *s = arena_alloc(e->arena, sizeof *s);
    s->id = e->scope_count;
    s->fn_name = fn_name;
    s->toplevel = toplevel;
    ARENA_PUSH(e->arena, e->scopes, e->scope_count, e->scope_cap, s);
    return s;
}

/* The captured name `name` of scope s, created on first mention (the pointer is valid until the
 * next capture of the scope is created). */
ScopeDim *scope_dim(Elab *e, Scope *s, const char *name, Span span) {
    for (uint32_t i = 0; i < s->dim_count; i++)
        if (strcmp(s->dims[i].name, name) == 0) return &s->dims[i];
    ScopeDim d = {name, shape_fresh_dim(e->solver, origin(e, span, "captured dimension '%s'", name)), 0, false,
                  {0, 0, 0}};
    ARENA_PUSH(e->arena, s->dims, s->dim_count, s->dim_cap, d);
    return &s->dims[s->dim_count - 1];
}

/* The parameter scope of the code being elaborated; at the top level, one per item. */
Scope *current_scope(Elab *e) {
    if (!e->scope) e->scope = new_scope(e, NULL, true);
    return e->scope;
}
