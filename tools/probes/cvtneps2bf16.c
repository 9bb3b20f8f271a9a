/* cvtneps2bf16.c — whether AVX-512 BF16's VCVTNEPS2BF16 rounds f32 to bf16 as tsrc does
 * (runtime/tsr.h tsr_f32_to_bf16: to nearest even, subnormals kept, a NaN becoming the quiet NaN
 * of its sign) on every input that VFPCLASSPS does not flag as NaN or subnormal: the condition
 * under which native code rounds a vector of 16 by the instruction (cg_llvm.c narrow_bf16_vector).
 *
 * Not a test of tsrc (it needs a CPU with AVX-512 BF16). It runs all 2^32 inputs, 16 at a time,
 * and prints how many unflagged lanes differ (must be 0) and how many flagged NaN lanes would
 * have (the instruction keeps a NaN's payload).  About 5 s on a Zen 4.
 *     cc -O2 -mavx512f -mavx512dq -mavx512vl -mavx512bf16 tools/probes/cvtneps2bf16.c -o /tmp/cvt && /tmp/cvt */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* tsr_f32_to_bf16 on the bits (runtime/tsr.h). */
static uint16_t tsr_rounding(uint32_t b) {
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((b >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

int main(void) {
    uint64_t wrong = 0, flagged = 0, nan_payloads = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += 16) {
        uint32_t in[16];
        uint16_t out[16];
        for (unsigned l = 0; l < 16; l++) in[l] = (uint32_t)(base + l);
        __m512 x;
        memcpy(&x, in, sizeof x);
        __mmask16 special = _mm512_fpclass_ps_mask(x, 0xa1); /* QNaN, SNaN, subnormal */
        __m256bh h = _mm512_cvtneps_pbh(x);
        memcpy(out, &h, sizeof out);
        for (unsigned l = 0; l < 16; l++) {
            if (special >> l & 1) {
                flagged++;
                nan_payloads += (in[l] & 0x7fffffffu) > 0x7f800000u && out[l] != tsr_rounding(in[l]);
            } else if (out[l] != tsr_rounding(in[l])) {
                if (wrong++ < 5) printf("x = %08x: instruction %04x, tsrc %04x\n", in[l], out[l], tsr_rounding(in[l]));
            }
        }
    }
    printf("unflagged lanes that differ: %llu; flagged lanes %llu (NaNs whose bits differ: %llu)\n",
           (unsigned long long)wrong, (unsigned long long)flagged, (unsigned long long)nan_payloads);
    return wrong != 0;
}
