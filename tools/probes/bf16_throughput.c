/* bf16_throughput.c — how many multiply-adds a cycle VDPBF16PS gives on this machine, against
 * VFMADD231PS on f32: the number that decides whether a bf16 contraction kernel on AVX-512 BF16
 * can be faster than tsrc's f32 tiles at all (docs/notes/avx512-bf16.md).
 *
 * Not a test of tsrc. Each loop issues 24 independent instructions (24 accumulators, more than
 * latency × ports for either instruction), so the figures are throughputs. One VDPBF16PS does
 * 32 multiply-adds on a zmm register, one VFMADD231PS 16.
 *     cc -O2 -mavx512f tools/probes/bf16_throughput.c -o /tmp/bf16_throughput && /tmp/bf16_throughput */
#include <stdio.h>

#include "throughput.h"

TIMED_LOOP(time_dpbf16, "vdpbf16ps")
TIMED_LOOP(time_fma, "vfmadd231ps")

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
