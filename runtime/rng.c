/* rng.c — counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
 *
 * Every random number the runtime makes is a pure function of (seed, what, which cell), so
 * results are reproducible and do not depend on thread count or evaluation order.  Parameter
 * initialisation keys the counter by an FNV-1a hash of the tensor's name; the data generators
 * use numbered streams; the loop IR's `random` primitive (tsr_random_cell, and its inline twin
 * in compiler/cg/cg_llvm.c) keys it by the cell, the tensor's site and the routine run. */
#include <math.h>
#include <string.h>

#include "internal.h"

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void tsr_philox4x32(const uint32_t counter[4], uint64_t key, uint32_t out[4]) {
    if (!counter || !out) return;
    uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
        uint32_t n[4] = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
        memcpy(c, n, sizeof c);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    memcpy(out, c, sizeof c);
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 16777619u; /* NULL: as "" */
    return h;
}

float tsr_uniform(uint64_t seed, const char *name, uint64_t cell) {
    uint32_t counter[4] = {(uint32_t)cell, (uint32_t)(cell >> 32), fnv1a(name), 0x7473726eu}, out[4];
    tsr_philox4x32(counter, seed, out);
    return (float)((out[0] >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

double tsr_normal(uint64_t seed, const char *name, uint64_t cell) {
    uint32_t counter[4] = {(uint32_t)cell, (uint32_t)(cell >> 32), fnv1a(name), 0x6e726d6cu}, out[4];
    tsr_philox4x32(counter, seed, out);
    double u1 = ((double)out[0] + 1.0) * (1.0 / 4294967297.0); /* (0, 1): log is finite */
    double u2 = (double)out[1] * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

float tsr_random_cell(uint64_t seed, uint64_t run, uint32_t site, uint64_t cell) {
    uint32_t counter[4] = {(uint32_t)cell, (uint32_t)(cell >> 32), site, (uint32_t)run}, out[4];
    tsr_philox4x32(counter, seed, out);
    return (float)(out[0] >> 8) * (1.0f / 16777216.0f); /* exact: 24 bits, a power of two */
}

/* Streams are tagged apart from parameter initialisation by the last counter word. */
static void draw(uint64_t seed, uint32_t stream, uint64_t index, uint32_t out[4]) {
    uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), stream, 0x64617461u};
    tsr_philox4x32(counter, seed, out);
}

double tsr_rng_unit(uint64_t seed, uint32_t stream, uint64_t index) {
    uint32_t w[4];
    draw(seed, stream, index, w);
    uint64_t bits = ((uint64_t)w[0] << 21) ^ (w[1] >> 11);
    return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

double tsr_rng_normal(uint64_t seed, uint32_t stream, uint64_t index) {
    uint32_t w[4];
    draw(seed, stream, index, w);
    double u1 = ((double)w[0] + 1.0) * (1.0 / 4294967297.0); /* (0, 1): log is finite */
    double u2 = (double)w[1] * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
