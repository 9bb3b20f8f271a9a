/* dtype_data_test.c — unit tests of reading data into int32 tensors and of token files
 * (runtime/data.c's typed loaders, runtime/tokens.c).
 *
 * What it does: writes .npy files of every integer dtype (int8 … uint64), float files, and CSV
 * files into a fresh directory under /tmp and reads them into an I32 tensor: the int32 values
 * must arrive as bit patterns, a value beyond int32 must be an error naming its cell and value,
 * a float file an error naming both types, a CSV field that is not an integer a located error;
 * F32 tensors keep converting.  Then token files (llm.c's format): version 1 (uint16) and 2
 * (uint32) read back, sequential windows overlapping by one token, random windows reproducible
 * in the seed and the draw and inside the file, and hostile headers — a 100-byte file, a bad
 * magic, a bad version, a count of 2^31-1 over a few bytes, a negative count, trailing bytes, a
 * uint32 token beyond int32, too few tokens — each a TSR_ERR_DATA message naming the item and the
 * file.  Requires libtsr (-Iruntime: internal.h).  Removes its directory.  One line per failure;
 * last line "N passed, N failed"; exits 1 on any failure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#include "check.h"
#include "temp_dir.h"

/* Writes `len` bytes to file `name`, preceded (when `npy_descr` is not NULL) by a .npy 1.0 header
 * of that descr and shape text. */
static void write_bytes(const char *name, const char *npy_descr, const char *shape, const void *bytes, size_t len) {
    FILE *f = fopen(temp_path(name), "wb");
    if (!f) {
        printf("FAIL cannot write %s\n", temp_path(name));
        exit(1);
    }
    if (npy_descr) {
        char dict[160];
        int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", npy_descr, shape);
        int header = (10 + n + 1 + 63) / 64 * 64 - 10;
        unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)header,
                                      (unsigned char)(header >> 8)};
        fwrite(preamble, 1, sizeof preamble, f);
        fprintf(f, "%s%*s\n", dict, header - n - 1, "");
    }
    fwrite(bytes, 1, len, f);
    fclose(f);
}

/* The error's text after "data 'x': 'PATH'", or "(no error: status S)". */
static const char *error_tail(int status, const char *name) {
    static char text[600];
    char prefix[300];
    snprintf(prefix, sizeof prefix, "data 'x': '%s'", temp_path(name));
    if (status == TSR_OK) snprintf(text, sizeof text, "(no error)");
    else if (strncmp(tsr_last_error(), prefix, strlen(prefix)) != 0) snprintf(text, sizeof text, "%s", tsr_last_error());
    else snprintf(text, sizeof text, "%s", tsr_last_error() + strlen(prefix));
    return text;
}

static void expect_tail(const char *what, int status, const char *name, const char *tail) {
    const char *got = error_tail(status, name);
    char detail[1400];
    snprintf(detail, sizeof detail, "\n    got:      %s\n    expected: %s", got, tail);
    check(status == TSR_ERR_DATA && strcmp(got, tail) == 0, what, detail);
}

static int32_t cell_int(const float *cells, int64_t i) {
    int32_t v;
    memcpy(&v, cells + i, sizeof v);
    return v;
}

/* ---- .npy and CSV into I32 ------------------------------------------------------------------ */

static void npy_integers(void) {
    static const int64_t d23[] = {2, 3};
    const int64_t values[6] = {0, 1, -1, 127, -128, 100};
    static const struct { const char *descr; int size; bool is_signed; } types[] = {
        {"<i4", 4, true}, {"<i8", 8, true}, {"<i2", 2, true}, {"|i1", 1, true}, {"=i2", 2, true},
        {"<u2", 2, false}, {"|u1", 1, false}, {"<u4", 4, false}, {"<u8", 8, false},
    };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        unsigned char bytes[48];
        for (int i = 0; i < 6; i++) {
            int64_t v = types[t].is_signed ? values[i] : (values[i] < 0 ? -values[i] : values[i]);
            for (int k = 0; k < types[t].size; k++) bytes[i * types[t].size + k] = (unsigned char)((uint64_t)v >> (8 * k));
        }
        write_bytes("int.npy", types[t].descr, "(2, 3)", bytes, (size_t)(6 * types[t].size));
        float cells[7] = {0};
        cells[6] = 99.0f;
        int status = tsr_load_npy_typed(temp_path("int.npy"), cells, TSR_DTYPE_I32, 2, d23, "x");
        bool same = status == TSR_OK && cells[6] == 99.0f;
        for (int i = 0; same && i < 6; i++)
            same = cell_int(cells, i) == (types[t].is_signed ? values[i] : (values[i] < 0 ? -values[i] : values[i]));
        char what[64];
        snprintf(what, sizeof what, "npy %s into i32", types[t].descr);
        check(same, what, status == TSR_OK ? "values differ" : tsr_last_error());
    }

    /* Big values: int32's ends arrive exactly (as bits, not through a float). */
    int32_t ends[2] = {INT32_MAX, INT32_MIN + 1};
    write_bytes("ends.npy", "<i4", "(2,)", ends, sizeof ends);
    float cells[2];
    static const int64_t d2[] = {2};
    int status = tsr_load_npy_typed(temp_path("ends.npy"), cells, TSR_DTYPE_I32, 1, d2, "x");
    check(status == TSR_OK && cell_int(cells, 0) == INT32_MAX && cell_int(cells, 1) == INT32_MIN + 1,
          "npy int32's ends into i32, exactly", tsr_last_error());

    int64_t wide[6] = {0, 1, 2, 3, 4, (int64_t)1 << 32};
    write_bytes("wide.npy", "<i8", "(2, 3)", wide, sizeof wide);
    float out[6];
    expect_tail("npy int64 beyond int32", tsr_load_npy_typed(temp_path("wide.npy"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "wide.npy", ": cell (1, 2) holds 4294967296, which does not fit int32 (-2147483648 to 2147483647)");
    int64_t low[6] = {0, -((int64_t)1 << 31) - 1, 0, 0, 0, 0};
    write_bytes("low.npy", "<i8", "(2, 3)", low, sizeof low);
    expect_tail("npy int64 below int32", tsr_load_npy_typed(temp_path("low.npy"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "low.npy", ": cell (0, 1) holds -2147483649, which does not fit int32 (-2147483648 to 2147483647)");
    uint64_t huge[6] = {UINT64_MAX, 0, 0, 0, 0, 0};
    write_bytes("huge.npy", "<u8", "(2, 3)", huge, sizeof huge);
    expect_tail("npy uint64 beyond int64", tsr_load_npy_typed(temp_path("huge.npy"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "huge.npy",
                ": cell (0, 0) holds 18446744073709551615, which does not fit int32 (-2147483648 to 2147483647)");
    uint32_t u4[6] = {0, 0, 0, 0, 2147483648u, 0};
    write_bytes("u4.npy", "<u4", "(2, 3)", u4, sizeof u4);
    expect_tail("npy uint32 beyond int32", tsr_load_npy_typed(temp_path("u4.npy"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "u4.npy", ": cell (1, 1) holds 2147483648, which does not fit int32 (-2147483648 to 2147483647)");

    float f4[6] = {0};
    write_bytes("f4.npy", "<f4", "(2, 3)", f4, sizeof f4);
    expect_tail("npy float32 into i32", tsr_load_npy_typed(temp_path("f4.npy"), out, TSR_DTYPE_I32, 2, d23, "x"), "f4.npy",
                ": the tensor is i32 but the file holds float32 numbers: convert it with numpy's astype(numpy.int32)");
    double f8[6] = {0};
    write_bytes("f8.npy", "<f8", "(2, 3)", f8, sizeof f8);
    expect_tail("npy float64 into i32", tsr_load_npy_typed(temp_path("f8.npy"), out, TSR_DTYPE_I32, 2, d23, "x"), "f8.npy",
                ": the tensor is i32 but the file holds float64 numbers: convert it with numpy's astype(numpy.int32)");
    write_bytes("f2.npy", "<f2", "(2, 3)", f4, 12);
    expect_tail("npy float16 into i32", tsr_load_npy_typed(temp_path("f2.npy"), out, TSR_DTYPE_I32, 2, d23, "x"), "f2.npy",
                ": the tensor is i32 but the file holds float16 numbers: convert it with numpy's astype(numpy.int32)");
    write_bytes("be.npy", ">i4", "(2, 3)", f4, sizeof f4);
    expect_tail("npy big-endian into i32", tsr_load_npy_typed(temp_path("be.npy"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "be.npy", ": dtype '>i4' is big-endian; only little-endian data is supported");
    unsigned char bytes[6] = {1, 2, 3, 4, 5, 255};
    write_bytes("beu1.npy", ">u1", "(2, 3)", bytes, sizeof bytes);
    status = tsr_load_npy_typed(temp_path("beu1.npy"), out, TSR_DTYPE_I32, 2, d23, "x");
    check(status == TSR_OK && cell_int(out, 5) == 255, "npy '>u1': one byte has no order", tsr_last_error());

    /* F32 tensors: every integer type and bool converted (an image of uint8 pixels, a mask). */
    int64_t i8[6] = {1, -2, 3, 4, 5, 6};
    write_bytes("i8.npy", "<i8", "(2, 3)", i8, sizeof i8);
    status = tsr_load_npy_typed(temp_path("i8.npy"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[1] == -2.0f && out[5] == 6.0f, "npy int64 into f32, converted", tsr_last_error());
    status = tsr_load_npy_typed(temp_path("beu1.npy"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[0] == 1.0f && out[4] == 5.0f && out[5] == 255.0f, "npy uint8 into f32, converted",
          tsr_last_error());
    int16_t i2[6] = {-32768, -1, 0, 1, 2, 32767};
    write_bytes("i2.npy", "<i2", "(2, 3)", i2, sizeof i2);
    status = tsr_load_npy_typed(temp_path("i2.npy"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[0] == -32768.0f && out[1] == -1.0f && out[5] == 32767.0f, "npy int16 into f32",
          tsr_last_error());
    uint64_t u8[6] = {0, 16777217u /* 2^24 + 1: to nearest even, 2^24 */, UINT64_MAX, 3, 4, 5};
    write_bytes("u8.npy", "<u8", "(2, 3)", u8, sizeof u8);
    status = tsr_load_npy_typed(temp_path("u8.npy"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[1] == 16777216.0f && out[2] == 0x1p64f && out[5] == 5.0f,
          "npy uint64 into f32, rounded to nearest", tsr_last_error());
    unsigned char mask[6] = {0, 1, 1, 0, 2 /* any byte but 0 is true */, 1};
    write_bytes("b1.npy", "|b1", "(2, 3)", mask, sizeof mask);
    status = tsr_load_npy_typed(temp_path("b1.npy"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[0] == 0.0f && out[1] == 1.0f && out[3] == 0.0f && out[4] == 1.0f,
          "npy bool into f32: 0 and 1", tsr_last_error());
    status = tsr_load_npy_typed(temp_path("b1.npy"), out, TSR_DTYPE_I32, 2, d23, "x");
    check(status == TSR_OK && cell_int(out, 0) == 0 && cell_int(out, 4) == 1, "npy bool into i32: 0 and 1",
          tsr_last_error());
    write_bytes("c8.npy", "<c8", "(2, 3)", i8, 48);
    expect_tail("npy complex64 into f32", tsr_load_npy_typed(temp_path("c8.npy"), out, TSR_DTYPE_F32, 2, d23, "x"),
                "c8.npy", ": dtype '<c8' is not supported (float16, float32, float64, bool, int8, int16, int32, int64, "
                "uint8, uint16, uint32, uint64)");
}

static void write_text(const char *name, const char *text) { write_bytes(name, NULL, NULL, text, strlen(text)); }

static void csv_integers(void) {
    static const int64_t d23[] = {2, 3};
    float out[6];
    write_text("good.csv", "a,b,c\n1, -2, 3\n2147483647 -2147483648 +7\n");
    int status = tsr_load_csv_typed(temp_path("good.csv"), out, TSR_DTYPE_I32, 2, d23, "x");
    check(status == TSR_OK && cell_int(out, 0) == 1 && cell_int(out, 1) == -2 && cell_int(out, 3) == INT32_MAX &&
              cell_int(out, 4) == INT32_MIN && cell_int(out, 5) == 7,
          "csv integers into i32, header skipped", tsr_last_error());
    write_text("frac.csv", "1,2,3\n4,2.5,6\n");
    expect_tail("csv 2.5 into i32", tsr_load_csv_typed(temp_path("frac.csv"), out, TSR_DTYPE_I32, 2, d23, "x"), "frac.csv",
                ":2:3: not an integer: '2.5' (the tensor is i32)");
    write_text("big.csv", "1,2,3\n4,5,2147483648\n");
    expect_tail("csv beyond int32", tsr_load_csv_typed(temp_path("big.csv"), out, TSR_DTYPE_I32, 2, d23, "x"), "big.csv",
                ":2:5: cell (1, 2) holds 2147483648, which does not fit int32 (-2147483648 to 2147483647)");
    write_text("vast.csv", "99999999999999999999999,2,3\n4,5,6\n");
    expect_tail("csv beyond int64", tsr_load_csv_typed(temp_path("vast.csv"), out, TSR_DTYPE_I32, 2, d23, "x"), "vast.csv",
                ":1:1: cell (0, 0) holds 99999999999999999999999, which does not fit int32 (-2147483648 to "
                "2147483647)");
    status = tsr_load_csv_typed(temp_path("frac.csv"), out, TSR_DTYPE_F32, 2, d23, "x");
    check(status == TSR_OK && out[4] == 2.5f, "csv 2.5 into f32", tsr_last_error());
    /* A header is a line with a field of text, whatever its other fields hold: its numbers are
     * not checked as the tensor's integers; a first line of numbers alone is data. */
    write_text("head.csv", "id,3000000000,z\n1,2,3\n4,5,6\n");
    status = tsr_load_csv_typed(temp_path("head.csv"), out, TSR_DTYPE_I32, 2, d23, "x");
    check(status == TSR_OK && cell_int(out, 0) == 1 && cell_int(out, 5) == 6, "csv header with a number beyond int32",
          tsr_last_error());
    write_text("head.csv", "0.5,label,x\n1,2,3\n4,5,6\n");
    status = tsr_load_csv_typed(temp_path("head.csv"), out, TSR_DTYPE_I32, 2, d23, "x");
    check(status == TSR_OK && cell_int(out, 2) == 3 && cell_int(out, 3) == 4, "csv header with a fraction first",
          tsr_last_error());
    write_text("head.csv", "0.5,2,3\n4,5,6\n");
    expect_tail("csv first line of numbers, a fraction", tsr_load_csv_typed(temp_path("head.csv"), out, TSR_DTYPE_I32, 2, d23, "x"),
                "head.csv", ":1:1: not an integer: '0.5' (the tensor is i32)");
}

/* ---- Token files ------------------------------------------------------------------------------ */

/* A token file: header words magic, version, count (then zeros), and `n` tokens of `bytes` each. */
static void write_tokens(const char *name, int32_t magic, int32_t version, int32_t count, const uint32_t *tokens,
                         int64_t n, int bytes) {
    int32_t header[TSR_TOKENS_HEADER_WORDS] = {magic, version, count};
    unsigned char *body = calloc((size_t)(n * bytes + 1), 1);
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < bytes; k++) body[i * bytes + k] = (unsigned char)(tokens[i] >> (8 * k));
    FILE *f = fopen(temp_path(name), "wb");
    fwrite(header, sizeof header, 1, f);
    fwrite(body, 1, (size_t)(n * bytes), f);
    fclose(f);
    free(body);
}

static void tokens_good(void) {
    enum { N = 50, W = 9 };
    uint32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (uint32_t)(1000 + 7 * i);
    write_tokens("v1.bin", TSR_TOKENS_MAGIC, 1, N, toks, N, 2);
    tsr_tokens t;
    int status = tsr_tokens_read(temp_path("v1.bin"), "x", &t);
    check(status == TSR_OK && t.count == N && t.tokens[0] == 1000 && t.tokens[N - 1] == 1000 + 7 * (N - 1),
          "tokens version 1 (uint16)", tsr_last_error());
    check(tsr_tokens_window_count(&t, W) == (N - 1) / (W - 1), "tokens: whole sequential windows", NULL);

    float rows[6 * W + 1];
    rows[6 * W] = 99.0f;
    status = tsr_tokens_sequential(&t, rows, 6, W, "x", temp_path("v1.bin"));
    bool same = status == TSR_OK && rows[6 * W] == 99.0f;
    for (int k = 0; same && k < 6; k++)
        for (int j = 0; same && j < W; j++) same = cell_int(rows, k * W + j) == (int32_t)toks[k * (W - 1) + j];
    check(same, "tokens: sequential rows overlap by one token", tsr_last_error());
    expect_tail("tokens: too few for the rows", tsr_tokens_sequential(&t, rows, 7, W, "x", temp_path("v1.bin")), "v1.bin",
                ": holds 50 tokens, 6 windows of 9; the tensor has 7 rows, which need 57 tokens or more");
    check(tsr_tokens_sequential(&t, rows, 1, 1, "x", "p") == TSR_ERR_DATA &&
              strstr(tsr_last_error(), "a window of 1 token is too short"),
          "tokens: a window of 1", tsr_last_error());

    float a[6 * W], b[6 * W], c[6 * W];
    tsr_tokens_random(&t, a, 6, W, 3, 0, "x", "p");
    tsr_tokens_random(&t, b, 6, W, 3, 0, "x", "p");
    tsr_tokens_random(&t, c, 6, W, 3, 1, "x", "p");
    bool inside = true;
    for (int k = 0; k < 6; k++) {
        int32_t start = (cell_int(a, k * W) - 1000) / 7;
        inside = inside && start >= 0 && start <= N - W;
        for (int j = 0; inside && j < W; j++) inside = cell_int(a, k * W + j) == (int32_t)toks[start + j];
    }
    check(inside, "tokens: random windows are windows of the file", NULL);
    check(memcmp(a, b, sizeof a) == 0, "tokens: random windows are a function of the seed and the draw", NULL);
    check(memcmp(a, c, sizeof a) != 0, "tokens: another draw, other windows", NULL);
    tsr_tokens_random(&t, c, 6, W, 4, 0, "x", "p");
    check(memcmp(a, c, sizeof a) != 0, "tokens: another seed, other windows", NULL);
    tsr_tokens_free(&t);

    toks[3] = 4000000000u;
    toks[2] = 2147483647u;
    write_tokens("v2.bin", TSR_TOKENS_MAGIC, 2, 3, toks, 3, 4);
    status = tsr_tokens_read(temp_path("v2.bin"), "x", &t);
    check(status == TSR_OK && t.count == 3 && t.tokens[2] == INT32_MAX, "tokens version 2 (uint32)", tsr_last_error());
    tsr_tokens_free(&t);
    write_tokens("v2big.bin", TSR_TOKENS_MAGIC, 2, 4, toks, 4, 4);
    expect_tail("tokens: uint32 beyond int32", tsr_tokens_read(temp_path("v2big.bin"), "x", &t), "v2big.bin",
                ": token 3 is 4000000000, which does not fit int32");
    check(t.tokens == NULL && t.count == 0, "tokens: nothing kept after an error", NULL);
    write_tokens("empty.bin", TSR_TOKENS_MAGIC, 1, 0, toks, 0, 2);
    status = tsr_tokens_read(temp_path("empty.bin"), "x", &t);
    check(status == TSR_OK && t.count == 0, "tokens: an empty file is read", tsr_last_error());
    expect_tail("tokens: random windows of none", tsr_tokens_random(&t, a, 1, W, 3, 0, "x", temp_path("empty.bin")),
                "empty.bin", ": holds 0 tokens, fewer than one window of 9");
    tsr_tokens_free(&t);
}

static void tokens_hostile(void) {
    uint32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tsr_tokens t;
    unsigned char junk[100] = {0x28, 0x2b, 0x35, 0x01};
    write_bytes("short.bin", NULL, NULL, junk, sizeof junk);
    expect_tail("tokens: a 100-byte file", tsr_tokens_read(temp_path("short.bin"), "x", &t), "short.bin",
                ": is not a token file: it has 100 bytes, less than the 1024-byte header");
    write_tokens("magic.bin", 12345, 1, 8, toks, 8, 2);
    expect_tail("tokens: bad magic", tsr_tokens_read(temp_path("magic.bin"), "x", &t), "magic.bin",
                ": is not a token file: its header starts with 12345, not the magic number 20240520");
    write_tokens("version.bin", TSR_TOKENS_MAGIC, 3, 8, toks, 8, 2);
    expect_tail("tokens: version 3", tsr_tokens_read(temp_path("version.bin"), "x", &t), "version.bin",
                ": has token file version 3 (1: uint16 tokens, 2: uint32 tokens)");
    write_tokens("count.bin", TSR_TOKENS_MAGIC, 2, INT32_MAX, toks, 8, 4);
    expect_tail("tokens: a count of 2^31-1 over 32 bytes", tsr_tokens_read(temp_path("count.bin"), "x", &t), "count.bin",
                ": is truncated: its header declares 2147483647 tokens (8589934588 bytes), but 32 bytes follow it");
    write_tokens("negative.bin", TSR_TOKENS_MAGIC, 1, -5, toks, 8, 2);
    expect_tail("tokens: a negative count", tsr_tokens_read(temp_path("negative.bin"), "x", &t), "negative.bin",
                ": its header declares -5 tokens");
    write_tokens("extra.bin", TSR_TOKENS_MAGIC, 1, 7, toks, 8, 2);
    expect_tail("tokens: bytes after the tokens", tsr_tokens_read(temp_path("extra.bin"), "x", &t), "extra.bin",
                ": has 2 bytes after its 7 tokens");
    expect_tail("tokens: no file", tsr_tokens_read(temp_path("none.bin"), "x", &t), "none.bin",
                ": cannot open: No such file or directory");
    expect_tail("tokens: a directory", tsr_tokens_read(temp_path(""), "x", &t), "",
                ": is a directory, not a regular file");
    check(t.tokens == NULL, "tokens: nothing kept after errors", NULL);
}

int main(void) {
    if (!make_temp_dir("dtype_data_test")) return 1;
    npy_integers();
    csv_integers();
    tokens_good();
    tokens_hostile();
    remove_temp_dir();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
