/* throughput.h — timing one AVX-512 instruction's throughput, for the probes that ask how many
 * multiply-adds a cycle an instruction gives (bf16_throughput.c, fp16_fma.c).
 *
 * TIMED_LOOP(name, "instruction") defines `double name(long loops)`: the seconds `loops`
 * iterations take, each issuing the instruction PER_LOOP times on PER_LOOP independent
 * accumulators zmm0…zmm23 (more than latency × ports for any multiply-add), with zmm30 and zmm31
 * (zeros) as its operands, so the time is the throughput's.  Not a test of tsrc. */
#ifndef TSR_PROBES_THROUGHPUT_H
#define TSR_PROBES_THROUGHPUT_H

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

#define TIMED_LOOP(name, INS)                                                                        \
    static double name(long loops) {                                                                 \
        double t = seconds();                                                                        \
        __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n vpxord %%zmm31, %%zmm31, %%zmm31\n" ::: CLOBBERS); \
        for (long i = 0; i < loops; i++) __asm__ volatile(STEPS(INS) ::: CLOBBERS);                  \
        return seconds() - t;                                                                        \
    }

#endif
