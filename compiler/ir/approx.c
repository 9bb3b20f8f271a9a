/* approx.c — tsrc's own single-precision exp, log and tanh, as the reference executor runs them.
 *
 * What it does: each function below is the step-by-step sequence approx.h describes, written
 * so that C performs exactly those operations: fmaf() where the sequence fuses, one IEEE
 * operation per expression elsewhere (the compiler is built with ISO C's default of no
 * contraction, -std=c11), and integer arithmetic on the floats' bits in uint32_t, where it
 * wraps as LLVM's does.  cg/cg_approx.c emits the same sequence; tests/native/approx.sh checks
 * that native code and these functions agree bit for bit on a sweep of every float's bits.
 *
 * Requires: nothing but <math.h>'s fmaf (exact on every machine). */
#include "ir/approx.h"

#include <math.h>

/* Coefficients fitted by weighted least squares iterated towards minimax error on the
 * interval each function reduces to, then rounded to single precision. */
const float approx_exp_poly[APPROX_EXP_DEGREE] = {
    0x1.000000p-1f, 0x1.5554e0p-3f, 0x1.555456p-5f, 0x1.120916p-7f, 0x1.6dde80p-10f,
};
const float approx_log_poly[APPROX_LOG_DEGREE] = {
    0x1.555550p-2f, -0x1.00009ap-2f, 0x1.99a6c6p-3f, -0x1.54f048p-3f,
    0x1.223bd4p-3f, -0x1.079892p-3f, 0x1.08cdd4p-3f, -0x1.6501c4p-4f,
};
const float approx_tanh_poly[APPROX_TANH_DEGREE] = {
    -0x1.555554p-2f, 0x1.111006p-3f, -0x1.b9a674p-5f, 0x1.5d5ec0p-6f, -0x1.b2b5a0p-8f,
};

/* c[0] + c[1]·x + … by Horner's rule, one fused multiply-add a step. */
static float horner(const float *c, unsigned degree, float x) {
    float p = c[degree - 1];
    for (unsigned i = degree - 1; i-- > 0;) p = fmaf(p, x, c[i]);
    return p;
}

float approx_exp(float x) {
    float clamped = x > APPROX_EXP_MAX ? APPROX_EXP_MAX : x; /* ordered compares: NaN passes */
    int underflows = clamped < APPROX_EXP_MIN;                /* the result is +0 (approx.h) */
    clamped = underflows ? 0.0f : clamped;
    float shifted = fmaf(clamped, APPROX_LOG2E, APPROX_ROUND_MAGIC);
    float n = shifted - APPROX_ROUND_MAGIC;
    float r = fmaf(n, -APPROX_LN2_HI, clamped);
    r = fmaf(n, -APPROX_LN2_LO, r);
    float p = horner(approx_exp_poly, APPROX_EXP_DEGREE, r);
    float er = 1.0f + fmaf(r * r, p, r);
    uint32_t n_bits = approx_bits(shifted) - approx_bits(APPROX_ROUND_MAGIC); /* n, two's complement */
    uint32_t half = (uint32_t)((int32_t)n_bits >> 1);                /* ⌊n/2⌋ */
    float scale1 = approx_float((half + 127u) << 23);
    float scale2 = approx_float((n_bits - half + 127u) << 23);
    return underflows ? 0.0f : er * scale1 * scale2;
}

float approx_log(float x) {
    int subnormal = x < 0x1p-126f;
    float scaled = subnormal ? x * 0x1p23f : x;
    uint32_t offset = approx_bits(scaled) - APPROX_SQRT_HALF_BITS;
    int32_t k = ((int32_t)offset >> 23) - (subnormal ? 23 : 0);
    float f = approx_float((offset & 0x7fffffu) + APPROX_SQRT_HALF_BITS) - 1.0f;
    float q = horner(approx_log_poly, APPROX_LOG_DEGREE, f);
    float log1p_f = fmaf(f * f, fmaf(f, q, -0.5f), f);
    float kf = (float)k;
    float result = fmaf(kf, APPROX_LN2_HI, fmaf(kf, APPROX_LN2_LO, log1p_f));
    float special = x < 0.0f ? approx_float(0x7fc00000u) : x == 0.0f ? -INFINITY : x + x; /* inf, NaN */
    return x > 0.0f && x < INFINITY ? result : special;
}

float approx_tanh(float x) {
    float magnitude = fabsf(x);
    float square = magnitude * magnitude;
    float small = fmaf(magnitude * square, horner(approx_tanh_poly, APPROX_TANH_DEGREE, square), magnitude);
    float e = approx_exp(magnitude + magnitude);
    float large = 1.0f - 2.0f / (e + 1.0f);
    float unsigned_result = magnitude < APPROX_TANH_SMALL ? small : large;
    return approx_float(approx_bits(unsigned_result) | (approx_bits(x) & 0x80000000u));
}
