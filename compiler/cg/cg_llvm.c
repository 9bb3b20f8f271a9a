/* cg_llvm.c — the loop IR in LLVM IR: what every LLVM target shares (cg_llvm.h).
 *
 * What it does: scalar operations, addresses, loops and statements of a kernel (the module, the
 * target machine and the pass pipeline that turns a module into bytes are cg_module.c's).
 * Scalar operations are emitted exactly as ir.c's scalar_op_eval() computes them — no fast-math flags, so no reassociation and
 * no contraction of a multiply and an add that the IR does not fuse itself (SOP_FMA is
 * llvm.fma, one rounding): a reduction adds in the order of its loop, like the reference
 * executor, and results match it bit for bit.  exp, log, tanh and sigmoid are tsrc's own
 * approximations, emitted inline as vector code (cg_approx.c, the sequence ir/approx.c runs);
 * the other transcendental functions call libm (powf, sinf, cosf, log2f, exp2f) lane by lane,
 * as mod calls fmodf (exact); sqrt is the correctly rounded instruction
 * (rsqrt is 1 / sqrt, two roundings, as ir.c computes it), abs is llvm.fabs.  An f64 value
 * (docs/ir.md §2.9) is a double, its cells 8 bytes: the same operations in double precision,
 * with libm's functions of doubles (exp, log, tanh, pow, sin … — never the f32 approximations),
 * as ir.c's ir_f64_op_eval computes them; conversions between types are explicit (conversion()).
 * A bf16 or f16 cell is an i16, widened to f32 where it is loaded and rounded where it is stored
 * by integer code that repeats tsr.h's conversions (widen_half, narrow_half).
 *
 * Loop modes (the schedule's, compiler/sched/): a LOOP_UNROLL loop is emitted once per iteration with
 * its iterator a constant; a LOOP_VECTOR loop of n iterations is emitted once, its iterator
 * standing for the lanes of <n x float> values: a load whose address moves by one cell per
 * lane is a vector load, one that does not move is a scalar (used as a broadcast), any other a
 * gather of scalar loads; stores likewise.  Kernel-local buffers (register tiles) are stack
 * arrays of the kernel, which LLVM's SROA turns into vector registers once the unrolled loops
 * address them at constant offsets.  A LOOP_TRANSPOSE loop is a transposition in registers (of
 * cells, or of pairs of bf16 cells as 32-bit lanes); a LOOP_DOT_PAIRS loop runs VDPBF16PS where
 * its guard allows, the plain loop otherwise (dot_pairs_loop).  A store marked non-temporal (always a whole vector at an
 * aligned address, sched.c) carries LLVM's !nontemporal, and its kernel ends with a fence.
 *
 * GPU loops (gpu.x/y/z, sched_gpu.c; gpu.block and gpu.thread loops of a block's kernel,
 * sched.c) read the thread's block and thread index from the NVPTX special registers and emit
 * their body once; a barrier is llvm.nvvm.barrier0; a per-thread buffer is a stack array of
 * its thread_cells, indexed without its thread-loop terms; shared buffers are the caller's
 * (cg_ptx.c); the tensor cores' statements are cg_tensor.c's.  On a GPU the libm functions are libdevice's (__nv_powf …).
 *
 * Requires: a verified, scheduled IrProgram; kernels from kernel.c. */
#include "cg/cg_llvm.h"

#include "cg/cg_approx.h"

#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cg/abi.h"
#include "base/diag.h"

/* ---- Sizes ------------------------------------------------------------------------------------------ */

LLVMValueRef cgl_size(CgLlvm *g, uint64_t n, LLVMValueRef symbols) {
    if (!size_is_runtime(n)) return cgl_iconst(g, (int64_t)n);
    uint32_t sym = g->ir->class_symbol[size_class(n)];
    if (!symbols) return g->symbol[sym];
    LLVMValueRef idx[1] = {cgl_iconst(g, sym)};
    return LLVMBuildLoad2(g->b, g->i64, LLVMBuildInBoundsGEP2(g->b, g->i64, symbols, idx, 1, ""), "size");
}

static bool is_vector(LLVMValueRef v) { return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind; }

static LLVMTypeRef vec_type(CgLlvm *g) { return LLVMVectorType(g->f32, g->lanes); }

/* An integer constant of `like`'s shape (scalar or vector) and element type. */
static LLVMValueRef iconst_like(CgLlvm *g, LLVMValueRef like, LLVMTypeRef element, uint64_t v) {
    LLVMValueRef c = LLVMConstInt(element, v, 0);
    return is_vector(like) ? cgl_widen(g, c) : c;
}

/* A libm function, applied lane by lane to vectors. */
/* A call of libm's `name`, declared as a pure function (no memory touched, no unwinding): its
 * result depends only on its arguments (errno, which it may set, is never read), so LLVM may
 * hoist a call with loop-invariant arguments out of a loop (`0.9 ** t` in an update over every
 * cell of a parameter) or merge two equal calls; it still calls the same function, so results
 * do not change. */
static LLVMValueRef pure_call(CgLlvm *g, const char *name, LLVMTypeRef *params, unsigned n, LLVMValueRef *args) {
    LLVMValueRef call = cgl_call(g, name, params[0], params, n, args);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (fn && !LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMGetEnumAttributeKindForName("memory", 6))) {
        static const char *const attrs[] = {"memory", "nounwind", "willreturn"};
        for (unsigned i = 0; i < sizeof attrs / sizeof *attrs; i++) /* memory(none) is the value 0 */
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    }
    return call;
}

/* libm's function `base` of floats (`base` + "f": powf) or, for f64 values, of doubles (pow). */
static LLVMValueRef libm(CgLlvm *g, const char *base, LLVMValueRef *args, unsigned n) {
    LLVMTypeRef element = LLVMTypeOf(args[0]);
    if (is_vector(args[0])) element = LLVMGetElementType(element);
    bool f64 = element == g->f64;
    LLVMTypeRef params[2] = {element, element};
    char name[32];
    /* CUDA's libdevice: __nv_expf … (cg_ptx.c links it) */
    snprintf(name, sizeof name, "%s%s%s", g->libdevice ? "__nv_" : "", base, f64 ? "" : "f");
    if (!is_vector(args[0])) return pure_call(g, name, params, n, args);
    LLVMValueRef out = LLVMGetUndef(LLVMVectorType(element, g->lanes));
    for (unsigned lane = 0; lane < g->lanes; lane++) {
        LLVMValueRef at = LLVMConstInt(g->i32, lane, 0), x[2];
        for (unsigned i = 0; i < n; i++) x[i] = LLVMBuildExtractElement(g->b, args[i], at, "");
        out = LLVMBuildInsertElement(g->b, out, pure_call(g, name, params, n, x), at, "");
    }
    return out;
}

/* ---- Scalar (and lane-wise) operations ------------------------------------------------------------- */

static LLVMValueRef flag(CgLlvm *g, LLVMValueRef cond, LLVMValueRef like) {
    return LLVMBuildSelect(g->b, cond, cgl_fconst_like(g, like, 1), cgl_fconst_like(g, like, 0), "");
}

static LLVMValueRef scalar_op(CgLlvm *g, ScalarOp op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMBuilderRef B = g->b;
    unsigned arity = scalar_op_arity(op);
    bool vec = is_vector(a) || (arity > 1 && is_vector(b)) || (arity > 2 && is_vector(c));
    if (vec) {
        a = cgl_widen(g, a);
        if (arity > 1) b = cgl_widen(g, b);
        if (arity > 2) c = cgl_widen(g, c);
    }
    LLVMValueRef zero = cgl_fconst_like(g, a, 0);
    LLVMTypeRef element = LLVMTypeOf(a);
    if (is_vector(a)) element = LLVMGetElementType(element);
    bool f64 = element == g->f64; /* an operation on f64 values: libm's functions of doubles (ir.c ir_f64_op_eval) */
    switch (op) {
    case SOP_ADD: return LLVMBuildFAdd(B, a, b, "");
    case SOP_SUB: return LLVMBuildFSub(B, a, b, "");
    case SOP_MUL: return LLVMBuildFMul(B, a, b, "");
    case SOP_DIV: return LLVMBuildFDiv(B, a, b, "");
    case SOP_POW: {
        LLVMValueRef x[2] = {a, b};
        return libm(g, "pow", x, 2);
    }
    case SOP_LT: return flag(g, LLVMBuildFCmp(B, LLVMRealOLT, a, b, ""), a);
    case SOP_LE: return flag(g, LLVMBuildFCmp(B, LLVMRealOLE, a, b, ""), a);
    case SOP_EQ: return flag(g, LLVMBuildFCmp(B, LLVMRealOEQ, a, b, ""), a);
    case SOP_NE: return flag(g, LLVMBuildFCmp(B, LLVMRealUNE, a, b, ""), a);
    case SOP_MAX: /* a NaN wins: a + b where either is one (ir.c) */
    case SOP_MIN: {
        LLVMValueRef pick = LLVMBuildSelect(B, LLVMBuildFCmp(B, op == SOP_MAX ? LLVMRealOGT : LLVMRealOLT, a, b, ""), a, b, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, a, b, ""), LLVMBuildFAdd(B, a, b, ""), pick, "");
    }
    case SOP_MOD: { /* ir.c's floor_mod: fmodf's exact remainder, b added where the signs differ, 0 with b's sign */
        LLVMValueRef x[2] = {a, b}, zero_b[2] = {zero, b};
        LLVMValueRef r = libm(g, "fmod", x, 2);
        LLVMValueRef flip = LLVMBuildXor(B, LLVMBuildFCmp(B, LLVMRealOLT, r, zero, ""), LLVMBuildFCmp(B, LLVMRealOLT, b, zero, ""), "");
        LLVMValueRef moved = LLVMBuildSelect(B, flip, LLVMBuildFAdd(B, r, b, ""), r, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, r, zero, ""), cgl_intrinsic(g, "llvm.copysign", zero_b, 2), moved, "");
    }
    case SOP_RELU_GATE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""), b, zero, "");
    case SOP_SAT01_GATE: {
        LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""),
                                       LLVMBuildFCmp(B, LLVMRealOLT, a, cgl_fconst_like(g, a, 1), ""), "");
        return LLVMBuildSelect(B, in, b, zero, "");
    }
    case SOP_OR:
        return flag(g, LLVMBuildOr(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""), LLVMBuildFCmp(B, LLVMRealUNE, b, zero, ""), ""), a);
    case SOP_AND:
        return flag(g, LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""), LLVMBuildFCmp(B, LLVMRealUNE, b, zero, ""), ""), a);
    case SOP_NEG: return LLVMBuildFNeg(B, a, "");
    case SOP_RELU: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUGT, a, zero, ""), a, zero, ""); /* NaN stays NaN */
    case SOP_EXP: return f64 ? libm(g, "exp", &a, 1) : cga_exp(g, a);
    case SOP_LOG: return f64 ? libm(g, "log", &a, 1) : cga_log(g, a);
    case SOP_SQRT: return cgl_intrinsic(g, "llvm.sqrt", &a, 1);
    case SOP_TANH: return f64 ? libm(g, "tanh", &a, 1) : cga_tanh(g, a);
    case SOP_SIGMOID: {
        LLVMValueRef minus = LLVMBuildFNeg(B, a, "");
        LLVMValueRef e = f64 ? libm(g, "exp", &minus, 1) : cga_exp(g, minus);
        return LLVMBuildFDiv(B, cgl_fconst_like(g, a, 1), LLVMBuildFAdd(B, cgl_fconst_like(g, a, 1), e, ""), "");
    }
    case SOP_SIN: return libm(g, "sin", &a, 1);
    case SOP_COS: return libm(g, "cos", &a, 1);
    case SOP_LOG2: return libm(g, "log2", &a, 1);
    case SOP_EXP2: return libm(g, "exp2", &a, 1);
    case SOP_RECIP: return LLVMBuildFDiv(B, cgl_fconst_like(g, a, 1), a, "");
    case SOP_RSQRT: return LLVMBuildFDiv(B, cgl_fconst_like(g, a, 1), cgl_intrinsic(g, "llvm.sqrt", &a, 1), "");
    case SOP_SAT01: { /* a <= 0 ? 0 : a >= 1 ? 1 : a (ordered compares: NaN stays NaN) */
        LLVMValueRef one = cgl_fconst_like(g, a, 1);
        LLVMValueRef upper = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, a, one, ""), one, a, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLE, a, zero, ""), zero, upper, "");
    }
    case SOP_ABS: return cgl_intrinsic(g, "llvm.fabs", &a, 1);
    case SOP_SIGN: {
        LLVMValueRef neg = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, a, zero, ""), cgl_fconst_like(g, a, -1), a, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""), cgl_fconst_like(g, a, 1), neg, "");
    }
    case SOP_FLOOR: return cgl_intrinsic(g, "llvm.floor", &a, 1);
    case SOP_NOT: return flag(g, LLVMBuildFCmp(B, LLVMRealOEQ, a, zero, ""), a);
    case SOP_WHERE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""), b, c, "");
    case SOP_FMA: {
        LLVMValueRef x[3] = {a, b, c};
        return cgl_intrinsic(g, "llvm.fma", x, 3);
    }
    case SOP_TO_TF32: { /* ir.c ir_f32_to_tf32: the magnitude rounded at bit 13, unless infinite or NaN */
        LLVMTypeRef ints = is_vector(a) ? LLVMVectorType(g->i32, g->lanes) : g->i32;
        LLVMValueRef bits = LLVMBuildBitCast(B, a, ints, "");
        LLVMValueRef exponent = iconst_like(g, a, g->i32, 0x7f800000u);
        LLVMValueRef finite = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, bits, exponent, ""), exponent, "");
        LLVMValueRef rounded = LLVMBuildAnd(B, LLVMBuildAdd(B, bits, iconst_like(g, a, g->i32, 0x1000u), ""),
                                            iconst_like(g, a, g->i32, ~0x1fffu & 0xffffffffu), "");
        return LLVMBuildBitCast(B, LLVMBuildSelect(B, finite, rounded, bits, ""), LLVMTypeOf(a), "");
    }
    case SOP_TO_F32: case SOP_TO_I32: case SOP_TO_F64: /* (conversion(): they need the operand's type) */
    case SOP_TO_BF16: case SOP_TO_F16: case SOP_WIDEN: case SOP_TO_U8: case SOP_TO_BOOL: case SOP_TO_I64:
    case SOP_COUNT: break;
    }
    return zero;
}

/* a, a value of type `from`, as type `to` (ir.c convert_value): an i32 (its bits carried in a
 * float) or an i64 (in a double) to a number rounded to nearest even, a number to an integer
 * toward zero, saturating, NaN to 0 (llvm.fptosi.sat), an i32 to an i64 exactly, an i64 to an
 * i32 by its low bits, f64 to f32 rounded to nearest, f32 to f64 exactly. */
static LLVMValueRef conversion(CgLlvm *g, LLVMValueRef a, DType from, DType to) {
    LLVMBuilderRef B = g->b;
    if (from == to) return a;
    bool vec = is_vector(a);
    LLVMTypeRef ints = vec ? LLVMVectorType(g->i32, g->lanes) : g->i32;
    LLVMTypeRef longs = vec ? LLVMVectorType(g->i64, g->lanes) : g->i64;
    LLVMTypeRef floats = vec ? LLVMVectorType(g->f32, g->lanes) : g->f32;
    LLVMTypeRef doubles = vec ? LLVMVectorType(g->f64, g->lanes) : g->f64;
    if (from == DTYPE_I64) {
        LLVMValueRef i = LLVMBuildBitCast(B, a, longs, "");
        if (to == DTYPE_I32) return LLVMBuildBitCast(B, LLVMBuildTrunc(B, i, ints, ""), floats, "");
        return LLVMBuildSIToFP(B, i, to == DTYPE_F64 ? doubles : floats, "");
    }
    if (to == DTYPE_I64 && from == DTYPE_I32)
        return LLVMBuildBitCast(B, LLVMBuildSExt(B, LLVMBuildBitCast(B, a, ints, ""), longs, ""), doubles, "");
    if (to == DTYPE_I32 || to == DTYPE_I64) {
        bool wide = to == DTYPE_I64;
        LLVMTypeRef overload[2] = {wide ? longs : ints, LLVMTypeOf(a)};
        unsigned id = LLVMLookupIntrinsicID("llvm.fptosi.sat", 15);
        LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, overload, 2);
        LLVMTypeRef type = LLVMIntrinsicGetType(g->ctx, id, overload, 2);
        return LLVMBuildBitCast(B, LLVMBuildCall2(B, type, fn, &a, 1, ""), wide ? doubles : floats, "");
    }
    LLVMTypeRef target = to == DTYPE_F64 ? doubles : floats;
    if (from == DTYPE_I32) return LLVMBuildSIToFP(B, LLVMBuildBitCast(B, a, ints, ""), target, "");
    return to == DTYPE_F64 ? LLVMBuildFPExt(B, a, target, "") : LLVMBuildFPTrunc(B, a, target, "");
}

/* ---- bf16 and f16 cells (docs/ir.md §2.10): 2-byte patterns, converted in registers by integer
 * arithmetic that repeats tsr.h's conversions step for step, so every target (x86 at any level,
 * NVPTX) rounds as the reference executor does; a vector of cells converts lane by lane. */

static LLVMTypeRef type_like(CgLlvm *g, LLVMValueRef like, LLVMTypeRef element) {
    return is_vector(like) ? LLVMVectorType(element, g->lanes) : element;
}

/* Cells (i16) of a bf16 or f16 buffer as the f32 values they hold, exactly. */
static LLVMValueRef widen_half(CgLlvm *g, DType dtype, LLVMValueRef h) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef like = h, x = LLVMBuildZExt(B, h, type_like(g, h, g->i32), "");
    LLVMTypeRef floats = type_like(g, h, g->f32);
#define K(v) iconst_like(g, like, g->i32, (v))
    if (dtype == DTYPE_BF16) return LLVMBuildBitCast(B, LLVMBuildShl(B, x, K(16), ""), floats, "");
    LLVMValueRef sign = LLVMBuildShl(B, LLVMBuildAnd(B, x, K(0x8000), ""), K(16), "");
    LLVMValueRef rest = LLVMBuildAnd(B, x, K(0x7fff), "");
    LLVMValueRef special = LLVMBuildOr(B, K(0x7f800000), LLVMBuildShl(B, LLVMBuildAnd(B, rest, K(0x3ff), ""), K(13), ""), "");
    LLVMValueRef normal = LLVMBuildAdd(B, LLVMBuildShl(B, rest, K(13), ""), K(0x38000000), "");
    LLVMValueRef tiny = LLVMBuildFMul(B, LLVMBuildUIToFP(B, rest, floats, ""), cgl_fconst_like(g, h, 0x1p-24), "");
    LLVMValueRef bits = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, rest, K(0x7c00), ""), special,
                                        LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, rest, K(0x400), ""), normal,
                                                        LLVMBuildBitCast(B, tiny, LLVMTypeOf(x), ""), ""), "");
    return LLVMBuildBitCast(B, LLVMBuildOr(B, sign, bits, ""), floats, "");
}

/* f32 values rounded to the nearest bf16 or f16, ties to even, as their cells (i16). */
static LLVMValueRef narrow_half(CgLlvm *g, DType dtype, LLVMValueRef f) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef like = f, b = LLVMBuildBitCast(B, f, type_like(g, f, g->i32), "");
    LLVMValueRef a = LLVMBuildAnd(B, b, K(0x7fffffff), "");
    LLVMValueRef nan = LLVMBuildICmp(B, LLVMIntUGT, a, K(0x7f800000), "");
    LLVMValueRef sign = LLVMBuildAnd(B, LLVMBuildLShr(B, b, K(16), ""), K(0x8000), "");
    LLVMValueRef bits;
    if (dtype == DTYPE_BF16) {
        LLVMValueRef odd = LLVMBuildAnd(B, LLVMBuildLShr(B, b, K(16), ""), K(1), "");
        LLVMValueRef rounded = LLVMBuildLShr(B, LLVMBuildAdd(B, LLVMBuildAdd(B, b, K(0x7fff), ""), odd, ""), K(16), "");
        bits = LLVMBuildSelect(B, nan, LLVMBuildOr(B, sign, K(0x7fc0), ""), rounded, "");
    } else {
        LLVMValueRef t = LLVMBuildSub(B, a, K(0x38000000), "");
        LLVMValueRef odd = LLVMBuildAnd(B, LLVMBuildLShr(B, t, K(13), ""), K(1), "");
        LLVMValueRef normal = LLVMBuildLShr(B, LLVMBuildAdd(B, LLVMBuildAdd(B, t, K(0xfff), ""), odd, ""), K(13), "");
        LLVMValueRef half = LLVMBuildFAdd(B, LLVMBuildBitCast(B, a, LLVMTypeOf(f), ""), cgl_fconst_like(g, f, 0.5), "");
        LLVMValueRef tiny = LLVMBuildSub(B, LLVMBuildBitCast(B, half, LLVMTypeOf(b), ""), K(0x3f000000), "");
        LLVMValueRef magnitude =
            LLVMBuildSelect(B, nan, K(0x7e00),
                            LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, a, K(0x47800000), ""), K(0x7c00),
                                            LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, a, K(0x38800000), ""), normal, tiny, ""), ""), "");
        bits = LLVMBuildOr(B, sign, magnitude, "");
    }
    return LLVMBuildTrunc(B, bits, type_like(g, f, LLVMInt16TypeInContext(g->ctx)), "");
}

/* ---- u8 and bool cells (docs/ir.md §2.8): bytes, computed as i32s (whose bits travel in floats). */

/* Cells (i8) of a u8 or bool buffer as the i32 values they hold (zero-extended). */
static LLVMValueRef widen_byte(CgLlvm *g, LLVMValueRef cells) {
    LLVMValueRef ints = LLVMBuildZExt(g->b, cells, type_like(g, cells, g->i32), "");
    return LLVMBuildBitCast(g->b, ints, type_like(g, cells, g->f32), "");
}

/* i32 values as the cells (i8) of a u8 buffer (their low 8 bits) or a bool one (1 where not 0). */
static LLVMValueRef narrow_byte(CgLlvm *g, DType dtype, LLVMValueRef values) {
    LLVMTypeRef bytes = type_like(g, values, LLVMInt8TypeInContext(g->ctx));
    LLVMValueRef ints = LLVMBuildBitCast(g->b, values, type_like(g, values, g->i32), "");
    if (dtype == DTYPE_BOOL)
        return LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntNE, ints, LLVMConstNull(LLVMTypeOf(ints)), ""), bytes, "");
    return LLVMBuildTrunc(g->b, ints, bytes, "");
}

/* 16 f32 lanes rounded to bf16 cells (i16): by VCVTNEPS2BF16 when no lane is a NaN or subnormal,
 * else by narrow_half's integer steps.  The instruction rounds to nearest even as those steps do
 * but reads a subnormal as zero and keeps a NaN's payload where tsr_f32_to_bf16 makes the quiet
 * NaN of its sign; on every other input it gives the same bits (all 2^32 compared on Zen 4:
 * tools/probes/cvtneps2bf16.c), and VFPCLASSPS finds those lanes in one instruction.  One
 * instruction and a test where the steps are ten. */
static LLVMValueRef narrow_bf16_vector(CgLlvm *g, LLVMValueRef f) {
    LLVMTypeRef v16f = LLVMVectorType(g->f32, 16), v16b = LLVMVectorType(LLVMInt1TypeInContext(g->ctx), 16);
    LLVMTypeRef cells = LLVMVectorType(LLVMInt16TypeInContext(g->ctx), 16);
    LLVMTypeRef class_params[2] = {v16f, g->i32};
    LLVMValueRef class_args[2] = {f, LLVMConstInt(g->i32, 0xa1, 0)}; /* QNaN, SNaN, subnormal */
    LLVMValueRef special = cgl_call(g, "llvm.x86.avx512.fpclass.ps.512", v16b, class_params, 2, class_args);
    LLVMValueRef any = cgl_call(g, "llvm.vector.reduce.or.v16i1", LLVMInt1TypeInContext(g->ctx), &v16b, 1, &special);
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cvt_bf16");
    LLVMBasicBlockRef steps = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "round_bf16");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "bf16_done");
    LLVMBuildCondBr(g->b, any, steps, fast);
    LLVMPositionBuilderAtEnd(g->b, fast);
    LLVMValueRef converted = cgl_call(g, "llvm.x86.avx512bf16.cvtneps2bf16.512",
                                      LLVMVectorType(LLVMBFloatTypeInContext(g->ctx), 16), &v16f, 1, &f);
    converted = LLVMBuildBitCast(g->b, converted, cells, "");
    LLVMBasicBlockRef fast_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, steps);
    LLVMValueRef rounded = narrow_half(g, DTYPE_BF16, f);
    LLVMBasicBlockRef steps_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef phi = LLVMBuildPhi(g->b, cells, "");
    LLVMValueRef values[2] = {converted, rounded};
    LLVMBasicBlockRef from[2] = {fast_end, steps_end};
    LLVMAddIncoming(phi, values, from, 2);
    return phi;
}

/* f64 values as f32 rounded toward zero with the last bit set where inexact (round to odd, tsr.h
 * tsr_f64_to_f32_odd): rounding that to bf16 or f16 rounds the double once. */
static LLVMValueRef f32_round_to_odd(CgLlvm *g, LLVMValueRef d) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef r = LLVMBuildFPTrunc(B, d, type_like(g, d, g->f32), "");
    LLVMValueRef back = LLVMBuildFPExt(B, r, LLVMTypeOf(d), "");
    LLVMValueRef keep = LLVMBuildFCmp(B, LLVMRealUEQ, back, d, ""); /* exact, or NaN */
    LLVMValueRef bits = LLVMBuildBitCast(B, r, type_like(g, d, g->i32), "");
    LLVMValueRef outward = LLVMBuildFCmp(B, LLVMRealOGT, cgl_intrinsic(g, "llvm.fabs", &back, 1), cgl_intrinsic(g, "llvm.fabs", &d, 1), "");
    bits = LLVMBuildSelect(B, outward, LLVMBuildSub(B, bits, iconst_like(g, d, g->i32, 1), ""), bits, "");
    bits = LLVMBuildOr(B, bits, iconst_like(g, d, g->i32, 1), "");
    return LLVMBuildSelect(B, keep, r, LLVMBuildBitCast(B, bits, LLVMTypeOf(r), ""), "");
}
#undef K

/* to_bf16 / to_f16 of a value of type `from`: the nearest value of the type, as an f32. */
static LLVMValueRef round_to_half(CgLlvm *g, ScalarOp op, LLVMValueRef a, DType from) {
    DType dtype = op == SOP_TO_BF16 ? DTYPE_BF16 : DTYPE_F16;
    if (from == DTYPE_I32) /* exact as a double */
        a = LLVMBuildSIToFP(g->b, LLVMBuildBitCast(g->b, a, type_like(g, a, g->i32), ""), type_like(g, a, g->f64), "");
    if (from != DTYPE_F32) a = f32_round_to_odd(g, a);
    return widen_half(g, dtype, narrow_half(g, dtype, a));
}

/* Floor division (or, `modulo`, floor modulo) of i32s, as ir.c's floor_div_i32: sdiv and srem
 * round toward zero, so the quotient is one less and the remainder b more where the remainder is
 * not 0 and its sign differs from b's.  A divisor of 0 or -1 is replaced by 1 before the
 * division, which then never traps (x86's idiv faults on both, 0 and INT32_MIN / -1) and gives
 * the remainder 0 they need; the quotient is then made 0 for b = 0 and the wrapping negation of
 * a for b = -1. */
static LLVMValueRef floor_div(CgLlvm *g, LLVMValueRef a, LLVMValueRef b, bool modulo) {
    LLVMBuilderRef B = g->b;
    LLVMTypeRef ints = LLVMTypeOf(a);
    LLVMTypeRef element = is_vector(a) ? LLVMGetElementType(ints) : ints;
    LLVMValueRef zero = LLVMConstNull(ints), one = iconst_like(g, a, element, 1), minus_one = LLVMConstAllOnes(ints);
    LLVMValueRef is_zero = LLVMBuildICmp(B, LLVMIntEQ, b, zero, ""), is_minus_one = LLVMBuildICmp(B, LLVMIntEQ, b, minus_one, "");
    LLVMValueRef safe = LLVMBuildSelect(B, LLVMBuildOr(B, is_zero, is_minus_one, ""), one, b, "");
    LLVMValueRef r = LLVMBuildSRem(B, a, safe, "");
    LLVMValueRef adjust = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntNE, r, zero, ""),
                                       LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildXor(B, r, b, ""), zero, ""), "");
    if (modulo) return LLVMBuildSelect(B, adjust, LLVMBuildAdd(B, r, b, ""), r, "");
    LLVMValueRef q = LLVMBuildSub(B, LLVMBuildSDiv(B, a, safe, ""), LLVMBuildZExt(B, adjust, ints, ""), "");
    q = LLVMBuildSelect(B, is_minus_one, LLVMBuildSub(B, zero, a, ""), q, "");
    return LLVMBuildSelect(B, is_zero, zero, q, "");
}

/* An operation on i32 values carried in floats' bits, or i64 values in doubles' (`wide`; IrExpr.i32,
 * docs/ir.md §2.8): the operands as integers (vectors of them in a vector loop), + - * wrapping,
 * / and mod flooring, a comparison or a logical operation 1 or 0, the result's bits as a float
 * (a double) again, as ir.c's ir_i32_op_eval and ir_i64_op_eval compute. */
static LLVMValueRef integer_op(CgLlvm *g, ScalarOp op, bool wide, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMBuilderRef B = g->b;
    unsigned arity = scalar_op_arity(op);
    bool vec = is_vector(a) || (arity > 1 && is_vector(b)) || (arity > 2 && is_vector(c));
    LLVMValueRef x[3] = {a, b, c};
    LLVMTypeRef element = wide ? g->i64 : g->i32, carrier = wide ? g->f64 : g->f32;
    LLVMTypeRef ints = vec ? LLVMVectorType(element, g->lanes) : element;
    for (unsigned i = 0; i < arity; i++) x[i] = LLVMBuildBitCast(B, vec ? cgl_widen(g, x[i]) : x[i], ints, "");
    LLVMValueRef zero = LLVMConstNull(ints);
    LLVMValueRef r;
#define FLAG(cond) LLVMBuildZExt(B, (cond), ints, "")
    switch (op) {
    case SOP_ADD: r = LLVMBuildAdd(B, x[0], x[1], ""); break;
    case SOP_SUB: r = LLVMBuildSub(B, x[0], x[1], ""); break;
    case SOP_MUL: r = LLVMBuildMul(B, x[0], x[1], ""); break;
    case SOP_DIV: r = floor_div(g, x[0], x[1], false); break;
    case SOP_MOD: r = floor_div(g, x[0], x[1], true); break;
    case SOP_FLOOR: r = x[0]; break;
    case SOP_NEG: r = LLVMBuildSub(B, zero, x[0], ""); break;
    case SOP_ABS: r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x[0], zero, ""), LLVMBuildSub(B, zero, x[0], ""), x[0], ""); break;
    case SOP_SIGN:
        r = LLVMBuildSub(B, FLAG(LLVMBuildICmp(B, LLVMIntSGT, x[0], zero, "")), FLAG(LLVMBuildICmp(B, LLVMIntSLT, x[0], zero, "")), "");
        break;
    case SOP_MAX: r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, x[0], x[1], ""), x[0], x[1], ""); break;
    case SOP_MIN: r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x[0], x[1], ""), x[0], x[1], ""); break;
    case SOP_RELU: r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, x[0], zero, ""), x[0], zero, ""); break;
    case SOP_LT: r = FLAG(LLVMBuildICmp(B, LLVMIntSLT, x[0], x[1], "")); break;
    case SOP_LE: r = FLAG(LLVMBuildICmp(B, LLVMIntSLE, x[0], x[1], "")); break;
    case SOP_EQ: r = FLAG(LLVMBuildICmp(B, LLVMIntEQ, x[0], x[1], "")); break;
    case SOP_NE: r = FLAG(LLVMBuildICmp(B, LLVMIntNE, x[0], x[1], "")); break;
    case SOP_NOT: r = FLAG(LLVMBuildICmp(B, LLVMIntEQ, x[0], zero, "")); break;
    case SOP_OR:
        r = FLAG(LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntNE, x[0], zero, ""), LLVMBuildICmp(B, LLVMIntNE, x[1], zero, ""), ""));
        break;
    case SOP_AND:
        r = FLAG(LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntNE, x[0], zero, ""), LLVMBuildICmp(B, LLVMIntNE, x[1], zero, ""), ""));
        break;
    case SOP_WHERE: r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntNE, x[0], zero, ""), x[1], x[2], ""); break;
    default: r = zero; break; /* elaboration allows no other (scalar_op_integer) */
    }
#undef FLAG
    return LLVMBuildBitCast(B, r, vec ? LLVMVectorType(carrier, g->lanes) : carrier, "");
}

/* ---- Addresses, loads, stores ---------------------------------------------------------------------- */

/* The flat offset of buffer[index…] (row-major over the buffer's memory-order dims), with every
 * iterator at its current value (the lane iterator, if any, at 0). */
static LLVMValueRef expr(CgLlvm *g, const IrExpr *e);

/* A gathered axis's position: its expression's value (an i32 carried in a float, the same in
 * every lane: the schedule leaves gathering nests unvectorised), clamped to [0, length). */
static LLVMValueRef gathered_position(CgLlvm *g, const IrExpr *gather, uint64_t length) {
    LLVMValueRef v = expr(g, gather);
    if (is_vector(v)) v = LLVMBuildExtractElement(g->b, v, LLVMConstInt(g->i32, 0, 0), "");
    LLVMValueRef i = LLVMBuildSExt(g->b, LLVMBuildBitCast(g->b, v, g->i32, ""), g->i64, "");
    LLVMValueRef lo = cgl_iconst(g, 0), hi = cgl_iconst(g, (int64_t)length - 1);
    i = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, lo, ""), lo, i, "");
    return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, i, hi, ""), hi, i, "");
}

/* Whether the term of iterator `it` leaves a flat offset of `buf`: the lane's (a vector's lanes
 * add it), a GPU thread loop's in a per-thread buffer (the thread's own registers). */
static bool term_dropped(const CgLlvm *g, const IrBuffer *buf, uint32_t it) {
    return it == g->lane_iter || (buf->thread_cells && g->thread_iter[it]);
}

/* The flat offset of a plain index (no gather or symbol, static lengths past the first) as one
 * sum, Σ coef·stride·iter + offset, each term's constant part apart from the iterators (an
 * asynchronous copy's source, below); NULL for any other index. */
static LLVMValueRef summed_offset(CgLlvm *g, const IrBuffer *buf, const IrIndex *index) {
    for (uint32_t a = 0; a < buf->rank; a++)
        if (index[a].gather || index[a].symbol || (a > 0 && size_is_runtime(buf->dims[a]))) return NULL;
    int64_t stride = 1, offset = 0;
    LLVMValueRef sum = NULL;
    for (uint32_t a = buf->rank; a-- > 0;) {
        offset += index[a].offset * stride;
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            if (term_dropped(g, buf, index[a].terms[t].iter)) continue;
            LLVMValueRef term = LLVMBuildNSWMul(g->b, cgl_iconst(g, index[a].terms[t].coef * stride), g->iter[index[a].terms[t].iter], "");
            sum = sum ? LLVMBuildNSWAdd(g->b, sum, term, "") : term;
        }
        if (a > 0) stride *= (int64_t)buf->dims[a];
    }
    return sum ? LLVMBuildNSWAdd(g->b, sum, cgl_iconst(g, offset), "") : cgl_iconst(g, offset);
}

static LLVMValueRef flat_offset(CgLlvm *g, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *buf = &g->ir->buffers[buffer];
    LLVMValueRef flat = cgl_iconst(g, 0);
    for (uint32_t a = 0; a < buf->rank; a++) {
        if (index[a].gather) { /* (a run-time size is never gathered: its length is not known here) */
            LLVMValueRef i = gathered_position(g, index[a].gather, buf->dims[a]);
            flat = a == 0 ? i : LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, flat, cgl_iconst(g, (int64_t)buf->dims[a]), ""), i, "");
            continue;
        }
        LLVMValueRef i = cgl_iconst(g, index[a].offset);
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            uint32_t it = index[a].terms[t].iter;
            if (term_dropped(g, buf, it)) continue;
            i = LLVMBuildNSWAdd(g->b, i, LLVMBuildNSWMul(g->b, cgl_iconst(g, index[a].terms[t].coef), g->iter[it], ""), "");
        }
        if (index[a].symbol) i = LLVMBuildNSWAdd(g->b, i, g->symbol[ir_symbol(g->ir, index[a].symbol)], "");
        /* (The outermost length never multiplies: a run-time size may stand there, ir.h.) */
        flat = a == 0 ? i : LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, flat, cgl_iconst(g, (int64_t)buf->dims[a]), ""), i, "");
    }
    return flat;
}

/* How far the flat offset moves from one lane to the next. */
static int64_t lane_stride(const CgLlvm *g, uint32_t buffer, const IrIndex *index) {
    if (g->lane_iter == UINT32_MAX) return 0;
    const IrBuffer *b = &g->ir->buffers[buffer];
    int64_t coef = 0, stride = 1;
    for (uint32_t a = b->rank; a-- > 0;) {
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == g->lane_iter) coef += index[a].terms[t].coef * stride;
        if (a > 0) stride *= (int64_t)b->dims[a]; /* dims[0] may be a run-time size (ir.h) */
    }
    return coef;
}

/* The LLVM type of a cell of `buffer`: double for an f64 buffer (and an i64 one, whose bits travel
 * in a double), i16 for bf16 and f16 and i8 for u8 and bool (converted where loaded and stored),
 * float for the others (an i32's bits travel in a float, docs/ir.md §2.8). */
static LLVMTypeRef cell_type(CgLlvm *g, uint32_t buffer) {
    DType dtype = g->ir->buffers[buffer].dtype;
    return ir_dtype_wide(dtype) ? g->f64 : ir_dtype_half(dtype) ? LLVMInt16TypeInContext(g->ctx)
         : ir_dtype_byte(dtype) ? LLVMInt8TypeInContext(g->ctx) : g->f32;
}

static unsigned cell_align(CgLlvm *g, uint32_t buffer) { return ir_dtype_bytes(g->ir->buffers[buffer].dtype); }

/* The address of byte `byte` of swizzled `buffer` plus `aligned` bytes (a multiple of the
 * swizzle's period, which the swizzle leaves alone: ir.h ir_swizzle_byte). */
static LLVMValueRef swizzled_byte(CgLlvm *g, uint32_t buffer, LLVMValueRef byte, int64_t aligned) {
    uint32_t swizzle = g->ir->buffers[buffer].swizzle;
    LLVMValueRef row = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, byte, cgl_iconst(g, 7), ""), cgl_iconst(g, swizzle / 16 - 1), "");
    LLVMValueRef at = LLVMBuildXor(g->b, byte, LLVMBuildShl(g->b, row, cgl_iconst(g, 4), ""), "swizzled");
    LLVMValueRef idx[1] = {aligned ? LLVMBuildNSWAdd(g->b, at, cgl_iconst(g, aligned), "") : at};
    return LLVMBuildInBoundsGEP2(g->b, LLVMInt8TypeInContext(g->ctx), g->buffer[buffer], idx, 1, "");
}

static LLVMValueRef element(CgLlvm *g, uint32_t buffer, LLVMValueRef flat) {
    if (g->ir->buffers[buffer].swizzle) /* the cell's bytes where the buffer's swizzle moves them */
        return swizzled_byte(g, buffer, LLVMBuildNSWMul(g->b, flat, cgl_iconst(g, cell_align(g, buffer)), ""), 0);
    LLVMValueRef idx[1] = {flat};
    return LLVMBuildInBoundsGEP2(g->b, cell_type(g, buffer), g->buffer[buffer], idx, 1, "");
}

/* A prefetch of `buffer`'s cell `flat` for a read, into the caches that `locality` names (3: all
 * of them, 2: L2 and beyond).  The address may lie past the buffer, which a prefetch may (it
 * never faults), so the GEP is not inbounds. */
static void prefetch(CgLlvm *g, uint32_t buffer, LLVMValueRef flat, int locality) {
    LLVMTypeRef params[4] = {LLVMPointerTypeInContext(g->ctx, 0), g->i32, g->i32, g->i32};
    LLVMValueRef idx[1] = {flat};
    LLVMValueRef args[4] = {LLVMBuildGEP2(g->b, cell_type(g, buffer), g->buffer[buffer], idx, 1, ""), LLVMConstInt(g->i32, 0, 0),
                            LLVMConstInt(g->i32, (unsigned long long)locality, 0), LLVMConstInt(g->i32, 1, 0)};
    cgl_call(g, "llvm.prefetch.p0", LLVMVoidTypeInContext(g->ctx), params, 4, args);
}

/* A read of a buffer that is one forward stream (IrBuffer.prefetch_cells): a prefetch that
 * many cells ahead, once per group of unrolled reads (where every unrolled iterator of the index
 * is 0). */
static void prefetch_ahead(CgLlvm *g, uint32_t buffer, const IrIndex *index, LLVMValueRef base) {
    const IrBuffer *b = &g->ir->buffers[buffer];
    for (uint32_t a = 0; a < b->rank; a++)
        for (uint32_t t = 0; t < index[a].term_count; t++) {
            LLVMValueRef v = g->iter[index[a].terms[t].iter];
            if (v && LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) != 0) return;
        }
    prefetch(g, buffer, LLVMBuildNSWAdd(g->b, base, cgl_iconst(g, b->prefetch_cells), ""), 3);
}

static LLVMValueRef swizzled_cell(CgLlvm *g, uint32_t buffer, const IrIndex *index, int64_t extra);

static LLVMValueRef load(CgLlvm *g, uint32_t buffer, const IrIndex *index) {
    if (g->ir->buffers[buffer].swizzle) { /* a swizzled panel's cell (a GPU thread's, one at a time) */
        LLVMValueRef v = LLVMBuildLoad2(g->b, cell_type(g, buffer), swizzled_cell(g, buffer, index, 0), "");
        LLVMSetAlignment(v, cell_align(g, buffer));
        return v;
    }
    LLVMValueRef base = flat_offset(g, buffer, index);
    int64_t stride = lane_stride(g, buffer, index);
    if (stride == 0 && g->ir->buffers[buffer].prefetch_cells) prefetch_ahead(g, buffer, index, base);
    LLVMTypeRef cell = cell_type(g, buffer);
    unsigned align = cell_align(g, buffer);
    if (stride == 0) {
        LLVMValueRef v = LLVMBuildLoad2(g->b, cell, element(g, buffer, base), "");
        LLVMSetAlignment(v, align);
        return v;
    }
    if (stride == 1) {
        LLVMValueRef v = LLVMBuildLoad2(g->b, LLVMVectorType(cell, g->lanes), element(g, buffer, base), "");
        LLVMSetAlignment(v, align);
        return v;
    }
    LLVMValueRef out = LLVMGetUndef(LLVMVectorType(cell, g->lanes));
    for (unsigned lane = 0; lane < g->lanes; lane++) {
        LLVMValueRef at = LLVMBuildNSWAdd(g->b, base, cgl_iconst(g, stride * lane), "");
        LLVMValueRef v = LLVMBuildLoad2(g->b, cell, element(g, buffer, at), "");
        LLVMSetAlignment(v, align);
        out = LLVMBuildInsertElement(g->b, out, v, LLVMConstInt(g->i32, lane, 0), "");
    }
    return out;
}

/* 16 half cells (i16, AVX-512's 16 lanes) stored around the caches at an address aligned to 32
 * bytes.  Not a plain store with !nontemporal: LLVM folds the truncation from i32 that
 * narrow_half ends with into AVX-512's truncating store (vpmovdw to memory), which goes through
 * the caches, and the hint is lost (LLVM 19, with or without bitcasts or freezes between them);
 * the bf16 elementwise chain then reads each cell of its result before writing it.  So the
 * vector is stored by `vmovntdq` written out. */
static void stream_half_cells(CgLlvm *g, LLVMValueRef cells, LLVMValueRef at) {
    LLVMTypeRef params[2] = {LLVMTypeOf(at), LLVMTypeOf(cells)};
    LLVMTypeRef fn = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, 2, 0);
    static const char text[] = "vmovntdq $1, ($0)", constraints[] = "r,x,~{memory}";
    LLVMValueRef movnt = LLVMGetInlineAsm(fn, (char *)text, sizeof text - 1, (char *)constraints,
                                          sizeof constraints - 1, 1, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef args[2] = {at, cells};
    LLVMBuildCall2(g->b, fn, movnt, args, 2, "");
    g->nontemporal = true;
}

static void store(CgLlvm *g, uint32_t buffer, const IrIndex *index, LLVMValueRef v, bool nontemporal) {
    if (g->ir->buffers[buffer].swizzle) { /* as load() */
        LLVMValueRef st = LLVMBuildStore(g->b, v, swizzled_cell(g, buffer, index, 0));
        LLVMSetAlignment(st, cell_align(g, buffer));
        return;
    }
    LLVMValueRef base = flat_offset(g, buffer, index);
    int64_t stride = lane_stride(g, buffer, index);
    if (nontemporal && stride == 1) { /* whole, aligned vectors (sched.c proved the alignment) */
        v = cgl_widen(g, v);
        LLVMTypeRef cell = LLVMGetElementType(LLVMTypeOf(v));
        if (LLVMGetTypeKind(cell) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(cell) == 16 && g->lanes == 16) {
            stream_half_cells(g, v, element(g, buffer, base));
            return;
        }
        LLVMValueRef st = LLVMBuildStore(g->b, v, element(g, buffer, base));
        LLVMSetAlignment(st, g->lanes * cell_align(g, buffer));
        LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(g->i32, 1, 0));
        LLVMSetMetadata(st, LLVMGetMDKindIDInContext(g->ctx, "nontemporal", 11), LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, &one, 1)));
        g->nontemporal = true;
        return;
    }
    if (g->lane_iter == UINT32_MAX || stride == 1 || (stride == 0 && !is_vector(v))) {
        LLVMValueRef st = LLVMBuildStore(g->b, stride == 1 ? cgl_widen(g, v) : v, element(g, buffer, base));
        LLVMSetAlignment(st, cell_align(g, buffer));
        return;
    }
    /* Lane by lane, in lane order (a store that does not move keeps the last lane's value). */
    v = cgl_widen(g, v);
    for (unsigned lane = 0; lane < g->lanes; lane++) {
        LLVMValueRef at = LLVMBuildNSWAdd(g->b, base, cgl_iconst(g, stride * lane), "");
        LLVMValueRef x = LLVMBuildExtractElement(g->b, v, LLVMConstInt(g->i32, lane, 0), "");
        LLVMValueRef st = LLVMBuildStore(g->b, x, element(g, buffer, at));
        LLVMSetAlignment(st, cell_align(g, buffer));
    }
}

/* ---- Random numbers ------------------------------------------------------------------------------------ */

/* The high and low 32 bits of the 64-bit product a·m (Philox's mulhilo; NVPTX makes it mul.hi). */
static void mulhilo(CgLlvm *g, LLVMValueRef a, uint32_t m, LLVMValueRef *hi, LLVMValueRef *lo) {
    LLVMTypeRef wide = is_vector(a) ? LLVMVectorType(g->i64, g->lanes) : g->i64;
    LLVMValueRef p = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, a, wide, ""), iconst_like(g, a, g->i64, m), "");
    LLVMTypeRef narrow = LLVMTypeOf(a);
    *hi = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p, iconst_like(g, a, g->i64, 32), ""), narrow, "");
    *lo = LLVMBuildTrunc(g->b, p, narrow, "");
}

/* random(buffer[index…]) (docs/ir.md §2.5), inline: runtime/rng.c's tsr_random_cell in integer
 * arithmetic, so it vectorises (a vector loop computes one Philox per lane, on <W x i32>) and
 * runs as it is on the GPU, with no call into the runtime.  The cell number is the flat offset
 * of the access, one per lane; the key is the run's, read from past the symbols on entry. */
static LLVMValueRef random_cell(CgLlvm *g, uint32_t buffer, const IrIndex *index) {
    LLVMValueRef cell = flat_offset(g, buffer, index);
    int64_t stride = lane_stride(g, buffer, index);
    if (stride != 0) { /* lane l: cell + l·stride */
        LLVMValueRef *steps = calloc(g->lanes, sizeof *steps);
        if (!steps) diag_fatal_oom();
        for (unsigned lane = 0; lane < g->lanes; lane++) steps[lane] = cgl_iconst(g, stride * (int64_t)lane);
        cell = LLVMBuildAdd(g->b, cgl_widen(g, cell), LLVMConstVector(steps, g->lanes), "");
        free(steps);
    }
    LLVMTypeRef word = is_vector(cell) ? LLVMVectorType(g->i32, g->lanes) : g->i32;
    LLVMBuilderRef B = g->b;
    LLVMValueRef seed = g->random_key[ABI_SYMBOL_SEED], run = g->random_key[ABI_SYMBOL_RUN];
    LLVMValueRef c[4] = {
        LLVMBuildTrunc(B, cell, word, ""),
        LLVMBuildTrunc(B, LLVMBuildLShr(B, cell, iconst_like(g, cell, g->i64, 32), ""), word, ""),
        iconst_like(g, cell, g->i32, ir_random_site(&g->ir->buffers[buffer])),
        LLVMBuildTrunc(B, is_vector(cell) ? cgl_widen(g, run) : run, word, ""),
    };
    LLVMValueRef k0 = LLVMBuildTrunc(B, seed, g->i32, ""), k1 = LLVMBuildTrunc(B, LLVMBuildLShr(B, seed, cgl_iconst(g, 32), ""), g->i32, "");
    for (int round = 0; round < 10; round++) {
        LLVMValueRef hi0, lo0, hi1, lo1;
        LLVMValueRef key0 = is_vector(cell) ? cgl_widen(g, k0) : k0, key1 = is_vector(cell) ? cgl_widen(g, k1) : k1;
        mulhilo(g, c[0], 0xD2511F53u, &hi0, &lo0);
        mulhilo(g, c[2], 0xCD9E8D57u, &hi1, &lo1);
        c[0] = LLVMBuildXor(B, LLVMBuildXor(B, hi1, c[1], ""), key0, "");
        c[2] = LLVMBuildXor(B, LLVMBuildXor(B, hi0, c[3], ""), key1, "");
        c[1] = lo1;
        c[3] = lo0;
        k0 = LLVMBuildAdd(B, k0, LLVMConstInt(g->i32, 0x9E3779B9u, 0), "");
        k1 = LLVMBuildAdd(B, k1, LLVMConstInt(g->i32, 0xBB67AE85u, 0), "");
    }
    /* The top 24 bits of the first word, times 2^-24: exact in single precision. */
    LLVMValueRef bits = LLVMBuildLShr(B, c[0], iconst_like(g, c[0], g->i32, 8), "");
    LLVMValueRef u = LLVMBuildUIToFP(B, bits, is_vector(bits) ? vec_type(g) : g->f32, "");
    return LLVMBuildFMul(B, u, cgl_fconst_like(g, u, 1.0 / 16777216.0), "");
}

/* A literal of the code: an immediate, or the next slot of the lifted-literal table. */
static LLVMValueRef literal(CgLlvm *g, float v) {
    if (!g->literals) return LLVMConstReal(g->f32, v);
    if (g->lifted_count == g->lifted_cap) {
        g->lifted_cap = g->lifted_cap ? 2 * g->lifted_cap : 16;
        g->lifted = realloc(g->lifted, g->lifted_cap * sizeof *g->lifted);
        if (!g->lifted) diag_fatal_oom();
    }
    g->lifted[g->lifted_count] = v;
    LLVMValueRef idx[1] = {cgl_iconst(g, g->lifted_count++)};
    return LLVMBuildLoad2(g->b, g->f32, LLVMBuildInBoundsGEP2(g->b, g->f32, g->literals, idx, 1, ""), "");
}

void cgl_lift_literals(CgLlvm *g, LLVMValueRef table) {
    g->literals = table;
    g->lifted_count = 0;
}

LLVMValueRef cgl_lifted_table(CgLlvm *g, const char *name) {
    g->literals = NULL;
    if (!g->lifted_count) return LLVMConstPointerNull(g->ptr);
    LLVMValueRef *v = calloc(g->lifted_count, sizeof *v);
    if (!v) diag_fatal_oom();
    for (uint32_t i = 0; i < g->lifted_count; i++) v[i] = LLVMConstReal(g->f32, g->lifted[i]);
    LLVMValueRef init = LLVMConstArray2(g->f32, v, g->lifted_count);
    free(v);
    LLVMValueRef table = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(table, init);
    LLVMSetGlobalConstant(table, 1);
    LLVMSetLinkage(table, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(table, LLVMGlobalUnnamedAddr);
    return table;
}

static LLVMValueRef expr(CgLlvm *g, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST: /* an i32's bits as a float, an f64 as a double and an i64's bits in one, none lifted into the
                    * literal table (of floats) */
        if (e->type == DTYPE_F64) return LLVMConstReal(g->f64, e->value);
        if (e->type == DTYPE_I64)
            return LLVMConstBitCast(LLVMConstInt(g->i64, (unsigned long long)ir_const_value(DTYPE_I64, e->value).i, 1), g->f64);
        return e->type == DTYPE_I32 ? LLVMConstBitCast(LLVMConstInt(g->i32, (unsigned long long)(int64_t)e->value, 1), g->f32)
                                    : literal(g, (float)e->value);
    case IR_LOCAL: return LLVMBuildLoad2(g->b, LLVMGetAllocatedType(g->local[e->local]), g->local[e->local], "");
    case IR_SYMBOL: return LLVMBuildSIToFP(g->b, g->symbol[ir_symbol(g->ir, e->symbol)], g->f32, "");
    case IR_LOAD: {
        DType dtype = g->ir->buffers[e->buffer].dtype;
        LLVMValueRef v = load(g, e->buffer, e->index);
        return ir_dtype_half(dtype) ? widen_half(g, dtype, v) : ir_dtype_byte(dtype) ? widen_byte(g, v) : v;
    }
    case IR_RANDOM: return random_cell(g, e->buffer, e->index);
    case IR_OP: {
        LLVMValueRef x[3] = {NULL, NULL, NULL};
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) x[i] = expr(g, e->args[i]);
        if (e->op == SOP_TO_BF16 || e->op == SOP_TO_F16) return round_to_half(g, e->op, x[0], ir_expr_type(g->ir, e->args[0]));
        if (scalar_op_conversion(e->op)) return conversion(g, x[0], ir_expr_type(g->ir, e->args[0]), e->type);
        if (e->type == DTYPE_I32 || e->type == DTYPE_I64) return integer_op(g, e->op, e->type == DTYPE_I64, x[0], x[1], x[2]);
        return scalar_op(g, e->op, x[0], x[1], x[2]);
    }
    }
    return LLVMConstReal(g->f32, 0);
}

/* ---- Statements and loops ---------------------------------------------------------------------------- */

static void block(CgLlvm *g, const IrBlock *blk);

LLVMValueRef cgl_loop_open(CgLlvm *g, CglLoop *l, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
    *l = (CglLoop){.entry = LLVMGetInsertBlock(g->b), .lo = lo, .hi = hi};
    l->body = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    l->done = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, lo, hi, ""), l->body, l->done);
    LLVMPositionBuilderAtEnd(g->b, l->body);
    return l->i = LLVMBuildPhi(g->b, g->i64, "i");
}

LLVMValueRef cgl_loop_close(CgLlvm *g, CglLoop *l, int64_t step) {
    LLVMValueRef next = LLVMBuildNSWAdd(g->b, l->i, cgl_iconst(g, step), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef back = LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, l->hi, ""), l->body, l->done);
    LLVMValueRef in_values[2] = {l->lo, next};
    LLVMBasicBlockRef in_blocks[2] = {l->entry, latch};
    LLVMAddIncoming(l->i, in_values, in_blocks, 2);
    LLVMPositionBuilderAtEnd(g->b, l->done);
    return back;
}

/* Whether v is the integer constant n. */
static bool is_iconst(LLVMValueRef v, int64_t n) { return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == n; }

/* A plain loop over L ≤ 64 lanes (from 0) around an unrolled loop e < 2 copying one bf16 or f16
 * cell, D[… 2·lane ± e …] = S[… e …, lane]: the packing of pairs of reduction steps whose
 * operand's lanes are adjacent (sched_tile.c pack_pairs_nest, lane by lane), each 32-bit cell of
 * D the two steps of one lane.  Emitted as one load of L cells from each of S's two rows, one
 * shuffle interleaving them and one store of 2L cells, instead of 2L copies of a cell (LLVM's
 * SLP vectoriser, which would find this, is off: cg_module.c).  The MLP's weight gradient in
 * bf16 packs its 512 × 1024 output gradient so, 17 panels of 6 lanes a pass: 250–275 µs copied
 * cell by cell, 137–147 µs so (one thread, Zen 4).  False, emitting nothing, for any other body
 * or layout. */
static bool interleave_pairs(CgLlvm *g, const IrStmt *s, LLVMValueRef lo, LLVMValueRef hi) {
    const IrStmt *el = s->body.count == 1 ? s->body.items[0] : NULL;
    if (!el || el->kind != IR_LOOP || el->mode != LOOP_UNROLL || el->extent != 2 || el->body.count != 1) return false;
    const IrStmt *st = el->body.items[0];
    if (size_is_runtime(s->extent) || s->extent < 2 || s->extent > 64 || !is_iconst(lo, 0) ||
        !is_iconst(hi, (int64_t)s->extent) || g->lane_iter != UINT32_MAX)
        return false;
    if (st->kind != IR_STORE || st->nontemporal || st->value->kind != IR_LOAD) return false;
    const IrExpr *src = st->value;
    const IrBuffer *db = &g->ir->buffers[st->buffer], *sb = &g->ir->buffers[src->buffer];
    if (!ir_dtype_half(db->dtype) || sb->dtype != db->dtype || db->swizzle || sb->swizzle ||
        ir_stmt_gathers(g->ir, st))
        return false;
    g->lane_iter = s->iter;
    int64_t src_lanes = lane_stride(g, src->buffer, src->index), dst_lanes = lane_stride(g, st->buffer, st->index);
    g->lane_iter = el->iter;
    int64_t dst_steps = lane_stride(g, st->buffer, st->index);
    g->lane_iter = UINT32_MAX;
    if (src_lanes != 1 || dst_lanes != 2 || (dst_steps != 1 && dst_steps != -1)) return false;
    unsigned lanes = (unsigned)s->extent;
    LLVMTypeRef i16 = LLVMInt16TypeInContext(g->ctx), row_t = LLVMVectorType(i16, lanes);
    LLVMValueRef rows[2];
    g->iter[s->iter] = cgl_iconst(g, 0);
    for (unsigned e = 0; e < 2; e++) { /* row e of S: the lanes of step e */
        g->iter[el->iter] = cgl_iconst(g, e);
        rows[e] = LLVMBuildLoad2(g->b, row_t, element(g, src->buffer, flat_offset(g, src->buffer, src->index)), "");
        LLVMSetAlignment(rows[e], 2);
    }
    /* D's cells from the lowest: lane by lane, the step stored there (e = 0 first when the store
     * moves up with e), each an index into the two rows side by side */
    LLVMValueRef mask[2 * 64];
    for (unsigned j = 0; j < 2 * lanes; j++) {
        unsigned e = dst_steps == 1 ? j % 2 : 1 - j % 2;
        mask[j] = LLVMConstInt(g->i32, e * lanes + j / 2, 0);
    }
    LLVMValueRef pairs = LLVMBuildShuffleVector(g->b, rows[0], rows[1], LLVMConstVector(mask, 2 * lanes), "");
    g->iter[el->iter] = cgl_iconst(g, dst_steps == 1 ? 0 : 1);
    LLVMValueRef out = LLVMBuildStore(g->b, pairs, element(g, st->buffer, flat_offset(g, st->buffer, st->index)));
    LLVMSetAlignment(out, 2);
    return true;
}

/* for iter in [lo, hi): body. */
static void plain_loop(CgLlvm *g, const IrStmt *s, LLVMValueRef lo, LLVMValueRef hi) {
    if (interleave_pairs(g, s, lo, hi)) return;
    CglLoop l;
    g->iter[s->iter] = cgl_loop_open(g, &l, lo, hi);
    block(g, &s->body);
    LLVMValueRef back = cgl_loop_close(g, &l, 1);
    unsigned count = cgl_interleave_count(g, s);
    if (count) cgl_hint_interleave(g, back, count);
}

/* rows[0 … n) (n a power of two, each <n x float>) transposed in place: after it, lane c of
 * rows[r] is what lane r of rows[c] was.  log2(n) rounds; round j exchanges bit j of the row
 * number with bit j of the lane number, pairing rows p and p + 2^j with one shuffle each. */
static void transpose_rows(CgLlvm *g, LLVMValueRef *rows, unsigned n) {
    LLVMValueRef *mask_lo = calloc(n, sizeof *mask_lo), *mask_hi = calloc(n, sizeof *mask_hi);
    if (!mask_lo || !mask_hi) diag_fatal_oom();
    for (unsigned bit = 1; bit < n; bit <<= 1) {
        for (unsigned c = 0; c < n; c++) {
            bool set = c & bit;
            mask_lo[c] = LLVMConstInt(g->i32, set ? n + c - bit : c, 0);
            mask_hi[c] = LLVMConstInt(g->i32, set ? n + c : c + bit, 0);
        }
        LLVMValueRef lo = LLVMConstVector(mask_lo, n), hi = LLVMConstVector(mask_hi, n);
        for (unsigned p = 0; p < n; p++) {
            if (p & bit) continue;
            LLVMValueRef a = rows[p], b = rows[p | bit];
            rows[p] = LLVMBuildShuffleVector(g->b, a, b, lo, "");
            rows[p | bit] = LLVMBuildShuffleVector(g->b, a, b, hi, "");
        }
    }
    free(mask_lo);
    free(mask_hi);
}

/* A LOOP_TRANSPOSE loop whose vector loop holds, instead of one copy, a loop e < 2 copying a
 * pair of bf16 or f16 cells (sched_tile.c pack_pairs_nest): the V pairs of each of the U rows are
 * adjacent in the source, so they load as V 32-bit lanes (from e = 0), each rotated by 16 bits
 * (the destination holds step 2p + 1 in the low half, e = 1), transposed as in transpose_loop,
 * and stored as V rows of U 32-bit cells (from e = 1).  False, emitting nothing, for any other
 * body or layout. */
static bool transpose_pairs(CgLlvm *g, const IrStmt *s, const IrStmt *vl) {
    const IrStmt *el = vl->body.count == 1 ? vl->body.items[0] : NULL;
    if (!el || el->kind != IR_LOOP || el->mode != LOOP_UNROLL || el->extent != 2 || el->body.count != 1) return false;
    const IrStmt *st = el->body.items[0];
    if (st->kind != IR_STORE || st->value->kind != IR_LOAD || !ir_dtype_half(g->ir->buffers[st->buffer].dtype) ||
        g->ir->buffers[st->value->buffer].dtype != g->ir->buffers[st->buffer].dtype)
        return false;
    unsigned u_count = (unsigned)s->extent, v_count = (unsigned)vl->extent;
    if (u_count > v_count || (v_count & (v_count - 1)) || g->lane_iter != UINT32_MAX) return false;
    const IrExpr *src = st->value;
    for (unsigned k = 0; k < 2; k++) g->iter[k ? el->iter : vl->iter] = cgl_iconst(g, 0);
    g->iter[s->iter] = cgl_iconst(g, 0);
    g->lane_iter = vl->iter;
    int64_t src_stride = lane_stride(g, src->buffer, src->index);
    g->lane_iter = s->iter;
    int64_t dst_stride = lane_stride(g, st->buffer, st->index);
    g->lane_iter = UINT32_MAX;
    if (src_stride != 2 || dst_stride != 2) return false;
    LLVMTypeRef rows_t = LLVMVectorType(g->i32, v_count);
    LLVMValueRef *rows = calloc(v_count, sizeof *rows);
    LLVMValueRef *first = calloc(u_count, sizeof *first);
    if (!rows || !first) diag_fatal_oom();
    LLVMValueRef sixteen = LLVMConstVector((LLVMValueRef[]){LLVMConstInt(g->i32, 16, 0)}, 1);
    LLVMValueRef by16 = LLVMConstShuffleVector(sixteen, LLVMGetUndef(LLVMTypeOf(sixteen)),
                                               LLVMConstNull(LLVMVectorType(g->i32, v_count)));
    g->iter[el->iter] = cgl_iconst(g, 0);
    for (unsigned u = 0; u < v_count; u++) {
        if (u >= u_count) {
            rows[u] = LLVMGetUndef(rows_t);
            continue;
        }
        g->iter[s->iter] = cgl_iconst(g, u);
        LLVMValueRef at = element(g, src->buffer, flat_offset(g, src->buffer, src->index));
        LLVMValueRef row = LLVMBuildLoad2(g->b, rows_t, at, "");
        LLVMSetAlignment(row, 2);
        LLVMTypeRef params[3] = {rows_t, rows_t, rows_t};
        LLVMValueRef args[3] = {row, row, by16};
        char name[40];
        snprintf(name, sizeof name, "llvm.fshl.v%ui32", v_count);
        rows[u] = cgl_call(g, name, rows_t, params, 3, args);
    }
    transpose_rows(g, rows, v_count);
    for (unsigned u = 0; u < u_count; u++) first[u] = LLVMConstInt(g->i32, u, 0);
    LLVMValueRef keep = LLVMConstVector(first, u_count);
    g->iter[el->iter] = cgl_iconst(g, 1);
    g->iter[s->iter] = cgl_iconst(g, 0);
    for (unsigned v = 0; v < v_count; v++) {
        g->iter[vl->iter] = cgl_iconst(g, v);
        LLVMValueRef row = u_count == v_count ? rows[v] : LLVMBuildShuffleVector(g->b, rows[v], rows[v], keep, "");
        LLVMValueRef out = LLVMBuildStore(g->b, row, element(g, st->buffer, flat_offset(g, st->buffer, st->index)));
        LLVMSetAlignment(out, 2);
    }
    free(first);
    free(rows);
    return true;
}

/* A LOOP_TRANSPOSE loop (ir.h): U rows of V lanes loaded along the vector loop, transposed, and
 * stored as V rows of U lanes along this loop (or pairs of cells: transpose_pairs).  Any other
 * body is emitted as an unrolled loop. */
static void transpose_loop(CgLlvm *g, const IrStmt *s) {
    const IrStmt *vl = s->body.count == 1 ? s->body.items[0] : NULL;
    const IrStmt *st = vl && vl->kind == IR_LOOP && vl->mode == LOOP_VECTOR && vl->body.count == 1
                           ? vl->body.items[0] : NULL;
    unsigned u_count = (unsigned)s->extent, v_count = vl ? (unsigned)vl->extent : 0;
    if (vl && vl->kind == IR_LOOP && vl->mode == LOOP_VECTOR && transpose_pairs(g, s, vl)) return;
    if (!st || st->kind != IR_STORE || st->value->kind != IR_LOAD || u_count > v_count ||
        (v_count & (v_count - 1)) || g->lane_iter != UINT32_MAX) {
        for (uint64_t u = 0; u < s->extent; u++) {
            g->iter[s->iter] = cgl_iconst(g, (int64_t)u);
            block(g, &s->body);
        }
        return;
    }
    LLVMValueRef *rows = calloc(v_count, sizeof *rows);
    if (!rows) diag_fatal_oom();
    g->lane_iter = vl->iter;
    g->lanes = v_count;
    g->iter[vl->iter] = cgl_iconst(g, 0);
    for (unsigned u = 0; u < v_count; u++) {
        g->iter[s->iter] = cgl_iconst(g, u);
        rows[u] = u < u_count ? cgl_widen(g, load(g, st->value->buffer, st->value->index))
                              : LLVMGetUndef(LLVMVectorType(cell_type(g, st->value->buffer), v_count));
        if (u < u_count && s->prefetch_rows && g->vector_floats) { /* (a CPU's) */
            g->iter[s->iter] = cgl_iconst(g, u + s->prefetch_rows);
            prefetch(g, st->value->buffer, flat_offset(g, st->value->buffer, st->value->index), 2);
        }
    }
    transpose_rows(g, rows, v_count);
    LLVMValueRef *first = calloc(u_count, sizeof *first);
    if (!first) diag_fatal_oom();
    for (unsigned u = 0; u < u_count; u++) first[u] = LLVMConstInt(g->i32, u, 0);
    LLVMValueRef keep = LLVMConstVector(first, u_count);
    g->lane_iter = s->iter;
    g->lanes = u_count;
    g->iter[s->iter] = cgl_iconst(g, 0);
    for (unsigned v = 0; v < v_count; v++) {
        g->iter[vl->iter] = cgl_iconst(g, v);
        LLVMValueRef row = u_count == v_count ? rows[v] : LLVMBuildShuffleVector(g->b, rows[v], rows[v], keep, "");
        store(g, st->buffer, st->index, row, false);
    }
    g->lane_iter = UINT32_MAX;
    g->lanes = 1;
    free(first);
    free(rows);
}

/* The tile step inside a LOOP_DOT_PAIRS loop (ir.h): for e < 2 unroll, ii unroll, jv unroll,
 * jl vector of 16: T[…] = fma(x, y, T[…]) with x and y bf16 loads; NULL for any other body. */
static const IrStmt *pairs_step(const CgLlvm *g, const IrStmt *s, const IrStmt **loops) {
    static const IrLoopMode modes[4] = {LOOP_UNROLL, LOOP_UNROLL, LOOP_UNROLL, LOOP_VECTOR};
    const IrStmt *at = s;
    for (unsigned k = 0; k < 4; k++) {
        if (at->body.count != 1) return NULL;
        at = loops[k] = at->body.items[0];
        if (at->kind != IR_LOOP || at->mode != modes[k]) return NULL;
    }
    if (loops[0]->extent != 2 || loops[3]->extent != 16 || at->body.count != 1) return NULL;
    const IrStmt *st = at->body.items[0];
    const IrExpr *v = st->kind == IR_STORE ? st->value : NULL;
    if (!v || v->kind != IR_OP || v->op != SOP_FMA || v->args[2]->kind != IR_LOAD || v->args[2]->buffer != st->buffer)
        return NULL;
    for (unsigned k = 0; k < 2; k++)
        if (v->args[k]->kind != IR_LOAD || g->ir->buffers[v->args[k]->buffer].dtype != DTYPE_BF16) return NULL;
    return st;
}

/* A cell of the tile may start a VDPBF16PS chain: 0, or at least 2^-103 in magnitude (a multiple
 * of 2^-126, as every product and partial sum then is; ir.h LOOP_DOT_PAIRS). */
static LLVMValueRef pairs_start_ok(CgLlvm *g, LLVMValueRef v) {
    LLVMValueRef zero = LLVMBuildFCmp(g->b, LLVMRealOEQ, v, cgl_fconst_like(g, v, 0), "");
    LLVMValueRef big = LLVMBuildFCmp(g->b, LLVMRealOGE, cgl_intrinsic(g, "llvm.fabs", &v, 1), cgl_fconst_like(g, v, 0x1p-103), "");
    return LLVMBuildOr(g->b, zero, big, "");
}

/* A LOOP_DOT_PAIRS loop (ir.h): where its guard local is 0 and every cell of the tile starts
 * well (pairs_start_ok), the pairs run on VDPBF16PS: per pair, each row's 32-bit cell of A
 * broadcast, each vector of B's 16 cells loaded whole, one instruction per row and vector;
 * otherwise (and for any other body) the plain loop. */
static void dot_pairs_loop(CgLlvm *g, const IrStmt *s, LLVMValueRef lo, LLVMValueRef hi) {
    const IrStmt *loops[4];
    const IrStmt *st = g->lane_iter == UINT32_MAX ? pairs_step(g, s, loops) : NULL;
    if (!st) {
        plain_loop(g, s, lo, hi);
        return;
    }
    const IrStmt *e_loop = loops[0], *ii_loop = loops[1], *jv_loop = loops[2], *jl_loop = loops[3];
    const IrExpr *x = st->value->args[0], *y = st->value->args[1];
    g->lane_iter = jl_loop->iter;
    g->lanes = 16;
    g->iter[jl_loop->iter] = cgl_iconst(g, 0);
    bool x_broadcast = lane_stride(g, x->buffer, x->index) == 0;
    const IrExpr *a = x_broadcast ? x : y, *b = x_broadcast ? y : x;
    LLVMTypeRef v16f = LLVMVectorType(g->f32, 16), v16i = LLVMVectorType(g->i32, 16);
    LLVMTypeRef v32bf = LLVMVectorType(LLVMBFloatTypeInContext(g->ctx), 32);
    /* The guard: no tiny operand, and a tile that starts well. */
    LLVMValueRef guard = LLVMBuildLoad2(g->b, LLVMGetAllocatedType(g->local[s->local]), g->local[s->local], "");
    LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildBitCast(g->b, guard, g->i32, ""), LLVMConstInt(g->i32, 0, 0), "");
    LLVMTypeRef v16b = LLVMVectorType(LLVMInt1TypeInContext(g->ctx), 16);
    for (uint64_t ii = 0; ii < ii_loop->extent; ii++)
        for (uint64_t jv = 0; jv < jv_loop->extent; jv++) {
            g->iter[ii_loop->iter] = cgl_iconst(g, (int64_t)ii);
            g->iter[jv_loop->iter] = cgl_iconst(g, (int64_t)jv);
            LLVMValueRef start_ok = pairs_start_ok(g, load(g, st->buffer, st->index));
            LLVMValueRef cells_ok = cgl_call(g, "llvm.vector.reduce.and.v16i1", LLVMInt1TypeInContext(g->ctx), &v16b, 1, &start_ok);
            ok = LLVMBuildAnd(g->b, ok, cells_ok, "");
        }
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "dot_pairs");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "fma_steps");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "pairs_done");
    LLVMBuildCondBr(g->b, ok, fast, slow);
    LLVMPositionBuilderAtEnd(g->b, fast);
    CglLoop l;
    g->iter[s->iter] = cgl_loop_open(g, &l, lo, hi);
    g->iter[e_loop->iter] = cgl_iconst(g, 1); /* the pair's cell starts at step 2p + 1's half */
    LLVMValueRef *rows = calloc(ii_loop->extent, sizeof *rows);
    if (!rows) diag_fatal_oom();
    g->iter[jv_loop->iter] = cgl_iconst(g, 0);
    for (uint64_t ii = 0; ii < ii_loop->extent; ii++) {
        g->iter[ii_loop->iter] = cgl_iconst(g, (int64_t)ii);
        LLVMValueRef at = element(g, a->buffer, flat_offset(g, a->buffer, a->index));
        LLVMValueRef pair = LLVMBuildLoad2(g->b, g->i32, at, "");
        LLVMSetAlignment(pair, 4);
        LLVMValueRef splat = cgl_widen(g, pair);
        rows[ii] = LLVMBuildBitCast(g->b, splat, v32bf, "");
    }
    for (uint64_t jv = 0; jv < jv_loop->extent; jv++) {
        g->iter[jv_loop->iter] = cgl_iconst(g, (int64_t)jv);
        g->iter[ii_loop->iter] = cgl_iconst(g, 0);
        LLVMValueRef bl = LLVMBuildLoad2(g->b, v16i, element(g, b->buffer, flat_offset(g, b->buffer, b->index)), "");
        LLVMSetAlignment(bl, 4);
        LLVMValueRef bv = LLVMBuildBitCast(g->b, bl, v32bf, "");
        for (uint64_t ii = 0; ii < ii_loop->extent; ii++) {
            g->iter[ii_loop->iter] = cgl_iconst(g, (int64_t)ii);
            LLVMValueRef acc = load(g, st->buffer, st->index);
            LLVMTypeRef params[3] = {v16f, v32bf, v32bf};
            LLVMValueRef args[3] = {acc, rows[ii], bv};
            store(g, st->buffer, st->index, cgl_call(g, "llvm.x86.avx512bf16.dpbf16ps.512", v16f, params, 3, args), false);
        }
    }
    free(rows);
    cgl_loop_close(g, &l, 1);
    LLVMBuildBr(g->b, done);
    g->lane_iter = UINT32_MAX;
    g->lanes = 1;
    LLVMPositionBuilderAtEnd(g->b, slow);
    plain_loop(g, s, lo, hi);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}


/* v through an empty inline PTX move: the same value, of which LLVM knows nothing. */
static LLVMValueRef opaque(CgLlvm *g, LLVMValueRef v) {
    LLVMTypeRef type = LLVMFunctionType(g->i64, &g->i64, 1, 0);
    static const char text[] = "mov.b64 $0, $1;", constraints[] = "=l,l";
    LLVMValueRef move = LLVMGetInlineAsm(type, (char *)text, sizeof text - 1, (char *)constraints, sizeof constraints - 1, 0, 0,
                                         LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(g->b, type, move, &v, 1, "");
}

/* The body of a GPU loop whose iteration in this thread is `i`; with `guard`, only where
 * i < extent (the threads past the loop's end skip it). */
static void gpu_body(CgLlvm *g, const IrStmt *s, LLVMValueRef i, bool guard) {
    /* In a segment (gpu_segments), the iteration through an opaque copy: from the guards on it
     * and on the block LLVM would learn ranges that turn the index's adds into ors, which its
     * vectorizer cannot follow (a thread's 4 adjacent cells would not be one 16-byte access). */
    bool flat_segment = g->segment_threads && ir_mode_flat_gpu(s->mode);
    g->iter[s->iter] = flat_segment && !guard ? opaque(g, i) : i;
    if (!guard) {
        block(g, &s->body);
        return;
    }
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "in_range");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "past_end");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, i, cgl_iconst(g, (int64_t)s->extent), ""), body, done);
    LLVMPositionBuilderAtEnd(g->b, body);
    if (flat_segment) g->iter[s->iter] = opaque(g, i); /* (after the guard: see above) */
    block(g, &s->body);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

/* A gpu.x/y/z loop (ir.h): iteration blockIdx·threads + threadIdx, guarded when the extent is
 * not a whole number of blocks. */
static void gpu_loop(CgLlvm *g, const IrStmt *s) {
    static const char *const block_index[] = {"ctaid.x", "ctaid.y", "ctaid.z"}, *const thread_index[] = {"tid.x", "tid.y", "tid.z"};
    unsigned d = s->mode - LOOP_GPU_X;
    /* (in a segment, its block's place in its own grid: gpu_segments) */
    LLVMValueRef i = g->segment_block[d] ? g->segment_block[d] : cgl_special_register(g, block_index[d]);
    uint32_t threads = g->segment_threads && d == 0 ? g->segment_threads : s->threads; /* a segment's x: the kernel's */
    if (threads > 1)
        i = LLVMBuildNUWAdd(g->b, LLVMBuildNUWMul(g->b, i, cgl_iconst(g, threads), ""), cgl_special_register(g, thread_index[d]), "i");
    gpu_body(g, s, i, s->extent % threads != 0);
}

/* A block or thread loop of a block's kernel (ir.h): the body once, with the iterator this
 * block's or this thread's index; a thread loop shorter than the block is guarded.  A thread
 * loop that splits its dimension takes threadIdx / thread_stride, the loop inside it of that
 * dimension threadIdx mod its extent (neither guarded: together they cover the block). */
static void block_or_thread_loop(CgLlvm *g, const IrStmt *s) {
    static const char *const names[] = {"ctaid.x", "ctaid.y", "ctaid.z", "tid.x", "tid.y", "tid.z"};
    bool thread = ir_mode_thread(s->mode);
    /* (a block loop of a segment: its block's place in its own grid, gpu_segments) */
    LLVMValueRef i = !thread && g->segment_block[s->mode - LOOP_BLOCK_X] ? g->segment_block[s->mode - LOOP_BLOCK_X]
                                                                          : cgl_special_register(g, names[s->mode - LOOP_BLOCK_X]);
    bool *split = thread ? &g->thread_split[s->mode - LOOP_THREAD_X] : NULL; /* inside a splitting loop of this dimension */
    bool outer_split = split && *split, guard = false;
    if (thread) {
        uint64_t stride = s->thread_stride > 1 ? s->thread_stride : 1;
        if (outer_split) i = LLVMBuildURem(g->b, i, cgl_iconst(g, (int64_t)s->extent), "");
        else guard = s->extent * stride < g->block_dim[s->mode - LOOP_THREAD_X];
        if (stride > 1) i = LLVMBuildUDiv(g->b, i, cgl_iconst(g, (int64_t)stride), "");
        *split = stride > 1;
    }
    g->thread_iter[s->iter] = thread;
    bool phase = thread && !g->in_thread_loops; /* the outermost thread loop of a phase */
    if (phase) g->in_thread_loops = true;
    gpu_body(g, s, i, guard);
    g->thread_iter[s->iter] = false;
    if (split) *split = outer_split;
    if (phase) {
        g->in_thread_loops = false;
        if (g->copies_issued) /* the phase's copies are one group (ir.h LOOP_ASYNC_COPY) */
            cgl_call(g, "llvm.nvvm.cp.async.commit.group", g->void_t, NULL, 0, NULL);
        g->copies_issued = false;
    }
}

/* The address of cell `index` + `extra` of a swizzled panel (one axis, no gather or symbol):
 * the terms and the part of the offset that move it by whole periods of the swizzle are added
 * after it, so that what the swizzle depends on is the thread's alone (the passes of a copy, the
 * cells of a rounding pass and the stages of a pipeline then differ by constants, not by
 * registers of their own: a pass over 16 cells that swizzled each whole address kept 64 of them
 * live across the pipeline's loop, and its 128 × 256 product spilled). */
static LLVMValueRef swizzled_cell(CgLlvm *g, uint32_t buffer, const IrIndex *index, int64_t extra) {
    int64_t bytes = cell_align(g, buffer), period = 8 * (int64_t)g->ir->buffers[buffer].swizzle / bytes; /* in cells */
    int64_t offset = index->offset + extra, aligned = offset - offset % period;
    LLVMValueRef rest = cgl_iconst(g, offset % period), moved = cgl_iconst(g, 0);
    for (uint32_t t = 0; t < index->term_count; t++) {
        const IrTerm *term = &index->terms[t];
        LLVMValueRef part = LLVMBuildNSWMul(g->b, cgl_iconst(g, term->coef), g->iter[term->iter], "");
        if (term->coef % period) rest = LLVMBuildNSWAdd(g->b, rest, part, "");
        else moved = LLVMBuildNSWAdd(g->b, moved, part, "");
    }
    LLVMValueRef at = swizzled_byte(g, buffer, LLVMBuildNSWMul(g->b, rest, cgl_iconst(g, bytes), ""), aligned * bytes);
    LLVMValueRef idx[1] = {LLVMBuildNSWMul(g->b, moved, cgl_iconst(g, bytes), "")};
    return LLVMBuildInBoundsGEP2(g->b, LLVMInt8TypeInContext(g->ctx), at, idx, 1, "");
}

/* A LOOP_ASYNC_COPY loop (ir.h): its run of cells copied from the device buffer into shared
 * memory by cp.async, 16 bytes at a time (cp.async.cg, around L1), or 8 or 4 at once (.ca). */
static void async_copy_loop(CgLlvm *g, const IrStmt *s) {
    const IrStmt *st = s->body.items[0];
    const IrExpr *src = st->value;
    g->iter[s->iter] = cgl_iconst(g, 0);
    bool swizzled = g->ir->buffers[st->buffer].swizzle != 0; /* (one axis, no gather or symbol: ir.c) */
    LLVMValueRef to = swizzled ? NULL : element(g, st->buffer, flat_offset(g, st->buffer, st->index));
    /* The source's offset as one sum of terms (summed_offset): as the nested products of its axes, a
     * copy from an operand of three axes (a weight's gradient over sequences and positions)
     * kept each pass's address in registers of its own, and its 128 × 256 product spilled; a
     * bf16 product of 8192² in tile groups took 244 registers, 200 so. */
    LLVMValueRef from_offset = summed_offset(g, &g->ir->buffers[src->buffer], src->index);
    LLVMValueRef from = element(g, src->buffer, from_offset ? from_offset : flat_offset(g, src->buffer, src->index));
    LLVMTypeRef shared = LLVMPointerTypeInContext(g->ctx, 3), global = LLVMPointerTypeInContext(g->ctx, 1);
    from = LLVMBuildAddrSpaceCast(g->b, from, global, "");
    uint32_t cell_bytes = ir_dtype_bytes(g->ir->buffers[st->buffer].dtype);
    uint64_t bytes = s->extent * cell_bytes;
    for (uint64_t at = 0; at < bytes; at += 16) {
        uint64_t n = bytes - at < 16 ? bytes - at : 16;
        LLVMValueRef idx[1] = {cgl_iconst(g, (int64_t)at)};
        LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
        /* A swizzled panel's 16 bytes each where the swizzle puts them (the run starts 16-byte aligned). */
        LLVMValueRef into = !swizzled ? LLVMBuildGEP2(g->b, i8, to, idx, 1, "")
                            : swizzled_cell(g, st->buffer, st->index, (int64_t)(at / cell_bytes));
        LLVMValueRef args[2] = {into, LLVMBuildGEP2(g->b, i8, from, idx, 1, "")};
        LLVMTypeRef params[2] = {shared, global};
        cgl_call(g, n == 16 ? "llvm.nvvm.cp.async.cg.shared.global.16" : n == 8 ? "llvm.nvvm.cp.async.ca.shared.global.8"
                                                                                : "llvm.nvvm.cp.async.ca.shared.global.4",
                 g->void_t, params, 2, args);
    }
    g->copies_issued = true;
}

static void loop(CgLlvm *g, const IrStmt *s, LLVMValueRef lo, LLVMValueRef hi) {
    switch (s->mode) {
    case LOOP_BLOCK_X:
    case LOOP_BLOCK_Y:
    case LOOP_BLOCK_Z:
    case LOOP_THREAD_X:
    case LOOP_THREAD_Y:
    case LOOP_THREAD_Z: block_or_thread_loop(g, s); return;
    case LOOP_GPU_X:
    case LOOP_GPU_Y:
    case LOOP_GPU_Z: gpu_loop(g, s); return;
    case LOOP_PLAIN: plain_loop(g, s, lo, hi); return;
    case LOOP_TRANSPOSE: transpose_loop(g, s); return;
    case LOOP_DOT_PAIRS: dot_pairs_loop(g, s, lo, hi); return;
    case LOOP_ASYNC_COPY: async_copy_loop(g, s); return;
    case LOOP_BLOCKS: /* the host runs these around their body's kernels (kernel.h) */
        diag_error_noloc("internal error: a loop of blocks inside a kernel");
        return;
    case LOOP_UNROLL:
        for (uint64_t v = 0; v < s->extent; v++) {
            g->iter[s->iter] = cgl_iconst(g, (int64_t)v);
            block(g, &s->body);
        }
        return;
    case LOOP_VECTOR: {
        uint32_t outer_lane = g->lane_iter;
        unsigned outer_lanes = g->lanes;
        g->lane_iter = s->iter;
        g->lanes = (unsigned)s->extent;
        g->iter[s->iter] = cgl_iconst(g, 0);
        block(g, &s->body);
        g->lane_iter = outer_lane;
        g->lanes = outer_lanes;
        return;
    }
    }
}

static void stmt(CgLlvm *g, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP: loop(g, s, cgl_iconst(g, 0), cgl_size(g, s->extent, NULL)); break;
    case IR_STORE: {
        DType dtype = g->ir->buffers[s->buffer].dtype;
        if (ir_dtype_half(dtype) && g->ir->buffers[s->buffer].kind == BUF_SCRATCH && s->value->kind == IR_LOAD &&
            g->ir->buffers[s->value->buffer].dtype == dtype) { /* a copy into a panel: the cells' bits (the
                                                              * round trip through f32 is exact) */
            store(g, s->buffer, s->index, load(g, s->value->buffer, s->value->index), s->nontemporal);
            break;
        }
        LLVMValueRef v = expr(g, s->value);
        if (dtype == DTYPE_BF16 && g->bf16_convert && is_vector(v) && g->lanes == 16 && LLVMTypeOf(v) == LLVMVectorType(g->f32, 16))
            v = narrow_bf16_vector(g, v);
        else if (ir_dtype_half(dtype))
            v = narrow_half(g, dtype, v);
        else if (ir_dtype_byte(dtype))
            v = narrow_byte(g, dtype, v);
        store(g, s->buffer, s->index, v, s->nontemporal);
        break;
    }
    case IR_SET_LOCAL: {
        LLVMValueRef v = expr(g, s->value);
        if (is_vector(v)) /* a local set in a vector loop keeps the last lane's value */
            v = LLVMBuildExtractElement(g->b, v, LLVMConstInt(g->i32, g->lanes - 1, 0), "");
        LLVMBuildStore(g->b, v, g->local[s->local]);
        break;
    }
    case IR_BARRIER:
        if (s->fence_async) { /* the thread's stores into shared memory, before a warpgroup product reads them */
            LLVMTypeRef fn = LLVMFunctionType(g->void_t, NULL, 0, 0);
            static const char text[] = "fence.proxy.async.shared::cta;", constraints[] = "~{memory}";
            LLVMValueRef fence = LLVMGetInlineAsm(fn, (char *)text, sizeof text - 1, (char *)constraints, sizeof constraints - 1, 1, 0,
                                                  LLVMInlineAsmDialectATT, 0);
            LLVMBuildCall2(g->b, fn, fence, NULL, 0, "");
        }
        if (s->await_copies) {
            LLVMTypeRef i32 = g->i32;
            LLVMValueRef n = LLVMConstInt(g->i32, s->copies_in_flight, 0);
            cgl_call(g, "llvm.nvvm.cp.async.wait.group", g->void_t, &i32, 1, &n);
        }
        cgl_call(g, "llvm.nvvm.barrier0", g->void_t, NULL, 0, NULL);
        break;
    case IR_MMA: cgl_tensor_product(g, &s->mma); break;
    case IR_LDMATRIX: cgl_load_matrices(g, &s->ldmatrix); break;
    case IR_WGMMA: cgl_warpgroup_product(g, &s->wgmma); break;
    case IR_CALL: diag_error_noloc("internal error: a call of the runtime inside a kernel"); break;
    }
}

static void block(CgLlvm *g, const IrBlock *blk) {
    for (uint32_t i = 0; i < blk->count; i++) stmt(g, blk->items[i]);
}

/* Segment i of a kernel of segments (gpu_segments), in this block: its gpu.x/y/z loops take the
 * block's place in the segment's own grid (x fastest), `relative` blocks from its first. */
static void run_segment(CgLlvm *g, const IrStmt *s, uint32_t threads, LLVMValueRef relative) {
    uint32_t grid[3];
    kernel_segment_grid(s, threads, grid);
    /* (a one-dimensional grid's place is the relative block itself) */
    LLVMValueRef rest = grid[1] * grid[2] > 1 ? LLVMBuildUDiv(g->b, relative, cgl_iconst(g, grid[0]), "") : NULL;
    g->segment_block[0] = rest ? LLVMBuildURem(g->b, relative, cgl_iconst(g, grid[0]), "") : relative;
    g->segment_block[1] = rest ? LLVMBuildURem(g->b, rest, cgl_iconst(g, grid[1]), "") : cgl_iconst(g, 0);
    g->segment_block[2] = rest ? LLVMBuildUDiv(g->b, rest, cgl_iconst(g, grid[1]), "") : cgl_iconst(g, 0);
    stmt(g, s);
    for (int d = 0; d < 3; d++) g->segment_block[d] = NULL;
}

/* The segments lo … hi − 1 of kernel k, whose first blocks are first[lo … hi − 1] (the grid's
 * blocks from first[lo] to first[hi] − 1, one range a segment, in order), for the block `block`:
 * a balanced tree of compares against the middle segment's first block, so that a thread
 * makes ⌈log₂ segments⌉ of them before it runs its own segment, then goes to `done`. */
static void segment_tree(CgLlvm *g, const Kernel *k, LLVMValueRef block, const uint64_t *first, uint32_t lo, uint32_t hi,
                         LLVMBasicBlockRef done) {
    if (hi - lo == 1) {
        run_segment(g, k->stmts[lo], k->block[0], LLVMBuildSub(g->b, block, cgl_iconst(g, (int64_t)first[lo]), ""));
        LLVMBuildBr(g->b, done);
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    LLVMBasicBlockRef below = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "segments_below");
    LLVMBasicBlockRef from = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "segments_from");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, block, cgl_iconst(g, (int64_t)first[mid]), ""), below, from);
    LLVMPositionBuilderAtEnd(g->b, below);
    segment_tree(g, k, block, first, lo, mid, done);
    LLVMPositionBuilderAtEnd(g->b, from);
    segment_tree(g, k, block, first, mid, hi, done);
}

/* A kernel of segments (kernel.h): each statement runs on its own range of the grid's blocks
 * (the grid holds exactly theirs, segment_launch), its gpu.x loop with the kernel's threads a
 * block; its gpu.x/y/z loops, or its block loops, take its block's place in its own grid (x
 * fastest) instead of the block's index (a block's kernel's thread loops shorter than the
 * kernel's block are guarded, as in any block's kernel; its shared buffers: cg_ptx.c).  Which
 * segment a block runs is found by a tree of compares (segment_tree): an optimiser's updates of
 * a GPT are one launch of ~90 segments, where a chain of compares would cost each thread more
 * instructions than its cells' update. */
static void gpu_segments(CgLlvm *g, const Kernel *k) {
    LLVMValueRef block = cgl_special_register(g, "ctaid.x");
    uint64_t *first = malloc(((size_t)k->count + 1) * sizeof *first);
    if (!first) diag_fatal_oom();
    uint32_t grid[3];
    first[0] = 0;
    for (uint32_t i = 0; i < k->count; i++) first[i + 1] = first[i] + kernel_segment_grid(k->stmts[i], k->block[0], grid);
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "segments_done");
    g->segment_threads = k->block[0];
    segment_tree(g, k, block, first, 0, k->count, done);
    g->segment_threads = 0;
    LLVMPositionBuilderAtEnd(g->b, done);
    free(first);
}

/* A chain (kernel.h): its parts in order, a barrier between each and the next; a part of
 * statements outside GPU loops on thread 0, a nest of gpu.x loops on the block's threads (its
 * gpu.x loop takes the kernel's threads a block, as a segment's does, so that those past its
 * extent skip it), a block's kernel on its thread loops (those shorter than the block guarded). */
static void gpu_chain(CgLlvm *g, const Kernel *k) {
    for (uint32_t p = 0; p < k->part_count; p++) {
        if (p) cgl_call(g, "llvm.nvvm.barrier0", g->void_t, NULL, 0, NULL);
        const IrStmt *first = k->stmts[k->part_first[p]];
        LLVMBasicBlockRef done = NULL;
        if (kernel_chain_thread0(k, p)) {
            LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "thread0");
            done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "thread0_done");
            LLVMValueRef t = cgl_special_register(g, "tid.x");
            LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, LLVMConstNull(LLVMTypeOf(t)), ""), body, done);
            LLVMPositionBuilderAtEnd(g->b, body);
        } else if (first->kind == IR_LOOP && ir_mode_flat_gpu(first->mode)) {
            g->segment_threads = k->block[0];
        }
        for (uint32_t i = k->part_first[p]; i < k->part_first[p + 1]; i++) stmt(g, k->stmts[i]);
        g->segment_threads = 0;
        if (done) {
            LLVMBuildBr(g->b, done);
            LLVMPositionBuilderAtEnd(g->b, done);
        }
    }
}

/* The locals that statement s sets get their stack slot (kernel.c keeps every local within one
 * kernel, set before it is read); only those, so a kernel costs what it holds, not what its
 * function holds. */
static void allocate_locals(CgLlvm *g, const IrStmt *s) {
    if (s->kind == IR_LOOP)
        for (uint32_t i = 0; i < s->body.count; i++) allocate_locals(g, s->body.items[i]);
    else if (s->kind == IR_SET_LOCAL && !g->local[s->local])
        g->local[s->local] = LLVMBuildAlloca(g->b, ir_dtype_wide(ir_expr_type(g->ir, s->value)) ? g->f64 : g->f32, "acc");
}

static void forget_locals(CgLlvm *g, const IrStmt *s) {
    if (s->kind == IR_LOOP)
        for (uint32_t i = 0; i < s->body.count; i++) forget_locals(g, s->body.items[i]);
    else if (s->kind == IR_SET_LOCAL)
        g->local[s->local] = NULL;
}

void cgl_kernel_body(CgLlvm *g, const IrFunction *fn, const Kernel *k, LLVMValueRef lo, LLVMValueRef hi,
                     LLVMValueRef symbols, const LLVMValueRef *buffers) {
    const IrProgram *ir = g->ir;
    for (uint32_t i = 0; i < k->buffer_count; i++) g->buffer[k->buffers[i]] = buffers[i];
    for (uint32_t i = 0; i < k->local_count; i++) {
        const IrBuffer *b = &ir->buffers[k->locals[i]];
        if (b->gpu_shared) continue; /* the caller's (cg_ptx.c: shared memory) */
        uint64_t cells = b->thread_cells ? b->thread_cells : b->size;
        LLVMValueRef a = LLVMBuildAlloca(g->b, LLVMArrayType(cell_type(g, k->locals[i]), (unsigned)cells), b->name);
        LLVMSetAlignment(a, 64);
        g->buffer[k->locals[i]] = a;
    }
    for (uint32_t s = 0; s < ir->symbol_count; s++) {
        LLVMValueRef idx[1] = {cgl_iconst(g, s)};
        g->symbol[s] = LLVMBuildLoad2(g->b, g->i64, LLVMBuildInBoundsGEP2(g->b, g->i64, symbols, idx, 1, ""), "");
    }
    for (uint32_t w = 0; w < ABI_SYMBOL_KEY_WORDS; w++) { /* the run's random key (abi.h); unused loads go */
        LLVMValueRef idx[1] = {cgl_iconst(g, ir->symbol_count + w)};
        g->random_key[w] = LLVMBuildLoad2(g->b, g->i64, LLVMBuildInBoundsGEP2(g->b, g->i64, symbols, idx, 1, ""), "");
    }
    for (uint32_t i = 0; i < k->count; i++) allocate_locals(g, k->stmts[i]);
    g->lane_iter = UINT32_MAX;
    g->lanes = 1;
    g->nontemporal = false;
    const IrStmt *first = k->stmts[0];
    if (k->count == 1 && first->kind == IR_LOOP && first->mode == LOOP_PLAIN) {
        plain_loop(g, first, lo, hi);
    } else if (k->segments) {
        gpu_segments(g, k);
    } else if (k->chain) {
        gpu_chain(g, k);
    } else {
        for (uint32_t i = 0; i < k->count; i++) stmt(g, k->stmts[i]);
    }
    /* Non-temporal stores are weakly ordered: fence them before whoever runs next reads them. */
    if (g->nontemporal) LLVMBuildFence(g->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    /* Leave the tables empty for the next kernel (clearing only what this one used). */
    for (uint32_t i = 0; i < k->count; i++) forget_locals(g, k->stmts[i]);
    for (uint32_t i = 0; i < k->buffer_count; i++) g->buffer[k->buffers[i]] = NULL;
    for (uint32_t i = 0; i < k->local_count; i++)
        if (!ir->buffers[k->locals[i]].gpu_shared) g->buffer[k->locals[i]] = NULL;
}
