/* buckets.h — means across processes cut into buckets that overlap the backward pass (buckets.c). */
#ifndef TSR_BUCKETS_H
#define TSR_BUCKETS_H

#include "ir/ir.h"

/* Every REDUCE call of the program whose buffers become ready before it: REDUCE_BEGIN calls of
 * buckets of at least `bucket_cells` cells as they become ready, the call itself the REDUCE_END
 * (0: none cut). */
void bucket_collectives(IrProgram *ir, uint64_t bucket_cells);
/* The bucket size when the command line gives none: none (one message after the backward pass).
 * With MPI the messages move on only inside the library's calls, so on a machine whose cores all
 * compute, buckets do not overlap anything (docs/performance.md: the GPT step on two processes
 * took 138-144 ms with buckets of 1 MB and 135-137 ms with one message). */
enum { BUCKET_CELLS_DEFAULT = 0 };

#endif
