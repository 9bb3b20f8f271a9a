/* routines.c — the assignment stage's entry, assign_build(): every named tensor is built
 * (assign.c), then the code is collected in the order it runs.  Without routines that is the
 * implicit `forward`: every named tensor's forward assignments, operands first, each once.  With
 * routines it is each routine's statements in order — `t.forward`, a standalone assignment with
 * its own pointwise record, `print`'s fresh computations — and the differentiation statements
 * `t.zero_grads` and `t.backprop`, whose assignments grad.c makes; `t.backprop` is told whether
 * the routine assigned t.grad before it (else grad.c seeds a one-cell t with 1).  Last, every
 * access gets its buffer, so that lowering never needs the tensor graph.  An error ends the named
 * tensor or routine being built, not the build: the next ones are built, so that every
 * independent error is reported, and whatever reads a tensor whose build failed fails silently.
 *
 * A number written beyond f32's range (1e300) is kept as a double; where the finished code
 * reads it as an f32 (among f32 values, or a literal's cells) it would be infinity, and that is
 * an error at the number (check_literal_ranges); among f64 values it is the double.
 *
 * Requires: elaborate() succeeded (every shape closed).  It calls down into assign.c and
 * grad.c (assign_build.h, grad.h); neither calls back. */
#include "ir/assign_build.h"

#include <string.h>

#include "ir/grad.h"

/* `all_reduce_mean` of a node: joins the collective that ends `out` (consecutive ones are one
 * call, one message), or starts one. */
static void add_collective(Builder *b, const CodeStep *step, AssignList *out) {
    Arena *arena = b->ir->arena;
    build_tensor(b, step->tensor);
    if (b->failed) return;
    if (ir_dtype_integer(step->tensor->dtype)) { /* integers have no mean; the float types do */
        const char *name = step->tensor->shown ? step->tensor->shown : step->tensor->name;
        diag_error(step->span, "all_reduce_mean averages tensors of f32, f64, bf16 or f16 cells, but %s%s%s is %s: "
                   "the mean of integers is not an integer", name ? "'" : "", name ? name : "this tensor", name ? "'" : "",
                   ir_dtype_word(step->tensor->dtype));
        diag_note(step->span, "average a copy in f32 (to_f32) or f64 (to_f64) instead");
        b->failed = true;
        return;
    }
    TNode node = {step->tensor, step->grad};
    Assignment *last = out->count ? out->items[out->count - 1] : NULL;
    if (!last || !last->collective) {
        last = arena_alloc(arena, sizeof *last);
        *last = (Assignment){.lhs = {.node = node}, .collective = true, .span = step->span, .what = "all_reduce_mean"};
        push_assignment(arena, out, last);
    }
    for (uint32_t i = 0; i < last->read_count; i++)
        if (last->reads[i].node.tensor == node.tensor && last->reads[i].node.grad == node.grad) return;
    Access *grown = arena_alloc(arena, (last->read_count + 1) * sizeof *grown);
    if (last->read_count) memcpy(grown, last->reads, last->read_count * sizeof *grown);
    grown[last->read_count++] = (Access){.node = node};
    last->reads = grown;
}

static void build_routine_steps(Builder *b, const Routine *r, AssignList *out);

/* The routine's assignments; the user's call its library steps' errors are reported at is
 * forgotten after it, however it ended (left set, it gave later errors a note naming it). */
static void build_routine(Builder *b, const Routine *r, AssignList *out) {
    build_routine_steps(b, r, out);
    builder_set_call(b, (Span){0}, NULL);
}

static void build_routine_steps(Builder *b, const Routine *r, AssignList *out) {
    Arena *arena = b->ir->arena;
    out->name = r->name;
    /* The gradients the routine itself assigned so far (`t.grad =: …`) that no zero_grads has
     * set to 0 since: a backprop of t takes t's as its seed, and resets none of them. */
    bool *written = arena_alloc(arena, (b->program->tensor_count + 1) * sizeof *written);
    for (uint32_t s = 0; s < r->step_count && !b->failed; s++) {
        const CodeStep *step = &r->steps[s];
        builder_set_call(b, step->user_call, step->user_call_name); /* a library step's errors: at the user's call */
        if (step->kind == STEP_ALL_REDUCE) {
            add_collective(b, step, out);
            continue;
        }
        if (step->kind == STEP_ASSIGN) {
            Assignment *a = standalone(b, step);
            if (!a) return;
            if (step->grad) written[step->tensor->id] = true;
            /* Tensors the right side built (`relu x` in `y =: relu x + 1`) are computed first. */
            b->generation++;
            for (uint32_t i = 0; i < a->read_count; i++) {
                Tensor *t = a->reads[i].node.tensor;
                if (!a->reads[i].node.grad && !t->shown) collect_forward(b, t, out);
            }
            push_assignment(arena, out, a);
            continue;
        }
        build_tensor(b, step->tensor);
        if (b->failed) return;
        if (step->kind == STEP_ZERO_GRADS) {
            grad_zero(b, step->tensor, step->span, out, written);
        } else if (step->kind == STEP_BACKPROP) {
            grad_backprop(b, step, !written[step->tensor->id], written, out);
        } else {
            b->generation++;
            if (step->kind == STEP_FORWARD) collect_forward(b, step->tensor, out);
            else collect_fresh(b, step->tensor, step->fresh_from, out);
        }
    }
}

/* Every access of every assignment gets its buffer (created now if it was not yet) or, for
 * `!@i` read as a number, its index symbol: lowering never needs the tensor graph. */
static void resolve_access(Builder *b, Access *acc) {
    const Tensor *t = acc->node.tensor;
    acc->symbol = t->kind == TENSOR_INDEX && !acc->node.grad ? t->index : NULL;
    acc->buffer = acc->symbol ? UINT32_MAX : node_buffer(b, acc->node);
}

static void resolve_list(Builder *b, AssignList *list) {
    for (uint32_t i = 0; i < list->count; i++) {
        Assignment *a = list->items[i];
        resolve_access(b, &a->lhs);
        for (uint32_t r = 0; r < a->read_count; r++) resolve_access(b, &a->reads[r]);
        for (uint32_t s = 0; a->slot_values && s < a->proj->slot_count; s++) resolve_access(b, &a->slot_values[s]);
    }
}

/* A parameter that no backprop reaches and that code of the program writes (a sample buffer, a
 * key/value cache, a loss accumulator: `{ text = 0.; o = [ctx] }` then `text =: …`) is working
 * state, like an optimiser's: a checkpoint of every parameter holds it, and one that lacks it
 * (saved before the program had it) leaves it as it is rather than failing the load.  A
 * parameter that code never writes (weights loaded for sampling alone) stays required. */
static void mark_working_state(Builder *b) {
    AssignResult *out = b->out;
    uint32_t n = b->program->tensor_count;
    bool *written = arena_alloc(b->ir->arena, (n + 1) * sizeof *written);
    memset(written, 0, (n + 1) * sizeof *written);
    for (uint32_t r = 0; r < out->routine_count; r++)
        for (uint32_t i = 0; i < out->routines[r].count; i++) {
            const Access *lhs = &out->routines[r].items[i]->lhs;
            if (!lhs->node.grad && lhs->node.tensor) written[lhs->node.tensor->id] = true;
        }
    for (uint32_t t = 0; t < n; t++) {
        const Tensor *p = b->program->tensors[t];
        uint32_t v = out->value_buffer[p->id];
        if (p->kind == TENSOR_PARAM && written[p->id] && v != UINT32_MAX && out->grad_buffer[p->id] == UINT32_MAX)
            b->ir->buffers[v].training_state = true;
    }
}

/* A parameter's gradient that some routine reads or adds into before it resets every cell of it
 * (`Train.accumulate`'s backprop adds each micro-batch into what the earlier runs left, and
 * `Train.apply` divides, applies and zeroes it) carries partial sums from one run to the next:
 * training state, which a checkpoint of every parameter holds, and each process's own.  A
 * routine that starts by zeroing it (`Train.step`) carries nothing. */
static void mark_carried_gradients(Builder *b) {
    AssignResult *out = b->out;
    IrProgram *ir = b->ir;
    enum { UNTOUCHED, OVERWRITTEN, READ_FIRST };
    uint8_t *first = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *first);
    bool *carried = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *carried);
    memset(carried, 0, (ir->buffer_count + 1) * sizeof *carried);
    for (uint32_t r = 0; r < out->routine_count; r++) {
        memset(first, UNTOUCHED, (ir->buffer_count + 1) * sizeof *first);
        for (uint32_t i = 0; i < out->routines[r].count; i++) {
            const Assignment *a = out->routines[r].items[i];
            for (uint32_t k = 0; k < a->read_count; k++)
                if (a->reads[k].buffer < ir->buffer_count && first[a->reads[k].buffer] == UNTOUCHED)
                    first[a->reads[k].buffer] = READ_FIRST;
            for (uint32_t s = 0; a->slot_values && s < a->proj->slot_count; s++)
                if (a->slot_values[s].buffer < ir->buffer_count && first[a->slot_values[s].buffer] == UNTOUCHED)
                    first[a->slot_values[s].buffer] = READ_FIRST;
            uint32_t lhs = a->lhs.buffer;
            if (a->collective || lhs >= ir->buffer_count || first[lhs] != UNTOUCHED) continue;
            bool overwrites = (a->reset || a->accum == ACC_NONE) && a->kernel == KERNEL_NONE && proj_surjective(a->proj, a->lhs.slot);
            first[lhs] = overwrites ? OVERWRITTEN : READ_FIRST;
        }
        for (uint32_t buf = 0; buf < ir->buffer_count; buf++) carried[buf] |= first[buf] == READ_FIRST;
    }
    for (uint32_t t = 0; t < b->program->tensor_count; t++) {
        uint32_t g = out->grad_buffer[t];
        if (b->program->tensors[t]->kind != TENSOR_PARAM || g == UINT32_MAX || !carried[g]) continue;
        ir->buffers[g].training_state = ir->buffers[g].carried = true;
        /* A checkpoint names it as the buffer is named: a parameter `grad` of a layer bound to `w`
         * is w.grad too, so the gradient takes w.grad#2 (as elaboration renames clashes). */
        const char *base = ir->buffers[g].name;
        for (uint32_t k = 2, clash = 1; clash; k++) {
            clash = 0;
            for (uint32_t o = 0; o < ir->buffer_count && !clash; o++)
                clash = o != g && (ir->buffers[o].kind == BUF_PARAM || ir->buffers[o].training_state) &&
                        strcmp(ir->buffers[o].name, ir->buffers[g].name) == 0;
            if (clash) ir->buffers[g].name = arena_printf(ir->arena, "%s#%u", base, k);
        }
    }
}

/* A parameter's gradient that a routine reads but no routine computes — no backprop reaches the
 * parameter, and every write of the gradient is a fill or a scaling of itself (zero_grads,
 * Train.apply's division) — is always 0: an update that reads it moves nothing, silently
 * (`Train.apply` given another loss than the one `Train.accumulate` backpropagates).  An error
 * at the first routine that reads it, with a note at the parameter; false after one. */
static bool check_uncomputed_gradients(Builder *b) {
    AssignResult *out = b->out;
    IrProgram *ir = b->ir;
    bool *computed = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *computed);
    uint32_t *reader = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *reader); /* routine + 1, or 0 */
    memset(computed, 0, (ir->buffer_count + 1) * sizeof *computed);
    memset(reader, 0, (ir->buffer_count + 1) * sizeof *reader);
    for (uint32_t r = 0; r < out->routine_count; r++)
        for (uint32_t i = 0; i < out->routines[r].count; i++) {
            const Assignment *a = out->routines[r].items[i];
            uint32_t lhs = a->lhs.buffer;
            for (uint32_t k = 0; k < a->read_count; k++) {
                uint32_t buf = a->reads[k].buffer;
                if (buf >= ir->buffer_count) continue;
                bool constant = ir->buffers[buf].kind == BUF_LITERAL || ir->buffers[buf].kind == BUF_CONSTANT;
                if (buf != lhs && !constant && lhs < ir->buffer_count) computed[lhs] = true;
                if (!reader[buf] && buf != lhs) reader[buf] = r + 1;
            }
            if (lhs < ir->buffer_count && a->kernel != KERNEL_NONE) computed[lhs] = true;
        }
    for (uint32_t t = 0; t < b->program->tensor_count; t++) {
        const Tensor *p = b->program->tensors[t];
        uint32_t g = out->grad_buffer[t];
        if (p->kind != TENSOR_PARAM || g == UINT32_MAX || computed[g] || !reader[g]) continue;
        const Routine *routine = &b->program->routines[reader[g] - 1];
        const char *name = ir->buffers[out->value_buffer[t]].name;
        diag_error(routine->span, "routine '%s' reads the gradient of parameter '%s', which no routine computes (no "
                   "backprop of a loss that depends on '%s'): it is always 0", routine->name, name, name);
        diag_note(p->span, "'%s' is made here; an update given another loss than the one a routine backpropagates "
                  "(Train.apply's and Train.accumulate's) reads such gradients", name);
        return false;
    }
    return true;
}

/* The literal (or constant) of f32 cells that holds a number f32 cannot hold: t itself, or one
 * that t stacks at any depth (`[[1.; 2.]; [3.; 1e39]]` is a stack of row literals, folded into
 * one buffer that no assignment reads them through); NULL if none.  *cell: the number's place;
 * *several: whether it is a cell of a tensor of several (a literal's, or a stack's). */
static const Tensor *literal_beyond_f32(const Tensor *t, uint32_t *cell, bool *several) {
    if (t->kind == TENSOR_STACK) {
        for (uint32_t k = 0; k < t->operand_count; k++) {
            const Tensor *found = literal_beyond_f32(t->operands[k], cell, several);
            if (found) {
                *several = true;
                return found;
            }
        }
        return NULL;
    }
    if ((t->kind != TENSOR_LITERAL && t->kind != TENSOR_CONSTANT) || !t->values || t->dtype == TSR_DTYPE_F64) return NULL;
    for (uint32_t i = 0; i < t->value_count; i++)
        if (overflows_type(t->values[i], TSR_DTYPE_F32)) {
            *cell = i;
            *several = t->value_count > 1;
            return t;
        }
    return NULL;
}

/* The error for literal t's number `cell`, at the number itself where the literal was written
 * as one ([1.; 1e39]), and a note at the code that reads it (reader, what) if any; `several`
 * as literal_beyond_f32 says. */
static void report_beyond_f32(const Tensor *t, uint32_t cell, bool several, Span reader, const char *what) {
    Span at = t->value_spans ? t->value_spans[cell] : t->span;
    diag_error(at, "the number %g is beyond the range of f32 (±%.9g): as an f32 it would be infinity", t->values[cell],
               3.4028234663852886e38);
    if (reader.file) diag_note(reader, "%s reads it as an f32", what);
    if (several)
        diag_note(at, "a tensor literal of several cells, or of rows, is an f32 tensor: an f64 tensor holds it, written as its initial "
                  "value ({ c = [...]; dtype = \"f64\" }, docs/language.md §3.9)");
    else
        diag_note(at, "a number that meets f64 values is a double: compute with f64 tensors (dtype = \"f64\", or "
                  "to_f64 x) to use it (docs/language.md §3.9)");
}

/* The reads of e that are still reads of a literal beyond f32's range (one that met f64 values
 * became a double constant instead); false after an error. */
static bool expr_literals_fit(const Assignment *a, const AExpr *e) {
    if (!e) return true;
    if (e->kind == AE_READ) {
        const Access *r = &a->reads[e->read];
        uint32_t cell;
        bool several;
        const Tensor *literal = r->node.grad ? NULL : literal_beyond_f32(r->node.tensor, &cell, &several);
        if (literal) {
            report_beyond_f32(literal, cell, several, a->span, a->what);
            return false;
        }
        return true;
    }
    if (e->kind != AE_OP) return true;
    for (unsigned i = 0; i < 3; i++)
        if (!expr_literals_fit(a, e->args[i])) return false;
    return true;
}

/* Every number written beyond f32's range that the code reads as an f32, or that is a named
 * tensor of f32 cells, is an error; false after any. */
static bool check_literal_ranges(Program *program, const AssignResult *out) {
    bool ok = true;
    for (uint32_t i = 0; i < program->named_count; i++) {
        uint32_t cell;
        bool several;
        const Tensor *literal = literal_beyond_f32(program->named[i], &cell, &several);
        if (literal) {
            report_beyond_f32(literal, cell, several, (Span){0}, NULL);
            ok = false;
        }
    }
    const AssignList *lists = out->routine_count ? out->routines : &out->forward;
    for (uint32_t l = 0; l < (out->routine_count ? out->routine_count : 1); l++)
        for (uint32_t k = 0; k < lists[l].count; k++)
            if (!lists[l].items[k]->collective) ok &= expr_literals_fit(lists[l].items[k], lists[l].items[k]->rhs);
    return ok;
}

bool assign_build(Program *program, const AssignOptions *options, AssignResult *out) {
    memset(out, 0, sizeof *out);
    Arena *arena = arena_new();
    IrProgram *ir = arena_alloc(arena, sizeof *ir);
    ir->arena = arena;
    ir->seed = options ? options->seed : 0;
    uint32_t n = program->tensor_count;
    out->program = program;
    out->value_buffer = arena_alloc(arena, (n + 1) * sizeof *out->value_buffer);
    out->grad_buffer = arena_alloc(arena, (n + 1) * sizeof *out->grad_buffer);
    Builder b = {.ir = ir, .program = program, .out = out};
    b.shapes = arena_alloc(arena, (n + 1) * sizeof *b.shapes);
    for (uint32_t i = 0; i < n; i++) {
        out->value_buffer[i] = out->grad_buffer[i] = UINT32_MAX;
        b.shapes[program->tensors[i]->id] = shape_resolve(program->solver, &program->tensors[i]->shape);
    }
    b.visited = arena_alloc(arena, (n + 1) * sizeof *b.visited);
    b.info = arena_alloc(arena, (n + 1) * sizeof *b.info);
    b.stamp = arena_alloc(arena, (n + 1) * sizeof *b.stamp);
    b.poisoned = arena_alloc(arena, (n + 1) * sizeof *b.poisoned);
    /* After an error the build goes on with the next named tensor and the next routine, so that
     * independent errors are reported together; what reads a failed tensor fails silently. */
    bool failed = false;
    for (uint32_t i = 0; i < program->named_count; i++) {
        b.failed = false;
        build_tensor(&b, program->named[i]);
        failed |= b.failed;
    }
    b.failed = false;
    /* Named tensors are observable even when nothing computes them (a literal, a parameter). */
    for (uint32_t i = 0; i < program->named_count && !failed; i++) {
        Tensor *t = program->named[i];
        if (t->kind != TENSOR_INDEX) buffer_of(&b, (TNode){t, false})->keep = true;
    }
    out->forward.name = "forward";
    b.generation++;
    for (uint32_t i = 0; i < program->named_count && !failed; i++)
        collect_forward(&b, program->named[i], &out->forward);
    out->routines = arena_alloc(arena, (program->routine_count + 1) * sizeof *out->routines);
    for (uint32_t i = 0; i < program->routine_count; i++) {
        b.failed = false;
        build_routine(&b, &program->routines[i], &out->routines[out->routine_count++]);
        failed |= b.failed;
    }
    resolve_gather_bounds(&b);
    if (!check_literal_ranges(program, out) || failed) {
        arena_free(arena);
        return false;
    }
    /* In the order lowering takes them: the routines, or (without any) the implicit forward. */
    if (out->routine_count == 0) resolve_list(&b, &out->forward);
    for (uint32_t i = 0; i < out->routine_count; i++) resolve_list(&b, &out->routines[i]);
    for (uint32_t t = 0; t < program->tensor_count; t++) { /* element types, as elaboration and build_operator
                                                            * settled them; a gradient's is its tensor's */
        if (out->value_buffer[t] != UINT32_MAX) ir->buffers[out->value_buffer[t]].dtype = (DType)program->tensors[t]->dtype;
        if (out->grad_buffer[t] != UINT32_MAX) ir->buffers[out->grad_buffer[t]].dtype = (DType)program->tensors[t]->dtype;
    }
    mark_working_state(&b);
    mark_carried_gradients(&b);
    if (!check_uncomputed_gradients(&b)) {
        arena_free(arena);
        return false;
    }
    out->ir = ir;
    return true;
}
