/* common.h — timing, fills and result lines shared by the benchmark drivers (tools/bench.sh).
 *
 * Every driver prints one line per measurement:
 *   RESULT kind=matmul impl=tsrc n=512 threads=2 reps=9 best_s=… median_s=… check=ok maxrel=…
 * (some kinds add fields of their own) which tools/bench/table.py turns into the tables. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The element type of the matrices the fills and checks below take: float, or double where a
 * driver is compiled with -DBENCH_F64 (the f64 matmul section); BENCH_EPS is its unit roundoff. */
#ifdef BENCH_F64
typedef double bench_real;
#define BENCH_EPS 1.11e-16
#define BENCH_KIND_TYPE "_f64" /* what the kinds of RESULT lines end in */
#else
typedef float bench_real;
#define BENCH_EPS 5.96e-8
#ifdef BENCH_BF16 /* the matrices are bf16, checked as the floats they hold (tools/bench/mm_tsrc.c) */
#define BENCH_KIND_TYPE "_bf16"
#else
#define BENCH_KIND_TYPE ""
#endif
#endif
/* The rounding of a result cell into its type, relative to the cell (bf16: half of 2^-7). */
#ifdef BENCH_BF16
#define BENCH_RESULT_ROUNDING (1.0 / 256)
#else
#define BENCH_RESULT_ROUNDING 0.0
#endif

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Deterministic values in [-1, 1), the same for the C drivers (py_bench.py draws its own: the
 * values do not change the timing). */
static inline void bench_fill(bench_real *x, uint64_t count, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < count; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (bench_real)((double)(s >> 40) / (double)(1ull << 23) - 1.0);
    }
}

#ifndef BENCH_F64
/* bench_fill's values as half-type cells (bf16 or f16, uint16_t), each rounded by `to_half`
 * (tsr.h's tsr_f32_to_bf16 or tsr_f32_to_f16). */
static inline void bench_fill_half(uint16_t *x, uint64_t count, uint64_t seed, uint16_t (*to_half)(float)) {
    float *f = malloc(count * sizeof *f);
    if (!f) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    bench_fill(f, count, seed);
    for (uint64_t i = 0; i < count; i++) x[i] = to_half(f[i]);
    free(f);
}

/* The floats that half-type cells hold (`to_float`: tsr_bf16_to_f32 or tsr_f16_to_f32), in a
 * copy the caller frees. */
static inline float *bench_half_values(const uint16_t *x, uint64_t count, float (*to_float)(uint16_t)) {
    float *f = malloc(count * sizeof *f);
    if (!f) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    for (uint64_t i = 0; i < count; i++) f[i] = to_float(x[i]);
    return f;
}
#endif

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times run(ctx) after a warm-up run that took `warm` seconds, and writes the number of timed
 * runs, the best and the median seconds.  The policy: untimed runs for a tenth of `budget` (at
 * most 0.2 s: the second CPU of a VM that the previous process left idle runs slowly for a while
 * once woken), then repetitions for about `budget` seconds, at
 * least 5 and at most `max_reps`; when 5 would take over 10·budget, fewer (at least 1) to stay
 * near 10·budget; when the warm-up alone took over 10·budget, no more runs: the warm-up is the
 * figure (*reps = 1, reported as "one run only"). */
/* The GPU drivers' measurement (tools/bench/gpu/): `reps` launches, clamped to 3 … max_reps from
 * about a third of `budget` at `one` seconds a launch-and-wait, then one wait; the best of 3 such
 * trials, per launch, in *best.  launch() and wait() return 0, or nonzero to stop (the value is
 * returned, the caller says what failed). */
static inline int bench_gpu_measure(int (*launch)(void *), int (*wait)(void *), void *ctx, double one, double budget,
                                    int max_reps, int *reps, double *best) {
    int r = one > 0 ? (int)(budget / 3 / one) : max_reps;
    if (r < 3) r = 3;
    if (r > max_reps) r = max_reps;
    *reps = r;
    *best = INFINITY;
    for (int trial = 0; trial < 3; trial++) {
        double t0 = bench_now();
        for (int i = 0; i < r; i++) {
            int st = launch(ctx);
            if (st) return st;
        }
        int st = wait(ctx);
        if (st) return st;
        double t = (bench_now() - t0) / r;
        if (t < *best) *best = t;
    }
    return 0;
}

static inline void bench_measure(int (*run)(void *), void *ctx, double warm, double budget,
                                 int max_reps, int *reps, double *best, double *median) {
    if (warm > 10 * budget) { *reps = 1; *best = *median = warm; return; }
    int r = warm > 0 ? (int)(budget / warm) : max_reps;
    if (r < 5) r = 5;
    if (r > max_reps) r = max_reps;
    if (r * warm > 10 * budget) r = (int)(10 * budget / warm);
    if (r < 1) r = 1;
    double *t = malloc(sizeof *t * (size_t)r);
    if (!t) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    /* settle */
    double settle = budget / 10 < 0.2 ? budget / 10 : 0.2;
    for (double s0 = bench_now(); bench_now() - s0 < settle;)
        if (run(ctx) != 0) { fprintf(stderr, "bench: run failed\n"); exit(1); }
    for (int i = 0; i < r; i++) {
        double t0 = bench_now();
        if (run(ctx) != 0) { fprintf(stderr, "bench: run failed\n"); exit(1); }
        t[i] = bench_now() - t0;
    }
    qsort(t, (size_t)r, sizeof *t, bench_cmp);
    *reps = r;
    *best = t[0];
    *median = r % 2 ? t[r / 2] : 0.5 * (t[r / 2 - 1] + t[r / 2]);
    free(t);
}

/* Deterministic values in [lo, hi) from a counter: value i of stream `seed` is
 * lo + (hi - lo)·u, u = (splitmix64(seed·φ + i + 1) >> 40)·2^-24, computed in double and
 * rounded to float once.  tools/bench/py_train.py computes the same numbers with NumPy, so the
 * MLP benchmark feeds tsrc and PyTorch the same data and the same initial weights. */
static inline uint64_t bench_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* The class label of example n (0 … classes-1) that the MLP drivers and py_train.py give their
 * one-hot targets: stream 12 of bench_mix. */
static inline int bench_label(uint64_t n, int classes) {
    return (int)(bench_mix(12 * 0x9E3779B97F4A7C15ull + n + 1) % (uint64_t)classes);
}

static inline void bench_uniform(float *x, uint64_t count, uint64_t seed, double lo, double hi) {
    for (uint64_t i = 0; i < count; i++) {
        double u = (double)(bench_mix(seed * 0x9E3779B97F4A7C15ull + i + 1) >> 40) *
                   (1.0 / 16777216.0);
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

/* Checks C = op(A)·op(B) (n×n, row-major; op transposes when ta / tb is set: A(i,k) is
 * a[k·n + i] then) on `cells` cells spread over the matrix (always including the four corners)
 * against a double-precision dot product.  Returns the largest error relative to
 * sum |A_ik B_kj| and sets *ok when it is within float rounding of an n-term sum. */
static inline double bench_check_gemm(const bench_real *a, const bench_real *b, const bench_real *c, int64_t n,
                                      int ta, int tb, int cells, int *ok) {
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
            double p = (double)(ta ? a[k * n + i] : a[i * n + k]) *
                       (double)(tb ? b[j * n + k] : b[k * n + j]);
            ref += p; mag += fabs(p);
        }
        double err = fabs((double)c[i * n + j] - ref) / (mag > 0 ? mag : 1);
        if (isnan(err)) err = INFINITY;
        if (err > worst) worst = err;
    }
    /* a sum of n terms in any order is within n·eps of the exact value, relative to the sum of
     * magnitudes; allow twice that plus slack (a double-precision reference's own rounding when
     * the cells are doubles), plus the rounding of a bf16 result. */
    *ok = worst <= 2.0 * (double)n * BENCH_EPS + (sizeof(bench_real) == 8 ? 1e-13 : 1e-6) + BENCH_RESULT_ROUNDING;
    return worst;
}

/* C = A·B, neither transposed. */
static inline double bench_check_matmul(const bench_real *a, const bench_real *b, const bench_real *c, int64_t n,
                                        int cells, int *ok) {
    return bench_check_gemm(a, b, c, n, 0, 0, cells, ok);
}

/* A batch of `batch` products C[q] = A[q]·B[q], n×n each, stored one after the other: checks
 * the first and the last product and two between them, `cells` cells each. */
static inline double bench_check_bmm(const bench_real *a, const bench_real *b, const bench_real *c,
                                     int64_t batch, int64_t n, int cells, int *ok) {
    int64_t qs[4] = {0, batch / 3, (2 * batch) / 3, batch - 1};
    double worst = 0;
    *ok = 1;
    for (int t = 0; t < 4; t++) {
        int64_t off = qs[t] * n * n;
        int one;
        double e = bench_check_gemm(a + off, b + off, c + off, n, 0, 0, cells, &one);
        if (e > worst) worst = e;
        if (!one) *ok = 0;
    }
    return worst;
}

#endif
