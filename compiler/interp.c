/* interp.c — the reference executor of the loop IR.
 *
 * What it does: allocates one float array per non-virtual buffer (zeroed, then initialised:
 * literal values, fills, parameters' seeded uniform numbers), and runs a function by walking
 * its statements: loops bind iterators, stores and locals evaluate scalar expressions with
 * ir.c's single-precision operations.  Every index is checked against its axis; an index
 * symbol without a value is a run-time error, not a crash.
 *
 * Requires: an IrProgram that ir_verify() accepts. */
#include "interp.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

typedef struct Symbol {
    const char *name;
    int64_t value;
} Symbol;

struct Interp {
    const IrProgram *ir;
    float **data;
    int64_t *iters;
    uint32_t iter_cap;
    float *locals;
    uint32_t local_cap;
    Symbol *symbols;
    uint32_t symbol_count;
    bool failed;
};

/* ---- Parameter initialisation: Philox4x32-10 -------------------------------------------------- */

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

static uint32_t philox4x32_10(const uint32_t counter[4], uint64_t key64) {
    uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
    uint32_t k0 = (uint32_t)key64, k1 = (uint32_t)(key64 >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
        uint32_t n[4] = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
        memcpy(c, n, sizeof c);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c[0];
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

float tsr_uniform(uint64_t seed, const char *name, uint64_t cell) {
    uint32_t counter[4] = {(uint32_t)cell, (uint32_t)(cell >> 32), fnv1a(name), 0x7473726eu};
    uint32_t bits = philox4x32_10(counter, seed);
    return (float)((bits >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

/* ---- Set-up ---------------------------------------------------------------------------------- */

Interp *interp_new(const IrProgram *ir) {
    Interp *in = calloc(1, sizeof *in);
    if (!in) diag_fatal_oom();
    in->ir = ir;
    in->data = calloc(ir->buffer_count + 1, sizeof *in->data);
    if (!in->data) diag_fatal_oom();
    for (uint32_t i = 0; i < ir->buffer_count; i++) {
        const IrBuffer *b = &ir->buffers[i];
        if (b->is_virtual) continue;
        in->data[i] = b->size > ((uint64_t)1 << 40) ? NULL : calloc(b->size ? b->size : 1, sizeof(float));
        if (!in->data[i]) {
            if (b->size > ((uint64_t)1 << 40)) {
                diag_error_noloc("tensor '%s' (%s) is too large for the reference executor", b->name, b->shape_text);
                interp_free(in);
                return NULL;
            }
            diag_error_noloc("cannot allocate %" PRIu64 " bytes for tensor '%s'", b->size * 4, b->name);
            interp_free(in);
            return NULL;
        }
        float *d = in->data[i];
        if (b->kind == BUF_DATA) {
            diag_error_noloc("run time: the reference executor cannot produce the data '%s' yet (data "
                             "sources come with the native runtime)", b->name);
            interp_free(in);
            return NULL;
        }
        if (b->kind == BUF_INPUT) /* nobody fills an input here: seeded numbers, like a parameter */
            for (uint64_t c = 0; c < b->size; c++) d[c] = tsr_uniform(ir->seed, b->name, c);
        switch (b->init) {
        case INIT_NONE: break;
        case INIT_FILL:
            for (uint64_t c = 0; c < b->size; c++) d[c] = (float)b->fill;
            break;
        case INIT_VALUES:
            for (uint64_t c = 0; c < b->size; c++) d[c] = (float)b->values[c];
            break;
        case INIT_UNIFORM:
            for (uint64_t c = 0; c < b->size; c++) d[c] = tsr_uniform(ir->seed, b->name, c);
            break;
        }
    }
    return in;
}

void interp_free(Interp *in) {
    if (!in) return;
    for (uint32_t i = 0; i < in->ir->buffer_count; i++) free(in->data[i]);
    free(in->data);
    free(in->iters);
    free(in->locals);
    free(in->symbols);
    free(in);
}

void interp_set_symbol(Interp *in, const char *name, int64_t value) {
    for (uint32_t i = 0; i < in->symbol_count; i++)
        if (strcmp(in->symbols[i].name, name) == 0) {
            in->symbols[i].value = value;
            return;
        }
    Symbol *grown = realloc(in->symbols, (in->symbol_count + 1) * sizeof *grown);
    if (!grown) diag_fatal_oom();
    in->symbols = grown;
    in->symbols[in->symbol_count++] = (Symbol){name, value};
}

/* ---- Running ------------------------------------------------------------------------------------ */

static bool symbol_value(Interp *in, const char *name, int64_t *out) {
    for (uint32_t i = 0; i < in->symbol_count; i++)
        if (strcmp(in->symbols[i].name, name) == 0) {
            *out = in->symbols[i].value;
            return true;
        }
    if (!in->failed)
        diag_error_noloc("run time: index '%s' has no value here (index symbols are bound by the loops of 'main')",
                         name);
    in->failed = true;
    return false;
}

/* The flat offset of an access, or -1 after reporting an error. */
static int64_t offset(Interp *in, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *b = &in->ir->buffers[buffer];
    int64_t flat = 0;
    for (uint32_t a = 0; a < b->rank; a++) {
        int64_t i = index[a].offset;
        for (uint32_t t = 0; t < index[a].term_count; t++) i += index[a].terms[t].coef * in->iters[index[a].terms[t].iter];
        if (index[a].symbol) {
            int64_t v;
            if (!symbol_value(in, index[a].symbol, &v)) return -1;
            i += v;
        }
        if (i < 0 || (uint64_t)i >= b->dims[a]) {
            if (!in->failed)
                diag_error_noloc("run time: index %" PRId64 " is out of range for axis %u of '%s' (size %" PRIu64 ")",
                                 i, a, b->name, b->dims[a]);
            in->failed = true;
            return -1;
        }
        flat = flat * (int64_t)b->dims[a] + i;
    }
    return flat;
}

static float eval(Interp *in, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST: return (float)e->value;
    case IR_LOCAL: return in->locals[e->local];
    case IR_SYMBOL: {
        int64_t v;
        return symbol_value(in, e->symbol, &v) ? (float)v : 0.0f;
    }
    case IR_LOAD: {
        int64_t at = offset(in, e->buffer, e->index);
        return at < 0 ? 0.0f : in->data[e->buffer][at];
    }
    case IR_OP: {
        float x[3] = {0, 0, 0};
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) x[i] = eval(in, e->args[i]);
        return scalar_op_eval(e->op, x[0], x[1], x[2]);
    }
    }
    return NAN;
}

static void run_block(Interp *in, const IrBlock *block) {
    for (uint32_t i = 0; i < block->count && !in->failed; i++) {
        const IrStmt *s = block->items[i];
        switch (s->kind) {
        case IR_LOOP:
            for (uint64_t v = 0; v < s->extent && !in->failed; v++) {
                in->iters[s->iter] = (int64_t)v;
                run_block(in, &s->body);
            }
            break;
        case IR_STORE: {
            float value = eval(in, s->value);
            int64_t at = offset(in, s->buffer, s->index);
            if (at >= 0) in->data[s->buffer][at] = value;
            break;
        }
        case IR_SET_LOCAL: in->locals[s->local] = eval(in, s->value); break;
        }
    }
}

bool interp_run(Interp *in, const IrFunction *fn) {
    if (fn->iter_count > in->iter_cap) {
        free(in->iters);
        in->iters = calloc(fn->iter_count, sizeof *in->iters);
        if (!in->iters) diag_fatal_oom();
        in->iter_cap = fn->iter_count;
    }
    if (fn->local_count > in->local_cap) {
        free(in->locals);
        in->locals = calloc(fn->local_count, sizeof *in->locals);
        if (!in->locals) diag_fatal_oom();
        in->local_cap = fn->local_count;
    }
    in->failed = false;
    run_block(in, &fn->body);
    return !in->failed;
}

const float *interp_buffer(const Interp *in, uint32_t buffer) { return in->data[buffer]; }

/* ---- Printing ------------------------------------------------------------------------------------ */

void interp_print(const Interp *in, uint32_t buffer, const char *name, FILE *out) {
    const IrBuffer *b = &in->ir->buffers[buffer];
    const float *d = in->data[buffer];
    fprintf(out, "%s : %s\n", name, b->shape_text);
    if (!d) return;
    uint64_t line = b->rank ? b->dims[b->rank - 1] : 1;
    uint64_t block = b->rank >= 2 ? line * b->dims[b->rank - 2] : line;
    for (uint64_t c = 0; c < b->size; c += line) {
        if (b->rank > 2 && c % block == 0) {
            if (c) fputc('\n', out);
            fputs("  [", out);
            uint64_t rest = c / block;
            uint64_t idx[b->rank];
            for (uint32_t a = b->rank - 2; a-- > 0;) {
                idx[a] = rest % b->dims[a];
                rest /= b->dims[a];
            }
            for (uint32_t a = 0; a + 2 < b->rank; a++) fprintf(out, "%s%" PRIu64, a ? ", " : "", idx[a]);
            fputs("]\n", out);
        }
        fputs("   ", out);
        for (uint64_t j = 0; j < line; j++) fprintf(out, " %g", (double)d[c + j]);
        fputc('\n', out);
    }
}
