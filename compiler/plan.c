/* plan.c — the program plan: `main` in terms of the loop IR's functions and buffers.
 *
 * The same plan drives the reference executor (interp_run_main) and the native entry point
 * (cg_cpu.c), so both run routines in the same order and print through the same runtime
 * function.  Index symbols become IrSymbols (index items and the loop counters of `main`, in
 * the order elaboration made them); `print` statements become IrPrints over buffers and
 * symbols.  Without `main`, the plan runs every routine once in order (or the implicit
 * forward function) and prints every named tensor and its gradient as a grid.
 *
 * Requires: lowered functions (one per Program routine, or one "forward"); runs before
 * optimisation, so that the buffers it prints are kept. */
#include "plan.h"

#include <string.h>

#include "diag.h"

uint32_t ir_symbol(const IrProgram *ir, const char *name) {
    for (uint32_t i = 0; i < ir->symbol_count; i++)
        if (strcmp(ir->symbols[i].name, name) == 0) return i;
    return UINT32_MAX;
}

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

static bool print_stmt(IrProgram *ir, const MainStep *m, StmtList *out) {
    if (m->routine != UINT32_MAX) push(ir, out, (IrMainStmt){.kind = IRM_RUN, .function = m->routine});
    IrPrintArg *args = arena_alloc(ir->arena, (m->arg_count ? m->arg_count : 1) * sizeof *args);
    for (uint32_t i = 0; i < m->arg_count; i++) {
        const PrintArg *a = &m->args[i];
        switch (a->kind) {
        case PARG_INT: args[i] = (IrPrintArg){.kind = IRP_INT, .i = a->i}; break;
        case PARG_FLOAT: args[i] = (IrPrintArg){.kind = IRP_FLOAT, .f = a->f}; break;
        case PARG_INDEX: args[i] = (IrPrintArg){.kind = IRP_SYMBOL, .ref = a->index}; break;
        case PARG_TENSOR: {
            uint32_t b = ir->value_buffer[a->tensor->id];
            if (b == UINT32_MAX) {
                diag_error(a->span, "this tensor has no values to print (nothing computes or holds it)");
                return false;
            }
            if (m->format && ir->buffers[b].size != 1) {
                diag_error(a->span, "a number in a format is one cell, but this tensor has shape %s (%llu cells); "
                           "print it as a grid with print x, or reduce it first",
                           ir->buffers[b].shape_text, (unsigned long long)ir->buffers[b].size);
                return false;
            }
            args[i] = buffer_arg(ir, b);
            break;
        }
        }
    }
    push(ir, out, (IrMainStmt){.kind = IRM_PRINT, .print = add_print(ir, (IrPrint){m->format, m->label, args, m->arg_count})});
    return true;
}

static bool main_stmts(IrProgram *ir, const MainStep *steps, uint32_t count, StmtList *out) {
    for (uint32_t i = 0; i < count; i++) {
        const MainStep *m = &steps[i];
        switch (m->kind) {
        case MAIN_RUN: push(ir, out, (IrMainStmt){.kind = IRM_RUN, .function = m->routine}); break;
        case MAIN_PRINT:
            if (!print_stmt(ir, m, out)) return false;
            break;
        case MAIN_FOR: {
            StmtList body = {0};
            if (!main_stmts(ir, m->body, m->body_count, &body)) return false;
            push(ir, out, (IrMainStmt){.kind = IRM_FOR, .symbol = m->index, .from = m->from, .to = m->to,
                                       .down = m->down, .body = body.items, .body_count = body.count});
            break;
        }
        }
    }
    return true;
}

bool plan_build(IrProgram *ir) {
    const Program *p = ir->program;
    ir->symbol_count = p->index_count;
    ir->symbols = arena_alloc(ir->arena, (p->index_count + 1) * sizeof *ir->symbols);
    for (uint32_t i = 0; i < p->index_count; i++) ir->symbols[i] = (IrSymbol){p->indexes[i].name, p->indexes[i].range, !p->indexes[i].counter};
    ir->exported = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *ir->exported);
    for (uint32_t f = 0; f < ir->function_count; f++)
        ir->exported[f] = p->routine_count == 0 || !p->routines[f].hidden;
    StmtList out = {0};
    if (p->has_main) {
        if (!main_stmts(ir, p->main, p->main_count, &out)) return false;
    } else {
        for (uint32_t f = 0; f < ir->function_count; f++) push(ir, &out, (IrMainStmt){.kind = IRM_RUN, .function = f});
        for (uint32_t i = 0; i < p->named_count; i++) {
            const Tensor *t = p->named[i];
            uint32_t b = ir->value_buffer[t->id];
            if (b != UINT32_MAX) push(ir, &out, grid(ir, b, p->shown_names[i]));
            b = ir->grad_buffer[t->id];
            if (b != UINT32_MAX) push(ir, &out, grid(ir, b, arena_printf(ir->arena, "%s.grad", p->shown_names[i])));
        }
    }
    ir->main = out.items;
    ir->main_count = out.count;
    return true;
}
