/* builtins.c — the built-in functions of the compile-time language (docs/language.md §3.2.6,
 * §3.5.3): constant tensors (`ones`, `zeros`), index values, data sources (generated point sets,
 * `.npy` and CSV files, `range`), lists and parameters (`params`, `length`, `nth`, `iota`, …), and
 * parameter initialisers (`uniform`, `normal`, Xavier, Kaiming); bind_builtins() puts them in the
 * global environment.
 *
 * Requires: elab_internal.h. */
#include "elab/elab_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "front/parse.h"

/* ---- Builtins ------------------------------------------------------------------------------ */

static Value *constant_tensor(Elab *e, Arg *args, uint32_t count, Span span, double fill, const char *name) {
    if (count != 1 || args[0].label || args[0].value->kind != V_UNIT)
        return fail(span, "'%s' is applied to () and makes a tensor whose shape the context decides", name);
    Tensor *t = new_tensor(e, TENSOR_CONSTANT, span);
    t->shape = shape_fresh(e->solver, origin(e, span, "'%s ()'", name));
    t->values = arena_alloc(e->arena, sizeof *t->values);
    t->values[0] = fill;
    t->value_count = 1;
    return tensor_value(e, t);
}

static Value *builtin_ones(Elab *e, Arg *args, uint32_t count, Span span) {
    return constant_tensor(e, args, count, span, 1.0, "ones");
}
static Value *builtin_zeros(Elab *e, Arg *args, uint32_t count, Span span) {
    return constant_tensor(e, args, count, span, 0.0, "zeros");
}

static const Arg *find_arg(Arg *args, uint32_t count, const char *label) {
    for (uint32_t i = 0; i < count; i++)
        if (args[i].label && strcmp(args[i].label, label) == 0) return &args[i];
    return NULL;
}

static bool int_arg(Arg *args, uint32_t count, const char *label, Span span, const char *fn,
                    int64_t dflt, bool required, int64_t *out) {
    const Arg *a = find_arg(args, count, label);
    if (!a) {
        if (required) {
            diag_error(span, "'%s' needs ~%s", fn, label);
            return false;
        }
        *out = dflt;
        return true;
    }
    if (a->value->kind != V_INT) {
        diag_error(a->span, "~%s of '%s' must be an integer, but this is %s", label, fn, kind_noun(a->value));
        return false;
    }
    *out = a->value->as.i;
    return true;
}

/* A new index symbol (an `index` item, or a loop counter of `main`): `span` is its range as
 * written, `item` the whole item. */
Value *index_value(Elab *e, const char *name, int64_t range, Span span, Span item, bool counter) {
    Program *p = e->program;
    const char *base = name; /* unique: a loop counter may reuse a name */
    for (uint32_t k = 2, clash = 1; clash; k++) {
        clash = 0;
        for (uint32_t i = 0; i < p->index_count && !clash; i++) clash = strcmp(p->indexes[i].name, name) == 0;
        if (clash) name = arena_printf(e->arena, "%s#%u", base, k);
    }
    Value *v = new_value(e, V_INDEX);
    v->as.index.name = name;
    v->as.index.range = (uint32_t)range;
    v->as.index.span = span;
    v->as.index.id = p->index_count;
    v->as.index.counter = counter;
    ARENA_PUSH(e->arena, p->indexes, p->index_count, p->index_cap, ((IndexSymbol){name, range, span, item, counter}));
    return v;
}

/* ---- Data sources (docs/language.md §3.2.6) ---------------------------------------------------- */

/* No label is given twice (the builtins read the first, so the second would be ignored). */
static bool labels_once(const Arg *args, uint32_t count, const char *fn) {
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t j = 0; args[i].label && j < i; j++)
            if (args[j].label && strcmp(args[j].label, args[i].label) == 0) {
                diag_error(args[i].span, "%s's parameter ~%s is given twice", fn, args[i].label);
                diag_note(args[j].span, "first given here");
                return false;
            }
    return true;
}

/* Every argument is labelled with one of `allowed` ("~count ~noise"), each once; with
 * `path_first`, the first may be positional. */
static bool check_labels(Arg *args, uint32_t count, const char *fn, const char *allowed, bool path_first) {
    if (!labels_once(args, count, fn)) return false;
    for (uint32_t i = 0; i < count; i++) {
        const char *l = args[i].label;
        if (!l && path_first && i == 0) continue;
        char want[64], padded[160];
        snprintf(want, sizeof want, " ~%s ", l ? l : "");
        snprintf(padded, sizeof padded, " %s ", allowed);
        if (!l || !strstr(padded, want)) {
            diag_error(args[i].span, "'%s' takes %s%s", fn, path_first ? "a path and " : "", allowed);
            return false;
        }
    }
    return true;
}

static bool number_arg(Arg *args, uint32_t count, const char *label, const char *fn, double dflt, double *out) {
    const Arg *a = find_arg(args, count, label);
    *out = dflt;
    if (!a) return true;
    if (!is_number(a->value)) {
        diag_error(a->span, "~%s of '%s' must be a number, but this is %s", label, fn, kind_noun(a->value));
        return false;
    }
    *out = number_of(a->value);
    return true;
}

static DataSource *new_source(Elab *e, const char *generator, Span span) {
    DataSource *d = arena_alloc(e->arena, sizeof *d);
    d->generator = generator;
    d->span = span;
    return d;
}

static Tensor *data_tensor(Elab *e, DataSource *d, uint32_t field, Span span) {
    Tensor *t = new_tensor(e, TENSOR_DATA, span);
    t->source = d;
    t->field = field;
    d->fields[field] = t;
    if (d->field_count <= field) d->field_count = field + 1;
    return t;
}

/* An option used as a tensor: a one-cell f64 data tensor (generator "option") that the runtime
 * fills with the option's value when the state is made; one per option, shared by every use.
 * Its reads take the type of the values they meet, as a written number does (ir/assign.c). */
Tensor *option_tensor(Elab *e, const Value *v, Span span) {
    ProgramOption *o = &e->program->options[v->as.option.id];
    if (v->as.option.offset) {
        diag_error(span, "'%s' plus an integer is a loop bound of main; in a tensor expression, write the "
                   "arithmetic on the tensor ('%s' is a one-cell tensor there)", o->name, o->name);
        return NULL;
    }
    if (o->tensor) return o->tensor;
    DataSource *d = new_source(e, "option", o->span);
    d->name = d->path = o->name;
    d->option = v->as.option.id;
    Tensor *t = data_tensor(e, d, 0, o->span);
    t->dtype = TSR_DTYPE_F64; /* the value exactly (an integer option up to 2^53 too) */
    OriginId why = origin(e, o->span, "option '%s'", o->name);
    t->shape = closed_shape(e, o->span, arena_printf(e->arena, "option '%s'", o->name));
    Dim unit = dim_unit(why);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &unit, 1, why);
    ARENA_PUSH(e->arena, e->program->sources, e->program->source_count, e->program->source_cap, d);
    return o->tensor = t;
}

/* half_moons / circles / spirals ~count ~noise ~seed ~batches (~factor) (~dtype): two classes of
 * 2-D points, fields `points` (batches, count/batches | 2) and `labels` (… | 1, values ±1), both
 * of ~dtype (f32 by default; the runtime's f32 points widened to f64 or rounded to bf16 or f16). */
static Value *point_set(Elab *e, const char *fn, Arg *args, uint32_t count, Span span) {
    bool circles = strcmp(fn, "circles") == 0;
    if (!check_labels(args, count, fn,
                      circles ? "~count ~noise ~seed ~batches ~factor ~dtype" : "~count ~noise ~seed ~batches ~dtype", false))
        return &error_value;
    uint8_t dtype = TSR_DTYPE_F32;
    const Arg *typed = find_arg(args, count, "dtype");
    if (typed && !dtype_of_value(typed->value, typed->span, arena_printf(e->arena, "'%s'", fn), &dtype))
        return &error_value;
    if (tsr_dtype_integer(dtype)) /* the points are fractions */
        return fail(typed->span, "'%s' makes points with fractional coordinates, which %s cannot hold: ~dtype is "
                    "\"f32\", \"f64\", \"bf16\" or \"f16\" (convert the labels with to_i32 where integers are needed)", fn,
                    ir_dtype_word(dtype));
    int64_t n, batches, seed;
    double noise, factor;
    if (!int_arg(args, count, "count", span, fn, 0, true, &n) ||
        !int_arg(args, count, "batches", span, fn, 1, false, &batches) ||
        !int_arg(args, count, "seed", span, fn, 0, false, &seed) ||
        !number_arg(args, count, "noise", fn, 0.0, &noise) || !number_arg(args, count, "factor", fn, 0.5, &factor))
        return &error_value;
    if (n < 1 || batches < 1 || n % batches != 0 || n > INT32_MAX)
        return fail(span, "'%s' needs ~count a positive multiple of ~batches, below 2^31 (%lld and %lld)", fn,
                    (long long)n, (long long)batches);
    if (noise < 0) return fail(find_arg(args, count, "noise")->span, "~noise of '%s' must not be negative", fn);
    if (circles && !(factor > 0 && factor < 1))
        return fail(find_arg(args, count, "factor")->span, "~factor of 'circles' must be between 0 and 1");
    DataSource *d = new_source(e, fn, span);
    d->count = n;
    d->seed = seed;
    d->noise = noise;
    d->factor = factor;
    Value *v = new_value(e, V_DATASET);
    v->as.dataset.count = 2;
    v->as.dataset.source = d;
    v->as.dataset.fields = arena_alloc(e->arena, 2 * sizeof(Field));
    const char *names[2] = {"points", "labels"};
    for (uint32_t f = 0; f < 2; f++) {
        Tensor *t = data_tensor(e, d, f, span);
        t->dtype = dtype;
        OriginId o = origin(e, span, "the %s of '%s'", names[f], fn);
        t->shape = closed_shape(e, span, names[f]);
        Dim b[2];
        uint32_t nb = 0;
        if (batches > 1) b[nb++] = dim_ground((uint32_t)batches, BASIS_DEFAULT, o);
        b[nb++] = dim_ground((uint32_t)(n / batches), BASIS_DEFAULT, o);
        Dim out = dim_ground(f == 0 ? 2 : 1, BASIS_DEFAULT, o);
        t->shape.rows[ROW_BATCH] = shape_closed_row(e->solver, b, nb, o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &out, 1, o);
        v->as.dataset.fields[f] = (Field){names[f], tensor_value(e, t)};
    }
    return v;
}

static Value *builtin_half_moons(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "half_moons", args, count, span);
}
static Value *builtin_circles(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "circles", args, count, span);
}
static Value *builtin_spirals(Elab *e, Arg *args, uint32_t count, Span span) {
    return point_set(e, "spirals", args, count, span);
}

/* The shape of a one-tensor source: ~b ~i ~o lists of sizes (each optional, at least one). */
static bool source_shape(Elab *e, const char *fn, Arg *args, uint32_t count, Span span, Shape *out) {
    *out = closed_shape(e, span, fn);
    static const char *labels[ROW_KINDS] = {"b", "i", "o"};
    static const RowKind kinds[ROW_KINDS] = {ROW_BATCH, ROW_INPUT, ROW_OUTPUT};
    bool any = false;
    for (int k = 0; k < ROW_KINDS; k++) {
        const Arg *a = find_arg(args, count, labels[k]);
        if (!a) continue;
        any = true;
        if (a->value->kind != V_LIST) {
            diag_error(a->span, "~%s of '%s' takes a list of sizes, e.g. ~%s:[ 16 ]", labels[k], fn, labels[k]);
            return false;
        }
        uint32_t n = a->value->as.list.count;
        Dim *dims = arena_alloc(e->arena, (n ? n : 1) * sizeof *dims);
        OriginId o = origin(e, a->span, "the %s sizes given to '%s' here", logic_row_names[kinds[k]], fn);
        for (uint32_t i = 0; i < n; i++) {
            Value *x = a->value->as.list.items[i];
            if (x->kind == V_RUNTIME_SIZE) { /* a .npy file's length: named after the item later */
                if (strcmp(fn, "npy") != 0 && strcmp(fn, "tokens") != 0 && strcmp(fn, "bytes") != 0) {
                    diag_error(a->span, "~%s of '%s' cannot be a run-time size '?': only a .npy file, a token file "
                               "or a text file gives its length when the program runs", labels[k], fn);
                    return false;
                }
                dims[i] = runtime_size_dim(e, a->span, fn, labels[k][0], i, n, false);
                continue;
            }
            /* `(5 : idx)`, a size with a basis as in an inline definition, arrives evaluated:
             * a one-cell literal whose axis carries the basis. */
            uint32_t basis = BASIS_DEFAULT;
            double size = x->kind == V_INT ? (double)x->as.i : 0;
            if (x->kind == V_TENSOR && x->as.tensor->kind == TENSOR_LITERAL && x->as.tensor->value_count == 1 &&
                x->as.tensor->shape.rows[ROW_OUTPUT].count == 1 &&
                x->as.tensor->shape.rows[ROW_OUTPUT].dims[0].basis != BASIS_DEFAULT) {
                basis = x->as.tensor->shape.rows[ROW_OUTPUT].dims[0].basis; /* BASIS_NONE: (1 : _) */
                size = x->as.tensor->values[0];
            }
            if (size < 1 || size > INT32_MAX || size != (double)(uint32_t)size || (basis == BASIS_NONE && size != 1)) {
                diag_error(a->span, "~%s of '%s' takes positive integer sizes below 2^31, each optionally with "
                           "a basis as in (5 : idx), or (1 : _) for a broadcastable unit", labels[k], fn);
                return false;
            }
            dims[i] = dim_ground((uint32_t)size, basis, o);
        }
        out->rows[kinds[k]] = shape_closed_row(e->solver, dims, n, o);
    }
    if (!any) {
        diag_error(span, "'%s' needs the shape of its tensor: ~b, ~i and/or ~o lists of sizes, e.g. ~b:[100] ~o:[2]",
                   fn);
        return false;
    }
    return true;
}

/* A tokens item's shape (written, so closed): rows of windows, the last axis a window's tokens,
 * at least 2 (a window holds the inputs and, one on, their targets).  False when reported. */
static bool check_token_windows(const char *fn, const Shape *shape, Arg *args, uint32_t count, Span span) {
    uint32_t axes = 0;
    Dim last = {0};
    for (int k = 0; k < ROW_KINDS; k++) {
        axes += shape->rows[k].count;
        if (shape->rows[k].count) last = shape->rows[k].dims[shape->rows[k].count - 1];
    }
    const Arg *o = find_arg(args, count, "o");
    Span at = o ? o->span : span;
    if (axes < 2) {
        diag_error(at, "'%s' makes rows of windows: it needs a window's axis and at least one axis of windows "
                   "(~b:[8] ~o:[65]: 8 windows of 65 tokens)", fn);
        return false;
    }
    if (!last.var && !last.runtime && last.size < 2) {
        diag_error(at, "a window of %u token%s is too short: the last axis of '%s' holds a window's inputs and the "
                   "next token, at least 2", last.size, last.size == 1 ? "" : "s", fn);
        return false;
    }
    return true;
}

/* npy "file.npy" / csv "file.csv" / range / uniform ~seed, each with ~b ~i ~o (and ~dtype but for
 * uniform): one tensor.  tokens "file.bin" ~b ~o (~windows ~seed): an i32 tensor of windows of a
 * token file; bytes "file.txt", the same of any file, each byte a token 0 … 255
 * (docs/language.md §3.2.6). */
static Value *single_source(Elab *e, const char *fn, Arg *args, uint32_t count, Span span) {
    bool tokens = strcmp(fn, "tokens") == 0 || strcmp(fn, "bytes") == 0;
    bool file = strcmp(fn, "npy") == 0 || strcmp(fn, "csv") == 0 || tokens;
    bool seeded = strcmp(fn, "uniform") == 0;
    if (!check_labels(args, count, fn, seeded ? "~seed ~b ~i ~o ~dtype" : tokens ? "~b ~o ~windows ~seed" : "~b ~i ~o ~dtype", file))
        return &error_value;
    DataSource *d = new_source(e, fn, span);
    uint8_t dtype = tokens ? TSR_DTYPE_I32 : TSR_DTYPE_F32;
    const Arg *typed = find_arg(args, count, "dtype");
    if (typed && !dtype_of_value(typed->value, typed->span, arena_printf(e->arena, "'%s'", fn), &dtype))
        return &error_value;
    if (seeded && tsr_dtype_integer(dtype)) /* its numbers are fractions */
        return fail(typed->span, "'uniform' draws numbers in [-1, 1), which %s cannot hold: ~dtype is \"f32\", "
                    "\"f64\", \"bf16\" or \"f16\" (for integers, convert with to_i32 or use range)", ir_dtype_word(dtype));
    if (tokens) {
        const Arg *w = find_arg(args, count, "windows");
        bool random = w && w->value->kind == V_STRING && strcmp(w->value->as.str.text, "random") == 0;
        if (w && !random && (w->value->kind != V_STRING || strcmp(w->value->as.str.text, "sequential") != 0))
            return fail(w->span, "~windows of '%s' is \"sequential\" (the file's windows in order, each starting "
                        "where the last one's targets end) or \"random\" (windows starting anywhere, drawn anew by "
                        "each shuffle)", fn);
        d->count = random;
        if (!int_arg(args, count, "seed", span, fn, 0, false, &d->seed)) return &error_value;
        if (find_arg(args, count, "seed") && !random)
            return fail(find_arg(args, count, "seed")->span, "~seed of '%s' draws random windows: it needs "
                        "~windows:\"random\"", fn);
    }
    if (file) {
        if (count == 0 || args[0].label || args[0].value->kind != V_STRING)
            return fail(count ? args[0].span : span, "'%s' takes the file's path first, as a string: %s \"data.%s\" ~b:[…]",
                        fn, fn, fn);
        d->path = args[0].value->as.str.text;
        if (args[0].value->as.str.len == 0 || strlen(d->path) != args[0].value->as.str.len)
            return fail(args[0].span, "the path of '%s' must be a non-empty string without NUL bytes", fn);
    }
    if (seeded && !int_arg(args, count, "seed", span, fn, 0, false, &d->seed)) return &error_value;
    Shape shape;
    if (!source_shape(e, fn, args, count, span, &shape)) return &error_value;
    if (tokens && !check_token_windows(fn, &shape, args, count, span)) return &error_value;
    Tensor *t = data_tensor(e, d, 0, span);
    t->shape = shape;
    t->dtype = dtype;
    Value *v = new_value(e, V_DATASET);
    v->as.dataset.source = d;
    v->as.dataset.count = 1;
    v->as.dataset.fields = arena_alloc(e->arena, sizeof(Field));
    v->as.dataset.fields[0] = (Field){NULL, tensor_value(e, t)};
    return v;
}

static Value *builtin_npy(Elab *e, Arg *args, uint32_t count, Span span) { return single_source(e, "npy", args, count, span); }
static Value *builtin_tokens(Elab *e, Arg *args, uint32_t count, Span span) {
    return single_source(e, "tokens", args, count, span);
}
static Value *builtin_bytes(Elab *e, Arg *args, uint32_t count, Span span) {
    return single_source(e, "bytes", args, count, span);
}
static Value *builtin_csv(Elab *e, Arg *args, uint32_t count, Span span) { return single_source(e, "csv", args, count, span); }
static Value *builtin_range(Elab *e, Arg *args, uint32_t count, Span span) {
    return single_source(e, "range", args, count, span);
}
/* ---- Lists and parameters (what an optimiser iterates over) ---------------------------------- */

static void collect_params(Elab *e, Tensor *t, bool all, bool *seen, Value *list, uint32_t *cap) {
    if (seen[t->id]) return;
    seen[t->id] = true;
    if (t->kind == TENSOR_PARAM) {
        ARENA_PUSH(e->arena, list->as.list.items, list->as.list.count, *cap, tensor_value(e, t));
        return;
    }
    if (!all && t->kind == TENSOR_OP && (t->op->flag & OP_NO_GRADIENT)) return; /* no gradient passes */
    for (uint32_t i = 0; i < t->operand_count; i++) collect_params(e, t->operands[i], all, seen, list, cap);
}

/* params t: the parameters t's gradient reaches (those a backprop of t trains: not through an
 * operation declared `backward none`, stop_gradient's, argmax's), as a list, each once, in the
 * order a depth-first walk of its operands (left to right) meets them; params ~all:true t: every
 * parameter t depends on. */
static Value *builtin_params(Elab *e, Arg *args, uint32_t count, Span span) {
    const Arg *tensor = NULL, *all = NULL;
    bool bad = false;
    for (uint32_t i = 0; i < count; i++) {
        if (!args[i].label && !tensor) tensor = &args[i];
        else if (args[i].label && !strcmp(args[i].label, "all") && !all) all = &args[i];
        else bad = true;
    }
    if (bad || !tensor || tensor->value->kind != V_TENSOR || (all && all->value->kind != V_BOOL))
        return fail(span, "'params' takes one tensor, and ~all:true for every parameter it depends on: params loss");
    Value *list = new_value(e, V_LIST);
    uint32_t cap = 0;
    bool *seen = arena_alloc(e->arena, (e->program->tensor_count + 1) * sizeof *seen);
    collect_params(e, tensor->value->as.tensor, all && all->value->as.b, seen, list, &cap);
    return list;
}

/* is_tensor x: whether x is a tensor (an optimiser's ~lr may be a number or a schedule tensor). */
static Value *builtin_is_tensor(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_tensor' takes one value: is_tensor x");
    return bool_value(e, args[0].value->kind == V_TENSOR);
}

/* is_bool x: whether x is true or false (the library checks its flags with it: ~causal:1 is an
 * error naming the option, not an 'if' that wants a boolean somewhere in its code). */
static Value *builtin_is_bool(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_bool' takes one value: is_bool x");
    return bool_value(e, args[0].value->kind == V_BOOL);
}

/* is_list x: x is a list or an array (what length and nth take): the library checks the lists
 * it is given with it (Nn.mlp's ~hidden). */
static Value *builtin_is_list(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_list' takes one value: is_list x");
    return bool_value(e, args[0].value->kind == V_LIST || args[0].value->kind == V_ARRAY);
}

/* is_option x: x is an `option` (plus or minus an integer), whose value is known only when the
 * program runs: the library says so where it needs a size known when compiling. */
static Value *builtin_is_option(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_option' takes one value: is_option x");
    return bool_value(e, args[0].value->kind == V_OPTION);
}

/* is_parameter x: x is a parameter (an inline definition `{ w }`, trained or a state tensor):
 * what Train's optimisers update, which check their argument with it. */
static Value *builtin_is_parameter(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_parameter' takes one value: is_parameter x");
    const Value *v = args[0].value;
    return bool_value(e, v->kind == V_TENSOR && v->as.tensor->kind == TENSOR_PARAM);
}

static Value *builtin_is_number(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_number' takes one value: is_number x");
    return bool_value(e, is_number(args[0].value));
}

/* is_whole x: x is a number known when compiling with nothing after the point (2 or 2.): the
 * library's counts (~micro, ~every, ~groups …) check theirs with it. */
static Value *builtin_is_whole(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'is_whole' takes one value: is_whole x");
    const Value *v = args[0].value;
    return bool_value(e, is_number(v) && isfinite(number_of(v)) && number_of(v) == floor(number_of(v)));
}

/* dtype_of t: the element type declared for t, "f32", "f64", "bf16", "f16" or "i32" — a
 * parameter's, an input's, a data item's or a state tensor's (written, or f32), and f32 for a
 * number or a constant.  An operation's type is inferred from its forward code after the
 * program is read (assign.c), so asking for it here is an error.  Train's optimisers keep f32
 * master weights for a parameter of a half type (stdlib/train.tsr). */
/* settled x: x itself, which its uses may not give axes its own operands do not have (an
 * operation's result grows to what its uses ask for; a library function that takes a tensor as
 * it is — a loss's logits, attention's sequence — says so with this).  Checked once the shapes
 * are closed (elab.c check_settled). */
static Value *builtin_settled(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label) return fail(span, "'settled' takes one value: settled x");
    if (args[0].value->kind == V_TENSOR) { /* anything else passes as it is, for its reader to judge */
        SettledUse use = {args[0].value->as.tensor, span, e->user_call, e->user_call_name};
        ARENA_PUSH(e->arena, e->settled, e->settled_count, e->settled_cap, use);
    }
    return args[0].value;
}

static Value *builtin_dtype_of(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label || args[0].value->kind != V_TENSOR)
        return fail(span, "'dtype_of' takes one tensor: dtype_of p");
    const Tensor *t = args[0].value->as.tensor;
    switch (t->kind) {
    case TENSOR_PARAM: case TENSOR_INPUT: case TENSOR_DATA: case TENSOR_STATE:
    case TENSOR_LITERAL: case TENSOR_CONSTANT: case TENSOR_INDEX: break;
    default:
        return fail(span, "'dtype_of' asks a parameter, an input, a data item or a state tensor: the element "
                    "type of %s is inferred from its code after the program is read (docs/language.md §3.9)",
                    t->kind == TENSOR_OP ? "an operation's result" : "this tensor");
    }
    const char *word = ir_dtype_word(t->dtype);
    Value *v = new_value(e, V_STRING);
    v->as.str.text = word;
    v->as.str.len = strlen(word);
    return v;
}

static Value *builtin_length(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 1 || args[0].label || (args[0].value->kind != V_LIST && args[0].value->kind != V_ARRAY))
        return fail(span, "'length' takes one list or array: length xs");
    return int_value(e, args[0].value->as.list.count);
}

/* error "message": reject a program at compile time; a library function's check of its
 * arguments (Nn.linear's ~over).  Inside the standard library the error is put at the user's
 * call, with the library's line as a note (as every error there: diag_set_user_call);
 * elsewhere at the `error` itself.  Its value is the error value, which every later use passes
 * on silently. */
static Value *builtin_error(Elab *e, Arg *args, uint32_t count, Span span) {
    (void)e;
    if (count != 1 || args[0].label || args[0].value->kind != V_STRING)
        return fail(span, "'error' takes one string: error \"what is wrong\"");
    return fail(span, "%s", args[0].value->as.str.text);
}

/* iota n: the tensor literal [0.; 1.; …; n-1.], one output axis of size n (one-hot encodings
 * compare class ids with it).  iota (): the same along one output axis whose size its use
 * decides (positions along an axis, Nn.rope); assign.c writes the values. */
static Value *builtin_iota(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count == 1 && !args[0].label && args[0].value->kind == V_UNIT) {
        Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
        OriginId o = origin(e, span, "'iota ()' (output axis)");
        t->shape = closed_shape(e, span, "'iota ()'");
        Dim axis = shape_fresh_dim(e->solver, o);
        t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &axis, 1, o);
        t->iota = true;
        return tensor_value(e, t);
    }
    if (count != 1 || args[0].label || args[0].value->kind != V_INT)
        return fail(span, "'iota' takes one integer or (): iota n is the tensor [0.; 1.; ...; n-1.], iota () "
                    "the same along an axis whose size its use decides");
    int64_t n = args[0].value->as.i;
    if (n < 1 || n > INT32_MAX)
        return fail(args[0].span, "'iota': the size %lld is not between 1 and %d", (long long)n, INT32_MAX);
    Tensor *t = new_tensor(e, TENSOR_LITERAL, span);
    OriginId o = origin(e, span, "'iota %lld' (output axis)", (long long)n);
    t->shape = closed_shape(e, span, "'iota'");
    Dim axis = dim_ground((uint32_t)n, BASIS_DEFAULT, o);
    t->shape.rows[ROW_OUTPUT] = shape_closed_row(e->solver, &axis, 1, o);
    t->values = arena_alloc(e->arena, (size_t)n * sizeof *t->values);
    for (int64_t i = 0; i < n; i++) t->values[i] = (double)i;
    t->value_count = (uint32_t)n;
    return tensor_value(e, t);
}

/* nth xs i: element i (from 0) of a list or array. */
static Value *builtin_nth(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 2 || args[0].label || args[1].label ||
        (args[0].value->kind != V_LIST && args[0].value->kind != V_ARRAY) || args[1].value->kind != V_INT)
        return fail(span, "'nth' takes a list or array and an integer: nth xs i");
    int64_t i = args[1].value->as.i;
    if (i < 0 || i >= (int64_t)args[0].value->as.list.count)
        return fail(args[1].span, "'nth': index %lld is outside the %u elements", (long long)i,
                    args[0].value->as.list.count);
    return args[0].value->as.list.items[i];
}

/* init n f: the list [f 0; f 1; …; f (n-1)], each application evaluated in order (OCaml's
 * List.init): a list whose length is computed (Nn.split's parts). */
static Value *builtin_init(Elab *e, Arg *args, uint32_t count, Span span) {
    if (count != 2 || args[0].label || args[1].label || args[0].value->kind != V_INT ||
        (args[1].value->kind != V_CLOSURE && args[1].value->kind != V_BUILTIN && args[1].value->kind != V_OPERATOR))
        return fail(span, "'init' takes a count and a function: init n f is the list [f 0; f 1; ...; f (n-1)]");
    int64_t n = args[0].value->as.i;
    enum { MAX_INIT = 1 << 20 };
    if (n < 0 || n > MAX_INIT)
        return fail(args[0].span, "'init': the count %lld is not between 0 and %d", (long long)n, (int)MAX_INIT);
    Value *list = new_value(e, V_LIST);
    list->as.list.count = (uint32_t)n;
    list->as.list.items = arena_alloc(e->arena, (n ? (size_t)n : 1) * sizeof(Value *));
    for (int64_t i = 0; i < n; i++) {
        Arg a = {.value = int_value(e, i), .span = args[0].span};
        Value *x = apply(e, args[1].value, &a, 1, span);
        if (x->kind == V_ERROR) return x;
        list->as.list.items[i] = x;
    }
    return list;
}

/* ---- Initialisers (docs/language.md §3.5.3) ------------------------------------------------- */

/* `fn ?label… ()`: the optional labels are the numbers `allowed` names ("~low ~high"). */
static bool initialiser_args(Arg *args, uint32_t count, const char *fn, const char *allowed, Span span) {
    uint32_t units = 0;
    if (!labels_once(args, count, fn)) return false;
    for (uint32_t i = 0; i < count; i++)
        if (!args[i].label) {
            if (args[i].value->kind != V_UNIT || units++) {
                diag_error(args[i].span, "'%s' is written '%s %s ()': its labelled arguments, then ()", fn, fn,
                           allowed);
                return false;
            }
        } else if (!check_labels(&args[i], 1, fn, allowed, false)) {
            return false;
        }
    if (!units) {
        diag_error(span, "'%s' is applied to () to make an initialiser: %s %s ()", fn, fn, allowed);
        return false;
    }
    return true;
}

static Value *initialiser(Elab *e, const char *fn, Arg *args, uint32_t count, Span span, bool normal, InitFan fan,
                          double gain_scale, double default_gain) {
    double gain;
    if (!initialiser_args(args, count, fn, "~gain", span) || !number_arg(args, count, "gain", fn, default_gain, &gain))
        return &error_value;
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = normal, .fan = fan, .scale = gain * gain_scale, .shift = 0.0};
    return v;
}

static bool has_unit_arg(Arg *args, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        if (!args[i].label && args[i].value->kind == V_UNIT) return true;
    return false;
}

/* uniform ?low ?high (): the initialiser; uniform ~seed ~b ~i ~o: the data source. */
static Value *builtin_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    if (!has_unit_arg(args, count)) return single_source(e, "uniform", args, count, span);
    double low, high;
    if (!initialiser_args(args, count, "uniform", "~low ~high", span) ||
        !number_arg(args, count, "low", "uniform", -1.0, &low) || !number_arg(args, count, "high", "uniform", 1.0, &high))
        return &error_value;
    if (!(low <= high)) return fail(span, "'uniform' needs ~low <= ~high, but they are %g and %g", low, high);
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = false, .fan = FAN_NONE, .scale = (high - low) / 2, .shift = (high + low) / 2};
    return v;
}

static Value *builtin_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    double mean, std;
    if (!initialiser_args(args, count, "normal", "~mean ~std", span) ||
        !number_arg(args, count, "mean", "normal", 0.0, &mean) || !number_arg(args, count, "std", "normal", 1.0, &std))
        return &error_value;
    if (!(std >= 0)) return fail(span, "'normal' needs ~std >= 0, but it is %g", std);
    Value *v = new_value(e, V_INIT);
    v->as.init = (RandomInit){.normal = true, .fan = FAN_NONE, .scale = std, .shift = mean};
    return v;
}

/* Xavier/Glorot: bound gain * sqrt(6 / (fan_in + fan_out)), or std gain * sqrt(2 / (…)). */
static Value *builtin_xavier_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "xavier_uniform", args, count, span, false, FAN_SUM, sqrt(6.0), 1.0);
}
static Value *builtin_xavier_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "xavier_normal", args, count, span, true, FAN_SUM, sqrt(2.0), 1.0);
}
/* Kaiming/He (fan-in mode): bound gain * sqrt(3 / fan_in), or std gain / sqrt(fan_in); the
 * default gain sqrt 2 is ReLU's. */
static Value *builtin_kaiming_uniform(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "kaiming_uniform", args, count, span, false, FAN_IN, sqrt(3.0), sqrt(2.0));
}
static Value *builtin_kaiming_normal(Elab *e, Arg *args, uint32_t count, Span span) {
    return initialiser(e, "kaiming_normal", args, count, span, true, FAN_IN, 1.0, sqrt(2.0));
}

typedef struct BuiltinEntry {
    const char *name;
    BuiltinFn fn;
} BuiltinEntry;

static const BuiltinEntry builtins[] = {
    {"ones", builtin_ones},
    {"zeros", builtin_zeros},
    {"half_moons", builtin_half_moons},
    {"circles", builtin_circles},
    {"spirals", builtin_spirals},
    {"npy", builtin_npy},
    {"tokens", builtin_tokens},
    {"bytes", builtin_bytes},
    {"csv", builtin_csv},
    {"range", builtin_range},
    {"uniform", builtin_uniform},
    {"normal", builtin_normal},
    {"params", builtin_params},
    {"length", builtin_length},
    {"is_tensor", builtin_is_tensor},
    {"is_number", builtin_is_number},
    {"is_bool", builtin_is_bool},
    {"is_list", builtin_is_list},
    {"is_option", builtin_is_option},
    {"is_parameter", builtin_is_parameter},
    {"is_whole", builtin_is_whole},
    {"dtype_of", builtin_dtype_of},
    {"settled", builtin_settled},
    {"nth", builtin_nth},
    {"init", builtin_init},
    {"iota", builtin_iota},
    {"error", builtin_error},
    {"xavier_uniform", builtin_xavier_uniform},
    {"xavier_normal", builtin_xavier_normal},
    {"kaiming_uniform", builtin_kaiming_uniform},
    {"kaiming_normal", builtin_kaiming_normal},
};

void bind_builtins(Elab *e) {
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        Value *v = new_value(e, V_BUILTIN);
        v->as.builtin.name = builtins[i].name;
        v->as.builtin.fn = builtins[i].fn;
        bind_global(e, builtins[i].name, v);
    }
}

/* set_dim NAME n: a captured dimension gets a size (NAME is a label of a capture list). */
