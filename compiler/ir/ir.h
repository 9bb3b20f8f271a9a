/* ir.h — the two intermediate representations after shape inference.
 *
 * 1. The assignment IR (built by assign.c, indexed by proj.c): every `%cd` assignment of an
 *    operator's forward or backward block, instantiated for one application, is
 *        lhs ACCUM= f(reads…)
 *    over tensor nodes (a tensor's value or its gradient), with the projections record of the
 *    operation it belongs to (seed 003: one record per operation; each access names the *slot*
 *    of that record whose index map it is read or written by, so a backward assignment is a
 *    slot-permuted view of the forward record).
 *
 * 2. The loop IR (built by lower.c, rewritten by opt.c, executed by interp.c, printed and
 *    verified by ir.c): functions made of loops with static bounds over iterators, stores of
 *    scalar expressions at affine indices, and local scalars (accumulators).  Every loop is
 *    marked parallel (its iterator addresses the stored cell) or reduction.  Buffers are
 *    row-major in memory order batch, output, input (docs/ir.md).
 *
 * Both live in one arena owned by the IrProgram. */
#ifndef TSR_IR_H
#define TSR_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/image_format.h"
#include "base/arena.h"
#include "base/diag.h"
#include "base/size.h"

/* ---- Scalar operations (shared by both IRs) ------------------------------------------------ */

/*      op                name      arity */
#define SCALAR_OPS(X)                     \
    X(SOP_ADD,            "+",      2)    \
    X(SOP_SUB,            "-",      2)    \
    X(SOP_MUL,            "*",      2)    \
    X(SOP_DIV,            "/",      2)    \
    X(SOP_POW,            "**",     2)    \
    X(SOP_LT,             "<",      2)    \
    X(SOP_LE,             "<=",     2)    \
    X(SOP_EQ,             "eq",     2)    \
    X(SOP_NE,             "ne",     2)    \
    X(SOP_MAX,            "max",    2)    \
    X(SOP_MIN,            "min",    2)    \
    X(SOP_MOD,            "mod",    2)    \
    X(SOP_RELU_GATE,      "-?/",    2)    \
    X(SOP_SAT01_GATE,     "-?^",    2)    \
    X(SOP_OR,             "||",     2)    \
    X(SOP_AND,            "&&",     2)    \
    X(SOP_NEG,            "neg",    1)    \
    X(SOP_RELU,           "relu",   1)    \
    X(SOP_EXP,            "exp",    1)    \
    X(SOP_LOG,            "log",    1)    \
    X(SOP_SQRT,           "sqrt",   1)    \
    X(SOP_TANH,           "tanh",   1)    \
    X(SOP_SIGMOID,        "sigmoid", 1)   \
    X(SOP_SIN,            "sin",    1)    \
    X(SOP_COS,            "cos",    1)    \
    X(SOP_LOG2,           "log2",   1)    \
    X(SOP_EXP2,           "exp2",   1)    \
    X(SOP_RECIP,          "recip",  1)    \
    X(SOP_RSQRT,          "rsqrt",  1)    \
    X(SOP_SAT01,          "sat01",  1)    \
    X(SOP_ABS,            "abs",    1)    \
    X(SOP_SIGN,           "sign",   1)    \
    X(SOP_FLOOR,          "floor",  1)    \
    X(SOP_NOT,            "not",    1)    \
    X(SOP_WHERE,          "where",  3)    \
    X(SOP_FMA,            "fma",    3)    \
    X(SOP_TO_F32,         "to_f32", 1)    \
    X(SOP_TO_I32,         "to_i32", 1)    \
    X(SOP_TO_F64,         "to_f64", 1)    \
    X(SOP_TO_BF16,        "to_bf16", 1)   \
    X(SOP_TO_F16,         "to_f16", 1)    \
    X(SOP_WIDEN,          "widen",  1)    \
    X(SOP_TO_TF32,        "to_tf32", 1)  \
    X(SOP_TO_U8,          "to_u8",  1)    \
    X(SOP_TO_BOOL,        "to_bool", 1)   \
    X(SOP_TO_I64,         "to_i64", 1)

typedef enum ScalarOp {
#define SOP_ENUM(op, name, arity) op,
    SCALAR_OPS(SOP_ENUM)
#undef SOP_ENUM
    SOP_COUNT
} ScalarOp;

const char *scalar_op_name(ScalarOp op);
unsigned scalar_op_arity(ScalarOp op);
bool scalar_op_infix(ScalarOp op); /* written between its two operands (`+`, `-?/`) */
/* The binary operator or function written `name` in %cd code (`*`, `relu`, `where`), or -1. */
int scalar_op_lookup(const char *name, bool binary);
/* The primitive written `name` in %cd code (infix when `binary`), or -1: scalar_op_lookup, and
 * `a > b` is `b < a`, `a >= b` is `b <= a` (*swapped: the operands trade places), `a = b` is `eq`. */
int scalar_op_code(const char *name, bool binary, bool *swapped);
/* The primitive of %cd code (infix when `binary`) whose name is closest to `name` by edit
 * distance, when one is close enough to suggest ("did you mean 'relu'?"), else NULL. */
const char *scalar_op_closest(const char *name, bool binary);
/* Whether `name` is what code may apply besides the primitives: `random ()` or a kernel of
 * assign.c (KernelKind: `attention v1 v2 v3`, …). */
bool scalar_code_builtin(const char *name);
/* Evaluate in single precision, as generated code does.  Values are f32 except where an i32
 * travels as its bit pattern in a float (ir_i32_bits): the result of SOP_TO_I32 and the operand of
 * SOP_TO_F32 (docs/ir.md §2.8). */
float scalar_op_eval(ScalarOp op, float a, float b, float c);
/* An f32 rounded to tf32's precision (10 bits after the point), to nearest with ties away from
 * zero, as PTX's cvt.rna.tf32.f32 rounds: SOP_TO_TF32, which --tf32 puts around the operands of
 * every f32 contraction step (lower.c tf32_factor; not an operation of the language).
 * Infinities and NaN are kept; a value past tf32's largest rounds to infinity. */
float ir_f32_to_tf32(float x);
/* op (not a conversion) on f64 values, in double precision, as generated code computes it: the
 * same definitions as scalar_op_eval's, with libm's functions of doubles (exp, log, tanh, pow …)
 * where the f32 forms use tsrc's approximations or libm's float functions (docs/ir.md §2.9). */
double ir_f64_op_eval(ScalarOp op, double a, double b, double c);
/* f64 to i32 as SOP_TO_I32 converts: toward zero, saturating, NaN to 0 (as ir_f32_to_i32). */
int32_t ir_f64_to_i32(double x);

/* A value of any element type, as the reference executor and the constant folder carry it: an
 * f32 in `f`, an i32 as its bit pattern in `f` (ir_i32_of_bits), an f64 in `d`, an i64 in `i`
 * (the same 8 bytes: generated code carries an i64's bits in a double). */
typedef union IrValue {
    float f;
    double d;
    int64_t i;
} IrValue;
/* op of values of type `operands` giving a value of type `type` (the two differ only for a
 * conversion, SOP_TO_*), as generated code computes it. */
IrValue ir_op_eval(ScalarOp op, unsigned type, unsigned operands, const IrValue x[3]);
/* The value of a constant (IrExpr.value read as its type), and a value as IrExpr.value holds it. */
IrValue ir_const_value(unsigned type, double value);
double ir_value_number(unsigned type, IrValue v);
/* Whether op is a conversion (SOP_TO_F32, SOP_TO_I32, SOP_TO_I64, SOP_TO_F64, SOP_TO_BF16, SOP_TO_F16; the
 * last two give an f32, the nearest bf16 or f16 value of the operand, docs/ir.md §2.10; and
 * SOP_WIDEN, a half value as f32 and any other as itself, SOP_TO_U8 and SOP_TO_BOOL, which
 * assign.c resolves into one of those, i32 operations or nothing, so that no later stage meets
 * them). */
bool scalar_op_conversion(ScalarOp op);
/* An i32 carried in a float's 4 bytes, and back: how i32 cells travel through f32 values. */
int32_t ir_i32_of_bits(float bits);
float ir_bits_of_i32(int32_t v);
/* f32 to i32 as SOP_TO_I32 converts: toward zero, saturating at the i32 limits, NaN to 0 (as
 * PTX's cvt.rzi.s32.f32 and LLVM's fptosi.sat). */
int32_t ir_f32_to_i32(float x);
/* Whether `op` has an i32 form (IrExpr.i32): + - * / mod neg abs sign floor max min relu, the
 * comparisons, the logical operations and where. */
bool scalar_op_integer(ScalarOp op);
/* op on i32 values, as generated code computes it: + - * wrap (two's complement), / and mod are
 * floor division and floor modulo (0 for a divisor 0; INT32_MIN / -1 wraps to INT32_MIN), floor
 * is the value itself, a comparison or a logical operation gives 1 or 0, where picks b when a is
 * not 0 (docs/ir.md §2.8). */
int32_t ir_i32_op_eval(ScalarOp op, int32_t a, int32_t b, int32_t c);
/* The same on i64 values (INT64_MIN / -1 wraps to INT64_MIN); ir_i32_op_eval is its low 32 bits
 * on the i32 values widened. */
int64_t ir_i64_op_eval(ScalarOp op, int64_t a, int64_t b, int64_t c);
/* A number as SOP_TO_I64 converts it: toward zero, saturating at the i64 limits, NaN to 0. */
int64_t ir_f64_to_i64(double x);

/* Accumulators of assignment operators (docs/language.md §2.9). */
typedef enum AccumOp {
    ACC_NONE, /* `=:`: overwrite */
    ACC_ADD, ACC_SUB, ACC_MUL, ACC_DIV, ACC_POW, ACC_RELU_GATE, ACC_SAT01_GATE, ACC_OR, ACC_AND,
    ACC_MAX, ACC_MIN,
} AccumOp;

/* Parse "=:+", "=+", "=:" …; false for an unknown operator. */
bool accum_parse(const char *text, AccumOp *op, bool *reset);
const char *accum_text(AccumOp op, bool reset);
float accum_neutral(AccumOp op);
ScalarOp accum_scalar_op(AccumOp op); /* the operation of lhs ⊕ r (SOP_COUNT for ACC_NONE) */
/* lhs ⊕ r. */
float accum_apply(AccumOp op, float lhs, float r);

/* ---- The loop IR ------------------------------------------------------------------------------ */

/* Buffer kinds and initialisations: the lists the runtime's image reader shares
 * (runtime/image_format.h), so each kind's number is the image's. */
#define IR_KIND_BUF(name) BUF_##name,
#define IR_KIND_INIT(name) INIT_##name,
typedef enum BufferKind { TSR_BUFFER_KINDS(IR_KIND_BUF) } BufferKind;
typedef enum InitKind { TSR_INIT_KINDS(IR_KIND_INIT) } InitKind;
#define IR_KIND_DTYPE(name, word, numpy, ctype) DTYPE_##name,
typedef enum DType { TSR_DTYPE_KINDS(IR_KIND_DTYPE) } DType;
#undef IR_KIND_DTYPE
/* The type's name in the language ("f32", "i32", "f64"); "?" past the last. */
const char *ir_dtype_word(unsigned dtype);
/* The bytes of one cell of the type (4 for f32 and i32, 8 for f64, 2 for bf16 and f16, 1 for
 * u8 and bool). */
unsigned ir_dtype_bytes(unsigned dtype);
/* The type a cell of `dtype` is computed in: f32 for bf16 and f16 (storage types: a load widens
 * exactly, a store rounds to nearest even, docs/ir.md §2.10), i32 for u8 and bool (a load
 * zero-extends, a store keeps a u8's low 8 bits and a bool's value ≠ 0, docs/ir.md §2.8), else
 * the type itself. */
unsigned ir_dtype_compute(unsigned dtype);
/* Whether `dtype` is a 2-byte storage type (bf16, f16), a 1-byte one (u8, bool), an integer
 * type (i32, u8, bool: computed as i32). */
static inline bool ir_dtype_half(unsigned dtype) { return dtype == DTYPE_BF16 || dtype == DTYPE_F16; }
static inline bool ir_dtype_byte(unsigned dtype) { return tsr_dtype_byte(dtype); }
static inline bool ir_dtype_integer(unsigned dtype) { return tsr_dtype_integer(dtype); }
/* Whether values of `dtype` are 8 bytes (f64, and i64, whose bits travel in a double). */
static inline bool ir_dtype_wide(unsigned dtype) { return dtype == DTYPE_F64 || dtype == DTYPE_I64; }
/* The operation that rounds a value to a bf16 or f16 cell's grid (SOP_TO_BF16, SOP_TO_F16). */
static inline ScalarOp ir_dtype_rounding(unsigned dtype) { return dtype == DTYPE_BF16 ? SOP_TO_BF16 : SOP_TO_F16; }
/* An IR_MMA's reduction steps and its A and B registers a thread (ir.h IrMma; `in` DTYPE_F32: tf32). */
static inline unsigned ir_mma_k(unsigned in) { return in == DTYPE_F32 ? 8 : 16; }
static inline unsigned ir_mma_a_registers(unsigned in) { return in == DTYPE_F32 ? 4 : 8; }
static inline unsigned ir_mma_b_registers(unsigned in) { return in == DTYPE_F32 ? 2 : 4; }
#undef IR_KIND_BUF
#undef IR_KIND_INIT

typedef struct IrBuffer {
    uint32_t id;
    const char *name;     /* unique, printable */
    bool grad;            /* a tensor's gradient (else its value) */
    BufferKind kind;
    DType dtype;          /* its cells' element type (DTYPE_F32 unless the program says otherwise) */
    uint32_t rank;
    uint64_t *dims;       /* memory order */
    uint64_t size;        /* cells */
    InitKind init;
    double fill;          /* INIT_FILL: the value; INIT_UNIFORM, INIT_NORMAL: the scale */
    double init_shift;    /* INIT_UNIFORM, INIT_NORMAL: shift + fill * (u in [-1, 1), or n ~ N(0, 1)) */
    const double *values; /* INIT_VALUES: size values */
    bool keep;            /* observable (named, parameter, input…): never virtualised or dropped */
    bool persistent;      /* its value carries from one run of a routine to the next (an unnamed
                           * tensor's gradient, which `=+` accumulates): not virtualised, unless
                           * every function overwrites it before reading it (opt.c) */
    bool is_virtual;      /* inlined into its readers: no storage */
    bool training_state;  /* a state tensor of code (`{ m } =: …`: an optimiser's moments, its step
                           * count): a checkpoint of every parameter holds it too (image flag) */
    bool carried;         /* training_state, a parameter's gradient that a routine adds into before
                           * it resets it (Train.accumulate's micro-batches): the sums so far carry
                           * from one run to the next, and each process has its own (image flag) */
    bool kernel_local;    /* BUF_SCRATCH private to each run of a kernel (a register tile):
                           * backends keep it in registers or on the stack, not in the state */
    bool gpu_shared;      /* kernel_local, shared by the threads of a GPU block (shared memory) */
    uint32_t swizzle;     /* gpu_shared, when not 0: stored with the tensor cores' swizzle of that many
                           * bytes (32, 64 or 128; ir_swizzle_byte), starting on a multiple of 8·swizzle
                           * bytes of shared memory: what the IR says of its cells holds as written,
                           * only where each cell's bytes lie moves (cg_ptx.c, cg_llvm.c) */
    uint32_t prefetch_cells; /* BUF_SCRATCH that tiles read as one forward stream, one value at a
                              * time (a packed operand's rows, sched_tile.c): native code prefetches
                              * this many cells ahead of each such read (0: no prefetch) */
    uint64_t thread_cells; /* kernel_local, when not 0: each GPU thread's own `thread_cells`
                            * cells (registers); its index's terms in thread-loop iterators
                            * choose the thread, the rest the cell (cg_llvm.c drops the former) */
    const char *shape_text; /* "4|5" */
    uint32_t size_symbol; /* a buffer of run-time size (ir_buffer_dynamic: dims[0] is SIZE_RUNTIME_BASE
                           * + a class): the symbol whose value is its outermost axis's length
                           * (an input's own `?`, otherwise its class's first); `size` then counts
                           * the cells of one index of that axis.  Only that axis may be a
                           * run-time size, so every stride is known at compile time. */
} IrBuffer;

static inline bool ir_buffer_dynamic(const IrBuffer *b) { return b->rank && size_is_runtime(b->dims[0]); }

typedef struct IrTerm {
    uint32_t iter;
    int64_t coef;
} IrTerm;

/* offset + Σ coef·iter (+ the value of `symbol`), or, with `gather` set, the value of that
 * expression (an i32, read as the position on this axis, clamped to the axis: a gathered axis,
 * docs/ir.md §2.8), and nothing else. */
typedef struct IrExpr IrExpr;
typedef struct IrIndex {
    int64_t offset;
    IrTerm *terms;
    uint32_t term_count;
    const char *symbol;
    IrExpr *gather;
} IrIndex;

typedef enum IrExprKind {
    IR_CONST,  /* value */
    IR_LOAD,   /* buffer[index…] */
    IR_LOCAL,  /* local scalar */
    IR_OP,     /* op(args) */
    IR_SYMBOL, /* run-time value of an index symbol */
    IR_RANDOM, /* random(buffer[index…]): a uniform number in [0, 1) for that cell of `buffer` in
                * the routine run under way (docs/ir.md §2.5); reads no memory.  Its value is
                * tsr_random_cell(seed, run, ir_random_site(buffer), the cell's flat offset), so
                * it depends on where the cell is, never on the schedule or the thread.  `buffer`
                * is the tensor being computed, never virtual (opt.c keeps such stores). */
} IrExprKind;

struct IrExpr {
    IrExprKind kind;
    ScalarOp op;
    DType type;      /* the element type of the value (ir_expr_type; an IR_LOAD's is its buffer's
                      * compute type, ir_dtype_compute, whatever this says: f32 for a bf16 or f16
                      * buffer).  Never bf16 or f16: those are storage types (§2.10); SOP_TO_BF16
                      * and SOP_TO_F16 give the f32 nearest on their grid.  IR_OP: also the type its operands have and it
                      * computes in, except for a conversion (SOP_TO_*: the result's type, the
                      * operand's is its own): on i32 values (their bits in 4-byte cells), +, -
                      * and * wrap as two's complement and a comparison gives 1 or 0 (docs/ir.md
                      * §2.8); on f64 values every operation is done in double precision (libm's
                      * functions of doubles, §2.9).  IR_CONST: `value` as that type (an i32's
                      * integer, an f64's double, an f32's value rounded to float).  IR_LOCAL:
                      * the local's type, that of every value set into it. */
    double value;
    uint32_t buffer;
    IrIndex *index; /* one per buffer axis */
    uint32_t local;
    const char *symbol;
    IrExpr *args[3];
};

/* How a loop runs (the schedule's choice, sched.c; the meaning is always the plain loop's). */
typedef enum IrLoopMode {
    LOOP_PLAIN,  /* an ordinary loop */
    LOOP_UNROLL, /* unrolled completely by the backend: its iterator is a constant in each copy */
    LOOP_VECTOR, /* its iterations are the lanes of one vector operation (innermost only) */
    LOOP_TRANSPOSE, /* a copy transposed in registers: its body is one vector loop whose one
                     * statement is `P[…] = S[…]`, S moving by one cell per lane of the vector
                     * loop and P by one cell per iteration of this loop (extent ≤ the vector
                     * loop's, a power of two); the backend loads rows of S, transposes them and
                     * stores rows of P */
    /* A register tile's loop over pairs of reduction steps, p < K/2 (sched_tile.c, docs/ir.md
     * §5.4; CPUs with AVX-512 BF16 whose Target has bf16_pairs).  Its guard is the i32 local
     * `local`, set before the loop (0 when no operand cell of the tile is tiny: nonzero and below
     * 2^-56 in magnitude); its body is one unroll loop e < 2 around the tile's unroll, unroll,
     * vector loops of 16 lanes holding T[cell] = fma(A[…], B[…], T[cell]): A and B bf16 panels
     * with the two steps of a pair in one 32-bit cell, step 2p in its high half (e = 0 at
     * offset +1), B's lanes a pair apart.  Where the local is 0 and T's cells are 0 or at
     * least 2^-103 in magnitude, the backend computes each pair with one VDPBF16PS, which adds
     * the high half's product first and flushes subnormals: no product and no partial sum is
     * subnormal then, so it rounds exactly as the two fmas do.  Otherwise it runs the plain
     * loop. */
    LOOP_DOT_PAIRS,
    /* An asynchronous copy into shared memory (sched_mma.c, rewrite 6t; sm_80 and later): the
     * loop's one statement is `P[…] = S[…]`, P a gpu_shared buffer and S a device buffer of
     * the same type, both moving by one cell per iteration, each run of `extent` cells aligned
     * to its bytes (4, 8, 16 or a multiple of 16).  Each thread issues it as cp.async copies of
     * at most 16 bytes and goes on; the copies that one phase of a block's kernel (a nest of
     * thread loops) issues form one group, which lands in P by an IR_BARRIER whose
     * await_copies says so (below).  The reference executor copies at once. */
    LOOP_ASYNC_COPY,
    /* A strip-mined loop (sched.c, docs/ir.md §5.2, §5.3): the loop's extent is a run-time
     * size n (or a compile-time one: a reduction split into blocks that fit the cache); S =
     * ⌊n / after⌋·after (0 when `block_after` is 0), then S + block, … while
     * S + block ≤ n: the whole blocks of `block` rows that the blocks of `block_after` rows
     * before it left.  Each iteration sets symbol `block_symbol` to S, which the body's indices
     * add to the axis they walk; `iter` is unused.  The body is nests of compile-time sizes,
     * scheduled as any, which the host runs for each block (kernel.h). */
    LOOP_BLOCKS,
    /* GPU modes (sched_gpu.c): the loop's iterations run on different GPU threads at once, so
     * they must be independent (a parallel loop); a GPU loop is only ever an outermost loop of
     * a kernel or directly inside another GPU loop. */
    LOOP_GPU_X, /* iteration blockIdx.x · threads + threadIdx.x, `threads` along x in a block;
                 * the threads past the extent in the last block do nothing (the guard) */
    LOOP_GPU_Y, /* the same along y */
    LOOP_GPU_Z, /* the same along z */
    /* A block's kernel (sched_gpu.c rewrite 6): block loops are the grid (iteration blockIdx.d),
     * thread loops the threads of a block (iteration threadIdx.d; their extent is the block's
     * size along d).  Between the block loops and the thread loops lie phases: each run of a
     * nest of thread loops is one phase for all threads of the block, and an IR_BARRIER
     * separates phases that share a gpu_shared buffer.  Run as plain loops (the reference
     * executor), each phase runs every thread before the next phase starts, which is what the
     * barriers guarantee on the GPU.  A thread loop may split its dimension with one loop of
     * that dimension inside it: the outer's thread_stride is the inner's extent, its iteration
     * threadIdx.d / thread_stride, the inner's threadIdx.d mod its extent (a block's warps as a
     * grid of rows and columns of warps, sched_mma.c, rewrite 6t). */
    LOOP_BLOCK_X, LOOP_BLOCK_Y, LOOP_BLOCK_Z,
    LOOP_THREAD_X, LOOP_THREAD_Y, LOOP_THREAD_Z,
} IrLoopMode;

static inline bool ir_mode_flat_gpu(IrLoopMode m) { return m >= LOOP_GPU_X && m <= LOOP_GPU_Z; }
static inline bool ir_mode_block(IrLoopMode m) { return m >= LOOP_BLOCK_X && m <= LOOP_BLOCK_Z; }
static inline bool ir_mode_thread(IrLoopMode m) { return m >= LOOP_THREAD_X && m <= LOOP_THREAD_Z; }
/* Whether the loop's iterations run on different GPU threads or blocks. */
static inline bool ir_mode_gpu(IrLoopMode m) { return m >= LOOP_GPU_X; }

typedef enum IrStmtKind {
    IR_LOOP,      /* for iter < extent: body */
    IR_STORE,     /* buffer[index…] = value */
    IR_SET_LOCAL, /* local = value */
    IR_BARRIER,   /* every thread of the block waits here (between the phases of a block's
                   * kernel, ir.h LOOP_BLOCK_X); nothing for the reference executor */
    IR_CALL,      /* the runtime carries out action `action` (IrProgram.actions) here: a
                   * top-level statement of a function, between two of its kernels, that reads
                   * and writes the action's buffers (REDUCE: their mean across processes) */
    IR_MMA,       /* every warp of the block multiplies on the tensor cores (IrMma below): a
                   * statement of a block's kernel between its thread loops, like a barrier */
    IR_LDMATRIX,  /* every warp of the block loads 8×8 matrices from shared memory into its
                   * threads' registers (IrLdmatrix below): placed as IR_MMA is */
    IR_WGMMA,     /* the block, one warpgroup, multiplies panels in shared memory on the
                   * tensor cores (IrWgmma below, sm_90a): placed as IR_MMA is */
} IrStmtKind;

/* IR_MMA: D = A·B + C for one 16×8 tile of C per warp, over K = 16 steps of the reduction
 * (PTX's mma.sync.m16n8k16.row.col.f32.{bf16,f16}) or, for tf32, K = 8 (mma.sync.m16n8k8.row.col
 * .f32.tf32), the warps of a block each doing their own.  The operands are held by the warp's 32
 * threads in per-thread registers (buffers with thread_cells, indexed by the thread's number
 * t = threadIdx.x + 4·threadIdx.y + 32·threadIdx.z times thread_cells plus the register): with
 * lane l = t mod 32, g = l / 4 and q = l mod 4,
 *   bf16, f16:
 *   A (16 × 16): register a_at + r, r < 8, holds A[g + 8·(r/2 mod 2)][2q + r mod 2 + 8·(r/4)]
 *   B (16 × 8):  register b_at + r, r < 4, holds B[2q + r mod 2 + 8·(r/2)][g]
 *   tf32:
 *   A (16 × 8):  register a_at + r, r < 4, holds A[g + 8·(r mod 2)][q + 4·(r/2)]
 *   B (8 × 8):   register b_at + r, r < 2, holds B[q + 4r][g]
 *   both:
 *   C (16 × 8):  register c_at + r, r < 4, holds C[g + 8·(r/2)][2q + r mod 2]
 * (the fragment layouts of the PTX ISA, §9.7.14.5.7–8).  A and B registers are cells of type
 * `in` (bf16, f16: two of them make one 32-bit register of the instruction), or for tf32 f32
 * values the schedule rounded to tf32; C's are f32.  D replaces C.  The reference executor takes the K steps of each cell in order as fused
 * multiply-adds, which is what the canonical nest computes; the tensor cores add the products
 * in an order and precision of their own (docs/gpu.md). */
typedef struct IrMma {
    DType in;                      /* DTYPE_BF16 or DTYPE_F16; DTYPE_F32: tf32 */
    uint32_t warps;                /* the block's warps: 32·warps threads */
    uint32_t a, b, c;              /* the per-thread register buffers */
    uint32_t a_at, b_at, c_at;     /* the first register of each in a thread's */
} IrMma;

/* IR_LDMATRIX: each warp of the block loads `matrices` (1, 2 or 4) matrices of 8 rows of 16
 * bytes from gpu_shared buffer `panel` into its threads' registers (PTX's ldmatrix.sync.aligned
 * .m8n8.x{1,2,4}[.trans].shared.b16).  The warps stand in rows of warps_j (warp z = warps_j·zi +
 * zj, as IR_MMA's threads number them); lane L < 8·matrices of warp (zi, zj) names row L mod 8
 * of matrix i = L / 8, the run of 16 bytes starting at the panel's cell
 *     at + zi·warp_row + zj·warp_col + (L mod 8)·row + bit₀(i)·matrix[0] + bit₁(i)·matrix[1]
 * (every such cell 16-byte aligned, the run inside the panel).  Lane l = 4g + q of the warp then
 * receives 4 bytes of each matrix i: those at bytes 4q … 4q + 3 of row g, or with `trans`
 * (2-byte cells only) cell g of row 2q and cell g of row 2q + 1; they become its registers
 * regs_at + n·i … regs_at + n·i + n − 1, n = 4 / the cell's bytes (2 for bf16 and f16, the
 * first cell first; 1 for f32), in `regs`, a per-thread buffer (thread_cells) of the panel's
 * type.  The cells are copied bit for bit.  A warp's tile of A or B fragments for IR_MMA is one
 * or a few of these (sched_mma.c). */
typedef struct IrLdmatrix {
    uint32_t warps, warps_j;       /* the block's warps, in rows of warps_j */
    uint32_t matrices;             /* 1, 2 or 4 */
    bool trans;
    uint32_t panel, regs, regs_at;
    int64_t at, warp_row, warp_col, row;
    int64_t matrix[2];
} IrLdmatrix;

/* An operand panel of IR_WGMMA in shared memory, in the tensor cores' core matrices (8 rows of
 * 16 bytes, c = 16/`bytes` cells a row: 8 of bf16 or f16, 4 of tf32's f32 cells): cell (r, k) —
 * r its place along the block's tile (A's row, B's column), k its reduction step — is, without
 * swizzling (swizzle 0), at
 *     at + (r / 8)·stride + (k / c)·leading + (r mod 8)·c + k mod c      (K-major: k contiguous)
 *     at + (r / c)·stride + (k / 8)·leading + (k mod 8)·c + r mod c      (mn_major: r contiguous)
 * in cells (PTX's canonical layouts without swizzling: `leading` the distance between core
 * matrices along k, `stride` along the tile, each a multiple of c cells).  With a swizzle
 * of W = 32, 64 or 128 bytes (E = W/`bytes` cells; the panel's buffer is stored with the same
 * swizzle, IrBuffer.swizzle) the canonical layouts are rows of E cells:
 *     at + (r / 8)·stride + (r mod 8)·E + k                              (K-major, k < E)
 *     at + (r / E)·leading + (k / 8)·stride + (k mod 8)·E + r mod E      (mn_major)
 * (PTX's swizzled layouts: `stride` its stride byte offset, `leading` its leading byte offset,
 * unused along a K-major one's k, which a row holds whole).  These are the cells before the
 * swizzle: the descriptors name them, and the tensor cores, like the buffer's stores, move
 * each 16 bytes by ir_swizzle_byte.  tf32 operands are K-major (wgmma transposes 16-bit cells
 * alone). */
typedef struct IrCoreLayout {
    int64_t at, leading, stride;
    bool mn_major;
    uint32_t swizzle; /* 0, 32, 64 or 128: the bytes of a swizzled row */
    uint32_t bytes;   /* a cell's: 2 (bf16, f16) or 4 (tf32's f32 cells) */
} IrCoreLayout;

/* The cell of (r, k) in a core-matrix layout. */
static inline int64_t ir_core_cell(const IrCoreLayout *l, int64_t r, int64_t k) {
    int64_t c = 16 / l->bytes; /* a core matrix row's cells */
    if (l->swizzle) {
        int64_t e = l->swizzle / l->bytes;
        if (l->mn_major) return l->at + r / e * l->leading + k / 8 * l->stride + k % 8 * e + r % e;
        return l->at + r / 8 * l->stride + r % 8 * e + k;
    }
    if (l->mn_major) return l->at + r / c * l->stride + k / 8 * l->leading + k % 8 * c + r % c;
    return l->at + r / 8 * l->stride + k / c * l->leading + r % 8 * c + k % c;
}

/* What a wgmma descriptor says of layout l besides its start (PTX's matrix descriptor): the
 * leading and stride byte offsets and the swizzling mode (1: 128 bytes, 2: 64, 3: 32, 0: none). */
static inline void ir_core_descriptor(const IrCoreLayout *l, int64_t *leading_bytes, int64_t *stride_bytes, int *mode) {
    *leading_bytes = l->bytes * l->leading;
    *stride_bytes = l->bytes * l->stride;
    *mode = l->swizzle == 128 ? 1 : l->swizzle == 64 ? 2 : l->swizzle == 32 ? 3 : 0;
}

/* The reduction steps of one wgmma.mma_async on cells of `in`: 32 bytes of each operand's rows
 * (16 of bf16 or f16, 8 of tf32, DTYPE_F32). */
static inline uint32_t ir_wgmma_k(DType in) { return in == DTYPE_F32 ? 8 : 16; }

/* Where byte `byte` of a buffer stored with a swizzle of `width` bytes (0: none; IrBuffer.swizzle)
 * lies: its 16-byte unit within 128 bytes exclusive-ored with the 128-byte row's number modulo
 * width/16 (PTX's 32-, 64- and 128-byte swizzling modes, whose pattern repeats every 8·width
 * bytes: the buffer starts on such a multiple).  A 16-byte aligned run of 16 bytes stays whole. */
static inline int64_t ir_swizzle_byte(int64_t byte, uint32_t width) {
    if (!width) return byte;
    return byte ^ ((byte >> 7 & (int64_t)(width / 16 - 1)) << 4);
}

/* IR_WGMMA: the block's threads, `warpgroups` warpgroups of 128 (1 or 2), add A·B to C over
 * `steps` reduction steps (a multiple of 16), A the rows × steps cells of panel `a`, B the
 * steps × n cells of panel `b` (bf16 or f16, `in`; or f32 cells holding tf32 values, `in`
 * DTYPE_F32, both panels K-major), by the layouts above, C rows × n f32 cells
 * (rows 64 or 128, n a multiple of 8 up to 256) in the threads' registers.  Warpgroup v takes
 * R = rows/warpgroups rows (64 or 128) from row R·v: for each 64 of them, h, its thread
 * t = 128v + 32w + 4g + q holds in register c_at + h·n/2 + 4i + 2r₁ + r₀ (i < n/8) the cell
 *     C[R·v + 64h + 16w + g + 8r₁][8i + 2q + r₀]
 * (PTX's wgmma.mma_async.m64nNk16 accumulator layout).  Each warpgroup issues, for each of its
 * halves and each ir_wgmma_k steps in order, one wgmma.mma_async reading both panels through their
 * descriptors, fenced before the first, the statement's instructions one group, committed after the last
 * and awaited until at most `in_flight` groups of the warpgroup are still running: 0, the
 * statement is done when it ends; 1, it may still read its panels and add into C while the
 * block goes on, and is done when the next statement's wait ends (the schedule then reads
 * neither C nor overwrites these panels before that: the reference executor checks both).
 * The reference executor takes each cell's steps in order as fused multiply-adds, as IR_MMA
 * does. */
typedef struct IrWgmma {
    DType in;                      /* DTYPE_BF16, DTYPE_F16, or DTYPE_F32 for tf32 */
    uint32_t warpgroups;           /* 1 or 2 */
    uint32_t rows, n, steps;
    uint32_t a, b;                 /* the gpu_shared panels */
    IrCoreLayout a_layout, b_layout;
    uint32_t c, c_at;              /* the per-thread f32 registers */
    uint32_t in_flight;            /* the warpgroup's groups left running when it ends: 0 or 1 */
} IrWgmma;

typedef struct IrStmt IrStmt;
typedef struct IrBlock {
    IrStmt **items;
    uint32_t count, cap;
} IrBlock;

struct IrStmt {
    IrStmtKind kind;
    /* IR_LOOP */
    uint32_t iter;
    uint64_t extent;
    bool parallel;
    IrLoopMode mode;
    uint32_t threads;  /* GPU loops: the block's threads along the loop's dimension */
    uint32_t thread_stride; /* thread loops: the threads of one iteration (0 or 1: one); see LOOP_THREAD_X */
    uint32_t block, block_after; /* LOOP_BLOCKS: the rows of a block, of the blocks before */
    uint32_t block_symbol; /* LOOP_BLOCKS: the symbol S */
    uint32_t prefetch_rows; /* LOOP_TRANSPOSE on the CPU, when not 0: each row it loads is also
                             * prefetched (into L2) this many rows further along its iterator, the
                             * rows a row reduction's next block reads (sched.c rewrite 2d) */
    IrBlock body;
    /* IR_STORE */
    uint32_t buffer;
    IrIndex *index;
    /* IR_SET_LOCAL */
    uint32_t local;
    IrExpr *value;     /* STORE, SET_LOCAL */
    bool nontemporal;  /* STORE in a vector loop, aligned to the vector (the schedule's): written
                        * around the caches, for a large buffer the nest does not read */
    /* IR_BARRIER: with await_copies, each thread first waits until at most copies_in_flight of
     * the groups of asynchronous copies it issued (LOOP_ASYNC_COPY) have not landed; with
     * fence_async, each thread first orders its stores into shared memory before the async
     * proxy's reads (fence.proxy.async: a warpgroup product after the barrier reads what the
     * threads stored, sched_mma.c) */
    bool await_copies, fence_async;
    uint32_t copies_in_flight;
    /* IR_CALL */
    uint32_t action;
    /* IR_MMA */
    IrMma mma;
    /* IR_LDMATRIX */
    IrLdmatrix ldmatrix;
    /* IR_WGMMA */
    IrWgmma wgmma;
    const char *comment; /* optional, printed before the statement */
};

typedef struct IrFunction {
    const char *name;
    Span span;            /* the routine's definition (no file: the implicit forward) */
    IrBlock body;
    uint32_t iter_count;
    uint32_t local_count;
} IrFunction;

/* ---- The program plan: what an executable does (plan.c) --------------------------------------- */

/* A symbol: a run-time integer.  An index symbol is in 0 … range-1 (an `index` item or a loop
 * counter); a size symbol is a run-time size `?` as written for one input axis, at least
 * `range`, and equal, when a routine runs, to the symbol `leader` (its class's first `?`), whose
 * value is the extent of the class's loops. */
typedef struct IrSymbol {
    const char *name; /* unique */
    int64_t range;
    bool settable;    /* an `index` item or a size (object mode exports a setter), not a loop
                       * counter of main */
    bool size;        /* a size symbol */
    uint32_t leader;  /* a size symbol's class's first (itself for the first) */
    Span span;        /* the `index` item, or the `?` written for a size (none: a loop block) */
} IrSymbol;

#define IR_KIND_ARG(name) IRP_##name,
typedef enum IrPrintArgKind { TSR_ARG_KINDS(IR_KIND_ARG) } IrPrintArgKind;
#undef IR_KIND_ARG

typedef struct IrPrintArg {
    IrPrintArgKind kind;
    int64_t i;
    double f;
    uint32_t ref; /* IRP_SYMBOL: symbol; IRP_BUFFER: buffer (cell 0 is printed) */
} IrPrintArg;

/* A print statement: a format and its arguments, or (format NULL) one buffer as a grid. */
typedef struct IrPrint {
    const char *format;
    const char *label;
    IrPrintArg *args;
    uint32_t arg_count;
} IrPrint;

#define IR_KIND_ACTION(name) IRA_##name,
typedef enum IrActionKind { TSR_ACTION_KINDS(IR_KIND_ACTION) } IrActionKind;
#undef IR_KIND_ACTION

/* A statement of main that the runtime carries out (runtime/steps.c): a checkpoint (`text` the
 * file, `buffers` what it holds, none: every parameter), a shuffle (`buffers` the fields of
 * data set `value`, each of `rows` rows), a record (buffers[0] onto series `value`), a plot of
 * series `value` (titled `text`), or a loop's progress bar (titled `text`).  Or one that a
 * routine's code calls (IR_CALL): REDUCE, every buffer in `buffers` made the mean of its cells
 * across the processes of a distributed run (`text` says what for, in dumps). */
typedef struct IrAction {
    IrActionKind kind;
    const char *text;
    int64_t value, rows;
    uint32_t *buffers;
    uint32_t buffer_count;
} IrAction;

typedef enum IrMainKind { IRM_FOR, IRM_RUN, IRM_PRINT, IRM_ACTION } IrMainKind;

typedef struct IrMainStmt IrMainStmt;
struct IrMainStmt {
    IrMainKind kind;
    uint32_t symbol;      /* FOR */
    int64_t from, to;     /* FOR: inclusive; added to the option's value where one is named */
    uint32_t from_option, to_option; /* FOR: an option read at run time (IrProgram.options), or
                                        UINT32_MAX; the loop is then checked against the
                                        symbol's range when it starts */
    bool down;            /* FOR */
    IrMainStmt *body;     /* FOR */
    uint32_t body_count;
    uint32_t function;    /* RUN */
    uint32_t print;       /* PRINT: into IrProgram.prints */
    uint32_t action;      /* ACTION: into IrProgram.actions; FOR: its progress bar, or UINT32_MAX */
};

/* A named tensor or gradient that object mode exports (header.c). */
typedef struct IrExport {
    const char *shown;    /* the name --print-shapes shows ("l1.w", "x.grad") */
    uint32_t buffer;
    bool grad;
} IrExport;

/* A `data` item: a generator or a file, and the buffers it fills (image.c, the runtime). */
typedef struct IrDataSet {
    const char *name;
    const char *generator; /* half_moons circles spirals range uniform npy csv */
    const char *path;      /* npy, csv */
    int64_t count, seed;
    double noise, factor;
    int64_t bound;         /* > 0: every value must be a whole number below it (DataSource.bound) */
    bool sharded;          /* read by a routine that averages across processes (a REDUCE call):
                            * split among the processes of a distributed run, by samples */
    uint32_t sample_axes;  /* its tensors' batch axes (at least 1: the first axis without any),
                            * whose indices together number its samples (an image, a window) */
    bool batched;          /* it has batch axes: a set without (a table of constants the loss
                            * reads) is no batch of samples, and is never split */
    uint32_t fields[2];    /* buffers */
    uint32_t field_count;
} IrDataSet;

/* An `option` item: a number the executable's command line may set (the runtime's args.c). */
typedef struct IrOption {
    const char *name;
    bool is_float;
    uint8_t among; /* TSR_OPTION_AMONG_* (elab.h ProgramOption) */
    double value;  /* the default */
} IrOption;

typedef struct IrProgram {
    Arena *arena;
    IrBuffer *buffers;
    uint32_t buffer_count, buffer_cap;
    IrFunction *functions;
    uint32_t function_count, function_cap;
    uint64_t seed;     /* parameter initialisation */
    /* The plan (plan.c). */
    IrSymbol *symbols;
    uint32_t symbol_count;
    uint32_t *class_symbol;   /* per run-time size class k (SIZE_RUNTIME_BASE + k in dims and
                               * extents): the size symbol whose value it is, or UINT32_MAX */
    uint32_t class_count;     /* classes 1 … class_count - 1 */
    bool *exported;           /* per function: a routine of the program (not made by `main`) */
    IrPrint *prints;
    uint32_t print_count, print_cap;
    IrMainStmt *main;         /* the program's main, or the implicit one */
    uint32_t main_count;
    IrExport *exports;        /* named tensors, then their gradients */
    uint32_t export_count, export_cap;
    IrDataSet *datasets;
    uint32_t dataset_count;
    IrOption *options;
    uint32_t option_count;
    IrAction *actions;        /* the statements of main the runtime carries out */
    uint32_t action_count, action_cap;
    uint64_t program_hash;    /* the lowered program and its main (plan_program_hash): the
                               * processes of a distributed run compare it, so that one running
                               * another build of another program is refused (image.c, state.c) */
    uint64_t image_checksum;  /* the checksum of the model image compiled into the object (its
                               * header's, image_build): the manifest records it, so a manifest
                               * is matched to its library (the Python package) */
    bool tf32_products;       /* --tf32: lowering rounds both factors of every f32 product that a
                               * reduction accumulates to tf32 (SOP_TO_TF32, lower.c) */
    bool attention_row_each;  /* --target=cuda: each run of a fused attention nest handles one
                               * row (one GPU thread a row), not lower_attention.c's ROW_BLOCK */
} IrProgram;

/* The index of the symbol named `name`, or UINT32_MAX. */
uint32_t ir_symbol(const IrProgram *ir, const char *name);
/* A new BUF_SCRATCH buffer of `dtype` cells with the shape of buffer `of` and nothing else of it,
 * named `name`: f32, where a bf16 or f16 sum accumulates before it is rounded once (lowering's
 * scatters, the schedule's reductions); of `of`'s own type, the values an assignment that reads
 * its own left side reads (lowering's snapshots). */
uint32_t ir_twin(IrProgram *ir, uint32_t of, DType dtype, const char *name);

/* ir.c: printing and checking. */
void ir_dump(const IrProgram *ir, FILE *out);
/* Checks the invariants of docs/ir.md; returns the number of problems (printed to `out`). */
unsigned ir_verify(const IrProgram *ir, FILE *out);
void ir_block_push(Arena *arena, IrBlock *block, IrStmt *stmt);
/* Whether e loads `buffer` anywhere (gathered axes' expressions included). */
/* The coefficient of iterator `iter` in the flat (row-major) offset of `index` into `buffer`:
 * how many cells one step of it moves the access. */
int64_t ir_flat_coef(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter);
bool ir_expr_loads(const IrProgram *ir, const IrExpr *e, uint32_t buffer);
/* Calls visit(ctx, b) for every buffer b that e loads, the loads inside gathered axes' positions
 * included (a buffer loaded twice: twice); ir_index_each_load the same for the gathered axes of
 * `index`, an index of buffer `indexed`.  The walk that opt.c and sched/nest.c list accesses by. */
void ir_expr_each_load(const IrProgram *ir, const IrExpr *e, void (*visit)(void *ctx, uint32_t buffer), void *ctx);
void ir_index_each_load(const IrProgram *ir, uint32_t indexed, const IrIndex *index,
                        void (*visit)(void *ctx, uint32_t buffer), void *ctx);
/* In st (its loops' bodies included), the loads of buffer `from` in stored and set values read
 * `to` instead (not loads inside a gathered axis's position: callers rename buffers that are
 * never gathered by); true if any did. */
bool ir_rename_loads(IrStmt *st, uint32_t from, uint32_t to);
/* Whether the gathered axes of `index` (an index of buffer `indexed`) load `buffer`. */
bool ir_index_loads(const IrProgram *ir, uint32_t indexed, const IrIndex *index, uint32_t buffer);
/* Whether e, or the statement or nest s, accesses a buffer through a gathered axis (IrIndex.gather):
 * the rewrites that reason about indices by their terms leave such code as it is. */
bool ir_expr_gathers(const IrProgram *ir, const IrExpr *e);
bool ir_stmt_gathers(const IrProgram *ir, const IrStmt *s);
/* Whether the statement or nest s computes on i32 values (an IR_OP of type i32, not a
 * conversion). */
bool ir_stmt_integer(const IrStmt *s);
/* Whether s touches f64 values: an expression of type f64, or a load or store of an f64 buffer. */
bool ir_stmt_f64(const IrProgram *ir, const IrStmt *s);
/* The element type of e's value (IrExpr.type; an IR_LOAD's is its buffer's compute type). */
DType ir_expr_type(const IrProgram *ir, const IrExpr *e);
/* Whether s loads or stores a cell of a bf16 or f16 buffer. */
bool ir_stmt_half(const IrProgram *ir, const IrStmt *s);
/* Whether s loads or stores a cell of a u8, bool or i64 buffer, or computes on i64 values. */
bool ir_stmt_untiled_types(const IrProgram *ir, const IrStmt *s);
/* Whether the schedule leaves s as lowered: a call of the runtime, a nest that gathers or
 * computes on i32s (the rewrites reason about indices by their terms), or one that touches bf16,
 * f16, u8, bool or i64 cells (ir_stmt_half, ir_stmt_untiled_types: the tiles are of f32 and f64 cells; the
 * CPU's schedule first makes a half contraction an f32 one over widened copies, sched.c
 * contract_in_f32).  The GPU's schedule also
 * leaves nests that touch f64s (ir_stmt_f64) as lowered; the CPU's tiles them in 8-byte cells. */
bool ir_stmt_as_lowered(const IrProgram *ir, const IrStmt *s);
/* Whether s is a call of the runtime (IR_CALL) whose action reads and writes `buffer`. */
bool ir_call_touches(const IrProgram *ir, const IrStmt *s, uint32_t buffer);
/* Whether s writes `buffer` anywhere: a store into it, or a call of the runtime that touches it. */
bool ir_stmt_writes(const IrProgram *ir, const IrStmt *s, uint32_t buffer);
/* Whether e draws a random number (IR_RANDOM) anywhere. */
bool ir_expr_random(const IrExpr *e);
/* Whether e reads a local (IR_LOCAL) anywhere. */
bool ir_expr_reads_local(const IrExpr *e);
/* The site of a buffer's random numbers: 32-bit FNV-1a of its name (the Philox counter's third
 * word, runtime/rng.c tsr_random_cell), so two tensors draw different numbers. */
uint32_t ir_random_site(const IrBuffer *buffer);
/* The size symbols a run of `fn` needs set, and equal to their class's first, before it starts
 * (tsr_state_check_sizes): the symbol of every buffer of run-time size it touches and of every
 * run-time extent it loops to, in symbol order, into `out` (room for every symbol).  Returns the
 * count. */
uint32_t ir_function_sizes(const IrProgram *ir, const IrFunction *fn, uint32_t *out);
/* Whether two indices of `buffer` are the same, term for term. */
bool ir_same_index(const IrProgram *ir, uint32_t buffer, const IrIndex *a, const IrIndex *b);

#endif
