/* print.c — printing tensors as grids, the way OCANNL shows them.
 *
 * The reference executor (tsrc --run --interp) and compiled programs print through this one
 * function, so their outputs can be compared byte for byte.  Numbers are printed with %g; with
 * TSR_PRINT_EXACT=1 in the environment, with %.9g, which tells every float apart (the
 * differential tests compare executors bit for bit that way); with TSR_PRINT_EXACT=2, with %g
 * and then `@` and %.9g, so that one run gives both (make check compares the %g part with a
 * golden file and the whole with other executors).  Every NaN prints as "nan": its
 * sign bit and payload are not part of what a program computes (x86 makes 0/0 negative, and
 * LLVM and the reference executor negate NaNs differently), so they are dropped.  An I32, U8 or BOOL
 * buffer's cells are int32 values and print as integers (%d), whatever the environment says; an F64
 * buffer's print with %g, or %.17g (every double told apart) under TSR_PRINT_EXACT=1; a BF16 or
 * F16 buffer's cells print as the float values they hold (widened exactly), as F32 cells do. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

double tsr_print_canonical(double v) { return isnan(v) ? (double)NAN : v; }

void tsr_print_tensor(FILE *out, const char *name, const char *shape_text, const float *data, uint32_t rank,
                      const int64_t *dims) {
    tsr_print_cells(out, name, shape_text, data, TSR_DTYPE_F32, rank, dims);
}

/* How float cells print: %g, in full (TSR_PRINT_EXACT=1), or both (TSR_PRINT_EXACT=2). */
typedef enum Digits { DIGITS_SHORT, DIGITS_ALL, DIGITS_BOTH } Digits;

/* One cell, preceded by a space. */
static void print_cell(FILE *out, const float *data, uint8_t dtype, int64_t cell, Digits digits) {
    if (tsr_dtype_integer(dtype)) {
        fprintf(out, " %" PRId64, tsr_cell_integer(data, dtype, cell));
        return;
    }
    double v = tsr_print_canonical(tsr_cell_value(data, dtype, cell));
    fputc(' ', out);
    if (digits != DIGITS_ALL) fprintf(out, "%g", v);
    if (digits == DIGITS_BOTH) fputc('@', out);
    if (digits != DIGITS_SHORT) fprintf(out, dtype == TSR_DTYPE_F64 ? "%.17g" : "%.9g", v);
}

void tsr_print_cells(FILE *out, const char *name, const char *shape_text, const float *data, uint8_t dtype,
                     uint32_t rank, const int64_t *dims) {
    if (!out) return;
    fprintf(out, "%s : %s\n", name ? name : "", shape_text ? shape_text : "");
    if (!data || (rank > 0 && !dims)) return;
    int64_t size = 1;
    for (uint32_t a = 0; a < rank; a++) size *= dims[a];
    int64_t line = rank ? dims[rank - 1] : 1;
    int64_t block = rank >= 2 ? line * dims[rank - 2] : line;
    if (line == 0) return;
    const char *exact = getenv("TSR_PRINT_EXACT");
    Digits digits = !exact ? DIGITS_SHORT : strcmp(exact, "1") == 0 ? DIGITS_ALL : strcmp(exact, "2") == 0 ? DIGITS_BOTH
                  : DIGITS_SHORT;
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
        for (int64_t j = 0; j < line; j++) print_cell(out, data, dtype, c + j, digits);
        fputc('\n', out);
    }
}
