/* fp16_fma.c — what AVX-512 FP16's multiply-add would give an f16 contraction on this machine,
 * and what it would cost: the question behind docs/notes/avx512-bf16.md, "AVX-512 FP16".
 *
 * Not a test of tsrc.  Two measurements:
 *  1. Throughput: 24 independent VFMADD231PH (32 f16 multiply-adds each, accumulating in f16)
 *     a loop against 24 VFMADD231PS (16 f32 multiply-adds each), as tools/probes/bf16_throughput.c
 *     does for VDPBF16PS.
 *  2. Accuracy: dot products of random f16 vectors (values in ±1, as an MLP's activations and
 *     weights), accumulated the way tsrc accumulates an f16 contraction (in f32, one rounding to
 *     f16 at the end; docs/language.md, "Element types") and the way VFMADD231PH does (each step
 *     rounded to f16), against the exact sum in double: how many results differ, and the error.
 * AVX-512 FP16 has no multiply-add that widens f16 products into an f32 accumulator (AVX10.2's
 * VDPPHPS and AMX-FP16's TDPFP16PS do; neither is on the CPUs of 2026-11-25 here).
 *     cc -O2 -mavx512f -mavx512fp16 tools/probes/fp16_fma.c -o /tmp/fp16_fma -lm && /tmp/fp16_fma */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "throughput.h"

TIMED_LOOP(time_fmaph, "vfmadd231ph")
TIMED_LOOP(time_fmaps, "vfmadd231ps")

/* A deterministic stream of uniform numbers in [-1, 1) (xorshift64*). */
static double uniform(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-52 - 1.0;
}

int main(void) {
    const long loops = 20000000;
    for (int run = 0; run < 3; run++) {
        double ph = time_fmaph(loops), ps = time_fmaps(loops);
        double ph_macs = 32.0 * PER_LOOP * loops / ph, ps_macs = 16.0 * PER_LOOP * loops / ps;
        printf("vfmadd231ph %.2f /ns, %.1f G multiply-adds/s; vfmadd231ps %.2f /ns, %.1f G multiply-adds/s; "
               "f16 / f32 = %.2f\n",
               PER_LOOP * loops / ph * 1e-9, ph_macs * 1e-9, PER_LOOP * loops / ps * 1e-9, ps_macs * 1e-9,
               ph_macs / ps_macs);
    }
    /* 32 dot products at once, one a lane: the f16 accumulator is VFMADD231PH itself. */
    const int lengths[] = {64, 256, 1024, 4096};
    for (unsigned l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        int n = lengths[l], rounds = 64, differ = 0, trials = 32 * rounds;
        double err_f32 = 0, err_f16 = 0;
        uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)n;
        for (int r = 0; r < rounds; r++) {
            float acc32[32] = {0};
            double exact[32] = {0};
            __m512h acc16 = _mm512_setzero_ph();
            for (int k = 0; k < n; k++) {
                _Float16 a[32], b[32];
                for (int j = 0; j < 32; j++) {
                    a[j] = (_Float16)uniform(&seed), b[j] = (_Float16)uniform(&seed);
                    acc32[j] = fmaf((float)a[j], (float)b[j], acc32[j]);
                    exact[j] += (double)a[j] * (double)b[j];
                }
                acc16 = _mm512_fmadd_ph(_mm512_loadu_ph(a), _mm512_loadu_ph(b), acc16);
            }
            _Float16 f16[32];
            _mm512_storeu_ph(f16, acc16);
            for (int j = 0; j < 32; j++) {
                _Float16 tsrc = (_Float16)acc32[j];
                differ += tsrc != f16[j];
                err_f32 += fabs((double)tsrc - exact[j]);
                err_f16 += fabs((double)f16[j] - exact[j]);
            }
        }
        printf("dot of %4d f16 pairs, %d trials: the f16 accumulator differs from tsrc's result in %4.1f %%; "
               "mean |error| f32-accumulated %.2e, f16-accumulated %.2e (%.1fx)\n",
               n, trials, 100.0 * differ / trials, err_f32 / trials, err_f16 / trials, err_f16 / err_f32);
    }
    return 0;
}
