/* opt.h — loop IR optimisations (opt.c): constant buffers folded into their readers, NaN-safe
 * constant folding, virtualisation of tensors read once at the pattern they were written in,
 * dead-store elimination. */
#ifndef TSR_OPT_H
#define TSR_OPT_H

#include "ir/ir.h"

void optimise(IrProgram *ir);

#endif
