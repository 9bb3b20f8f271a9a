/* buckets.c — a mean across processes (`all_reduce_mean`, a REDUCE call) cut into buckets that
 * begin as soon as their buffers are ready, so the messages overlap the code before the call (the
 * rest of the backward pass), as DistributedDataParallel's buckets do (docs/ir.md §2.3,
 * docs/runtime.md §19).
 *
 * A buffer of the call is ready after the last top-level statement before the call that writes
 * it (a store, or another call of the runtime that touches it); one never written there is ready
 * at the function's start.  The buffers, in the order they become ready, are grouped into buckets
 * of at least `--bucket-cells` cells (BUCKET_CELLS_DEFAULT; the last one takes the rest); each bucket gets a REDUCE_BEGIN
 * call right after its last buffer is ready, and the call itself becomes the REDUCE_END that
 * waits for them all and writes the means.  Nothing reads a bucket's cells from the runtime's
 * copy or writes them in between (they are ready), so the program computes what the single call
 * computed.  A call whose buffers are all ready only at the call stays as it is.
 *
 * Requires: an optimised IrProgram (its statements settled), before the schedule, which keeps
 * calls where they are. */
#include "ir/buckets.h"

#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

typedef struct Ready {
    uint32_t buffer;
    uint32_t at; /* the top-level position after which it is ready */
} Ready;

static int by_position(const void *x, const void *y) {
    const Ready *a = x, *b = y;
    if (a->at != b->at) return a->at < b->at ? -1 : 1;
    return a->buffer < b->buffer ? -1 : a->buffer > b->buffer;
}

/* Cut the REDUCE call at top-level position `call` of fn into buckets; false when it stays. */
static bool cut(IrProgram *ir, IrFunction *fn, uint32_t call, uint64_t bucket_cells) {
    uint32_t end_action = fn->body.items[call]->action;
    const IrAction *reduce = &ir->actions[end_action];
    uint32_t n = reduce->buffer_count;
    Ready *ready = calloc(n + 1, sizeof *ready);
    if (!ready) diag_fatal_oom();
    for (uint32_t k = 0; k < n; k++) {
        ready[k].buffer = reduce->buffers[k];
        for (uint32_t j = 0; j < call; j++)
            if (ir_stmt_writes(ir, fn->body.items[j], ready[k].buffer)) ready[k].at = j + 1;
    }
    qsort(ready, n, sizeof *ready, by_position);
    /* The buckets: [first[q], first[q + 1]) of `ready`, each begun after its last buffer's `at`. */
    uint32_t *first = calloc(n + 2, sizeof *first), buckets = 0;
    if (!first) diag_fatal_oom();
    uint64_t cells = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (cells == 0) first[buckets++] = k;
        cells += ir->buffers[ready[k].buffer].size;
        if (cells >= bucket_cells) cells = 0;
    }
    first[buckets] = n;
    if (n == 0 || (buckets == 1 && ready[n - 1].at == call)) {
        free(first);
        free(ready);
        return false;
    }
    /* The new body: each bucket's REDUCE_BEGIN after the statement that readies it. */
    IrBlock body = {0};
    uint32_t q = 0;
    for (uint32_t j = 0; j <= fn->body.count; j++) {
        for (; q < buckets && ready[first[q + 1] - 1].at == j; q++) {
            IrAction begin = {.kind = IRA_REDUCE_BEGIN, .text = "all_reduce_mean", .value = end_action};
            begin.buffers = arena_alloc(ir->arena, (first[q + 1] - first[q] + 1) * sizeof *begin.buffers);
            for (uint32_t k = first[q]; k < first[q + 1]; k++) begin.buffers[begin.buffer_count++] = ready[k].buffer;
            ARENA_PUSH(ir->arena, ir->actions, ir->action_count, ir->action_cap, begin);
            IrStmt *s = arena_alloc(ir->arena, sizeof *s);
            *s = (IrStmt){.kind = IR_CALL, .action = ir->action_count - 1,
                          .comment = arena_printf(ir->arena, "the mean across processes begins: bucket %u of %u", q + 1,
                                                  buckets)};
            ir_block_push(ir->arena, &body, s);
        }
        if (j < fn->body.count) ir_block_push(ir->arena, &body, fn->body.items[j]);
    }
    ir->actions[end_action].kind = IRA_REDUCE_END;
    fn->body.items[call]->comment = "the mean across processes ends: every bucket";
    fn->body = body;
    free(first);
    free(ready);
    return true;
}

void bucket_collectives(IrProgram *ir, uint64_t bucket_cells) {
    for (uint32_t f = 0; bucket_cells && f < ir->function_count; f++) {
        IrFunction *fn = &ir->functions[f];
        for (uint32_t i = 0; i < fn->body.count; i++) {
            const IrStmt *s = fn->body.items[i];
            if (s->kind != IR_CALL || ir->actions[s->action].kind != IRA_REDUCE) continue;
            if (cut(ir, fn, i, bucket_cells)) i = 0; /* positions moved: look again (this call is an end now) */
        }
    }
}
