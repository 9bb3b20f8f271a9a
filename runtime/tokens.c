/* tokens.c — the `tokens` data source: token files as llm.c and nanoGPT's data scripts write
 * them, cut into windows of W tokens, one window per row of an I32 tensor (docs/runtime.md §9).
 *
 * A token file is a header of 256 little-endian int32 — header[0] the magic 20240520,
 * header[1] the version (1: the tokens are uint16, 2: uint32), header[2] the number of tokens —
 * and then exactly that many tokens.  The reader trusts nothing in the header: the magic and the
 * version are checked, the count must be what the file's size holds (checked before anything is
 * allocated, so a header claiming 2^31 tokens over 100 bytes costs nothing), bytes after the
 * tokens are an error, and a uint32 token beyond int32 is an error naming its position.  Every
 * problem is TSR_ERR_DATA, "data 'WHAT': 'PATH': what is wrong", as the other loaders say it.
 *
 * Windows: sequential row k holds tokens k·(W-1) … k·(W-1)+W-1, so consecutive windows share one
 * token and every token after the first is a prediction target exactly once; random row k starts
 * at a token drawn uniformly from [0, count-W] by the counter-based RNG (rng.c) as a function of
 * the item's seed, the draw's number and k — reproducible, independent of threads, and new for
 * each draw (the SHUFFLE statement draws again, shuffle.c).
 *
 * A sharded item of a run of N processes (docs/runtime.md §19): process r's row k is the file's
 * sequential window k·N + r, or the random window that row k·N + r of one process's draw of N
 * times the rows would get.
 *
 * The `bytes` source is the same windows of any file, its bytes the tokens (0 … 255): a text file
 * read byte by byte, for a byte-level model (tsr_bytes_read).
 *
 * Requires data.c (tsr_data_open) and rng.c; nothing else of the runtime. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The RNG stream of random windows (apart from the generators' and the shuffles' streams). */
enum { WINDOWS_STREAM = 0x746f6b00 };

/* Tokens are read and converted in pieces of this many bytes. */
enum { TOKEN_CHUNK = 1 << 16 };

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Exactly `n` bytes from `file`, or an error saying how the file ended. */
static int read_exactly(FILE *file, void *out, size_t n, const char *what, const char *path) {
    errno = 0;
    size_t got = fread(out, 1, n, file);
    if (got == n) return TSR_OK;
    if (ferror(file)) return tsr_data_error("data '%s': '%s': cannot read: %s", what, path, strerror(errno ? errno : EIO));
    return tsr_data_error("data '%s': '%s': is truncated (it changed while it was read)", what, path);
}

/* The header's token size and count, checked against the file's `size`. */
static int read_header(FILE *file, int64_t size, const char *what, const char *path, int *token_bytes, int64_t *count) {
    const int64_t header_bytes = 4 * TSR_TOKENS_HEADER_WORDS;
    if (size < header_bytes)
        return tsr_data_error("data '%s': '%s': is not a token file: it has %" PRId64 " byte%s, less than the %" PRId64
                              "-byte header", what, path, size, size == 1 ? "" : "s", header_bytes);
    unsigned char header[4 * TSR_TOKENS_HEADER_WORDS];
    int status = read_exactly(file, header, sizeof header, what, path);
    if (status != TSR_OK) return status;
    int32_t magic = (int32_t)le32(header), version = (int32_t)le32(header + 4), declared = (int32_t)le32(header + 8);
    if (magic != TSR_TOKENS_MAGIC)
        return tsr_data_error("data '%s': '%s': is not a token file: its header starts with %" PRId32 ", not the magic "
                              "number %d", what, path, magic, TSR_TOKENS_MAGIC);
    if (version != 1 && version != 2)
        return tsr_data_error("data '%s': '%s': has token file version %" PRId32 " (1: uint16 tokens, 2: uint32 tokens)",
                              what, path, version);
    if (declared < 0)
        return tsr_data_error("data '%s': '%s': its header declares %" PRId32 " tokens", what, path, declared);
    *token_bytes = version == 1 ? 2 : 4;
    *count = declared;
    int64_t want = *count * *token_bytes, have = size - header_bytes; /* at most 2^33: no overflow */
    if (have < want)
        return tsr_data_error("data '%s': '%s': is truncated: its header declares %" PRId64 " tokens (%" PRId64
                              " bytes), but %" PRId64 " bytes follow it", what, path, *count, want, have);
    if (have > want)
        return tsr_data_error("data '%s': '%s': has %" PRId64 " byte%s after its %" PRId64 " tokens", what, path,
                              have - want, have - want == 1 ? "" : "s", *count);
    return TSR_OK;
}

/* The tokens after the header, as int32 into out[0 … count). */
static int read_tokens(FILE *file, int token_bytes, int64_t count, int32_t *out, const char *what, const char *path) {
    unsigned char *chunk = malloc(TOKEN_CHUNK);
    if (!chunk) return tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory reading '%s'", what, path);
    int status = TSR_OK;
    int64_t per_chunk = TOKEN_CHUNK / token_bytes;
    for (int64_t done = 0; done < count && status == TSR_OK;) {
        int64_t n = count - done < per_chunk ? count - done : per_chunk;
        status = read_exactly(file, chunk, (size_t)(n * token_bytes), what, path);
        for (int64_t i = 0; i < n && status == TSR_OK; i++, done++) {
            const unsigned char *p = chunk + i * token_bytes;
            uint32_t token = token_bytes == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : le32(p);
            if (token > INT32_MAX)
                status = tsr_data_error("data '%s': '%s': token %" PRId64 " is %" PRIu32 ", which does not fit int32",
                                        what, path, done, token);
            out[done] = (int32_t)token;
        }
    }
    free(chunk);
    return status;
}

int tsr_tokens_read(const char *path, const char *what, tsr_tokens *tokens) {
    if (!tokens) return tsr_error(TSR_ERR_ARGUMENT, "data loader: NULL tokens");
    *tokens = (tsr_tokens){0};
    FILE *file;
    int64_t size = 0;
    int status = tsr_data_open(path, what, &file, &size);
    if (status != TSR_OK) return status;
    int token_bytes = 0;
    int64_t count = 0;
    status = read_header(file, size, what, path, &token_bytes, &count);
    int32_t *out = NULL;
    if (status == TSR_OK && !(out = malloc((size_t)(count ? count : 1) * sizeof *out)))
        status = tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory for the %" PRId64 " tokens of '%s'", what, count, path);
    if (status == TSR_OK) status = read_tokens(file, token_bytes, count, out, what, path);
    fclose(file);
    if (status != TSR_OK) {
        free(out);
        return status;
    }
    *tokens = (tsr_tokens){out, count, false};
    return TSR_OK;
}

int tsr_bytes_read(const char *path, const char *what, tsr_tokens *tokens) {
    if (!tokens) return tsr_error(TSR_ERR_ARGUMENT, "data loader: NULL tokens");
    *tokens = (tsr_tokens){0};
    FILE *file;
    int64_t size = 0;
    int status = tsr_data_open(path, what, &file, &size);
    if (status != TSR_OK) return status;
    int32_t *out = malloc((size_t)(size ? size : 1) * sizeof *out);
    unsigned char *chunk = malloc(TOKEN_CHUNK);
    if (!out || !chunk)
        status = tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory for the %" PRId64 " bytes of '%s'", what, size, path);
    for (int64_t done = 0; done < size && status == TSR_OK;) {
        int64_t n = size - done < TOKEN_CHUNK ? size - done : TOKEN_CHUNK;
        status = read_exactly(file, chunk, (size_t)n, what, path);
        for (int64_t i = 0; i < n && status == TSR_OK; i++) out[done++] = chunk[i];
    }
    free(chunk);
    fclose(file);
    if (status != TSR_OK) {
        free(out);
        return status;
    }
    *tokens = (tsr_tokens){out, size, true};
    return TSR_OK;
}

void tsr_tokens_free(tsr_tokens *tokens) {
    if (!tokens) return;
    free(tokens->tokens);
    *tokens = (tsr_tokens){0};
}

const char *tsr_tokens_unit(const tsr_tokens *tokens, int64_t n) {
    return tokens->bytes ? (n == 1 ? "byte" : "bytes") : (n == 1 ? "token" : "tokens");
}

int64_t tsr_tokens_window_count(const tsr_tokens *tokens, int64_t width) {
    if (!tokens || width < 2 || tokens->count < width) return 0;
    return (tokens->count - 1) / (width - 1);
}

/* A window of `width` tokens from `start` into row `row` (bit patterns: the cells are int32). */
static void put_window(const tsr_tokens *tokens, float *out, int64_t row, int64_t width, int64_t start) {
    memcpy(out + row * width, tokens->tokens + start, (size_t)width * sizeof(int32_t));
}

/* A window holds its inputs and, one token on, their targets: at least 2 tokens. */
static int check_width(int64_t width, const char *what) {
    if (width >= 2) return TSR_OK;
    return tsr_data_error("data '%s': a window of %" PRId64 " token%s is too short: it holds the inputs and the next "
                          "token, at least 2", what, width, width == 1 ? "" : "s");
}

int tsr_tokens_sequential(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, const char *what,
                          const char *path) {
    return tsr_tokens_sequential_shard(tokens, out, rows, width, 0, 1, what, path);
}

int tsr_tokens_sequential_shard(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, int shard, int shards,
                                const char *what, const char *path) {
    int status = check_width(width, what);
    if (status != TSR_OK) return status;
    int64_t have = tsr_tokens_window_count(tokens, width);
    if (shards > 1 && (rows > INT64_MAX / shards || have < rows * shards))
        return tsr_data_error("data '%s': a run of %d processes needs %" PRId64 " windows of %" PRId64 " tokens in '%s' (%"
                              PRId64 " for each), it has %" PRId64, what, shards, rows <= INT64_MAX / shards ? rows * shards
                              : INT64_MAX, width, path, rows, have);
    if (have < rows)
        return tsr_data_error("data '%s': '%s': holds %" PRId64 " %s, %" PRId64 " window%s of %" PRId64 "; the tensor "
                              "has %" PRId64 " rows, which need %" PRId64 " %s or more", what, path, tokens->count,
                              tsr_tokens_unit(tokens, tokens->count), have, have == 1 ? "" : "s", width, rows,
                              rows <= (INT64_MAX - 1) / (width - 1) ? rows * (width - 1) + 1 : INT64_MAX,
                              tsr_tokens_unit(tokens, 2));
    for (int64_t k = 0; k < rows; k++) put_window(tokens, out, k, width, (k * shards + shard) * (width - 1));
    return TSR_OK;
}

int tsr_tokens_random(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, uint64_t seed, uint64_t draw,
                      const char *what, const char *path) {
    return tsr_tokens_random_shard(tokens, out, rows, width, seed, draw, 0, 1, what, path);
}

int tsr_tokens_random_shard(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, uint64_t seed,
                            uint64_t draw, int shard, int shards, const char *what, const char *path) {
    int status = check_width(width, what);
    if (status != TSR_OK) return status;
    if (tokens->count < width)
        return tsr_data_error("data '%s': '%s': holds %" PRId64 " %s, fewer than one window of %" PRId64, what, path,
                              tokens->count, tsr_tokens_unit(tokens, tokens->count), width);
    int64_t starts = tokens->count - width + 1;
    for (int64_t k = 0; k < rows; k++) {
        /* Global row k·shards + shard of the draw of shards·rows rows: the union of the processes'
         * rows is what one process with all of them draws. */
        uint64_t global_rows = (uint64_t)rows * (uint64_t)shards, global_row = (uint64_t)k * (uint64_t)shards + (uint64_t)shard;
        double u = tsr_rng_unit(seed, WINDOWS_STREAM, draw * global_rows + global_row);
        int64_t start = (int64_t)(u * (double)starts);
        put_window(tokens, out, k, width, start < starts ? start : starts - 1);
    }
    return TSR_OK;
}
