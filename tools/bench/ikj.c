/* ikj.c — not part of `make bench`: the loop nest tsrc generates for the matmul benchmark,
 * written in C, to see what a C compiler makes of the same loop order (docs/performance.md,
 * "Where the time goes").  Row i of c is zeroed, then updated in place for each k; each cell
 * sums its products in the order k = 0 … n-1, as tsrc's code does.
 *
 *   cc -O3 -march=native -mprefer-vector-width=512 -ffp-contract=off tools/bench/ikj.c -o /tmp/ikj
 *   /tmp/ikj 256
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct { int n; float *a, *b, *c; } Job;

static int run(void *p) {
    Job *m = p;
    int n = m->n;
    for (int i = 0; i < n; i++) {
        float *restrict c = m->c + (size_t)i * n;
        memset(c, 0, sizeof *c * (size_t)n);
        for (int k = 0; k < n; k++) {
            float s = m->a[(size_t)i * n + k];
            const float *restrict b = m->b + (size_t)k * n;
            for (int j = 0; j < n; j++) c[j] += s * b[j];
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    Job m = {.n = argc > 1 ? atoi(argv[1]) : 256};
    size_t cells = (size_t)m.n * (size_t)m.n;
    m.a = aligned_alloc(64, cells * sizeof(float));
    m.b = aligned_alloc(64, cells * sizeof(float));
    m.c = aligned_alloc(64, cells * sizeof(float));
    if (!m.a || !m.b || !m.c) return 1;
    bench_fill(m.a, cells, 1);
    bench_fill(m.b, cells, 2);
    double t0 = bench_now();
    run(&m);
    double warm = bench_now() - t0;
    int ok, reps;
    double maxrel = bench_check_matmul(m.a, m.b, m.c, m.n, 256, &ok), best, median;
    bench_measure(run, &m, warm, 1.0, 200, &reps, &best, &median);
    printf("RESULT kind=matmul impl=c-ikj n=%d threads=1 reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", m.n, reps, best, median, ok ? "ok" : "FAIL", maxrel);
    printf("C i-k-j loop, n = %d: %.1f GFLOP/s\n", m.n, 2.0 * m.n * m.n * (double)m.n / best / 1e9);
    return !ok;
}
