/* approx_test.c — unit tests of tsrc's own exp, log and tanh (compiler/ir/approx.c), which the
 * reference executor runs and native code reproduces (tests/native/transcendentals.sh).
 *
 * What it checks: the error bounds approx.h states, in units in the last place of the exact
 * result (computed in double precision by libm), on every 1021st float's bits (4.2 million
 * inputs over all exponents and signs; `approx_test --all`, which `make check-approx` runs,
 * takes every one of the 2^32);
 * the special values exactly — exp: ±0 → 1, inf → inf, -inf → +0, overflow to inf just above
 * ln(FLT_MAX), gradual underflow to the smallest subnormal and then +0; log: 1 → +0, ±0 → -inf,
 * negatives and -inf → NaN, inf → inf, subnormals finite; tanh: ±0 and -0 kept, ±inf → ±1,
 * large arguments exactly ±1, odd symmetry; a NaN gives a NaN in each.  Requires
 * build/libtsrc.a.  Prints one line per failing case and "N passed, N failed"; exits 1 on any. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/approx.h"

#include "check.h"

/* |got − want| in units of the last place of want (as a float; the subnormals' ulp is 2^-149). */
static double ulps(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : INFINITY;
    if (isinf(got) || isinf(want)) return got == want || fabs(want) > 0x1.fffffep127 ? 0 : INFINITY;
    int e;
    frexp(fabs(want), &e);
    double ulp = ldexp(1.0, e - 24);
    if (ulp < 0x1p-149) ulp = 0x1p-149;
    return fabs(got - want) / ulp;
}

static unsigned sweep_step = 1021;

static void bound(const char *name, float (*f)(float), double (*exact)(double), double limit) {
    double worst = 0;
    float where = 0;
    for (uint64_t b = 0; b < ((uint64_t)1 << 32); b += sweep_step) {
        float x = approx_float((uint32_t)b);
        double err = ulps(f(x), exact(x));
        if (!(err <= worst)) worst = err, where = x;
    }
    char what[64], detail[96];
    snprintf(what, sizeof what, "%s within %.2f ulp", name, limit);
    snprintf(detail, sizeof detail, "%.3f ulp at %a", worst, where);
    check(worst <= limit, what, detail);
}

static void same(float got, float want, const char *what) {
    char detail[96];
    snprintf(detail, sizeof detail, "got %a (bits %08x), want %a", got, approx_bits(got), want);
    check(isnan(want) ? isnan(got) : approx_bits(got) == approx_bits(want), what, detail);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--all") == 0) sweep_step = 1;
    bound("exp", approx_exp, exp, 1.10);
    bound("log", approx_log, log, 1.35);
    bound("tanh", approx_tanh, tanh, 1.52);

    same(approx_exp(0.0f), 1.0f, "exp(0) = 1");
    same(approx_exp(-0.0f), 1.0f, "exp(-0) = 1");
    same(approx_exp(INFINITY), INFINITY, "exp(inf) = inf");
    same(approx_exp(-INFINITY), 0.0f, "exp(-inf) = +0");
    same(approx_exp(88.72284f), INFINITY, "exp overflows to inf just above ln(FLT_MAX)");
    check(isfinite(approx_exp(88.72283f)), "exp(88.72283) is finite", NULL);
    same(approx_exp(-103.27893f), 0x1p-149f, "exp(-103.279) is the smallest subnormal");
    same(approx_exp(-104.0f), 0.0f, "exp(-104) = +0");
    same(approx_exp(NAN), NAN, "exp(NaN) = NaN");

    same(approx_log(1.0f), 0.0f, "log(1) = +0");
    same(approx_log(0.0f), -INFINITY, "log(0) = -inf");
    same(approx_log(-0.0f), -INFINITY, "log(-0) = -inf");
    same(approx_log(-1.0f), NAN, "log(-1) = NaN");
    same(approx_log(-INFINITY), NAN, "log(-inf) = NaN");
    same(approx_log(INFINITY), INFINITY, "log(inf) = inf");
    same(approx_log(NAN), NAN, "log(NaN) = NaN");
    check(fabsf(approx_log(0x1p-149f) - (float)(-149 * log(2.0))) <= 1e-5f, "log of the smallest subnormal", NULL);
    check(fabsf(approx_log(0x1.fffffep127f) - 88.72284f) <= 1e-5f, "log(FLT_MAX)", NULL);

    same(approx_tanh(0.0f), 0.0f, "tanh(0) = 0");
    same(approx_tanh(-0.0f), -0.0f, "tanh(-0) = -0");
    same(approx_tanh(INFINITY), 1.0f, "tanh(inf) = 1");
    same(approx_tanh(-INFINITY), -1.0f, "tanh(-inf) = -1");
    same(approx_tanh(20.0f), 1.0f, "tanh(20) = 1");
    same(approx_tanh(NAN), NAN, "tanh(NaN) = NaN");
    same(approx_tanh(1e-30f), 1e-30f, "tanh(1e-30) = 1e-30");
    unsigned odd = 0;
    for (uint32_t b = 0; b < 0x7f800000u; b += 4099) odd += approx_bits(approx_tanh(-approx_float(b))) == (approx_bits(approx_tanh(approx_float(b))) ^ 0x80000000u);
    check(odd == (0x7f800000u + 4098) / 4099, "tanh(-x) = -tanh(x)", NULL);

    printf("%u passed, %u failed\n", passed, failed);
    return failed != 0;
}
