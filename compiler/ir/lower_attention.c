/* lower_attention.c — the nests of softmax attention (attention.h, docs/ir.md §3.4).
 *
 * What it does: for `o =: attention q k v` (an operator's forward block, stdlib/core.tsr
 * `attend`) emits one nest whose parallel loops are the ROW iterators; each row keeps a running
 * maximum m and sum l of its weights in locals, and walks the KEY iterators once, in order:
 *     sc = (Σ_SCORE fma(q, k)) / √d     (causal: -1e30 where the key position s > t)
 *     m' = max(m, sc);  c = exp(m − m');  p = exp(sc − m');  l = fma(l, c, p)
 *     o[row, j] = fma(p, v[s, j], o[row, j] · c)   for each VALUE j;  m = m'
 * then divides the row by l and stores m + log l into the row statistics buffer (stats).  So
 * no buffer of rows × keys exists, whatever the sequence's length.  The gradients (each operand
 * its own kernel, `g1 =+ attention_dq v1 v2 v3 v g` …) recompute each weight as
 * p = exp(sc − stats[row]), and with D[row] = Σ_j dO·o and dp = Σ_j dO·v[s, j]:
 *     dq[row, k] += (p·(dp − D) / √d) · k[s, k]     (per row, over the keys)
 *     dk[s, k]   += (p·(dp − D) / √d) · q[row, k]   (per key, over the rows; D first, one nest)
 *     dv[s, j]   += p · dO[row, j]                   (per key, over the rows)
 * A gradient adds into what its buffer holds (`=+`); its parallel loops are the iterators its
 * own index mentions, the others run in order inside them.  Every sum runs in the order of its
 * loops, so the reference executor and native code agree bit for bit; the schedule leaves these
 * nests as they are (they are not of its canonical forms).
 *
 * Requires: an assignment built by assign.c (kernel, stats, positions, scratch set; operands in
 * `reads` as written: q, k, v, and for a gradient o and dO), roles that attention_roles accepts. */
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
    if (p->slot_count != 4) {
        *why = "attention takes three operands: q, k and v";
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
            *why = arena_printf(arena, "an axis of %llu positions %s: attention's spec gives each label one "
                                "role — in the result and q (a row: batch, head, query position), in q and k "
                                "only (summed into the scores), in k and v only (the keys the softmax runs "
                                "over), or in the result and v only (the value features)",
                                (unsigned long long)p->iter_size[i],
                                m == IN_RESULT ? "is in the result alone"
                                : !(m & IN_RESULT) && (m & IN_Q) && (m & IN_V) ? "is in q and v but not the result"
                                : "is in one operand alone");
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

/* ---- Building the nests -------------------------------------------------------------------------- */

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

/* The index of a buffer addressed through slot `slot`'s map, leaving out the axes of the VALUE
 * iterators when `rows_only` (the row statistics: one number per row). */
static IrIndex *slot_index(Attn *A, uint32_t slot, bool rows_only) {
    const Projections *p = A->p;
    IrIndex *ix = arena_alloc(A->ir->arena, (p->rank[slot] ? p->rank[slot] : 1) * sizeof *ix);
    uint32_t n = 0;
    for (uint32_t ax = 0; ax < p->rank[slot]; ax++) {
        const ProjIndex *pi = &p->maps[slot][ax];
        if (pi->kind == PIDX_ITER && rows_only && A->roles[pi->iter] == ROLE_VALUE) continue;
        if (pi->kind == PIDX_ITER) {
            ix[n].terms = arena_alloc(A->ir->arena, sizeof *ix[n].terms);
            ix[n].terms[0] = (IrTerm){A->base + pi->iter, 1};
            ix[n].term_count = 1;
        } else {
            ix[n].offset = pi->fixed;
        }
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

static IrExpr *stat(Attn *A, uint32_t buffer) { return load(A, buffer, slot_index(A, 0, true)); }

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

/* Loops, one inside the other, over the iterators of role `role` (in the order of slot `order`'s
 * axes, then any others), keeping (`in_slot` true) or leaving out those `in_slot_of`'s map
 * mentions when in_slot_of < 4; returns the innermost body (`into` when there are none). */
static IrBlock *loops(Attn *A, IrBlock *into, AttentionRole role, uint32_t order, uint32_t in_slot_of, bool in_slot,
                      bool parallel, IrStmt **first) {
    const Projections *p = A->p;
    bool *done = arena_alloc(A->ir->arena, p->iter_count ? p->iter_count : 1);
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < (pass == 0 ? p->rank[order] : p->iter_count); k++) {
            uint32_t it;
            if (pass == 0) {
                if (p->maps[order][k].kind != PIDX_ITER) continue;
                it = p->maps[order][k].iter;
            } else {
                it = k;
            }
            if (done[it] || A->roles[it] != role) continue;
            if (in_slot_of < 4 && mentions(p, in_slot_of, it) != in_slot) continue;
            done[it] = true;
            IrStmt *lp = statement(A, IR_LOOP);
            lp->iter = A->base + it;
            lp->extent = p->iter_size[it];
            lp->parallel = parallel;
            push(A, into, lp);
            if (first && !*first) *first = lp;
            into = &lp->body;
        }
    return into;
}

/* The position of iterator `it` as a number (a causal mask's operand): positions[it], or 0. */
static IrExpr *position(Attn *A, uint32_t it) {
    if (it == UINT32_MAX) return number(A, 0);
    IrIndex *ix = arena_alloc(A->ir->arena, sizeof *ix);
    ix->terms = arena_alloc(A->ir->arena, sizeof *ix->terms);
    ix->terms[0] = (IrTerm){A->base + it, 1};
    ix->term_count = 1;
    return load(A, A->a->positions, ix);
}

/* A local holding the score of the current row and key: Σ_SCORE fma(q, k) / √d, masked. */
static uint32_t score(Attn *A, IrBlock *into) {
    uint32_t dot = set_new(A, into, number(A, 0));
    IrBlock *inner = loops(A, into, ROLE_SCORE, 1, 4, false, false, NULL);
    set(A, inner, dot, op(A, SOP_FMA, operand(A, 0), operand(A, 1), local(A, dot)));
    IrExpr *scaled = op(A, SOP_DIV, local(A, dot), number(A, A->divisor), NULL);
    if (A->a->causal)
        scaled = op(A, SOP_WHERE, op(A, SOP_LE, position(A, A->key), position(A, A->query), NULL), scaled,
                    number(A, -1e30));
    return set_new(A, into, scaled);
}

/* A local holding Σ_VALUE fma(x, y) of two operands read per row and value feature. */
static uint32_t value_dot(Attn *A, IrBlock *into, uint32_t x, uint32_t y) {
    uint32_t sum = set_new(A, into, number(A, 0));
    IrBlock *inner = loops(A, into, ROLE_VALUE, 0, 4, false, false, NULL);
    set(A, inner, sum, op(A, SOP_FMA, operand(A, x), operand(A, y), local(A, sum)));
    return sum;
}

/* The gradient of the scores at this row and key: p · (dp − D) / √d, with p = exp(sc − lse). */
static IrExpr *score_gradient(Attn *A, uint32_t p, uint32_t dp, IrExpr *delta) {
    IrExpr *diff = op(A, SOP_SUB, local(A, dp), delta, NULL);
    return op(A, SOP_DIV, op(A, SOP_MUL, local(A, p), diff, NULL), number(A, A->divisor), NULL);
}

static uint32_t weight(Attn *A, IrBlock *into, uint32_t sc) {
    return set_new(A, into, op(A, SOP_EXP, op(A, SOP_SUB, local(A, sc), stat(A, A->a->stats), NULL), NULL, NULL));
}

static void forward(Attn *A) {
    const Assignment *a = A->a;
    uint32_t o = a->lhs.buffer;
    IrStmt *first = NULL;
    IrBlock *row = loops(A, &A->fn->body, ROLE_ROW, 0, 4, false, true, &first);
    uint32_t m = set_new(A, row, number(A, -INFINITY));
    uint32_t l = set_new(A, row, number(A, 0));
    IrBlock *cells = loops(A, row, ROLE_VALUE, 0, 4, false, false, NULL);
    store(A, cells, o, slot_index(A, 0, false), number(A, 0));
    IrBlock *keys = loops(A, row, ROLE_KEY, 2, 4, false, false, NULL);
    uint32_t sc = score(A, keys);
    uint32_t next = set_new(A, keys, op(A, SOP_MAX, local(A, m), local(A, sc), NULL));
    uint32_t c = set_new(A, keys, op(A, SOP_EXP, op(A, SOP_SUB, local(A, m), local(A, next), NULL), NULL, NULL));
    uint32_t p = set_new(A, keys, op(A, SOP_EXP, op(A, SOP_SUB, local(A, sc), local(A, next), NULL), NULL, NULL));
    set(A, keys, l, op(A, SOP_FMA, local(A, l), local(A, c), local(A, p)));
    cells = loops(A, keys, ROLE_VALUE, 0, 4, false, false, NULL);
    IrExpr *kept = op(A, SOP_MUL, load(A, o, slot_index(A, 0, false)), local(A, c), NULL);
    store(A, cells, o, slot_index(A, 0, false), op(A, SOP_FMA, local(A, p), operand(A, 2), kept));
    set(A, keys, m, local(A, next));
    cells = loops(A, row, ROLE_VALUE, 0, 4, false, false, NULL);
    store(A, cells, o, slot_index(A, 0, false), op(A, SOP_DIV, load(A, o, slot_index(A, 0, false)), local(A, l), NULL));
    store(A, row, a->stats, slot_index(A, 0, true),
          op(A, SOP_ADD, local(A, m), op(A, SOP_LOG, local(A, l), NULL, NULL), NULL));
    if (first) first->comment = "attention (online softmax over the keys)";
}

/* gradient of q: per row (those q's map mentions in parallel), over the keys. */
static void gradient_q(Attn *A) {
    const Assignment *a = A->a;
    IrStmt *first = NULL;
    IrBlock *row = loops(A, &A->fn->body, ROLE_ROW, 1, 1, true, true, &first);
    row = loops(A, row, ROLE_ROW, 0, 1, false, false, &first);
    uint32_t delta = value_dot(A, row, 4, 3);
    IrBlock *keys = loops(A, row, ROLE_KEY, 2, 4, false, false, NULL);
    uint32_t p = weight(A, keys, score(A, keys));
    uint32_t dp = value_dot(A, keys, 4, 2);
    uint32_t ds = set_new(A, keys, score_gradient(A, p, dp, local(A, delta)));
    IrBlock *cells = loops(A, keys, ROLE_SCORE, 1, 4, false, false, NULL);
    IrIndex *at = slot_index(A, a->lhs.slot, false);
    store(A, cells, a->lhs.buffer, at, op(A, SOP_FMA, local(A, ds), operand(A, 1), load(A, a->lhs.buffer, at)));
    if (first) first->comment = "attention's gradient of q (the weights recomputed)";
}

/* gradient of k or v: per key and row of theirs (in parallel), over the other rows. */
static void gradient_kv(Attn *A, bool of_k) {
    const Assignment *a = A->a;
    uint32_t slot = a->lhs.slot;
    if (of_k) { /* D = Σ_j dO·o per row, once */
        IrStmt *first = NULL;
        IrBlock *row = loops(A, &A->fn->body, ROLE_ROW, 0, 4, false, true, &first);
        uint32_t delta = value_dot(A, row, 4, 3);
        store(A, row, a->scratch, slot_index(A, 0, true), local(A, delta));
        if (first) first->comment = "attention's gradient: Σ dO·o per row";
    }
    IrStmt *first = NULL;
    IrBlock *at = loops(A, &A->fn->body, ROLE_ROW, slot, slot, true, true, &first);
    at = loops(A, at, ROLE_KEY, slot, 4, false, true, &first);
    IrBlock *rows = loops(A, at, ROLE_ROW, 0, slot, false, false, &first);
    uint32_t p = weight(A, rows, score(A, rows));
    IrIndex *cell = slot_index(A, slot, false);
    if (of_k) {
        uint32_t dp = value_dot(A, rows, 4, 2);
        uint32_t ds = set_new(A, rows, score_gradient(A, p, dp, stat(A, a->scratch)));
        IrBlock *cells = loops(A, rows, ROLE_SCORE, slot, 4, false, false, NULL);
        store(A, cells, a->lhs.buffer, cell, op(A, SOP_FMA, local(A, ds), operand(A, 0), load(A, a->lhs.buffer, cell)));
    } else {
        IrBlock *cells = loops(A, rows, ROLE_VALUE, slot, 4, false, false, NULL);
        store(A, cells, a->lhs.buffer, cell, op(A, SOP_FMA, local(A, p), operand(A, 4), load(A, a->lhs.buffer, cell)));
    }
    if (first) first->comment = of_k ? "attention's gradient of k (the weights recomputed)"
                                     : "attention's gradient of v (the weights recomputed)";
}

void lower_attention(IrProgram *ir, IrFunction *fn, const Assignment *a) {
    const Projections *p = a->proj;
    uint8_t *roles = arena_alloc(ir->arena, p->iter_count ? p->iter_count : 1);
    const char *why;
    if (!attention_roles(ir->arena, p, a->causal, roles, &why)) return; /* assign.c reported it */
    Attn A = {ir, fn, a, p, roles, fn->iter_count, (DType)ir_dtype_compute(ir->buffers[a->lhs.buffer].dtype), 1, 0, 0};
    fn->iter_count += p->iter_count;
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
