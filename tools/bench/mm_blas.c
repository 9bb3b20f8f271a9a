/* mm_blas.c — times cblas_sgemm (cblas_dgemm with -DBENCH_F64, its kinds ending in "_f64") (OpenBLAS) on the same data as the tsrc driver (mm_tsrc.c),
 * n×n, row-major, for each form of the matmul benchmark:
 *   nn   C = A·B      (CblasNoTrans, CblasNoTrans)   the spec form "i, k; k, j => i, j"
 *   nt   C = A·Bᵀ     (CblasNoTrans, CblasTrans)     the compose form y = w * x (A = x, B = w)
 *   tn   C = Aᵀ·B     (CblasTrans, CblasNoTrans)     the spec form "k, i; k, j => i, j"
 *   bmm  C[q] = A[q]·B[q] for q < BATCH: one cblas_sgemm per product, in a loop
 * Usage: mm_blas N BUDGET_SECONDS MAX_REPS THREADS [FORM [BATCH]]   (FORM defaults to nn).
 * Threads: OPENBLAS_NUM_THREADS (set by tools/bench.sh); THREADS is only reported. */
#include <cblas.h>
#include <string.h>

#include "common.h"

#ifdef BENCH_F64
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

typedef struct { int n, batch; enum CBLAS_TRANSPOSE ta, tb; bench_real *a, *b, *c; } Job;

static int run(void *p) {
    Job *j = p;
    size_t step = (size_t)j->n * (size_t)j->n;
    for (int q = 0; q < j->batch; q++)
        GEMM(CblasRowMajor, j->ta, j->tb, j->n, j->n, j->n, 1.0, j->a + q * step, j->n, j->b + q * step, j->n, 0.0,
             j->c + q * step, j->n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: mm_blas N BUDGET MAX_REPS THREADS [nn|nt|tn|bmm [BATCH]]\n");
        return 2;
    }
    Job j = {.n = atoi(argv[1]), .batch = 1, .ta = CblasNoTrans, .tb = CblasNoTrans};
    double budget = atof(argv[2]);
    int max_reps = atoi(argv[3]), threads = atoi(argv[4]);
    const char *form = argc > 5 ? argv[5] : "nn", *kind;
    if (!strcmp(form, "nn")) kind = "matmul";
    else if (!strcmp(form, "nt")) kind = "matmul_compose", j.tb = CblasTrans;
    else if (!strcmp(form, "tn")) kind = "matmul_tn", j.ta = CblasTrans;
    else if (!strcmp(form, "bmm") && argc > 6) kind = "bmm", j.batch = atoi(argv[6]);
    else { fprintf(stderr, "mm_blas: unknown form %s (or bmm without BATCH)\n", form); return 2; }
    size_t cells = (size_t)j.batch * (size_t)j.n * (size_t)j.n;
    j.a = aligned_alloc(64, cells * sizeof(bench_real));
    j.b = aligned_alloc(64, cells * sizeof(bench_real));
    j.c = aligned_alloc(64, cells * sizeof(bench_real));
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
    double maxrel = !strcmp(form, "bmm")
                        ? bench_check_bmm(j.a, j.b, j.c, j.batch, j.n, 64, &ok)
                        : bench_check_gemm(j.a, j.b, j.c, j.n, j.ta == CblasTrans,
                                           j.tb == CblasTrans, 256, &ok);
    int reps;
    double best, median;
    bench_measure(run, &j, warm, budget, max_reps, &reps, &best, &median);
    if (!strcmp(form, "bmm"))
        printf("RESULT kind=%s" BENCH_KIND_TYPE " impl=openblas n=%dx%d threads=%d reps=%d best_s=%.6g "
               "median_s=%.6g check=%s maxrel=%.3g\n", kind, j.batch, j.n, threads, reps, best,
               median, ok ? "ok" : "FAIL", maxrel);
    else
        printf("RESULT kind=%s" BENCH_KIND_TYPE " impl=openblas n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g "
               "check=%s maxrel=%.3g\n", kind, j.n, threads, reps, best, median,
               ok ? "ok" : "FAIL", maxrel);
    return ok ? 0 : 3;
}
