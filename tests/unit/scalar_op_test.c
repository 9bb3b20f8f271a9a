/* scalar_op_test.c — unit tests of scalar_op_eval (compiler/ir/ir.c), the reference executor's
 * arithmetic, on the values where IEEE arithmetic has choices: NaN, infinities and signed zeros.
 *
 * What it checks: relu propagates NaN (relu(NaN) = NaN, as PyTorch's relu does; it used to give
 * 0, so a loss built on relu read 0 while the weights were NaN), gives +0 for -0 and the
 * negative numbers, keeps +inf; the comparisons are false with a NaN operand (IEEE: 0), as
 * docs/language.md §3.8 says; `ne` is true and `not` false with a NaN; sat01 and sign keep NaN,
 * sign keeps the sign of zero, abs drops it; mod is NumPy's float32 remainder (the divisor's sign,
 * NaN for a zero divisor) and floor keeps ±0.  And ir_i32_op_eval's floor division and modulo
 * (docs/ir.md §2.8) on every pair of edge values and a million pseudo-random pairs, against what
 * defines them, computed in 64 bits: the remainder is 0 or has the divisor's sign and is smaller
 * in magnitude, a - remainder is the divisor times an integer, and that integer wrapped to 32
 * bits is the quotient; a divisor 0 gives 0 and 0.  And --tf32's rounding (ir_f32_to_tf32): ties
 * away from zero, the carry into the exponent, subnormals, infinities, NaN.  Requires build/libtsrc.a.  Produces one line per failing case and
 * a last line "N passed, N failed"; exits 1 on any failure. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

#include "check.h"

static bool same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return true; /* a NaN's sign and payload are not part of the result */
    return memcmp(&a, &b, sizeof a) == 0;
}

static void expect(ScalarOp op, float a, float b, float want, const char *what) {
    float got = scalar_op_eval(op, a, b, 0.0f);
    char detail[128];
    snprintf(detail, sizeof detail, "got %g (sign %d), want %g (sign %d)", got, signbit(got) != 0, want,
             signbit(want) != 0);
    check(same_bits(got, want), what, detail);
}

/* Whether q and m are the floor quotient and remainder of a / b (b not 0), as 64-bit arithmetic
 * defines them: |m| < |b| with m 0 or of b's sign, and a - m = b·k with k wrapping to q. */
static bool floor_division_holds(int32_t a, int32_t b, int32_t q, int32_t m) {
    int64_t wide_m = m, wide_b = b;
    if (wide_m != 0 && (wide_m < 0) != (wide_b < 0)) return false;
    if ((wide_m < 0 ? -wide_m : wide_m) >= (wide_b < 0 ? -wide_b : wide_b)) return false;
    int64_t rest = (int64_t)a - wide_m;
    if (rest % wide_b != 0) return false;
    return (int32_t)(uint32_t)(uint64_t)(rest / wide_b) == q;
}

static void check_i32_division(void) {
    static const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -65536, -7, -6, -3, -2, -1, 0, 1, 2, 3, 6, 7, 65536,
                                    INT32_MAX - 1, INT32_MAX};
    unsigned n = sizeof edges / sizeof *edges, wrong = 0;
    char detail[128] = "";
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (unsigned i = 0; i < n * n + 1000000; i++) {
        int32_t a, b;
        if (i < n * n) {
            a = edges[i / n];
            b = edges[i % n];
        } else { /* a 64-bit LCG; small divisors as often as large ones */
            state = state * 6364136223846793005u + 1442695040888963407u;
            a = (int32_t)(uint32_t)(state >> 32);
            b = (int32_t)(uint32_t)state >> (state >> 27 & 31);
        }
        int32_t q = ir_i32_op_eval(SOP_DIV, a, b, 0), m = ir_i32_op_eval(SOP_MOD, a, b, 0);
        bool ok = b == 0 ? q == 0 && m == 0 : floor_division_holds(a, b, q, m);
        if (!ok && wrong++ == 0) snprintf(detail, sizeof detail, "%d / %d gave %d, mod %d", a, b, q, m);
    }
    check(wrong == 0, "i32 floor division and modulo", detail);
    check(ir_i32_op_eval(SOP_DIV, INT32_MIN, -1, 0) == INT32_MIN, "INT32_MIN / -1 wraps to INT32_MIN", NULL);
    check(ir_i32_op_eval(SOP_MOD, INT32_MIN, -1, 0) == 0, "INT32_MIN mod -1 = 0", NULL);
    check(ir_i32_op_eval(SOP_DIV, -7, 2, 0) == -4 && ir_i32_op_eval(SOP_MOD, -7, 2, 0) == 1, "-7 / 2 = -4, mod 1", NULL);
    check(ir_i32_op_eval(SOP_DIV, 7, -2, 0) == -4 && ir_i32_op_eval(SOP_MOD, 7, -2, 0) == -1, "7 / -2 = -4, mod -1", NULL);
}

int main(void) {
    expect(SOP_MAX, NAN, 1.0f, NAN, "max(NaN, 1) = NaN");
    expect(SOP_MAX, 1.0f, NAN, NAN, "max(1, NaN) = NaN");
    expect(SOP_MIN, NAN, 1.0f, NAN, "min(NaN, 1) = NaN");
    expect(SOP_MIN, -INFINITY, NAN, NAN, "min(-inf, NaN) = NaN");
    expect(SOP_MAX, 2.0f, 1.0f, 2.0f, "max(2, 1) = 2");
    expect(SOP_RELU, NAN, 0.0f, NAN, "relu(NaN) = NaN");
    expect(SOP_RELU, -NAN, 0.0f, NAN, "relu(-NaN) = NaN");
    expect(SOP_RELU, -1.0f, 0.0f, 0.0f, "relu(-1) = +0");
    expect(SOP_RELU, -0.0f, 0.0f, 0.0f, "relu(-0) = +0");
    expect(SOP_RELU, 0.0f, 0.0f, 0.0f, "relu(+0) = +0");
    expect(SOP_RELU, 2.5f, 0.0f, 2.5f, "relu(2.5) = 2.5");
    expect(SOP_RELU, INFINITY, 0.0f, INFINITY, "relu(inf) = inf");
    expect(SOP_RELU, -INFINITY, 0.0f, 0.0f, "relu(-inf) = +0");
    expect(SOP_LT, NAN, 1.0f, 0.0f, "NaN < 1 is false");
    expect(SOP_LT, 1.0f, NAN, 0.0f, "1 < NaN is false");
    expect(SOP_LT, NAN, NAN, 0.0f, "NaN < NaN is false");
    expect(SOP_EQ, NAN, NAN, 0.0f, "NaN = NaN is false");
    expect(SOP_LT, 0.0f, 1.0f, 1.0f, "0 < 1 is true");
    expect(SOP_LE, NAN, 1.0f, 0.0f, "NaN <= 1 is false");
    expect(SOP_LE, 1.0f, 1.0f, 1.0f, "1 <= 1 is true");
    expect(SOP_NE, NAN, NAN, 1.0f, "ne(NaN, NaN) is true");
    expect(SOP_NE, 1.0f, 1.0f, 0.0f, "ne(1, 1) is false");
    expect(SOP_NOT, NAN, 0.0f, 0.0f, "not NaN = 0 (NaN counts as true)");
    expect(SOP_NOT, -0.0f, 0.0f, 1.0f, "not -0 = 1");
    expect(SOP_SAT01, NAN, 0.0f, NAN, "sat01(NaN) = NaN");
    expect(SOP_SAT01, -0.0f, 0.0f, 0.0f, "sat01(-0) = +0");
    expect(SOP_SAT01, 3.0f, 0.0f, 1.0f, "sat01(3) = 1");
    expect(SOP_SAT01, 0.25f, 0.0f, 0.25f, "sat01(0.25) = 0.25");
    expect(SOP_SIGN, -0.0f, 0.0f, -0.0f, "sign(-0) = -0");
    expect(SOP_SIGN, NAN, 0.0f, NAN, "sign(NaN) = NaN");
    expect(SOP_SIGN, -INFINITY, 0.0f, -1.0f, "sign(-inf) = -1");
    expect(SOP_ABS, -0.0f, 0.0f, 0.0f, "abs(-0) = +0");
    expect(SOP_RECIP, -0.0f, 0.0f, -INFINITY, "recip(-0) = -inf");
    expect(SOP_RSQRT, 4.0f, 0.0f, 0.5f, "rsqrt(4) = 0.5");
    /* --tf32's rounding (PTX cvt.rna.tf32.f32): 10 bits after the point, ties away from zero. */
    expect(SOP_TO_TF32, 1.0f + 0x1p-10f, 0.0f, 1.0f + 0x1p-10f, "tf32(1 + 2^-10) is exact");
    expect(SOP_TO_TF32, 1.0f + 0x1p-11f, 0.0f, 1.0f + 0x1p-10f, "tf32(1 + 2^-11): a tie, away from zero");
    expect(SOP_TO_TF32, -(1.0f + 0x1p-11f), 0.0f, -(1.0f + 0x1p-10f), "tf32(-(1 + 2^-11)) = -(1 + 2^-10)");
    expect(SOP_TO_TF32, 1.0f + 0x1p-11f - 0x1p-23f, 0.0f, 1.0f, "tf32 below the tie rounds down");
    expect(SOP_TO_TF32, 2.0f - 0x1p-23f, 0.0f, 2.0f, "tf32 carries into the exponent");
    expect(SOP_TO_TF32, 0x1p-130f + 0x1p-149f, 0.0f, 0x1p-130f, "tf32 of a subnormal keeps its 10 bits");
    expect(SOP_TO_TF32, 0x1p-137f, 0.0f, 0x1p-136f, "tf32(2^-137), half its smallest subnormal: a tie, away from zero");
    expect(SOP_TO_TF32, 0x1.fffffep127f, 0.0f, INFINITY, "tf32 of f32's largest value is infinite");
    expect(SOP_TO_TF32, -INFINITY, 0.0f, -INFINITY, "tf32(-inf) = -inf");
    expect(SOP_TO_TF32, NAN, 0.0f, NAN, "tf32(NaN) = NaN");
    expect(SOP_MOD, -1.0f, 3.0f, 2.0f, "mod(-1, 3) = 2");
    expect(SOP_MOD, 1.0f, -3.0f, -2.0f, "mod(1, -3) = -2");
    expect(SOP_MOD, -4.0f, 2.0f, 0.0f, "mod(-4, 2) = +0");
    expect(SOP_MOD, 4.0f, -2.0f, -0.0f, "mod(4, -2) = -0");
    expect(SOP_MOD, 1.0f, 0.0f, NAN, "mod(1, 0) = NaN");
    expect(SOP_MOD, INFINITY, 1.0f, NAN, "mod(inf, 1) = NaN");
    expect(SOP_MOD, -1.0f, INFINITY, INFINITY, "mod(-1, inf) = inf");
    expect(SOP_MOD, 5.5f, 2.0f, 1.5f, "mod(5.5, 2) = 1.5");
    expect(SOP_FLOOR, -0.0f, 0.0f, -0.0f, "floor(-0) = -0");
    expect(SOP_FLOOR, -0.5f, 0.0f, -1.0f, "floor(-0.5) = -1");
    expect(SOP_FLOOR, NAN, 0.0f, NAN, "floor(NaN) = NaN");
    check_i32_division();
    printf("%u passed, %u failed\n", passed, failed);
    return failed != 0;
}
