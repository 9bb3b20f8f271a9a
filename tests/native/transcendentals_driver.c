/* transcendentals_driver.c — native exp, log, tanh and sigmoid against the reference executor's
 * (tests/native/transcendentals.sh, with tests/native/transcendentals.tsr compiled for one CPU level and
 * compiler/ir/approx.c linked in).
 *
 * What it checks: for the special values (zeros, infinities, NaN, subnormals, the limits and
 * the branch points of each function) and 4096 × 4099 bit patterns spread over all 2^32 (the
 * multiples of an odd constant), every lane of the native results — whole vectors and the
 * scalar remainder — has the bits approx_exp, approx_log, approx_tanh and 1 / (1 + approx_exp(-x))
 * give (any NaN matches any NaN: a NaN's payload is not part of the result).
 * Prints a FAIL line for each of the first ten mismatches, then the count, and
 * "N passed, N failed"; exits 1 on any mismatch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "transcendentals.h"
#include "ir/approx.h"

enum { CELLS = TRANSCENDENTALS_X_SIZE, CHUNKS = 4096 };

static int passed, failed;
static long mismatches;

static int same(float a, float b) { return (isnan(a) && isnan(b)) || approx_bits(a) == approx_bits(b); }

static float sigmoid(float x) { return 1.0f / (1.0f + approx_exp(-x)); }

/* One run of the routine over x[]; false after reporting a mismatch. */
static int run_chunk(transcendentals_state *s, const float *x) {
    memcpy(transcendentals_x(s), x, sizeof(float) * CELLS);
    if (transcendentals_f(s) != TSR_OK) {
        printf("FAIL the routine runs: %s\n", transcendentals_last_error());
        failed++;
        return 0;
    }
    static const char *const names[4] = {"exp", "log", "tanh", "sigmoid"};
    float (*const want[4])(float) = {approx_exp, approx_log, approx_tanh, sigmoid};
    const float *const results[4] = {transcendentals_e(s), transcendentals_l(s), transcendentals_th(s),
                                     transcendentals_sg(s)};
    int ok = 1;
    for (int f = 0; f < 4; f++)
        for (int i = 0; i < CELLS; i++) {
            float w = want[f](x[i]), g = results[f][i];
            if (same(w, g)) continue;
            if (++mismatches <= 10)
                printf("FAIL native %s(%a) (bits %08x, lane %d) = %a, the reference executor's %a\n", names[f], x[i],
                       approx_bits(x[i]), i, g, w);
            ok = 0;
        }
    return ok;
}

int main(void) {
    transcendentals_state *s = transcendentals_create(1);
    if (!s) {
        printf("FAIL transcendentals_state_create: %s\n0 passed, 1 failed\n", transcendentals_last_error());
        return 1;
    }
    static float x[CELLS];
    static const float specials[] = {
        0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, 0x1.fffffcp-127f,
        0x1.fffffep127f, -0x1.fffffep127f, APPROX_EXP_MAX, -APPROX_EXP_MIN, APPROX_EXP_MIN, 88.72283f, 88.72284f,
        -87.33655f, -103.97208f, -103.9721f, APPROX_TANH_SMALL, -APPROX_TANH_SMALL, 0x1.199998p-1f, 0x1.6a09e6p-1f,
        0x1.6a09e8p-1f, 0x1.6a09e6p+0f, 0x1.6a09e4p+0f, 9.010913f, 1e-30f, -1e-30f, 0.5f, 2.0f, 10.0f, -10.0f,
    };
    int nspecial = (int)(sizeof specials / sizeof *specials);
    for (int i = 0; i < CELLS; i++) x[i] = i < nspecial ? specials[i] : approx_float((uint32_t)i * 0x01000193u);
    int ok = run_chunk(s, x);
    for (uint32_t c = 0; c < CHUNKS; c++) {
        for (uint32_t i = 0; i < CELLS; i++) x[i] = approx_float((c * CELLS + i) * 0x9e3779b1u);
        ok &= run_chunk(s, x);
    }
    if (!ok) {
        failed++;
        printf("FAIL %ld results differ from the reference executor's\n", mismatches);
    } else {
        passed++;
        printf("PASS native exp, log, tanh and sigmoid equal the reference executor's on %d inputs\n",
               (CHUNKS + 1) * CELLS);
    }
    transcendentals_destroy(s);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
