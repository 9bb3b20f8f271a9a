/* vdpbf16ps.c — what AVX-512 BF16's VDPBF16PS computes, bit for bit, on this machine.
 *
 * Not a test of tsrc: a probe of the hardware fact a bf16 contraction kernel on AVX-512 BF16
 * would rest on (docs/notes/avx512-bf16.md).  It runs the instruction on random lanes — bf16
 * pairs and f32 accumulators in the normal range, near and below the subnormal boundary, and
 * with products near 2^-126 — and compares each lane with three models:
 *   the SDM's: acc = ftz(fma(daz(a[2i+1]), daz(b[2i+1]), daz(acc))), then the same with
 *              a[2i], b[2i] (the odd element first; subnormal inputs read as zero, subnormal
 *              results flushed to zero, each step rounded to nearest even);
 *   the even element first without flushing (the reference executor's order, IEEE);
 *   the odd element first without flushing.
 * Build and run on a CPU with avx512_bf16 (Sapphire Rapids, Zen 4 and later):
 *     cc -O2 -mavx512f -mavx512bf16 tools/probes/vdpbf16ps.c -o /tmp/vdpbf16ps -lm && /tmp/vdpbf16ps
 * The last line gives the mismatches of each model; 0 for the first is what the note relies on. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
static float f_of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t b_of(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static float bf(uint16_t h) { return f_of((uint32_t)h << 16); }
static float daz(float x) { return (fabsf(x) < 0x1p-126f && x != 0) ? copysignf(0.0f, x) : x; }
static float ftz(float x) { return daz(x); }
static uint64_t s = 88172645463325252ull; /* xorshift64 */
static uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static uint16_t rbf(int mode) {
    uint16_t sign = rnd() & 0x8000;
    int e;
    if (mode == 0) e = 127 + (int)(rnd() % 16) - 8;          /* normal range */
    else if (mode == 1) e = (int)(rnd() % 12);               /* near/below the subnormal boundary */
    else e = 60 + (int)(rnd() % 10);                         /* products near 2^-126 */
    return sign | (uint16_t)(e << 7) | (uint16_t)(rnd() & 0x7f);
}
int main(void) {
    long mism_model = 0, mism_even_first = 0, mism_nodaz = 0, n = 0;
    for (int mode = 0; mode < 3; mode++)
        for (int it = 0; it < 2000000; it++) {
            uint16_t a[32], b[32];
            float acc[16];
            for (int i = 0; i < 32; i++) { a[i] = rbf(mode); b[i] = rbf(mode == 2 ? 2 : mode); }
            for (int i = 0; i < 16; i++) acc[i] = mode == 0 ? bf(rbf(0)) * 3.0f : f_of(b_of(bf(rbf(mode))) ^ (uint32_t)(rnd() & 0xffff));
            __m512 c = _mm512_loadu_ps(acc);
            __m512bh va, vb;
            memcpy(&va, a, 64); memcpy(&vb, b, 64);
            __m512 d = _mm512_dpbf16_ps(c, va, vb);
            float out[16];
            _mm512_storeu_ps(out, d);
            for (int i = 0; i < 16; i++) {
                float m = daz(acc[i]);
                m = ftz(fmaf(daz(bf(a[2*i+1])), daz(bf(b[2*i+1])), m));
                m = ftz(fmaf(daz(bf(a[2*i])), daz(bf(b[2*i])), daz(m)));
                float e = acc[i];
                e = fmaf(bf(a[2*i]), bf(b[2*i]), e); e = fmaf(bf(a[2*i+1]), bf(b[2*i+1]), e);
                float nd = fmaf(bf(a[2*i]), bf(b[2*i]), fmaf(bf(a[2*i+1]), bf(b[2*i+1]), acc[i]));
                n++;
                if (b_of(out[i]) != b_of(m) && !(isnan(out[i]) && isnan(m))) { if (mism_model < 5) printf("model mismatch mode %d: acc %a a %a %a b %a %a -> hw %a model %a\n", mode, acc[i], bf(a[2*i]), bf(a[2*i+1]), bf(b[2*i]), bf(b[2*i+1]), out[i], m); mism_model++; }
                if (b_of(out[i]) != b_of(e)) mism_even_first++;
                if (b_of(out[i]) != b_of(nd)) mism_nodaz++;
            }
        }
    printf("%ld lanes: model (odd then even, DAZ/FTZ) mismatches %ld; even-first no-DAZ %ld; odd-first no-DAZ %ld\n", n, mism_model, mism_even_first, mism_nodaz);
    return 0;
}
