/* sched_scatter.c — rewrite 7s of the GPU schedule: a scatter-add whose rows fit in shared
 * memory (an embedding table's gradient over a small vocabulary) as blocks that keep the rows
 * there while they add.
 *
 * The gradient of a gather `e[b, t, c] = table[c, ids[b, t]]` is the nest
 *     for c… (parallel):  for b, t (serial):  G[c, ids[b, t]] = G[c, ids[b, t]] + x[b, t, c]
 * which the GPU's mapping alone runs a thread a cell c, each thread's steps a chain of
 * read-modify-writes of global memory (each waits for the one before: the next id may be the
 * same), on as few blocks as the cells make: the example GPT's table gradient, 256 threads
 * walking 512 positions, was its step's longest kernel.  Where a block's rows of G — the cells
 * each thread's steps can reach, along the gathered axis — fit in SCATTER_SHARED_BYTES of shared
 * memory, each block of W threads (W cells c) copies its rows into a shared buffer laid out
 * [v][t] (a warp's 32 threads reading or writing the same v touch 32 banks), takes its steps
 * there, then copies the rows back:
 *     block (the outer cell loops, c / W):
 *         threads t < W:  for v < V:  rows[v][t] = G[c, v]            (c = W·cb + t)
 *                         for b, t (serial; the innermost unrolled by SCATTER_UNROLL):
 *                             rows[ids[b, t]][t] = rows[ids[b, t]][t] + x[b, t, c]
 *                         for v < V:  G[c, v] = rows[v][t]
 * Each thread touches its own column of the buffer alone, so no barrier; every cell takes its
 * additions in the same order as before (the bits do not change), and the gathered index is
 * clamped to the same V rows.  It applies where the cells are the stored cells one to one
 * (every cell loop names an axis of G, alone, stride 1) and the steps do not move them, the
 * innermost cell loop is a multiple of 32, and the steps are at least SCATTER_MIN_STEPS; GPT-2's
 * 50 257 rows are far past the buffer and keep the plain mapping.
 *
 * Requires: a Sched over a function scheduled for a GPU target (schedule_gpu_function tries it
 * on each nest it would keep as lowered). */
#include "sched/sched_block.h"

enum { SCATTER_SHARED_BYTES = 48 * 1024, SCATTER_MIN_STEPS = 64, SCATTER_UNROLL = 8, SCATTER_MAX_CELL_LOOPS = 3 };

typedef struct Scatter {
    IrStmt *par[SCATTER_MAX_CELL_LOOPS]; /* the cell loops, outermost first */
    uint32_t npar;
    IrStmt *red[MAX_LOOPS]; /* the steps' loops, outermost first */
    uint32_t nred;
    IrStmt *store;          /* G[…, gather e, …] = G[the same] + x (or x + G[…]) */
    uint32_t axis;          /* G's gathered axis */
    const IrExpr *added;    /* x */
    bool load_first;
} Scatter;

/* Whether `top` is such a nest (above), into *sc. */
static bool match_scatter(const IrProgram *ir, IrStmt *top, Scatter *sc) {
    *sc = (Scatter){.axis = UINT32_MAX};
    IrStmt *st = top;
    while (st->kind == IR_LOOP && st->mode == LOOP_PLAIN && st->parallel && st->body.count == 1 && sc->npar < SCATTER_MAX_CELL_LOOPS) {
        sc->par[sc->npar++] = st;
        st = st->body.items[0];
    }
    uint64_t steps = 1;
    while (st->kind == IR_LOOP && st->mode == LOOP_PLAIN && !st->parallel && st->body.count == 1 && sc->nred < MAX_LOOPS) {
        steps *= st->extent;
        sc->red[sc->nred++] = st;
        st = st->body.items[0];
    }
    if (!sc->npar || !sc->nred || st->kind != IR_STORE || steps < SCATTER_MIN_STEPS) return false;
    for (uint32_t k = 0; k < sc->npar; k++)
        if (size_is_runtime(sc->par[k]->extent)) return false;
    for (uint32_t k = 0; k < sc->nred; k++)
        if (size_is_runtime(sc->red[k]->extent)) return false;
    const IrBuffer *g = &ir->buffers[st->buffer];
    if (g->dtype != DTYPE_F32 || g->gpu_shared || g->kernel_local || g->thread_cells) return false;
    /* One gathered axis; every other axis one cell loop, alone, stride 1, each cell loop one axis. */
    bool used[SCATTER_MAX_CELL_LOOPS] = {false};
    for (uint32_t a = 0; a < g->rank; a++) {
        const IrIndex *ix = &st->index[a];
        if (ix->gather) {
            if (sc->axis != UINT32_MAX || ir_expr_loads(ir, ix->gather, st->buffer) || ir_expr_reads_local(ix->gather)) return false;
            sc->axis = a;
            continue;
        }
        if (ix->symbol || ix->term_count != 1 || ix->terms[0].coef != 1 || ix->offset != 0) return false;
        uint32_t k = 0;
        while (k < sc->npar && sc->par[k]->iter != ix->terms[0].iter) k++;
        if (k == sc->npar || used[k] || sc->par[k]->extent != g->dims[a]) return false;
        used[k] = true;
    }
    for (uint32_t k = 0; k < sc->npar; k++)
        if (!used[k]) return false;
    if (sc->axis == UINT32_MAX || sc->par[sc->npar - 1]->extent % 32) return false;
    /* The value: G at the same cell, plus what reads neither G nor a local. */
    const IrExpr *v = st->value;
    if (v->kind != IR_OP || v->op != SOP_ADD || v->type != DTYPE_F32) return false;
    for (int side = 0; side < 2 && !sc->added; side++) {
        const IrExpr *l = v->args[side], *x = v->args[1 - side];
        if (l->kind == IR_LOAD && l->buffer == st->buffer && same_cell(ir, st->buffer, l->index, st->index) &&
            !ir_expr_loads(ir, x, st->buffer) && !ir_expr_reads_local(x)) {
            sc->added = x;
            sc->load_first = side == 0;
        }
    }
    sc->store = st;
    return sc->added != NULL;
}

/* The threads a block: the most of 128, 64, 32 that divides the innermost cell loop and whose
 * rows fit in the shared buffer; 0 where none does. */
static uint32_t scatter_threads(const IrProgram *ir, const Scatter *sc) {
    uint64_t rows = ir->buffers[sc->store->buffer].dims[sc->axis];
    for (uint32_t w = 128; w >= 32; w /= 2)
        if (sc->par[sc->npar - 1]->extent % w == 0 && rows * w * sizeof(float) <= SCATTER_SHARED_BYTES) return w;
    return 0;
}

/* G's cell of the thread's cell at row `row` (an iterator) of the gathered axis: the store's
 * index, the gathered axis `row`'s, the cell loops mapped by the caller. */
static IrIndex *row_cell(Sched *s, const Scatter *sc, uint32_t row) {
    const IrBuffer *g = &s->ir->buffers[sc->store->buffer];
    IrIndex *ix = clone_index(s, sc->store->index, g->rank);
    ix[sc->axis] = (IrIndex){.terms = arena_alloc(s->ir->arena, sizeof(IrTerm)), .term_count = 1};
    ix[sc->axis].terms[0] = (IrTerm){row, 1};
    return ix;
}

/* The shared buffer's cell [row][t] (row an index of one axis: a term or the gather). */
static IrIndex *shared_cell(Sched *s, IrIndex row, uint32_t t) {
    IrIndex *ix = arena_alloc(s->ir->arena, 2 * sizeof *ix);
    ix[0] = row;
    ix[1] = (IrIndex){.terms = arena_alloc(s->ir->arena, sizeof(IrTerm)), .term_count = 1};
    ix[1].terms[0] = (IrTerm){t, 1};
    return ix;
}

bool gpu_scatter_rows(Sched *s, IrStmt *top, IrBlock *out) {
    Scatter sc;
    if (top->kind != IR_LOOP || !match_scatter(s->ir, top, &sc)) return false;
    uint32_t w = scatter_threads(s->ir, &sc);
    if (!w) return false;
    for (uint32_t k = 0; k + 1 < sc.npar; k++) /* the outer cell loops: the grid's y and z */
        if (sc.par[k]->extent > MAX_GRID_YZ) return false;
    const IrBuffer *g = &s->ir->buffers[sc.store->buffer];
    uint64_t rows = g->dims[sc.axis];
    /* The shared rows, [v][t]. */
    uint32_t shared = new_scratch(s, "rows", rows * w, DTYPE_F32, true);
    IrBuffer *sb = &s->ir->buffers[shared];
    sb->gpu_shared = true;
    sb->rank = 2;
    sb->dims = arena_alloc(s->ir->arena, 2 * sizeof *sb->dims);
    sb->dims[0] = rows, sb->dims[1] = w;
    sb->shape_text = arena_printf(s->ir->arena, "%llu, %u", (unsigned long long)rows, w);
    /* The blocks: the outer cell loops as they are, the innermost in runs of w. */
    Grid grid = {.count = sc.npar};
    uint32_t run = new_iter(s);
    for (uint32_t k = 0; k < sc.npar; k++) {
        bool inner = k + 1 == sc.npar;
        grid.iter[sc.npar - 1 - k] = inner ? run : sc.par[k]->iter;
        grid.extent[sc.npar - 1 - k] = inner ? sc.par[k]->extent / w : sc.par[k]->extent;
    }
    IrBlock *blk = NULL;
    IrStmt *kernel = grid_loops(s, &grid, &blk);
    uint32_t t = new_iter(s);
    IrStmt *threads = new_loop(s, t, w, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, threads);
    IrBlock *body = &threads->body;
    reset_subst(s);
    map_iter(s, sc.par[sc.npar - 1]->iter, (Affine){.terms = {{run, w}, {t, 1}}, .count = 2});
    /* Its rows in. */
    uint32_t v = new_iter(s);
    IrStmt *in = new_loop(s, v, rows, false, LOOP_PLAIN);
    ir_block_push(s->ir->arena, body, in);
    IrIndex row_v = {.terms = arena_alloc(s->ir->arena, sizeof(IrTerm)), .term_count = 1};
    row_v.terms[0] = (IrTerm){v, 1};
    ir_block_push(s->ir->arena, &in->body, new_store(s, shared, shared_cell(s, row_v, t), new_load(s, sc.store->buffer, row_cell(s, &sc, v))));
    /* The steps, in their order, the innermost loop unrolled by SCATTER_UNROLL where it divides. */
    IrBlock *into = body;
    for (uint32_t k = 0; k < sc.nred; k++) {
        const IrStmt *r = sc.red[k];
        if (k + 1 == sc.nred && r->extent % SCATTER_UNROLL == 0 && r->extent > SCATTER_UNROLL) {
            uint32_t q = new_iter(s), u;
            IrStmt *lq = new_loop(s, q, r->extent / SCATTER_UNROLL, false, LOOP_PLAIN);
            ir_block_push(s->ir->arena, into, lq);
            into = &unrolled(s, &lq->body, &u, SCATTER_UNROLL, false)->body;
            map_iter(s, r->iter, (Affine){.terms = {{q, SCATTER_UNROLL}, {u, 1}}, .count = 2});
        } else {
            uint32_t it = new_iter(s);
            IrStmt *l = new_loop(s, it, r->extent, false, LOOP_PLAIN);
            ir_block_push(s->ir->arena, into, l);
            into = &l->body;
            map_iter(s, r->iter, affine1(it, 1, 0));
        }
    }
    IrIndex row_id = {.gather = clone_expr(s, sc.store->index[sc.axis].gather, NULL)};
    IrExpr *x = clone_expr(s, sc.added, NULL), *cell = new_load(s, shared, shared_cell(s, row_id, t));
    ir_block_push(s->ir->arena, into,
                  new_store(s, shared, shared_cell(s, row_id, t), new_op(s, SOP_ADD, sc.load_first ? cell : x, sc.load_first ? x : cell, NULL)));
    /* Its rows out. */
    uint32_t v2 = new_iter(s);
    IrStmt *back = new_loop(s, v2, rows, false, LOOP_PLAIN);
    ir_block_push(s->ir->arena, body, back);
    IrIndex row_v2 = {.terms = arena_alloc(s->ir->arena, sizeof(IrTerm)), .term_count = 1};
    row_v2.terms[0] = (IrTerm){v2, 1};
    ir_block_push(s->ir->arena, &back->body, new_store(s, sc.store->buffer, row_cell(s, &sc, v2), new_load(s, shared, shared_cell(s, row_v2, t))));
    const char *what = top->comment ? top->comment : "a scatter-add";
    kernel->comment = arena_printf(s->ir->arena, "%s; schedule: the rows of %u cells a GPU block (%llu rows) added in shared memory", what, w,
                                   (unsigned long long)rows);
    ir_block_push(s->ir->arena, out, kernel);
    return true;
}
