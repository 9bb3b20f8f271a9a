/* triad.c — the STREAM triad a[i] = b[i] + s·c[i] on COUNT floats (16M in `make bench`), the
 * machine's memory bandwidth as a plain C loop sees it, measured in the same run as the
 * elementwise chain so that the chain's GB/s can be read as a fraction of it
 * (tools/bench/table.py).  The loop is split into THREADS contiguous blocks, one per thread
 * (the caller's thread included), like tsrc's parallel loops; stores are ordinary stores, as in
 * tsrc's generated code.  GB/s counts STREAM's 12 bytes per element (read b and c, write a).
 * Every element is checked.  Build: cc -O3 -march=native -ffp-contract=off -pthread.
 * Usage: triad COUNT BUDGET_SECONDS MAX_REPS THREADS. */
#include <pthread.h>

#include "common.h"

#define MAX_THREADS 64

typedef struct { float *a; const float *b, *c; float s; uint64_t lo, hi; } Part;
typedef struct { int threads; Part part[MAX_THREADS]; } Job;

static void triad(Part *p) {
    float *restrict a = p->a;
    const float *restrict b = p->b, *restrict c = p->c;
    float s = p->s;
    for (uint64_t i = p->lo; i < p->hi; i++) a[i] = b[i] + s * c[i];
}

static void *worker(void *p) { triad(p); return NULL; }

static int run(void *p) {
    Job *j = p;
    pthread_t th[MAX_THREADS];
    for (int t = 1; t < j->threads; t++)
        if (pthread_create(&th[t], NULL, worker, &j->part[t]) != 0) return 1;
    triad(&j->part[0]);
    for (int t = 1; t < j->threads; t++) pthread_join(th[t], NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: triad COUNT BUDGET MAX_REPS THREADS\n"); return 2; }
    uint64_t n = strtoull(argv[1], NULL, 10);
    double budget = atof(argv[2]);
    int max_reps = atoi(argv[3]), threads = atoi(argv[4]);
    if (threads < 1 || threads > MAX_THREADS) { fprintf(stderr, "triad: bad THREADS\n"); return 2; }
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes), *c = aligned_alloc(64, bytes);
    if (!a || !b || !c) { fprintf(stderr, "triad: out of memory\n"); return 1; }
    bench_fill(a, n, 4);
    bench_fill(b, n, 2);
    bench_fill(c, n, 3);
    Job j = {.threads = threads};
    uint64_t per = (n / (uint64_t)threads + 15) / 16 * 16; /* blocks of whole cache lines */
    for (int t = 0; t < threads; t++) {
        uint64_t lo = per * (uint64_t)t, hi = lo + per;
        if (lo > n) lo = n;
        if (hi > n || t == threads - 1) hi = n;
        j.part[t] = (Part){a, b, c, 3.0f, lo, hi};
    }
    double t0 = bench_now();
    if (run(&j) != 0) { fprintf(stderr, "triad: pthread_create failed\n"); return 1; }
    double warm = bench_now() - t0;
    double maxerr = 0;
    for (uint64_t i = 0; i < n; i++) {
        double err = fabs((double)a[i] - (double)(b[i] + 3.0f * c[i]));
        if (isnan(err)) err = INFINITY;
        if (err > maxerr) maxerr = err;
    }
    int ok = maxerr == 0;
    int reps;
    double best, median;
    bench_measure(run, &j, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=triad impl=c n=%llu threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", (unsigned long long)n, threads, reps, best, median,
           ok ? "ok" : "FAIL", maxerr);
    return ok ? 0 : 3;
}
