/* opt.h — loop IR optimisations (opt.c): constant buffers folded into their readers, NaN-safe
 * constant folding, virtualisation of tensors read once at the pattern they were written in,
 * dead-store elimination, copies read from their source; for the GPU, small nests recomputed
 * where read. */
#ifndef TSR_OPT_H
#define TSR_OPT_H

#include "ir/ir.h"

/* `launches`: each top-level nest will be a launch of its own (the GPU), so that small nests
 * are recomputed where they are read (opt.c rule 7). */
void optimise(IrProgram *ir, bool launches);

#endif
