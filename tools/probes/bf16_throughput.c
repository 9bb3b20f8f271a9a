/* bf16_throughput.c — how many multiply-adds a cycle VDPBF16PS gives on this machine, against
 * VFMADD231PS on f32: the number that decides whether a bf16 contraction kernel on AVX-512 BF16
 * can be faster than tsrc's f32 tiles at all (docs/notes/avx512-bf16.md).
 *
 * Not a test of tsrc. Each loop issues 24 independent instructions (24 accumulators, more than
 * latency × ports for either instruction), so the figures are throughputs. One VDPBF16PS does
 * 32 multiply-adds on a zmm register, one VFMADD231PS 16.
 *     cc -O2 -mavx512f tools/probes/bf16_throughput.c -o /tmp/bf16_throughput && /tmp/bf16_throughput */
#include <stdio.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define STEP(INS, R) INS " %%zmm30, %%zmm31, %%zmm" #R "\n"
#define STEPS(INS)                                                                                   \
    STEP(INS, 0) STEP(INS, 1) STEP(INS, 2) STEP(INS, 3) STEP(INS, 4) STEP(INS, 5) STEP(INS, 6)       \
    STEP(INS, 7) STEP(INS, 8) STEP(INS, 9) STEP(INS, 10) STEP(INS, 11) STEP(INS, 12) STEP(INS, 13)   \
    STEP(INS, 14) STEP(INS, 15) STEP(INS, 16) STEP(INS, 17) STEP(INS, 18) STEP(INS, 19)              \
    STEP(INS, 20) STEP(INS, 21) STEP(INS, 22) STEP(INS, 23)
#define CLOBBERS                                                                                     \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",       \
    "xmm21", "xmm22", "xmm23", "xmm30", "xmm31"
enum { PER_LOOP = 24 };

static double time_dpbf16(long loops) {
    double t = seconds();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n vpxord %%zmm31, %%zmm31, %%zmm31\n" ::: CLOBBERS);
    for (long i = 0; i < loops; i++) __asm__ volatile(STEPS("vdpbf16ps") ::: CLOBBERS);
    return seconds() - t;
}

static double time_fma(long loops) {
    double t = seconds();
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n vpxord %%zmm31, %%zmm31, %%zmm31\n" ::: CLOBBERS);
    for (long i = 0; i < loops; i++) __asm__ volatile(STEPS("vfmadd231ps") ::: CLOBBERS);
    return seconds() - t;
}

int main(void) {
    const long loops = 20000000;
    for (int run = 0; run < 3; run++) {
        double dp = time_dpbf16(loops), fma = time_fma(loops);
        double dp_macs = 32.0 * PER_LOOP * loops / dp, fma_macs = 16.0 * PER_LOOP * loops / fma;
        printf("vdpbf16ps %.2f /ns, %.1f G multiply-adds/s; vfmadd231ps %.2f /ns, %.1f G multiply-adds/s; "
               "bf16 / f32 = %.2f\n",
               PER_LOOP * loops / dp * 1e-9, dp_macs * 1e-9, PER_LOOP * loops / fma * 1e-9, fma_macs * 1e-9,
               dp_macs / fma_macs);
    }
    return 0;
}
