/* print.c — printing tensors as grids, the way OCANNL shows them.
 *
 * The reference executor (tsrc --run --interp) and compiled programs print through this one
 * function, so their outputs can be compared byte for byte.  Numbers are printed with %g; with
 * TSR_PRINT_EXACT=1 in the environment, with %.9g, which tells every float apart (the
 * differential tests compare executors bit for bit that way). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void tsr_print_tensor(FILE *out, const char *name, const char *shape_text, const float *data, uint32_t rank,
                      const int64_t *dims) {
    fprintf(out, "%s : %s\n", name, shape_text);
    if (!data) return;
    int64_t size = 1;
    for (uint32_t a = 0; a < rank; a++) size *= dims[a];
    int64_t line = rank ? dims[rank - 1] : 1;
    int64_t block = rank >= 2 ? line * dims[rank - 2] : line;
    if (line == 0) return;
    const char *exact = getenv("TSR_PRINT_EXACT");
    bool all_digits = exact && strcmp(exact, "1") == 0;
    for (int64_t c = 0; c < size; c += line) {
        if (rank > 2 && c % block == 0) {
            if (c) fputc('\n', out);
            fputs("  [", out);
            int64_t rest = c / block;
            int64_t idx[rank];
            for (uint32_t a = rank - 2; a-- > 0;) {
                idx[a] = rest % dims[a];
                rest /= dims[a];
            }
            for (uint32_t a = 0; a + 2 < rank; a++) fprintf(out, "%s%" PRId64, a ? ", " : "", idx[a]);
            fputs("]\n", out);
        }
        fputs("   ", out);
        for (int64_t j = 0; j < line; j++) {
            if (all_digits) fprintf(out, " %.9g", (double)data[c + j]);
            else fprintf(out, " %g", (double)data[c + j]);
        }
        fputc('\n', out);
    }
}
