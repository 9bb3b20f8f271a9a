/* state.c — a model's run-time state, built from the image its object carries.
 *
 * tsr_state_create() reads the image into a model (model.c; image_format.h documents the format,
 * compiler/ir/image.c writes it), allocates one 64-byte-aligned buffer per non-virtual tensor, fills literals and
 * constants, initialises parameters (and inputs, until the caller fills them) with
 * tsr_uniform(seed, name, cell), and produces data sets: generators run, files are read and
 * checked against the shapes the compiler inferred.  Print statements of `main` are formatted
 * here, so compiled programs and the reference executor print identically.
 *
 * An image with a GPU section (--target=cuda) also gets its device side here: cuda.c loads the
 * driver and allocates device memory before the buffers are filled; print statements read
 * buffers through the coherence of cuda.c (tsr_buffer_to_host).
 *
 * This file is the top of the runtime's state: it calls down into model.c, cuda.c, data.c and
 * steps.c (a progress bar is taken off before a print); none of them calls back into it.
 *
 * Requires an image from the same version of tsrc (checked: magic, version and checksum). */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- Creating a state ---------------------------------------------------------------------------- */

static double image_value(const unsigned char *p, uint64_t i) {
    double v;
    memcpy(&v, p + i * 8, 8);
    return v;
}

static int set_size(tsr_state *s, uint32_t symbol, int64_t value);

/* A size of `symbol`'s class that a data file gave a length other than `value` (the symbol
 * itself among them), or UINT32_MAX: the class cannot take `value`. */
static uint32_t file_length_other_than(const tsr_state *s, uint32_t symbol, int64_t value) {
    const tsr_model *m = s->model;
    for (uint32_t j = 0; j < m->symbol_count; j++)
        if (m->size_files[j] && m->symbol_leaders[j] == m->symbol_leaders[symbol] && s->symbols[j] != value) return j;
    return UINT32_MAX;
}

/* Buffer `buffer`, whose outermost axis is a run-time size, takes `length` from file `path` of
 * data `what` (data files are read when the state is made): its size symbol is set to it, and so
 * is every other size of its class (the data item's own `?`, an input's that the program combines
 * with it: none of them can take another value).  Files that size one symbol must agree: a second
 * length would give the first file's tensor new, empty storage. */
static int give_length(tsr_state *s, uint32_t buffer, int64_t length, const char *what, const char *path) {
    uint32_t symbol = (uint32_t)s->model->buffers[buffer].size_symbol;
    char **set_by = &s->model->size_files[symbol];
    const tsr_model *m = s->model;
    uint32_t other = *set_by && s->symbols[symbol] != length ? symbol : file_length_other_than(s, symbol, length);
    if (other == symbol)
        return tsr_error(TSR_ERR_DATA, "data '%s': '%s' has %" PRId64 " rows, but %s has %" PRId64 ": both give "
                         "their length to run-time size '%s', so they must be equal",
                         what, path, length, *set_by, s->symbols[symbol], m->symbol_names[symbol]);
    if (other != UINT32_MAX) /* another size of the class (items shuffled together) */
        return tsr_error(TSR_ERR_DATA, "data '%s': '%s' has %" PRId64 " rows, but %s has %" PRId64 ": their "
                         "run-time sizes '%s' and '%s' must be equal (the program shuffles the items together "
                         "or combines their axes)", what, path, length, m->size_files[other], s->symbols[other],
                         m->symbol_names[symbol], m->symbol_names[other]);
    int status = TSR_OK;
    for (uint32_t j = 0; j < m->symbol_count && status == TSR_OK; j++) /* `symbol` among them */
        if (m->symbol_sizes[j] && m->symbol_leaders[j] == m->symbol_leaders[symbol]) status = set_size(s, j, length);
    if (status != TSR_OK) return status;
    if (!*set_by) {
        size_t n = strlen(what) + strlen(path) + 32;
        if (!(*set_by = malloc(n))) return tsr_error(TSR_ERR_NOMEM, "out of memory reading data '%s'", what);
        snprintf(*set_by, n, "data '%s' file '%s'", what, path);
    }
    return TSR_OK;
}

/* Read a file into buffer `buffer` for data item `what`: CSV or .npy, of the buffer's element
 * type.  A buffer of run-time length takes the length of the .npy file's first axis.  With
 * `sample_axes` (a sharded set: its leading axes that number the samples), this process's
 * samples (docs/runtime.md §19). */
static int load_file(tsr_state *s, uint32_t buffer, const char *path, const char *what, bool csv, int sample_axes) {
    const Buffer *b = &s->model->buffers[buffer];
    int shard = sample_axes ? tsr_dist_rank() : 0, shards = sample_axes ? tsr_dist_size() : 1;
    if (b->size_symbol >= 0) {
        int64_t length = 0;
        int status = csv ? tsr_error(TSR_ERR_DATA, "data '%s': '%s': a CSV file cannot give a run-time length in this "
                                                   "version (use a .npy file)", what, path)
                         : tsr_npy_length(path, what, b->dtype, b->rank, b->dims, &length);
        if (status == TSR_OK && shards > 1) { /* whole rows for every process; the last length % N rows unused */
            if (length < shards)
                status = tsr_error(TSR_ERR_DATA, "data '%s': a run of %d processes needs %d rows in %s or more (one for "
                                   "each), it has %" PRId64, what, shards, shards, path, length);
            length /= shards;
        }
        if (status == TSR_OK) status = give_length(s, buffer, length, what, path);
        if (status != TSR_OK) return status;
    }
    if (shards > 1 && b->rank > 0) {
        int axes = b->size_symbol >= 0 ? -sample_axes : sample_axes; /* a run-time length: spare samples */
        if (csv) return tsr_load_csv_shard(path, s->buffers[buffer], b->dtype, b->rank, b->dims, what, shard, shards, axes);
        return tsr_load_npy_shard(path, s->buffers[buffer], b->dtype, b->rank, b->dims, what, shard, shards, axes);
    }
    if (csv) return tsr_load_csv_typed(path, s->buffers[buffer], b->dtype, b->rank, b->dims, what);
    /* One process: a file whose leading axes number the samples in another arrangement serves
     * as it would serve several ((300, 784) for 10,30|784). */
    if (sample_axes && b->size_symbol < 0)
        return tsr_load_npy_shard(path, s->buffers[buffer], b->dtype, b->rank, b->dims, what, 0, 1, sample_axes);
    return tsr_load_npy_typed(path, s->buffers[buffer], b->dtype, b->rank, b->dims, what);
}

/* How data set `d` is split among the processes of this run (docs/runtime.md §19): into
 * shards_of(d) shares (1: not split), this process's share_of(d), by samples of its first
 * d->sharded axes (0: not split; load_file gets them with one process too, whose file may hold
 * the samples under other leading axes, as several processes' may). */
static bool split(const DataSet *d) { return d->sharded && tsr_dist_size() > 1; }
static int shards_of(const DataSet *d) { return split(d) ? tsr_dist_size() : 1; }
static int share_of(const DataSet *d) { return split(d) ? tsr_dist_rank() : 0; }

/* Keep rows shard, shard+shards, … of `global` (rows·shards rows of `row_cells` cells) in `local`. */
static void keep_rows(const float *global, float *local, int64_t rows, int64_t row_cells) {
    int shard = tsr_dist_rank(), shards = tsr_dist_size();
    for (int64_t i = 0; i < rows; i++)
        memcpy(local + i * row_cells, global + (i * shards + shard) * row_cells, (size_t)row_cells * sizeof *local);
}

/* A `tokens` item: the token file (or the --data file replacing it) cut into windows, one per
 * row of its I32 tensor, whose innermost axis is the window's length W.  A run-time outermost
 * axis takes as many indices as the file holds sequential windows for (whole ones: (count-1) /
 * (W-1) windows, divided by the windows one index holds).  Sequential windows are filled and the
 * tokens dropped; random ones are drawn (draw 0) and the tokens kept for SHUFFLE's draws. */
static int produce_tokens(tsr_state *s, DataSet *d, const char *override) {
    uint32_t buffer = d->fields[0];
    const Buffer *b = &s->model->buffers[buffer];
    if (b->dtype != TSR_DTYPE_I32 || b->rank < 2 || (d->count != 0 && d->count != 1))
        return tsr_error(TSR_ERR_IMAGE, "data '%s': malformed tokens item", d->name);
    if (override) {
        char *path = strdup(override);
        if (!path) return tsr_error(TSR_ERR_NOMEM, "out of memory reading data '%s'", d->name);
        free(d->path);
        d->path = path;
    }
    tsr_tokens_free(&d->tokens);
    tsr_tokens tokens;
    int status = strcmp(d->generator, "bytes") == 0 ? tsr_bytes_read(d->path, d->name, &tokens)
                                                     : tsr_tokens_read(d->path, d->name, &tokens);
    int64_t width = b->dims[b->rank - 1];
    if (status == TSR_OK && b->size_symbol >= 0) {
        int64_t per_index = width > 0 ? b->row_cells / width : 0, windows = tsr_tokens_window_count(&tokens, width);
        if (width < 2 || per_index < 1) /* the message of a window too short */
            status = tsr_tokens_sequential(&tokens, s->buffers[buffer], 0, width, d->name, d->path);
        else if (windows < per_index)
            status = tsr_error(TSR_ERR_DATA, "data '%s': '%s': holds %" PRId64 " %s, %" PRId64 " window%s of %" PRId64
                               ", fewer than the %" PRId64 " that one index of the run-time size needs", d->name, d->path,
                               tokens.count, tsr_tokens_unit(&tokens, tokens.count), windows, windows == 1 ? "" : "s",
                               width, per_index);
        else if (windows / per_index < shards_of(d))
            status = tsr_error(TSR_ERR_DATA, "data '%s': a run of %d processes needs %" PRId64 " windows in %s or more "
                               "(%" PRId64 " for each), it has %" PRId64, d->name, shards_of(d),
                               per_index * shards_of(d), d->path, per_index, windows);
        else
            status = give_length(s, buffer, windows / per_index / shards_of(d), d->name, d->path);
    }
    int64_t rows = width > 0 ? b->size / width : 0;
    int shard = share_of(d), shards = shards_of(d);
    if (status == TSR_OK && d->count == 0)
        status = tsr_tokens_sequential_shard(&tokens, s->buffers[buffer], rows, width, shard, shards, d->name, d->path);
    else if (status == TSR_OK)
        status = tsr_tokens_random_shard(&tokens, s->buffers[buffer], rows, width, (uint64_t)d->seed, 0, shard, shards,
                                         d->name, d->path);
    if (status == TSR_OK && d->count == 1) d->tokens = tokens; /* the state's now */
    else tsr_tokens_free(&tokens);
    return status;
}

/* A file `--data` names: CSV when the name ends in ".csv", otherwise .npy. */
static int load_override(tsr_state *s, const DataSet *d, uint32_t buffer, const char *path) {
    size_t n = strlen(path);
    return load_file(s, buffer, path, s->model->buffers[buffer].name, n >= 4 && strcmp(path + n - 4, ".csv") == 0,
                     d->sharded);
}

/* The path that `--data NAME=PATH` gives buffer `buffer`, or NULL. */
static const char *data_override(const tsr_state *s, uint32_t buffer, const tsr_run_args *args) {
    const char *path = NULL;
    for (uint32_t i = 0; args && i < args->data_count; i++)
        if (strcmp(args->data_names[i], s->model->buffers[buffer].name) == 0) path = args->data_paths[i];
    return path;
}

static int produce_data(tsr_state *s, DataSet *d, const tsr_run_args *args) {
    const tsr_model *m = s->model;
    if (!strcmp(d->generator, "tokens") || !strcmp(d->generator, "bytes"))
        return d->field_count == 1 ? produce_tokens(s, d, data_override(s, d->fields[0], args))
                                   : tsr_error(TSR_ERR_IMAGE, "data '%s': malformed", d->name);
    float *f0 = s->buffers[d->fields[0]];
    const Buffer *b0 = &m->buffers[d->fields[0]];
    bool replaced = true; /* every field comes from a --data file: nothing to generate */
    for (uint32_t f = 0; f < d->field_count; f++) replaced = replaced && data_override(s, d->fields[f], args);
    if (replaced && strcmp(d->generator, "option") != 0) {
        for (uint32_t f = 0; f < d->field_count; f++) {
            int status = load_override(s, d, d->fields[f], data_override(s, d->fields[f], args));
            if (status != TSR_OK) return status;
        }
        return TSR_OK;
    }
    bool points = !strcmp(d->generator, "half_moons") || !strcmp(d->generator, "circles") ||
                  !strcmp(d->generator, "spirals");
    for (uint32_t f = 0; f < d->field_count; f++) /* the generators that make numbers, not integers */
        if ((points || !strcmp(d->generator, "uniform")) && tsr_dtype_integer(m->buffers[d->fields[f]].dtype))
            return tsr_error(TSR_ERR_IMAGE, "data '%s': generator '%s' makes floating-point numbers, but the tensor is %s",
                             d->name, d->generator, tsr_dtype_word(m->buffers[d->fields[f]].dtype));
    if (points) {
        if (d->field_count != 2 || d->count < 0 || d->count > INT64_MAX / 2 || b0->size != 2 * d->count ||
            m->buffers[d->fields[1]].size != d->count || m->buffers[d->fields[1]].dtype != b0->dtype)
            return tsr_error(TSR_ERR_IMAGE, "data '%s': the image's fields do not fit %" PRId64 " points", d->name,
                             d->count);
        /* The generators make f32 points; a field of another type gets them widened to f64 or
         * rounded once to bf16 or f16, from f32 copies. */
        bool in_f32 = b0->dtype == TSR_DTYPE_F32;
        void *points_out = f0, *labels_out = s->buffers[d->fields[1]];
        if (!in_f32) {
            f0 = tsr_alloc_floats(2 * d->count);
            if (!f0) return tsr_error(TSR_ERR_NOMEM, "out of memory making data '%s'", d->name);
        }
        float *labels = in_f32 ? labels_out : tsr_alloc_floats(d->count);
        if (!labels) {
            tsr_free(f0);
            return tsr_error(TSR_ERR_NOMEM, "out of memory making data '%s'", d->name);
        }
        int shards = shards_of(d);
        int64_t count = d->count;
        float *all_points = f0, *all_labels = labels; /* a sharded set: the points of N processes, then this one's */
        if (shards > 1) {
            int status = TSR_OK;
            if (count > INT64_MAX / 2 / shards)
                status = tsr_error(TSR_ERR_DATA, "data '%s': too many points for %d processes", d->name, shards);
            count *= shards;
            all_points = status == TSR_OK ? tsr_alloc_floats(2 * count) : NULL;
            all_labels = status == TSR_OK ? tsr_alloc_floats(count) : NULL;
            if (status == TSR_OK && (!all_points || !all_labels))
                status = tsr_error(TSR_ERR_NOMEM, "out of memory making data '%s' for %d processes", d->name, shards);
            if (status != TSR_OK) {
                tsr_free(all_points);
                tsr_free(all_labels);
                if (!in_f32) {
                    tsr_free(f0);
                    tsr_free(labels);
                }
                return status;
            }
        }
        if (!strcmp(d->generator, "half_moons")) tsr_half_moons(all_points, all_labels, count, d->noise, (uint64_t)d->seed);
        else if (!strcmp(d->generator, "circles"))
            tsr_circles(all_points, all_labels, count, d->noise, d->factor, (uint64_t)d->seed);
        else tsr_spirals(all_points, all_labels, count, d->noise, (uint64_t)d->seed);
        if (shards > 1) {
            keep_rows(all_points, f0, d->count, 2);
            keep_rows(all_labels, labels, d->count, 1);
            tsr_free(all_points);
            tsr_free(all_labels);
        }
        if (!in_f32) {
            for (int64_t c = 0; c < 2 * d->count; c++) tsr_cell_store(points_out, b0->dtype, c, f0[c]);
            for (int64_t c = 0; c < d->count; c++) tsr_cell_store(labels_out, b0->dtype, c, labels[c]);
            tsr_free(f0);
            tsr_free(labels);
        }
        for (uint32_t f = 0; f < 2; f++) { /* a field that --data replaces */
            const char *path = data_override(s, d->fields[f], args);
            int status = path ? load_override(s, d, d->fields[f], path) : TSR_OK;
            if (status != TSR_OK) return status;
        }
        return TSR_OK;
    }
    if (d->field_count != 1) return tsr_error(TSR_ERR_IMAGE, "data '%s': malformed", d->name);
    if (!strcmp(d->generator, "option")) { /* an `option` read as a tensor: its value in every cell */
        for (uint32_t i = 0; i < m->option_count; i++)
            if (!strcmp(m->options[i].name, d->path)) {
                for (int64_t c = 0; c < b0->size; c++) tsr_cell_store(f0, b0->dtype, c, m->options[i].value);
                return TSR_OK;
            }
        return tsr_error(TSR_ERR_IMAGE, "data '%s': no option '%s'", d->name, d->path);
    }
    /* range and uniform of a sharded set: cell c of sample i is that cell of the global sample i·N + r. */
    int64_t rows = 1;
    for (uint32_t a = 0; a < (split(d) ? d->sharded : 1u) && a < b0->rank; a++) rows *= b0->dims[a] ? b0->dims[a] : 1;
    int64_t row_cells = b0->size / rows;
    int shard = share_of(d), shards = shards_of(d);
    if (!strcmp(d->generator, "range")) {
        for (int64_t c = 0; c < b0->size; c++)
            tsr_cell_store(f0, b0->dtype, c, (double)((c / row_cells * shards + shard) * row_cells + c % row_cells));
        return TSR_OK;
    }
    if (!strcmp(d->generator, "uniform")) { /* the f32 draws, widened to f64 or rounded to bf16 or f16 */
        for (int64_t c = 0; c < b0->size; c++)
            tsr_cell_store(f0, b0->dtype, c, tsr_uniform((uint64_t)d->seed, d->name,
                                                         (uint64_t)((c / row_cells * shards + shard) * row_cells + c % row_cells)));
        return TSR_OK;
    }
    if (!strcmp(d->generator, "npy") || !strcmp(d->generator, "csv"))
        return load_file(s, d->fields[0], d->path, d->name, !strcmp(d->generator, "csv"), d->sharded);
    return tsr_error(TSR_ERR_IMAGE, "data '%s': unknown generator '%s'", d->name, d->generator);
}

/* A data set whose values are the positions of a gathered axis (DataSet.bound: an embedding's
 * rows, docs/language.md §5.11): every value must be a whole number in 0 … bound-1, or the
 * program would read the clamped row without a word.  The cells of its fields, and for random
 * windows every token of the file (later draws take windows anywhere in it). */
static int check_positions(const tsr_state *s, const DataSet *d, const tsr_run_args *args) {
    if (d->bound <= 0) return TSR_OK;
    for (int64_t i = 0; i < d->tokens.count; i++)
        if (d->tokens.tokens[i] < 0 || d->tokens.tokens[i] >= d->bound)
            return tsr_error(TSR_ERR_DATA, "data '%s': '%s': token %" PRId32 " (the file's token %" PRId64 ", from 0) is "
                             "not below %" PRId64 ": the ids are positions of a gathered axis of %" PRId64 " cells (an "
                             "embedding's rows, or the classes a target id picks)", d->name, d->path, d->tokens.tokens[i], i, d->bound, d->bound);
    for (uint32_t f = 0; f < d->field_count; f++) {
        const Buffer *b = &s->model->buffers[d->fields[f]];
        const float *cells = s->buffers[d->fields[f]];
        for (int64_t c = 0; cells && c < b->size; c++) {
            double v = tsr_cell_value(cells, b->dtype, c);
            if (v >= 0 && v < (double)d->bound && v == floor(v)) continue;
            char at[1600];
            tsr_format_position(at, sizeof at, b->rank, b->dims, c);
            const char *path = data_override(s, d->fields[f], args); /* the file the field was read from */
            if (!path) path = d->path;
            char value[48]; /* an integer exactly, an i64 beyond 2^53 too */
            if (tsr_dtype_integer(b->dtype)) snprintf(value, sizeof value, "%" PRId64, tsr_cell_integer(cells, b->dtype, c));
            else snprintf(value, sizeof value, "%g", v);
            return tsr_error(TSR_ERR_DATA, "data '%s'%s%s%s: cell %s holds %s, which is not a whole number below %" PRId64
                             ": the values are positions of a gathered axis of %" PRId64 " cells (an embedding's rows, "
                             "or the classes a target id picks)",
                             d->name, path && *path ? ": '" : "", path && *path ? path : "", path && *path ? "'" : "",
                             at, value, d->bound, d->bound);
        }
    }
    return TSR_OK;
}

/* Give buffer i storage of its current size (freeing what it had) and its initial values: an
 * input's the caller has not given yet (noise, so that reading it unfilled shows), a fill, the
 * literal's values, a parameter's seeded numbers. */
/* New storage for buffer i at its current size, initialised as at creation, in *out (NULL for a
 * virtual buffer or a run-time size not set yet); the state is not changed. */
static int new_storage(tsr_state *s, uint32_t i, float **out) {
    const Buffer *b = &s->model->buffers[i];
    *out = NULL;
    if (b->is_virtual || b->size == 0) return TSR_OK;
    float *d = *out = tsr_alloc_cells(b->size, tsr_dtype_cell_bytes(b->dtype));
    if (!d)
        return tsr_error(TSR_ERR_NOMEM, "cannot allocate tensor '%s' (%s, %" PRId64 " %s cells)", b->name, b->shape_text,
                         b->size, tsr_dtype_word(b->dtype));
    uint64_t seed = s->seed;
    uint8_t dtype = b->dtype;
    if (b->kind == TSR_BUF_INPUT && !tsr_dtype_integer(dtype)) /* until the caller fills it (an integer input: zeros) */
        for (int64_t c = 0; c < b->size; c++) tsr_cell_store(d, dtype, c, tsr_uniform(seed, b->name, (uint64_t)c));
    switch (b->init) {
    case TSR_INIT_FILL:
        for (int64_t c = 0; c < b->size; c++) tsr_cell_store(d, dtype, c, b->fill);
        break;
    case TSR_INIT_VALUES:
        for (int64_t c = 0; c < b->size; c++) tsr_cell_store(d, dtype, c, image_value(b->values, (uint64_t)c));
        break;
    case TSR_INIT_IOTA:
        for (int64_t c = 0; c < b->size; c++) tsr_cell_store(d, dtype, c, (double)c);
        break;
    case TSR_INIT_UNIFORM:
        for (int64_t c = 0; c < b->size; c++)
            tsr_cell_store(d, dtype, c, b->shift + b->fill * (double)tsr_uniform(seed, b->name, (uint64_t)c));
        break;
    case TSR_INIT_NORMAL:
        for (int64_t c = 0; c < b->size; c++)
            tsr_cell_store(d, dtype, c, b->shift + b->fill * tsr_normal(seed, b->name, (uint64_t)c));
        break;
    default: break;
    }
    return TSR_OK;
}

static int allocate_buffer(tsr_state *s, uint32_t i) {
    if (s->model->buffers[i].is_virtual) return TSR_OK;
    tsr_free(s->buffers[i]);
    s->buffers[i] = NULL;
    return new_storage(s, i, &s->buffers[i]);
}

/* The names name_at(ctx, 0), name_at(ctx, 1), … (until NULL) joined by ", " into list (cut at its
 * size): for messages that list what the program has. */
static const char *joined_names(char *list, size_t size, const char *(*name_at)(const void *ctx, uint32_t k),
                                const void *ctx) {
    size_t used = 0;
    list[0] = '\0';
    for (uint32_t k = 0; name_at(ctx, k) && used < size; k++) {
        int n = snprintf(list + used, size - used, "%s%s", k ? ", " : "", name_at(ctx, k));
        if (n > 0) used += (size_t)n;
    }
    return list;
}

static const char *option_name_at(const void *model, uint32_t k) {
    const tsr_model *m = model;
    return k < m->option_count ? m->options[k].name : NULL;
}

static const char *data_name_at(const void *model, uint32_t k) { return tsr_model_data_field(model, k); }

tsr_state *tsr_state_create(const unsigned char *image, size_t image_size, uint64_t seed) {
    tsr_model *m = tsr_model_read(image, image_size);
    return m ? tsr_state_create_model(m, seed, NULL) : NULL;
}

tsr_state *tsr_state_create_data(const unsigned char *image, size_t image_size, uint64_t seed, const char *const *names,
                                 const char *const *paths, uint32_t count) {
    if (count && (!names || !paths)) {
        tsr_error(TSR_ERR_ARGUMENT, "create_data: no names or no paths for %u data file%s", count, count == 1 ? "" : "s");
        return NULL;
    }
    tsr_model *m = tsr_model_read(image, image_size);
    if (!m) return NULL;
    /* As an executable's --data NAME=PATH: a name the program has, a path given. */
    for (uint32_t i = 0; i < count; i++) {
        bool known = false;
        for (uint32_t k = 0; names[i] && tsr_model_data_field(m, k) && !known; k++) known = !strcmp(tsr_model_data_field(m, k), names[i]);
        if (known && paths[i] && paths[i][0]) continue;
        char list[256];
        joined_names(list, sizeof list, data_name_at, m);
        if (!names[i])
            tsr_error(TSR_ERR_ARGUMENT, "create_data: names[%u] is NULL", i);
        else if (!known)
            tsr_error(TSR_ERR_ARGUMENT, "create_data: the program has no data named '%s' (%s%s)", names[i],
                      list[0] ? "its data: " : "it reads no data", list);
        else tsr_error(TSR_ERR_ARGUMENT, "create_data: data '%s' is given no file", names[i]);
        tsr_model_free(m);
        return NULL;
    }
    tsr_run_args args = {.data_count = count, .data_names = (const char **)names, .data_paths = (const char **)paths};
    return tsr_state_create_model(m, seed, &args);
}

tsr_state *tsr_state_create_model(tsr_model *m, uint64_t seed, const tsr_run_args *args) {
    tsr_state *s = calloc(1, sizeof *s);
    if (!s) {
        tsr_model_free(m);
        tsr_error(TSR_ERR_NOMEM, "out of memory creating a model state");
        return NULL;
    }
    s->model = m;
    s->seed = seed;
    s->buffers = calloc(m->buffer_count + 1, sizeof *s->buffers);
    s->symbols = calloc(m->symbol_count + TSR_SYMBOL_KEY_WORDS, sizeof *s->symbols);
    if (!s->buffers || !s->symbols) {
        tsr_state_destroy(s);
        tsr_error(TSR_ERR_NOMEM, "out of memory creating a model state");
        return NULL;
    }
    if (!m->gpu && tsr_dist_uses_nccl()) { /* a C driver's tsr_dist_start("nccl") */
        tsr_nccl_refuse_cpu_program();
        tsr_state_destroy(s);
        return NULL;
    }
    if (m->gpu && !(m->device = tsr_gpu_open(s, m->gpu))) { /* before the work of filling buffers */
        tsr_state_destroy(s);
        return NULL;
    }
    for (uint32_t i = 0; i < m->buffer_count; i++)
        if (m->buffers[i].size_symbol < 0 && allocate_buffer(s, i) != TSR_OK) {
            tsr_state_destroy(s);
            return NULL;
        }
    /* Every data item is read even after one fails, so that a start with several bad files names
     * them all: one message a line, under the first's status (out of memory or a malformed image
     * stops at once). */
    int data_status = TSR_OK;
    char messages[4096] = "";
    for (uint32_t i = 0; i < m->data_count; i++) {
        int status = produce_data(s, &m->data[i], args);
        if (status == TSR_OK) status = check_positions(s, &m->data[i], args);
        if (status == TSR_OK) continue;
        size_t used = strlen(messages);
        if (used + 2 < sizeof messages)
            snprintf(messages + used, sizeof messages - used, "%s%s", used ? "\n" : "", tsr_last_error());
        if (data_status == TSR_OK) data_status = status;
        if (status == TSR_ERR_NOMEM || status == TSR_ERR_IMAGE) break;
    }
    if (data_status != TSR_OK) {
        if (strchr(messages, '\n')) tsr_error_summary(data_status, messages); /* else the one is recorded */
        tsr_state_destroy(s);
        return NULL;
    }
    for (uint32_t i = 0; args && i < args->size_count; i++)
        if (tsr_state_set_symbol(s, args->size_symbols[i], args->size_values[i]) != TSR_OK) {
            tsr_state_destroy(s);
            return NULL;
        }
    if (args) {
        m->reduce_ordered = args->reduce_ordered;
        m->check_replicas = args->check_replicas;
        m->seed_given = args->seed_given;
    }
    if (args && args->save && !(m->save_path = strdup(args->save))) {
        tsr_state_destroy(s);
        tsr_error(TSR_ERR_NOMEM, "out of memory creating a model state");
        return NULL;
    }
    return s;
}

void tsr_state_destroy(tsr_state *s) {
    if (!s) return;
    if (s->model) {
        tsr_gpu_close(s->model->device);
        ((tsr_model *)s->model)->device = NULL;
    }
    if (s->buffers && s->model)
        for (uint32_t i = 0; i < s->model->buffer_count; i++) tsr_free(s->buffers[i]);
    free(s->buffers);
    free(s->symbols);
    tsr_model_free((tsr_model *)s->model);
    free(s);
}

/* ---- Index symbols ---------------------------------------------------------------------------- */

/* Every entry point that takes a state refuses NULL with this error (docs/runtime.md §7). */
static int null_state(void) { return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL"); }

/* Every buffer that size symbol `symbol` sizes has `length` rows (its storage unchanged). */
static void set_lengths(const tsr_model *m, uint32_t symbol, int64_t length) {
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        Buffer *b = &m->buffers[i];
        if (b->size_symbol != (int64_t)symbol) continue;
        b->dims[0] = length;
        b->size = length * b->row_cells;
    }
}

/* Size symbol `symbol` is `value` now: every buffer it sizes gets storage of that length (new
 * storage, initialised as at creation, whenever the length changes). */
static int set_size(tsr_state *s, uint32_t symbol, int64_t value) {
    const tsr_model *m = s->model;
    int64_t least = m->symbol_ranges[symbol] > 1 ? m->symbol_ranges[symbol] : 1;
    if (value < least)
        return tsr_error(TSR_ERR_INDEX, "run-time size '%s' = %" PRId64 " must be at least %" PRId64,
                         m->symbol_names[symbol], value, least);
    if (s->symbols[symbol] == value) return TSR_OK;
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        Buffer *b = &m->buffers[i];
        if (b->size_symbol != (int64_t)symbol) continue;
        if (b->row_cells && value > INT64_MAX / b->row_cells)
            return tsr_error(TSR_ERR_NOMEM, "run-time size '%s' = %" PRId64 " makes tensor '%s' too large",
                             m->symbol_names[symbol], value, b->name);
    }
    /* All or nothing: every buffer's new storage is made before any old storage is freed, so a
     * failure leaves the size, the tensors and the caller's data as they were. */
    float **fresh = calloc(m->buffer_count + 1, sizeof *fresh);
    if (!fresh) return tsr_error(TSR_ERR_NOMEM, "out of memory setting run-time size '%s'", m->symbol_names[symbol]);
    int64_t previous = s->symbols[symbol];
    int status = TSR_OK;
    set_lengths(m, symbol, value);
    for (uint32_t i = 0; i < m->buffer_count && status == TSR_OK; i++)
        if (m->buffers[i].size_symbol == (int64_t)symbol) status = new_storage(s, i, &fresh[i]);
    if (status != TSR_OK) set_lengths(m, symbol, previous);
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        if (m->buffers[i].size_symbol != (int64_t)symbol || m->buffers[i].is_virtual) continue;
        if (status == TSR_OK) {
            tsr_free(s->buffers[i]);
            s->buffers[i] = fresh[i];
        } else {
            tsr_free(fresh[i]);
        }
    }
    free(fresh);
    if (status == TSR_OK) s->symbols[symbol] = value;
    return status;
}

int tsr_state_set_symbol(tsr_state *s, uint32_t symbol, int64_t value) {
    if (!s) return null_state();
    if (symbol >= s->model->symbol_count)
        return tsr_error(TSR_ERR_ARGUMENT, "no index symbol number %u", symbol);
    if (s->model->symbol_sizes[symbol]) {
        /* A size of a class a data file gave a length is that file's length: another would give
         * the file's tensor new, empty rows, or disagree with it. */
        const tsr_model *m = s->model;
        uint32_t j = file_length_other_than(s, symbol, value);
        if (j != UINT32_MAX)
            return tsr_error(TSR_ERR_INDEX, "run-time size '%s'%s%s%s is the length of %s (%" PRId64 " rows); it "
                             "cannot be set to %" PRId64 " (give another file instead: --data, or tsr_state_create_data)",
                             m->symbol_names[symbol], j == symbol ? "" : " equals '", j == symbol ? "" : m->symbol_names[j],
                             j == symbol ? "" : "', which", m->size_files[j], s->symbols[j], value);
        return set_size(s, symbol, value);
    }
    int64_t range = s->model->symbol_ranges[symbol];
    if (value < 0 || value >= range)
        return tsr_error(TSR_ERR_INDEX, "index '%s' = %" PRId64 " is out of its range 0..%" PRId64,
                         s->model->symbol_names[symbol], value, range - 1);
    s->symbols[symbol] = value;
    return TSR_OK;
}

/* A size symbol is set, and equals its class's first (which sizes the loops). */
static int check_size(tsr_state *s, uint32_t i) {
    const tsr_model *m = s->model;
    if (s->symbols[i] == 0)
        return tsr_error(TSR_ERR_INDEX, "run-time size '%s' is not set (set it before running a routine: '--size %s=N' "
                         "for an executable, its setter or tsr_state_set_symbol from C)", m->symbol_names[i],
                         m->symbol_names[i]);
    uint32_t leader = m->symbol_leaders[i];
    if (s->symbols[leader] == 0) return check_size(s, leader);
    if (s->symbols[i] != s->symbols[leader])
        return tsr_error(TSR_ERR_INDEX, "run-time sizes '%s' = %" PRId64 " and '%s' = %" PRId64 " differ: the program "
                         "combines the axes they size, so they must be equal", m->symbol_names[leader],
                         s->symbols[leader], m->symbol_names[i], s->symbols[i]);
    return TSR_OK;
}

int tsr_state_check_sizes(tsr_state *s, const uint32_t *sizes, uint32_t count) {
    if (!s) return null_state();
    if (count > 0 && !sizes) return tsr_error(TSR_ERR_ARGUMENT, "tsr_state_check_sizes: the list of sizes is NULL");
    for (uint32_t i = 0; i < count; i++) {
        if (sizes[i] >= s->model->symbol_count || !s->model->symbol_sizes[sizes[i]])
            return tsr_error(TSR_ERR_ARGUMENT, "symbol number %u is not a run-time size", sizes[i]);
        int status = check_size(s, sizes[i]);
        if (status != TSR_OK) return status;
    }
    return TSR_OK;
}

int tsr_state_check_symbols(tsr_state *s) {
    if (!s) return null_state();
    for (uint32_t i = 0; i < s->model->symbol_count; i++)
        if (s->model->symbol_sizes[i]) /* checked by each routine for the sizes it uses */
            continue;
        else if (s->symbols[i] < 0 || s->symbols[i] >= s->model->symbol_ranges[i])
            return tsr_error(TSR_ERR_INDEX, "index '%s' = %" PRId64 " is out of its range 0..%" PRId64,
                             s->model->symbol_names[i], s->symbols[i], s->model->symbol_ranges[i] - 1);
    return TSR_OK;
}

int tsr_state_begin_run(tsr_state *s) {
    int status = tsr_state_check_symbols(s);
    if (status != TSR_OK) return status;
    int64_t *key = s->symbols + s->model->symbol_count;
    key[TSR_SYMBOL_SEED] = (int64_t)s->seed;
    key[TSR_SYMBOL_RUN] = (int64_t)s->runs++;
    return TSR_OK;
}

/* ---- Options and loops of main ------------------------------------------------------------------ */

const char *tsr_option_beyond(const tsr_option *o, double value) {
    if (o->is_float && (o->among & TSR_OPTION_AMONG_F32) && isinf((float)value))
        return "beyond f32's range (about ±3.4e38): the program computes with it among f32 values";
    if (!o->is_float && (o->among & TSR_OPTION_AMONG_I32) && (value < INT32_MIN || value > INT32_MAX))
        return "beyond i32's range (-2147483648 to 2147483647): the program computes with it among i32 values";
    return NULL;
}

/* Option `name` of the state's model, or NULL with a TSR_ERR_ARGUMENT error naming the options. */
static tsr_option *find_option(const tsr_state *s, const char *name) {
    const tsr_model *m = s->model;
    for (uint32_t i = 0; i < m->option_count; i++)
        if (!strcmp(m->options[i].name, name)) return &m->options[i];
    char list[256];
    joined_names(list, sizeof list, option_name_at, m);
    if (m->option_count == 0) tsr_error(TSR_ERR_ARGUMENT, "no option '%s': the program declares no options", name);
    else tsr_error(TSR_ERR_ARGUMENT, "no option '%s' (the program's options: %s)", name, list);
    return NULL;
}

int tsr_state_set_option(tsr_state *s, const char *name, double value) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!name) return tsr_error(TSR_ERR_ARGUMENT, "set_option: no option name");
    tsr_option *o = find_option(s, name);
    if (!o) return TSR_ERR_ARGUMENT;
    /* The command line's rules (args.c), for a value given as a number. */
    if (o->is_float && !isfinite(value))
        return tsr_error(TSR_ERR_ARGUMENT, "option '%s' needs a finite number, not %s", name,
                         isnan(value) ? "NaN" : value > 0 ? "infinity" : "-infinity"); /* %g: "-nan" */
    if (!o->is_float && !(value == floor(value) && fabs(value) <= 0x1p53))
        return tsr_error(TSR_ERR_ARGUMENT, "option '%s' needs an integer from -2^53 to 2^53 (9007199254740992), not %.17g",
                         name, value);
    const char *beyond = tsr_option_beyond(o, value);
    if (beyond)
        return tsr_error(TSR_ERR_ARGUMENT, "option '%s' = %.*g is %s", name, o->is_float ? 6 : 17, value, beyond);
    o->value = value;
    /* The one-cell tensors that hold it (the option read in tensor expressions): refilled. */
    const tsr_model *m = s->model;
    for (uint32_t k = 0; k < m->data_count; k++) {
        const DataSet *d = &m->data[k];
        if (strcmp(d->generator, "option") != 0 || strcmp(d->path, name) != 0 || d->field_count != 1) continue;
        uint32_t b = d->fields[0];
        void *cells = tsr_state_host_buffer(s, b); /* a GPU state's host copy, marked newer */
        if (!cells) return tsr_error(TSR_ERR_GPU, "option '%s': its tensor cannot be written", name);
        for (int64_t c = 0; c < m->buffers[b].size; c++) tsr_cell_store(cells, m->buffers[b].dtype, c, value);
    }
    return TSR_OK;
}

int tsr_state_option(const tsr_state *s, const char *name, double *value) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!name || !value) return tsr_error(TSR_ERR_ARGUMENT, "option: no option name or no place for its value");
    tsr_option *o = find_option(s, name);
    if (!o) return TSR_ERR_ARGUMENT;
    *value = o->value;
    return TSR_OK;
}

int64_t tsr_state_option_int(const tsr_state *s, uint32_t option) {
    if (!s || option >= s->model->option_count) return 0;
    double v = s->model->options[option].value; /* clamped: a conversion out of range is undefined */
    return v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : v == v ? (int64_t)v : 0;
}

/* The options the bounds of the loop about to start were read from (tsr_main_loop_bound, in the
 * thread that runs main), for tsr_main_loop_count's message; it forgets them. */
static _Thread_local uint32_t bound_options[2], bound_option_count;

int tsr_main_loop_bound(tsr_state *s, uint32_t option, int64_t offset, int64_t *bound) {
    if (!s) return null_state();
    if (!bound) return tsr_error(TSR_ERR_ARGUMENT, "tsr_main_loop_bound: the result pointer is NULL");
    if (option >= s->model->option_count) return tsr_error(TSR_ERR_ARGUMENT, "no option number %u", option);
    if (bound_option_count < 2) bound_options[bound_option_count++] = option;
    int64_t value = tsr_state_option_int(s, option);
    if (__builtin_add_overflow(value, offset, bound))
        return tsr_error(TSR_ERR_INDEX, "a loop bound overflows: option '%s' = %" PRId64 " %s %" PRIu64 " is outside the "
                         "64-bit integers", s->model->options[option].name, value, offset < 0 ? "-" : "+",
                         offset < 0 ? -(uint64_t)offset : (uint64_t)offset);
    return TSR_OK;
}

/* The options the bounds of the loop being started came from (tsr_main_loop_count takes them from
 * those tsr_main_loop_bound recorded), for tsr_main_loop_check's message. */
static _Thread_local uint32_t loop_options[2], loop_option_count;

/* Those options, as the command line names them: "--epochs -1" (and another). */
static void loop_options_given(const tsr_state *s, char *given, size_t size) {
    given[0] = '\0';
    for (uint32_t i = 0; i < loop_option_count; i++) {
        const tsr_option *o = &s->model->options[loop_options[i]];
        char value[32];
        snprintf(value, sizeof value, "%" PRId64, tsr_state_option_int(s, loop_options[i]));
        snprintf(given + strlen(given), size - strlen(given), "%s--%.60s %s", i ? " and " : "", o->name, value);
    }
    if (!loop_option_count) snprintf(given, size, "an option");
}

int tsr_main_loop_count(tsr_state *s, uint32_t symbol, int64_t from, int64_t to, int down) {
    if (!s) return null_state();
    if (symbol >= s->model->symbol_count) return tsr_error(TSR_ERR_ARGUMENT, "no index symbol number %u", symbol);
    uint64_t short_by = down ? (to > from ? (uint64_t)to - (uint64_t)from : 0) : (to < from ? (uint64_t)from - (uint64_t)to : 0);
    loop_option_count = bound_option_count;
    memcpy(loop_options, bound_options, sizeof loop_options);
    bound_option_count = 0;
    if (short_by < 2) return TSR_OK;
    char given[256];
    loop_options_given(s, given, sizeof given);
    return tsr_error(TSR_ERR_INDEX, "the loop of '%s' would run from %" PRId64 " %s %" PRId64 ", a negative number of "
                     "times: its bounds come from %s, and a count below zero is a mistake",
                     s->model->symbol_names[symbol], from, down ? "down to" : "to", to, given);
}

int tsr_main_loop_check(tsr_state *s, uint32_t symbol, int64_t from, int64_t to) {
    if (!s) return null_state();
    if (symbol >= s->model->symbol_count) return tsr_error(TSR_ERR_ARGUMENT, "no index symbol number %u", symbol);
    int64_t lo = from < to ? from : to, hi = from < to ? to : from, range = s->model->symbol_ranges[symbol];
    if (lo < 0 || hi >= range) {
        char given[256];
        loop_options_given(s, given, sizeof given);
        return tsr_error(TSR_ERR_INDEX, "the loop runs '%s' over %" PRId64 "..%" PRId64 ", outside its range 0..%" PRId64
                         ": its bounds come from %s", s->model->symbol_names[symbol], lo, hi, range - 1, given);
    }
    return TSR_OK;
}

/* ---- Printing ------------------------------------------------------------------------------------ */

/* A number for an integer conversion: truncated; NaN and numbers outside the range of int64_t
 * give INT64_MIN (what x86-64's conversion gives; in C the cast would be undefined). */
static int64_t to_int64(double v) {
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : INT64_MIN;
}

/* Cell 0 of buffer `buffer` (which has storage) as a number: an I32 cell's integer, exactly, so
 * that %d prints it and %f prints it converted to double. */
static double buffer_cell0(const tsr_state *s, uint32_t buffer) {
    return tsr_cell_value(s->buffers[buffer], s->model->buffers[buffer].dtype, 0);
}

static int64_t arg_int(const tsr_state *s, const PrintArg *a) {
    switch (a->kind) {
    case TSR_ARG_INT: return a->i;
    case TSR_ARG_FLOAT: return to_int64(a->f);
    case TSR_ARG_SYMBOL: return (int64_t)((uint64_t)s->symbols[a->ref] + (uint64_t)a->i); /* k + 1 */
    case TSR_ARG_OPTION: /* n + k, wrapping as the k + 1 of a symbol does (a hostile image's offset) */
        return (int64_t)((uint64_t)to_int64(s->model->options[a->ref].value) + (uint64_t)a->i);
    default:
        if (!s->buffers[a->ref]) return 0;
        if (tsr_dtype_integer(s->model->buffers[a->ref].dtype)) /* exactly, an i64 beyond 2^53 too */
            return tsr_cell_integer(s->buffers[a->ref], s->model->buffers[a->ref].dtype, 0);
        return to_int64(buffer_cell0(s, a->ref));
    }
}

static double arg_float(const tsr_state *s, const PrintArg *a) {
    switch (a->kind) {
    case TSR_ARG_INT: return (double)a->i;
    case TSR_ARG_FLOAT: return a->f;
    case TSR_ARG_SYMBOL: return (double)arg_int(s, a);
    case TSR_ARG_OPTION: /* plus its offset, if any: -0 + 0 would print as 0 */
        return a->i ? s->model->options[a->ref].value + (double)a->i : s->model->options[a->ref].value;
    default: return s->buffers[a->ref] ? buffer_cell0(s, a->ref) : 0.0;
    }
}

/* The conversion specs are built here from a checked format, one conversion at a time. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* %c: the Unicode character `code` in UTF-8 (U+FFFD, the replacement character, for a code
 * that is none: negative, above 0x10FFFF or a surrogate), padded with spaces to the width in
 * characters, on the left or, with the flag '-', on the right.  `spec` is the conversion without
 * its letter: '%', flags (only '-', the compiler checked) and the width. */
static void print_character(FILE *out, const char *spec, int64_t code) {
    bool left = strchr(spec, '-') != NULL;
    long width = strtol(spec + strspn(spec, "%-"), NULL, 10);
    if (code < 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) code = 0xFFFD;
    char utf8[4];
    int bytes;
    uint32_t c = (uint32_t)code;
    if (c < 0x80) bytes = 1, utf8[0] = (char)c;
    else if (c < 0x800) bytes = 2, utf8[0] = (char)(0xC0 | c >> 6);
    else if (c < 0x10000) bytes = 3, utf8[0] = (char)(0xE0 | c >> 12);
    else bytes = 4, utf8[0] = (char)(0xF0 | c >> 18);
    for (int i = 1; i < bytes; i++) utf8[i] = (char)(0x80 | ((c >> (6 * (bytes - 1 - i))) & 0x3F));
    for (long i = 1; !left && i < width; i++) fputc(' ', out);
    fwrite(utf8, 1, (size_t)bytes, out);
    for (long i = 1; left && i < width; i++) fputc(' ', out);
}

/* The format was checked by the compiler: conversions are %[flags][width][.precision] followed
 * by one of d i u x X o c (integers) or f F e E g G a A (floats), and %%. */
static void print_formatted(FILE *out, const tsr_state *s, const Print *p) {
    uint32_t next = 0;
    for (const char *f = p->format; *f;) {
        if (*f != '%') {
            fputc(*f++, out);
            continue;
        }
        if (f[1] == '%') {
            fputc('%', out);
            f += 2;
            continue;
        }
        char spec[40];
        size_t n = 0;
        spec[n++] = *f++;
        while (*f && strchr("-+ #0123456789.", *f) && n < sizeof spec - 4) spec[n++] = *f++;
        char conv = *f ? *f++ : 'g';
        const PrintArg *a = next < p->arg_count ? &p->args[next++] : NULL;
        if (conv == 's') { /* a tensor's cells as bytes: a whole number 0 … 255 is that byte, else U+FFFD */
            uint8_t dtype = a && a->kind == TSR_ARG_BUFFER ? s->model->buffers[a->ref].dtype : TSR_DTYPE_F32;
            int64_t cells = a && a->kind == TSR_ARG_BUFFER && s->buffers[a->ref] ? s->model->buffers[a->ref].size : 0;
            for (int64_t c = 0; c < cells; c++) {
                double v = tsr_cell_value(s->buffers[a->ref], dtype, c);
                if (v >= 0 && v <= 255 && v == (double)(int)v) fputc((int)v, out);
                else fputs("\xef\xbf\xbd", out);
            }
        } else if (conv == 'c') {
            spec[n] = 0;
            print_character(out, spec, a ? arg_int(s, a) : 0);
        } else if (strchr("diuxXo", conv)) {
            spec[n++] = 'l';
            spec[n++] = 'l';
            spec[n++] = conv;
            spec[n] = 0;
            long long value = a ? (long long)arg_int(s, a) : 0LL;
            /* An i32 cell in an unsigned conversion: its 32 bits, as C's printf shows an int
             * (-1 is ffffffff), not the 64 of its sign extension. */
            if (a && strchr("uxXo", conv) && a->kind == TSR_ARG_BUFFER && s->model->buffers[a->ref].dtype == TSR_DTYPE_I32)
                value = (long long)(uint32_t)value;
            fprintf(out, spec, value);
        } else {
            spec[n++] = conv;
            spec[n] = 0;
            fprintf(out, spec, tsr_print_canonical(a ? arg_float(s, a) : 0.0));
        }
    }
    fputc('\n', out);
}

int tsr_state_print(tsr_state *s, uint32_t print) {
    if (!s) return null_state();
    if (print >= s->model->print_count) return tsr_error(TSR_ERR_ARGUMENT, "no print statement %u", print);
    if (tsr_dist_rank() != 0) return TSR_OK; /* process 0 prints for the run */
    const Print *p = &s->model->prints[print];
    for (uint32_t a = 0; a < p->arg_count; a++) { /* the host copies of the buffers it shows */
        int status = p->args[a].kind == TSR_ARG_BUFFER ? tsr_buffer_to_host(s, p->args[a].ref, false) : TSR_OK;
        if (status != TSR_OK) return status;
    }
    tsr_progress_hide();
    if (p->grid) {
        const Buffer *b = &s->model->buffers[p->args[0].ref];
        tsr_print_cells(stdout, p->label, b->shape_text, s->buffers[p->args[0].ref], b->dtype, b->rank, b->dims);
    } else {
        print_formatted(stdout, s, p);
    }
    if (ferror(stdout)) return tsr_error(TSR_ERR_IO, "cannot write to the standard output");
    return TSR_OK;
}

/* ---- Several processes ------------------------------------------------------------------------- */

/* A value of the agreement check, for its message. */
static void describe_value(const tsr_state *s, int64_t index, int64_t value, char *out, size_t size) {
    const tsr_model *m = s->model;
    if (index >= 2 && index < 2 + (int64_t)m->option_count) { /* an option's value: the bits of a double */
        double v;
        memcpy(&v, &value, sizeof v);
        if (m->options[index - 2].is_float) snprintf(out, size, "%.17g", v);
        else snprintf(out, size, "%" PRId64, (int64_t)v);
    } else {
        snprintf(out, size, "%" PRId64, value);
    }
}

/* The FNV-1a hash of every parameter and training-state tensor's bytes, into hashes[n] (and the
 * buffer into which[n], which may be NULL); the count in *n.  What --check-replicas compares, and the agreement
 * check folds into one value.  A parameter that code writes and no gradient reaches (working
 * state: a count of the process's own batch, a key/value cache) and a gradient whose sums carry
 * between runs (accumulated micro-batches) are the process's own, and left out: their values may
 * differ by design (all_reduce_mean makes them one). */
static int replica_hashes(tsr_state *s, int64_t *hashes, uint32_t *which, uint32_t *n) {
    const tsr_model *m = s->model;
    *n = 0;
    for (uint32_t b = 0; b < m->buffer_count; b++) {
        const Buffer *buffer = &m->buffers[b];
        bool state = tsr_model_buffer_is_state(m, b);
        if (buffer->is_virtual || tsr_model_buffer_is_own(m, b) || !(buffer->kind == TSR_BUF_PARAM || state)) continue;
        int status = tsr_buffer_to_host(s, b, false);
        if (status != TSR_OK) return status;
        if (which) which[*n] = b;
        hashes[(*n)++] = s->buffers[b] ? (int64_t)tsr_image_checksum((const unsigned char *)s->buffers[b], (size_t)buffer->size * tsr_dtype_cell_bytes(buffer->dtype)) : 0;
    }
    return TSR_OK;
}

/* The run's own settings the processes must share, after the options and sizes: --reduce (the
 * collective calls differ), --check-replicas and --save (each a collective call at the end),
 * the parameters they start from (one hash of them all: checkpoints --load read from different
 * disks) and the run counters (routine runs, and each shuffle's count: the permutation a
 * shuffle draws, which must be one on every process). */
enum { AGREE_REDUCE, AGREE_CHECK_REPLICAS, AGREE_SAVE, AGREE_PARAMETERS, AGREE_COUNTERS, AGREE_SETTINGS };
static const char *const agree_names[AGREE_SETTINGS] = {"--reduce", "--check-replicas", "--save",
                                                         "the parameters they start from (a hash of them all)",
                                                         "the run counters (tsrc.runs and tsrc.shuffles)"};

/* FNV-1a of the run counters: the routine runs, then each SHUFFLE action's count. */
static int64_t counters_hash(const tsr_state *s) {
    uint64_t h = tsr_fnv1a_extend(TSR_FNV_BASIS, &s->runs, sizeof s->runs);
    const tsr_action *a;
    for (uint32_t k = 0; (a = tsr_model_action(s->model, k)); k++)
        if (a->kind == TSR_ACTION_SHUFFLE) h = tsr_fnv1a_extend(h, &a->runs, sizeof a->runs);
    return (int64_t)h;
}

int tsr_state_check_agreement(tsr_state *s) {
    if (!s) return null_state();
    if (!tsr_dist_active()) return TSR_OK;
    const tsr_model *m = s->model;
    uint32_t count = 2 + m->option_count + m->symbol_count + AGREE_SETTINGS;
    int64_t *values = malloc(count * sizeof *values);
    int64_t *hashes = calloc(m->buffer_count + 1, sizeof *hashes);
    if (!values || !hashes) {
        free(values);
        free(hashes);
        return tsr_error(TSR_ERR_NOMEM, "out of memory comparing the processes' options");
    }
    uint32_t n = 0, hashed = 0;
    values[n++] = (int64_t)m->program_hash; /* first: another program disagrees on everything */
    values[n++] = (int64_t)s->seed;
    for (uint32_t i = 0; i < m->option_count; i++) {
        double v = m->options[i].value;
        memcpy(&values[n++], &v, sizeof v); /* the bits: -0.0 and 0.0 differ, as they may in a run */
    }
    uint32_t first_size = n;
    for (uint32_t i = 0; i < m->symbol_count; i++)
        if (m->symbol_sizes[i]) values[n++] = s->symbols[i];
    uint32_t first_setting = n;
    values[n++] = m->reduce_ordered;
    values[n++] = m->check_replicas;
    values[n++] = m->save_path != NULL;
    int status = replica_hashes(s, hashes, NULL, &hashed);
    values[n++] = (int64_t)tsr_image_checksum((const unsigned char *)hashes, hashed * sizeof *hashes);
    values[n++] = counters_hash(s);
    free(hashes);
    tsr_dist_difference d = {.index = -1};
    if (status == TSR_OK) status = tsr_dist_compare(values, n, &d);
    free(values);
    if (status != TSR_OK || d.index == -1) return status;
    tsr_dist_set_collective_failure();
    if (d.index == -2)
        return tsr_error(TSR_ERR_DIST, "the processes run different programs: process 0 has %" PRId64 " options and "
                         "sizes, process %d has %" PRId64 "; every process of a distributed run runs the same program",
                         d.value0, d.other_rank, d.value_other);
    if (d.index == 0)
        return tsr_error(TSR_ERR_DIST, "the processes run different programs: process 0's and process %d's were "
                         "compiled from different code (or by different versions of tsrc); every process of a "
                         "distributed run runs the same program", d.other_rank);
    if (d.index >= first_setting) {
        uint32_t k = (uint32_t)(d.index - first_setting);
        if (k == AGREE_PARAMETERS || k == AGREE_COUNTERS)
            return tsr_error(TSR_ERR_DIST, "the processes disagree on %s: process 0's and process %d's differ (did "
                             "they --load or --init-from different checkpoints?); every process of a distributed run "
                             "starts from the same %s", agree_names[k], d.other_rank,
                             k == AGREE_PARAMETERS ? "parameters" : "counters, as a checkpoint holds them");
        if (k == AGREE_REDUCE)
            return tsr_error(TSR_ERR_DIST, "the processes disagree on --reduce: process 0 has %s, process %d has %s; "
                             "every process of a distributed run is started with the same options",
                             d.value0 ? "ordered" : "fast", d.other_rank, d.value_other ? "ordered" : "fast");
        int given = d.value0 ? 0 : d.other_rank, not_given = d.value0 ? d.other_rank : 0;
        return tsr_error(TSR_ERR_DIST, "the processes disagree on %s: process %d was started with it and process %d "
                         "without; every process of a distributed run is started with the same options",
                         agree_names[k], given, not_given);
    }
    char what[256], mine[64], theirs[64];
    if (d.index == 1) snprintf(what, sizeof what, "%s", m->loaded ? "the seed (--seed, or the one --load read)" : "--seed");
    else if (d.index < first_size) snprintf(what, sizeof what, "option '--%s'", m->options[d.index - 2].name);
    else {
        uint32_t k = (uint32_t)(d.index - first_size), symbol = 0;
        for (uint32_t i = 0; i < m->symbol_count; i++)
            if (m->symbol_sizes[i] && k-- == 0) {
                symbol = i;
                break;
            }
        snprintf(what, sizeof what, "run-time size '%s'", m->symbol_names[symbol]);
    }
    describe_value(s, d.index, d.value0, mine, sizeof mine);
    describe_value(s, d.index, d.value_other, theirs, sizeof theirs);
    return tsr_error(TSR_ERR_DIST, "the processes disagree on %s: process 0 has %s, process %d has %s; every process of a "
                     "distributed run needs the same seed, options and data sizes", what, mine, d.other_rank, theirs);
}

/* --check-replicas: every parameter and state tensor must have the same bytes on every process
 * (compared by their 64-bit FNV-1a, the image's checksum function). */
static int check_replicas(tsr_state *s) {
    const tsr_model *m = s->model;
    int64_t *hashes = calloc(m->buffer_count + 1, sizeof *hashes);
    uint32_t *which = calloc(m->buffer_count + 1, sizeof *which);
    if (!hashes || !which) {
        free(hashes);
        free(which);
        return tsr_error(TSR_ERR_NOMEM, "out of memory checking the replicas");
    }
    uint32_t n = 0;
    int status = replica_hashes(s, hashes, which, &n);
    tsr_dist_difference d = {.index = -1};
    if (status == TSR_OK) status = tsr_dist_compare(hashes, n, &d);
    if (status == TSR_OK && d.index != -1) {
        tsr_dist_set_collective_failure();
        status = d.index == -2 ? tsr_error(TSR_ERR_DIST, "--check-replicas: the processes hold different numbers of "
                                           "parameters (%" PRId64 " and %" PRId64 ")", d.value0, d.value_other)
                               : tsr_error(TSR_ERR_DIST, "--check-replicas: tensor '%s' differs between process 0 and "
                                           "process %d (FNV-1a hashes %016" PRIx64 " and %016" PRIx64 "): the replicas "
                                           "have drifted apart", m->buffers[which[d.index]].name, d.other_rank,
                                           (uint64_t)d.value0, (uint64_t)d.value_other);
    }
    free(hashes);
    free(which);
    return status;
}

int tsr_main_save(tsr_state *s) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!s->model) return TSR_OK;
    if (s->model->check_replicas) {
        int status = check_replicas(s);
        if (status != TSR_OK) return status;
    }
    if (!s->model->save_path) return TSR_OK;
    return tsr_checkpoint_save_once(s, s->model->save_path, NULL, 0);
}

int tsr_main_end(tsr_state *s, const char *program) {
    /* A run whose output was lost failed: it saves nothing. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tsr_error(TSR_ERR_IO, "cannot write to the standard output");
        return tsr_main_fail(s, program);
    }
    /* --save PATH: the checkpoint of a run whose main finished (a failed run saves nothing; a
     * NULL state has nothing to save). */
    if (s && tsr_main_save(s) != TSR_OK) return tsr_main_fail(s, program);
    tsr_state_destroy(s);
    if (tsr_dist_finalize() != TSR_OK) return tsr_main_fail(NULL, program);
    return 0;
}

int tsr_main_fail(tsr_state *s, const char *program) {
    fflush(stdout);
    for (const char *line = tsr_last_error();;) { /* several errors (data files at start-up): a line each */
        const char *end = strchr(line, '\n');
        int length = end ? (int)(end - line) : (int)strlen(line);
        if (tsr_dist_size() > 1)
            fprintf(stderr, "%s: error: process %d of %d: %.*s\n", program ? program : "tsr", tsr_dist_rank(),
                    tsr_dist_size(), length, line);
        else fprintf(stderr, "%s: error: %.*s\n", program ? program : "tsr", length, line);
        if (!end) break;
        line = end + 1;
    }
    fflush(stderr);
    tsr_state_destroy(s);
    /* An error of this process alone: the others may wait for it in a collective call forever,
     * so the run ends (MPI_Abort).  One that every process found: each ends by itself. */
    if (tsr_dist_active() && !tsr_dist_collective_failure()) tsr_dist_abort(1);
    tsr_dist_finalize();
    return 1;
}
