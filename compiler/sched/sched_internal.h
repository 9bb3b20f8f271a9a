/* sched_internal.h — what the files of the schedule (compiler/sched/) share: the scheduler's
 * state (Sched) with its substitution of iterators, the recognised reduction nest (Reduction)
 * and contraction (Contraction), and the functions one file calls in another.  Only the stage's
 * own files include it; its interface is sched.h.
 *
 *   sched.c       the entry schedule(), the CPU's rewrites 0, 2 and 3, strip-mining run-time loops
 *   nest.c        tools over nests: building and cloning IR, scratch buffers, recognising
 *                 reductions; rewrite 4 (fusing pointwise nests), which both targets run
 *   sched_tile.c  rewrite 1: register-tiled contractions over packed panels (CPU)
 *   sched_gpu.c   rewrites 5-7 (thread tiles, shared-memory block tiles, block reductions) and
 *                 the mapping of loops onto the GPU's grid; sched_block.c, sched_mma.c and
 *                 sched_scatter.c the GPU's block kernels (sched_block.h)
 * Calls go from sched.c to the others and from sched_tile.c and sched_gpu.c to nest.c; the GPU's
 * block tiles also use sched_tile.c's recognition of a contraction. */
#ifndef TSR_SCHED_INTERNAL_H
#define TSR_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/sched.h"

enum { MAX_LOOPS = 32, MAX_TERMS = 40, MAX_FUSED = 16 };

/* The replacement of an iterator by an affine expression of new iterators. */
typedef struct Affine {
    IrTerm terms[6];
    uint32_t count;
    int64_t offset;
} Affine;

/* A function's global scratch buffers of one kind, taken in turn (pool_take): the split
 * reductions' partial results (rewrite 6s, sched_block.c), tf32's K-major copies of a
 * contraction's operands (rewrite 6t, sched_mma.c).  POOL_TURNS of them, so that neighbouring
 * kernels that take them are independent and may run side by side. */
enum { POOL_TURNS = 4 };
typedef struct ScratchPool {
    uint32_t buffers[POOL_TURNS];
    uint32_t made, next; /* made so far; the next to take */
} ScratchPool;

/* A tf32 copy made in the function (sched_mma.c), which a later product whose operand is the
 * same cells in the same layout reads too, unless a statement between writes either buffer. */
typedef struct Tf32Copy {
    const char *key;   /* the operand's buffer and index in terms of the copy's axes, their extents */
    uint32_t copy, source;
    uint32_t at;       /* the copy's place in the function's body being built */
} Tf32Copy;

typedef struct Sched {
    IrProgram *ir;
    IrFunction *fn;
    const Target *target;
    uint32_t old_iters;   /* iterators of the function before scheduling, and any cover_new_iters
                           * added (the subst table's size) */
    Affine *subst;        /* per old iterator */
    bool *mapped;
    uint32_t scratch;     /* scratch buffers made so far (for names) */
    const uint32_t *outer_batch; /* while a contraction runs inside its batch loops: their iterators */
    bool local_scratch;   /* new scratch buffers are kernel_local (a nest inside a parallel loop) */
    double outer_cells;   /* iterations of the parallel loops around the nest being scheduled */
    /* The nest being scheduled computes on cells of `cell_bytes` (8 where it touches an f64
     * value, else 4): `lanes` of them fill a vector register (target->vector_floats · 4 /
     * cell_bytes). */
    unsigned cell_bytes, lanes;
    /* The GPU's buffers of partial results of split reductions (sched_block.c, rewrite 6s), and
     * of tf32 operands copied K-major (sched_mma.c). */
    ScratchPool split_partials, tf32_copies;
    Tf32Copy *tf32_made;
    uint32_t tf32_made_count, tf32_made_cap;
} Sched;

typedef struct LocalRepl {
    uint32_t local;
    IrExpr *value;
    uint32_t buffer;
    IrExpr *buffer_value;
} LocalRepl;

typedef struct Reduction {
    IrStmt *par[MAX_LOOPS];   /* parallel loops, outermost first */
    uint32_t npar;
    IrStmt *red[MAX_LOOPS];   /* reduction loops, outermost first */
    uint32_t nred;
    IrStmt *init, *step, *store;
    uint32_t local;
} Reduction;

typedef struct Contraction {
    const Reduction *r;
    uint32_t c;                /* the result buffer */
    const IrExpr *a, *b;       /* the broadcast operand and the packed one */
    bool b_first;              /* the step is fma(b, a, l) */
    bool add, acc_first;       /* the step is l + x·y (acc_first) or x·y + l, not an fma */
    IrStmt *i_loop, *j_loop;
    IrStmt *batch[MAX_LOOPS];  /* the other parallel loops, outermost first */
    uint32_t nbatch;
    uint64_t k;                /* cells of the reduction */
    bool strided_lanes;        /* J walks C with a stride other than 1 (find_contraction's `narrow`) */
} Contraction;

/* ---- nest.c: building and cloning IR, scratch buffers, recognising reductions, rewrite 4 ------------ */

/* Every load of `buffer` in e is at `index`. */
bool loads_only_at(const IrProgram *ir, const IrExpr *e, uint32_t buffer, const IrIndex *index);

IrStmt *new_loop(Sched *s, uint32_t iter, uint64_t extent, bool parallel, IrLoopMode mode);

IrStmt *new_store(Sched *s, uint32_t buffer, IrIndex *index, IrExpr *value);

IrExpr *new_load(Sched *s, uint32_t buffer, IrIndex *index);

IrExpr *new_const(Sched *s, double v, DType type);

/* op(a, b, c), c NULL for a binary operation: an arithmetic one, whose value has a's type. */
IrExpr *new_op(Sched *s, ScalarOp op, IrExpr *a, IrExpr *b, IrExpr *c);

/* fma(a, b, acc) of a contraction's step, its operands in the order the step had them. */
IrExpr *new_step_fma(Sched *s, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc);

/* The step of a contraction whose step is fma(x, y, l), or (a scatter's, rewrite 0) l + x·y
 * with two roundings, l on the side it had: `add` and `acc_first` say which. */
IrExpr *new_step(Sched *s, bool add, bool acc_first, bool b_first, IrExpr *a, IrExpr *b, IrExpr *acc);

uint32_t new_iter(Sched *s);

/* A one-axis index: Σ terms. */
IrIndex *flat_index(Sched *s, const IrTerm *terms, uint32_t count);

void map_iter(Sched *s, uint32_t old, Affine a);
/* The iterators made so far count as the function's own: the substitution table grows to cover
 * them (a nest that the schedule made and then rewrites, as reduce_in_f32's rounding when it
 * becomes a tile's epilogue). */
void cover_new_iters(Sched *s);

Affine affine1(uint32_t iter, int64_t coef, int64_t offset);

IrIndex *clone_index(Sched *s, const IrIndex *index, uint32_t rank);

IrExpr *clone_expr(Sched *s, const IrExpr *e, const LocalRepl *repl);

void reset_subst(Sched *s);

/* Whether the schedule leaves `st` as lowered (ir_stmt_as_lowered; on the GPU, also a nest
 * that touches f64 values: its tiles are of 4-byte cells). */
bool sched_keeps_lowered(const Sched *s, const IrStmt *st);

/* Whether st is kept as lowered only because it computes bf16 or f16 cells: a loop nest without
 * gathered indices, integer arithmetic, f64 or the types the tiles leave alone. */
bool sched_half_only(const Sched *s, const IrStmt *st);

/* A scratch buffer of `size` cells of `dtype` (a packed operand's type is its operand's, a tile's
 * the type its reduction accumulates in). */
uint32_t new_scratch(Sched *s, const char *what, uint64_t size, DType dtype, bool kernel_local);

/* The pool's next global f32 buffer, made (named `what`) or grown to at least `cells` cells. */
uint32_t pool_take(Sched *s, ScratchPool *pool, const char *what, uint64_t cells);

/* `l = init; for r… reduction: l = step; C[…] = l`: the three statements of a reduction's
 * cell, into r (its parallel loops aside). */
bool match_steps(IrStmt *init, IrStmt *loop, IrStmt *store, Reduction *r);

bool match_reduction(IrStmt *top, Reduction *r);

bool mentions(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter);

/* Whether indices a and b of `buffer` name the same cell: ir_same_index, gathered axes included
 * (the same where their expressions are the same). */
bool same_cell(const IrProgram *ir, uint32_t buffer, const IrIndex *a, const IrIndex *b);

/* Whether e reads local `local`; *bad when a load reads `avoid` or walks `iter` with a stride
 * other than 0 or 1. */
bool scan_expr(const IrProgram *ir, const IrExpr *e, uint32_t local, uint32_t avoid, uint32_t iter, bool *bad);

/* The initial value is the neutral constant (a reset) or the cell itself (an update). */
bool init_is_plain(const IrProgram *ir, const Reduction *r);

/* Consecutive pointwise nests over loops of the same extents — an optimiser's updates of its
 * state and of the parameter, a forward chain with several outputs — become one nest whose body
 * runs their stores in order, one pass over memory instead of one per nest (joins() keeps each
 * cell's values).  First each pointwise nest moves down past the statements independent of it
 * to the next such nest that uses what it touches (sink_pointwise), so that those become
 * neighbours.  At most MAX_FUSED stores a nest: the check is quadratic in them, and one
 * kernel of thousands of statements would be more than LLVM should see at once. */
void fuse_pointwise(Sched *s);
/* Rewrite 4s, for the GPU after the fusion: a store of one cell outside any loop (an
 * optimiser's step count and bias corrections, gradient clipping's running total of the squares)
 * moves down past the statements independent of it to just before the next such store, then up
 * to just after the one before, so that these make runs that kernel.c launches as one kernel of
 * one thread: AdamW's per-parameter scalars and the clipping's totals of a GPT-2 were one
 * launch each, about 300 launches of a few microseconds.  Only statements independent of it
 * are passed, so every buffer is read after the same writes as before. */
void group_scalar_stores(Sched *s);
/* Rewrite 1c, for the CPU before the fusion: a packing nest (or a widened twin's) that copies
 * the same cells as an earlier one of the function into the same layout, with nothing in
 * between that writes what it reads, is dropped, and what read its copy reads the earlier one:
 * the LN output that the q, k and v projections each packed is packed once. */
void share_packing(Sched *s);
/* Rewrite 4b, for the CPU after every function's fusion: a buffer that one fused pointwise nest
 * alone touches in the whole program, nothing outside the loop IR sees (sched/nest.c:
 * mark_seen_outside) and every iteration writes before reading (an f32 or f64 gradient passed
 * along inside a fused backward chain) becomes a local of the nest: its cells are never stored.
 * The same values in the same order. */
void local_cells(IrProgram *ir);

/* ---- sched_tile.c: rewrite 1, register-tiled contractions ------------------------------------------- */

/* `allow_add`: also a step l + x·y (rounded twice, as a program may write it).
 * `narrow` (0: never): when the loop that walks C with stride 1 has fewer cells than that (a
 * convolution's kernel gradient over 6 input channels) and the reduction is long, a loop of at
 * least twice as many cells that walks its operand with stride 1 gives the lanes instead: the
 * tile then stores its cells lane by lane, once per `ct->k` steps (strided_lanes). */
bool find_contraction(const IrProgram *ir, const Reduction *r, Contraction *ct, bool allow_add,
                      uint64_t narrow);


/* Append `loop` inside the nest being built (*top is its outermost loop, *into the body new
 * loops go in). */
void nest_push(Sched *s, IrStmt **top, IrBlock **into, IrStmt *loop);

/* The columns of a register tile over `nj` lanes: *w lanes to a vector, *nv vectors. */
void tile_columns(const Sched *s, uint64_t nj, uint64_t *w, uint64_t *nv);
/* Tile the contraction `r`; the statements after it (`after`, `after_count` of them) that make
 * its epilogue are fused into the tiles: *fused says how many. */
bool tile_contraction(Sched *s, const Reduction *r, IrStmt *const *after, uint32_t after_count, IrBlock *out,
                      uint32_t *fused);
/* Whether tile_contraction() runs `ct` on bf16 pairs (VDPBF16PS, LOOP_DOT_PAIRS): the target
 * has bf16_pairs, both operands are bf16 cells, an fma step, an even innermost reduction and
 * at least 16 lanes.  reduce_in_f32 (sched.c) then leaves the operands unwidened. */
bool tile_pairs(const Sched *s, const Contraction *ct);

/* ---- sched_gpu.c: the GPU's rewrites 5-7 ------------------------------------------------------------ */

/* The GPU's rewrites of one function (tiles, block reductions, rewrites 4, 4v, 4s);
 * schedule_gpu() then maps loops onto the grid. */
void schedule_gpu_function(Sched *s);

#endif
