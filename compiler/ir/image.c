/* image.c — writes the model image (format: runtime/internal.h).
 *
 * The image is how the compiler hands the runtime everything that is data rather than code:
 * buffer names, shapes and initialisers (literal values as float32), data sets with their
 * generators or files, index symbols with their ranges, the print statements of `main`, the
 * program's options with their defaults (the executable's command line, runtime/args.c), and
 * the statements of `main` the runtime carries out (checkpoints, shuffles, series, progress
 * bars: runtime/steps.c).
 * The reference executor builds its state from the same image, so initialisation and data
 * loading are one code path for interpreted and compiled programs.
 *
 * Requires: a verified, optimised IrProgram with its plan (plan.c). */
#include "ir/image.h"

#include <string.h>

#include "runtime/image_format.h"
#include "base/diag.h"

typedef struct Bytes {
    Arena *arena;
    unsigned char *data;
    size_t size, cap;
} Bytes;

static void put(Bytes *b, const void *p, size_t n) {
    if (n == 0) return;
    if (b->size + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->size + n) cap *= 2;
        unsigned char *grown = arena_alloc(b->arena, cap);
        if (b->size) memcpy(grown, b->data, b->size);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->size, p, n);
    b->size += n;
}

static void u8(Bytes *b, uint8_t v) { put(b, &v, 1); }
static void u32(Bytes *b, uint32_t v) { put(b, &v, 4); }
static void u64(Bytes *b, uint64_t v) { put(b, &v, 8); }
static void f64(Bytes *b, double v) { put(b, &v, 8); }
static void str(Bytes *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    u32(b, (uint32_t)n);
    put(b, s, n);
}

/* BufferKind, InitKind and IrPrintArgKind expand the lists the reader's TSR_* values do. */
_Static_assert((int)BUF_COMPUTED == TSR_BUF_COMPUTED && (int)INIT_UNIFORM == TSR_INIT_UNIFORM &&
                   (int)IRP_BUFFER == TSR_ARG_BUFFER && (int)IRA_PROGRESS == TSR_ACTION_PROGRESS,
               "the IR's kinds and the image's kinds come from runtime/image_format.h");

unsigned char *image_build(const IrProgram *ir, const char *module, ImageCpu cpu, const GpuImage *gpu, size_t *size) {
    Bytes b = {.arena = ir->arena};
    put(&b, TSR_IMAGE_MAGIC, 4);
    u32(&b, TSR_IMAGE_VERSION);
    u64(&b, 0); /* the checksum, filled in at the end */
    str(&b, module);
    u64(&b, ir->program_hash);
    u32(&b, cpu.features);
    str(&b, cpu.features ? cpu.name : "");
    u32(&b, ir->symbol_count);
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        str(&b, ir->symbols[i].name);
        u64(&b, (uint64_t)ir->symbols[i].range);
        u8(&b, ir->symbols[i].size);
        u32(&b, ir->symbols[i].size ? ir->symbols[i].leader : i);
    }
    u32(&b, ir->buffer_count);
    for (uint32_t i = 0; i < ir->buffer_count; i++) {
        const IrBuffer *buf = &ir->buffers[i];
        str(&b, buf->name);
        str(&b, buf->shape_text);
        u8(&b, (uint8_t)buf->kind);
        u8(&b, (uint8_t)(buf->is_virtual ? INIT_NONE : buf->init));
        u8(&b, buf->is_virtual);
        u8(&b, (uint8_t)((buf->training_state ? TSR_BUFFER_FLAG_STATE : 0) | (buf->carried ? TSR_BUFFER_FLAG_CARRIED : 0)));
        u8(&b, (uint8_t)buf->dtype);
        u32(&b, buf->rank);
        for (uint32_t a = 0; a < buf->rank; a++) /* a run-time size: -1 - the symbol that sizes it */
            u64(&b, a == 0 && ir_buffer_dynamic(buf) ? (uint64_t)(-1 - (int64_t)buf->size_symbol) : buf->dims[a]);
        f64(&b, buf->fill);
        f64(&b, buf->init_shift);
        bool values = !buf->is_virtual && buf->init == INIT_VALUES;
        u64(&b, values ? buf->size : 0);
        for (uint64_t c = 0; values && c < buf->size; c++) f64(&b, buf->values[c]);
    }
    u32(&b, ir->dataset_count);
    for (uint32_t i = 0; i < ir->dataset_count; i++) {
        const IrDataSet *d = &ir->datasets[i];
        str(&b, d->generator);
        str(&b, d->path);
        str(&b, d->name);
        u64(&b, (uint64_t)d->count);
        u64(&b, (uint64_t)d->seed);
        f64(&b, d->noise);
        f64(&b, d->factor);
        u64(&b, (uint64_t)d->bound);
        u8(&b, d->sharded ? (uint8_t)(d->sample_axes < 255 ? d->sample_axes : 255) : 0);
        u32(&b, d->field_count);
        for (uint32_t f = 0; f < d->field_count; f++) u32(&b, d->fields[f]);
    }
    u32(&b, ir->print_count);
    for (uint32_t i = 0; i < ir->print_count; i++) {
        const IrPrint *pr = &ir->prints[i];
        str(&b, pr->format);
        str(&b, pr->label);
        u8(&b, pr->format == NULL);
        u32(&b, pr->arg_count);
        for (uint32_t a = 0; a < pr->arg_count; a++) {
            const IrPrintArg *x = &pr->args[a];
            u8(&b, (uint8_t)x->kind);
            u64(&b, (uint64_t)x->i);
            f64(&b, x->f);
            u32(&b, x->ref);
        }
    }
    u32(&b, ir->option_count);
    for (uint32_t i = 0; i < ir->option_count; i++) {
        str(&b, ir->options[i].name);
        u8(&b, ir->options[i].is_float);
        u8(&b, ir->options[i].among);
        f64(&b, ir->options[i].value);
    }
    u32(&b, ir->action_count);
    for (uint32_t i = 0; i < ir->action_count; i++) {
        const IrAction *a = &ir->actions[i];
        u8(&b, (uint8_t)a->kind);
        str(&b, a->text);
        u64(&b, (uint64_t)a->value);
        u64(&b, (uint64_t)a->rows);
        u32(&b, a->buffer_count);
        for (uint32_t k = 0; k < a->buffer_count; k++) u32(&b, a->buffers[k]);
    }
    u8(&b, gpu != NULL);
    if (gpu) {
        str(&b, gpu->ptx);
        str(&b, gpu->arch);
        u64(&b, gpu->cubin_size);
        put(&b, gpu->cubin, gpu->cubin_size);
        u32(&b, gpu->kernel_count);
        for (uint32_t k = 0; k < gpu->kernel_count; k++) {
            const GpuKernelInfo *kn = &gpu->kernels[k];
            str(&b, kn->name);
            for (int d = 0; d < 3; d++) u32(&b, kn->grid[d]);
            for (int d = 0; d < 3; d++) u32(&b, kn->block[d]);
            u32(&b, kn->shared_bytes);
            u8(&b, kn->scalars);
            u32(&b, kn->param_count);
            for (uint32_t p = 0; p < kn->param_count; p++) {
                u32(&b, kn->params[p]);
                u8(&b, kn->writes[p]);
            }
        }
    }
    uint64_t sum = tsr_image_checksum(b.data + TSR_IMAGE_HEADER, b.size - TSR_IMAGE_HEADER);
    memcpy(b.data + TSR_IMAGE_HEADER - 8, &sum, 8);
    *size = b.size;
    return b.data;
}
