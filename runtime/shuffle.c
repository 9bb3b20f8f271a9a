/* shuffle.c — the SHUFFLE statement of `main`: a permutation of the rows of a data item, the
 * cells of its batch axes taken together (for `half_moons ~batches:n`, every example across every
 * batch), each field by the same permutation, as every field of every item of `shuffle (a, b)`.
 * The permutation is a Fisher–Yates shuffle drawn from the counter-based RNG: a function of the
 * seed, the group's data item and how many times the group has been shuffled (tsr_action.runs of
 * the group's first statement, tsr_action.counter: `shuffle d` in two places of main takes the
 * next permutation each time), so it is the same in both executors and for any thread count, and
 * each epoch gets a new one.  Since the rows' order after k shuffles depends on nothing else, a
 * checkpoint that records k lets a resumed run replay the k shuffles on freshly read data and
 * continue in the same order.
 *
 * A field filled with random windows of a token file (`tokens ~windows:"random"`) is not
 * permuted: it gets a new set of windows, draw number the group's count after the shuffle
 * (tokens.c), so a replay ends with the same windows too.
 *
 * Called by steps.c (the statement) and checkpoint.c (the replay); calls down into the model,
 * tokens.c and the RNG only.  A GPU state's fields are moved on the host (tsr_buffer_to_host).
 *
 * Requires: a state whose data sets are produced. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The RNG stream of the shuffles of data set `set` (apart from the generators' streams). */
static uint32_t shuffle_stream(int64_t set) { return 0x73680000u + (uint32_t)(set & 0xffff); }

/* The cells of buffer `b` (0 for a buffer the image does not have). */
static int64_t buffer_cells(const tsr_state *s, uint32_t b) {
    uint32_t rank;
    const int64_t *dims;
    int64_t cells;
    uint8_t kind;
    return tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind) ? cells : 0;
}

/* The bytes of one row of buffer `b`, a field of `rows` rows. */
static size_t row_bytes(const tsr_state *s, uint32_t b, int64_t rows) {
    return (size_t)(buffer_cells(s, b) / rows) * tsr_dtype_cell_bytes(tsr_model_buffer_dtype(s->model, b));
}

/* The rows shuffle statement `a` permutes (its run-time count read from the image), or -1 with
 * the error recorded. */
static int64_t shuffle_rows(const tsr_state *s, const tsr_action *a) {
    int64_t rows = a->rows;
    if (rows >= 0) return rows;
    /* the first batch axis is a run-time length (the image's dims[0] of the first field) */
    uint32_t rank;
    const int64_t *dims;
    int64_t cells;
    uint8_t kind;
    if (!tsr_model_buffer_shape(s->model, a->refs[0], &rank, &dims, &cells, &kind) || rank == 0) {
        tsr_error(TSR_ERR_IMAGE, "shuffle '%s': the image's first field has no axes", a->text);
        return -1;
    }
    if (rows == INT64_MIN || (dims[0] && -rows > INT64_MAX / dims[0])) {
        tsr_error(TSR_ERR_IMAGE, "shuffle '%s': the image's row count is out of range", a->text);
        return -1;
    }
    return -rows * dims[0];
}

int tsr_shuffle(tsr_state *s, tsr_action *a) {
    int64_t rows = shuffle_rows(s, a);
    size_t widest = 0; /* bytes */
    if (rows < 0) return TSR_ERR_IMAGE;
    if (rows == 0) return TSR_OK;
    for (uint32_t f = 0; f < a->ref_count; f++) {
        int64_t cells = buffer_cells(s, a->refs[f]);
        if (!s->buffers[a->refs[f]] || cells % rows != 0)
            return tsr_error(TSR_ERR_IMAGE, "shuffle '%s': the image's fields do not have %" PRId64 " rows", a->text, rows);
        if (row_bytes(s, a->refs[f], rows) > widest) widest = row_bytes(s, a->refs[f], rows);
        int status = tsr_buffer_to_host(s, a->refs[f], true); /* a GPU state: rows move on the host */
        if (status != TSR_OK) return status;
    }
    unsigned char *row = tsr_alloc_cells((int64_t)(widest ? widest : 1), 1);
    if (!row) return TSR_ERR_NOMEM;
    tsr_action *count = tsr_model_action(s->model, a->counter);
    if (!count) count = a;
    uint64_t base = count->runs++ * (uint64_t)rows;
    bool *redrawn = calloc(a->ref_count, sizeof *redrawn); /* fields of random windows: drawn, not permuted */
    if (!redrawn) {
        tsr_free(row);
        return tsr_error(TSR_ERR_NOMEM, "out of memory shuffling '%s'", a->text);
    }
    for (uint32_t f = 0; f < a->ref_count; f++) {
        tsr_token_windows w;
        if (!tsr_model_token_windows(s->model, a->refs[f], &w)) continue;
        uint32_t rank;
        const int64_t *dims;
        int64_t cells;
        uint8_t kind;
        tsr_model_buffer_shape(s->model, a->refs[f], &rank, &dims, &cells, &kind);
        int64_t width = rank ? dims[rank - 1] : 0;
        int status = tsr_tokens_random_shard(w.tokens, s->buffers[a->refs[f]], width ? cells / width : 0, width, w.seed,
                                             count->runs, w.shard, w.shards, w.name, w.path);
        if (status != TSR_OK) {
            free(redrawn);
            tsr_free(row);
            return status;
        }
        redrawn[f] = true;
    }
    for (int64_t i = rows - 1; i > 0; i--) {
        int64_t j = (int64_t)(tsr_rng_unit(s->seed, shuffle_stream(a->value), base + (uint64_t)i) * (double)(i + 1));
        if (j > i) j = i;
        if (j == i) continue;
        for (uint32_t f = 0; f < a->ref_count; f++) {
            if (redrawn[f]) continue;
            size_t width = row_bytes(s, a->refs[f], rows);
            unsigned char *data = (unsigned char *)s->buffers[a->refs[f]];
            memcpy(row, data + (size_t)i * width, width);
            memcpy(data + (size_t)i * width, data + (size_t)j * width, width);
            memcpy(data + (size_t)j * width, row, width);
        }
    }
    free(redrawn);
    tsr_free(row);
    return TSR_OK;
}
