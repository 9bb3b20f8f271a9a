/* plan.h — the program plan: what an executable does when it runs (plan.c). */
#ifndef TSR_PLAN_H
#define TSR_PLAN_H

#include "ir/assign.h"

/* Fill ir->symbols, ir->prints and ir->main from the program's `main` (or the implicit main:
 * run every routine in order, then print every named tensor and gradient); copy into the IR
 * what the back half needs of the program: routine spans and which functions are exported,
 * the named tensors and gradients that object mode exports, the data sets.  After this,
 * nothing downstream reads the Program or the tensor graph.  Functions must be lowered
 * already, one per routine in the program's order (or the implicit "forward").  Marks every
 * buffer a print reads as kept.  False after reporting errors (a printed tensor with more than
 * one cell under a numeric conversion). */
bool plan_build(IrProgram *ir, const AssignResult *assigned);
/* A hash of the loop IR (ir_dump's text: its buffers and functions, places in the source left
 * out) and of its main, which a distributed run's processes compare (IrProgram.program_hash):
 * the same program compiled by the same tsrc with the same --tf32, --no-opt and --bucket-cells
 * gives the same hash whatever --cpu or -O (main.c takes it after the optimiser, before the
 * schedule). */
uint64_t plan_program_hash(const IrProgram *ir);

#endif
