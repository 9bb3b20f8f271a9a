/* kernel.c — outlining a function's top-level nests into kernels (kernel.h).
 *
 * What it does: groups the top-level statements of a function into kernels (a statement that
 * touches a local of the kernel being built joins it, so a full reduction's `l = init; loop;
 * store` stays together, and consecutive scalar statements make one kernel), lists the buffers
 * each touches — state buffers become the kernel's parameters, kernel-local ones (register
 * tiles) its own storage — and decides the launch: a
 * kernel whose one statement is a parallel loop with at least two iterations and at least
 * target->parallel_work cell-iterations runs on the thread pool, its outer range split into
 * chunks of at least target->grain_work; any other kernel is called once.  On a GPU the launch
 * is the grid of the nest's gpu.x/y/z loops (sched_gpu.c), and fewer launches serve more
 * nests: independent nests run side by side as segments of one launch (group, a later one
 * moved up past statements it does not depend on: pull_segment), and consecutive kernels of
 * one block each run one after another in one launch, a chain (join_chains); kernel_order puts
 * a GPU function's statements in that order.  The host side of a routine is then the list of
 * launches in order.  A loop of blocks (docs/ir.md §5.2) is no kernel: its body's nests are,
 * marked with it, and the host loops over the blocks around their launches.  Nothing else here
 * is specific to one backend.
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
    for (; s->kind == IR_LOOP && ir_mode_block(s->mode); s = s->body.items[0]) {
        grid[s->mode - LOOP_BLOCK_X] = (uint32_t)s->extent;
        if (s->body.count != 1) break;
    }
    for (; s->kind == IR_LOOP && ir_mode_flat_gpu(s->mode); s = s->body.items[0]) {
        uint32_t t = s->mode == LOOP_GPU_X ? threads : s->threads;
        grid[s->mode - LOOP_GPU_X] = (uint32_t)((s->extent + t - 1) / t);
        if (s->body.count != 1) break;
    }
    return (uint64_t)grid[0] * grid[1] * grid[2];
}

/* A kernel of segments (group): as many threads a block along each dimension as the widest
 * segment's (where one needs its blocks exactly, all have the same: shape_fits), every
 * segment's grid for that many along x in a row. */
static void segment_launch(Kernel *kn) {
    uint32_t block[3] = {1, 1, 1}, grid[3];
    for (uint32_t i = 0; i < kn->count; i++) {
        Kernel part = {0};
        kernel_gpu_launch(&part, kn->stmts[i]);
        for (int d = 0; d < 3; d++)
            if (part.block[d] > block[d]) block[d] = part.block[d];
    }
    uint64_t blocks = 0;
    for (uint32_t i = 0; i < kn->count; i++) blocks += kernel_segment_grid(kn->stmts[i], block[0], grid);
    kn->segments = true;
    kn->grid[0] = (uint32_t)blocks, kn->grid[1] = kn->grid[2] = 1;
    memcpy(kn->block, block, sizeof block);
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

/* Whether statement s holds nothing but loops, stores, locals and barriers (no tensor-core
 * product, no asynchronous copy, no call). */
static bool plain_nest(const IrStmt *s) {
    if (s->kind == IR_STORE || s->kind == IR_SET_LOCAL || s->kind == IR_BARRIER) return true;
    if (s->kind != IR_LOOP || s->mode == LOOP_ASYNC_COPY) return false;
    for (uint32_t i = 0; i < s->body.count; i++)
        if (!plain_nest(s->body.items[i])) return false;
    return true;
}

/* Whether every thread loop in s (s included) lies along x.  A loop that splits x (a column
 * reduction's slices of a warp, sched_gpu.c's rewrite 7c) runs on the first extent ·
 * thread_stride threads, guarded as a shorter loop is (cg_llvm.c), so it may run in larger
 * blocks too. */
static bool thread_loops_along_x(const IrStmt *s) {
    if (s->kind != IR_LOOP) return true;
    if (ir_mode_thread(s->mode) && s->mode != LOOP_THREAD_X) return false;
    for (uint32_t i = 0; i < s->body.count; i++)
        if (!thread_loops_along_x(s->body.items[i])) return false;
    return true;
}

/* Whether statement s, run by every thread of a block, leaves all its work to thread loops: a
 * barrier, a thread loop, or a loop the whole block runs (a block tile's panels) whose body does
 * the same.  `x_only`: the thread loops lie along x (thread_loops_along_x). */
static bool block_level(const IrStmt *s, bool *x_only) {
    if (s->kind == IR_BARRIER) return true;
    if (s->kind != IR_LOOP || ir_mode_flat_gpu(s->mode) || ir_mode_block(s->mode) || s->mode == LOOP_ASYNC_COPY)
        return false;
    if (ir_mode_thread(s->mode)) {
        *x_only = *x_only && thread_loops_along_x(s);
        return true;
    }
    for (uint32_t i = 0; i < s->body.count; i++)
        if (!block_level(s->body.items[i], x_only)) return false;
    return true;
}

/* Whether s is a block's kernel that runs all its work on threads (block_level under its block
 * loops), so that where a launch's blocks have more threads along x than its thread loops, those
 * past them skip it all but the barriers; `x_only` as block_level says. */
static bool block_kernel(const IrStmt *s, bool *x_only) {
    *x_only = true;
    if (s->kind != IR_LOOP || !ir_mode_block(s->mode)) return false;
    while (s->body.count == 1 && s->body.items[0]->kind == IR_LOOP && ir_mode_block(s->body.items[0]->mode)) s = s->body.items[0];
    for (uint32_t i = 0; i < s->body.count; i++)
        if (!block_level(s->body.items[i], x_only)) return false;
    return plain_nest(s);
}

/* Whether s is a block's kernel whose threads lie along x alone. */
static bool threads_along_x(const IrStmt *s) {
    bool x_only;
    return block_kernel(s, &x_only) && x_only;
}

/* Whether expression e reads a local that set[] does not mark. */
static bool reads_unset_local(const IrProgram *ir, const IrExpr *e, const bool *set) {
    switch (e->kind) {
    case IR_LOCAL: return !set[e->local];
    case IR_LOAD:
        for (uint32_t a = 0; a < ir->buffers[e->buffer].rank; a++)
            if (e->index[a].gather && reads_unset_local(ir, e->index[a].gather, set)) return true;
        return false;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (reads_unset_local(ir, e->args[i], set)) return true;
        return false;
    default: return false;
    }
}

/* Whether statement s, walked in order, sets each local before it reads it (marking those it
 * sets in set[], listed in u): its locals then hold nothing from outside it. */
static bool locals_set_first(const IrStmt *s, bool *set, Uses *u) {
    const IrProgram *ir = u->ir;
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++)
            if (!locals_set_first(s->body.items[i], set, u)) return false;
        return true;
    case IR_SET_LOCAL:
        if (reads_unset_local(ir, s->value, set)) return false;
        set[s->local] = true;
        use_local(u, s->local);
        return true;
    case IR_STORE:
        for (uint32_t a = 0; a < ir->buffers[s->buffer].rank; a++)
            if (s->index[a].gather && reads_unset_local(ir, s->index[a].gather, set)) return false;
        return !reads_unset_local(ir, s->value, set);
    default: return true;
    }
}

/* How a statement may be a segment of a GPU launch (Kernel.segments): not at all; on the first
 * threads along x of the launch's blocks, which may have more (a nest of gpu.x/y/z loops, which
 * takes the launch's threads along x, or a block's kernel whose threads lie along x); or only in
 * blocks of exactly its own threads (a block's kernel with threads along y or z: a block tile
 * of a product). */
typedef enum SegmentKind { NOT_SEGMENT, SEGMENT_ALONG_X, SEGMENT_EXACT } SegmentKind;

/* What kind of segment s may be (its block's threads in block[]), its uses `u`: a nest of
 * gpu.x/y/z loops whose threads lie along x alone and that holds no kernel-local buffer, or a
 * block's kernel (block_kernel).  Either sets each of its locals before reading it (a thread's
 * accumulator, not a value another statement left: locals_set_first; `scratch` holds the marks,
 * cleared again). */
static SegmentKind segment(const IrStmt *s, const Uses *u, Uses *scratch, uint32_t block[3]) {
    if (s->kind != IR_LOOP) return NOT_SEGMENT;
    if (u->local_count) {
        bool confined = locals_set_first(s, scratch->local, scratch);
        uses_clear(scratch);
        if (!confined) return NOT_SEGMENT;
    }
    bool flat = ir_mode_flat_gpu(s->mode), x_only = true;
    if (!flat && !block_kernel(s, &x_only)) return NOT_SEGMENT;
    for (uint32_t i = 0; i < u->buffer_count && flat; i++)
        if (u->ir->buffers[u->buffers[i]].kernel_local) return NOT_SEGMENT;
    Kernel k = {0};
    kernel_gpu_launch(&k, s);
    memcpy(block, k.block, sizeof k.block);
    if (flat) return k.block[1] == 1 && k.block[2] == 1 ? SEGMENT_ALONG_X : NOT_SEGMENT;
    return x_only && k.block[1] == 1 && k.block[2] == 1 ? SEGMENT_ALONG_X : SEGMENT_EXACT;
}

/* The shape of the blocks of a kernel of segments being built: each dimension's most threads,
 * and whether a segment needs exactly those (SEGMENT_EXACT). */
typedef struct SegmentShape {
    uint32_t block[3];
    bool exact;
} SegmentShape;

/* Whether a segment of `kind` whose blocks have `block` threads may join a kernel of segments
 * of `shape`: where either needs its own blocks exactly, the same threads along each dimension. */
static bool shape_fits(SegmentKind kind, const uint32_t block[3], const SegmentShape *shape) {
    if (kind == NOT_SEGMENT) return false;
    if (kind == SEGMENT_ALONG_X && !shape->exact) return true;
    return memcmp(block, shape->block, sizeof shape->block) == 0;
}

static void shape_add(SegmentShape *shape, SegmentKind kind, const uint32_t block[3]) {
    for (int d = 0; d < 3; d++)
        if (block[d] > shape->block[d]) shape->block[d] = block[d];
    shape->exact |= kind == SEGMENT_EXACT;
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

/* What outlining keeps while it groups: what a statement touches and writes (u, w), what the
 * kernel being built does (held, held_w), and for the look-ahead (pull_segment) a candidate's
 * (cand, cand_w) and the statements it would move before (skipped, skipped_w). */
typedef struct Outline {
    Uses u, w, held, held_w, cand, cand_w, skipped, skipped_w;
    Uses scratch; /* locals marked while a statement is walked (segment) */
} Outline;

/* How far past a statement that cannot join a kernel of segments outlining looks for one that
 * can (pull_segment): a clipping norm's squares alternate with their sums into the total. */
enum { SEGMENT_LOOKAHEAD = 256 };

/* What statement s touches into u (buffers and locals) and writes into w, both cleared first. */
static void note_statement(Uses *u, Uses *w, const IrStmt *s) {
    uses_clear(u);
    uses_clear(w);
    uses_stmt(u, s);
    each_store(s, note_use, w);
}

/* Adds what `from` flags (buffers and locals) to `into`. */
static void add_uses(Uses *into, const Uses *from) {
    for (uint32_t l = 0; l < from->local_count; l++) use_local(into, from->locals[l]);
    for (uint32_t b = 0; b < from->buffer_count; b++) use_buffer(into, from->buffers[b]);
}

/* With the kernel being built one of segments (o->held, o->held_w), and order[i] a
 * statement that cannot join it: look among order[i+1 …] for one that can and that touches
 * nothing that the statements it would pass write, nor writes anything they touch; move the
 * first such one to order[i] (the others one place on, in their order), its kind of segment in
 * *kind and its block's threads in block[], and say so.  The look-ahead stops at a call of the
 * runtime (its effects are more than its buffers). */
static bool pull_segment(IrStmt **order, uint32_t i, uint32_t n, const SegmentShape *shape, Outline *o, SegmentKind *kind,
                         uint32_t block[3]) {
    uses_clear(&o->skipped);
    uses_clear(&o->skipped_w);
    bool found = false;
    uint32_t j = i;
    for (; j < n && j - i <= SEGMENT_LOOKAHEAD && order[j]->kind != IR_CALL; j++) {
        Uses *c = &o->cand, *cw = &o->cand_w;
        note_statement(c, cw, order[j]);
        uint32_t threads[3];
        SegmentKind k = j > i ? segment(order[j], c, &o->scratch, threads) : NOT_SEGMENT;
        found = shape_fits(k, threads, shape) && buffers_fit(c, &o->held) && independent(c, cw, &o->held, &o->held_w) &&
                independent(c, cw, &o->skipped, &o->skipped_w);
        if (found) {
            *kind = k;
            memcpy(block, threads, sizeof threads);
            break;
        }
        add_uses(&o->skipped, c);
        add_uses(&o->skipped_w, cw);
    }
    if (!found) return false;
    IrStmt *pulled = order[j];
    memmove(order + i + 1, order + i, (j - i) * sizeof *order);
    order[i] = pulled;
    return true;
}

/* Group statements items[0 … n) into kernels (appended to `list`): a statement that touches a
 * local of the kernel being built joins it, and so does a scalar statement after a kernel of
 * scalar statements (an optimiser's step count and bias corrections: one launch of one thread
 * on a GPU, which runs them in order, instead of one each) while the kernel's buffers stay
 * within SCALAR_KERNEL_BUFFERS.  On a GPU (`gpu`), a segment (a nest of GPU loops, or a block's
 * kernel: `segment`) also joins a kernel of segments when neither touches what the other writes
 * (an optimiser's updates of every parameter, each a nest of its own: one launch, their blocks
 * side by side), within the same count of buffers; and where the next
 * statement cannot, a later one that can is moved before it (pull_segment) — the statements
 * then run in another order than the function's, each after every statement it depends on,
 * so that what they compute is the same. */
static void group(KernelList *list, IrStmt *const *items, uint32_t n, const IrStmt *blocks, bool gpu, Arena *arena,
                  Outline *o) {
    Uses *u = &o->u, *w = &o->w, *held = &o->held, *held_w = &o->held_w;
    IrStmt **order = arena_alloc(arena, (n + 1) * sizeof *order);
    memcpy(order, items, n * sizeof *order);
    uses_clear(held);
    uses_clear(held_w);
    uint32_t start = list->count;
    bool scalars = false;  /* the kernel being built holds only scalar statements */
    bool segments = false; /* … or only segments, of blocks of this shape: */
    SegmentShape shape = {{0, 0, 0}, false};
    for (uint32_t i = 0; i < n; i++) {
        note_statement(u, w, order[i]);
        /* (a call uses no locals: a kernel of its own; a kernel of segments holds locals that
         * each sets before reading: none is shared) */
        bool shared = false;
        for (uint32_t l = 0; l < u->local_count && list->count > start && !segments && !shared; l++)
            shared = held->local[u->locals[l]];
        uint32_t block[3];
        SegmentKind kind = gpu && !blocks ? segment(order[i], u, &o->scratch, block) : NOT_SEGMENT;
        bool is_segment = kind != NOT_SEGMENT;
        bool joins_segments = segments && shape_fits(kind, block, &shape) && buffers_fit(u, held) &&
                              independent(u, w, held, held_w);
        if (segments && !shared && !joins_segments && pull_segment(order, i, n, &shape, o, &kind, block)) {
            note_statement(u, w, order[i]); /* order[i] is now the pulled statement, which joins */
            is_segment = joins_segments = true;
        }
        bool joins = shared || (scalars && is_scalar(order[i]) && buffers_fit(u, held)) || joins_segments;
        scalars = (joins ? scalars : true) && is_scalar(order[i]);
        segments = (joins ? segments : true) && is_segment;
        if (!joins) {
            list->kernels[list->count++] = (Kernel){.stmts = order + i, .blocks = blocks};
            uses_clear(held);
            uses_clear(held_w);
            shape = (SegmentShape){{0, 0, 0}, false};
        }
        if (is_segment) shape_add(&shape, kind, block);
        list->kernels[list->count - 1].count++;
        if (joins_segments) list->kernels[list->count - 1].segments = true; /* segment_launch lays it out */
        add_uses(held, u);
        add_uses(held_w, w);
    }
    uses_clear(u); /* (empty again for the next user) */
    uses_clear(w);
}

/* The parts of a kernel of segments or a chain (Kernel.part_first) known, which part uses each
 * of its kernel-local buffers (Kernel.local_part; the buffers are sorted by id, and each is one
 * part's: segments touch nothing another writes, and a chain's parts were kernels of their own,
 * whose kernel-local buffers live in one run). */
static void note_local_parts(IrProgram *ir, Kernel *kn, Uses *u) {
    kn->local_part = arena_alloc(ir->arena, (kn->local_count + 1) * sizeof *kn->local_part);
    for (uint32_t p = 0; p < kn->part_count; p++) {
        for (uint32_t i = kn->part_first[p]; i < kn->part_first[p + 1]; i++) uses_stmt(u, kn->stmts[i]);
        for (uint32_t b = 0; b < u->buffer_count; b++) {
            uint32_t *at = bsearch(&u->buffers[b], kn->locals, kn->local_count, sizeof *kn->locals, compare_ids);
            if (at) kn->local_part[at - kn->locals] = p;
        }
        uses_clear(u);
    }
}

/* Kernel kn's state buffers (its parameters, in id order) and kernel-local buffers. */
static void note_buffers(IrProgram *ir, Kernel *kn, Uses *u) {
    for (uint32_t i = 0; i < kn->count; i++) uses_stmt(u, kn->stmts[i]);
    qsort(u->buffers, u->buffer_count, sizeof *u->buffers, compare_ids); /* in id order */
    kn->buffers = arena_alloc(ir->arena, (u->buffer_count + 1) * sizeof *kn->buffers);
    kn->locals = arena_alloc(ir->arena, (u->buffer_count + 1) * sizeof *kn->locals);
    kn->buffer_count = kn->local_count = 0;
    for (uint32_t i = 0; i < u->buffer_count; i++) {
        uint32_t b = u->buffers[i];
        if (ir->buffers[b].kernel_local) kn->locals[kn->local_count++] = b;
        else kn->buffers[kn->buffer_count++] = b;
    }
    uses_clear(u);
}

/* Whether statement s holds a loop of GPU threads or blocks. */
static bool has_gpu_loop(const IrStmt *s) {
    if (s->kind != IR_LOOP) return false;
    if (ir_mode_flat_gpu(s->mode) || ir_mode_block(s->mode) || ir_mode_thread(s->mode)) return true;
    for (uint32_t i = 0; i < s->body.count; i++)
        if (has_gpu_loop(s->body.items[i])) return true;
    return false;
}

bool kernel_chain_thread0(const Kernel *kn, uint32_t p) { return !has_gpu_loop(kn->stmts[kn->part_first[p]]); }

/* Whether kernel kn may be a part of a chain (Kernel.chain): one block of threads along x alone,
 * no call, no segments, outside any loop of blocks, no tensor-core product or asynchronous
 * copy, and either statements outside GPU loops (one thread), or one nest of gpu.x loops, or one
 * block's kernel that runs all its work on threads along x (threads_along_x). */
static bool chain_part(const Kernel *kn) {
    if (kn->call || kn->threaded || kn->blocks || kn->segments || kn->grid[0] * kn->grid[1] * kn->grid[2] != 1 ||
        kn->block[1] != 1 || kn->block[2] != 1)
        return false;
    bool outside = true;
    for (uint32_t i = 0; i < kn->count; i++) {
        if (!plain_nest(kn->stmts[i])) return false;
        outside = outside && !has_gpu_loop(kn->stmts[i]);
    }
    const IrStmt *s = kn->stmts[0];
    return outside || (kn->count == 1 && (ir_mode_flat_gpu(s->mode) || threads_along_x(s)));
}

/* Adds kernel kn's state buffers to `held` and its kernel-local ones to `held_locals`. */
static void hold_kernel(const Kernel *kn, Uses *held, Uses *held_locals) {
    for (uint32_t b = 0; b < kn->buffer_count; b++) use_buffer(held, kn->buffers[b]);
    for (uint32_t b = 0; b < kn->local_count; b++) use_buffer(held_locals, kn->locals[b]);
}

/* On a GPU: consecutive kernels of one block each (chain_part) become one launch, a chain
 * (Kernel.chain), while their buffers stay within SCALAR_KERNEL_BUFFERS and no two of them use
 * one kernel-local buffer (each part's shared buffers are laid out from the same start): a
 * clipping norm's sums of each parameter's squares into its one-cell total, each a block's
 * reduction or one thread's loop, were a launch each (196 for GPT-2 124M).  `held` and
 * `held_locals` hold a chain's buffers. */
static void join_chains(IrProgram *ir, KernelList *list, Uses *u, Uses *held, Uses *held_locals) {
    uint32_t out = 0;
    for (uint32_t k = 0; k < list->count;) {
        uint32_t end = k + 1, threads = list->kernels[k].block[0];
        if (chain_part(&list->kernels[k])) {
            uses_clear(held);
            uses_clear(held_locals);
            hold_kernel(&list->kernels[k], held, held_locals);
            for (; end < list->count && chain_part(&list->kernels[end]) &&
                   list->kernels[end].stmts == list->kernels[end - 1].stmts + list->kernels[end - 1].count;
                 end++) {
                const Kernel *next = &list->kernels[end];
                uint32_t more = 0;
                bool local_reused = false;
                for (uint32_t b = 0; b < next->buffer_count; b++) more += !held->buffer[next->buffers[b]];
                for (uint32_t b = 0; b < next->local_count; b++) local_reused |= held_locals->buffer[next->locals[b]];
                if (held->buffer_count + more > SCALAR_KERNEL_BUFFERS || local_reused) break;
                hold_kernel(next, held, held_locals);
                if (next->block[0] > threads) threads = next->block[0];
            }
            uses_clear(held);
            uses_clear(held_locals);
        }
        Kernel joined = list->kernels[k];
        if (end > k + 1) {
            joined.chain = true;
            joined.part_count = end - k;
            joined.part_first = arena_alloc(ir->arena, (joined.part_count + 1) * sizeof *joined.part_first);
            joined.count = 0;
            for (uint32_t p = 0; p < joined.part_count; p++) {
                joined.part_first[p] = joined.count;
                joined.count += list->kernels[k + p].count;
            }
            joined.part_first[joined.part_count] = joined.count;
            joined.block[0] = threads;
            note_buffers(ir, &joined, u);
            note_local_parts(ir, &joined, u);
        }
        list->kernels[out++] = joined;
        k = end;
    }
    list->count = out;
}

KernelList kernel_outline(IrProgram *ir, const IrFunction *fn, const Target *target) {
    KernelList list = {.fn = fn};
    uint32_t locals = fn->local_count + 1, statements = fn->body.count;
    for (uint32_t i = 0; i < fn->body.count; i++)
        if (is_blocks(fn->body.items[i])) statements += fn->body.items[i]->body.count;
    list.kernels = arena_alloc(ir->arena, (statements + 1) * sizeof *list.kernels);
    Outline o = {uses_new(ir, locals), uses_new(ir, locals), uses_new(ir, locals), uses_new(ir, locals),
                 uses_new(ir, locals), uses_new(ir, locals), uses_new(ir, locals), uses_new(ir, locals),
                 uses_new(ir, locals)};
    Uses *u = &o.u;
    bool gpu = target->kind == TARGET_CUDA;
    /* The runs of statements between loops of blocks, and each loop's body. */
    uint32_t start = 0;
    for (uint32_t i = 0; i <= fn->body.count; i++) {
        IrStmt *st = i < fn->body.count ? fn->body.items[i] : NULL;
        if (st && !is_blocks(st)) continue;
        if (i > start) group(&list, fn->body.items + start, i - start, NULL, gpu, ir->arena, &o);
        if (st && st->body.count) group(&list, st->body.items, st->body.count, st, gpu, ir->arena, &o);
        start = i + 1;
    }
    for (uint32_t k = 0; k < list.count; k++) {
        Kernel *kn = &list.kernels[k];
        note_buffers(ir, kn, u);
        const IrStmt *s = kn->stmts[0];
        kn->extent = s->kind == IR_LOOP ? (int64_t)s->extent : 1;
        kn->call = s->kind == IR_CALL;
        double w = work(s);
        kn->threaded = kn->count == 1 && s->kind == IR_LOOP && s->parallel && s->mode == LOOP_PLAIN &&
                       s->extent >= 2 && w >= target->parallel_work;
        if (kn->threaded) kn->grain = (int64_t)(target->grain_work / (w / iterations(s->extent))) + 1;
        kernel_gpu_launch(kn, s); /* sched_gpu.c maps only nests that are kernels of one statement */
        if (kn->segments && kn->count > 1) {
            segment_launch(kn);
            kn->part_count = kn->count;
            kn->part_first = arena_alloc(ir->arena, (kn->count + 1) * sizeof *kn->part_first);
            for (uint32_t i = 0; i <= kn->count; i++) kn->part_first[i] = i;
            note_local_parts(ir, kn, u);
        } else {
            kn->segments = false;
        }
    }
    if (gpu) join_chains(ir, &list, u, &o.held, &o.held_w);
    Uses *all[] = {&o.u, &o.w, &o.held, &o.held_w, &o.cand, &o.cand_w, &o.skipped, &o.skipped_w, &o.scratch};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) uses_free(all[i]);
    return list;
}

void kernel_order(IrProgram *ir, IrFunction *fn, const Target *target) {
    if (fn->body.count == 0) return; /* (an empty routine: nothing to order, and no items to copy) */
    KernelList list = kernel_outline(ir, fn, target);
    IrStmt **items = arena_alloc(ir->arena, (fn->body.count + 1) * sizeof *items);
    uint32_t out = 0, k = 0, start = 0;
    /* The runs of statements between loops of blocks as kernel_outline went through them: each
     * run's kernels hold its statements in launch order; a loop of blocks stays where it is (its
     * body's kernels, in its own order, are skipped). */
    for (uint32_t i = 0; i <= fn->body.count; i++) {
        IrStmt *st = i < fn->body.count ? fn->body.items[i] : NULL;
        if (st && !is_blocks(st)) continue;
        for (uint32_t taken = 0; taken < i - start; k++) {
            memcpy(items + out, list.kernels[k].stmts, list.kernels[k].count * sizeof *items);
            out += list.kernels[k].count;
            taken += list.kernels[k].count;
        }
        if (st) {
            items[out++] = st;
            for (uint32_t taken = 0; taken < st->body.count; k++) taken += list.kernels[k].count;
        }
        start = i + 1;
    }
    memcpy(fn->body.items, items, fn->body.count * sizeof *items);
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
