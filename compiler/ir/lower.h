/* lower.h — assignments with projections become loop nests (lower.c). */
#ifndef TSR_LOWER_H
#define TSR_LOWER_H

#include "ir/assign.h"

/* Append the loop nest of one assignment to `fn`. */
void lower_assignment(IrProgram *ir, IrFunction *fn, const Assignment *a);
/* A new function of `ir` made of these assignments in order.  The pointer is valid until the
 * next function is added. */
IrFunction *lower_function(IrProgram *ir, const char *name, Assignment *const *assignments, uint32_t count);

#endif
