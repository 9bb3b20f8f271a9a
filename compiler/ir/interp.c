/* interp.c — the reference executor of the loop IR.
 *
 * What it does: builds the runtime's state from the model image (image.c; the runtime
 * allocates and initialises every buffer: literal values, fills, parameters' seeded uniform
 * numbers, data sets) and runs a function by walking
 * its statements: loops bind iterators, stores and locals evaluate scalar expressions with
 * ir.c's operations in each expression's type (ir_op_eval: single precision for f32, two's
 * complement for i32, double precision for f64), cells addressed by their buffer's cell size
 * (bf16 and f16 cells widened to f32 where loaded and rounded to nearest even where stored).  Every index is checked against its axis; an index
 * symbol out of its range is a run-time error, not a crash.  GPU-scheduled code (--target=cuda)
 * runs as the GPU would run it: a gpu.x/y/z loop block by block and thread by thread with its
 * guard, a block's kernel phase by phase (each nest of thread loops for every thread before the
 * next; barriers then do nothing but land asynchronous copies, at once or as late as the
 * GPU may: struct Interp).  interp_run_main() follows the
 * program plan (plan.c) and prints through the runtime, as compiled programs do.  What is the
 * same for every access is worked out once (each buffer's cell kind, each symbol's number, each
 * operation's arity), and plain loops, f32 sums, products and fused multiply-adds skip the general
 * paths: make check's time goes mostly to this walk.
 *
 * Requires: an IrProgram that ir_verify() accepts. */
#include "ir/interp.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tsr.h"
#include "base/diag.h"

/* The last write and reads of a cell inside a block's kernel (race checks, struct Interp): the
 * barrier epoch, the top-level nest and the block of each, plus one (0: none), and the thread
 * (RACE_MANY: more than one read it). */
typedef struct CellAccess {
    uint64_t write_epoch, write_nest, write_block, read_epoch, read_nest, read_block;
    uint32_t write_thread, read_thread;
} CellAccess;

enum { RACE_MANY = UINT32_MAX };
#define RACE_MANY_BLOCKS UINT64_MAX

/* An asynchronous copy not landed yet (late landing, below): a cell's value and its group. */
typedef struct PendingCopy {
    uint32_t buffer;
    int64_t at;
    IrValue value;
    uint64_t group;
} PendingCopy;

/* How a buffer's cells are loaded and stored (cell_kind): copied as they are (4 or 8 bytes:
 * f32, i32, f64, i64), widened from and rounded to a half type, or widened from and narrowed to a
 * byte (u8, bool). */
typedef enum CellKind { CELL_4, CELL_8, CELL_BF16, CELL_F16, CELL_U8, CELL_BOOL } CellKind;
static const unsigned char cell_kind_bytes[] = {4, 8, 2, 2, 1, 1};

/* The index symbols that accesses name (IrIndex.symbol, IR_SYMBOL), each looked up once by name
 * (ir_symbol) and then found by the name's address: SYMBOL_SLOTS slots, open addressing. */
enum { SYMBOL_SLOTS = 64 };
typedef struct SymbolSlot {
    const char *name;
    uint32_t symbol;
} SymbolSlot;

struct Interp {
    const IrProgram *ir;
    tsr_state *state;
    float **data;          /* state->buffers (cells of each buffer's type: cell_address) */
    unsigned char *cell_kind;              /* per buffer: CellKind */
    unsigned char op_arity[SOP_COUNT];     /* scalar_op_arity */
    SymbolSlot symbol_slots[SYMBOL_SLOTS];
    int64_t *iters;
    uint32_t iter_cap;
    IrValue *locals;
    uint32_t local_cap;
    bool failed;
    /* Asynchronous copies (ir.h LOOP_ASYNC_COPY).  By default each lands at once, the earliest
     * the GPU may land it; with TSR_INTERP_LATE_COPIES=1 in the environment each lands as late
     * as it may: at the barrier after copies that waits for its group.  A schedule whose waits
     * or stages are wrong then reads a stage too early (late) or overwrites it while it is
     * still read (at once), and prints other numbers in one of the two. */
    bool late_copies;
    PendingCopy *pending;
    size_t pending_count, pending_cap;
    uint64_t groups;       /* groups committed: the copies of a phase are the group `groups` */
    /* With late landing, also: per gpu_shared buffer (NULL until read), the barrier epoch in
     * which each cell was last read; a copy into a cell read since the last barrier is a race
     * (another thread may still be reading it when the copy lands), reported as an error. */
    uint64_t epoch;
    uint64_t **read_epoch;
    unsigned thread_depth; /* thread loops open: 0 outside a phase */
    bool phase_copied;     /* the open phase issued copies */
    /* Warpgroup products left running (ir.h IrWgmma's in_flight): each is carried out when it
     * is issued, but the GPU may go on reading its panels and adding into its registers until
     * a later statement's wait retires it.  `wgmma_issued` and `wgmma_retired` count them;
     * running_read[b][at] is one more than the number of the last product left running that
     * read cell `at` of panel b; running_c is their registers.  Writing a cell that a running
     * product reads, or reading its registers, is a race, reported as an error, as is a block
     * that ends with products running. */
    uint64_t wgmma_issued, wgmma_retired;
    uint64_t **running_read;
    uint32_t running_c;
    /* With TSR_INTERP_RACES=1 in the environment, every load and store that a thread of a
     * block's kernel makes is checked against the cell's last write and reads (races): a cell
     * that one thread writes and another reads or writes with no barrier between, or that two
     * blocks of one top-level nest touch, one of them writing it, is a race on the GPU, whatever
     * order the reference executor's phases happen to give it; reported as an error.  A
     * warpgroup product's reads of its panels count as reads by every thread of the block.  (The
     * warps' mma.sync products and fragment loads, and asynchronous copies, have their own
     * checks.) */
    bool races;
    CellAccess **access;   /* per buffer (NULL until touched), per cell */
    uint64_t nest, block;  /* top-level statements and blocks begun */
    unsigned depth, block_depth;
    uint32_t thread[3];    /* threadIdx.x, y, z inside a phase */
};

/* ---- Set-up ---------------------------------------------------------------------------------- */

/* The runtime's last error, as tsrc's "run time:" errors: one for each of its lines (a start
 * with several bad data files records one message a line), each naming the process in a
 * distributed run as an executable's do. */
static void report_runtime_error(void) {
    char process[64] = "";
    if (tsr_dist_size() > 1) snprintf(process, sizeof process, "process %d of %d: ", tsr_dist_rank(), tsr_dist_size());
    for (const char *line = tsr_last_error();;) {
        const char *end = strchr(line, '\n');
        diag_error_noloc("run time: %s%.*s", process, end ? (int)(end - line) : (int)strlen(line), line);
        if (!end) return;
        line = end + 1;
    }
}

Interp *interp_new(const IrProgram *ir, const unsigned char *image, size_t image_size, int argc, char **argv,
                   int *status) {
    *status = 1;
    for (uint32_t i = 0; i < ir->buffer_count; i++)
        if (!ir->buffers[i].is_virtual && ir->buffers[i].size > ((uint64_t)1 << 40)) {
            diag_error_noloc("tensor '%s' (%s) is too large for the reference executor", ir->buffers[i].name,
                             ir->buffers[i].shape_text);
            return NULL;
        }
    tsr_state *state = tsr_main_start(image, image_size, ir->seed, argc, argv, status);
    if (!state) {
        if (*status == 1) report_runtime_error();
        return NULL;
    }
    Interp *in = calloc(1, sizeof *in);
    if (!in) diag_fatal_oom();
    in->ir = ir;
    in->state = state;
    in->data = state->buffers;
    const char *late = getenv("TSR_INTERP_LATE_COPIES");
    in->late_copies = late && strcmp(late, "1") == 0;
    const char *races = getenv("TSR_INTERP_RACES");
    in->races = races && strcmp(races, "1") == 0;
    for (int op = 0; op < SOP_COUNT; op++) in->op_arity[op] = (unsigned char)scalar_op_arity((ScalarOp)op);
    in->cell_kind = malloc(ir->buffer_count + 1);
    if (!in->cell_kind) diag_fatal_oom();
    for (uint32_t b = 0; b < ir->buffer_count; b++) {
        DType dtype = ir->buffers[b].dtype;
        in->cell_kind[b] = dtype == DTYPE_BF16 ? CELL_BF16 : dtype == DTYPE_F16 ? CELL_F16 : dtype == DTYPE_BOOL ? CELL_BOOL
                         : ir_dtype_byte(dtype) ? CELL_U8 : ir_dtype_bytes(dtype) == 8 ? CELL_8 : CELL_4;
    }
    return in;
}

void interp_free(Interp *in) {
    if (!in) return;
    tsr_state_destroy(in->state);
    free(in->iters);
    free(in->locals);
    free(in->pending);
    free(in->cell_kind);
    for (uint32_t b = 0; b < in->ir->buffer_count; b++) {
        if (in->read_epoch) free(in->read_epoch[b]);
        if (in->running_read) free(in->running_read[b]);
        if (in->access) free(in->access[b]);
    }
    free(in->access);
    free(in->read_epoch);
    free(in->running_read);
    free(in);
}

tsr_state *interp_state(Interp *in) { return in->state; }

bool interp_finish(Interp *in) {
    if (tsr_main_save(in->state) == TSR_OK) return true;
    report_runtime_error();
    return false;
}

/* ---- Running ------------------------------------------------------------------------------------ */

/* The number of the index symbol `name` (ir_symbol), or UINT32_MAX. */
static uint32_t symbol_number(Interp *in, const char *name) {
    uint32_t h = (uint32_t)(((uintptr_t)name >> 3) * 2654435761u) % SYMBOL_SLOTS;
    for (uint32_t probe = 0; probe < SYMBOL_SLOTS; probe++, h = (h + 1) % SYMBOL_SLOTS) {
        SymbolSlot *slot = &in->symbol_slots[h];
        if (slot->name == name) return slot->symbol;
        if (!slot->name) {
            uint32_t s = ir_symbol(in->ir, name);
            if (s != UINT32_MAX) *slot = (SymbolSlot){name, s};
            return s;
        }
    }
    return ir_symbol(in->ir, name); /* the table is full */
}

static bool symbol_value(Interp *in, const char *name, int64_t *out) {
    uint32_t s = symbol_number(in, name);
    if (s == UINT32_MAX) {
        if (!in->failed) diag_error_noloc("internal error: unknown index symbol '%s'", name);
        in->failed = true;
        return false;
    }
    *out = in->state->symbols[s];
    return true;
}

/* An extent or axis length: the number, or a run-time size's value (its class's size symbol,
 * which tsr_state_begin_run checked). */
static uint64_t size_value(const Interp *in, uint64_t n) {
    return size_is_runtime(n) ? (uint64_t)in->state->symbols[in->ir->class_symbol[size_class(n)]] : n;
}

/* A per-cell mark of a shared buffer (read_epoch, running_read), allocated when first used. */
static uint64_t *cell_marks(Interp *in, uint64_t ***marks, uint32_t buffer) {
    if (!*marks && !(*marks = calloc(in->ir->buffer_count + 1, sizeof **marks))) diag_fatal_oom();
    if (!(*marks)[buffer] && !((*marks)[buffer] = calloc(in->ir->buffers[buffer].size + 1, sizeof ***marks))) diag_fatal_oom();
    return (*marks)[buffer];
}

static uint64_t *read_epochs(Interp *in, uint32_t buffer) { return cell_marks(in, &in->read_epoch, buffer); }

static void note_shared_read(Interp *in, uint32_t buffer, int64_t at) { read_epochs(in, buffer)[at] = in->epoch + 1; }

/* Whether a write of cell `at` of a shared buffer races with a warpgroup product still running
 * (reported). */
static bool races_running_product(Interp *in, uint32_t buffer, int64_t at) {
    if (in->wgmma_issued == in->wgmma_retired || !in->running_read || !in->running_read[buffer] ||
        in->running_read[buffer][at] <= in->wgmma_retired)
        return false;
    diag_error_noloc("run time: a write of %s[%" PRId64 "] while a warpgroup product that reads it is still running",
                     in->ir->buffers[buffer].name, at);
    in->failed = true;
    return true;
}

/* ---- Races inside a block's kernel (TSR_INTERP_RACES=1) ----------------------------------------- */

static CellAccess *cell_access(Interp *in, uint32_t buffer, int64_t at) {
    if (!in->access && !(in->access = calloc(in->ir->buffer_count + 1, sizeof *in->access))) diag_fatal_oom();
    if (!in->access[buffer] && !(in->access[buffer] = calloc(in->ir->buffers[buffer].size + 1, sizeof **in->access)))
        diag_fatal_oom();
    return &in->access[buffer][at];
}

static bool race(Interp *in, uint32_t buffer, int64_t at, const char *what) {
    diag_error_noloc("run time: a race on the GPU: %s[%" PRId64 "] %s", in->ir->buffers[buffer].name, at, what);
    in->failed = true;
    return true;
}

/* Whether this access of cell `at` by the current thread races with an earlier one (reported). */
static bool races_access(Interp *in, uint32_t buffer, int64_t at, bool write) {
    if (!in->races || !in->block_depth || !in->thread_depth || in->failed) return false;
    CellAccess *c = cell_access(in, buffer, at);
    uint64_t epoch = in->epoch + 1, nest = in->nest + 1, block = in->block + 1;
    uint32_t thread = in->thread[0] + 1024 * (in->thread[1] + 1024 * in->thread[2]);
    const IrBuffer *b = &in->ir->buffers[buffer];
    if (b->gpu_shared || b->kernel_local) nest = 0; /* each block's own: no race between blocks */
    if (nest && c->write_nest == nest && c->write_block != block)
        return race(in, buffer, at, "is written by one block and touched by another in the same kernel");
    if (c->write_epoch == epoch && c->write_thread != thread)
        return race(in, buffer, at, write ? "is written by two threads with no barrier between"
                                          : "is written by one thread and read by another with no barrier between");
    if (write) {
        if (nest && c->read_nest == nest && c->read_block != block)
            return race(in, buffer, at, "is read by one block and written by another in the same kernel");
        if (c->read_epoch == epoch && c->read_thread != thread)
            return race(in, buffer, at, "is read by one thread and written by another with no barrier between");
        c->write_epoch = epoch, c->write_nest = nest, c->write_block = block, c->write_thread = thread;
        return false;
    }
    c->read_thread = c->read_epoch == epoch && c->read_thread != thread ? RACE_MANY : thread;
    c->read_block = c->read_nest == nest && c->read_block != block ? RACE_MANY_BLOCKS : block;
    c->read_epoch = epoch, c->read_nest = nest;
    return false;
}

static IrValue eval(Interp *in, const IrExpr *e);

/* Where cell `at` of buffer `buffer` is: cells of its type's size (ir_dtype_bytes). */
static void *cell_address(Interp *in, uint32_t buffer, int64_t at) {
    return (unsigned char *)in->data[buffer] + (size_t)at * cell_kind_bytes[in->cell_kind[buffer]];
}

/* A bf16 or f16 cell, widened to the f32 it holds (exactly), or rounded from an f32 value to
 * nearest even: tsr.h's conversions, which generated code repeats (docs/ir.md §2.10). */
static IrValue load_half(DType dtype, const void *cell) {
    uint16_t h;
    memcpy(&h, cell, sizeof h);
    return (IrValue){.f = dtype == DTYPE_BF16 ? tsr_bf16_to_f32(h) : tsr_f16_to_f32(h)};
}
static void store_half(DType dtype, void *cell, IrValue value) {
    uint16_t h = dtype == DTYPE_BF16 ? tsr_f32_to_bf16(value.f) : tsr_f32_to_f16(value.f);
    memcpy(cell, &h, sizeof h);
}

/* A u8 or bool cell as the i32 it holds (zero-extended), or an i32 value stored in one: a u8
 * keeps the low 8 bits, a bool whether the value is not 0 (docs/ir.md §2.8). */
static IrValue load_byte(const void *cell) { return (IrValue){.f = ir_bits_of_i32(*(const uint8_t *)cell)}; }
static void store_byte(DType dtype, void *cell, IrValue value) {
    int32_t v = ir_i32_of_bits(value.f);
    *(uint8_t *)cell = dtype == DTYPE_BOOL ? v != 0 : (uint8_t)(v & 255);
}

/* Cell `at` of a buffer, as its compute type holds it, or a value stored in it (CellKind). */
static IrValue load_cell(Interp *in, uint32_t buffer, int64_t at) {
    const void *cell = cell_address(in, buffer, at);
    IrValue v = {0};
    switch ((CellKind)in->cell_kind[buffer]) {
    case CELL_4: memcpy(&v, cell, 4); return v;
    case CELL_8: memcpy(&v, cell, 8); return v;
    case CELL_BF16: return load_half(DTYPE_BF16, cell);
    case CELL_F16: return load_half(DTYPE_F16, cell);
    case CELL_U8: case CELL_BOOL: return load_byte(cell);
    }
    return v;
}

static void store_cell(Interp *in, uint32_t buffer, int64_t at, IrValue value) {
    void *cell = cell_address(in, buffer, at);
    switch ((CellKind)in->cell_kind[buffer]) {
    case CELL_4: memcpy(cell, &value, 4); break;
    case CELL_8: memcpy(cell, &value, 8); break;
    case CELL_BF16: store_half(DTYPE_BF16, cell, value); break;
    case CELL_F16: store_half(DTYPE_F16, cell, value); break;
    case CELL_U8: store_byte(DTYPE_U8, cell, value); break;
    case CELL_BOOL: store_byte(DTYPE_BOOL, cell, value); break;
    }
}

/* The flat offset of an access, or -1 after reporting an error.  A gathered axis is read at its
 * expression's value, an i32, clamped to the axis (docs/ir.md §2.8). */
static int64_t offset(Interp *in, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *b = &in->ir->buffers[buffer];
    int64_t flat = 0;
    for (uint32_t a = 0; a < b->rank; a++) {
        if (index[a].gather) {
            int64_t at = ir_i32_of_bits(eval(in, index[a].gather).f), length = (int64_t)size_value(in, b->dims[a]);
            flat = flat * length + (at < 0 ? 0 : at >= length ? length - 1 : at);
            continue;
        }
        int64_t i = index[a].offset;
        for (uint32_t t = 0; t < index[a].term_count; t++) i += index[a].terms[t].coef * in->iters[index[a].terms[t].iter];
        if (index[a].symbol) {
            int64_t v;
            if (!symbol_value(in, index[a].symbol, &v)) return -1;
            i += v;
        }
        uint64_t length = size_value(in, b->dims[a]);
        if (i < 0 || (uint64_t)i >= length) {
            if (!in->failed)
                diag_error_noloc("run time: index %" PRId64 " is out of range for axis %u of '%s' (size %" PRIu64 ")",
                                 i, a, b->name, length);
            in->failed = true;
            return -1;
        }
        flat = flat * (int64_t)length + i;
    }
    return flat;
}

static IrValue eval(Interp *in, const IrExpr *e) {
    IrValue v = {0};
    switch (e->kind) {
    case IR_CONST: return ir_const_value(e->type, e->value);
    case IR_LOCAL: return in->locals[e->local];
    case IR_SYMBOL: {
        int64_t s;
        v.f = symbol_value(in, e->symbol, &s) ? (float)s : 0.0f;
        return v;
    }
    case IR_LOAD: {
        int64_t at = offset(in, e->buffer, e->index);
        if (at < 0) return v;
        if (in->late_copies || in->races) { /* bookkeeping of a GPU schedule's run */
            if (in->late_copies && in->ir->buffers[e->buffer].gpu_shared) note_shared_read(in, e->buffer, at);
            if (races_access(in, e->buffer, at, false)) return v;
        }
        if (in->wgmma_issued > in->wgmma_retired && e->buffer == in->running_c && !in->failed) {
            diag_error_noloc("run time: a read of %s while the warpgroup products that add into it are still running",
                             in->ir->buffers[e->buffer].name);
            in->failed = true;
        }
        return load_cell(in, e->buffer, at);
    }
    case IR_RANDOM: { /* the run's key: what tsr_state_begin_run wrote past the symbols */
        int64_t at = offset(in, e->buffer, e->index);
        const int64_t *key = in->state->symbols + in->ir->symbol_count;
        v.f = at < 0 ? 0.0f
                     : tsr_random_cell((uint64_t)key[TSR_SYMBOL_SEED], (uint64_t)key[TSR_SYMBOL_RUN],
                                       ir_random_site(&in->ir->buffers[e->buffer]), (uint64_t)at);
        return v;
    }
    case IR_OP: {
        IrValue x[3] = {{0}, {0}, {0}};
        for (unsigned i = 0; i < in->op_arity[e->op]; i++) x[i] = eval(in, e->args[i]);
        if (e->type == DTYPE_F32) switch (e->op) { /* the commonest, as ir_op_eval computes them */
            case SOP_ADD: v.f = x[0].f + x[1].f; return v;
            case SOP_MUL: v.f = x[0].f * x[1].f; return v;
            case SOP_FMA: v.f = fmaf(x[0].f, x[1].f, x[2].f); return v;
            default: break;
            }
        unsigned operands = scalar_op_conversion(e->op) ? ir_expr_type(in->ir, e->args[0]) : e->type;
        return ir_op_eval(e->op, e->type, operands, x);
    }
    }
    v.f = NAN;
    return v;
}

/* Late landing: the copies of the groups before `before` land, in the order they were issued. */
static void land_copies(Interp *in, uint64_t before) {
    size_t kept = 0;
    for (size_t i = 0; i < in->pending_count; i++) {
        PendingCopy *c = &in->pending[i];
        if (c->group < before) store_cell(in, c->buffer, c->at, c->value);
        else in->pending[kept++] = *c;
    }
    in->pending_count = kept;
}

/* A LOOP_ASYNC_COPY loop: each cell copied at once, or held until its group may land. */
static void async_copy(Interp *in, const IrStmt *l) {
    const IrStmt *st = l->body.items[0];
    for (uint64_t v = 0; v < l->extent && !in->failed; v++) {
        in->iters[l->iter] = (int64_t)v;
        IrValue value = eval(in, st->value);
        int64_t at = offset(in, st->buffer, st->index);
        if (at < 0) continue;
        if (races_running_product(in, st->buffer, at)) return;
        if (!in->late_copies) {
            store_cell(in, st->buffer, at, value);
            continue;
        }
        if (read_epochs(in, st->buffer)[at] == in->epoch + 1) {
            diag_error_noloc("run time: an asynchronous copy into %s[%" PRId64 "] with no barrier since the block read it",
                             in->ir->buffers[st->buffer].name, at);
            in->failed = true;
            return;
        }
        if (in->pending_count == in->pending_cap) {
            in->pending_cap = in->pending_cap ? 2 * in->pending_cap : 1024;
            in->pending = realloc(in->pending, in->pending_cap * sizeof *in->pending);
            if (!in->pending) diag_fatal_oom();
        }
        in->pending[in->pending_count++] = (PendingCopy){st->buffer, at, value, in->groups};
    }
    in->phase_copied = true;
}

/* Cell `at` of an IR_MMA's A or B registers or of an IR_WGMMA's panel: f32 (tf32) or the
 * operands' half type, widened. */
static float mma_operand(Interp *in, uint32_t buffer, uint64_t at) {
    DType dtype = in->ir->buffers[buffer].dtype;
    return ir_dtype_half(dtype) ? load_half(dtype, cell_address(in, buffer, (int64_t)at)).f : in->data[buffer][at];
}

/* IR_MMA as the warps carry it out (ir.h IrMma): each warp's A, B and C gathered from its 32
 * threads' registers by the fragment layouts, each cell of C then takes the 16 (tf32: 8) steps in order
 * as fused multiply-adds (the canonical nest's order), and D scattered back into C's registers. */
static void run_mma(Interp *in, const IrMma *m) {
    const IrBuffer *bufs = in->ir->buffers;
    float *c = in->data[m->c];
    uint64_t ac = bufs[m->a].thread_cells, bc = bufs[m->b].thread_cells, cc = bufs[m->c].thread_cells;
    bool tf32 = m->in == DTYPE_F32;
    unsigned steps = ir_mma_k(m->in);
    for (uint32_t w = 0; w < m->warps; w++) {
        float A[16][16], B[16][8], C[16][8];
        for (uint32_t lane = 0; lane < 32; lane++) {
            uint64_t t = (uint64_t)w * 32 + lane;
            uint32_t g = lane / 4, q = lane % 4;
            if (tf32) {
                for (uint32_t r = 0; r < 4; r++) A[g + 8 * (r % 2)][q + 4 * (r / 2)] = mma_operand(in, m->a, t * ac + m->a_at + r);
                for (uint32_t r = 0; r < 2; r++) B[q + 4 * r][g] = mma_operand(in, m->b, t * bc + m->b_at + r);
            } else {
                for (uint32_t r = 0; r < 8; r++)
                    A[g + 8 * (r / 2 % 2)][2 * q + r % 2 + 8 * (r / 4)] = mma_operand(in, m->a, t * ac + m->a_at + r);
                for (uint32_t r = 0; r < 4; r++) B[2 * q + r % 2 + 8 * (r / 2)][g] = mma_operand(in, m->b, t * bc + m->b_at + r);
            }
            for (uint32_t r = 0; r < 4; r++) C[g + 8 * (r / 2)][2 * q + r % 2] = c[t * cc + m->c_at + r];
        }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++)
                for (unsigned k = 0; k < steps; k++) C[i][j] = fmaf(A[i][k], B[k][j], C[i][j]);
        for (uint32_t lane = 0; lane < 32; lane++) {
            uint64_t t = (uint64_t)w * 32 + lane;
            uint32_t g = lane / 4, q = lane % 4;
            for (uint32_t r = 0; r < 4; r++) c[t * cc + m->c_at + r] = C[g + 8 * (r / 2)][2 * q + r % 2];
        }
    }
}

/* IR_LDMATRIX as the warps carry it out (ir.h IrLdmatrix): each lane of a warp names a row of a
 * matrix, and each thread receives its bytes of every matrix from the rows its warp's lanes
 * named. */
static void run_ldmatrix(Interp *in, const IrLdmatrix *l) {
    const IrBuffer *panel = &in->ir->buffers[l->panel];
    unsigned cell = ir_dtype_bytes(panel->dtype), per = 4 / cell;
    uint64_t cells = in->ir->buffers[l->regs].thread_cells;
    for (uint32_t w = 0; w < l->warps; w++) {
        int64_t row_at[32]; /* the first cell of each lane's row */
        for (uint32_t lane = 0; lane < 8 * l->matrices; lane++) {
            uint32_t i = lane / 8;
            row_at[lane] = l->at + (int64_t)(w / l->warps_j) * l->warp_row + (int64_t)(w % l->warps_j) * l->warp_col +
                           (int64_t)(lane % 8) * l->row + (int64_t)(i & 1) * l->matrix[0] + (int64_t)(i >> 1) * l->matrix[1];
        }
        for (uint32_t lane = 0; lane < 32; lane++) {
            uint32_t g = lane / 4, q = lane % 4;
            uint64_t t = (uint64_t)w * 32 + lane;
            for (uint32_t i = 0; i < l->matrices; i++)
                for (uint32_t c = 0; c < per; c++) {
                    /* The cell's matrix row and its place in the row, in cells. */
                    uint32_t row = l->trans ? 2 * q + c : g, at = l->trans ? g : q * per + c;
                    int64_t from = row_at[8 * i + row] + at;
                    if (in->late_copies) note_shared_read(in, l->panel, from);
                    memcpy(cell_address(in, l->regs, (int64_t)(t * cells + l->regs_at + per * i + c)), cell_address(in, l->panel, from),
                           cell);
                }
        }
    }
}

/* A warpgroup product's read of cell `at` of a panel (TSR_INTERP_RACES=1): a race, reported,
 * where a thread wrote the cell since the last barrier; else the cell is marked read by many
 * threads, so that a thread's write of it before the next barrier is a race too. */
static void note_product_read(Interp *in, uint32_t panel, int64_t at) {
    if (!in->races || !in->block_depth || in->failed) return;
    CellAccess *c = cell_access(in, panel, at);
    uint64_t epoch = in->epoch + 1;
    if (c->write_epoch == epoch) race(in, panel, at, "is written by a thread and read by a warpgroup product with no barrier between");
    else c->read_epoch = epoch, c->read_thread = RACE_MANY;
}

/* A cell of an IR_WGMMA operand panel, widened to f32; `running`: the product is left
 * running, and marks the cell read. */
static float core_operand(Interp *in, uint32_t panel, const IrCoreLayout *l, int64_t r, int64_t k, bool running) {
    int64_t at = ir_core_cell(l, r, k);
    if (in->late_copies) note_shared_read(in, panel, at);
    note_product_read(in, panel, at);
    if (running) cell_marks(in, &in->running_read, panel)[at] = in->wgmma_issued + 1;
    return mma_operand(in, panel, (uint64_t)at);
}

/* IR_WGMMA as the warpgroups carry it out (ir.h IrWgmma): A's rows and B's columns read once
 * from their panels by their core-matrix layouts, C gathered from the threads' registers by
 * the accumulator layout, each cell's steps taken in order as fused multiply-adds, C
 * scattered back; then the products before the last `in_flight` retire. */
static void run_wgmma(Interp *in, const IrWgmma *w) {
    bool running = w->in_flight > 0;
    float *c = in->data[w->c], *a = malloc(sizeof *a * ((size_t)w->rows + w->n) * w->steps), *b;
    if (!a) diag_fatal_oom();
    b = a + (size_t)w->rows * w->steps; /* a[row·steps + k], b[col·steps + k] */
    for (uint32_t k = 0; k < w->steps; k++) {
        for (uint32_t row = 0; row < w->rows; row++) a[(size_t)row * w->steps + k] = core_operand(in, w->a, &w->a_layout, row, k, running);
        for (uint32_t col = 0; col < w->n; col++) b[(size_t)col * w->steps + k] = core_operand(in, w->b, &w->b_layout, col, k, running);
    }
    uint64_t cells = in->ir->buffers[w->c].thread_cells;
    uint32_t group_rows = w->rows / w->warpgroups;
    for (uint32_t h = 0; h < group_rows / 64; h++)
        for (uint32_t t = 0; t < 128 * w->warpgroups; t++) {
            uint32_t group = t / 128, warp = t / 32 % 4, g = t % 32 / 4, q = t % 4;
            for (uint32_t reg = 0; reg < w->n / 2; reg++) {
                uint32_t i = reg / 4, r1 = reg / 2 % 2, r0 = reg % 2;
                uint32_t row = group_rows * group + 64 * h + 16 * warp + g + 8 * r1, col = 8 * i + 2 * q + r0;
                float *d = &c[t * cells + w->c_at + h * w->n / 2 + reg];
                const float *ar = a + (size_t)row * w->steps, *bc = b + (size_t)col * w->steps;
                for (uint32_t k = 0; k < w->steps; k++) *d = fmaf(ar[k], bc[k], *d);
            }
        }
    free(a);
    in->wgmma_issued++;
    if (in->wgmma_issued - in->wgmma_retired > w->in_flight) in->wgmma_retired = in->wgmma_issued - w->in_flight;
    in->running_c = w->c;
}

static void run_block(Interp *in, const IrBlock *block) {
    in->depth++;
    for (uint32_t i = 0; i < block->count && !in->failed; i++) {
        const IrStmt *s = block->items[i];
        if (in->depth == 1) in->nest++; /* a top-level statement: a kernel of its own, or a segment */
        switch (s->kind) {
        case IR_LOOP:
            if (ir_mode_flat_gpu(s->mode)) { /* as the GPU runs it: blocks of threads, the guard */
                uint64_t blocks = (s->extent + s->threads - 1) / s->threads;
                for (uint64_t b = 0; b < blocks && !in->failed; b++)
                    for (uint64_t t = 0; t < s->threads && !in->failed; t++) {
                        uint64_t v = b * s->threads + t;
                        if (v >= s->extent) continue;
                        in->iters[s->iter] = (int64_t)v;
                        run_block(in, &s->body);
                    }
                break;
            }
            if (s->mode == LOOP_BLOCKS) { /* the symbol walks the rows (ir.h) */
                int64_t n = (int64_t)size_value(in, s->extent), b = s->block, a = s->block_after;
                for (int64_t v = a ? n / a * a : 0; v + b <= n && !in->failed; v += b) {
                    in->state->symbols[s->block_symbol] = v;
                    run_block(in, &s->body);
                }
                break;
            }
            if (s->mode == LOOP_ASYNC_COPY) {
                async_copy(in, s);
                break;
            }
            if (!ir_mode_thread(s->mode) && !ir_mode_block(s->mode)) { /* a loop of this thread's */
                uint64_t n = size_value(in, s->extent);
                int64_t *iter = &in->iters[s->iter];
                for (uint64_t v = 0; v < n && !in->failed; v++) {
                    *iter = (int64_t)v;
                    run_block(in, &s->body);
                }
                break;
            }
            unsigned dim = s->mode - LOOP_THREAD_X;
            uint32_t thread_base = ir_mode_thread(s->mode) ? in->thread[dim] : 0;
            if (ir_mode_thread(s->mode)) in->thread_depth++;
            if (ir_mode_block(s->mode)) in->block_depth++;
            for (uint64_t v = 0, n = size_value(in, s->extent); v < n && !in->failed; v++) {
                in->iters[s->iter] = (int64_t)v;
                if (ir_mode_thread(s->mode)) /* an outer loop that splits its dimension: threadIdx / thread_stride */
                    in->thread[dim] = thread_base + (uint32_t)v * (s->thread_stride > 1 ? s->thread_stride : 1);
                if (ir_mode_block(s->mode)) in->block++;
                run_block(in, &s->body);
                if (ir_mode_block(s->mode)) { /* a block's copies land before it ends; the next block reads afresh */
                    land_copies(in, UINT64_MAX);
                    in->epoch++;
                    if (in->wgmma_issued > in->wgmma_retired && !in->failed) {
                        diag_error_noloc("run time: a GPU block ends with warpgroup products still running");
                        in->failed = true;
                    }
                }
            }
            if (ir_mode_block(s->mode)) in->block_depth--;
            if (ir_mode_thread(s->mode)) in->thread[dim] = thread_base;
            if (ir_mode_thread(s->mode) && --in->thread_depth == 0 && in->phase_copied) { /* the phase's group */
                in->groups++;
                in->phase_copied = false;
            }
            break;
        case IR_STORE: {
            IrValue value = eval(in, s->value);
            int64_t at = offset(in, s->buffer, s->index);
            if (at >= 0 && (in->wgmma_issued == in->wgmma_retired || !races_running_product(in, s->buffer, at)) &&
                (!in->races || !races_access(in, s->buffer, at, true)))
                store_cell(in, s->buffer, at, value);
            break;
        }
        case IR_SET_LOCAL: in->locals[s->local] = eval(in, s->value); break;
        case IR_BARRIER: /* each phase has already run for every thread */
            if (s->await_copies && in->groups >= s->copies_in_flight) land_copies(in, in->groups - s->copies_in_flight);
            in->epoch++;
            break;
        case IR_MMA: run_mma(in, &s->mma); break;
        case IR_LDMATRIX: run_ldmatrix(in, &s->ldmatrix); break;
        case IR_WGMMA: run_wgmma(in, &s->wgmma); break;
        case IR_CALL: /* as a generated routine calls it */
            if (tsr_state_action(in->state, s->action) != TSR_OK) {
                report_runtime_error();
                in->failed = true;
            }
            break;
        }
    }
    in->depth--;
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
    uint32_t *sizes = calloc(in->ir->symbol_count + 1, sizeof *sizes);
    if (!sizes) diag_fatal_oom();
    uint32_t size_count = ir_function_sizes(in->ir, fn, sizes);
    int status = tsr_state_check_sizes(in->state, sizes, size_count);
    free(sizes);
    if (status == TSR_OK) status = tsr_state_begin_run(in->state); /* as a generated routine begins */
    if (status != TSR_OK) {
        report_runtime_error();
        return false;
    }
    run_block(in, &fn->body);
    return !in->failed;
}

static bool run_main(Interp *in, const IrMainStmt *stmts, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        const IrMainStmt *m = &stmts[i];
        switch (m->kind) {
        case IRM_RUN:
            if (!interp_run(in, &in->ir->functions[m->function])) return false;
            break;
        case IRM_PRINT:
            if (tsr_state_print(in->state, m->print) != TSR_OK) {
                report_runtime_error();
                return false;
            }
            break;
        case IRM_ACTION:
            if (tsr_state_action(in->state, m->action) != TSR_OK) {
                report_runtime_error();
                return false;
            }
            break;
        case IRM_FOR: {
            /* Bounds read from options are checked against the symbol's range first.  The end
             * is tested before the counter is stepped, so a loop ending at INT64_MAX (or,
             * downward, INT64_MIN) stops after its last value instead of wrapping.  A progress
             * bar hears of the start and of every finished iteration. */
            int64_t from = m->from, to = m->to;
            if ((m->from_option != UINT32_MAX && tsr_main_loop_bound(in->state, m->from_option, m->from, &from) != TSR_OK) ||
                (m->to_option != UINT32_MAX && tsr_main_loop_bound(in->state, m->to_option, m->to, &to) != TSR_OK)) {
                report_runtime_error();
                return false;
            }
            if ((m->from_option != UINT32_MAX || m->to_option != UINT32_MAX) &&
                tsr_main_loop_count(in->state, m->symbol, from, to, m->down) != TSR_OK) {
                report_runtime_error();
                return false;
            }
            if (m->down ? from < to : from > to) break;
            if ((m->from_option != UINT32_MAX || m->to_option != UINT32_MAX) &&
                tsr_main_loop_check(in->state, m->symbol, from, to) != TSR_OK) {
                report_runtime_error();
                return false;
            }
            int64_t total = (int64_t)((m->down ? (uint64_t)from - (uint64_t)to : (uint64_t)to - (uint64_t)from) + 1);
            if (m->action != UINT32_MAX) tsr_state_progress(in->state, m->action, 0, total);
            for (int64_t v = from;; v += m->down ? -1 : 1) {
                in->state->symbols[m->symbol] = v;
                if (!run_main(in, m->body, m->body_count)) return false;
                if (m->action != UINT32_MAX)
                    tsr_state_progress(in->state, m->action, (int64_t)((m->down ? (uint64_t)from - (uint64_t)v
                                                                                : (uint64_t)v - (uint64_t)from) + 1), total);
                if (v == to) break;
            }
            break;
        }
        }
    }
    return true;
}

bool interp_run_main(Interp *in) { return run_main(in, in->ir->main, in->ir->main_count); }


