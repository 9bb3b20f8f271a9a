/* interp.h — the reference executor of the loop IR (interp.c).
 *
 * Straightforward and obviously correct, not fast: the oracle that generated code is tested
 * against, and `tsrc --run --interp`.  Buffers hold single-precision floats, computed as
 * ir.c's scalar_op_eval() defines; every index is bounds-checked. */
#ifndef TSR_INTERP_H
#define TSR_INTERP_H

#include "ir.h"

typedef struct Interp Interp;

/* Allocate and initialise every buffer: literal values, fills, parameters without an initial
 * value and inputs (nobody fills them here) with tsr_uniform() from ir->seed.  NULL after
 * printing an error (out of memory; data sources, which this executor cannot produce). */
Interp *interp_new(const IrProgram *ir);
void interp_free(Interp *in);

/* Give index symbol `name` its run-time value. */
void interp_set_symbol(Interp *in, const char *name, int64_t value);
/* Run a function; false after printing a run-time error. */
bool interp_run(Interp *in, const IrFunction *fn);

const float *interp_buffer(const Interp *in, uint32_t buffer);
/* "NAME : SHAPE" and the values as a grid: the last axis along a line, one line per index of
 * the axis before, a blank line between blocks of higher axes, each block headed by its
 * indices.  Numbers are printed with %g (6 significant digits). */
void interp_print(const Interp *in, uint32_t buffer, const char *name, FILE *out);

/* The parameter initialisation: a uniform number in [-1, 1) for cell `cell` of the tensor
 * named `name` (Philox4x32-10 keyed by the seed; independent of thread count and order). */
float tsr_uniform(uint64_t seed, const char *name, uint64_t cell);

#endif
