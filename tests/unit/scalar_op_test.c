/* scalar_op_test.c — unit tests of scalar_op_eval (compiler/ir/ir.c), the reference executor's
 * arithmetic, on the values where IEEE arithmetic has choices: NaN, infinities and signed zeros.
 *
 * What it checks: relu propagates NaN (relu(NaN) = NaN, as PyTorch's relu does; it used to give
 * 0, so a loss built on relu read 0 while the weights were NaN), gives +0 for -0 and the
 * negative numbers, keeps +inf; the comparisons are false with a NaN operand (IEEE: 0), as
 * docs/language.md §3.8 says; `ne` is true and `not` false with a NaN; sat01 and sign keep NaN,
 * sign keeps the sign of zero, abs drops it.  Requires build/libtsrc.a.  Produces one line per failing case and
 * a last line "N passed, N failed"; exits 1 on any failure. */
#include <math.h>
#include <stdbool.h>
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

int main(void) {
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
    printf("%u passed, %u failed\n", passed, failed);
    return failed != 0;
}
