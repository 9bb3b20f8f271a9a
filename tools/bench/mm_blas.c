/* mm_blas.c — times cblas_sgemm (OpenBLAS) for C = A·B, n×n, row-major, on the same data as
 * the tsrc driver.  Usage: mm_blas N BUDGET_SECONDS MAX_REPS THREADS.
 * Threads: OPENBLAS_NUM_THREADS (set by tools/bench.sh); THREADS is only reported. */
#include <cblas.h>

#include "common.h"

typedef struct { int n; float *a, *b, *c; } Job;

static int run(void *p) {
    Job *j = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->n, j->n, j->n, 1.0f, j->a, j->n,
                j->b, j->n, 0.0f, j->c, j->n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: mm_blas N BUDGET MAX_REPS THREADS\n"); return 2; }
    Job j = {.n = atoi(argv[1])};
    double budget = atof(argv[2]);
    int max_reps = atoi(argv[3]), threads = atoi(argv[4]);
    size_t cells = (size_t)j.n * (size_t)j.n;
    j.a = aligned_alloc(64, cells * sizeof(float));
    j.b = aligned_alloc(64, cells * sizeof(float));
    j.c = aligned_alloc(64, cells * sizeof(float));
    if (!j.a || !j.b || !j.c) { fprintf(stderr, "mm_blas: out of memory\n"); return 1; }
    printf("INFO OpenBLAS: %s; kernels %s\n", openblas_get_config(), openblas_get_corename());
    if (openblas_get_num_threads() != threads)
        printf("INFO OpenBLAS: warning: asked for %d threads, runs %d\n", threads,
               openblas_get_num_threads());
    bench_fill(j.a, cells, 1);
    bench_fill(j.b, cells, 2);
    double t0 = bench_now();
    run(&j);
    double warm = bench_now() - t0;
    int ok;
    double maxrel = bench_check_matmul(j.a, j.b, j.c, j.n, 256, &ok);
    int reps;
    double best, median;
    bench_measure(run, &j, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=matmul impl=openblas n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", j.n, threads, reps, best, median, ok ? "ok" : "FAIL", maxrel);
    return ok ? 0 : 3;
}
