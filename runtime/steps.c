/* steps.c — the statements of `main` that the runtime carries out besides print: checkpoints,
 * shuffles, recorded series and their plots, progress bars (docs/language.md §3.2.9).
 *
 * The compiler lists them in the image's action table (internal.h); a generated `main` and
 * the reference executor both call tsr_state_action(s, k) for statement k, and
 * tsr_state_progress() around the loops a `progress` form wraps, so both executors do exactly
 * the same thing and print exactly the same bytes.
 *
 *   SAVE, LOAD   checkpoint.c, with the statement's file and buffers.
 *   SHUFFLE      shuffle.c: permutes the rows of a data item (a new permutation each run).
 *   RECORD       appends cell 0 of a tensor (an i32 cell's integer) to a series; PLOT draws a
 *                series as an ASCII line plot on standard output (deterministic: only the
 *                recorded numbers decide it).
 *   PROGRESS     a bar on standard error: on a terminal one self-updating line with the count,
 *                the rate and the time left, redrawn at most ten times a second; otherwise a
 *                plain line at every tenth of the loop, with no times, so logs are
 *                reproducible.  Standard output is never touched.
 *
 *   REDUCE       called by a routine's code between two kernels: the mean over the processes of a
 *                distributed run (dist.c) of its buffers, fused into one collective call per
 *                type of mean: f32 (f32 buffers, and bf16 and f16 ones widened, their mean
 *                rounded back once) and f64.  With the NCCL engine (--distributed=nccl) a GPU
 *                state's buffers are averaged in place on the GPU instead (cuda.c, nccl.c), each
 *                in its own type, with no copy through the host; --reduce=ordered keeps the host
 *                path through MPI (NCCL has no sum in a fixed order).
 *
 * In a distributed run process 0 alone prints, plots, draws bars and writes checkpoints (every
 * process learns whether the write worked); every process loads, shuffles and records.
 *
 * A GPU state's buffers are read and written through the coherence of cuda.c
 * (tsr_buffer_to_host): SHUFFLE and RECORD see what the kernels last computed.
 *
 * Requires: a state made from an image of this version (state.c). */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- Series: record and plot ------------------------------------------------------------------------- */

static int record(tsr_state *s, const tsr_action *a) {
    tsr_series *series = tsr_model_series(s->model, (uint32_t)a->value);
    const float *cell = s->buffers[a->refs[0]];
    if (!series || !cell) return tsr_error(TSR_ERR_IMAGE, "record '%s': malformed", a->text);
    int status = tsr_buffer_to_host(s, a->refs[0], false);
    if (status != TSR_OK) return status;
    if (series->count == series->cap) {
        uint64_t cap = series->cap ? series->cap * 2 : 64;
        float *grown = realloc(series->values, cap * sizeof *grown);
        if (!grown) return tsr_error(TSR_ERR_NOMEM, "out of memory recording '%s'", a->text);
        series->values = grown;
        series->cap = cap;
    }
    series->values[series->count++] = (float)tsr_cell_value(cell, tsr_model_buffer_dtype(s->model, a->refs[0]), 0);
    return TSR_OK;
}

/* The plot's size: PLOT_ROWS lines of at most PLOT_COLUMNS points; a longer series is drawn
 * with the mean of consecutive values in each column. */
enum { PLOT_ROWS = 10, PLOT_COLUMNS = 60, PLOT_LABEL = 12 };

static int plot(tsr_state *s, const tsr_action *a) {
    const tsr_series *series = tsr_model_series(s->model, (uint32_t)a->value);
    if (!series) return tsr_error(TSR_ERR_IMAGE, "plot '%s': malformed", a->text);
    uint64_t n = series->count;
    if (n == 0) {
        printf("%s: nothing recorded\n", a->text);
        return TSR_OK;
    }
    uint32_t width = n < PLOT_COLUMNS ? (uint32_t)n : PLOT_COLUMNS;
    double column[PLOT_COLUMNS], lo = INFINITY, hi = -INFINITY;
    uint64_t not_finite = 0;
    for (uint32_t c = 0; c < width; c++) {
        uint64_t from = c * n / width, to = (c + 1) * n / width;
        double sum = 0;
        for (uint64_t i = from; i < to; i++) {
            sum += series->values[i];
            not_finite += !isfinite(series->values[i]);
        }
        column[c] = sum / (double)(to - from);
        if (isfinite(column[c])) {
            lo = column[c] < lo ? column[c] : lo;
            hi = column[c] > hi ? column[c] : hi;
        }
    }
    printf("%s: %" PRIu64 " value%s", a->text, n, n == 1 ? "" : "s");
    if (width < n) printf(", each column the mean of about %" PRIu64, (n + width - 1) / width);
    if (not_finite) printf(", %" PRIu64 " not finite (not drawn)", not_finite);
    printf("\n");
    for (int r = PLOT_ROWS - 1; r >= 0; r--) {
        char label[PLOT_LABEL + 1] = "";
        if (r == PLOT_ROWS - 1 && hi >= lo) snprintf(label, sizeof label, "%.5g", hi);
        if (r == 0 && hi >= lo) snprintf(label, sizeof label, "%.5g", lo);
        char line[PLOT_COLUMNS + 1];
        uint32_t used = 0;
        for (uint32_t c = 0; c < width; c++) {
            bool here = false;
            if (isfinite(column[c])) {
                int at = hi > lo ? (int)floor((column[c] - lo) / (hi - lo) * (PLOT_ROWS - 1) + 0.5) : PLOT_ROWS / 2;
                here = at == r;
            }
            line[c] = here ? '*' : ' ';
            if (here) used = c + 1;
        }
        line[used] = 0;
        printf("%*s |%s\n", PLOT_LABEL, label, line);
    }
    printf("%*s +", PLOT_LABEL, "");
    for (uint32_t c = 0; c < width; c++) putchar('-');
    char last[24];
    int last_len = snprintf(last, sizeof last, "%" PRIu64, n);
    printf("\n%*s  1", PLOT_LABEL, "");
    if (n > 1) printf("%*s", (int)width - 1 > last_len ? (int)width - 1 : last_len + 1, last);
    printf("\n");
    return ferror(stdout) ? tsr_error(TSR_ERR_IO, "cannot write to the standard output") : TSR_OK;
}

/* ---- Progress ----------------------------------------------------------------------------------------- */

/* Whether a bar is on the terminal now (the line is not finished). */
static bool bar_shown;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void tsr_progress_hide(void) {
    if (!bar_shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    bar_shown = false;
}

/* "1:05", or "2:03:04" from an hour on. */
static void duration(char *out, size_t size, double seconds) {
    if (!(seconds >= 0) || seconds > 359999) {
        snprintf(out, size, "?");
        return;
    }
    long t = (long)(seconds + 0.5);
    if (t >= 3600) snprintf(out, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, size, "%ld:%02ld", t / 60, t % 60);
}

enum { BAR_WIDTH = 30 };

static void draw_bar(const tsr_action *a, int64_t done, int64_t total, double now) {
    char bar[BAR_WIDTH + 1], left[32] = "", rate[48] = "";
    int filled = total > 0 ? (int)(done * BAR_WIDTH / total) : BAR_WIDTH;
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = 0;
    double elapsed = now - a->started;
    if (done > 0 && elapsed > 0) {
        double per_second = (double)done / elapsed;
        if (per_second >= 1) snprintf(rate, sizeof rate, "  %.1f it/s", per_second);
        else snprintf(rate, sizeof rate, "  %.1f s/it", 1 / per_second);
        char eta[24];
        duration(eta, sizeof eta, done < total ? (double)(total - done) / per_second : elapsed);
        snprintf(left, sizeof left, done < total ? "  ETA %s" : "  in %s", eta);
    }
    fprintf(stderr, "\r\033[K%s [%s] %" PRId64 "/%" PRId64 " %3d%%%s%s", a->text, bar, done, total,
            total > 0 ? (int)(done * 100 / total) : 100, rate, left);
    bar_shown = true;
}

int tsr_state_progress(tsr_state *s, uint32_t action, int64_t done, int64_t total) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    tsr_action *a = tsr_model_action(s->model, action);
    if (!a || a->kind != TSR_ACTION_PROGRESS) return tsr_error(TSR_ERR_ARGUMENT, "no progress bar %u", action);
    if (tsr_dist_rank() != 0) return TSR_OK; /* process 0 draws the run's bar */
    double now = now_seconds();
    if (done == 0) a->started = a->drawn = now;
    if (isatty(STDERR_FILENO)) {
        fflush(stdout); /* what the loop printed goes above the bar */
        if (done == 0 || done >= total || now - a->drawn >= 0.1) {
            draw_bar(a, done, total, now);
            a->drawn = now;
            if (done >= total) {
                fputc('\n', stderr);
                bar_shown = false;
            }
            fflush(stderr);
        }
    } else if (total > 0 && (done == total || (done > 0 && done * 10 / total != (done - 1) * 10 / total))) {
        fflush(stdout);
        fprintf(stderr, "%s: %" PRId64 "/%" PRId64 " (%d%%)\n", a->text, done, total, (int)(done * 100 / total));
        fflush(stderr);
    }
    return TSR_OK;
}

/* ---- Several processes: the mean of gradients ------------------------------------------------------- */

/* The cells of buffer b, or -1 past the model's buffers. */
static int64_t buffer_cells(const tsr_state *s, uint32_t b) {
    uint32_t rank;
    const int64_t *dims;
    int64_t size;
    uint8_t kind;
    return tsr_model_buffer_shape(s->model, b, &rank, &dims, &size, &kind) ? size : -1;
}

/* The array of REDUCE whose type a buffer of `dtype` is averaged in, or -1 for a type that has
 * no mean (integers). */
static int mean_array_of(uint8_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16: return MEAN_F32;
    case TSR_DTYPE_F64: return MEAN_F64;
    default: return -1;
    }
}

/* The element type of the mean's array `array`. */
static uint8_t mean_dtype(int array) { return array == MEAN_F64 ? TSR_DTYPE_F64 : TSR_DTYPE_F32; }

/* `size` cells of a buffer of `dtype` into (gather) or out of the mean's array `array` from
 * cell `at`: f32 and f64 cells as they are; bf16 and f16 cells widened into f32 (exact), and
 * the mean rounded back to the nearest, once. */
static void move_cells(void *buffer, void *array, int64_t at, int64_t size, uint8_t dtype, bool gather) {
    if (dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16) {
        uint16_t *half = buffer;
        float *wide = (float *)array + at;
        bool bf16 = dtype == TSR_DTYPE_BF16;
        for (int64_t i = 0; i < size; i++) {
            if (gather) wide[i] = bf16 ? tsr_bf16_to_f32(half[i]) : tsr_f16_to_f32(half[i]);
            else half[i] = bf16 ? tsr_f32_to_bf16(wide[i]) : tsr_f32_to_f16(wide[i]);
        }
        return;
    }
    size_t bytes = tsr_dtype_cell_bytes(dtype);
    char *cells = (char *)array + (size_t)at * bytes;
    if (gather) memcpy(cells, buffer, (size_t)size * bytes);
    else memcpy(buffer, cells, (size_t)size * bytes);
}

/* Copy REDUCE's buffers into its arrays side by side (`gather`), or back out of them. */
static void move_fused(tsr_state *s, tsr_action *a, bool gather) {
    int64_t at[MEAN_ARRAYS] = {0};
    for (uint32_t k = 0; k < a->ref_count; k++) {
        uint32_t b = a->refs[k];
        uint8_t dtype = tsr_model_buffer_dtype(s->model, b);
        int t = mean_array_of(dtype);
        int64_t size = buffer_cells(s, b);
        if (size > 0 && s->buffers[b]) move_cells(s->buffers[b], a->means[t].cells, at[t], size, dtype, gather);
        at[t] += size;
    }
}

/* The cells of the buffers of REDUCE or REDUCE_BEGIN `a` side by side in its arrays (kept from
 * call to call), one for each type a mean is computed in. */
static int fuse(tsr_state *s, tsr_action *a) {
    int64_t cells[MEAN_ARRAYS] = {0};
    for (uint32_t k = 0; k < a->ref_count; k++) {
        int64_t size = buffer_cells(s, a->refs[k]);
        if (size < 0) return tsr_error(TSR_ERR_IMAGE, "reduce '%s': buffer %u has no cells", a->text, a->refs[k]);
        uint8_t dtype = tsr_model_buffer_dtype(s->model, a->refs[k]);
        int t = mean_array_of(dtype); /* the compiler refuses the others (one process never gets here) */
        if (t < 0)
            return tsr_error(TSR_ERR_IMAGE, "the mean across processes of '%s': %s cells have no mean",
                             tsr_model_buffer_name(s->model, a->refs[k]), tsr_dtype_word(dtype));
        cells[t] += size;
    }
    for (int t = 0; t < MEAN_ARRAYS; t++) {
        tsr_mean_array *m = &a->means[t];
        if (cells[t] == m->count && (m->cells || !cells[t])) continue; /* sizes change only with a run-time size */
        free(m->cells);
        m->count = 0;
        if (!(m->cells = malloc((size_t)(cells[t] ? cells[t] : 1) * tsr_dtype_cell_bytes(mean_dtype(t)))))
            return tsr_error(TSR_ERR_NOMEM, "reduce '%s': out of memory for %" PRId64 " cells", a->text, cells[t]);
        m->count = cells[t];
    }
    for (uint32_t k = 0; k < a->ref_count; k++) { /* the kernels' results, for a GPU state */
        int status = tsr_buffer_to_host(s, a->refs[k], true);
        if (status != TSR_OK) return status;
    }
    move_fused(s, a, true);
    return TSR_OK;
}

/* Whether the means of REDUCE and its buckets are NCCL's on the GPU: the NCCL engine, a GPU state,
 * and not --reduce=ordered (which takes the host path through MPI, the same bits as there). */
static bool means_on_gpu(const tsr_state *s) {
    return tsr_dist_uses_nccl() && tsr_state_gpu(s) && !tsr_model_reduce_ordered(s->model);
}

/* The host mean (through MPI) of one buffer of a GPU state that has no device copy. */
static int host_mean_of(tsr_state *s, uint32_t b) {
    int64_t size = buffer_cells(s, b);
    uint8_t dtype = tsr_model_buffer_dtype(s->model, b);
    int t = mean_array_of(dtype);
    if (!tsr_dist_active() || size <= 0 || !s->buffers[b]) return TSR_OK;
    if (t < 0)
        return tsr_error(TSR_ERR_IMAGE, "the mean across processes of '%s': %s cells have no mean",
                         tsr_model_buffer_name(s->model, b), tsr_dtype_word(dtype));
    void *cells = malloc((size_t)size * tsr_dtype_cell_bytes(mean_dtype(t)));
    if (!cells) return tsr_error(TSR_ERR_NOMEM, "out of memory averaging '%s'", tsr_model_buffer_name(s->model, b));
    move_cells(s->buffers[b], cells, 0, size, dtype, true);
    int status = tsr_dist_mean_cells(cells, size, mean_dtype(t), false);
    if (status == TSR_OK) move_cells(s->buffers[b], cells, 0, size, dtype, false);
    free(cells);
    return status;
}

/* REDUCE or REDUCE_BEGIN on the GPU: NCCL's means of the buffers, enqueued on the kernels' stream
 * (the next launches and copies come after them in stream order); a buffer no kernel uses has no
 * device copy and is averaged on the host. */
static int reduce_on_gpu(tsr_state *s, tsr_action *a) {
    int status = tsr_gpu_mean(s, a->refs, a->ref_count);
    for (uint32_t k = 0; status == TSR_OK && k < a->ref_count; k++)
        if (!tsr_gpu_has_copy(s, a->refs[k])) status = host_mean_of(s, a->refs[k]);
    return status;
}

/* REDUCE: every listed buffer becomes the mean over the processes of its cells, in one collective
 * call over their cells side by side (one for f32 and half-type cells, one for f64 cells). */
static int reduce(tsr_state *s, tsr_action *a) {
    if (means_on_gpu(s)) return reduce_on_gpu(s, a);
    if (!tsr_dist_active()) return TSR_OK;
    int status = fuse(s, a);
    for (int t = 0; status == TSR_OK && t < MEAN_ARRAYS; t++)
        if (a->means[t].count)
            status = tsr_dist_mean_cells(a->means[t].cells, a->means[t].count, mean_dtype(t), tsr_model_reduce_ordered(s->model));
    if (status == TSR_OK) move_fused(s, a, false);
    return status;
}

/* The REDUCE_BEGIN actions of REDUCE_END number `end`, in order: fn on each, stopping at an error. */
static int each_bucket(tsr_state *s, uint32_t end, int (*fn)(tsr_state *, tsr_action *)) {
    tsr_action *b;
    for (uint32_t k = 0; (b = tsr_model_action(s->model, k)) != NULL; k++)
        if (b->kind == TSR_ACTION_REDUCE_BEGIN && b->value == (int64_t)end) {
            int status = fn(s, b);
            if (status != TSR_OK) return status;
        }
    return TSR_OK;
}

static int bucket_progress(tsr_state *s, tsr_action *b) {
    (void)s;
    int status = TSR_OK;
    for (int t = 0; status == TSR_OK && t < MEAN_ARRAYS; t++) status = tsr_dist_mean_progress(&b->means[t].pending);
    return status;
}

/* REDUCE_BEGIN: a bucket's buffers, ready, packed and their means begun (with --reduce=ordered
 * it waits for the end); the buckets begun before it are moved on, since MPI advances them only
 * inside its calls. */
static int reduce_begin(tsr_state *s, tsr_action *a) {
    if (means_on_gpu(s)) return reduce_on_gpu(s, a);
    if (!tsr_dist_active()) return TSR_OK;
    int status = each_bucket(s, (uint32_t)a->value, bucket_progress);
    if (status == TSR_OK) status = fuse(s, a);
    for (int t = 0; status == TSR_OK && t < MEAN_ARRAYS && !tsr_model_reduce_ordered(s->model); t++)
        if (a->means[t].count)
            status = tsr_dist_mean_begin(a->means[t].cells, a->means[t].count, mean_dtype(t), &a->means[t].pending);
    return status;
}

/* A bucket's means finished and its cells put back into its buffers. */
static int bucket_end(tsr_state *s, tsr_action *b) {
    int status = TSR_OK;
    for (int t = 0; status == TSR_OK && t < MEAN_ARRAYS; t++) {
        tsr_mean_array *m = &b->means[t];
        if (!m->count) continue;
        status = tsr_model_reduce_ordered(s->model) ? tsr_dist_mean_cells(m->cells, m->count, mean_dtype(t), true)
                                                    : tsr_dist_mean_end(&m->pending);
    }
    for (uint32_t k = 0; status == TSR_OK && k < b->ref_count; k++) status = tsr_buffer_to_host(s, b->refs[k], true);
    if (status == TSR_OK) move_fused(s, b, false);
    return status;
}

/* REDUCE_END number `number`: every bucket of it finished, in the order they began.  On the GPU
 * stream order finishes them; NCCL's errors so far surface here. */
static int reduce_end(tsr_state *s, uint32_t number) {
    if (means_on_gpu(s)) return tsr_nccl_watch(0);
    return tsr_dist_active() ? each_bucket(s, number, bucket_end) : TSR_OK;
}

/* ---- The dispatcher ---------------------------------------------------------------------------------- */

int tsr_state_action(tsr_state *s, uint32_t action) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    tsr_action *a = tsr_model_action(s->model, action);
    if (!a) return tsr_error(TSR_ERR_ARGUMENT, "no statement %u of main", action);
    switch (a->kind) {
    case TSR_ACTION_SAVE: return tsr_checkpoint_save_once(s, a->text, a->refs, a->ref_count);
    case TSR_ACTION_LOAD: return tsr_checkpoint_load(s, a->text, a->refs, a->ref_count);
    case TSR_ACTION_SHUFFLE: return tsr_shuffle(s, a);
    case TSR_ACTION_RECORD: return record(s, a);
    case TSR_ACTION_PLOT:
        if (tsr_dist_rank() != 0) return TSR_OK; /* process 0 draws for the run */
        tsr_progress_hide();
        return plot(s, a);
    case TSR_ACTION_REDUCE: return reduce(s, a);
    case TSR_ACTION_REDUCE_BEGIN: return reduce_begin(s, a);
    case TSR_ACTION_REDUCE_END: return reduce_end(s, action);
    default: return tsr_error(TSR_ERR_ARGUMENT, "statement %u of main is a progress bar", action);
    }
}
