/* kernel.c — outlining a function's top-level nests into kernels (kernel.h).
 *
 * What it does: groups the top-level statements of a function into kernels (a statement that
 * touches a local of the kernel being built joins it, so a full reduction's `l = init; loop;
 * store` stays together, and consecutive scalar statements make one kernel), lists the buffers each touches — state buffers become the kernel's
 * parameters, kernel-local ones (register tiles) its own storage — and decides the launch: a
 * kernel whose one statement is a parallel loop with at least two iterations and at least
 * target->parallel_work cell-iterations runs on the thread pool, its outer range split into
 * chunks of at least target->grain_work; any other kernel is called once.  On a GPU the launch
 * is the grid of the nest's gpu.x/y/z loops (sched_gpu.c).  The host side of a
 * routine is then the list of launches in order.  A loop of blocks (docs/ir.md §5.2) is no
 * kernel: its body's nests are, marked with it, and the host loops over the blocks around their
 * launches.  Nothing here is specific to one backend.
 *
 * Requires: a verified (scheduled) IrProgram. */
#include "sched/kernel.h"

#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

/* What statements touch: a flag per buffer and per local, and the list of those flagged, so
 * that clearing costs what was touched (a kernel is outlined in time linear in its size). */
typedef struct Uses {
    const IrProgram *ir;
    bool *buffer;       /* per buffer */
    bool *local;        /* per local */
    uint32_t *buffers;  /* the flagged buffers, in the order met */
    uint32_t *locals;   /* the flagged locals */
    uint32_t buffer_count, local_count;
} Uses;

static void use_buffer(Uses *u, uint32_t b) {
    if (!u->buffer[b]) u->buffers[u->buffer_count++] = b;
    u->buffer[b] = true;
}

static void use_local(Uses *u, uint32_t l) {
    if (!u->local[l]) u->locals[u->local_count++] = l;
    u->local[l] = true;
}

static Uses uses_new(const IrProgram *ir, uint32_t locals) {
    Uses u = {ir, calloc(ir->buffer_count + 1, 1), calloc(locals, 1), calloc(ir->buffer_count + 1, sizeof *u.buffers),
              calloc(locals, sizeof *u.locals), 0, 0};
    if (!u.buffer || !u.local || !u.buffers || !u.locals) diag_fatal_oom();
    return u;
}

static void uses_free(Uses *u) {
    free(u->buffer);
    free(u->local);
    free(u->buffers);
    free(u->locals);
}

static void uses_clear(Uses *u) {
    for (uint32_t i = 0; i < u->buffer_count; i++) u->buffer[u->buffers[i]] = false;
    for (uint32_t i = 0; i < u->local_count; i++) u->local[u->locals[i]] = false;
    u->buffer_count = u->local_count = 0;
}

static void uses_expr(Uses *u, const IrExpr *e);

/* The loads of a gathered axis's expression (IrIndex.gather). */
static void uses_index(Uses *u, uint32_t buffer, const IrIndex *index) {
    for (uint32_t a = 0; a < u->ir->buffers[buffer].rank; a++)
        if (index[a].gather) uses_expr(u, index[a].gather);
}

static void uses_expr(Uses *u, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST:
    case IR_SYMBOL:
    case IR_RANDOM: break; /* no memory: the run's key comes with the symbols */
    case IR_LOCAL: use_local(u, e->local); break;
    case IR_LOAD:
        use_buffer(u, e->buffer);
        uses_index(u, e->buffer, e->index);
        break;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) uses_expr(u, e->args[i]);
        break;
    }
}

static void uses_stmt(Uses *u, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++) uses_stmt(u, s->body.items[i]);
        break;
    case IR_STORE:
        use_buffer(u, s->buffer);
        uses_index(u, s->buffer, s->index);
        uses_expr(u, s->value);
        break;
    case IR_SET_LOCAL:
        use_local(u, s->local);
        uses_expr(u, s->value);
        break;
    case IR_BARRIER: break;
    case IR_MMA:
        use_buffer(u, s->mma.a);
        use_buffer(u, s->mma.b);
        use_buffer(u, s->mma.c);
        break;
    case IR_LDMATRIX:
        use_buffer(u, s->ldmatrix.panel);
        use_buffer(u, s->ldmatrix.regs);
        break;
    case IR_WGMMA:
        use_buffer(u, s->wgmma.a);
        use_buffer(u, s->wgmma.b);
        use_buffer(u, s->wgmma.c);
        break;
    case IR_CALL:
        for (uint32_t k = 0; k < u->ir->actions[s->action].buffer_count; k++) use_buffer(u, u->ir->actions[s->action].buffers[k]);
        break;
    }
}

static int compare_ids(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A loop's iterations for the estimates below: a run-time size counts as a batch of
 * RUNTIME_EXTENT_GUESS (enough to run a nest over it on the pool when its cells are big). */
enum { RUNTIME_EXTENT_GUESS = 64 };
static double iterations(uint64_t extent) { return size_is_runtime(extent) ? RUNTIME_EXTENT_GUESS : (double)extent; }

/* Cells × iterations of a statement. */
static double work(const IrStmt *s) {
    if (s->kind != IR_LOOP) return 1;
    double w = 0;
    for (uint32_t i = 0; i < s->body.count; i++) w += work(s->body.items[i]);
    return iterations(s->extent) * (w > 0 ? w : 1);
}

/* The grid and block of a kernel whose first statement is `s`: its gpu.x/y/z loops, which
 * sched_gpu.c puts at the top of the nest. */
/* The block of a block's kernel: the longest of its thread loops along each dimension (shorter
 * ones run on the first threads: cg_llvm.c guards them). */
static void thread_extents(Kernel *kn, const IrStmt *s) {
    if (s->kind != IR_LOOP) return;
    uint32_t *dim = ir_mode_thread(s->mode) ? &kn->block[s->mode - LOOP_THREAD_X] : NULL;
    uint64_t threads = s->extent * (s->thread_stride > 1 ? s->thread_stride : 1);
    if (dim && threads > *dim) *dim = (uint32_t)threads;
    for (uint32_t i = 0; i < s->body.count; i++) thread_extents(kn, s->body.items[i]);
}

void kernel_gpu_launch(Kernel *kn, const IrStmt *s) {
    for (int d = 0; d < 3; d++) kn->grid[d] = kn->block[d] = 1;
    const IrStmt *top = s;
    while (s->kind == IR_LOOP && ir_mode_flat_gpu(s->mode)) {
        unsigned d = s->mode - LOOP_GPU_X;
        kn->block[d] = s->threads;
        kn->grid[d] = (uint32_t)((s->extent + s->threads - 1) / s->threads);
        if (s->body.count != 1) break;
        s = s->body.items[0];
    }
    bool blocks = false;
    for (s = top; s->kind == IR_LOOP && ir_mode_block(s->mode);) {
        kn->grid[s->mode - LOOP_BLOCK_X] = (uint32_t)s->extent;
        blocks = true;
        if (s->body.count != 1) break;
        s = s->body.items[0];
    }
    if (blocks) thread_extents(kn, top);
}

uint64_t kernel_segment_grid(const IrStmt *s, uint32_t threads, uint32_t grid[3]) {
    grid[0] = grid[1] = grid[2] = 1;
    for (; s->kind == IR_LOOP && ir_mode_flat_gpu(s->mode); s = s->body.items[0]) {
        uint32_t t = s->mode == LOOP_GPU_X ? threads : s->threads;
        grid[s->mode - LOOP_GPU_X] = (uint32_t)((s->extent + t - 1) / t);
        if (s->body.count != 1) break;
    }
    return (uint64_t)grid[0] * grid[1] * grid[2];
}

/* A kernel of segments (group): as many threads a block as the widest segment's, every
 * segment's grid for that many in a row along x. */
static void segment_launch(Kernel *kn) {
    uint32_t threads = 1, grid[3];
    for (uint32_t i = 0; i < kn->count; i++) {
        Kernel part = {0};
        kernel_gpu_launch(&part, kn->stmts[i]);
        if (part.block[0] > threads) threads = part.block[0];
    }
    uint64_t blocks = 0;
    for (uint32_t i = 0; i < kn->count; i++) blocks += kernel_segment_grid(kn->stmts[i], threads, grid);
    kn->segments = true;
    kn->grid[0] = (uint32_t)blocks, kn->grid[1] = kn->grid[2] = 1;
    kn->block[0] = threads, kn->block[1] = kn->block[2] = 1;
}

static bool is_blocks(const IrStmt *s) {
    return s->kind == IR_LOOP && s->mode == LOOP_BLOCKS;
}

/* A statement outside any loop that computes one value: a store or a local's value. */
static bool is_scalar(const IrStmt *s) {
    return s->kind == IR_STORE || s->kind == IR_SET_LOCAL;
}

/* The buffers a kernel of scalar statements takes at most: each is a parameter of 8 bytes of a
 * GPU kernel, whose parameters (with the symbols and the run's key) must fit in 4 KiB
 * (runtime/model.c); AdamW's scalars of GPT-2's 148 parameters grouped by sched/nest.c's
 * rewrite 4s touch 790 buffers. */
enum { SCALAR_KERNEL_BUFFERS = 256 };

/* Whether the statement whose uses are `u` keeps the kernel `held` within
 * SCALAR_KERNEL_BUFFERS buffers; always where the kernel has locals (a later statement may read
 * them: the kernel is never cut there). */
static bool buffers_fit(const Uses *u, const Uses *held) {
    if (held->local_count) return true;
    uint32_t count = held->buffer_count;
    for (uint32_t i = 0; i < u->buffer_count; i++) count += !held->buffer[u->buffers[i]];
    return count <= SCALAR_KERNEL_BUFFERS;
}

static void each_store(const IrStmt *s, void (*note)(void *, uint32_t), void *ctx);
static void note_use(void *u, uint32_t b) { use_buffer(u, b); }

/* Whether s may be a segment of a GPU launch (Kernel.segments): a nest of gpu.x/y/z loops
 * whose threads lie along x alone and whose uses `u` hold no local and no kernel-local buffer. */
static bool segment(const IrStmt *s, const Uses *u) {
    if (s->kind != IR_LOOP || !ir_mode_flat_gpu(s->mode) || u->local_count) return false;
    for (uint32_t i = 0; i < u->buffer_count; i++)
        if (u->ir->buffers[u->buffers[i]].kernel_local) return false;
    Kernel k = {0};
    kernel_gpu_launch(&k, s);
    return k.block[1] == 1 && k.block[2] == 1;
}

/* Whether a statement that touches `u` and writes `w` runs beside a kernel that touches `held`
 * and writes `held_w` without either reading or writing what the other writes. */
static bool independent(const Uses *u, const Uses *w, const Uses *held, const Uses *held_w) {
    for (uint32_t i = 0; i < w->buffer_count; i++)
        if (held->buffer[w->buffers[i]]) return false;
    for (uint32_t i = 0; i < u->buffer_count; i++)
        if (held_w->buffer[u->buffers[i]]) return false;
    return true;
}

/* Group statements items[0 … n) into kernels (appended to `list`): a statement that touches a
 * local of the kernel being built joins it, and so does a scalar statement after a kernel of
 * scalar statements (an optimiser's step count and bias corrections: one launch of one thread
 * on a GPU, which runs them in order, instead of one each) while the kernel's buffers stay
 * within SCALAR_KERNEL_BUFFERS.  On a GPU (`gpu`), a nest of GPU loops also joins a kernel of
 * such nests when neither touches what the other writes (an optimiser's updates of every
 * parameter, each a nest of its own: one launch, their blocks side by side), within the same
 * count of buffers.  `w` and `held_w` hold what the statement and the kernel write. */
static void group(KernelList *list, IrStmt *const *items, uint32_t n, const IrStmt *blocks, bool gpu, Uses *u, Uses *held,
                  Uses *w, Uses *held_w) {
    uses_clear(held);
    uses_clear(held_w);
    uint32_t start = list->count;
    bool scalars = false;  /* the kernel being built holds only scalar statements */
    bool segments = false; /* … or only segments */
    for (uint32_t i = 0; i < n; i++) {
        uses_stmt(u, items[i]);
        each_store(items[i], note_use, w);
        bool shared = false; /* a call uses no locals: a kernel of its own */
        for (uint32_t l = 0; l < u->local_count && list->count > start && !shared; l++) shared = held->local[u->locals[l]];
        bool is_segment = gpu && !blocks && segment(items[i], u);
        bool joins = shared || (scalars && is_scalar(items[i]) && buffers_fit(u, held)) ||
                     (segments && is_segment && buffers_fit(u, held) && independent(u, w, held, held_w));
        scalars = (joins ? scalars : true) && is_scalar(items[i]);
        segments = (joins ? segments : true) && is_segment;
        if (!joins) {
            list->kernels[list->count++] = (Kernel){.stmts = items + i, .blocks = blocks};
            uses_clear(held);
            uses_clear(held_w);
        }
        list->kernels[list->count - 1].count++;
        for (uint32_t l = 0; l < u->local_count; l++) use_local(held, u->locals[l]);
        for (uint32_t b = 0; b < u->buffer_count; b++) use_buffer(held, u->buffers[b]);
        for (uint32_t b = 0; b < w->buffer_count; b++) use_buffer(held_w, w->buffers[b]);
        uses_clear(u);
        uses_clear(w);
    }
}

KernelList kernel_outline(IrProgram *ir, const IrFunction *fn, const Target *target) {
    KernelList list = {.fn = fn};
    uint32_t locals = fn->local_count + 1, statements = fn->body.count;
    for (uint32_t i = 0; i < fn->body.count; i++)
        if (is_blocks(fn->body.items[i])) statements += fn->body.items[i]->body.count;
    list.kernels = arena_alloc(ir->arena, (statements + 1) * sizeof *list.kernels);
    Uses u = uses_new(ir, locals), held = uses_new(ir, locals); /* a statement's buffers and locals, the kernel's */
    Uses written = uses_new(ir, locals), held_w = uses_new(ir, locals); /* what the statement, the kernel write */
    bool gpu = target->kind == TARGET_CUDA;
    /* The runs of statements between loops of blocks, and each loop's body. */
    uint32_t start = 0;
    for (uint32_t i = 0; i <= fn->body.count; i++) {
        IrStmt *st = i < fn->body.count ? fn->body.items[i] : NULL;
        if (st && !is_blocks(st)) continue;
        if (i > start) group(&list, fn->body.items + start, i - start, NULL, gpu, &u, &held, &written, &held_w);
        if (st && st->body.count) group(&list, st->body.items, st->body.count, st, gpu, &u, &held, &written, &held_w);
        start = i + 1;
    }
    for (uint32_t k = 0; k < list.count; k++) {
        Kernel *kn = &list.kernels[k];
        for (uint32_t i = 0; i < kn->count; i++) uses_stmt(&u, kn->stmts[i]);
        qsort(u.buffers, u.buffer_count, sizeof *u.buffers, compare_ids); /* in id order */
        kn->buffers = arena_alloc(ir->arena, (u.buffer_count + 1) * sizeof *kn->buffers);
        kn->locals = arena_alloc(ir->arena, (u.buffer_count + 1) * sizeof *kn->locals);
        for (uint32_t i = 0; i < u.buffer_count; i++) {
            uint32_t b = u.buffers[i];
            if (ir->buffers[b].kernel_local) kn->locals[kn->local_count++] = b;
            else kn->buffers[kn->buffer_count++] = b;
        }
        uses_clear(&u);
        const IrStmt *s = kn->stmts[0];
        kn->extent = s->kind == IR_LOOP ? (int64_t)s->extent : 1;
        kn->call = s->kind == IR_CALL;
        double w = work(s);
        kn->threaded = kn->count == 1 && s->kind == IR_LOOP && s->parallel && s->mode == LOOP_PLAIN &&
                       s->extent >= 2 && w >= target->parallel_work;
        if (kn->threaded) kn->grain = (int64_t)(target->grain_work / (w / iterations(s->extent))) + 1;
        kernel_gpu_launch(kn, s); /* sched_gpu.c maps only nests that are kernels of one statement */
        if (kn->count > 1 && s->kind == IR_LOOP && ir_mode_flat_gpu(s->mode)) segment_launch(kn);
    }
    uses_free(&u);
    uses_free(&held);
    uses_free(&written);
    uses_free(&held_w);
    return list;
}

/* Calls note(ctx, b) for every buffer b that statement s (and the statements inside it) stores to. */
static void each_store(const IrStmt *s, void (*note)(void *, uint32_t), void *ctx) {
    if (s->kind == IR_STORE) note(ctx, s->buffer);
    if (s->kind == IR_MMA) note(ctx, s->mma.c);
    if (s->kind == IR_LDMATRIX) note(ctx, s->ldmatrix.regs);
    if (s->kind == IR_WGMMA) note(ctx, s->wgmma.c);
    if (s->kind == IR_LOOP)
        for (uint32_t i = 0; i < s->body.count; i++) each_store(s->body.items[i], note, ctx);
}

static void note_written(void *written, uint32_t b) { ((bool *)written)[b] = true; }

void kernel_note_stores(const IrStmt *s, bool *written) { each_store(s, note_written, written); }
