/* alloc.c — 64-byte-aligned, zeroed storage of cells of any size, with 64-bit sizes.
 *
 * 64 bytes is a cache line and the widest vector register (AVX-512), so generated loops can use
 * aligned vector loads on any buffer.  Sizes are checked for overflow before multiplying. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void *tsr_alloc_cells(int64_t cells, size_t cell_bytes) {
    if (cells < 0) {
        tsr_error(TSR_ERR_ARGUMENT, "cannot allocate %" PRId64 " cells: a count is at least 0", cells);
        return NULL;
    }
    if (cells == 0) cells = 1; /* a valid pointer, as malloc(0) may not give */
    if ((uint64_t)cells > (SIZE_MAX - 63) / cell_bytes) {
        tsr_error(TSR_ERR_NOMEM, "cannot allocate %" PRId64 " cells of %zu bytes: too large for this machine", cells,
                  cell_bytes);
        return NULL;
    }
    size_t bytes = ((size_t)cells * cell_bytes + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) {
        tsr_error(TSR_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

float *tsr_alloc_floats(int64_t cells) { return tsr_alloc_cells(cells, sizeof(float)); }

void tsr_free(void *p) { free(p); }
