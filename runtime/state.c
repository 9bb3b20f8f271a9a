/* state.c — a model's run-time state, built from the image its object carries.
 *
 * tsr_state_create() reads the image (internal.h documents the format; compiler/ir/image.c writes
 * it), allocates one 64-byte-aligned buffer per non-virtual tensor, fills literals and
 * constants, initialises parameters (and inputs, until the caller fills them) with
 * tsr_uniform(seed, name, cell), and produces data sets: generators run, files are read and
 * checked against the shapes the compiler inferred.  Print statements of `main` are formatted
 * here, so compiled programs and the reference executor print identically.
 *
 * An image with a GPU section (--target=cuda) also gets its device side here: cuda.c loads the
 * driver and allocates device memory before the buffers are filled; print statements read
 * buffers through the coherence of cuda.c (tsr_buffer_to_host).
 *
 * Requires an image from the same version of tsrc (checked: magic, version and checksum). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct Buffer {
    char *name, *shape_text;
    uint8_t kind, init, is_virtual;
    uint32_t rank;
    int64_t *dims;      /* dims[0] of a run-time size: its current value (0 until set) */
    int64_t size;
    int64_t size_symbol; /* the symbol whose value is dims[0] (a run-time size), or -1 */
    int64_t row_cells;   /* with size_symbol: the cells of one index of dims[0] */
    double fill, shift; /* fill: FILL's value, or UNIFORM's and NORMAL's scale */
    uint64_t value_count;
    const unsigned char *values; /* f32 little-endian, inside the image */
} Buffer;

typedef struct DataSet {
    char *generator, *path, *name;
    int64_t count, seed;
    double noise, factor;
    uint32_t field_count;
    uint32_t *fields;
} DataSet;

typedef struct PrintArg {
    uint8_t kind;
    int64_t i;
    double f;
    uint32_t ref;
} PrintArg;

typedef struct Print {
    char *format, *label;
    uint8_t grid;
    uint32_t arg_count;
    PrintArg *args;
} Print;

struct tsr_model {
    char *module;
    uint32_t symbol_count;
    char **symbol_names;
    int64_t *symbol_ranges;    /* an index symbol's range; a size symbol's least value */
    uint8_t *symbol_sizes;     /* a run-time size (image version 8) */
    uint32_t *symbol_leaders;  /* a size symbol's class's first */
    char **size_files;         /* per symbol: "data 'NAME' file 'PATH'" that set this run-time
                                * size from its length, or NULL (made by the state's data files) */
    uint32_t buffer_count;
    Buffer *buffers;
    uint32_t data_count;
    DataSet *data;
    uint32_t print_count;
    Print *prints;
    uint32_t option_count;
    tsr_option *options; /* the program's `option` items; `value` is the run's value */
    uint32_t action_count;
    tsr_action *actions; /* the statements of main that steps.c runs */
    uint32_t series_count;
    tsr_series *series;  /* what RECORD has appended so far, one per series number */
    tsr_gpu_section *gpu; /* the GPU section, or NULL (a CPU program) */
    tsr_gpu *device;      /* the state's device side (cuda.c), or NULL */
};

/* ---- Reading the image ------------------------------------------------------------------------ */

typedef struct Reader {
    const unsigned char *p, *end;
    bool bad;
} Reader;

static bool take(Reader *r, void *out, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        if (out) memset(out, 0, n);
        return false;
    }
    if (out) memcpy(out, r->p, n);
    r->p += n;
    return true;
}

/* Fixed-width little-endian reads (the host is little-endian: x86-64). */
static uint8_t u8(Reader *r) { uint8_t v; take(r, &v, 1); return v; }
static uint32_t u32(Reader *r) { uint32_t v; take(r, &v, 4); return v; }
static uint64_t u64(Reader *r) { uint64_t v; take(r, &v, 8); return v; }
static int64_t i64(Reader *r) { return (int64_t)u64(r); }
static double f64(Reader *r) { double v; take(r, &v, 8); return v; }

static char *str(Reader *r) {
    uint32_t n = u32(r);
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return calloc(1, 1);
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        r->bad = true;
        return NULL;
    }
    memcpy(s, r->p, n);
    s[n] = 0;
    r->p += n;
    return s;
}

/* A count of items each at least `min_bytes` long: bounded by what is left, so a corrupt count
 * cannot ask for a huge allocation. */
static uint32_t count(Reader *r, size_t min_bytes) {
    uint32_t n = u32(r);
    if ((size_t)(r->end - r->p) / (min_bytes ? min_bytes : 1) < n) r->bad = true;
    return r->bad ? 0 : n;
}

static void gpu_section_free(tsr_gpu_section *g) {
    if (!g) return;
    free(g->ptx);
    free(g->arch);
    for (uint32_t k = 0; g->kernels && k < g->kernel_count; k++) {
        free(g->kernels[k].name);
        free(g->kernels[k].buffers);
        free(g->kernels[k].writes);
    }
    free(g->kernels);
    free(g);
}

/* Limits of a kernel launch: block dimensions and threads (every GPU since sm_20), grid
 * dimensions, the parameter bytes a launch may pass (the classic 4 KiB), and dynamic shared
 * memory (more than any GPU has: the driver refuses what the device cannot give). */
enum { GPU_BLOCK_THREADS = 1024, GPU_BLOCK_Z = 64, GPU_GRID_YZ = 65535, GPU_PARAM_BYTES = 4096,
       GPU_SHARED_BYTES = 1 << 20 };

/* A print format as the compiler writes it: text, %%, and conversions %[flags][width][.precision]
 * followed by one of d i u x X o c f F e E g G a A (print_formatted builds each conversion from
 * these; anything else, %s or %n say, would read or write memory no argument gives). */
static bool valid_format(const char *f) {
    for (; *f; f++) {
        if (*f != '%') continue;
        if (*++f == '%') continue;
        size_t n = strspn(f, "-+ #0123456789.");
        if (n > 30 || !f[n] || !strchr("diuxXocfFeEgGaA", f[n])) return false;
        f += n;
    }
    return true;
}

/* A buffer number the image's tables may name: one that exists and has storage (a virtual
 * buffer has none: a data set, print or action naming one would write through NULL). */
static bool stored_buffer(const tsr_model *m, uint32_t b) { return b < m->buffer_count && !m->buffers[b].is_virtual; }

/* The GPU section (after its has_gpu byte), checked against the model read so far: NULL with
 * r->bad set when malformed. */
static tsr_gpu_section *gpu_section_read(Reader *r, const tsr_model *m) {
    tsr_gpu_section *g = calloc(1, sizeof *g);
    if (!g) {
        r->bad = true;
        return NULL;
    }
    g->ptx = str(r);
    g->arch = str(r);
    if (!g->ptx || !g->arch || !g->ptx[0] || !g->arch[0]) r->bad = true;
    g->kernel_count = count(r, 36);
    g->kernels = calloc(g->kernel_count + 1, sizeof *g->kernels);
    if (!g->kernels || (!r->bad && g->kernel_count == 0)) r->bad = true;
    for (uint32_t k = 0; k < g->kernel_count && !r->bad; k++) {
        tsr_gpu_kernel *kn = &g->kernels[k];
        kn->name = str(r);
        uint64_t threads = 1;
        for (int d = 0; d < 3; d++) kn->grid[d] = u32(r);
        for (int d = 0; d < 3; d++) threads *= (kn->block[d] = u32(r));
        kn->shared_bytes = u32(r);
        kn->param_count = count(r, 5);
        kn->buffers = calloc(kn->param_count + 1, sizeof *kn->buffers);
        kn->writes = calloc(kn->param_count + 1, sizeof *kn->writes);
        if (!kn->name || !kn->name[0] || !kn->buffers || !kn->writes) r->bad = true;
        for (int d = 0; d < 3; d++)
            if (kn->grid[d] == 0 || kn->block[d] == 0 || (d > 0 && kn->grid[d] > GPU_GRID_YZ) ||
                kn->grid[d] > INT32_MAX)
                r->bad = true;
        if (threads > GPU_BLOCK_THREADS || kn->block[2] > GPU_BLOCK_Z || kn->shared_bytes > GPU_SHARED_BYTES ||
            ((uint64_t)m->symbol_count + TSR_SYMBOL_KEY_WORDS + kn->param_count) * 8 > GPU_PARAM_BYTES)
            r->bad = true;
        for (uint32_t p = 0; p < kn->param_count && !r->bad; p++) {
            kn->buffers[p] = u32(r);
            kn->writes[p] = u8(r);
            if (!stored_buffer(m, kn->buffers[p]) || kn->writes[p] > 1) r->bad = true;
        }
    }
    return g;
}

static void model_free(tsr_model *m) {
    if (!m) return;
    gpu_section_free(m->gpu);
    free(m->module);
    for (uint32_t i = 0; i < m->symbol_count; i++) free(m->symbol_names[i]);
    free(m->symbol_names);
    free(m->symbol_ranges);
    free(m->symbol_sizes);
    free(m->symbol_leaders);
    for (uint32_t i = 0; m->size_files && i < m->symbol_count; i++) free(m->size_files[i]);
    free(m->size_files);
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        free(m->buffers[i].name);
        free(m->buffers[i].shape_text);
        free(m->buffers[i].dims);
    }
    free(m->buffers);
    for (uint32_t i = 0; i < m->data_count; i++) {
        free(m->data[i].generator);
        free(m->data[i].path);
        free(m->data[i].name);
        free(m->data[i].fields);
    }
    free(m->data);
    for (uint32_t i = 0; i < m->print_count; i++) {
        free(m->prints[i].format);
        free(m->prints[i].label);
        free(m->prints[i].args);
    }
    free(m->prints);
    for (uint32_t i = 0; i < m->option_count; i++) free(m->options[i].name);
    free(m->options);
    for (uint32_t i = 0; i < m->action_count; i++) {
        free(m->actions[i].text);
        free(m->actions[i].refs);
    }
    free(m->actions);
    for (uint32_t i = 0; i < m->series_count; i++) free(m->series[i].values);
    free(m->series);
    free(m);
}

void tsr_model_free(tsr_model *m) { model_free(m); }

tsr_model *tsr_model_read(const unsigned char *image, size_t size) {
    if (!image) {
        tsr_error(TSR_ERR_ARGUMENT, "the model image is NULL");
        return NULL;
    }
    Reader r = {image, image + size, false};
    char magic[4];
    take(&r, magic, 4);
    if (r.bad || memcmp(magic, TSR_IMAGE_MAGIC, 4) != 0) {
        tsr_error(TSR_ERR_IMAGE, "not a tsrc model image");
        return NULL;
    }
    uint32_t version = u32(&r);
    if (version != TSR_IMAGE_VERSION) {
        tsr_error(TSR_ERR_IMAGE, "the model image has version %u; this runtime reads version %u "
                                 "(rebuild the object with the tsrc that matches libtsr)", version, TSR_IMAGE_VERSION);
        return NULL;
    }
    uint64_t sum = u64(&r);
    if (r.bad || sum != tsr_image_checksum(r.p, (size_t)(r.end - r.p))) {
        tsr_error(TSR_ERR_IMAGE, "the model image is damaged (its checksum does not match; rebuild the object)");
        return NULL;
    }
    tsr_model *m = calloc(1, sizeof *m);
    if (!m) {
        tsr_error(TSR_ERR_NOMEM, "out of memory reading the model image");
        return NULL;
    }
    m->module = str(&r);
    uint32_t cpu_features = u32(&r);
    char *cpu_name = str(&r);
    if (!r.bad && tsr_cpu_check(cpu_features, cpu_name) != TSR_OK) { /* before any generated code runs */
        free(cpu_name);
        model_free(m);
        return NULL;
    }
    free(cpu_name);
    m->symbol_count = count(&r, 12);
    m->symbol_names = calloc(m->symbol_count + 1, sizeof *m->symbol_names);
    m->symbol_ranges = calloc(m->symbol_count + 1, sizeof *m->symbol_ranges);
    m->symbol_sizes = calloc(m->symbol_count + 1, sizeof *m->symbol_sizes);
    m->symbol_leaders = calloc(m->symbol_count + 1, sizeof *m->symbol_leaders);
    m->size_files = calloc(m->symbol_count + 1, sizeof *m->size_files);
    if (!m->symbol_names || !m->symbol_ranges || !m->symbol_sizes || !m->symbol_leaders || !m->size_files) r.bad = true;
    for (uint32_t i = 0; i < m->symbol_count && !r.bad; i++) {
        m->symbol_names[i] = str(&r);
        m->symbol_ranges[i] = i64(&r);
        m->symbol_sizes[i] = u8(&r);
        m->symbol_leaders[i] = u32(&r);
        if (m->symbol_sizes[i] > 1 || m->symbol_leaders[i] >= m->symbol_count ||
            (!m->symbol_sizes[i] && m->symbol_leaders[i] != i))
            r.bad = true;
    }
    for (uint32_t i = 0; i < m->symbol_count && !r.bad; i++)
        if (m->symbol_sizes[i] && !m->symbol_sizes[m->symbol_leaders[i]]) r.bad = true;
    m->buffer_count = count(&r, 40);
    m->buffers = calloc(m->buffer_count + 1, sizeof *m->buffers);
    if (!m->buffers) r.bad = true;
    for (uint32_t i = 0; i < m->buffer_count && !r.bad; i++) {
        Buffer *b = &m->buffers[i];
        b->name = str(&r);
        b->shape_text = str(&r);
        b->kind = u8(&r);
        b->init = u8(&r);
        b->is_virtual = u8(&r);
        u8(&r);
        if (b->kind >= TSR_BUF_KIND_COUNT || b->init >= TSR_INIT_KIND_COUNT || b->is_virtual > 1) r.bad = true;
        b->rank = count(&r, 8);
        b->dims = calloc(b->rank + 1, sizeof *b->dims);
        if (!b->dims) r.bad = true;
        b->size = 1;
        b->size_symbol = -1;
        for (uint32_t a = 0; a < b->rank && !r.bad; a++) {
            b->dims[a] = i64(&r);
            if (a == 0 && b->dims[a] < 0) { /* a run-time size: no cells until it is set */
                b->size_symbol = -1 - b->dims[a];
                b->dims[a] = 0;
                if (b->size_symbol >= m->symbol_count || !m->symbol_sizes[b->size_symbol]) r.bad = true;
                continue;
            }
            if (b->dims[a] < 0 || (b->dims[a] && b->size > INT64_MAX / b->dims[a])) r.bad = true;
            else b->size *= b->dims[a];
        }
        if (b->size_symbol >= 0) {
            b->row_cells = b->size;
            b->size = 0;
        }
        b->fill = f64(&r);
        b->shift = f64(&r);
        b->value_count = u64(&r);
        if (b->value_count > (uint64_t)(r.end - r.p) / 4 ||
            (b->init == TSR_INIT_VALUES && b->value_count != (uint64_t)b->size)) r.bad = true;
        b->values = r.p;
        take(&r, NULL, (size_t)b->value_count * 4);
    }
    m->data_count = count(&r, 56);
    m->data = calloc(m->data_count + 1, sizeof *m->data);
    if (!m->data) r.bad = true;
    for (uint32_t i = 0; i < m->data_count && !r.bad; i++) {
        DataSet *d = &m->data[i];
        d->generator = str(&r);
        d->path = str(&r);
        d->name = str(&r);
        d->count = i64(&r);
        d->seed = i64(&r);
        d->noise = f64(&r);
        d->factor = f64(&r);
        d->field_count = count(&r, 4);
        d->fields = calloc(d->field_count + 1, sizeof *d->fields);
        if (!d->fields) r.bad = true;
        if (d->field_count == 0) r.bad = true;
        for (uint32_t f = 0; f < d->field_count && !r.bad; f++) {
            d->fields[f] = u32(&r);
            if (!stored_buffer(m, d->fields[f])) r.bad = true;
        }
    }
    m->print_count = count(&r, 13);
    m->prints = calloc(m->print_count + 1, sizeof *m->prints);
    if (!m->prints) r.bad = true;
    for (uint32_t i = 0; i < m->print_count && !r.bad; i++) {
        Print *p = &m->prints[i];
        p->format = str(&r);
        if (!p->format || !valid_format(p->format)) r.bad = true;
        p->label = str(&r);
        p->grid = u8(&r);
        p->arg_count = count(&r, 21);
        p->args = calloc(p->arg_count + 1, sizeof *p->args);
        if (!p->args) r.bad = true;
        for (uint32_t a = 0; a < p->arg_count && !r.bad; a++) {
            PrintArg *x = &p->args[a];
            x->kind = u8(&r);
            x->i = i64(&r);
            x->f = f64(&r);
            x->ref = u32(&r);
            if (x->kind >= TSR_ARG_KIND_COUNT || (x->kind == TSR_ARG_SYMBOL && x->ref >= m->symbol_count) ||
                (x->kind == TSR_ARG_BUFFER && !stored_buffer(m, x->ref)))
                r.bad = true;
        }
        if (p->grid && (p->arg_count != 1 || p->args[0].kind != TSR_ARG_BUFFER)) r.bad = true;
    }
    m->option_count = count(&r, 13);
    m->options = calloc(m->option_count + 1, sizeof *m->options);
    if (!m->options) r.bad = true;
    for (uint32_t i = 0; i < m->option_count && !r.bad; i++) {
        m->options[i].name = str(&r);
        m->options[i].is_float = u8(&r);
        m->options[i].value = f64(&r);
    }
    m->action_count = count(&r, 29);
    m->actions = calloc(m->action_count + 1, sizeof *m->actions);
    if (!m->actions) r.bad = true;
    for (uint32_t i = 0; i < m->action_count && !r.bad; i++) {
        tsr_action *a = &m->actions[i];
        a->kind = u8(&r);
        a->text = str(&r);
        a->value = i64(&r);
        a->rows = i64(&r);
        a->ref_count = count(&r, 4);
        a->refs = calloc(a->ref_count + 1, sizeof *a->refs);
        if (!a->refs || a->kind >= TSR_ACTION_KIND_COUNT) r.bad = true;
        for (uint32_t k = 0; k < a->ref_count && !r.bad; k++)
            if (!stored_buffer(m, a->refs[k] = u32(&r))) r.bad = true;
        bool series = a->kind == TSR_ACTION_RECORD || a->kind == TSR_ACTION_PLOT;
        if (series && (a->value < 0 || a->value >= (int64_t)m->action_count)) r.bad = true;
        else if (series && (uint32_t)a->value >= m->series_count) m->series_count = (uint32_t)a->value + 1;
        if (a->kind == TSR_ACTION_RECORD && a->ref_count != 1) r.bad = true;
        if (a->kind == TSR_ACTION_SHUFFLE && (a->rows == 0 || a->ref_count == 0)) r.bad = true; /* < 0: times a run-time length */
    }
    uint8_t has_gpu = u8(&r);
    if (has_gpu > 1) r.bad = true;
    if (has_gpu == 1 && !r.bad) m->gpu = gpu_section_read(&r, m);
    m->series = calloc(m->series_count + 1, sizeof *m->series);
    if (!m->series) r.bad = true;
    for (uint32_t i = 0; i < m->print_count && !r.bad; i++)
        for (uint32_t a = 0; a < m->prints[i].arg_count; a++)
            if (m->prints[i].args[a].kind == TSR_ARG_OPTION && m->prints[i].args[a].ref >= m->option_count) r.bad = true;
    if (r.bad || r.p != r.end) {
        model_free(m);
        tsr_error(TSR_ERR_IMAGE, "the model image is malformed");
        return NULL;
    }
    return m;
}

/* ---- Creating a state ---------------------------------------------------------------------------- */

static float image_float(const unsigned char *p, uint64_t i) {
    float v;
    memcpy(&v, p + i * 4, 4);
    return v;
}

/* Read a file into buffer `buffer` for data item `what`: CSV or .npy. */
static int set_size(tsr_state *s, uint32_t symbol, int64_t value);

/* A buffer of run-time length takes the length of the .npy file's first axis (its size symbol is
 * set to it: data files are read when the state is made).  Files that size one symbol must agree:
 * a second length would give the first file's tensor new, empty storage. */
static int load_file(tsr_state *s, uint32_t buffer, const char *path, const char *what, bool csv) {
    const Buffer *b = &s->model->buffers[buffer];
    if (b->size_symbol >= 0) {
        int64_t length = 0;
        uint32_t symbol = (uint32_t)b->size_symbol;
        char **set_by = &s->model->size_files[symbol];
        int status = csv ? tsr_error(TSR_ERR_DATA, "data '%s': '%s': a CSV file cannot give a run-time length in this "
                                                   "version (use a .npy file)", what, path)
                         : tsr_npy_length(path, what, &length);
        if (status == TSR_OK && *set_by && s->symbols[symbol] != length)
            return tsr_error(TSR_ERR_DATA, "data '%s': '%s' has %" PRId64 " rows, but %s has %" PRId64 ": both give "
                             "their length to run-time size '%s', so they must be equal",
                             what, path, length, *set_by, s->symbols[symbol], s->model->symbol_names[symbol]);
        if (status == TSR_OK) status = set_size(s, symbol, length);
        if (status != TSR_OK) return status;
        if (!*set_by) {
            size_t n = strlen(what) + strlen(path) + 32;
            if (!(*set_by = malloc(n))) return tsr_error(TSR_ERR_NOMEM, "out of memory reading data '%s'", what);
            snprintf(*set_by, n, "data '%s' file '%s'", what, path);
        }
    }
    if (csv) return tsr_load_csv(path, s->buffers[buffer], b->rank, b->dims, what);
    return tsr_load_npy(path, s->buffers[buffer], b->rank, b->dims, what);
}

/* A file `--data` names: CSV when the name ends in ".csv", otherwise .npy. */
static int load_override(tsr_state *s, uint32_t buffer, const char *path) {
    size_t n = strlen(path);
    return load_file(s, buffer, path, s->model->buffers[buffer].name, n >= 4 && strcmp(path + n - 4, ".csv") == 0);
}

/* The path that `--data NAME=PATH` gives buffer `buffer`, or NULL. */
static const char *data_override(const tsr_state *s, uint32_t buffer, const tsr_run_args *args) {
    const char *path = NULL;
    for (uint32_t i = 0; args && i < args->data_count; i++)
        if (strcmp(args->data_names[i], s->model->buffers[buffer].name) == 0) path = args->data_paths[i];
    return path;
}

static int produce_data(tsr_state *s, const DataSet *d, const tsr_run_args *args) {
    const tsr_model *m = s->model;
    float *f0 = s->buffers[d->fields[0]];
    const Buffer *b0 = &m->buffers[d->fields[0]];
    bool replaced = true; /* every field comes from a --data file: nothing to generate */
    for (uint32_t f = 0; f < d->field_count; f++) replaced = replaced && data_override(s, d->fields[f], args);
    if (replaced && strcmp(d->generator, "option") != 0) {
        for (uint32_t f = 0; f < d->field_count; f++) {
            int status = load_override(s, d->fields[f], data_override(s, d->fields[f], args));
            if (status != TSR_OK) return status;
        }
        return TSR_OK;
    }
    if (!strcmp(d->generator, "half_moons") || !strcmp(d->generator, "circles") ||
        !strcmp(d->generator, "spirals")) {
        if (d->field_count != 2 || d->count < 0 || d->count > INT64_MAX / 2 || b0->size != 2 * d->count ||
            m->buffers[d->fields[1]].size != d->count)
            return tsr_error(TSR_ERR_IMAGE, "data '%s': the image's fields do not fit %" PRId64 " points", d->name,
                             d->count);
        float *labels = s->buffers[d->fields[1]];
        if (!strcmp(d->generator, "half_moons")) tsr_half_moons(f0, labels, d->count, d->noise, (uint64_t)d->seed);
        else if (!strcmp(d->generator, "circles"))
            tsr_circles(f0, labels, d->count, d->noise, d->factor, (uint64_t)d->seed);
        else tsr_spirals(f0, labels, d->count, d->noise, (uint64_t)d->seed);
        for (uint32_t f = 0; f < 2; f++) { /* a field that --data replaces */
            const char *path = data_override(s, d->fields[f], args);
            int status = path ? load_override(s, d->fields[f], path) : TSR_OK;
            if (status != TSR_OK) return status;
        }
        return TSR_OK;
    }
    if (d->field_count != 1) return tsr_error(TSR_ERR_IMAGE, "data '%s': malformed", d->name);
    if (!strcmp(d->generator, "option")) { /* an `option` read as a tensor: its value in every cell */
        for (uint32_t i = 0; i < m->option_count; i++)
            if (!strcmp(m->options[i].name, d->path)) {
                for (int64_t c = 0; c < b0->size; c++) f0[c] = (float)m->options[i].value;
                return TSR_OK;
            }
        return tsr_error(TSR_ERR_IMAGE, "data '%s': no option '%s'", d->name, d->path);
    }
    if (!strcmp(d->generator, "range")) {
        for (int64_t c = 0; c < b0->size; c++) f0[c] = (float)c;
        return TSR_OK;
    }
    if (!strcmp(d->generator, "uniform")) {
        for (int64_t c = 0; c < b0->size; c++) f0[c] = tsr_uniform((uint64_t)d->seed, d->name, (uint64_t)c);
        return TSR_OK;
    }
    if (!strcmp(d->generator, "npy") || !strcmp(d->generator, "csv"))
        return load_file(s, d->fields[0], d->path, d->name, !strcmp(d->generator, "csv"));
    return tsr_error(TSR_ERR_IMAGE, "data '%s': unknown generator '%s'", d->name, d->generator);
}

/* Give buffer i storage of its current size (freeing what it had) and its initial values: an
 * input's the caller has not given yet (noise, so that reading it unfilled shows), a fill, the
 * literal's values, a parameter's seeded numbers. */
static int allocate_buffer(tsr_state *s, uint32_t i) {
    const Buffer *b = &s->model->buffers[i];
    if (b->is_virtual) return TSR_OK;
    tsr_free(s->buffers[i]);
    s->buffers[i] = NULL;
    if (b->size == 0) return TSR_OK; /* a run-time size not set yet */
    float *d = s->buffers[i] = tsr_alloc_floats(b->size);
    if (!d)
        return tsr_error(TSR_ERR_NOMEM, "cannot allocate tensor '%s' (%s, %" PRId64 " floats)", b->name, b->shape_text,
                         b->size);
    uint64_t seed = s->seed;
    if (b->kind == TSR_BUF_INPUT) /* until the caller fills it */
        for (int64_t c = 0; c < b->size; c++) d[c] = tsr_uniform(seed, b->name, (uint64_t)c);
    switch (b->init) {
    case TSR_INIT_FILL:
        for (int64_t c = 0; c < b->size; c++) d[c] = (float)b->fill;
        break;
    case TSR_INIT_VALUES:
        for (int64_t c = 0; c < b->size; c++) d[c] = image_float(b->values, (uint64_t)c);
        break;
    case TSR_INIT_UNIFORM:
        for (int64_t c = 0; c < b->size; c++)
            d[c] = (float)(b->shift + b->fill * (double)tsr_uniform(seed, b->name, (uint64_t)c));
        break;
    case TSR_INIT_NORMAL:
        for (int64_t c = 0; c < b->size; c++) d[c] = (float)(b->shift + b->fill * tsr_normal(seed, b->name, (uint64_t)c));
        break;
    default: break;
    }
    return TSR_OK;
}

tsr_state *tsr_state_create(const unsigned char *image, size_t image_size, uint64_t seed) {
    tsr_model *m = tsr_model_read(image, image_size);
    return m ? tsr_state_create_model(m, seed, NULL) : NULL;
}

tsr_state *tsr_state_create_model(tsr_model *m, uint64_t seed, const tsr_run_args *args) {
    tsr_state *s = calloc(1, sizeof *s);
    if (!s) {
        model_free(m);
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
    if (m->gpu && !(m->device = tsr_gpu_open(s, m->gpu))) { /* before the work of filling buffers */
        tsr_state_destroy(s);
        return NULL;
    }
    for (uint32_t i = 0; i < m->buffer_count; i++)
        if (m->buffers[i].size_symbol < 0 && allocate_buffer(s, i) != TSR_OK) {
            tsr_state_destroy(s);
            return NULL;
        }
    for (uint32_t i = 0; i < m->data_count; i++)
        if (produce_data(s, &m->data[i], args) != TSR_OK) { /* the loader recorded the error */
            tsr_state_destroy(s);
            return NULL;
        }
    for (uint32_t i = 0; args && i < args->size_count; i++)
        if (tsr_state_set_symbol(s, args->size_symbols[i], args->size_values[i]) != TSR_OK) {
            tsr_state_destroy(s);
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
    model_free((tsr_model *)s->model);
    free(s);
}

/* ---- Index symbols ---------------------------------------------------------------------------- */

/* Every entry point that takes a state refuses NULL with this error (docs/runtime.md §7). */
static int null_state(void) { return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL"); }

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
    s->symbols[symbol] = value;
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        Buffer *b = &m->buffers[i];
        if (b->size_symbol != (int64_t)symbol) continue;
        b->dims[0] = value;
        b->size = value * b->row_cells;
        int status = allocate_buffer(s, i);
        if (status != TSR_OK) { /* keep the state consistent: this length has no storage */
            b->dims[0] = b->size = 0;
            s->symbols[symbol] = 0;
            return status;
        }
    }
    return TSR_OK;
}

int tsr_state_set_symbol(tsr_state *s, uint32_t symbol, int64_t value) {
    if (!s) return null_state();
    if (symbol >= s->model->symbol_count)
        return tsr_error(TSR_ERR_ARGUMENT, "no index symbol number %u", symbol);
    if (s->model->symbol_sizes[symbol]) {
        /* A size of a class a data file gave a length is that file's length: another would give
         * the file's tensor new, empty rows, or disagree with it. */
        const tsr_model *m = s->model;
        for (uint32_t j = 0; j < m->symbol_count; j++)
            if (m->size_files[j] && m->symbol_leaders[j] == m->symbol_leaders[symbol] && value != s->symbols[j])
                return tsr_error(TSR_ERR_INDEX, "run-time size '%s'%s%s%s is the length of %s (%" PRId64 " rows); it "
                                 "cannot be set to %" PRId64 " (give another file with --data instead)",
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
        return tsr_error(TSR_ERR_INDEX, "run-time size '%s' is not set (set it before running a routine)",
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

int64_t tsr_state_option_int(const tsr_state *s, uint32_t option) {
    if (!s || option >= s->model->option_count) return 0;
    double v = s->model->options[option].value; /* clamped: a conversion out of range is undefined */
    return v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : v == v ? (int64_t)v : 0;
}

int tsr_main_loop_bound(tsr_state *s, uint32_t option, int64_t offset, int64_t *bound) {
    if (!s) return null_state();
    if (!bound) return tsr_error(TSR_ERR_ARGUMENT, "tsr_main_loop_bound: the result pointer is NULL");
    if (option >= s->model->option_count) return tsr_error(TSR_ERR_ARGUMENT, "no option number %u", option);
    int64_t value = tsr_state_option_int(s, option);
    if (__builtin_add_overflow(value, offset, bound))
        return tsr_error(TSR_ERR_INDEX, "a loop bound overflows: option '%s' = %" PRId64 " %s %" PRIu64 " is outside the "
                         "64-bit integers", s->model->options[option].name, value, offset < 0 ? "-" : "+",
                         offset < 0 ? -(uint64_t)offset : (uint64_t)offset);
    return TSR_OK;
}

int tsr_main_loop_check(tsr_state *s, uint32_t symbol, int64_t from, int64_t to) {
    if (!s) return null_state();
    if (symbol >= s->model->symbol_count) return tsr_error(TSR_ERR_ARGUMENT, "no index symbol number %u", symbol);
    int64_t lo = from < to ? from : to, hi = from < to ? to : from, range = s->model->symbol_ranges[symbol];
    if (lo < 0 || hi >= range)
        return tsr_error(TSR_ERR_INDEX, "the loop runs '%s' over %" PRId64 "..%" PRId64 ", outside its range 0..%" PRId64,
                         s->model->symbol_names[symbol], lo, hi, range - 1);
    return TSR_OK;
}

tsr_option *tsr_model_options(tsr_model *m, uint32_t *count) {
    *count = m->option_count;
    return m->options;
}

const char *tsr_model_data_field(const tsr_model *m, uint32_t k) {
    for (uint32_t i = 0; i < m->data_count; i++) {
        if (!strcmp(m->data[i].generator, "option")) continue;
        if (k < m->data[i].field_count) return m->buffers[m->data[i].fields[k]].name;
        k -= m->data[i].field_count;
    }
    return NULL;
}

/* ---- Printing ------------------------------------------------------------------------------------ */

/* A number for an integer conversion: truncated; NaN and numbers outside the range of int64_t
 * give INT64_MIN (what x86-64's conversion gives; in C the cast would be undefined). */
static int64_t to_int64(double v) {
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : INT64_MIN;
}

static int64_t arg_int(const tsr_state *s, const PrintArg *a) {
    switch (a->kind) {
    case TSR_ARG_INT: return a->i;
    case TSR_ARG_FLOAT: return to_int64(a->f);
    case TSR_ARG_SYMBOL: return s->symbols[a->ref];
    case TSR_ARG_OPTION: return to_int64(s->model->options[a->ref].value) + a->i;
    default: return s->buffers[a->ref] ? to_int64((double)s->buffers[a->ref][0]) : 0;
    }
}

static double arg_float(const tsr_state *s, const PrintArg *a) {
    switch (a->kind) {
    case TSR_ARG_INT: return (double)a->i;
    case TSR_ARG_FLOAT: return a->f;
    case TSR_ARG_SYMBOL: return (double)s->symbols[a->ref];
    case TSR_ARG_OPTION: return s->model->options[a->ref].value + (double)a->i;
    default: return s->buffers[a->ref] ? (double)s->buffers[a->ref][0] : 0.0;
    }
}

/* The conversion specs are built here from a checked format, one conversion at a time. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

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
        if (strchr("diuxXoc", conv)) {
            if (conv != 'c') {
                spec[n++] = 'l';
                spec[n++] = 'l';
            }
            spec[n++] = conv;
            spec[n] = 0;
            long long v = a ? (long long)arg_int(s, a) : 0;
            if (conv == 'c') fprintf(out, spec, (int)v);
            else fprintf(out, spec, v);
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
    const Print *p = &s->model->prints[print];
    for (uint32_t a = 0; a < p->arg_count; a++) { /* the host copies of the buffers it shows */
        int status = p->args[a].kind == TSR_ARG_BUFFER ? tsr_buffer_to_host(s, p->args[a].ref, false) : TSR_OK;
        if (status != TSR_OK) return status;
    }
    tsr_progress_hide();
    if (p->grid) {
        const Buffer *b = &s->model->buffers[p->args[0].ref];
        tsr_print_tensor(stdout, p->label, b->shape_text, s->buffers[p->args[0].ref], b->rank, b->dims);
    } else {
        print_formatted(stdout, s, p);
    }
    if (ferror(stdout)) return tsr_error(TSR_ERR_IO, "cannot write to the standard output");
    return TSR_OK;
}

int tsr_main_end(tsr_state *s, const char *program) {
    tsr_state_destroy(s);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tsr_error(TSR_ERR_IO, "cannot write to the standard output");
        return tsr_main_fail(NULL, program);
    }
    return 0;
}

int tsr_main_fail(tsr_state *s, const char *program) {
    fflush(stdout);
    fprintf(stderr, "%s: error: %s\n", program ? program : "tsr", tsr_last_error());
    tsr_state_destroy(s);
    return 1;
}

/* ---- Introspection -------------------------------------------------------------------------------- */

uint32_t tsr_model_buffer_count(const tsr_model *m) { return m ? m->buffer_count : 0; }
const char *tsr_model_buffer_name(const tsr_model *m, uint32_t i) {
    return m && i < m->buffer_count ? m->buffers[i].name : NULL;
}
uint32_t tsr_model_symbol_count(const tsr_model *m) { return m ? m->symbol_count : 0; }
int64_t tsr_model_size_symbol(const tsr_model *m, const char *name, size_t len) {
    for (uint32_t i = 0; i < m->symbol_count; i++)
        if (m->symbol_sizes[i] && strlen(m->symbol_names[i]) == len && memcmp(m->symbol_names[i], name, len) == 0)
            return i;
    return -1;
}
int64_t tsr_model_size_at(const tsr_model *m, uint32_t k) {
    for (uint32_t i = 0; i < m->symbol_count; i++)
        if (m->symbol_sizes[i] && k-- == 0) return i;
    return -1;
}
const tsr_gpu_section *tsr_model_gpu(const tsr_model *m) { return m ? m->gpu : NULL; }
tsr_gpu *tsr_state_gpu(const tsr_state *s) { return s && s->model ? s->model->device : NULL; }
tsr_action *tsr_model_action(const tsr_model *m, uint32_t k) { return m && k < m->action_count ? &m->actions[k] : NULL; }
tsr_series *tsr_model_series(const tsr_model *m, uint32_t k) { return m && k < m->series_count ? &m->series[k] : NULL; }
bool tsr_model_buffer_shape(const tsr_model *m, uint32_t buffer, uint32_t *rank, const int64_t **dims, int64_t *cells,
                            uint8_t *kind) {
    if (!m || buffer >= m->buffer_count) return false;
    const Buffer *b = &m->buffers[buffer];
    *rank = b->rank;
    *dims = b->dims;
    *cells = b->size;
    *kind = b->is_virtual ? TSR_BUF_SCRATCH : b->kind; /* a virtual buffer has no storage to save */
    return true;
}
const char *tsr_model_symbol_name(const tsr_model *m, uint32_t i) {
    return m && i < m->symbol_count ? m->symbol_names[i] : NULL;
}
