/* cg_approx.c — tsrc's own exp, log and tanh as LLVM instructions (cg_approx.h).
 *
 * What it does: emits, for a float or a vector of floats, the operation sequence that
 * compiler/ir/approx.c computes in C, step for step and with the same constants (approx.h):
 * llvm.fma where approx.c calls fmaf, one instruction per C operation elsewhere, selects for
 * its conditionals (ordered compares, so a NaN takes the same branch), and wrapping integer
 * operations (no nsw/nuw, so no poison) on the floats' bits for its bit manipulations.  Native
 * code and the reference executor therefore agree bit for bit, and a vector loop of exp costs
 * a few instructions per lane instead of a libm call per lane.  tests/native/approx.sh checks
 * the agreement on a sweep of every float's bits, at every CPU level the machine runs.
 *
 * Requires: a builder positioned in a function (cg_llvm.c's scalar_op). */
#include "cg/cg_approx.h"

#include <math.h>

#include "ir/approx.h"

/* An i32 constant shaped like `like` (a scalar or a vector of g->lanes). */
static LLVMValueRef iconst_like(CgLlvm *g, LLVMValueRef like, uint32_t v) {
    LLVMValueRef c = LLVMConstInt(g->i32, v, 0);
    return LLVMGetTypeKind(LLVMTypeOf(like)) == LLVMVectorTypeKind ? cgl_widen(g, c) : c;
}

static LLVMTypeRef int_type_like(CgLlvm *g, LLVMValueRef like) {
    return LLVMGetTypeKind(LLVMTypeOf(like)) == LLVMVectorTypeKind ? LLVMVectorType(g->i32, g->lanes) : g->i32;
}

static LLVMValueRef to_bits(CgLlvm *g, LLVMValueRef f) { return LLVMBuildBitCast(g->b, f, int_type_like(g, f), ""); }

static LLVMValueRef from_bits(CgLlvm *g, LLVMValueRef i) {
    LLVMTypeRef t = LLVMGetTypeKind(LLVMTypeOf(i)) == LLVMVectorTypeKind ? LLVMVectorType(g->f32, g->lanes) : g->f32;
    return LLVMBuildBitCast(g->b, i, t, "");
}

static LLVMValueRef fma3(CgLlvm *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMValueRef x[3] = {a, b, c};
    return cgl_intrinsic(g, "llvm.fma", x, 3);
}

/* `cond(a, b) ? yes : no` with an ordered (false on NaN) or unordered float compare. */
static LLVMValueRef pick(CgLlvm *g, LLVMRealPredicate cond, LLVMValueRef a, LLVMValueRef b, LLVMValueRef yes,
                         LLVMValueRef no) {
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, cond, a, b, ""), yes, no, "");
}

static LLVMValueRef horner(CgLlvm *g, const float *c, unsigned degree, LLVMValueRef x) {
    LLVMValueRef p = cgl_fconst_like(g, x, c[degree - 1]);
    for (unsigned i = degree - 1; i-- > 0;) p = fma3(g, p, x, cgl_fconst_like(g, x, c[i]));
    return p;
}

LLVMValueRef cga_exp(CgLlvm *g, LLVMValueRef x) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef hi = cgl_fconst_like(g, x, APPROX_EXP_MAX), lo = cgl_fconst_like(g, x, APPROX_EXP_MIN);
    LLVMValueRef clamped = pick(g, LLVMRealOGT, x, hi, hi, x);
    LLVMValueRef zero = cgl_fconst_like(g, x, 0.0), underflows = LLVMBuildFCmp(B, LLVMRealOLT, clamped, lo, "");
    clamped = LLVMBuildSelect(B, underflows, zero, clamped, ""); /* +0 below APPROX_EXP_MIN (approx.h) */
    LLVMValueRef magic = cgl_fconst_like(g, x, APPROX_ROUND_MAGIC);
    LLVMValueRef shifted = fma3(g, clamped, cgl_fconst_like(g, x, APPROX_LOG2E), magic);
    LLVMValueRef n = LLVMBuildFSub(B, shifted, magic, "");
    LLVMValueRef r = fma3(g, n, cgl_fconst_like(g, x, -APPROX_LN2_HI), clamped);
    r = fma3(g, n, cgl_fconst_like(g, x, -APPROX_LN2_LO), r);
    LLVMValueRef p = horner(g, approx_exp_poly, APPROX_EXP_DEGREE, r);
    LLVMValueRef er = LLVMBuildFAdd(B, cgl_fconst_like(g, x, 1.0), fma3(g, LLVMBuildFMul(B, r, r, ""), p, r), "");
    LLVMValueRef n_bits = LLVMBuildSub(B, to_bits(g, shifted), to_bits(g, magic), "");
    LLVMValueRef half = LLVMBuildAShr(B, n_bits, iconst_like(g, x, 1), "");
    LLVMValueRef bias = iconst_like(g, x, 127), shift = iconst_like(g, x, 23);
    LLVMValueRef scale1 = from_bits(g, LLVMBuildShl(B, LLVMBuildAdd(B, half, bias, ""), shift, ""));
    LLVMValueRef scale2 =
        from_bits(g, LLVMBuildShl(B, LLVMBuildAdd(B, LLVMBuildSub(B, n_bits, half, ""), bias, ""), shift, ""));
    return LLVMBuildSelect(B, underflows, zero, LLVMBuildFMul(B, LLVMBuildFMul(B, er, scale1, ""), scale2, ""), "");
}

LLVMValueRef cga_log(CgLlvm *g, LLVMValueRef x) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef subnormal = LLVMBuildFCmp(B, LLVMRealOLT, x, cgl_fconst_like(g, x, 0x1p-126), "");
    LLVMValueRef scaled = LLVMBuildSelect(B, subnormal, LLVMBuildFMul(B, x, cgl_fconst_like(g, x, 0x1p23), ""), x, "");
    LLVMValueRef sqrt_half = iconst_like(g, x, APPROX_SQRT_HALF_BITS);
    LLVMValueRef offset = LLVMBuildSub(B, to_bits(g, scaled), sqrt_half, "");
    LLVMValueRef k = LLVMBuildSub(B, LLVMBuildAShr(B, offset, iconst_like(g, x, 23), ""),
                                  LLVMBuildSelect(B, subnormal, iconst_like(g, x, 23), iconst_like(g, x, 0), ""), "");
    LLVMValueRef mantissa = LLVMBuildAdd(B, LLVMBuildAnd(B, offset, iconst_like(g, x, 0x7fffffu), ""), sqrt_half, "");
    LLVMValueRef f = LLVMBuildFSub(B, from_bits(g, mantissa), cgl_fconst_like(g, x, 1.0), "");
    LLVMValueRef q = horner(g, approx_log_poly, APPROX_LOG_DEGREE, f);
    LLVMValueRef log1p_f =
        fma3(g, LLVMBuildFMul(B, f, f, ""), fma3(g, f, q, cgl_fconst_like(g, x, -0.5)), f);
    LLVMValueRef kf = LLVMBuildSIToFP(B, k, LLVMTypeOf(x), "");
    LLVMValueRef result = fma3(g, kf, cgl_fconst_like(g, x, APPROX_LN2_HI),
                               fma3(g, kf, cgl_fconst_like(g, x, APPROX_LN2_LO), log1p_f));
    LLVMValueRef zero = cgl_fconst_like(g, x, 0.0), inf = cgl_fconst_like(g, x, INFINITY);
    LLVMValueRef special = pick(g, LLVMRealOEQ, x, zero, cgl_fconst_like(g, x, -INFINITY), LLVMBuildFAdd(B, x, x, ""));
    special = pick(g, LLVMRealOLT, x, zero, from_bits(g, iconst_like(g, x, 0x7fc00000u)), special);
    LLVMValueRef finite_positive = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGT, x, zero, ""),
                                                LLVMBuildFCmp(B, LLVMRealOLT, x, inf, ""), "");
    return LLVMBuildSelect(B, finite_positive, result, special, "");
}

LLVMValueRef cga_tanh(CgLlvm *g, LLVMValueRef x) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef magnitude = cgl_intrinsic(g, "llvm.fabs", &x, 1);
    LLVMValueRef square = LLVMBuildFMul(B, magnitude, magnitude, "");
    LLVMValueRef small = fma3(g, LLVMBuildFMul(B, magnitude, square, ""),
                              horner(g, approx_tanh_poly, APPROX_TANH_DEGREE, square), magnitude);
    LLVMValueRef e = cga_exp(g, LLVMBuildFAdd(B, magnitude, magnitude, ""));
    LLVMValueRef one = cgl_fconst_like(g, x, 1.0);
    LLVMValueRef large =
        LLVMBuildFSub(B, one, LLVMBuildFDiv(B, cgl_fconst_like(g, x, 2.0), LLVMBuildFAdd(B, e, one, ""), ""), "");
    LLVMValueRef unsigned_result = pick(g, LLVMRealOLT, magnitude, cgl_fconst_like(g, x, APPROX_TANH_SMALL), small, large);
    LLVMValueRef sign = LLVMBuildAnd(B, to_bits(g, x), iconst_like(g, x, 0x80000000u), "");
    return from_bits(g, LLVMBuildOr(B, to_bits(g, unsigned_result), sign, ""));
}
