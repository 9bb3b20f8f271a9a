/* common.h — timing, fills and result lines shared by the benchmark drivers (tools/bench.sh).
 *
 * Every driver prints one line per measurement:
 *   RESULT kind=matmul impl=tsrc n=512 threads=2 reps=9 best_s=… median_s=… check=ok maxrel=…
 * which tools/bench/table.py turns into the table. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Deterministic values in [-1, 1): the same for every implementation (see fill.py). */
static inline void bench_fill(float *x, uint64_t count, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < count; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 23) - 1.0);
    }
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How many timed repetitions after the warm-up: enough for about `budget` seconds, at least
 * `lo` and at most `hi`.  A very slow case (one run over `budget`) gets `lo` only. */
static inline int bench_reps(double warm_s, double budget, int lo, int hi) {
    int r = warm_s > 0 ? (int)(budget / warm_s) : hi;
    return r < lo ? lo : r > hi ? hi : r;
}

/* Times `reps` calls of run(ctx); writes best and median seconds. */
static inline void bench_time(int (*run)(void *), void *ctx, int reps, double *best,
                              double *median) {
    double *t = malloc(sizeof *t * (size_t)reps);
    if (!t) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (run(ctx) != 0) { fprintf(stderr, "bench: run failed\n"); exit(1); }
        t[r] = bench_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp);
    *best = t[0];
    *median = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    free(t);
}

/* Checks C = A·B (n×n, row-major) on `cells` cells spread over the matrix (always including
 * the four corners) against a double-precision dot product.  Returns the largest error relative
 * to sum |a_ik b_kj| and sets *ok when it is within float rounding of an n-term sum. */
static inline double bench_check_matmul(const float *a, const float *b, const float *c, int64_t n,
                                        int cells, int *ok) {
    double worst = 0;
    uint64_t s = 12345;
    for (int q = 0; q < cells; q++) {
        int64_t i, j;
        if (q < 4) { i = (q & 1) ? n - 1 : 0; j = (q & 2) ? n - 1 : 0; }
        else {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17; i = (int64_t)(s % (uint64_t)n);
            s ^= s << 13; s ^= s >> 7; s ^= s << 17; j = (int64_t)(s % (uint64_t)n);
        }
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < n; k++) {
            double p = (double)a[i * n + k] * (double)b[k * n + j];
            ref += p; mag += fabs(p);
        }
        double err = fabs((double)c[i * n + j] - ref) / (mag > 0 ? mag : 1);
        if (isnan(err)) err = INFINITY;
        if (err > worst) worst = err;
    }
    /* a float sum of n terms in any order is within n·2^-24 of the exact value, relative to the
     * sum of magnitudes; allow that plus slack. */
    *ok = worst <= 2.0 * (double)n * 5.96e-8 + 1e-6;
    return worst;
}

#endif
