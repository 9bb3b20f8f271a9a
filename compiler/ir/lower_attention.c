/* lower_attention.c — the nests of softmax attention (attention.h, docs/ir.md §3.1).
 *
 * What it does: for `o =: attention q k v` (an operator's forward block, stdlib/core.tsr
 * `attend`) emits a nest whose parallel loops are the ROW iterators.  For each row it fills a
 * kernel-local tile with the row's scores, one per key — sc = (Σ_SCORE fma(q, k)) / √d, causal:
 * -1e30 where the key position s > t — with the SCORE loops outside the key loops, over a copy of
 * k whose keys are innermost (pack_operand), so that the keys' sums run side by side in vector
 * lanes while each keeps d's order; then the maximum m, the weights exp(sc − m) in the tile, their
 * sum l in key order, and a tile of the row's output Σ_s w_s·v[s, e], divided by l when stored.
 * It stores m + log l per row (the row statistics, `stats`).  So no buffer of rows × keys exists,
 * whatever the sequence's length.  On the CPU, each run of a nest handles ROW_BLOCK rows
 * (block_rows: query positions in the forward and dq, keys in dk and dv), its tiles one per row,
 * so that each load of k, v, q or dO serves them all, and causal attention's kernels are a nest
 * per chunk of positions that skips the products of masked pairs (causal_parts).  The gradients
 * (each operand its own kernel, `g1 =+ attention_dq v1 v2 v3 v g` …) recompute each weight as
 * p = exp(sc − stats[row]), and with D[row] = Σ_e dO·o and dp = Σ_e dO·v[s, e] (a tile, as the
 * scores):
 *     dq[row, d] += Σ_s (p·(dp − D) / √d) · k[s, d]     (per row, a tile over the keys)
 *     dk[s, d]   += Σ_t (p·(dp − D) / √d) · q[t, d]     (per key, a tile over the query rows; D
 *                                                          first, in a nest of its own)
 *     dv[s, e]   += Σ_t p · dO[t, e]                     (per key, the same)
 * each gradient's row summed in a tile and added to its cells once (`=+`); its parallel loops are
 * the iterators its own index mentions, the other rows run in order inside them.  Every sum runs
 * in the order of its loops, so the reference executor and native code agree bit for bit; the
 * schedule leaves these nests as they are (they are none of its canonical forms).  With dropout
 * (Assignment.dropout) the weights that weigh v in the forward, dp in dq and dk, and p in dv pass
 * through where(u < rate, 0, x / (1 − rate)), u the random number of the (row, key) cell of the
 * virtual buffer `drop_cells`, drawn again by each kernel (dropped).
 *
 * Requires: an assignment built by assign.c (kernel, stats, positions, scratch set; operands in
 * `reads` as written: q, k, v, and for a gradient o and dO), roles that attention_roles accepts,
 * compile-time sizes. */
#include "ir/attention.h"

#include <math.h>
#include <string.h>

#include "infer/proj.h"

/* ---- Roles --------------------------------------------------------------------------------------- */

enum { IN_RESULT = 1, IN_Q = 2, IN_K = 4, IN_V = 8 };

/* Which slots' maps mention each iterator (IN_* bits), into mask[0 … iter_count); false when a
 * map has an axis that is neither an iterator nor a fixed position. */
static bool slot_masks(const Projections *p, uint8_t *mask) {
    memset(mask, 0, p->iter_count ? p->iter_count : 1);
    for (uint32_t s = 0; s < 4; s++)
        for (uint32_t ax = 0; ax < p->rank[s]; ax++) {
            const ProjIndex *pi = &p->maps[s][ax];
            if (pi->kind == PIDX_ITER) mask[pi->iter] |= (uint8_t)(1u << s);
            else if (pi->kind != PIDX_FIXED) return false;
        }
    return true;
}

bool attention_roles(Arena *arena, const Projections *p, bool causal, uint8_t *roles, const char **why) {
    if (p->slot_count != 4 && p->slot_count != 5) {
        *why = "attention takes three operands, q, k and v (and with dropout the rate)";
        return false;
    }
    for (uint32_t ax = 0; p->slot_count == 5 && ax < p->rank[4]; ax++)
        if (p->maps[4][ax].kind != PIDX_FIXED) {
            *why = "dropout's rate is one number: its part of the spec holds fixed positions only (`0`)";
            return false;
        }
    uint8_t *mask = arena_alloc(arena, p->iter_count ? p->iter_count : 1);
    if (!slot_masks(p, mask)) {
        *why = "attention's spec labels plain axes (no strides, windows, concatenations or gathers)";
        return false;
    }
    for (uint32_t i = 0; i < p->iter_count; i++) {
        uint8_t m = mask[i];
        if (size_is_runtime(p->iter_size[i])) {
            *why = "attention needs sizes known when compiling (a run-time size '?' reaches it)";
            return false;
        }
        if ((m & IN_RESULT) && (m & (IN_Q | IN_K))) roles[i] = ROLE_ROW;
        else if (m == (IN_RESULT | IN_V)) roles[i] = ROLE_VALUE;
        else if (m == (IN_Q | IN_K)) roles[i] = ROLE_SCORE;
        else if (m == (IN_K | IN_V)) roles[i] = ROLE_KEY;
        else {
            static const char *const names[4] = {"the result", "q", "k", "v"};
            const char *where = "";
            for (uint32_t s = 0, n = 0; s < 4; s++)
                if (m & (1u << s)) where = arena_printf(arena, "%s%s%s", where, n++ ? " and " : "", names[s]);
            *why = arena_printf(arena, "an axis of %llu positions is in %s only, which gives it no role: each label "
                                "of attention's spec is in the result and q (a row: batch, head, query position), in "
                                "q and k only (summed into the scores), in k and v only (the keys the softmax runs "
                                "over), or in the result and v only (the value features)",
                                (unsigned long long)p->iter_size[i], where);
            return false;
        }
    }
    if (causal) {
        uint32_t queries = 0, keys = 0;
        for (uint32_t i = 0; i < p->iter_count; i++) {
            queries += roles[i] == ROLE_ROW && mask[i] == (IN_RESULT | IN_Q);
            keys += roles[i] == ROLE_KEY;
        }
        if (queries > 1 || keys > 1) {
            *why = "causal attention compares one query position with one key position: its spec has at most "
                   "one axis in the result and q only and one in k and v only";
            return false;
        }
    }
    return true;
}

void attention_positions(const Projections *p, const uint8_t *roles, uint32_t *query, uint32_t *key) {
    *query = *key = UINT32_MAX;
    for (uint32_t s = 0; s < 4; s++)
        for (uint32_t ax = 0; ax < p->rank[s]; ax++) {
            const ProjIndex *pi = &p->maps[s][ax];
            if (pi->kind != PIDX_ITER) continue;
            bool in_k = false, in_v = false;
            for (uint32_t t = 2; t < 4; t++)
                for (uint32_t bx = 0; bx < p->rank[t]; bx++)
                    if (p->maps[t][bx].kind == PIDX_ITER && p->maps[t][bx].iter == pi->iter) *(t == 2 ? &in_k : &in_v) = true;
            if (s == 1 && roles[pi->iter] == ROLE_ROW && !in_k && !in_v) *query = pi->iter;
            if (roles[pi->iter] == ROLE_KEY) *key = pi->iter;
        }
}

static uint32_t add_iters(const Projections *p, const uint8_t *roles, uint32_t slot, AttentionRole role,
                          uint32_t its[16], uint32_t n) {
    for (uint32_t ax = 0; ax < p->rank[slot]; ax++) {
        const ProjIndex *pi = &p->maps[slot][ax];
        if (pi->kind != PIDX_ITER || roles[pi->iter] != role) continue;
        bool seen = false;
        for (uint32_t i = 0; i < n; i++) seen |= its[i] == pi->iter;
        if (!seen && n < 16) its[n++] = pi->iter;
    }
    return n;
}

uint32_t attention_drop_iters(const Projections *p, const uint8_t *roles, uint32_t its[16]) {
    return add_iters(p, roles, 2, ROLE_KEY, its, add_iters(p, roles, 0, ROLE_ROW, its, 0));
}

/* ---- Building the nests -------------------------------------------------------------------------- */

/* A list of product iterators: those of one role, in the order of one slot's axes. */
typedef struct Iters {
    uint32_t it[16];
    uint32_t n;
} Iters;

/* A row tile: one number per point of `its` (a row of scores, one per key, or a column, one per
 * query row), private to each run of the kernel, so that the dot products of a row run side by
 * side instead of one long chain after another. */
typedef struct Tile {
    uint32_t buffer;
    Iters its;
    bool laned; /* a leading axis of A->lanes cells, indexed by A->lane (row blocking) */
} Tile;

typedef struct Attn {
    IrProgram *ir;
    IrFunction *fn;
    const Assignment *a;
    const Projections *p;
    const uint8_t *roles;
    uint32_t base;     /* the function's iterator for product iterator 0 */
    DType type;        /* the compute type (f32 or f64) */
    double divisor;    /* √ of the cells the scores sum over */
    uint32_t query, key; /* causal: the position iterators (attention_positions) */
    /* Row blocking (block_rows): the nest being built handles `lanes` consecutive points of the
     * product iterator `blocked` in each run, the function's iterator `outer` counting blocks and
     * `lane` the point within one; every tile gets a leading axis of `lanes` cells. */
    uint32_t blocked, lanes, outer, lane;
    /* The positions of each product iterator that the nest being built covers: from[it] to
     * from[it] + count[it] (causal_parts narrows them; `whole` is every position of every axis,
     * for the nests that are not split). */
    uint64_t *from, *count, *whole_from, *whole_count;
    /* Each operand's copy with a tile's axes innermost (pack_operand), made once per kernel. */
    Tile packed[5];
    bool is_packed[5];
} Attn;


static IrExpr *expr(Attn *A, IrExprKind kind) {
    IrExpr *e = arena_alloc(A->ir->arena, sizeof *e);
    e->kind = kind;
    e->type = A->type;
    return e;
}

static IrExpr *number(Attn *A, double v) {
    IrExpr *e = expr(A, IR_CONST);
    e->value = A->type == DTYPE_F32 ? (double)(float)v : v;
    return e;
}

static IrExpr *op(Attn *A, ScalarOp o, IrExpr *x, IrExpr *y, IrExpr *z) {
    IrExpr *e = expr(A, IR_OP);
    e->op = o;
    e->args[0] = x;
    e->args[1] = y;
    e->args[2] = z;
    return e;
}

static IrExpr *local(Attn *A, uint32_t l) {
    IrExpr *e = expr(A, IR_LOCAL);
    e->local = l;
    return e;
}

/* The position of product iterator `it`: its function iterator, or lanes·outer + lane for the
 * blocked one, plus the first position the nest covers. */
static IrIndex *iterator_index(Attn *A, IrIndex *ix, uint32_t it) {
    bool blocked = it == A->blocked && A->lanes > 1;
    ix->terms = arena_alloc(A->ir->arena, (blocked ? 2 : 1) * sizeof *ix->terms);
    ix->terms[0] = (IrTerm){A->base + it, 1};
    ix->term_count = 1;
    ix->offset = (int64_t)A->from[it];
    if (blocked) {
        ix->terms[0] = (IrTerm){A->outer, A->lanes};
        ix->terms[1] = (IrTerm){A->lane, 1};
        ix->term_count = 2;
    }
    return ix;
}

/* The index of a buffer addressed through slot `slot`'s map, leaving out the axes of the VALUE
 * iterators when `rows_only` (the row statistics: one number per row). */
static IrIndex *slot_index(Attn *A, uint32_t slot, bool rows_only) {
    const Projections *p = A->p;
    IrIndex *ix = arena_alloc(A->ir->arena, (p->rank[slot] ? p->rank[slot] : 1) * sizeof *ix);
    uint32_t n = 0;
    for (uint32_t ax = 0; ax < p->rank[slot]; ax++) {
        const ProjIndex *pi = &p->maps[slot][ax];
        if (pi->kind == PIDX_ITER && rows_only && A->roles[pi->iter] == ROLE_VALUE) continue;
        if (pi->kind == PIDX_ITER) iterator_index(A, &ix[n], pi->iter);
        else ix[n].offset = pi->fixed;
        n++;
    }
    return ix;
}

static IrExpr *load(Attn *A, uint32_t buffer, IrIndex *index) {
    IrExpr *e = expr(A, IR_LOAD);
    e->buffer = buffer;
    e->index = index;
    return e;
}

/* Operand `read` of the kernel (q, k, v, o, dO in that order) at its slot's index. */
static IrExpr *operand(Attn *A, uint32_t read) {
    const Access *acc = &A->a->reads[read];
    return load(A, acc->buffer, slot_index(A, acc->slot, false));
}

static IrExpr *row_stat(Attn *A, uint32_t buffer) { return load(A, buffer, slot_index(A, 0, true)); }

static IrStmt *statement(Attn *A, IrStmtKind kind) {
    IrStmt *s = arena_alloc(A->ir->arena, sizeof *s);
    s->kind = kind;
    return s;
}

static void push(Attn *A, IrBlock *into, IrStmt *s) { ir_block_push(A->ir->arena, into, s); }

static uint32_t set_new(Attn *A, IrBlock *into, IrExpr *value) {
    IrStmt *s = statement(A, IR_SET_LOCAL);
    s->local = A->fn->local_count++;
    s->value = value;
    push(A, into, s);
    return s->local;
}

static void set(Attn *A, IrBlock *into, uint32_t l, IrExpr *value) {
    IrStmt *s = statement(A, IR_SET_LOCAL);
    s->local = l;
    s->value = value;
    push(A, into, s);
}

static void store(Attn *A, IrBlock *into, uint32_t buffer, IrIndex *index, IrExpr *value) {
    IrStmt *s = statement(A, IR_STORE);
    s->buffer = buffer;
    s->index = index;
    s->value = value;
    push(A, into, s);
}

/* Whether product iterator `it` is among the iterators of slot `slot`'s map. */
static bool mentions(const Projections *p, uint32_t slot, uint32_t it) {
    for (uint32_t ax = 0; ax < p->rank[slot]; ax++)
        if (p->maps[slot][ax].kind == PIDX_ITER && p->maps[slot][ax].iter == it) return true;
    return false;
}

/* The iterators of role `role`, in the order of slot `order`'s axes (then any others); with
 * `slot` < 4, only those slot `slot`'s map mentions (`mentioned`) or does not. */
static Iters role_iters(Attn *A, AttentionRole role, uint32_t order, uint32_t slot, bool mentioned) {
    const Projections *p = A->p;
    Iters out = {0};
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < (pass == 0 ? p->rank[order] : p->iter_count); k++) {
            uint32_t it = k;
            if (pass == 0) {
                if (p->maps[order][k].kind != PIDX_ITER) continue;
                it = p->maps[order][k].iter;
            }
            bool seen = false;
            for (uint32_t i = 0; i < out.n; i++) seen |= out.it[i] == it;
            if (seen || A->roles[it] != role || (slot < 4 && mentions(p, slot, it) != mentioned)) continue;
            if (out.n < 16) out.it[out.n++] = it;
        }
    return out;
}

/* Loops over `its`, one inside the other, into `into`; returns the innermost body.  The first
 * loop made, if any, goes to *first when that is still NULL (the nest's comment). */
static IrBlock *open_loops(Attn *A, IrBlock *into, Iters its, bool parallel, IrStmt **first) {
    for (uint32_t i = 0; i < its.n; i++) {
        IrStmt *lp = statement(A, IR_LOOP);
        lp->iter = A->base + its.it[i];
        lp->extent = A->count[its.it[i]];
        if (its.it[i] == A->blocked && A->lanes > 1) { /* the blocks; the lanes are loops of their own */
            lp->iter = A->outer;
            lp->extent /= A->lanes;
        }
        lp->parallel = parallel;
        push(A, into, lp);
        if (first && !*first) *first = lp;
        into = &lp->body;
    }
    return into;
}

static void comment(IrStmt *first, const char *text) {
    if (first) first->comment = text;
}

/* The kernel's main nest, built apart so that the packing nests it asks for go before it. */
static void append(Attn *A, IrBlock *nest) {
    for (uint32_t i = 0; i < nest->count; i++) push(A, &A->fn->body, nest->items[i]);
}

/* The parallel loops of a kernel's nest over `its`, the longest outermost; with none (every row
 * axis of one position),
 * one loop of one iteration over an iterator of its own, so that the nest is one kernel whose
 * tiles and locals are its own (kernel.h). */
static uint64_t loop_extent(Attn *A, uint32_t it) {
    return A->count[it] / (it == A->blocked && A->lanes > 1 ? A->lanes : 1);
}

static IrBlock *open_nest(Attn *A, IrBlock *into, Iters its, IrStmt **first) {
    if (its.n) { /* the longest outermost: the thread pool splits the outermost loop (kernel.h) */
        uint32_t longest = 0;
        for (uint32_t i = 1; i < its.n; i++)
            if (loop_extent(A, its.it[i]) > loop_extent(A, its.it[longest])) longest = i;
        uint32_t it = its.it[longest];
        memmove(&its.it[1], &its.it[0], longest * sizeof its.it[0]);
        its.it[0] = it;
        return open_loops(A, into, its, true, first);
    }
    IrStmt *lp = statement(A, IR_LOOP);
    lp->iter = A->fn->iter_count++;
    lp->extent = 1;
    lp->parallel = true;
    push(A, into, lp);
    if (first && !*first) *first = lp;
    return &lp->body;
}

static Iters joined(Iters a, Iters b) {
    for (uint32_t i = 0; i < b.n && a.n < 16; i++) a.it[a.n++] = b.it[i];
    return a;
}


/* A scratch buffer with one axis per iterator of `its` (their extents), named `name` and a number. */
static Tile scratch_over(Attn *A, Iters its, bool laned, bool kernel_local, const char *name) {
    IrProgram *ir = A->ir;
    IrBuffer b = {.id = ir->buffer_count, .kind = BUF_SCRATCH, .dtype = A->type, .rank = its.n + laned, .size = 1,
                  .init = INIT_NONE, .kernel_local = kernel_local};
    b.dims = arena_alloc(ir->arena, (b.rank ? b.rank : 1) * sizeof *b.dims);
    char *shape = "";
    for (uint32_t i = 0; i < b.rank; i++) {
        b.dims[i] = laned && i == 0 ? A->lanes : A->p->iter_size[its.it[i - laned]];
        b.size *= b.dims[i];
        shape = arena_printf(ir->arena, "%s%s%llu", shape, i ? "," : "", (unsigned long long)b.dims[i]);
    }
    b.shape_text = shape;
    b.name = arena_printf(ir->arena, "%s%u", name, ir->buffer_count);
    ARENA_PUSH(ir->arena, ir->buffers, ir->buffer_count, ir->buffer_cap, b);
    return (Tile){b.id, its, laned};
}

static Tile new_tile(Attn *A, Iters its, const char *what) {
    return scratch_over(A, its, A->lanes > 1, true,
                        arena_printf(A->ir->arena, "%s#%s", A->ir->buffers[A->a->lhs.buffer].name, what));
}

static IrIndex *tile_index(Attn *A, Tile t) {
    IrIndex *ix = arena_alloc(A->ir->arena, (t.its.n + t.laned ? t.its.n + t.laned : 1) * sizeof *ix);
    if (t.laned) {
        ix[0].terms = arena_alloc(A->ir->arena, sizeof *ix[0].terms);
        ix[0].terms[0] = (IrTerm){A->lane, 1};
        ix[0].term_count = 1;
    }
    for (uint32_t i = 0; i < t.its.n; i++) iterator_index(A, &ix[t.laned + i], t.its.it[i]);
    return ix;
}

/* A loop over the lanes of a blocked nest, into `into`; returns its body (`into` itself when the
 * nest is not blocked). */
static IrBlock *lanes_loop(Attn *A, IrBlock *into) {
    if (A->lanes <= 1) return into;
    IrStmt *lp = statement(A, IR_LOOP);
    lp->iter = A->lane;
    lp->extent = A->lanes;
    push(A, into, lp);
    return &lp->body;
}

static IrExpr *tile_cell(Attn *A, Tile t) { return load(A, t.buffer, tile_index(A, t)); }

/* The position of iterator `it` as a number (a causal mask's operand): positions[it], or 0. */
static IrExpr *position(Attn *A, uint32_t it) {
    if (it == UINT32_MAX) return number(A, 0);
    return load(A, A->a->positions, iterator_index(A, arena_alloc(A->ir->arena, sizeof(IrIndex)), it));
}

/* The cells of the packed copy's last axis that one step of its copy writes (a cache line). */
enum { PACK_BLOCK = 16 };

/* Operand `read` copied so that the tile's iterators are its innermost axes (stride 1): a
 * scratch buffer over the other iterators of its map (in its axis order) and then the tile's,
 * filled by a nest of its own before the kernel's; its index, at the iterators in scope where it
 * is read, goes to *index.  So the tile's dot products load whole vectors of it. */
static uint32_t pack_operand(Attn *A, uint32_t read, Tile t, IrIndex **index) {
    IrProgram *ir = A->ir;
    const Access *acc = &A->a->reads[read];
    if (A->is_packed[read]) { /* an earlier part of the kernel made it */
        *index = tile_index(A, A->packed[read]);
        return A->packed[read].buffer;
    }
    Iters its = {0};
    for (uint32_t pass = 0; pass < 2; pass++) {
        const Iters *from = pass == 0 ? NULL : &t.its;
        uint32_t n = pass == 0 ? A->p->rank[acc->slot] : t.its.n;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t it;
            if (pass == 0) {
                const ProjIndex *pi = &A->p->maps[acc->slot][k];
                if (pi->kind != PIDX_ITER) continue;
                it = pi->iter;
                bool in_tile = false;
                for (uint32_t i = 0; i < t.its.n; i++) in_tile |= t.its.it[i] == it;
                if (in_tile) continue;
            } else {
                it = from->it[k];
            }
            if (its.n < 16) its.it[its.n++] = it;
        }
    }
    Tile packed = scratch_over(A, its, false, false, arena_printf(ir->arena, "%s#packed", ir->buffers[acc->buffer].name));
    IrStmt *first = NULL;
    Attn kernel = *A; /* the copy is a nest of its own, of every position, blocked for itself only */
    A->lanes = 1;
    A->from = A->whole_from;
    A->count = A->whole_count;
    /* A transposition, when the operand's innermost axis is another iterator than the packed
     * copy's: PACK_BLOCK cells of the copy's last axis at a time, that axis's block parallel with
     * the other iterators and the operand's innermost axis in a loop inside, so that the copy
     * writes whole cache lines and reads PACK_BLOCK short runs of the operand's rows instead of a
     * cell of a different line (a few cache sets) at each step. */
    uint32_t rank = A->p->rank[acc->slot], last = its.n ? its.it[its.n - 1] : UINT32_MAX, inner = UINT32_MAX;
    if (rank && A->p->maps[acc->slot][rank - 1].kind == PIDX_ITER) inner = A->p->maps[acc->slot][rank - 1].iter;
    Iters outside = its, inside = {0};
    if (inner != UINT32_MAX && last != UINT32_MAX && inner != last && A->p->iter_size[last] % PACK_BLOCK == 0 &&
        !A->ir->attention_row_each) { /* (a GPU thread a cell instead) */
        outside.n = 0;
        for (uint32_t i = 0; i < its.n; i++)
            if (its.it[i] != inner) outside.it[outside.n++] = its.it[i];
        inside.it[inside.n++] = inner;
        A->blocked = last;
        A->lanes = PACK_BLOCK;
        A->outer = A->fn->iter_count++;
        A->lane = A->fn->iter_count++;
    }
    IrBlock *cells = lanes_loop(A, open_loops(A, open_nest(A, &A->fn->body, outside, &first), inside, false, NULL));
    store(A, cells, packed.buffer, tile_index(A, packed), operand(A, read));
    *A = kernel;
    comment(first, "attention: an operand copied with the tile's axes innermost");
    A->packed[read] = packed;
    A->is_packed[read] = true;
    *index = tile_index(A, packed);
    return packed.buffer;
}

/* The cells of a tile's last iterator that one block of tile_dots sums at a time. */
enum { DOT_BLOCK = 64 };

/* A loop over a fresh iterator of the function, into `into`; returns its body. */
static IrBlock *fresh_loop(Attn *A, IrBlock *into, uint32_t iter, uint64_t extent) {
    IrStmt *lp = statement(A, IR_LOOP);
    lp->iter = iter;
    lp->extent = extent;
    push(A, into, lp);
    return &lp->body;
}

/* `index` (over `rank` axes) with the function's iterator `from` replaced by
 * DOT_BLOCK·block + cell. */
static IrIndex *split_index(Attn *A, const IrIndex *index, uint32_t rank, uint32_t from, uint32_t block, uint32_t cell) {
    IrIndex *out = arena_alloc(A->ir->arena, (rank ? rank : 1) * sizeof *out);
    for (uint32_t a = 0; a < rank; a++) {
        out[a] = index[a];
        out[a].terms = arena_alloc(A->ir->arena, (2 * index[a].term_count + 1) * sizeof *out[a].terms);
        out[a].term_count = 0;
        for (uint32_t k = 0; k < index[a].term_count; k++) {
            IrTerm term = index[a].terms[k];
            if (term.iter != from) {
                out[a].terms[out[a].term_count++] = term;
                continue;
            }
            out[a].terms[out[a].term_count++] = (IrTerm){block, term.coef * DOT_BLOCK};
            out[a].terms[out[a].term_count++] = (IrTerm){cell, term.coef};
        }
    }
    return out;
}

/* tile = Σ fma(x, y) over `sum` for every point of the tile, y read from its packed copy: the
 * tile's loops innermost, each cell's sum in the order of `sum`'s loops.  When the tile's last
 * iterator has a multiple of DOT_BLOCK cells (more than one block), its cells are summed a block
 * at a time: the block's loop outside `sum`'s, its DOT_BLOCK cells inside, so that a block's
 * running sums can stay in registers across the whole sum instead of being loaded and stored at
 * every step.  Each cell still adds the same products in the same order. */
static void tile_dots(Attn *A, IrBlock *into, Tile t, Iters sum, uint32_t x, uint32_t y) {
    IrIndex *packed_at;
    uint32_t packed = pack_operand(A, y, t, &packed_at);
    store(A, open_loops(A, lanes_loop(A, into), t.its, false, NULL), t.buffer, tile_index(A, t), number(A, 0));
    uint32_t last = t.its.n ? t.its.it[t.its.n - 1] : UINT32_MAX;
    uint64_t cells = last != UINT32_MAX ? A->count[last] : 0;
    if (cells > DOT_BLOCK && cells % DOT_BLOCK == 0) {
        Iters outer = t.its;
        outer.n--;
        uint32_t block = A->fn->iter_count++, cell = A->fn->iter_count++, from = A->base + last;
        IrBlock *inner = fresh_loop(A, open_loops(A, into, outer, false, NULL), block, cells / DOT_BLOCK);
        inner = fresh_loop(A, lanes_loop(A, open_loops(A, inner, sum, false, NULL)), cell, DOT_BLOCK);
        IrIndex *at = split_index(A, tile_index(A, t), t.its.n + t.laned, from, block, cell);
        IrExpr *xv = operand(A, x);
        xv->index = split_index(A, xv->index, A->ir->buffers[xv->buffer].rank, from, block, cell);
        IrExpr *yv = load(A, packed, split_index(A, packed_at, A->ir->buffers[packed].rank, from, block, cell));
        store(A, inner, t.buffer, at, op(A, SOP_FMA, xv, yv, load(A, t.buffer, at)));
        return;
    }
    IrBlock *inner = open_loops(A, lanes_loop(A, open_loops(A, into, sum, false, NULL)), t.its, false, NULL);
    store(A, inner, t.buffer, tile_index(A, t), op(A, SOP_FMA, operand(A, x), load(A, packed, packed_at), tile_cell(A, t)));
}

/* The scores of the tile's points, Σ_SCORE fma(q, k) / √d (causal: -1e30 past the query
 * position), then, when `lse` is a buffer, the weights exp(score − lse[row]) in their place. */
static Tile score_tile(Attn *A, IrBlock *into, Iters its, uint32_t lse) {
    Tile t = new_tile(A, its, "scores");
    bool over_keys = its.n && A->roles[its.it[0]] == ROLE_KEY;
    tile_dots(A, into, t, role_iters(A, ROLE_SCORE, 1, 4, false), over_keys ? 0 : 1, over_keys ? 1 : 0);
    IrExpr *scaled = op(A, SOP_DIV, tile_cell(A, t), number(A, A->divisor), NULL);
    if (A->a->causal)
        scaled = op(A, SOP_WHERE, op(A, SOP_LE, position(A, A->key), position(A, A->query), NULL), scaled,
                    number(A, -1e30));
    if (lse != UINT32_MAX) scaled = op(A, SOP_EXP, op(A, SOP_SUB, scaled, row_stat(A, lse), NULL), NULL, NULL);
    store(A, open_loops(A, lanes_loop(A, into), its, false, NULL), t.buffer, tile_index(A, t), scaled);
    return t;
}

/* A row's running value over the points of `over`, in their order: the maximum of a tile's
 * cells, their sum, or Σ fma(dO, o) (D, the gradients' row term). */
typedef enum { RUN_MAX, RUN_SUM, RUN_DOT } RunKind;

static IrExpr *run_step(Attn *A, RunKind kind, IrExpr *acc, Tile t) {
    switch (kind) {
    case RUN_MAX: return op(A, SOP_MAX, acc, tile_cell(A, t), NULL);
    case RUN_SUM: return op(A, SOP_ADD, acc, tile_cell(A, t), NULL);
    case RUN_DOT: break;
    }
    return op(A, SOP_FMA, operand(A, 4), operand(A, 3), acc);
}

/* The running value `kind` of each row of the nest, built in `into`; returns it as read inside a
 * lanes loop.  Unblocked, a local: `acc = init; for over: acc = step(acc)`.  Blocked, a tile of
 * a cell a lane with the loops of `over` outside the lanes', so that the rows' chains of
 * dependent steps (one addition after another, in order) run side by side instead of one row's
 * after the other's; each row's steps are the same, in the same order. */
static IrExpr *running(Attn *A, IrBlock *into, Iters over, RunKind kind, Tile t, const char *what) {
    IrExpr *init = number(A, kind == RUN_MAX ? -INFINITY : 0);
    if (A->lanes <= 1) {
        uint32_t acc = set_new(A, into, init);
        set(A, open_loops(A, into, over, false, NULL), acc, run_step(A, kind, local(A, acc), t));
        return local(A, acc);
    }
    Tile acc = new_tile(A, (Iters){0}, what);
    store(A, lanes_loop(A, into), acc.buffer, tile_index(A, acc), init);
    store(A, lanes_loop(A, open_loops(A, into, over, false, NULL)), acc.buffer, tile_index(A, acc),
          run_step(A, kind, tile_cell(A, acc), t));
    return tile_cell(A, acc);
}

/* e in the kernel's compute type (a conversion where its type is another: an f32 random number
 * or rate in an f64 kernel). */
static IrExpr *in_compute_type(Attn *A, IrExpr *e) {
    if (ir_expr_type(A->ir, e) == A->type) return e;
    return op(A, A->type == DTYPE_F64 ? SOP_TO_F64 : SOP_TO_F32, e, NULL, NULL);
}

/* Dropout of x, a weight or a weight's gradient, at the (row, key) cell in scope: inverted
 * dropout as Nn.dropout computes it, where(u < rate, 0, x / (1 − rate)), u the cell's random
 * number in this routine run (docs/ir.md §2.5: a pure function of the cell of `drop_cells`, so
 * the forward and each gradient draw the same one, in any order, on any thread).  x itself
 * without dropout. */
static IrExpr *dropped(Attn *A, IrExpr *x) {
    const Assignment *a = A->a;
    if (!a->dropout) return x;
    uint32_t its[16], n = attention_drop_iters(A->p, A->roles, its);
    IrIndex *ix = arena_alloc(A->ir->arena, (n ? n : 1) * sizeof *ix);
    for (uint32_t i = 0; i < n; i++) iterator_index(A, &ix[i], its[i]);
    IrExpr *u = expr(A, IR_RANDOM);
    u->type = DTYPE_F32;
    u->buffer = a->drop_cells;
    u->index = ix;
    IrExpr *rate = in_compute_type(A, operand(A, a->read_count - 1));
    return op(A, SOP_WHERE, op(A, SOP_LT, in_compute_type(A, u), rate, NULL), number(A, 0),
              op(A, SOP_DIV, x, op(A, SOP_SUB, number(A, 1), in_compute_type(A, operand(A, a->read_count - 1)), NULL), NULL));
}

/* The gradient of a score from its weight p, dp = Σ dO·v and the row's D: p · (dp − D) / √d. */
static IrExpr *score_gradient(Attn *A, IrExpr *p, IrExpr *dp, IrExpr *delta) {
    return op(A, SOP_DIV, op(A, SOP_MUL, p, op(A, SOP_SUB, dp, delta, NULL), NULL), number(A, A->divisor), NULL);
}

/* An accumulator over `its` (a row of the result or of a gradient), zeroed in `into`: the sums
 * of a row stay in it (in registers, where the backend can) until they are stored once. */
static Tile accumulator(Attn *A, IrBlock *into, Iters its) {
    Tile t = new_tile(A, its, "acc");
    store(A, open_loops(A, lanes_loop(A, into), its, false, NULL), t.buffer, tile_index(A, t), number(A, 0));
    return t;
}

/* Adds the accumulator into the left side's cells (a gradient's `=+`), in `into`. */
static void add_accumulator(Attn *A, IrBlock *into, Tile acc) {
    const Assignment *a = A->a;
    IrIndex *at = slot_index(A, a->lhs.slot, false);
    store(A, open_loops(A, lanes_loop(A, into), acc.its, false, NULL), a->lhs.buffer, at,
          op(A, SOP_ADD, load(A, a->lhs.buffer, at), tile_cell(A, acc), NULL));
}

/* Row blocking: the kernel's nest handles ROW_BLOCK consecutive points of product iterator `it`
 * (a query position, or a key position for dk and dv) in each run (fewer where ROW_BLOCK does not
 * divide its extent: 2, or none), so that each load of a packed operand in a dot product, and each
 * row of v, k or q in a weighted sum, serves every lane: a matrix-vector product becomes a
 * matrix-matrix one.  The lanes loop goes inside the sum's loops and outside the tile's, so every
 * cell adds the same products in the same order as unblocked.  Not for the GPU
 * (IrProgram.attention_row_each): there each row is a thread of its own, and four rows a thread
 * would leave a quarter of the threads and four times the per-thread tiles. */
enum { ROW_BLOCK = 4 };

static void block_rows(Attn *A, uint32_t it) {
    A->blocked = it;
    A->lanes = 1;
    if (it == UINT32_MAX || A->ir->attention_row_each) return;
    uint64_t n = A->count[it];
    A->lanes = n % ROW_BLOCK == 0 ? ROW_BLOCK : n % 2 == 0 ? 2 : 1;
    if (A->lanes > 1) {
        A->outer = A->fn->iter_count++;
        A->lane = A->fn->iter_count++;
    }
}

/* Causal attention split by position (the CPU's nests): the query positions in `parts` chunks
 * of `chunk` each, a nest for each, where the rows of chunk g see only the keys before the end of
 * their chunk — the keys past it are masked for every one of them, so their weights are 0 — and
 * the keys of chunk g (dk, dv) only the query rows from its start.  The nests skip those
 * products, about half of all at CAUSAL_PARTS = 8 (9/16 of them are computed).  Every cell's
 * result is the same: a masked weight is exactly 0, so its score, its term of the sum l (an
 * exact + 0) and its products (exact ±0, added to sums that are never −0) change nothing —
 * unless an operand is infinite or NaN at a masked position, which the skipped products would
 * have spread into the row.  The chunk is a multiple of DOT_BLOCK (the blocks of the dot
 * products stay whole) with at least two chunks, the query and key axes of one length; else
 * one part, every position. */
enum { CAUSAL_PARTS = 8 };

static uint32_t causal_parts(Attn *A, uint64_t *chunk) {
    if (!A->a->causal || A->ir->attention_row_each || A->query == UINT32_MAX || A->key == UINT32_MAX) return 1;
    uint64_t n = A->p->iter_size[A->query], c = DOT_BLOCK;
    if (n != A->p->iter_size[A->key]) return 1;
    while (c * CAUSAL_PARTS < n) c += DOT_BLOCK;
    if (n % c || n / c < 2) return 1;
    *chunk = c;
    return (uint32_t)(n / c);
}

/* The nest being built covers positions from … from + count of product iterator `it`. */
static void narrow(Attn *A, uint32_t it, uint64_t from, uint64_t count) {
    A->from[it] = from;
    A->count[it] = count;
}

/* Part g of `parts` (causal_parts): the ranges of its nest, and the words its comment adds. */
static const char *part(Attn *A, uint32_t g, uint32_t parts, uint64_t chunk, bool by_key) {
    memcpy(A->from, A->whole_from, A->p->iter_count * sizeof *A->from);
    memcpy(A->count, A->whole_count, A->p->iter_count * sizeof *A->count);
    if (parts <= 1) return "";
    uint64_t n = A->p->iter_size[A->query], first = g * chunk;
    if (by_key) {
        narrow(A, A->key, first, chunk);
        narrow(A, A->query, first, n - first);
    } else {
        narrow(A, A->query, first, chunk);
        narrow(A, A->key, 0, first + chunk);
    }
    return arena_printf(A->ir->arena, " (%s positions %llu to %llu)", by_key ? "key" : "query",
                        (unsigned long long)first, (unsigned long long)(first + chunk - 1));
}

static void forward_part(Attn *A, const char *which) {
    const Assignment *a = A->a;
    uint32_t o = a->lhs.buffer;
    Iters keys = role_iters(A, ROLE_KEY, 2, 4, false), values = role_iters(A, ROLE_VALUE, 0, 4, false);
    IrStmt *first = NULL;
    IrBlock nest = {0};
    block_rows(A, A->query);
    IrBlock *row = open_nest(A, &nest, role_iters(A, ROLE_ROW, 0, 4, false), &first);
    Tile w = score_tile(A, row, keys, UINT32_MAX);
    IrExpr *max = running(A, row, keys, RUN_MAX, w, "max");
    store(A, open_loops(A, lanes_loop(A, row), keys, false, NULL), w.buffer, tile_index(A, w),
          op(A, SOP_EXP, op(A, SOP_SUB, tile_cell(A, w), max, NULL), NULL, NULL));
    IrExpr *sum = running(A, row, keys, RUN_SUM, w, "sum");
    if (a->dropout) /* the weights summed into l are kept; those that weigh v are dropped */
        store(A, open_loops(A, lanes_loop(A, row), keys, false, NULL), w.buffer, tile_index(A, w),
              dropped(A, tile_cell(A, w)));
    Tile acc = accumulator(A, row, values);
    IrBlock *cells = open_loops(A, lanes_loop(A, open_loops(A, row, keys, false, NULL)), values, false, NULL);
    store(A, cells, acc.buffer, tile_index(A, acc), op(A, SOP_FMA, tile_cell(A, w), operand(A, 2), tile_cell(A, acc)));
    store(A, open_loops(A, lanes_loop(A, row), values, false, NULL), o, slot_index(A, 0, false),
          op(A, SOP_DIV, tile_cell(A, acc), sum, NULL));
    store(A, lanes_loop(A, row), a->stats, slot_index(A, 0, true), op(A, SOP_ADD, max, op(A, SOP_LOG, sum, NULL, NULL), NULL));
    comment(first, arena_printf(A->ir->arena, "attention: each row's scores, their softmax and the weighted sum of v%s", which));
    append(A, &nest);
}

static void forward(Attn *A) {
    uint64_t chunk = 0;
    uint32_t parts = causal_parts(A, &chunk);
    for (uint32_t g = 0; g < parts; g++) forward_part(A, part(A, g, parts, chunk, false));
}

/* The gradient of q: per row (those q's map mentions in parallel), over the keys. */
static void gradient_q_part(Attn *A, const char *which) {
    Iters keys = role_iters(A, ROLE_KEY, 2, 4, false);
    IrStmt *first = NULL;
    IrBlock nest = {0};
    block_rows(A, A->query);
    IrBlock *cell = open_nest(A, &nest, role_iters(A, ROLE_ROW, 1, 1, true), &first);
    Tile acc = accumulator(A, cell, role_iters(A, ROLE_SCORE, 1, 4, false));
    IrBlock *row = open_loops(A, cell, role_iters(A, ROLE_ROW, 0, 1, false), false, NULL);
    IrExpr *delta = running(A, row, role_iters(A, ROLE_VALUE, 0, 4, false), RUN_DOT, (Tile){0}, "delta");
    Tile p = score_tile(A, row, keys, A->a->stats);
    Tile dp = new_tile(A, keys, "dp");
    tile_dots(A, row, dp, role_iters(A, ROLE_VALUE, 0, 4, false), 4, 2);
    store(A, open_loops(A, lanes_loop(A, row), keys, false, NULL), dp.buffer, tile_index(A, dp), /* ds, in dp's place */
          score_gradient(A, tile_cell(A, p), dropped(A, tile_cell(A, dp)), delta));
    IrBlock *each_key = lanes_loop(A, open_loops(A, row, keys, false, NULL));
    store(A, open_loops(A, each_key, acc.its, false, NULL), acc.buffer, tile_index(A, acc),
          op(A, SOP_FMA, tile_cell(A, dp), operand(A, 1), tile_cell(A, acc)));
    add_accumulator(A, cell, acc);
    comment(first, arena_printf(A->ir->arena, "attention's gradient of q (each row's weights recomputed)%s", which));
    append(A, &nest);
}

static void gradient_q(Attn *A) {
    uint64_t chunk = 0;
    uint32_t parts = causal_parts(A, &chunk);
    for (uint32_t g = 0; g < parts; g++) gradient_q_part(A, part(A, g, parts, chunk, false));
}

/* The gradient of k or v: per key and row of theirs (in parallel), over the other rows. */
static void gradient_kv_part(Attn *A, bool of_k, const char *which) {
    const Assignment *a = A->a;
    uint32_t slot = a->lhs.slot;
    IrStmt *first = NULL;
    IrBlock nest = {0};
    block_rows(A, A->key);
    IrBlock *at = open_nest(A, &nest, joined(role_iters(A, ROLE_ROW, slot, slot, true),
                                             role_iters(A, ROLE_KEY, slot, 4, false)), &first);
    Iters rows = role_iters(A, ROLE_ROW, 0, slot, false);
    Tile p = score_tile(A, at, rows, a->stats);
    Tile weight = p; /* dv: the weights; dk: the scores' gradients, in a tile of their own */
    if (of_k) {
        weight = new_tile(A, rows, "ds");
        tile_dots(A, at, weight, role_iters(A, ROLE_VALUE, 0, 4, false), 2, 4);
        store(A, open_loops(A, lanes_loop(A, at), rows, false, NULL), weight.buffer, tile_index(A, weight),
              score_gradient(A, tile_cell(A, p), dropped(A, tile_cell(A, weight)), row_stat(A, a->scratch)));
    } else if (a->dropout) { /* dv: the dropped weights */
        store(A, open_loops(A, lanes_loop(A, at), rows, false, NULL), p.buffer, tile_index(A, p),
              dropped(A, tile_cell(A, p)));
    }
    Tile acc = accumulator(A, at, role_iters(A, of_k ? ROLE_SCORE : ROLE_VALUE, slot, 4, false));
    IrBlock *each = lanes_loop(A, open_loops(A, at, rows, false, NULL));
    IrExpr *other = operand(A, of_k ? 0 : 4);
    store(A, open_loops(A, each, acc.its, false, NULL), acc.buffer, tile_index(A, acc),
          op(A, SOP_FMA, tile_cell(A, weight), other, tile_cell(A, acc)));
    add_accumulator(A, at, acc);
    comment(first, arena_printf(A->ir->arena, "attention's gradient of %s (each key's weights recomputed)%s",
                                of_k ? "k" : "v", which));
    append(A, &nest);
}

static void gradient_kv(Attn *A, bool of_k) {
    const Assignment *a = A->a;
    if (of_k) { /* D = Σ_j dO·o per row, once */
        IrStmt *first = NULL;
        IrBlock *row = open_nest(A, &A->fn->body, role_iters(A, ROLE_ROW, 0, 4, false), &first);
        store(A, row, a->scratch, slot_index(A, 0, true),
              running(A, row, role_iters(A, ROLE_VALUE, 0, 4, false), RUN_DOT, (Tile){0}, "delta"));
        comment(first, "attention's gradient: Σ dO·o per row");
    }
    uint64_t chunk = 0;
    uint32_t parts = causal_parts(A, &chunk);
    for (uint32_t g = 0; g < parts; g++) gradient_kv_part(A, of_k, part(A, g, parts, chunk, true));
}

void lower_attention(IrProgram *ir, IrFunction *fn, const Assignment *a) {
    const Projections *p = a->proj;
    uint8_t *roles = arena_alloc(ir->arena, p->iter_count ? p->iter_count : 1);
    const char *why;
    if (!attention_roles(ir->arena, p, a->causal, roles, &why)) return; /* assign.c reported it */
    Attn A = {.ir = ir, .fn = fn, .a = a, .p = p, .roles = roles, .base = fn->iter_count,
              .type = (DType)ir_dtype_compute(ir->buffers[a->lhs.buffer].dtype), .divisor = 1,
              .blocked = UINT32_MAX, .lanes = 1};
    fn->iter_count += p->iter_count;
    uint32_t n = p->iter_count ? p->iter_count : 1;
    A.whole_from = arena_alloc(ir->arena, n * sizeof *A.whole_from);
    A.whole_count = arena_alloc(ir->arena, n * sizeof *A.whole_count);
    A.from = arena_alloc(ir->arena, n * sizeof *A.from);
    A.count = arena_alloc(ir->arena, n * sizeof *A.count);
    for (uint32_t i = 0; i < p->iter_count; i++) A.whole_count[i] = A.count[i] = p->iter_size[i];
    double cells = 1;
    for (uint32_t i = 0; i < p->iter_count; i++)
        if (roles[i] == ROLE_SCORE) cells *= (double)p->iter_size[i];
    A.divisor = sqrt(cells);
    attention_positions(p, roles, &A.query, &A.key);
    switch (a->kernel) {
    case KERNEL_ATTENTION: forward(&A); break;
    case KERNEL_ATTENTION_DQ: gradient_q(&A); break;
    case KERNEL_ATTENTION_DK: gradient_kv(&A, true); break;
    case KERNEL_ATTENTION_DV: gradient_kv(&A, false); break;
    case KERNEL_NONE: break;
    }
}
