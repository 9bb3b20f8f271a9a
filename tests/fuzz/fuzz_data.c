/* fuzz_data.c — libFuzzer target over the runtime's data loaders: .npy, CSV and the .npz
 * checkpoint reader.
 *
 * Built and run by `make fuzz` (tools/fuzz.sh) with AddressSanitizer and UBSan.  An input is
 * an 8-byte header and the file's bytes:
 *     byte 0      the loader: 0 .npy (tsr_load_npy), 1 CSV (tsr_load_csv), 2 .npz
 *                 (tsr_checkpoint_load), modulo 3
 *     byte 1      bits 0–1 the rank of array a, bits 2–3 the rank of array b (.npz only),
 *                 bit 4 (.npz) load only b, by name, as `load "F" [b]` does
 *     bytes 2–4   the dims of a (the first `rank` of them), bytes 5–7 those of b
 * so the expected shapes come from the input too.  The file is written to a memfd and read
 * through its /proc/self/fd path, a regular file in memory: no file is written to disk.  For
 * .npz, a state is compiled from the program `let%op a = { a; o = [dims] }  let%op b = …`
 * (fuzz_common.c; the states are cached by shape).
 *
 * Besides crashes, hangs, leaks and sanitizer reports, each input checks what the loaders
 * promise (runtime/data.c, runtime/checkpoint.c): the status is TSR_OK or TSR_ERR_DATA; the
 * load is deterministic and, when it succeeds, writes every cell (it runs twice, over outputs
 * filled with two different byte patterns, and both runs must agree bit for bit); and a failed
 * checkpoint load leaves the state as it was.  A broken promise aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "internal.h"

enum { HEADER = 8, MAX_CELLS = 1 << 16, CACHE = 32 };

/* Report a broken promise and abort: the fuzzer saves the input. */
static void broken(const char *what, int status) {
    fprintf(stderr, "fuzz_data: %s (status %d: %s)\n", what, status, tsr_last_error());
    abort();
}

static void check_status(int status) {
    if (status != TSR_OK && status != TSR_ERR_DATA) broken("a loader returned neither TSR_OK nor TSR_ERR_DATA", status);
}

/* Load `loader` into out (cells floats) twice, prefilled with two patterns; both must agree. */
typedef int (*Loader)(const char *, float *, uint32_t, const int64_t *, const char *);

static void load_file(Loader load, const char *path, uint32_t rank, const int64_t *dims, int64_t cells) {
    size_t bytes = (size_t)cells * sizeof(float);
    float *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    if (!a || !b) abort();
    memset(a, 0xa5, bytes);
    memset(b, 0x5a, bytes);
    int sa = load(path, a, rank, dims, "x");
    check_status(sa);
    int sb = load(path, b, rank, dims, "x");
    if (sa != sb) broken("two loads of the same file disagree on the status", sb);
    if (sa == TSR_OK && memcmp(a, b, bytes) != 0) broken("a successful load left cells unwritten", sa);
    free(a);
    free(b);
}

/* ---- .npz: states compiled from a two-parameter program, cached by shape ---------------------- */

typedef struct Cached {
    bool used;
    uint8_t key[7];
    tsr_state *state; /* NULL: the program did not compile (a dim 0) */
} Cached;

static Cached cache[CACHE];
static unsigned next_slot;

static void shape_text(char *out, size_t size, uint32_t rank, const uint8_t *dims) {
    int n = snprintf(out, size, "[");
    for (uint32_t i = 0; i < rank; i++) n += snprintf(out + n, size - (size_t)n, "%s%u", i ? "; " : "", dims[i]);
    snprintf(out + n, size - (size_t)n, "]");
}

static tsr_state *state_for(const uint8_t key[7]) {
    for (unsigned i = 0; i < CACHE; i++)
        if (cache[i].used && memcmp(cache[i].key, key, 7) == 0) return cache[i].state;
    Cached *c = &cache[next_slot++ % CACHE];
    if (c->used && c->state) tsr_state_destroy(c->state);
    c->used = true;
    memcpy(c->key, key, 7);
    c->state = NULL;
    char a[64], b[64], program[200];
    shape_text(a, sizeof a, key[0] & 3, key + 1);
    shape_text(b, sizeof b, (key[0] >> 2) & 3, key + 4);
    int len = snprintf(program, sizeof program, "let%%op a = { a; o = %s }\nlet%%op b = { b; o = %s }\n", a, b);
    FuzzJob job = {.text = program, .len = (size_t)len, .stage = FUZZ_IMAGE};
    fuzz_compile(&job);
    if (job.image) c->state = tsr_state_create(job.image, job.image_size, 1);
    free(job.image);
    return c->state;
}

/* The state's stored cells, buffer after buffer: how many there are; with `copy`, first fill
 * every buffer with the byte `fill` (fill ≥ 0), then copy them out. */
static size_t state_cells(tsr_state *s, float *copy, int fill) {
    size_t at = 0;
    for (uint32_t b = 0; b < tsr_model_buffer_count(s->model); b++) {
        uint32_t rank;
        const int64_t *dims;
        int64_t cells;
        uint8_t kind;
        tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind);
        if (!s->buffers[b]) continue;
        if (copy && fill >= 0) memset(s->buffers[b], fill, (size_t)cells * sizeof(float));
        if (copy) memcpy(copy + at, s->buffers[b], (size_t)cells * sizeof(float));
        at += (size_t)cells;
    }
    return at;
}

static void load_checkpoint(const char *path, const uint8_t *header) {
    uint8_t key[7] = {header[1] & 0x0f, header[2], header[3], header[4], header[5], header[6], header[7]};
    tsr_state *s = state_for(key);
    if (!s) return;
    uint32_t only[1], count = 0;
    if (header[1] & 0x10)
        for (uint32_t b = 0; b < tsr_model_buffer_count(s->model); b++)
            if (strcmp(tsr_model_buffer_name(s->model, b), "b") == 0) {
                only[0] = b;
                count = 1;
            }
    size_t n = state_cells(s, NULL, -1) * sizeof(float);
    float *before = malloc(n + 1), *after = malloc(n + 1), *first = malloc(n + 1);
    if (!before || !after || !first) abort();
    int status[2];
    for (int run = 0; run < 2; run++) {
        state_cells(s, before, run ? 0x5a : 0xa5);
        status[run] = tsr_checkpoint_load(s, path, only, count);
        check_status(status[run]);
        state_cells(s, run ? after : first, -1);
        if (status[run] != TSR_OK && memcmp(before, run ? after : first, n) != 0)
            broken("a failed checkpoint load changed the state", status[run]);
    }
    if (status[0] != status[1]) broken("two loads of the same checkpoint disagree on the status", status[1]);
    /* Every buffer was loaded (count 0), so the two runs agree; with only b loaded, a keeps
     * its two different fills and the runs are not compared. */
    if (status[0] == TSR_OK && count == 0 && memcmp(first, after, n) != 0)
        broken("a successful checkpoint load left cells unwritten", status[0]);
    free(before);
    free(after);
    free(first);
}

static int64_t shape_cells(uint32_t rank, const uint8_t *dims) {
    int64_t cells = 1;
    for (uint32_t i = 0; i < rank; i++) cells *= dims[i];
    return cells;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-data", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (size < HEADER) return 0;
    if (shape_cells(data[1] & 3, data + 2) > MAX_CELLS || shape_cells((data[1] >> 2) & 3, data + 5) > MAX_CELLS)
        return 0; /* within the time cap */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data + HEADER, size - HEADER, 0) != (ssize_t)(size - HEADER)) abort();
    unsigned loader = data[0] % 3;
    if (loader == 2) {
        load_checkpoint(path, data);
        return 0;
    }
    uint32_t rank = data[1] & 3;
    int64_t dims[3] = {data[2], data[3], data[4]};
    load_file(loader == 0 ? tsr_load_npy : tsr_load_csv, path, rank, dims, shape_cells(rank, data + 2));
    return 0;
}
