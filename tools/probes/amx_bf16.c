/* amx_bf16.c — what AMX's TDPBF16PS computes on this machine, and how fast: whether a bf16
 * contraction kernel on AMX could keep tsrc's rule that native code prints exactly what the
 * reference executor prints (docs/notes/avx512-bf16.md).
 *
 * Not a test of tsrc. It asks Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), runs
 * one TDPBF16PS (C[16×16] f32 += A[16×32] bf16 · B[16 pairs × 16 × 2] bf16) on random tiles of
 * normal-range values and compares every cell with arithmetic models of the 32 products it
 * adds (p_{2k}, p_{2k+1} for k = 0…15, each exact in f32; flushing of subnormals in all):
 *   seq-even    the SDM's loop as written: fma even then odd, per pair, k increasing, RNE
 *   seq-odd     the same, odd element first (VDPBF16PS's order)
 *   pair-once   each pair summed exactly, then added to C with one rounding (RNE)
 *   pair-rounded each pair summed and rounded (RNE), then added (RNE)
 *   all-once    C and all 32 products summed exactly, one rounding (RNE)
 *   sum-then-add the 32 products summed exactly and rounded, then added to C (RNE)
 * and the same with rounding toward zero. Then it times four independent TDPBF16PS a loop.
 *     cc -O2 -frounding-math -mamx-tile -mamx-bf16 tools/probes/amx_bf16.c -o /tmp/amx_bf16 -lm && /tmp/amx_bf16 */
#include <fenv.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static float f_of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits_of(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static float from_bf16(uint16_t h) { return f_of((uint32_t)h << 16); }
static float flush(float x) { return (fabsf(x) < 0x1p-126f && x != 0) ? copysignf(0.0f, x) : x; }
static uint64_t state = 88172645463325252ull; /* xorshift64 */
static uint64_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static uint16_t random_bf16(void) { /* sign, exponent within 2^±8, any mantissa */
    return (uint16_t)((next() & 0x8000) | (uint16_t)((127 + (int)(next() % 16) - 8) << 7) | (next() & 0x7f));
}
static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct tile_config { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } __attribute__((packed));
enum { MODELS = 6 };
static const char *const model_names[MODELS] = {"seq-even", "seq-odd", "pair-once", "pair-rounded", "all-once", "sum-then-add"};

/* Cell (m, n) by each model, in the current rounding mode. */
static void models(const uint16_t a[16][32], const uint16_t b[16][32], float c, int m, int n, float out[MODELS]) {
    float p[32]; /* products, exact in f32 (8 × 8 significant bits) */
    for (int k = 0; k < 16; k++)
        for (int e = 0; e < 2; e++) p[2 * k + e] = flush(from_bf16(a[m][2 * k + e])) * flush(from_bf16(b[k][2 * n + e]));
    float even = flush(c), odd = flush(c), pair_once = flush(c), pair_rounded = flush(c);
    long double all = flush(c), products = 0;
    for (int k = 0; k < 16; k++) {
        even = flush(fmaf(p[2 * k + 1], 1.0f, flush(fmaf(p[2 * k], 1.0f, even))));
        odd = flush(fmaf(p[2 * k], 1.0f, flush(fmaf(p[2 * k + 1], 1.0f, odd))));
        pair_once = flush((float)((long double)pair_once + p[2 * k] + p[2 * k + 1]));
        pair_rounded = flush(pair_rounded + (float)((double)p[2 * k] + p[2 * k + 1]));
        all += (long double)p[2 * k] + p[2 * k + 1];
        products += (long double)p[2 * k] + p[2 * k + 1];
    }
    out[0] = even, out[1] = odd, out[2] = pair_once, out[3] = pair_rounded;
    out[4] = flush((float)all), out[5] = flush(flush(c) + (float)products);
}

int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
        perror("amx_bf16: the kernel refused the AMX tile state");
        return 1;
    }
    struct tile_config config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) config.rows[t] = 16, config.colsb[t] = 64;
    _tile_loadconfig(&config);

    static uint16_t a[16][32], b[16][32];
    static float c[16][16], d[16][16];
    const int modes[2] = {FE_TONEAREST, FE_TOWARDZERO};
    long cells = 0, misses[2][MODELS] = {{0}};
    for (int trial = 0; trial < 4000; trial++) {
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 32; j++) a[i][j] = random_bf16(), b[i][j] = random_bf16();
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) c[i][j] = from_bf16(random_bf16()) * 3.0f;
        _tile_loadd(0, c, 64);
        _tile_loadd(1, a, 64);
        _tile_loadd(2, b, 64);
        _tile_dpbf16ps(0, 1, 2);
        _tile_stored(0, d, 64);
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++, cells++)
                for (int r = 0; r < 2; r++) {
                    float out[MODELS];
                    fesetround(modes[r]);
                    models((const uint16_t(*)[32])a, (const uint16_t(*)[32])b, c[m][n], m, n, out);
                    fesetround(FE_TONEAREST);
                    for (int q = 0; q < MODELS; q++) misses[r][q] += bits_of(out[q]) != bits_of(d[m][n]);
                }
    }
    printf("%ld cells; cells a model gets wrong (to nearest even / toward zero):\n", cells);
    for (int q = 0; q < MODELS; q++)
        printf("  %-13s %8ld %8ld\n", model_names[q], misses[0][q], misses[1][q]);

    const long loops = 5000000;
    double t = seconds();
    for (long i = 0; i < loops; i++) {
        _tile_dpbf16ps(4, 1, 2);
        _tile_dpbf16ps(5, 1, 2);
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 2);
    }
    t = seconds() - t;
    printf("TDPBF16PS: %.2f ns each, %.0f G multiply-adds/s (16 x 16 x 32 each)\n", t / (4.0 * loops) * 1e9,
           4.0 * loops * 8192 / t * 1e-9);
    _tile_release();
    return 0;
}
