/* main_block.c — `main` (docs/language.md §3.2.9): the run-time statements of a program as
 * MainSteps — routine runs, prints (their formats checked here), `for` loops with option bounds
 * and progress bars, checkpoints (`save`, `load`), shuffles of data sets, recorded series and
 * their plots.
 *
 * Requires: elab_internal.h; the routines it runs are elaborated before it (code.c). */
#include "elab/elab_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---- main (docs/language.md §3.2.9) -------------------------------------------------------------- */

static const Routine *find_routine(const Program *p, const char *name, uint32_t *at) {
    for (uint32_t i = 0; i < p->routine_count; i++)
        if (!p->routines[i].hidden && strcmp(p->routines[i].name, name) == 0) {
            *at = i;
            return &p->routines[i];
        }
    return NULL;
}

static uint32_t add_routine(Elab *e, Routine r) {
    Program *p = e->program;
    ARENA_PUSH(e->arena, p->routines, p->routine_count, p->routine_cap, r);
    return p->routine_count - 1;
}

/* The text of a span, for labels. */
static const char *span_text(Elab *e, Span span) {
    const Source *src = source_get(span.file);
    return arena_printf(e->arena, "%.*s", (int)(span.end - span.start), src->text + span.start);
}

/* The largest width and precision a print conversion may have: printf needs memory in
 * proportion to them ("%.999999999f" asked for gigabytes when the program ran). */
enum { PRINT_FIELD_MAX = 1000 };

/* Reads the digits at f[*j] (up to `len`) as a width or precision; false, with an error, when
 * the number is above PRINT_FIELD_MAX. */
static bool format_field(const Node *fmt, size_t len, size_t *j, const char *what) {
    const char *f = fmt->text;
    size_t start = *j;
    uint64_t value = 0;
    for (; *j < len && f[*j] >= '0' && f[*j] <= '9'; (*j)++)
        if (value <= PRINT_FIELD_MAX) value = value * 10 + (uint64_t)(f[*j] - '0');
    if (value <= PRINT_FIELD_MAX) return true;
    diag_error(fmt->span, "the %s '%.*s' in the format of 'print' is too large (at most %d)", what,
               (int)(*j - start < 24 ? *j - start : 24), f + start, PRINT_FIELD_MAX);
    return false;
}

/* Check a print format; mark which arguments its conversions read as floats.  Conversions:
 * %[flags][width][.precision] then d i u x X o c (integer) or f F e E g G a A (floating), and %%;
 * width and precision are at most PRINT_FIELD_MAX. */
static bool check_format(const Node *fmt, PrintArg *args, uint32_t count) {
    const char *f = fmt->text;
    uint32_t used = 0;
    if (memchr(f, 0, fmt->len)) { /* printf would stop there: the rest would silently not print */
        diag_error(fmt->span, "the format of 'print' holds a NUL byte ('\\x00'), which would end it there");
        return false;
    }
    for (size_t i = 0; i < fmt->len; i++) {
        if (f[i] != '%') continue;
        if (i + 1 < fmt->len && f[i + 1] == '%') {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < fmt->len && strchr("-+ #0", f[j])) j++;
        if (!format_field(fmt, fmt->len, &j, "width")) return false;
        if (j < fmt->len && f[j] == '.') {
            j++;
            if (!format_field(fmt, fmt->len, &j, "precision")) return false;
        }
        if (j - i > 24 || j >= fmt->len || !strchr("diuxXocfFeEgGaAs", f[j])) {
            diag_error(fmt->span, "bad conversion in the format of 'print' at '%.*s': use %%d, %%x, %%c for integers, "
                       "%%f, %%e, %%g for numbers, %%s for a tensor of bytes, %%%% for a percent sign",
                       (int)(j < fmt->len ? j - i + 1 : j - i), f + i);
            return false;
        }
        if (f[j] == 's' && j != i + 1) {
            diag_error(fmt->span, "the conversion '%%s' prints a tensor's cells as bytes: it takes no flag, width or "
                       "precision ('%.*s')", (int)(j - i + 1), f + i);
            return false;
        }
        if (f[j] == 's' && used < count && (args[used].kind != PARG_TENSOR || args[used].grad)) {
            PrintArgKind kind = args[used].kind;
            diag_error(args[used].span, "%%s prints a tensor's cells as bytes (a text, as a byte-level model samples "
                       "it), but this is %s", args[used].grad ? "a gradient" : kind == PARG_INT ? "an integer"
                       : kind == PARG_INDEX ? "an index or a loop counter" : kind == PARG_OPTION ? "an option"
                       : "a number");
            return false;
        }
        size_t after_minus = i + 1 + strspn(f + i + 1, "-");
        if (f[j] == 'c' && (f[after_minus] == '0' || after_minus + strspn(f + after_minus, "0123456789") < j)) {
            diag_error(fmt->span, "the conversion '%.*s' prints a character: it takes the flag '-' and a width, "
                       "no other flag and no precision", (int)(j - i + 1), f + i);
            return false;
        }
        if (used < count && f[j] == 'c' && args[used].kind == PARG_INT &&
            (args[used].i < 0 || args[used].i > 0x10FFFF || (args[used].i >= 0xD800 && args[used].i <= 0xDFFF))) {
            diag_error(args[used].span, "%%c prints a Unicode character, but %" PRId64 " is no character's code "
                       "(0 to 0x10FFFF, without the surrogates 0xD800 to 0xDFFF)", args[used].i);
            return false;
        }
        if (used < count) {
            args[used].wants_float = strchr("fFeEgGaA", f[j]) != NULL;
            args[used].conversion = f + i;
            args[used].conversion_len = (int)(j - i + 1);
            /* A tensor's element type is known here where it is declared (an input, a data item, a
             * parameter, a literal); a computed one's (to_i32 x, d + d) is checked when it is
             * (ir/plan.c). */
            const Tensor *t = args[used].kind == PARG_TENSOR ? args[used].tensor : NULL;
            bool float_tensor = t && (args[used].grad || (t->kind != TENSOR_OP && t->kind != TENSOR_SLICE && t->kind != TENSOR_CONSTANT &&
                                                           !tsr_dtype_integer(t->dtype)));
            args[used].text = f[j] == 's';
            if (!args[used].wants_float && !args[used].text && (float_tensor || args[used].kind == PARG_FLOAT ||
                                            (args[used].kind == PARG_OPTION && args[used].float_option))) {
                diag_error(args[used].span, "the format's conversion '%.*s' is for an integer, but this is a number; "
                           "use %%f, %%e or %%g", (int)(j - i + 1), f + i);
                return false;
            }
        }
        used++;
        i = j;
    }
    if (used != count) {
        diag_error(fmt->span, "the format of 'print' has %u conversion%s but %u value%s follow%s", used,
                   used == 1 ? "" : "s", count, count == 1 ? "" : "s", count == 1 ? "s" : "");
        return false;
    }
    return true;
}

/* Whether `n` is integer arithmetic (+ - * /, unary -) on integers known at compile time
 * and integer options, an option only added or subtracted (`code + 1`, `epochs - 1`): print
 * shows such a value as an integer, folded or read when the program runs as a loop bound is,
 * where a tensor expression would make a one-cell f32 tensor of it (which %d refuses). Sets
 * *has_option when an option is in it. */
static bool integer_expression(Elab *e, const Node *n, Env *env, bool *has_option) {
    if (n->kind == NODE_INT) return true;
    if (n->kind == NODE_VAR) {
        const Value *v = lookup(e, env, n->name);
        bool option = v && ((v->kind == V_OPTION && !e->program->options[v->as.option.id].is_float) || v->kind == V_INDEX);
        *has_option |= option;
        return v && (v->kind == V_INT || option);
    }
    if (n->kind == NODE_UNOP && strcmp(n->name, "-") == 0) {
        bool option = false;
        return integer_expression(e, n->a, env, &option) && !option;
    }
    if (n->kind != NODE_BINOP) return false;
    bool left = false, right = false;
    bool sum = strcmp(n->name, "+") == 0, difference = strcmp(n->name, "-") == 0;
    bool product = strcmp(n->name, "*") == 0 || strcmp(n->name, "/") == 0;
    if (!(sum || difference || product) || !integer_expression(e, n->a, env, &left) ||
        !integer_expression(e, n->b, env, &right))
        return false;
    *has_option |= left || right;
    return sum || (difference && !right) || (product && !left && !right);
}

/* Whether n is an integer option, or a number (written, or a variable of one). */
static bool option_or_number(Elab *e, const Node *n, Env *env, bool *option) {
    if (n->kind == NODE_INT || n->kind == NODE_FLOAT) return true;
    const Value *v = n->kind == NODE_VAR ? lookup(e, env, n->name) : NULL;
    if (v && v->kind == V_OPTION && !e->program->options[v->as.option.id].is_float) return *option = true;
    return v && (v->kind == V_INT || v->kind == V_FLOAT);
}

/* The first product or quotient (`*`, `/`) in n of an integer option and a number or another
 * such option (`epochs * 2`), or NULL. */
static const Node *option_product(Elab *e, const Node *n, Env *env) {
    if (n->kind == NODE_UNOP) return option_product(e, n->a, env);
    if (n->kind != NODE_BINOP) return NULL;
    bool option = false;
    if ((strcmp(n->name, "*") == 0 || strcmp(n->name, "/") == 0) && option_or_number(e, n->a, env, &option) &&
        option_or_number(e, n->b, env, &option) && option)
        return n;
    const Node *left = option_product(e, n->a, env);
    return left ? left : option_product(e, n->b, env);
}

static void main_print(Elab *e, const Node *n, Env *env, MainList *out) {
    MainStep step = {.kind = MAIN_PRINT, .span = n->span, .routine = UINT32_MAX};
    uint32_t count = n->list.count;
    const Node *fmt = count ? n->list.items[0] : NULL;
    bool formatted = fmt && fmt->kind == NODE_STRING;
    if (!count || (!formatted && count != 1)) {
        diag_error(n->span, "'print' takes a format and its values (print \"loss %%.4f\" loss) or one tensor (print w)");
        return;
    }
    uint32_t first = formatted ? 1 : 0;
    step.arg_count = count - first;
    step.args = arena_alloc(e->arena, (step.arg_count ? step.arg_count : 1) * sizeof *step.args);
    uint32_t fresh_from = e->program->tensor_count;
    Routine compute = {.name = arena_printf(e->arena, "main.print@%u", n->span.start), .span = n->span, .hidden = true};
    for (uint32_t i = 0; i < step.arg_count; i++) {
        const Node *a = n->list.items[first + i];
        PrintArg *p = &step.args[i];
        p->span = a->span;
        if (a->kind == NODE_ARG) {
            diag_error(a->span, "'print' takes no labelled arguments");
            return;
        }
        if (a->kind == NODE_FIELD && strcmp(a->name, "grad") == 0) { /* print p.grad: the gradient as it is */
            Tensor *t;
            bool grad;
            if (!code_tensor(e, a, env, &t, &grad)) return;
            *p = (PrintArg){.kind = PARG_TENSOR, .tensor = t, .grad = true, .span = a->span};
            continue;
        }
        bool has_option = false;
        bool integer = integer_expression(e, a, env, &has_option);
        const Node *product = integer ? NULL : option_product(e, a, env);
        if (product) { /* as a tensor expression `epochs * 2` would be a matrix product of a one-cell tensor */
            diag_error(product->span, "'%s' on an integer option in print: an option's value is known only when the "
                       "program runs, so print folds an option plus or minus an integer, and no other arithmetic",
                       product->name);
            diag_note(product->span, "for the %s, multiply as numbers in a tensor and print that with %%g: '*.' and "
                      "'/.' (print \"%%g\" (n *. 2))", strcmp(product->name, "*") == 0 ? "product" : "quotient");
            return;
        }
        Value *v = eval(e, a, env, integer ? MODE_VALUE : MODE_TENSOR);
        if (v->kind == V_ERROR) return;
        switch (v->kind) {
        case V_INT: p->kind = PARG_INT; p->i = v->as.i; break;
        case V_FLOAT: p->kind = PARG_FLOAT; p->f = v->as.f; break;
        case V_INDEX: p->kind = PARG_INDEX; p->index = v->as.index.id; p->i = v->as.index.offset; break;
        case V_OPTION:
            p->kind = PARG_OPTION;
            p->index = v->as.option.id;
            p->float_option = e->program->options[p->index].is_float;
            p->i = v->as.option.offset;
            break;
        case V_TENSOR:
            if (v->as.tensor->kind == TENSOR_INDEX) { /* !@i */
                const char *index = v->as.tensor->index;
                if (a->kind == NODE_VAR) /* let%op e = !@i, then print e */
                    diag_error(a->span, "'%s' is '!@%s', index %s's value as a tensor: print the index itself ('%s'), "
                               "or a tensor computed from it", a->name, index, index, index);
                else diag_error(a->span, "print the index itself ('%s'), not '!@%s'", index, index);
                return;
            }
            p->kind = PARG_TENSOR;
            p->tensor = v->as.tensor;
            if (p->tensor->id >= fresh_from)
                add_step(e, &compute, (CodeStep){.kind = STEP_COMPUTE, .tensor = p->tensor, .fresh_from = fresh_from,
                                                 .span = a->span});
            break;
        default:
            diag_error(a->span, "'print' prints numbers, index symbols and tensors, but this is %s", kind_noun(v));
            return;
        }
    }
    if (formatted) {
        if (!check_format(fmt, step.args, step.arg_count)) return;
        step.format = fmt->text;
    } else {
        if (step.args[0].kind != PARG_TENSOR) {
            diag_error(step.args[0].span, "without a format, 'print' prints a tensor as a grid; use a format to print "
                       "a number: print \"%%d\" i");
            return;
        }
        step.label = span_text(e, step.args[0].span);
    }
    if (compute.step_count) step.routine = add_routine(e, compute);
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* A bound of a loop of main: an integer, or an integer option plus an integer (read at run time). */
static bool loop_bound(Elab *e, const Node *n, Value *v, int64_t *value, uint32_t *option) {
    *option = UINT32_MAX;
    if (v->kind == V_INT) {
        *value = v->as.i;
        return true;
    }
    if (v->kind == V_OPTION && !e->program->options[v->as.option.id].is_float) {
        *option = v->as.option.id;
        *value = v->as.option.offset;
        return true;
    }
    if (v->kind != V_ERROR)
        diag_error(n->span, "the bounds of a loop in 'main' must be integers known at compile time or integer "
                   "options, but this is %s", v->kind == V_OPTION ? "an option that is a number" : kind_noun(v));
    return false;
}

static void main_for(Elab *e, const Node *n, Env *env, MainList *out, bool progress) {
    Value *from = eval(e, n->a, env, MODE_VALUE), *to = eval(e, n->b, env, MODE_VALUE);
    MainStep step = {.kind = MAIN_FOR, .span = n->span, .down = n->flag == 1, .progress = progress, .label = n->name};
    if (!loop_bound(e, n->a, from, &step.from, &step.from_option) | !loop_bound(e, n->b, to, &step.to, &step.to_option))
        return;
    bool at_run_time = step.from_option != UINT32_MAX || step.to_option != UINT32_MAX;
    int64_t lo = step.down ? step.to : step.from, hi = step.down ? step.from : step.to;
    Value *sym = lookup(e, env, n->name);
    if (sym && sym->kind == V_INDEX) {
        if (!at_run_time && lo <= hi && (lo < 0 || hi >= sym->as.index.range)) {
            diag_error(lo < 0 ? (step.down ? n->b : n->a)->span : (step.down ? n->a : n->b)->span,
                       "the loop runs '%s' over %lld..%lld, outside its range 0..%u", n->name, (long long)lo,
                       (long long)hi, sym->as.index.range - 1);
            diag_note(sym->as.index.span, "the range of '%s'", n->name);
            return;
        }
    } else if (at_run_time) { /* checked when the loop starts: counts from 0 up */
        sym = index_value(e, n->name, INT64_MAX, n->span, n->span, true);
    } else {
        if (lo <= hi && lo < 0) {
            diag_error(n->span, "a loop counter of 'main' counts from 0 up (this loop reaches %lld)", (long long)lo);
            return;
        }
        /* The counter's range is hi + 1 values, saturated where hi is the largest 64-bit integer. */
        sym = index_value(e, n->name, hi >= lo && hi >= 0 ? (hi < INT64_MAX ? hi + 1 : INT64_MAX) : 1, n->span, n->span, true);
    }
    step.index = sym->as.index.id;
    MainList body = {0};
    elab_main(e, n->c, env_bind(e, env, n->name, sym), &body);
    step.body = body.items;
    step.body_count = body.count;
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* save "file.npz" [p; …] and load "file.npz" [p; …]: a checkpoint of the listed parameters,
 * or of every parameter. */
static void main_checkpoint(Elab *e, const Node *n, Env *env, MainList *out, MainStepKind kind) {
    const char *verb = kind == MAIN_SAVE ? "save" : "load";
    uint32_t count = n->list.count;
    const Node *file = count ? n->list.items[0] : NULL, *list = count == 2 ? n->list.items[1] : NULL;
    if (!file || file->kind != NODE_STRING || count > 2 || (list && list->kind != NODE_LIST)) {
        diag_error(n->span, "'%s' takes a file name and optionally a list of parameters: %s \"model.npz\" or "
                   "%s \"model.npz\" [w; b]", verb, verb, verb);
        return;
    }
    if (file->len == 0 || memchr(file->text, 0, file->len)) {
        diag_error(file->span, "the file of '%s' needs a name", verb);
        return;
    }
    MainStep step = {.kind = kind, .span = n->span, .routine = UINT32_MAX, .text = file->text};
    if (list) {
        if (list->list.count == 0) {
            diag_error(list->span, "the list of '%s' is empty; leave it out to %s every parameter", verb, verb);
            return;
        }
        step.tensor_count = list->list.count;
        step.tensors = arena_alloc(e->arena, step.tensor_count * sizeof *step.tensors);
        for (uint32_t i = 0; i < step.tensor_count; i++) {
            const Node *a = list->list.items[i];
            Value *v = eval(e, a, env, MODE_TENSOR);
            if (v->kind == V_ERROR) return;
            if (v->kind != V_TENSOR || v->as.tensor->kind != TENSOR_PARAM) {
                diag_error(a->span, "a checkpoint holds parameters, but this is %s",
                           v->kind == V_TENSOR ? "a tensor that is not a parameter" : kind_noun(v));
                return;
            }
            step.tensors[i] = v->as.tensor;
        }
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* The data item (not an option) named `name`, or UINT32_MAX. */
static uint32_t data_item_number(const Program *p, const char *name) {
    for (uint32_t i = 0; i < p->source_count; i++)
        if (strcmp(p->sources[i]->name, name) == 0 && strcmp(p->sources[i]->generator, "option") != 0) return i;
    return UINT32_MAX;
}

/* The data items that shuffle statements permute together.  Every statement of a group draws
 * from one counter of permutations (runtime/shuffle.c), keyed by the `source` of the group's
 * first statement, so `shuffle d` in two places of main takes the next permutation each time and
 * a resumed run replays the group's count in order.  An item belongs to one group. */
typedef struct ShuffleGroup {
    const uint32_t *items;
    uint32_t count;
    uint32_t source;
    Span span; /* its first statement */
} ShuffleGroup;

static bool same_items(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb) {
    if (na != nb) return false;
    for (uint32_t i = 0; i < na; i++) {
        bool found = false;
        for (uint32_t j = 0; j < nb && !found; j++) found = a[i] == b[j];
        if (!found) return false;
    }
    return true;
}

/* The source that keys the permutations of the group of `items` (a new group's: items[0]), or
 * UINT32_MAX (reported) when the items overlap another group without being it. */
static uint32_t shuffle_group_source(Elab *e, const uint32_t *items, uint32_t count, Span span) {
    const Program *p = e->program;
    for (uint32_t g = 0; g < e->shuffle_group_count; g++) {
        const ShuffleGroup *group = &e->shuffle_groups[g];
        if (same_items(items, count, group->items, group->count)) return group->source;
        for (uint32_t i = 0; i < count; i++)
            for (uint32_t j = 0; j < group->count; j++)
                if (items[i] == group->items[j]) {
                    diag_error(span, "data item '%s' is shuffled here with other items than in an earlier shuffle: "
                               "items shuffled together are always shuffled together, as one tuple (a resumed run "
                               "replays each group's shuffles in order)", p->sources[items[i]]->name);
                    diag_note(group->span, "the earlier shuffle of '%s'", p->sources[items[i]]->name);
                    return UINT32_MAX;
                }
    }
    ShuffleGroup group = {items, count, items[0], span};
    ARENA_PUSH(e->arena, e->shuffle_groups, e->shuffle_group_count, e->shuffle_group_cap, group);
    return items[0];
}

/* shuffle NAME, or shuffle (NAME, NAME, …): permute the rows of the data items, all by one
 * permutation (plan.c checks they have the same rows).  The step lists every field of every
 * item; `source`, the group's key (shuffle_group_source), keys the permutation. */
static void main_shuffle(Elab *e, const Node *n, MainList *out) {
    const Node *arg = n->list.count == 1 ? n->list.items[0] : NULL;
    const Node *const *names = arg && arg->kind == NODE_TUPLE ? (const Node *const *)arg->list.items : &arg;
    uint32_t name_count = arg && arg->kind == NODE_TUPLE ? arg->list.count : 1;
    for (uint32_t k = 0; k < name_count; k++)
        if (!names[k] || names[k]->kind != NODE_VAR) {
            diag_error(names[k] ? names[k]->span : n->span,
                       "'shuffle' takes a data item, or a tuple of data items shuffled alike: shuffle moons, "
                       "shuffle (images, labels)");
            return;
        }
    const Program *p = e->program;
    MainStep step = {.kind = MAIN_SHUFFLE, .span = n->span, .routine = UINT32_MAX};
    uint32_t field_count = 0, *items = arena_alloc(e->arena, name_count * sizeof *items);
    for (uint32_t k = 0; k < name_count; k++) {
        if ((items[k] = data_item_number(p, names[k]->name)) == UINT32_MAX) {
            const Value *v = lookup_global(e, names[k]->name, e->generation, e->owner);
            if (v && v->kind == V_ERROR) return; /* a data item that failed, reported there */
            diag_error(names[k]->span, "there is no data item '%s' to shuffle (data items are declared before 'main')",
                       names[k]->name);
            return;
        }
        for (uint32_t j = 0; j < k; j++)
            if (items[j] == items[k]) {
                diag_error(names[k]->span, "'%s' is listed twice in this shuffle", names[k]->name);
                diag_note(names[j]->span, "first listed here");
                return;
            }
        field_count += p->sources[items[k]]->field_count;
    }
    if ((step.source = shuffle_group_source(e, items, name_count, n->span)) == UINT32_MAX) return;
    step.tensors = arena_alloc(e->arena, field_count * sizeof *step.tensors);
    for (uint32_t k = 0; k < name_count; k++) {
        const DataSource *d = p->sources[items[k]];
        for (uint32_t f = 0; f < d->field_count; f++) step.tensors[step.tensor_count++] = d->fields[f];
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

/* The number of series `name`; a new one when `create`, else UINT32_MAX if there is none. */
static uint32_t series_number(Elab *e, const char *name, bool create) {
    Program *p = e->program;
    for (uint32_t i = 0; i < p->series_count; i++)
        if (strcmp(p->series[i], name) == 0) return i;
    if (!create) return UINT32_MAX;
    ARENA_PUSH(e->arena, p->series, p->series_count, p->series_cap, name);
    return p->series_count - 1;
}

/* record NAME t: append t (one cell) to series NAME; plot NAME: draw the series. */
static void main_series(Elab *e, const Node *n, Env *env, MainList *out, MainStepKind kind) {
    uint32_t want = kind == MAIN_RECORD ? 2 : 1;
    const Node *name = n->list.count == want ? n->list.items[0] : NULL;
    if (!name || name->kind != NODE_VAR) {
        diag_error(n->span, kind == MAIN_RECORD ? "'record' takes a series name and a one-cell tensor: record losses loss"
                                                : "'plot' takes the name of a recorded series: plot losses");
        return;
    }
    MainStep step = {.kind = kind, .span = n->span, .routine = UINT32_MAX, .text = name->name,
                     .series = series_number(e, name->name, kind == MAIN_RECORD)};
    if (step.series == UINT32_MAX) {
        diag_error(name->span, "no series '%s' is recorded before this plot (record %s x, in a loop of main)", name->name,
                   name->name);
        return;
    }
    if (kind == MAIN_RECORD) {
        const Node *a = n->list.items[1];
        uint32_t fresh_from = e->program->tensor_count;
        Value *v = eval(e, a, env, MODE_TENSOR);
        if (v->kind == V_ERROR) return;
        if (v->kind != V_TENSOR || v->as.tensor->kind == TENSOR_INDEX) {
            diag_error(a->span, "'record' records a one-cell tensor, but this is %s",
                       v->kind == V_TENSOR ? "an index value" : kind_noun(v));
            return;
        }
        step.tensors = arena_alloc(e->arena, sizeof *step.tensors);
        step.tensors[0] = v->as.tensor;
        step.tensor_count = 1;
        if (v->as.tensor->id >= fresh_from) { /* an expression: computed just before it is recorded */
            Routine compute = {.name = arena_printf(e->arena, "main.record@%u", n->span.start), .span = n->span,
                               .hidden = true};
            add_step(e, &compute, (CodeStep){.kind = STEP_COMPUTE, .tensor = v->as.tensor, .fresh_from = fresh_from,
                                             .span = a->span});
            step.routine = add_routine(e, compute);
        }
    }
    ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
}

void elab_main(Elab *e, const Node *n, Env *env, MainList *out) {
    switch (n->kind) {
    case NODE_SEQ:
        for (uint32_t i = 0; i < n->list.count; i++) elab_main(e, n->list.items[i], env, out);
        return;
    case NODE_UNIT: return;
    case NODE_FOR: main_for(e, n, env, out, false); return;
    case NODE_IF: {
        Value *c = eval(e, n->a, env, MODE_VALUE);
        if (c->kind == V_ERROR) return;
        if (c->kind != V_BOOL) {
            diag_error(n->a->span, "a condition in 'main' is decided at compile time; this is %s", kind_noun(c));
            return;
        }
        if (c->as.b) elab_main(e, n->b, env, out);
        else if (n->c) elab_main(e, n->c, env, out);
        return;
    }
    case NODE_LET: {
        Env *inner = eval_binding(e, n->name, &n->list, n->a, n->flag, MODE_TENSOR, false, false, env, NULL);
        elab_main(e, n->b, inner, out);
        return;
    }
    case NODE_CODE: {
        Routine r = {.name = arena_printf(e->arena, "main.cd@%u", n->span.start), .span = n->span, .hidden = true};
        elab_code(e, &r, n, env);
        MainStep step = {.kind = MAIN_RUN, .span = n->span, .routine = add_routine(e, r)};
        ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
        return;
    }
    case NODE_APP:
        if (n->a->kind == NODE_VAR && !lookup(e, env, n->a->name)) {
            if (strcmp(n->a->name, "run") == 0) {
                const Node *arg = n->list.count == 1 ? n->list.items[0] : NULL;
                if (!arg || arg->kind != NODE_VAR) {
                    diag_error(n->span, "'run' takes the name of one routine: run train");
                    if (n->list.count > 1 && n->list.items[0]->kind == NODE_VAR) /* `run train⏎print y` */
                        diag_note(n->list.items[1]->span, "this is read as a second argument of 'run': the "
                                  "statements of main are separated by ';' (run %s; …)", n->list.items[0]->name);
                    return;
                }
                uint32_t at;
                if (!find_routine(e->program, arg->name, &at)) {
                    diag_error(arg->span, "there is no routine '%s' (routines are declared before 'main')", arg->name);
                    Value *bound = lookup(e, env, arg->name);
                    if (bound && bound->kind == V_TENSOR) /* `run loss`: a tensor, computed by a routine */
                        diag_note(arg->span, "'%s' is a tensor; a routine computes it: 'routine compute = %s.forward', "
                                  "then 'run compute'", arg->name, arg->name);
                    else if (bound) /* `let train = Train.step …`: code bound, never a routine */
                        diag_note(arg->span, "'%s' is bound with 'let'; code that main runs is declared with 'routine "
                                  "%s = …'", arg->name, arg->name);
                    return;
                }
                MainStep step = {.kind = MAIN_RUN, .span = n->span, .routine = at};
                ARENA_PUSH(e->arena, out->items, out->count, out->cap, step);
                return;
            }
            if (strcmp(n->a->name, "print") == 0) {
                const Node *only = n->list.count == 1 ? n->list.items[0] : NULL;
                if (only && only->kind == NODE_TUPLE && only->parenthesised &&
                    only->list.items[0]->kind == NODE_STRING) { /* Python's print("loss", loss) */
                    diag_error(only->span, "print's arguments are written apart, not as a tuple: print \"loss %%g\" loss "
                               "(a format of %% conversions, then one value for each)");
                    return;
                }
                main_print(e, n, env, out);
                return;
            }
            if (strcmp(n->a->name, "save") == 0 || strcmp(n->a->name, "load") == 0) {
                main_checkpoint(e, n, env, out, n->a->name[0] == 's' ? MAIN_SAVE : MAIN_LOAD);
                return;
            }
            if (strcmp(n->a->name, "shuffle") == 0) {
                main_shuffle(e, n, out);
                return;
            }
            if (strcmp(n->a->name, "record") == 0 || strcmp(n->a->name, "plot") == 0) {
                main_series(e, n, env, out, n->a->name[0] == 'r' ? MAIN_RECORD : MAIN_PLOT);
                return;
            }
            if (strcmp(n->a->name, "progress") == 0) {
                const Node *loop = n->list.count == 1 ? n->list.items[0] : NULL;
                if (!loop || loop->kind != NODE_FOR) {
                    diag_error(n->span, "'progress' takes one loop: progress (for epoch = 1 to epochs do … done)");
                    return;
                }
                main_for(e, loop, env, out, true);
                return;
            }
        }
        break;
    default: break;
    }
    const Node *head = n->kind == NODE_APP ? n->a : n;
    uint32_t routine;
    if (head->kind == NODE_VAR && !lookup(e, env, head->name) && find_routine(e->program, head->name, &routine)) {
        diag_error(n->span, "'%s' is a routine: 'main' runs it with 'run %s'%s", head->name, head->name,
                   n->kind == NODE_APP ? " (a routine takes no arguments)" : "");
        return;
    }
    diag_error(n->span, "'main' runs routines (run r), prints (print \"…\" x), loops (for i = a to b do … done) and "
               "the statements of docs/language.md §3.2.9 (save, load, shuffle, record, plot, progress); this is not "
               "one of them");
}

/* option NAME = DEFAULT: an integer or a number that `--NAME VALUE` sets when the program runs. */
