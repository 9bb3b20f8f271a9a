/* explain.h — `tsrc --explain=NAME` (explain.c): the derivation of a tensor's shape, axis by
 * axis, and the loop nests of the assignments that write it. */
#ifndef TSR_EXPLAIN_H
#define TSR_EXPLAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "elab/elab.h"

/* Explain each of `names` (as --print-shapes names tensors; `NAME.grad` for a gradient) to
 * `out`, separated by blank lines.  An unknown name is reported (located-free error).  `seed`
 * is the parameter initialisation's, as the assignments are built with it.  Returns false
 * after reporting an error. */
bool explain_tensors(Program *program, FILE *out, const char *const *names, uint32_t count, uint64_t seed);

#endif
