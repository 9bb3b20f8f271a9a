/* plan.c — the program plan: `main` in terms of the loop IR's functions and buffers.
 *
 * The same plan drives the reference executor (interp_run_main) and the native entry point
 * (cg_cpu.c), so both run routines in the same order and print through the same runtime
 * function.  Index symbols become IrSymbols (index items and the loop counters of `main`, in
 * the order elaboration made them); `print` statements become IrPrints over buffers and
 * symbols.  Without `main`, the plan runs every routine once in order (or the implicit
 * forward function) and prints every named tensor and its gradient as a grid.  It is also the
 * one place that copies what the back half needs out of the tensor graph (exported tensors,
 * data sets, options, routine spans): nothing after it reads the Program.  Run-time sizes
 * become size symbols, one per `?` written, after the index symbols (runtime_sizes below).
 * Knowing what main runs, it warns where main would read zeros: a print or a routine that reads
 * a tensor no routine main runs computes, a routine that reads an index no loop of main sets.
 *
 * Requires: lowered functions (one per Program routine, or one "forward"); runs before
 * optimisation, so that the buffers it prints are kept. */
#include "ir/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "runtime/image_format.h"

static uint32_t add_print(IrProgram *ir, IrPrint p) {
    ARENA_PUSH(ir->arena, ir->prints, ir->print_count, ir->print_cap, p);
    return ir->print_count - 1;
}

static IrPrintArg buffer_arg(IrProgram *ir, uint32_t buffer) {
    ir->buffers[buffer].keep = true;
    return (IrPrintArg){.kind = IRP_BUFFER, .ref = buffer};
}

/* A grid print of one buffer. */
static IrMainStmt grid(IrProgram *ir, uint32_t buffer, const char *label) {
    IrPrintArg *arg = arena_alloc(ir->arena, sizeof *arg);
    *arg = buffer_arg(ir, buffer);
    return (IrMainStmt){.kind = IRM_PRINT, .print = add_print(ir, (IrPrint){NULL, label, arg, 1})};
}

typedef struct StmtList {
    IrMainStmt *items;
    uint32_t count, cap;
} StmtList;

static void push(IrProgram *ir, StmtList *list, IrMainStmt s) { ARENA_PUSH(ir->arena, list->items, list->count, list->cap, s); }

/* The functions `main` runs anywhere (its runs, and the code of its prints and other statements),
 * marked in runs[]. */
static void mark_main_runs(const MainStep *steps, uint32_t count, bool *runs) {
    for (uint32_t i = 0; i < count; i++) {
        if (steps[i].routine != UINT32_MAX) runs[steps[i].routine] = true;
        if (steps[i].kind == MAIN_FOR) mark_main_runs(steps[i].body, steps[i].body_count, runs);
    }
}

/* Whether buffer b holds what code computes, which nothing else sets, and no function `main`
 * runs writes it: it holds the zeros it starts with. */
static bool never_computed(const IrProgram *ir, const bool *runs, uint32_t b) {
    const IrBuffer *buf = &ir->buffers[b];
    if (buf->kind != BUF_COMPUTED || buf->init != INIT_NONE || buf->training_state || buf->carried) return false;
    for (uint32_t f = 0; f < ir->function_count; f++)
        for (uint32_t i = 0; runs[f] && i < ir->functions[f].body.count; i++)
            if (ir_stmt_writes(ir, ir->functions[f].body.items[i], b)) return false;
    return true;
}

typedef struct ReadsNeverComputed {
    const IrProgram *ir;
    const bool *runs;
    Span at;
    const char *what; /* what reads it, for the message ("assignment"); NULL: "expression" */
    uint32_t warned[8];
    uint32_t warned_count;
} ReadsNeverComputed;

static void warn_read_never_computed(void *ctx, uint32_t b) {
    ReadsNeverComputed *r = ctx;
    for (uint32_t i = 0; i < r->warned_count; i++)
        if (r->warned[i] == b) return;
    if (r->warned_count == 8 || !never_computed(r->ir, r->runs, b)) return;
    r->warned[r->warned_count++] = b;
    const char *name = r->ir->buffers[b].name;
    diag_warning(r->at, "this %s reads '%s', which no routine that main runs computes: it reads the zeros "
                 "'%s' starts with", r->what ? r->what : "expression", name, name);
}

static void each_store_load(ReadsNeverComputed *r, const IrBlock *body) {
    for (uint32_t i = 0; i < body->count; i++) {
        const IrStmt *st = body->items[i];
        if (st->kind == IR_LOOP) each_store_load(r, &st->body);
        else if ((st->kind == IR_STORE || st->kind == IR_SET_LOCAL) && st->value)
            ir_expr_each_load(r->ir, st->value, warn_read_never_computed, r);
    }
}

/* A print of a tensor that nothing `main` runs computes shows zeros (docs/language.md §3.2.9):
 * a warning at the value, for the tensor printed or one its expression reads. */
static void warn_never_computed(const IrProgram *ir, const bool *runs, const MainStep *m, uint32_t b, const char *name,
                                Span at) {
    if (never_computed(ir, runs, b)) {
        diag_warning(at, "'%s' is computed by no routine that main runs: this prints the zeros it starts with", name);
        return;
    }
    if (m->routine == UINT32_MAX) return;
    ReadsNeverComputed r = {.ir = ir, .runs = runs, .at = at};
    each_store_load(&r, &ir->functions[m->routine].body);
}

static bool print_stmt(IrProgram *ir, const AssignResult *ar, const bool *runs, const MainStep *m, StmtList *out) {
    if (m->routine != UINT32_MAX) push(ir, out, (IrMainStmt){.kind = IRM_RUN, .function = m->routine});
    IrPrintArg *args = arena_alloc(ir->arena, (m->arg_count ? m->arg_count : 1) * sizeof *args);
    bool ok = true; /* every value is checked: each error is reported */
    for (uint32_t i = 0; i < m->arg_count; i++) {
        const PrintArg *a = &m->args[i];
        switch (a->kind) {
        case PARG_INT: args[i] = (IrPrintArg){.kind = IRP_INT, .i = a->i}; break;
        case PARG_FLOAT: args[i] = (IrPrintArg){.kind = IRP_FLOAT, .f = a->f}; break;
        case PARG_INDEX: args[i] = (IrPrintArg){.kind = IRP_SYMBOL, .ref = a->index, .i = a->i}; break;
        case PARG_OPTION: args[i] = (IrPrintArg){.kind = IRP_OPTION, .ref = a->index, .i = a->i}; break;
        case PARG_TENSOR: {
            uint32_t b = (a->grad ? ar->grad_buffer : ar->value_buffer)[a->tensor->id];
            const char *leaf = kind_without_gradient(a->tensor->kind);
            if (b == UINT32_MAX && a->grad && leaf) {
                diag_error(a->span, "'%s' has no gradient to print: it is %s (inputs, data, literals and constants "
                           "have none; backprop reaches parameters and the operations between them and the loss)",
                           a->tensor->name ? a->tensor->name : "this tensor", leaf);
                ok = false;
                break;
            }
            if (b == UINT32_MAX && a->grad) {
                diag_error(a->span, "this tensor has no gradient to print: no routine runs backprop through it");
                ok = false;
                break;
            }
            if (b == UINT32_MAX) {
                diag_error(a->span, "this tensor has no values to print (nothing computes or holds it)");
                ok = false;
                break;
            }
            if (m->format && !a->wants_float && !a->text && !ir_dtype_integer(ir->buffers[b].dtype)) {
                diag_error(a->span, "the format's conversion '%.*s' is for an integer, but this tensor holds %s numbers; "
                           "use %%f, %%e or %%g", a->conversion_len, a->conversion, ir_dtype_word(ir->buffers[b].dtype));
                ok = false;
                break;
            }
            if (m->format && !a->text && ir->buffers[b].size != 1) {
                diag_error(a->span, "a number in a format is one cell, but this tensor has shape %s (%llu cells); "
                           "print it as a grid with print x, or reduce it first",
                           ir->buffers[b].shape_text, (unsigned long long)ir->buffers[b].size);
                ok = false;
                break;
            }
            if (!a->grad) warn_never_computed(ir, runs, m, b, a->tensor->name ? a->tensor->name : "this tensor", a->span);
            args[i] = buffer_arg(ir, b);
            break;
        }
        }
    }
    if (!ok) return false;
    push(ir, out, (IrMainStmt){.kind = IRM_PRINT, .print = add_print(ir, (IrPrint){m->format, m->label, args, m->arg_count})});
    return true;
}

static uint32_t add_action(IrProgram *ir, IrAction a) {
    ARENA_PUSH(ir->arena, ir->actions, ir->action_count, ir->action_cap, a);
    return ir->action_count - 1;
}

/* The buffer holding tensor `t`'s values (kept: the runtime reads or writes it), or
 * UINT32_MAX after an error at `span`. */
static uint32_t kept_buffer(IrProgram *ir, const AssignResult *ar, const Tensor *t, Span span) {
    uint32_t b = ar->value_buffer[t->id];
    if (b == UINT32_MAX) {
        diag_error(span, "this tensor has no values (nothing computes or holds it)");
        return UINT32_MAX;
    }
    ir->buffers[b].keep = true;
    return b;
}

/* The rows `shuffle` permutes: the cells of the batch axes, which lead in memory.  When the first
 * is a run-time size (a .npy file's length), minus the cells of the others: the runtime
 * multiplies by the length the file gave (runtime/steps.c). */
static int64_t batch_rows(const AssignResult *ar, const Tensor *t) {
    Row batch = shape_resolve_row(ar->program->solver, t->shape.rows[ROW_BATCH]);
    int64_t rows = 1;
    for (uint32_t i = 0; i < batch.count; i++) rows *= batch.dims[i].runtime ? 1 : batch.dims[i].size;
    return !batch.count ? 0 : batch.dims[0].runtime ? -rows : rows;
}

/* Items shuffled together whose first batch axis is `?` must get files of one length: the size
 * symbols of buffer `b`'s class join those of buffer `first`'s (one leader), so the runtime
 * refuses a second length when it reads the files (runtime/state.c give_length). */
static void join_sizes(IrProgram *ir, uint32_t first, uint32_t b) {
    if (first == UINT32_MAX || b == UINT32_MAX || !ir_buffer_dynamic(&ir->buffers[first]) ||
        !ir_buffer_dynamic(&ir->buffers[b]))
        return;
    uint32_t to = ir->symbols[ir->buffers[first].size_symbol].leader;
    uint32_t from = ir->symbols[ir->buffers[b].size_symbol].leader;
    if (to == from) return;
    for (uint32_t i = 0; i < ir->symbol_count; i++)
        if (ir->symbols[i].size && ir->symbols[i].leader == from) ir->symbols[i].leader = to;
}

/* A shuffle's rows (into `a`): every field of every listed data item must have the same
 * number of rows, the cells of its batch axes (for a `?` first axis, the cells of the others,
 * negated, and files of one length: join_sizes). */
static bool shuffle_rows(IrProgram *ir, const AssignResult *ar, const MainStep *m, IrAction *a) {
    const DataSource *first = ar->program->sources[m->source];
    a->value = m->source;
    a->text = first->name;
    a->rows = batch_rows(ar, m->tensors[0]);
    for (uint32_t f = 0; f < m->tensor_count; f++) {
        const DataSource *d = m->tensors[f]->source;
        int64_t rows = batch_rows(ar, m->tensors[f]);
        if (d != first && m->tensors[f]->field == 0) a->text = arena_printf(ir->arena, "%s, %s", a->text, d->name);
        if (rows != 0 && rows == a->rows) {
            join_sizes(ir, ar->value_buffer[m->tensors[0]->id], ar->value_buffer[m->tensors[f]->id]);
            continue;
        }
        if (rows == 0 || d == first || a->rows == 0) {
            diag_error(m->span, "data '%s' has no batch axes shared by all its fields, so it has no rows to shuffle "
                       "(give it batch axes: ~b:[n] or ~batches:n)", rows == 0 || d == first ? d->name : first->name);
            return false;
        }
        if ((a->rows < 0) != (rows < 0)) {
            const DataSource *open = a->rows < 0 ? first : d, *fixed = a->rows < 0 ? d : first;
            diag_error(m->span, "data '%s' has a run-time number of rows (its first batch axis is '?', the file's "
                       "length) but '%s' has %lld: items shuffled together need the same rows (give both '?', or "
                       "'%s' its number of rows)", open->name, fixed->name, (long long)(a->rows < 0 ? rows : a->rows),
                       open->name);
        } else if (a->rows < 0)
            diag_error(m->span, "data '%s' has ? x %lld rows (the cells of its batch axes, '?' the file's length) but "
                       "'%s' has ? x %lld: items shuffled together need the same rows", first->name,
                       (long long)-a->rows, d->name, (long long)-rows);
        else
            diag_error(m->span, "data '%s' has %lld rows but '%s' has %lld: items shuffled together need the same "
                       "rows", first->name, (long long)a->rows, d->name, (long long)rows);
        diag_note(first->span, "'%s' is declared here", first->name);
        diag_note(d->span, "'%s' is declared here", d->name);
        return false;
    }
    return true;
}

/* save, load, shuffle, record and plot: an action of the runtime (runtime/steps.c). */
static bool action_stmt(IrProgram *ir, const AssignResult *ar, const MainStep *m, StmtList *out) {
    static const IrActionKind kinds[] = {[MAIN_SAVE] = IRA_SAVE, [MAIN_LOAD] = IRA_LOAD, [MAIN_SHUFFLE] = IRA_SHUFFLE,
                                         [MAIN_RECORD] = IRA_RECORD, [MAIN_PLOT] = IRA_PLOT};
    IrAction a = {.kind = kinds[m->kind], .text = m->text, .value = m->series};
    const Tensor *const *fields = (const Tensor *const *)m->tensors;
    uint32_t count = m->tensor_count;
    if (m->kind == MAIN_SHUFFLE && !shuffle_rows(ir, ar, m, &a)) return false;
    a.buffer_count = count;
    a.buffers = arena_alloc(ir->arena, (count + 1) * sizeof *a.buffers);
    for (uint32_t i = 0; i < count; i++)
        if ((a.buffers[i] = kept_buffer(ir, ar, fields[i], m->span)) == UINT32_MAX) return false;
    if (m->kind == MAIN_RECORD && ir->buffers[a.buffers[0]].size != 1) {
        diag_error(m->span, "'record' records one number, but this tensor has shape %s (%llu cells); reduce it first",
                   ir->buffers[a.buffers[0]].shape_text, (unsigned long long)ir->buffers[a.buffers[0]].size);
        return false;
    }
    if (m->routine != UINT32_MAX) push(ir, out, (IrMainStmt){.kind = IRM_RUN, .function = m->routine});
    push(ir, out, (IrMainStmt){.kind = IRM_ACTION, .action = add_action(ir, a)});
    return true;
}

/* The statements of `main` (or a loop's body) into `out`; false after an error, each statement
 * checked (every error reported). */
static bool main_stmts(IrProgram *ir, const AssignResult *ar, const bool *runs, const MainStep *steps, uint32_t count,
                       StmtList *out) {
    bool ok = true;
    for (uint32_t i = 0; i < count; i++) {
        const MainStep *m = &steps[i];
        switch (m->kind) {
        case MAIN_RUN: push(ir, out, (IrMainStmt){.kind = IRM_RUN, .function = m->routine}); break;
        case MAIN_PRINT:
            ok &= print_stmt(ir, ar, runs, m, out);
            break;
        case MAIN_FOR: {
            StmtList body = {0};
            ok &= main_stmts(ir, ar, runs, m->body, m->body_count, &body);
            uint32_t bar = UINT32_MAX;
            if (m->progress)
                bar = add_action(ir, (IrAction){.kind = IRA_PROGRESS, .text = m->label ? m->label : ar->program->indexes[m->index].name});
            push(ir, out, (IrMainStmt){.kind = IRM_FOR, .symbol = m->index, .from = m->from, .to = m->to,
                                       .from_option = m->from_option, .to_option = m->to_option,
                                       .down = m->down, .body = body.items, .body_count = body.count,
                                       .action = bar});
            break;
        }
        default:
            ok &= action_stmt(ir, ar, m, out);
            break;
        }
    }
    return ok;
}

static void add_export(IrProgram *ir, const char *shown, uint32_t buffer, bool grad) {
    if (buffer != UINT32_MAX)
        ARENA_PUSH(ir->arena, ir->exports, ir->export_count, ir->export_cap, ((IrExport){shown, buffer, grad}));
}

/* What header.c, image.c and the backends need of the program, copied into the IR. */
static void copy_program(IrProgram *ir, const AssignResult *ar) {
    const Program *p = ar->program;
    ir->exported = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *ir->exported);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        ir->exported[f] = p->routine_count == 0 || !p->routines[f].hidden;
        if (f < p->routine_count) ir->functions[f].span = p->routines[f].span;
    }
    for (uint32_t i = 0; i < p->named_count; i++)
        add_export(ir, p->shown_names[i], ar->value_buffer[p->named[i]->id], false);
    for (uint32_t i = 0; i < p->named_count; i++)
        add_export(ir, arena_printf(ir->arena, "%s.grad", p->shown_names[i]), ar->grad_buffer[p->named[i]->id], true);
    ir->option_count = p->option_count;
    ir->options = arena_alloc(ir->arena, (p->option_count + 1) * sizeof *ir->options);
    for (uint32_t i = 0; i < p->option_count; i++)
        ir->options[i] = (IrOption){p->options[i].name, p->options[i].is_float, p->options[i].among, p->options[i].value};
    ir->dataset_count = p->source_count;
    ir->datasets = arena_alloc(ir->arena, (p->source_count + 1) * sizeof *ir->datasets);
    for (uint32_t i = 0; i < p->source_count; i++) {
        const DataSource *d = p->sources[i];
        IrDataSet *set = &ir->datasets[i];
        *set = (IrDataSet){.name = d->name, .generator = d->generator, .path = d->path, .count = d->count,
                           .seed = d->seed, .noise = d->noise, .factor = d->factor, .bound = d->bound,
                           .field_count = d->field_count};
        Shape shape = shape_resolve(p->solver, &d->fields[0]->shape);
        set->sample_axes = shape.rows[ROW_BATCH].count ? shape.rows[ROW_BATCH].count : 1;
        set->batched = shape.rows[ROW_BATCH].count > 0;
        for (uint32_t f = 0; f < d->field_count; f++) {
            set->fields[f] = ar->value_buffer[d->fields[f]->id];
            if (set->fields[f] == UINT32_MAX) diag_error_noloc("internal error: data field without a buffer");
        }
    }
}

/* ---- Data sets split among processes -------------------------------------------------------------- */

static void note_loads_block(const IrProgram *ir, const IrBlock *b, bool *read);

static void note_loads_expr(const IrProgram *ir, const IrExpr *e, bool *read) {
    if (e->kind == IR_LOAD) {
        read[e->buffer] = true;
        for (uint32_t a = 0; a < ir->buffers[e->buffer].rank; a++)
            if (e->index[a].gather) note_loads_expr(ir, e->index[a].gather, read);
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) note_loads_expr(ir, e->args[i], read);
}

static void note_loads_block(const IrProgram *ir, const IrBlock *b, bool *read) {
    for (uint32_t i = 0; i < b->count; i++) {
        const IrStmt *s = b->items[i];
        if (s->kind == IR_LOOP) note_loads_block(ir, &s->body, read);
        else if (s->kind == IR_STORE || s->kind == IR_SET_LOCAL) {
            note_loads_expr(ir, s->value, read);
            for (uint32_t a = 0; s->kind == IR_STORE && a < ir->buffers[s->buffer].rank; a++)
                if (s->index[a].gather) note_loads_expr(ir, s->index[a].gather, read);
        }
    }
}

/* A data set with batch axes that a routine averaging across processes reads (an IR_CALL of
 * REDUCE: Train.step's gradients) is split among the processes of a distributed run: each
 * computes the gradient of its share of the batch, and the mean of those is the gradient of the
 * whole (docs/runtime.md, "Training on several processes").  The other sets (a test set an
 * evaluation reads, a table of constants without batch axes) are read whole by every process. */
static void mark_sharded_data(IrProgram *ir) {
    bool *read = calloc(ir->buffer_count + 1, sizeof *read);
    if (!read) diag_fatal_oom();
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const IrBlock *body = &ir->functions[f].body;
        bool averages = false;
        for (uint32_t i = 0; i < body->count && !averages; i++) averages = body->items[i]->kind == IR_CALL;
        if (averages) note_loads_block(ir, body, read);
    }
    for (uint32_t d = 0; d < ir->dataset_count; d++)
        for (uint32_t k = 0; k < ir->datasets[d].field_count; k++)
            if (read[ir->datasets[d].fields[k]] && ir->datasets[d].batched) ir->datasets[d].sharded = true;
    free(read);
}

/* The first axis in memory order (batch, output, input) of a shape as written, or NULL. */
static const Dim *first_memory_axis(const Shape *sh) {
    static const RowKind order[ROW_KINDS] = {ROW_BATCH, ROW_OUTPUT, ROW_INPUT};
    for (int k = 0; k < ROW_KINDS; k++)
        if (sh->rows[order[k]].count) return &sh->rows[order[k]].dims[0];
    return NULL;
}

/* One size symbol per `?` written that is still a run-time size (named as elaboration named it:
 * "x.b"), its leader the first of its class; every class's symbol; and for every buffer of
 * run-time size, the symbol that sizes it: an input's own `?`, else its class's leader. */
static void runtime_sizes(IrProgram *ir, const AssignResult *ar) {
    const Program *p = ar->program;
    ShapeSolver *solver = p->solver;
    uint32_t decls = shape_runtime_decl_count(solver);
    ir->class_count = shape_runtime_count(solver) + 1;
    ir->class_symbol = arena_alloc(ir->arena, ir->class_count * sizeof *ir->class_symbol);
    for (uint32_t k = 0; k < ir->class_count; k++) ir->class_symbol[k] = UINT32_MAX;
    uint32_t *decl_symbol = arena_alloc(ir->arena, (decls + 1) * sizeof *decl_symbol);
    for (uint32_t i = 0; i < decls; i++) {
        const char *name;
        OriginId origin;
        uint32_t k = shape_runtime_decl(solver, i, &name, &origin);
        decl_symbol[i] = UINT32_MAX;
        if (!k || !name) continue; /* the program fixed it, or an inline definition's follows its uses */
        uint32_t sym = ir->symbol_count++;
        if (ir->class_symbol[k] == UINT32_MAX) ir->class_symbol[k] = sym;
        ir->symbols[sym] = (IrSymbol){.name = name, .range = shape_runtime_min(solver, k), .settable = true,
                                      .size = true, .leader = ir->class_symbol[k],
                                      .span = shape_origin_span(solver, origin)};
        decl_symbol[i] = sym;
    }
    for (uint32_t b = 0; b < ir->buffer_count; b++) {
        IrBuffer *buf = &ir->buffers[b];
        if (ir_buffer_dynamic(buf)) buf->size_symbol = ir->class_symbol[size_class(buf->dims[0])];
    }
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        const Tensor *t = p->tensors[i];
        uint32_t b = ar->value_buffer[t->id];
        const Dim *first = t->kind == TENSOR_INPUT ? first_memory_axis(&t->shape) : NULL;
        if (b == UINT32_MAX || !first || !ir_buffer_dynamic(&ir->buffers[b])) continue;
        uint32_t decl = shape_runtime_decl_of(solver, *first);
        if (decl != UINT32_MAX) ir->buffers[b].size_symbol = decl_symbol[decl];
    }
}

/* FNV-1a steps over main's statements (their kinds, bounds, routines, prints and actions). */
static uint64_t hash_word(uint64_t h, uint64_t word) { return tsr_fnv1a_extend(h, &word, sizeof word); }

static uint64_t hash_main(uint64_t h, const IrMainStmt *stmts, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        const IrMainStmt *m = &stmts[i];
        h = hash_word(h, m->kind);
        h = hash_word(h, m->kind == IRM_RUN ? m->function : m->kind == IRM_PRINT ? m->print : m->action);
        if (m->kind == IRM_FOR) {
            h = hash_word(hash_word(h, m->symbol), (uint64_t)m->from);
            h = hash_word(hash_word(h, (uint64_t)m->to), m->down);
            h = hash_word(hash_word(h, m->from_option), m->to_option);
            h = hash_main(h, m->body, m->body_count);
            h = hash_word(h, 0xf0f0); /* the loop's end */
        }
    }
    return h;
}

uint64_t plan_program_hash(const IrProgram *ir) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) diag_fatal_oom();
    ir_dump(ir, f);
    fclose(f);
    /* Places in the source are not the program: the dump's comment lines ("# einsum '+*' at
     * p.tsr:7:12: …") and the offsets in the names of main's own functions ("main.print@56")
     * are left out, so a comment added or the file renamed keeps the hash. */
    uint64_t h = TSR_FNV_BASIS;
    bool comment = false, indent = true; /* the line is a comment; still in its leading blanks */
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (indent && c != ' ') {
            indent = false;
            comment = c == '#';
        }
        if (c == '\n') indent = true;
        if (comment) {
            comment = c != '\n';
            continue;
        }
        if (c == '@' && i + 1 < len && text[i + 1] >= '0' && text[i + 1] <= '9') {
            while (i + 1 < len && text[i + 1] >= '0' && text[i + 1] <= '9') i++;
            continue;
        }
        h = tsr_fnv1a_extend(h, &c, 1);
    }
    free(text);
    return hash_main(h, ir->main, ir->main_count);
}

/* A routine main runs that reads what no routine main runs computes (`p =+ c` without
 * `c.forward`, `w =- lr * w.grad` without a backprop) reads the zeros it starts with, as such a
 * print shows them: a warning at the assignment (or at the routine, for the standard library's
 * code), once a buffer.  A print's own code (a hidden routine) is print_stmt's to warn about. */
static void warn_routines_read_never_computed(const IrProgram *ir, const AssignResult *ar, const bool *runs) {
    ReadsNeverComputed r = {.ir = ir, .runs = runs, .what = "assignment"};
    const Program *p = ar->program;
    for (uint32_t f = 0; f < ar->routine_count && f < ir->function_count && f < p->routine_count; f++)
        for (uint32_t i = 0; runs[f] && !p->routines[f].hidden && i < ar->routines[f].count; i++) {
            const Assignment *a = ar->routines[f].items[i];
            r.at = span_in_stdlib(a->span) ? ir->functions[f].span : a->span;
            for (uint32_t k = 0; k < a->read_count; k++)
                if (!a->reads[k].symbol && a->reads[k].buffer != UINT32_MAX)
                    warn_read_never_computed(&r, a->reads[k].buffer);
        }
}

/* ---- Index symbols main never sets ---------------------------------------------------------------- */

/* Marks in `set` the index symbols a loop of main sets (its own, at any depth). */
static void mark_loop_indexes(const MainStep *steps, uint32_t count, bool *set) {
    for (uint32_t i = 0; i < count; i++)
        if (steps[i].kind == MAIN_FOR) {
            set[steps[i].index] = true;
            mark_loop_indexes(steps[i].body, steps[i].body_count, set);
        }
}

/* The index (Program.indexes) named `name`, declared by an `index` item, or UINT32_MAX. */
static uint32_t declared_index(const Program *p, const char *name) {
    for (uint32_t i = 0; name && i < p->index_count; i++)
        if (!p->indexes[i].counter && strcmp(p->indexes[i].name, name) == 0) return i;
    return UINT32_MAX;
}

/* Marks in `read` the declared index symbols routine f's assignments read: `x @| i` slices and
 * `!@i` values. */
static void mark_routine_indexes(const AssignResult *ar, uint32_t f, bool *read) {
    const Program *p = ar->program;
    for (uint32_t i = 0; f < ar->routine_count && i < ar->routines[f].count; i++) {
        const Assignment *a = ar->routines[f].items[i];
        for (uint32_t k = 0; k < a->read_count; k++) {
            uint32_t x = declared_index(p, a->reads[k].symbol);
            if (x != UINT32_MAX) read[x] = true;
        }
        for (uint32_t s = 0; a->proj && s < a->proj->slot_count; s++)
            for (uint32_t ax = 0; ax < a->proj->rank[s]; ax++) {
                const ProjIndex *m = &a->proj->maps[s][ax];
                uint32_t x = m->kind == PIDX_SYMBOL ? declared_index(p, m->symbol) : UINT32_MAX;
                if (x != UINT32_MAX) read[x] = true;
            }
    }
}

typedef struct UnsetIndexes {
    const AssignResult *ar;
    const bool *set;   /* per index: a loop of main sets it */
    bool *warned;      /* per index: said once */
    bool *read;        /* scratch, per index */
} UnsetIndexes;

/* A run (or a print's code) in main that reads an index no loop of main sets reads it at 0 every
 * time: `for batch = 0 to 19 do run train done` for a `train` of `x @| b` trains on batch 0
 * alone.  A warning at the run, with a note at the innermost loop around it that counts
 * something else (`loop`: its step, or NULL). */
static void warn_unset_indexes(UnsetIndexes *u, const MainStep *steps, uint32_t count, const MainStep *loop) {
    const Program *p = u->ar->program;
    for (uint32_t i = 0; i < count; i++) {
        const MainStep *m = &steps[i];
        if (m->kind == MAIN_FOR) {
            warn_unset_indexes(u, m->body, m->body_count, p->indexes[m->index].counter ? m : loop);
            continue;
        }
        if (m->routine == UINT32_MAX) continue;
        memset(u->read, 0, p->index_count * sizeof *u->read);
        mark_routine_indexes(u->ar, m->routine, u->read);
        for (uint32_t x = 0; x < p->index_count; x++) {
            if (!u->read[x] || u->set[x] || u->warned[x] || p->indexes[x].range < 2) continue;
            u->warned[x] = true;
            const char *name = p->indexes[x].name;
            if (m->kind == MAIN_RUN)
                diag_warning(m->span, "routine '%s' reads index '%s', but no loop of main sets it: every run reads "
                             "%s = 0", p->routines[m->routine].name, name, name);
            else
                diag_warning(m->span, "this reads index '%s', but no loop of main sets it: it reads %s = 0", name, name);
            if (loop)
                diag_note(loop->span, "this loop counts '%s', a name of its own: 'for %s = 0 to %lld' would set the index",
                          p->indexes[loop->index].name, name, (long long)p->indexes[x].range - 1);
            else
                diag_note(p->indexes[x].item, "'%s' is declared here, with %lld values", name,
                          (long long)p->indexes[x].range);
        }
    }
}

/* The warnings of warn_unset_indexes over the whole of main. */
static void warn_indexes_main_never_sets(IrProgram *ir, const AssignResult *ar) {
    const Program *p = ar->program;
    uint32_t n = p->index_count + 1;
    bool *flags = arena_alloc(ir->arena, 3 * n * sizeof *flags);
    memset(flags, 0, 3 * n * sizeof *flags);
    UnsetIndexes unset = {.ar = ar, .set = flags, .warned = flags + n, .read = flags + 2 * n};
    mark_loop_indexes(p->main, p->main_count, flags);
    warn_unset_indexes(&unset, p->main, p->main_count, NULL);
}

bool plan_build(IrProgram *ir, const AssignResult *ar) {
    const Program *p = ar->program;
    copy_program(ir, ar);
    ir->symbol_count = p->index_count;
    ir->symbols = arena_alloc(ir->arena, (p->index_count + shape_runtime_decl_count(p->solver) + 1) * sizeof *ir->symbols);
    for (uint32_t i = 0; i < p->index_count; i++)
        ir->symbols[i] = (IrSymbol){.name = p->indexes[i].name, .range = p->indexes[i].range,
                                    .settable = !p->indexes[i].counter, .span = p->indexes[i].item};
    runtime_sizes(ir, ar);
    mark_sharded_data(ir);
    StmtList out = {0};
    if (p->has_main) {
        bool *runs = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *runs);
        memset(runs, 0, (ir->function_count + 1) * sizeof *runs);
        mark_main_runs(p->main, p->main_count, runs);
        warn_routines_read_never_computed(ir, ar, runs);
        warn_indexes_main_never_sets(ir, ar);
        if (!main_stmts(ir, ar, runs, p->main, p->main_count, &out)) return false;
    } else {
        for (uint32_t f = 0; f < ir->function_count; f++) push(ir, &out, (IrMainStmt){.kind = IRM_RUN, .function = f});
        for (uint32_t i = 0; i < p->named_count; i++) {
            const Tensor *t = p->named[i];
            uint32_t b = ar->value_buffer[t->id];
            if (b != UINT32_MAX) push(ir, &out, grid(ir, b, p->shown_names[i]));
            b = ar->grad_buffer[t->id];
            if (b != UINT32_MAX) push(ir, &out, grid(ir, b, arena_printf(ir->arena, "%s.grad", p->shown_names[i])));
        }
    }
    ir->main = out.items;
    ir->main_count = out.count;
    return true;
}
