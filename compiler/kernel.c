/* kernel.c — outlining a function's top-level nests into kernels (kernel.h).
 *
 * What it does: groups the top-level statements of a function into kernels (a statement that
 * touches a local of the kernel being built joins it, so a full reduction's `l = init; loop;
 * store` stays together), lists the buffers each touches — state buffers become the kernel's
 * parameters, kernel-local ones (register tiles) its own storage — and decides the launch: a
 * kernel whose one statement is a parallel loop with at least two iterations and at least
 * target->parallel_work cell-iterations runs on the thread pool, its outer range split into
 * chunks of at least target->grain_work; any other kernel is called once.  The host side of a
 * routine is then the list of launches in order.  Nothing here is specific to one backend.
 *
 * Requires: a verified (scheduled) IrProgram. */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>

#include "diag.h"

typedef struct Uses {
    bool *buffer;   /* per buffer */
    bool *local;    /* per local */
} Uses;

static void uses_expr(Uses *u, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST:
    case IR_SYMBOL: break;
    case IR_LOCAL: u->local[e->local] = true; break;
    case IR_LOAD: u->buffer[e->buffer] = true; break;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) uses_expr(u, e->args[i]);
        break;
    }
}

static void uses_stmt(Uses *u, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++) uses_stmt(u, s->body.items[i]);
        break;
    case IR_STORE:
        u->buffer[s->buffer] = true;
        uses_expr(u, s->value);
        break;
    case IR_SET_LOCAL:
        u->local[s->local] = true;
        uses_expr(u, s->value);
        break;
    }
}

/* Cells × iterations of a statement. */
static double work(const IrStmt *s) {
    if (s->kind != IR_LOOP) return 1;
    double w = 0;
    for (uint32_t i = 0; i < s->body.count; i++) w += work(s->body.items[i]);
    return (double)s->extent * (w > 0 ? w : 1);
}

KernelList kernel_outline(IrProgram *ir, const IrFunction *fn, const Target *target) {
    KernelList list = {.fn = fn};
    uint32_t locals = fn->local_count + 1;
    list.kernels = arena_alloc(ir->arena, (fn->body.count + 1) * sizeof *list.kernels);
    Uses u = {calloc(ir->buffer_count + 1, 1), calloc(locals, 1)};
    bool *kernel_locals = calloc(locals, 1);
    if (!u.buffer || !u.local || !kernel_locals) diag_fatal_oom();
    for (uint32_t i = 0; i < fn->body.count; i++) {
        memset(u.local, 0, locals);
        uses_stmt(&u, fn->body.items[i]);
        bool shared = false;
        for (uint32_t l = 0; l < fn->local_count && list.count && !shared; l++) shared = u.local[l] && kernel_locals[l];
        if (!shared) {
            list.kernels[list.count++] = (Kernel){.first = i};
            memset(kernel_locals, 0, locals);
        }
        list.kernels[list.count - 1].count++;
        for (uint32_t l = 0; l < fn->local_count; l++) kernel_locals[l] |= u.local[l];
    }
    for (uint32_t k = 0; k < list.count; k++) {
        Kernel *kn = &list.kernels[k];
        memset(u.buffer, 0, ir->buffer_count + 1);
        for (uint32_t i = 0; i < kn->count; i++) uses_stmt(&u, fn->body.items[kn->first + i]);
        kn->buffers = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *kn->buffers);
        kn->locals = arena_alloc(ir->arena, (ir->buffer_count + 1) * sizeof *kn->locals);
        for (uint32_t b = 0; b < ir->buffer_count; b++) {
            if (!u.buffer[b]) continue;
            if (ir->buffers[b].kernel_local) kn->locals[kn->local_count++] = b;
            else kn->buffers[kn->buffer_count++] = b;
        }
        const IrStmt *s = fn->body.items[kn->first];
        kn->extent = s->kind == IR_LOOP ? (int64_t)s->extent : 1;
        double w = work(s);
        kn->threaded = kn->count == 1 && s->kind == IR_LOOP && s->parallel && s->mode == LOOP_PLAIN &&
                       s->extent >= 2 && w >= target->parallel_work;
        if (kn->threaded) kn->grain = (int64_t)(target->grain_work / (w / (double)s->extent)) + 1;
    }
    free(u.buffer);
    free(u.local);
    free(kernel_locals);
    return list;
}
