/* half_data_test.c — unit tests of reading data into bf16 and f16 tensors, and float16 files into
 * f32 and f64 ones (runtime/data.c's typed loaders and its reader of checkpoint members).
 *
 * What it does: writes .npy files (float16, float32, float64, int32, int64) and CSV files into a
 * fresh directory under /tmp and reads them into BF16 and F16 tensors, comparing the 2-byte cells
 * with bit patterns worked out by hand (0.1 is bf16 0x3dcd and f16 0x2e66, 65519 is f16 65504 and
 * 65520 infinity, …): each value rounded once to nearest even — a float64 1 + 2^-8 + 2^-30 is
 * bf16 1.0078125, not 1 (what a rounding through float32 gives), the int64 2^60 + 2^52 + 1 is
 * bf16 2^60 + 2^53, not 2^60 (through float64) —, a float32 that bf16 holds exactly and a
 * float16 into f16 keep their bits (NaN payloads too: a bf16 tensor saved as float32 loads back
 * bit for bit), and the cells after the tensor are not written (2-byte cells).  float16 files
 * widen exactly into f32 and f64 tensors.  Errors: a uint8 file names the dtypes a float tensor
 * reads, a checkpoint's int64 array for a bf16 (f16) tensor says to convert with
 * astype(numpy.float32) (float16).  Requires libtsr (-Iruntime: internal.h, tsr.h's conversions).
 * Removes its directory.  One line per failure; last line "N passed, N failed"; exits 1 on any
 * failure. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#include "check.h"
#include "temp_dir.h"

/* A .npy 1.0 file's bytes (malloc'd, length in *len): the header of `descr` and `shape`, then
 * `data`. */
static unsigned char *npy_bytes(const char *descr, const char *shape, const void *data, size_t data_len, size_t *len) {
    char dict[160];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    int header = (10 + n + 1 + 63) / 64 * 64 - 10;
    *len = 10 + (size_t)header + data_len;
    unsigned char *bytes = malloc(*len);
    unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)header, (unsigned char)(header >> 8)};
    memcpy(bytes, preamble, 10);
    memset(bytes + 10, ' ', (size_t)header);
    memcpy(bytes + 10, dict, (size_t)n);
    bytes[10 + header - 1] = '\n';
    memcpy(bytes + 10 + header, data, data_len);
    return bytes;
}

static void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t data_len) {
    size_t len;
    unsigned char *bytes = npy_bytes(descr, shape, data, data_len, &len);
    FILE *f = fopen(temp_path(name), "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
        printf("FAIL cannot write %s\n", temp_path(name));
        exit(1);
    }
    free(bytes);
}

static void write_text(const char *name, const char *text) {
    FILE *f = fopen(temp_path(name), "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("FAIL cannot write %s\n", temp_path(name));
        exit(1);
    }
}

/* Reads `name` (.npy, or CSV with `csv`) into 6 cells of type `dtype` and shape [6] with a guard
 * cell after them, and compares them with `want`; the guard must stay 0xbeef. */
static void expect_cells(const char *what, const char *name, bool csv, uint8_t dtype, const uint16_t want[6]) {
    static const int64_t d6[] = {6};
    uint16_t cells[7] = {0};
    cells[6] = 0xbeef;
    int status = csv ? tsr_load_csv_typed(temp_path(name), cells, dtype, 1, d6, "x")
                     : tsr_load_npy_typed(temp_path(name), cells, dtype, 1, d6, "x");
    char detail[512];
    if (status != TSR_OK) {
        snprintf(detail, sizeof detail, "%s", tsr_last_error());
    } else {
        int n = snprintf(detail, sizeof detail, "got");
        for (int i = 0; i < 7; i++) n += snprintf(detail + n, sizeof detail - (size_t)n, " %04x", cells[i]);
        n += snprintf(detail + n, sizeof detail - (size_t)n, ", expected");
        for (int i = 0; i < 6; i++) n += snprintf(detail + n, sizeof detail - (size_t)n, " %04x", want[i]);
    }
    check(status == TSR_OK && memcmp(cells, want, 6 * sizeof *want) == 0 && cells[6] == 0xbeef, what, detail);
}

enum { BF16 = TSR_DTYPE_BF16, F16 = TSR_DTYPE_F16 };

static void from_floats(void) {
    /* float64: one rounding (1 + 2^-8 + 2^-30 would become the tie 1 + 2^-8 through float32). */
    double f8[6] = {0.1, 1.0 + 0x1p-8 + 0x1p-30, -0.0, 1e300, 65519.0, 0x1p-25 + 0x1p-40};
    write_npy("f8.npy", "<f8", "(6,)", f8, sizeof f8);
    expect_cells("npy float64 into bf16, rounded once", "f8.npy", false, BF16,
                 (const uint16_t[]){0x3dcd, 0x3f81, 0x8000, 0x7f80, 0x4780, 0x3300});
    expect_cells("npy float64 into f16, rounded once", "f8.npy", false, F16,
                 (const uint16_t[]){0x2e66, 0x3c04, 0x8000, 0x7c00, 0x7bff, 0x0001});

    /* float32: ties to even; a float32 bf16 holds exactly keeps its bits, a NaN's payload too. */
    uint32_t f4[6] = {0x3f808000u /* 1 + 2^-8: bf16's tie, to 1 */, 0x3f818000u /* a tie, up to even */,
                      0x7fa10000u /* a signalling NaN bf16 holds */, 0x33000000u /* 2^-25: f16's tie with 0 */,
                      0x33400000u /* 0.75 * 2^-24 */, 0x477fe000u /* 65504 */};
    write_npy("f4.npy", "<f4", "(6,)", f4, sizeof f4);
    expect_cells("npy float32 into bf16: ties to even, exact values keep their bits (NaN payloads)", "f4.npy", false,
                 BF16, (const uint16_t[]){0x3f80, 0x3f82, 0x7fa1, 0x3300, 0x3340, 0x4780});
    expect_cells("npy float32 into f16: ties to even, subnormals", "f4.npy", false, F16,
                 (const uint16_t[]){0x3c04, 0x3c0c, 0x7e00, 0x0000, 0x0001, 0x7bff});

    /* float16: into f16 bit for bit (a NaN's payload too), into bf16 rounded. */
    uint16_t f2[6] = {0x3c00, 0x0001 /* 2^-24 */, 0x7d01 /* NaN with a payload */, 0x7bff /* 65504 */, 0xfc00,
                      0x3555 /* 0.33325195 */};
    write_npy("f2.npy", "<f2", "(6,)", f2, sizeof f2);
    expect_cells("npy float16 into f16, bit for bit", "f2.npy", false, F16, f2);
    expect_cells("npy float16 into bf16, rounded", "f2.npy", false, BF16,
                 (const uint16_t[]){0x3f80, 0x3380, 0x7fc0, 0x4780, 0xff80, 0x3eab});

    /* float16 widens exactly into f32 and f64. */
    static const int64_t d6[] = {6};
    float out[7] = {0};
    out[6] = 99.0f;
    int status = tsr_load_npy_typed(temp_path("f2.npy"), out, TSR_DTYPE_F32, 1, d6, "x");
    check(status == TSR_OK && out[0] == 1.0f && out[1] == 0x1p-24f && isnan(out[2]) && out[3] == 65504.0f &&
              out[4] == -INFINITY && out[5] == 0x1.554p-2f && out[6] == 99.0f,
          "npy float16 into f32, exactly", tsr_last_error());
    double wide[7] = {0};
    wide[6] = 99.0;
    status = tsr_load_npy_typed(temp_path("f2.npy"), wide, TSR_DTYPE_F64, 1, d6, "x");
    check(status == TSR_OK && wide[0] == 1.0 && wide[1] == 0x1p-24 && isnan(wide[2]) && wide[3] == 65504.0 &&
              wide[4] == -INFINITY && wide[5] == 0x1.554p-2 && wide[6] == 99.0,
          "npy float16 into f64, exactly", tsr_last_error());
}

static void from_integers(void) {
    int32_t i4[6] = {1, -2, 65519, 65520, 16777217 /* 2^24 + 1 */, 257};
    write_npy("i4.npy", "<i4", "(6,)", i4, sizeof i4);
    expect_cells("npy int32 into bf16", "i4.npy", false, BF16,
                 (const uint16_t[]){0x3f80, 0xc000, 0x4780, 0x4780, 0x4b80, 0x4380});
    expect_cells("npy int32 into f16 (65520 is infinity)", "i4.npy", false, F16,
                 (const uint16_t[]){0x3c00, 0xc000, 0x7bff, 0x7c00, 0x7c00, 0x5c04});
    /* 2^60 + 2^52 + 1 is above the midpoint of bf16's 2^60 and 2^60 + 2^53, but float64 makes it
     * the midpoint; the other extremes of int64. */
    int64_t i8[6] = {((int64_t)1 << 60) + ((int64_t)1 << 52) + 1, -(((int64_t)1 << 60) + ((int64_t)1 << 52) + 1),
                     INT64_MIN, INT64_MAX, 2049, -2051};
    write_npy("i8.npy", "<i8", "(6,)", i8, sizeof i8);
    expect_cells("npy int64 into bf16, rounded once", "i8.npy", false, BF16,
                 (const uint16_t[]){0x5d81, 0xdd81, 0xdf00, 0x5f00, 0x4500, 0xc500});
    expect_cells("npy int64 into f16", "i8.npy", false, F16,
                 (const uint16_t[]){0x7c00, 0xfc00, 0xfc00, 0x7c00, 0x6800, 0xe802});

    unsigned char u1[6] = {1, 2, 3, 4, 5, 255};
    write_npy("u1.npy", "|u1", "(6,)", u1, sizeof u1);
    expect_cells("npy uint8 into bf16", "u1.npy", false, BF16, (const uint16_t[]){0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x437f});
    uint16_t u2[6] = {0, 257 /* bf16: a tie, to even 256 */, 259, 2049 /* f16: a tie, to even 2048 */, 65535, 7};
    write_npy("u2.npy", "<u2", "(6,)", u2, sizeof u2);
    expect_cells("npy uint16 into bf16, rounded once", "u2.npy", false, BF16,
                 (const uint16_t[]){0x0000, 0x4380, 0x4382, 0x4500, 0x4780, 0x40e0});
    expect_cells("npy uint16 into f16, rounded once", "u2.npy", false, F16,
                 (const uint16_t[]){0x0000, 0x5c04, 0x5c0c, 0x6800, 0x7c00, 0x4700});
    unsigned char complex64[48] = {0};
    write_npy("c8.npy", "<c8", "(6,)", complex64, sizeof complex64);
    static const int64_t d6[] = {6};
    uint16_t cells[6];
    int status = tsr_load_npy_typed(temp_path("c8.npy"), cells, BF16, 1, d6, "x");
    char want[400];
    snprintf(want, sizeof want, "data 'x': '%s': dtype '<c8' is not supported (float16, float32, float64, bool, int8, "
             "int16, int32, int64, uint8, uint16, uint32, uint64)", temp_path("c8.npy"));
    check(status == TSR_ERR_DATA && strcmp(tsr_last_error(), want) == 0, "npy complex64 into bf16: the dtypes it reads",
          tsr_last_error());
}

static void from_csv(void) {
    write_text("x.csv", "0.1, -0, 1e6\n65519 nan 1.0078125000000001\n");
    expect_cells("csv into bf16", "x.csv", true, BF16, (const uint16_t[]){0x3dcd, 0x8000, 0x4974, 0x4780, 0x7fc0, 0x3f81});
    expect_cells("csv into f16", "x.csv", true, F16, (const uint16_t[]){0x2e66, 0x8000, 0x7c00, 0x7bff, 0x7e00, 0x3c08});
}

/* Checkpoint members: a float array of any width loads into a half tensor; an integer array is
 * an error naming both types and the NumPy type to convert to. */
static void from_members(void) {
    static const int64_t d6[] = {6};
    uint32_t f4[6] = {0x3f800000u, 0x7fa10000u, 0x3dcd0000u, 0xff800000u, 0x00010000u, 0x80000000u};
    size_t len;
    unsigned char *bytes = npy_bytes("<f4", "(6,)", f4, sizeof f4, &len);
    uint16_t cells[6];
    int status = tsr_load_npy_member(bytes, len, cells, BF16, 1, d6, "ck.npz", "w");
    check(status == TSR_OK && cells[0] == 0x3f80 && cells[1] == 0x7fa1 && cells[2] == 0x3dcd && cells[3] == 0xff80 &&
              cells[4] == 0x0001 && cells[5] == 0x8000,
          "checkpoint: a bf16 tensor saved as float32 loads back bit for bit", tsr_last_error());
    free(bytes);
    int64_t i8[6] = {1, 2, 3, 4, 5, 6};
    bytes = npy_bytes("<i8", "(6,)", i8, sizeof i8, &len);
    status = tsr_load_npy_member(bytes, len, cells, BF16, 1, d6, "ck.npz", "w");
    check(status == TSR_ERR_DATA && strcmp(tsr_last_error(), "checkpoint 'ck.npz': array 'w': the tensor is bf16 but the "
                                           "array holds int64 numbers: convert it with numpy's astype(numpy.float32)") == 0,
          "checkpoint: an int64 array for a bf16 tensor", tsr_last_error());
    status = tsr_load_npy_member(bytes, len, cells, F16, 1, d6, "ck.npz", "w");
    check(status == TSR_ERR_DATA && strcmp(tsr_last_error(), "checkpoint 'ck.npz': array 'w': the tensor is f16 but the "
                                           "array holds int64 numbers: convert it with numpy's astype(numpy.float16)") == 0,
          "checkpoint: an int64 array for an f16 tensor", tsr_last_error());
    free(bytes);
}

int main(void) {
    if (!make_temp_dir("half_data_test")) return 1;
    from_floats();
    from_integers();
    from_csv();
    from_members();
    remove_temp_dir();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
