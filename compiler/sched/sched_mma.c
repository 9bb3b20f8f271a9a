/* sched_mma.c — rewrite 6t of the GPU schedule: contractions of bf16 or f16 operands (or of
 * f32 ones rounded to tf32, --tf32) as block kernels whose products run on the tensor cores
 * (mma.sync, sm_80 and later; on sm_90a one or two warpgroups' wgmma, tf32's over K-major
 * panels: an operand laid out along k rounded in shared memory, any other copied K-major by a
 * kernel before the product's), their panels copied into
 * shared memory asynchronously where their runs of cells are aligned (sched_block.h).  The
 * comments below say how.
 *
 * Requires: a Sched over a function scheduled for a GPU target of sm_80 or later (sched_gpu.c
 * calls gpu_mma_tiles before its other rewrites). */
#include "sched/sched_block.h"

#include <stdlib.h>
#include <string.h>

/* ---- Rewrite 6t, the GPU's: tensor cores ------------------------------------------------------------- *
 *
 * A contraction of two bf16 operands or two f16 operands, accumulated in f32 (the canonical
 * half nest: its cells rounded once when stored), or of two f32 operands that its step rounds
 * to tf32 (--tf32: fma(to_tf32(x), to_tf32(y), l), lower.c), of the shape rewrite 6 takes, on
 * sm_80 or later, becomes a block's kernel whose products run on the tensor cores (ir.h IR_MMA:
 * mma.sync.m16n8k16, or m16n8k8 twice a step for tf32, whose panels hold the rounded values).
 * A block of MMA_WARPS warps computes tile² cells of C: the warps stand in MMA_WARPS_I rows of
 * MMA_WARPS_J, each over tile/MMA_WARPS_I rows and tile/MMA_WARPS_J columns, that is mt × nt
 * tiles of 16 × 8 cells (mt = tile/32, nt = tile/16), their accumulators in the threads'
 * registers as the fragment layout places them (a 128-wide tile: each warp's 64 × 64 cells
 * take 4 ldmatrix.x4 loads of A's fragments a step of 16 and 4 of B's, for 32 products;
 * mma_fragments).  The threads are numbered t = x + 4y + 32z: z = MMA_WARPS_J·zi + zj is the warp
 * (zi its row, zj its column: two thread loops that split threadIdx.z, ir.h), y the lane's
 * group g and x its place q in the group, so that every index of the fragment layout is affine
 * in the thread loops.  The panels go through shared memory: bf16 and f16 ones copied there
 * asynchronously, several panels ahead (the pipeline below), where the operands' runs of cells
 * are aligned, MMA_ASYNC_STEPS steps a panel; the others as in rewrite 6, fetched into
 * registers a panel ahead, MMA_PANEL_BYTES of an operand's row a panel (64 bf16 or f16 steps,
 * 32 of tf32's f32 cells); either size halved, down to 16, where the reduction (or a part of a
 * split one) is not a whole number of panels.  A panel holds the operand's own
 * cells (tf32: the rounded f32 values), laid out as the operand is, so that a thread fetches a
 * run of neighbouring cells along the contiguous axis with one load and spills it with one
 * store (fetch_place): an operand along k is stored [m][k] in rows of step + HALF_ROW_PAD
 * (tf32: F32_ROW_PAD) cells, whose 8 × 8 blocks ldmatrix loads as the fragments hold them; one
 * along the tile [k][m] in rows of tile + HALF_ROW_PAD cells, whose blocks ldmatrix.trans
 * turns (tf32's f32 cells, which it cannot turn, a cell a thread).  Each panel is then step/16 steps of 16, each loading a warp's A and B
 * fragments from the panels into registers and taking mt·nt products (through registers):
 *     C registers ← C's initial value;  fetch panels 0
 *     for kt < K/step − 1:  registers → shared panels;  barrier;  fetch panels kt + 1;
 *                           step/16 × (fragments;  mt·nt products);  barrier
 *     registers → shared panels;  barrier;  step/16 × (fragments;  mt·nt products);  C ← C registers
 * The fragment reads conflict on no bank.  An ldmatrix reads each matrix as 8 rows of 16 bytes
 * at once: along k, rows of step + 8 halves (12, 20 or 36 words; tf32: step + 4 words, 20 or
 * 36) start the 8 rows on 8 different groups of four banks, and along the tile rows of tile +
 * 8 halves (36 or 68 words) do the same.  tf32's panels along the tile, loaded a cell a
 * thread, put the four q of a warp eight banks apart in rows of tile + 8 words and its eight g
 * on neighbouring banks.  The reference executor takes each
 * product's sixteen steps in order (interp.c), so the schedule prints the canonical nest's
 * bits; the tensor cores add in an order of their own (docs/gpu.md). */

enum { MMA_WARPS_I = 2, MMA_WARPS_J = 2, MMA_WARPS = MMA_WARPS_I * MMA_WARPS_J, MMA_K = 16, MMA_MIN_ARCH = 80,
       MMA_PANEL_BYTES = 128, /* a panel's steps through registers, where the reduction allows: 128 bytes of a row */
       MMA_ASYNC_STEPS = 32,  /* a panel's steps copied asynchronously, where the reduction allows */
       MMA_STAGES = 3,        /* panels in flight or in use at once, copied asynchronously */
       WARPGROUP_STAGES = 4,  /* the same for a warpgroup whose products run on into the next turn */
       HALF_ROW_PAD = 8, F32_ROW_PAD = 4,
       CORE_ROW_BYTES = 16,   /* a row of a core matrix of wgmma (sm_90a): 8 halves or 4 f32 cells */
       WARPGROUP = 128,       /* a warpgroup's threads */
       SWIZZLE_LINE = 128,    /* the bytes of a swizzle's line: a swizzled panel's 16-byte unit u of each is u xor line mod W/16;
                                 a warpgroup's panel's row along k where the reduction allows (64 halves, 32 f32 cells) */
       WARPGROUP_ROWS = 64    /* the rows of a warpgroup of a wide tile (128 × 256 on two, 64 × 256 on one) */ };

typedef struct MmaTile {
    const Contraction *ct;
    DType in;                   /* the operands' type */
    uint32_t tile, mt, nt;      /* cells a block along I (and J); a warp's 16-row and 8-column tiles */
    uint32_t tile_j;            /* cells a block along J: tile, or WIDE_TILE_J for a wide warpgroup tile */
    uint32_t step;              /* the steps of a panel: MMA_ASYNC_STEPS or MMA_PANEL_BYTES of a row, or fewer (at least MMA_K) */
    uint32_t stages;            /* panels in shared memory at once, copied asynchronously; 0: through registers */
    uint64_t panels;            /* with stages: the panels of a block's reduction (its part of a split one) */
    uint32_t fetches;           /* cells of a panel a thread fetches: tile·step / (32·MMA_WARPS) */
    uint32_t k_iter, bi, bj;
    uint32_t afrag, bfrag, cells; /* per-thread registers: 8·mt, 4·nt, 4·mt·nt */
    Panel a, b;
    uint32_t th[4];             /* the thread loops last opened (mma_threads): x, y, zj, zi (warpgroups': x, y, the warp
                                   in its group, the group) */
    Split split;
    uint32_t copy_th[5];        /* the copies' thread loops last opened (copy_threads): x, y mod 2, y / 2, the warp in its
                                   group, the group (UINT32_MAX for one) */
    bool warpgroup;             /* warpgroups' wgmma on swizzled core-matrix panels (sm_90a, below) */
    uint32_t warpgroups;        /* with warpgroup: 1, or 2 for a wide tile of 128 rows */
    uint32_t left_running;      /* a warpgroup's: the groups of products a turn leaves running (0 or 1) */
} MmaTile;

/* The block's threads: MMA_WARPS warps, or the warpgroups'. */
static uint32_t block_threads(const MmaTile *mt) { return mt->warpgroup ? WARPGROUP * mt->warpgroups : 32 * MMA_WARPS; }

/* The warps of one iteration of the outer warp loop th[3] (threadIdx.z's inner loop th[2]). */
static uint32_t inner_warps(const MmaTile *mt) { return mt->warpgroup ? WARPGROUP / 32 : MMA_WARPS_J; }

/* `count` thread loops in `into`, the last outermost, their iterators in th[] (the last
 * UINT32_MAX, and no loop, where its extent is 1); a loop of stride[d] > 1 splits its
 * dimension with the loop inside it (ir.h LOOP_THREAD_X).  Returns the innermost body. */
static IrBlock *open_threads(Sched *s, IrBlock *into, const uint64_t *extent, const IrLoopMode *mode, const uint32_t *stride,
                             int count, uint32_t *th) {
    th[count - 1] = UINT32_MAX;
    for (int d = count - 1; d >= 0; d--) {
        if (d == count - 1 && extent[d] == 1) continue;
        th[d] = new_iter(s);
        IrStmt *l = new_loop(s, th[d], extent[d], true, mode[d]);
        l->thread_stride = stride[d];
        ir_block_push(s->ir->arena, into, l);
        into = &l->body;
    }
    return into;
}

/* The block's threads in `into`, their iterators in mt->th[]: x (q, th[0]) innermost, y (g,
 * th[1]), then the warp z, two loops that split threadIdx.z (ir.h): for warps of mma.sync its
 * row zi (th[3]) and its column zj (th[2]), z = MMA_WARPS_J·zi + zj; for warpgroups the group
 * (th[3]; UINT32_MAX for one) and the warp in it (th[2]), z = 4·group + warp.  Returns the
 * innermost body. */
static IrBlock *thread_loops(Sched *s, IrBlock *into, MmaTile *mt) {
    const uint64_t extent[4] = {4, 8, inner_warps(mt), mt->warpgroup ? mt->warpgroups : MMA_WARPS_I};
    static const IrLoopMode mode[4] = {LOOP_THREAD_X, LOOP_THREAD_Y, LOOP_THREAD_Z, LOOP_THREAD_Z};
    const uint32_t stride[4] = {0, 0, 0, inner_warps(mt)};
    return open_threads(s, into, extent, mode, stride, 4, mt->th);
}

/* Register Σ more of a thread's `per_thread` registers: its index in the buffer that holds the
 * registers of every thread, thread t = x + 4y + 32z's copy at t·per_thread. */
static IrIndex *register_index(Sched *s, const MmaTile *mt, uint64_t per_thread, const IrTerm *more, uint32_t count) {
    const uint32_t *th = mt->th;
    IrTerm terms[8] = {{th[0], (int64_t)per_thread}, {th[1], 4 * (int64_t)per_thread}, {th[2], 32 * (int64_t)per_thread},
                       {th[3], 32 * (int64_t)inner_warps(mt) * (int64_t)per_thread}};
    uint32_t n = th[3] == UINT32_MAX ? 3 : 4; /* one warpgroup's: z the warp */
    for (uint32_t k = 0; k < count; k++) terms[n + k] = more[k];
    return flat_index(s, terms, n + count);
}

/* The cells of a core matrix's row (16 bytes) of the tile's type: 8 halves, 4 of tf32's f32 cells. */
static uint32_t core_row(const MmaTile *mt) { return CORE_ROW_BYTES / ir_dtype_bytes(mt->in); }

/* Cells a thread fetches together along the operand's contiguous axis: a quarter of a panel's
 * steps when that axis is the reduction's (8 bytes of halves for 16 steps, 16 for 32, 32 for 64;
 * twice that of f32), a 32nd of the tile's row otherwise (4 or 8 bytes of halves for a 64- or
 * 128-wide tile, 8 or 16 of f32). */
static uint32_t fetch_run(const MmaTile *mt, const Panel *p) {
    if (mt->warpgroup) return core_row(mt); /* a core matrix's row */
    return p->k_along_x ? mt->step / 4 : p->tile / 32;
}

/* Where a thread's fetch register pass·run + c goes in a panel: its step kk and its place m
 * along the tile (terms of the thread and fetch iterators; z = zj + MMA_WARPS_J·zi the warp).
 * The operand's contiguous axis runs along the lanes, `run` cells a lane: along k, the four
 * x of a group cover a row's steps and the lanes' groups and the warps the rows (kk = run·x + c,
 * m = y + 8z + 8·MMA_WARPS·pass); along the tile, a warp's 32 lanes cover a row of the panel
 * and the warps the steps (m = run·(x + 4y) + c, kk = z + MMA_WARPS·pass). */
static void fetch_place(const MmaTile *mt, const Panel *p, const uint32_t th[4], uint32_t pass, uint32_t c, Affine *kk, Affine *m) {
    int64_t run = fetch_run(mt, p);
    if (p->k_along_x) {
        *kk = (Affine){.terms = {{c, 1}, {th[0], run}}, .count = 2};
        *m = (Affine){.terms = {{th[1], 1}, {th[2], 8}, {th[3], 8 * MMA_WARPS_J}, {pass, 8 * MMA_WARPS}}, .count = 4};
    } else {
        *m = (Affine){.terms = {{c, 1}, {th[0], run}, {th[1], 4 * run}}, .count = 3};
        *kk = (Affine){.terms = {{th[2], 1}, {th[3], MMA_WARPS_J}, {pass, MMA_WARPS}}, .count = 3};
    }
}

/* The fetch iterators pass < fetches/run and c < run, unrolled in `into`; returns the body. */
static IrBlock *fetch_loops(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, uint32_t *pass, uint32_t *c) {
    uint32_t run = fetch_run(mt, p);
    IrStmt *l = unrolled(s, into, pass, mt->fetches / run, true);
    return &unrolled(s, &l->body, c, run, true)->body;
}

static IrIndex *fetch_register(Sched *s, const MmaTile *mt, const Panel *p, uint32_t pass, uint32_t c) {
    IrTerm more[2] = {{c, 1}, {pass, fetch_run(mt, p)}};
    return register_index(s, mt, mt->fetches, more, 2);
}

/* The cells of one of p's panels in shared memory (the buffer holds mt->stages of them, or one). */
static int64_t panel_cells(const MmaTile *mt, const Panel *p) {
    if (mt->warpgroup) return (int64_t)p->tile * mt->step;
    return p->k_along_x ? (int64_t)p->tile * p->m_stride : (int64_t)mt->step * p->k_stride;
}

/* In a thread's body: its fetch registers ← the operand's cells of panel kt (UINT32_MAX: the first). */
static void mma_fetch(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, const uint32_t th[4], uint32_t kt, int64_t k_offset) {
    uint32_t pass, c;
    IrBlock *body = fetch_loops(s, into, mt, p, &pass, &c);
    Affine kk, m;
    fetch_place(mt, p, th, pass, c, &kk, &m);
    reset_subst(s);
    affine_add(&m, p->base_iter, p->tile);
    map_iter(s, p->tiled_iter, m);
    map_iter(s, mt->k_iter, k_place(kk, kt, mt->step, k_offset, &mt->split));
    map_outer_part(s, &mt->split);
    ir_block_push(s->ir->arena, body, new_store(s, p->regs, fetch_register(s, mt, p, pass, c), clone_expr(s, p->operand, NULL)));
}

/* The cell of p's panel in stage `stage` for step kk and place m: stage·panel_cells +
 * kk·k_stride + m·m_stride. */
static IrIndex *panel_cell(Sched *s, const MmaTile *mt, const Panel *p, const Affine *kk, const Affine *m, uint32_t stage) {
    IrTerm at[8];
    uint32_t n = 0;
    for (uint32_t k = 0; k < kk->count; k++) at[n++] = (IrTerm){kk->terms[k].iter, kk->terms[k].coef * p->k_stride};
    for (uint32_t k = 0; k < m->count; k++) at[n++] = (IrTerm){m->terms[k].iter, m->terms[k].coef * p->m_stride};
    IrIndex *cell = flat_index(s, at, n);
    cell->offset = stage * panel_cells(mt, p);
    return cell;
}

/* In a thread's body: shared[kk·k_stride + m·m_stride] ← its fetch registers. */
static void mma_spill(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, const uint32_t th[4]) {
    uint32_t pass, c;
    IrBlock *body = fetch_loops(s, into, mt, p, &pass, &c);
    Affine kk, m;
    fetch_place(mt, p, th, pass, c, &kk, &m);
    ir_block_push(s->ir->arena, body,
                  new_store(s, p->shared, panel_cell(s, mt, p, &kk, &m, 0), new_load(s, p->regs, fetch_register(s, mt, p, pass, c))));
}

/* A type's fragment layouts (ir.h IrMma), as what each bit of a register number adds to the
 * step kk and the place m of the panel cell it holds.  For a warp's 16-row tile i and a lane
 * (g, q), A register 8i + r holds the panel cell kk = kk_per_q·q + Σ a_kk[b], m = 16i + g +
 * Σ a_m[b] over the bits b set in r < 8; B register 4j + r the cell kk = kk_per_q·q + Σ b_kk[b]
 * over the bits of r < 4, m = z·tile/8 + 8j + g.  (tf32's registers 8i + 4h + r cover the two
 * halves h of the step of 16, each one m16n8k8 product: its bit 2 of A and bit 1 of B are h.) */
typedef struct FragmentLayout {
    int64_t kk_per_q;
    int64_t a_kk[3], a_m[3];
    int64_t b_kk[2];
} FragmentLayout;

static const FragmentLayout half_layout = {.kk_per_q = 2, .a_kk = {1, 0, 8}, .a_m = {0, 8, 0}, .b_kk = {1, 8}};
static const FragmentLayout tf32_layout = {.kk_per_q = 1, .a_kk = {0, 4, 8}, .a_m = {8, 0, 0}, .b_kk = {4, 8}};

/* `bits` unrolled loops of two iterations each, in `into`, their iterators in bit[] (the highest
 * bit outermost, so registers are filled in order); returns the innermost body. */
static IrBlock *bit_loops(Sched *s, IrBlock *into, uint32_t *bit, unsigned bits) {
    for (unsigned b = bits; b-- > 0;) into = &unrolled(s, into, &bit[b], 2, true)->body;
    return into;
}

/* Whether a warp's fragments of p load as whole matrices (IR_LDMATRIX): always for bf16 and
 * f16 (a transposed load where the panel runs along the tile), for tf32's f32 cells where the
 * panel runs along k (a transposed load would split them). */
static bool ldmatrix_fits(const MmaTile *mt, const Panel *p) { return mt->in != DTYPE_F32 || p->k_along_x; }

/* At the block's level: each warp's `matrices` matrices of p's panel into registers regs_at …
 * of `regs`, lane L naming row L mod 8 of matrix L/8 at cell at + row·(L mod 8) + m0·bit₀ +
 * m1·bit₁ of its matrix number, moved by a warp's rows and columns of the block's tile. */
static void push_ldmatrix(Sched *s, IrBlock *into, const MmaTile *mt, const Panel *p, uint32_t regs, uint32_t regs_at,
                          uint32_t matrices, int64_t at, int64_t row, int64_t m0, int64_t m1, bool a) {
    IrStmt *l = arena_alloc(s->ir->arena, sizeof *l);
    int64_t warp_tile = (int64_t)mt->tile / (a ? MMA_WARPS_I : MMA_WARPS_J) * p->m_stride;
    *l = (IrStmt){.kind = IR_LDMATRIX,
                  .ldmatrix = {.warps = MMA_WARPS, .warps_j = MMA_WARPS_J, .matrices = matrices, .trans = !p->k_along_x,
                               .panel = p->shared, .regs = regs, .regs_at = regs_at, .at = at, .warp_row = a ? warp_tile : 0,
                               .warp_col = a ? 0 : warp_tile, .row = row, .matrix = {m0, matrices > 2 ? m1 : 0}}};
    ir_block_push(s->ir->arena, into, l);
}

/* A warp's A and B fragments of steps 16·sub … 16·sub + 15 of the panels in stage `stage`, by
 * the layout of the tile's type (ir.h IrMma).  As whole matrices where ldmatrix_fits, at the
 * block's level: for A, each 16-row tile i one x4 load (tf32: one for each half of the 16
 * steps), its matrices the rows +8 and the steps +8 (tf32: +4); for B, two 8-column tiles j
 * one x4 load, its matrices the steps +8 and the next tile (tf32: one tile, the steps +4 and
 * +8); the matrix rows are the panel's rows (the tile's places along k, the steps along the
 * tile, which the transposed load turns).  Otherwise each thread loads its cells, in `thread`
 * (a phase's thread body; NULL: a phase of their own in `block`), after which the matrices. */
static void mma_fragments(Sched *s, IrBlock *block, IrBlock *thread, MmaTile *mt, uint32_t sub, uint32_t stage) {
    const FragmentLayout *lay = mt->in == DTYPE_F32 ? &tf32_layout : &half_layout;
    bool tf32 = mt->in == DTYPE_F32, a_whole = ldmatrix_fits(mt, &mt->a), b_whole = ldmatrix_fits(mt, &mt->b);
    int64_t ak = mt->a.k_stride, am = mt->a.m_stride, bk = mt->b.k_stride, bm = mt->b.m_stride;
    int64_t a_first = (int64_t)MMA_K * sub * ak + stage * panel_cells(mt, &mt->a);
    int64_t b_first = (int64_t)MMA_K * sub * bk + stage * panel_cells(mt, &mt->b);
    uint32_t i, j, bit[3];
    if ((!a_whole || !b_whole) && !thread) thread = thread_loops(s, block, mt);
    const uint32_t *th = mt->th;
    if (!a_whole) {
        IrBlock *body = bit_loops(s, &unrolled(s, thread, &i, mt->mt, true)->body, bit, 3);
        IrTerm a_reg[4] = {{i, 8}, {bit[0], 1}, {bit[1], 2}, {bit[2], 4}};
        IrTerm a_at[7] = {{th[0], lay->kk_per_q * ak}, {th[3], mt->tile / MMA_WARPS_I * am}, {i, 16 * am}, {th[1], am}};
        for (unsigned b = 0; b < 3; b++) a_at[4 + b] = (IrTerm){bit[b], lay->a_kk[b] * ak + lay->a_m[b] * am};
        IrIndex *a_cell = flat_index(s, a_at, 7);
        a_cell->offset = a_first;
        ir_block_push(s->ir->arena, body, new_store(s, mt->afrag, register_index(s, mt, 8 * mt->mt, a_reg, 4),
                                                    new_load(s, mt->a.shared, a_cell)));
    }
    if (!b_whole) {
        IrBlock *body = bit_loops(s, &unrolled(s, thread, &j, mt->nt, true)->body, bit, 2);
        IrTerm b_reg[3] = {{j, 4}, {bit[0], 1}, {bit[1], 2}};
        IrTerm b_at[6] = {{th[0], lay->kk_per_q * bk}, {th[2], mt->tile / MMA_WARPS_J * bm}, {j, 8 * bm}, {th[1], bm}};
        for (unsigned b = 0; b < 2; b++) b_at[4 + b] = (IrTerm){bit[b], lay->b_kk[b] * bk};
        IrIndex *b_cell = flat_index(s, b_at, 6);
        b_cell->offset = b_first;
        ir_block_push(s->ir->arena, body, new_store(s, mt->bfrag, register_index(s, mt, 4 * mt->nt, b_reg, 3),
                                                    new_load(s, mt->b.shared, b_cell)));
    }
    if (a_whole)
        for (uint32_t ti = 0; ti < mt->mt; ti++)
            for (uint32_t h = 0; h < (tf32 ? 2u : 1u); h++)
                push_ldmatrix(s, block, mt, &mt->a, mt->afrag, 8 * ti + 4 * h, 4, a_first + 16 * ti * am + 8 * h * ak,
                              mt->a.k_along_x ? am : ak, 8 * am, (tf32 ? 4 : 8) * ak, true);
    if (b_whole)
        for (uint32_t tj = 0; tj < mt->nt; tj += tf32 ? 1 : 2) {
            uint32_t matrices = tf32 || tj + 1 < mt->nt ? 4 : 2;
            push_ldmatrix(s, block, mt, &mt->b, mt->bfrag, 4 * tj, matrices, b_first + 8 * tj * bm, mt->b.k_along_x ? bm : bk,
                          (tf32 ? 4 : 8) * bk, tf32 ? 8 * bk : 8 * bm, false);
        }
}

/* At the block's level: every warp's mt·nt products of 16 steps (tf32: two each, the halves
 * of the 16 in order). */
static void mma_products(Sched *s, IrBlock *into, const MmaTile *mt) {
    uint32_t halves = MMA_K / ir_mma_k(mt->in);
    for (uint32_t i = 0; i < mt->mt; i++)
        for (uint32_t j = 0; j < mt->nt; j++)
            for (uint32_t h = 0; h < halves; h++) {
                IrStmt *p = arena_alloc(s->ir->arena, sizeof *p);
                *p = (IrStmt){.kind = IR_MMA,
                              .mma = {.in = mt->in, .warps = MMA_WARPS, .a = mt->afrag, .b = mt->bfrag, .c = mt->cells,
                                      .a_at = 8 * i + 4 * h, .b_at = 4 * j + 2 * h, .c_at = 4 * (i * mt->nt + j)}};
                ir_block_push(s->ir->arena, into, p);
            }
}

/* mma_cells for warpgroups (ir.h IrWgmma): with R = tile/warpgroups rows a group, C register
 * (tile_j/2)h + 4i + 2r1 + r0 of group w's thread (z, g, q) holds
 * C[bi·tile + R·w + 64h + 16z + g + 8r1][bj·tile_j + 8i + 2q + r0]. */
static IrBlock *warpgroup_cells(Sched *s, IrBlock *into, const MmaTile *mt, const uint32_t th[4], IrIndex **cell) {
    uint32_t h, i, r0, r1, group_rows = mt->tile / mt->warpgroups;
    IrStmt *l = unrolled(s, into, &h, group_rows / 64, true);
    l = unrolled(s, &l->body, &i, mt->tile_j / 8, true);
    l = unrolled(s, &l->body, &r1, 2, true);
    l = unrolled(s, &l->body, &r0, 2, true);
    reset_subst(s);
    Affine rows = {.terms = {{h, 64}, {th[2], 16}, {th[1], 1}, {r1, 8}}, .count = 4};
    affine_add(&rows, th[3], group_rows);
    affine_add(&rows, mt->bi, mt->tile);
    map_iter(s, mt->ct->i_loop->iter, rows);
    Affine cols = {.terms = {{i, 8}, {th[0], 2}, {r0, 1}}, .count = 3};
    affine_add(&cols, mt->bj, mt->tile_j);
    map_iter(s, mt->ct->j_loop->iter, cols);
    IrTerm reg[4] = {{h, (int64_t)mt->tile_j / 2}, {i, 4}, {r0, 1}, {r1, 2}};
    *cell = register_index(s, mt, (uint64_t)group_rows * mt->tile_j / WARPGROUP, reg, 4);
    return &l->body;
}

/* Loops over a thread's cells of C in `into`, with I and J mapped onto them; returns the body
 * and the cell's register: C register 4(i·nt + j) + r0 + 2r1 holds
 * C[bi·tile + zi·tile/MMA_WARPS_I + 16i + g + 8r1][bj·tile + zj·tile/MMA_WARPS_J + 8j + 2q + r0]. */
static IrBlock *mma_cells(Sched *s, IrBlock *into, const MmaTile *mt, const uint32_t th[4], IrIndex **cell) {
    if (mt->warpgroup) return warpgroup_cells(s, into, mt, th, cell);
    uint32_t i, j, r0, r1;
    IrStmt *l = unrolled(s, into, &i, mt->mt, true);
    l = unrolled(s, &l->body, &j, mt->nt, true);
    l = unrolled(s, &l->body, &r1, 2, true);
    l = unrolled(s, &l->body, &r0, 2, true);
    reset_subst(s);
    Affine rows = {.terms = {{th[3], mt->tile / MMA_WARPS_I}, {i, 16}, {th[1], 1}, {r1, 8}}, .count = 4};
    affine_add(&rows, mt->bi, mt->tile);
    map_iter(s, mt->ct->i_loop->iter, rows);
    Affine cols = {.terms = {{th[2], mt->tile / MMA_WARPS_J}, {j, 8}, {th[0], 2}, {r0, 1}}, .count = 4};
    affine_add(&cols, mt->bj, mt->tile);
    map_iter(s, mt->ct->j_loop->iter, cols);
    IrTerm reg[4] = {{i, 4 * mt->nt}, {j, 4}, {r0, 1}, {r1, 2}};
    *cell = register_index(s, mt, 4 * mt->mt * mt->nt, reg, 4);
    return &l->body;
}

/* The reduction r with its step's tf32 roundings taken off (the factors' loads themselves), in
 * *bare (whose step is *step, its value *value), when its step is fma(to_tf32(load of f32),
 * to_tf32(load of f32), l): --tf32's contraction (lower.c). */
static bool tf32_step(const IrProgram *ir, const Reduction *r, Reduction *bare, IrStmt *step, IrExpr *value) {
    const IrExpr *v = r->step->value;
    if (v->kind != IR_OP || v->op != SOP_FMA) return false;
    *value = *v;
    for (int k = 0; k < 2; k++) {
        const IrExpr *f = v->args[k];
        if (f->kind != IR_OP || f->op != SOP_TO_TF32 || f->args[0]->kind != IR_LOAD ||
            ir->buffers[f->args[0]->buffer].dtype != DTYPE_F32)
            return false;
        value->args[k] = f->args[0];
    }
    *step = *r->step;
    step->value = value;
    *bare = *r;
    bare->step = step;
    return true;
}

/* Whether contraction ct of reduction r can run on the tensor cores, and in which type: the
 * operands' common half type, or DTYPE_F32 for tf32 (`tf32`: the step rounds both to tf32). */
static bool mma_type(const Sched *s, const Contraction *ct, const Reduction *r, bool tf32, DType *in) {
    const IrProgram *ir = s->ir;
    const char *arch = s->target->cpu;
    if (!arch || strncmp(arch, "sm_", 3) != 0 || atoi(arch + 3) < MMA_MIN_ARCH) return false;
    DType a = ir->buffers[ct->a->buffer].dtype, b = ir->buffers[ct->b->buffer].dtype;
    if (a != b || (tf32 ? a != DTYPE_F32 : !ir_dtype_half(a)) || ct->add) return false;
    if (r->step->value->type != DTYPE_F32) return false; /* the accumulator */
    *in = a;
    return true;
}

/* Whether the operand that loads `load` has the reduction's axis as its contiguous one. */
static bool mma_k_along(const IrProgram *ir, const IrExpr *load, uint32_t k_iter, uint32_t tiled_iter) {
    return ir_flat_coef(ir, load->buffer, load->index, k_iter) == 1 && ir_flat_coef(ir, load->buffer, load->index, tiled_iter) != 1;
}

/* The panel of the operand that loads `load`: `value` is what it holds (the load, or its tf32
 * rounding).  Its layout follows the operand's: [m][k] in rows of step + HALF_ROW_PAD (bf16,
 * f16) or step + F32_ROW_PAD (tf32) cells when the reduction axis is the contiguous one, [k][m]
 * in rows of tile + HALF_ROW_PAD cells otherwise, so that a fetch's run of cells is one store. */
static Panel mma_panel(Sched *s, const MmaTile *mt, const IrExpr *load, const IrExpr *value, uint32_t tiled_iter,
                       uint32_t base_iter, uint32_t tile, const char *name) {
    const IrProgram *ir = s->ir;
    Panel p = {.operand = value, .tiled_iter = tiled_iter, .base_iter = base_iter, .tile = tile};
    p.k_along_x = mma_k_along(ir, load, mt->k_iter, tiled_iter);
    DType type = mt->in; /* tf32: f32 cells */
    if (p.k_along_x) p.k_stride = 1, p.m_stride = mt->step + (type == DTYPE_F32 ? F32_ROW_PAD : HALF_ROW_PAD);
    else p.k_stride = tile + HALF_ROW_PAD, p.m_stride = 1;
    /* A warpgroup's: swizzled rows (ir.h IrCoreLayout).  Along k a row of the panel is one of
     * the step's cells (W = step·cell bytes: 128 for 64 steps of halves or 32 of f32, 64 for
     * half that), 8 rows a group: the panel is [m][k] as the operand is.  Along the tile (bf16
     * and f16 alone), rows of 64 cells (128 bytes), one row a step: the panel is
     * [m / 64][k][m mod 64]. */
    uint32_t bytes = ir_dtype_bytes(type), unit = core_row(mt);
    if (mt->warpgroup && p.k_along_x)
        p.core = (IrCoreLayout){.leading = unit, .stride = 8 * (int64_t)mt->step, .swizzle = bytes * mt->step, .bytes = bytes};
    if (mt->warpgroup && !p.k_along_x)
        p.core = (IrCoreLayout){.leading = (int64_t)SWIZZLE_LINE / bytes * mt->step, .stride = 8 * SWIZZLE_LINE / bytes, .mn_major = true,
                                .swizzle = SWIZZLE_LINE, .bytes = bytes};
    uint64_t stages = mt->stages && mt->panels > 1 ? mt->stages : 1; /* a single panel uses stage 0 alone */
    p.shared = new_scratch(s, name, stages * (uint64_t)panel_cells(mt, &p), type, true);
    s->ir->buffers[p.shared].gpu_shared = true;
    s->ir->buffers[p.shared].swizzle = p.core.swizzle;
    if (!mt->stages) {
        p.regs = new_scratch(s, "fetch", (uint64_t)32 * MMA_WARPS * mt->fetches, type, true);
        s->ir->buffers[p.regs].thread_cells = mt->fetches;
    }
    return p;
}

static uint32_t thread_registers(Sched *s, const MmaTile *mt, const char *name, uint32_t per_thread, DType type) {
    uint32_t b = new_scratch(s, name, (uint64_t)block_threads(mt) * per_thread, type, true);
    s->ir->buffers[b].thread_cells = per_thread;
    return b;
}

/* What a panel of `load` holds: the load, or the step's tf32 rounding of it. */
static const IrExpr *panel_value(const Reduction *r, const IrExpr *load, bool tf32) {
    if (!tf32) return load;
    const IrExpr *v = r->step->value;
    return v->args[0]->args[0] == load ? v->args[0] : v->args[1];
}

/* Rewrite 6t's hooks (k_loop). */
static IrBlock *mma_threads(Sched *s, IrBlock *into, void *tile) {
    MmaTile *mt = tile;
    return thread_loops(s, into, mt);
}

static void mma_fetch_panels(Sched *s, IrBlock *into, void *tile, uint32_t kt, int64_t k_offset) {
    MmaTile *mt = tile;
    mma_fetch(s, into, mt, &mt->a, mt->th, kt, k_offset);
    mma_fetch(s, into, mt, &mt->b, mt->th, kt, k_offset);
}

static void mma_spill_panels(Sched *s, IrBlock *into, void *tile) {
    MmaTile *mt = tile;
    mma_spill(s, into, mt, &mt->a, mt->th);
    mma_spill(s, into, mt, &mt->b, mt->th);
}

/* A panel's steps, 16 at a time: fragments (the first in the fetch's thread body), products. */
static void mma_step(Sched *s, IrBlock *thread, IrBlock *block, void *tile) {
    MmaTile *mt = tile;
    for (uint32_t sub = 0; sub < mt->step / MMA_K; sub++) {
        mma_fragments(s, block, sub ? NULL : thread, mt, sub, 0);
        mma_products(s, block, mt);
    }
}

/* ---- Rewrite 6t's asynchronous panels ---------------------------------------------------------------- *
 *
 * Where the operands are bf16 or f16 cells of device buffers whose runs (fetch_run) start at
 * addresses aligned to their bytes, the panels skip the registers: each thread copies its runs
 * straight into shared memory with cp.async (ir.h LOOP_ASYNC_COPY), MMA_STAGES panels at a
 * time, each copy landing while the block computes on the panels before it.  Panel p goes to
 * stage p mod S of each shared buffer (S = MMA_STAGES, or 2 for fewer panels, of which a
 * single panel uses one); the copies of one phase are one group, and a barrier after copies
 * waits until only the groups of later panels are in flight:
 *     copy panel 0;  …;  copy panel S − 2                      (S − 1 phases, S − 1 groups; before
 *                                                                the cells' initial values where
 *                                                                no outer reduction loop holds them)
 *     for kt < P:  barrier after copies (min(kt + S − 1, P) − kt − 1 groups in flight);
 *                  copy panel kt + S − 1 into stage (kt + S − 1) mod S, if there is one;
 *                  step/16 × (fragments from stage kt mod S;  mt·nt products)
 * The barrier also tells every thread that the block has finished with panel kt − 1, whose
 * stage the copy after it overwrites.  The turns whose copies keep S − 2 groups in flight are
 * a loop over rounds of S turns (each turn's stages constant in the IR), the others unrolled.
 * A warpgroup's products may run on past their turn (below): then the copies run A = S − 2
 * panels ahead instead of S − 1 (the barrier of turn kt tells that the products of panel
 * kt − 2 are done, not those of kt − 1), and every turn but the last leaves its products
 * running. */

/* Whether every flat coefficient of the load's index but its contiguous axis's, and its
 * offset, are multiples of `run` cells (so that each run of cells is aligned to its bytes). */
static bool runs_aligned(const IrProgram *ir, const IrExpr *load, uint32_t contiguous, uint32_t run) {
    const IrBuffer *b = &ir->buffers[load->buffer];
    if (b->kernel_local || b->gpu_shared || run * ir_dtype_bytes(b->dtype) < 4) return false;
    int64_t stride = 1, offset = 0;
    for (uint32_t a = b->rank; a-- > 0;) {
        const IrIndex *ix = &load->index[a];
        if (ix->symbol || ix->gather) return false;
        offset += ix->offset * stride;
        for (uint32_t t = 0; t < ix->term_count; t++)
            if (ix->terms[t].iter != contiguous && ix->terms[t].coef * stride % run) return false;
        stride *= (int64_t)b->dims[a];
    }
    return offset % run == 0 && ir_flat_coef(ir, load->buffer, load->index, contiguous) == 1;
}

/* The copies' threads of a warpgroup's kernel in `into`, their iterators in mt->copy_th[]:
 * those of thread_loops, y split in two (y = 2·yh + yl), so that thread t's t mod 8 = x + 4·yl
 * and t / 8 = yh + 4z + 16·group.  Returns the innermost body. */
static IrBlock *copy_threads(Sched *s, IrBlock *into, MmaTile *mt) {
    const uint64_t extent[5] = {4, 2, 4, WARPGROUP / 32, mt->warpgroups};
    static const IrLoopMode mode[5] = {LOOP_THREAD_X, LOOP_THREAD_Y, LOOP_THREAD_Y, LOOP_THREAD_Z, LOOP_THREAD_Z};
    static const uint32_t stride[5] = {0, 0, 2, 0, WARPGROUP / 32};
    return open_threads(s, into, extent, mode, stride, 5, mt->copy_th);
}

/* Where a thread's copy of panel p's run c (one of pass po, pi) goes in a warpgroup's swizzled
 * panel (ir.h IrCoreLayout): its step kk and place m, and its cell in stage `stage`.  Each 8
 * neighbouring threads (u = t mod 8 = x + 4·yl) copy one 128-byte line of the panel, 16 bytes
 * (U cells: 8 halves, 4 f32) each, from 128 neighbouring bytes of the operand where a line is
 * one row (L = t / 8 its number in a pass), so that their stores, whatever the swizzle does
 * within the line, fall on no bank twice:
 *   along k, rows of 128 bytes (64 steps of halves, 32 of f32):  kk = Uu + c,  m = L + T/8·pi
 *   along k, rows of 64 bytes (two rows a line):                 kk = Ux + c,  m = yl + 2L + T/4·pi
 *   along the tile (a line: one step of 64 places m): m = 8u + c + 64·po,  kk = L + T/8·pi
 * with T the block's threads. */
static IrIndex *swizzled_copy_place(Sched *s, const MmaTile *mt, const Panel *p, uint32_t po, uint32_t pi, uint32_t c,
                                    uint32_t stage, Affine *kk, Affine *m) {
    const uint32_t *th = mt->copy_th;
    int64_t lines = block_threads(mt) / 8; /* a pass's lines */
    Affine line = {.terms = {{th[2], 1}, {th[3], 4}}, .count = 2};
    if (th[4] != UINT32_MAX) affine_add(&line, th[4], 16);
    IrTerm at[8];
    uint32_t n = 0;
    int64_t unit = core_row(mt);
    if (p->k_along_x) {
        if (mt->step * ir_dtype_bytes(mt->in) == SWIZZLE_LINE) {
            *kk = (Affine){.terms = {{c, 1}, {th[0], unit}, {th[1], 4 * unit}}, .count = 3};
            *m = line;
            affine_add(m, pi, lines);
        } else {
            *kk = (Affine){.terms = {{c, 1}, {th[0], unit}}, .count = 2};
            *m = (Affine){.terms = {{th[1], 1}}, .count = 1};
            for (uint32_t k = 0; k < line.count; k++) affine_add(m, line.terms[k].iter, 2 * line.terms[k].coef);
            affine_add(m, pi, 2 * lines);
        }
        /* [m][k]: m·step + kk */
        for (uint32_t k = 0; k < m->count; k++) at[n++] = (IrTerm){m->terms[k].iter, m->terms[k].coef * (int64_t)mt->step};
        for (uint32_t k = 0; k < kk->count; k++) at[n++] = kk->terms[k];
    } else {
        int64_t row = SWIZZLE_LINE / 2; /* (bf16 and f16 alone) */
        *m = (Affine){.terms = {{c, 1}, {th[0], 8}, {th[1], 32}}, .count = 3}; /* m mod 64 */
        *kk = line;
        affine_add(kk, pi, lines);
        /* [m / 64][k][m mod 64] */
        for (uint32_t k = 0; k < 3; k++) at[n++] = m->terms[k];
        if (po != UINT32_MAX) at[n++] = (IrTerm){po, p->core.leading};
        affine_add(m, po, row);
        for (uint32_t k = 0; k < kk->count; k++) at[n++] = (IrTerm){kk->terms[k].iter, kk->terms[k].coef * row};
    }
    IrIndex *cell = flat_index(s, at, n);
    cell->offset = stage * panel_cells(mt, p);
    return cell;
}

/* Cells of p's panel a thread copies (rewrite 6t's asynchronous copies). */
static uint32_t copy_cells(const MmaTile *mt, const Panel *p) { return p->tile * mt->step / block_threads(mt); }

/* In `into` (a phase of its own): the block's copies of panel ko·coef + panel (ko UINT32_MAX:
 * panel alone) of the A and B operands into stage `stage`.  A run of fetch_run cells a copy;
 * mma.sync's placed as its fetches are (fetch_place), a warpgroup's by swizzled_copy_place, in
 * passes po (a warpgroup's panel along the tile: its 64-wide blocks) and pi. */
static void mma_copy_panels(Sched *s, IrBlock *into, MmaTile *mt, uint32_t ko, int64_t coef, int64_t panel, uint32_t stage) {
    IrBlock *thread = mt->warpgroup ? copy_threads(s, into, mt) : mma_threads(s, into, mt);
    for (int op = 0; op < 2; op++) {
        const Panel *p = op ? &mt->b : &mt->a;
        uint32_t run = fetch_run(mt, p), po = UINT32_MAX, pi, c = new_iter(s);
        uint32_t outer = mt->warpgroup && !p->k_along_x ? p->tile / (SWIZZLE_LINE / 2) : 1;
        IrBlock *passes = thread;
        if (outer > 1) passes = &unrolled(s, passes, &po, outer, true)->body;
        IrStmt *lp = unrolled(s, passes, &pi, copy_cells(mt, p) / run / outer, true), *lc = new_loop(s, c, run, true, LOOP_ASYNC_COPY);
        ir_block_push(s->ir->arena, &lp->body, lc);
        Affine kk, m;
        IrIndex *to;
        if (mt->warpgroup) to = swizzled_copy_place(s, mt, p, po, pi, c, stage, &kk, &m);
        else {
            fetch_place(mt, p, mt->th, pi, c, &kk, &m);
            to = panel_cell(s, mt, p, &kk, &m, stage);
        }
        reset_subst(s);
        affine_add(&m, p->base_iter, p->tile);
        map_iter(s, p->tiled_iter, m);
        kk.offset += panel * mt->step;
        affine_add(&kk, ko, coef * mt->step);
        map_iter(s, mt->k_iter, k_place(kk, UINT32_MAX, 0, 0, &mt->split));
        map_outer_part(s, &mt->split);
        ir_block_push(s->ir->arena, &lc->body, new_store(s, p->shared, to, clone_expr(s, p->operand, NULL)));
    }
}

static void push_copy_barrier(Sched *s, IrBlock *into, uint32_t in_flight) {
    IrStmt *b = push_barrier(s, into);
    b->await_copies = true;
    b->copies_in_flight = in_flight;
}

/* At the block's level: the warpgroup's product of the panels in stage `stage`, `in_flight`
 * groups of products left running when it ends. */
static void warpgroup_product(Sched *s, IrBlock *into, const MmaTile *mt, uint32_t stage, uint32_t in_flight) {
    IrStmt *w = arena_alloc(s->ir->arena, sizeof *w);
    IrCoreLayout a = mt->a.core, b = mt->b.core;
    a.at = stage * panel_cells(mt, &mt->a);
    b.at = stage * panel_cells(mt, &mt->b);
    *w = (IrStmt){.kind = IR_WGMMA,
                  .wgmma = {.in = mt->in, .warpgroups = mt->warpgroups, .rows = mt->tile, .n = mt->tile_j, .steps = mt->step,
                            .a = mt->a.shared, .b = mt->b.shared, .a_layout = a, .b_layout = b, .c = mt->cells, .in_flight = in_flight}};
    ir_block_push(s->ir->arena, into, w);
}

/* Panels copied ahead of the one in use: S − 1, one fewer where products run on (above). */
static int64_t copies_ahead(const MmaTile *mt) { return (int64_t)mt->stages - 1 - mt->left_running; }

/* In `into` (after the barrier that tells the panels in stage `stage` have landed): every cell
 * of each panel that rounds in shared memory (tf32 read in place, below) rounded to tf32 where
 * it lies.  Thread t of T takes cells t + T·ci + P·co of the stage (ci < P/T, P the swizzle's
 * period in cells: 256, 8 rows of 128 bytes), so that a warp's 32 cells are 128 neighbouring
 * bytes of one swizzled line, on 32 banks, and a thread's cells lie P/T swizzles apart and
 * otherwise whole periods (its addresses: P/T registers and constants; cg_llvm.c
 * swizzled_cell).  Then each thread's stores are fenced for the async proxy through which the
 * products read shared memory (fence.proxy.async, the writers' side) and a barrier comes
 * before the products read them.  False (nothing pushed) where no panel rounds. */
static bool round_panels(Sched *s, IrBlock *into, MmaTile *mt, uint32_t stage) {
    bool any = false;
    for (int op = 0; op < 2; op++) {
        const Panel *p = op ? &mt->b : &mt->a;
        if (!p->rounds_in_shared) continue;
        any = true;
        int64_t cells = panel_cells(mt, p), threads = block_threads(mt), period = 8 * (int64_t)p->core.swizzle / p->core.bytes;
        int64_t inner = period % threads == 0 ? period / threads : 1; /* a thread's cells in one period */
        IrBlock *thread = thread_loops(s, into, mt);
        uint32_t co, ci;
        IrStmt *outer = unrolled(s, thread, &co, (uint64_t)(cells / (threads * inner)), true);
        IrStmt *l = unrolled(s, &outer->body, &ci, (uint64_t)inner, true);
        const IrTerm more[2] = {{ci, threads}, {co, threads * inner}}; /* past the thread's number t */
        IrIndex *from = register_index(s, mt, 1, more, 2), *to = register_index(s, mt, 1, more, 2);
        from->offset = to->offset = stage * cells;
        IrExpr *rounded = new_op(s, SOP_TO_TF32, new_load(s, p->shared, from), NULL, NULL);
        ir_block_push(s->ir->arena, &l->body, new_store(s, p->shared, to, rounded));
    }
    if (any) push_barrier(s, into)->fence_async = true; /* each thread's rounded stores fenced for the products' async proxy */
    return any;
}

/* One turn of the pipeline in `into`: the barrier, the copy of panel ko·S + `copy` (if `copy`
 * is not negative) into stage `copy` mod S, the roundings of panels read in place (tf32 on
 * warpgroups), and the products of the panel in stage `stage` (a warpgroup's left running but
 * in the `last` turn). */
static void mma_turn(Sched *s, IrBlock *into, MmaTile *mt, uint32_t ko, uint32_t in_flight, int64_t copy, uint32_t stage, bool last) {
    push_copy_barrier(s, into, in_flight);
    if (copy >= 0) mma_copy_panels(s, into, mt, ko, mt->stages, copy, (uint32_t)(copy % mt->stages));
    if (mt->warpgroup) {
        round_panels(s, into, mt, stage);
        warpgroup_product(s, into, mt, stage, last ? 0 : mt->left_running);
        return;
    }
    for (uint32_t sub = 0; sub < mt->step / MMA_K; sub++) {
        mma_fragments(s, into, NULL, mt, sub, stage);
        mma_products(s, into, mt);
    }
}

/* The pipeline's first copies: panels 0 … A − 1 into their stages, one phase each. */
static void mma_prologue(Sched *s, IrBlock *blk, MmaTile *mt, const Reduction *r) {
    int64_t panels = (int64_t)(part_steps(r, &mt->split) / mt->step);
    for (int64_t p = 0; p < copies_ahead(mt) && p < panels; p++) mma_copy_panels(s, blk, mt, UINT32_MAX, 0, p, (uint32_t)p);
}

/* The pipeline after its first copies (`copied`: issued already, before the cells' initial
 * values, which a reduction of one loop allows: its panels do not depend on an outer loop). */
static void mma_pipeline(Sched *s, IrBlock *blk, MmaTile *mt, const Reduction *r, bool copied) {
    blk = outer_reduction_loops(s, blk, r, &mt->split);
    int64_t panels = (int64_t)(part_steps(r, &mt->split) / mt->step), stages = mt->stages, ahead = copies_ahead(mt);
    if (!copied) mma_prologue(s, blk, mt, r);
    int64_t steady = panels - ahead, rounds = steady > 0 ? steady / stages : 0;
    if (rounds) {
        uint32_t ko = new_iter(s);
        IrStmt *l = new_loop(s, ko, (uint64_t)rounds, false, LOOP_PLAIN);
        ir_block_push(s->ir->arena, blk, l);
        for (int64_t u = 0; u < stages; u++) mma_turn(s, &l->body, mt, ko, (uint32_t)ahead - 1, u + ahead, (uint32_t)u, false);
    }
    for (int64_t kt = rounds * stages; kt < panels; kt++) {
        int64_t issued = kt + ahead < panels ? kt + ahead : panels;
        mma_turn(s, blk, mt, UINT32_MAX, (uint32_t)(issued - kt - 1), kt + ahead < panels ? kt + ahead : -1, (uint32_t)(kt % stages),
                 kt + 1 == panels);
    }
    if (r->nred > 1) push_barrier(s, blk);
}

/* ---- Rewrite 6t on sm_90a: warpgroups' wgmma ------------------------------------------------------- *
 *
 * For --arch=sm_90a (wgmma exists on sm_90a alone), a bf16 or f16 contraction whose panels are
 * copied asynchronously in panels of 32 steps (or a tf32 one over K-major panels, below) runs
 * on Hopper's warpgroup products instead, in panels of rows of 128 bytes along k (SWIZZLE_LINE:
 * 64 steps of halves, 32 of f32) where the reduction allows: the block's 4 warps are one
 * warpgroup (threads t = x + 4y + 32z, z the warp), its tile × tile f32 accumulators in the
 * threads' registers by wgmma's layout (ir.h IrWgmma: 128 a thread for a 128-wide tile, 32
 * for a 64-wide one), and each panel, in shared memory in PTX's swizzled layouts (mma_panel,
 * swizzled_copy_place: rows of 128 bytes, or along k of 64 for panels of 32 steps, whose
 * 16-byte units the swizzle moves so that the 8 rows a product reads at once lie on 8 groups
 * of banks), is multiplied by one IR_WGMMA: for a 128-wide tile and 64 steps, 2 halves of 64
 * rows × 4 steps of 16, 8 wgmma.mma_async.m64n128k16 reading A and B from shared memory,
 * where mma.sync would take 256 products and 64 ldmatrix.  Where J allows (plan_blocks' wide tiles, with no more parts of a
 * split reduction), the tile is 128 × 256 on two warpgroups (8 warps, z = 4·group + warp),
 * each its 64 rows by one wgmma.m64n256k16 a step of 16: per multiply-add the products read a
 * sixth less of shared memory (each instruction reads its A rows and all of B's columns) and
 * the copies move a quarter less from L2, and each thread still holds 128 accumulators (4
 * stages of 48 KiB for 64 steps).  A 64-row tile likewise widens to 64 × 256 on its one warpgroup (one
 * wgmma.m64n256k16 a step, where 64 × 64 took a m64n64k16 for a quarter of the columns: per
 * multiply-add 37 % less of shared memory read, and the same 128 accumulators a thread as
 * 128 × 128).  An operand along k
 * is K-major (A's usual, trans 0), one along the tile MN-major (trans 1).  The pipeline of
 * copies is the same (mma_pipeline), but over more than 2 panels each turn's products run on
 * while the next turn's barrier, copies and products are issued (wgmma.wait_group 1: the
 * tensor cores never wait for the threads), with WARPGROUP_STAGES stages and copies two
 * panels ahead so that the stage a copy overwrites was read by products already done; the
 * last turn awaits them all before the cells are stored. */
static bool warpgroup_fits(const Sched *s, const MmaTile *mt, const Contraction *ct, bool staged) {
    if (strcmp(s->target->cpu, "sm_90a") != 0 || (mt->in == DTYPE_F32 && !staged) || !mt->stages || (mt->tile != 128 && mt->tile != 64) ||
        mt->step != MMA_ASYNC_STEPS)
        return false;
    if (staged) return true; /* K-major copies, aligned (below) */
    /* Runs of a core matrix's row (8 cells) aligned along the tile as well (fetch_run's are 4). */
    bool a_k = mma_k_along(s->ir, ct->a, mt->k_iter, ct->i_loop->iter), b_k = mma_k_along(s->ir, ct->b, mt->k_iter, ct->j_loop->iter);
    return runs_aligned(s->ir, ct->a, a_k ? mt->k_iter : ct->i_loop->iter, core_row(mt)) &&
           runs_aligned(s->ir, ct->b, b_k ? mt->k_iter : ct->j_loop->iter, core_row(mt));
}

/* ---- Rewrite 6t on sm_90a: tf32's operands K-major --------------------------------------------------- *
 *
 * wgmma takes tf32 operands K-major alone (it transposes 16-bit cells only), and reads each f32
 * cell's bits as they are, so a panel must hold the rounded values.  On sm_90a an operand of a
 * --tf32 contraction that the warpgroups take and that is laid out along k already, its runs
 * of 4 cells aligned (reads_in_place: A of `i, k; k, j`, both of `i, k; j, k`), has its panels
 * copied from its own cells asynchronously as bf16's are, and each turn of the pipeline rounds
 * the stage's panel in shared memory once it has landed, before the products read it
 * (round_panels: a pass over 16 to 64 cells a thread and a barrier, while the previous turn's
 * products still run).  Any other operand is first copied, rounded to tf32, into a dense
 * K-major f32 buffer by a kernel of its own before the product's (a pointwise nest; for an
 * operand laid out along the tile, the transposing block kernel below):
 *     copy[other loops it walks, in the nest's order][m][k] = to_tf32(operand)
 * (m its place along the tile, k the innermost reduction step, contiguous), and the product
 * reads the copy: its runs are aligned and along k.  Either way the panels are rows of 32
 * steps (128 bytes) swizzled, multiplied by wgmma.mma_async.m64nNk8.f32.tf32.tf32, 8 steps an
 * instruction.  A copy costs a pass over its operand (8 bytes of memory traffic a cell; an
 * operand laid out along the tile is transposed on the way); the copies come from the
 * function's pool (ScratchPool, POOL_TURNS in turn, each as large as the largest copy that
 * takes it).  The rounding is the step's own (SOP_TO_TF32), applied once, where the copy is
 * made or in the panel, so the cells are the canonical nest's bits. */

/* Whether tf32's operand `load` needs no copy: laid out along k already, its runs of a core
 * matrix's row (4 cells, 16 bytes) aligned, so that its panels are copied from it
 * asynchronously as bf16's are and rounded in shared memory (above). */
static bool reads_in_place(const IrProgram *ir, const IrExpr *load, uint32_t k_iter, uint32_t tiled_iter) {
    return mma_k_along(ir, load, k_iter, tiled_iter) && runs_aligned(ir, load, k_iter, CORE_ROW_BYTES / 4);
}

/* The loops of r's nest that `load` walks, in the order of its copy's axes (above): the others
 * outermost first, then `m_loop`, then the innermost reduction loop; 0 where it is not to be
 * copied so (a symbol or a gathered index, an iterator of no loop of the nest, a run-time
 * extent). */
static uint32_t copy_axes(const Sched *s, const Reduction *r, const IrExpr *load, const IrStmt *m_loop, const IrStmt **axes) {
    const IrBuffer *b = &s->ir->buffers[load->buffer];
    const IrStmt *k_loop = r->red[r->nred - 1];
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *ix = &load->index[a];
        if (ix->symbol || ix->gather) return 0;
        for (uint32_t t = 0; t < ix->term_count; t++) {
            bool found = false;
            for (uint32_t l = 0; l < r->npar && !found; l++) found = r->par[l]->iter == ix->terms[t].iter;
            for (uint32_t l = 0; l < r->nred && !found; l++) found = r->red[l]->iter == ix->terms[t].iter;
            if (!found) return 0;
        }
    }
    uint32_t n = 0;
    for (uint32_t l = 0; l < r->npar + r->nred; l++) {
        const IrStmt *loop = l < r->npar ? r->par[l] : r->red[l - r->npar];
        if (loop != m_loop && loop != k_loop && mentions(s->ir, load->buffer, load->index, loop->iter)) axes[n++] = loop;
    }
    axes[n++] = m_loop;
    axes[n++] = k_loop;
    for (uint32_t d = 0; d < n; d++)
        if (size_is_runtime(axes[d]->extent)) return 0;
    return n;
}

/* A copy's block kernel for an operand laid out along the tile (its contiguous axis m's: B of
 * `i, k; k, j`), where a nest over [m][k] would read a cell a row, each warp 32 rows: a block
 * of TRANSPOSE_ROWS × TRANSPOSE_SIDE threads moves a TRANSPOSE_SIDE² tile through shared memory,
 * reading it along m and writing it along k, each warp one 128-byte line a pass:
 *     block (other axis o, m / 32, k / 32):
 *         threads (y < 8, x < 32):  for p < 4:  tile[y + 8p][x] = to_tf32(operand at k = 32·kb + y + 8p, m = 32·mb + x)
 *         barrier
 *         threads (y < 8, x < 32):  for p < 4:  copy[o][32·mb + y + 8p][32·kb + x] = tile[x][y + 8p]
 * The tile's rows of 33 cells put a warp's 32 reads of a column on 32 banks.  Needs m's and k's
 * extents multiples of 32 and at most one other axis (copy_transposes). */
enum { TRANSPOSE_SIDE = 32, TRANSPOSE_ROWS = 8, TRANSPOSE_PITCH = TRANSPOSE_SIDE + 1 };

static bool copy_transposes(const Sched *s, const IrExpr *load, const IrStmt **axes, uint32_t count) {
    const IrStmt *m = axes[count - 2], *k = axes[count - 1];
    return ir_flat_coef(s->ir, load->buffer, load->index, m->iter) == 1 && count <= 3 && m->extent % TRANSPOSE_SIDE == 0 &&
           k->extent % TRANSPOSE_SIDE == 0 && m->extent / TRANSPOSE_SIDE <= MAX_GRID_YZ && (count < 3 || axes[0]->extent <= MAX_GRID_YZ);
}

/* One phase of the transposing copy in `blk`: threads y < 8, x < 32 and passes p < 4; *at the
 * tile's cell [y + 8p][x]. */
static IrBlock *transpose_phase(Sched *s, IrBlock *blk, uint32_t *y, uint32_t *x, uint32_t *p) {
    *y = new_iter(s);
    *x = new_iter(s);
    IrStmt *ly = new_loop(s, *y, TRANSPOSE_ROWS, true, LOOP_THREAD_Y), *lx = new_loop(s, *x, TRANSPOSE_SIDE, true, LOOP_THREAD_X);
    ir_block_push(s->ir->arena, blk, ly);
    ir_block_push(s->ir->arena, &ly->body, lx);
    return &unrolled(s, &lx->body, p, TRANSPOSE_SIDE / TRANSPOSE_ROWS, true)->body;
}

static IrStmt *transposing_copy(Sched *s, const IrExpr *rounded, const IrStmt **axes, uint32_t count, const int64_t *stride, uint32_t copy) {
    const IrStmt *m = axes[count - 2], *k = axes[count - 1];
    Grid grid = {.count = count};
    uint32_t block[3];
    for (uint32_t d = 0; d < count; d++) { /* x: k's tiles, y: m's, z: the other axis */
        block[d] = grid.iter[d] = new_iter(s);
        grid.extent[d] = d == 0 ? k->extent / TRANSPOSE_SIDE : d == 1 ? m->extent / TRANSPOSE_SIDE : axes[0]->extent;
    }
    IrBlock *blk = NULL;
    IrStmt *top = grid_loops(s, &grid, &blk);
    uint32_t tile = new_scratch(s, "transpose", TRANSPOSE_SIDE * TRANSPOSE_PITCH, DTYPE_F32, true);
    s->ir->buffers[tile].gpu_shared = true;
    uint32_t y, x, p;
    /* Phase 1: the operand's cells along m into the tile's rows, rounded. */
    IrBlock *body = transpose_phase(s, blk, &y, &x, &p);
    IrTerm row[3] = {{y, TRANSPOSE_PITCH}, {p, TRANSPOSE_ROWS * TRANSPOSE_PITCH}, {x, 1}};
    reset_subst(s);
    map_iter(s, k->iter, (Affine){.terms = {{block[0], TRANSPOSE_SIDE}, {y, 1}, {p, TRANSPOSE_ROWS}}, .count = 3});
    map_iter(s, m->iter, (Affine){.terms = {{block[1], TRANSPOSE_SIDE}, {x, 1}}, .count = 2});
    if (count == 3) map_iter(s, axes[0]->iter, affine1(block[2], 1, 0));
    ir_block_push(s->ir->arena, body, new_store(s, tile, flat_index(s, row, 3), clone_expr(s, rounded, NULL)));
    push_barrier(s, blk);
    /* Phase 2: the tile's columns along k into the copy. */
    body = transpose_phase(s, blk, &y, &x, &p);
    IrTerm column[3] = {{x, TRANSPOSE_PITCH}, {y, 1}, {p, TRANSPOSE_ROWS}};
    IrTerm at[6] = {{block[0], TRANSPOSE_SIDE}, {x, 1}, {block[1], TRANSPOSE_SIDE * stride[count - 2]}, {y, stride[count - 2]},
                    {p, TRANSPOSE_ROWS * stride[count - 2]}, {count == 3 ? block[2] : y, count == 3 ? stride[0] : 0}};
    ir_block_push(s->ir->arena, body, new_store(s, copy, flat_index(s, at, count == 3 ? 6 : 5), new_load(s, tile, flat_index(s, column, 3))));
    return top;
}

/* What a copy over `axes` of operand `load` holds, as text: the operand's buffer, each axis of
 * its index with its terms named by their places among the axes, and the axes' extents (two
 * products' copies with the same key hold the same cells while the operand is unchanged). */
static const char *copy_key(Sched *s, const IrExpr *load, const IrStmt **axes, uint32_t count) {
    Arena *arena = s->ir->arena;
    const char *key = arena_printf(arena, "%u", load->buffer);
    for (uint32_t d = 0; d < count; d++) key = arena_printf(arena, "%s,%llu", key, (unsigned long long)axes[d]->extent);
    for (uint32_t a = 0; a < s->ir->buffers[load->buffer].rank; a++) {
        const IrIndex *ix = &load->index[a];
        key = arena_printf(arena, "%s|%lld", key, (long long)ix->offset);
        for (uint32_t t = 0; t < ix->term_count; t++) {
            uint32_t d = 0;
            while (d < count && axes[d]->iter != ix->terms[t].iter) d++;
            key = arena_printf(arena, "%s+%u*%lld", key, d, (long long)ix->terms[t].coef);
        }
    }
    return key;
}

/* The copy with this key made earlier in the function whose operand and buffer nothing since
 * has written (the last made with the key; an older one is older still); NULL if none. */
static const Tf32Copy *copy_made(const Sched *s, const char *key, const IrBlock *out) {
    for (uint32_t i = s->tf32_made_count; i-- > 0;) {
        const Tf32Copy *c = &s->tf32_made[i];
        if (strcmp(c->key, key) != 0) continue;
        for (uint32_t j = c->at + 1; j < out->count; j++)
            if (ir_stmt_writes(s->ir, out->items[j], c->source) || ir_stmt_writes(s->ir, out->items[j], c->copy)) return NULL;
        return c;
    }
    return NULL;
}

/* Into `out`: the nest (or, for an operand along the tile, the block kernel above) that copies
 * `rounded` (the step's tf32 rounding of operand `load`) into a dense buffer of the pool over
 * `axes` (copy_axes), k contiguous — or nothing, where an earlier product's copy holds the same
 * cells still (copy_made: the q, k and v projections of one input read one copy).  Returns the
 * load of the copy that replaces the operand's in the product (in the nest's own iterators). */
static IrExpr *copy_k_major(Sched *s, const IrExpr *load, const IrExpr *rounded, const IrStmt **axes, uint32_t count, IrBlock *out) {
    int64_t stride[MAX_LOOPS], cells = 1;
    for (uint32_t d = count; d-- > 0;) {
        stride[d] = cells;
        cells *= (int64_t)axes[d]->extent;
    }
    IrTerm old[MAX_LOOPS];
    for (uint32_t d = 0; d < count; d++) old[d] = (IrTerm){axes[d]->iter, stride[d]};
    const char *key = copy_key(s, load, axes, count);
    const Tf32Copy *made = copy_made(s, key, out);
    if (made) return new_load(s, made->copy, flat_index(s, old, count));
    uint32_t copy = pool_take(s, &s->tf32_copies, "tf32_k_major", (uint64_t)cells);
    const char *name = s->ir->buffers[load->buffer].name;
    IrStmt *top = NULL;
    if (copy_transposes(s, load, axes, count)) {
        top = transposing_copy(s, rounded, axes, count, stride, copy);
        top->comment = arena_printf(s->ir->arena, "schedule: %s rounded to tf32 and copied K-major for the warpgroups' products, "
                                    "transposed through shared memory in tiles of %ux%u", name, (unsigned)TRANSPOSE_SIDE, (unsigned)TRANSPOSE_SIDE);
    } else {
        IrTerm at[MAX_LOOPS];
        IrBlock *into = NULL;
        reset_subst(s);
        for (uint32_t d = 0; d < count; d++) {
            uint32_t it = new_iter(s);
            nest_push(s, &top, &into, new_loop(s, it, axes[d]->extent, true, LOOP_PLAIN));
            map_iter(s, axes[d]->iter, affine1(it, 1, 0));
            at[d] = (IrTerm){it, stride[d]};
        }
        ir_block_push(s->ir->arena, into, new_store(s, copy, flat_index(s, at, count), clone_expr(s, rounded, NULL)));
        top->comment = arena_printf(s->ir->arena, "schedule: %s rounded to tf32 and copied K-major for the warpgroups' products", name);
    }
    ir_block_push(s->ir->arena, out, top);
    Tf32Copy made_now = {.key = key, .copy = copy, .source = load->buffer, .at = out->count - 1};
    ARENA_PUSH(s->ir->arena, s->tf32_made, s->tf32_made_count, s->tf32_made_cap, made_now);
    return new_load(s, copy, flat_index(s, old, count));
}

/* The tile's J extent, block loops and split from `plan`, and the panels of a block's part of r. */
static void take_plan(MmaTile *mt, const BlockPlan *plan, const Reduction *r) {
    mt->tile_j = plan->tile_j, mt->bi = plan->bi, mt->bj = plan->bj, mt->split = plan->split;
    mt->panels = part_steps(r, &plan->split) / mt->step;
}

/* The tile and plan of contraction ct on the tensor cores: asynchronous panels of MMA_ASYNC_STEPS
 * steps where both operands' runs are aligned (`async`; `staged`: tf32's K-major copies, whose
 * runs are) else panels through registers of MMA_PANEL_BYTES (tf32's that round their values);
 * then warpgroups where they fit.  False where no plan fits. */
static bool choose_tile(Sched *s, const Reduction *r, const Contraction *ct, DType in, bool async_first, bool staged, MmaTile *mt,
                        BlockPlan *plan) {
    for (int async = async_first; async >= 0; async--) {
        uint32_t step = async ? MMA_ASYNC_STEPS : MMA_PANEL_BYTES / ir_dtype_bytes(in);
        while (step >= MMA_K && !plan_blocks(s, r, ct, step, false, plan)) step /= 2;
        if (step < MMA_K) return false;
        *mt = (MmaTile){.ct = ct, .in = in, .tile = plan->tile, .mt = plan->tile / MMA_WARPS_I / 16, .nt = plan->tile / MMA_WARPS_J / 8,
                        .step = step, .fetches = plan->tile * step / (32 * MMA_WARPS), .k_iter = r->red[r->nred - 1]->iter};
        take_plan(mt, plan, r);
        if (!async) break;
        Panel pa = {.k_along_x = mma_k_along(s->ir, ct->a, mt->k_iter, ct->i_loop->iter), .tile = plan->tile};
        Panel pb = {.k_along_x = mma_k_along(s->ir, ct->b, mt->k_iter, ct->j_loop->iter), .tile = plan->tile};
        if (staged || (runs_aligned(s->ir, ct->a, pa.k_along_x ? mt->k_iter : ct->i_loop->iter, fetch_run(mt, &pa)) &&
                       runs_aligned(s->ir, ct->b, pb.k_along_x ? mt->k_iter : ct->j_loop->iter, fetch_run(mt, &pb)))) {
            mt->stages = mt->panels < MMA_STAGES ? 2 : MMA_STAGES;
            break;
        }
    }
    mt->warpgroup = warpgroup_fits(s, mt, ct, staged);
    if (mt->warpgroup) {
        /* A wide tile where J allows it (a warpgroup for each 64 rows), else the tile above, of
         * the same rows and needing no more parts of a split reduction; panels of rows of 128
         * bytes along k where the reduction allows (64 steps of halves, 32 of f32), else of
         * the steps above (which the tile above takes). */
        const BlockPlan narrow = *plan;
        const uint32_t steps[2] = {SWIZZLE_LINE / ir_dtype_bytes(in), mt->step};
        bool found = false;
        for (int wide = 1; wide >= 0 && !found; wide--)
            for (int k = 0; k < 2 && !found; k++) {
                BlockPlan p;
                if (!plan_blocks(s, r, ct, steps[k], wide, &p) || p.tile != mt->tile || p.split.parts > narrow.split.parts) continue;
                found = true;
                *plan = p;
                mt->step = steps[k];
                mt->warpgroups = wide ? p.tile / WARPGROUP_ROWS : 1;
            }
        take_plan(mt, plan, r);
        mt->left_running = mt->panels > 2;
        mt->stages = mt->left_running ? WARPGROUP_STAGES : 2;
    }
    return true;
}

bool gpu_mma_tiles(Sched *s, Reduction *r, IrBlock *out) {
    Contraction ct;
    Reduction bare;
    IrStmt bare_step;
    IrExpr bare_value;
    bool tf32 = tf32_step(s->ir, r, &bare, &bare_step, &bare_value);
    DType in;
    BlockPlan plan;
    if (!find_contraction(s->ir, tf32 ? &bare : r, &ct, false, 0) || !mma_type(s, &ct, r, tf32, &in)) return false;
    /* tf32 on sm_90a: the warpgroups over K-major panels (its operands in place or copied) where they fit (above), else mma.sync. */
    const IrStmt *a_axes[MAX_LOOPS], *b_axes[MAX_LOOPS];
    uint32_t a_count = 0, b_count = 0, k_iter = r->red[r->nred - 1]->iter;
    bool sm_90a = tf32 && strcmp(s->target->cpu, "sm_90a") == 0;
    bool a_in_place = sm_90a && reads_in_place(s->ir, ct.a, k_iter, ct.i_loop->iter),
         b_in_place = sm_90a && reads_in_place(s->ir, ct.b, k_iter, ct.j_loop->iter);
    bool staged = sm_90a && r->npar + r->nred <= MAX_LOOPS && (a_in_place || (a_count = copy_axes(s, r, ct.a, ct.i_loop, a_axes))) &&
                  (b_in_place || (b_count = copy_axes(s, r, ct.b, ct.j_loop, b_axes)));
    MmaTile mt;
    bool planned = choose_tile(s, r, &ct, in, !tf32 || staged, staged, &mt, &plan);
    if (staged && (!planned || !mt.warpgroup)) {
        staged = false;
        planned = choose_tile(s, r, &ct, in, !tf32, false, &mt, &plan);
    }
    if (!planned) return false;
    const IrExpr *a_value = panel_value(r, ct.a, tf32), *b_value = panel_value(r, ct.b, tf32);
    if (staged) { /* the panels copy the operands' own cells (rounded in shared memory) or their rounded K-major copies */
        a_value = ct.a = a_in_place ? ct.a : copy_k_major(s, ct.a, a_value, a_axes, a_count, out);
        b_value = ct.b = b_in_place ? ct.b : copy_k_major(s, ct.b, b_value, b_axes, b_count, out);
    }
    uint32_t tile = mt.tile, step = mt.step;
    mt.a = mma_panel(s, &mt, ct.a, a_value, ct.i_loop->iter, mt.bi, mt.tile, "a_panel");
    mt.b = mma_panel(s, &mt, ct.b, b_value, ct.j_loop->iter, mt.bj, mt.tile_j, "b_panel");
    mt.a.rounds_in_shared = staged && a_in_place;
    mt.b.rounds_in_shared = staged && b_in_place;
    if (!mt.warpgroup) {
        mt.afrag = thread_registers(s, &mt, "a_fragment", 8 * mt.mt, in);
        mt.bfrag = thread_registers(s, &mt, "b_fragment", 4 * mt.nt, in);
    }
    mt.cells = thread_registers(s, &mt, "c_fragment", mt.tile * mt.tile_j / block_threads(&mt), DTYPE_F32);

    IrBlock *blk = NULL;
    IrStmt *top = grid_loops(s, &plan.grid, &blk);
    IrIndex *cell;
    /* The first copies (where they may go first: they land while the threads set their cells'
     * initial values), every cell's initial value, the reduction, the cells stored. */
    bool copied_first = mt.stages && r->nred == 1;
    if (copied_first) mma_prologue(s, blk, &mt, r);
    IrBlock *threads = mma_threads(s, blk, &mt);
    IrBlock *body = mma_cells(s, threads, &mt, mt.th, &cell);
    ir_block_push(s->ir->arena, body, new_store(s, mt.cells, cell, block_cell_start(s, r, &mt.split)));
    if (mt.stages) mma_pipeline(s, blk, &mt, r, copied_first);
    else
        k_loop(s, blk, &(KLoop){.r = r, .step = step, .split = &mt.split, .tile = &mt,
                                .threads = mma_threads, .fetch = mma_fetch_panels, .spill = mma_spill_panels, .compute = mma_step});
    threads = mma_threads(s, blk, &mt);
    body = mma_cells(s, threads, &mt, mt.th, &cell);
    ir_block_push(s->ir->arena, body, block_cell_store(s, r, &mt.split, new_load(s, mt.cells, cell)));

    const char *pipeline = mt.stages ? arena_printf(s->ir->arena, " copied asynchronously, %u in shared memory", mt.panels > 1 ? mt.stages : 1) : "";
    const char *schedule =
        mt.warpgroup
            ? arena_printf(s->ir->arena, "%ux%u cells a GPU block on the tensor cores (wgmma.m64n%uk%u.%s%s), %s, panels of %u steps%s%s",
                           tile, mt.tile_j, mt.tile_j, ir_wgmma_k(in), in == DTYPE_F32 ? "tf32" : ir_dtype_word(in),
                           !staged ? ""
                           : arena_printf(s->ir->arena, ", A %s, B %s", a_in_place ? "rounded in shared memory" : "copied K-major",
                                          b_in_place ? "rounded in shared memory" : "copied K-major"),
                           mt.warpgroups > 1 ? arena_printf(s->ir->arena, "%u warpgroups of %ux%u", mt.warpgroups, tile / mt.warpgroups, mt.tile_j)
                                             : "one warpgroup",
                           step, pipeline, mt.left_running ? ", each panel's products running on into the next turn" : "")
            : arena_printf(s->ir->arena, "%ux%u cells a GPU block on the tensor cores (mma.m16n8k%u.%s), %u warps of %ux%u, panels of %u steps%s",
                           tile, tile, ir_mma_k(in), in == DTYPE_F32 ? "tf32" : ir_dtype_word(in), MMA_WARPS, tile / MMA_WARPS_I,
                           tile / MMA_WARPS_J, step, pipeline);
    push_block_kernel(s, r, top, &mt.split, arena_printf(s->ir->arena, "%s%s", schedule, group_tile_rows(s, &plan, top)), out);
    return true;
}
