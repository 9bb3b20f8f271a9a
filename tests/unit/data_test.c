/* data_test.c — unit tests of the runtime's data sets (runtime/data.c).
 *
 * What it does: checks the generators (half moons, circles, spirals) for determinism in the
 * seed, alternating ±1 labels, points exactly on their curves without noise, noise of the
 * requested standard deviation, and counts of 0, 1 and 2; writes .npy files byte by byte
 * (versions 1.0–3.0, float32/float64/int32/int64, headers in odd layouts, scalars, and broken
 * files: bad magic, Fortran order, big-endian, unsupported dtype, truncated, trailing bytes,
 * wrong shape, malformed headers) and CSV files (separators, header lines, comments, CRLF,
 * wrong field and row counts, junk) into a fresh directory under /tmp and compares the values
 * read, or the whole error message after the "data 'WHAT': 'PATH'" prefix; and feeds both
 * loaders every truncation of good files, which must give TSR_ERR_DATA (a cut CSV file lacks
 * its last newline), and random corruptions, which must give TSR_OK or TSR_ERR_DATA and never
 * crash.  Requires libtsr's data.c, error.c and rng.c (-Iruntime).
 * Removes its directory.  One line per failure; last line "N passed, N failed"; exits 1 on any
 * failure. */
#include <dirent.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsr.h"

#include "check.h"
#include "temp_dir.h"

/* ---- Files ---------------------------------------------------------------------------------- */

static void write_file(const char *name, const void *bytes, size_t len) {
    FILE *f = fopen(temp_path(name), "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
        printf("FAIL cannot write test file %s\n", temp_path(name));
        exit(1);
    }
}

/* A growable byte buffer for building files. */
typedef struct Bytes {
    unsigned char data[1 << 16];
    size_t len;
} Bytes;

static void put(Bytes *b, const void *bytes, size_t n) {
    if (b->len + n > sizeof b->data) {
        printf("FAIL test file too large\n");
        exit(1);
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

/* `size` bytes of `value`, least significant first. */
static void put_le(Bytes *b, uint64_t value, int size) {
    for (int i = 0; i < size; i++) {
        unsigned char byte = (unsigned char)(value >> (8 * i));
        put(b, &byte, 1);
    }
}

static void put_f4(Bytes *b, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_le(b, bits, 4);
}

static void put_f8(Bytes *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_le(b, bits, 8);
}

/* The magic, version major.0, header length and `dict` padded with spaces and a '\n' so that
 * the data starts at a multiple of 64, as numpy writes it. */
static void put_npy_header(Bytes *b, int major, const char *dict) {
    size_t length_bytes = major == 1 ? 2 : 4;
    size_t unpadded = 8 + length_bytes + strlen(dict) + 1;
    size_t header_len = strlen(dict) + 1 + (64 - unpadded % 64) % 64;
    put(b, "\x93NUMPY", 6);
    unsigned char version[2] = {(unsigned char)major, 0};
    put(b, version, 2);
    put_le(b, header_len, (int)length_bytes);
    put(b, dict, strlen(dict));
    for (size_t i = strlen(dict) + 1; i < header_len; i++) put(b, " ", 1);
    put(b, "\n", 1);
}

/* ---- Loader checks ---------------------------------------------------------------------------- */

typedef int (*loader_fn)(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what);

/* Loads file `name` (shape rank/dims) and compares with `expected` (n values; NaN matches NaN). */
static void expect_values(const char *what, loader_fn load, const char *name, uint32_t rank, const int64_t *dims,
                          const float *expected, size_t n) {
    float out[64];
    for (size_t i = 0; i < 64; i++) out[i] = -12345.0f;
    int status = load(temp_path(name), out, rank, dims, "x");
    if (status != TSR_OK) {
        check(false, what, tsr_last_error());
        return;
    }
    for (size_t i = 0; i < n; i++) {
        bool same = isnan(expected[i]) ? isnan(out[i]) : out[i] == expected[i];
        if (!same) {
            char detail[128];
            snprintf(detail, sizeof detail, "value %zu is %.9g, expected %.9g", i, out[i], expected[i]);
            check(false, what, detail);
            return;
        }
    }
    check(out[n] == -12345.0f, what, "wrote past the tensor");
}

/* Loads file `name` as tensor 'x' and expects TSR_ERR_DATA with the message
 * "data 'x': 'PATH'" followed by exactly `tail`. */
static void expect_error(const char *what, loader_fn load, const char *name, uint32_t rank, const int64_t *dims,
                         const char *tail) {
    float out[64];
    int status = load(temp_path(name), out, rank, dims, "x");
    char expected[512];
    snprintf(expected, sizeof expected, "data 'x': '%s'%s", temp_path(name), tail);
    if (status != TSR_ERR_DATA) {
        char detail[600];
        snprintf(detail, sizeof detail, "status %d (%s), expected a data error", status, tsr_last_error());
        check(false, what, detail);
    } else if (strcmp(tsr_last_error(), expected) != 0) {
        char detail[1200];
        snprintf(detail, sizeof detail, "\n    got:      %s\n    expected: %s", tsr_last_error(), expected);
        check(false, what, detail);
    } else {
        check(true, what, NULL);
    }
}

/* Loads a file that may be anything: the loader must return TSR_OK or TSR_ERR_DATA, with a
 * message when it fails. */
static bool survives(loader_fn load, const char *name, uint32_t rank, const int64_t *dims) {
    float out[64];
    int status = load(temp_path(name), out, rank, dims, "x");
    return status == TSR_OK || (status == TSR_ERR_DATA && strncmp(tsr_last_error(), "data 'x': '", 11) == 0);
}

/* ---- .npy ------------------------------------------------------------------------------------ */

static void npy_good(void) {
    static const int64_t d23[] = {2, 3}, d3[] = {3}, d22[] = {2, 2};
    const float v6[] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 65504.0f};
    Bytes *b = calloc(1, sizeof *b);

    put_npy_header(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    for (int i = 0; i < 6; i++) put_f4(b, v6[i]);
    write_file("f4.npy", b->data, b->len);
    expect_values("npy v1.0 <f4 (2, 3)", tsr_load_npy, "f4.npy", 2, d23, v6, 6);

    b->len = 0;
    put_npy_header(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }");
    put_f8(b, 0.1);
    put_f8(b, -1e30);
    put_f8(b, 1e300);
    write_file("f8.npy", b->data, b->len);
    const float f8_expected[] = {0.1f, -1e30f, INFINITY};
    expect_values("npy v1.0 <f8 (3,)", tsr_load_npy, "f8.npy", 1, d3, f8_expected, 3);

    b->len = 0;
    put_npy_header(b, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }");
    const int64_t i8[] = {-5, 0, (int64_t)1 << 40, INT64_MIN};
    for (int i = 0; i < 4; i++) put_le(b, (uint64_t)i8[i], 8);
    write_file("i8.npy", b->data, b->len);
    const float i8_expected[] = {-5.0f, 0.0f, 1099511627776.0f, -9223372036854775808.0f};
    expect_values("npy v1.0 <i8 (2, 2)", tsr_load_npy, "i8.npy", 2, d22, i8_expected, 4);

    b->len = 0;
    put_npy_header(b, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }");
    const int32_t i4[] = {-1, 7, INT32_MAX};
    for (int i = 0; i < 3; i++) put_le(b, (uint32_t)i4[i], 4);
    write_file("i4.npy", b->data, b->len);
    const float i4_expected[] = {-1.0f, 7.0f, 2147483648.0f};
    expect_values("npy v1.0 <i4 (3,)", tsr_load_npy, "i4.npy", 1, d3, i4_expected, 3);

    for (int major = 2; major <= 3; major++) {
        b->len = 0;
        put_npy_header(b, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        for (int i = 0; i < 6; i++) put_f4(b, v6[i]);
        write_file("v23.npy", b->data, b->len);
        char what[64];
        snprintf(what, sizeof what, "npy v%d.0 <f4", major);
        expect_values(what, tsr_load_npy, "v23.npy", 2, d23, v6, 6);
    }

    /* Keys in another order, odd blanks, double quotes, no trailing comma, native byte order. */
    b->len = 0;
    put_npy_header(b, 1, "{ \"shape\" :( 2 ,3 , ) ,'fortran_order':False,\t'descr' : '=f4'}");
    for (int i = 0; i < 6; i++) put_f4(b, v6[i]);
    write_file("odd.npy", b->data, b->len);
    expect_values("npy header in another order and layout", tsr_load_npy, "odd.npy", 2, d23, v6, 6);

    /* Python 2 wrote long sizes as 3L; a header without padding or newline. */
    b->len = 0;
    const char *py2 = "{'descr': '|f4', 'fortran_order': False, 'shape': (3L,)}";
    put(b, "\x93NUMPY\x01\x00", 8);
    put_le(b, strlen(py2), 2);
    put(b, py2, strlen(py2));
    for (int i = 0; i < 3; i++) put_f4(b, v6[i]);
    write_file("py2.npy", b->data, b->len);
    expect_values("npy Python 2 header, unpadded", tsr_load_npy, "py2.npy", 1, d3, v6, 3);

    b->len = 0;
    put_npy_header(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
    put_f4(b, 42.5f);
    write_file("scalar.npy", b->data, b->len);
    const float scalar[] = {42.5f};
    expect_values("npy scalar ()", tsr_load_npy, "scalar.npy", 0, NULL, scalar, 1);

    b->len = 0;
    put_npy_header(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }");
    write_file("empty.npy", b->data, b->len);
    static const int64_t d03[] = {0, 3};
    expect_values("npy empty (0, 3)", tsr_load_npy, "empty.npy", 2, d03, NULL, 0);
    free(b);
}

/* Writes a v1.0 file with header `dict` and `data_bytes` bytes of data (value 1.0f repeated). */
static void write_npy(const char *name, const char *dict, size_t data_bytes) {
    Bytes *b = calloc(1, sizeof *b);
    put_npy_header(b, 1, dict);
    for (size_t i = 0; i < data_bytes / 4; i++) put_f4(b, 1.0f);
    put(b, "\0\0\0", data_bytes % 4);
    write_file(name, b->data, b->len);
    free(b);
}

static void npy_errors(void) {
    static const int64_t d43[] = {4, 3}, d3[] = {3}, d31[] = {3, 1};
    const char *f4_43 = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }";

    expect_error("npy missing file", tsr_load_npy, "nothing.npy", 2, d43, ": cannot open: No such file or directory");
    expect_error("npy directory", tsr_load_npy, "", 2, d43, ": is a directory, not a regular file");

    write_file("magic.npy", "\x93NUMPZ\x01\x00\x10\x00{}", 12);
    expect_error("npy bad magic", tsr_load_npy, "magic.npy", 2, d43, ": is not a .npy file (bad magic)");
    write_file("zero.npy", "", 0);
    expect_error("npy empty file", tsr_load_npy, "zero.npy", 2, d43, ": is empty, not a .npy file");
    write_file("short.npy", "\x93NUMPY\x01", 7);
    expect_error("npy magic only", tsr_load_npy, "short.npy", 2, d43, ": is not a .npy file (bad magic)");
    write_file("v4.npy", "\x93NUMPY\x04\x00\x10\x00", 10);
    expect_error("npy version 4.0", tsr_load_npy, "v4.npy", 2, d43,
                 ": has .npy format version 4.0 (1.0, 2.0 and 3.0 are supported)");
    write_file("v2short.npy", "\x93NUMPY\x02\x00\x10\x00", 10);
    expect_error("npy v2.0 cut in the length", tsr_load_npy, "v2short.npy", 2, d43, ": is truncated in its header");
    write_file("hdrshort.npy", "\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
    expect_error("npy header cut short", tsr_load_npy, "hdrshort.npy", 2, d43,
                 ": is truncated in its header: 7 of 118 bytes");
    write_file("hdrhuge.npy", "\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
    expect_error("npy v2.0 huge header length", tsr_load_npy, "hdrhuge.npy", 2, d43,
                 ": has a header of 4294967295 bytes (at most 1048576)");

    write_npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }", 48);
    expect_error("npy Fortran order", tsr_load_npy, "fortran.npy", 2, d43,
                 ": Fortran order is not supported (save a C-ordered array)");
    write_npy("big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 3), }", 48);
    expect_error("npy big-endian", tsr_load_npy, "big.npy", 2, d43,
                 ": dtype '>f4' is big-endian; only little-endian data is supported");
    write_npy("c8.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (4, 3), }", 96);
    expect_error("npy <c8", tsr_load_npy, "c8.npy", 2, d43,
                 ": dtype '<c8' is not supported (float16, float32, float64, bool, int8, int16, int32, int64, uint8, "
                 "uint16, uint32, uint64)");
    write_npy("struct.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 3), }", 48);
    expect_error("npy structured dtype", tsr_load_npy, "struct.npy", 2, d43,
                 ": has a malformed header: expected a string for 'descr' (structured dtypes are not supported)");

    write_npy("shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", 32);
    expect_error("npy wrong shape", tsr_load_npy, "shape.npy", 2, d43, ": expected shape (4, 3), found (4, 2)");
    write_npy("rank.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12);
    expect_error("npy wrong rank", tsr_load_npy, "rank.npy", 2, d31, ": expected shape (3, 1), found (3,)");
    expect_error("npy wrong rank, scalar expected", tsr_load_npy, "rank.npy", 0, NULL,
                 ": expected shape (), found (3,)");
    expect_values("npy (3,) read as (3,)", tsr_load_npy, "rank.npy", 1, d3, (const float[]){1, 1, 1}, 3);

    write_npy("trunc.npy", f4_43, 44);
    expect_error("npy truncated data", tsr_load_npy, "trunc.npy", 2, d43, ": is truncated: 44 of 48 data bytes");
    write_npy("trunc2.npy", f4_43, 47);
    expect_error("npy truncated mid-element", tsr_load_npy, "trunc2.npy", 2, d43,
                 ": is truncated: 47 of 48 data bytes");
    write_npy("extra.npy", f4_43, 53);
    expect_error("npy trailing bytes", tsr_load_npy, "extra.npy", 2, d43, ": has 5 bytes after its 48 data bytes");

    static const struct { const char *dict, *problem; } malformed[] = {
        {"{'descr': '<f4', 'shape': (4, 3), }", "no 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
        {"{'fortran_order': False, 'shape': (4, 3)}", "no 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), 'extra': 1}", "unknown key 'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4, 3)}", "key 'descr' appears twice"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (4, 3)}", "expected True or False for 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, -3)}", "expected a size or ')' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4 3)}", "expected ')' or ',' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,,)}", "expected a size or ')' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
         "a size in the shape is too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [4, 3]}", "expected '(' to open the shape"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (4, 3)}", "expected '}' or ',' in the header"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (4, 3)}", "expected '}' or ',' in the header"},
        {"{'descr: '<f4'", "expected ':' after a header key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3)} x", "unexpected text after the dictionary"},
        {"('descr', '<f4')", "expected '{' at the start of the header"},
        {"", "expected '{' at the start of the header"},
        {"{", "expected a string as a header key"},
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        write_npy("malformed.npy", malformed[i].dict, 48);
        char what[160], tail[200];
        snprintf(what, sizeof what, "npy malformed header %s", malformed[i].dict);
        snprintf(tail, sizeof tail, ": has a malformed header: %s", malformed[i].problem);
        expect_error(what, tsr_load_npy, "malformed.npy", 2, d43, tail);
    }

    /* A shape whose data size overflows 64 bits is refused before anything is read. */
    static const int64_t huge[] = {(int64_t)1 << 61, 2};
    write_npy("huge.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 2), }", 16);
    expect_error("npy data size overflow", tsr_load_npy, "huge.npy", 2, huge,
                 ": declares more data than can be addressed");

    /* Bad arguments are not data errors. */
    float out[4];
    static const int64_t negative[] = {-1, 3}, overflow[] = {(int64_t)1 << 62, 4};
    check(tsr_load_npy(NULL, out, 2, d43, "x") == TSR_ERR_ARGUMENT, "npy NULL path", tsr_last_error());
    check(tsr_load_npy(temp_path("f4.npy"), out, 2, negative, "x") == TSR_ERR_ARGUMENT, "npy negative size",
          tsr_last_error());
    check(tsr_load_npy(temp_path("f4.npy"), out, 2, overflow, "x") == TSR_ERR_ARGUMENT, "npy shape overflow",
          tsr_last_error());
}

/* Every truncation and many random corruptions of a good file: no crash, OK or a data error;
 * with `cuts_fail`, every truncation must be a data error. */
static void robustness(loader_fn load, const char *good, uint32_t rank, const int64_t *dims, const char *label,
                       bool cuts_fail) {
    FILE *f = fopen(temp_path(good), "rb");
    Bytes *original = calloc(1, sizeof *original), *b = calloc(1, sizeof *b);
    original->len = f ? fread(original->data, 1, sizeof original->data, f) : 0;
    if (f) fclose(f);
    bool ok = original->len > 0;
    for (size_t cut = 0; cut < original->len; cut++) {
        write_file("cut", original->data, cut);
        float out[64];
        ok = ok && (cuts_fail ? load(temp_path("cut"), out, rank, dims, "x") == TSR_ERR_DATA
                              : survives(load, "cut", rank, dims));
    }
    char what[96];
    snprintf(what, sizeof what, "%s: every truncation gives %s", label,
             cuts_fail ? "a data error" : "OK or a data error");
    check(ok, what, NULL);

    uint64_t state = 0x9E3779B97F4A7C15u;
    ok = true;
    for (int round = 0; round < 3000; round++) {
        memcpy(b->data, original->data, original->len);
        b->len = original->len;
        for (int flips = 0; flips < 1 + round % 4; flips++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            size_t at = (size_t)(state >> 33) % b->len;
            b->data[at] = (unsigned char)(state >> 20);
        }
        if (round % 7 == 0) b->len = (size_t)(state >> 40) % (b->len + 1);
        write_file("fuzz", b->data, b->len);
        ok = ok && survives(load, "fuzz", rank, dims);
    }
    snprintf(what, sizeof what, "%s: random corruptions give OK or a data error", label);
    check(ok, what, tsr_last_error());
    free(original);
    free(b);
}

/* ---- CSV ---------------------------------------------------------------------------------------- */

static void write_text(const char *name, const char *text) { write_file(name, text, strlen(text)); }

static void csv_good(void) {
    static const int64_t d23[] = {2, 3}, d6[] = {6}, d03[] = {0, 3};
    const float v6[] = {1, 2, 3, 4, 5, 6};
    static const struct { const char *what, *text; } same[] = {
        {"csv commas", "1,2,3\n4,5,6\n"},
        {"csv blanks and commas", "1 2\t3\n 4 ,5,\t6 \n"},
        {"csv header", "x, y, z\n1,2,3\n4,5,6\n"},
        {"csv quoted header", "\"x\",\"a, b\",\"z\"\n1,2,3\n4,5,6\n"},
        {"csv comments and blank lines", "# points\n\n1,2,3 # first\n   \n\t\n4,5,6\n# end"},
        {"csv header after comments", "# made by hand\n\nx y z\n1 2 3\n4 5 6\n"},
        {"csv CRLF", "x,y,z\r\n1,2,3\r\n4,5,6\r\n"},
        {"csv number forms", "1e0, +2, 3.\n.4e1, 5.000, 0x1.8p2\n"},
        {"csv after a UTF-8 byte order mark", "\xef\xbb\xbf" "1,2,3\n4,5,6\n"},
        {"csv header after a UTF-8 byte order mark", "\xef\xbb\xbf" "x,y,z\n1,2,3\n4,5,6\n"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        write_text("good.csv", same[i].text);
        expect_values(same[i].what, tsr_load_csv, "good.csv", 2, d23, v6, 6);
    }
    write_text("layout.csv", "1 2\n3\n\n4, 5, 6\n");
    expect_values("csv rank 1: any layout", tsr_load_csv, "layout.csv", 1, d6, v6, 6);
    write_text("scalar.csv", "# the answer\n42\n");
    expect_values("csv rank 0", tsr_load_csv, "scalar.csv", 0, NULL, (const float[]){42}, 1);
    write_text("special.csv", "nan, inf, -Infinity\n-0.5, 1e-50, 1e300\n");
    expect_values("csv nan, inf, tiny and huge", tsr_load_csv, "special.csv", 2, d23,
                  (const float[]){NAN, INFINITY, -INFINITY, -0.5f, 0.0f, INFINITY}, 6);
    write_text("empty.csv", "");
    expect_values("csv empty file, shape (0, 3)", tsr_load_csv, "empty.csv", 2, d03, NULL, 0);

    /* One long line: 3000 fields across many read chunks. */
    static char text[3000 * 8];
    size_t n = 0;
    for (int i = 0; i < 3000; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%d.25, ", i % 64);
    text[n - 2] = '\n';
    write_file("long.csv", text, n - 1);
    float *out = malloc(3000 * sizeof *out);
    static const int64_t d3000[] = {1, 3000};
    int status = tsr_load_csv(temp_path("long.csv"), out, 2, d3000, "x");
    bool same_values = status == TSR_OK;
    for (int i = 0; same_values && i < 3000; i++) same_values = out[i] == (float)(i % 64) + 0.25f;
    check(same_values, "csv one line of 3000 fields", tsr_last_error());
    free(out);
}

static void csv_errors(void) {
    static const int64_t d23[] = {2, 3}, d4[] = {4};
    expect_error("csv missing file", tsr_load_csv, "nothing.csv", 2, d23, ": cannot open: No such file or directory");
    expect_error("csv directory", tsr_load_csv, "", 2, d23, ": is a directory, not a regular file");

    static const struct { const char *what, *text, *tail; } errors[] = {
        {"csv too few fields", "1,2,3\n4,5\n", ":2: line has 2 fields, expected 3"},
        {"csv no final newline", "1,2,3\n4,5,6", ":2:6: the last line does not end with a newline: the file looks truncated"},
        {"csv no final newline after a comment", "1,2,3\n4,5,6 # end", ":2:12: the last line does not end with a newline: the file looks truncated"},
        {"csv lines ended by '\\r' alone", "1,2,3\r4,5,6\r",
         ":1:13: the last line does not end with a newline: its lines end in '\\r' alone (old Mac OS text), where CSV "
         "lines end in '\\n'"},
        {"csv CRLF cut after its last '\\r'", "1,2,3\r\n4,5,6\r",
         ":2:7: the last line does not end with a newline: the file looks truncated"},
        {"csv too many fields", "1,2,3\n\n4 5 6 7\n", ":3: line has 4 fields, expected 3"},
        {"csv too many rows", "1,2,3\n4,5,6\n7,8,9\n", ": has 3 rows, expected 2 for shape (2, 3)"},
        {"csv too few rows", "# one\n1,2,3\n", ": has 1 row, expected 2 for shape (2, 3)"},
        {"csv empty file", "", ": has 0 rows, expected 2 for shape (2, 3)"},
        {"csv header only", "a,b,c\n", ": has 0 rows, expected 2 for shape (2, 3); line 1 was skipped as a header"},
        {"csv junk in the first line", "1,2,x\n4,5,6\n",
         ": has 1 row, expected 2 for shape (2, 3); line 1 was skipped as a header"},
        {"csv junk word", "1,2,3\n4,abc,6\n", ":2:3: not a number: 'abc'"},
        {"csv trailing junk", "x y z\n1 2 3\n4 1.5x 6\n", ":3:3: not a number: '1.5x'"},
        {"csv second text line", "x,y,z\na,b,c\n", ":2:1: not a number: 'a'"},
        {"csv empty field", "1,2,3\n4,,6\n", ":2:3: empty field"},
        {"csv leading comma", "1,2,3\n,4,5\n", ":2:1: empty field"},
        {"csv trailing comma", "1,2,3\n4,5,6,\n", ":2:7: empty field"},
        /* on the first line too: numbers and an empty field are no header (it was skipped as one) */
        {"csv empty field on the first line", "1,,3\n4,5,6\n", ":1:3: empty field"},
        {"csv trailing comma on the first line", "1,2,3,\n4,5,6\n", ":1:7: empty field"},
        {"csv unprintable junk", "1,2,3\n4,\x01\x7f,6\n", ":2:3: not a number: '?\?'"},
        {"csv long junk", "1 2 3\n4 5 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
         ":2:5: not a number: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"},
        {"csv hex prefix only", "1 2 3\n4 5 0x\n", ":2:5: not a number: '0x'"},
    };
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        write_text("bad.csv", errors[i].text);
        expect_error(errors[i].what, tsr_load_csv, "bad.csv", 2, d23, errors[i].tail);
    }
    write_text("count.csv", "1 2\n3 4 5\n");
    expect_error("csv rank 1 count", tsr_load_csv, "count.csv", 1, d4, ": has 5 numbers, expected 4 for shape (4,)");
    expect_error("csv rank 0 count", tsr_load_csv, "count.csv", 0, NULL, ": has 5 numbers, expected 1 for shape ()");
    write_text("cut.csv", "1 2\n3 4");
    expect_error("csv rank 1 cut in the last number", tsr_load_csv, "cut.csv", 1, d4,
                 ":2:4: the last line does not end with a newline: the file looks truncated");
    write_file("nul.csv", "1,2,3\n4,5\0,6\n", 13);
    expect_error("csv NUL byte", tsr_load_csv, "nul.csv", 2, d23,
                 ":2:4: holds a NUL byte: this is no CSV text (a binary file, or text in UTF-16)");

    float out[4];
    check(tsr_load_csv(temp_path("count.csv"), out, 1, NULL, "x") == TSR_ERR_ARGUMENT, "csv NULL dims",
          tsr_last_error());
    check(tsr_load_csv(temp_path("count.csv"), out, 1, d4, NULL) == TSR_ERR_ARGUMENT, "csv NULL name",
          tsr_last_error());
}

/* ---- Generators ---------------------------------------------------------------------------------- */

typedef void (*generator_fn)(float *points, float *labels, int64_t count, double noise, uint64_t seed);

static void circles_half(float *points, float *labels, int64_t count, double noise, uint64_t seed) {
    tsr_circles(points, labels, count, noise, 0.5, seed);
}

enum { COUNT = 2001 };

static void generator_common(generator_fn generate, const char *name) {
    float *a = malloc(2 * COUNT * sizeof *a), *b = malloc(2 * COUNT * sizeof *b);
    float *clean = malloc(2 * COUNT * sizeof *clean);
    float *la = malloc(COUNT * sizeof *la), *lb = malloc(COUNT * sizeof *lb);
    char what[96];

    generate(a, la, COUNT, 0.1, 7);
    generate(b, lb, COUNT, 0.1, 7);
    snprintf(what, sizeof what, "%s: same seed, same points", name);
    check(memcmp(a, b, 2 * COUNT * sizeof *a) == 0 && memcmp(la, lb, COUNT * sizeof *la) == 0, what, NULL);

    generate(b, lb, COUNT, 0.1, 8);
    int64_t differing = 0;
    for (int64_t i = 0; i < 2 * COUNT; i++) differing += a[i] != b[i];
    snprintf(what, sizeof what, "%s: another seed, other points", name);
    check(differing > 2 * COUNT - 10, what, NULL);

    bool alternate = true;
    for (int64_t p = 0; p < COUNT; p++) alternate = alternate && la[p] == (p % 2 == 0 ? 1.0f : -1.0f);
    snprintf(what, sizeof what, "%s: labels +1, -1 alternately", name);
    check(alternate, what, NULL);

    /* The noise: the difference to the clean points, per coordinate, mean 0 and deviation 0.1,
     * x and y independent. */
    generate(clean, lb, COUNT, 0.0, 7);
    double sum[2] = {0, 0}, squares[2] = {0, 0}, cross = 0;
    for (int64_t p = 0; p < COUNT; p++) {
        double dx = (double)a[2 * p] - clean[2 * p], dy = (double)a[2 * p + 1] - clean[2 * p + 1];
        sum[0] += dx, sum[1] += dy, squares[0] += dx * dx, squares[1] += dy * dy, cross += dx * dy;
    }
    bool plausible = true;
    for (int axis = 0; axis < 2; axis++) {
        double mean = sum[axis] / COUNT, sd = sqrt(squares[axis] / COUNT - mean * mean);
        plausible = plausible && fabs(mean) < 0.01 && fabs(sd - 0.1) < 0.01;
    }
    plausible = plausible && fabs(cross / COUNT) < 0.001;
    snprintf(what, sizeof what, "%s: Gaussian noise of deviation 0.1 per coordinate", name);
    check(plausible, what, NULL);

    generate(NULL, NULL, 0, 0.1, 7);
    snprintf(what, sizeof what, "%s: count 0 touches nothing", name);
    check(true, what, NULL);
    free(a);
    free(b);
    free(clean);
    free(la);
    free(lb);
}

static const double PI = 3.14159265358979323846;

static bool near(double a, double b) { return fabs(a - b) < 1e-6; }

static void generator_shapes(void) {
    enum { N = 10 };
    float pts[2 * N], labels[N];

    tsr_half_moons(pts, labels, N, 0.0, 3);
    bool on = true;
    for (int p = 0; p < N; p += 2) on = on && near(pts[2 * p] * pts[2 * p] + pts[2 * p + 1] * pts[2 * p + 1], 1) &&
                                        pts[2 * p + 1] >= -1e-7f;
    for (int p = 1; p < N; p += 2) {
        double x = pts[2 * p] - 1.0, y = pts[2 * p + 1] - 0.5;
        on = on && near(x * x + y * y, 1) && y <= 1e-7;
    }
    check(on, "moons without noise lie on the half circles", NULL);
    check(near(pts[0], 1) && near(pts[1], 0) && near(pts[16], -1) && near(pts[17], 0),
          "moons: outer from (1,0) to (-1,0)", NULL);
    check(near(pts[2], 0) && near(pts[3], 0.5) && near(pts[18], 2) && near(pts[19], 0.5),
          "moons: inner from (0,0.5) to (2,0.5)", NULL);
    check(near(pts[4], cos(PI / 4)) && near(pts[5], sin(PI / 4)), "moons: outer angles evenly spaced", NULL);

    tsr_half_moons(pts, labels, 1, 0.0, 3);
    check(near(pts[0], 1) && near(pts[1], 0) && labels[0] == 1.0f, "moons: count 1", NULL);
    tsr_half_moons(pts, labels, 2, 0.0, 3);
    check(near(pts[0], 1) && near(pts[1], 0) && near(pts[2], 0) && near(pts[3], 0.5) && labels[0] == 1.0f &&
              labels[1] == -1.0f,
          "moons: count 2", NULL);
    tsr_half_moons(pts, labels, 3, 0.0, 3);
    check(near(pts[4], -1) && near(pts[5], 0) && near(pts[2], 0) && near(pts[3], 0.5), "moons: count 3", NULL);

    tsr_circles(pts, labels, N, 0.0, 0.3, 3);
    on = true;
    for (int p = 0; p < N; p++)
        on = on && near(hypot(pts[2 * p], pts[2 * p + 1]), p % 2 == 0 ? 1.0 : 0.3);
    check(on, "circles without noise: radii 1 and factor", NULL);
    check(near(pts[0], 1) && near(pts[1], 0) && near(pts[2], 0.3) && near(pts[4], cos(2 * PI / 5)),
          "circles: angles 2 pi k / n from 0", NULL);
    tsr_circles(pts, labels, 1, 0.0, 0.3, 3);
    check(near(pts[0], 1) && near(pts[1], 0) && labels[0] == 1.0f, "circles: count 1", NULL);

    tsr_spirals(pts, labels, N, 0.0, 3);
    on = true;
    for (int p = 0; p < N; p++) on = on && near(hypot(pts[2 * p], pts[2 * p + 1]), (p / 2 + 1) / 5.0);
    for (int p = 0; p < N; p += 2)
        on = on && near(pts[2 * p], -pts[2 * p + 2]) && near(pts[2 * p + 1], -pts[2 * p + 3]);
    check(on, "spirals without noise: radius grows to 1, the second turned by pi", NULL);
    tsr_spirals(pts, labels, 2, 0.0, 3);
    check(near(hypot(pts[0], pts[1]), 1) && labels[0] == 1.0f && labels[1] == -1.0f, "spirals: count 2", NULL);

    /* Generators keep their noise apart: the same seed does not give the same jitter. */
    float moons[2 * N], moons_clean[2 * N], circles[2 * N], circles_clean[2 * N];
    tsr_half_moons(moons, labels, N, 0.1, 5);
    tsr_half_moons(moons_clean, labels, N, 0.0, 5);
    tsr_circles(circles, labels, N, 0.1, 0.5, 5);
    tsr_circles(circles_clean, labels, N, 0.0, 0.5, 5);
    check(!near(moons[0] - moons_clean[0], circles[0] - circles_clean[0]), "moons and circles draw other noise", NULL);
}

/* A message longer than the runtime keeps loses its middle, " … " in its place, cut between
 * UTF-8 characters, never inside one: the text a caller gets is valid UTF-8, and ends with what
 * went wrong. */
static void long_messages(void) {
    static char name[1200];
    for (int pad = 0; pad < 4; pad++) { /* each offset of the cut within a 2-, 3- or 4-byte character */
        memset(name, 'a', sizeof name);
        size_t at = 990 + (size_t)pad;
        for (size_t i = at; i + 9 < sizeof name; i += 9) memcpy(name + i, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
        name[sizeof name - 1] = 0;
        tsr_error(TSR_ERR_IO, "cannot open '%s': %s", name, "File name too long");
        const unsigned char *m = (const unsigned char *)tsr_last_error();
        size_t n = strlen((const char *)m);
        bool whole = n > 1000;
        for (size_t i = 0; i < n && whole;) { /* every character complete */
            size_t len = m[i] < 0x80 ? 1 : m[i] >= 0xF0 ? 4 : m[i] >= 0xE0 ? 3 : m[i] >= 0xC0 ? 2 : 0;
            whole = len > 0 && i + len <= n;
            for (size_t k = 1; whole && k < len; k++) whole = (m[i + k] & 0xC0) == 0x80;
            i += len ? len : 1;
        }
        check(whole, "a message cut to the runtime's length ends on a whole UTF-8 character", (const char *)m + n - 12);
        const char *text = (const char *)m, *reason = "': File name too long";
        check(n < 1024 && strncmp(text, "cannot open 'aaa", 16) == 0 && strstr(text, " \u2026 ") &&
                  n > strlen(reason) && strcmp(text + n - strlen(reason), reason) == 0,
              "a message cut to the runtime's length keeps its start and its end (what went wrong)", text + n - 40);
    }
    /* A caller's tsr_error with no format records a message rather than crashing. */
    const char *no_format = NULL;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    int status = tsr_error(TSR_ERR_ARGUMENT, no_format);
#pragma GCC diagnostic pop
    check(status == TSR_ERR_ARGUMENT && strcmp(tsr_last_error(), "(no message)") == 0,
          "tsr_error(status, NULL) records \"(no message)\"", tsr_last_error());
}

/* A host program that sets a locale whose numbers have a decimal comma (setlocale(LC_ALL, "")
 * under LANG=de_DE.UTF-8) still reads "1.5" in a CSV file as 1.5: the loader reads numbers as C
 * writes them.  The locale is made here (localedef, from the locales package, into the temporary
 * directory: LOCPATH), so the test does not depend on the machine's. */
static void csv_locale(void) {
    char command[384], locales[128];
    snprintf(locales, sizeof locales, "%s/locales", temp_dir);
    snprintf(command, sizeof command, "mkdir -p '%s' && localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1",
             locales, locales);
    int made = system(command);
    setenv("LOCPATH", locales, 1);
    bool german = setlocale(LC_ALL, "de_DE.UTF-8") != NULL;
    check(german && strtod("1.5", NULL) == 1.0, "a German locale (localedef) whose strtod stops at '.'",
          made ? "localedef failed: is the locales package installed?" : "setlocale refused it");
    static const int64_t d23[] = {2, 3};
    write_text("locale.csv", "x,y,z\n1.5,2.25,-3e-1\n4,0.5,6.75\n");
    expect_values("csv numbers in a German locale", tsr_load_csv, "locale.csv", 2, d23,
                  (const float[]){1.5f, 2.25f, -0.3f, 4.0f, 0.5f, 6.75f}, 6);
    check(strtod("1,5", NULL) == 1.5, "the host's locale is as it was after the load", NULL);
    setlocale(LC_ALL, "C");
    unsetenv("LOCPATH");
    snprintf(command, sizeof command, "rm -rf '%s'", locales);
    check(system(command) == 0, "the locale made for the test is removed", NULL);
}

int main(void) {
    long_messages();
    if (!make_temp_dir("data_test")) return 1;
    npy_good();
    npy_errors();
    static const int64_t d23[] = {2, 3}, d22[] = {2, 2};
    robustness(tsr_load_npy, "f4.npy", 2, d23, "npy f4", true);
    robustness(tsr_load_npy, "i8.npy", 2, d22, "npy i8", true);
    write_text("fuzz.csv", "x, y, z # header\n1,2,3\r\n\n4 5 6 # last\n");
    robustness(tsr_load_csv, "fuzz.csv", 2, d23, "csv", true);
    csv_good();
    csv_errors();
    csv_locale();
    generator_common(tsr_half_moons, "moons");
    generator_common(circles_half, "circles");
    generator_common(tsr_spirals, "spirals");
    generator_shapes();
    remove_temp_dir();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
