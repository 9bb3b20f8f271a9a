/* approx.h — tsrc's own single-precision exp, log and tanh (approx.c).
 *
 * The reference executor evaluates `exp`, `log`, `tanh` and `sigmoid` with these functions, and
 * native and GPU code (cg/cg_approx.c) emits the same steps as vector instructions, so both
 * give the same bits for every input while the generated code needs no call per lane.  Each
 * function is a fixed sequence of single-precision operations — fused multiply-adds where the
 * sequence says so, everything else one rounding per operation — and integer operations on the
 * bits of floats; the constants below are the sequence's, shared by both.
 *
 * Accuracy, measured over every float (`make check-approx`; make check samples every 1021st):
 * exp within 1.10 ulp, log within 1.35 ulp, tanh within 1.52 ulp of the exact value, where
 * glibc's expf, logf and tanhf are within 0.50, 0.78 and 2.09 (docs/ir.md §2.5).  Special values are exact: exp(±inf) = inf, 0; exp overflows to inf and
 * underflows gradually through the subnormals; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf;
 * tanh(±inf) = ±1, tanh(-0) = -0; a NaN gives a NaN. */
#ifndef TSR_APPROX_H
#define TSR_APPROX_H

#include <stdint.h>
#include <string.h>

/* The bits of a float, and the float of some bits (what LLVM's bitcast does). */
static inline uint32_t approx_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float approx_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp x: n = round(x / ln 2) (added to 1.5·2^23 so that the sum's low bits are n), r = x − n·ln 2
 * in two steps, e^r = 1 + r + r²·P(r) on |r| ≤ ln 2 / 2, then e^r · 2^n as two multiplications by
 * 2^⌊n/2⌋ and 2^(n−⌊n/2⌋), built from their exponent bits, so that 2^n never leaves the normal
 * range while the product may overflow or round into the subnormals. */
#define APPROX_EXP_MAX 0x1.633334p+6f      /* 88.8: x above it is clamped (e^x = inf) */
/* -104: e^x rounds to +0 below it (and, computed, at it).  Below it the result is +0 without the
 * steps, which run on 0 instead: their last product would round into the subnormals, which x86
 * computes through a microcode assist (about 150 cycles a vector) — a causal softmax, whose
 * masked scores are -1e30, took ten times as long.  The results are those of clamping x to -104. */
#define APPROX_EXP_MIN (-0x1.ap+6f)
#define APPROX_ROUND_MAGIC 0x1.8p+23f      /* 1.5·2^23: adding it rounds to an integer */
#define APPROX_LOG2E 0x1.715476p+0f
#define APPROX_LN2_HI 0x1.62e43p-1f        /* ln 2 = APPROX_LN2_HI + APPROX_LN2_LO */
#define APPROX_LN2_LO (-0x1.05c61p-29f)
#define APPROX_EXP_DEGREE 5
extern const float approx_exp_poly[APPROX_EXP_DEGREE]; /* P, lowest power first */

/* log x: x = 2^k · m with m in [√½, √2) (subnormals scaled by 2^23 first), f = m − 1,
 * log(1 + f) = f − f²/2 + f³·Q(f), log x = k·ln 2 + log(1 + f); zero, negative, infinite and NaN
 * inputs take their IEEE results by a final selection. */
#define APPROX_SQRT_HALF_BITS 0x3f3504f3u   /* the bits of √½, rounded */
#define APPROX_LOG_DEGREE 8
extern const float approx_log_poly[APPROX_LOG_DEGREE]; /* Q, lowest power first */

/* tanh x, computed for a = |x| and given the sign bit of x (so tanh(-x) = -tanh(x) exactly and
 * tanh(-0) = -0): below APPROX_TANH_SMALL, a + a³·R(a²); above, 1 − 2 / (e^(2a) + 1) (approx_exp,
 * so large inputs give exactly 1 and NaN stays NaN). */
#define APPROX_TANH_SMALL 0x1.19999ap-1f    /* 0.55 */
#define APPROX_TANH_DEGREE 5
extern const float approx_tanh_poly[APPROX_TANH_DEGREE]; /* R, lowest power first */

float approx_exp(float x);
float approx_log(float x);
float approx_tanh(float x);

#endif
