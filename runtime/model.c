/* model.c — the image reader: tsr_model_read() turns a model image (image_format.h; the
 * compiler's compiler/ir/image.c writes it) into a tsr_model, validating as it reads: the
 * magic, version and checksum first, then every table's counts, indices and sizes, so that a
 * damaged or crafted image is refused with TSR_ERR_IMAGE and never half-read; and the CPU
 * extensions the object's native code needs against the running CPU (cpu.c).  It also defines
 * the model's accessors (tsr_model_*), through which the GPU, checkpoint and step files read the
 * model: they call down into this file, never into state.c.
 *
 * Requires: nothing but the image's bytes; the model it returns owns copies of every string. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

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
    free(g->cubin);
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
 * these; anything else, %n say, would read or write memory no argument gives), or a bare %s,
 * which print_formatted writes itself from a buffer's cells (never through printf). */
static bool valid_format(const char *f) {
    for (; *f; f++) {
        if (*f != '%') continue;
        if (*++f == '%') continue;
        size_t n = strspn(f, "-+ #0123456789.");
        if (n > 30 || !f[n] || (!strchr("diuxXocfFeEgGaA", f[n]) && !(f[n] == 's' && n == 0))) return false;
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
    uint64_t cubin = u64(r);
    if (cubin > (uint64_t)(r->end - r->p)) r->bad = true;
    if (cubin && !r->bad) {
        g->cubin = malloc(cubin);
        if (!g->cubin || !take(r, g->cubin, cubin)) r->bad = true;
        g->cubin_size = r->bad ? 0 : cubin;
    }
    g->kernel_count = count(r, 37);
    g->kernels = calloc(g->kernel_count + 1, sizeof *g->kernels);
    if (!g->kernels || (!r->bad && g->kernel_count == 0)) r->bad = true;
    for (uint32_t k = 0; k < g->kernel_count && !r->bad; k++) {
        tsr_gpu_kernel *kn = &g->kernels[k];
        kn->name = str(r);
        uint64_t threads = 1;
        for (int d = 0; d < 3; d++) kn->grid[d] = u32(r);
        for (int d = 0; d < 3; d++) threads *= (kn->block[d] = u32(r));
        kn->shared_bytes = u32(r);
        kn->scalars = u8(r);
        kn->param_count = count(r, 5);
        kn->buffers = calloc(kn->param_count + 1, sizeof *kn->buffers);
        kn->writes = calloc(kn->param_count + 1, sizeof *kn->writes);
        if (!kn->name || !kn->name[0] || !kn->buffers || !kn->writes) r->bad = true;
        for (int d = 0; d < 3; d++)
            if (kn->grid[d] == 0 || kn->block[d] == 0 || (d > 0 && kn->grid[d] > GPU_GRID_YZ) ||
                kn->grid[d] > INT32_MAX)
                r->bad = true;
        if (threads > GPU_BLOCK_THREADS || kn->block[2] > GPU_BLOCK_Z || kn->shared_bytes > GPU_SHARED_BYTES ||
            (kn->scalars & ~(TSR_GPU_READS_SYMBOLS | TSR_GPU_READS_KEY)) ||
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
    free(m->save_path);
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
        tsr_tokens_free(&m->data[i].tokens);
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
        for (int t = 0; t < MEAN_ARRAYS; t++) {
            free(m->actions[i].means[t].cells);
            free(m->actions[i].means[t].pending.requests);
        }
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
    if (size < TSR_IMAGE_HEADER && memcmp(image, TSR_IMAGE_MAGIC, size < 4 ? size : 4) == 0) {
        /* its header does not fit (a size below 4 shows as much of the magic as it covers) */
        tsr_error(TSR_ERR_IMAGE, "the model image is cut short (%zu bytes; its size is MODULE__image_size)", size);
        return NULL;
    }
    take(&r, magic, 4);
    if (r.bad || memcmp(magic, TSR_IMAGE_MAGIC, 4) != 0) {
        tsr_error(TSR_ERR_IMAGE, "not a tsrc model image");
        return NULL;
    }
    uint32_t version = u32(&r);
    if (version != TSR_IMAGE_VERSION && !r.bad) {
        tsr_error(TSR_ERR_IMAGE, "the model image has version %u; this runtime reads version %u "
                                 "(rebuild the object with the tsrc that matches libtsr)", version, TSR_IMAGE_VERSION);
        return NULL;
    }
    uint64_t sum = u64(&r);
    if (r.bad) { /* its header does not fit */
        tsr_error(TSR_ERR_IMAGE, "the model image is cut short (%zu bytes; its size is MODULE__image_size)", size);
        return NULL;
    }
    if (sum != tsr_image_checksum(r.p, (size_t)(r.end - r.p))) {
        tsr_error(TSR_ERR_IMAGE, "the model image is damaged (its checksum does not match over the %zu bytes given: "
                                 "pass MODULE__image_size as its size, or rebuild the object)", size);
        return NULL;
    }
    tsr_model *m = calloc(1, sizeof *m);
    if (!m) {
        tsr_error(TSR_ERR_NOMEM, "out of memory reading the model image");
        return NULL;
    }
    m->module = str(&r);
    m->program_hash = u64(&r);
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
        b->flags = u8(&r);
        b->dtype = u8(&r);
        if (b->kind >= TSR_BUF_KIND_COUNT || b->init >= TSR_INIT_KIND_COUNT || b->is_virtual > 1 ||
            (b->flags & ~(TSR_BUFFER_FLAG_STATE | TSR_BUFFER_FLAG_CARRIED)) ||
            ((b->flags & TSR_BUFFER_FLAG_CARRIED) && !(b->flags & TSR_BUFFER_FLAG_STATE)) || b->dtype >= TSR_DTYPE_COUNT)
            r.bad = true;
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
        /* Values written in the program have a size known when it is compiled: a buffer of
         * run-time size initialised from the image's values is malformed (its cells would
         * outrun the values once the size is set). */
        if (b->value_count > (uint64_t)(r.end - r.p) / 8 ||
            (b->init == TSR_INIT_VALUES && (b->value_count != (uint64_t)b->size || b->size_symbol >= 0)))
            r.bad = true;
        b->values = r.p;
        take(&r, NULL, (size_t)b->value_count * 8);
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
        d->bound = i64(&r);
        if (d->bound < 0) r.bad = true;
        d->sharded = u8(&r);
        d->field_count = count(&r, 4);
        d->fields = calloc(d->field_count + 1, sizeof *d->fields);
        if (!d->fields) r.bad = true;
        if (d->field_count == 0) r.bad = true;
        for (uint32_t f = 0; f < d->field_count && !r.bad; f++) {
            d->fields[f] = u32(&r);
            if (!stored_buffer(m, d->fields[f])) r.bad = true;
            /* the sample axes of a split set are leading axes of every field */
            else if (d->sharded > m->buffers[d->fields[f]].rank) r.bad = true;
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
        m->options[i].among = u8(&r);
        m->options[i].value = f64(&r);
    }
    m->action_count = count(&r, 25); /* kind, an empty text, value, rows, no refs */
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
    for (uint32_t i = 0; i < m->action_count && !r.bad; i++) { /* a group of shuffles counts in its first */
        tsr_action *a = &m->actions[i];
        if (a->kind != TSR_ACTION_SHUFFLE) continue;
        a->counter = i;
        for (uint32_t j = 0; j < i && a->counter == i; j++)
            if (m->actions[j].kind == TSR_ACTION_SHUFFLE && m->actions[j].value == a->value) a->counter = j;
    }
    for (uint32_t i = 0; i < m->action_count && !r.bad; i++) /* a bucket names the end that finishes it */
        if (m->actions[i].kind == TSR_ACTION_REDUCE_BEGIN &&
            (m->actions[i].value < 0 || m->actions[i].value >= (int64_t)m->action_count ||
             m->actions[m->actions[i].value].kind != TSR_ACTION_REDUCE_END))
            r.bad = true;
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

/* ---- Accessors ---------------------------------------------------------------------------------- */

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
bool tsr_model_size_from_file(const tsr_model *m, uint32_t symbol) {
    if (symbol >= m->symbol_count || !m->symbol_sizes[symbol]) return false;
    for (uint32_t d = 0; d < m->data_count; d++)
        for (uint32_t f = 0; f < m->data[d].field_count; f++) {
            int64_t by = m->buffers[m->data[d].fields[f]].size_symbol;
            if (by >= 0 && m->symbol_leaders[by] == m->symbol_leaders[symbol]) return true;
        }
    return false;
}
const tsr_gpu_section *tsr_model_gpu(const tsr_model *m) { return m ? m->gpu : NULL; }
tsr_gpu *tsr_state_gpu(const tsr_state *s) { return s && s->model ? s->model->device : NULL; }
tsr_action *tsr_model_action(const tsr_model *m, uint32_t k) { return m && k < m->action_count ? &m->actions[k] : NULL; }

bool tsr_model_seed_given(const tsr_model *m) { return m && m->seed_given; }
tsr_series *tsr_model_series(const tsr_model *m, uint32_t k) { return m && k < m->series_count ? &m->series[k] : NULL; }
bool tsr_model_reduce_ordered(const tsr_model *m) { return m && m->reduce_ordered; }
void tsr_model_mark_loaded(const tsr_model *m) {
    if (m) ((tsr_model *)m)->loaded = true; /* every state reads a model of its own (tsr_state_create) */
}
bool tsr_model_buffer_is_state(const tsr_model *m, uint32_t buffer) {
    return m && buffer < m->buffer_count && !m->buffers[buffer].is_virtual && (m->buffers[buffer].flags & TSR_BUFFER_FLAG_STATE);
}
bool tsr_model_buffer_is_own(const tsr_model *m, uint32_t buffer) {
    return tsr_model_buffer_is_state(m, buffer) &&
           (m->buffers[buffer].kind == TSR_BUF_PARAM || (m->buffers[buffer].flags & TSR_BUFFER_FLAG_CARRIED));
}
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
uint8_t tsr_model_buffer_dtype(const tsr_model *m, uint32_t buffer) {
    return m && buffer < m->buffer_count ? m->buffers[buffer].dtype : TSR_DTYPE_F32;
}
int tsr_state_buffer_dtype(const tsr_state *s, uint32_t buffer) {
    return s && s->model && buffer < s->model->buffer_count ? s->model->buffers[buffer].dtype : -1;
}
bool tsr_model_token_windows(const tsr_model *m, uint32_t buffer, tsr_token_windows *windows) {
    for (uint32_t i = 0; m && i < m->data_count; i++) {
        const DataSet *d = &m->data[i];
        if (d->fields[0] == buffer && d->tokens.tokens && (!strcmp(d->generator, "tokens") || !strcmp(d->generator, "bytes"))) {
            bool split = d->sharded && tsr_dist_size() > 1;
            *windows = (tsr_token_windows){&d->tokens, d->name, d->path, (uint64_t)d->seed, split ? tsr_dist_rank() : 0,
                                           split ? tsr_dist_size() : 1};
            return true;
        }
    }
    return false;
}
const char *tsr_model_symbol_name(const tsr_model *m, uint32_t i) {
    return m && i < m->symbol_count ? m->symbol_names[i] : NULL;
}
