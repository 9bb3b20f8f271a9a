/* sched_gpu.c — the schedule for the GPU target (--target=cuda): which loops run on which
 * GPU threads (sched.h).
 *
 * What it does.  Every top-level nest of a function becomes one kernel (kernel.c), and the
 * nest's outermost parallel loops become the kernel's launch domain:
 *
 *   - the chain of perfectly nested parallel loops at the top of a nest (each the only
 *     statement of its parent's body) is found; at most three of them are mapped, always a
 *     prefix of the chain, so that every thread runs the same code below them;
 *   - the innermost mapped loop becomes `gpu.x`: iteration blockIdx.x · T + threadIdx.x with T
 *     threads a block (the target's gpu_threads, fewer for a short loop: a multiple of the warp
 *     size of 32), and a guard for the threads past the extent in the last block.  It is the
 *     loop nearest the innermost, the one that walks the stored cells with the smallest step,
 *     so a warp's 32 threads store (and mostly load) 32 neighbouring cells: coalesced accesses;
 *   - the loop around it becomes `gpu.y` (one block row per iteration), the one around that
 *     `gpu.z`, each only when its extent fits the grid's limit of 65535 (otherwise fewer loops
 *     are mapped);
 *   - everything below the mapped loops — inner parallel loops, reductions with their local
 *     accumulators — runs inside each thread, in the order the loop IR gives, so every cell is
 *     computed with the same operations in the same order as the reference executor computes it;
 *   - a nest with no parallel loop at its top (a full reduction `l = 0; for …; store`) runs on
 *     one thread.
 *
 * Before mapping, neighbouring pointwise nests over the same cells are fused (sched.c's
 * rewrite 4), as on the CPU: one kernel instead of one per nest.  The CPU's rewrites 1–3
 * (packing, register tiles, in-place accumulation, non-temporal stores) are not used here.
 *
 * Requires: a verified, optimised IrProgram (lower.c, opt.c), before image_build(). */
#include "sched/sched.h"

#include "base/diag.h"

enum { WARP = 32, MAX_GRID_YZ = 65535 };

/* The threads of an x loop that asks for none: T, or fewer for a short loop. */
static uint32_t x_threads(const IrStmt *l, const Target *target) {
    uint64_t t = (l->extent + WARP - 1) / WARP * WARP;
    return t < target->gpu_threads ? (uint32_t)t : target->gpu_threads;
}

/* Map the top of one top-level nest onto the grid. */
static void map_nest(IrStmt *top, const Target *target) {
    IrStmt *chain[3];
    unsigned n = 0;
    for (IrStmt *s = top; n < 3 && s->kind == IR_LOOP && s->parallel && s->mode == LOOP_PLAIN;) {
        chain[n++] = s;
        if (s->body.count != 1 || s->body.items[0]->kind != IR_LOOP) break;
        s = s->body.items[0];
    }
    if (n == 0) return;
    /* The block: the threads a loop asks for (thread tiles, sched.c), else T along x and one
     * along y and z. */
    uint32_t threads[3];
    for (unsigned i = 0; i < n; i++) threads[i] = chain[i]->threads ? chain[i]->threads : i + 1 == n ? x_threads(chain[i], target) : 1;
    /* The loops above the x loop must fit the grid's y and z dimensions. */
    while (n > 1) {
        bool fits = true;
        for (unsigned i = 0; i + 1 < n; i++) fits = fits && (chain[i]->extent + threads[i] - 1) / threads[i] <= MAX_GRID_YZ;
        if (fits) break;
        n--;
        if (!chain[n - 1]->threads) threads[n - 1] = x_threads(chain[n - 1], target);
    }
    static const IrLoopMode modes[3] = {LOOP_GPU_X, LOOP_GPU_Y, LOOP_GPU_Z};
    for (unsigned i = 0; i < n; i++) {
        chain[i]->mode = modes[n - 1 - i];
        chain[i]->threads = threads[i];
    }
}

void schedule_gpu(IrProgram *ir, const Target *target) {
    for (uint32_t f = 0; f < ir->function_count; f++) {
        IrFunction *fn = &ir->functions[f];
        for (uint32_t i = 0; i < fn->body.count; i++) map_nest(fn->body.items[i], target);
    }
}
