/* sched.h — the schedule: how the loop IR's nests run on a target (sched.c). */
#ifndef TSR_SCHED_H
#define TSR_SCHED_H

#include "ir/ir.h"
#include "sched/target.h"

/* Rewrite every function's nests for `target`: register-tiled contractions over packed panels,
 * reductions accumulated in place, loop modes (unroll, vector).  The result computes every cell
 * with the same operations in the same order as before (bit for bit), so the reference
 * executor runs either.  Adds scratch buffers; run after optimise() and plan_build(). */
void schedule(IrProgram *ir, const Target *target);

/* The GPU's part (sched_gpu.c): map each top-level nest's outer parallel loops onto the grid
 * (loop modes gpu.x, gpu.y, gpu.z).  schedule() calls it for a TARGET_CUDA target. */
void schedule_gpu(IrProgram *ir, const Target *target);

#endif
